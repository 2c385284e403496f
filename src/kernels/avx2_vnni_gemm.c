/* avx2_vnni_gemm: the packed GEMM table for AVX2 + AVX-VNNI (VEX-encoded
 * vpdpbusd/vpdpwssd on 256-bit registers: Alder Lake and later, Zen 5):
 * avx2_gemm_body.h with VNNI dot products. This file alone gets -mavxvnni
 * (CMakeLists.txt, beside the avx2_* glob's flags), so only it can emit VNNI
 * instructions; dispatch.c calls it only where the CPU has AVX-VNNI. */
#define AVX2_GEMM_VNNI 1
#define AVX2_GEMM_ISA "avx2-vnni"
#define AVX2_GEMM_TABLE brisk_gemm_avx2_vnni
#include "kernels/avx2_gemm_body.h"
