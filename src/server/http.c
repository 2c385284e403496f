/* http: the HTTP side of `brisk serve` on libmicrohttpd (server.h).
 *
 * Connections are event-driven (MHD's internal polling threads, a pool of
 * http_threads), so a slow client costs a socket, not a thread. A request's
 * life: the access handler collects the body (capped: 413), then on its last
 * call validates (request.c), renders the chat template, tokenizes, checks
 * the context, and submits a job to the engine (429 or 503 before any header
 * is sent). A streamed reply is a chunked response whose reader formats the
 * job's events as SSE; with nothing to send the connection is suspended, and
 * the job's notify (inference thread) or the ticker (at least once a second,
 * for a ": ping" that also finds dead clients) resumes it. A non-streamed
 * reply suspends the handler until the job is done; each ticker resume peeks
 * the socket, so a client that went away is noticed within a second. The
 * request-completed callback cancels a job whose client went away.
 *
 * Locks: a job's mutex may be held while taking http->mu (notify), never the
 * other way round. */
#include "server/engine.h"
#include "server/metrics.h"
#include "server/embed.h"
#include "server/request.h"
#include "server/response.h"
#include "server/server.h"
#include "server/tools.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* the web chat page (src/server/web/, compiled in by CMake: web_assets.c) */
extern const unsigned char srv_web_chat_html[], srv_web_chat_js[], srv_web_chat_css[];
extern const size_t srv_web_chat_html_len, srv_web_chat_js_len, srv_web_chat_css_len;

bool srv_available(void) { return true; }

typedef enum route {
    R_NONE, R_HEALTH, R_MODELS, R_PAGE, R_PAGE_JS, R_PAGE_CSS, R_CHAT, R_COMPLETIONS, R_TOKENIZE, R_DETOKENIZE, R_APPLY_TEMPLATE,
    R_METRICS, R_LLAMA_COMPLETION, R_KV_SAVE, R_KV_RESTORE, R_EMBEDDINGS
} route;

/* One TCP connection (MHD's socket context), for the header deadline: a
 * connection waiting for a request's headers longer than header_timeout_s
 * (since it opened, or since its last response) is shut down by the ticker.
 * Listed under srv->mu from MHD's STARTED to its CLOSED notification, which
 * MHD sends before it closes the socket, so a shutdown never hits a reused fd. */
typedef struct sock {
    int fd;
    double since;             /* when it began waiting for headers */
    bool in_request;          /* headers complete, request in progress */
    bool shut;
    struct sock *prev, *next;
} sock;

typedef struct http_srv http_srv;

typedef struct conn {
    http_srv *srv;
    struct MHD_Connection *mc;
    route r;
    bool is_post;
    /* the body */
    char *body;
    size_t body_len, body_cap;
    bool too_big;
    bool over_budget;         /* the server's body budget was spent: 503 at the end */
    size_t counted;           /* bytes of body counted in srv->body_bytes */
    /* the job */
    srv_job *job;
    srv_request req;
    bool have_req;
    srv_resp_meta meta;
    bool stream;
    srv_choice_acc *acc;      /* non-streamed: one per choice */
    int32_t n_acc;
    bool *started;            /* streamed: a choice's first chunk went out */
    bool stream_done;
    int32_t n_streamed;       /* /completion: tokens streamed so far */
    double quantum;           /* --stream-quantum in seconds, 0 = off (immutable once listed) */
    double next_tick;         /* with a quantum: when the next write is due (MHD thread, ticker reads under mu) */
    bool tools;               /* chat with tool_choice auto, required or named: the output is parsed for calls */
    struct tool_stream *ts;   /* streamed with tools: per choice, what was sent */
    int32_t *echo_ids;        /* echo: the prompt's tokens */
    int32_t n_echo_ids;
    /* pending output of a stream */
    char *out;
    size_t out_len, out_off, out_cap;
    /* under srv->mu */
    bool suspended, pending;
    double last_wake, last_send;
    bool listed;
    struct conn *prev, *next;
} conn;

struct http_srv {
    const srv_config *cfg;
    brisk_model *model;
    brisk_context *ctx;
    const brisk_template *tpl;
    srv_engine *engine;
    srv_limits lim;
    brisk_model_info info;
    char *bos, *eos;
    int64_t started;
    struct MHD_Daemon *d;
    pthread_mutex_t mu;
    pthread_mutex_t admit_mu; /* closing, and the engine's lifetime for submits */
    conn *conns;              /* connections with a job */
    bool ready;               /* the model is loaded and the engine runs (under mu): until then every request gets 503 */
    bool draining, closing;
    double t_start;           /* when srv_start bound the socket */
    int bound_port;
    bool ipv6;
    /* signals: blocked in every thread from srv_start on; one thread sigwaits for them */
    sigset_t sigs;
    pthread_t sig_thread;
    bool sig_on, sig_stop;    /* sig_stop (under mu): teardown wakes the thread to end it */
    bool sig_done;            /* the signal thread is past its sigwait, about to return (under mu) */
    int signal;               /* the signal received once ready (under mu), 0 = none yet */
    pthread_cond_t sig_cv;
    /* libmicrohttpd's log: a message repeated within 10 s is counted, not printed again (slowloris floods) */
    pthread_mutex_t log_mu;
    char log_last[256];
    double log_since;
    long log_repeats;
    long late_closed;         /* connections shut down by the header deadline, not yet logged (under mu) */
    double late_logged;       /* when they were last logged (ticker only) */
    size_t body_bytes, body_budget;   /* bodies buffered by all connections (under mu), and their cap */
    pthread_t ticker;
    bool ticker_on, ticker_stop;
    pthread_cond_t ticker_cv;
    srv_metrics *metrics;
    sock *socks;              /* open connections (under mu) */
    int kv_inflight;          /* KV operations using the engine (under admit_mu): closing waits for 0 */
    /* /v1/embeddings: a context of its own (one sequence, made on first use), so
     * embedding never touches the scheduler's sequences, KV pool or steps; one
     * request at a time (embed_mu), on the HTTP thread that asked */
    pthread_mutex_t embed_mu;
    brisk_context *embed_ctx;
};


/* A streamed choice's tool-call deltas so far: content bytes sent, calls announced, argument bytes sent. */
typedef struct tool_stream {
    size_t content_sent;
    int32_t started;
    size_t args_sent[SRV_MAX_TOOL_CALLS];
} tool_stream;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- responses ------------------------------------------------------------------------------ */

/* --cors-origins: the request's Origin when the list allows it (exact
 * match, or "*"), else NULL (no CORS headers: browsers refuse the answer). */
static const char *cors_origin(const http_srv *s, struct MHD_Connection *mc) {
    const char *list = s->cfg->cors_origins;
    if (!list) return NULL;
    const char *origin = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Origin");
    if (!origin || !*origin) return NULL;
    const size_t ol = strlen(origin);
    for (const char *p = list; *p;) {
        const char *q = strchr(p, ',');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        while (n && p[0] == ' ') p++, n--;
        while (n && p[n - 1] == ' ') n--;
        if ((n == 1 && p[0] == '*') || (n == ol && !memcmp(p, origin, n))) return origin;
        if (!q) break;
        p = q + 1;
    }
    return NULL;
}

static void add_cors(const http_srv *s, struct MHD_Connection *mc, struct MHD_Response *r) {
    const char *origin = cors_origin(s, mc);
    if (!origin) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Vary", "Origin");
}

static enum MHD_Result queue(const http_srv *s, struct MHD_Connection *mc, unsigned status, struct MHD_Response *r) {
    add_cors(s, mc, r);
    const enum MHD_Result ret = MHD_queue_response(mc, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_buf(const http_srv *s, struct MHD_Connection *mc, unsigned status, const char *type, const void *buf,
                                size_t len, const char *extra_name, const char *extra_value) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)buf, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (extra_name) MHD_add_response_header(r, extra_name, extra_value);
    return queue(s, mc, status, r);
}

static enum MHD_Result send_json(const http_srv *s, struct MHD_Connection *mc, unsigned status, json_t *o) {
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!t) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":\"out_of_memory\"}}";
        return send_buf(s, mc, 500, "application/json", oom, sizeof oom - 1, NULL, NULL);
    }
    const enum MHD_Result ret = send_buf(s, mc, status, "application/json", t, strlen(t), NULL, NULL);
    free(t);
    return ret;
}

static enum MHD_Result send_error(const http_srv *s, struct MHD_Connection *mc, const srv_error *e) {
    char *t = srv_error_json(e);
    if (!t) return MHD_NO;
    const enum MHD_Result ret = send_buf(s, mc, (unsigned)e->http, "application/json", t, strlen(t),
                                         e->http == 429 ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, "1");
    free(t);
    return ret;
}

static enum MHD_Result fail(const http_srv *s, struct MHD_Connection *mc, int http, const char *type, const char *code,
                            const char *param, const char *msg) {
    srv_error e;
    srv_error_set(&e, http, type, code, param, "%s", msg);
    return send_error(s, mc, &e);
}

/* While the model loads every request gets 503, in OpenAI's error shape with
 * llama-server's message (clients written for it wait on that text); /health
 * adds "status": "loading" beside it, as it says "draining" later. */
static enum MHD_Result send_loading(const http_srv *s, struct MHD_Connection *mc, bool health) {
    json_t *o = json_pack("{s:{s:s, s:s, s:n, s:s}}", "error", "message", "Loading model", "type", "unavailable_error", "param",
                          "code", "loading_model");
    if (o && health) json_object_set_new(o, "status", json_string("loading"));
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!t) return MHD_NO;
    const enum MHD_Result ret = send_buf(s, mc, 503, "application/json", t, strlen(t), MHD_HTTP_HEADER_RETRY_AFTER, "1");
    free(t);
    return ret;
}

static bool is_ready(http_srv *s) {
    pthread_mutex_lock(&s->mu);
    const bool ready = s->ready;
    pthread_mutex_unlock(&s->mu);
    return ready;
}

/* ---- the connection list, suspension ------------------------------------------------------------- */

static void list_add(http_srv *s, conn *c) {
    pthread_mutex_lock(&s->mu);
    c->next = s->conns;
    c->prev = NULL;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    c->listed = true;
    c->last_wake = c->last_send = now_s();
    pthread_mutex_unlock(&s->mu);
}

static void list_remove(http_srv *s, conn *c) {
    pthread_mutex_lock(&s->mu);
    if (c->listed) {
        if (c->prev) c->prev->next = c->next;
        else s->conns = c->next;
        if (c->next) c->next->prev = c->prev;
        c->listed = false;
    }
    pthread_mutex_unlock(&s->mu);
}

/* The job's notify (inference thread, under the job's mutex). */
static void on_job_event(void *user) {
    conn *c = user;
    http_srv *s = c->srv;
    struct MHD_Connection *mc = NULL;
    pthread_mutex_lock(&s->mu);
    c->pending = true;
    if (c->suspended && c->quantum == 0) {   /* a quantum stream waits for its tick (the ticker) */
        c->suspended = false;
        c->last_wake = now_s();
        mc = c->mc;
    }
    pthread_mutex_unlock(&s->mu);
    if (mc) MHD_resume_connection(mc);
}

/* Suspend unless an event came in since the caller last looked (then false:
 * look again). Called on the connection's MHD thread. */
static bool try_suspend(conn *c) {
    http_srv *s = c->srv;
    pthread_mutex_lock(&s->mu);
    if (c->pending) {
        c->pending = false;
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    c->suspended = true;
    pthread_mutex_unlock(&s->mu);
    /* a resume that lands before this call cancels it (MHD's resuming flag) */
    MHD_suspend_connection(c->mc);
    return true;
}

static void clear_pending(conn *c) {
    pthread_mutex_lock(&c->srv->mu);
    c->pending = false;
    pthread_mutex_unlock(&c->srv->mu);
}

/* MHD's connection notifications: open connections are listed for the header deadline. */
static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context, enum MHD_ConnectionNotificationCode code) {
    http_srv *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        sock *k = calloc(1, sizeof *k);
        if (!k || !ci) {
            free(k);
            *socket_context = NULL;
            return;
        }
        k->fd = ci->connect_fd;
        pthread_mutex_lock(&s->mu);
        k->since = now_s();
        k->next = s->socks;
        if (s->socks) s->socks->prev = k;
        s->socks = k;
        pthread_mutex_unlock(&s->mu);
        *socket_context = k;
        return;
    }
    sock *k = *socket_context;
    if (!k) return;
    pthread_mutex_lock(&s->mu);
    if (k->prev) k->prev->next = k->next;
    else s->socks = k->next;
    if (k->next) k->next->prev = k->prev;
    pthread_mutex_unlock(&s->mu);
    free(k);
    *socket_context = NULL;
}

/* in_request: the headers of a request are complete; false: its response is done. */
static void sock_mark(http_srv *s, struct MHD_Connection *mc, bool in_request) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    sock *k = ci ? ci->socket_context : NULL;
    if (!k) return;
    pthread_mutex_lock(&s->mu);
    k->in_request = in_request;
    k->since = now_s();
    pthread_mutex_unlock(&s->mu);
}

/* Every suspended connection idle for a second is resumed: streams write a
 * ping, waiting handlers peek at their socket. Connections whose headers are
 * late are shut down (MHD then closes them). */
static void *ticker_main(void *arg) {
    http_srv *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->ticker_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        /* with --stream-quantum, a tick's resume is late by a few ms at most */
        const double q8 = s->cfg->stream_quantum_ms / 8;
        const double period = s->cfg->stream_quantum_ms > 0 && q8 < 200.0 ? q8 : 200.0;
        ts.tv_nsec += (long)(period * 1e6);
        if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
        pthread_cond_timedwait(&s->ticker_cv, &s->mu, &ts);
        const double t = now_s();
        struct MHD_Connection *wake[1024];
        int n = 0;
        for (conn *c = s->conns; c && n < 1024; c = c->next)
            if (c->suspended && (t - c->last_wake >= 0.75 || s->closing || (c->quantum > 0 && t >= c->next_tick))) {
                c->suspended = false;
                c->last_wake = t;
                wake[n++] = c->mc;
            }
        for (sock *k = s->socks; k; k = k->next)
            if (!k->in_request && !k->shut && t - k->since > s->cfg->header_timeout_s) {
                k->shut = true;
                shutdown(k->fd, SHUT_RDWR);   /* under mu: MHD's CLOSED notification (taking mu) comes before its close() */
                s->late_closed++;
            }
        /* one line per 10 s at most, so a slowloris flood does not flood the log */
        long late = 0;
        if (s->late_closed && t - s->late_logged >= 10) {
            late = s->late_closed;
            s->late_closed = 0;
            s->late_logged = t;
        }
        pthread_mutex_unlock(&s->mu);
        for (int k = 0; k < n; k++) MHD_resume_connection(wake[k]);
        if (late)
            fprintf(stderr, "brisk serve: closed %ld connection%s whose request headers were not complete within %g s (--header-timeout)\n",
                    late, late == 1 ? "" : "s", s->cfg->header_timeout_s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Cancel c's job; the engine lives until closing is set under admit_mu. */
static void cancel(conn *c) {
    http_srv *s = c->srv;
    pthread_mutex_lock(&s->admit_mu);
    srv_engine_cancel(s->closing ? NULL : s->engine, c->job);
    pthread_mutex_unlock(&s->admit_mu);
}

/* true when the client has closed its end (a non-streamed request waiting). */
static bool client_gone(struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    char b;
    const ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* ---- streaming --------------------------------------------------------------------------------- */

static bool out_add(conn *c, const char *s, size_t n) {
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < c->out_len + n) cap *= 2;
        char *g = realloc(c->out, cap);
        if (!g) return false;
        c->out = g;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, s, n);
    c->out_len += n;
    return true;
}

static bool out_event(conn *c, json_t *o) {
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) return false;
    const bool ok = out_add(c, "data: ", 6) && out_add(c, s, strlen(s)) && out_add(c, "\n\n", 2);
    free(s);
    return ok;
}

static void llama_info(conn *c, srv_llama_info *li, srv_cost *cost) {
    int32_t p, cached, comp;
    srv_job_usage(c->job, &p, &cached, &comp);
    srv_job_cost(c->job, cost);
    *li = (srv_llama_info){.model = c->srv->cfg->alias, .prompt = c->req.prompt_text ? c->req.prompt_text : "", .n_prompt = p,
                           .n_cached = cached, .n_decoded = comp, .cost = cost};
}

static json_t *usage_of(conn *c) {
    int32_t p, cached, comp;
    srv_job_usage(c->job, &p, &cached, &comp);
    srv_cost cost;
    srv_job_cost(c->job, &cost);
    return srv_usage_json(p, cached, comp, &cost);
}

static void queue_timeout_error(conn *c, srv_error *e) {
    char msg[256];
    srv_job_error(c->job, msg, sizeof msg);
    srv_error_set(e, 503, "server_error", "queue_timeout", NULL, "%s", msg[0] ? msg : "the request waited too long for a slot");
}

/* One line per generation request on stderr: counts and times; the prompt
 * text only under --log-prompts. */
static void log_request(conn *c, int status) {
    http_srv *s = c->srv;
    int32_t p = 0, cached = 0, comp = 0;
    srv_cost cost = {0};
    if (c->job) {
        srv_job_usage(c->job, &p, &cached, &comp);
        srv_job_cost(c->job, &cost);
    }
    fprintf(stderr, "brisk serve: %s %s %d: prompt %d tokens (%d cached), %d generated, queue %.1f ms, prefill %.1f ms, decode %.1f ms\n",
            c->meta.id, c->req.kind == SRV_CHAT ? "chat" : "completion", status, p, cached, comp, cost.queue_ms, cost.prefill_ms,
            cost.decode_ms);
    if (s->cfg->log_prompts) {
        json_t *js = NULL;
        if (c->req.kind == SRV_CHAT && c->req.messages_json) js = json_loads(c->req.messages_json, 0, NULL);
        else if (c->req.prompt_text) js = json_stringn_nocheck(c->req.prompt_text, c->req.prompt_len);
        char *t = js ? json_dumps(js, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        json_decref(js);
        if (t) fprintf(stderr, "brisk serve: %s prompt: %s\n", c->meta.id, t);
        free(t);
    }
}

/* A streamed choice with tools: what its text so far says, sent as deltas (content, then each call's id and
 * name, then its arguments in pieces); at its end (finish set) the rest and the finish reason, "tool_calls"
 * when it called any. */
static bool tool_stream_emit(conn *c, int32_t ch, srv_finish finish) {
    srv_choice_acc *acc = &c->acc[ch];
    tool_stream *ts = &c->ts[ch];
    const char *text = acc->text ? acc->text : "";
    const bool final = finish != SRV_FINISH_NONE;
    srv_tool_parse tp;
    srv_tools_parse((srv_tool_format)c->srv->cfg->tool_format, text, acc->len, final, c->req.tool_names, c->req.n_tools, &tp);
    bool ok = true;
    const bool iu = c->req.include_usage;
    /* the role rides on the choice's first chunk */
#define ROLE(d) do { if (!c->started[ch]) { json_object_set_new((d), "role", json_string("assistant")); c->started[ch] = true; } } while (0)
    if (tp.content_len > ts->content_sent) {
        json_t *d = json_pack("{s:s%}", "content", text + ts->content_sent, tp.content_len - ts->content_sent);
        if (d) ROLE(d);
        ok = d && out_event(c, srv_delta_chunk_json(&c->meta, ch, d, NULL, iu));
        ts->content_sent = tp.content_len;
    }
    for (int32_t k = 0; ok && k < tp.n_calls; k++) {
        const srv_tool_call *tc = &tp.call[k];
        if (k == ts->started && tc->name_done) {
            char id[48];
            srv_tool_call_id((srv_tool_format)c->srv->cfg->tool_format, c->meta.id, ch, k, id);
            json_t *d = json_pack("{s:[{s:i, s:s, s:s, s:{s:s%, s:s}}]}", "tool_calls", "index", k, "id", id, "type", "function",
                                  "function", "name", text + tc->name_off, tc->name_len, "arguments", "");
            if (d) ROLE(d);
            ok = d && out_event(c, srv_delta_chunk_json(&c->meta, ch, d, NULL, iu));
            ts->started++;
        }
        if (ok && k < ts->started && tc->args_len > ts->args_sent[k]) {
            json_t *d = json_pack("{s:[{s:i, s:{s:s%}}]}", "tool_calls", "index", k, "function", "arguments",
                                  text + tc->args_off + ts->args_sent[k], tc->args_len - ts->args_sent[k]);
            ok = d && out_event(c, srv_delta_chunk_json(&c->meta, ch, d, NULL, iu));
            ts->args_sent[k] = tc->args_len;
        }
    }
#undef ROLE
    if (ok && final) {
        const char *why = tp.n_calls > 0 && finish == SRV_FINISH_STOP ? "tool_calls" : finish == SRV_FINISH_LENGTH ? "length" : "stop";
        json_t *d = json_object();
        if (d && !c->started[ch]) {
            json_object_set_new(d, "role", json_string("assistant"));
            json_object_set_new(d, "content", json_string(""));
            c->started[ch] = true;
        }
        ok = d && out_event(c, srv_delta_chunk_json(&c->meta, ch, d, why, iu));
    }
    return ok;
}

/* Format the job's new events; false on out of memory. */
static bool stream_pull(conn *c) {
    int32_t n = 0;
    bool done = false;
    srv_event *ev = srv_job_take(c->job, &n, &done);
    bool ok = true;
    for (int32_t k = 0; k < n && ok; k++) {
        srv_event *e = &ev[k];
        if (e->finish == SRV_FINISH_CANCELLED) continue;
        if (e->finish == SRV_FINISH_NONE && e->len == 0 && !c->req.logprobs) continue;   /* held text: nothing to send yet */
        if (e->finish == SRV_FINISH_ERROR) {
            char msg[256];
            srv_job_error(c->job, msg, sizeof msg);
            srv_error err;
            srv_error_set(&err, 500, "server_error", "inference_failed", NULL, "%s", msg[0] ? msg : "the forward pass failed");
            char *js = srv_error_json(&err);
            ok = js && out_add(c, "data: ", 6) && out_add(c, js, strlen(js)) && out_add(c, "\n\n", 2);
            free(js);
            continue;
        }
        if (c->tools) {
            ok = srv_choice_add(&c->acc[e->choice], SRV_CHAT, e, NULL, false) && tool_stream_emit(c, e->choice, e->finish);
            continue;
        }
        const bool first = !c->started[e->choice];
        c->started[e->choice] = true;
        if (c->req.kind == SRV_LLAMA) {
            /* llama-server's stream: one event per token; the end comes as the final object below */
            ok = srv_choice_add(&c->acc[0], SRV_LLAMA, e, NULL, false);
            if (e->token >= 0) c->n_streamed++;
            if (ok && (e->token >= 0 || e->len)) {
                srv_llama_info li = {.model = c->srv->cfg->alias, .n_decoded = c->n_streamed};
                int32_t p, cached, comp;
                srv_job_usage(c->job, &p, &cached, &comp);
                li.n_prompt = p;
                ok = out_event(c, srv_llama_chunk_json(&li, e, c->srv->model, c->req.logprobs));
            }
            continue;
        }
        ok = out_event(c, srv_chunk_json(&c->meta, e, first, c->req.include_usage, c->srv->model, c->req.logprobs));
    }
    srv_events_free(ev, n);
    if (ok && done && !c->stream_done && srv_job_timed_out(c->job)) {
        srv_error err;
        queue_timeout_error(c, &err);
        char *js = srv_error_json(&err);
        ok = js && out_add(c, "data: ", 6) && out_add(c, js, strlen(js)) && out_add(c, "\n\n", 2);
        free(js);
    }
    if (ok && done && !c->stream_done && c->req.kind == SRV_LLAMA) {
        log_request(c, 200);
        srv_llama_info li;
        srv_cost cost;
        llama_info(c, &li, &cost);
        ok = out_event(c, srv_llama_final_json(&li, &c->acc[0], true));
        c->stream_done = true;
    }
    if (ok && done && !c->stream_done) {
        log_request(c, 200);
        if (c->req.include_usage) {
            json_t *usage = usage_of(c);
            ok = out_event(c, srv_usage_chunk_json(&c->meta, usage));
            json_decref(usage);
        }
        ok = ok && out_add(c, "data: [DONE]\n\n", 14);
        c->stream_done = true;
    }
    return ok;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    conn *c = cls;
    for (;;) {
        if (c->out_off < c->out_len) {
            size_t n = c->out_len - c->out_off;
            if (n > max) n = max;
            memcpy(buf, c->out + c->out_off, n);
            c->out_off += n;
            if (c->out_off == c->out_len) c->out_off = c->out_len = 0;
            c->last_send = now_s();
            return (ssize_t)n;
        }
        if (c->stream_done) return MHD_CONTENT_READER_END_OF_STREAM;
        if (c->quantum > 0) {
            /* a fixed schedule: one write per tick, whatever is ready, padded to a multiple of
             * SRV_STREAM_PAD bytes with an SSE comment (a tick with nothing ready writes padding only) */
            const double t = now_s();
            pthread_mutex_lock(&c->srv->mu);
            const double due = c->next_tick;
            pthread_mutex_unlock(&c->srv->mu);
            if (t < due) {
                if (try_suspend(c)) return 0;
                continue;
            }
            clear_pending(c);
            if (!stream_pull(c)) return MHD_CONTENT_READER_END_WITH_ERROR;
            const size_t total = (c->out_len + 4 + SRV_STREAM_PAD - 1) / SRV_STREAM_PAD * SRV_STREAM_PAD;
            const size_t pad = total - c->out_len;
            char spaces[SRV_STREAM_PAD + 4];
            memset(spaces, ' ', sizeof spaces);
            spaces[0] = ':';
            spaces[pad - 2] = '\n';
            spaces[pad - 1] = '\n';
            if (!out_add(c, spaces, pad)) return MHD_CONTENT_READER_END_WITH_ERROR;
            pthread_mutex_lock(&c->srv->mu);
            c->next_tick = due + c->quantum > t ? due + c->quantum : t + c->quantum;
            pthread_mutex_unlock(&c->srv->mu);
            continue;
        }
        clear_pending(c);
        if (!stream_pull(c)) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (c->out_len) continue;
        if (now_s() - c->last_send >= 0.75) {
            if (!out_add(c, ": ping\n\n", 8)) return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        if (try_suspend(c)) return 0;
    }
}

/* ---- endpoints --------------------------------------------------------------------------------- */

static void meta_init(conn *c, srv_kind kind) {
    static const char hex[] = "0123456789abcdef";
    unsigned char rnd[12];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(rnd, 1, sizeof rnd, f) : 0;
    if (f) fclose(f);
    for (size_t k = got; k < sizeof rnd; k++) rnd[k] = (unsigned char)(rand() & 0xff);
    char *p = c->meta.id;
    p += sprintf(p, "%s", kind == SRV_CHAT ? "chatcmpl-" : "cmpl-");
    for (size_t k = 0; k < sizeof rnd; k++) {
        *p++ = hex[rnd[k] >> 4];
        *p++ = hex[rnd[k] & 15];
    }
    *p = 0;
    c->meta.kind = kind;
    c->meta.created = (int64_t)time(NULL);
    c->meta.model = c->srv->cfg->alias;
    c->meta.fingerprint = c->srv->cfg->fingerprint;
}

/* The chat prompt: the template rendered with the messages, tokenized with
 * its special tokens parsed, BOS added when the vocabulary wants one and the
 * template did not write it (as brisk chat does). */
static bool render_messages(http_srv *s, const srv_request *r, const char *messages_json, bool add_gen, char **text, size_t *len,
                            srv_error *e) {
    if (!s->tpl) {
        srv_error_set(e, 400, "invalid_request_error", "no_chat_template", "messages",
                      "this model has no chat template (tokenizer.chat_template); start the server with --chat-template FILE");
        return false;
    }
    json_t *vars = json_pack("{s:b, s:s, s:s}", "add_generation_prompt", add_gen, "bos_token", s->bos, "eos_token", s->eos);
    if (vars && r->tools_json) json_object_set_new(vars, "tools", json_loads(r->tools_json, 0, NULL));
    char *vs = vars ? json_dumps(vars, JSON_COMPACT) : NULL;
    json_decref(vars);
    if (!vs) {
        srv_error_set(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
        return false;
    }
    brisk_error err = {0};
    const brisk_status st = brisk_template_render(s->tpl, messages_json, vs, text, len, &err);
    free(vs);
    if (st) {
        srv_error_set(e, 400, "invalid_request_error", "template_error", "messages", "the chat template failed: %s", err.msg);
        return false;
    }
    return true;
}

static bool render(http_srv *s, const srv_request *r, char **text, size_t *len, srv_error *e) {
    return render_messages(s, r, r->messages_json, r->kind == SRV_CHAT ? 1 : r->add_generation_prompt, text, len, e);
}

static bool tokenize(http_srv *s, const char *text, size_t len, bool add_special, int32_t **ids, size_t *n, srv_error *e) {
    brisk_error err = {0};
    if (brisk_tokenize_text(s->model, text, len, add_special, true, ids, n, &err)) {
        srv_error_set(e, 400, "invalid_request_error", "tokenize_failed", NULL, "tokenizing the prompt failed: %s", err.msg);
        return false;
    }
    return true;
}

/* The rendering of messages_json (the generation prompt after it with add_gen) tokenized with its special
 * tokens parsed, and a BOS when the vocabulary wants one and the template did not write it (as brisk chat does). */
static bool chat_tokens(http_srv *s, const srv_request *r, const char *messages_json, bool add_gen, int32_t **ids, size_t *n, srv_error *e) {
    char *text = NULL;
    size_t len = 0;
    if (!render_messages(s, r, messages_json, add_gen, &text, &len, e)) return false;
    const bool ok = tokenize(s, text, len, false, ids, n, e);
    free(text);
    if (!ok) return false;
    const int32_t bos = brisk_token_bos(s->model);
    if (brisk_vocab_adds_bos(s->model) && bos >= 0 && (*n == 0 || (*ids)[0] != bos)) {
        int32_t *g = realloc(*ids, (*n + 1) * sizeof *g);
        if (!g) {
            free(*ids);
            *ids = NULL;
            srv_error_set(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
            return false;
        }
        *ids = g;
        memmove(g + 1, g, *n * sizeof *g);
        g[0] = bos;
        (*n)++;
    }
    return true;
}

static bool chat_prompt(http_srv *s, const srv_request *r, int32_t **ids, size_t *n, srv_error *e) {
    return chat_tokens(s, r, r->messages_json, true, ids, n, e);
}

/* --kv-pin: each chat prompt token's role (brisk_kv_role) by the message it renders, as brisk chat tags them:
 * message k's tokens lie between the renderings of the first k and k + 1 messages (a rendering that is not a
 * token prefix of the whole ends where they differ); the generation prompt is the reply's (assistant); roles
 * the engine does not know are left untagged. Renders the template once per message (the message count is
 * bounded by the request's limits). */
static bool chat_roles(http_srv *s, const srv_request *r, const int32_t *ids, size_t n_ids, uint8_t *role, srv_error *e) {
    memset(role, BRISK_ROLE_ASSISTANT, n_ids);
    json_t *msgs = json_loads(r->messages_json, 0, NULL);
    if (!json_is_array(msgs)) {
        json_decref(msgs);
        srv_error_set(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
        return false;
    }
    const size_t n_msg = json_array_size(msgs);
    size_t start = 0, last = 0;   /* tokens tagged so far; messages rendered so far */
    bool ok = true;
    for (size_t k = 1; ok && k <= n_msg; k++) {
        json_t *sub = json_array();
        for (size_t j = 0; sub && j < k; j++) json_array_append(sub, json_array_get(msgs, j));
        char *sub_json = sub ? json_dumps(sub, JSON_COMPACT) : NULL;
        json_decref(sub);
        int32_t *pre = NULL;
        size_t n_pre = 0;
        srv_error ignored;
        if (!sub_json) {
            srv_error_set(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
            ok = false;
            break;
        }
        /* a template may refuse a partial conversation (one that must end with a user message): those tokens
         * then go with the next rendering that works, untagged (never pinned) when it spans several messages */
        const bool rendered = chat_tokens(s, r, sub_json, false, &pre, &n_pre, &ignored);
        free(sub_json);
        if (!rendered) continue;
        size_t b = 0;
        while (b < n_pre && b < n_ids && pre[b] == ids[b]) b++;
        free(pre);
        const int rr = brisk_kv_role_parse(json_string_value(json_object_get(json_array_get(msgs, k - 1), "role")));
        const uint8_t tag = (uint8_t)(k == last + 1 && rr > 0 && rr <= BRISK_ROLE_TOOL ? rr : BRISK_ROLE_NONE);
        for (size_t i = start; i < b; i++) role[i] = tag;
        if (b > start) start = b;
        last = k;
    }
    json_decref(msgs);
    return ok;
}

static enum MHD_Result do_generate(conn *c) {
    http_srv *s = c->srv;
    srv_request *r = &c->req;
    srv_error e;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (r->kind == SRV_CHAT) {
        if (!chat_prompt(s, r, &ids, &n_ids, &e)) return send_error(c->srv, c->mc, &e);
    } else if (r->prompt_is_ids) {
        ids = r->prompt_ids;
        n_ids = (size_t)r->n_prompt_ids;
        r->prompt_ids = NULL;
    } else if (!tokenize(s, r->prompt_text, r->prompt_len, true, &ids, &n_ids, &e)) {
        return send_error(c->srv, c->mc, &e);
    }
    const int32_t n_ctx = s->cfg->n_ctx;
    if (n_ids == 0) {
        free(ids);
        return fail(c->srv, c->mc, 400, "invalid_request_error", "invalid_value", r->kind == SRV_CHAT ? "messages" : "prompt",
                    "the prompt is empty");
    }
    /* positions a request reaches without a context shift: -c, with --kv-policy the trained context */
    const int32_t limit = s->cfg->gen_limit > 0 ? s->cfg->gen_limit : n_ctx;
    if ((int64_t)n_ids > s->cfg->max_prompt_tokens || (int64_t)n_ids >= n_ctx || (!s->cfg->context_shift && (int64_t)n_ids >= limit)) {
        const int32_t most = BRISK_MIN(s->cfg->max_prompt_tokens, BRISK_MIN(n_ctx, s->cfg->context_shift ? n_ctx : limit) - 1);
        if (s->cfg->retention)
            srv_error_set(&e, 400, "invalid_request_error", "context_length_exceeded", r->kind == SRV_CHAT ? "messages" : "prompt",
                          "the prompt is %zu tokens; this server takes at most %d prompt tokens (-c %d; KV retention lets the "
                          "completion go past it)",
                          n_ids, most, n_ctx);
        else
            srv_error_set(&e, 400, "invalid_request_error", "context_length_exceeded", r->kind == SRV_CHAT ? "messages" : "prompt",
                          "the prompt is %zu tokens; this server takes at most %d prompt tokens and %d tokens in all (prompt + "
                          "completion), and leaves room for at least one generated token",
                          n_ids, most, n_ctx);
        free(ids);
        return send_error(c->srv, c->mc, &e);
    }
    /* with a retention policy generation goes past -c (the cache keeps the budget) up to the trained positions;
     * with --context-shift it goes on (renumbered), up to SRV_SHIFT_MAX_GEN tokens per choice */
    const int64_t room = s->cfg->context_shift ? SRV_SHIFT_MAX_GEN : limit - (int64_t)n_ids;
    /* not given: legacy completions 16 tokens (OpenAI's default), chat the rest of the context */
    int64_t want = r->max_tokens >= 0 ? r->max_tokens : r->kind == SRV_COMPLETION ? 16 : room;
    if (r->echo && r->stream) {
        free(ids);
        return fail(c->srv, c->mc, 400, "invalid_request_error", "unsupported_parameter", "echo", "'echo' is supported without 'stream' only");
    }
    if (r->kind == SRV_LLAMA && r->n > 1) {
        free(ids);
        return fail(c->srv, c->mc, 400, "invalid_request_error", "invalid_value", "n", "/completion makes one completion (n = 1); use /v1/completions for more");
    }
    const bool capped = want > room;
    if (capped) want = room;
    c->tools = r->kind == SRV_CHAT && r->tool_choice != SRV_TOOL_NONE;
    if (c->tools && s->cfg->tool_format == SRV_TOOLFMT_NONE) {
        free(ids);
        return fail(c->srv, c->mc, 400, "invalid_request_error", "unsupported_parameter", "tools",
                    "the chat template shows no tool-call format this server parses (Llama 3 JSON, <tool_call> or [TOOL_CALLS]); "
                    "send tool_choice \"none\", or start the server with --chat-template FILE of a template that has one");
    }
    if (r->spec_set && r->spec != BRISK_SCHED_SPEC_OFF && s->cfg->retention) {
        free(ids);
        return fail(c->srv, c->mc, 400, "invalid_request_error", "unsupported_parameter", "spec",
                    "speculative decoding is not available on a server with KV retention (--kv-policy, --context-shift): "
                    "send spec \"off\" or leave it out");
    }
    if (r->spec_set && r->spec == BRISK_SCHED_SPEC_DRAFT && !s->cfg->draft) {
        free(ids);
        return fail(c->srv, c->mc, 400, "invalid_request_error", "invalid_value", "spec",
                    "spec \"draft\" needs a draft model, and this server has none (start it with -md FILE)");
    }
    /* constrained output: one constraint per choice (each keeps its own parser state), compiled here so an
     * unsupported schema is a 400 before anything is queued */
    srv_constraint **cst = NULL;
    if (r->format != SRV_FORMAT_TEXT || r->tool_choice == SRV_TOOL_REQUIRED || r->tool_choice == SRV_TOOL_NAMED) {
        if (!(cst = calloc((size_t)r->n, sizeof *cst))) {
            free(ids);
            return fail(c->srv, c->mc, 500, "server_error", "out_of_memory", NULL, "out of memory");
        }
        for (int32_t i = 0; i < r->n; i++)
            if (!srv_constraint_new(&cst[i], s->model, r, r->tools_json, (srv_tool_format)s->cfg->tool_format, &e)) {
                for (int32_t k = 0; k < i; k++) srv_constraint_free(cst[k]);
                free(cst);
                free(ids);
                return send_error(c->srv, c->mc, &e);
            } else {
                srv_constraint_set_budget(cst[i], want);
            }
    }
    /* --kv-pin: a chat's tokens tagged by message (a completion's are "prompt", its output "generated") */
    uint8_t *roles = NULL;
    if (s->cfg->tag_roles && r->kind == SRV_CHAT && (!(roles = malloc(n_ids)) || !chat_roles(s, r, ids, n_ids, roles, &e))) {
        if (!roles) srv_error_set(&e, 500, "server_error", "out_of_memory", NULL, "out of memory");
        for (int32_t k = 0; cst && k < r->n; k++) srv_constraint_free(cst[k]);
        free(cst);
        free(roles);
        free(ids);
        return send_error(c->srv, c->mc, &e);
    }
    srv_job_params jp = {.roles = roles, .gen_role = roles ? BRISK_ROLE_ASSISTANT : 0, .constraints = cst,.prompt = ids, .n_prompt = (int32_t)n_ids, .n_cap = (int32_t)want, .cap_is_context = capped,
                         .n = r->n, .sampling = r->sampling, .ignore_eos = r->ignore_eos, .stop = r->stop,
                         .n_stop = r->n_stop, .logprobs = r->logprobs, .top_logprobs = r->top_logprobs,
                         .min_tokens = (int32_t)(r->min_tokens < want ? r->min_tokens : want), .spec_set = r->spec_set,
                         .prompt_logprobs = r->echo && r->logprobs,
                         .spec = r->spec, .notify = on_job_event, .user = c};
    c->job = srv_job_new(&jp);   /* it owns the constraints now */
    free(cst);
    free(roles);
    if (r->echo) {
        c->echo_ids = ids;   /* the echo names every prompt token */
        c->n_echo_ids = (int32_t)n_ids;
    } else {
        free(ids);
    }
    if (!c->job) return fail(c->srv, c->mc, 500, "server_error", "out_of_memory", NULL, "out of memory");
    c->stream = r->stream;
    c->n_acc = r->n;
    c->acc = calloc((size_t)r->n, sizeof *c->acc);
    c->started = calloc((size_t)r->n, sizeof *c->started);
    if (c->tools && c->stream) c->ts = calloc((size_t)r->n, sizeof *c->ts);
    if (!c->acc || !c->started || (c->tools && c->stream && !c->ts)) return fail(c->srv, c->mc, 500, "server_error", "out_of_memory", NULL, "out of memory");
    meta_init(c, r->kind);
    /* admission, before any header */
    /* admit_mu (not mu: a job's notify takes mu under the job's mutex) keeps
     * the engine alive until closing is set */
    pthread_mutex_lock(&s->admit_mu);
    const srv_admit a = s->closing ? SRV_ADMIT_DRAINING : srv_engine_submit(s->engine, c->job);
    pthread_mutex_unlock(&s->admit_mu);
    if (a == SRV_ADMIT_FULL)
        return fail(c->srv, c->mc, 429, "rate_limit_error", "queue_full", NULL,
                    "the server is busy: every running and queue slot is taken (--max-running, --max-queue); retry later");
    if (a == SRV_ADMIT_DRAINING)
        return fail(c->srv, c->mc, 503, "server_error", "draining", NULL, "the server is shutting down");
    if (a == SRV_ADMIT_INVALID) {
        char msg[512];
        srv_job_error(c->job, msg, sizeof msg);
        return fail(c->srv, c->mc, 400, "invalid_request_error", "invalid_value", NULL, msg);
    }
    if (c->stream && s->cfg->stream_quantum_ms > 0) {
        c->quantum = s->cfg->stream_quantum_ms * 1e-3;
        c->next_tick = now_s() + c->quantum;
    }
    list_add(s, c);
    if (c->stream) {
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, c, NULL);
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        return queue(s, c->mc, 200, resp);
    }
    try_suspend(c);   /* the handler runs again when the job has news */
    return MHD_YES;
}

/* echo: the prompt's text (as given, or its tokens detokenized) and, with
 * logprobs, its tokens' logprobs before every choice's own. */
static bool echo(conn *c) {
    char *text = NULL;
    size_t len = 0;
    if (c->req.prompt_text) {
        text = srv_utf8_sanitize(c->req.prompt_text, c->req.prompt_len, &len);
    } else {
        brisk_text_stream *ts = NULL;
        if (brisk_text_stream_init(c->srv->model, &ts, NULL)) return false;
        size_t cap = 256;
        char *raw = malloc(cap);
        bool ok = raw != NULL;
        for (int32_t k = 0; ok && k <= c->n_echo_ids; k++) {
            const char *p;
            size_t n = 0;
            if (k < c->n_echo_ids) ok = brisk_text_stream_push(ts, c->echo_ids[k], &p, &n, NULL) == BRISK_OK;
            else brisk_text_stream_flush(ts, &p, &n);
            if (ok && len + n > cap) {
                while (cap < len + n) cap *= 2;
                char *g = realloc(raw, cap);
                if (!g) ok = false;
                else raw = g;
            }
            if (ok) {
                memcpy(raw + len, p, n);
                len += n;
            }
        }
        brisk_text_stream_free(ts);
        size_t sl = 0;
        text = ok ? srv_utf8_sanitize(raw, len, &sl) : NULL;
        len = sl;
        free(raw);
    }
    if (!text) return false;
    const float *lp = NULL;
    const srv_top *top = NULL;
    int32_t k = 0, n = 0;
    const bool have = srv_job_prompt_logprobs(c->job, &lp, &top, &k, &n);
    bool ok = true;
    for (int32_t i = 0; ok && i < c->req.n; i++)
        ok = srv_choice_echo(&c->acc[i], c->srv->model, text, len, c->echo_ids, c->n_echo_ids, have ? lp : NULL, top, k);
    free(text);
    return ok;
}

/* Tools, non-streamed: each choice's text parsed into content and message.tool_calls (finish reason
 * "tool_calls" when it called any and ended by itself). */
static bool apply_tool_calls(conn *c, json_t *o) {
    json_t *choices = json_object_get(o, "choices");
    for (int32_t i = 0; i < c->req.n; i++) {
        const srv_choice_acc *acc = &c->acc[i];
        const char *text = acc->text ? acc->text : "";
        srv_tool_parse tp;
        srv_tools_parse((srv_tool_format)c->srv->cfg->tool_format, text, acc->len, true, c->req.tool_names, c->req.n_tools, &tp);
        if (tp.n_calls == 0) continue;
        json_t *ch = json_array_get(choices, (size_t)i);
        json_t *msg = json_object_get(ch, "message");
        json_t *calls = srv_tool_calls_json((srv_tool_format)c->srv->cfg->tool_format, c->meta.id, i, text, &tp);
        if (!calls) return false;
        json_object_set_new(msg, "content", tp.content_len ? json_stringn(text, tp.content_len) : json_null());
        json_object_set_new(msg, "tool_calls", calls);
        if (acc->finish == SRV_FINISH_STOP) json_object_set_new(ch, "finish_reason", json_string("tool_calls"));
    }
    return true;
}

/* A non-streamed job's handler, called again after a resume. */
static enum MHD_Result wait_generate(conn *c) {
    for (;;) {
        clear_pending(c);
        int32_t n = 0;
        bool done = false;
        srv_event *ev = srv_job_take(c->job, &n, &done);
        bool ok = true;
        for (int32_t k = 0; k < n && ok; k++) ok = srv_choice_add(&c->acc[ev[k].choice], c->req.kind, &ev[k], c->srv->model, c->req.logprobs);
        srv_events_free(ev, n);
        if (!ok) return fail(c->srv, c->mc, 500, "server_error", "out_of_memory", NULL, "out of memory");
        if (done && srv_job_timed_out(c->job)) {
            srv_error e;
            queue_timeout_error(c, &e);
            log_request(c, 503);
            return send_error(c->srv, c->mc, &e);
        }
        if (done) {
            log_request(c, 200);
            for (int32_t i = 0; i < c->req.n; i++)
                if (c->acc[i].finish == SRV_FINISH_ERROR) {
                    char msg[256];
                    srv_job_error(c->job, msg, sizeof msg);
                    return fail(c->srv, c->mc, 500, "server_error", "inference_failed", NULL, msg[0] ? msg : "the forward pass failed");
                }
            if (c->req.kind == SRV_LLAMA) {
                srv_llama_info li;
                srv_cost cost;
                llama_info(c, &li, &cost);
                return send_json(c->srv, c->mc, 200, srv_llama_final_json(&li, &c->acc[0], false));
            }
            if (c->req.echo && !echo(c)) return fail(c->srv, c->mc, 500, "server_error", "out_of_memory", NULL, "out of memory");
            json_t *usage = usage_of(c);
            json_t *o = srv_completion_json(&c->meta, c->acc, c->req.n, usage);
            json_decref(usage);
            if (o && c->tools && !apply_tool_calls(c, o)) {
                json_decref(o);
                o = NULL;
            }
            return send_json(c->srv, c->mc, 200, o);
        }
        if (client_gone(c->mc)) {
            cancel(c);
            return MHD_NO;
        }
        if (try_suspend(c)) return MHD_YES;
    }
}

/* POST /kv/save and /kv/restore (--kv-dir): the name was checked by the
 * parser (no path can leave the directory). The HTTP thread waits for the
 * inference thread to run the operation between steps. */
static enum MHD_Result do_kv(conn *c) {
    http_srv *s = c->srv;
    const srv_request *r = &c->req;
    if (!s->cfg->kv_dir)
        return fail(s, c->mc, 404, "invalid_request_error", "not_found", NULL,
                    "KV save and restore are off: start the server with --kv-dir DIR");
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.kvstate", s->cfg->kv_dir, r->kv_name);
    srv_error e;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    const bool save = r->kind == SRV_KV_SAVE;
    if (save) {
        if (r->prompt_is_ids) {
            n_ids = (size_t)r->n_prompt_ids;
            ids = malloc((n_ids ? n_ids : 1) * sizeof *ids);
            if (!ids) return fail(s, c->mc, 500, "server_error", "out_of_memory", NULL, "out of memory");
            memcpy(ids, r->prompt_ids, n_ids * sizeof *ids);
        } else if (!tokenize(s, r->prompt_text, r->prompt_len, true, &ids, &n_ids, &e)) {
            return send_error(s, c->mc, &e);
        }
        if (n_ids == 0 || (int64_t)n_ids > s->cfg->n_ctx) {
            free(ids);
            srv_error_set(&e, 400, "invalid_request_error", n_ids ? "context_length_exceeded" : "invalid_value", "prompt",
                          "the prompt is %zu tokens; a saved state holds 1 to %d (-c)", n_ids, s->cfg->n_ctx);
            return send_error(s, c->mc, &e);
        }
    }
    pthread_mutex_lock(&s->admit_mu);
    const bool open = !s->closing;
    if (open) s->kv_inflight++;
    pthread_mutex_unlock(&s->admit_mu);
    if (!open) {
        free(ids);
        return fail(s, c->mc, 503, "server_error", "draining", NULL, "the server is shutting down");
    }
    srv_kv_op op = {.save = save, .path = path, .ids = ids, .n_ids = (int32_t)n_ids};
    const brisk_status st = srv_engine_kv(s->engine, &op);
    pthread_mutex_lock(&s->admit_mu);
    s->kv_inflight--;
    pthread_mutex_unlock(&s->admit_mu);
    free(ids);
    if (st) {
        const int http = st == BRISK_ERR_IO ? (save ? 500 : 404) : st == BRISK_ERR_CAPACITY || st == BRISK_ERR_NOMEM ? 503 : 400;
        const char *code = st == BRISK_ERR_IO ? (save ? "io_error" : "not_found") : http == 503 ? "busy" : "invalid_state";
        srv_error_set(&e, http, http == 400 ? "invalid_request_error" : "server_error", code, "name", "%s %s: %s",
                      save ? "saving" : "restoring", r->kv_name, op.err.msg[0] ? op.err.msg : brisk_status_str(st));
        return send_error(s, c->mc, &e);
    }
    if (save)
        return send_json(s, c->mc, 200, json_pack("{s:s, s:i, s:i, s:I}", "name", r->kv_name, "tokens", op.n_tokens, "reused_tokens",
                                                   op.n_reused, "bytes", (json_int_t)op.bytes));
    return send_json(s, c->mc, 200, json_pack("{s:s, s:i}", "name", r->kv_name, "tokens", op.n_tokens));
}

static enum MHD_Result do_tokenize(conn *c) {
    http_srv *s = c->srv;
    srv_error e;
    int32_t *ids = NULL;
    size_t n = 0;
    if (!tokenize(s, c->req.prompt_text, c->req.prompt_len, c->req.add_special, &ids, &n, &e)) return send_error(c->srv, c->mc, &e);
    json_t *arr = json_array();
    for (size_t k = 0; arr && k < n; k++) {
        json_t *t;
        if (c->req.with_pieces) t = json_pack("{s:i, s:o}", "id", ids[k], "piece", srv_token_str(s->model, ids[k], NULL));
        else t = json_integer(ids[k]);
        if (!t || json_array_append_new(arr, t)) {
            json_decref(arr);
            arr = NULL;
        }
    }
    free(ids);
    if (!arr) return fail(c->srv, c->mc, 500, "server_error", "out_of_memory", NULL, "out of memory");
    return send_json(c->srv, c->mc, 200, json_pack("{s:o}", "tokens", arr));
}

static enum MHD_Result do_detokenize(conn *c) {
    brisk_text_stream *ts = NULL;
    if (brisk_text_stream_init(c->srv->model, &ts, NULL)) return fail(c->srv, c->mc, 500, "server_error", "out_of_memory", NULL, "out of memory");
    size_t cap = 256, len = 0;
    char *text = malloc(cap);
    bool ok = text != NULL;
    for (int32_t k = 0; ok && k <= c->req.n_tokens; k++) {
        const char *p;
        size_t n = 0;
        if (k < c->req.n_tokens) ok = brisk_text_stream_push(ts, c->req.tokens[k], &p, &n, NULL) == BRISK_OK;
        else brisk_text_stream_flush(ts, &p, &n);
        if (ok && len + n > cap) {
            while (cap < len + n) cap *= 2;
            char *g = realloc(text, cap);
            if (!g) ok = false;
            else text = g;
        }
        if (ok) {
            memcpy(text + len, p, n);
            len += n;
        }
    }
    brisk_text_stream_free(ts);
    size_t sl = 0;
    char *clean = ok ? srv_utf8_sanitize(text, len, &sl) : NULL;
    free(text);
    if (!clean) return fail(c->srv, c->mc, 500, "server_error", "out_of_memory", NULL, "out of memory");
    json_t *o = json_pack("{s:s%}", "content", clean, sl);
    free(clean);
    return send_json(c->srv, c->mc, 200, o);
}

static enum MHD_Result do_apply_template(conn *c) {
    srv_error e;
    char *text = NULL;
    size_t len = 0;
    if (!render(c->srv, &c->req, &text, &len, &e)) return send_error(c->srv, c->mc, &e);
    size_t sl = 0;
    char *clean = srv_utf8_sanitize(text, len, &sl);
    free(text);
    if (!clean) return fail(c->srv, c->mc, 500, "server_error", "out_of_memory", NULL, "out of memory");
    json_t *o = json_pack("{s:s%}", "prompt", clean, sl);
    free(clean);
    return send_json(c->srv, c->mc, 200, o);
}

/* ---- /v1/embeddings ----------------------------------------------------------------------------------- */

static void drop_body(conn *c) {
    http_srv *s = c->srv;
    free(c->body);
    c->body = NULL;
    c->body_len = c->body_cap = 0;
    pthread_mutex_lock(&s->mu);
    s->body_bytes -= c->counted;
    pthread_mutex_unlock(&s->mu);
    c->counted = 0;
}

/* Every input is tokenized and checked against the limit before anything is
 * computed, so a bad item fails the request without work. */
static enum MHD_Result do_embeddings(conn *c) {
    http_srv *s = c->srv;
    srv_error e;
    srv_embed_req q;
    const int32_t n_embd = s->info.n_embd;
    const bool parsed = srv_embed_parse((const uint8_t *)(c->body ? c->body : ""), c->body_len, s->info.n_vocab, n_embd, &q, &e);
    drop_body(c);
    if (!parsed) {
        srv_embed_req_free(&q);
        return send_error(s, c->mc, &e);
    }
    pthread_mutex_lock(&s->mu);
    const bool draining = s->draining || s->closing;
    pthread_mutex_unlock(&s->mu);
    const int32_t limit = s->cfg->max_prompt_tokens < s->cfg->n_ctx ? s->cfg->max_prompt_tokens : s->cfg->n_ctx;
    int64_t total = 0;
    bool ok = !draining;
    if (draining) srv_error_set(&e, 503, "server_error", "draining", NULL, "the server is shutting down");
    if (ok && s->cfg->embed_pooling < 0) {
        srv_error_set(&e, 501, "server_error", "not_supported", NULL, "this model's pooling_type is not supported for embeddings (mean, cls and last are)");
        ok = false;
    }
    for (int32_t k = 0; ok && k < q.n_in; k++) {
        srv_embed_input *in = &q.in[k];
        char param[64];
        if (q.single) snprintf(param, sizeof param, "input");
        else snprintf(param, sizeof param, "input[%d]", k);
        if (in->text) {
            size_t n = 0;
            if (!(ok = tokenize(s, in->text, in->text_len, true, &in->ids, &n, &e))) break;
            in->n_ids = (int32_t)n;
            if (n == 0) {
                srv_error_set(&e, 400, "invalid_request_error", "invalid_value", param, "'%s' has no tokens", param);
                ok = false;
                break;
            }
        }
        if (in->n_ids > limit) {
            srv_error_set(&e, 400, "invalid_request_error", "context_length_exceeded", param,
                          "'%s' is %d tokens; this server embeds at most %d tokens per input (-c / --max-prompt-tokens)", param,
                          in->n_ids, limit);
            ok = false;
        }
        total += in->n_ids;
    }
    json_t *data = ok ? json_array() : NULL;
    float *v = ok ? malloc((size_t)n_embd * sizeof *v) : NULL;
    if (ok && (!data || !v)) {
        srv_error_set(&e, 500, "server_error", "out_of_memory", NULL, "out of memory");
        ok = false;
    }
    if (ok) {
        pthread_mutex_lock(&s->embed_mu);
        brisk_error err = {0};
        if (!s->embed_ctx) {
            brisk_context_params cp = brisk_context_default_params();
            cp.n_ctx_seq = limit;
            cp.kv_tokens = limit;
            cp.n_seq = 1;
            cp.n_batch = brisk_context_n_batch(s->ctx);
            cp.n_outputs_max = srv_embed_rows(s->cfg->embed_pooling, cp.n_batch);
            cp.n_threads = s->cfg->embed_threads;
            if (brisk_context_init(s->model, &cp, &s->embed_ctx, &err)) {
                s->embed_ctx = NULL;
                srv_error_set(&e, 500, "server_error", "embedding_context", NULL, "cannot make the embedding context: %s", err.msg);
                ok = false;
            }
        }
        for (int32_t k = 0; ok && k < q.n_in; k++) {
            if (srv_embed_tokens(s->embed_ctx, n_embd, s->cfg->embed_pooling, q.in[k].ids, q.in[k].n_ids, v, &err)) {
                srv_error_set(&e, 500, "server_error", "embedding_failed", NULL, "input %d: %s", k, err.msg);
                ok = false;
                break;
            }
            json_t *item = srv_embed_item(k, v, n_embd, q.base64);
            if (!item || json_array_append_new(data, item)) {
                srv_error_set(&e, 500, "server_error", "out_of_memory", NULL, "out of memory");
                ok = false;
            }
        }
        pthread_mutex_unlock(&s->embed_mu);
    }
    free(v);
    srv_embed_req_free(&q);
    if (!ok) {
        json_decref(data);
        return send_error(s, c->mc, &e);
    }
    return send_json(s, c->mc, 200, json_pack("{s:s, s:o, s:s, s:{s:I, s:I}}", "object", "list", "data", data, "model", s->cfg->alias,
                                              "usage", "prompt_tokens", (json_int_t)total, "total_tokens", (json_int_t)total));
}

/* ---- the access handler ------------------------------------------------------------------------------ */

static route route_of(const char *url, bool *post) {
    static const struct { const char *path; route r; bool post; } routes[] = {
        {"/health", R_HEALTH, false}, {"/v1/health", R_HEALTH, false}, {"/v1/models", R_MODELS, false},
        {"/models", R_MODELS, false}, {"/", R_PAGE, false}, {"/index.html", R_PAGE, false},
        {"/chat.js", R_PAGE_JS, false}, {"/chat.css", R_PAGE_CSS, false},
        {"/v1/chat/completions", R_CHAT, true}, {"/chat/completions", R_CHAT, true},
        {"/v1/completions", R_COMPLETIONS, true}, {"/completions", R_COMPLETIONS, true},
        {"/tokenize", R_TOKENIZE, true}, {"/detokenize", R_DETOKENIZE, true}, {"/apply-template", R_APPLY_TEMPLATE, true},
        {"/metrics", R_METRICS, false}, {"/completion", R_LLAMA_COMPLETION, true},
        {"/kv/save", R_KV_SAVE, true}, {"/kv/restore", R_KV_RESTORE, true},
        {"/v1/embeddings", R_EMBEDDINGS, true}, {"/embeddings", R_EMBEDDINGS, true},
    };
    for (size_t k = 0; k < sizeof routes / sizeof routes[0]; k++)
        if (!strcmp(url, routes[k].path)) {
            *post = routes[k].post;
            return routes[k].r;
        }
    return R_NONE;
}

/* Constant-time in the key's length: every byte of the key is compared. */
static bool key_ok(const char *given, const char *key) {
    const size_t gl = strlen(given), kl = strlen(key);
    unsigned diff = (unsigned)(gl ^ kl);
    for (size_t i = 0; i < kl; i++) diff |= (unsigned char)(i < gl ? given[i] : 0) ^ (unsigned char)key[i];
    return diff == 0;
}

/* Every key is compared (no early exit), so the time does not tell which one nearly matched. */
static bool authorized(http_srv *s, struct MHD_Connection *mc) {
    if (s->cfg->n_api_keys == 0) return true;
    const char *auth = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *x = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "X-Api-Key");
    const char *given = auth && !strncasecmp(auth, "Bearer ", 7) ? auth + 7 : x;
    if (!given) return false;
    bool ok = false;
    for (int32_t k = 0; k < s->cfg->n_api_keys; k++) ok |= key_ok(given, s->cfg->api_keys[k]);
    return ok;
}

static enum MHD_Result get_route(conn *c) {
    http_srv *s = c->srv;
    switch (c->r) {
    case R_HEALTH:
        pthread_mutex_lock(&s->mu);
        const bool draining = s->draining;
        pthread_mutex_unlock(&s->mu);
        if (draining) return send_json(c->srv, c->mc, 503, json_pack("{s:s}", "status", "draining"));
        return send_json(c->srv, c->mc, 200, json_pack("{s:s}", "status", "ok"));
    case R_MODELS: return send_json(c->srv, c->mc, 200, srv_models_json(s->cfg->alias, s->started, s->cfg->n_ctx, &s->info));
    case R_METRICS: {
        size_t len = 0;
        char *text = srv_metrics_render(s->metrics, &len);
        if (!text) return fail(c->srv, c->mc, 500, "server_error", "out_of_memory", NULL, "out of memory");
        struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (!r) {
            free(text);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
        return queue(s, c->mc, 200, r);
    }
    case R_PAGE:
    case R_PAGE_JS:
    case R_PAGE_CSS: {
        const void *body = c->r == R_PAGE ? srv_web_chat_html : c->r == R_PAGE_JS ? srv_web_chat_js : srv_web_chat_css;
        const size_t len = c->r == R_PAGE ? srv_web_chat_html_len : c->r == R_PAGE_JS ? srv_web_chat_js_len : srv_web_chat_css_len;
        const char *type = c->r == R_PAGE ? "text/html; charset=utf-8"
                           : c->r == R_PAGE_JS ? "text/javascript; charset=utf-8" : "text/css; charset=utf-8";
        struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        MHD_add_response_header(r, "Content-Security-Policy", "default-src 'self'");
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
        return queue(s, c->mc, 200, r);
    }
    default: return MHD_NO;
    }
}

static enum MHD_Result post_route(conn *c) {
    http_srv *s = c->srv;
    if (c->r == R_EMBEDDINGS) return do_embeddings(c);
    static const srv_kind kinds[] = {[R_CHAT] = SRV_CHAT, [R_COMPLETIONS] = SRV_COMPLETION, [R_TOKENIZE] = SRV_TOKENIZE,
                                     [R_DETOKENIZE] = SRV_DETOKENIZE, [R_APPLY_TEMPLATE] = SRV_APPLY_TEMPLATE, [R_LLAMA_COMPLETION] = SRV_LLAMA,
                                     [R_KV_SAVE] = SRV_KV_SAVE, [R_KV_RESTORE] = SRV_KV_RESTORE};
    srv_error e;
    const bool parsed = srv_request_parse((const uint8_t *)(c->body ? c->body : ""), c->body_len, kinds[c->r], &s->lim,
                                          &s->cfg->sampling, &c->req, &e);
    /* the body is not needed past this point: give its memory and budget back */
    drop_body(c);
    if (!parsed) return send_error(c->srv, c->mc, &e);
    c->have_req = true;
    switch (c->r) {
    case R_CHAT:
    case R_COMPLETIONS:
    case R_LLAMA_COMPLETION: return do_generate(c);
    case R_TOKENIZE: return do_tokenize(c);
    case R_KV_SAVE:
    case R_KV_RESTORE: return do_kv(c);
    case R_DETOKENIZE: return do_detokenize(c);
    case R_APPLY_TEMPLATE: return do_apply_template(c);
    default: return MHD_NO;
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    http_srv *s = cls;
    conn *c = *con_cls;
    if (!c) {
        /* the first call: headers only; the header deadline is met */
        sock_mark(s, mc, true);
        if (!(c = calloc(1, sizeof *c))) return MHD_NO;
        c->srv = s;
        c->mc = mc;
        *con_cls = c;
        bool want_post = false;
        c->r = route_of(url, &want_post);
        c->is_post = !strcmp(method, MHD_HTTP_METHOD_POST);
        const bool is_get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
        if (c->r != R_NONE && !strcmp(method, "OPTIONS")) {
            /* a CORS preflight: allowed origins get the methods and headers a client sends */
            struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
            if (!r) return MHD_NO;
            MHD_add_response_header(r, "Allow", want_post ? "POST, OPTIONS" : "GET, HEAD, OPTIONS");
            if (cors_origin(s, mc)) {
                MHD_add_response_header(r, "Access-Control-Allow-Methods", want_post ? "POST, OPTIONS" : "GET, HEAD, OPTIONS");
                MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
                MHD_add_response_header(r, "Access-Control-Max-Age", "600");
            }
            return queue(s, mc, 204, r);
        }
        /* before anything reads the model, the engine or the alias: those are set before ready, under mu */
        if (!is_ready(s)) return send_loading(s, mc, c->r == R_HEALTH);
        if (c->r == R_NONE)
            return fail(s, mc, 404, "invalid_request_error", "not_found", NULL, "no such endpoint (see GET /v1/models, POST /v1/chat/completions, POST /v1/completions)");
        if ((want_post && !c->is_post) || (!want_post && !is_get))
            return fail(s, mc, 405, "invalid_request_error", "method_not_allowed", NULL, want_post ? "use POST" : "use GET");
        if (c->r != R_HEALTH && c->r != R_METRICS && c->r != R_PAGE && c->r != R_PAGE_JS && c->r != R_PAGE_CSS && !authorized(s, mc))
            return fail(s, mc, 401, "authentication_error", "invalid_api_key", NULL,
                        "a valid API key is required (Authorization: Bearer KEY or X-Api-Key: KEY)");
        if (c->is_post) {
            const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
            if (cl && strtoull(cl, NULL, 10) > s->cfg->max_body) {
                srv_error e;
                srv_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                              "the body is larger than this server's limit of %zu bytes (--max-body)", s->cfg->max_body);
                return send_error(s, mc, &e);
            }
            return MHD_YES;
        }
        /* answered at the next call, once MHD has the whole request: a response
         * queued with the headers alone makes it close the connection (no keep-alive) */
        return MHD_YES;
    }
    if (c->job) return c->stream ? MHD_YES : wait_generate(c);
    if (*upload_size) {
        const size_t n = *upload_size;
        *upload_size = 0;
        if (c->too_big || c->body_len + n > c->srv->cfg->max_body) {
            c->too_big = true;   /* read and dropped, answered at the end */
            return MHD_YES;
        }
        if (c->over_budget) return MHD_YES;
        if (c->body_len + n + 1 > c->body_cap) {
            size_t cap = c->body_cap ? c->body_cap : 4096;
            while (cap < c->body_len + n + 1) cap *= 2;
            /* all connections' bodies together stay under the budget, so many
             * large uploads at once cannot exhaust memory */
            pthread_mutex_lock(&s->mu);
            const bool fits = s->body_bytes - c->counted + cap <= s->body_budget;
            if (fits) {
                s->body_bytes += cap - c->counted;
                c->counted = cap;
            }
            pthread_mutex_unlock(&s->mu);
            if (!fits) {
                c->over_budget = true;
                return MHD_YES;
            }
            char *g = realloc(c->body, cap);
            if (!g) return MHD_NO;
            c->body = g;
            c->body_cap = cap;
        }
        memcpy(c->body + c->body_len, upload, n);
        c->body_len += n;
        return MHD_YES;
    }
    if (c->over_budget && !c->too_big) {
        srv_metrics_rejected(s->metrics, "busy");
        return fail(s, mc, 503, "server_error", "busy", NULL,
                    "the server is buffering too many request bodies at once; retry later");
    }
    if (c->too_big) {
        srv_error e;
        srv_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                      "the body is larger than this server's limit of %zu bytes (--max-body)", s->cfg->max_body);
        return send_error(s, mc, &e);
    }
    return c->is_post ? post_route(c) : get_route(c);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode why) {
    (void)mc;
    (void)why;
    http_srv *s = cls;
    sock_mark(s, mc, false);   /* the next request's headers are due within the deadline */
    conn *c = *con_cls;
    if (!c) return;
    *con_cls = NULL;
    if (c->job) {
        srv_job_detach(c->job);   /* no notify runs after this */
        int32_t n = 0;
        bool done = false;
        srv_events_free(srv_job_take(c->job, &n, &done), n);
        if (!done) cancel(c);   /* the client went away: free its slot */
        list_remove(s, c);
        srv_job_unref(c->job);
    }
    if (c->counted) {
        pthread_mutex_lock(&s->mu);
        s->body_bytes -= c->counted;
        pthread_mutex_unlock(&s->mu);
    }
    if (c->have_req) srv_request_free(&c->req);
    for (int32_t i = 0; c->acc && i < c->n_acc; i++) srv_choice_free(&c->acc[i]);
    free(c->acc);
    free(c->started);
    free(c->ts);
    free(c->echo_ids);
    free(c->out);
    free(c->body);
    free(c);
}

/* libmicrohttpd's messages; one repeated within 10 s (e.g. for each of 500
 * slowloris connections the header deadline closes) is counted instead. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    http_srv *s = cls;
    char msg[sizeof s->log_last];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const size_t n = strlen(msg);
    const bool nl = n && msg[n - 1] == '\n';
    const double t = now_s();
    pthread_mutex_lock(&s->log_mu);
    if (!strcmp(msg, s->log_last) && t - s->log_since < 10) {
        s->log_repeats++;
    } else {
        if (s->log_repeats)
            fprintf(stderr, "brisk serve: http: (the message before repeated %ld more time%s)\n", s->log_repeats, s->log_repeats == 1 ? "" : "s");
        fprintf(stderr, "brisk serve: http: %s%s", msg, nl ? "" : "\n");
        memcpy(s->log_last, msg, n + 1);
        s->log_since = t;
        s->log_repeats = 0;
    }
    pthread_mutex_unlock(&s->log_mu);
}

/* ---- run ------------------------------------------------------------------------------------- */

/* The one thread that takes SIGTERM and SIGINT (blocked in every other
 * thread from srv_start on, so the threads the loader and the engine start
 * inherit that). While the model loads a signal ends the process as it would
 * without a server, by its default action; once ready it starts the drain. */
static void *signal_main(void *arg) {
    http_srv *s = arg;
    int sig = 0;
    sigwait(&s->sigs, &sig);
    pthread_mutex_lock(&s->mu);
    const bool stop = s->sig_stop, loading = !s->ready;
    if (!stop && !loading) {
        s->signal = sig;
        pthread_cond_broadcast(&s->sig_cv);
    }
    if (stop || !loading) s->sig_done = true;
    pthread_mutex_unlock(&s->mu);
    if (!stop && loading) {
        fprintf(stderr, "brisk serve: %s while loading the model: exiting\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        signal(sig, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        pthread_sigmask(SIG_UNBLOCK, &one, NULL);
        raise(sig);
        _exit(128 + sig);   /* not reached: the default action of both is to terminate */
    }
    return NULL;
}

/* Everything srv_start and srv_serve made, in reverse: the listener closes here. */
static void teardown(http_srv *s) {
    if (s->sig_on) {
        pthread_mutex_lock(&s->mu);
        s->sig_stop = true;
        if (!s->sig_done) pthread_kill(s->sig_thread, SIGTERM);   /* under mu: it cannot have returned yet */
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->sig_thread, NULL);
    }
    if (s->ticker_on) {
        pthread_mutex_lock(&s->mu);
        s->ticker_stop = true;
        pthread_cond_broadcast(&s->ticker_cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->ticker, NULL);
    }
    if (s->d) {
        pthread_mutex_lock(&s->mu);
        struct MHD_Connection *wake[256];
        int n = 0;
        for (conn *c = s->conns; c && n < 256; c = c->next)
            if (c->suspended) {
                c->suspended = false;
                wake[n++] = c->mc;
            }
        pthread_mutex_unlock(&s->mu);
        for (int k = 0; k < n; k++) MHD_resume_connection(wake[k]);
        MHD_stop_daemon(s->d);
    }
    srv_engine_free(s->engine);
    brisk_context_free(s->embed_ctx);
    srv_metrics_free(s->metrics);
    free(s->bos);
    free(s->eos);
    pthread_mutex_lock(&s->log_mu);
    if (s->log_repeats)
        fprintf(stderr, "brisk serve: http: (the message before repeated %ld more time%s)\n", s->log_repeats, s->log_repeats == 1 ? "" : "s");
    pthread_mutex_unlock(&s->log_mu);
    pthread_cond_destroy(&s->ticker_cv);
    pthread_cond_destroy(&s->sig_cv);
    pthread_mutex_destroy(&s->admit_mu);
    pthread_mutex_destroy(&s->embed_mu);
    pthread_mutex_destroy(&s->log_mu);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int srv_start(const srv_config *cfg, srv_server **out) {
    *out = NULL;
    http_srv *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "brisk serve: out of memory\n");
        return 1;
    }
    s->cfg = cfg;
    s->body_budget = cfg->max_body * 16;   /* 128 MiB at the default --max-body */
    s->t_start = now_s();
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->admit_mu, NULL);
    pthread_mutex_init(&s->embed_mu, NULL);
    pthread_mutex_init(&s->log_mu, NULL);
    pthread_cond_init(&s->ticker_cv, NULL);
    pthread_cond_init(&s->sig_cv, NULL);
    /* signals go to the signal thread only; every thread started from here on inherits the mask */
    sigemptyset(&s->sigs);
    sigaddset(&s->sigs, SIGTERM);
    sigaddset(&s->sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &s->sigs, NULL);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    const int gai = getaddrinfo(cfg->host, port, &hints, &ai);
    if (gai) {
        fprintf(stderr, "brisk serve: --host %s: %s\n", cfg->host, gai_strerror(gai));
        goto fail;
    }
    if (!(s->metrics = srv_metrics_new())) {
        fprintf(stderr, "brisk serve: out of memory\n");
        goto fail;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    flags |= MHD_USE_AUTO;
    s->ipv6 = ai->ai_family == AF_INET6;
    if (s->ipv6) flags |= MHD_USE_IPv6;
    /* the logger first: options parsed before it would log through MHD's own */
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_THREAD_POOL_SIZE, cfg->http_threads,
                            MHD_OPTION_CONNECTION_LIMIT, cfg->conn_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->per_ip_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, cfg->timeout_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_END);
    if (!s->d) {
        fprintf(stderr, "brisk serve: cannot listen on %s:%d: %s\n", cfg->host, cfg->port, strerror(errno));
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->bound_port = di ? (int)di->port : cfg->port;
    freeaddrinfo(ai);
    ai = NULL;
    if (pthread_create(&s->ticker, NULL, ticker_main, s) == 0) s->ticker_on = true;
    if (pthread_create(&s->sig_thread, NULL, signal_main, s)) {
        fprintf(stderr, "brisk serve: cannot start a thread\n");
        goto fail;
    }
    s->sig_on = true;
    /* not "listening on": scripts wait for that line, printed once requests are served */
    fprintf(stderr, "brisk serve: bound to http://%s%s%s:%d; loading the model (every request gets 503 until it is ready)\n",
            s->ipv6 ? "[" : "", cfg->host, s->ipv6 ? "]" : "", s->bound_port);
    *out = s;
    return 0;
fail:
    if (ai) freeaddrinfo(ai);
    teardown(s);
    return 1;
}

void srv_abort(srv_server *s) {
    if (s) teardown(s);
}

static char *token_string(const brisk_model *m, int32_t id) {
    size_t len = 0;
    const char *t = id >= 0 ? brisk_token_text(m, id, &len) : NULL;
    size_t sl = 0;
    return srv_utf8_sanitize(t ? t : "", t ? len : 0, &sl);
}

int srv_serve(srv_server *s, brisk_model *model, brisk_context *ctx, const brisk_template *tpl) {
    const srv_config *cfg = s->cfg;
    s->model = model;
    s->ctx = ctx;
    s->tpl = tpl;
    brisk_model_get_info(model, &s->info);
    s->lim = srv_limits_default(s->info.n_vocab, cfg->max_running);
    s->started = (int64_t)time(NULL);
    s->bos = token_string(model, brisk_token_bos(model));
    s->eos = token_string(model, brisk_token_eos(model));
    brisk_error err = {0};
    srv_engine_params ep = {.max_running = cfg->max_running, .max_queue = cfg->max_queue, .spec = cfg->spec,
                            .queue_timeout_s = cfg->queue_timeout_s, .max_stall = cfg->max_stall, .metrics = s->metrics};
    ep.prefill_budget = cfg->prefill_budget;
    ep.batch_window_ms = cfg->batch_window_ms;
    ep.draft = cfg->draft;
    ep.spec_draft_max = cfg->spec_draft_max;
    ep.context_shift = cfg->context_shift;
    ep.shift_keep = cfg->shift_keep;
    if (srv_engine_init(&s->engine, model, ctx, &ep, &err)) {
        teardown(s);   /* the listener closes before the message */
        fprintf(stderr, "brisk serve: %s\n", err.msg);
        return 1;
    }
    /* everything the handlers read past the loading check is set above; taking mu publishes it */
    pthread_mutex_lock(&s->mu);
    s->ready = true;
    pthread_mutex_unlock(&s->mu);
    fprintf(stderr, "brisk serve: listening on http://%s%s%s:%d (model '%s', ready %.2f s after binding; SIGTERM or Ctrl-C drains and exits)\n",
            s->ipv6 ? "[" : "", cfg->host, s->ipv6 ? "]" : "", s->bound_port, cfg->alias, now_s() - s->t_start);
    pthread_mutex_lock(&s->mu);
    while (!s->signal) pthread_cond_wait(&s->sig_cv, &s->mu);
    const int sig = s->signal;
    pthread_mutex_unlock(&s->mu);
    fprintf(stderr, "brisk serve: %s: draining (new requests get 503)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    pthread_mutex_lock(&s->mu);
    s->draining = true;
    pthread_mutex_unlock(&s->mu);
    srv_engine_drain(s->engine);
    const double t0 = now_s();
    while (srv_engine_held(s->engine) > 0 && now_s() - t0 < cfg->drain_timeout_s) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&s->admit_mu);
    pthread_mutex_lock(&s->mu);
    s->closing = true;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&s->admit_mu);
    /* KV operations under way finish first (the inference thread still runs them) */
    for (;;) {
        pthread_mutex_lock(&s->admit_mu);
        const int inflight = s->kv_inflight;
        pthread_mutex_unlock(&s->admit_mu);
        if (inflight == 0) break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    srv_engine_free(s->engine);   /* whatever is left finishes cancelled */
    s->engine = NULL;
    /* let the streams write their ends, then resume whatever is still suspended */
    for (int k = 0; k < 100; k++) {
        pthread_mutex_lock(&s->mu);
        const bool empty = s->conns == NULL;
        pthread_mutex_unlock(&s->mu);
        if (empty) break;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    teardown(s);
    fprintf(stderr, "brisk serve: stopped\n");
    return 0;
}
