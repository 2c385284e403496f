/* fuzz_model: libFuzzer target for everything between a model file's bytes
 * and its first logits: GGUF parse, hyperparameters, vocabulary, tensor
 * binding and repacking (brisk_model_load on a memfd, so the real mmap path
 * runs), the memory plan and context init, then one 2-token decode, the
 * logits' checks and the streaming detokenizer on their argmax.
 * Seeds: fuzz/corpus/fuzz_model/ (tiny models of every architecture and
 * weight type, written by fuzz/gen_model_seeds.c).
 * Every failure must be a status with a non-empty one-line message; an
 * assertion, a crash or a sanitizer report is a bug. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "brisk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_CHECK(cond)                                                                 \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz_model: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                     \
        }                                                                                \
    } while (0)

static void check_error(brisk_status st, const brisk_error *err) {
    FUZZ_CHECK(st < 0 && err->msg[0] != 0 && strchr(err->msg, '\n') == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const int fd = memfd_create("fuzz_model", 0);
    if (fd < 0) return 0;
    size_t off = 0;
    while (off < size) {
        const ssize_t n = write(fd, data + off, size - off);
        if (n <= 0) {
            close(fd);
            return 0;
        }
        off += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    brisk_error err = {0};
    brisk_model *m = NULL;
    brisk_context *c = NULL;
    brisk_text_stream *ts = NULL;
    brisk_status st = brisk_model_load(path, &m, &err);
    if (st) {
        check_error(st, &err);
        goto done;
    }
    brisk_model_info info;
    brisk_model_get_info(m, &info);
    FUZZ_CHECK(info.n_vocab >= 1 && info.n_vocab_tokens >= 1 && info.n_vocab_tokens <= info.n_vocab);
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 4;
    cp.n_threads = 1;
    brisk_memory_plan plan;
    if ((st = brisk_context_plan(m, &cp, &plan, &err))) {
        check_error(st, &err);
        goto done;
    }
    FUZZ_CHECK(plan.total >= plan.kv && plan.total >= plan.weights);
    if ((st = brisk_context_init(m, &cp, &c, &err))) {
        check_error(st, &err);
        goto done;
    }
    size_t kv_bytes = 0, scratch_bytes = 0;
    brisk_context_memory(c, &kv_bytes, &scratch_bytes);
    FUZZ_CHECK(kv_bytes == plan.kv && scratch_bytes == plan.scratch + plan.logits);

    /* two tokens: BOS (or 0) and the last id, which may be a padding row */
    const int32_t bos = brisk_token_bos(m);
    const int32_t tok[2] = {bos >= 0 && bos < info.n_vocab ? bos : 0, info.n_vocab - 1}, pos[2] = {0, 1}, seq[2] = {0, 0};
    const uint8_t want[2] = {1, 1};
    brisk_batch b = {.n_tokens = 2, .token = tok, .pos = pos, .seq = seq, .logits = want};
    st = brisk_decode(c, &b, &err);
    if (st) {
        check_error(st, &err);
        FUZZ_CHECK(brisk_seq_len(c, 0) == 0);   /* a refused decode appends nothing */
        goto done;
    }
    FUZZ_CHECK(brisk_n_logits(c) == 2 && brisk_seq_len(c, 0) == 2);
    if ((st = brisk_text_stream_init(m, &ts, &err))) {
        check_error(st, &err);
        goto done;
    }
    for (int32_t i = 0; i < 2; i++) {
        const float *lg = brisk_get_logits(c, i);
        FUZZ_CHECK(lg);
        int32_t best = 0;
        for (int32_t k = 0; k < info.n_vocab; k++) {
            FUZZ_CHECK(k < info.n_vocab_tokens ? isfinite(lg[k]) : lg[k] == -INFINITY);
            if (lg[k] > lg[best]) best = k;
        }
        FUZZ_CHECK(best < info.n_vocab_tokens);
        const char *text;
        size_t len;
        if ((st = brisk_text_stream_push(ts, best, &text, &len, &err))) check_error(st, &err);
    }
    const char *text;
    size_t len;
    brisk_text_stream_flush(ts, &text, &len);
done:
    brisk_text_stream_free(ts);
    brisk_context_free(c);
    brisk_model_free(m);
    close(fd);
    return 0;
}
