/* fuzz_tokenizer: libFuzzer target for the tokenizer.
 *
 * Input: one control byte, then the text. The control byte picks the
 * vocabulary (the committed SPM vocabulary tests/data/vocab/ggml-vocab-llama-spm.gguf,
 * or one of the in-memory ones of fuzz_tokenizer_vocab.h: byte-level BPE with
 * the llama3 regexes, Gemma-4-style BPE, WordPiece) and the add_special /
 * parse_special options. The vocabularies are loaded once.
 *
 * Checks: tokenizing never fails on any bytes; every id is in range; the
 * one-shot detokenizer reproduces the text where the tokenizer is lossless
 * (valid UTF-8, no U+2581, no special parsing, not WordPiece); the streaming
 * detokenizer emits valid UTF-8 on every push and, for valid UTF-8, the same
 * text as the one-shot one. */
#include "fuzz_check.h"
#include "fuzz_tokenizer_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { V_SPM, V_BPE, V_GEMMA, V_WPM, V_COUNT };

static brisk_vocab *vocabs[V_COUNT];

static brisk_vocab *load_spm(void) {
    /* the repository root from this file's path (CMake compiles it by absolute path) */
    char path[4096];
    const char *self = __FILE__, *cut = strstr(self, "fuzz/fuzz_tokenizer.c");
    int root = cut ? (int)(cut - self) : 0;
    snprintf(path, sizeof path, "%.*stests/data/vocab/ggml-vocab-llama-spm.gguf", root, self);
    brisk_gguf *g = NULL;
    brisk_vocab *v = NULL;
    brisk_error err;
    if (brisk_gguf_open(path, &g, &err) != BRISK_OK || brisk_vocab_load(g, &v, &err) != BRISK_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err.msg);
        abort();
    }
    brisk_gguf_close(g);
    return v;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    vocabs[V_SPM] = load_spm();
    vocabs[V_BPE] = synth_vocab_bpe();
    vocabs[V_GEMMA] = synth_vocab_gemma();
    vocabs[V_WPM] = synth_vocab_wpm();
    for (int i = 0; i < V_COUNT; i++) FUZZ_CHECK(vocabs[i]);
    return 0;
}

static bool valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = (uint8_t)s[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (!k || i + k > n) return false;
        uint8_t c1 = k > 1 ? (uint8_t)s[i + 1] : 0x80;
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
            return false;
        for (size_t j = 1; j < k; j++)
            if (((uint8_t)s[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int which = data[0] % V_COUNT;
    bool add_special = (data[0] >> 2) & 1, parse_special = (data[0] >> 3) & 1;
    const brisk_vocab *v = vocabs[which];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    brisk_error err;
    int32_t *ids = NULL;
    size_t n = 0;
    brisk_tokenize_opts opts = {.add_special = add_special, .parse_special = parse_special};
    FUZZ_CHECK(brisk_tokenize(v, text, len, opts, &ids, &n, &err) == BRISK_OK);
    for (size_t i = 0; i < n; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < brisk_vocab_size(v));

    char *out = NULL;
    size_t out_len = 0;
    brisk_detokenize_opts dopts = {.special = false, .strip_leading = true, .clean_spaces = false};
    FUZZ_CHECK(brisk_detokenize(v, ids, n, dopts, &out, &out_len, &err) == BRISK_OK);
    bool valid = valid_utf8(text, len);
    bool lossless = valid && !add_special && !parse_special && which != V_WPM &&
                    !memmem(text, len, "\xE2\x96\x81", 3);
    if (lossless) FUZZ_CHECK(out_len == len && memcmp(out, text, len) == 0);
    free(out);

    /* stream: same text as the one-shot detokenizer without the leading strip */
    brisk_detokenize_opts sopts = {.special = false, .strip_leading = false, .clean_spaces = false};
    FUZZ_CHECK(brisk_detokenize(v, ids, n, sopts, &out, &out_len, &err) == BRISK_OK);
    brisk_detok *d = NULL;
    FUZZ_CHECK(brisk_detok_init(&d, v, &err) == BRISK_OK);
    size_t cap = brisk_detok_push_cap(d), total = 0;
    char *buf = malloc(cap), *all = malloc(out_len * 3 + 8);
    FUZZ_CHECK(buf && all);
    for (size_t i = 0; i < n; i++) {
        size_t l = 0;
        FUZZ_CHECK(brisk_detok_push(d, ids[i], buf, cap, &l, &err) == BRISK_OK);
        FUZZ_CHECK(valid_utf8(buf, l));
        FUZZ_CHECK(total + l <= out_len * 3 + 5);
        memcpy(all + total, buf, l);
        total += l;
    }
    total += brisk_detok_flush(d, all + total, 3);
    if (valid_utf8(out, out_len)) FUZZ_CHECK(total == out_len && memcmp(all, out, total) == 0);
    FUZZ_CHECK(valid_utf8(all, total));
    free(buf);
    free(all);
    free(out);
    brisk_detok_free(d);
    free(ids);
    return 0;
}
