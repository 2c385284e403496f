/* forward: the transformer over a multi-sequence batch (see forward.h):
 * scratch, batch checks, window masks and the pass; the stages are in
 * layer.c (one layer), attention.c and matmul.c (forward_impl.h).
 *
 * Per layer: [norm] -> Q/K/V (one parallel step) -> [q/k norm] -> RoPE ->
 * K/V into the paged cache -> causal attention per (token, head) -> output
 * projection -> [post-norm] + residual -> [norm] -> gate/up (one step) ->
 * SwiGLU / GeGLU -> down -> [post-norm] + residual, as the architecture's
 * row of arch.c says. */
#include "model/forward_impl.h"
#include "kv/policy.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void brisk_forward_set_window(brisk_forward *f, int32_t window, int32_t sink) {
    f->window = window;
    f->sink = window > 0 ? sink : 0;
    /* the model's windowed layers keep their own window, or this one when it is tighter */
    const int32_t w = f->m->hp.swa_window;
    const bool ctx_tighter = f->window > 0 && f->window < w;
    f->window_swa = ctx_tighter ? f->window : w;
    f->sink_swa = ctx_tighter ? f->sink : 0;
}

/* ---- init ----------------------------------------------------------------------------- */

static void *xcalloc_track(brisk_forward *f, size_t n, size_t sz, bool *ok) {
    size_t bytes;
    if (!brisk_mul_size(n, sz, &bytes) || !brisk_add_size(f->bytes, bytes, &f->bytes)) {
        *ok = false;
        return NULL;
    }
    if (f->dry) return NULL;
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) *ok = false;
    return p;
}

/* Every scratch buffer, sized from f's model, batch, context and thread
 * count. With f->dry set it only adds up f->bytes, so the plan and the
 * allocation cannot disagree. False when a size overflows or (not dry) an
 * allocation fails; f's buffers are then freed by brisk_forward_free. */
static bool alloc_scratch(brisk_forward *f) {
    const brisk_hparams *hp = &f->m->hp;
    bool ok = true;
    const size_t nb = (size_t)f->n_batch;
    /* g, u and the quantized inputs also hold one row per chosen expert of a
     * decode token (layer.c's moe_decode_experts), whatever the batch size */
    const size_t nbe = hp->n_expert && (size_t)hp->n_expert_used > nb ? (size_t)hp->n_expert_used : nb;
    f->x = xcalloc_track(f, nb * (size_t)hp->n_embd, sizeof(float), &ok);
    f->xn = xcalloc_track(f, nb * (size_t)f->maxdim, sizeof(float), &ok);
    f->q = xcalloc_track(f, nb * (size_t)f->qdim, sizeof(float), &ok);
    f->kc = xcalloc_track(f, nb * (size_t)f->kvdim, sizeof(float), &ok);
    f->vc = xcalloc_track(f, nb * (size_t)f->vdim, sizeof(float), &ok);
    f->att = xcalloc_track(f, nb * (size_t)f->odim, sizeof(float), &ok);
    if (hp->mla) {
        const size_t rank = (size_t)hp->n_lora_kv, nope = (size_t)(hp->mla_head_k - hp->rope.n_rot);
        if (hp->n_lora_q > 0) f->mla_qa = xcalloc_track(f, nb * (size_t)hp->n_lora_q, sizeof(float), &ok);
        f->mla_q = xcalloc_track(f, nb * (size_t)hp->n_head * (size_t)hp->mla_head_k, sizeof(float), &ok);
        f->mla_hin = xcalloc_track(f, nb * BRISK_MAX(rank, nope), sizeof(float), &ok);
        f->mla_hout = xcalloc_track(f, nb * BRISK_MAX(rank, (size_t)hp->mla_head_v), sizeof(float), &ok);
        f->mla_o = xcalloc_track(f, nb * (size_t)hp->n_head * (size_t)hp->mla_head_v, sizeof(float), &ok);
    }
    const size_t ffm = (size_t)brisk_fwd_ff_max(hp);
    f->g = xcalloc_track(f, nbe * ffm, sizeof(float), &ok);
    f->u = xcalloc_track(f, nbe * ffm * (hp->fused_up ? 2 : 1), sizeof(float), &ok);
    if (hp->n_expert > 0) {
        const size_t ku = nb * (size_t)hp->n_expert_used, d = (size_t)hp->n_embd;
        f->moe_logits = xcalloc_track(f, nb * (size_t)hp->n_expert, sizeof(float), &ok);
        f->moe_sel = xcalloc_track(f, ku, sizeof(int32_t), &ok);
        f->moe_w = xcalloc_track(f, ku, sizeof(float), &ok);
        f->moe_start = xcalloc_track(f, (size_t)hp->n_expert + 1, sizeof(int32_t), &ok);
        f->moe_list = xcalloc_track(f, ku, sizeof(int32_t), &ok);
        f->moe_x = xcalloc_track(f, nb * d, sizeof(float), &ok);
        f->moe_y = xcalloc_track(f, nb * d, sizeof(float), &ok);
        f->moe_out = xcalloc_track(f, ku * d, sizeof(float), &ok);
    }
    if (hp->fused_qkv) f->qkv = xcalloc_track(f, nb * (size_t)f->qkv_dim, sizeof(float), &ok);
    if (hp->swa_window) {
        f->vsink_swa = xcalloc_track(f, nb, sizeof(int32_t), &ok);
        f->vlo_swa = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    }
    if (hp->ai->act == BRISK_ACT_GEGLU || hp->ai->act == BRISK_ACT_GELU) f->gelu_lut = xcalloc_track(f, 65536, sizeof(float), &ok);
    if (f->rope_swa.freq_base != f->rope.freq_base || f->rope_swa.freq_scale != f->rope.freq_scale)
        f->rope_cache_swa = xcalloc_track(f, nb * (size_t)hp->rope.n_rot, sizeof(float), &ok);
    f->xq_cap = nbe * ((size_t)f->maxdim * sizeof(float) + 64);   /* F32 is the widest activation format */
    for (int i = 0; i < MM_MAX_JOBS; i++) f->xq[i] = xcalloc_track(f, f->xq_cap, 1, &ok);
    f->xs_stride = (size_t)brisk_act_sums_len(f->maxdim);
    for (int i = 0; i < MM_MAX_JOBS; i++) f->xs[i] = f->gk ? xcalloc_track(f, nbe * f->xs_stride + 1, sizeof(int32_t), &ok) : NULL;
    f->rope_cache = xcalloc_track(f, nb * (size_t)hp->rope.n_rot, sizeof(float), &ok);
    f->f16_lut = xcalloc_track(f, 65536, sizeof(float), &ok);
    f->slot = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->par = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->tbase = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->direct = xcalloc_track(f, nb, 1, &ok);
    f->observe = xcalloc_track(f, nb, 1, &ok);
    f->wave = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->vis = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->vsink = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->vlo = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->bytes += (size_t)f->n_threads * sizeof *f->ranges;
    if (!f->dry) {
        f->ranges = aligned_alloc(64, (size_t)f->n_threads * sizeof *f->ranges);
        if (!f->ranges) ok = false;
    }
    f->anc = xcalloc_track(f, (size_t)f->n_threads * nb, sizeof(int32_t), &ok);
    f->kgather = xcalloc_track(f, (size_t)f->n_threads * 16, (size_t)hp->head_dim * sizeof(uint16_t), &ok);
    f->hyb_hs_cap = brisk_kv_hyb_cap(f->n_ctx);   /* small (5% of the context per head), so every context plans it */
    f->hyb_hs = xcalloc_track(f, (size_t)f->n_threads * ATTN_HEADS, (size_t)f->hyb_hs_cap * sizeof(float), &ok);
    f->split_o = xcalloc_track(f, (size_t)f->n_threads * ATTN_HEADS, (size_t)hp->head_dim_v * sizeof(float), &ok);
    /* split items need room for every split of ATTN_SPLIT_TOKENS tokens: for
     * llama-3.2-1b at n_ctx 131072, 4 x 32 heads x 128 splits x 66 floats (4.3 MB) */
    const int32_t splits = (int32_t)(((int64_t)f->n_ctx + f->attn_split - 1) / f->attn_split);
    f->split_cap = f->n_threads > 1 && splits > 1 ? BRISK_MIN(splits, ATTN_SPLIT_CAP) : 0;
    if (f->split_cap)
        f->split_part = xcalloc_track(f, (size_t)ATTN_SPLIT_TOKENS * (size_t)hp->n_head * (size_t)f->split_cap, (size_t)(hp->head_dim_v + 2) * sizeof(float),
                                      &ok);
    f->q8_codes = xcalloc_track(f, (size_t)f->n_threads * ATTN_HEADS, (size_t)hp->head_dim * sizeof(int16_t), &ok);
    f->q8_scales = xcalloc_track(f, (size_t)f->n_threads * ATTN_HEADS, (size_t)(hp->head_dim / 32 + 1) * sizeof(float), &ok);
    if (nb > 1) {   /* at most 4096 positions: 8 MiB for 8 KV heads of 64 */
        f->kt_cap = f->n_ctx < 4096 ? f->n_ctx : 4096;
        /* An odd number of 64-byte lines from row to row: the kernels walk
         * kt down a column (one line per dimension), and with a 4 KiB-multiple
         * stride (n_ctx 1024, 4096) every line fell in one L1 set. */
        f->kt_stride = (f->kt_cap + 15) / 16 * 16;
        if ((f->kt_stride / 16) % 2 == 0) f->kt_stride += 16;
        f->kt = xcalloc_track(f, (size_t)f->kt_stride * (size_t)f->kvdim, sizeof(float), &ok);
    }
    return ok;
}

/* Entries per attention split: ATTN_SPLIT, or BRISK_ATTN_SPLIT (tests), a
 * positive multiple of ATTN_TILE; -1 when that variable is not one. */
static int32_t attn_split_size(void) {
    const char *env = getenv("BRISK_ATTN_SPLIT");
    if (!env) return ATTN_SPLIT;
    char *end = NULL;
    const long v = strtol(env, &end, 10);
    return end != env && !*end && v >= ATTN_TILE && v <= (1L << 30) && v % ATTN_TILE == 0 ? (int32_t)v : -1;
}

/* The fields alloc_scratch reads, from the model and the context's limits. */
static void scratch_shape(brisk_forward *f, const brisk_model_data *m, int32_t n_batch, int32_t n_ctx) {
    const brisk_hparams *hp = &m->hp;
    f->m = m;
    f->attn_split = attn_split_size() > 0 ? attn_split_size() : ATTN_SPLIT;
    f->gk = brisk_gemm_best();
    f->n_batch = n_batch;
    f->n_ctx = n_ctx;
    f->qdim = hp->n_head * hp->head_dim;
    f->kvdim = hp->n_head_kv * hp->head_dim;
    f->vdim = hp->n_head_kv * hp->head_dim_v;
    f->odim = hp->n_head * hp->head_dim_v;
    f->maxdim = BRISK_MAX(BRISK_MAX(hp->n_embd, brisk_fwd_ff_max(hp)), f->qdim);
    if (hp->mla)   /* the inputs of wq_b, attn_v_b and attn_output are matmul inputs too */
        f->maxdim = BRISK_MAX(BRISK_MAX(f->maxdim, hp->n_lora_q), BRISK_MAX(hp->n_lora_kv, hp->n_head * hp->mla_head_v));
    f->qkv_dim = f->qdim + 2 * f->kvdim;
    /* LongRoPE (phi3): the long factors when this context reaches past the original length, as llama.cpp */
    f->rope = hp->rope;
    f->rope_swa = hp->rope_swa;
    if (hp->rope_long && n_ctx > hp->rope_n_ctx_orig) f->rope.freq_factors = f->rope_swa.freq_factors = hp->rope_long;
}

bool brisk_forward_plan(const brisk_model_data *m, int32_t n_batch, int32_t n_ctx, int n_threads, size_t *bytes) {
    brisk_forward f = {.dry = true, .n_threads = n_threads};
    if (n_batch < 1 || n_threads < 1) return false;
    scratch_shape(&f, m, n_batch, n_ctx);
    if (!alloc_scratch(&f)) return false;
    *bytes = f.bytes;
    return true;
}

brisk_status brisk_forward_init(brisk_forward **out, const brisk_model_data *m, int32_t n_batch, int32_t n_ctx,
                                int n_threads, brisk_error *err) {
    *out = NULL;
    const brisk_hparams *hp = &m->hp;
    if (n_batch < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch size %d must be positive", n_batch);
    if (hp->head_dim > 4096) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "head_dim %d > 4096", hp->head_dim);
    brisk_status ist = brisk_isa_check(err);
    if (ist) return ist;
    brisk_forward *f = calloc(1, sizeof *f);
    if (!f) return brisk_fail(err, BRISK_ERR_NOMEM, "forward: out of memory");
    scratch_shape(f, m, n_batch, n_ctx);
    f->k = brisk_kernels_best();
    f->ak = brisk_attn_best();
    f->exp_sub = f->gk && f->gk->exp_sub ? f->gk->exp_sub : f->k->exp_sub;
    f->swiglu = f->gk && f->gk->swiglu ? f->gk->swiglu : f->k->swiglu;
    if (f->gk) snprintf(f->isa_name, sizeof f->isa_name, "%s+%s-gemm", f->k->isa, f->gk->isa);
    else snprintf(f->isa_name, sizeof f->isa_name, "%s", f->k->isa);
    f->min_parallel_macs = PARALLEL_MIN_MACS;
    const char *min_env = getenv("BRISK_PARALLEL_MIN_MACS");
    if (min_env) {
        char *end = NULL;
        const double v = strtod(min_env, &end);
        if (end == min_env || *end || !(v >= 0.0)) {
            free(f);
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "BRISK_PARALLEL_MIN_MACS='%s' is not a non-negative number", min_env);
        }
        f->min_parallel_macs = v;
    }
    const char *pass_env = getenv("BRISK_MM_PASS_KIB");
    if (pass_env) {
        char *end = NULL;
        const long long v = strtoll(pass_env, &end, 10);
        if (end == pass_env || *end || v < 1 || v > (1LL << 30)) {
            free(f);
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "BRISK_MM_PASS_KIB='%s' is not a positive number of KiB", pass_env);
        }
        f->mm_pass_bytes = (int64_t)v * 1024;
    }
    if (attn_split_size() < 0) {
        free(f);
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "BRISK_ATTN_SPLIT='%s' is not a positive multiple of %d", getenv("BRISK_ATTN_SPLIT"), ATTN_TILE);
    }
    brisk_status st = brisk_pool_acquire(&f->pool, n_threads, err);   /* shared with the process's other contexts */
    if (st) {
        free(f);
        return st;
    }
    f->n_threads = brisk_pool_size(f->pool);
    /* every matmul's weights must have a kernel in the table */
    for (int il = 0; il < hp->n_layer; il++) {
        const brisk_layer *L = &m->w.layers[il];
        const brisk_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->wqkv,
                                    &L->moe.router, &L->moe.sh_gate, &L->moe.sh_up, &L->moe.sh_down,
                                    L->moe.gate, L->moe.up, L->moe.down,   /* every expert has its tensor's type */
                                    &L->wq_a, &L->wq_b, &L->wkv_a, L->wk_b, L->wv_b};   /* and every head */
        for (size_t i = 0; i < BRISK_ARRAY_LEN(ws); i++)
            if (ws[i] && ws[i]->data && (!f->k->vec_dot[ws[i]->type] || !f->k->quantize_act[brisk_qtype_get(ws[i]->type)->act_type])) {
                brisk_forward_free(f);
                return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "blk.%d: no kernel for weight type %s", il, brisk_qtype_name(ws[i]->type));
            }
    }
    if (!f->k->vec_dot[m->w.output.type] || !brisk_qtype_to_float(m->w.tok_embd.type)) {
        brisk_forward_free(f);
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "no kernel for output/embedding type %s", brisk_qtype_name(m->w.output.type));
    }
    if (!alloc_scratch(f)) {
        brisk_forward_free(f);
        return brisk_fail(err, BRISK_ERR_NOMEM, "forward: cannot allocate scratch for batch %d", n_batch);
    }
    for (uint32_t h = 0; h < 65536; h++) f->f16_lut[h] = brisk_fp16_to_fp32((uint16_t)h);
    if (f->gelu_lut)   /* ggml_table_gelu_f16: the tanh GELU of every F16 value, rounded to F16 */
        for (uint32_t h = 0; h < 65536; h++) {
            const float x = f->f16_lut[h];
            const float y = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
            f->gelu_lut[h] = brisk_fp16_to_fp32(brisk_fp32_to_fp16(y));
        }
    brisk_forward_set_window(f, 0, 0);
    *out = f;
    return BRISK_OK;
}

void brisk_forward_free(brisk_forward *f) {
    if (!f) return;
    brisk_pool_release(f->pool);
    free(f->x); free(f->xn); free(f->q); free(f->kc); free(f->vc); free(f->att); free(f->g); free(f->u);
    free(f->mla_qa); free(f->mla_q); free(f->mla_hin); free(f->mla_hout); free(f->mla_o);
    for (int i = 0; i < MM_MAX_JOBS; i++) {
        free(f->xq[i]);
        free(f->xs[i]);
    }
    free(f->rope_cache); free(f->f16_lut); free(f->kt);
    free(f->qkv); free(f->vsink_swa); free(f->vlo_swa); free(f->gelu_lut); free(f->rope_cache_swa);
    free(f->moe_logits); free(f->moe_sel); free(f->moe_w); free(f->moe_start); free(f->moe_list); free(f->moe_x); free(f->moe_y); free(f->moe_out);
    free(f->slot); free(f->par); free(f->tbase); free(f->direct); free(f->observe); free(f->wave); free(f->vis); free(f->vsink); free(f->vlo); free(f->anc); free(f->ranges); free(f->kgather); free(f->hyb_hs); free(f->q8_codes); free(f->q8_scales);
    free(f->split_o); free(f->split_part);
    free(f);
}

size_t brisk_forward_bytes(const brisk_forward *f) { return f->bytes; }
const brisk_kernels *brisk_forward_kernels(const brisk_forward *f) { return f->k; }

const char *brisk_forward_isa(const brisk_forward *f) { return f->isa_name; }

const brisk_rope *brisk_forward_layer_rope(const brisk_forward *f, int32_t il) {
    const brisk_layer *L = &f->m->w.layers[il];
    if (!L->rope) return NULL;
    return L->rope_swa ? &f->rope_swa : &f->rope;
}

/* ---- the pass ---------------------------------------------------------------------------- */

/* Checks every token and fills f->slot/par/tbase/direct (see brisk_forward).
 * With defer_capacity a slot past the context is not refused yet: a retention
 * policy is about to make room, and the check runs again after it. */
static brisk_status validate_batch(brisk_forward *f, const brisk_kv *kv, const brisk_fwd_batch *b, bool defer_capacity, brisk_error *err) {
    const brisk_hparams *hp = &f->m->hp;
    if (b->n < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "empty batch");
    if (b->n > f->n_batch)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "batch of %d tokens exceeds the batch size %d", b->n, f->n_batch);
    for (int32_t i = 0; i < b->n; i++) {
        if (b->token[i] < 0 || b->token[i] >= hp->n_vocab)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: id %d out of range [0, %d)", i, b->token[i], hp->n_vocab);
        if (b->seq[i] < 0 || b->seq[i] >= brisk_kv_n_seq(kv))
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: sequence id %d out of range [0, %d)", i, b->seq[i],
                              brisk_kv_n_seq(kv));
        const int32_t len = brisk_kv_len(kv, b->seq[i]), ordered = brisk_kv_ordered(kv, b->seq[i]);
        if (ordered != len)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                              "batch token %d: sequence %d still holds the token tree of an earlier decode (slots %d..%d); "
                              "keep one path of it (brisk_seq_keep_path) or truncate it first",
                              i, b->seq[i], ordered, len - 1);
        /* the token's rank among its sequence's tokens in this batch gives its KV slot */
        int32_t rank = 0, prev = -1;
        for (int32_t j = 0; j < i; j++)
            if (b->seq[j] == b->seq[i]) {
                rank++;
                prev = j;
            }
        int32_t par = prev;
        if (b->parent) {
            par = b->parent[i];
            if (par < -1 || par >= i)
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: parent %d out of range [-1, %d)", i, par, i);
            if (par >= 0 && b->seq[par] != b->seq[i])
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: parent %d belongs to sequence %d, not %d", i, par,
                                  b->seq[par], b->seq[i]);
        }
        const int32_t expect = par < 0 ? brisk_kv_next_pos(kv, b->seq[i]) : b->pos[par] + 1;
        if (b->pos[i] != expect) {
            if (b->parent && par >= 0)
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: position %d, but its parent (token %d at position %d) needs %d",
                                  i, b->pos[i], par, b->pos[par], expect);
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: position %d, but sequence %d continues at %d",
                              i, b->pos[i], b->seq[i], expect);
        }
        const int32_t slot = len + rank, n_ctx = brisk_kv_n_ctx(kv);
        if (slot >= n_ctx && !defer_capacity) {
            if (slot != b->pos[i])
                return brisk_fail(err, BRISK_ERR_CAPACITY, "batch token %d: its KV slot %d (position %d) exceeds the context size %d", i,
                                  slot, b->pos[i], n_ctx);
            return brisk_fail(err, BRISK_ERR_CAPACITY, "batch token %d: position %d exceeds the context size %d", i, b->pos[i], n_ctx);
        }
        f->slot[i] = slot;
        f->par[i] = par;
        f->tbase[i] = len;
        f->vis[i] = par < 0 ? len : f->vis[par] + 1;
        /* its slot is its visible index, and so are its ancestors': the entries
         * it attends to are slots 0.. vis in order (a chain) */
        f->direct[i] = slot == f->vis[i] && (par < 0 || f->direct[par]);
        if (kv->hyb && !f->direct[i])   /* a branch's queries would rank the hot rows for the path that is kept too */
            return brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                              "batch token %d: a token tree (a second branch of sequence %d) is not supported with a %s cache: its hot "
                              "rows are ranked by the attention of every query in position order",
                              i, b->seq[i], brisk_kv_hyb_name(kv));
    }
    return BRISK_OK;
}

/* How many of token t's visible entries (see brisk_forward.vis) have a
 * position below p: the cached slots' recorded positions increase with the
 * slot (binary search), and its in-batch entries (ancestors, itself) hold
 * consecutive positions ending at its own. */
static int32_t entries_below(const brisk_kv *kv, const brisk_forward *f, const brisk_fwd_batch *b, int32_t t, int32_t p) {
    const int32_t seq = b->seq[t], n_cached = f->tbase[t];
    int32_t lo = 0, hi = n_cached;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (brisk_kv_slot_pos(kv, seq, mid) < p) lo = mid + 1;
        else hi = mid;
    }
    if (lo < n_cached) return lo;
    const int32_t first = b->pos[t] - (f->vis[t] - n_cached);   /* the position of entry n_cached */
    return n_cached + BRISK_MAX(0, BRISK_MIN(p - first, f->vis[t] - n_cached + 1));
}

/* Windowed attention's mask per token, from positions to visible entries:
 * positions sink .. window_lo - 1 are masked. */
static void window_masks(const brisk_forward *f, const brisk_kv *kv, const brisk_fwd_batch *b, int32_t window, int32_t sink,
                         int32_t *vsink, int32_t *vlo) {
    for (int32_t t = 0; t < b->n; t++) {
        if (window <= 0) {
            vsink[t] = vlo[t] = 0;
            continue;
        }
        vsink[t] = entries_below(kv, f, b, t, sink);
        vlo[t] = entries_below(kv, f, b, t, b->pos[t] - window + 1);
    }
}

static void set_window_masks(brisk_forward *f, const brisk_kv *kv, const brisk_fwd_batch *b) {
    window_masks(f, kv, b, f->window, f->sink, f->vsink, f->vlo);
    if (f->vsink_swa) window_masks(f, kv, b, f->window_swa, f->sink_swa, f->vsink_swa, f->vlo_swa);
}

brisk_status brisk_forward_run(brisk_forward *f, brisk_kv *kv, const brisk_fwd_batch *b, float *out, brisk_error *err) {
    /* the retention policy (kv/policy.h) cuts sequences the batch would take
     * past their budget; their slots moved, so the batch's are found again
     * (and only then can a slot be said not to fit the context) */
    const bool policy = kv->policy != NULL;
    brisk_status st = validate_batch(f, kv, b, policy, err);
    if (st) return st;
    bool evicted = false;
    if ((st = brisk_kv_policy_make_room(kv, b->seq, b->n, &evicted, err))) return st;
    if (policy && (st = validate_batch(f, kv, b, false, err))) return st;
    /* every sequence's slots, all or nothing, before touching anything (shared
     * blocks the batch writes into are copied here) */
    if ((st = brisk_kv_reserve_batch(kv, b->seq, f->slot, b->n, err))) return st;
    brisk_kv_batch_order(kv, b->seq, f->slot, f->direct, b->n);   /* k4/k2 K: which blocks the batch seals (kv.h) */
    set_window_masks(f, kv, b);
    /* hyb: every query's attention ranks the hot rows (kv/hyb.c) */
    for (int32_t t = 0; t < b->n; t++) f->observe[t] = f->direct[t] && (kv->hyb || brisk_kv_policy_observes(kv, b->seq[t], f->slot[t]));
    if (kv->hyb) {   /* the waves: each token's block from its sequence's first in the batch (kv->want: reserve's scratch) */
        for (int32_t t = 0; t < b->n; t++) kv->want[b->seq[t]] = INT32_MAX;
        for (int32_t t = 0; t < b->n; t++) kv->want[b->seq[t]] = BRISK_MIN(kv->want[b->seq[t]], f->slot[t] / BRISK_KV_BLOCK);
        for (int32_t t = 0; t < b->n; t++) f->wave[t] = f->slot[t] / BRISK_KV_BLOCK - kv->want[b->seq[t]];
        for (int32_t t = 0; t < b->n; t++) kv->want[b->seq[t]] = 0;
    }

    const brisk_hparams *hp = &f->m->hp;
    brisk_fwd_embed(f, b);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const brisk_layer *L = &f->m->w.layers[il];
        brisk_fwd_attention_block(f, kv, b, il, L);
        brisk_fwd_ffn_block(f, L, b->n);
    }

    /* the sequences now hold these tokens (their ids and positions recorded
     * per slot); they stay in position order up to the first token that is
     * not at slot == position */
    for (int32_t t = 0; t < b->n; t++) brisk_kv_written(kv, b->seq[t], f->slot[t], b->token[t], b->pos[t], f->direct[t]);
    brisk_fwd_logits(f, b, out);
    return BRISK_OK;
}

/* brisk_fwd_logits leaves the normed rows in xn (the output matmul reads them, writes out) */
const float *brisk_forward_hidden(const brisk_forward *f) { return f->xn; }
