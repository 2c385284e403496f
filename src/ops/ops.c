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

void brisk_swiglu(float *h, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
