/* cmd_run: `brisk run` — tokenize a prompt, prefill it, then sample and stream
 * text until n tokens or end of generation. Timing goes to stderr. With
 * --spec, generation goes through the speculative generator (src/spec) and
 * stderr also gets its acceptance statistics; --spec-compare then repeats the
 * run plainly (silently) and reports the speedup. With --prompt-cache FILE
 * the prompt's KV is loaded from FILE (brisk_seq_load) and saved to it
 * (brisk_seq_save), as llama-cli's session files. */
#include "brisk.h"
#include "cli/cli.h"
#include "kv/policy.h"
#include "spec/spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const cli_use run_uses[] = {
    {.id = CLI_O_MODEL}, {.id = CLI_O_PROMPT}, {.id = CLI_O_FILE}, {.id = CLI_O_N_PREDICT, .def = "128"}, {.id = CLI_O_CTX_SIZE}, {.id = CLI_O_BATCH},
    {.id = CLI_O_THREADS}, {.id = CLI_O_TEMP}, {.id = CLI_O_TOP_K}, {.id = CLI_O_TOP_P}, {.id = CLI_O_MIN_P}, {.id = CLI_O_REPEAT_PENALTY},
    {.id = CLI_O_REPEAT_LAST_N}, {.id = CLI_O_REPEAT_MODE}, {.id = CLI_O_FREQ_PENALTY}, {.id = CLI_O_PRESENCE_PENALTY}, {.id = CLI_O_SEED},
    {.id = CLI_O_TYPICAL}, {.id = CLI_O_TOP_NSIGMA}, {.id = CLI_O_XTC_PROB}, {.id = CLI_O_XTC_THRESH}, {.id = CLI_O_MIROSTAT},
    {.id = CLI_O_MIROSTAT_LR}, {.id = CLI_O_MIROSTAT_ENT}, {.id = CLI_O_MIN_KEEP}, {.id = CLI_O_SAMPLERS},
    {.id = CLI_O_DRY_MULT}, {.id = CLI_O_DRY_BASE}, {.id = CLI_O_DRY_ALLOWED}, {.id = CLI_O_DRY_LAST_N}, {.id = CLI_O_DRY_BREAKER},
    {.id = CLI_O_ESCAPE}, {.id = CLI_O_REVERSE}, {.id = CLI_O_IGNORE_EOS}, {.id = CLI_O_NO_BOS}, {.id = CLI_O_PARSE_SPECIAL},
    {.id = CLI_O_NO_DISPLAY_PROMPT}, {.id = CLI_O_COLOR}, {.id = CLI_O_CONVERSATION},
    {.id = CLI_O_SYSTEM, .help = "system prompt (with -cnv)"}, {.id = CLI_O_CHAT_TEMPLATE, .help = "chat template file (with -cnv)"},
    {.id = CLI_O_ATTN_WINDOW}, {.id = CLI_O_ATTN_SINK}, {.id = CLI_O_MAX_INPUT}, {.id = CLI_O_VERBOSE}, {.id = CLI_O_NGL},
    {.id = CLI_O_HEADING, .heading = "prompt cache (llama-cli's; the file format is docs/KVSTATE.md):"},
    {.id = CLI_O_PROMPT_CACHE}, {.id = CLI_O_PROMPT_CACHE_ALL}, {.id = CLI_O_PROMPT_CACHE_RO},
    {.id = CLI_O_HEADING, .heading = "speculative decoding (lossless: greedy output equals plain greedy output, and\n"
                               "sampling follows the same distribution as plain sampling):"},
    {.id = CLI_O_SPEC}, {.id = CLI_O_MODEL_DRAFT}, {.id = CLI_O_DRAFT_MAX}, {.id = CLI_O_DRAFT_WIDTH}, {.id = CLI_O_DRAFT_TREE}, {.id = CLI_O_DRAFT_WINDOW},
    {.id = CLI_O_DRAFT_SINK}, {.id = CLI_O_NGRAM_MIN}, {.id = CLI_O_NO_CALIBRATE}, {.id = CLI_O_SPEC_COMPARE}, {.id = CLI_O_SPEC_COST},
    {.id = CLI_O_SPEC_COST_REPS},
    {.id = CLI_O_HEADING, .heading = "the draft model's KV cache (drafter-only compression: the target keeps its own cache,\n"
                               "-ctk/-ctv, whole, so the output stays exactly the target's; docs/KV.md):"},
    {.id = CLI_O_CACHE_TYPE_K_DRAFT}, {.id = CLI_O_CACHE_TYPE_V_DRAFT}, {.id = CLI_O_KV_POLICY_DRAFT}, {.id = CLI_O_KV_BUDGET_DRAFT},
    {.id = CLI_O_KV_SINK_DRAFT}, {.id = CLI_O_KV_WINDOW_DRAFT},
    {.id = CLI_O_HEADING, .heading = "constrained decoding (docs/CONSTRAIN.md; at most one; works with --spec):"},
    {.id = CLI_O_JSON_SCHEMA}, {.id = CLI_O_JSON_SCHEMA_FILE}, {.id = CLI_O_GRAMMAR}, {.id = CLI_O_GRAMMAR_FILE},
    {.id = CLI_O_REGEX}, {.id = CLI_O_CHOICE},
    {.id = CLI_O_CACHE_TYPE_K}, {.id = CLI_O_CACHE_TYPE_V}, {.id = CLI_O_K_HADAMARD}, {.id = CLI_O_FLASH_ATTN},
    {.id = CLI_O_HEADING, .heading = "KV retention and generation past the context (docs/KV.md; not with --spec or --prompt-cache):"},
    {.id = CLI_O_KV_POLICY}, {.id = CLI_O_KV_BUDGET}, {.id = CLI_O_KV_SINK, .help = "first slots a --kv-policy always keeps and a context shift keeps"},
    {.id = CLI_O_KV_WINDOW}, {.id = CLI_O_KV_PER_HEAD}, {.id = CLI_O_CONTEXT_SHIFT}, {.id = CLI_O_KV_PIN},
    {.id = CLI_O_PACK_CACHE},
    {.id = CLI_O_END},
};

static const cli_spec run_spec = {
    .name = "run",
    .usage = "-m MODEL (-p PROMPT | -f FILE) [options]",
    .about = "Generates text from a prompt and streams it to stdout. Load time, prompt\n"
             "tokens/s and generation tokens/s go to stderr. With -cnv it runs brisk chat\n"
             "with the same flags (-p/-f is then the first message).\n",
    .uses = run_uses,
};

static double secs(const struct timespec *a, const struct timespec *b) {
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

/* Prefill ids into sequence 0: brisk_seq_sync chunks them by the context's
 * batch and leaves the last token's logits (the prefix cache, or a loaded
 * --prompt-cache, may serve a repeated prompt; *n_reused of them). */
static brisk_status prefill(brisk_context *ctx, const int32_t *ids, size_t n_ids, int32_t *n_reused, brisk_error *err) {
    return brisk_seq_sync(ctx, 0, ids, (int32_t)n_ids, n_reused, err);
}

/* --prompt-cache: load FILE into sequence 0 when it exists, deciding as
 * llama-cli does where it can: a missing or empty file starts a new cache; a
 * cache that cannot serve this run but is intact (another model, another KV
 * shape, more tokens than -c) is ignored with a warning (and rewritten unless
 * --prompt-cache-ro). Unlike llama-cli, which stops on every failed load, only
 * a damaged file stops the run: malformed, truncated, a checksum mismatch, an
 * unknown version or not a regular file is an error (exit 1), and the file is
 * left as it is, so a damaged cache is never silently replaced.
 * *n_loaded: tokens loaded, -1 when none were. */
static brisk_status load_prompt_cache(brisk_context *ctx, const char *path, bool read_only, int32_t *n_loaded, brisk_error *err) {
    *n_loaded = -1;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno != ENOENT) return brisk_fail(err, BRISK_ERR_IO, "prompt cache %s: %s", path, strerror(errno));
        fprintf(stderr, "brisk run: prompt cache %s does not exist%s\n", path,
                read_only ? " (--prompt-cache-ro: it will not be created)" : "; it will be created");
        return BRISK_OK;
    }
    if (S_ISREG(sb.st_mode) && sb.st_size == 0) {
        fprintf(stderr, "brisk run: prompt cache %s is empty; a new one is started\n", path);
        return BRISK_OK;
    }
    brisk_error lerr = {0};
    const brisk_status st = brisk_seq_load(ctx, 0, NULL, path, &lerr);
    if (st == BRISK_OK) {
        *n_loaded = brisk_seq_len(ctx, 0);
        return BRISK_OK;
    }
    if (st == BRISK_ERR_INVALID_ARG || st == BRISK_ERR_CAPACITY) {
        fprintf(stderr, "brisk run: warning: prompt cache not used: %s; %s\n", lerr.msg,
                read_only ? "it is left as it is (--prompt-cache-ro)" : "it will be overwritten");
        return BRISK_OK;
    }
    return brisk_fail(err, st, "prompt cache unusable: %s; it is left as it is (delete it or pass another file)", lerr.msg);
}

/* Where generated text goes: the stream to stdout (NULL ts: silent), the
 * reverse prompts, and what stopped it. */
typedef struct gen_out {
    brisk_text_stream *ts;
    cli_stop *stop;
    bool ended;                /* generation ended with an end-of-generation token */
    cli_eog *eog;                /* --ignore-eos, or NULL */
    cli_stdout_state out;        /* CLOSED or FAILED ends generation */
    bool reverse_hit;
} gen_out;

/* Stream one token; false when generation must end (stdout gone, a reverse prompt). */
static bool emit(gen_out *g, int32_t tok, brisk_status *st, brisk_error *err) {
    if (!g->ts) return true;
    const char *text;
    size_t len;
    if ((*st = brisk_text_stream_push(g->ts, tok, &text, &len, err))) return false;
    fwrite(text, 1, len, stdout);
    if (cli_stop_push(g->stop, text, len)) g->reverse_hit = true;
    return !g->reverse_hit;
}

/* Plain decoding after prefill: sample, stream, decode the token, until
 * n_predict tokens, end of generation, a reverse prompt or a closed stdout.
 * Generated ids go to gen (may be NULL). With cs (retention or a context
 * shift), each token continues at the sequence's next position after making
 * room (cs: a context shift when due), and a full context ends it (*full). */
static brisk_status plain_generate(const brisk_model *model, brisk_context *ctx, brisk_sampler *smp, gen_out *g,
                                   int32_t cur_pos, int64_t n_predict, int32_t *gen, int64_t *n_gen_out, cli_ctx_shift *cs, bool *full,
                                   brisk_error *err) {
    int64_t n_gen = 0;
    brisk_status st = BRISK_OK;
    while (n_gen < n_predict) {
        const float *logits = brisk_get_logits(ctx, 0);
        int32_t tok = brisk_sampler_sample(smp, g->eog ? cli_eog_mask(g->eog, logits) : logits);
        if (gen) gen[n_gen] = tok;
        n_gen++;
        if (!g->eog && brisk_token_is_eog(model, tok)) { g->ended = true; break; }
        brisk_sampler_accept(smp, tok);
        const bool more = emit(g, tok, &st, err);
        if (st) break;
        if (g->ts && (g->out = cli_stdout_flush("run")) != CLI_STDOUT_OK) break;
        if (!more || n_gen == n_predict) break;
        if (cs) {
            bool ok = true;
            if ((st = cli_ctx_make_room(ctx, cs, 1, &ok, err))) break;
            if (!ok) { *full = true; break; }
            cur_pos = brisk_seq_next_pos(ctx, 0);
        }
        uint8_t one = 1;
        int32_t s0 = 0;
        brisk_batch b = {.n_tokens = 1, .token = &tok, .pos = &cur_pos, .seq = &s0, .logits = &one};
        if ((st = brisk_decode(ctx, &b, err))) break;
        cur_pos++;
    }
    *n_gen_out = n_gen;
    return st;
}

static bool cache_path_given(const cli_args *a) { return a->set[CLI_O_PROMPT_CACHE]; }

/* Options chat does not take, for -cnv: named in the error instead of being dropped. */
static int check_conversation(const cli_args *a) {
    static const cli_opt_id run_only[] = {
        CLI_O_NO_BOS, CLI_O_PARSE_SPECIAL, CLI_O_NO_DISPLAY_PROMPT, CLI_O_ATTN_WINDOW, CLI_O_ATTN_SINK, CLI_O_SPEC,
        CLI_O_MODEL_DRAFT, CLI_O_DRAFT_MAX, CLI_O_DRAFT_WIDTH, CLI_O_DRAFT_TREE, CLI_O_DRAFT_WINDOW, CLI_O_DRAFT_SINK,
        CLI_O_NGRAM_MIN, CLI_O_NO_CALIBRATE, CLI_O_SPEC_COMPARE, CLI_O_SPEC_COST, CLI_O_SPEC_COST_REPS,
        CLI_O_PROMPT_CACHE, CLI_O_PROMPT_CACHE_ALL, CLI_O_PROMPT_CACHE_RO, CLI_O_CACHE_TYPE_K_DRAFT, CLI_O_CACHE_TYPE_V_DRAFT,
        CLI_O_KV_POLICY_DRAFT, CLI_O_KV_BUDGET_DRAFT, CLI_O_KV_SINK_DRAFT, CLI_O_KV_WINDOW_DRAFT,
    };
    for (size_t k = 0; k < sizeof run_only / sizeof run_only[0]; k++)
        if (a->set[run_only[k]]) return cli_usage("run", "%s is not used in conversation mode (-cnv)", a->given[run_only[k]]);
    return CLI_EXIT_OK;
}

int brisk_cmd_run(int argc, char **argv) {
    const char *C = "run";
    cli_args a;
    int code;
    if (!cli_parse(&run_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    if (a.i[CLI_O_CONVERSATION]) {
        int rc = check_conversation(&a);
        cli_args_free(&a);
        return rc ? rc : brisk_cmd_chat(argc, argv);
    }
    brisk_context_params kvt = brisk_context_default_params();   /* -ctk/-ctv, checked before anything loads */
    if ((code = cli_kv_types(&a, C, &kvt))) {
        cli_args_free(&a);
        return code;
    }
    /* retention, the context shift and pinning: all but a fractional budget without -c checked before the model loads */
    cli_retention ret;
    if ((code = cli_kv_retention(&a, C, 1u << BRISK_ROLE_PROMPT | 1u << BRISK_ROLE_GENERATED, &kvt, &ret))) {
        cli_args_free(&a);
        return code;
    }
    const bool shift_on = ret.shift_on, policy_given = ret.policy_given;
    const int64_t c_early = ret.c_early;
    /* the new path: positions from the cache, room made before every batch */
    const bool retention = policy_given || shift_on;
    const char *model_path = a.s[CLI_O_MODEL], *draft_path = a.s[CLI_O_MODEL_DRAFT];
    const char *prompt_arg = a.s[CLI_O_PROMPT], *prompt_file = a.s[CLI_O_FILE];
    int64_t n_predict = a.i[CLI_O_N_PREDICT];
    const int64_t n_batch = a.i[CLI_O_BATCH], draft_max = a.i[CLI_O_DRAFT_MAX], draft_width = a.i[CLI_O_DRAFT_WIDTH];
    const int64_t draft_tree = a.i[CLI_O_DRAFT_TREE], spec_cost = a.i[CLI_O_SPEC_COST], cost_reps = a.i[CLI_O_SPEC_COST_REPS];
    const int64_t draft_window = a.i[CLI_O_DRAFT_WINDOW], attn_window = a.i[CLI_O_ATTN_WINDOW];
    const int64_t draft_sink = a.set[CLI_O_DRAFT_SINK] ? a.i[CLI_O_DRAFT_SINK] : 4;
    const int64_t attn_sink = a.set[CLI_O_ATTN_SINK] ? a.i[CLI_O_ATTN_SINK] : 4;
    const int32_t threads = cli_threads(&a);
    const bool show_prompt = !a.i[CLI_O_NO_DISPLAY_PROMPT], spec_on = a.set[CLI_O_SPEC], compare = a.i[CLI_O_SPEC_COMPARE];
    const bool verbose = a.i[CLI_O_VERBOSE], color = a.i[CLI_O_COLOR] && isatty(STDOUT_FILENO);
    static const brisk_spec_mode modes[] = {BRISK_SPEC_NONE, BRISK_SPEC_DRAFT, BRISK_SPEC_NGRAM, BRISK_SPEC_AUTO};
    const brisk_spec_mode spec_mode = modes[a.i[CLI_O_SPEC]];
    int rc = CLI_EXIT_USAGE;
    if (!model_path) { rc = cli_usage(C, "-m MODEL is required (see brisk run --help)"); goto out_args; }
    if ((rc = cli_pack_cache(&a)) != 0) goto out_args;
    rc = CLI_EXIT_USAGE;
    if (!prompt_arg == !prompt_file) { rc = cli_usage(C, "give exactly one of -p PROMPT or -f FILE"); goto out_args; }
    if (spec_mode == BRISK_SPEC_DRAFT && !draft_path) { rc = cli_usage(C, "--spec draft needs -md DRAFT_MODEL"); goto out_args; }
    if (spec_mode != BRISK_SPEC_NONE && brisk_kv_type_hyb(kvt.type_k)) {
        rc = cli_usage(C, "--spec is not available with -ctk %s: a rejected draft's queries would already have ranked the hot rows",
                       brisk_cache_type_name(kvt.type_k));
        goto out_args;
    }
    if (draft_path && spec_mode != BRISK_SPEC_DRAFT && spec_mode != BRISK_SPEC_AUTO) {
        rc = cli_usage(C, "-md is used only with --spec draft or --spec auto");
        goto out_args;
    }
    if (a.set[CLI_O_DRAFT_SINK] && !draft_window) { rc = cli_usage(C, "--draft-sink needs --draft-window N"); goto out_args; }
    if (a.set[CLI_O_ATTN_SINK] && !attn_window) { rc = cli_usage(C, "--attn-sink needs --attn-window N"); goto out_args; }
    if (draft_window && !draft_path) { rc = cli_usage(C, "--draft-window needs a draft model (-md)"); goto out_args; }
    /* the draft's cache flags: everything but a fractional budget against an unknown -c is checked here, before
     * any model loads; the budget is checked against the context once it is known (below) */
    brisk_context_params dkv = brisk_context_default_params();
    const int64_t c_given = a.set[CLI_O_CTX_SIZE] && a.i[CLI_O_CTX_SIZE] > 0 ? a.i[CLI_O_CTX_SIZE] : 0;
    if ((rc = cli_kv_draft(&a, C, draft_path != NULL, c_given, &dkv)) != 0) goto out_args;
    rc = CLI_EXIT_USAGE;
    if ((compare || draft_max || draft_width > 1 || draft_tree) && !spec_on) {
        rc = cli_usage(C, "--spec-compare, --draft-max, --draft-width and --draft-tree need --spec MODE");
        goto out_args;
    }
    if (a.i[CLI_O_IGNORE_EOS] && spec_on) { rc = cli_usage(C, "--ignore-eos is not available with --spec"); goto out_args; }
    if (a.i[CLI_O_IGNORE_EOS] && cli_constraint_given(&a)) {
        rc = cli_usage(C, "--ignore-eos is not available with a constraint (it ends with an end-of-generation token)");
        goto out_args;
    }
    if (cache_path_given(&a) && cli_constraint_given(&a)) {
        rc = cli_usage(C, "--prompt-cache is not available with a constraint");
        goto out_args;
    }
    if (a.set[CLI_O_SYSTEM] || a.set[CLI_O_CHAT_TEMPLATE]) {
        rc = cli_usage(C, "%s is used in conversation mode only (add -cnv, or use brisk chat)",
                       a.set[CLI_O_SYSTEM] ? a.given[CLI_O_SYSTEM] : a.given[CLI_O_CHAT_TEMPLATE]);
        goto out_args;
    }
    const char *cache_path = a.s[CLI_O_PROMPT_CACHE];
    const bool cache_all = a.i[CLI_O_PROMPT_CACHE_ALL], cache_ro = a.i[CLI_O_PROMPT_CACHE_RO];
    if ((cache_all || cache_ro) && !cache_path) {
        rc = cli_usage(C, "%s needs --prompt-cache FILE", cache_all ? a.given[CLI_O_PROMPT_CACHE_ALL] : a.given[CLI_O_PROMPT_CACHE_RO]);
        goto out_args;
    }
    /* a state holds K/V as full attention computes them from this prompt alone */
    if (retention && (spec_on || cache_path)) {
        rc = cli_usage(C, "%s is not available with %s (the draft's cache has --kv-policy-draft)",
                       policy_given ? "--kv-policy" : "--context-shift", spec_on ? "--spec" : "--prompt-cache");
        goto out_args;
    }
    if (cache_path && (spec_on || attn_window)) {
        rc = cli_usage(C, "--prompt-cache is not available with %s", spec_on ? "--spec" : "--attn-window");
        goto out_args;
    }
    for (int k = 0; k < a.n_list[CLI_O_REVERSE]; k++)
        if (!a.list[CLI_O_REVERSE][k][0]) { rc = cli_usage(C, "%s: an empty reverse prompt", a.given[CLI_O_REVERSE]); goto out_args; }
    cli_note_ngl(&a);

    brisk_error err = {0};
    rc = CLI_EXIT_RUNTIME;
    uint8_t *file_buf = NULL;
    char *prompt_copy = NULL;
    const char *prompt = NULL;
    size_t prompt_len = 0;
    brisk_model *model = NULL, *draft = NULL;
    brisk_context *ctx = NULL;
    brisk_sampler *smp = NULL;
    brisk_text_stream *ts = NULL;
    brisk_spec *spec = NULL;
    brisk_constraint *cons = NULL;
    int32_t *ids = NULL, *gen = NULL, *gen_plain = NULL, *dry_brk = NULL;
    size_t n_ids = 0;
    cli_stop stop = {0};
    cli_eog eog = {0};

    if (prompt_file) {
        if (cli_read_input(prompt_file, a.given[CLI_O_FILE], (size_t)a.i[CLI_O_MAX_INPUT], &file_buf, &prompt_len, &err)) goto fail;
        prompt = (const char *)file_buf;
    } else {
        prompt_len = strlen(prompt_arg);
        if (!(prompt_copy = malloc(prompt_len + 1))) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
        memcpy(prompt_copy, prompt_arg, prompt_len + 1);
        if (a.i[CLI_O_ESCAPE]) cli_unescape(prompt_copy, &prompt_len);
        prompt = prompt_copy;
    }
    if (cli_stop_init(&stop, &a, &err)) goto fail;
    struct timespec t0, t1, t2, t3;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (brisk_model_load(model_path, &model, &err)) goto fail;
    cli_note_pack_cache(C, model);
    if (draft_path && brisk_model_load(draft_path, &draft, &err)) goto fail;
    brisk_model_info info;
    brisk_model_get_info(model, &info);
    if (brisk_tokenize_text(model, prompt, prompt_len, !a.i[CLI_O_NO_BOS], a.i[CLI_O_PARSE_SPECIAL], &ids, &n_ids, &err)) goto fail;
    if (n_ids == 0) { snprintf(err.msg, sizeof err.msg, "the prompt is empty (no tokens)"); goto fail; }
    const int64_t n_ctx = cli_ctx_size(&a, info.n_ctx_train);
    if (policy_given && !c_early && (rc = cli_kv_policy(&a, C, n_ctx, 1, &kvt)) != 0) goto fail_quiet;
    rc = CLI_EXIT_RUNTIME;
    /* with retention or a context shift, generation goes past -c: -n -1 runs until end of generation (a policy
     * without a shift: until the trained positions are used up) */
    if (retention && n_predict < 0) n_predict = INT64_MAX - 1;
    /* refuse before allocating the cache: the whole request must fit */
    if (!retention && n_predict < 0) {
        n_predict = n_ctx - (int64_t)n_ids;
        if (n_predict < 1) {
            snprintf(err.msg, sizeof err.msg, "the prompt (%zu tokens) fills the context size %lld; raise -c", n_ids, (long long)n_ctx);
            err.status = BRISK_ERR_CAPACITY;
            goto fail;
        }
    }
    if (!retention && (int64_t)n_ids + n_predict > n_ctx) {
        snprintf(err.msg, sizeof err.msg, "prompt (%zu tokens) + --n-predict %lld exceeds the context size %lld; raise -c or lower -n",
                 n_ids, (long long)n_predict, (long long)n_ctx);
        goto fail;
    }
    if (cli_kv_draft_given(&a) && !c_given && (rc = cli_kv_draft(&a, C, true, n_ctx, &dkv)) != 0) goto fail_quiet;
    rc = CLI_EXIT_RUNTIME;
    const brisk_spec_draft_kv draft_kv = {.type_k = dkv.type_k, .type_v = dkv.type_v, .policy = dkv.kv_policy, .budget = dkv.kv_budget,
                                          .sink = dkv.kv_sink, .window = dkv.kv_window};
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = (int32_t)n_ctx;
    cp.n_batch = (int32_t)n_batch;
    cp.n_threads = threads;
    cp.attn_window = (int32_t)attn_window;
    cp.attn_sink = attn_window ? (int32_t)attn_sink : 0;
    cli_kv_copy(&cp, &kvt);
    brisk_memory_plan plans[2];
    if (cli_plan(C, "memory plan", model, &cp, verbose, &plans[0], &err)) goto fail;
    if (draft) {
        /* the draft context spec creates: the target's context size, the draft's own window and KV cache, default batch */
        const brisk_context_params dp = brisk_spec_draft_context_params(cp.n_ctx_seq, threads, (int32_t)draft_window,
                                                                        draft_window ? (int32_t)draft_sink : 0, &draft_kv);
        if (cli_plan(C, "draft model memory plan", draft, &dp, verbose, &plans[1], &err)) goto fail;
        if (brisk_memory_plan_check(plans, 2, &err)) goto fail;
    }
    if (brisk_context_init(model, &cp, &ctx, &err)) goto fail;
    cli_ctx_shift cs;
    cli_ctx_shift_init(&cs, ctx, &cp, shift_on, info.n_ctx_train);
    bool ctx_full = false;
    brisk_sampler_params sp;
    cli_sampler_params(&a, &sp);
    if (cli_sampler_dry(&a, model, brisk_context_n_ctx(ctx), &sp, &dry_brk, &err)) goto fail;
    if (brisk_sampler_init(&smp, &sp, info.n_vocab, &err)) goto fail;
    if (cli_constraint(&a, model, &cons, &err)) goto fail;
    fprintf(stderr, "brisk run: sampler seed: %llu\n", (unsigned long long)brisk_sampler_seed(smp));
    if (a.i[CLI_O_IGNORE_EOS] && cli_eog_init(&eog, model, info.n_vocab, &err)) goto fail;
    if (brisk_text_stream_init(model, &ts, &err)) goto fail;
    int32_t cache_loaded = -1, cache_reused = 0;
    /* the cache starts with the whole prompt: nothing new to save (llama-cli's "exact match for prompt") */
    bool cache_covers = false;
    if (cache_path) {
        if (load_prompt_cache(ctx, cache_path, cache_ro, &cache_loaded, &err)) goto fail;
        if (cache_loaded >= (int32_t)n_ids) {
            int32_t *held = malloc((size_t)cache_loaded * sizeof *held), n_held = 0;
            cache_covers = held && brisk_seq_tokens(ctx, 0, held, cache_loaded, &n_held, NULL) == BRISK_OK &&
                           !memcmp(held, ids, n_ids * sizeof *held);
            free(held);
        }
    }
    if (spec_on) {
        brisk_spec_params spp = brisk_spec_default_params();
        spp.mode = spec_mode;
        spp.draft_max = (int32_t)draft_max;
        spp.draft = draft;
        spp.n_threads = threads;
        spp.ngram_min = (int32_t)a.i[CLI_O_NGRAM_MIN];
        spp.calibrate = !a.i[CLI_O_NO_CALIBRATE];
        spp.tree_width = (int32_t)draft_width;
        spp.tree_nodes = (int32_t)draft_tree;
        spp.draft_window = (int32_t)draft_window;
        spp.draft_sink = draft_window ? (int32_t)draft_sink : 0;
        spp.draft_kv = draft_kv;
        if (draft_width > 1 && sp.temp > 0.0f && spec_mode != BRISK_SPEC_NGRAM)
            fprintf(stderr, "brisk run: note: when sampling, only n-gram trees are verified (multi-candidate rejection "
                            "sampling); the draft model drafts chains\n");
        if (brisk_spec_init(&spec, model, ctx, smp, &sp, &spp, &err)) goto fail;
        if (brisk_spec_warning(spec)[0]) fprintf(stderr, "brisk run: warning: %s\n", brisk_spec_warning(spec));
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);

    /* generated ids are kept only for the speculative loop (and its comparison) */
    if (spec) gen = malloc((size_t)(n_predict + BRISK_SPEC_MAX_DRAFT + 1) * sizeof *gen);
    if (spec && !gen) { snprintf(err.msg, sizeof err.msg, "out of memory"); goto fail; }
    if (spec) {
        if (brisk_spec_prefill(spec, ids, (int32_t)n_ids, &err)) goto fail;
    } else if (retention) {
        /* in batches the policy's room allows, shifting when due; the prompt's slots are tagged "prompt" */
        bool ok = true;
        if (cli_ctx_feed(ctx, &cs, ids, (int32_t)n_ids, NULL, BRISK_ROLE_PROMPT, &ok, &err)) goto fail;
        if (!ok) {
            snprintf(err.msg, sizeof err.msg, "the prompt (%zu tokens) passes the %s (%d positions); add --context-shift", n_ids,
                     cs.policy ? "model's trained context" : "context size", cs.pos_limit);
            err.status = BRISK_ERR_CAPACITY;
            goto fail;
        }
        for (size_t i = 0; i < n_ids; i++) brisk_sampler_accept(smp, ids[i]);
        if (brisk_seq_set_role(ctx, 0, BRISK_ROLE_GENERATED, &err)) goto fail;
    } else {
        /* prefill in batches; only the last prompt token needs logits */
        if (prefill(ctx, ids, n_ids, &cache_reused, &err)) goto fail;
        for (size_t i = 0; i < n_ids; i++) brisk_sampler_accept(smp, ids[i]);
    }
    /* the constraint starts with the output: the prompt's tokens went through the sampler before it is set */
    if (cons) {
        const brisk_mask mk = brisk_constraint_mask(cons);
        brisk_sampler_set_mask(smp, &mk);
        /* -n is the constraint's token budget: near it, only tokens after which the output can still end in time */
        if (!brisk_constraint_set_token_budget(cons, n_predict))
            fprintf(stderr, "brisk run: the vocabulary lacks a token for some single byte: the constraint cannot plan to end within -n\n");
    }
    if (cache_path) {
        fprintf(stderr, "brisk run: prompt cache: reused %d of %zu prompt tokens", cache_reused, n_ids);
        if (cache_loaded >= 0) fprintf(stderr, " (%s holds %d)", cache_path, cache_loaded);
        fputc('\n', stderr);
        /* as llama-cli: the prompt's KV is saved once it is computed, unless the file starts with it already */
        if (!cache_ro && !cache_all && !cache_covers) {
            if (brisk_seq_save(ctx, 0, NULL, cache_path, &err)) goto fail;
            if (verbose) fprintf(stderr, "brisk run: prompt cache: saved %zu tokens to %s\n", n_ids, cache_path);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t2);

    gen_out g = {.ts = ts, .stop = &stop, .eog = a.i[CLI_O_IGNORE_EOS] ? &eog : NULL};
    if (show_prompt) {
        if (color) fputs("\033[33m", stdout);
        fwrite(prompt, 1, prompt_len, stdout);
        if (color) fputs("\033[0m", stdout);
        g.out = cli_stdout_flush(C);
    }
    int64_t n_gen = 0;
    const char *text;
    size_t len;
    if (g.out != CLI_STDOUT_OK) {
        /* stdout is gone before the first token: nothing to generate for */
    } else if (!spec) {
        if (plain_generate(model, ctx, smp, &g, retention ? brisk_seq_next_pos(ctx, 0) : (int32_t)n_ids, n_predict, gen, &n_gen,
                           retention ? &cs : NULL, &ctx_full, &err))
            goto fail;
    } else {
        bool done = n_predict == 0;
        while (!done) {
            int32_t got = 0;
            if (brisk_spec_step(spec, (int32_t)(n_predict - n_gen), gen + n_gen, &got, &err)) goto fail;
            for (int32_t j = 0; j < got && !done; j++) {
                const int32_t tok = gen[n_gen++];
                if (brisk_token_is_eog(model, tok)) { done = g.ended = true; break; }
                brisk_status st = BRISK_OK;
                if (!emit(&g, tok, &st, &err)) done = true;
                if (st) goto fail;
                if (n_gen == n_predict) done = true;
            }
            if ((g.out = cli_stdout_flush(C)) != CLI_STDOUT_OK) done = true;
        }
    }
    if (g.out == CLI_STDOUT_OK) {
        brisk_text_stream_flush(ts, &text, &len);
        fwrite(text, 1, len, stdout);
        fputc('\n', stdout);
        g.out = cli_stdout_flush(C);
    }
    if (g.out == CLI_STDOUT_FAILED) goto fail_quiet;
    clock_gettime(CLOCK_MONOTONIC, &t3);
    if (cache_path && cache_all && !cache_ro) {
        /* --prompt-cache-all: the prompt and the generated tokens (all but the last, which was never decoded) */
        if (brisk_seq_save(ctx, 0, NULL, cache_path, &err)) goto fail;
        if (verbose) fprintf(stderr, "brisk run: prompt cache: saved %d tokens to %s\n", brisk_seq_len(ctx, 0), cache_path);
    }

    const double load_s = secs(&t0, &t1), pp_s = secs(&t1, &t2), tg_s = secs(&t2, &t3);
    const double tps = tg_s > 0 ? (double)n_gen / tg_s : 0.0;
    fprintf(stderr, "\nbrisk run: load %.1f ms | prompt %zu tokens, %.2f tokens/s | generated %lld tokens, %.2f tokens/s | %s kernels, %d ctx%s\n",
            load_s * 1e3, n_ids, pp_s > 0 ? (double)n_ids / pp_s : 0.0, (long long)n_gen, tps,
            brisk_context_isa(ctx), brisk_context_n_ctx(ctx),
            g.reverse_hit ? " | stopped at a reverse prompt" : g.out == CLI_STDOUT_CLOSED ? " | stdout closed" : "");
    if (retention || verbose) {
        char line[512];
        cli_ctx_shift_describe(ctx, &cp, &cs, line, sizeof line);
        fprintf(stderr, "brisk run: %s | finish reason %s\n", line,
                g.ended ? "eog" : g.reverse_hit ? "stop (a reverse prompt)" : ctx_full ? "length (the context is full; --context-shift goes on)"
                : "length");
        if (ctx_full)
            fprintf(stderr, "brisk run: generation stopped at position %d: the %s is %d positions\n", brisk_seq_next_pos(ctx, 0),
                    cs.policy ? "model's trained context" : "context size (-c)", cs.pos_limit);
    }
    if (cons)
        fprintf(stderr, "brisk run: constrained output %s\n", g.ended ? "ended by an end-of-generation token"
                : brisk_constraint_complete(cons) ? "complete but stopped by -n (no end token)" : "cut by -n (incomplete)");
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
        if (ss.draft_kv_block_bytes && (verbose || cli_kv_draft_given(&a))) {
            /* the draft's own cache: what drafter-only compression saved, and proof that its policy ran */
            fprintf(stderr, "brisk run: draft KV | K %s, V %s | ", brisk_cache_type_name(draft_kv.type_k),
                    brisk_cache_type_name(draft_kv.type_v));
            if (draft_kv.policy)
                fprintf(stderr, "%s budget %d (sink %d, window %d) | %lld slots dropped, %lld rebuilds | ", brisk_kv_policy_name(draft_kv.policy),
                        draft_kv.budget, draft_kv.sink, draft_kv.window, (long long)ss.draft_dropped, (long long)ss.draft_restarts);
            fprintf(stderr, "peak %d blocks x %zu bytes = %.1f KiB\n", ss.draft_kv_peak_blocks, ss.draft_kv_block_bytes,
                    (double)ss.draft_kv_peak_blocks * (double)ss.draft_kv_block_bytes / 1024.0);
        }
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
        brisk_sampler_set_mask(smp, NULL);
        brisk_sampler_reset(smp);
        if (prefill(ctx, ids, n_ids, NULL, &err)) goto fail;
        for (size_t i = 0; i < n_ids; i++) brisk_sampler_accept(smp, ids[i]);
        if (cons) {
            brisk_constraint_reset(cons);
            const brisk_mask mk = brisk_constraint_mask(cons);
            brisk_sampler_set_mask(smp, &mk);
        }
        clock_gettime(CLOCK_MONOTONIC, &c0);
        gen_out quiet = {0};
        if (plain_generate(model, ctx, smp, &quiet, (int32_t)n_ids, n_predict, gen_plain, &n_plain, NULL, NULL, &err)) goto fail;
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
    rc = CLI_EXIT_OK;
fail:
    if (rc) cli_fail(C, &err);
fail_quiet:
    free(file_buf); free(prompt_copy); free(ids); free(gen); free(gen_plain); free(dry_brk);
    cli_stop_free(&stop);
    cli_eog_free(&eog);
    brisk_spec_free(spec);
    brisk_text_stream_free(ts);
    brisk_sampler_free(smp);
    brisk_constraint_free(cons);
    brisk_context_free(ctx);
    brisk_model_free(draft);
    brisk_model_free(model);
out_args:
    cli_args_free(&a);
    return rc;
}
