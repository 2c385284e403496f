/* ref: the reference dot products, and the reference kernel table.
 *
 * This file is the specification every ISA variant is tested against, and it
 * is plain C. The quantized kernels reproduce, operation for operation, the
 * float arithmetic llama.cpp's CPU backend does on x86 when it evaluates a
 * prompt batch (see "the reduction order" below), and the table quantizes
 * activations the way ggml does there (brisk_q8_0_quantize_x86 and friends),
 * so the reference itself matches llama.cpp's logits bit for bit. Every ISA
 * table must return the same bits. F32 and BF16 multiply in float and
 * accumulate in double; F16 has its own 16-lane order (below). */
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/convert.h"
#include "ops/ops.h"

#include <math.h>
#include <string.h>

#define QK BRISK_QK_K

/* ---- float formats ------------------------------------------------------------- */

void brisk_vec_dot_f32_ref(int64_t n, float *out, const void *w, const void *a) {
    const float *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * y[i]);
    *out = (float)sum;
}

/* F16 x F16: the 16-lane order of llamafile's tinyBLAS on AVX-512 (what
 * llama.cpp runs for an F16 matmul there, activations rounded to F16 first).
 * Element i goes to lane i % 16, each lane a chain of fmaf in increasing i
 * (the product of two F16 values is exact in F32, so fused or not gives the
 * same bits), then one fixed halving sum: lanes l + l+8, then + 4, + 2, + 1.
 * The order is per output element and independent of how many rows or tokens
 * a GEMM tile holds, which is what lets the packed F16 GEMM keep 16 lanes per
 * (row, token) in one zmm register and stay batch-invariant. */
static float hsum16(const float lane[16]) {
    float s8[8], s4[4];
    for (int i = 0; i < 8; i++) s8[i] = lane[i] + lane[i + 8];
    for (int i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

void brisk_vec_dot_f16_ref(int64_t n, float *out, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    float lane[16] = {0};
    for (int64_t i = 0; i < n; i++) lane[i % 16] = fmaf(brisk_fp16_to_fp32(x[i]), brisk_fp16_to_fp32(y[i]), lane[i % 16]);
    *out = hsum16(lane);
}

void brisk_vec_dot_bf16_ref(int64_t n, float *out, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(brisk_bf16_to_fp32(x[i]) * brisk_bf16_to_fp32(y[i]));
    *out = (float)sum;
}

/* ---- the reduction order (shared by every quantized kernel) -------------------------------
 *
 * Quantized dot products are integer sums times float scales. The integer part
 * is exact in any order; what decides the float result is which integer sums
 * get converted to float, and in what order they are scaled and added. brisk
 * reproduces the order llama.cpp's CPU backend uses on x86 (AVX2/AVX-512) for a
 * prompt batch, so that its logits match llama.cpp's bit for bit:
 *
 *   LANES   the 8-lane form (llamafile's tinyBLAS for Q8_0/Q5_0; ggml's AVX2
 *           vec_dot for Q4_1, Q5_1, Q3_K, Q5_K, Q6_K). Each 32-byte group of
 *           products is summed into 8 int32 lanes, lane m = bytes 4m..4m+3 of
 *           the group (maddubs + madd, or VNNI dpbusd: same integers). Per block,
 *           each lane is converted to float and fused into its own float
 *           accumulator: acc[m] = fma(d, (float)lane[m], acc[m]). At the end
 *           the 8 accumulators are summed as (a[i] + a[i+4]), then pairs (0,2)
 *           and (1,3), then the two (hsum8 below).
 *   SCALAR  the repacked GEMMs (ggml's q4_0_8x8, q4_K_8x8, q2_K_8x8), which
 *           keep each output in one float lane: per block (or per group of
 *           sub-blocks) one int32 sum, fused into one accumulator in order:
 *           acc = fma((float)isum, dw * da, acc).
 *
 * The scale product is always computed first, in float (weight scale times
 * activation scale; ggml's fp16 scales converted exactly). fmaf() is used
 * wherever ggml fuses; this file is compiled as C11, so the compiler never
 * fuses on its own. Each kernel below names its form and its extras. */

static float hsum8(const float a[8]) {
    const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
    return (t0 + t2) + (t1 + t3);
}

/* lanes[m] += scale * sum of q[b] * y[b] over bytes b = 4m..4m+3 of one 32-byte group. */
static void lanes_add(int32_t lanes[8], const int8_t q[32], const int8_t y[32], int scale_lo, int scale_hi) {
    for (int m = 0; m < 8; m++) {
        int s = 0;
        for (int b = 4 * m; b < 4 * m + 4; b++) s += q[b] * y[b];
        lanes[m] += (m < 4 ? scale_lo : scale_hi) * s;
    }
}

static void lanes_fma(float acc[8], float d, const int32_t lanes[8]) {
    for (int m = 0; m < 8; m++) acc[m] = fmaf(d, (float)lanes[m], acc[m]);
}

static int dot32(const int8_t q[32], const int8_t y[32]) {
    int s = 0;
    for (int b = 0; b < 32; b++) s += q[b] * y[b];
    return s;
}

/* ---- 32-element formats against Q8_0 / Q8_1 ----------------------------------------- */
/* Weight nibble j (low) is element j, the high nibble element j + 16; the
 * unpack helpers put the values in element order. */

static void unpack_q4(const uint8_t qs[16], int offset, int8_t q[32]) {
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)((qs[j] & 0x0f) - offset);
        q[j + 16] = (int8_t)((qs[j] >> 4) - offset);
    }
}

static void unpack_q5(const uint8_t qs[16], const uint8_t qh_bytes[4], int offset, int8_t q[32]) {
    uint32_t qh;
    memcpy(&qh, qh_bytes, sizeof qh);
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(((qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4)) - offset);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - offset);
    }
}

/* SCALAR (ggml's repacked q4_0_8x8 GEMM). */
void brisk_vec_dot_q4_0_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q4_0 *x = w;
    const brisk_block_q8_0 *y = a;
    float sum = 0.0f;
    int8_t q[32];
    for (int64_t i = 0; i < n / 32; i++) {
        unpack_q4(x[i].qs, 8, q);
        const float d = brisk_fp16_to_fp32(x[i].d) * brisk_fp16_to_fp32(y[i].d);
        sum = fmaf((float)dot32(q, y[i].qs), d, sum);
    }
    *out = sum;
}

/* LANES, plus the min term: value = d*q + m, so each block adds m * s
 * (s = dy * sum(qy)), fused into a scalar that joins after hsum8. */
void brisk_vec_dot_q4_1_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q4_1 *x = w;
    const brisk_block_q8_1 *y = a;
    float acc[8] = {0}, mins = 0.0f;
    int8_t q[32];
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t lanes[8] = {0};
        unpack_q4(x[i].qs, 0, q);
        lanes_add(lanes, q, y[i].qs, 1, 1);
        mins = fmaf(brisk_fp16_to_fp32(x[i].m), brisk_fp16_to_fp32(y[i].s), mins);
        lanes_fma(acc, brisk_fp16_to_fp32(x[i].d) * brisk_fp16_to_fp32(y[i].d), lanes);
    }
    *out = hsum8(acc) + mins;
}

/* LANES (llamafile tinyBLAS). */
void brisk_vec_dot_q5_0_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q5_0 *x = w;
    const brisk_block_q8_0 *y = a;
    float acc[8] = {0};
    int8_t q[32];
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t lanes[8] = {0};
        unpack_q5(x[i].qs, x[i].qh, 16, q);
        lanes_add(lanes, q, y[i].qs, 1, 1);
        lanes_fma(acc, brisk_fp16_to_fp32(x[i].d) * brisk_fp16_to_fp32(y[i].d), lanes);
    }
    *out = hsum8(acc);
}

/* LANES plus the fused min term, as Q4_1. */
void brisk_vec_dot_q5_1_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q5_1 *x = w;
    const brisk_block_q8_1 *y = a;
    float acc[8] = {0}, mins = 0.0f;
    int8_t q[32];
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t lanes[8] = {0};
        unpack_q5(x[i].qs, x[i].qh, 0, q);
        lanes_add(lanes, q, y[i].qs, 1, 1);
        mins = fmaf(brisk_fp16_to_fp32(x[i].m), brisk_fp16_to_fp32(y[i].s), mins);
        lanes_fma(acc, brisk_fp16_to_fp32(x[i].d) * brisk_fp16_to_fp32(y[i].d), lanes);
    }
    *out = hsum8(acc) + mins;
}

/* LANES (llamafile tinyBLAS). */
void brisk_vec_dot_q8_0_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q8_0 *x = w;
    const brisk_block_q8_0 *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t lanes[8] = {0};
        lanes_add(lanes, x[i].qs, y[i].qs, 1, 1);
        lanes_fma(acc, brisk_fp16_to_fp32(x[i].d) * brisk_fp16_to_fp32(y[i].d), lanes);
    }
    *out = hsum8(acc);
}

/* ---- K formats against Q8_K ------------------------------------------------------------ */
/* Activation blocks are Q8_K (ggml's quantize_row_q8_K_ref on x86 too; the
 * 4-row GEMM quantizer gives the same products). */

/* SCALAR per 128-element half (ggml's repacked q2_K_8x8 GEMM): the half's
 * 8 scaled sub-block sums go into acc, its 8 min * bsum products into a
 * separate min accumulator; the result is acc - min accumulator. */
void brisk_vec_dot_q2_k_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q2_k *x = w;
    const brisk_block_q8_k *y = a;
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        const uint8_t *sc = x[i].scales;
        const float dall = brisk_fp16_to_fp32(x[i].d) * y[i].d;
        const float dmin = brisk_fp16_to_fp32(x[i].dmin) * y[i].d;
        const int8_t *q8 = y[i].qs;
        for (int h = 0; h < 2; h++) {
            /* element 128h + 32s + l: bit pair s of qs[32h + l]; sub-block 8h + 2s + l/16 */
            const uint8_t *q2 = x[i].qs + 32 * h;
            int isum = 0, imin = 0;
            for (int s = 0; s < 4; s++, q8 += 32) {
                for (int g = 0; g < 2; g++) {
                    int dot = 0;
                    for (int l = 16 * g; l < 16 * g + 16; l++) dot += q8[l] * ((q2[l] >> (2 * s)) & 3);
                    isum += (sc[8 * h + 2 * s + g] & 0x0f) * dot;
                }
            }
            for (int j = 8 * h; j < 8 * h + 8; j++) imin += (sc[j] >> 4) * y[i].bsums[j];
            acc = fmaf((float)isum, dall, acc);
            acc_min = fmaf((float)imin, dmin, acc_min);
        }
    }
    *out = acc - acc_min;
}

/* LANES over the block's eight 32-element groups, each lane scaled by its
 * 16-element sub-block's signed scale. */
void brisk_vec_dot_q3_k_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q3_k *x = w;
    const brisk_block_q8_k *y = a;
    float acc[8] = {0};
    int8_t q[QK], sc[16];
    for (int64_t i = 0; i < n / QK; i++) {
        /* element 128h + 32s + l: 2 low bits at bit pair s of qs[32h + l],
         * high bit (set = no -4) at bit 4h + s of hmask[l] */
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int l = 0; l < 32; l++)
                    q[128 * h + 32 * s + l] = (int8_t)(((x[i].qs[32 * h + l] >> (2 * s)) & 3) -
                                                       ((x[i].hmask[l] >> (4 * h + s)) & 1 ? 0 : 4));
        brisk_q3_k_scales(x[i].scales, sc);
        int32_t lanes[8] = {0};
        for (int g = 0; g < 8; g++) lanes_add(lanes, q + 32 * g, y[i].qs + 32 * g, sc[2 * g], sc[2 * g + 1]);
        lanes_fma(acc, y[i].d * brisk_fp16_to_fp32(x[i].d), lanes);
    }
    *out = hsum8(acc);
}

/* The 0..15 / 0..31 values of a Q4_K/Q5_K block in element order: chunk c
 * (64 elements) keeps its low half in the low nibbles of qs[32c..32c+31]. */
static void unpack_k4(const uint8_t qs[128], const uint8_t *qh, int8_t q[QK]) {
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            const int h = qh ? qh[l] >> (2 * c) : 0;
            q[64 * c + l] = (int8_t)((qs[32 * c + l] & 0x0f) | ((h & 1) << 4));
            q[64 * c + 32 + l] = (int8_t)((qs[32 * c + l] >> 4) | ((h & 2) << 3));
        }
    }
}

/* SCALAR per 64-element pair of sub-blocks (ggml's repacked q4_K_8x8 GEMM):
 * sc[2p]*dot(2p) + sc[2p+1]*dot(2p+1) into acc, the pair's min products
 * m * sum(q8) into a separate accumulator; result acc - min accumulator. */
void brisk_vec_dot_q4_k_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q4_k *x = w;
    const brisk_block_q8_k *y = a;
    float acc = 0.0f, acc_min = 0.0f;
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        unpack_k4(x[i].qs, NULL, q);
        const float d = brisk_fp16_to_fp32(x[i].d) * y[i].d;
        const float dmin = brisk_fp16_to_fp32(x[i].dmin) * y[i].d;
        for (int p = 0; p < 4; p++) {
            int isum = 0, imin = 0;
            for (int j = 2 * p; j < 2 * p + 2; j++) {
                uint8_t sc, m;
                brisk_k4_scale_min(j, x[i].scales, &sc, &m);
                isum += sc * dot32(q + 32 * j, y[i].qs + 32 * j);
                imin += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            }
            acc = fmaf((float)isum, d, acc);
            acc_min = fmaf((float)imin, dmin, acc_min);
        }
    }
    *out = acc - acc_min;
}

/* LANES with one scale per 32-element group, plus the min term per block:
 * mins = fma(-(dy * dmin), sum_j m_j * sum(q8 of j), mins), added after hsum8. */
void brisk_vec_dot_q5_k_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q5_k *x = w;
    const brisk_block_q8_k *y = a;
    float acc[8] = {0}, mins = 0.0f;
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        unpack_k4(x[i].qs, x[i].qh, q);
        int32_t lanes[8] = {0};
        int summ = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            brisk_k4_scale_min(j, x[i].scales, &sc, &m);
            lanes_add(lanes, q + 32 * j, y[i].qs + 32 * j, sc, sc);
            summ += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        mins = fmaf(-y[i].d * brisk_fp16_to_fp32(x[i].dmin), (float)summ, mins);
        lanes_fma(acc, y[i].d * brisk_fp16_to_fp32(x[i].d), lanes);
    }
    *out = hsum8(acc) + mins;
}

/* LANES on the unsigned 6-bit values (0..63) with the 16-element sub-block
 * scales; the -32 offset comes off lane by lane afterwards, lane l losing
 * 32 * (bsums[2l]*sc[2l] + bsums[2l+1]*sc[2l+1]) (that is how ggml's AVX2
 * kernel splits it; the lane totals, and so the rounding, depend on it). */
void brisk_vec_dot_q6_k_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q6_k *x = w;
    const brisk_block_q8_k *y = a;
    float acc[8] = {0};
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32) {
            int8_t *o = q + 128 * h;
            for (int l = 0; l < 32; l++) {
                o[l] = (int8_t)((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4));
                o[l + 32] = (int8_t)((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4));
                o[l + 64] = (int8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                o[l + 96] = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
            }
        }
        const int8_t *sc = x[i].scales;
        int32_t lanes[8] = {0};
        for (int g = 0; g < 8; g++) lanes_add(lanes, q + 32 * g, y[i].qs + 32 * g, sc[2 * g], sc[2 * g + 1]);
        for (int l = 0; l < 8; l++)
            lanes[l] -= 32 * (y[i].bsums[2 * l] * sc[2 * l] + y[i].bsums[2 * l + 1] * sc[2 * l + 1]);
        lanes_fma(acc, y[i].d * brisk_fp16_to_fp32(x[i].d), lanes);
    }
    *out = hsum8(acc);
}

/* ---- 4-bit lookup-table formats -------------------------------------------------------------
 * A nibble indexes a table of 16 int8 values (brisk_iq4nl_values,
 * brisk_mxfp4_values); element order as Q4_0's (low nibbles are elements
 * 0-15). IQ4_NL and MXFP4 pair with Q8_0 and run, in llama.cpp on AVX2 and
 * AVX-512, through its repacked iq4_nl_8x8 / mxfp4_8x8 GEMM: SCALAR, like
 * Q4_0. IQ4_XS pairs with Q8_K and runs through ggml's IQ panel GEMM:
 * SCALAR per 256-element block, one 6-bit signed scale per 32-element group
 * inside the integer sum. */

static void unpack_lut4(const uint8_t qs[16], const int8_t values[16], int8_t q[32]) {
    for (int j = 0; j < 16; j++) {
        q[j] = values[qs[j] & 0x0f];
        q[j + 16] = values[qs[j] >> 4];
    }
}

/* SCALAR (ggml's repacked iq4_nl_8x8 GEMM). */
void brisk_vec_dot_iq4_nl_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_iq4_nl *x = w;
    const brisk_block_q8_0 *y = a;
    float sum = 0.0f;
    int8_t q[32];
    for (int64_t i = 0; i < n / 32; i++) {
        unpack_lut4(x[i].qs, brisk_iq4nl_values, q);
        const float d = brisk_fp16_to_fp32(x[i].d) * brisk_fp16_to_fp32(y[i].d);
        sum = fmaf((float)dot32(q, y[i].qs), d, sum);
    }
    *out = sum;
}

/* SCALAR (ggml's repacked mxfp4_8x8 GEMM); the scale product is the halved
 * E8M0 power of two times the activation's d. */
void brisk_vec_dot_mxfp4_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_mxfp4 *x = w;
    const brisk_block_q8_0 *y = a;
    float sum = 0.0f;
    int8_t q[32];
    for (int64_t i = 0; i < n / 32; i++) {
        unpack_lut4(x[i].qs, brisk_mxfp4_values, q);
        const float d = brisk_e8m0_half(x[i].e) * brisk_fp16_to_fp32(y[i].d);
        sum = fmaf((float)dot32(q, y[i].qs), d, sum);
    }
    *out = sum;
}

/* SCALAR per 256-element block (ggml's "IQ panel" GEMM, iqp.cpp, which
 * llama.cpp runs for IQ4_XS from 8 tokens up): the block's whole integer sum,
 * each 32-element group's dot times its ls_g - 32, fused into one
 * accumulator. (Below 8 tokens llama.cpp takes its AVX2 vec_dot, LANES; brisk
 * keeps the prompt batch's order at every batch size.) */
void brisk_vec_dot_iq4_xs_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_iq4_xs *x = w;
    const brisk_block_q8_k *y = a;
    float sum = 0.0f;
    int8_t q[32];
    for (int64_t i = 0; i < n / QK; i++) {
        int isum = 0;
        for (int g = 0; g < 8; g++) {
            unpack_lut4(x[i].qs + 16 * g, brisk_iq4nl_values, q);
            isum += (brisk_iq4_xs_scale(x[i].scales_l, x[i].scales_h, g) - 32) * dot32(q, y[i].qs + 32 * g);
        }
        sum = fmaf((float)isum, brisk_fp16_to_fp32(x[i].d) * y[i].d, sum);
    }
    *out = sum;
}

/* ---- the table --------------------------------------------------------------------------- */

static const brisk_kernels ref_table = {
    .isa = "ref",
    .exp_sub = brisk_exp_sub,   /* ops.c: fma() is inline on aarch64, a libm call in ref on x86 */
    .swiglu = brisk_swiglu,
    .vec_dot = {
        [BRISK_Q_F32] = brisk_vec_dot_f32_ref,
        [BRISK_Q_F16] = brisk_vec_dot_f16_ref,
        [BRISK_Q_BF16] = brisk_vec_dot_bf16_ref,
        [BRISK_Q_Q4_0] = brisk_vec_dot_q4_0_ref,
        [BRISK_Q_Q4_1] = brisk_vec_dot_q4_1_ref,
        [BRISK_Q_Q5_0] = brisk_vec_dot_q5_0_ref,
        [BRISK_Q_Q5_1] = brisk_vec_dot_q5_1_ref,
        [BRISK_Q_Q8_0] = brisk_vec_dot_q8_0_ref,
        [BRISK_Q_Q2_K] = brisk_vec_dot_q2_k_ref,
        [BRISK_Q_Q3_K] = brisk_vec_dot_q3_k_ref,
        [BRISK_Q_Q4_K] = brisk_vec_dot_q4_k_ref,
        [BRISK_Q_Q5_K] = brisk_vec_dot_q5_k_ref,
        [BRISK_Q_Q6_K] = brisk_vec_dot_q6_k_ref,
        [BRISK_Q_IQ4_NL] = brisk_vec_dot_iq4_nl_ref,
        [BRISK_Q_IQ4_XS] = brisk_vec_dot_iq4_xs_ref,
        [BRISK_Q_MXFP4] = brisk_vec_dot_mxfp4_ref,
    },
    .quantize_act = {
        [BRISK_Q_F32] = brisk_f32_quantize,
        [BRISK_Q_F16] = brisk_f16_quantize,
        [BRISK_Q_BF16] = brisk_bf16_quantize,
        [BRISK_Q_Q8_0] = brisk_q8_0_quantize_x86,
        [BRISK_Q_Q8_1] = brisk_q8_1_quantize_x86,
        [BRISK_Q_Q8_K] = brisk_q8_k_quantize,
    },
};

const brisk_kernels *brisk_kernels_ref(void) { return &ref_table; }
