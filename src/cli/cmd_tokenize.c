/* cmd_tokenize: `brisk tokenize` — print the token ids (or pieces with ids)
 * the model's own vocabulary gives a text. */
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: brisk tokenize -m MODEL (-p TEXT | -f FILE) [--ids] [--no-bos] [--parse-special]\n"
            "\n"
            "Tokenize TEXT (or the bytes of FILE, exactly as they are) with MODEL's vocabulary.\n"
            "\n"
            "  -m, --model MODEL   GGUF file with tokenizer.ggml.* metadata\n"
            "  -p, --prompt TEXT   text to tokenize (no escape processing)\n"
            "  -f, --file FILE     tokenize this file's bytes (no newline added or removed)\n"
            "      --ids           print only the ids, separated by spaces, on one line\n"
            "      --no-bos        add no special tokens at all (no BOS/EOS/CLS/SEP)\n"
            "      --parse-special recognise control tokens such as <|im_start|> written in the text\n"
            "  -h, --help          this help\n"
            "\n"
            "Without --ids, each token is printed as `ID -> 'PIECE'` (control tokens show their text).\n");
}

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
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool ids_only = false, no_bos = false, parse_special = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!cli_need_value(cmd, argc, argv, &i, &model)) return 2;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!cli_need_value(cmd, argc, argv, &i, &prompt)) return 2;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!cli_need_value(cmd, argc, argv, &i, &file)) return 2;
        } else if (!strcmp(a, "--ids")) {
            ids_only = true;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = true;
        } else if (!strcmp(a, "--parse-special")) {
            parse_special = true;
        } else {
            return cli_unknown(cmd, a);
        }
    }
    if (!model) {
        fprintf(stderr, "brisk tokenize: -m MODEL is required (see brisk tokenize --help)\n");
        return 2;
    }
    if (!prompt == !file) {
        fprintf(stderr, "brisk tokenize: give exactly one of -p TEXT or -f FILE (see brisk tokenize --help)\n");
        return 2;
    }

    brisk_error err = {0};
    uint8_t *text = NULL;
    size_t len = 0;
    if (file) {
        if (brisk_file_read(file, &text, &len, &err) != BRISK_OK) {
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
    size_t src_len = file ? len : strlen(prompt);
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
    rc = (o->failed || fflush(stdout) != 0) ? 1 : 0;
    if (rc) fprintf(stderr, "brisk tokenize: write to stdout failed\n");
    free(o);
    free(piece);
    free(ids);
done:
    brisk_vocab_free(v);
    brisk_gguf_close(g);
    free(text);
    return rc;
}
