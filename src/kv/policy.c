/* policy: the retention policies' table, configuration and the run before
 * each batch (see policy.h). */
#include "kv/policy.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const brisk_kv_policy_ops *const policy_table[BRISK_KV_N_POLICIES] = {
    NULL,   /* none: nothing to run */
    &brisk_kv_policy_streaming,
    &brisk_kv_policy_random,
    &brisk_kv_policy_h2o,
    &brisk_kv_policy_snapkv,
    &brisk_kv_policy_tova,
    &brisk_kv_policy_oracle,
    &brisk_kv_policy_memdecay,
    &brisk_kv_policy_role,
};

const char *brisk_kv_policy_names(void) { return "none|streaming|random|h2o|snapkv|tova|oracle|memdecay|role"; }

const char *brisk_kv_policy_name(int kind) {
    if (kind == BRISK_KV_POLICY_NONE) return "none";
    return kind > 0 && kind < BRISK_KV_N_POLICIES ? policy_table[kind]->name : "?";
}

bool brisk_kv_policy_per_head_ok(int kind) { return kind > 0 && kind < BRISK_KV_N_POLICIES && policy_table[kind]->per_head; }

int brisk_kv_policy_parse(const char *name) {
    if (!name) return -1;
    for (int k = 0; k < BRISK_KV_N_POLICIES; k++)
        if (!strcasecmp(name, brisk_kv_policy_name(k))) return k;
    return -1;
}

brisk_status brisk_kv_budget_parse(const char *text, int32_t n_ctx, int32_t *slots, brisk_error *err) {
    *slots = 0;
    if (!text || !*text) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "empty; give slots (an integer >= 1) or a fraction 0 < F < 1 of -c");
    bool digits = true;
    size_t n = 0;
    for (; text[n]; n++) digits = digits && text[n] >= '0' && text[n] <= '9';
    if (n > 32) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "'%.32s...' is too long for slots or a fraction", text);
    if (digits) {
        long long v = 0;
        for (size_t i = 0; i < n; i++) {
            v = v * 10 + (text[i] - '0');
            if (v > INT32_MAX) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "%s slots is too many (the context is %d)", text, n_ctx);
        }
        if (v < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "%s slots: give at least 1 (or a fraction 0 < F < 1 of -c)", text);
        if (v > n_ctx)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "%s slots exceed the context of %d (-c): nothing would be evicted", text, n_ctx);
        *slots = (int32_t)v;
        return BRISK_OK;
    }
    /* a fraction: digits, one point, digits ("0.25", ".5"); no sign, exponent or other text */
    int points = 0, frac_digits = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '.') points++;
        else if (text[i] >= '0' && text[i] <= '9') frac_digits += points > 0;
        else return brisk_fail(err, BRISK_ERR_INVALID_ARG, "'%s' is neither slots (an integer >= 1) nor a fraction 0 < F < 1", text);
    }
    if (points != 1 || frac_digits == 0)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "'%s' is neither slots (an integer >= 1) nor a fraction 0 < F < 1", text);
    const double f = strtod(text, NULL);
    if (!(f > 0.0 && f < 1.0))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "the fraction %s must lie strictly between 0 and 1 (or give slots as an integer)", text);
    const double v = f * (double)n_ctx;
    *slots = v < 1.0 ? 1 : (int32_t)v;
    return BRISK_OK;
}

void brisk_kv_policy_free(brisk_kv_policy *p) {
    if (!p) return;
    free(p->cand);
    free(p->keep);
    free(p->count);
    free(p->mass);
    free(p->batch_end);
    free(p->phase);
    free(p->recorded);
    free(p->seen);
    free(p->lex);
    free(p->lexst);
    free(p->hpos);
    free(p->mat);
    free(p->hkeep);
    free(p->hrole);
    free(p);
}

/* Rows of attention statistics a policy keeps per sequence (above, in policy.h): its observation window, one per
 * query position (the oracle), else one. */
static int32_t observe_rows(const brisk_kv_policy_ops *ops, int32_t window, int32_t n_ctx) {
    return ops->observe == BRISK_KV_OBSERVE_WINDOW ? window : ops->observe == BRISK_KV_OBSERVE_RECORD ? n_ctx : 1;
}

brisk_status brisk_kv_policy_set(brisk_kv *kv, const brisk_kv_policy_config *cfg, brisk_error *err) {
    const brisk_kv_policy_config c = *cfg;
    if (c.kind < 0 || c.kind >= BRISK_KV_N_POLICIES)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV policy %d unknown (%s)", c.kind, brisk_kv_policy_names());
    if (c.kind == BRISK_KV_POLICY_NONE) {
        brisk_kv_policy_free(kv->policy);
        kv->policy = NULL;
        return BRISK_OK;
    }
    if (c.sink < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV policy %s: %d sinks must not be negative", brisk_kv_policy_name(c.kind), c.sink);
    if (c.window < 1)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV policy %s: the window of %d slots must be at least 1 (the newest slot is always kept)",
                          brisk_kv_policy_name(c.kind), c.window);
    if ((int64_t)c.sink + c.window >= c.budget || c.budget > kv->n_ctx)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "KV policy %s: a budget of %d slots must hold the %d sinks and the %d-slot window with room to spare, and at most "
                          "the context (%d)",
                          brisk_kv_policy_name(c.kind), c.budget, c.sink, c.window, kv->n_ctx);
    if (c.per_head && !brisk_kv_policy_per_head_ok(c.kind))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "KV policy %s: per-head selection is for the policies that rank slots by the attention each head gives them "
                          "(h2o, snapkv, tova, oracle, memdecay)",
                          brisk_kv_policy_name(c.kind));
    if (c.per_head && kv->pin_mask)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "KV policy %s: per-head selection does not keep pinned roles (--kv-pin) yet",
                          brisk_kv_policy_name(c.kind));
    if (c.per_head && brisk_kv_type_kivi(kv->k_type))
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "KV policy %s: a %s K cache cannot be compacted; use another K type",
                          brisk_kv_policy_name(c.kind), brisk_kv_type_name(kv->k_type));
    brisk_kv_policy *p = calloc(1, sizeof *p);
    if (!p) return brisk_fail(err, BRISK_ERR_NOMEM, "KV policy: out of memory");
    p->cfg = c;
    p->ops = policy_table[c.kind];
    const int32_t n_heads = c.per_head ? kv->n_layer * kv->n_head : 1;
    p->head = -1;
    p->n_heads = n_heads;
    p->cand = malloc((size_t)kv->n_ctx * sizeof *p->cand);
    p->keep = malloc((size_t)kv->n_ctx * sizeof *p->keep);
    p->count = calloc((size_t)kv->n_seq, sizeof *p->count);
    if (!p->cand || !p->keep || !p->count) {
        brisk_kv_policy_free(p);
        return brisk_fail(err, BRISK_ERR_NOMEM, "KV policy: out of memory for its scratch");
    }
    brisk_kv_policy_plan_heads(c.kind, c.window, kv->n_seq, kv->n_ctx, p->n_heads, &p->bytes);   /* what the allocations below add up to */
    p->n_ctx = kv->n_ctx;
    p->rows = observe_rows(p->ops, c.window, kv->n_ctx);
    if (p->ops->observe == BRISK_KV_OBSERVE_RECORD) {   /* one row per query position: n_ctx^2 sums per sequence, bounded */
        const double table = (double)kv->n_seq * (double)kv->n_ctx * (double)kv->n_ctx * (double)p->n_heads * (double)sizeof *p->mass;
        if (table > (double)BRISK_KV_ORACLE_MAX_BYTES) {
            brisk_kv_policy_free(p);
            return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                              "KV policy %s records every query's attention on every slot: %d sequences x %d x %d x %d heads x 8 bytes = "
                              "%.0f MiB, over its limit of %zu MiB; lower -c or the sequences",
                              brisk_kv_policy_name(c.kind), kv->n_seq, kv->n_ctx, kv->n_ctx, n_heads, table / 1048576.0,
                              BRISK_KV_ORACLE_MAX_BYTES >> 20);
        }
        p->phase = calloc((size_t)kv->n_seq, sizeof *p->phase);
        p->recorded = calloc((size_t)kv->n_seq, sizeof *p->recorded);
        if (!p->phase || !p->recorded) {
            brisk_kv_policy_free(p);
            return brisk_fail(err, BRISK_ERR_NOMEM, "KV policy: out of memory for its scratch");
        }
    }
    if (p->ops->observe != BRISK_KV_OBSERVE_NONE) {   /* the attention statistics: n_seq x rows x n_heads x n_ctx sums, 8 bytes each */
        p->mass = calloc((size_t)kv->n_seq * (size_t)p->rows * (size_t)p->n_heads * (size_t)kv->n_ctx, sizeof *p->mass);
        p->batch_end = calloc((size_t)kv->n_seq, sizeof *p->batch_end);
        if (!p->mass || !p->batch_end) {
            const int32_t rows = p->rows;   /* named after the free */
            brisk_kv_policy_free(p);
            return brisk_fail(err, BRISK_ERR_NOMEM,
                              "KV policy %s: out of memory for its attention statistics (%d sequences x %d x %d heads x %d slots)",
                              brisk_kv_policy_name(c.kind), kv->n_seq, rows, n_heads, kv->n_ctx);
        }
    }
    if (c.per_head) {   /* each head's slot positions: n_seq x n_heads x n_ctx, and one cut's keep lists */
        p->hpos = malloc((size_t)kv->n_seq * (size_t)p->n_heads * (size_t)kv->n_ctx * sizeof *p->hpos);
        p->mat = calloc((size_t)kv->n_seq, sizeof *p->mat);
        p->hkeep = malloc((size_t)p->n_heads * (size_t)kv->n_ctx * sizeof *p->hkeep);
        p->hrole = malloc((size_t)kv->n_seq * (size_t)p->n_heads * (size_t)kv->n_ctx);
        if (!p->hpos || !p->mat || !p->hkeep || !p->hrole) {
            brisk_kv_policy_free(p);
            return brisk_fail(err, BRISK_ERR_NOMEM, "KV policy %s: out of memory for its per-head slot maps (%d heads x %d slots)",
                              brisk_kv_policy_name(c.kind), n_heads, kv->n_ctx);
        }
    }
    if (p->ops->seen_threshold > 0.0f) {   /* the last position that attended each slot: n_seq x n_heads x n_ctx, 4 bytes each */
        p->seen = malloc((size_t)kv->n_seq * (size_t)n_heads * (size_t)kv->n_ctx * sizeof *p->seen);
        if (!p->seen) {
            brisk_kv_policy_free(p);
            return brisk_fail(err, BRISK_ERR_NOMEM, "KV policy %s: out of memory for its attention statistics", brisk_kv_policy_name(c.kind));
        }
        memset(p->seen, 0xff, (size_t)kv->n_seq * (size_t)n_heads * (size_t)kv->n_ctx * sizeof *p->seen);   /* -1: not attended yet */
        p->seen_threshold = p->ops->seen_threshold;
    }
    if (p->ops->lexes) {   /* each slot's JSON role and the lexer's state after it: n_seq x n_ctx, 1 + 8 bytes each */
        p->lex = calloc((size_t)kv->n_seq * (size_t)kv->n_ctx, sizeof *p->lex);
        p->lexst = calloc((size_t)kv->n_seq * (size_t)kv->n_ctx, sizeof *p->lexst);
        if (!p->lex || !p->lexst) {
            brisk_kv_policy_free(p);
            return brisk_fail(err, BRISK_ERR_NOMEM, "KV policy %s: out of memory for its slots' roles", brisk_kv_policy_name(c.kind));
        }
    }
    brisk_kv_policy_free(kv->policy);
    kv->policy = p;
    return BRISK_OK;
}

/* Best first: the higher score, then the later slot (a total order). */
static int cand_cmp(const void *a, const void *b) {
    const struct brisk_kv_policy_cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->slot > y->slot ? -1 : x->slot < y->slot;
}

static int slot_cmp(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

void brisk_kv_policy_select_top(brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t n_keep, int32_t *keep) {
    const int32_t len = brisk_kv_len(kv, seq), sink = p->cfg.sink, win = p->cfg.window;
    const int32_t lo = sink, hi = len - win;   /* candidates [lo, hi) */
    int32_t n = 0;
    for (int32_t s = 0; s < sink; s++) keep[n++] = s;
    /* pinned candidates are kept before any score is looked at */
    int32_t nc = 0, np = 0;
    for (int32_t s = lo; s < hi; s++) {
        if (brisk_kv_slot_pinned(kv, seq, s)) keep[n + np++] = s;
        else p->cand[nc++] = (struct brisk_kv_policy_cand){p->ops->score(p, kv, seq, s), s};
    }
    const int32_t m = n_keep - sink - win - np;   /* scored candidates kept (make_room checked m >= 0) */
    BRISK_ASSERT(m >= 0);
    qsort(p->cand, (size_t)nc, sizeof *p->cand, cand_cmp);
    for (int32_t i = 0; i < m; i++) keep[n + np + i] = p->cand[i].slot;
    qsort(keep + n, (size_t)(np + m), sizeof *keep, slot_cmp);
    n += np + m;
    for (int32_t s = hi; s < len; s++) keep[n++] = s;
}

/* Pinned slots of seq among [lo, hi). */
int32_t brisk_kv_policy_pinned_in(const brisk_kv *kv, int32_t seq, int32_t lo, int32_t hi) {
    int32_t n = 0;
    if (!kv->pin_mask) return 0;
    for (int32_t s = lo; s < hi; s++) n += brisk_kv_slot_pinned(kv, seq, s);
    return n;
}

/* Every pinned slot of seq is in keep[0 .. n_keep) (increasing): a policy's
 * own select is held to the rule too. */
static bool keeps_pinned(const brisk_kv *kv, int32_t seq, const int32_t *keep, int32_t n_keep, int32_t *missing) {
    if (!kv->pin_mask) return true;
    int32_t k = 0;
    for (int32_t s = 0; s < brisk_kv_len(kv, seq); s++) {
        while (k < n_keep && keep[k] < s) k++;
        if (brisk_kv_slot_pinned(kv, seq, s) && (k >= n_keep || keep[k] != s)) {
            *missing = s;
            return false;
        }
    }
    return true;
}

/* seq's mass, rows x n_ctx entries. */
static size_t row_len(const brisk_kv_policy *p) { return (size_t)p->n_heads * (size_t)p->n_ctx; }   /* a mass row: every head's part */
static int64_t *seq_mass(const brisk_kv_policy *p, int32_t seq) { return p->mass + (size_t)seq * (size_t)p->rows * row_len(p); }
/* Head h's part of row r of seq's mass (h 0 with shared slots). */
static int64_t *head_mass(const brisk_kv_policy *p, int32_t seq, int32_t r, int32_t h) {
    return seq_mass(p, seq) + (size_t)r * row_len(p) + (size_t)h * (size_t)p->n_ctx;
}
static int32_t *head_pos(const brisk_kv_policy *p, int32_t seq, int32_t h) {
    return p->hpos + ((size_t)seq * (size_t)p->n_heads + (size_t)h) * (size_t)p->n_ctx;
}
static uint8_t *head_role(const brisk_kv_policy *p, int32_t seq, int32_t h) {
    return p->hrole + ((size_t)seq * (size_t)p->n_heads + (size_t)h) * (size_t)p->n_ctx;
}
static int32_t *head_seen(const brisk_kv_policy *p, int32_t seq, int32_t h) {
    return p->seen + ((size_t)seq * (size_t)p->n_heads + (size_t)h) * (size_t)p->n_ctx;
}

/* Per-head: every head's positions of seq's slots [mat, len) from the cache (they are alike there), so
 * that [0, len) are all in hpos. */
static void heads_fill(brisk_kv_policy *p, const brisk_kv *kv, int32_t seq) {
    const int32_t len = brisk_kv_len(kv, seq);
    for (int32_t s = p->mat[seq]; s < len; s++) {
        const int32_t pos = brisk_kv_slot_pos(kv, seq, s);
        const uint8_t role = brisk_kv_slot_role(kv, seq, s);
        for (int32_t h = 0; h < p->n_heads; h++) head_pos(p, seq, h)[s] = pos, head_role(p, seq, h)[s] = role;
    }
    p->mat[seq] = len;
}

/* Head h's mass of seq in every row follows its kept slots keep[0 .. n_keep) (increasing) down to 0 ..
 * n_keep - 1; the freed slots' mass is cleared. */
static void mass_keep_head(brisk_kv_policy *p, int32_t seq, int32_t h, int32_t len, const int32_t *keep, int32_t n_keep) {
    for (int32_t r = 0; p->mass && !p->phase && r < p->rows; r++) {   /* the oracle's table is by position: it stays */
        int64_t *m = head_mass(p, seq, r, h);
        for (int32_t k = 0; k < n_keep; k++) m[k] = m[keep[k]];
        memset(m + n_keep, 0, (size_t)(len - n_keep) * sizeof *m);
    }
    if (p->hpos) {
        int32_t *hp = head_pos(p, seq, h);
        uint8_t *hr = head_role(p, seq, h);
        for (int32_t k = 0; k < n_keep; k++) hp[k] = hp[keep[k]], hr[k] = hr[keep[k]];
    }
    if (p->seen) {
        int32_t *v = head_seen(p, seq, h);
        for (int32_t k = 0; k < n_keep; k++) v[k] = v[keep[k]];
        memset(v + n_keep, 0xff, (size_t)(len - n_keep) * sizeof *v);
    }
}

/* The kept slots' mass follows them down to 0 .. n_keep - 1 in every row
 * (keep is increasing, so moving forward never overwrites a source still to
 * read); the freed slots' mass is cleared. */
static void mass_keep(brisk_kv_policy *p, int32_t seq, int32_t len, const int32_t *keep, int32_t n_keep) {
    for (int32_t h = 0; h < p->n_heads; h++) mass_keep_head(p, seq, h, len, keep, n_keep);   /* and the seen entries */
    if (p->lex) {   /* a role and the lexer's state after its token stay the slot's */
        uint8_t *x = p->lex + (size_t)seq * (size_t)p->n_ctx;
        uint64_t *st = p->lexst + (size_t)seq * (size_t)p->n_ctx;
        for (int32_t k = 0; k < n_keep; k++) x[k] = x[keep[k]], st[k] = st[keep[k]];
    }
}

/* Before a batch bringing c tokens of seq (after any eviction): its new slots
 * start with no mass in any row, and the rows its observed queries will add
 * to are cleared (window and last: the query at position P writes row
 * P % rows, so what stays is the previous queries of the window, exactly);
 * h2o's row keeps everything. */
static void observe_batch(brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t c) {
    const int32_t len = brisk_kv_len(kv, seq), next = brisk_kv_next_pos(kv, seq), w = p->rows;
    p->batch_end[seq] = len + c;
    for (int32_t h = 0; p->seen && h < p->n_heads; h++) memset(head_seen(p, seq, h) + len, 0xff, (size_t)c * sizeof *p->seen);   /* new slots: not attended yet */
    for (int32_t r = 0; r < w; r++)
        for (int32_t h = 0; h < p->n_heads; h++) memset(head_mass(p, seq, r, h) + len, 0, (size_t)c * sizeof *p->mass);
    if (p->ops->observe == BRISK_KV_OBSERVE_ALL) return;
    /* window, last, and the oracle's recording (rows = n_ctx: row P is the query at P's alone) */
    for (int32_t pos = BRISK_MAX(next, next + c - w); pos < next + c; pos++)
        for (int32_t h = 0; h < p->n_heads; h++) memset(head_mass(p, seq, pos % w, h), 0, (size_t)len * sizeof *p->mass);
}

void brisk_kv_policy_cut(const brisk_kv *kv, int32_t seq, int32_t c, int32_t *n_keep, int32_t *must) {
    const brisk_kv_policy *p = kv->policy;
    const int32_t budget = p->cfg.budget, room = budget - p->cfg.sink - p->cfg.window, len = brisk_kv_len(kv, seq);
    const int32_t sink = BRISK_MIN(p->cfg.sink, len), win = BRISK_MIN(p->cfg.window, len - sink);
    /* cut at least a block's worth (at most half the room, so that a small
     * budget keeps candidates): a decode of one token then compacts once per
     * 32 tokens, not every token (a compaction moves every kept slot after
     * the first dropped one) */
    *must = sink + win + brisk_kv_policy_pinned_in(kv, seq, sink, len - win);
    *n_keep = BRISK_MAX(budget - BRISK_MAX(c, BRISK_MIN(BRISK_KV_BLOCK, room / 2)), *must);
}

bool brisk_kv_policy_plan(int kind, int32_t window, int32_t n_seq, int32_t n_ctx, size_t *bytes) {
    return brisk_kv_policy_plan_heads(kind, window, n_seq, n_ctx, 1, bytes);
}

bool brisk_kv_policy_plan_heads(int kind, int32_t window, int32_t n_seq, int32_t n_ctx, int32_t n_heads, size_t *bytes) {
    *bytes = 0;
    if (kind <= BRISK_KV_POLICY_NONE || kind >= BRISK_KV_N_POLICIES || window < 0 || n_seq < 1 || n_ctx < 1 || n_heads < 1) return true;
    const brisk_kv_policy_ops *ops = policy_table[kind];
    const brisk_kv_policy *p = NULL;   /* for the element sizes */
    const double seqs = (double)n_seq, ctx = (double)n_ctx;
    double b = (double)sizeof *p + ctx * (double)(sizeof *p->cand + sizeof *p->keep) + seqs * (double)sizeof *p->count;
    if (ops->observe == BRISK_KV_OBSERVE_RECORD) {
        if (seqs * ctx * ctx * (double)n_heads * (double)sizeof *p->mass > (double)BRISK_KV_ORACLE_MAX_BYTES) return false;
        b += seqs * (double)(sizeof *p->phase + sizeof *p->recorded);
    }
    const double rows = (double)observe_rows(ops, window, n_ctx);
    const double heads = (double)n_heads;
    if (ops->observe != BRISK_KV_OBSERVE_NONE) b += seqs * (rows * heads * ctx * (double)sizeof *p->mass + (double)sizeof *p->batch_end);
    if (n_heads > 1) b += (seqs + 1.0) * heads * ctx * (double)sizeof *p->hpos + seqs * heads * ctx * (double)sizeof *p->hrole + seqs * (double)sizeof *p->mat;
    if (ops->seen_threshold > 0.0f) b += seqs * heads * ctx * (double)sizeof *p->seen;
    if (ops->lexes) b += seqs * ctx * (double)(sizeof *p->lex + sizeof *p->lexst);
    if (b > (double)SIZE_MAX / 2) return false;
    *bytes = (size_t)b;
    return true;
}

int32_t brisk_kv_policy_room(const brisk_kv *kv, int32_t seq) {
    const brisk_kv_policy *p = kv->policy;
    if (!p) return INT32_MAX;
    const int32_t len = brisk_kv_len(kv, seq), budget = p->cfg.budget, room = budget - p->cfg.sink - p->cfg.window;
    if (len < budget) return BRISK_MIN(budget - len, room);
    int32_t keep, must;
    brisk_kv_policy_cut(kv, seq, 1, &keep, &must);
    return BRISK_MAX(0, budget - keep);
}

/* make_room's refusals for c tokens of seq, before anything changes: an
 * oracle recording out of order, pinned slots that leave no room, an oracle
 * replay with no recording. */
static brisk_status cut_check(const brisk_kv_policy *p, const brisk_kv *kv, int32_t id, int32_t c, brisk_error *err) {
    const int32_t budget = p->cfg.budget, len = brisk_kv_len(kv, id);
    const int32_t phase = p->phase ? p->phase[id] : BRISK_KV_ORACLE_REPLAY;
    if (phase == BRISK_KV_ORACLE_RECORD) {
        if (len != brisk_kv_next_pos(kv, id) || len + c > p->n_ctx)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                              "KV policy %s: sequence %d's recording holds %d slots up to position %d; it records positions 0, 1, ... "
                              "in order, at most %d",
                              p->ops->name, id, len, brisk_kv_next_pos(kv, id), p->n_ctx);
        return BRISK_OK;
    }
    if (len + c <= budget) return BRISK_OK;
    int32_t n_keep, must;
    brisk_kv_policy_cut(kv, id, c, &n_keep, &must);
    if (must > budget - c) {
        const int32_t sink = BRISK_MIN(p->cfg.sink, len), win = BRISK_MIN(p->cfg.window, len - sink);
        return brisk_fail(err, BRISK_ERR_CAPACITY,
                          "sequence %d: its %d pinned KV slots (--kv-pin) with the %d sinks and the %d-slot window leave no room "
                          "for %d more tokens in its budget of %d slots; raise --kv-budget or pin fewer roles",
                          id, must - sink - win, sink, win, c, budget);
    }
    if (phase == BRISK_KV_ORACLE_NONE)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "KV policy %s: sequence %d has no recorded pass to rank its slots by (a first pass over the same "
                          "tokens with every slot kept: brisk_seq_oracle)",
                          p->ops->name, id);
    return BRISK_OK;
}

brisk_status brisk_kv_policy_make_room(brisk_kv *kv, const int32_t *seq, int32_t n, bool *changed, brisk_error *err) {
    *changed = false;
    brisk_kv_policy *p = kv->policy;
    if (!p) return BRISK_OK;
    const int32_t budget = p->cfg.budget, room = budget - p->cfg.sink - p->cfg.window;
    for (int32_t i = 0; i < n; i++) p->count[seq[i]] = 0;
    for (int32_t i = 0; i < n; i++) p->count[seq[i]]++;
    for (int32_t i = 0; i < n; i++)
        if (p->count[seq[i]] > room)
            return brisk_fail(err, BRISK_ERR_CAPACITY,
                              "sequence %d: a batch of %d of its tokens does not fit its KV budget of %d slots beside the %d sinks and the "
                              "%d-slot window; feed it in batches of at most %d",
                              seq[i], p->count[seq[i]], budget, p->cfg.sink, p->cfg.window, room);
    /* every sequence's refusals first, so that a refused batch has changed nothing (count is negated: checked) */
    for (int32_t i = 0; i < n; i++) {
        const int32_t id = seq[i], c = p->count[id];
        if (c <= 0) continue;
        p->count[id] = -c;
        brisk_status st = cut_check(p, kv, id, c, err);
        if (st) return st;
    }
    for (int32_t i = 0; i < n; i++) {
        const int32_t id = seq[i], c = -p->count[id];
        if (c <= 0) continue;
        p->count[id] = 0;   /* once per sequence */
        const int32_t len = brisk_kv_len(kv, id);
        const int32_t phase = p->phase ? p->phase[id] : BRISK_KV_ORACLE_REPLAY;
        if (phase == BRISK_KV_ORACLE_RECORD) {   /* the oracle's first pass: every slot kept, each slot its own position */
            observe_batch(p, kv, id, c);
            continue;
        }
        if (len + c > budget && p->hpos) {   /* per-head: each head ranks and keeps its own n_keep slots */
            int32_t n_keep, must;
            brisk_kv_policy_cut(kv, id, c, &n_keep, &must);
            heads_fill(p, kv, id);
            for (int32_t h = 0; h < p->n_heads; h++) {
                p->head = h;
                (p->ops->select ? p->ops->select : brisk_kv_policy_select_top)(p, kv, id, n_keep, p->hkeep + (size_t)h * (size_t)p->n_ctx);
            }
            p->head = -1;
            brisk_status st = brisk_kv_compact_heads(kv, id, p->hkeep, (size_t)p->n_ctx, n_keep, err);
            if (st) return st;
            for (int32_t h = 0; h < p->n_heads; h++) mass_keep_head(p, id, h, len, p->hkeep + (size_t)h * (size_t)p->n_ctx, n_keep);
            p->mat[id] = n_keep;
            p->n_runs++;
            *changed = true;
        } else if (len + c > budget) {
            int32_t n_keep, must;
            brisk_kv_policy_cut(kv, id, c, &n_keep, &must);
            /* h2o's select widens its window: pinned slots then fall inside it, so the count above still bounds it */
            (p->ops->select ? p->ops->select : brisk_kv_policy_select_top)(p, kv, id, n_keep, p->keep);
            int32_t missing = -1;
            if (!keeps_pinned(kv, id, p->keep, n_keep, &missing))
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV policy %s: its selection would drop pinned slot %d of sequence %d",
                                  p->ops->name, missing, id);
            brisk_status st = p->ops->evict ? p->ops->evict(p, kv, id, p->keep, n_keep, err) : brisk_kv_compact(kv, id, p->keep, n_keep, err);
            if (st) return st;
            if ((p->mass || p->lex) && !p->phase) mass_keep(p, id, len, p->keep, n_keep);   /* the oracle's table is by position */
            p->n_runs++;
            *changed = true;
        }
        if (p->mass && !p->phase) observe_batch(p, kv, id, c);
    }
    return BRISK_OK;
}

bool brisk_kv_policy_observes(const brisk_kv *kv, int32_t seq, int32_t slot) {
    const brisk_kv_policy *p = kv->policy;
    if (!p || !p->mass) return false;
    const int32_t end = p->batch_end[seq];
    if (p->phase) return p->phase[seq] == BRISK_KV_ORACLE_RECORD;
    return p->ops->observe == BRISK_KV_OBSERVE_ALL || end - slot <= p->rows;   /* window or last: the batch's last `rows` tokens */
}

int64_t brisk_kv_policy_slot_mass(const brisk_kv_policy *p, int32_t seq, int32_t slot) {
    const int32_t h0 = p->head >= 0 ? p->head : 0, h1 = p->head >= 0 ? p->head + 1 : p->n_heads;
    int64_t sum = 0;
    for (int32_t r = 0; r < p->rows; r++)
        for (int32_t h = h0; h < h1; h++) sum += head_mass(p, seq, r, h)[slot];
    return sum;
}

int32_t brisk_kv_policy_slot_seen(const brisk_kv_policy *p, int32_t seq, int32_t slot) {
    return head_seen(p, seq, p->head > 0 ? p->head : 0)[slot];
}

uint8_t brisk_kv_policy_slot_role(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot) {
    if (p->hrole && p->head >= 0 && slot < p->mat[seq]) return head_role(p, seq, p->head)[slot];
    return brisk_kv_slot_role(kv, seq, slot);
}

int32_t brisk_kv_policy_slot_pos(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot) {
    return p->head >= 0 ? brisk_kv_policy_head_pos(kv, seq, p->head, slot) : brisk_kv_slot_pos(kv, seq, slot);
}

bool brisk_kv_policy_heads_alike(const brisk_kv *kv, int32_t seq, int32_t slot) {
    const brisk_kv_policy *p = kv->policy;
    if (!p || !p->hpos || slot >= p->mat[seq]) return true;
    const int32_t pos = brisk_kv_slot_pos(kv, seq, slot);
    for (int32_t h = 0; h < p->n_heads; h++)
        if (head_pos(p, seq, h)[slot] != pos) return false;
    return true;
}

int32_t brisk_kv_policy_head_pos(const brisk_kv *kv, int32_t seq, int32_t head, int32_t slot) {
    const brisk_kv_policy *p = kv->policy;
    if (p && p->hpos && slot < p->mat[seq]) return head_pos(p, seq, head)[slot];
    return brisk_kv_slot_pos(kv, seq, slot);
}

void brisk_kv_policy_heads_moved(brisk_kv *kv, int32_t seq, int32_t from, int32_t len, const int32_t *new_pos, int32_t delta) {
    brisk_kv_policy *p = kv->policy;
    if (!p || !p->hpos) return;
    const int32_t end = BRISK_MIN(len, p->mat[seq]);
    for (int32_t h = 0; h < p->n_heads; h++)
        for (int32_t s = from, *hp = head_pos(p, seq, h); s < end; s++) hp[s] = new_pos ? new_pos[s - from] : hp[s] + delta;
}

void brisk_kv_policy_truncated(brisk_kv *kv, int32_t seq, int32_t n) {
    brisk_kv_policy *p = kv->policy;
    if (p && p->mat && p->mat[seq] > n) p->mat[seq] = n;
}

float brisk_kv_policy_score_mass(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot) {
    (void)kv;
    return (float)brisk_kv_policy_slot_mass(p, seq, slot);
}

void brisk_kv_policy_forked(brisk_kv *kv, int32_t src, int32_t dst) {
    brisk_kv_policy *p = kv->policy;
    if (!p || (!p->mass && !p->lex) || src == dst) return;
    if (p->mass) memcpy(seq_mass(p, dst), seq_mass(p, src), (size_t)p->rows * row_len(p) * sizeof *p->mass);
    if (p->hpos) {
        memcpy(head_pos(p, dst, 0), head_pos(p, src, 0), row_len(p) * sizeof *p->hpos);
        memcpy(head_role(p, dst, 0), head_role(p, src, 0), row_len(p) * sizeof *p->hrole);
        p->mat[dst] = p->mat[src];
    }
    if (p->phase) p->phase[dst] = p->phase[src], p->recorded[dst] = p->recorded[src];
    if (p->seen) memcpy(head_seen(p, dst, 0), head_seen(p, src, 0), row_len(p) * sizeof *p->seen);
    if (p->lex) {
        memcpy(p->lex + (size_t)dst * (size_t)p->n_ctx, p->lex + (size_t)src * (size_t)p->n_ctx, (size_t)p->n_ctx * sizeof *p->lex);
        memcpy(p->lexst + (size_t)dst * (size_t)p->n_ctx, p->lexst + (size_t)src * (size_t)p->n_ctx, (size_t)p->n_ctx * sizeof *p->lexst);
    }
}

void brisk_kv_policy_set_text(brisk_kv *kv, brisk_kv_token_text_fn fn, const void *user) {
    brisk_kv_policy *p = kv->policy;
    if (!p) return;
    p->token_text = fn;
    p->token_text_user = user;
}

void brisk_kv_policy_written(brisk_kv *kv, int32_t seq, int32_t slot, int32_t token, bool in_order) {
    brisk_kv_policy *p = kv->policy;
    if (!p || !p->lex || slot < 0 || slot >= p->n_ctx) return;
    const size_t at = (size_t)seq * (size_t)p->n_ctx + (size_t)slot;
    /* a token tree's node (not in position order) is not lexed: it may be undone, and a chain continues from its
     * own previous slot */
    uint64_t state = slot > 0 ? p->lexst[at - 1] : 0;
    char buf[256];
    size_t n = 0;
    const char *text = in_order && p->token_text ? p->token_text(p->token_text_user, token, buf, sizeof buf, &n) : NULL;
    p->lex[at] = text ? brisk_kv_json_step(&state, text, n) : BRISK_KV_LEX_TEXT;
    p->lexst[at] = state;
}

void brisk_kv_policy_reset_seq(brisk_kv *kv, int32_t seq) {
    brisk_kv_policy *p = kv->policy;
    if (!p || (!p->mass && !p->lex)) return;
    if (p->mass) memset(seq_mass(p, seq), 0, (size_t)p->rows * row_len(p) * sizeof *p->mass);
    if (p->mat) p->mat[seq] = 0;   /* the synced slots are every head's */
    if (p->phase) p->phase[seq] = BRISK_KV_ORACLE_NONE, p->recorded[seq] = 0;
    if (p->seen) memset(head_seen(p, seq, 0), 0xff, row_len(p) * sizeof *p->seen);
    /* a prompt synced from the prefix cache holds every one of its tokens in order: lexed again from them */
    if (p->lex)
        for (int32_t s = 0; s < brisk_kv_len(kv, seq); s++) brisk_kv_policy_written(kv, seq, s, brisk_kv_slot_token(kv, seq, s), true);
}

void brisk_kv_policy_compacted(brisk_kv *kv, int32_t seq, int32_t len, const int32_t *keep, int32_t n_keep) {
    brisk_kv_policy *p = kv->policy;
    if (!p || (!p->mass && !p->lex)) return;
    if (p->phase) {   /* the oracle's table is by position, and the positions no longer match it */
        p->phase[seq] = BRISK_KV_ORACLE_NONE;
        return;
    }
    mass_keep(p, seq, len, keep, n_keep);   /* per-head: the same slots of every head (the context shift's drop), hpos with them */
    if (p->hpos) {   /* kept slots from below mat (a prefix of keep) keep their per-head positions; the rest were alike */
        const int32_t mat = BRISK_MIN(p->mat[seq], len);
        int32_t m = 0;
        while (m < n_keep && keep[m] < mat) m++;
        p->mat[seq] = m;
    }
}

/* Swap rows a and b of seq's mass. */
static void swap_rows(brisk_kv_policy *p, int32_t seq, int32_t a, int32_t b) {
    int64_t *x = seq_mass(p, seq) + (size_t)a * row_len(p), *y = seq_mass(p, seq) + (size_t)b * row_len(p);
    for (size_t i = 0; i < row_len(p); i++) {
        const int64_t t = x[i];
        x[i] = y[i];
        y[i] = t;
    }
}

static void reverse_rows(brisk_kv_policy *p, int32_t seq, int32_t lo, int32_t hi) {   /* rows [lo, hi) */
    for (int32_t a = lo, b = hi - 1; a < b; a++, b--) swap_rows(p, seq, a, b);
}

void brisk_kv_policy_repositioned(brisk_kv *kv, int32_t seq, int32_t delta) {
    brisk_kv_policy *p = kv->policy;
    if (p && p->seen)   /* the positions that attended moved with the slots: the steps since stay what they were */
        for (size_t s = 0, n = row_len(p); s < n; s++) {   /* every head's part */
            int32_t *v = head_seen(p, seq, 0) + s;
            if (*v >= 0) *v = *v + delta < 0 ? 0 : *v + delta;
        }
    if (!p || !p->mass || p->rows <= 1) return;
    if (p->phase) {   /* the oracle's rows are positions of the recorded pass: they no longer match */
        p->phase[seq] = BRISK_KV_ORACLE_NONE;
        return;
    }
    /* the query that was at position P (row P % w) is now at P + delta: row (P + delta) % w := row P % w, a
     * rotation of the rows by delta mod w (three reversals, in place) */
    const int32_t w = p->rows, r = (int32_t)(((int64_t)delta % w + w) % w);
    if (r == 0) return;
    reverse_rows(p, seq, 0, w);
    reverse_rows(p, seq, 0, r);
    reverse_rows(p, seq, r, w);
}

brisk_status brisk_kv_policy_oracle_phase(brisk_kv *kv, int32_t seq, brisk_kv_oracle_phase phase, brisk_error *err) {
    brisk_kv_policy *p = kv->policy;
    if (!p || !p->phase) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "the oracle's passes need the context's KV policy to be oracle");
    if (seq < 0 || seq >= kv->n_seq) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d out of range [0, %d)", seq, kv->n_seq);
    int64_t *m = seq_mass(p, seq);
    const size_t w = row_len(p);   /* a row: n_ctx key positions per head */
    if (phase == BRISK_KV_ORACLE_RECORD) {
        memset(m, 0, (size_t)p->n_ctx * w * sizeof *m);
        p->recorded[seq] = 0;
    } else if (phase == BRISK_KV_ORACLE_REPLAY) {
        if (p->phase[seq] != BRISK_KV_ORACLE_RECORD)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV policy oracle: sequence %d has no recording to replay (record a pass first)", seq);
        /* seal: row P := the sum of rows P, P + 1, ... (the queries at P and after); slot s of the recording is position s */
        const int32_t n = brisk_kv_len(kv, seq);
        if (brisk_kv_next_pos(kv, seq) != n)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV policy oracle: sequence %d's recording of %d slots ends at position %d, not %d",
                              seq, n, brisk_kv_next_pos(kv, seq) - 1, n - 1);
        for (int32_t q = n - 2; q >= 0; q--)
            for (int32_t h = 0; h < p->n_heads; h++)
                for (int32_t s = 0; s < n; s++) {
                    const size_t at = (size_t)h * (size_t)p->n_ctx + (size_t)s;
                    m[(size_t)q * w + at] += m[(size_t)(q + 1) * w + at];
                }
        p->recorded[seq] = n;
    } else {
        p->recorded[seq] = 0;
    }
    p->phase[seq] = phase;
    return BRISK_OK;
}
