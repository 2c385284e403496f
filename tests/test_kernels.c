/* test_kernels: every dot product of every kernel table this CPU runs,
 *  - against an independent formulation: the double-precision dot of the
 *    dequantized weights with the dequantized activations;
 *  - against the reference table on the same inputs;
 * at odd block counts, on quantized real-looking data and on random block
 * bytes, with guard bytes after every buffer and NaN-filled outputs. Also the
 * activation quantizers of every table against ref, and the dispatch rules. */
#include "base/cpu.h"
#include "kernels/kernels.h"
#include "ops/ops.h"
#include "quant/blocks.h"
#include "quant/convert.h"
#include "quant/quant.h"
#include "test.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rng_next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}
static float rng_uniform(void) { return (float)(rng_next() >> 40) * (1.0f / 16777216.0f); }
static float rng_gauss(void) {
    float u = rng_uniform() + 1e-7f, v = rng_uniform();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

#define GUARD 64
#define GUARD_BYTE 0x5a

/* A buffer of len bytes followed by GUARD guard bytes. */
typedef struct guarded {
    uint8_t *p;
    size_t len;
} guarded;

static guarded guarded_alloc(size_t len) {
    guarded g = {malloc(len + GUARD), len};
    if (g.p) memset(g.p, GUARD_BYTE, len + GUARD);
    return g;
}
static bool guard_ok(const guarded *g) {
    for (size_t i = 0; i < GUARD; i++)
        if (g->p[g->len + i] != GUARD_BYTE) return false;
    return true;
}

/* Offsets of the fp16 scale fields of each block format, so that random block
 * bytes can be given finite, moderate scales (random fp16 bits would be NaN or
 * huge 1 time in 32). F16/BF16 rows are all scales. */
typedef struct scale_fields {
    brisk_qtype type;
    int count;
    size_t off[2];
} scale_fields;

static const scale_fields scale_table[] = {
    {BRISK_Q_Q4_0, 1, {offsetof(brisk_block_q4_0, d)}},
    {BRISK_Q_Q4_1, 2, {offsetof(brisk_block_q4_1, d), offsetof(brisk_block_q4_1, m)}},
    {BRISK_Q_Q5_0, 1, {offsetof(brisk_block_q5_0, d)}},
    {BRISK_Q_Q5_1, 2, {offsetof(brisk_block_q5_1, d), offsetof(brisk_block_q5_1, m)}},
    {BRISK_Q_Q8_0, 1, {offsetof(brisk_block_q8_0, d)}},
    {BRISK_Q_Q2_K, 2, {offsetof(brisk_block_q2_k, d), offsetof(brisk_block_q2_k, dmin)}},
    {BRISK_Q_Q3_K, 1, {offsetof(brisk_block_q3_k, d)}},
    {BRISK_Q_Q4_K, 2, {offsetof(brisk_block_q4_k, d), offsetof(brisk_block_q4_k, dmin)}},
    {BRISK_Q_Q5_K, 2, {offsetof(brisk_block_q5_k, d), offsetof(brisk_block_q5_k, dmin)}},
    {BRISK_Q_Q6_K, 1, {offsetof(brisk_block_q6_k, d)}},
    {BRISK_Q_IQ4_NL, 1, {offsetof(brisk_block_iq4_nl, d)}},
    {BRISK_Q_IQ4_XS, 1, {offsetof(brisk_block_iq4_xs, d)}},
};

static void fill_random_blocks(brisk_qtype type, uint8_t *dst, int64_t n) {
    const brisk_qtype_info *info = brisk_qtype_get(type);
    size_t row;
    brisk_qtype_row_bytes(type, n, &row);
    if (type == BRISK_Q_F32) {
        float *f = (float *)dst;
        for (int64_t i = 0; i < n; i++) f[i] = rng_gauss();
        return;
    }
    for (size_t i = 0; i < row; i++) dst[i] = (uint8_t)rng_next();
    if (type == BRISK_Q_F16 || type == BRISK_Q_BF16) {
        uint16_t *h = (uint16_t *)dst;
        for (int64_t i = 0; i < n; i++)
            h[i] = type == BRISK_Q_F16 ? brisk_fp32_to_fp16(rng_gauss()) : brisk_fp32_to_bf16(rng_gauss());
        return;
    }
    if (type == BRISK_Q_MXFP4)   /* E8M0 scales 2^-10 .. 2^8 (random bytes reach 2^127, and inf in the products) */
        for (int64_t b = 0; b < n / 32; b++) dst[(size_t)b * sizeof(brisk_block_mxfp4)] = (uint8_t)(118 + rng_next() % 19);
    for (size_t t = 0; t < BRISK_ARRAY_LEN(scale_table); t++) {
        if (scale_table[t].type != type) continue;
        for (int64_t b = 0; b < n / info->block_elems; b++) {
            for (int k = 0; k < scale_table[t].count; k++) {
                uint16_t h = brisk_fp32_to_fp16(0.05f * rng_gauss());
                memcpy(dst + (size_t)b * info->block_bytes + scale_table[t].off[k], &h, sizeof h);
            }
        }
    }
}

static void fill_floats(float *x, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: x[i] = rng_gauss(); break;
        case 1: x[i] = 0.2f + 0.1f * rng_gauss(); break;   /* offset: exercises the min terms */
        default: x[i] = (rng_next() % 50 == 0) ? 30.0f * rng_gauss() : 0.01f * rng_gauss(); break;
        }
    }
}

static const int64_t block_counts[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 255, 257, 1023};

typedef struct dot_case {
    brisk_qtype wtype;
    const brisk_qtype_info *winfo, *ainfo;
    int64_t n;
    guarded w, a;    /* quantized weights / activations */
    float *wf, *af;  /* their dequantized values */
} dot_case;

/* Bound on the float rounding a correct kernel may show: each element's
 * product is off by a few ulps of |a_i| * (largest |w| in its block) (the
 * block's scale and min terms are that large), plus one rounding per block
 * added to the running sum. Q8_1 activations also carry s = d*sum(q) rounded
 * to fp16, which the Q4_1/Q5_1 min term multiplies. */
static double dot_tolerance(const dot_case *c) {
    const int64_t bw = c->winfo->block_elems;
    double mag = 0.0;
    for (int64_t b = 0; b < c->n / bw; b++) {
        double wmax = 0.0;
        for (int64_t i = b * bw; i < (b + 1) * bw; i++) wmax = fmax(wmax, fabs((double)c->wf[i]));
        for (int64_t i = b * bw; i < (b + 1) * bw; i++) mag += fabs((double)c->af[i]) * wmax;
    }
    double blocks = (double)(c->n / BRISK_MAX(bw, c->ainfo->block_elems));
    double tol = 8.0 * (16.0 + blocks) * FLT_EPSILON * mag;
    if (c->ainfo == brisk_qtype_get(BRISK_Q_Q8_1)) {
        const brisk_block_q8_1 *y = (const brisk_block_q8_1 *)c->a.p;
        for (int64_t b = 0; b < c->n / 32; b++) {
            double m = 0.0;   /* |min| of the weight block: m is its first fp16 after d */
            uint16_t mh;
            memcpy(&mh, c->w.p + (size_t)b * c->winfo->block_bytes + 2, sizeof mh);
            m = fabs((double)brisk_fp16_to_fp32(mh));
            tol += m * (fabs((double)brisk_fp16_to_fp32(y[b].s)) * 0x1p-10 + 0x1p-24);
        }
    }
    return tol + 1e-30;
}

static double independent_dot(const dot_case *c) {
    double s = 0.0;
    for (int64_t i = 0; i < c->n; i++) s += (double)c->wf[i] * c->af[i];
    return s;
}

/* One weight type at one size, for every table. */
static void check_dot_case(const brisk_kernels *const *tables, int ntables, brisk_qtype wtype, int64_t nblocks,
                           int kind) {
    dot_case c = {.wtype = wtype, .winfo = brisk_qtype_get(wtype)};
    c.ainfo = brisk_qtype_get(c.winfo->act_type);
    c.n = nblocks * BRISK_MAX(c.winfo->block_elems, c.ainfo->block_elems);
    size_t wrow, arow;
    brisk_qtype_row_bytes(wtype, c.n, &wrow);
    brisk_qtype_row_bytes(c.winfo->act_type, c.n, &arow);
    c.w = guarded_alloc(wrow);
    c.a = guarded_alloc(arow);
    c.wf = malloc((size_t)c.n * sizeof(float));
    c.af = malloc((size_t)c.n * sizeof(float));
    float *x = malloc((size_t)c.n * sizeof(float));
    if (!c.w.p || !c.a.p || !c.wf || !c.af || !x) {
        CHECK(!"out of memory");
        goto done;
    }

    /* weights: quantized data, or random block bytes */
    if (kind < 3) {
        fill_floats(x, c.n, kind);
        brisk_qtype_from_float(wtype)(x, c.w.p, c.n);
    } else {
        fill_random_blocks(wtype, c.w.p, c.n);
    }
    brisk_qtype_to_float(wtype)(c.w.p, c.wf, c.n);
    fill_floats(x, c.n, kind % 3);

    float ref_out = NAN;
    for (int t = 0; t < ntables; t++) {
        const brisk_kernels *k = tables[t];
        brisk_vec_dot_fn dot = k->vec_dot[wtype];
        brisk_quantize_fn quant = k->quantize_act[c.winfo->act_type];
        CHECKF(dot && quant, "%s: no kernel for %s", k->isa, c.winfo->name);
        if (!dot || !quant) continue;
        memset(c.a.p, GUARD_BYTE, arow);
        quant(x, c.a.p, c.n);
        CHECKF(guard_ok(&c.a), "%s quantize %s n=%lld: overrun", k->isa, c.ainfo->name, (long long)c.n);
        brisk_qtype_to_float(c.winfo->act_type)(c.a.p, c.af, c.n);

        float out[2] = {NAN, NAN};   /* out[1] catches a write past *out */
        dot(c.n, &out[0], c.w.p, c.a.p);
        CHECKF(guard_ok(&c.w) && guard_ok(&c.a), "%s %s n=%lld: buffers changed", k->isa, c.winfo->name,
               (long long)c.n);
        CHECKF(isnan(out[1]), "%s %s: wrote past the output", k->isa, c.winfo->name);
        double want = independent_dot(&c), tol = dot_tolerance(&c);
        CHECKF(isfinite(out[0]) && fabs(out[0] - want) <= tol, "%s %s n=%lld kind %d: dot %.9g, dequantized %.9g (tol %.3g)",
               k->isa, c.winfo->name, (long long)c.n, kind, (double)out[0], want, tol);

        /* same inputs through the reference kernel: the tables must agree */
        float ref_same = NAN;
        tables[0]->vec_dot[wtype](c.n, &ref_same, c.w.p, c.a.p);
        if (t == 0) {
            ref_out = ref_same;
            /* ref is deterministic */
            CHECKF(memcmp(&ref_same, &out[0], sizeof(float)) == 0, "ref %s not deterministic", c.winfo->name);
        } else if (wtype == BRISK_Q_F16 && strncmp(k->isa, "avx", 3) == 0) {
            /* x86 F16: ref's 16-lane order, bit for bit (the packed GEMM's order too) */
            CHECKF(memcmp(&out[0], &ref_same, sizeof(float)) == 0, "%s F16 n=%lld kind %d: %a vs ref %a", k->isa, (long long)c.n,
                   kind, (double)out[0], (double)ref_same);
        } else if (c.winfo->block_elems == 1) {
            /* float formats: the ISA tables use their own summation order */
            CHECKF(fabs((double)out[0] - ref_same) <= tol, "%s %s n=%lld: %.9g vs ref %.9g", k->isa, c.winfo->name,
                   (long long)c.n, (double)out[0], (double)ref_same);
        } else {
            /* quantized formats: every table follows ref's reduction order, bit for bit */
            const bool same = memcmp(&out[0], &ref_same, sizeof(float)) == 0 || (isnan(out[0]) && isnan(ref_same));
            CHECKF(same, "%s %s n=%lld kind %d: %a vs ref %a", k->isa, c.winfo->name, (long long)c.n, kind,
                   (double)out[0], (double)ref_same);
        }
    }
    (void)ref_out;
done:
    free(c.w.p);
    free(c.a.p);
    free(c.wf);
    free(c.af);
    free(x);
}

static const brisk_qtype weight_types[] = {
    BRISK_Q_F32,  BRISK_Q_F16,  BRISK_Q_BF16, BRISK_Q_Q4_0, BRISK_Q_Q4_1, BRISK_Q_Q5_0, BRISK_Q_Q5_1,
    BRISK_Q_Q8_0, BRISK_Q_Q2_K, BRISK_Q_Q3_K, BRISK_Q_Q4_K, BRISK_Q_Q5_K, BRISK_Q_Q6_K, BRISK_Q_IQ4_NL,
    BRISK_Q_IQ4_XS, BRISK_Q_MXFP4,
};

static void test_dots(const brisk_kernels *const *tables, int ntables) {
    const int64_t max_elems = test_quick() ? 256 * 33 : 256 * 1023;
    for (size_t t = 0; t < BRISK_ARRAY_LEN(weight_types); t++) {
        const brisk_qtype_info *info = brisk_qtype_get(weight_types[t]);
        const brisk_qtype_info *act = brisk_qtype_get(info->act_type);
        const int64_t unit = BRISK_MAX(info->block_elems, act->block_elems);
        for (size_t s = 0; s < BRISK_ARRAY_LEN(block_counts); s++) {
            int64_t nb = block_counts[s];
            if (nb * unit > max_elems) continue;
            for (int kind = 0; kind < 4; kind++) check_dot_case(tables, ntables, weight_types[t], nb, kind);
        }
    }
}

/* Hand-checkable dot products: integer sums times scales. */
static void test_dot_known(void) {
    const brisk_kernels *ref = brisk_kernels_ref();
    brisk_block_q8_0 w[2], a[2];
    for (int b = 0; b < 2; b++) {
        w[b].d = brisk_fp32_to_fp16(b ? 0.5f : 2.0f);
        a[b].d = brisk_fp32_to_fp16(0.25f);
        for (int j = 0; j < 32; j++) {
            w[b].qs[j] = (int8_t)(j - 16);
            a[b].qs[j] = (int8_t)(j % 2 ? 1 : -1);
        }
    }
    /* sum over j of (j-16)*(+-1) = 16 per block; 16*2*0.25 + 16*0.5*0.25 = 10 */
    float out = NAN;
    ref->vec_dot[BRISK_Q_Q8_0](64, &out, w, a);
    CHECK(out == 10.0f);

    /* Q4_0 weight nibble 0 is -8: all-zero nibbles against all-one activations */
    brisk_block_q4_0 w4;
    memset(&w4, 0, sizeof w4);
    w4.d = brisk_fp32_to_fp16(1.0f);
    for (int j = 0; j < 32; j++) a[0].qs[j] = 1;
    a[0].d = brisk_fp32_to_fp16(1.0f);
    ref->vec_dot[BRISK_Q_Q4_0](32, &out, &w4, a);
    CHECK(out == -256.0f);

    /* MXFP4: nibble 7 is E2M1 6.0 (table value 12 under the halved scale);
     * e = 127 is the scale 1: 32 weights of 6 against activations of 1 */
    brisk_block_mxfp4 wm;
    wm.e = 127;
    memset(wm.qs, 0x77, sizeof wm.qs);
    ref->vec_dot[BRISK_Q_MXFP4](32, &out, &wm, a);
    CHECK(out == 192.0f);
    wm.e = 128;   /* scale 2, and nibbles 15 / 8: -6 and -0 */
    memset(wm.qs, 0x8f, sizeof wm.qs);
    ref->vec_dot[BRISK_Q_MXFP4](32, &out, &wm, a);
    CHECK(out == -192.0f);

    /* IQ4_NL: nibble 0 is -127, nibble 8 is 1 */
    brisk_block_iq4_nl wn;
    wn.d = brisk_fp32_to_fp16(0.5f);
    memset(wn.qs, 0x80, sizeof wn.qs);   /* elements 0-15: -127, 16-31: 1 */
    ref->vec_dot[BRISK_Q_IQ4_NL](32, &out, &wn, a);
    CHECK(out == 0.5f * (16 * -127 + 16 * 1));

    /* IQ4_XS: every group scale 33 - 32 = 1, value 1 (nibble 8), against Q8_K 2s */
    brisk_block_iq4_xs wx;
    wx.d = brisk_fp32_to_fp16(1.0f);
    wx.scales_h = 0xaaaa;                    /* bit pairs 10: ls = 32 + the low nibble 1 */
    memset(wx.scales_l, 0x11, sizeof wx.scales_l);
    memset(wx.qs, 0x88, sizeof wx.qs);
    brisk_block_q8_k ak;
    memset(&ak, 0, sizeof ak);
    ak.d = 1.0f;
    memset(ak.qs, 2, sizeof ak.qs);
    ref->vec_dot[BRISK_Q_IQ4_XS](256, &out, &wx, &ak);
    CHECK(out == 512.0f);

    /* F16 / F32 small exact cases */
    uint16_t h[3] = {brisk_fp32_to_fp16(1.5f), brisk_fp32_to_fp16(-2.0f), brisk_fp32_to_fp16(0.25f)};
    uint16_t g[3] = {brisk_fp32_to_fp16(2.0f), brisk_fp32_to_fp16(0.5f), brisk_fp32_to_fp16(4.0f)};
    ref->vec_dot[BRISK_Q_F16](3, &out, h, g);
    CHECK(out == 3.0f - 1.0f + 1.0f);
    const float f1[3] = {1e8f, 1.0f, -1e8f}, f2[3] = {1.0f, 1.0f, 1.0f};
    ref->vec_dot[BRISK_Q_F32](3, &out, f1, f2);   /* double accumulation keeps the 1 */
    CHECK(out == 1.0f);
}

/* Activation quantizers of every table against ref: bit-identical (every
 * table, ref included, quantizes the way ggml's CPU backend does on x86). */
static void test_quantize_act(const brisk_kernels *const *tables, int ntables) {
    static const brisk_qtype acts[] = {BRISK_Q_F32, BRISK_Q_F16, BRISK_Q_BF16, BRISK_Q_Q8_0, BRISK_Q_Q8_1, BRISK_Q_Q8_K};
    const int64_t n = 256 * 17;
    float *x = malloc(n * sizeof(float));
    guarded r = guarded_alloc((size_t)n * 4), o = guarded_alloc((size_t)n * 4);
    if (!x || !r.p || !o.p) {
        CHECK(!"out of memory");
        goto done;
    }
    for (int kind = 0; kind < 4; kind++) {
        if (kind < 3) fill_floats(x, n, kind);
        else   /* ties: each block's largest value is +-127, so the scale is +-1 and every x.5 is a tie, which rounds to even */
            for (int64_t i = 0; i < n; i++) x[i] = i % 32 == 5 ? (i / 32 % 2 ? -127.0f : 127.0f) : (float)(i % 61 - 30) + 0.5f;
        for (size_t i = 0; i < BRISK_ARRAY_LEN(acts); i++) {
            size_t row;
            brisk_qtype_row_bytes(acts[i], n, &row);
            tables[0]->quantize_act[acts[i]](x, r.p, n);
            CHECK(guard_ok(&r));
            for (int t = 1; t < ntables; t++) {
                memset(o.p, 0, row);
                tables[t]->quantize_act[acts[i]](x, o.p, n);
                CHECK(guard_ok(&o));
                CHECKF(memcmp(r.p, o.p, row) == 0, "%s quantize %s differs from ref", tables[t]->isa,
                       brisk_qtype_name(acts[i]));
            }
        }
    }
    /* the x86 flavour is what ggml-cpu runs on AVX machines */
    float y[32];
    for (int j = 0; j < 32; j++) y[j] = (float)j - 15.5f;   /* amax 15.5 */
    y[0] = 127.0f;
    y[1] = 0.5f;
    brisk_block_q8_0 b1, b2;
    brisk_q8_0_quantize(y, &b1, 32);
    brisk_q8_0_quantize_x86(y, &b2, 32);
    CHECK(b1.qs[1] == 1 && b2.qs[1] == 0);
done:
    free(x);
    free(r.p);
    free(o.p);
}

static bool table_listed(const brisk_kernels *const *tables, int ntables, const char *isa) {
    for (int t = 0; t < ntables; t++)
        if (strcmp(tables[t]->isa, isa) == 0) return true;
    return false;
}

static void test_tables(const brisk_kernels *const *tables, int ntables) {
    CHECK(ntables >= 1 && tables[0] == brisk_kernels_ref());
    CHECK(strcmp(tables[0]->isa, "ref") == 0);
    const brisk_kernels *best = brisk_kernels_best();
    bool listed = false;
    for (int t = 0; t < ntables; t++) listed |= tables[t] == best;
    CHECKF(listed, "best table '%s' is not among the usable ones", best->isa);
    const brisk_kernels *one = NULL;
    CHECK(brisk_kernels_all(&one, 1) == ntables && one == brisk_kernels_ref());
    CHECK(brisk_kernels_all(NULL, 0) == ntables);
    /* every weight type the quant table knows, except the activation-only
     * Q8_1/Q8_K, has a kernel and its activation quantizer in every table */
    for (int t = 0; t < ntables; t++) {
        for (uint32_t ty = 0; ty < BRISK_Q_TYPE_LIMIT; ty++) {
            const brisk_qtype_info *info = brisk_qtype_get(ty);
            if (!info || ty == BRISK_Q_Q8_1 || ty == BRISK_Q_Q8_K) continue;
            CHECKF(tables[t]->vec_dot[ty] && tables[t]->quantize_act[info->act_type], "%s lacks %s", tables[t]->isa,
                   info->name);
        }
    }
    /* aarch64: the baseline NEON table always runs, and so is tested; the
     * dotprod one too where the CPU has it (qemu-aarch64 -cpu max does) */
    const brisk_cpu_features *f = brisk_cpu_features_get();
    if (f->neon) CHECKF(table_listed(tables, ntables, "neon"), "the CPU has NEON but the neon table is not listed");
    if (f->neon && f->dotprod)
        CHECKF(table_listed(tables, ntables, "neon-dotprod"), "the CPU has dotprod but the neon-dotprod table is not listed");
    if (f->neon && f->dotprod && f->i8mm)
        CHECKF(table_listed(tables, ntables, "neon-i8mm"), "the CPU has i8mm but the neon-i8mm table is not listed");
    char buf[256];
    printf("cpu: %s; tables:", brisk_cpu_features_describe(brisk_cpu_features_get(), buf, sizeof buf));
    for (int t = 0; t < ntables; t++) printf(" %s", tables[t]->isa);
    printf("; best: %s; one-token weight prefetch %s\n", best->isa, f->decode_prefetch ? "on" : "off");
}

/* vec_dot_2x2 (aarch64 i8mm) against the same table's vec_dot and ref's, bit
 * for bit, on two rows x two activation rows with padding between them; the
 * outputs sit os = 3 apart with NaN sentinels around and between them. */
static void test_dot_2x2(const brisk_kernels *const *tables, int ntables) {
    int tested = 0;
    for (int t = 0; t < ntables; t++) {
        const brisk_kernels *k = tables[t];
        for (uint32_t ty = 0; ty < BRISK_Q_TYPE_LIMIT; ty++) {
            if (!k->vec_dot_2x2[ty]) continue;
            const brisk_qtype_info *wi = brisk_qtype_get(ty);
            const uint32_t at = wi->act_type;
            for (size_t bc = 0; bc < BRISK_ARRAY_LEN(block_counts); bc++) {
                const int64_t n = block_counts[bc] * wi->block_elems;
                size_t wrow, arow;
                brisk_qtype_row_bytes(ty, n, &wrow);
                brisk_qtype_row_bytes(at, n, &arow);
                const size_t ws = wrow + 2 * wi->block_bytes, as = arow + 64;   /* rows not back to back */
                guarded w = guarded_alloc(2 * ws), a = guarded_alloc(2 * as);
                float *x = malloc(sizeof(float) * (size_t)n);
                CHECK(w.p && a.p && x);
                if (!w.p || !a.p || !x) return;
                for (int r = 0; r < 2; r++) {
                    fill_random_blocks(ty, w.p + (size_t)r * ws, n);
                    fill_floats(x, n, r);
                    k->quantize_act[at](x, a.p + (size_t)r * as, n);
                }
                float out[8];
                for (int i = 0; i < 8; i++) out[i] = NAN;
                k->vec_dot_2x2[ty](n, out + 1, 3, w.p, ws, a.p, as);
                int bad = 0;
                for (int tk = 0; tk < 2; tk++)
                    for (int r = 0; r < 2; r++) {
                        float mine, ref;
                        k->vec_dot[ty](n, &mine, w.p + (size_t)r * ws, a.p + (size_t)tk * as);
                        tables[0]->vec_dot[ty](n, &ref, w.p + (size_t)r * ws, a.p + (size_t)tk * as);
                        const float got = out[1 + 3 * tk + r];
                        bad += memcmp(&got, &mine, sizeof got) != 0 || memcmp(&got, &ref, sizeof got) != 0;
                    }
                CHECKF(bad == 0, "%s vec_dot_2x2 %s n=%lld: %d of 4 outputs differ from vec_dot", k->isa, wi->name, (long long)n, bad);
                CHECKF(isnan(out[0]) && isnan(out[3]) && isnan(out[6]) && isnan(out[7]), "%s vec_dot_2x2 %s n=%lld: wrote outside its outputs",
                       k->isa, wi->name, (long long)n);
                CHECKF(guard_ok(&w) && guard_ok(&a), "%s vec_dot_2x2 %s: buffers changed", k->isa, wi->name);
                free(w.p);
                free(a.p);
                free(x);
                tested++;
            }
        }
    }
    const brisk_cpu_features *f = brisk_cpu_features_get();
    if (f->neon && f->dotprod && f->i8mm)
        CHECKF(table_listed(tables, ntables, "neon-i8mm") && tested > 0, "the CPU has i8mm but no neon-i8mm vec_dot_2x2 was tested");
    else if (tested == 0)
        printf("vec_dot_2x2: no table has one on this CPU (aarch64 i8mm only); skipped\n");
}

/* BRISK_FORCE_REF=1 is read once per process, so check it in a child that sets
 * it before anything reads the CPU table. */
static void test_force_ref(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("BRISK_FORCE_REF", "1", 1);
        const brisk_kernels *k = brisk_kernels_best();
        _exit(k == brisk_kernels_ref() && brisk_cpu_features_get()->force_ref ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* An attention table (every one this CPU runs, ref included) against the
 * scalar loops that specify it (unfused mul, then add), bit for bit. */
static void test_attention(const brisk_attn_kernels *g) {
    /* attention helpers against the scalar loops they replace (unfused mul, then add) */
    {
        enum { D = 128, STRIDE = 136 };
        uint16_t *k = malloc(sizeof(uint16_t) * 16 * STRIDE);
        float *kt = malloc(sizeof(float) * D * 16), q[D], o1[D], o2[D], s1[16], s2[16], s3[16];
        if (!k) { CHECK(!"out of memory"); return; }
        for (int d = 2; d <= D; d += 18) {
            for (int i = 0; i < 16 * STRIDE; i++) k[i] = brisk_fp32_to_fp16(rng_gauss());
            for (int i = 0; i < d; i++) q[i] = rng_gauss();
            for (int l = 0; l < 16; l++) {
                float acc = 0.0f;
                for (int i = 0; i < d; i++) {
                    const float prod = q[i] * brisk_fp16_to_fp32(k[l * STRIDE + i]);
                    acc = acc + prod;
                    kt[i * 16 + l] = brisk_fp16_to_fp32(k[l * STRIDE + i]);
                }
                s1[l] = acc * 0.125f;
            }
            g->kq16(q, k, STRIDE, d, 0.125f, s2);
            g->kq16t(q, kt, 16, d, 0.125f, s3);
            CHECKF(memcmp(s1, s2, sizeof s1) == 0 && memcmp(s1, s3, sizeof s1) == 0, "%s kq16/kq16t d=%d differ from scalar", g->isa, d);
            for (int i = 0; i < d; i++) o1[i] = o2[i] = rng_gauss();
            const float pw = rng_uniform();
            for (int i = 0; i < d; i++) {
                const float prod = pw * brisk_fp16_to_fp32(k[i]);
                o1[i] = o1[i] + prod;
            }
            g->axpy_f16(o2, pw, k, d);
            CHECKF(memcmp(o1, o2, sizeof(float) * (size_t)d) == 0, "%s axpy_f16 d=%d differs from scalar", g->isa, d);
            {   /* n rows in order == n scalar axpys in order */
                float pr[16];
                for (int n = 1; n <= 16; n += 5) {
                    for (int i = 0; i < d; i++) o1[i] = o2[i] = rng_gauss();
                    for (int j = 0; j < n; j++) {
                        pr[j] = rng_uniform();
                        for (int i = 0; i < d; i++) {
                            const float prod = pr[j] * brisk_fp16_to_fp32(k[j * STRIDE + i]);
                            o1[i] = o1[i] + prod;
                        }
                    }
                    g->axpy_f16_rows(o2, pr, k, STRIDE, n, d);
                    CHECKF(memcmp(o1, o2, sizeof(float) * (size_t)d) == 0, "%s axpy_f16_rows d=%d n=%d differs from scalar", g->isa, d, n);
                }
            }
        }
        free(k); free(kt);
    }
    /* the multi-query forms against the one-query kernels they batch: m queries
     * (1..7, past the 4 a call holds in registers) x 1..4 groups of 16 keys;
     * kq_multi_h on the same keys as F16 against kq_multi_t */
    {
        enum { D = 80, NQ = 7, KS = 64 + 3, VS = 88 };
        float *kt = malloc(sizeof(float) * D * KS), *q = malloc(sizeof(float) * NQ * D), *p = malloc(sizeof(float) * NQ * 64);
        float *o1 = malloc(sizeof(float) * NQ * D), *o2 = malloc(sizeof(float) * NQ * D), *s1 = malloc(sizeof(float) * NQ * 64),
              *s2 = malloc(sizeof(float) * NQ * 64);
        uint16_t *v = malloc(sizeof(uint16_t) * 64 * VS), *kh = malloc(sizeof(uint16_t) * D * KS);
        if (!kt || !q || !p || !o1 || !o2 || !s1 || !s2 || !v || !kh) { CHECK(!"out of memory"); return; }
        for (int i = 0; i < D * KS; i++) {
            kh[i] = brisk_fp32_to_fp16(rng_gauss());
            kt[i] = brisk_fp16_to_fp32(kh[i]);
        }
        for (int i = 0; i < 64 * VS; i++) v[i] = brisk_fp32_to_fp16(rng_gauss());
        int bad_kq = 0, bad_kqh = 0, bad_axpy = 0, bad_pf = 0;
        /* every other call with a prefetch queue over kh and v (attention.c's
         * next tile): the same outputs, and the cursor stays inside the queue */
        brisk_attn_pf pfq;
        const brisk_attn_pf pf0 = {.base = {(const char *)kh, (const char *)v, (const char *)kh, (const char *)v},
                                   .lines = {40, 40, 3, 1}, .n = 4};
        int calls = 0;
        /* odd calls: one line per iteration, or paced (brisk_attn_pf_pace) at under one or at several per iteration */
#define PFQ_NEXT() (calls++ % 2 ? (pfq = pf0, brisk_attn_pf_pace(&pfq, calls % 3 == 0 ? 0 : calls % 3 == 1 ? 200 : 7), &pfq) : NULL)
#define PFQ_CHECK(q) (bad_pf += (q) && ((q)->r > (q)->n || ((q)->r < (q)->n && ((q)->l < 0 || (q)->l >= (q)->lines[(q)->r]))))
        for (int d = 8; d <= D; d += 24)   /* 8, 32, 56, 80: below, at and past whole 32-dim chunks */
            for (int m = 1; m <= NQ; m++) {
                for (int i = 0; i < NQ * D; i++) q[i] = rng_gauss();
                for (int ng = 1; ng <= 4; ng++) {
                    for (int h = 0; h < m; h++)
                        for (int gi = 0; gi < ng; gi++) g->kq16t(q + h * D, kt + 16 * gi, KS, d, 0.125f, s1 + h * 64 + 16 * gi);
                    g->kq_multi_t(q, D, m, kt, KS, ng, d, 0.125f, s2, 64);
                    for (int h = 0; h < m; h++) bad_kq += memcmp(s1 + h * 64, s2 + h * 64, sizeof(float) * 16 * (size_t)ng) != 0;
                    {
                        for (int i = 0; i < NQ * 64; i++) s1[i] = NAN;   /* sentinels: every output written */
                        brisk_attn_pf *pq = PFQ_NEXT();
                        g->kq_multi_h(q, D, m, kh, KS, ng, d, 0.125f, s1, 64, pq);
                        PFQ_CHECK(pq);
                        for (int h = 0; h < m; h++) bad_kqh += memcmp(s1 + h * 64, s2 + h * 64, sizeof(float) * 16 * (size_t)ng) != 0;
                    }
                }
                for (int n = 1; n <= 64; n += 21) {
                    for (int i = 0; i < NQ * 64; i++) p[i] = rng_uniform();
                    for (int i = 0; i < NQ * D; i++) o1[i] = o2[i] = rng_gauss();
                    for (int h = 0; h < m; h++) g->axpy_f16_rows(o1 + h * D, p + h * 64, v, VS, n, d);
                    brisk_attn_pf *pq = PFQ_NEXT();
                    g->axpy_f16_rows_multi(o2, D, m, p, 64, v, VS, n, d, pq);
                    PFQ_CHECK(pq);
                    bad_axpy += memcmp(o1, o2, sizeof(float) * NQ * D) != 0;
                }
            }
        CHECKF(bad_kq == 0, "%s kq_multi_t differs from kq16t in %d cases", g->isa, bad_kq);
        CHECKF(bad_kqh == 0, "%s kq_multi_h differs from kq_multi_t in %d cases", g->isa, bad_kqh);
        CHECKF(bad_axpy == 0, "%s axpy_f16_rows_multi differs from axpy_f16_rows in %d cases", g->isa, bad_axpy);
        CHECKF(bad_pf == 0, "%s prefetch queue cursor out of its regions in %d calls", g->isa, bad_pf);
#undef PFQ_NEXT
#undef PFQ_CHECK
        free(kt); free(q); free(p); free(o1); free(o2); free(s1); free(s2); free(v); free(kh);
    }
    printf("attention %s: kq16, kq16t, axpy_f16(_rows), kq_multi_t/h, axpy_f16_rows_multi bit-identical to the scalar loops\n", g->isa);
}

/* brisk_attn_pf's pace: lines spread evenly over the ticks the pace was set
 * for (after k iterations between floor and ceil + 1 of k * lines / ticks),
 * the queue empty after exactly those ticks whether lines are fewer or more
 * than ticks, one line per iteration for ticks 0, and reset returning the
 * iterations counted. */
static void test_attn_pf_pace(void) {
    static char buf[64 * 300];   /* the largest set, 260 lines */
    const int32_t line_sets[][4] = {{34, 34, 34, 34}, {64, 64, 64, 64}, {1, 0, 0, 0}, {3, 40, 1, 7}, {200, 60, 0, 0}};
    const int32_t tick_sets[] = {0, 1, 5, 64, 136, 256, 257, 1000};
    int bad = 0;
    for (size_t a = 0; a < sizeof line_sets / sizeof line_sets[0]; a++)
        for (size_t b = 0; b < sizeof tick_sets / sizeof tick_sets[0]; b++) {
            brisk_attn_pf pf = {.ticks = 99};
            bad += brisk_attn_pf_reset(&pf) != 99 || pf.n || pf.ticks;
            int64_t lines = 0;
            for (int r = 0; r < 4; r++)
                if (line_sets[a][r]) pf.base[pf.n] = buf + 64 * lines, pf.lines[pf.n++] = line_sets[a][r], lines += line_sets[a][r];
            const int32_t ticks = tick_sets[b];
            brisk_attn_pf_pace(&pf, ticks);
            const int32_t run = ticks ? ticks : (int32_t)lines;
            for (int32_t k = 1; k <= run; k++) {
                brisk_attn_pf_next(&pf);
                int64_t issued = pf.l;
                for (int r = 0; r < pf.r; r++) issued += pf.lines[r];
                const int64_t lo = ticks ? k * lines / ticks : k, hi = ticks ? (k * lines + ticks - 1) / ticks + 1 : k;
                bad += issued < BRISK_MIN(lo, lines) || issued > BRISK_MIN(hi, lines);
            }
            bad += pf.r != pf.n || pf.l != 0 || pf.ticks != run || brisk_attn_pf_reset(&pf) != run;
        }
    CHECKF(bad == 0, "prefetch queue pace: %d violations", bad);
    printf("attention prefetch queue: paced lines spread evenly and drained within the tile\n");
}

/* BRISK_ISA=name in a child (read once per process): the named table when
 * this CPU runs it, with the packed GEMM only for avx512, avx2-vnni, avx2, neon-dotprod and neon-i8mm; a table
 * this build or CPU lacks, or an unknown name, is refused by brisk_isa_check
 * with the tables usable here. want: 0 = accepted, else the status. */
static int isa_child(const char *name, const char **isa_out) {
    int fds[2];
    if (pipe(fds) != 0) return -100;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        setenv("BRISK_ISA", name, 1);
        brisk_error err = {0};
        const brisk_status st = brisk_isa_check(&err);
        const brisk_kernels *k = brisk_kernels_best();
        const brisk_gemm_kernels *g = brisk_gemm_best();
        char msg[600];
        int n = snprintf(msg, sizeof msg, "%s|%d|%s", k->isa, g != NULL, err.msg);
        if (write(fds[1], msg, (size_t)n) != n) _exit(100);
        _exit(st == BRISK_OK ? 0 : (-st) & 0x7f);
    }
    close(fds[1]);
    static char buf[600];
    ssize_t r = read(fds[0], buf, sizeof buf - 1);
    buf[r > 0 ? r : 0] = '\0';
    close(fds[0]);
    int status = 0;
    if (pid <= 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -101;
    *isa_out = buf;
    return WEXITSTATUS(status);
}

/* Every child forks before this process reads the CPU table; the answers
 * are checked afterwards against the tables this CPU runs. */
static void test_isa_env(void) {
    static const char *const names[] = {"ref", "avx2", "avx512", "neon", "neon-dotprod", "neon-i8mm", "avx2-vnni", "bogus"};
    enum { N = sizeof names / sizeof names[0] };
    int rc[N];
    char got[N][600];
    for (int i = 0; i < N; i++) {
        const char *g = NULL;
        rc[i] = isa_child(names[i], &g);
        snprintf(got[i], sizeof got[i], "%s", g ? g : "");
    }
    const brisk_kernels *all[8];
    const int n_all = brisk_kernels_all(all, 8);
    for (int i = 0; i < N; i++) {
        bool usable = false;
        for (int j = 0; j < n_all && j < 8; j++) usable = usable || !strcmp(all[j]->isa, names[i]);
#if defined(__x86_64__)
        const bool built = !strcmp(names[i], "ref") || !strncmp(names[i], "avx2", 4) || !strcmp(names[i], "avx512");
#elif defined(__aarch64__)
        const bool built = !strcmp(names[i], "ref") || !strncmp(names[i], "neon", 4);
#else
        const bool built = !strcmp(names[i], "ref");
#endif
        char want[64];
        snprintf(want, sizeof want, "%s|", names[i]);
        if (usable) {
            CHECKF(rc[i] == 0 && !strncmp(got[i], want, strlen(want)), "BRISK_ISA=%s: rc %d, got '%s'", names[i], rc[i], got[i]);
            /* the packed GEMM goes with avx512, avx2-vnni, avx2, neon-dotprod and neon-i8mm (its own table each),
             * with no other */
            const bool packs = !strcmp(names[i], "avx512") || !strncmp(names[i], "avx2", 4) || !strcmp(names[i], "neon-dotprod") ||
                               !strcmp(names[i], "neon-i8mm");
            CHECKF(!!strstr(got[i], "|1|") == packs, "BRISK_ISA=%s: packed GEMM %s", names[i], packs ? "missing" : "kept");
        } else if (built)
            CHECKF(rc[i] == (-BRISK_ERR_UNSUPPORTED & 0x7f) && strstr(got[i], "this CPU cannot run it"), "BRISK_ISA=%s: rc %d, '%s'",
                   names[i], rc[i], got[i]);
        else if (!strcmp(names[i], "bogus"))
            CHECKF(rc[i] == (-BRISK_ERR_INVALID_ARG & 0x7f) && strstr(got[i], "unknown kernel table") && strstr(got[i], "usable here: ref"),
                   "BRISK_ISA=bogus: rc %d, '%s'", rc[i], got[i]);
        else
            CHECKF(rc[i] == (-BRISK_ERR_UNSUPPORTED & 0x7f) && strstr(got[i], "this build has no"), "BRISK_ISA=%s: rc %d, '%s'", names[i],
                   rc[i], got[i]);
    }
}

/* A copy of n bytes placed flush against an inaccessible page: after its end
 * (at_start false) or before its start (at_start true). A kernel that reads
 * past either end of its buffer faults, with or without a sanitizer. The
 * packed GEMM files are built without ASan (CMakeLists.txt: under ASan they
 * took most of the sanitized model tests' time), so this is their bounds
 * check, in every build. Software prefetches past the end do not fault. */
typedef struct fenced {
    uint8_t *base, *p;
    size_t len;
} fenced;

static bool fence_copy(fenced *f, const void *src, size_t n, bool at_start) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (n + pg - 1) / pg * pg;
    *f = (fenced){.len = body + 2 * pg};
    void *m = mmap(NULL, f->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return false;
    f->base = m;
    if (body && mprotect(f->base + pg, body, PROT_READ | PROT_WRITE) != 0) {
        munmap(m, f->len);
        f->base = NULL;
        return false;
    }
    f->p = at_start ? f->base + pg : f->base + pg + body - n;
    if (n) memcpy(f->p, src, n);
    return true;
}

static void fence_free(fenced *f) {
    if (f->base) munmap(f->base, f->len);
    f->base = NULL;
}

/* The packed GEMM: 16 rows packed, n_tok activation rows, every output
 * bit-identical to ref's vec_dot on the canonical rows; act_sums against the
 * portable version; outputs beyond the tile left alone (NaN sentinels). */
static void test_packed_gemm(const brisk_gemm_kernels *g) {
    const brisk_kernels *ref = brisk_kernels_ref();
    /* the table's own activation quantizers: byte-identical to ref's, specials included */
    for (uint32_t at = 0; at < BRISK_Q_TYPE_LIMIT; at++) {
        if (!g->quantize_act[at]) continue;
        for (size_t ni = 0; ni < BRISK_ARRAY_LEN(block_counts); ni++) {
            const int64_t be = brisk_qtype_get(at)->block_elems, n = block_counts[ni] * (be > 32 ? be : 32);   /* Q8_K: 256 */
            size_t ab = 0;
            brisk_qtype_row_bytes(at, n, &ab);
            float *x = malloc(sizeof(float) * (size_t)n);
            uint8_t *q1 = malloc(ab), *q2 = malloc(ab);
            if (!x || !q1 || !q2) { CHECK(!"out of memory"); return; }
            for (int kind = 0; kind < 5; kind++) {
                fill_floats(x, n, kind % 3);
                if (kind == 4) {   /* finite edge blocks: all zeros (first 256), then magnitude ties of both signs */
                    for (int64_t j = 0; j < n && j < 256; j++) x[j] = 0.0f;
                    if (n >= 512) x[260] = -9.0f, x[300] = 9.0f, x[400] = -9.0f;
                    if (n >= 768) x[600] = 9.0f, x[610] = -9.0f;
                }
                if (kind == 3) {   /* special blocks: zeros, a NaN, an inf, a huge value, a -0 */
                    for (int j = 0; j < 32; j++) x[j] = 0.0f;
                    if (n >= 64) x[40] = NAN;
                    if (n >= 96) x[70] = INFINITY;
                    if (n >= 128) x[100] = 3.0e38f;
                    if (n >= 160) x[130] = -0.0f;
                    if (n >= 160) {   /* F16 edges: subnormal, the overflow tie, the smallest subnormal and half of it */
                        x[131] = 1e-6f, x[132] = 65520.0f, x[133] = 0x1p-24f, x[134] = -0x1p-25f, x[135] = 0x1.8p-25f;
                    }
                }
                ref->quantize_act[at](x, q1, n);
                g->quantize_act[at](x, q2, n);
                CHECKF(memcmp(q1, q2, ab) == 0, "%s quantize %s n=%lld kind %d differs from ref", g->isa, brisk_qtype_name(at),
                       (long long)n, kind);
            }
            free(x); free(q1); free(q2);
        }
    }
    /* GEMMs over canonical rows: bit-identical to the best table's vec_dot */
    const brisk_kernels *best = brisk_kernels_best();
    for (uint32_t wt = 0; wt < BRISK_Q_TYPE_LIMIT; wt++) {
        if (!g->gemm_rows[wt]) continue;
        const uint32_t at = brisk_qtype_get(wt)->act_type;
        static const int64_t ns[] = {32, 64, 96, 224, 1024, 2048 + 32};
        for (size_t ni = 0; ni < BRISK_ARRAY_LEN(ns); ni++) {
            const int64_t n = ns[ni], R = BRISK_GEMM_ROWS, T = 9, os = R + 1;
            size_t rb = 0, ab = 0;
            brisk_qtype_row_bytes(wt, n, &rb);
            brisk_qtype_row_bytes(at, n, &ab);
            const int64_t slen = brisk_act_sums_len(n);
            uint8_t *w = malloc(rb * R), *a = malloc(ab * T);
            int32_t *side = malloc(sizeof(int32_t) * (size_t)(slen * T));
            float *x = malloc(sizeof(float) * (size_t)n), *out = malloc(sizeof(float) * (size_t)(os * T));
            if (!w || !a || !side || !x || !out) { CHECK(!"out of memory"); return; }
            for (int r = 0; r < R; r++) fill_random_blocks(wt, w + (size_t)r * rb, n);
            for (int64_t t = 0; t < T; t++) {
                fill_floats(x, n, (int)(t % 3));
                best->quantize_act[at](x, a + (size_t)t * ab, n);
                g->act_sums[at](a + (size_t)t * ab, n, side + t * slen);
            }
            for (int32_t nt = 1; nt <= T; nt += 2) {
                for (int64_t i = 0; i < os * T; i++) out[i] = NAN;
                g->gemm_rows[wt](n, w, rb, (const float *)side, (size_t)slen, nt, out, os);
                int bad = 0;
                for (int64_t t = 0; t < T; t++)
                    for (int64_t r = 0; r < os; r++) {
                        const float got = out[t * os + r];
                        if (t >= nt || r >= R) { bad += !isnan(got); continue; }
                        float want;
                        best->vec_dot[wt](n, &want, w + (size_t)r * rb, a + (size_t)t * ab);
                        bad += memcmp(&want, &got, sizeof want) != 0;
                    }
                CHECKF(bad == 0, "%s gemm_rows %s n=%lld n_tok=%d: %d outputs differ from %s vec_dot", g->isa, brisk_qtype_name(wt),
                       (long long)n, nt, bad, best->isa);
            }
            free(w); free(a); free(side); free(x); free(out);
        }
    }
    static const brisk_qtype types[] = {BRISK_Q_Q4_0, BRISK_Q_Q4_1, BRISK_Q_Q5_0, BRISK_Q_Q5_1, BRISK_Q_Q8_0,
                                        BRISK_Q_Q2_K, BRISK_Q_Q3_K, BRISK_Q_Q4_K, BRISK_Q_Q5_K, BRISK_Q_Q6_K, BRISK_Q_F16,
                                        BRISK_Q_IQ4_NL, BRISK_Q_IQ4_XS, BRISK_Q_MXFP4};
    static const int64_t nbs[] = {1, 2, 3, 7, 16, 33, 257};   /* weight blocks */
    static const int32_t ntoks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 17};
    const int R = BRISK_GEMM_ROWS;
    for (size_t ti = 0; ti < BRISK_ARRAY_LEN(types); ti++) {
        const brisk_qtype wt = types[ti];
        if (!g->gemm[wt]) continue;
        CHECK(brisk_pack_supported(wt));
        const uint32_t at = brisk_qtype_get(wt)->act_type;
        int shapes = 0;   /* printed, so a type that silently stops being tested shows */
        for (size_t ni = 0; ni < BRISK_ARRAY_LEN(nbs); ni++) {
            const int64_t n = nbs[ni] * (wt == BRISK_Q_F16 ? 16 : brisk_qtype_get(wt)->block_elems);   /* F16: 16-column chunks */
            size_t rb = 0, ab = 0;
            brisk_qtype_row_bytes(wt, n, &rb);
            brisk_qtype_row_bytes(at, n, &ab);
            const int32_t T = 17;
            const int64_t slen = brisk_act_sums_len(n), ostride = R + 3;
            uint8_t *w = malloc(rb * R), *pk = malloc(brisk_pack_group_bytes(wt, n)), *a = malloc(ab * T);
            int32_t *sums = malloc(sizeof(int32_t) * (size_t)slen * T), *sref = malloc(sizeof(int32_t) * (size_t)slen);
            float *x = malloc(sizeof(float) * (size_t)n), *out = malloc(sizeof(float) * (size_t)ostride * T);
            if (!w || !pk || !a || !sums || !sref || !x || !out) {
                CHECK(!"out of memory");
                return;
            }
            for (int r = 0; r < R; r++) fill_random_blocks(wt, w + (size_t)r * rb, n);
            if (wt == BRISK_Q_MXFP4)   /* some E8M0 scales 0, 1 (the subnormal halves 2^-128, 2^-127) and 2 */
                for (int r = 0; r < R; r++)
                    for (int64_t b = r % 7; b < n / 32; b += 7) w[(size_t)r * rb + (size_t)b * sizeof(brisk_block_mxfp4)] = (uint8_t)((r + b) % 3);
            for (int32_t t = 0; t < T; t++) {
                fill_floats(x, n, t % 3);
                ref->quantize_act[at](x, a + (size_t)t * ab, n);
                if (!g->act_sums[at]) continue;
                g->act_sums[at](a + (size_t)t * ab, n, sums + (size_t)t * slen);
                if (at == BRISK_Q_F16) {   /* F16 activations: the values widened to F32 */
                    const uint16_t *h = (const uint16_t *)(a + (size_t)t * ab);
                    int diff = 0;
                    for (int64_t i = 0; i < n; i++) {
                        const float f = brisk_fp16_to_fp32(h[i]);
                        diff += memcmp(&f, (const float *)(sums + (size_t)t * slen) + i, sizeof f) != 0;
                    }
                    CHECKF(diff == 0, "%s act_sums F16 n=%lld: %d values differ", g->isa, (long long)n, diff);
                    continue;
                }
                brisk_act_sums_q8_0_ref(a + (size_t)t * ab, n, sref);
                CHECKF(memcmp(sref, sums + (size_t)t * slen, sizeof(int32_t) * (size_t)(n / 32 * 10)) == 0, "%s act_sums n=%lld differ",
                       g->isa, (long long)n);
            }
            brisk_pack_rows(wt, pk, w, rb, n);
            for (size_t k = 0; k < BRISK_ARRAY_LEN(ntoks); k++) {
                const int32_t nt = ntoks[k];
                for (int64_t i = 0; i < ostride * T; i++) out[i] = NAN;
                g->gemm[wt](n, pk, a, ab, sums, (size_t)slen, nt, out, ostride);
                int bad = 0;
                for (int32_t t = 0; t < T; t++)
                    for (int64_t r = 0; r < ostride; r++) {
                        const float got = out[t * ostride + r];
                        if (t >= nt || r >= R) {
                            bad += !isnan(got);
                            continue;
                        }
                        float want;
                        ref->vec_dot[wt](n, &want, w + (size_t)r * rb, a + (size_t)t * ab);
                        bad += memcmp(&want, &got, sizeof want) != 0;
                    }
                CHECKF(bad == 0, "%s gemm %s n=%lld n_tok=%d: %d outputs differ from ref (or were written outside the tile)",
                       g->isa, brisk_qtype_name(wt), (long long)n, nt, bad);
                /* again from fenced copies of exactly what the call may read (the packed
                 * group, nt activation rows, nt rows of sums), flush against a page it
                 * cannot read at the end, then at the start: the same outputs, no fault */
                for (int side = 0; side < 2; side++) {
                    fenced fw = {0}, fa = {0}, fs = {0};
                    float *o2 = malloc(sizeof(float) * (size_t)ostride * (size_t)nt);
                    const bool ready = o2 && fence_copy(&fw, pk, brisk_pack_group_bytes(wt, n), side) &&
                                       fence_copy(&fa, a, ab * (size_t)nt, side) &&
                                       fence_copy(&fs, sums, sizeof(int32_t) * (size_t)slen * (size_t)nt, side);
                    CHECKF(ready, "%s gemm %s: cannot allocate the fenced buffers", g->isa, brisk_qtype_name(wt));
                    if (ready) {
                        g->gemm[wt](n, fw.p, fa.p, ab, (const int32_t *)fs.p, (size_t)slen, nt, o2, ostride);
                        int diff = 0;
                        for (int32_t t = 0; t < nt; t++)
                            for (int r = 0; r < R; r++) diff += memcmp(&o2[t * ostride + r], &out[t * ostride + r], sizeof(float)) != 0;
                        CHECKF(diff == 0, "%s gemm %s n=%lld n_tok=%d, fenced at the %s: %d outputs differ", g->isa,
                               brisk_qtype_name(wt), (long long)n, nt, side ? "start" : "end", diff);
                        bad += diff;
                    }
                    free(o2);
                    fence_free(&fw), fence_free(&fa), fence_free(&fs);
                }
                shapes += bad == 0;
            }
            free(w); free(pk); free(a); free(sums); free(sref); free(x); free(out);
        }
        printf("packed gemm %s %s: %d shapes bit-identical to ref\n", g->isa, brisk_qtype_name(wt), shapes);
    }
}

/* brisk_expf is glibc's x86-64 FMA expf bit for bit (asserted where that is
 * the libm in use; elsewhere the differences are counted and printed), and
 * every table has exp_sub and swiglu, and each (and the GEMM table's vector
 * ones) gives brisk_exp_sub's and brisk_swiglu's bits. */
static void test_expf(const brisk_kernels *const *tables, int ntables) {
    union { float f; uint32_t u; } v;
    long checked = 0, differ = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += 97) {   /* every 97th float: all exponents, both signs */
        v.u = (uint32_t)u;
        const float e = expf(v.f), b = brisk_expf(v.f);
        checked++;
        differ += memcmp(&e, &b, sizeof e) != 0 && !(isnan(e) && isnan(b));
    }
    static const float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.0f, -88.0f, 0x1.62e42ep+6f, 0x1.62e430p+6f,
                                 -0x1.9fe368p+6f, -0x1.9fe36ap+6f, -0x1.9d1d9ep+6f, -0x1.9d1da0p+6f, -0x1.9d1d9cp+6f, -87.33655f, 1e-30f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        const float e = expf(edge[i]), b = brisk_expf(edge[i]);
        checked++;
        differ += memcmp(&e, &b, sizeof e) != 0 && !(isnan(e) && isnan(b));
    }
#if defined(__x86_64__) && defined(__GLIBC__)
    if (__builtin_cpu_supports("fma")) CHECKF(differ == 0, "brisk_expf differs from libm expf on %ld of %ld floats", differ, checked);
    else printf("expf: libm is not the FMA variant here; brisk_expf differs on %ld of %ld floats\n", differ, checked);
#else
    printf("expf: brisk_expf differs from this libm's expf on %ld of %ld floats (informational)\n", differ, checked);
#endif
    enum { N = 70 };
    float x[N], want[N], got[N];
    double (*fns[9])(float *, int64_t, float);
    const char *names[9];
    int nf = 0;
    for (int t = 0; t < ntables && nf < 8; t++) {
        CHECKF(tables[t]->exp_sub && tables[t]->swiglu, "%s table lacks exp_sub or swiglu", tables[t]->isa);
        if (tables[t]->exp_sub) names[nf] = tables[t]->isa, fns[nf++] = tables[t]->exp_sub;
    }
    const brisk_gemm_kernels *g = brisk_gemm_best();
    if (g && g->exp_sub) names[nf] = g->isa, fns[nf++] = g->exp_sub;
    for (int f = 0; f < nf; f++) {
        int bad = 0;
        for (int rep = 0; rep < 400; rep++) {
            const int n = 1 + rep % N;
            const float m = rep % 5 == 0 ? -INFINITY : (float)rng_gauss() * 4.0f;
            for (int i = 0; i < n; i++) {
                const int kind = (int)(rng_uniform() * 20.0f);
                x[i] = kind == 0 ? -INFINITY : kind == 1 ? NAN : kind == 2 ? m - 100.0f : kind == 3 ? m + 89.0f : kind == 4 ? m - 103.5f
                                                                                                      : (float)rng_gauss() * 10.0f;
            }
            memcpy(want, x, sizeof(float) * (size_t)n);
            memcpy(got, x, sizeof(float) * (size_t)n);
            const double want_sum = brisk_exp_sub(want, n, m), got_sum = fns[f](got, n, m);
            for (int i = 0; i < n; i++) bad += memcmp(&want[i], &got[i], sizeof(float)) != 0 && !(isnan(want[i]) && isnan(got[i]));
            bad += memcmp(&want_sum, &got_sum, sizeof want_sum) != 0 && !(isnan(want_sum) && isnan(got_sum));
            /* the specified order: eight partial sums by i % 8, combined pairwise */
            double p[8] = {0};
            for (int i = 0; i < n; i++) p[i % 8] += (double)want[i];
            const double spec = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
            bad += memcmp(&spec, &want_sum, sizeof spec) != 0 && !(isnan(spec) && isnan(want_sum));
        }
        CHECKF(bad == 0, "%s exp_sub differs from brisk_expf (or its sum from the specified order) in %d values", names[f], bad);
    }
    /* swiglu entries against brisk_swiglu, with gates in and past the exp range */
    nf = 0;
    void (*sw[9])(float *, const float *, const float *, int64_t);
    for (int t = 0; t < ntables && nf < 8; t++)
        if (tables[t]->swiglu) names[nf] = tables[t]->isa, sw[nf++] = tables[t]->swiglu;
    if (g && g->swiglu) names[nf] = g->isa, sw[nf++] = g->swiglu;
    float u[N];
    for (int f = 0; f < nf; f++) {
        int bad = 0;
        for (int rep = 0; rep < 400; rep++) {
            const int n = 1 + rep % N;
            for (int i = 0; i < n; i++) {
                const int kind = (int)(rng_uniform() * 20.0f);
                x[i] = kind == 0 ? -90.0f : kind == 1 ? 95.0f : kind == 2 ? -105.0f : (float)rng_gauss() * 6.0f;
                u[i] = (float)rng_gauss();
            }
            brisk_swiglu(want, x, u, n);
            sw[f](got, x, u, n);
            for (int i = 0; i < n; i++) bad += memcmp(&want[i], &got[i], sizeof(float)) != 0 && !(isnan(want[i]) && isnan(got[i]));
        }
        CHECKF(bad == 0, "%s swiglu differs from brisk_swiglu in %d values", names[f], bad);
    }
}

int main(void) {
    test_force_ref();   /* first: forks before this process reads the CPU table */
    test_isa_env();     /* likewise, then reads it */
    {
        const brisk_attn_kernels *at[8];
        const int n_at = brisk_attn_all(at, 8);
        CHECK(n_at >= 1 && at[0] == brisk_attn_ref());
        for (int i = 0; i < n_at && i < 8; i++) test_attention(at[i]);
        test_attn_pf_pace();
    }
    const brisk_kernels *tables[8];
    int ntables = brisk_kernels_all(tables, 8);
    if (ntables > 8) ntables = 8;
    test_tables(tables, ntables);
    test_dot_known();
    test_quantize_act(tables, ntables);
    test_dots(tables, ntables);
    test_dot_2x2(tables, ntables);
    {
        const brisk_gemm_kernels *gt[8];
        const int n_gt = brisk_gemm_all(gt, 8);
        if (n_gt == 0) printf("packed gemm: no table on this CPU (or forced ref); skipped\n");
        for (int i = 0; i < n_gt && i < 8; i++) test_packed_gemm(gt[i]);
    }
    test_expf(tables, ntables);
    return test_finish();
}
