/* avx2_attn: the attention kernels (kernels.h) on AVX2 + F16C, each output
 * bit-identical to attn_ref.c: the same multiply, then add, per element and
 * in element order, in 8-float lanes. K in the cache is transposed (16
 * positions of one dimension contiguous), so a key group is two F16 loads
 * widened exactly by vcvtph2ps. */
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#include <immintrin.h>
#include <string.h>

static inline __m256 load8h(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline float f16(uint16_t h) { return _cvtsh_ss(h); }

/* One dword gather per two elements, as AVX-512's: the low halves are
 * element i of 8 rows, the high halves element i + 1; rows 0..7 and 8..15. */
static void kq16(const float *q, const uint16_t *k, size_t stride, int d, float scale, float *out) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)(stride * 2)));
    const __m256i lo16 = _mm256_set1_epi32(0xffff);
    for (int half = 0; half < 2; half++) {
        const uint16_t *kh = k + (size_t)half * 8 * stride;
        __m256 s = _mm256_setzero_ps();
        for (int i = 0; i < d; i += 2) {
            const __m256i g = _mm256_i32gather_epi32((const int *)(const void *)(kh + i), idx, 1);
            /* widen each half: F16 bits in the low 16 bits of a dword, packed to 8 words */
            const __m256i a = _mm256_and_si256(g, lo16), b = _mm256_srli_epi32(g, 16);
            const __m128i a16 = _mm_packus_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
            const __m128i b16 = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
            s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_set1_ps(q[i]), _mm256_cvtph_ps(a16)));
            s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_set1_ps(q[i + 1]), _mm256_cvtph_ps(b16)));
        }
        _mm256_storeu_ps(out + 8 * half, _mm256_mul_ps(s, _mm256_set1_ps(scale)));
    }
}

static void kq16t(const float *q, const float *kt, size_t stride, int d, float scale, float *out) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (int i = 0; i < d; i++) {
        const __m256 qv = _mm256_set1_ps(q[i]);
        s0 = _mm256_add_ps(s0, _mm256_mul_ps(qv, _mm256_loadu_ps(kt + (size_t)i * stride)));
        s1 = _mm256_add_ps(s1, _mm256_mul_ps(qv, _mm256_loadu_ps(kt + (size_t)i * stride + 8)));
    }
    const __m256 sv = _mm256_set1_ps(scale);
    _mm256_storeu_ps(out, _mm256_mul_ps(s0, sv));
    _mm256_storeu_ps(out + 8, _mm256_mul_ps(s1, sv));
}

static void axpy_f16(float *o, float p, const uint16_t *v, int d) {
    const __m256 pv = _mm256_set1_ps(p);
    int i = 0;
    for (; i + 8 <= d; i += 8) _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_loadu_ps(o + i), _mm256_mul_ps(pv, load8h(v + i))));
    for (; i < d; i++) o[i] = o[i] + p * f16(v[i]);
}

static void axpy_f16_rows(float *o, const float *p, const uint16_t *v, size_t stride, int n, int d) {
    int i = 0;
    for (; i + 16 <= d; i += 16) {
        __m256 a0 = _mm256_loadu_ps(o + i), a1 = _mm256_loadu_ps(o + i + 8);
        for (int j = 0; j < n; j++) {
            const uint16_t *vr = v + (size_t)j * stride + i;
            const __m256 pv = _mm256_set1_ps(p[j]);
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(pv, load8h(vr)));
            a1 = _mm256_add_ps(a1, _mm256_mul_ps(pv, load8h(vr + 8)));
        }
        _mm256_storeu_ps(o + i, a0);
        _mm256_storeu_ps(o + i + 8, a1);
    }
    for (; i + 8 <= d; i += 8) {
        __m256 a = _mm256_loadu_ps(o + i);
        for (int j = 0; j < n; j++) a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(p[j]), load8h(v + (size_t)j * stride + i)));
        _mm256_storeu_ps(o + i, a);
    }
    for (; i < d; i++)
        for (int j = 0; j < n; j++) o[i] = o[i] + p[j] * f16(v[(size_t)j * stride + i]);
}

/* Up to 2 queries x 2 groups of 16 keys at once: 8 accumulator chains of
 * 8 lanes side by side (one chain alone waits on the add latency), each
 * query broadcast once per element and each key line loaded once for both. */
static inline __attribute__((always_inline)) void kqt_tile(const float *q, size_t qs, const void *kt, size_t stride, int d, float scale,
                                                           float *out, size_t os, const int QM, const int QG, const int F16,
                                                           brisk_attn_pf *pf) {
    __m256 acc[2][4];
#pragma GCC unroll 2
    for (int h = 0; h < QM; h++)
#pragma GCC unroll 4
        for (int c = 0; c < 2 * QG; c++) acc[h][c] = _mm256_setzero_ps();
    for (int i = 0; i < d; i++) {
        brisk_attn_pf_next(pf);
        __m256 k[4];
#pragma GCC unroll 4
        for (int c = 0; c < 2 * QG; c++)
            k[c] = F16 ? load8h((const uint16_t *)kt + (size_t)i * stride + 8 * c) : _mm256_loadu_ps((const float *)kt + (size_t)i * stride + 8 * c);
#pragma GCC unroll 2
        for (int h = 0; h < QM; h++) {
            const __m256 qv = _mm256_set1_ps(q[(size_t)h * qs + (size_t)i]);
#pragma GCC unroll 4
            for (int c = 0; c < 2 * QG; c++) acc[h][c] = _mm256_add_ps(acc[h][c], _mm256_mul_ps(qv, k[c]));
        }
    }
    const __m256 sv = _mm256_set1_ps(scale);
#pragma GCC unroll 2
    for (int h = 0; h < QM; h++)
#pragma GCC unroll 4
        for (int c = 0; c < 2 * QG; c++) _mm256_storeu_ps(out + (size_t)h * os + 8 * c, _mm256_mul_ps(acc[h][c], sv));
}

static inline __attribute__((always_inline)) void kq_multi(const float *q, size_t qs, int m, const void *kt, size_t stride, int ng, int d,
                                                           float scale, float *out, size_t os, const int F16, brisk_attn_pf *pf) {
    const size_t esz = F16 ? sizeof(uint16_t) : sizeof(float);
    for (int h0 = 0; h0 < m; h0 += 2) {
        const float *qh = q + (size_t)h0 * qs;
        const int mm = m - h0 < 2 ? m - h0 : 2;
        for (int g0 = 0; g0 < ng; g0 += 2) {
            const void *kg = (const char *)kt + (size_t)(16 * g0) * esz;
            float *oh = out + (size_t)h0 * os + (size_t)(16 * g0);
            const int gg = ng - g0 < 2 ? ng - g0 : 2;
            if (mm == 2 && gg == 2) kqt_tile(qh, qs, kg, stride, d, scale, oh, os, 2, 2, F16, pf);
            else if (mm == 2) kqt_tile(qh, qs, kg, stride, d, scale, oh, os, 2, 1, F16, pf);
            else if (gg == 2) kqt_tile(qh, qs, kg, stride, d, scale, oh, os, 1, 2, F16, pf);
            else kqt_tile(qh, qs, kg, stride, d, scale, oh, os, 1, 1, F16, pf);
        }
    }
}

static void kq_multi_t(const float *q, size_t qs, int m, const float *kt, size_t stride, int ng, int d, float scale, float *out,
                       size_t os) {
    kq_multi(q, qs, m, kt, stride, ng, d, scale, out, os, 0, NULL);
}

static void kq_multi_h(const float *q, size_t qs, int m, const uint16_t *kt, size_t stride, int ng, int d, float scale, float *out,
                       size_t os, brisk_attn_pf *pf) {
    kq_multi(q, qs, m, kt, stride, ng, d, scale, out, os, 1, pf);
}

/* Up to 2 outputs sharing the V rows, 16 dimensions from off: each V line
 * widened once for both. */
static inline __attribute__((always_inline)) void axpy_rows_tile(float *o, size_t os, const float *p, size_t ps, const uint16_t *v,
                                                                 size_t stride, int n, int off, const int QM, brisk_attn_pf *pf) {
    __m256 a[2][2];
#pragma GCC unroll 2
    for (int h = 0; h < QM; h++) {
        a[h][0] = _mm256_loadu_ps(o + (size_t)h * os + off);
        a[h][1] = _mm256_loadu_ps(o + (size_t)h * os + off + 8);
    }
    for (int j = 0; j < n; j++) {
        brisk_attn_pf_next(pf);
        const uint16_t *vr = v + (size_t)j * stride + off;
        const __m256 v0 = load8h(vr), v1 = load8h(vr + 8);
#pragma GCC unroll 2
        for (int h = 0; h < QM; h++) {
            const __m256 pv = _mm256_set1_ps(p[(size_t)h * ps + (size_t)j]);
            a[h][0] = _mm256_add_ps(a[h][0], _mm256_mul_ps(pv, v0));
            a[h][1] = _mm256_add_ps(a[h][1], _mm256_mul_ps(pv, v1));
        }
    }
#pragma GCC unroll 2
    for (int h = 0; h < QM; h++) {
        _mm256_storeu_ps(o + (size_t)h * os + off, a[h][0]);
        _mm256_storeu_ps(o + (size_t)h * os + off + 8, a[h][1]);
    }
}

static void axpy_f16_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint16_t *v, size_t stride, int n, int d,
                                brisk_attn_pf *pf) {
    const int d16 = d & ~15;
    for (int h0 = 0; h0 < m; h0 += 2) {
        float *oh = o + (size_t)h0 * os;
        const float *ph = p + (size_t)h0 * ps;
        const int mm = m - h0 < 2 ? m - h0 : 2;
        for (int off = 0; off < d16; off += 16) {
            if (mm == 2) axpy_rows_tile(oh, os, ph, ps, v, stride, n, off, 2, pf);
            else axpy_rows_tile(oh, os, ph, ps, v, stride, n, off, 1, pf);
        }
        if (d16 < d)   /* the last dimensions: each output on its own (dimensions are independent) */
            for (int h = 0; h < mm; h++) axpy_f16_rows(oh + (size_t)h * os + d16, ph + (size_t)h * ps, v + d16, stride, n, d - d16);
    }
}

/* ---- the quantized KV cache (kv/kv.h's layouts): values dequantized exactly (d * q) ---- */

/* The codes of channels i and i + 1 of 16 slots from s0 as int16 pairs, two
 * vectors of 8 slots (32-bit lane l: channel i low, i + 1 high), for madd. */
static inline void k_pairs_q8(const uint8_t *part, int i, int s0, __m256i *lo, __m256i *hi) {
    const __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(part + (size_t)i * 32 + (size_t)s0));
    const __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(part + (size_t)(i + 1) * 32 + (size_t)s0));
    *lo = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x0, x1));
    *hi = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x0, x1));
}

/* The same for Q4_0 (slots 0..15 the low nibbles, 16..31 the high ones), minus 8. */
static inline void k_pairs_q4(const uint8_t *part, int i, int high, __m256i *lo, __m256i *hi) {
    __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(part + (size_t)i * 16));
    __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(part + (size_t)(i + 1) * 16));
    if (high) x0 = _mm_srli_epi16(x0, 4), x1 = _mm_srli_epi16(x1, 4);
    const __m128i m4 = _mm_set1_epi8(15);
    x0 = _mm_and_si128(x0, m4), x1 = _mm_and_si128(x1, m4);
    const __m256i e8 = _mm256_set1_epi16(8);
    *lo = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x0, x1)), e8);
    *hi = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(x0, x1)), e8);
}

static inline __m256i q_pair(const int16_t *q, int i) {
    int32_t v;
    memcpy(&v, q + i, sizeof v);
    return _mm256_set1_epi32(v);
}

/* brisk_kq_q_slot for 16 slots (two vectors) and two heads side by side: the
 * group's integer dots (exact in any order), then ref's F32 chain. */
static inline __attribute__((always_inline)) void kq_q(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0,
                                                       int ng, int d, float scale, float *out, size_t os, const bool Q4, brisk_attn_pf *pf) {
    const uint16_t *dd = (const uint16_t *)(const void *)(part + (size_t)d * (Q4 ? 16 : 32));
    const size_t ds = qs / 32;
    for (int h0 = 0; h0 < m; h0 += 2) {
        const int mm = m - h0 < 2 ? m - h0 : 2;
        const int16_t *q0 = qq + (size_t)h0 * qs, *q1 = q0 + (mm > 1 ? qs : 0);
        const float *d0 = qd + (size_t)h0 * ds, *d1 = d0 + (mm > 1 ? ds : 0);
        for (int g = 0; g < ng; g++) {
            const int s0 = slot0 + 16 * g;
            __m256 f00 = _mm256_setzero_ps(), f01 = f00, f10 = f00, f11 = f00;
            for (int b = 0; b < d / 32; b++) {
                __m256i i00 = _mm256_setzero_si256(), i01 = i00, i10 = i00, i11 = i00;
                for (int i = 32 * b; i < 32 * b + 32; i += 2) {
                    brisk_attn_pf_next(pf);
                    __m256i lo, hi;
                    if (Q4) k_pairs_q4(part, i, s0 >= 16, &lo, &hi);
                    else k_pairs_q8(part, i, s0, &lo, &hi);
                    const __m256i p0 = q_pair(q0, i), p1 = q_pair(q1, i);
                    i00 = _mm256_add_epi32(i00, _mm256_madd_epi16(lo, p0));
                    i01 = _mm256_add_epi32(i01, _mm256_madd_epi16(hi, p0));
                    i10 = _mm256_add_epi32(i10, _mm256_madd_epi16(lo, p1));
                    i11 = _mm256_add_epi32(i11, _mm256_madd_epi16(hi, p1));
                }
                const uint16_t *dg = dd + (size_t)b * 32 + (size_t)s0;
                const __m256 dk0 = load8h(dg), dk1 = load8h(dg + 8), e0 = _mm256_set1_ps(d0[b]), e1 = _mm256_set1_ps(d1[b]);
                f00 = _mm256_add_ps(f00, _mm256_mul_ps(_mm256_cvtepi32_ps(i00), _mm256_mul_ps(dk0, e0)));
                f01 = _mm256_add_ps(f01, _mm256_mul_ps(_mm256_cvtepi32_ps(i01), _mm256_mul_ps(dk1, e0)));
                f10 = _mm256_add_ps(f10, _mm256_mul_ps(_mm256_cvtepi32_ps(i10), _mm256_mul_ps(dk0, e1)));
                f11 = _mm256_add_ps(f11, _mm256_mul_ps(_mm256_cvtepi32_ps(i11), _mm256_mul_ps(dk1, e1)));
            }
            const __m256 sc = _mm256_set1_ps(scale);
            float *o = out + (size_t)h0 * os + 16 * g;
            _mm256_storeu_ps(o, _mm256_mul_ps(f00, sc));
            _mm256_storeu_ps(o + 8, _mm256_mul_ps(f01, sc));
            if (mm > 1) {
                _mm256_storeu_ps(o + os, _mm256_mul_ps(f10, sc));
                _mm256_storeu_ps(o + os + 8, _mm256_mul_ps(f11, sc));
            }
        }
    }
}

static void kq_multi_q8_0(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale,
                          float *out, size_t os, brisk_attn_pf *pf) {
    kq_q(qq, qd, qs, m, part, slot0, ng, d, scale, out, os, false, pf);
}

static void kq_multi_q4_0(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale,
                          float *out, size_t os, brisk_attn_pf *pf) {
    kq_q(qq, qd, qs, m, part, slot0, ng, d, scale, out, os, true, pf);
}

/* 16 V values of row v from dimension off (off % 32 is 0 or 16), exact. */
static inline __attribute__((always_inline)) void v16(const uint8_t *v, int off, int T, __m256 *lo, __m256 *hi) {
    if (T == 0) {   /* F32 */
        const float *f = (const float *)(const void *)v + off;
        *lo = _mm256_loadu_ps(f);
        *hi = _mm256_loadu_ps(f + 8);
    } else if (T == 1) {   /* Q8_0 */
        const brisk_block_q8_0 *b = (const brisk_block_q8_0 *)(const void *)v + off / 32;
        const __m256 dv = _mm256_set1_ps(f16(b->d));
        const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(b->qs + off % 32));
        *lo = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x)));
        *hi = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(x, 8))));
    } else {   /* Q4_0: element j low nibble, j + 16 high */
        const brisk_block_q4_0 *b = (const brisk_block_q4_0 *)(const void *)v + off / 32;
        const __m256 dv = _mm256_set1_ps(f16(b->d));
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)b->qs);
        if (off % 32) x = _mm_srli_epi16(x, 4);
        x = _mm_and_si128(x, _mm_set1_epi8(15));
        const __m256i e8 = _mm256_set1_epi32(8);
        *lo = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(x), e8)));
        *hi = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(x, 8)), e8)));
    }
}

/* o + p * v: a multiply then an add for F32 V (T 0), one fused multiply-add
 * for the quantized types (ref's fmaf, as llama.cpp's ggml_vec_mad_f32). */
static inline __m256 v_acc(__m256 o, __m256 p, __m256 v, const int T) {
    return T ? _mm256_fmadd_ps(p, v, o) : _mm256_add_ps(o, _mm256_mul_ps(p, v));
}

static inline __attribute__((always_inline)) void axpy_q(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v,
                                                         size_t rb, int n, int d, const int T, brisk_attn_pf *pf) {
    const int d16 = d & ~15;
    for (int h0 = 0; h0 < m; h0 += 2) {
        const int mm = m - h0 < 2 ? m - h0 : 2;
        float *o0 = o + (size_t)h0 * os, *o1 = o0 + (mm > 1 ? os : 0);
        const float *p0 = p + (size_t)h0 * ps, *p1 = p0 + (mm > 1 ? ps : 0);
        for (int off = 0; off < d16; off += 16) {
            __m256 a00 = _mm256_loadu_ps(o0 + off), a01 = _mm256_loadu_ps(o0 + off + 8);
            __m256 a10 = _mm256_loadu_ps(o1 + off), a11 = _mm256_loadu_ps(o1 + off + 8);
            for (int j = 0; j < n; j++) {
                brisk_attn_pf_next(pf);
                __m256 lo, hi;
                v16(v + (size_t)j * rb, off, T, &lo, &hi);
                const __m256 b0 = _mm256_set1_ps(p0[j]), b1 = _mm256_set1_ps(p1[j]);
                a00 = v_acc(a00, b0, lo, T);
                a01 = v_acc(a01, b0, hi, T);
                a10 = v_acc(a10, b1, lo, T);
                a11 = v_acc(a11, b1, hi, T);
            }
            if (mm > 1) {   /* o1 first: with one head it aliases o0, whose sums are the ones kept */
                _mm256_storeu_ps(o1 + off, a10);
                _mm256_storeu_ps(o1 + off + 8, a11);
            }
            _mm256_storeu_ps(o0 + off, a00);
            _mm256_storeu_ps(o0 + off + 8, a01);
        }
        for (int h = h0; h < h0 + mm && d16 < d; h++)   /* F32's last dimensions (the block types have none) */
            for (int j = 0; j < n; j++) {
                const float *f = (const float *)(const void *)(v + (size_t)j * rb);
                for (int i = d16; i < d; i++) o[(size_t)h * os + i] = o[(size_t)h * os + i] + p[(size_t)h * ps + j] * f[i];
            }
    }
}

static void axpy_f32_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const float *v, size_t stride, int n, int d) {
    axpy_q(o, os, m, p, ps, (const uint8_t *)(const void *)v, stride * sizeof(float), n, d, 0, NULL);
}

static void axpy_q8_0_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d,
                                 brisk_attn_pf *pf) {
    axpy_q(o, os, m, p, ps, v, rb, n, d, 1, pf);
}

static void axpy_q4_0_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d,
                                 brisk_attn_pf *pf) {
    axpy_q(o, os, m, p, ps, v, rb, n, d, 2, pf);
}

static const brisk_attn_kernels avx2_attn = {
    .isa = "avx2",
    .kq16 = kq16,
    .axpy_f16 = axpy_f16,
    .axpy_f16_rows = axpy_f16_rows,
    .kq16t = kq16t,
    .kq_multi_t = kq_multi_t,
    .kq_multi_h = kq_multi_h,
    .axpy_f16_rows_multi = axpy_f16_rows_multi,
    .kq_multi_q8_0 = kq_multi_q8_0,
    .kq_multi_q4_0 = kq_multi_q4_0,
    .axpy_f32_rows_multi = axpy_f32_rows_multi,
    .axpy_q8_0_rows_multi = axpy_q8_0_rows_multi,
    .axpy_q4_0_rows_multi = axpy_q4_0_rows_multi,
    .kq_multi_k4 = brisk_avx2_kq_multi_k4,
    .kq_multi_k2 = brisk_avx2_kq_multi_k2,
    .axpy_k4_rows_multi = brisk_avx2_axpy_k4_rows_multi,
    .axpy_k2_rows_multi = brisk_avx2_axpy_k2_rows_multi,
};

const brisk_attn_kernels *brisk_attn_avx2(void) { return &avx2_attn; }
