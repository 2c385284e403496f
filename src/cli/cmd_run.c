/* cmd_run: `brisk run` — tokenize a prompt, prefill it, then sample and stream
 * text until n tokens or end of generation. Timing goes to stderr. With
 * --spec, generation goes through the speculative generator (src/spec) and
 * stderr also gets its acceptance statistics; --spec-compare then repeats the
 * run plainly (silently) and reports the speedup. */
#include "brisk.h"
#include "cli/cli.h"
#include "spec/spec.h"

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
    "  --no-display-prompt      print only the generated text (default: the prompt, then the text)\n"
    "  --attn-window N          windowed attention for the model itself (StreamingLLM-\n"
    "                           style, approximate: changes the output): each token\n"
    "                           sees the first --attn-sink positions (default 4) and\n"
    "                           the last N\n"
    "  --attn-sink N            sink positions with --attn-window (default 4)\n"
    "\n"
    "speculative decoding (lossless: greedy output equals plain greedy output, and\n"
    "sampling follows the same distribution as plain sampling):\n"
    "  --spec MODE              none, draft (needs -md), ngram (prompt lookup) or auto\n"
    "                           (adaptive draft length from the measured cost curve,\n"
    "                           n-gram plus the draft model when -md is given; falls\n"
    "                           back to plain decoding when speculation does not pay)\n"
    "  -md, --model-draft PATH  draft model (same vocabulary as -m)\n"
    "  --draft-max K            draft tokens per target pass: fixed for draft/ngram,\n"
    "                           the upper bound for auto (default 4 / 8 / 16, at most 32)\n"
    "  --draft-width W          draft trees with up to W children per node (1..4,\n"
    "                           default 1 = chains), verified in one target pass with a\n"
    "                           tree attention mask. n-gram: the continuations of W\n"
    "                           distinct matches (also when sampling: multi-candidate\n"
    "                           rejection sampling); draft model (temperature 0 only):\n"
    "                           up to W-1 runners-up per position, where the draft\n"
    "                           gives the path to them >= 5%;\n"
    "                           auto: the cost model picks chain, tree (its most\n"
    "                           probable nodes) or plain decoding every round\n"
    "  --draft-tree N           at most N tree nodes per pass (1..32, default\n"
    "                           min(32, W * K))\n"
    "  --draft-window N         the draft model attends only to its first --draft-sink\n"
    "                           positions (default 4) and the last N, so drafting costs\n"
    "                           the same at any context length (verification keeps full\n"
    "                           attention: output unchanged, only acceptance can drop)\n"
    "  --draft-sink N           sink positions with --draft-window (default 4)\n"
    "  --ngram-min N            shortest suffix match the n-gram drafter uses (default 2)\n"
    "  --no-calibrate           auto: measure only the single-token cost at start\n"
    "  --spec-compare           afterwards, rerun the prompt plainly (no output) and\n"
    "                           report the speedup and whether the tokens are identical\n"
    "  --spec-cost N            after generation, print the target's cost per pass of\n"
    "                           1..N tokens at the current position (min of\n"
    "                           --spec-cost-reps R runs, default 5)\n";

static double secs(const struct timespec *a, const struct timespec *b) {
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

/* Prefill ids into sequence 0 (empty) in batches; only the last token's logits are kept. */
static brisk_status prefill(brisk_context *ctx, const int32_t *ids, size_t n_ids, int32_t *pos, int32_t *seq,
                            uint8_t *want, brisk_error *err) {
    const int32_t nb = brisk_context_n_batch(ctx);
    for (size_t i0 = 0; i0 < n_ids; i0 += (size_t)nb) {
        const int32_t m = (int32_t)(n_ids - i0 < (size_t)nb ? n_ids - i0 : (size_t)nb);
        for (int32_t j = 0; j < m; j++) { pos[j] = (int32_t)i0 + j; seq[j] = 0; want[j] = i0 + (size_t)j == n_ids - 1; }
        brisk_batch b = {.n_tokens = m, .token = ids + i0, .pos = pos, .seq = seq, .logits = want};
        brisk_status st = brisk_decode(ctx, &b, err);
        if (st) return st;
    }
    return BRISK_OK;
}

/* Plain decoding after prefill: sample, stream (ts may be NULL: silent), decode
 * the token, until n_predict tokens or end of generation. Generated ids go to
 * gen (may be NULL). */
static brisk_status plain_generate(const brisk_model *model, brisk_context *ctx, brisk_sampler *smp,
                                   brisk_text_stream *ts, int32_t cur_pos, int64_t n_predict, int32_t *gen,
                                   int64_t *n_gen_out, brisk_error *err) {
    int64_t n_gen = 0;
    const char *text;
    size_t len;
    brisk_status st = BRISK_OK;
    while (n_gen < n_predict) {
        int32_t tok = brisk_sampler_sample(smp, brisk_get_logits(ctx, 0));
        if (gen) gen[n_gen] = tok;
        n_gen++;
        if (brisk_token_is_eog(model, tok)) break;
        brisk_sampler_accept(smp, tok);
        if (ts) {
            if ((st = brisk_text_stream_push(ts, tok, &text, &len, err))) break;
            fwrite(text, 1, len, stdout);
            fflush(stdout);
        }
        if (n_gen == n_predict) break;
        uint8_t one = 1;
        int32_t s0 = 0;
        brisk_batch b = {.n_tokens = 1, .token = &tok, .pos = &cur_pos, .seq = &s0, .logits = &one};
        if ((st = brisk_decode(ctx, &b, err))) break;
        cur_pos++;
    }
    *n_gen_out = n_gen;
    return st;
}

int brisk_cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *draft_path = NULL, *prompt = NULL, *prompt_file = NULL, *v;
    int64_t n_predict = 128, n_ctx = 0, n_batch = 512, threads = 0, seed = 42, top_k = 40, last_n = 64;
    int64_t draft_max = 0, draft_width = 1, draft_tree = 0, ngram_min = 2, spec_cost = 0, cost_reps = 5;
    int64_t draft_window = 0, draft_sink = -1, attn_window = 0, attn_sink = -1;
    double temp = 0.8, top_p = 0.95, min_p = 0.05, rep = 1.0, freq = 0.0, pres = 0.0;
    bool no_bos = false, parse_special = false, show_prompt = true, spec_on = false, compare = false, calibrate = true;
    brisk_spec_mode spec_mode = BRISK_SPEC_NONE;
    brisk_repeat_mode mode = BRISK_REPEAT_CLASSIC;
    const char *C = "run";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define FLAG(s, l) (!strcmp(a, s) || !strcmp(a, l))
#define VAL() if (!cli_need_value(C, argc, argv, &i, &v)) return 2
        if (FLAG("-h", "--help")) { fputs(usage_text, stdout); return 0; }
        else if (FLAG("-m", "--model")) { VAL(); model_path = v; }
        else if (FLAG("-md", "--model-draft")) { VAL(); draft_path = v; }
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
        else if (!strcmp(a, "--spec")) {
            VAL();
            spec_on = true;
            if (!strcmp(v, "none")) spec_mode = BRISK_SPEC_NONE;
            else if (!strcmp(v, "draft")) spec_mode = BRISK_SPEC_DRAFT;
            else if (!strcmp(v, "ngram")) spec_mode = BRISK_SPEC_NGRAM;
            else if (!strcmp(v, "auto")) spec_mode = BRISK_SPEC_AUTO;
            else { fprintf(stderr, "brisk run: --spec: '%s' is not none, draft, ngram or auto\n", v); return 2; }
        }
        else if (!strcmp(a, "--draft-max")) { VAL(); if (!cli_parse_int(C, a, v, 1, BRISK_SPEC_MAX_DRAFT, &draft_max)) return 2; }
        else if (!strcmp(a, "--draft-width")) { VAL(); if (!cli_parse_int(C, a, v, 1, BRISK_SPEC_MAX_WIDTH, &draft_width)) return 2; }
        else if (!strcmp(a, "--draft-tree")) { VAL(); if (!cli_parse_int(C, a, v, 1, BRISK_SPEC_MAX_TREE, &draft_tree)) return 2; }
        else if (!strcmp(a, "--draft-window")) { VAL(); if (!cli_parse_int(C, a, v, 1, INT32_MAX, &draft_window)) return 2; }
        else if (!strcmp(a, "--draft-sink")) { VAL(); if (!cli_parse_int(C, a, v, 0, INT32_MAX, &draft_sink)) return 2; }
        else if (!strcmp(a, "--attn-window")) { VAL(); if (!cli_parse_int(C, a, v, 1, INT32_MAX, &attn_window)) return 2; }
        else if (!strcmp(a, "--attn-sink")) { VAL(); if (!cli_parse_int(C, a, v, 0, INT32_MAX, &attn_sink)) return 2; }
        else if (!strcmp(a, "--ngram-min")) { VAL(); if (!cli_parse_int(C, a, v, 1, 64, &ngram_min)) return 2; }
        else if (!strcmp(a, "--spec-cost")) { VAL(); if (!cli_parse_int(C, a, v, 1, 256, &spec_cost)) return 2; }
        else if (!strcmp(a, "--spec-cost-reps")) { VAL(); if (!cli_parse_int(C, a, v, 1, 1000, &cost_reps)) return 2; }
        else if (!strcmp(a, "--spec-compare")) compare = true;
        else if (!strcmp(a, "--no-calibrate")) calibrate = false;
        else if (!strcmp(a, "--no-bos")) no_bos = true;
        else if (!strcmp(a, "--parse-special")) parse_special = true;
        else if (!strcmp(a, "--no-display-prompt")) show_prompt = false;
        else return cli_unknown(C, a);
#undef FLAG
#undef VAL
    }
    if (!model_path) { fprintf(stderr, "brisk run: -m MODEL is required (see brisk run --help)\n"); return 2; }
    if (!prompt == !prompt_file) { fprintf(stderr, "brisk run: give exactly one of -p PROMPT or -f FILE\n"); return 2; }
    if (spec_mode == BRISK_SPEC_DRAFT && !draft_path) { fprintf(stderr, "brisk run: --spec draft needs -md DRAFT_MODEL\n"); return 2; }
    if (draft_path && spec_mode != BRISK_SPEC_DRAFT && spec_mode != BRISK_SPEC_AUTO) {
        fprintf(stderr, "brisk run: -md is used only with --spec draft or --spec auto\n");
        return 2;
    }
    if (draft_sink >= 0 && !draft_window) { fprintf(stderr, "brisk run: --draft-sink needs --draft-window N\n"); return 2; }
    if (attn_sink >= 0 && !attn_window) { fprintf(stderr, "brisk run: --attn-sink needs --attn-window N\n"); return 2; }
    if (draft_window && !draft_path) { fprintf(stderr, "brisk run: --draft-window needs a draft model (-md)\n"); return 2; }
    if ((compare || draft_max || draft_width > 1 || draft_tree) && !spec_on) {
        fprintf(stderr, "brisk run: --spec-compare, --draft-max, --draft-width and --draft-tree need --spec MODE\n");
        return 2;
    }

    brisk_error err = {0};
    int rc = 1;
    uint8_t *file_buf = NULL;
    size_t prompt_len = 0;
    brisk_model *model = NULL, *draft = NULL;
    brisk_context *ctx = NULL;
    brisk_sampler *smp = NULL;
    brisk_text_stream *ts = NULL;
    brisk_spec *spec = NULL;
    int32_t *ids = NULL, *pos = NULL, *seq = NULL, *gen = NULL, *gen_plain = NULL;
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
    if (draft_path && brisk_model_load(draft_path, &draft, &err)) goto fail;
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
    cp.attn_window = (int32_t)attn_window;
    cp.attn_sink = attn_window ? (int32_t)(attn_sink >= 0 ? attn_sink : 4) : 0;
    if (brisk_context_init(model, &cp, &ctx, &err)) goto fail;
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.temp = (float)temp; sp.top_k = (int32_t)top_k; sp.top_p = (float)top_p; sp.min_p = (float)min_p;
    sp.repeat_penalty = (float)rep; sp.repeat_last_n = (int32_t)last_n; sp.freq_penalty = (float)freq;
    sp.presence_penalty = (float)pres; sp.repeat_mode = mode; sp.seed = (uint64_t)seed;
    if (brisk_sampler_init(&smp, &sp, info.n_vocab, &err)) goto fail;
    if (brisk_text_stream_init(model, &ts, &err)) goto fail;
    if (spec_on) {
        brisk_spec_params spp = brisk_spec_default_params();
        spp.mode = spec_mode;
        spp.draft_max = (int32_t)draft_max;
        spp.draft = draft;
        spp.n_threads = (int32_t)threads;
        spp.ngram_min = (int32_t)ngram_min;
        spp.calibrate = calibrate;
        spp.tree_width = (int32_t)draft_width;
        spp.tree_nodes = (int32_t)draft_tree;
        spp.draft_window = (int32_t)draft_window;
        spp.draft_sink = draft_window ? (int32_t)(draft_sink >= 0 ? draft_sink : 4) : 0;
        if (draft_width > 1 && sp.temp > 0.0f && spec_mode != BRISK_SPEC_NGRAM)
            fprintf(stderr, "brisk run: note: when sampling, only n-gram trees are verified (multi-candidate rejection "
                            "sampling); the draft model drafts chains\n");
        if (brisk_spec_init(&spec, model, ctx, smp, &sp, &spp, &err)) goto fail;
        if (brisk_spec_warning(spec)[0]) fprintf(stderr, "brisk run: warning: %s\n", brisk_spec_warning(spec));
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);

    const int32_t nb = brisk_context_n_batch(ctx);
    pos = malloc((size_t)nb * sizeof *pos);
    seq = calloc((size_t)nb, sizeof *seq);
    want = calloc((size_t)nb, 1);
    /* generated ids are kept only for the speculative loop (and its comparison) */
    if (spec) gen = malloc((size_t)(n_predict + BRISK_SPEC_MAX_DRAFT + 1) * sizeof *gen);
    if (!pos || !seq || !want || (spec && !gen)) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
    if (spec) {
        if (brisk_spec_prefill(spec, ids, (int32_t)n_ids, &err)) goto fail;
    } else {
        /* prefill in batches; only the last prompt token needs logits */
        if (prefill(ctx, ids, n_ids, pos, seq, want, &err)) goto fail;
        for (size_t i = 0; i < n_ids; i++) brisk_sampler_accept(smp, ids[i]);
    }
    clock_gettime(CLOCK_MONOTONIC, &t2);

    if (show_prompt) fwrite(prompt, 1, prompt_len, stdout);
    int64_t n_gen = 0;
    const char *text;
    size_t len;
    if (!spec) {
        if (plain_generate(model, ctx, smp, ts, (int32_t)n_ids, n_predict, gen, &n_gen, &err)) goto fail;
    } else {
        bool done = n_predict == 0;
        while (!done) {
            int32_t got = 0;
            if (brisk_spec_step(spec, (int32_t)(n_predict - n_gen), gen + n_gen, &got, &err)) goto fail;
            for (int32_t j = 0; j < got && !done; j++) {
                const int32_t tok = gen[n_gen++];
                if (brisk_token_is_eog(model, tok)) { done = true; break; }
                if (brisk_text_stream_push(ts, tok, &text, &len, &err)) goto fail;
                fwrite(text, 1, len, stdout);
                if (n_gen == n_predict) done = true;
            }
            fflush(stdout);
        }
    }
    brisk_text_stream_flush(ts, &text, &len);
    fwrite(text, 1, len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    clock_gettime(CLOCK_MONOTONIC, &t3);

    const double load_s = secs(&t0, &t1), pp_s = secs(&t1, &t2), tg_s = secs(&t2, &t3);
    const double tps = tg_s > 0 ? (double)n_gen / tg_s : 0.0;
    fprintf(stderr, "\nbrisk run: load %.1f ms | prompt %zu tokens, %.2f tokens/s | generated %lld tokens, %.2f tokens/s | %s kernels, %d ctx\n",
            load_s * 1e3, n_ids, pp_s > 0 ? (double)n_ids / pp_s : 0.0, (long long)n_gen, tps,
            brisk_context_isa(ctx), brisk_context_n_ctx(ctx));
    if (spec) {
        static const char *names[] = {"none", "draft", "ngram", "auto"};
        brisk_spec_stats ss;
        brisk_spec_get_stats(spec, &ss);
        fprintf(stderr, "brisk run: spec %s | acceptance %.1f%% (%lld of %lld drafted) | mean accepted length %.2f over %lld "
                        "speculative passes | target passes per token %.3f (%lld passes) | %.2f tokens/s | target %.1f ms, "
                        "drafting %.1f ms, calibration %.1f ms\n",
                names[spec_mode], ss.drafted ? 100.0 * (double)ss.accepted / (double)ss.drafted : 0.0,
                (long long)ss.accepted, (long long)ss.drafted,
                ss.spec_rounds ? (double)ss.accepted / (double)ss.spec_rounds : 0.0, (long long)ss.spec_rounds,
                n_gen ? (double)ss.target_passes / (double)n_gen : 0.0, (long long)ss.target_passes, tps,
                ss.t_target * 1e3, ss.t_draft * 1e3, ss.t_calibrate * 1e3);
        if (spec_mode == BRISK_SPEC_AUTO)
            fprintf(stderr, "brisk run: spec auto policy | passes with draft model %lld, with n-gram %lld | acceptance "
                            "estimate draft %.2f, n-gram (best bucket) %.2f | target cost c(1) %.2f ms, c(%d) %.2f ms | "
                            "draft %.2f ms/token\n",
                    (long long)ss.rounds_by_drafter[0], (long long)ss.rounds_by_drafter[1], ss.alpha_draft, ss.alpha_ngram,
                    ss.cost[1] * 1e3, ss.cost_n, ss.cost[ss.cost_n] * 1e3, ss.draft_cost * 1e3);
        if (draft_width > 1)
            fprintf(stderr, "brisk run: spec trees | %lld of %lld speculative passes verified a branching tree (%.1f nodes on "
                            "average) | %lld tokens accepted off the drafter's first choice | runner-up acceptance estimate "
                            "draft %.2f, n-gram %.2f\n",
                    (long long)ss.tree_rounds, (long long)ss.spec_rounds,
                    ss.tree_rounds ? (double)ss.tree_nodes / (double)ss.tree_rounds : 0.0, (long long)ss.alt_accepted,
                    ss.alt_draft, ss.alt_ngram);
    }
    if (compare) {
        /* the same prompt again, plainly and silently, for the speedup */
        struct timespec c0, c1;
        int64_t n_plain = 0;
        gen_plain = malloc((size_t)(n_predict + 1) * sizeof *gen_plain);
        if (!gen_plain) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
        if (brisk_seq_truncate(ctx, 0, 0, &err)) goto fail;
        brisk_sampler_reset(smp);
        if (prefill(ctx, ids, n_ids, pos, seq, want, &err)) goto fail;
        for (size_t i = 0; i < n_ids; i++) brisk_sampler_accept(smp, ids[i]);
        clock_gettime(CLOCK_MONOTONIC, &c0);
        if (plain_generate(model, ctx, smp, NULL, (int32_t)n_ids, n_predict, gen_plain, &n_plain, &err)) goto fail;
        clock_gettime(CLOCK_MONOTONIC, &c1);
        const double pt = secs(&c0, &c1), ptps = pt > 0 ? (double)n_plain / pt : 0.0;
        bool same = n_plain == n_gen;
        for (int64_t i = 0; same && i < n_gen; i++) same = gen[i] == gen_plain[i];
        fprintf(stderr, "brisk run: spec compare | plain %lld tokens, %.2f tokens/s | speculative %.2f tokens/s | speedup "
                        "%.3fx | tokens identical to plain: %s%s\n",
                (long long)n_plain, ptps, tps, ptps > 0 ? tps / ptps : 0.0, same ? "yes" : "no",
                sp.temp > 0 ? " (sampling: equal in distribution, not token for token)" : "");
    }
    if (spec_cost) {
        double cost[257];
        if (brisk_spec_measure_cost(ctx, 0, (int32_t)spec_cost, (int32_t)cost_reps, cost, &err)) goto fail;
        fprintf(stderr, "brisk run: target cost per pass at position %d (min of %lld):", brisk_seq_len(ctx, 0), (long long)cost_reps);
        for (int64_t n = 1; n <= spec_cost; n++) fprintf(stderr, " %lld:%.3f", (long long)n, cost[n] * 1e3);
        fprintf(stderr, " ms\n");
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "brisk run: %s\n", err.msg);
    free(file_buf); free(ids); free(pos); free(seq); free(want); free(gen); free(gen_plain);
    brisk_spec_free(spec);
    brisk_text_stream_free(ts);
    brisk_sampler_free(smp);
    brisk_context_free(ctx);
    brisk_model_free(draft);
    brisk_model_free(model);
    return rc;
}
