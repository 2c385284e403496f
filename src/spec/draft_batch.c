/* draft_batch: a draft model's drafts for many sequences at once (the
 * scheduler's --spec draft; spec.h's brisk_spec_drafts). Sequence i of the
 * draft context shadows slot i of the target's: it holds a prefix of the
 * history of the choice in that slot, then the drafts fed after it. Each call
 * keeps, per sequence, the longest part that still agrees with the history
 * (the drafts the target accepted stay; brisk_seq_truncate drops the rest),
 * feeds what is missing for every sequence in one batch (the pending token
 * with its logits: the first draft), then decodes one token per sequence per
 * pass until each has its k. So a step of n speculating sequences costs k
 * draft passes of n tokens, not n x k passes of one: on a memory-bound draft
 * the n tokens of a pass cost about what one does.
 *
 * A sequence's first call (and one whose catch-up is longer than a draft:
 * after a preemption) syncs its prompt with brisk_seq_sync, which takes whole
 * blocks from the draft context's prefix cache (a fork, a resumed request)
 * and computes the rest in its own passes. Drafts are the draft's argmax:
 * point masses, which the verifier accepts losslessly when sampling too
 * (spec.h). A pass that fails (the draft pool full) clears the sequences in it
 * and drafts nothing for them; the target never depends on the draft. */
#include "spec/spec.h"
#include "base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* a catch-up longer than this (tokens) goes through brisk_seq_sync on its own */
#define DRAFTS_CATCHUP_MAX (BRISK_SPEC_MAX_DRAFT + 2)

struct brisk_spec_drafts {
    brisk_context *c;
    int32_t n_seq, n_ctx, n_batch, n_vocab, n_valid;
    int32_t *synced;        /* [n_seq] leading tokens of the sequence known equal to its owner's history */
    int32_t *n_tail;        /* [n_seq] drafts fed after them */
    int32_t *tail;          /* [n_seq][BRISK_SPEC_MAX_DRAFT] */
    int32_t *tok, *pos, *seq;   /* [n_batch] a pass */
    uint8_t *want;
    int32_t *who;           /* [n_batch] the request index of each logit row */
    int32_t *order;         /* [n_seq] scratch */
};

brisk_status brisk_spec_drafts_init(brisk_spec_drafts **out, brisk_context *draft, int32_t n_vocab, int32_t n_valid,
                                    brisk_error *err) {
    *out = NULL;
    brisk_spec_drafts *d = calloc(1, sizeof *d);
    if (!d) return brisk_fail(err, BRISK_ERR_NOMEM, "draft model: out of memory");
    d->c = draft;
    d->n_seq = brisk_context_n_seq(draft);
    d->n_ctx = brisk_context_n_ctx(draft);
    d->n_batch = brisk_context_n_batch(draft);
    d->n_vocab = n_vocab;
    d->n_valid = n_valid > 0 && n_valid < n_vocab ? n_valid : n_vocab;
    const size_t ns = (size_t)d->n_seq, nb = (size_t)d->n_batch;
    d->synced = calloc(ns, sizeof *d->synced);
    d->n_tail = calloc(ns, sizeof *d->n_tail);
    d->tail = calloc(ns * BRISK_SPEC_MAX_DRAFT, sizeof *d->tail);
    d->tok = malloc(nb * sizeof *d->tok);
    d->pos = malloc(nb * sizeof *d->pos);
    d->seq = malloc(nb * sizeof *d->seq);
    d->want = malloc(nb);
    d->who = malloc(nb * sizeof *d->who);
    d->order = malloc(ns * sizeof *d->order);
    if (!d->synced || !d->n_tail || !d->tail || !d->tok || !d->pos || !d->seq || !d->want || !d->who || !d->order) {
        brisk_spec_drafts_free(d);
        return brisk_fail(err, BRISK_ERR_NOMEM, "draft model: out of memory for %d sequences", d->n_seq);
    }
    for (int32_t s = 0; s < d->n_seq; s++) brisk_seq_truncate(d->c, s, 0, NULL);
    *out = d;
    return BRISK_OK;
}

void brisk_spec_drafts_free(brisk_spec_drafts *d) {
    if (!d) return;
    if (d->c && d->synced)
        for (int32_t s = 0; s < d->n_seq; s++) brisk_seq_truncate(d->c, s, 0, NULL);
    free(d->synced);
    free(d->n_tail);
    free(d->tail);
    free(d->tok);
    free(d->pos);
    free(d->seq);
    free(d->want);
    free(d->who);
    free(d->order);
    free(d);
}

void brisk_spec_drafts_reset(brisk_spec_drafts *d, int32_t seq) {
    if (!d || seq < 0 || seq >= d->n_seq) return;
    brisk_seq_truncate(d->c, seq, 0, NULL);   /* its full blocks stay in the draft's prefix cache */
    d->synced[seq] = 0;
    d->n_tail[seq] = 0;
}

static int32_t argmax_valid(const float *lg, int32_t n) {
    int32_t best = 0;
    for (int32_t t = 1; t < n; t++)
        if (lg[t] > lg[best]) best = t;
    return best;
}

/* The pass in d->tok.. (n tokens); each row r's argmax goes to its request's drafts. false: it failed. */
static bool run_pass(brisk_spec_drafts *d, int32_t n, int32_t rows, int32_t *const *out, int32_t *got, double *seconds,
                     int32_t *passes) {
    const brisk_batch b = {.n_tokens = n, .token = d->tok, .pos = d->pos, .seq = d->seq, .logits = d->want};
    const double t0 = brisk_time_now();
    const brisk_status st = brisk_decode(d->c, &b, NULL);
    *seconds += brisk_time_now() - t0;
    (*passes)++;
    if (st) return false;
    for (int32_t r = 0; r < rows; r++) {
        const int32_t i = d->who[r];
        out[i][got[i]++] = argmax_valid(brisk_get_logits(d->c, r), d->n_valid);
    }
    return true;
}

brisk_status brisk_spec_drafts_propose(brisk_spec_drafts *d, int32_t n, const int32_t *seq, const int32_t *const *hist,
                                       const int32_t *n_hist, const int32_t *k, int32_t *const *out, int32_t *got,
                                       double *seconds, int32_t *passes) {
    *seconds = 0.0;
    *passes = 0;
    int32_t kmax = 0, n_live = 0;
    /* catch-up: every sequence to its history's pending token, which is fed again with its logits */
    for (int32_t i = 0; i < n; i++) {
        got[i] = 0;
        const int32_t s = seq[i], nh = n_hist[i];
        const int32_t kk = BRISK_MIN(BRISK_MIN(k[i], BRISK_SPEC_MAX_DRAFT), d->n_ctx - nh + 1);
        if (s < 0 || s >= d->n_seq || nh < 1 || kk <= 0) continue;
        int32_t keep = d->synced[s], j = 0;
        while (j < d->n_tail[s] && keep + j < nh && d->tail[(size_t)s * BRISK_SPEC_MAX_DRAFT + j] == hist[i][keep + j]) j++;
        keep = BRISK_MIN(BRISK_MIN(keep + j, nh - 1), brisk_seq_len(d->c, s));
        if (brisk_seq_len(d->c, s) != keep && brisk_seq_truncate(d->c, s, keep, NULL) != BRISK_OK) {
            brisk_spec_drafts_reset(d, s);
            keep = 0;
        }
        d->synced[s] = keep;
        d->n_tail[s] = 0;
        if (nh - keep > DRAFTS_CATCHUP_MAX) {
            /* the prompt (or a rebuilt history): whole blocks from the draft's prefix cache, the rest computed;
             * not a draft pass's cost (it is paid once per request, as the target's prefill) */
            const brisk_status st = brisk_seq_sync(d->c, s, hist[i], nh - 1, NULL, NULL);
            if (st) {
                brisk_spec_drafts_reset(d, s);
                continue;
            }
            d->synced[s] = nh - 1;
        }
        d->order[n_live++] = i;
        kmax = BRISK_MAX(kmax, kk);
    }
    /* the catch-up passes: each sequence's missing tokens in one pass, the last with its logits */
    int32_t nt = 0, rows = 0;
    for (int32_t a = 0; a < n_live; a++) {
        const int32_t i = d->order[a], s = seq[i], from = d->synced[s], cnt = n_hist[i] - from;
        if (nt + cnt > d->n_batch) {
            if (!run_pass(d, nt, rows, out, got, seconds, passes))
                for (int32_t r = 0; r < rows; r++) brisk_spec_drafts_reset(d, seq[d->who[r]]);
            nt = rows = 0;
        }
        for (int32_t t = 0; t < cnt; t++) {
            d->tok[nt] = hist[i][from + t];
            d->pos[nt] = from + t;
            d->seq[nt] = s;
            d->want[nt] = t == cnt - 1;
            nt++;
        }
        d->who[rows++] = i;
    }
    if (nt > 0 && !run_pass(d, nt, rows, out, got, seconds, passes))
        for (int32_t r = 0; r < rows; r++) brisk_spec_drafts_reset(d, seq[d->who[r]]);
    for (int32_t a = 0; a < n_live; a++) {
        const int32_t i = d->order[a];
        if (got[i] > 0) d->synced[seq[i]] = n_hist[i];
    }
    /* then one token per sequence and pass: the last draft fed, the next one read */
    for (int32_t round = 1; round < kmax; round++) {
        nt = 0;
        for (int32_t a = 0; a < n_live; a++) {
            const int32_t i = d->order[a], s = seq[i];
            const int32_t kk = BRISK_MIN(BRISK_MIN(k[i], BRISK_SPEC_MAX_DRAFT), d->n_ctx - n_hist[i] + 1);
            if (got[i] != round || got[i] >= kk) continue;
            d->tok[nt] = out[i][round - 1];
            d->pos[nt] = n_hist[i] + round - 1;
            d->seq[nt] = s;
            d->want[nt] = 1;
            d->who[nt] = i;
            nt++;
        }
        if (nt == 0) break;
        if (!run_pass(d, nt, nt, out, got, seconds, passes)) {
            /* keep what was drafted; the sequences are cleared and resync at their next call */
            for (int32_t r = 0; r < nt; r++) {
                const int32_t i = d->who[r];
                brisk_spec_drafts_reset(d, seq[i]);
                got[i] = BRISK_MIN(got[i], round);
            }
            break;
        }
        for (int32_t r = 0; r < nt; r++) {
            const int32_t i = d->who[r], s = seq[i];
            if (d->synced[s] == n_hist[i]) d->tail[(size_t)s * BRISK_SPEC_MAX_DRAFT + d->n_tail[s]++] = out[i][round - 1];
        }
    }
    return BRISK_OK;
}
