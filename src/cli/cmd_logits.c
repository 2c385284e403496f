/* cmd_logits: `brisk logits` — evaluate int32 token ids as one sequence and
 * write float32 logits for every position, [n_tokens][n_vocab] (the layout of
 * shared/golden), so outside tools can compare brisk with other engines. */
#include "brisk.h"
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_use logits_uses[] = {
    {.id = CLI_O_MODEL}, {.id = CLI_O_TOKENS}, {.id = CLI_O_OUTPUT, .help = "output logits, float32 little-endian: written "
                                                          "beside the target and renamed into place; '-' = stdout"},
    {.id = CLI_O_THREADS}, {.id = CLI_O_BATCH}, {.id = CLI_O_MAX_INPUT}, {.id = CLI_O_VERBOSE}, {.id = CLI_O_NGL},
    {.id = CLI_O_PACK_CACHE},
    {.id = CLI_O_END},
};

static const cli_spec logits_spec = {
    .name = "logits",
    .usage = "-m MODEL --tokens IN.i32 -o OUT.f32 [-t THREADS] [-b BATCH]",
    .about = "Evaluates the little-endian int32 token ids in IN.i32 as one sequence starting\n"
             "at position 0 and writes float32 logits for every position to OUT.f32, row-major\n"
             "[n_tokens][n_vocab].\n",
    .uses = logits_uses,
};

int brisk_cmd_logits(int argc, char **argv) {
    const char *C = "logits";
    cli_args a;
    int code;
    if (!cli_parse(&logits_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    const char *model_path = a.s[CLI_O_MODEL], *tok_path = a.s[CLI_O_TOKENS], *out_path = a.s[CLI_O_OUTPUT];
    if (!model_path || !tok_path || !out_path) {
        cli_args_free(&a);
        return cli_usage(C, "-m, --tokens and -o are required (see brisk logits --help)");
    }
    const int pack_rc = cli_pack_cache(&a);
    if (pack_rc) {
        cli_args_free(&a);
        return pack_rc;
    }
    cli_note_ngl(&a);
    brisk_error err = {0};
    int rc = CLI_EXIT_RUNTIME;
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    brisk_model *model = NULL;
    brisk_context *ctx = NULL;
    brisk_outfile out = {0};
    bool out_open = false;
    int32_t *tokens = NULL, *pos = NULL, *seq = NULL;
    uint8_t *want = NULL;
    if (cli_read_input(tok_path, a.given[CLI_O_TOKENS], (size_t)a.i[CLI_O_MAX_INPUT], &raw, &raw_len, &err)) goto fail;
    if (raw_len == 0 || raw_len % 4 != 0 || raw_len / 4 > INT32_MAX) {
        snprintf(err.msg, sizeof err.msg, "%s: %zu bytes is not a non-empty sequence of int32 token ids", tok_path, raw_len);
        goto fail;
    }
    const int32_t n = (int32_t)(raw_len / 4);
    if (!(tokens = malloc((size_t)n * sizeof(int32_t)))) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
    for (int32_t i = 0; i < n; i++)
        tokens[i] = (int32_t)((uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 | (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24);
    free(raw);
    raw = NULL;

    if (brisk_model_load(model_path, &model, &err)) goto fail;
    cli_note_pack_cache(C, model);
    brisk_model_info info;
    brisk_model_get_info(model, &info);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= info.n_vocab) {
            snprintf(err.msg, sizeof err.msg, "%s: token %d at index %d is out of range [0, %d)", tok_path, tokens[i], i, info.n_vocab);
            goto fail;
        }
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = n;
    cp.n_batch = (int32_t)(a.i[CLI_O_BATCH] < n ? a.i[CLI_O_BATCH] : n);
    cp.n_outputs_max = cp.n_batch;   /* every token's logits */
    cp.n_threads = cli_threads(&a);
    cli_warn_ctx(C, n, info.n_ctx_train);
    brisk_memory_plan plan;
    if (cli_plan(C, "memory plan", model, &cp, a.i[CLI_O_VERBOSE], &plan, &err)) goto fail;
    if (brisk_context_init(model, &cp, &ctx, &err)) goto fail;
    if (brisk_outfile_open(&out, out_path, 0, 0, &err)) goto fail;
    out_open = true;
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
            if (fwrite(brisk_get_logits(ctx, j), sizeof(float), (size_t)info.n_vocab, out.f) != (size_t)info.n_vocab) {
                snprintf(err.msg, sizeof err.msg, "%s: write failed: %s", out_path, strerror(errno));
                goto fail;
            }
    }
    out_open = false;
    if (brisk_outfile_commit(&out, &err)) goto fail;
    fprintf(stderr, "brisk logits: %d tokens x %d vocab -> %s\n", n, info.n_vocab, out_path);
    rc = CLI_EXIT_OK;
fail:
    if (rc) cli_fail(C, &err);
    if (out_open) brisk_outfile_abort(&out);
    free(raw); free(tokens); free(pos); free(seq); free(want);
    brisk_context_free(ctx);
    brisk_model_free(model);
    cli_args_free(&a);
    return rc;
}
