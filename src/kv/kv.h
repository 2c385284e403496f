/* kv: the paged key/value store. It owns the layout, the storage type, the
 * position and token of every slot, and the sharing of blocks between
 * sequences; the model code reads and writes rows through brisk_kv_k/v and
 * asks for lengths through the accessors below, nothing else.
 *
 * Memory is one pool of n_blocks blocks of BRISK_KV_BLOCK token slots per
 * layer, sized once at init (brisk_kv_plan reports every byte first); nothing
 * here allocates after init.
 *
 * Blocks (vLLM v1's block pool, rewritten for brisk):
 *   - a block is referenced by the sequences whose block table holds it
 *     (ref); sequences share full blocks freely (brisk_kv_fork copies a block
 *     table and bumps refs, copying no data), and a block that is shared, or
 *     held by the prefix index, is never written: a write into its free slots
 *     copies it first (copy on write, brisk_kv_reserve_batch).
 *   - every slot records its position and token id (tok/pos below), so the
 *     cache knows its tokens (brisk_seq_tokens) and a slot need not equal a
 *     position once eviction and compaction exist.
 *   - the prefix index: when a sequence's block fills with tokens in position
 *     order (brisk_kv_commit), it is indexed by hash(parent block's hash, its
 *     32 token ids). A lookup compares the parent block (id and generation)
 *     and the token ids, not only the hash, so a hit is exact. A block whose
 *     content is already indexed is replaced by the indexed one (the K/V are
 *     bitwise equal: batch invariance), so equal prefixes share memory.
 *   - the free queue is one doubly linked list of the blocks no sequence
 *     holds: plain free blocks at its head, indexed ("cached") ones at its
 *     tail in least-recently-released order. Allocation pops the head, so a
 *     cached block is evicted (dropped from the index) only when no plain
 *     free block is left, and then the least recently used first. Sequences
 *     release their blocks last-first, so a prefix's early blocks (shared by
 *     more requests) outlive its tail.
 *   Accounting: blocks in use (ref > 0) + cached (ref 0, indexed) + free
 *   (ref 0, not indexed) = n_blocks, always (brisk_kv_check).
 *
 * Layout inside a block: each KV head's part is contiguous. V is stored by
 * position (the block's slots one after another, head_dim elements each); K
 * is stored transposed, by dimension (element i of the block's 32 slots
 * contiguous), so attention computes 16 positions' scores in vector lanes
 * straight from the cache, with neither widening nor gathers. With
 * token-major rows a head's 128 bytes per position sat a whole row (1 KiB for
 * 8 heads of 64) apart: decode attention waited on DRAM and gathered K into a
 * widened copy.
 *
 * Storage type: K and V each have one (brisk_kv_type, llama.cpp's cache
 * types: F16, the default, F32, Q8_0 and Q4_0; docs/KV.md). A row is
 * quantized once, when it is written (brisk_kv_put, with llama.cpp's CPU
 * rounding), and the attention kernels dequantize as they read. The
 * quantized types keep llama.cpp's blocks (32 consecutive elements of one
 * token's head, one F16 scale d) and their bytes per element; only their
 * arrangement inside a KV block follows brisk's layout:
 *   K, per (layer, block, KV head) part:
 *     F16  u16 [head_dim][32]                       element i of slot s at i*32 + s
 *     F32  f32 [head_dim][32]                       the same
 *     Q8_0 i8  qs[head_dim][32], then u16 d[head_dim/32][32]   value d[i/32][s] * qs[i][s]
 *     Q4_0 u8  qs[head_dim][16], then u16 d[head_dim/32][32]   byte i*16 + s%16, low nibble for
 *          s < 16, high for s >= 16 (as llama.cpp pairs elements j and j+16); value d * (nibble - 8)
 *     K4   u8  qs[head_dim][16], then u16 d[head_dim], then u16 min[head_dim]: one group per
 *          channel i (its 32 slots), byte i*16 + s%16, low nibble for s < 16; value
 *          (float)q * d[i] + min[i]
 *     K2   u8  qs[head_dim][8], then d[head_dim], min[head_dim]: slot s at bits 2 (s / 8) of
 *          byte i*8 + s%8
 *     (K4/K2 hold this only once the block is sealed; until then its K is in F16 staging:
 *     brisk_kv.stage, laid out as an F16 part, and every query reads its own block from
 *     there: docs/KV.md "k4 and k2".)
 *   V, per part: 32 rows (one per slot) of head_dim elements in llama.cpp's
 *     row form (F16, F32, or head_dim/32 block_q8_0 / block_q4_0; K4: block_q4_1's
 *     form, F16 d, F16 min, 16 bytes of nibbles; K2: F16 d, F16 min, 8 bytes, element j
 *     at bits 2 (j / 8) of byte j % 8).
 * Every dequantized value d * q is exact in F32 (11-bit d times a 7-bit q),
 * so every path (the kernels' fused dequantization, widening into kt, a
 * scalar loop) sees the same values.
 *
 * Slots and positions: attention reads a sequence's slots in slot order and
 * takes every position from here (brisk_kv_slot_pos: windowed attention's
 * mask, brisk_kv_next_pos: where the sequence continues), so a slot need not
 * equal its position: a retention policy may drop slots and compact the rest
 * (keeping positions increasing with the slot) without touching the model
 * code. Today's operations keep slot == position; tests/test_engine.c
 * (test_positions_not_slots) compacts a sequence and checks attention. */
#ifndef BRISK_KV_H
#define BRISK_KV_H

#include "base/base.h"

#define BRISK_KV_BLOCK 32   /* token slots per block */

/* Storage type of K or V elements. */
typedef enum brisk_kv_type {
    BRISK_KV_F16 = 0,    /* IEEE half, 2 bytes per element */
    BRISK_KV_F32 = 1,    /* 4 bytes per element */
    BRISK_KV_Q8_0 = 2,   /* llama.cpp's q8_0: 34 bytes per 32 elements */
    BRISK_KV_Q4_0 = 3,   /* llama.cpp's q4_0: 18 bytes per 32 elements */
    /* KIVI's representation (docs/KV.md "k4 and k2"): K per channel (a
     * channel's 32 slots of a block share an F16 scale and min), V per token
     * (32 elements of one head share them, llama.cpp's q4_1 layout for k4);
     * asymmetric, 4 or 2 bits. The open block of a sequence keeps its K in F16
     * staging until it fills (below). */
    BRISK_KV_K4 = 4,     /* 20 bytes per 32 elements */
    BRISK_KV_K2 = 5,     /* 12 bytes per 32 elements */
} brisk_kv_type;
#define BRISK_KV_N_TYPES 6
/* Cache type names past the storage types: hybrid precision (docs/KV.md
 * "hyb4 and hyb2"), stored as k4 / k2 plus, per sequence, layer and KV head,
 * a set of F16 rows (the sinks, the newest full block and the slots that
 * received the most attention). Given
 * to brisk_kv_plan_full / brisk_kv_init_full for K and V together; the cache
 * then holds k_type = v_type = K4 (K2) and hyb = true. */
#define BRISK_KV_HYB4 6
#define BRISK_KV_HYB2 7
#define BRISK_KV_N_NAMES 8
static inline bool brisk_kv_type_hyb(int t) { return t == BRISK_KV_HYB4 || t == BRISK_KV_HYB2; }

/* Whether t is one of KIVI's types (k4, k2). */
static inline bool brisk_kv_type_kivi(int t) { return t == BRISK_KV_K4 || t == BRISK_KV_K2; }
/* A K type attention scores by integer dots against the query in Q8_0 (as llama.cpp does): Q8_0, Q4_0. */
static inline bool brisk_kv_type_int_dot(int t) { return t == BRISK_KV_Q8_0 || t == BRISK_KV_Q4_0; }

/* "f16", "f32", "q8_0", "q4_0" (llama.cpp's names), "k4", "k2", "hyb4", "hyb2"; "?" outside them. */
const char *brisk_kv_type_name(int type);
/* The type named (case-insensitive), or -1. */
int brisk_kv_type_parse(const char *name);
/* Bytes of n elements (n % 32 == 0 for the block types) in row form: V's
 * row (and its storage), and K's for every type but k4/k2, whose storage is
 * per channel and whose K row form is brisk_kv_k_row_bytes's. */
size_t brisk_kv_row_bytes(brisk_kv_type t, int64_t n);
/* Bytes of one token's K row of n elements in row form (brisk_kv_row_get/set,
 * KV state files): brisk_kv_row_bytes, except k4/k2: per element its F16
 * staged value (u16), the channel group's F16 scale and min (u16 each) and its
 * code (u8, 0xFF while the slot's block is open, not yet quantized): 7 n. */
size_t brisk_kv_k_row_bytes(brisk_kv_type t, int64_t n);

typedef struct brisk_kv_seq {
    int32_t *blocks;      /* block ids, [n_blocks] used, capacity blocks_for(n_ctx) */
    int32_t n_blocks;     /* ceil(len / BLOCK), or more between a reservation and its writes */
    int32_t len;          /* token slots stored: [0, len) */
    /* slots [0, ordered) hold positions [0, ordered); ordered < len only after
     * a tree batch (its rows sit in batch order, see model/forward.h) until
     * brisk_kv_keep_path or brisk_kv_truncate puts the sequence back in order */
    int32_t ordered;
    int32_t n_indexed;    /* blocks [0, n_indexed) are in the prefix index (full, ordered) */
    uint8_t role;         /* brisk_kv_role the slots written next get (brisk_seq_set_role) */
    /* k4/k2 K: during a forward pass, slots [0, seal_end) are in position order
     * once the batch is written (brisk_kv_batch_order): the put of slot 31 of
     * a block below it quantizes the block */
    int32_t seal_end;
} brisk_kv_seq;

/* Per-block bookkeeping. */
typedef struct brisk_kv_block {
    int32_t ref;          /* block tables holding it */
    int32_t prev, next;   /* free queue links (-1: none); meaningful while ref == 0 */
    int32_t hnext;        /* next block of its hash bucket (-1: end); while indexed */
    int32_t parent;       /* indexed: the indexed block before it in its prefix (-1: the first) */
    uint32_t parent_gen;  /* indexed: parent's gen when this block was indexed */
    uint32_t gen;         /* bumped each time the block leaves the index (stale children miss) */
    uint8_t indexed;      /* in the prefix index */
    /* K of a slot in it was re-rotated to a new position (kv/shift.c), or
     * its heads hold different tokens (brisk_kv_compact_heads): the rows are
     * no longer bitwise what a fresh computation of its tokens gives, so the
     * block is never indexed (a prefix-cache hit must be exact). Cleared on
     * alloc. */
    uint8_t rotated;
    uint64_t hash;        /* indexed: hash(parent's hash, its BLOCK token ids) */
    /* k4/k2 K: the block's F16 staging (an index into brisk_kv.stage, -1:
     * none) and whether its quantized K is valid (sealed). An open block
     * (not sealed) holds its K in its staging only; a sealed block keeps its
     * staging until the sequence's batch is committed, so the queries of
     * the batch that sealed it still read their own block in F16. */
    int32_t stage;
    uint8_t sealed;
} brisk_kv_block;

typedef struct brisk_kv {
    int32_t n_layer;
    int32_t row;          /* K elements per token per layer: n_head * head_dim */
    int32_t n_head, head_dim;   /* KV heads; K elements per head and token */
    /* V elements per head and token: head_dim, except multi-head latent
     * attention (deepseek2), where K is the latent plus its RoPE'd part and
     * V the latent alone (docs/MODELS.md) */
    int32_t head_dim_v;
    int32_t n_ctx;        /* max tokens per sequence (brisk_context_params.n_ctx_seq) */
    int32_t n_seq;
    int32_t n_blocks;     /* pool size: blocks_for(kv_tokens) + n_seq - 1 */
    int32_t max_blocks;   /* blocks_for(n_ctx): a block table's capacity */
    brisk_kv_type k_type, v_type;
    /* K stored rotated by a normalized Walsh-Hadamard transform per head
     * (brisk_kv_hadamard; --k-hadamard): the queries are rotated alike, so
     * q.k is unchanged while an outlier channel's energy spreads over the
     * block that shares its scale. Only for q8_0/q4_0 K; set before use. */
    bool k_hadamard;
    size_t k_part, v_part;   /* bytes of one (layer, block, KV head) part of K / V (layouts above) */
    uint8_t *k;           /* [n_layer][n_blocks][n_head] parts of k_part bytes (transposed) */
    uint8_t *v;           /* [n_layer][n_blocks][n_head] parts of v_part bytes */
    size_t k_bytes, v_bytes;   /* their sizes (brisk_alloc_large's, for brisk_free_large) */
    int32_t *tok;         /* [n_blocks][BLOCK] token id of each slot */
    int32_t *pos;         /* [n_blocks][BLOCK] position of each slot */
    uint8_t *role;        /* [n_blocks][BLOCK] brisk_kv_role of each slot (pinning, docs/KV.md) */
    uint32_t pin_mask;    /* roles (bit 1 << role) never evicted nor discarded by a context shift */
    brisk_kv_block *blk;  /* [n_blocks] */
    int32_t free_head, free_tail;   /* the free queue (see above); -1 when empty */
    int32_t n_free;       /* ref 0, not indexed */
    int32_t n_cached;     /* ref 0, indexed */
    int32_t *bucket;      /* [n_bucket] first block of each hash chain, -1: empty */
    uint32_t bucket_mask; /* n_bucket - 1 (a power of two >= n_blocks) */
    brisk_kv_seq *seqs;   /* [n_seq] */
    int32_t *want;        /* [n_seq] scratch: brisk_kv_reserve_batch's new lengths */
    int32_t *chain;       /* [max_blocks] scratch: brisk_kv_sync_prefix's cached blocks */
    int64_t n_evicted;    /* cached blocks evicted so far */
    int64_t n_hit_tokens; /* tokens brisk_kv_sync_prefix took from the prefix index */
    size_t bytes;         /* everything init allocated (= brisk_kv_plan) */
    int32_t in_use_max;   /* high-water mark of blocks in use (ref > 0) since init */
    int64_t n_compacted;  /* slots dropped by brisk_kv_compact so far */
    /* the retention policy (kv/policy.h), NULL = none: keep every slot. Set by
     * the context (brisk_kv_policy_set) and run before each batch
     * (brisk_kv_policy_make_room, forward.c); owns its own scratch. */
    struct brisk_kv_policy *policy;
    /* k4/k2 K's F16 staging: n_stage blocks of [n_layer][n_head][head_dim][32]
     * F16 (a K part's F16 layout), 2 n_seq + blocks_for(n_batch) of them
     * (each sequence's open block, and the blocks one batch fills, whose
     * queries read their own block in F16); stage_free[0, n_stage_free) the
     * unused ones. 0 and NULL for the other K types. */
    int32_t n_stage, n_stage_free;
    uint16_t *stage;
    int32_t *stage_free;
    /* hyb4/hyb2 (kv/hyb.c, docs/KV.md "hyb4 and hyb2"): K and V stored as
     * k4/k2, each staging block also holds the block's V in F16 (after its
     * K: [n_layer][n_head][32][head_dim_v]), and per (sequence, layer, KV
     * head) up to hyb_cap hot rows hold F16 K and V of the sinks, the newest
     * full block and the slots with the most attention, which every later
     * query reads instead of the quantized values. */
    bool hyb;
    int32_t hyb_cap;      /* hot rows per (sequence, layer, KV head): brisk_kv_hyb_cap(n_ctx) */
    /* per unit u = (sequence, layer, KV head): brisk_kv_hyb_unit */
    int32_t *hyb_slot;    /* [unit][hyb_cap] the slot a hot row holds, -1: free */
    int64_t *hyb_mass;    /* [unit][hyb_cap] its attention mass so far (fixed point, policy.h's) */
    int64_t *hyb_wmass;   /* [unit][BLOCK] the mass of the open block's slots */
    int16_t *hyb_order;   /* [unit][hyb_cap] the rows in use in slot order, hyb_n[unit] of them (hyb_cap < 32768) */
    int32_t *hyb_n;       /* [unit] rows in use */
    uint16_t *hyb_k;      /* [unit][hyb_cap / 16][head_dim][16] F16: groups of 16 rows transposed as the cache's K */
    uint16_t *hyb_v;      /* [unit][hyb_cap][head_dim_v] F16 */
    void *hyb_cand;       /* [hyb_cap] a refresh's candidates (hyb.c) */
    size_t hyb_seq_bytes; /* the hot rows' arrays of one sequence (brisk_cache_stats.hot_bytes_per_seq) */
} brisk_kv;

/* Bytes the cache would allocate for these limits, all of it: K, V and the
 * bookkeeping (false on overflow). brisk_kv_init allocates exactly this. */
/* n_ctx: tokens per sequence (a block table's capacity); kv_tokens: the
 * pool's token budget (plus one partial block per extra sequence). */
bool brisk_kv_plan(int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t n_ctx, int32_t kv_tokens, int32_t n_seq,
                   brisk_kv_type k_type, brisk_kv_type v_type, size_t *bytes);

brisk_status brisk_kv_init(brisk_kv **out, int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t n_ctx, int32_t kv_tokens,
                           int32_t n_seq, brisk_kv_type k_type, brisk_kv_type v_type, brisk_error *err);
/* The same with V heads of head_dim_v (1 <= head_dim_v <= head_dim) elements. */
bool brisk_kv_plan_dims(int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t head_dim_v, int32_t n_ctx, int32_t kv_tokens,
                        int32_t n_seq, brisk_kv_type k_type, brisk_kv_type v_type, size_t *bytes);
brisk_status brisk_kv_init_dims(brisk_kv **out, int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t head_dim_v, int32_t n_ctx,
                                int32_t kv_tokens, int32_t n_seq, brisk_kv_type k_type, brisk_kv_type v_type, brisk_error *err);
/* The same with the largest batch a forward pass gives it (n_batch tokens):
 * it sizes k4/k2 K's staging (the variants above assume n_ctx). */
bool brisk_kv_plan_full(int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t head_dim_v, int32_t n_ctx, int32_t kv_tokens,
                        int32_t n_seq, int32_t n_batch, brisk_kv_type k_type, brisk_kv_type v_type, size_t *bytes);
brisk_status brisk_kv_init_full(brisk_kv **out, int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t head_dim_v, int32_t n_ctx,
                                int32_t kv_tokens, int32_t n_seq, int32_t n_batch, brisk_kv_type k_type, brisk_kv_type v_type,
                                brisk_error *err);
void brisk_kv_free(brisk_kv *kv);   /* NULL is a no-op */

static inline int32_t brisk_kv_n_seq(const brisk_kv *kv) { return kv->n_seq; }
static inline int32_t brisk_kv_n_ctx(const brisk_kv *kv) { return kv->n_ctx; }
/* Slots stored for seq, and how many of them lead in position order. */
static inline int32_t brisk_kv_len(const brisk_kv *kv, int32_t seq) { return kv->seqs[seq].len; }
static inline int32_t brisk_kv_ordered(const brisk_kv *kv, int32_t seq) { return kv->seqs[seq].ordered; }
/* Token id and position recorded for slot (< len) of seq. */
static inline int32_t brisk_kv_slot_token(const brisk_kv *kv, int32_t seq, int32_t slot) {
    return kv->tok[(size_t)kv->seqs[seq].blocks[slot / BRISK_KV_BLOCK] * BRISK_KV_BLOCK + (size_t)(slot % BRISK_KV_BLOCK)];
}
static inline int32_t brisk_kv_slot_pos(const brisk_kv *kv, int32_t seq, int32_t slot) {
    return kv->pos[(size_t)kv->seqs[seq].blocks[slot / BRISK_KV_BLOCK] * BRISK_KV_BLOCK + (size_t)(slot % BRISK_KV_BLOCK)];
}

/* Role of slot (< len) of seq (brisk_kv_role), and whether it is pinned. */
static inline uint8_t brisk_kv_slot_role(const brisk_kv *kv, int32_t seq, int32_t slot) {
    return kv->role[(size_t)kv->seqs[seq].blocks[slot / BRISK_KV_BLOCK] * BRISK_KV_BLOCK + (size_t)(slot % BRISK_KV_BLOCK)];
}
static inline bool brisk_kv_slot_pinned(const brisk_kv *kv, int32_t seq, int32_t slot) {
    return (kv->pin_mask >> brisk_kv_slot_role(kv, seq, slot)) & 1u;
}

/* The position seq's next token takes: one past its last slot's (0 when
 * empty). Positions increase with the slot; they equal the slot until a
 * retention policy drops slots. */
static inline int32_t brisk_kv_next_pos(const brisk_kv *kv, int32_t seq) {
    const int32_t len = kv->seqs[seq].len;
    return len > 0 ? brisk_kv_slot_pos(kv, seq, len - 1) + 1 : 0;
}

/* Make room for the writes of one batch, all or nothing: token i of the
 * batch will write slot slot[i] of sequence seq[i] (ids valid, checked by
 * the caller). Every sequence gets the blocks up to its largest slot, and
 * every block those slots fall in becomes exclusively its own: a shared
 * block is copied (each writer counts one copy), an indexed block held only
 * by it is copied too while the pool has a block to spare (so the cache keeps
 * it) and otherwise leaves the index. Fails with BRISK_ERR_CAPACITY, changing
 * nothing, when a sequence would exceed n_ctx or the pool (free plus cached
 * blocks) cannot cover the batch. Allocates nothing (the pool does). */
brisk_status brisk_kv_reserve_batch(brisk_kv *kv, const int32_t *seq, const int32_t *slot, int32_t n, brisk_error *err);
/* One sequence's brisk_kv_reserve_batch for slots [len, new_len). */
brisk_status brisk_kv_reserve(brisk_kv *kv, int32_t seq, int32_t new_len, brisk_error *err);
/* Before a forward pass writes the batch's rows (after brisk_kv_reserve_batch):
 * token i writes slot[i] of seq[i] and is in position order (in_order[i],
 * forward.c's "direct"). For a k4/k2 K, a block whose last slot such a token
 * writes is quantized as that put completes it, layer by layer, so later
 * queries of the batch read it quantized; a no-op for the other types. */
void brisk_kv_batch_order(brisk_kv *kv, const int32_t *seq, const int32_t *slot, const uint8_t *in_order, int32_t n);
/* After the rows of slot (reserved) were written: record its token and
 * position and extend the sequence; in_order: the slot holds its position
 * and so does every slot before it (forward.c's "direct"). O(1). */
void brisk_kv_written(brisk_kv *kv, int32_t seq, int32_t slot, int32_t token, int32_t pos, bool in_order);
/* Index seq's blocks that are full and in position order and not yet
 * indexed (a block's content already indexed replaces it in the table). O(1)
 * when no block filled; hashing costs one pass over a block's 32 ids. Call
 * once the batch that wrote them is accepted (engine.c, after the logits
 * are checked), never for rows that will be undone. */
void brisk_kv_commit(brisk_kv *kv, int32_t seq);
/* Keep slots [0, n_keep) of seq; later blocks are released (last first). */
void brisk_kv_truncate(brisk_kv *kv, int32_t seq, int32_t n_keep);
/* Keep slots [0, base) and then slots base + rel[0], base + rel[1], ... (rel
 * strictly increasing, base + rel[n - 1] < len), moved down to base, base + 1,
 * ... in every layer (their tokens and positions too); the rest is dropped
 * and the sequence is in position order again (len = ordered = base + n). The
 * caller validates the arguments; the slots moved are the last decode's, in
 * blocks that decode's reservation made exclusive. */
void brisk_kv_keep_path(brisk_kv *kv, int32_t seq, int32_t base, const int32_t *rel, int32_t n);
/* Retention's eviction: keep the slots keep[0] < keep[1] < ... < keep[n - 1]
 * (< len) of seq and drop the others, moving the kept slots down to 0 .. n - 1
 * in every layer with their tokens and positions (so positions stay those the
 * rows were computed at: K is stored rotated, RoPE stays right), then release
 * the blocks past ceil(n / BLOCK) to the pool: compaction, so that memory
 * really returns. Every block a move writes into is made the sequence's own
 * first (a shared block is copied, an indexed one leaves the index). Fails with
 * BRISK_ERR_CAPACITY, changing nothing, when those copies need more blocks
 * than are free or cached; BRISK_ERR_INVALID_ARG for a keep list that is not
 * strictly increasing inside [0, len) or a sequence holding a token tree. */
brisk_status brisk_kv_compact(brisk_kv *kv, int32_t seq, const int32_t *keep, int32_t n, brisk_error *err);
/* Per-head eviction (a retention policy's per-head selection): each (layer,
 * KV head) h = layer x n_head + head keeps its own slots keep[h * stride +
 * 0 .. n) (increasing, < len), moved down to 0 .. n - 1 in that head only;
 * every head keeps n, so the blocks past ceil(n / BLOCK) return to the pool
 * as brisk_kv_compact's do. The cache's token, position and role of a slot
 * become head 0's (the policy records every head's positions: policy.h);
 * the blocks rewritten are never indexed. Errors as brisk_kv_compact's. */
brisk_status brisk_kv_compact_heads(brisk_kv *kv, int32_t seq, const int32_t *keep, size_t stride, int32_t n, brisk_error *err);
/* dst becomes a copy of src (dst's own blocks are released first): it holds
 * src's blocks, every one shared (ref + 1), no data copied; the first write
 * into a shared partial block copies it. src must be in position order
 * (ordered == len) or BRISK_ERR_INVALID_ARG. src == dst changes nothing. */
brisk_status brisk_kv_fork(brisk_kv *kv, int32_t src, int32_t dst, brisk_error *err);
/* Keep the longest prefix of tok[0, limit) that seq already holds in
 * position order or that the prefix index has in whole blocks, whichever is
 * longer (the index's blocks then replace seq's: shared, not copied), and
 * drop the rest of seq. Returns the tokens kept (seq's new length). */
int32_t brisk_kv_sync_prefix(brisk_kv *kv, int32_t seq, const int32_t *tok, int32_t limit);

/* ---- a sequence's rows, whatever blocks hold them (KV save/restore, engine/state.c) ---- */

/* The K and V rows of slot (< the reserved length) of seq in layer, in row
 * form (brisk_kv_row_bytes of the K / V type for n_head x head_dim elements,
 * both: a V of head_dim_v < head_dim elements is padded with zero bytes;
 * KV head after KV head, each head's elements in order, the block types as
 * llama.cpp's blocks), copied out of the pool (get) or into it (set). set
 * writes in place: the caller owns the slot's block exclusively (fresh from
 * brisk_kv_reserve after clearing the sequence), then records the slot with
 * brisk_kv_written. */
void brisk_kv_row_get(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, uint8_t *k, uint8_t *v);
void brisk_kv_row_set(brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, const uint8_t *k, const uint8_t *v);
/* Store KV head head's K and V (head_dim and head_dim_v floats) for slot of seq in
 * layer, converted to the storage types (F16: round to nearest even; Q8_0:
 * llama.cpp's x86 CPU quantize_row_q8_0; Q4_0: quantize_row_q4_0). The
 * caller owns the slot's block (brisk_kv_reserve_batch). */
/* x := H x for a head of n floats, H the orthonormal Walsh-Hadamard transform
 * over consecutive groups of g elements, g the largest power of two dividing
 * n (n = 96: three groups of 32). H is its own inverse. One butterfly order,
 * so every caller gets the same bits. */
void brisk_kv_hadamard(float *x, int32_t n);
/* The K types a Hadamard rotation serves (k_hadamard): the per-token block
 * types q8_0 and q4_0 (F16/F32 lose nothing to spread; k4/k2 quantize per
 * channel, which the rotation would mix). */
static inline bool brisk_kv_type_hadamard(int32_t t) { return t == BRISK_KV_Q8_0 || t == BRISK_KV_Q4_0; }
void brisk_kv_put(brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, int32_t head, const float *k, const float *v);
/* Blocks seq could be given if it were cleared first: the free and cached
 * blocks plus those only seq holds. A load checks this before it clears
 * anything, so a refusal changes nothing. */
int32_t brisk_kv_blocks_obtainable(const brisk_kv *kv, int32_t seq);

/* Block counts: in_use + cached + free == n_blocks. */
void brisk_kv_counts(const brisk_kv *kv, int32_t *in_use, int32_t *cached, int32_t *free_blocks);
/* Every invariant of the pool, walked in full (tests): refcounts equal the
 * block tables' references, the free queue holds exactly the unreferenced
 * blocks (plain ones first), the index holds exactly the indexed blocks under
 * their hashes, each sequence's first n_indexed blocks form an indexed chain,
 * the counts add up. false with a message on the first violation. */
bool brisk_kv_check(const brisk_kv *kv, brisk_error *err);

/* The part (layer, block of pos, KV head head) of K / V: its first byte
 * (pos must be < the reserved length). */
static inline size_t brisk_kv_part_index(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head) {
    const int32_t b = kv->seqs[seq].blocks[pos / BRISK_KV_BLOCK];
    return ((size_t)layer * (size_t)kv->n_blocks + (size_t)b) * (size_t)kv->n_head + (size_t)head;
}
static inline uint8_t *brisk_kv_k_part(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head) {
    return kv->k + brisk_kv_part_index(kv, layer, seq, pos, head) * kv->k_part;
}
static inline uint8_t *brisk_kv_v_part(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head) {
    return kv->v + brisk_kv_part_index(kv, layer, seq, pos, head) * kv->v_part;
}
/* F16 K of (layer, seq, pos, head): element i at [i * BRISK_KV_BLOCK]; the
 * next position of the same block is the next element. F16 K only. */
static inline uint16_t *brisk_kv_k(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head) {
    return (uint16_t *)(void *)brisk_kv_k_part(kv, layer, seq, pos, head) + (size_t)(pos % BRISK_KV_BLOCK);
}
/* V row of (layer, seq, pos, head) in its storage form (row_bytes(v_type,
 * head_dim_v) bytes); the next position of the same block follows it. */
static inline uint8_t *brisk_kv_v_row(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head) {
    return brisk_kv_v_part(kv, layer, seq, pos, head) + (size_t)(pos % BRISK_KV_BLOCK) * (kv->v_part / BRISK_KV_BLOCK);
}
/* F16 V of (layer, seq, pos, head): head_dim_v contiguous elements. F16 V only. */
static inline uint16_t *brisk_kv_v(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head) {
    return (uint16_t *)(void *)brisk_kv_v_row(kv, layer, seq, pos, head);
}
/* Element i of slot s (0..31) of a K part, dequantized (exact; k4/k2: the
 * quantized value, valid once the block is sealed). */
float brisk_kv_k_value(const brisk_kv *kv, const uint8_t *part, int32_t s, int32_t i);

/* ---- for the context shift (kv/shift.c) ---- */
/* Blocks [b0, b1) of seq's table become its own before they are rewritten
 * (shared: copied; indexed: removed from the index), as compaction does.
 * BRISK_ERR_CAPACITY, changing nothing, when the copies need more blocks
 * than are free or cached. */
brisk_status brisk_kv_make_own(brisk_kv *kv, int32_t seq, int32_t b0, int32_t b1, brisk_error *err);
/* KV head head's K of slot in layer as head_dim floats: read dequantized
 * (exact), or written converted to the storage type as brisk_kv_put does
 * (V untouched). The caller owns the slot's block for the write. */
void brisk_kv_k_get(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, int32_t head, float *k);
void brisk_kv_k_set(brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, int32_t head, const float *k);
/* k4/k2 K: the F16 staging of (layer, seq, pos, head)'s block, laid out as an
 * F16 K part: element i of the slot at [i * BRISK_KV_BLOCK]. The block must
 * have staging (open, or sealed in the batch not yet committed). */
uint16_t *brisk_kv_k_stage(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head);
/* ---- hybrid precision, hyb4/hyb2 (kv/hyb.c; docs/KV.md "hyb4 and hyb2") ---- */
#define BRISK_KV_HYB_SINK 4   /* the first slots, always hot */
#define BRISK_KV_HYB_PCT 5    /* hot slots beside the sinks and the window: ceil(5% of the slots before the window) */
#define BRISK_KV_HYB_CAND_BYTES 16   /* one candidate of a refresh (hyb.c) */
/* Hot rows per (sequence, layer, KV head) for a context of n_ctx tokens. */
static inline int32_t brisk_kv_hyb_cap(int32_t n_ctx) {
    const int32_t rows = BRISK_KV_HYB_SINK + BRISK_KV_BLOCK + (int32_t)(((int64_t)n_ctx * BRISK_KV_HYB_PCT + 99) / 100);
    return (rows + 15) / 16 * 16;   /* whole groups of 16 (hyb_k's layout) */
}
/* The unit of (seq, layer, KV head): each has its own hot rows. */
static inline size_t brisk_kv_hyb_unit(const brisk_kv *kv, int32_t seq, int32_t layer, int32_t head) {
    return ((size_t)seq * (size_t)kv->n_layer + (size_t)layer) * (size_t)kv->n_head + (size_t)head;
}
/* Unit u's first place in slot order whose slot is >= slot (hyb_n[u] if none). */
static inline int32_t brisk_kv_hyb_lower(const brisk_kv *kv, size_t u, int32_t slot) {
    const int16_t *ord = kv->hyb_order + u * (size_t)kv->hyb_cap;
    const int32_t *rs = kv->hyb_slot + u * (size_t)kv->hyb_cap;
    int32_t lo = 0, hi = kv->hyb_n[u];
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (rs[ord[mid]] < slot) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}
/* The hot row holding slot of seq in (layer, KV head), or -1 (read quantized). */
static inline int32_t brisk_kv_hyb_row(const brisk_kv *kv, int32_t seq, int32_t layer, int32_t head, int32_t slot) {
    const size_t u = brisk_kv_hyb_unit(kv, seq, layer, head);
    const int32_t i = brisk_kv_hyb_lower(kv, u, slot), r = i < kv->hyb_n[u] ? kv->hyb_order[u * (size_t)kv->hyb_cap + (size_t)i] : -1;
    return r >= 0 && kv->hyb_slot[u * (size_t)kv->hyb_cap + (size_t)r] == slot ? r : -1;
}
/* F16 K of hot row r of (seq, layer, head): its group of 16 rows, transposed
 * (element i of the row at [i * 16 + r % 16]), so attention scores 16 rows
 * per kernel call as it does the cache's K. */
static inline uint16_t *brisk_kv_hyb_kt(const brisk_kv *kv, int32_t seq, int32_t layer, int32_t head, int32_t r) {
    return kv->hyb_k + (brisk_kv_hyb_unit(kv, seq, layer, head) * (size_t)kv->hyb_cap + (size_t)(r / 16 * 16)) * (size_t)kv->head_dim;
}
/* F16 V (head_dim_v contiguous) of hot row r of (seq, layer, head). */
static inline const uint16_t *brisk_kv_hyb_v(const brisk_kv *kv, int32_t seq, int32_t layer, int32_t head, int32_t r) {
    return kv->hyb_v + (brisk_kv_hyb_unit(kv, seq, layer, head) * (size_t)kv->hyb_cap + (size_t)r) * (size_t)kv->head_dim_v;
}
/* A hyb cache's type name, "hyb4" or "hyb2" (for messages). */
static inline const char *brisk_kv_hyb_name(const brisk_kv *kv) { return kv->k_type == BRISK_KV_K4 ? "hyb4" : "hyb2"; }
/* hyb: the F16 V staged for (layer, seq, pos, head) (head_dim_v contiguous);
 * the block must have staging, as brisk_kv_k_stage. */
uint16_t *brisk_kv_v_stage(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head);
/* The refresh after the attention of layer in which seq's block bi (full, in
 * position order, still staged) had its last query, per KV head: of the hot
 * rows but the sinks (the previous block, held whole as the window, and the
 * rows chosen before) the ceil(5% of the slots before bi) with the most mean
 * attention stay (ties: the earlier slot), the others are freed for good;
 * then block bi becomes the window, all of its slots hot (the sinks too, in
 * block 0), copied from its staging with the masses they collected, and the
 * open block's masses start again from zero. A function of the positions
 * alone, so batch invariant (a batch's attention runs in one wave per block,
 * model/layer.c). */
void brisk_kv_hyb_refresh(brisk_kv *kv, int32_t layer, int32_t seq, int32_t bi);
/* dst's hot rows and masses := src's (a fork). */
void brisk_kv_hyb_forked(brisk_kv *kv, int32_t src, int32_t dst);
/* seq is truncated to n slots: the hot rows from the block of slot n on are
 * freed (that block reopens), the open block's masses cleared. The rows kept
 * reflect the attention of the dropped queries too (docs/KV.md: a truncated
 * hyb sequence continues close to, not bitwise, a fresh computation). */
void brisk_kv_hyb_truncated(brisk_kv *kv, int32_t seq, int32_t n);

/* KIVI's asymmetric quantizer of 32 values (q4_1's arithmetic: d = (max -
 * min) / L, L = 15 or 3, codes (int)((x - min) / d + 0.5) capped at L, d and
 * min stored as F16); a value reads back as (float)code * d + min. */
void brisk_kivi_quantize32(const float *x, int bits, uint16_t *d, uint16_t *m, uint8_t *code);

#endif
