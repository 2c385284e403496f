/* sched_rec.h: recording a brisk_sched request's output, shared by test_sched and test_sched_kv.
 * A request's user pointer is an array of rec, one per choice: on_token and on_logits fill the
 * choice's rec with its tokens (the first REC_GEN kept, every one counted in n), the logits each
 * token was sampled from (when the rec has a logits buffer), its finish reason, how many finish
 * callbacks came and the request's id.
 * The including test defines REC_GEN (the tokens a rec keeps) and n_vocab (its model's vocabulary,
 * set before rec_init) before including this file. */
#ifndef BRISK_SCHED_REC_H
#define BRISK_SCHED_REC_H

#include "brisk.h"
#include "base/base.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef REC_GEN
#error "define REC_GEN (the tokens a rec keeps) before including sched_rec.h"
#endif

typedef struct rec {
    int32_t tok[REC_GEN];
    int32_t n;
    float *logits;          /* [REC_GEN][n_vocab], NULL: not recorded */
    brisk_finish finish;
    int32_t n_finish;       /* finish callbacks (must end at 1) */
    int64_t id;
} rec;

static inline void on_token(void *user, int64_t id, int32_t choice, int32_t token, brisk_finish finish) {
    rec *r = (rec *)user + choice;
    r->id = id;
    if (token < 0) {
        r->finish = finish;
        r->n_finish++;
        return;
    }
    if (r->n < REC_GEN) r->tok[r->n] = token;
    r->n++;
}

static inline void on_logits(void *user, int64_t id, int32_t choice, int32_t token, const float *logits, int32_t nv) {
    (void)id;
    (void)token;
    rec *r = (rec *)user + choice;
    if (r->logits && r->n < REC_GEN) memcpy(r->logits + (size_t)r->n * (size_t)nv, logits, (size_t)nv * sizeof(float));
}

/* n empty recs; with logits, each gets a logits buffer (freed by rec_free). */
static inline void rec_init(rec *r, int n, bool logits) {
    memset(r, 0, (size_t)n * sizeof *r);
    for (int i = 0; i < n; i++)
        if (logits) r[i].logits = calloc((size_t)REC_GEN * (size_t)n_vocab, sizeof(float));
}

static inline void rec_free(rec *r, int n) {
    for (int i = 0; i < n; i++) free(r[i].logits);
}

/* Empty again, keeping its logits buffer. */
static inline void rec_reset(rec *r) {
    float *l = r->logits;
    memset(r, 0, sizeof *r);
    r->logits = l;
}

/* Same tokens, same logits for every token (where both recorded them), one finish. */
static inline bool rec_same(const rec *a, const rec *b) {
    if (a->n != b->n || a->finish != b->finish || memcmp(a->tok, b->tok, (size_t)BRISK_MIN(a->n, REC_GEN) * sizeof(int32_t)))
        return false;
    if (a->logits && b->logits && memcmp(a->logits, b->logits, (size_t)BRISK_MIN(a->n, REC_GEN) * (size_t)n_vocab * sizeof(float)))
        return false;
    return true;
}

/* The first token (or logits row) where a and b differ; both recorded logits. */
static inline int first_diff(const rec *a, const rec *b) {
    int d = 0;
    while (d < BRISK_MIN(BRISK_MIN(a->n, b->n), REC_GEN) && a->tok[d] == b->tok[d] &&
           !memcmp(a->logits + (size_t)d * n_vocab, b->logits + (size_t)d * n_vocab, (size_t)n_vocab * sizeof(float)))
        d++;
    return d;
}

#endif
