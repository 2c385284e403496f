/* bpe: byte-level BPE (tokenizer.ggml.model = "gpt2", "gemma4").
 *
 * The pre-tokenizer (pretok.c) cuts the text into pre-tokens; each one is
 * mapped through GPT-2's byte-to-unicode table (unless the vocabulary works on
 * raw UTF-8, as Gemma 4's), cut into characters, and merged pair by pair in
 * merge-rank order (ties: leftmost first), as llama.cpp's
 * llm_tokenizer_bpe_session. Strings are interned at load (strtab.c), so a
 * merge is one lookup of (left id, right id) instead of string concatenation.
 *
 * Repeated pre-tokens are common (indentation, keywords, frequent words), so
 * each call keeps a cache from pre-token bytes to its ids; the result is the
 * same with or without it. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct bpe_sym {
    int32_t prev, next;
    uint32_t off, n;      /* bytes of the encoded word; n = 0 once merged away */
    int32_t sid;          /* string id of the text, -1 when not in any merge or token */
} bpe_sym;

typedef struct bpe_pair {
    int32_t rank;
    int32_t left, right;
    int32_t lsid, rsid;   /* ids when queued: a changed side makes it stale */
    int32_t result;       /* id of the merged text */
} bpe_pair;

/* Word cache: pre-token bytes -> ids. Only short words are cached and the
 * cache stops growing at a fixed size, so memory stays bounded. */
#define BPE_CACHE_MAX_WORD 48
#define BPE_CACHE_MAX_ENTRIES (1u << 18)

typedef struct bpe_cache_entry {
    uint32_t key_off, key_len;
    uint32_t ids_off, ids_n;
    uint32_t hash;        /* 0 = empty slot */
} bpe_cache_entry;

struct brisk_bpe_ctx {
    brisk_split_ctx split;
    brisk_bbuf enc;       /* the current word, byte-encoded */
    bpe_sym *sym;
    size_t cap_sym;
    bpe_pair *heap;
    size_t n_heap, cap_heap;
    bpe_cache_entry *cache;
    size_t cache_mask, cache_used;
    brisk_bbuf cache_keys;
    brisk_ivec cache_ids;
};

brisk_status brisk_bpe_ctx_init(brisk_bpe_ctx **out, brisk_error *err) {
    *out = calloc(1, sizeof **out);
    if (!*out) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate BPE scratch");
    return BRISK_OK;
}

void brisk_bpe_ctx_free(brisk_bpe_ctx *c) {
    if (!c) return;
    brisk_split_ctx_free(&c->split);
    free(c->enc.p);
    free(c->sym);
    free(c->heap);
    free(c->cache);
    free(c->cache_keys.p);
    free(c->cache_ids.v);
    free(c);
}

/* ---- GPT-2 byte <-> unicode mapping -------------------------------------------------
 * Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves;
 * the other 68 bytes map, in order, to U+0100, U+0101, ... */
static uint32_t byte_to_cp(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    uint32_t k = 0;   /* rank among the unprintable bytes below b */
    if (b <= 0x20) k = b;
    else if (b <= 0xA0) k = 0x21 + (b - 0x7F);   /* 0x00-0x20 come first (33), then 0x7F.. */
    else k = 0x21 + 0x22;                       /* 0xAD, the last one */
    return 0x100 + k;
}

int32_t brisk_bpe_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || cp >= 0xAE) ? (int32_t)cp : -1;
    if (cp < 0x100 + 0x21) return (int32_t)(cp - 0x100);
    if (cp < 0x100 + 0x21 + 0x22) return (int32_t)(0x7F + (cp - 0x100 - 0x21));
    if (cp == 0x100 + 0x43) return 0xAD;
    return -1;
}

/* The 1-2 UTF-8 bytes that stand for byte b. */
static size_t encode_byte(uint8_t b, char *out) { return brisk_utf8_encode(byte_to_cp(b), out); }

/* ---- heap (min on rank, then leftmost) ----------------------------------------------- */

static inline bool pair_before(const bpe_pair *a, const bpe_pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static brisk_status heap_push(brisk_bpe_ctx *c, bpe_pair p, brisk_error *err) {
    if (c->n_heap == c->cap_heap) {
        size_t cap = c->cap_heap ? c->cap_heap * 2 : 256;
        if (cap > SIZE_MAX / sizeof(bpe_pair)) return brisk_fail(err, BRISK_ERR_NOMEM, "BPE queue overflow");
        bpe_pair *q = realloc(c->heap, cap * sizeof *q);
        if (!q) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the BPE merge queue (%zu entries)", cap);
        c->heap = q;
        c->cap_heap = cap;
    }
    size_t i = c->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_before(&p, &c->heap[parent])) break;
        c->heap[i] = c->heap[parent];
        i = parent;
    }
    c->heap[i] = p;
    return BRISK_OK;
}

static bpe_pair heap_pop(brisk_bpe_ctx *c) {
    bpe_pair top = c->heap[0];
    bpe_pair last = c->heap[--c->n_heap];
    size_t i = 0, n = c->n_heap;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= n) break;
        if (k + 1 < n && pair_before(&c->heap[k + 1], &c->heap[k])) k++;
        if (!pair_before(&c->heap[k], &last)) break;
        c->heap[i] = c->heap[k];
        i = k;
    }
    if (n) c->heap[i] = last;
    return top;
}

static inline brisk_status try_pair(const brisk_vocab *v, brisk_bpe_ctx *c, int32_t l, int32_t r, brisk_error *err) {
    if (l < 0 || r < 0) return BRISK_OK;
    int32_t ls = c->sym[l].sid, rs = c->sym[r].sid;
    if (ls < 0 || rs < 0) return BRISK_OK;
    int32_t result;
    int32_t rank = brisk_pairmap_get(&v->merges, ls, rs, &result);
    if (rank < 0) return BRISK_OK;
    bpe_pair p = {rank, l, r, ls, rs, result};
    return heap_push(c, p, err);
}

/* ---- one word ------------------------------------------------------------------------ */

static inline int32_t token_of(const brisk_vocab *v, const char *s, size_t n) {
    int32_t id = brisk_strtab_find(&v->strs, s, n);
    return id < v->n_tokens ? id : -1;
}

/* Ids of a piece that is not a token: llama.cpp looks every byte up on its
 * own (byte-level vocabularies: the raw byte as a one-byte string; raw-UTF-8
 * ones: <0xXX>) and drops bytes that have no token. */
static brisk_status emit_bytes(const brisk_vocab *v, const char *s, size_t n, brisk_ivec *out, brisk_error *err) {
    for (size_t j = 0; j < n; j++) {
        uint8_t b = (uint8_t)s[j];
        int32_t id = v->byte_encode ? token_of(v, (const char *)&b, 1) : v->byte_tok[b];
        if (id >= 0) {
            brisk_status st = brisk_ivec_push(out, id, err);
            if (st != BRISK_OK) return st;
        }
    }
    return BRISK_OK;
}

static brisk_status bpe_word(const brisk_vocab *v, brisk_bpe_ctx *c, const char *w, size_t wn, brisk_ivec *out,
                             brisk_error *err) {
    /* encode */
    const char *e = w;
    size_t en = wn;
    if (v->byte_encode) {
        c->enc.n = 0;
        size_t worst;
        if (!brisk_mul_size(wn, 2, &worst)) return brisk_fail(err, BRISK_ERR_NOMEM, "word too long");
        brisk_status st = brisk_bbuf_reserve(&c->enc, worst, err);
        if (st != BRISK_OK) return st;
        for (size_t i = 0; i < wn; i++) c->enc.n += encode_byte((uint8_t)w[i], c->enc.p + c->enc.n);
        e = c->enc.p;
        en = c->enc.n;
    }
    if (en > UINT32_MAX) return brisk_fail(err, BRISK_ERR_CAPACITY, "pre-token of %zu bytes exceeds 4 GiB", en);

    if (v->ignore_merges || ((v->pre_flags & BRISK_PRE_NL_TOKENS) && wn > 0 && strspn(w, "\n") >= wn)) {
        int32_t id = token_of(v, e, en);
        if (id >= 0) return brisk_ivec_push(out, id, err);
    }

    /* characters */
    size_t n = 0;
    for (size_t off = 0; off < en; n++) off += BRISK_MIN(brisk_utf8_len((uint8_t)e[off]), en - off);
    if (n > c->cap_sym) {
        size_t cap = c->cap_sym ? c->cap_sym : 64;
        while (cap < n) cap *= 2;
        bpe_sym *s = realloc(c->sym, cap * sizeof *s);
        if (!s) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate %zu BPE symbols", cap);
        c->sym = s;
        c->cap_sym = cap;
    }
    bpe_sym *sym = c->sym;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t cl = BRISK_MIN(brisk_utf8_len((uint8_t)e[off]), en - off);
        sym[i].off = (uint32_t)off;
        sym[i].n = (uint32_t)cl;
        sym[i].prev = (int32_t)i - 1;
        sym[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
        sym[i].sid = brisk_strtab_find(&v->strs, e + off, cl);
        off += cl;
    }

    brisk_status st = BRISK_OK;
    c->n_heap = 0;
    for (size_t i = 1; i < n && st == BRISK_OK; i++) st = try_pair(v, c, (int32_t)i - 1, (int32_t)i, err);
    while (st == BRISK_OK && c->n_heap) {
        bpe_pair p = heap_pop(c);
        bpe_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->n == 0 || r->n == 0 || l->sid != p.lsid || r->sid != p.rsid) continue;   /* stale */
        l->n += r->n;
        l->sid = p.result;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = p.left;
        st = try_pair(v, c, l->prev, p.left, err);
        if (st == BRISK_OK) st = try_pair(v, c, p.left, sym[p.left].next, err);
    }
    if (st != BRISK_OK || n == 0) return st;

    for (int32_t i = 0; i != -1 && st == BRISK_OK; i = sym[i].next) {
        int32_t id = sym[i].sid >= 0 && sym[i].sid < v->n_tokens ? sym[i].sid : -1;
        st = id >= 0 ? brisk_ivec_push(out, id, err) : emit_bytes(v, e + sym[i].off, sym[i].n, out, err);
    }
    return st;
}

/* ---- word cache ---------------------------------------------------------------------------- */

static bpe_cache_entry *cache_slot(brisk_bpe_ctx *c, const char *w, size_t wn, uint32_t h) {
    size_t i = h & c->cache_mask;
    for (;;) {
        bpe_cache_entry *e = &c->cache[i];
        if (e->hash == 0) return e;
        if (e->hash == h && e->key_len == wn && memcmp(c->cache_keys.p + e->key_off, w, wn) == 0) return e;
        i = (i + 1) & c->cache_mask;
    }
}

static brisk_status cache_init(brisk_bpe_ctx *c, brisk_error *err) {
    size_t cap = 4096;
    c->cache = calloc(cap, sizeof *c->cache);
    if (!c->cache) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the BPE word cache");
    c->cache_mask = cap - 1;
    return BRISK_OK;
}

static brisk_status cache_grow(brisk_bpe_ctx *c, brisk_error *err) {
    size_t cap = (c->cache_mask + 1) * 2;
    bpe_cache_entry *old = c->cache;
    size_t old_cap = c->cache_mask + 1;
    c->cache = calloc(cap, sizeof *c->cache);
    if (!c->cache) {
        c->cache = old;
        return brisk_fail(err, BRISK_ERR_NOMEM, "cannot grow the BPE word cache");
    }
    c->cache_mask = cap - 1;
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[i].hash) continue;
        size_t j = old[i].hash & c->cache_mask;
        while (c->cache[j].hash) j = (j + 1) & c->cache_mask;
        c->cache[j] = old[i];
    }
    free(old);
    return BRISK_OK;
}

/* ---- entry ------------------------------------------------------------------------------------- */

brisk_status brisk_bpe_tokenize(const brisk_vocab *v, brisk_bpe_ctx *c, const char *text, size_t len, brisk_ivec *out,
                                brisk_error *err) {
    brisk_status st = brisk_pretok_split(&v->pre, &c->split, text, len, err);
    if (st != BRISK_OK) return st;
    if (!c->cache) {
        st = cache_init(c, err);
        if (st != BRISK_OK) return st;
    }
    const char *norm = c->split.norm.p;
    for (size_t k = 0; k < c->split.n_spans; k++) {
        const char *w = norm + c->split.spans[k].off;
        size_t wn = c->split.spans[k].len;
        if (wn > BPE_CACHE_MAX_WORD) {
            st = bpe_word(v, c, w, wn, out, err);
            if (st != BRISK_OK) return st;
            continue;
        }
        uint32_t h = (uint32_t)brisk_tok_hash(w, wn) | 1u;
        bpe_cache_entry *e = cache_slot(c, w, wn, h);
        if (e->hash) {
            st = brisk_ivec_reserve(out, e->ids_n, err);
            if (st != BRISK_OK) return st;
            memcpy(out->v + out->n, c->cache_ids.v + e->ids_off, e->ids_n * sizeof(int32_t));
            out->n += e->ids_n;
            continue;
        }
        size_t before = out->n;
        st = bpe_word(v, c, w, wn, out, err);
        if (st != BRISK_OK) return st;
        if (c->cache_used >= BPE_CACHE_MAX_ENTRIES || c->cache_ids.n + (out->n - before) > UINT32_MAX ||
            c->cache_keys.n + wn > UINT32_MAX)
            continue;
        e->key_off = (uint32_t)c->cache_keys.n;
        e->key_len = (uint32_t)wn;
        st = brisk_bbuf_append(&c->cache_keys, w, wn, err);
        if (st != BRISK_OK) return st;
        e->ids_off = (uint32_t)c->cache_ids.n;
        e->ids_n = (uint32_t)(out->n - before);
        st = brisk_ivec_reserve(&c->cache_ids, e->ids_n, err);
        if (st != BRISK_OK) return st;
        memcpy(c->cache_ids.v + c->cache_ids.n, out->v + before, e->ids_n * sizeof(int32_t));
        c->cache_ids.n += e->ids_n;
        e->hash = h;
        if (++c->cache_used * 2 > c->cache_mask + 1) {
            st = cache_grow(c, err);
            if (st != BRISK_OK) return st;
        }
    }
    return BRISK_OK;
}
