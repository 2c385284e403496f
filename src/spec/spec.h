/* spec: lossless speculative decoding on the public engine API.
 *
 * A drafter proposes up to k tokens that continue a sequence; the target model
 * scores the pending token and all k drafts in one brisk_decode; a verifier
 * keeps the longest acceptable prefix and adds one token of its own, so every
 * target pass yields between 1 and k+1 tokens.
 *
 *   drafters   draft model (its own brisk_context and KV, rolled back with
 *              brisk_seq_truncate) and n-gram / prompt lookup (longest suffix
 *              match over prompt + generated text; no model cost)
 *   verifiers  greedy (longest prefix equal to the target's choice: the output
 *              equals plain greedy decoding token for token, given the engine's
 *              batch invariance) and stochastic (rejection sampling with
 *              residual resampling on the sampler chain's FINAL distributions,
 *              so the output is distributed exactly as plain sampling)
 *   trees      a drafter proposes several branches — n-gram:
 *              the continuations of several distinct matches; draft model: its
 *              runners-up at the first positions — verified in one target pass
 *              with brisk_decode_tree; the longest root path equal to the
 *              target's choices is kept (brisk_seq_keep_path), plus one token
 *   policy     the target's measured cost per pass of n tokens, the draft's
 *              measured cost per token and the recent acceptance rate choose k
 *              (0 = plain decoding), and chain or tree, to maximise expected
 *              tokens per second.
 *
 * Drafter-only compression: the draft context's KV may be quantized and run a
 * retention policy that evicts (brisk_spec_draft_kv) while the target keeps its
 * full cache, so the output stays exactly the target's.
 *
 * Not built: sampled draft-model trees; see docs/SPECULATIVE.md.
 *
 * Everything here uses only include/brisk.h plus the sampler extras of
 * sample/sample.h, so it can move to the public header unchanged. */
#ifndef BRISK_SPEC_H
#define BRISK_SPEC_H

#include "brisk.h"

#define BRISK_SPEC_MAX_DRAFT 32   /* hard cap on k (a target pass verifies k+1 tokens) */
#define BRISK_SPEC_MAX_TREE 32    /* hard cap on the nodes of a draft tree (a pass verifies them + 1) */
#define BRISK_SPEC_MAX_WIDTH 4    /* hard cap on the children of a tree node */

/* ---- drafters ---------------------------------------------------------------------------- */

typedef struct brisk_drafter brisk_drafter;

/* What a drafter proposed for one round. */
typedef struct brisk_draft {
    int32_t n;          /* tokens proposed, 0..k */
    int32_t *tokens;    /* [k] owned by the drafter, valid until its next call */
    /* [k][n_vocab] the distribution each token was drawn from (the draft's
     * sampler chain), or NULL: each token is a point mass (greedy drafting, n-gram) */
    const float *q;
    int32_t match_len;  /* n-gram: length of the suffix match (0 for other drafters) */
} brisk_draft;

/* A draft tree for one round. Nodes are listed parents
 * first; the children of a node are its drafter's choices for the next token,
 * rank 0 the first choice. The rank-0 path from the root is the chain the
 * drafter would have proposed. */
typedef struct brisk_draft_tree {
    int32_t n;            /* nodes, 0..BRISK_SPEC_MAX_TREE */
    int32_t *tokens;      /* [n] owned by the drafter, valid until its next call */
    int32_t *parent;      /* [n] parent node (< i), or -1: a child of the pending token */
    int32_t *rank;        /* [n] 0 = first choice among its siblings, 1 = second, ... */
    int32_t *depth;       /* [n] 1 for children of the pending token */
    int32_t match_len;    /* n-gram: the main branch's suffix match (0 for other drafters) */
} brisk_draft_tree;

struct brisk_drafter {
    const char *name;   /* "draft", "ngram" */
    /* Propose up to k tokens continuing hist[0..n_hist). */
    brisk_status (*propose)(brisk_drafter *d, const int32_t *hist, int32_t n_hist, int32_t k, brisk_draft *out,
                            brisk_error *err);
    /* Optional: a tree of depth <= k, <= width children per node and <=
     * max_nodes nodes continuing hist[0..n_hist). The draft model's works at
     * temperature 0 only (its runners-up are not samples). */
    brisk_status (*propose_tree)(brisk_drafter *d, const int32_t *hist, int32_t n_hist, int32_t k, int32_t width,
                                 int32_t max_nodes, brisk_draft_tree *out, brisk_error *err);
    /* Optional: bring internal state up to hist (e.g. prefill the draft KV) without proposing. */
    brisk_status (*sync)(brisk_drafter *d, const int32_t *hist, int32_t n_hist, brisk_error *err);
    void (*free)(brisk_drafter *d);
};

/* N-gram / prompt lookup: the longest suffix of hist (min_match..64 tokens)
 * that occurred earlier, most recent first on ties; proposes what followed it.
 * max_k bounds every proposal. */
brisk_status brisk_drafter_ngram_init(brisk_drafter **out, int32_t min_match, int32_t max_k, brisk_error *err);
/* Ids >= n_valid (a padded vocabulary's rows past its tokens) are never
 * proposed: a continuation stops before one. Default: no limit. */
void brisk_drafter_ngram_limit(brisk_drafter *d, int32_t n_valid);

/* The draft context's KV cache (drafter-only compression; all zero = F16, every
 * slot kept): its storage types (brisk_cache_type) and a retention policy
 * (kv/policy.h's kinds: brisk_context_params kv_policy, kv_budget, kv_sink,
 * kv_window). The target's cache is never touched by these, so only the
 * acceptance rate can change. With a policy the draft's KV pool is sized to the
 * budget (the memory is really saved), every batch the draft is fed is cut to
 * the policy's room (budget - sink - window tokens), and rejected drafts are
 * rolled back by position (see draft_model.c). */
typedef struct brisk_spec_draft_kv {
    int32_t type_k, type_v;
    int32_t policy, budget, sink, window;
} brisk_spec_draft_kv;

/* The draft model context's parameters as brisk_drafter_model_init makes them
 * (for a memory plan that matches what is allocated): n_ctx tokens, the
 * windowed attention, kv (NULL = F16, no policy). */
brisk_context_params brisk_spec_draft_context_params(int32_t n_ctx, int32_t n_threads, int32_t window, int32_t sink,
                                                     const brisk_spec_draft_kv *kv);

/* Draft model: its own context (n_ctx tokens, n_threads) over the borrowed
 * draft model, which must outlive the drafter. sp: the sampler settings of the
 * run (temperature <= 0 drafts greedily and returns point masses; otherwise the
 * draft samples from its own chain with a seed derived from sp->seed).
 * Refuses a draft whose vocabulary differs from the target's, naming both
 * sizes and the first differing token. window/sink: the draft context's
 * windowed attention (0 = full). kv: its KV cache (NULL = F16, no policy). */
brisk_status brisk_drafter_model_init(brisk_drafter **out, const brisk_model *draft, const brisk_model *target,
                                      int32_t n_ctx, int32_t n_threads, int32_t max_k, const brisk_sampler_params *sp,
                                      int32_t window, int32_t sink, const brisk_spec_draft_kv *kv, brisk_error *err);

/* A draft-model drafter's KV: its context's cache statistics (dropped: the
 * slots its retention policy evicted) and *restarts, the times a rollback
 * reached past the slots whose positions it knows and the draft KV was
 * rebuilt from the history. false (nothing written) for another drafter. */
bool brisk_drafter_model_kv_stats(const brisk_drafter *d, brisk_cache_stats *out, int64_t *restarts);

void brisk_drafter_free(brisk_drafter *d);   /* NULL is a no-op */

/* Same tokenizer? BRISK_OK, or BRISK_ERR_INVALID_ARG with both sizes and the first differing token. */
brisk_status brisk_spec_check_vocab(const brisk_model *target, const brisk_model *draft, brisk_error *err);

/* ---- verifiers ----------------------------------------------------------------------------- */

typedef struct brisk_verify_opts {
    bool greedy;           /* temperature <= 0: compare the target's choice with each draft */
    /* Test hook (the mutation check): on rejection resample from p instead of
     * norm(max(0, p - q)). Known to be wrong; never set outside tests. */
    bool broken_residual;
} brisk_verify_opts;

/* Verify draft d against the target. logits[i] (i = 0..d->n) are the target's
 * logits after the pending token and the first i drafts. smp is the target's
 * sampler whose penalty history ends at the pending token: the verifier
 * accepts each token it outputs into smp, so the distribution p of every
 * position is computed with the history as it would be at that position.
 * scratch: 2 * n_vocab floats. out: the accepted drafts then one token of the
 * target's (a correction, or a bonus when all were accepted); returns how many
 * (1..d->n+1). */
int32_t brisk_spec_verify(brisk_sampler *smp, int32_t n_vocab, const float *const *logits, const brisk_draft *d,
                          const brisk_verify_opts *o, float *scratch, int32_t *out);

/* Tree verification. logits[0] are the target's logits after the pending
 * token, logits[1 + i] after node i (evaluated with the tree mask). From the
 * root, each position's token is chosen and accepted into smp; when it is a
 * child of the current node the walk moves there, otherwise it ends the
 * round. Greedy (o->greedy): the target's choice (brisk_sampler_sample).
 * Sampling: the children must be point masses given the history (n-gram
 * trees; not the draft model's sampled drafts): each is tried in turn with
 * probability p(x) / (mass of p not yet rejected) on the sampler chain's
 * final distribution, rejected ones are removed from p, and without an
 * accepted child the token is drawn from what is left, so the output is
 * distributed as plain sampling (o->broken_residual: rejected children stay
 * in p; the test's mutation). scratch: n_vocab floats. out: the accepted
 * nodes' tokens then the round's last token; path: the accepted node indices
 * (returned - 1 of them). Returns 1..depth+1. */
int32_t brisk_spec_verify_tree(brisk_sampler *smp, int32_t n_vocab, const float *const *logits, const brisk_draft_tree *t,
                               const brisk_verify_opts *o, float *scratch, int32_t *out, int32_t *path);

/* ---- target cost --------------------------------------------------------------------------- */

/* Seconds per target pass of n tokens (n = 1..n_max) on sequence seq of c,
 * measured at the sequence's current length (the sequence is restored
 * afterwards): the minimum of reps runs. cost[n] is filled for n = 1..n_max;
 * cost[0] = 0. Overwrites c's logits. */
brisk_status brisk_spec_measure_cost(brisk_context *c, int32_t seq, int32_t n_max, int32_t reps, double *cost,
                                     brisk_error *err);

/* ---- the speculative generator ---------------------------------------------------------------- */

typedef enum brisk_spec_mode {
    BRISK_SPEC_NONE = 0,    /* plain decoding through the same loop */
    BRISK_SPEC_DRAFT = 1,   /* draft model, k = draft_max every round */
    BRISK_SPEC_NGRAM = 2,   /* n-gram lookup, k = draft_max whenever a match exists */
    BRISK_SPEC_AUTO = 3,    /* adaptive: n-gram and (if given) the draft model, k from the cost model, 0 when it does not pay */
    /* plan/commit only: a draft model's drafts (brisk_spec_drafts), k from the policy as AUTO, with the
     * draft's own acceptance and its measured cost per pass */
    BRISK_SPEC_DRAFT_BATCH = 4,
} brisk_spec_mode;

typedef struct brisk_spec_params {
    brisk_spec_mode mode;
    int32_t draft_max;            /* k (fixed modes) or its upper bound (auto); 0 = default (draft 4, ngram 8, auto 16) */
    const brisk_model *draft;     /* borrowed; required for DRAFT, optional for AUTO */
    int32_t n_threads;            /* the draft context's threads; 0 = all CPUs */
    int32_t ngram_min;            /* shortest suffix match the n-gram drafter uses; 0 = 2 */
    bool calibrate;               /* AUTO: measure the cost curve in prefill (else only c(1); the rest is learnt online) */
    /* Trees: up to this many children per node, 1 = chains. DRAFT/NGRAM
     * verify the drafter's whole tree (at most tree_nodes nodes, depth <= k)
     * every round; AUTO verifies the tree's most probable nodes when the cost
     * model prefers that to the chain. When sampling only n-gram trees are
     * used (multi-candidate rejection sampling); the draft model drafts chains. */
    int32_t tree_width;
    int32_t tree_nodes;           /* 0 = min(BRISK_SPEC_MAX_TREE, width * k) */
    /* Draft-side windowed attention: the draft model attends to its first
     * draft_sink positions and the last draft_window (brisk_context_params
     * attn_window/attn_sink), so its cost per token stays flat at long
     * context. Only acceptance can change: verification keeps the target's
     * full attention. 0 = full attention. Masking only: the draft KV still
     * holds every position (draft_kv.policy is what frees memory). */
    int32_t draft_window, draft_sink;
    /* The draft context's KV cache: types and retention (zero = F16, keep all). */
    brisk_spec_draft_kv draft_kv;
} brisk_spec_params;
brisk_spec_params brisk_spec_default_params(void);

typedef struct brisk_spec_stats {
    int64_t emitted;           /* tokens produced */
    int64_t target_passes;     /* brisk_decode calls on the target during generation */
    int64_t spec_rounds;       /* passes that verified at least one draft */
    int64_t drafted, accepted; /* draft tokens proposed and accepted */
    int64_t rounds_by_drafter[2]; /* spec rounds that used [0] the draft model, [1] n-gram */
    int64_t tree_rounds;       /* spec rounds that verified a branching tree */
    int64_t tree_nodes;        /* draft tokens of those rounds (also counted in drafted) */
    int64_t alt_accepted;      /* tokens accepted off the drafter's first choice (rank > 0) */
    double t_target, t_draft;  /* seconds in target passes and in drafting */
    double t_calibrate;        /* seconds spent measuring the cost curve (in prefill) */
    /* the draft model's KV (zero without one): slots its retention policy dropped, rebuilds after a
     * rollback past the known positions, its pool's peak in blocks and the bytes of one block */
    int64_t draft_dropped, draft_restarts;
    int32_t draft_kv_peak_blocks;
    size_t draft_kv_block_bytes;
    double cost[BRISK_SPEC_MAX_DRAFT + 2]; /* the policy's current target cost per pass of n tokens (s) */
    int32_t cost_n;            /* cost[1..cost_n] meaningful */
    double alpha_draft, alpha_ngram; /* the policy's current acceptance estimates */
    double alt_draft, alt_ngram;     /* P(a runner-up is right | the first choice was wrong) estimates */
    double draft_cost;         /* the policy's current draft cost per token (s) */
} brisk_spec_stats;

typedef struct brisk_spec brisk_spec;

/* target: borrowed context; sequence 0 is used and must be empty. smp:
 * borrowed sampler of the run (its settings must be sp). Both must outlive
 * the generator. A draft with more parameters than the target is accepted,
 * with a warning in brisk_spec_warning. */
brisk_status brisk_spec_init(brisk_spec **out, const brisk_model *target_model, brisk_context *target,
                             brisk_sampler *smp, const brisk_sampler_params *sp, const brisk_spec_params *p,
                             brisk_error *err);
void brisk_spec_free(brisk_spec *s);   /* NULL is a no-op */
/* A warning from init ("" when none); borrowed, valid while s lives. */
const char *brisk_spec_warning(const brisk_spec *s);

/* Prefill the prompt (target, and the draft when there is one) and record it
 * in smp's history. Refuses a prompt that leaves no room in the context. */
brisk_status brisk_spec_prefill(brisk_spec *s, const int32_t *ids, int32_t n_ids, brisk_error *err);

/* One round: writes 1..max_tokens tokens to out and their count to *n_out.
 * Tokens are accepted into smp. The caller stops at an end-of-generation
 * token (tokens after it in out are to be dropped). Fails with
 * BRISK_ERR_CAPACITY when the context is full. */
brisk_status brisk_spec_step(brisk_spec *s, int32_t max_tokens, int32_t *out, int32_t *n_out, brisk_error *err);

void brisk_spec_get_stats(const brisk_spec *s, brisk_spec_stats *out);

/* ---- plan/commit: speculation inside a shared batch --------------------------------------------
 * For a scheduler that decodes many sequences in one batch (brisk_sched): per
 * step each speculating sequence proposes drafts (plan), the scheduler puts
 * its pending token and the drafts into the shared batch with logits for all
 * of them, and after the decode the sequence commits: the verifier keeps the
 * accepted prefix plus one token of the target's, and the scheduler truncates
 * the rejected tail with brisk_seq_truncate. Nothing here decodes.
 *
 * The policy is shared by the sequences of one scheduler: the target's cost
 * per pass as a function of the pass's tokens (learnt online from every pass
 * the scheduler times: passes whose tokens all keep logits give the curve,
 * every pass a linear fit that extends it; see plan.c), and the n-gram acceptance per match length (learnt
 * from verified drafts and, while not drafting, from proposals compared with
 * the tokens plain decoding produced). */

typedef struct brisk_spec_policy brisk_spec_policy;

/* n_max: the largest pass (tokens) the scheduler runs. */
brisk_status brisk_spec_policy_init(brisk_spec_policy **out, int32_t n_max, brisk_error *err);
void brisk_spec_policy_free(brisk_spec_policy *p);   /* NULL is a no-op */
/* A pass of n tokens, rows of them with logits, took seconds (one outlier is
 * clipped to [1/2, 2]x the estimate). */
void brisk_spec_policy_observe(brisk_spec_policy *p, int32_t n, int32_t rows, double seconds);
/* Estimated seconds per pass of n tokens that all keep their logits (1..n_max); 0 while no such pass was measured. */
double brisk_spec_policy_cost(const brisk_spec_policy *p, int32_t n);
/* Whether a pass of exactly n tokens, all with logits, was measured (else brisk_spec_policy_cost interpolates). */
bool brisk_spec_policy_measured(const brisk_spec_policy *p, int32_t n);
/* The current n-gram acceptance estimate for a match of match_len tokens. */
double brisk_spec_policy_acceptance(const brisk_spec_policy *p, int32_t match_len);
/* Learn from a verified draft: accepted of drafted tokens were accepted (a
 * rejection is a trial too), for an n-gram match of match_len tokens, or for
 * the draft model when match_len < 0. Commit calls it; tests and tools may
 * set an estimate with it. */
void brisk_spec_policy_learn(brisk_spec_policy *p, int32_t match_len, int32_t drafted, int32_t accepted);

typedef struct brisk_spec_seq brisk_spec_seq;

/* mode: BRISK_SPEC_NGRAM (draft whenever the n-gram drafter matches, up to
 * draft_max) or BRISK_SPEC_AUTO (the policy decides per step, up to
 * draft_max); draft_max 0 = 8. ngram_min 0 = 2. Ids >= n_valid are never
 * proposed (a padded vocabulary). */
brisk_status brisk_spec_seq_init(brisk_spec_seq **out, brisk_spec_mode mode, int32_t draft_max, int32_t ngram_min,
                                 int32_t n_valid, brisk_error *err);
void brisk_spec_seq_free(brisk_spec_seq *q);   /* NULL is a no-op */
/* Plan, part 1: propose up to min(kcap, draft_max) tokens continuing
 * hist[0..n_hist) (the last one the pending token). Returns how many; the
 * tokens (borrowed until the next propose) are brisk_spec_seq_draft's. */
int32_t brisk_spec_seq_propose(brisk_spec_seq *q, const int32_t *hist, int32_t n_hist, int32_t kcap);
const int32_t *brisk_spec_seq_draft(const brisk_spec_seq *q);
/* Plan, part 2: how many of its proposed drafts each of qs[0..n) puts into a
 * pass that holds base tokens without drafts, of which n_out are sampled
 * (decode tokens and finishing prefills), with room more tokens (and logit
 * rows) free. NGRAM sequences take their whole proposal while room lasts;
 * the AUTO and draft-model sequences' tokens are ranked by their worth (a
 * token at depth d: the acceptance to the d-th power) across sequences, and
 * the pass takes the most valuable ones as far as the pass's expected tokens
 * per second (n_out + their worth) / (cost(base + tokens) + the draft
 * model's passes) is best, or none when that does not beat the rate without
 * drafts by 15% (plan.c's PLAN_GAIN; a probe of 2 now and then while the
 * curve above base is unmeasured). k[i] receives the choice. Returns the drafts in all. */
int32_t brisk_spec_plan(brisk_spec_policy *p, brisk_spec_seq *const *qs, int32_t n, int32_t base, int32_t n_out,
                        int32_t room, int32_t *k);
/* Commit after the decode: rows[0..k] are the target's logits after the
 * pending token and after each of the first k drafts (k from the plan, 0 =
 * none: plain sampling, brisk_sampler_sample + accept). smp is the
 * sequence's sampler, its history ending at the pending token; every token
 * written to out is accepted into it. greedy: the sampler is greedy (exact
 * verification) else lossless rejection sampling. scratch: 2 * n_vocab
 * floats. Writes 1..k+1 tokens to out and returns their count; learns the
 * acceptance into p. */
int32_t brisk_spec_seq_commit(brisk_spec_seq *q, brisk_spec_policy *p, brisk_sampler *smp, int32_t n_vocab,
                              const float *const *rows, int32_t k, bool greedy, float *scratch, int32_t *out);
/* Drafts proposed into passes and accepted so far, by this sequence. */
void brisk_spec_seq_counts(const brisk_spec_seq *q, int64_t *drafted, int64_t *accepted);

/* BRISK_SPEC_DRAFT_BATCH: the plan runs before the drafts exist (they cost a draft pass per token, so only
 * what the plan takes is drafted). propose_later offers up to min(kcap, draft_max) drafts to the plan
 * (returns how many); after the plan, set_draft gives the n tokens the draft model wrote (copied; n may be
 * fewer than planned). */
int32_t brisk_spec_seq_propose_later(brisk_spec_seq *q, int32_t kcap);
void brisk_spec_seq_set_draft(brisk_spec_seq *q, const int32_t *tokens, int32_t n);
/* The draft model's cost: a draft pass took seconds (EMA; one outlier clipped to [1/2, 2]x). */
void brisk_spec_policy_observe_draft(brisk_spec_policy *p, double seconds);
/* The current draft-model acceptance estimate. */
double brisk_spec_policy_draft_acceptance(const brisk_spec_policy *p);

/* ---- a draft model for many sequences (draft_batch.c) ------------------------------------------
 * The scheduler's draft model: sequence i of the draft context (borrowed, at least as many sequences as
 * the target's slots, all empty) shadows slot i. propose drafts for n sequences at once: k[i] tokens
 * (at most BRISK_SPEC_MAX_DRAFT and the context's room) continuing hist[i][0..n_hist[i]) (the last one
 * pending) into out[i][..], got[i] of them; one catch-up pass for all (each sequence's tokens past what its
 * draft KV still agrees on) then one pass per further draft token. Drafts are the draft's argmax among the
 * first n_valid ids. *seconds and *passes: the draft passes it ran (the policy's draft cost; a prompt's sync
 * is not counted). A failed draft
 * pass drafts nothing for its sequences (they resync at their next call); the status is BRISK_OK. reset:
 * slot seq changed owner (released, preempted): its draft sequence is cleared (full blocks stay in the
 * draft's prefix cache). */
typedef struct brisk_spec_drafts brisk_spec_drafts;
brisk_status brisk_spec_drafts_init(brisk_spec_drafts **out, brisk_context *draft, int32_t n_vocab, int32_t n_valid,
                                    brisk_error *err);
void brisk_spec_drafts_free(brisk_spec_drafts *d);   /* clears its sequences; NULL is a no-op */
void brisk_spec_drafts_reset(brisk_spec_drafts *d, int32_t seq);
brisk_status brisk_spec_drafts_propose(brisk_spec_drafts *d, int32_t n, const int32_t *seq, const int32_t *const *hist,
                                       const int32_t *n_hist, const int32_t *k, int32_t *const *out, int32_t *got,
                                       double *seconds, int32_t *passes);

#endif
