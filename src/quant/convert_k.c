/* convert_k: reference quantize/dequantize for the 256-element "K" formats
 * (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and the Q8_K activation format.
 *
 * A K block is a super-block of 256 weights made of 16 sub-blocks of 16
 * (Q2_K, Q3_K, Q6_K) or 8 of 32 (Q4_K, Q5_K). Each sub-block has a small
 * integer scale (and, for Q2/Q4/Q5, a min) that is itself quantized against
 * one fp16 super-scale d (and dmin).
 *
 * The quantizers are ggml's reference algorithms (quantize_row_*_ref with
 * make_qx/make_q3/make_qkx2 scale searches) rewritten here; they keep ggml's
 * operation order so brisk writes the same bits as llama-quantize without an
 * importance matrix. */
#include "quant/convert.h"
#include "quant/blocks.h"

#include <math.h>
#include <string.h>

#define QK BRISK_QK_K

/* Below this magnitude a sub-block is treated as all zeros (ggml: GROUP_MAX_EPS). */
#define GROUP_EPS 1e-15f

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }


/* Largest |x[i]| (returned) and the signed value that has it (*max; the first
 * one on ties, 0 for an all-zero input), as ggml's K-quant searches pick it. */
static float signed_absmax(const float *x, int n, float *max) {
    float amax = 0.0f;
    *max = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            *max = x[i];
        }
    }
    return amax;
}

/* ---- scale searches ------------------------------------------------------------ */

/* Symmetric search, q in [-nmax, nmax-1] stored biased by nmax into L.
 * Starts from scale max/-nmax, then tries 18 nearby scales and keeps the one
 * that maximizes (sum w x l)^2 / sum w l^2, with weights w = qw, or x^2 when
 * qw is NULL. Returns the scale (value = scale * (L - nmax)). ggml's
 * make_qx_quants with rmse_type 1, the only one llama-quantize reaches. */
static float search_symmetric(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    float max;
    const float amax = signed_absmax(x, n, &max);
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(brisk_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(brisk_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = qw ? qw[i] : x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = clamp_int(brisk_nearest_int(iscale * x[i]), -nmax, nmax - 1);
                L[i] = (int8_t)(l + nmax);
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's symmetric search: start from max/-nmax, then coordinate descent (up
 * to 5 sweeps) moving single L values when that raises (sum w x l)^2 / sum w l^2
 * with w = x^2. L gets q + nmax. */
static float search_q3(int n, int nmax, const float *x, int8_t *L) {
    float max;
    const float amax = signed_absmax(x, n, &max);
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(brisk_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int sweep = 0; sweep < 5; sweep++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int nl = clamp_int(brisk_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric search, value = scale * L - min with L in [0, nmax] and min >= 0
 * (returned through *neg_min as a positive number). Starts from the range
 * [min(x,0), max(x)] and tries nstep+1 scales (nmax + rmin + rdelta*k)/range,
 * solving the weighted least-squares scale and offset for each rounding and
 * keeping the lowest weighted error (absolute when use_mad, squared otherwise). */
static float search_asymmetric(int n, int nmax, const float *x, const float *w, uint8_t *L,
                               float *neg_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                               bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = brisk_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)clamp_int(l, 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    if (nstep < 1) {
        *neg_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(brisk_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0.0f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                err += w[i] * diff;
            }
            if (err < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

/* Pack 256 2-bit values: byte l of each 32-byte group of qs holds elements
 * l, l+32, l+64, l+96 of its 128-element half in bit pairs 0-1, 2-3, 4-5, 6-7. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int half = 0; half < QK; half += 128) {
        for (int l = 0; l < 32; l++) {
            qs[half / 4 + l] = (uint8_t)(L[half + l] | (L[half + l + 32] << 2) |
                                         (L[half + l + 64] << 4) | (L[half + l + 96] << 6));
        }
    }
}

/* ---- Q2_K: 16 x 16, value = d*sc*q - dmin*m, q 2-bit, sc/m 4-bit --------------------- */

void brisk_q2_k_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q2_k *b = src;
    for (int64_t i = 0; i < n / QK; i++) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        const float dmin = brisk_fp16_to_fp32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int half = 0; half < QK; half += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int g = 0; g < 2; g++) {   /* two 16-element sub-blocks per shift */
                    const uint8_t sc = b[i].scales[is++];
                    const float dl = d * (sc & 0x0f), ml = dmin * (sc >> 4);
                    for (int l = 0; l < 16; l++) *dst++ = dl * ((q[16 * g + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void brisk_q2_k_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % QK == 0);
    brisk_block_q2_k *b = dst;
    uint8_t L[QK], Laux[16];
    float weights[16], mins[QK / 16], scales[QK / 16];
    const float q4scale = 15.0f;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < QK / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(src[16 * j + l]);
            scales[j] = search_asymmetric(16, 3, src + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                          -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < QK / 16; j++) b[i].scales[j] = (uint8_t)brisk_nearest_int(iscale * scales[j]);
            b[i].d = brisk_fp32_to_fp16(max_scale / q4scale);
        } else {
            memset(b[i].scales, 0, sizeof b[i].scales);
            b[i].d = brisk_fp32_to_fp16(0.0f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < QK / 16; j++)
                b[i].scales[j] |= (uint8_t)((unsigned)brisk_nearest_int(iscale * mins[j]) << 4);
            b[i].dmin = brisk_fp32_to_fp16(max_min / q4scale);
        } else {
            b[i].dmin = brisk_fp32_to_fp16(0.0f);
        }
        /* Re-round every element against the scales as stored. */
        for (int j = 0; j < QK / 16; j++) {
            const float d = brisk_fp16_to_fp32(b[i].d) * (b[i].scales[j] & 0x0f);
            if (!d) continue;
            const float dm = brisk_fp16_to_fp32(b[i].dmin) * (b[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)clamp_int(brisk_nearest_int((src[16 * j + l] + dm) / d), 0, 3);
        }
        pack_2bit(L, b[i].qs);
    }
}

/* ---- Q3_K: 16 x 16, value = d*(sc-32)*(q-4), q 3-bit (2 low + hmask), sc 6-bit ------- */
/* The high bit of element e (0..255) is bit e/32 of hmask[e%32]. */

void brisk_q3_k_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q3_k *b = src;
    int8_t sc[16];
    for (int64_t i = 0; i < n / QK; i++) {
        const float d_all = brisk_fp16_to_fp32(b[i].d);
        brisk_q3_k_scales(b[i].scales, sc);
        const uint8_t *q = b[i].qs;
        const uint8_t *hm = b[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int half = 0; half < QK; half += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int g = 0; g < 2; g++) {
                    const float dl = d_all * sc[is++];
                    for (int l = 16 * g; l < 16 * g + 16; l++)
                        *dst++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

void brisk_q3_k_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % QK == 0);
    brisk_block_q3_k *b = dst;
    int8_t L[QK];
    uint8_t U[QK];
    float scales[QK / 16];
    int8_t sc[16];
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float max_scale = 0.0f, amax = 0.0f;
        for (int j = 0; j < QK / 16; j++) {
            scales[j] = search_q3(16, 4, src + 16 * j, L + 16 * j);
            const float a = fabsf(scales[j]);
            if (a > amax) {
                amax = a;
                max_scale = scales[j];
            }
        }
        memset(b[i].scales, 0, sizeof b[i].scales);
        if (max_scale) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < QK / 16; j++) {
                /* ggml stores the rounded value in an int8_t before clamping;
                 * |iscale*scale| <= 32 so that conversion is exact. */
                const int l = clamp_int((int8_t)brisk_nearest_int(iscale * scales[j]), -32, 31) + 32;
                if (j < 8) b[i].scales[j] = (uint8_t)(l & 0x0f);
                else b[i].scales[j - 8] |= (uint8_t)((l & 0x0f) << 4);
                b[i].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            b[i].d = brisk_fp32_to_fp16(1 / iscale);
        } else {
            b[i].d = brisk_fp32_to_fp16(0.0f);
        }
        brisk_q3_k_scales(b[i].scales, sc);
        for (int j = 0; j < QK / 16; j++) {
            const float d = brisk_fp16_to_fp32(b[i].d) * sc[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clamp_int(brisk_nearest_int(src[16 * j + l] / d), -4, 3) + 4);
        }
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        for (int e = 0; e < QK; e++) {
            int v = L[e];
            if (v > 3) {
                b[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
                v -= 4;
            }
            U[e] = (uint8_t)v;
        }
        pack_2bit(U, b[i].qs);
    }
}

/* ---- Q4_K / Q5_K: 8 x 32, value = d*sc*q - dmin*m, sc/m 6-bit ---------------------------- */

/* The 6-bit scales ls and mins lm packed into the 12 bytes, d and dmin stored
 * as F16, and every element requantized against the stored (rounded) scales:
 * the tail of both scale searches below. */
static void k4_pack_requantize(const float *x, int nmax, const uint8_t ls[QK / 32], const uint8_t lm[QK / 32], float d_block,
                               float m_block, uint16_t *d_out, uint16_t *dmin_out, uint8_t packed[12], uint8_t L[QK]) {
    for (int j = 0; j < QK / 32; j++) {
        if (j < 4) {
            packed[j] = ls[j];
            packed[j + 4] = lm[j];
        } else {
            packed[j + 4] = (uint8_t)((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
            packed[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            packed[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
    *d_out = brisk_fp32_to_fp16(d_block);
    *dmin_out = brisk_fp32_to_fp16(m_block);
    for (int j = 0; j < QK / 32; j++) {
        uint8_t sc, m;
        brisk_k4_scale_min(j, packed, &sc, &m);
        const float d = brisk_fp16_to_fp32(*d_out) * sc;
        if (!d) continue;
        const float dm = brisk_fp16_to_fp32(*dmin_out) * m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clamp_int(brisk_nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

/* Scale search and 6-bit scale packing shared by Q4_K (nmax 15) and Q5_K
 * (nmax 31). Fills d, dmin, the 12 packed scale bytes, and L (0..nmax). */
static void quantize_k4_scales(const float *x, int nmax, float rmin, int nstep, uint16_t *d_out,
                               uint16_t *dmin_out, uint8_t packed[12], uint8_t L[QK]) {
    uint8_t Laux[32];
    float weights[32], mins[QK / 32], scales[QK / 32];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < QK / 32; j++) {
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = search_asymmetric(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                      0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t ls[QK / 32], lm[QK / 32];
    for (int j = 0; j < QK / 32; j++) {
        /* ggml assigns the rounded int to a uint8_t (wrapping) before MIN(63, .). */
        ls[j] = BRISK_MIN(63, (uint8_t)brisk_nearest_int(inv_scale * scales[j]));
        lm[j] = BRISK_MIN(63, (uint8_t)brisk_nearest_int(inv_min * mins[j]));
    }
    k4_pack_requantize(x, nmax, ls, lm, max_scale / 63.0f, max_min / 63.0f, d_out, dmin_out, packed, L);
}

/* qs layout for both: 4 chunks of 64 elements; chunk c's 32 bytes hold element
 * 64c+l in the low nibble and 64c+32+l in the high nibble. */
void brisk_q4_k_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q4_k *b = src;
    for (int64_t i = 0; i < n / QK; i++) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        const float dmin = brisk_fp16_to_fp32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int c = 0; c < 4; c++, q += 32) {
            uint8_t sc, m;
            brisk_k4_scale_min(2 * c, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            brisk_k4_scale_min(2 * c + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (q[l] & 0x0f) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void brisk_q4_k_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % QK == 0);
    brisk_block_q4_k *b = dst;
    uint8_t L[QK];
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        memset(b[i].scales, 0, sizeof b[i].scales);
        quantize_k4_scales(src, 15, -1.0f, 20, &b[i].d, &b[i].dmin, b[i].scales, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

/* Q5_K adds a fifth bit: for chunk c, element 64c+l has it in bit 2c of
 * qh[l], element 64c+32+l in bit 2c+1. */
void brisk_q5_k_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q5_k *b = src;
    for (int64_t i = 0; i < n / QK; i++) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        const float dmin = brisk_fp16_to_fp32(b[i].dmin);
        const uint8_t *ql = b[i].qs;
        const uint8_t *qh = b[i].qh;
        for (int c = 0; c < 4; c++, ql += 32) {
            uint8_t sc, m;
            brisk_k4_scale_min(2 * c, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            brisk_k4_scale_min(2 * c + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            const uint8_t u1 = (uint8_t)(1u << (2 * c)), u2 = (uint8_t)(2u << (2 * c));
            for (int l = 0; l < 32; l++) *dst++ = d1 * ((ql[l] & 0x0f) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

void brisk_q5_k_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % QK == 0);
    brisk_block_q5_k *b = dst;
    uint8_t L[QK];
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        memset(b[i].scales, 0, sizeof b[i].scales);
        quantize_k4_scales(src, 31, -0.5f, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                if (lo > 15) {
                    lo -= 16;
                    b[i].qh[l] |= (uint8_t)(1u << (2 * c));
                }
                if (hi > 15) {
                    hi -= 16;
                    b[i].qh[l] |= (uint8_t)(2u << (2 * c));
                }
                b[i].qs[32 * c + l] = (uint8_t)(lo | (hi << 4));
            }
        }
    }
}

/* ---- Q6_K: 16 x 16, value = d*sc*(q-32), q 6-bit, sc int8 -------------------------------- */
/* For each 128-element half: ql[l] holds the low nibbles of elements l (low)
 * and l+64 (high), ql[l+32] those of l+32 and l+96; qh[l] holds the 2 high
 * bits of l, l+32, l+64, l+96 in bit pairs 0-1 .. 6-7. */

void brisk_q6_k_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q6_k *b = src;
    for (int64_t i = 0; i < n / QK; i++) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int half = 0; half < 2; half++, dst += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * sc[is] * q1;
                dst[l + 32] = d * sc[is + 2] * q2;
                dst[l + 64] = d * sc[is + 4] * q3;
                dst[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void brisk_q6_k_quantize(const float *src, void *dst, int64_t n) { brisk_q6_k_quantize_imatrix(src, dst, n, NULL); }

/* ---- Q8_K: 256 x int8 with fp32 d and 16-element partial sums ------------------------------- */

void brisk_q8_k_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q8_k *b = src;
    for (int64_t i = 0; i < n / QK; i++)
        for (int j = 0; j < QK; j++) *dst++ = b[i].d * b[i].qs[j];
}

/* iscale = -127/max, max the signed value of largest magnitude (first one on
 * ties), q = round-half-even(iscale * x) capped at 127, d = 1/iscale in fp32.
 * ggml leaves bsums unwritten for an all-zero block; brisk zeroes them. */
void brisk_q8_k_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % QK == 0);
    brisk_block_q8_k *b = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float max;
        const float amax = signed_absmax(src, QK, &max);
        if (!amax) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK; j++) b[i].qs[j] = (int8_t)BRISK_MIN(127, brisk_round_even(iscale * src[j]));
        for (int g = 0; g < QK / 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += b[i].qs[16 * g + l];
            b[i].bsums[g] = (int16_t)sum;
        }
        b[i].d = 1 / iscale;
    }
}

/* ---- with an importance matrix -------------------------------------------------------------
 * llama-quantize --imatrix runs other quantizers (ggml-quants.c's
 * quantize_row_*_impl with quant_weights): the per-element weights of every
 * least-squares fit become qw * sqrt(sigma2 + x^2), qw the row's importance
 * (the mean squared activation of each column), sigma2 a multiple of the
 * block's (or row's) mean square; the sub-block scales and mins are then
 * themselves fitted (search_qp) with the sums of those weights, instead of
 * being scaled to the largest. Written anew in ggml's operation order, so
 * the bytes are llama-quantize's. */

/* Non-negative values x against L in [0, nmax] (a sub-block's scales or
 * mins): start from max/nmax, try 8 nearby scales by weighted squared error,
 * then up to 5 sweeps of moving single L values while that raises
 * (sum w x l)^2 / sum w l^2 (ggml's make_qp_quants). Returns the scale. */
static float search_qp(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0.0f;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)brisk_nearest_int(iscale * x[i]);
    const float scale = 1 / iscale;
    float best_mse = 0.0f;
    for (int i = 0; i < n; i++) {
        const float diff = x[i] - scale * L[i];
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * is + nmax) / max, scale_is = 1 / iscale_is;
        float mse = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = BRISK_MIN(nmax, brisk_nearest_int(iscale_is * x[i]));
            const float diff = x[i] - scale_is * l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = BRISK_MIN(nmax, brisk_nearest_int(iscale * x[i]));
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int sweep = 0; sweep < 5; sweep++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * L[i];
            float sl2 = suml2 - w[i] * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                const int nl = BRISK_MIN(nmax, brisk_nearest_int(x[i] * sl2 / slx));
                if (nl != L[i]) {
                    slx += w[i] * x[i] * nl;
                    sl2 += w[i] * nl * nl;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* sum of x^2 over n values, in order */
static float sum_squares(const float *x, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}

/* w = qw * sqrt(sigma2 + x^2) for n values; returns their sum */
static float importance(const float *x, const float *qw, float sigma2, int n, float *w) {
    float sum = 0.0f;
    for (int l = 0; l < n; l++) w[l] = qw[l] * sqrtf(sigma2 + x[l] * x[l]);
    for (int l = 0; l < n; l++) sum += w[l];
    return sum;
}

/* Q4_K and Q5_K: each 32-group fitted with an offset (36 steps of 0.05 from
 * -0.9), then the 8 scales and 8 mins fitted to 6 bits. */
static void quantize_k4_scales_imatrix(const float *x, const float *qw, int nmax, uint16_t *d_out, uint16_t *dmin_out,
                                       uint8_t packed[12], uint8_t L[QK]) {
    uint8_t Laux[32], Ls[QK / 32], Lm[QK / 32];
    float weights[32], sw[QK / 32], mins[QK / 32], scales[QK / 32];
    const float sigma2 = 2 * sum_squares(x, QK) / QK;
    for (int j = 0; j < QK / 32; j++) {
        sw[j] = importance(x + 32 * j, qw + 32 * j, sigma2, 32, weights);
        scales[j] = search_asymmetric(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    const float d_block = search_qp(QK / 32, 63, scales, Ls, sw);
    const float m_block = search_qp(QK / 32, 63, mins, Lm, sw);
    k4_pack_requantize(x, nmax, Ls, Lm, d_block, m_block, d_out, dmin_out, packed, L);
}

void brisk_q4_k_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw) {
    BRISK_ASSERT(n % QK == 0);
    brisk_block_q4_k *b = dst;
    uint8_t L[QK];
    for (int64_t i = 0; i < n / QK; i++, src += QK, qw += QK) {
        quantize_k4_scales_imatrix(src, qw, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

void brisk_q5_k_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw) {
    BRISK_ASSERT(n % QK == 0);
    brisk_block_q5_k *b = dst;
    uint8_t L[QK];
    for (int64_t i = 0; i < n / QK; i++, src += QK, qw += QK) {
        quantize_k4_scales_imatrix(src, qw, 31, &b[i].d, &b[i].dmin, b[i].scales, L);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                if (lo > 15) {
                    lo -= 16;
                    b[i].qh[l] |= (uint8_t)(1u << (2 * c));
                }
                if (hi > 15) {
                    hi -= 16;
                    b[i].qh[l] |= (uint8_t)(2u << (2 * c));
                }
                b[i].qs[32 * c + l] = (uint8_t)(lo | (hi << 4));
            }
        }
    }
}

/* Q6_K: the importance itself is the search's weight (no sigma2 term); without
 * one (qw NULL) the search is unweighted: brisk_q6_k_quantize. */
void brisk_q6_k_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw) {
    BRISK_ASSERT(n % QK == 0);
    brisk_block_q6_k *b = dst;
    int8_t L[QK];
    float scales[QK / 16];
    for (int64_t i = 0; i < n / QK; i++, src += QK, qw = qw ? qw + QK : NULL) {
        float max_scale = 0.0f, max_abs_scale = 0.0f;
        for (int j = 0; j < QK / 16; j++) {
            scales[j] = search_symmetric(16, 32, src + 16 * j, L + 16 * j, qw ? qw + 16 * j : NULL);
            const float a = fabsf(scales[j]);
            if (a > max_abs_scale) {
                max_abs_scale = a;
                max_scale = scales[j];
            }
        }
        if (max_abs_scale < GROUP_EPS) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        b[i].d = brisk_fp32_to_fp16(1 / iscale);
        for (int j = 0; j < QK / 16; j++)
            b[i].scales[j] = (int8_t)BRISK_MIN(127, brisk_nearest_int(iscale * scales[j]));
        for (int j = 0; j < QK / 16; j++) {
            const float d = brisk_fp16_to_fp32(b[i].d) * b[i].scales[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clamp_int(brisk_nearest_int(src[16 * j + l] / d), -32, 31) + 32);
        }
        uint8_t *ql = b[i].ql, *qh = b[i].qh;
        for (int half = 0; half < QK; half += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const int v0 = L[half + l], v1 = L[half + l + 32];
                const int v2 = L[half + l + 64], v3 = L[half + l + 96];
                ql[l] = (uint8_t)((v0 & 0x0f) | ((v2 & 0x0f) << 4));
                ql[l + 32] = (uint8_t)((v1 & 0x0f) | ((v3 & 0x0f) << 4));
                qh[l] = (uint8_t)((v0 >> 4) | ((v1 >> 4) << 2) | ((v2 >> 4) << 4) | ((v3 >> 4) << 6));
            }
        }
    }
}

/* Q2_K: 16-groups with an offset, scales and mins fitted to 4 bits; sigma2 is
 * the block's plain mean square here. */
void brisk_q2_k_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw) {
    BRISK_ASSERT(n % QK == 0);
    brisk_block_q2_k *b = dst;
    uint8_t L[QK], Laux[16], Ls[QK / 16], Lm[QK / 16];
    float weights[16], sw[QK / 16], mins[QK / 16], scales[QK / 16];
    for (int64_t i = 0; i < n / QK; i++, src += QK, qw += QK) {
        const float sigma2 = sum_squares(src, QK) / QK;
        for (int j = 0; j < QK / 16; j++) {
            sw[j] = importance(src + 16 * j, qw + 16 * j, sigma2, 16, weights);
            scales[j] = search_asymmetric(16, 3, src + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        }
        b[i].d = brisk_fp32_to_fp16(search_qp(QK / 16, 15, scales, Ls, sw));
        b[i].dmin = brisk_fp32_to_fp16(search_qp(QK / 16, 15, mins, Lm, sw));
        const float dm = brisk_fp16_to_fp32(b[i].d), mm = brisk_fp16_to_fp32(b[i].dmin);
        for (int j = 0; j < QK / 16; j++) b[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        for (int j = 0; j < QK / 16; j++) {
            const float d = dm * (b[i].scales[j] & 0x0f);
            if (!d) continue;
            const float m = mm * (b[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++) L[16 * j + l] = (uint8_t)clamp_int(brisk_nearest_int((src[16 * j + l] + m) / d), 0, 3);
        }
        pack_2bit(L, b[i].qs);
    }
}

/* Q3_K: each 16-group by the symmetric search with importance weights, then
 * the 16 signed scales by the same search (weighted by the groups' sums). */
void brisk_q3_k_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw) {
    BRISK_ASSERT(n % QK == 0);
    brisk_block_q3_k *b = dst;
    int8_t L[QK], Ls[QK / 16], sc[16];
    uint8_t U[QK];
    float weights[16], sw[QK / 16], scales[QK / 16];
    for (int64_t i = 0; i < n / QK; i++, src += QK, qw += QK) {
        const float sigma2 = 2 * sum_squares(src, QK) / QK;
        for (int j = 0; j < QK / 16; j++) {
            sw[j] = importance(src + 16 * j, qw + 16 * j, sigma2, 16, weights);
            scales[j] = search_symmetric(16, 4, src + 16 * j, L + 16 * j, weights);
        }
        memset(b[i].scales, 0, sizeof b[i].scales);
        const float d_block = search_symmetric(QK / 16, 32, scales, Ls, sw);
        for (int j = 0; j < QK / 16; j++) {
            const int l = Ls[j];   /* already biased by 32 */
            if (j < 8) b[i].scales[j] = (uint8_t)(l & 0x0f);
            else b[i].scales[j - 8] |= (uint8_t)((l & 0x0f) << 4);
            b[i].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
        }
        b[i].d = brisk_fp32_to_fp16(d_block);
        brisk_q3_k_scales(b[i].scales, sc);
        for (int j = 0; j < QK / 16; j++) {
            const float d = brisk_fp16_to_fp32(b[i].d) * sc[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clamp_int(brisk_nearest_int(src[16 * j + l] / d), -4, 3) + 4);
        }
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        for (int e = 0; e < QK; e++) {
            int v = L[e];
            if (v > 3) {
                b[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
                v -= 4;
            }
            U[e] = (uint8_t)v;
        }
        pack_2bit(U, b[i].qs);
    }
}

/* The 32-element formats: sigma2 is the whole row's mean square. Q4_0/Q5_0
 * by the symmetric search, Q4_1/Q5_1 by the offset one. */
void brisk_q4_0_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw) {
    BRISK_ASSERT(n % 32 == 0);
    brisk_block_q4_0 *b = dst;
    float w[32];
    int8_t L[32];
    const float sigma2 = sum_squares(src, n) / n;
    for (int64_t i = 0; i < n / 32; i++) {
        importance(src + 32 * i, qw + 32 * i, sigma2, 32, w);
        b[i].d = brisk_fp32_to_fp16(search_symmetric(32, 8, src + 32 * i, L, w));
        for (int j = 0; j < 16; j++) b[i].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

void brisk_q5_0_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw) {
    BRISK_ASSERT(n % 32 == 0);
    brisk_block_q5_0 *b = dst;
    float w[32];
    int8_t L[32];
    const float sigma2 = sum_squares(src, n) / n;
    for (int64_t i = 0; i < n / 32; i++) {
        importance(src + 32 * i, qw + 32 * i, sigma2, 32, w);
        b[i].d = brisk_fp32_to_fp16(search_symmetric(32, 16, src + 32 * i, L, w));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const uint8_t lo = (uint8_t)L[j], hi = (uint8_t)L[j + 16];
            b[i].qs[j] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
            qh |= (uint32_t)((lo & 0x10u) >> 4) << j;
            qh |= (uint32_t)((hi & 0x10u) >> 4) << (j + 16);
        }
        memcpy(b[i].qh, &qh, sizeof qh);
    }
}

void brisk_q4_1_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw) {
    BRISK_ASSERT(n % 32 == 0);
    brisk_block_q4_1 *b = dst;
    float w[32], min;
    uint8_t L[32], Laux[32];
    const float sigma2 = sum_squares(src, n) / n;
    for (int64_t i = 0; i < n / 32; i++) {
        importance(src + 32 * i, qw + 32 * i, sigma2, 32, w);
        const float d = search_asymmetric(32, 15, src + 32 * i, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
        b[i].d = brisk_fp32_to_fp16(d);
        b[i].m = brisk_fp32_to_fp16(-min);
        for (int j = 0; j < 16; j++) b[i].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

void brisk_q5_1_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw) {
    BRISK_ASSERT(n % 32 == 0);
    brisk_block_q5_1 *b = dst;
    float w[32], min;
    uint8_t L[32], Laux[32];
    const float sigma2 = sum_squares(src, n) / n;
    for (int64_t i = 0; i < n / 32; i++) {
        importance(src + 32 * i, qw + 32 * i, sigma2, 32, w);
        const float d = search_asymmetric(32, 31, src + 32 * i, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
        b[i].d = brisk_fp32_to_fp16(d);
        b[i].m = brisk_fp32_to_fp16(-min);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const uint8_t lo = L[j], hi = L[j + 16];
            b[i].qs[j] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
            qh |= (uint32_t)((lo & 0x10u) >> 4) << j;
            qh |= (uint32_t)((hi & 0x10u) >> 4) << (j + 16);
        }
        memcpy(b[i].qh, &qh, sizeof qh);
    }
}
