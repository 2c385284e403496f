/* convert_iq: reference quantize/dequantize for the 4-bit lookup-table
 * formats IQ4_NL, IQ4_XS and MXFP4 (quant/blocks.h).
 *
 * A nibble does not stand for an evenly spaced level: it indexes a table of
 * 16 int8 values (IQ4_NL's grid, fitted to bell-shaped weights; MXFP4's
 * E2M1 floats, doubled to integers), so every kernel reads them through a
 * 16-entry byte shuffle and the dot product stays integer.
 *
 * The quantizers are ggml's as llama-quantize runs them with no importance
 * matrix (ggml-quants.c: quantize_iq4_nl / quantize_iq4_xs with ntry = 7,
 * quantize_row_mxfp4_ref), rewritten here with the same float operations in
 * the same order, so brisk writes the same bytes. */
#include "quant/convert.h"
#include "quant/blocks.h"

#include <math.h>
#include <string.h>

const int8_t brisk_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
const int8_t brisk_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Below this magnitude a group is all zeros (ggml's GROUP_MAX_EPS). */
#define GROUP_EPS 1e-15f
/* Scales tried on each side of the first guess (ggml's ntry for llama-quantize). */
#define IQ4_NTRY 7

/* ---- IQ4_NL / IQ4_XS --------------------------------------------------------------- */

/* Index of the grid value nearest x (ties to the lower one), by bisection,
 * comparing in float as ggml does. */
static int nearest_grid(float x) {
    const int8_t *v = brisk_iq4nl_values;
    if (x <= v[0]) return 0;
    if (x >= v[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < v[mid]) hi = mid;
        else lo = mid;
    }
    return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

/* The least-squares scale of one 32-element group x (weights w = x^2) and
 * its codes L: the first guess maps the signed value of largest magnitude to
 * the grid's end, then 2 * IQ4_NTRY + 1 nearby scales are tried and the one
 * maximizing (sum w q x)^2 / (sum w q^2) is kept (w: iq4_weights). Returns 0 for a group below
 * GROUP_EPS (L then untouched); the callers re-pick L against the scale they
 * store, so L here is scratch. */
static float iq4_group_scale(const float *x, const float *w, uint8_t *L) {
    const int8_t *v = brisk_iq4nl_values;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax < GROUP_EPS) return 0.0f;
    float d = -max / v[0];
    float id = 1 / d;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < 32; j++) {
        const int l = nearest_grid(id * x[j]);
        L[j] = (uint8_t)l;
        const float q = v[l];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int itry = -IQ4_NTRY; itry <= IQ4_NTRY; itry++) {
        id = (itry + v[0]) / max;
        sumqx = sumq2 = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float q = v[nearest_grid(id * x[j])];
            sumqx += w[j] * q * x[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* The fit's weights of one 32-group x of a super-block xs of n values: x^2,
 * or with an importance matrix qw * sqrt(sigma2 + x^2), sigma2 twice the
 * super-block's mean square (ggml's quantize_row_iq4_nl_impl). */
static void iq4_weights(const float *xs, int n, const float *x, const float *qw, float *w) {
    if (!qw) {
        for (int j = 0; j < 32; j++) w[j] = x[j] * x[j];
        return;
    }
    float sigma2 = 0.0f;
    for (int j = 0; j < n; j++) sigma2 += xs[j] * xs[j];
    sigma2 *= 2.0f / n;
    for (int j = 0; j < 32; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

static void pack_nibbles(const uint8_t L[32], uint8_t qs[16]) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
}

void brisk_iq4_nl_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * brisk_iq4nl_values[b[i].qs[j] & 0x0f];
            dst[j + 16] = d * brisk_iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

/* One group, one scale: the codes are re-picked against the final scale. */
static void iq4_nl_quantize(const float *src, void *dst, int64_t n, const float *qw) {
    BRISK_ASSERT(n % 32 == 0);
    brisk_block_iq4_nl *b = dst;
    uint8_t L[32];
    float w[32];
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        iq4_weights(src, 32, src, qw ? qw + 32 * i : NULL, w);
        const float d = iq4_group_scale(src, w, L);
        b[i].d = brisk_fp32_to_fp16(d);
        const float id = d ? 1 / d : 0.0f;
        for (int j = 0; j < 32; j++) L[j] = (uint8_t)nearest_grid(id * src[j]);
        pack_nibbles(L, b[i].qs);
    }
}

void brisk_iq4_nl_quantize(const float *src, void *dst, int64_t n) { iq4_nl_quantize(src, dst, n, NULL); }
void brisk_iq4_nl_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw) { iq4_nl_quantize(src, dst, n, qw); }

void brisk_iq4_xs_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % BRISK_QK_K == 0);
    const brisk_block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / BRISK_QK_K; i++) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        for (int g = 0; g < 8; g++, dst += 32) {
            const float dl = d * (brisk_iq4_xs_scale(b[i].scales_l, b[i].scales_h, g) - 32);
            const uint8_t *qs = b[i].qs + 16 * g;
            for (int j = 0; j < 16; j++) {
                dst[j] = dl * brisk_iq4nl_values[qs[j] & 0x0f];
                dst[j + 16] = dl * brisk_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

/* Each group's scale as above, then the 8 scales quantized to 6 signed bits
 * against d = -(the scale of largest magnitude) / 32 (ggml rounds with the
 * unrounded d; only the stored d is fp16), and the codes re-picked against
 * each group's quantized scale. */
static void iq4_xs_quantize(const float *src, void *dst, int64_t n, const float *qw) {
    BRISK_ASSERT(n % BRISK_QK_K == 0);
    brisk_block_iq4_xs *b = dst;
    uint8_t L[32];
    float scales[8], w[32];
    for (int64_t i = 0; i < n / BRISK_QK_K; i++, src += BRISK_QK_K) {
        float max_scale = 0.0f, amax_scale = 0.0f;
        for (int g = 0; g < 8; g++) {
            iq4_weights(src, BRISK_QK_K, src + 32 * g, qw ? qw + BRISK_QK_K * i + 32 * g : NULL, w);
            scales[g] = iq4_group_scale(src + 32 * g, w, L);
            if (fabsf(scales[g]) > amax_scale) {
                amax_scale = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        const float d = -max_scale / 32;   /* -0.0 for an all-zero block: stored as fp16 0x8000, as ggml does */
        b[i].d = brisk_fp32_to_fp16(d);
        b[i].scales_h = 0;
        const float id = d ? 1 / d : 0.0f;
        for (int g = 0; g < 8; g++) {
            int l = brisk_nearest_int(id * scales[g]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * l;
            const float idl = dl ? 1 / dl : 0.0f;
            const float *xg = src + 32 * g;
            for (int j = 0; j < 32; j++) L[j] = (uint8_t)nearest_grid(idl * xg[j]);
            pack_nibbles(L, b[i].qs + 16 * g);
            l += 32;
            if (g % 2 == 0) b[i].scales_l[g / 2] = (uint8_t)(l & 0x0f);
            else b[i].scales_l[g / 2] |= (uint8_t)((l & 0x0f) << 4);
            b[i].scales_h |= (uint16_t)((l >> 4) << (2 * g));
        }
    }
}

void brisk_iq4_xs_quantize(const float *src, void *dst, int64_t n) { iq4_xs_quantize(src, dst, n, NULL); }
void brisk_iq4_xs_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw) { iq4_xs_quantize(src, dst, n, qw); }

/* ---- MXFP4 ------------------------------------------------------------------------ */

void brisk_mxfp4_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = brisk_e8m0_half(b[i].e);
        for (int j = 0; j < 16; j++) {
            dst[j] = brisk_mxfp4_values[b[i].qs[j] & 0x0f] * d;
            dst[j + 16] = brisk_mxfp4_values[b[i].qs[j] >> 4] * d;
        }
    }
}

/* Nearest of the 16 values v * d to x, the first on ties (so +0 beats -0). */
static int nearest_fp4(float x, float d) {
    int best = 0;
    float best_err = fabsf(brisk_mxfp4_values[0] * d - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf(brisk_mxfp4_values[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* The scale exponent puts the block's largest |x| in [4, 8) times the scale
 * (E2M1's top value 6 sits there): e = floor(log2 amax) - 2 + 127. ggml
 * converts that float to uint8_t, which its x86-64 build does by truncating
 * to int32 and keeping the low byte; the tiny blocks that land below 0 wrap
 * the same way here (a result of 255, for amax in [2^-126, 2^-125), is the
 * invalid scale llama-quantize then refuses, and so does brisk quantize). */
void brisk_mxfp4_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    brisk_block_mxfp4 *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(src[j])) amax = fabsf(src[j]);
        uint8_t e = 0;
        if (amax > 0.0f) {
            const float f = floorf(log2f(amax)) - 2 + 127;   /* an integer in [-24, 253] for finite amax */
            e = (uint8_t)((uint32_t)(int32_t)f & 0xffu);
        }
        b[i].e = e;
        const float d = brisk_e8m0_half(e);
        for (int j = 0; j < 16; j++)
            b[i].qs[j] = (uint8_t)(nearest_fp4(src[j], d) | (nearest_fp4(src[j + 16], d) << 4));
    }
}
