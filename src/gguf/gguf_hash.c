/* gguf_hash: a 64-bit streaming hash, and the two fingerprints of a GGUF file
 * that KV-state files (src/engine/state.c) record: the header hash (header,
 * metadata, tensor table and file size: cheap, taken at every model load)
 * and the data hash (every byte of the tensor data section: taken only when
 * a KV state is written or checked).
 *
 * The hash is brisk's own, for integrity, not security: four independent
 * lanes over 8-byte words (so the multiplies pipeline: about 4 GB/s on one
 * core here), each word step a bijection of the lane ((acc ^ w) * odd, then
 * an xorshift), so a change to any one word always changes its lane; the
 * lanes, the length and the seed are folded with splitmix64's finalizer. */
#include "gguf/gguf.h"

#include <string.h>

#define LANE_MUL 0xd6e8feb86659fd93ull
#define SEED_MUL 0x9e3779b97f4a7c15ull

static uint64_t fold64(uint64_t x) {   /* splitmix64's finalizer */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline uint64_t lane_step(uint64_t acc, uint64_t w) {
    acc = (acc ^ w) * LANE_MUL;
    return acc ^ (acc >> 29);
}

static inline uint64_t load64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);   /* little-endian hosts only, like the GGUF reader */
    return w;
}

void brisk_hash64_init(brisk_hash64 *h, uint64_t seed) {
    memset(h, 0, sizeof *h);
    for (int i = 0; i < 4; i++) h->lane[i] = fold64(seed + SEED_MUL * (uint64_t)(i + 1));
}

static void consume32(brisk_hash64 *h, const uint8_t *p) {
    h->lane[0] = lane_step(h->lane[0], load64(p));
    h->lane[1] = lane_step(h->lane[1], load64(p + 8));
    h->lane[2] = lane_step(h->lane[2], load64(p + 16));
    h->lane[3] = lane_step(h->lane[3], load64(p + 24));
}

void brisk_hash64_update(brisk_hash64 *h, const void *data, size_t len) {
    if (len == 0) return;   /* data may be NULL then */
    const uint8_t *p = data;
    h->total += len;
    if (h->n_tail) {
        const size_t take = len < 32 - h->n_tail ? len : 32 - h->n_tail;
        memcpy(h->tail + h->n_tail, p, take);
        h->n_tail += take;
        p += take;
        len -= take;
        if (h->n_tail < 32) return;
        consume32(h, h->tail);
        h->n_tail = 0;
    }
    for (; len >= 32; p += 32, len -= 32) consume32(h, p);
    if (len) {
        memcpy(h->tail, p, len);
        h->n_tail = len;
    }
}

uint64_t brisk_hash64_final(const brisk_hash64 *h) {
    uint64_t lane[4];
    memcpy(lane, h->lane, sizeof lane);
    if (h->n_tail) {   /* the tail, zero-padded; the length below tells "ab" from "ab\0" */
        uint8_t last[32] = {0};
        memcpy(last, h->tail, h->n_tail);
        for (int i = 0; i < 4; i++) lane[i] = lane_step(lane[i], load64(last + 8 * i));
    }
    uint64_t x = fold64(h->total ^ 0x5bd1e9955bd1e995ull);
    for (int i = 0; i < 4; i++) x = fold64(x ^ lane[i] ^ ((uint64_t)i << 60));
    return x;
}

uint64_t brisk_hash64_of(const void *data, size_t len, uint64_t seed) {
    brisk_hash64 h;
    brisk_hash64_init(&h, seed);
    brisk_hash64_update(&h, data, len);
    return brisk_hash64_final(&h);
}

#define HEADER_SEED 0x4252534b48445231ull   /* distinct seeds: the two fingerprints never coincide by construction */
#define DATA_SEED 0x4252534b44415431ull

uint64_t brisk_gguf_header_hash(const brisk_gguf *g) {
    brisk_hash64 h;
    brisk_hash64_init(&h, HEADER_SEED);
    const uint64_t size = g->size;
    brisk_hash64_update(&h, &size, sizeof size);
    brisk_hash64_update(&h, g->buf, g->data_offset <= g->size ? g->data_offset : g->size);
    for (uint32_t i = 0; i + 1 < g->n_files; i++) {   /* a split model: the other files' sizes and headers */
        const brisk_gguf *s = g->shards[i];
        const uint64_t s_size = s->size;
        brisk_hash64_update(&h, &s_size, sizeof s_size);
        brisk_hash64_update(&h, s->buf, s->data_offset <= s->size ? s->data_offset : s->size);
    }
    return brisk_hash64_final(&h);
}

uint64_t brisk_gguf_data_hash(const brisk_gguf *g) {
    brisk_hash64 h;
    brisk_hash64_init(&h, DATA_SEED);   /* streaming: a single file hashes as brisk_hash64_of did */
    for (uint32_t i = 0; i < (g->n_files ? g->n_files : 1); i++) {
        const brisk_gguf *f = i == 0 ? g : g->shards[i - 1];
        const size_t off = f->data_offset <= f->size ? f->data_offset : f->size;
        brisk_hash64_update(&h, f->buf + off, f->size - off);
    }
    return brisk_hash64_final(&h);
}
