/* cmd_template: `brisk template` — render a chat template the way
 * transformers' apply_chat_template does, and print the prompt and nothing
 * else (no newline added). The template comes from a GGUF file's
 * tokenizer.chat_template (with its BOS/EOS token strings) or from a file. */
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "template/template.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage_text =
    "usage: brisk template (-m MODEL.gguf | --chat-template FILE) --messages MESSAGES.json\n"
    "                      [--add-generation-prompt] [--var NAME=JSON ...]\n"
    "\n"
    "Renders the chat template with the messages (a JSON array of {role, content,\n"
    "tool_calls?, ...}) exactly as Hugging Face transformers' apply_chat_template\n"
    "does with jinja2, and prints the result with no newline added.\n"
    "\n"
    "  -m MODEL                 use the model's tokenizer.chat_template; bos_token and\n"
    "                           eos_token are the model's BOS/EOS token strings\n"
    "  --chat-template FILE     use the Jinja template in FILE (bos_token/eos_token\n"
    "                           default to \"\" unless given with --var)\n"
    "  --messages FILE          the conversation, a JSON array ('-' reads stdin)\n"
    "  --add-generation-prompt  end with the assistant turn header\n"
    "  --var NAME=JSON          set a template variable, e.g. --var tools=@tools.json is\n"
    "                           not supported: give JSON, e.g. --var enable_thinking=false,\n"
    "                           --var 'bos_token=\"<s>\"'; repeatable, later wins\n"
    "\n"
    "tools and documents default to None, as in transformers. strftime_now() uses\n"
    "the clock, or BRISK_TEMPLATE_NOW=YYYY-MM-DD[THH:MM:SS] when set.\n";

#define CMD "template"

static int fail_msg(const char *what, const brisk_error *err) {
    fprintf(stderr, "brisk " CMD ": %s%s%s\n", what, what[0] ? ": " : "", err->msg);
    return 1;
}

/* The string of token id `key` in tokenizer.ggml.tokens, or "" when absent. */
static brisk_status token_string(const brisk_gguf *g, const char *key, char **out, brisk_error *err) {
    *out = NULL;
    uint32_t id = 0;
    bool found = false;
    brisk_status st = brisk_gguf_get_u32(g, key, &id, &found, err);
    if (st) return st;
    brisk_str s = {"", 0};
    if (found) {
        brisk_gguf_value arr, elem;
        bool have = false;
        if ((st = brisk_gguf_get_arr(g, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, &arr, &have, err))) return st;
        if (have && id < arr.v.arr.count) {
            if ((st = brisk_gguf_value_at(&arr, id, &elem, err))) return st;
            s = elem.v.str;
        }
    }
    *out = malloc(s.len + 1);
    if (!*out) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    memcpy(*out, s.ptr, s.len);
    (*out)[s.len] = 0;
    return BRISK_OK;
}

static brisk_status read_stdin(uint8_t **out, size_t *len, brisk_error *err) {
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap + 1);
    if (!buf) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    size_t r;
    while ((r = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += r;
        if (n == cap) {
            uint8_t *nb = cap > ((size_t)1 << 32) ? NULL : realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                return brisk_fail(err, BRISK_ERR_NOMEM, "stdin: too large");
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (ferror(stdin)) {
        free(buf);
        return brisk_fail(err, BRISK_ERR_IO, "stdin: read error");
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return BRISK_OK;
}

int brisk_cmd_template(int argc, char **argv) {
    const char *model = NULL, *tpl_path = NULL, *msg_path = NULL;
    bool agp = false;
    int rc = 1;
    brisk_error err = {0};
    json_t *vars = json_object();
    brisk_gguf *g = NULL;
    uint8_t *tpl_file = NULL, *msgs = NULL;
    size_t tpl_len = 0, msgs_len = 0;
    char *bos = NULL, *eos = NULL, *extra = NULL, *out = NULL;
    brisk_template *t = NULL;
    if (!vars) {
        fprintf(stderr, "brisk " CMD ": out of memory\n");
        return 1;
    }
    json_t *user_vars = json_object();
    if (!user_vars) goto done;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            rc = 0;
            goto done;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!cli_need_value(CMD, argc, argv, &i, &model)) { rc = 2; goto done; }
        } else if (!strcmp(a, "--chat-template")) {
            if (!cli_need_value(CMD, argc, argv, &i, &tpl_path)) { rc = 2; goto done; }
        } else if (!strcmp(a, "--messages")) {
            if (!cli_need_value(CMD, argc, argv, &i, &msg_path)) { rc = 2; goto done; }
        } else if (!strcmp(a, "--add-generation-prompt")) {
            agp = true;
        } else if (!strcmp(a, "--var")) {
            if (!cli_need_value(CMD, argc, argv, &i, &v)) { rc = 2; goto done; }
            const char *eq = strchr(v, '=');
            if (!eq || eq == v) {
                fprintf(stderr, "brisk " CMD ": --var '%s': expected NAME=JSON\n", v);
                rc = 2;
                goto done;
            }
            json_error_t je;
            json_t *jv = json_loads(eq + 1, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            if (!jv) {
                fprintf(stderr, "brisk " CMD ": --var %.*s: value is not JSON (%s); quote strings, e.g. --var '%.*s=\"text\"'\n",
                        (int)(eq - v), v, je.text, (int)(eq - v), v);
                rc = 2;
                goto done;
            }
            char *name = strndup(v, (size_t)(eq - v));
            if (!name || json_object_set_new(user_vars, name, jv)) {
                free(name);
                fprintf(stderr, "brisk " CMD ": --var: out of memory\n");
                goto done;
            }
            free(name);
        } else {
            rc = cli_unknown(CMD, a);
            goto done;
        }
    }
    if (!!model == !!tpl_path) {
        fprintf(stderr, "brisk " CMD ": give exactly one of -m MODEL or --chat-template FILE (see brisk " CMD " --help)\n");
        rc = 2;
        goto done;
    }
    if (!msg_path) {
        fprintf(stderr, "brisk " CMD ": --messages FILE is required (see brisk " CMD " --help)\n");
        rc = 2;
        goto done;
    }

    const char *src;
    size_t src_len;
    if (model) {
        if (brisk_gguf_open(model, &g, &err)) { rc = fail_msg("", &err); goto done; }
        brisk_str ct;
        bool found = false;
        if (brisk_gguf_get_str(g, "tokenizer.chat_template", &ct, &found, &err)) { rc = fail_msg(model, &err); goto done; }
        if (!found) {
            fprintf(stderr, "brisk " CMD ": %s has no tokenizer.chat_template; use --chat-template FILE\n", model);
            goto done;
        }
        src = ct.ptr;
        src_len = ct.len;
        if (token_string(g, "tokenizer.ggml.bos_token_id", &bos, &err) ||
            token_string(g, "tokenizer.ggml.eos_token_id", &eos, &err)) {
            rc = fail_msg(model, &err);
            goto done;
        }
    } else {
        if (brisk_file_read(tpl_path, &tpl_file, &tpl_len, &err)) { rc = fail_msg("--chat-template", &err); goto done; }
        src = (const char *)tpl_file;
        src_len = tpl_len;
    }
    if (!strcmp(msg_path, "-") ? read_stdin(&msgs, &msgs_len, &err) : brisk_file_read(msg_path, &msgs, &msgs_len, &err)) {
        rc = fail_msg("--messages", &err);
        goto done;
    }
    if (memchr(msgs, 0, msgs_len)) {
        fprintf(stderr, "brisk " CMD ": --messages %s: contains a NUL byte (not JSON text)\n", msg_path);
        goto done;
    }

    if (json_object_set_new(vars, "add_generation_prompt", json_boolean(agp)) ||
        json_object_set_new(vars, "bos_token", json_string(bos ? bos : "")) ||
        json_object_set_new(vars, "eos_token", json_string(eos ? eos : "")) ||
        json_object_update(vars, user_vars)) {
        fprintf(stderr, "brisk " CMD ": out of memory\n");
        goto done;
    }
    extra = json_dumps(vars, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!extra) {
        fprintf(stderr, "brisk " CMD ": could not encode the variables (invalid UTF-8 in a token string?)\n");
        goto done;
    }

    brisk_template_opts opts = {0};
    const char *now = getenv("BRISK_TEMPLATE_NOW");
    if (now && *now && brisk_template_parse_time(now, &opts.now, &err)) { rc = fail_msg("BRISK_TEMPLATE_NOW", &err); goto done; }
    if (brisk_template_parse(src, src_len, &t, &err)) { rc = fail_msg(model ? model : tpl_path, &err); goto done; }
    size_t out_len = 0;
    brisk_status st = brisk_template_render_ex(t, (const char *)msgs, extra, &opts, &out, &out_len, &err);
    if (st == BRISK_ERR_INVALID_ARG) { rc = fail_msg("--messages", &err); goto done; }
    if (st) { rc = fail_msg("", &err); goto done; }
    if (fwrite(out, 1, out_len, stdout) != out_len || fflush(stdout)) {
        fprintf(stderr, "brisk " CMD ": write error\n");
        goto done;
    }
    rc = 0;
done:
    free(out);
    brisk_template_free(t);
    free(extra);
    free(bos);
    free(eos);
    free(msgs);
    free(tpl_file);
    brisk_gguf_close(g);
    json_decref(user_vars);
    json_decref(vars);
    return rc;
}
