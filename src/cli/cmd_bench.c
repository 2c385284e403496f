/* cmd_bench: `brisk bench` — prefill and decode speed, measured the way
 * llama-bench measures pp and tg, plus the decode bandwidth roofline.
 *
 *   pp: prefill p tokens of one sequence from an empty context, in batches of
 *       up to n_batch, logits for the last token only.
 *   tg: generate n tokens one at a time from an empty context (the first one
 *       is BOS, the rest random ids), logits every step.
 *   -d N: both after N tokens of context (llama-bench's --n-depth): the
 *       sequence is filled with N tokens first, untimed, once per depth, and
 *       every warm-up and repetition runs at positions N.. and is truncated
 *       back to N afterwards, so each starts from the same N cached tokens.
 * Each test runs once as warm-up, then REPS timed times; the result is the
 * mean ± sample stddev of the per-repetition tokens/s (llama-bench's avg_ts and
 * stddev_ts). The roofline is a streaming-read bandwidth measurement over a
 * buffer much larger than the last-level cache, with the same thread count,
 * divided by the bytes one decode step reads: the active weight bytes (of
 * each 3-D expert tensor, and of the per-expert biases, only the share
 * expert_used_count / expert_count a token routes to; of an embedding that is
 * not also the output projection, one row), plus the KV cache at the mean
 * context length of the tg run, depth included. The count of every weight
 * byte is printed beside it when the two differ. */
#include "brisk.h"
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "kv/policy.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

static const cli_use bench_uses[] = {
    {.id = CLI_O_MODEL}, {.id = CLI_O_BENCH_N_PROMPT}, {.id = CLI_O_BENCH_N_GEN}, {.id = CLI_O_BATCH}, {.id = CLI_O_THREADS},
    {.id = CLI_O_BENCH_N_DEPTH}, {.id = CLI_O_BENCH_REPS}, {.id = CLI_O_BENCH_FORMAT}, {.id = CLI_O_NO_ROOFLINE}, {.id = CLI_O_ISA},
    {.id = CLI_O_VERBOSE, .help = "accepted (bench always prints the memory plan)"}, {.id = CLI_O_NGL},
    {.id = CLI_O_CACHE_TYPE_K}, {.id = CLI_O_CACHE_TYPE_V}, {.id = CLI_O_K_HADAMARD}, {.id = CLI_O_FLASH_ATTN},
    {.id = CLI_O_KV_POLICY}, {.id = CLI_O_KV_BUDGET, .help = "KV slots with --kv-policy, sinks and window included: an integer >= 1, or "
                                                             "a fraction 0 < F < 1 of the context (the deepest -d plus the longest test)"},
    {.id = CLI_O_KV_SINK}, {.id = CLI_O_KV_WINDOW}, {.id = CLI_O_KV_PER_HEAD},
    {.id = CLI_O_PACK_CACHE},
    {.id = CLI_O_END},
};

static const cli_spec bench_spec = {
    .name = "bench",
    .usage = "-m MODEL [options]",
    .about = "Measures prompt processing (pp) and text generation (tg) tokens/s like\n"
             "llama-bench, and the decode roofline (memory read bandwidth / bytes per token,\n"
             "counting active bytes: of each expert tensor the used experts' share, of an\n"
             "embedding that is not the output matrix one row; every byte is printed beside it).\n"
             "The context's memory plan goes to stderr.\n"
             "\n"
             "Exceptions to brisk's common flags, as in llama-bench: -p and -n are token\n"
             "counts (not a prompt and tokens to predict), -r is the repetitions (not a\n"
             "reverse prompt) and -o is an output format (not a path).\n",
    .uses = bench_uses,
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- memory read bandwidth ------------------------------------------------------- */

typedef struct bw_arg {
    const uint64_t *p;
    size_t n;        /* uint64 words */
    bool prefetch;   /* software prefetch 8 KiB ahead into L2, as the decode kernels do */
    uint64_t sink;
} bw_arg;

/* Wide loads: scalar 8-byte loads cannot keep enough misses in flight to
 * saturate DRAM, and would understate the roofline. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
typedef uint64_t u64x8 __attribute__((vector_size(64)));
__attribute__((target("avx512f"))) static uint64_t bw_read_avx512(const uint64_t *p, size_t n, bool prefetch) {
    u64x8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        if (prefetch)
            for (int l = 0; l < 4; l++) _mm_prefetch((const char *)(p + i + 1024 + 8 * l), _MM_HINT_T1);
        u64x8 v0, v1, v2, v3;
        memcpy(&v0, p + i, 64);
        memcpy(&v1, p + i + 8, 64);
        memcpy(&v2, p + i + 16, 64);
        memcpy(&v3, p + i + 24, 64);
        s0 ^= v0, s1 ^= v1, s2 ^= v2, s3 ^= v3;
    }
    s0 ^= s1 ^ s2 ^ s3;
    uint64_t r = 0;
    for (int k = 0; k < 8; k++) r ^= s0[k];
    return r;
}
#endif

static void *bw_read(void *arg) {
    bw_arg *a = arg;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f")) {
        a->sink = bw_read_avx512(a->p, a->n, a->prefetch);
        return NULL;
    }
#endif
    uint64_t s[8] = {0};
    for (size_t i = 0; i + 8 <= a->n; i += 8)
        for (int k = 0; k < 8; k++) s[k] ^= a->p[i + k];
    a->sink = s[0] ^ s[1] ^ s[2] ^ s[3] ^ s[4] ^ s[5] ^ s[6] ^ s[7];
    return NULL;
}

/* The read bandwidth is measured on a 1 GiB buffer in huge pages like the
 * packed weights, by nth threads each reading its share once per pass; passes
 * alternate plain reads with prefetched ones: the roofline is the best this
 * machine reads, not what one loop happens to get (4 KiB pages and plain loads
 * read 25-28 GB/s where decode itself streamed 30, on a machine whose best
 * read is 30-32). The machine's bandwidth drifts with its neighbours over
 * seconds, so the bench reads before its tests, after them, and during each
 * tg repetition (run_once's probe, between tokens, untimed), and keeps the best. */
typedef struct bw_buffer {
    uint64_t *buf;
    size_t words;
    int nth, pass;
    uint64_t sink;
} bw_buffer;

static bool bw_buffer_init(bw_buffer *b, int nth) {
    const size_t bytes = (size_t)1 << 30;
    *b = (bw_buffer){.words = bytes / 8, .nth = nth < 1 ? 1 : nth > 64 ? 64 : nth};
    b->buf = aligned_alloc((size_t)2 << 20, bytes);
    if (!b->buf) return false;
#ifdef MADV_HUGEPAGE
    madvise(b->buf, bytes, MADV_HUGEPAGE);   /* a hint: without THP the pass still measures */
#endif
    for (size_t i = 0; i < b->words; i++) b->buf[i] = i * 0x9e3779b97f4a7c15ull;
    return true;
}

static void bw_buffer_free(bw_buffer *b) {
    free(b->buf);
    if (b->sink == 42) fputc(' ', stderr);   /* keeps the reads alive */
    b->buf = NULL;
}

/* One pass; bytes/s (0 without a buffer). */
static double bw_pass(bw_buffer *b) {
    if (!b || !b->buf) return 0.0;
    bw_arg args[64];
    pthread_t tid[64];
    const int nth = b->nth;
    const uint64_t t0 = now_ns();
    for (int t = 0; t < nth; t++) {
        const size_t lo = b->words / (size_t)nth * (size_t)t, hi = t == nth - 1 ? b->words : b->words / (size_t)nth * (size_t)(t + 1);
        args[t] = (bw_arg){.p = b->buf + lo, .n = hi - lo, .prefetch = b->pass % 2 == 1};
        if (t > 0 && pthread_create(&tid[t], NULL, bw_read, &args[t]) != 0) args[t].n = 0;
    }
    bw_read(&args[0]);
    for (int t = 1; t < nth; t++) pthread_join(tid[t], NULL);
    const double s = (double)(now_ns() - t0) * 1e-9;
    for (int t = 0; t < nth; t++) b->sink ^= args[t].sink;
    b->pass++;
    return s > 0 ? (double)b->words * 8.0 / s : 0.0;
}

/* Best of `passes` passes. */
static double bw_best(bw_buffer *b, int passes) {
    double best = 0.0;
    for (int i = 0; i < passes; i++) {
        const double v = bw_pass(b);
        best = v > best ? v : best;
    }
    return best;
}

/* A tg repetition reads once every this many tokens (not after its last):
 * one pass takes ~20-40 ms, 5-10% of the wall time of 16 tokens, none of the
 * timed time. The pool's workers yield and then sleep while it runs; waking
 * them costs the next token well under a millisecond. */
#define BW_PROBE_EVERY 16

/* ---- the tests ------------------------------------------------------------------- */

typedef struct bench_result {
    const char *name;    /* "pp" or "tg" */
    int n_prompt, n_gen, n_depth;
    int kv_cap;          /* --kv-budget's slots, 0 without a policy */
    double *ts;          /* tokens/s per repetition */
    double *ns;
    double *bw;          /* tg: the best read during each repetition (bytes/s; 0: none, under BW_PROBE_EVERY + 1 tokens) */
    int reps;
    double avg_ts, sd_ts, avg_ns, sd_ns;
} bench_result;

static uint32_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* One run of the test after the depth's `depth` cached tokens (the sequence is
 * truncated back to them first); returns elapsed ns, 0 on error (message
 * printed). The first token is BOS at any depth, as in llama-bench. With a
 * retention policy (keep) the evicted slots cannot come back, so nothing is
 * truncated: every run continues the sequence at its budget (the steady
 * state a long generation reaches). */
static uint64_t run_once(brisk_context *c, const brisk_model_info *mi, int32_t bos, bool pp, int n, int n_batch, int depth, bool keep,
                         uint64_t *rng, int32_t *tok, int32_t *pos, int32_t *seq, uint8_t *want, bw_buffer *probe, double *probe_best) {
    brisk_error err = {0};
    if (keep) depth = brisk_seq_next_pos(c, 0);
    else if (brisk_seq_truncate(c, 0, depth, &err)) {
        fprintf(stderr, "brisk bench: %s\n", err.msg);
        return 0;
    }
    for (int i = 0; i < n; i++) tok[i] = (int32_t)(rng_next(rng) % (uint32_t)mi->n_vocab);
    if (bos >= 0) tok[0] = bos;
    const uint64_t t0 = now_ns();
    uint64_t paused = 0;
    const int step = pp ? n_batch : 1;
    for (int i = 0; i < n; i += step) {
        if (probe && !pp && i > 0 && i % BW_PROBE_EVERY == 0) {   /* a read between tokens, off the clock */
            const uint64_t p0 = now_ns();
            const double v = bw_pass(probe);
            if (v > *probe_best) *probe_best = v;
            paused += now_ns() - p0;
        }
        const int m = n - i < step ? n - i : step;
        for (int j = 0; j < m; j++) {
            pos[j] = depth + i + j;
            seq[j] = 0;
            want[j] = j == m - 1;
        }
        brisk_batch b = {.n_tokens = m, .token = tok + i, .pos = pos, .seq = seq, .logits = want};
        if (brisk_decode(c, &b, &err)) {
            fprintf(stderr, "brisk bench: decode: %s\n", err.msg);
            return 0;
        }
    }
    const uint64_t dt = now_ns() - t0 - paused;
    return dt ? dt : 1;
}

static void stats(const double *v, int n, double *avg, double *sd) {
    double s = 0.0, q = 0.0;
    for (int i = 0; i < n; i++) s += v[i];
    *avg = n ? s / n : 0.0;
    for (int i = 0; i < n; i++) q += (v[i] - *avg) * (v[i] - *avg);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0.0;
}

/* llama-bench's test name: "pp512", "tg128", "tg128 @ d4096" */
static void test_label(const bench_result *r, char *buf, size_t cap) {
    const int w = snprintf(buf, cap, "%s%d", r->name, r->n_prompt + r->n_gen);
    if (r->n_depth > 0 && w > 0 && (size_t)w < cap) snprintf(buf + w, cap - (size_t)w, " @ d%d", r->n_depth);
}

/* The weight bytes one decode step reads. */
typedef struct weight_count {
    double active;             /* what one token reads (see the top of the file) */
    double all;                /* every weight byte */
    uint32_t n_expert, n_used; /* 0 0: no experts */
    bool embd_row;             /* the embedding counted as one row (a separate output.weight exists) */
} weight_count;

/* From the file's tensor table; false (the caller falls back to every byte)
 * when the file cannot be read again. A tensor is per expert when its name
 * has "_exps." and its last dimension is the expert count (ffn_*_exps.weight,
 * 3-D, and gpt-oss's 2-D ffn_*_exps.bias); shared experts and the router are
 * dense. */
static bool count_weights(const char *path, const brisk_model_info *mi, weight_count *wc) {
    memset(wc, 0, sizeof *wc);
    brisk_gguf *g = NULL;
    brisk_error err = {0};
    if (brisk_gguf_open(path, &g, &err)) return false;
    char key[160];
    bool found = false;
    snprintf(key, sizeof key, "%s.expert_count", mi->arch);
    if (brisk_gguf_get_u32(g, key, &wc->n_expert, &found, &err) || !found) wc->n_expert = 0;
    snprintf(key, sizeof key, "%s.expert_used_count", mi->arch);
    if (brisk_gguf_get_u32(g, key, &wc->n_used, &found, &err) || !found || wc->n_used > wc->n_expert) wc->n_used = wc->n_expert;
    bool has_output = false;
    for (uint64_t i = 0; i < g->n_tensors; i++) has_output |= brisk_str_eq(g->tensors[i].name, "output.weight");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const brisk_gguf_tensor *t = &g->tensors[i];
        const double bytes = (double)t->nbytes;
        wc->all += bytes;
        const char *nm = t->name.ptr;
        const size_t len = t->name.len;
        bool per_expert = false;
        for (size_t k = 0; k + 6 <= len && !per_expert; k++) per_expert = !memcmp(nm + k, "_exps.", 6);
        const int64_t last = t->n_dims >= 1 ? t->ne[t->n_dims - 1] : 1;
        if (wc->n_expert > 1 && per_expert && last == (int64_t)wc->n_expert) {
            wc->active += bytes * wc->n_used / wc->n_expert;
        } else if (has_output && brisk_str_eq(t->name, "token_embd.weight") && t->n_dims == 2 && t->ne[1] > 0) {
            wc->active += bytes / (double)t->ne[1];   /* a lookup of one row */
            wc->embd_row = true;
        } else {
            wc->active += bytes;
        }
    }
    brisk_gguf_close(g);
    return true;
}

/* What one decode step of the tg test reads: the weight bytes (active or
 * all), plus K and V of its mean context (the depth and half the generated
 * tokens). */
static double bytes_per_token(double weights, double kv_row, const bench_result *r) {
    double slots = (double)r->n_depth + (double)r->n_gen / 2.0;
    if (r->kv_cap > 0 && slots > r->kv_cap) slots = r->kv_cap;   /* a retention policy's budget bounds what attention reads */
    return weights + kv_row * slots;
}

/* "active weight bytes: experts 4/32, token_embd 1 row" */
static void count_label(const weight_count *wc, char *buf, size_t cap) {
    int w = snprintf(buf, cap, "active weight bytes");
    if (wc->n_expert > 1 && w > 0 && (size_t)w < cap) w += snprintf(buf + w, cap - (size_t)w, ": experts %u/%u", wc->n_used, wc->n_expert);
    if (wc->embd_row && w > 0 && (size_t)w < cap)
        snprintf(buf + w, cap - (size_t)w, "%stoken_embd 1 row", wc->n_expert > 1 ? ", " : ": ");
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

#define MAX_DEPTHS 16

/* -d "0,4096,16384" -> out[0..*n); each in [0, 2^24]; false with a usage message. */
static bool parse_depths(const char *s, int32_t *out, int *n) {
    *n = 0;
    char buf[256];
    if (strlen(s) >= sizeof buf) {
        cli_usage("bench", "-d: the list '%.32s...' is too long", s);
        return false;
    }
    snprintf(buf, sizeof buf, "%s", s);
    for (char *p = buf;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = 0;
        int64_t v;
        if (*n == MAX_DEPTHS) {
            cli_usage("bench", "-d: at most %d depths", MAX_DEPTHS);
            return false;
        }
        if (!*p) {
            cli_usage("bench", "-d: an empty value in '%s'", s);
            return false;
        }
        if (!cli_parse_int("bench", "-d", p, 0, 1 << 24, &v)) return false;
        out[(*n)++] = (int32_t)v;
        if (!comma) return true;
        p = comma + 1;
    }
}

int brisk_cmd_bench(int argc, char **argv) {
    cli_args a;
    int code;
    if (!cli_parse(&bench_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    brisk_context_params kvt = brisk_context_default_params();   /* -ctk/-ctv, checked before anything loads */
    if ((code = cli_kv_types(&a, "bench", &kvt))) {
        cli_args_free(&a);
        return code;
    }
    /* --kv-policy and its flags, checked here; the budget's fraction needs the
     * context, known once the depths are read, so its text is kept */
    if ((code = cli_kv_policy(&a, "bench", INT32_MAX, 1, &kvt))) {
        cli_args_free(&a);
        return code;
    }
    char kv_budget_text[40] = "";
    if (kvt.kv_policy) snprintf(kv_budget_text, sizeof kv_budget_text, "%s", a.s[CLI_O_KV_BUDGET]);
    const char *model_path = a.s[CLI_O_MODEL];
    const bool json = a.i[CLI_O_BENCH_FORMAT] == 1, roofline = !a.i[CLI_O_NO_ROOFLINE];
    const int64_t n_prompt = a.i[CLI_O_BENCH_N_PROMPT], n_gen = a.i[CLI_O_BENCH_N_GEN], n_batch = a.i[CLI_O_BATCH];
    const int64_t reps = a.i[CLI_O_BENCH_REPS];
    int32_t depths[MAX_DEPTHS];
    int n_depths = 0;
    if (!parse_depths(a.s[CLI_O_BENCH_N_DEPTH], depths, &n_depths)) {
        cli_args_free(&a);
        return CLI_EXIT_USAGE;
    }
    int64_t max_depth = 0;
    for (int i = 0; i < n_depths; i++) max_depth = depths[i] > max_depth ? depths[i] : max_depth;
    int64_t threads = cli_threads(&a);
    cli_note_ngl(&a);
    /* the kernel table is chosen when the CPU's features are first read (at
     * the model load below): --isa is BRISK_ISA for this process */
    if (a.s[CLI_O_ISA] && setenv("BRISK_ISA", a.s[CLI_O_ISA], 1) != 0) {
        fprintf(stderr, "brisk bench: --isa %s: cannot set BRISK_ISA\n", a.s[CLI_O_ISA]);
        cli_args_free(&a);
        return 1;
    }
    const int pack_rc = cli_pack_cache(&a);
    cli_args_free(&a);
    if (pack_rc) return pack_rc;
    if (!model_path) {
        fprintf(stderr, "brisk bench: -m MODEL is required (see brisk bench --help)\n");
        return CLI_EXIT_USAGE;
    }
    brisk_error err = {0};
    brisk_model *model = NULL;
    if (brisk_model_load(model_path, &model, &err)) {
        fprintf(stderr, "brisk bench: %s\n", err.msg);
        return 1;
    }
    cli_note_pack_cache("bench", model);
    brisk_model_info mi;
    brisk_model_get_info(model, &mi);
    brisk_context_params cp = brisk_context_default_params();
    cp.type_k = kvt.type_k;
    cp.type_v = kvt.type_v;
    cp.k_hadamard = kvt.k_hadamard;
    const int64_t longest = n_prompt > n_gen ? n_prompt : n_gen, need_ctx = max_depth + longest + 1;
    /* the context holds the deepest depth plus the longest test: refuse one past what the model was trained for */
    if (mi.n_ctx_train > 0 && max_depth + longest > mi.n_ctx_train) {
        fprintf(stderr, "brisk bench: -d %lld + %s %lld = %lld tokens is over %s's training context (%d tokens)\n", (long long)max_depth,
                n_prompt > n_gen ? "-p" : "-n", (long long)longest, (long long)(max_depth + longest), model_path, mi.n_ctx_train);
        brisk_model_free(model);
        return 1;
    }
    cp.n_ctx_seq = (int32_t)need_ctx;
    /* --kv-policy: the budget a fraction of that context; batches of at most
     * the room beside sinks and window (the policy cuts before each) */
    cp.kv_policy = kvt.kv_policy;
    cp.kv_per_head = kvt.kv_per_head;
    if (kvt.kv_policy) {
        brisk_error berr = {0};
        int32_t budget = 0;
        if (brisk_kv_budget_parse(kv_budget_text, (int32_t)need_ctx, &budget, &berr)) {
            fprintf(stderr, "brisk bench: --kv-budget: %s\n", berr.msg);
            brisk_model_free(model);
            return CLI_EXIT_USAGE;
        }
        if ((int64_t)kvt.kv_sink + kvt.kv_window >= budget) {
            fprintf(stderr, "brisk bench: --kv-budget %s = %d slots cannot hold the %d sinks (--kv-sink) and the %d-slot window (--kv-window)\n",
                    kv_budget_text, budget, kvt.kv_sink, kvt.kv_window);
            brisk_model_free(model);
            return CLI_EXIT_USAGE;
        }
        cp.kv_budget = budget;
        cp.kv_sink = kvt.kv_sink;
        cp.kv_window = kvt.kv_window;
        cp.kv_tokens = budget;   /* the pool sized to the budget: the memory really saved */
    }
    /* prompt passes and the depth fill go in batches of up to -b tokens */
    const int64_t widest = n_prompt > max_depth ? n_prompt : max_depth;
    cp.n_batch = (int32_t)(n_batch < widest ? n_batch : (widest > 0 ? widest : 1));
    cp.n_seq = 1;
    const int step = cp.kv_policy ? (int)BRISK_MIN((int64_t)cp.n_batch, (int64_t)cp.kv_budget - cp.kv_sink - cp.kv_window) : cp.n_batch;
    if (threads == 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1 : n;
    }
    cp.n_threads = (int32_t)threads;
    brisk_context *ctx = NULL;
    brisk_memory_plan plan;
    if (cli_plan("bench", "memory plan", model, &cp, true, &plan, &err) || brisk_context_init(model, &cp, &ctx, &err)) {
        fprintf(stderr, "brisk bench: %s\n", err.msg);
        brisk_model_free(model);
        return 1;
    }
    const int nth = (int)threads;
    const size_t maxn = (size_t)need_ctx;
    int32_t *tok = malloc(maxn * sizeof *tok), *pos = malloc(maxn * sizeof *pos), *seq = malloc(maxn * sizeof *seq);
    uint8_t *want = malloc(maxn);
    bench_result res[2 * MAX_DEPTHS];
    int n_res = 0, rc = 0;
    uint64_t rng = 1234;
    const int32_t bos = brisk_token_bos(model);
    bw_buffer rb = {0};
    bw_buffer *probe = roofline && n_gen > 0 && bw_buffer_init(&rb, nth) ? &rb : NULL;
    double bw = bw_best(probe, 6);   /* then during each tg repetition and after the tests */
    for (int di = 0; di < n_depths && rc == 0 && tok && pos && seq && want; di++) {
        const int depth = depths[di];
        if (depth > 0 && (n_prompt > 0 || n_gen > 0)) {
            /* the context to test at: depth tokens (BOS, then random ids) prefilled untimed, as a prompt */
            fprintf(stderr, "brisk bench: filling the context to depth %d (untimed)\n", depth);
            if (brisk_seq_truncate(ctx, 0, 0, &err) || !run_once(ctx, &mi, bos, true, depth, step, 0, false, &rng, tok, pos, seq, want, NULL, NULL)) {
                rc = 1;
                break;
            }
        }
        const bool keep = cp.kv_policy != 0;
        for (int test = 0; test < 2; test++) {
            const bool pp = test == 0;
            const int n = (int)(pp ? n_prompt : n_gen);
            if (n == 0) continue;
            bench_result *r = &res[n_res];
            *r = (bench_result){.name = pp ? "pp" : "tg", .n_prompt = pp ? n : 0, .n_gen = pp ? 0 : n, .n_depth = depth, .reps = (int)reps,
                              .kv_cap = cp.kv_policy ? cp.kv_budget : 0};
            r->ts = calloc((size_t)reps, sizeof(double));
            r->ns = calloc((size_t)reps, sizeof(double));
            r->bw = calloc((size_t)reps, sizeof(double));
            if (!r->ts || !r->ns || !r->bw) { rc = 1; break; }
            n_res++;
            /* warm-up: llama-bench warms pp with one prompt pass and tg with one token */
            if (!run_once(ctx, &mi, bos, pp, pp ? n : 1, step, depth, keep, &rng, tok, pos, seq, want, NULL, NULL)) { rc = 1; break; }
            for (int k = 0; k < reps; k++) {
                const uint64_t dt = run_once(ctx, &mi, bos, pp, n, step, depth, keep, &rng, tok, pos, seq, want, probe, &r->bw[k]);
                if (r->bw[k] > bw) bw = r->bw[k];
                if (!dt) { rc = 1; break; }
                r->ns[k] = (double)dt;
                r->ts[k] = (double)n * 1e9 / (double)dt;
            }
            stats(r->ts, r->reps, &r->avg_ts, &r->sd_ts);
            stats(r->ns, r->reps, &r->avg_ns, &r->sd_ns);
            if (rc) break;
        }
    }
    if (!tok || !pos || !seq || !want) { fprintf(stderr, "brisk bench: out of memory\n"); rc = 1; }

    /* roofline for decode: every weight byte plus the KV cache at the mean tg position (bytes_per_token) */
    /* bytes per element of each cache type (brisk_cache_type order: f16, f32, q8_0, q4_0, k4, k2 blocks of 32;
     * hyb4/hyb2: k4/k2's plus the hot F16 rows read per slot, 5% of two bytes) */
    static const double kv_elem_bytes[] = {2.0, 4.0, 34.0 / 32.0, 18.0 / 32.0, 20.0 / 32.0, 12.0 / 32.0, 20.0 / 32.0 + 0.1, 12.0 / 32.0 + 0.1};
    const double kv_row = (double)mi.n_layer * mi.n_head_kv * mi.head_dim * (kv_elem_bytes[cp.type_k] + kv_elem_bytes[cp.type_v]);
    if (roofline && rc == 0) {
        const double after = bw_best(probe, 6);
        bw = after > bw ? after : bw;
    }
    weight_count wc;
    if (count_weights(model_path, &mi, &wc)) {   /* the mapped bytes, less what a token does not read */
        wc.active = (double)mi.weight_bytes - (wc.all - wc.active);
    } else {
        wc = (weight_count){.active = (double)mi.weight_bytes};
    }
    const bool differ = wc.active != (double)mi.weight_bytes;
    wc.all = (double)mi.weight_bytes;
    char count[96];
    if (differ) count_label(&wc, count, sizeof count);
    else snprintf(count, sizeof count, "every weight byte");
    const char *name = strrchr(model_path, '/');
    name = name ? name + 1 : model_path;
    const char *isa = brisk_context_isa(ctx);
    if (rc == 0 && json) {
        printf("[\n");
        for (int i = 0; i < n_res; i++) {
            const bench_result *r = &res[i];
            printf("  {\n    \"engine\": \"brisk\",\n    \"model_filename\": ");
            json_str(model_path);
            printf(",\n    \"model_size\": %zu,\n    \"model_n_params\": %llu,\n    \"backends\": \"CPU\",\n    \"isa\": ", mi.weight_bytes,
                   (unsigned long long)mi.n_params);
            json_str(isa);
            printf(",\n    \"n_batch\": %d,\n    \"n_threads\": %d,\n    \"n_prompt\": %d,\n    \"n_gen\": %d,\n    \"n_depth\": %d,\n", cp.n_batch,
                   nth, r->n_prompt, r->n_gen, r->n_depth);
            printf("    \"avg_ns\": %.0f,\n    \"stddev_ns\": %.0f,\n    \"avg_ts\": %.6f,\n    \"stddev_ts\": %.6f,\n", r->avg_ns, r->sd_ns,
                   r->avg_ts, r->sd_ts);
            printf("    \"samples_ns\": [");
            for (int k = 0; k < r->reps; k++) printf("%s%.0f", k ? ", " : " ", r->ns[k]);
            printf(" ],\n    \"samples_ts\": [");
            for (int k = 0; k < r->reps; k++) printf("%s%.6f", k ? ", " : " ", r->ts[k]);
            printf(" ]");
            if (r->n_gen && bw > 0) {
                const double bytes_tok = bytes_per_token(wc.active, kv_row, r), roof = bw / bytes_tok;
                const double all_tok = bytes_per_token(wc.all, kv_row, r), roof_all = bw / all_tok;
                printf(",\n    \"read_bandwidth_gbs\": %.3f,\n    \"bytes_per_token\": %.0f,\n    \"roofline_ts\": %.3f,\n"
                       "    \"roofline_pct\": %.2f,\n    \"roofline_count\": ", bw * 1e-9, bytes_tok, roof, 100.0 * r->avg_ts / roof);
                json_str(count);
                printf(",\n    \"all_bytes_per_token\": %.0f,\n    \"roofline_all_ts\": %.3f,\n    \"roofline_all_pct\": %.2f", all_tok,
                       roof_all, 100.0 * r->avg_ts / roof_all);
                if (r->bw[0] > 0) {   /* per repetition: the best read between its tokens, and its t/s against that roofline */
                    printf(",\n    \"read_bandwidth_during_gbs\": [");
                    for (int k = 0; k < r->reps; k++) printf("%s%.3f", k ? ", " : " ", r->bw[k] * 1e-9);
                    printf(" ],\n    \"roofline_during_pct\": [");
                    for (int k = 0; k < r->reps; k++) printf("%s%.2f", k ? ", " : " ", r->bw[k] > 0 ? 100.0 * r->ts[k] * bytes_tok / r->bw[k] : 0.0);
                    printf(" ]");
                }
            }
            printf("\n  }%s\n", i + 1 < n_res ? "," : "");
        }
        printf("]\n");
    } else if (rc == 0) {
        printf("| model | size | params | isa | threads | test | t/s |\n");
        printf("| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
        for (int i = 0; i < n_res; i++) {
            const bench_result *r = &res[i];
            char test[48];
            test_label(r, test, sizeof test);
            printf("| %s | %.2f MiB | %.2f B | %s | %d | %s | %.2f ± %.2f |\n", name, (double)mi.weight_bytes / 1048576.0,
                   (double)mi.n_params * 1e-9, isa, nth, test, r->avg_ts, r->sd_ts);
        }
        for (int i = 0; i < n_res; i++) {
            const bench_result *r = &res[i];
            if (!r->n_gen || bw <= 0) continue;
            const double bytes_tok = bytes_per_token(wc.active, kv_row, r), roof = bw / bytes_tok;
            char test[48];
            test_label(r, test, sizeof test);
            printf("\ndecode roofline (%s): read bandwidth %.2f GB/s (%d threads) / %.1f MB per token = %.2f t/s; %s reaches %.1f%%\n",
                   count, bw * 1e-9, nth, bytes_tok * 1e-6, roof, test, 100.0 * r->avg_ts / roof);
            if (differ) {
                const double all_tok = bytes_per_token(wc.all, kv_row, r), roof_all = bw / all_tok;
                printf("  counting every weight byte instead: %.1f MB per token = %.2f t/s; %.1f%%\n", all_tok * 1e-6, roof_all,
                       100.0 * r->avg_ts / roof_all);
            }
            if (r->bw[0] > 0) {   /* each repetition against the best read taken between its own tokens */
                printf("  per repetition, against the best read during it:");
                for (int k = 0; k < r->reps; k++)
                    printf("%s %.1f%% (%.2f GB/s)", k ? "," : "", r->bw[k] > 0 ? 100.0 * r->ts[k] * bytes_tok / r->bw[k] : 0.0, r->bw[k] * 1e-9);
                printf("\n");
            }
        }
    }
    for (int i = 0; i < n_res; i++) {
        free(res[i].ts);
        free(res[i].ns);
        free(res[i].bw);
    }
    bw_buffer_free(&rb);
    free(tok); free(pos); free(seq); free(want);
    brisk_context_free(ctx);
    brisk_model_free(model);
    return cli_stdout_finish("bench", rc);
}
