/* kernels: dot products (and, later, GEMV/GEMM) per ISA behind one function
 * table. ref.c is the specification: plain C that follows ggml's scalar
 * (`_generic`) kernels operation for operation. Each ISA variant lives in its
 * own file (avx2_*.c, avx512_*.c, neon_*.c, compiled with that ISA's flags),
 * exports a table with the same signatures, and is checked against ref by
 * tests/test_kernels.c. dispatch.c picks the best table the CPU runs;
 * BRISK_FORCE_REF=1 in the environment (read once) forces ref.
 *
 * A matmul row is: quantize the activation row once with
 *   k->quantize_act[info->act_type](x, a, n)
 * then for every weight row w:  k->vec_dot[wtype](n, &out, w, a).
 *
 * Thread safety: tables are immutable; every function is reentrant. */
#ifndef BRISK_KERNELS_H
#define BRISK_KERNELS_H

#include "quant/quant.h"

/* w: n elements of the weight type, a: n elements of that type's act_type
 * (brisk_qtype_get(wtype)->act_type); n a whole number of blocks of both.
 * Writes *out = sum_i w[i]*a[i] (in the quantized domain). */
typedef void (*brisk_vec_dot_fn)(int64_t n, float *out, const void *w, const void *a);

/* Activation quantizer: n floats -> n elements of an activation type. */
typedef void (*brisk_quantize_fn)(const float *x, void *dst, int64_t n);

typedef struct brisk_kernels {
    const char *isa;                                     /* "ref", "avx2", "avx512", "neon" */
    brisk_vec_dot_fn vec_dot[BRISK_Q_TYPE_LIMIT];        /* indexed by weight type; NULL = none */
    brisk_quantize_fn quantize_act[BRISK_Q_TYPE_LIMIT];  /* indexed by activation type: F32 (copy),
                                                            F16, BF16, Q8_0, Q8_1, Q8_K */
} brisk_kernels;

/* The reference table (always available). */
const brisk_kernels *brisk_kernels_ref(void);

/* The best table for this CPU (runtime detection); ref when BRISK_FORCE_REF=1
 * was set when the CPU features were first read. Never NULL. */
const brisk_kernels *brisk_kernels_best(void);

/* Every table this CPU can run, ref first; returns how many there are (it
 * writes at most max of them). For tests and benchmarks. */
int brisk_kernels_all(const brisk_kernels **out, int max);

/* ISA tables, defined only in builds that compile that ISA's files; callers
 * go through brisk_kernels_best/all, which check the CPU first. */
const brisk_kernels *brisk_kernels_avx2(void);

/* ---- reference kernels, by name (ref.c), for ISA tables to fall back on ---- */
void brisk_vec_dot_f32_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_f16_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_bf16_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q4_0_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q4_1_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q5_0_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q5_1_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q8_0_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q2_k_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q3_k_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q4_k_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q5_k_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q6_k_ref(int64_t n, float *out, const void *w, const void *a);

#endif
