/* server: `brisk serve`, an OpenAI-compatible HTTP server (docs/SERVER.md).
 * cmd_serve.c binds first (srv_start: from then on every request gets 503
 * "Loading model"), then loads the model, plans memory and makes the context,
 * and hands them to srv_serve, which serves until SIGTERM or SIGINT, then
 * drains and returns; a load that fails calls srv_abort, which closes the
 * listener. The HTTP layer (http.c, on libmicrohttpd) is built only where
 * libmicrohttpd is found; srv_available says whether it was. */
#ifndef BRISK_SERVER_SERVER_H
#define BRISK_SERVER_SERVER_H

#include "brisk.h"
#include "template/template.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* srv_start reads the HTTP fields (host and port, keys, CORS, limits and
 * timeouts, threads); the model's fields (marked "model") may be filled in
 * while it loads, before srv_serve, because no request reads them until then. */
typedef struct srv_config {
    const char *host;          /* "127.0.0.1" */
    int port;                  /* 0 = any free port (the address printed says which) */
    const char *alias;         /* the model name in responses */
    const char *const *api_keys;   /* n_api_keys accepted keys (--api-key, --api-key-file); none = no key needed */
    int32_t n_api_keys;
    const char *cors_origins;  /* NULL = CORS off; "*" or a comma-separated list of origins */
    bool log_prompts;          /* the request log names prompt text (else counts only) */
    double queue_timeout_s;    /* a request not admitted within this gets 503 queue_timeout (0 = never) */
    double header_timeout_s;   /* a request's headers must be complete within this (slowloris) */
    int spec;                  /* brisk_sched_spec of requests that do not choose */
    double max_stall;          /* brisk_sched_params.max_stall (--max-stall) */
    int32_t prefill_budget;    /* brisk_sched_params.prefill_budget (--prefill-budget) */
    double batch_window_ms;    /* srv_engine_params.batch_window_ms (--batch-window) */
    int32_t spec_draft_max;    /* brisk_sched_request.spec_draft_max of every request (--draft-max; 0 = the scheduler's 8) */
    brisk_context *draft;      /* (model) the draft model's context (-md, brisk_sched_params.draft), NULL = none */
    const char *kv_dir;        /* NULL = no KV save/restore endpoints */
    double stream_quantum_ms;  /* > 0: streams write only every this many ms, padded to SRV_STREAM_PAD bytes */
    const char *fingerprint;   /* system_fingerprint (model) */
    size_t max_body;           /* request body bytes at most (413 beyond) */
    int32_t max_running, max_queue;
    int32_t n_ctx;             /* per-request context cap (prompt + generated) (model) */
    int32_t max_prompt_tokens; /* (model) */
    /* KV retention (docs/SERVER.md "Retention"): */
    bool retention;            /* (model) --kv-policy or --context-shift: requests cannot speculate */
    bool context_shift;        /* (model) --context-shift (brisk_sched_params.context_shift) */
    int32_t shift_keep;        /* (model) --kv-sink: the first slots a shift keeps */
    int32_t gen_limit;         /* (model) positions a request reaches without a shift: n_ctx, with --kv-policy the trained context */
    bool tag_roles;            /* (model) --kv-pin: chat prompts' tokens are tagged by their message's role */
    unsigned conn_limit, per_ip_limit;
    unsigned timeout_s;        /* idle connection timeout */
    unsigned http_threads;
    double drain_timeout_s;
    brisk_sampler_params sampling;   /* server-wide defaults a request overrides (model: set before srv_serve) */
    int embed_pooling;         /* srv_pooling (embed.h) of /v1/embeddings; -1 = not supported (model) */
    int32_t embed_threads;     /* threads of /v1/embeddings' context (0 = the library's default) */
    int tool_format;           /* srv_tool_format of the chat template (tools.h): how tool calls are written (model) */
} srv_config;

/* --context-shift: tokens one choice generates at most (its whole history is kept, so that a preempted request
 * is rebuilt on the same schedule); a request's max_tokens is capped to it, finish reason "length" */
#define SRV_SHIFT_MAX_GEN (1 << 20)

/* --stream-quantum: every write of a stream is a multiple of this many bytes */
#define SRV_STREAM_PAD 512

typedef struct http_srv srv_server;

bool srv_available(void);
/* Bind cfg->host:port and answer: until srv_serve every request gets 503
 * (/health: {"status": "loading", "error": {...}}). Blocks SIGTERM and SIGINT
 * in the calling thread (and so in every thread started after it); one of
 * them while loading ends the process by its default action. 0 and *out, or
 * 1 with a message on stderr. cfg is borrowed until srv_serve or srv_abort
 * returns. */
int srv_start(const srv_config *cfg, srv_server **out);
/* Serve until a signal, drain, close, free s: 0 after a clean drain, 1 when
 * the engine could not start (message on stderr, listener closed). model, ctx
 * and tpl (NULL = no chat template) are borrowed. */
int srv_serve(srv_server *s, brisk_model *model, brisk_context *ctx, const brisk_template *tpl);
/* The load failed: close the listener and free s (NULL: nothing). */
void srv_abort(srv_server *s);

#endif
