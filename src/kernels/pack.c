/* pack: repack canonical weight rows into the 16-row interleaved groups the
 * packed GEMM kernels read (layout in kernels.h), and the activation sums they
 * start their integer accumulators from. Portable C: the layout is the same on
 * every ISA, and a group has the bytes of its canonical rows (Q4_K and Q5_K:
 * 4 more per row and block, for the unpacked scales and mins). */
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/convert.h"
#include "quant/quant.h"

#include <string.h>

#define G BRISK_GEMM_ROWS

bool brisk_pack_supported(uint32_t type) {
    return type == BRISK_Q_Q2_K || type == BRISK_Q_Q3_K || type == BRISK_Q_Q4_0 || type == BRISK_Q_Q4_1 || type == BRISK_Q_Q5_0 || type == BRISK_Q_Q5_1 || type == BRISK_Q_Q8_0 || type == BRISK_Q_Q4_K || type == BRISK_Q_Q5_K ||
           type == BRISK_Q_Q6_K || type == BRISK_Q_F16 || type == BRISK_Q_IQ4_NL || type == BRISK_Q_IQ4_XS || type == BRISK_Q_MXFP4;
}

size_t brisk_pack_group_bytes(uint32_t type, int64_t cols) {
    switch (type) {
        case BRISK_Q_Q4_0: return (size_t)(cols / 32) * G * sizeof(brisk_block_q4_0);
        case BRISK_Q_Q8_0: return (size_t)(cols / 32) * G * sizeof(brisk_block_q8_0);
        case BRISK_Q_Q5_0: return (size_t)(cols / 32) * G * sizeof(brisk_block_q5_0);
        case BRISK_Q_Q4_1: return (size_t)(cols / 32) * G * sizeof(brisk_block_q4_1);
        case BRISK_Q_Q5_1: return (size_t)(cols / 32) * G * sizeof(brisk_block_q5_1);
        case BRISK_Q_Q2_K: return (size_t)(cols / BRISK_QK_K) * G * sizeof(brisk_block_q2_k);
        case BRISK_Q_Q3_K: return (size_t)(cols / BRISK_QK_K) * G * (sizeof(brisk_block_q3_k) + 4);
        case BRISK_Q_Q4_K: return (size_t)(cols / BRISK_QK_K) * G * (sizeof(brisk_block_q4_k) + 4);
        case BRISK_Q_Q5_K: return (size_t)(cols / BRISK_QK_K) * G * (sizeof(brisk_block_q5_k) + 4);
        case BRISK_Q_Q6_K: return (size_t)(cols / BRISK_QK_K) * G * sizeof(brisk_block_q6_k);
        case BRISK_Q_IQ4_NL: return (size_t)(cols / 32) * G * sizeof(brisk_block_iq4_nl);
        case BRISK_Q_MXFP4: return (size_t)(cols / 32) * G * sizeof(brisk_block_mxfp4);
        case BRISK_Q_IQ4_XS: return (size_t)(cols / BRISK_QK_K) * G * (sizeof(brisk_block_iq4_xs) + 2);
        case BRISK_Q_F16: return cols % 16 ? 0 : (size_t)cols * G * sizeof(uint16_t);   /* 0: not packable */
        default: return 0;
    }
}

int64_t brisk_act_sums_len(int64_t n) { return n / 32 * 10 > n ? n / 32 * 10 : n; }

/* Row r of a Q4_K-layout group at o (Q4_K, and Q5_K's first 2368 bytes):
 * d, dmin, the unpacked 6-bit scales and mins, the nibble chunks. */
static void pack_k4_row(uint8_t *o, int r, uint16_t d, uint16_t dmin, const uint8_t *scales, const uint8_t *qs) {
    memcpy(o + 2 * r, &d, 2);
    memcpy(o + 32 + 2 * r, &dmin, 2);
    for (int j = 0; j < 8; j++) brisk_k4_scale_min(j, scales, o + 64 + 16 * j + r, o + 192 + 16 * j + r);
    for (int k = 0; k < 32; k++) memcpy(o + 320 + 64 * k + 4 * r, qs + 4 * k, 4);
}

/* Packing runs over every weight at load, so it works on 4-byte words (4 elements at
 * a time) rather than element by element. */
static inline uint32_t load32(const uint8_t *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

static inline void store32(uint8_t *p, uint32_t w) { memcpy(p, &w, 4); }

/* The 5th-bit masks of one block of Q5_0/Q5_1 (kernels.h): for chunk c = 0..7 (elements
 * 4c..4c+3), bit 4r+k = the 5th bit of element 4c+k of row r, from each row's qh: the
 * nibble c of qh, in place. */
static void add_q5_masks(uint64_t masks[8], int r, const uint8_t qh_bytes[4]) {
    const uint32_t qh = load32(qh_bytes);
    for (int c = 0; c < 8; c++) masks[c] |= (uint64_t)((qh >> (4 * c)) & 15) << (4 * r);
}

/* Bit j of each of the 4 bytes of w, as a nibble (byte i -> bit i). The multiply moves
 * byte i's bit 8i to bit 24 + i; the other partial products land on distinct bits
 * outside 24..27, so nothing carries into the nibble. */
static inline uint32_t bit_j_of_bytes(uint32_t w, int j) { return (((w >> j) & 0x01010101u) * 0x01020408u) >> 24 & 15; }

void brisk_pack_rows(uint32_t type, void *dst, const void *src, size_t row_bytes, int64_t cols) {
    const int64_t nb = cols / 32;
    uint8_t *o = dst;
    const uint8_t *s = src;
    if (type == BRISK_Q_Q4_0) {
        for (int64_t b = 0; b < nb; b++) {
            for (int r = 0; r < G; r++) {
                const brisk_block_q4_0 *x = (const brisk_block_q4_0 *)(s + (size_t)r * row_bytes) + b;
                memcpy(o + 2 * r, &x->d, 2);
                for (int c = 0; c < 4; c++) memcpy(o + 32 + 64 * c + 4 * r, x->qs + 4 * c, 4);
            }
            o += (size_t)G * sizeof(brisk_block_q4_0);
        }
    } else if (type == BRISK_Q_Q8_0) {
        for (int64_t b = 0; b < nb; b++) {
            for (int r = 0; r < G; r++) {
                const brisk_block_q8_0 *x = (const brisk_block_q8_0 *)(s + (size_t)r * row_bytes) + b;
                memcpy(o + 2 * r, &x->d, 2);
                /* int8 + 128 as uint8 = the byte with its top bit flipped */
                for (int c = 0; c < 8; c++) store32(o + 32 + 64 * c + 4 * r, load32((const uint8_t *)x->qs + 4 * c) ^ 0x80808080u);
            }
            o += (size_t)G * sizeof(brisk_block_q8_0);
        }
    } else if (type == BRISK_Q_Q5_0) {
        for (int64_t b = 0; b < nb; b++) {
            uint64_t masks[8] = {0};
            for (int r = 0; r < G; r++) {
                const brisk_block_q5_0 *x = (const brisk_block_q5_0 *)(s + (size_t)r * row_bytes) + b;
                memcpy(o + 2 * r, &x->d, 2);
                add_q5_masks(masks, r, x->qh);   /* chunk c's elements are 4c..4c+3 (c < 4) and 16 + 4(c-4).. = 4c.. too */
                for (int c = 0; c < 4; c++) memcpy(o + 96 + 64 * c + 4 * r, x->qs + 4 * c, 4);
            }
            memcpy(o + 32, masks, sizeof masks);
            o += (size_t)G * sizeof(brisk_block_q5_0);
        }
    } else if (type == BRISK_Q_Q4_1 || type == BRISK_Q_Q5_1) {
        const bool five = type == BRISK_Q_Q5_1;
        const size_t block = five ? sizeof(brisk_block_q5_1) : sizeof(brisk_block_q4_1), lines = five ? 128 : 64;
        for (int64_t b = 0; b < nb; b++) {
            uint64_t masks[8] = {0};
            for (int r = 0; r < G; r++) {
                const uint8_t *x = s + (size_t)r * row_bytes + (size_t)b * block;   /* d, m, (qh,) qs */
                memcpy(o + 2 * r, x, 2);
                memcpy(o + 32 + 2 * r, x + 2, 2);
                if (five) add_q5_masks(masks, r, x + 4);
                for (int c = 0; c < 4; c++) memcpy(o + lines + 64 * c + 4 * r, x + block - 16 + 4 * c, 4);
            }
            if (five) memcpy(o + 64, masks, sizeof masks);
            o += (size_t)G * block;
        }
    } else if (type == BRISK_Q_Q2_K) {
        for (int64_t b = 0; b < cols / BRISK_QK_K; b++) {
            for (int r = 0; r < G; r++) {
                const brisk_block_q2_k *x = (const brisk_block_q2_k *)(s + (size_t)r * row_bytes) + b;
                memcpy(o + 2 * r, &x->d, 2);
                memcpy(o + 32 + 2 * r, &x->dmin, 2);
                for (int j = 0; j < 16; j++) o[64 + 16 * j + r] = x->scales[j];
                for (int k = 0; k < 16; k++) memcpy(o + 320 + 64 * k + 4 * r, x->qs + 4 * k, 4);
            }
            o += (size_t)G * sizeof(brisk_block_q2_k);
        }
    } else if (type == BRISK_Q_Q3_K) {
        for (int64_t b = 0; b < cols / BRISK_QK_K; b++) {
            for (int r = 0; r < G; r++) {
                const brisk_block_q3_k *x = (const brisk_block_q3_k *)(s + (size_t)r * row_bytes) + b;
                int8_t sc[16];
                brisk_q3_k_scales(x->scales, sc);
                memcpy(o + 2 * r, &x->d, 2);
                for (int j = 0; j < 16; j++) o[32 + 16 * j + r] = (uint8_t)sc[j];
                for (int k = 0; k < 16; k++) memcpy(o + 288 + 64 * k + 4 * r, x->qs + 4 * k, 4);
                for (int k = 0; k < 8; k++) memcpy(o + 1312 + 64 * k + 4 * r, x->hmask + 4 * k, 4);
            }
            o += (size_t)G * (sizeof(brisk_block_q3_k) + 4);
        }
    } else if (type == BRISK_Q_Q4_K) {
        for (int64_t b = 0; b < cols / BRISK_QK_K; b++) {
            for (int r = 0; r < G; r++) {
                const brisk_block_q4_k *x = (const brisk_block_q4_k *)(s + (size_t)r * row_bytes) + b;
                pack_k4_row(o, r, x->d, x->dmin, x->scales, x->qs);
            }
            o += (size_t)G * (sizeof(brisk_block_q4_k) + 4);
        }
    } else if (type == BRISK_Q_Q5_K) {
        for (int64_t b = 0; b < cols / BRISK_QK_K; b++) {
            uint64_t masks[8][8] = {{0}};   /* [m][j]: bit 4r+i = 5th bit of element 32j+4m+i of row r */
            for (int r = 0; r < G; r++) {
                const brisk_block_q5_k *x = (const brisk_block_q5_k *)(s + (size_t)r * row_bytes) + b;
                pack_k4_row(o, r, x->d, x->dmin, x->scales, x->qs);   /* the first 2368 bytes are Q4_K's layout */
                for (int m = 0; m < 8; m++) {
                    const uint32_t w = load32(x->qh + 4 * m);
                    for (int j = 0; j < 8; j++) masks[m][j] |= (uint64_t)bit_j_of_bytes(w, j) << (4 * r);
                }
            }
            memcpy(o + 2368, masks, sizeof masks);
            o += (size_t)G * (sizeof(brisk_block_q5_k) + 4);
        }
    } else if (type == BRISK_Q_Q6_K) {
        for (int64_t b = 0; b < cols / BRISK_QK_K; b++) {
            for (int r = 0; r < G; r++) {
                const brisk_block_q6_k *x = (const brisk_block_q6_k *)(s + (size_t)r * row_bytes) + b;
                /* Element e = 128h + 32s + l (as ref unpacks them) has its low nibble in
                 * ql[64h + 32(s & 1) + l] (bits 4(s >> 1)..) and its high 2 bits in
                 * qh[32h + l] (bits 2s..). Chunk k of the nibble lines holds elements
                 * 4k.. (low nibbles) beside 128 + 4k.. (high nibbles); chunk k of the
                 * 2-bit lines holds the high bits of 4k.., 64 + 4k.., 128 + 4k.., 192 + 4k... */
                memcpy(o + 2 * r, &x->d, 2);
                for (int j = 0; j < 16; j++) o[32 + 16 * j + r] = (uint8_t)x->scales[j];
                for (int c = 0; c < 8; c++) {   /* k = 8 sub + c */
                    const uint32_t l0 = load32(x->ql + 4 * c), l1 = load32(x->ql + 32 + 4 * c);
                    const uint32_t l2 = load32(x->ql + 64 + 4 * c), l3 = load32(x->ql + 96 + 4 * c);
                    /* triple c holds L_c, L_16+c and H_c; triple 8 + c L_8+c, L_24+c and H_8+c */
                    uint8_t *ta = o + BRISK_Q6K_TRIPLE(c) + 4 * r, *tb = o + BRISK_Q6K_TRIPLE(8 + c) + 4 * r;
                    store32(ta, (l0 & 0x0f0f0f0fu) | (l2 & 0x0f0f0f0fu) << 4);        /* L_c */
                    store32(tb, (l1 & 0x0f0f0f0fu) | (l3 & 0x0f0f0f0fu) << 4);        /* L_8+c */
                    store32(ta + 64, (l0 >> 4 & 0x0f0f0f0fu) | (l2 & 0xf0f0f0f0u));   /* L_16+c */
                    store32(tb + 64, (l1 >> 4 & 0x0f0f0f0fu) | (l3 & 0xf0f0f0f0u));   /* L_24+c */
                    const uint32_t h0 = load32(x->qh + 4 * c), h1 = load32(x->qh + 32 + 4 * c);
                    const uint32_t m = 0x03030303u;
                    store32(ta + 128, (h0 & m) | (h0 >> 4 & m) << 2 | (h1 & m) << 4 | (h1 >> 4 & m) << 6);           /* H_c */
                    store32(tb + 128, (h0 >> 2 & m) | (h0 >> 6 & m) << 2 | (h1 >> 2 & m) << 4 | (h1 >> 6 & m) << 6); /* H_8+c */
                }
            }
            o += (size_t)G * sizeof(brisk_block_q6_k);
        }
    } else if (type == BRISK_Q_IQ4_NL) {   /* Q4_0's layout: the nibbles index the codebook instead of q - 8 */
        for (int64_t b = 0; b < nb; b++) {
            for (int r = 0; r < G; r++) {
                const brisk_block_iq4_nl *x = (const brisk_block_iq4_nl *)(s + (size_t)r * row_bytes) + b;
                memcpy(o + 2 * r, &x->d, 2);
                for (int c = 0; c < 4; c++) memcpy(o + 32 + 64 * c + 4 * r, x->qs + 4 * c, 4);
            }
            o += (size_t)G * sizeof(brisk_block_iq4_nl);
        }
    } else if (type == BRISK_Q_MXFP4) {
        for (int64_t b = 0; b < nb; b++) {
            for (int r = 0; r < G; r++) {
                const brisk_block_mxfp4 *x = (const brisk_block_mxfp4 *)(s + (size_t)r * row_bytes) + b;
                o[r] = x->e;
                for (int c = 0; c < 4; c++) memcpy(o + 16 + 64 * c + 4 * r, x->qs + 4 * c, 4);
            }
            o += (size_t)G * sizeof(brisk_block_mxfp4);
        }
    } else if (type == BRISK_Q_IQ4_XS) {
        for (int64_t b = 0; b < cols / BRISK_QK_K; b++) {
            for (int r = 0; r < G; r++) {
                const brisk_block_iq4_xs *x = (const brisk_block_iq4_xs *)(s + (size_t)r * row_bytes) + b;
                memcpy(o + 2 * r, &x->d, 2);
                for (int j = 0; j < 8; j++) o[32 + 16 * j + r] = (uint8_t)(int8_t)(brisk_iq4_xs_scale(x->scales_l, x->scales_h, j) - 32);
                for (int k = 0; k < 32; k++) memcpy(o + 160 + 64 * k + 4 * r, x->qs + 4 * k, 4);
            }
            o += (size_t)G * (sizeof(brisk_block_iq4_xs) + 2);
        }
    } else if (type == BRISK_Q_F16) {
        BRISK_ASSERT(cols % 16 == 0);
        const size_t quad = (size_t)(cols / 16) * 128;   /* 4 rows x 32 bytes per 16-column chunk */
        for (int r = 0; r < G; r++)
            for (int64_t c = 0; c < cols / 16; c++)
                memcpy(o + (size_t)(r / 4) * quad + (size_t)c * 128 + (size_t)(r % 4) * 32, s + (size_t)r * row_bytes + (size_t)c * 32, 32);
    } else {
        BRISK_ASSERT(!"brisk_pack_rows: unsupported type");
    }
}

void brisk_act_sums_q8_0_ref(const void *act, int64_t n, int32_t *sums) {
    const brisk_block_q8_0 *y = act;
    const int64_t nb = n / 32;
    for (int64_t b = 0; b < nb; b++) {
        int32_t tot = 0;
        for (int c = 0; c < 8; c++) {
            int32_t s = 0;
            for (int k = 0; k < 4; k++) s += y[b].qs[4 * c + k];
            sums[8 * b + c] = -128 * s;
            tot += s;
        }
        sums[8 * nb + b] = -8 * tot;
        const float d = brisk_fp16_to_fp32(y[b].d);
        memcpy(&sums[9 * nb + b], &d, sizeof d);
    }
}
