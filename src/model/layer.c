/* layer: the stages of one transformer layer as the architecture table and
 * the file's optional tensors ask (norms before and/or after each sublayer,
 * fused or separate projections with their scales and biases, Q/K norms,
 * RoPE or NoPE, SwiGLU / GeGLU / GELU, residual scales), the embeddings and
 * the logits (scales, softcap). */
#include "model/forward_impl.h"
#include "quant/quant.h"

#include <math.h>
#include <string.h>

/* llama.cpp's GELU (ggml_vec_geglu_f32 with GGML_GELU_FP16): 0 below -10,
 * the identity above 10, else the tanh GELU of x rounded to F16, looked up
 * in a table whose entries are rounded to F16 too. */
static void geglu_row(const float *lut, float *h, const float *g, const float *u, int64_t n) {
    if (!u) {   /* GELU without a gate (ggml_vec_gelu_f32) */
        for (int64_t i = 0; i < n; i++) {
            const float x = g[i];
            h[i] = x <= -10.0f ? 0.0f : x >= 10.0f ? x : lut[brisk_fp32_to_fp16(x)];
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        h[i] = x <= -10.0f ? 0.0f : x >= 10.0f ? x * u[i] : lut[brisk_fp32_to_fp16(x)] * u[i];
    }
}

/* gpt-oss's clamped SwiGLU, as ggml's swiglu_oai: x = min(g, limit), y =
 * clamp(u, -limit, limit) (std::min / std::clamp: a NaN gate stays NaN),
 * then x / (1 + exp(alpha * -x)) * (y + 1). h may be g. */
static void swiglu_oai_row(float *h, const float *g, const float *u, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; i++) {
        const float x = limit < g[i] ? limit : g[i];
        const float y = u[i] < -limit ? -limit : limit < u[i] ? limit : u[i];
        const float glu = x / (1.0f + brisk_expf(alpha * -x));
        h[i] = glu * (y + 1.0f);
    }
}

void brisk_fwd_swiglu_worker(void *ctx, int ith, int nth) {
    const swiglu_task *t = ctx;
    int64_t lo, hi;
    brisk_split_range(t->rows, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        float *h = t->h + r * t->n;
        const float *g = t->g + r * t->g_stride, *u = t->u ? t->u + r * t->g_stride : NULL;
        if (t->gelu_lut) geglu_row(t->gelu_lut, h, g, u, t->n);
        else if (t->oai_limit > 0.0f) swiglu_oai_row(h, g, u, t->n, t->oai_alpha, t->oai_limit);
        else t->fn(h, g, u, t->n);
    }
}
/* ---- layer stages ---------------------------------------------------------------------- */

static void scale_rows(float *x, int64_t n, float s) {
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

/* y[r][i] += b[i] for rows of n (stride n); nothing when b is NULL. */
static void add_bias_rows(float *y, int32_t rows, int64_t n, const float *b) {
    if (!b) return;
    for (int32_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) y[(size_t)r * (size_t)n + (size_t)i] += b[i];
}

/* x becomes c * tanh(x / c), as llama.cpp's final-logit softcap (scale by 1/c, tanh, scale by c). */
static void softcap_rows(float *x, int64_t n, float c) {
    const float inv = 1.0f / c;
    for (int64_t i = 0; i < n; i++) x[i] = c * tanhf(x[i] * inv);
}

/* A projection's optional per-tensor scale and bias over rows of n outputs
 * (stride apart), in llama.cpp's order: attention projections and the
 * logits scale first (build_lora_mm), the FFN matrices add the bias first. */
static void affine_rows(float *y, int32_t rows, int64_t n, int64_t stride, const void *bias, brisk_wscale s, bool bias_first) {
    const float *bv = bias;
    if (!bv && !s.on) return;
    for (int32_t t = 0; t < rows; t++) {
        float *r = y + (size_t)t * (size_t)stride;
        if (bias_first && bv)
            for (int64_t i = 0; i < n; i++) r[i] += bv[i];
        if (s.on)
            for (int64_t i = 0; i < n; i++) r[i] *= s.v;
        if (!bias_first && bv)
            for (int64_t i = 0; i < n; i++) r[i] += bv[i];
    }
}

/* LayerNorm as ggml_norm: the mean (a double sum, rounded to float), the
 * centred values, their mean square (a double sum), then the scale. */
static void layernorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i];
    const float mean = (float)sum / (float)n;
    double var = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float c = x[i] - mean;
        out[i] = c;
        var += (double)(c * c);
    }
    const float scale = 1.0f / sqrtf((float)(var / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) out[i] *= scale;
    if (w)
        for (int64_t i = 0; i < n; i++) out[i] *= w[i];
}

/* The architecture's norm of one row (RMSNorm, or LayerNorm), then the optional norm bias. */
static void norm_row(const brisk_hparams *hp, float *out, const float *x, const brisk_weight *w, const brisk_weight *bias, int64_t n) {
    if (hp->ai->layer_norm) layernorm(out, x, w->data, n, hp->norm_eps);
    else brisk_rmsnorm(out, x, w->data, n, hp->norm_eps);
    if (bias->data) {
        const float *bv = bias->data;
        for (int64_t i = 0; i < n; i++) out[i] += bv[i];
    }
}

/* After a sublayer wrote its output to f->xn: its post-norm, the residual
 * scale, and the residual add into f->x. */
static void residual_add(brisk_forward *f, int32_t T, const brisk_weight *post_norm) {
    const brisk_hparams *hp = &f->m->hp;
    const int32_t d = hp->n_embd;
    if (post_norm->data)
        for (int32_t t = 0; t < T; t++) brisk_rmsnorm(f->xn + (size_t)t * d, f->xn + (size_t)t * d, post_norm->data, d, hp->norm_eps);
    if (hp->residual_scale != 0.0f) scale_rows(f->xn, (int64_t)T * d, hp->residual_scale);
    for (size_t i = 0; i < (size_t)T * d; i++) f->x[i] += f->xn[i];
}

/* Q/K norm: per head when the weight has head_dim entries, else over the whole projection. */
static void qk_norm(float *x, const brisk_weight *w, int n_heads, int hd, float eps) {
    if (w->cols == hd)
        for (int h = 0; h < n_heads; h++) brisk_rmsnorm(x + h * hd, x + h * hd, w->data, hd, eps);
    else
        brisk_rmsnorm(x, x, w->data, (int64_t)n_heads * hd, eps);
}

/* Norm -> Q, K, V -> q/k norms -> RoPE -> K/V into the cache -> attention ->
 * output projection -> post-norm -> residual. */
static void attend(brisk_forward *f, brisk_kv *kv, const brisk_fwd_batch *b, int32_t il, const brisk_layer *L);
static void mla_attention_block(brisk_forward *f, brisk_kv *kv, const brisk_fwd_batch *b, int32_t il, const brisk_layer *L);

void brisk_fwd_attention_block(brisk_forward *f, brisk_kv *kv, const brisk_fwd_batch *b, int32_t il, const brisk_layer *L) {
    const brisk_hparams *hp = &f->m->hp;
    if (hp->mla) {
        mla_attention_block(f, kv, b, il, L);
        return;
    }
    const int32_t T = b->n, d = hp->n_embd, hd = hp->head_dim;
    const float *ain = f->x;
    if (L->attn_norm.data) {
        for (int32_t t = 0; t < T; t++)
            norm_row(hp, f->xn + (size_t)t * d, f->x + (size_t)t * d, &L->attn_norm, &L->attn_norm_b, d);
        ain = f->xn;
    }
    if (L->wqkv.data) {
        brisk_fwd_matmul1(f, ain, T, &L->wqkv, f->qkv, f->qkv_dim);
        affine_rows(f->qkv, T, f->qkv_dim, f->qkv_dim, L->bqkv.data, L->s_qkv, false);
        for (int32_t t = 0; t < T; t++) {
            const float *r = f->qkv + (size_t)t * f->qkv_dim;
            memcpy(f->q + (size_t)t * f->qdim, r, (size_t)f->qdim * sizeof(float));
            memcpy(f->kc + (size_t)t * f->kvdim, r + f->qdim, (size_t)f->kvdim * sizeof(float));
            memcpy(f->vc + (size_t)t * f->kvdim, r + f->qdim + f->kvdim, (size_t)f->kvdim * sizeof(float));
        }
        affine_rows(f->q, T, f->qdim, f->qdim, L->bq.data, (brisk_wscale){0}, false);
        affine_rows(f->kc, T, f->kvdim, f->kvdim, L->bk.data, (brisk_wscale){0}, false);
        affine_rows(f->vc, T, f->kvdim, f->kvdim, L->bv.data, (brisk_wscale){0}, false);
    } else {
        const brisk_weight *ws[3] = {&L->wq, &L->wk, &L->wv};
        float *outs[3] = {f->q, f->kc, f->vc};
        const int64_t strides[3] = {f->qdim, f->kvdim, f->kvdim};
        /* without scales the biases are added inside the matmul (the same sums) */
        const bool scaled = L->s_q.on || L->s_k.on || L->s_v.on;
        const float *bias[3] = {L->bq.data, L->bk.data, L->bv.data};
        brisk_fwd_matmul(f, ain, T, 3, ws, outs, strides, scaled ? NULL : bias);
        if (scaled) {
            affine_rows(f->q, T, f->qdim, f->qdim, L->bq.data, L->s_q, false);
            affine_rows(f->kc, T, f->kvdim, f->kvdim, L->bk.data, L->s_k, false);
            affine_rows(f->vc, T, f->kvdim, f->kvdim, L->bv.data, L->s_v, false);
        }
    }
    const float *rcache = L->rope_swa && f->rope_cache_swa ? f->rope_cache_swa : f->rope_cache;
    const brisk_rope *rope = L->rope_swa ? &f->rope_swa : &f->rope;
    for (int32_t t = 0; t < T; t++) {
        float *q = f->q + (size_t)t * f->qdim, *k = f->kc + (size_t)t * f->kvdim;
        if (L->q_norm.data) {
            qk_norm(q, &L->q_norm, hp->n_head, hd, hp->norm_eps);
            qk_norm(k, &L->k_norm, hp->n_head_kv, hd, hp->norm_eps);
        }
        if (L->rope) {
            const float *rc = rcache + (size_t)t * f->rope.n_rot;
            brisk_rope_apply(rope, rc, q, hp->n_head, hd);
            brisk_rope_apply(rope, rc, k, hp->n_head_kv, hd);
        }
        if (hp->q_scale != 1.0f) scale_rows(q, f->qdim, hp->q_scale);
        if (kv->k_hadamard)   /* K is stored rotated (brisk_kv_put): rotate the queries alike, q.k is unchanged */
            for (int h = 0; h < hp->n_head; h++) brisk_kv_hadamard(q + (size_t)h * hd, hd);
        const float *v = f->vc + (size_t)t * f->kvdim;
        for (int h = 0; h < hp->n_head_kv; h++)   /* in the cache's storage types (K transposed: kv.h) */
            brisk_kv_put(kv, il, b->seq[t], f->slot[t], h, k + (size_t)h * hd, v + (size_t)h * hd);
    }
    attend(f, kv, b, il, L);
    brisk_fwd_matmul1(f, f->att, T, &L->wo, f->xn, d);
    affine_rows(f->xn, T, d, d, L->bo.data, L->s_o, false);
    residual_add(f, T, &L->post_attn_norm);
}

/* Causal attention of the batch's queries (f->q) over the cache's layer il
 * (the batch's rows already stored) into f->att. */
static void attend(brisk_forward *f, brisk_kv *kv, const brisk_fwd_batch *b, int32_t il, const brisk_layer *L) {
    const brisk_hparams *hp = &f->m->hp;
    const int32_t T = b->n, hd = hp->head_dim;
    const bool swa_layer = L->window > 0 && f->vsink_swa;
    attn_task at = {.f = f, .kv = kv, .b = b, .layer = il, .vsink = swa_layer ? f->vsink_swa : f->vsink,
                    .vlo = swa_layer ? f->vlo_swa : f->vlo, .windowed = swa_layer ? f->window_swa > 0 : f->window > 0,
                    .scale = hp->attn_softcap != 0.0f ? hp->kq_scale / hp->attn_softcap : hp->kq_scale, .softcap = hp->attn_softcap,
                    .sinks = L->attn_sinks.data, .wave = -1};
    /* Several tokens of one sequence, short enough: widen its K once for
     * all the batch's queries (tree batches too: kt serves their cached
     * positions), so each K element is converted once, not once per
     * token. One token reads the cache's transposed K directly. */
    if (f->kt && T >= 2 && !brisk_kv_type_int_dot(kv->k_type)) {   /* those are scored in integers, from the cache */
        int32_t len = 0;
        bool one = true;
        for (int32_t t = 0; t < T; t++) {
            one = one && b->seq[t] == b->seq[0];
            len = f->vis[t] + 1 > len ? f->vis[t] + 1 : len;
        }
        if (one && len <= f->kt_cap) {
            at.kt = f->kt;
            at.kt_len = len;
            at.kt_skip0 = at.kt_skip1 = 0;
            if (at.windowed) {   /* the gap no token of the batch sees, in whole 64-entry tiles */
                int32_t lo = INT32_MAX, sink = 0;
                for (int32_t t = 0; t < T; t++) {
                    lo = BRISK_MIN(lo, at.vlo[t]);
                    sink = BRISK_MAX(sink, at.vsink[t]);
                }
                at.kt_skip0 = (sink + ATTN_TILE - 1) / ATTN_TILE * ATTN_TILE;
                at.kt_skip1 = lo / ATTN_TILE * ATTN_TILE;
            }
            brisk_fwd_run_step(f, brisk_fwd_kt_worker, &at, (double)len * f->kvdim);
        }
    }
    double attn_macs = 0.0;   /* q.k and p.v over every attended position */
    for (int32_t t = 0; t < T; t++) attn_macs += 2.0 * (f->vis[t] + 1) * hp->n_head * hd;
    /* a few tokens over a long context: their splits side by side, then the
     * merge (flash decoding; the same bits as one item per thread) */
    if (kv->hyb) {
        /* hyb4/hyb2: one wave per block, each block's hot-row refresh right
         * after its last query (kv/hyb.c), so a query sees the hot rows its
         * token-by-token decode saw */
        int32_t n_wave = 0;
        for (int32_t t = 0; t < T; t++) n_wave = BRISK_MAX(n_wave, f->wave[t] + 1);
        for (at.wave = 0; at.wave < n_wave; at.wave++) {
            brisk_fwd_run_step(f, brisk_fwd_attn_worker, &at, attn_macs / n_wave);
            for (int32_t t = 0; t < T; t++)
                if (f->wave[t] == at.wave && f->slot[t] % BRISK_KV_BLOCK == BRISK_KV_BLOCK - 1)
                    brisk_kv_hyb_refresh(kv, il, b->seq[t], f->slot[t] / BRISK_KV_BLOCK);
        }
        return;
    }
    if (attn_macs >= f->min_parallel_macs && brisk_fwd_attn_split_plan(&at, f->n_threads)) {
        brisk_fwd_run_step(f, brisk_fwd_attn_split_worker, &at, attn_macs);
        double merge_macs = 0.0;   /* per split and head, one rescaled add of its output */
        for (int32_t t = 0; t < T; t++) merge_macs += 2.0 * (f->vis[t] / f->attn_split + 1) * hp->n_head * hp->head_dim_v;
        brisk_fwd_run_step(f, brisk_fwd_attn_merge_worker, &at, merge_macs);
    } else brisk_fwd_run_step(f, brisk_fwd_attn_worker, &at, attn_macs);
}

/* One head's product for all T tokens: rows of n_in floats at x (stride
 * x_stride) times w into n_out floats at y (stride y_stride), through
 * contiguous scratch rows as the matmul reads them. */
static void head_matmul(brisk_forward *f, const float *x, int64_t x_stride, int64_t n_in, const brisk_weight *w, float *y, int64_t y_stride,
                        int64_t n_out, int32_t T) {
    for (int32_t t = 0; t < T; t++) memcpy(f->mla_hin + (size_t)t * n_in, x + (size_t)t * x_stride, (size_t)n_in * sizeof(float));
    brisk_fwd_matmul1(f, f->mla_hin, T, w, f->mla_hout, n_out);
    for (int32_t t = 0; t < T; t++) memcpy(y + (size_t)t * y_stride, f->mla_hout + (size_t)t * n_out, (size_t)n_out * sizeof(float));
}

/* RoPE of the MLA layers' q_pe / k_pe (NORMAL pairs, the usual cache): as
 * ggml's rotate_pairs runs, built as C++ with GCC's default
 * -ffp-contract=fast, each output is one fused multiply-add over the other
 * product rounded. Checked against llama.cpp's ROPE nodes on the deepseek2
 * fixture (cb_eval): bit for bit, where brisk_rope_apply's separate roundings
 * differed in the last bit on a fifth of the elements. */
static void mla_rope(const float *cache, float *x, int n_heads, int stride, int n_rot) {
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * stride;
        for (int i0 = 0; i0 < n_rot; i0 += 2) {
            const float c = cache[i0], s = cache[i0 + 1], x0 = v[i0], x1 = v[i0 + 1];
            v[i0] = fmaf(x0, c, -(x1 * s));
            v[i0 + 1] = fmaf(x0, s, x1 * c);
        }
    }
}

/* Multi-head latent attention in llama.cpp's absorbed form (deepseek2.cpp,
 * arch.h mla): norm -> q (through its low rank and norm, or plain) and the
 * latent with k_pe (one step) -> the latent's norm, k_pe RoPE'd -> per head
 * q_nope through attn_k_b into the latent, q_pe RoPE'd after it -> K = [latent
 * | k_pe], V = the latent into the cache (one KV head) -> MQA over it (q.k
 * over the latent and rope dims, the weighted sum of latents) -> per head
 * attn_v_b -> attn_output -> residual. */
static void mla_attention_block(brisk_forward *f, brisk_kv *kv, const brisk_fwd_batch *b, int32_t il, const brisk_layer *L) {
    const brisk_hparams *hp = &f->m->hp;
    const int32_t T = b->n, d = hp->n_embd, rank = hp->n_lora_kv, n_rot = hp->rope.n_rot, hk = hp->mla_head_k;
    const int32_t nope = hk - n_rot, qraw = hp->n_head * hk, hd = hp->head_dim, vh = hp->mla_head_v;
    for (int32_t t = 0; t < T; t++) norm_row(hp, f->xn + (size_t)t * d, f->x + (size_t)t * d, &L->attn_norm, &L->attn_norm_b, d);
    if (L->wq_a.data) {
        const brisk_weight *ws[2] = {&L->wq_a, &L->wkv_a};
        float *outs[2] = {f->mla_qa, f->kc};
        const int64_t strides[2] = {hp->n_lora_q, f->kvdim};
        brisk_fwd_matmul(f, f->xn, T, 2, ws, outs, strides, NULL);
        for (int32_t t = 0; t < T; t++) {
            float *qa = f->mla_qa + (size_t)t * hp->n_lora_q;
            brisk_rmsnorm(qa, qa, L->q_a_norm.data, hp->n_lora_q, hp->norm_eps);
        }
        brisk_fwd_matmul1(f, f->mla_qa, T, &L->wq_b, f->mla_q, qraw);
    } else {
        const brisk_weight *ws[2] = {&L->wq, &L->wkv_a};
        float *outs[2] = {f->mla_q, f->kc};
        const int64_t strides[2] = {qraw, f->kvdim};
        brisk_fwd_matmul(f, f->xn, T, 2, ws, outs, strides, NULL);
    }
    for (int32_t t = 0; t < T; t++) {
        const float *rc = f->rope_cache + (size_t)t * n_rot;
        float *k = f->kc + (size_t)t * f->kvdim, *v = f->vc + (size_t)t * f->vdim;
        brisk_rmsnorm(k, k, L->kv_a_norm.data, rank, hp->norm_eps);   /* K = [latent | k_pe] */
        mla_rope(rc, k + rank, 1, n_rot, n_rot);
        memcpy(v, k, (size_t)rank * sizeof(float));   /* V = the latent (the same values as K's first rank) */
        mla_rope(rc, f->mla_q + (size_t)t * qraw + nope, hp->n_head, hk, n_rot);   /* q_pe of every head */
        brisk_kv_put(kv, il, b->seq[t], f->slot[t], 0, k, v);
    }
    for (int32_t h = 0; h < hp->n_head; h++) {
        /* Q of head h = [q_nope absorbed into the latent | q_pe] */
        head_matmul(f, f->mla_q + (size_t)h * hk, qraw, nope, &L->wk_b[h], f->q + (size_t)h * hd, f->qdim, rank, T);
        for (int32_t t = 0; t < T; t++)
            memcpy(f->q + (size_t)t * f->qdim + (size_t)h * hd + rank, f->mla_q + (size_t)t * qraw + (size_t)h * hk + nope,
                   (size_t)n_rot * sizeof(float));
    }
    attend(f, kv, b, il, L);
    for (int32_t h = 0; h < hp->n_head; h++)   /* each head's latent output expanded to its value width */
        head_matmul(f, f->att + (size_t)h * rank, f->odim, rank, &L->wv_b[h], f->mla_o + (size_t)h * vh, (int64_t)hp->n_head * vh, vh, T);
    brisk_fwd_matmul1(f, f->mla_o, T, &L->wo, f->xn, d);
    affine_rows(f->xn, T, d, d, L->bo.data, L->s_o, false);
    residual_add(f, T, &L->post_attn_norm);
}

/* One SwiGLU FFN of width ff over n rows of x into out ([n][d]): an expert
 * (with its scales, each a product's multiplier, or 0: none) or the shared
 * expert. Each row's result depends on that row only (brisk_fwd_matmul is
 * batch-invariant), so a token gets the same bits whichever tokens share
 * the expert with it. */
static void swiglu_ffn(brisk_forward *f, const float *x, int32_t n, const brisk_weight *gate, const brisk_weight *up, const brisk_weight *down,
                       const float *s_gate, const float *s_up, const float *s_down, const float *const bias[3], float *out) {
    const int64_t ff = up->rows, d = down->rows;
    const brisk_weight *ws[2] = {gate, up};
    float *outs[2] = {f->g, f->u};
    const int64_t strides[2] = {ff, ff};
    brisk_fwd_matmul(f, x, n, 2, ws, outs, strides, NULL);
    /* llama.cpp (build_moe_ffn): the up product times its scale, plus its
     * bias (add_id), then the gate's */
    if (s_up) scale_rows(f->u, (int64_t)n * ff, *s_up);
    add_bias_rows(f->u, n, ff, bias[1]);
    if (s_gate) scale_rows(f->g, (int64_t)n * ff, *s_gate);
    add_bias_rows(f->g, n, ff, bias[0]);
    swiglu_task sw = {.fn = f->swiglu, .oai_alpha = f->m->hp.act_alpha, .oai_limit = f->m->hp.act_limit, .h = f->g, .g = f->g, .u = f->u,
                      .n = ff, .g_stride = ff, .rows = n};
    if (n < 4) brisk_fwd_swiglu_worker(&sw, 0, 1);
    else brisk_pool_run(f->pool, brisk_fwd_swiglu_worker, &sw);
    brisk_fwd_matmul1(f, f->g, n, down, out, d);
    if (s_down) scale_rows(out, (int64_t)n * d, *s_down);
    add_bias_rows(out, n, d, bias[2]);
}

/* The router (llama.cpp's build_moe_ffn): the logits (plus the router's
 * bias when the layer has one), their softmax (max subtracted, summed in
 * double) or sigmoid; the n_expert_used largest of those probabilities plus
 * the selection bias when the layer has one (ties: the lower expert first),
 * best first, each weighted by its unbiased probability; or (gpt-oss) the
 * largest raw logits, weighted by the softmax over just those; the weights
 * optionally divided by their sum and scaled; then the (token, rank) pairs
 * listed by expert, in token order. */
static void moe_route(brisk_forward *f, const brisk_layer *L, const float *fin, int32_t T) {
    const brisk_hparams *hp = &f->m->hp;
    const int32_t E = hp->n_expert, K = hp->n_expert_used;
    const float *bias = L->moe.probs_bias.data, *router_b = L->moe.router_b.data;
    const bool softmax_selected = hp->ai->moe_softmax_selected;
    brisk_fwd_matmul1(f, fin, T, &L->moe.router, f->moe_logits, E);
    for (int32_t e = 0; e <= E; e++) f->moe_start[e] = 0;
    for (int32_t t = 0; t < T; t++) {
        float *p = f->moe_logits + (size_t)t * E;
        if (router_b)
            for (int32_t e = 0; e < E; e++) p[e] += router_b[e];
        if (softmax_selected) {
            /* the raw logits choose; their softmax over the chosen weights them (below) */
        } else if (hp->moe_sigmoid) {
            for (int32_t e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));   /* ggml_vec_sigmoid_f32 */
        } else {
            float mx = p[0];
            for (int32_t e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
            double sum = 0.0;
            for (int32_t e = 0; e < E; e++) {
                p[e] = expf(p[e] - mx);
                sum += (double)p[e];
            }
            const float inv = (float)(1.0 / sum);
            for (int32_t e = 0; e < E; e++) p[e] *= inv;
        }
        int32_t *sel = f->moe_sel + (size_t)t * K;
        float *w = f->moe_w + (size_t)t * K;
        /* grouped routing (llama.cpp's build_moe_ffn, DeepSeek-V3's
         * n_group / topk_group): each group scores the sum of its two best
         * selection values, and only the n_group_used best groups' experts
         * can be chosen (the others' values become -inf) */
        const int32_t G = hp->n_expert_groups, per = G ? E / G : 0;
        bool group_on[64] = {false};
        if (G) {
            float score[64];
            for (int32_t gi = 0; gi < G; gi++) {
                float b1 = -INFINITY, b2 = -INFINITY;
                for (int32_t e = gi * per; e < (gi + 1) * per; e++) {
                    const float v = bias ? p[e] + bias[e] : p[e];
                    if (v > b1) b2 = b1, b1 = v;
                    else if (v > b2) b2 = v;
                }
                score[gi] = b1 + b2;
            }
            for (int32_t k = 0; k < hp->n_group_used; k++) {
                int32_t best = -1;
                for (int32_t gi = 0; gi < G; gi++)
                    if (!group_on[gi] && (best < 0 || score[gi] > score[best])) best = gi;
                group_on[best] = true;
            }
        }
        for (int32_t k = 0; k < K; k++) {   /* K passes: E * K comparisons, no allocation */
            int32_t best = -1;
            float best_v = 0.0f;
            for (int32_t e = 0; e < E; e++) {
                bool taken = false;
                for (int32_t j = 0; j < k && !taken; j++) taken = sel[j] == e;
                const float v = G && !group_on[e / per] ? -INFINITY : bias ? p[e] + bias[e] : p[e];
                if (!taken && (best < 0 || v > best_v)) best = e, best_v = v;
            }
            sel[k] = best;
            w[k] = p[best];
        }
        if (softmax_selected) {   /* ggml_soft_max over the K chosen logits: max subtracted, the sum in double, times 1/sum */
            float mx = w[0];
            for (int32_t k = 1; k < K; k++) mx = w[k] > mx ? w[k] : mx;
            double sum = 0.0;
            for (int32_t k = 0; k < K; k++) {
                w[k] = expf(w[k] - mx);
                sum += (double)w[k];
            }
            const float inv = (float)(1.0 / sum);
            for (int32_t k = 0; k < K; k++) w[k] *= inv;
        }
        if (hp->moe_norm_w) {
            double ws = 0.0;
            for (int32_t k = 0; k < K; k++) ws += (double)w[k];
            float wsum = (float)ws;
            if (!(wsum >= 6.103515625e-5f)) wsum = 6.103515625e-5f;   /* llama.cpp's clamp: the smallest normal F16 */
            for (int32_t k = 0; k < K; k++) w[k] /= wsum;
        }
        if (hp->moe_w_scale != 0.0f && hp->moe_w_scale != 1.0f)
            for (int32_t k = 0; k < K; k++) w[k] *= hp->moe_w_scale;
        for (int32_t k = 0; k < K; k++) f->moe_start[sel[k] + 1]++;
    }
    for (int32_t e = 0; e < E; e++) f->moe_start[e + 1] += f->moe_start[e];
    /* moe_logits is free again: it holds each expert's fill count while listing */
    int32_t *fill = (int32_t *)f->moe_logits;
    for (int32_t e = 0; e < E; e++) fill[e] = f->moe_start[e];
    for (int32_t t = 0; t < T; t++)
        for (int32_t k = 0; k < K; k++) f->moe_list[fill[f->moe_sel[(size_t)t * K + k]]++] = t * K + k;
}

/* Decode: the token's K chosen experts in two parallel steps (gate and up of
 * all K, then down of all K) instead of two per expert, each output the bits
 * swiglu_ffn gives it alone (brisk_fwd_matmul_rows; the scales and SwiGLU
 * are per row), into moe_out's row of each rank. */
static void moe_decode_experts(brisk_forward *f, const brisk_layer *L, const float *fin) {
    const brisk_experts *x = &L->moe;
    const int32_t K = f->m->hp.n_expert_used;
    const int64_t ff = f->m->hp.n_ff_exp, d = f->m->hp.n_embd;
    const brisk_weight *ws[MM_ROW_JOBS];
    float *outs[MM_ROW_JOBS];
    int32_t rows[MM_ROW_JOBS] = {0};
    for (int32_t k = 0; k < K; k++) {
        const int32_t e = f->moe_sel[k];
        ws[2 * k] = &x->gate[e], outs[2 * k] = f->g + (size_t)k * ff;
        ws[2 * k + 1] = &x->up[e], outs[2 * k + 1] = f->u + (size_t)k * ff;
    }
    brisk_fwd_matmul_rows(f, fin, 1, 2 * K, ws, rows, outs);
    for (int32_t k = 0; k < K; k++) {   /* llama.cpp's order: the up product's scale and bias, then the gate's */
        const int32_t e = f->moe_sel[k];
        if (x->s_up) scale_rows(f->u + (size_t)k * ff, ff, x->s_up[e]);
        add_bias_rows(f->u + (size_t)k * ff, 1, ff, x->b_up ? x->b_up + (size_t)e * ff : NULL);
        if (x->s_gate) scale_rows(f->g + (size_t)k * ff, ff, x->s_gate[e]);
        add_bias_rows(f->g + (size_t)k * ff, 1, ff, x->b_gate ? x->b_gate + (size_t)e * ff : NULL);
    }
    swiglu_task sw = {.fn = f->swiglu, .oai_alpha = f->m->hp.act_alpha, .oai_limit = f->m->hp.act_limit, .h = f->g, .g = f->g, .u = f->u,
                      .n = ff, .g_stride = ff, .rows = K};
    brisk_fwd_swiglu_worker(&sw, 0, 1);
    for (int32_t k = 0; k < K; k++) ws[k] = &x->down[f->moe_sel[k]], outs[k] = f->moe_out + (size_t)k * d, rows[k] = k;
    brisk_fwd_matmul_rows(f, f->g, K, K, ws, rows, outs);
    for (int32_t k = 0; k < K; k++) {
        const int32_t e = f->moe_sel[k];
        if (x->s_down) scale_rows(f->moe_out + (size_t)k * d, d, x->s_down[e]);
        add_bias_rows(f->moe_out + (size_t)k * d, 1, d, x->b_down ? x->b_down + (size_t)e * d : NULL);
    }
}

/* Mixture of experts: route, then one batch of matmuls per expert over the
 * tokens routed to it (prefill reads each chosen expert once for all its
 * tokens; decode reads only the chosen experts), each (token, rank) output
 * kept apart, and per token the weighted sum in rank order (as llama.cpp
 * adds its expert views), plus the shared expert. The sum's order depends
 * on the token's own routing only, so results are batch-invariant. */
static void moe_ffn(brisk_forward *f, const brisk_layer *L, const float *fin, int32_t T) {
    const brisk_hparams *hp = &f->m->hp;
    const brisk_experts *x = &L->moe;
    const int32_t E = hp->n_expert, K = hp->n_expert_used, d = hp->n_embd;
    const int64_t ff = hp->n_ff_exp;
    moe_route(f, L, fin, T);
    if (T == 1 && 2 * K <= MM_ROW_JOBS) moe_decode_experts(f, L, fin);   /* the scratch holds K rows (forward.c) */
    else for (int32_t e = 0; e < E; e++) {
        const int32_t a = f->moe_start[e], n = f->moe_start[e + 1] - a;
        if (n == 0) continue;
        for (int32_t i = 0; i < n; i++)
            memcpy(f->moe_x + (size_t)i * d, fin + (size_t)(f->moe_list[a + i] / K) * d, (size_t)d * sizeof(float));
        const float *const bias[3] = {x->b_gate ? x->b_gate + (size_t)e * ff : NULL, x->b_up ? x->b_up + (size_t)e * ff : NULL,
                                      x->b_down ? x->b_down + (size_t)e * d : NULL};
        swiglu_ffn(f, f->moe_x, n, &x->gate[e], &x->up[e], &x->down[e], x->s_gate ? x->s_gate + e : NULL, x->s_up ? x->s_up + e : NULL,
                   x->s_down ? x->s_down + e : NULL, bias, f->moe_y);
        for (int32_t i = 0; i < n; i++)
            memcpy(f->moe_out + (size_t)f->moe_list[a + i] * d, f->moe_y + (size_t)i * d, (size_t)d * sizeof(float));
    }
    const bool shared = x->sh_up.data != NULL;
    if (shared) {
        static const float *const no_bias[3] = {NULL, NULL, NULL};
        swiglu_ffn(f, fin, T, &x->sh_gate, &x->sh_up, &x->sh_down, NULL, NULL, NULL, no_bias, f->moe_y);
        if (x->sh_gate_inp.data) {   /* qwen2moe: times sigmoid(g . x), computed as llama.cpp does: silu(s) / s */
            const float *gv = x->sh_gate_inp.data;
            for (int32_t t = 0; t < T; t++) {
                const float *r = fin + (size_t)t * d;
                float s = 0.0f;
                for (int32_t i = 0; i < d; i++) s += gv[i] * r[i];
                const float gate = s / (1.0f + expf(-s)) / s;
                scale_rows(f->moe_y + (size_t)t * d, d, gate);
            }
        }
    }
    for (int32_t t = 0; t < T; t++) {   /* fin may be f->xn: every read of it is done */
        float *o = f->xn + (size_t)t * d;
        const float *w = f->moe_w + (size_t)t * K;
        const float *y = f->moe_out + (size_t)t * K * d;
        for (int32_t i = 0; i < d; i++) o[i] = y[i] * w[0];
        for (int32_t k = 1; k < K; k++) {
            const float *yk = y + (size_t)k * d;
            for (int32_t i = 0; i < d; i++) o[i] += yk[i] * w[k];
        }
        if (shared) {
            const float *sh = f->moe_y + (size_t)t * d;
            for (int32_t i = 0; i < d; i++) o[i] += sh[i];
        }
    }
}

/* Norm -> gate, up -> SwiGLU / GeGLU -> down (or the experts) -> post-norm -> residual. */
void brisk_fwd_ffn_block(brisk_forward *f, const brisk_layer *L, int32_t T) {
    const brisk_hparams *hp = &f->m->hp;
    const int32_t d = hp->n_embd;
    const int64_t ff = hp->n_ff;
    const float *fin = f->x;
    if (L->ffn_norm.data) {
        for (int32_t t = 0; t < T; t++)
            norm_row(hp, f->xn + (size_t)t * d, f->x + (size_t)t * d, &L->ffn_norm, &L->ffn_norm_b, d);
        fin = f->xn;
    }
    if (L->moe.gate) {
        moe_ffn(f, L, fin, T);
        residual_add(f, T, &L->post_ffn_norm);
        return;
    }
    swiglu_task sw = {.fn = f->swiglu, .gelu_lut = f->gelu_lut, .oai_alpha = hp->act_alpha, .oai_limit = hp->act_limit, .h = f->g, .n = ff,
                      .rows = T};
    if (hp->fused_up) {   /* one [gate | up] matrix: its rows' halves */
        brisk_fwd_matmul1(f, fin, T, &L->w_up, f->u, 2 * ff);
        affine_rows(f->u, T, 2 * ff, 2 * ff, L->b_up.data, L->s_up, true);
        sw.g = f->u, sw.u = f->u + ff, sw.g_stride = 2 * ff;
    } else if (!L->w_gate.data) {   /* GELU(up), no gate */
        brisk_fwd_matmul1(f, fin, T, &L->w_up, f->g, ff);
        affine_rows(f->g, T, ff, ff, L->b_up.data, L->s_up, true);
        sw.g = f->g, sw.u = NULL, sw.g_stride = ff;
    } else {
        const brisk_weight *ws[2] = {&L->w_gate, &L->w_up};
        float *outs[2] = {f->g, f->u};
        const int64_t strides[2] = {ff, ff};
        brisk_fwd_matmul(f, fin, T, 2, ws, outs, strides, NULL);
        affine_rows(f->g, T, ff, ff, L->b_gate.data, L->s_gate, true);
        affine_rows(f->u, T, ff, ff, L->b_up.data, L->s_up, true);
        sw.g = f->g, sw.u = f->u, sw.g_stride = ff;
    }
    if (T < 4) brisk_fwd_swiglu_worker(&sw, 0, 1);   /* as the activation quantizer: a pool step costs more */
    else brisk_pool_run(f->pool, brisk_fwd_swiglu_worker, &sw);
    brisk_fwd_matmul1(f, f->g, T, &L->w_down, f->xn, d);
    affine_rows(f->xn, T, d, d, L->b_down.data, L->s_down, true);
    residual_add(f, T, &L->post_ffn_norm);
}

/* Embedding rows (times the architecture's embedding scale) and the RoPE
 * caches of the batch's positions. */
void brisk_fwd_embed(brisk_forward *f, const brisk_fwd_batch *b) {
    const brisk_model_data *m = f->m;
    const brisk_hparams *hp = &m->hp;
    const int32_t T = b->n, d = hp->n_embd;
    const brisk_to_float_fn emb = brisk_qtype_to_float(m->w.tok_embd.type);
    for (int32_t t = 0; t < T; t++)
        emb((const uint8_t *)m->w.tok_embd.data + (size_t)b->token[t] * m->w.tok_embd.row_bytes, f->x + (size_t)t * d, d);
    if (hp->embd_scale != 1.0f) scale_rows(f->x, (int64_t)T * d, hp->embd_scale);
    for (int32_t t = 0; t < T; t++) brisk_rope_cache(&f->rope, b->pos[t], f->rope_cache + (size_t)t * f->rope.n_rot);
    if (f->rope_cache_swa)
        for (int32_t t = 0; t < T; t++) brisk_rope_cache(&f->rope_swa, b->pos[t], f->rope_cache_swa + (size_t)t * f->rope.n_rot);
}

/* The output norm of the tokens that want logits, the output matrix, its
 * scale and bias, the logit scale and the final softcap: [n_want][n_vocab]. */
void brisk_fwd_logits(brisk_forward *f, const brisk_fwd_batch *b, float *out) {
    const brisk_model_data *m = f->m;
    const brisk_hparams *hp = &m->hp;
    const int32_t d = hp->n_embd;
    int32_t n_out = 0;
    for (int32_t t = 0; t < b->n; t++)
        if (b->want[t]) {
            norm_row(hp, f->xn + (size_t)n_out * d, f->x + (size_t)t * d, &m->w.output_norm, &m->w.output_norm_b, d);
            n_out++;
        }
    if (!n_out) return;
    const int64_t nv = hp->n_vocab;
    brisk_fwd_matmul1(f, f->xn, n_out, &m->w.output, out, nv);
    affine_rows(out, n_out, nv, nv, m->w.output_b.data, m->w.s_output, false);
    if (hp->logit_scale != 0.0f) scale_rows(out, (int64_t)n_out * nv, 1.0f / hp->logit_scale);
    if (hp->final_softcap != 0.0f) softcap_rows(out, (int64_t)n_out * nv, hp->final_softcap);
}
