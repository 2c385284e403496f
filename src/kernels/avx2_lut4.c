/* avx2_lut4: AVX2 dot products of the 4-bit lookup-table formats IQ4_NL,
 * MXFP4 (against Q8_0) and IQ4_XS (against Q8_K), for the avx2 and avx2-vnni
 * tables (avx2_kernels.c) and, for odd tails, the avx512 one.
 *
 * A 16-entry table fits one xmm, so vpshufb turns 32 nibbles into their int8
 * values in one instruction; the rest is Q4_0's integer dot. The float work
 * is ref.c's exactly: SCALAR, one int32 sum per block (IQ4_XS: per 256
 * elements, the group's 6-bit scale applied to the int16 pair sums with
 * vpmaddwd) fused in order into one float accumulator. Integer sums are
 * exact in any order, so IQ4_NL and MXFP4 reduce four blocks' sums at once
 * and only the fused chain stays serial. */
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/convert.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

/* 16 bytes of nibbles -> the 32 table values in element order (low nibbles first). */
static inline __m256i lut4_values(const uint8_t *qs, __m128i table) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(b, m4));
    const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(b, 4), m4));
    return _mm256_setr_m128i(lo, hi);
}

/* int16 pair sums of q * y (|q|, |y| <= 127: no saturation). */
static inline __m256i pairs_s8(__m256i q, __m256i y) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
}

/* 8 int32 lanes of 4 adjacent products each. */
static inline __m256i lanes_s8(__m256i q, __m256i y) { return _mm256_madd_epi16(pairs_s8(q, y), _mm256_set1_epi16(1)); }

/* The four lanes' totals of v0..v3 (any order of exact integer adds). */
static inline __m128i sum4x8(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* The F32 scale of a 32-element lookup block: IQ4_NL's fp16 d or MXFP4's halved E8M0. */
static inline float lut4_scale(const uint8_t *block, bool mx) {
    if (mx) return brisk_e8m0_half(block[0]);
    uint16_t h;
    memcpy(&h, block, sizeof h);
    return _cvtsh_ss(h);
}

/* SCALAR over nb blocks of IQ4_NL (mx false) or MXFP4 against Q8_0: four
 * blocks' integer sums are reduced together, then fused one by one,
 * sum = fma((float)isum, dw * da, sum). Inlined per format, so mx is a constant. */
static inline __attribute__((always_inline)) float scalar_lut4(int64_t nb, const uint8_t *x, bool mx, const brisk_block_q8_0 *y) {
    const size_t stride = mx ? sizeof(brisk_block_mxfp4) : sizeof(brisk_block_iq4_nl);
    const size_t qs_off = mx ? offsetof(brisk_block_mxfp4, qs) : offsetof(brisk_block_iq4_nl, qs);
    const __m128i table = _mm_loadu_si128((const __m128i *)(mx ? brisk_mxfp4_values : brisk_iq4nl_values));
    float sum = 0.0f;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        __m256i l[4];
        float d[4], f[4];
        for (int k = 0; k < 4; k++) {
            const uint8_t *b = x + (size_t)(i + k) * stride;
            l[k] = lanes_s8(lut4_values(b + qs_off, table), _mm256_loadu_si256((const __m256i *)y[i + k].qs));
            d[k] = lut4_scale(b, mx) * _cvtsh_ss(y[i + k].d);
        }
        _mm_storeu_ps(f, _mm_cvtepi32_ps(sum4x8(l[0], l[1], l[2], l[3])));
        for (int k = 0; k < 4; k++) sum = fmaf(f[k], d[k], sum);
    }
    for (; i < nb; i++) {
        const uint8_t *b = x + (size_t)i * stride;
        const int s = hsum_epi32(lanes_s8(lut4_values(b + qs_off, table), _mm256_loadu_si256((const __m256i *)y[i].qs)));
        sum = fmaf((float)s, lut4_scale(b, mx) * _cvtsh_ss(y[i].d), sum);
    }
    return sum;
}

void brisk_avx2_dot_iq4_nl(int64_t n, float *out, const void *w, const void *a) { *out = scalar_lut4(n / 32, w, false, a); }

void brisk_avx2_dot_mxfp4(int64_t n, float *out, const void *w, const void *a) { *out = scalar_lut4(n / 32, w, true, a); }

/* SCALAR per 256-element block: each group's int16 pair sums times its
 * scale ls - 32 (vpmaddwd), the 8 groups added as int32 and reduced to the
 * block's sum, one fused multiply-add per block. */
void brisk_avx2_dot_iq4_xs(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_iq4_xs *x = w;
    const brisk_block_q8_k *y = a;
    const __m128i table = _mm_loadu_si128((const __m128i *)brisk_iq4nl_values);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / BRISK_QK_K; i++) {
        __m256i lanes = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++) {
            const __m256i q = lut4_values(x[i].qs + 16 * g, table);
            const __m256i p = pairs_s8(q, _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * g)));
            const int ls = brisk_iq4_xs_scale(x[i].scales_l, x[i].scales_h, g) - 32;
            lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(p, _mm256_set1_epi16((short)ls)));
        }
        sum = fmaf((float)hsum_epi32(lanes), _cvtsh_ss(x[i].d) * y[i].d, sum);
    }
    *out = sum;
}
