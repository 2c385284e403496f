/* cmd_serve: `brisk serve` — the OpenAI-compatible HTTP server (src/server/,
 * docs/SERVER.md). This file turns the flags into a context and a server
 * configuration: -c is each request's own cap (never divided by -np), the KV
 * pool (--kv-size) is shared by all requests and by default takes half the
 * memory left after the weights. The plan is printed before anything is
 * allocated, and a plan that does not fit is refused. */
#include "brisk.h"
#include "cli/cli.h"
#include "server/server.h"
#include "template/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef BRISK_GIT_COMMIT
#define BRISK_GIT_COMMIT "unknown"
#endif

#ifndef BRISK_HAVE_MHD
bool srv_available(void) { return false; }
int srv_run(const srv_config *cfg, brisk_model *model, brisk_context *ctx, const brisk_template *tpl) {
    (void)cfg, (void)model, (void)ctx, (void)tpl;
    return 1;
}
#endif

static const cli_use serve_uses[] = {
    {.id = CLI_O_HEADING, .heading = "model and memory"},
    {.id = CLI_O_MODEL}, {.id = CLI_O_ALIAS}, {.id = CLI_O_CHAT_TEMPLATE},
    {.id = CLI_O_CTX_SIZE, .def = "0",
     .help = "tokens per request (prompt + completion); 0 = the model's training context. Never divided by -np"},
    {.id = CLI_O_KV_SIZE}, {.id = CLI_O_BATCH}, {.id = CLI_O_THREADS},
    {.id = CLI_O_HEADING, .heading = "admission"},
    {.id = CLI_O_MAX_RUNNING}, {.id = CLI_O_MAX_QUEUE}, {.id = CLI_O_MAX_PROMPT_TOKENS}, {.id = CLI_O_MAX_BODY},
    {.id = CLI_O_HEADING, .heading = "HTTP"},
    {.id = CLI_O_HOST}, {.id = CLI_O_PORT}, {.id = CLI_O_API_KEY}, {.id = CLI_O_CONN_LIMIT}, {.id = CLI_O_PER_IP_LIMIT},
    {.id = CLI_O_TIMEOUT}, {.id = CLI_O_HTTP_THREADS}, {.id = CLI_O_DRAIN_TIMEOUT},
    {.id = CLI_O_HEADING, .heading = "sampling defaults (a request's own fields win)"},
    {.id = CLI_O_TEMP}, {.id = CLI_O_TOP_K}, {.id = CLI_O_TOP_P}, {.id = CLI_O_MIN_P}, {.id = CLI_O_REPEAT_PENALTY},
    {.id = CLI_O_REPEAT_LAST_N}, {.id = CLI_O_FREQ_PENALTY}, {.id = CLI_O_PRESENCE_PENALTY}, {.id = CLI_O_SEED},
    {.id = CLI_O_HEADING, .heading = "other"},
    {.id = CLI_O_MAX_INPUT, .help = "largest --chat-template file, in bytes (K, M, G suffixes)"},
    {.id = CLI_O_VERBOSE}, {.id = CLI_O_NGL},
    {.id = CLI_O_END},
};

static const cli_spec serve_spec = {
    .name = "serve",
    .usage = "-m MODEL [--host 127.0.0.1] [--port 8080] [-c N] [--kv-size N] [-np N] [options]",
    .about = "An OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions (streamed\n"
             "with stream: true), GET /v1/models, /health, POST /tokenize, /detokenize, /apply-template,\n"
             "and a web chat page at /. Binds 127.0.0.1 unless --host says otherwise. SIGTERM or Ctrl-C\n"
             "stops admission, lets running requests finish (--drain-timeout) and exits 0.\n",
    .uses = serve_uses,
    .epilog = "docs/SERVER.md describes the endpoints, their fields and errors.\n",
};

/* The default pool: half the memory left after the weights, scratch and
 * logits, at least one full request and at most one per running slot. */
static brisk_status default_kv(const brisk_model *m, brisk_context_params *cp, int32_t max_running, brisk_error *err) {
    brisk_memory_plan one;
    cp->kv_tokens = cp->n_ctx_seq;
    brisk_status st = brisk_context_plan(m, cp, &one, err);
    if (st) return st;
    const int64_t most = (int64_t)cp->n_ctx_seq * max_running;
    int64_t tokens = most;
    if (one.available > 0 && one.kv > 0) {
        const double per_token = (double)one.kv / cp->n_ctx_seq;
        const double left = (double)one.available - (double)one.weights - (double)one.scratch - (double)one.logits;
        tokens = left > 0 ? (int64_t)(left / 2 / per_token) : 0;
        tokens -= tokens % 32;
        if (tokens > most) tokens = most;
    }
    if (tokens < cp->n_ctx_seq) tokens = cp->n_ctx_seq;
    if (tokens > 2147483647 - 64) tokens = 2147483647 - 64;
    cp->kv_tokens = (int32_t)tokens;
    return BRISK_OK;
}

int brisk_cmd_serve(int argc, char **argv) {
    const char *C = "serve";
    cli_args a;
    int code;
    if (!cli_parse(&serve_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    int rc = CLI_EXIT_USAGE;
    brisk_model *model = NULL;
    brisk_context *ctx = NULL;
    brisk_template *tpl = NULL;
    uint8_t *tpl_file = NULL;
    char *alias = NULL;
    brisk_error err = {0};
    const char *model_path = a.s[CLI_O_MODEL];
    if (!model_path) {
        rc = cli_usage(C, "-m MODEL is required (see brisk serve --help)");
        goto out;
    }
    if (a.s[CLI_O_API_KEY] && !a.s[CLI_O_API_KEY][0]) {
        rc = cli_usage(C, "%s: an empty key", a.given[CLI_O_API_KEY]);
        goto out;
    }
    rc = CLI_EXIT_RUNTIME;
    if (!srv_available()) {
        fprintf(stderr, "brisk serve: this build has no HTTP server: libmicrohttpd was not found when it was configured.\n"
                        "Install it (Debian: apt-get install libmicrohttpd-dev, or scripts/bootstrap.sh) and run cmake again.\n");
        goto out;
    }
    cli_note_ngl(&a);
    if (brisk_model_load(model_path, &model, &err)) goto fail;
    size_t tpl_len = 0;
    const char *tpl_src = NULL;
    if (a.s[CLI_O_CHAT_TEMPLATE]) {
        if (cli_read_input(a.s[CLI_O_CHAT_TEMPLATE], a.given[CLI_O_CHAT_TEMPLATE], (size_t)a.i[CLI_O_MAX_INPUT], &tpl_file, &tpl_len, &err))
            goto fail;
        tpl_src = (const char *)tpl_file;
    } else {
        tpl_src = brisk_model_chat_template(model, &tpl_len);
    }
    if (tpl_src && brisk_template_parse(tpl_src, tpl_len, &tpl, &err)) {
        brisk_error_prefix(&err, "chat template");
        goto fail;
    }
    if (!tpl) fprintf(stderr, "brisk serve: note: %s has no chat template; /v1/chat/completions answers 400 until --chat-template FILE is given\n", model_path);
    brisk_model_info info;
    brisk_model_get_info(model, &info);
    const int32_t max_running = (int32_t)a.i[CLI_O_MAX_RUNNING];
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = (int32_t)cli_ctx_size(&a, info.n_ctx_train);
    cp.n_batch = (int32_t)a.i[CLI_O_BATCH];
    cp.n_threads = cli_threads(&a);
    cp.n_seq = max_running;
    if (a.set[CLI_O_KV_SIZE]) {
        if (a.i[CLI_O_KV_SIZE] < cp.n_ctx_seq) {
            fprintf(stderr, "brisk serve: %s %lld is smaller than one request (-c %d); raise it or lower -c\n", a.given[CLI_O_KV_SIZE],
                    (long long)a.i[CLI_O_KV_SIZE], cp.n_ctx_seq);
            goto out;
        }
        cp.kv_tokens = (int32_t)a.i[CLI_O_KV_SIZE];
    } else if (default_kv(model, &cp, max_running, &err)) {
        goto fail;
    }
    brisk_memory_plan plan;
    if (brisk_context_plan(model, &cp, &plan, &err)) goto fail;
    char buf[256];
    brisk_memory_plan_format(&plan, buf, sizeof buf);
    fprintf(stderr, "brisk serve: memory plan: %s\n", buf);
    fprintf(stderr, "brisk serve: KV pool %d tokens shared by all requests; each request up to %d tokens (-c); %d running, %lld queued at most\n",
            cp.kv_tokens, cp.n_ctx_seq, max_running, (long long)a.i[CLI_O_MAX_QUEUE]);
    if (brisk_memory_plan_check(&plan, 1, &err)) goto fail;
    if (brisk_context_init(model, &cp, &ctx, &err)) goto fail;

    const char *base = strrchr(model_path, '/');
    base = base ? base + 1 : model_path;
    if (!(alias = strdup(a.s[CLI_O_ALIAS] ? a.s[CLI_O_ALIAS] : base))) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto fail;
    }
    char fingerprint[128];
    snprintf(fingerprint, sizeof fingerprint, "brisk-%s-%s-%s", CLI_VERSION, BRISK_GIT_COMMIT, brisk_context_isa(ctx));
    srv_config cfg = {
        .host = a.s[CLI_O_HOST], .port = (int)a.i[CLI_O_PORT], .alias = alias, .api_key = a.s[CLI_O_API_KEY],
        .fingerprint = fingerprint, .max_body = (size_t)a.i[CLI_O_MAX_BODY], .max_running = max_running,
        .max_queue = (int32_t)a.i[CLI_O_MAX_QUEUE], .n_ctx = cp.n_ctx_seq,
        .max_prompt_tokens = a.set[CLI_O_MAX_PROMPT_TOKENS] ? (int32_t)a.i[CLI_O_MAX_PROMPT_TOKENS] : cp.n_ctx_seq,
        .conn_limit = (unsigned)a.i[CLI_O_CONN_LIMIT], .per_ip_limit = (unsigned)a.i[CLI_O_PER_IP_LIMIT],
        .timeout_s = (unsigned)a.i[CLI_O_TIMEOUT], .http_threads = (unsigned)a.i[CLI_O_HTTP_THREADS],
        .drain_timeout_s = a.f[CLI_O_DRAIN_TIMEOUT],
    };
    /* only the sampling flags serve takes; the rest keep the library's defaults */
    cfg.sampling = brisk_sampler_default_params();
    cfg.sampling.temp = (float)a.f[CLI_O_TEMP];
    cfg.sampling.top_k = (int32_t)a.i[CLI_O_TOP_K];
    cfg.sampling.top_p = (float)a.f[CLI_O_TOP_P];
    cfg.sampling.min_p = (float)a.f[CLI_O_MIN_P];
    cfg.sampling.repeat_penalty = (float)a.f[CLI_O_REPEAT_PENALTY];
    cfg.sampling.repeat_last_n = (int32_t)a.i[CLI_O_REPEAT_LAST_N];
    cfg.sampling.freq_penalty = (float)a.f[CLI_O_FREQ_PENALTY];
    cfg.sampling.presence_penalty = (float)a.f[CLI_O_PRESENCE_PENALTY];
    cfg.sampling.seed = a.u[CLI_O_SEED];
    rc = srv_run(&cfg, model, ctx, tpl) ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
    goto out;
fail:
    rc = cli_fail(C, &err);
out:
    free(alias);
    brisk_context_free(ctx);
    brisk_template_free(tpl);
    free(tpl_file);
    brisk_model_free(model);
    cli_args_free(&a);
    return rc;
}
