/* engine: the server's side of the inference. One inference thread owns the
 * context and steps brisk_sched; HTTP threads hand it jobs (a validated,
 * tokenized request) through bounded admission and read each job's output as a list of events
 * (one per generated token that released text, and one per finished choice).
 *
 * Admission: at most max_running + max_queue jobs are held at once (running
 * or waiting); srv_engine_submit refuses the next one with SRV_ADMIT_FULL
 * (the HTTP side answers 429 before any header is sent), and every one after
 * srv_engine_drain with SRV_ADMIT_DRAINING (503).
 *
 * Thread safety: submit, cancel, drain, idle and the job accessors may be
 * called from any thread; the notify callback runs on the inference thread
 * and must not block. */
#ifndef BRISK_SERVER_ENGINE_H
#define BRISK_SERVER_ENGINE_H

#include "brisk.h"
#include "server/stop.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum srv_finish {
    SRV_FINISH_NONE = 0,
    SRV_FINISH_STOP,        /* end of generation or a stop string: "stop" */
    SRV_FINISH_LENGTH,      /* max_tokens or a full context: "length" */
    SRV_FINISH_CANCELLED,   /* the client went away */
    SRV_FINISH_ERROR,       /* the forward pass failed (the job's error says why) */
} srv_finish;

const char *srv_finish_str(srv_finish f);   /* "stop", "length", "cancelled", "error" */

/* One alternative of a token's logprobs. */
typedef struct srv_top {
    int32_t id;
    float logprob;
} srv_top;

/* One token's text, or a choice's end. */
typedef struct srv_event {
    int32_t choice;
    char *text;            /* malloc'd, valid UTF-8 (may be empty); NULL when empty */
    size_t len;
    srv_finish finish;     /* NONE for a token */
    int32_t token;         /* the sampled token (-1 for an end) */
    float logprob;         /* log-probability of token under the raw logits (with logprobs) */
    srv_top *top;          /* n_top alternatives (with top_logprobs), malloc'd */
    int32_t n_top;
    const char *stop_word; /* an end by a stop string: the string (borrowed from the job, which outlives the event's use) */
    bool eog;              /* an end by an end-of-generation token */
} srv_event;

/* A request in flight, shared by its connection and the inference thread
 * (reference counted: srv_job_unref frees it with the last reference). */
typedef struct srv_job srv_job;

typedef struct srv_job_params {
    const int32_t *prompt;     /* [n_prompt] token ids (copied) */
    int32_t n_prompt;
    int32_t n_cap;             /* max tokens per choice after the context cap */
    bool cap_is_context;       /* n_cap came from the context, not max_tokens (both finish "length") */
    int32_t n;                 /* choices */
    brisk_sampler_params sampling;   /* pointers borrowed during srv_job_new (copied) */
    bool ignore_eos;
    char *const *stop;         /* copied */
    int32_t n_stop;
    bool logprobs;
    int32_t top_logprobs;
    int32_t min_tokens;        /* end of generation banned before this many tokens (<= n_cap) */
    bool prompt_logprobs;      /* echo with logprobs: every prompt token's logprob (and top_logprobs alternatives) */
    bool spec_set;             /* spec is this job's own (else the engine's default) */
    brisk_sched_spec spec;
    /* constrained decoding: choice i's constraint (NULL: none), n of them or NULL; the job takes them
     * (freed with it, also when srv_job_new fails) */
    struct srv_constraint **constraints;
    const uint8_t *roles;      /* [n_prompt] the prompt tokens' brisk_kv_role (--kv-pin; copied), NULL: "prompt" */
    int32_t gen_role;          /* the generated tokens' role, 0: "generated" */
    /* Called on the inference thread after new events are queued or the job
     * ends; must not block. user is the connection's. */
    void (*notify)(void *user);
    void *user;
} srv_job_params;

srv_job *srv_job_new(const srv_job_params *p);
void srv_job_ref(srv_job *j);
void srv_job_unref(srv_job *j);   /* NULL is a no-op */
/* Take the events queued since the last call (caller frees them with
 * srv_events_free); *done is true once every choice has finished and all its
 * events were taken. */
srv_event *srv_job_take(srv_job *j, int32_t *n_events, bool *done);
void srv_events_free(srv_event *ev, int32_t n);
/* The connection goes away: no more notify calls after this returns. */
void srv_job_detach(srv_job *j);
/* Usage once done: prompt tokens, prompt tokens reused from the cache,
 * generated tokens over all choices. */
void srv_job_usage(srv_job *j, int32_t *prompt, int32_t *cached, int32_t *completion);
/* A job's cost once done (usage.brisk): wall times from the scheduler's
 * stamps, and its estimate of FLOPs and bytes read (brisk_sched_request_info);
 * energy = FLOPs x SRV_JOULES_PER_FLOP + bytes x SRV_JOULES_PER_BYTE, order-of-
 * magnitude constants for a desktop CPU and DDR memory, not a measurement. */
#define SRV_JOULES_PER_FLOP 10e-12
#define SRV_JOULES_PER_BYTE 150e-12
typedef struct srv_cost {
    double queue_ms, prefill_ms, decode_ms;
    int32_t cached_tokens, recomputed, preemptions;
    int32_t sampled;           /* tokens the scheduler sampled (completion_tokens plus any dropped after a choice's stop) */
    int64_t drafted, accepted;
    int64_t flops, bytes_read;
    double energy_j;
} srv_cost;
void srv_job_cost(srv_job *j, srv_cost *out);
/* The job was cancelled because it waited longer than the queue timeout (a 503). */
bool srv_job_timed_out(srv_job *j);
/* With prompt_logprobs, once done: lp[i] is the logprob of prompt token i + 1
 * (i < n_prompt - 1), top[i * k ..] its k alternatives; borrowed, valid while
 * the job lives. false when the job has none. */
bool srv_job_prompt_logprobs(srv_job *j, const float **lp, const srv_top **top, int32_t *k, int32_t *n);
/* Why the job failed (SRV_FINISH_ERROR), "" otherwise; copied into buf. */
void srv_job_error(srv_job *j, char *buf, size_t cap);

typedef enum srv_admit { SRV_ADMIT_OK = 0, SRV_ADMIT_FULL, SRV_ADMIT_DRAINING, SRV_ADMIT_INVALID } srv_admit;
/* SRV_ADMIT_INVALID: the scheduler refused the request (srv_job_error says why; a 400) */

typedef struct srv_engine srv_engine;

struct srv_metrics;

#define SRV_BURST_WINDOWS 10

typedef struct srv_engine_params {
    int32_t max_running;   /* jobs computed at once */
    int32_t max_queue;     /* jobs waiting at most */
    int spec;              /* brisk_sched_spec of jobs that do not choose */
    double queue_timeout_s;   /* a job not admitted within this is cancelled (0 = never) */
    double max_stall;         /* brisk_sched_params.max_stall */
    int32_t prefill_budget;   /* brisk_sched_params.prefill_budget */
    /* With nothing running, the first step waits until no request has arrived for this many ms (at most
     * SRV_BURST_WINDOWS windows after the first arrival; at once when max_running jobs are held), so a burst
     * of arrivals starts in one step and decodes in lockstep (--batch-window; 0 = start at the first). */
    double batch_window_ms;
    brisk_context *draft;     /* brisk_sched_params.draft (borrowed; NULL = none) */
    int32_t spec_draft_max;   /* brisk_sched_request.spec_draft_max (0 = the scheduler's default) */
    bool context_shift;       /* brisk_sched_params.context_shift */
    int32_t shift_keep;       /* brisk_sched_params.shift_keep */
    struct srv_metrics *metrics;   /* borrowed; NULL = none */
} srv_engine_params;

/* Starts the inference thread; m and c are borrowed and must outlive the engine. */
brisk_status srv_engine_init(srv_engine **out, const brisk_model *m, brisk_context *c, const srv_engine_params *p, brisk_error *err);
/* Stops the thread: jobs still held finish CANCELLED. NULL is a no-op. */
void srv_engine_free(srv_engine *e);
/* Queue j (takes a reference on success). */
srv_admit srv_engine_submit(srv_engine *e, srv_job *j);
/* Ask j to stop (queued or running); its choices finish CANCELLED. e may be
 * NULL once the engine is being freed (which cancels everything itself). */
void srv_engine_cancel(srv_engine *e, srv_job *j);
/* A KV save or restore (--kv-dir), run by the inference thread between
 * steps on a borrowed slot. save: ids[0..n_ids) are computed (whole blocks
 * from the prefix cache) and the sequence written to path in the engine's
 * format (docs/KVSTATE.md); restore: the state at path is loaded and its
 * full blocks left in the prefix cache, so later prompts sharing it start
 * cached. */
typedef struct srv_kv_op {
    bool save;
    const char *path;
    const int32_t *ids;
    int32_t n_ids;
    /* results */
    brisk_status status;
    brisk_error err;
    int32_t n_tokens;       /* tokens saved or restored */
    int32_t n_reused;       /* save: tokens the prefix cache already had */
    size_t bytes;           /* the state's size */
    /* the engine's */
    bool done;
    struct srv_kv_op *next;
} srv_kv_op;
/* Blocks until the inference thread has run op; returns op->status. */
brisk_status srv_engine_kv(srv_engine *e, srv_kv_op *op);
/* Refuse every later submit with SRV_ADMIT_DRAINING. */
void srv_engine_drain(srv_engine *e);
/* Jobs held (running + waiting). */
int32_t srv_engine_held(srv_engine *e);

#endif
