/* sched: brisk_sched, continuous batching over one context (include/brisk.h's
 * scheduler section). Shaped after vLLM v1's scheduler (one token budget per
 * step, running requests before waiting ones, recompute-style preemption of
 * the youngest through the prefix cache) and llama.cpp's server slots (the
 * context's sequences are the slots; n > 1 completions fork one prompt).
 *
 * A choice (one completion of a request) keeps its whole token history hist
 * (prompt + generated) and how much of it its sequence holds (kv_len). Its
 * work is always "compute hist[kv_len .. n_hist) and sample after the last":
 * kv_len == n_hist - 1 is a decode (one pending token, plus drafts when it
 * speculates), less is a prefill, chunked under the budget. A new request, a
 * resumed one and a forked one differ only in where kv_len starts, so
 * rebuilding a preempted request is the prefill path, mostly prefix-cache
 * hits (brisk_kv_sync_prefix at admission), and sampling sees the same
 * logits and history as without the preemption.
 *
 * One step: take cancellations, admit waiting requests in order while slots
 * last (first come, first served: a request that does not fit stops
 * admission), then fill forward passes of at most n_ubatch tokens and
 * n_outputs_max logit rows until the step's n_batch tokens are spent: decode
 * tokens of running choices first (oldest request first; each choice at most
 * once per step), their drafts as the speculation plan allows, then prefill
 * chunks. A prefill chunk is cut to the blocks the pool can still give
 * (free + cached) unless the step has nothing else to run, so a waiting
 * prompt does not push running requests out; a prompt that shares whole
 * blocks with a prompt ranked above it that is still computing them waits,
 * then takes them from the prefix cache (prefix_held: a shared prefix
 * arriving with several requests is computed once); while requests decode,
 * a step's prompt tokens may be capped (prefill_budget, max_stall); when a
 * pass is refused anyway (BRISK_ERR_CAPACITY: the decode changed nothing),
 * the youngest running request is preempted and the pass is rebuilt.
 *
 * Threads: the waiting queue, the list of live requests (for cancel by id)
 * and the cancel flags are under mu; everything else belongs to the stepping
 * thread. Callbacks are called without mu held. Requests are allocated in
 * brisk_sched_add (the caller's thread) and freed at the end of the step that
 * finished them; a step allocates nothing (but a context shift's scratch, once per shift: brisk_seq_context_shift).
 *
 * Retention (a kv_policy on the context, or context_shift): positions come from the cache, and a sequence is
 * fed on a fixed schedule so that its cuts and shifts fall at the same points whatever runs beside it (see
 * "retention" above build_pass). */
#include "engine/engine_impl.h"
#include "kv/policy.h"
#include "spec/spec.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* max_stall: after this many decoding passes in a row with prompt tokens, a step decodes alone (observe_prefill) */
#define STALL_PROBE_EVERY 8

#define SCHED_DEFAULT_QUEUE 1024
#define SCHED_DEFAULT_DRAFT 8
/* choice i > 0 of a request samples with seed + i * this (the 64-bit golden ratio: seeds far apart) */
#define SCHED_SEED_STEP 0x9E3779B97F4A7C15ull

typedef struct sched_choice {
    int32_t index;          /* in [0, n) */
    int32_t seq;            /* its slot (context sequence), -1 while it holds none */
    int32_t *hist;          /* [n_prompt + max_tokens] prompt + generated tokens */
    int32_t n_hist;
    int32_t kv_len;         /* tokens of hist its sequence holds (valid while seq >= 0) */
    int32_t n_gen;          /* tokens generated */
    brisk_sampler *smp;
    brisk_spec_seq *spec;   /* NULL: speculation off */
    brisk_finish finish;    /* BRISK_FINISH_NONE while live */
    int64_t stamp;          /* the step in which it last sampled (one token per step) */
    bool held;              /* its prefill waited for a shared prefix another choice is computing (prefix_held) */
    int64_t held_step;      /* the last step in which it waited so (counted once a step) */
    bool cancel, cancel_taken;   /* under mu: brisk_sched_cancel_choice */
    bool cancel_now;        /* the stepping thread's: taken this step */
} sched_choice;

typedef struct sched_req {
    int64_t id;             /* also its age: a larger id is younger */
    brisk_sched_request rq; /* the caller's request (prompt pointer not kept) */
    int32_t n_prompt;
    sched_choice *ch;       /* [rq.n] */
    int32_t n_live;         /* choices not finished */
    bool forked;            /* choices 1.. hold forks of choice 0's prompt */
    bool greedy;
    bool admitted;          /* it has been admitted once (later admissions rebuild it) */
    int32_t plp_done;       /* prompt_logits: positions [0, plp_done) reported */
    uint8_t *roles;         /* [n_prompt] each prompt token's brisk_kv_role (pinning only; NULL: none kept) */
    uint8_t gen_role;       /* the generated tokens' role */
    brisk_sched_request_info acct;   /* the stepping thread's (t_added: brisk_sched_add's) */
    /* under mu */
    bool cancel, cancel_taken, queued;
    bool cancel_listed;     /* on this step's list of choice cancellations */
    struct sched_req *qprev, *qnext;   /* the waiting queue */
    struct sched_req *lprev, *lnext;   /* the live list */
    /* stepping thread */
    struct sched_req *cnext;           /* cancellations taken this step; the finished list */
} sched_req;

/* One choice's tokens in a pass. */
typedef struct sched_entry {
    sched_req *r;
    sched_choice *ch;
    int32_t n;              /* tokens of hist in the pass */
    int32_t k;              /* drafts after them */
    int32_t row;            /* logit row of the last hist token, -1: a prefill chunk that does not finish */
    int32_t row0;           /* prompt_logits: the logit row of the chunk's first token, -1: none */
    int32_t len0;           /* its sequence's slots before the pass */
    bool decode;            /* a decode entry (else a prefill chunk) */
    bool proposed;          /* its spec state proposed in this pass */
} sched_entry;

struct brisk_sched {
    brisk_context *c;
    brisk_kv *kv;
    const brisk_model *model;
    int32_t n_vocab, n_vocab_tokens, n_ctx, n_seq;
    int32_t n_batch, n_ubatch, n_outputs, max_running, max_queue;
    double max_stall;       /* see brisk_sched_params */
    int32_t prefill_budget; /* see brisk_sched_params; 0 = none */
    double prefill_tok_s;   /* measured seconds per prompt token in a pure prefill pass (EMA), 0 until measured */
    double pf_allow;        /* prompt tokens a decoding step may add (max_stall's controller), 0 until set */
    int32_t stall_streak;   /* decoding passes in a row that carried prompt tokens (max_stall's probe) */
    int32_t probe_n;        /* tokens of the last decode-only pass (0: none yet) ... */
    double probe_dt;        /* ... and its seconds: max_stall's decode-only cost at that size */
    int32_t step_pf_left;   /* prompt tokens this step may still add while requests decode; -1 = no limit */
    bool step_pf_fixed;     /* prefill_budget has been applied to this step's allowance */
    bool step_pf_deadline;  /* the KV deadline (kv_deadline_allowance) has been applied to it */
    bool step_probe;        /* this step decodes alone to measure the decode-only cost (max_stall) */
    brisk_sched_pass_clock pass_clock;   /* tests: a pass's cost from its shape instead of the wall clock */
    /* retention (the context's kv_policy) and the context shift: see "Retention" above build_pass */
    bool retention;         /* a policy runs or the context shift is on: positions come from the cache */
    bool shift;             /* brisk_sched_params.context_shift */
    bool pin;               /* the context pins roles: each pass sets its sequences' roles */
    int32_t shift_keep;     /* first slots a shift keeps */
    int32_t pos_limit;      /* positions stay below this without a shift: n_ctx, with a policy the trained context */
    int32_t sync_cap;       /* prefix-cache tokens a sequence may take (a scored policy's statistics need its own queries) */
    void *pass_clock_user;

    pthread_mutex_t mu;
    sched_req *q_head, *q_tail;
    int32_t n_queued;
    sched_req *live;
    int32_t n_live;
    int64_t next_id;
    int32_t n_cancel;       /* cancel flags (of requests and of choices) set and not yet taken */

    /* the stepping thread's */
    sched_req **running;    /* [n_seq] by id, oldest first */
    int32_t n_running, n_slots_used;
    int32_t *free_slots;    /* [n_seq] stack */
    int32_t n_free_slots;
    int64_t step_no;
    sched_req *finished;    /* freed at the end of the step */
    int32_t *tok, *pos, *seq;   /* [n_ubatch] the pass */
    uint8_t *want;
    sched_entry *ent;       /* [n_ubatch] */
    int32_t n_ent;
    brisk_spec_policy *policy;
    brisk_spec_drafts *drafts;  /* the draft model (brisk_sched_params.draft), NULL: none */
    /* [n_seq] a pass's draft-model requests: entry, slot, history, tokens wanted and written */
    int32_t *dm_ent, *dm_seq, *dm_n, *dm_k, *dm_got;
    const int32_t **dm_hist;
    int32_t **dm_out;           /* [n_seq] rows of dm_buf */
    int32_t *dm_buf;            /* [n_seq][BRISK_SPEC_MAX_DRAFT] */
    brisk_spec_seq **plan_q;    /* [n_seq] */
    int32_t *plan_k, *plan_e;   /* [n_seq] drafts chosen; entry index */
    float *scratch;         /* [2 * n_vocab] verification */
    float *masked;          /* [n_vocab] a logits row with end-of-generation banned (min_tokens) */
    int32_t *eog;           /* [n_eog] end-of-generation ids */
    int32_t n_eog;
    const float *rows[BRISK_SPEC_MAX_DRAFT + 1];
    int32_t out[BRISK_SPEC_MAX_DRAFT + 1];
    int64_t n_preemptions, n_drafted, n_accepted, n_shifts;
    int32_t preempt_free, preempt_need;
    brisk_sched_info *info; /* the step's (never NULL during a step) */
    /* cost model (brisk_sched_request_info): per token and per position */
    double flops_token, flops_logits, flops_attn_pos, weight_bytes, kv_bytes_pos;
};

const char *brisk_finish_str(brisk_finish f) {
    switch (f) {
    case BRISK_FINISH_NONE: return "none";
    case BRISK_FINISH_EOG: return "eog";
    case BRISK_FINISH_LENGTH: return "length";
    case BRISK_FINISH_CANCELLED: return "cancelled";
    case BRISK_FINISH_CONTEXT_FULL: return "context full";
    case BRISK_FINISH_ERROR: return "error";
    }
    return "unknown";
}

brisk_sched_request brisk_sched_default_request(void) {
    brisk_sched_request r = {0};
    r.sampling = brisk_sampler_default_params();
    r.sampling.temp = 0.0f;
    r.max_tokens = 16;
    r.n = 1;
    r.spec = BRISK_SCHED_SPEC_OFF;
    return r;
}

brisk_sched_params brisk_sched_default_params(void) {
    return (brisk_sched_params){.n_batch = 0, .n_ubatch = 0, .max_running = 0, .max_queue = 0, .max_stall = 0.0, .prefill_budget = 0,
                                .draft = NULL, .context_shift = false, .shift_keep = 4};
}

/* ---- lifecycle --------------------------------------------------------------------------------- */

brisk_status brisk_sched_init(brisk_sched **out, brisk_context *c, const brisk_sched_params *p, brisk_error *err) {
    *out = NULL;
    if (!c || !p) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: a context and parameters are required");
    const int32_t n_seq = brisk_context_n_seq(c), ctx_batch = brisk_context_n_batch(c);
    if (p->n_batch < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: step budget %d must not be negative", p->n_batch);
    if (p->n_ubatch < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: pass size %d must not be negative", p->n_ubatch);
    if (p->max_running < 0 || p->max_running > n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: max_running %d out of range [1, %d] (the context's sequences)",
                          p->max_running, n_seq);
    if (p->max_queue < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: max_queue %d must not be negative", p->max_queue);
    if (!(p->max_stall >= 0.0 && p->max_stall <= 1e6))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: max_stall %g out of range [0, 1e6]", p->max_stall);
    if (p->prefill_budget < 0)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: prefill_budget %d must not be negative (0 = no limit)",
                          p->prefill_budget);
    if (p->shift_keep < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: shift_keep %d must not be negative", p->shift_keep);
    const int32_t n_batch = p->n_batch > 0 ? p->n_batch : ctx_batch;
    const int32_t n_ubatch = p->n_ubatch > 0 ? p->n_ubatch : BRISK_MIN(n_batch, ctx_batch);
    if (n_ubatch > ctx_batch)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: pass size %d exceeds the context's batch of %d tokens", n_ubatch,
                          ctx_batch);
    for (int32_t i = 0; i < n_seq; i++)
        if (brisk_seq_len(c, i) != 0)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: sequence %d of the context is not empty (%d tokens)", i,
                              brisk_seq_len(c, i));
    if (p->draft) {
        brisk_context *d = p->draft;
        if (d == c) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: the draft context is the target's");
        if (brisk_context_n_seq(d) < n_seq)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: the draft context has %d sequences, fewer than the target's %d",
                              brisk_context_n_seq(d), n_seq);
        if (brisk_context_n_ctx(d) < brisk_context_n_ctx(c))
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: the draft context holds %d tokens per sequence, fewer than the target's %d",
                              brisk_context_n_ctx(d), brisk_context_n_ctx(c));
        for (int32_t i = 0; i < brisk_context_n_seq(d); i++)
            if (brisk_seq_len(d, i) != 0)
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "scheduler: sequence %d of the draft context is not empty (%d tokens)", i,
                                  brisk_seq_len(d, i));
        brisk_status vst = brisk_spec_check_vocab(c->model, d->model, err);
        if (vst) {
            brisk_error_prefix(err, "scheduler");
            return vst;
        }
    }
    brisk_sched *s = calloc(1, sizeof *s);
    if (!s) return brisk_fail(err, BRISK_ERR_NOMEM, "scheduler: out of memory");
    brisk_status st = BRISK_OK;
    s->c = c;
    s->kv = c->kv;
    s->model = c->model;
    brisk_model_info mi;
    brisk_model_get_info(c->model, &mi);
    s->n_vocab = mi.n_vocab;
    s->n_vocab_tokens = mi.n_vocab_tokens;
    /* every weight is one multiply-add per token (2 FLOPs), the output matrix
     * only for rows whose logits are computed; attention reads every earlier
     * position's K and V (QK and AV: 4 FLOPs per element); the weights are
     * read once per pass, a sequence's K and V (F16) once per pass too */
    const double out_params = (double)mi.n_vocab * mi.n_embd;
    s->flops_logits = 2.0 * out_params;
    s->flops_token = 2.0 * ((double)mi.n_params > out_params ? (double)mi.n_params - out_params : (double)mi.n_params);
    s->flops_attn_pos = 4.0 * mi.n_layer * mi.n_head * (double)mi.head_dim;
    s->weight_bytes = (double)mi.weight_bytes;
    s->kv_bytes_pos = 2.0 * mi.n_layer * mi.n_head_kv * (double)mi.head_dim * 2.0;
    s->n_ctx = brisk_context_n_ctx(c);
    s->n_seq = n_seq;
    s->n_batch = n_batch;
    s->n_ubatch = n_ubatch;
    s->n_outputs = brisk_context_n_outputs_max(c);
    s->max_running = p->max_running > 0 ? p->max_running : n_seq;
    s->max_queue = p->max_queue > 0 ? p->max_queue : SCHED_DEFAULT_QUEUE;
    s->max_stall = p->max_stall;
    s->prefill_budget = p->prefill_budget;
    s->next_id = 1;
    const brisk_kv_policy *pol = s->kv->policy;
    s->shift = p->context_shift;
    s->retention = pol != NULL || p->context_shift;
    s->pin = s->kv->pin_mask != 0;
    s->shift_keep = p->shift_keep;
    s->pos_limit = pol && mi.n_ctx_train > 0 ? mi.n_ctx_train : s->n_ctx;
    s->sync_cap = INT32_MAX;
    if (pol) {
        /* a scored policy's choice at a cut reads the attention of the sequence's own queries (h2o: every one
         * since the slot was written; snapkv, tova: the last rows positions'); blocks from the prefix cache come
         * without it, so a sequence takes only as many as leave those queries to be computed by itself */
        const brisk_kv_observe ob = pol->ops->observe;
        s->sync_cap = ob == BRISK_KV_OBSERVE_NONE  ? pol->cfg.budget
                      : ob == BRISK_KV_OBSERVE_ALL ? 0
                                                   : BRISK_MAX(0, pol->cfg.budget - pol->rows);
    }
    if (pthread_mutex_init(&s->mu, NULL)) {
        free(s);
        return brisk_fail(err, BRISK_ERR_NOMEM, "scheduler: cannot create its mutex");
    }
    const size_t ns = (size_t)n_seq, nu = (size_t)n_ubatch;
    s->running = calloc(ns, sizeof *s->running);
    s->free_slots = malloc(ns * sizeof *s->free_slots);
    s->tok = malloc(nu * sizeof *s->tok);
    s->pos = malloc(nu * sizeof *s->pos);
    s->seq = malloc(nu * sizeof *s->seq);
    s->want = malloc(nu);
    s->ent = malloc(nu * sizeof *s->ent);
    s->plan_q = malloc(ns * sizeof *s->plan_q);
    s->plan_k = malloc(ns * sizeof *s->plan_k);
    s->plan_e = malloc(ns * sizeof *s->plan_e);
    s->scratch = malloc(2 * (size_t)s->n_vocab * sizeof *s->scratch);
    s->masked = malloc((size_t)s->n_vocab * sizeof *s->masked);
    s->eog = malloc(64 * sizeof *s->eog);
    for (int32_t t = 0; s->eog && t < s->n_vocab && s->n_eog < 64; t++)
        if (brisk_token_is_eog(s->model, t)) s->eog[s->n_eog++] = t;
    if (!s->running || !s->free_slots || !s->tok || !s->pos || !s->seq || !s->want || !s->ent || !s->plan_q || !s->plan_k ||
        !s->plan_e || !s->scratch || !s->masked || !s->eog) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "scheduler: out of memory for passes of %d tokens over %d sequences", n_ubatch, n_seq);
        goto fail;
    }
    if ((st = brisk_spec_policy_init(&s->policy, n_ubatch, err))) goto fail;
    if (p->draft) {
        s->dm_ent = malloc(ns * sizeof *s->dm_ent);
        s->dm_seq = malloc(ns * sizeof *s->dm_seq);
        s->dm_n = malloc(ns * sizeof *s->dm_n);
        s->dm_k = malloc(ns * sizeof *s->dm_k);
        s->dm_got = malloc(ns * sizeof *s->dm_got);
        s->dm_hist = malloc(ns * sizeof *s->dm_hist);
        s->dm_out = malloc(ns * sizeof *s->dm_out);
        s->dm_buf = malloc(ns * BRISK_SPEC_MAX_DRAFT * sizeof *s->dm_buf);
        if (!s->dm_ent || !s->dm_seq || !s->dm_n || !s->dm_k || !s->dm_got || !s->dm_hist || !s->dm_out || !s->dm_buf) {
            st = brisk_fail(err, BRISK_ERR_NOMEM, "scheduler: out of memory for the draft model's passes");
            goto fail;
        }
        for (int32_t i = 0; i < n_seq; i++) s->dm_out[i] = s->dm_buf + (size_t)i * BRISK_SPEC_MAX_DRAFT;
        if ((st = brisk_spec_drafts_init(&s->drafts, p->draft, s->n_vocab, s->n_vocab_tokens, err))) goto fail;
    }
    /* slot 0 on top: a single request uses sequence 0, as the other clients do */
    for (int32_t i = 0; i < n_seq; i++) s->free_slots[i] = n_seq - 1 - i;
    s->n_free_slots = n_seq;
    *out = s;
    return BRISK_OK;
fail:
    brisk_sched_free(s);
    return st;
}

static void req_free(sched_req *r) {
    if (!r) return;
    if (r->ch)
        for (int32_t i = 0; i < r->rq.n; i++) {
            free(r->ch[i].hist);
            brisk_sampler_free(r->ch[i].smp);
            brisk_spec_seq_free(r->ch[i].spec);
        }
    free(r->ch);
    free(r->roles);
    free(r);
}

/* under mu */
static void queue_remove(brisk_sched *s, sched_req *r) {
    if (r->qprev) r->qprev->qnext = r->qnext;
    else s->q_head = r->qnext;
    if (r->qnext) r->qnext->qprev = r->qprev;
    else s->q_tail = r->qprev;
    r->qprev = r->qnext = NULL;
    r->queued = false;
    s->n_queued--;
}

static void queue_push(brisk_sched *s, sched_req *r, bool front) {
    r->queued = true;
    if (front) {
        r->qprev = NULL;
        r->qnext = s->q_head;
        if (s->q_head) s->q_head->qprev = r;
        else s->q_tail = r;
        s->q_head = r;
    } else {
        r->qnext = NULL;
        r->qprev = s->q_tail;
        if (s->q_tail) s->q_tail->qnext = r;
        else s->q_head = r;
        s->q_tail = r;
    }
    s->n_queued++;
}

static void live_remove(brisk_sched *s, sched_req *r) {
    if (r->lprev) r->lprev->lnext = r->lnext;
    else s->live = r->lnext;
    if (r->lnext) r->lnext->lprev = r->lprev;
    r->lprev = r->lnext = NULL;
    s->n_live--;
}

/* ---- the stepping thread's bookkeeping ---------------------------------------------------------- */

static void release_slot(brisk_sched *s, sched_choice *ch) {
    if (ch->seq < 0) return;
    brisk_seq_truncate(s->c, ch->seq, 0, NULL);   /* its full blocks stay in the prefix cache */
    brisk_spec_drafts_reset(s->drafts, ch->seq);
    s->free_slots[s->n_free_slots++] = ch->seq;
    s->n_slots_used--;
    ch->seq = -1;
    ch->kv_len = 0;
}

static void running_remove(brisk_sched *s, sched_req *r) {
    for (int32_t i = 0; i < s->n_running; i++)
        if (s->running[i] == r) {
            memmove(s->running + i, s->running + i + 1, (size_t)(s->n_running - i - 1) * sizeof *s->running);
            s->n_running--;
            return;
        }
}

/* The choice is done: its last callback, its slot back; the request leaves when none is left. */
static void finish_choice(brisk_sched *s, sched_req *r, sched_choice *ch, brisk_finish why) {
    if (ch->finish != BRISK_FINISH_NONE) return;
    ch->finish = why;
    release_slot(s, ch);
    r->rq.on_token(r->rq.user, r->id, ch->index, -1, why);
    if (--r->n_live > 0) return;
    running_remove(s, r);
    pthread_mutex_lock(&s->mu);
    if (r->queued) queue_remove(s, r);
    live_remove(s, r);
    pthread_mutex_unlock(&s->mu);
    r->cnext = s->finished;
    s->finished = r;
}

static void finish_request(brisk_sched *s, sched_req *r, brisk_finish why) {
    /* the slots of choices waiting for their fork go too */
    for (int32_t i = 0; i < r->rq.n; i++)
        if (r->ch[i].finish == BRISK_FINISH_NONE) finish_choice(s, r, &r->ch[i], why);
}

void brisk_sched_free(brisk_sched *s) {
    if (!s) return;
    if (s->running) {
        brisk_sched_info info;
        s->info = &info;
        while (s->n_running > 0) finish_request(s, s->running[0], BRISK_FINISH_CANCELLED);
        for (;;) {
            pthread_mutex_lock(&s->mu);
            sched_req *r = s->q_head;
            pthread_mutex_unlock(&s->mu);
            if (!r) break;
            finish_request(s, r, BRISK_FINISH_CANCELLED);
        }
        while (s->finished) {
            sched_req *r = s->finished;
            s->finished = r->cnext;
            req_free(r);
        }
    }
    pthread_mutex_destroy(&s->mu);
    brisk_spec_policy_free(s->policy);
    brisk_spec_drafts_free(s->drafts);
    free(s->dm_ent);
    free(s->dm_seq);
    free(s->dm_n);
    free(s->dm_k);
    free(s->dm_got);
    free(s->dm_hist);
    free(s->dm_out);
    free(s->dm_buf);
    free(s->running);
    free(s->free_slots);
    free(s->tok);
    free(s->pos);
    free(s->seq);
    free(s->want);
    free(s->ent);
    free(s->plan_q);
    free(s->plan_k);
    free(s->plan_e);
    free(s->scratch);
    free(s->masked);
    free(s->eog);
    free(s);
}

/* ---- requests ------------------------------------------------------------------------------------- */

brisk_status brisk_sched_add(brisk_sched *s, const brisk_sched_request *r, int64_t *id, brisk_error *err) {
    if (id) *id = 0;
    if (!r) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: missing");
    if (!r->on_token) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: a token callback (on_token) is required");
    if (r->n_prompt < 1 || !r->prompt)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: the prompt is empty (%d tokens); at least one is needed", r->n_prompt);
    if (r->max_tokens < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: max_tokens %d must be at least 1", r->max_tokens);
    if (r->min_tokens < 0 || r->min_tokens > r->max_tokens)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: min_tokens %d out of range [0, max_tokens %d]", r->min_tokens,
                          r->max_tokens);
    if (!s->retention && (int64_t)r->n_prompt + r->max_tokens > s->n_ctx)
        return brisk_fail(err, BRISK_ERR_CAPACITY,
                          "request: prompt of %d tokens + max_tokens %d exceed the context of %d tokens per sequence", r->n_prompt,
                          r->max_tokens, s->n_ctx);
    /* a policy keeps the slots within its budget; positions still end at the trained context unless a shift renumbers them */
    if (s->retention && !s->shift && (int64_t)r->n_prompt + r->max_tokens > s->pos_limit)
        return brisk_fail(err, BRISK_ERR_CAPACITY,
                          "request: prompt of %d tokens + max_tokens %d exceed the %d positions a sequence may reach without a context shift",
                          r->n_prompt, r->max_tokens, s->pos_limit);
    if ((int64_t)r->n_prompt + r->max_tokens > INT32_MAX)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "request: prompt of %d tokens + max_tokens %d exceed %d tokens", r->n_prompt,
                          r->max_tokens, INT32_MAX);
    if (s->kv->hyb && r->spec != BRISK_SCHED_SPEC_OFF)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "request: speculative decoding is not available with a hyb4/hyb2 cache: a rejected draft's queries would "
                          "already have ranked its hot rows");
    if (s->retention && r->spec != BRISK_SCHED_SPEC_OFF)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "request: speculative decoding is not available with KV retention (a policy or a context shift): drafts are "
                          "rolled back by slot count, and evicted or shifted slots are not");
    if (r->gen_role < 0 || r->gen_role >= BRISK_KV_N_ROLES)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: gen_role %d out of range [0, %d) (brisk_kv_role)", r->gen_role,
                          BRISK_KV_N_ROLES);
    for (int32_t i = 0; r->roles && i < r->n_prompt; i++)
        if (r->roles[i] >= BRISK_KV_N_ROLES)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: prompt token %d: role %d out of range [0, %d) (brisk_kv_role)", i,
                              r->roles[i], BRISK_KV_N_ROLES);
    if (r->n < 1 || r->n > s->max_running)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: n = %d completions out of range [1, %d] (max_running)", r->n,
                          s->max_running);
    for (int32_t i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= s->n_vocab)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: prompt token %d: id %d out of range [0, %d)", i, r->prompt[i],
                              s->n_vocab);
    if (r->prompt_logits && !r->on_prompt_logits)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: prompt_logits needs its callback (on_prompt_logits)");
    if (r->spec < BRISK_SCHED_SPEC_OFF || r->spec > BRISK_SCHED_SPEC_DRAFT)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: speculation mode %d unknown (off, ngram, auto or draft)", (int)r->spec);
    if (r->spec == BRISK_SCHED_SPEC_DRAFT && !s->drafts)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "request: speculation mode draft needs a draft model, and this scheduler has none (serve: -md FILE)");
    if (r->spec_draft_max < 0 || r->spec_draft_max > BRISK_SPEC_MAX_DRAFT)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "request: draft length %d out of range [1, %d]", r->spec_draft_max,
                          BRISK_SPEC_MAX_DRAFT);
    pthread_mutex_lock(&s->mu);
    const int32_t queued = s->n_queued;
    pthread_mutex_unlock(&s->mu);
    if (queued >= s->max_queue)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "request: the queue is full (%d requests waiting, max_queue %d); retry later",
                          queued, s->max_queue);

    brisk_status st = BRISK_OK;
    sched_req *q = calloc(1, sizeof *q);
    if (!q) return brisk_fail(err, BRISK_ERR_NOMEM, "request: out of memory");
    q->rq = *r;
    q->rq.prompt = NULL;
    q->rq.masks = NULL;
    q->rq.roles = NULL;
    q->gen_role = (uint8_t)(r->gen_role > 0 ? r->gen_role : BRISK_ROLE_GENERATED);
    q->n_prompt = r->n_prompt;
    q->n_live = r->n;
    q->acct.n_prompt = r->n_prompt;
    q->acct.t_added = brisk_time_now();
    q->greedy = r->sampling.temp <= 0.0f;
    q->ch = calloc((size_t)r->n, sizeof *q->ch);
    if (!q->ch) {
        q->rq.n = 0;
        st = brisk_fail(err, BRISK_ERR_NOMEM, "request: out of memory for %d completions", r->n);
        goto fail;
    }
    if (s->pin) {
        /* the roles matter only when some are pinned */
        if (!(q->roles = malloc((size_t)r->n_prompt))) {
            st = brisk_fail(err, BRISK_ERR_NOMEM, "request: out of memory for the roles of %d prompt tokens", r->n_prompt);
            goto fail;
        }
        if (r->roles) memcpy(q->roles, r->roles, (size_t)r->n_prompt);
        else memset(q->roles, BRISK_ROLE_PROMPT, (size_t)r->n_prompt);
    }
    const size_t cap = (size_t)r->n_prompt + (size_t)r->max_tokens;
    brisk_sampler_params sp = r->sampling;
    for (int32_t i = 0; i < r->n; i++) {
        sched_choice *ch = &q->ch[i];
        ch->index = i;
        ch->seq = -1;
        ch->stamp = -1;
        if (!(ch->hist = malloc(cap * sizeof *ch->hist))) {
            st = brisk_fail(err, BRISK_ERR_NOMEM, "request: out of memory for a history of %zu tokens", cap);
            goto fail;
        }
        memcpy(ch->hist, r->prompt, (size_t)r->n_prompt * sizeof *ch->hist);
        ch->n_hist = r->n_prompt;
        if (i > 0) {
            /* choice i's seed: choice 0's plus i steps, never the "random" marker */
            sp.seed = brisk_sampler_seed(q->ch[0].smp) + (uint64_t)i * SCHED_SEED_STEP;
            if (sp.seed == BRISK_SEED_RANDOM) sp.seed = 0;
        }
        if ((st = brisk_sampler_init(&ch->smp, &sp, s->n_vocab, err))) {
            brisk_error_prefix(err, "request: sampler");
            goto fail;
        }
        for (int32_t t = 0; t < r->n_prompt; t++) brisk_sampler_accept(ch->smp, r->prompt[t]);
        if (r->masks) brisk_sampler_set_mask(ch->smp, &r->masks[i]);
        const brisk_spec_mode mode = r->spec == BRISK_SCHED_SPEC_NGRAM   ? BRISK_SPEC_NGRAM
                                     : r->spec == BRISK_SCHED_SPEC_DRAFT ? BRISK_SPEC_DRAFT_BATCH
                                                                         : BRISK_SPEC_AUTO;
        if (r->spec != BRISK_SCHED_SPEC_OFF &&
            (st = brisk_spec_seq_init(&ch->spec, mode, r->spec_draft_max > 0 ? r->spec_draft_max : SCHED_DEFAULT_DRAFT, 0,
                                      s->n_vocab_tokens, err)))
            goto fail;
    }
    pthread_mutex_lock(&s->mu);
    if (s->n_queued >= s->max_queue) {
        const int32_t nq = s->n_queued;
        pthread_mutex_unlock(&s->mu);
        st = brisk_fail(err, BRISK_ERR_CAPACITY, "request: the queue is full (%d requests waiting, max_queue %d); retry later", nq,
                        s->max_queue);
        goto fail;
    }
    q->id = s->next_id++;
    q->lnext = s->live;
    if (s->live) s->live->lprev = q;
    s->live = q;
    s->n_live++;
    queue_push(s, q, false);
    pthread_mutex_unlock(&s->mu);
    if (id) *id = q->id;
    return BRISK_OK;
fail:
    req_free(q);
    return st;
}

bool brisk_sched_cancel(brisk_sched *s, int64_t id) {
    bool found = false;
    pthread_mutex_lock(&s->mu);
    for (sched_req *r = s->live; r; r = r->lnext)
        if (r->id == id) {
            found = true;
            if (!r->cancel) {
                r->cancel = true;
                s->n_cancel++;
            }
            break;
        }
    pthread_mutex_unlock(&s->mu);
    return found;
}

bool brisk_sched_cancel_choice(brisk_sched *s, int64_t id, int32_t choice) {
    bool found = false;
    pthread_mutex_lock(&s->mu);
    for (sched_req *r = s->live; r; r = r->lnext)
        if (r->id == id) {
            if (choice < 0 || choice >= r->rq.n) break;
            found = true;
            if (!r->ch[choice].cancel) {
                r->ch[choice].cancel = true;
                s->n_cancel++;
            }
            break;
        }
    pthread_mutex_unlock(&s->mu);
    return found;
}

bool brisk_sched_request_info_get(brisk_sched *s, int64_t id, brisk_sched_request_info *out) {
    bool found = false;
    pthread_mutex_lock(&s->mu);
    for (sched_req *r = s->live; r; r = r->lnext)
        if (r->id == id) {
            found = true;
            *out = r->acct;
            const int32_t fresh = r->acct.n_prompt - r->acct.n_prompt_cached;
            out->n_prompt_computed = r->acct.n_prefilled < fresh ? r->acct.n_prefilled : fresh;
            out->n_recomputed = r->acct.n_prefilled - out->n_prompt_computed;
            break;
        }
    pthread_mutex_unlock(&s->mu);
    return found;
}

int32_t brisk_sched_borrow_slot(brisk_sched *s) {
    if (s->n_free_slots == 0 || s->n_slots_used >= s->max_running) return -1;
    s->n_slots_used++;
    return s->free_slots[--s->n_free_slots];
}

void brisk_sched_return_slot(brisk_sched *s, int32_t seq) {
    if (seq < 0 || seq >= s->n_seq) return;
    brisk_seq_truncate(s->c, seq, 0, NULL);   /* its full blocks stay in the prefix cache */
    brisk_spec_drafts_reset(s->drafts, seq);
    s->free_slots[s->n_free_slots++] = seq;
    s->n_slots_used--;
}

int32_t brisk_sched_pending(brisk_sched *s) {
    pthread_mutex_lock(&s->mu);
    const int32_t n = s->n_live;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---- admission and preemption ------------------------------------------------------------------ */

/* Slots a request needs to run: every choice before the fork, then the live ones. */
static int32_t slots_needed(const sched_req *r) { return r->forked ? r->n_live : r->rq.n; }

static void admit(brisk_sched *s, sched_req *r) {
    int32_t at = s->n_running;
    while (at > 0 && s->running[at - 1]->id > r->id) at--;   /* oldest first (a resumed request is older) */
    memmove(s->running + at + 1, s->running + at, (size_t)(s->n_running - at) * sizeof *s->running);
    s->running[at] = r;
    s->n_running++;
    for (int32_t i = 0; i < r->rq.n; i++) {
        sched_choice *ch = &r->ch[i];
        if (ch->finish != BRISK_FINISH_NONE) continue;
        ch->seq = s->free_slots[--s->n_free_slots];
        s->n_slots_used++;
        ch->kv_len = 0;
        ch->held = true;   /* prefix_held looks at the cache again at its turn: blocks may be written meanwhile */
        if (i == 0 || r->forked) {
            /* whole blocks of its history from the prefix cache; the last token is always computed */
            ch->kv_len = brisk_kv_sync_prefix(s->kv, ch->seq, ch->hist, BRISK_MIN(ch->n_hist - 1, s->sync_cap));
            s->c->tree_ok[ch->seq] = 0;
            if (r->rq.prompt_logits && i == 0 && ch->kv_len > r->plp_done) {
                /* the positions not reported yet are computed, for their logits */
                brisk_seq_truncate(s->c, ch->seq, r->plp_done, NULL);
                ch->kv_len = r->plp_done;
            }
            if (i == 0 && !r->admitted) r->acct.n_prompt_cached = ch->kv_len;
        }
    }
    if (!r->admitted) r->acct.t_admitted = brisk_time_now();
    r->admitted = true;
}

static void take_cancels_and_admit(brisk_sched *s) {
    sched_req *cancels = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->n_cancel > 0) {
        s->n_cancel = 0;
        for (sched_req *r = s->live; r; r = r->lnext) {
            if (r->cancel && !r->cancel_taken) {
                r->cancel_taken = true;
                r->cnext = cancels;
                cancels = r;
                continue;
            }
            if (r->cancel) continue;
            for (int32_t i = 0; i < r->rq.n; i++) {
                sched_choice *ch = &r->ch[i];
                if (!ch->cancel || ch->cancel_taken) continue;
                /* before the fork the other choices still need choice 0's
                 * prompt: a choice's cancel waits for the fork */
                if (!r->forked && r->rq.n > 1) {
                    s->n_cancel++;
                    continue;
                }
                ch->cancel_taken = true;
                ch->cancel_now = true;
                if (!r->cancel_listed) {
                    r->cancel_listed = true;
                    r->cnext = cancels;
                    cancels = r;
                }
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    while (cancels) {
        sched_req *r = cancels;
        cancels = r->cnext;
        if (r->cancel_taken) {
            finish_request(s, r, BRISK_FINISH_CANCELLED);
            continue;
        }
        /* choices cancelled one by one; the request leaves with its last (finish_choice reuses cnext) */
        r->cancel_listed = false;
        for (int32_t i = 0; i < r->rq.n; i++)
            if (r->ch[i].cancel_now) {
                r->ch[i].cancel_now = false;
                finish_choice(s, r, &r->ch[i], BRISK_FINISH_CANCELLED);
            }
    }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        sched_req *r = s->q_head;
        if (r && slots_needed(r) <= s->n_free_slots && s->n_slots_used + slots_needed(r) <= s->max_running) queue_remove(s, r);
        else r = NULL;
        pthread_mutex_unlock(&s->mu);
        if (!r) break;
        admit(s, r);
    }
}

/* The pass was refused for room: the youngest running request makes room, or
 * fails when it runs alone. */
static void preempt_youngest(brisk_sched *s) {
    sched_req *r = s->running[s->n_running - 1];
    if (s->n_running == 1) {
        finish_request(s, r, BRISK_FINISH_CONTEXT_FULL);
        return;
    }
    for (int32_t i = 0; i < r->rq.n; i++) release_slot(s, &r->ch[i]);
    running_remove(s, r);
    pthread_mutex_lock(&s->mu);
    queue_push(s, r, true);
    pthread_mutex_unlock(&s->mu);
    s->n_preemptions++;
    r->acct.n_preemptions++;
}

/* ---- building a pass ------------------------------------------------------------------------------ */

/* New blocks slots [a, b) of a sequence may take: the blocks past a's, plus
 * one when a's block is partial (it may be shared, then copied on write). */
static int32_t blocks_for(int32_t a, int32_t b) {
    const int32_t B = BRISK_KV_BLOCK;
    return (b + B - 1) / B - (a + B - 1) / B + (a % B != 0 ? 1 : 0);
}

static void put(brisk_sched *s, int32_t n, int32_t token, int32_t pos, int32_t seq, uint8_t want) {
    s->tok[n] = token;
    s->pos[n] = pos;
    s->seq[n] = seq;
    s->want[n] = want;
}

/* ---- shared prefixes computed once ------------------------------------------------------------------ */

/* Tokens in whole blocks that x's prompt part (hist[0, n_hist - 1): what its sequence may take from the
 * prefix cache) has in common with y's history, looked at up to cap tokens. */
static int32_t shared_len(const sched_choice *x, const sched_choice *y, int32_t cap) {
    const int32_t B = BRISK_KV_BLOCK, lim = BRISK_MIN(BRISK_MIN(x->n_hist - 1, y->n_hist), cap) / B * B;
    int32_t n = 0;
    while (n < lim && !memcmp(x->hist + n, y->hist + n, (size_t)B * sizeof *x->hist)) n += B;
    return n;
}

/* Take what the prefix cache now has of x's history (whole blocks another choice finished meanwhile). */
static void resync_prefix(brisk_sched *s, sched_req *r, sched_choice *x) {
    const int32_t had = x->kv_len;
    const int32_t got = brisk_kv_sync_prefix(s->kv, x->seq, x->hist, BRISK_MIN(x->n_hist - 1, s->sync_cap));
    if (got <= had) return;
    s->kv->n_hit_tokens -= had;   /* the sync counted all it kept; only the gain is new */
    s->c->tree_ok[x->seq] = 0;
    x->kv_len = got;
    /* still its first prefill: these prompt tokens came from the cache, not from its own compute */
    if (x->index == 0 && !r->forked && r->acct.n_preemptions == 0) r->acct.n_prompt_cached += got - had;
}

/* Whether choice x of r must wait before computing more of its prompt: a choice ranked above it (further
 * into its prefill, or as far and older) is still computing a prefix they share in whole blocks; x takes
 * those blocks from the cache once they are written, and computes only past them. The ranking is a strict
 * order at every pass, so its top choice always computes (no cycle, no deadlock), and x waits at most for
 * the shared part of its own prompt; one that waited resyncs with the cache at its next look, so blocks
 * computed by a choice that finished, was cancelled or was preempted meanwhile are taken too. Requests
 * with prompt logits compute every position anyway and take no part. A step allocates nothing here. */
static bool prefix_held(brisk_sched *s, sched_req *r, sched_choice *x) {
    const int32_t B = BRISK_KV_BLOCK;
    if (s->sync_cap < B || s->kv->hyb) {
        /* it takes nothing from the cache (a scored policy's statistics; a hyb cache's hot rows, kv/hyb.c): nothing
         * to wait for */
        x->held = false;
        return false;
    }
    bool sync = x->held, hold = false;
    for (int round = 0; round < 2; round++) {
        if (sync) resync_prefix(s, r, x);
        sync = hold = false;
        for (int32_t i = 0; i < s->n_running; i++) {
            const sched_req *q = s->running[i];
            if (q->rq.prompt_logits) continue;
            for (int32_t j = 0; j < q->rq.n; j++) {
                const sched_choice *y = &q->ch[j];
                if (y == x || y->finish != BRISK_FINISH_NONE || y->seq < 0 || y->kv_len >= y->n_hist - 1) continue;
                if (!q->forked && j > 0) continue;
                const bool above = y->kv_len > x->kv_len ||
                                   (y->kv_len == x->kv_len && (q->id < r->id || (q == r && y->index < x->index)));
                if (!above) continue;
                /* up to the block past y's: enough to tell both conditions below (y.kv_len >= x.kv_len) */
                const int32_t L = shared_len(x, y, BRISK_MIN((y->kv_len / B + 1) * B, s->sync_cap));
                if (L <= x->kv_len) continue;
                if (y->kv_len < L) hold = true;
                if (BRISK_MIN(y->kv_len, L) / B * B > x->kv_len) sync = true;   /* y wrote blocks x lacks */
            }
        }
        if (!sync) break;
    }
    x->held = hold;
    if (hold && x->held_step != s->step_no) {
        x->held_step = s->step_no;
        s->info->n_prefix_held++;
    }
    return hold;
}

/* ---- retention: generation past the context on a fixed schedule ------------------------------------------
 * With a retention policy, brisk_decode (brisk_kv_policy_make_room) cuts a sequence that its batch would take
 * past the budget to budget - max(its tokens in the batch, g) slots, g = min(32, (budget - sink - window) / 2),
 * or more to keep its pinned slots (kv/policy.h). Where the cut falls would thus depend on how many tokens each
 * batch brought, which in a server depends on the load. So a sequence with a policy is fed on a fixed
 * schedule: below the budget, never past it (no cut); at the budget, at most the tokens that a decode's cut
 * leaves room for (the cut is then the decode's, to the same slots). Its cuts happen at the same points of its
 * history with the same survivors (a scored policy's statistics are its own queries', which no chunking
 * changes), however its prompt was chunked and whatever ran beside it: a function of its tokens alone.
 *
 * Positions come from the cache (brisk_kv_next_pos), and a sequence's slots or positions end at a limit
 * (without a policy -c; with one the trained context). A sequence is fed no further than the limit; at the
 * limit, with the context shift on, it is shifted before the pass (llama.cpp's: the first shift_keep slots
 * kept, without a policy half of the rest dropped, the rest renumbered and their K re-rotated), so shifts too
 * fall at the same points; with it off the choice finishes ("length"). Rotated and compacted blocks never join
 * the prefix cache (kv.c), and a sequence takes from it only blocks that hold their own positions. */

/* Tokens seq's next batch may bring under its policy: the fixed schedule (brisk_kv_policy_room). */
static int32_t policy_room(const brisk_sched *s, int32_t seq) { return brisk_kv_policy_room(s->kv, seq); }

/* Tokens seq may take before its slots (no policy) or positions reach the limit. */
static int32_t limit_room(const brisk_sched *s, int32_t seq) {
    int64_t r = (int64_t)s->pos_limit - brisk_kv_next_pos(s->kv, seq);
    if (!s->kv->policy) r = BRISK_MIN(r, (int64_t)s->n_ctx - brisk_kv_len(s->kv, seq));
    return (int32_t)BRISK_MAX(0, r);
}

/* The most tokens a pass may bring to seq (retention only). */
static int32_t retention_cap(const brisk_sched *s, int32_t seq) { return BRISK_MIN(policy_room(s, seq), limit_room(s, seq)); }

static void retention_end(brisk_sched *s, sched_req *r, sched_choice *ch, brisk_finish why) {
    /* before the fork the other choices wait for choice 0's prompt: they end with it */
    if (!r->forked && r->rq.n > 1) finish_request(s, r, why);
    else finish_choice(s, r, ch, why);
}

/* Before a pass: every choice that will take tokens and has no room left is shifted (context shift on) or
 * finishes: at the limit "length" (never reached for a request brisk_sched_add took, unless the shift is on),
 * when pinned slots leave no room "context full". */
static void retention_prepare(brisk_sched *s) {
    for (int32_t i = 0; i < s->n_running;) {
        sched_req *r = s->running[i];
        for (int32_t j = 0; j < r->rq.n; j++) {
            sched_choice *ch = &r->ch[j];
            if (ch->finish != BRISK_FINISH_NONE || ch->seq < 0 || ch->kv_len >= ch->n_hist) continue;
            if (!r->forked && j > 0) continue;
            if (limit_room(s, ch->seq) == 0) {
                if (!s->shift) {
                    retention_end(s, r, ch, BRISK_FINISH_LENGTH);
                    continue;
                }
                const int32_t len = brisk_kv_len(s->kv, ch->seq), keep = s->shift_keep;
                /* llama.cpp's n_discard: half of what follows the kept slots; with a policy the slots already fit its
                 * budget and renumbering them is enough, unless they alone reach the limit */
                int32_t n_discard = 0;
                if (!s->kv->policy || (int64_t)len + 1 > s->pos_limit)
                    n_discard = BRISK_MAX(BRISK_MAX(len - keep, 0) / 2, len + 1 - s->pos_limit);
                int32_t dropped = 0;
                brisk_error err = {0};
                if (brisk_seq_context_shift(s->c, ch->seq, keep, n_discard, &dropped, &err) != BRISK_OK) {
                    retention_end(s, r, ch, BRISK_FINISH_ERROR);
                    continue;
                }
                s->n_shifts++;
                r->acct.n_shifts++;
                if (limit_room(s, ch->seq) == 0) {   /* the kept and pinned slots alone fill it */
                    retention_end(s, r, ch, BRISK_FINISH_CONTEXT_FULL);
                    continue;
                }
            }
            if (policy_room(s, ch->seq) == 0) retention_end(s, r, ch, BRISK_FINISH_CONTEXT_FULL);
        }
        if (i < s->n_running && s->running[i] == r) i++;
    }
}

/* The role of history token i of r. */
static uint8_t role_at(const sched_req *r, int32_t i) { return i < r->n_prompt ? r->roles[i] : r->gen_role; }

/* max_stall's decode-only cost of a pass of n decode tokens: the last decode-only pass's time when it had n
 * tokens (a probe's, so it follows the contexts' growth), else the speculation policy's cost table. */
static double stall_dec(const brisk_sched *s, int32_t n) {
    return s->probe_n == n && s->probe_dt > 0.0 ? s->probe_dt : brisk_spec_policy_cost(s->policy, n);
}

/* The fewest prompt tokens a decoding step may take so that the prompts being prefilled are in before the
 * pool fills (with max_stall or prefill_budget). At a tokens a step a prompt with R tokens still to compute
 * takes S = R / a steps, while each decoding stream grows by a token a step until its max_tokens (or the
 * context) ends it; if R plus that growth passes what the pool can give, a stream finds no block and the
 * youngest request, the prompt, is preempted and starts again, over and over while the streams run (a
 * 4,096-token prompt beside 7 streams in an 8,192-token pool with --max-stall 1 never finished). So S is the
 * most steps the pool allows (a binary search: the growth only rises with S), counting one probe step in
 * every 8 and one more, since probes carry no prompt tokens; the pool's room is the blocks left after this
 * pass's decodes less one partly filled block per sequence. Prompts that cannot fit even at once get n_batch:
 * their chunks are then cut to what the pool gives. The first pass of a step calls it (s->ent holds its
 * decode entries). */
static int32_t kv_deadline_allowance(const brisk_sched *s, int32_t free_blocks) {
    int64_t rest = 0;
    int32_t seqs = 0;
    for (int32_t i = 0; i < s->n_running; i++) {
        const sched_req *r = s->running[i];
        for (int32_t j = 0; j < r->rq.n; j++) {
            const sched_choice *ch = &r->ch[j];
            if (ch->finish != BRISK_FINISH_NONE || ch->seq < 0) continue;
            seqs++;
            if ((r->forked || j == 0) && ch->kv_len < ch->n_hist - 1) rest += ch->n_hist - 1 - ch->kv_len;
        }
    }
    if (rest == 0) return 0;
    const int64_t room = ((int64_t)free_blocks - seqs) * BRISK_KV_BLOCK;
    int64_t lo = 0, hi = rest;   /* the most steps S in [1, rest] with rest + growth(S) <= room; 0: none */
    while (lo < hi) {
        const int64_t S = (lo + hi + 1) / 2, steps = S + S / STALL_PROBE_EVERY + 1;
        int64_t grow = 0;
        for (int32_t i = 0; i < s->n_ent; i++) {
            const sched_entry *e = &s->ent[i];
            if (!e->decode) continue;
            const int64_t left = BRISK_MIN((int64_t)e->r->rq.max_tokens - e->ch->n_gen, (int64_t)s->n_ctx - e->ch->n_hist);
            grow += BRISK_MAX(0, BRISK_MIN(steps, left));
        }
        if (rest + grow <= room) lo = S;
        else hi = S - 1;
    }
    if (lo == 0) return s->n_batch;
    return (int32_t)BRISK_MIN((rest + lo - 1) / lo, (int64_t)s->n_batch);
}

/* Fill the pass (at most room tokens): decode tokens and drafts, then
 * prefill chunks. progressed: a pass of this step ran already. *need: the
 * blocks its sequences may take. Returns its tokens. */
static int32_t build_pass(brisk_sched *s, int32_t room, bool progressed, int32_t *need) {
    int32_t n = 0, rows = 0, nd = 0, nq = 0, in_use, cached, free_blocks;
    brisk_kv_counts(s->kv, &in_use, &cached, &free_blocks);
    int32_t avail = cached + free_blocks;
    *need = 0;
    s->n_ent = 0;
    const int32_t dcap = BRISK_MIN(room, s->n_outputs);
    /* decode candidates, oldest first; the ones that speculate propose */
    for (int32_t i = 0; i < s->n_running && nd < dcap; i++) {
        sched_req *r = s->running[i];
        for (int32_t j = 0; j < r->rq.n && nd < dcap; j++) {
            sched_choice *ch = &r->ch[j];
            if (ch->finish != BRISK_FINISH_NONE || ch->seq < 0 || ch->kv_len != ch->n_hist - 1 || ch->stamp == s->step_no) continue;
            if (!r->forked && j > 0) continue;
            sched_entry *e = &s->ent[s->n_ent++];
            *e = (sched_entry){.r = r, .ch = ch, .n = 1, .k = 0, .row = -1, .row0 = -1, .len0 = brisk_kv_len(s->kv, ch->seq),
                               .decode = true, .proposed = false};
            nd++;
            if (ch->spec && ch->n_gen >= r->rq.min_tokens) {
                const int32_t kcap = BRISK_MIN(s->n_ctx - ch->n_hist, r->rq.max_tokens - ch->n_gen - 1);
                /* a draft model drafts after the plan, only what it takes */
                if (r->rq.spec == BRISK_SCHED_SPEC_DRAFT) brisk_spec_seq_propose_later(ch->spec, kcap);
                else brisk_spec_seq_propose(ch->spec, ch->hist, ch->n_hist, kcap);
                e->proposed = true;
                s->plan_q[nq] = ch->spec;
                s->plan_e[nq] = s->n_ent - 1;
                nq++;
            }
        }
    }
    if (nq > 0) {
        const int32_t draft_room = BRISK_MIN(room, s->n_outputs) - nd;
        brisk_spec_plan(s->policy, s->plan_q, nq, nd, nd, draft_room, s->plan_k);
        int32_t nm = 0;
        for (int32_t i = 0; i < nq; i++) {
            sched_entry *e = &s->ent[s->plan_e[i]];
            e->k = s->plan_k[i];
            if (e->k <= 0 || e->r->rq.spec != BRISK_SCHED_SPEC_DRAFT) continue;
            s->dm_ent[nm] = s->plan_e[i];
            s->dm_seq[nm] = e->ch->seq;
            s->dm_hist[nm] = e->ch->hist;
            s->dm_n[nm] = e->ch->n_hist;
            s->dm_k[nm] = e->k;
            nm++;
        }
        if (nm > 0) {
            /* the draft model's tokens for every choice that takes some, in shared draft passes */
            double secs = 0.0;
            int32_t passes = 0;
            brisk_spec_drafts_propose(s->drafts, nm, s->dm_seq, s->dm_hist, s->dm_n, s->dm_k, s->dm_out, s->dm_got, &secs, &passes);
            if (passes > 0) brisk_spec_policy_observe_draft(s->policy, secs / passes);
            for (int32_t i = 0; i < nm; i++) {
                sched_entry *e = &s->ent[s->dm_ent[i]];
                brisk_spec_seq_set_draft(e->ch->spec, s->dm_out[i], s->dm_got[i]);
                e->k = BRISK_MIN(e->k, s->dm_got[i]);
            }
        }
    }
    for (int32_t i = 0; i < s->n_ent; i++) {
        sched_entry *e = &s->ent[i];
        sched_choice *ch = e->ch;
        e->row = rows;
        const int32_t p0 = brisk_kv_next_pos(s->kv, ch->seq);
        put(s, n++, ch->hist[ch->n_hist - 1], p0, ch->seq, 1);
        const int32_t *d = e->k > 0 ? brisk_spec_seq_draft(ch->spec) : NULL;
        for (int32_t j = 0; j < e->k; j++) put(s, n++, d[j], p0 + 1 + j, ch->seq, 1);
        rows += 1 + e->k;
        *need += blocks_for(e->len0, e->len0 + 1 + e->k);
    }
    /* the step's prompt allowance, set by its first pass that decodes: max_stall times the decode-only pass */
    if (s->step_pf_left < 0 && n > 0 && s->max_stall > 0.0 && s->prefill_tok_s > 0.0) {
        const double dec = stall_dec(s, n);
        /* a probe: this step decodes only, to measure (or refresh) the decode-only cost of its size */
        if (s->stall_streak >= STALL_PROBE_EVERY || (s->probe_n != n && !brisk_spec_policy_measured(s->policy, n))) {
            s->step_pf_left = 0;
            s->step_probe = true;
        }
        else if (dec > 0.0) {
            if (!(s->pf_allow > 0.0)) s->pf_allow = BRISK_MAX(1.0, s->max_stall * dec / s->prefill_tok_s);
            s->step_pf_left = s->pf_allow >= (double)s->n_batch ? s->n_batch : BRISK_MAX(1, (int32_t)s->pf_allow);
        }
    }
    /* the fixed prompt budget of a step that decodes (the smaller of the two when both are set) */
    if (n > 0 && s->prefill_budget > 0 && !s->step_pf_fixed) {
        s->step_pf_fixed = true;
        s->step_pf_left = s->step_pf_left < 0 ? s->prefill_budget : BRISK_MIN(s->step_pf_left, s->prefill_budget);
    }
    /* the KV deadline: never so few prompt tokens that the pool fills before the prompts are in (a probe
     * step keeps its none: the deadline counts the probes) */
    if (n > 0 && s->step_pf_left >= 0 && !s->step_pf_deadline) {
        s->step_pf_deadline = true;
        if (!s->step_probe) s->step_pf_left = BRISK_MAX(s->step_pf_left, kv_deadline_allowance(s, avail - *need));
    }
    if (s->step_pf_left >= 0) room = BRISK_MIN(room, n + s->step_pf_left);
    /* prefill chunks, oldest first */
    for (int32_t i = 0; i < s->n_running && n < room; i++) {
        sched_req *r = s->running[i];
        for (int32_t j = 0; j < r->rq.n && n < room; j++) {
            sched_choice *ch = &r->ch[j];
            if (ch->finish != BRISK_FINISH_NONE || ch->seq < 0 || ch->kv_len >= ch->n_hist - 1) continue;
            if (!r->forked && j > 0) continue;
            if (!r->rq.prompt_logits && prefix_held(s, r, ch)) continue;
            brisk_kv_counts(s->kv, &in_use, &cached, &free_blocks);   /* a look at the cache may have taken cached blocks */
            avail = cached + free_blocks;
            int32_t chunk = BRISK_MIN(ch->n_hist - ch->kv_len, room - n);
            if (s->retention) chunk = BRISK_MIN(chunk, retention_cap(s, ch->seq));   /* the fixed schedule (above) */
            if (s->pin) {
                /* one role per sequence and pass (brisk_seq_set_role) */
                const uint8_t role = role_at(r, ch->kv_len);
                int32_t m = 1;
                while (m < chunk && role_at(r, ch->kv_len + m) == role) m++;
                chunk = m;
            }
            if (ch->kv_len + chunk == ch->n_hist && rows >= s->n_outputs) chunk--;   /* no logit row left for its last token */
            const bool plp = r->rq.prompt_logits && ch->index == 0 && ch->kv_len < r->n_prompt - 1;
            if (plp) chunk = BRISK_MIN(chunk, s->n_outputs - rows);   /* a row for every token */
            if (n > 0 || progressed) {
                /* what the pool can still give, so a prompt does not push running requests out */
                const int32_t B = BRISK_KV_BLOCK, a = brisk_kv_len(s->kv, ch->seq);
                const int32_t extra = avail - *need - (a % B != 0 ? 1 : 0);
                const int32_t fit = extra < 0 ? 0 : ((a + B - 1) / B + extra) * B - a;
                chunk = BRISK_MIN(chunk, fit);
            }
            if (chunk <= 0) continue;
            const bool last = ch->kv_len + chunk == ch->n_hist;
            sched_entry *e = &s->ent[s->n_ent++];
            *e = (sched_entry){.r = r, .ch = ch, .n = chunk, .k = 0, .row = last ? rows : -1, .row0 = -1,
                               .len0 = brisk_kv_len(s->kv, ch->seq), .decode = false, .proposed = false};
            const int32_t p0 = brisk_kv_next_pos(s->kv, ch->seq);
            for (int32_t t = 0; t < chunk; t++) put(s, n + t, ch->hist[ch->kv_len + t], p0 + t, ch->seq, plp || (last && t == chunk - 1));
            n += chunk;
            if (plp) {
                e->row0 = rows;
                e->row = last ? rows + chunk - 1 : -1;
                rows += chunk;
            } else {
                rows += last;
            }
            *need += blocks_for(e->len0, e->len0 + chunk);
        }
    }
    for (int32_t i = 0; s->pin && i < s->n_ent; i++) {
        /* the slots each sequence writes in this pass take its tokens' role (a pass holds one entry per choice) */
        const sched_entry *e = &s->ent[i];
        brisk_seq_set_role(s->c, e->ch->seq, role_at(e->r, e->decode ? e->ch->n_hist - 1 : e->ch->kv_len), NULL);
    }
    return n;
}

/* ---- after a pass ----------------------------------------------------------------------------------- */

/* Sample choice ch after entry e (its drafts rows e->row + 1 .. when it speculated) and deliver the tokens. */
static void sample_choice(brisk_sched *s, sched_req *r, sched_choice *ch, const sched_entry *e) {
    const int32_t k = e->ch == ch ? e->k : 0;
    for (int32_t i = 0; i <= k; i++) s->rows[i] = brisk_get_logits(s->c, e->row + i);
    int32_t m = 1;
    const float *raw0 = s->rows[0];
    if (ch->n_gen < r->rq.min_tokens && s->n_eog > 0) {
        /* min_tokens: end of generation is banned for now (no drafts were proposed: k == 0) */
        memcpy(s->masked, s->rows[0], (size_t)s->n_vocab * sizeof *s->masked);
        for (int32_t i = 0; i < s->n_eog; i++) s->masked[s->eog[i]] = -INFINITY;
        s->rows[0] = s->masked;
    }
    if (ch->spec) {
        /* a choice that did not propose in this pass (a finishing prefill, a fork) drafts nothing */
        if (!(e->ch == ch && e->proposed)) brisk_spec_seq_propose(ch->spec, ch->hist, ch->n_hist, 0);
        m = brisk_spec_seq_commit(ch->spec, s->policy, ch->smp, s->n_vocab, s->rows, k, r->greedy, s->scratch, s->out);
    } else {
        s->out[0] = brisk_sampler_sample(ch->smp, s->rows[0]);
        brisk_sampler_accept(ch->smp, s->out[0]);
    }
    if (k > 0) {
        /* keep the pending token and the accepted drafts; the rejected tail leaves the KV */
        brisk_seq_truncate(s->c, ch->seq, ch->n_hist + m - 1, NULL);
        ch->kv_len = ch->n_hist + m - 1;
        s->n_drafted += k;
        s->n_accepted += m - 1;
        r->acct.n_drafted += k;
        r->acct.n_accepted += m - 1;
        s->info->n_drafts += k;
    }
    ch->stamp = s->step_no;
    s->rows[0] = raw0;   /* the callbacks see the raw logits */
    for (int32_t i = 0; i < m; i++) {
        const int32_t t = s->out[i];
        ch->hist[ch->n_hist++] = t;
        ch->n_gen++;
        s->info->n_decoded++;
        r->acct.n_generated++;
        if (r->acct.t_first_token == 0) r->acct.t_first_token = brisk_time_now();
        if (r->rq.on_logits) r->rq.on_logits(r->rq.user, r->id, ch->index, t, s->rows[i], s->n_vocab);
        r->rq.on_token(r->rq.user, r->id, ch->index, t, BRISK_FINISH_NONE);
        if (!r->rq.ignore_eog && brisk_token_is_eog(s->model, t)) {
            finish_choice(s, r, ch, BRISK_FINISH_EOG);
            return;
        }
        if (ch->n_gen >= r->rq.max_tokens) {
            finish_choice(s, r, ch, BRISK_FINISH_LENGTH);
            return;
        }
    }
    ch->kv_len = ch->n_hist - 1;
}

/* The pass's cost, shared out: each entry pays for its tokens' share of the
 * weights read and for its own K/V reads, FLOPs and logit rows. */
static void account_pass(brisk_sched *s, int32_t n_pass) {
    for (int32_t i = 0; i < s->n_ent; i++) {
        const sched_entry *e = &s->ent[i];
        brisk_sched_request_info *a = &e->r->acct;
        const int32_t t = e->n + e->k, p0 = e->len0;   /* the slots it attends (a policy keeps fewer than its positions) */
        const int32_t rows = e->decode ? 1 + e->k : e->row >= 0;
        /* token at position p attends p + 1 positions */
        const double attn = ((double)(p0 + 1) + (double)(p0 + t)) * t / 2.0;
        a->flops += s->flops_token * t + s->flops_logits * rows + s->flops_attn_pos * attn;
        a->bytes_read += s->weight_bytes * t / n_pass + s->kv_bytes_pos * (double)(p0 + t);
        a->n_passes++;
        /* a prompt whose chunks stopped one token short computes its last token as a decode */
        if (!e->decode || e->ch->n_gen == 0) a->n_prefilled += e->n;
    }
}

static void after_pass(brisk_sched *s) {
    for (int32_t i = 0; i < s->n_ent; i++) {
        const sched_entry *e = &s->ent[i];
        sched_req *r = e->r;
        sched_choice *ch = e->ch;
        if (ch->finish != BRISK_FINISH_NONE) continue;
        if (e->row0 >= 0) {
            /* prompt logits: position p's row predicts prompt token p + 1 */
            for (int32_t t = 0; t < e->n; t++) {
                const int32_t p = ch->kv_len + t;
                if (p < r->plp_done || p + 1 >= r->n_prompt) continue;
                r->rq.on_prompt_logits(r->rq.user, r->id, p, ch->hist[p + 1], brisk_get_logits(s->c, e->row0 + t), s->n_vocab);
                r->plp_done = p + 1;
            }
        }
        ch->kv_len += e->n + e->k;
        if (!e->decode) s->info->n_prefill += e->n;
        if (e->row < 0) continue;
        if (!r->forked && r->rq.n > 1) {
            /* choice 0's prompt is done: every other choice forks it and samples the same logits */
            for (int32_t j = 1; j < r->rq.n; j++) {
                sched_choice *cj = &r->ch[j];
                if (cj->finish != BRISK_FINISH_NONE) continue;
                brisk_error ferr = {0};
                if (brisk_seq_fork(s->c, ch->seq, cj->seq, &ferr) != BRISK_OK) {
                    finish_choice(s, r, cj, BRISK_FINISH_ERROR);   /* not reached: slots and order are the scheduler's */
                    continue;
                }
                cj->kv_len = ch->kv_len;
            }
            r->forked = true;
            for (int32_t j = 0; j < r->rq.n; j++)
                if (r->ch[j].finish == BRISK_FINISH_NONE) sample_choice(s, r, &r->ch[j], e);
            continue;
        }
        sample_choice(s, r, ch, e);
    }
}

/* ---- the step ------------------------------------------------------------------------------------------ */

/* After a pass: spends the step's prompt allowance and learns. A pure prefill pass gives the seconds per
 * prompt token (EMA; one outlier clipped to [1/2, 2]x), which sets the first allowance. Prompt tokens beside
 * decodes cost more each than in a large pass (the pass changes shape; a late chunk attends to more
 * positions), so the allowance is then steered by what mixed passes really cost: their time over the
 * decode-only estimate against max_stall times that estimate, a damped multiplicative step. The decode-only
 * estimate is the speculation policy's cost table, which only decode-only passes update; while a long
 * prompt is always beside the decodes their contexts grow and the table would go stale (the growth then
 * charged to the prompt, whose allowance fell to its floor of one token a step: docs/SERVER.md), so after
 * STALL_PROBE_EVERY decoding passes in a row with prompt tokens one step decodes alone: a probe. A step whose
 * decode size was never measured alone is a probe too (an estimate interpolated from other sizes, or none,
 * let the first prompts of a burst stall the first streams by whole 512-token chunks). */
static void observe_prefill(brisk_sched *s, double dt) {
    int32_t n_dec = 0, n_pf = 0;
    for (int32_t i = 0; i < s->n_ent; i++) {
        if (s->ent[i].decode) n_dec += 1 + s->ent[i].k;
        else n_pf += s->ent[i].n;
    }
    if (s->step_pf_left >= 0) s->step_pf_left = BRISK_MAX(0, s->step_pf_left - n_pf);
    if (n_dec > 0) s->stall_streak = n_pf > 0 ? s->stall_streak + 1 : 0;
    if (n_dec > 0 && n_pf == 0 && dt > 0.0) s->probe_n = n_dec, s->probe_dt = dt;
    if (n_pf == 0) return;
    if (n_dec == 0) {
        const double per = dt / n_pf, c = s->prefill_tok_s;
        if (per > 0.0) s->prefill_tok_s = c > 0.0 ? 0.7 * c + 0.3 * fmax(0.5 * c, fmin(2.0 * c, per)) : per;
        return;
    }
    const double dec = stall_dec(s, n_dec);
    if (!(dec > 0.0) || !(s->pf_allow > 0.0) || s->max_stall <= 0.0) return;
    const double extra = dt - dec, target = s->max_stall * dec;
    const double r = extra > 0.0 ? fmax(0.5, fmin(2.0, target / extra)) : 2.0;
    s->pf_allow = fmax(1.0, fmin((double)s->n_batch, s->pf_allow * sqrt(r)));
}

brisk_status brisk_sched_step(brisk_sched *s, brisk_sched_info *info, brisk_error *err) {
    brisk_sched_info local;
    brisk_sched_info *in = info ? info : &local;
    memset(in, 0, sizeof *in);
    s->info = in;
    s->step_no++;
    take_cancels_and_admit(s);
    int32_t budget = s->n_batch;
    bool progressed = false;
    s->step_pf_left = -1;
    s->step_pf_fixed = false;
    s->step_pf_deadline = false;
    s->step_probe = false;
    while (budget > 0 && s->n_running > 0) {
        int32_t need;
        if (s->retention) retention_prepare(s);
        if (s->n_running == 0) break;
        const int32_t n = build_pass(s, BRISK_MIN(s->n_ubatch, budget), progressed, &need);
        if (n == 0) break;
        const brisk_batch b = {.n_tokens = n, .token = s->tok, .pos = s->pos, .seq = s->seq, .logits = s->want};
        brisk_error derr = {0};
        const double t0 = brisk_time_now();
        const brisk_status st = brisk_decode(s->c, &b, &derr);
        double dt = brisk_time_now() - t0;
        if (s->pass_clock) dt = s->pass_clock(s->pass_clock_user, n, brisk_n_logits(s->c));
        in->n_passes++;
        if (st == BRISK_ERR_CAPACITY) {
            /* the pool is full even after the prefix cache's evictions: nothing changed; make room and rebuild */
            int32_t in_use, cached, free_blocks;
            brisk_kv_counts(s->kv, &in_use, &cached, &free_blocks);
            s->preempt_free = cached + free_blocks;
            s->preempt_need = need;
            preempt_youngest(s);
            continue;
        }
        if (st) {
            /* a pass that fails for its numbers (non-finite logits) fails its requests; the step goes on */
            for (int32_t i = 0; i < s->n_ent; i++)
                if (s->ent[i].ch->finish == BRISK_FINISH_NONE) finish_request(s, s->ent[i].r, BRISK_FINISH_ERROR);
            continue;
        }
        brisk_spec_policy_observe(s->policy, n, brisk_n_logits(s->c), dt);
        observe_prefill(s, dt);
        budget -= n;
        progressed = true;
        account_pass(s, n);
        after_pass(s);
    }
    while (s->finished) {
        sched_req *r = s->finished;
        s->finished = r->cnext;
        req_free(r);
    }
    in->n_running = s->n_running;
    in->n_seq_running = s->n_slots_used;
    pthread_mutex_lock(&s->mu);
    in->n_waiting = s->n_queued;
    pthread_mutex_unlock(&s->mu);
    in->n_preemptions = s->n_preemptions;
    in->n_shifts = s->n_shifts;
    in->n_drafted = s->n_drafted;
    in->n_accepted = s->n_accepted;
    in->preempt_free_blocks = s->preempt_free;
    in->preempt_need_blocks = s->preempt_need;
    brisk_kv_counts(s->kv, &in->kv_blocks_used, &in->kv_blocks_cached, &in->kv_blocks_free);
    in->kv_blocks_shared = 0;
    for (int32_t b = 0; b < s->kv->n_blocks; b++) in->kv_blocks_shared += s->kv->blk[b].ref > 1;
    s->info = NULL;
    (void)err;
    return BRISK_OK;
}

void brisk_sched_set_pass_clock(brisk_sched *s, brisk_sched_pass_clock clock, void *user) {
    s->pass_clock = clock;
    s->pass_clock_user = user;
}
