/* kv: paged key/value store (see kv.h). */
#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int32_t blocks_for(int32_t n_tokens) { return (n_tokens + BRISK_KV_BLOCK - 1) / BRISK_KV_BLOCK; }

/* Pool size: the token budget plus one partial block per extra sequence, so
 * n_ctx tokens spread over n_seq sequences always fit. */
static int64_t pool_blocks(int32_t n_ctx, int32_t n_seq) { return (int64_t)blocks_for(n_ctx) + (n_seq - 1); }

bool brisk_kv_plan(int32_t n_layer, int32_t row, int32_t n_ctx, int32_t n_seq, size_t *bytes) {
    size_t per_block, total;
    if (n_layer < 1 || row < 1 || n_ctx < 1 || n_seq < 1) return false;
    if (!brisk_mul_size((size_t)BRISK_KV_BLOCK * sizeof(uint16_t), (size_t)row, &per_block)) return false;
    if (!brisk_mul_size(per_block, (size_t)pool_blocks(n_ctx, n_seq), &total)) return false;
    if (!brisk_mul_size(total, (size_t)n_layer * 2, &total)) return false;
    *bytes = total;
    return true;
}

brisk_status brisk_kv_init(brisk_kv **out, int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t n_ctx, int32_t n_seq, brisk_error *err) {
    *out = NULL;
    size_t bytes;
    if (n_head < 1 || head_dim < 1 || (int64_t)n_head * head_dim > INT32_MAX)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV cache: %d heads of %d elements", n_head, head_dim);
    const int32_t row = n_head * head_dim;
    if (n_seq < 1 || n_seq > 4096) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequences: %d out of range [1, 4096]", n_seq);
    if (n_ctx < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "context: %d must be positive", n_ctx);
    if (!brisk_kv_plan(n_layer, row, n_ctx, n_seq, &bytes))
        return brisk_fail(err, BRISK_ERR_CAPACITY, "KV cache size for context %d overflows", n_ctx);
    /* what this machine can hold is checked by the context's memory plan (engine.c) before this runs */
    brisk_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return brisk_fail(err, BRISK_ERR_NOMEM, "KV cache: out of memory");
    kv->n_layer = n_layer;
    kv->row = row;
    kv->n_head = n_head;
    kv->head_dim = head_dim;
    kv->n_ctx = n_ctx;
    kv->n_seq = n_seq;
    kv->n_blocks = (int32_t)pool_blocks(n_ctx, n_seq);
    /* zeroed: attention's last partial group of 16 keys reads (and ignores)
     * the block's slots past the sequence's length */
    kv->k = calloc(1, bytes / 2);
    kv->v = calloc(1, bytes / 2);
    kv->free_list = malloc((size_t)kv->n_blocks * sizeof(int32_t));
    kv->seqs = calloc((size_t)n_seq, sizeof(brisk_kv_seq));
    if (!kv->k || !kv->v || !kv->free_list || !kv->seqs) goto nomem;
    const int32_t max_blocks = blocks_for(n_ctx);
    for (int32_t s = 0; s < n_seq; s++)
        if (!(kv->seqs[s].blocks = malloc((size_t)max_blocks * sizeof(int32_t)))) goto nomem;
    /* hand out low block ids first: the stack pops from the end */
    for (int32_t i = 0; i < kv->n_blocks; i++) kv->free_list[i] = kv->n_blocks - 1 - i;
    kv->n_free = kv->n_blocks;
    *out = kv;
    return BRISK_OK;
nomem:
    brisk_kv_free(kv);
    return brisk_fail(err, BRISK_ERR_NOMEM, "KV cache: cannot allocate %.1f MiB", (double)bytes / 1048576.0);
}

void brisk_kv_free(brisk_kv *kv) {
    if (!kv) return;
    if (kv->seqs)
        for (int32_t s = 0; s < kv->n_seq; s++) free(kv->seqs[s].blocks);
    free(kv->seqs);
    free(kv->free_list);
    free(kv->k);
    free(kv->v);
    free(kv);
}

brisk_status brisk_kv_reserve(brisk_kv *kv, int32_t seq, int32_t new_len, brisk_error *err) {
    if (seq < 0 || seq >= kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence id %d out of range [0, %d)", seq, kv->n_seq);
    if (new_len > kv->n_ctx)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "sequence %d: %d tokens exceed the context size %d", seq, new_len, kv->n_ctx);
    brisk_kv_seq *s = &kv->seqs[seq];
    const int32_t need = blocks_for(new_len) - s->n_blocks;
    if (need <= 0) return BRISK_OK;
    if (need > kv->n_free)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "KV cache full: sequence %d needs %d more blocks of %d tokens, %d free (context %d over %d sequences)",
                          seq, need, BRISK_KV_BLOCK, kv->n_free, kv->n_ctx, kv->n_seq);
    for (int32_t i = 0; i < need; i++) s->blocks[s->n_blocks++] = kv->free_list[--kv->n_free];
    return BRISK_OK;
}

void brisk_kv_truncate(brisk_kv *kv, int32_t seq, int32_t n_keep) {
    if (seq < 0 || seq >= kv->n_seq) return;
    brisk_kv_seq *s = &kv->seqs[seq];
    if (n_keep < 0) n_keep = 0;
    if (n_keep < s->len) s->len = n_keep;
    if (s->ordered > s->len) s->ordered = s->len;
    const int32_t keep_blocks = blocks_for(s->len);
    while (s->n_blocks > keep_blocks) kv->free_list[kv->n_free++] = s->blocks[--s->n_blocks];
}

void brisk_kv_keep_path(brisk_kv *kv, int32_t seq, int32_t base, const int32_t *rel, int32_t n) {
    brisk_kv_seq *s = &kv->seqs[seq];
    const size_t head_bytes = (size_t)kv->head_dim * sizeof(uint16_t);
    /* rel is increasing, so rel[d] >= d: a move never overwrites a row a later move reads */
    for (int32_t d = 0; d < n; d++) {
        if (rel[d] == d) continue;
        for (int32_t il = 0; il < kv->n_layer; il++)
            for (int32_t h = 0; h < kv->n_head; h++) {
                uint16_t *kd = brisk_kv_k(kv, il, seq, base + d, h);
                const uint16_t *ks = brisk_kv_k(kv, il, seq, base + rel[d], h);
                for (int32_t i = 0; i < kv->head_dim; i++) kd[(size_t)i * BRISK_KV_BLOCK] = ks[(size_t)i * BRISK_KV_BLOCK];
                memcpy(brisk_kv_v(kv, il, seq, base + d, h), brisk_kv_v(kv, il, seq, base + rel[d], h), head_bytes);
            }
    }
    s->len = base + n;
    s->ordered = s->len;
    brisk_kv_truncate(kv, seq, s->len);
}
