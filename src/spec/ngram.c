/* ngram: the prompt-lookup drafter. It finds the longest suffix of the
 * history (prompt + generated text) that occurred before, preferring the most
 * recent occurrence on ties, and proposes the tokens that followed it. No
 * model runs, so a proposal costs a scan of the history: O(n_hist) with an
 * early exit on the last token, about 10 us at 4k tokens, far below a target
 * pass. Strong on code and edits, where text repeats.
 *
 * A continuation that runs into the end of the history goes on as the text
 * since the match (hist[j..n-1]) repeated: if the suffix recurred after
 * `n - j` tokens, the same period is the natural guess for what follows, and
 * a proposal of any length costs nothing to make (repetition loops and
 * repeated lines otherwise cap the draft at one period).
 *
 * Trees: the continuations of up to `width` matches with distinct
 * continuations (longest match first, most recent on ties — so the first is
 * the chain's proposal), merged into a trie where they share a prefix. */
#include "spec/spec.h"
#include "base/base.h"

#include <stdint.h>
#include <stdlib.h>

#define NGRAM_MAX_MATCH 64   /* longer matches add no information about the continuation */

typedef struct ngram_drafter {
    brisk_drafter base;
    int32_t min_match, max_k;
    int32_t n_valid;   /* ids at or past this are padding: never proposed */
    int32_t *tokens;   /* [max_k] */
    int32_t tt[BRISK_SPEC_MAX_TREE], tp[BRISK_SPEC_MAX_TREE], tr[BRISK_SPEC_MAX_TREE], td[BRISK_SPEC_MAX_TREE];
} ngram_drafter;

/* Length of the suffix match ending right before j (hist[j-1] == hist[n-1] ...), capped. */
static int32_t match_at(const int32_t *hist, int32_t n, int32_t j) {
    int32_t len = 1;
    const int32_t cap = BRISK_MIN(NGRAM_MAX_MATCH, j);
    while (len < cap && hist[j - 1 - len] == hist[n - 1 - len]) len++;
    return len;
}

/* Token i of the continuation after an occurrence ending at j (j < n): past
 * the end of the history it repeats hist[j..n-1]. */
static inline int32_t cont_at(const int32_t *hist, int32_t n, int32_t j, int32_t i) { return hist[j + i % (n - j)]; }

/* Do the continuations at a and b agree on their first k tokens? */
static bool same_cont(const int32_t *hist, int32_t n, int32_t a, int32_t b, int32_t k) {
    for (int32_t i = 0; i < k; i++)
        if (cont_at(hist, n, a, i) != cont_at(hist, n, b, i)) return false;
    return true;
}

static brisk_status ngram_propose_tree(brisk_drafter *d, const int32_t *hist, int32_t n, int32_t k, int32_t width,
                                       int32_t max_nodes, brisk_draft_tree *out, brisk_error *err) {
    ngram_drafter *g = (ngram_drafter *)d;
    (void)err;
    *out = (brisk_draft_tree){.n = 0, .tokens = g->tt, .parent = g->tp, .rank = g->tr, .depth = g->td, .match_len = 0};
    if (k > g->max_k) k = g->max_k;
    width = BRISK_MAX(1, BRISK_MIN(width, BRISK_SPEC_MAX_WIDTH));
    max_nodes = BRISK_MIN(max_nodes, BRISK_SPEC_MAX_TREE);
    if (k <= 0 || n < 2 || max_nodes < 1) return BRISK_OK;
    /* the best `width` matches with distinct continuations, best first */
    int32_t cj[BRISK_SPEC_MAX_WIDTH], cl[BRISK_SPEC_MAX_WIDTH], nc = 0;
    const int32_t last = hist[n - 1];
    for (int32_t j = n - 1; j >= 1; j--) {
        if (hist[j - 1] != last) continue;
        const int32_t len = match_at(hist, n, j);
        if (len < g->min_match) continue;
        if (nc == width && len <= cl[nc - 1]) continue;
        int32_t dup = -1;
        for (int32_t c = 0; c < nc && dup < 0; c++)
            if (same_cont(hist, n, cj[c], j, k)) dup = c;
        if (dup >= 0 && len <= cl[dup]) continue;   /* ties: the more recent one stays */
        int32_t at = dup >= 0 ? dup : nc < width ? nc++ : nc - 1;
        /* move up past shorter matches (equal ones are more recent: stay above) */
        while (at > 0 && cl[at - 1] < len) {
            cj[at] = cj[at - 1];
            cl[at] = cl[at - 1];
            at--;
        }
        cj[at] = j;
        cl[at] = len;
    }
    if (nc == 0) return BRISK_OK;
    /* merge the continuations into a trie */
    int32_t nn = 0;
    for (int32_t c = 0; c < nc; c++) {
        int32_t cur = -1;
        for (int32_t i = 0; i < k; i++) {
            const int32_t tok = cont_at(hist, n, cj[c], i);
            if (tok >= g->n_valid) break;
            int32_t child = -1, n_children = 0;
            for (int32_t x = cur + 1; x < nn; x++)
                if (g->tp[x] == cur) {
                    n_children++;
                    if (g->tt[x] == tok) child = x;
                }
            if (child < 0) {
                if (nn == max_nodes || n_children == width) break;
                child = nn++;
                g->tt[child] = tok;
                g->tp[child] = cur;
                g->tr[child] = n_children;
                g->td[child] = i + 1;
            }
            cur = child;
        }
    }
    out->n = nn;
    out->match_len = cl[0];
    return BRISK_OK;
}

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
    for (; m < k; m++) {
        g->tokens[m] = cont_at(hist, n, best_j, m);
        if (g->tokens[m] >= g->n_valid) break;
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
    g->base = (brisk_drafter){.name = "ngram", .propose = ngram_propose, .propose_tree = ngram_propose_tree, .sync = NULL, .free = ngram_free};
    g->min_match = min_match;
    g->max_k = max_k;
    g->n_valid = INT32_MAX;
    *out = &g->base;
    return BRISK_OK;
}

void brisk_drafter_ngram_limit(brisk_drafter *d, int32_t n_valid) { ((ngram_drafter *)d)->n_valid = n_valid; }

void brisk_drafter_free(brisk_drafter *d) {
    if (d) d->free(d);
}
