/* model: hyperparameters and tensor binding from GGUF (see model.h). */
#include "model/model.h"
#include "kernels/kernels.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct arch_desc {
    const char *name;
    brisk_arch arch;
    brisk_rope_layout rope_layout;
} arch_desc;

/* Every supported architecture and the variant data it implies; everything
 * else (biases, q/k norms, tied output, rope scaling) is read from the file. */
static const arch_desc arch_table[] = {
    {"llama", BRISK_ARCH_LLAMA, BRISK_ROPE_NORMAL},
    {"qwen2", BRISK_ARCH_QWEN2, BRISK_ROPE_NEOX},
    {"qwen3", BRISK_ARCH_QWEN3, BRISK_ROPE_NEOX},
};

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
} binder;

/* Bind a matrix of shape [rows][cols]; a missing optional tensor leaves w zeroed. */
static brisk_status bind_matrix(binder *b, const char *name, int64_t cols, int64_t rows, bool required,
                                brisk_weight *w, brisk_error *err) {
    memset(w, 0, sizeof *w);
    const brisk_gguf_tensor *t = brisk_gguf_find_tensor(b->m->gguf, name);
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
    const brisk_gguf_tensor *t = brisk_gguf_find_tensor(b->m->gguf, name);
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

static brisk_status bind_layer(binder *b, int il, brisk_layer *L, brisk_error *err) {
    const brisk_hparams *hp = &b->m->hp;
    const int64_t d = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, kd = (int64_t)hp->n_head_kv * hp->head_dim,
                  vd = (int64_t)hp->n_head_kv * hp->head_dim_v, od = (int64_t)hp->n_head * hp->head_dim_v;
    char name[96];
    brisk_status st;
#define NAME(s) (snprintf(name, sizeof name, "blk.%d." s, il), name)
    if ((st = bind_vector(b, NAME("attn_norm.weight"), d, true, &L->attn_norm, err))) return st;
    if ((st = bind_matrix(b, NAME("attn_q.weight"), d, qd, true, &L->wq, err))) return st;
    if ((st = bind_matrix(b, NAME("attn_k.weight"), d, kd, true, &L->wk, err))) return st;
    if ((st = bind_matrix(b, NAME("attn_v.weight"), d, vd, true, &L->wv, err))) return st;
    if ((st = bind_matrix(b, NAME("attn_output.weight"), od, d, true, &L->wo, err))) return st;
    if ((st = bind_vector(b, NAME("attn_q.bias"), qd, false, &L->bq, err))) return st;
    if ((st = bind_vector(b, NAME("attn_k.bias"), kd, false, &L->bk, err))) return st;
    if ((st = bind_vector(b, NAME("attn_v.bias"), vd, false, &L->bv, err))) return st;
    if ((st = bind_vector(b, NAME("attn_q_norm.weight"), hp->head_dim, hp->qk_norm, &L->q_norm, err))) return st;
    if ((st = bind_vector(b, NAME("attn_k_norm.weight"), hp->head_dim, hp->qk_norm, &L->k_norm, err))) return st;
    if ((st = bind_vector(b, NAME("ffn_norm.weight"), d, true, &L->ffn_norm, err))) return st;
    if ((st = bind_matrix(b, NAME("ffn_gate.weight"), d, hp->n_ff, true, &L->w_gate, err))) return st;
    if ((st = bind_matrix(b, NAME("ffn_up.weight"), d, hp->n_ff, true, &L->w_up, err))) return st;
    if ((st = bind_matrix(b, NAME("ffn_down.weight"), hp->n_ff, d, true, &L->w_down, err))) return st;
#undef NAME
    if (hp->qkv_bias && (!L->bq.data || !L->bk.data || !L->bv.data))
        return brisk_fail(err, BRISK_ERR_FORMAT, "blk.%d: architecture %s needs attn_q/k/v.bias", il, hp->arch_name);
    if (!!L->bq.data != !!L->bk.data || !!L->bk.data != !!L->bv.data)
        return brisk_fail(err, BRISK_ERR_FORMAT, "blk.%d: attention biases must be all present or all absent", il);
    return BRISK_OK;
}

/* ---- hyperparameters ------------------------------------------------------------------ */

static brisk_status read_hparams(brisk_model_data *m, brisk_error *err) {
    const brisk_gguf *g = m->gguf;
    brisk_hparams *hp = &m->hp;
    brisk_status st;
    brisk_str arch;
    bool found = false;
    if ((st = brisk_gguf_get_str(g, "general.architecture", &arch, &found, err))) return st;
    if (!found) return brisk_fail(err, BRISK_ERR_FORMAT, "missing metadata key 'general.architecture'");
    const arch_desc *ad = NULL;
    for (size_t i = 0; i < BRISK_ARRAY_LEN(arch_table); i++)
        if (brisk_str_eq(arch, arch_table[i].name)) ad = &arch_table[i];
    if (!ad) {
        int n = arch.len > 64 ? 64 : (int)arch.len;
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "architecture '%.*s' is not supported (supported: llama, qwen2, qwen3)", n, arch.ptr);
    }
    hp->arch = ad->arch;
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", ad->name);
    const char *a = ad->name;

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
    if (hp->head_dim_v != hp->head_dim)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "%s.attention.value_length %d != key_length %d", a, hp->head_dim_v, hp->head_dim);

    hp->norm_eps = 1e-5f;
    if ((st = get_arch_f32(g, a, "attention.layer_norm_rms_epsilon", &hp->norm_eps, true, NULL, err))) return st;
    if (!(hp->norm_eps > 0 && hp->norm_eps < 1)) return brisk_fail(err, BRISK_ERR_FORMAT, "%s.attention.layer_norm_rms_epsilon: %g out of range", a, hp->norm_eps);

    /* RoPE: layout from the architecture, the rest from metadata (llama.cpp defaults). */
    brisk_rope *r = &hp->rope;
    r->layout = ad->rope_layout;
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
        if (!found) r->ext_factor = 1.0f;
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

    hp->qkv_bias = hp->arch == BRISK_ARCH_QWEN2;
    hp->qk_norm = hp->arch == BRISK_ARCH_QWEN3;
    hp->tied_output = brisk_gguf_find_tensor(g, "output.weight") == NULL;
    return BRISK_OK;
}

/* ---- repacking for the packed GEMM -------------------------------------------------------
 * Matrices whose type the CPU's packed-GEMM table handles are copied into
 * 16-row interleaved groups (kernels.h). The canonical pages they came from
 * are then dropped from memory (MADV_DONTNEED on the private read-only
 * mapping: they would be read back from the file if touched), so the model
 * holds one copy of its weights. When the output matrix is the embedding
 * table (tied), the output matmul reads the packed copy and embedding lookups
 * fault single rows of the canonical table back in from the file. */
static brisk_status pack_weight(brisk_weight *w, bool drop_canonical, brisk_error *err) {
    const brisk_gemm_kernels *g = brisk_gemm_best();
    if (!g || !g->gemm[w->type] || !brisk_pack_supported(w->type) || w->rows < BRISK_GEMM_ROWS) return BRISK_OK;
    const int64_t groups = w->rows / BRISK_GEMM_ROWS;
    const size_t src_gbytes = (size_t)BRISK_GEMM_ROWS * w->row_bytes, bytes = (size_t)groups * src_gbytes;
    const size_t gbytes = brisk_pack_group_bytes(w->type, w->cols), pbytes = (size_t)groups * gbytes;
    if (gbytes == 0) return BRISK_OK;   /* a width this type's layout cannot pack (F16: cols % 16) */
    /* Copies of 2 MiB or more start on a 2 MiB boundary and ask for transparent huge pages
     * (THP is often in "madvise" mode) before the first write: decode streams every weight
     * once per token, and 4 KiB pages cost a TLB miss per page. Only whole 2 MiB pages inside
     * the copy are advised, so its resident size does not grow. */
    const size_t huge = (size_t)2 << 20, abytes = (pbytes + 63) / 64 * 64;
    uint8_t *p = aligned_alloc(pbytes >= huge ? huge : 64, pbytes >= huge ? (abytes + huge - 1) / huge * huge : abytes);
    if (!p) return brisk_fail(err, BRISK_ERR_NOMEM, "model: out of memory repacking a %lld x %lld matrix", (long long)w->rows,
                              (long long)w->cols);
    if (pbytes >= huge) madvise(p, pbytes / huge * huge, MADV_HUGEPAGE);   /* advice only: failure is harmless */
    for (int64_t i = 0; i < groups; i++)
        brisk_pack_rows(w->type, p + (size_t)i * gbytes, (const uint8_t *)w->data + (size_t)i * src_gbytes, w->row_bytes, w->cols);
    w->packed = p;
    w->packed_group_bytes = gbytes;
    if (drop_canonical) {
        const long page = sysconf(_SC_PAGESIZE);
        const uintptr_t lo = ((uintptr_t)w->data + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
        const uintptr_t hi = ((uintptr_t)w->data + bytes) / (uintptr_t)page * (uintptr_t)page;
        if (page > 0 && hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
    }
    return BRISK_OK;
}

static brisk_status pack_weights(brisk_model_data *m, brisk_error *err) {
    brisk_status st;
    for (int il = 0; il < m->hp.n_layer; il++) {
        brisk_layer *L = &m->w.layers[il];
        brisk_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < BRISK_ARRAY_LEN(ws); i++) {
            if ((st = pack_weight(ws[i], true, err))) return st;
            if (ws[i]->packed) m->packed_bytes += (size_t)(ws[i]->rows / BRISK_GEMM_ROWS) * ws[i]->packed_group_bytes;
        }
    }
    if ((st = pack_weight(&m->w.output, true, err))) return st;
    if (m->w.output.packed) m->packed_bytes += (size_t)(m->w.output.rows / BRISK_GEMM_ROWS) * m->w.output.packed_group_bytes;
    return BRISK_OK;
}

brisk_status brisk_model_data_load(brisk_gguf *g, brisk_model_data **out, brisk_error *err) {
    *out = NULL;
    brisk_model_data *m = calloc(1, sizeof *m);
    if (!m) {
        brisk_gguf_close(g);
        return brisk_fail(err, BRISK_ERR_NOMEM, "model: out of memory");
    }
    m->gguf = g;
    m->header_hash = brisk_gguf_header_hash(g);
    brisk_status st = read_hparams(m, err);
    if (st) goto fail;
    brisk_hparams *hp = &m->hp;

    /* every layer has at least 9 tensors: refuse a block_count the file cannot back before sizing anything from it */
    if ((uint64_t)hp->n_layer * 9 + 2 > m->gguf->n_tensors) {
        st = brisk_fail(err, BRISK_ERR_FORMAT, "%s.block_count: %d layers need at least %llu tensors, the file has %llu", hp->arch_name,
                        hp->n_layer, (unsigned long long)hp->n_layer * 9 + 2, (unsigned long long)m->gguf->n_tensors);
        goto fail;
    }
    /* F32 arena for every 1-D vector: per layer 2 norms + 3 biases + 2 head norms, plus output norm and rope freqs */
    binder b = {.m = m};
    /* sized from the file's own 1-D tensors (only those can be bound as
     * vectors), so a hostile head or layer count cannot ask for more than
     * the file holds */
    b.arena_cap = 1;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++)
        if (m->gguf->tensors[i].n_dims == 1) b.arena_cap += (size_t)m->gguf->tensors[i].ne[0];
    m->norm_f32 = b.arena = malloc(b.arena_cap * sizeof(float));
    m->w.layers = calloc((size_t)hp->n_layer, sizeof(brisk_layer));
    if (!b.arena || !m->w.layers) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "model: out of memory for %d layers", hp->n_layer);
        goto fail;
    }
    if ((st = bind_matrix(&b, "token_embd.weight", hp->n_embd, hp->n_vocab, true, &m->w.tok_embd, err))) goto fail;
    if ((st = bind_vector(&b, "output_norm.weight", hp->n_embd, true, &m->w.output_norm, err))) goto fail;
    if (hp->tied_output) {
        m->w.output = m->w.tok_embd;
    } else if ((st = bind_matrix(&b, "output.weight", hp->n_embd, hp->n_vocab, true, &m->w.output, err))) {
        goto fail;
    }
    brisk_weight freqs;
    if ((st = bind_vector(&b, "rope_freqs.weight", hp->rope.n_rot / 2, false, &freqs, err))) goto fail;
    hp->rope.freq_factors = freqs.data;
    for (int il = 0; il < hp->n_layer; il++)
        if ((st = bind_layer(&b, il, &m->w.layers[il], err))) goto fail;
    if ((st = pack_weights(m, err))) goto fail;
    *out = m;
    return BRISK_OK;
fail:
    brisk_model_data_free(m);
    return st;
}

void brisk_model_data_free(brisk_model_data *m) {
    if (!m) return;
    if (m->w.layers)
        for (int il = 0; il < m->hp.n_layer; il++) {
            brisk_layer *L = &m->w.layers[il];
            free(L->wq.packed); free(L->wk.packed); free(L->wv.packed); free(L->wo.packed);
            free(L->w_gate.packed); free(L->w_up.packed); free(L->w_down.packed);
        }
    free(m->w.output.packed);
    brisk_gguf_close(m->gguf);
    free(m->norm_f32);
    free(m->w.layers);
    free(m);
}
