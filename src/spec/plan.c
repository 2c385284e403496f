/* plan: speculation as plan/commit for sequences that share one batch (the
 * scheduler's form of speculative decoding; spec.c's brisk_spec owns a
 * sequence and its passes instead). See spec.h's plan/commit section.
 *
 * Cost curve: cost[n] is an average of measured times of passes of n
 * tokens that all kept their logits (decode and draft passes: the shape a
 * draft extends), sizes[] the measured sizes in increasing order. Between two
 * measured sizes an estimate interpolates linearly; below the smallest it is
 * the smallest's cost; above the largest it extends the slope of the last
 * two, or with one size the per-token cost of a token with logits, b + r
 * from a least-squares fit of every pass (the prefill ones too) to a + b *
 * tokens + r * logit rows. Prefill passes keep one row per sequence, so they
 * must not stand for draft tokens directly: at a 128K vocabulary a row's
 * output projection is a sixth of a 1B model's per-token work, and
 * interpolating towards them made drafts look cheap (measured: --spec auto
 * at 0.93x of off at 4 and 8 sequences). Without a fit (prefill and decode
 * passes alone do not separate b from r) it scales linearly through the
 * origin, which never pays, so every PLAN_PROBE plans a probe drafts 2
 * tokens for one sequence: its pass measures the curve above the decode
 * size, and the decisions after it rest on measurements.
 *
 * AUTO's choice for one sequence: with acceptance a per draft (independent),
 * k drafts yield E(k) = 1 + a + ... + a^k tokens; the pass's rate is
 * (n_out + sum over sequences of (E(k_i) - 1)) / cost(base + sum k_i). A
 * draft token at depth d is worth a^d, the chance that it is accepted, so the
 * plan ranks every candidate token of every sequence by its worth (issue
 * #14: "the batch takes the most valuable ones until the marginal cost
 * exceeds their value") and takes the prefix of that order with the best
 * rate, if it beats the rate without drafts by PLAN_GAIN. Ranking across
 * sequences rather than in the scheduler's order (oldest first, each taking
 * the k best for itself) matters when room is short or acceptances differ:
 * an old sequence with a weak match no longer fills the pass before a
 * strong one is looked at (tests/test_spec_plan.c). At 16 sequences the pass is
 * already compute-bound (cost grows with every token) and the extra tokens
 * rarely pay; at 1 sequence it is memory-bound and they usually do. */
#include "spec/spec.h"
#include "base/base.h"
#include "sample/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_BUCKETS 6        /* n-gram match lengths 1, 2, 3-4, 5-8, 9-16, 17+ */
#define PLAN_DECAY 0.97       /* weight of older acceptance trials per new trial */
#define PLAN_COST_EMA 0.2     /* weight of a new pass time at its size */
#define PLAN_GAIN 1.15        /* drafts must raise the expected rate by 15%: at 8 sequences a predicted 2% lost 6% (model error) */
#define PLAN_DEFAULT_K 8
#define PLAN_PROBE 32          /* plans between probes while the curve above the pass is unmeasured */
#define PLAN_FIT_DECAY 0.995   /* weight of older passes in the cost fit: it follows drift over ~200 passes */

struct brisk_spec_policy {
    int32_t n_max;
    double *cost;             /* [n_max + 1] seconds per pass of n tokens, where measured */
    int32_t *sizes;           /* [n_max] measured sizes, increasing */
    int32_t n_sizes;
    int32_t probe_wait;       /* plans until the next probe */
    double xx[3][3], xy[3];   /* decayed normal equations of cost ~ a + b * tokens + r * rows */
    double acc[PLAN_BUCKETS], tested[PLAN_BUCKETS];   /* decayed counts of accepted and tested drafts */
    /* the draft model (BRISK_SPEC_DRAFT_BATCH): its acceptance, seconds per draft pass (0 until measured),
     * plans until it is probed again while it is not drafting */
    double acc_d, tested_d, draft_cost;
    int32_t draft_probe_wait;
    /* brisk_spec_plan's scratch, n_max entries each (a pass holds at most n_max sequences and tokens):
     * the candidates (sequence indices), their acceptance and tokens taken; the ordered tokens' sequence,
     * worth (acceptance to their depth) and depth */
    int32_t *cand, *taken, *order, *depth;
    double *rate, *worth;
};

typedef struct plan_shadow {  /* a proposal not drafted, compared with the tokens that follow */
    int32_t tokens[BRISK_SPEC_MAX_DRAFT];
    int32_t n, idx, bucket;
    bool active;
} plan_shadow;

struct brisk_spec_seq {
    brisk_spec_mode mode;
    int32_t kmax;
    brisk_drafter *ng;
    brisk_draft draft;        /* the step's proposal (tokens owned by ng, or dtok) */
    int32_t dtok[BRISK_SPEC_MAX_DRAFT];   /* BRISK_SPEC_DRAFT_BATCH: the draft model's tokens */
    plan_shadow sh;
    int64_t drafted, accepted;
};

static int plan_bucket(int32_t len) { return len <= 1 ? 0 : len == 2 ? 1 : len <= 4 ? 2 : len <= 8 ? 3 : len <= 16 ? 4 : 5; }

/* ---- the policy ----------------------------------------------------------------------------- */

brisk_status brisk_spec_policy_init(brisk_spec_policy **out, int32_t n_max, brisk_error *err) {
    *out = NULL;
    if (n_max < 1 || n_max > 65536) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "speculation policy: pass size %d out of range [1, 65536]", n_max);
    brisk_spec_policy *p = calloc(1, sizeof *p);
    if (!p) return brisk_fail(err, BRISK_ERR_NOMEM, "speculation policy: out of memory");
    p->n_max = n_max;
    p->cost = calloc((size_t)n_max + 1, sizeof *p->cost);
    p->sizes = calloc((size_t)n_max, sizeof *p->sizes);
    p->cand = calloc((size_t)n_max, sizeof *p->cand);
    p->taken = calloc((size_t)n_max, sizeof *p->taken);
    p->order = calloc((size_t)n_max, sizeof *p->order);
    p->depth = calloc((size_t)n_max, sizeof *p->depth);
    p->rate = calloc((size_t)n_max, sizeof *p->rate);
    p->worth = calloc((size_t)n_max, sizeof *p->worth);
    if (!p->cost || !p->sizes || !p->cand || !p->taken || !p->order || !p->depth || !p->rate || !p->worth) {
        brisk_spec_policy_free(p);
        return brisk_fail(err, BRISK_ERR_NOMEM, "speculation policy: out of memory for a cost table of %d sizes", n_max);
    }
    /* priors (spec.c's): longer matches are more often right; replaced within a few trials */
    for (int i = 0; i < PLAN_BUCKETS; i++) {
        p->acc[i] = 2.0 * (0.2 + 0.1 * i);
        p->tested[i] = 2.0;
    }
    p->acc_d = 2.0 * 0.6;   /* a draft model of the target's family is right more often than not */
    p->tested_d = 2.0;
    *out = p;
    return BRISK_OK;
}

void brisk_spec_policy_free(brisk_spec_policy *p) {
    if (!p) return;
    free(p->cost);
    free(p->sizes);
    free(p->cand);
    free(p->taken);
    free(p->order);
    free(p->depth);
    free(p->rate);
    free(p->worth);
    free(p);
}

static double det3(const double m[3][3]) {
    return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
}

/* b + r of the least-squares fit (Cramer's rule), or 0 when the passes do not determine it. */
static double fit_slope(const brisk_spec_policy *p) {
    const double d = det3(p->xx);
    const double scale = p->xx[0][0] * p->xx[1][1] * p->xx[2][2];
    if (!(fabs(d) > 1e-9 * scale) || !(scale > 0.0)) return 0.0;
    double coef[3];
    for (int c = 0; c < 3; c++) {
        double m[3][3];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) m[i][j] = j == c ? p->xy[i] : p->xx[i][j];
        coef[c] = det3(m) / d;
    }
    return coef[1] + coef[2];
}

double brisk_spec_policy_cost(const brisk_spec_policy *p, int32_t n) {
    if (p->n_sizes == 0 || n < 1) return 0.0;
    if (n > p->n_max) n = p->n_max;
    if (p->cost[n] > 0.0) return p->cost[n];
    /* the first measured size above n (binary search over increasing sizes) */
    int32_t lo = 0, hi = p->n_sizes;
    while (lo < hi) {
        const int32_t mid = (lo + hi) / 2;
        if (p->sizes[mid] < n) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return p->cost[p->sizes[0]];
    const int32_t a = p->sizes[lo - 1];
    if (lo < p->n_sizes) {
        const int32_t b = p->sizes[lo];
        return p->cost[a] + (p->cost[b] - p->cost[a]) * (double)(n - a) / (double)(b - a);
    }
    double slope = 0.0;
    if (p->n_sizes >= 2) {
        const int32_t z = p->sizes[lo - 2];
        slope = fmax(0.0, (p->cost[a] - p->cost[z]) / (double)(a - z));
    } else {
        slope = fit_slope(p);
    }
    if (slope > 0.0) return p->cost[a] + slope * (double)(n - a);
    return p->cost[a] * (double)n / (double)a;
}

bool brisk_spec_policy_measured(const brisk_spec_policy *p, int32_t n) { return n >= 1 && n <= p->n_max && p->cost[n] > 0.0; }

void brisk_spec_policy_observe(brisk_spec_policy *p, int32_t n, int32_t rows, double seconds) {
    if (n < 1 || n > p->n_max || rows < 0 || rows > n || !(seconds > 0.0)) return;
    const double x[3] = {1.0, (double)n, (double)rows};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) p->xx[i][j] = PLAN_FIT_DECAY * p->xx[i][j] + x[i] * x[j];
        p->xy[i] = PLAN_FIT_DECAY * p->xy[i] + x[i] * seconds;
    }
    if (rows != n) return;   /* the table holds passes shaped like a draft's: every token with logits */
    if (p->cost[n] > 0.0) {
        /* one preempted pass on a shared machine must not swing the curve */
        const double c = p->cost[n], t = fmax(0.5 * c, fmin(2.0 * c, seconds));
        p->cost[n] = (1.0 - PLAN_COST_EMA) * c + PLAN_COST_EMA * t;
        return;
    }
    p->cost[n] = seconds;
    int32_t i = p->n_sizes++;
    while (i > 0 && p->sizes[i - 1] > n) {
        p->sizes[i] = p->sizes[i - 1];
        i--;
    }
    p->sizes[i] = n;
}

static double plan_rate(const brisk_spec_policy *p, int b) {
    const double r = p->tested[b] > 0 ? p->acc[b] / p->tested[b] : 0.0;
    return r < 0.0 ? 0.0 : r > 0.98 ? 0.98 : r;
}

double brisk_spec_policy_acceptance(const brisk_spec_policy *p, int32_t match_len) { return plan_rate(p, plan_bucket(match_len)); }

static double draft_rate(const brisk_spec_policy *p) {
    const double r = p->tested_d > 0 ? p->acc_d / p->tested_d : 0.0;
    return r < 0.0 ? 0.0 : r > 0.98 ? 0.98 : r;
}

double brisk_spec_policy_draft_acceptance(const brisk_spec_policy *p) { return draft_rate(p); }

void brisk_spec_policy_observe_draft(brisk_spec_policy *p, double seconds) {
    if (!(seconds > 0.0)) return;
    const double c = p->draft_cost;
    p->draft_cost = c > 0.0 ? (1.0 - PLAN_COST_EMA) * c + PLAN_COST_EMA * fmax(0.5 * c, fmin(2.0 * c, seconds)) : seconds;
}

/* `accepted` of `drafted` tokens were accepted; a rejection is a trial too. */
static void plan_learn(brisk_spec_policy *p, int b, int32_t drafted, int32_t accepted) {
    if (drafted < 0 || accepted < 0 || accepted > drafted) return;
    const int32_t tested = accepted < drafted ? accepted + 1 : drafted;
    double *acc = b < 0 ? &p->acc_d : &p->acc[b], *tst = b < 0 ? &p->tested_d : &p->tested[b];
    for (int32_t i = 0; i < tested; i++) {
        *acc = *acc * PLAN_DECAY + (i < accepted ? 1.0 : 0.0);
        *tst = *tst * PLAN_DECAY + 1.0;
    }
}

/* The candidates' draft tokens in the order of their worth: each step takes
 * the candidate whose next token is the most likely to be accepted (a^d at
 * depth d, its acceptance to that depth; ties to the earlier sequence), so
 * a prefix of the order is the most valuable set of tokens of its size.
 * Fills p->order (candidate c's sequence index), p->worth and p->depth per
 * token; returns the tokens ordered (at most cap). */
static int32_t plan_order(brisk_spec_policy *p, brisk_spec_seq *const *qs, int32_t n_cand, int32_t cap) {
    for (int32_t c = 0; c < n_cand; c++) {
        const brisk_spec_seq *q = qs[p->cand[c]];
        p->rate[c] = q->mode == BRISK_SPEC_DRAFT_BATCH ? draft_rate(p) : plan_rate(p, plan_bucket(q->draft.match_len));
        p->taken[c] = 0;
    }
    int32_t m = 0;
    while (m < cap) {
        int32_t best = -1;
        double bv = -1.0;
        for (int32_t c = 0; c < n_cand; c++) {
            if (p->taken[c] >= qs[p->cand[c]]->draft.n) continue;
            const double v = pow(p->rate[c], (double)(p->taken[c] + 1));
            if (v > bv) bv = v, best = c;
        }
        if (best < 0) break;
        p->order[m] = p->cand[best];
        p->depth[m] = ++p->taken[best];
        p->worth[m++] = bv;
    }
    return m;
}

void brisk_spec_policy_learn(brisk_spec_policy *p, int32_t match_len, int32_t drafted, int32_t accepted) {
    plan_learn(p, match_len < 0 ? -1 : plan_bucket(match_len), drafted, accepted);
}

int32_t brisk_spec_plan(brisk_spec_policy *p, brisk_spec_seq *const *qs, int32_t n, int32_t base, int32_t n_out, int32_t room,
                        int32_t *k) {
    int32_t total = 0, b = base, rounds = 0;   /* rounds: draft-model passes the choices so far need */
    bool any_draft = false, drafted_model = false;
    /* NGRAM sequences take their whole proposal while room lasts; the others are valued below */
    for (int32_t i = 0; i < n; i++) {
        k[i] = 0;
        any_draft |= qs[i]->mode == BRISK_SPEC_DRAFT_BATCH && qs[i]->draft.n > 0;
        if (qs[i]->mode != BRISK_SPEC_NGRAM) continue;
        k[i] = BRISK_MAX(0, BRISK_MIN(qs[i]->draft.n, room - total));
        total += k[i];
        b += k[i];
    }
    const double c0 = brisk_spec_policy_cost(p, b);
    if (c0 > 0.0 && n_out > 0) {
        /* probes first: while the curve above the pass (or the draft model's cost) is unmeasured, a
         * probe of 2 now and then measures it; the sequences left are the candidates */
        const bool unmeasured = p->sizes[p->n_sizes - 1] <= b && p->n_sizes < 2 && fit_slope(p) <= 0.0;
        int32_t n_cand = 0;
        for (int32_t i = 0; i < n; i++) {
            brisk_spec_seq *q = qs[i];
            const bool dm = q->mode == BRISK_SPEC_DRAFT_BATCH;
            if (q->mode == BRISK_SPEC_NGRAM || BRISK_MIN(q->draft.n, room - total) <= 0) continue;
            if (unmeasured || (dm && !(p->draft_cost > 0.0))) {
                int32_t *wait = dm ? &p->draft_probe_wait : &p->probe_wait;
                if (--*wait <= 0) {
                    *wait = PLAN_PROBE;
                    k[i] = BRISK_MIN(2, BRISK_MIN(q->draft.n, room - total));
                    total += k[i];
                    b += k[i];
                    if (dm) {
                        rounds = BRISK_MAX(rounds, k[i]);
                        drafted_model = true;
                    }
                }
                continue;
            }
            if (n_cand < p->n_max) p->cand[n_cand++] = i;   /* a pass holds at most n_max sequences */
        }
        /* the candidates' tokens by worth; the pass takes the prefix of that order with the best expected
         * rate (n_out + the tokens' worth) / (cost(b + m) + the draft model's rounds), if it beats the rate
         * without them by PLAN_GAIN: a token is taken while its worth exceeds its marginal cost, and a
         * step of the curve that only a few more tokens pay for is looked past */
        if (n_cand > 0) {
            const int32_t m = plan_order(p, qs, n_cand, BRISK_MIN(room - total, p->n_max));
            double best = (double)n_out / (brisk_spec_policy_cost(p, b) + p->draft_cost * rounds) * PLAN_GAIN, out = n_out;
            int32_t best_m = 0, r = rounds;
            for (int32_t j = 0; j < m; j++) {
                out += p->worth[j];
                if (qs[p->order[j]]->mode == BRISK_SPEC_DRAFT_BATCH) r = BRISK_MAX(r, p->depth[j]);
                const double rate = out / (brisk_spec_policy_cost(p, b + j + 1) + p->draft_cost * r);
                if (rate > best) best = rate, best_m = j + 1;
            }
            for (int32_t j = 0; j < best_m; j++) {
                const int32_t i = p->order[j];
                k[i]++;
                if (qs[i]->mode == BRISK_SPEC_DRAFT_BATCH) {
                    rounds = BRISK_MAX(rounds, k[i]);
                    drafted_model = true;
                }
            }
            total += best_m;
            b += best_m;
        }
    }
    if (any_draft && !drafted_model && --p->draft_probe_wait <= 0) {
        /* not paying now: a probe of 2 now and then keeps the draft's acceptance and cost measured */
        p->draft_probe_wait = PLAN_PROBE;
        for (int32_t i = 0; i < n; i++) {
            const int32_t avail = BRISK_MIN(qs[i]->draft.n, room - total);
            if (qs[i]->mode != BRISK_SPEC_DRAFT_BATCH || avail <= 0) continue;
            k[i] = BRISK_MIN(2, avail);
            total += k[i];
            break;
        }
    }
    return total;
}

/* ---- sequences ------------------------------------------------------------------------------ */

brisk_status brisk_spec_seq_init(brisk_spec_seq **out, brisk_spec_mode mode, int32_t draft_max, int32_t ngram_min,
                                 int32_t n_valid, brisk_error *err) {
    *out = NULL;
    if (mode != BRISK_SPEC_NGRAM && mode != BRISK_SPEC_AUTO && mode != BRISK_SPEC_DRAFT_BATCH)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batched speculation: mode %d unsupported (n-gram, auto or draft)", (int)mode);
    if (draft_max < 0 || draft_max > BRISK_SPEC_MAX_DRAFT)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "draft length %d out of range [1, %d]", draft_max, BRISK_SPEC_MAX_DRAFT);
    if (ngram_min < 0 || ngram_min > 64)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "n-gram minimum match %d out of range [1, 64]", ngram_min);
    brisk_spec_seq *q = calloc(1, sizeof *q);
    if (!q) return brisk_fail(err, BRISK_ERR_NOMEM, "batched speculation: out of memory");
    q->mode = mode;
    q->kmax = draft_max > 0 ? draft_max : PLAN_DEFAULT_K;
    if (mode == BRISK_SPEC_DRAFT_BATCH) {
        *out = q;
        return BRISK_OK;
    }
    brisk_status st = brisk_drafter_ngram_init(&q->ng, ngram_min > 0 ? ngram_min : 2, q->kmax, err);
    if (st) {
        free(q);
        return st;
    }
    if (n_valid > 0) brisk_drafter_ngram_limit(q->ng, n_valid);
    *out = q;
    return BRISK_OK;
}

void brisk_spec_seq_free(brisk_spec_seq *q) {
    if (!q) return;
    brisk_drafter_free(q->ng);
    free(q);
}

int32_t brisk_spec_seq_propose(brisk_spec_seq *q, const int32_t *hist, int32_t n_hist, int32_t kcap) {
    q->draft = (brisk_draft){0};
    kcap = BRISK_MIN(kcap, q->kmax);
    if (kcap <= 0 || n_hist < 2 || !q->ng) return 0;
    /* the n-gram drafter cannot fail (it allocates nothing); a failure drafts nothing */
    if (q->ng->propose(q->ng, hist, n_hist, kcap, &q->draft, NULL) != BRISK_OK) q->draft = (brisk_draft){0};
    return q->draft.n;
}

const int32_t *brisk_spec_seq_draft(const brisk_spec_seq *q) { return q->draft.tokens; }

int32_t brisk_spec_seq_propose_later(brisk_spec_seq *q, int32_t kcap) {
    q->draft = (brisk_draft){.n = BRISK_MAX(0, BRISK_MIN(kcap, q->kmax)), .tokens = q->dtok};
    return q->draft.n;
}

void brisk_spec_seq_set_draft(brisk_spec_seq *q, const int32_t *tokens, int32_t n) {
    n = BRISK_MAX(0, BRISK_MIN(n, BRISK_SPEC_MAX_DRAFT));
    if (tokens != q->dtok) memcpy(q->dtok, tokens, (size_t)n * sizeof *tokens);
    q->draft = (brisk_draft){.n = n, .tokens = q->dtok};
}

static void shadow_feed(brisk_spec_seq *q, brisk_spec_policy *p, const int32_t *toks, int32_t n) {
    plan_shadow *h = &q->sh;
    for (int32_t i = 0; i < n && h->active; i++) {
        const bool ok = toks[i] == h->tokens[h->idx];
        plan_learn(p, h->bucket, 1, ok ? 1 : 0);
        if (!ok || ++h->idx == h->n) h->active = false;
    }
}

int32_t brisk_spec_seq_commit(brisk_spec_seq *q, brisk_spec_policy *p, brisk_sampler *smp, int32_t n_vocab,
                              const float *const *rows, int32_t k, bool greedy, float *scratch, int32_t *out) {
    if (k <= 0) {
        /* plain decoding, exactly as without speculation (the same RNG draws) */
        out[0] = brisk_sampler_sample(smp, rows[0]);
        brisk_sampler_accept(smp, out[0]);
        shadow_feed(q, p, out, 1);
        if (!q->sh.active && q->draft.n > 0 && q->mode != BRISK_SPEC_DRAFT_BATCH) {
            /* follow this step's proposal (it predicted out[0] first) to learn its acceptance for free */
            q->sh = (plan_shadow){.n = BRISK_MIN(q->draft.n, BRISK_SPEC_MAX_DRAFT), .idx = 0,
                                  .bucket = plan_bucket(q->draft.match_len), .active = true};
            memcpy(q->sh.tokens, q->draft.tokens, (size_t)q->sh.n * sizeof(int32_t));
            shadow_feed(q, p, out, 1);
        }
        return 1;
    }
    brisk_draft d = q->draft;
    d.n = BRISK_MIN(k, d.n);
    const brisk_verify_opts o = {.greedy = greedy};
    const int32_t m = brisk_spec_verify(smp, n_vocab, rows, &d, &o, scratch, out);
    plan_learn(p, q->mode == BRISK_SPEC_DRAFT_BATCH ? -1 : plan_bucket(d.match_len), d.n, m - 1);
    q->sh.active = false;
    q->drafted += d.n;
    q->accepted += m - 1;
    return m;
}

void brisk_spec_seq_counts(const brisk_spec_seq *q, int64_t *drafted, int64_t *accepted) {
    if (drafted) *drafted = q->drafted;
    if (accepted) *accepted = q->accepted;
}
