/* kv: the paged key/value store. Memory is a pool of fixed-size blocks of
 * token slots per layer; each sequence owns a block table mapping its
 * positions to blocks. Sequences grow by appending, shrink by truncation, and
 * return their blocks to the free list when removed. Storage is F16 (as
 * llama.cpp's default cache type); attention reads rows by absolute position.
 *
 * Inside a block each KV head's part is contiguous. V is stored by position
 * (the block's slots one after another, head_dim elements each); K is stored
 * transposed, by dimension (element i of the block's 32 slots contiguous), so
 * attention computes 16 positions' scores in vector lanes straight from the
 * cache, with neither widening nor gathers. With token-major rows a head's
 * 128 bytes per position sat a whole row (1 KiB for 8 heads of 64) apart:
 * decode attention waited on DRAM and gathered K into a widened copy.
 *
 * Sizing is explicit: brisk_kv_plan reports the bytes before anything is
 * allocated, and a request that exceeds capacity fails with BRISK_ERR_CAPACITY. */
#ifndef BRISK_KV_H
#define BRISK_KV_H

#include "base/base.h"

#define BRISK_KV_BLOCK 32   /* token slots per block */

typedef struct brisk_kv_seq {
    int32_t *blocks;      /* block ids, [ceil(len / BLOCK)] used, capacity max_blocks_per_seq */
    int32_t n_blocks;
    int32_t len;          /* token slots stored: [0, len) */
    /* slots [0, ordered) hold positions [0, ordered); ordered < len only after
     * a tree batch (its rows sit in batch order, see model/forward.h) until
     * brisk_kv_keep_path or brisk_kv_truncate puts the sequence back in order */
    int32_t ordered;
} brisk_kv_seq;

typedef struct brisk_kv {
    int32_t n_layer;
    int32_t row;          /* elements per token per layer: n_head * head_dim */
    int32_t n_head, head_dim;   /* KV heads; elements per head and token */
    int32_t n_ctx;        /* max tokens per sequence and total budget */
    int32_t n_seq;
    int32_t n_blocks;     /* pool size */
    uint16_t *k;          /* [n_layer][n_blocks][n_head][head_dim][BLOCK] F16 (transposed) */
    uint16_t *v;          /* [n_layer][n_blocks][n_head][BLOCK][head_dim] F16 */
    int32_t *free_list;   /* stack of free block ids */
    int32_t n_free;
    brisk_kv_seq *seqs;   /* [n_seq] */
} brisk_kv;

/* Bytes the cache would need for these limits (false on overflow). */
bool brisk_kv_plan(int32_t n_layer, int32_t row, int32_t n_ctx, int32_t n_seq, size_t *bytes);

brisk_status brisk_kv_init(brisk_kv **out, int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t n_ctx, int32_t n_seq, brisk_error *err);
void brisk_kv_free(brisk_kv *kv);

/* Make room for positions [0, new_len) of seq; fails without side effects. */
brisk_status brisk_kv_reserve(brisk_kv *kv, int32_t seq, int32_t new_len, brisk_error *err);
/* Keep slots [0, n_keep) of seq; later blocks go back to the pool. */
void brisk_kv_truncate(brisk_kv *kv, int32_t seq, int32_t n_keep);
/* Keep slots [0, base) and then slots base + rel[0], base + rel[1], ... (rel
 * strictly increasing, base + rel[n - 1] < len), moved down to base, base + 1,
 * ... in every layer; the rest is dropped and the sequence is in position
 * order again (len = ordered = base + n). The caller validates the arguments. */
void brisk_kv_keep_path(brisk_kv *kv, int32_t seq, int32_t base, const int32_t *rel, int32_t n);

/* The block of (layer, seq, pos) from KV head head's part on: the offset
 * of its first element (pos must be < the reserved length). */
static inline size_t brisk_kv_head_offset(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head) {
    const int32_t b = kv->seqs[seq].blocks[pos / BRISK_KV_BLOCK];
    return (((size_t)layer * (size_t)kv->n_blocks + (size_t)b) * (size_t)kv->n_head + (size_t)head) * BRISK_KV_BLOCK * (size_t)kv->head_dim;
}
/* K of (layer, seq, pos, head): element i at [i * BRISK_KV_BLOCK]; the next
 * position of the same block is the next element. */
static inline uint16_t *brisk_kv_k(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head) {
    return kv->k + brisk_kv_head_offset(kv, layer, seq, pos, head) + (size_t)(pos % BRISK_KV_BLOCK);
}
/* V of (layer, seq, pos, head): head_dim contiguous elements; the next
 * position of the same block follows them. */
static inline uint16_t *brisk_kv_v(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head) {
    return kv->v + brisk_kv_head_offset(kv, layer, seq, pos, head) + (size_t)(pos % BRISK_KV_BLOCK) * (size_t)kv->head_dim;
}

#endif
