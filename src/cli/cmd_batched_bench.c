/* cmd_batched_bench: `brisk batched-bench` — many sequences decoded together,
 * measured as llama-batched-bench measures them, with its flags and output
 * (the md table and the jsonl field names), so the two compare directly.
 *
 * For every (pp, tg, pl) of -npp x -ntg x -npl:
 *   prompt: pl sequences of pp random tokens each (one shared prompt with
 *     -pps: computed once for sequence 0, then forked to the others, so the
 *     forks share its KV blocks), decoded in chunks of the physical batch
 *     (tokens of several sequences in one pass), logits for each prompt's
 *     last token: T_PP, S_PP = prompt tokens computed / T_PP;
 *   generation: tg steps, each one batch of pl tokens (one per sequence),
 *     logits for all: T_TG, S_TG = pl * tg / T_TG.
 * Random prompts differ per sequence (as llama-batched-bench's do), so no
 * prefix-cache hit can raise S_PP; every configuration starts from an empty
 * cache of its own tokens. Exception to brisk's common flags, as in
 * llama-batched-bench: -c is the total KV cells of all sequences.
 *
 * --spec off|ngram|auto runs each configuration through the scheduler
 * instead: pl requests of pp random tokens (one request with n = pl under
 * -pps: the prompt prefilled once, then forked), each generating 1 + tg
 * tokens greedily (EOG ignored); T_PP ends with the step in which the last
 * request sampled its first token (with pl x pp beyond -b, later prompt
 * steps also carry the first requests' decodes), T_TG is the rest, S_TG =
 * pl x tg / T_TG. Speculation's drafts and accepted tokens go to stderr.
 * "off" is the baseline that "auto" is measured against (same loop, same
 * sampling). */
#include "brisk.h"
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_use bb_uses[] = {
    {.id = CLI_O_MODEL},
    {.id = CLI_O_CTX_SIZE, .def = "2048", .def_help = "2048",
     .help = "total KV cells of all sequences (llama-batched-bench's -c); configurations that need more are skipped"},
    {.id = CLI_O_BATCH, .def = "2048", .help = "logical batch: tokens submitted per decode call (split into -ub passes)"},
    {.id = CLI_O_UBATCH}, {.id = CLI_O_NPP}, {.id = CLI_O_NTG}, {.id = CLI_O_NPL}, {.id = CLI_O_PPS},
    {.id = CLI_O_THREADS}, {.id = CLI_O_BB_FORMAT}, {.id = CLI_O_VERBOSE, .help = "accepted (the memory plan is always printed)"},
    {.id = CLI_O_NGL}, {.id = CLI_O_BB_SPEC}, {.id = CLI_O_PACK_CACHE}, {.id = CLI_O_END},
};

static const cli_spec bb_spec = {
    .name = "batched-bench",
    .usage = "-m MODEL [-c N] [-b N] [-ub N] [-npp LIST] [-ntg LIST] [-npl LIST] [-pps] [--spec MODE] [options]",
    .about = "Decodes pl sequences at once, as llama-batched-bench does: a prompt of pp tokens\n"
             "each (one shared prompt with -pps), then tg steps of one token per sequence.\n"
             "Prints PP, TG, B (= pl), N_KV, T_PP, S_PP, T_TG, S_TG, T and S per configuration.\n"
             "\n"
             "Exception to brisk's common flags, as in llama-batched-bench: -c is the total KV\n"
             "cells of all sequences, not a per-sequence context.\n"
             "\n"
             "--spec MODE runs the sequences through brisk's scheduler, sampled greedily, with\n"
             "speculation off, ngram or auto: compare S_TG of --spec auto with --spec off.\n",
    .uses = bb_uses,
};

/* "1,2,4" -> out[0..*n) (each in [lo, hi]); false with a usage message. */
static bool parse_list(const char *flag, const char *s, int64_t lo, int64_t hi, int32_t *out, int *n, int cap) {
    *n = 0;
    char buf[512];
    if (strlen(s) >= sizeof buf) {
        cli_usage("batched-bench", "%s: the list is too long", flag);
        return false;
    }
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (*n == cap) {
            cli_usage("batched-bench", "%s: at most %d values", flag, cap);
            return false;
        }
        if (!cli_parse_int("batched-bench", flag, tok, lo, hi, &v)) return false;
        out[(*n)++] = (int32_t)v;
    }
    if (*n == 0) {
        cli_usage("batched-bench", "%s: no values in '%s'", flag, s);
        return false;
    }
    return true;
}

static uint32_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* Decode the n tokens of the arrays in chunks of at most ub tokens. */
static brisk_status decode_chunks(brisk_context *c, int32_t n, const int32_t *tok, const int32_t *pos, const int32_t *seq,
                                  const uint8_t *want, int32_t ub, brisk_error *err) {
    for (int32_t i = 0; i < n; i += ub) {
        const int32_t m = n - i < ub ? n - i : ub;
        brisk_batch b = {.n_tokens = m, .token = tok + i, .pos = pos + i, .seq = seq + i, .logits = want + i};
        brisk_status st = brisk_decode(c, &b, err);
        if (st) return st;
    }
    return BRISK_OK;
}


/* ---- the scheduler's loop (--spec) -------------------------------------------------------------- */

/* user: the choice's token count, tokens[choice] of its request's run of counts */
static void bb_on_token(void *user, int64_t id, int32_t choice, int32_t token, brisk_finish finish) {
    (void)id;
    (void)finish;
    if (token >= 0) ((int64_t *)user)[choice]++;
}

/* One configuration through brisk_sched: *t_pp and *t_tg in seconds. */
static brisk_status bb_sched_run(brisk_context *c, int32_t pp, int32_t tg, int32_t pl, bool pps, int32_t n_batch, int32_t ub,
                                 brisk_sched_spec spec, int32_t n_text, uint64_t *rng, int32_t *prompt, double *t_pp, double *t_tg,
                                 int64_t *drafted, int64_t *accepted, brisk_error *err) {
    brisk_sched_params sp = brisk_sched_default_params();
    sp.n_batch = n_batch;
    sp.n_ubatch = ub;
    sp.max_running = pl;
    brisk_sched *s = NULL;
    brisk_status st = brisk_sched_init(&s, c, &sp, err);
    if (st) return st;
    int64_t *counts = calloc((size_t)pl, sizeof *counts);   /* tokens per choice: pl requests, or one of pl choices */
    if (!counts) {
        brisk_sched_free(s);
        return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory for %d requests", pl);
    }
    const int32_t n_req = pps ? 1 : pl;
    for (int32_t r = 0; r < n_req && !st; r++) {
        for (int32_t i = 0; i < pp; i++) prompt[i] = (int32_t)(rng_next(rng) % (uint32_t)n_text);
        brisk_sched_request rq = brisk_sched_default_request();
        rq.prompt = prompt;
        rq.n_prompt = pp;
        rq.max_tokens = tg + 1;   /* the first from the prompt's logits, then tg decodes */
        rq.n = pps ? pl : 1;
        rq.ignore_eog = true;
        rq.spec = spec;
        rq.on_token = bb_on_token;
        rq.user = &counts[r];
        st = brisk_sched_add(s, &rq, NULL, err);
    }
    const double t0 = brisk_time_now();
    double t1 = t0;
    bool pp_done = false;
    brisk_sched_info info = {0};
    while (!st && brisk_sched_pending(s) > 0) {
        if ((st = brisk_sched_step(s, &info, err))) break;
        if (!pp_done) {
            int32_t firsts = 0;
            for (int32_t r = 0; r < pl; r++) firsts += counts[r] > 0;
            if (firsts == pl) {   /* every choice has sampled its first token */
                pp_done = true;
                t1 = brisk_time_now();
            }
        }
    }
    const double t2 = brisk_time_now();
    *t_pp = t1 - t0;
    *t_tg = t2 - t1;
    *drafted = info.n_drafted;
    *accepted = info.n_accepted;
    free(counts);
    brisk_sched_free(s);
    return st;
}

int brisk_cmd_batched_bench(int argc, char **argv) {
    cli_args a;
    int code;
    if (!cli_parse(&bb_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    enum { MAXL = 64 };
    int32_t npp[MAXL], ntg[MAXL], npl[MAXL];
    int n_pp = 0, n_tg = 0, n_pl = 0;
    const char *model_path = a.s[CLI_O_MODEL];
    const int64_t n_kv_max = a.i[CLI_O_CTX_SIZE], n_batch = a.i[CLI_O_BATCH], n_ubatch = a.i[CLI_O_UBATCH];
    const bool pps = a.i[CLI_O_PPS] != 0, jsonl = a.i[CLI_O_BB_FORMAT] == 1, use_sched = a.set[CLI_O_BB_SPEC];
    static const brisk_sched_spec spec_modes[] = {BRISK_SCHED_SPEC_OFF, BRISK_SCHED_SPEC_NGRAM, BRISK_SCHED_SPEC_AUTO};
    const brisk_sched_spec spec = use_sched ? spec_modes[a.i[CLI_O_BB_SPEC]] : BRISK_SCHED_SPEC_OFF;
    static const char *const spec_names[] = {"off", "ngram", "auto"};
    int32_t threads = cli_threads(&a);
    if (threads <= 0) threads = (int32_t)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads <= 0) threads = 1;
    bool ok = parse_list("-npp", a.s[CLI_O_NPP], 1, 1 << 20, npp, &n_pp, MAXL) && parse_list("-ntg", a.s[CLI_O_NTG], 0, 1 << 20, ntg, &n_tg, MAXL) &&
              parse_list("-npl", a.s[CLI_O_NPL], 1, 4096, npl, &n_pl, MAXL);
    cli_note_ngl(&a);
    const int pack_rc = ok ? cli_pack_cache(&a) : 0;
    cli_args_free(&a);
    if (!ok) return CLI_EXIT_USAGE;
    if (pack_rc) return pack_rc;
    if (!model_path) return cli_usage("batched-bench", "-m MODEL is required (see brisk batched-bench --help)");
    if (n_kv_max < 1) return cli_usage("batched-bench", "-c: the total KV cells must be at least 1");

    brisk_error err = {0};
    brisk_model *model = NULL;
    brisk_context *c = NULL;
    int32_t *tok = NULL, *pos = NULL, *seq = NULL;
    uint8_t *want = NULL;
    int rc = CLI_EXIT_RUNTIME;
    if (brisk_model_load(model_path, &model, &err)) return cli_fail("batched-bench", &err);
    cli_note_pack_cache("batched-bench", model);
    brisk_model_info mi;
    brisk_model_get_info(model, &mi);
    int32_t max_pl = 1;
    for (int i = 0; i < n_pl; i++) max_pl = npl[i] > max_pl ? npl[i] : max_pl;
    /* n_ctx is brisk's per-sequence cap and its pool's token budget at once:
     * -c cells over max_pl sequences fit (the pool adds a partial block per extra sequence) */
    const int32_t ub = (int32_t)(n_ubatch < n_batch ? n_ubatch : n_batch);
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = (int32_t)n_kv_max;
    cp.n_batch = ub;
    cp.n_seq = max_pl;
    cp.n_threads = threads;
    brisk_memory_plan plan;
    if (cli_plan("batched-bench", "memory plan", model, &cp, true, &plan, &err) || brisk_context_init(model, &cp, &c, &err)) {
        rc = cli_fail("batched-bench", &err);
        goto done;
    }
    const size_t cap = (size_t)n_kv_max + (size_t)max_pl;
    tok = malloc(cap * sizeof *tok);
    pos = malloc(cap * sizeof *pos);
    seq = malloc(cap * sizeof *seq);
    want = malloc(cap);
    if (!tok || !pos || !seq || !want) {
        fprintf(stderr, "brisk batched-bench: out of memory for batches of %zu tokens\n", cap);
        goto done;
    }
    uint64_t rng = 0x5eedull;
    const int32_t n_text = mi.n_vocab_tokens;
    /* warm up: 16 tokens of sequence 0, as llama-batched-bench does */
    {
        const int32_t n = n_kv_max < 16 ? (int32_t)n_kv_max : 16;
        for (int32_t i = 0; i < n; i++) tok[i] = (int32_t)(rng_next(&rng) % (uint32_t)n_text), pos[i] = i, seq[i] = 0, want[i] = 0;
        want[n - 1] = 1;
        if (decode_chunks(c, n, tok, pos, seq, want, ub, &err) || brisk_seq_truncate(c, 0, 0, &err)) {
            rc = cli_fail("batched-bench", &err);
            goto done;
        }
    }
    if (!jsonl) {
        printf("\nbrisk batched-bench: n_kv_max = %lld, n_batch = %lld, n_ubatch = %lld, flash_attn = 1, is_pp_shared = %d, "
               "is_tg_separate = 0, n_gpu_layers = 0, n_threads = %d, n_threads_batch = %d, isa = %s\n\n",
               (long long)n_kv_max, (long long)n_batch, (long long)n_ubatch, pps, threads, threads,
               brisk_context_isa(c));
        printf("|%6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s",
               "S_TG t/s", "T s", "S t/s");
        printf("|%6s-|-%6s-|-%4s-|-%6s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|\n", "------", "------", "----", "------", "--------",
               "--------", "--------", "--------", "--------", "--------");
    }
    for (int ip = 0; ip < n_pp; ip++)
        for (int it = 0; it < n_tg; it++)
            for (int il = 0; il < n_pl; il++) {
                const int32_t pp = npp[ip], tg = ntg[it], pl = npl[il];
                /* the cells llama-batched-bench counts (its default, non-unified KV) */
                const int64_t n_ctx_req = pps ? (int64_t)pl * pp + (int64_t)pl * tg : (int64_t)pl * (pp + tg);
                if (n_ctx_req > n_kv_max) continue;
                for (int32_t s = 0; s < max_pl; s++) brisk_seq_truncate(c, s, 0, NULL);
                double t_pp = 0.0, t_tg = 0.0;
                if (use_sched) {
                    int64_t drafted = 0, accepted = 0;
                    if ((int64_t)pp + tg + 1 > n_kv_max) continue;   /* a sequence's prompt + 1 + tg tokens must fit -c */
                    if (bb_sched_run(c, pp, tg, pl, pps, (int32_t)n_batch, ub, spec, n_text, &rng, tok, &t_pp, &t_tg, &drafted,
                                     &accepted, &err)) {
                        rc = cli_fail("batched-bench", &err);
                        goto done;
                    }
                    if (spec != BRISK_SCHED_SPEC_OFF)
                        fprintf(stderr, "batched-bench: --spec %s, pp %d, tg %d, pl %d: %lld drafts, %lld accepted\n",
                                spec_names[spec], pp, tg, pl, (long long)drafted, (long long)accepted);
                    goto report;
                }
                int32_t n = 0;
                for (int32_t j = 0; j < (pps ? 1 : pl); j++)
                    for (int32_t i = 0; i < pp; i++, n++) {
                        tok[n] = (int32_t)(rng_next(&rng) % (uint32_t)n_text);
                        pos[n] = i;
                        seq[n] = j;
                        want[n] = i == pp - 1;
                    }
                const double t0 = brisk_time_now();
                if (decode_chunks(c, n, tok, pos, seq, want, ub, &err)) {
                    rc = cli_fail("batched-bench", &err);
                    goto done;
                }
                t_pp = brisk_time_now() - t0;
                if (pps)
                    for (int32_t s = 1; s < pl; s++)
                        if (brisk_seq_fork(c, 0, s, &err)) {
                            rc = cli_fail("batched-bench", &err);
                            goto done;
                        }
                const double t1 = brisk_time_now();
                for (int32_t i = 0; i < tg; i++) {
                    for (int32_t j = 0; j < pl; j++) {
                        tok[j] = (int32_t)(rng_next(&rng) % (uint32_t)n_text);
                        pos[j] = pp + i;
                        seq[j] = j;
                        want[j] = 1;
                    }
                    if (decode_chunks(c, pl, tok, pos, seq, want, ub, &err)) {
                        rc = cli_fail("batched-bench", &err);
                        goto done;
                    }
                }
                t_tg = brisk_time_now() - t1;
            report:;
                const double t = t_pp + t_tg;
                const double speed_pp = (pps ? pp : (double)pl * pp) / t_pp;
                const double speed_tg = tg ? (double)pl * tg / t_tg : 0.0;
                const double speed = ((pps ? pp : (double)pl * pp) + (double)pl * tg) / t;
                if (jsonl)
                    printf("{\"n_kv_max\": %lld, \"n_batch\": %lld, \"n_ubatch\": %lld, \"flash_attn\": 1, \"is_pp_shared\": %d, "
                           "\"n_gpu_layers\": 0, \"n_threads\": %d, \"n_threads_batch\": %d, \"pp\": %d, \"tg\": %d, \"pl\": %d, "
                           "\"n_kv\": %lld, \"t_pp\": %f, \"speed_pp\": %f, \"t_tg\": %f, \"speed_tg\": %f, \"t\": %f, \"speed\": %f}\n",
                           (long long)n_kv_max, (long long)n_batch, (long long)n_ubatch, pps, threads, threads, pp, tg, pl,
                           (long long)n_ctx_req, t_pp, speed_pp, t_tg, speed_tg, t, speed);
                else
                    printf("|%6d | %6d | %4d | %6lld | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", pp, tg, pl,
                           (long long)n_ctx_req, t_pp, speed_pp, t_tg, speed_tg, t, speed);
                const cli_stdout_state out = cli_stdout_flush("batched-bench");
                if (out != CLI_STDOUT_OK) {   /* a closed pipe is a quiet stop; a failed write was reported */
                    rc = out == CLI_STDOUT_CLOSED ? CLI_EXIT_OK : CLI_EXIT_RUNTIME;
                    goto done;
                }
            }
    if (!jsonl) putchar('\n');
    rc = CLI_EXIT_OK;
done:
    free(tok);
    free(pos);
    free(seq);
    free(want);
    brisk_context_free(c);
    brisk_model_free(model);
    return cli_stdout_finish("batched-bench", rc);
}
