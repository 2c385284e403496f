/* fuzz_model: libFuzzer target for everything between a model file's bytes
 * and its first logits: GGUF parse, hyperparameters, vocabulary, tensor
 * binding and repacking (brisk_model_load on a memfd, so the real mmap path
 * runs), the memory plan and context init, then one 2-token decode, the
 * logits' checks and the streaming detokenizer on their argmax, then a fork
 * and a brisk_seq_sync of a longer token list (the shared KV blocks).
 * Seeds: fuzz/corpus/fuzz_model/ (tiny models of every architecture and
 * weight type, written by fuzz/gen_model_seeds.c).
 *
 * Half the mutations are libFuzzer's byte-level ones; the other half are
 * GGUF-aware (LLVMFuzzerCustomMutator below): the input is parsed, one
 * metadata value is replaced by a value of another type or an extreme one
 * (arrays of floats, strings or arrays; NaN, inf, 0, -1, 2^32-1; an empty
 * array), and the file is rewritten. A byte flip almost never changes a
 * value's type tag and keeps the file parseable, so without this the class of
 * bug "a typed hyperparameter reaches an assert" is out of reach.
 * Every failure must be a status with a non-empty one-line message; an
 * assertion, a crash or a sanitizer report is a bug. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fuzz_check.h"
#include "brisk.h"
#include "gguf/gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
    cp.n_ctx_seq = 64;
    cp.n_batch = 4;
    cp.n_seq = 2;
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
    /* sequences that know their tokens: a fork shares the two tokens, a sync
     * of a longer list keeps them and computes the rest */
    int32_t got[4], n_got = 0;
    FUZZ_CHECK(brisk_seq_tokens(c, 0, got, 4, &n_got, &err) == BRISK_OK && n_got == 2 && got[0] == tok[0] && got[1] == tok[1]);
    if ((st = brisk_seq_fork(c, 0, 1, &err))) {
        check_error(st, &err);
        goto done;
    }
    FUZZ_CHECK(brisk_seq_len(c, 1) == 2);
    const int32_t more[5] = {tok[0], tok[1], 0, info.n_vocab_tokens - 1, tok[1]};
    int32_t reused = -1;
    if ((st = brisk_seq_sync(c, 1, more, 5, &reused, &err))) check_error(st, &err);
    else FUZZ_CHECK(brisk_seq_len(c, 1) == 5 && reused >= 0 && reused <= 4);
done:
    brisk_text_stream_free(ts);
    brisk_context_free(c);
    brisk_model_free(m);
    close(fd);
    return 0;
}

/* ---- GGUF-aware mutations ----------------------------------------------------------- */

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static uint64_t mix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Set key to a hostile value picked by r. */
static brisk_status set_hostile(brisk_gguf_writer *w, const char *key, uint64_t r, brisk_error *err) {
    static const float f32s[] = {NAN, INFINITY, -INFINITY, 0.0f, -1.0f, 1e30f, 1e-30f, 2.0f};
    static const uint32_t u32s[] = {0, 1, 2, 3, 7, 64, 65536, UINT32_MAX};
    static const uint8_t inner[8] = {2, 0, 0, 0, 2, 0, 0, 0};   /* two u32 in GGUF encoding */
    const char *strs[2] = {"2", "yarn"};
    switch (r % 10) {
    case 0: return brisk_gguf_writer_set_u32(w, key, u32s[(r >> 8) % 8]);
    case 1: return brisk_gguf_writer_set_i32(w, key, -(int32_t)((r >> 8) % 3) - 1);
    case 2: return brisk_gguf_writer_set_f32(w, key, f32s[(r >> 8) % 8]);
    case 3: return brisk_gguf_writer_set_bool(w, key, (r >> 8) & 1);
    case 4: return brisk_gguf_writer_set_str(w, key, strs[(r >> 8) & 1]);
    case 5: return brisk_gguf_writer_set_arr(w, key, BRISK_GGUF_FLOAT32, &f32s[(r >> 8) % 7], 1 + (r >> 16) % 2);
    case 6: return brisk_gguf_writer_set_arr(w, key, BRISK_GGUF_STRING, strs, 1 + (r >> 8) % 2);
    case 7: return brisk_gguf_writer_set_arr(w, key, BRISK_GGUF_UINT32, &u32s[(r >> 8) % 7], (r >> 16) % 3);
    case 8: {
        brisk_gguf_value e = {.type = BRISK_GGUF_ARRAY};
        e.v.arr.elem_type = BRISK_GGUF_UINT32;
        e.v.arr.count = 2;
        e.v.arr.data = inner;
        e.v.arr.nbytes = sizeof inner;
        return brisk_gguf_writer_set_arr_nested(w, key, &e, 1, err);
    }
    default: return brisk_gguf_writer_set_u32(w, key, (uint32_t)(r >> 8));
    }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    uint64_t x = seed;
    if (mix(&x) % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
    uint8_t *copy = malloc(size ? size : 1);
    brisk_gguf *g = NULL;
    brisk_gguf_writer *w = NULL;
    uint8_t *out = NULL;
    size_t len = 0, result = 0;
    brisk_error err = {0};
    if (!copy) return LLVMFuzzerMutate(data, size, max_size);
    memcpy(copy, data, size);
    if (brisk_gguf_parse(copy, size, &g, &err) || g->n_kv == 0 || brisk_gguf_writer_init(&w, 0, &err)) goto fallback;
    const uint64_t victim = mix(&x) % g->n_kv, r = mix(&x);
    bool ok = true;
    for (uint64_t i = 0; i < g->n_kv && ok; i++) {
        const brisk_gguf_kv *kv = &g->kv[i];
        char key[256];
        if (kv->key.len >= sizeof key || memchr(kv->key.ptr, 0, kv->key.len)) {
            ok = false;
            break;
        }
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        if (!strcmp(key, "general.alignment")) ok = brisk_gguf_writer_set_value(w, key, &kv->value, &err) == BRISK_OK;
        else if (i == victim) ok = set_hostile(w, key, r, &err) == BRISK_OK;
        else ok = brisk_gguf_writer_set_value(w, key, &kv->value, &err) == BRISK_OK;
    }
    for (uint64_t i = 0; i < g->n_tensors && ok; i++) {
        const brisk_gguf_tensor *t = &g->tensors[i];
        char name[BRISK_GGUF_MAX_NAME];
        if (t->name.len >= sizeof name || memchr(t->name.ptr, 0, t->name.len)) {
            ok = false;
            break;
        }
        memcpy(name, t->name.ptr, t->name.len);
        name[t->name.len] = 0;
        ok = brisk_gguf_writer_add_tensor_borrowed(w, name, t->type, t->n_dims, t->ne, t->data, (size_t)t->nbytes, &err) == BRISK_OK;
    }
    if (!ok || brisk_gguf_writer_write_mem(w, &out, &len, &err) || len > max_size) goto fallback;
    memcpy(data, out, len);
    result = len;
    goto done;
fallback:
    result = LLVMFuzzerMutate(data, size, max_size);
done:
    free(out);
    brisk_gguf_writer_free(w);
    brisk_gguf_close(g);
    free(copy);
    return result;
}
