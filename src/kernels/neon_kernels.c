/* neon_kernels: the aarch64 NEON kernel table "neon", for every ARMv8-A CPU
 * (compiled for the baseline architecture). The int8 dot products widen with
 * SMULL and add pairwise: 16 products -> 8 int16 -> 4 int32 lanes of four
 * adjacent products each, the same lanes SDOT gives neon_dotprod.c. The
 * kernels themselves are in neon_body.h. */
#include <arm_neon.h>

#define BRISK_NEON_ISA "neon"

static inline int32x4_t neon_dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));   /* |product| <= 2^14 */
    const int16x8_t hi = vmull_high_s8(a, b);
    return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
}

#include "kernels/neon_body.h"

const brisk_kernels *brisk_kernels_neon(void) { return &neon_table; }
