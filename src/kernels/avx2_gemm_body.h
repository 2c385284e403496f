/* avx2_gemm_body: the packed GEMM kernels for 256-bit x86 (layout and
 * contract in kernels.h), compiled twice: by avx2_gemm.c for AVX2 (integer
 * dot products through vpmaddubsw) and by avx2_vnni_gemm.c for AVX-VNNI (the
 * VEX vpdpbusd/vpdpwssd of Alder Lake and Zen 5). The includer defines
 * AVX2_GEMM_VNNI (0 or 1), AVX2_GEMM_ISA (the table's name) and
 * AVX2_GEMM_TABLE (the function returning it).
 *
 * The packed layout is AVX-512's: a 64-byte line holds one 4-byte chunk of
 * each of the 16 rows, so here it is two ymm halves, rows 0..7 and 8..15,
 * one int32 (or float) lane per row. Each lane does exactly ref's per-row
 * arithmetic (the same integer sums, exact in any order, then ref's float
 * operations in ref's order), so every output is bit-identical to ref's
 * vec_dot whatever the tile, the half or the batch:
 *   Q4_0 (SCALAR): isum = -8*sum(y) + sum nibble*y; acc = fma((float)isum, dw*dy, acc).
 *   Q8_0 (LANES):  lane c = sum w*y of chunk c; acc[c] = fma(dw*dy, (float)lane, acc[c]); hsum8.
 *   Q5_0, Q4_1, Q5_1, Q3_K, Q5_K, Q6_K (LANES, with their offset or min terms) and Q2_K,
 *   Q4_K (SCALAR per 128- or 64-element part, with a separate min chain): as ref.c, each
 *   section below saying how.
 *
 * Integer products. AVX-VNNI: vpdpbusd adds 4 u8*s8 products per dword.
 * AVX2: vpmaddubsw gives int16 pair sums, several of them are added as int16
 * (every chain below is bounded so it cannot overflow: nibbles <= 15 and
 * |y| <= 128 give pairs <= 3840, and at most 8 are added), and vpmaddwd
 * widens them to int32 (against 1, or against a sub-block scale in both
 * halves of the dword, which multiplies the pair sum by the scale exactly).
 * Signed weights (Q8_0; Q5_0 on AVX2; Q3_K): |w| and y with w's sign (vpsignb),
 * which needs y != -128; the activation quantizers (Q8_0, Q8_K) give [-127, 127].
 *
 * The table also carries AVX2 Q8_0 and Q8_K activation quantizers, byte-identical to ref's.
 *
 * Registers: 16 ymm, so a token tile holds fewer tokens than AVX-512's; at
 * prefill the two row halves are done one after the other (the second pass
 * finds the group's lines in L1/L2), at decode (one or two tokens) both in
 * one pass so the weights stream once. */
#include "kernels/kernels.h"
#include "kernels/x86_prefetch.h"
#include "quant/blocks.h"
#include "quant/convert.h"

#include <immintrin.h>
#include <string.h>

#define G BRISK_GEMM_ROWS
#define INL static inline __attribute__((always_inline))
#define MAX_TT 8   /* array bound of every tile: tiles use at most this many tokens (TILE_TT's cases) */

INL __m256i bc32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Activation block b's scale as F32, from act_sums (see kernels.h). */
INL float act_scale(const int32_t *row_sums, int64_t nb, int64_t b) {
    float d;
    memcpy(&d, &row_sums[9 * nb + b], sizeof d);
    return d;
}

/* 8 rows' fp16 scales (16 bytes at p) widened exactly. */
INL __m256 load_f16x8(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* The 8 rows' byte values at p (scales or mins of one sub-block) as dwords. */
INL __m256i load_u8x8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

/* An integer dot-product chain: chain_add adds, per dword, the 4 products
 * u8 * s8 (VNNI: into int32; AVX2: as two int16 pair sums, bounded by the
 * caller); chain_end gives the int32 per dword. */
INL __m256i chain_add(__m256i c, __m256i u, __m256i s) {
#if AVX2_GEMM_VNNI
    return _mm256_dpbusd_avx_epi32(c, u, s);
#else
    return _mm256_add_epi16(c, _mm256_maddubs_epi16(u, s));
#endif
}

INL __m256i chain_end(__m256i c) {
#if AVX2_GEMM_VNNI
    return c;
#else
    return _mm256_madd_epi16(c, _mm256_set1_epi16(1));
#endif
}

/* VNNI's lane accumulators chain vpdpwssd after vpdpwssd (Q3_K, Q5_K, Q6_K): at
 * one or two tokens that latency chain is the critical path, so decode tiles
 * split it in two and add the halves at the end (exact: integers). AVX2's chain
 * is of single-cycle adds and stays whole. */
#define VNNI_SPLIT(tt) (AVX2_GEMM_VNNI && (tt) <= 2)

/* ---- prefetch: kernels/x86_prefetch.h. With BRISK_ISA=avx2 on Sapphire Rapids
 * (bench/decode-stream, two threads, the session-24 start against its close
 * one-token distances, two alternating runs): Q4_0 0.75-0.80 -> 0.86-0.89, Q8_0
 * 0.74-0.75 -> 0.89-0.91, Q4_K 0.58 -> 0.70-0.71 (its one-token tile below),
 * Q6_K 0.72-0.75 -> 0.75-0.77, IQ4_XS 0.71 -> 0.75-0.76 ---------------------- */

/* hsum8 of ref.c on 8 lanes of accumulators: (a[i] + a[i+4]), then (0,2) + (1,3). */
INL __m256 hsum8_lanes(const __m256 a[8]) {
    const __m256 t0 = _mm256_add_ps(a[0], a[4]), t1 = _mm256_add_ps(a[1], a[5]);
    const __m256 t2 = _mm256_add_ps(a[2], a[6]), t3 = _mm256_add_ps(a[3], a[7]);
    return _mm256_add_ps(_mm256_add_ps(t0, t2), _mm256_add_ps(t1, t3));
}

/* The gemm entry for a tile function: one or two tokens in one pass over
 * both halves (decode), more in token tiles of TT, half by half. The tile
 * gets tt and its prefetch flag as constants (each inlined copy has them
 * folded); only the first pass over the weights prefetches, and at one
 * token only where brisk_gemm_prefetch (read once per call) says so. */
#define TILE_TT(tile, k, h0, nh, pf, ...)                                                                    \
    switch (k) {                                                                                             \
        case 1: (pf) ? tile(__VA_ARGS__, 1, h0, nh, true) : tile(__VA_ARGS__, 1, h0, nh, false); break;      \
        case 2: (pf) ? tile(__VA_ARGS__, 2, h0, nh, true) : tile(__VA_ARGS__, 2, h0, nh, false); break;      \
        case 3: if (3 <= TT) (pf) ? tile(__VA_ARGS__, 3, h0, nh, true) : tile(__VA_ARGS__, 3, h0, nh, false); break; \
        case 4: if (4 <= TT) (pf) ? tile(__VA_ARGS__, 4, h0, nh, true) : tile(__VA_ARGS__, 4, h0, nh, false); break; \
        case 5: if (5 <= TT) (pf) ? tile(__VA_ARGS__, 5, h0, nh, true) : tile(__VA_ARGS__, 5, h0, nh, false); break; \
        case 6: if (6 <= TT) (pf) ? tile(__VA_ARGS__, 6, h0, nh, true) : tile(__VA_ARGS__, 6, h0, nh, false); break; \
        case 7: if (7 <= TT) (pf) ? tile(__VA_ARGS__, 7, h0, nh, true) : tile(__VA_ARGS__, 7, h0, nh, false); break; \
        case 8: if (8 <= TT) (pf) ? tile(__VA_ARGS__, 8, h0, nh, true) : tile(__VA_ARGS__, 8, h0, nh, false); break; \
        default: break;                                                                                      \
    }

#define DEFINE_GEMM_PF(fn, tile, TILE_TOKENS, BLOCK_ELEMS, PF_ON)                                                    \
    static void fn(int64_t n, const void *wpack, const void *act, size_t as, const int32_t *sums, size_t ss,         \
                   int32_t n_tok, float *out, int64_t os) {                                                          \
        enum { TT = TILE_TOKENS };                                                                                   \
        const int64_t nb = n / (BLOCK_ELEMS);                                                                        \
        const uint8_t *a = act;                                                                                      \
        const bool pf_on = (PF_ON);                                                                                  \
        if (n_tok <= 2) {                                                                                            \
            TILE_TT(tile, n_tok, 0, 2, pf_on, nb, wpack, a, as, sums, ss, out, os)                                   \
            return;                                                                                                  \
        }                                                                                                            \
        for (int32_t t = 0; t < n_tok; t += TT) {                                                                    \
            const int32_t k = n_tok - t < TT ? n_tok - t : TT;                                                       \
            for (int h = 0; h < 2; h++)                                                                              \
                TILE_TT(tile, k, h, 1, t == 0 && h == 0 && pf_on, nb, wpack, a + (size_t)t * as, as, sums + (size_t)t * ss, ss, \
                        out + (int64_t)t * os, os)                                                                   \
        }                                                                                                            \
    }

/* Tiles that stream each group in order skip their prefetch at one token
 * where brisk_gemm_prefetch says so; the tiles that read a group from several
 * regions at once (Q3_K, Q5_K: low-bit value lines beside the lines of their
 * high bits further on) always prefetch: without it their misses serialize (decode-stream
 * BRISK_DECODE_PREFETCH=0 on Zen 4: 0.14-0.37 of a plain read, against 0.59-0.93
 * with; docs/PERFORMANCE.md "Session 21"). Q6_K's lines are in reading order
 * since session 22 (BRISK_Q6K_TRIPLE) and it prefetches all the same: at two
 * threads its one-token tile read 0.86-1.0 of a plain read with the prefetch,
 * 0.67-0.93 without (AVX-512's tile; one thread alike either way). */
#define PF_MULTI_REGION true
#define DEFINE_GEMM(fn, tile, TILE_TOKENS, BLOCK_ELEMS) DEFINE_GEMM_PF(fn, tile, TILE_TOKENS, BLOCK_ELEMS, brisk_gemm_prefetch(n_tok))

/* ---- Q4_0 ------------------------------------------------------------------------------ */

#define Q40_GROUP (G * sizeof(brisk_block_q4_0))

INL void q4_0_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, int tt, int h0, int nh, bool pf) {
    __m256 acc[2][MAX_TT];
    #pragma GCC unroll 16
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) acc[hh][t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q40_GROUP;
        prefetch_ahead(blk, Q40_GROUP, pf, pf_class(tt));
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            __m256i ch[MAX_TT];
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) ch[t] = _mm256_setzero_si256();
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * c + 32 * h));
                const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
                    const brisk_block_q8_0 *y = (const brisk_block_q8_0 *)(act + (size_t)t * as) + b;
                    ch[t] = chain_add(chain_add(ch[t], lo, bc32(y->qs + 4 * c)), hi, bc32(y->qs + 16 + 4 * c));
                }
            }
            const __m256 dw = load_f16x8(blk + 16 * h);
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) {
                const int32_t *s = sums + (size_t)t * ss;
                const __m256i isum = _mm256_add_epi32(chain_end(ch[t]), _mm256_set1_epi32(s[8 * nb + b]));
                const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(act_scale(s, nb, b)));
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc[hh][t]);
            }
        }
    }
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) _mm256_storeu_ps(out + (int64_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

#ifndef Q4_0_TT
#define Q4_0_TT 4
#endif
DEFINE_GEMM(gemm_q4_0, q4_0_tile, Q4_0_TT, 32)

/* ---- Q8_0 ------------------------------------------------------------------------------ */

#define Q80_GROUP (G * sizeof(brisk_block_q8_0))

INL void q8_0_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, int tt, int h0, int nh, bool pf) {
    __m256 acc[2][MAX_TT][8];
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++)
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) acc[hh][t][c] = _mm256_setzero_ps();
#if !AVX2_GEMM_VNNI
    const __m256i b80 = _mm256_set1_epi8((char)0x80);
    (void)sums;
#endif
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q80_GROUP;
        prefetch_ahead(blk, Q80_GROUP, pf, pf_class(tt));
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            const __m256 dw = load_f16x8(blk + 16 * h);
            __m256 d[MAX_TT];
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) d[t] = _mm256_mul_ps(dw, _mm256_set1_ps(act_scale(sums + (size_t)t * ss, nb, b)));
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * c + 32 * h));   /* w + 128 */
#if !AVX2_GEMM_VNNI
                const __m256i ws = _mm256_xor_si256(w, b80), aw = _mm256_sign_epi8(ws, ws);
#endif
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
                    const brisk_block_q8_0 *y = (const brisk_block_q8_0 *)(act + (size_t)t * as) + b;
#if AVX2_GEMM_VNNI   /* -128 * sum(y chunk) + sum (w + 128) * y */
                    const __m256i lane = _mm256_dpbusd_avx_epi32(_mm256_set1_epi32(sums[(size_t)t * ss + 8 * b + c]), w, bc32(y->qs + 4 * c));
#else
                    const __m256i lane = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(bc32(y->qs + 4 * c), ws)),
                                                           _mm256_set1_epi16(1));
#endif
                    acc[hh][t][c] = _mm256_fmadd_ps(d[t], _mm256_cvtepi32_ps(lane), acc[hh][t][c]);
                }
            }
        }
    }
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) _mm256_storeu_ps(out + (int64_t)t * os + 8 * (h0 + hh), hsum8_lanes(acc[hh][t]));
}

#ifndef Q8_0_TT
#define Q8_0_TT 4
#endif
DEFINE_GEMM(gemm_q8_0, q8_0_tile, Q8_0_TT, 32)

/* ---- Q5_0 (LANES, like Q8_0) -------------------------------------------------------------
 * value = nibble | 16*bit (0..31), q = value - 16: lane c = -16*sum(y chunk) + sum value*y;
 * the -16 term is the Q8_0 act sum (-128*sum) shifted right by 3 (exact: a multiple of 128).
 * Chunk c is elements 4c..4c+3 (the low nibbles of line c, or the high ones of line c - 4);
 * its 5th bits are the 64-bit mask at 32 + 8c, bit 4r+k for element k of row r, so a half's
 * 32 bits expand to its 32 bytes. */

#define Q50_GROUP (G * sizeof(brisk_block_q5_0))

/* Bit i of m -> 0x10 in byte i (0 where clear), for i in 0..31. */
INL __m256i bits_to_16(uint32_t m) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int32_t)m), spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(0x10));
}

INL void q5_0_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, int tt, int h0, int nh, bool pf) {
    __m256 acc[2][MAX_TT][8];
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++)
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) acc[hh][t][c] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q50_GROUP;
        prefetch_ahead(blk, Q50_GROUP, pf, pf_class(tt));
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            const __m256 dw = load_f16x8(blk + 16 * h);
            __m256 d[MAX_TT];
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) d[t] = _mm256_mul_ps(dw, _mm256_set1_ps(act_scale(sums + (size_t)t * ss, nb, b)));
#if AVX2_GEMM_VNNI
            int32_t init[MAX_TT][8];   /* -16 * sum(y chunk c): vpdpbusd starts from it */
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++)
                _mm256_storeu_si256((__m256i *)init[t], _mm256_srai_epi32(_mm256_loadu_si256((const __m256i *)(sums + (size_t)t * ss + 8 * b)), 3));
#endif
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 96 + 64 * (c & 3) + 32 * h));
                const __m256i nib = c < 4 ? _mm256_and_si256(v, m4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                uint32_t mk;
                memcpy(&mk, blk + 32 + 8 * c + 4 * h, 4);
                const __m256i w = _mm256_or_si256(nib, bits_to_16(mk));   /* the value, 0..31 */
#if !AVX2_GEMM_VNNI   /* q = value - 16 as |q| and y with q's sign, as Q8_0: no offset term */
                const __m256i q = _mm256_sub_epi8(w, _mm256_set1_epi8(16)), aq = _mm256_sign_epi8(q, q);
#endif
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
                    const brisk_block_q8_0 *y = (const brisk_block_q8_0 *)(act + (size_t)t * as) + b;
#if AVX2_GEMM_VNNI
                    const __m256i lane = _mm256_dpbusd_avx_epi32(_mm256_set1_epi32(init[t][c]), w, bc32(y->qs + 4 * c));
#else
                    const __m256i lane = chain_end(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(bc32(y->qs + 4 * c), q)));
#endif
                    acc[hh][t][c] = _mm256_fmadd_ps(d[t], _mm256_cvtepi32_ps(lane), acc[hh][t][c]);
                }
            }
        }
    }
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) _mm256_storeu_ps(out + (int64_t)t * os + 8 * (h0 + hh), hsum8_lanes(acc[hh][t]));
}

#ifndef Q5_0_TT
#define Q5_0_TT 4
#endif
DEFINE_GEMM(gemm_q5_0, q5_0_tile, Q5_0_TT, 32)

/* ---- Q4_1 and Q5_1 (LANES plus the min term, against Q8_1) -------------------------------
 * Lane c (elements 4c..4c+3) = sum value*y with value = nibble (| 16*bit for Q5_1, from
 * the masks as Q5_0), unsigned: no offset; acc[c] = fma(dw*dy, (float)lane, acc[c]); per
 * block mins = fma(m, s, mins) (s = the activation's d * sum); result hsum8(acc) + mins. */

INL void q41_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, float *out, int64_t os, int tt, int h0, int nh,
                  bool pf, const bool five) {
    const size_t group = G * (five ? sizeof(brisk_block_q5_1) : sizeof(brisk_block_q4_1)), lines = five ? 128 : 64;
    __m256 acc[2][MAX_TT][8], mins[2][MAX_TT];
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) {
            mins[hh][t] = _mm256_setzero_ps();
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) acc[hh][t][c] = _mm256_setzero_ps();
        }
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * group;
        prefetch_ahead(blk, group, pf, pf_class(tt));
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            const __m256 dw = load_f16x8(blk + 16 * h), mw = load_f16x8(blk + 32 + 16 * h);
            __m256 d[MAX_TT];
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) {
                const brisk_block_q8_1 *y = (const brisk_block_q8_1 *)(act + (size_t)t * as) + b;
                d[t] = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(y->d)));
                mins[hh][t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(_cvtsh_ss(y->s)), mins[hh][t]);
            }
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + lines + 64 * (c & 3) + 32 * h));
                __m256i w = c < 4 ? _mm256_and_si256(v, m4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                if (five) {
                    uint32_t mk;
                    memcpy(&mk, blk + 64 + 8 * c + 4 * h, 4);
                    w = _mm256_or_si256(w, bits_to_16(mk));
                }
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
                    const brisk_block_q8_1 *y = (const brisk_block_q8_1 *)(act + (size_t)t * as) + b;
                    const __m256i lane = chain_end(chain_add(_mm256_setzero_si256(), w, bc32(y->qs + 4 * c)));
                    acc[hh][t][c] = _mm256_fmadd_ps(d[t], _mm256_cvtepi32_ps(lane), acc[hh][t][c]);
                }
            }
        }
    }
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++)
            _mm256_storeu_ps(out + (int64_t)t * os + 8 * (h0 + hh), _mm256_add_ps(hsum8_lanes(acc[hh][t]), mins[hh][t]));
}

INL void q4_1_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, int tt, int h0, int nh, bool pf) {
    (void)sums, (void)ss;
    q41_tile(nb, wp, act, as, out, os, tt, h0, nh, pf, false);
}

INL void q5_1_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, int tt, int h0, int nh, bool pf) {
    (void)sums, (void)ss;
    q41_tile(nb, wp, act, as, out, os, tt, h0, nh, pf, true);
}

#ifndef Q4_1_TT
#define Q4_1_TT 4
#endif
DEFINE_GEMM(gemm_q4_1, q4_1_tile, Q4_1_TT, 32)
#ifndef Q5_1_TT
#define Q5_1_TT 4
#endif
DEFINE_GEMM(gemm_q5_1, q5_1_tile, Q5_1_TT, 32)

/* ---- Q2_K (SCALAR per 128-element half, against Q8_K) -------------------------------------
 * Half H of the block: isum = sum over bit pair s and 16-element group g of (sc[8H+2s+g] & 15)
 * * dot(group), acc = fma((float)isum, dw*dy, acc); imin = sum_j (sc[j] >> 4) * bsums[j]
 * (j = 8H..8H+7, in float: every product and partial sum an integer under 2^24, so exact),
 * accm = fma((float)imin, dminw*dy, accm); result acc - accm, as ref. Line k = 8H + 4g + i
 * holds qs bytes 32H + 4(4g + i).., whose bit pair s is element 128H + 32s + 4(4g + i)... The
 * 4-line dots fit int16 (<= 16 * 3 * 128): AVX2 vpmaddwd / VNNI vpdpwssd against the scale. */

#define Q2K_GROUP (G * sizeof(brisk_block_q2_k))

INL void q2_k_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, int tt, int h0, int nh, bool pf) {
    (void)sums, (void)ss;
    __m256 acc[2][MAX_TT], accm[2][MAX_TT];
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) acc[hh][t] = accm[hh][t] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi32(15);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q2K_GROUP;
        prefetch_ahead(blk, Q2K_GROUP, pf, pf_class(tt));
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            const __m256 dw = load_f16x8(blk + 16 * h), mw = load_f16x8(blk + 32 + 16 * h);
            #pragma GCC unroll 1
            for (int H = 0; H < 2; H++) {
                __m256i isum[MAX_TT];
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) isum[t] = _mm256_setzero_si256();
                #pragma GCC unroll 4
                for (int sp = 0; sp < 4; sp++)
                    #pragma GCC unroll 2
                    for (int g = 0; g < 2; g++) {
                        __m256i ch[MAX_TT];
                        #pragma GCC unroll 16
                        for (int t = 0; t < tt; t++) ch[t] = _mm256_setzero_si256();
                        #pragma GCC unroll 4
                        for (int i = 0; i < 4; i++) {
                            const int k = 8 * H + 4 * g + i;
                            const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 320 + 64 * k + 32 * h));
                            const __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * sp), m3);
                            #pragma GCC unroll 16
                            for (int t = 0; t < tt; t++) {
                                const int8_t *q8 = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->qs + 128 * H + 32 * sp + 16 * g + 4 * i;
                                ch[t] = chain_add(ch[t], q, bc32(q8));
                            }
                        }
                        const __m256i sc = _mm256_and_si256(load_u8x8(blk + 64 + 16 * (8 * H + 2 * sp + g) + 8 * h), m15);
                        #pragma GCC unroll 16
                        for (int t = 0; t < tt; t++) {
#if AVX2_GEMM_VNNI
                            isum[t] = _mm256_dpwssd_avx_epi32(isum[t], ch[t], sc);
#else
                            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(ch[t], _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16))));
#endif
                        }
                    }
                __m256 mn[8];
                #pragma GCC unroll 8
                for (int j = 0; j < 8; j++) mn[j] = _mm256_cvtepi32_ps(_mm256_srli_epi32(load_u8x8(blk + 64 + 16 * (8 * H + j) + 8 * h), 4));
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
                    const brisk_block_q8_k *y = (const brisk_block_q8_k *)(act + (size_t)t * as) + b;
                    const __m256 dy = _mm256_set1_ps(y->d);
                    acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dw, dy), acc[hh][t]);
                    __m256 imin = _mm256_setzero_ps();
                    #pragma GCC unroll 8
                    for (int j = 0; j < 8; j++) imin = _mm256_fmadd_ps(mn[j], _mm256_set1_ps((float)y->bsums[8 * H + j]), imin);
                    accm[hh][t] = _mm256_fmadd_ps(imin, _mm256_mul_ps(mw, dy), accm[hh][t]);
                }
            }
        }
    }
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) _mm256_storeu_ps(out + (int64_t)t * os + 8 * (h0 + hh), _mm256_sub_ps(acc[hh][t], accm[hh][t]));
}

#ifndef Q2_K_TT
#define Q2_K_TT 4
#endif
DEFINE_GEMM(gemm_q2_k, q2_k_tile, Q2_K_TT, BRISK_QK_K)

/* ---- Q3_K (LANES with 16-element signed sub-block scales, against Q8_K) -------------------
 * Element 32g + 4m + i (group g = 4H + s, lane m) is bit pair s of qs byte 32H + 4m + i
 * (line 8H + m) minus 4 unless bit 4H + s of hmask byte 4m + i (line m) is set; q is in
 * -4..3, taken as |q| and y with q's sign (y is never -128 in Q8_K). Lane by lane as
 * Q6_K: lane m adds sc[2g + (m >= 4)] * (4-product sum) over the 8 groups, then
 * acc[m] = fma(dy*dw, (float)lane, acc[m]); hsum8. */

#define Q3K_GROUP (G * (sizeof(brisk_block_q3_k) + 4))

INL void q3_k_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, int tt, int h0, int nh, bool pf) {
    (void)sums, (void)ss;
    __m256 acc[2][MAX_TT][8];
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++)
            #pragma GCC unroll 8
            for (int m = 0; m < 8; m++) acc[hh][t][m] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3), b4 = _mm256_set1_epi8(4);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q3K_GROUP;
        prefetch_ahead(blk, Q3K_GROUP, pf, pf_class_far(tt));
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            __m256i sc[16];   /* as Q6_K: (sc, sc) int16 pairs (AVX2), sc zero-extended from 16 bits (VNNI) */
            #pragma GCC unroll 16
            for (int j = 0; j < 16; j++) {
                const __m256i s32 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * j + 8 * h)));
#if AVX2_GEMM_VNNI
                sc[j] = _mm256_and_si256(s32, _mm256_set1_epi32(0xffff));
#else
                sc[j] = _mm256_or_si256(_mm256_and_si256(s32, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s32, 16));
#endif
            }
            const __m256 dw = load_f16x8(blk + 16 * h);
            #pragma GCC unroll 1
            for (int m = 0; m < 8; m++) {
                __m256i L[MAX_TT], L2[MAX_TT];   /* L2: a second chain at decode (see VNNI_SPLIT) */
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) L[t] = L2[t] = _mm256_setzero_si256();
                const __m256i hm = _mm256_loadu_si256((const __m256i *)(blk + 1312 + 64 * m + 32 * h));
                #pragma GCC unroll 2
                for (int H = 0; H < 2; H++) {
                    const __m256i ql = _mm256_loadu_si256((const __m256i *)(blk + 288 + 64 * (8 * H + m) + 32 * h));
                    #pragma GCC unroll 4
                    for (int sp = 0; sp < 4; sp++) {
                        const int g = 4 * H + sp, hb = 4 * H + sp;   /* hmask bit hb -> 4 */
                        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(ql, 2 * sp), m3);
                        const __m256i hi = _mm256_and_si256(hb >= 2 ? _mm256_srli_epi16(hm, hb - 2) : _mm256_slli_epi16(hm, 2 - hb), b4);
                        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, hi), b4), aq = _mm256_sign_epi8(q, q);
                        const __m256i scale = sc[2 * g + (m >= 4)];
                        #pragma GCC unroll 16
                        for (int t = 0; t < tt; t++) {
                            const brisk_block_q8_k *y = (const brisk_block_q8_k *)(act + (size_t)t * as) + b;
                            const __m256i yv = _mm256_sign_epi8(bc32(y->qs + 32 * g + 4 * m), q);
#if AVX2_GEMM_VNNI
                            if (VNNI_SPLIT(tt) && (sp & 1)) L2[t] = _mm256_dpwssd_avx_epi32(L2[t], _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), aq, yv), scale);
                            else L[t] = _mm256_dpwssd_avx_epi32(L[t], _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), aq, yv), scale);
#else
                            L[t] = _mm256_add_epi32(L[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aq, yv), scale));
#endif
                        }
                    }
                }
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
                    const brisk_block_q8_k *y = (const brisk_block_q8_k *)(act + (size_t)t * as) + b;
                    const __m256 d = _mm256_mul_ps(_mm256_set1_ps(y->d), dw);
                    if (VNNI_SPLIT(tt)) L[t] = _mm256_add_epi32(L[t], L2[t]);
                    acc[hh][t][m] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(L[t]), acc[hh][t][m]);
                }
            }
        }
    }
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) _mm256_storeu_ps(out + (int64_t)t * os + 8 * (h0 + hh), hsum8_lanes(acc[hh][t]));
}

#ifndef Q3_K_TT
#define Q3_K_TT 4
#endif
DEFINE_GEMM_PF(gemm_q3_k, q3_k_tile, Q3_K_TT, BRISK_QK_K, PF_MULTI_REGION)

/* ---- Q4_K (SCALAR per pair of sub-blocks, against Q8_K) ---------------------------------
 * Per pair p: isum = sc[2p]*dot(low nibbles) + sc[2p+1]*dot(high nibbles),
 * acc = fma((float)isum, dw*dy, acc); the min chain (accm = fma((float)imin,
 * dminw*dy, accm), imin = m[2p]*(bsums pair) + m[2p+1]*(bsums pair), done in
 * float as avx512_gemm.c does: exact) reads no weight nibbles and runs as its
 * own loop, which keeps the main loop's registers for tokens. AVX2: each
 * sub-block's 8 chunks add as int16 (<= 8 * 3840), and vpmaddwd against
 * (sc, sc) widens and scales at once; VNNI: int32 chains scaled in float as
 * avx512_gemm.c (every product and sum an integer under 2^24: exact). */

#define Q4K_GROUP (G * (sizeof(brisk_block_q4_k) + 4))

/* One block's min chain for half h: accm += fma per pair p of (m[2p] * bsp[2p] + m[2p+1] * bsp[2p+1])
 * times dm (dmin * dy), bsp being the activation's bsums pair sums as floats (exact). */
INL __m256 q4_k_add_mins(const uint8_t *blk, int h, const float bsp[8], __m256 dm, __m256 accm) {
    #pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        const __m256 mn0 = _mm256_cvtepi32_ps(load_u8x8(blk + 192 + 32 * p + 8 * h));
        const __m256 mn1 = _mm256_cvtepi32_ps(load_u8x8(blk + 192 + 32 * p + 16 + 8 * h));
        const __m256 imin = _mm256_fmadd_ps(mn0, _mm256_set1_ps(bsp[2 * p]), _mm256_mul_ps(mn1, _mm256_set1_ps(bsp[2 * p + 1])));
        accm = _mm256_fmadd_ps(imin, dm, accm);
    }
    return accm;
}

INL void q4_k_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, int tt, int h0, int nh, bool pf) {
    (void)sums, (void)ss;
    __m256 acc[2][MAX_TT], accm[2][MAX_TT];
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) acc[hh][t] = accm[hh][t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q4K_GROUP;
        prefetch_ahead(blk, 320, pf, pf_class(tt));   /* the nibble lines one by one with their loads */
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            __m256 d[MAX_TT];
            const __m256 dw = load_f16x8(blk + 16 * h);
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) d[t] = _mm256_mul_ps(dw, _mm256_set1_ps(((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->d));
            #pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m256i cl[MAX_TT], chh[MAX_TT];
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) cl[t] = chh[t] = _mm256_setzero_si256();
                #pragma GCC unroll 4   /* 8 (all): GCC 12 spilled the chains to the stack; gemm-micro T=24 avx2 best 76 -> 99 GMAC/s */
                for (int k = 0; k < 8; k++) {
                    const uint8_t *line = blk + 320 + 64 * (8 * p + k);
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(line + 32 * h));
                    prefetch_ahead(line, 64, pf && hh == 0, pf_class(tt));
                    const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    #pragma GCC unroll 16
                    for (int t = 0; t < tt; t++) {
                        const int8_t *q8 = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->qs + 64 * p + 4 * k;
                        cl[t] = chain_add(cl[t], lo, bc32(q8));
                        chh[t] = chain_add(chh[t], hi, bc32(q8 + 32));
                    }
                }
                const __m256i s0 = load_u8x8(blk + 64 + 32 * p + 8 * h), s1 = load_u8x8(blk + 64 + 32 * p + 16 + 8 * h);
#if AVX2_GEMM_VNNI
                const __m256 f0 = _mm256_cvtepi32_ps(s0), f1 = _mm256_cvtepi32_ps(s1);
#else
                const __m256i p0 = _mm256_or_si256(s0, _mm256_slli_epi32(s0, 16)), p1 = _mm256_or_si256(s1, _mm256_slli_epi32(s1, 16));
#endif
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
#if AVX2_GEMM_VNNI   /* |sc * dot| <= 63 * 32 * 15 * 128 < 2^22 */
                    const __m256 isum = _mm256_fmadd_ps(f0, _mm256_cvtepi32_ps(cl[t]), _mm256_mul_ps(f1, _mm256_cvtepi32_ps(chh[t])));
#else
                    const __m256 isum = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_madd_epi16(cl[t], p0), _mm256_madd_epi16(chh[t], p1)));
#endif
                    acc[hh][t] = _mm256_fmadd_ps(isum, d[t], acc[hh][t]);
                }
            }
        }
        /* the min chain */
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            const __m256 mw = load_f16x8(blk + 32 + 16 * h);
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) {
                const brisk_block_q8_k *y = (const brisk_block_q8_k *)(act + (size_t)t * as) + b;
                const __m256 dm = _mm256_mul_ps(mw, _mm256_set1_ps(y->d));
                float bsp[8];   /* bsums[2i] + bsums[2i+1], as float (exact) */
                _mm256_storeu_ps(bsp, _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1))));
                accm[hh][t] = q4_k_add_mins(blk, h, bsp, dm, accm[hh][t]);
            }
        }
    }
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) _mm256_storeu_ps(out + (int64_t)t * os + 8 * (h0 + hh), _mm256_sub_ps(acc[hh][t], accm[hh][t]));
}

/* Decode (one token, both halves): q4_k_tile with its loops turned inside out.
 * There, each half runs all 32 lines with the activation broadcasts redone per
 * half, and GCC 12 spilled the hoisted broadcasts and chains to the stack (a
 * vpmaddubsw from the stack per line in the profile). Here each 64-byte line
 * is read once as its two halves, both share the two broadcasts, and the four
 * chains (low and high nibbles of each half) stay in registers; the min chain
 * follows per block, as there. The integer sums are the same chains (same
 * bounds) and every float step is q4_k_tile's, so the bits are the same. */
INL void q4_k_tile1(int64_t nb, const uint8_t *wp, const uint8_t *act, float *out, bool pf) {
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, accm[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q4K_GROUP;
        const brisk_block_q8_k *y = (const brisk_block_q8_k *)act + b;
        /* Each line with its loads, L2 3 KiB and L1 768 B ahead (pf is true at one
         * token only where the CPU prefetches at decode: Intel). On Sapphire
         * Rapids (2026-12-07, bench/decode-stream, 2 threads, BRISK_ISA=avx2) that
         * streamed 0.70-0.74 of a plain read against 0.58-0.62 for the whole
         * group to L2 at its start, which was this tile's choice on Zen 4 (where
         * decode prefetch is now off) from these measurements, 2026-12-06, with
         * bench/decode-stream (2 threads, median ratio to plain reads, 3-5
         * interleaved runs of 40 rounds) and gemm-micro T=1 16,384 groups (one
         * thread from DRAM): one L2 prefetch beside each line's load (before)
         * 0.73-0.93, 21.8-27.5 GB/s; the 8 lines of each pair at its start
         * 0.95-0.99, 23.9-27.5; the whole group in one rolled loop 0.955-0.990,
         * 23.2-28.2; with the L1 prefetch 2 KiB ahead added the same way
         * 0.96-1.03 but 23.6-25.1 at one thread; the L1 prefetch beside each
         * line 0.67-0.78 (1 or 4 KiB ahead) and 18.5 against 29 GB/s at one
         * thread (session 12). The same 74 prefetches fully unrolled (as
         * prefetch_ahead gives them) lost most of the gain in the AVX-512
         * tile: see avx512_gemm.c's Q4_K. Q6_K's tile kept its spread
         * prefetches: the whole group this way measured 0.87-0.96 against
         * 0.95. */
        prefetch_ahead(blk, 320, pf, PF_ONE);
        #pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            __m256i cl[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, chh[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            const int8_t *q8 = y->qs + 64 * p;
            #pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const uint8_t *line = blk + 320 + 64 * (8 * p + k);
                prefetch_ahead(line, 64, pf, PF_ONE);
                const __m256i ylo = bc32(q8 + 4 * k), yhi = bc32(q8 + 32 + 4 * k);
                #pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(line + 32 * h));
                    cl[h] = chain_add(cl[h], _mm256_and_si256(v, m4), ylo);
                    chh[h] = chain_add(chh[h], _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), yhi);
                }
            }
            #pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256 d = _mm256_mul_ps(load_f16x8(blk + 16 * h), _mm256_set1_ps(y->d));
                const __m256i s0 = load_u8x8(blk + 64 + 32 * p + 8 * h), s1 = load_u8x8(blk + 64 + 32 * p + 16 + 8 * h);
#if AVX2_GEMM_VNNI
                const __m256 isum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_cvtepi32_ps(cl[h]),
                                                    _mm256_mul_ps(_mm256_cvtepi32_ps(s1), _mm256_cvtepi32_ps(chh[h])));
#else
                const __m256i p0 = _mm256_or_si256(s0, _mm256_slli_epi32(s0, 16)), p1 = _mm256_or_si256(s1, _mm256_slli_epi32(s1, 16));
                const __m256 isum = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_madd_epi16(cl[h], p0), _mm256_madd_epi16(chh[h], p1)));
#endif
                acc[h] = _mm256_fmadd_ps(isum, d, acc[h]);
            }
        }
        float bsp[8];   /* bsums[2i] + bsums[2i+1], as float (exact) */
        _mm256_storeu_ps(bsp, _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1))));
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256 dm = _mm256_mul_ps(load_f16x8(blk + 32 + 16 * h), _mm256_set1_ps(y->d));
            accm[h] = q4_k_add_mins(blk, h, bsp, dm, accm[h]);
        }
    }
    #pragma GCC unroll 2
    for (int h = 0; h < 2; h++) _mm256_storeu_ps(out + 8 * h, _mm256_sub_ps(acc[h], accm[h]));
}

#ifndef Q4_K_TT
#define Q4_K_TT 4
#endif
DEFINE_GEMM(gemm_q4_k_tiles, q4_k_tile, Q4_K_TT, BRISK_QK_K)

static void gemm_q4_k(int64_t n, const void *wpack, const void *act, size_t as, const int32_t *sums, size_t ss, int32_t n_tok,
                      float *out, int64_t os) {
    if (n_tok != 1) gemm_q4_k_tiles(n, wpack, act, as, sums, ss, n_tok, out, os);
    else if (brisk_gemm_prefetch(1)) q4_k_tile1(n / BRISK_QK_K, wpack, act, out, true);
    else q4_k_tile1(n / BRISK_QK_K, wpack, act, out, false);
}

/* ---- Q5_K (LANES with 32-element sub-block scales plus the min term, against Q8_K) -----------
 * Lane m is the chunks 8j+m (elements 32j+4m.., sub-block j = 0..7), chunk by chunk
 * scaled by sc[j] (D fits int16: AVX2 vpmaddwd against (sc, sc), VNNI vpdpwssd against sc
 * zero-extended, as Q6_K), lane by lane so one int32 accumulator per token is live; the 5th
 * bits come from the 64-bit mask per (lane, sub-block), 32 bits per half. The min term is
 * done in float as in avx512_gemm.c (integers under 2^24: exact): summ = sum_j m_j * (bsums
 * pair j), mins = fma(-(dy*dmin), summ, mins); result hsum8(acc) + mins. */

#define Q5K_GROUP (G * (sizeof(brisk_block_q5_k) + 4))

INL void q5_k_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, int tt, int h0, int nh, bool pf) {
    (void)sums, (void)ss;
    __m256 acc[2][MAX_TT][8], mins[2][MAX_TT];
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) {
            mins[hh][t] = _mm256_setzero_ps();
            #pragma GCC unroll 8
            for (int m = 0; m < 8; m++) acc[hh][t][m] = _mm256_setzero_ps();
        }
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q5K_GROUP;
        prefetch_ahead(blk, 320, pf, pf_class_far(tt));   /* the nibble and mask lines one by one with their loads */
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            const __m256 dw = load_f16x8(blk + 16 * h), mw = load_f16x8(blk + 32 + 16 * h);
            __m256 d[MAX_TT];
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) {
                const brisk_block_q8_k *y = (const brisk_block_q8_k *)(act + (size_t)t * as) + b;
                d[t] = _mm256_mul_ps(_mm256_set1_ps(y->d), dw);
                float bsp[8];   /* bsums[2j] + bsums[2j+1], as float (exact) */
                _mm256_storeu_ps(bsp, _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1))));
                __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
                #pragma GCC unroll 4
                for (int j = 0; j < 8; j += 2) {
                    s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(load_u8x8(blk + 192 + 16 * j + 8 * h)), _mm256_set1_ps(bsp[j]), s0);
                    s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(load_u8x8(blk + 208 + 16 * j + 8 * h)), _mm256_set1_ps(bsp[j + 1]), s1);
                }
                /* (-dy) * dmin, as ref: negation is exact, so this is -(dy * dmin) */
                mins[hh][t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(-y->d), mw), _mm256_add_ps(s0, s1), mins[hh][t]);
            }
            __m256i sc[8];
            #pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                const __m256i s32 = load_u8x8(blk + 64 + 16 * j + 8 * h);
#if AVX2_GEMM_VNNI
                sc[j] = s32;
#else
                sc[j] = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
#endif
            }
            #pragma GCC unroll 1
            for (int m = 0; m < 8; m++) {
                __m256i L[MAX_TT], L2[MAX_TT];   /* L2: a second chain at decode (see VNNI_SPLIT) */
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) L[t] = L2[t] = _mm256_setzero_si256();
                const uint8_t *mk = blk + 2368 + 64 * m;
                prefetch_ahead(mk, 64, pf && hh == 0, pf_class_far(tt));
                #pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    const uint8_t *line = blk + 320 + 64 * (8 * c + m);
                    prefetch_ahead(line, 64, pf && hh == 0, pf_class_far(tt));
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(line + 32 * h));
                    uint32_t b0, b1;
                    memcpy(&b0, mk + 16 * c + 4 * h, 4);
                    memcpy(&b1, mk + 16 * c + 8 + 4 * h, 4);
                    const __m256i w0 = _mm256_or_si256(_mm256_and_si256(v, m4), bits_to_16(b0));
                    const __m256i w1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), bits_to_16(b1));
                    #pragma GCC unroll 16
                    for (int t = 0; t < tt; t++) {
                        const int8_t *q8 = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->qs + 64 * c + 4 * m;
#if AVX2_GEMM_VNNI
                        const __m256i D0 = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w0, bc32(q8));
                        const __m256i D1 = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w1, bc32(q8 + 32));
                        if (VNNI_SPLIT(tt)) {
                            L[t] = _mm256_dpwssd_avx_epi32(L[t], D0, sc[2 * c]);
                            L2[t] = _mm256_dpwssd_avx_epi32(L2[t], D1, sc[2 * c + 1]);
                        } else {
                            L[t] = _mm256_dpwssd_avx_epi32(_mm256_dpwssd_avx_epi32(L[t], D0, sc[2 * c]), D1, sc[2 * c + 1]);
                        }
#else
                        L[t] = _mm256_add_epi32(L[t], _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(w0, bc32(q8)), sc[2 * c]),
                                                                       _mm256_madd_epi16(_mm256_maddubs_epi16(w1, bc32(q8 + 32)), sc[2 * c + 1])));
#endif
                    }
                }
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
                    if (VNNI_SPLIT(tt)) L[t] = _mm256_add_epi32(L[t], L2[t]);
                    acc[hh][t][m] = _mm256_fmadd_ps(d[t], _mm256_cvtepi32_ps(L[t]), acc[hh][t][m]);
                }
            }
        }
    }
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++)
            _mm256_storeu_ps(out + (int64_t)t * os + 8 * (h0 + hh), _mm256_add_ps(hsum8_lanes(acc[hh][t]), mins[hh][t]));
}

#ifndef Q5_K_TT
#define Q5_K_TT 4
#endif
DEFINE_GEMM_PF(gemm_q5_k, q5_k_tile, Q5_K_TT, BRISK_QK_K, PF_MULTI_REGION)

/* ---- Q6_K (LANES with 16-element sub-block scales, against Q8_K) --------------------------
 * Chunk j (elements 4j..4j+3) belongs to lane m = j % 8, scaled by sc[2(j/8) + (m >= 4)]
 * (see avx512_gemm.c). Lane by lane: the lane's 8 chunks (lines k = m and m + 8, four
 * values each) go into one int32 accumulator per token, which then loses 32 * (bsums[2m] *
 * sc[2m] + bsums[2m+1] * sc[2m+1]) and is fused into the lane's float accumulator (kept
 * on the stack: touched once per lane and block). Each chunk: AVX2 vpmaddubsw then
 * vpmaddwd against (sc, sc); VNNI vpdpbusd (the sum fits int16) then vpdpwssd against
 * sc zero-extended, as avx512_gemm.c. */

#define Q6K_GROUP (G * sizeof(brisk_block_q6_k))

/* The VNNI form from two tokens up: at one token vpdpbusd + vpdpwssd was no faster than
 * vpmaddubsw + vpmaddwd + vpaddd on Zen 4 (gemm-micro T=1, under load: 41-43 vs 42-45
 * GMAC/s; T=2: 63-66 vs 56-57; T=24: 89-91 vs 76), so avx2-vnni decodes one token as avx2. */
#define Q6_VNNI(tt) (AVX2_GEMM_VNNI && (tt) >= 2)

/* The 6-bit values (0..63) of chunks 16x + k, x = 0..3, for 8 rows: the low and high nibbles of
 * the two ql lines at la and lb, each with its 2 bits of the qh line at lh. */
INL void q6_values(const uint8_t *la, const uint8_t *lb, const uint8_t *lh, __m256i w[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i lA = _mm256_loadu_si256((const __m256i *)la), lB = _mm256_loadu_si256((const __m256i *)lb);
    const __m256i H = _mm256_loadu_si256((const __m256i *)lh);
    w[0] = _mm256_or_si256(_mm256_and_si256(lA, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
    w[1] = _mm256_or_si256(_mm256_and_si256(lB, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
    w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lA, 4), m4), _mm256_and_si256(H, m30));
    w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lB, 4), m4), _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
}

INL void q6_k_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, int tt, int h0, int nh, bool pf) {
    (void)sums, (void)ss;
    __m256 acc[2][MAX_TT][8];
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++)
            #pragma GCC unroll 8
            for (int m = 0; m < 8; m++) acc[hh][t][m] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q6K_GROUP;
        prefetch_ahead(blk, 288, pf, pf_class_far(tt));   /* the value lines one by one with their loads */
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            __m256i sc[16];   /* scale j of the 8 rows: (sc, sc) as int16 pairs (AVX2); (uint16)sc zero-extended (VNNI) */
            #pragma GCC unroll 16
            for (int j = 0; j < 16; j++) {
                const __m256i s32 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * j + 8 * h)));
                if (Q6_VNNI(tt)) sc[j] = _mm256_and_si256(s32, _mm256_set1_epi32(0xffff));
                else sc[j] = _mm256_or_si256(_mm256_and_si256(s32, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s32, 16));
            }
            const __m256 dw = load_f16x8(blk + 16 * h);
            #pragma GCC unroll 1
            for (int m = 0; m < 8; m++) {
                __m256i L[MAX_TT];
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) L[t] = _mm256_setzero_si256();
                #pragma GCC unroll 2
                for (int kk = 0; kk < 2; kk++) {
                    const int k = m + 8 * kk;
                    const uint8_t *la = blk + BRISK_Q6K_TRIPLE(k), *lb = la + 64, *lh = la + 128;
                    prefetch_ahead(la, 64, pf && hh == 0, pf_class_far(tt));
                    prefetch_ahead(lb, 64, pf && hh == 0, pf_class_far(tt));
                    prefetch_ahead(lh, 64, pf && hh == 0, pf_class_far(tt));
                    __m256i w[4];
                    q6_values(la + 32 * h, lb + 32 * h, lh + 32 * h, w);
                    #pragma GCC unroll 4
                    for (int x = 0; x < 4; x++) {
                        const int j = 2 * (2 * x + k / 8) + (m >= 4);   /* chunk 16x + k */
                        #pragma GCC unroll 16
                        for (int t = 0; t < tt; t++) {
                            const brisk_block_q8_k *y = (const brisk_block_q8_k *)(act + (size_t)t * as) + b;
                            const __m256i yv = bc32(y->qs + 4 * (16 * x + k));
#if AVX2_GEMM_VNNI
                            if (Q6_VNNI(tt)) L[t] = _mm256_dpwssd_avx_epi32(L[t], _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w[x], yv), sc[j]);
                            else
#endif
                                L[t] = _mm256_add_epi32(L[t], _mm256_madd_epi16(_mm256_maddubs_epi16(w[x], yv), sc[j]));
                        }
                    }
                }
                /* (sc[2m], sc[2m+1]) as the two int16 halves of each dword */
                const __m256i pair = Q6_VNNI(tt) ? _mm256_or_si256(sc[2 * m], _mm256_slli_epi32(sc[2 * m + 1], 16))
                                                 : _mm256_blend_epi16(sc[2 * m], sc[2 * m + 1], 0xaa);
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
                    const brisk_block_q8_k *y = (const brisk_block_q8_k *)(act + (size_t)t * as) + b;
                    const __m256i corr = _mm256_madd_epi16(pair, bc32(y->bsums + 2 * m));
                    const __m256i lane = _mm256_sub_epi32(L[t], _mm256_slli_epi32(corr, 5));
                    const __m256 d = _mm256_mul_ps(_mm256_set1_ps(y->d), dw);
                    acc[hh][t][m] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lane), acc[hh][t][m]);
                }
            }
        }
    }
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) _mm256_storeu_ps(out + (int64_t)t * os + 8 * (h0 + hh), hsum8_lanes(acc[hh][t]));
}

/* Decode (one token, both halves), AVX2 instructions in both builds (as
 * q6_k_tile at one token): the lanes run one after the other (lane m is lines
 * m and m + 8), so lanes 0-3 need only the 8 even-numbered scales and lanes
 * 4-7 the 8 odd ones (q6_k_tile widens all 16 per half and block), each
 * activation broadcast serves both halves, and each lane is finished as soon
 * as its two lines are in. Same integer sums, same float steps: same bits. */
INL void q6_k_tile1(int64_t nb, const uint8_t *wp, const uint8_t *act, float *out, bool pf, int near) {
    __m256 acc[2][8];
    #pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
        #pragma GCC unroll 8
        for (int m = 0; m < 8; m++) acc[h][m] = _mm256_setzero_ps();
    const __m256i lo16 = _mm256_set1_epi32(0xffff);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q6K_GROUP;
        const brisk_block_q8_k *y = (const brisk_block_q8_k *)act + b;
        prefetch_ahead(blk, 288, pf, near);
        #pragma GCC unroll 2
        for (int phase = 0; phase < 2; phase++) {
            __m256i sc[2][4][2];   /* (sc, sc) int16 pairs of scale 2 * (2x + kb) + phase, per half */
            #pragma GCC unroll 2
            for (int h = 0; h < 2; h++)
                #pragma GCC unroll 4
                for (int x = 0; x < 4; x++)
                    #pragma GCC unroll 2
                    for (int kb = 0; kb < 2; kb++) {
                        const __m256i s32 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * (2 * (2 * x + kb) + phase) + 8 * h)));
                        sc[h][x][kb] = _mm256_or_si256(_mm256_and_si256(s32, lo16), _mm256_slli_epi32(s32, 16));
                    }
            #pragma GCC unroll 1
            for (int mm = 0; mm < 4; mm++) {
                const int m = 4 * phase + mm;
                __m256i L[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
                #pragma GCC unroll 2
                for (int kb = 0; kb < 2; kb++) {
                    const int k = m + 8 * kb;
                    const uint8_t *la = blk + BRISK_Q6K_TRIPLE(k), *lb = la + 64, *lh = la + 128;
                    prefetch_ahead(la, 64, pf, near);
                    prefetch_ahead(lb, 64, pf, near);
                    prefetch_ahead(lh, 64, pf, near);
                    #pragma GCC unroll 2
                    for (int h = 0; h < 2; h++) {
                        __m256i w[4];
                        q6_values(la + 32 * h, lb + 32 * h, lh + 32 * h, w);
                        #pragma GCC unroll 4
                        for (int x = 0; x < 4; x++)
                            L[h] = _mm256_add_epi32(L[h], _mm256_madd_epi16(_mm256_maddubs_epi16(w[x], bc32(y->qs + 4 * (16 * x + k))), sc[h][x][kb]));
                    }
                }
                #pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    const __m256i sa = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * (2 * m) + 8 * h)));
                    const __m256i sb = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * (2 * m + 1) + 8 * h)));
                    const __m256i pair = _mm256_or_si256(_mm256_and_si256(sa, lo16), _mm256_slli_epi32(sb, 16));   /* (sc[2m], sc[2m+1]) */
                    const __m256i corr = _mm256_madd_epi16(pair, bc32(y->bsums + 2 * m));
                    const __m256i lane = _mm256_sub_epi32(L[h], _mm256_slli_epi32(corr, 5));
                    const __m256 d = _mm256_mul_ps(_mm256_set1_ps(y->d), load_f16x8(blk + 16 * h));
                    acc[h][m] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lane), acc[h][m]);
                }
            }
        }
    }
    #pragma GCC unroll 2
    for (int h = 0; h < 2; h++) _mm256_storeu_ps(out + 8 * h, hsum8_lanes(acc[h]));
}

/* 8 tokens (4 until session 25): gemm-micro 64 Q6_K, one thread, Sapphire Rapids, tiles of
 * 4 / 6 / 8 tokens: avx2 46-48 / 51 / 52-56 GMAC/s, avx2-vnni 57-58 / 57-61 / 62 (the tile
 * widens the 16 scales and the value lines once per block and half for all its tokens). Q4_K's
 * tile measured slower at 6 and 8 (avx2 77 / 73-75 / 65-66, avx2-vnni 104-107 / 77-83 / 72-75)
 * and stays at 4. */
#ifndef Q6_K_TT
#define Q6_K_TT 8
#endif
DEFINE_GEMM_PF(gemm_q6_k_tiles, q6_k_tile, Q6_K_TT, BRISK_QK_K, PF_MULTI_REGION)

static void gemm_q6_k(int64_t n, const void *wpack, const void *act, size_t as, const int32_t *sums, size_t ss, int32_t n_tok,
                      float *out, int64_t os) {
    if (n_tok == 1) {   /* prefetches at one token (see PF_MULTI_REGION), closer where the CPU prefetches at decode */
        if (brisk_gemm_prefetch(1)) q6_k_tile1(n / BRISK_QK_K, wpack, act, out, true, PF_ONE);
        else q6_k_tile1(n / BRISK_QK_K, wpack, act, out, true, PF_L2_L1);
    }
    else gemm_q6_k_tiles(n, wpack, act, as, sums, ss, n_tok, out, os);
}

/* ---- IQ4_NL and MXFP4 (SCALAR, like Q4_0, against Q8_0) -----------------------------------
 * The nibbles index a 16-entry int8 codebook, looked up with vpshufb (the
 * table in both 128-bit lanes; the high nibbles shifted and masked first).
 * VNNI: the table is biased by 128 (v ^ 0x80 = v + 128 as u8) so the weights
 * are vpdpbusd's unsigned operand, and isum = sum (v + 128) * y - 128 * sum(y),
 * the last term 16 * act_sums' -8 * sum(y) (exact). AVX2: |v| and y with v's
 * sign (vpsignb, y != -128), as Q8_0; MXFP4's |v| <= 12 keeps the pair sums
 * small enough to add as int16 for the whole block (8 * 2 * 12 * 127 < 2^15),
 * IQ4_NL's (|v| <= 127) are widened chunk by chunk. Then ref's float steps:
 * d = dw * dy (IQ4_NL: the fp16 d; MXFP4: brisk_e8m0_half from its bits),
 * acc = fma((float)isum, d, acc). */

/* The codebook as vpshufb's table in both lanes (VNNI: biased to u8). */
INL __m256i lut4_table(const int8_t values[16]) {
    const __m128i v = _mm_loadu_si128((const __m128i *)values);
#if AVX2_GEMM_VNNI
    return _mm256_broadcastsi128_si256(_mm_xor_si128(v, _mm_set1_epi8((char)0x80)));
#else
    return _mm256_broadcastsi128_si256(v);
#endif
}

/* brisk_e8m0_half of 8 E8M0 bytes: (e - 1) << 23 as float bits, 0x00200000 << e for e < 2. */
INL __m256 e8m0_half8(const uint8_t *e) {
    const __m256i v = load_u8x8(e);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v)));
}

INL void lut4_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, int tt, int h0, int nh, bool pf, bool mx) {
    const size_t gbytes = G * (mx ? sizeof(brisk_block_mxfp4) : sizeof(brisk_block_iq4_nl)), qoff = mx ? 16 : 32;
    __m256 acc[2][MAX_TT];
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) acc[hh][t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f), table = lut4_table(mx ? brisk_mxfp4_values : brisk_iq4nl_values);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * gbytes;
        prefetch_ahead(blk, gbytes, pf, pf_class(tt));
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            __m256i ch[MAX_TT];
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) ch[t] = _mm256_setzero_si256();
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + qoff + 64 * c + 32 * h));
                const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
                const __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
#if !AVX2_GEMM_VNNI
                const __m256i alo = _mm256_abs_epi8(lo), ahi = _mm256_abs_epi8(hi);
#endif
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
                    const brisk_block_q8_0 *y = (const brisk_block_q8_0 *)(act + (size_t)t * as) + b;
#if AVX2_GEMM_VNNI
                    ch[t] = _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(ch[t], lo, bc32(y->qs + 4 * c)), hi, bc32(y->qs + 16 + 4 * c));
#else
                    const __m256i plo = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(bc32(y->qs + 4 * c), lo));
                    const __m256i phi = _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(bc32(y->qs + 16 + 4 * c), hi));
                    if (mx) ch[t] = _mm256_add_epi16(ch[t], _mm256_add_epi16(plo, phi));
                    else ch[t] = _mm256_add_epi32(ch[t], _mm256_add_epi32(_mm256_madd_epi16(plo, _mm256_set1_epi16(1)),
                                                                          _mm256_madd_epi16(phi, _mm256_set1_epi16(1))));
#endif
                }
            }
            const __m256 dw = mx ? e8m0_half8(blk + 8 * h) : load_f16x8(blk + 16 * h);
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) {
                const int32_t *s = sums + (size_t)t * ss;
#if AVX2_GEMM_VNNI
                const __m256i isum = _mm256_add_epi32(ch[t], _mm256_set1_epi32(16 * s[8 * nb + b]));
#else
                const __m256i isum = mx ? _mm256_madd_epi16(ch[t], _mm256_set1_epi16(1)) : ch[t];
#endif
                const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(act_scale(s, nb, b)));
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc[hh][t]);
            }
        }
    }
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) _mm256_storeu_ps(out + (int64_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

INL void iq4_nl_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                     int64_t os, int tt, int h0, int nh, bool pf) {
    lut4_tile(nb, wp, act, as, sums, ss, out, os, tt, h0, nh, pf, false);
}

INL void mxfp4_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                    int64_t os, int tt, int h0, int nh, bool pf) {
    lut4_tile(nb, wp, act, as, sums, ss, out, os, tt, h0, nh, pf, true);
}

#ifndef IQ4_NL_TT
#define IQ4_NL_TT 4
#endif
DEFINE_GEMM(gemm_iq4_nl, iq4_nl_tile, IQ4_NL_TT, 32)
#ifndef MXFP4_TT
#define MXFP4_TT 4
#endif
DEFINE_GEMM(gemm_mxfp4, mxfp4_tile, MXFP4_TT, 32)

/* ---- IQ4_XS (SCALAR per 256-element block, against Q8_K) ----------------------------------
 * isum = sum over the groups j of sc_j * dot(group j) in int32 (ref's integer),
 * then acc = fma((float)isum, dw*dy, acc). AVX2: IQ4_NL's signed pairs, each
 * chunk's widened by vpmaddwd against (sc_j, sc_j), which scales it exactly
 * (|sc| <= 32, pairs < 2^15). VNNI: IQ4_NL's biased chain per group, started at
 * -128 * (the group's two bsums), times sc_j by vpmulld (exact; the float
 * form Q4_K uses could round, the 8 scaled dots together passing 2^24). */

#define IQ4XS_GROUP (G * (sizeof(brisk_block_iq4_xs) + 2))

INL void iq4_xs_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                     int64_t os, int tt, int h0, int nh, bool pf) {
    (void)sums, (void)ss;
    __m256 acc[2][MAX_TT];
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) acc[hh][t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f), table = lut4_table(brisk_iq4nl_values);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * IQ4XS_GROUP;
        prefetch_ahead(blk, 160, pf, pf_class(tt));   /* the scales; the lines one by one with their loads */
#if AVX2_GEMM_VNNI
        int32_t ysum[MAX_TT][8];   /* -128 * (bsums[2j] + bsums[2j+1]) */
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++)
            _mm256_storeu_si256((__m256i *)ysum[t], _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->bsums),
                                                                      _mm256_set1_epi16(-128)));
#endif
        #pragma GCC unroll 2
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            __m256i isum[MAX_TT];
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) isum[t] = _mm256_setzero_si256();
            #pragma GCC unroll 1
            for (int j = 0; j < 8; j++) {
                const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * j + 8 * h)));
#if AVX2_GEMM_VNNI
                __m256i ch[MAX_TT];
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) ch[t] = _mm256_set1_epi32(ysum[t][j]);
#else
                const __m256i scp = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(sc, 16));
#endif
                #pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    const uint8_t *line = blk + 160 + 64 * (4 * j + c);
                    prefetch_ahead(line, 64, pf && hh == 0, pf_class(tt));
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(line + 32 * h));
                    const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
                    const __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
#if !AVX2_GEMM_VNNI
                    const __m256i alo = _mm256_abs_epi8(lo), ahi = _mm256_abs_epi8(hi);
#endif
                    #pragma GCC unroll 16
                    for (int t = 0; t < tt; t++) {
                        const int8_t *q8 = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->qs + 32 * j + 4 * c;
#if AVX2_GEMM_VNNI
                        ch[t] = _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(ch[t], lo, bc32(q8)), hi, bc32(q8 + 16));
#else
                        const __m256i plo = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(bc32(q8), lo));
                        const __m256i phi = _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(bc32(q8 + 16), hi));
                        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(plo, scp), _mm256_madd_epi16(phi, scp)));
#endif
                    }
                }
#if AVX2_GEMM_VNNI
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(ch[t], sc));
#endif
            }
            const __m256 dw = load_f16x8(blk + 16 * h);
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) {
                const brisk_block_q8_k *y = (const brisk_block_q8_k *)(act + (size_t)t * as) + b;
                acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dw, _mm256_set1_ps(y->d)), acc[hh][t]);
            }
        }
    }
    #pragma GCC unroll 2
    for (int hh = 0; hh < nh; hh++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) _mm256_storeu_ps(out + (int64_t)t * os + 8 * (h0 + hh), acc[hh][t]);
}

#ifndef IQ4_XS_TT
#define IQ4_XS_TT 4
#endif
DEFINE_GEMM(gemm_iq4_xs, iq4_xs_tile, IQ4_XS_TT, BRISK_QK_K)

/* ---- activation quantizer ---------------------------------------------------------------- */

/* brisk_q8_0_quantize_x86 8 lanes at a time (as avx512_gemm.c's): amax is exact in any
 * order, d and 1/d stay scalar, vcvtps2dq rounds to nearest even like brisk_round_even
 * (|x * id| <= 127 here, so the saturating packs never saturate); the packs interleave
 * 4-element groups across the two 128-bit lanes, and the permute puts them back in order.
 * Blocks with a NaN or a non-finite amax take the scalar function, which defines them. */
static void quantize_q8_0(const float *src, void *dst, int64_t n) {
    brisk_block_q8_0 *b = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        __m256 x[4], m = _mm256_setzero_ps();
        int bad = 0;
        for (int k = 0; k < 4; k++) {
            x[k] = _mm256_loadu_ps(src + 8 * k);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, x[k]));
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(x[k], x[k], _CMP_UNORD_Q));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (bad || !(amax <= 3.402823466e38f)) {
            brisk_q8_0_quantize_x86(src, &b[i], 32);
            continue;
        }
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        b[i].d = brisk_fp32_to_fp16(d);
        const __m256 idv = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(x[k], idv));
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)b[i].qs, _mm256_permutevar8x32_epi32(p, order));
    }
}

/* Q8_K: brisk_avx2_q8_k_quantize (avx2_kernels.c), which the kernel tables use too. */

/* ---- activation sums (the spec: brisk_act_sums_q8_0_ref) ------------------------------- */

static void act_sums_q8_0(const void *act, int64_t n, int32_t *sums) {
    const brisk_block_q8_0 *y = act;
    const int64_t nb = n / 32;
    const __m256i ones8 = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < nb; b++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)y[b].qs);
        const __m256i cs = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v), _mm256_set1_epi16(1));   /* 8 chunk sums */
        _mm256_storeu_si256((__m256i *)(sums + 8 * b), _mm256_mullo_epi32(cs, _mm256_set1_epi32(-128)));
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(cs), _mm256_extracti128_si256(cs, 1));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
        sums[8 * nb + b] = -8 * _mm_cvtsi128_si32(h);
        const float d = _cvtsh_ss(y[b].d);
        memcpy(&sums[9 * nb + b], &d, sizeof d);
    }
}

static const brisk_gemm_kernels table = {
    .isa = AVX2_GEMM_ISA,
    .gemm = {
        [BRISK_Q_Q4_0] = gemm_q4_0,
        [BRISK_Q_Q8_0] = gemm_q8_0,
        [BRISK_Q_Q5_0] = gemm_q5_0,
        [BRISK_Q_Q4_1] = gemm_q4_1,
        [BRISK_Q_Q5_1] = gemm_q5_1,
        [BRISK_Q_Q2_K] = gemm_q2_k,
        [BRISK_Q_Q3_K] = gemm_q3_k,
        [BRISK_Q_Q4_K] = gemm_q4_k,
        [BRISK_Q_Q5_K] = gemm_q5_k,
        [BRISK_Q_Q6_K] = gemm_q6_k,
        [BRISK_Q_IQ4_NL] = gemm_iq4_nl,
        [BRISK_Q_IQ4_XS] = gemm_iq4_xs,
        [BRISK_Q_MXFP4] = gemm_mxfp4,
    },
    .act_sums = {
        [BRISK_Q_Q8_0] = act_sums_q8_0,
    },
    .quantize_act = {
        [BRISK_Q_Q8_0] = quantize_q8_0,
        [BRISK_Q_Q8_K] = brisk_avx2_q8_k_quantize,
    },
};

const brisk_gemm_kernels *AVX2_GEMM_TABLE(void) { return &table; }
