/* cmd_perplexity: `brisk perplexity` with llama-perplexity's scoring
 * convention, so the two engines' numbers are directly comparable. */
#include "brisk.h"
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_use ppl_uses[] = {
    {.id = CLI_O_MODEL}, {.id = CLI_O_FILE, .help = "the text file ('-' = stdin)"},
    {.id = CLI_O_CTX_SIZE, .def = "512", .help = "chunk length in tokens, at least 4; 0 = the model's training context"},
    {.id = CLI_O_BATCH, .def_help = "the chunk length"}, {.id = CLI_O_THREADS}, {.id = CLI_O_CHUNKS},
    {.id = CLI_O_MAX_INPUT}, {.id = CLI_O_VERBOSE}, {.id = CLI_O_NGL},
    {.id = CLI_O_END},
};

static const cli_spec ppl_spec = {
    .name = "perplexity",
    .usage = "-m MODEL -f TEXT [-c CTX] [-b BATCH] [-t THREADS] [--chunks N]",
    .about = "Perplexity of a text file, scored exactly as llama-perplexity does:\n"
             "  1. read the file (one trailing newline is dropped, as llama.cpp's -f does)\n"
             "     and tokenize all of it with BOS (when the vocabulary adds BOS);\n"
             "  2. cut the tokens into non-overlapping chunks of CTX tokens (a partial\n"
             "     last chunk is dropped);\n"
             "  3. replace each chunk's first token with BOS;\n"
             "  4. score only the second half of each chunk: the logits at positions\n"
             "     CTX/2 .. CTX-2 predict the tokens at CTX/2+1 .. CTX-1;\n"
             "  5. PPL = exp(mean negative log-likelihood over all scored tokens).\n",
    .uses = ppl_uses,
};

int brisk_cmd_perplexity(int argc, char **argv) {
    const char *C = "perplexity";
    cli_args a;
    int code;
    if (!cli_parse(&ppl_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    const char *model_path = a.s[CLI_O_MODEL], *text_path = a.s[CLI_O_FILE];
    int64_t n_ctx = a.i[CLI_O_CTX_SIZE];
    const int64_t n_batch = a.set[CLI_O_BATCH] ? a.i[CLI_O_BATCH] : 0, max_chunks = a.set[CLI_O_CHUNKS] ? a.i[CLI_O_CHUNKS] : -1;
    if (!model_path || !text_path) {
        cli_args_free(&a);
        return cli_usage(C, "-m MODEL and -f TEXT are required (see brisk perplexity --help)");
    }
    if (n_ctx != 0 && n_ctx < 4) {
        cli_args_free(&a);
        return cli_usage(C, "-c: a chunk of %lld tokens is too short to score; give at least 4", (long long)n_ctx);
    }
    cli_note_ngl(&a);
    brisk_error err = {0};
    int rc = 1;
    uint8_t *text = NULL;
    size_t text_len = 0, n_tok = 0;
    int32_t *tok = NULL, *pos = NULL, *seq = NULL, *chunk = NULL;
    uint8_t *want = NULL;
    brisk_model *model = NULL;
    brisk_context *ctx = NULL;

    if (cli_read_input(text_path, a.given[CLI_O_FILE], (size_t)a.i[CLI_O_MAX_INPUT], &text, &text_len, &err)) goto fail;
    if (text_len && text[text_len - 1] == '\n') text_len--;
    if (brisk_model_load(model_path, &model, &err)) goto fail;
    brisk_model_info info;
    brisk_model_get_info(model, &info);
    n_ctx = cli_ctx_size(&a, info.n_ctx_train);
    if (n_ctx < 4) { snprintf(err.msg, sizeof err.msg, "the model's training context (%lld) is too short a chunk", (long long)n_ctx); goto fail; }
    if (brisk_tokenize_text(model, (const char *)text, text_len, true, false, &tok, &n_tok, &err)) goto fail;
    const int64_t n_chunk_all = (int64_t)n_tok / n_ctx;
    if (n_chunk_all < 1) {
        snprintf(err.msg, sizeof err.msg, "%s: %zu tokens is less than one chunk of %lld; lower -c", text_path, n_tok, (long long)n_ctx);
        goto fail;
    }
    const int64_t n_chunk = max_chunks > 0 && max_chunks < n_chunk_all ? max_chunks : n_chunk_all;
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = (int32_t)n_ctx;
    cp.n_batch = (int32_t)(n_batch > 0 && n_batch < n_ctx ? n_batch : n_ctx);
    cp.n_outputs_max = cp.n_batch;   /* every token's logits */
    cp.n_threads = cli_threads(&a);
    brisk_memory_plan plan;
    if (cli_plan(C, "memory plan", model, &cp, a.i[CLI_O_VERBOSE], &plan, &err)) goto fail;
    if (brisk_context_init(model, &cp, &ctx, &err)) goto fail;
    const int32_t nb = brisk_context_n_batch(ctx), first = (int32_t)n_ctx / 2;
    pos = malloc((size_t)nb * sizeof *pos);
    seq = calloc((size_t)nb, sizeof *seq);
    want = malloc((size_t)nb);
    chunk = malloc((size_t)n_ctx * sizeof *chunk);
    float *logits_keep = malloc((size_t)n_ctx * (size_t)info.n_vocab * sizeof(float));
    if (!pos || !seq || !want || !chunk || !logits_keep) {
        free(logits_keep);
        snprintf(err.msg, sizeof err.msg, "out of memory for chunk of %lld tokens", (long long)n_ctx);
        goto fail;
    }
    fprintf(stderr, "brisk perplexity: %zu tokens, %lld chunks of %lld, scoring %lld tokens per chunk\n", n_tok,
            (long long)n_chunk, (long long)n_ctx, (long long)(n_ctx - 1 - first));
    double nll = 0.0, nll2 = 0.0;
    int64_t count = 0;
    const int32_t bos = brisk_token_bos(model);
    for (int64_t c = 0; c < n_chunk; c++) {
        memcpy(chunk, tok + c * n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (brisk_vocab_adds_bos(model) && bos >= 0) chunk[0] = bos;
        if (brisk_seq_truncate(ctx, 0, 0, &err)) { free(logits_keep); goto fail; }
        for (int32_t i0 = 0; i0 < n_ctx; i0 += nb) {
            const int32_t m = (int32_t)(n_ctx - i0 < nb ? n_ctx - i0 : nb);
            int32_t n_want = 0;
            for (int32_t j = 0; j < m; j++) {
                pos[j] = i0 + j;
                want[j] = i0 + j >= first && i0 + j < n_ctx - 1;
            }
            brisk_batch b = {.n_tokens = m, .token = chunk + i0, .pos = pos, .seq = seq, .logits = want};
            if (brisk_decode(ctx, &b, &err)) { free(logits_keep); goto fail; }
            for (int32_t j = 0; j < m; j++)
                if (want[j]) {
                    memcpy(logits_keep + (size_t)(i0 + j) * (size_t)info.n_vocab, brisk_get_logits(ctx, n_want), (size_t)info.n_vocab * sizeof(float));
                    n_want++;
                }
        }
        for (int32_t j = first; j < n_ctx - 1; j++) {
            const float *lg = logits_keep + (size_t)j * (size_t)info.n_vocab;
            float mx = lg[0];
            for (int32_t k = 1; k < info.n_vocab; k++) mx = lg[k] > mx ? lg[k] : mx;
            double sum = 0.0;
            for (int32_t k = 0; k < info.n_vocab; k++) sum += exp((double)lg[k] - mx);
            const double lp = (double)lg[tok[c * n_ctx + j + 1]] - mx - log(sum);
            nll -= lp;
            nll2 += lp * lp;
            count++;
        }
        fprintf(stderr, "[%lld]%.4f%s", (long long)c + 1, exp(nll / (double)count), (c + 1) % 10 == 0 || c + 1 == n_chunk ? "\n" : ",");
    }
    free(logits_keep);
    const double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
    const double ppl = exp(mean), ppl_err = var > 0 ? ppl * sqrt(var / (double)(count - 1 > 0 ? count - 1 : 1)) : 0.0;
    printf("Final estimate: PPL = %.4f +/- %.5f (%lld tokens scored in %lld chunks of %lld)\n", ppl, ppl_err, (long long)count,
           (long long)n_chunk, (long long)n_ctx);
    rc = cli_stdout_finish(C, CLI_EXIT_OK);
fail:
    if (rc && err.msg[0]) cli_fail(C, &err);
    free(text); free(tok); free(pos); free(seq); free(want); free(chunk);
    brisk_context_free(ctx);
    brisk_model_free(model);
    cli_args_free(&a);
    return rc;
}
