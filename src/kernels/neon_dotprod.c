/* neon_dotprod: the aarch64 NEON table "neon-dotprod", for CPUs with the
 * ARMv8.2 dot-product extension (HWCAP_ASIMDDP; compiled with +dotprod, so
 * dispatch.c must check the CPU first). SDOT sums four adjacent int8
 * products per int32 lane; the kernels are in neon_body.h. */
#include <arm_neon.h>

#define BRISK_NEON_ISA "neon-dotprod"

static inline int32x4_t neon_dot16(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }

#include "kernels/neon_body.h"

const brisk_kernels *brisk_kernels_neon_dotprod(void) { return &neon_table; }
