/* avx512_attn_kv: the quantized KV cache's attention kernels (kernels.h,
 * kv/kv.h's layouts) in AVX-512: 16 slots of a transposed K part per vector,
 * V rows 32 dimensions at a time. Bit-identical to attn_ref.c: the scores
 * are brisk_kq_q_slot's integer dots per group of 32 and its F32 chain over
 * the groups; each V value is dequantized exactly (d * q) and added with one
 * fused multiply-add per element, in row order (ref's fmaf), F32 V with a
 * multiply then an add. */
#include "kernels/kernels.h"
#include "quant/blocks.h"

#include <immintrin.h>
#include <string.h>

/* The codes of channels i and i + 1 of 16 slots from s0 as int16 pairs
 * (32-bit lane l: slot s0 + l, channel i low, i + 1 high), for madd. */
static inline __m512i k_pairs_q8(const uint8_t *part, int i, int s0) {
    const __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(part + (size_t)i * 32 + (size_t)s0));
    const __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(part + (size_t)(i + 1) * 32 + (size_t)s0));
    return _mm512_cvtepi8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(x0, x1), _mm_unpacklo_epi8(x0, x1)));
}

/* The same for Q4_0 (slots 0..15 the low nibbles, 16..31 the high ones), minus 8. */
static inline __m512i k_pairs_q4(const uint8_t *part, int i, int high) {
    __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(part + (size_t)i * 16));
    __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(part + (size_t)(i + 1) * 16));
    if (high) x0 = _mm_srli_epi16(x0, 4), x1 = _mm_srli_epi16(x1, 4);
    const __m128i m4 = _mm_set1_epi8(15);
    x0 = _mm_and_si128(x0, m4), x1 = _mm_and_si128(x1, m4);
    return _mm512_sub_epi16(_mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(x0, x1), _mm_unpacklo_epi8(x0, x1))), _mm512_set1_epi16(8));
}

static inline __m512i q_pair(const int16_t *q, int i) {
    int32_t v;
    memcpy(&v, q + i, sizeof v);
    return _mm512_set1_epi32(v);
}

/* brisk_kq_q_slot for 16 slots per vector and up to four heads side by side:
 * the group's integer dots (exact in any order; vpdpwssd, AVX512-VNNI, which
 * the avx512 table requires: a madd and an add in one, without saturation),
 * then ref's F32 chain over the groups. */
static inline __attribute__((always_inline)) void kq_q(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0,
                                                       int ng, int d, float scale, float *out, size_t os, const bool Q4, brisk_attn_pf *pf) {
    const uint16_t *dd = (const uint16_t *)(const void *)(part + (size_t)d * (Q4 ? 16 : 32));
    const size_t ds = qs / 32;
    for (int h0 = 0; h0 < m; h0 += 4) {
        const int mm = m - h0 < 4 ? m - h0 : 4;
        const size_t o1 = mm > 1 ? 1 : 0, o2 = mm > 2 ? 2 : 0, o3 = mm > 3 ? 3 : 0;
        const int16_t *q0 = qq + (size_t)h0 * qs, *q1 = q0 + o1 * qs, *q2 = q0 + o2 * qs, *q3 = q0 + o3 * qs;
        const float *d0 = qd + (size_t)h0 * ds, *d1 = d0 + o1 * ds, *d2 = d0 + o2 * ds, *d3 = d0 + o3 * ds;
        for (int g = 0; g < ng; g++) {
            const int s0 = slot0 + 16 * g;
            __m512 f0 = _mm512_setzero_ps(), f1 = f0, f2 = f0, f3 = f0;
            for (int b = 0; b < d / 32; b++) {
                __m512i i0 = _mm512_setzero_si512(), i1 = i0, i2 = i0, i3 = i0;
                for (int i = 32 * b; i < 32 * b + 32; i += 2) {
                    brisk_attn_pf_next(pf);
                    const __m512i kk = Q4 ? k_pairs_q4(part, i, s0 >= 16) : k_pairs_q8(part, i, s0);
                    i0 = _mm512_dpwssd_epi32(i0, kk, q_pair(q0, i));
                    i1 = _mm512_dpwssd_epi32(i1, kk, q_pair(q1, i));
                    i2 = _mm512_dpwssd_epi32(i2, kk, q_pair(q2, i));
                    i3 = _mm512_dpwssd_epi32(i3, kk, q_pair(q3, i));
                }
                const __m512 dk = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(dd + (size_t)b * 32 + (size_t)s0)));
                f0 = _mm512_add_ps(f0, _mm512_mul_ps(_mm512_cvtepi32_ps(i0), _mm512_mul_ps(dk, _mm512_set1_ps(d0[b]))));
                f1 = _mm512_add_ps(f1, _mm512_mul_ps(_mm512_cvtepi32_ps(i1), _mm512_mul_ps(dk, _mm512_set1_ps(d1[b]))));
                f2 = _mm512_add_ps(f2, _mm512_mul_ps(_mm512_cvtepi32_ps(i2), _mm512_mul_ps(dk, _mm512_set1_ps(d2[b]))));
                f3 = _mm512_add_ps(f3, _mm512_mul_ps(_mm512_cvtepi32_ps(i3), _mm512_mul_ps(dk, _mm512_set1_ps(d3[b]))));
            }
            const __m512 sc = _mm512_set1_ps(scale);
            float *o = out + (size_t)h0 * os + 16 * g;
            _mm512_storeu_ps(o, _mm512_mul_ps(f0, sc));
            if (mm > 1) _mm512_storeu_ps(o + os, _mm512_mul_ps(f1, sc));
            if (mm > 2) _mm512_storeu_ps(o + 2 * os, _mm512_mul_ps(f2, sc));
            if (mm > 3) _mm512_storeu_ps(o + 3 * os, _mm512_mul_ps(f3, sc));
        }
    }
}

void brisk_avx512_kq_multi_q8_0(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d,
                                float scale, float *out, size_t os, brisk_attn_pf *pf) {
    kq_q(qq, qd, qs, m, part, slot0, ng, d, scale, out, os, false, pf);
}

void brisk_avx512_kq_multi_q4_0(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d,
                                float scale, float *out, size_t os, brisk_attn_pf *pf) {
    kq_q(qq, qd, qs, m, part, slot0, ng, d, scale, out, os, true, pf);
}

/* 32 V values of row v from dimension off: (lo, hi) halves, exact. */
static inline __attribute__((always_inline)) void v32(const uint8_t *v, int off, int T, __m512 *lo, __m512 *hi) {
    if (T == 0) {   /* F32 */
        const float *f = (const float *)(const void *)v + off;
        *lo = _mm512_loadu_ps(f);
        *hi = _mm512_loadu_ps(f + 16);
    } else if (T == 1) {   /* Q8_0 */
        const brisk_block_q8_0 *b = (const brisk_block_q8_0 *)(const void *)v + off / 32;
        const __m512 dv = _mm512_set1_ps(_cvtsh_ss(b->d));
        *lo = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)b->qs))));
        *hi = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(b->qs + 16)))));
    } else {   /* Q4_0: element j low nibble, j + 16 high */
        const brisk_block_q4_0 *b = (const brisk_block_q4_0 *)(const void *)v + off / 32;
        const __m512 dv = _mm512_set1_ps(_cvtsh_ss(b->d));
        const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)b->qs), m4 = _mm_set1_epi8(15);
        const __m512i e8 = _mm512_set1_epi32(8);
        *lo = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(x, m4)), e8)));
        *hi = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(x, 4), m4)), e8)));
    }
}

/* o + p * v: a multiply then an add for F32 V (T 0), one fused multiply-add
 * for the quantized types (ref's fmaf). */
static inline __m512 v_acc(__m512 o, __m512 p, __m512 v, const int T) {
    return T ? _mm512_fmadd_ps(p, v, o) : _mm512_add_ps(o, _mm512_mul_ps(p, v));
}

/* Four heads side by side in named registers (an array indexed by a runtime
 * head count lived on the stack: a load and a store around every multiply-add);
 * with fewer heads the missing ones repeat head 0 (the same inputs, so the
 * same sums, stored to head 0's row). */
static inline __attribute__((always_inline)) void axpy_q(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v,
                                                         size_t rb, int n, int d, const int T, brisk_attn_pf *pf) {
    const int d32 = d & ~31;
    for (int h0 = 0; h0 < m; h0 += 4) {
        const int mm = m - h0 < 4 ? m - h0 : 4;
        const size_t o1 = mm > 1 ? 1 : 0, o2 = mm > 2 ? 2 : 0, o3 = mm > 3 ? 3 : 0;
        float *r0 = o + (size_t)h0 * os, *r1 = r0 + o1 * os, *r2 = r0 + o2 * os, *r3 = r0 + o3 * os;
        const float *p0 = p + (size_t)h0 * ps, *p1 = p0 + o1 * ps, *p2 = p0 + o2 * ps, *p3 = p0 + o3 * ps;
        for (int off = 0; off < d32; off += 32) {
            __m512 a0 = _mm512_loadu_ps(r0 + off), b0 = _mm512_loadu_ps(r0 + off + 16);
            __m512 a1 = _mm512_loadu_ps(r1 + off), b1 = _mm512_loadu_ps(r1 + off + 16);
            __m512 a2 = _mm512_loadu_ps(r2 + off), b2 = _mm512_loadu_ps(r2 + off + 16);
            __m512 a3 = _mm512_loadu_ps(r3 + off), b3 = _mm512_loadu_ps(r3 + off + 16);
            for (int j = 0; j < n; j++) {
                brisk_attn_pf_next(pf);
                __m512 lo, hi;
                v32(v + (size_t)j * rb, off, T, &lo, &hi);
                const __m512 w0 = _mm512_set1_ps(p0[j]), w1 = _mm512_set1_ps(p1[j]), w2 = _mm512_set1_ps(p2[j]), w3 = _mm512_set1_ps(p3[j]);
                a0 = v_acc(a0, w0, lo, T), b0 = v_acc(b0, w0, hi, T);
                a1 = v_acc(a1, w1, lo, T), b1 = v_acc(b1, w1, hi, T);
                a2 = v_acc(a2, w2, lo, T), b2 = v_acc(b2, w2, hi, T);
                a3 = v_acc(a3, w3, lo, T), b3 = v_acc(b3, w3, hi, T);
            }
            _mm512_storeu_ps(r3 + off, a3), _mm512_storeu_ps(r3 + off + 16, b3);
            _mm512_storeu_ps(r2 + off, a2), _mm512_storeu_ps(r2 + off + 16, b2);
            _mm512_storeu_ps(r1 + off, a1), _mm512_storeu_ps(r1 + off + 16, b1);
            _mm512_storeu_ps(r0 + off, a0), _mm512_storeu_ps(r0 + off + 16, b0);
        }
        for (int h = h0; h < h0 + mm && d32 < d; h++)   /* F32's last dimensions (the block types have none) */
            for (int j = 0; j < n; j++) {
                const float *f = (const float *)(const void *)(v + (size_t)j * rb);
                for (int i = d32; i < d; i++) o[(size_t)h * os + i] = o[(size_t)h * os + i] + p[(size_t)h * ps + j] * f[i];
            }
    }
}

void brisk_avx512_axpy_f32_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const float *v, size_t stride, int n, int d) {
    axpy_q(o, os, m, p, ps, (const uint8_t *)(const void *)v, stride * sizeof(float), n, d, 0, NULL);
}

void brisk_avx512_axpy_q8_0_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d,
                                       brisk_attn_pf *pf) {
    axpy_q(o, os, m, p, ps, v, rb, n, d, 1, pf);
}

void brisk_avx512_axpy_q4_0_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d,
                                       brisk_attn_pf *pf) {
    axpy_q(o, os, m, p, ps, v, rb, n, d, 2, pf);
}
