/* avx2_gemm: the packed GEMM table for AVX2 (+FMA, F16C): avx2_gemm_body.h
 * with the integer dot products through vpmaddubsw/vpmaddwd. */
#define AVX2_GEMM_VNNI 0
#define AVX2_GEMM_ISA "avx2"
#define AVX2_GEMM_TABLE brisk_gemm_avx2
#include "kernels/avx2_gemm_body.h"
