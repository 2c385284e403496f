/* avx2_kernels: the x86-64 AVX2 (+FMA, F16C) kernel table.
 *
 * Same contracts as ref.c, and the same bits: each quantized kernel follows
 * the reduction order ref.c documents (LANES: 8 int32 lanes of 4 adjacent
 * products per 32-byte group, one FMA accumulator per lane, hsum at the end;
 * SCALAR: one int32 sum per block or block group, fused into a single float
 * accumulator in order). tests/test_kernels.c checks that this table returns
 * exactly what ref returns.
 *
 * Activations are quantized the way ggml's CPU backend does on x86 with AVX
 * (brisk_q8_0_quantize_x86: scale 127/amax, ties to even), as in ref. */
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/convert.h"
#include "ops/ops.h"
#include "kernels/x86_expf.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define QK BRISK_QK_K

/* ---- helpers -------------------------------------------------------------------- */

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float fp16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* u8 x s8 products summed in pairs (int16), then pairs of those (int32 x 8).
 * No saturation: callers keep u <= 128 and |s| <= 127, so |pair| <= 32512. */
static inline __m256i dot_u8_s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* s8 x s8, through |x| and y with x's sign (y never -128: activations are
 * quantized to [-127, 127]). */
static inline __m256i dot_s8_s8(__m256i x, __m256i y) {
    return dot_u8_s8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* 16 bytes of packed nibbles -> 32 bytes: low nibbles first, then high. */
static inline __m256i unpack_nibbles16(const uint8_t *p) {
    const __m128i b = _mm_loadu_si128((const __m128i *)p);
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(b), _mm_srli_epi16(b, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* Bit j of bits -> byte j = 0xff or 0x00, for j in 0..31. */
static inline __m256i expand_bits32(uint32_t bits) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
}

/* int16 x 16 lanes times two scales (lanes 0-7 by lo, 8-15 by hi), pair-summed
 * to int32 x 8. */
static inline __m256i scale_pairs(__m256i p16, int lo, int hi) {
    const __m256i sc = _mm256_setr_m128i(_mm_set1_epi16((short)lo), _mm_set1_epi16((short)hi));
    return _mm256_madd_epi16(p16, sc);
}

/* ---- float formats -------------------------------------------------------------- */

static void dot_f32(int64_t n, float *out, const void *w, const void *a) {
    const float *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k), _mm256_loadu_ps(y + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc[0]);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += x[i] * y[i];
    *out = sum;
}

/* ref's 16-lane order: lanes 0-7 of each 16-element step in lo, 8-15 in hi
 * (one chain each; the F16 products are exact, so the FMA rounds like ref's
 * fmaf), a scalar tail into lane i % 16, then ref's halving sum. */
static void dot_f16(int64_t n, float *out, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        lo = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))),
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i))), lo);
        hi = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 8))),
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i + 8))), hi);
    }
    if (i < n) {
        float lane[16];
        _mm256_storeu_ps(lane, lo);
        _mm256_storeu_ps(lane + 8, hi);
        for (int l = 0; i < n; i++, l++) lane[l] = fmaf(fp16_to_f32(x[i]), fp16_to_f32(y[i]), lane[l]);
        lo = _mm256_loadu_ps(lane);
        hi = _mm256_loadu_ps(lane + 8);
    }
    *out = hsum_ps(_mm256_add_ps(lo, hi));
}

static inline __m256 load_bf16x8(const uint16_t *p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

static void dot_bf16(int64_t n, float *out, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(load_bf16x8(x + i + 8 * k), load_bf16x8(y + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load_bf16x8(x + i), load_bf16x8(y + i), acc[0]);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += brisk_bf16_to_fp32(x[i]) * brisk_bf16_to_fp32(y[i]);
    *out = sum;
}

/* ---- 32-element formats ------------------------------------------------------------ */

static inline __m256 q8_0_block(const brisk_block_q8_0 *x, const brisk_block_q8_0 *y, __m256 acc) {
    const __m256i xv = _mm256_loadu_si256((const __m256i *)x->qs);
    const __m256i yv = _mm256_loadu_si256((const __m256i *)y->qs);
    const __m256 d = _mm256_set1_ps(fp16_to_f32(x->d) * fp16_to_f32(y->d));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_s8_s8(xv, yv)), acc);
}

static void dot_q8_0(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q8_0 *x = w, *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) acc = q8_0_block(&x[i], &y[i], acc);
    *out = hsum_ps(acc);
}

/* SCALAR: the block's integer dot, then one fused multiply-add per block. */
static void dot_q4_0(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q4_0 *x = w;
    const brisk_block_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256i q = _mm256_sub_epi8(unpack_nibbles16(x[i].qs), _mm256_set1_epi8(8));
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const float d = fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d);
        sum = fmaf((float)hsum_epi32(dot_s8_s8(q, yv)), d, sum);
    }
    *out = sum;
}

static void dot_q4_1(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q4_1 *x = w;
    const brisk_block_q8_1 *y = a;
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256i q = unpack_nibbles16(x[i].qs);
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256 d = _mm256_set1_ps(fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8_s8(q, yv)), acc);
        mins = fmaf(fp16_to_f32(x[i].m), fp16_to_f32(y[i].s), mins);
    }
    *out = hsum_ps(acc) + mins;
}

static inline __m256i q5_values(const uint8_t qs[16], const uint8_t qh[4]) {
    uint32_t bits;
    memcpy(&bits, qh, sizeof bits);
    const __m256i high = _mm256_and_si256(expand_bits32(bits), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(unpack_nibbles16(qs), high);
}

static void dot_q5_0(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q5_0 *x = w;
    const brisk_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256i q = _mm256_sub_epi8(q5_values(x[i].qs, x[i].qh), _mm256_set1_epi8(16));
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256 d = _mm256_set1_ps(fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_s8_s8(q, yv)), acc);
    }
    *out = hsum_ps(acc);
}

static void dot_q5_1(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q5_1 *x = w;
    const brisk_block_q8_1 *y = a;
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256i q = q5_values(x[i].qs, x[i].qh);
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256 d = _mm256_set1_ps(fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8_s8(q, yv)), acc);
        mins = fmaf(fp16_to_f32(x[i].m), fp16_to_f32(y[i].s), mins);
    }
    *out = hsum_ps(acc) + mins;
}

/* ---- K formats ------------------------------------------------------------------------ */

/* SCALAR per 128-element half, with a separate min accumulator. */
static void dot_q2_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q2_k *x = w;
    const brisk_block_q8_k *y = a;
    const __m256i mask2 = _mm256_set1_epi8(3);
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        const uint8_t *sc = x[i].scales;
        const float dall = fp16_to_f32(x[i].d) * y[i].d;
        const float dmin = fp16_to_f32(x[i].dmin) * y[i].d;
        const int8_t *q8 = y[i].qs;
        for (int h = 0; h < 2; h++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            __m256i sumi = _mm256_setzero_si256();
            for (int s = 0; s < 4; s++, q8 += 32) {
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), mask2);
                const __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8));
                const int j = 8 * h + 2 * s;
                sumi = _mm256_add_epi32(sumi, scale_pairs(p, sc[j] & 0x0f, sc[j + 1] & 0x0f));
            }
            int imin = 0;
            for (int j = 8 * h; j < 8 * h + 8; j++) imin += (sc[j] >> 4) * y[i].bsums[j];
            acc = fmaf((float)hsum_epi32(sumi), dall, acc);
            acc_min = fmaf((float)imin, dmin, acc_min);
        }
    }
    *out = acc - acc_min;
}

static void dot_q3_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q3_k *x = w;
    const brisk_block_q8_k *y = a;
    const __m256i mask2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    __m256 acc = _mm256_setzero_ps();
    int8_t sc[16];
    for (int64_t i = 0; i < n / QK; i++) {
        brisk_q3_k_scales(x[i].scales, sc);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        __m256i sumi = _mm256_setzero_si256();
        const int8_t *q8 = y[i].qs;
        for (int h = 0; h < 2; h++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            for (int s = 0; s < 4; s++, q8 += 32) {
                /* q + 4 = low 2 bits + 4 * high bit, in 0..7 */
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), mask2);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + s), one);
                const __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
                const __m256i yv = _mm256_loadu_si256((const __m256i *)q8);
                const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, yv), _mm256_maddubs_epi16(four, yv));
                const int j = 8 * h + 2 * s;
                sumi = _mm256_add_epi32(sumi, scale_pairs(p, sc[j], sc[j + 1]));
            }
        }
        const float d = fp16_to_f32(x[i].d) * y[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *out = hsum_ps(acc);
}

/* Q4_K and Q5_K after the 4/5-bit values of chunk c (64 elements) are in
 * lo (elements 64c..64c+31) and hi (64c+32..64c+63). */
static inline __m256i k4_chunk(__m256i lo, __m256i hi, const int8_t *q8, int sc_lo, int sc_hi) {
    const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)q8));
    const __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 32)));
    return _mm256_add_epi32(_mm256_madd_epi16(p_lo, _mm256_set1_epi16((short)sc_lo)),
                            _mm256_madd_epi16(p_hi, _mm256_set1_epi16((short)sc_hi)));
}

/* The min term of a Q4_K/Q5_K block: sum over sub-blocks of m * sum(q8). */
static inline int k4_scales(const uint8_t packed[12], const int16_t bsums[16], uint8_t scales[8]) {
    int summ = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t m;
        brisk_k4_scale_min(j, packed, &scales[j], &m);
        summ += (bsums[2 * j] + bsums[2 * j + 1]) * m;
    }
    return summ;
}

/* SCALAR per 64-element pair of sub-blocks, with a separate min accumulator. */
static void dot_q4_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q4_k *x = w;
    const brisk_block_q8_k *y = a;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    float acc = 0.0f, acc_min = 0.0f;
    uint8_t sc[8], m[8];
    for (int64_t i = 0; i < n / QK; i++) {
        for (int j = 0; j < 8; j++) brisk_k4_scale_min(j, x[i].scales, &sc[j], &m[j]);
        const float d = fp16_to_f32(x[i].d) * y[i].d;
        const float dmin = fp16_to_f32(x[i].dmin) * y[i].d;
        const int16_t *bs = y[i].bsums;
        for (int c = 0; c < 4; c++) {
            const __m256i bytes = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            const __m256i lo = _mm256_and_si256(bytes, low4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
            const int isum = hsum_epi32(k4_chunk(lo, hi, y[i].qs + 64 * c, sc[2 * c], sc[2 * c + 1]));
            const int imin = m[2 * c] * (bs[4 * c] + bs[4 * c + 1]) + m[2 * c + 1] * (bs[4 * c + 2] + bs[4 * c + 3]);
            acc = fmaf((float)isum, d, acc);
            acc_min = fmaf((float)imin, dmin, acc_min);
        }
    }
    *out = acc - acc_min;
}

/* LANES, one scale per 32-element group; the fused min term joins after the hsum. */
static void dot_q5_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q5_k *x = w;
    const brisk_block_q8_k *y = a;
    const __m256i low4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    uint8_t sc[8];
    for (int64_t i = 0; i < n / QK; i++) {
        const int summ = k4_scales(x[i].scales, y[i].bsums, sc);
        mins = fmaf(-y[i].d * fp16_to_f32(x[i].dmin), (float)summ, mins);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i bytes = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            const __m256i h_lo = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
            const __m256i h_hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(bytes, low4), _mm256_slli_epi16(h_lo, 4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4),
                                               _mm256_slli_epi16(h_hi, 4));
            sumi = _mm256_add_epi32(sumi, k4_chunk(lo, hi, y[i].qs + 64 * c, sc[2 * c], sc[2 * c + 1]));
        }
        const float d = y[i].d * fp16_to_f32(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *out = hsum_ps(acc) + mins;
}

/* LANES on the unsigned values 0..63; the -32 offset comes off per lane
 * through the bsums, as ref.c describes. */
static void dot_q6_k(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_q6_k *x = w;
    const brisk_block_q8_k *y = a;
    const __m256i low4 = _mm256_set1_epi8(0x0f), mask2 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK; i++) {
        const int8_t *sc = x[i].scales;
        const int8_t *q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            /* the four 32-element groups of this half, q in 0..63 (value q - 32) */
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, mask2), 4)),
                _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), mask2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), mask2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), mask2), 4)),
            };
            for (int g = 0; g < 4; g++, q8 += 32) {
                const __m256i yv = _mm256_loadu_si256((const __m256i *)q8);
                const __m256i p = _mm256_maddubs_epi16(q[g], yv);
                const int j = 8 * h + 2 * g;
                sumi = _mm256_add_epi32(sumi, scale_pairs(p, sc[j], sc[j + 1]));
            }
        }
        /* the -32 offset, lane l: 32 * (bsums[2l]*sc[2l] + bsums[2l+1]*sc[2l+1]) */
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5));
        const float d = y[i].d * fp16_to_f32(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *out = hsum_ps(acc);
}

/* ---- the table -------------------------------------------------------------------------- */

/* brisk_expf on 8 floats, two halves of 4 double lanes: the same fused and
 * unfused double operations in the same order as brisk_expf_core, the
 * 2^(k/32) table through a gather. Lanes outside the main path (|x| >= 88,
 * NaN) come back as bits in *special for the caller to redo with the scalar
 * function (their vector result is garbage). */
static inline __attribute__((always_inline)) __m128 exp4(__m128 xs) {
    const __m256d inv = _mm256_set1_pd(BRISK_EXPF_INV_LN2_N), shift = _mm256_set1_pd(BRISK_EXPF_SHIFT);
    const __m256d xd = _mm256_cvtps_pd(xs);
    const __m256d z = _mm256_fmadd_pd(inv, xd, shift);
    const __m256d kd = _mm256_sub_pd(z, shift);
    const __m256d r = _mm256_fmsub_pd(inv, xd, kd);
    const __m256i zi = _mm256_castpd_si256(z);
    const __m256i t = _mm256_i64gather_epi64((const long long *)(const void *)brisk_exp2_table, _mm256_and_si256(zi, _mm256_set1_epi64x(31)), 8);
    const __m256d sc = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(zi, 47)));
    const __m256d p = _mm256_fmadd_pd(_mm256_set1_pd(BRISK_EXPF_C0), r, _mm256_set1_pd(BRISK_EXPF_C1));
    const __m256d y = _mm256_fmadd_pd(p, _mm256_mul_pd(r, r), _mm256_fmadd_pd(_mm256_set1_pd(BRISK_EXPF_C2), r, _mm256_set1_pd(1.0)));
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, sc));
}

static inline __attribute__((always_inline)) __m256 exp8(__m256 xs, int *special) {
    const __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(xs), 20), _mm256_set1_epi32(0x7ff));
    *special = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(top, _mm256_set1_epi32(0x42a))));
    return _mm256_set_m128(exp4(_mm256_extractf128_ps(xs, 1)), exp4(_mm256_castps256_ps128(xs)));
}

/* brisk_exp_sub: the sum's eight partials are two vectors of 4 doubles
 * (entry i in lane i % 8), combined by brisk_sum8_combine */
static double exp_sub(float *x, int64_t n, float m) {
    const __m256 mv = _mm256_set1_ps(m);
    __m256d acc_lo = _mm256_setzero_pd(), acc_hi = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int special;
        const __m256 xs = _mm256_sub_ps(_mm256_loadu_ps(x + i), mv);
        const __m256 e8 = exp8(xs, &special);
        const __m256 e = brisk_exp8_fix_special(xs, e8, (unsigned)special);
        _mm256_storeu_ps(x + i, e);
        acc_lo = _mm256_add_pd(acc_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        acc_hi = _mm256_add_pd(acc_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double p[8];
    _mm256_storeu_pd(p, acc_lo);
    _mm256_storeu_pd(p + 4, acc_hi);
    for (; i < n; i++) {
        x[i] = brisk_expf(x[i] - m);
        p[i % 8] += x[i];
    }
    return brisk_sum8_combine(p);
}

/* g / (1 + e^-g) * u in float, e^-g by exp8: the scalar expression's three roundings. */
static void swiglu(float *h, const float *g, const float *u, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int special;
        const __m256 gv = _mm256_loadu_ps(g + i);
        const __m256 e = exp8(_mm256_xor_ps(gv, sign), &special);
        brisk_swiglu8_store(h + i, g + i, u + i, gv, e, (unsigned)special);
    }
    for (; i < n; i++) h[i] = g[i] / (1.0f + brisk_expf(-g[i])) * u[i];
}

/* The avx2 and avx2-vnni tables share every kernel: AVX-VNNI pays off in the
 * packed GEMM (avx2_vnni_gemm.c), which the forward pass prefers to these. */
/* ---- activation quantizers ------------------------------------------------------------ */

/* brisk_q8_k_quantize 8 lanes at a time (the activations of every K-quant GEMM: the AVX2 and
 * AVX-512 tables take it; at decode the scalar function was 1.2% of a Q4_K_M token on
 * llama-3.2-1b, the other thread waiting): amax exact in any order; max is the first element
 * of magnitude amax (ref's tie rule), found by a compare scan; iscale = -127/max and
 * d = 1/iscale stay scalar; vcvtps2dq rounds to nearest even like brisk_round_even, capped
 * at 127 (vpminsd: the same as ref's BRISK_MIN); bsums as exact integer sums. Blocks with a
 * NaN or a non-finite amax take the scalar function; an all-zero block is all zeros, as there. */
void brisk_avx2_q8_k_quantize(const float *src, void *dst, int64_t n) {
    brisk_block_q8_k *b = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7), cap = _mm256_set1_epi32(127);
    for (int64_t i = 0; i < n / BRISK_QK_K; i++) {
        const float *x = src + (size_t)i * BRISK_QK_K;
        __m256 m = _mm256_setzero_ps();
        int bad = 0;
        for (int k = 0; k < BRISK_QK_K / 8; k++) {
            const __m256 v = _mm256_loadu_ps(x + 8 * k);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v));
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (bad || !(amax <= 3.402823466e38f)) {
            brisk_q8_k_quantize(x, &b[i], BRISK_QK_K);
            continue;
        }
        if (!amax) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        float max = amax;
        const __m256 av = _mm256_set1_ps(amax);
        for (int k = 0; k < BRISK_QK_K / 8; k++) {
            const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)), av, _CMP_EQ_OQ));
            if (eq) {
                max = x[8 * k + __builtin_ctz((unsigned)eq)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 iv = _mm256_set1_ps(iscale);
        for (int g = 0; g < BRISK_QK_K / 32; g++) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * k), iv)), cap);
            const __m256i p = _mm256_permutevar8x32_epi32(
                _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])), order);
            _mm256_storeu_si256((__m256i *)(b[i].qs + 32 * g), p);
            /* sums of 4, then of 16: dwords 0-3 are elements 0-15 of this group of 32 */
            __m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(1));
            s4 = _mm256_hadd_epi32(s4, s4);
            s4 = _mm256_hadd_epi32(s4, s4);
            b[i].bsums[2 * g] = (int16_t)_mm256_cvtsi256_si32(s4);
            b[i].bsums[2 * g + 1] = (int16_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(s4, 1));
        }
        b[i].d = 1 / iscale;
    }
}

#define AVX2_TABLE_ENTRIES \
    .exp_sub = exp_sub, \
    .swiglu = swiglu, \
    .vec_dot = { \
        [BRISK_Q_F32] = dot_f32, \
        [BRISK_Q_F16] = dot_f16, \
        [BRISK_Q_BF16] = dot_bf16, \
        [BRISK_Q_Q4_0] = dot_q4_0, \
        [BRISK_Q_Q4_1] = dot_q4_1, \
        [BRISK_Q_Q5_0] = dot_q5_0, \
        [BRISK_Q_Q5_1] = dot_q5_1, \
        [BRISK_Q_Q8_0] = dot_q8_0, \
        [BRISK_Q_Q2_K] = dot_q2_k, \
        [BRISK_Q_Q3_K] = dot_q3_k, \
        [BRISK_Q_Q4_K] = dot_q4_k, \
        [BRISK_Q_Q5_K] = dot_q5_k, \
        [BRISK_Q_Q6_K] = dot_q6_k, \
        [BRISK_Q_IQ4_NL] = brisk_avx2_dot_iq4_nl, \
        [BRISK_Q_IQ4_XS] = brisk_avx2_dot_iq4_xs, \
        [BRISK_Q_MXFP4] = brisk_avx2_dot_mxfp4, \
    }, \
    .quantize_act = { \
        [BRISK_Q_F32] = brisk_f32_quantize, \
        [BRISK_Q_F16] = brisk_f16_quantize, \
        [BRISK_Q_BF16] = brisk_bf16_quantize, \
        [BRISK_Q_Q8_0] = brisk_q8_0_quantize_x86, \
        [BRISK_Q_Q8_1] = brisk_q8_1_quantize_x86, \
        [BRISK_Q_Q8_K] = brisk_avx2_q8_k_quantize, \
    },

static const brisk_kernels avx2_table = {.isa = "avx2", AVX2_TABLE_ENTRIES};
static const brisk_kernels avx2_vnni_table = {.isa = "avx2-vnni", AVX2_TABLE_ENTRIES};

const brisk_kernels *brisk_kernels_avx2(void) { return &avx2_table; }
const brisk_kernels *brisk_kernels_avx2_vnni(void) { return &avx2_vnni_table; }
