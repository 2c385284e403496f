/* fuzz_tokenizer_vocab.h: small hand-made vocabularies, built in memory with
 * the GGUF writer, so the tokenizer fuzz target and the robustness test can
 * drive every algorithm without the large files in ../shared:
 *   synth_vocab_bpe()    byte-level BPE, llama-bpe pre-tokenizer (PCRE2 path), a
 *                        few dozen merges, control and user-defined tokens;
 *   synth_vocab_gemma()  SPM-style BPE over raw UTF-8 (tokenizer.ggml.model
 *                        "gemma4"): U+2581 spaces, <0xXX> byte fallback;
 *   synth_vocab_wpm()    WordPiece ("bert") with lowercasing and accent stripping.
 * Test code only (a header of static functions). */
#ifndef BRISK_FUZZ_TOKENIZER_VOCAB_H
#define BRISK_FUZZ_TOKENIZER_VOCAB_H

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct synth_list {
    char *s[1024];
    int32_t type[1024];
    size_t n;
} synth_list;

static void synth_add(synth_list *l, const char *s, size_t len, int32_t type) {
    if (l->n >= 1024) return;
    char *c = malloc(len + 1);
    if (!c) return;
    memcpy(c, s, len);
    c[len] = 0;
    l->s[l->n] = c;
    l->type[l->n++] = type;
}

static void synth_free(synth_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->s[i]);
    l->n = 0;
}

static brisk_vocab *synth_load(brisk_gguf_writer *w) {
    uint8_t *buf = NULL;
    size_t len = 0;
    brisk_gguf *g = NULL;
    brisk_vocab *v = NULL;
    brisk_error err;
    if (brisk_gguf_writer_write_mem(w, &buf, &len, &err) == BRISK_OK && brisk_gguf_parse(buf, len, &g, &err) == BRISK_OK &&
        brisk_vocab_load(g, &v, &err) != BRISK_OK)
        fprintf(stderr, "synthetic vocab: %s\n", err.msg);
    brisk_gguf_close(g);
    free(buf);
    brisk_gguf_writer_free(w);
    return v;
}

/* GPT-2's byte -> code point map, written out as UTF-8. */
static size_t synth_byte_char(unsigned b, char *out) {
    unsigned cp;
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) cp = b;
    else if (b <= 0x20) cp = 0x100 + b;
    else if (b <= 0xA0) cp = 0x100 + 0x21 + (b - 0x7F);
    else cp = 0x143;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

static void synth_finish(brisk_gguf_writer *w, synth_list *toks, synth_list *merges) {
    brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, toks->s, toks->n);
    brisk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, toks->type, toks->n);
    if (merges && merges->n) brisk_gguf_writer_set_arr(w, "tokenizer.ggml.merges", BRISK_GGUF_STRING, merges->s, merges->n);
}

/* Merges given as "left right" with the GPT-2 names of space (Ġ) and newline (Ċ). */
static brisk_vocab *synth_vocab_bpe(void) {
    static const char *const merges_src[] = {
        "\xC4\xA0 t", "\xC4\xA0 a", "h e", "i n", "r e", "o n", "\xC4\xA0t he", "e r", "\xC4\xA0 s", "a t",
        "\xC4\xA0 \xC4\xA0", "\xC4\xA0\xC4\xA0 \xC4\xA0\xC4\xA0", "\xC4\x8A \xC4\x8A", "e n", "o r", "\xC4\xA0 w",
        "\xC4\xA0w or", "l d", "\xC4\xA0wor ld", "H e", "l l", "He ll", "Hell o", "\xC4\xA0 (", "( )", "1 2", "12 3",
        "\xC3 \xA9", "d e", "de f", "\xC4\xA0 =", "= =", "\xE2\x80 \xA6", "\xF0\x9F \xA6", "\xF0\x9F\xA6 \x99",
    };
    synth_list toks = {0}, merges = {0};
    brisk_gguf_writer *w;
    brisk_error err;
    if (brisk_gguf_writer_init(&w, 32, &err) != BRISK_OK) return NULL;
    char c[4];
    for (unsigned b = 0; b < 256; b++) synth_add(&toks, c, synth_byte_char(b, c), 1);
    for (size_t i = 0; i < sizeof merges_src / sizeof *merges_src; i++) {
        const char *m = merges_src[i], *sp = strchr(m + 1, ' ');
        char joined[64];
        size_t ll = (size_t)(sp - m), rl = strlen(sp + 1);
        memcpy(joined, m, ll);
        memcpy(joined + ll, sp + 1, rl);
        synth_add(&toks, joined, ll + rl, 1);
        synth_add(&merges, m, strlen(m), 0);
    }
    synth_add(&toks, "<|endoftext|>", 13, 3);
    synth_add(&toks, "<|im_start|>", 12, 3);
    synth_add(&toks, "<|im_end|>", 10, 3);
    synth_add(&toks, "<tool_call>", 11, 4);
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.pre", "llama-bpe");
    synth_finish(w, &toks, &merges);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)toks.n - 4);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)toks.n - 2);
    synth_free(&toks);
    synth_free(&merges);
    return synth_load(w);
}

static brisk_vocab *synth_vocab_gemma(void) {
    static const char *const merges_src[] = {
        "\xE2\x96\x81 t", "t h", "\xE2\x96\x81t he", "\xE2\x96\x81 a", "i n", "e r", "\xE2\x96\x81 \xE2\x96\x81",
        "\n \n", "o n", "H e", "l l", "He ll",
    };
    synth_list toks = {0}, merges = {0};
    brisk_gguf_writer *w;
    brisk_error err;
    if (brisk_gguf_writer_init(&w, 32, &err) != BRISK_OK) return NULL;
    synth_add(&toks, "<pad>", 5, 3);
    synth_add(&toks, "<eos>", 5, 3);
    synth_add(&toks, "<bos>", 5, 3);
    synth_add(&toks, "<unk>", 5, 2);
    for (unsigned b = 0; b < 256; b++) {
        char hx[8];
        snprintf(hx, sizeof hx, "<0x%02X>", b);
        synth_add(&toks, hx, 6, 6);
    }
    synth_add(&toks, "\xE2\x96\x81", 3, 1);
    synth_add(&toks, "\n", 1, 1);
    for (char ch = 'a'; ch <= 'z'; ch++) synth_add(&toks, &ch, 1, 1);
    synth_add(&toks, "H", 1, 1);
    for (size_t i = 0; i < sizeof merges_src / sizeof *merges_src; i++) {
        const char *m = merges_src[i], *sp = strchr(m + 1, ' ');
        char joined[64];
        size_t ll = (size_t)(sp - m), rl = strlen(sp + 1);
        memcpy(joined, m, ll);
        memcpy(joined + ll, sp + 1, rl);
        synth_add(&toks, joined, ll + rl, 1);
        synth_add(&merges, m, strlen(m), 0);
    }
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "gemma4");
    synth_finish(w, &toks, &merges);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 2);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 1);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 3);
    synth_free(&toks);
    synth_free(&merges);
    return synth_load(w);
}

static brisk_vocab *synth_vocab_wpm(void) {
    static const char *const words[] = {"hello", "world", "the", "a", "apfel", "token", "##"};
    synth_list toks = {0};
    brisk_gguf_writer *w;
    brisk_error err;
    if (brisk_gguf_writer_init(&w, 32, &err) != BRISK_OK) return NULL;
    synth_add(&toks, "[PAD]", 5, 3);
    synth_add(&toks, "[UNK]", 5, 3);
    synth_add(&toks, "[CLS]", 5, 3);
    synth_add(&toks, "[SEP]", 5, 3);
    synth_add(&toks, "[MASK]", 6, 3);
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        char t[32];
        int n = snprintf(t, sizeof t, "\xE2\x96\x81%s", words[i]);
        synth_add(&toks, t, (size_t)n, 1);
    }
    for (char ch = 'a'; ch <= 'z'; ch++) {
        char t[8] = "\xE2\x96\x81";
        t[3] = ch;
        synth_add(&toks, t, 4, 1);
        synth_add(&toks, &ch, 1, 1);
    }
    static const char *const punct[] = {"\xE2\x96\x81,", "\xE2\x96\x81!", "\xE2\x96\x81.", "\xE2\x96\x81\xE7\x9A\x84"};
    for (size_t i = 0; i < sizeof punct / sizeof *punct; i++) synth_add(&toks, punct[i], strlen(punct[i]), 1);
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert");
    synth_finish(w, &toks, NULL);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 1);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.cls_token_id", 2);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 2);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 3);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 0);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", 4);
    synth_free(&toks);
    return synth_load(w);
}

#endif
