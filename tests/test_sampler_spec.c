/* The speculative verifier stays lossless with the new stages: it draws from
 * the chain's final distribution, so the mask, DRY (history), XTC (its own
 * RNG) and mirostat v2 (mu moves on every accepted token) must give the same
 * token distribution under speculation as under plain sampling. For each
 * chain, two-sample chi-square tests (p > 0.01) on the first and the second
 * new token over 20,000 runs each way: plain (sample, accept, sample) and
 * speculative (two drafts from a draft distribution q far from p, so
 * acceptance and the residual path both occur; after a rejection the second
 * token is sampled plainly, as the next round would). The mutation
 * (broken_residual: resample from p on rejection) must fail (p < 1e-4).
 * Synthetic logits over 48 tokens, fixed per position. */
#include "test.h"
#include "brisk.h"
#include "sample/sample.h"
#include "spec/spec.h"

#include <math.h>

#define V 48
#define N 20000

static float L[3][V], Q[2][V];


/* equal sample sizes; bins in id order until the pooled count reaches 40 */
static double chi2_two(const int *r, const int *s) {
    double chi = 0, br = 0, bs = 0;
    int df = -1;
    for (int t = 0; t < V; t++) {
        br += r[t], bs += s[t];
        if (br + bs >= 40 || t == V - 1) {
            if (br + bs > 0) {
                chi += (br - bs) * (br - bs) / (br + bs);
                df++;
            }
            br = bs = 0;
        }
    }
    return df > 0 ? test_gamma_q(df / 2.0, chi / 2.0) : 1.0;
}

/* constraint: tokens t with t % 4 != 1 */
static void mask_fill(void *u, uint32_t *allowed, int32_t n) {
    (void)u;
    for (int32_t t = 0; t < n; t++)
        if (t % 4 != 1) allowed[t / 32] |= 1u << (t % 32);
}

static brisk_sampler *make(const brisk_sampler_params *base, uint64_t seed, bool mask) {
    brisk_sampler_params p = *base;
    p.seed = seed;
    brisk_sampler *s = NULL;
    brisk_error err = {0};
    CHECKF(brisk_sampler_init(&s, &p, V, &err) == BRISK_OK, "%s", err.msg);
    if (mask) brisk_sampler_set_mask(s, &(brisk_mask){NULL, mask_fill, NULL, NULL});
    /* a history the penalties and DRY see: ... 3 7 5 3 7 */
    static const int32_t hist[] = {3, 7, 5, 2, 3, 7, 5, 3, 7};
    for (size_t i = 0; i < sizeof hist / sizeof hist[0]; i++) brisk_sampler_accept(s, hist[i]);
    return s;
}

static void softmax(const float *l, float *q) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) mx = l[i] > mx ? l[i] : mx;   /* not fmax: aarch64 GCC 12 -O2 crashed vectorizing that reduction */
    for (int i = 0; i < V; i++) sum += exp(l[i] - mx);
    for (int i = 0; i < V; i++) q[i] = (float)(exp(l[i] - mx) / sum);
}

static void run(const char *name, const brisk_sampler_params *p, bool mask, bool broken, double *pv1, double *pv2) {
    static int h1p[V], h2p[V], h1s[V], h2s[V];
    memset(h1p, 0, sizeof h1p), memset(h2p, 0, sizeof h2p), memset(h1s, 0, sizeof h1s), memset(h2s, 0, sizeof h2s);
    for (int it = 0; it < N; it++) {
        brisk_sampler *s = make(p, 1000003ull * (uint64_t)it + 1, mask);
        const int32_t t0 = brisk_sampler_sample(s, L[0]);
        brisk_sampler_accept(s, t0);
        const int32_t t1 = brisk_sampler_sample(s, L[1]);
        h1p[t0]++, h2p[t1]++;
        brisk_sampler_free(s);
    }
    const float *rows[3] = {L[0], L[1], L[2]};
    float qs[2 * V], scratch[2 * V];
    memcpy(qs, Q[0], sizeof Q[0]);
    memcpy(qs + V, Q[1], sizeof Q[1]);
    const brisk_verify_opts vo = {.greedy = false, .broken_residual = broken};
    int accepted = 0;
    for (int it = 0; it < N; it++) {
        brisk_sampler *s = make(p, 1000003ull * (uint64_t)it + 2, mask);
        int32_t drafts[2], out[3];
        drafts[0] = brisk_sampler_draw(s, Q[0], V);
        drafts[1] = brisk_sampler_draw(s, Q[1], V);
        brisk_draft d = {.n = 2, .tokens = drafts, .q = qs, .match_len = 0};
        const int32_t m = brisk_spec_verify(s, V, rows, &d, &vo, scratch, out);
        accepted += m - 1;
        const int32_t t1 = m >= 2 ? out[1] : brisk_sampler_sample(s, L[1]);
        h1s[out[0]]++, h2s[t1]++;
        brisk_sampler_free(s);
    }
    *pv1 = chi2_two(h1p, h1s);
    *pv2 = chi2_two(h2p, h2s);
    printf("%-34s%s first token p %.4g | second p %.4g | drafts accepted %.2f\n", name, broken ? " [broken residual]" : "",
           *pv1, *pv2, accepted / (2.0 * N));
}

int main(void) {
    unsigned seed = 12345;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < V; i++) {
            seed = seed * 1103515245u + 12345u;
            L[k][i] = 4.0f * ((float)((seed >> 8) % 10000) / 10000.0f);
        }
    for (int k = 0; k < 2; k++) {   /* the draft: reversed preferences, flattened */
        float dl[V];
        for (int i = 0; i < V; i++) dl[i] = -0.5f * L[k][i];
        softmax(dl, Q[k]);
    }
    brisk_sampler_params base = brisk_sampler_default_params();
    base.top_k = 0, base.top_p = 1.0f, base.min_p = 0.0f, base.temp = 1.0f;

    struct {
        const char *name;
        brisk_sampler_params p;
        bool mask;
    } cfg[4];
    cfg[0].name = "mask + DRY + penalties", cfg[0].p = base, cfg[0].mask = true;
    cfg[0].p.dry_multiplier = 1.0f, cfg[0].p.dry_allowed_length = 1, cfg[0].p.repeat_penalty = 1.5f;
    cfg[1].name = "typical + top-n-sigma + XTC 0.5", cfg[1].p = base, cfg[1].mask = false;
    cfg[1].p.typical_p = 0.9f, cfg[1].p.top_n_sigma = 1.5f, cfg[1].p.xtc_probability = 0.5f, cfg[1].p.xtc_threshold = 0.04f;
    cfg[1].p.temp = 0.8f;
    cfg[2].name = "mirostat v2", cfg[2].p = base, cfg[2].mask = false;
    cfg[2].p.mirostat = 2, cfg[2].p.mirostat_tau = 3.5f, cfg[2].p.mirostat_eta = 1.0f;
    cfg[3].name = "mirostat v2 + mask", cfg[3].p = cfg[2].p, cfg[3].mask = true;
    for (int c = 0; c < 4; c++) {
        double p1, p2;
        run(cfg[c].name, &cfg[c].p, cfg[c].mask, false, &p1, &p2);
        CHECKF(p1 > 0.01 && p2 > 0.01, "%s: speculation changes the distribution (p %.3g, %.3g)", cfg[c].name, p1, p2);
    }
    double p1, p2;
    run(cfg[0].name, &cfg[0].p, cfg[0].mask, true, &p1, &p2);
    CHECKF(p1 < 1e-4, "the mutation is not detected (p %.3g)", p1);
    return test_finish();
}
