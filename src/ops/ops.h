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

/* expf with fixed bits on every platform: the algorithm of glibc 2.36's expf
 * as it runs on x86-64 with FMA (ARM optimized-routines: x = k ln2/32 + r,
 * 2^(k/32) from a 32-entry table, a degree-3 polynomial in r, all in double,
 * one rounding to float at the end; error < 0.502 ulp), with its fused
 * operations written as fma() so a vector version (the kernel tables'
 * exp_sub) can reproduce every bit. On this machine it returns exactly what
 * libm's expf returns (tests/test_ops checks this); attention uses it so
 * scalar and vector paths, and x86 and ARM builds, agree bit for bit. */
extern const uint64_t brisk_exp2_table[32];   /* bits of 2^(i/32) minus (i << 47) */
#define BRISK_EXPF_INV_LN2_N 0x1.71547652b82fep+5   /* 32 / ln 2 */
#define BRISK_EXPF_SHIFT 0x1.8p+52
#define BRISK_EXPF_C0 0x1.c6af84b912394p-20          /* polynomial for 2^(r/32) - 1 */
#define BRISK_EXPF_C1 0x1.ebfce50fac4f3p-13
#define BRISK_EXPF_C2 0x1.62e42ff0c52d6p-6
float brisk_expf_special(float x);   /* NaN, inf and |x| >= 88 (top 12 bits past 0x42a) */

/* The main path, for -0x1.9d1d9ep+6 <= x < 88.72 (past 88 only brisk_expf_special calls it). */
static inline float brisk_expf_core(float x) {
    const double xd = (double)x;
    const double z = __builtin_fma(BRISK_EXPF_INV_LN2_N, xd, BRISK_EXPF_SHIFT);
    union { double d; uint64_t u; } zb = {z}, sb;
    const double kd = z - BRISK_EXPF_SHIFT;
    const double r = __builtin_fma(BRISK_EXPF_INV_LN2_N, xd, -kd);
    sb.u = brisk_exp2_table[zb.u % 32] + (zb.u << 47);
    const double p = __builtin_fma(BRISK_EXPF_C0, r, BRISK_EXPF_C1);
    const double y = __builtin_fma(p, r * r, __builtin_fma(BRISK_EXPF_C2, r, 1.0));
    return (float)(y * sb.d);
}

static inline float brisk_expf(float x) {
    union { float f; uint32_t u; } xb = {x};
    return ((xb.u >> 20) & 0x7ff) > 0x42a ? brisk_expf_special(x) : brisk_expf_core(x);
}

/* In-place softmax over n values (max-subtracted). */
void brisk_softmax(float *x, int64_t n);

/* x[i] = brisk_expf(x[i] - m): attention's softmax exponentials; returns
 * their sum in double in an order vector units follow (the kernel tables'
 * exp_sub entries give the same bits): entry i goes to partial sum i % 8, in
 * increasing i, and the partials are combined as
 * ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)) (brisk_sum8_combine).
 * Eight independent chains: the one sequential chain it replaces was 40% of
 * the attention tile loop's own time at depth (docs/PERFORMANCE.md). */
double brisk_exp_sub(float *x, int64_t n, float m);

static inline double brisk_sum8_combine(const double p[8]) { return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7])); }

/* h[i] = silu(g[i]) * u[i] = g[i] / (1 + brisk_expf(-g[i])) * u[i] (the kernel
 * tables' swiglu entries give the same bits) */
void brisk_swiglu(float *h, const float *g, const float *u, int64_t n);

#endif
