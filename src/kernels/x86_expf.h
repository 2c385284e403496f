/* x86_expf: what the AVX2 and AVX-512 tables' vector brisk_expf (their exp8)
 * share. The vector path covers brisk_expf_core's range; the lanes outside it
 * (|x| >= 88, infinities, NaN: the special mask each exp8 returns) are redone
 * by the scalar brisk_expf_special, so every lane has the scalar function's
 * bits. */
#ifndef BRISK_X86_EXPF_H
#define BRISK_X86_EXPF_H

#include "ops/ops.h"

#include <immintrin.h>

/* e with lane l replaced by brisk_expf_special(xs[l]) for each bit l of special */
static inline __attribute__((always_inline)) __m256 brisk_exp8_fix_special(__m256 xs, __m256 e, unsigned special) {
    if (!special) return e;
    float xv[8], ev[8];
    _mm256_storeu_ps(xv, xs);
    _mm256_storeu_ps(ev, e);
    for (int l = 0; l < 8; l++)
        if (special >> l & 1) ev[l] = brisk_expf_special(xv[l]);
    return _mm256_loadu_ps(ev);
}

/* SwiGLU's 8 lanes h = g / (1 + e) * u, e = exp8(-g), in float (the scalar
 * expression's three roundings); the lanes of special recomputed by the
 * scalar expression with brisk_expf */
static inline __attribute__((always_inline)) void brisk_swiglu8_store(float *h, const float *g, const float *u, __m256 gv, __m256 e,
                                                                      unsigned special) {
    _mm256_storeu_ps(h, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(u)));
    for (int l = 0; special && l < 8; l++)
        if (special >> l & 1) h[l] = g[l] / (1.0f + brisk_expf(-g[l])) * u[l];
}

#endif
