/* cli: the `brisk` command line. Each subcommand is one file (cmd_<name>.c)
 * exporting `int brisk_cmd_<name>(int argc, char **argv)` (argv[0] is the
 * subcommand name) and registered in main.c's table.
 *
 * Every flag of every command is one row of the option table (options.c): its
 * spellings, value type, bounds, default and help. A command declares the rows
 * it takes (a cli_use list, with a per-command default where it has its own),
 * and cli_parse parses argv against them and generates --help, so a flag
 * means the same thing with the same bounds everywhere. Input and output files
 * go through io.c (regular files only, a size cap, temp file + rename).
 *
 * Exit status of every command: 0 success; 1 runtime error (a bad file, a bad
 * token id, capacity, a write error, NaN logits); 2 usage error (unknown flag,
 * bad value, missing argument). A closed stdout (EPIPE: `brisk run ... | head`)
 * is a quiet stop with status 0: the reader had what it wanted. */
#ifndef BRISK_CLI_H
#define BRISK_CLI_H

#include "base/base.h"
#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_VERSION "0.9.0"

enum { CLI_EXIT_OK = 0, CLI_EXIT_RUNTIME = 1, CLI_EXIT_USAGE = 2 };

int brisk_cmd_run(int argc, char **argv);
int brisk_cmd_chat(int argc, char **argv);
int brisk_cmd_inspect(int argc, char **argv);
int brisk_cmd_perplexity(int argc, char **argv);
int brisk_cmd_logits(int argc, char **argv);
int brisk_cmd_synth(int argc, char **argv);
int brisk_cmd_tokenize(int argc, char **argv);
int brisk_cmd_template(int argc, char **argv);
int brisk_cmd_bench(int argc, char **argv);
int brisk_cmd_batched_bench(int argc, char **argv);
int brisk_cmd_serve(int argc, char **argv);
int brisk_cmd_quantize(int argc, char **argv);
int brisk_cmd_maskbench(int argc, char **argv);

/* ---- options.c: the option table ---------------------------------------------- */

typedef enum cli_opt_id {
    CLI_O_END = 0,   /* ends a cli_use list */
    CLI_O_HEADING,   /* a cli_use that is only a heading in --help */
    /* every command */
    CLI_O_HELP, CLI_O_VERSION,
    /* common */
    CLI_O_VERBOSE, CLI_O_MODEL, CLI_O_PROMPT, CLI_O_FILE, CLI_O_N_PREDICT, CLI_O_CTX_SIZE, CLI_O_BATCH,
    CLI_O_THREADS, CLI_O_NGL, CLI_O_MAX_INPUT, CLI_O_OUTPUT,
    /* sampling */
    CLI_O_TEMP, CLI_O_TOP_K, CLI_O_TOP_P, CLI_O_MIN_P, CLI_O_REPEAT_PENALTY, CLI_O_REPEAT_LAST_N, CLI_O_REPEAT_MODE,
    CLI_O_FREQ_PENALTY, CLI_O_PRESENCE_PENALTY, CLI_O_SEED, CLI_O_TYPICAL, CLI_O_TOP_NSIGMA, CLI_O_XTC_PROB,
    CLI_O_XTC_THRESH, CLI_O_MIROSTAT, CLI_O_MIROSTAT_LR, CLI_O_MIROSTAT_ENT, CLI_O_MIN_KEEP, CLI_O_SAMPLERS,
    CLI_O_DRY_MULT, CLI_O_DRY_BASE, CLI_O_DRY_ALLOWED, CLI_O_DRY_LAST_N, CLI_O_DRY_BREAKER,
    /* prompt and generation */
    CLI_O_NO_BOS, CLI_O_PARSE_SPECIAL, CLI_O_NO_DISPLAY_PROMPT, CLI_O_ESCAPE, CLI_O_SYSTEM, CLI_O_REVERSE,
    CLI_O_IGNORE_EOS, CLI_O_CONVERSATION, CLI_O_COLOR, CLI_O_ATTN_WINDOW, CLI_O_ATTN_SINK,
    /* the prompt cache (a sequence's saved KV, run only) */
    CLI_O_PROMPT_CACHE, CLI_O_PROMPT_CACHE_ALL, CLI_O_PROMPT_CACHE_RO,
    /* speculative decoding */
    CLI_O_MODEL_DRAFT, CLI_O_SPEC, CLI_O_DRAFT_MAX, CLI_O_DRAFT_WIDTH, CLI_O_DRAFT_TREE, CLI_O_DRAFT_WINDOW,
    CLI_O_DRAFT_SINK, CLI_O_NGRAM_MIN, CLI_O_NO_CALIBRATE, CLI_O_SPEC_COMPARE, CLI_O_SPEC_COST, CLI_O_SPEC_COST_REPS,
    /* one or two commands */
    CLI_O_CHAT_TEMPLATE, CLI_O_ALL, CLI_O_CHUNKS, CLI_O_TOKENS, CLI_O_SHAPE, CLI_O_TYPE, CLI_O_IDS, CLI_O_MESSAGES,
    CLI_O_ADD_GEN_PROMPT, CLI_O_VAR,
    /* llama-bench's own meanings (bench only) */
    CLI_O_BENCH_N_PROMPT, CLI_O_BENCH_N_GEN, CLI_O_BENCH_REPS, CLI_O_BENCH_FORMAT, CLI_O_NO_ROOFLINE,
    CLI_O_BENCH_N_DEPTH,
    /* llama-batched-bench's (batched-bench only) */
    CLI_O_UBATCH, CLI_O_NPP, CLI_O_NTG, CLI_O_NPL, CLI_O_PPS, CLI_O_BB_FORMAT, CLI_O_BB_SPEC,
    CLI_O_ISA,
    /* serve */
    CLI_O_HOST, CLI_O_PORT, CLI_O_KV_SIZE, CLI_O_MAX_RUNNING, CLI_O_MAX_QUEUE, CLI_O_ALIAS, CLI_O_API_KEY, CLI_O_MAX_BODY,
    CLI_O_MAX_PROMPT_TOKENS, CLI_O_CONN_LIMIT, CLI_O_PER_IP_LIMIT, CLI_O_TIMEOUT, CLI_O_HTTP_THREADS, CLI_O_DRAIN_TIMEOUT,
    /* quantize (llama-quantize's flags) */
    CLI_O_ALLOW_REQUANTIZE, CLI_O_LEAVE_OUTPUT, CLI_O_PURE, CLI_O_IMATRIX, CLI_O_OUTPUT_TENSOR_TYPE, CLI_O_TOKEN_EMBD_TYPE,
    CLI_O_TENSOR_TYPE, CLI_O_OVERRIDE_KV, CLI_O_INCLUDE_WEIGHTS, CLI_O_EXCLUDE_WEIGHTS,
    /* brisk serve, session 8 */
    CLI_O_API_KEY_FILE, CLI_O_CORS_ORIGINS, CLI_O_LOG_PROMPTS, CLI_O_QUEUE_TIMEOUT, CLI_O_HEADER_TIMEOUT, CLI_O_SERVE_SPEC,
    CLI_O_STREAM_QUANTUM, CLI_O_KV_DIR, CLI_O_MAX_STALL,
    /* brisk serve, session 10: the scheduler's prompt budget beside decodes */
    CLI_O_PREFILL_BUDGET,
    /* brisk serve, session 12: arrival bursts started in one step */
    CLI_O_BATCH_WINDOW,
    /* constrained decoding (run, chat) */
    CLI_O_GRAMMAR, CLI_O_GRAMMAR_FILE, CLI_O_JSON_SCHEMA, CLI_O_JSON_SCHEMA_FILE, CLI_O_REGEX, CLI_O_CHOICE,
    /* the KV cache's storage types (kv_flags.c) and perplexity's KL divergence */
    CLI_O_CACHE_TYPE_K, CLI_O_CACHE_TYPE_V, CLI_O_K_HADAMARD, CLI_O_FLASH_ATTN, CLI_O_KLD_BASE, CLI_O_KLD,
    /* brisk synth, session 9 */
    CLI_O_SYNTH_VOCAB,
    /* KV retention policies (kv_flags.c; perplexity) */
    CLI_O_KV_POLICY, CLI_O_KV_BUDGET, CLI_O_KV_SINK, CLI_O_KV_WINDOW, CLI_O_KV_PER_HEAD,
    /* the packed-layout cache (common.c: cli_pack_cache) */
    CLI_O_PACK_CACHE,
    /* drafter-only compression: the draft model's KV types and retention (kv_flags.c: cli_kv_draft) */
    CLI_O_CACHE_TYPE_K_DRAFT, CLI_O_CACHE_TYPE_V_DRAFT, CLI_O_KV_POLICY_DRAFT, CLI_O_KV_BUDGET_DRAFT, CLI_O_KV_SINK_DRAFT,
    CLI_O_KV_WINDOW_DRAFT,
    /* generation past the context and pinning (run, chat; kv_flags.c) */
    CLI_O_CONTEXT_SHIFT, CLI_O_KV_PIN,
    CLI_O_COUNT
} cli_opt_id;

typedef enum cli_type {
    CLI_T_FLAG,    /* no value; i = 1 (0 when given by its negative spelling) */
    CLI_T_INT,     /* i, within [lo, hi] */
    CLI_T_FLOAT,   /* f, finite, within [lo, hi] */
    CLI_T_STR,     /* s */
    CLI_T_PATH,    /* s; a file ('-' = stdin/stdout where the help says so) */
    CLI_T_LIST,    /* repeatable string: list[], n_list */
    CLI_T_CHOICE,  /* i = index into choices ("a|b|c"); s = the word */
    CLI_T_SEED,    /* u: -1 = BRISK_SEED_RANDOM, else 0 .. 2^64-2 */
    CLI_T_SIZE,    /* i: bytes, an integer with an optional K, M or G suffix (binary), within [lo, hi] */
} cli_type;

typedef struct cli_opt {
    const char *names[4];   /* spellings, the short one first; NULL-terminated */
    const char *neg[3];     /* FLAG only: spellings that set it back to 0 */
    cli_type type;
    const char *meta;       /* the value's name in --help: N, PATH, TEXT ... */
    double lo, hi;          /* INT, FLOAT, SIZE bounds (inclusive) */
    const char *choices;    /* CHOICE: "none|draft|ngram|auto" */
    const char *def;        /* default as it would be typed; NULL = none (def_help says what happens) */
    const char *def_help;   /* default as --help words it when def is not the whole story */
    const char *help;
} cli_opt;

/* One option as a command takes it. def/def_help replace the table's default
 * for this command (defaults may differ, bounds and meaning may not); help and
 * lo/hi (with has_range) are for the documented exceptions only, which follow
 * llama.cpp's own tools (e.g. batched-bench's -c is the total KV cells). */
typedef struct cli_use {
    cli_opt_id id;
    const char *def, *def_help;
    const char *help;
    bool has_range;
    double lo, hi;
    const char *heading;    /* CLI_O_HEADING only */
} cli_use;

typedef struct cli_spec {
    const char *name;        /* "run" */
    const char *usage;       /* after "usage: brisk run " */
    const char *about;       /* paragraphs before the options */
    const cli_use *uses;     /* ends with CLI_O_END; -h and --version are added */
    const char *positional;  /* name of positional arguments in messages, NULL = none taken */
    int max_positional;
    const char *epilog;      /* after the options */
} cli_spec;

typedef struct cli_args {
    const cli_spec *spec;
    bool set[CLI_O_COUNT];          /* given on the command line */
    bool has_default[CLI_O_COUNT];  /* the value is a default (the table's or the command's) when not set */
    const char *given[CLI_O_COUNT]; /* the spelling given (for messages); the long name when unset */
    char given_buf[CLI_O_COUNT][32];
    int64_t i[CLI_O_COUNT];
    uint64_t u[CLI_O_COUNT];
    double f[CLI_O_COUNT];
    const char *s[CLI_O_COUNT];
    const char **list[CLI_O_COUNT]; /* LIST values in order, borrowed from argv */
    int n_list[CLI_O_COUNT];
    const char **pos;               /* positional arguments */
    int n_pos;
} cli_args;

/* Parse argv (argv[0] is the command) against spec. Returns true when the
 * command should go on; false with *exit_code set: 0 after --help/--version,
 * 2 after a usage error (message printed). Defaults are filled in for every
 * option of the command. cli_args_free releases the lists either way. */
bool cli_parse(const cli_spec *spec, int argc, char **argv, cli_args *a, int *exit_code);
void cli_args_free(cli_args *a);
/* The table row of an option (for messages: its long name). */
const cli_opt *cli_opt_get(cli_opt_id id);
const char *cli_opt_name(cli_opt_id id);
/* Print the generated --help of spec to f. */
void cli_print_help(const cli_spec *spec, FILE *f);
/* Print "brisk <cmd>: <message>" to stderr and return 2 (a usage error). */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* kv_flags.c: -ctk/-ctv into cp->type_k/type_v (case-insensitive llama.cpp
 * names); 0, or the exit code of a usage error naming the supported types. */
int cli_kv_types(const cli_args *a, const char *cmd, brisk_context_params *cp);
/* --kv-policy, --kv-budget (against the context n_ctx), --kv-sink, --kv-window
 * into cp; 0, or the usage error's exit code (the message names the flag).
 * A budget without a policy, or a policy of none with budget/sink/window, is
 * refused; so is a budget that cannot hold sinks + window + ubatch tokens. */
int cli_kv_policy(const cli_args *a, const char *cmd, int64_t n_ctx, int32_t ubatch, brisk_context_params *cp);
/* The KV fields cli_kv_types and cli_kv_policy filled in kv (types, Hadamard, policy, budget, sink, window,
 * per-head, pinned roles) copied into cp, the context's parameters. */
void cli_kv_copy(brisk_context_params *cp, const brisk_context_params *kv);

/* --kv-pin ROLE (repeatable) into cp->kv_pin: each a brisk_kv_role name among
 * the roles the command tags (roles: a bit mask of brisk_kv_role), and only
 * with --kv-policy or --context-shift (else nothing could be evicted). */
int cli_kv_pin(const cli_args *a, const char *cmd, uint32_t roles, bool evicting, brisk_context_params *cp);

/* run's and chat's retention flags as given, checked before the model loads:
 * --kv-policy and its flags (all but a fractional budget without -c, which
 * needs the model's context: call cli_kv_policy again then, when
 * policy_given && !c_early) and --kv-pin among roles; 0 or the usage error's
 * exit code. */
typedef struct cli_retention {
    bool policy_given;   /* a --kv-policy other than none */
    bool shift_on;       /* --context-shift */
    int64_t c_early;     /* -c N > 0 as given, else 0 */
} cli_retention;
int cli_kv_retention(const cli_args *a, const char *cmd, uint32_t roles, brisk_context_params *cp, cli_retention *r);

/* Generation past the context (run, chat): a context's shifting settings and
 * what happened. */
typedef struct cli_ctx_shift {
    bool on;                 /* --context-shift */
    bool policy;             /* a retention policy runs (kv_policy) */
    int32_t n_ctx;           /* slots per sequence (-c) */
    int32_t pos_limit;       /* positions stay below this: -c, or with a policy the model's trained context */
    int32_t n_keep;          /* first slots a shift keeps (--kv-sink) */
    int32_t batch;           /* tokens per decode: -b, or what the policy's room allows */
    int64_t n_shifts, n_discarded;
} cli_ctx_shift;
void cli_ctx_shift_init(cli_ctx_shift *cs, const brisk_context *ctx, const brisk_context_params *cp, bool on, int32_t n_ctx_train);
/* Room for n more tokens of sequence 0 (n <= cs->batch): a context shift
 * when one is due and on; *ok = false when the context (or the trained
 * positions) is full and shifting is off. */
brisk_status cli_ctx_make_room(brisk_context *ctx, cli_ctx_shift *cs, int32_t n, bool *ok, brisk_error *err);
/* Feed tokens[0..n) to sequence 0 at its next positions, role[i] each (NULL:
 * all role0), in batches of at most cs->batch, making room before each; the
 * last token's logits are kept. *ok = false when it stopped for a full context. */
brisk_status cli_ctx_feed(brisk_context *ctx, cli_ctx_shift *cs, const int32_t *tokens, int32_t n, const uint8_t *role, int32_t role0,
                          bool *ok, brisk_error *err);
/* "KV | streaming budget 64 (sink 4, window 32) | 120 slots dropped | 2 context shifts (300 slots discarded) | pinned prompt"
 * into buf (the stats line run and chat print). */
void cli_ctx_shift_describe(const brisk_context *ctx, const brisk_context_params *cp, const cli_ctx_shift *cs, char *buf, size_t cap);
/* The draft model's cache (drafter-only compression): -ctkd/-ctvd, --kv-policy-draft, --kv-budget-draft,
 * --kv-sink-draft, --kv-window-draft into dp (type_k/type_v, kv_policy/kv_budget/kv_sink/kv_window), with
 * -ctk/-ctv's messages and --kv-policy's rules (names from brisk_kv_policy_parse, so every policy src/kv knows
 * works). has_draft: -md was given (any of these flags without it is refused). n_ctx: the draft context,
 * or 0 when not known yet (before the model loads, without -c): then only the budget's form is checked, and
 * a second call with the context checks the rest. 0, or the usage error's exit code (the message names the
 * flag). */
int cli_kv_draft(const cli_args *a, const char *cmd, bool has_draft, int64_t n_ctx, brisk_context_params *dp);
/* Whether any of the draft cache flags was given (for refusals such as -cnv's). */
bool cli_kv_draft_given(const cli_args *a);

/* ---- args.c: strict value parsing -------------------------------------------------
 * Each returns false after printing "brisk <cmd>: <flag>: <why>" to stderr. */
bool cli_parse_int(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool cli_parse_float(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);
bool cli_parse_seed(const char *cmd, const char *flag, const char *s, uint64_t *out);
bool cli_parse_size(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
/* Edit distance (Levenshtein) of two strings, for "did you mean". */
size_t cli_edit_distance(const char *a, const char *b);

/* ---- io.c: files, stdout, text --------------------------------------------------- */

#define CLI_MAX_INPUT_DEFAULT "64M"

/* Read the input file named by flag ('-' = stdin) whole into a malloc'd,
 * NUL-terminated buffer (*len excludes the NUL). Only a regular file or '-'
 * is accepted: FIFOs, devices, sockets and directories are refused before any
 * read can block (stat, then open O_NONBLOCK and fstat the descriptor). More
 * than cap bytes is refused with a message naming the cap and
 * --max-input-bytes. Errors are BRISK_ERR_IO / BRISK_ERR_CAPACITY / NOMEM. */
brisk_status cli_read_input(const char *path, const char *flag, size_t cap, uint8_t **out, size_t *len, brisk_error *err);

/* constraint_flags.c: the constraint named by --grammar, --grammar-file, --json-schema, --json-schema-file,
 * --regex or --choice (at most one), or *out = NULL when none is given. */
brisk_status cli_constraint(const cli_args *a, const brisk_model *m, brisk_constraint **out, brisk_error *err);
bool cli_constraint_given(const cli_args *a);

/* Output files: brisk_outfile (base/base.h), the one atomic writer. */

/* stdout: flush and classify. A write error prints "brisk <cmd>: write to
 * stdout failed: <why>" once; a closed pipe (EPIPE) prints nothing. */
typedef enum cli_stdout_state { CLI_STDOUT_OK, CLI_STDOUT_CLOSED, CLI_STDOUT_FAILED } cli_stdout_state;
cli_stdout_state cli_stdout_flush(const char *cmd);
/* End of a command that wrote to stdout: flush; rc unchanged when that works
 * or the pipe was closed, 1 (message printed) when the write failed. */
int cli_stdout_finish(const char *cmd, int rc);

/* Process escapes in place (-e): \n \t \r \a \b \f \v \\ \" \' \? \xHH; an
 * unknown escape stays as written. *len is the new length (NULs may appear). */
void cli_unescape(char *s, size_t *len);
/* Offset of the first byte that is not part of well-formed UTF-8 (no
 * overlongs, surrogates or code points above U+10FFFF), n when all are. */
size_t cli_utf8_check(const char *s, size_t n);

/* ---- shared command steps (common.c) ----------------------------------------------- */
/* Threads for -t when not given: $BRISK_THREADS when it is a valid count, else 0 (all CPUs). */
int32_t cli_threads(const cli_args *a);
/* "-ngl has no effect" note, when given. */
void cli_note_ngl(const cli_args *a);
/* Warn when n_ctx > the model's training context (it is allowed). */
void cli_warn_ctx(const char *cmd, int64_t n_ctx, int32_t n_ctx_train);
/* Plan the context (brisk_context_plan) and print it to stderr when verbose:
 * "brisk <cmd>: <what>: weights ... = ... MiB (available: ...)". */
brisk_status cli_plan(const char *cmd, const char *what, const brisk_model *m, const brisk_context_params *cp, bool verbose,
                      brisk_memory_plan *out, brisk_error *err);
/* -c resolved: unset = the command's default, or min(4096, training context);
 * 0 = the training context; prints the training-context warning. */
int64_t cli_ctx_size(const cli_args *a, int32_t n_ctx_train);
/* Sampler parameters from the sampling options (the seed too). */
void cli_sampler_params(const cli_args *a, brisk_sampler_params *sp);
/* DRY's part that needs the model: the --dry-sequence-breaker strings (llama.cpp's defaults "\n", ":", "\"",
 * "*"; "none" for none) as token sequences into sp, *owned (caller frees after every brisk_sampler_init
 * from sp), and --dry-penalty-last-n -1 as the context size. Nothing is computed while DRY is off. */
brisk_status cli_sampler_dry(const cli_args *a, const brisk_model *m, int32_t n_ctx, brisk_sampler_params *sp,
                             int32_t **owned, brisk_error *err);

/* -r/--reverse-prompt: push each piece of generated text; true once one of
 * the strings ends inside the piece just pushed (the generated text ends with
 * it, or with it and the rest of that token's text, as llama.cpp checks it).
 * Escapes are processed under -e. */
typedef struct cli_stop {
    char **text;
    size_t *len;
    int n;
    size_t max;
    char *tail;        /* the last max-1 bytes of the generated text */
    size_t tail_len, tail_cap;
} cli_stop;
brisk_status cli_stop_init(cli_stop *s, const cli_args *a, brisk_error *err);
bool cli_stop_push(cli_stop *s, const char *text, size_t len);
void cli_stop_reset(cli_stop *s);
void cli_stop_free(cli_stop *s);

/* --ignore-eos: a copy of the logits with every end-of-generation id at
 * -INFINITY, so none is ever sampled (llama.cpp's logit bias does the same). */
typedef struct cli_eog {
    float *logits;     /* [n_vocab] */
    int32_t *ids, n_ids, n_vocab;
} cli_eog;
brisk_status cli_eog_init(cli_eog *e, const brisk_model *m, int32_t n_vocab, brisk_error *err);
const float *cli_eog_mask(cli_eog *e, const float *logits);
void cli_eog_free(cli_eog *e);

/* --pack-cache auto|off|DIR: sets BRISK_PACK_CACHE for the model load (the library reads it);
 * 0, or the usage error's exit code (DIR must be a directory). After the load,
 * cli_note_pack_cache prints "brisk <cmd>: pack cache: <what it did>" when the cache is on. */
int cli_pack_cache(const cli_args *a);
void cli_note_pack_cache(const char *cmd, const brisk_model *m);

/* Exit status for a failed library call: 1 (runtime). */
int cli_fail(const char *cmd, const brisk_error *err);

#endif
