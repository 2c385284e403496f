/* cmd_logits: `brisk logits` — evaluate int32 token ids as one sequence and
 * write float32 logits for every position, [n_tokens][n_vocab] (the layout of
 * shared/golden), so outside tools can compare brisk with other engines. */
#include "brisk.h"
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage_text =
    "usage: brisk logits -m MODEL --tokens IN.i32 -o OUT.f32 [-t THREADS] [-b BATCH]\n"
    "\n"
    "Evaluates the little-endian int32 token ids in IN.i32 as one sequence starting\n"
    "at position 0 and writes float32 logits for every position to OUT.f32, row-major\n"
    "[n_tokens][n_vocab].\n"
    "\n"
    "  -m, --model PATH    GGUF model\n"
    "  --tokens PATH       input token ids (int32 little-endian)\n"
    "  -o, --output PATH   output logits (float32 little-endian)\n"
    "  -t, --threads N     worker threads (default: all CPUs)\n"
    "  -b, --batch N       tokens per forward pass (default 512)\n";

int brisk_cmd_logits(int argc, char **argv) {
    const char *model_path = NULL, *tok_path = NULL, *out_path = NULL, *v;
    int64_t threads = 0, batch = 512;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_text, stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!cli_need_value("logits", argc, argv, &i, &model_path)) return 2; }
        else if (!strcmp(a, "--tokens")) { if (!cli_need_value("logits", argc, argv, &i, &tok_path)) return 2; }
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) { if (!cli_need_value("logits", argc, argv, &i, &out_path)) return 2; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!cli_need_value("logits", argc, argv, &i, &v) || !cli_parse_int("logits", a, v, 1, 1024, &threads)) return 2;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) {
            if (!cli_need_value("logits", argc, argv, &i, &v) || !cli_parse_int("logits", a, v, 1, 65536, &batch)) return 2;
        } else return cli_unknown("logits", a);
    }
    if (!model_path || !tok_path || !out_path) {
        fprintf(stderr, "brisk logits: -m, --tokens and -o are required (see brisk logits --help)\n");
        return 2;
    }
    brisk_error err = {0};
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    if (cli_read_file(tok_path, &raw, &raw_len, &err)) {
        fprintf(stderr, "brisk logits: %s\n", err.msg);
        return 1;
    }
    if (raw_len == 0 || raw_len % 4 != 0) {
        fprintf(stderr, "brisk logits: %s: %zu bytes is not a non-empty sequence of int32 token ids\n", tok_path, raw_len);
        free(raw);
        return 1;
    }
    const int32_t n = (int32_t)(raw_len / 4);
    int32_t *tokens = malloc((size_t)n * sizeof(int32_t));
    if (!tokens) { free(raw); fprintf(stderr, "brisk logits: out of memory\n"); return 1; }
    for (int32_t i = 0; i < n; i++)
        tokens[i] = (int32_t)((uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 | (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24);
    free(raw);

    int rc = 1;
    brisk_model *model = NULL;
    brisk_context *ctx = NULL;
    FILE *out = NULL;
    int32_t *pos = NULL, *seq = NULL;
    uint8_t *want = NULL;
    if (brisk_model_load(model_path, &model, &err)) goto fail;
    brisk_model_info info;
    brisk_model_get_info(model, &info);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= info.n_vocab) {
            snprintf(err.msg, sizeof err.msg, "%s: token %d at index %d is out of range [0, %d)", tok_path, tokens[i], i, info.n_vocab);
            goto fail;
        }
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx = n;
    cp.n_batch = (int32_t)(batch < n ? batch : n);
    cp.n_threads = (int32_t)threads;
    if (brisk_context_init(model, &cp, &ctx, &err)) goto fail;
    out = fopen(out_path, "wb");
    if (!out) {
        snprintf(err.msg, sizeof err.msg, "%s: cannot open for writing", out_path);
        goto fail;
    }
    pos = malloc((size_t)n * sizeof *pos);
    seq = calloc((size_t)n, sizeof *seq);
    want = malloc((size_t)n);
    if (!pos || !seq || !want) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
    for (int32_t i = 0; i < n; i++) {
        pos[i] = i;
        want[i] = 1;
    }
    for (int32_t i0 = 0; i0 < n; i0 += cp.n_batch) {
        const int32_t m = n - i0 < cp.n_batch ? n - i0 : cp.n_batch;
        brisk_batch b = {.n_tokens = m, .token = tokens + i0, .pos = pos + i0, .seq = seq + i0, .logits = want + i0};
        if (brisk_decode(ctx, &b, &err)) goto fail;
        for (int32_t j = 0; j < m; j++)
            if (fwrite(brisk_get_logits(ctx, j), sizeof(float), (size_t)info.n_vocab, out) != (size_t)info.n_vocab) {
                snprintf(err.msg, sizeof err.msg, "%s: write failed", out_path);
                goto fail;
            }
    }
    if (fclose(out) != 0) {
        out = NULL;
        snprintf(err.msg, sizeof err.msg, "%s: write failed", out_path);
        goto fail;
    }
    out = NULL;
    fprintf(stderr, "brisk logits: %d tokens x %d vocab -> %s\n", n, info.n_vocab, out_path);
    rc = 0;
fail:
    if (rc) fprintf(stderr, "brisk logits: %s\n", err.msg);
    if (out) fclose(out);
    free(tokens); free(pos); free(seq); free(want);
    brisk_context_free(ctx);
    brisk_model_free(model);
    return rc;
}
