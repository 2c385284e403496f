/* ops: rmsnorm, rope, softmax, swiglu (see ops.h). */
#include "ops/ops.h"

#include <math.h>

void brisk_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    if (w) {
        for (int64_t i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
    } else {
        for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale;
    }
}

static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

void brisk_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]) {
    float start = floorf(yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
    float end = ceilf(yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
    dims[0] = start > 0 ? start : 0;
    dims[1] = end < (float)(n_dims - 1) ? end : (float)(n_dims - 1);
}

static float yarn_ramp(float low, float high, int i0) {
    float y = ((float)(i0 / 2) - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

void brisk_rope_cache(const brisk_rope *r, int32_t pos, float *cache) {
    const float theta_scale = powf(r->freq_base, -2.0f / (float)r->n_rot);
    float theta = (float)pos;
    for (int i0 = 0; i0 < r->n_rot; i0 += 2) {
        const float ff = r->freq_factors ? r->freq_factors[i0 / 2] : 1.0f;
        const float theta_extrap = theta / ff;
        const float theta_interp = r->freq_scale * theta_extrap;
        float th = theta_interp, mscale = r->attn_factor;
        if (r->ext_factor != 0.0f) {
            float mix = yarn_ramp(r->corr_dims[0], r->corr_dims[1], i0) * r->ext_factor;
            th = theta_interp * (1 - mix) + theta_extrap * mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / r->freq_scale);
        }
        cache[i0] = cosf(th) * mscale;
        cache[i0 + 1] = sinf(th) * mscale;
        theta *= theta_scale;
    }
}

void brisk_rope_apply(const brisk_rope *r, const float *cache, float *x, int n_heads, int head_dim) {
    const int half = r->n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int i0 = 0; i0 < r->n_rot; i0 += 2) {
            const float c = cache[i0], s = cache[i0 + 1];
            const int a = r->layout == BRISK_ROPE_NEOX ? i0 / 2 : i0;
            const int b = r->layout == BRISK_ROPE_NEOX ? i0 / 2 + half : i0 + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

void brisk_softmax(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

double brisk_exp_sub(float *x, int64_t n, float m) {
    double p[8] = {0};
    for (int64_t i = 0; i < n; i++) {
        x[i] = brisk_expf(x[i] - m);
        p[i % 8] += x[i];
    }
    return brisk_sum8_combine(p);
}

void brisk_swiglu(float *h, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[i] = g[i] / (1.0f + brisk_expf(-g[i])) * u[i];
}

/* ---- expf ---- */

const uint64_t brisk_exp2_table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b, 0x3fef54873168b9aa,
    0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74,
    0x3feea11473eb0187, 0x3feea589994cce13, 0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

float brisk_expf_special(float x) {
    if (isnan(x)) return x + x;
    if (isinf(x)) return x < 0.0f ? 0.0f : x;
    if (x > 0x1.62e42ep+6f) return INFINITY;     /* overflow */
    if (x < -0x1.9fe368p+6f) return 0.0f;        /* underflow */
    if (x < -0x1.9d1d9ep+6f) return 0x1p-149f;   /* rounds to the smallest subnormal */
    return brisk_expf_core(x);   /* 88 <= |x| in range */
}
