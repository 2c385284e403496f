/* quant: the weight and activation block formats GGUF files use, with reference
 * (scalar) quantize/dequantize. Block layouts are byte-identical to ggml's
 * (ggml/src/ggml-common.h) and pinned with static_assert in quant.c.
 *
 * Dot products live in kernels/ (reference in kernels/ref.c, SIMD per ISA). */
#ifndef BRISK_QUANT_H
#define BRISK_QUANT_H

#include "base/base.h"

#include <string.h>

/* Values are the GGUF/ggml type ids, so they can be stored in files as is. */
typedef enum brisk_qtype {
    BRISK_Q_F32 = 0,
    BRISK_Q_F16 = 1,
    BRISK_Q_Q4_0 = 2,
    BRISK_Q_Q4_1 = 3,
    BRISK_Q_Q5_0 = 6,
    BRISK_Q_Q5_1 = 7,
    BRISK_Q_Q8_0 = 8,
    BRISK_Q_Q8_1 = 9,
    BRISK_Q_Q2_K = 10,
    BRISK_Q_Q3_K = 11,
    BRISK_Q_Q4_K = 12,
    BRISK_Q_Q5_K = 13,
    BRISK_Q_Q6_K = 14,
    BRISK_Q_Q8_K = 15,
    BRISK_Q_IQ4_NL = 20,
    BRISK_Q_IQ4_XS = 23,
    BRISK_Q_BF16 = 30,
    BRISK_Q_MXFP4 = 39,       /* OCP MX FP4 (E2M1 values, E8M0 block scale): gpt-oss's experts */
    BRISK_Q_TYPE_LIMIT = 40   /* ids >= this are rejected by the GGUF reader */
} brisk_qtype;

#define BRISK_QK4_0 32
#define BRISK_QK8_0 32
#define BRISK_QK_K 256

typedef struct brisk_qtype_info {
    const char *name;        /* "Q4_K" ...; NULL for ids brisk does not know */
    int64_t block_elems;     /* elements per block */
    size_t block_bytes;      /* bytes per block */
    brisk_qtype act_type;    /* activation format the dot product pairs with (as ggml's vec_dot_type) */
} brisk_qtype_info;

/* Reference conversions over n elements (n a multiple of block_elems); in convert.c.
 * NULL for types without that direction. */
typedef void (*brisk_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*brisk_from_float_fn)(const float *src, void *dst, int64_t n);
brisk_to_float_fn brisk_qtype_to_float(uint32_t type);
brisk_from_float_fn brisk_qtype_from_float(uint32_t type);

/* Info for a type id; NULL when the id is unknown to brisk. */
const brisk_qtype_info *brisk_qtype_get(uint32_t type);
const char *brisk_qtype_name(uint32_t type);   /* "unknown" when not known */

/* Bytes of one row of n elements; false when n is not whole blocks or overflows. */
bool brisk_qtype_row_bytes(uint32_t type, int64_t n, size_t *out);

/* fp16 / bf16 scalar conversions (IEEE half, round-to-nearest-even). */
float brisk_fp16_to_fp32(uint16_t h);
uint16_t brisk_fp32_to_fp16_any(float f);   /* every input: NaN, inf, overflow, subnormal */

/* Inline for the KV writes and F16 activations: values that land on a normal
 * half take a branch-free rounding (the rest go to _any, same bits). */
static inline uint16_t brisk_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x38800000u && absx < 0x477ff000u) {
        uint32_t h = (absx >> 13) - ((uint32_t)(127 - 15) << 10);   /* rebias the exponent, keep 10 mantissa bits */
        const uint32_t rem = absx & 0x1fffu;
        h += (uint32_t)(rem > 0x1000u) | ((uint32_t)(rem == 0x1000u) & (h & 1u));   /* nearest, ties to even */
        return (uint16_t)(((x >> 16) & 0x8000u) | h);
    }
    return brisk_fp32_to_fp16_any(f);
}
float brisk_bf16_to_fp32(uint16_t h);
uint16_t brisk_fp32_to_bf16(float f);

#endif
