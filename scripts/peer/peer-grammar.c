// peer-grammar: llama.cpp's verdict on whether texts are sentences of a GBNF
// grammar, for recording test data (tests/data/constrain/gbnf-verdicts/). Not
// part of brisk; links the peer's libllama (see ../../shared/tools/peer/setup.sh).
//
// usage: peer-grammar VOCAB.gguf GRAMMAR.gbnf TEXT_FILE...
// For each text file it prints one line "accept FILE" or "reject FILE at byte
// N" (N = where the first token the grammar refuses starts; N = the text's
// length when every token is allowed but the grammar is not complete there).
// A grammar llama.cpp cannot parse prints "parse-error GRAMMAR" and exits 1.
//
// Only llama.cpp's public API is used, the same way a generation would use it:
// the grammar sampler (llama_sampler_init_grammar, root "root") is applied to
// a candidate list holding just the next token of the text; a logit set to
// -inf means the grammar forbids it, otherwise llama_sampler_accept advances
// the grammar. After the last token the end-of-generation token is offered:
// llama.cpp allows it only when a parse stack is empty, i.e. the whole text is
// a complete sentence of the grammar, not merely a viable prefix.
//
// The texts are tokenized with the given vocabulary (a byte-level BPE one such
// as ggml-vocab-llama-bpe.gguf, so the token pieces concatenate back to the
// exact bytes; this is checked). A text that is not valid UTF-8 does not
// tokenize back; it is fed one single-byte token per byte. Which tokenization is used does not change
// the verdict: llama.cpp's grammar consumes the pieces' bytes, carrying a
// partial UTF-8 sequence across tokens.
//
// build: cc -O2 -o peer-grammar peer-grammar.c -I $PEER/src/include -I $PEER/src/ggml/include
//          -L $PEER/bin -lllama -Wl,-rpath,$PEER/bin
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

static char *read_file(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return NULL; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "%s: short read\n", path); fclose(f); free(buf); return NULL; }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

static int token_allowed(struct llama_sampler *grammar, llama_token id) {
    llama_token_data cand = { id, 0.0f, 0.0f };
    llama_token_data_array arr = { &cand, 1, -1, false };
    llama_sampler_apply(grammar, &arr);
    return !isinf(cand.logit);
}

static llama_token byte_token[256];

// The token of each single byte (a byte-level BPE vocabulary has all 256).
static void find_byte_tokens(const struct llama_vocab *vocab) {
    for (int b = 0; b < 256; b++) byte_token[b] = -1;
    for (llama_token id = 0; id < llama_vocab_n_tokens(vocab); id++) {
        char piece[8];
        if (llama_token_to_piece(vocab, id, piece, sizeof piece, 0, true) == 1 && byte_token[(unsigned char)piece[0]] < 0)
            byte_token[(unsigned char)piece[0]] = id;
    }
    for (int b = 1; b < 256; b++)
        if (byte_token[b] < 0) { fprintf(stderr, "the vocabulary has no token for byte 0x%02x\n", b); exit(1); }
}

static int round_trips(const struct llama_vocab *vocab, const llama_token *toks, int n, const char *text, long len) {
    long at = 0;
    for (int i = 0; i < n; i++) {
        char piece[256];
        int pn = llama_token_to_piece(vocab, toks[i], piece, sizeof piece, 0, true);
        if (pn < 0 || at + pn > len || memcmp(piece, text + at, (size_t)pn) != 0) return 0;
        at += pn;
    }
    return at == len;
}

// Returns the byte offset of the refusal, or -1 when the text is accepted.
static long verdict(const struct llama_vocab *vocab, const char *grammar_text, const char *text, long len) {
    struct llama_sampler *grammar = llama_sampler_init_grammar(vocab, grammar_text, "root");
    if (!grammar) return -2;
    int cap = (int)len + 8;
    llama_token *toks = malloc(sizeof *toks * (size_t)cap);
    int n = llama_tokenize(vocab, text, (int)len, toks, cap, false, false);
    if (n < 0) { fprintf(stderr, "tokenize failed\n"); exit(1); }
    if (!round_trips(vocab, toks, n, text, len)) {
        /* not valid UTF-8 (an edit cut a character): one single-byte token per byte */
        for (long i = 0; i < len; i++) toks[i] = byte_token[(unsigned char)text[i]];
        n = (int)len;
    }
    long at = 0;
    for (int i = 0; i < n; i++) {
        char piece[256];
        int pn = llama_token_to_piece(vocab, toks[i], piece, sizeof piece, 0, true);
        if (pn < 0 || at + pn > len || memcmp(piece, text + at, (size_t)pn) != 0) {
            fprintf(stderr, "the vocabulary does not give the text back (token %d at byte %ld)\n", i, at);
            exit(1);
        }
        if (!token_allowed(grammar, toks[i])) { free(toks); llama_sampler_free(grammar); return at; }
        llama_sampler_accept(grammar, toks[i]);
        at += pn;
    }
    if (at != len) { fprintf(stderr, "the tokens cover %ld of %ld bytes\n", at, len); exit(1); }
    llama_token eos = llama_vocab_eos(vocab);
    long result = token_allowed(grammar, eos) ? -1 : len;
    free(toks);
    llama_sampler_free(grammar);
    return result;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s VOCAB.gguf GRAMMAR.gbnf TEXT_FILE...\n", argv[0]); return 2; }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    if (!llama_vocab_is_eog(vocab, llama_vocab_eos(vocab))) { fprintf(stderr, "%s: no end-of-generation token\n", argv[1]); return 1; }
    find_byte_tokens(vocab);
    long glen;
    char *grammar_text = read_file(argv[2], &glen);
    if (!grammar_text) return 1;
    for (int a = 3; a < argc; a++) {
        long len;
        char *text = read_file(argv[a], &len);
        if (!text) return 1;
        long r = verdict(vocab, grammar_text, text, len);
        if (r == -2) { printf("parse-error %s\n", argv[2]); return 1; }
        if (r == -1) printf("accept %s\n", argv[a]);
        else printf("reject %s at byte %ld\n", argv[a], r);
        fflush(stdout);
        free(text);
    }
    free(grammar_text);
    llama_model_free(model);
    return 0;
}
