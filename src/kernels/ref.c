/* ref: the reference dot products, and the reference kernel table.
 *
 * This file is the specification every ISA variant is tested against. Each
 * kernel follows ggml's scalar `_generic` kernel (ggml-cpu/quants.c, vec.cpp)
 * in what it rounds and in what order it adds floats: integer sums per block
 * (exact), multiplied by the fp16 scales in float; K formats accumulate the
 * per-block products in 8 float lanes that are summed at the end, as ggml's
 * does. Float formats multiply in float and accumulate in double. */
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/convert.h"

#include <string.h>

#define QK BRISK_QK_K

/* ---- float formats ------------------------------------------------------------- */

void brisk_vec_dot_f32_ref(int64_t n, float *out, const void *w, const void *a) {
    const float *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * y[i]);
    *out = (float)sum;
}

void brisk_vec_dot_f16_ref(int64_t n, float *out, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(brisk_fp16_to_fp32(x[i]) * brisk_fp16_to_fp32(y[i]));
    *out = (float)sum;
}

void brisk_vec_dot_bf16_ref(int64_t n, float *out, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(brisk_bf16_to_fp32(x[i]) * brisk_bf16_to_fp32(y[i]));
    *out = (float)sum;
}

/* ---- 32-element formats against Q8_0 / Q8_1 ----------------------------------------- */
/* In all of them weight nibble j (low) pairs with activation j, the high
 * nibble with activation j + 16. */

void brisk_vec_dot_q4_0_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q4_0 *x = w;
    const brisk_block_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            sumi += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        sum += sumi * brisk_fp16_to_fp32(x[i].d) * brisk_fp16_to_fp32(y[i].d);
    }
    *out = sum;
}

/* value = d*q + m, so dot = dx*dy*sum(q*qy) + m * (dy*sum(qy)) = ... + m*s. */
void brisk_vec_dot_q4_1_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q4_1 *x = w;
    const brisk_block_q8_1 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            sumi += (x[i].qs[j] & 0x0f) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + 16];
        }
        sum += (brisk_fp16_to_fp32(x[i].d) * brisk_fp16_to_fp32(y[i].d)) * sumi +
               brisk_fp16_to_fp32(x[i].m) * brisk_fp16_to_fp32(y[i].s);
    }
    *out = sum;
}

void brisk_vec_dot_q5_0_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q5_0 *x = w;
    const brisk_block_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            const int lo = ((x[i].qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4)) - 16;
            const int hi = ((x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16;
            sumi += lo * y[i].qs[j] + hi * y[i].qs[j + 16];
        }
        sum += (brisk_fp16_to_fp32(x[i].d) * brisk_fp16_to_fp32(y[i].d)) * sumi;
    }
    *out = sum;
}

void brisk_vec_dot_q5_1_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q5_1 *x = w;
    const brisk_block_q8_1 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            const int lo = (x[i].qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
            const int hi = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            sumi += lo * y[i].qs[j] + hi * y[i].qs[j + 16];
        }
        sum += (brisk_fp16_to_fp32(x[i].d) * brisk_fp16_to_fp32(y[i].d)) * sumi +
               brisk_fp16_to_fp32(x[i].m) * brisk_fp16_to_fp32(y[i].s);
    }
    *out = sum;
}

void brisk_vec_dot_q8_0_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % 32 == 0);
    const brisk_block_q8_0 *x = w;
    const brisk_block_q8_0 *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int j = 0; j < 32; j++) sumi += x[i].qs[j] * y[i].qs[j];
        sum += sumi * (brisk_fp16_to_fp32(x[i].d) * brisk_fp16_to_fp32(y[i].d));
    }
    *out = sum;
}

/* ---- K formats against Q8_K ------------------------------------------------------------ */

/* Integer part of one K block in ggml's 8-lane arrangement: lane l gets
 * sum over elements e with e % 8 == l of scale[e / sub] * q[e] * q8[e]. */
static void k_block_lanes(const int8_t q[QK], const int8_t q8[QK], const int *scale, int sub,
                          int32_t lanes[8]) {
    memset(lanes, 0, 8 * sizeof lanes[0]);
    for (int e = 0; e < QK; e++) lanes[e & 7] += scale[e / sub] * (q[e] * q8[e]);
}

/* The float side shared by Q3_K..Q6_K: lanes[l] += d * int lane, per block. */
static void k_accumulate(float acc[8], float d, const int32_t lanes[8]) {
    for (int l = 0; l < 8; l++) acc[l] += d * lanes[l];
}

static float k_finish(float sum, const float acc[8]) {
    for (int l = 0; l < 8; l++) sum += acc[l];
    return sum;
}

void brisk_vec_dot_q2_k_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q2_k *x = w;
    const brisk_block_q8_k *y = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        const uint8_t *sc = x[i].scales;
        int summs = 0;   /* the min term: sum over sub-blocks of m * sum(q8) */
        for (int j = 0; j < 16; j++) summs += y[i].bsums[j] * (sc[j] >> 4);
        const float dall = y[i].d * brisk_fp16_to_fp32(x[i].d);
        const float dmin = y[i].d * brisk_fp16_to_fp32(x[i].dmin);
        int isum = 0, is = 0;
        const uint8_t *q2 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        for (int half = 0; half < 2; half++, q2 += 32) {
            for (int shift = 0; shift < 8; shift += 2, q8 += 32) {
                for (int g = 0; g < 2; g++) {
                    int s = 0;
                    for (int l = 16 * g; l < 16 * g + 16; l++) s += q8[l] * ((q2[l] >> shift) & 3);
                    isum += (sc[is++] & 0x0f) * s;
                }
            }
        }
        sum += dall * isum - dmin * summs;
    }
    *out = sum;
}

void brisk_vec_dot_q3_k_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q3_k *x = w;
    const brisk_block_q8_k *y = a;
    float acc[8] = {0};
    int8_t q[QK], sc8[16];
    int scale[16];
    int32_t lanes[8];
    for (int64_t i = 0; i < n / QK; i++) {
        /* element 128h + 32s + l: 2 low bits at bit pair s of qs[32h + l],
         * high bit (set = no -4) at bit 4h + s of hmask[l] */
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int l = 0; l < 32; l++)
                    q[128 * h + 32 * s + l] = (int8_t)(((x[i].qs[32 * h + l] >> (2 * s)) & 3) -
                                                       ((x[i].hmask[l] >> (4 * h + s)) & 1 ? 0 : 4));
        brisk_q3_k_scales(x[i].scales, sc8);
        for (int j = 0; j < 16; j++) scale[j] = sc8[j];
        k_block_lanes(q, y[i].qs, scale, 16, lanes);
        k_accumulate(acc, brisk_fp16_to_fp32(x[i].d) * y[i].d, lanes);
    }
    *out = k_finish(0.0f, acc);
}

/* Shared by Q4_K and Q5_K once the 0..15 / 0..31 values are unpacked. */
static void k4_block(const int8_t q[QK], const uint8_t packed[12], uint16_t d, uint16_t dmin,
                     const brisk_block_q8_k *y, float acc[8], float *sum) {
    int scale[8], sumi = 0;
    int32_t lanes[8];
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        brisk_k4_scale_min(j, packed, &sc, &m);
        scale[j] = sc;
        sumi += (y->bsums[2 * j] + y->bsums[2 * j + 1]) * m;
    }
    k_block_lanes(q, y->qs, scale, 32, lanes);
    k_accumulate(acc, brisk_fp16_to_fp32(d) * y->d, lanes);
    *sum -= brisk_fp16_to_fp32(dmin) * y->d * sumi;
}

void brisk_vec_dot_q4_k_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q4_k *x = w;
    const brisk_block_q8_k *y = a;
    float acc[8] = {0}, sum = 0.0f;
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                q[64 * c + l] = (int8_t)(x[i].qs[32 * c + l] & 0x0f);
                q[64 * c + 32 + l] = (int8_t)(x[i].qs[32 * c + l] >> 4);
            }
        }
        k4_block(q, x[i].scales, x[i].d, x[i].dmin, &y[i], acc, &sum);
    }
    *out = k_finish(sum, acc);
}

void brisk_vec_dot_q5_k_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q5_k *x = w;
    const brisk_block_q8_k *y = a;
    float acc[8] = {0}, sum = 0.0f;
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                const int h = x[i].qh[l] >> (2 * c);
                q[64 * c + l] = (int8_t)((x[i].qs[32 * c + l] & 0x0f) | ((h & 1) << 4));
                q[64 * c + 32 + l] = (int8_t)((x[i].qs[32 * c + l] >> 4) | ((h & 2) << 3));
            }
        }
        k4_block(q, x[i].scales, x[i].d, x[i].dmin, &y[i], acc, &sum);
    }
    *out = k_finish(sum, acc);
}

void brisk_vec_dot_q6_k_ref(int64_t n, float *out, const void *w, const void *a) {
    BRISK_ASSERT(n % QK == 0);
    const brisk_block_q6_k *x = w;
    const brisk_block_q8_k *y = a;
    float acc[8] = {0};
    int8_t q[QK];
    int scale[16];
    int32_t lanes[8];
    for (int64_t i = 0; i < n / QK; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                int8_t *o = q + 128 * h;
                o[l] = (int8_t)(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
                o[l + 32] = (int8_t)(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
                o[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        for (int j = 0; j < 16; j++) scale[j] = x[i].scales[j];
        k_block_lanes(q, y[i].qs, scale, 16, lanes);
        k_accumulate(acc, brisk_fp16_to_fp32(x[i].d) * y[i].d, lanes);
    }
    *out = k_finish(0.0f, acc);
}

/* ---- the table --------------------------------------------------------------------------- */

static const brisk_kernels ref_table = {
    .isa = "ref",
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
    },
    .quantize_act = {
        [BRISK_Q_F32] = brisk_f32_quantize,
        [BRISK_Q_F16] = brisk_f16_quantize,
        [BRISK_Q_BF16] = brisk_bf16_quantize,
        [BRISK_Q_Q8_0] = brisk_q8_0_quantize,
        [BRISK_Q_Q8_1] = brisk_q8_1_quantize,
        [BRISK_Q_Q8_K] = brisk_q8_k_quantize,
    },
};

const brisk_kernels *brisk_kernels_ref(void) { return &ref_table; }
