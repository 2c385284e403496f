/* policy: KV retention policies (issue #18). A policy decides which of a
 * sequence's slots stay when the sequence would exceed its budget; the cache
 * then compacts the survivors (brisk_kv_compact), so whole blocks return to
 * the pool. Every policy is one row of a table (brisk_kv_policy_ops, one file
 * each: policy_streaming.c, policy_random.c), built from three steps:
 *   score   a slot's value to keep (higher is kept first),
 *   select  the slots to keep (default: the protected ones, then the best
 *           scores; a policy may replace it),
 *   evict   drop the rest (default: compaction).
 * The protected slots are the sinks (a sequence's first `sink` slots, which
 * hold its first positions since they are never dropped) and the window (its
 * last `window` slots); the budget counts them.
 *
 * When it runs: before each batch (brisk_kv_policy_make_room, called by the
 * forward pass once the batch is validated), every sequence of the batch that
 * would hold more than `budget` slots with the batch's tokens is cut to
 * budget - max(its tokens in the batch, one block of 32) (the block at most
 * half of budget - sink - window), so no token is ever computed while more than the
 * budget is resident, and a decode compacts once per block, not per token. A policy's choice depends only on the
 * sequence's own slots (positions, tokens) and its configuration, never on
 * other sequences or the batch's layout: batch invariance holds for a given
 * schedule of batches per sequence.
 *
 * Attention statistics (the scored policies h2o, snapkv, tova): a policy
 * that observes attention gets, per sequence and slot, the attention mass the
 * slot received (p->mass): for each observed query (which ones: the policy's
 * `observe`), in every layer, the softmax probability of each of its query
 * heads on the slot, summed. Attention (model/attention.c) adds it after a
 * query's output is complete, recomputing the scores (the output's bits never
 * change). The sums are fixed point (BRISK_KV_MASS_ONE = probability 1) and
 * added with integer atomics, so they do not depend on the threads' order or
 * on what else the batch holds: a policy's choice stays batch invariant. The
 * mass moves with the slots when they are compacted, starts at 0 when a slot
 * is (re)written, is copied by a fork and cleared when the sequence is
 * re-synced to a prompt (brisk_kv_sync_prefix). Only tokens in position order
 * (not token trees) are observed.
 *
 * A window of the last w queries (snapkv: w = window; tova: w = 1) is exact
 * however the tokens were batched: the mass has w rows, the query at
 * position P adds to row P % w, and before a batch the rows its observed
 * queries will write are cleared, so the rows always hold the last w
 * positions' queries and a slot's mass is the sum of its w entries. h2o's
 * single row is never cleared.
 *
 * The oracle (policy_oracle.c, a reference row for brisk perplexity) records
 * one row per query position (rows = n_ctx) in a first pass that keeps every
 * slot, and ranks the slots of a second pass of the same tokens by what the
 * recorded queries still to come give them (brisk_kv_policy_oracle_phase).
 *
 * memdecay (policy_memdecay.c) needs when a slot was last attended, not how
 * much: with ops->seen_threshold set, attention also raises p->seen[slot] to
 * the position of every query that gives the slot at least that probability
 * in some head (an atomic max: order independent, batch invariant). */
#ifndef BRISK_KV_POLICY_H
#define BRISK_KV_POLICY_H

#include "kv/kv.h"

typedef enum brisk_kv_policy_kind {
    BRISK_KV_POLICY_NONE = 0,
    BRISK_KV_POLICY_STREAMING = 1,   /* sinks + the most recent slots (StreamingLLM) */
    BRISK_KV_POLICY_RANDOM = 2,      /* sinks + window + a seeded random choice of the rest (a reference row) */
    BRISK_KV_POLICY_H2O = 3,         /* heavy hitters: the most attention accumulated over every query (Zhang et al., 2023) */
    BRISK_KV_POLICY_SNAPKV = 4,      /* the attention of an observation window of the last queries, pooled (Li et al., 2024) */
    BRISK_KV_POLICY_TOVA = 5,        /* the attention of the newest query (Oren et al., 2024) */
    BRISK_KV_POLICY_ORACLE = 6,      /* the attention of the queries still to come, recorded by a full-cache pass (a reference row) */
    BRISK_KV_POLICY_MEMDECAY = 7,    /* a priority per slot that decays, at its role's rate, with the steps since it was last attended */
    BRISK_KV_POLICY_ROLE = 8,        /* by the slot's role in the JSON around it (key, value, text, punctuation), then h2o's score */
} brisk_kv_policy_kind;
#define BRISK_KV_N_POLICIES 9

/* A slot's lexical role in the JSON around it (policy_role.c). */
typedef enum brisk_kv_lex {
    BRISK_KV_LEX_TEXT = 0,    /* outside any JSON value */
    BRISK_KV_LEX_PUNCT = 1,   /* { } [ ] , : and whitespace inside a value */
    BRISK_KV_LEX_VALUE = 2,   /* a string value, number or literal */
    BRISK_KV_LEX_KEY = 3,     /* an object key's string, quotes included */
} brisk_kv_lex;
#define BRISK_KV_N_LEX 4
/* A token's bytes through the JSON lexer (base/json_lex.h; *state 0 = its prose start, before any text)
 * advances, and the token's role is returned (that of its first non-space
 * byte; a space-only token takes the role of where it stands). */
uint8_t brisk_kv_json_step(uint64_t *state, const char *bytes, size_t n);
/* The text of a token for the lexer: the engine's callback (the vocabulary's
 * piece); *n its length. NULL with *n = 0 for none. */
typedef const char *(*brisk_kv_token_text_fn)(const void *user, int32_t token, char *buf, size_t cap, size_t *n);

/* Which queries' attention a policy accumulates into p->mass. */
typedef enum brisk_kv_observe {
    BRISK_KV_OBSERVE_NONE = 0,     /* none: the policy scores without attention */
    BRISK_KV_OBSERVE_ALL = 1,      /* every query, summed since the slot was written */
    BRISK_KV_OBSERVE_WINDOW = 2,   /* the queries of the last `window` positions fed, however they were batched */
    BRISK_KV_OBSERVE_LAST = 3,     /* the newest token's query only */
    BRISK_KV_OBSERVE_RECORD = 4,   /* the oracle's: every query of a recording pass, one row per position */
} brisk_kv_observe;

/* The oracle's phases per sequence (brisk_kv_policy_oracle_phase). */
typedef enum brisk_kv_oracle_phase {
    BRISK_KV_ORACLE_NONE = 0,     /* nothing recorded: an eviction is refused */
    BRISK_KV_ORACLE_RECORD = 1,   /* every slot kept, every query's attention recorded by position */
    BRISK_KV_ORACLE_REPLAY = 2,   /* evictions rank slots by the recorded queries after them */
} brisk_kv_oracle_phase;

/* The oracle's table: n_seq x n_ctx x n_ctx sums of 8 bytes (-c 2048: 32 MiB
 * per sequence), per-head times n_layer x KV heads (the fixture's 12: 384
 * MiB); a larger table is refused. */
#define BRISK_KV_ORACLE_MAX_BYTES ((size_t)512 << 20)

/* Fixed point of p->mass: a probability of 1 (2^30; a slot's sum stays
 * below 2^63 up to 2^33 head-queries, e.g. 64 layers x 64 heads x 2M tokens). */
#define BRISK_KV_MASS_ONE 1073741824.0

/* "none", "streaming", "random", "h2o", "snapkv", "tova", "oracle", "memdecay"; "?" outside the enum. */
const char *brisk_kv_policy_name(int kind);
/* The policy named (case-insensitive), or -1. */
int brisk_kv_policy_parse(const char *name);
/* Every policy's name, '|'-separated ("none|streaming|..."), for messages and help. */
const char *brisk_kv_policy_names(void);

/* --kv-budget's value: an integer >= 1 (slots) or a fraction 0 < F < 1 of
 * n_ctx (slots = floor(F * n_ctx), at least 1). BRISK_ERR_INVALID_ARG with a
 * message naming what is wrong otherwise (the caller prefixes the flag). */
brisk_status brisk_kv_budget_parse(const char *text, int32_t n_ctx, int32_t *slots, brisk_error *err);

typedef struct brisk_kv_policy_config {
    int32_t kind;     /* brisk_kv_policy_kind */
    int32_t budget;   /* slots per sequence, sinks and window included */
    int32_t sink;     /* first slots always kept (>= 0) */
    int32_t window;   /* last slots always kept (>= 1: the newest slot gives the next position) */
    uint64_t seed;    /* random: the seed of its choice */
    /* per-head selection (docs/KV.md "Per-head selection"): each (layer, KV
     * head) ranks and keeps its own slots, as H2O, SnapKV and TOVA do in
     * their papers, every head keeping the same count, so that compaction
     * still frees whole blocks. For the policies that score by attention
     * (ops->per_head); n_heads = n_layer x the KV heads. */
    bool per_head;
} brisk_kv_policy_config;

typedef struct brisk_kv_policy brisk_kv_policy;

typedef struct brisk_kv_policy_ops {
    const char *name;
    /* slot (a candidate: neither sink nor window) of seq: higher is kept first */
    float (*score)(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot);
    /* keep[0..n_keep) := the slots to keep, increasing; NULL = brisk_kv_policy_select_top */
    void (*select)(brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t n_keep, int32_t *keep);
    /* drop every slot but keep[0..n_keep); NULL = brisk_kv_compact */
    brisk_status (*evict)(brisk_kv_policy *p, brisk_kv *kv, int32_t seq, const int32_t *keep, int32_t n_keep, brisk_error *err);
    brisk_kv_observe observe;   /* the attention it scores by (p->mass), or NONE */
    /* > 0: also track, per slot, the last query position that gave it a
     * probability >= this in some head of some layer (p->seen; observe must
     * be ALL) */
    float seen_threshold;
    /* true: each slot's JSON role is lexed as it is written (p->lex; policy_role.c) */
    bool lexes;
    /* true: its score means something per (layer, KV head): cfg.per_head is allowed */
    bool per_head;
} brisk_kv_policy_ops;

struct brisk_kv_policy {
    brisk_kv_policy_config cfg;
    const brisk_kv_policy_ops *ops;
    /* scratch, n_ctx entries each: the candidates (score, slot) and the keep list */
    struct brisk_kv_policy_cand { float score; int32_t slot; } *cand;
    int32_t *keep;
    int32_t *count;        /* [n_seq] a batch's tokens per sequence */
    /* observing policies: [n_seq][rows][n_heads][n_ctx] attention mass per
     * slot (fixed point, BRISK_KV_MASS_ONE; atomically added by attention),
     * rows 1 or the observation window (above), n_heads 1 (shared slots: the
     * sum over every layer and head) or, per-head, one per (layer, KV head);
     * and per sequence one past the slot of its last token in the current
     * batch */
    int64_t *mass;
    int32_t *batch_end;
    /* the oracle: per sequence its phase (brisk_kv_oracle_phase) and the
     * positions recorded (the sealed rows), else NULL */
    int32_t *phase, *recorded;
    /* seen_threshold > 0: [n_seq][n_heads][n_ctx] the last query position
     * that attended the slot (-1: none yet; per-head: in that head), raised
     * by attention with an atomic max (order independent, so batch
     * invariant); moves with the slots */
    int32_t *seen;
    float seen_threshold;   /* ops->seen_threshold */
    /* ops->lexes: [n_seq][n_ctx] each slot's brisk_kv_lex and the lexer's
     * state after it; they move with the slots. The token text comes from
     * token_text (brisk_kv_policy_set_text; none: every slot is text) */
    uint8_t *lex;
    uint64_t *lexst;
    brisk_kv_token_text_fn token_text;
    const void *token_text_user;
    int32_t rows, n_ctx;
    /* per-head selection (cfg.per_head): n_heads = n_layer x KV heads, else 1.
     * A per-head compaction leaves each head's slot s at its own position:
     * hpos [n_seq][n_heads][n_ctx] holds them for slots [0, mat[seq]); the
     * slots from mat on (written since) are the same in every head and their
     * positions are the cache's (brisk_kv_slot_pos, which for the slots below
     * mat gives head 0's). hkeep [n_heads][n_ctx]: the keep lists of one cut. */
    int32_t n_heads;
    int32_t *hpos, *mat, *hkeep;
    uint8_t *hrole;        /* [n_seq][n_heads][n_ctx] each head's slot roles, as hpos (memdecay's rates) */
    /* the head whose slots select and score rank now (per-head: its index
     * layer x KV heads + head), or -1: every head's (shared slots; per-head,
     * the slot's mass summed over the heads) */
    int32_t head;
    int64_t n_runs;        /* evictions run (sequences cut) */
    size_t bytes;          /* what brisk_kv_policy_set allocated */
};

extern const brisk_kv_policy_ops brisk_kv_policy_streaming;
extern const brisk_kv_policy_ops brisk_kv_policy_random;
extern const brisk_kv_policy_ops brisk_kv_policy_h2o;
extern const brisk_kv_policy_ops brisk_kv_policy_snapkv;
extern const brisk_kv_policy_ops brisk_kv_policy_tova;
extern const brisk_kv_policy_ops brisk_kv_policy_oracle;
extern const brisk_kv_policy_ops brisk_kv_policy_memdecay;
extern const brisk_kv_policy_ops brisk_kv_policy_role;

/* Check cfg against the cache (budget within [sink + window + 1, n_ctx],
 * sink >= 0, window >= 1, a known kind) and attach it to kv (replacing any
 * earlier one; kind NONE detaches). Allocates the policy's scratch. */
brisk_status brisk_kv_policy_set(brisk_kv *kv, const brisk_kv_policy_config *cfg, brisk_error *err);
void brisk_kv_policy_free(brisk_kv_policy *p);   /* NULL is a no-op */

/* Before a batch of n tokens of sequences seq[0..n) (ids valid): every
 * sequence whose slots plus its tokens in the batch exceed the budget is cut
 * to budget - max(its tokens, min(BRISK_KV_BLOCK, (budget - sink - window) / 2)) (or less, to
 * keep every pinned slot). *changed says whether any slot moved. Fails with
 * BRISK_ERR_CAPACITY, before changing anything, when a sequence brings more
 * tokens than budget - sink - window leaves room for, or when its pinned
 * slots with the sinks, the window and its tokens exceed the budget. A
 * policy's select that left out a pinned slot fails it (BRISK_ERR_INVALID_ARG)
 * before anything is evicted. */
brisk_status brisk_kv_policy_make_room(brisk_kv *kv, const int32_t *seq, int32_t n, bool *changed, brisk_error *err);

/* The cut make_room makes of seq before c of its tokens (its slots plus c
 * exceed the budget): *must, the slots that stay whatever the policy (the
 * sinks, the window and every pinned slot), and *n_keep, the slots it
 * keeps: budget - max(c, min(BRISK_KV_BLOCK, (budget - sink - window) / 2)),
 * or *must when that is more. The scheduler sizes a sequence's chunks from
 * it (sched.c), so its cuts fall where a one-token decode's would. */
void brisk_kv_policy_cut(const brisk_kv *kv, int32_t seq, int32_t c, int32_t *n_keep, int32_t *must);
/* The most tokens seq's next batch may bring so that the policy cuts where a
 * token-by-token feed would (INT32_MAX without a policy; 0 when the pinned
 * slots, sinks and window fill the budget): below the budget, up to it (and
 * at most budget - sink - window); at it, what a one-token decode's cut
 * leaves free. Feeding in batches of at most this many (any size within it)
 * gives the same cuts, hence the same output, as any other such feed: the
 * fixed schedule of serve, run and chat (batch invariance under retention). */
int32_t brisk_kv_policy_room(const brisk_kv *kv, int32_t seq);
/* Whether policy kind scores per (layer, KV head) (cfg.per_head allowed):
 * h2o, snapkv, tova, oracle, memdecay. */
bool brisk_kv_policy_per_head_ok(int kind);
/* The bytes brisk_kv_policy_set allocates for a policy of this kind
 * (BRISK_KV_POLICY_NONE or an unknown kind: 0) over n_seq sequences of n_ctx
 * slots: its scratch and its attention statistics (the oracle's table is
 * n_seq x n_ctx^2 sums). false, *bytes 0, when they exceed the oracle's
 * limit or overflow (the policy's init then refuses, naming why). */
bool brisk_kv_policy_plan(int kind, int32_t window, int32_t n_seq, int32_t n_ctx, size_t *bytes);
/* The same with per-head selection over n_heads (layer, KV head) pairs (1 = shared slots). */
bool brisk_kv_policy_plan_heads(int kind, int32_t window, int32_t n_seq, int32_t n_ctx, int32_t n_heads, size_t *bytes);

/* Observing policies: whether the query of the token that will occupy slot
 * of seq in the batch make_room just prepared is observed (false without an
 * observing policy), and the mass row the query at position pos adds to
 * (NULL without an observing policy). */
bool brisk_kv_policy_observes(const brisk_kv *kv, int32_t seq, int32_t slot);
static inline int64_t *brisk_kv_policy_mass_row(const brisk_kv *kv, int32_t seq, int32_t pos) {
    const brisk_kv_policy *p = kv->policy;
    if (!p || !p->mass) return NULL;
    return p->mass + ((size_t)seq * (size_t)p->rows + (size_t)(pos % p->rows)) * (size_t)p->n_heads * (size_t)p->n_ctx;
}
/* Where layer's KV head kvh's part starts in a row of per-slot statistics
 * (mass, seen): its own per-head, 0 (the shared part) otherwise. */
static inline size_t brisk_kv_policy_head_at(const brisk_kv *kv, int32_t layer, int32_t kvh) {
    const brisk_kv_policy *p = kv->policy;
    return p->n_heads > 1 ? ((size_t)layer * (size_t)kv->n_head + (size_t)kvh) * (size_t)p->n_ctx : 0;
}
/* The part of a mass row (above) that layer's KV head kvh adds to. */
static inline int64_t *brisk_kv_policy_mass_head(const brisk_kv *kv, int64_t *row, int32_t layer, int32_t kvh) {
    return row + brisk_kv_policy_head_at(kv, layer, kvh);
}
/* Whether seq's heads hold different slots (a per-head cut since the slots
 * were last aligned): then the cache's tokens and positions are head 0's
 * and only the policy knows the others (state files refuse it). */
static inline bool brisk_kv_policy_heads_differ(const brisk_kv *kv, int32_t seq) {
    const brisk_kv_policy *p = kv->policy;
    return p && p->mat && p->mat[seq] > 0;
}
/* Whether every head's slot of seq holds the cache's position (always
 * without per-head slot maps). */
bool brisk_kv_policy_heads_alike(const brisk_kv *kv, int32_t seq, int32_t slot);
/* A slot's position in the head being ranked (p->head; the cache's below it). */
int32_t brisk_kv_policy_slot_pos(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot);
/* Per-head: the position of slot in head (layer x KV heads + kvh) of seq. */
int32_t brisk_kv_policy_head_pos(const brisk_kv *kv, int32_t seq, int32_t head, int32_t slot);
/* The cache's hook (brisk_kv_truncate): seq holds n slots now. */
void brisk_kv_policy_truncated(brisk_kv *kv, int32_t seq, int32_t n);
/* Per-head: slots [from, len) of seq moved to new positions in every head:
 * new_pos[0 .. len - from) (the context shift renumbers by slot), or, with
 * new_pos NULL, each by delta. */
void brisk_kv_policy_heads_moved(brisk_kv *kv, int32_t seq, int32_t from, int32_t len, const int32_t *new_pos, int32_t delta);
/* seq's seen row (n_ctx entries) and the probability that counts as
 * attending, or NULL without a policy that tracks it. */
static inline int32_t *brisk_kv_policy_seen_row(const brisk_kv *kv, int32_t seq, float *threshold) {
    const brisk_kv_policy *p = kv->policy;
    if (!p || !p->seen) return NULL;
    *threshold = p->seen_threshold;
    return p->seen + (size_t)seq * (size_t)p->n_heads * (size_t)p->n_ctx;
}
/* The part of a seen row (above) of layer's KV head kvh: its own per-head. */
static inline int32_t *brisk_kv_policy_seen_head(const brisk_kv *kv, int32_t *row, int32_t layer, int32_t kvh) {
    return row + brisk_kv_policy_head_at(kv, layer, kvh);
}
/* The seen entry of slot in the head being ranked (p->head; per-head only). */
int32_t brisk_kv_policy_slot_seen(const brisk_kv_policy *p, int32_t seq, int32_t slot);
/* A slot's role in the head being ranked (the cache's without per-head maps). */
uint8_t brisk_kv_policy_slot_role(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot);
/* A slot's mass: its entries summed over the rows, in the head being ranked
 * (p->head) or, at -1, summed over every head. */
int64_t brisk_kv_policy_slot_mass(const brisk_kv_policy *p, int32_t seq, int32_t slot);
/* The cache's hooks (kv.c): dst became a fork of src; seq was re-synced to a
 * prompt (its statistics start again). No-ops without an observing policy. */
void brisk_kv_policy_forked(brisk_kv *kv, int32_t src, int32_t dst);
/* A lexing policy (role): where token texts come from (the engine's vocabulary). */
void brisk_kv_policy_set_text(brisk_kv *kv, brisk_kv_token_text_fn fn, const void *user);
/* The cache's hook after token was written into slot of seq (brisk_kv_written):
 * a lexing policy lexes it from the state after slot - 1. No-op otherwise. */
void brisk_kv_policy_written(brisk_kv *kv, int32_t seq, int32_t slot, int32_t token, bool in_order);
void brisk_kv_policy_reset_seq(brisk_kv *kv, int32_t seq);
/* After another compaction of seq (the context shift's, kv/shift.c): the
 * kept slots' statistics follow them as make_room's do. After seq's newest
 * slots moved by delta positions: a window's rows (keyed by position % rows)
 * are rotated with them, so they still hold the last queries. No-ops without
 * an observing policy. */
void brisk_kv_policy_compacted(brisk_kv *kv, int32_t seq, int32_t len, const int32_t *keep, int32_t n_keep);
void brisk_kv_policy_repositioned(brisk_kv *kv, int32_t seq, int32_t delta);
/* The oracle (policy_oracle.c): RECORD empties nothing itself (the caller
 * empties seq first) and starts a recording: seq's next decodes, positions 0,
 * 1, ... in order, keep every slot and record each query's attention by
 * position. REPLAY seals what was recorded (row P := the attention of the
 * queries at P and after, per key position) for the same tokens fed again
 * from position 0: its evictions keep the slots those queries give the most.
 * BRISK_ERR_INVALID_ARG without the oracle policy or for REPLAY without a
 * recording. */
brisk_status brisk_kv_policy_oracle_phase(brisk_kv *kv, int32_t seq, brisk_kv_oracle_phase phase, brisk_error *err);
/* A slot's accumulated mass as its score (h2o's and tova's score). */
float brisk_kv_policy_score_mass(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot);

/* The default select: slots [0, sink) and [len - window, len), every pinned
 * slot (kv->pin_mask; make_room has checked that they fit n_keep), then the
 * candidates with the highest scores (ties: the later slot), in slot order. */
/* Pinned slots (kv->pin_mask) of seq among slots [lo, hi). */
int32_t brisk_kv_policy_pinned_in(const brisk_kv *kv, int32_t seq, int32_t lo, int32_t hi);
void brisk_kv_policy_select_top(brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t n_keep, int32_t *keep);

#endif
