/* test_quant: fp16/bf16 scalar conversions against their definition,
 * hand-computed activation quantization cases, round-trip error per format,
 * buffer discipline (no writes past the row, every output written), and byte
 * parity with llama-quantize on the golden models (when shared/ has them). */
#include "gguf/gguf.h"
#include "quant/blocks.h"
#include "quant/convert.h"
#include "quant/quant.h"
#include "test.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng_next(void) {   /* xorshift64* */
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

static float bits_to_f32(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}
static uint32_t f32_to_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* ---- fp16 ----------------------------------------------------------------------- */

/* Value of half h by the IEEE definition, in double; the all-ones exponent
 * maps to 2^16 so that "rounds up past 65504" reads as "is infinity". */
static double half_value(uint16_t h, bool *special) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    *special = false;
    if (e == 0) v = ldexp(m, -24);
    else if (e == 31) { v = 65536.0; *special = m != 0; }
    else v = ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static void test_fp16_to_fp32_exhaustive(void) {
    int bad = 0, bad_round = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        bool nan;
        double want = half_value((uint16_t)h, &nan);
        float got = brisk_fp16_to_fp32((uint16_t)h);
        int e = (h >> 10) & 0x1f;
        if (e == 31) {
            if ((h & 0x3ff) ? !isnan(got) : !(isinf(got) && !!signbit(got) == !!(h & 0x8000))) bad++;
        } else if ((double)got != want || !!signbit(got) != !!(h & 0x8000)) {
            bad++;
        }
        /* fp16 -> fp32 -> fp16 is the identity, except NaNs, which stay NaNs */
        uint16_t back = brisk_fp32_to_fp16(got);
        if (e == 31 && (h & 0x3ff)) {
            if (((back >> 10) & 0x1f) != 31 || !(back & 0x3ff)) bad_round++;
        } else if (back != h) {
            bad_round++;
        }
    }
    CHECKF(bad == 0, "%d halfs decode wrong", bad);
    CHECKF(bad_round == 0, "%d halfs do not round-trip", bad_round);
}

/* h must be the nearest half to f, ties to even mantissa; infinity stands for
 * 65536 (so |f| >= 65520 gives inf), NaN gives a NaN. */
static bool fp16_rounding_ok(float f, uint16_t h) {
    bool special;
    if (isnan(f)) return ((h >> 10) & 0x1f) == 31 && (h & 0x3ff);
    if (!!signbit(f) != !!(h & 0x8000)) return false;
    uint16_t mag = h & 0x7fff;
    if (mag > 0x7c00) return false;
    double af = fabs((double)f);
    if (isinf(f)) return mag == 0x7c00;
    double v = fabs(half_value(mag, &special));
    double err = fabs(af - v);
    if (mag < 0x7c00 && err > fabs(af - fabs(half_value((uint16_t)(mag + 1), &special)))) return false;
    if (mag > 0 && err > fabs(af - fabs(half_value((uint16_t)(mag - 1), &special)))) return false;
    /* on a tie the even mantissa wins */
    if (mag < 0x7c00 && err == fabs(af - fabs(half_value((uint16_t)(mag + 1), &special))) && (mag & 1)) return false;
    if (mag > 0 && err == fabs(af - fabs(half_value((uint16_t)(mag - 1), &special))) && (mag & 1)) return false;
    return true;
}

static void test_fp32_to_fp16(void) {
    static const struct { float f; uint16_t h; } cases[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000},
        {65504.0f, 0x7bff}, {65519.99f, 0x7bff}, {65520.0f, 0x7c00}, {-65520.0f, 0xfc00},
        {1e10f, 0x7c00}, {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
        {0x1p-14f, 0x0400}, {0x1.ff8p-15f, 0x03ff},               /* smallest normal, largest subnormal */
        {0x1p-24f, 0x0001}, {0x1p-25f, 0x0000}, {0x1.000002p-25f, 0x0001},  /* tie to 0 (even) */
        {0x3p-25f, 0x0002},                                         /* 1.5 units: tie to 2 */
        {0x5p-25f, 0x0002},                                         /* 2.5 units: tie to 2 */
        {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x3p-11f, 0x3c02},       /* normal ties */
        {0x1.002002p+0f, 0x3c01},                                   /* just above a tie */
        {0x1p-30f, 0x0000}, {-0x1p-30f, 0x8000},
    };
    for (size_t i = 0; i < BRISK_ARRAY_LEN(cases); i++) {
        uint16_t h = brisk_fp32_to_fp16(cases[i].f);
        CHECKF(h == cases[i].h, "fp16(%a) = 0x%04x, want 0x%04x", (double)cases[i].f, h, cases[i].h);
    }
    uint16_t hn = brisk_fp32_to_fp16(NAN);
    CHECK(((hn >> 10) & 0x1f) == 31 && (hn & 0x3ff));

    /* every exponent of interest, random mantissas, plus exact midpoints */
    int bad = 0;
    const int iters = test_quick() ? 200000 : 4000000;
    for (int i = 0; i < iters; i++) {
        uint32_t bits = (uint32_t)rng_next();
        if (i & 1) bits = (bits & 0x807fffffu) | ((uint32_t)(96 + rng_next() % 50) << 23);  /* 2^-31 .. 2^18 */
        if ((i & 7) == 2) bits &= ~0xfffu;   /* many exact ties */
        float f = bits_to_f32(bits);
        uint16_t h = brisk_fp32_to_fp16(f);
        if (h != brisk_fp32_to_fp16_any(f)) bad++;   /* the inline fast path and the general one agree */
        if (!fp16_rounding_ok(f, h)) {
            if (bad++ < 5) fprintf(stderr, "fp16(%a) = 0x%04x\n", (double)f, h);
        }
    }
    CHECKF(bad == 0, "%d fp32->fp16 roundings off", bad);
}

/* ---- bf16 ------------------------------------------------------------------------ */

static double bf16_value(uint16_t h) {
    uint16_t mag = h & 0x7fff;
    double v = mag == 0x7f80 ? ldexp(1.0, 128) : (double)brisk_bf16_to_fp32(mag);
    return (h & 0x8000) ? -v : v;
}

static bool bf16_rounding_ok(float f, uint16_t h) {
    if (isnan(f)) return (h & 0x7f80) == 0x7f80 && (h & 0x7f) && (h & 0x40);
    if (!!signbit(f) != !!(h & 0x8000)) return false;
    uint16_t mag = h & 0x7fff;
    if (mag > 0x7f80) return false;
    if (isinf(f)) return mag == 0x7f80;
    double af = fabs((double)f), err = fabs(af - fabs(bf16_value(mag)));
    if (mag < 0x7f80) {
        double up = fabs(af - fabs(bf16_value((uint16_t)(mag + 1))));
        if (err > up || (err == up && (mag & 1))) return false;
    }
    if (mag > 0) {
        double down = fabs(af - fabs(bf16_value((uint16_t)(mag - 1))));
        if (err > down || (err == down && (mag & 1))) return false;
    }
    return true;
}

static void test_bf16(void) {
    int bad = 0, bad_round = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = brisk_bf16_to_fp32((uint16_t)h);
        if (f32_to_bits(f) != h << 16) bad++;   /* bf16 is the top half of fp32 */
        uint16_t back = brisk_fp32_to_bf16(f);
        bool is_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (is_nan ? !isnan(brisk_bf16_to_fp32(back)) : back != h) bad_round++;
    }
    CHECKF(bad == 0, "%d bf16 decode wrong", bad);
    CHECKF(bad_round == 0, "%d bf16 do not round-trip", bad_round);

    CHECK(brisk_fp32_to_bf16(1.0f) == 0x3f80);
    CHECK(brisk_fp32_to_bf16(bits_to_f32(0x3f808000u)) == 0x3f80);   /* tie, even stays */
    CHECK(brisk_fp32_to_bf16(bits_to_f32(0x3f818000u)) == 0x3f82);   /* tie, odd rounds up */
    CHECK(brisk_fp32_to_bf16(bits_to_f32(0x3f808001u)) == 0x3f81);
    CHECK(brisk_fp32_to_bf16(bits_to_f32(0x7f7fffffu)) == 0x7f80);   /* FLT_MAX rounds to inf */
    CHECK(brisk_fp32_to_bf16(bits_to_f32(0x00018000u)) == 0x0002);   /* subnormals are kept */
    CHECK(brisk_fp32_to_bf16(bits_to_f32(0x7f800001u)) == 0x7fc0);   /* signalling NaN made quiet */

    int bad_r = 0;
    const int iters = test_quick() ? 200000 : 4000000;
    for (int i = 0; i < iters; i++) {
        uint32_t bits = (uint32_t)rng_next();
        if ((i & 3) == 1) bits &= ~0x7fffu;
        float f = bits_to_f32(bits);
        if (!bf16_rounding_ok(f, brisk_fp32_to_bf16(f)) && bad_r++ < 5)
            fprintf(stderr, "bf16(%a) = 0x%04x\n", (double)f, brisk_fp32_to_bf16(f));
    }
    CHECKF(bad_r == 0, "%d fp32->bf16 roundings off", bad_r);
}

/* ---- hand-computed activation quantization ----------------------------------------- */

static void test_q8_0_known(void) {
    float x[32];
    brisk_block_q8_0 b;
    brisk_block_q8_1 b1;

    /* amax 127 makes d = 1 exactly, so q is the rounding of x itself:
     * the reference rounds half away from zero, ggml's x86 path to even. */
    static const float in[8] = {127.0f, -127.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 2.49f};
    static const int8_t want_ref[8] = {127, -127, 1, -1, 2, 3, -3, 2};
    static const int8_t want_x86[8] = {127, -127, 0, 0, 2, 2, -2, 2};
    for (int j = 0; j < 32; j++) x[j] = j < 8 ? in[j] : (float)(j - 20);
    brisk_q8_0_quantize(x, &b, 32);
    CHECK(b.d == 0x3c00);
    int ok = 1;
    for (int j = 0; j < 8; j++) ok &= b.qs[j] == want_ref[j];
    for (int j = 8; j < 32; j++) ok &= b.qs[j] == j - 20;
    CHECK(ok);
    brisk_q8_0_quantize_x86(x, &b, 32);
    CHECK(b.d == 0x3c00);
    ok = 1;
    for (int j = 0; j < 8; j++) ok &= b.qs[j] == want_x86[j];
    CHECK(ok);

    /* Q8_1 adds s = d * sum(q) in fp16 */
    brisk_q8_1_quantize(x, &b1, 32);
    int sum = 0;
    for (int j = 0; j < 32; j++) sum += b1.qs[j];
    CHECK(b1.d == 0x3c00 && sum == 127 - 127 + 1 - 1 + 2 + 3 - 3 + 2 + (-12 + 11) * 24 / 2);
    CHECK(brisk_fp16_to_fp32(b1.s) == (float)sum);

    /* x = j - 16: amax 16, d = 16/127 -> fp16 0x3008 (1032 * 2^-13) */
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    brisk_q8_0_quantize(x, &b, 32);
    CHECK(b.d == 0x3008);
    CHECK(b.qs[0] == -127 && b.qs[16] == 0 && b.qs[17] == 8 && b.qs[18] == 16 && b.qs[31] == 119);

    /* all zero: d = 0, q = 0 */
    memset(x, 0, sizeof x);
    memset(&b, 0x55, sizeof b);
    brisk_q8_0_quantize(x, &b, 32);
    ok = b.d == 0;
    for (int j = 0; j < 32; j++) ok &= b.qs[j] == 0;
    CHECK(ok);
}

static void test_q8_k_known(void) {
    float x[256];
    brisk_block_q8_k b;

    /* x = (j % 16) - 8: the first largest magnitude is -8, iscale = -127/-8 = 15.875,
     * q = round-half-even(15.875 x); 63.5 -> 64 and -63.5 -> -64 */
    static const int8_t want[16] = {-127, -111, -95, -79, -64, -48, -32, -16, 0, 16, 32, 48, 64, 79, 95, 111};
    for (int j = 0; j < 256; j++) x[j] = (float)(j % 16 - 8);
    brisk_q8_k_quantize(x, &b, 256);
    CHECK(b.d == 1.0f / 15.875f);
    int ok = 1;
    for (int j = 0; j < 256; j++) ok &= b.qs[j] == want[j % 16];
    for (int g = 0; g < 16; g++) ok &= b.bsums[g] == -127;
    CHECK(ok);

    /* max -63.5 gives iscale exactly 2: ties at 2.5 and -2.5 go to even */
    for (int j = 0; j < 256; j++) x[j] = 0.0f;
    x[0] = -63.5f;
    x[1] = 1.25f;
    x[2] = -1.25f;
    x[3] = 1.75f;
    x[4] = 63.5f;   /* same magnitude later: the first one sets the sign */
    brisk_q8_k_quantize(x, &b, 256);
    CHECK(b.d == 0.5f);
    CHECK(b.qs[0] == -127 && b.qs[1] == 2 && b.qs[2] == -2 && b.qs[3] == 4 && b.qs[4] == 127);
    CHECK(b.bsums[0] == -127 + 2 - 2 + 4 + 127 && b.bsums[1] == 0);

    /* a positive maximum flips the sign: d < 0, q = -127 at the max */
    for (int j = 0; j < 256; j++) x[j] = 0.0f;
    x[7] = 8.0f;
    x[8] = -4.0f;
    brisk_q8_k_quantize(x, &b, 256);
    CHECK(b.d == 1.0f / (-127.0f / 8.0f));
    CHECK(b.qs[7] == -127 && b.qs[8] == 64 && b.bsums[0] == -63);

    /* all zero: everything zero, bsums included */
    memset(x, 0, sizeof x);
    memset(&b, 0x55, sizeof b);
    brisk_q8_k_quantize(x, &b, 256);
    uint8_t zero[sizeof b];
    memset(zero, 0, sizeof zero);
    CHECK(memcmp(&b, zero, sizeof b) == 0);
}

static void test_q4_0_known(void) {
    /* max -8 makes d = 1 and q = trunc(x + 8.5) capped at 15 */
    float x[32] = {-8.0f, 0.0f, 7.0f, 0.49f, 0.5f, -0.5f, 7.6f, -7.6f};
    brisk_block_q4_0 b;
    brisk_q4_0_quantize(x, &b, 32);
    CHECK(b.d == 0x3c00);
    CHECK((b.qs[0] & 15) == 0 && (b.qs[1] & 15) == 8 && (b.qs[2] & 15) == 15 && (b.qs[3] & 15) == 8);
    CHECK((b.qs[4] & 15) == 9 && (b.qs[5] & 15) == 8 && (b.qs[6] & 15) == 15 && (b.qs[7] & 15) == 0);
    CHECK((b.qs[0] >> 4) == 8);   /* x[16] = 0 */
    float y[32];
    brisk_q4_0_dequantize(&b, y, 32);
    CHECK(y[0] == -8.0f && y[1] == 0.0f && y[2] == 7.0f && y[4] == 1.0f);
}

/* The lookup-table formats on values their grids hold exactly. */
static void test_lut4_known(void) {
    /* MXFP4: amax 6 gives e = floor(log2 6) - 2 + 127 = 127 (scale 1: E2M1's
     * own values); ties go to the first table entry (+0 before -0.5) */
    float x[32] = {6.0f, -6.0f, 0.5f, 1.0f, 3.0f, -0.25f, 2.5f, -1.5f};
    brisk_block_mxfp4 m;
    brisk_mxfp4_quantize(x, &m, 32);
    CHECK(m.e == 127);
    CHECK((m.qs[0] & 15) == 7 && (m.qs[1] & 15) == 15 && (m.qs[2] & 15) == 1 && (m.qs[3] & 15) == 2);
    CHECK((m.qs[4] & 15) == 5 && (m.qs[5] & 15) == 0 && (m.qs[6] & 15) == 4 && (m.qs[7] & 15) == 11);
    float y[256];
    brisk_mxfp4_dequantize(&m, y, 32);
    CHECK(y[0] == 6.0f && y[1] == -6.0f && y[2] == 0.5f && y[5] == 0.0f && y[6] == 2.0f && y[16] == 0.0f);
    /* a block of zeros: e = 0 */
    memset(x, 0, sizeof x);
    brisk_mxfp4_quantize(x, &m, 32);
    CHECK(m.e == 0 && m.qs[0] == 0);
    /* 2^-130 wraps the exponent as ggml's x86 build does: -130 - 2 + 127 = -5 -> 251 */
    x[3] = 0x1p-130f;
    brisk_mxfp4_quantize(x, &m, 32);
    CHECK(m.e == 251);
    CHECK(brisk_e8m0_half(0) == 0x1p-128f && brisk_e8m0_half(1) == 0x1p-127f && brisk_e8m0_half(2) == 0x1p-126f &&
          brisk_e8m0_half(255) == 0x1p127f);

    /* IQ4_NL: a block of grid values (the largest magnitude -127) comes back
     * exactly, with d = 1 and each code its own index */
    for (int j = 0; j < 32; j++) x[j] = brisk_iq4nl_values[j % 16];
    brisk_block_iq4_nl b;
    brisk_iq4_nl_quantize(x, &b, 32);
    CHECK(b.d == 0x3c00);
    for (int j = 0; j < 16; j++) CHECKF((b.qs[j] & 15) == j && (b.qs[j] >> 4) == j, "iq4_nl code %d: %#x", j, b.qs[j]);
    brisk_iq4_nl_dequantize(&b, y, 32);
    CHECK(memcmp(x, y, sizeof x) == 0);

    /* IQ4_XS: an all-zero block stores d = -0 (fp16 0x8000) as ggml does;
     * 8 groups of the grid scaled by 1..8 come back exactly (d = -8/32, group
     * g's 6-bit scale -4 (g + 1)) */
    float z[256] = {0};
    brisk_block_iq4_xs xs;
    brisk_iq4_xs_quantize(z, &xs, 256);
    CHECK(xs.d == 0x8000 && xs.scales_h == 0xaaaa && xs.scales_l[0] == 0);   /* every group scale 32 - 32 = 0 */
    for (int j = 0; j < 128; j++) CHECK(xs.qs[j] == 0x88);
    brisk_iq4_xs_dequantize(&xs, y, 256);
    for (int j = 0; j < 256; j++) CHECK(y[j] == 0.0f);
    for (int g = 0; g < 8; g++)
        for (int j = 0; j < 32; j++) z[32 * g + j] = (float)(g + 1) * brisk_iq4nl_values[j % 16];
    brisk_iq4_xs_quantize(z, &xs, 256);
    brisk_iq4_xs_dequantize(&xs, y, 256);
    CHECK(memcmp(z, y, sizeof z) == 0);
}

/* ---- round trips ------------------------------------------------------------------ */

typedef struct nmse_limit {
    brisk_qtype type;
    double gauss;    /* NMSE limit on N(0,1) data */
    double skewed;   /* ... on data with an offset and outliers */
} nmse_limit;

/* Limits are about 1.5x what the ggml reference algorithms measure here. */
static const nmse_limit limits[] = {
    {BRISK_Q_F32, 0.0, 0.0},         {BRISK_Q_F16, 1e-7, 1e-7},      {BRISK_Q_BF16, 6e-6, 6e-6},
    {BRISK_Q_Q4_0, 1.1e-2, 3.8e-2},  {BRISK_Q_Q4_1, 9.5e-3, 1.7e-2},
    {BRISK_Q_Q5_0, 2.8e-3, 1.1e-2},  {BRISK_Q_Q5_1, 2.2e-3, 4.0e-3},
    {BRISK_Q_Q8_0, 4.5e-5, 1.7e-4},  {BRISK_Q_Q8_1, 4.5e-5, 1.7e-4},
    {BRISK_Q_Q2_K, 1.3e-1, 1.15e-1}, {BRISK_Q_Q3_K, 3.4e-2, 5.0e-2},
    {BRISK_Q_Q4_K, 7.6e-3, 1.45e-2}, {BRISK_Q_Q5_K, 2.0e-3, 3.8e-3},
    {BRISK_Q_Q6_K, 4.7e-4, 1.5e-3},  {BRISK_Q_Q8_K, 7.0e-5, 9.0e-4},
    {BRISK_Q_IQ4_NL, 8.6e-3, 2.35e-2}, {BRISK_Q_IQ4_XS, 8.9e-3, 2.35e-2},
    {BRISK_Q_MXFP4, 1.9e-2, 4.5e-2},
};

#define GUARD 64
#define GUARD_BYTE 0xa5

static bool guard_intact(const uint8_t *p) {
    for (int i = 0; i < GUARD; i++)
        if (p[i] != GUARD_BYTE) return false;
    return true;
}

static void fill_data(float *x, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        if (kind == 0) x[i] = rng_gauss();
        else x[i] = 0.3f + 0.5f * rng_gauss() + ((rng_next() % 64) == 0 ? 8.0f * rng_gauss() : 0.0f);
    }
}

static double nmse(const float *x, const float *y, int64_t n) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i] - y[i];
        num += d * d;
        den += (double)x[i] * x[i];
    }
    return den > 0 ? num / den : num;
}

static void test_round_trip(void) {
    const int64_t n = test_quick() ? 256 * 8 : 256 * 96;
    float *x = malloc((size_t)n * sizeof *x);
    float *y = malloc((size_t)n * sizeof *y + GUARD);
    uint8_t *q = malloc((size_t)n * 4 + GUARD);
    uint8_t *q2 = malloc((size_t)n * 4);
    if (!x || !y || !q || !q2) { CHECK(!"out of memory"); return; }

    for (size_t t = 0; t < BRISK_ARRAY_LEN(limits); t++) {
        const brisk_qtype_info *info = brisk_qtype_get(limits[t].type);
        brisk_to_float_fn to_float = brisk_qtype_to_float(limits[t].type);
        brisk_from_float_fn from_float = brisk_qtype_from_float(limits[t].type);
        CHECKF(info && to_float && from_float, "type %d has no conversions", limits[t].type);
        if (!info || !to_float || !from_float) continue;
        size_t row;
        CHECK(brisk_qtype_row_bytes(limits[t].type, n, &row));
        for (int kind = 0; kind < 2; kind++) {
            fill_data(x, n, kind);
            memset(q, GUARD_BYTE, row + GUARD);
            from_float(x, q, n);
            CHECKF(guard_intact(q + row), "%s quantize wrote past the row", info->name);
            memset(q2, 0, row);
            from_float(x, q2, n);
            CHECKF(memcmp(q, q2, row) == 0, "%s quantize is not deterministic", info->name);

            for (int64_t i = 0; i < n; i++) y[i] = NAN;
            memset((uint8_t *)(y + n), GUARD_BYTE, GUARD);
            to_float(q, y, n);
            CHECKF(guard_intact((uint8_t *)(y + n)), "%s dequantize wrote past the row", info->name);
            int64_t unwritten = 0;
            for (int64_t i = 0; i < n; i++) unwritten += !isfinite(y[i]);
            CHECKF(unwritten == 0, "%s dequantize left %lld outputs unwritten", info->name, (long long)unwritten);
            double e = nmse(x, y, n);
            double lim = kind == 0 ? limits[t].gauss : limits[t].skewed;
            CHECKF(e <= lim, "%s NMSE %.3g > %.3g (data %d)", info->name, e, lim, kind);
            if (getenv("BRISK_TEST_VERBOSE")) printf("%-5s data %d NMSE %.4g\n", info->name, kind, e);
        }

        /* all-zero input dequantizes to exact zeros */
        memset(x, 0, (size_t)n * sizeof *x);
        from_float(x, q, n);
        to_float(q, y, n);
        int nonzero = 0;
        for (int64_t i = 0; i < n; i++) nonzero += y[i] != 0.0f;
        CHECKF(nonzero == 0, "%s: zero row does not come back as zeros", info->name);

        /* a single block works on its own (smallest n) */
        fill_data(x, info->block_elems, 0);
        memset(q, GUARD_BYTE, info->block_bytes + GUARD);
        from_float(x, q, info->block_elems);
        CHECKF(guard_intact(q + info->block_bytes), "%s single block overrun", info->name);
    }

    /* Round trip at formats' own grid: quantizing dequantized Q8_0 data again
     * gives back the same block (the grid points are fixed points). */
    fill_data(x, n, 0);
    brisk_q8_0_quantize(x, q, n);
    brisk_q8_0_dequantize(q, y, n);
    brisk_q8_0_quantize(y, q2, n);
    CHECK(memcmp(q, q2, (size_t)(n / 32) * sizeof(brisk_block_q8_0)) == 0);

    free(x);
    free(y);
    free(q);
    free(q2);
}

static void test_lookup(void) {
    CHECK(brisk_qtype_to_float(BRISK_Q_TYPE_LIMIT) == NULL);
    CHECK(brisk_qtype_from_float(UINT32_MAX) == NULL);
    CHECK(brisk_qtype_to_float(4) == NULL);   /* ids 4, 5 were Q4_2/Q4_3, long removed */
    CHECK(brisk_qtype_to_float(BRISK_Q_Q4_K) == brisk_q4_k_dequantize);
    CHECK(brisk_qtype_from_float(BRISK_Q_Q8_0) == brisk_q8_0_quantize);
}

/* ---- llama-quantize parity ----------------------------------------------------------- */

/* The golden models were quantized by llama-quantize from their F32 files (no
 * importance matrix), so quantizing the F32 tensors with brisk must give the
 * same bytes, tensor by tensor, for every type the files use. */
static void test_requantize_golden(void) {
    static const char *const types[] = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M",
                                        "Q4_K_M", "Q5_K_M", "Q6_K", "F16", "BF16"};
    char src_path[512], path[512];
    test_shared("golden/llama-tiny-F32.gguf", src_path, sizeof src_path);
    if (!test_exists(src_path)) {
        printf("skip llama-quantize parity: %s absent\n", src_path);
        return;
    }
    brisk_error err;
    brisk_gguf *src = NULL;
    CHECKF(brisk_gguf_open(src_path, &src, &err) == BRISK_OK, "%s", err.msg);
    if (!src) return;
    int files = 0, tensors = 0;
    for (size_t f = 0; f < BRISK_ARRAY_LEN(types) && !(test_quick() && f >= 2); f++) {
        char rel[128];
        snprintf(rel, sizeof rel, "golden/llama-tiny-%s.gguf", types[f]);
        if (!test_exists(test_shared(rel, path, sizeof path))) continue;
        brisk_gguf *q = NULL;
        CHECKF(brisk_gguf_open(path, &q, &err) == BRISK_OK, "%s", err.msg);
        if (!q) continue;
        files++;
        for (uint64_t i = 0; i < q->n_tensors; i++) {
            const brisk_gguf_tensor *t = &q->tensors[i];
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
            const brisk_gguf_tensor *s = brisk_gguf_find_tensor(src, name);
            CHECKF(s && s->type == BRISK_Q_F32 && s->nbytes % 4 == 0, "%s: %s has no F32 source", rel, name);
            brisk_from_float_fn quantize = brisk_qtype_from_float(t->type);
            CHECKF(quantize != NULL, "%s: %s has type %u", rel, name, t->type);
            if (!s || !quantize || s->type != BRISK_Q_F32) continue;
            const int64_t n = (int64_t)(s->nbytes / 4);
            size_t want;
            CHECK(brisk_qtype_row_bytes(t->type, n, &want) && want == t->nbytes);
            void *buf = malloc(t->nbytes);
            if (!buf) continue;
            quantize((const float *)s->data, buf, n);
            CHECKF(memcmp(buf, t->data, t->nbytes) == 0, "%s: %s (%s) differs from llama-quantize", rel, name,
                   brisk_qtype_name(t->type));
            tensors++;
            free(buf);
        }
        brisk_gguf_close(q);
    }
    brisk_gguf_close(src);
    printf("llama-quantize parity: %d tensors in %d files\n", tensors, files);
}

int main(void) {
    test_fp16_to_fp32_exhaustive();
    test_fp32_to_fp16();
    test_bf16();
    test_q8_0_known();
    test_q8_k_known();
    test_q4_0_known();
    test_lut4_known();
    test_lookup();
    test_round_trip();
    test_requantize_golden();
    return test_finish();
}
