/* convert: reference quantize/dequantize for the float formats and the
 * 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1), and the
 * per-type lookup (brisk_qtype_to_float / brisk_qtype_from_float).
 *
 * The arithmetic mirrors ggml-quants.c operation for operation (same
 * expression order, same rounding function, scales through fp16), because
 * brisk must read and write the same bits llama.cpp does. The K formats are in
 * convert_k.c. */
#include "quant/convert.h"
#include "quant/blocks.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ggml's "(int8_t)(float)" casts as its x86-64 build executes them: the float
 * is truncated to 32 bits (cvttss2si, which gives INT32_MIN for NaN and for
 * anything out of range) and the low byte kept. Finite weights land in
 * [0, 33) and are plain truncation; a block whose scale is so small that
 * 1/d overflows to inf (|max| below ~2e-38) gives 0 for every weight in
 * llama-quantize's output, and must here too to stay byte-identical. */
static inline int x86_f2i8(float v) {
    const int32_t i = v >= -2147483648.0f && v < 2147483648.0f ? (int32_t)v : INT32_MIN;
    const int b = (int)((uint32_t)i & 0xffu);
    return b >= 128 ? b - 256 : b;
}

/* (uint8_t)MIN(cap, (int8_t)v): ggml's 4/5-bit codes, wrapping as its uint8_t does. */
static inline unsigned code_u8(float v, int cap) {
    return (unsigned)(uint8_t)(BRISK_MIN(cap, x86_f2i8(v)) & 0xff);
}

/* roundf(v) into int8 range, as quantize_row_q8_0_ref's implicit conversion
 * of roundf's result; in-range values are untouched. */
static inline int8_t round_away_i8(float v) {
    float r = roundf(v);
    if (!(r > -128.0f)) return r != r ? 0 : -128;
    if (!(r < 127.0f)) return 127;
    return (int8_t)r;
}

static inline int8_t round_even_i8(float v) {
    int r = brisk_round_even(v);
    return (int8_t)(r < -128 ? -128 : r > 127 ? 127 : r);
}

/* ---- float formats ------------------------------------------------------------ */

void brisk_f32_dequantize(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void brisk_f32_quantize(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void brisk_f16_dequantize(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = brisk_fp16_to_fp32(h[i]);
}

void brisk_f16_quantize(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = brisk_fp32_to_fp16(src[i]);
}

void brisk_bf16_dequantize(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = brisk_bf16_to_fp32(h[i]);
}

void brisk_bf16_quantize(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = brisk_fp32_to_bf16(src[i]);
}

/* ---- Q4_0: 32 x 4-bit, value = d * (q - 8) -------------------------------------- */
/* Element j of a block sits in the low nibble of qs[j] (j < 16) or the high
 * nibble of qs[j - 16]. */

void brisk_q4_0_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % BRISK_QK4_0 == 0);
    const brisk_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / BRISK_QK4_0; i++, dst += 32) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 16; j++) {
            const int lo = (b[i].qs[j] & 0x0f) - 8;
            const int hi = (b[i].qs[j] >> 4) - 8;
            dst[j] = lo * d;
            dst[j + 16] = hi * d;
        }
    }
}

/* d = (the signed value of largest magnitude) / -8, so that value maps to q = 0
 * exactly and the rest spread over 0..15. */
void brisk_q4_0_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % BRISK_QK4_0 == 0);
    brisk_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / BRISK_QK4_0; i++, src += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (amax < fabsf(src[j])) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = brisk_fp32_to_fp16(d);
        for (int j = 0; j < 16; j++) {
            const unsigned lo = code_u8(src[j] * id + 8.5f, 15), hi = code_u8(src[j + 16] * id + 8.5f, 15);
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

/* ---- Q4_1: 32 x 4-bit, value = d * q + m ----------------------------------------- */

void brisk_q4_1_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        const float m = brisk_fp16_to_fp32(b[i].m);
        for (int j = 0; j < 16; j++) {
            const int lo = b[i].qs[j] & 0x0f;
            const int hi = b[i].qs[j] >> 4;
            dst[j] = lo * d + m;
            dst[j + 16] = hi * d + m;
        }
    }
}

void brisk_q4_1_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    brisk_block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < 32; j++) {
            if (src[j] < min) min = src[j];
            if (src[j] > max) max = src[j];
        }
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = brisk_fp32_to_fp16(d);
        b[i].m = brisk_fp32_to_fp16(min);
        for (int j = 0; j < 16; j++) {
            const unsigned lo = code_u8((src[j] - min) * id + 0.5f, 15), hi = code_u8((src[j + 16] - min) * id + 0.5f, 15);
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

/* ---- Q5_0: 32 x 5-bit, value = d * (q - 16) ---------------------------------------- */
/* Low 4 bits as in Q4_0; bit 4 of element j is bit j of the little-endian qh. */

void brisk_q5_0_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        uint32_t qh;
        memcpy(&qh, b[i].qh, sizeof qh);
        for (int j = 0; j < 16; j++) {
            const int lo = ((b[i].qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4)) - 16;
            const int hi = ((b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16;
            dst[j] = lo * d;
            dst[j + 16] = hi * d;
        }
    }
}

void brisk_q5_0_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    brisk_block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (amax < fabsf(src[j])) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = brisk_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const unsigned lo = code_u8(src[j] * id + 16.5f, 31), hi = code_u8(src[j + 16] * id + 16.5f, 31);
            b[i].qs[j] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
            qh |= (uint32_t)((lo >> 4) & 1) << j;
            qh |= (uint32_t)((hi >> 4) & 1) << (j + 16);
        }
        memcpy(b[i].qh, &qh, sizeof qh);
    }
}

/* ---- Q5_1: 32 x 5-bit, value = d * q + m -------------------------------------------- */

void brisk_q5_1_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        const float m = brisk_fp16_to_fp32(b[i].m);
        uint32_t qh;
        memcpy(&qh, b[i].qh, sizeof qh);
        for (int j = 0; j < 16; j++) {
            const int lo = (b[i].qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
            const int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            dst[j] = lo * d + m;
            dst[j + 16] = hi * d + m;
        }
    }
}

void brisk_q5_1_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    brisk_block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < 32; j++) {
            if (src[j] < min) min = src[j];
            if (src[j] > max) max = src[j];
        }
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = brisk_fp32_to_fp16(d);
        b[i].m = brisk_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            /* ggml does not clamp here; (max-min)*id stays below 31.5, so the
             * clamp only matters for non-finite input. */
            const unsigned lo = code_u8((src[j] - min) * id + 0.5f, 31), hi = code_u8((src[j + 16] - min) * id + 0.5f, 31);
            b[i].qs[j] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
            qh |= (uint32_t)((lo >> 4) & 1) << j;
            qh |= (uint32_t)((hi >> 4) & 1) << (j + 16);
        }
        memcpy(b[i].qh, &qh, sizeof qh);
    }
}

/* ---- Q8_0: 32 x int8, value = d * q -------------------------------------------------- */

void brisk_q8_0_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % BRISK_QK8_0 == 0);
    const brisk_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 32; j++) dst[j] = b[i].qs[j] * d;
    }
}

static float block_amax(const float *x, int len) {
    float amax = 0.0f;
    for (int j = 0; j < len; j++) amax = BRISK_MAX(amax, fabsf(x[j]));
    return amax;
}

/* d = amax/127 (stored as fp16, but q is computed with the fp32 d) and
 * q = roundf(x / d), ties away from zero. */
void brisk_q8_0_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % BRISK_QK8_0 == 0);
    brisk_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        const float d = block_amax(src, 32) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = brisk_fp32_to_fp16(d);
        for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)x86_f2i8(roundf(src[j] * id));   /* |q| <= 127 when 1/d is finite */
    }
}

void brisk_q8_0_quantize_x86(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % BRISK_QK8_0 == 0);
    brisk_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        const float amax = block_amax(src, 32);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        b[i].d = brisk_fp32_to_fp16(d);
        for (int j = 0; j < 32; j++) b[i].qs[j] = round_even_i8(src[j] * id);
    }
}

/* ---- Q8_1: Q8_0 plus s = d * sum(q), the activation side of Q4_1/Q5_1 ----------------- */

void brisk_q8_1_dequantize(const void *src, float *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = brisk_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 32; j++) dst[j] = b[i].qs[j] * d;
    }
}

void brisk_q8_1_quantize(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    brisk_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        const float d = block_amax(src, 32) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = brisk_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            b[i].qs[j] = round_away_i8(src[j] * id);
            sum += b[i].qs[j];
        }
        b[i].s = brisk_fp32_to_fp16(sum * d);
    }
}

void brisk_q8_1_quantize_x86(const float *src, void *dst, int64_t n) {
    BRISK_ASSERT(n % 32 == 0);
    brisk_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        const float amax = block_amax(src, 32);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        b[i].d = brisk_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            b[i].qs[j] = round_even_i8(src[j] * id);
            sum += b[i].qs[j];
        }
        b[i].s = brisk_fp32_to_fp16(d * sum);
    }
}

/* ---- per-type lookup ------------------------------------------------------------------ */

typedef struct conversion {
    brisk_to_float_fn to_float;
    brisk_from_float_fn from_float;
} conversion;

static const conversion conversions[BRISK_Q_TYPE_LIMIT] = {
    [BRISK_Q_F32]  = {brisk_f32_dequantize, brisk_f32_quantize},
    [BRISK_Q_F16]  = {brisk_f16_dequantize, brisk_f16_quantize},
    [BRISK_Q_BF16] = {brisk_bf16_dequantize, brisk_bf16_quantize},
    [BRISK_Q_Q4_0] = {brisk_q4_0_dequantize, brisk_q4_0_quantize},
    [BRISK_Q_Q4_1] = {brisk_q4_1_dequantize, brisk_q4_1_quantize},
    [BRISK_Q_Q5_0] = {brisk_q5_0_dequantize, brisk_q5_0_quantize},
    [BRISK_Q_Q5_1] = {brisk_q5_1_dequantize, brisk_q5_1_quantize},
    [BRISK_Q_Q8_0] = {brisk_q8_0_dequantize, brisk_q8_0_quantize},
    [BRISK_Q_Q8_1] = {brisk_q8_1_dequantize, brisk_q8_1_quantize},
    [BRISK_Q_Q2_K] = {brisk_q2_k_dequantize, brisk_q2_k_quantize},
    [BRISK_Q_Q3_K] = {brisk_q3_k_dequantize, brisk_q3_k_quantize},
    [BRISK_Q_Q4_K] = {brisk_q4_k_dequantize, brisk_q4_k_quantize},
    [BRISK_Q_Q5_K] = {brisk_q5_k_dequantize, brisk_q5_k_quantize},
    [BRISK_Q_Q6_K] = {brisk_q6_k_dequantize, brisk_q6_k_quantize},
    [BRISK_Q_Q8_K] = {brisk_q8_k_dequantize, brisk_q8_k_quantize},
    [BRISK_Q_IQ4_NL] = {brisk_iq4_nl_dequantize, brisk_iq4_nl_quantize},
    [BRISK_Q_IQ4_XS] = {brisk_iq4_xs_dequantize, brisk_iq4_xs_quantize},
    [BRISK_Q_MXFP4] = {brisk_mxfp4_dequantize, brisk_mxfp4_quantize},
};

brisk_to_float_fn brisk_qtype_to_float(uint32_t type) {
    return type < BRISK_Q_TYPE_LIMIT ? conversions[type].to_float : NULL;
}

brisk_from_float_fn brisk_qtype_from_float(uint32_t type) {
    return type < BRISK_Q_TYPE_LIMIT ? conversions[type].from_float : NULL;
}

brisk_from_float_imatrix_fn brisk_qtype_from_float_imatrix(uint32_t type) {
    switch (type) {
    case BRISK_Q_Q4_0: return brisk_q4_0_quantize_imatrix;
    case BRISK_Q_Q4_1: return brisk_q4_1_quantize_imatrix;
    case BRISK_Q_Q5_0: return brisk_q5_0_quantize_imatrix;
    case BRISK_Q_Q5_1: return brisk_q5_1_quantize_imatrix;
    case BRISK_Q_Q2_K: return brisk_q2_k_quantize_imatrix;
    case BRISK_Q_Q3_K: return brisk_q3_k_quantize_imatrix;
    case BRISK_Q_Q4_K: return brisk_q4_k_quantize_imatrix;
    case BRISK_Q_Q5_K: return brisk_q5_k_quantize_imatrix;
    case BRISK_Q_Q6_K: return brisk_q6_k_quantize_imatrix;
    case BRISK_Q_IQ4_NL: return brisk_iq4_nl_quantize_imatrix;
    case BRISK_Q_IQ4_XS: return brisk_iq4_xs_quantize_imatrix;
    default: return NULL;
    }
}
