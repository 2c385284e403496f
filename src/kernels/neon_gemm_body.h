/* neon_gemm_body: the packed GEMM kernels for aarch64 (layout and contract in
 * kernels.h), compiled twice: by neon_dotprod_gemm.c (+dotprod: SDOT) and by
 * neon_i8mm_gemm.c (+dotprod+i8mm: the same, with SMMLA for Q4_0's tiles of
 * two or more tokens). The includer defines NEON_GEMM_I8MM (0 or 1),
 * NEON_GEMM_ISA (the table's name) and NEON_GEMM_TABLE (the function that
 * returns it).
 *
 * The packed layout is the x86 one (pack.c, portable): a 64-byte line holds
 * one 4-byte chunk of each of the 16 rows, so here it is four q registers
 * ("quads" of 4 rows), one int32 (or float) lane per row. SDOT by element
 * (vdotq_laneq_s32) multiplies a quad by one 4-byte chunk of an activation
 * row, taken from a q register that holds 4 chunks: per instruction, 4 rows
 * times the 4 products of one chunk, which is exactly one of ref's integer
 * lanes (LANES) or one step of its block sum (SCALAR). Each float lane then
 * does ref's per-row arithmetic in ref's order (the same integer sums, exact
 * in any order, converted and fused in the same sequence), so every output
 * is bit-identical to ref's vec_dot whatever the tile or the batch:
 *   SCALAR (Q4_0, Q2_K, Q4_K): one int32 per block (or 128/64-element part),
 *     acc = fma((float)isum, dw*dy, acc), min chains apart, as ref.c;
 *   LANES (Q8_0, Q5_0, Q4_1, Q5_1, Q3_K, Q5_K, Q6_K): 8 int32 lanes per
 *     (row, token) and block, acc[m] = fma(dw*dy, (float)lane[m], acc[m]),
 *     ref's hsum8 at the end, plus the min or offset terms as ref.c.
 * Weight values go into SDOT as int8: Q8_0's bytes (stored + 128, flipped
 * back), Q5_0 and Q3_K with their offsets taken off (-16..15, -4..3), every
 * other type's unsigned values (0..63) as they are; Q4_0's -8 comes from the
 * activation sums (act_sums). Sub-block scales multiply the int32 chunk sums
 * (vmlaq_s32), all exact: every sum stays far below 2^31.
 *
 * i8mm (SMMLA: a 2x8 by 8x2 int8 product into 2x2 int32) needs 8 consecutive
 * elements of one row per operand half; two adjacent lines zipped by 32-bit
 * lanes give that (rows r, r+1 of chunks c, c+1), so the layout serves it
 * as it is. It can only serve where ref keeps one int32 per block (Q4_0
 * here); LANES types need 4-product lane sums, which 8-product sums cannot
 * give. It halves the dot-product instructions but, with its zips, executes
 * more instructions in all than the SDOT tile (bench/neon-insns.sh; see
 * docs/PERFORMANCE.md), so NEON_GEMM_I8MM 0 is the switch to flip if
 * hardware finds it slower.
 *
 * Tiles: 32 vector registers. Decode (one or two tokens) does all four quads
 * in one pass so the weights stream once, with the x86 tables' prefetching
 * (L2 8 KiB ahead, and at decode L1 2 KiB ahead); prefill takes 4 tokens per
 * tile and two quads (8 rows) per pass, the second pass finding the group's
 * lines in L1/L2. The LANES accumulators (8 per row quad and token) live in
 * memory at these tile sizes, as the compiler places them. */
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/convert.h"

#include <arm_neon.h>
#include <stdbool.h>
#include <string.h>

#define G BRISK_GEMM_ROWS
#define INL static inline __attribute__((always_inline))
#define MAX_TT 4   /* tokens per tile: the array bound, and the prefill tile */

/* acc + per 4-byte group of w (one row each) its 4 products with chunk `lane`
 * of y. The switch keeps the lane an immediate whatever the optimizer does. */
INL int32x4_t dot_lane(int32x4_t acc, int8x16_t w, int8x16_t y, const int lane) {
    switch (lane) {
        case 0: return vdotq_laneq_s32(acc, w, y, 0);
        case 1: return vdotq_laneq_s32(acc, w, y, 1);
        case 2: return vdotq_laneq_s32(acc, w, y, 2);
        default: return vdotq_laneq_s32(acc, w, y, 3);
    }
}

/* v >> s per byte, s an immediate in 0..7 (0: v). */
INL uint8x16_t shr_u8(uint8x16_t v, const int s) {
    switch (s) {
        case 0: return v;
        case 1: return vshrq_n_u8(v, 1);
        case 2: return vshrq_n_u8(v, 2);
        case 3: return vshrq_n_u8(v, 3);
        case 4: return vshrq_n_u8(v, 4);
        case 5: return vshrq_n_u8(v, 5);
        case 6: return vshrq_n_u8(v, 6);
        default: return vshrq_n_u8(v, 7);
    }
}

INL int8x16_t as_s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

/* Quad q (rows 4q..4q+3) of the 64-byte line at p. */
INL uint8x16_t line_quad(const uint8_t *p, int q) { return vld1q_u8(p + 16 * q); }

/* Activation block b's scale as F32, from act_sums (see kernels.h). */
INL float act_scale(const int32_t *row_sums, int64_t nb, int64_t b) {
    float d;
    memcpy(&d, &row_sums[9 * nb + b], sizeof d);
    return d;
}

INL float fp16_to_f32(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

/* 4 rows' fp16 scales (8 bytes at p) widened exactly. */
INL float32x4_t load_f16x4(const uint8_t *p) {
    uint16_t h[4];
    memcpy(h, p, sizeof h);
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

/* 4 rows' unsigned (u8) or signed (s8) scale bytes at p as int32 lanes. */
INL int32x4_t load_u8x4(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(v))))));
}

INL int32x4_t load_s8x4(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(v)))));
}

/* Quad q's part of the 64-bit 5th-bit mask at p (bit 4r + k: row r, element
 * k of the chunk; little-endian, so bits 16q.. are bytes 2q and 2q+1) as the
 * quad's bytes: 0x10 where the bit is set, else 0. */
INL uint8x16_t mask_quad(const uint8_t *p, int q) {
    static const uint8_t sel[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t b = vcombine_u8(vdup_n_u8(p[2 * q]), vdup_n_u8(p[2 * q + 1]));
    return vandq_u8(vtstq_u8(b, vld1q_u8(sel)), vdupq_n_u8(0x10));
}

/* ref's hsum8 on 8 lanes of accumulators: (a[i] + a[i+4]), then (0,2) + (1,3). */
INL float32x4_t hsum8_lanes(const float32x4_t a[8]) {
    const float32x4_t t0 = vaddq_f32(a[0], a[4]), t1 = vaddq_f32(a[1], a[5]);
    const float32x4_t t2 = vaddq_f32(a[2], a[6]), t3 = vaddq_f32(a[3], a[7]);
    return vaddq_f32(vaddq_f32(t0, t2), vaddq_f32(t1, t3));
}

/* ---- prefetch (as the x86 tables: to L2 PF_AHEAD ahead in the pass that pulls
 * the weights from DRAM, and at decode also to L1 PF_NEAR ahead) ---------------- */

#define PF_AHEAD 8192
#define PF_NEAR 2048

INL void prefetch_ahead(const uint8_t *p, size_t bytes, bool pf, bool near) {
    if (!pf) return;
    #pragma GCC unroll 64
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + PF_AHEAD + o, 0, 2);
    if (near) {
        #pragma GCC unroll 64
        for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + PF_NEAR + o, 0, 3);
    }
}

/* The gemm entry for a tile function: one or two tokens in one pass over the
 * four quads (decode), more in token tiles of MAX_TT, two quads per pass. The
 * tile gets tt, its quads and its prefetch flag as constants (each inlined
 * copy has them folded); only the first pass over the weights prefetches. */
#define TILE_TT(tile, k, q0, nq, pf, ...)                                                                         \
    switch (k) {                                                                                                  \
        case 1: (pf) ? tile(__VA_ARGS__, 1, q0, nq, true) : tile(__VA_ARGS__, 1, q0, nq, false); break;           \
        case 2: (pf) ? tile(__VA_ARGS__, 2, q0, nq, true) : tile(__VA_ARGS__, 2, q0, nq, false); break;           \
        case 3: (pf) ? tile(__VA_ARGS__, 3, q0, nq, true) : tile(__VA_ARGS__, 3, q0, nq, false); break;           \
        case 4: (pf) ? tile(__VA_ARGS__, 4, q0, nq, true) : tile(__VA_ARGS__, 4, q0, nq, false); break;           \
        default: break;                                                                                           \
    }

#define DEFINE_GEMM_PF(fn, tile, BLOCK_ELEMS, PF_ON)                                                                 \
    static void fn(int64_t n, const void *wpack, const void *act, size_t as, const int32_t *sums, size_t ss,          \
                   int32_t n_tok, float *out, int64_t os) {                                                           \
        const int64_t nb = n / (BLOCK_ELEMS);                                                                         \
        const uint8_t *a = act;                                                                                       \
        const bool pf_on = (PF_ON);                                                                                   \
        if (n_tok <= 2) {                                                                                             \
            TILE_TT(tile, n_tok, 0, 4, pf_on, nb, wpack, a, as, sums, ss, out, os)                                    \
            return;                                                                                                   \
        }                                                                                                             \
        for (int32_t t = 0; t < n_tok; t += MAX_TT) {                                                                 \
            const int32_t k = n_tok - t < MAX_TT ? n_tok - t : MAX_TT;                                                \
            for (int h = 0; h < 2; h++)                                                                               \
                TILE_TT(tile, k, 2 * h, 2, t == 0 && h == 0 && pf_on, nb, wpack, a + (size_t)t * as, as, sums + (size_t)t * ss, \
                        ss, out + (int64_t)t * os, os)                                                                \
        }                                                                                                             \
    }

/* As avx2_gemm_body.h: tiles that stream each group in order follow
 * brisk_gemm_prefetch at one token; those that read a group from several regions at
 * once (Q3_K, Q5_K) and Q6_K always prefetch. */
#define PF_MULTI_REGION true
#define DEFINE_GEMM(fn, tile, BLOCK_ELEMS) DEFINE_GEMM_PF(fn, tile, BLOCK_ELEMS, brisk_gemm_prefetch(n_tok))

#define TILE_ARGS                                                                                                     \
    int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,          \
        int64_t os, const int tt, const int q0, const int nq, const bool pf

/* ---- Q4_0 (SCALAR, against Q8_0) ------------------------------------------------------------
 * isum = -8*sum(y) (from act_sums) + sum nibble*y; acc = fma((float)isum, dw*dy, acc). Line c
 * holds elements 4c.. in its low nibbles (activation chunk c) and 16+4c.. in its high ones
 * (chunk 4+c). */

#define Q40_GROUP (G * sizeof(brisk_block_q4_0))

INL void q4_0_tile(TILE_ARGS) {
    float32x4_t acc[4][MAX_TT];
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) acc[qq][t] = vdupq_n_f32(0.0f);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q40_GROUP;
        prefetch_ahead(blk, Q40_GROUP, pf, tt <= 2);
        int8x16_t ylo[MAX_TT], yhi[MAX_TT];
        float dy[MAX_TT];
        int32_t off[MAX_TT];
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) {
            const int8_t *y = ((const brisk_block_q8_0 *)(act + (size_t)t * as) + b)->qs;
            ylo[t] = vld1q_s8(y);
            yhi[t] = vld1q_s8(y + 16);
            dy[t] = act_scale(sums + (size_t)t * ss, nb, b);
            off[t] = sums[(size_t)t * ss + 8 * nb + b];
        }
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            int32x4_t ch[MAX_TT];
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++) ch[t] = vdupq_n_s32(off[t]);
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const uint8x16_t v = line_quad(blk + 32 + 64 * c, q);
                const int8x16_t lo = as_s8(vandq_u8(v, m4)), hi = as_s8(vshrq_n_u8(v, 4));
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) ch[t] = dot_lane(dot_lane(ch[t], lo, ylo[t], c), hi, yhi[t], c);
            }
            const float32x4_t dw = load_f16x4(blk + 8 * q);
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++) acc[qq][t] = vfmaq_f32(acc[qq][t], vcvtq_f32_s32(ch[t]), vmulq_n_f32(dw, dy[t]));
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) vst1q_f32(out + (int64_t)t * os + 4 * (q0 + qq), acc[qq][t]);
}

#if NEON_GEMM_I8MM
/* Q4_0 with SMMLA over token pairs: lines c and c+1 zipped by 32-bit lanes give rows
 * (4q, 4q+1) and (4q+2, 4q+3), 8 consecutive elements each; the activations of tokens
 * (2p, 2p+1) give the matching 8 elements each. Four SMMLAs per row pair and token pair
 * give the exact block sums (w_r . y_t for r, r+1 and t, t+1: lanes r.t, r.t+1, r+1.t,
 * r+1.t+1), which start from the -8*sum(y) terms; then the same fma per lane with
 * dw_r * dy_t as the SDOT tile. tp token pairs (1 or 2). */
INL void q4_0_mm_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                      int64_t os, const int tp, const int q0, const int nq, const bool pf) {
    float32x4_t acc[4][2][2];   /* [quad][row pair][token pair] */
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 2
        for (int p = 0; p < tp; p++) acc[qq][0][p] = acc[qq][1][p] = vdupq_n_f32(0.0f);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q40_GROUP;
        prefetch_ahead(blk, Q40_GROUP, pf, tp == 1);
        int8x16_t B[2][4];   /* token pair p, elements 8k..8k+7 of both tokens */
        int32x4_t off[2];
        float32x4_t dyv[2];
        #pragma GCC unroll 2
        for (int p = 0; p < tp; p++) {
            const int32_t *s0 = sums + (size_t)(2 * p) * ss, *s1 = sums + (size_t)(2 * p + 1) * ss;
            const int8_t *y0 = ((const brisk_block_q8_0 *)(act + (size_t)(2 * p) * as) + b)->qs;
            const int8_t *y1 = ((const brisk_block_q8_0 *)(act + (size_t)(2 * p + 1) * as) + b)->qs;
            #pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const int64x2_t a0 = vreinterpretq_s64_s8(vld1q_s8(y0 + 16 * h)), a1 = vreinterpretq_s64_s8(vld1q_s8(y1 + 16 * h));
                B[p][2 * h] = vreinterpretq_s8_s64(vzip1q_s64(a0, a1));
                B[p][2 * h + 1] = vreinterpretq_s8_s64(vzip2q_s64(a0, a1));
            }
            const int32_t o[4] = {s0[8 * nb + b], s1[8 * nb + b], s0[8 * nb + b], s1[8 * nb + b]};
            const float d0 = act_scale(s0, nb, b), d1 = act_scale(s1, nb, b);
            const float d[4] = {d0, d1, d0, d1};
            off[p] = vld1q_s32(o);
            dyv[p] = vld1q_f32(d);
        }
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            uint8x16_t v[4];
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) v[c] = line_quad(blk + 32 + 64 * c, q);
            int8x16_t A[2][4];   /* row pair (0: rows 4q, 4q+1; 1: 4q+2, 4q+3), elements 8k.. */
            #pragma GCC unroll 2
            for (int k = 0; k < 2; k++) {   /* low nibbles of lines 2k, 2k+1 (elements 8k..), high ones (16 + 8k..) */
                const int32x4_t l0 = vreinterpretq_s32_u8(vandq_u8(v[2 * k], m4)), l1 = vreinterpretq_s32_u8(vandq_u8(v[2 * k + 1], m4));
                const int32x4_t h0 = vreinterpretq_s32_u8(vshrq_n_u8(v[2 * k], 4)), h1 = vreinterpretq_s32_u8(vshrq_n_u8(v[2 * k + 1], 4));
                A[0][k] = vreinterpretq_s8_s32(vzip1q_s32(l0, l1));
                A[1][k] = vreinterpretq_s8_s32(vzip2q_s32(l0, l1));
                A[0][2 + k] = vreinterpretq_s8_s32(vzip1q_s32(h0, h1));
                A[1][2 + k] = vreinterpretq_s8_s32(vzip2q_s32(h0, h1));
            }
            const float32x4_t dw = load_f16x4(blk + 8 * q);
            const float32x4_t dwp[2] = {vzip1q_f32(dw, dw), vzip2q_f32(dw, dw)};   /* (dw_r, dw_r, dw_r+1, dw_r+1) */
            #pragma GCC unroll 2
            for (int p = 0; p < tp; p++)
                #pragma GCC unroll 2
                for (int rp = 0; rp < 2; rp++) {
                    int32x4_t c = off[p];
                    #pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) c = vmmlaq_s32(c, A[rp][k], B[p][k]);
                    acc[qq][rp][p] = vfmaq_f32(acc[qq][rp][p], vcvtq_f32_s32(c), vmulq_f32(dwp[rp], dyv[p]));
                }
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 2
        for (int p = 0; p < tp; p++) {   /* (r.t, r.t+1, r+1.t, r+1.t+1) x 2 -> token rows */
            vst1q_f32(out + (int64_t)(2 * p) * os + 4 * (q0 + qq), vuzp1q_f32(acc[qq][0][p], acc[qq][1][p]));
            vst1q_f32(out + (int64_t)(2 * p + 1) * os + 4 * (q0 + qq), vuzp2q_f32(acc[qq][0][p], acc[qq][1][p]));
        }
}

/* Token pairs through SMMLA, an odd last token through the SDOT tile: the bits are the same. */
static void gemm_q4_0(int64_t n, const void *wpack, const void *act, size_t as, const int32_t *sums, size_t ss, int32_t n_tok,
                      float *out, int64_t os) {
    const int64_t nb = n / 32;
    const uint8_t *a = act;
    if (n_tok == 1) {
        if (brisk_gemm_prefetch(1)) q4_0_tile(nb, wpack, a, as, sums, ss, out, os, 1, 0, 4, true);
        else q4_0_tile(nb, wpack, a, as, sums, ss, out, os, 1, 0, 4, false);
        return;
    }
    if (n_tok == 2) {
        q4_0_mm_tile(nb, wpack, a, as, sums, ss, out, os, 1, 0, 4, true);
        return;
    }
    for (int32_t t = 0; t < n_tok; t += MAX_TT) {
        const int32_t k = n_tok - t < MAX_TT ? n_tok - t : MAX_TT;
        const uint8_t *at = a + (size_t)t * as;
        const int32_t *st = sums + (size_t)t * ss;
        float *ot = out + (int64_t)t * os;
        for (int h = 0; h < 2; h++) {
            const bool pf = t == 0 && h == 0;
            if (k >= 4) {
                if (pf) q4_0_mm_tile(nb, wpack, at, as, st, ss, ot, os, 2, 2 * h, 2, true);
                else q4_0_mm_tile(nb, wpack, at, as, st, ss, ot, os, 2, 2 * h, 2, false);
            } else if (k >= 2) {
                if (pf) q4_0_mm_tile(nb, wpack, at, as, st, ss, ot, os, 1, 2 * h, 2, true);
                else q4_0_mm_tile(nb, wpack, at, as, st, ss, ot, os, 1, 2 * h, 2, false);
            }
            if (k & 1) {
                const int32_t l = k - 1;   /* the odd token; the pair before it prefetched the lines */
                q4_0_tile(nb, wpack, at + (size_t)l * as, as, st + (size_t)l * ss, ss, ot + (int64_t)l * os, os, 1, 2 * h, 2, pf && k == 1);
            }
        }
    }
}
#else
DEFINE_GEMM(gemm_q4_0, q4_0_tile, 32)
#endif

/* ---- Q8_0 (LANES, against Q8_0) -------------------------------------------------------------
 * lane c = sum w*y of chunk c (the stored w + 128 flipped back to int8);
 * acc[c] = fma(dw*dy, (float)lane, acc[c]); hsum8. */

#define Q80_GROUP (G * sizeof(brisk_block_q8_0))

INL void q8_0_tile(TILE_ARGS) {
    float32x4_t acc[4][MAX_TT][8];
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++)
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) acc[qq][t][c] = vdupq_n_f32(0.0f);
    const uint8x16_t b80 = vdupq_n_u8(0x80);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q80_GROUP;
        prefetch_ahead(blk, Q80_GROUP, pf, tt <= 2);
        int8x16_t y[MAX_TT][2];
        float dy[MAX_TT];
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) {
            const int8_t *qs = ((const brisk_block_q8_0 *)(act + (size_t)t * as) + b)->qs;
            y[t][0] = vld1q_s8(qs);
            y[t][1] = vld1q_s8(qs + 16);
            dy[t] = act_scale(sums + (size_t)t * ss, nb, b);
        }
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            const float32x4_t dw = load_f16x4(blk + 8 * q);
            float32x4_t d[MAX_TT];
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++) d[t] = vmulq_n_f32(dw, dy[t]);
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const int8x16_t w = as_s8(veorq_u8(line_quad(blk + 32 + 64 * c, q), b80));
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) {
                    const int32x4_t lane = dot_lane(vdupq_n_s32(0), w, y[t][c / 4], c % 4);
                    acc[qq][t][c] = vfmaq_f32(acc[qq][t][c], d[t], vcvtq_f32_s32(lane));
                }
            }
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) vst1q_f32(out + (int64_t)t * os + 4 * (q0 + qq), hsum8_lanes(acc[qq][t]));
}

DEFINE_GEMM(gemm_q8_0, q8_0_tile, 32)

/* ---- Q5_0 (LANES, like Q8_0) ----------------------------------------------------------------
 * value = nibble | 16*bit, q = value - 16 (-16..15, as int8): lane c = sum q*y of chunk c.
 * Chunk c (elements 4c..) is the low nibbles of line c, or the high ones of line c - 4; its
 * 5th bits are the 64-bit mask at 32 + 8c. */

#define Q50_GROUP (G * sizeof(brisk_block_q5_0))

INL void q5_0_tile(TILE_ARGS) {
    float32x4_t acc[4][MAX_TT][8];
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++)
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) acc[qq][t][c] = vdupq_n_f32(0.0f);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), b16 = vdupq_n_u8(16);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q50_GROUP;
        prefetch_ahead(blk, Q50_GROUP, pf, tt <= 2);
        int8x16_t y[MAX_TT][2];
        float dy[MAX_TT];
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) {
            const int8_t *qs = ((const brisk_block_q8_0 *)(act + (size_t)t * as) + b)->qs;
            y[t][0] = vld1q_s8(qs);
            y[t][1] = vld1q_s8(qs + 16);
            dy[t] = act_scale(sums + (size_t)t * ss, nb, b);
        }
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            const float32x4_t dw = load_f16x4(blk + 8 * q);
            float32x4_t d[MAX_TT];
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++) d[t] = vmulq_n_f32(dw, dy[t]);
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const uint8x16_t v = line_quad(blk + 96 + 64 * (c & 3), q);
                const uint8x16_t nib = c < 4 ? vandq_u8(v, m4) : vshrq_n_u8(v, 4);
                const int8x16_t w = as_s8(vsubq_u8(vorrq_u8(nib, mask_quad(blk + 32 + 8 * c, q)), b16));
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) {
                    const int32x4_t lane = dot_lane(vdupq_n_s32(0), w, y[t][c / 4], c % 4);
                    acc[qq][t][c] = vfmaq_f32(acc[qq][t][c], d[t], vcvtq_f32_s32(lane));
                }
            }
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) vst1q_f32(out + (int64_t)t * os + 4 * (q0 + qq), hsum8_lanes(acc[qq][t]));
}

DEFINE_GEMM(gemm_q5_0, q5_0_tile, 32)

/* ---- Q4_1 and Q5_1 (LANES plus the min term, against Q8_1) ----------------------------------
 * Lane c = sum value*y of chunk c, value = nibble (| 16*bit for Q5_1, from the masks as
 * Q5_0), unsigned 0..31; acc[c] = fma(dw*dy, (float)lane, acc[c]); per block
 * mins = fma(m, s, mins) (s = the activation's d * sum); result hsum8(acc) + mins. */

INL void q41_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, float *out, int64_t os, const int tt, const int q0,
                  const int nq, const bool pf, const bool five) {
    const size_t group = G * (five ? sizeof(brisk_block_q5_1) : sizeof(brisk_block_q4_1)), lines = five ? 128 : 64;
    float32x4_t acc[4][MAX_TT][8], mins[4][MAX_TT];
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) {
            mins[qq][t] = vdupq_n_f32(0.0f);
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) acc[qq][t][c] = vdupq_n_f32(0.0f);
        }
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * group;
        prefetch_ahead(blk, group, pf, tt <= 2);
        int8x16_t y[MAX_TT][2];
        float dy[MAX_TT], sy[MAX_TT];
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) {
            const brisk_block_q8_1 *yb = (const brisk_block_q8_1 *)(act + (size_t)t * as) + b;
            y[t][0] = vld1q_s8(yb->qs);
            y[t][1] = vld1q_s8(yb->qs + 16);
            dy[t] = fp16_to_f32(yb->d);
            sy[t] = fp16_to_f32(yb->s);
        }
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            const float32x4_t dw = load_f16x4(blk + 8 * q), mw = load_f16x4(blk + 32 + 8 * q);
            float32x4_t d[MAX_TT];
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++) {
                d[t] = vmulq_n_f32(dw, dy[t]);
                mins[qq][t] = vfmaq_f32(mins[qq][t], mw, vdupq_n_f32(sy[t]));
            }
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const uint8x16_t v = line_quad(blk + lines + 64 * (c & 3), q);
                uint8x16_t w = c < 4 ? vandq_u8(v, m4) : vshrq_n_u8(v, 4);
                if (five) w = vorrq_u8(w, mask_quad(blk + 64 + 8 * c, q));
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) {
                    const int32x4_t lane = dot_lane(vdupq_n_s32(0), as_s8(w), y[t][c / 4], c % 4);
                    acc[qq][t][c] = vfmaq_f32(acc[qq][t][c], d[t], vcvtq_f32_s32(lane));
                }
            }
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) vst1q_f32(out + (int64_t)t * os + 4 * (q0 + qq), vaddq_f32(hsum8_lanes(acc[qq][t]), mins[qq][t]));
}

INL void q4_1_tile(TILE_ARGS) {
    (void)sums, (void)ss;
    q41_tile(nb, wp, act, as, out, os, tt, q0, nq, pf, false);
}

INL void q5_1_tile(TILE_ARGS) {
    (void)sums, (void)ss;
    q41_tile(nb, wp, act, as, out, os, tt, q0, nq, pf, true);
}

DEFINE_GEMM(gemm_q4_1, q4_1_tile, 32)
DEFINE_GEMM(gemm_q5_1, q5_1_tile, 32)

/* ---- Q2_K (SCALAR per 128-element half, against Q8_K) ---------------------------------------
 * Half H: isum = sum over bit pair s and 16-element group g of (sc[8H+2s+g] & 15) * dot(group),
 * acc = fma((float)isum, dw*dy, acc); imin = sum_j (sc[j] >> 4) * bsums[j] (j = 8H..8H+7),
 * accm = fma((float)imin, dminw*dy, accm); result acc - accm, as ref. Line k = 8H + 4g + i
 * holds qs bytes 32H + 4(4g + i).., whose bit pair s is element 128H + 32s + 16g + 4i... */

#define Q2K_GROUP (G * sizeof(brisk_block_q2_k))

INL void q2_k_tile(TILE_ARGS) {
    (void)sums, (void)ss;
    float32x4_t acc[4][MAX_TT], accm[4][MAX_TT];
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) acc[qq][t] = accm[qq][t] = vdupq_n_f32(0.0f);
    const uint8x16_t m3 = vdupq_n_u8(3);
    const int32x4_t m15 = vdupq_n_s32(15);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q2K_GROUP;
        prefetch_ahead(blk, Q2K_GROUP, pf, tt <= 2);
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            const float32x4_t dw = load_f16x4(blk + 8 * q), mw = load_f16x4(blk + 32 + 8 * q);
            #pragma GCC unroll 1
            for (int H = 0; H < 2; H++) {
                int32x4_t isum[MAX_TT], imin[MAX_TT];
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) isum[t] = imin[t] = vdupq_n_s32(0);
                #pragma GCC unroll 4
                for (int sp = 0; sp < 4; sp++)
                    #pragma GCC unroll 2
                    for (int g = 0; g < 2; g++) {
                        int32x4_t ch[MAX_TT];
                        #pragma GCC unroll 4
                        for (int t = 0; t < tt; t++) ch[t] = vdupq_n_s32(0);
                        #pragma GCC unroll 4
                        for (int i = 0; i < 4; i++) {
                            const int k = 8 * H + 4 * g + i;
                            const int8x16_t qv = as_s8(vandq_u8(shr_u8(line_quad(blk + 320 + 64 * k, q), 2 * sp), m3));
                            #pragma GCC unroll 4
                            for (int t = 0; t < tt; t++) {
                                const int8_t *q8 = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->qs + 128 * H + 32 * sp + 16 * g;
                                ch[t] = dot_lane(ch[t], qv, vld1q_s8(q8), i);
                            }
                        }
                        const int32x4_t sc = vandq_s32(load_u8x4(blk + 64 + 16 * (8 * H + 2 * sp + g) + 4 * q), m15);
                        #pragma GCC unroll 4
                        for (int t = 0; t < tt; t++) isum[t] = vmlaq_s32(isum[t], ch[t], sc);
                    }
                #pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    const int32x4_t mn = vshrq_n_s32(load_u8x4(blk + 64 + 16 * (8 * H + j) + 4 * q), 4);
                    #pragma GCC unroll 4
                    for (int t = 0; t < tt; t++)
                        imin[t] = vmlaq_n_s32(imin[t], mn, ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->bsums[8 * H + j]);
                }
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) {
                    const float dy = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->d;
                    acc[qq][t] = vfmaq_f32(acc[qq][t], vcvtq_f32_s32(isum[t]), vmulq_n_f32(dw, dy));
                    accm[qq][t] = vfmaq_f32(accm[qq][t], vcvtq_f32_s32(imin[t]), vmulq_n_f32(mw, dy));
                }
            }
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) vst1q_f32(out + (int64_t)t * os + 4 * (q0 + qq), vsubq_f32(acc[qq][t], accm[qq][t]));
}

DEFINE_GEMM(gemm_q2_k, q2_k_tile, BRISK_QK_K)

/* ---- Q3_K (LANES with 16-element signed sub-block scales, against Q8_K) ---------------------
 * Element 32g + 4m + i (group g = 4H + s, lane m) is bit pair s of qs byte 32H + 4m + i (line
 * 8H + m) minus 4 unless bit 4H + s of hmask byte 4m + i (line m) is set; q in -4..3 as int8.
 * Lane m adds sc[2g + (m >= 4)] * (its 4-product sum) over the 8 groups, then
 * acc[m] = fma(dy*dw, (float)lane, acc[m]); hsum8. */

#define Q3K_GROUP (G * (sizeof(brisk_block_q3_k) + 4))

INL void q3_k_tile(TILE_ARGS) {
    (void)sums, (void)ss;
    float32x4_t acc[4][MAX_TT][8];
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++)
            #pragma GCC unroll 8
            for (int m = 0; m < 8; m++) acc[qq][t][m] = vdupq_n_f32(0.0f);
    const uint8x16_t m3 = vdupq_n_u8(3), b4 = vdupq_n_u8(4);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q3K_GROUP;
        prefetch_ahead(blk, Q3K_GROUP, pf, tt <= 2);
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            int32x4_t sc[16];
            #pragma GCC unroll 16
            for (int j = 0; j < 16; j++) sc[j] = load_s8x4(blk + 32 + 16 * j + 4 * q);
            const float32x4_t dw = load_f16x4(blk + 8 * q);
            #pragma GCC unroll 1
            for (int mh = 0; mh < 2; mh++)
            #pragma GCC unroll 4
            for (int ml = 0; ml < 4; ml++) {   /* lane m = 4 mh + ml: chunk ml of an activation quad */
                const int m = 4 * mh + ml;
                int32x4_t L[MAX_TT];
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) L[t] = vdupq_n_s32(0);
                const uint8x16_t hm = line_quad(blk + 1312 + 64 * m, q);
                #pragma GCC unroll 2
                for (int H = 0; H < 2; H++) {
                    const uint8x16_t ql = line_quad(blk + 288 + 64 * (8 * H + m), q);
                    #pragma GCC unroll 4
                    for (int sp = 0; sp < 4; sp++) {
                        const int g = 4 * H + sp;
                        const uint8x16_t lo = vandq_u8(shr_u8(ql, 2 * sp), m3);
                        const uint8x16_t hi = vandq_u8(vtstq_u8(hm, vdupq_n_u8((uint8_t)(1u << g))), b4);
                        const int8x16_t qv = as_s8(vsubq_u8(vorrq_u8(lo, hi), b4));
                        const int32x4_t scale = sc[2 * g + mh];
                        #pragma GCC unroll 4
                        for (int t = 0; t < tt; t++) {
                            const int8_t *q8 = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->qs + 32 * g + 16 * mh;
                            L[t] = vmlaq_s32(L[t], dot_lane(vdupq_n_s32(0), qv, vld1q_s8(q8), ml), scale);
                        }
                    }
                }
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) {
                    const float dy = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->d;
                    acc[qq][t][m] = vfmaq_f32(acc[qq][t][m], vmulq_n_f32(dw, dy), vcvtq_f32_s32(L[t]));
                }
            }
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) vst1q_f32(out + (int64_t)t * os + 4 * (q0 + qq), hsum8_lanes(acc[qq][t]));
}

DEFINE_GEMM_PF(gemm_q3_k, q3_k_tile, BRISK_QK_K, PF_MULTI_REGION)

/* ---- Q4_K (SCALAR per pair of sub-blocks, against Q8_K) -------------------------------------
 * Pair p: isum = sc[2p]*dot(low nibbles of lines 8p..8p+7) + sc[2p+1]*dot(high nibbles),
 * acc = fma((float)isum, dw*dy, acc); the min chain accm = fma((float)imin, dminw*dy, accm),
 * imin = m[2p]*(bsums 4p, 4p+1) + m[2p+1]*(bsums 4p+2, 4p+3), reads no nibbles and runs
 * after the block's main loop. Line 8p + k: low nibbles are elements 64p + 4k.., high ones
 * 64p + 32 + 4k... */

#define Q4K_GROUP (G * (sizeof(brisk_block_q4_k) + 4))

INL void q4_k_tile(TILE_ARGS) {
    (void)sums, (void)ss;
    float32x4_t acc[4][MAX_TT], accm[4][MAX_TT];
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) acc[qq][t] = accm[qq][t] = vdupq_n_f32(0.0f);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q4K_GROUP;
        prefetch_ahead(blk, 320, pf, tt <= 2);   /* the nibble lines one by one with their loads */
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            const float32x4_t dw = load_f16x4(blk + 8 * q);
            float32x4_t d[MAX_TT];
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++) d[t] = vmulq_n_f32(dw, ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->d);
            #pragma GCC unroll 1
            for (int p = 0; p < 4; p++) {
                int32x4_t cl[MAX_TT], chh[MAX_TT];
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) cl[t] = chh[t] = vdupq_n_s32(0);
                #pragma GCC unroll 8
                for (int k = 0; k < 8; k++) {
                    const uint8_t *line = blk + 320 + 64 * (8 * p + k);
                    prefetch_ahead(line, 64, pf && qq == 0, tt <= 2);
                    const uint8x16_t v = line_quad(line, q);
                    const int8x16_t lo = as_s8(vandq_u8(v, m4)), hi = as_s8(vshrq_n_u8(v, 4));
                    #pragma GCC unroll 4
                    for (int t = 0; t < tt; t++) {
                        const int8_t *q8 = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->qs + 64 * p + 16 * (k / 4);
                        cl[t] = dot_lane(cl[t], lo, vld1q_s8(q8), k % 4);
                        chh[t] = dot_lane(chh[t], hi, vld1q_s8(q8 + 32), k % 4);
                    }
                }
                const int32x4_t s0 = load_u8x4(blk + 64 + 32 * p + 4 * q), s1 = load_u8x4(blk + 80 + 32 * p + 4 * q);
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) {
                    const int32x4_t isum = vmlaq_s32(vmulq_s32(cl[t], s0), chh[t], s1);
                    acc[qq][t] = vfmaq_f32(acc[qq][t], vcvtq_f32_s32(isum), d[t]);
                }
            }
        }
        /* the min chain */
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            const float32x4_t mw = load_f16x4(blk + 32 + 8 * q);
            int32x4_t mn[8];
            #pragma GCC unroll 8
            for (int j = 0; j < 8; j++) mn[j] = load_u8x4(blk + 192 + 16 * j + 4 * q);
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++) {
                const brisk_block_q8_k *y = (const brisk_block_q8_k *)(act + (size_t)t * as) + b;
                const float32x4_t dm = vmulq_n_f32(mw, y->d);
                #pragma GCC unroll 4
                for (int p = 0; p < 4; p++) {
                    const int32x4_t imin = vmlaq_n_s32(vmulq_n_s32(mn[2 * p], y->bsums[4 * p] + y->bsums[4 * p + 1]), mn[2 * p + 1],
                                                       y->bsums[4 * p + 2] + y->bsums[4 * p + 3]);
                    accm[qq][t] = vfmaq_f32(accm[qq][t], vcvtq_f32_s32(imin), dm);
                }
            }
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) vst1q_f32(out + (int64_t)t * os + 4 * (q0 + qq), vsubq_f32(acc[qq][t], accm[qq][t]));
}

DEFINE_GEMM(gemm_q4_k, q4_k_tile, BRISK_QK_K)

/* ---- Q5_K (LANES with 32-element sub-block scales plus the min term, against Q8_K) ----------
 * Lane m is the chunks of elements 32j + 4m.. (sub-block j = 0..7), each 4-product sum scaled
 * by sc[j]; the 5th bits come from the 64-bit mask per (lane, sub-block). Line 8c + m holds
 * sub-block 2c in its low nibbles and 2c + 1 in its high ones. The min term, per block:
 * summ = sum_j m_j * (bsums pair j) (int), mins = fma(-(dy*dmin), (float)summ, mins); result
 * hsum8(acc) + mins. */

#define Q5K_GROUP (G * (sizeof(brisk_block_q5_k) + 4))

INL void q5_k_tile(TILE_ARGS) {
    (void)sums, (void)ss;
    float32x4_t acc[4][MAX_TT][8], mins[4][MAX_TT];
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) {
            mins[qq][t] = vdupq_n_f32(0.0f);
            #pragma GCC unroll 8
            for (int m = 0; m < 8; m++) acc[qq][t][m] = vdupq_n_f32(0.0f);
        }
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q5K_GROUP;
        prefetch_ahead(blk, 320, pf, tt <= 2);   /* the nibble and mask lines one by one with their loads */
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            const float32x4_t dw = load_f16x4(blk + 8 * q), mw = load_f16x4(blk + 32 + 8 * q);
            int32x4_t sc[8], mn[8];
            #pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                sc[j] = load_u8x4(blk + 64 + 16 * j + 4 * q);
                mn[j] = load_u8x4(blk + 192 + 16 * j + 4 * q);
            }
            float32x4_t d[MAX_TT];
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++) {
                const brisk_block_q8_k *y = (const brisk_block_q8_k *)(act + (size_t)t * as) + b;
                d[t] = vmulq_n_f32(dw, y->d);
                int32x4_t summ = vdupq_n_s32(0);
                #pragma GCC unroll 8
                for (int j = 0; j < 8; j++) summ = vmlaq_n_s32(summ, mn[j], y->bsums[2 * j] + y->bsums[2 * j + 1]);
                /* (-dy) * dmin, as ref: negation is exact */
                mins[qq][t] = vfmaq_f32(mins[qq][t], vmulq_n_f32(mw, -y->d), vcvtq_f32_s32(summ));
            }
            #pragma GCC unroll 1
            for (int mh = 0; mh < 2; mh++)
            #pragma GCC unroll 4
            for (int ml = 0; ml < 4; ml++) {   /* lane m = 4 mh + ml */
                const int m = 4 * mh + ml;
                int32x4_t L[MAX_TT];
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) L[t] = vdupq_n_s32(0);
                const uint8_t *mk = blk + 2368 + 64 * m;
                prefetch_ahead(mk, 64, pf && qq == 0, tt <= 2);
                #pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    const uint8_t *line = blk + 320 + 64 * (8 * c + m);
                    prefetch_ahead(line, 64, pf && qq == 0, tt <= 2);
                    const uint8x16_t v = line_quad(line, q);
                    const int8x16_t w0 = as_s8(vorrq_u8(vandq_u8(v, m4), mask_quad(mk + 16 * c, q)));
                    const int8x16_t w1 = as_s8(vorrq_u8(vshrq_n_u8(v, 4), mask_quad(mk + 16 * c + 8, q)));
                    #pragma GCC unroll 4
                    for (int t = 0; t < tt; t++) {
                        const int8_t *q8 = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->qs + 64 * c + 16 * mh;
                        L[t] = vmlaq_s32(L[t], dot_lane(vdupq_n_s32(0), w0, vld1q_s8(q8), ml), sc[2 * c]);
                        L[t] = vmlaq_s32(L[t], dot_lane(vdupq_n_s32(0), w1, vld1q_s8(q8 + 32), ml), sc[2 * c + 1]);
                    }
                }
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) acc[qq][t][m] = vfmaq_f32(acc[qq][t][m], d[t], vcvtq_f32_s32(L[t]));
            }
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) vst1q_f32(out + (int64_t)t * os + 4 * (q0 + qq), vaddq_f32(hsum8_lanes(acc[qq][t]), mins[qq][t]));
}

DEFINE_GEMM_PF(gemm_q5_k, q5_k_tile, BRISK_QK_K, PF_MULTI_REGION)

/* ---- Q6_K (LANES with 16-element sub-block scales, against Q8_K) ----------------------------
 * Chunk j (elements 4j..4j+3) belongs to lane m = j % 8, scaled by sc[2(j/8) + (m >= 4)]. Lane
 * by lane: lines L_k and L_16+k and the 2-bit line H_k (k = m, m + 8) give the values of
 * chunks k, 16+k, 32+k, 48+k (0..63, unsigned); the lane's int32 sum of scaled 4-product
 * sums then loses 32 * (bsums[2m] * sc[2m] + bsums[2m+1] * sc[2m+1]) and is fused into the
 * lane's float accumulator. */

#define Q6K_GROUP (G * sizeof(brisk_block_q6_k))

INL void q6_k_tile(TILE_ARGS) {
    (void)sums, (void)ss;
    float32x4_t acc[4][MAX_TT][8];
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++)
            #pragma GCC unroll 8
            for (int m = 0; m < 8; m++) acc[qq][t][m] = vdupq_n_f32(0.0f);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * Q6K_GROUP;
        prefetch_ahead(blk, 288, pf, tt <= 2);   /* the value lines one by one with their loads */
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            int32x4_t sc[16];
            #pragma GCC unroll 16
            for (int j = 0; j < 16; j++) sc[j] = load_s8x4(blk + 32 + 16 * j + 4 * q);
            const float32x4_t dw = load_f16x4(blk + 8 * q);
            #pragma GCC unroll 1
            for (int mh = 0; mh < 2; mh++)
            #pragma GCC unroll 4
            for (int ml = 0; ml < 4; ml++) {   /* lane m = 4 mh + ml: its chunks are chunk ml of activation quads */
                const int m = 4 * mh + ml;
                int32x4_t L[MAX_TT];
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) L[t] = vdupq_n_s32(0);
                #pragma GCC unroll 2
                for (int kk = 0; kk < 2; kk++) {
                    const int k = m + 8 * kk;
                    const uint8_t *la = blk + BRISK_Q6K_TRIPLE(k), *lb = la + 64, *lh = la + 128;
                    prefetch_ahead(la, 64, pf && qq == 0, tt <= 2);
                    prefetch_ahead(lb, 64, pf && qq == 0, tt <= 2);
                    prefetch_ahead(lh, 64, pf && qq == 0, tt <= 2);
                    const uint8x16_t lA = line_quad(la, q), lB = line_quad(lb, q), H = line_quad(lh, q);
                    int8x16_t w[4];
                    w[0] = as_s8(vorrq_u8(vandq_u8(lA, m4), vandq_u8(vshlq_n_u8(H, 4), m30)));
                    w[1] = as_s8(vorrq_u8(vandq_u8(lB, m4), vandq_u8(vshlq_n_u8(H, 2), m30)));
                    w[2] = as_s8(vorrq_u8(vshrq_n_u8(lA, 4), vandq_u8(H, m30)));
                    w[3] = as_s8(vorrq_u8(vshrq_n_u8(lB, 4), vandq_u8(vshrq_n_u8(H, 2), m30)));
                    #pragma GCC unroll 4
                    for (int x = 0; x < 4; x++) {
                        const int jj = 16 * x + k;   /* the chunk: jj % 4 = ml */
                        const int32x4_t scale = sc[2 * (jj / 8) + mh];
                        #pragma GCC unroll 4
                        for (int t = 0; t < tt; t++) {
                            const int8_t *q8 = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->qs + 16 * (jj / 4);
                            L[t] = vmlaq_s32(L[t], dot_lane(vdupq_n_s32(0), w[x], vld1q_s8(q8), ml), scale);
                        }
                    }
                }
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) {
                    const brisk_block_q8_k *y = (const brisk_block_q8_k *)(act + (size_t)t * as) + b;
                    const int32x4_t corr = vmlaq_n_s32(vmulq_n_s32(sc[2 * m], y->bsums[2 * m]), sc[2 * m + 1], y->bsums[2 * m + 1]);
                    const int32x4_t lane = vsubq_s32(L[t], vshlq_n_s32(corr, 5));
                    acc[qq][t][m] = vfmaq_f32(acc[qq][t][m], vmulq_n_f32(dw, y->d), vcvtq_f32_s32(lane));
                }
            }
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) vst1q_f32(out + (int64_t)t * os + 4 * (q0 + qq), hsum8_lanes(acc[qq][t]));
}

DEFINE_GEMM_PF(gemm_q6_k, q6_k_tile, BRISK_QK_K, PF_MULTI_REGION)

/* ---- IQ4_NL and MXFP4 (SCALAR, like Q4_0, against Q8_0) -------------------------------------
 * The nibbles index a 16-entry int8 codebook (TBL: vqtbl1q_s8), and the signed values go
 * into SDOT as they are: isum = sum v*y with no offset term; acc = fma((float)isum, dw*dy,
 * acc), dw IQ4_NL's fp16 d or MXFP4's halved E8M0 power of two (brisk_e8m0_half, from its
 * bits). */

/* brisk_e8m0_half of 4 E8M0 bytes: (e - 1) << 23 as float bits, 0x00200000 << e for e < 2. */
INL float32x4_t e8m0_half4(const uint8_t *e) {
    const int32x4_t v = load_u8x4(e);
    const int32x4_t normal = vshlq_n_s32(vsubq_s32(v, vdupq_n_s32(1)), 23);
    const int32x4_t sub = vshlq_s32(vdupq_n_s32(0x00200000), v);
    return vreinterpretq_f32_s32(vbslq_s32(vcltq_s32(v, vdupq_n_s32(2)), sub, normal));
}

INL void lut4_tile(int64_t nb, const uint8_t *wp, const uint8_t *act, size_t as, const int32_t *sums, size_t ss, float *out,
                   int64_t os, const int tt, const int q0, const int nq, const bool pf, const bool mx) {
    const size_t gbytes = G * (mx ? sizeof(brisk_block_mxfp4) : sizeof(brisk_block_iq4_nl)), qoff = mx ? 16 : 32;
    float32x4_t acc[4][MAX_TT];
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) acc[qq][t] = vdupq_n_f32(0.0f);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t table = vld1q_s8(mx ? brisk_mxfp4_values : brisk_iq4nl_values);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * gbytes;
        prefetch_ahead(blk, gbytes, pf, tt <= 2);
        int8x16_t ylo[MAX_TT], yhi[MAX_TT];
        float dy[MAX_TT];
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) {
            const int8_t *y = ((const brisk_block_q8_0 *)(act + (size_t)t * as) + b)->qs;
            ylo[t] = vld1q_s8(y);
            yhi[t] = vld1q_s8(y + 16);
            dy[t] = act_scale(sums + (size_t)t * ss, nb, b);
        }
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            int32x4_t ch[MAX_TT];
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++) ch[t] = vdupq_n_s32(0);
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const uint8x16_t v = line_quad(blk + qoff + 64 * c, q);
                const int8x16_t lo = vqtbl1q_s8(table, vandq_u8(v, m4)), hi = vqtbl1q_s8(table, vshrq_n_u8(v, 4));
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) ch[t] = dot_lane(dot_lane(ch[t], lo, ylo[t], c), hi, yhi[t], c);
            }
            const float32x4_t dw = mx ? e8m0_half4(blk + 4 * q) : load_f16x4(blk + 8 * q);
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++) acc[qq][t] = vfmaq_f32(acc[qq][t], vcvtq_f32_s32(ch[t]), vmulq_n_f32(dw, dy[t]));
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) vst1q_f32(out + (int64_t)t * os + 4 * (q0 + qq), acc[qq][t]);
}

INL void iq4_nl_tile(TILE_ARGS) { lut4_tile(nb, wp, act, as, sums, ss, out, os, tt, q0, nq, pf, false); }
INL void mxfp4_tile(TILE_ARGS) { lut4_tile(nb, wp, act, as, sums, ss, out, os, tt, q0, nq, pf, true); }

DEFINE_GEMM(gemm_iq4_nl, iq4_nl_tile, 32)
DEFINE_GEMM(gemm_mxfp4, mxfp4_tile, 32)

/* ---- IQ4_XS (SCALAR per 256-element block, against Q8_K) -----------------------------------
 * isum = sum over the groups j of sc_j * dot(group j) (vmlaq_s32, exact: ref's int32), then
 * acc = fma((float)isum, dw*dy, acc). Line 4j + c: group j's elements 32j + 4c.. (low nibbles)
 * and 32j + 16 + 4c.. (high). */

#define IQ4XS_GROUP (G * (sizeof(brisk_block_iq4_xs) + 2))

INL void iq4_xs_tile(TILE_ARGS) {
    (void)sums, (void)ss;
    float32x4_t acc[4][MAX_TT];
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) acc[qq][t] = vdupq_n_f32(0.0f);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t table = vld1q_s8(brisk_iq4nl_values);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + (size_t)b * IQ4XS_GROUP;
        prefetch_ahead(blk, 160, pf, tt <= 2);   /* the scales; the lines one by one with their loads */
        #pragma GCC unroll 4
        for (int qq = 0; qq < nq; qq++) {
            const int q = q0 + qq;
            int32x4_t isum[MAX_TT];
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++) isum[t] = vdupq_n_s32(0);
            #pragma GCC unroll 1
            for (int j = 0; j < 8; j++) {
                int32x4_t ch[MAX_TT];
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) ch[t] = vdupq_n_s32(0);
                #pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    const uint8_t *line = blk + 160 + 64 * (4 * j + c);
                    prefetch_ahead(line, 64, pf && qq == 0, tt <= 2);
                    const uint8x16_t v = line_quad(line, q);
                    const int8x16_t lo = vqtbl1q_s8(table, vandq_u8(v, m4)), hi = vqtbl1q_s8(table, vshrq_n_u8(v, 4));
                    #pragma GCC unroll 4
                    for (int t = 0; t < tt; t++) {
                        const int8_t *q8 = ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->qs + 32 * j;
                        ch[t] = dot_lane(dot_lane(ch[t], lo, vld1q_s8(q8), c), hi, vld1q_s8(q8 + 16), c);
                    }
                }
                const int32x4_t sc = load_s8x4(blk + 32 + 16 * j + 4 * q);
                #pragma GCC unroll 4
                for (int t = 0; t < tt; t++) isum[t] = vmlaq_s32(isum[t], ch[t], sc);
            }
            const float32x4_t dw = load_f16x4(blk + 8 * q);
            #pragma GCC unroll 4
            for (int t = 0; t < tt; t++)
                acc[qq][t] = vfmaq_f32(acc[qq][t], vcvtq_f32_s32(isum[t]),
                                       vmulq_n_f32(dw, ((const brisk_block_q8_k *)(act + (size_t)t * as) + b)->d));
        }
    }
    #pragma GCC unroll 4
    for (int qq = 0; qq < nq; qq++)
        #pragma GCC unroll 4
        for (int t = 0; t < tt; t++) vst1q_f32(out + (int64_t)t * os + 4 * (q0 + qq), acc[qq][t]);
}

DEFINE_GEMM(gemm_iq4_xs, iq4_xs_tile, BRISK_QK_K)

/* ---- activation sums (the spec: brisk_act_sums_q8_0_ref) ----------------------------------- */

static void act_sums_q8_0(const void *act, int64_t n, int32_t *sums) {
    const brisk_block_q8_0 *y = act;
    const int64_t nb = n / 32;
    for (int64_t b = 0; b < nb; b++) {
        const int32x4_t c0 = vpaddlq_s16(vpaddlq_s8(vld1q_s8(y[b].qs)));        /* chunk sums 0..3 */
        const int32x4_t c1 = vpaddlq_s16(vpaddlq_s8(vld1q_s8(y[b].qs + 16)));   /* 4..7 */
        vst1q_s32(sums + 8 * b, vmulq_n_s32(c0, -128));
        vst1q_s32(sums + 8 * b + 4, vmulq_n_s32(c1, -128));
        sums[8 * nb + b] = -8 * vaddvq_s32(vaddq_s32(c0, c1));
        const float d = fp16_to_f32(y[b].d);
        memcpy(&sums[9 * nb + b], &d, sizeof d);
    }
}

static const brisk_gemm_kernels table = {
    .isa = NEON_GEMM_ISA,
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
};

const brisk_gemm_kernels *NEON_GEMM_TABLE(void) { return &table; }
