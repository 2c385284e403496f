/* cmd_tokenize: `brisk tokenize` — print the token ids (or pieces with ids)
 * the model's own vocabulary gives a text. */
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_use tok_uses[] = {
    {.id = CLI_O_MODEL, .help = "GGUF file with tokenizer.ggml.* metadata"},
    {.id = CLI_O_PROMPT, .help = "text to tokenize (as is; -e processes escapes)"},
    {.id = CLI_O_FILE, .help = "tokenize this file's bytes, no newline added or removed ('-' = stdin)"},
    {.id = CLI_O_IDS}, {.id = CLI_O_NO_BOS, .help = "add no special tokens at all (no BOS/EOS/CLS/SEP)"},
    {.id = CLI_O_PARSE_SPECIAL}, {.id = CLI_O_ESCAPE, .help = "process escapes (\\n \\t \\\\ \\xHH ...) in -p"},
    {.id = CLI_O_MAX_INPUT},
    {.id = CLI_O_END},
};

static const cli_spec tok_spec = {
    .name = "tokenize",
    .usage = "-m MODEL (-p TEXT | -f FILE) [--ids] [--no-bos] [--parse-special]",
    .about = "Tokenize TEXT (or the bytes of FILE, exactly as they are) with MODEL's vocabulary.\n",
    .uses = tok_uses,
    .epilog = "Without --ids, each token is printed as `ID -> 'PIECE'` (control tokens show their text).\n",
};

/* Buffered output of many small writes. */
typedef struct outbuf {
    char buf[1 << 16];
    size_t n;
    bool failed;
} outbuf;

static void out_flush(outbuf *o) {
    if (o->n && fwrite(o->buf, 1, o->n, stdout) != o->n) o->failed = true;
    o->n = 0;
}

static void out_write(outbuf *o, const char *s, size_t n) {
    if (n > sizeof o->buf - o->n) out_flush(o);
    if (n > sizeof o->buf) {
        if (fwrite(s, 1, n, stdout) != n) o->failed = true;
        return;
    }
    memcpy(o->buf + o->n, s, n);
    o->n += n;
}

static void out_int(outbuf *o, int32_t x, int width) {
    char tmp[16];
    int n = snprintf(tmp, sizeof tmp, "%*d", width, (int)x);
    out_write(o, tmp, (size_t)n);
}

int brisk_cmd_tokenize(int argc, char **argv) {
    const char *cmd = "tokenize";
    cli_args a;
    int code;
    if (!cli_parse(&tok_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    const char *model = a.s[CLI_O_MODEL], *file = a.s[CLI_O_FILE];
    const bool ids_only = a.i[CLI_O_IDS], no_bos = a.i[CLI_O_NO_BOS], parse_special = a.i[CLI_O_PARSE_SPECIAL];
    char *prompt = a.s[CLI_O_PROMPT] ? strdup(a.s[CLI_O_PROMPT]) : NULL;
    size_t prompt_len = prompt ? strlen(prompt) : 0;
    if (prompt && a.i[CLI_O_ESCAPE]) cli_unescape(prompt, &prompt_len);
    const size_t max_input = (size_t)a.i[CLI_O_MAX_INPUT];
    char file_flag[32];
    snprintf(file_flag, sizeof file_flag, "%s", a.given[CLI_O_FILE]);
    const bool have_prompt = a.s[CLI_O_PROMPT] != NULL;
    cli_args_free(&a);
    if (!model) {
        free(prompt);
        return cli_usage(cmd, "-m MODEL is required (see brisk tokenize --help)");
    }
    if (!have_prompt == !file) {
        free(prompt);
        return cli_usage(cmd, "give exactly one of -p TEXT or -f FILE (see brisk tokenize --help)");
    }
    if (have_prompt && !prompt) {
        fprintf(stderr, "brisk tokenize: out of memory\n");
        return 1;
    }

    brisk_error err = {0};
    uint8_t *text = NULL;
    size_t len = 0;
    if (file) {
        if (cli_read_input(file, file_flag, max_input, &text, &len, &err) != BRISK_OK) {
            fprintf(stderr, "brisk tokenize: %s\n", err.msg);
            return 1;
        }
    }
    brisk_gguf *g = NULL;
    brisk_vocab *v = NULL;
    int rc = 1;
    if (brisk_gguf_open(model, &g, &err) != BRISK_OK) {
        fprintf(stderr, "brisk tokenize: %s\n", err.msg);
        goto done;
    }
    if (brisk_vocab_load(g, &v, &err) != BRISK_OK) {
        fprintf(stderr, "brisk tokenize: %s: %s\n", model, err.msg);
        goto done;
    }
    brisk_gguf_close(g);
    g = NULL;

    brisk_tokenize_opts opts = {.add_special = !no_bos, .parse_special = parse_special};
    int32_t *ids = NULL;
    size_t n = 0;
    const char *src = file ? (const char *)text : prompt;
    size_t src_len = file ? len : prompt_len;
    if (brisk_tokenize(v, src, src_len, opts, &ids, &n, &err) != BRISK_OK) {
        fprintf(stderr, "brisk tokenize: %s\n", err.msg);
        goto done;
    }

    outbuf *o = calloc(1, sizeof *o);
    char *piece = malloc(brisk_vocab_max_piece_len(v) + 1);
    if (!o || !piece) {
        fprintf(stderr, "brisk tokenize: out of memory\n");
        free(o);
        free(piece);
        free(ids);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (ids_only) {
            if (i) out_write(o, " ", 1);
            out_int(o, ids[i], 0);
            continue;
        }
        size_t pl = 0;
        brisk_token_to_piece_special(v, ids[i], true, piece, brisk_vocab_max_piece_len(v), &pl, NULL);
        out_int(o, ids[i], 6);
        out_write(o, " -> '", 5);
        out_write(o, piece, pl);
        out_write(o, "'\n", 2);
    }
    if (ids_only) out_write(o, "\n", 1);
    out_flush(o);
    rc = cli_stdout_finish(cmd, CLI_EXIT_OK);
    free(o);
    free(piece);
    free(ids);
done:
    brisk_vocab_free(v);
    brisk_gguf_close(g);
    free(text);
    free(prompt);
    return rc;
}
