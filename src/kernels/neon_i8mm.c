/* neon_i8mm: the aarch64 NEON table "neon-i8mm", for CPUs with dotprod and
 * the int8 matrix multiply extension (HWCAP2_I8MM; compiled with +i8mm, so
 * dispatch.c checks the CPU first). It is neon-dotprod's table (the kernels
 * in neon_body.h) plus vec_dot_2x2 for the SCALAR-order formats: SMMLA
 * multiplies a 2x8 int8 matrix by an 8x2 one into 2x2 int32 sums, so two
 * weight rows and two activation rows share every load and unpacking, and a
 * block's four SMMLAs give each (row, token) its exact int32 block sum. The
 * float work per output is then ref's: one fma of (float)isum and dw * dy
 * per block, in block order, so the bits are vec_dot's. Q8_0 (LANES: a float
 * lane per 4 products) gains nothing from 8-product sums and keeps SDOT. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define BRISK_NEON_ISA "neon-i8mm"

static inline int32x4_t neon_dot16(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }

static void dot2x2_q4_0(int64_t n, float *out, int64_t os, const void *w, size_t w_stride, const void *a, size_t a_stride);

#define BRISK_NEON_TABLE_EXTRA .vec_dot_2x2 = {[BRISK_Q_Q4_0] = dot2x2_q4_0},

#include "kernels/neon_body.h"

/* Rows i (weights) and j (activations) of the 2x8 operands: the low 8 bytes
 * of SMMLA's first operand are weight row 0's elements, the high 8 row 1's;
 * likewise the activations. The result's lanes are (w0.a0, w0.a1, w1.a0, w1.a1). */
static inline int8x16_t pair_lo(int8x16_t r0, int8x16_t r1) { return vcombine_s8(vget_low_s8(r0), vget_low_s8(r1)); }
static inline int8x16_t pair_hi(int8x16_t r0, int8x16_t r1) { return vcombine_s8(vget_high_s8(r0), vget_high_s8(r1)); }

static void dot2x2_q4_0(int64_t n, float *out, int64_t os, const void *w, size_t w_stride, const void *a, size_t a_stride) {
    const brisk_block_q4_0 *x0 = w, *x1 = (const brisk_block_q4_0 *)((const uint8_t *)w + w_stride);
    const brisk_block_q8_0 *y0 = a, *y1 = (const brisk_block_q8_0 *)((const uint8_t *)a + a_stride);
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t sum = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / 32; i++) {
        const uint8x16_t b0 = vld1q_u8(x0[i].qs), b1 = vld1q_u8(x1[i].qs);
        /* elements 0..15 (low nibbles) and 16..31 (high) of each row, minus 8 */
        const int8x16_t w0l = vsubq_s8(as_s8(vandq_u8(b0, low4)), eight), w0h = vsubq_s8(as_s8(vshrq_n_u8(b0, 4)), eight);
        const int8x16_t w1l = vsubq_s8(as_s8(vandq_u8(b1, low4)), eight), w1h = vsubq_s8(as_s8(vshrq_n_u8(b1, 4)), eight);
        const int8x16_t a0l = vld1q_s8(y0[i].qs), a0h = vld1q_s8(y0[i].qs + 16);
        const int8x16_t a1l = vld1q_s8(y1[i].qs), a1h = vld1q_s8(y1[i].qs + 16);
        int32x4_t isum = vmmlaq_s32(vdupq_n_s32(0), pair_lo(w0l, w1l), pair_lo(a0l, a1l));   /* elements 0..7 */
        isum = vmmlaq_s32(isum, pair_hi(w0l, w1l), pair_hi(a0l, a1l));                      /* 8..15 */
        isum = vmmlaq_s32(isum, pair_lo(w0h, w1h), pair_lo(a0h, a1h));                      /* 16..23 */
        isum = vmmlaq_s32(isum, pair_hi(w0h, w1h), pair_hi(a0h, a1h));                      /* 24..31 */
        const float dw0 = fp16_to_f32(x0[i].d), dw1 = fp16_to_f32(x1[i].d);
        const float dy0 = fp16_to_f32(y0[i].d), dy1 = fp16_to_f32(y1[i].d);
        const float dd[4] = {dw0 * dy0, dw0 * dy1, dw1 * dy0, dw1 * dy1};
        sum = vfmaq_f32(sum, vcvtq_f32_s32(isum), vld1q_f32(dd));   /* sum + isum * d, fused: ref's fmaf */
    }
    out[0] = vgetq_lane_f32(sum, 0);
    out[os] = vgetq_lane_f32(sum, 1);
    out[1] = vgetq_lane_f32(sum, 2);
    out[os + 1] = vgetq_lane_f32(sum, 3);
}

const brisk_kernels *brisk_kernels_neon_i8mm(void) { return &neon_table; }
