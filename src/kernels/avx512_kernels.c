/* avx512_kernels: the x86-64 AVX-512 (F/BW/VL/DQ + VNNI) kernel table.
 *
 * The packed GEMM (avx512_gemm.c) takes Q4_0, Q5_0, Q8_0, Q4_K, Q6_K and F16;
 * this table gives the remaining weight types, Q4_1, Q5_1, Q2_K, Q3_K, Q5_K,
 * F32 and BF16 (and, from avx512_lut4.c, IQ4_NL, IQ4_XS and MXFP4),
 * AVX-512 dot products, and keeps the AVX2 table's kernels for
 * the rest and its activation quantizers (the GEMM table has its own).
 *
 * Quantized kernels return ref's bits. Integer sums are exact in any order,
 * so they are done 64 bytes at a time (two 32-element groups per zmm, VNNI
 * vpdpbusd for unscaled products, vpdpwssd where 16-element or 32-element
 * scales apply); the float work keeps ref's order exactly (LANES: each
 * block's 8 int32 lanes fused into 8 float accumulators, block after block;
 * SCALAR: one fused accumulator). In LANES that chain of one FMA per block is
 * serial and bounds the 32-element formats (see dot_x_1).
 *
 * F32 and BF16 use 16-lane accumulators in a fixed order (within the test's
 * rounding bound of ref, and a function of the inputs only). BF16 uses
 * vdpbf16ps when the CPU has AVX512_BF16: the product of two BF16 values is
 * exact in F32, so it rounds like widening and FMA, except that it flushes
 * F32-denormal inputs and results to zero. */
#include "kernels/kernels.h"
#include "base/cpu.h"
#include "quant/blocks.h"
#include "quant/convert.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#define QK BRISK_QK_K

/* ---- helpers -------------------------------------------------------------------- */

static inline float fp16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

/* ref's hsum8: (a[i] + a[i+4]), then (0 + 2) + (1 + 3). */
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int hsum8_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* A 32-byte row of the weight block twice: zmm bytes 0-31 and 32-63. */
static inline __m512i dup256(const void *p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)); }

/* Each byte, in the low 32 bytes shifted right by lo, in the high 32 by hi,
 * then masked: picks a bit field of dup256's two copies. */
static inline __m512i fields(__m512i v, int lo, int hi, int mask) {
    const __m512i sh = _mm512_setr_epi64(lo, lo, lo, lo, hi, hi, hi, hi);
    return _mm512_and_si512(_mm512_srlv_epi64(v, sh), _mm512_set1_epi8((char)mask));
}

/* Byte mask of v's bit lo (low 32 bytes) or bit hi (high 32 bytes). */
static inline __mmask64 bit_mask(__m512i v, int lo, int hi) {
    const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << lo)), _mm256_set1_epi8((char)(1 << hi)), 1);
    return _mm512_test_epi8_mask(v, sel);
}

static const int16_t lane_div8[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                       2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
static const int16_t lane_div16[32] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

/* int16 scales for vpdpwssd: lane t = s16[first + t / per], per 8 or 16. */
static inline __m512i spread16(__m512i s16, int first, int per) {
    const __m512i idx = _mm512_add_epi16(_mm512_loadu_si512(per == 8 ? lane_div8 : lane_div16), _mm512_set1_epi16((short)first));
    return _mm512_permutexvar_epi16(idx, s16);
}

/* ---- float formats -------------------------------------------------------------- */

static void dot_f32(int64_t n, float *out, const void *w, const void *a) {
    const float *x = w, *y = a;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), acc1);
        acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), acc2);
        acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), acc3);
    }
    for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), acc0);
    if (i < n) {   /* masked lanes load nothing (no overread) and add zeros */
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), acc1);
    }
    *out = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

static inline __m512 bf16x16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

/* Without AVX512_BF16: widen to F32 (exact) and FMA. */
static void dot_bf16_widen(int64_t n, float *out, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(bf16x16(_mm256_loadu_si256((const __m256i *)(x + i))),
                               bf16x16(_mm256_loadu_si256((const __m256i *)(y + i))), acc0);
        acc1 = _mm512_fmadd_ps(bf16x16(_mm256_loadu_si256((const __m256i *)(x + i + 16))),
                               bf16x16(_mm256_loadu_si256((const __m256i *)(y + i + 16))), acc1);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        acc0 = _mm512_fmadd_ps(bf16x16(_mm256_maskz_loadu_epi16(m, x + i)), bf16x16(_mm256_maskz_loadu_epi16(m, y + i)), acc0);
    }
    *out = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

/* With AVX512_BF16: 32 products per vdpbf16ps, two per F32 lane. */
static void dot_bf16_dp(int64_t n, float *out, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        acc0 = _mm512_dpbf16_ps(acc0, (__m512bh)_mm512_loadu_si512(x + i), (__m512bh)_mm512_loadu_si512(y + i));
        acc1 = _mm512_dpbf16_ps(acc1, (__m512bh)_mm512_loadu_si512(x + i + 32), (__m512bh)_mm512_loadu_si512(y + i + 32));
        acc2 = _mm512_dpbf16_ps(acc2, (__m512bh)_mm512_loadu_si512(x + i + 64), (__m512bh)_mm512_loadu_si512(y + i + 64));
        acc3 = _mm512_dpbf16_ps(acc3, (__m512bh)_mm512_loadu_si512(x + i + 96), (__m512bh)_mm512_loadu_si512(y + i + 96));
    }
    for (; i < n; i += 32) {   /* masked-off elements are +0.0 */
        const __mmask32 m = n - i >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (n - i)) - 1);
        acc0 = _mm512_dpbf16_ps(acc0, (__m512bh)_mm512_maskz_loadu_epi16(m, x + i), (__m512bh)_mm512_maskz_loadu_epi16(m, y + i));
    }
    *out = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

/* ---- Q4_1 and Q5_1 against Q8_1 (LANES plus the fused min term) ---------------------- */
/* Both weight blocks start with fp16 d, m and the activation block with fp16
 * d, s. Converting those one at a time (and broadcasting each d) kept port 5
 * busier than the dot products do, and copying them to the stack for one
 * vector conversion made every 8 blocks wait for the copy's stores to retire
 * behind the FMA chain (the vector load cannot take them from the store
 * buffer); so 8 blocks' header words are gathered and converted at once. */

enum { HDR_BLOCKS = 8 };

/* The 4-bit values of two blocks in element order: block 0's elements 0-31
 * (low nibbles, then high) in bytes 0-31, block 1's in bytes 32-63. */
static inline __m512i nibbles2(const uint8_t qs0[16], const uint8_t qs1[16]) {
    __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qs0));
    v = _mm512_mask_broadcast_i32x4(v, 0xff00, _mm_loadu_si128((const __m128i *)qs1));
    const __m512i sh = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    return _mm512_and_si512(_mm512_srlv_epi64(v, sh), _mm512_set1_epi8(0x0f));
}

static inline __m256i nibbles1(const uint8_t qs[16]) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(b), _mm_srli_epi16(b, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

static inline uint32_t load_u32(const uint8_t p[4]) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Q4_1 (has_qh false: qs at byte 4) or Q5_1 (qh at byte 4, qs at 8): every
 * value q in 0..31 is unsigned and the activations signed, so vpdpbusd takes
 * them as they are. The floor is ref's order itself: one dependent FMA per
 * block into acc (and one into mins), ~1.1x away at n = 4096. */
static inline __attribute__((always_inline)) float dot_x_1(int64_t nb, const uint8_t *x, size_t xstride, bool has_qh, const brisk_block_q8_1 *y) {
    const size_t qs_off = has_qh ? 8 : 4;
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    float xf[2 * HDR_BLOCKS], yf[2 * HDR_BLOCKS], d[2 * HDR_BLOCKS];   /* lane 2j: block j's d, 2j+1: m or s */
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    const __m256i steps = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i xoff = _mm256_mullo_epi32(steps, _mm256_set1_epi32((int)xstride));
    const __m256i yoff = _mm256_mullo_epi32(steps, _mm256_set1_epi32((int)sizeof *y));
    for (int64_t i = 0; i < nb; i += HDR_BLOCKS) {
        /* the first 4 bytes of each block; blocks past the row are masked off, not read */
        const __mmask8 live = nb - i >= HDR_BLOCKS ? (__mmask8)0xff : (__mmask8)((1u << (nb - i)) - 1);
        const __m256i xh = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), live, xoff, x + (size_t)i * xstride, 1);
        const __m256i yh = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), live, yoff, (const uint8_t *)(y + i), 1);
        const __m512 xv = _mm512_cvtph_ps(xh), yv = _mm512_cvtph_ps(yh);
        _mm512_storeu_ps(xf, xv);
        _mm512_storeu_ps(yf, yv);
        _mm512_storeu_ps(d, _mm512_mul_ps(xv, yv));
        const int64_t count = nb - i < HDR_BLOCKS ? nb - i : HDR_BLOCKS;
        int64_t j = 0;
        for (; j + 2 <= count; j += 2) {
            const uint8_t *x0 = x + (size_t)(i + j) * xstride, *x1 = x0 + xstride;
            const brisk_block_q8_1 *y0 = y + i + j;
            __m512i q = nibbles2(x0 + qs_off, x1 + qs_off);
            if (has_qh) {   /* qh bit k is element k's 5th bit, and the bytes are in element order */
                const __mmask64 hi = _cvtu64_mask64(load_u32(x0 + 4) | (uint64_t)load_u32(x1 + 4) << 32);
                q = _mm512_mask_add_epi8(q, hi, q, bit4);
            }
            /* block 1's activations: a load ending at its qs's end, masked to them */
            const uint8_t *y1_qs_end = (const uint8_t *)(y0 + 1) + offsetof(brisk_block_q8_1, qs) + 32;
            const __m512i yv2 = _mm512_mask_loadu_epi64(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y0[0].qs)), 0xf0,
                                                        y1_qs_end - 64);
            const __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, yv2));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d[2 * j]), _mm512_castps512_ps256(f), acc);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d[2 * j + 2]), _mm512_extractf32x8_ps(f, 1), acc);
            mins = fmaf(xf[2 * j + 1], yf[2 * j + 1], mins);
            mins = fmaf(xf[2 * j + 3], yf[2 * j + 3], mins);
        }
        if (j < count) {
            const uint8_t *x0 = x + (size_t)(i + j) * xstride;
            __m256i q = nibbles1(x0 + qs_off);
            if (has_qh) q = _mm256_mask_add_epi8(q, _cvtu32_mask32(load_u32(x0 + 4)), q, _mm512_castsi512_si256(bit4));
            const __m256i lanes = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, _mm256_loadu_si256((const __m256i *)y[i + j].qs));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d[2 * j]), _mm256_cvtepi32_ps(lanes), acc);
            mins = fmaf(xf[2 * j + 1], yf[2 * j + 1], mins);
        }
    }
    return hsum8(acc) + mins;
}

static void dot_q4_1(int64_t n, float *out, const void *w, const void *a) {
    *out = dot_x_1(n / 32, w, sizeof(brisk_block_q4_1), false, a);
}

static void dot_q5_1(int64_t n, float *out, const void *w, const void *a) {
    *out = dot_x_1(n / 32, w, sizeof(brisk_block_q5_1), true, a);
}

/* ---- K formats against Q8_K -------------------------------------------------------------- */

/* Q2_K: 64 elements of half h, bit pairs s and s+1 of its 32 qs bytes, i.e.
 * four 16-element sub-blocks starting at 8h + 2s; q in 0..3 and |q8| <= 128,
 * so vpmaddubsw's pair sums do not saturate. */
static inline __m512i q2_k_quarter(__m512i sum, __m512i bits, const int8_t *q8, __m512i sc16, int h, int s) {
    const __m512i p = _mm512_maddubs_epi16(fields(bits, 2 * s, 2 * s + 2, 3), _mm512_loadu_si512(q8 + 128 * h + 32 * s));
    return _mm512_dpwssd_epi32(sum, p, spread16(sc16, 8 * h + 2 * s, 8));
}

/* SCALAR per 128-element half, with a separate min accumulator. */
static void dot_q2_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q2_k *x = w;
    const brisk_block_q8_k *y = a;
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(sc8, _mm_set1_epi8(0x0f))));
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0f)));
        const __m512i bits0 = dup256(x[i].qs), bits1 = dup256(x[i].qs + 32);
        const __m512i sum0 = q2_k_quarter(q2_k_quarter(_mm512_setzero_si512(), bits0, y[i].qs, sc16, 0, 0), bits0, y[i].qs, sc16, 0, 2);
        const __m512i sum1 = q2_k_quarter(q2_k_quarter(_mm512_setzero_si512(), bits1, y[i].qs, sc16, 1, 0), bits1, y[i].qs, sc16, 1, 2);
        /* min products m_j * bsums[j]: lanes 0-3 are half 0's, 4-7 half 1's */
        const __m256i mins = _mm256_madd_epi16(m16, _mm256_loadu_si256((const __m256i *)y[i].bsums));
        const __m256i s0 = _mm256_add_epi32(_mm512_castsi512_si256(sum0), _mm512_extracti64x4_epi64(sum0, 1));
        const __m256i s1 = _mm256_add_epi32(_mm512_castsi512_si256(sum1), _mm512_extracti64x4_epi64(sum1, 1));
        const __m128i r0 = _mm_add_epi32(_mm256_castsi256_si128(s0), _mm256_extracti128_si256(s0, 1));
        const __m128i r1 = _mm_add_epi32(_mm256_castsi256_si128(s1), _mm256_extracti128_si256(s1, 1));
        const __m128i hs = _mm_hadd_epi32(r0, r1), hm = _mm_hadd_epi32(_mm256_castsi256_si128(mins), _mm256_extracti128_si256(mins, 1));
        int32_t t[4];   /* isum half 0, half 1, imin half 0, half 1 */
        _mm_storeu_si128((__m128i *)t, _mm_hadd_epi32(hs, hm));
        const float dall = fp16_to_f32(x[i].d) * y[i].d;
        const float dmin = fp16_to_f32(x[i].dmin) * y[i].d;
        acc = fmaf((float)t[0], dall, acc);
        acc_min = fmaf((float)t[2], dmin, acc_min);
        acc = fmaf((float)t[1], dall, acc);
        acc_min = fmaf((float)t[3], dmin, acc_min);
    }
    *out = acc - acc_min;
}

/* The 16 signed scales of a Q3_K block as int16 (brisk_q3_k_scales, bytewise
 * in two 64-bit words: low nibbles from bytes 0-7, high bit pairs from 8-11). */
static inline __m512i q3_k_scales16(const uint8_t packed[12]) {
    uint64_t lo;
    uint32_t hi;
    memcpy(&lo, packed, sizeof lo);
    memcpy(&hi, packed + 8, sizeof hi);
    const uint64_t m4 = 0x0f0f0f0f0f0f0f0full, m2 = 0x03030303u;
    const uint64_t h0 = (hi & m2) | (uint64_t)((hi >> 2) & m2) << 32;   /* sub-blocks 0-7 */
    const uint64_t h1 = ((hi >> 4) & m2) | (uint64_t)((hi >> 6) & m2) << 32;   /* 8-15 */
    const __m128i s = _mm_set_epi64x((long long)(((lo >> 4) & m4) | h1 << 4), (long long)((lo & m4) | h0 << 4));
    return _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_sub_epi8(s, _mm_set1_epi8(32))));
}

/* Q3_K: elements 128h + 32s .. + 63 (bit pairs s and s+1; the high bit set
 * means no -4), groups 4h + s and 4h + s + 1. (u - 4) * y is taken as
 * u*y - 4*y with u in 0..7, so neither vpmaddubsw saturates. */
static inline __m512i q3_k_part(__m512i sum, __m512i bits, __m512i hm, const int8_t *q8, __m512i sc16, int h, int s) {
    const __m512i four = _mm512_set1_epi8(4);
    __m512i u = fields(bits, 2 * s, 2 * s + 2, 3);
    u = _mm512_mask_add_epi8(u, bit_mask(hm, 4 * h + s, 4 * h + s + 1), u, four);
    const __m512i yv = _mm512_loadu_si512(q8 + 128 * h + 32 * s);
    const __m512i p = _mm512_sub_epi16(_mm512_maddubs_epi16(u, yv), _mm512_maddubs_epi16(four, yv));
    return _mm512_dpwssd_epi32(sum, p, spread16(sc16, 8 * h + 2 * s, 8));
}

/* LANES over the block's eight 32-element groups, two per zmm; lane m of a
 * group is scaled by its 16-element sub-block's signed scale. */
static void dot_q3_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q3_k *x = w;
    const brisk_block_q8_k *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK; i++) {
        const __m512i sc16 = q3_k_scales16(x[i].scales);
        const __m512i hm = dup256(x[i].hmask), bits0 = dup256(x[i].qs), bits1 = dup256(x[i].qs + 32);
        const int8_t *q8 = y[i].qs;
        __m512i sum0 = q3_k_part(_mm512_setzero_si512(), bits0, hm, q8, sc16, 0, 0);
        __m512i sum1 = q3_k_part(_mm512_setzero_si512(), bits0, hm, q8, sc16, 0, 2);
        sum0 = q3_k_part(sum0, bits1, hm, q8, sc16, 1, 0);
        sum1 = q3_k_part(sum1, bits1, hm, q8, sc16, 1, 2);
        const __m512i sum = _mm512_add_epi32(sum0, sum1);
        const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * fp16_to_f32(x[i].d)), _mm256_cvtepi32_ps(lanes), acc);
    }
    *out = hsum8(acc);
}

/* The 6-bit scales (bytes 0-7) and mins (bytes 8-15) of a Q4_K/Q5_K block
 * (brisk_k4_scale_min, four sub-blocks per 32-bit word p0..p2 of the packed
 * bytes): scales 0-3 = p0 & 63, 4-7 = p2's low nibbles | p0's top bit pairs
 * << 4; mins 0-3 = p1 & 63, 4-7 = p2's high nibbles | p1's top bit pairs << 4.
 * Reads 16 bytes from packed (the block's next field follows the scales). */
static inline __m128i k4_scales_mins(const uint8_t *packed) {
    const __m128i p = _mm_loadu_si128((const __m128i *)packed);
    const __m128i lo_src = _mm_shuffle_epi32(p, 0x98);   /* p0, p2, p1, p2 */
    const __m128i hi_src = _mm_shuffle_epi32(p, 0x50);   /* p0, p0, p1, p1 */
    const __m128i lo = _mm_and_si128(_mm_srlv_epi32(lo_src, _mm_setr_epi32(0, 0, 0, 4)),
                                     _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m128i hi = _mm_and_si128(_mm_srli_epi32(hi_src, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(lo, hi);
}

/* Q5_K: one 64-element chunk c, the low nibbles of its 32 qs bytes (group
 * 2c), then the high (group 2c+1); q in 0..31, so vpmaddubsw's pair sums
 * (at most 31 * 128 * 2) do not saturate. */
static inline __m512i q5_k_chunk(__m512i sum, const uint8_t *qs, __m512i qh, const int8_t *q8, __m512i sc16, int c) {
    __m512i q = fields(dup256(qs + 32 * c), 0, 4, 0x0f);
    q = _mm512_mask_add_epi8(q, bit_mask(qh, 2 * c, 2 * c + 1), q, _mm512_set1_epi8(0x10));
    const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(q8 + 64 * c));
    return _mm512_dpwssd_epi32(sum, p, spread16(sc16, 2 * c, 16));
}

/* LANES, one scale per 32-element group; the fused min term joins after the hsum. */
static void dot_q5_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q5_k *x = w;
    const brisk_block_q8_k *y = a;
    const __m128i dup_mins = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        const __m128i sm = k4_scales_mins(x[i].scales);
        /* summ = sum_j m_j * (bsums[2j] + bsums[2j+1]) */
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, dup_mins));
        const int summ = hsum8_epi32(_mm256_madd_epi16(m16, _mm256_loadu_si256((const __m256i *)y[i].bsums)));
        mins = fmaf(-y[i].d * fp16_to_f32(x[i].dmin), (float)summ, mins);
        const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));
        const __m512i qh = dup256(x[i].qh);
        const __m512i sum0 = q5_k_chunk(q5_k_chunk(_mm512_setzero_si512(), x[i].qs, qh, y[i].qs, sc16, 0), x[i].qs, qh, y[i].qs, sc16, 2);
        const __m512i sum1 = q5_k_chunk(q5_k_chunk(_mm512_setzero_si512(), x[i].qs, qh, y[i].qs, sc16, 1), x[i].qs, qh, y[i].qs, sc16, 3);
        const __m512i sum = _mm512_add_epi32(sum0, sum1);
        const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * fp16_to_f32(x[i].d)), _mm256_cvtepi32_ps(lanes), acc);
    }
    *out = hsum8(acc) + mins;
}

/* ---- the table -------------------------------------------------------------------------- */

static brisk_kernels avx512_table;
static pthread_once_t avx512_once = PTHREAD_ONCE_INIT;

static void avx512_table_init(void) {
    avx512_table = *brisk_kernels_avx2();
    avx512_table.isa = "avx512";
    avx512_table.vec_dot[BRISK_Q_F32] = dot_f32;
    avx512_table.vec_dot[BRISK_Q_BF16] = brisk_cpu_features_get()->avx512bf16 ? dot_bf16_dp : dot_bf16_widen;
    avx512_table.vec_dot[BRISK_Q_Q4_1] = dot_q4_1;
    avx512_table.vec_dot[BRISK_Q_Q5_1] = dot_q5_1;
    avx512_table.vec_dot[BRISK_Q_Q2_K] = dot_q2_k;
    avx512_table.vec_dot[BRISK_Q_Q3_K] = dot_q3_k;
    avx512_table.vec_dot[BRISK_Q_Q5_K] = dot_q5_k;
    avx512_table.vec_dot[BRISK_Q_IQ4_NL] = brisk_avx512_dot_iq4_nl;   /* avx512_lut4.c */
    avx512_table.vec_dot[BRISK_Q_IQ4_XS] = brisk_avx512_dot_iq4_xs;
    avx512_table.vec_dot[BRISK_Q_MXFP4] = brisk_avx512_dot_mxfp4;
}

const brisk_kernels *brisk_kernels_avx512(void) {
    pthread_once(&avx512_once, avx512_table_init);
    return &avx512_table;
}
