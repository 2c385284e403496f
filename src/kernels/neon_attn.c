/* neon_attn: the attention kernels (kernels.h) on baseline AArch64 NEON,
 * each output bit-identical to attn_ref.c: a separate multiply and add per
 * element (vmulq_f32 then vaddq_f32, never a fused vfmaq), in element order,
 * 4 floats a lane group; F16 keys and values widened exactly by FCVTL. */
#include "kernels/kernels.h"
#include "quant/quant.h"

#include <arm_neon.h>

static inline float32x4_t load4h(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
static inline float32x4_t madd(float32x4_t acc, float32x4_t a, float32x4_t b) { return vaddq_f32(acc, vmulq_f32(a, b)); }

static void kq16(const float *q, const uint16_t *k, size_t stride, int d, float scale, float *out) {
    /* rows are stride apart: 16 independent row chains, 4 rows at a time by lanes */
    for (int l0 = 0; l0 < 16; l0 += 4) {
        float32x4_t s = vdupq_n_f32(0.0f);
        for (int i = 0; i < d; i++) {
            const uint16_t e[4] = {k[(size_t)(l0 + 0) * stride + (size_t)i], k[(size_t)(l0 + 1) * stride + (size_t)i],
                                   k[(size_t)(l0 + 2) * stride + (size_t)i], k[(size_t)(l0 + 3) * stride + (size_t)i]};
            s = madd(s, vdupq_n_f32(q[i]), load4h(e));
        }
        vst1q_f32(out + l0, vmulq_f32(s, vdupq_n_f32(scale)));
    }
}

static void kq16t(const float *q, const float *kt, size_t stride, int d, float scale, float *out) {
    float32x4_t s[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int i = 0; i < d; i++) {
        const float32x4_t qv = vdupq_n_f32(q[i]);
        for (int c = 0; c < 4; c++) s[c] = madd(s[c], qv, vld1q_f32(kt + (size_t)i * stride + 4 * c));
    }
    for (int c = 0; c < 4; c++) vst1q_f32(out + 4 * c, vmulq_f32(s[c], vdupq_n_f32(scale)));
}

static void axpy_f16(float *o, float p, const uint16_t *v, int d) {
    const float32x4_t pv = vdupq_n_f32(p);
    int i = 0;
    for (; i + 4 <= d; i += 4) vst1q_f32(o + i, madd(vld1q_f32(o + i), pv, load4h(v + i)));
    for (; i < d; i++) o[i] = o[i] + p * brisk_fp16_to_fp32(v[i]);
}

static void axpy_f16_rows(float *o, const float *p, const uint16_t *v, size_t stride, int n, int d) {
    int i = 0;
    for (; i + 16 <= d; i += 16) {
        float32x4_t a[4];
        for (int c = 0; c < 4; c++) a[c] = vld1q_f32(o + i + 4 * c);
        for (int j = 0; j < n; j++) {
            const float32x4_t pv = vdupq_n_f32(p[j]);
            const uint16_t *vr = v + (size_t)j * stride + i;
            for (int c = 0; c < 4; c++) a[c] = madd(a[c], pv, load4h(vr + 4 * c));
        }
        for (int c = 0; c < 4; c++) vst1q_f32(o + i + 4 * c, a[c]);
    }
    for (; i + 4 <= d; i += 4) {
        float32x4_t a = vld1q_f32(o + i);
        for (int j = 0; j < n; j++) a = madd(a, vdupq_n_f32(p[j]), load4h(v + (size_t)j * stride + i));
        vst1q_f32(o + i, a);
    }
    for (; i < d; i++)
        for (int j = 0; j < n; j++) o[i] = o[i] + p[j] * brisk_fp16_to_fp32(v[(size_t)j * stride + i]);
}

/* Up to 2 queries x one group of 16 keys: 8 chains of 4 lanes side by side. */
static inline __attribute__((always_inline)) void kqt_group(const float *q, size_t qs, const void *kt, size_t stride, int d,
                                                            float scale, float *out, size_t os, const int QM, const int F16) {
    float32x4_t acc[2][4];
    for (int h = 0; h < QM; h++)
        for (int c = 0; c < 4; c++) acc[h][c] = vdupq_n_f32(0.0f);
    for (int i = 0; i < d; i++) {
        float32x4_t k[4];
        for (int c = 0; c < 4; c++)
            k[c] = F16 ? load4h((const uint16_t *)kt + (size_t)i * stride + 4 * c) : vld1q_f32((const float *)kt + (size_t)i * stride + 4 * c);
        for (int h = 0; h < QM; h++) {
            const float32x4_t qv = vdupq_n_f32(q[(size_t)h * qs + (size_t)i]);
            for (int c = 0; c < 4; c++) acc[h][c] = madd(acc[h][c], qv, k[c]);
        }
    }
    for (int h = 0; h < QM; h++)
        for (int c = 0; c < 4; c++) vst1q_f32(out + (size_t)h * os + 4 * c, vmulq_f32(acc[h][c], vdupq_n_f32(scale)));
}

static inline __attribute__((always_inline)) void kq_multi(const float *q, size_t qs, int m, const void *kt, size_t stride, int ng, int d,
                                                           float scale, float *out, size_t os, const int F16) {
    const size_t esz = F16 ? sizeof(uint16_t) : sizeof(float);
    for (int h0 = 0; h0 < m; h0 += 2)
        for (int g = 0; g < ng; g++) {
            const void *kg = (const char *)kt + (size_t)(16 * g) * esz;
            float *oh = out + (size_t)h0 * os + (size_t)(16 * g);
            if (m - h0 >= 2) kqt_group(q + (size_t)h0 * qs, qs, kg, stride, d, scale, oh, os, 2, F16);
            else kqt_group(q + (size_t)h0 * qs, qs, kg, stride, d, scale, oh, os, 1, F16);
        }
}

static void kq_multi_t(const float *q, size_t qs, int m, const float *kt, size_t stride, int ng, int d, float scale, float *out,
                       size_t os) {
    kq_multi(q, qs, m, kt, stride, ng, d, scale, out, os, 0);
}

static void kq_multi_h(const float *q, size_t qs, int m, const uint16_t *kt, size_t stride, int ng, int d, float scale, float *out,
                       size_t os) {
    kq_multi(q, qs, m, kt, stride, ng, d, scale, out, os, 1);
}

static void axpy_f16_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint16_t *v, size_t stride, int n, int d) {
    for (int h = 0; h < m; h++) axpy_f16_rows(o + (size_t)h * os, p + (size_t)h * ps, v, stride, n, d);
}

static const brisk_attn_kernels neon_attn = {
    .isa = "neon",
    .kq16 = kq16,
    .axpy_f16 = axpy_f16,
    .axpy_f16_rows = axpy_f16_rows,
    .kq16t = kq16t,
    .kq_multi_t = kq_multi_t,
    .kq_multi_h = kq_multi_h,
    .axpy_f16_rows_multi = axpy_f16_rows_multi,
};

const brisk_attn_kernels *brisk_attn_neon(void) { return &neon_attn; }
