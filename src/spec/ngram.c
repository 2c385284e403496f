/* ngram: the prompt-lookup drafter. It finds the longest suffix of the
 * history (prompt + generated text) that occurred before, preferring the most
 * recent occurrence on ties, and proposes the tokens that followed it. No
 * model runs, so a proposal costs a scan of the history: O(n_hist) with an
 * early exit on the last token, about 10 us at 4k tokens, far below a target
 * pass. Strong on code and edits, where text repeats. */
#include "spec/spec.h"
#include "base/base.h"

#include <stdlib.h>

#define NGRAM_MAX_MATCH 64   /* longer matches add no information about the continuation */

typedef struct ngram_drafter {
    brisk_drafter base;
    int32_t min_match, max_k;
    int32_t *tokens;   /* [max_k] */
} ngram_drafter;

static brisk_status ngram_propose(brisk_drafter *d, const int32_t *hist, int32_t n, int32_t k, brisk_draft *out,
                                  brisk_error *err) {
    ngram_drafter *g = (ngram_drafter *)d;
    (void)err;
    out->n = 0;
    out->tokens = g->tokens;
    out->q = NULL;
    out->match_len = 0;
    if (k > g->max_k) k = g->max_k;
    if (k <= 0 || n < 2) return BRISK_OK;
    const int32_t last = hist[n - 1];
    int32_t best_len = 0, best_j = -1;
    /* j: index right after an earlier occurrence of the suffix; its continuation starts at j */
    for (int32_t j = n - 1; j >= 1; j--) {
        if (hist[j - 1] != last) continue;
        int32_t len = 1;
        const int32_t cap = BRISK_MIN(NGRAM_MAX_MATCH, j);
        while (len < cap && hist[j - 1 - len] == hist[n - 1 - len]) len++;
        if (len > best_len) {
            best_len = len;
            best_j = j;
            if (len == NGRAM_MAX_MATCH) break;
        }
    }
    if (best_len < g->min_match) return BRISK_OK;
    int32_t m = 0;
    while (m < k && best_j + m < n) {
        g->tokens[m] = hist[best_j + m];
        m++;
    }
    out->n = m;
    out->match_len = best_len;
    return BRISK_OK;
}

static void ngram_free(brisk_drafter *d) {
    ngram_drafter *g = (ngram_drafter *)d;
    free(g->tokens);
    free(g);
}

brisk_status brisk_drafter_ngram_init(brisk_drafter **out, int32_t min_match, int32_t max_k, brisk_error *err) {
    *out = NULL;
    if (min_match < 1 || min_match > NGRAM_MAX_MATCH)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "n-gram drafter: minimum match %d out of range [1, %d]", min_match,
                          NGRAM_MAX_MATCH);
    if (max_k < 1 || max_k > BRISK_SPEC_MAX_DRAFT)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "n-gram drafter: draft length %d out of range [1, %d]", max_k,
                          BRISK_SPEC_MAX_DRAFT);
    ngram_drafter *g = calloc(1, sizeof *g);
    if (!g) return brisk_fail(err, BRISK_ERR_NOMEM, "n-gram drafter: out of memory");
    g->tokens = malloc((size_t)max_k * sizeof(int32_t));
    if (!g->tokens) {
        free(g);
        return brisk_fail(err, BRISK_ERR_NOMEM, "n-gram drafter: out of memory");
    }
    g->base = (brisk_drafter){.name = "ngram", .propose = ngram_propose, .sync = NULL, .free = ngram_free};
    g->min_match = min_match;
    g->max_k = max_k;
    *out = &g->base;
    return BRISK_OK;
}

void brisk_drafter_free(brisk_drafter *d) {
    if (d) d->free(d);
}
