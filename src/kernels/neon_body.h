/* neon_body: the aarch64 NEON kernels, written once for the two NEON tables.
 *
 * Not a header in the usual sense: neon_kernels.c (baseline ARMv8-A),
 * neon_dotprod.c (ARMv8.2-A + dotprod) and neon_i8mm.c (+ i8mm) each define,
 * before including it,
 *   BRISK_NEON_ISA     the table's name ("neon", "neon-dotprod");
 *   neon_dot16(acc, a, b)  acc + the 16 int8 products a*b summed in groups of
 *                      four adjacent bytes: lane k gets bytes 4k..4k+3;
 *   BRISK_NEON_TABLE_EXTRA (optional) more designated initializers for the table;
 * and are compiled with their own -march, so the baseline file never holds
 * an instruction the baseline CPU lacks. Everything here is static.
 *
 * Same contracts as ref.c and the same bits for every quantized format: the
 * integer sums are exact in any order, and the float work follows ref's
 * reduction order (LANES: lanes 0-3 of a 32-byte group are neon_dot16 of its
 * first 16 bytes, lanes 4-7 of its last 16, one fused multiply-add per lane
 * and block, hsum8 at the end; SCALAR: one int32 sum per block or block
 * group, fused into one float accumulator in order). The float formats use
 * their own order (float FMA in 16 lanes), within test_kernels' tolerance.
 * Activation quantizers give ref's bytes (Q8_0 and Q8_K vectorized below), so
 * activations match x86 too. */
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/convert.h"
#include "ops/ops.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#define QK BRISK_QK_K

/* ---- helpers -------------------------------------------------------------------- */

static inline float fp16_to_f32(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* ref's hsum8 over lanes lo = a[0..3], hi = a[4..7]: (a0+a4 + a2+a6) + (a1+a5 + a3+a7). */
static inline float hsum8(float32x4_t lo, float32x4_t hi) {
    const float32x4_t t = vaddq_f32(lo, hi);
    const float32x2_t u = vadd_f32(vget_low_f32(t), vget_high_f32(t));
    return vget_lane_f32(u, 0) + vget_lane_f32(u, 1);
}

/* The 8 lanes of one 32-byte group, lanes 4-7 in hi. */
typedef struct lanes8 {
    int32x4_t lo, hi;
} lanes8;

static inline lanes8 lanes_zero(void) {
    const lanes8 l = {vdupq_n_s32(0), vdupq_n_s32(0)};
    return l;
}

/* l += scale_lo * lanes of (q0, y[0..15]), scale_hi * lanes of (q1, y[16..31]). */
static inline lanes8 lanes_add(lanes8 l, int8x16_t q0, int8x16_t q1, const int8_t *y, int scale_lo, int scale_hi) {
    const int32x4_t z = vdupq_n_s32(0);
    l.lo = vmlaq_n_s32(l.lo, neon_dot16(z, q0, vld1q_s8(y)), scale_lo);
    l.hi = vmlaq_n_s32(l.hi, neon_dot16(z, q1, vld1q_s8(y + 16)), scale_hi);
    return l;
}

/* Unscaled: l += lanes of (q0, y[0..15]), (q1, y[16..31]). */
static inline lanes8 lanes_dot(lanes8 l, int8x16_t q0, int8x16_t q1, const int8_t *y) {
    l.lo = neon_dot16(l.lo, q0, vld1q_s8(y));
    l.hi = neon_dot16(l.hi, q1, vld1q_s8(y + 16));
    return l;
}

/* acc[m] = fma(d, (float)lanes[m], acc[m]) for the 8 lanes. */
static inline void lanes_fma(float32x4_t acc[2], float d, lanes8 l) {
    const float32x4_t dv = vdupq_n_f32(d);
    acc[0] = vfmaq_f32(acc[0], vcvtq_f32_s32(l.lo), dv);
    acc[1] = vfmaq_f32(acc[1], vcvtq_f32_s32(l.hi), dv);
}

/* The exact integer dot of 32 weight bytes (q0: elements 0-15, q1: 16-31) with y. */
static inline int32_t dot32(int8x16_t q0, int8x16_t q1, const int8_t *y) {
    const int32x4_t z = vdupq_n_s32(0);
    return vaddvq_s32(neon_dot16(neon_dot16(z, q0, vld1q_s8(y)), q1, vld1q_s8(y + 16)));
}

static inline int8x16_t as_s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

/* Bit j of bits (j = 0..15) -> byte j = value if set, else 0. */
static inline uint8x16_t expand_bits16(uint32_t bits, uint8_t value) {
    static const uint8_t pick[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t sel[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t b = vqtbl1q_u8(vreinterpretq_u8_u32(vdupq_n_u32(bits)), vld1q_u8(pick));
    return vandq_u8(vtstq_u8(b, vld1q_u8(sel)), vdupq_n_u8(value));
}

/* ---- float formats: float FMA over 16 lanes, then the lanes summed ------------------- */

static float32x4_t sum4(const float32x4_t acc[4]) {
    return vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3]));
}

static void dot_f32(int64_t n, float *out, const void *w, const void *a) {
    const float *x = w, *y = a;
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 4; k++) acc[k] = vfmaq_f32(acc[k], vld1q_f32(x + i + 4 * k), vld1q_f32(y + i + 4 * k));
    for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], vld1q_f32(x + i), vld1q_f32(y + i));
    float sum = vaddvq_f32(sum4(acc));
    for (; i < n; i++) sum += x[i] * y[i];
    *out = sum;
}

static void dot_f16(int64_t n, float *out, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int k = 0; k < 2; k++) {
            const float16x8_t xv = vreinterpretq_f16_u16(vld1q_u16(x + i + 8 * k));
            const float16x8_t yv = vreinterpretq_f16_u16(vld1q_u16(y + i + 8 * k));
            acc[2 * k] = vfmaq_f32(acc[2 * k], vcvt_f32_f16(vget_low_f16(xv)), vcvt_f32_f16(vget_low_f16(yv)));
            acc[2 * k + 1] = vfmaq_f32(acc[2 * k + 1], vcvt_high_f32_f16(xv), vcvt_high_f32_f16(yv));
        }
    }
    for (; i + 4 <= n; i += 4) {
        const float32x4_t xv = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i)));
        const float32x4_t yv = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(y + i)));
        acc[0] = vfmaq_f32(acc[0], xv, yv);
    }
    float sum = vaddvq_f32(sum4(acc));
    for (; i < n; i++) sum += fp16_to_f32(x[i]) * fp16_to_f32(y[i]);
    *out = sum;
}

/* bf16 -> f32 is the 16 bits moved to the top of a 32-bit word. */
static inline float32x4_t bf16_lo(uint16x8_t v) { return vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16)); }
static inline float32x4_t bf16_hi(uint16x8_t v) { return vreinterpretq_f32_u32(vshll_high_n_u16(v, 16)); }

static void dot_bf16(int64_t n, float *out, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int k = 0; k < 2; k++) {
            const uint16x8_t xv = vld1q_u16(x + i + 8 * k), yv = vld1q_u16(y + i + 8 * k);
            acc[2 * k] = vfmaq_f32(acc[2 * k], bf16_lo(xv), bf16_lo(yv));
            acc[2 * k + 1] = vfmaq_f32(acc[2 * k + 1], bf16_hi(xv), bf16_hi(yv));
        }
    }
    float sum = vaddvq_f32(sum4(acc));
    for (; i < n; i++) sum += brisk_bf16_to_fp32(x[i]) * brisk_bf16_to_fp32(y[i]);
    *out = sum;
}

/* ---- 32-element formats ------------------------------------------------------------ */
/* Weight nibble j (low) is element j, the high nibble element j + 16. */

/* SCALAR. */
static void dot_q4_0(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q4_0 *x = w;
    const brisk_block_q8_0 *y = a;
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        const uint8x16_t b = vld1q_u8(x[i].qs);
        const int8x16_t q0 = vsubq_s8(as_s8(vandq_u8(b, low4)), eight);
        const int8x16_t q1 = vsubq_s8(as_s8(vshrq_n_u8(b, 4)), eight);
        const float d = fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d);
        sum = fmaf((float)dot32(q0, q1, y[i].qs), d, sum);
    }
    *out = sum;
}

/* LANES plus the fused min term. */
static void dot_q4_1(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q4_1 *x = w;
    const brisk_block_q8_1 *y = a;
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    float mins = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        const uint8x16_t b = vld1q_u8(x[i].qs);
        const lanes8 l = lanes_dot(lanes_zero(), as_s8(vandq_u8(b, low4)), as_s8(vshrq_n_u8(b, 4)), y[i].qs);
        mins = fmaf(fp16_to_f32(x[i].m), fp16_to_f32(y[i].s), mins);
        lanes_fma(acc, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), l);
    }
    *out = hsum8(acc[0], acc[1]) + mins;
}

/* The 5-bit values of a Q5_0/Q5_1 block: elements 0-15 in q[0], 16-31 in q[1]. */
static inline void q5_values(const uint8_t qs[16], const uint8_t qh[4], uint8x16_t q[2]) {
    uint32_t bits;
    memcpy(&bits, qh, sizeof bits);
    const uint8x16_t b = vld1q_u8(qs);
    q[0] = vorrq_u8(vandq_u8(b, vdupq_n_u8(0x0f)), expand_bits16(bits, 0x10));
    q[1] = vorrq_u8(vshrq_n_u8(b, 4), expand_bits16(bits >> 16, 0x10));
}

/* LANES. */
static void dot_q5_0(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q5_0 *x = w;
    const brisk_block_q8_0 *y = a;
    const int8x16_t sixteen = vdupq_n_s8(16);
    float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    uint8x16_t q[2];
    for (int64_t i = 0; i < n / 32; i++) {
        q5_values(x[i].qs, x[i].qh, q);
        const lanes8 l = lanes_dot(lanes_zero(), vsubq_s8(as_s8(q[0]), sixteen), vsubq_s8(as_s8(q[1]), sixteen), y[i].qs);
        lanes_fma(acc, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), l);
    }
    *out = hsum8(acc[0], acc[1]);
}

/* LANES plus the fused min term. */
static void dot_q5_1(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q5_1 *x = w;
    const brisk_block_q8_1 *y = a;
    float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    float mins = 0.0f;
    uint8x16_t q[2];
    for (int64_t i = 0; i < n / 32; i++) {
        q5_values(x[i].qs, x[i].qh, q);
        const lanes8 l = lanes_dot(lanes_zero(), as_s8(q[0]), as_s8(q[1]), y[i].qs);
        mins = fmaf(fp16_to_f32(x[i].m), fp16_to_f32(y[i].s), mins);
        lanes_fma(acc, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), l);
    }
    *out = hsum8(acc[0], acc[1]) + mins;
}

/* LANES. */
static void dot_q8_0(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q8_0 *x = w;
    const brisk_block_q8_0 *y = a;
    float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t i = 0; i < n / 32; i++) {
        const lanes8 l = lanes_dot(lanes_zero(), vld1q_s8(x[i].qs), vld1q_s8(x[i].qs + 16), y[i].qs);
        lanes_fma(acc, fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), l);
    }
    *out = hsum8(acc[0], acc[1]);
}

/* ---- K formats against Q8_K ------------------------------------------------------------ */

/* SCALAR per 128-element half, with a separate min accumulator. Element
 * 128h + 32s + l is bit pair s of qs[32h + l]; sub-block 8h + 2s + l/16. */
static void dot_q2_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q2_k *x = w;
    const brisk_block_q8_k *y = a;
    const uint8x16_t mask2 = vdupq_n_u8(3);
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        const uint8_t *sc = x[i].scales;
        const float dall = fp16_to_f32(x[i].d) * y[i].d;
        const float dmin = fp16_to_f32(x[i].dmin) * y[i].d;
        const int8_t *q8 = y[i].qs;
        for (int h = 0; h < 2; h++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * h), b1 = vld1q_u8(x[i].qs + 32 * h + 16);
            lanes8 l = lanes_zero();
            for (int s = 0; s < 4; s++, q8 += 32) {
                const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * s));
                const int8x16_t q0 = as_s8(vandq_u8(vshlq_u8(b0, shift), mask2));
                const int8x16_t q1 = as_s8(vandq_u8(vshlq_u8(b1, shift), mask2));
                const int j = 8 * h + 2 * s;
                l = lanes_add(l, q0, q1, q8, sc[j] & 0x0f, sc[j + 1] & 0x0f);
            }
            int imin = 0;
            for (int j = 8 * h; j < 8 * h + 8; j++) imin += (sc[j] >> 4) * y[i].bsums[j];
            acc = fmaf((float)vaddvq_s32(vaddq_s32(l.lo, l.hi)), dall, acc);
            acc_min = fmaf((float)imin, dmin, acc_min);
        }
    }
    *out = acc - acc_min;
}

/* LANES over the block's eight 32-element groups g = 4h + s, each half-group
 * scaled by its 16-element sub-block's signed scale. Element 128h + 32s + l:
 * 2 low bits at bit pair s of qs[32h + l], high bit (set = no -4) at bit
 * 4h + s of hmask[l]. */
static void dot_q3_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q3_k *x = w;
    const brisk_block_q8_k *y = a;
    const uint8x16_t mask2 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    int8_t sc[16];
    for (int64_t i = 0; i < n / QK; i++) {
        brisk_q3_k_scales(x[i].scales, sc);
        const uint8x16_t hm0 = vld1q_u8(x[i].hmask), hm1 = vld1q_u8(x[i].hmask + 16);
        const int8_t *q8 = y[i].qs;
        lanes8 l = lanes_zero();
        for (int h = 0; h < 2; h++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * h), b1 = vld1q_u8(x[i].qs + 32 * h + 16);
            for (int s = 0; s < 4; s++, q8 += 32) {
                const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * s));
                const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * h + s)));
                /* q + 4 = low bits | 4 * high bit, in 0..7 */
                const uint8x16_t u0 = vorrq_u8(vandq_u8(vshlq_u8(b0, shift), mask2), vandq_u8(vtstq_u8(hm0, bit), four));
                const uint8x16_t u1 = vorrq_u8(vandq_u8(vshlq_u8(b1, shift), mask2), vandq_u8(vtstq_u8(hm1, bit), four));
                const int g = 4 * h + s;
                l = lanes_add(l, vsubq_s8(as_s8(u0), as_s8(four)), vsubq_s8(as_s8(u1), as_s8(four)), q8, sc[2 * g],
                              sc[2 * g + 1]);
            }
        }
        lanes_fma(acc, y[i].d * fp16_to_f32(x[i].d), l);
    }
    *out = hsum8(acc[0], acc[1]);
}

/* SCALAR per 64-element chunk c (sub-blocks 2c and 2c+1: the low and high
 * nibbles of qs[32c..32c+31]), with a separate min accumulator. */
static void dot_q4_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q4_k *x = w;
    const brisk_block_q8_k *y = a;
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    float acc = 0.0f, acc_min = 0.0f;
    uint8_t sc[8], m[8];
    for (int64_t i = 0; i < n / QK; i++) {
        for (int j = 0; j < 8; j++) brisk_k4_scale_min(j, x[i].scales, &sc[j], &m[j]);
        const float d = fp16_to_f32(x[i].d) * y[i].d;
        const float dmin = fp16_to_f32(x[i].dmin) * y[i].d;
        const int16_t *bs = y[i].bsums;
        for (int c = 0; c < 4; c++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * c), b1 = vld1q_u8(x[i].qs + 32 * c + 16);
            const int8_t *q8 = y[i].qs + 64 * c;
            const int lo = dot32(as_s8(vandq_u8(b0, low4)), as_s8(vandq_u8(b1, low4)), q8);
            const int hi = dot32(as_s8(vshrq_n_u8(b0, 4)), as_s8(vshrq_n_u8(b1, 4)), q8 + 32);
            const int isum = sc[2 * c] * lo + sc[2 * c + 1] * hi;
            const int imin = m[2 * c] * (bs[4 * c] + bs[4 * c + 1]) + m[2 * c + 1] * (bs[4 * c + 2] + bs[4 * c + 3]);
            acc = fmaf((float)isum, d, acc);
            acc_min = fmaf((float)imin, dmin, acc_min);
        }
    }
    *out = acc - acc_min;
}

/* LANES, one scale per 32-element group; the fused min term joins after the
 * hsum. Element 64c + l has its 5th bit at bit 2c of qh[l], 64c + 32 + l at
 * bit 2c + 1. */
static void dot_q5_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q5_k *x = w;
    const brisk_block_q8_k *y = a;
    const uint8x16_t low4 = vdupq_n_u8(0x0f), b4 = vdupq_n_u8(0x10);
    float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    float mins = 0.0f;
    uint8_t sc[8], m[8];
    for (int64_t i = 0; i < n / QK; i++) {
        int summ = 0;
        for (int j = 0; j < 8; j++) {
            brisk_k4_scale_min(j, x[i].scales, &sc[j], &m[j]);
            summ += m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        mins = fmaf(-y[i].d * fp16_to_f32(x[i].dmin), (float)summ, mins);
        const uint8x16_t qh0 = vld1q_u8(x[i].qh), qh1 = vld1q_u8(x[i].qh + 16);
        lanes8 l = lanes_zero();
        for (int c = 0; c < 4; c++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * c), b1 = vld1q_u8(x[i].qs + 32 * c + 16);
            const uint8x16_t blo = vdupq_n_u8((uint8_t)(1u << (2 * c))), bhi = vdupq_n_u8((uint8_t)(2u << (2 * c)));
            const uint8x16_t lo0 = vorrq_u8(vandq_u8(b0, low4), vandq_u8(vtstq_u8(qh0, blo), b4));
            const uint8x16_t lo1 = vorrq_u8(vandq_u8(b1, low4), vandq_u8(vtstq_u8(qh1, blo), b4));
            const uint8x16_t hi0 = vorrq_u8(vshrq_n_u8(b0, 4), vandq_u8(vtstq_u8(qh0, bhi), b4));
            const uint8x16_t hi1 = vorrq_u8(vshrq_n_u8(b1, 4), vandq_u8(vtstq_u8(qh1, bhi), b4));
            const int8_t *q8 = y[i].qs + 64 * c;
            l = lanes_add(l, as_s8(lo0), as_s8(lo1), q8, sc[2 * c], sc[2 * c]);
            l = lanes_add(l, as_s8(hi0), as_s8(hi1), q8 + 32, sc[2 * c + 1], sc[2 * c + 1]);
        }
        lanes_fma(acc, y[i].d * fp16_to_f32(x[i].d), l);
    }
    *out = hsum8(acc[0], acc[1]) + mins;
}

/* LANES on the unsigned 6-bit values (0..63) with the 16-element sub-block
 * scales; the -32 offset comes off lane by lane afterwards, lane l losing
 * 32 * (bsums[2l]*sc[2l] + bsums[2l+1]*sc[2l+1]), as ref.c describes. */
static void dot_q6_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q6_k *x = w;
    const brisk_block_q8_k *y = a;
    const uint8x16_t low4 = vdupq_n_u8(0x0f), mask2 = vdupq_n_u8(3);
    float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t i = 0; i < n / QK; i++) {
        const int8_t *sc = x[i].scales;
        const int8_t *q8 = y[i].qs;
        lanes8 l = lanes_zero();
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h, *qhp = x[i].qh + 32 * h;
            /* k = 0..3 is group 4h + k; its two 16-element halves r = 0, 1 */
            for (int k = 0; k < 4; k++, q8 += 32) {
                uint8x16_t q[2];
                for (int r = 0; r < 2; r++) {
                    const uint8x16_t lb = vld1q_u8(ql + 32 * (k & 1) + 16 * r);
                    const uint8x16_t hb = vld1q_u8(qhp + 16 * r);
                    const uint8x16_t nib = k < 2 ? vandq_u8(lb, low4) : vshrq_n_u8(lb, 4);
                    const uint8x16_t top = vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)(-2 * k))), mask2);
                    q[r] = vorrq_u8(nib, vshlq_n_u8(top, 4));
                }
                const int g = 4 * h + k;
                l = lanes_add(l, as_s8(q[0]), as_s8(q[1]), q8, sc[2 * g], sc[2 * g + 1]);
            }
        }
        /* lane l loses 32 * (bsums[2l]*sc[2l] + bsums[2l+1]*sc[2l+1]) */
        const int16x8_t bs0 = vld1q_s16(y[i].bsums), bs1 = vld1q_s16(y[i].bsums + 8);
        const int8x16_t scv = vld1q_s8(sc);
        const int16x8_t sc0 = vmovl_s8(vget_low_s8(scv)), sc1 = vmovl_high_s8(scv);
        const int32x4_t off_lo = vpaddq_s32(vmull_s16(vget_low_s16(bs0), vget_low_s16(sc0)),
                                            vmull_high_s16(bs0, sc0));
        const int32x4_t off_hi = vpaddq_s32(vmull_s16(vget_low_s16(bs1), vget_low_s16(sc1)),
                                            vmull_high_s16(bs1, sc1));
        l.lo = vsubq_s32(l.lo, vshlq_n_s32(off_lo, 5));
        l.hi = vsubq_s32(l.hi, vshlq_n_s32(off_hi, 5));
        lanes_fma(acc, y[i].d * fp16_to_f32(x[i].d), l);
    }
    *out = hsum8(acc[0], acc[1]);
}

/* ---- 4-bit lookup-table formats: IQ4_NL, MXFP4, IQ4_XS (all SCALAR) ---------------------- */
/* TBL maps 16 nibbles to their int8 table values in one instruction. */

static inline void lut4_values(const uint8_t *qs, int8x16_t table, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t b = vld1q_u8(qs);
    *lo = vqtbl1q_s8(table, vandq_u8(b, vdupq_n_u8(0x0f)));
    *hi = vqtbl1q_s8(table, vshrq_n_u8(b, 4));
}

static void dot_iq4_nl(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_iq4_nl *x = w;
    const brisk_block_q8_0 *y = a;
    const int8x16_t table = vld1q_s8(brisk_iq4nl_values);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int8x16_t q0, q1;
        lut4_values(x[i].qs, table, &q0, &q1);
        sum = fmaf((float)dot32(q0, q1, y[i].qs), fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d), sum);
    }
    *out = sum;
}

static void dot_mxfp4(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_mxfp4 *x = w;
    const brisk_block_q8_0 *y = a;
    const int8x16_t table = vld1q_s8(brisk_mxfp4_values);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int8x16_t q0, q1;
        lut4_values(x[i].qs, table, &q0, &q1);
        sum = fmaf((float)dot32(q0, q1, y[i].qs), brisk_e8m0_half(x[i].e) * fp16_to_f32(y[i].d), sum);
    }
    *out = sum;
}

static void dot_iq4_xs(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_iq4_xs *x = w;
    const brisk_block_q8_k *y = a;
    const int8x16_t table = vld1q_s8(brisk_iq4nl_values);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        lanes8 l = lanes_zero();
        for (int g = 0; g < 8; g++) {
            int8x16_t q0, q1;
            lut4_values(x[i].qs + 16 * g, table, &q0, &q1);
            const int ls = brisk_iq4_xs_scale(x[i].scales_l, x[i].scales_h, g) - 32;
            l = lanes_add(l, q0, q1, y[i].qs + 32 * g, ls, ls);
        }
        sum = fmaf((float)vaddvq_s32(vaddq_s32(l.lo, l.hi)), fp16_to_f32(x[i].d) * y[i].d, sum);
    }
    *out = sum;
}

/* ---- the table -------------------------------------------------------------------------- */

/* ---- activation quantizers: ref's bytes, 4 lanes at a time ---------------------------------
 * They are on every matmul's path (at decode the calling thread quantizes while the others wait;
 * on x86 the scalar Q8_K function was 1.2% of a Q4_K_M token). amax is exact in any order; the
 * products are the scalar function's (one float multiply, not fused), and vcvtnq_s32_f32 rounds
 * to nearest even as brisk_round_even, with |x * scale| <= 127 here so nothing saturates. Blocks
 * with a NaN or a non-finite amax take the scalar function, which defines them. */

/* amax of n floats (a multiple of 4), or -1 when one is NaN or amax is not finite. */
static inline float neon_block_amax(const float *x, int n) {
    float32x4_t m = vdupq_n_f32(0.0f);
    uint32x4_t nan = vdupq_n_u32(0);
    for (int k = 0; k < n; k += 4) {
        const float32x4_t v = vld1q_f32(x + k);
        m = vmaxq_f32(m, vabsq_f32(v));
        nan = vorrq_u32(nan, vmvnq_u32(vceqq_f32(v, v)));
    }
    const float amax = vmaxvq_f32(m);
    return vmaxvq_u32(nan) || !(amax <= 3.402823466e38f) ? -1.0f : amax;
}

/* 16 values times s, rounded to nearest even, capped at 127, as int8. */
static inline int8x16_t neon_round16(const float *x, float32x4_t s) {
    const int32x4_t cap = vdupq_n_s32(127);
    int32x4_t q[4];
    for (int k = 0; k < 4; k++) q[k] = vminq_s32(vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + 4 * k), s)), cap);
    return vcombine_s8(vqmovn_s16(vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]))),
                       vqmovn_s16(vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]))));
}

/* brisk_q8_0_quantize_x86 */
static void neon_quantize_q8_0(const float *src, void *dst, int64_t n) {
    brisk_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        const float amax = neon_block_amax(src, 32);
        if (amax < 0.0f) {
            brisk_q8_0_quantize_x86(src, &b[i], 32);
            continue;
        }
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        b[i].d = brisk_fp32_to_fp16(d);
        const float32x4_t s = vdupq_n_f32(id);
        vst1q_s8(b[i].qs, neon_round16(src, s));
        vst1q_s8(b[i].qs + 16, neon_round16(src + 16, s));
    }
}

/* brisk_q8_k_quantize: iscale = -127/max, max the first element of magnitude amax; bsums as
 * exact integer sums; an all-zero block is all zeros. */
static void neon_quantize_q8_k(const float *src, void *dst, int64_t n) {
    brisk_block_q8_k *b = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        const float amax = neon_block_amax(src, QK);
        if (amax < 0.0f) {
            brisk_q8_k_quantize(src, &b[i], QK);
            continue;
        }
        if (!amax) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        int j = 0;
        while (fabsf(src[j]) != amax) j++;
        const float iscale = -127.0f / src[j];
        const float32x4_t s = vdupq_n_f32(iscale);
        for (int g = 0; g < QK / 16; g++) {
            const int8x16_t q = neon_round16(src + 16 * g, s);
            vst1q_s8(b[i].qs + 16 * g, q);
            b[i].bsums[g] = vaddlvq_s8(q);
        }
        b[i].d = 1 / iscale;
    }
}

/* brisk_expf on 4 floats, two halves of 2 double lanes: brisk_expf_core's
 * fused (vfmaq_f64) and unfused double operations in its order, the 2^(k/32)
 * table by two lane loads. Lanes outside the main path (|x| >= 88, NaN) come
 * back as a nonzero *special for the caller to redo with the scalar function
 * (their vector result is garbage). */
static inline float64x2_t exp2d(float64x2_t xd) {
    const float64x2_t inv = vdupq_n_f64(BRISK_EXPF_INV_LN2_N), shift = vdupq_n_f64(BRISK_EXPF_SHIFT);
    const float64x2_t z = vfmaq_f64(shift, inv, xd);
    const float64x2_t kd = vsubq_f64(z, shift);
    const float64x2_t r = vfmaq_f64(vnegq_f64(kd), inv, xd);
    const uint64x2_t zi = vreinterpretq_u64_f64(z);
    uint64x2_t t = vdupq_n_u64(brisk_exp2_table[vgetq_lane_u64(zi, 0) % 32]);
    t = vsetq_lane_u64(brisk_exp2_table[vgetq_lane_u64(zi, 1) % 32], t, 1);
    const float64x2_t sc = vreinterpretq_f64_u64(vaddq_u64(t, vshlq_n_u64(zi, 47)));
    const float64x2_t p = vfmaq_f64(vdupq_n_f64(BRISK_EXPF_C1), vdupq_n_f64(BRISK_EXPF_C0), r);
    const float64x2_t y = vfmaq_f64(vfmaq_f64(vdupq_n_f64(1.0), vdupq_n_f64(BRISK_EXPF_C2), r), p, vmulq_f64(r, r));
    return vmulq_f64(y, sc);
}

static inline float32x4_t exp4(float32x4_t xs, uint32_t *special) {
    const uint32x4_t top = vandq_u32(vshrq_n_u32(vreinterpretq_u32_f32(xs), 20), vdupq_n_u32(0x7ff));
    *special = vmaxvq_u32(vcgtq_u32(top, vdupq_n_u32(0x42a)));
    const float64x2_t lo = exp2d(vcvt_f64_f32(vget_low_f32(xs))), hi = exp2d(vcvt_high_f64_f32(xs));
    return vcvt_high_f32_f64(vcvt_f32_f64(lo), hi);
}

/* brisk_exp_sub 4 lanes at a time: the sum's eight partials are four
 * vectors of 2 doubles (entry i in lane i % 8), combined by
 * brisk_sum8_combine */
static double exp_sub(float *x, int64_t n, float m) {
    const float32x4_t mv = vdupq_n_f32(m);
    float64x2_t acc[4] = {vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0)};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int half = 0; half < 2; half++) {
            uint32_t special;
            const float32x4_t xs = vsubq_f32(vld1q_f32(x + i + 4 * half), mv);
            float32x4_t e = exp4(xs, &special);
            if (special) {
                float xv[4], ev[4];
                vst1q_f32(xv, xs);
                vst1q_f32(ev, e);
                for (int l = 0; l < 4; l++) {
                    union { float f; uint32_t u; } xb = {xv[l]};
                    if (((xb.u >> 20) & 0x7ff) > 0x42a) ev[l] = brisk_expf_special(xv[l]);
                }
                e = vld1q_f32(ev);
            }
            vst1q_f32(x + i + 4 * half, e);
            acc[2 * half] = vaddq_f64(acc[2 * half], vcvt_f64_f32(vget_low_f32(e)));
            acc[2 * half + 1] = vaddq_f64(acc[2 * half + 1], vcvt_high_f64_f32(e));
        }
    double p[8];
    for (int a = 0; a < 4; a++) vst1q_f64(p + 2 * a, acc[a]);
    for (; i < n; i++) {
        x[i] = brisk_expf(x[i] - m);
        p[i % 8] += x[i];
    }
    return brisk_sum8_combine(p);
}

/* g / (1 + e^-g) * u in float, e^-g by exp4: the scalar expression's three roundings. */
static void swiglu(float *h, const float *g, const float *u, int64_t n) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t special;
        const float32x4_t gv = vld1q_f32(g + i);
        const float32x4_t e = exp4(vnegq_f32(gv), &special);
        vst1q_f32(h + i, vmulq_f32(vdivq_f32(gv, vaddq_f32(one, e)), vld1q_f32(u + i)));
        if (special)
            for (int l = 0; l < 4; l++) {
                union { float f; uint32_t u; } xb = {-g[i + l]};
                if (((xb.u >> 20) & 0x7ff) > 0x42a) h[i + l] = g[i + l] / (1.0f + brisk_expf(-g[i + l])) * u[i + l];
            }
    }
    for (; i < n; i++) h[i] = g[i] / (1.0f + brisk_expf(-g[i])) * u[i];
}

static const brisk_kernels neon_table = {
    .isa = BRISK_NEON_ISA,
#ifdef BRISK_NEON_TABLE_EXTRA
    BRISK_NEON_TABLE_EXTRA   /* a table's own entries (neon_i8mm.c) */
#endif
    .exp_sub = exp_sub,   /* ops.c's brisk_exp_sub and brisk_swiglu, 4 lanes at a time (same bits) */
    .swiglu = swiglu,
    .vec_dot = {
        [BRISK_Q_F32] = dot_f32,
        [BRISK_Q_F16] = dot_f16,
        [BRISK_Q_BF16] = dot_bf16,
        [BRISK_Q_Q4_0] = dot_q4_0,
        [BRISK_Q_Q4_1] = dot_q4_1,
        [BRISK_Q_Q5_0] = dot_q5_0,
        [BRISK_Q_Q5_1] = dot_q5_1,
        [BRISK_Q_Q8_0] = dot_q8_0,
        [BRISK_Q_Q2_K] = dot_q2_k,
        [BRISK_Q_Q3_K] = dot_q3_k,
        [BRISK_Q_Q4_K] = dot_q4_k,
        [BRISK_Q_Q5_K] = dot_q5_k,
        [BRISK_Q_Q6_K] = dot_q6_k,
        [BRISK_Q_IQ4_NL] = dot_iq4_nl,
        [BRISK_Q_IQ4_XS] = dot_iq4_xs,
        [BRISK_Q_MXFP4] = dot_mxfp4,
    },
    /* ref's quantizers' bytes: they reproduce llama.cpp-on-x86 activations byte
     * for byte, which the golden logits are measured against */
    .quantize_act = {
        [BRISK_Q_F32] = brisk_f32_quantize,
        [BRISK_Q_F16] = brisk_f16_quantize,
        [BRISK_Q_BF16] = brisk_bf16_quantize,
        [BRISK_Q_Q8_0] = neon_quantize_q8_0,
        [BRISK_Q_Q8_1] = brisk_q8_1_quantize_x86,
        [BRISK_Q_Q8_K] = neon_quantize_q8_k,
    },
};
