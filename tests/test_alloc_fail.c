/* test_alloc_fail: allocation-failure injection over model load, context
 * init, decode and the text stream (Lua's ltests.c idea). This binary is
 * linked with -Wl,--wrap for malloc, calloc, realloc, aligned_alloc,
 * posix_memalign, strdup and strndup (CMakeLists.txt), so every allocation
 * brisk's own code makes comes through the wrappers below; libc's internal
 * ones and those inside PCRE2/Jansson do not.
 *
 * For each model: one clean run counts the allocations A; then for every
 * N in 1..A the N-th allocation fails, and the run must end with
 * BRISK_ERR_NOMEM and a message at the stage that allocated, never crash,
 * and leak nothing (ASan's leak check at exit covers every N). */
#include "brisk.h"
#include "test.h"

#include <stdbool.h>
#include <stdint.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t sz);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

static bool armed;
static long n_calls, fail_at;   /* fail the fail_at-th call while armed (0 = never) */

static bool inject(void) {
    if (!armed) return false;
    return ++n_calls == fail_at;
}

void *__wrap_malloc(size_t n) { return inject() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t sz) { return inject() ? NULL : __real_calloc(n, sz); }
void *__wrap_realloc(void *p, size_t n) { return inject() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t align, size_t n) { return inject() ? NULL : __real_aligned_alloc(align, n); }
int __wrap_posix_memalign(void **p, size_t align, size_t n) { return inject() ? 12 /* ENOMEM */ : __real_posix_memalign(p, align, n); }
char *__wrap_strdup(const char *s) { return inject() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return inject() ? NULL : __real_strndup(s, n); }

typedef enum { STAGE_LOAD, STAGE_CONTEXT, STAGE_DECODE, STAGE_STREAM, STAGE_DONE } stage;
static const char *stage_name[] = {"load", "context", "decode", "text stream", "done"};

/* One whole run; returns the stage it stopped at and that stage's status. */
static stage run_once(const char *path, brisk_status *st_out, brisk_error *err) {
    brisk_model *m = NULL;
    brisk_context *c = NULL;
    brisk_text_stream *ts = NULL;
    stage at = STAGE_LOAD;
    brisk_status st = brisk_model_load(path, &m, err);
    if (st) goto done;
    at = STAGE_CONTEXT;
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = 64;
    cp.n_batch = 4;
    cp.n_threads = 1;
    if ((st = brisk_context_init(m, &cp, &c, err))) goto done;
    at = STAGE_DECODE;
    const int32_t tok[3] = {1, 10, 20}, pos[3] = {0, 1, 2}, seq[3] = {0, 0, 0};
    const uint8_t want[3] = {0, 1, 1};
    brisk_batch b = {.n_tokens = 3, .token = tok, .pos = pos, .seq = seq, .logits = want};
    if ((st = brisk_decode(c, &b, err))) goto done;
    at = STAGE_STREAM;
    if ((st = brisk_text_stream_init(m, &ts, err))) goto done;
    const char *text;
    size_t len;
    for (int32_t i = 3; i < 30 && !st; i++) st = brisk_text_stream_push(ts, i, &text, &len, err);
    if (st) goto done;
    brisk_text_stream_flush(ts, &text, &len);
    at = STAGE_DONE;
done:
    brisk_text_stream_free(ts);
    brisk_context_free(c);
    brisk_model_free(m);
    *st_out = st;
    return at;
}

static void sweep(const char *path) {
    brisk_error err = {0};
    brisk_status st;
    armed = true;
    n_calls = 0;
    fail_at = 0;
    const stage clean = run_once(path, &st, &err);
    armed = false;
    const long total = n_calls;
    CHECKF(clean == STAGE_DONE && st == BRISK_OK, "%s: clean run stopped at %s: %s", path, stage_name[clean], err.msg);
    if (clean != STAGE_DONE) return;
    long per_stage[STAGE_DONE + 1] = {0}, bad = 0;
    for (long n = 1; n <= total; n++) {
        err = (brisk_error){0};
        armed = true;
        n_calls = 0;
        fail_at = n;
        const stage at = run_once(path, &st, &err);
        armed = false;
        per_stage[at]++;
        if (at == STAGE_DONE || st != BRISK_ERR_NOMEM || !err.msg[0]) {
            if (bad++ < 10)
                fprintf(stderr, "FAIL %s: allocation %ld of %ld failed: run ended at %s with status %d (%s) '%s'\n", path, n, total,
                        stage_name[at], st, brisk_status_str(st), err.msg);
        }
    }
    CHECKF(bad == 0, "%s: %ld of %ld injected failures were not reported as BRISK_ERR_NOMEM", path, bad, total);
    printf("%s: %ld allocations, each failed once: %ld in load, %ld in context init, %ld in decode, %ld in the text stream\n", path,
           total, per_stage[STAGE_LOAD], per_stage[STAGE_CONTEXT], per_stage[STAGE_DECODE], per_stage[STAGE_STREAM]);
}

int main(void) {
    /* one model per kind of load path: packed Q4_0 (llama), biases (qwen2),
     * Q/K norms (qwen3), a K-quant, tied output with YaRN, a padded vocabulary,
     * a mixture of experts (gpt-oss) */
    static const char *models[] = {
        "fuzz/corpus/fuzz_model/llama-Q4_0.gguf",  "fuzz/corpus/fuzz_model/qwen2-Q8_0.gguf",
        "fuzz/corpus/fuzz_model/qwen3-Q4_0.gguf",  "fuzz/corpus/fuzz_model/llama-Q4_K.gguf",
        "fuzz/corpus/fuzz_model/llama-tied-yarn-Q8_0.gguf", "fuzz/corpus/fuzz_model/llama-padded-vocab-Q8_0.gguf",
        "fuzz/corpus/fuzz_model/gpt-oss-micro-F32.gguf",   /* experts with biases, sinks, windows */
    };
    char path[1024];
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        test_source(models[i], path, sizeof path);
        CHECKF(test_exists(path), "missing committed model %s", path);
        if (test_exists(path)) sweep(path);
    }
    return test_finish();
}
