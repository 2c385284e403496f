/* draft_model: a smaller model with the target's vocabulary drafts k tokens
 * autoregressively in its own context. Its KV holds a prefix of the history;
 * each round it keeps the longest prefix that still agrees with the history
 * (brisk_seq_truncate drops the rejected drafts), feeds what is missing in one
 * batch, then decodes one token at a time.
 *
 * When sampling, each draft token is drawn from the draft's own sampler chain
 * (same settings as the target's, with the penalty history of the drafted
 * position) and that distribution q is returned for the verifier. Drawing
 * uses a separate sampler whose RNG is never reset; the chain sampler is reset
 * each round only to rebuild its penalty history.
 *
 * Trees (greedy): the chain as above, plus the draft's runners-up (by raw
 * logit) at the first positions as leaves beside it, as many positions as
 * the node budget allows; they cost no extra draft passes.
 *
 * Drafter-only compression (brisk_spec_draft_kv): the draft context may store
 * K/V quantized and run a retention policy that evicts and compacts slots.
 * Then a slot is no longer a position, and brisk_seq_sync (which keeps only
 * slots holding their own position, and prefills in chunks of n_batch, past
 * the policy's room) would recompute the history every round. So with a
 * policy the drafter keeps the KV itself: in_kv[0..n_in_kv) are the history
 * tokens at positions 0..n_in_kv-1 the KV has seen (some evicted), and
 * n_tail counts the newest slots known to hold the consecutive positions
 * ending at n_in_kv - 1. Every policy keeps the last `window` slots
 * (kv/policy.h), and a decode that appends c tokens either evicts nothing
 * (the slot count grew by c: n_tail += c) or kept the old last `window`
 * slots and appended after them (n_tail = min(n_tail, window) + c). Rolling
 * back r < n_tail positions therefore drops exactly the last r slots and
 * leaves position n_in_kv - r - 1 the newest, where the next token continues;
 * a deeper rollback (rare: about as many rejected tokens as the window) clears
 * the KV and rebuilds it from the history (counted in restarts). Every batch
 * fed holds at most room = budget - sink - window tokens (brisk_kv_policy_make_room
 * refuses more). */
#include "spec/spec.h"
#include "base/base.h"
#include "sample/sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct model_drafter {
    brisk_drafter base;
    brisk_context *ctx;
    brisk_sampler *chain;   /* q: the chain with the drafted position's history (RNG unused) */
    brisk_sampler *rng;     /* draws from q; never reset */
    bool greedy;
    int32_t n_vocab, max_k, n_ctx, n_batch, last_n;
    int32_t *in_kv;         /* [n_ctx] the history tokens the draft KV has seen, by position */
    int32_t n_in_kv;        /* = the next position (= the slot count when nothing was evicted) */
    /* with a retention policy (room > 0): tokens per fed batch at most, the policy's window, the newest
     * slots known to hold consecutive positions ending at n_in_kv - 1, and rebuilds of the KV */
    int32_t room, kv_window, n_tail;
    int64_t restarts;
    int32_t *tokens;        /* [max_k] */
    float *q;               /* [max_k][n_vocab] */
    int32_t *pos, *seq;     /* [n_batch] */
    uint8_t *want;          /* [n_batch] */
    int32_t tt[BRISK_SPEC_MAX_TREE], tp[BRISK_SPEC_MAX_TREE], tr[BRISK_SPEC_MAX_TREE], td[BRISK_SPEC_MAX_TREE];
    int32_t alt[BRISK_SPEC_MAX_DRAFT][BRISK_SPEC_MAX_WIDTH - 1];   /* tree: runners-up per drafted position */
    float palt[BRISK_SPEC_MAX_DRAFT][BRISK_SPEC_MAX_WIDTH - 1];    /* their draft probabilities (softmax of the logits) */
    float pmain[BRISK_SPEC_MAX_DRAFT];                              /* the drafted token's */
    int32_t want_alt, n_alt_pos;   /* tree: runners-up wanted per position, positions to record them at */
} model_drafter;

/* The r best tokens of logits other than `skip`, best first, with their
 * probabilities under softmax(lg); *p_skip gets skip's. */
static void runners_up(const float *lg, int32_t n_vocab, int32_t skip, int32_t r, int32_t *out, float *p_out, float *p_skip) {
    float best[BRISK_SPEC_MAX_WIDTH], mx = -INFINITY;
    for (int32_t i = 0; i < r; i++) {
        best[i] = -INFINITY;
        out[i] = -1;
    }
    for (int32_t t = 0; t < n_vocab; t++) {
        if (t == skip || !(lg[t] > best[r - 1])) continue;
        int32_t at = r - 1;
        while (at > 0 && lg[t] > best[at - 1]) {
            best[at] = best[at - 1];
            out[at] = out[at - 1];
            at--;
        }
        best[at] = lg[t];
        out[at] = t;
    }
    for (int32_t t = 0; t < n_vocab; t++) mx = lg[t] > mx ? lg[t] : mx;
    double sum = 0.0;
    for (int32_t t = 0; t < n_vocab; t++) sum += exp((double)(lg[t] - mx));
    for (int32_t i = 0; i < r; i++) p_out[i] = out[i] < 0 ? 0.0f : (float)(exp((double)(best[i] - mx)) / sum);
    *p_skip = (float)(exp((double)(lg[skip] - mx)) / sum);
}

/* Make the KV hold hist[0..n) with hist[n-1]'s logits ready: brisk_seq_sync
 * keeps the longest prefix the draft KV (or its prefix cache) already holds. */
/* With a retention policy: forget the KV (truncate it to nothing). */
static void evicting_clear(model_drafter *m) {
    brisk_seq_truncate(m->ctx, 0, 0, NULL);
    m->n_in_kv = m->n_tail = 0;
}

/* With a retention policy: decode toks[0..c) (c <= room) at positions n_in_kv.., the last one's logits
 * kept when want_last, and follow what the policy did to the slots (see the header). */
static brisk_status evicting_feed(model_drafter *m, const int32_t *toks, int32_t c, bool want_last, brisk_error *err) {
    for (int32_t j = 0; j < c; j++) {
        m->pos[j] = m->n_in_kv + j;
        m->seq[j] = 0;
        m->want[j] = want_last && j == c - 1;
    }
    const int32_t before = brisk_seq_len(m->ctx, 0);
    const brisk_batch b = {.n_tokens = c, .token = toks, .pos = m->pos, .seq = m->seq, .logits = m->want};
    const brisk_status st = brisk_decode(m->ctx, &b, err);
    if (st) {
        /* the policy may have compacted before the decode failed: start again from the history next time */
        evicting_clear(m);
        return st;
    }
    const int32_t after = brisk_seq_len(m->ctx, 0);
    m->n_tail = after == before + c ? m->n_tail + c : BRISK_MIN(m->n_tail, m->kv_window) + c;
    memcpy(m->in_kv + m->n_in_kv, toks, (size_t)c * sizeof(int32_t));
    m->n_in_kv += c;
    return BRISK_OK;
}

/* With a retention policy: the catch-up by position. Keep the positions whose tokens still agree with hist
 * (at most n - 1: hist[n-1] is fed again for its logits), drop the rest as the last slots, feed the missing
 * tokens in batches of at most room. */
static brisk_status evicting_catch_up(model_drafter *m, const int32_t *hist, int32_t n, brisk_error *err) {
    int32_t keep = 0;
    const int32_t lim = BRISK_MIN(m->n_in_kv, n - 1);
    while (keep < lim && m->in_kv[keep] == hist[keep]) keep++;
    const int32_t drop = m->n_in_kv - keep;
    if (drop > 0 && drop >= m->n_tail) {
        /* the slot before the dropped ones must hold position keep - 1 (the next token continues after it):
         * known only inside the tail; otherwise the KV is rebuilt (a restart when there was something to keep) */
        evicting_clear(m);
        if (keep > 0) m->restarts++;
    } else if (drop > 0) {
        brisk_status st = brisk_seq_truncate(m->ctx, 0, brisk_seq_len(m->ctx, 0) - drop, err);
        if (st) {
            evicting_clear(m);
            return st;
        }
        m->n_tail -= drop;
        m->n_in_kv = keep;
    }
    const int32_t chunk = BRISK_MIN(m->room, m->n_batch);
    while (m->n_in_kv < n) {
        const int32_t c = BRISK_MIN(chunk, n - m->n_in_kv);
        brisk_status st = evicting_feed(m, hist + m->n_in_kv, c, m->n_in_kv + c == n, err);
        if (st) return st;
    }
    return BRISK_OK;
}

static brisk_status catch_up(model_drafter *m, const int32_t *hist, int32_t n, brisk_error *err) {
    if (m->room > 0) return evicting_catch_up(m, hist, n, err);
    brisk_status st = brisk_seq_sync(m->ctx, 0, hist, n, NULL, err);
    m->n_in_kv = brisk_seq_len(m->ctx, 0);
    if (st) return st;
    memcpy(m->in_kv, hist, (size_t)n * sizeof(int32_t));
    return BRISK_OK;
}

static brisk_status model_sync(brisk_drafter *d, const int32_t *hist, int32_t n, brisk_error *err) {
    if (n < 1) return BRISK_OK;
    return catch_up((model_drafter *)d, hist, n, err);
}

static brisk_status model_propose(brisk_drafter *d, const int32_t *hist, int32_t n, int32_t k, brisk_draft *out,
                                  brisk_error *err) {
    model_drafter *m = (model_drafter *)d;
    out->n = 0;
    out->tokens = m->tokens;
    out->q = m->greedy ? NULL : m->q;
    out->match_len = 0;
    if (k > m->max_k) k = m->max_k;
    /* the draft KV needs room for hist and k-1 drafted tokens */
    if (k > m->n_ctx - n + 1) k = m->n_ctx - n + 1;
    if (k <= 0 || n < 1) return BRISK_OK;
    brisk_status st = catch_up(m, hist, n, err);
    if (st) return st;
    /* the chain's penalty history at the first drafted position */
    brisk_sampler_reset(m->chain);
    for (int32_t i = BRISK_MAX(0, n - m->last_n); i < n; i++) brisk_sampler_accept(m->chain, hist[i]);
    for (int32_t i = 0; i < k; i++) {
        const float *lg = brisk_get_logits(m->ctx, 0);
        int32_t t;
        if (m->greedy) {
            t = brisk_sampler_sample(m->chain, lg);   /* argmax after penalties */
        } else {
            float *q = m->q + (size_t)i * (size_t)m->n_vocab;
            brisk_sampler_dist(m->chain, lg, q);
            t = brisk_sampler_draw(m->rng, q, m->n_vocab);
        }
        m->tokens[i] = t;
        out->n = i + 1;
        if (i < m->n_alt_pos) runners_up(lg, m->n_vocab, t, m->want_alt, m->alt[i], m->palt[i], &m->pmain[i]);
        if (i + 1 == k) break;
        brisk_sampler_accept(m->chain, t);
        if (m->room > 0) {
            if ((st = evicting_feed(m, &t, 1, true, err))) return st;
            continue;
        }
        int32_t p = m->n_in_kv, s0 = 0;
        uint8_t one = 1;
        brisk_batch b = {.n_tokens = 1, .token = &t, .pos = &p, .seq = &s0, .logits = &one};
        if ((st = brisk_decode(m->ctx, &b, err))) return st;
        m->in_kv[m->n_in_kv++] = t;
    }
    return BRISK_OK;
}

/* Runners-up worth a node: the draft's probability that the chain reaches
 * their position times their own, at least TREE_MIN_P (below it a node costs
 * more target time than it can return), best first within the budget. */
#define TREE_MIN_P 0.05

static brisk_status model_propose_tree(brisk_drafter *d, const int32_t *hist, int32_t n, int32_t k, int32_t width,
                                       int32_t max_nodes, brisk_draft_tree *out, brisk_error *err) {
    model_drafter *m = (model_drafter *)d;
    *out = (brisk_draft_tree){.n = 0, .tokens = m->tt, .parent = m->tp, .rank = m->tr, .depth = m->td, .match_len = 0};
    width = BRISK_MAX(1, BRISK_MIN(width, BRISK_SPEC_MAX_WIDTH));
    max_nodes = BRISK_MIN(max_nodes, BRISK_SPEC_MAX_TREE);
    k = BRISK_MIN(k, max_nodes);
    if (k <= 0) return BRISK_OK;
    m->want_alt = width - 1;
    m->n_alt_pos = width > 1 ? k : 0;
    brisk_draft chain;
    brisk_status st = model_propose(d, hist, n, k, &chain, err);
    m->n_alt_pos = 0;
    if (st) return st;
    int32_t nn = 0;
    for (int32_t i = 0; i < chain.n; i++, nn++) {
        m->tt[nn] = chain.tokens[i];
        m->tp[nn] = i - 1;
        m->tr[nn] = 0;
        m->td[nn] = i + 1;
    }
    if (width < 2) {
        out->n = nn;
        return BRISK_OK;
    }
    /* score every runner-up; take the best while they clear TREE_MIN_P and fit */
    float score[BRISK_SPEC_MAX_DRAFT][BRISK_SPEC_MAX_WIDTH - 1];
    bool take[BRISK_SPEC_MAX_DRAFT][BRISK_SPEC_MAX_WIDTH - 1];
    double reach = 1.0;
    for (int32_t i = 0; i < chain.n; i++) {
        for (int32_t r = 0; r < width - 1; r++) {
            score[i][r] = m->alt[i][r] < 0 ? 0.0f : (float)(reach * m->palt[i][r]);
            take[i][r] = false;
        }
        reach *= m->pmain[i];
    }
    for (int32_t budget = max_nodes - nn; budget > 0; budget--) {
        int32_t bi = -1, br = -1;
        float bs = (float)TREE_MIN_P;
        for (int32_t i = 0; i < chain.n; i++)
            for (int32_t r = 0; r < width - 1; r++)
                if (!take[i][r] && score[i][r] >= bs && (bi < 0 || score[i][r] > bs)) {
                    bs = score[i][r];
                    bi = i;
                    br = r;
                }
        if (bi < 0) break;
        take[bi][br] = true;
    }
    for (int32_t i = 0; i < chain.n; i++)
        for (int32_t r = 0, rank = 1; r < width - 1; r++) {
            if (!take[i][r]) continue;
            m->tt[nn] = m->alt[i][r];
            m->tp[nn] = i - 1;
            m->tr[nn] = rank++;
            m->td[nn] = i + 1;
            nn++;
        }
    out->n = nn;
    return BRISK_OK;
}

static void model_free(brisk_drafter *d) {
    model_drafter *m = (model_drafter *)d;
    brisk_context_free(m->ctx);
    brisk_sampler_free(m->chain);
    brisk_sampler_free(m->rng);
    free(m->in_kv);
    free(m->tokens);
    free(m->q);
    free(m->pos);
    free(m->seq);
    free(m->want);
    free(m);
}

/* Printable form of a token's text for messages. */
static void token_label(const brisk_model *mdl, int32_t id, char *buf, size_t cap) {
    size_t len = 0;
    const char *t = brisk_token_text(mdl, id, &len);
    if (!t) {
        snprintf(buf, cap, "(none)");
        return;
    }
    size_t o = 0;
    buf[o++] = '\'';
    for (size_t i = 0; i < len && o + 6 < cap; i++) {
        const unsigned char c = (unsigned char)t[i];
        if (c >= 0x20 && c != 0x7f && c != '\'') buf[o++] = (char)c;   /* UTF-8 passes through */
        else o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    }
    buf[o++] = '\'';
    buf[o] = 0;
}

brisk_status brisk_spec_check_vocab(const brisk_model *target, const brisk_model *draft, brisk_error *err) {
    brisk_model_info ti, di;
    brisk_model_get_info(target, &ti);
    brisk_model_get_info(draft, &di);
    const int32_t n = BRISK_MAX(ti.n_vocab, di.n_vocab);
    int32_t diff = -1;
    for (int32_t id = 0; id < n && diff < 0; id++) {
        size_t lt = 0, ld = 0;
        const char *a = brisk_token_text(target, id, &lt), *b = brisk_token_text(draft, id, &ld);
        if (!a != !b || (a && (lt != ld || memcmp(a, b, lt) != 0))) diff = id;
    }
    if (diff < 0 && ti.n_vocab == di.n_vocab) {
        if (brisk_token_bos(target) != brisk_token_bos(draft) || brisk_token_eos(target) != brisk_token_eos(draft))
            return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                              "draft model's special tokens differ from the target's (BOS %d vs %d, EOS %d vs %d)",
                              brisk_token_bos(draft), brisk_token_bos(target), brisk_token_eos(draft),
                              brisk_token_eos(target));
        return BRISK_OK;
    }
    char lt[96], ld[96];
    if (diff < 0) diff = BRISK_MIN(ti.n_vocab, di.n_vocab);
    token_label(target, diff, lt, sizeof lt);
    token_label(draft, diff, ld, sizeof ld);
    return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                      "draft model's vocabulary (%d tokens) differs from the target's (%d tokens): first difference at "
                      "token %d: draft %s, target %s",
                      di.n_vocab, ti.n_vocab, diff, ld, lt);
}

brisk_context_params brisk_spec_draft_context_params(int32_t n_ctx, int32_t n_threads, int32_t window, int32_t sink,
                                                     const brisk_spec_draft_kv *kv) {
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = n_ctx;
    cp.n_threads = n_threads;
    cp.attn_window = window;
    cp.attn_sink = sink;
    if (kv) {
        cp.type_k = kv->type_k;
        cp.type_v = kv->type_v;
        cp.kv_policy = kv->policy;
        if (kv->policy) {
            cp.kv_budget = kv->budget;
            cp.kv_sink = kv->sink;
            cp.kv_window = kv->window;
            /* the pool holds the budget: a sequence never holds more, so the memory is really saved */
            if (kv->budget > 0 && kv->budget < n_ctx) cp.kv_tokens = kv->budget;
        }
    }
    return cp;
}

bool brisk_drafter_model_kv_stats(const brisk_drafter *d, brisk_cache_stats *out, int64_t *restarts) {
    if (!d || d->propose != model_propose) return false;
    const model_drafter *m = (const model_drafter *)d;
    brisk_context_cache_stats(m->ctx, out);
    *restarts = m->restarts;
    return true;
}

brisk_status brisk_drafter_model_init(brisk_drafter **out, const brisk_model *draft, const brisk_model *target,
                                      int32_t n_ctx, int32_t n_threads, int32_t max_k, const brisk_sampler_params *sp,
                                      int32_t window, int32_t sink, const brisk_spec_draft_kv *kv, brisk_error *err) {
    *out = NULL;
    if (max_k < 1 || max_k > BRISK_SPEC_MAX_DRAFT)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "draft model: draft length %d out of range [1, %d]", max_k,
                          BRISK_SPEC_MAX_DRAFT);
    brisk_status st = brisk_spec_check_vocab(target, draft, err);
    if (st) return st;
    model_drafter *m = calloc(1, sizeof *m);
    if (!m) return brisk_fail(err, BRISK_ERR_NOMEM, "draft model: out of memory");
    m->base = (brisk_drafter){.name = "draft", .propose = model_propose, .propose_tree = model_propose_tree, .sync = model_sync, .free = model_free};
    brisk_model_info di;
    brisk_model_get_info(draft, &di);
    m->n_vocab = di.n_vocab;
    m->max_k = max_k;
    m->greedy = sp->temp <= 0.0f;
    m->last_n = sp->repeat_last_n;
    const brisk_context_params cp = brisk_spec_draft_context_params(n_ctx, n_threads, window, sink, kv);
    if ((st = brisk_context_init(draft, &cp, &m->ctx, err))) {
        brisk_error_prefix(err, "draft model");
        goto fail;
    }
    m->n_ctx = brisk_context_n_ctx(m->ctx);
    m->n_batch = brisk_context_n_batch(m->ctx);
    if (cp.kv_policy) {   /* brisk_context_init checked budget > sink + window */
        m->room = cp.kv_budget - cp.kv_sink - cp.kv_window;
        m->kv_window = cp.kv_window;
    }
    if ((st = brisk_sampler_init(&m->chain, sp, m->n_vocab, err))) goto fail;
    brisk_sampler_params rp = *sp;
    /* independent of the target's stream (the chain's seed: the drawn one when sp asked for a random seed) */
    rp.seed = brisk_sampler_seed(m->chain) ^ 0x9e3779b97f4a7c15ull;
    if (rp.seed == BRISK_SEED_RANDOM) rp.seed = 0;
    if ((st = brisk_sampler_init(&m->rng, &rp, m->n_vocab, err))) goto fail;
    size_t qn;
    if (!brisk_mul_size((size_t)max_k * sizeof(float), (size_t)m->n_vocab, &qn)) {
        st = brisk_fail(err, BRISK_ERR_CAPACITY, "draft model: draft distributions overflow");
        goto fail;
    }
    m->in_kv = malloc((size_t)m->n_ctx * sizeof(int32_t));
    m->tokens = malloc((size_t)max_k * sizeof(int32_t));
    m->q = m->greedy ? NULL : malloc(qn);
    m->pos = malloc((size_t)m->n_batch * sizeof(int32_t));
    m->seq = malloc((size_t)m->n_batch * sizeof(int32_t));
    m->want = malloc((size_t)m->n_batch);
    if (!m->in_kv || !m->tokens || (!m->greedy && !m->q) || !m->pos || !m->seq || !m->want) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "draft model: out of memory");
        goto fail;
    }
    *out = &m->base;
    return BRISK_OK;
fail:
    model_free(&m->base);
    return st;
}
