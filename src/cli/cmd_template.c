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

static const cli_use tpl_uses[] = {
    {.id = CLI_O_MODEL, .help = "use the model's tokenizer.chat_template; bos_token and eos_token are the model's BOS/EOS "
                                "token strings"},
    {.id = CLI_O_CHAT_TEMPLATE, .help = "use the Jinja template in FILE (bos_token/eos_token default to \"\" unless given "
                                        "with --var)"},
    {.id = CLI_O_MESSAGES}, {.id = CLI_O_ADD_GEN_PROMPT}, {.id = CLI_O_VAR}, {.id = CLI_O_MAX_INPUT},
    {.id = CLI_O_END},
};

static const cli_spec tpl_spec = {
    .name = "template",
    .usage = "(-m MODEL.gguf | --chat-template FILE) --messages MESSAGES.json\n"
             "                      [--add-generation-prompt] [--var NAME=JSON ...]",
    .about = "Renders the chat template with the messages (a JSON array of {role, content,\n"
             "tool_calls?, ...}) exactly as Hugging Face transformers' apply_chat_template\n"
             "does with jinja2, and prints the result with no newline added.\n",
    .uses = tpl_uses,
    .epilog = "tools and documents default to None, as in transformers. strftime_now() uses\n"
              "the clock, or BRISK_TEMPLATE_NOW=YYYY-MM-DD[THH:MM:SS] when set.\n",
};

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
    cli_args a;
    int code;
    if (!cli_parse(&tpl_spec, argc, argv, &a, &code)) {
        rc = code;
        goto done;
    }
    if (!user_vars) goto done;
    model = a.s[CLI_O_MODEL];
    tpl_path = a.s[CLI_O_CHAT_TEMPLATE];
    msg_path = a.s[CLI_O_MESSAGES];
    agp = a.i[CLI_O_ADD_GEN_PROMPT];
    const size_t max_input = (size_t)a.i[CLI_O_MAX_INPUT];
    for (int k = 0; k < a.n_list[CLI_O_VAR]; k++) {
        const char *v = a.list[CLI_O_VAR][k];
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
        if (cli_read_input(tpl_path, a.given[CLI_O_CHAT_TEMPLATE], max_input, &tpl_file, &tpl_len, &err)) {
            rc = fail_msg("", &err);
            goto done;
        }
        src = (const char *)tpl_file;
        src_len = tpl_len;
    }
    if (cli_read_input(msg_path, a.given[CLI_O_MESSAGES], max_input, &msgs, &msgs_len, &err)) {
        rc = fail_msg("", &err);
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
    fwrite(out, 1, out_len, stdout);
    rc = cli_stdout_finish(CMD, CLI_EXIT_OK);
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
    cli_args_free(&a);
    return rc;
}
