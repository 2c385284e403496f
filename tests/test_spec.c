/* Speculative decoding: greedy is exact. Speculative greedy output equals plain
 * greedy output token for token, with the draft model, the n-gram drafter and
 * the adaptive mode, as chains and as trees (n-gram and draft-model trees of
 * width 3, and auto choosing between chain and tree), on
 *   - the committed cases: the bundled target (models/), the committed Q4_0
 *     draft (tests/data/spec, scripts/gen-spec-draft.py) and the 10 prompts of
 *     tests/data/greedy, 64 new tokens each, where plain greedy must also equal
 *     llama.cpp's continuation;
 *   - with ../shared, 12 prompts from the val split (200 new tokens each) and
 *     the F16 draft of ../shared/models.
 * Every fixed drafter must have had drafts both accepted and rejected. Sampled
 * n-gram trees run through the generator once (their distribution is tested
 * in test_spec_sampling). Also: the robustness errors (vocabulary mismatch,
 * larger draft, draft length beyond the context) and the n-gram drafter's
 * choice of match. */
#include "test.h"
#include "brisk.h"
#include "engine/engine_impl.h"   /* the drafter-only compression check reads a reference KV's slot positions */
#include "kv/kv.h"
#include "kv/policy.h"
#include "model/synth.h"
#include "quant/quant.h"
#include "spec/spec.h"

#include <stdint.h>

static brisk_model *target, *draft;
static int32_t n_vocab;
static brisk_spec_draft_kv draft_kv;   /* the draft context's KV in speculative_t (zero: F16, every slot kept) */

/* Prompt i: the i-th file of val.txt from its header line, whole lines until
 * at least 400 bytes (at most 1200). bench/spec.sh cuts the same prompts. */
static int val_prompts(const char *val, size_t len, const char **starts, size_t *lens, int max) {
    int n = 0;
    const char *tag = "# <<<FILE ";
    for (size_t i = 0; i + 10 < len && n < max; i++) {
        if ((i == 0 || val[i - 1] == '\n') && !memcmp(val + i, tag, 10)) {
            size_t e = i;
            while (e < len && e - i < 1200) {
                while (e < len && val[e] != '\n') e++;
                if (e < len) e++;
                if (e - i >= 400) break;
            }
            if (e - i > 1200) e = i + 1200;
            starts[n] = val + i;
            lens[n] = e - i;
            n++;
        }
    }
    return n;
}

static brisk_context *new_ctx(int n_ctx) {
    brisk_context_params p = brisk_context_default_params();
    p.n_ctx_seq = n_ctx;
    p.n_threads = 1;
    brisk_context *c = NULL;
    brisk_error err = {0};
    CHECKF(brisk_context_init(target, &p, &c, &err) == BRISK_OK, "context: %s", err.msg);
    return c;
}

static brisk_sampler *make_sampler(float temp) {
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.temp = temp;
    sp.seed = 0x5eed;   /* the default is a random seed; these runs must repeat */
    brisk_sampler *s = NULL;
    brisk_error err = {0};
    CHECKF(brisk_sampler_init(&s, &sp, n_vocab, &err) == BRISK_OK, "sampler: %s", err.msg);
    return s;
}

static brisk_sampler *greedy_sampler(void) { return make_sampler(0.0f); }

/* Plain greedy: n tokens (fewer at end of generation), the prompt in batches of n_batch. */
static int plain(brisk_context *c, const int32_t *ids, int n_ids, int n, int32_t *out) {
    brisk_error err = {0};
    brisk_sampler *s = greedy_sampler();
    brisk_seq_truncate(c, 0, 0, NULL);
    static int32_t pos[1024], seq[1024];
    static uint8_t want[1024];
    CHECK(n_ids >= 1 && n_ids <= 1024);
    if (n_ids < 1 || n_ids > 1024) { brisk_sampler_free(s); return 0; }
    for (int j = 0; j < n_ids; j++) { pos[j] = j; seq[j] = 0; want[j] = j == n_ids - 1; }
    const int nb = brisk_context_n_batch(c);
    for (int j0 = 0; j0 < n_ids; j0 += nb) {
        brisk_batch b = {n_ids - j0 < nb ? n_ids - j0 : nb, ids + j0, pos + j0, seq + j0, want + j0};
        CHECKF(brisk_decode(c, &b, &err) == BRISK_OK, "prefill: %s", err.msg);
    }
    for (int j = 0; j < n_ids; j++) brisk_sampler_accept(s, ids[j]);
    int g = 0;
    while (g < n) {
        int32_t t = brisk_sampler_sample(s, brisk_get_logits(c, 0));
        out[g++] = t;
        if (brisk_token_is_eog(target, t) || g == n) break;
        brisk_sampler_accept(s, t);
        int32_t p = n_ids + g - 1, s0 = 0;
        uint8_t one = 1;
        brisk_batch b1 = {1, &t, &p, &s0, &one};
        CHECKF(brisk_decode(c, &b1, &err) == BRISK_OK, "decode: %s", err.msg);
    }
    brisk_sampler_free(s);
    return g;
}

static int speculative_t(brisk_context *c, brisk_spec_mode mode, int k, int width, int window, float temp, const int32_t *ids, int n_ids,
                         int n, int32_t *out, brisk_spec_stats *stats) {
    brisk_error err = {0};
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.temp = temp;
    sp.seed = 0x5eed;
    brisk_sampler *s = make_sampler(temp);
    brisk_seq_truncate(c, 0, 0, NULL);
    brisk_spec_params p = brisk_spec_default_params();
    p.mode = mode;
    p.draft_max = k;
    p.draft = mode == BRISK_SPEC_NGRAM ? NULL : draft;
    p.n_threads = 1;
    p.tree_width = width;
    p.draft_window = window;
    p.draft_sink = window ? 4 : 0;
    p.draft_kv = draft_kv;
    brisk_spec *g = NULL;
    int got = 0;
    CHECKF(brisk_spec_init(&g, target, c, s, &sp, &p, &err) == BRISK_OK, "spec init: %s", err.msg);
    if (g && brisk_spec_prefill(g, ids, n_ids, &err) == BRISK_OK) {
        int32_t buf[64];
        while (got < n) {
            int32_t m = 0;
            if (brisk_spec_step(g, n - got, buf, &m, &err) != BRISK_OK) {
                CHECKF(0, "spec step: %s", err.msg);
                break;
            }
            CHECK(m >= 1 && m <= n - got);
            bool eog = false;
            for (int j = 0; j < m && !eog; j++) {
                out[got++] = buf[j];
                eog = brisk_token_is_eog(target, buf[j]);
            }
            if (eog) break;
        }
        brisk_spec_get_stats(g, stats);
    } else {
        CHECKF(0, "spec prefill: %s", err.msg);
    }
    brisk_spec_free(g);
    brisk_sampler_free(s);
    return got;
}

static int speculative(brisk_context *c, brisk_spec_mode mode, int k, int width, int window, const int32_t *ids, int n_ids, int n, int32_t *out,
                       brisk_spec_stats *stats) {
    return speculative_t(c, mode, k, width, window, 0.0f, ids, n_ids, n, out, stats);
}

/* Sampled n-gram trees run through the generator (their distribution is
 * tested in test_spec_sampling): a prompt that repeats, so trees branch. */
static void test_sampled_trees(void) {
    const char *text = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n    return a * b\n\n"
                       "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n";
    int32_t *ids = NULL, out[256];
    size_t n_ids = 0;
    brisk_error err = {0};
    CHECKF(brisk_tokenize_text(target, text, strlen(text), true, false, &ids, &n_ids, &err) == BRISK_OK, "%s", err.msg);
    brisk_context *c = new_ctx(512);
    const brisk_spec_mode modes[2] = {BRISK_SPEC_NGRAM, BRISK_SPEC_AUTO};
    for (int m = 0; m < 2; m++) {
        brisk_spec_stats st = {0};
        const int n = test_quick() ? 40 : 150;
        const int got = speculative_t(c, modes[m], 8, 3, 0, 1.0f, ids, (int)n_ids, n, out, &st);
        CHECKF(got == n || (got > 0 && brisk_token_is_eog(target, out[got - 1])), "sampled trees: %d of %d tokens", got, n);
        printf("sampled n-gram trees (%s): %d tokens, %lld of %lld speculative passes branching, %lld accepted of %lld\n",
               m == 0 ? "ngram" : "auto", got, (long long)st.tree_rounds, (long long)st.spec_rounds, (long long)st.accepted,
               (long long)st.drafted);
        if (m == 0 && !test_quick()) CHECK(st.tree_rounds > 0);
    }
    brisk_context_free(c);
    free(ids);
}

/* One prompt for the exactness runs; with has_ref, ref (n_ref tokens) is
 * llama.cpp's greedy continuation, which ends at end of generation when
 * shorter than the run. */
typedef struct exact_case {
    int32_t *ids;
    int n_ids;
    int32_t *ref;
    int n_ref;
    bool has_ref;
} exact_case;

/* Every mode on every case: speculative greedy == plain greedy (== ref). */
static void run_exact(const char *label, const exact_case *cases, int n_cases, int n_new, int n_ctx) {
    brisk_context *c = new_ctx(n_ctx);
    if (!c) return;
    static int32_t want[256], got[256];
    /* trees: every round of the fixed modes verifies the drafter's whole tree
     * (branching whenever the drafter has runners-up); auto picks per round */
    /* (the windowed draft: sink 4 + the last 32 positions) */
    const struct { brisk_spec_mode mode; int k, width, window; const char *name; } modes[] = {
        {BRISK_SPEC_DRAFT, 4, 1, 0, "draft k=4"},       {BRISK_SPEC_NGRAM, 8, 1, 0, "ngram k=8"},
        {BRISK_SPEC_AUTO, 16, 1, 0, "auto"},            {BRISK_SPEC_NGRAM, 8, 3, 0, "ngram tree k=8 w=3"},
        {BRISK_SPEC_DRAFT, 4, 3, 0, "draft tree k=4 w=3"}, {BRISK_SPEC_AUTO, 16, 3, 0, "auto w=3"},
        {BRISK_SPEC_DRAFT, 4, 1, 32, "draft k=4 window 32"}, {BRISK_SPEC_DRAFT, 16, 1, 0, "draft k=16"}};
    enum { N_MODES = sizeof modes / sizeof modes[0] };
    const int n_modes = test_quick() ? N_MODES - 1 : N_MODES;
    int64_t drafted[N_MODES] = {0}, accepted[N_MODES] = {0}, passes[N_MODES] = {0}, emitted[N_MODES] = {0},
            identical[N_MODES] = {0}, trees[N_MODES] = {0}, rounds[N_MODES] = {0};
    int same_ref = 0, with_ref = 0;
    CHECK(n_new <= 256);
    for (int i = 0; i < n_cases; i++) {
        const exact_case *e = &cases[i];
        const int nw = plain(c, e->ids, e->n_ids, n_new, want);
        if (e->has_ref) {   /* plain greedy against llama.cpp: the first n_new tokens, or all and end of generation */
            const int n = e->n_ref < n_new ? e->n_ref : n_new;
            const bool same = (n == 0 || !memcmp(want, e->ref, (size_t)n * sizeof(int32_t))) &&
                              (e->n_ref >= n_new ? nw == n_new : nw == n + 1 && brisk_token_is_eog(target, want[n]));
            CHECKF(same, "%s, case %d: plain greedy differs from llama.cpp's continuation", label, i);
            same_ref += same;
            with_ref++;
        }
        for (int m = 0; m < n_modes; m++) {
            brisk_spec_stats st = {0};
            const int ng = speculative(c, modes[m].mode, modes[m].k, modes[m].width, modes[m].window, e->ids, e->n_ids, n_new, got, &st);
            const bool same = ng == nw && !memcmp(want, got, (size_t)nw * sizeof(int32_t));
            CHECKF(same, "%s, case %d, %s: speculative greedy output differs from plain (%d vs %d tokens)", label, i, modes[m].name, ng, nw);
            identical[m] += same;
            drafted[m] += st.drafted;
            accepted[m] += st.accepted;
            passes[m] += st.target_passes;
            emitted[m] += st.emitted;
            trees[m] += st.tree_rounds;
            rounds[m] += st.spec_rounds;
        }
    }
    printf("%s: %d cases, %d new tokens each%s\n", label, n_cases, n_new, with_ref ? "" : " (no llama.cpp reference)");
    if (with_ref) printf("plain greedy equals llama.cpp's continuation: %d/%d\n", same_ref, with_ref);
    for (int m = 0; m < n_modes; m++) {
        printf("%-18s identical %lld/%d | acceptance %.1f%% (%lld/%lld) | accepted per pass %.2f | target passes per token %.3f | "
               "tree passes %lld/%lld\n",
               modes[m].name, (long long)identical[m], n_cases,
               drafted[m] ? 100.0 * (double)accepted[m] / (double)drafted[m] : 0.0, (long long)accepted[m], (long long)drafted[m],
               rounds[m] ? (double)accepted[m] / (double)rounds[m] : 0.0, emitted[m] ? (double)passes[m] / (double)emitted[m] : 0.0,
               (long long)trees[m], (long long)rounds[m]);
        /* an exactness run where nothing was drafted, or every draft was taken
         * or refused, checked one path of the verifier only (auto, which picks
         * its drafter per round, may take all of its few drafts) */
        const bool both = accepted[m] > 0 && (accepted[m] < drafted[m] || modes[m].mode == BRISK_SPEC_AUTO);
        CHECKF(both, "%s, %s: %lld of %lld drafts accepted (both paths must run)", label, modes[m].name, (long long)accepted[m],
               (long long)drafted[m]);
    }
    /* the fixed tree modes must have verified branching trees */
    if (!test_quick()) CHECKF(trees[3] > 0 && trees[4] > 0, "%s: no branching tree verified", label);
    brisk_context_free(c);
}

/* The committed cases: tests/data/greedy's prompt ids and llama.cpp's
 * continuations (NN.ids: prompt ids, "--", generated ids). */
static int read_ids(FILE *f, int32_t **ids) {
    static char line[1 << 16];
    *ids = NULL;
    if (!fgets(line, sizeof line, f)) return -1;
    int n = 0, cap = 0;
    for (char *p = line, *end;; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        if (n == cap) {
            int32_t *grown = realloc(*ids, sizeof(int32_t) * (size_t)(cap = cap ? 2 * cap : 256));
            if (!grown) break;
            *ids = grown;
        }
        (*ids)[n++] = (int32_t)v;
    }
    return n;
}

static void test_exact_committed(void) {
    char dir[1024], path[1400];
    static char names[128][TEST_NAME_MAX];
    test_source("tests/data/greedy", dir, sizeof dir);
    const int n = test_list(dir, ".ids", names, 128);
    CHECKF(n > 0, "%s: no cases", dir);
    static exact_case cases[128];
    int n_cases = 0;
    for (int i = 0; i < n; i++) {
        if (test_quick() && i % 3) continue;   /* the sanitizer run: every third case ... */
        snprintf(path, sizeof path, "%.1023s/%.255s.ids", dir, names[i]);
        FILE *f = fopen(path, "r");
        exact_case *e = &cases[n_cases];
        char sep[8];
        e->ids = e->ref = NULL;
        e->n_ids = f ? read_ids(f, &e->ids) : -1;
        const bool ok = e->n_ids > 0 && fgets(sep, sizeof sep, f) && !strcmp(sep, "--\n");
        e->n_ref = ok ? read_ids(f, &e->ref) : -1;
        if (e->n_ref < 0) e->n_ref = 0;   /* an empty line: end of generation at once */
        e->has_ref = ok;
        if (f) fclose(f);
        CHECKF(ok && e->n_ids + 64 + 16 <= 1024, "%s: not 'prompt ids, --, generated ids' (or too long)", path);
        if (ok && e->n_ids + 64 + 16 <= 1024 && !(test_quick() && e->n_ids > 128)) n_cases++;   /* ... of short prompts */
        else { free(e->ids); free(e->ref); }
    }
    test_count("committed exactness cases (tests/data/greedy)", n_cases);
    run_exact("committed (tests/data/greedy, Q4_0 draft)", cases, n_cases, test_quick() ? 40 : 64, 1024);
    for (int i = 0; i < n_cases; i++) { free(cases[i].ids); free(cases[i].ref); }
}

/* With ../shared: prompts cut from the val split (bench/spec.sh cuts the same). */
static void test_exact_shared(const char *val_path) {
    FILE *f = fopen(val_path, "rb");
    CHECKF(f, "%s: cannot open", val_path);
    if (!f) return;
    char *val = malloc(700000);
    const size_t len = fread(val, 1, 700000, f);
    fclose(f);
    const char *starts[12];
    size_t lens[12];
    const int n_prompts = test_quick() ? 1 : 12, n_new = test_quick() ? 40 : 200;
    const int got_prompts = val_prompts(val, len, starts, lens, n_prompts);
    CHECK(got_prompts == n_prompts);
    exact_case cases[12];
    int n_cases = 0;
    for (int i = 0; i < got_prompts; i++) {
        size_t n_ids = 0;
        brisk_error err = {0};
        exact_case *e = &cases[n_cases];
        e->ref = NULL;
        e->n_ref = 0;
        e->has_ref = false;
        const bool ok = brisk_tokenize_text(target, starts[i], lens[i], true, false, &e->ids, &n_ids, &err) == BRISK_OK;
        CHECKF(ok, "%s", err.msg);
        if (!ok) continue;
        const size_t cap = test_quick() ? 128 : 300;   /* prompts are up to 300 tokens (128 in the sanitizer run) */
        e->n_ids = (int)(n_ids > cap ? cap : n_ids);
        n_cases++;
    }
    test_count("shared exactness cases (val split)", n_cases);
    run_exact("shared (val split, F16 draft)", cases, n_cases, n_new, 512);
    for (int i = 0; i < n_cases; i++) free(cases[i].ids);
    free(val);
}

/* The n-gram drafter proposes what followed the longest (then most recent) suffix match. */
static void test_ngram(void) {
    brisk_drafter *d = NULL;
    brisk_error err = {0};
    CHECK(brisk_drafter_ngram_init(&d, 2, 4, &err) == BRISK_OK);
    brisk_draft out;
    /* ... 1 2 3 9 ... 2 3 7 8 ... 1 2 3 | the 3-token match wins over the later 2-token one */
    const int32_t h[] = {1, 2, 3, 9, 10, 2, 3, 7, 8, 1, 2, 3};
    CHECK(d->propose(d, h, 12, 4, &out, &err) == BRISK_OK);
    CHECK(out.n == 4 && out.tokens[0] == 9 && out.tokens[1] == 10 && out.tokens[2] == 2 && out.match_len == 3);
    /* ties go to the most recent occurrence */
    const int32_t h2[] = {5, 6, 1, 5, 6, 2, 5, 6};
    CHECK(d->propose(d, h2, 8, 4, &out, &err) == BRISK_OK);
    CHECK(out.n >= 1 && out.tokens[0] == 2 && out.match_len == 2);
    /* no match of the minimum length: nothing */
    const int32_t h3[] = {1, 2, 3, 4, 5};
    CHECK(d->propose(d, h3, 5, 4, &out, &err) == BRISK_OK && out.n == 0);
    /* k bounds the proposal; a continuation that runs into the end of the
     * history repeats the text since the match (its period) */
    const int32_t h4[] = {7, 7, 7, 7};
    CHECK(d->propose(d, h4, 4, 2, &out, &err) == BRISK_OK && out.n == 2 && out.tokens[0] == 7 && out.tokens[1] == 7);
    const int32_t h7[] = {5, 1, 2, 3, 1, 2};
    CHECK(d->propose(d, h7, 6, 4, &out, &err) == BRISK_OK);
    CHECKF(out.n == 4 && out.tokens[0] == 3 && out.tokens[1] == 1 && out.tokens[2] == 2 && out.tokens[3] == 3,
           "periodic continuation: %d tokens", out.n);
    /* trees: the best match's continuation first (ranks 0), then a distinct one beside it */
    brisk_draft_tree t;
    const int32_t h5[] = {1, 2, 3, 9, 10, 5, 2, 3, 7, 8, 1, 2, 3};
    CHECK(d->propose_tree(d, h5, 13, 3, 2, 32, &t, &err) == BRISK_OK);
    CHECKF(t.n == 6 && t.match_len == 3, "n-gram tree: %d nodes, match %d", t.n, t.match_len);
    const int32_t et[6] = {9, 10, 5, 7, 8, 1}, ep[6] = {-1, 0, 1, -1, 3, 4}, er[6] = {0, 0, 0, 1, 0, 0};
    for (int i = 0; i < 6 && t.n == 6; i++)
        CHECKF(t.tokens[i] == et[i] && t.parent[i] == ep[i] && t.rank[i] == er[i] && t.depth[i] == i % 3 + 1, "n-gram tree node %d", i);
    /* shared prefixes merge; the node budget and the width bound the tree */
    const int32_t h6[] = {1, 2, 3, 9, 10, 4, 2, 3, 9, 11, 1, 2, 3};
    CHECK(d->propose_tree(d, h6, 13, 3, 2, 32, &t, &err) == BRISK_OK);
    CHECKF(t.n == 5 && t.tokens[3] == 11 && t.parent[3] == 0 && t.rank[3] == 1, "merged tree: %d nodes", t.n);
    CHECK(d->propose_tree(d, h6, 13, 3, 2, 2, &t, &err) == BRISK_OK && t.n == 2);
    CHECK(d->propose_tree(d, h5, 13, 3, 1, 32, &t, &err) == BRISK_OK && t.n == 3);
    brisk_drafter_free(d);
    CHECK(brisk_drafter_ngram_init(&d, 0, 4, &err) == BRISK_ERR_INVALID_ARG);
    CHECK(brisk_drafter_ngram_init(&d, 2, BRISK_SPEC_MAX_DRAFT + 1, &err) == BRISK_ERR_INVALID_ARG);
}

static void test_errors(void) {
    brisk_error err = {0};
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.temp = 0.0f;
    brisk_sampler *s = greedy_sampler();
    brisk_context *c = new_ctx(64);
    brisk_spec *g = NULL;
    brisk_spec_params p = brisk_spec_default_params();

    /* a vocabulary that differs: a synthetic qwen3-tiny (512 tokens) as the draft */
    char path[] = "/tmp/brisk-test-spec-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    brisk_model *other = NULL;
    if (fd >= 0 && brisk_synth_write(brisk_synth_find("qwen3-tiny"), BRISK_Q_F16, 1, path, NULL, NULL, &err) == BRISK_OK &&
        brisk_model_load(path, &other, &err) == BRISK_OK) {
        p.mode = BRISK_SPEC_DRAFT;
        p.draft = other;
        CHECK(brisk_spec_init(&g, target, c, s, &sp, &p, &err) == BRISK_ERR_INVALID_ARG);
        printf("mismatch: %s\n", err.msg);
        CHECKF(strstr(err.msg, "(512 tokens)") && strstr(err.msg, "(4096 tokens)") && strstr(err.msg, "first difference at token"),
               "%s", err.msg);
        CHECK(brisk_spec_check_vocab(target, draft, &err) == BRISK_OK);
    } else {
        CHECKF(0, "synth: %s", err.msg);
    }
    brisk_model_free(other);
    unlink(path);

    /* a draft larger than the target: accepted with a warning */
    p = brisk_spec_default_params();
    p.mode = BRISK_SPEC_DRAFT;
    p.draft = target;   /* the target drafting for itself: same size, no warning */
    CHECK(brisk_spec_init(&g, target, c, s, &sp, &p, &err) == BRISK_OK && brisk_spec_warning(g)[0] == 0);
    brisk_spec_free(g);
    g = NULL;
    {
        brisk_context_params cp = brisk_context_default_params();
        cp.n_ctx_seq = 64;
        cp.n_threads = 1;
        brisk_context *dc = NULL;
        CHECK(brisk_context_init(draft, &cp, &dc, &err) == BRISK_OK);
        p.draft = target;
        CHECK(brisk_spec_init(&g, draft, dc, s, &sp, &p, &err) == BRISK_OK);
        CHECKF(g && strstr(brisk_spec_warning(g), "larger than the target"), "%s", g ? brisk_spec_warning(g) : "");
        brisk_spec_free(g);
        g = NULL;
        brisk_context_free(dc);
    }

    /* k larger than the remaining context: a clear refusal */
    p = brisk_spec_default_params();
    p.mode = BRISK_SPEC_NGRAM;
    p.draft_max = 16;
    int32_t ids[60];
    for (int i = 0; i < 60; i++) ids[i] = 3 + i;
    CHECK(brisk_spec_init(&g, target, c, s, &sp, &p, &err) == BRISK_OK);
    CHECK(g && brisk_spec_prefill(g, ids, 60, &err) == BRISK_ERR_CAPACITY);
    printf("remaining context: %s\n", err.msg);
    CHECKF(strstr(err.msg, "exceeds the 4 tokens left in the context"), "%s", err.msg);
    brisk_spec_free(g);
    g = NULL;
    p.draft_max = 64;
    CHECK(brisk_spec_init(&g, target, c, s, &sp, &p, &err) == BRISK_ERR_INVALID_ARG && !g);
    p.draft_max = 0;
    p.mode = BRISK_SPEC_DRAFT;   /* without a draft model */
    CHECK(brisk_spec_init(&g, target, c, s, &sp, &p, &err) == BRISK_ERR_INVALID_ARG && !g);

    /* near the end of the context k shrinks: a full run to the last slot */
    p = brisk_spec_default_params();
    p.mode = BRISK_SPEC_NGRAM;
    CHECK(brisk_spec_init(&g, target, c, s, &sp, &p, &err) == BRISK_OK);
    brisk_seq_truncate(c, 0, 0, NULL);
    brisk_sampler_reset(s);
    if (g && brisk_spec_prefill(g, ids, 10, &err) == BRISK_OK) {
        int total = 0;
        int32_t buf[64];
        while (total < 54) {
            int32_t m = 0;
            if (brisk_spec_step(g, 54 - total, buf, &m, &err)) break;
            total += m;
        }
        CHECKF(total == 54, "generated %d of 54 (%s)", total, err.msg);
        CHECK(brisk_seq_len(c, 0) <= 64);
    }
    brisk_spec_free(g);
    brisk_context_free(c);
    brisk_sampler_free(s);
}

/* ---- drafter-only compression ---------------------------------------------------------------------------
 * The draft's cache quantized and/or evicting while the target keeps its own (docs/KV.md).
 * (1) The drafter against a reference: a second draft context with the same cache, driven here through the
 *     KV's recorded slot positions (brisk_kv_slot_pos: truncation by position, the truth the drafter's own
 *     bookkeeping must reproduce), fed in the same batches (at most budget - sink - window tokens). Rounds
 *     take a pseudo-random number of the drafts and then a token of their own (a rejection, or a bonus), so
 *     rollbacks of every depth up to k happen while the policy evicts. The drafts must be equal in every
 *     round (the same slots in the same passes give the same bits).
 * (2) Greedy speculative output with the compressed draft equals plain greedy on the committed cases, drafts
 *     were both accepted and rejected, and, for the evicting caches, slots were really dropped. */

static int32_t argmax_logits(const float *lg) {
    int32_t best = 0;
    for (int32_t t = 1; t < n_vocab; t++)
        if (lg[t] > lg[best]) best = t;
    return best;
}

/* Decode toks[0..c) at positions p0.. of sequence 0 (the last one's logits kept). */
static bool ref_feed(brisk_context *c, const int32_t *toks, int32_t cnt, int32_t p0) {
    static int32_t pos[64], seq[64];
    static uint8_t want[64];
    CHECK(cnt >= 1 && cnt <= 64);
    for (int32_t j = 0; j < cnt; j++) { pos[j] = p0 + j; seq[j] = 0; want[j] = j == cnt - 1; }
    brisk_error err = {0};
    const brisk_batch b = {cnt, toks, pos, seq, want};
    const bool ok = brisk_decode(c, &b, &err) == BRISK_OK;
    CHECKF(ok, "reference draft decode at %d: %s", p0, err.msg);
    return ok;
}

static void drafter_vs_reference(const char *label, const brisk_spec_draft_kv *kv, const int32_t *prompt, int n_prompt, int k, int rounds) {
    enum { N_CTX = 512 };
    brisk_error err = {0};
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.temp = 0.0f;
    sp.seed = 0x5eed;
    brisk_drafter *d = NULL;
    CHECKF(brisk_drafter_model_init(&d, draft, target, N_CTX, 1, k, &sp, 0, 0, kv, &err) == BRISK_OK, "%s: drafter: %s", label, err.msg);
    const brisk_context_params rp = brisk_spec_draft_context_params(N_CTX, 1, 0, 0, kv);
    brisk_context *ref = NULL;
    CHECKF(brisk_context_init(draft, &rp, &ref, &err) == BRISK_OK, "%s: reference context: %s", label, err.msg);
    if (!d || !ref) { brisk_drafter_free(d); brisk_context_free(ref); return; }
    const int32_t room = kv->policy ? kv->budget - kv->sink - kv->window : 64;
    static int32_t hist[N_CTX], ref_tok[N_CTX];
    int32_t n = n_prompt, ref_n = 0, same_rounds = 0, done = 0, depth_seen[33] = {0};
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    uint32_t rng = 12345;
    for (int r = 0; r < rounds && n + k + 1 < N_CTX; r++, done++) {
        brisk_draft dr;
        if (d->propose(d, hist, n, k, &dr, &err) != BRISK_OK) { CHECKF(0, "%s, round %d: propose: %s", label, r, err.msg); break; }
        /* the reference: keep the positions that agree (at most n - 1), cut the slots from the first one at or past them */
        int32_t keep = 0;
        while (keep < ref_n && keep < n - 1 && ref_tok[keep] == hist[keep]) keep++;
        const brisk_kv *rkv = ref->kv;
        int32_t slots = 0;
        while (slots < brisk_seq_len(ref, 0) && brisk_kv_slot_pos(rkv, 0, slots) < keep) slots++;
        brisk_seq_truncate(ref, 0, slots, NULL);
        ref_n = slots > 0 ? brisk_kv_slot_pos(rkv, 0, slots - 1) + 1 : 0;
        CHECKF(ref_n == keep || ref_n == 0, "%s, round %d: position %d was evicted (the test's window must exceed k)", label, r, keep - 1);
        bool ok = true;
        while (ok && ref_n < n) {
            const int32_t cnt = BRISK_MIN(room, n - ref_n);
            ok = ref_feed(ref, hist + ref_n, cnt, ref_n);
            memcpy(ref_tok + ref_n, hist + ref_n, (size_t)cnt * sizeof *ref_tok);
            ref_n += cnt;
        }
        int32_t want[32];
        for (int i = 0; ok && i < k; i++) {
            want[i] = argmax_logits(brisk_get_logits(ref, 0));
            if (i + 1 == k) break;
            ok = ref_feed(ref, &want[i], 1, ref_n);
            ref_tok[ref_n++] = want[i];
        }
        if (!ok) break;
        const bool same = dr.n == k && !memcmp(dr.tokens, want, (size_t)k * sizeof *want);
        CHECKF(same, "%s, round %d (history %d): the drafter's drafts differ from the reference's", label, r, n);
        same_rounds += same;
        /* take j of the drafts, then a token of the round's own: another than draft j (a rejection) or a bonus */
        rng = rng * 1103515245u + 12345u;
        const int j = (int)((rng >> 16) % (uint32_t)(k + 1));
        depth_seen[j]++;
        memcpy(hist + n, dr.tokens, (size_t)j * sizeof *hist);
        n += j;
        const int32_t own = 3 + (int32_t)((rng >> 8) % 200u);
        hist[n++] = j < k && own == dr.tokens[j] ? own + 1 : own;
    }
    brisk_cache_stats cs;
    int64_t restarts = -1;
    CHECK(brisk_drafter_model_kv_stats(d, &cs, &restarts));
    int depths = 0;
    for (int j = 0; j <= k; j++) depths += depth_seen[j] > 0;
    printf("drafter vs reference, %s: %d/%d rounds equal, history %d, %lld slots dropped, %lld rebuilds, %d of %d rollback depths\n", label,
           same_rounds, done, n, (long long)cs.dropped, (long long)restarts, depths, k + 1);
    CHECKF(same_rounds == done && done > 0, "%s: %d of %d rounds equal", label, same_rounds, done);
    if (kv->policy) {
        CHECKF(cs.dropped > 0, "%s: the draft's policy never evicted", label);
        CHECKF(restarts == 0, "%s: %lld rebuilds (every rollback was inside the window)", label, (long long)restarts);
        CHECKF(cs.in_use_max * BRISK_KV_BLOCK <= kv->budget + BRISK_KV_BLOCK - 1, "%s: the draft pool's peak %d blocks exceeds the budget %d",
               label, cs.in_use_max, kv->budget);
    }
    CHECKF(depths == k + 1, "%s: only %d of %d rollback depths ran", label, depths, k + 1);
    brisk_drafter_free(d);
    brisk_context_free(ref);
}

static void test_draft_compressed(void) {
    static const char text[] =
        "import os\nimport sys\n\n\ndef main(argv):\n    parser = argparse.ArgumentParser(description='copy files')\n"
        "    parser.add_argument('src')\n    parser.add_argument('dst')\n    args = parser.parse_args(argv)\n"
        "    for name in os.listdir(args.src):\n        path = os.path.join(args.src, name)\n";
    int32_t *ids = NULL;
    size_t n_ids = 0;
    brisk_error err = {0};
    CHECKF(brisk_tokenize_text(target, text, sizeof text - 1, true, false, &ids, &n_ids, &err) == BRISK_OK, "%s", err.msg);
    CHECK(n_ids > 60);
    const brisk_spec_draft_kv f16_stream = {.policy = BRISK_KV_POLICY_STREAMING, .budget = 40, .sink = 4, .window = 8};
    const brisk_spec_draft_kv q4_stream = {.type_k = BRISK_CACHE_Q4_0, .type_v = BRISK_CACHE_Q4_0, .policy = BRISK_KV_POLICY_STREAMING,
                                           .budget = 48, .sink = 2, .window = 16};
    const brisk_spec_draft_kv q8_random = {.type_k = BRISK_CACHE_Q8_0, .type_v = BRISK_CACHE_Q8_0, .policy = BRISK_KV_POLICY_RANDOM,
                                           .budget = 40, .sink = 4, .window = 8};
    const int rounds = test_quick() ? 40 : 120;
    drafter_vs_reference("f16, streaming 40 (sink 4, window 8), k=4", &f16_stream, ids, (int)n_ids, 4, rounds);
    drafter_vs_reference("q4_0, streaming 48 (sink 2, window 16), k=8", &q4_stream, ids, (int)n_ids, 8, rounds);
    drafter_vs_reference("q8_0, random 40 (sink 4, window 8), k=4", &q8_random, ids, (int)n_ids, 4, rounds);
    free(ids);

    /* (2) the generator on the committed cases: the target's output, whatever the draft's cache */
    char dir[1024], path[1400];
    static char names[128][TEST_NAME_MAX];
    test_source("tests/data/greedy", dir, sizeof dir);
    const int n_files = test_list(dir, ".ids", names, 128);
    static exact_case cases[128];
    int n_cases = 0;
    for (int i = 0; i < n_files && n_cases < (test_quick() ? 3 : 10); i++) {
        snprintf(path, sizeof path, "%.1023s/%.255s.ids", dir, names[i]);
        FILE *f = fopen(path, "r");
        exact_case *e = &cases[n_cases];
        e->ids = e->ref = NULL;
        e->n_ids = f ? read_ids(f, &e->ids) : -1;
        if (f) fclose(f);
        if (e->n_ids > 0 && e->n_ids + 64 + 16 <= 512) n_cases++;
        else free(e->ids);
    }
    CHECKF(n_cases > 0, "%s: no cases", dir);
    const struct { brisk_spec_draft_kv kv; int k; const char *name; } cfgs[] = {
        {{.type_k = BRISK_CACHE_Q8_0, .type_v = BRISK_CACHE_Q8_0}, 4, "q8_0"},
        {{.type_k = BRISK_CACHE_Q4_0, .type_v = BRISK_CACHE_Q4_0}, 4, "q4_0"},
        {{.policy = BRISK_KV_POLICY_STREAMING, .budget = 40, .sink = 4, .window = 8}, 4, "streaming 40"},
        {{.type_k = BRISK_CACHE_Q4_0, .type_v = BRISK_CACHE_Q4_0, .policy = BRISK_KV_POLICY_STREAMING, .budget = 40, .sink = 4, .window = 8},
         4, "q4_0 + streaming 40"},
        /* a window shorter than the drafts: deep rollbacks rebuild the draft KV */
        {{.policy = BRISK_KV_POLICY_STREAMING, .budget = 16, .sink = 2, .window = 2}, 8, "streaming 16, window 2, k=8"},
    };
    brisk_context *c = new_ctx(512);
    static int32_t want[128], got[128];
    const int n_new = 64;
    for (size_t m = 0; c && m < sizeof cfgs / sizeof cfgs[0]; m++) {
        int64_t drafted = 0, accepted = 0, dropped = 0, restarts = 0;
        int identical = 0;
        draft_kv = cfgs[m].kv;
        for (int i = 0; i < n_cases; i++) {
            const int nw = plain(c, cases[i].ids, cases[i].n_ids, n_new, want);
            brisk_spec_stats st = {0};
            const int ng = speculative(c, BRISK_SPEC_DRAFT, cfgs[m].k, 1, 0, cases[i].ids, cases[i].n_ids, n_new, got, &st);
            const bool same = ng == nw && !memcmp(want, got, (size_t)nw * sizeof(int32_t));
            CHECKF(same, "draft cache %s, case %d: speculative greedy output differs from plain", cfgs[m].name, i);
            identical += same;
            drafted += st.drafted;
            accepted += st.accepted;
            dropped += st.draft_dropped;
            restarts += st.draft_restarts;
        }
        printf("draft cache %-28s identical %d/%d | acceptance %.1f%% (%lld/%lld) | %lld slots dropped, %lld rebuilds\n", cfgs[m].name,
               identical, n_cases, drafted ? 100.0 * (double)accepted / (double)drafted : 0.0, (long long)accepted, (long long)drafted,
               (long long)dropped, (long long)restarts);
        CHECKF(accepted > 0 && accepted < drafted, "draft cache %s: %lld of %lld accepted (both paths must run)", cfgs[m].name,
               (long long)accepted, (long long)drafted);
        if (cfgs[m].kv.policy) CHECKF(dropped > 0, "draft cache %s: nothing was evicted", cfgs[m].name);
    }
    draft_kv = (brisk_spec_draft_kv){0};
    brisk_context_free(c);
    for (int i = 0; i < n_cases; i++) free(cases[i].ids);
}

int main(void) {
    char tp[1024], dp[1024], sdp[1024], val[1024];
    test_source("models/pycode-target-f16.gguf", tp, sizeof tp);
    test_source("tests/data/spec/pycode-draft-q4_0.gguf", dp, sizeof dp);
    test_shared("models/pycode-draft-f16.gguf", sdp, sizeof sdp);
    test_shared("models/data/val.txt", val, sizeof val);
    brisk_error err = {0};
    if (brisk_model_load(tp, &target, &err) || brisk_model_load(dp, &draft, &err)) {
        fprintf(stderr, "FAIL: load: %s\n", err.msg);
        return 1;
    }
    brisk_model_info info;
    brisk_model_get_info(target, &info);
    n_vocab = info.n_vocab;
    test_ngram();
    test_errors();
    test_sampled_trees();
    test_exact_committed();
    test_draft_compressed();
    if (test_exists(sdp) && test_exists(val)) {
        brisk_model *q4 = draft;
        draft = NULL;
        CHECKF(brisk_model_load(sdp, &draft, &err) == BRISK_OK, "%s: %s", sdp, err.msg);
        if (draft) test_exact_shared(val);
        brisk_model_free(draft);
        draft = q4;
    } else {
        printf("SKIP shared exactness cases: %s or %s absent (the committed cases ran)\n", sdp, val);
    }
    brisk_model_free(draft);
    brisk_model_free(target);
    return test_finish();
}
