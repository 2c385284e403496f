/* strtab: the tokenizer's containers — the interned string table (text <-> id),
 * the BPE merge map, and growable int/byte vectors. Open addressing with
 * linear probing; tables are sized once for the vocabulary at load. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- vectors ------------------------------------------------------------------ */

brisk_status brisk_ivec_reserve(brisk_ivec *a, size_t extra, brisk_error *err) {
    size_t need;
    if (!brisk_add_size(a->n, extra, &need)) return brisk_fail(err, BRISK_ERR_NOMEM, "token buffer size overflow");
    if (need <= a->cap) return BRISK_OK;
    size_t cap = a->cap ? a->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2 / sizeof(int32_t)) return brisk_fail(err, BRISK_ERR_NOMEM, "token buffer size overflow");
        cap *= 2;
    }
    int32_t *p = realloc(a->v, cap * sizeof *p);
    if (!p) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate %zu token ids", cap);
    a->v = p;
    a->cap = cap;
    return BRISK_OK;
}

brisk_status brisk_ivec_push(brisk_ivec *a, int32_t x, brisk_error *err) {
    if (a->n == a->cap) {
        brisk_status st = brisk_ivec_reserve(a, 1, err);
        if (st != BRISK_OK) return st;
    }
    a->v[a->n++] = x;
    return BRISK_OK;
}

brisk_status brisk_bbuf_reserve(brisk_bbuf *b, size_t extra, brisk_error *err) {
    size_t need;
    if (!brisk_add_size(b->n, extra, &need) || need == SIZE_MAX)
        return brisk_fail(err, BRISK_ERR_NOMEM, "text buffer size overflow");
    need += 1;   /* room for a NUL */
    if (need <= b->cap) return BRISK_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) return brisk_fail(err, BRISK_ERR_NOMEM, "text buffer size overflow");
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate %zu bytes of text", cap);
    b->p = p;
    b->cap = cap;
    return BRISK_OK;
}

brisk_status brisk_bbuf_append(brisk_bbuf *b, const void *s, size_t len, brisk_error *err) {
    brisk_status st = brisk_bbuf_reserve(b, len, err);
    if (st != BRISK_OK) return st;
    if (len) memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
    return BRISK_OK;
}

/* ---- hashing -------------------------------------------------------------------- */

static inline uint64_t load64(const uint8_t *p) {
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    return x;
}

/* Tokens are short: fold 8 bytes at a time, the tail zero-padded, and mix the
 * length in so "a" and "a\0" differ. */
uint64_t brisk_tok_hash(const void *s, size_t len) {
    const uint8_t *p = s;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (len * 0xA0761D6478BD642Full);
    while (len >= 8) {
        h = (h ^ load64(p)) * 0xE7037ED1A0B428DBull;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    if (len) {
        uint64_t t = 0;
        memcpy(&t, p, len);
        h = (h ^ t) * 0xE7037ED1A0B428DBull;
    }
    return mix64(h);
}

/* ---- string table ------------------------------------------------------------------ */

void brisk_strtab_free(brisk_strtab *t) {
    if (!t) return;
    free(t->pool);
    free(t->ent);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

static inline bool slot_is(const brisk_strtab *t, uint64_t sl, uint32_t h, const char *s, size_t len) {
    if ((uint32_t)(sl >> 32) != h) return false;
    const brisk_strent *e = &t->ent[(uint32_t)sl - 1];
    return e->len == len && memcmp(t->pool + e->off, s, len) == 0;
}

int32_t brisk_strtab_find(const brisk_strtab *t, const char *s, size_t len) {
    if (!t->slot) return -1;
    uint64_t h64 = brisk_tok_hash(s, len);
    uint32_t h = (uint32_t)h64;
    size_t i = (size_t)(h64 >> 32) & t->mask;
    for (;;) {
        uint64_t sl = t->slot[i];
        if (!sl) return -1;
        if (slot_is(t, sl, h, s, len)) return (int32_t)((uint32_t)sl - 1);
        i = (i + 1) & t->mask;
    }
}

static brisk_status strtab_resize_index(brisk_strtab *t, size_t cap, brisk_error *err) {
    uint64_t *slot = calloc(cap, sizeof *slot);
    if (!slot) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate a string index of %zu slots", cap);
    size_t mask = cap - 1;
    if (t->slot) {
        for (size_t j = 0; j <= t->mask; j++) {
            uint64_t sl = t->slot[j];
            if (!sl) continue;
            const brisk_strent *e = &t->ent[(uint32_t)sl - 1];
            uint64_t h64 = brisk_tok_hash(t->pool + e->off, e->len);
            size_t i = (size_t)(h64 >> 32) & mask;
            while (slot[i]) i = (i + 1) & mask;
            slot[i] = sl;
        }
    }
    free(t->slot);
    t->slot = slot;
    t->mask = mask;
    return BRISK_OK;
}

brisk_status brisk_strtab_reserve(brisk_strtab *t, size_t n, size_t bytes, brisk_error *err) {
    if (n > (size_t)INT32_MAX / 2 || bytes > BRISK_VOCAB_MAX_POOL)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "vocabulary too large (%zu strings, %zu bytes)", n, bytes);
    size_t cap = 1024;
    while (cap < n * 2 + 2) cap *= 2;
    if (!t->slot || t->mask + 1 < cap) {
        brisk_status st = strtab_resize_index(t, cap, err);
        if (st != BRISK_OK) return st;
    }
    if ((size_t)t->cap < n) {
        brisk_strent *e = realloc(t->ent, n * sizeof *e);
        if (!e) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the string table");
        t->ent = e;
        t->cap = (int32_t)n;
    }
    if (t->pool_cap < bytes) {
        char *p = realloc(t->pool, bytes);
        if (!p) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate %zu bytes of vocabulary text", bytes);
        t->pool = p;
        t->pool_cap = bytes;
    }
    return BRISK_OK;
}

static brisk_status strtab_add(brisk_strtab *t, const char *s, size_t len, uint32_t h, size_t slot_i, int32_t *out,
                               brisk_error *err) {
    if (t->n >= INT32_MAX - 1) return brisk_fail(err, BRISK_ERR_CAPACITY, "too many strings in the vocabulary");
    if (len > UINT32_MAX || t->pool_len + len + 1 > BRISK_VOCAB_MAX_POOL)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "vocabulary text exceeds %zu bytes", (size_t)BRISK_VOCAB_MAX_POOL);
    if (t->n == t->cap) {
        int32_t cap = t->cap ? t->cap * 2 : 1024;
        brisk_strent *e = realloc(t->ent, (size_t)cap * sizeof *e);
        if (!e) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the string table");
        t->ent = e;
        t->cap = cap;
    }
    if (t->pool_len + len + 1 > t->pool_cap) {
        size_t cap = t->pool_cap ? t->pool_cap : 65536;
        while (cap < t->pool_len + len + 1) cap *= 2;
        char *p = realloc(t->pool, cap);
        if (!p) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate %zu bytes of vocabulary text", cap);
        t->pool = p;
        t->pool_cap = cap;
    }
    int32_t id = t->n++;
    t->ent[id].off = (uint32_t)t->pool_len;
    t->ent[id].len = (uint32_t)len;
    if (len) memcpy(t->pool + t->pool_len, s, len);
    t->pool_len += len;
    t->pool[t->pool_len++] = 0;
    t->slot[slot_i] = ((uint64_t)h << 32) | (uint32_t)(id + 1);   /* a live slot now points at the newer id */
    *out = id;
    return BRISK_OK;
}

/* Find s's slot: either the live slot holding it or the empty slot where it goes. */
static brisk_status strtab_locate(brisk_strtab *t, const char *s, size_t len, uint64_t h64, uint32_t *h_out,
                                  size_t *slot_out, bool *live, brisk_error *err) {
    if (!t->slot || (size_t)t->n * 2 + 2 > t->mask + 1) {   /* keep the load factor under 1/2 */
        brisk_status st = strtab_resize_index(t, t->slot ? (t->mask + 1) * 2 : 1024, err);
        if (st != BRISK_OK) return st;
    }
    uint32_t h = (uint32_t)h64;
    size_t i = (size_t)(h64 >> 32) & t->mask;
    *live = false;
    for (;;) {
        uint64_t sl = t->slot[i];
        if (!sl) break;
        if (slot_is(t, sl, h, s, len)) {
            *live = true;
            break;
        }
        i = (i + 1) & t->mask;
    }
    *h_out = h;
    *slot_out = i;
    return BRISK_OK;
}

brisk_status brisk_strtab_append(brisk_strtab *t, const char *s, size_t len, int32_t *id, brisk_error *err) {
    uint32_t h;
    size_t i;
    bool live;
    brisk_status st = strtab_locate(t, s, len, brisk_tok_hash(s, len), &h, &i, &live, err);
    if (st != BRISK_OK) return st;
    return strtab_add(t, s, len, h, i, id, err);
}

void brisk_strtab_prefetch(const brisk_strtab *t, uint64_t h64) {
    if (t->slot) __builtin_prefetch(&t->slot[(size_t)(h64 >> 32) & t->mask]);
}

brisk_status brisk_strtab_intern_hashed(brisk_strtab *t, const char *s, size_t len, uint64_t h64, int32_t *id,
                                        brisk_error *err) {
    uint32_t h;
    size_t i;
    bool live;
    brisk_status st = strtab_locate(t, s, len, h64, &h, &i, &live, err);
    if (st != BRISK_OK) return st;
    if (live) {
        *id = (int32_t)((uint32_t)t->slot[i] - 1);
        return BRISK_OK;
    }
    return strtab_add(t, s, len, h, i, id, err);
}

brisk_status brisk_strtab_intern(brisk_strtab *t, const char *s, size_t len, int32_t *id, brisk_error *err) {
    return brisk_strtab_intern_hashed(t, s, len, brisk_tok_hash(s, len), id, err);
}

/* ---- merge map ---------------------------------------------------------------------- */

void brisk_pairmap_free(brisk_pairmap *m) {
    if (!m) return;
    free(m->key);
    free(m->rank);
    free(m->result);
    memset(m, 0, sizeof *m);
}

brisk_status brisk_pairmap_init(brisk_pairmap *m, size_t expected, brisk_error *err) {
    memset(m, 0, sizeof *m);
    size_t cap = 1024;
    while (cap < expected * 2 + 2) cap *= 2;   /* expected is capped by the caller */
    m->key = malloc(cap * sizeof *m->key);
    m->rank = malloc(cap * sizeof *m->rank);
    m->result = malloc(cap * sizeof *m->result);
    if (!m->key || !m->rank || !m->result) {
        brisk_pairmap_free(m);
        return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate a merge table of %zu slots", cap);
    }
    memset(m->key, 0xFF, cap * sizeof *m->key);
    m->mask = cap - 1;
    return BRISK_OK;
}

void brisk_pairmap_prefetch(const brisk_pairmap *m, int32_t left, int32_t right) {
    uint64_t k = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    size_t i = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 29) & m->mask;
    __builtin_prefetch(&m->key[i], 1);
}

void brisk_pairmap_put(brisk_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t result) {
    BRISK_ASSERT(m->used * 2 + 2 <= m->mask + 1);   /* sized for every merge at init */
    uint64_t k = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 29) & m->mask;
    for (;;) {
        if (m->key[i] == k) return;   /* first rank wins */
        if (m->key[i] == UINT64_MAX) break;
        i = (i + 1) & m->mask;
    }
    m->key[i] = k;
    m->rank[i] = rank;
    m->result[i] = result;
    m->used++;
}
