/* neon_i8mm_gemm: the aarch64 packed-GEMM table "neon-i8mm": neon-dotprod's
 * kernels (neon_gemm_body.h) with SMMLA for Q4_0's multi-token tiles.
 * Compiled with +dotprod+i8mm (CMake), so dispatch.c pairs it only with the
 * neon-i8mm kernel table, which it picks after seeing HWCAP2_I8MM too. */
#define NEON_GEMM_I8MM 1
#define NEON_GEMM_ISA "neon-i8mm"
#define NEON_GEMM_TABLE brisk_gemm_neon_i8mm

#include "kernels/neon_gemm_body.h"
