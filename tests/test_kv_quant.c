/* test_kv_quant: the KV cache storage types (f16, f32, q8_0, q4_0, and KIVI's
 * k4, k2; docs/KV.md).
 *   - kernels: every ISA table's quantized-cache kernels give ref's bits, for
 *     every head count, group count, slot offset and row count; ref's equal
 *     kq_multi_t / axpy on the values kv.c dequantizes (an independent path);
 *   - storage: brisk_kv_put stores llama.cpp's blocks (brisk_q8_0_quantize_x86,
 *     brisk_q4_0_quantize; k4's V is q4_1's, brisk_q4_1_quantize) and
 *     row_get/row_set round-trip them; k4/k2 K is quantized per channel once a
 *     block fills in order and stays F16 while it is open;
 *   - engine, per type: a sequence's logits are bitwise the same alone, batched
 *     with another sequence, and for any prompt chunking (the prefill's
 *     widened-K path vs the decode's fused kernels); a token tree's nodes equal
 *     the chain (a path inside one block and one crossing into the next) and
 *     keep_path continues it; a state saved with one type continues bitwise and
 *     is refused by a context of another type;
 *   - hyb4/hyb2 (kv/hyb.c): batch invariance as above; each (layer, KV head)
 *     holds the sinks, the last full block and ceil(5%) of the slots before
 *     it in F16; a query's logits equal those of an F32 cache holding the
 *     values it should read (its own block and the hot rows in F16, the rest
 *     dequantized), and not those with the hot rows read quantized; forks
 *     continue bitwise; trees, states, retention and mixed types are refused;
 *   - kld.c: a position compared against its own encoding has KL ~ 0, and the
 *     header parser refuses truncated and trailing files.
 * Models: models/pycode-target-f16.gguf, tests/data/golden/qwen2-tiny-Q4_0.gguf,
 * and for hyb4's other attention shapes tests/data/archs' gemma2, gpt-oss and
 * deepseek2 fixtures (each skipped with a message when absent). */
#include "brisk.h"
#include "engine/engine_impl.h"
#include "kernels/kernels.h"
#include "kv/kld.h"
#include "kv/kv.h"
#include "quant/blocks.h"
#include "quant/convert.h"
#include "quant/quant.h"
#include "test.h"

#include <stdint.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

/* A random K part of type t (head_dim d), filled through the KV module's own
 * row form so the layout is the module's. */
static void random_kv(brisk_kv *kv, int32_t d) {
    float k[256], v[256];
    for (int32_t s = 0; s < BRISK_KV_BLOCK; s++) {
        for (int32_t i = 0; i < d; i++) k[i] = 3.0f * frand(), v[i] = 2.0f * frand();
        brisk_kv_put(kv, 0, 0, s, 0, k, v);
    }
}

static bool same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* KIVI's quantizer as the docs state it, written out here independently of
 * kv.c: levels L = 2^bits - 1, d = (max - min) / L, codes (int)((x - min) /
 * d + 0.5) capped at L, d and min through F16; a value is code * d + min. */
static void asym32(const float *x, int bits, uint16_t *d, uint16_t *m, uint8_t *c) {
    const int L = (1 << bits) - 1;
    float lo = x[0], hi = x[0];
    for (int j = 1; j < 32; j++) lo = x[j] < lo ? x[j] : lo, hi = x[j] > hi ? x[j] : hi;
    const float dd = (hi - lo) / (float)L, id = dd != 0.0f ? 1.0f / dd : 0.0f;
    *d = brisk_fp32_to_fp16(dd);
    *m = brisk_fp32_to_fp16(lo);
    for (int j = 0; j < 32; j++) {
        const int q = (int)((x[j] - lo) * id + 0.5f);
        c[j] = (uint8_t)(q > L ? L : q);
    }
}

/* A k2 V row (n elements, groups of 12 bytes: F16 d, F16 min, 8 code bytes,
 * element j at bits 2 (j / 8) of byte j % 8) into floats. */
static void k2_row_dequant(const uint8_t *row, float *out, int n) {
    for (int g = 0; g < n / 32; g++) {
        const uint8_t *b = row + 12 * g;
        uint16_t d, m;
        memcpy(&d, b, 2);
        memcpy(&m, b + 2, 2);
        for (int j = 0; j < 32; j++)
            out[32 * g + j] = (float)((b[4 + j % 8] >> (2 * (j / 8))) & 3) * brisk_fp16_to_fp32(d) + brisk_fp16_to_fp32(m);
    }
}

static void test_kernels(void) {
    const brisk_attn_kernels *tabs[8], *ref = brisk_attn_ref();
    const int nt = brisk_attn_all(tabs, 8);
    int checked = 0;
    for (int type = BRISK_KV_F32; type < BRISK_KV_N_TYPES; type++)
        for (int32_t d = 32; d <= 128; d *= 2) {
            brisk_kv *kv = NULL;
            if (brisk_kv_init(&kv, 1, 1, d, 32, 32, 1, (brisk_kv_type)type, (brisk_kv_type)type, NULL) != BRISK_OK) {
                CHECKF(0, "kv init %s d %d", brisk_kv_type_name(type), d);
                continue;
            }
            CHECK(brisk_kv_reserve(kv, 0, 32, NULL) == BRISK_OK);
            if (brisk_kv_type_kivi(type)) kv->seqs[0].seal_end = 32;   /* as a batch in order: slot 31's put seals the block */
            random_kv(kv, d);
            const uint8_t *kp = brisk_kv_k_part(kv, 0, 0, 0, 0), *vp = brisk_kv_v_part(kv, 0, 0, 0, 0);
            const size_t vrb = kv->v_part / BRISK_KV_BLOCK;
            float q[8 * 128], p[8 * 64], kt[128 * 32], want[8 * 64], got[8 * 64], o_want[8 * 128], o_got[8 * 128], o0[8 * 128];
            for (int i = 0; i < 8 * 128; i++) q[i] = frand(), o0[i] = frand();
            for (int i = 0; i < 8 * 64; i++) p[i] = frand() * 0.5f + 0.5f;
            /* the dequantized keys, through kv.c (not the kernels' code) */
            for (int32_t i = 0; i < d; i++)
                for (int32_t s = 0; s < 32; s++) kt[i * 32 + s] = brisk_kv_k_value(kv, kp, s, i);
            /* a quantized K is scored as llama.cpp's flash attention scores it:
             * the query in Q8_0 (its CPU quantizer), integer dots per block
             * with the stored blocks (brisk_kv_row_get, kv.c's row path), each
             * scaled by the product of the two F16 scales, summed in order */
            int16_t qc[8 * 128];
            float qdv[8 * 4];
            float qscore[8][32];
            if (type == BRISK_KV_Q8_0 || type == BRISK_KV_Q4_0) {
                for (int h = 0; h < 8; h++)
                    for (int b = 0; b < d / 32; b++) {
                        brisk_block_q8_0 qb;
                        brisk_q8_0_quantize_x86(q + h * d + 32 * b, &qb, 32);
                        qdv[h * (d / 32) + b] = brisk_fp16_to_fp32(qb.d);
                        for (int i = 0; i < 32; i++) qc[h * d + 32 * b + i] = qb.qs[i];
                    }
                uint8_t krow[128 * 4], vrow[128 * 4];
                for (int32_t sl = 0; sl < 32; sl++) {
                    brisk_kv_row_get(kv, 0, 0, sl, krow, vrow);
                    for (int h = 0; h < 8; h++) {
                        float acc = 0.0f;
                        for (int b = 0; b < d / 32; b++) {
                            int32_t isum = 0;
                            float dk;
                            if (type == BRISK_KV_Q8_0) {
                                const brisk_block_q8_0 *kb = (const brisk_block_q8_0 *)(const void *)krow + b;
                                dk = brisk_fp16_to_fp32(kb->d);
                                for (int i = 0; i < 32; i++) isum += qc[h * d + 32 * b + i] * kb->qs[i];
                            } else {
                                const brisk_block_q4_0 *kb = (const brisk_block_q4_0 *)(const void *)krow + b;
                                dk = brisk_fp16_to_fp32(kb->d);
                                for (int i = 0; i < 32; i++)
                                    isum += qc[h * d + 32 * b + i] * ((i < 16 ? kb->qs[i] & 15 : kb->qs[i - 16] >> 4) - 8);
                            }
                            acc = acc + (float)isum * (dk * qdv[h * (d / 32) + b]);
                        }
                        qscore[h][sl] = acc * 0.125f;
                    }
                }
            }
            for (int m = 1; m <= 8; m++)
                for (int slot0 = 0; slot0 < 32; slot0 += 16)
                    for (int ng = 1; slot0 + 16 * ng <= 32; ng++) {
                        if (type == BRISK_KV_Q8_0 || type == BRISK_KV_Q4_0) {
                            for (int h = 0; h < m; h++)
                                for (int l = 0; l < 16 * ng; l++) want[h * 64 + l] = qscore[h][slot0 + l];
                        } else ref->kq_multi_t(q, (size_t)d, m, kt + slot0, 32, ng, d, 0.125f, want, 64);
                        for (int t = 0; t < nt; t++) {
                            const brisk_attn_kernels *g = tabs[t];
                            memset(got, 0, sizeof got);
                            if (type == BRISK_KV_F32) g->kq_multi_t(q, (size_t)d, m, (const float *)(const void *)kp + slot0, 32, ng, d, 0.125f, got, 64);
                            else {
                                if (type == BRISK_KV_Q8_0 || type == BRISK_KV_Q4_0) {
                                    void (*fn)(const int16_t *, const float *, size_t, int, const uint8_t *, int, int, int, float, float *, size_t,
                                               brisk_attn_pf *) = type == BRISK_KV_Q8_0 ? g->kq_multi_q8_0 : g->kq_multi_q4_0;
                                    if (!fn) fn = type == BRISK_KV_Q8_0 ? ref->kq_multi_q8_0 : ref->kq_multi_q4_0;
                                    /* odd slot0 groups with a prefetch queue (attention.c's next tile): the same outputs */
                                    brisk_attn_pf pq = {.base = {(const char *)kp}, .lines = {1}, .n = 1};
                                    fn(qc, qdv, (size_t)d, m, kp, slot0, ng, d, 0.125f, got, 64, ng % 2 ? &pq : NULL);
                                } else {
                                    void (*fn)(const float *, size_t, int, const uint8_t *, int, int, int, float, float *, size_t) =
                                        type == BRISK_KV_K4 ? g->kq_multi_k4 : g->kq_multi_k2;
                                    if (!fn) fn = type == BRISK_KV_K4 ? ref->kq_multi_k4 : ref->kq_multi_k2;
                                    fn(q, (size_t)d, m, kp, slot0, ng, d, 0.125f, got, 64);
                                }
                            }
                            bool ok = true;
                            for (int h = 0; h < m; h++) ok = ok && same_bits(want + h * 64, got + h * 64, (size_t)(16 * ng));
                            CHECKF(ok, "%s kq %s d %d m %d slot0 %d ng %d", g->isa, brisk_kv_type_name(type), d, m, slot0, ng);
                            checked++;
                        }
                    }
            /* V: rows 0..n-1 against axpy on kv.c's dequantized row (brisk_kv_row_get + the block dequantizers) */
            float vdeq[32 * 128];
            for (int32_t s = 0; s < 32; s++) {
                const uint8_t *row = vp + (size_t)s * vrb;
                if (type == BRISK_KV_F32) memcpy(vdeq + s * d, row, (size_t)d * 4);
                else if (type == BRISK_KV_Q8_0) brisk_q8_0_dequantize(row, vdeq + s * d, d);
                else if (type == BRISK_KV_Q4_0) brisk_q4_0_dequantize(row, vdeq + s * d, d);
                else if (type == BRISK_KV_K4) brisk_q4_1_dequantize(row, vdeq + s * d, d);   /* k4's V row is llama.cpp's q4_1 */
                else k2_row_dequant(row, vdeq + s * d, d);
            }
            for (int m = 1; m <= 8; m += 3)
                for (int n = 1; n <= 32; n += (n < 4 ? 1 : 9)) {
                    memcpy(o_want, o0, sizeof o_want);
                    for (int h = 0; h < m; h++)
                        for (int j = 0; j < n; j++)
                            for (int i = 0; i < d; i++)   /* F32: a multiply then an add; the quantized types fuse them (kernels.h) */
                                o_want[h * d + i] = type == BRISK_KV_F32 ? o_want[h * d + i] + p[h * 64 + j] * vdeq[j * d + i]
                                                                         : fmaf(p[h * 64 + j], vdeq[j * d + i], o_want[h * d + i]);
                    for (int t = 0; t < nt; t++) {
                        const brisk_attn_kernels *g = tabs[t];
                        brisk_attn_pf pq = {.base = {(const char *)vp}, .lines = {1}, .n = 1};   /* odd n: with a prefetch queue */
                        memcpy(o_got, o0, sizeof o_got);
                        if (type == BRISK_KV_F32)
                            (g->axpy_f32_rows_multi ? g->axpy_f32_rows_multi : ref->axpy_f32_rows_multi)(
                                o_got, (size_t)d, m, p, 64, (const float *)(const void *)vp, (size_t)d, n, d);
                        else if (type == BRISK_KV_Q8_0)
                            (g->axpy_q8_0_rows_multi ? g->axpy_q8_0_rows_multi : ref->axpy_q8_0_rows_multi)(o_got, (size_t)d, m, p, 64, vp, vrb, n, d,
                                                                                                             n % 2 ? &pq : NULL);
                        else if (type == BRISK_KV_Q4_0)
                            (g->axpy_q4_0_rows_multi ? g->axpy_q4_0_rows_multi : ref->axpy_q4_0_rows_multi)(o_got, (size_t)d, m, p, 64, vp, vrb, n, d,
                                                                                                             n % 2 ? &pq : NULL);
                        else if (type == BRISK_KV_K4)
                            (g->axpy_k4_rows_multi ? g->axpy_k4_rows_multi : ref->axpy_k4_rows_multi)(o_got, (size_t)d, m, p, 64, vp, vrb, n, d);
                        else
                            (g->axpy_k2_rows_multi ? g->axpy_k2_rows_multi : ref->axpy_k2_rows_multi)(o_got, (size_t)d, m, p, 64, vp, vrb, n, d);
                        CHECKF(same_bits(o_want, o_got, (size_t)m * (size_t)d), "%s axpy %s d %d m %d n %d", g->isa, brisk_kv_type_name(type), d, m, n);
                        checked++;
                    }
                }
            brisk_kv_free(kv);
        }
    printf("kernels: %d cases over %d tables bitwise equal to the dequantized reference\n", checked, nt);
}

/* k4/k2: brisk_kv_put stages K in F16 until a block fills in order, then
 * quantizes each channel's 32 values (asym32 on the F16-rounded K); V is
 * quantized per token (k4: exactly llama.cpp's q4_1). The K row form carries
 * the staged value, the group's d and min and the code (0xFF while open), and
 * row_set rebuilds the same rows in another cache. */
static void test_storage_kivi(brisk_kv_type type) {
    const int32_t d = 64, nh = 2, n = 40, bits = type == BRISK_KV_K4 ? 4 : 2;
    brisk_kv *kv = NULL, *kv2 = NULL;
    CHECK(brisk_kv_init(&kv, 1, nh, d, 64, 64, 1, type, type, NULL) == BRISK_OK);
    CHECK(brisk_kv_init(&kv2, 1, nh, d, 64, 64, 1, type, type, NULL) == BRISK_OK);
    if (!kv || !kv2) goto done;
    CHECK(brisk_kv_reserve(kv, 0, n, NULL) == BRISK_OK && brisk_kv_reserve(kv2, 0, n, NULL) == BRISK_OK);
    kv->seqs[0].seal_end = n;   /* as brisk_kv_batch_order sets it for a batch in order */
    static float k[40][2 * 64], v[40][2 * 64];
    for (int32_t s = 0; s < n; s++) {
        for (int i = 0; i < nh * d; i++) k[s][i] = 4.0f * frand() + (i % 7 == 0 ? 6.0f : 0.0f), v[s][i] = frand();
        for (int h = 0; h < nh; h++) brisk_kv_put(kv, 0, 0, s, h, k[s] + h * d, v[s] + h * d);
        brisk_kv_written(kv, 0, s, s, s, true);
    }
    const size_t krb = brisk_kv_k_row_bytes(type, d), vrb = brisk_kv_row_bytes(type, d);
    CHECK(krb == 7 * (size_t)d && vrb == (size_t)(d / 32) * (type == BRISK_KV_K4 ? 20 : 12));
    uint8_t kr[2 * 7 * 64], vr[2 * 64], want_v[2 * 64];
    int bad_v = 0, bad_sealed = 0, bad_open = 0;
    for (int32_t s = 0; s < n; s++) {
        brisk_kv_row_get(kv, 0, 0, s, kr, vr);
        for (int h = 0; h < nh; h++) {
            if (type == BRISK_KV_K4) brisk_q4_1_quantize(v[s] + h * d, want_v + h * vrb, d);
            else
                for (int g = 0; g < d / 32; g++) {
                    uint16_t dd, mm;
                    uint8_t c[32], *b = want_v + h * vrb + 12 * g;
                    asym32(v[s] + h * d + 32 * g, 2, &dd, &mm, c);
                    memcpy(b, &dd, 2), memcpy(b + 2, &mm, 2);
                    for (int j = 0; j < 8; j++) b[4 + j] = (uint8_t)(c[j] | c[j + 8] << 2 | c[j + 16] << 4 | c[j + 24] << 6);
                }
            const uint8_t *r = kr + (size_t)h * krb;
            for (int i = 0; i < d; i++) {
                uint16_t val, dd, mm;
                memcpy(&val, r + 2 * i, 2), memcpy(&dd, r + 2 * (d + i), 2), memcpy(&mm, r + 2 * (2 * d + i), 2);
                if (s < 32) {   /* block 0 filled in order: sealed */
                    float x[32];
                    uint16_t wd, wm;
                    uint8_t c[32];
                    for (int l = 0; l < 32; l++) x[l] = brisk_fp16_to_fp32(brisk_fp32_to_fp16(k[l][h * d + i]));
                    asym32(x, bits, &wd, &wm, c);
                    bad_sealed += dd != wd || mm != wm || r[6 * d + i] != c[s];
                    /* the exact value the kernels read */
                    const float want = (float)c[s] * brisk_fp16_to_fp32(wd) + brisk_fp16_to_fp32(wm);
                    const float got = brisk_kv_k_value(kv, brisk_kv_k_part(kv, 0, 0, s, h), s, i);
                    bad_sealed += memcmp(&want, &got, 4) != 0;
                } else {        /* block 1 open: F16 staging */
                    bad_open += r[6 * d + i] != 0xFF || val != brisk_fp32_to_fp16(k[s][h * d + i]) ||
                                brisk_kv_k_stage(kv, 0, 0, s, h)[i * BRISK_KV_BLOCK] != val;
                }
            }
        }
        bad_v += memcmp(vr, want_v, (size_t)nh * vrb) != 0;
        brisk_kv_row_set(kv2, 0, 0, s, kr, vr);
    }
    CHECKF(bad_v == 0, "%s: %d V rows differ from the per-token quantizer", brisk_kv_type_name(type), bad_v);
    CHECKF(bad_sealed == 0, "%s: %d sealed K values differ from the per-channel quantizer", brisk_kv_type_name(type), bad_sealed);
    CHECKF(bad_open == 0, "%s: %d open K values are not their F16", brisk_kv_type_name(type), bad_open);
    int round = 0;
    for (int32_t s = 0; s < n; s++) {
        uint8_t k2[2 * 7 * 64], v2[2 * 64];
        brisk_kv_row_get(kv, 0, 0, s, kr, vr);
        brisk_kv_row_get(kv2, 0, 0, s, k2, v2);
        /* a sealed row's staged value is only kept until the block is committed: compare the rest */
        for (int h = 0; h < nh; h++)
            if (s < 32) memset(kr + h * krb, 0, 2 * (size_t)d), memset(k2 + h * krb, 0, 2 * (size_t)d);
        round += memcmp(kr, k2, (size_t)nh * krb) != 0 || memcmp(vr, v2, (size_t)nh * vrb) != 0;
    }
    CHECKF(round == 0, "%s: row_set/row_get do not round-trip (%d rows)", brisk_kv_type_name(type), round);
    /* committing returns the sealed block's staging; the open one keeps it */
    const int32_t free0 = kv->n_stage_free;
    brisk_kv_commit(kv, 0);
    CHECK(kv->n_stage_free == free0 + 1 && kv->blk[kv->seqs[0].blocks[0]].stage < 0 && kv->blk[kv->seqs[0].blocks[1]].stage >= 0);
done:
    brisk_kv_free(kv);
    brisk_kv_free(kv2);
}

/* k4/k2 blocks through the pool's operations: commit returns a sealed
 * block's staging, a fork's write copies the open block with its staging, a
 * prefix sync does not keep part of a sealed block, and a truncation into a
 * sealed block reopens it from its quantized values (the pool's invariants,
 * staging included, after each step). */
static void test_kivi_pool(brisk_kv_type type) {
    brisk_kv *kv = NULL;
    brisk_error err = {0};
    const int32_t d = 32;
    CHECK(brisk_kv_init_full(&kv, 1, 1, d, d, 128, 128, 2, 16, type, type, &err) == BRISK_OK);
    if (!kv) return;
    CHECK(kv->n_stage == 2 * 2 + 1);
    int32_t seqs[40], slots[40], toks[40];
    uint8_t order[40];
    for (int32_t s = 0; s < 40; s++) seqs[s] = 0, slots[s] = s, order[s] = 1, toks[s] = 100 + s;
    CHECK(brisk_kv_reserve_batch(kv, seqs, slots, 40, &err) == BRISK_OK);
    brisk_kv_batch_order(kv, seqs, slots, order, 40);
    for (int32_t s = 0; s < 40; s++) {
        float k[32], v[32];
        for (int i = 0; i < d; i++) k[i] = 3.0f * frand(), v[i] = frand();
        brisk_kv_put(kv, 0, 0, s, 0, k, v);
        brisk_kv_written(kv, 0, s, toks[s], s, true);
    }
    const int32_t b0 = kv->seqs[0].blocks[0], b1 = kv->seqs[0].blocks[1];
    CHECK(kv->blk[b0].sealed && kv->blk[b0].stage >= 0 && !kv->blk[b1].sealed);
    brisk_kv_commit(kv, 0);
    CHECKF(kv->blk[b0].stage < 0 && kv->blk[b1].stage >= 0 && brisk_kv_check(kv, &err), "%s commit: %s", brisk_kv_type_name(type), err.msg);
    /* a fork shares both blocks; its first write copies the open one with its staging */
    CHECK(brisk_kv_fork(kv, 0, 1, &err) == BRISK_OK && brisk_kv_reserve(kv, 1, 41, &err) == BRISK_OK);
    CHECK(kv->seqs[1].blocks[0] == b0 && kv->seqs[1].blocks[1] != b1);
    int bad = 0;
    for (int32_t s = 32; s < 40; s++)
        for (int i = 0; i < d; i++)
            bad += brisk_kv_k_stage(kv, 0, 1, s, 0)[i * BRISK_KV_BLOCK] != brisk_kv_k_stage(kv, 0, 0, s, 0)[i * BRISK_KV_BLOCK];
    CHECKF(bad == 0 && brisk_kv_check(kv, &err), "%s fork: %d staged values differ; %s", brisk_kv_type_name(type), bad, err.msg);
    /* a sync that would keep 20 slots of the sealed block keeps none of it */
    CHECK(brisk_kv_sync_prefix(kv, 0, toks, 20) == 0);
    /* truncated into the sealed block (shared with the index), then written: a copy reopened from its values */
    brisk_kv_truncate(kv, 1, 20);
    CHECK(brisk_kv_reserve(kv, 1, 21, &err) == BRISK_OK);
    const int32_t nb0 = kv->seqs[1].blocks[0];
    CHECK(nb0 != b0 && !kv->blk[nb0].sealed && kv->blk[nb0].stage >= 0);
    bad = 0;
    for (int32_t s = 0; s < 20; s++)
        for (int i = 0; i < d; i++)
            bad += brisk_kv_k_stage(kv, 0, 1, s, 0)[i * BRISK_KV_BLOCK] !=
                   brisk_fp32_to_fp16(brisk_kv_k_value(kv, kv->k + (size_t)b0 * kv->k_part, s, i));
    CHECKF(bad == 0 && brisk_kv_check(kv, &err), "%s reopen: %d staged values are not the quantized ones; %s", brisk_kv_type_name(type), bad,
           err.msg);
    brisk_kv_free(kv);
}

/* brisk_kv_put stores llama.cpp's blocks; row_get / row_set round-trip them. */
static void test_storage(void) {
    for (int type = 0; type < BRISK_KV_N_TYPES; type++) {
        const int32_t d = 64, nh = 2;
        if (brisk_kv_type_kivi(type)) {
            test_storage_kivi((brisk_kv_type)type);
            test_kivi_pool((brisk_kv_type)type);
            continue;
        }
        brisk_kv *kv = NULL;
        CHECK(brisk_kv_init(&kv, 1, nh, d, 64, 64, 1, (brisk_kv_type)type, (brisk_kv_type)type, NULL) == BRISK_OK);
        if (!kv) continue;
        CHECK(brisk_kv_reserve(kv, 0, 40, NULL) == BRISK_OK);
        const size_t rb = brisk_kv_row_bytes((brisk_kv_type)type, d);
        uint8_t want[2 * 2 * 64 * 4], got_k[2 * 64 * 4], got_v[2 * 64 * 4];
        bool ok = true, round = true;
        for (int32_t s = 0; s < 40; s++) {
            float k[2 * 64], v[2 * 64];
            for (int i = 0; i < nh * d; i++) k[i] = 4.0f * frand(), v[i] = frand();
            for (int h = 0; h < nh; h++) brisk_kv_put(kv, 0, 0, s, h, k + h * d, v + h * d);
            brisk_kv_row_get(kv, 0, 0, s, got_k, got_v);
            for (int w = 0; w < 2; w++)
                for (int h = 0; h < nh; h++) {
                    const float *x = (w ? v : k) + h * d;
                    uint8_t *dst = want + (size_t)(w * nh + h) * rb;
                    if (type == BRISK_KV_F16)
                        for (int i = 0; i < d; i++) {
                            const uint16_t hb = brisk_fp32_to_fp16(x[i]);
                            memcpy(dst + 2 * i, &hb, 2);
                        }
                    else if (type == BRISK_KV_F32) memcpy(dst, x, (size_t)d * 4);
                    else if (type == BRISK_KV_Q8_0) brisk_q8_0_quantize_x86(x, dst, d);
                    else brisk_q4_0_quantize(x, dst, d);
                }
            ok = ok && !memcmp(want, got_k, rb * nh) && !memcmp(want + rb * nh, got_v, rb * nh);
            /* set from the row form into another slot, read back */
            brisk_kv_row_set(kv, 0, 0, 39 - s % 8, got_k, got_v);
            uint8_t k2[2 * 64 * 4], v2[2 * 64 * 4];
            brisk_kv_row_get(kv, 0, 0, 39 - s % 8, k2, v2);
            round = round && !memcmp(k2, got_k, rb * nh) && !memcmp(v2, got_v, rb * nh);
        }
        CHECKF(ok, "%s: stored rows are not llama.cpp's quantize_row output", brisk_kv_type_name(type));
        CHECKF(round, "%s: row_set/row_get do not round-trip", brisk_kv_type_name(type));
        brisk_kv_free(kv);
    }
    CHECK(brisk_kv_type_parse("Q8_0") == BRISK_KV_Q8_0 && brisk_kv_type_parse("F16") == BRISK_KV_F16 && brisk_kv_type_parse("q5_1") == -1);
    CHECK(brisk_kv_type_parse("K4") == BRISK_KV_K4 && brisk_kv_type_parse("k2") == BRISK_KV_K2 && brisk_kv_type_parse("k3") == -1);
    brisk_kv *kv = NULL;
    brisk_error err = {0};
    CHECK(brisk_kv_init(&kv, 1, 1, 48, 32, 32, 1, BRISK_KV_Q8_0, BRISK_KV_F16, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, "multiple of 32"));
}

/* ---- engine: batch invariance and states per type ---- */

#define NP 75   /* prompt tokens: two full blocks and a partial one, more than a 64-tile */

static brisk_context *ctx_pool(const brisk_model *m, int type, int n_seq, int32_t kv_tokens) {
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = 256;
    cp.kv_tokens = kv_tokens;
    cp.n_seq = n_seq;
    cp.n_threads = 2;
    cp.n_batch = 128;
    cp.type_k = cp.type_v = type;
    brisk_context *c = NULL;
    brisk_error err = {0};
    CHECKF(brisk_context_init(m, &cp, &c, &err) == BRISK_OK, "context %s: %s", brisk_cache_type_name(type), err.msg);
    return c;
}

static brisk_context *ctx_of(const brisk_model *m, int type, int n_seq) { return ctx_pool(m, type, n_seq, 0); }

/* Feed toks[0, n) to seq in chunks of `chunk`, with seq2's own tokens
 * interleaved into the same batches when seq2 >= 0; logits of every token of
 * seq go to out[n][n_vocab], and with out2 seq2's to out2 by position. */
static bool feed2(brisk_context *c, int32_t seq, const int32_t *toks, int32_t n, int32_t chunk, int32_t seq2, const int32_t *toks2,
                  float *out, float *out2, int32_t n_vocab) {
    int32_t tk[256], ps[256], sq[256];
    uint8_t lg[256];
    int32_t done2 = 0;
    for (int32_t i0 = 0; i0 < n; i0 += chunk) {
        const int32_t m = n - i0 < chunk ? n - i0 : chunk;
        int32_t nb = 0;
        for (int32_t j = 0; j < m; j++) tk[nb] = toks[i0 + j], ps[nb] = i0 + j, sq[nb] = seq, lg[nb] = 1, nb++;
        if (seq2 >= 0)
            for (int32_t j = 0; j < 3 && done2 < n; j++, done2++) tk[nb] = toks2[done2], ps[nb] = done2, sq[nb] = seq2, lg[nb] = 1, nb++;
        brisk_batch b = {.n_tokens = nb, .token = tk, .pos = ps, .seq = sq, .logits = lg};
        brisk_error err = {0};
        if (brisk_decode(c, &b, &err) != BRISK_OK) {
            fprintf(stderr, "decode: %s\n", err.msg);
            return false;
        }
        for (int32_t j = 0; j < m; j++) memcpy(out + (size_t)(i0 + j) * n_vocab, brisk_get_logits(c, j), (size_t)n_vocab * sizeof(float));
        for (int32_t j = m; j < nb && out2; j++) memcpy(out2 + (size_t)ps[j] * n_vocab, brisk_get_logits(c, j), (size_t)n_vocab * sizeof(float));
    }
    return true;
}

static bool feed(brisk_context *c, int32_t seq, const int32_t *toks, int32_t n, int32_t chunk, int32_t seq2, const int32_t *toks2,
                 float *out, int32_t n_vocab) {
    return feed2(c, seq, toks, n, chunk, seq2, toks2, out, NULL, n_vocab);
}

/* The model at path (NULL, with a skip line naming what, when absent), its
 * vocabulary size, and two token sequences of n over it. */
static brisk_model *load_with_tokens(const char *path, const char *what, int32_t n, int32_t *toks, int32_t *toks2, int32_t *n_vocab) {
    brisk_model *m = NULL;
    if (brisk_model_load(path, &m, NULL) != BRISK_OK) {
        printf("skip %s: %s absent\n", what, path);
        return NULL;
    }
    brisk_model_info info;
    brisk_model_get_info(m, &info);
    const int32_t V = *n_vocab = info.n_vocab;
    for (int32_t i = 0; i < n; i++) toks[i] = (int32_t)((i * 7919u + 13u) % (uint32_t)V), toks2[i] = (int32_t)((i * 104729u + 5u) % (uint32_t)V);
    return m;
}

static void test_engine(const char *path, const char *name) {
    int32_t toks[NP], toks2[NP], V;
    brisk_model *m = load_with_tokens(path, name, NP, toks, toks2, &V);
    if (!m) return;
    float *ref = malloc((size_t)NP * V * sizeof(float)), *got = malloc((size_t)NP * V * sizeof(float)), *f16 = malloc((size_t)NP * V * sizeof(float));
    for (int type = 0; type < BRISK_KV_N_TYPES; type++) {
        brisk_context *c = ctx_of(m, type, 3);
        if (!c) continue;
        /* one token at a time: every attention read is the decode's fused kernels */
        CHECK(feed(c, 0, toks, NP, 1, -1, NULL, ref, V));
        if (type == BRISK_KV_F16) memcpy(f16, ref, (size_t)NP * V * sizeof(float));
        static const int32_t chunks[] = {NP, 7, 32, 64};
        for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
            CHECK(brisk_seq_truncate(c, 1, 0, NULL) == BRISK_OK && brisk_seq_truncate(c, 2, 0, NULL) == BRISK_OK);
            CHECK(feed(c, 1, toks, NP, chunks[k], -1, NULL, got, V));
            CHECKF(same_bits(ref, got, (size_t)NP * V), "%s %s: chunks of %d differ from one token at a time", name, brisk_cache_type_name(type),
                   chunks[k]);
            CHECK(brisk_seq_truncate(c, 1, 0, NULL) == BRISK_OK);
            CHECK(feed(c, 1, toks, NP, chunks[k], 2, toks2, got, V));
            CHECKF(same_bits(ref, got, (size_t)NP * V), "%s %s: chunks of %d batched with another sequence differ", name,
                   brisk_cache_type_name(type), chunks[k]);
        }
        if (type != BRISK_KV_F16) {   /* the type is really used, and stays close to F16 */
            double maxd = 0.0;
            for (size_t i = 0; i < (size_t)NP * V; i++) maxd = fmax(maxd, fabs((double)ref[i] - f16[i]));
            CHECKF(maxd > 0.0, "%s %s: logits equal F16's bit for bit: the type is not used", name, brisk_cache_type_name(type));
            const double bound = type == BRISK_KV_K2 ? 8.0 : type == BRISK_KV_Q4_0 || type == BRISK_KV_K4 ? 4.0 : 1.0;
            CHECKF(maxd < bound, "%s %s: logits %.3g from F16's", name, brisk_cache_type_name(type), maxd);
            printf("%s %s: max |logit - F16's| %.3g over %d positions\n", name, brisk_cache_type_name(type), maxd, NP);
        }
        /* a token tree (speculative decoding's) in this type: its nodes see their
         * paths, and keeping one path moves the rows in their storage type, so
         * the sequence continues as the chain does. At P = 62 the path crosses
         * into the next block: for k4/k2 its last node reads the block it
         * crossed as the chain sealed it, and keep_path seals it so. */
        static const int32_t tree_at[] = {NP - 4, 62};
        for (size_t ti = 0; ti < sizeof tree_at / sizeof tree_at[0]; ti++) {
            const int32_t P = tree_at[ti];
            CHECK(brisk_seq_truncate(c, 1, 0, NULL) == BRISK_OK);
            CHECK(feed(c, 1, toks, P, 32, -1, NULL, got, V));
            const int32_t junk = (toks[P] + 1) % V;
            int32_t tt[5] = {toks[P], junk, toks[P + 1], junk, toks[P + 2]}, tp[5] = {P, P, P + 1, P + 1, P + 2}, sq[5] = {1, 1, 1, 1, 1};
            const int32_t parent[5] = {-1, -1, 0, 0, 2};
            uint8_t lg[5] = {1, 1, 1, 1, 1};
            brisk_batch bt = {.n_tokens = 5, .token = tt, .pos = tp, .seq = sq, .logits = lg};
            brisk_error err = {0};
            CHECKF(brisk_decode_tree(c, &bt, parent, &err) == BRISK_OK, "tree %s: %s", brisk_cache_type_name(type), err.msg);
            CHECKF(same_bits(brisk_get_logits(c, 4), ref + (size_t)(P + 2) * V, (size_t)V), "%s %s: a tree node at %d differs from the chain", name,
                   brisk_cache_type_name(type), P + 2);
            const int32_t path[3] = {0, 2, 4};
            CHECKF(brisk_seq_keep_path(c, 1, path, 3, &err) == BRISK_OK, "keep_path: %s", err.msg);
            int32_t tk = toks[P + 3], ps = P + 3, s1 = 1;
            uint8_t l1 = 1;
            brisk_batch b1 = {.n_tokens = 1, .token = &tk, .pos = &ps, .seq = &s1, .logits = &l1};
            CHECKF(brisk_decode(c, &b1, &err) == BRISK_OK, "after keep_path: %s", err.msg);
            CHECKF(same_bits(brisk_get_logits(c, 0), ref + (size_t)(P + 3) * V, (size_t)V),
                   "%s %s: decoding after keep_path (tree at %d) differs from the chain", name, brisk_cache_type_name(type), P);
        }
        /* a state of this type continues bitwise in another context of the type, and is refused by the others */
        uint8_t *st = NULL;
        size_t n_st = 0;
        brisk_error err = {0};
        CHECK(brisk_seq_truncate(c, 1, 0, NULL) == BRISK_OK);
        CHECK(feed(c, 1, toks, NP - 1, 16, -1, NULL, got, V));
        CHECKF(brisk_seq_state_get_alloc(c, 1, NULL, &st, &n_st, &err) == BRISK_OK, "state get: %s", err.msg);
        brisk_context *c2 = ctx_of(m, type, 1);
        if (c2 && st) {
            CHECKF(brisk_seq_state_set(c2, 0, NULL, st, n_st, &err) == BRISK_OK, "state set %s: %s", brisk_cache_type_name(type), err.msg);
            int32_t tk = toks[NP - 1], ps = NP - 1, sq = 0;
            uint8_t lg = 1;
            brisk_batch b = {.n_tokens = 1, .token = &tk, .pos = &ps, .seq = &sq, .logits = &lg};
            CHECK(brisk_decode(c2, &b, &err) == BRISK_OK);
            CHECKF(same_bits(brisk_get_logits(c2, 0), ref + (size_t)(NP - 1) * V, (size_t)V), "%s %s: a loaded state does not continue bitwise",
                   name, brisk_cache_type_name(type));
            for (int other = 0; other < BRISK_KV_N_TYPES; other++) {
                if (other == type) continue;
                brisk_context *c3 = ctx_of(m, other, 1);
                if (!c3) continue;
                err.msg[0] = 0;
                CHECKF(brisk_seq_state_set(c3, 0, NULL, st, n_st, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, brisk_cache_type_name(type)),
                       "%s state into a %s context: '%s'", brisk_cache_type_name(type), brisk_cache_type_name(other), err.msg);
                CHECK(brisk_seq_len(c3, 0) == 0);
                brisk_context_free(c3);
            }
        }
        free(st);
        brisk_context_free(c2);
        brisk_context_free(c);
    }
    /* an unknown type is refused */
    brisk_context_params cp = brisk_context_default_params();
    cp.type_v = 9;
    brisk_context *bad = NULL;
    brisk_error err = {0};
    CHECK(brisk_context_init(m, &cp, &bad, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "q4_0") && !bad);
    free(ref), free(got), free(f16);
    brisk_model_free(m);
}

/* ---- hyb4/hyb2 (kv/hyb.c) ---- */

#define NHY 200   /* six full blocks and a partial one: five refreshes of the hot rows */

/* Into the F32 cache kr's sequence 0: the values a query at position P of
 * seq in the hyb cache ka reads (kv/hyb.c, written out here from the cache's
 * accessors): its own block's F16 staging, the hot rows' F16, every other
 * slot dequantized; with hot = false the hot slots dequantized too. */
static void hyb_reference(const brisk_kv *ka, int32_t seq, int32_t P, brisk_kv *kr, bool hot) {
    const int32_t nl = ka->n_layer, nh = ka->n_head, hd = ka->head_dim;
    const size_t krb = brisk_kv_k_row_bytes(ka->k_type, (int64_t)nh * hd), vrb = brisk_kv_row_bytes(ka->v_type, (int64_t)nh * hd);
    const size_t vhb = brisk_kv_row_bytes(ka->v_type, hd);
    uint8_t *kq = malloc(krb), *vq = malloc(vrb);
    float *kf = malloc((size_t)nh * hd * sizeof(float)), *vf = malloc((size_t)nh * hd * sizeof(float));
    brisk_error err = {0};
    brisk_kv_truncate(kr, 0, 0);
    CHECK(brisk_kv_reserve(kr, 0, P, &err) == BRISK_OK);
    for (int32_t s = 0; s < P; s++) {
        const bool own = s / BRISK_KV_BLOCK == P / BRISK_KV_BLOCK;
        for (int32_t il = 0; il < nl; il++) {
            brisk_kv_row_get(ka, il, seq, s, kq, vq);
            for (int32_t h = 0; h < nh; h++) {
                const int32_t r = hot ? brisk_kv_hyb_row(ka, seq, il, h, s) : -1;
                float *k = kf + (size_t)h * hd, *v = vf + (size_t)h * hd;
                if (own) {
                    const uint16_t *ks = brisk_kv_k_stage(ka, il, seq, s, h), *vs = brisk_kv_v_stage(ka, il, seq, s, h);
                    for (int32_t i = 0; i < hd; i++) k[i] = brisk_fp16_to_fp32(ks[(size_t)i * BRISK_KV_BLOCK]), v[i] = brisk_fp16_to_fp32(vs[i]);
                } else if (r >= 0) {
                    const uint16_t *ks = brisk_kv_hyb_kt(ka, seq, il, h, r) + r % 16, *vs = brisk_kv_hyb_v(ka, seq, il, h, r);
                    for (int32_t i = 0; i < hd; i++) k[i] = brisk_fp16_to_fp32(ks[(size_t)i * 16]), v[i] = brisk_fp16_to_fp32(vs[i]);
                } else {
                    brisk_kv_k_get(ka, il, seq, s, h, k);
                    if (ka->v_type == BRISK_KV_K4) brisk_q4_1_dequantize(vq + (size_t)h * vhb, v, hd);
                    else k2_row_dequant(vq + (size_t)h * vhb, v, hd);
                }
            }
            brisk_kv_row_set(kr, il, 0, s, (const uint8_t *)kf, (const uint8_t *)vf);
        }
        brisk_kv_written(kr, 0, s, brisk_kv_slot_token(ka, seq, s), s, true);
    }
    free(kq), free(vq), free(kf), free(vf);
}

/* Token tok at position pos of seq, alone; its logits to out. */
static bool decode_one(brisk_context *c, int32_t seq, int32_t tok, int32_t pos, float *out, int32_t n_vocab) {
    uint8_t lg = 1;
    brisk_batch b = {.n_tokens = 1, .token = &tok, .pos = &pos, .seq = &seq, .logits = &lg};
    brisk_error err = {0};
    if (brisk_decode(c, &b, &err) != BRISK_OK) {
        fprintf(stderr, "decode: %s\n", err.msg);
        return false;
    }
    memcpy(out, brisk_get_logits(c, 0), (size_t)n_vocab * sizeof(float));
    return true;
}

static double max_diff(const float *a, const float *b, int32_t n) {
    double d = 0.0;
    for (int32_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* Every (layer, KV head) of seq, len slots in order: its hot rows are the
 * sinks, the last full block whole, and ceil(5%) of the slots before that
 * block; each hot row holds its slot. */
static void check_hot_rows(const brisk_kv *kv, int32_t seq, int32_t len, const char *what) {
    const int32_t full = len / BRISK_KV_BLOCK, s0 = (full - 1) * BRISK_KV_BLOCK;
    int bad = 0;
    for (int32_t il = 0; il < kv->n_layer; il++)
        for (int32_t h = 0; h < kv->n_head; h++) {
            int32_t sinks = 0, window = 0, other = 0, rows = 0;
            for (int32_t s = 0; s < len; s++) {
                const int32_t r = brisk_kv_hyb_row(kv, seq, il, h, s);
                if (r < 0) continue;
                rows++;
                if (kv->hyb_slot[brisk_kv_hyb_unit(kv, seq, il, h) * (size_t)kv->hyb_cap + (size_t)r] != s) bad++;
                if (s < BRISK_KV_HYB_SINK) sinks++;
                else if (s >= s0 && s < s0 + BRISK_KV_BLOCK) window++;
                else other++;
            }
            const int32_t want_other = full < 1 ? 0 : BRISK_MIN((s0 * BRISK_KV_HYB_PCT + 99) / 100, BRISK_MAX(s0 - BRISK_KV_HYB_SINK, 0));
            if (full >= 1 && (sinks != BRISK_KV_HYB_SINK || window != (s0 == 0 ? BRISK_KV_BLOCK - BRISK_KV_HYB_SINK : BRISK_KV_BLOCK) ||
                              other != want_other))
                bad++;
            if (full == 0 && rows) bad++;
        }
    CHECKF(bad == 0, "%s: %d (layer, head) hot sets at %d slots are not sinks + window + 5%%", what, bad, len);
}

/* quick runs (the sanitizers' stages, whose debug builds decode an F16 model
 * slowly) skip the models without quick_too and take fewer chunkings */
static void test_hyb(const char *path, const char *name, bool quick_too) {
    if (test_quick() && !quick_too) return;
    int32_t toks[NHY], toks2[NHY], V;
    brisk_model *m = load_with_tokens(path, name, NHY, toks, toks2, &V);
    if (!m) return;
    float *ref = malloc((size_t)NHY * V * sizeof(float)), *got = malloc((size_t)NHY * V * sizeof(float));
    float *k4 = malloc((size_t)NHY * V * sizeof(float)), *ref2 = malloc((size_t)NHY * V * sizeof(float)), *got2 = malloc((size_t)NHY * V * sizeof(float));
    for (int type = BRISK_KV_HYB4; type <= BRISK_KV_HYB2; type++) {
        const char *tn = brisk_cache_type_name(type);
        brisk_context *c = ctx_pool(m, type, 3, 3 * 256), *ck = ctx_of(m, type == BRISK_KV_HYB4 ? BRISK_KV_K4 : BRISK_KV_K2, 1);
        brisk_context *cr = ctx_of(m, BRISK_KV_F32, 1);
        if (!c || !ck || !cr) goto next;
        CHECK(c->kv->hyb && c->kv->k_type == (type == BRISK_KV_HYB4 ? BRISK_KV_K4 : BRISK_KV_K2) && !ck->kv->hyb);
        /* one token at a time, against the reference cache at positions
         * inside a block, at its first slot and at its last */
        int checked = 0;
        double worst = 0.0, closest_nohot = INFINITY, ratio = 0.0;
        for (int32_t p = 0; p < NHY; p++) {
            const bool probe = p >= 40 && (p % BRISK_KV_BLOCK == 0 || p % BRISK_KV_BLOCK == 31 || p % 17 == 5);
            if (probe) {
                const brisk_kv *ka = c->kv;
                for (int hot = 0; hot < 2; hot++) {   /* got: [0] with the hot rows, [1] without */
                    hyb_reference(ka, 0, p, cr->kv, hot);
                    CHECK(decode_one(cr, 0, toks[p], p, got + (size_t)(1 - hot) * V, V));
                }
            }
            CHECKF(decode_one(c, 0, toks[p], p, ref + (size_t)p * V, V), "%s decode %d", tn, p);
            if (probe) {
                /* the reference differs in the query's own K and V (F16 in the
                 * hyb cache's staging, F32 here): the hyb logits sit near it,
                 * and far from the reference that reads the hot rows quantized */
                const double dh = max_diff(ref + (size_t)p * V, got, V), dd = max_diff(got, got + V, V);
                if (getenv("BRISK_TEST_VERBOSE")) printf("  %s p %d: %.3g from the reference, %.3g between the references\n", tn, p, dh, dd);
                worst = fmax(worst, dh), closest_nohot = fmin(closest_nohot, dd);
                ratio = fmax(ratio, dh / dd);
                checked++;
            }
            if (p % 37 == 36) check_hot_rows(c->kv, 0, p + 1, tn);
        }
        printf("%s %s: %d positions against an F32 cache of the values read: max |logit diff| %.3g; the reference with the hot rows quantized "
               "differs by %.3g or more; worst ratio %.3f\n", name, tn, checked, worst, closest_nohot, ratio);
        CHECKF(checked > 10 && ratio < 0.5, "%s %s: logits %.3g from the reference, which the hot rows move by only %.3g (ratio %.3f)", name, tn,
               worst, closest_nohot, ratio);
        /* the type is used: closer to F16 than k4/k2, not equal */
        CHECK(feed(ck, 0, toks, 128, 64, -1, NULL, k4, V));
        CHECKF(!same_bits(ref, k4, (size_t)128 * V), "%s %s: logits equal %s's", name, tn, brisk_cache_type_name(type - 2));
        /* batch invariance: chunks, and beside another sequence (whose logits
         * are checked too, against its own token-by-token run) */
        CHECK(brisk_seq_truncate(c, 2, 0, NULL) == BRISK_OK);
        CHECK(feed(c, 2, toks2, NHY, 1, -1, NULL, ref2, V));
        static const int32_t chunks[] = {7, 45, 64, 32, 50};
        for (size_t k = 0; k < (test_quick() ? 2u : sizeof chunks / sizeof chunks[0]); k++) {
            CHECK(brisk_seq_truncate(c, 1, 0, NULL) == BRISK_OK && brisk_seq_truncate(c, 2, 0, NULL) == BRISK_OK);
            CHECK(feed(c, 1, toks, NHY, chunks[k], -1, NULL, got, V));
            CHECKF(same_bits(ref, got, (size_t)NHY * V), "%s %s: chunks of %d differ from one token at a time", name, tn, chunks[k]);
            CHECK(brisk_seq_truncate(c, 1, 0, NULL) == BRISK_OK);
            CHECK(feed2(c, 1, toks, NHY, chunks[k], 2, toks2, got, got2, V));
            CHECKF(same_bits(ref, got, (size_t)NHY * V), "%s %s: chunks of %d beside another sequence differ", name, tn, chunks[k]);
            const int32_t n2 = 3 * ((NHY + chunks[k] - 1) / chunks[k]);   /* the other sequence's tokens fed beside */
            CHECKF(same_bits(ref2, got2, (size_t)BRISK_MIN(n2, NHY) * V), "%s %s: the sequence fed 3 per batch beside chunks of %d differs", name,
                   tn, chunks[k]);
        }
        check_hot_rows(c->kv, 1, NHY, tn);
        {
            brisk_error ce = {0};
            CHECKF(brisk_kv_check(c->kv, &ce), "%s: %s", tn, ce.msg);
        }
        /* a fork mid-block continues as its source */
        brisk_error err = {0};
        CHECK(brisk_seq_truncate(c, 1, 0, NULL) == BRISK_OK);
        CHECK(feed(c, 1, toks, 150, 64, -1, NULL, got, V));
        CHECKF(brisk_seq_fork(c, 1, 2, &err) == BRISK_OK, "fork: %s", err.msg);
        for (int32_t p = 150; p < NHY; p++)
            for (int32_t sq = 1; sq <= 2; sq++) {
                CHECK(decode_one(c, sq, toks[p], p, got, V));
                CHECKF(same_bits(got, ref + (size_t)p * V, (size_t)V), "%s %s: sequence %d after the fork differs at %d", name, tn, sq, p);
            }
        /* truncated into a sealed block (its F16 staging rebuilt from the quantized
         * values, the hot rows past the cut dropped): it continues close to the
         * chain, not bitwise (docs/KV.md), and the cache stays consistent */
        CHECK(brisk_seq_truncate(c, 1, 100, &err) == BRISK_OK);
        CHECKF(brisk_kv_check(c->kv, &err), "%s after a truncation: %s", tn, err.msg);
        double drift = 0.0;
        for (int32_t p = 100; p < NHY; p++) {
            CHECK(decode_one(c, 1, toks[p], p, got, V));
            drift = fmax(drift, max_diff(got, ref + (size_t)p * V, V));
        }
        CHECKF(drift < (type == BRISK_KV_HYB4 ? 4.0 : 8.0), "%s %s: after a truncation the logits drift %.3g from the chain's", name, tn, drift);
        CHECKF(brisk_kv_check(c->kv, &err), "%s after continuing: %s", tn, err.msg);
        /* ... and, in a new context, a fresh sequence of the same tokens beside
         * such a one is untouched by that history (no block of the truncated
         * one reaches it, nor the other way round) */
        brisk_context *cf = ctx_pool(m, type, 2, 2 * 256);
        if (cf) {
            CHECK(feed(cf, 0, toks, 100, 50, -1, NULL, got, V) && brisk_seq_truncate(cf, 0, 50, NULL) == BRISK_OK);
            for (int32_t p = 50; p < NHY; p++) CHECK(decode_one(cf, 0, toks[p], p, got, V));
            CHECK(feed(cf, 1, toks, NHY, 45, -1, NULL, got, V));
            CHECKF(same_bits(ref, got, (size_t)NHY * V), "%s %s: a fresh sequence beside a truncated one differs", name, tn);
            CHECKF(brisk_kv_check(cf->kv, &err), "%s: %s", tn, err.msg);
        }
        brisk_context_free(cf);
        /* a decode's path cannot be kept (speculative decoding's step) */
        CHECK(brisk_seq_truncate(c, 2, 40, NULL) == BRISK_OK);
        {
            int32_t ct[10], cpos[10], cs[10], path[3] = {0, 1, 2};
            uint8_t cl[10];
            for (int32_t j = 0; j < 10; j++) ct[j] = toks[40 + j], cpos[j] = 40 + j, cs[j] = 2, cl[j] = 1;
            brisk_batch bc = {.n_tokens = 10, .token = ct, .pos = cpos, .seq = cs, .logits = cl};
            CHECK(brisk_decode(c, &bc, &err) == BRISK_OK);
            CHECKF(brisk_seq_keep_path(c, 2, path, 3, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, tn), "keep_path: '%s'", err.msg);
            CHECK(brisk_seq_len(c, 2) == 50);
            CHECKF(brisk_kv_check(c->kv, &err), "%s after a refused keep_path: %s", tn, err.msg);
        }
        /* refused: a token tree, states, a retention policy, hyb on one of K and V */
        int32_t tt[2] = {toks[0], toks[1]}, tp[2] = {NHY, NHY}, ts[2] = {1, 1}, par[2] = {-1, -1};
        uint8_t tl[2] = {1, 1};
        brisk_batch bt = {.n_tokens = 2, .token = tt, .pos = tp, .seq = ts, .logits = tl};
        CHECKF(brisk_decode_tree(c, &bt, par, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, "tree") && strstr(err.msg, tn), "tree: '%s'", err.msg);
        CHECK(brisk_seq_len(c, 1) == NHY);
        uint8_t *st = NULL;
        size_t n_st = 0;
        CHECKF(brisk_seq_state_get_alloc(c, 1, NULL, &st, &n_st, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, tn), "state get: '%s'", err.msg);
        free(st);
        st = NULL;
        CHECK(brisk_seq_state_get_alloc(ck, 0, NULL, &st, &n_st, &err) == BRISK_OK);
        CHECKF(brisk_seq_state_set(c, 0, NULL, st, n_st, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, tn), "state set: '%s'", err.msg);
        free(st);
        brisk_context_params cp = brisk_context_default_params();
        cp.n_ctx_seq = 256;
        cp.type_k = type, cp.type_v = BRISK_KV_F16;
        brisk_context *bad = NULL;
        CHECKF(brisk_context_init(m, &cp, &bad, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, "together") && !bad, "%s/f16: '%s'", tn, err.msg);
        cp.type_v = type, cp.kv_policy = 1 /* streaming */, cp.kv_budget = 128;
        CHECKF(brisk_context_init(m, &cp, &bad, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, "policy") && !bad, "%s + policy: '%s'", tn, err.msg);
        /* a prefix is reused only whole: the hot rows are the history of every query */
        CHECK(brisk_kv_sync_prefix(c->kv, 1, toks, NHY) == NHY);
        CHECK(brisk_kv_sync_prefix(c->kv, 1, toks, 100) == 0 && brisk_seq_len(c, 1) == 0);
        CHECKF(brisk_kv_check(c->kv, &err), "%s after the refusals: %s", tn, err.msg);
    next:
        brisk_context_free(c);
        brisk_context_free(ck);
        brisk_context_free(cr);
    }
    free(ref), free(got), free(k4), free(ref2), free(got2);
    brisk_model_free(m);
}

/* hyb4 on the other attention shapes: windowed layers with a score softcap
 * (gemma2), learned sink logits (gpt-oss), multi-head latent attention with V
 * shorter than K (deepseek2): one token at a time, in chunks, and beside
 * another sequence give the same bits. */
static void test_hyb_shapes(const char *path, const char *name) {
    enum { n = 150 };
    int32_t toks[n], toks2[n], V;
    brisk_model *m = load_with_tokens(path, name, n, toks, toks2, &V);
    if (!m) return;
    float *ref = malloc((size_t)n * V * sizeof(float)), *got = malloc((size_t)n * V * sizeof(float));
    brisk_context *c = ctx_pool(m, BRISK_KV_HYB4, 3, 3 * 256);
    if (c) {
        CHECK(feed(c, 0, toks, n, 1, -1, NULL, ref, V));
        static const int32_t chunks[] = {45, 7, 64};
        for (size_t k = 0; k < (test_quick() ? 1u : sizeof chunks / sizeof chunks[0]); k++) {
            CHECK(brisk_seq_truncate(c, 1, 0, NULL) == BRISK_OK && brisk_seq_truncate(c, 2, 0, NULL) == BRISK_OK);
            CHECK(feed(c, 1, toks, n, chunks[k], 2, toks2, got, V));
            CHECKF(same_bits(ref, got, (size_t)n * V), "%s hyb4: chunks of %d beside another sequence differ", name, chunks[k]);
        }
        brisk_error err = {0};
        CHECKF(brisk_kv_check(c->kv, &err), "%s hyb4: %s", name, err.msg);
        printf("%s hyb4: %d tokens bitwise alike one at a time, in chunks and batched\n", name, n);
    }
    brisk_context_free(c);
    free(ref), free(got);
    brisk_model_free(m);
}

/* kld.c: encode then compare a position with itself: KL ~ 0, same top; the parser's refusals. */
static void test_kld(void) {
    enum { NV = 301 };
    float lg[NV];
    uint16_t row[NV + 5];
    brisk_kld_stats st = {0};
    double worst = 0.0;
    for (int r = 0; r < 50; r++) {
        for (int i = 0; i < NV; i++) lg[i] = 6.0f * frand();
        CHECK(brisk_kld_nv(NV) == NV + 5);
        const double nll = brisk_kld_encode(lg, NV, r % NV, row);
        float pd;
        const double kl = brisk_kld_compare(lg, NV, row, r % NV, &st, &pd);
        worst = fmax(worst, fabs(kl));
        CHECK(nll > 0.0 && fabsf(pd) < 1e-3f);
    }
    CHECKF(worst < 1e-4, "self KL %.3g (the file's 16-bit codes alone)", worst);
    CHECK(st.n_same_top == 50 && st.count == 50);
    brisk_kld_header h;
    uint8_t hdr[BRISK_KLD_HEADER];
    CHECK(brisk_kld_layout(8, NV, 2, &h));
    brisk_kld_header_write(&h, hdr);
    brisk_kld_header g;
    brisk_error err = {0};
    CHECK(brisk_kld_header_parse(hdr, sizeof hdr, h.total, &g, &err) == BRISK_OK && g.n_pos == 3 && g.nv == NV + 5);
    CHECK(h.total == 20 + 2 * 8 * 4 + 2 * 3 * (NV + 5) * 2);
    CHECK(brisk_kld_header_parse(hdr, sizeof hdr, h.total - 1, &g, &err) == BRISK_ERR_FORMAT && strstr(err.msg, "truncated"));
    CHECK(brisk_kld_header_parse(hdr, sizeof hdr, h.total + 1, &g, &err) == BRISK_ERR_FORMAT && strstr(err.msg, "trailing"));
    hdr[0] = 'x';
    CHECK(brisk_kld_header_parse(hdr, sizeof hdr, h.total, &g, &err) == BRISK_ERR_FORMAT && strstr(err.msg, "_logits_"));
}

int main(int argc, char **argv) {
    test_kernels();
    if (argc > 1 && !strcmp(argv[1], "kernels")) return test_finish();   /* the aarch64 stage's NEON check (qemu) */
    test_storage();
    test_kld();
    char p1[4096], p2[4096];
    test_engine(test_source("models/pycode-target-f16.gguf", p1, sizeof p1), "pycode-target-f16");
    test_engine(test_source("tests/data/golden/qwen2-tiny-Q4_0.gguf", p2, sizeof p2), "qwen2-tiny-Q4_0");
    test_hyb(p1, "pycode-target-f16", false);
    test_hyb(p2, "qwen2-tiny-Q4_0", true);
    static const char *const shapes[] = {"gemma2-Q4_K_M", "gpt-oss-moe-Q4_K_M", "deepseek2-groups-Q4_K_M"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char rel[256], p3[4096];
        snprintf(rel, sizeof rel, "tests/data/archs/%s.gguf", shapes[i]);
        test_hyb_shapes(test_source(rel, p3, sizeof p3), shapes[i]);
    }
    return test_finish();
}
