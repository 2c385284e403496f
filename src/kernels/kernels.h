/* kernels: dot products (and, later, GEMV/GEMM) per ISA behind one function
 * table. ref.c is the specification: plain C that follows ggml's scalar
 * (`_generic`) kernels operation for operation. Each ISA variant lives in its
 * own file (avx2_*.c, avx512_*.c, neon_*.c, compiled with that ISA's flags),
 * exports a table with the same signatures, and is checked against ref by
 * tests/test_kernels.c. dispatch.c picks the best table the CPU runs;
 * BRISK_ISA=NAME in the environment (read once) forces one (ref, avx2,
 * avx2-vnni, avx512, neon, neon-dotprod, neon-i8mm), so every table can be run and
 * benchmarked on one machine; BRISK_FORCE_REF=1 is BRISK_ISA=ref.
 *
 * A matmul row is: quantize the activation row once with
 *   k->quantize_act[info->act_type](x, a, n)
 * then for every weight row w:  k->vec_dot[wtype](n, &out, w, a).
 *
 * Thread safety: tables are immutable; every function is reentrant. */
#ifndef BRISK_KERNELS_H
#define BRISK_KERNELS_H

#include "quant/quant.h"
#include "base/cpu.h"

/* w: n elements of the weight type, a: n elements of that type's act_type
 * (brisk_qtype_get(wtype)->act_type); n a whole number of blocks of both.
 * Writes *out = sum_i w[i]*a[i] (in the quantized domain). */
typedef void (*brisk_vec_dot_fn)(int64_t n, float *out, const void *w, const void *a);

/* Activation quantizer: n floats -> n elements of an activation type. */
typedef void (*brisk_quantize_fn)(const float *x, void *dst, int64_t n);

/* Two weight rows (w, and w + w_stride bytes) times two activation rows (a,
 * and a + a_stride bytes) at once, each output bit-identical to vec_dot:
 * out[0] = w0.a0, out[1] = w1.a0, out[os] = w0.a1, out[os + 1] = w1.a1 (the
 * matmul's layout: rows adjacent, tokens os apart). For ISAs with a 2x2
 * integer matrix multiply (aarch64 i8mm's SMMLA). */
typedef void (*brisk_vec_dot_2x2_fn)(int64_t n, float *out, int64_t os, const void *w, size_t w_stride, const void *a,
                                     size_t a_stride);

typedef struct brisk_kernels {
    const char *isa;                                     /* "ref", "avx2", "avx512", "neon", "neon-dotprod", "neon-i8mm" */
    brisk_vec_dot_fn vec_dot[BRISK_Q_TYPE_LIMIT];        /* indexed by weight type; NULL = none */
    brisk_vec_dot_2x2_fn vec_dot_2x2[BRISK_Q_TYPE_LIMIT];   /* optional, by weight type; NULL = none */
    /* brisk_exp_sub and brisk_swiglu (ops/ops.h), bit for bit; every table sets them */
    double (*exp_sub)(float *x, int64_t n, float m);
    void (*swiglu)(float *h, const float *g, const float *u, int64_t n);
    brisk_quantize_fn quantize_act[BRISK_Q_TYPE_LIMIT];  /* indexed by activation type: F32 (copy),
                                                            F16, BF16, Q8_0, Q8_1, Q8_K */
} brisk_kernels;

/* The reference table (always available). */
const brisk_kernels *brisk_kernels_ref(void);

/* The best table for this CPU (runtime detection), or the one BRISK_ISA
 * names (ref when BRISK_FORCE_REF=1) as read when the CPU features were first
 * read. Never NULL: a BRISK_ISA this CPU or build cannot run is ignored here
 * and refused by brisk_isa_check. */
const brisk_kernels *brisk_kernels_best(void);
/* BRISK_OK unless BRISK_ISA names a table this build lacks
 * (BRISK_ERR_UNSUPPORTED), this CPU cannot run (BRISK_ERR_UNSUPPORTED, with
 * its features), or no table at all (BRISK_ERR_INVALID_ARG); the message
 * lists the tables usable here. It also refuses a BRISK_DECODE_PREFETCH other than
 * 0 or 1 (BRISK_ERR_INVALID_ARG). Model load and context init call it. */
brisk_status brisk_isa_check(brisk_error *err);

/* Whether a packed GEMM call over n_tok tokens prefetches its weight stream
 * in software: always for two tokens or more (the multi-token tiles consume
 * slower than the hardware prefetchers fetch, and lose up to 40% without:
 * gemm-micro T=4 from DRAM on Zen 4, 10-11 against 18-19 GB/s), at one token
 * as brisk_cpu_features.decode_prefetch says (by CPU vendor, or
 * BRISK_DECODE_PREFETCH). Each gemm call reads it once and passes it down
 * as its tiles' pf flag; prefetches are hints, so no result bit depends on it. */
static inline bool brisk_gemm_prefetch(int32_t n_tok) { return n_tok > 1 || brisk_cpu_features_get()->decode_prefetch; }

/* Every table this CPU can run, ref first; returns how many there are (it
 * writes at most max of them). For tests and benchmarks. */
int brisk_kernels_all(const brisk_kernels **out, int max);

/* ISA tables, defined only in builds that compile that ISA's files; callers
 * go through brisk_kernels_best/all, which check the CPU first. */
const brisk_kernels *brisk_kernels_avx2(void);
const brisk_kernels *brisk_kernels_avx2_vnni(void);      /* AVX2 + AVX-VNNI (VEX vpdpbusd) */
const brisk_kernels *brisk_kernels_avx512(void);         /* AVX-512 F/BW/VL/DQ + VNNI (+ AVX2's needs) */
const brisk_kernels *brisk_kernels_neon(void);           /* aarch64, baseline ARMv8-A */
const brisk_kernels *brisk_kernels_neon_dotprod(void);   /* aarch64 + dotprod (SDOT) */
const brisk_kernels *brisk_kernels_neon_i8mm(void);      /* aarch64 + dotprod + i8mm (SMMLA) */

/* ---- reference kernels, by name (ref.c), for ISA tables to fall back on ---- */
void brisk_vec_dot_f32_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_f16_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_bf16_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q4_0_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q4_1_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q5_0_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q5_1_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q8_0_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q2_k_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q3_k_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q4_k_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q5_k_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_q6_k_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_iq4_nl_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_iq4_xs_ref(int64_t n, float *out, const void *w, const void *a);
void brisk_vec_dot_mxfp4_ref(int64_t n, float *out, const void *w, const void *a);

/* ---- the 4-bit lookup-table formats per ISA (avx2_lut4.c, avx512_lut4.c; same bits as ref) ---- */
void brisk_avx2_dot_iq4_nl(int64_t n, float *out, const void *w, const void *a);
void brisk_avx2_dot_iq4_xs(int64_t n, float *out, const void *w, const void *a);
void brisk_avx2_dot_mxfp4(int64_t n, float *out, const void *w, const void *a);
void brisk_avx512_dot_iq4_nl(int64_t n, float *out, const void *w, const void *a);
void brisk_avx512_dot_iq4_xs(int64_t n, float *out, const void *w, const void *a);
void brisk_avx512_dot_mxfp4(int64_t n, float *out, const void *w, const void *a);

/* brisk_q8_k_quantize's bytes, 8 lanes at a time (avx2_kernels.c; the AVX2 and AVX-512 tables). */
void brisk_avx2_q8_k_quantize(const float *src, void *dst, int64_t n);

/* ---- packed GEMM (prefill and decode over row groups) ------------------------------------
 * Weights of a supported type may be repacked at load into groups of
 * BRISK_GEMM_ROWS rows (brisk_pack_rows), the same number of bytes as the
 * canonical rows (Q4_K and Q5_K: 4 more per row and block, for unpacked
 * scales). A group is block-major: for each 32-element block, the 16 rows'
 * fp16 scales, then the block's bytes in 4-byte chunks, chunk-major,
 * 16 rows per chunk (each 64-byte line holds one chunk of all 16 rows):
 *   Q4_0 (288 bytes per block): d[16], then chunk c = 0..3: qs[4c..4c+3] of rows 0..15
 *        (low nibbles are elements 4c.., high nibbles elements 16+4c..);
 *   Q8_0 (544 bytes per block): d[16], then chunk c = 0..7: qs[4c..4c+3] + 128 (as u8) of rows 0..15.
 *   Q5_0 (352 bytes per block): d[16], then for chunk c = 0..7 (elements 4c.. for c < 4, else
 *        16+4(c-4)..) a 64-bit mask with bit 4r+k = the 5th bit of that element k of row r, then
 *        the nibbles as Q4_0's 4 chunk lines.
 *   Q4_1 (320 bytes per block): d[16], m[16], then Q4_0's 4 chunk lines.
 *   Q5_1 (384 bytes per block): d[16], m[16], Q5_0's 8 masks (64 bytes), then Q4_0's 4 chunk lines.
 *   Q2_K (1344 bytes per 256-element block, as canonical): d[16], dmin[16], the scale bytes
 *        sc[j][16] (j = 0..15, as in the block: scale low nibble, min high), then chunk
 *        k = 0..15: qs[4k..4k+3] of rows 0..15.
 *   Q3_K (1824 bytes per 256-element block, 64 more than canonical): d[16], the unpacked
 *        signed 6-bit scales sc[j][16] (int8, j = 0..15), then chunk k = 0..15: qs[4k..4k+3]
 *        of rows 0..15, then chunk k = 0..7: hmask[4k..4k+3] of rows 0..15.
 *        (Q4_1, Q5_1, Q2_K and Q3_K are packed only for the avx2, avx2-vnni and NEON tables.)
 *   Q4_K (2368 bytes per 256-element block, 64 more than canonical): d[16], dmin[16], the
 *        unpacked 6-bit scales sc[j][16] and mins m[j][16] (j = sub-block 0..7, one byte each),
 *        then chunk k = 0..31: qs[4k..4k+3] of rows 0..15.
 *   Q5_K (2880 bytes per 256-element block, 64 more than canonical): Q4_K's 2368 bytes (the
 *        nibble line k holds sub-block 2(k/8) in the low nibbles, 2(k/8)+1 in the high, both at
 *        lane k%8), then for lane m = 0..7 and sub-block j = 0..7 a 64-bit mask at 2368+64m+8j
 *        with bit 4r+i = the 5th bit of element 32j+4m+i of row r (one line per lane, so the
 *        masks a lane needs arrive together).
 *   Q6_K (3360 bytes per 256-element block, as canonical): d[16], scales[j][16] (int8, j = 0..15),
 *        then 16 triples of 64-byte lines (L_k, L_16+k, H_k), k = 0..15, triple k at byte
 *        BRISK_Q6K_TRIPLE(k): the low-nibble line L_k (byte 4r+i: element 4k+i of row r in the
 *        low nibble, element 128+4k+i in the high) and the high-bit line H_k (byte 4r+i: bit
 *        pairs 0/1/2/3 = the high 2 bits of elements 4k+i, 64+4k+i, 128+4k+i, 192+4k+i). The
 *        triples are stored in the order lane m = 0..7 reads them (k = m, then m + 8), so a
 *        one-token tile streams the block front to back.
 *   IQ4_NL (288 bytes per block): Q4_0's layout (d[16], then 4 chunk lines); the nibbles index
 *        brisk_iq4nl_values.
 *   MXFP4 (272 bytes per block, as canonical): the E8M0 scale bytes e[16], then Q4_0's 4 chunk
 *        lines (at byte 16); the nibbles index brisk_mxfp4_values.
 *   IQ4_XS (2208 bytes per 256-element block, 32 more than canonical): d[16], the unpacked
 *        group scales ls - 32 sc[j][16] (int8, j = 0..7), then chunk k = 0..31: qs[4k..4k+3]
 *        of rows 0..15 (line 4j + c: group j's elements 32j+4c.. low, 32j+16+4c.. high).
 *   F16 (cols a multiple of 16; the bytes of canonical): 4 quads of 4 rows, quad q at byte
 *        q * cols * 8; in a quad, for each 16-column chunk c a 128-byte line with rows
 *        4q..4q+3's elements 16c..16c+15 (32 bytes each), so one zmm of F32 holds the 16
 *        lanes of ref's F16 order for one row.
 * A gemm kernel computes out[t * out_stride + r] for the group's 16 rows r and
 * n_tok activation rows t, every element bit-identical to the table's vec_dot
 * (and so to ref): each output keeps its own lane, with ref's reduction order.
 * It reads, besides the quantized activations, their integer sums (act_sums):
 * per activation row and block, 8 values -128 * (sum of chunk c's 4 bytes)
 * followed, after all blocks, by per block -8 * (sum of the block's 32 bytes),
 * then per block the scale d widened to F32 (its bits in the int32: a decode
 * kernel broadcasts it with one load instead of load, convert, broadcast);
 * for F16 activations, the n values widened to F32 (exact).
 * brisk_act_sums_len(type, n) is the int32 count per activation row. */
#define BRISK_GEMM_ROWS 16

/* Byte offset of Q6_K triple k (L_k, then L_16+k at +64, then H_k at +128) in a packed group's
 * block. Until session 22 the 32 L lines came first, then the 16 H lines: the one-token tile
 * then read six 64-byte streams per block (L_m, L_16+m, H_m, L_m+8, L_24+m, H_m+8), which
 * the hardware prefetchers followed badly (0.76-0.81 of a plain read on one Zen 4 core). */
#define BRISK_Q6K_TRIPLE(k) (288 + 192 * (2 * ((k) % 8) + (k) / 8))

typedef void (*brisk_gemm_fn)(int64_t n, const void *wpack, const void *act, size_t act_stride, const int32_t *sums,
                              size_t sums_stride, int32_t n_tok, float *out, int64_t out_stride);
typedef void (*brisk_act_sums_fn)(const void *act, int64_t n, int32_t *sums);   /* F16 acts: n floats (as int32 storage) */

typedef struct brisk_gemm_kernels {
    const char *isa;
    brisk_gemm_fn gemm[BRISK_Q_TYPE_LIMIT];            /* by weight type; NULL = not packed */
    brisk_act_sums_fn act_sums[BRISK_Q_TYPE_LIMIT];    /* by activation type */
    /* GEMM over 16 canonical rows (row_bytes apart) for types that are not packed,
     * bit-identical to the main table's vec_dot; act_f32 is the activation
     * widened to F32 by act_sums[act type] (n floats per row, sums_stride apart).
     * Only for n a multiple of 32. */
    void (*gemm_rows[BRISK_Q_TYPE_LIMIT])(int64_t n, const void *w, size_t row_bytes, const float *act_f32, size_t act_stride,
                                          int32_t n_tok, float *out, int64_t out_stride);
    /* Faster activation quantizers, byte-identical to ref's (NULL: use the main table's). */
    brisk_quantize_fn quantize_act[BRISK_Q_TYPE_LIMIT];
    /* exp_sub and swiglu of the main table, vectorized (same bits) */
    double (*exp_sub)(float *x, int64_t n, float m);
    void (*swiglu)(float *h, const float *g, const float *u, int64_t n);
} brisk_gemm_kernels;

/* ---- attention ---------------------------------------------------------------------------
 * The kernels of causal attention over the F16 KV cache (model/forward.c),
 * one table per ISA like the dot products: ref (attn_ref.c, the scalar loops
 * that are the specification), avx2, avx512, neon. Every kernel keeps the
 * scalar loops' exact arithmetic (a multiply, then an add: no fused ops) per
 * output, so every table gives the same bits (tests/test_kernels.c):
 * kq16: out[l] = scale * (((0 + q[0]*k_l[0]) + q[1]*k_l[1]) + ...) over d
 *       elements, for 16 F16 key rows k_l = k + l*stride (d even);
 * axpy_f16: o[i] = o[i] + p * v[i] for i < d (v F16).
 * The _multi forms, which forward.c uses with kq16 and axpy_f16, are
 * specified (and tested) as batches of kq16t and axpy_f16_rows. */
/* The integer K dot of the quantized cache types (the specification of
 * kq_multi_q8_0 / _q4_0 before the scale): slot s of a Q8_0 (q4 false) or
 * Q4_0 K part of head size d against a Q8_0 query (codes qq, scales qd):
 *   s = 0; for each group b of 32: s = s + (float)isum_b * (dk_b * qd_b),
 * isum_b = sum of qq[i] * k[i] over the group, exact in int32 (k the code;
 * Q4_0's minus 8), dk_b the slot's F16 scale of the group: ggml_vec_dot_q8_0_q8_0's
 * arithmetic per block. */
static inline float brisk_kq_q_slot(const int16_t *qq, const float *qd, const uint8_t *part, int s, int d, bool q4) {
    const uint16_t *dd = (const uint16_t *)(const void *)(part + (size_t)d * (q4 ? 16 : 32));
    float acc = 0.0f;
    for (int b = 0; b < d / 32; b++) {
        int32_t isum = 0;
        for (int i = 32 * b; i < 32 * b + 32; i++) {
            const int k = q4 ? ((part[(size_t)i * 16 + (size_t)(s % 16)] >> (s < 16 ? 0 : 4)) & 15) - 8 : (int8_t)part[(size_t)i * 32 + (size_t)s];
            isum += (int32_t)qq[i] * k;
        }
        acc = acc + (float)isum * (brisk_fp16_to_fp32(dd[(size_t)b * 32 + (size_t)s]) * qd[b]);
    }
    return acc;
}

/* The lines a decode attention tile has the F16 kernels prefetch for the
 * next tile (its K and V parts, in the order they will be read), one line
 * per inner iteration, so the next tile's misses overlap this tile's
 * arithmetic. Each part of a block is one 4 KiB page (head size 64) 32 KiB
 * from the next block's (kv/kv.h's layout), so the hardware prefetchers
 * start over at every part; a burst of all the next tile's lines at the
 * tile's start (the earlier scheme, kept for the other cache types) queues
 * behind the line-fill buffers and the arithmetic waits with it.
 * llama-3.2-1b Q4_0, tg64 at depth 4096 / 8192: +10% (docs/PERFORMANCE.md,
 * "Session 26"). */
/* The pace: step / 65536 lines per iteration (0: one per iteration), so
 * the queue lasts the whole tile whatever the ratio of its lines to the
 * tile's kernel iterations (a Q8_0 tile's K scores alone have as many
 * iterations as its K and V have lines: issued at one per iteration, every
 * line went out during the scores and none while V was read; a table whose
 * V kernel takes no queue has fewer iterations than lines). The caller sets
 * step from the iterations the previous tile counted in ticks. */
typedef struct brisk_attn_pf {
    const char *base[4];   /* regions, in reading order */
    int32_t lines[4];      /* 64-byte lines in each */
    int32_t n, r, l;       /* regions; the next line: region r, line l */
    uint32_t step, credit; /* lines per iteration and the fraction accrued, 16.16 fixed point */
    int32_t ticks;         /* iterations since the caller last looked */
} brisk_attn_pf;

/* A new tile's queue: empty, and the previous tile's iterations returned
 * (ticks restarts) for brisk_attn_pf_pace. */
static inline int32_t brisk_attn_pf_reset(brisk_attn_pf *pf) {
    const int32_t ticks = pf->ticks;
    pf->n = pf->r = pf->l = pf->ticks = 0;
    return ticks;
}

/* Once the regions are queued: spread their lines over ticks iterations
 * (the previous tile's: tiles are alike), or one per iteration when ticks
 * is 0 (the first tile); the first line goes out at the first iteration. */
static inline void brisk_attn_pf_pace(brisk_attn_pf *pf, int32_t ticks) {
    uint64_t lines = 0;
    for (int32_t i = 0; i < pf->n; i++) lines += (uint64_t)pf->lines[i];
    const uint64_t step = ticks > 0 && lines > 0 ? (lines << 16) / (uint64_t)ticks + 1u : 0u;
    pf->step = (uint32_t)(step < UINT32_MAX / 2 ? step : UINT32_MAX / 2);
    pf->credit = 65535u;
}

static inline void brisk_attn_pf_next(brisk_attn_pf *pf) {
    if (!pf) return;
    pf->ticks++;
    if (pf->r < pf->n) {
        pf->credit += pf->step ? pf->step : 65536u;
        while (pf->credit >= 65536u && pf->r < pf->n) {
            pf->credit -= 65536u;
            __builtin_prefetch(pf->base[pf->r] + (size_t)pf->l * 64, 0, 3);
            if (++pf->l == pf->lines[pf->r]) pf->l = 0, pf->r++;
        }
    }
}

typedef struct brisk_attn_kernels {
    const char *isa;
    void (*kq16)(const float *q, const uint16_t *k, size_t stride, int d, float scale, float *out);
    void (*axpy_f16)(float *o, float p, const uint16_t *v, int d);
    /* axpy_f16 over n rows in order (row j = v + j*stride, weight p[j]), o kept
     * in registers between rows: the same additions in the same order. */
    void (*axpy_f16_rows)(float *o, const float *p, const uint16_t *v, size_t stride, int n, int d);
    /* kq16 on keys already widened and transposed: k_l[i] = kt[i * stride + l]. */
    void (*kq16t)(const float *q, const float *kt, size_t stride, int d, float scale, float *out);
    /* kq16t for m queries (query h at q + h * q_stride) over ng <= 4 consecutive
     * groups of 16 keys (group g at kt + 16 g): out[h * out_stride + 16 g + l],
     * each output exactly kq16t's. */
    void (*kq_multi_t)(const float *q, size_t q_stride, int m, const float *kt, size_t stride, int ng, int d, float scale,
                       float *out, size_t out_stride);
    /* kq_multi_t on F16 keys (the KV cache's transposed K): each key element
     * widened exactly, so each output is kq_multi_t's on the widened keys.
     * pf (NULL: none): lines to prefetch, one per pass over an element i
     * (brisk_attn_pf_next); prefetching changes no result. */
    void (*kq_multi_h)(const float *q, size_t q_stride, int m, const uint16_t *kt, size_t stride, int ng, int d, float scale,
                       float *out, size_t out_stride, brisk_attn_pf *pf);
    /* axpy_f16_rows for m outputs (o + h * o_stride, weights p + h * p_stride)
     * over the same n V rows: each output exactly axpy_f16_rows's. pf: as
     * kq_multi_h's, one line per V row visited. */
    void (*axpy_f16_rows_multi)(float *o, size_t o_stride, int m, const float *p, size_t p_stride, const uint16_t *v, size_t stride,
                                int n, int d, brisk_attn_pf *pf);
    /* ---- the quantized KV cache types (kv/kv.h's layouts, docs/KV.md) ----
     * A table may leave these NULL: attention then uses ref's (the same bits).
     * kq_multi_q8_0 / _q4_0: the scores of m queries against the K part of
     * one (block, KV head) in Q8_0 / Q4_0, groups of 16 slots from slot0 (0 or
     * 16; slot0 + 16 ng <= 32), as llama.cpp's CPU flash attention computes a
     * quantized K: the query in Q8_0 (brisk_q8_0_quantize_x86, ggml-cpu's x86
     * quantizer; codes qq as int16,
     * scales qd, one per 32 elements; head h at qq + h * q_stride and qd + h *
     * q_stride / 32, q_stride % 32 == 0), then brisk_kq_q_slot's sum per slot:
     * exact integer dots per group of 32, each scaled in F32, added in group
     * order; out = that * scale. pf: as kq_multi_h's (one line per pair of
     * elements). */
    void (*kq_multi_q8_0)(const int16_t *qq, const float *qd, size_t q_stride, int m, const uint8_t *part, int slot0, int ng, int d,
                          float scale, float *out, size_t out_stride, brisk_attn_pf *pf);
    void (*kq_multi_q4_0)(const int16_t *qq, const float *qd, size_t q_stride, int m, const uint8_t *part, int slot0, int ng, int d,
                          float scale, float *out, size_t out_stride, brisk_attn_pf *pf);
    /* axpy_f16_rows_multi over V rows in F32 / Q8_0 / Q4_0 row form (row j at
     * v + j * row_bytes): o[i] = o[i] + p * v_j[i] for F32; for Q8_0 / Q4_0
     * o[i] = fmaf(p, v_j[i], o[i]), one fused multiply-add with v_j[i]
     * dequantized exactly (llama.cpp's ggml_vec_mad_f32 on the dequantized
     * row, which its FMA builds fuse; half the vector operations per head).
     * pf (Q8_0 / Q4_0): as axpy_f16_rows_multi's. */
    void (*axpy_f32_rows_multi)(float *o, size_t o_stride, int m, const float *p, size_t p_stride, const float *v, size_t stride,
                                int n, int d);
    void (*axpy_q8_0_rows_multi)(float *o, size_t o_stride, int m, const float *p, size_t p_stride, const uint8_t *v,
                                 size_t row_bytes, int n, int d, brisk_attn_pf *pf);
    void (*axpy_q4_0_rows_multi)(float *o, size_t o_stride, int m, const float *p, size_t p_stride, const uint8_t *v,
                                 size_t row_bytes, int n, int d, brisk_attn_pf *pf);
    /* KIVI's k4 / k2 (kv/kv.h's layouts, docs/KV.md): kq_multi_k4 / _k2 are
     * kq_multi_q4_0's form over a sealed K part (per channel i: code q of slot
     * s, F16 d[i] and min[i]), each key element (float)q * d + min (a multiply,
     * then an add) first; axpy_k4 / _k2_rows_multi over V rows of 32-element
     * groups (F16 d, F16 min, codes), v_j[i] = (float)q * d + min, added as
     * the other quantized V types are: o[i] = fmaf(p, v_j[i], o[i]). */
    void (*kq_multi_k4)(const float *q, size_t q_stride, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                        size_t out_stride);
    void (*kq_multi_k2)(const float *q, size_t q_stride, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                        size_t out_stride);
    void (*axpy_k4_rows_multi)(float *o, size_t o_stride, int m, const float *p, size_t p_stride, const uint8_t *v, size_t row_bytes,
                               int n, int d);
    void (*axpy_k2_rows_multi)(float *o, size_t o_stride, int m, const float *p, size_t p_stride, const uint8_t *v, size_t row_bytes,
                               int n, int d);
} brisk_attn_kernels;

const brisk_attn_kernels *brisk_attn_ref(void);
/* avx512_attn_kv.c: the avx512 table's quantized-cache kernels */
void brisk_avx512_kq_multi_q8_0(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d,
                                float scale, float *out, size_t os, brisk_attn_pf *pf);
void brisk_avx512_kq_multi_q4_0(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d,
                                float scale, float *out, size_t os, brisk_attn_pf *pf);
void brisk_avx512_axpy_f32_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const float *v, size_t stride, int n, int d);
void brisk_avx512_axpy_q8_0_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d,
                                       brisk_attn_pf *pf);
void brisk_avx512_axpy_q4_0_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d,
                                       brisk_attn_pf *pf);
/* avx512_attn_kivi.c / avx2_attn_kivi.c: the k4/k2 kernels of the avx512 / avx2 tables */
void brisk_avx512_kq_multi_k4(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                              size_t os);
void brisk_avx512_kq_multi_k2(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                              size_t os);
void brisk_avx512_axpy_k4_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d);
void brisk_avx512_axpy_k2_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d);
void brisk_avx2_kq_multi_k4(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                            size_t os);
void brisk_avx2_kq_multi_k2(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                            size_t os);
void brisk_avx2_axpy_k4_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d);
void brisk_avx2_axpy_k2_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d);
/* The table of the kernel table brisk_kernels_best runs (its ISA: the
 * AVX-512 one with the avx512 table, avx2's with avx2, NEON's with any neon
 * table, ref's with ref). Never NULL. */
const brisk_attn_kernels *brisk_attn_best(void);
/* Every attention table this CPU can run, ref first (tests). */
int brisk_attn_all(const brisk_attn_kernels **out, int max);
const brisk_attn_kernels *brisk_attn_avx2(void);
const brisk_attn_kernels *brisk_attn_avx512(void);
const brisk_attn_kernels *brisk_attn_neon(void);

/* The packed-GEMM table of brisk_kernels_best's table (avx512, avx2-vnni, avx2,
 * neon-i8mm, neon-dotprod), or NULL (ref, neon). */
const brisk_gemm_kernels *brisk_gemm_best(void);
const brisk_gemm_kernels *brisk_gemm_avx512(void);
const brisk_gemm_kernels *brisk_gemm_avx2(void);
const brisk_gemm_kernels *brisk_gemm_avx2_vnni(void);
const brisk_gemm_kernels *brisk_gemm_neon_dotprod(void);   /* neon_dotprod_gemm.c: SDOT */
const brisk_gemm_kernels *brisk_gemm_neon_i8mm(void);      /* neon_i8mm_gemm.c: SDOT, and SMMLA for Q4_0 */
/* The packed-GEMM tables of every kernel table this CPU can run (tests, benchmarks). */
int brisk_gemm_all(const brisk_gemm_kernels **out, int max);

/* Whether brisk_pack_rows knows the type; the bytes of one packed group of
 * BRISK_GEMM_ROWS rows of cols elements (0: that width cannot be packed); the
 * int32 act_sums per activation row of n elements. */
bool brisk_pack_supported(uint32_t type);
size_t brisk_pack_group_bytes(uint32_t type, int64_t cols);
int64_t brisk_act_sums_len(int64_t n);   /* enough for every act type's side data, F16's n floats included */
/* Pack BRISK_GEMM_ROWS canonical rows (row_bytes apart, cols elements each) into dst
 * (brisk_pack_group_bytes bytes). Portable; the layout is the same on every ISA. */
void brisk_pack_rows(uint32_t type, void *dst, const void *src, size_t row_bytes, int64_t cols);
/* Portable act_sums for Q8_0 activations (the spec for the ISA versions). */
void brisk_act_sums_q8_0_ref(const void *act, int64_t n, int32_t *sums);

#endif
