/* test_tokenizer_robust: hostile and huge inputs (docs/TOKENIZER.md,
 * "Robustness"). Every vocabulary kind — the committed SPM vocabulary and the
 * in-memory BPE, Gemma-style BPE and WordPiece ones of
 * fuzz/fuzz_tokenizer_vocab.h — must take any bytes without failing:
 *  - a 10 MB single line (1 MB under sanitizers) and long runs of one
 *    character class, which give one huge pre-token;
 *  - random bytes, NUL bytes, invalid UTF-8, code points above U+10FFFF;
 *  - the same vocabulary used from two threads at once;
 *  - API misuse gets an error, not a crash. */
#include "test.h"
#include "../fuzz/fuzz_tokenizer_vocab.h"

#include <pthread.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static bool valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = (uint8_t)s[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if (((uint8_t)s[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

/* Tokenize, check ids, and optionally the round trip. Returns the id count. */
static size_t roundtrip(const brisk_vocab *v, const char *text, size_t len, bool expect_exact, const char *label) {
    brisk_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    brisk_tokenize_opts o = {0};
    double t0 = brisk_time_now();
    brisk_status st = brisk_tokenize(v, text, len, o, &ids, &n, &err);
    double t1 = brisk_time_now();
    CHECKF(st == BRISK_OK, "%s: %s", label, err.msg);
    bool in_range = true;
    for (size_t i = 0; i < n; i++) in_range &= ids[i] >= 0 && ids[i] < brisk_vocab_size(v);
    CHECKF(in_range, "%s: id out of range", label);
    char *out = NULL;
    size_t ol = 0;
    brisk_detokenize_opts d = {.strip_leading = true};
    CHECK(brisk_detokenize(v, ids, n, d, &out, &ol, &err) == BRISK_OK);
    if (expect_exact) CHECKF(ol == len && memcmp(out, text, len) == 0, "%s: round trip differs", label);
    if (len >= (1u << 20)) printf("%-44s %9zu bytes -> %8zu ids in %.2f s\n", label, len, n, t1 - t0);
    free(out);
    free(ids);
    return n;
}

static void test_huge(const brisk_vocab *const *v, const char *const *names, size_t nv) {
    size_t big = test_quick() ? (1u << 20) : 10u * 1000 * 1000;
    size_t runs = test_quick() ? (1u << 16) : (1u << 20);
    char *line = malloc(big + 8);
    /* a single line of words, numbers, punctuation and multi-byte text */
    static const char *const words[] = {"hello", "world", "naïve", "日本語", "🦙", "x=1;", "  ", "\t", "3.14159", "don't", "(a)"};
    size_t k = 0;
    while (k < big) {
        const char *w = words[rng() % BRISK_ARRAY_LEN(words)];
        size_t wl = strlen(w);
        if (k + wl + 1 > big) break;
        memcpy(line + k, w, wl);
        k += wl;
        line[k++] = ' ';
    }
    char label[96];
    for (size_t i = 0; i < nv; i++) {
        snprintf(label, sizeof label, "%s: one line", names[i]);
        roundtrip(v[i], line, k, brisk_vocab_get_type(v[i]) != BRISK_VOCAB_WPM, label);
    }
    /* one character class repeated: a single pre-token as long as the input */
    static const char fill[] = {' ', 'a', '!', '7', '\n'};
    for (size_t f = 0; f < sizeof fill; f++) {
        memset(line, fill[f], runs);
        for (size_t i = 0; i < nv; i++) {
            snprintf(label, sizeof label, "%s: run of '%s'", names[i], fill[f] == '\n' ? "\\n" : (char[]){fill[f], 0});
            roundtrip(v[i], line, runs, brisk_vocab_get_type(v[i]) != BRISK_VOCAB_WPM, label);
        }
    }
    free(line);
}

static void test_random_bytes(const brisk_vocab *const *v, const char *const *names, size_t nv) {
    int iters = test_quick() ? 60 : 300;
    static const char frags[] = "\xC3\xA9\xE2\x96\x81\xF0\x9F\xA6\x99\x00 a<|";
    char buf[2048];
    brisk_error err;
    for (int it = 0; it < iters; it++) {
        size_t len = rng() % sizeof buf;
        int mode = it % 3;
        for (size_t j = 0; j < len; j++) {
            uint64_t r = rng();
            /* raw bytes, mostly-ASCII with some high bytes, or UTF-8 fragments */
            buf[j] = mode == 0 ? (char)r : mode == 1 ? (char)((r & 7) ? 0x20 + (r >> 8) % 0x5F : 0x80 + (r >> 8) % 0x80)
                                                     : frags[r % (sizeof frags - 1)];
        }
        for (size_t i = 0; i < nv; i++) {
            for (int flags = 0; flags < 4; flags++) {
                brisk_tokenize_opts o = {.add_special = flags & 1, .parse_special = flags & 2};
                int32_t *ids = NULL;
                size_t n = 0;
                brisk_status st = brisk_tokenize(v[i], buf, len, o, &ids, &n, &err);
                CHECKF(st == BRISK_OK, "%s random %d: %s", names[i], it, err.msg);
                brisk_detok *d;
                CHECK(brisk_detok_init(&d, v[i], &err) == BRISK_OK);
                char out[2048];
                bool ok = true;
                for (size_t t = 0; t < n; t++) {
                    size_t l;
                    ok &= brisk_detok_push(d, ids[t], out, sizeof out, &l, &err) == BRISK_OK && valid_utf8(out, l);
                }
                CHECKF(ok, "%s random %d: stream", names[i], it);
                brisk_detok_free(d);
                free(ids);
            }
        }
    }
}

static void test_odd_code_points(const brisk_vocab *const *v, const char *const *names, size_t nv) {
    /* above U+10FFFF (llama.cpp throws on these): U+FFFD for BPE/WPM, bytes for SPM */
    static const char text[] = "a\xF4\x90\x80\x80z\xF7\xBF\xBF\xBF\x00\xF5\x80\x80\x80";
    for (size_t i = 0; i < nv; i++) {
        size_t n = roundtrip(v[i], text, sizeof text - 1, false, names[i]);
        CHECK(n > 0);
    }
}

typedef struct thread_job {
    const brisk_vocab *v;
    const char *text;
    size_t len;
    int32_t *ids;
    size_t n;
    brisk_status st;
} thread_job;

static void *thread_main(void *arg) {
    thread_job *j = arg;
    brisk_error err;
    brisk_tokenize_opts o = {.add_special = true};
    for (int r = 0; r < 3; r++) {
        free(j->ids);
        j->st = brisk_tokenize(j->v, j->text, j->len, o, &j->ids, &j->n, &err);
    }
    return NULL;
}

static void test_threads(const brisk_vocab *v) {
    static const char text[] = "Shared vocabularies are immutable: two threads, same ids. 🦙 naïve 日本語 <|im_end|>";
    thread_job jobs[2] = {{v, text, sizeof text - 1, NULL, 0, 0}, {v, text, sizeof text - 1, NULL, 0, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, thread_main, &jobs[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(jobs[0].st == BRISK_OK && jobs[1].st == BRISK_OK);
    CHECK(jobs[0].n == jobs[1].n && jobs[0].n > 0 && memcmp(jobs[0].ids, jobs[1].ids, jobs[0].n * sizeof(int32_t)) == 0);
    free(jobs[0].ids);
    free(jobs[1].ids);
}

static void test_misuse(const brisk_vocab *v) {
    brisk_error err;
    int32_t *ids = NULL;
    size_t n = 0;
    brisk_tokenize_opts o = {0};
    CHECK(brisk_tokenize(v, NULL, 5, o, &ids, &n, &err) == BRISK_ERR_INVALID_ARG && ids == NULL);
    CHECK(brisk_tokenize(v, NULL, 0, o, &ids, &n, &err) == BRISK_OK && n == 0 && ids == NULL);
    int32_t bad[2] = {3, 1 << 30};
    char *out = NULL;
    size_t ol;
    brisk_detokenize_opts d = {0};
    CHECK(brisk_detokenize(v, bad, 2, d, &out, &ol, &err) == BRISK_ERR_INVALID_ARG && out == NULL);
    CHECK(brisk_detokenize(v, bad, 0, d, &out, &ol, &err) == BRISK_OK && ol == 0 && out && out[0] == 0);
    free(out);
    char piece[2];
    size_t pl = 0;
    int32_t longest = -1;
    for (int32_t id = 0; id < brisk_vocab_size(v); id++) {
        size_t l;
        if (brisk_token_to_piece(v, id, NULL, 0, &l, NULL) == BRISK_ERR_CAPACITY && l > 2) {
            longest = id;
            break;
        }
    }
    CHECK(longest >= 0 && brisk_token_to_piece(v, longest, piece, sizeof piece, &pl, &err) == BRISK_ERR_CAPACITY && pl > 2);
    CHECK(brisk_vocab_token_text(v, -1, &pl) == NULL && pl == 0);
    CHECK(brisk_vocab_token_attr(v, brisk_vocab_size(v)) == 0);
    brisk_vocab_free(NULL);
    brisk_detok_free(NULL);
}

int main(void) {
    char path[1024];
    test_source("tests/data/vocab/ggml-vocab-llama-spm.gguf", path, sizeof path);
    brisk_gguf *g = NULL;
    brisk_vocab *spm = NULL;
    brisk_error err;
    if (brisk_gguf_open(path, &g, &err) != BRISK_OK || brisk_vocab_load(g, &spm, &err) != BRISK_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    brisk_gguf_close(g);
    brisk_vocab *v[4] = {spm, synth_vocab_bpe(), synth_vocab_gemma(), synth_vocab_wpm()};
    const char *names[4] = {"spm (llama-spm)", "bpe (llama3 regex)", "bpe (gemma4 style)", "wpm"};
    for (int i = 0; i < 4; i++) CHECKF(v[i] != NULL, "vocab %s", names[i]);
    if (!v[1] || !v[2] || !v[3]) return test_finish();

    test_huge((const brisk_vocab *const *)v, names, 4);
    test_random_bytes((const brisk_vocab *const *)v, names, 4);
    test_odd_code_points((const brisk_vocab *const *)v, names, 4);
    test_threads(v[1]);
    test_threads(v[0]);
    test_misuse(v[0]);
    for (int i = 0; i < 4; i++) brisk_vocab_free(v[i]);
    return test_finish();
}
