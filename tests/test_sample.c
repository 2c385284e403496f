/* Sampler chain: determinism per seed, each filter's definition, the
 * gauge invariance of the logprob repetition penalty (and the lack of it in
 * the classic one), and a chi-square test that draws follow the distribution. */
#include "test.h"
#include "brisk.h"

#include <math.h>

#define V 64

static brisk_sampler *make(brisk_sampler_params p) {
    brisk_sampler *s = NULL;
    brisk_error err = {0};
    CHECKF(brisk_sampler_init(&s, &p, V, &err) == BRISK_OK, "%s", err.msg);
    return s;
}

static void fill_logits(float *l, unsigned seed) {
    for (int i = 0; i < V; i++) {
        seed = seed * 1103515245u + 12345u;
        l[i] = (float)((seed >> 8) % 1000) / 200.0f - 2.5f;   /* in [-2.5, 2.5) */
    }
}

static int count_nonzero(const float *p) {
    int n = 0;
    for (int i = 0; i < V; i++) n += p[i] > 0;
    return n;
}

static void test_determinism(void) {
    float l[V];
    fill_logits(l, 1);
    brisk_sampler_params p = brisk_sampler_default_params();
    p.temp = 1.0f; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = 123;
    brisk_sampler *a = make(p), *b = make(p);
    p.seed = 124;
    brisk_sampler *c = make(p);
    int same = 1, diff = 0;
    for (int i = 0; i < 200; i++) {
        int32_t ta = brisk_sampler_sample(a, l), tb = brisk_sampler_sample(b, l), tc = brisk_sampler_sample(c, l);
        same &= ta == tb;
        diff += ta != tc;
    }
    CHECKF(same, "same seed must give the same tokens");
    CHECKF(diff > 50, "different seeds gave nearly the same tokens (%d differ of 200)", diff);
    brisk_sampler_reset(a);
    brisk_sampler_reset(b);
    CHECK(brisk_sampler_sample(a, l) == brisk_sampler_sample(b, l));
    brisk_sampler_free(a); brisk_sampler_free(b); brisk_sampler_free(c);
}

static void test_filters(void) {
    float l[V], p[V];
    fill_logits(l, 7);
    int best = 0;
    for (int i = 1; i < V; i++) if (l[i] > l[best]) best = i;
    brisk_sampler_params sp = brisk_sampler_default_params();

    sp.temp = 0.0f;   /* greedy */
    brisk_sampler *s = make(sp);
    brisk_sampler_dist(s, l, p);
    CHECK(p[best] == 1.0f && count_nonzero(p) == 1);
    CHECK(brisk_sampler_sample(s, l) == best);
    brisk_sampler_free(s);

    sp.temp = 1.0f; sp.top_k = 5; sp.top_p = 1.0f; sp.min_p = 0.0f;
    s = make(sp);
    brisk_sampler_dist(s, l, p);
    CHECK(count_nonzero(p) == 5);
    /* each survivor is at least as likely as every dropped token */
    float min_kept = INFINITY, max_dropped = -INFINITY;
    for (int i = 0; i < V; i++) {
        if (p[i] > 0) min_kept = fminf(min_kept, l[i]);
        else max_dropped = fmaxf(max_dropped, l[i]);
    }
    CHECK(min_kept >= max_dropped);
    brisk_sampler_free(s);

    /* top-p: the kept set is the smallest prefix whose softmax mass reaches p */
    sp.top_k = 0; sp.top_p = 0.5f;
    s = make(sp);
    brisk_sampler_dist(s, l, p);
    double z = 0, kept_mass = 0, kept_minus_smallest = 0, smallest = INFINITY;
    for (int i = 0; i < V; i++) z += exp(l[i]);
    for (int i = 0; i < V; i++)
        if (p[i] > 0) { kept_mass += exp(l[i]) / z; smallest = fmin(smallest, exp(l[i]) / z); }
    kept_minus_smallest = kept_mass - smallest;
    CHECKF(kept_mass >= 0.5 && kept_minus_smallest < 0.5, "top-p mass %.3f (without smallest %.3f)", kept_mass, kept_minus_smallest);
    brisk_sampler_free(s);

    /* min-p: keep tokens with prob >= min_p * max prob */
    sp.top_p = 1.0f; sp.min_p = 0.3f;
    s = make(sp);
    brisk_sampler_dist(s, l, p);
    int ok = 1;
    for (int i = 0; i < V; i++) {
        const int keep = exp(l[i] - l[best]) >= 0.3 - 1e-6;
        ok &= keep == (p[i] > 0);
    }
    CHECK(ok);
    brisk_sampler_free(s);

    /* temperature: ratio of kept probabilities is exp((li - lj) / T) */
    sp.min_p = 0.0f; sp.temp = 0.5f;
    s = make(sp);
    brisk_sampler_dist(s, l, p);
    const int other = best == 0 ? 1 : 0;
    CHECK(fabs(log(p[best] / p[other]) - (l[best] - l[other]) / 0.5) < 1e-4);
    brisk_sampler_free(s);
}

/* top-k keeps exactly the first k of the descending order (ties: lower id
 * first), whatever k, and its probabilities are the softmax of those k taken
 * in that order: checked against a plain insertion sort, on logits with many
 * ties (fill_logits has 1000 levels; the extra quantization makes more). */
static void test_top_k_exact(void) {
    float l[V], p[V];
    fill_logits(l, 11);
    for (int i = 0; i < V; i++) l[i] = floorf(l[i] * 2.0f) / 2.0f;   /* about 10 distinct values */
    int order[V];
    for (int i = 0; i < V; i++) order[i] = i;
    for (int i = 1; i < V; i++)   /* stable insertion sort by logit, descending: ties keep id order */
        for (int j = i; j > 0 && l[order[j]] > l[order[j - 1]]; j--) { int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t; }
    const int ks[] = {1, 2, 5, 17, 40, 63};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const int k = ks[ki];
        brisk_sampler_params sp = brisk_sampler_default_params();
        sp.temp = 0.7f; sp.top_k = k; sp.top_p = 1.0f; sp.min_p = 0.0f;
        brisk_sampler *s = make(sp);
        brisk_sampler_dist(s, l, p);
        double sum = 0.0;
        for (int i = 0; i < k; i++) sum += exp(((double)l[order[i]] - l[order[0]]) / sp.temp);
        int ok = 1;
        for (int i = 0; i < V; i++) {
            const float want = i < k ? (float)(exp(((double)l[order[i]] - l[order[0]]) / sp.temp) / sum) : 0.0f;
            ok &= p[order[i]] == want;
        }
        CHECKF(ok, "top-k %d: kept set or probabilities differ from the sorted reference", k);
        brisk_sampler_free(s);
    }
}

static void test_penalty_gauge(void) {
    float l[V], shifted[V], p1[V], p2[V];
    fill_logits(l, 3);
    for (int i = 0; i < V; i++) shifted[i] = l[i] + 37.5f;
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.temp = 1.0f; sp.top_k = 0; sp.top_p = 1.0f; sp.min_p = 0.0f;
    sp.repeat_penalty = 1.5f; sp.repeat_last_n = 8;

    sp.repeat_mode = BRISK_REPEAT_LOGPROB;
    brisk_sampler *a = make(sp), *b = make(sp);
    const int32_t hist[] = {3, 9, 9, 20, 41};
    for (int i = 0; i < 5; i++) { brisk_sampler_accept(a, hist[i]); brisk_sampler_accept(b, hist[i]); }
    brisk_sampler_dist(a, l, p1);
    brisk_sampler_dist(b, shifted, p2);
    double maxd = 0;
    for (int i = 0; i < V; i++) maxd = fmax(maxd, fabs(p1[i] - p2[i]));
    CHECKF(maxd < 1e-6, "logprob penalty must ignore a constant logit offset (max diff %g)", maxd);
    /* and it divides a repeated token's odds by exactly theta */
    float base[V];
    brisk_sampler_params np = sp;
    np.repeat_penalty = 1.0f;
    brisk_sampler *c = make(np);
    brisk_sampler_dist(c, l, base);
    const double ratio = (p1[9] / p1[10]) / (base[9] / base[10]);
    CHECKF(fabs(ratio - 1.0 / 1.5) < 1e-4, "odds ratio %g, expected %g", ratio, 1.0 / 1.5);
    brisk_sampler_free(a); brisk_sampler_free(b); brisk_sampler_free(c);

    /* the classic penalty reads the logit's sign, so the offset changes the result */
    sp.repeat_mode = BRISK_REPEAT_CLASSIC;
    for (int i = 0; i < V; i++) shifted[i] = l[i] - 10.0f;   /* all negative now */
    a = make(sp); b = make(sp);
    for (int i = 0; i < 5; i++) { brisk_sampler_accept(a, hist[i]); brisk_sampler_accept(b, hist[i]); }
    brisk_sampler_dist(a, l, p1);
    brisk_sampler_dist(b, shifted, p2);
    maxd = 0;
    for (int i = 0; i < V; i++) maxd = fmax(maxd, fabs(p1[i] - p2[i]));
    CHECKF(maxd > 1e-3, "classic penalty unexpectedly gauge-invariant");
    brisk_sampler_free(a); brisk_sampler_free(b);

    /* invalid parameters are refused, not clamped */
    brisk_sampler *bad = NULL;
    brisk_error err = {0};
    sp.top_p = 1.5f;
    CHECK(brisk_sampler_init(&bad, &sp, V, &err) == BRISK_ERR_INVALID_ARG && bad == NULL);
    sp.top_p = 1.0f; sp.repeat_penalty = 0.0f;
    CHECK(brisk_sampler_init(&bad, &sp, V, &err) == BRISK_ERR_INVALID_ARG);
}

/* Pearson chi-square of draws against the sampler's own distribution; with
 * 63 degrees of freedom the 0.1% critical value is about 103.4. */
static void test_draw_distribution(void) {
    float l[V], p[V];
    fill_logits(l, 11);
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.temp = 1.0f; sp.top_k = 0; sp.top_p = 1.0f; sp.min_p = 0.0f; sp.seed = 99;
    brisk_sampler *s = make(sp);
    brisk_sampler_dist(s, l, p);
    const int n = test_quick() ? 20000 : 100000;
    int counts[V] = {0};
    for (int i = 0; i < n; i++) counts[brisk_sampler_sample(s, l)]++;
    double chi = 0;
    for (int i = 0; i < V; i++) {
        const double e = p[i] * n;
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    printf("chi-square of %d draws over %d tokens: %.1f (0.1%% critical value 103.4)\n", n, V, chi);
    CHECK(chi < 103.4);
    brisk_sampler_free(s);
}

/* The default seed is random (llama.cpp's -1), drawn at init and reported;
 * an explicit seed is kept and repeats its draws. */
static void test_seed(void) {
    brisk_sampler_params p = brisk_sampler_default_params();
    CHECK(p.seed == BRISK_SEED_RANDOM);
    brisk_sampler *a = make(p), *b = make(p);
    CHECK(brisk_sampler_seed(a) != BRISK_SEED_RANDOM && brisk_sampler_seed(b) != BRISK_SEED_RANDOM);
    CHECK(brisk_sampler_seed(a) != brisk_sampler_seed(b));   /* two 64-bit draws: equal with probability 2^-64 */
    p.seed = brisk_sampler_seed(a);
    brisk_sampler *c = make(p);
    CHECK(brisk_sampler_seed(c) == brisk_sampler_seed(a));
    float l[V];
    fill_logits(l, 5);
    int same = 0;
    for (int i = 0; i < 50; i++) same += brisk_sampler_sample(a, l) == brisk_sampler_sample(c, l);
    CHECK(same == 50);
    brisk_sampler_free(a);
    brisk_sampler_free(b);
    brisk_sampler_free(c);
}

int main(void) {
    test_seed();
    test_determinism();
    test_filters();
    test_top_k_exact();
    test_penalty_gauge();
    test_draw_distribution();
    return test_finish();
}
