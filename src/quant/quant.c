/* quant: the type table (block geometry) and fp16/bf16 scalar conversions.
 * The per-format quantize/dequantize routines live in convert.c. */
#include "quant/quant.h"
#include "quant/blocks.h"

#include <string.h>

/* ---- fp16 / bf16 ------------------------------------------------------------ */

float brisk_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalize */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400));
            man &= 0x3ff;
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t brisk_fp32_to_fp16_any(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return (uint16_t)(sign | 0x7e00);           /* NaN */
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);          /* overflow -> inf */
    if (absx < 0x38800000u) {                                           /* subnormal or zero */
        if (absx < 0x33000000u) return (uint16_t)sign;
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        /* value = m * 2^(e-150); the half subnormal unit is 2^-24, so h = m * 2^(e-126) */
        uint32_t s = 126 - e;                     /* right shift amount, 14..24 */
        uint32_t r = m >> s;
        uint32_t rem = m & ((1u << s) - 1);
        uint32_t mid = 1u << (s - 1);
        if (rem > mid || (rem == mid && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t e = (absx >> 23) - 127 + 15;
    uint32_t m = absx & 0x7fffff;
    uint32_t h = (e << 10) | (m >> 13);
    uint32_t rem = m & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;   /* may carry into exponent: correct */
    return (uint16_t)(sign | h);
}

float brisk_bf16_to_fp32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t brisk_fp32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64); /* quiet NaN */
    return (uint16_t)((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

/* ---- type table --------------------------------------------------------------- */

static const brisk_qtype_info qtype_table[BRISK_Q_TYPE_LIMIT] = {
    [BRISK_Q_F32]  = {"F32",  1, 4, BRISK_Q_F32},
    [BRISK_Q_F16]  = {"F16",  1, 2, BRISK_Q_F16},
    [BRISK_Q_BF16] = {"BF16", 1, 2, BRISK_Q_BF16},
    [BRISK_Q_Q4_0] = {"Q4_0", 32, sizeof(brisk_block_q4_0), BRISK_Q_Q8_0},
    [BRISK_Q_Q4_1] = {"Q4_1", 32, sizeof(brisk_block_q4_1), BRISK_Q_Q8_1},
    [BRISK_Q_Q5_0] = {"Q5_0", 32, sizeof(brisk_block_q5_0), BRISK_Q_Q8_0},
    [BRISK_Q_Q5_1] = {"Q5_1", 32, sizeof(brisk_block_q5_1), BRISK_Q_Q8_1},
    [BRISK_Q_Q8_0] = {"Q8_0", 32, sizeof(brisk_block_q8_0), BRISK_Q_Q8_0},
    [BRISK_Q_Q8_1] = {"Q8_1", 32, sizeof(brisk_block_q8_1), BRISK_Q_Q8_1},
    [BRISK_Q_Q2_K] = {"Q2_K", 256, sizeof(brisk_block_q2_k), BRISK_Q_Q8_K},
    [BRISK_Q_Q3_K] = {"Q3_K", 256, sizeof(brisk_block_q3_k), BRISK_Q_Q8_K},
    [BRISK_Q_Q4_K] = {"Q4_K", 256, sizeof(brisk_block_q4_k), BRISK_Q_Q8_K},
    [BRISK_Q_Q5_K] = {"Q5_K", 256, sizeof(brisk_block_q5_k), BRISK_Q_Q8_K},
    [BRISK_Q_Q6_K] = {"Q6_K", 256, sizeof(brisk_block_q6_k), BRISK_Q_Q8_K},
    [BRISK_Q_Q8_K] = {"Q8_K", 256, sizeof(brisk_block_q8_k), BRISK_Q_Q8_K},
    [BRISK_Q_IQ4_NL] = {"IQ4_NL", 32, sizeof(brisk_block_iq4_nl), BRISK_Q_Q8_0},
    [BRISK_Q_IQ4_XS] = {"IQ4_XS", 256, sizeof(brisk_block_iq4_xs), BRISK_Q_Q8_K},
    [BRISK_Q_MXFP4] = {"MXFP4", 32, sizeof(brisk_block_mxfp4), BRISK_Q_Q8_0},
};

const brisk_qtype_info *brisk_qtype_get(uint32_t type) {
    if (type >= BRISK_Q_TYPE_LIMIT || !qtype_table[type].name) return NULL;
    return &qtype_table[type];
}

const char *brisk_qtype_name(uint32_t type) {
    const brisk_qtype_info *q = brisk_qtype_get(type);
    return q ? q->name : "unknown";
}

bool brisk_qtype_row_bytes(uint32_t type, int64_t n, size_t *out) {
    const brisk_qtype_info *q = brisk_qtype_get(type);
    if (!q || n < 0 || n % q->block_elems != 0) return false;
    return brisk_mul_size((size_t)(n / q->block_elems), q->block_bytes, out);
}
