/* avx512_lut4: AVX-512 (BW + VNNI) dot products of the 4-bit lookup-table
 * formats IQ4_NL, MXFP4 (against Q8_0) and IQ4_XS (against Q8_K), for the
 * avx512 table (avx512_kernels.c).
 *
 * Two 32-element blocks per zmm: vpshufb maps the nibbles to their int8
 * table values (the 16-byte table repeated in each 128-bit lane). The values
 * are signed and so are the activations, and AVX-512 has no vpsignb, so the
 * product is taken as |q| times y with q's sign moved onto y (a masked
 * negation; y is never -128), which vpdpbusd and vpmaddubsw take as
 * unsigned times signed. The float work is ref.c's exactly: SCALAR (IQ4_NL
 * and MXFP4: eight blocks' integer sums reduced together, then fused one by
 * one in order; IQ4_XS: one sum per 256 elements). */
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/convert.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

/* The nibbles of two blocks as table indices in element order: block 0's
 * elements 0-31 (low nibbles, then high) in bytes 0-31, block 1's in 32-63. */
static inline __m512i nibbles2(const uint8_t *qs0, const uint8_t *qs1) {
    __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qs0));
    v = _mm512_mask_broadcast_i32x4(v, 0xff00, _mm_loadu_si128((const __m128i *)qs1));
    const __m512i sh = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    return _mm512_and_si512(_mm512_srlv_epi64(v, sh), _mm512_set1_epi8(0x0f));
}

/* |q| (unsigned) and y with q's sign, so that |q| * y' = q * y byte by byte. */
static inline __m512i signed_onto(__m512i q, __m512i y) {
    return _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(q), _mm512_setzero_si512(), y);
}

static inline float lut4_scale(const uint8_t *block, bool mx) {
    if (mx) return brisk_e8m0_half(block[0]);
    uint16_t h;
    memcpy(&h, block, sizeof h);
    return _cvtsh_ss(h);
}

/* 16 int32 lanes: lanes 0-7 the 4-byte groups of block pair's first block, 8-15 of its second. */
static inline __m512i pair_lanes(const uint8_t *b0, const uint8_t *b1, size_t qs_off, __m512i table, const brisk_block_q8_0 *y0,
                                 const brisk_block_q8_0 *y1) {
    const __m512i q = _mm512_shuffle_epi8(table, nibbles2(b0 + qs_off, b1 + qs_off));
    const __m512i yv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y0->qs)),
                                          _mm256_loadu_si256((const __m256i *)y1->qs), 1);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(q), signed_onto(q, yv));
}

/* The 8 block totals of four pair_lanes results (block 2k in r[k]'s low half,
 * 2k+1 in its high half), in block order in the low 256 bits. */
static inline __m256i block_totals8(__m512i r0, __m512i r1, __m512i r2, __m512i r3) {
    /* per 128-bit lane: [r0, r1, r2, r3] each summed over that lane's 4 int32 */
    const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(r0, r1), _mm512_unpackhi_epi32(r0, r1));
    const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(r2, r3), _mm512_unpackhi_epi32(r2, r3));
    const __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    /* 128-bit lanes 0+1 hold blocks 0, 2, 4, 6; lanes 2+3 blocks 1, 3, 5, 7 */
    const __m512i d = _mm512_add_epi32(c, _mm512_shuffle_i64x2(c, c, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 8, 1, 9, 2, 10, 3, 11);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, d));
}

/* SCALAR over nb blocks of IQ4_NL (mx false) or MXFP4 against Q8_0: sum =
 * fma((float)isum, dw * da, sum) block after block. Inlined per format. */
static inline __attribute__((always_inline)) float scalar_lut4(int64_t nb, const uint8_t *x, bool mx, const brisk_block_q8_0 *y) {
    const size_t stride = mx ? sizeof(brisk_block_mxfp4) : sizeof(brisk_block_iq4_nl);
    const size_t qs_off = mx ? offsetof(brisk_block_mxfp4, qs) : offsetof(brisk_block_iq4_nl, qs);
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(mx ? brisk_mxfp4_values : brisk_iq4nl_values)));
    float sum = 0.0f;
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
        __m512i r[4];
        float d[8], f[8];
        for (int k = 0; k < 4; k++) {
            const uint8_t *b0 = x + (size_t)(i + 2 * k) * stride;
            r[k] = pair_lanes(b0, b0 + stride, qs_off, table, &y[i + 2 * k], &y[i + 2 * k + 1]);
        }
        for (int k = 0; k < 8; k++) d[k] = lut4_scale(x + (size_t)(i + k) * stride, mx) * _cvtsh_ss(y[i + k].d);
        _mm256_storeu_ps(f, _mm256_cvtepi32_ps(block_totals8(r[0], r[1], r[2], r[3])));
        for (int k = 0; k < 8; k++) sum = fmaf(f[k], d[k], sum);
    }
    for (; i < nb; i++) {   /* the last nb % 8 blocks one at a time (the same block twice in the zmm; the low half is used) */
        const uint8_t *b = x + (size_t)i * stride;
        const __m512i q = _mm512_shuffle_epi8(table, nibbles2(b + qs_off, b + qs_off));
        const __m512i yv = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y[i].qs));
        const __m512i l = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(q), signed_onto(q, yv));
        const int s = _mm512_mask_reduce_add_epi32(0x00ff, l);
        sum = fmaf((float)s, lut4_scale(b, mx) * _cvtsh_ss(y[i].d), sum);
    }
    return sum;
}

void brisk_avx512_dot_iq4_nl(int64_t n, float *out, const void *w, const void *a) { *out = scalar_lut4(n / 32, w, false, a); }

void brisk_avx512_dot_mxfp4(int64_t n, float *out, const void *w, const void *a) { *out = scalar_lut4(n / 32, w, true, a); }

/* SCALAR per 256-element block: two groups per zmm, their int16 pair sums
 * times each group's scale ls - 32 (vpdpwssd, group 2k's scale in the low
 * 256 bits, 2k+1's in the high), reduced to the block's sum, one fused
 * multiply-add per block. */
void brisk_avx512_dot_iq4_xs(int64_t n, float *out, const void *w, const void *a) {
    const brisk_block_iq4_xs *x = w;
    const brisk_block_q8_k *y = a;
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)brisk_iq4nl_values));
    float sum = 0.0f;
    for (int64_t i = 0; i < n / BRISK_QK_K; i++) {
        __m512i acc = _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) {
            const __m512i q = _mm512_shuffle_epi8(table, nibbles2(x[i].qs + 32 * k, x[i].qs + 32 * k + 16));
            const __m512i yv = _mm512_loadu_si512(y[i].qs + 64 * k);
            const __m512i p = _mm512_maddubs_epi16(_mm512_abs_epi8(q), signed_onto(q, yv));
            const int ls0 = brisk_iq4_xs_scale(x[i].scales_l, x[i].scales_h, 2 * k) - 32;
            const int ls1 = brisk_iq4_xs_scale(x[i].scales_l, x[i].scales_h, 2 * k + 1) - 32;
            const __m512i sc = _mm512_inserti64x4(_mm512_set1_epi16((short)ls0), _mm256_set1_epi16((short)ls1), 1);
            acc = _mm512_dpwssd_epi32(acc, p, sc);
        }
        sum = fmaf((float)_mm512_reduce_add_epi32(acc), _cvtsh_ss(x[i].d) * y[i].d, sum);
    }
    *out = sum;
}
