/* ops: the elementwise and per-row operations of the transformer block.
 * Scalar, allocation-free; each works on one row (or one head) so callers can
 * parallelise over rows without changing results (batch invariance). */
#ifndef BRISK_OPS_H
#define BRISK_OPS_H

#include <stdint.h>

/* out = x / rms(x) * w   (w may be NULL for no weight). ggml's order: sum of
 * squares in double, scale = 1/sqrt(mean + eps), then out = (x*scale)*w. */
void brisk_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);

/* RoPE layouts: NORMAL rotates adjacent pairs (x[2i], x[2i+1]); NEOX rotates
 * (x[i], x[i + n_rot/2]). */
typedef enum brisk_rope_layout { BRISK_ROPE_NORMAL = 0, BRISK_ROPE_NEOX = 2 } brisk_rope_layout;

/* Everything RoPE needs, resolved from model metadata (ggml's rope_ext semantics). */
typedef struct brisk_rope {
    brisk_rope_layout layout;
    int n_rot;                 /* rotated dims per head (<= head_dim) */
    float freq_base;
    float freq_scale;          /* 1/linear factor; 1 = none */
    float ext_factor;          /* YaRN extrapolation mix; 0 = off */
    float attn_factor;         /* YaRN magnitude scale */
    float corr_dims[2];        /* YaRN correction range */
    const float *freq_factors; /* n_rot/2 divisors (rope_freqs.weight) or NULL */
} brisk_rope;

/* cache[n_rot]: (cos, sin) pairs for one position. */
void brisk_rope_cache(const brisk_rope *r, int32_t pos, float *cache);
/* Rotate n_heads heads of head_dim (stride head_dim) in place using a cache. */
void brisk_rope_apply(const brisk_rope *r, const float *cache, float *x, int n_heads, int head_dim);
/* YaRN correction dims (ggml_rope_yarn_corr_dims). */
void brisk_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]);

/* In-place softmax over n values (max-subtracted). */
void brisk_softmax(float *x, int64_t n);

/* h[i] = silu(g[i]) * u[i] */
void brisk_swiglu(float *h, const float *g, const float *u, int64_t n);

#endif
