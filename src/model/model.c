/* model: hyperparameters and tensor binding from GGUF (see model.h). */
#include "model/model.h"
#include "base/pool.h"
#include "kernels/kernels.h"
#include "quant/quant.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- metadata helpers ------------------------------------------------------------ */

static brisk_status get_arch_u32(const brisk_gguf *g, const char *arch, const char *suffix, uint32_t *out,
                                 bool required, bool *found, brisk_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    bool f = false;
    brisk_status st = brisk_gguf_get_u32(g, key, out, &f, err);
    if (st != BRISK_OK) return st;
    if (!f && required) return brisk_fail(err, BRISK_ERR_FORMAT, "missing metadata key '%s'", key);
    if (found) *found = f;
    return BRISK_OK;
}

static brisk_status get_arch_f32(const brisk_gguf *g, const char *arch, const char *suffix, float *out,
                                 bool required, bool *found, brisk_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    bool f = false;
    brisk_status st = brisk_gguf_get_f32(g, key, out, &f, err);
    if (st != BRISK_OK) return st;
    if (!f && required) return brisk_fail(err, BRISK_ERR_FORMAT, "missing metadata key '%s'", key);
    if (found) *found = f;
    return BRISK_OK;
}

/* head_count_kv may be stored per layer as an array; brisk needs it uniform. */
static brisk_status get_head_count_kv(const brisk_gguf *g, const char *arch, uint32_t *out, brisk_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    const brisk_gguf_kv *kv = brisk_gguf_find(g, key);
    if (!kv) return BRISK_OK; /* default: n_head (MHA) */
    if (kv->value.type != BRISK_GGUF_ARRAY) return brisk_gguf_get_u32(g, key, out, NULL, err);
    const brisk_gguf_value *a = &kv->value;
    const brisk_gguf_type et = a->v.arr.elem_type;
    const bool int_elems = et == BRISK_GGUF_UINT8 || et == BRISK_GGUF_UINT16 || et == BRISK_GGUF_UINT32 || et == BRISK_GGUF_UINT64 ||
                           et == BRISK_GGUF_INT8 || et == BRISK_GGUF_INT16 || et == BRISK_GGUF_INT32 || et == BRISK_GGUF_INT64;
    if (!int_elems)
        return brisk_fail(err, BRISK_ERR_FORMAT, "'%s': expected an integer or an array of integers, found arr[%s]", key,
                          brisk_gguf_type_name(et));
    if (a->v.arr.count == 0) return brisk_fail(err, BRISK_ERR_FORMAT, "'%s': empty array", key);
    int64_t first = brisk_gguf_arr_int(a, 0);
    for (uint64_t i = 1; i < a->v.arr.count; i++)
        if (brisk_gguf_arr_int(a, i) != first)
            return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "'%s': per-layer KV head counts differ (layer %llu)",
                              key, (unsigned long long)i);
    if (first < 1 || first > 65536) return brisk_fail(err, BRISK_ERR_FORMAT, "'%s': %lld out of range", key, (long long)first);
    *out = (uint32_t)first;
    return BRISK_OK;
}

/* ---- tensor binding ------------------------------------------------------------------ */

typedef struct binder {
    brisk_model_data *m;
    float *arena;          /* F32 copies of 1-D vectors */
    size_t arena_used, arena_cap;
    uint8_t *used;         /* [n_tensors]: 1 once a tensor is bound (every one must be) */
} binder;

static const brisk_gguf_tensor *find_tensor(binder *b, const char *name) {
    const brisk_gguf_tensor *t = brisk_gguf_find_tensor(b->m->gguf, name);
    if (t) b->used[t - b->m->gguf->tensors] = 1;
    return t;
}

/* Bind a matrix of shape [rows][cols]; a missing optional tensor leaves w zeroed. */
static brisk_status bind_matrix(binder *b, const char *name, int64_t cols, int64_t rows, bool required,
                                brisk_weight *w, brisk_error *err) {
    memset(w, 0, sizeof *w);
    const brisk_gguf_tensor *t = find_tensor(b, name);
    if (!t) return required ? brisk_fail(err, BRISK_ERR_FORMAT, "missing tensor '%s'", name) : BRISK_OK;
    if (t->n_dims > 2 || t->ne[0] != cols || t->ne[1] != rows)
        return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': shape [%lld, %lld] (n_dims %u), expected [%lld, %lld]",
                          name, (long long)t->ne[0], (long long)t->ne[1], t->n_dims, (long long)cols, (long long)rows);
    const brisk_qtype_info *q = brisk_qtype_get(t->type);
    if (!q || t->type == BRISK_Q_Q8_1 || t->type == BRISK_Q_Q8_K)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "tensor '%s': weight type %s (%u) is not supported for matrices",
                          name, brisk_qtype_name(t->type), t->type);
    w->data = t->data;
    w->type = t->type;
    w->cols = cols;
    w->rows = rows;
    if (!brisk_qtype_row_bytes(t->type, cols, &w->row_bytes))
        return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': row of %lld is not whole %s blocks", name, (long long)cols, q->name);
    b->m->n_params += (uint64_t)(cols * rows);
    b->m->weight_bytes += t->nbytes;
    return BRISK_OK;
}

/* Bind a 1-D vector of n elements and convert it to F32 in the arena. */
static brisk_status bind_vector(binder *b, const char *name, int64_t n, bool required, brisk_weight *w, brisk_error *err) {
    memset(w, 0, sizeof *w);
    const brisk_gguf_tensor *t = find_tensor(b, name);
    if (!t) return required ? brisk_fail(err, BRISK_ERR_FORMAT, "missing tensor '%s'", name) : BRISK_OK;
    if (t->n_dims != 1 || t->ne[0] != n)
        return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': shape [%lld] (n_dims %u), expected [%lld]",
                          name, (long long)t->ne[0], t->n_dims, (long long)n);
    brisk_to_float_fn conv = brisk_qtype_to_float(t->type);
    if (!conv) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "tensor '%s': type %s cannot be read", name, brisk_qtype_name(t->type));
    if (b->arena_used + (size_t)n > b->arena_cap)
        return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': vector storage exhausted", name); /* sized up front */
    float *dst = b->arena + b->arena_used;
    conv(t->data, dst, n);
    b->arena_used += (size_t)n;
    w->data = dst;
    w->type = BRISK_Q_F32;
    w->cols = n;
    w->rows = 1;
    w->row_bytes = (size_t)n * sizeof(float);
    b->m->n_params += (uint64_t)n;
    b->m->weight_bytes += t->nbytes;
    return BRISK_OK;
}

/* A per-tensor weight scale NAME.scale of shape [1], when the file has one. */
static brisk_status bind_scale(binder *b, const char *name, brisk_wscale *s, brisk_error *err) {
    brisk_weight w;
    brisk_status st = bind_vector(b, name, 1, false, &w, err);
    if (st) return st;
    s->on = w.data != NULL;
    s->v = s->on ? *(const float *)w.data : 1.0f;
    if (s->on && !isfinite(s->v)) return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': scale %g is not finite", name, s->v);
    return BRISK_OK;
}

/* NAME.input_scale ([1]): the activation scale of FP8/NVFP4 checkpoints.
 * llama.cpp binds it and never applies it (its graph computes in F32), so
 * it cannot change a result: it is read, checked to be a number, and left. */
static brisk_status bind_input_scale(binder *b, const char *name, brisk_error *err) {
    brisk_wscale unused;
    return bind_scale(b, name, &unused, err);
}

/* A Q/K norm: per head ([head_dim], qwen3, gemma3) or over the whole
 * projection ([heads * head_dim], olmo2); the file's shape says which. */
static brisk_status bind_qk_norm(binder *b, const char *name, int64_t head_dim, int64_t whole, brisk_weight *w, brisk_error *err) {
    const brisk_gguf_tensor *t = brisk_gguf_find_tensor(b->m->gguf, name);
    const int64_t n = t && t->n_dims == 1 && t->ne[0] == whole ? whole : head_dim;
    return bind_vector(b, name, n, false, w, err);
}

/* A 3-D tensor [n_expert][rows][cols] as n_expert matrix views (the
 * experts, or MLA's per-head attn_k_b / attn_v_b with n_expert heads). */
static brisk_status bind_matrix_slices(binder *b, const char *name, int64_t cols, int64_t rows, int64_t n_expert, brisk_weight *w,
                                       brisk_error *err) {
    const brisk_gguf_tensor *t = find_tensor(b, name);
    if (!t) return brisk_fail(err, BRISK_ERR_FORMAT, "missing tensor '%s'", name);
    /* GGUF drops trailing dimensions of 1: one slice may come as a 2-D tensor */
    const bool dims_ok = t->n_dims == 3 || (t->n_dims == 2 && n_expert == 1);
    if (!dims_ok || t->ne[0] != cols || t->ne[1] != rows || (t->n_dims == 3 ? t->ne[2] : 1) != n_expert)
        return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': shape [%lld, %lld, %lld] (n_dims %u), expected [%lld, %lld, %lld]", name,
                          (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], t->n_dims, (long long)cols, (long long)rows,
                          (long long)n_expert);
    const brisk_qtype_info *q = brisk_qtype_get(t->type);
    if (!q || t->type == BRISK_Q_Q8_1 || t->type == BRISK_Q_Q8_K)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "tensor '%s': weight type %s (%u) is not supported for matrices", name,
                          brisk_qtype_name(t->type), t->type);
    size_t row_bytes = 0;
    if (!brisk_qtype_row_bytes(t->type, cols, &row_bytes))
        return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': row of %lld is not whole %s blocks", name, (long long)cols, q->name);
    for (int64_t e = 0; e < n_expert; e++)
        w[e] = (brisk_weight){.data = (const uint8_t *)t->data + (size_t)e * (size_t)rows * row_bytes, .type = t->type, .cols = cols,
                              .rows = rows, .row_bytes = row_bytes};
    b->m->n_params += (uint64_t)(cols * rows * n_expert);
    b->m->weight_bytes += t->nbytes;
    return BRISK_OK;
}

static brisk_status bind_expert_matrices(binder *b, const char *name, int64_t cols, int64_t rows, brisk_weight *w, brisk_error *err) {
    return bind_matrix_slices(b, name, cols, rows, b->m->hp.n_expert, w, err);
}

/* An expert tensor's per-expert scales NAME.scale ([n_expert], finite), or NULL. */
static brisk_status bind_expert_scales(binder *b, const char *name, const float **out, brisk_error *err) {
    brisk_weight w;
    *out = NULL;
    brisk_status st = bind_vector(b, name, b->m->hp.n_expert, false, &w, err);
    if (st || !w.data) return st;
    const float *v = w.data;
    for (int32_t e = 0; e < b->m->hp.n_expert; e++)
        if (!isfinite(v[e])) return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': expert %d's scale %g is not finite", name, e, v[e]);
    *out = v;
    return BRISK_OK;
}

/* An expert tensor's biases NAME ([n_expert][n], 2-D: ne0 = n, ne1 =
 * n_expert; any readable type) converted to F32 in the arena, finite. */
static brisk_status bind_expert_biases(binder *b, const char *name, int64_t n, const float **out, brisk_error *err) {
    const int64_t n_expert = b->m->hp.n_expert;
    *out = NULL;
    const brisk_gguf_tensor *t = find_tensor(b, name);
    if (!t) return brisk_fail(err, BRISK_ERR_FORMAT, "missing tensor '%s'", name);
    if (t->n_dims != 2 || t->ne[0] != n || t->ne[1] != n_expert)
        return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': shape [%lld, %lld] (n_dims %u), expected [%lld, %lld]", name,
                          (long long)t->ne[0], (long long)t->ne[1], t->n_dims, (long long)n, (long long)n_expert);
    brisk_to_float_fn conv = brisk_qtype_to_float(t->type);
    if (!conv) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "tensor '%s': type %s cannot be read", name, brisk_qtype_name(t->type));
    size_t row_bytes = 0;
    if (!brisk_qtype_row_bytes(t->type, n, &row_bytes))
        return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': row of %lld is not whole %s blocks", name, (long long)n, brisk_qtype_name(t->type));
    const size_t count = (size_t)n * (size_t)n_expert;
    if (b->arena_used + count > b->arena_cap)
        return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': vector storage exhausted", name); /* sized up front */
    float *dst = b->arena + b->arena_used;
    for (int64_t e = 0; e < n_expert; e++) conv((const uint8_t *)t->data + (size_t)e * row_bytes, dst + (size_t)e * (size_t)n, n);
    for (size_t i = 0; i < count; i++)
        if (!isfinite(dst[i]))
            return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': expert %zu's bias %g is not finite", name, i / (size_t)n, dst[i]);
    b->arena_used += count;
    b->m->n_params += (uint64_t)count;
    b->m->weight_bytes += t->nbytes;
    *out = dst;
    return BRISK_OK;
}

/* The MoE FFN of layer il: router, experts (with their scales, applied or
 * not as the family's graph does), the shared expert and its gate. */
static brisk_status bind_experts(binder *b, int il, brisk_layer *L, brisk_error *err) {
    const brisk_hparams *hp = &b->m->hp;
    const brisk_arch_info *ai = hp->ai;
    const int64_t d = hp->n_embd, ff = hp->n_ff_exp, n_expert = hp->n_expert;
    brisk_experts *x = &L->moe;
    char name[96];
    brisk_status st;
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s, il), name)
    if ((st = bind_matrix(b, NAME("ffn_gate_inp.weight"), d, n_expert, true, &x->router, err))) return st;
    x->gate = calloc((size_t)n_expert * 3, sizeof(brisk_weight));
    if (!x->gate) return brisk_fail(err, BRISK_ERR_NOMEM, "model: out of memory for %lld experts", (long long)n_expert);
    x->up = x->gate + n_expert;
    x->down = x->up + n_expert;
    if (!ai->moe_biases && brisk_gguf_find_tensor(b->m->gguf, NAME("ffn_gate_up_exps.weight"))) {
        /* one [gate | up] tensor per expert ([n_expert][2 n_ff_exp][d], llama.cpp's
         * create_tensor_gate_up_exps): its rows' halves, the same products
         * as its one mul_mat_id split into views */
        if ((st = bind_expert_matrices(b, name, d, 2 * ff, x->gate, err))) return st;
        for (int64_t e = 0; e < n_expert; e++) {
            x->gate[e].rows = ff;
            x->up[e] = x->gate[e];
            x->up[e].data = (const uint8_t *)x->gate[e].data + (size_t)ff * x->gate[e].row_bytes;
        }
    } else {
        if ((st = bind_expert_matrices(b, NAME("ffn_gate_exps.weight"), d, ff, x->gate, err))) return st;
        if ((st = bind_expert_matrices(b, NAME("ffn_up_exps.weight"), d, ff, x->up, err))) return st;
    }
    if ((st = bind_expert_matrices(b, NAME("ffn_down_exps.weight"), ff, d, x->down, err))) return st;
    static const char *const parts[3] = {"gate", "up", "down"};
    const float **scales[3] = {&x->s_gate, &x->s_up, &x->s_down};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.scale", il, parts[i]);
        if ((st = bind_expert_scales(b, name, scales[i], err))) return st;
        if (!ai->moe_exp_scales) *scales[i] = NULL;   /* bound; the family's graph does not apply them (arch.h) */
        const float *unused;
        snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.input_scale", il, parts[i]);
        if ((st = bind_expert_scales(b, name, &unused, err))) return st;
    }
    if (ai->moe_biases) {   /* llama.cpp requires all four (openai-moe.cpp) */
        if ((st = bind_vector(b, NAME("ffn_gate_inp.bias"), n_expert, true, &x->router_b, err))) return st;
        const float *v = x->router_b.data;
        for (int64_t e = 0; e < n_expert; e++)
            if (!isfinite(v[e])) return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': expert %lld's bias %g is not finite", name, (long long)e, v[e]);
        if ((st = bind_expert_biases(b, NAME("ffn_gate_exps.bias"), ff, &x->b_gate, err))) return st;
        if ((st = bind_expert_biases(b, NAME("ffn_up_exps.bias"), ff, &x->b_up, err))) return st;
        if ((st = bind_expert_biases(b, NAME("ffn_down_exps.bias"), d, &x->b_down, err))) return st;
    }
    if (ai->moe_glm_router) {   /* llama.cpp requires it (glm4-moe.cpp); deepseek2's is optional */
        if ((st = bind_vector(b, NAME("exp_probs_b.bias"), n_expert, !ai->moe_deepseek2_router, &x->probs_bias, err))) return st;
        const float *v = x->probs_bias.data;
        for (int64_t e = 0; v && e < n_expert; e++)
            if (!isfinite(v[e])) return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': expert %lld's bias %g is not finite", name, (long long)e, v[e]);
    }
    if (hp->n_ff_shexp > 0) {
        const int64_t sf = hp->n_ff_shexp;
        if ((st = bind_matrix(b, NAME("ffn_gate_shexp.weight"), d, sf, true, &x->sh_gate, err))) return st;
        if ((st = bind_matrix(b, NAME("ffn_up_shexp.weight"), d, sf, true, &x->sh_up, err))) return st;
        if ((st = bind_matrix(b, NAME("ffn_down_shexp.weight"), sf, d, true, &x->sh_down, err))) return st;
        if (ai->shexp == BRISK_SHEXP_GATED && (st = bind_vector(b, NAME("ffn_gate_inp_shexp.weight"), d, true, &x->sh_gate_inp, err))) return st;
        /* llama.cpp binds these and calls build_ffn without them (qwen2moe, granitemoe) */
        for (int i = 0; i < 3; i++) {
            brisk_wscale unused;
            snprintf(name, sizeof name, "blk.%d.ffn_%s_shexp.scale", il, parts[i]);
            if ((st = bind_scale(b, name, &unused, err))) return st;
            snprintf(name, sizeof name, "blk.%d.ffn_%s_shexp.input_scale", il, parts[i]);
            if ((st = bind_input_scale(b, name, err))) return st;
        }
    }
#undef NAME
    return BRISK_OK;
}

/* Multi-head latent attention's tensors (hparams.mla, arch.h mla), as
 * deepseek2.cpp requests them: no biases, scales or Q/K norms. */
static brisk_status bind_mla(binder *b, int il, brisk_layer *L, brisk_error *err) {
    const brisk_hparams *hp = &b->m->hp;
    const int64_t d = hp->n_embd, rank = hp->n_lora_kv, nope = hp->mla_head_k - hp->rope.n_rot;
    const int64_t qd = (int64_t)hp->n_head * hp->mla_head_k;
    char name[96];
    brisk_status st;
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s, il), name)
    if (hp->n_lora_q > 0) {
        if ((st = bind_matrix(b, NAME("attn_q_a.weight"), d, hp->n_lora_q, true, &L->wq_a, err))) return st;
        if ((st = bind_vector(b, NAME("attn_q_a_norm.weight"), hp->n_lora_q, true, &L->q_a_norm, err))) return st;
        if ((st = bind_matrix(b, NAME("attn_q_b.weight"), hp->n_lora_q, qd, true, &L->wq_b, err))) return st;
    } else if ((st = bind_matrix(b, NAME("attn_q.weight"), d, qd, true, &L->wq, err))) {
        return st;
    }
    if ((st = bind_matrix(b, NAME("attn_kv_a_mqa.weight"), d, rank + hp->rope.n_rot, true, &L->wkv_a, err))) return st;
    if ((st = bind_vector(b, NAME("attn_kv_a_norm.weight"), rank, true, &L->kv_a_norm, err))) return st;
    L->wk_b = calloc((size_t)hp->n_head * 2, sizeof(brisk_weight));
    if (!L->wk_b) return brisk_fail(err, BRISK_ERR_NOMEM, "model: out of memory for %d heads", hp->n_head);
    L->wv_b = L->wk_b + hp->n_head;
    if ((st = bind_matrix_slices(b, NAME("attn_k_b.weight"), nope, rank, hp->n_head, L->wk_b, err))) return st;
    if ((st = bind_matrix_slices(b, NAME("attn_v_b.weight"), rank, hp->mla_head_v, hp->n_head, L->wv_b, err))) return st;
#undef NAME
    return BRISK_OK;
}

static brisk_status bind_layer(binder *b, int il, brisk_layer *L, brisk_error *err) {
    const brisk_hparams *hp = &b->m->hp;
    const brisk_arch_info *ai = hp->ai;
    const int64_t d = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, kd = (int64_t)hp->n_head_kv * hp->head_dim,
                  vd = (int64_t)hp->n_head_kv * hp->head_dim_v,
                  od = (int64_t)hp->n_head * (hp->mla ? hp->mla_head_v : hp->head_dim_v);
    const int64_t ff = hp->n_ff;
    char name[96];
    brisk_status st;
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s, il), name)
    const bool pre_attn = ai->attn_norm & BRISK_NORM_PRE, pre_ffn = ai->ffn_norm & BRISK_NORM_PRE;
    if ((st = bind_vector(b, NAME("attn_norm.weight"), d, pre_attn, &L->attn_norm, err))) return st;
    if ((st = bind_vector(b, NAME("attn_norm.bias"), d, false, &L->attn_norm_b, err))) return st;
    if (!ai->ffn_norm_is_post_attention &&
        (st = bind_vector(b, NAME("post_attention_norm.weight"), d, ai->attn_norm & BRISK_NORM_POST, &L->post_attn_norm, err))) return st;
    if (hp->mla) {
        if ((st = bind_mla(b, il, L, err))) return st;
    } else if (hp->fused_qkv) {
        if ((st = bind_matrix(b, NAME("attn_qkv.weight"), d, qd + kd + vd, true, &L->wqkv, err))) return st;
        if ((st = bind_vector(b, NAME("attn_qkv.bias"), qd + kd + vd, false, &L->bqkv, err))) return st;
        if ((st = bind_scale(b, NAME("attn_qkv.scale"), &L->s_qkv, err))) return st;
        if ((st = bind_input_scale(b, NAME("attn_qkv.input_scale"), err))) return st;
    } else {
        if ((st = bind_matrix(b, NAME("attn_q.weight"), d, qd, true, &L->wq, err))) return st;
        if ((st = bind_matrix(b, NAME("attn_k.weight"), d, kd, true, &L->wk, err))) return st;
        if ((st = bind_matrix(b, NAME("attn_v.weight"), d, vd, true, &L->wv, err))) return st;
    }
    /* separate biases may come with a fused matrix too (llama.cpp concatenates them) */
    if (!hp->mla) {
    if ((st = bind_vector(b, NAME("attn_q.bias"), qd, false, &L->bq, err))) return st;
    if ((st = bind_vector(b, NAME("attn_k.bias"), kd, false, &L->bk, err))) return st;
    if ((st = bind_vector(b, NAME("attn_v.bias"), vd, false, &L->bv, err))) return st;
    if ((st = bind_scale(b, NAME("attn_q.scale"), &L->s_q, err))) return st;
    if ((st = bind_scale(b, NAME("attn_k.scale"), &L->s_k, err))) return st;
    if ((st = bind_scale(b, NAME("attn_v.scale"), &L->s_v, err))) return st;
    if ((st = bind_input_scale(b, NAME("attn_q.input_scale"), err))) return st;
    if ((st = bind_input_scale(b, NAME("attn_k.input_scale"), err))) return st;
    if ((st = bind_input_scale(b, NAME("attn_v.input_scale"), err))) return st;
    if ((st = bind_qk_norm(b, NAME("attn_q_norm.weight"), hp->head_dim, qd, &L->q_norm, err))) return st;
    if ((st = bind_qk_norm(b, NAME("attn_k_norm.weight"), hp->head_dim, kd, &L->k_norm, err))) return st;
    }
    if ((st = bind_matrix(b, NAME("attn_output.weight"), od, d, true, &L->wo, err))) return st;
    if ((st = bind_vector(b, NAME("attn_output.bias"), d, false, &L->bo, err))) return st;
    if ((st = bind_scale(b, NAME("attn_output.scale"), &L->s_o, err))) return st;
    if ((st = bind_input_scale(b, NAME("attn_output.input_scale"), err))) return st;
    if (ai->attn_sinks) {
        if ((st = bind_vector(b, NAME("attn_sinks.weight"), hp->n_head, true, &L->attn_sinks, err))) return st;
        const float *v = L->attn_sinks.data;
        for (int32_t h = 0; h < hp->n_head; h++)   /* a NaN would silently blank the head; +-inf has no meaning */
            if (!isfinite(v[h])) return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': head %d's sink %g is not finite", name, h, v[h]);
    }

    if (ai->ffn_norm_is_post_attention) {   /* glm4moe names the FFN's pre-norm so */
        if ((st = bind_vector(b, NAME("post_attention_norm.weight"), d, true, &L->ffn_norm, err))) return st;
    } else {
        if ((st = bind_vector(b, NAME("ffn_norm.weight"), d, pre_ffn, &L->ffn_norm, err))) return st;
        if ((st = bind_vector(b, NAME("ffn_norm.bias"), d, false, &L->ffn_norm_b, err))) return st;
    }
    if ((st = bind_vector(b, NAME("post_ffw_norm.weight"), d, ai->ffn_norm & BRISK_NORM_POST, &L->post_ffn_norm, err))) return st;
    if (hp->n_expert > 0 && il >= hp->n_dense_lead) {
        if ((st = bind_experts(b, il, L, err))) return st;
        goto checks;
    }
    const bool gated = !hp->fused_up && ai->act != BRISK_ACT_GELU;
    if (gated && (st = bind_matrix(b, NAME("ffn_gate.weight"), d, ff, true, &L->w_gate, err))) return st;
    if ((st = bind_matrix(b, NAME("ffn_up.weight"), d, hp->fused_up ? 2 * ff : ff, true, &L->w_up, err))) return st;
    if ((st = bind_matrix(b, NAME("ffn_down.weight"), ff, d, true, &L->w_down, err))) return st;
    if (gated && (st = bind_vector(b, NAME("ffn_gate.bias"), ff, false, &L->b_gate, err))) return st;
    if ((st = bind_vector(b, NAME("ffn_up.bias"), hp->fused_up ? 2 * ff : ff, false, &L->b_up, err))) return st;
    if ((st = bind_vector(b, NAME("ffn_down.bias"), d, false, &L->b_down, err))) return st;
    if (gated && (st = bind_scale(b, NAME("ffn_gate.scale"), &L->s_gate, err))) return st;
    if ((st = bind_scale(b, NAME("ffn_up.scale"), &L->s_up, err))) return st;
    if ((st = bind_scale(b, NAME("ffn_down.scale"), &L->s_down, err))) return st;
    if (!ai->ffn_scales) L->s_gate.on = L->s_up.on = L->s_down.on = false;   /* llama.cpp's graph ignores them (arch.h) */
    if (gated && (st = bind_input_scale(b, NAME("ffn_gate.input_scale"), err))) return st;
    if ((st = bind_input_scale(b, NAME("ffn_up.input_scale"), err))) return st;
    if ((st = bind_input_scale(b, NAME("ffn_down.input_scale"), err))) return st;
checks:
#undef NAME
    if (!!L->bq.data != !!L->bk.data || !!L->bk.data != !!L->bv.data)
        return brisk_fail(err, BRISK_ERR_FORMAT, "blk.%d: attention biases must be all present or all absent", il);
    if (!!L->q_norm.data != !!L->k_norm.data)
        return brisk_fail(err, BRISK_ERR_FORMAT, "blk.%d: attn_q_norm and attn_k_norm must both be present or both absent", il);
    if (L->bqkv.data && L->bq.data)
        return brisk_fail(err, BRISK_ERR_FORMAT, "blk.%d: both attn_qkv.bias and attn_q/k/v.bias", il);
    return BRISK_OK;
}

/* ---- hyperparameters ------------------------------------------------------------------ */

/* An optional float key that must be finite and >= 0 (0: off). */
static brisk_status get_nonneg_f32(const brisk_gguf *g, const char *a, const char *suffix, float *out, brisk_error *err) {
    *out = 0.0f;
    brisk_status st = get_arch_f32(g, a, suffix, out, false, NULL, err);
    if (st) return st;
    if (!(*out >= 0.0f) || !isfinite(*out)) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.%s: %g out of range (a finite number >= 0)", a, suffix, *out);
    return BRISK_OK;
}

/* glm4moe's router keys (arch.h moe_glm_router), with llama.cpp's defaults:
 * sigmoid gating, no weight normalization, no weight scale, no dense layers. */
static brisk_status read_glm_router_hparams(brisk_model_data *m, brisk_error *err) {
    const brisk_gguf *g = m->gguf;
    brisk_hparams *hp = &m->hp;
    const char *a = hp->ai->name;
    char key[128];
    brisk_status st;
    uint32_t gating = 0;
    if ((st = get_arch_u32(g, a, "expert_gating_func", &gating, false, NULL, err))) return st;
    if (gating != 0 && gating != 1 && gating != 2)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "%s.expert_gating_func = %u: brisk supports 1 (softmax) and 2 (sigmoid)", a, gating);
    hp->moe_sigmoid = gating != 1;   /* 0 (absent): sigmoid, as llama.cpp for glm4moe */
    if (gating == 0 && hp->ai->moe_deepseek2_router)   /* deepseek2: softmax, except GLM-4.7 lite (llama.cpp's test) */
        hp->moe_sigmoid = (hp->n_layer + hp->n_layer_nextn == 47 || hp->n_layer + hp->n_layer_nextn == 48) && hp->n_vocab == 154880;
    bool norm = false;
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    if ((st = brisk_gguf_get_bool(g, key, &norm, NULL, err))) return st;
    hp->moe_norm_w = norm;
    if ((st = get_arch_f32(g, a, "expert_weights_scale", &hp->moe_w_scale, false, NULL, err))) return st;
    if (!isfinite(hp->moe_w_scale)) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.expert_weights_scale: %g is not finite", a, hp->moe_w_scale);
    uint32_t lead = 0;
    if ((st = get_arch_u32(g, a, "leading_dense_block_count", &lead, false, NULL, err))) return st;
    if (lead > (uint32_t)hp->n_layer)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.leading_dense_block_count: %u out of range [0, block_count %d]", a, lead, hp->n_layer);
    hp->n_dense_lead = (int32_t)lead;
    return BRISK_OK;
}

/* Mixture of experts: how many experts, how many each token uses, their
 * widths (llama.cpp's keys and defaults for the family, arch.h). */
static brisk_status read_moe_hparams(brisk_model_data *m, brisk_error *err) {
    const brisk_gguf *g = m->gguf;
    brisk_hparams *hp = &m->hp;
    const brisk_arch_info *ai = hp->ai;
    const char *a = ai->name;
    brisk_status st;
    uint32_t n_expert = 0;
    if ((st = get_arch_u32(g, a, "expert_count", &n_expert, false, NULL, err))) return st;
    const bool router = brisk_gguf_find_tensor(g, "blk.0.ffn_gate_inp.weight") != NULL;
    if (ai->moe == BRISK_MOE_NEVER && (n_expert > 0 || router))
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "%s with experts (%s.expert_count = %u): brisk runs %s only as a dense model", a, a,
                          n_expert, a);
    if (ai->moe == BRISK_MOE_ALWAYS && n_expert == 0)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.expert_count is missing or 0: a %s model has experts", a, a);
    if (n_expert == 0) {
        if (router) return brisk_fail(err, BRISK_ERR_FORMAT, "tensor 'blk.0.ffn_gate_inp.weight' (an expert router) but no %s.expert_count", a);
        return BRISK_OK;
    }
    if (n_expert > 1024) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.expert_count: %u out of range [1, 1024]", a, n_expert);
    uint32_t n_used = 0;
    if ((st = get_arch_u32(g, a, "expert_used_count", &n_used, true, NULL, err))) return st;
    if (n_used < 1 || n_used > n_expert)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.expert_used_count: %u out of range [1, expert_count %u]", a, n_used, n_expert);
    uint32_t groups = 0;   /* llama.cpp's build_moe_ffn routes by groups whenever there are more than one */
    if ((st = get_arch_u32(g, a, "expert_group_count", &groups, false, NULL, err))) return st;
    if (groups > 1) {   /* llama.cpp's checks (llama-model.cpp), and its graph's: two experts per group at least (each group scores its top 2) */
        uint32_t used = 0;
        if ((st = get_arch_u32(g, a, "expert_group_used_count", &used, false, NULL, err))) return st;
        if (groups >= n_expert || n_expert % groups || n_expert / groups < 2 || groups > 64)
            return brisk_fail(err, BRISK_ERR_FORMAT,
                              "%s.expert_group_count = %u: must divide expert_count %u into groups of 2 or more (at most 64 groups)", a,
                              groups, n_expert);
        if (used < 1 || used >= groups)
            return brisk_fail(err, BRISK_ERR_FORMAT, "%s.expert_group_used_count = %u out of range [1, expert_group_count %u)", a, used,
                              groups);
        hp->n_expert_groups = (int32_t)groups;
        hp->n_group_used = (int32_t)used;
    }
    hp->n_expert = (int32_t)n_expert;
    hp->n_expert_used = (int32_t)n_used;
    uint32_t v = 0;
    hp->n_ff_exp = hp->n_ff;
    if (ai->moe_ff_key) {
        if ((st = get_arch_u32(g, a, "expert_feed_forward_length", &v, false, NULL, err))) return st;
        hp->n_ff_exp = v ? (int32_t)v : hp->n_ff / hp->n_expert_used;
    }
    if (hp->n_ff_exp < 1 || hp->n_ff_exp > (1 << 22))
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.expert_feed_forward_length: %d out of range", a, hp->n_ff_exp);
    hp->moe_norm_w = ai->moe_norm_w;
    if (ai->moe_glm_router && (st = read_glm_router_hparams(m, err))) return st;
    v = 0;
    if (ai->shexp == BRISK_SHEXP_COUNT) {   /* llama.cpp requires the key (glm4-moe.cpp) */
        if ((st = get_arch_u32(g, a, "expert_shared_count", &v, true, NULL, err))) return st;
        if (v > 64) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.expert_shared_count: %u out of range [0, 64]", a, v);
        hp->n_ff_shexp = (int32_t)v * hp->n_ff_exp;
    }
    v = 0;
    if ((ai->shexp == BRISK_SHEXP_GATED || ai->shexp == BRISK_SHEXP_IF_KEY) &&
        (st = get_arch_u32(g, a, "expert_shared_feed_forward_length", &v, false, NULL, err))) return st;
    if (ai->shexp == BRISK_SHEXP_GATED) hp->n_ff_shexp = v ? (int32_t)v : hp->n_ff;
    if (ai->shexp == BRISK_SHEXP_IF_KEY) hp->n_ff_shexp = (int32_t)v;
    if (hp->n_ff_shexp < 0 || hp->n_ff_shexp > (1 << 22))
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.expert_shared_feed_forward_length: %d out of range", a, hp->n_ff_shexp);
    return BRISK_OK;
}

/* Multi-head latent attention's keys (arch.h mla), checked against the
 * shapes the cache and the kernels need, and deepseek2.cpp's kq scale:
 * with YaRN, llama.cpp folds the magnitude correction into the scale
 * (mscale^2 / sqrt(key_length_mla), mscale from yarn_log_multiplier), and
 * the rotation itself gets attn_factor / (1 + 0.1 ln factor) (llama-context.cpp's
 * DeepSeek-V2 case). */
static brisk_status read_mla_hparams(brisk_model_data *m, brisk_error *err) {
    const brisk_gguf *g = m->gguf;
    brisk_hparams *hp = &m->hp;
    const char *a = hp->ai->name;
    brisk_status st;
    uint32_t v = 0;
    bool found = false;
    hp->mla = true;
    if ((st = get_arch_u32(g, a, "attention.key_length_mla", &v, false, &found, err))) return st;
    if (!found || !v)   /* llama.cpp runs these through its non-absorbed path, with per-head K/V in the cache */
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                          "%s.attention.key_length_mla is missing: an older %s file (attn_kv_b, without the split attn_k_b / attn_v_b) is "
                          "not supported; convert it again with a current convert_hf_to_gguf.py", a, a);
    hp->mla_head_k = (int32_t)v;
    v = 0;
    if ((st = get_arch_u32(g, a, "attention.value_length_mla", &v, true, NULL, err))) return st;
    hp->mla_head_v = (int32_t)v;
    if ((st = get_arch_u32(g, a, "attention.kv_lora_rank", &v, true, NULL, err))) return st;
    hp->n_lora_kv = (int32_t)v;
    v = 0;
    /* the "lite" sizes have a plain attn_q (llama.cpp tells them by layer count and ignores the key) */
    const bool lite = brisk_gguf_find_tensor(g, "blk.0.attn_q.weight") != NULL;
    if (!lite && (st = get_arch_u32(g, a, "attention.q_lora_rank", &v, true, NULL, err))) return st;
    hp->n_lora_q = lite ? 0 : (int32_t)v;
    const int32_t n_rot = hp->rope.n_rot;
    if (hp->n_lora_kv < 16 || hp->n_lora_kv > 4096 || hp->n_lora_kv % 16)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "%s.attention.kv_lora_rank: %d (brisk needs a multiple of 16 up to 4096)", a,
                          hp->n_lora_kv);
    if (!lite && (hp->n_lora_q < 1 || hp->n_lora_q > 65536))
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.attention.q_lora_rank: %d out of range [1, 65536]", a, hp->n_lora_q);
    if (hp->mla_head_k <= n_rot || hp->mla_head_k > 4096)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.attention.key_length_mla: %d must exceed rope.dimension_count %d (and be <= 4096)", a,
                          hp->mla_head_k, n_rot);
    if (hp->mla_head_v < 1 || hp->mla_head_v > 4096)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.attention.value_length_mla: %d out of range [1, 4096]", a, hp->mla_head_v);
    /* the cache's one latent head: K = the latent and k_pe, V = the latent */
    if (hp->head_dim != hp->n_lora_kv + n_rot || hp->head_dim_v != hp->n_lora_kv || (hp->head_dim % 16))
        return brisk_fail(err, BRISK_ERR_FORMAT,
                          "%s.attention.key_length %d / value_length %d: multi-head latent attention needs kv_lora_rank + rope dims "
                          "(%d + %d, a multiple of 16) / kv_lora_rank",
                          a, hp->head_dim, hp->head_dim_v, hp->n_lora_kv, n_rot);
    hp->n_head_kv = 1;
    float log_mul = 0.0f;
    if ((st = get_arch_f32(g, a, "rope.scaling.yarn_log_multiplier", &log_mul, false, &found, err))) return st;
    if (!isfinite(log_mul)) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.rope.scaling.yarn_log_multiplier: %g is not finite", a, log_mul);
    if (found) log_mul /= 0.1f;   /* llama.cpp cancels the convert script's factor */
    brisk_rope *r = &hp->rope;
    if (r->ext_factor != 0.0f && log_mul != 0.0f) {
        float attn_key = 1.0f;
        if ((st = get_arch_f32(g, a, "rope.scaling.attn_factor", &attn_key, false, NULL, err))) return st;
        r->attn_factor = 1.0f;   /* get_mscale(f, m) / get_mscale(f, m) */
        r->attn_factor *= 1.0f / (1.0f + 0.1f * logf(1.0f / r->freq_scale));
        r->attn_factor *= attn_key;
    }
    const float attn_factor_org = r->attn_factor * (1.0f + 0.1f * logf(1.0f / r->freq_scale));
    const float mscale = attn_factor_org * (1.0f + 0.1f * log_mul * logf(1.0f / r->freq_scale));
    hp->kq_scale = 1.0f * mscale * mscale / sqrtf((float)hp->mla_head_k);
    hp->q_scale = 1.0f;
    return BRISK_OK;
}

/* What the architecture's table row asks of the metadata: scales, softcaps,
 * the sliding window and its RoPE, fused projections. */
static brisk_status read_arch_hparams(brisk_model_data *m, brisk_error *err) {
    const brisk_gguf *g = m->gguf;
    brisk_hparams *hp = &m->hp;
    const brisk_arch_info *ai = hp->ai;
    const char *a = ai->name;
    brisk_status st;
    uint32_t nextn = 0;
    if (ai->nextn_skip && (st = get_arch_u32(g, a, "nextn_predict_layers", &nextn, false, NULL, err))) return st;
    if (nextn >= (uint32_t)hp->n_layer)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.nextn_predict_layers: %u leaves no layer of block_count %d to run", a, nextn, hp->n_layer);
    hp->n_layer_nextn = (int32_t)nextn;
    hp->n_layer -= (int32_t)nextn;
    if ((st = read_moe_hparams(m, err))) return st;
    if (ai->unsupported_nonzero)
        for (const char *const *k = ai->unsupported_nonzero; *k; k++) {
            char key[128];
            snprintf(key, sizeof key, "%s.%s", a, *k);
            const brisk_gguf_kv *kv = brisk_gguf_find(g, key);
            if (!kv) continue;
            float fv = 0.0f;
            uint32_t uv = 0;
            bool nonzero = true;   /* a value of another type is refused too */
            if (brisk_gguf_get_f32(g, key, &fv, NULL, NULL) == BRISK_OK) nonzero = fv != 0.0f;
            else if (brisk_gguf_get_u32(g, key, &uv, NULL, NULL) == BRISK_OK) nonzero = uv != 0;
            if (nonzero) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "%s is set: this %s feature is not supported", key, a);
        }
    hp->fused_qkv = brisk_gguf_find_tensor(g, "blk.0.attn_qkv.weight") != NULL;
    const brisk_gguf_tensor *up0 = brisk_gguf_find_tensor(g, "blk.0.ffn_up.weight");
    hp->fused_up = ai->act != BRISK_ACT_GELU && !brisk_gguf_find_tensor(g, "blk.0.ffn_gate.weight") && up0 && up0->n_dims == 2 && up0->ne[1] == 2 * (int64_t)hp->n_ff;

    float scale = 1.0f / sqrtf((float)hp->head_dim);
    if (ai->attn_scale == BRISK_ASCALE_GEMMA && hp->n_layer == ai->gemma_27b_layers)
        scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));   /* the 27B sizes (gemma_pytorch's config) */
    if (ai->attn_scale == BRISK_ASCALE_KEY) {
        float key = 0.0f;
        if ((st = get_nonneg_f32(g, a, "attention.scale", &key, err))) return st;
        if (key != 0.0f) scale = key;
    }
    hp->kq_scale = ai->q_prescale ? 1.0f : scale;
    hp->q_scale = ai->q_prescale ? scale : 1.0f;
    if (ai->mla && (st = read_mla_hparams(m, err))) return st;
    if (ai->attn_softcap && (st = get_nonneg_f32(g, a, "attn_logit_softcapping", &hp->attn_softcap, err))) return st;
    if (ai->final_softcap && (st = get_nonneg_f32(g, a, "final_logit_softcapping", &hp->final_softcap, err))) return st;
    if (ai->act == BRISK_ACT_SWIGLU_OAI) hp->act_alpha = ai->act_alpha, hp->act_limit = ai->act_limit;
    hp->embd_scale = ai->embd_scale_sqrt ? sqrtf((float)hp->n_embd) : 1.0f;
    if (ai->granite_scales) {
        float e = 0.0f;
        if ((st = get_nonneg_f32(g, a, "embedding_scale", &e, err))) return st;
        if (e != 0.0f) hp->embd_scale = e;
        if ((st = get_nonneg_f32(g, a, "residual_scale", &hp->residual_scale, err))) return st;
        if ((st = get_nonneg_f32(g, a, "logit_scale", &hp->logit_scale, err))) return st;
    }

    if (ai->mrope_sections) {
        char key[128];
        snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
        const brisk_gguf_kv *kv = brisk_gguf_find(g, key);
        if (kv) {
            const brisk_gguf_type et = kv->value.type == BRISK_GGUF_ARRAY ? kv->value.v.arr.elem_type : kv->value.type;
            if (kv->value.type != BRISK_GGUF_ARRAY || kv->value.v.arr.count != 4 || (et != BRISK_GGUF_INT32 && et != BRISK_GGUF_UINT32))
                return brisk_fail(err, BRISK_ERR_FORMAT, "'%s': expected 4 integers", key);
            int64_t sec[4], sum = 0;
            for (int i = 0; i < 4; i++) {
                sec[i] = brisk_gguf_arr_int(&kv->value, (uint64_t)i);
                if (sec[i] < 0 || sec[i] > 65536) return brisk_fail(err, BRISK_ERR_FORMAT, "'%s': section %d = %lld out of range", key, i, (long long)sec[i]);
                sum += sec[i];
            }
            if (sec[0] > 0 && sec[1] > 0) {
                if (sum > hp->rope.n_rot) return brisk_fail(err, BRISK_ERR_FORMAT, "'%s': sections add up to %lld > %d rotated dims", key, (long long)sum, hp->rope.n_rot);
                for (int64_t k = 0; k < hp->rope.n_rot / 2; k++)
                    if (k % sum >= sec[0] + sec[1] + sec[2])
                        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "'%s': rotated pair %lld falls in the fourth (vision) section", key, (long long)k);
                hp->rope.layout = BRISK_ROPE_NEOX;
            }
        }
    }

    /* sliding window: its size, and which layers (a pattern array, or every
     * layer but each n-th) */
    bool swa = false;
    uint32_t window = ai->swa_window_default;
    bool found = false;
    if (ai->swa != BRISK_SWA_NONE &&
        (st = get_arch_u32(g, a, "attention.sliding_window", &window, ai->swa == BRISK_SWA_KEY_REQUIRED, &found, err))) return st;
    if (ai->swa == BRISK_SWA_ALWAYS || ai->swa == BRISK_SWA_KEY_REQUIRED) swa = true;
    if (ai->swa == BRISK_SWA_IF_KEY) swa = found && window > 0;
    if (ai->swa == BRISK_SWA_IF_64_LAYERS) swa = hp->n_layer == 64;
    if (swa && (window < 1 || window > INT32_MAX))
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.attention.sliding_window: %u out of range", a, window);
    hp->swa_window = swa ? (int32_t)window : 0;
    hp->rope_swa = hp->rope;
    if (swa) {
        float base = ai->swa_rope_base_default != 0.0f ? ai->swa_rope_base_default : hp->rope.freq_base;
        if ((st = get_arch_f32(g, a, "rope.freq_base_swa", &base, false, NULL, err))) return st;
        if (!(base > 1.0f) || !isfinite(base))
            return brisk_fail(err, BRISK_ERR_FORMAT, "%s.rope.freq_base_swa: %g out of range (a finite number > 1)", a, base);
        hp->rope_swa.freq_base = base;
        if (!ai->swa_rope_scale_inherit) hp->rope_swa.freq_scale = 1.0f;
    }
    return BRISK_OK;
}

/* Per-layer data: which layers are windowed (ARCH.attention.sliding_window_pattern:
 * an array of per-layer flags, or n = every layer but each n-th), and which rotate. */
static brisk_status set_layer_plan(brisk_model_data *m, brisk_error *err) {
    brisk_hparams *hp = &m->hp;
    const brisk_arch_info *ai = hp->ai;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", ai->name);
    const brisk_gguf_kv *kv = hp->swa_window ? brisk_gguf_find(m->gguf, key) : NULL;
    uint32_t n_pattern = ai->swa_pattern_default;
    const bool per_layer = kv && kv->value.type == BRISK_GGUF_ARRAY;
    if (per_layer) {
        const brisk_gguf_type et = kv->value.v.arr.elem_type;
        if (et != BRISK_GGUF_BOOL && et != BRISK_GGUF_UINT32 && et != BRISK_GGUF_INT32 && et != BRISK_GGUF_UINT8 && et != BRISK_GGUF_INT8)
            return brisk_fail(err, BRISK_ERR_FORMAT, "'%s': expected an array of flags, found arr[%s]", key, brisk_gguf_type_name(et));
        if (kv->value.v.arr.count != (uint64_t)hp->n_layer)
            return brisk_fail(err, BRISK_ERR_FORMAT, "'%s': %llu entries for %d layers", key, (unsigned long long)kv->value.v.arr.count,
                              hp->n_layer);
    } else if (kv) {
        brisk_status st = brisk_gguf_get_u32(m->gguf, key, &n_pattern, NULL, err);
        if (st) return st;
    }
    for (int il = 0; il < hp->n_layer; il++) {
        brisk_layer *L = &m->w.layers[il];
        bool windowed = false;
        if (hp->swa_window)
            windowed = per_layer ? brisk_gguf_arr_int(&kv->value, (uint64_t)il) != 0
                                 : n_pattern == 0 || (uint32_t)il % n_pattern < n_pattern - 1;
        L->window = windowed ? hp->swa_window : 0;
        L->rope_swa = windowed;
        L->rope = true;
        if (ai->nope == BRISK_NOPE_EVERY_4TH) L->rope = (il + 1) % 4 != 0;
        if (ai->nope == BRISK_NOPE_FULL_LAYERS && hp->swa_window) L->rope = windowed;
    }
    return BRISK_OK;
}

static brisk_status read_hparams(brisk_model_data *m, brisk_error *err) {
    const brisk_gguf *g = m->gguf;
    brisk_hparams *hp = &m->hp;
    brisk_status st;
    brisk_str arch;
    bool found = false;
    if ((st = brisk_gguf_get_str(g, "general.architecture", &arch, &found, err))) return st;
    if (!found) return brisk_fail(err, BRISK_ERR_FORMAT, "missing metadata key 'general.architecture'");
    const brisk_arch_info *ai = brisk_arch_find(arch.ptr, arch.len);
    if (!ai) {
        char names[256], shown[68];
        brisk_arch_names(names, sizeof names);
        brisk_gguf_show(arch, shown, sizeof shown);
        const char *why = brisk_arch_missing_reason(arch.ptr, arch.len);
        if (why) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "architecture '%s' is not supported: %s", shown, why);
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "architecture '%s' is not supported (supported: %s)", shown, names);
    }
    hp->ai = ai;
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", ai->name);
    const char *a = ai->name;

    uint32_t v;
    if ((st = get_arch_u32(g, a, "embedding_length", &v, true, NULL, err))) return st;
    hp->n_embd = (int32_t)v;
    if ((st = get_arch_u32(g, a, "block_count", &v, true, NULL, err))) return st;
    hp->n_layer = (int32_t)v;
    if ((st = get_arch_u32(g, a, "feed_forward_length", &v, true, NULL, err))) return st;
    hp->n_ff = (int32_t)v;
    if ((st = get_arch_u32(g, a, "attention.head_count", &v, true, NULL, err))) return st;
    hp->n_head = (int32_t)v;
    v = (uint32_t)hp->n_head;
    if ((st = get_head_count_kv(g, a, &v, err))) return st;
    hp->n_head_kv = (int32_t)v;
    v = 0;
    if ((st = get_arch_u32(g, a, "context_length", &v, false, NULL, err))) return st;
    hp->n_ctx_train = (int32_t)(v ? v : 2048);

    /* validate the basic shape before deriving anything from it */
    if (hp->n_embd < 1 || hp->n_embd > (1 << 20)) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.embedding_length: %d out of range", a, hp->n_embd);
    if (hp->n_layer < 1 || hp->n_layer > 4096) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.block_count: %d out of range", a, hp->n_layer);
    if (hp->n_ff < 1 || hp->n_ff > (1 << 22)) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.feed_forward_length: %d out of range", a, hp->n_ff);
    if (hp->n_head < 1 || hp->n_head > 65536) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.attention.head_count: %d out of range", a, hp->n_head);
    if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv != 0)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.attention.head_count_kv: %d does not divide head_count %d", a, hp->n_head_kv, hp->n_head);
    if (hp->n_ctx_train < 1) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.context_length: %d out of range", a, hp->n_ctx_train);

    v = (uint32_t)(hp->n_embd / hp->n_head);
    if ((st = get_arch_u32(g, a, "attention.key_length", &v, false, NULL, err))) return st;
    hp->head_dim = (int32_t)v;
    if ((st = get_arch_u32(g, a, "attention.value_length", &v, false, NULL, err))) return st;
    hp->head_dim_v = (int32_t)v;
    if (hp->head_dim < 2 || hp->head_dim > 4096 || hp->head_dim % 2)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.attention.key_length: %d out of range", a, hp->head_dim);
    if (hp->head_dim_v != hp->head_dim && !ai->mla)   /* MLA: checked with its keys (read_mla_hparams) */
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "%s.attention.value_length %d != key_length %d", a, hp->head_dim_v, hp->head_dim);

    hp->norm_eps = 1e-5f;
    const char *eps_key = ai->layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
    if ((st = get_arch_f32(g, a, eps_key, &hp->norm_eps, true, NULL, err))) return st;
    if (!(hp->norm_eps > 0 && hp->norm_eps < 1)) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.%s: %g out of range", a, eps_key, hp->norm_eps);

    /* RoPE: layout from the architecture, the rest from metadata (llama.cpp defaults). */
    brisk_rope *r = &hp->rope;
    r->layout = ai->rope_layout;
    v = (uint32_t)hp->head_dim;
    if ((st = get_arch_u32(g, a, "rope.dimension_count", &v, false, NULL, err))) return st;
    r->n_rot = (int)v;
    if (r->n_rot < 2 || r->n_rot > hp->head_dim || r->n_rot % 2)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.rope.dimension_count: %d must be even and <= head_dim %d", a, r->n_rot, hp->head_dim);
    r->freq_base = 10000.0f;
    if ((st = get_arch_f32(g, a, "rope.freq_base", &r->freq_base, false, NULL, err))) return st;
    if (!(r->freq_base > 1.0f) || !isfinite(r->freq_base))
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.rope.freq_base: %g out of range (a finite number > 1)", a, r->freq_base);

    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    brisk_str stype = {"linear", 6};
    if ((st = brisk_gguf_get_str(g, key, &stype, NULL, err))) return st;
    float factor = 0.0f;
    if ((st = get_arch_f32(g, a, "rope.scaling.factor", &factor, false, NULL, err))) return st;
    if (factor == 0.0f && (st = get_arch_f32(g, a, "rope.scale_linear", &factor, false, NULL, err))) return st;
    if (factor < 0 || !isfinite(factor)) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.rope.scaling.factor: %g out of range", a, factor);
    float attn_factor = 1.0f;
    if ((st = get_arch_f32(g, a, "rope.scaling.attn_factor", &attn_factor, false, NULL, err))) return st;
    if (!(attn_factor > 0.0f) || !isfinite(attn_factor))
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.rope.scaling.attn_factor: %g out of range (a finite number > 0)", a, attn_factor);
    v = (uint32_t)hp->n_ctx_train;
    if ((st = get_arch_u32(g, a, "rope.scaling.original_context_length", &v, false, NULL, err))) return st;
    if (v < 1 || v > INT32_MAX)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s.rope.scaling.original_context_length: %u out of range [1, %d]", a, v, INT32_MAX);
    hp->rope_n_ctx_orig = (int32_t)v;
    r->freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
    r->ext_factor = 0.0f;
    r->attn_factor = 1.0f;
    if (brisk_str_eq(stype, "none")) {
        r->freq_scale = 1.0f;
    } else if (brisk_str_eq(stype, "yarn")) {
        /* llama.cpp: ext_factor 1, beta_fast 32, beta_slow 1; the magnitude
         * correction is folded so that net mscale = 0.1 ln(factor) + 1. */
        float beta_fast = 32.0f, beta_slow = 1.0f;
        if ((st = get_arch_f32(g, a, "rope.scaling.yarn_ext_factor", &r->ext_factor, false, &found, err))) return st;
        /* negative means "not set" in llama.cpp (its model saver writes -1): then 1 */
        if (!found || r->ext_factor < 0.0f) r->ext_factor = 1.0f;
        if ((st = get_arch_f32(g, a, "rope.scaling.yarn_beta_fast", &beta_fast, false, NULL, err))) return st;
        if ((st = get_arch_f32(g, a, "rope.scaling.yarn_beta_slow", &beta_slow, false, NULL, err))) return st;
        /* llama.cpp's defaults are 1 / 32 / 1; a NaN here would silently turn every rotation into NaN */
        if (!(r->ext_factor >= 0.0f && r->ext_factor <= 64.0f))
            return brisk_fail(err, BRISK_ERR_FORMAT, "%s.rope.scaling.yarn_ext_factor: %g out of range [0, 64]", a, r->ext_factor);
        if (!(beta_fast > 0.0f && beta_fast <= 65536.0f))
            return brisk_fail(err, BRISK_ERR_FORMAT, "%s.rope.scaling.yarn_beta_fast: %g out of range (0, 65536]", a, beta_fast);
        if (!(beta_slow > 0.0f && beta_slow <= 65536.0f))
            return brisk_fail(err, BRISK_ERR_FORMAT, "%s.rope.scaling.yarn_beta_slow: %g out of range (0, 65536]", a, beta_slow);
        if (r->ext_factor != 0.0f) {
            const float f = 1.0f / r->freq_scale;
            r->attn_factor = f <= 1.0f ? 1.0f : 0.1f * logf(f) + 1.0f;
            r->attn_factor *= 1.0f / (1.0f + 0.1f * logf(f));
        }
        brisk_rope_yarn_corr_dims(r->n_rot, hp->rope_n_ctx_orig, r->freq_base, beta_fast, beta_slow, r->corr_dims);
    } else if (!brisk_str_eq(stype, "linear")) {
        int n = stype.len > 32 ? 32 : (int)stype.len;
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "%s: scaling type '%.*s' is not supported (none, linear, yarn)", key, n, stype.ptr);
    }
    r->attn_factor *= attn_factor;

    /* vocabulary size: the embedding's row count is authoritative */
    const brisk_gguf_tensor *te = brisk_gguf_find_tensor(g, "token_embd.weight");
    if (!te) return brisk_fail(err, BRISK_ERR_FORMAT, "missing tensor 'token_embd.weight'");
    if (te->n_dims != 2 || te->ne[0] != hp->n_embd || te->ne[1] < 1 || te->ne[1] > (1 << 24))
        return brisk_fail(err, BRISK_ERR_FORMAT, "tensor 'token_embd.weight': shape [%lld, %lld], expected [%d, n_vocab]",
                          (long long)te->ne[0], (long long)te->ne[1], hp->n_embd);
    hp->n_vocab = (int32_t)te->ne[1];

    hp->tied_output = brisk_gguf_find_tensor(g, "output.weight") == NULL;
    return read_arch_hparams(m, err);
}

/* The NextN blocks' tensors: those llama.cpp requests for a block it skips
 * (glm4-moe.cpp's list with TENSOR_SKIP, which also drops the per-tensor
 * scales) are accepted and never read (arch.h nextn_skip); any other tensor
 * of those blocks stays unused and is refused, as llama.cpp's tensor count
 * refuses it. */
static void accept_nextn_blocks(binder *b) {
    static const char *const skipped[] = {
        "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_qkv.weight", "attn_q.bias", "attn_k.bias",
        "attn_v.bias", "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight", "post_attention_norm.weight",
        "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",   /* a dense block (below leading_dense_block_count) */
        "ffn_gate_inp.weight", "exp_probs_b.bias", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
        "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight",
        "nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight", "nextn.embed_tokens.weight",
        "nextn.shared_head_head.weight", "nextn.shared_head_norm.weight"};
    const brisk_hparams *hp = &b->m->hp;
    char name[96];
    for (int32_t il = hp->n_layer; il < hp->n_layer + hp->n_layer_nextn; il++)
        for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++) {
            const bool dense_ffn = i >= 12 && i < 15, moe_ffn = i >= 15 && i < 23;
            const bool shared = i >= 20 && i < 23;
            if ((dense_ffn && il >= hp->n_dense_lead) || (moe_ffn && il < hp->n_dense_lead) || (shared && hp->n_ff_shexp == 0)) continue;
            snprintf(name, sizeof name, "blk.%d.%s", il, skipped[i]);
            (void)find_tensor(b, name);
        }
}

/* Every tensor of the file must be bound: one nothing reads would be a part
 * of the model silently dropped (a bias, a scale, a norm this code does not
 * know), so the load fails naming them (the first few and the count). */
static brisk_status check_all_used(binder *b, brisk_error *err) {
    const brisk_gguf *g = b->m->gguf;
    char list[384];
    size_t n = 0;
    uint64_t count = 0;
    list[0] = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        if (b->used[i]) continue;
        if (count++ < 4 && n < sizeof list) {
            const brisk_str nm = g->tensors[i].name;
            const int w = snprintf(list + n, sizeof list - n, "%s'%.*s'", n ? ", " : "", (int)(nm.len > 64 ? 64 : nm.len), nm.ptr);
            if (w > 0) n += (size_t)w;
        }
    }
    if (!count) return BRISK_OK;
    return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "%llu tensor(s) of this %s file are not used by brisk's %s graph: %s%s",
                      (unsigned long long)count, b->m->hp.arch_name, b->m->hp.arch_name, list, count > 4 ? ", ..." : "");
}

/* ---- repacking for the packed GEMM -------------------------------------------------------
 * Matrices whose type the CPU's packed-GEMM table handles are copied into
 * 16-row interleaved groups (kernels.h). The canonical pages they came from
 * are then dropped from memory (MADV_DONTNEED on the private read-only
 * mapping: they would be read back from the file if touched), so the model
 * holds one copy of its weights. When the output matrix is the embedding
 * table (tied), the output matmul reads the packed copy and embedding lookups
 * fault single rows of the canonical table back in from the file. */
/* One matrix to pack: its copy is allocated up front (serially), then the
 * pool's workers fill it in chunks of PACK_CHUNK_GROUPS groups taken from one
 * counter over all matrices, so a big matrix (the output) does not leave the
 * other workers idle. Groups are packed independently, so the copy's bytes do
 * not depend on the thread count. The worker that packs a matrix's last chunk
 * drops its canonical pages, so at most a few matrices are held twice. */
#define PACK_CHUNK_GROUPS 16
#define PACK_PER_LAYER 15   /* matrices per layer pack_weights may pack (its ws list), besides the experts' and MLA's heads' */

typedef struct pack_job {
    brisk_weight *w;
    int64_t groups, first_chunk;   /* chunks first_chunk .. first_chunk + ceil(groups / PACK_CHUNK_GROUPS) - 1 */
    size_t src_group_bytes;
    atomic_int_fast64_t chunks_left;
} pack_job;

typedef struct pack_plan {
    pack_job *jobs;
    int n_jobs;
    int64_t n_chunks;
    atomic_int_fast64_t next_chunk;
} pack_plan;

/* The canonical pages of w's packed rows back to the file (MADV_DONTNEED on the
 * private read-only mapping: they would be read back if touched). */
static void drop_canonical(const brisk_weight *w, size_t bytes) {
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    const uintptr_t lo = ((uintptr_t)w->data + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    const uintptr_t hi = ((uintptr_t)w->data + bytes) / (uintptr_t)page * (uintptr_t)page;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void pack_worker(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    pack_plan *pl = ctx;
    int j = 0;   /* chunks are taken in increasing order, so each worker's job index only moves forward */
    for (;;) {
        const int64_t c = atomic_fetch_add_explicit(&pl->next_chunk, 1, memory_order_relaxed);
        if (c >= pl->n_chunks) return;
        while (j + 1 < pl->n_jobs && pl->jobs[j + 1].first_chunk <= c) j++;
        pack_job *job = &pl->jobs[j];
        brisk_weight *w = job->w;
        const int64_t g0 = (c - job->first_chunk) * PACK_CHUNK_GROUPS;
        const int64_t g1 = g0 + PACK_CHUNK_GROUPS < job->groups ? g0 + PACK_CHUNK_GROUPS : job->groups;
        for (int64_t i = g0; i < g1; i++)
            brisk_pack_rows(w->type, (uint8_t *)w->packed + (size_t)i * w->packed_group_bytes,
                            (const uint8_t *)w->data + (size_t)i * job->src_group_bytes, w->row_bytes, w->cols);
        if (atomic_fetch_sub_explicit(&job->chunks_left, 1, memory_order_acq_rel) == 1)
            drop_canonical(w, (size_t)job->groups * job->src_group_bytes);
    }
}

/* Plan w's packed copy when the CPU's packed-GEMM table takes its type: the
 * job and its chunks; the copy is allocated by pack_alloc (or mapped from the
 * pack cache) and its rows written later by pack_worker. */
static void pack_plan_add(brisk_weight *w, pack_plan *pl) {
    const brisk_gemm_kernels *g = brisk_gemm_best();
    if (!g || !g->gemm[w->type] || !brisk_pack_supported(w->type) || w->rows < BRISK_GEMM_ROWS) return;
    const int64_t groups = w->rows / BRISK_GEMM_ROWS;
    const size_t gbytes = brisk_pack_group_bytes(w->type, w->cols);
    if (gbytes == 0) return;   /* a width this type's layout cannot pack (F16: cols % 16) */
    w->packed_group_bytes = gbytes;
    pack_job *job = &pl->jobs[pl->n_jobs++];
    job->w = w;
    job->groups = groups;
    job->first_chunk = pl->n_chunks;
    job->src_group_bytes = (size_t)BRISK_GEMM_ROWS * w->row_bytes;
    const int64_t chunks = (groups + PACK_CHUNK_GROUPS - 1) / PACK_CHUNK_GROUPS;
    atomic_init(&job->chunks_left, chunks);
    pl->n_chunks += chunks;
}

/* Allocate a planned job's packed copy. */
static brisk_status pack_alloc(pack_job *job, brisk_error *err) {
    brisk_weight *w = job->w;
    const size_t pbytes = (size_t)job->groups * w->packed_group_bytes;
    /* Copies of 2 MiB or more start on a 2 MiB boundary and ask for transparent huge pages
     * (THP is often in "madvise" mode) before the first write: decode streams every weight
     * once per token, and 4 KiB pages cost a TLB miss per page. Only whole 2 MiB pages inside
     * the copy are advised, so its resident size does not grow. */
    const size_t huge = (size_t)2 << 20, abytes = (pbytes + 63) / 64 * 64;
    uint8_t *p = aligned_alloc(pbytes >= huge ? huge : 64, pbytes >= huge ? (abytes + huge - 1) / huge * huge : abytes);
    if (!p) return brisk_fail(err, BRISK_ERR_NOMEM, "model: out of memory repacking a %lld x %lld matrix", (long long)w->rows,
                              (long long)w->cols);
    if (pbytes >= huge) madvise(p, pbytes / huge * huge, MADV_HUGEPAGE);   /* advice only: failure is harmless */
    w->packed = p;
    return BRISK_OK;
}

/* Threads for packing at load: $BRISK_THREADS when it is a valid count (the
 * CLI's default for -t), else every CPU. Loading runs before any context, so
 * it has no -t of its own; the pool is the shared one a context of that size
 * then reuses. */
static int pack_threads(void) {
    const char *env = getenv("BRISK_THREADS");
    if (env && *env) {
        char *end = NULL;
        const long v = strtol(env, &end, 10);
        if (*end == 0 && v >= 1 && v <= 1024) return (int)v;
    }
    return brisk_cpu_count();
}

/* Below this many packed bytes one thread packs (starting workers would cost more than they
 * save); $BRISK_PACK_PARALLEL_MIN_BYTES overrides it (tests set 0, so the tiny models pack on
 * the pool too). */
static brisk_status pack_parallel_min_bytes(double *out, brisk_error *err) {
    *out = (double)((size_t)8 << 20);
    const char *env = getenv("BRISK_PACK_PARALLEL_MIN_BYTES");
    if (!env) return BRISK_OK;
    char *end = NULL;
    *out = strtod(env, &end);
    if (end == env || *end || !(*out >= 0.0))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "BRISK_PACK_PARALLEL_MIN_BYTES='%s' is not a non-negative number", env);
    return BRISK_OK;
}

/* ---- the packed-layout cache ($BRISK_PACK_CACHE; format and checks in pack_cache.c) ----
 * A cache that matches this model, build and kernel table gives the packed
 * copies as a read-only mapping of its file; anything else (absent, stale,
 * foreign, corrupt) is a note, a repack, and a rewrite of the cache. */
typedef struct pack_cache_use {
    bool on;
    char path[4096];
    char why[700];            /* why the file there was refused; "" when it was absent */
    brisk_pack_key key;
    brisk_pack_entry *entries;
} pack_cache_use;

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }   /* notes print %.1f */

/* Set (append = false) or extend the model's pack-cache note; a long path is cut, never overrun. */
static void pack_note(brisk_model_data *m, bool append, const char *fmt, ...) BRISK_PRINTF(3, 4);
static void pack_note(brisk_model_data *m, bool append, const char *fmt, ...) {
    const size_t at = append ? strlen(m->pack_cache_note) : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->pack_cache_note + at, sizeof m->pack_cache_note - at, fmt, ap);
    va_end(ap);
}

/* Map the cache when it matches; false (with pc->on when one should be written) otherwise. */
static bool pack_cache_try(brisk_model_data *m, const pack_plan *pl, const char *model_path, pack_cache_use *pc) {
    const brisk_gemm_kernels *gk = brisk_gemm_best();
    if (!brisk_pack_cache_path(model_path, gk ? gk->isa : "ref", m->header_hash, pc->path, sizeof pc->path)) {
        const char *env = getenv("BRISK_PACK_CACHE");
        if (env && *env && strcmp(env, "off")) pack_note(m, false, "not used: the cache's path for %s is too long", model_path);
        return false;
    }
    if (pl->n_jobs == 0) {
        pack_note(m, false, "not used: the %s kernels pack none of this model's weights", brisk_kernels_best()->isa);
        return false;
    }
    if (m->gguf->n_files > 1) {
        pack_note(m, false, "not used: split models are not cached");
        return false;
    }
    brisk_error e = {0};
    if (brisk_pack_cache_key(model_path, m->gguf, &pc->key, &e)) {
        pack_note(m, false, "not used: %s", e.msg);
        return false;
    }
    if (!(pc->entries = calloc((size_t)pl->n_jobs, sizeof *pc->entries))) {
        pack_note(m, false, "not used: out of memory");
        return false;
    }
    for (int i = 0; i < pl->n_jobs; i++) {
        const brisk_weight *w = pl->jobs[i].w;
        pc->entries[i] = (brisk_pack_entry){.src_offset = (uint64_t)((const uint8_t *)w->data - m->gguf->buf), .type = w->type, .rows = w->rows,
                                            .cols = w->cols, .groups = (uint64_t)pl->jobs[i].groups, .group_bytes = w->packed_group_bytes};
    }
    pc->on = true;
    if (access(pc->path, F_OK) != 0) {   /* absent: written after the repack, when its directory takes a file */
        char dir[4096];
        const char *slash = strrchr(pc->path, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - pc->path) + 1 : 1, slash ? pc->path : ".");
        if (access(dir, W_OK | X_OK) != 0) {   /* say so now, before hashing the model for a file that cannot be written */
            pack_note(m, false, "cannot write %s: %s: %s; repacked without it", pc->path, dir, strerror(errno));
            pc->on = false;
        }
        return false;
    }
    bool changed = false;
    if (brisk_pack_cache_open(pc->path, &pc->key, m->gguf, pc->entries, (uint64_t)pl->n_jobs, &m->pack_file, &changed, &e)) {
        snprintf(pc->why, sizeof pc->why, "%s", e.msg);
        return false;
    }
    if (!(m->pack_cached = calloc((size_t)pl->n_jobs, sizeof *m->pack_cached))) {
        brisk_pack_cache_close(&m->pack_file);
        snprintf(pc->why, sizeof pc->why, "out of memory");
        return false;
    }
    const void **data = changed ? calloc((size_t)pl->n_jobs, sizeof *data) : NULL;
    for (int i = 0; i < pl->n_jobs; i++) {
        m->pack_cached[i] = pl->jobs[i].w;
        pl->jobs[i].w->packed = (void *)(m->pack_file.data + pc->entries[i].offset);
        if (data) data[i] = pl->jobs[i].w->packed;
    }
    m->n_pack_cached = (size_t)pl->n_jobs;
    pack_note(m, false, "used %s (%.1f MiB)", pc->path, mib(m->packed_bytes));
    if (changed) {   /* the model file is another inode or was touched, with the same data: record it */
        if (!data || brisk_pack_cache_write(pc->path, &pc->key, m->gguf, pc->entries, data, (uint64_t)pl->n_jobs, &e))
            pack_note(m, true, " after hashing the model's data (its file identity changed; rewriting the cache failed: %s)",
                     data ? e.msg : "out of memory");
        else pack_note(m, true, " after hashing the model's data (its file identity changed; the cache now records the new one)");
    }
    free(data);
    return true;
}

/* Write the freshly packed copies to the cache; the outcome goes to the note. */
static void pack_cache_store(brisk_model_data *m, const pack_plan *pl, pack_cache_use *pc) {
    const void **data = calloc((size_t)pl->n_jobs, sizeof *data);
    brisk_error e = {0};
    for (int i = 0; data && i < pl->n_jobs; i++) data[i] = pl->jobs[i].w->packed;
    const brisk_status st = data ? brisk_pack_cache_write(pc->path, &pc->key, m->gguf, pc->entries, data, (uint64_t)pl->n_jobs, &e)
                                 : brisk_fail(&e, BRISK_ERR_NOMEM, "out of memory");
    free(data);
    if (pc->why[0] && !st) pack_note(m, false, "%s refused (%s); repacked and rewrote it", pc->path, pc->why);
    else if (pc->why[0]) pack_note(m, false, "%s refused (%s); repacked (rewriting it failed: %s)", pc->path, pc->why, e.msg);
    else if (!st) pack_note(m, false, "wrote %s (%.1f MiB; later loads map it instead of repacking)", pc->path, mib(m->packed_bytes));
    else pack_note(m, false, "cannot write %s: %s; repacked without it", pc->path, e.msg);
}

static brisk_status pack_weights(brisk_model_data *m, const char *model_path, brisk_error *err) {
    brisk_status st = BRISK_OK;
    const size_t per_layer = (size_t)PACK_PER_LAYER + 3 * (size_t)m->hp.n_expert + (m->hp.mla ? 2 * (size_t)m->hp.n_head : 0);
    pack_plan pl = {.jobs = calloc((size_t)m->hp.n_layer * per_layer + 1, sizeof(pack_job))};
    if (!pl.jobs) return brisk_fail(err, BRISK_ERR_NOMEM, "model: out of memory planning the repack");
    for (int il = 0; il < m->hp.n_layer; il++) {
        brisk_layer *L = &m->w.layers[il];
        brisk_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->wqkv,
                              &L->moe.router, &L->moe.sh_gate, &L->moe.sh_up, &L->moe.sh_down, &L->wq_a, &L->wq_b, &L->wkv_a};
        _Static_assert(sizeof ws / sizeof ws[0] <= PACK_PER_LAYER, "pl.jobs holds PACK_PER_LAYER matrices per layer");
        for (size_t i = 0; i < BRISK_ARRAY_LEN(ws); i++)
            if (ws[i]->data) pack_plan_add(ws[i], &pl);
        for (int32_t e = 0; L->moe.gate && e < 3 * m->hp.n_expert; e++)   /* gate, up, down of every expert */
            pack_plan_add(&L->moe.gate[e], &pl);
        for (int32_t h = 0; L->wk_b && h < 2 * m->hp.n_head; h++)   /* attn_k_b, attn_v_b of every head (MLA) */
            pack_plan_add(&L->wk_b[h], &pl);
    }
    pack_plan_add(&m->w.output, &pl);
    for (int i = 0; i < pl.n_jobs; i++) m->packed_bytes += (size_t)pl.jobs[i].groups * pl.jobs[i].w->packed_group_bytes;
    pack_cache_use pc = {0};
    if (model_path && pack_cache_try(m, &pl, model_path, &pc)) {
        free(pc.entries);
        free(pl.jobs);
        return BRISK_OK;
    }
    /* the data hash the cache records, taken before packing drops the canonical pages */
    if (pc.on && !pc.key.data_hash) pc.key.data_hash = brisk_gguf_data_hash(m->gguf);
    for (int i = 0; i < pl.n_jobs && !st; i++) st = pack_alloc(&pl.jobs[i], err);
    /* on failure the copies allocated so far are freed with the model (brisk_model_data_free) */
    double min_bytes = 0.0;
    if (!st && pl.n_chunks > 0 && (st = pack_parallel_min_bytes(&min_bytes, err)) == BRISK_OK) {
        atomic_init(&pl.next_chunk, 0);
        const int nth = pack_threads();
        brisk_pool *pool = NULL;
        if (nth < 2 || (double)m->packed_bytes < min_bytes) {
            pack_worker(&pl, 0, 1);
        } else if ((st = brisk_pool_acquire(&pool, nth, err)) == BRISK_OK) {
            brisk_pool_run(pool, pack_worker, &pl);
            brisk_pool_release(pool);
        }
    }
    if (!st && pc.on) pack_cache_store(m, &pl, &pc);
    free(pc.entries);
    free(pl.jobs);
    return st;
}

brisk_status brisk_model_data_load(brisk_gguf *g, brisk_model_data **out, brisk_error *err) {
    return brisk_model_data_load_file(g, NULL, out, err);
}

brisk_status brisk_model_data_load_file(brisk_gguf *g, const char *path, brisk_model_data **out, brisk_error *err) {
    *out = NULL;
    brisk_model_data *m = calloc(1, sizeof *m);
    if (!m) {
        brisk_gguf_close(g);
        return brisk_fail(err, BRISK_ERR_NOMEM, "model: out of memory");
    }
    m->gguf = g;
    m->header_hash = brisk_gguf_header_hash(g);
    binder b = {.m = m};
    brisk_status st = read_hparams(m, err);
    if (st) goto fail;
    brisk_hparams *hp = &m->hp;

    /* every layer has at least 5 tensors (fused QKV and up: norm, qkv, output, up, down): refuse a
     * block_count the file cannot back before sizing anything from it */
    if ((uint64_t)hp->n_layer * 5 + 2 > m->gguf->n_tensors) {
        st = brisk_fail(err, BRISK_ERR_FORMAT, "%s.block_count: %d layers need at least %llu tensors, the file has %llu", hp->arch_name,
                        hp->n_layer, (unsigned long long)hp->n_layer * 5 + 2, (unsigned long long)m->gguf->n_tensors);
        goto fail;
    }
    /* F32 arena for every 1-D vector (norms, biases, scales, rope factors) */
    /* sized from the file's own 1-D tensors (only those can be bound as
     * vectors), so a hostile head or layer count cannot ask for more than
     * the file holds */
    b.arena_cap = 1;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const brisk_gguf_tensor *t = &m->gguf->tensors[i];
        if (t->n_dims == 1) b.arena_cap += (size_t)t->ne[0];
        /* the experts' biases ([n_expert][n], moe_biases) */
        if (t->n_dims == 2 && t->name.len > 10 && !memcmp(t->name.ptr + t->name.len - 10, "_exps.bias", 10))
            b.arena_cap += (size_t)t->ne[0] * (size_t)t->ne[1];
    }
    m->norm_f32 = b.arena = malloc(b.arena_cap * sizeof(float));
    m->w.layers = calloc((size_t)hp->n_layer, sizeof(brisk_layer));
    b.used = calloc((size_t)m->gguf->n_tensors + 1, 1);
    if (!b.arena || !m->w.layers || !b.used) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "model: out of memory for %d layers", hp->n_layer);
        goto fail;
    }
    if ((st = bind_matrix(&b, "token_embd.weight", hp->n_embd, hp->n_vocab, true, &m->w.tok_embd, err))) goto fail;
    if ((st = bind_vector(&b, "output_norm.weight", hp->n_embd, true, &m->w.output_norm, err))) goto fail;
    if ((st = bind_vector(&b, "output_norm.bias", hp->n_embd, false, &m->w.output_norm_b, err))) goto fail;
    if (hp->tied_output) {
        m->w.output = m->w.tok_embd;
    } else if ((st = bind_matrix(&b, "output.weight", hp->n_embd, hp->n_vocab, true, &m->w.output, err))) {
        goto fail;
    }
    if ((st = bind_vector(&b, "output.bias", hp->n_vocab, false, &m->w.output_b, err))) goto fail;
    if ((st = bind_scale(&b, "output.scale", &m->w.s_output, err))) goto fail;
    if (hp->ai->rope_factors) {
        /* a fixed table of frequency divisors (Llama 3), or LongRoPE's short
         * and long tables, the long one for contexts past the original length */
        brisk_weight freqs, fshort, flong;
        if ((st = bind_vector(&b, "rope_freqs.weight", hp->rope.n_rot / 2, false, &freqs, err))) goto fail;
        if ((st = bind_vector(&b, "rope_factors_short.weight", hp->rope.n_rot / 2, false, &fshort, err))) goto fail;
        if ((st = bind_vector(&b, "rope_factors_long.weight", hp->rope.n_rot / 2, false, &flong, err))) goto fail;
        hp->rope.freq_factors = freqs.data ? freqs.data : fshort.data;
        hp->rope_long = freqs.data ? NULL : flong.data;
        hp->rope_swa.freq_factors = hp->rope.freq_factors;
    }
    for (int il = 0; il < hp->n_layer; il++)
        if ((st = bind_layer(&b, il, &m->w.layers[il], err))) goto fail;
    if ((st = set_layer_plan(m, err))) goto fail;
    if (hp->ai->unused_heads)
        for (const char *const *u = hp->ai->unused_heads; *u; u++) (void)find_tensor(&b, *u);
    accept_nextn_blocks(&b);
    if ((st = check_all_used(&b, err))) goto fail;
    if ((st = pack_weights(m, path, err))) goto fail;
    free(b.used);
    *out = m;
    return BRISK_OK;
fail:
    free(b.used);
    brisk_model_data_free(m);
    return st;
}

void brisk_model_data_free(brisk_model_data *m) {
    if (!m) return;
    if (m->pack_file.data) {   /* copies mapped from the pack cache: the mapping goes as a whole */
        for (size_t i = 0; i < m->n_pack_cached; i++) m->pack_cached[i]->packed = NULL;
        brisk_pack_cache_close(&m->pack_file);
    }
    free(m->pack_cached);
    if (m->w.layers)
        for (int il = 0; il < m->hp.n_layer; il++) {
            brisk_layer *L = &m->w.layers[il];
            free(L->wq.packed); free(L->wk.packed); free(L->wv.packed); free(L->wo.packed);
            free(L->w_gate.packed); free(L->w_up.packed); free(L->w_down.packed); free(L->wqkv.packed);
            free(L->moe.router.packed); free(L->moe.sh_gate.packed); free(L->moe.sh_up.packed); free(L->moe.sh_down.packed);
            for (int32_t e = 0; L->moe.gate && e < 3 * m->hp.n_expert; e++) free(L->moe.gate[e].packed);
            free(L->moe.gate);
            free(L->wq_a.packed); free(L->wq_b.packed); free(L->wkv_a.packed);
            for (int32_t h = 0; L->wk_b && h < 2 * m->hp.n_head; h++) free(L->wk_b[h].packed);
            free(L->wk_b);
        }
    free(m->w.output.packed);
    brisk_gguf_close(m->gguf);
    free(m->norm_f32);
    free(m->w.layers);
    free(m);
}
