/* cmd_serve: `brisk serve` — the OpenAI-compatible HTTP server (src/server/,
 * docs/SERVER.md). This file turns the flags into a context and a server
 * configuration: -c is each request's own cap (never divided by -np), the KV
 * pool (--kv-size) is shared by all requests and by default takes half the
 * memory left after the weights. The plan is printed before anything is
 * allocated, and a plan that does not fit is refused. The server binds
 * before the model loads, answering 503 "Loading model" meanwhile (GET
 * /health included), so a supervisor sees it up and waits; a load that fails
 * closes the listener and exits 1 with its message. */
#include "brisk.h"
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "kv/policy.h"
#include "server/embed.h"
#include "server/server.h"
#include "server/tools.h"
#include "template/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#ifndef BRISK_GIT_COMMIT
#define BRISK_GIT_COMMIT "unknown"
#endif

#ifndef BRISK_HAVE_MHD
bool srv_available(void) { return false; }
int srv_start(const srv_config *cfg, srv_server **out) {
    (void)cfg;
    *out = NULL;
    return 1;
}
int srv_serve(srv_server *s, brisk_model *model, brisk_context *ctx, const brisk_template *tpl) {
    (void)s, (void)model, (void)ctx, (void)tpl;
    return 1;
}
void srv_abort(srv_server *s) { (void)s; }
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const cli_use serve_uses[] = {
    {.id = CLI_O_HEADING, .heading = "model and memory"},
    {.id = CLI_O_MODEL}, {.id = CLI_O_ALIAS}, {.id = CLI_O_CHAT_TEMPLATE},
    {.id = CLI_O_CTX_SIZE, .def = "0",
     .help = "tokens per request (prompt + completion); 0 = the model's training context. Never divided by -np"},
    {.id = CLI_O_KV_SIZE},
    {.id = CLI_O_BATCH, .help = "tokens per forward pass (and per step); with --batch-window, a burst's prompts are prefilled in one "
                               "pass when they fit (-b 2048 for 8 x 255 tokens)"},
    {.id = CLI_O_THREADS},
    {.id = CLI_O_HEADING, .heading = "admission and scheduling"},
    {.id = CLI_O_MAX_RUNNING}, {.id = CLI_O_MAX_QUEUE}, {.id = CLI_O_QUEUE_TIMEOUT}, {.id = CLI_O_MAX_STALL},
    {.id = CLI_O_PREFILL_BUDGET}, {.id = CLI_O_BATCH_WINDOW}, {.id = CLI_O_MAX_PROMPT_TOKENS},
    {.id = CLI_O_MAX_BODY}, {.id = CLI_O_SERVE_SPEC},
    {.id = CLI_O_MODEL_DRAFT, .help = "draft model for --spec draft (same vocabulary as -m); its context has -np sequences "
                                      "and a KV pool of --kv-size tokens"},
    {.id = CLI_O_DRAFT_MAX, .def = "8", .def_help = NULL, .help = "draft tokens per request and step at most (--spec draft, ngram, auto)"},
    {.id = CLI_O_KV_DIR},
    {.id = CLI_O_HEADING, .heading = "HTTP"},
    {.id = CLI_O_HOST}, {.id = CLI_O_PORT}, {.id = CLI_O_API_KEY}, {.id = CLI_O_API_KEY_FILE}, {.id = CLI_O_CORS_ORIGINS},
    {.id = CLI_O_CONN_LIMIT}, {.id = CLI_O_PER_IP_LIMIT}, {.id = CLI_O_TIMEOUT}, {.id = CLI_O_HEADER_TIMEOUT},
    {.id = CLI_O_HTTP_THREADS}, {.id = CLI_O_DRAIN_TIMEOUT}, {.id = CLI_O_LOG_PROMPTS}, {.id = CLI_O_STREAM_QUANTUM},
    {.id = CLI_O_HEADING, .heading = "sampling defaults (a request's own fields win)"},
    {.id = CLI_O_TEMP}, {.id = CLI_O_TOP_K}, {.id = CLI_O_TOP_P}, {.id = CLI_O_MIN_P}, {.id = CLI_O_REPEAT_PENALTY},
    {.id = CLI_O_REPEAT_LAST_N}, {.id = CLI_O_FREQ_PENALTY}, {.id = CLI_O_PRESENCE_PENALTY}, {.id = CLI_O_SEED},
    {.id = CLI_O_HEADING, .heading = "other"},
    {.id = CLI_O_MAX_INPUT, .help = "largest --chat-template file, in bytes (K, M, G suffixes)"},
    {.id = CLI_O_VERBOSE}, {.id = CLI_O_NGL},
    {.id = CLI_O_CACHE_TYPE_K}, {.id = CLI_O_CACHE_TYPE_V}, {.id = CLI_O_K_HADAMARD}, {.id = CLI_O_FLASH_ATTN},
    {.id = CLI_O_CACHE_TYPE_K_DRAFT, .def_help = "-ctk's type"}, {.id = CLI_O_CACHE_TYPE_V_DRAFT, .def_help = "-ctv's type"},
    {.id = CLI_O_PACK_CACHE},
    {.id = CLI_O_HEADING, .heading = "KV retention and generation past the context (docs/SERVER.md \"Retention\"; not with --spec, -md or --kv-dir):"},
    {.id = CLI_O_KV_POLICY}, {.id = CLI_O_KV_BUDGET, .help = "KV slots per request with --kv-policy, sinks and window included: an integer >= 1, or a "
                                                            "fraction 0 < F < 1 of -c (each request's own)"},
    {.id = CLI_O_KV_SINK, .help = "first slots a --kv-policy always keeps and a context shift keeps"},
    {.id = CLI_O_KV_WINDOW}, {.id = CLI_O_KV_PER_HEAD}, {.id = CLI_O_CONTEXT_SHIFT},
    {.id = CLI_O_KV_PIN, .help = "never evict (--kv-policy) nor shift out (--context-shift) the slots of ROLE; repeatable. Chat "
                                 "requests tag system, user, assistant, tool per message; completions prompt and generated"},
    {.id = CLI_O_END},
};

static const cli_spec serve_spec = {
    .name = "serve",
    .usage = "-m MODEL [--host 127.0.0.1] [--port 8080] [-c N] [--kv-size N] [-np N] [options]",
    .about = "An OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions (streamed\n"
             "with stream: true), llama.cpp's POST /completion, GET /v1/models, /health, /metrics, POST\n"
             "/tokenize, /detokenize, /apply-template, and a web chat page at /. Binds 127.0.0.1 unless --host says otherwise. SIGTERM or Ctrl-C\n"
             "stops admission, lets running requests finish (--drain-timeout) and exits 0.\n",
    .uses = serve_uses,
    .epilog = "docs/SERVER.md describes the endpoints, their fields and errors.\n",
};

/* The keys of --api-key-file (one per line, blank and # lines skipped) and
 * --api-key, into *keys (malloc'd; the strings point into *file). */
static brisk_status load_keys(const cli_args *a, uint8_t **file, const char ***keys, int32_t *n, brisk_error *err) {
    *n = 0;
    *keys = NULL;
    size_t len = 0;
    if (a->s[CLI_O_API_KEY_FILE]) {
        brisk_status st = cli_read_input(a->s[CLI_O_API_KEY_FILE], a->given[CLI_O_API_KEY_FILE], (size_t)1 << 20, file, &len, err);
        if (st) return st;
        if (memchr(*file, 0, len))
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "%s %s: holds a NUL byte (keys are text, one per line)",
                              a->given[CLI_O_API_KEY_FILE], a->s[CLI_O_API_KEY_FILE]);
    }
    size_t lines = 2;
    for (size_t i = 0; i < len; i++) lines += (*file)[i] == '\n';
    if (!(*keys = calloc(lines, sizeof **keys))) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    if (a->s[CLI_O_API_KEY]) (*keys)[(*n)++] = a->s[CLI_O_API_KEY];
    char *p = (char *)*file;
    for (size_t i = 0; p && i < len;) {
        char *line = p + i;
        size_t e = i;
        while (e < len && p[e] != '\n') e++;
        p[e < len ? e : len] = 0;   /* cli_read_input leaves a NUL after the data */
        size_t ll = strlen(line);
        while (ll && (line[ll - 1] == '\r' || line[ll - 1] == ' ' || line[ll - 1] == '\t')) line[--ll] = 0;
        while (*line == ' ' || *line == '\t') line++;
        if (*line && *line != '#') (*keys)[(*n)++] = line;
        i = e + 1;
    }
    if (a->s[CLI_O_API_KEY_FILE] && *n == (a->s[CLI_O_API_KEY] ? 1 : 0))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "%s %s holds no key", a->given[CLI_O_API_KEY_FILE], a->s[CLI_O_API_KEY_FILE]);
    return BRISK_OK;
}

/* What retention cannot be combined with, refused before the model loads (as run refuses them): a k4/k2 K (its
 * channel groups span 32 slots: no compaction, no re-rotation), speculation (drafts are rolled back by slot
 * count), and KV states (--kv-dir: a state holds slots at their positions). */
static int retention_conflicts(const cli_args *a, const char *cmd, const brisk_context_params *kvt, const cli_retention *ret) {
    if (!ret->policy_given && !ret->shift_on) return 0;
    const char *what = ret->policy_given ? "--kv-policy" : "--context-shift";
    if (brisk_kv_type_kivi(kvt->type_k) || brisk_kv_type_hyb(kvt->type_k))
        return cli_usage(cmd, "%s is not available with -ctk %s (a K quantized per channel over each block of 32 slots cannot be %s); use "
                              "-ctk f16, f32, q8_0 or q4_0",
                         what, brisk_cache_type_name(kvt->type_k), ret->policy_given ? "compacted" : "re-rotated");
    if (a->set[CLI_O_SERVE_SPEC] && a->i[CLI_O_SERVE_SPEC] != BRISK_SCHED_SPEC_OFF)
        return cli_usage(cmd, "%s is not available with --spec (drafts are rolled back by slot count; evicted or shifted slots are not)", what);
    if (a->s[CLI_O_MODEL_DRAFT]) return cli_usage(cmd, "%s is not available with -md (speculation is off with retention)", what);
    if (a->s[CLI_O_KV_DIR])
        return cli_usage(cmd, "%s is not available with --kv-dir (a KV state holds a prompt's slots at their positions)", what);
    return 0;
}

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

/* /v1/embeddings' pooling from the GGUF key ARCH.pooling_type (llama.cpp's
 * values); without it, last-token (embed.h). */
static int embed_pooling(const char *path, const char *arch) {
    brisk_gguf *g = NULL;
    brisk_error err = {0};
    int64_t key = -1;
    bool found = false;
    char name[96];
    snprintf(name, sizeof name, "%s.pooling_type", arch);
    if (brisk_gguf_open(path, &g, &err) == BRISK_OK && brisk_gguf_get_i64(g, name, &key, &found, &err) != BRISK_OK)
        key = -2;
    brisk_gguf_close(g);
    if (!found) key = -1;
    const int pooling = srv_embed_pooling_of(key);
    if (pooling < 0) fprintf(stderr, "brisk serve: note: %s %lld is not a supported pooling; /v1/embeddings answers 501\n", name, (long long)key);
    return pooling;
}

int brisk_cmd_serve(int argc, char **argv) {
    const char *C = "serve";
    cli_args a;
    int code;
    if (!cli_parse(&serve_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    brisk_context_params kvt = brisk_context_default_params();   /* -ctk/-ctv, checked before anything loads */
    if ((code = cli_kv_types(&a, C, &kvt))) {
        cli_args_free(&a);
        return code;
    }
    if (brisk_kv_type_hyb(kvt.type_k) && a.set[CLI_O_SERVE_SPEC] &&
        a.i[CLI_O_SERVE_SPEC] != BRISK_SCHED_SPEC_OFF) {
        code = cli_usage(C, "--spec is not available with -ctk %s: a rejected draft's queries would already have ranked the hot rows",
                         brisk_cache_type_name(kvt.type_k));
        cli_args_free(&a);
        return code;
    }
    /* retention, the context shift and pinning, checked before anything loads (a fractional budget without -c once
     * the model's context is known); serve tags chat messages by role, completions as prompt and generated */
    const uint32_t serve_roles = 1u << BRISK_ROLE_SYSTEM | 1u << BRISK_ROLE_USER | 1u << BRISK_ROLE_ASSISTANT | 1u << BRISK_ROLE_TOOL |
                                 1u << BRISK_ROLE_PROMPT | 1u << BRISK_ROLE_GENERATED;
    cli_retention ret;
    if ((code = cli_kv_retention(&a, C, serve_roles, &kvt, &ret))) {
        cli_args_free(&a);
        return code;
    }
    const bool retention = ret.policy_given || ret.shift_on;
    /* without -c the budget's form and bounds but the context are checked now (a fraction again once -c is known) */
    brisk_context_params early = kvt;
    if ((ret.policy_given && !ret.c_early && (code = cli_kv_policy(&a, C, INT32_MAX, 1, &early))) ||
        (code = retention_conflicts(&a, C, &kvt, &ret))) {
        cli_args_free(&a);
        return code;
    }
    /* the draft's types: -ctk/-ctv's (what serve did before -ctkd/-ctvd), unless given. Its retention flags are
     * not offered here: the scheduler's shared draft passes (src/spec/draft_batch.c) roll back by slot count */
    brisk_context_params dkv = kvt;
    if ((code = cli_kv_draft(&a, C, a.s[CLI_O_MODEL_DRAFT] != NULL, 0, &dkv))) {
        cli_args_free(&a);
        return code;
    }
    int rc = CLI_EXIT_USAGE;
    brisk_model *model = NULL, *draft = NULL;
    brisk_context *ctx = NULL, *draft_ctx = NULL;
    brisk_template *tpl = NULL;
    uint8_t *tpl_file = NULL, *key_file = NULL;
    const char **keys = NULL;
    int32_t n_keys = 0;
    char *alias = NULL;
    srv_server *srv = NULL;
    brisk_error err = {0};
    const char *model_path = a.s[CLI_O_MODEL];
    if (!model_path) {
        rc = cli_usage(C, "-m MODEL is required (see brisk serve --help)");
        goto out;
    }
    if ((rc = cli_pack_cache(&a)) != 0) goto out;
    rc = CLI_EXIT_USAGE;
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
    if (load_keys(&a, &key_file, &keys, &n_keys, &err)) goto fail;
    if (a.s[CLI_O_CORS_ORIGINS] && !a.s[CLI_O_CORS_ORIGINS][0]) {
        fprintf(stderr, "brisk serve: %s: an empty list (give origins such as http://localhost:3000, or *)\n", a.given[CLI_O_CORS_ORIGINS]);
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    if (a.s[CLI_O_KV_DIR]) {
        struct stat st;
        if (stat(a.s[CLI_O_KV_DIR], &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "brisk serve: %s %s: not a directory\n", a.given[CLI_O_KV_DIR], a.s[CLI_O_KV_DIR]);
            rc = CLI_EXIT_USAGE;
            goto out;
        }
    }
    /* bind first: the HTTP fields of cfg are known now, the model's are filled in below */
    const char *base = strrchr(model_path, '/');
    base = base ? base + 1 : model_path;
    if (!(alias = strdup(a.s[CLI_O_ALIAS] ? a.s[CLI_O_ALIAS] : base))) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto fail;
    }
    srv_config cfg = {
        .host = a.s[CLI_O_HOST], .port = (int)a.i[CLI_O_PORT], .alias = alias, .api_keys = keys, .n_api_keys = n_keys,
        .cors_origins = a.s[CLI_O_CORS_ORIGINS], .log_prompts = a.i[CLI_O_LOG_PROMPTS] != 0,
        .queue_timeout_s = a.f[CLI_O_QUEUE_TIMEOUT], .max_stall = a.f[CLI_O_MAX_STALL], .header_timeout_s = a.f[CLI_O_HEADER_TIMEOUT],
        .spec = (int)a.i[CLI_O_SERVE_SPEC], .stream_quantum_ms = a.f[CLI_O_STREAM_QUANTUM], .kv_dir = a.s[CLI_O_KV_DIR],
        .max_body = (size_t)a.i[CLI_O_MAX_BODY], .max_running = (int32_t)a.i[CLI_O_MAX_RUNNING],
        .max_queue = (int32_t)a.i[CLI_O_MAX_QUEUE],
        .conn_limit = (unsigned)a.i[CLI_O_CONN_LIMIT], .per_ip_limit = (unsigned)a.i[CLI_O_PER_IP_LIMIT],
        .timeout_s = (unsigned)a.i[CLI_O_TIMEOUT], .http_threads = (unsigned)a.i[CLI_O_HTTP_THREADS],
        .drain_timeout_s = a.f[CLI_O_DRAIN_TIMEOUT],
    };
    if (srv_start(&cfg, &srv)) goto out;
    const double t_load = now_s();
    fprintf(stderr, "brisk serve: loading %s\n", model_path);
    if (brisk_model_load(model_path, &model, &err)) goto fail;
    cli_note_pack_cache(C, model);
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
    const int32_t max_running = cfg.max_running;
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = (int32_t)cli_ctx_size(&a, info.n_ctx_train);
    cp.n_batch = (int32_t)a.i[CLI_O_BATCH];
    cp.n_threads = cli_threads(&a);
    cp.n_seq = max_running;
    /* a fractional budget is of each request's -c, known now */
    if (ret.policy_given && !ret.c_early && (rc = cli_kv_policy(&a, C, cp.n_ctx_seq, 1, &kvt)) != 0) goto fail_quiet;
    rc = CLI_EXIT_RUNTIME;
    cli_kv_copy(&cp, &kvt);
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
    fprintf(stderr,
            "brisk serve: KV pool %d tokens (K %s%s, V %s) shared by all requests; each request up to %d tokens (-c); %d running, %lld "
            "queued at most\n",
            cp.kv_tokens, brisk_cache_type_name(cp.type_k), cp.k_hadamard ? " Hadamard-rotated" : "", brisk_cache_type_name(cp.type_v),
            cp.n_ctx_seq, max_running, (long long)a.i[CLI_O_MAX_QUEUE]);
    /* positions a request reaches without a shift: -c, with a policy the trained context (the cache keeps the budget) */
    const int32_t gen_limit = cp.kv_policy && info.n_ctx_train > 0 ? info.n_ctx_train : cp.n_ctx_seq;
    if (retention) {
        char line[256];
        size_t o = 0;
        line[0] = 0;
        if (cp.kv_policy)
            o += (size_t)snprintf(line + o, sizeof line - o, "%s budget %d slots per request (sink %d, window %d%s); ",
                                  brisk_kv_policy_name(cp.kv_policy), cp.kv_budget, cp.kv_sink, cp.kv_window, cp.kv_per_head ? ", per head" : "");
        if (ret.shift_on)
            o += (size_t)snprintf(line + o, sizeof line - o, "context shift on (keep %lld) at %d positions", (long long)a.i[CLI_O_KV_SINK],
                                  gen_limit);
        else
            o += (size_t)snprintf(line + o, sizeof line - o, "context shift off: a request stops at %d positions (finish reason length)",
                                  gen_limit);
        for (int r = 1, k = 0; r < BRISK_KV_N_ROLES && o < sizeof line; r++)
            if ((cp.kv_pin >> r) & 1u) o += (size_t)snprintf(line + o, sizeof line - o, "%s%s", k++ ? ", " : "; pinned: ", brisk_kv_role_name(r));
        fprintf(stderr, "brisk serve: KV retention: %s\n", line);
    }
    if (brisk_memory_plan_check(&plan, 1, &err)) goto fail;
    if (brisk_context_init(model, &cp, &ctx, &err)) goto fail;
    if (a.s[CLI_O_MODEL_DRAFT]) {
        /* the draft's context mirrors the target's: one sequence per slot, the same pool size and batch */
        fprintf(stderr, "brisk serve: loading the draft model %s\n", a.s[CLI_O_MODEL_DRAFT]);
        if (brisk_model_load(a.s[CLI_O_MODEL_DRAFT], &draft, &err)) {
            brisk_error_prefix(&err, "draft model");
            goto fail;
        }
        brisk_context_params dp = cp;
        dp.type_k = dkv.type_k;
        dp.type_v = dkv.type_v;
        brisk_memory_plan dplan;
        if (brisk_context_plan(draft, &dp, &dplan, &err)) goto fail;
        brisk_memory_plan_format(&dplan, buf, sizeof buf);
        fprintf(stderr, "brisk serve: draft memory plan: %s\n", buf);
        if (brisk_context_init(draft, &dp, &draft_ctx, &err)) {
            brisk_error_prefix(&err, "draft model");
            goto fail;
        }
        cfg.draft = draft_ctx;
    } else if (a.i[CLI_O_SERVE_SPEC] == BRISK_SCHED_SPEC_DRAFT) {
        snprintf(err.msg, sizeof err.msg, "--spec draft needs a draft model: -md FILE (same vocabulary as -m)");
        err.status = BRISK_ERR_INVALID_ARG;
        goto fail;
    }
    fprintf(stderr, "brisk serve: model loaded and context made in %.2f s\n", now_s() - t_load);

    char fingerprint[128];
    snprintf(fingerprint, sizeof fingerprint, "brisk-%s-%s-%s", CLI_VERSION, BRISK_GIT_COMMIT, brisk_context_isa(ctx));
    /* the model's fields: no request reads them before srv_serve */
    cfg.fingerprint = fingerprint;
    cfg.n_ctx = cp.n_ctx_seq;
    cfg.max_prompt_tokens = a.set[CLI_O_MAX_PROMPT_TOKENS] ? (int32_t)a.i[CLI_O_MAX_PROMPT_TOKENS] : cp.n_ctx_seq;
    cfg.retention = retention;
    cfg.context_shift = ret.shift_on;
    cfg.shift_keep = (int32_t)a.i[CLI_O_KV_SINK];
    cfg.gen_limit = gen_limit;
    cfg.tag_roles = cp.kv_pin != 0;
    cfg.embed_threads = cp.n_threads;
    cfg.embed_pooling = embed_pooling(model_path, info.arch);
    cfg.prefill_budget = (int32_t)a.i[CLI_O_PREFILL_BUDGET];
    cfg.batch_window_ms = a.f[CLI_O_BATCH_WINDOW];
    cfg.spec_draft_max = (int32_t)a.i[CLI_O_DRAFT_MAX];
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
    cfg.tool_format = (int)srv_tool_format_of(tpl ? tpl_src : NULL, tpl_len);
    if (tpl) fprintf(stderr, "brisk serve: tool calls: %s format (from the chat template)\n", srv_tool_format_name((srv_tool_format)cfg.tool_format));
    rc = srv_serve(srv, model, ctx, tpl) ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
    srv = NULL;
    goto out;
fail:
    srv_abort(srv);   /* the listener closes before the message */
    srv = NULL;
    rc = cli_fail(C, &err);
    goto out;
fail_quiet:
    srv_abort(srv);   /* a usage error, already printed */
    srv = NULL;
out:
    srv_abort(srv);
    free(alias);
    free(keys);
    free(key_file);
    brisk_context_free(ctx);
    brisk_context_free(draft_ctx);
    brisk_model_free(draft);
    brisk_template_free(tpl);
    free(tpl_file);
    brisk_model_free(model);
    cli_args_free(&a);
    return rc;
}
