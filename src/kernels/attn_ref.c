/* attn_ref: the attention kernels as plain loops, the specification every
 * ISA's table (avx2_attn.c, avx512_gemm.c, neon_attn.c) matches bit for bit.
 * Each output is one chain of a multiply then an add per element, in element
 * order (ISO C: no contraction into fused multiply-adds), except where a
 * kernel's comment in kernels.h says fmaf (quantized V) or integer dots
 * (quantized K). */
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#include <math.h>
#include <string.h>

static void kq16(const float *q, const uint16_t *k, size_t stride, int d, float scale, float *out) {
    for (int l = 0; l < 16; l++) {
        const uint16_t *kl = k + (size_t)l * stride;
        float s = 0.0f;
        for (int i = 0; i < d; i++) s = s + q[i] * brisk_fp16_to_fp32(kl[i]);
        out[l] = s * scale;
    }
}

static void kq16t(const float *q, const float *kt, size_t stride, int d, float scale, float *out) {
    for (int l = 0; l < 16; l++) {
        float s = 0.0f;
        for (int i = 0; i < d; i++) s = s + q[i] * kt[(size_t)i * stride + (size_t)l];
        out[l] = s * scale;
    }
}

static void axpy_f16(float *o, float p, const uint16_t *v, int d) {
    for (int i = 0; i < d; i++) o[i] = o[i] + p * brisk_fp16_to_fp32(v[i]);
}

static void axpy_f16_rows(float *o, const float *p, const uint16_t *v, size_t stride, int n, int d) {
    for (int j = 0; j < n; j++) axpy_f16(o, p[j], v + (size_t)j * stride, d);
}

static void kq_multi_t(const float *q, size_t qs, int m, const float *kt, size_t stride, int ng, int d, float scale, float *out,
                       size_t os) {
    for (int h = 0; h < m; h++)
        for (int g = 0; g < ng; g++) kq16t(q + (size_t)h * qs, kt + 16 * g, stride, d, scale, out + (size_t)h * os + 16 * g);
}

static void kq_multi_h(const float *q, size_t qs, int m, const uint16_t *kt, size_t stride, int ng, int d, float scale, float *out,
                       size_t os, brisk_attn_pf *pf) {
    (void)pf;   /* the spec does not prefetch */
    for (int h = 0; h < m; h++)
        for (int g = 0; g < ng; g++)
            for (int l = 0; l < 16; l++) {
                const float *qh = q + (size_t)h * qs;
                float s = 0.0f;
                for (int i = 0; i < d; i++) s = s + qh[i] * brisk_fp16_to_fp32(kt[(size_t)i * stride + (size_t)(16 * g + l)]);
                out[(size_t)h * os + (size_t)(16 * g + l)] = s * scale;
            }
}

static void axpy_f16_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint16_t *v, size_t stride, int n, int d,
                                brisk_attn_pf *pf) {
    (void)pf;
    for (int h = 0; h < m; h++) axpy_f16_rows(o + (size_t)h * os, p + (size_t)h * ps, v, stride, n, d);
}

/* ---- the quantized cache types (kv/kv.h's layouts) ---- */

static void kq_multi_qk(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale,
                       float *out, size_t os, bool q4) {
    for (int h = 0; h < m; h++)
        for (int l = 0; l < 16 * ng; l++)
            out[(size_t)h * os + (size_t)l] =
                brisk_kq_q_slot(qq + (size_t)h * qs, qd + (size_t)h * (qs / 32), part, slot0 + l, d, q4) * scale;
}

static void kq_multi_q8_0(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale,
                          float *out, size_t os, brisk_attn_pf *pf) {
    (void)pf;
    kq_multi_qk(qq, qd, qs, m, part, slot0, ng, d, scale, out, os, false);
}

static void kq_multi_q4_0(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale,
                          float *out, size_t os, brisk_attn_pf *pf) {
    (void)pf;
    kq_multi_qk(qq, qd, qs, m, part, slot0, ng, d, scale, out, os, true);
}

static void axpy_f32_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const float *v, size_t stride, int n, int d) {
    for (int h = 0; h < m; h++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < d; i++) o[(size_t)h * os + i] = o[(size_t)h * os + i] + p[(size_t)h * ps + j] * v[(size_t)j * stride + i];
}

static void axpy_q8_0_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d,
                                 brisk_attn_pf *pf) {
    (void)pf;
    for (int h = 0; h < m; h++)
        for (int j = 0; j < n; j++) {
            const brisk_block_q8_0 *b = (const brisk_block_q8_0 *)(const void *)(v + (size_t)j * rb);
            const float pj = p[(size_t)h * ps + j];
            float *oh = o + (size_t)h * os;
            for (int i = 0; i < d; i++) oh[i] = fmaf(pj, brisk_fp16_to_fp32(b[i / 32].d) * (float)b[i / 32].qs[i % 32], oh[i]);
        }
}

static void axpy_q4_0_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d,
                                 brisk_attn_pf *pf) {
    (void)pf;
    for (int h = 0; h < m; h++)
        for (int j = 0; j < n; j++) {
            const brisk_block_q4_0 *b = (const brisk_block_q4_0 *)(const void *)(v + (size_t)j * rb);
            const float pj = p[(size_t)h * ps + j];
            float *oh = o + (size_t)h * os;
            for (int i = 0; i < d; i++) {
                const int e = i % 32, q = e < 16 ? (b[i / 32].qs[e] & 15) : (b[i / 32].qs[e - 16] >> 4);
                oh[i] = fmaf(pj, brisk_fp16_to_fp32(b[i / 32].d) * (float)(q - 8), oh[i]);
            }
        }
}

/* ---- KIVI's k4 / k2 (kv/kv.h's layouts) ---- */

static inline float k4_k(const uint8_t *part, int d, int s, int i) {
    const uint16_t *dd = (const uint16_t *)(const void *)(part + (size_t)d * 16), *mm = dd + d;
    const int q = (part[(size_t)i * 16 + (size_t)(s % 16)] >> (s < 16 ? 0 : 4)) & 15;
    return (float)q * brisk_fp16_to_fp32(dd[i]) + brisk_fp16_to_fp32(mm[i]);
}

static inline float k2_k(const uint8_t *part, int d, int s, int i) {
    const uint16_t *dd = (const uint16_t *)(const void *)(part + (size_t)d * 8), *mm = dd + d;
    const int q = (part[(size_t)i * 8 + (size_t)(s % 8)] >> (2 * (s / 8))) & 3;
    return (float)q * brisk_fp16_to_fp32(dd[i]) + brisk_fp16_to_fp32(mm[i]);
}

static void kq_multi_k4(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                        size_t os) {
    for (int h = 0; h < m; h++)
        for (int l = 0; l < 16 * ng; l++) {
            const float *qh = q + (size_t)h * qs;
            float s = 0.0f;
            for (int i = 0; i < d; i++) s = s + qh[i] * k4_k(part, d, slot0 + l, i);
            out[(size_t)h * os + (size_t)l] = s * scale;
        }
}

static void kq_multi_k2(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                        size_t os) {
    for (int h = 0; h < m; h++)
        for (int l = 0; l < 16 * ng; l++) {
            const float *qh = q + (size_t)h * qs;
            float s = 0.0f;
            for (int i = 0; i < d; i++) s = s + qh[i] * k2_k(part, d, slot0 + l, i);
            out[(size_t)h * os + (size_t)l] = s * scale;
        }
}

/* Element e (0..31) of a 32-element V group of k4 (20 bytes) / k2 (12 bytes). */
static inline float k4_v(const uint8_t *g, int e) {
    uint16_t d, mn;
    memcpy(&d, g, 2);
    memcpy(&mn, g + 2, 2);
    const int q = e < 16 ? (g[4 + e] & 15) : (g[4 + e - 16] >> 4);
    return (float)q * brisk_fp16_to_fp32(d) + brisk_fp16_to_fp32(mn);
}

static inline float k2_v(const uint8_t *g, int e) {
    uint16_t d, mn;
    memcpy(&d, g, 2);
    memcpy(&mn, g + 2, 2);
    const int q = (g[4 + e % 8] >> (2 * (e / 8))) & 3;
    return (float)q * brisk_fp16_to_fp32(d) + brisk_fp16_to_fp32(mn);
}

static void axpy_k4_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d) {
    for (int h = 0; h < m; h++)
        for (int j = 0; j < n; j++) {
            const uint8_t *row = v + (size_t)j * rb;
            const float pj = p[(size_t)h * ps + j];
            float *oh = o + (size_t)h * os;
            for (int i = 0; i < d; i++) oh[i] = fmaf(pj, k4_v(row + (size_t)(i / 32) * 20, i % 32), oh[i]);
        }
}

static void axpy_k2_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d) {
    for (int h = 0; h < m; h++)
        for (int j = 0; j < n; j++) {
            const uint8_t *row = v + (size_t)j * rb;
            const float pj = p[(size_t)h * ps + j];
            float *oh = o + (size_t)h * os;
            for (int i = 0; i < d; i++) oh[i] = fmaf(pj, k2_v(row + (size_t)(i / 32) * 12, i % 32), oh[i]);
        }
}

static const brisk_attn_kernels ref_table = {
    .isa = "ref",
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
    .kq_multi_k4 = kq_multi_k4,
    .kq_multi_k2 = kq_multi_k2,
    .axpy_k4_rows_multi = axpy_k4_rows_multi,
    .axpy_k2_rows_multi = axpy_k2_rows_multi,
};

const brisk_attn_kernels *brisk_attn_ref(void) { return &ref_table; }
