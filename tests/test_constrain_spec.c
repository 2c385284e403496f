/* test_constrain_spec: speculative sampling stays lossless under a constraint. The vocabulary is the
 * 256 single bytes; the constraint is the regular expression [a-m][n-z0-9]+, so the allowed set
 * changes after the first token and the drafts are often disallowed. Two-sample chi-square tests
 * (p > 0.01) compare the verifier's tokens with plain constrained sampling: the first token (10,000
 * draws) and the second given the first is the most likely one. Every token the verifier outputs
 * must be allowed. Three verifiers:
 *   - the chain verifier (k = 4 drafts) with drafts drawn from an unconstrained draft distribution q
 *     (many disallowed drafts), at temperatures 1.0 and 0.7;
 *   - the chain verifier with a constrained q (the draft model under the same mask: every draft
 *     allowed, the acceptance path dominates);
 *   - the tree verifier (n-gram trees: point-mass children, some disallowed), which the sampled
 *     speculative loop uses for n-gram drafts.
 * Mutations that must fail: the residual step resampling from p (chain and tree), and a verifier
 * whose sampler has no mask (disallowed tokens come out). Logits are fixed pseudo-random values
 * (a seeded generator), so the test is deterministic. */
#include "constrain/constrain.h"
#include "sample/sample.h"
#include "spec/spec.h"
#include "test.h"

#define V 257   /* 256 bytes and an end token */
#define K 4

static float L0[V], L1[V], D0[V], D1[V];
static cst_vocab *vocab;
static cst_grammar *gram;

typedef struct mstate { int32_t s; } mstate;
static void m_fill(void *u, uint32_t *allowed, int32_t n) { (void)n; cst_mask(gram, ((mstate *)u)->s, allowed); }
static void m_accept(void *u, int32_t t) {
    mstate *m = u;
    m->s = t == 256 ? CST_DEAD : cst_advance(gram, m->s, t);
}
static void m_reset(void *u) { ((mstate *)u)->s = cst_start(gram); }

static brisk_sampler *make(float temp, uint64_t seed, mstate *ms) {
    brisk_sampler_params p = brisk_sampler_default_params();
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    brisk_sampler *s = NULL;
    brisk_error err = {0};
    if (brisk_sampler_init(&s, &p, V, &err)) { fprintf(stderr, "sampler: %s\n", err.msg); return NULL; }
    ms->s = cst_start(gram);
    const brisk_mask mk = {.user = ms, .fill = m_fill, .accept = m_accept, .reset = m_reset};
    brisk_sampler_set_mask(s, &mk);
    return s;
}

/* two-sample chi-square over bins of the plain distribution's tokens, each expecting >= 20 draws */
static double chi2(const int *r, const int *s, const float *ref, int *df_out) {
    int order[V];
    double nr = 0, ns = 0;
    for (int i = 0; i < V; i++) { nr += r[i]; ns += s[i]; order[i] = i; }
    for (int i = 1; i < V; i++)
        for (int j = i; j > 0 && ref[order[j]] > ref[order[j - 1]]; j--) { const int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t; }
    const double k1 = sqrt(ns / nr), k2 = sqrt(nr / ns), need = 20.0 / (nr < ns ? nr : ns);
    double br[V], bs[V], bp = 0, x = 0;
    int bins = 0;
    bool open = false;
    for (int i = 0; i < V; i++) {
        if (!open) { br[bins] = bs[bins] = 0; bp = 0; open = true; }
        br[bins] += r[order[i]];
        bs[bins] += s[order[i]];
        bp += ref[order[i]];
        if (bp >= need) { bins++; open = false; }
    }
    if (open) {
        if (bins > 0) { br[bins - 1] += br[bins]; bs[bins - 1] += bs[bins]; }
        else bins = 1;
    }
    for (int i = 0; i < bins; i++)
        if (br[i] + bs[i] > 0) { const double d = k1 * br[i] - k2 * bs[i]; x += d * d / (br[i] + bs[i]); }
    *df_out = bins - 1;
    return bins > 1 ? test_gamma_q((bins - 1) / 2.0, x / 2.0) : 1.0;
}

static int last_bad_tokens;

static int32_t argmax(const float *p) {
    int32_t b = 0;
    for (int i = 1; i < V; i++) if (p[i] > p[b]) b = i;
    return b;
}

typedef enum { CHAIN, CHAIN_MASKED_Q, TREE, CHAIN_UNMASKED } verifier;
static const char *verifier_name[] = {"chain", "chain, constrained q", "tree", "chain, verifier without the mask"};

/* q restricted to what the constraint allows in state st, renormalised */
static void restrict_q(float *q, int32_t st) {
    uint32_t allowed[(V + 31) / 32];
    cst_mask(gram, st, allowed);
    double z = 0;
    for (int i = 0; i < V; i++) { if (!(allowed[i / 32] >> (i % 32) & 1)) q[i] = 0.0f; z += q[i]; }
    for (int i = 0; i < V; i++) q[i] = (float)(q[i] / z);
}

/* an n-gram tree: children of the pending token, then children of node 0 (token a) */
static int32_t tree_tokens[8], tree_parent[8], tree_rank[8], tree_depth[8];
static int tree_make(int32_t a) {
    const int32_t root_kids[3] = {'z', a, 'd'}, a_kids[3] = {'b', 'q', '5'};   /* 'z', 'b': disallowed there */
    int n = 0;
    for (int i = 0; i < 3; i++) { tree_tokens[n] = root_kids[i]; tree_parent[n] = -1; tree_rank[n] = i; tree_depth[n] = 1; n++; }
    for (int i = 0; i < 3; i++) { tree_tokens[n] = a_kids[i]; tree_parent[n] = 1; tree_rank[n] = i; tree_depth[n] = 2; n++; }
    return n;
}

static double run(verifier mode, float temp, uint64_t seed_base, int n, bool broken, bool expect_pass) {
    static float p0[V], p1[V], q0[V], q1[V], scratch[2 * V], qs[K * V];
    static int h1s[V], h1p[V], h2s[V], h2p[V];
    memset(h1s, 0, sizeof h1s); memset(h1p, 0, sizeof h1p); memset(h2s, 0, sizeof h2s); memset(h2p, 0, sizeof h2p);
    mstate ms;
    brisk_sampler *s = make(temp, 1, &ms);
    brisk_sampler_dist(s, L0, p0);
    const int32_t a = argmax(p0);
    brisk_sampler_accept(s, a);
    brisk_sampler_dist(s, L1, p1);
    brisk_sampler_free(s);
    /* the draft's own distribution: unconstrained */
    brisk_sampler_params dp = brisk_sampler_default_params();
    dp.temp = temp; dp.top_k = 0; dp.top_p = 1.0f; dp.min_p = 0.0f; dp.seed = 2;
    brisk_sampler *ds = NULL;
    brisk_error err = {0};
    if (brisk_sampler_init(&ds, &dp, V, &err)) return 0;
    brisk_sampler_dist(ds, D0, q0);
    brisk_sampler_dist(ds, D1, q1);
    if (mode == CHAIN_MASKED_Q) {
        restrict_q(q0, cst_start(gram));
        restrict_q(q1, cst_advance(gram, cst_start(gram), 'a'));
    }
    const int n_tree = tree_make(a);
    const float *tree_rows[8] = {L0, L1, L1, L1, L1, L1, L1};
    const brisk_draft_tree tree = {.n = n_tree, .tokens = tree_tokens, .parent = tree_parent, .rank = tree_rank,
                                   .depth = tree_depth, .match_len = 0};
    int32_t path[8];
    s = make(temp, seed_base + 3, &ms);
    for (int i = 0; i < n; i++) {
        h1p[brisk_sampler_draw(s, p0, V)]++;
        h2p[brisk_sampler_draw(s, p1, V)]++;
    }
    brisk_sampler_free(s);
    const float *rows1[K + 1] = {L0, L1, L1, L1, L1}, *rows2[K + 1] = {L1, L1, L1, L1, L1};
    const brisk_verify_opts vo = {.greedy = false, .broken_residual = broken};
    int32_t drafts[K], out[K + 1];
    int n1 = 0, n2 = 0, bad_tokens = 0;
    /* the unmasked verifier seldom outputs a first: judged on the first token alone */
    const bool first_only = mode == CHAIN_UNMASKED;
    for (uint64_t it = 0; n1 < n || (n2 < n && !first_only); it++) {
        brisk_sampler *v = make(temp, seed_base + 1000 + it, &ms);
        if (mode == CHAIN_UNMASKED) brisk_sampler_set_mask(v, NULL);
        drafts[0] = brisk_sampler_draw(ds, q0, V);
        for (int j = 1; j < K; j++) drafts[j] = brisk_sampler_draw(ds, q1, V);
        memcpy(qs, q0, sizeof q0);
        for (int j = 1; j < K; j++) memcpy(qs + j * V, q1, sizeof q1);
        brisk_draft d = {.n = K, .tokens = drafts, .q = qs, .match_len = 0};
        int32_t st = cst_start(gram);
        int m = mode == TREE ? brisk_spec_verify_tree(v, V, tree_rows, &tree, &vo, scratch, out, path)
                             : brisk_spec_verify(v, V, rows1, &d, &vo, scratch, out);
        for (int j = 0; j < m && !broken; j++) {
            if (out[j] == 256) {   /* the end token: allowed only when the output is complete */
                if (!cst_accepting(gram, st)) bad_tokens++;
                break;
            }
            st = cst_advance(gram, st, out[j]);
            if (st == CST_DEAD) { bad_tokens++; break; }
        }
        if (n1 < n) { h1s[out[0]]++; n1++; }
        if (mode == TREE && out[0] == a && m < 2) {
            /* a is a child of the root: it comes out only through node 1, unless the mutation kept
             * the rejected child in p and drew it */
            if (!broken) { CHECKF(false, "tree: the first token is a but the walk ended there"); break; }
        } else if (out[0] == a && n2 < n) {
            int32_t t2;
            if (m >= 2) {
                t2 = out[1];
            } else {
                for (int j = 0; j < K; j++) drafts[j] = brisk_sampler_draw(ds, q1, V);
                for (int j = 0; j < K; j++) memcpy(qs + j * V, q1, sizeof q1);
                m = brisk_spec_verify(v, V, rows2, &d, &vo, scratch, out);
                t2 = out[0];
            }
            h2s[t2]++;
            n2++;
        }
        brisk_sampler_free(v);
    }
    brisk_sampler_free(ds);
    int df1, df2;
    const double pv1 = chi2(h1s, h1p, p0, &df1), pv2 = first_only ? 1.0 : chi2(h2s, h2p, p1, &df2);
    if (first_only) df2 = 0;
    printf("%s, temp %.1f%s: first token df %d p %.4f | second (first = most likely) df %d p %.4f | disallowed outputs %d\n",
           verifier_name[mode], temp, broken ? " [broken residual]" : "", df1, pv1, df2, pv2, bad_tokens);
    last_bad_tokens = bad_tokens;
    if (expect_pass) {
        CHECKF(pv1 > 0.01, "temp %.1f: first token p = %.4g", temp, pv1);
        CHECKF(pv2 > 0.01, "temp %.1f: second token p = %.4g", temp, pv2);
        CHECKF(bad_tokens == 0, "%d disallowed tokens came out of the verifier", bad_tokens);
    }
    return pv1 < pv2 ? pv1 : pv2;
}

int main(void) {
    static uint8_t pieces[256];
    static uint32_t off[V + 1];
    for (int i = 0; i < 256; i++) { pieces[i] = (uint8_t)i; off[i] = (uint32_t)i; }
    off[256] = off[257] = 256;
    const int32_t eos = 256;
    brisk_error err = {0};
    CHECK(cst_vocab_new(V, pieces, off, &eos, 1, &vocab, &err) == BRISK_OK);
    cst_nfa *n = cst_nfa_new();
    const char *re = "[a-m][n-z0-9]+";
    CHECK(cst_regex_compile(n, re, strlen(re), &err) == BRISK_OK);
    CHECK(cst_grammar_new(n, vocab, &gram, &err) == BRISK_OK);
    cst_nfa_free(n);
    if (!gram) return test_finish();
    /* logits: a seeded generator; the draft's are the target's plus noise (so q != p) */
    uint64_t x = 0x243F6A8885A308D3ull;
    for (int i = 0; i < V; i++) {
        float r[4];
        for (int k = 0; k < 4; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            r[k] = (float)((x >> 11) * (1.0 / 9007199254740992.0));
        }
        L0[i] = 4.0f * r[0];
        L1[i] = 4.0f * r[1];
        /* the draft: the target's logits with noise, and a preference for the letters (allowed first) */
        D0[i] = L0[i] + 2.0f * (r[2] - 0.5f) + (i >= 'a' && i <= 'm' ? 1.5f : 0.0f);
        D1[i] = L1[i] + 2.0f * (r[3] - 0.5f) + (i >= 'n' && i <= 'z' ? 1.5f : 0.0f);
    }
    const int draws = test_quick() ? 3000 : 10000;
    run(CHAIN, 1.0f, (uint64_t)1 << 32, draws, false, true);
    if (!test_quick()) run(CHAIN, 0.7f, (uint64_t)2 << 32, draws, false, true);
    run(CHAIN_MASKED_Q, 1.0f, (uint64_t)4 << 32, draws, false, true);
    run(TREE, 1.0f, (uint64_t)5 << 32, draws, false, true);
    if (!test_quick()) run(TREE, 0.7f, (uint64_t)6 << 32, draws, false, true);
    /* the mutations: decisive even in the quick run */
    double pv = run(CHAIN, 1.0f, (uint64_t)3 << 32, 40000, true, false);
    printf("mutation (chain, broken residual): p = %.3g, must be < 1e-4\n", pv);
    CHECKF(pv < 1e-4, "the broken residual step went undetected (p = %.4g)", pv);
    pv = run(TREE, 1.0f, (uint64_t)7 << 32, 40000, true, false);
    printf("mutation (tree, broken residual): p = %.3g, must be < 1e-4\n", pv);
    CHECKF(pv < 1e-4, "the tree's broken residual went undetected (p = %.4g)", pv);
    pv = run(CHAIN_UNMASKED, 1.0f, (uint64_t)8 << 32, draws, false, false);
    printf("mutation (verifier without the mask): p = %.3g, %d disallowed outputs, must be < 1e-4 and > 0\n", pv, last_bad_tokens);
    CHECKF(pv < 1e-4 && last_bad_tokens > 0, "a verifier ignoring the constraint went undetected (p = %.4g, %d disallowed)", pv,
           last_bad_tokens);
    cst_grammar_free(gram);
    cst_vocab_free(vocab);
    return test_finish();
}
