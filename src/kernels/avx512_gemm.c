/* avx512_gemm: packed GEMM kernels with AVX-512 F/BW + VNNI (layout and
 * contract in kernels.h).
 *
 * One zmm lane per weight row: a 64-byte line of the packed group holds chunk
 * c (4 bytes) of all 16 rows, so one vpdpbusd against a 4-byte broadcast of
 * the activation's chunk c adds, in every lane, that row's 4-product sum.
 * Integer sums are exact in any order; the float work per lane is exactly
 * ref's per-element chain:
 *   Q4_0 (SCALAR): isum = -8*sum(y) + sum over the 8 chunks of nibble*y (the
 *        same integer as dot(q - 8, y)); acc = fma((float)isum, dw*dy, acc).
 *   Q8_0 (LANES):  lane c = -128*sum(y chunk) + sum (w+128)*y (= sum w*y);
 *        acc[c] = fma(dw*dy, (float)lane c, acc[c]); hsum8 at the end.
 * The -8/-128 terms come precomputed per activation block (act_sums), and
 * start the integer accumulators. Several activation rows (tokens) share
 * each loaded weight line; every lane's arithmetic is independent of how many,
 * so results do not depend on the batch. */
#include "kernels/kernels.h"
#include "kernels/x86_prefetch.h"
#include "kernels/x86_expf.h"
#include "quant/blocks.h"
#include "quant/convert.h"
#include "ops/ops.h"

#include <immintrin.h>
#include <string.h>

#define G BRISK_GEMM_ROWS

static inline __m512i bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

static inline float fp16(uint16_t h) { return _cvtsh_ss(h); }

/* Activation block b's scale as F32, from act_sums (see kernels.h). */
static inline float act_scale(const int32_t *row_sums, int64_t nb, int64_t b) {
    float d;
    memcpy(&d, &row_sums[9 * nb + b], sizeof d);
    return d;
}

/* vpdpbusd with the activation's 4 bytes as an embedded broadcast
 * ({1to16}): one fused uop where the intrinsics give a separate broadcast
 * load (GCC 12 does not fold it). */
/* The LANES types' 8 per-lane accumulators summed as ref orders it: ((0+4) + (2+6)) + ((1+5) + (3+7)). */
static inline __m512 sum8_lanes(const __m512 a[8]) {
    const __m512 t0 = _mm512_add_ps(a[0], a[4]), t1 = _mm512_add_ps(a[1], a[5]);
    const __m512 t2 = _mm512_add_ps(a[2], a[6]), t3 = _mm512_add_ps(a[3], a[7]);
    return _mm512_add_ps(_mm512_add_ps(t0, t2), _mm512_add_ps(t1, t3));
}

static inline __attribute__((always_inline)) __m512i dpbusd_bcast(__m512i acc, __m512i w, const void *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)p));
    return acc;
}

/* A tile with its prefetch flag as a constant, so each inlined copy has the
 * branch folded away; first: this is the call's first token tile and the
 * prefetch is on (pf_on: brisk_gemm_prefetch, read once per call). */
#define TILE_CALL(first, tile, ...) ((first) ? tile(__VA_ARGS__, true) : tile(__VA_ARGS__, false))

/* The weight bytes [p, p + bytes) of one group, to L2 PF_AHEAD ahead and
 * (near) to L1 PF_NEAR ahead, issued at the group's start as rolled loops:
 * the same prefetches fully unrolled measured slower (see q4_k_tile). */
static inline __attribute__((always_inline)) void prefetch_group(const uint8_t *p, size_t bytes, bool near) {
    #pragma GCC unroll 1
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)(p + PF_AHEAD + o), _MM_HINT_T1);
    if (near) {
        #pragma GCC unroll 1
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)(p + PF_NEAR + o), _MM_HINT_T0);
    }
}

/* ---- Q4_0 -------------------------------------------------------------------------- */

#define Q40_TILE 8

static inline __attribute__((always_inline)) void q4_0_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t act_stride,
                                                            const int32_t *sums, size_t sums_stride, int tt, float *out,
                                                            int64_t out_stride, bool pf) {
    __m512 acc[Q40_TILE];
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) acc[t] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    /* Decode (tt <= 2) is bound by how many weight lines a core keeps in
     * flight, and every uop per weight byte costs it: the high nibbles go into
     * vpdpbusd in place (v & 0xf0 = 16 * nibble) and that chain's sum is
     * shifted back once (exact: it is 16 times an integer), 4 uops fewer per
     * block; the activations are embedded broadcasts; the activation scale
     * comes from act_sums as F32; and the lines 2 KiB ahead are pulled from L2
     * into L1. Two threads streaming 512 MiB of Q4_0, median of 30 rounds as a
     * fraction of plain prefetched reads in the same round: 0.82 before, 0.87
     * with the in-place nibbles and F32 scale, 0.89 with embedded broadcasts,
     * 0.94-0.96 with the L1 prefetch too (which alone did nothing for the
     * older tile). Larger tiles amortise the masks over their tokens and keep
     * the two masks. */
    const bool hi16 = tt <= 2;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * (G * sizeof(brisk_block_q4_0));
        prefetch_ahead(blk, G * sizeof(brisk_block_q4_0), pf, pf_class(tt));
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        __m512i lo[4], hi[4];
        #pragma GCC unroll 16
        for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * c);
            lo[c] = _mm512_and_si512(v, m4);
            hi[c] = hi16 ? _mm512_andnot_si512(m4, v) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) {
            const brisk_block_q8_0 *y = (const brisk_block_q8_0 *)(act + (size_t)t * act_stride) + b;
            const int32_t *s = sums + (size_t)t * sums_stride;
            /* two independent integer chains (exact; shorter latency when tt is small) */
            __m512i i0 = _mm512_set1_epi32(s[8 * nb + b]), i1 = _mm512_setzero_si512();
            #pragma GCC unroll 16
            for (int c = 0; c < 4; c++) {
                if (hi16) {
                    i0 = dpbusd_bcast(i0, lo[c], y->qs + 4 * c);
                    i1 = dpbusd_bcast(i1, hi[c], y->qs + 16 + 4 * c);
                } else {
                    i0 = _mm512_dpbusd_epi32(i0, lo[c], bcast32(y->qs + 4 * c));
                    i1 = _mm512_dpbusd_epi32(i1, hi[c], bcast32(y->qs + 16 + 4 * c));
                }
            }
            const __m512i isum = _mm512_add_epi32(i0, hi16 ? _mm512_srai_epi32(i1, 4) : i1);
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(act_scale(s, nb, b)));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[t]);
        }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) _mm512_storeu_ps(out + (int64_t)t * out_stride, acc[t]);
}

static void gemm_q4_0(int64_t n, const void *wpack, const void *act, size_t act_stride, const int32_t *sums, size_t sums_stride,
                      int32_t n_tok, float *out, int64_t out_stride) {
    const bool pf_on = brisk_gemm_prefetch(n_tok);
    const int64_t nb = n / 32;
    const uint8_t *a = act;
    int32_t t = 0;
    for (; t + Q40_TILE <= n_tok; t += Q40_TILE)
        TILE_CALL(t == 0 && pf_on, q4_0_tile, nb, wpack, a + (size_t)t * act_stride, act_stride,
                  sums + (size_t)t * sums_stride, sums_stride, Q40_TILE,
                  out + (int64_t)t * out_stride, out_stride);
    switch (n_tok - t) {
#define REST(k) case k: TILE_CALL(t == 0 && pf_on, q4_0_tile, nb, wpack, a + (size_t)t * act_stride, act_stride, \
                                  sums + (size_t)t * sums_stride, sums_stride, k, \
                                  out + (int64_t)t * out_stride, out_stride); break;
        REST(1) REST(2) REST(3) REST(4) REST(5) REST(6) REST(7)
#undef REST
        default: break;
    }
}

/* ---- Q8_0 -------------------------------------------------------------------------- */

#define Q80_TILE 3

static inline __attribute__((always_inline)) void q8_0_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t act_stride,
                                                            const int32_t *sums, size_t sums_stride, int tt, float *out,
                                                            int64_t out_stride, bool pf) {
    __m512 acc[Q80_TILE][8];
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++)
        #pragma GCC unroll 16
        for (int c = 0; c < 8; c++) acc[t][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * (G * sizeof(brisk_block_q8_0));
        prefetch_ahead(blk, G * sizeof(brisk_block_q8_0), pf, pf_class(tt));   /* decode: as q4_0_tile */
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        __m512 d[Q80_TILE];
        const brisk_block_q8_0 *y[Q80_TILE];
        const int32_t *s[Q80_TILE];
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) {
            y[t] = (const brisk_block_q8_0 *)(act + (size_t)t * act_stride) + b;
            s[t] = sums + (size_t)t * sums_stride + 8 * b;
            d[t] = _mm512_mul_ps(dw, _mm512_set1_ps(act_scale(sums + (size_t)t * sums_stride, nb, b)));
        }
        #pragma GCC unroll 16
        for (int c = 0; c < 8; c++) {
            const __m512i w = _mm512_loadu_si512(blk + 32 + 64 * c);
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) {
                const __m512i lane = tt <= 2 ? dpbusd_bcast(_mm512_set1_epi32(s[t][c]), w, y[t]->qs + 4 * c)
                                             : _mm512_dpbusd_epi32(_mm512_set1_epi32(s[t][c]), w, bcast32(y[t]->qs + 4 * c));
                acc[t][c] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(lane), acc[t][c]);
            }
        }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) {
        _mm512_storeu_ps(out + (int64_t)t * out_stride, sum8_lanes(acc[t]));
    }
}

static void gemm_q8_0(int64_t n, const void *wpack, const void *act, size_t act_stride, const int32_t *sums, size_t sums_stride,
                      int32_t n_tok, float *out, int64_t out_stride) {
    const bool pf_on = brisk_gemm_prefetch(n_tok);
    const int64_t nb = n / 32;
    const uint8_t *a = act;
    int32_t t = 0;
    for (; t + Q80_TILE <= n_tok; t += Q80_TILE)
        TILE_CALL(t == 0 && pf_on, q8_0_tile, nb, wpack, a + (size_t)t * act_stride, act_stride,
                  sums + (size_t)t * sums_stride, sums_stride, Q80_TILE,
                  out + (int64_t)t * out_stride, out_stride);
    if (n_tok - t == 2)
        TILE_CALL(t == 0 && pf_on, q8_0_tile, nb, wpack, a + (size_t)t * act_stride, act_stride,
                  sums + (size_t)t * sums_stride, sums_stride, 2,
                  out + (int64_t)t * out_stride, out_stride);
    else if (n_tok - t == 1)
        TILE_CALL(t == 0 && pf_on, q8_0_tile, nb, wpack, a + (size_t)t * act_stride, act_stride,
                  sums + (size_t)t * sums_stride, sums_stride, 1,
                  out + (int64_t)t * out_stride, out_stride);
}

/* ---- Q5_0 (LANES, like Q8_0) -----------------------------------------------------------
 * value = nibble | 16*bit (0..31), q = value - 16: lane c = -16*sum(y chunk)
 * + sum value*y; the -16 term is the Q8_0 act sum (-128*sum) shifted right by
 * 3 (exact: a multiple of 128). */

#define Q50_TILE 3

static inline __attribute__((always_inline)) void q5_0_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t act_stride,
                                                            const int32_t *sums, size_t sums_stride, int tt, float *out,
                                                            int64_t out_stride, bool pf) {
    __m512 acc[Q50_TILE][8];
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++)
        #pragma GCC unroll 16
        for (int c = 0; c < 8; c++) acc[t][c] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * (G * sizeof(brisk_block_q5_0));
        prefetch_ahead(blk, G * sizeof(brisk_block_q5_0), pf, tt == 1 ? PF_ONE : PF_L2);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        __m512 d[Q50_TILE];
        const brisk_block_q8_0 *y[Q50_TILE];
        const int32_t *s[Q50_TILE];
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) {
            y[t] = (const brisk_block_q8_0 *)(act + (size_t)t * act_stride) + b;
            s[t] = sums + (size_t)t * sums_stride + 8 * b;
            d[t] = _mm512_mul_ps(dw, _mm512_set1_ps(act_scale(sums + (size_t)t * sums_stride, nb, b)));
        }
        #pragma GCC unroll 16
        for (int c = 0; c < 8; c++) {
            const __m512i v = _mm512_loadu_si512(blk + 96 + 64 * (c & 3));
            const __m512i nib = c < 4 ? _mm512_and_si512(v, m4) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            uint64_t mk;
            memcpy(&mk, blk + 32 + 8 * c, 8);
            const __m512i w = _mm512_or_si512(nib, _mm512_maskz_mov_epi8((__mmask64)mk, b4));
            const int off = c < 4 ? 4 * c : 16 + 4 * (c - 4);
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) {
                const __m512i init = _mm512_srai_epi32(_mm512_set1_epi32(s[t][c < 4 ? c : c - 4 + 4]), 3);
                const __m512i lane = _mm512_dpbusd_epi32(init, w, bcast32(y[t]->qs + off));
                acc[t][off / 4] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(lane), acc[t][off / 4]);
            }
        }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) {
        _mm512_storeu_ps(out + (int64_t)t * out_stride, sum8_lanes(acc[t]));
    }
}

static void gemm_q5_0(int64_t n, const void *wpack, const void *act, size_t act_stride, const int32_t *sums, size_t sums_stride,
                      int32_t n_tok, float *out, int64_t out_stride) {
    const bool pf_on = brisk_gemm_prefetch(n_tok);
    const int64_t nb = n / 32;
    const uint8_t *a = act;
    int32_t t = 0;
    for (; t + Q50_TILE <= n_tok; t += Q50_TILE)
        TILE_CALL(t == 0 && pf_on, q5_0_tile, nb, wpack, a + (size_t)t * act_stride, act_stride,
                  sums + (size_t)t * sums_stride, sums_stride, Q50_TILE,
                  out + (int64_t)t * out_stride, out_stride);
    if (n_tok - t == 2)
        TILE_CALL(t == 0 && pf_on, q5_0_tile, nb, wpack, a + (size_t)t * act_stride, act_stride,
                  sums + (size_t)t * sums_stride, sums_stride, 2,
                  out + (int64_t)t * out_stride, out_stride);
    else if (n_tok - t == 1)
        TILE_CALL(t == 0 && pf_on, q5_0_tile, nb, wpack, a + (size_t)t * act_stride, act_stride,
                  sums + (size_t)t * sums_stride, sums_stride, 1,
                  out + (int64_t)t * out_stride, out_stride);
}

/* ---- Q4_K (SCALAR per pair of sub-blocks, against Q8_K) ------------------------------------
 * Per pair p: isum = sc[2p]*dot(low nibbles) + sc[2p+1]*dot(high nibbles),
 * imin = m[2p]*(bsums[4p]+bsums[4p+1]) + m[2p+1]*(bsums[4p+2]+bsums[4p+3]);
 * acc = fma((float)isum, dw*dy, acc), accm = fma((float)imin, dminw*dy, accm);
 * result acc - accm. Nibbles are unsigned: no offsets. The scale and min
 * products are done in float (exact: integers under 2^24), which keeps the
 * 2-uop vpmulld off port 0, where vpdpbusd runs: 149 -> 165 GMAC/s at T=16
 * (gemm-micro, one thread).
 * Prefetch: q4_k_tile (two or more tokens) issues the whole group's software
 * prefetches to L2 PF_AHEAD ahead at the group's start, as a rolled loop;
 * q4_k_tile1 (decode, where it prefetches: Intel) each line pair with its loads
 * to L2 PF_ONE_AHEAD and L1 PF_ONE_NEAR ahead, 0.83-0.84 of a plain read on
 * Sapphire Rapids (2026-12-07, bench/decode-stream, two threads) against
 * 0.63-0.67 for the group-start scheme below, which was measured on Zen 4
 * before decode prefetch went off there (so it no longer runs anywhere).
 * q4_k_tile spread them before, one per line next to its load (and to L1
 * too at two tokens); gemm-micro T=N Q4_K 16384 (one thread from DRAM),
 * 2026-12-06, spread -> whole group: T=2 18.6-18.8 -> 28.1-28.3 GB/s of
 * weights; T=3 21.6-22.1 -> 21.5 (compute-bound from here); T=4 18.8-18.9
 * -> 18.5-18.9; T=5, 6, 8 +4-8%; with the L1 prefetch at two tokens, 22.3-22.8.
 * Decode's history, bench/decode-stream Q4_K, median ratio to
 * plain reads: when the older two-chain tile did decode, 100 rounds, 3
 * interleaved runs: all 37 L2 prefetches at the start 0.861-0.874, L1 added
 * the same way 0.79, spread L2 only 0.881-0.888, spread L2 and L1
 * 0.917-0.938. With q4_k_tile1 (2026-12-06, 60 rounds, 3 interleaved runs
 * each) the order reversed: spread L2 and L1 0.838-0.927 (L1 1 or 4 KiB
 * ahead, or L2 16 KiB ahead, within that), all 37 + 37 at the start
 * 1.006-1.031, L2 only at the start 0.969-0.981; gemm-micro T=1 16,384
 * groups (one thread from DRAM) 21.2-23.6 GB/s spread, 25.9-27.9 at the
 * start. The 74 prefetches must stay two rolled loops: fully unrolled (as
 * prefetch_ahead's pragma gives them, and GCC then schedules them among the
 * block's first loads) they measured 0.89-0.95, against 0.97-1.07 rolled,
 * 3 interleaved runs each. Not a rule for every tile: unrolled, the AVX2
 * tiles lost with it (Q6_K's 52.5-line group, which the AVX-512 table runs at
 * one token, 0.57-0.68 against spread 0.95-1.01; AVX2 Q4_K's 0.74-0.85
 * against 0.86-0.89); rolled, AVX2 Q4_K gained (0.955-0.99, avx2_gemm_body.h)
 * and AVX2 Q6_K did not (0.87-0.96); Q5_K's and IQ4_XS's tiles here kept
 * their spread prefetches (docs/PERFORMANCE.md, session 20). */

/* Tokens per prefill tile. 4 until session 25 ("5 and 6 measured within 3%", on Zen 4); on
 * Sapphire Rapids, gemm-micro Q4_K one thread, weights in L2 (16 groups), 4 -> 8 tokens: T=64
 * 147 -> 161 GMAC/s (5, 6, 7: 153, 154, 157), T=24 103 -> 120, T=100 108 -> 119; from DRAM
 * (12000 groups) T=8 82 -> 94, T=16 102 -> 110. The tile's registers spill at 8 (the 16 nibble
 * lines, and 4 per token): the per-token values are used once per sub-block pair. */
#ifndef Q4K_TILE
#define Q4K_TILE 8
#endif
_Static_assert(Q4K_TILE >= 4 && Q4K_TILE <= 8, "gemm_q4_k's remainder cases cover tiles of up to 8 tokens");
#define Q4K_GROUP (G * (sizeof(brisk_block_q4_k) + 4))

static inline __attribute__((always_inline)) void q4_k_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t act_stride,
                                                            int tt, float *out, int64_t out_stride, bool pf) {
    __m512 acc[Q4K_TILE], accm[Q4K_TILE];
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) acc[t] = accm[t] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q4K_GROUP;
        /* the whole group to L2 at its start: see the comment above */
        if (pf) prefetch_group(blk, Q4K_GROUP, false);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
        __m512 d[Q4K_TILE], dm[Q4K_TILE];
        const brisk_block_q8_k *y[Q4K_TILE];
        float bsp[Q4K_TILE][8];   /* bsums[2i] + bsums[2i+1], as float (exact) */
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) {
            y[t] = (const brisk_block_q8_k *)(act + (size_t)t * act_stride) + b;
            d[t] = _mm512_mul_ps(dw, _mm512_set1_ps(y[t]->d));
            dm[t] = _mm512_mul_ps(mw, _mm512_set1_ps(y[t]->d));
            const __m256i pairs = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[t]->bsums), _mm256_set1_epi16(1));
            _mm256_storeu_ps(bsp[t], _mm256_cvtepi32_ps(pairs));
        }
        #pragma GCC unroll 16
        for (int p = 0; p < 4; p++) {
            /* scales and mins as floats: every product and sum below is an integer under 2^24,
             * so the float arithmetic is exact and gives (float) of ref's int32 isum / imin */
            const __m512 sc0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 64 + 32 * p))));
            const __m512 sc1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 64 + 32 * p + 16))));
            const __m512 mn0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192 + 32 * p))));
            const __m512 mn1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192 + 32 * p + 16))));
            __m512i lo[8], hi[8];
            #pragma GCC unroll 16
            for (int k = 0; k < 8; k++) {
                const __m512i v = _mm512_loadu_si512(blk + 320 + 64 * (8 * p + k));
                lo[k] = _mm512_and_si512(v, m4);
                hi[k] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            }
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) {
                const int8_t *q8 = y[t]->qs + 64 * p;
                __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
                __m512i b0 = _mm512_setzero_si512(), b1 = _mm512_setzero_si512();
                #pragma GCC unroll 16
                for (int k = 0; k < 8; k += 2) {
                    a0 = _mm512_dpbusd_epi32(a0, lo[k], bcast32(q8 + 4 * k));
                    a1 = _mm512_dpbusd_epi32(a1, lo[k + 1], bcast32(q8 + 4 * k + 4));
                    b0 = _mm512_dpbusd_epi32(b0, hi[k], bcast32(q8 + 32 + 4 * k));
                    b1 = _mm512_dpbusd_epi32(b1, hi[k + 1], bcast32(q8 + 32 + 4 * k + 4));
                }
                /* |sc * dot| <= 63 * 32 * 15 * 128 < 2^22; |m * bsum pair| <= 63 * 4096 */
                const __m512 isum = _mm512_fmadd_ps(sc0, _mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)),
                                                    _mm512_mul_ps(sc1, _mm512_cvtepi32_ps(_mm512_add_epi32(b0, b1))));
                const __m512 imin =
                    _mm512_fmadd_ps(mn0, _mm512_set1_ps(bsp[t][2 * p]), _mm512_mul_ps(mn1, _mm512_set1_ps(bsp[t][2 * p + 1])));
                acc[t] = _mm512_fmadd_ps(isum, d[t], acc[t]);
                accm[t] = _mm512_fmadd_ps(imin, dm[t], accm[t]);
            }
        }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) _mm512_storeu_ps(out + (int64_t)t * out_stride, _mm512_sub_ps(acc[t], accm[t]));
}

/* Decode (one token), with Q4_0's decode tricks: the high nibbles go into
 * vpdpbusd in place (v & 0xf0 = 16 * nibble; that chain's sum is shifted back
 * once, exact: 16 times an integer), the activations are embedded broadcasts,
 * and each line is consumed as it is loaded (no 16 registers of nibbles).
 * Every product and float step is q4_k_tile's, so the bits are the same. */
static inline __attribute__((always_inline)) void q4_k_tile1(int64_t nb, const uint8_t *wp, const uint8_t *act, float *out, bool pf) {
    __m512 acc = _mm512_setzero_ps(), accm = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q4K_GROUP;
        prefetch_ahead(blk, 320, pf, PF_ONE);   /* the scales; the lines two by two with their loads */
        const brisk_block_q8_k *y = (const brisk_block_q8_k *)act + b;
        const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk)), _mm512_set1_ps(y->d));
        const __m512 dm = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32))), _mm512_set1_ps(y->d));
        float bsp[8];   /* bsums[2i] + bsums[2i+1], as float (exact) */
        _mm256_storeu_ps(bsp, _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1))));
        #pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            const int8_t *q8 = y->qs + 64 * p;
            __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
            __m512i b0 = _mm512_setzero_si512(), b1 = _mm512_setzero_si512();
            #pragma GCC unroll 8
            for (int k = 0; k < 8; k += 2) {
                const uint8_t *line = blk + 320 + 64 * (8 * p + k);
                prefetch_ahead(line, 128, pf, PF_ONE);
                const __m512i v0 = _mm512_loadu_si512(line), v1 = _mm512_loadu_si512(line + 64);
                a0 = dpbusd_bcast(a0, _mm512_and_si512(v0, m4), q8 + 4 * k);
                a1 = dpbusd_bcast(a1, _mm512_and_si512(v1, m4), q8 + 4 * k + 4);
                b0 = dpbusd_bcast(b0, _mm512_andnot_si512(m4, v0), q8 + 32 + 4 * k);
                b1 = dpbusd_bcast(b1, _mm512_andnot_si512(m4, v1), q8 + 32 + 4 * k + 4);
            }
            const __m512 sc0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 64 + 32 * p))));
            const __m512 sc1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 64 + 32 * p + 16))));
            const __m512 mn0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192 + 32 * p))));
            const __m512 mn1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192 + 32 * p + 16))));
            const __m512 isum = _mm512_fmadd_ps(sc0, _mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)),
                                                _mm512_mul_ps(sc1, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_add_epi32(b0, b1), 4))));
            const __m512 imin = _mm512_fmadd_ps(mn0, _mm512_set1_ps(bsp[2 * p]), _mm512_mul_ps(mn1, _mm512_set1_ps(bsp[2 * p + 1])));
            acc = _mm512_fmadd_ps(isum, d, acc);
            accm = _mm512_fmadd_ps(imin, dm, accm);
        }
    }
    _mm512_storeu_ps(out, _mm512_sub_ps(acc, accm));
}

static void gemm_q4_k(int64_t n, const void *wpack, const void *act, size_t act_stride, const int32_t *sums, size_t sums_stride,
                      int32_t n_tok, float *out, int64_t out_stride) {
    const bool pf_on = brisk_gemm_prefetch(n_tok);
    (void)sums, (void)sums_stride;
    const int64_t nb = n / BRISK_QK_K;
    const uint8_t *a = act;
    int32_t t = 0;
    for (; t + Q4K_TILE <= n_tok; t += Q4K_TILE)
        TILE_CALL(t == 0 && pf_on, q4_k_tile, nb, wpack, a + (size_t)t * act_stride, act_stride,
                  Q4K_TILE, out + (int64_t)t * out_stride, out_stride);
#define Q4K_REST(k) \
    case k: if (k < Q4K_TILE) TILE_CALL(t == 0 && pf_on, q4_k_tile, nb, wpack, a + (size_t)t * act_stride, act_stride, k, out + (int64_t)t * out_stride, out_stride); break;
    switch (n_tok - t) {
        Q4K_REST(2) Q4K_REST(3) Q4K_REST(4) Q4K_REST(5) Q4K_REST(6) Q4K_REST(7)   /* Q4K_TILE <= 8 */
        case 1: TILE_CALL(t == 0 && pf_on, q4_k_tile1, nb, wpack, a + (size_t)t * act_stride, out + (int64_t)t * out_stride); break;
        default: break;
    }
#undef Q4K_REST
}

/* ---- Q5_K (LANES with 32-element sub-block scales plus the min term, against Q8_K) -----------
 * Lane m of the block is the chunks 8j+m (elements 32j+4m.., j = 0..7), each
 * scaled by sc[j]: D = dpbusd(0, q, y) fits in int16 (|D| <= 4*31*128), so
 * vpdpwssd against sc zero-extended to 32 bits adds exactly sc * D, as in
 * Q6_K. The loop runs lane by lane so one int32 accumulator per token is
 * live (8 per token, as Q6_K keeps them, would not fit in registers for
 * more than 2 tokens); the 8 float accumulators per token are touched once
 * per lane and block, and may live on the stack. The 5th bit comes from a 64-bit
 * mask per (lane, sub-block) loaded straight into a k register and added as
 * 16 under it. The min term is done in float as in Q4_K (every product and
 * partial sum an integer under 2^24, so exact): summ = sum_j m_j * (bsums
 * pair j), mins = fma(-(dy*dmin), summ, mins); result hsum8(acc) + mins. */

#define Q5K_TILE 8   /* gemm-micro T=24, one thread: tile 2/3/4/5/6/8 = 89/104/113/117/122/126 GMAC/s */
#define Q5K_GROUP (G * (sizeof(brisk_block_q5_k) + 4))

static inline __attribute__((always_inline)) void q5_k_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t act_stride,
                                                            int tt, float *out, int64_t out_stride, bool pf) {
    __m512 acc[Q5K_TILE][8], mins[Q5K_TILE];
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) {
        mins[t] = _mm512_setzero_ps();
        #pragma GCC unroll 16
        for (int m = 0; m < 8; m++) acc[t][m] = _mm512_setzero_ps();
    }
    const __m512i m4 = _mm512_set1_epi8(0x0f), b16 = _mm512_set1_epi8(0x10);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q5K_GROUP;
        prefetch_ahead(blk, 320, pf, pf_class_far(tt));   /* the rest line by line with its loads, as in q4_k_tile */
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
        const brisk_block_q8_k *y[Q5K_TILE];
        __m512 d[Q5K_TILE];
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) {
            y[t] = (const brisk_block_q8_k *)(act + (size_t)t * act_stride) + b;
            d[t] = _mm512_mul_ps(_mm512_set1_ps(y[t]->d), dw);
            float bsp[8];   /* bsums[2j] + bsums[2j+1], as float (exact) */
            const __m256i pairs = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[t]->bsums), _mm256_set1_epi16(1));
            _mm256_storeu_ps(bsp, _mm256_cvtepi32_ps(pairs));
            __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
            #pragma GCC unroll 16
            for (int j = 0; j < 8; j += 2) {
                const __m512 mn0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192 + 16 * j))));
                const __m512 mn1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 208 + 16 * j))));
                s0 = _mm512_fmadd_ps(mn0, _mm512_set1_ps(bsp[j]), s0);
                s1 = _mm512_fmadd_ps(mn1, _mm512_set1_ps(bsp[j + 1]), s1);
            }
            /* (-dy) * dmin, as ref: negation is exact, so this is -(dy * dmin) */
            mins[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(-y[t]->d), mw), _mm512_add_ps(s0, s1), mins[t]);
        }
        __m512i sc[8];
        #pragma GCC unroll 16
        for (int j = 0; j < 8; j++) sc[j] = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 64 + 16 * j)));
        #pragma GCC unroll 1
        for (int m = 0; m < 8; m++) {
            __m512i L[Q5K_TILE];
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) L[t] = _mm512_setzero_si512();
            const uint8_t *mk = blk + 2368 + 64 * m;
            prefetch_ahead(mk, 64, pf, pf_class_far(tt));
            #pragma GCC unroll 16
            for (int c = 0; c < 4; c++) {
                const __m512i v = _mm512_loadu_si512(blk + 320 + 64 * (8 * c + m));
                prefetch_ahead(blk + 320 + 64 * (8 * c + m), 64, pf, pf_class_far(tt));
                const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                const __m512i w0 = _mm512_mask_add_epi8(lo, _load_mask64((__mmask64 *)(mk + 16 * c)), lo, b16);
                const __m512i w1 = _mm512_mask_add_epi8(hi, _load_mask64((__mmask64 *)(mk + 16 * c + 8)), hi, b16);
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
                    const int8_t *q8 = y[t]->qs + 64 * c + 4 * m;
                    const __m512i D0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0, bcast32(q8));
                    const __m512i D1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w1, bcast32(q8 + 32));
                    L[t] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(L[t], D0, sc[2 * c]), D1, sc[2 * c + 1]);
                }
            }
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) acc[t][m] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(L[t]), acc[t][m]);
        }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) {
        _mm512_storeu_ps(out + (int64_t)t * out_stride, _mm512_add_ps(sum8_lanes(acc[t]), mins[t]));
    }
}

static void gemm_q5_k(int64_t n, const void *wpack, const void *act, size_t act_stride, const int32_t *sums, size_t sums_stride,
                      int32_t n_tok, float *out, int64_t out_stride) {
    (void)sums, (void)sums_stride;
    const int64_t nb = n / BRISK_QK_K;   /* a multi-region tile: prefetches at one token too (avx2_gemm_body.h, PF_MULTI_REGION) */
    const uint8_t *a = act;
    int32_t t = 0;
    for (; t + Q5K_TILE <= n_tok; t += Q5K_TILE)
        TILE_CALL(t == 0, q5_k_tile, nb, wpack, a + (size_t)t * act_stride, act_stride,
                  Q5K_TILE, out + (int64_t)t * out_stride, out_stride);
    switch (n_tok - t) {
#define REST(k) case k: TILE_CALL(t == 0, q5_k_tile, nb, wpack, a + (size_t)t * act_stride, act_stride, \
                                  k, out + (int64_t)t * out_stride, out_stride); break;
        REST(1) REST(2) REST(3) REST(4) REST(5) REST(6) REST(7)
#undef REST
        default: break;
    }
}

/* ---- Q6_K (LANES with 16-element sub-block scales, against Q8_K) ----------------------------
 * Chunk j (elements 4j..4j+3, j = 0..63) belongs to lane m = j % 8 of group
 * g = j / 8, scaled by sc[2g + (m >= 4)]: D = dpbusd(0, q, y) fits in int16, so
 * vpdpwssd against the scale zero-extended to 32 bits adds exactly sc * D.
 * Lane l then loses 32 * (bsums[2l]*sc[2l] + bsums[2l+1]*sc[2l+1]) (one
 * vpdpwssd on the scale pair), and acc[m] = fma(dy*dw, (float)lane, acc[m]). */

#define Q6K_GROUP (G * sizeof(brisk_block_q6_k))

static inline __m512i q6_scale(const uint8_t *blk, int j) {   /* int8 scale j of the 16 rows, as (uint16)sc in 32-bit lanes */
    return _mm512_cvtepu16_epi32(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * j))));
}

/* The 6-bit values (0..63) of chunks 16x + k, x = 0..3, of the 16 rows: the low and high nibbles
 * of ql lines k and 16 + k, each with its 2 bits of qh line k. */
static inline __attribute__((always_inline)) void q6_values(const uint8_t *blk, int k, __m512i w[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const uint8_t *tri = blk + BRISK_Q6K_TRIPLE(k);
    const __m512i lA = _mm512_loadu_si512(tri), lB = _mm512_loadu_si512(tri + 64), H = _mm512_loadu_si512(tri + 128);
    w[0] = _mm512_ternarylogic_epi32(_mm512_slli_epi16(H, 4), m30, _mm512_and_si512(lA, m4), 0xEA);
    w[1] = _mm512_ternarylogic_epi32(_mm512_slli_epi16(H, 2), m30, _mm512_and_si512(lB, m4), 0xEA);
    w[2] = _mm512_ternarylogic_epi32(H, m30, _mm512_and_si512(_mm512_srli_epi16(lA, 4), m4), 0xEA);
    w[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(H, 2), m30, _mm512_and_si512(_mm512_srli_epi16(lB, 4), m4), 0xEA);
}

/* Prefill (two tokens and more), lane by lane as q6_k_tile1 below: lane m is
 * triples m and m + 8, so lanes 0-3 need only the 8 even-numbered scales and
 * lanes 4-7 the 8 odd ones (16 widened scales a block, held in registers for
 * all tt tokens), one int32 accumulator per token is live, and each lane's
 * float accumulators are touched once per block (they may live on the stack).
 * Before (session 25) the tile ran the triples in memory order with 8 int32
 * accumulators per token, which held it to 2 tokens and widened 4 scales per
 * triple (64 a block). gemm-micro Q6_K, one thread, Sapphire Rapids, old ->
 * new: T=64 in L2 (16 groups) 67-68 -> 106-107 GMAC/s (tiles of 4, 6, 10, 12
 * tokens: 92, 99, 106, 105); from DRAM (12000 groups) T=2 24.5 -> 24.5, T=4
 * 34.5 -> 41.4, T=8 46 -> 62. The integer sums are exact in any order and
 * every lane's float steps are the old tile's: the same bits. */
#ifndef Q6K_TILE
#define Q6K_TILE 8
#endif
_Static_assert(Q6K_TILE >= 2 && Q6K_TILE <= 8, "gemm_q6_k's remainder cases cover tiles of up to 8 tokens");

static inline __attribute__((always_inline)) void q6_k_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t act_stride,
                                                            int tt, float *out, int64_t out_stride, bool pf) {
    __m512 acc[Q6K_TILE][8];
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++)
        #pragma GCC unroll 8
        for (int m = 0; m < 8; m++) acc[t][m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q6K_GROUP;
        /* The whole group to L2 at its start, one rolled loop (as q4_k_tile).
         * Spread, one beside each line's load (and to L1 too at two tokens),
         * measured before with the memory-order tile: gemm-micro T=N Q6_K 12000
         * (one thread from DRAM, 4 interleaved runs, 2026-12-06), GB/s of
         * weights spread -> whole group: T=2 10.2-11.0 -> 16.1-16.8 (one 7.9);
         * T=4 7.2-7.8 -> 10.1-10.7; T=8 3.1-5.0 -> 4.0-6.1. */
        if (pf) prefetch_group(blk, Q6K_GROUP, false);
        const brisk_block_q8_k *y[Q6K_TILE];
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) y[t] = (const brisk_block_q8_k *)(act + (size_t)t * act_stride) + b;
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        #pragma GCC unroll 2
        for (int half = 0; half < 2; half++) {
            /* the scale of chunk 16x + k for k / 8 = kb: index 2 * (2x + kb) + half (as in q6_k_tile1;
             * a helper shared by the two tiles changed GCC's code for this one, 3% slower at T=64) */
            __m512i sc[4][2];
            #pragma GCC unroll 4
            for (int x = 0; x < 4; x++)
                #pragma GCC unroll 2
                for (int kb = 0; kb < 2; kb++) sc[x][kb] = q6_scale(blk, 2 * (2 * x + kb) + half);
            #pragma GCC unroll 1
            for (int mm = 0; mm < 4; mm++) {
                const int m = 4 * half + mm;
                __m512i L[Q6K_TILE];
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) L[t] = _mm512_setzero_si512();
                #pragma GCC unroll 2
                for (int kb = 0; kb < 2; kb++) {
                    const int k = m + 8 * kb;
                    __m512i w[4];
                    q6_values(blk, k, w);
                    #pragma GCC unroll 4
                    for (int x = 0; x < 4; x++)
                        #pragma GCC unroll 16
                        for (int t = 0; t < tt; t++) {
                            const __m512i D = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[x], bcast32(y[t]->qs + 4 * (16 * x + k)));
                            L[t] = _mm512_dpwssd_epi32(L[t], D, sc[x][kb]);
                        }
                }
                const __m512i pair = _mm512_or_si512(q6_scale(blk, 2 * m), _mm512_slli_epi32(q6_scale(blk, 2 * m + 1), 16));
                #pragma GCC unroll 16
                for (int t = 0; t < tt; t++) {
                    const __m512i corr = _mm512_dpwssd_epi32(_mm512_setzero_si512(), pair, bcast32(y[t]->bsums + 2 * m));
                    const __m512i lane = _mm512_sub_epi32(L[t], _mm512_slli_epi32(corr, 5));
                    const __m512 d = _mm512_mul_ps(_mm512_set1_ps(y[t]->d), dw);
                    acc[t][m] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lane), acc[t][m]);
                }
            }
        }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) _mm512_storeu_ps(out + (int64_t)t * out_stride, sum8_lanes(acc[t]));
}

/* Decode (one token): the lanes run one after the other (lane m is triples m
 * and m + 8, adjacent in memory), so lanes 0-3 share the 8 even-numbered
 * scales and lanes 4-7 the 8 odd ones (16 scale loads a block, held in
 * registers), and each lane's integer sum is finished and added to its float
 * accumulator right away. Every lane's integer and float steps are
 * q6_k_tile's (integers are exact in any order): the same bits.
 * History: session 12 had this tile and dropped it for AVX2's (06f0cb8): it
 * computed faster but, with the L lines and the H lines in two regions, read
 * six streams per block and streamed DRAM worse. With the triples in reading
 * order (session 22) it computes at 37-44 GB/s of weights from L2/L3 (gemm-micro
 * T=1 Q6_K) against AVX2's 20-21, and decode-stream Q6_K reads 0.80-0.82 of a
 * plain read on one core (AVX2's tile on the old layout 0.64-0.82) and 0.86-1.0
 * at two threads (0.88-0.93): interleaved runs, noisy host. The prefetch stays
 * on at one token (see PF_MULTI_REGION in avx2_gemm_body.h): where the CPU
 * prefetches at decode (Intel: spread) each triple with its loads, L2
 * PF_ONE_AHEAD and L1 PF_ONE_NEAR ahead, elsewhere (AMD) the whole group to L2
 * at its start, the Zen 4 numbers above. On Sapphire Rapids (2026-12-07,
 * decode-stream, two threads) the group-start scheme read 0.62-0.66 of a plain
 * read, the spread one 0.86-0.92. */
static inline __attribute__((always_inline)) void q6_k_tile1(int64_t nb, const uint8_t *wp, const uint8_t *act, float *out, bool spread,
                                                             bool pf) {
    __m512 acc[8];
    #pragma GCC unroll 8
    for (int m = 0; m < 8; m++) acc[m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q6K_GROUP;
        if (spread) prefetch_ahead(blk, 288, pf, PF_ONE);   /* the scales; each triple with its loads */
        else if (pf) prefetch_group(blk, Q6K_GROUP, false);
        const brisk_block_q8_k *y = (const brisk_block_q8_k *)act + b;
        const __m512 d = _mm512_mul_ps(_mm512_set1_ps(y->d), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk)));
        #pragma GCC unroll 2
        for (int half = 0; half < 2; half++) {
            __m512i sc[4][2];   /* the scale of chunk 16x + k for k / 8 = kb: index 2 * (2x + kb) + half */
            #pragma GCC unroll 4
            for (int x = 0; x < 4; x++)
                #pragma GCC unroll 2
                for (int kb = 0; kb < 2; kb++) sc[x][kb] = q6_scale(blk, 2 * (2 * x + kb) + half);
            #pragma GCC unroll 4
            for (int mm = 0; mm < 4; mm++) {
                const int m = 4 * half + mm;
                __m512i L = _mm512_setzero_si512();
                #pragma GCC unroll 2
                for (int kb = 0; kb < 2; kb++) {
                    const int k = m + 8 * kb;
                    __m512i w[4];
                    if (spread) prefetch_ahead(blk + BRISK_Q6K_TRIPLE(k), 192, pf, PF_ONE);
                    q6_values(blk, k, w);
                    #pragma GCC unroll 4
                    for (int x = 0; x < 4; x++) {
                        const __m512i D = dpbusd_bcast(_mm512_setzero_si512(), w[x], y->qs + 4 * (16 * x + k));
                        L = _mm512_dpwssd_epi32(L, D, sc[x][kb]);
                    }
                }
                const __m512i pair = _mm512_or_si512(q6_scale(blk, 2 * m), _mm512_slli_epi32(q6_scale(blk, 2 * m + 1), 16));
                const __m512i corr = _mm512_dpwssd_epi32(_mm512_setzero_si512(), pair, bcast32(y->bsums + 2 * m));
                const __m512i lane = _mm512_sub_epi32(L, _mm512_slli_epi32(corr, 5));
                acc[m] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lane), acc[m]);
            }
        }
    }
    _mm512_storeu_ps(out, sum8_lanes(acc));
}

static void gemm_q6_k(int64_t n, const void *wpack, const void *act, size_t act_stride, const int32_t *sums, size_t sums_stride,
                      int32_t n_tok, float *out, int64_t out_stride) {
    (void)sums, (void)sums_stride;
    const int64_t nb = n / BRISK_QK_K;
    const uint8_t *a = act;
    int32_t t = 0;
    for (; t + Q6K_TILE <= n_tok; t += Q6K_TILE)
        TILE_CALL(t == 0, q6_k_tile, nb, wpack, a + (size_t)t * act_stride, act_stride,
                  Q6K_TILE, out + (int64_t)t * out_stride, out_stride);
#define Q6K_REST(k) \
    case k: if (k < Q6K_TILE) TILE_CALL(t == 0, q6_k_tile, nb, wpack, a + (size_t)t * act_stride, act_stride, k, out + (int64_t)t * out_stride, out_stride); break;
    switch (n_tok - t) {
        Q6K_REST(2) Q6K_REST(3) Q6K_REST(4) Q6K_REST(5) Q6K_REST(6) Q6K_REST(7)   /* Q6K_TILE <= 8 */
        default: break;
    }
#undef Q6K_REST
    if (n_tok - t == 1) {
        float *o = out + (int64_t)t * out_stride;
        a += (size_t)t * act_stride;
        if (t == 0 && brisk_gemm_prefetch(1)) q6_k_tile1(nb, wpack, a, o, true, true);
        else TILE_CALL(t == 0, q6_k_tile1, nb, wpack, a, o, false);
    }
}

/* ---- IQ4_NL and MXFP4 (SCALAR, like Q4_0, against Q8_0) ------------------------------------
 * The nibbles index a 16-entry codebook of int8 values. vpshufb looks each up
 * (one 128-bit copy of the table in every lane), from a table biased by 128
 * (value ^ 0x80 = value + 128 as u8), so vpdpbusd takes the weights as its
 * unsigned operand: sum (v + 128) * y = dot(v, y) + 128 * sum(y), and the chain
 * starts at -128 * sum(y) = 16 * act_sums' -8 * sum(y) (exact). The float
 * steps are ref's: d = dw * dy (IQ4_NL: the fp16 d; MXFP4: the halved E8M0
 * power of two, built from its bits as brisk_e8m0_half does), then
 * acc = fma((float)isum, d, acc). The high nibbles need the shift and mask
 * (the lookup takes the index from the low 4 bits), so decode has none of
 * Q4_0's in-place trick; it keeps the embedded broadcasts and prefetches. */

#define LUT4_TILE 8

/* The codebook as vpshufb's table, biased to u8, in all four 128-bit lanes. */
static inline __m512i lut4_table(const int8_t values[16]) {
    return _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128((const __m128i *)values), _mm_set1_epi8((char)0x80)));
}

/* brisk_e8m0_half of 16 E8M0 bytes: 2^(e - 128) as float bits, (e - 1) << 23 for
 * e >= 2 and the subnormals 0x00200000 << e for e = 0, 1. */
static inline __m512 e8m0_half16(const uint8_t *e) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2)), normal, sub));
}

static inline __attribute__((always_inline)) void lut4_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t act_stride,
                                                            const int32_t *sums, size_t sums_stride, int tt, float *out,
                                                            int64_t out_stride, bool mx, bool pf) {
    const size_t gbytes = G * (mx ? sizeof(brisk_block_mxfp4) : sizeof(brisk_block_iq4_nl)), qoff = mx ? 16 : 32;
    __m512 acc[LUT4_TILE];
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) acc[t] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f), table = lut4_table(mx ? brisk_mxfp4_values : brisk_iq4nl_values);
    const int near = pf_class(tt);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * gbytes;
        prefetch_ahead(blk, gbytes, pf, near);
        const __m512 dw = mx ? e8m0_half16(blk) : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        __m512i lo[4], hi[4];
        #pragma GCC unroll 16
        for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512(blk + qoff + 64 * c);
            lo[c] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, m4));
            hi[c] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) {
            const brisk_block_q8_0 *y = (const brisk_block_q8_0 *)(act + (size_t)t * act_stride) + b;
            const int32_t *s = sums + (size_t)t * sums_stride;
            __m512i i0 = _mm512_set1_epi32(16 * s[8 * nb + b]), i1 = _mm512_setzero_si512();
            #pragma GCC unroll 16
            for (int c = 0; c < 4; c++) {
                if (near) {
                    i0 = dpbusd_bcast(i0, lo[c], y->qs + 4 * c);
                    i1 = dpbusd_bcast(i1, hi[c], y->qs + 16 + 4 * c);
                } else {
                    i0 = _mm512_dpbusd_epi32(i0, lo[c], bcast32(y->qs + 4 * c));
                    i1 = _mm512_dpbusd_epi32(i1, hi[c], bcast32(y->qs + 16 + 4 * c));
                }
            }
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(act_scale(s, nb, b)));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(i0, i1)), d, acc[t]);
        }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) _mm512_storeu_ps(out + (int64_t)t * out_stride, acc[t]);
}

static inline __attribute__((always_inline)) void gemm_lut4(int64_t n, const void *wpack, const void *act, size_t act_stride,
                                                            const int32_t *sums, size_t sums_stride, int32_t n_tok, float *out,
                                                            int64_t out_stride, bool mx) {
    const bool pf_on = brisk_gemm_prefetch(n_tok);
    const int64_t nb = n / 32;
    const uint8_t *a = act;
    int32_t t = 0;
    for (; t + LUT4_TILE <= n_tok; t += LUT4_TILE)
        TILE_CALL(t == 0 && pf_on, lut4_tile, nb, wpack, a + (size_t)t * act_stride, act_stride, sums + (size_t)t * sums_stride, sums_stride,
                  LUT4_TILE, out + (int64_t)t * out_stride, out_stride, mx);
    switch (n_tok - t) {
#define REST(k) case k: TILE_CALL(t == 0 && pf_on, lut4_tile, nb, wpack, a + (size_t)t * act_stride, act_stride, \
                                  sums + (size_t)t * sums_stride, sums_stride, k, out + (int64_t)t * out_stride, out_stride, mx); break;
        REST(1) REST(2) REST(3) REST(4) REST(5) REST(6) REST(7)
#undef REST
        default: break;
    }
}

static void gemm_iq4_nl(int64_t n, const void *wpack, const void *act, size_t act_stride, const int32_t *sums, size_t sums_stride,
                        int32_t n_tok, float *out, int64_t out_stride) {
    gemm_lut4(n, wpack, act, act_stride, sums, sums_stride, n_tok, out, out_stride, false);
}

static void gemm_mxfp4(int64_t n, const void *wpack, const void *act, size_t act_stride, const int32_t *sums, size_t sums_stride,
                       int32_t n_tok, float *out, int64_t out_stride) {
    gemm_lut4(n, wpack, act, act_stride, sums, sums_stride, n_tok, out, out_stride, true);
}

/* ---- IQ4_XS (SCALAR per 256-element block, against Q8_K) ------------------------------------
 * isum = sum over the 8 groups j of sc_j * dot(group j), all in int32 (ref's
 * integer, exact: |sc_j * dot| < 2^24, the sum < 2^28), then
 * acc = fma((float)isum, dw*dy, acc). Each group's dot is IQ4_NL's biased
 * lookup chain, started at -128 * (the group's sum of y: two bsums, via
 * vpmaddwd against -128); the group scale multiplies it in int32 (vpmulld:
 * the sum of 8 scaled dots can pass 2^24, where the float form Q4_K uses
 * would round). */

#define IQ4XS_TILE 4
#define IQ4XS_GROUP (G * (sizeof(brisk_block_iq4_xs) + 2))

static inline __attribute__((always_inline)) void iq4_xs_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t act_stride,
                                                              int tt, float *out, int64_t out_stride, bool pf) {
    __m512 acc[IQ4XS_TILE];
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) acc[t] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f), table = lut4_table(brisk_iq4nl_values);
    const int near = pf_class(tt);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * IQ4XS_GROUP;
        prefetch_ahead(blk, 160, pf, near);   /* the scales; the lines one by one with their loads */
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        const brisk_block_q8_k *y[IQ4XS_TILE];
        int32_t ysum[IQ4XS_TILE][8];   /* -128 * (bsums[2j] + bsums[2j+1]) */
        __m512i isum[IQ4XS_TILE];
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) {
            y[t] = (const brisk_block_q8_k *)(act + (size_t)t * act_stride) + b;
            _mm256_storeu_si256((__m256i *)ysum[t], _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[t]->bsums), _mm256_set1_epi16(-128)));
            isum[t] = _mm512_setzero_si512();
        }
        #pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * j)));
            __m512i lo[4], hi[4];
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const uint8_t *line = blk + 160 + 64 * (4 * j + c);
                prefetch_ahead(line, 64, pf, near);
                const __m512i v = _mm512_loadu_si512(line);
                lo[c] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, m4));
                hi[c] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
            }
            #pragma GCC unroll 16
            for (int t = 0; t < tt; t++) {
                const int8_t *q8 = y[t]->qs + 32 * j;
                __m512i i0 = _mm512_set1_epi32(ysum[t][j]), i1 = _mm512_setzero_si512();
                #pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    if (near) {
                        i0 = dpbusd_bcast(i0, lo[c], q8 + 4 * c);
                        i1 = dpbusd_bcast(i1, hi[c], q8 + 16 + 4 * c);
                    } else {
                        i0 = _mm512_dpbusd_epi32(i0, lo[c], bcast32(q8 + 4 * c));
                        i1 = _mm512_dpbusd_epi32(i1, hi[c], bcast32(q8 + 16 + 4 * c));
                    }
                }
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_add_epi32(i0, i1), sc));
            }
        }
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dw, _mm512_set1_ps(y[t]->d)), acc[t]);
    }
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++) _mm512_storeu_ps(out + (int64_t)t * out_stride, acc[t]);
}

static void gemm_iq4_xs(int64_t n, const void *wpack, const void *act, size_t act_stride, const int32_t *sums, size_t sums_stride,
                        int32_t n_tok, float *out, int64_t out_stride) {
    const bool pf_on = brisk_gemm_prefetch(n_tok);
    (void)sums, (void)sums_stride;
    const int64_t nb = n / BRISK_QK_K;
    const uint8_t *a = act;
    int32_t t = 0;
    for (; t + IQ4XS_TILE <= n_tok; t += IQ4XS_TILE)
        TILE_CALL(t == 0 && pf_on, iq4_xs_tile, nb, wpack, a + (size_t)t * act_stride, act_stride, IQ4XS_TILE, out + (int64_t)t * out_stride,
                  out_stride);
    switch (n_tok - t) {
        case 3: TILE_CALL(t == 0 && pf_on, iq4_xs_tile, nb, wpack, a + (size_t)t * act_stride, act_stride, 3, out + (int64_t)t * out_stride, out_stride); break;
        case 2: TILE_CALL(t == 0 && pf_on, iq4_xs_tile, nb, wpack, a + (size_t)t * act_stride, act_stride, 2, out + (int64_t)t * out_stride, out_stride); break;
        case 1: TILE_CALL(t == 0 && pf_on, iq4_xs_tile, nb, wpack, a + (size_t)t * act_stride, act_stride, 1, out + (int64_t)t * out_stride, out_stride); break;
        default: break;
    }
}

/* ---- F16 (ref's 16-lane order, packed rows) ----------------------------------------------
 * One zmm accumulator per (row, token) holds ref's 16 lanes: per 16-column
 * chunk, lane l += w[16c + l] * y[16c + l] (one FMA; the product of two F16
 * values is exact in F32), then ref's halving sum. The group is 4 quads of 4
 * rows, each quad a contiguous run of 128-byte chunk lines (4 rows x 16 F16),
 * so a 4-row tile reads one stream. Decode runs the 4 quads one after the
 * other, so a thread reads its rows as one sequential stream: with the 8 KiB
 * software prefetch that beat walking the 4 quads side by side
 * (bench/gemm-micro.c 1 F16 16384, alternated: 11.5-13.2 -> 14.4-15.3 GB/s;
 * before the prefetch, 4 side-by-side streams had been ~30% faster than one).
 * The activations come pre-widened to F32 (act_sums). Tiles are rr rows x tt
 * tokens with the weights converted once per step for all tt tokens. Every
 * output's arithmetic is the same whatever the tile. */

static inline float hsum16(__m512 v) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
    return _mm_cvtss_f32(s4);
}

#define F16_LINE 128   /* bytes per 16-column chunk of a 4-row quad */

/* Prefill tiles: 4 rows x 6 tokens, 24 accumulators (8 x 3 and 4 x 7 measured no faster). */
#define F16_RR 4
#define F16_TT 6

/* Columns [16 c0, 16 c1) of rr rows x tt tokens. The accumulators start from
 * zero (first) or from acc_io, and end in acc_io or, at the last chunk, as
 * hsums in out: storing an F32 lane and loading it back is exact, so a split
 * of the columns changes no bit. */
static inline __attribute__((always_inline)) void f16_tile(int64_t c0, int64_t c1, const uint8_t *wp, size_t quad, const float *y,
                                                           size_t ys, int rr, int tt, bool first, bool last, __m512 *acc_io,
                                                           float *out, int64_t out_stride, bool pf, int near) {
    __m512 acc[16][8];
    #pragma GCC unroll 16
    for (int r = 0; r < rr; r++)
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) acc[r][t] = first ? _mm512_setzero_ps() : acc_io[r * tt + t];
    for (int64_t c = c0; c < c1; c++) {
        const uint8_t *line = wp + (size_t)c * F16_LINE;
        if (pf) {
            #pragma GCC unroll 4
            for (int q = 0; q < rr; q += 4) prefetch_ahead(line + (size_t)(q / 4) * quad, F16_LINE, true, near);
        }
        __m512 x[16];
        #pragma GCC unroll 16
        for (int r = 0; r < rr; r++)
            x[r] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(line + (size_t)(r / 4) * quad + 32 * (r % 4))));
        #pragma GCC unroll 16
        for (int t = 0; t < tt; t++) {
            const __m512 yv = _mm512_loadu_ps(y + (size_t)t * ys + 16 * c);
            #pragma GCC unroll 16
            for (int r = 0; r < rr; r++) acc[r][t] = _mm512_fmadd_ps(x[r], yv, acc[r][t]);
        }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < tt; t++)
        #pragma GCC unroll 16
        for (int r = 0; r < rr; r++) {
            if (last) out[(int64_t)t * out_stride + r] = hsum16(acc[r][t]);
            else acc_io[r * tt + t] = acc[r][t];
        }
}

/* Column chunks per pass over the 16 rows: tt tokens x F16_KC x 64 bytes of
 * activations (12 KiB at 6 tokens) stay in L1 while the rows stream by. */
#define F16_KC 32

/* All 16 rows of the group for tt tokens, rr rows at a time. */
static inline __attribute__((always_inline)) void f16_rows(int64_t nc, const uint8_t *wp, const float *y, size_t ys, int rr, int tt,
                                                           float *out, int64_t out_stride, bool pf) {
    const size_t quad = (size_t)nc * F16_LINE;
    __m512 keep[G * 8];
    for (int64_t c0 = 0; c0 < nc; c0 += F16_KC) {
        const int64_t c1 = c0 + F16_KC < nc ? c0 + F16_KC : nc;
        for (int r0 = 0; r0 < G; r0 += rr)
            f16_tile(c0, c1, wp + (size_t)(r0 / 4) * quad, quad, y, ys, rr, tt, c0 == 0, c1 == nc, keep + r0 * tt, out + r0, out_stride, pf, PF_L2);
    }
}


static void gemm_f16(int64_t n, const void *wpack, const void *act, size_t act_stride, const int32_t *sums, size_t sums_stride,
                     int32_t n_tok, float *out, int64_t out_stride) {
    (void)act, (void)act_stride;
    const int64_t nc = n / 16;
    const uint8_t *wp = wpack;
    const float *y = (const float *)sums;
    const bool pf = brisk_gemm_prefetch(n_tok);
    int32_t t = 0;
    /* the first full tile pulls the weights from DRAM and prefetches them, as every other type's
     * (it did not before session 21: gemm-micro 6 F16 2048, from DRAM, 20-25 -> 28-34 GMAC/s;
     * 64 F16 2048 39-48 -> 49-50; whole model llama-3.2-1b F16 pp64, one thread, 0.90 -> 0.98x) */
    for (; t + F16_TT <= n_tok; t += F16_TT)
        f16_rows(nc, wp, y + (size_t)t * sums_stride, sums_stride, F16_RR, F16_TT, out + (int64_t)t * out_stride, out_stride, t == 0 && pf);
    const float *yr = y + (size_t)t * sums_stride;
    float *o = out + (int64_t)t * out_stride;
    switch (n_tok - t) {
        case 1:   /* quad after quad: one sequential stream (see above) */
            for (int q = 0; q < 4; q++)
                f16_tile(0, nc, wp + (size_t)q * nc * F16_LINE, (size_t)nc * F16_LINE, yr, sums_stride, 4, 1, true, true, NULL, o + 4 * q, out_stride,
                         pf, n_tok == 1 ? PF_ONE : PF_L2);
            break;
        case 2: f16_rows(nc, wp, yr, sums_stride, 8, 2, o, out_stride, pf); break;
        case 3: f16_rows(nc, wp, yr, sums_stride, 8, 3, o, out_stride, pf); break;
        case 4: f16_rows(nc, wp, yr, sums_stride, 4, 4, o, out_stride, pf); break;
        case 5: f16_rows(nc, wp, yr, sums_stride, 4, 5, o, out_stride, pf); break;
        default: break;
    }
}

static void act_widen_f16(const void *act, int64_t n, int32_t *dst) {
    const uint16_t *h = act;
    float *f = (float *)dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(f + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))));
    for (; i < n; i++) f[i] = _cvtsh_ss(h[i]);
}

/* ---- activation sums ----------------------------------------------------------------- */

static void act_sums_q8_0(const void *act, int64_t n, int32_t *sums) {
    const brisk_block_q8_0 *y = act;
    const int64_t nb = n / 32;
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < nb; b++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)y[b].qs);
        const __m256i cs = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, v);   /* 8 chunk sums */
        _mm256_storeu_si256((__m256i *)(sums + 8 * b), _mm256_mullo_epi32(cs, _mm256_set1_epi32(-128)));
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(cs), _mm256_extracti128_si256(cs, 1));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
        sums[8 * nb + b] = -8 * _mm_cvtsi128_si32(h);
        const float d = fp16(y[b].d);
        memcpy(&sums[9 * nb + b], &d, sizeof d);
    }
}

/* ---- activation quantizer ---------------------------------------------------------------- */

/* brisk_q8_0_quantize_x86 16 lanes at a time: amax is exact in any order, d and
 * 1/d stay scalar, and vcvtps2dq rounds to nearest even like brisk_round_even
 * (|x * id| <= 127 here). Blocks with a non-finite amax (NaN or inf inputs)
 * take the scalar function, which defines those cases. */
static void quantize_q8_0(const float *src, void *dst, int64_t n) {
    brisk_block_q8_0 *b = dst;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        const __m512 x0 = _mm512_loadu_ps(src), x1 = _mm512_loadu_ps(src + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, x0), _mm512_andnot_ps(sign, x1)));
        const __mmask16 bad = _mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q);
        if (bad || !(amax <= 3.402823466e38f)) {
            brisk_q8_0_quantize_x86(src, &b[i], 32);
            continue;
        }
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        b[i].d = brisk_fp32_to_fp16(d);
        const __m512 idv = _mm512_set1_ps(id);
        _mm_storeu_si128((__m128i *)b[i].qs, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x0, idv))));
        _mm_storeu_si128((__m128i *)(b[i].qs + 16), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x1, idv))));
    }
}

/* brisk_fp32_to_fp16 16 lanes at a time: vcvtps2ph rounds to nearest even
 * with IEEE overflow and subnormals, like it; only NaN differs (it keeps the
 * payload, brisk returns 0x7e00), so vectors holding a NaN go through the
 * scalar function. It was 7% of F16 prefill time as a scalar loop. */
static void quantize_f16(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(src + i);
        if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) {
            for (int j = 0; j < 16; j++) h[i + j] = brisk_fp32_to_fp16(src[i + j]);
            continue;
        }
        _mm256_storeu_si256((__m256i *)(h + i), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++) h[i] = brisk_fp32_to_fp16(src[i]);
}

/* ---- attention ---------------------------------------------------------------------- */

/* One dword gather per two elements: the low halves are element i of the 16
 * rows, the high halves element i + 1. */
static void kq16(const float *q, const uint16_t *k, size_t stride, int d, float scale, float *out) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)(stride * 2)));
    __m512 s = _mm512_setzero_ps();
    for (int i = 0; i < d; i += 2) {
        const __m512i g = _mm512_i32gather_epi32(idx, (const void *)(k + i), 1);
        const __m512 k0 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
        const __m512 k1 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16)));
        s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(q[i]), k0));
        s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(q[i + 1]), k1));
    }
    _mm512_storeu_ps(out, _mm512_mul_ps(s, _mm512_set1_ps(scale)));
}

/* kq16 on keys already widened and transposed: k_l[i] = kt[i * stride + l]. */
static void kq16t(const float *q, const float *kt, size_t stride, int d, float scale, float *out) {
    __m512 s = _mm512_setzero_ps();
    for (int i = 0; i < d; i++) s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(q[i]), _mm512_loadu_ps(kt + (size_t)i * stride)));
    _mm512_storeu_ps(out, _mm512_mul_ps(s, _mm512_set1_ps(scale)));
}

static void axpy_f16(float *o, float p, const uint16_t *v, int d) {
    const __m512 pv = _mm512_set1_ps(p);
    int i = 0;
    for (; i + 16 <= d; i += 16) {
        const __m512 vv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + i)));
        _mm512_storeu_ps(o + i, _mm512_add_ps(_mm512_loadu_ps(o + i), _mm512_mul_ps(pv, vv)));
    }
    for (; i < d; i++) o[i] = o[i] + p * _cvtsh_ss(v[i]);
}

static void axpy_f16_rows(float *o, const float *p, const uint16_t *v, size_t stride, int n, int d) {
    int i = 0;
    for (; i + 32 <= d; i += 32) {
        __m512 a0 = _mm512_loadu_ps(o + i), a1 = _mm512_loadu_ps(o + i + 16);
        for (int j = 0; j < n; j++) {
            const uint16_t *vr = v + (size_t)j * stride + i;
            const __m512 pv = _mm512_set1_ps(p[j]);
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(pv, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)vr))));
            a1 = _mm512_add_ps(a1, _mm512_mul_ps(pv, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vr + 16)))));
        }
        _mm512_storeu_ps(o + i, a0);
        _mm512_storeu_ps(o + i + 16, a1);
    }
    for (; i + 16 <= d; i += 16) {
        __m512 a = _mm512_loadu_ps(o + i);
        for (int j = 0; j < n; j++)
            a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_set1_ps(p[j]),
                                               _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + (size_t)j * stride + i)))));
        _mm512_storeu_ps(o + i, a);
    }
    for (; i < d; i++)
        for (int j = 0; j < n; j++) o[i] = o[i] + p[j] * _cvtsh_ss(v[(size_t)j * stride + i]);
}

/* kq16t for up to 4 queries (q + h * qs) over up to 4 consecutive groups of
 * 16 keys (group g at kt + 16 g): out[h * os + 16 g + l]. Each output is the
 * kq16t chain; the QM x QG chains are interleaved because one chain alone waits
 * on the add latency (a GQA group's queries and a tile's key groups share
 * every K load). F16: kt holds F16 keys (the KV cache's transposed K), each
 * widened exactly as it is loaded. */
static inline __attribute__((always_inline)) void kqt_tile(const float *q, size_t qs, const void *kt, size_t stride, int d,
                                                           float scale, float *out, size_t os, const int QM, const int QG, const bool F16,
                                                           brisk_attn_pf *pf) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int h = 0; h < QM; h++)
#pragma GCC unroll 4
        for (int g = 0; g < QG; g++) acc[h][g] = _mm512_setzero_ps();
    for (int i = 0; i < d; i++) {
        brisk_attn_pf_next(pf);
        __m512 k[4];
#pragma GCC unroll 4
        for (int g = 0; g < QG; g++)
            k[g] = F16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)kt + (size_t)i * stride + 16 * g)))
                       : _mm512_loadu_ps((const float *)kt + (size_t)i * stride + 16 * g);
#pragma GCC unroll 4
        for (int h = 0; h < QM; h++) {
            const __m512 qv = _mm512_set1_ps(q[(size_t)h * qs + (size_t)i]);
#pragma GCC unroll 4
            for (int g = 0; g < QG; g++) acc[h][g] = _mm512_add_ps(acc[h][g], _mm512_mul_ps(qv, k[g]));
        }
    }
    const __m512 sv = _mm512_set1_ps(scale);
#pragma GCC unroll 4
    for (int h = 0; h < QM; h++)
#pragma GCC unroll 4
        for (int g = 0; g < QG; g++) _mm512_storeu_ps(out + (size_t)h * os + 16 * g, _mm512_mul_ps(acc[h][g], sv));
}

static inline __attribute__((always_inline)) void kq_multi(const float *q, size_t qs, int m, const void *kt, size_t stride, int ng, int d,
                                                           float scale, float *out, size_t os, const bool F16, brisk_attn_pf *pf) {
#define KQT(A, B) case (A) * 4 + (B) - 5: kqt_tile(qh, qs, kt, stride, d, scale, oh, os, A, B, F16, pf); break;
    for (int h0 = 0; h0 < m; h0 += 4) {
        const float *qh = q + (size_t)h0 * qs;
        float *oh = out + (size_t)h0 * os;
        const int mm = m - h0 < 4 ? m - h0 : 4;
        switch (mm * 4 + ng - 5) {
            KQT(1, 1) KQT(1, 2) KQT(1, 3) KQT(1, 4) KQT(2, 1) KQT(2, 2) KQT(2, 3) KQT(2, 4)
            KQT(3, 1) KQT(3, 2) KQT(3, 3) KQT(3, 4) KQT(4, 1) KQT(4, 2) KQT(4, 3) KQT(4, 4)
            default: break;
        }
    }
#undef KQT
}

static void kq_multi_t(const float *q, size_t qs, int m, const float *kt, size_t stride, int ng, int d, float scale, float *out,
                       size_t os) {
    kq_multi(q, qs, m, kt, stride, ng, d, scale, out, os, false, NULL);
}

static void kq_multi_h(const float *q, size_t qs, int m, const uint16_t *kt, size_t stride, int ng, int d, float scale, float *out,
                       size_t os, brisk_attn_pf *pf) {
    kq_multi(q, qs, m, kt, stride, ng, d, scale, out, os, true, pf);
}

/* axpy_f16_rows for up to 4 outputs sharing the V rows, 32 dimensions from
 * off: each V line is widened once for all of them. */
static inline __attribute__((always_inline)) void axpy_rows_tile(float *o, size_t os, const float *p, size_t ps, const uint16_t *v,
                                                                 size_t stride, int n, int off, const int QM, brisk_attn_pf *pf) {
    __m512 a[4][2];
#pragma GCC unroll 4
    for (int h = 0; h < QM; h++) {
        a[h][0] = _mm512_loadu_ps(o + (size_t)h * os + off);
        a[h][1] = _mm512_loadu_ps(o + (size_t)h * os + off + 16);
    }
    for (int j = 0; j < n; j++) {
        brisk_attn_pf_next(pf);
        const uint16_t *vr = v + (size_t)j * stride + off;
        const __m512 v0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)vr));
        const __m512 v1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vr + 16)));
#pragma GCC unroll 4
        for (int h = 0; h < QM; h++) {
            const __m512 pv = _mm512_set1_ps(p[(size_t)h * ps + (size_t)j]);
            a[h][0] = _mm512_add_ps(a[h][0], _mm512_mul_ps(pv, v0));
            a[h][1] = _mm512_add_ps(a[h][1], _mm512_mul_ps(pv, v1));
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < QM; h++) {
        _mm512_storeu_ps(o + (size_t)h * os + off, a[h][0]);
        _mm512_storeu_ps(o + (size_t)h * os + off + 16, a[h][1]);
    }
}

static void axpy_f16_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint16_t *v, size_t stride, int n, int d,
                                brisk_attn_pf *pf) {
    const int d32 = d & ~31;
    for (int h0 = 0; h0 < m; h0 += 4) {
        float *oh = o + (size_t)h0 * os;
        const float *ph = p + (size_t)h0 * ps;
        const int mm = m - h0 < 4 ? m - h0 : 4;
        for (int off = 0; off < d32; off += 32) switch (mm) {
                case 1: axpy_rows_tile(oh, os, ph, ps, v, stride, n, off, 1, pf); break;
                case 2: axpy_rows_tile(oh, os, ph, ps, v, stride, n, off, 2, pf); break;
                case 3: axpy_rows_tile(oh, os, ph, ps, v, stride, n, off, 3, pf); break;
                default: axpy_rows_tile(oh, os, ph, ps, v, stride, n, off, 4, pf); break;
            }
        if (d32 < d)   /* the last dimensions: each output on its own (dimensions are independent) */
            for (int h = 0; h < mm; h++) axpy_f16_rows(oh + (size_t)h * os + d32, ph + (size_t)h * ps, v + d32, stride, n, d - d32);
    }
}

/* brisk_expf on 8 floats, lanes of double: the same fused and unfused
 * double operations in the same order, the 2^(k/32) table through two
 * two-source permutes. Lanes outside the main path (|x| >= 88, NaN) come back
 * in *special for the caller to redo with the scalar function. */
static inline __attribute__((always_inline)) __m256 exp8(__m256 xs, __mmask8 *special) {
    const __m512d inv = _mm512_set1_pd(BRISK_EXPF_INV_LN2_N), shift = _mm512_set1_pd(BRISK_EXPF_SHIFT);
    const __m512i t0 = _mm512_loadu_si512(brisk_exp2_table), t1 = _mm512_loadu_si512(brisk_exp2_table + 8);
    const __m512i t2 = _mm512_loadu_si512(brisk_exp2_table + 16), t3 = _mm512_loadu_si512(brisk_exp2_table + 24);
    const __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(xs), 20), _mm256_set1_epi32(0x7ff));
    *special = _mm256_cmpgt_epi32_mask(top, _mm256_set1_epi32(0x42a));
    const __m512d xd = _mm512_cvtps_pd(xs);
    const __m512d z = _mm512_fmadd_pd(inv, xd, shift);
    const __m512d kd = _mm512_sub_pd(z, shift);
    const __m512d r = _mm512_fmsub_pd(inv, xd, kd);
    const __m512i zi = _mm512_castpd_si512(z);
    const __m512i lo = _mm512_permutex2var_epi64(t0, zi, t1), hi = _mm512_permutex2var_epi64(t2, zi, t3);
    const __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(zi, _mm512_set1_epi64(16)), lo, hi);
    const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(zi, 47)));
    const __m512d p = _mm512_fmadd_pd(_mm512_set1_pd(BRISK_EXPF_C0), r, _mm512_set1_pd(BRISK_EXPF_C1));
    const __m512d y = _mm512_fmadd_pd(p, _mm512_mul_pd(r, r), _mm512_fmadd_pd(_mm512_set1_pd(BRISK_EXPF_C2), r, _mm512_set1_pd(1.0)));
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

/* brisk_exp_sub: the sum's eight partials are the lanes of one vector of
 * doubles (entry i in lane i % 8), combined by brisk_sum8_combine */
static double exp_sub(float *x, int64_t n, float m) {
    const __m256 mv = _mm256_set1_ps(m);
    __m512d acc = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __mmask8 special;
        const __m256 xs = _mm256_sub_ps(_mm256_loadu_ps(x + i), mv);
        const __m256 e8 = exp8(xs, &special);
        const __m256 e = brisk_exp8_fix_special(xs, e8, (unsigned)special);
        _mm256_storeu_ps(x + i, e);
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(e));
    }
    double p[8];
    _mm512_storeu_pd(p, acc);
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
        __mmask8 special;
        const __m256 gv = _mm256_loadu_ps(g + i);
        const __m256 e = exp8(_mm256_xor_ps(gv, sign), &special);
        brisk_swiglu8_store(h + i, g + i, u + i, gv, e, (unsigned)special);
    }
    for (; i < n; i++) h[i] = g[i] / (1.0f + brisk_expf(-g[i])) * u[i];
}

static const brisk_gemm_kernels avx512_table = {
    .exp_sub = exp_sub,
    .swiglu = swiglu,
    .isa = "avx512vnni",
    .gemm = {
        [BRISK_Q_Q4_0] = gemm_q4_0,
        [BRISK_Q_Q8_0] = gemm_q8_0,
        [BRISK_Q_Q4_K] = gemm_q4_k,
        [BRISK_Q_Q5_K] = gemm_q5_k,
        [BRISK_Q_Q5_0] = gemm_q5_0,
        [BRISK_Q_Q6_K] = gemm_q6_k,
        [BRISK_Q_F16] = gemm_f16,
        [BRISK_Q_IQ4_NL] = gemm_iq4_nl,
        [BRISK_Q_IQ4_XS] = gemm_iq4_xs,
        [BRISK_Q_MXFP4] = gemm_mxfp4,
    },
    .quantize_act = {
        [BRISK_Q_Q8_0] = quantize_q8_0,
        [BRISK_Q_F16] = quantize_f16,
    },
    .act_sums = {
        [BRISK_Q_F16] = act_widen_f16,
        [BRISK_Q_Q8_0] = act_sums_q8_0,
    },
};

const brisk_gemm_kernels *brisk_gemm_avx512(void) { return &avx512_table; }

static const brisk_attn_kernels attn_table = {
    .isa = "avx512",
    .kq16 = kq16,
    .axpy_f16 = axpy_f16,
    .axpy_f16_rows = axpy_f16_rows,
    .kq16t = kq16t,
    .kq_multi_t = kq_multi_t,
    .kq_multi_h = kq_multi_h,
    .axpy_f16_rows_multi = axpy_f16_rows_multi,
    /* the quantized KV cache (avx512_attn_kv.c) */
    .kq_multi_q8_0 = brisk_avx512_kq_multi_q8_0,
    .kq_multi_q4_0 = brisk_avx512_kq_multi_q4_0,
    .axpy_f32_rows_multi = brisk_avx512_axpy_f32_rows_multi,
    .axpy_q8_0_rows_multi = brisk_avx512_axpy_q8_0_rows_multi,
    .axpy_q4_0_rows_multi = brisk_avx512_axpy_q4_0_rows_multi,
    .kq_multi_k4 = brisk_avx512_kq_multi_k4,
    .kq_multi_k2 = brisk_avx512_kq_multi_k2,
    .axpy_k4_rows_multi = brisk_avx512_axpy_k4_rows_multi,
    .axpy_k2_rows_multi = brisk_avx512_axpy_k2_rows_multi,
};

const brisk_attn_kernels *brisk_attn_avx512(void) { return &attn_table; }
