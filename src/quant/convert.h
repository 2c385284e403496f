/* convert: the per-format reference quantize/dequantize routines behind
 * brisk_qtype_to_float / brisk_qtype_from_float (quant.h).
 *
 * Every routine works on n elements, n a whole number of blocks of its type
 * (asserted; a wrong n is a programmer error). Semantics follow ggml's
 * ggml-quants.c exactly: dequantize_row_* bit for bit, quantize_row_*_ref bit
 * for bit (same rounding, same fp16 conversion of scales). The routines are
 * split over convert.c (plain floats and the 32-element formats) and
 * convert_k.c (the 256-element K formats). */
#ifndef BRISK_QUANT_CONVERT_H
#define BRISK_QUANT_CONVERT_H

#include "quant/quant.h"

/* ---- float formats (convert.c) ---------------------------------------------- */
void brisk_f32_dequantize(const void *src, float *dst, int64_t n);   /* copy */
void brisk_f32_quantize(const float *src, void *dst, int64_t n);     /* copy */
void brisk_f16_dequantize(const void *src, float *dst, int64_t n);
void brisk_f16_quantize(const float *src, void *dst, int64_t n);     /* round to nearest even */
void brisk_bf16_dequantize(const void *src, float *dst, int64_t n);
void brisk_bf16_quantize(const float *src, void *dst, int64_t n);    /* round to nearest even */

/* ---- 32-element block formats (convert.c) ------------------------------------ */
void brisk_q4_0_dequantize(const void *src, float *dst, int64_t n);
void brisk_q4_0_quantize(const float *src, void *dst, int64_t n);
void brisk_q4_1_dequantize(const void *src, float *dst, int64_t n);
void brisk_q4_1_quantize(const float *src, void *dst, int64_t n);
void brisk_q5_0_dequantize(const void *src, float *dst, int64_t n);
void brisk_q5_0_quantize(const float *src, void *dst, int64_t n);
void brisk_q5_1_dequantize(const void *src, float *dst, int64_t n);
void brisk_q5_1_quantize(const float *src, void *dst, int64_t n);
void brisk_q8_0_dequantize(const void *src, float *dst, int64_t n);
void brisk_q8_0_quantize(const float *src, void *dst, int64_t n);   /* = quantize_row_q8_0_ref */
void brisk_q8_1_dequantize(const void *src, float *dst, int64_t n);  /* d * q (ggml has none) */
void brisk_q8_1_quantize(const float *src, void *dst, int64_t n);   /* = quantize_row_q8_1_ref */

/* The activation quantizers ggml's CPU backend actually runs on x86 with AVX
 * (ggml-cpu/arch/x86/quants.c quantize_row_q8_0/q8_1): scale 127/amax instead
 * of 1/(amax/127), and round-half-to-even instead of roundf's half-away. They
 * differ from the _ref versions by one step in rare elements. Written in
 * scalar C so every table can reproduce llama.cpp-on-x86 activations exactly. */
void brisk_q8_0_quantize_x86(const float *src, void *dst, int64_t n);
void brisk_q8_1_quantize_x86(const float *src, void *dst, int64_t n);

/* ---- 256-element K formats (convert_k.c) -------------------------------------- */
void brisk_q2_k_dequantize(const void *src, float *dst, int64_t n);
void brisk_q2_k_quantize(const float *src, void *dst, int64_t n);
void brisk_q3_k_dequantize(const void *src, float *dst, int64_t n);
void brisk_q3_k_quantize(const float *src, void *dst, int64_t n);
void brisk_q4_k_dequantize(const void *src, float *dst, int64_t n);
void brisk_q4_k_quantize(const float *src, void *dst, int64_t n);
void brisk_q5_k_dequantize(const void *src, float *dst, int64_t n);
void brisk_q5_k_quantize(const float *src, void *dst, int64_t n);
void brisk_q6_k_dequantize(const void *src, float *dst, int64_t n);
void brisk_q6_k_quantize(const float *src, void *dst, int64_t n);
void brisk_q8_k_dequantize(const void *src, float *dst, int64_t n);
void brisk_q8_k_quantize(const float *src, void *dst, int64_t n);   /* = quantize_row_q8_K_ref */

/* ---- 4-bit lookup-table formats (convert_iq.c) ---------------------------------
 * IQ4_NL (32 elements, fp16 scale), IQ4_XS (256 elements: IQ4_NL's values with
 * 6-bit group scales under one fp16 scale) and MXFP4 (32 elements of E2M1
 * under a power-of-two E8M0 scale). The quantizers are ggml's
 * (quantize_iq4_nl / quantize_iq4_xs without an importance matrix,
 * quantize_row_mxfp4_ref), as llama-quantize runs them. */
void brisk_iq4_nl_dequantize(const void *src, float *dst, int64_t n);
void brisk_iq4_nl_quantize(const float *src, void *dst, int64_t n);
void brisk_iq4_xs_dequantize(const void *src, float *dst, int64_t n);
void brisk_iq4_xs_quantize(const float *src, void *dst, int64_t n);
void brisk_mxfp4_dequantize(const void *src, float *dst, int64_t n);
void brisk_mxfp4_quantize(const float *src, void *dst, int64_t n);

/* The 16 values a nibble stands for: IQ4_NL's non-linear grid (denser near
 * zero), and MXFP4's E2M1 values doubled (0, 0.5, 1, 1.5, 2, 3, 4, 6 and
 * their negatives, times 2, so they are integers; the scale is halved to
 * match, see brisk_e8m0_half). */
extern const int8_t brisk_iq4nl_values[16];
extern const int8_t brisk_mxfp4_values[16];

/* 2^(e - 128): an E8M0 scale halved (ggml's GGML_E8M0_TO_FP32_HALF), exact;
 * e = 0 and 1 give the subnormals 2^-128 and 2^-127. */
static inline float brisk_e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
}

/* IQ4_XS group j's 6-bit scale, biased by 32 (value = d * (ls - 32) * grid). */
static inline int brisk_iq4_xs_scale(const uint8_t scales_l[4], uint16_t scales_h, int j) {
    return ((scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((scales_h >> (2 * j)) & 3) << 4);
}

/* ---- helpers shared by the two files and by kernels/ --------------------------- */

/* Round to nearest, ties to even, for |x| < 2^22 (the 1.5*2^23 bias trick: the
 * float add lands x on the integer grid of [2^23, 2^24) and the low mantissa
 * bits are the result). Out-of-range input saturates and NaN gives 0, so the
 * conversion is never undefined; every caller clamps far inside that range. */
static inline int brisk_round_even(float x) {
    if (!(x > -4194303.0f)) return x != x ? 0 : -4194303;
    if (!(x < 4194303.0f)) return 4194303;
    float biased = x + 12582912.0f;
    uint32_t bits;
    __builtin_memcpy(&bits, &biased, sizeof bits);
    return (int)(bits & 0x7fffffu) - 0x400000;
}

/* ggml's nearest_int exactly: round to nearest even through the 1.5*2^23 bias
 * and keep the low mantissa bits, with nothing clamped. Equal to
 * brisk_round_even below 2^22 in magnitude; beyond it (inf when a scale
 * underflows, NaN from 0 * inf) it gives ggml's bits: -2^22 for +-inf, 0 for
 * NaN, so the clamps after it land where llama-quantize's do. */
static inline int brisk_nearest_int(float x) {
    const float biased = x + 12582912.0f;
    uint32_t bits;
    __builtin_memcpy(&bits, &biased, sizeof bits);
    return (int)(bits & 0x7fffffu) - 0x400000;
}

/* 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes of a
 * Q4_K/Q5_K block: sub-blocks 0-3 keep theirs in the low 6 bits of bytes 0-3
 * (scale) and 4-7 (min); sub-blocks 4-7 split theirs into a low nibble in bytes
 * 8-11 and the 2 high bits in the top of bytes 0-3 / 4-7. */
static inline void brisk_k4_scale_min(int j, const uint8_t *packed, uint8_t *scale, uint8_t *min) {
    if (j < 4) {
        *scale = packed[j] & 63;
        *min = packed[j + 4] & 63;
    } else {
        *scale = (uint8_t)((packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4));
        *min = (uint8_t)((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
    }
}

/* The 16 signed 6-bit scales of a Q3_K block (stored biased by 32): low nibble
 * from bytes 0-7 (sub-blocks 0-7 in the low nibbles, 8-15 in the high), the 2
 * high bits from bytes 8-11 (byte 8 + j%4, bit pair j/4). */
static inline void brisk_q3_k_scales(const uint8_t packed[12], int8_t out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (packed[j] & 0x0f) : (packed[j - 8] >> 4);
        int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* With an importance matrix (llama-quantize --imatrix): qw holds one weight
 * per column of the row (n of them; ggml's quant_weights), and the fits are
 * ggml's quantize_row_*_impl ones (convert_k.c explains). Q8_0 and MXFP4
 * take no importance. */
void brisk_q4_0_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw);
void brisk_q4_1_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw);
void brisk_q5_0_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw);
void brisk_q5_1_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw);
void brisk_q2_k_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw);
void brisk_q3_k_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw);
void brisk_q4_k_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw);
void brisk_q5_k_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw);
void brisk_q6_k_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw);
void brisk_iq4_nl_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw);
void brisk_iq4_xs_quantize_imatrix(const float *src, void *dst, int64_t n, const float *qw);
typedef void (*brisk_from_float_imatrix_fn)(const float *src, void *dst, int64_t n, const float *qw);
/* The quantizer of type t that takes an importance matrix; NULL when t ignores one. */
brisk_from_float_imatrix_fn brisk_qtype_from_float_imatrix(uint32_t t);

#endif
