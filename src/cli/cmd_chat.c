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

static const cli_use chat_uses[] = {
    {.id = CLI_O_MODEL}, {.id = CLI_O_CHAT_TEMPLATE}, {.id = CLI_O_SYSTEM},
    {.id = CLI_O_PROMPT, .help = "a first message, sent before reading stdin (-e processes escapes)"},
    {.id = CLI_O_FILE, .help = "a first message from a file, its bytes as they are"},
    {.id = CLI_O_N_PREDICT, .def = "512", .help = "maximum tokens per reply; -1 = until end of generation or a full context"},
    {.id = CLI_O_CTX_SIZE}, {.id = CLI_O_BATCH}, {.id = CLI_O_THREADS}, {.id = CLI_O_TEMP}, {.id = CLI_O_TOP_K}, {.id = CLI_O_TOP_P}, {.id = CLI_O_MIN_P},
    {.id = CLI_O_REPEAT_PENALTY}, {.id = CLI_O_REPEAT_LAST_N}, {.id = CLI_O_REPEAT_MODE}, {.id = CLI_O_FREQ_PENALTY}, {.id = CLI_O_PRESENCE_PENALTY},
    {.id = CLI_O_SEED}, {.id = CLI_O_TYPICAL}, {.id = CLI_O_TOP_NSIGMA}, {.id = CLI_O_XTC_PROB}, {.id = CLI_O_XTC_THRESH},
    {.id = CLI_O_MIROSTAT}, {.id = CLI_O_MIROSTAT_LR}, {.id = CLI_O_MIROSTAT_ENT}, {.id = CLI_O_MIN_KEEP}, {.id = CLI_O_SAMPLERS},
    {.id = CLI_O_DRY_MULT}, {.id = CLI_O_DRY_BASE}, {.id = CLI_O_DRY_ALLOWED}, {.id = CLI_O_DRY_LAST_N}, {.id = CLI_O_DRY_BREAKER},
    {.id = CLI_O_ESCAPE}, {.id = CLI_O_REVERSE, .help = "end a reply when it ends with TEXT (repeatable)"},
    {.id = CLI_O_IGNORE_EOS}, {.id = CLI_O_COLOR}, {.id = CLI_O_CONVERSATION, .help = "accepted (chat is conversation mode)"},
    {.id = CLI_O_MAX_INPUT, .help = "largest input line (and -f/--chat-template file), in bytes (K, M, G suffixes)"},
    {.id = CLI_O_VERBOSE}, {.id = CLI_O_NGL},
    {.id = CLI_O_HEADING, .heading = "constrained decoding (every reply; docs/CONSTRAIN.md; at most one):"},
    {.id = CLI_O_JSON_SCHEMA}, {.id = CLI_O_JSON_SCHEMA_FILE}, {.id = CLI_O_GRAMMAR}, {.id = CLI_O_GRAMMAR_FILE},
    {.id = CLI_O_REGEX}, {.id = CLI_O_CHOICE},
    {.id = CLI_O_CACHE_TYPE_K}, {.id = CLI_O_CACHE_TYPE_V}, {.id = CLI_O_K_HADAMARD}, {.id = CLI_O_FLASH_ATTN},
    {.id = CLI_O_HEADING, .heading = "KV retention and generation past the context (docs/KV.md):"},
    {.id = CLI_O_KV_POLICY}, {.id = CLI_O_KV_BUDGET}, {.id = CLI_O_KV_SINK, .help = "first slots a --kv-policy always keeps and a context shift keeps"},
    {.id = CLI_O_KV_WINDOW}, {.id = CLI_O_KV_PER_HEAD}, {.id = CLI_O_CONTEXT_SHIFT}, {.id = CLI_O_KV_PIN},
    {.id = CLI_O_PACK_CACHE},
    {.id = CLI_O_END},
};

static const cli_spec chat_spec = {
    .name = "chat",
    .usage = "-m MODEL [options]",
    .about = "Interactive chat with an instruct model, formatted by the model's chat template\n"
             "(tokenizer.chat_template) or by --chat-template. Type a message and press Enter;\n"
             "end a line with \\ to continue the message on the next line.\n"
             "  /help    list these commands\n"
             "  /reset   forget the conversation (the system prompt stays)\n"
             "  /exit    end the chat (so do /quit and end of input)\n"
             "  Ctrl-C   stop the reply being generated; the chat goes on\n"
             "A line that is not valid UTF-8 is refused with a message and the chat goes on.\n",
    .uses = chat_uses,
};

static const char *help_text =
    "/help    list these commands\n"
    "/reset   forget the conversation (the system prompt stays)\n"
    "/exit    end the chat (also /quit, or end of input)\n"
    "a line ending in \\ continues on the next line; Ctrl-C stops a reply\n";

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
    int32_t n_ctx, n_batch;
    int64_t n_predict;    /* per reply; -1 = until end of generation or a full context */
    cli_stop stop;        /* -r */
    cli_eog *eog;         /* --ignore-eos, or NULL */
    cli_stdout_state out; /* CLOSED or FAILED ends the chat */
    brisk_constraint *cons;   /* every reply is constrained from its start, or NULL */
    /* retention (--kv-policy) or --context-shift: the cache may stop holding the conversation's tokens, so each turn
     * feeds only what is new after the history (hist: every token decoded so far, in order) */
    bool retention;
    cli_ctx_shift cs;
    uint32_t pin;           /* --kv-pin: the roles tagged slots get matter (their segments are found per turn) */
    int32_t *hist;
    size_t n_hist, hist_cap;
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

/* A copy of text with every byte that is not well-formed UTF-8 replaced by
 * U+FFFD, so a reply cut inside a character still goes into the JSON history. */
static char *utf8_sanitize(const char *text, size_t len) {
    char *out = malloc(3 * len + 1);
    if (!out) return NULL;
    size_t w = 0, i = 0;
    while (i < len) {
        const size_t ok = cli_utf8_check(text + i, len - i);
        memcpy(out + w, text + i, ok);
        w += ok;
        i += ok;
        if (i < len) {
            memcpy(out + w, "\xef\xbf\xbd", 3);
            w += 3;
            i++;
        }
    }
    out[w] = 0;
    return out;
}

/* Make the KV hold the conversation's tokens: brisk_seq_sync keeps the
 * longest prefix it already holds (the earlier turns) and computes the rest,
 * leaving the last token's logits. */
static brisk_status prefill(chat *c, const int32_t *tokens, int32_t n, brisk_error *err) {
    return brisk_seq_sync(c->ctx, 0, tokens, n, NULL, err);
}

/* The tokens of messages rendered by the template (*ids malloc'd): the
 * special tokens it writes as text parsed, BOS put first when the
 * vocabulary wants one and the template did not write it. */
static brisk_status render_tokens(chat *c, const json_t *messages, bool add_generation_prompt, int32_t **ids, size_t *n_ids,
                                  brisk_error *err) {
    *ids = NULL;
    *n_ids = 0;
    char *msgs = json_dumps(messages, JSON_COMPACT);
    json_t *vars = json_pack("{s:b, s:s, s:s}", "add_generation_prompt", add_generation_prompt, "bos_token", c->bos, "eos_token", c->eos);
    char *vars_s = vars ? json_dumps(vars, JSON_COMPACT) : NULL;
    json_decref(vars);
    char *prompt = NULL;
    size_t prompt_len = 0;
    brisk_status st = BRISK_OK;
    if (!msgs || !vars_s) { st = oom(err); goto done; }
    if ((st = brisk_template_render(c->tpl, msgs, vars_s, &prompt, &prompt_len, err))) goto done;
    /* the template writes the special tokens as text: parse them, add none */
    if ((st = brisk_tokenize_text(c->model, prompt, prompt_len, false, true, ids, n_ids, err))) goto done;
    const int32_t bos = brisk_token_bos(c->model);
    if (*n_ids == 0 || (brisk_vocab_adds_bos(c->model) && bos >= 0 && (*ids)[0] != bos)) {
        int32_t *grown = realloc(*ids, (*n_ids + 1) * sizeof **ids);
        if (!grown) { st = oom(err); goto done; }
        *ids = grown;
        memmove(*ids + 1, *ids, *n_ids * sizeof **ids);
        (*ids)[0] = bos >= 0 ? bos : 0;
        (*n_ids)++;
    }
done:
    free(msgs);
    free(vars_s);
    free(prompt);
    return st;
}

/* --kv-pin: each token's role (brisk_kv_role) from the message it renders:
 * message k's tokens are those between the renderings of the first k and the
 * first k + 1 messages (a rendering that is not a token prefix of the whole
 * ends at the tokens they share); what follows the last message (the
 * generation prompt) is the reply's, assistant. Roles the engine does not
 * know (a template's "developer", "ipython") are left untagged. */
static brisk_status tag_roles(chat *c, const int32_t *ids, size_t n_ids, uint8_t *role, brisk_error *err) {
    memset(role, BRISK_ROLE_ASSISTANT, n_ids);
    const size_t n_msg = json_array_size(c->messages);
    size_t start = 0;
    for (size_t k = 1; k <= n_msg; k++) {
        json_t *sub = json_array();
        if (!sub) return oom(err);
        for (size_t j = 0; j < k; j++) json_array_append(sub, json_array_get(c->messages, j));
        int32_t *pre = NULL;
        size_t n_pre = 0;
        brisk_status st = render_tokens(c, sub, false, &pre, &n_pre, err);
        json_decref(sub);
        if (st) return st;
        size_t b = 0;
        while (b < n_pre && b < n_ids && pre[b] == ids[b]) b++;
        free(pre);
        const int r = brisk_kv_role_parse(json_string_value(json_object_get(json_array_get(c->messages, k - 1), "role")));
        for (size_t i = start; i < b; i++) role[i] = (uint8_t)(r > 0 ? r : BRISK_ROLE_NONE);
        if (b > start) start = b;
    }
    return BRISK_OK;
}

static brisk_status hist_push(chat *c, const int32_t *t, size_t n, brisk_error *err) {
    if (c->n_hist + n > c->hist_cap) {
        size_t cap = c->hist_cap ? c->hist_cap : 256;
        while (cap < c->n_hist + n) cap *= 2;
        int32_t *g = realloc(c->hist, cap * sizeof *g);
        if (!g) return oom(err);
        c->hist = g;
        c->hist_cap = cap;
    }
    memcpy(c->hist + c->n_hist, t, n * sizeof *t);
    c->n_hist += n;
    return BRISK_OK;
}

/* With retention or a context shift: make the cache end with the
 * conversation ids[0..n). The history and ids share a prefix of L tokens; the
 * history's tokens after it (a template that rewrites the end of the last
 * reply) are taken back from the cache's newest slots, matched token by token
 * from the end (a slot already evicted is skipped), and ids[L..] is fed
 * (roles: role[], or none). While nothing was dropped the cache holds the
 * history exactly and this is brisk_seq_sync's prefix reuse. */
static brisk_status feed_retained(chat *c, const int32_t *ids, size_t n, const uint8_t *role, bool *ok, brisk_error *err) {
    size_t L = 0;
    while (L < c->n_hist && L < n && c->hist[L] == ids[L]) L++;
    if (L == n && L > 0) L--;   /* the last token is computed again: its logits start the reply */
    brisk_status st = BRISK_OK;
    if (L < c->n_hist) {
        int32_t len = brisk_seq_len(c->ctx, 0), n_tok = 0;
        int32_t *held = malloc((size_t)BRISK_MAX(len, 1) * sizeof *held);
        if (!held) return oom(err);
        if ((st = brisk_seq_tokens(c->ctx, 0, held, len, &n_tok, err))) { free(held); return st; }
        int32_t s = len - 1;
        for (size_t j = c->n_hist; j-- > L && s >= 0;)
            if (held[s] == c->hist[j]) s--;   /* else hist[j] was evicted: no slot to take back */
        free(held);
        if ((st = brisk_seq_truncate(c->ctx, 0, s + 1, err))) return st;
        c->n_hist = L;
    }
    /* a feed that stops part way (the context full, pinned slots leaving no room) must not leave a partial
     * message in the cache, which the next turn's matching against the history would not know about: the
     * slots it appended are taken back, or, when slots were dropped or shifted meanwhile, the cache restarts */
    brisk_cache_stats before, after;
    brisk_context_cache_stats(c->ctx, &before);
    const int32_t len0 = brisk_seq_len(c->ctx, 0);
    const int64_t shifts0 = c->cs.n_shifts;
    st = cli_ctx_feed(c->ctx, &c->cs, ids + L, (int32_t)(n - L), role ? role + L : NULL, BRISK_ROLE_NONE, ok, err);
    if (st || !*ok) {
        brisk_context_cache_stats(c->ctx, &after);
        const bool appended_only = after.dropped == before.dropped && c->cs.n_shifts == shifts0 && brisk_seq_len(c->ctx, 0) >= len0;
        brisk_error e2 = {0};
        if (brisk_seq_truncate(c->ctx, 0, appended_only ? len0 : 0, &e2) == BRISK_OK && !appended_only) c->n_hist = 0;
        return st;
    }
    return hist_push(c, ids + L, n - L, err);
}

/* One turn: render, prefill, stream the reply; returns the reply text (malloc'd). */
static brisk_status reply(chat *c, char **out_text, brisk_error *err) {
    *out_text = NULL;
    int32_t *ids = NULL;
    uint8_t *roles = NULL;
    size_t n_ids = 0;
    brisk_text_stream *ts = NULL;
    size_t cap = 256, len = 0;
    char *text = malloc(cap);
    brisk_status st = BRISK_OK;
    if (!text) { st = oom(err); goto done; }
    if ((st = render_tokens(c, c->messages, true, &ids, &n_ids, err))) goto done;
    if (c->retention) {
        if (c->pin) {
            if (!(roles = malloc(n_ids))) { st = oom(err); goto done; }
            if ((st = tag_roles(c, ids, n_ids, roles, err))) goto done;
        }
        bool ok = true;
        if ((st = feed_retained(c, ids, n_ids, roles, &ok, err))) goto done;
        if (!ok) {
            snprintf(err->msg, sizeof err->msg, "the conversation (%zu tokens) passes the %s (%d positions); /reset, or add --context-shift",
                     n_ids, c->cs.policy ? "model's trained context" : "context size", c->cs.pos_limit);
            st = err->status = BRISK_ERR_CAPACITY;
            goto done;
        }
        if ((st = brisk_seq_set_role(c->ctx, 0, BRISK_ROLE_ASSISTANT, err))) goto done;
    } else if ((int64_t)n_ids + 1 > c->n_ctx) {
        snprintf(err->msg, sizeof err->msg, "the conversation (%zu tokens) no longer fits the context size %d; /reset or raise -c", n_ids, c->n_ctx);
        st = err->status = BRISK_ERR_CAPACITY;
        goto done;
    }
    if (!c->retention && (st = prefill(c, ids, (int32_t)n_ids, err))) goto done;
    if ((st = brisk_text_stream_init(c->model, &ts, err))) goto done;
    interrupted = 0;
    cli_stop_reset(&c->stop);
    if (c->cons) brisk_constraint_reset(c->cons);
    for (int64_t k = 0; (c->n_predict < 0 || k < c->n_predict) && !interrupted; k++) {
        const float *logits = brisk_get_logits(c->ctx, 0);
        int32_t tok = brisk_sampler_sample(c->smp, c->eog ? cli_eog_mask(c->eog, logits) : logits);
        if (!c->eog && brisk_token_is_eog(c->model, tok)) break;
        /* the chat's sampler records no history, so the constraint is advanced here */
        if (c->cons) brisk_constraint_accept(c->cons, tok);
        const char *piece;
        size_t plen;
        if ((st = brisk_text_stream_push(ts, tok, &piece, &plen, err))) goto done;
        fwrite(piece, 1, plen, stdout);
        if ((c->out = cli_stdout_flush("chat")) != CLI_STDOUT_OK) goto done;
        while (len + plen + 1 > cap) {
            char *g = realloc(text, cap * 2);
            if (!g) { st = oom(err); goto done; }
            text = g;
            cap *= 2;
        }
        memcpy(text + len, piece, plen);
        len += plen;
        if (cli_stop_push(&c->stop, piece, plen)) break;
        int32_t pos, s0 = 0;
        if (c->retention) {
            bool ok = true;
            if ((st = cli_ctx_make_room(c->ctx, &c->cs, 1, &ok, err))) goto done;
            if (!ok) {
                fprintf(stderr, "\n[context full: reply cut (finish reason length); /reset to start over, or --context-shift]");
                break;
            }
            pos = brisk_seq_next_pos(c->ctx, 0);
        } else {
            const int32_t held = brisk_seq_len(c->ctx, 0);
            if (held + 1 > c->n_ctx) {
                fprintf(stderr, "\n[context full: reply cut; /reset to start over]");
                break;
            }
            pos = held;
        }
        uint8_t one = 1;
        brisk_batch b = {1, &tok, &pos, &s0, &one};
        if ((st = brisk_decode(c->ctx, &b, err))) goto done;
        if (c->retention && (st = hist_push(c, &tok, 1, err))) goto done;
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
    if ((c->out = cli_stdout_flush("chat")) != CLI_STDOUT_OK) goto done;
    if (!(*out_text = utf8_sanitize(text, len))) st = oom(err);
done:
    free(text);
    free(roles);
    free(ids);
    brisk_text_stream_free(ts);
    return st;
}

static bool add_message(json_t *messages, const char *role, const char *content) {
    json_t *m = json_pack("{s:s, s:s}", "role", role, "content", content);
    return m && json_array_append_new(messages, m) == 0;
}

static bool reset_messages(chat *c, const char *system) {
    json_array_clear(c->messages);
    return !system || add_message(c->messages, "system", system);
}

typedef enum line_status { LINE_OK, LINE_EOF, LINE_INTERRUPTED, LINE_TOO_LONG } line_status;

/* One line of stdin without its end of line, at most cap bytes; a line ending
 * in a backslash continues on the next one (the backslash becomes a newline). */
static line_status read_message(char **buf, size_t *buf_cap, size_t *len, size_t cap, bool tty) {
    *len = 0;
    for (;;) {
        errno = 0;
        const int ch = getc(stdin);
        if (ch == EOF) {
            if (ferror(stdin) && errno == EINTR && interrupted) {
                clearerr(stdin);
                return LINE_INTERRUPTED;
            }
            if (*len == 0) return LINE_EOF;
            break;   /* a last line without a newline */
        }
        if (ch == '\n') {
            if (*len && (*buf)[*len - 1] == '\r') (*len)--;
            if (*len && (*buf)[*len - 1] == '\\') {
                (*buf)[*len - 1] = '\n';
                if (tty) { fputs(". ", stdout); fflush(stdout); }
                continue;
            }
            break;
        }
        if (*len >= cap) return LINE_TOO_LONG;
        if (*len + 2 > *buf_cap) {
            const size_t grown = *buf_cap ? *buf_cap * 2 : 256;
            char *g = realloc(*buf, grown);
            if (!g) return LINE_TOO_LONG;
            *buf = g;
            *buf_cap = grown;
        }
        (*buf)[(*len)++] = (char)ch;
    }
    if (!*buf) {
        if (!(*buf = malloc(1))) return LINE_TOO_LONG;
        *buf_cap = 1;
    }
    (*buf)[*len] = 0;
    return LINE_OK;
}

/* A message's text is a JSON string: UTF-8 without NUL. */
static bool message_ok(const char *what, const char *s, size_t n) {
    if (memchr(s, 0, n)) {
        fprintf(stderr, "brisk chat: %s contains a NUL byte; ignored\n", what);
        return false;
    }
    const size_t bad = cli_utf8_check(s, n);
    if (bad < n) {
        fprintf(stderr, "brisk chat: %s is not valid UTF-8 (byte %zu, 0x%02x); ignored\n", what, bad, (unsigned char)s[bad]);
        return false;
    }
    return true;
}

int brisk_cmd_chat(int argc, char **argv) {
    const char *C = "chat";
    cli_args a;
    int code;
    if (!cli_parse(&chat_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    brisk_context_params kvt = brisk_context_default_params();   /* -ctk/-ctv, checked before anything loads */
    if ((code = cli_kv_types(&a, C, &kvt))) {
        cli_args_free(&a);
        return code;
    }
    /* retention, the context shift and pinning: all but a fractional budget without -c checked before the model loads */
    const uint32_t chat_roles = 1u << BRISK_ROLE_SYSTEM | 1u << BRISK_ROLE_USER | 1u << BRISK_ROLE_ASSISTANT | 1u << BRISK_ROLE_TOOL;
    cli_retention ret;
    if ((code = cli_kv_retention(&a, C, chat_roles, &kvt, &ret))) {
        cli_args_free(&a);
        return code;
    }
    const bool shift_on = ret.shift_on, policy_given = ret.policy_given;
    const int64_t c_early = ret.c_early;
    const char *model_path = a.s[CLI_O_MODEL], *tpl_path = a.s[CLI_O_CHAT_TEMPLATE];
    const size_t max_input = (size_t)a.i[CLI_O_MAX_INPUT];
    int rc = CLI_EXIT_USAGE;
    char *system = NULL, *first = NULL;
    size_t first_len = 0;
    uint8_t *first_file = NULL;
    if (!model_path) { rc = cli_usage(C, "-m MODEL is required (see brisk chat --help)"); goto out_args; }
    if ((rc = cli_pack_cache(&a)) != 0) goto out_args;
    rc = CLI_EXIT_USAGE;
    if (a.s[CLI_O_PROMPT] && a.s[CLI_O_FILE]) { rc = cli_usage(C, "give at most one of -p PROMPT or -f FILE"); goto out_args; }
    if (a.i[CLI_O_IGNORE_EOS] && cli_constraint_given(&a)) {
        rc = cli_usage(C, "--ignore-eos is not available with a constraint (it ends with an end-of-generation token)");
        goto out_args;
    }
    for (int k = 0; k < a.n_list[CLI_O_REVERSE]; k++)
        if (!a.list[CLI_O_REVERSE][k][0]) { rc = cli_usage(C, "%s: an empty reverse prompt", a.given[CLI_O_REVERSE]); goto out_args; }
    if (a.s[CLI_O_SYSTEM]) {
        size_t n = strlen(a.s[CLI_O_SYSTEM]);
        if (!(system = strdup(a.s[CLI_O_SYSTEM]))) { rc = cli_usage(C, "out of memory"); goto out_args; }
        if (a.i[CLI_O_ESCAPE]) cli_unescape(system, &n);
        if (memchr(system, 0, n) || cli_utf8_check(system, n) < n) {
            rc = cli_usage(C, "%s: the system prompt must be UTF-8 text without NUL bytes", a.given[CLI_O_SYSTEM]);
            goto out_args;
        }
    }
    if (a.s[CLI_O_PROMPT]) {
        first_len = strlen(a.s[CLI_O_PROMPT]);
        if (!(first = strdup(a.s[CLI_O_PROMPT]))) { rc = cli_usage(C, "out of memory"); goto out_args; }
        if (a.i[CLI_O_ESCAPE]) cli_unescape(first, &first_len);
        if (memchr(first, 0, first_len) || cli_utf8_check(first, first_len) < first_len) {
            rc = cli_usage(C, "%s: the message must be UTF-8 text without NUL bytes", a.given[CLI_O_PROMPT]);
            goto out_args;
        }
    }
    cli_note_ngl(&a);

    brisk_error err = {0};
    rc = CLI_EXIT_RUNTIME;
    chat c = {.n_predict = a.i[CLI_O_N_PREDICT]};
    cli_eog eog = {0};
    uint8_t *tpl_file = NULL;
    size_t tpl_len = 0;
    char *line = NULL;
    int32_t *dry_brk = NULL;
    size_t line_cap = 0;
    if (a.s[CLI_O_FILE]) {
        if (cli_read_input(a.s[CLI_O_FILE], a.given[CLI_O_FILE], max_input, &first_file, &first_len, &err)) goto fail;
        if (memchr(first_file, 0, first_len) || cli_utf8_check((const char *)first_file, first_len) < first_len) {
            snprintf(err.msg, sizeof err.msg, "%s %s: not UTF-8 text without NUL bytes", a.given[CLI_O_FILE], a.s[CLI_O_FILE]);
            goto fail;
        }
        first = (char *)first_file;
        first_file = NULL;
    }
    if (cli_stop_init(&c.stop, &a, &err)) goto fail;
    if (brisk_model_load(model_path, &c.model, &err)) goto fail;
    cli_note_pack_cache(C, c.model);
    const char *tpl_src;
    if (tpl_path) {
        if (cli_read_input(tpl_path, a.given[CLI_O_CHAT_TEMPLATE], max_input, &tpl_file, &tpl_len, &err)) goto fail;
        tpl_src = (const char *)tpl_file;
    } else if (!(tpl_src = brisk_model_chat_template(c.model, &tpl_len))) {
        snprintf(err.msg, sizeof err.msg, "%s has no chat template (tokenizer.chat_template); give one with --chat-template FILE", model_path);
        goto fail;
    }
    if (brisk_template_parse(tpl_src, tpl_len, &c.tpl, &err)) goto fail;
    brisk_model_info info;
    brisk_model_get_info(c.model, &info);
    c.n_ctx = (int32_t)cli_ctx_size(&a, info.n_ctx_train);
    if (policy_given && !c_early && (rc = cli_kv_policy(&a, C, c.n_ctx, 1, &kvt)) != 0) goto fail_quiet;
    rc = CLI_EXIT_RUNTIME;
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = c.n_ctx;
    cp.n_batch = (int32_t)a.i[CLI_O_BATCH];
    cp.n_threads = cli_threads(&a);
    cli_kv_copy(&cp, &kvt);
    brisk_memory_plan plan;
    if (cli_plan(C, "memory plan", c.model, &cp, a.i[CLI_O_VERBOSE], &plan, &err)) goto fail;
    if (brisk_context_init(c.model, &cp, &c.ctx, &err)) goto fail;
    c.n_batch = brisk_context_n_batch(c.ctx);
    c.retention = policy_given || shift_on;
    c.pin = cp.kv_pin;
    cli_ctx_shift_init(&c.cs, c.ctx, &cp, shift_on, info.n_ctx_train);
    brisk_sampler_params sp;
    cli_sampler_params(&a, &sp);
    if (cli_sampler_dry(&a, c.model, c.n_ctx, &sp, &dry_brk, &err)) goto fail;
    if (brisk_sampler_init(&c.smp, &sp, info.n_vocab, &err)) goto fail;
    if (cli_constraint(&a, c.model, &c.cons, &err)) goto fail;
    if (c.cons) {
        brisk_mask mk = brisk_constraint_mask(c.cons);
        mk.accept = NULL;   /* advanced by reply() itself */
        mk.reset = NULL;
        brisk_sampler_set_mask(c.smp, &mk);
        /* -n is every reply's token budget: near it, only tokens after which the reply can still end in time */
        if (c.n_predict >= 0 && !brisk_constraint_set_token_budget(c.cons, c.n_predict))
            fprintf(stderr, "brisk chat: the vocabulary lacks a token for some single byte: the constraint cannot plan to end within -n\n");
    }
    fprintf(stderr, "brisk chat: sampler seed: %llu\n", (unsigned long long)brisk_sampler_seed(c.smp));
    if (a.i[CLI_O_IGNORE_EOS]) {
        if (cli_eog_init(&eog, c.model, info.n_vocab, &err)) goto fail;
        c.eog = &eog;
    }
    c.messages = json_array();
    c.bos = token_string(c.model, brisk_token_bos(c.model));
    c.eos = token_string(c.model, brisk_token_eos(c.model));
    if (!c.messages || !c.bos || !c.eos || !reset_messages(&c, system)) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto fail;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;   /* no SA_RESTART: a Ctrl-C at the prompt interrupts the read */
    sigaction(SIGINT, &sa, NULL);
    const bool tty = isatty(STDIN_FILENO);
    const bool color = a.i[CLI_O_COLOR] && isatty(STDOUT_FILENO);
    if (tty) fprintf(stderr, "brisk chat: %s, context %d. /help lists the commands, /exit quits, Ctrl-C stops a reply.\n",
                     model_path, c.n_ctx);
    for (bool use_first = first != NULL;;) {
        size_t got = 0;
        const char *msg;
        if (use_first) {
            use_first = false;
            msg = first;
            got = first_len;
        } else {
            if (tty) {
                fputs(color ? "\n\033[32m> \033[0m" : "\n> ", stdout);
                if ((c.out = cli_stdout_flush(C)) != CLI_STDOUT_OK) break;
            }
            interrupted = 0;
            const line_status ls = read_message(&line, &line_cap, &got, max_input, tty);
            if (ls == LINE_EOF) break;
            if (ls == LINE_INTERRUPTED) {
                if (tty) fputs("\n(type /exit to quit)", stdout);
                continue;
            }
            if (ls == LINE_TOO_LONG) {
                snprintf(err.msg, sizeof err.msg, "an input line is longer than the input cap of %zu bytes (raise it with --max-input-bytes)",
                         max_input);
                err.status = BRISK_ERR_CAPACITY;
                goto fail;
            }
            msg = line;
        }
        if (got == 0) continue;
        if (!strcmp(msg, "/exit") || !strcmp(msg, "/quit")) break;
        if (!strcmp(msg, "/help")) {
            fputs(help_text, stdout);
            if ((c.out = cli_stdout_flush(C)) != CLI_STDOUT_OK) break;
            continue;
        }
        if (!strcmp(msg, "/reset")) {
            if (!reset_messages(&c, system)) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
            brisk_seq_truncate(c.ctx, 0, 0, NULL);
            c.n_hist = 0;
            brisk_sampler_reset(c.smp);
            if (tty) fputs("(conversation cleared)", stdout);
            continue;
        }
        if (!message_ok("the input line", msg, got)) continue;
        if (!add_message(c.messages, "user", msg)) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
        char *answer = NULL;
        brisk_status st = reply(&c, &answer, &err);
        if (c.out != CLI_STDOUT_OK) break;
        if (st == BRISK_ERR_CAPACITY || st == BRISK_ERR_TEMPLATE || st == BRISK_ERR_UNSUPPORTED) {
            fprintf(stderr, "brisk chat: %s\n", err.msg);   /* the chat goes on */
            json_array_remove(c.messages, json_array_size(c.messages) - 1);
            continue;
        }
        if (st) goto fail;
        const bool added = add_message(c.messages, "assistant", answer);
        free(answer);
        if (!added) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
    }
    rc = c.out == CLI_STDOUT_FAILED ? CLI_EXIT_RUNTIME : CLI_EXIT_OK;
    if (rc == CLI_EXIT_OK) rc = cli_stdout_finish(C, rc);
    if (c.retention || a.i[CLI_O_VERBOSE]) {
        char kvline[512];
        cli_ctx_shift_describe(c.ctx, &cp, &c.cs, kvline, sizeof kvline);
        fprintf(stderr, "brisk chat: %s\n", kvline);
    }
    goto done;
fail:
    cli_fail(C, &err);
fail_quiet:
done:
    free(c.hist);
    free(line);
    free(dry_brk);
    free(tpl_file);
    free(first_file);
    free(c.bos);
    free(c.eos);
    cli_stop_free(&c.stop);
    cli_eog_free(&eog);
    json_decref(c.messages);
    brisk_template_free(c.tpl);
    brisk_sampler_free(c.smp);
    brisk_constraint_free(c.cons);
    brisk_context_free(c.ctx);
    brisk_model_free(c.model);
out_args:
    free(system);
    free(first);
    cli_args_free(&a);
    return rc;
}
