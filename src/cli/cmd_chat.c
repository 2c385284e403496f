/* cmd_chat: `brisk chat` — an interactive multi-turn chat that formats the
 * conversation with the model's own chat template. Each turn re-renders the
 * whole conversation, keeps the longest cached prefix of tokens, and decodes
 * only the rest, so templates that rewrite earlier turns stay correct.
 * /exit ends the chat, /reset clears it; Ctrl-C stops the current reply only. */
#include "brisk.h"
#include "cli/cli.h"
#include "template/template.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *usage_text =
    "usage: brisk chat -m MODEL [options]\n"
    "\n"
    "Interactive chat with an instruct model, formatted by the model's chat template\n"
    "(tokenizer.chat_template) or by --chat-template. Type a message and press Enter.\n"
    "  /exit    end the chat (so does end of input)\n"
    "  /reset   forget the conversation (the system prompt stays)\n"
    "  Ctrl-C   stop the reply being generated; the chat goes on\n"
    "\n"
    "  -m, --model PATH         GGUF model\n"
    "  --chat-template FILE     Jinja chat template to use instead of the model's\n"
    "  --system TEXT            system prompt\n"
    "  -n, --n-predict N        maximum tokens per reply (default 512)\n"
    "  -c, --ctx-size N         context size in tokens (default: the model's, at most 4096)\n"
    "  -t, --threads N          worker threads (default: all CPUs)\n"
    "  --temp T, --top-k K, --top-p P, --min-p P, --seed S   sampling, as in brisk run\n"
    "                           (defaults 0.8, 40, 0.95, 0.05, 42)\n";

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct chat {
    brisk_model *model;
    brisk_context *ctx;
    brisk_sampler *smp;
    brisk_template *tpl;
    json_t *messages;
    char *bos, *eos;
    int32_t *cached;      /* tokens currently in the KV cache (sequence 0) */
    int32_t n_cached;
    int32_t n_ctx, n_batch;
    int64_t n_predict;
} chat;

static brisk_status oom(brisk_error *err) {
    snprintf(err->msg, sizeof err->msg, "out of memory");
    return err->status = BRISK_ERR_NOMEM;
}

static char *token_string(const brisk_model *m, int32_t id) {
    size_t len = 0;
    const char *t = id >= 0 ? brisk_token_text(m, id, &len) : NULL;
    char *s = malloc(len + 1);
    if (!s) return NULL;
    if (t) memcpy(s, t, len);
    s[t ? len : 0] = 0;
    return s;
}

/* Decode tokens[from..n) after the cached prefix; only the last wants logits. */
static brisk_status prefill(chat *c, const int32_t *tokens, int32_t n, brisk_error *err) {
    int32_t keep = 0;
    while (keep < c->n_cached && keep < n && c->cached[keep] == tokens[keep]) keep++;
    if (keep == n) keep = n - 1;   /* re-evaluate the last token to get its logits */
    brisk_status st = brisk_seq_truncate(c->ctx, 0, keep, err);
    if (st) return st;
    int32_t pos[512], seq[512] = {0};
    uint8_t want[512];
    for (int32_t i0 = keep; i0 < n; i0 += 512 < c->n_batch ? 512 : c->n_batch) {
        const int32_t step = 512 < c->n_batch ? 512 : c->n_batch;
        const int32_t m = n - i0 < step ? n - i0 : step;
        for (int32_t j = 0; j < m; j++) { pos[j] = i0 + j; want[j] = i0 + j == n - 1; }
        brisk_batch b = {m, tokens + i0, pos, seq, want};
        if ((st = brisk_decode(c->ctx, &b, err))) {
            c->n_cached = brisk_seq_len(c->ctx, 0);
            return st;
        }
    }
    memcpy(c->cached, tokens, (size_t)n * sizeof *tokens);
    c->n_cached = n;
    return BRISK_OK;
}

/* One turn: render, prefill, stream the reply; returns the reply text (malloc'd). */
static brisk_status reply(chat *c, char **out_text, brisk_error *err) {
    *out_text = NULL;
    char *msgs = json_dumps(c->messages, JSON_COMPACT);
    json_t *vars = json_pack("{s:b, s:s, s:s}", "add_generation_prompt", 1, "bos_token", c->bos, "eos_token", c->eos);
    char *vars_s = vars ? json_dumps(vars, JSON_COMPACT) : NULL;
    json_decref(vars);
    char *prompt = NULL;
    size_t prompt_len = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    brisk_text_stream *ts = NULL;
    size_t cap = 256, len = 0;
    char *text = malloc(cap);
    brisk_status st = BRISK_OK;
    if (!msgs || !vars_s || !text) { st = oom(err); goto done; }
    if ((st = brisk_template_render(c->tpl, msgs, vars_s, &prompt, &prompt_len, err))) goto done;
    /* the template writes the special tokens as text: parse them, add none */
    if ((st = brisk_tokenize_text(c->model, prompt, prompt_len, false, true, &ids, &n_ids, err))) goto done;
    const int32_t bos = brisk_token_bos(c->model);
    if (n_ids == 0 || (brisk_vocab_adds_bos(c->model) && bos >= 0 && ids[0] != bos)) {
        int32_t *grown = realloc(ids, (n_ids + 1) * sizeof *ids);
        if (!grown) { st = oom(err); goto done; }
        ids = grown;
        memmove(ids + 1, ids, n_ids * sizeof *ids);
        ids[0] = bos >= 0 ? bos : 0;
        n_ids++;
    }
    if ((int64_t)n_ids + 1 > c->n_ctx) {
        snprintf(err->msg, sizeof err->msg, "the conversation (%zu tokens) no longer fits the context size %d; /reset or raise -c", n_ids, c->n_ctx);
        st = err->status = BRISK_ERR_CAPACITY;
        goto done;
    }
    if ((st = prefill(c, ids, (int32_t)n_ids, err))) goto done;
    if ((st = brisk_text_stream_init(c->model, &ts, err))) goto done;
    interrupted = 0;
    for (int64_t k = 0; k < c->n_predict && !interrupted; k++) {
        int32_t tok = brisk_sampler_sample(c->smp, brisk_get_logits(c->ctx, 0));
        if (brisk_token_is_eog(c->model, tok)) break;
        const char *piece;
        size_t plen;
        if ((st = brisk_text_stream_push(ts, tok, &piece, &plen, err))) goto done;
        fwrite(piece, 1, plen, stdout);
        fflush(stdout);
        while (len + plen + 1 > cap) {
            char *g = realloc(text, cap * 2);
            if (!g) { st = oom(err); goto done; }
            text = g;
            cap *= 2;
        }
        memcpy(text + len, piece, plen);
        len += plen;
        if (c->n_cached + 1 > c->n_ctx) {
            fprintf(stderr, "\n[context full: reply cut; /reset to start over]");
            break;
        }
        int32_t pos = c->n_cached, s0 = 0;
        uint8_t one = 1;
        brisk_batch b = {1, &tok, &pos, &s0, &one};
        if ((st = brisk_decode(c->ctx, &b, err))) goto done;
        c->cached[c->n_cached++] = tok;
    }
    if (interrupted) fprintf(stderr, "\n[stopped]");
    {
        const char *piece;
        size_t plen;
        brisk_text_stream_flush(ts, &piece, &plen);
        fwrite(piece, 1, plen, stdout);
        if (len + plen + 1 <= cap) { memcpy(text + len, piece, plen); len += plen; }
    }
    fputc('\n', stdout);
    fflush(stdout);
    text[len] = 0;
    *out_text = text;
    text = NULL;
done:
    free(text);
    free(msgs);
    free(vars_s);
    free(prompt);
    free(ids);
    brisk_text_stream_free(ts);
    return st;
}

static bool add_message(json_t *messages, const char *role, const char *content) {
    json_t *m = json_pack("{s:s, s:s}", "role", role, "content", content);
    return m && json_array_append_new(messages, m) == 0;
}

static void reset_messages(chat *c, const char *system) {
    json_array_clear(c->messages);
    if (system) add_message(c->messages, "system", system);
}

int brisk_cmd_chat(int argc, char **argv) {
    const char *model_path = NULL, *tpl_path = NULL, *system = NULL, *v, *C = "chat";
    int64_t n_predict = 512, n_ctx = 0, threads = 0, seed = 42, top_k = 40;
    double temp = 0.8, top_p = 0.95, min_p = 0.05;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define IS(s) (!strcmp(a, s))
#define VAL() if (!cli_need_value(C, argc, argv, &i, &v)) return 2
        if (IS("-h") || IS("--help")) { fputs(usage_text, stdout); return 0; }
        else if (IS("-m") || IS("--model")) { VAL(); model_path = v; }
        else if (IS("--chat-template")) { VAL(); tpl_path = v; }
        else if (IS("--system")) { VAL(); system = v; }
        else if (IS("-n") || IS("--n-predict")) { VAL(); if (!cli_parse_int(C, a, v, 1, 1 << 24, &n_predict)) return 2; }
        else if (IS("-c") || IS("--ctx-size")) { VAL(); if (!cli_parse_int(C, a, v, 16, INT32_MAX, &n_ctx)) return 2; }
        else if (IS("-t") || IS("--threads")) { VAL(); if (!cli_parse_int(C, a, v, 1, 1024, &threads)) return 2; }
        else if (IS("--temp")) { VAL(); if (!cli_parse_float(C, a, v, 0, 100, &temp)) return 2; }
        else if (IS("--top-k")) { VAL(); if (!cli_parse_int(C, a, v, 0, 1 << 24, &top_k)) return 2; }
        else if (IS("--top-p")) { VAL(); if (!cli_parse_float(C, a, v, 0, 1, &top_p)) return 2; }
        else if (IS("--min-p")) { VAL(); if (!cli_parse_float(C, a, v, 0, 1, &min_p)) return 2; }
        else if (IS("--seed")) { VAL(); if (!cli_parse_int(C, a, v, 0, INT64_MAX, &seed)) return 2; }
        else return cli_unknown(C, a);
#undef IS
#undef VAL
    }
    if (!model_path) { fprintf(stderr, "brisk chat: -m MODEL is required (see brisk chat --help)\n"); return 2; }

    brisk_error err = {0};
    int rc = 1;
    chat c = {.n_predict = n_predict};
    uint8_t *tpl_file = NULL;
    size_t tpl_len = 0;
    char *line = NULL;
    size_t line_cap = 0;
    if (brisk_model_load(model_path, &c.model, &err)) goto fail;
    const char *tpl_src;
    if (tpl_path) {
        if (cli_read_file(tpl_path, &tpl_file, &tpl_len, &err)) goto fail;
        tpl_src = (const char *)tpl_file;
    } else if (!(tpl_src = brisk_model_chat_template(c.model, &tpl_len))) {
        snprintf(err.msg, sizeof err.msg, "%s has no chat template (tokenizer.chat_template); give one with --chat-template FILE", model_path);
        goto fail;
    }
    if (brisk_template_parse(tpl_src, tpl_len, &c.tpl, &err)) goto fail;
    brisk_model_info info;
    brisk_model_get_info(c.model, &info);
    c.n_ctx = (int32_t)(n_ctx ? n_ctx : (info.n_ctx_train < 4096 ? info.n_ctx_train : 4096));
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx = c.n_ctx;
    cp.n_threads = (int32_t)threads;
    if (brisk_context_init(c.model, &cp, &c.ctx, &err)) goto fail;
    c.n_batch = brisk_context_n_batch(c.ctx);
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.temp = (float)temp; sp.top_k = (int32_t)top_k; sp.top_p = (float)top_p; sp.min_p = (float)min_p; sp.seed = (uint64_t)seed;
    if (brisk_sampler_init(&c.smp, &sp, info.n_vocab, &err)) goto fail;
    c.cached = malloc((size_t)c.n_ctx * sizeof *c.cached);
    c.messages = json_array();
    c.bos = token_string(c.model, brisk_token_bos(c.model));
    c.eos = token_string(c.model, brisk_token_eos(c.model));
    if (!c.cached || !c.messages || !c.bos || !c.eos) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
    reset_messages(&c, system);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;   /* no SA_RESTART: a Ctrl-C at the prompt interrupts the read */
    sigaction(SIGINT, &sa, NULL);
    const bool tty = isatty(STDIN_FILENO);
    if (tty) fprintf(stderr, "brisk chat: %s, context %d. /exit to quit, /reset to start over, Ctrl-C stops a reply.\n",
                     model_path, c.n_ctx);
    for (;;) {
        if (tty) { fputs("\n> ", stdout); fflush(stdout); }
        interrupted = 0;
        errno = 0;
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) {
            if (errno == EINTR && interrupted) { clearerr(stdin); if (tty) fputs("\n(type /exit to quit)", stdout); continue; }
            break;   /* end of input */
        }
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
        if (got == 0) continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            reset_messages(&c, system);
            brisk_seq_truncate(c.ctx, 0, 0, NULL);
            c.n_cached = 0;
            brisk_sampler_reset(c.smp);
            if (tty) fputs("(conversation cleared)", stdout);
            continue;
        }
        if (!add_message(c.messages, "user", line)) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
        char *answer = NULL;
        brisk_status st = reply(&c, &answer, &err);
        if (st == BRISK_ERR_CAPACITY || st == BRISK_ERR_TEMPLATE || st == BRISK_ERR_UNSUPPORTED) {
            fprintf(stderr, "brisk chat: %s\n", err.msg);   /* the chat goes on */
            json_array_remove(c.messages, json_array_size(c.messages) - 1);
            continue;
        }
        if (st) goto fail;
        add_message(c.messages, "assistant", answer);
        free(answer);
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "brisk chat: %s\n", err.msg);
    free(line);
    free(tpl_file);
    free(c.cached);
    free(c.bos);
    free(c.eos);
    json_decref(c.messages);
    brisk_template_free(c.tpl);
    brisk_sampler_free(c.smp);
    brisk_context_free(c.ctx);
    brisk_model_free(c.model);
    return rc;
}
