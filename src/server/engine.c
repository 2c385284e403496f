/* engine: jobs, the admission queue and the inference thread (engine.h).
 *
 * The inference thread is the only user of the context: it steps brisk_sched,
 * whose callbacks (sched_on_token, job_on_logits) turn tokens into the job's
 * events. A choice that ends on the server's side (a stop string) is
 * cancelled in the scheduler at once (brisk_sched_cancel_choice), so it stops
 * computing while its siblings go on. A job's usage is final at the
 * scheduler's last callback for it, where brisk_sched_request_info_get gives
 * its exact prompt accounting and cost; the metrics are recorded from the
 * same numbers. */
#include "server/engine.h"
#include "base/base.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/tools.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *srv_finish_str(srv_finish f) {
    switch (f) {
    case SRV_FINISH_STOP: return "stop";
    case SRV_FINISH_LENGTH: return "length";
    case SRV_FINISH_CANCELLED: return "cancelled";
    case SRV_FINISH_ERROR: return "error";
    default: return "none";
    }
}

/* ---- jobs ------------------------------------------------------------------------------------- */

typedef struct job_choice {
    brisk_text_stream *ts;   /* inference thread only */
    srv_stop stop;           /* inference thread only */
    int32_t n_gen;
    srv_finish finish;       /* under the job's mutex once set */
    float lp;                /* the pending token's logprob (job_on_logits -> job_on_token) */
    srv_top *top;            /* pending alternatives, malloc'd */
    int32_t n_top;
    double t_last;           /* its last token's time (inference thread) */
    bool cancel_sent;        /* ended on our side; the scheduler was told (inference thread) */
} job_choice;

struct srv_job {
    pthread_mutex_t mu;
    int refs;
    /* input, immutable after srv_job_new */
    int32_t *prompt, n_prompt, n_cap, n;
    uint8_t *roles;           /* [n_prompt] or NULL (--kv-pin) */
    int32_t gen_role;
    bool cap_is_context, ignore_eos, logprobs;
    int32_t top_logprobs;
    int32_t min_tokens;
    bool prompt_logprobs;
    float *plp;               /* [n_prompt] prompt logprobs (inference thread until done) */
    srv_top *plp_top;         /* [n_prompt * top_logprobs] */
    int32_t n_plp;
    bool spec_set;
    brisk_sched_spec spec;
    brisk_sampler_params sp;
    srv_constraint **cst;     /* [n] or NULL: each choice's constraint (the inference thread's once submitted) */
    brisk_mask *masks;        /* [n] their masks for brisk_sched_add */
    brisk_logit_bias *bias;
    int32_t n_bias;
    char **stop;
    int32_t n_stop;
    const brisk_model *model;   /* set at submit */
    /* shared, under mu */
    void (*notify)(void *user);
    void *user;
    srv_event *ev;
    int32_t n_ev, cap_ev;
    int32_t n_finished;
    bool accounted;           /* usage final (the scheduler's last callback ran): done needs it */
    bool cancel, timed_out;
    int32_t cached, completion;
    srv_cost cost;
    char error[512];
    job_choice *ch;
    /* the engine's (under its mutex, or the inference thread's alone) */
    struct srv_engine *engine;
    srv_job *next;            /* the engine's list of jobs not admitted yet (queue timeout) */
    int64_t sched_id;         /* brisk_sched's id (under mu) */
    int32_t sched_done;       /* choices the scheduler finished (inference thread) */
    double t_submit, t_first; /* brisk_time_now(): submitted, first token (inference thread after submit) */
};

srv_job *srv_job_new(const srv_job_params *p) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) {
        for (int32_t c = 0; p->constraints && c < p->n; c++) srv_constraint_free(p->constraints[c]);
        return NULL;
    }
    j->n = p->n;
    if (p->constraints) {
        j->cst = calloc((size_t)p->n, sizeof *j->cst);
        j->masks = calloc((size_t)p->n, sizeof *j->masks);
        for (int32_t c = 0; c < p->n; c++) {
            if (j->cst) j->cst[c] = p->constraints[c];
            else srv_constraint_free(p->constraints[c]);
        }
        if (!j->cst || !j->masks) goto fail_early;
        for (int32_t c = 0; c < p->n; c++)
            if (j->cst[c]) j->masks[c] = srv_constraint_mask(j->cst[c]);
    }
    pthread_mutex_init(&j->mu, NULL);
    j->refs = 1;
    j->n_prompt = p->n_prompt;
    j->n_cap = p->n_cap;
    j->n = p->n;
    j->cap_is_context = p->cap_is_context;
    j->ignore_eos = p->ignore_eos;
    j->logprobs = p->logprobs;
    j->top_logprobs = p->top_logprobs;
    j->min_tokens = p->min_tokens;
    j->prompt_logprobs = p->prompt_logprobs;
    if (j->prompt_logprobs) {
        j->plp = calloc((size_t)p->n_prompt + 1, sizeof *j->plp);
        j->plp_top = calloc(((size_t)p->n_prompt + 1) * (size_t)(p->top_logprobs + 1), sizeof *j->plp_top);
        if (!j->plp || !j->plp_top) goto fail;
    }
    j->spec_set = p->spec_set;
    j->spec = p->spec;
    j->sp = p->sampling;
    j->notify = p->notify;
    j->user = p->user;
    j->prompt = malloc((size_t)(p->n_prompt > 0 ? p->n_prompt : 1) * sizeof *j->prompt);
    j->ch = calloc((size_t)p->n, sizeof *j->ch);
    j->bias = malloc((size_t)(p->sampling.n_logit_bias + 1) * sizeof *j->bias);
    j->stop = calloc((size_t)p->n_stop + 1, sizeof *j->stop);
    if (!j->prompt || !j->ch || !j->bias || !j->stop) goto fail;
    memcpy(j->prompt, p->prompt, (size_t)p->n_prompt * sizeof *j->prompt);
    j->gen_role = p->gen_role;
    if (p->roles) {
        if (!(j->roles = malloc((size_t)(p->n_prompt > 0 ? p->n_prompt : 1)))) goto fail;
        memcpy(j->roles, p->roles, (size_t)p->n_prompt);
    }
    if (p->sampling.n_logit_bias) memcpy(j->bias, p->sampling.logit_bias, (size_t)p->sampling.n_logit_bias * sizeof *j->bias);
    j->n_bias = p->sampling.n_logit_bias;
    j->sp.logit_bias = j->bias;
    j->sp.samplers = NULL;
    j->sp.dry_breakers = NULL;
    j->sp.n_dry_breakers = 0;
    for (int32_t k = 0; k < p->n_stop; k++) {
        if (!(j->stop[k] = strdup(p->stop[k]))) goto fail;
        j->n_stop++;
    }
    for (int32_t c = 0; c < j->n; c++) srv_stop_init(&j->ch[c].stop, j->stop, j->n_stop);
    return j;
fail:
    srv_job_unref(j);
    return NULL;
fail_early:
    if (j->cst)
        for (int32_t c = 0; c < p->n; c++) srv_constraint_free(j->cst[c]);
    free(j->cst);
    free(j->masks);
    free(j);
    return NULL;
}

void srv_job_ref(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void srv_events_free(srv_event *ev, int32_t n) {
    for (int32_t k = 0; k < n; k++) {
        free(ev[k].text);
        free(ev[k].top);
    }
    free(ev);
}

void srv_job_unref(srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    const int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) return;
    if (j->ch)
        for (int32_t c = 0; c < j->n; c++) {
            brisk_text_stream_free(j->ch[c].ts);
            srv_stop_free(&j->ch[c].stop);
            free(j->ch[c].top);
        }
    free(j->ch);
    srv_events_free(j->ev, j->n_ev);
    for (int32_t k = 0; k < j->n_stop; k++) free(j->stop[k]);
    free(j->stop);
    free(j->bias);
    free(j->prompt);
    free(j->roles);
    free(j->plp);
    free(j->plp_top);
    if (j->cst)
        for (int32_t c = 0; c < j->n; c++) srv_constraint_free(j->cst[c]);
    free(j->cst);
    free(j->masks);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

srv_event *srv_job_take(srv_job *j, int32_t *n_events, bool *done) {
    pthread_mutex_lock(&j->mu);
    srv_event *ev = j->ev;
    *n_events = j->n_ev;
    *done = j->n_finished == j->n && j->accounted;
    j->ev = NULL;
    j->n_ev = j->cap_ev = 0;
    pthread_mutex_unlock(&j->mu);
    return ev;
}

void srv_job_detach(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->notify = NULL;
    j->user = NULL;
    pthread_mutex_unlock(&j->mu);
}

void srv_job_usage(srv_job *j, int32_t *prompt, int32_t *cached, int32_t *completion) {
    pthread_mutex_lock(&j->mu);
    *prompt = j->n_prompt;
    *cached = j->cached;
    *completion = j->completion;
    pthread_mutex_unlock(&j->mu);
}

void srv_job_cost(srv_job *j, srv_cost *out) {
    pthread_mutex_lock(&j->mu);
    *out = j->cost;
    pthread_mutex_unlock(&j->mu);
}

bool srv_job_prompt_logprobs(srv_job *j, const float **lp, const srv_top **top, int32_t *k, int32_t *n) {
    pthread_mutex_lock(&j->mu);
    const bool have = j->prompt_logprobs && j->accounted;
    *lp = j->plp;
    *top = j->plp_top;
    *k = j->top_logprobs;
    *n = j->n_plp;
    pthread_mutex_unlock(&j->mu);
    return have;
}

bool srv_job_timed_out(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    const bool t = j->timed_out;
    pthread_mutex_unlock(&j->mu);
    return t;
}

void srv_job_error(srv_job *j, char *buf, size_t cap) {
    pthread_mutex_lock(&j->mu);
    snprintf(buf, cap, "%s", j->error);
    pthread_mutex_unlock(&j->mu);
}


/* Queue an event (takes text and top); under mu. false when out of memory. */
static bool push_event(srv_job *j, srv_event ev) {
    if (j->n_ev == j->cap_ev) {
        const int32_t cap = j->cap_ev ? j->cap_ev * 2 : 16;
        srv_event *g = realloc(j->ev, (size_t)cap * sizeof *g);
        if (!g) {
            free(ev.text);
            free(ev.top);
            return false;
        }
        j->ev = g;
        j->cap_ev = cap;
    }
    j->ev[j->n_ev++] = ev;
    return true;
}

static void wake(srv_job *j) {
    /* under mu, so that srv_job_detach returning means no call is running */
    if (j->notify) j->notify(j->user);
}

/* A copy of text as valid UTF-8 (NULL for empty text). */
static char *event_text(const char *t, size_t n, size_t *len) {
    *len = 0;
    if (n == 0) return NULL;
    return srv_utf8_sanitize(t, n, len);
}

/* The choice ends (once): its held text, then the end event. Under mu. */
static void finish_locked(srv_job *j, int32_t c, srv_finish why) {
    job_choice *ch = &j->ch[c];
    if (ch->finish != SRV_FINISH_NONE) return;
    ch->finish = why;
    j->n_finished++;
    const char *t = "";
    size_t n = 0, len = 0;
    if (why == SRV_FINISH_STOP || why == SRV_FINISH_LENGTH) {
        const char *tail;
        size_t tail_n = 0;
        if (ch->ts) brisk_text_stream_flush(ch->ts, &tail, &tail_n);
        const char *o;
        size_t on = 0;
        if (tail_n) srv_stop_push(&ch->stop, tail, tail_n, &o, &on);
        if (on) push_event(j, (srv_event){.choice = c, .text = event_text(o, on, &len), .len = len, .token = -1});
        if (!ch->stop.hit) srv_stop_flush(&ch->stop, &t, &n);
    }
    char *text = event_text(t, n, &len);
    push_event(j, (srv_event){.choice = c, .text = text, .len = len, .finish = why, .token = -1,
                              .stop_word = why == SRV_FINISH_STOP && ch->stop.hit && ch->stop.which >= 0 ? j->stop[ch->stop.which] : NULL,
                              .eog = why == SRV_FINISH_STOP && !ch->stop.hit});
}

/* brisk_sched_logits_fn's shape: the logprobs of the token about to be delivered. */
static void job_on_logits(void *user, int64_t id, int32_t c, int32_t token, const float *logits, int32_t n_vocab) {
    (void)id;
    srv_job *j = user;
    if (!j->logprobs) return;
    job_choice *ch = &j->ch[c];
    float mx = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    ch->lp = (float)((double)logits[token] - mx - log(sum));
    free(ch->top);
    ch->top = NULL;
    ch->n_top = 0;
    if (j->top_logprobs > 0) {
        int32_t ids[32];
        float lps[32];
        const int32_t k = brisk_logprobs_top_k(logits, n_vocab, j->top_logprobs, ids, lps);
        if ((ch->top = malloc((size_t)(k > 0 ? k : 1) * sizeof *ch->top))) {
            for (int32_t i = 0; i < k; i++) ch->top[i] = (srv_top){ids[i], lps[i]};
            ch->n_top = k;
        }
    }
}

/* ---- the engine: brisk_sched on the inference thread ------------------------------------------- */

struct srv_engine {
    const brisk_model *model;
    brisk_context *ctx;
    int32_t n_vocab;
    int32_t *eog;            /* end-of-generation ids, banned under ignore_eos */
    int32_t n_eog;
    srv_engine_params p;
    brisk_sched *sched;      /* made and freed on the inference thread, which alone steps it */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t held;            /* jobs added and not finished (waiting + running) */
    bool draining, stop, ready;
    brisk_status init_status;
    brisk_error init_err;
    srv_job *unadmitted;     /* jobs added and not admitted yet, FIFO (under mu; each holds a reference) */
    srv_kv_op *kv_ops;       /* KV saves and restores waiting (under mu) */
    /* --batch-window (under mu): the scheduler had nothing running after its last step; the arrivals since */
    bool sched_idle;
    int32_t burst_n;
    double t_burst_first, t_burst_last;
    pthread_t thread;
    bool started;
};

/* brisk_sched_prompt_logits_fn's shape: prompt token pos + 1's logprob and alternatives. */
static void job_on_prompt_logits(void *user, int64_t id, int32_t pos, int32_t next, const float *logits, int32_t n_vocab) {
    (void)id;
    srv_job *j = user;
    float mx = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    j->plp[pos] = (float)((double)logits[next] - mx - log(sum));
    if (j->top_logprobs > 0) {
        int32_t ids[32];
        float lps[32];
        const int32_t k = brisk_logprobs_top_k(logits, n_vocab, j->top_logprobs, ids, lps);
        for (int32_t i = 0; i < j->top_logprobs; i++)
            j->plp_top[(size_t)pos * (size_t)j->top_logprobs + (size_t)i] = i < k ? (srv_top){ids[i], lps[i]} : (srv_top){-1, 0};
    }
    j->n_plp = pos + 1;
}

/* brisk_sched_token_fn's shape, with srv's reasons. Returns true when the
 * choice is finished on the job's side (a stop string, end of generation). */
static bool job_on_token(srv_engine *e, srv_job *j, int32_t c, int32_t token, srv_finish finish) {
    job_choice *ch = &j->ch[c];
    pthread_mutex_lock(&j->mu);
    bool done = ch->finish != SRV_FINISH_NONE;
    if (done) goto out;   /* it ended on our side (a stop string): the rest is dropped */
    if (finish != SRV_FINISH_NONE) {
        finish_locked(j, c, finish);
        if (finish == SRV_FINISH_ERROR && !j->error[0]) snprintf(j->error, sizeof j->error, "the forward pass failed");
        done = true;
        goto out;
    }
    if (j->n_cap == 0) {
        /* echo with max_tokens 0: the prompt was the point; the one token the scheduler samples is dropped */
        finish_locked(j, c, SRV_FINISH_LENGTH);
        done = true;
        goto out;
    }
    ch->n_gen++;
    j->completion++;
    const double now = brisk_time_now();
    if (j->t_first == 0) {
        j->t_first = now;
        srv_metrics_ttft(e->p.metrics, now - j->t_submit);
    } else if (ch->t_last > 0) {
        srv_metrics_itl(e->p.metrics, now - ch->t_last);
    }
    ch->t_last = now;
    if (!j->ignore_eos && brisk_token_is_eog(j->model, token)) {
        finish_locked(j, c, SRV_FINISH_STOP);
        done = true;
        goto out;
    }
    const char *piece = "";
    size_t plen = 0;
    if (!ch->ts && brisk_text_stream_init(j->model, &ch->ts, NULL)) ch->ts = NULL;
    if (ch->ts && brisk_text_stream_push(ch->ts, token, &piece, &plen, NULL)) plen = 0;
    const char *o = "";
    size_t on = 0, len = 0;
    if (plen) srv_stop_push(&ch->stop, piece, plen, &o, &on);
    srv_event ev = {.choice = c, .text = event_text(o, on, &len), .len = len, .token = token, .logprob = ch->lp,
                    .top = ch->top, .n_top = ch->n_top};
    ch->top = NULL;
    ch->n_top = 0;
    push_event(j, ev);
    if (ch->stop.hit) {
        finish_locked(j, c, SRV_FINISH_STOP);
        done = true;
    } else if (ch->n_gen >= j->n_cap) {
        finish_locked(j, c, SRV_FINISH_LENGTH);
        done = true;
    }
out:
    wake(j);
    pthread_mutex_unlock(&j->mu);
    return done;
}

static srv_finish finish_of(brisk_finish f) {
    switch (f) {
    case BRISK_FINISH_EOG: return SRV_FINISH_STOP;
    case BRISK_FINISH_LENGTH: return SRV_FINISH_LENGTH;
    case BRISK_FINISH_CONTEXT_FULL: return SRV_FINISH_LENGTH;   /* the pool cannot hold more of it: it ends as a full context */
    case BRISK_FINISH_CANCELLED: return SRV_FINISH_CANCELLED;
    default: return SRV_FINISH_ERROR;
    }
}

/* The request's finish reason for the metrics: cancelled or error when any
 * choice was, else length when any choice ran out of room, else stop. */
static const char *job_finish_reason(const srv_job *j) {
    bool length = false, error = false, cancelled = false;
    for (int32_t c = 0; c < j->n; c++) {
        length |= j->ch[c].finish == SRV_FINISH_LENGTH;
        error |= j->ch[c].finish == SRV_FINISH_ERROR;
        cancelled |= j->ch[c].finish == SRV_FINISH_CANCELLED;
    }
    return cancelled ? "cancelled" : error ? "error" : length ? "length" : "stop";
}

/* The job's last scheduler callback: its usage and cost are final. */
static void job_account(srv_engine *e, srv_job *j, int64_t id) {
    brisk_sched_request_info in;
    memset(&in, 0, sizeof in);
    const bool have = brisk_sched_request_info_get(e->sched, id, &in);
    const double now = brisk_time_now();
    pthread_mutex_lock(&j->mu);
    srv_cost *k = &j->cost;
    if (have) {
        j->cached = in.n_prompt_cached;
        k->queue_ms = in.t_admitted > 0 ? (in.t_admitted - in.t_added) * 1e3 : (now - in.t_added) * 1e3;
        k->prefill_ms = in.t_first_token > 0 ? (in.t_first_token - in.t_admitted) * 1e3 : in.t_admitted > 0 ? (now - in.t_admitted) * 1e3 : 0;
        k->decode_ms = in.t_first_token > 0 ? (now - in.t_first_token) * 1e3 : 0;
        k->flops = (int64_t)in.flops;
        k->bytes_read = (int64_t)in.bytes_read;
        k->energy_j = in.flops * SRV_JOULES_PER_FLOP + in.bytes_read * SRV_JOULES_PER_BYTE;
        k->recomputed = in.n_recomputed;
        k->sampled = in.n_generated;
        k->preemptions = in.n_preemptions;
        k->drafted = in.n_drafted;
        k->accepted = in.n_accepted;
    }
    k->cached_tokens = j->cached;
    srv_request_stats st = {
        .prompt = j->n_prompt, .cached = j->cached, .completion = j->completion, .recomputed = k->recomputed,
        .preemptions = k->preemptions, .drafted = k->drafted, .accepted = k->accepted, .finish = job_finish_reason(j),
        .queue_s = k->queue_ms * 1e-3, .prefill_s = j->t_first > 0 ? k->prefill_ms * 1e-3 : -1, .decode_s = k->decode_ms * 1e-3,
        .e2e_s = now - j->t_submit, .flops = k->flops, .bytes_read = k->bytes_read, .energy_j = k->energy_j,
    };
    j->accounted = true;   /* srv_job_take may now say done */
    wake(j);
    pthread_mutex_unlock(&j->mu);
    srv_metrics_request(e->p.metrics, &st);
}

/* the scheduler's token callback (inference thread) */
static void sched_on_token(void *user, int64_t id, int32_t c, int32_t token, brisk_finish finish) {
    srv_job *j = user;
    srv_engine *e = j->engine;
    if (finish == BRISK_FINISH_NONE) {
        /* a choice that ended on our side (stop string, end of generation, its cap) stops computing */
        if (job_on_token(e, j, c, token, SRV_FINISH_NONE) && !j->ch[c].cancel_sent) {
            j->ch[c].cancel_sent = true;
            brisk_sched_cancel_choice(e->sched, id, c);
        }
        return;
    }
    if (finish == BRISK_FINISH_ERROR) {
        pthread_mutex_lock(&j->mu);
        if (!j->error[0]) snprintf(j->error, sizeof j->error, "the forward pass failed (non-finite logits?)");
        pthread_mutex_unlock(&j->mu);
    }
    job_on_token(e, j, c, -1, finish_of(finish));
    if (++j->sched_done == j->n) {
        job_account(e, j, id);
        pthread_mutex_lock(&e->mu);
        e->held--;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        srv_job_unref(j);   /* the scheduler's reference */
    }
}

/* After a step: jobs admitted leave the list; one that waited longer than
 * the queue timeout is cancelled (the HTTP side answers 503 queue_timeout). */
static void check_queue(srv_engine *e) {
    const double now = brisk_time_now();
    pthread_mutex_lock(&e->mu);
    for (srv_job **pp = &e->unadmitted; *pp;) {
        srv_job *j = *pp;
        brisk_sched_request_info in;
        pthread_mutex_lock(&j->mu);
        const int64_t id = j->sched_id;
        pthread_mutex_unlock(&j->mu);
        const bool live = brisk_sched_request_info_get(e->sched, id, &in);
        bool drop = !live || in.t_admitted > 0;
        if (!drop && e->p.queue_timeout_s > 0 && now - in.t_added > e->p.queue_timeout_s) {
            pthread_mutex_lock(&j->mu);
            j->timed_out = true;
            snprintf(j->error, sizeof j->error, "the request waited more than %g s for a slot (--queue-timeout)", e->p.queue_timeout_s);
            pthread_mutex_unlock(&j->mu);
            brisk_sched_cancel(e->sched, id);
            drop = true;
        }
        if (drop) {
            *pp = j->next;
            srv_job_unref(j);
        } else {
            pp = &j->next;
        }
    }
    pthread_mutex_unlock(&e->mu);
}

static void run_kv_op(srv_engine *e, srv_kv_op *op) {
    const int32_t seq = brisk_sched_borrow_slot(e->sched);
    if (seq < 0) {
        op->status = brisk_fail(&op->err, BRISK_ERR_CAPACITY, "every slot is computing a request; retry when one frees");
        return;
    }
    if (op->save) {
        op->status = brisk_seq_sync(e->ctx, seq, op->ids, op->n_ids, &op->n_reused, &op->err);
        if (!op->status) op->status = brisk_seq_state_get(e->ctx, seq, NULL, NULL, 0, &op->bytes, &op->err) == BRISK_ERR_CAPACITY
                                          ? BRISK_OK : op->err.status;
        if (!op->status) op->status = brisk_seq_save(e->ctx, seq, NULL, op->path, &op->err);
    } else {
        op->status = brisk_seq_load(e->ctx, seq, NULL, op->path, &op->err);
    }
    op->n_tokens = brisk_seq_len(e->ctx, seq);
    brisk_sched_return_slot(e->sched, seq);   /* its full blocks stay in the prefix cache */
}

/* The KV operations waiting (inference thread, between steps). */
static void run_kv_ops(srv_engine *e) {
    pthread_mutex_lock(&e->mu);
    srv_kv_op *ops = e->kv_ops;
    e->kv_ops = NULL;
    pthread_mutex_unlock(&e->mu);
    for (srv_kv_op *op = ops, *next; op; op = next) {
        next = op->next;
        run_kv_op(e, op);
        pthread_mutex_lock(&e->mu);
        op->done = true;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
    }
}

brisk_status srv_engine_kv(srv_engine *e, srv_kv_op *op) {
    op->done = false;
    op->status = BRISK_OK;
    memset(&op->err, 0, sizeof op->err);
    pthread_mutex_lock(&e->mu);
    if (e->stop || e->draining) {
        pthread_mutex_unlock(&e->mu);
        return op->status = brisk_fail(&op->err, BRISK_ERR_CAPACITY, "the server is shutting down");
    }
    op->next = e->kv_ops;
    e->kv_ops = op;
    pthread_cond_broadcast(&e->cv);
    while (!op->done) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    return op->status;
}

/* --batch-window, under e->mu, with jobs held and nothing running: the first step waits for the rest of an
 * arrival burst (until no job has arrived for one window, at most SRV_BURST_WINDOWS windows after the first,
 * or at once when max_running jobs are held, since no more could start). The burst is then admitted and
 * prefilled in one step, its requests sample their first tokens together and decode in lockstep, so no
 * later prompt of the burst lands between two tokens of a stream (at a batch that holds the burst: -b). */
static void wait_for_burst(srv_engine *e) {
    const double w = e->p.batch_window_ms * 1e-3;
    for (;;) {
        if (e->stop || e->kv_ops || e->held >= e->p.max_running) break;
        const double until = fmin(e->t_burst_last + w, e->t_burst_first + SRV_BURST_WINDOWS * w);
        if (brisk_time_now() >= until) break;
        struct timespec ts;
        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
        pthread_cond_timedwait(&e->cv, &e->mu, &ts);   /* brisk_time_now's clock: the cv is CLOCK_MONOTONIC's */
    }
    srv_metrics_burst(e->p.metrics, e->held);
    e->sched_idle = false;
    e->burst_n = 0;
}

static void *engine_main(void *arg) {
    srv_engine *e = arg;
    brisk_sched_params sp = brisk_sched_default_params();
    sp.max_running = e->p.max_running;
    sp.max_stall = e->p.max_stall;
    sp.prefill_budget = e->p.prefill_budget;
    sp.draft = e->p.draft;
    sp.context_shift = e->p.context_shift;
    sp.shift_keep = e->p.shift_keep;
    sp.max_queue = e->p.max_running + e->p.max_queue + 1;   /* admission is ours: the scheduler never refuses */
    const brisk_status st = brisk_sched_init(&e->sched, e->ctx, &sp, &e->init_err);
    pthread_mutex_lock(&e->mu);
    e->init_status = st;
    e->ready = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (st) return NULL;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->stop && e->held == 0 && !e->kv_ops) pthread_cond_wait(&e->cv, &e->mu);
        if (e->stop) break;
        if (e->held > 0 && e->sched_idle && e->p.batch_window_ms > 0) {
            wait_for_burst(e);
            if (e->stop) break;
        }
        const bool idle = e->held == 0;
        pthread_mutex_unlock(&e->mu);
        run_kv_ops(e);
        if (idle) {
            pthread_mutex_lock(&e->mu);
            continue;
        }
        brisk_sched_info info;
        brisk_error err = {0};
        memset(&info, 0, sizeof info);
        if (brisk_sched_step(e->sched, &info, &err)) {
            fprintf(stderr, "brisk serve: scheduler: %s\n", err.msg[0] ? err.msg : brisk_status_str(err.status));
        } else {
            const srv_gauges g = {.running = info.n_running, .waiting = info.n_waiting, .kv_used = info.kv_blocks_used,
                                  .kv_cached = info.kv_blocks_cached, .kv_shared = info.kv_blocks_shared,
                                  .kv_free = info.kv_blocks_free};
            srv_metrics_gauges(e->p.metrics, &g);
        }
        check_queue(e);
        pthread_mutex_lock(&e->mu);
        /* nothing running: the next arrivals are a new burst (those during this step count from their arrival) */
        e->sched_idle = info.n_running == 0;
        if (!e->sched_idle) e->burst_n = 0;
        if (e->held == 0) {
            /* idle: the gauges say so */
            const srv_gauges g = {.kv_used = info.kv_blocks_used, .kv_cached = info.kv_blocks_cached,
                                  .kv_shared = info.kv_blocks_shared, .kv_free = info.kv_blocks_free};
            srv_metrics_gauges(e->p.metrics, &g);
        }
    }
    pthread_mutex_unlock(&e->mu);
    brisk_sched_free(e->sched);   /* every live job finishes CANCELLED through sched_on_token */
    e->sched = NULL;
    pthread_mutex_lock(&e->mu);
    for (srv_kv_op *op = e->kv_ops; op; op = op->next) {
        op->status = brisk_fail(&op->err, BRISK_ERR_CAPACITY, "the server is shutting down");
        op->done = true;
    }
    e->kv_ops = NULL;
    pthread_cond_broadcast(&e->cv);
    while (e->unadmitted) {
        srv_job *j = e->unadmitted;
        e->unadmitted = j->next;
        srv_job_unref(j);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

brisk_status srv_engine_init(srv_engine **out, const brisk_model *m, brisk_context *c, const srv_engine_params *p, brisk_error *err) {
    *out = NULL;
    srv_engine *e = calloc(1, sizeof *e);
    if (!e) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    e->model = m;
    e->ctx = c;
    e->p = *p;
    brisk_model_info info;
    brisk_model_get_info(m, &info);
    e->n_vocab = info.n_vocab;
    e->eog = malloc(sizeof *e->eog * 64);
    if (!e->eog) {
        free(e);
        return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    }
    for (int32_t id = 0; id < info.n_vocab && e->n_eog < 64; id++)
        if (brisk_token_is_eog(m, id)) e->eog[e->n_eog++] = id;
    pthread_mutex_init(&e->mu, NULL);
    /* the burst window's timed waits are on brisk_time_now's clock */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    e->sched_idle = true;
    if (pthread_create(&e->thread, NULL, engine_main, e)) {
        srv_engine_free(e);
        return brisk_fail(err, BRISK_ERR_NOMEM, "could not start the inference thread");
    }
    e->started = true;
    pthread_mutex_lock(&e->mu);
    while (!e->ready) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    if (e->init_status) {
        *err = e->init_err;
        pthread_join(e->thread, NULL);
        e->started = false;
        srv_engine_free(e);
        return err->status;
    }
    *out = e;
    return BRISK_OK;
}

void srv_engine_free(srv_engine *e) {
    if (!e) return;
    if (e->started) {
        pthread_mutex_lock(&e->mu);
        e->stop = true;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    while (e->unadmitted) {
        srv_job *j = e->unadmitted;
        e->unadmitted = j->next;
        srv_job_unref(j);
    }
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e->eog);
    free(e);
}

srv_admit srv_engine_submit(srv_engine *e, srv_job *j) {
    j->model = e->model;
    j->engine = e;
    if (j->ignore_eos && e->n_eog > 0) {
        brisk_logit_bias *g = realloc(j->bias, (size_t)(j->n_bias + e->n_eog) * sizeof *g);
        if (!g) return SRV_ADMIT_FULL;
        j->bias = g;
        for (int32_t k = 0; k < e->n_eog; k++) j->bias[j->n_bias++] = (brisk_logit_bias){e->eog[k], -INFINITY};
    }
    j->sp.logit_bias = j->bias;
    j->sp.n_logit_bias = j->n_bias;
    brisk_sched_request rq = brisk_sched_default_request();
    rq.prompt = j->prompt;
    rq.n_prompt = j->n_prompt;
    rq.roles = j->roles;
    rq.gen_role = j->gen_role;
    rq.sampling = j->sp;
    rq.max_tokens = j->n_cap > 0 ? j->n_cap : 1;
    rq.prompt_logits = j->prompt_logprobs;
    rq.on_prompt_logits = j->prompt_logprobs ? job_on_prompt_logits : NULL;
    rq.min_tokens = j->min_tokens;
    rq.n = j->n;
    rq.ignore_eog = j->ignore_eos;
    rq.spec = j->spec_set ? j->spec : (brisk_sched_spec)e->p.spec;
    rq.spec_draft_max = e->p.spec_draft_max;
    rq.on_token = sched_on_token;
    rq.on_logits = j->logprobs ? job_on_logits : NULL;
    rq.user = j;
    if (j->cst) {
        /* a choice without a constraint gets an empty mask (no fill: allows everything) */
        rq.masks = j->masks;
    }
    pthread_mutex_lock(&e->mu);
    srv_admit a = SRV_ADMIT_OK;
    if (e->draining || e->stop) a = SRV_ADMIT_DRAINING;
    else if (e->held >= e->p.max_running + e->p.max_queue) a = SRV_ADMIT_FULL;
    else {
        srv_job_ref(j);   /* the scheduler's, dropped when its last choice finishes */
        srv_job_ref(j);   /* the unadmitted list's */
        e->held++;
        j->next = NULL;
        j->t_submit = brisk_time_now();
        if (e->burst_n++ == 0) e->t_burst_first = j->t_submit;
        e->t_burst_last = j->t_submit;
        srv_job **pp = &e->unadmitted;
        while (*pp) pp = &(*pp)->next;
        *pp = j;
        int64_t id = 0;
        brisk_error err = {0};
        /* under mu, so the inference thread cannot finish the job before it is listed */
        if (brisk_sched_add(e->sched, &rq, &id, &err)) {
            *pp = NULL;
            e->held--;
            pthread_mutex_lock(&j->mu);
            j->refs -= 2;
            snprintf(j->error, sizeof j->error, "%s", err.msg);
            pthread_mutex_unlock(&j->mu);
            a = err.status == BRISK_ERR_CAPACITY ? SRV_ADMIT_FULL : SRV_ADMIT_INVALID;
        } else {
            pthread_mutex_lock(&j->mu);
            j->sched_id = id;
            pthread_mutex_unlock(&j->mu);
            pthread_cond_broadcast(&e->cv);
        }
    }
    pthread_mutex_unlock(&e->mu);
    if (a == SRV_ADMIT_FULL) srv_metrics_rejected(e->p.metrics, "queue_full");
    if (a == SRV_ADMIT_DRAINING) srv_metrics_rejected(e->p.metrics, "draining");
    return a;
}

void srv_engine_cancel(srv_engine *e, srv_job *j) {
    pthread_mutex_lock(&j->mu);
    const int64_t id = j->sched_id;
    j->cancel = true;
    pthread_mutex_unlock(&j->mu);
    if (e && id > 0) brisk_sched_cancel(e->sched, id);
}

void srv_engine_drain(srv_engine *e) {
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    pthread_mutex_unlock(&e->mu);
}

int32_t srv_engine_held(srv_engine *e) {
    pthread_mutex_lock(&e->mu);
    const int32_t h = e->held;
    pthread_mutex_unlock(&e->mu);
    return h;
}
