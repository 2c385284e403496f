/* spm: SentencePiece-style tokenization (tokenizer.ggml.model = "llama").
 *
 * The text (spaces already turned into U+2581) is cut into UTF-8 characters;
 * then, repeatedly, the adjacent pair whose concatenation is a token with the
 * highest score is merged (ties: leftmost first), as llama.cpp's
 * llm_tokenizer_spm does. A final piece that is not a token (a character
 * missing from the vocabulary, or a stray byte) falls back to byte tokens
 * <0xXX>. Bytes are taken as they are: invalid UTF-8 simply never merges and
 * comes out as byte tokens. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct spm_sym {
    int32_t prev, next;   /* neighbours in the live chain, -1 at the ends */
    uint32_t off, n;      /* bytes of the text; n = 0 once merged away */
} spm_sym;

typedef struct spm_pair {
    float score;          /* of the token the pair would form */
    int32_t left, right;
    uint32_t size;        /* bytes of the pair when queued (stale check) */
} spm_pair;

/* Max-heap on score; equal scores pop the leftmost pair first. */
static inline bool pair_before(const spm_pair *a, const spm_pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct spm_heap {
    spm_pair *a;
    size_t n, cap;
} spm_heap;

static brisk_status heap_push(spm_heap *h, spm_pair p, brisk_error *err) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        if (cap > SIZE_MAX / sizeof(spm_pair)) return brisk_fail(err, BRISK_ERR_NOMEM, "SPM queue overflow");
        spm_pair *q = realloc(h->a, cap * sizeof *q);
        if (!q) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the SPM merge queue (%zu entries)", cap);
        h->a = q;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_before(&p, &h->a[parent])) break;
        h->a[i] = h->a[parent];
        i = parent;
    }
    h->a[i] = p;
    return BRISK_OK;
}

static spm_pair heap_pop(spm_heap *h) {
    spm_pair top = h->a[0];
    spm_pair last = h->a[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_before(&h->a[c + 1], &h->a[c])) c++;
        if (!pair_before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (n) h->a[i] = last;
    return top;
}

static inline int32_t token_of(const brisk_vocab *v, const char *s, size_t n) {
    int32_t id = brisk_strtab_find(&v->strs, s, n);
    return id < v->n_tokens ? id : -1;
}

static brisk_status try_pair(const brisk_vocab *v, const char *text, const spm_sym *sym, int32_t l, int32_t r,
                             spm_heap *h, brisk_error *err) {
    if (l < 0 || r < 0) return BRISK_OK;
    uint32_t size = sym[l].n + sym[r].n;
    int32_t id = token_of(v, text + sym[l].off, size);
    if (id < 0) return BRISK_OK;
    spm_pair p = {v->score[id], l, r, size};
    return heap_push(h, p, err);
}

/* Merge one segment text[0..len) completely and append its ids. sym/h are
 * scratch sized by the caller for at least the segment's symbol count. */
static brisk_status spm_segment(const brisk_vocab *v, const char *text, size_t len, spm_sym *sym, spm_heap *h,
                                brisk_ivec *out, brisk_error *err) {
    size_t n = 0;
    for (size_t off = 0; off < len; n++) {
        size_t cl = BRISK_MIN(brisk_utf8_len((uint8_t)text[off]), len - off);
        sym[n].off = (uint32_t)off;
        sym[n].n = (uint32_t)cl;
        sym[n].prev = (int32_t)n - 1;
        sym[n].next = off + cl < len ? (int32_t)n + 1 : -1;
        off += cl;
    }
    if (n == 0) return BRISK_OK;

    brisk_status st = BRISK_OK;
    h->n = 0;
    for (size_t i = 1; i < n && st == BRISK_OK; i++) st = try_pair(v, text, sym, (int32_t)i - 1, (int32_t)i, h, err);
    while (st == BRISK_OK && h->n) {
        spm_pair p = heap_pop(h);
        spm_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size) continue;   /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = p.left;
        st = try_pair(v, text, sym, l->prev, p.left, h, err);
        if (st == BRISK_OK) st = try_pair(v, text, sym, p.left, sym[p.left].next, h, err);
    }

    for (int32_t i = 0; st == BRISK_OK && i != -1; i = sym[i].next) {
        int32_t id = token_of(v, text + sym[i].off, sym[i].n);
        if (id >= 0) {
            st = brisk_ivec_push(out, id, err);
            continue;
        }
        st = brisk_ivec_reserve(out, sym[i].n, err);
        for (uint32_t j = 0; st == BRISK_OK && j < sym[i].n; j++) {
            int32_t b = v->byte_tok[(uint8_t)text[sym[i].off + j]];
            if (b < 0) b = v->unk;   /* no byte fallback in this vocab (llama.cpp throws here) */
            if (b >= 0) out->v[out->n++] = b;
        }
    }
    return st;
}

/* llama.cpp merges the whole fragment as one problem. A one-byte symbol made
 * of a "barrier" byte (an ASCII byte no multi-byte token contains, such as
 * '\n' in most SentencePiece vocabularies) can never merge, so the pieces
 * between barriers are independent problems: the merges within each happen
 * in the same order as in the whole, and solving them one by one keeps the
 * queue small (2x faster on text with many lines). */
brisk_status brisk_spm_tokenize(const brisk_vocab *v, const char *text, size_t len, brisk_ivec *out, brisk_error *err) {
    if (len == 0) return BRISK_OK;
    if (len > UINT32_MAX) return brisk_fail(err, BRISK_ERR_CAPACITY, "text fragment of %zu bytes exceeds 4 GiB", len);

    /* the longest segment bounds the scratch */
    size_t longest = 0, seg = 0, off = 0;
    while (off < len) {
        size_t cl = BRISK_MIN(brisk_utf8_len((uint8_t)text[off]), len - off);
        if (cl == 1 && v->spm_barrier[(uint8_t)text[off]]) {
            longest = BRISK_MAX(longest, seg);
            seg = 0;
        } else {
            seg++;
        }
        off += cl;
    }
    longest = BRISK_MAX(BRISK_MAX(longest, seg), 1);
    if (longest > INT32_MAX) return brisk_fail(err, BRISK_ERR_CAPACITY, "text fragment has too many characters");
    spm_sym *sym = malloc(longest * sizeof *sym);
    if (!sym) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate %zu SPM symbols", longest);
    spm_heap h = {0};

    brisk_status st = BRISK_OK;
    size_t start = 0;
    off = 0;
    while (st == BRISK_OK && off < len) {
        size_t cl = BRISK_MIN(brisk_utf8_len((uint8_t)text[off]), len - off);
        if (cl == 1 && v->spm_barrier[(uint8_t)text[off]]) {
            st = spm_segment(v, text + start, off - start, sym, &h, out, err);
            if (st == BRISK_OK) st = spm_segment(v, text + off, 1, sym, &h, out, err);
            start = off + 1;
        }
        off += cl;
    }
    if (st == BRISK_OK) st = spm_segment(v, text + start, len - start, sym, &h, out, err);
    free(sym);
    free(h.a);
    return st;
}
