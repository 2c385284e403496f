/* spec: the speculative generator — the round loop, the target's cost
 * curve and the adaptive draft-length policy.
 *
 * State between rounds: hist holds every token of the sequence; the target
 * KV holds all but the last one (the "pending" token), whose logits are not
 * computed yet. A round decodes [pending, d1..dk] in one pass, verifies, and
 * truncates the KV to pending + the accepted drafts. Right after prefill the
 * KV holds the whole prompt and its last logits are ready ("fresh"), so the
 * first token is sampled exactly as plain decoding samples it.
 *
 * Policy (AUTO): with acceptance probability a per drafted token, assumed
 * independent, a round of k drafts yields E(k) = (1 - a^(k+1)) / (1 - a)
 * tokens and costs T(k) = f * (c(k+1) + k * t_draft + E(k) * t_verify), where
 * c(n) is the target's measured cost of a pass over n tokens (the calibrated
 * shape times a scale that follows drift: context growth, machine load),
 * t_verify the sampling cost per token, and f the measured ratio of actual to
 * predicted time of past speculative rounds (what the model misses). The
 * round takes the drafter and k with the highest E(k) / T(k), or k = 0 when
 * plain decoding's 1 / (c(1) + t_verify) beats all of them.
 * The acceptance of the n-gram drafter is kept per match-length bucket and is
 * also learnt while not speculating (its proposals are compared with the
 * tokens that plain decoding produces); the draft model is probed with
 * exponential back-off while it is not chosen.
 *
 * Trees (tree_width > 1; when sampling n-gram trees only): a round decodes
 * [pending, tree] with brisk_decode_tree, walks the tree with the verifier
 * and keeps the accepted path's KV with brisk_seq_keep_path. In AUTO a tree is scored like
 * a chain: node i is accepted with probability P(parent) * a for a first
 * choice, P(parent) * (1 - a) * (1 - b)^(r - 1) * b for the r-th runner-up,
 * where b (a runner-up is right when the choices before it were wrong) is
 * learnt per drafter from tree rounds; E = 1 + sum P(i), cost c(nodes + 1);
 * the tree is pruned to each depth and the best of chain, tree and plain
 * decoding is taken. */
#include "spec/spec.h"
#include "base/base.h"
#include "sample/sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NG_BUCKETS 6          /* n-gram match lengths 1, 2, 3-4, 5-8, 9-16, 17+ */
#define ACC_DECAY 0.97        /* weight of older acceptance trials per new trial */
#define COST_EMA 0.15         /* weight of a new pass time in the cost table */
#define PROBE_MIN 32          /* rounds between draft-model probes, doubling up to PROBE_MAX */
#define PROBE_MAX 1024
#define PROBE_ALPHA 0.85      /* probe the draft model only if it would pay at this acceptance */

typedef struct acc_est {
    double acc, tested;       /* decayed counts of accepted and tested draft tokens */
} acc_est;

typedef struct shadow {       /* an n-gram proposal followed while decoding plainly */
    int32_t tokens[BRISK_SPEC_MAX_DRAFT];
    int32_t n, idx, bucket;
    bool active;
} shadow;

struct brisk_spec {
    brisk_spec_params p;
    const brisk_model *tm;
    brisk_context *ctx;
    brisk_sampler *smp;
    brisk_verify_opts vo;
    int32_t n_vocab, n_ctx, n_batch, kmax;
    bool explicit_k;
    brisk_drafter *dm, *ng;   /* draft model / n-gram (either may be NULL) */
    int32_t *hist;            /* [n_ctx + 1] */
    int32_t n_hist;
    bool fresh;               /* the logits of hist[n_hist-1] are in ctx row 0 */
    int32_t *btok, *bpos, *bseq;
    uint8_t *bwant;           /* [n_batch] */
    float *scratch;           /* [2 * n_vocab] */
    const float *rows[BRISK_SPEC_MAX_TREE + BRISK_SPEC_MAX_DRAFT + 1];
    /* trees */
    bool tree_on;                             /* tree_width > 1 */
    bool tree_dm;                             /* ... and greedy: the draft model drafts trees too */
    int32_t width, tree_nodes, nmax;          /* nmax: the largest pass (tokens) */
    int32_t *bpar;                            /* [n_batch] parents for brisk_decode_tree */
    int32_t ptok[BRISK_SPEC_MAX_TREE], ppar[BRISK_SPEC_MAX_TREE], prank[BRISK_SPEC_MAX_TREE], pdep[BRISK_SPEC_MAX_TREE];
    int32_t path[BRISK_SPEC_MAX_TREE + 1], keep[BRISK_SPEC_MAX_TREE + 1];
    acc_est b_dm, b_ng;                       /* runner-up acceptance given the first choice failed */
    /* policy */
    /* target pass of n tokens: scale * cost[n] seconds, n = 1..kmax+1; cost[] is
     * the calibrated shape, scale follows drift (context growth, machine load) */
    double cost[BRISK_SPEC_MAX_DRAFT + 2], scale;
    double t_draft;                           /* draft model: seconds per drafted token */
    bool draft_measured;                      /* t_draft is a measurement, not the prior */
    double t_verify;                          /* sampling/verification: seconds per emitted token */
    double fix;                               /* measured / predicted time of speculative rounds */
    acc_est a_dm, a_ng[NG_BUCKETS];
    shadow sh;
    int32_t probe_wait, probe_interval;
    brisk_spec_stats st;
    char warning[256];
};

brisk_spec_params brisk_spec_default_params(void) {
    return (brisk_spec_params){.mode = BRISK_SPEC_NONE, .draft_max = 0, .draft = NULL, .n_threads = 0, .ngram_min = 2,
                               .calibrate = true};
}

/* ---- target cost ------------------------------------------------------------------------------ */

brisk_status brisk_spec_measure_cost(brisk_context *c, int32_t seq, int32_t n_max, int32_t reps, double *cost,
                                     brisk_error *err) {
    enum { CAP = 256 };
    const int32_t len = brisk_seq_len(c, seq);
    if (len < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "cost: sequence %d out of range", seq);
    if (n_max < 1 || n_max > CAP || n_max > brisk_context_n_batch(c))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "cost: pass size %d out of range [1, %d]", n_max,
                          BRISK_MIN(CAP, brisk_context_n_batch(c)));
    if (len + n_max > brisk_context_n_ctx(c))
        return brisk_fail(err, BRISK_ERR_CAPACITY, "cost: %d tokens at position %d do not fit the context of %d", n_max,
                          len, brisk_context_n_ctx(c));
    int32_t tok[CAP], pos[CAP], sq[CAP];
    uint8_t want[CAP];
    cost[0] = 0.0;
    for (int32_t n = 1; n <= n_max; n++) cost[n] = INFINITY;
    brisk_status st;
    for (int32_t r = 0; r < reps; r++) {
        for (int32_t n = 1; n <= n_max; n++) {
            for (int32_t j = 0; j < n; j++) {
                tok[j] = (int32_t)((7919u * (unsigned)(j + 1)) % 256u) + 3;   /* any valid ids */
                pos[j] = len + j;
                sq[j] = seq;
                want[j] = 1;
            }
            brisk_batch b = {.n_tokens = n, .token = tok, .pos = pos, .seq = sq, .logits = want};
            const double t0 = brisk_time_now();
            if ((st = brisk_decode(c, &b, err))) return st;
            const double dt = brisk_time_now() - t0;
            if (dt < cost[n]) cost[n] = dt;
            if ((st = brisk_seq_truncate(c, seq, len, err))) return st;
        }
    }
    return BRISK_OK;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

brisk_status brisk_spec_init(brisk_spec **out, const brisk_model *target_model, brisk_context *target,
                             brisk_sampler *smp, const brisk_sampler_params *sp, const brisk_spec_params *p,
                             brisk_error *err) {
    *out = NULL;
    if (p->mode < BRISK_SPEC_NONE || p->mode > BRISK_SPEC_AUTO)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "speculative mode %d unknown", (int)p->mode);
    if (p->mode == BRISK_SPEC_DRAFT && !p->draft)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "speculative mode 'draft' needs a draft model");
    if (p->draft_max < 0 || p->draft_max > BRISK_SPEC_MAX_DRAFT)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "draft length %d out of range [1, %d]", p->draft_max,
                          BRISK_SPEC_MAX_DRAFT);
    brisk_cache_stats cs;
    brisk_context_cache_stats(target, &cs);
    if (cs.hot_bytes_per_seq && p->mode != BRISK_SPEC_NONE)   /* hyb4/hyb2: every query ranks the hot rows, a rejected draft's too */
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                          "speculative decoding is not available with a hyb4/hyb2 target cache: a rejected draft's queries would already "
                          "have ranked its hot rows (the draft model's own cache may be hyb4/hyb2)");
    const int32_t n_ctx = brisk_context_n_ctx(target), n_batch = brisk_context_n_batch(target);
    int32_t kmax = p->draft_max;
    if (kmax == 0) kmax = p->mode == BRISK_SPEC_DRAFT ? 4 : p->mode == BRISK_SPEC_NGRAM ? 8 : 16;
    if (p->mode == BRISK_SPEC_NONE) kmax = 0;
    if (p->draft_max > 0 && p->draft_max >= n_ctx)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "draft length %d does not fit the context of %d tokens", p->draft_max,
                          n_ctx);
    if (p->draft_max > 0 && p->draft_max + 1 > n_batch)
        return brisk_fail(err, BRISK_ERR_CAPACITY,
                          "draft length %d needs passes of %d tokens but the batch holds %d; lower the draft length or "
                          "raise the batch size",
                          p->draft_max, p->draft_max + 1, n_batch);
    kmax = BRISK_MIN(kmax, BRISK_MIN(n_batch - 1, n_ctx - 1));
    if (kmax < 0) kmax = 0;
    if (p->tree_width < 0 || p->tree_width > BRISK_SPEC_MAX_WIDTH)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tree width %d out of range [1, %d]", p->tree_width, BRISK_SPEC_MAX_WIDTH);
    if (p->tree_nodes < 0 || p->tree_nodes > BRISK_SPEC_MAX_TREE)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tree size %d out of range [1, %d]", p->tree_nodes, BRISK_SPEC_MAX_TREE);

    brisk_spec *s = calloc(1, sizeof *s);
    if (!s) return brisk_fail(err, BRISK_ERR_NOMEM, "speculative decoding: out of memory");
    brisk_status st = BRISK_OK;
    s->p = *p;
    s->tm = target_model;
    s->ctx = target;
    s->smp = smp;
    s->vo.greedy = sp->temp <= 0.0f;
    brisk_model_info ti;
    brisk_model_get_info(target_model, &ti);
    s->n_vocab = ti.n_vocab;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    s->kmax = kmax;
    s->explicit_k = p->draft_max > 0;
    s->width = p->tree_width > 1 ? p->tree_width : 1;
    s->tree_on = s->width > 1 && kmax > 0;
    s->tree_nodes = 0;
    if (s->tree_on) {
        s->tree_nodes = p->tree_nodes > 0 ? p->tree_nodes : BRISK_MIN(BRISK_SPEC_MAX_TREE, s->width * kmax);
        s->tree_nodes = BRISK_MIN(s->tree_nodes, BRISK_MIN(n_batch - 1, n_ctx - 1));
        if (s->tree_nodes < 1) s->tree_on = false;
    }
    s->tree_dm = s->tree_on && s->vo.greedy;
    s->nmax = BRISK_MAX(kmax, s->tree_on ? s->tree_nodes : 0) + 1;
    if (kmax > 0 && p->draft && p->mode != BRISK_SPEC_NGRAM) {
        brisk_model_info di;
        brisk_model_get_info(p->draft, &di);
        if (di.n_params > ti.n_params)
            snprintf(s->warning, sizeof s->warning,
                     "the draft model (%llu parameters) is larger than the target (%llu); speculation will likely be "
                     "slower than plain decoding",
                     (unsigned long long)di.n_params, (unsigned long long)ti.n_params);
        if ((st = brisk_drafter_model_init(&s->dm, p->draft, target_model, n_ctx, p->n_threads, kmax, sp, p->draft_window,
                                                p->draft_sink, &p->draft_kv, err)))
            goto fail;
        /* until measured: the draft costs its share of parameters of a target token */
        s->t_draft = ti.n_params ? (double)di.n_params / (double)ti.n_params : 0.5;
    }
    if (kmax > 0 && (p->mode == BRISK_SPEC_NGRAM || p->mode == BRISK_SPEC_AUTO)) {
        if ((st = brisk_drafter_ngram_init(&s->ng, p->ngram_min > 0 ? p->ngram_min : 2, kmax, err))) goto fail;
        brisk_drafter_ngram_limit(s->ng, ti.n_vocab_tokens);
    }
    s->hist = malloc(((size_t)n_ctx + 1) * sizeof(int32_t));
    s->btok = malloc((size_t)n_batch * sizeof(int32_t));
    s->bpos = malloc((size_t)n_batch * sizeof(int32_t));
    s->bseq = calloc((size_t)n_batch, sizeof(int32_t));
    s->bwant = malloc((size_t)n_batch);
    s->bpar = malloc((size_t)n_batch * sizeof(int32_t));
    s->scratch = malloc(2 * (size_t)s->n_vocab * sizeof(float));
    if (!s->hist || !s->btok || !s->bpos || !s->bseq || !s->bwant || !s->bpar || !s->scratch) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "speculative decoding: out of memory");
        goto fail;
    }
    /* priors: replaced by measurements within a few rounds */
    s->a_dm = (acc_est){.acc = 1.0, .tested = 2.0};
    for (int i = 0; i < NG_BUCKETS; i++) s->a_ng[i] = (acc_est){.acc = 2.0 * (0.2 + 0.1 * i), .tested = 2.0};
    s->b_dm = (acc_est){.acc = 0.5, .tested = 2.0};
    s->b_ng = (acc_est){.acc = 0.5, .tested = 2.0};
    for (int32_t n = 1; n <= s->nmax; n++) s->cost[n] = (double)n;   /* relative, pessimistic: linear */
    s->scale = 1.0;
    s->fix = 1.0;
    s->probe_interval = PROBE_MIN;
    s->probe_wait = 1;   /* the first probe right away, while the draft KV is in sync */
    *out = s;
    return BRISK_OK;
fail:
    brisk_spec_free(s);
    return st;
}

void brisk_spec_free(brisk_spec *s) {
    if (!s) return;
    brisk_drafter_free(s->dm);
    brisk_drafter_free(s->ng);
    free(s->hist);
    free(s->btok);
    free(s->bpos);
    free(s->bseq);
    free(s->bwant);
    free(s->bpar);
    free(s->scratch);
    free(s);
}

const char *brisk_spec_warning(const brisk_spec *s) { return s->warning; }

/* ---- prefill ---------------------------------------------------------------------------------- */

/* Calibrate c(n) at a few sizes and interpolate the rest (a full sweep costs
 * as much as ~n^2/2 tokens; the online updates refine every size used). */
static brisk_status calibrate(brisk_spec *s, bool full, brisk_error *err) {
    static const int32_t sizes[] = {1, 2, 3, 5, 9, 17, 33};
    const int32_t nmax = s->nmax;
    if (!full) {
        /* c(1) only; the other sizes start linear (pessimistic) and are learnt online */
        const double t0 = brisk_time_now();
        brisk_status st = brisk_spec_measure_cost(s->ctx, 0, 1, 2, s->cost, err);
        if (st) return st;
        for (int32_t n = 2; n <= nmax; n++) s->cost[n] = (double)n * s->cost[1];
        s->t_draft *= s->cost[1];
        s->st.t_calibrate = brisk_time_now() - t0;
        return BRISK_OK;
    }
    double c[BRISK_SPEC_MAX_DRAFT + 2];
    const double t0 = brisk_time_now();
    int32_t prev = 0;
    double prev_c = 0.0;
    for (size_t i = 0; i < BRISK_ARRAY_LEN(sizes); i++) {
        int32_t n = BRISK_MIN(sizes[i], nmax);
        if (n <= prev) break;
        /* one pass of n (min of two runs) at the start of the empty sequence */
        double best = INFINITY;
        for (int r = 0; r < 2; r++) {
            for (int32_t j = 0; j < n; j++) {
                s->btok[j] = 3 + j;
                s->bpos[j] = j;
                s->bseq[j] = 0;
                s->bwant[j] = 1;
            }
            brisk_batch b = {.n_tokens = n, .token = s->btok, .pos = s->bpos, .seq = s->bseq, .logits = s->bwant};
            const double a = brisk_time_now();
            brisk_status st = brisk_decode(s->ctx, &b, err);
            const double dt = brisk_time_now() - a;
            if (st || (st = brisk_seq_truncate(s->ctx, 0, 0, err))) return st;
            if (dt < best) best = dt;
        }
        c[n] = best;
        for (int32_t m = prev + 1; m < n; m++) c[m] = prev_c + (best - prev_c) * (double)(m - prev) / (double)(n - prev);
        prev = n;
        prev_c = best;
        if (n == nmax) break;
    }
    for (int32_t n = 1; n <= nmax; n++) s->cost[n] = c[n];
    s->t_draft *= c[1];   /* the prior share of a target token, now in seconds */
    s->st.t_calibrate = brisk_time_now() - t0;
    return BRISK_OK;
}

brisk_status brisk_spec_prefill(brisk_spec *s, const int32_t *ids, int32_t n_ids, brisk_error *err) {
    if (n_ids < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "the prompt is empty (no tokens)");
    if (brisk_seq_len(s->ctx, 0) != 0)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "speculative decoding needs an empty sequence 0");
    if (n_ids > s->n_ctx)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "prompt (%d tokens) exceeds the context size %d", n_ids, s->n_ctx);
    if (s->explicit_k && s->p.draft_max > s->n_ctx - n_ids)
        return brisk_fail(err, BRISK_ERR_CAPACITY,
                          "draft length %d exceeds the %d tokens left in the context after the prompt (%d of %d); "
                          "lower the draft length or raise the context size",
                          s->p.draft_max, s->n_ctx - n_ids, n_ids, s->n_ctx);
    brisk_status st;
    if (s->p.mode == BRISK_SPEC_AUTO && s->kmax > 0) {
        if ((st = calibrate(s, s->p.calibrate, err))) return st;
    } else if (s->dm) {
        s->t_draft = 0.0;   /* learnt from the first proposals */
    }
    if ((st = brisk_seq_sync(s->ctx, 0, ids, n_ids, NULL, err))) return st;
    memcpy(s->hist, ids, (size_t)n_ids * sizeof(int32_t));
    s->n_hist = n_ids;
    for (int32_t i = 0; i < n_ids; i++) brisk_sampler_accept(s->smp, ids[i]);
    if (s->dm && s->dm->sync && (st = s->dm->sync(s->dm, s->hist, s->n_hist, err))) return st;
    s->fresh = true;
    return BRISK_OK;
}

/* ---- policy ------------------------------------------------------------------------------------ */

static int ng_bucket(int32_t len) {
    return len <= 1 ? 0 : len == 2 ? 1 : len <= 4 ? 2 : len <= 8 ? 3 : len <= 16 ? 4 : 5;
}

static double acc_rate(const acc_est *a) {
    const double r = a->tested > 0 ? a->acc / a->tested : 0.0;
    return r < 0.0 ? 0.0 : r > 0.98 ? 0.98 : r;
}

/* Record one verification: `accepted` of `drafted` tokens; a rejection is a trial too. */
static void acc_update(acc_est *a, int32_t drafted, int32_t accepted) {
    const int32_t tested = accepted < drafted ? accepted + 1 : drafted;
    for (int32_t i = 0; i < tested; i++) {
        a->acc = a->acc * ACC_DECAY + (i < accepted ? 1.0 : 0.0);
        a->tested = a->tested * ACC_DECAY + 1.0;
    }
}

/* The best k in [0, kcap] for acceptance a and draft cost per token td; *rate = tokens per second. */
static double plain_rate(const brisk_spec *s) { return 1.0 / (s->scale * s->cost[1] + s->t_verify); }

static int32_t best_k(const brisk_spec *s, double a, double td, int32_t kcap, double *rate) {
    int32_t kb = 0;
    double rb = plain_rate(s), e = 1.0, ak = 1.0;
    for (int32_t k = 1; k <= kcap; k++) {
        ak *= a;
        e += ak;   /* 1 + a + ... + a^k */
        const double r = e / (s->fix * (s->scale * s->cost[k + 1] + (double)k * td + e * s->t_verify));
        if (r > rb) {
            rb = r;
            kb = k;
        }
    }
    *rate = rb;
    return kb;
}

/* ---- trees --------------------------------------------------------------------------------------- */

/* Acceptance probability of each node (see the top): P[i]. */
static void tree_probs(const brisk_draft_tree *t, double a, double b, double *P) {
    for (int32_t i = 0; i < t->n; i++) {
        const double pp = t->parent[i] < 0 ? 1.0 : P[t->parent[i]];
        P[i] = pp * (t->rank[i] == 0 ? a : (1.0 - a) * pow(1.0 - b, t->rank[i] - 1) * b);
    }
}

/* The subtree worth verifying: the N nodes of t with the highest acceptance
 * probability (a child never beats its parent, so they form a tree), N
 * chosen for the highest expected tokens per second, with draft cost td per
 * depth level. Writes the chosen nodes (in t's
 * order) to s->p* and out; returns its rate. */
static double tree_select(brisk_spec *s, const brisk_draft_tree *t, double a, double b, double td, brisk_draft_tree *out) {
    double P[BRISK_SPEC_MAX_TREE];
    int32_t order[BRISK_SPEC_MAX_TREE], n = 0;
    tree_probs(t, a, b, P);
    for (int32_t i = 0; i < t->n; i++) order[n++] = i;
    /* by probability, then index (parents first on ties): insertion sort of <= 32 */
    for (int32_t i = 1; i < n; i++) {
        const int32_t x = order[i];
        int32_t j = i;
        while (j > 0 && P[order[j - 1]] < P[x]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = x;
    }
    double e = 1.0, best = 0.0;
    int32_t best_n = 0, depth = 0;
    for (int32_t m = 1; m <= n; m++) {
        e += P[order[m - 1]];
        depth = BRISK_MAX(depth, t->depth[order[m - 1]]);
        const double r = e / (s->fix * (s->scale * s->cost[m + 1] + (double)depth * td + e * s->t_verify));
        if (r > best) {
            best = r;
            best_n = m;
        }
    }
    bool keep[BRISK_SPEC_MAX_TREE] = {false};
    for (int32_t m = 0; m < best_n; m++) keep[order[m]] = true;
    int32_t map[BRISK_SPEC_MAX_TREE], k = 0;
    for (int32_t i = 0; i < t->n; i++) {
        map[i] = -1;
        if (!keep[i]) continue;
        map[i] = k;
        s->ptok[k] = t->tokens[i];
        s->ppar[k] = t->parent[i] < 0 ? -1 : map[t->parent[i]];
        s->prank[k] = t->rank[i];
        s->pdep[k] = t->depth[i];
        k++;
    }
    *out = (brisk_draft_tree){.n = k, .tokens = s->ptok, .parent = s->ppar, .rank = s->prank, .depth = s->pdep,
                              .match_len = t->match_len};
    return best;
}

/* Learn a (first choices) and b (runners-up) from a verified tree: at every
 * node the walk reached, its first-choice child is a trial for a; when that
 * failed, the runners-up in rank order are trials for b until one matched. */
static void tree_learn(const brisk_draft_tree *t, const int32_t *path, int32_t n_path, acc_est *a, acc_est *b, int64_t *alt_acc) {
    int32_t cur = -1;
    for (int32_t step = 0; step <= n_path; step++) {
        const int32_t next = step < n_path ? path[step] : -2;
        bool has_first = false;
        for (int32_t i = cur + 1; i < t->n; i++)
            if (t->parent[i] == cur && t->rank[i] == 0) {
                has_first = true;
                acc_update(a, 1, i == next ? 1 : 0);
            }
        if (!has_first) break;
        if (next >= 0 && t->rank[next] == 0) {
            cur = next;
            continue;
        }
        for (int32_t r = 1; r < BRISK_SPEC_MAX_WIDTH; r++)
            for (int32_t i = cur + 1; i < t->n; i++)
                if (t->parent[i] == cur && t->rank[i] == r) {
                    acc_update(b, 1, i == next ? 1 : 0);
                    if (i == next) r = BRISK_SPEC_MAX_WIDTH;
                }
        if (next < 0) break;
        (*alt_acc)++;
        cur = next;
    }
}

static void shadow_feed(brisk_spec *s, const int32_t *toks, int32_t n) {
    shadow *h = &s->sh;
    for (int32_t i = 0; i < n && h->active; i++) {
        const bool ok = toks[i] == h->tokens[h->idx];
        acc_update(&s->a_ng[h->bucket], 1, ok ? 1 : 0);
        if (!ok || ++h->idx == h->n) h->active = false;
    }
}

/* ---- the round ----------------------------------------------------------------------------------- */

static void emit(brisk_spec *s, const int32_t *toks, int32_t n) {
    memcpy(s->hist + s->n_hist, toks, (size_t)n * sizeof(int32_t));
    s->n_hist += n;
    s->st.emitted += n;
}

brisk_status brisk_spec_step(brisk_spec *s, int32_t max_tokens, int32_t *out, int32_t *n_out, brisk_error *err) {
    *n_out = 0;
    if (max_tokens < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "max_tokens %d must be positive", max_tokens);
    if (s->n_hist < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "speculative decoding: prefill first");
    if (s->fresh) {
        /* the prompt's logits: exactly what plain decoding samples first */
        const int32_t t = brisk_sampler_sample(s->smp, brisk_get_logits(s->ctx, 0));
        brisk_sampler_accept(s->smp, t);
        out[0] = t;
        *n_out = 1;
        s->fresh = false;
        shadow_feed(s, out, 1);
        emit(s, out, 1);
        return BRISK_OK;
    }
    if (s->n_hist > s->n_ctx)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "the context of %d tokens is full", s->n_ctx);
    /* pending at n_hist-1, drafts at n_hist..n_hist+k-1 < n_ctx */
    int32_t kcap = BRISK_MIN(s->kmax, max_tokens - 1);
    kcap = BRISK_MIN(kcap, s->n_ctx - s->n_hist);
    if (kcap < 0) kcap = 0;

    /* a tree's nodes take slots n_hist.. (the pending token is at n_hist - 1) */
    const int32_t ncap = s->tree_on ? BRISK_MIN(s->tree_nodes, s->n_ctx - s->n_hist) : 0;

    brisk_draft d = {0}, dn = {0};
    brisk_draft_tree tree = {0}, tn = {0};
    bool use_tree = false;
    brisk_drafter *used = NULL;
    brisk_status st;
    const double t0 = brisk_time_now();
    if (kcap > 0 && ((s->tree_dm && s->p.mode == BRISK_SPEC_DRAFT) || (s->tree_on && s->p.mode == BRISK_SPEC_NGRAM))) {
        used = s->p.mode == BRISK_SPEC_DRAFT ? s->dm : s->ng;
        if ((st = used->propose_tree(used, s->hist, s->n_hist, kcap, s->width, ncap, &tree, err))) return st;
        use_tree = tree.n > 0;
    } else if (kcap > 0 && s->p.mode == BRISK_SPEC_DRAFT) {
        used = s->dm;
        if ((st = s->dm->propose(s->dm, s->hist, s->n_hist, kcap, &d, err))) return st;
    } else if (kcap > 0 && s->p.mode == BRISK_SPEC_NGRAM) {
        used = s->ng;
        if ((st = s->ng->propose(s->ng, s->hist, s->n_hist, kcap, &d, err))) return st;
    } else if (kcap > 0 && s->p.mode == BRISK_SPEC_AUTO) {
        double r_ng = 0.0, r_dm = 0.0, rt_ng = 0.0, r0 = plain_rate(s);
        int32_t k_ng = 0, k_dm = 0;
        bool probing = false;
        if ((st = s->ng->propose(s->ng, s->hist, s->n_hist, kcap, &dn, err))) return st;
        if (dn.n > 0) k_ng = best_k(s, acc_rate(&s->a_ng[ng_bucket(dn.match_len)]), 0.0, dn.n, &r_ng);
        if (s->tree_on && dn.n > 0) {
            if ((st = s->ng->propose_tree(s->ng, s->hist, s->n_hist, kcap, s->width, ncap, &tn, err))) return st;
            if (tn.n > dn.n)   /* it branches: its best subtree (into s->p*) */
                rt_ng = tree_select(s, &tn, acc_rate(&s->a_ng[ng_bucket(tn.match_len)]), acc_rate(&s->b_ng), 0.0, &tree);
        }
        if (s->dm) {
            k_dm = best_k(s, acc_rate(&s->a_dm), s->t_draft, kcap, &r_dm);
            double r_opt = 0.0;
            if (k_dm == 0 && --s->probe_wait <= 0 && best_k(s, PROBE_ALPHA, s->t_draft, kcap, &r_opt) > 0) {
                /* not paying by the estimates, but it would at a high acceptance: re-measure
                 * now and then (a probe also pays the draft's catch-up over the gap) */
                k_dm = BRISK_MIN(2, kcap);
                r_dm = INFINITY;
                probing = true;
                s->probe_wait = s->probe_interval;
                s->probe_interval = BRISK_MIN(2 * s->probe_interval, PROBE_MAX);
            }
        }
        /* the best of: n-gram chain, n-gram tree, draft model, plain (chains win ties) */
        double rb = r0;
        int choice = 0;
        if (k_ng > 0 && r_ng > rb) { rb = r_ng; choice = 1; }
        if (tree.n > 0 && rt_ng > rb) { rb = rt_ng; choice = 2; }
        if (k_dm > 0 && r_dm > rb && r_dm >= r_ng) { rb = r_dm; choice = 3; }
        if (choice == 1) {
            used = s->ng;
            d = dn;
            d.n = k_ng;
        } else if (choice == 2) {
            used = s->ng;   /* tree: chosen above */
            use_tree = true;
        } else if (choice == 3) {
            used = s->dm;
            if (r_dm < INFINITY) s->probe_interval = PROBE_MIN;
            if (s->tree_dm && !probing) {
                /* the same draft passes give the runners-up too: keep them if the tree beats its chain */
                brisk_draft_tree full;
                if ((st = s->dm->propose_tree(s->dm, s->hist, s->n_hist, k_dm, s->width, ncap, &full, err))) return st;
                tree_select(s, &full, acc_rate(&s->a_dm), acc_rate(&s->b_dm), 0.0, &tree);   /* drafting is paid */
                use_tree = tree.n > 0;
            } else if ((st = s->dm->propose(s->dm, s->hist, s->n_hist, k_dm, &d, err))) {
                return st;
            }
        } else if (dn.n > 0 && !s->sh.active) {
            /* decoding plainly: follow the n-gram proposal to learn its acceptance for free */
            s->sh = (shadow){.n = dn.n, .idx = 0, .bucket = ng_bucket(dn.match_len), .active = true};
            memcpy(s->sh.tokens, dn.tokens, (size_t)dn.n * sizeof(int32_t));
        }
    }
    /* drafted depth (draft model cost is per level) and nodes of this round */
    int32_t depth = d.n;
    if (use_tree)
        for (int32_t i = 0; i < tree.n; i++) depth = BRISK_MAX(depth, tree.depth[i]);
    const int32_t n_draft = use_tree ? tree.n : d.n;
    const double t1 = brisk_time_now();
    if (used == s->dm && s->dm && depth > 0) {
        const double per = (t1 - t0) / depth;
        /* the first measurement replaces the prior; later ones are clipped against preemption */
        s->t_draft = s->draft_measured ? (1.0 - COST_EMA) * s->t_draft + COST_EMA * BRISK_MIN(per, 4.0 * s->t_draft) : per;
        s->draft_measured = true;
    }
    s->st.t_draft += t1 - t0;

    /* one target pass over the pending token and the drafts (a chain, or the tree) */
    const int32_t n = n_draft + 1;
    s->btok[0] = s->hist[s->n_hist - 1];
    s->bpos[0] = s->n_hist - 1;
    s->bpar[0] = -1;
    for (int32_t i = 0; i < n; i++) {
        if (i > 0) {
            s->btok[i] = use_tree ? tree.tokens[i - 1] : d.tokens[i - 1];
            s->bpos[i] = s->n_hist - 1 + (use_tree ? tree.depth[i - 1] : i);
            s->bpar[i] = use_tree ? tree.parent[i - 1] + 1 : i - 1;
        }
        s->bseq[i] = 0;
        s->bwant[i] = 1;
    }
    brisk_batch b = {.n_tokens = n, .token = s->btok, .pos = s->bpos, .seq = s->bseq, .logits = s->bwant};
    if ((st = use_tree ? brisk_decode_tree(s->ctx, &b, s->bpar, err) : brisk_decode(s->ctx, &b, err))) return st;
    const double t2 = brisk_time_now();
    const double predicted = s->scale * s->cost[n];
    /* one preempted pass on a shared machine must not swing the model: clip to [1/2, 2]x */
    const double meas = BRISK_MAX(0.5 * predicted, BRISK_MIN(2.0 * predicted, t2 - t1));
    s->scale = (1.0 - COST_EMA) * s->scale + COST_EMA * (meas / s->cost[n]);
    s->cost[n] = (1.0 - COST_EMA) * s->cost[n] + COST_EMA * (meas / s->scale);
    s->st.t_target += t2 - t1;
    s->st.target_passes++;
    for (int32_t i = 0; i < n; i++) s->rows[i] = brisk_get_logits(s->ctx, i);

    const int32_t m = use_tree ? brisk_spec_verify_tree(s->smp, s->n_vocab, s->rows, &tree, &s->vo, s->scratch, out, s->path)
                               : brisk_spec_verify(s->smp, s->n_vocab, s->rows, &d, &s->vo, s->scratch, out);
    *n_out = m;
    const double t3 = brisk_time_now();
    if (n_draft > 0 && s->p.mode == BRISK_SPEC_AUTO) {
        /* how far the model's round time was off (draft + target + verification) */
        const double model = predicted + (used == s->dm ? depth * s->t_draft : 0.0) + m * s->t_verify;
        const double ratio = BRISK_MAX(0.5, BRISK_MIN(3.0, (t3 - t0) / model));
        s->fix = (1.0 - COST_EMA) * s->fix + COST_EMA * ratio;
    }
    const double tv = (t3 - t2) / m;
    s->t_verify = s->t_verify > 0.0 ? (1.0 - COST_EMA) * s->t_verify + COST_EMA * BRISK_MIN(tv, 2.0 * s->t_verify) : tv;
    if (n_draft > 0) {
        s->st.spec_rounds++;
        s->st.drafted += n_draft;
        s->st.accepted += m - 1;
        s->st.rounds_by_drafter[used == s->dm ? 0 : 1]++;
        if (use_tree) {
            acc_est *a = used == s->dm ? &s->a_dm : &s->a_ng[ng_bucket(tree.match_len)];
            tree_learn(&tree, s->path, m - 1, a, used == s->dm ? &s->b_dm : &s->b_ng, &s->st.alt_accepted);
            if (tree.n > depth) {
                s->st.tree_rounds++;
                s->st.tree_nodes += tree.n;
            }
        } else if (used == s->dm) {
            acc_update(&s->a_dm, d.n, m - 1);
        } else {
            acc_update(&s->a_ng[ng_bucket(d.match_len)], d.n, m - 1);
        }
        s->sh.active = false;
    } else {
        shadow_feed(s, out, m);
    }
    /* keep pending + the accepted drafts; the rejected tail (or branches) leave the KV */
    if (use_tree) {
        s->keep[0] = 0;
        for (int32_t i = 0; i + 1 < m; i++) s->keep[i + 1] = s->path[i] + 1;
        if ((st = brisk_seq_keep_path(s->ctx, 0, s->keep, m, err))) return st;
    } else if ((st = brisk_seq_truncate(s->ctx, 0, s->n_hist + m - 1, err))) {
        return st;
    }
    emit(s, out, m);
    return BRISK_OK;
}

void brisk_spec_get_stats(const brisk_spec *s, brisk_spec_stats *out) {
    *out = s->st;
    out->cost_n = s->nmax;
    for (int32_t n = 0; n <= s->nmax; n++) out->cost[n] = s->scale * s->cost[n];
    out->alt_draft = acc_rate(&s->b_dm);
    out->alt_ngram = acc_rate(&s->b_ng);
    out->alpha_draft = acc_rate(&s->a_dm);
    double best = 0.0;
    for (int i = 0; i < NG_BUCKETS; i++) best = fmax(best, acc_rate(&s->a_ng[i]));
    out->alpha_ngram = best;
    out->draft_cost = s->t_draft;
    brisk_cache_stats cs;
    int64_t restarts = 0;
    if (brisk_drafter_model_kv_stats(s->dm, &cs, &restarts)) {
        out->draft_dropped = cs.dropped;
        out->draft_restarts = restarts;
        out->draft_kv_peak_blocks = cs.in_use_max;
        out->draft_kv_block_bytes = cs.block_bytes;
    }
}
