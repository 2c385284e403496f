/* cmd_run: `brisk run` — tokenize a prompt, prefill it, then sample and stream
 * text until n tokens or end of generation. Timing goes to stderr. */
#include "brisk.h"
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *usage_text =
    "usage: brisk run -m MODEL (-p PROMPT | -f FILE) [options]\n"
    "\n"
    "Generates text from a prompt and streams it to stdout. Load time, prompt\n"
    "tokens/s and generation tokens/s go to stderr.\n"
    "\n"
    "  -m, --model PATH         GGUF model\n"
    "  -p, --prompt TEXT        prompt text (used as is; no escape processing)\n"
    "  -f, --file PATH          read the prompt from a file (bytes as they are)\n"
    "  -n, --n-predict N        tokens to generate (default 128)\n"
    "  -c, --ctx-size N         context size in tokens (default: the model's, at most 4096)\n"
    "  -b, --batch N            prompt tokens per forward pass (default 512)\n"
    "  -t, --threads N          worker threads (default: all CPUs)\n"
    "  --temp T                 temperature; 0 = greedy (default 0.8)\n"
    "  --top-k K                keep the K most likely tokens; 0 = off (default 40)\n"
    "  --top-p P                nucleus sampling; 1 = off (default 0.95)\n"
    "  --min-p P                drop tokens below P x the top probability; 0 = off (default 0.05)\n"
    "  --repeat-penalty X       penalise tokens of the last --repeat-last-n; 1 = off (default 1)\n"
    "  --repeat-last-n N        penalty window in tokens (default 64)\n"
    "  --repeat-penalty-mode M  classic (llama.cpp: logit/X if > 0 else logit*X) or\n"
    "                           logprob (subtract ln X from the log-probability;\n"
    "                           independent of the logits' arbitrary offset) (default classic)\n"
    "  --frequency-penalty X    subtract X per occurrence in the window (default 0)\n"
    "  --presence-penalty X     subtract X once if present in the window (default 0)\n"
    "  --seed S                 RNG seed (default 42)\n"
    "  --no-bos                 do not add the BOS token\n"
    "  --parse-special          parse control-token text in the prompt as special tokens\n"
    "  --no-display-prompt      print only the generated text (default: the prompt, then the text)\n";

int brisk_cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL, *v;
    int64_t n_predict = 128, n_ctx = 0, n_batch = 512, threads = 0, seed = 42, top_k = 40, last_n = 64;
    double temp = 0.8, top_p = 0.95, min_p = 0.05, rep = 1.0, freq = 0.0, pres = 0.0;
    bool no_bos = false, parse_special = false, show_prompt = true;
    brisk_repeat_mode mode = BRISK_REPEAT_CLASSIC;
    const char *C = "run";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define FLAG(s, l) (!strcmp(a, s) || !strcmp(a, l))
#define VAL() if (!cli_need_value(C, argc, argv, &i, &v)) return 2
        if (FLAG("-h", "--help")) { fputs(usage_text, stdout); return 0; }
        else if (FLAG("-m", "--model")) { VAL(); model_path = v; }
        else if (FLAG("-p", "--prompt")) { VAL(); prompt = v; }
        else if (FLAG("-f", "--file")) { VAL(); prompt_file = v; }
        else if (FLAG("-n", "--n-predict")) { VAL(); if (!cli_parse_int(C, a, v, 0, 1 << 24, &n_predict)) return 2; }
        else if (FLAG("-c", "--ctx-size")) { VAL(); if (!cli_parse_int(C, a, v, 1, INT32_MAX, &n_ctx)) return 2; }
        else if (FLAG("-b", "--batch")) { VAL(); if (!cli_parse_int(C, a, v, 1, 65536, &n_batch)) return 2; }
        else if (FLAG("-t", "--threads")) { VAL(); if (!cli_parse_int(C, a, v, 1, 1024, &threads)) return 2; }
        else if (!strcmp(a, "--temp")) { VAL(); if (!cli_parse_float(C, a, v, 0, 100, &temp)) return 2; }
        else if (!strcmp(a, "--top-k")) { VAL(); if (!cli_parse_int(C, a, v, 0, 1 << 24, &top_k)) return 2; }
        else if (!strcmp(a, "--top-p")) { VAL(); if (!cli_parse_float(C, a, v, 0, 1, &top_p)) return 2; }
        else if (!strcmp(a, "--min-p")) { VAL(); if (!cli_parse_float(C, a, v, 0, 1, &min_p)) return 2; }
        else if (!strcmp(a, "--repeat-penalty")) { VAL(); if (!cli_parse_float(C, a, v, 1e-3, 1e3, &rep)) return 2; }
        else if (!strcmp(a, "--repeat-last-n")) { VAL(); if (!cli_parse_int(C, a, v, 0, 1 << 20, &last_n)) return 2; }
        else if (!strcmp(a, "--frequency-penalty")) { VAL(); if (!cli_parse_float(C, a, v, -100, 100, &freq)) return 2; }
        else if (!strcmp(a, "--presence-penalty")) { VAL(); if (!cli_parse_float(C, a, v, -100, 100, &pres)) return 2; }
        else if (!strcmp(a, "--seed")) { VAL(); if (!cli_parse_int(C, a, v, 0, INT64_MAX, &seed)) return 2; }
        else if (!strcmp(a, "--repeat-penalty-mode")) {
            VAL();
            if (!strcmp(v, "classic")) mode = BRISK_REPEAT_CLASSIC;
            else if (!strcmp(v, "logprob")) mode = BRISK_REPEAT_LOGPROB;
            else { fprintf(stderr, "brisk run: --repeat-penalty-mode: '%s' is not classic or logprob\n", v); return 2; }
        }
        else if (!strcmp(a, "--no-bos")) no_bos = true;
        else if (!strcmp(a, "--parse-special")) parse_special = true;
        else if (!strcmp(a, "--no-display-prompt")) show_prompt = false;
        else return cli_unknown(C, a);
#undef FLAG
#undef VAL
    }
    if (!model_path) { fprintf(stderr, "brisk run: -m MODEL is required (see brisk run --help)\n"); return 2; }
    if (!prompt == !prompt_file) { fprintf(stderr, "brisk run: give exactly one of -p PROMPT or -f FILE\n"); return 2; }

    brisk_error err = {0};
    int rc = 1;
    uint8_t *file_buf = NULL;
    size_t prompt_len = 0;
    brisk_model *model = NULL;
    brisk_context *ctx = NULL;
    brisk_sampler *smp = NULL;
    brisk_text_stream *ts = NULL;
    int32_t *ids = NULL, *pos = NULL, *seq = NULL;
    uint8_t *want = NULL;
    size_t n_ids = 0;

    if (prompt_file) {
        if (cli_read_file(prompt_file, &file_buf, &prompt_len, &err)) goto fail;
        prompt = (const char *)file_buf;
    } else {
        prompt_len = strlen(prompt);
    }
    struct timespec t0, t1, t2, t3;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (brisk_model_load(model_path, &model, &err)) goto fail;
    brisk_model_info info;
    brisk_model_get_info(model, &info);
    if (brisk_tokenize_text(model, prompt, prompt_len, !no_bos, parse_special, &ids, &n_ids, &err)) goto fail;
    if (n_ids == 0) { snprintf(err.msg, sizeof err.msg, "the prompt is empty (no tokens)"); goto fail; }
    if (n_ctx == 0) n_ctx = info.n_ctx_train < 4096 ? info.n_ctx_train : 4096;
    /* refuse before allocating the cache: the whole request must fit */
    if ((int64_t)n_ids + n_predict > n_ctx) {
        snprintf(err.msg, sizeof err.msg, "prompt (%zu tokens) + --n-predict %lld exceeds the context size %lld; raise -c or lower -n",
                 n_ids, (long long)n_predict, (long long)n_ctx);
        goto fail;
    }
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx = (int32_t)n_ctx;
    cp.n_batch = (int32_t)n_batch;
    cp.n_threads = (int32_t)threads;
    if (brisk_context_init(model, &cp, &ctx, &err)) goto fail;
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.temp = (float)temp; sp.top_k = (int32_t)top_k; sp.top_p = (float)top_p; sp.min_p = (float)min_p;
    sp.repeat_penalty = (float)rep; sp.repeat_last_n = (int32_t)last_n; sp.freq_penalty = (float)freq;
    sp.presence_penalty = (float)pres; sp.repeat_mode = mode; sp.seed = (uint64_t)seed;
    if (brisk_sampler_init(&smp, &sp, info.n_vocab, &err)) goto fail;
    if (brisk_text_stream_init(model, &ts, &err)) goto fail;
    clock_gettime(CLOCK_MONOTONIC, &t1);

    /* prefill in batches; only the last prompt token needs logits */
    const int32_t nb = brisk_context_n_batch(ctx);
    pos = malloc((size_t)nb * sizeof *pos);
    seq = calloc((size_t)nb, sizeof *seq);
    want = calloc((size_t)nb, 1);
    if (!pos || !seq || !want) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
    for (size_t i0 = 0; i0 < n_ids; i0 += (size_t)nb) {
        const int32_t m = (int32_t)(n_ids - i0 < (size_t)nb ? n_ids - i0 : (size_t)nb);
        for (int32_t j = 0; j < m; j++) { pos[j] = (int32_t)i0 + j; want[j] = i0 + (size_t)j == n_ids - 1; }
        brisk_batch b = {.n_tokens = m, .token = ids + i0, .pos = pos, .seq = seq, .logits = want};
        if (brisk_decode(ctx, &b, &err)) goto fail;
    }
    for (size_t i = 0; i < n_ids; i++) brisk_sampler_accept(smp, ids[i]);
    clock_gettime(CLOCK_MONOTONIC, &t2);

    if (show_prompt) fwrite(prompt, 1, prompt_len, stdout);
    int64_t n_gen = 0;
    const char *text;
    size_t len;
    int32_t cur_pos = (int32_t)n_ids;
    while (n_gen < n_predict) {
        int32_t tok = brisk_sampler_sample(smp, brisk_get_logits(ctx, 0));
        n_gen++;
        if (brisk_token_is_eog(model, tok)) break;
        brisk_sampler_accept(smp, tok);
        if (brisk_text_stream_push(ts, tok, &text, &len, &err)) goto fail;
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        if (n_gen == n_predict) break;
        uint8_t one = 1;
        int32_t s0 = 0;
        brisk_batch b = {.n_tokens = 1, .token = &tok, .pos = &cur_pos, .seq = &s0, .logits = &one};
        if (brisk_decode(ctx, &b, &err)) goto fail;
        cur_pos++;
    }
    brisk_text_stream_flush(ts, &text, &len);
    fwrite(text, 1, len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    clock_gettime(CLOCK_MONOTONIC, &t3);

    double load_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double pp_s = (double)(t2.tv_sec - t1.tv_sec) + (double)(t2.tv_nsec - t1.tv_nsec) * 1e-9;
    double tg_s = (double)(t3.tv_sec - t2.tv_sec) + (double)(t3.tv_nsec - t2.tv_nsec) * 1e-9;
    fprintf(stderr, "\nbrisk run: load %.1f ms | prompt %zu tokens, %.2f tokens/s | generated %lld tokens, %.2f tokens/s | %s kernels, %d ctx\n",
            load_s * 1e3, n_ids, pp_s > 0 ? (double)n_ids / pp_s : 0.0, (long long)n_gen, tg_s > 0 ? (double)n_gen / tg_s : 0.0,
            brisk_context_isa(ctx), brisk_context_n_ctx(ctx));
    rc = 0;
fail:
    if (rc) fprintf(stderr, "brisk run: %s\n", err.msg);
    free(file_buf); free(ids); free(pos); free(seq); free(want);
    brisk_text_stream_free(ts);
    brisk_sampler_free(smp);
    brisk_context_free(ctx);
    brisk_model_free(model);
    return rc;
}
