/* neon_attn: the attention kernels (kernels.h) on baseline AArch64 NEON,
 * each output bit-identical to attn_ref.c: a separate multiply and add per
 * element (vmulq_f32 then vaddq_f32, never a fused vfmaq), in element order,
 * 4 floats a lane group; F16 keys and values widened exactly by FCVTL. */
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#include <arm_neon.h>
#include <string.h>

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
                                                            float scale, float *out, size_t os, const int QM, const int F16,
                                                            brisk_attn_pf *pf) {
    float32x4_t acc[2][4];
    for (int h = 0; h < QM; h++)
        for (int c = 0; c < 4; c++) acc[h][c] = vdupq_n_f32(0.0f);
    for (int i = 0; i < d; i++) {
        brisk_attn_pf_next(pf);
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
                                                           float scale, float *out, size_t os, const int F16, brisk_attn_pf *pf) {
    const size_t esz = F16 ? sizeof(uint16_t) : sizeof(float);
    for (int h0 = 0; h0 < m; h0 += 2)
        for (int g = 0; g < ng; g++) {
            const void *kg = (const char *)kt + (size_t)(16 * g) * esz;
            float *oh = out + (size_t)h0 * os + (size_t)(16 * g);
            if (m - h0 >= 2) kqt_group(q + (size_t)h0 * qs, qs, kg, stride, d, scale, oh, os, 2, F16, pf);
            else kqt_group(q + (size_t)h0 * qs, qs, kg, stride, d, scale, oh, os, 1, F16, pf);
        }
}

static void kq_multi_t(const float *q, size_t qs, int m, const float *kt, size_t stride, int ng, int d, float scale, float *out,
                       size_t os) {
    kq_multi(q, qs, m, kt, stride, ng, d, scale, out, os, 0, NULL);
}

static void kq_multi_h(const float *q, size_t qs, int m, const uint16_t *kt, size_t stride, int ng, int d, float scale, float *out,
                       size_t os, brisk_attn_pf *pf) {
    kq_multi(q, qs, m, kt, stride, ng, d, scale, out, os, 1, pf);
}

/* pf: none here; the K scores' passes (two heads and one group of 16 keys at
 * a time, so 4 x d iterations for 4 heads over a 32-slot block) already take
 * every line of the next tile. The NEON speed is unmeasured (no ARM machine). */
static void axpy_f16_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint16_t *v, size_t stride, int n, int d,
                                brisk_attn_pf *pf) {
    (void)pf;
    for (int h = 0; h < m; h++) axpy_f16_rows(o + (size_t)h * os, p + (size_t)h * ps, v, stride, n, d);
}

/* ---- the quantized KV cache (kv/kv.h's layouts): values dequantized exactly (d * q) ---- */

static inline float32x4_t cvt_lo16(int16x8_t x) { return vcvtq_f32_s32(vmovl_s16(vget_low_s16(x))); }
static inline float32x4_t cvt_hi16(int16x8_t x) { return vcvtq_f32_s32(vmovl_s16(vget_high_s16(x))); }

/* 16 codes as int16 halves: q8_0 from 16 signed bytes, q4_0 from 16 nibbles (high ones when hi) minus 8 */
static inline void codes_q8(const uint8_t *p, int16x8_t *lo, int16x8_t *hi) {
    const int8x16_t b = vld1q_s8((const int8_t *)(const void *)p);
    *lo = vmovl_s8(vget_low_s8(b));
    *hi = vmovl_s8(vget_high_s8(b));
}

static inline void codes_q4(const uint8_t *p, int high, int16x8_t *lo, int16x8_t *hi) {
    uint8x16_t b = vld1q_u8(p);
    b = high ? vshrq_n_u8(b, 4) : vandq_u8(b, vdupq_n_u8(15));
    const int16x8_t e8 = vdupq_n_s16(8);
    *lo = vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(b))), e8);
    *hi = vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(b))), e8);
}

/* brisk_kq_q_slot for 16 slots (four int32x4 lanes) and two heads side by
 * side: the group's integer dots by widening multiply-adds (exact in any
 * order), then ref's F32 chain over the groups. */
static inline __attribute__((always_inline)) void kq_q(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0,
                                                       int ng, int d, float scale, float *out, size_t os, const bool Q4, brisk_attn_pf *pf) {
    const uint16_t *dd = (const uint16_t *)(const void *)(part + (size_t)d * (Q4 ? 16 : 32));
    const size_t ds = qs / 32;
    for (int h0 = 0; h0 < m; h0 += 2) {
        const int mm = m - h0 < 2 ? m - h0 : 2;
        const int16_t *q0 = qq + (size_t)h0 * qs, *q1 = q0 + (mm > 1 ? qs : 0);
        const float *d0 = qd + (size_t)h0 * ds, *d1 = d0 + (mm > 1 ? ds : 0);
        for (int g = 0; g < ng; g++) {
            const int s0 = slot0 + 16 * g;
            float32x4_t f[2][4];
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 4; c++) f[h][c] = vdupq_n_f32(0.0f);
            for (int b = 0; b < d / 32; b++) {
                int32x4_t a[2][4];
                for (int h = 0; h < 2; h++)
                    for (int c = 0; c < 4; c++) a[h][c] = vdupq_n_s32(0);
                for (int i = 32 * b; i < 32 * b + 32; i++) {
                    brisk_attn_pf_next(pf);
                    int16x8_t lo, hi;
                    if (Q4) codes_q4(part + (size_t)i * 16, s0 >= 16, &lo, &hi);
                    else codes_q8(part + (size_t)i * 32 + (size_t)s0, &lo, &hi);
                    const int16_t c0 = q0[i], c1 = q1[i];
                    a[0][0] = vmlal_n_s16(a[0][0], vget_low_s16(lo), c0);
                    a[0][1] = vmlal_n_s16(a[0][1], vget_high_s16(lo), c0);
                    a[0][2] = vmlal_n_s16(a[0][2], vget_low_s16(hi), c0);
                    a[0][3] = vmlal_n_s16(a[0][3], vget_high_s16(hi), c0);
                    a[1][0] = vmlal_n_s16(a[1][0], vget_low_s16(lo), c1);
                    a[1][1] = vmlal_n_s16(a[1][1], vget_high_s16(lo), c1);
                    a[1][2] = vmlal_n_s16(a[1][2], vget_low_s16(hi), c1);
                    a[1][3] = vmlal_n_s16(a[1][3], vget_high_s16(hi), c1);
                }
                const uint16_t *dg = dd + (size_t)b * 32 + (size_t)s0;
                const float32x4_t dk[4] = {load4h(dg), load4h(dg + 4), load4h(dg + 8), load4h(dg + 12)};
                const float32x4_t e[2] = {vdupq_n_f32(d0[b]), vdupq_n_f32(d1[b])};
                for (int h = 0; h < 2; h++)
                    for (int c = 0; c < 4; c++) f[h][c] = madd(f[h][c], vcvtq_f32_s32(a[h][c]), vmulq_f32(dk[c], e[h]));
            }
            const float32x4_t sc = vdupq_n_f32(scale);
            for (int h = 0; h < mm; h++)
                for (int c = 0; c < 4; c++) vst1q_f32(out + (size_t)(h0 + h) * os + 16 * g + 4 * c, vmulq_f32(f[h][c], sc));
        }
    }
}

static void kq_multi_q8_0(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale,
                          float *out, size_t os, brisk_attn_pf *pf) {
    kq_q(qq, qd, qs, m, part, slot0, ng, d, scale, out, os, false, pf);
}

static void kq_multi_q4_0(const int16_t *qq, const float *qd, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale,
                          float *out, size_t os, brisk_attn_pf *pf) {
    kq_q(qq, qd, qs, m, part, slot0, ng, d, scale, out, os, true, pf);
}

/* 16 V values of row v from dimension off (off % 32 is 0 or 16), exact. */
static inline __attribute__((always_inline)) void v16(const uint8_t *v, int off, int T, float32x4_t x[4]) {
    if (T == 0) {   /* F32 */
        const float *f = (const float *)(const void *)v + off;
        for (int c = 0; c < 4; c++) x[c] = vld1q_f32(f + 4 * c);
        return;
    }
    int16x8_t lo, hi;
    float dvs;
    if (T == 1) {   /* Q8_0 */
        const brisk_block_q8_0 *b = (const brisk_block_q8_0 *)(const void *)v + off / 32;
        dvs = brisk_fp16_to_fp32(b->d);
        codes_q8((const uint8_t *)(const void *)(b->qs + off % 32), &lo, &hi);
    } else {   /* Q4_0: element j low nibble, j + 16 high */
        const brisk_block_q4_0 *b = (const brisk_block_q4_0 *)(const void *)v + off / 32;
        dvs = brisk_fp16_to_fp32(b->d);
        codes_q4(b->qs, off % 32 != 0, &lo, &hi);
    }
    const float32x4_t dv = vdupq_n_f32(dvs);
    x[0] = vmulq_f32(dv, cvt_lo16(lo));
    x[1] = vmulq_f32(dv, cvt_hi16(lo));
    x[2] = vmulq_f32(dv, cvt_lo16(hi));
    x[3] = vmulq_f32(dv, cvt_hi16(hi));
}

static inline __attribute__((always_inline)) void axpy_q(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v,
                                                         size_t rb, int n, int d, const int T, brisk_attn_pf *pf) {
    const int d16 = d & ~15;
    for (int h = 0; h < m; h++) {
        float *oh = o + (size_t)h * os;
        const float *ph = p + (size_t)h * ps;
        for (int off = 0; off < d16; off += 16) {
            float32x4_t a[4];
            for (int c = 0; c < 4; c++) a[c] = vld1q_f32(oh + off + 4 * c);
            for (int j = 0; j < n; j++) {
                brisk_attn_pf_next(pf);
                float32x4_t x[4];
                v16(v + (size_t)j * rb, off, T, x);
                const float32x4_t pv = vdupq_n_f32(ph[j]);
                for (int c = 0; c < 4; c++) a[c] = T ? vfmaq_f32(a[c], pv, x[c]) : madd(a[c], pv, x[c]);   /* quantized V: fused */
            }
            for (int c = 0; c < 4; c++) vst1q_f32(oh + off + 4 * c, a[c]);
        }
        for (int j = 0; j < n && d16 < d; j++) {   /* F32's last dimensions (the block types have none) */
            const float *f = (const float *)(const void *)(v + (size_t)j * rb);
            for (int i = d16; i < d; i++) oh[i] = oh[i] + ph[j] * f[i];
        }
    }
}

static void axpy_f32_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const float *v, size_t stride, int n, int d) {
    axpy_q(o, os, m, p, ps, (const uint8_t *)(const void *)v, stride * sizeof(float), n, d, 0, NULL);
}

static void axpy_q8_0_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d,
                                 brisk_attn_pf *pf) {
    axpy_q(o, os, m, p, ps, v, rb, n, d, 1, pf);
}

static void axpy_q4_0_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d,
                                 brisk_attn_pf *pf) {
    axpy_q(o, os, m, p, ps, v, rb, n, d, 2, pf);
}

/* ---- KIVI's k4 / k2 (kernels.h, kv/kv.h's layouts) -------------------------------------------
 * 16 slots of a sealed K part as four vectors of 4 (each channel's d and
 * min broadcast), 4 heads sharing each dequantized channel; V rows 16
 * dimensions at a time. Every key or value is (float)q * d + min (a
 * multiply, then an add) before it is used; K's scores keep ref's chain of
 * a multiply then an add in element order; V is added with one fused
 * multiply-add, as ref's fmaf. */

static inline float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return brisk_fp16_to_fp32(h);
}

/* 16 codes -> their values q * d + min, 4 at a time. */
static inline void deq16(uint8x16_t c, float32x4_t dv, float32x4_t mv, float32x4_t x[4]) {
    const uint16x8_t lo = vmovl_u8(vget_low_u8(c)), hi = vmovl_u8(vget_high_u8(c));
    const uint32x4_t u[4] = {vmovl_u16(vget_low_u16(lo)), vmovl_u16(vget_high_u16(lo)), vmovl_u16(vget_low_u16(hi)),
                             vmovl_u16(vget_high_u16(hi))};
    for (int c4 = 0; c4 < 4; c4++) x[c4] = vaddq_f32(vmulq_f32(vcvtq_f32_u32(u[c4]), dv), mv);
}

/* The 16 codes of channel i for slots s0..s0+15 (s0 = 0 or 16) of a K part. */
static inline uint8x16_t k_codes(const uint8_t *part, int i, int s0, const bool K4) {
    if (K4) {   /* byte j: slot j in the low nibble, slot j + 16 in the high one */
        const uint8x16_t b = vld1q_u8(part + (size_t)i * 16);
        return s0 ? vshrq_n_u8(b, 4) : vandq_u8(b, vdupq_n_u8(15));
    }
    /* byte j: slots j, j + 8, j + 16, j + 24 at bits 0, 2, 4, 6 */
    const uint8x8_t b = vld1_u8(part + (size_t)i * 8), m3 = vdup_n_u8(3);
    const int8_t sh = (int8_t)(s0 ? 4 : 0);
    return vcombine_u8(vand_u8(vshl_u8(b, vdup_n_s8((int8_t)-sh)), m3), vand_u8(vshl_u8(b, vdup_n_s8((int8_t)(-sh - 2))), m3));
}

static inline __attribute__((always_inline)) void kq_kivi(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d,
                                                          float scale, float *out, size_t os, const bool K4) {
    const uint8_t *dd = part + (size_t)d * (K4 ? 16 : 8), *mn = dd + 2 * (size_t)d;
    for (int h0 = 0; h0 < m; h0 += 4) {
        const int mm = m - h0 < 4 ? m - h0 : 4;
        const float *qh[4];
        for (int h = 0; h < 4; h++) qh[h] = q + (size_t)(h0 + (h < mm ? h : 0)) * qs;
        for (int g = 0; g < ng; g++) {
            const int s0 = (slot0 + 16 * g) % 32 >= 16 ? 16 : 0;
            float32x4_t a[4][4];
            for (int h = 0; h < 4; h++)
                for (int c = 0; c < 4; c++) a[h][c] = vdupq_n_f32(0.0f);
            for (int i = 0; i < d; i++) {
                float32x4_t k[4];
                deq16(k_codes(part, i, s0, K4), vdupq_n_f32(f16_at(dd + 2 * (size_t)i)), vdupq_n_f32(f16_at(mn + 2 * (size_t)i)), k);
                for (int h = 0; h < 4; h++) {
                    const float32x4_t qv = vdupq_n_f32(qh[h][i]);
                    for (int c = 0; c < 4; c++) a[h][c] = madd(a[h][c], qv, k[c]);
                }
            }
            const float32x4_t sc = vdupq_n_f32(scale);
            for (int h = 0; h < mm; h++) {
                float *o = out + (size_t)(h0 + h) * os + 16 * g;
                for (int c = 0; c < 4; c++) vst1q_f32(o + 4 * c, vmulq_f32(a[h][c], sc));
            }
        }
    }
}

static void kq_multi_k4(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                        size_t os) {
    kq_kivi(q, qs, m, part, slot0, ng, d, scale, out, os, true);
}

static void kq_multi_k2(const float *q, size_t qs, int m, const uint8_t *part, int slot0, int ng, int d, float scale, float *out,
                        size_t os) {
    kq_kivi(q, qs, m, part, slot0, ng, d, scale, out, os, false);
}

/* The 16 values of a V row's elements off..off+15 (off % 16 == 0): a group
 * of 32 is F16 d, F16 min and the codes (k4: element j in the low nibble of
 * byte j, j + 16 in the high one; k2: element j at bits 2 (j / 8) of byte j % 8). */
static inline __attribute__((always_inline)) void v16_kivi(const uint8_t *row, int off, const bool K4, float32x4_t x[4]) {
    const uint8_t *g = row + (size_t)(off / 32) * (K4 ? 20 : 12);
    const int e0 = off % 32;
    uint8x16_t c;
    if (K4) {
        const uint8x16_t b = vld1q_u8(g + 4);
        c = e0 ? vshrq_n_u8(b, 4) : vandq_u8(b, vdupq_n_u8(15));
    } else {
        const uint8x8_t b = vld1_u8(g + 4), m3 = vdup_n_u8(3);
        const int8_t sh = (int8_t)(2 * (e0 / 8));
        c = vcombine_u8(vand_u8(vshl_u8(b, vdup_n_s8((int8_t)-sh)), m3), vand_u8(vshl_u8(b, vdup_n_s8((int8_t)(-sh - 2))), m3));
    }
    deq16(c, vdupq_n_f32(f16_at(g)), vdupq_n_f32(f16_at(g + 2)), x);
}

static inline __attribute__((always_inline)) void axpy_kivi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v,
                                                            size_t rb, int n, int d, const bool K4) {
    for (int h0 = 0; h0 < m; h0 += 4) {
        const int mm = m - h0 < 4 ? m - h0 : 4;
        for (int off = 0; off < d; off += 16) {
            float32x4_t a[4][4];
            for (int h = 0; h < mm; h++)
                for (int c = 0; c < 4; c++) a[h][c] = vld1q_f32(o + (size_t)(h0 + h) * os + off + 4 * c);
            for (int j = 0; j < n; j++) {
                float32x4_t x[4];
                v16_kivi(v + (size_t)j * rb, off, K4, x);
                for (int h = 0; h < mm; h++) {
                    const float32x4_t pv = vdupq_n_f32(p[(size_t)(h0 + h) * ps + (size_t)j]);
                    for (int c = 0; c < 4; c++) a[h][c] = vfmaq_f32(a[h][c], pv, x[c]);   /* fused (ref's fmaf) */
                }
            }
            for (int h = 0; h < mm; h++)
                for (int c = 0; c < 4; c++) vst1q_f32(o + (size_t)(h0 + h) * os + off + 4 * c, a[h][c]);
        }
    }
}

static void axpy_k4_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d) {
    axpy_kivi(o, os, m, p, ps, v, rb, n, d, true);
}

static void axpy_k2_rows_multi(float *o, size_t os, int m, const float *p, size_t ps, const uint8_t *v, size_t rb, int n, int d) {
    axpy_kivi(o, os, m, p, ps, v, rb, n, d, false);
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

const brisk_attn_kernels *brisk_attn_neon(void) { return &neon_attn; }
