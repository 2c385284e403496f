/* neon_dotprod_gemm: the aarch64 packed-GEMM table "neon-dotprod" (SDOT by
 * element), the kernels in neon_gemm_body.h. Compiled with +dotprod (CMake
 * gives neon_dotprod*.c that flag), so dispatch.c pairs it only with the
 * neon-dotprod kernel table, which it picks after seeing HWCAP_ASIMDDP. */
#define NEON_GEMM_I8MM 0
#define NEON_GEMM_ISA "neon-dotprod"
#define NEON_GEMM_TABLE brisk_gemm_neon_dotprod

#include "kernels/neon_gemm_body.h"
