/* Flash-decoding splits (src/model/attention.c): a token's entries are
 * attended in fixed runs of BRISK_ATTN_SPLIT entries, merged in split order,
 * and a small batch may run its splits side by side on the pool. Checked on
 * the bundled model with a split of 64 (so 200 tokens cross several) and every step on the pool (BRISK_PARALLEL_MIN_MACS=0):
 *   - bitwise the same logits one token at a time on 1 thread (splits one
 *     after the other in one work item), on 3 and 4 threads (the split items:
 *     2 KV heads do not fill 3 threads), on 2 threads (one item a thread), in
 *     chunks of 3, 64 and the whole prompt, beside another sequence, for a
 *     speculative token tree, for every KV cache type;
 *   - with windowed attention, where whole splits are masked;
 *   - close to one unsplit chain (the merge is exact in real arithmetic):
 *     max |logit difference| under 1e-3, and not zero (the split is used);
 *   - BRISK_ATTN_SPLIT that is not a positive multiple of 64 is refused. */
#include "brisk.h"
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPLIT "64"   /* the smallest split allowed */
#define NP 200       /* 3 splits of 64 and part of a fourth */

static bool same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static brisk_context *ctx_of(const brisk_model *m, int type, int threads, int window, const char *split) {
    setenv("BRISK_ATTN_SPLIT", split, 1);
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = 512;
    cp.n_seq = 2;
    cp.n_threads = threads;
    cp.kv_tokens = 1024;
    cp.n_batch = 512;
    cp.n_outputs_max = 512;
    cp.type_k = cp.type_v = type;
    cp.attn_window = window;
    cp.attn_sink = window ? 4 : 0;
    brisk_context *c = NULL;
    brisk_error err = {0};
    CHECKF(brisk_context_init(m, &cp, &c, &err) == BRISK_OK, "context %s, %d threads: %s", brisk_cache_type_name(type), threads, err.msg);
    return c;
}

/* toks[0, n) into seq 0 in chunks of `chunk` (with seq 1's toks2 beside
 * them, 3 a batch, when toks2), every logit row of seq 0 into out. */
static bool feed(brisk_context *c, const int32_t *toks, int32_t n, int32_t chunk, const int32_t *toks2, float *out, int32_t V) {
    static int32_t tk[NP + 3], ps[NP + 3], sq[NP + 3];
    static uint8_t lg[NP + 3];
    int32_t done2 = 0;
    for (int32_t i0 = 0; i0 < n; i0 += chunk) {
        const int32_t m = n - i0 < chunk ? n - i0 : chunk;
        int32_t nb = 0;
        for (int32_t j = 0; j < m; j++) tk[nb] = toks[i0 + j], ps[nb] = i0 + j, sq[nb] = 0, lg[nb] = 1, nb++;
        if (toks2)
            for (int32_t j = 0; j < 3 && done2 < n; j++, done2++) tk[nb] = toks2[done2], ps[nb] = done2, sq[nb] = 1, lg[nb] = 1, nb++;
        brisk_batch b = {.n_tokens = nb, .token = tk, .pos = ps, .seq = sq, .logits = lg};
        brisk_error err = {0};
        if (brisk_decode(c, &b, &err) != BRISK_OK) {
            fprintf(stderr, "decode: %s\n", err.msg);
            return false;
        }
        for (int32_t j = 0; j < m; j++) memcpy(out + (size_t)(i0 + j) * V, brisk_get_logits(c, j), (size_t)V * sizeof(float));
    }
    return true;
}

static void reset(brisk_context *c) { CHECK(brisk_seq_truncate(c, 0, 0, NULL) == BRISK_OK && brisk_seq_truncate(c, 1, 0, NULL) == BRISK_OK); }

/* A 5-node tree after P chain tokens: node 4 (path 0, 2, 4) must equal the chain at P + 2. */
static void check_tree(brisk_context *c, const int32_t *toks, int32_t P, const float *ref, float *scratch, int32_t V, const char *what) {
    reset(c);
    CHECK(feed(c, toks, P, 64, NULL, scratch, V));
    const int32_t junk = (toks[P] + 1) % V;
    int32_t tt[5] = {toks[P], junk, toks[P + 1], junk, toks[P + 2]}, tp[5] = {P, P, P + 1, P + 1, P + 2}, sq[5] = {0, 0, 0, 0, 0};
    const int32_t parent[5] = {-1, -1, 0, 0, 2};
    uint8_t lg[5] = {1, 1, 1, 1, 1};
    brisk_batch bt = {.n_tokens = 5, .token = tt, .pos = tp, .seq = sq, .logits = lg};
    brisk_error err = {0};
    CHECKF(brisk_decode_tree(c, &bt, parent, &err) == BRISK_OK, "tree: %s", err.msg);
    CHECKF(same_bits(brisk_get_logits(c, 4), ref + (size_t)(P + 2) * V, (size_t)V), "%s: a tree node at %d differs from the chain", what, P + 2);
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0.0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* An F16 cache's distance from an F32 one (unsplit, chunks of 16): the
 * rounding the split's deviation is measured against. */
static double f16_yardstick(const brisk_model *m, int window, const int32_t *toks, int32_t V, float *a, float *b);

static void test_type(const brisk_model *m, int type, int window, const int32_t *toks, const int32_t *toks2, int32_t V, float *ref,
                      float *got, bool quick) {
    char what[96];
    snprintf(what, sizeof what, "%s%s", brisk_cache_type_name(type), window ? " windowed" : "");
    brisk_context *c1 = ctx_of(m, type, 1, window, SPLIT);
    if (!c1) return;
    CHECK(feed(c1, toks, NP, 1, NULL, ref, V));   /* the splits one after the other, one item at a time */
    brisk_context_free(c1);
    /* core: the runs BRISK_TEST_QUICK keeps beyond the plain F32 cache (one
     * token at a time on the split items, chunks, another sequence beside) */
    static const struct { int threads, chunk; bool beside, core; } runs[] = {
        {3, 1, false, true}, {4, 1, false, false}, {2, 1, false, false}, {4, 3, false, true},
        {3, 64, true, false}, {2, NP, false, false}, {3, 2, true, true},
    };
    const bool all = !quick || (type == BRISK_CACHE_F32 && !window);
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        if (window && runs[r].chunk == NP) continue;
        if (!all && !runs[r].core) continue;
        brisk_context *c = ctx_of(m, type, runs[r].threads, window, SPLIT);
        if (!c) continue;
        CHECK(feed(c, toks, NP, runs[r].chunk, runs[r].beside ? toks2 : NULL, got, V));
        CHECKF(same_bits(ref, got, (size_t)NP * V), "%s: %d threads, chunks of %d%s differ from one thread, one token at a time", what,
               runs[r].threads, runs[r].chunk, runs[r].beside ? " beside another sequence" : "");
        if (runs[r].threads == 3 && runs[r].chunk == 1 && !window) check_tree(c, toks, NP - 20, ref, got, V, what);
        brisk_context_free(c);
    }
    /* one unsplit chain: equal inside the first split, then close but not
     * equal. An F32 cache's deviation must be below what storing the cache in
     * F16 changes; the other types only show that the split is used (their
     * rounding of each layer's K and V amplifies any difference) */
    brisk_context *cu = ctx_of(m, type, 2, window, "1073741824");
    if (!cu) return;
    CHECK(feed(cu, toks, NP, 16, NULL, got, V));
    const double maxd_short = max_diff(ref, got, (size_t)atoi(SPLIT) * V), maxd = max_diff(ref, got, (size_t)NP * V);
    CHECKF(maxd_short == 0.0, "%s: positions inside the first split differ from the unsplit chain (%.3g)", what, maxd_short);
    CHECKF(maxd > 0.0, "%s: the split changes no logit: it is not used", what);
    if (type == BRISK_CACHE_F32) {
        const double yard = f16_yardstick(m, window, toks, V, got, ref);
        CHECKF(maxd < yard, "%s: split vs unsplit max |logit difference| %.3g, an F16 cache's %.3g", what, maxd, yard);
        printf("%s: split of " SPLIT " vs one chain over %d positions: max |logit difference| %.3g (F16 vs F32 cache: %.3g)\n", what, NP, maxd, yard);
    } else printf("%s: split of " SPLIT " vs one chain over %d positions: max |logit difference| %.3g\n", what, NP, maxd);
    brisk_context_free(cu);
}

static double f16_yardstick(const brisk_model *m, int window, const int32_t *toks, int32_t V, float *a, float *b) {
    brisk_context *c32 = ctx_of(m, BRISK_CACHE_F32, 2, window, "1073741824"), *c16 = ctx_of(m, BRISK_CACHE_F16, 2, window, "1073741824");
    double d = 0.0;
    if (c32 && c16 && feed(c32, toks, NP, 16, NULL, a, V) && feed(c16, toks, NP, 16, NULL, b, V)) d = max_diff(a, b, (size_t)NP * V);
    brisk_context_free(c32);
    brisk_context_free(c16);
    return d;
}

int main(void) {
    char path[4096];
    test_source("models/pycode-target-f16.gguf", path, sizeof path);
    brisk_model *m = NULL;
    if (brisk_model_load(path, &m, NULL) != BRISK_OK) {
        printf("skip: %s absent\n", path);
        return test_finish();
    }
    setenv("BRISK_PARALLEL_MIN_MACS", "0", 1);   /* every step on the pool, however small */
    brisk_model_info info;
    brisk_model_get_info(m, &info);
    const int32_t V = info.n_vocab;
    int32_t toks[NP], toks2[NP];
    for (int i = 0; i < NP; i++) toks[i] = (int32_t)((i * 7919u + 13u) % (uint32_t)V), toks2[i] = (int32_t)((i * 104729u + 5u) % (uint32_t)V);
    float *ref = malloc((size_t)NP * V * sizeof(float)), *got = malloc((size_t)NP * V * sizeof(float));
    const bool quick = getenv("BRISK_TEST_QUICK") != NULL;
    for (int type = 0; type < BRISK_CACHE_K2 + 1; type++)
        if (!quick || type == BRISK_CACHE_F32 || type == BRISK_CACHE_Q8_0) test_type(m, type, 0, toks, toks2, V, ref, got, quick);
    test_type(m, BRISK_CACHE_F32, 48, toks, toks2, V, ref, got, quick);
    /* refusals */
    static const char *bad[] = {"0", "100", "-64", "64x", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("BRISK_ATTN_SPLIT", bad[i], 1);
        brisk_context_params cp = brisk_context_default_params();
        cp.n_ctx_seq = 128;
        brisk_context *c = NULL;
        brisk_error err = {0};
        CHECKF(brisk_context_init(m, &cp, &c, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "BRISK_ATTN_SPLIT") && !c,
               "BRISK_ATTN_SPLIT='%s': '%s'", bad[i], err.msg);
        brisk_context_free(c);
    }
    unsetenv("BRISK_ATTN_SPLIT");
    free(ref), free(got);
    brisk_model_free(m);
    return test_finish();
}
