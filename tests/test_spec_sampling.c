/* Speculative sampling is lossless: the stochastic verifier's tokens follow the
 * plain sampler's distribution. Two-sample chi-square tests (p > 0.01) on
 *   - the first new token (10,000 draws each), and
 *   - the second token, conditioned on the first being the most likely one
 *     (10,000 conditioned draws each),
 * at temperatures 0.7 and 1.0, with and without top-p, and once with a
 * repetition penalty (the history each position sees matters). Speculation
 * uses k = 4 drafts from the draft model's own distribution q, so acceptance
 * and the residual path both occur often. A mutation check breaks the residual
 * step (resample from p, as some servers do) and requires the test to fail.
 *
 * Trees (n-gram trees: point-mass children) get the same two tests through
 * brisk_spec_verify_tree: three children of the pending token (the target's
 * 2nd, 1st and 4th most likely tokens, tried in that order) and two below the
 * most likely one, so first choices, runners-up and the leftover draw all
 * occur often; its mutation keeps rejected children in p.
 *
 * The logits are fixed: the target's and the draft's after a code prompt and
 * after the prompt plus the most likely token, restricted to the 512 tokens
 * most likely under the target (renumbered 0..511) so that the ~10^6 sampler
 * chain evaluations take seconds; the verifier does not depend on the
 * vocabulary size. Seeds are fixed (a separate stream per configuration), so
 * the result is deterministic. The models: the bundled target (models/) and
 * the committed Q4_0 draft (tests/data/spec, scripts/gen-spec-draft.py), so
 * every test above runs on a bare clone; with ../shared (and not under
 * BRISK_TEST_QUICK), the temp 1.0 chain test runs once more (5,000 draws) with
 * the F16 draft of ../shared/models (trees do not use the draft). */
#include "test.h"
#include "brisk.h"
#include "sample/sample.h"
#include "spec/spec.h"

#include <math.h>
#include <stdint.h>

#define SUB 512
#define K 4

static float L0[SUB], L1[SUB], D0[SUB], D1[SUB];   /* target / draft logits at positions 1 and 2 */
static int32_t prompt_sub[512];
static int n_prompt;

/* ---- chi-square two-sample test ------------------------------------------------------------- */


/* p-value that two histograms come from one distribution. Bins are fixed in
 * advance from the plain distribution ref (not from the counts): tokens in
 * descending probability, grouped until each bin expects >= 20 draws per
 * sample. Sparse bins make the two-sample statistic anti-conservative (with
 * bins of >= 10 observed draws, 40,000-draw runs of an exact sampler gave
 * p < 0.01 while one-sample tests against ref gave 0.4-0.6). */
static double chi2_two_sample(const int *r, const int *s, const float *ref, int n, double *chi_out, int *df_out) {
    static int order[SUB];
    double nr = 0, ns = 0;
    for (int i = 0; i < n; i++) { nr += r[i]; ns += s[i]; order[i] = i; }
    for (int i = 1; i < n; i++)   /* insertion sort, descending by ref */
        for (int j = i; j > 0 && ref[order[j]] > ref[order[j - 1]]; j--) {
            const int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    const double k1 = sqrt(ns / nr), k2 = sqrt(nr / ns), need = 20.0 / (nr < ns ? nr : ns);
    static double bin_r[SUB], bin_s[SUB];
    double bp = 0, chi = 0;
    int bins = 0;
    bool open_bin = false;
    for (int i = 0; i < n; i++) {
        if (!open_bin) { bin_r[bins] = bin_s[bins] = 0; bp = 0; open_bin = true; }
        bin_r[bins] += r[order[i]];
        bin_s[bins] += s[order[i]];
        bp += ref[order[i]];
        if (bp >= need) { bins++; open_bin = false; }
    }
    if (open_bin) {   /* the tail short of `need`: merged into the last full bin */
        if (bins > 0) { bin_r[bins - 1] += bin_r[bins]; bin_s[bins - 1] += bin_s[bins]; }
        else bins = 1;
    }
    for (int i = 0; i < bins; i++)
        if (bin_r[i] + bin_s[i] > 0) {
            const double d = k1 * bin_r[i] - k2 * bin_s[i];
            chi += d * d / (bin_r[i] + bin_s[i]);
        }
    const int df = bins - 1;
    *chi_out = chi;
    *df_out = df;
    return df > 0 ? test_gamma_q(df / 2.0, chi / 2.0) : 1.0;
}

/* ---- one configuration ---------------------------------------------------------------------- */

typedef struct cfg {
    float temp, top_p, penalty;
    const char *name;
} cfg;

static brisk_sampler *make(const cfg *c, uint64_t seed) {
    brisk_sampler_params p = brisk_sampler_default_params();
    p.temp = c->temp;
    p.top_p = c->top_p;
    p.top_k = 0;
    p.min_p = 0.0f;
    p.repeat_penalty = c->penalty;
    p.repeat_mode = BRISK_REPEAT_LOGPROB;
    p.repeat_last_n = 64;
    p.seed = seed;
    brisk_sampler *s = NULL;
    brisk_error err = {0};
    if (brisk_sampler_init(&s, &p, SUB, &err)) fprintf(stderr, "sampler: %s\n", err.msg);
    for (int i = 0; i < n_prompt; i++) brisk_sampler_accept(s, prompt_sub[i]);
    return s;
}

static int32_t argmax(const float *p, int n) {
    int32_t b = 0;
    for (int i = 1; i < n; i++)
        if (p[i] > p[b]) b = i;
    return b;
}

/* The plain sampler's final distributions: p0 after the prompt, p1 after the
 * prompt and a, its most likely first token (returned). */
static int32_t target_dists(const cfg *c, float *p0, float *p1) {
    brisk_sampler *s = make(c, 1);
    brisk_sampler_dist(s, L0, p0);
    const int32_t a = argmax(p0, SUB);
    brisk_sampler_accept(s, a);
    brisk_sampler_dist(s, L1, p1);
    brisk_sampler_free(s);
    return a;
}

/* Returns the smaller of the two p-values (first token, conditioned second token). */
static double run_cfg(const cfg *c, uint64_t seed_base, int n_samples, bool broken, bool expect_pass) {
    static float p0[SUB], p1[SUB], q0[SUB], q1[SUB], scratch[2 * SUB];
    static int h1_spec[SUB], h1_plain[SUB], h2_spec[SUB], h2_plain[SUB];
    memset(h1_spec, 0, sizeof h1_spec);
    memset(h1_plain, 0, sizeof h1_plain);
    memset(h2_spec, 0, sizeof h2_spec);
    memset(h2_plain, 0, sizeof h2_plain);

    /* the plain sampler's distributions (prompt history; prompt + a) and the draft's q */
    const int32_t a = target_dists(c, p0, p1);
    brisk_sampler *s = make(c, 2);
    brisk_sampler_dist(s, D0, q0);
    brisk_sampler_accept(s, a);
    brisk_sampler_dist(s, D1, q1);
    brisk_sampler_free(s);

    /* plain: draws from p0, and from p1 given the first token a */
    s = make(c, seed_base + 3);
    for (int i = 0; i < n_samples; i++) {
        h1_plain[brisk_sampler_draw(s, p0, SUB)]++;
        h2_plain[brisk_sampler_draw(s, p1, SUB)]++;
    }
    brisk_sampler_free(s);

    /* speculative: the full two-round process, k = 4 drafts from q. Rows past
     * position 2 (and row 2 after a first token other than a) are placeholders:
     * they only shape tokens that are not counted. */
    const float *rows_r1[K + 1] = {L0, L1, L1, L1, L1}, *rows_r2[K + 1] = {L1, L1, L1, L1, L1};
    const brisk_verify_opts vo = {.greedy = false, .broken_residual = broken};
    int32_t drafts[K], out[K + 1];
    int n1 = 0, n2 = 0, accepted = 0, drafted = 0;
    for (uint64_t it = 0; n1 < n_samples || n2 < n_samples; it++) {
        brisk_sampler *v = make(c, seed_base + 1000 + it);
        drafts[0] = brisk_sampler_draw(v, q0, SUB);
        for (int j = 1; j < K; j++) drafts[j] = brisk_sampler_draw(v, q1, SUB);
        brisk_draft d = {.n = K, .tokens = drafts, .q = NULL, .match_len = 0};
        float qs[K * SUB];
        memcpy(qs, q0, sizeof q0);
        for (int j = 1; j < K; j++) memcpy(qs + j * SUB, q1, sizeof q1);
        d.q = qs;
        int m = brisk_spec_verify(v, SUB, rows_r1, &d, &vo, scratch, out);
        drafted += K;
        accepted += m - 1;
        const int32_t t1 = out[0];
        if (n1 < n_samples) {
            h1_spec[t1]++;
            n1++;
        }
        if (t1 == a && n2 < n_samples) {
            int32_t t2;
            if (m >= 2) {
                t2 = out[1];
            } else {
                /* round 2 from the pending token a: fresh drafts from q1 */
                for (int j = 0; j < K; j++) drafts[j] = brisk_sampler_draw(v, q1, SUB);
                for (int j = 0; j < K; j++) memcpy(qs + j * SUB, q1, sizeof q1);
                m = brisk_spec_verify(v, SUB, rows_r2, &d, &vo, scratch, out);
                t2 = out[0];
            }
            h2_spec[t2]++;
            n2++;
        }
        brisk_sampler_free(v);
    }
    double chi1, chi2;
    int df1, df2;
    const double pv1 = chi2_two_sample(h1_spec, h1_plain, p0, SUB, &chi1, &df1);
    const double pv2 = chi2_two_sample(h2_spec, h2_plain, p1, SUB, &chi2, &df2);
    printf("%-28s%s first token: chi2 %7.1f df %3d p %.4f | second | first = most likely: chi2 %7.1f df %3d p %.4f | "
           "round-1 acceptance %.2f\n",
           c->name, broken ? " [broken residual]" : "", chi1, df1, pv1, chi2, df2, pv2, (double)accepted / drafted);
    if (expect_pass) {
        CHECKF(pv1 > 0.01, "%s: first token p = %.4g", c->name, pv1);
        CHECKF(pv2 > 0.01, "%s: second token p = %.4g", c->name, pv2);
    }
    return pv1 < pv2 ? pv1 : pv2;
}

/* The same two histograms for tree verification with point-mass children. */
static int32_t nth_best(const float *p, int n, int k) {   /* index of the k-th largest (0 = argmax) */
    static int32_t idx[SUB];
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = 0; i <= k; i++)
        for (int j = i + 1; j < n; j++)
            if (p[idx[j]] > p[idx[i]]) {
                const int32_t t = idx[i];
                idx[i] = idx[j];
                idx[j] = t;
            }
    return idx[k];
}

static double run_tree_cfg(const cfg *c, uint64_t seed_base, int n_samples, bool broken, bool expect_pass) {
    static float p0[SUB], p1[SUB], scratch[2 * SUB];
    static int h1_spec[SUB], h1_plain[SUB], h2_spec[SUB], h2_plain[SUB];
    memset(h1_spec, 0, sizeof h1_spec);
    memset(h1_plain, 0, sizeof h1_plain);
    memset(h2_spec, 0, sizeof h2_spec);
    memset(h2_plain, 0, sizeof h2_plain);
    const int32_t a = target_dists(c, p0, p1);
    brisk_sampler *s = make(c, seed_base + 3);
    for (int i = 0; i < n_samples; i++) {
        h1_plain[brisk_sampler_draw(s, p0, SUB)]++;
        h2_plain[brisk_sampler_draw(s, p1, SUB)]++;
    }
    brisk_sampler_free(s);

    /* nodes: 0 = 2nd best, 1 = a, 2 = 4th best (children of the pending token); 3, 4 = 1st and 3rd best under p1 below a */
    int32_t tok[5] = {nth_best(p0, SUB, 1), a, nth_best(p0, SUB, 3), nth_best(p1, SUB, 0), nth_best(p1, SUB, 2)};
    int32_t par[5] = {-1, -1, -1, 1, 1}, rank[5] = {0, 1, 2, 0, 1}, depth[5] = {1, 1, 1, 2, 2};
    const brisk_draft_tree t = {.n = 5, .tokens = tok, .parent = par, .rank = rank, .depth = depth, .match_len = 0};
    /* rows of nodes other than a only shape tokens that are not counted */
    const float *rows[6] = {L0, L1, L1, L1, L1, L1};
    const brisk_verify_opts vo = {.greedy = false, .broken_residual = broken};
    int32_t out[4], path[3];
    int n1 = 0, n2 = 0, off_first = 0;
    uint64_t it = 0;
    for (; n1 < n_samples || n2 < n_samples; it++) {
        brisk_sampler *v = make(c, seed_base + 1000 + it);
        const int m = brisk_spec_verify_tree(v, SUB, rows, &t, &vo, scratch, out, path);
        off_first += m >= 2 && rank[path[0]] > 0;
        if (n1 < n_samples) {
            h1_spec[out[0]]++;
            n1++;
        }
        /* a is a node: it comes out only accepted (and the walk goes on), except when rejected
         * children stay in p (the mutation), where such a draw is not counted */
        if (out[0] == a && n2 < n_samples && (m >= 2 || !broken)) {
            CHECK(m >= 2);
            h2_spec[out[1]]++;
            n2++;
        }
        brisk_sampler_free(v);
    }
    double chi1, chi2;
    int df1, df2;
    const double pv1 = chi2_two_sample(h1_spec, h1_plain, p0, SUB, &chi1, &df1);
    const double pv2 = chi2_two_sample(h2_spec, h2_plain, p1, SUB, &chi2, &df2);
    printf("tree: %-22s%s first token: chi2 %7.1f df %3d p %.4f | second | first = most likely: chi2 %7.1f df %3d p %.4f | "
           "first token off the first choice: %.2f\n",
           c->name, broken ? " [broken residual]" : "", chi1, df1, pv1, chi2, df2, pv2, (double)off_first / (double)it);
    if (expect_pass) {
        CHECKF(pv1 > 0.01, "tree, %s: first token p = %.4g", c->name, pv1);
        CHECKF(pv2 > 0.01, "tree, %s: second token p = %.4g", c->name, pv2);
    }
    return pv1 < pv2 ? pv1 : pv2;
}

/* ---- fixed logits from the models --------------------------------------------------------------- */

static bool logits_after(brisk_model *m, const int32_t *ids, int n, float *out) {
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = 512;
    cp.n_threads = 1;
    brisk_context *c = NULL;
    brisk_error err = {0};
    if (brisk_context_init(m, &cp, &c, &err)) return false;
    int32_t pos[512], seq[512];
    uint8_t want[512];
    for (int i = 0; i < n; i++) { pos[i] = i; seq[i] = 0; want[i] = i == n - 1; }
    brisk_batch b = {n, ids, pos, seq, want};
    const bool ok = brisk_decode(c, &b, &err) == BRISK_OK;
    if (ok) {
        brisk_model_info info;
        brisk_model_get_info(m, &info);
        memcpy(out, brisk_get_logits(c, 0), (size_t)info.n_vocab * sizeof(float));
    }
    brisk_context_free(c);
    return ok;
}

/* Fills L0, L1, D0, D1 and prompt_sub from the two models. */
static bool setup_logits(brisk_model *target, brisk_model *draft) {
    brisk_error err = {0};
    brisk_model_info info;
    brisk_model_get_info(target, &info);
    const int V = info.n_vocab;
    if (V < SUB || V > 8192) return false;
    /* a prompt whose next token is uncertain: the start of a function body */
    const char *text = "import os\nimport sys\n\n\ndef main(argv):\n    ";
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (brisk_tokenize_text(target, text, strlen(text), true, false, &ids, &n_ids, &err) || n_ids >= 511) {
        free(ids);
        return false;
    }
    float *t0 = malloc((size_t)V * 4), *t1 = malloc((size_t)V * 4), *d0 = malloc((size_t)V * 4), *d1 = malloc((size_t)V * 4);
    float *key = malloc((size_t)V * 4);
    int32_t ids2[512];
    memcpy(ids2, ids, n_ids * sizeof(int32_t));
    bool ok = t0 && t1 && d0 && d1 && key && logits_after(target, ids, (int)n_ids, t0) && logits_after(draft, ids, (int)n_ids, d0);
    if (ok) {
        int32_t top = 0;
        for (int i = 1; i < V; i++)
            if (t0[i] > t0[top]) top = i;
        ids2[n_ids] = top;
        ok = logits_after(target, ids2, (int)n_ids + 1, t1) && logits_after(draft, ids2, (int)n_ids + 1, d1);
    }
    if (ok) {
        /* the sub-vocabulary: the SUB tokens with the highest target logit at either position */
        static int32_t order[8192], map[8192];
        for (int i = 0; i < V; i++) { key[i] = t0[i] > t1[i] ? t0[i] : t1[i]; order[i] = i; map[i] = -1; }
        for (int i = 0; i < SUB; i++) {   /* partial selection sort: SUB passes */
            int b = i;
            for (int j = i + 1; j < V; j++)
                if (key[order[j]] > key[order[b]]) b = j;
            const int32_t tmp = order[i];
            order[i] = order[b];
            order[b] = tmp;
            map[order[i]] = i;
            L0[i] = t0[order[i]];
            L1[i] = t1[order[i]];
            D0[i] = d0[order[i]];
            D1[i] = d1[order[i]];
        }
        n_prompt = 0;
        for (size_t i = 0; i < n_ids; i++) prompt_sub[n_prompt++] = map[ids[i]];
    }
    free(key); free(t0); free(t1); free(d0); free(d1); free(ids);
    return ok;
}

int main(void) {
    char tp[1024], dp[1024], sdp[1024];
    test_source("models/pycode-target-f16.gguf", tp, sizeof tp);
    test_source("tests/data/spec/pycode-draft-q4_0.gguf", dp, sizeof dp);
    test_shared("models/pycode-draft-f16.gguf", sdp, sizeof sdp);
    brisk_error err = {0};
    brisk_model *target = NULL, *draft = NULL;
    if (brisk_model_load(tp, &target, &err) || brisk_model_load(dp, &draft, &err)) {
        fprintf(stderr, "FAIL: load: %s\n", err.msg);
        return 1;
    }
    CHECKF(setup_logits(target, draft), "logits of %s and %s", tp, dp);

    const int n = test_quick() ? 2500 : 10000;
    const cfg cfgs[] = {
        {0.7f, 1.0f, 1.0f, "temp 0.7"},
        {0.7f, 0.9f, 1.0f, "temp 0.7, top-p 0.9"},
        {1.0f, 1.0f, 1.0f, "temp 1.0"},
        {1.0f, 0.9f, 1.0f, "temp 1.0, top-p 0.9"},
        {1.0f, 1.0f, 1.5f, "temp 1.0, repeat penalty 1.5"},
    };
    int runs = 0;
    /* the sanitizer run (BRISK_TEST_QUICK) keeps one configuration (and the mutation check) with fewer draws */
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        if (!test_quick() || i == 2) run_cfg(&cfgs[i], (uint64_t)(i + 1) << 32, n, false, true), runs++;
    /* mutation check: resampling from p instead of the residual must be caught, decisively */
    const double pv = run_cfg(&cfgs[2], (uint64_t)7 << 32, n, true, false);
    printf("mutation (broken residual): p = %.3g, must be < 1e-4\n", pv);
    CHECKF(pv < 1e-4, "the broken residual step went undetected (p = %.4g)", pv);
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        if (i == 2 || (!test_quick() && (i == 1 || i == 4)))   /* three of the five (runtime) */
            run_tree_cfg(&cfgs[i], (uint64_t)(i + 11) << 32, n, false, true), runs++;
    const double pvt = run_tree_cfg(&cfgs[2], (uint64_t)17 << 32, n, true, false);
    printf("mutation (broken tree residual): p = %.3g, must be < 1e-4\n", pvt);
    CHECKF(pvt < 1e-4, "the broken tree residual went undetected (p = %.4g)", pvt);
    test_count("distribution tests on the committed models", runs);

    /* ../shared: the F16 draft's q, one more chain test (not in the sanitizer run) */
    if (test_quick()) {
        printf("SKIP the F16-draft chain test in the quick run\n");
    } else if (test_exists(sdp)) {
        brisk_model *f16 = NULL;
        CHECKF(brisk_model_load(sdp, &f16, &err) == BRISK_OK, "%s: %s", sdp, err.msg);
        if (f16) {
            CHECKF(setup_logits(target, f16), "logits of %s and %s", tp, sdp);
            printf("with the F16 draft of ../shared:\n");
            run_cfg(&cfgs[2], (uint64_t)21 << 32, n / 2, false, true);   /* half the draws: an addition, kept short */
        }
        brisk_model_free(f16);
    } else {
        printf("SKIP the F16-draft chain test: %s is absent (the committed models ran)\n", sdp);
    }
    brisk_model_free(draft);
    brisk_model_free(target);
    return test_finish();
}
