/* The sampler chain's API: the order (--samplers) and its errors, the stage
 * list, the logit-bias and mask stages, a caller's own stage, clone, the
 * logprobs helper, and chi-square tests that draws follow the chain's final
 * distribution for the new stages (with a mutation that must fail). */
#include "test.h"
#include "brisk.h"

#include <math.h>

#define V 256

static brisk_sampler_params base(void) {
    brisk_sampler_params p = brisk_sampler_default_params();
    p.seed = 99;
    return p;
}

static brisk_sampler *make(const brisk_sampler_params *p) {
    brisk_sampler *s = NULL;
    brisk_error err = {0};
    CHECKF(brisk_sampler_init(&s, p, V, &err) == BRISK_OK, "%s", err.msg);
    return s;
}

static void fill(float *l, unsigned seed, float scale) {
    for (int i = 0; i < V; i++) {
        seed = seed * 1103515245u + 12345u;
        l[i] = scale * ((float)((seed >> 8) % 10000) / 10000.0f - 0.5f);
    }
}

static int stage_list(const brisk_sampler *s, char *buf, size_t n) {
    buf[0] = 0;
    for (int32_t i = 0; i < brisk_sampler_n_stages(s); i++) {
        strncat(buf, brisk_sampler_stage_name(s, i), n - strlen(buf) - 1);
        if (i + 1 < brisk_sampler_n_stages(s)) strncat(buf, " ", n - strlen(buf) - 1);
    }
    return brisk_sampler_n_stages(s);
}

static void test_order(void) {
    char names[512];
    brisk_sampler_params p = base();
    brisk_sampler *s = make(&p);
    stage_list(s, names, sizeof names);
    CHECKF(!strcmp(names, "mask top_k top_p min_p temperature"), "default chain: %s", names);
    CHECK(brisk_sampler_stage_name(s, -1) == NULL && brisk_sampler_stage_name(s, 99) == NULL);
    brisk_sampler_free(s);

    p.temp = 0.0f;   /* greedy: the filters that keep the argmax are left out */
    s = make(&p);
    stage_list(s, names, sizeof names);
    CHECKF(!strcmp(names, "mask temperature"), "greedy chain: %s", names);
    brisk_sampler_free(s);

    p = base();
    p.samplers = "Temp;TOP-P;minp;typ;top_n_sigma;xtc;nucleus;penalties";
    p.typical_p = 0.9f, p.top_n_sigma = 2.0f, p.xtc_probability = 0.5f, p.repeat_penalty = 1.2f;
    s = make(&p);
    stage_list(s, names, sizeof names);
    CHECKF(!strcmp(names, "mask temperature top_p min_p typ_p top_n_sigma xtc top_p penalties"), "custom order: %s", names);
    brisk_sampler_free(s);

    brisk_error err = {0};
    p.samplers = "top_k;dryx";
    CHECK(brisk_sampler_init(&s, &p, V, &err) == BRISK_ERR_INVALID_ARG && s == NULL && strstr(err.msg, "dryx"));
    p = base();
    p.mirostat = 1;
    CHECK(brisk_sampler_init(&s, &p, V, &err) == BRISK_ERR_UNSUPPORTED);
    p.mirostat = 2;
    s = make(&p);
    stage_list(s, names, sizeof names);
    CHECKF(!strcmp(names, "mask temperature mirostat_v2"), "mirostat chain: %s", names);
    brisk_sampler_free(s);
    p = base();
    p.xtc_threshold = 1.5f;
    CHECK(brisk_sampler_init(&s, &p, V, &err) == BRISK_ERR_INVALID_ARG);
    p = base();
    p.min_keep = V + 1;
    CHECK(brisk_sampler_init(&s, &p, V, &err) == BRISK_ERR_INVALID_ARG);
}

static void test_logit_bias(void) {
    float l[V], pr[V];
    fill(l, 3, 6.0f);
    int best = 0;
    for (int i = 1; i < V; i++) best = l[i] > l[best] ? i : best;
    brisk_logit_bias b[2] = {{best, -INFINITY}, {7, 100.0f}};
    brisk_sampler_params p = base();
    p.logit_bias = b;
    p.n_logit_bias = 1;
    brisk_sampler *s = make(&p);
    brisk_sampler_dist(s, l, pr);
    CHECK(pr[best] == 0.0f);
    brisk_sampler_free(s);
    p.n_logit_bias = 2;
    p.temp = 0.0f;
    s = make(&p);
    CHECK(brisk_sampler_sample(s, l) == 7);
    brisk_sampler_free(s);
    brisk_error err = {0};
    b[1].token = V;
    CHECK(brisk_sampler_init(&s, &p, V, &err) == BRISK_ERR_INVALID_ARG);
    b[1] = (brisk_logit_bias){3, INFINITY};
    CHECK(brisk_sampler_init(&s, &p, V, &err) == BRISK_ERR_INVALID_ARG);
}

/* a constraint: only tokens t with t % mod == phase, where phase counts accepted tokens */
typedef struct constraint {
    int mod, phase, resets;
} constraint;

static void c_fill(void *u, uint32_t *allowed, int32_t n) {
    const constraint *c = u;
    for (int32_t t = 0; t < n; t++)
        if (t % c->mod == c->phase % c->mod) allowed[t / 32] |= 1u << (t % 32);
}
static void c_accept(void *u, int32_t t) { (void)t, ((constraint *)u)->phase++; }
static void c_reset(void *u) { ((constraint *)u)->phase = 0, ((constraint *)u)->resets++; }

static void test_mask(void) {
    float l[V], pr[V];
    fill(l, 11, 4.0f);
    constraint c = {3, 0, 0};
    brisk_mask m = {&c, c_fill, c_accept, c_reset};
    brisk_sampler_params p = base();
    p.top_k = 0;
    brisk_sampler *s = make(&p);
    brisk_sampler_set_mask(s, &m);
    for (int step = 0; step < 6; step++) {
        brisk_sampler_dist(s, l, pr);
        int bad = 0, any = 0;
        double sum = 0;
        for (int t = 0; t < V; t++) {
            bad += pr[t] > 0 && t % 3 != step % 3;
            any += pr[t] > 0;
            sum += pr[t];
        }
        CHECKF(!bad && any && fabs(sum - 1) < 1e-5, "step %d: %d masked tokens kept", step, bad);
        const int32_t t = brisk_sampler_sample(s, l);
        CHECK(t % 3 == step % 3);
        brisk_sampler_accept(s, t);
    }
    brisk_sampler_reset(s);
    CHECK(c.phase == 0 && c.resets == 1);
    /* greedy under the mask: the best allowed token */
    brisk_sampler_free(s);
    p.temp = 0.0f;
    s = make(&p);
    brisk_sampler_set_mask(s, &m);
    int best = -1;
    for (int t = 0; t < V; t += 3) best = best < 0 || l[t] > l[best] ? t : best;
    CHECK(brisk_sampler_sample(s, l) == best);
    brisk_sampler_set_mask(s, NULL);
    int gbest = 0;
    for (int t = 1; t < V; t++) gbest = l[t] > l[gbest] ? t : gbest;
    CHECK(brisk_sampler_sample(s, l) == gbest);
    brisk_sampler_free(s);
}

/* a caller's stage: bans the token in ctx */
static void ban_apply(void *ctx, brisk_token_array *cur) {
    const int32_t ban = *(int32_t *)ctx;
    int32_t n = 0;
    for (int32_t i = 0; i < cur->size; i++)
        if (cur->data[i].id != ban) cur->data[n++] = cur->data[i];
    cur->size = n;
}

static void test_custom_stage(void) {
    static const brisk_stage_i ban_i = {"ban", ban_apply, NULL, NULL, NULL, NULL};
    float l[V], pr[V];
    fill(l, 5, 8.0f);
    brisk_sampler_params p = base();
    p.temp = 0.0f;
    brisk_sampler *s = make(&p);
    int32_t ban = brisk_sampler_sample(s, l);
    brisk_error err = {0};
    CHECK(brisk_sampler_add_stage(s, 1, &ban_i, &ban, &err) == BRISK_OK);
    CHECK(!strcmp(brisk_sampler_stage_name(s, 1), "ban"));
    CHECK(brisk_sampler_sample(s, l) != ban);
    brisk_sampler_dist(s, l, pr);
    CHECK(pr[ban] == 0.0f);
    brisk_sampler *c = NULL;
    CHECK(brisk_sampler_clone(s, &c, &err) == BRISK_ERR_UNSUPPORTED && c == NULL);
    static const brisk_stage_i bad = {"bad", NULL, NULL, NULL, NULL, NULL};
    CHECK(brisk_sampler_add_stage(s, -1, &bad, NULL, &err) == BRISK_ERR_INVALID_ARG);
    brisk_sampler_free(s);
}

static void test_clone(void) {
    float l[V];
    brisk_sampler_params p = base();
    p.repeat_penalty = 1.3f, p.typical_p = 0.95f, p.xtc_probability = 0.5f, p.xtc_threshold = 0.05f, p.top_k = 0;
    for (int miro = 0; miro <= 2; miro += 2) {
        p.mirostat = miro;
        brisk_sampler *a = make(&p), *b = NULL;
        for (int i = 0; i < 20; i++) {
            fill(l, 100 + i, 6.0f);
            brisk_sampler_accept(a, brisk_sampler_sample(a, l));
        }
        brisk_error err = {0};
        CHECK(brisk_sampler_clone(a, &b, &err) == BRISK_OK);
        int same = 1;
        for (int i = 0; i < 100 && b; i++) {
            fill(l, 200 + i, 6.0f);
            const int32_t ta = brisk_sampler_sample(a, l), tb = brisk_sampler_sample(b, l);
            same &= ta == tb;
            brisk_sampler_accept(a, ta);
            brisk_sampler_accept(b, tb);
        }
        CHECKF(same, "mirostat %d: a clone drew differently", miro);
        brisk_sampler_free(a);
        brisk_sampler_free(b);
    }
}

static void test_logprobs(void) {
    float l[V];
    int32_t ids[V + 1];
    float lp[V + 1];
    fill(l, 9, 10.0f);
    l[17] = l[18] = 9.0f;   /* a tie: lower id first */
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)l[i]);
    for (int k = 1; k <= V + 1; k += 37) {
        const int32_t n = brisk_logprobs_top_k(l, V, k, ids, lp);
        CHECK(n == (k < V ? k : V));
        int ok = 1;
        for (int i = 0; i < n; i++) {
            /* rank by brute force */
            int rank = 0;
            for (int j = 0; j < V; j++) rank += l[j] > l[ids[i]] || (l[j] == l[ids[i]] && j < ids[i]);
            ok &= rank == i && fabs(lp[i] - (l[ids[i]] - log(sum))) < 1e-5;
        }
        CHECKF(ok, "top %d logprobs", k);
    }
    CHECK(brisk_logprobs_top_k(l, V, 0, ids, lp) == 0);
}

/* ---- draws against the final distribution --------------------------------------------------- */


/* One-sample chi-square of counts (n draws) against probs, bins grouped in id
 * order until each expects >= 20 draws; a draw outside probs' support is an
 * outright failure (p = 0). */
static double chi2(const int *counts, const float *probs, int n, int *df_out) {
    double chi = 0, e = 0, o = 0;
    int df = -1;
    for (int t = 0; t < V; t++) {
        if (probs[t] <= 0 && counts[t] > 0) return 0.0;
        e += probs[t] * (double)n;
        o += counts[t];
        if (e >= 20 || t == V - 1) {
            if (e > 0) {
                chi += (o - e) * (o - e) / e;
                df++;
            }
            e = o = 0;
        }
    }
    *df_out = df;
    return df > 0 ? test_gamma_q(df / 2.0, chi / 2.0) : 1.0;
}

static double draw_test(const char *name, const brisk_sampler_params *drawn, const brisk_sampler_params *expected, int n) {
    float l[V], pr[V];
    fill(l, 21, 7.0f);
    brisk_sampler *s = make(drawn), *e = make(expected);
    static int counts[V];
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < n; i++) counts[brisk_sampler_sample(s, l)]++;
    brisk_sampler_dist(e, l, pr);
    int df = 0, support = 0;
    for (int t = 0; t < V; t++) support += pr[t] > 0;
    const double pv = chi2(counts, pr, n, &df);
    printf("%-44s support %3d df %3d p %.4g\n", name, support, df, pv);
    brisk_sampler_free(s);
    brisk_sampler_free(e);
    return pv;
}

static void test_draws(void) {
    const int N = 40000;
    brisk_sampler_params p = base();
    p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
    p.typical_p = 0.95f, p.top_n_sigma = 2.5f, p.xtc_probability = 1.0f, p.xtc_threshold = 0.02f, p.temp = 0.7f;
    double pv = draw_test("typical + top-n-sigma + XTC + temperature", &p, &p, N);
    CHECKF(pv > 0.01, "draws do not follow the chain's distribution (p %.3g)", pv);
    /* mutation: the draws compared with the distribution before the temperature */
    brisk_sampler_params m = p;
    m.temp = 1.0f;
    pv = draw_test("  mutation: expected without the temperature", &p, &m, N);
    CHECKF(pv < 1e-4, "the chi-square test misses a wrong temperature (p %.3g)", pv);
    /* mutation: expected without XTC (its removed top tokens are drawn never) */
    m = p;
    m.xtc_probability = 0.0f;
    pv = draw_test("  mutation: expected without XTC", &p, &m, N);
    CHECKF(pv < 1e-4, "the chi-square test misses XTC (p %.3g)", pv);

    brisk_sampler_params q = base();
    q.mirostat = 2, q.mirostat_tau = 6.0f, q.temp = 1.0f;   /* no accept: mu stays 2 tau */
    pv = draw_test("mirostat v2", &q, &q, N);
    CHECKF(pv > 0.01, "mirostat draws do not follow its distribution (p %.3g)", pv);
    m = q;
    m.mirostat_tau = 4.5f;
    pv = draw_test("  mutation: expected with another mu", &q, &m, N);
    CHECKF(pv < 1e-4, "the chi-square test misses a wrong mu (p %.3g)", pv);
}

int main(void) {
    test_order();
    test_logit_bias();
    test_mask();
    test_custom_stage();
    test_clone();
    test_logprobs();
    test_draws();
    return test_finish();
}
