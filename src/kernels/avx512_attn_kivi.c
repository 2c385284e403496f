/* avx512_attn_kivi: KIVI's k4/k2 cache kernels (kernels.h, kv/kv.h's
 * layouts) in AVX-512: 16 slots of a sealed K part per vector (each channel's
 * d and min broadcast), V rows 16 dimensions at a time. Bit-identical to
 * attn_ref.c: every key or value is (float)q * d + min (a multiply, then an
 * add) before it is used, and every output keeps ref's chain of a multiply
 * then an add, in element order. */
#include "kernels/kernels.h"

#include <immintrin.h>
#include <string.h>

static inline float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* 16 codes (bytes) -> their values q * d + min. */
static inline __m512 deq16(__m128i codes, __m512 dv, __m512 mv) {
    return _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(codes)), dv), mv);
}

/* The 16 codes of channel i for slots s0..s0+15 (s0 = 0 or 16) of a K part. */
static inline __m128i k_codes(const uint8_t *part, int i, int s0, const bool K4) {
    if (K4) {
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(part + (size_t)i * 16));
        if (s0) b = _mm_srli_epi16(b, 4);   /* slots 16..31: the high nibbles */
        return _mm_and_si128(b, _mm_set1_epi8(15));
    }
    const __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(part + (size_t)i * 8)), m3 = _mm_set1_epi8(3);
    const int sh = s0 ? 4 : 0;   /* slots s0..s0+7 at bits sh, s0+8.. at sh + 2 */
    return _mm_unpacklo_epi64(_mm_and_si128(_mm_srli_epi16(b, sh), m3), _mm_and_si128(_mm_srli_epi16(b, sh + 2), m3));
}

static inline __attribute__((always_inline)) void kq_kivi(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d,
                                                          float scale, float *out, size_t os, const bool K4) {
    const uint8_t *dd = part + (size_t)d * (K4 ? 16 : 8), *mm_ = dd + 2 * (size_t)d;
    for (int h0 = 0; h0 < m; h0 += 4) {
        const int mm = m - h0 < 4 ? m - h0 : 4;
        const float *q0 = q + (size_t)h0 * qs, *q1 = q0 + (mm > 1 ? qs : 0), *q2 = q0 + (mm > 2 ? 2 * qs : 0), *q3 = q0 + (mm > 3 ? 3 * qs : 0);
        for (int g = 0; g < ng; g++) {
            const int s0 = slot0 + 16 * g;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int i = 0; i < d; i++) {
                const __m512 kv = deq16(k_codes(part, i, s0 % 32 >= 16 ? 16 : 0, K4), _mm512_set1_ps(f16_at(dd + 2 * (size_t)i)),
                                        _mm512_set1_ps(f16_at(mm_ + 2 * (size_t)i)));
                a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_set1_ps(q0[i]), kv));
                a1 = _mm512_add_ps(a1, _mm512_mul_ps(_mm512_set1_ps(q1[i]), kv));
                a2 = _mm512_add_ps(a2, _mm512_mul_ps(_mm512_set1_ps(q2[i]), kv));
                a3 = _mm512_add_ps(a3, _mm512_mul_ps(_mm512_set1_ps(q3[i]), kv));
            }
            const __m512 sc = _mm512_set1_ps(scale);
            float *o = out + (size_t)h0 * os + 16 * g;
            _mm512_storeu_ps(o, _mm512_mul_ps(a0, sc));
            if (mm > 1) _mm512_storeu_ps(o + os, _mm512_mul_ps(a1, sc));
            if (mm > 2) _mm512_storeu_ps(o + 2 * os, _mm512_mul_ps(a2, sc));
            if (mm > 3) _mm512_storeu_ps(o + 3 * os, _mm512_mul_ps(a3, sc));
        }
    }
}

void brisk_avx512_kq_multi_k4(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                              size_t os) {
    kq_kivi(q, qs, m, part, slot0, ng, d, scale, out, os, true);
}

void brisk_avx512_kq_multi_k2(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                              size_t os) {
    kq_kivi(q, qs, m, part, slot0, ng, d, scale, out, os, false);
}

/* The 16 values of a V row's elements off..off+15 (off % 16 == 0). */
static inline __attribute__((always_inline)) __m512 v16(const uint8_t *row, int off, const bool K4) {
    const uint8_t *g = row + (size_t)(off / 32) * (K4 ? 20 : 12);
    const int e0 = off % 32;
    const __m512 dv = _mm512_set1_ps(f16_at(g)), mv = _mm512_set1_ps(f16_at(g + 2));
    __m128i c;
    if (K4) {   /* element j low nibble of byte j, j + 16 the high nibble */
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(g + 4));
        if (e0) b = _mm_srli_epi16(b, 4);
        c = _mm_and_si128(b, _mm_set1_epi8(15));
    } else {    /* element j at bits 2 (j / 8) of byte j % 8 */
        const __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(g + 4)), m3 = _mm_set1_epi8(3);
        const int sh = e0 ? 4 : 0;
        c = _mm_unpacklo_epi64(_mm_and_si128(_mm_srli_epi16(b, sh), m3), _mm_and_si128(_mm_srli_epi16(b, sh + 2), m3));
    }
    return deq16(c, dv, mv);
}

static inline __attribute__((always_inline)) void axpy_kivi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v,
                                                            size_t rb, int n, int d, const bool K4) {
    for (int h0 = 0; h0 < m; h0 += 4) {
        const int mm = m - h0 < 4 ? m - h0 : 4;
        for (int off = 0; off < d; off += 16) {
            __m512 a[4];
            for (int h = 0; h < mm; h++) a[h] = _mm512_loadu_ps(o + (size_t)(h0 + h) * os + off);
            for (int j = 0; j < n; j++) {
                const __m512 x = v16(v + (size_t)j * rb, off, K4);
                for (int h = 0; h < mm; h++) a[h] = _mm512_fmadd_ps(_mm512_set1_ps(p[(size_t)(h0 + h) * ps + (size_t)j]), x, a[h]);   /* fused (ref's fmaf) */
            }
            for (int h = 0; h < mm; h++) _mm512_storeu_ps(o + (size_t)(h0 + h) * os + off, a[h]);
        }
    }
}

void brisk_avx512_axpy_k4_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d) {
    axpy_kivi(o, os, m, p, ps, v, rb, n, d, true);
}

void brisk_avx512_axpy_k2_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d) {
    axpy_kivi(o, os, m, p, ps, v, rb, n, d, false);
}
