/* kv: the paged key/value store, its block pool and prefix index (see kv.h). */
#include "kv/kv.h"
#include "kv/policy.h"

#include "quant/blocks.h"
#include "quant/convert.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int32_t blocks_for(int32_t n_tokens) { return (int32_t)(((int64_t)n_tokens + BRISK_KV_BLOCK - 1) / BRISK_KV_BLOCK); }

/* Pool size: the token budget plus one partial block per extra sequence, so
 * kv_tokens tokens spread over n_seq sequences always fit (sharing only
 * lowers the count: forks share full blocks and copy at most their partial one). */
static int64_t pool_blocks(int32_t kv_tokens, int32_t n_seq) { return (int64_t)blocks_for(kv_tokens) + (n_seq - 1); }

static const char *const type_names[BRISK_KV_N_NAMES] = {"f16", "f32", "q8_0", "q4_0", "k4", "k2", "hyb4", "hyb2"};

const char *brisk_kv_type_name(int type) { return type >= 0 && type < BRISK_KV_N_NAMES ? type_names[type] : "?"; }

int brisk_kv_type_parse(const char *name) {
    for (int t = 0; t < BRISK_KV_N_NAMES; t++)
        if (name && !strcasecmp(name, type_names[t])) return t;
    return -1;
}

size_t brisk_kv_row_bytes(brisk_kv_type t, int64_t n) {
    switch (t) {
    case BRISK_KV_F16: return (size_t)n * 2;
    case BRISK_KV_F32: return (size_t)n * 4;
    case BRISK_KV_Q8_0: return (size_t)(n / 32) * sizeof(brisk_block_q8_0);
    case BRISK_KV_Q4_0: return (size_t)(n / 32) * sizeof(brisk_block_q4_0);
    case BRISK_KV_K4: return (size_t)(n / 32) * 20;   /* F16 d, F16 min, 16 bytes of nibbles (llama.cpp's block_q4_1) */
    case BRISK_KV_K2: return (size_t)(n / 32) * 12;   /* F16 d, F16 min, 8 bytes of 2-bit codes */
    }
    return 0;
}

size_t brisk_kv_k_row_bytes(brisk_kv_type t, int64_t n) { return brisk_kv_type_kivi(t) ? (size_t)n * 7 : brisk_kv_row_bytes(t, n); }

/* ---- KIVI's quantizer (k4, k2) ---------------------------------------------------------- */

void brisk_kivi_quantize32(const float *x, int bits, uint16_t *d, uint16_t *m, uint8_t *code) {
    const int levels = (1 << bits) - 1;
    float min = x[0], max = x[0];
    for (int j = 1; j < 32; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    const float dd = (max - min) / (float)levels;
    const float id = dd ? 1.0f / dd : 0.0f;
    *d = brisk_fp32_to_fp16(dd);
    *m = brisk_fp32_to_fp16(min);
    for (int j = 0; j < 32; j++) {
        const float v = (x[j] - min) * id + 0.5f;   /* >= 0.5 for finite x: truncation rounds */
        const int c = v >= 0.0f && v < 256.0f ? (int)v : 0;
        code[j] = (uint8_t)(c < levels ? c : levels);
    }
}

static int kivi_bits(brisk_kv_type t) { return t == BRISK_KV_K4 ? 4 : 2; }

/* One token's V head (n floats, n % 32 == 0) into k4/k2 row form: per 32
 * elements F16 d, F16 min, then the codes (k4: element j in the low nibble of
 * byte j % 16 for j < 16, the high for j >= 16, as llama.cpp's q4_1; k2:
 * element j in bits 2 (j / 8) of byte j % 8). */
static void kivi_v_row(brisk_kv_type t, const float *x, int32_t n, uint8_t *row) {
    const size_t gb = brisk_kv_row_bytes(t, 32);
    for (int32_t g = 0; g < n / 32; g++) {
        uint16_t d, m;
        uint8_t c[32];
        brisk_kivi_quantize32(x + 32 * g, kivi_bits(t), &d, &m, c);
        uint8_t *b = row + (size_t)g * gb;
        memcpy(b, &d, 2);
        memcpy(b + 2, &m, 2);
        if (t == BRISK_KV_K4)
            for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(c[j] | (c[j + 16] << 4));
        else
            for (int j = 0; j < 8; j++) b[4 + j] = (uint8_t)(c[j] | (c[j + 8] << 2) | (c[j + 16] << 4) | (c[j + 24] << 6));
    }
}

/* The K part layouts of k4/k2 (kv.h): codes first (k4: byte i*16 + s%16,
 * low nibble for s < 16; k2: byte i*8 + s%8, bits 2 (s / 8)), then the
 * channels' F16 d[head_dim], then their F16 min[head_dim]. */
static size_t kivi_codes_bytes(brisk_kv_type t, int32_t hd) { return (size_t)hd * (t == BRISK_KV_K4 ? 16 : 8); }

static unsigned kivi_k_code(brisk_kv_type t, const uint8_t *part, int32_t s, int32_t i) {
    if (t == BRISK_KV_K4) return (part[(size_t)i * 16 + (size_t)(s % 16)] >> (s < 16 ? 0 : 4)) & 15u;
    return (part[(size_t)i * 8 + (size_t)(s % 8)] >> (2 * (s / 8))) & 3u;
}

static void kivi_k_code_set(brisk_kv_type t, uint8_t *part, int32_t s, int32_t i, unsigned c) {
    if (t == BRISK_KV_K4) {
        uint8_t *b = &part[(size_t)i * 16 + (size_t)(s % 16)];
        const int sh = s < 16 ? 0 : 4;
        *b = (uint8_t)((*b & ~(15u << sh)) | (c << sh));
    } else {
        uint8_t *b = &part[(size_t)i * 8 + (size_t)(s % 8)];
        const int sh = 2 * (s / 8);
        *b = (uint8_t)((*b & ~(3u << sh)) | (c << sh));
    }
}

/* Element j of a k4/k2 V row (kivi_v_row's form), dequantized. */
static float kivi_v_value(brisk_kv_type t, const uint8_t *row, int32_t j) {
    const uint8_t *b = row + (size_t)(j / 32) * brisk_kv_row_bytes(t, 32);
    uint16_t d, m;
    memcpy(&d, b, 2);
    memcpy(&m, b + 2, 2);
    const int e = j % 32;
    const unsigned c = t == BRISK_KV_K4 ? (b[4 + e % 16] >> (e < 16 ? 0 : 4)) & 15u : (b[4 + e % 8] >> (2 * (e / 8))) & 3u;
    return (float)c * brisk_fp16_to_fp32(d) + brisk_fp16_to_fp32(m);
}

static float kivi_k_value(brisk_kv_type t, const uint8_t *part, int32_t hd, int32_t s, int32_t i) {
    uint16_t d, m;
    const size_t cb = kivi_codes_bytes(t, hd);
    memcpy(&d, part + cb + 2 * (size_t)i, 2);
    memcpy(&m, part + cb + 2 * ((size_t)hd + (size_t)i), 2);
    return (float)kivi_k_code(t, part, s, i) * brisk_fp16_to_fp32(d) + brisk_fp16_to_fp32(m);
}

/* Largest head_dim of the block types (brisk_kv_put quantizes a head on the stack). */
#define KV_MAX_QHEAD 1024

/* Whether a head of head_dim elements can be stored as t. */
static bool type_fits(brisk_kv_type t, int32_t head_dim) {
    if ((int)t < 0 || (int)t >= BRISK_KV_N_TYPES) return false;
    if (t != BRISK_KV_F16 && t != BRISK_KV_F32) return head_dim % 32 == 0 && head_dim <= KV_MAX_QHEAD;
    return true;
}

/* Bytes of one (layer, block, head) part: BLOCK rows of head_dim in row form
 * (the transposed K has the same bytes: its scales sit after its codes). */
static size_t part_bytes(brisk_kv_type t, int32_t head_dim) { return brisk_kv_row_bytes(t, head_dim) * BRISK_KV_BLOCK; }

/* ---- sizes: one computation for the plan and the allocation -------------------------- */

typedef struct kv_sizes {
    int32_t n_blocks, max_blocks;
    uint32_t n_bucket;
    int32_t n_stage, hyb_cap;
    size_t k, v, tok, pos, role, blk, bucket, seqs, tables, want, chain, stage, stage_free, total;
    size_t hyb_slot, hyb_mass, hyb_wmass, hyb_order, hyb_n, hyb_k, hyb_v, hyb_cand;   /* hyb4/hyb2's hot rows (kv.h) */
} kv_sizes;

/* hyb4/hyb2 name k4/k2 storage plus hot rows: the storage type of a name. */
static brisk_kv_type storage_of(int t) {
    return t == BRISK_KV_HYB4 ? BRISK_KV_K4 : t == BRISK_KV_HYB2 ? BRISK_KV_K2 : (brisk_kv_type)t;
}

static bool kv_size_add(size_t *total, size_t a, size_t b, size_t *out) {
    return brisk_mul_size(a, b, out) && brisk_add_size(*total, *out, total);
}

static bool compute_sizes(int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t head_dim_v, int32_t n_ctx, int32_t kv_tokens,
                          int32_t n_seq, int32_t n_batch, brisk_kv_type kt, brisk_kv_type vt, kv_sizes *z) {
    memset(z, 0, sizeof *z);
    const bool hyb = brisk_kv_type_hyb(kt);
    if (hyb != brisk_kv_type_hyb(vt)) return false;   /* K and V together (brisk_kv_init_full says so) */
    kt = storage_of(kt), vt = storage_of(vt);
    if (n_layer < 1 || n_head < 1 || head_dim < 1 || head_dim_v < 1 || n_ctx < 1 || kv_tokens < 1 || n_seq < 1 || n_seq > 4096 || n_batch < 1)
        return false;
    if (!type_fits(kt, head_dim) || !type_fits(vt, head_dim_v) || (int64_t)n_head * head_dim > INT32_MAX ||
        (int64_t)n_head * head_dim_v > INT32_MAX)
        return false;
    const int64_t nb = pool_blocks(kv_tokens, n_seq);
    if (nb > INT32_MAX / 2) return false;
    z->n_blocks = (int32_t)nb;
    z->max_blocks = blocks_for(n_ctx);
    z->n_bucket = 1;
    while (z->n_bucket < (uint32_t)z->n_blocks) z->n_bucket <<= 1;
    size_t parts;   /* (layer, block, head) parts of the pool */
    if (!brisk_mul_size((size_t)nb, (size_t)n_head, &parts) || !brisk_mul_size(parts, (size_t)n_layer, &parts)) return false;
    size_t *t = &z->total;
    *t = sizeof(brisk_kv);
    if (brisk_kv_type_kivi(kt)) {
        /* each sequence's open block, the blocks one batch reaches (its
         * queries read their own block in F16 while later ones read it
         * quantized), one more per sequence a batch may start inside */
        z->n_stage = 2 * n_seq + blocks_for(BRISK_MIN(n_batch, n_ctx));
        size_t one;   /* F16 elements of one stage: K, and for hyb V too */
        if (!brisk_mul_size((size_t)n_layer * (size_t)n_head, (size_t)(head_dim + (hyb ? head_dim_v : 0)) * BRISK_KV_BLOCK, &one) ||
            !kv_size_add(t, (size_t)z->n_stage, one * sizeof(uint16_t), &z->stage) ||
            !kv_size_add(t, (size_t)z->n_stage, sizeof(int32_t), &z->stage_free))
            return false;
    }
    if (hyb) {
        const int32_t cap = z->hyb_cap = brisk_kv_hyb_cap(n_ctx);
        if (cap > INT16_MAX) return false;   /* hyb_order holds int16 rows: a context of at most ~650K tokens */
        const size_t units = (size_t)n_seq * (size_t)n_layer * (size_t)n_head, rows = units * (size_t)cap;
        size_t nk, nv;
        if (!kv_size_add(t, rows, sizeof(int32_t), &z->hyb_slot) || !kv_size_add(t, rows, sizeof(int64_t), &z->hyb_mass) ||
            !kv_size_add(t, units * BRISK_KV_BLOCK, sizeof(int64_t), &z->hyb_wmass) ||
            !kv_size_add(t, rows, sizeof(int16_t), &z->hyb_order) || !kv_size_add(t, units, sizeof(int32_t), &z->hyb_n) ||
            !brisk_mul_size(rows, (size_t)head_dim, &nk) || !kv_size_add(t, nk, sizeof(uint16_t), &z->hyb_k) ||
            !brisk_mul_size(rows, (size_t)head_dim_v, &nv) || !kv_size_add(t, nv, sizeof(uint16_t), &z->hyb_v) ||
            !kv_size_add(t, (size_t)cap, BRISK_KV_HYB_CAND_BYTES, &z->hyb_cand))
            return false;
    }
    return kv_size_add(t, parts, part_bytes(kt, head_dim), &z->k) && kv_size_add(t, parts, part_bytes(vt, head_dim_v), &z->v) &&
           kv_size_add(t, (size_t)nb * BRISK_KV_BLOCK, sizeof(int32_t), &z->tok) &&
           kv_size_add(t, (size_t)nb * BRISK_KV_BLOCK, sizeof(int32_t), &z->pos) &&
           kv_size_add(t, (size_t)nb * BRISK_KV_BLOCK, sizeof(uint8_t), &z->role) &&
           kv_size_add(t, (size_t)nb, sizeof(brisk_kv_block), &z->blk) && kv_size_add(t, z->n_bucket, sizeof(int32_t), &z->bucket) &&
           kv_size_add(t, (size_t)n_seq, sizeof(brisk_kv_seq), &z->seqs) &&
           kv_size_add(t, (size_t)n_seq * (size_t)z->max_blocks, sizeof(int32_t), &z->tables) &&
           kv_size_add(t, (size_t)n_seq, sizeof(int32_t), &z->want) && kv_size_add(t, (size_t)z->max_blocks, sizeof(int32_t), &z->chain);
}

bool brisk_kv_plan_full(int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t head_dim_v, int32_t n_ctx, int32_t kv_tokens,
                        int32_t n_seq, int32_t n_batch, brisk_kv_type k_type, brisk_kv_type v_type, size_t *bytes) {
    kv_sizes z;
    if (!compute_sizes(n_layer, n_head, head_dim, head_dim_v, n_ctx, kv_tokens, n_seq, n_batch, k_type, v_type, &z)) return false;
    *bytes = z.total;
    return true;
}

bool brisk_kv_plan_dims(int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t head_dim_v, int32_t n_ctx, int32_t kv_tokens,
                        int32_t n_seq, brisk_kv_type k_type, brisk_kv_type v_type, size_t *bytes) {
    return brisk_kv_plan_full(n_layer, n_head, head_dim, head_dim_v, n_ctx, kv_tokens, n_seq, n_ctx, k_type, v_type, bytes);
}

bool brisk_kv_plan(int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t n_ctx, int32_t kv_tokens, int32_t n_seq,
                   brisk_kv_type k_type, brisk_kv_type v_type, size_t *bytes) {
    return brisk_kv_plan_dims(n_layer, n_head, head_dim, head_dim, n_ctx, kv_tokens, n_seq, k_type, v_type, bytes);
}

brisk_status brisk_kv_init(brisk_kv **out, int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t n_ctx, int32_t kv_tokens,
                           int32_t n_seq, brisk_kv_type k_type, brisk_kv_type v_type, brisk_error *err) {
    return brisk_kv_init_dims(out, n_layer, n_head, head_dim, head_dim, n_ctx, kv_tokens, n_seq, k_type, v_type, err);
}

brisk_status brisk_kv_init_dims(brisk_kv **out, int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t head_dim_v, int32_t n_ctx,
                                int32_t kv_tokens, int32_t n_seq, brisk_kv_type k_type, brisk_kv_type v_type, brisk_error *err) {
    return brisk_kv_init_full(out, n_layer, n_head, head_dim, head_dim_v, n_ctx, kv_tokens, n_seq, n_ctx, k_type, v_type, err);
}

brisk_status brisk_kv_init_full(brisk_kv **out, int32_t n_layer, int32_t n_head, int32_t head_dim, int32_t head_dim_v, int32_t n_ctx,
                                int32_t kv_tokens, int32_t n_seq, int32_t n_batch, brisk_kv_type k_type, brisk_kv_type v_type,
                                brisk_error *err) {
    *out = NULL;
    if (n_batch < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV cache: batch of %d tokens must be positive", n_batch);
    if (n_head < 1 || head_dim < 1 || (int64_t)n_head * head_dim > INT32_MAX)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV cache: %d heads of %d elements", n_head, head_dim);
    if (head_dim_v < 1 || head_dim_v > head_dim)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV cache: V heads of %d elements (K: %d)", head_dim_v, head_dim);
    if (n_seq < 1 || n_seq > 4096) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequences: %d out of range [1, 4096]", n_seq);
    if (n_ctx < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "context: %d must be positive", n_ctx);
    if (kv_tokens < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV pool: %d tokens must be positive", kv_tokens);
    if ((int)k_type < 0 || (int)k_type >= BRISK_KV_N_NAMES || (int)v_type < 0 || (int)v_type >= BRISK_KV_N_NAMES)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "KV cache: storage types %d/%d unknown (supported: f16, f32, q8_0, q4_0, k4, k2, hyb4, hyb2)",
                          (int)k_type, (int)v_type);
    const bool hyb = brisk_kv_type_hyb(k_type);
    if (hyb != brisk_kv_type_hyb(v_type))
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                          "KV cache: %s/%s: hyb4 and hyb2 keep a slot's K and V in F16 together, so they go on K and V together "
                          "(-ctk hyb4 -ctv hyb4)", brisk_kv_type_name(k_type), brisk_kv_type_name(v_type));
    for (int w = 0; w < 2; w++) {
        const brisk_kv_type t = w ? v_type : k_type;
        if (!type_fits(storage_of(t), w ? head_dim_v : head_dim))
            return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "KV cache: %s type %s needs a head size that is a multiple of 32 up to %d, not %d",
                              w ? "V" : "K", brisk_kv_type_name(t), KV_MAX_QHEAD, w ? head_dim_v : head_dim);
    }
    if (hyb && brisk_kv_hyb_cap(n_ctx) > INT16_MAX)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "KV cache: %s supports a context of up to %d tokens, not %d", brisk_kv_type_name(k_type),
                          (INT16_MAX - BRISK_KV_HYB_SINK - BRISK_KV_BLOCK) * 100 / BRISK_KV_HYB_PCT, n_ctx);
    kv_sizes z;
    if (!compute_sizes(n_layer, n_head, head_dim, head_dim_v, n_ctx, kv_tokens, n_seq, n_batch, k_type, v_type, &z))
        return brisk_fail(err, BRISK_ERR_CAPACITY, "KV cache size for a pool of %d tokens overflows", kv_tokens);
    k_type = storage_of(k_type), v_type = storage_of(v_type);
    /* what this machine can hold is checked by the context's memory plan (engine.c) before this runs */
    brisk_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return brisk_fail(err, BRISK_ERR_NOMEM, "KV cache: out of memory");
    kv->n_layer = n_layer;
    kv->row = n_head * head_dim;
    kv->n_head = n_head;
    kv->head_dim = head_dim;
    kv->head_dim_v = head_dim_v;
    kv->n_ctx = n_ctx;
    kv->n_seq = n_seq;
    kv->n_blocks = z.n_blocks;
    kv->max_blocks = z.max_blocks;
    kv->k_type = k_type;
    kv->v_type = v_type;
    kv->k_part = part_bytes(k_type, head_dim);
    kv->v_part = part_bytes(v_type, head_dim_v);
    kv->bucket_mask = z.n_bucket - 1;
    kv->bytes = z.total;
    /* zeroed: attention's last partial group of 16 keys reads (and ignores)
     * the block's slots past the sequence's length */
    kv->k = brisk_alloc_large(z.k);
    kv->v = brisk_alloc_large(z.v);
    kv->k_bytes = z.k, kv->v_bytes = z.v;
    kv->tok = calloc(1, z.tok);
    kv->pos = calloc(1, z.pos);
    kv->role = calloc(1, z.role);
    kv->blk = calloc(1, z.blk);
    kv->bucket = malloc(z.bucket);
    kv->seqs = calloc(1, z.seqs);
    int32_t *tables = malloc(z.tables);
    kv->want = calloc(1, z.want);
    kv->chain = malloc(z.chain);
    kv->n_stage = kv->n_stage_free = z.n_stage;
    if (z.n_stage) {
        kv->stage = calloc(1, z.stage);
        kv->stage_free = malloc(z.stage_free);
    }
    if (hyb) {
        kv->hyb = true;
        kv->hyb_cap = z.hyb_cap;
        kv->hyb_slot = malloc(z.hyb_slot);
        kv->hyb_mass = calloc(1, z.hyb_mass);
        kv->hyb_wmass = calloc(1, z.hyb_wmass);
        kv->hyb_order = calloc(1, z.hyb_order);
        kv->hyb_n = calloc(1, z.hyb_n);
        kv->hyb_k = calloc(1, z.hyb_k);
        kv->hyb_v = calloc(1, z.hyb_v);
        kv->hyb_cand = malloc(z.hyb_cand);
        kv->hyb_seq_bytes = (z.hyb_slot + z.hyb_mass + z.hyb_wmass + z.hyb_order + z.hyb_n + z.hyb_k + z.hyb_v) / (size_t)n_seq;
    }
    if (kv->seqs)
        kv->seqs[0].blocks = tables;   /* the tables' one allocation, freed through seqs[0] */
    const bool hyb_lost = hyb && (!kv->hyb_slot || !kv->hyb_mass || !kv->hyb_wmass || !kv->hyb_order || !kv->hyb_n || !kv->hyb_k || !kv->hyb_v ||
                                  !kv->hyb_cand);
    if (hyb_lost || !kv->k || !kv->v || !kv->tok || !kv->pos || !kv->role || !kv->blk || !kv->bucket || !kv->seqs || !tables || !kv->want || !kv->chain ||
        (z.n_stage && (!kv->stage || !kv->stage_free))) {
        if (!kv->seqs) free(tables);
        brisk_kv_free(kv);
        return brisk_fail(err, BRISK_ERR_NOMEM, "KV cache: cannot allocate %.1f MiB", (double)z.total / 1048576.0);
    }
    for (int32_t s = 0; s < n_seq; s++) kv->seqs[s].blocks = tables + (size_t)s * (size_t)z.max_blocks;
    for (uint32_t i = 0; i < z.n_bucket; i++) kv->bucket[i] = -1;
    /* every block free, low ids first */
    for (int32_t b = 0; b < kv->n_blocks; b++) {
        kv->blk[b] = (brisk_kv_block){.ref = 0, .prev = b - 1, .next = b + 1 < kv->n_blocks ? b + 1 : -1, .hnext = -1, .parent = -1,
                                      .stage = -1};
    }
    for (int32_t i = 0; i < kv->n_stage; i++) kv->stage_free[i] = kv->n_stage - 1 - i;   /* stage 0 handed out first */
    if (hyb) {   /* nothing hot */
        memset(kv->hyb_slot, 0xFF, z.hyb_slot);
    }
    kv->free_head = 0;
    kv->free_tail = kv->n_blocks - 1;
    kv->n_free = kv->n_blocks;
    *out = kv;
    return BRISK_OK;
}

void brisk_kv_free(brisk_kv *kv) {
    if (!kv) return;
    brisk_kv_policy_free(kv->policy);
    if (kv->seqs) free(kv->seqs[0].blocks);
    free(kv->seqs);
    brisk_free_large(kv->k, kv->k_bytes);
    brisk_free_large(kv->v, kv->v_bytes);
    free(kv->tok);
    free(kv->pos);
    free(kv->role);
    free(kv->blk);
    free(kv->bucket);
    free(kv->want);
    free(kv->chain);
    free(kv->stage);
    free(kv->stage_free);
    free(kv->hyb_slot);
    free(kv->hyb_mass);
    free(kv->hyb_wmass);
    free(kv->hyb_order);
    free(kv->hyb_n);
    free(kv->hyb_k);
    free(kv->hyb_v);
    free(kv->hyb_cand);
    free(kv);
}

/* ---- the free queue ------------------------------------------------------------------- */

static void queue_unlink(brisk_kv *kv, int32_t b) {
    brisk_kv_block *x = &kv->blk[b];
    if (x->prev >= 0) kv->blk[x->prev].next = x->next;
    else kv->free_head = x->next;
    if (x->next >= 0) kv->blk[x->next].prev = x->prev;
    else kv->free_tail = x->prev;
    x->prev = x->next = -1;
}

static void queue_push(brisk_kv *kv, int32_t b, bool tail) {
    brisk_kv_block *x = &kv->blk[b];
    if (tail) {
        x->prev = kv->free_tail;
        x->next = -1;
        if (kv->free_tail >= 0) kv->blk[kv->free_tail].next = b;
        else kv->free_head = b;
        kv->free_tail = b;
    } else {
        x->prev = -1;
        x->next = kv->free_head;
        if (kv->free_head >= 0) kv->blk[kv->free_head].prev = b;
        else kv->free_tail = b;
        kv->free_head = b;
    }
}

/* ---- the prefix index ------------------------------------------------------------------ */

#define HASH_ROOT 0x243f6a8885a308d3ull   /* the parent hash of a prefix's first block */

static uint64_t mix64(uint64_t x) {   /* splitmix64's finalizer */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t block_hash(uint64_t parent_hash, const int32_t *tok) {
    uint64_t h = parent_hash;
    for (int i = 0; i < BRISK_KV_BLOCK; i++) h = mix64(h ^ ((uint64_t)(uint32_t)tok[i] + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)));
    return h;
}

static const int32_t *block_tok(const brisk_kv *kv, int32_t b) { return kv->tok + (size_t)b * BRISK_KV_BLOCK; }

static uint64_t parent_hash(const brisk_kv *kv, int32_t parent) { return parent < 0 ? HASH_ROOT : kv->blk[parent].hash; }

/* The indexed block that follows parent (-1: at a prefix's start) with these
 * token ids, or -1: the hash finds the bucket, the parent's identity and the
 * ids decide, so a hit is exact. */
static int32_t index_find(const brisk_kv *kv, int32_t parent, const int32_t *tok, uint64_t h) {
    const uint32_t pgen = parent < 0 ? 0 : kv->blk[parent].gen;
    for (int32_t b = kv->bucket[h & kv->bucket_mask]; b >= 0; b = kv->blk[b].hnext) {
        const brisk_kv_block *x = &kv->blk[b];
        if (x->hash == h && x->parent == parent && x->parent_gen == pgen && !memcmp(block_tok(kv, b), tok, BRISK_KV_BLOCK * sizeof(int32_t)))
            return b;
    }
    return -1;
}

static void index_insert(brisk_kv *kv, int32_t b, int32_t parent, uint64_t h) {
    brisk_kv_block *x = &kv->blk[b];
    x->hash = h;
    x->parent = parent;
    x->parent_gen = parent < 0 ? 0 : kv->blk[parent].gen;
    x->indexed = 1;
    int32_t *head = &kv->bucket[h & kv->bucket_mask];
    x->hnext = *head;
    *head = b;
}

/* Drop b from the index (its children, if cached, can no longer be reached:
 * the generation no longer matches). Does not touch the free queue. */
static void index_remove(brisk_kv *kv, int32_t b) {
    brisk_kv_block *x = &kv->blk[b];
    int32_t *link = &kv->bucket[x->hash & kv->bucket_mask];
    while (*link != b) link = &kv->blk[*link].hnext;
    *link = x->hnext;
    x->hnext = -1;
    x->parent = -1;
    x->indexed = 0;
    x->gen++;
}

/* ---- k4/k2 K: F16 staging and sealing --------------------------------------------------- */

/* A k4/k2 K block is open while it fills: its K sits in F16 in a staging
 * block (kv.h), and every query reads the K of its own block from there.
 * When the put of its last slot completes it (in position order, layer by
 * layer) it is sealed: each channel's 32 staged values are quantized into the
 * pool's K part, which every later query reads. Its staging stays until the
 * sequence's batch is committed (the batch's queries inside the block still
 * read it in F16), and comes back if the block is written again (truncated
 * into, then refilled; a token tree's path moved into it). */
static bool kivi_k(const brisk_kv *kv) { return brisk_kv_type_kivi(kv->k_type); }

static size_t stage_k_elems(const brisk_kv *kv) {
    return (size_t)kv->n_layer * (size_t)kv->n_head * (size_t)kv->head_dim * BRISK_KV_BLOCK;
}

/* A stage block: its K parts, then for hyb its V ([n_layer][n_head][32][head_dim_v]). */
static size_t stage_elems(const brisk_kv *kv) {
    return stage_k_elems(kv) + (kv->hyb ? (size_t)kv->n_layer * (size_t)kv->n_head * (size_t)kv->head_dim_v * BRISK_KV_BLOCK : 0);
}

static uint16_t *stage_part(const brisk_kv *kv, int32_t st, int32_t layer, int32_t head) {
    BRISK_ASSERT(st >= 0 && st < kv->n_stage);
    return kv->stage + (size_t)st * stage_elems(kv) + ((size_t)layer * (size_t)kv->n_head + (size_t)head) * (size_t)kv->head_dim * BRISK_KV_BLOCK;
}

uint16_t *brisk_kv_k_stage(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head) {
    const int32_t b = kv->seqs[seq].blocks[pos / BRISK_KV_BLOCK];
    return stage_part(kv, kv->blk[b].stage, layer, head) + (size_t)(pos % BRISK_KV_BLOCK);
}

static uint16_t *stage_v_row(const brisk_kv *kv, int32_t st, int32_t layer, int32_t head, int32_t sl) {
    BRISK_ASSERT(kv->hyb && st >= 0 && st < kv->n_stage);
    return kv->stage + (size_t)st * stage_elems(kv) + stage_k_elems(kv) +
           (((size_t)layer * (size_t)kv->n_head + (size_t)head) * BRISK_KV_BLOCK + (size_t)sl) * (size_t)kv->head_dim_v;
}

uint16_t *brisk_kv_v_stage(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t pos, int32_t head) {
    const int32_t b = kv->seqs[seq].blocks[pos / BRISK_KV_BLOCK];
    return stage_v_row(kv, kv->blk[b].stage, layer, head, pos % BRISK_KV_BLOCK);
}

static int32_t stage_take(brisk_kv *kv) {
    BRISK_ASSERT(kv->n_stage_free > 0);   /* counted by the caller (brisk_kv_reserve_batch) */
    return kv->stage_free[--kv->n_stage_free];
}

static void stage_give(brisk_kv *kv, int32_t b) {
    if (kv->blk[b].stage < 0) return;
    kv->stage_free[kv->n_stage_free++] = kv->blk[b].stage;
    kv->blk[b].stage = -1;
}

static uint8_t *k_part_of(const brisk_kv *kv, int32_t layer, int32_t b, int32_t head) {
    return kv->k + (((size_t)layer * (size_t)kv->n_blocks + (size_t)b) * (size_t)kv->n_head + (size_t)head) * kv->k_part;
}

static uint8_t *v_part_of(const brisk_kv *kv, int32_t layer, int32_t b, int32_t head) {
    return kv->v + (((size_t)layer * (size_t)kv->n_blocks + (size_t)b) * (size_t)kv->n_head + (size_t)head) * kv->v_part;
}

/* Quantize block b's staged K of one layer into its K part, channel by channel. */
static void kivi_seal_layer(brisk_kv *kv, int32_t layer, int32_t b) {
    const brisk_kv_type t = kv->k_type;
    const int32_t hd = kv->head_dim;
    const size_t cb = kivi_codes_bytes(t, hd);
    for (int32_t h = 0; h < kv->n_head; h++) {
        uint8_t *part = k_part_of(kv, layer, b, h);
        const uint16_t *st = stage_part(kv, kv->blk[b].stage, layer, h);
        for (int32_t i = 0; i < hd; i++) {
            float x[BRISK_KV_BLOCK];
            uint16_t d, m;
            uint8_t c[BRISK_KV_BLOCK];
            for (int32_t l = 0; l < BRISK_KV_BLOCK; l++) x[l] = brisk_fp16_to_fp32(st[(size_t)i * BRISK_KV_BLOCK + (size_t)l]);
            brisk_kivi_quantize32(x, kivi_bits(t), &d, &m, c);
            for (int32_t l = 0; l < BRISK_KV_BLOCK; l++) kivi_k_code_set(t, part, l, i, c[l]);
            memcpy(part + cb + 2 * (size_t)i, &d, 2);
            memcpy(part + cb + 2 * ((size_t)hd + (size_t)i), &m, 2);
        }
    }
    kv->blk[b].sealed = 1;
}

/* Block b (held by one sequence alone, n_slots of it kept) is about to be
 * written again: open it. With its staging still there (sealed in the batch
 * not yet committed) the F16 is exact; otherwise the staging is rebuilt from
 * the quantized values rounded to F16 (the one lossy path: a sequence
 * truncated into a sealed block, docs/KV.md). */
static void kivi_reopen(brisk_kv *kv, int32_t b, int32_t n_slots) {
    brisk_kv_block *x = &kv->blk[b];
    if (x->stage < 0) {
        x->stage = stage_take(kv);
        for (int32_t il = 0; il < kv->n_layer; il++)
            for (int32_t h = 0; h < kv->n_head; h++) {
                const uint8_t *part = k_part_of(kv, il, b, h);
                uint16_t *st = stage_part(kv, x->stage, il, h);
                for (int32_t i = 0; i < kv->head_dim; i++)
                    for (int32_t l = 0; l < n_slots; l++)
                        st[(size_t)i * BRISK_KV_BLOCK + (size_t)l] = brisk_fp32_to_fp16(kivi_k_value(kv->k_type, part, kv->head_dim, l, i));
                if (kv->hyb)   /* hyb's staged V, from its quantized rows likewise */
                    for (int32_t l = 0; l < n_slots; l++) {
                        const uint8_t *row = v_part_of(kv, il, b, h) + (size_t)l * (kv->v_part / BRISK_KV_BLOCK);
                        uint16_t *vs = stage_v_row(kv, x->stage, il, h, l);
                        for (int32_t j = 0; j < kv->head_dim_v; j++) vs[j] = brisk_fp32_to_fp16(kivi_v_value(kv->v_type, row, j));
                    }
            }
    }
    x->sealed = 0;
}

/* Every full block of seq (slots in position order) sealed; with release,
 * their staging returned too. Only for a sequence without a token tree. */
static void kivi_settle(brisk_kv *kv, int32_t seq, bool release) {
    const brisk_kv_seq *s = &kv->seqs[seq];
    if (!kivi_k(kv) || s->ordered != s->len) return;
    for (int32_t bi = 0; bi < s->len / BRISK_KV_BLOCK; bi++) {
        const int32_t b = s->blocks[bi];
        if (!kv->blk[b].sealed)
            for (int32_t il = 0; il < kv->n_layer; il++) kivi_seal_layer(kv, il, b);
        if (release) stage_give(kv, b);
    }
}

void brisk_kv_batch_order(brisk_kv *kv, const int32_t *seq, const int32_t *slot, const uint8_t *in_order, int32_t n) {
    if (!kivi_k(kv)) return;
    for (int32_t i = 0; i < n; i++) kv->seqs[seq[i]].seal_end = 0;
    for (int32_t i = 0; i < n; i++)
        if (in_order[i] && slot[i] + 1 > kv->seqs[seq[i]].seal_end) kv->seqs[seq[i]].seal_end = slot[i] + 1;
}

/* ---- references ----------------------------------------------------------------------- */

/* A block from the queue's head: a plain free block while any is left, else
 * the least recently released cached one, evicted. -1 when none is left. */
static int32_t block_alloc(brisk_kv *kv) {
    const int32_t b = kv->free_head;
    if (b < 0) return -1;
    queue_unlink(kv, b);
    if (kv->blk[b].indexed) {
        index_remove(kv, b);
        kv->n_cached--;
        kv->n_evicted++;
    } else kv->n_free--;
    kv->blk[b].ref = 1;
    kv->blk[b].rotated = 0;
    if (kivi_k(kv)) {   /* a new block is open: its K goes to staging */
        kv->blk[b].stage = stage_take(kv);
        kv->blk[b].sealed = 0;
    }
    const int32_t in_use = kv->n_blocks - kv->n_free - kv->n_cached;
    if (in_use > kv->in_use_max) kv->in_use_max = in_use;
    return b;
}

/* One more reference (a cached block leaves the queue). */
static void block_acquire(brisk_kv *kv, int32_t b) {
    brisk_kv_block *x = &kv->blk[b];
    if (x->ref == 0) {
        queue_unlink(kv, b);
        if (x->indexed) kv->n_cached--;
        else kv->n_free--;
        const int32_t in_use = kv->n_blocks - kv->n_free - kv->n_cached;
        if (in_use > kv->in_use_max) kv->in_use_max = in_use;
    }
    x->ref++;
}

/* One reference fewer; an unreferenced block joins the queue: cached at the
 * tail (most recently used), plain at the head (used first). */
static void block_release(brisk_kv *kv, int32_t b) {
    brisk_kv_block *x = &kv->blk[b];
    if (--x->ref > 0) return;
    stage_give(kv, b);
    if (x->indexed) {
        queue_push(kv, b, true);
        kv->n_cached++;
    } else {
        queue_push(kv, b, false);
        kv->n_free++;
    }
}

/* dst's rows, tokens and positions := src's (every layer). */
static void block_copy(brisk_kv *kv, int32_t dst, int32_t src) {
    const size_t nh = (size_t)kv->n_head;   /* parts of one (layer, block) */
    for (int32_t il = 0; il < kv->n_layer; il++) {
        const size_t d = ((size_t)il * (size_t)kv->n_blocks + (size_t)dst) * nh, s = ((size_t)il * (size_t)kv->n_blocks + (size_t)src) * nh;
        memcpy(kv->k + d * kv->k_part, kv->k + s * kv->k_part, nh * kv->k_part);
        memcpy(kv->v + d * kv->v_part, kv->v + s * kv->v_part, nh * kv->v_part);
    }
    memcpy(kv->tok + (size_t)dst * BRISK_KV_BLOCK, kv->tok + (size_t)src * BRISK_KV_BLOCK, BRISK_KV_BLOCK * sizeof(int32_t));
    memcpy(kv->pos + (size_t)dst * BRISK_KV_BLOCK, kv->pos + (size_t)src * BRISK_KV_BLOCK, BRISK_KV_BLOCK * sizeof(int32_t));
    memcpy(kv->role + (size_t)dst * BRISK_KV_BLOCK, kv->role + (size_t)src * BRISK_KV_BLOCK, BRISK_KV_BLOCK);
    kv->blk[dst].rotated = kv->blk[src].rotated;
    if (kivi_k(kv)) {   /* dst is fresh from block_alloc, with staging */
        kv->blk[dst].sealed = kv->blk[src].sealed;
        if (kv->blk[src].stage >= 0)
            memcpy(stage_part(kv, kv->blk[dst].stage, 0, 0), stage_part(kv, kv->blk[src].stage, 0, 0), stage_elems(kv) * sizeof(uint16_t));
        else stage_give(kv, dst);
    }
}

/* ---- sequences ------------------------------------------------------------------------ */

brisk_status brisk_kv_reserve_batch(brisk_kv *kv, const int32_t *seq, const int32_t *slot, int32_t n, brisk_error *err) {
    /* each sequence's new length, in want[] (entries of other sequences are not read) */
    for (int32_t i = 0; i < n; i++) kv->want[seq[i]] = 0;
    for (int32_t i = 0; i < n; i++) kv->want[seq[i]] = BRISK_MAX(kv->want[seq[i]], slot[i] + 1);
    /* count: blocks to append, plus one copy per writer of a shared block;
     * want[s] turns negative once s is counted */
    int64_t need = 0, need_stage = 0;
    int32_t worst = -1, worst_need = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t id = seq[i], w = kv->want[id];
        if (w <= 0) continue;
        kv->want[id] = -w;
        const brisk_kv_seq *s = &kv->seqs[id];
        if (w > kv->n_ctx)
            return brisk_fail(err, BRISK_ERR_CAPACITY, "sequence %d: %d tokens exceed the context size %d", id, w, kv->n_ctx);
        if (w <= s->len) continue;
        const int32_t last = blocks_for(w);
        int32_t k = BRISK_MAX(last - s->n_blocks, 0);
        for (int32_t bi = s->len / BRISK_KV_BLOCK; bi < BRISK_MIN(s->n_blocks, last); bi++) k += kv->blk[s->blocks[bi]].ref > 1;
        need += k;
        need_stage += k;   /* k4/k2 K: every new block opens with staging, */
        if (kivi_k(kv) && s->len % BRISK_KV_BLOCK && kv->blk[s->blocks[s->len / BRISK_KV_BLOCK]].sealed &&
            kv->blk[s->blocks[s->len / BRISK_KV_BLOCK]].stage < 0)
            need_stage++;   /* and a sealed block written again reopens with it */
        if (k > worst_need) worst = id, worst_need = k;
    }
    if (need > kv->n_free + kv->n_cached)
        return brisk_fail(err, BRISK_ERR_CAPACITY,
                          "KV cache full: sequence %d needs %d more blocks of %d tokens (the batch %lld), %d free or cached "
                          "(context %d over %d sequences)",
                          worst, worst_need, BRISK_KV_BLOCK, (long long)need, kv->n_free + kv->n_cached, kv->n_ctx, kv->n_seq);
    if (kivi_k(kv) && need_stage > kv->n_stage_free)
        return brisk_fail(err, BRISK_ERR_CAPACITY,
                          "KV cache: the %s K staging is full: the batch opens %lld blocks, %d of %d staging blocks are free (they hold "
                          "each sequence's open block and the blocks one batch fills: a larger batch size gives more)",
                          brisk_kv_type_name(kv->k_type), (long long)need_stage, kv->n_stage_free, kv->n_stage);
    for (int32_t i = 0; i < n; i++) {
        const int32_t id = seq[i], w = -kv->want[id];
        if (w <= 0) continue;
        kv->want[id] = 0;
        brisk_kv_seq *s = &kv->seqs[id];
        if (w <= s->len) continue;
        const int32_t last = blocks_for(w);
        for (int32_t bi = s->len / BRISK_KV_BLOCK; bi < BRISK_MIN(s->n_blocks, last); bi++) {
            const int32_t b = s->blocks[bi];
            const brisk_kv_block *x = &kv->blk[b];
            if (x->ref == 1 && !x->indexed) continue;   /* its own: written in place */
            if (x->ref == 1 && kv->n_free + kv->n_cached == 0) {
                /* indexed, held by seq alone, and no block to copy it to: it leaves the index */
                index_remove(kv, b);
                continue;
            }
            /* shared (counted above), or indexed with a block to spare (the
             * copy's source then joins the cached blocks: net zero) */
            const int32_t nb = block_alloc(kv);
            BRISK_ASSERT(nb >= 0);
            block_copy(kv, nb, b);
            block_release(kv, b);
            s->blocks[bi] = nb;
        }
        if (kivi_k(kv) && s->len % BRISK_KV_BLOCK && kv->blk[s->blocks[s->len / BRISK_KV_BLOCK]].sealed)
            kivi_reopen(kv, s->blocks[s->len / BRISK_KV_BLOCK], s->len % BRISK_KV_BLOCK);
        while (s->n_blocks < last) {
            const int32_t nb = block_alloc(kv);
            BRISK_ASSERT(nb >= 0);
            s->blocks[s->n_blocks++] = nb;
        }
    }
    return BRISK_OK;
}

brisk_status brisk_kv_reserve(brisk_kv *kv, int32_t seq, int32_t new_len, brisk_error *err) {
    if (seq < 0 || seq >= kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence id %d out of range [0, %d)", seq, kv->n_seq);
    if (new_len <= kv->seqs[seq].len) return BRISK_OK;
    const int32_t slot = new_len - 1;
    return brisk_kv_reserve_batch(kv, &seq, &slot, 1, err);
}

void brisk_kv_written(brisk_kv *kv, int32_t seq, int32_t slot, int32_t token, int32_t pos, bool in_order) {
    brisk_kv_seq *s = &kv->seqs[seq];
    const size_t at = (size_t)s->blocks[slot / BRISK_KV_BLOCK] * BRISK_KV_BLOCK + (size_t)(slot % BRISK_KV_BLOCK);
    kv->tok[at] = token;
    kv->pos[at] = pos;
    kv->role[at] = s->role;
    if (in_order && slot == s->ordered) s->ordered++;
    if (s->len < slot + 1) s->len = slot + 1;
    brisk_kv_policy_written(kv, seq, slot, token, in_order);   /* a lexing policy's role of the slot (policy_role.c) */
}

void brisk_kv_commit(brisk_kv *kv, int32_t seq) {
    brisk_kv_seq *s = &kv->seqs[seq];
    kivi_settle(kv, seq, true);   /* k4/k2 K: full blocks sealed, their staging returned */
    /* hyb: a block's rows are exact, but the hot rows beside them are the
     * sequence's own history, which the index cannot carry (sync_prefix
     * never takes from it), and after a truncation its later blocks are not
     * a fresh computation's: nothing is indexed */
    while (!kv->hyb && (int64_t)(s->n_indexed + 1) * BRISK_KV_BLOCK <= s->ordered) {
        const int32_t bi = s->n_indexed, b = s->blocks[bi], parent = bi ? s->blocks[bi - 1] : -1;
        /* the index keys a block by its tokens after its prefix, which fixes
         * their positions only while slot == position: a compacted block
         * (retention dropped slots before it) is never indexed, nor after it */
        bool at_slots = !kv->blk[b].rotated;   /* re-rotated K is not bitwise a fresh computation's */
        for (int32_t l = 0; l < BRISK_KV_BLOCK && at_slots; l++) at_slots = kv->pos[(size_t)b * BRISK_KV_BLOCK + (size_t)l] == bi * BRISK_KV_BLOCK + l;
        if (!at_slots) break;
        s->n_indexed++;
        if (kv->blk[b].indexed) continue;   /* shared from the index or a fork: already there */
        const uint64_t h = block_hash(parent_hash(kv, parent), block_tok(kv, b));
        const int32_t e = index_find(kv, parent, block_tok(kv, b), h);
        if (e < 0) {
            index_insert(kv, b, parent, h);
            continue;
        }
        /* the same tokens after the same prefix: the same rows, bit for bit (batch invariance) */
        block_acquire(kv, e);
        s->blocks[bi] = e;
        block_release(kv, b);
    }
}

/* brisk_kv_truncate without telling the policy: compaction's own, whose
 * callers move the policy's statistics themselves. */
static void truncate_slots(brisk_kv *kv, int32_t seq, int32_t n_keep);

void brisk_kv_truncate(brisk_kv *kv, int32_t seq, int32_t n_keep) {
    if (seq < 0 || seq >= kv->n_seq) return;
    if (kv->hyb && n_keep < kv->seqs[seq].len) brisk_kv_hyb_truncated(kv, seq, BRISK_MAX(n_keep, 0));
    truncate_slots(kv, seq, n_keep);
    brisk_kv_policy_truncated(kv, seq, brisk_kv_len(kv, seq));   /* per-head slot maps past the end are gone */
}

static void truncate_slots(brisk_kv *kv, int32_t seq, int32_t n_keep) {
    brisk_kv_seq *s = &kv->seqs[seq];
    if (n_keep < 0) n_keep = 0;
    if (n_keep < s->len) s->len = n_keep;
    if (s->ordered > s->len) s->ordered = s->len;
    if (s->n_indexed > s->len / BRISK_KV_BLOCK) s->n_indexed = s->len / BRISK_KV_BLOCK;
    const int32_t keep_blocks = blocks_for(s->len);
    while (s->n_blocks > keep_blocks) block_release(kv, s->blocks[--s->n_blocks]);   /* last first: the tail is evicted first */
}

static void slot_move(brisk_kv *kv, int32_t seq, int32_t to, int32_t from);

void brisk_kv_keep_path(brisk_kv *kv, int32_t seq, int32_t base, const int32_t *rel, int32_t n) {
    brisk_kv_seq *s = &kv->seqs[seq];
    /* rel is increasing, so rel[d] >= d: a move never overwrites a row a later
     * move reads; the rows move in their storage type (codes and scales) */
    for (int32_t d = 0; d < n; d++)
        if (rel[d] != d) slot_move(kv, seq, base + d, base + rel[d]);
    if (kv->hyb && base + n < s->len) brisk_kv_hyb_truncated(kv, seq, base + n);   /* (engine.c refuses a path for hyb) */
    s->len = base + n;
    s->ordered = s->len;
    brisk_kv_truncate(kv, seq, s->len);
    kivi_settle(kv, seq, false);   /* k4/k2 K: the path's full blocks sealed from their new rows */
}

/* K of slot ss of part sp := K of slot ds of part dp, in storage type t (the
 * transposed layouts of kv.h; the values move exactly, codes and scales). */
static void k_slot_move(brisk_kv_type t, uint8_t *dp, int32_t ds, const uint8_t *sp, int32_t ss, int32_t hd) {
    const size_t B = BRISK_KV_BLOCK;
    switch (t) {
    case BRISK_KV_K4:
    case BRISK_KV_K2: break;   /* moved in F16 staging by kivi_k_slot_move */
    case BRISK_KV_F16:
        for (int32_t i = 0; i < hd; i++) memcpy(dp + 2 * ((size_t)i * B + (size_t)ds), sp + 2 * ((size_t)i * B + (size_t)ss), 2);
        break;
    case BRISK_KV_F32:
        for (int32_t i = 0; i < hd; i++) memcpy(dp + 4 * ((size_t)i * B + (size_t)ds), sp + 4 * ((size_t)i * B + (size_t)ss), 4);
        break;
    case BRISK_KV_Q8_0:
        for (int32_t i = 0; i < hd; i++) dp[(size_t)i * B + (size_t)ds] = sp[(size_t)i * B + (size_t)ss];
        for (int32_t g = 0; g < hd / 32; g++)
            memcpy(dp + (size_t)hd * B + 2 * ((size_t)g * B + (size_t)ds), sp + (size_t)hd * B + 2 * ((size_t)g * B + (size_t)ss), 2);
        break;
    case BRISK_KV_Q4_0: {
        const int dsh = ds < 16 ? 0 : 4, ssh = ss < 16 ? 0 : 4;
        const uint8_t keep = ds < 16 ? 0xF0 : 0x0F;
        for (int32_t i = 0; i < hd; i++) {
            uint8_t *d = &dp[(size_t)i * 16 + (size_t)(ds % 16)];
            const unsigned q = (sp[(size_t)i * 16 + (size_t)(ss % 16)] >> ssh) & 15u;
            *d = (uint8_t)((*d & keep) | (q << dsh));
        }
        for (int32_t g = 0; g < hd / 32; g++)
            memcpy(dp + (size_t)hd * 16 + 2 * ((size_t)g * B + (size_t)ds), sp + (size_t)hd * 16 + 2 * ((size_t)g * B + (size_t)ss), 2);
        break;
    }
    }
}

/* k4/k2 K of slot `to` := slot `from` (one layer and head), in F16 staging:
 * slots move only inside a token tree's open blocks (keep_path) and into the
 * block they continue, which reopens (its staging is still there: the block
 * was sealed by the tree's own batch, not committed since). */
static void kivi_k_slot_move(brisk_kv *kv, int32_t layer, int32_t seq, int32_t to, int32_t from, int32_t head) {
    const int32_t bt = kv->seqs[seq].blocks[to / BRISK_KV_BLOCK];
    BRISK_ASSERT(kv->blk[bt].stage >= 0);
    kv->blk[bt].sealed = 0;
    uint16_t *d = brisk_kv_k_stage(kv, layer, seq, to, head);
    const uint16_t *sp = brisk_kv_k_stage(kv, layer, seq, from, head);
    for (int32_t i = 0; i < kv->head_dim; i++) d[(size_t)i * BRISK_KV_BLOCK] = sp[(size_t)i * BRISK_KV_BLOCK];
}

/* Slot `to` of a sequence := slot `from`, every layer and head, K and V in
 * their storage types, with the recorded token and position. */
static void slot_move(brisk_kv *kv, int32_t seq, int32_t to, int32_t from) {
    const brisk_kv_seq *s = &kv->seqs[seq];
    const size_t vrb = kv->v_part / BRISK_KV_BLOCK;
    for (int32_t il = 0; il < kv->n_layer; il++)
        for (int32_t h = 0; h < kv->n_head; h++) {
            if (kivi_k(kv)) kivi_k_slot_move(kv, il, seq, to, from, h);
            else
                k_slot_move(kv->k_type, brisk_kv_k_part(kv, il, seq, to, h), to % BRISK_KV_BLOCK, brisk_kv_k_part(kv, il, seq, from, h),
                            from % BRISK_KV_BLOCK, kv->head_dim);
            memcpy(brisk_kv_v_row(kv, il, seq, to, h), brisk_kv_v_row(kv, il, seq, from, h), vrb);
        }
    const size_t at = (size_t)s->blocks[to / BRISK_KV_BLOCK] * BRISK_KV_BLOCK + (size_t)(to % BRISK_KV_BLOCK);
    const size_t fr = (size_t)s->blocks[from / BRISK_KV_BLOCK] * BRISK_KV_BLOCK + (size_t)(from % BRISK_KV_BLOCK);
    kv->tok[at] = kv->tok[fr];
    kv->pos[at] = kv->pos[fr];
    kv->role[at] = kv->role[fr];
}

/* Compaction's refusals of seq and a count n to keep, before anything changes. */
static brisk_status compact_check(const brisk_kv *kv, int32_t seq, int32_t n, brisk_error *err) {
    if (seq < 0 || seq >= kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "compact: sequence id %d out of range [0, %d)", seq, kv->n_seq);
    const brisk_kv_seq *s = &kv->seqs[seq];
    if (s->ordered != s->len)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "compact: sequence %d still holds the token tree of an earlier decode", seq);
    if (n < 0 || n > s->len) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "compact: %d slots to keep of %d", n, s->len);
    return BRISK_OK;
}

brisk_status brisk_kv_compact(brisk_kv *kv, int32_t seq, const int32_t *keep, int32_t n, brisk_error *err) {
    brisk_status st = compact_check(kv, seq, n, err);
    if (st) return st;
    brisk_kv_seq *s = &kv->seqs[seq];
    if (kivi_k(kv) && !(n == 0 || keep[n - 1] == n - 1))
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                          "compact: a %s K cache keeps each channel's 32 slots of a block as one quantized group, so slots cannot "
                          "move between blocks (sequence %d); retention policies need another K type (f16, f32, q8_0, q4_0)",
                          brisk_kv_type_name(kv->k_type), seq);
    for (int32_t d = 0; d < n; d++)
        if (keep[d] < 0 || keep[d] >= s->len || (d && keep[d] <= keep[d - 1]))
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "compact: keep[%d] = %d is not increasing inside [0, %d)", d, keep[d], s->len);
    int32_t first = 0;   /* slots [0, first) stay where they are */
    while (first < n && keep[first] == first) first++;
    if (first == n) {   /* only a tail dropped */
        kv->n_compacted += s->len - n;
        truncate_slots(kv, seq, n);
        return BRISK_OK;
    }
    /* the blocks the moves write into: [first / BLOCK, blocks_for(n)), each made exclusive */
    const int32_t b0 = first / BRISK_KV_BLOCK, b1 = blocks_for(n);
    if ((st = brisk_kv_make_own(kv, seq, b0, b1, err))) return st;
    /* keep[d] >= d: a move never overwrites a slot a later move reads */
    for (int32_t d = first; d < n; d++) slot_move(kv, seq, d, keep[d]);
    kv->n_compacted += s->len - n;
    if (s->n_indexed > b0) s->n_indexed = b0;
    s->len = s->ordered = n;
    truncate_slots(kv, seq, n);   /* the blocks past the kept slots return to the pool */
    return BRISK_OK;
}

brisk_status brisk_kv_compact_heads(brisk_kv *kv, int32_t seq, const int32_t *keep, size_t stride, int32_t n, brisk_error *err) {
    brisk_status st = compact_check(kv, seq, n, err);
    if (st) return st;
    brisk_kv_seq *s = &kv->seqs[seq];
    if (kivi_k(kv) && n < s->len)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "compact: a %s K cache cannot move slots between blocks (sequence %d)",
                          brisk_kv_type_name(kv->k_type), seq);
    const int32_t n_heads = kv->n_layer * kv->n_head;
    int32_t first = n;   /* slots [0, first) stay where they are in every head */
    for (int32_t h = 0; h < n_heads; h++) {
        const int32_t *k = keep + (size_t)h * stride;
        for (int32_t d = 0; d < n; d++)
            if (k[d] < 0 || k[d] >= s->len || (d && k[d] <= k[d - 1]))
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "compact: head %d's keep[%d] = %d is not increasing inside [0, %d)", h, d, k[d],
                                  s->len);
        int32_t f = 0;
        while (f < n && k[f] == f) f++;
        first = BRISK_MIN(first, f);
    }
    if (first < n) {
        const int32_t b0 = first / BRISK_KV_BLOCK, b1 = blocks_for(n);
        if ((st = brisk_kv_make_own(kv, seq, b0, b1, err))) return st;
        const size_t vrb = kv->v_part / BRISK_KV_BLOCK;
        for (int32_t il = 0; il < kv->n_layer; il++)
            for (int32_t h = 0; h < kv->n_head; h++) {
                const int32_t *k = keep + ((size_t)il * (size_t)kv->n_head + (size_t)h) * stride;
                for (int32_t d = first; d < n; d++) {   /* k[d] >= d: a move never overwrites a slot a later move reads */
                    if (k[d] == d) continue;
                    k_slot_move(kv->k_type, brisk_kv_k_part(kv, il, seq, d, h), d % BRISK_KV_BLOCK, brisk_kv_k_part(kv, il, seq, k[d], h),
                                k[d] % BRISK_KV_BLOCK, kv->head_dim);
                    memcpy(brisk_kv_v_row(kv, il, seq, d, h), brisk_kv_v_row(kv, il, seq, k[d], h), vrb);
                }
            }
        /* the cache's token, position and role of a slot: head 0's (the policy keeps the others' positions) */
        for (int32_t d = first; d < n; d++) {
            const size_t at = (size_t)s->blocks[d / BRISK_KV_BLOCK] * BRISK_KV_BLOCK + (size_t)(d % BRISK_KV_BLOCK);
            const size_t fr = (size_t)s->blocks[keep[d] / BRISK_KV_BLOCK] * BRISK_KV_BLOCK + (size_t)(keep[d] % BRISK_KV_BLOCK);
            kv->tok[at] = kv->tok[fr];
            kv->pos[at] = kv->pos[fr];
            kv->role[at] = kv->role[fr];
        }
        /* a block whose heads hold different tokens is no fresh computation of any token list: never indexed */
        for (int32_t bi = b0; bi < b1; bi++) kv->blk[s->blocks[bi]].rotated = 1;
        if (s->n_indexed > b0) s->n_indexed = b0;
    }
    kv->n_compacted += s->len - n;
    s->len = s->ordered = n;
    truncate_slots(kv, seq, n);
    return BRISK_OK;
}

brisk_status brisk_kv_fork(brisk_kv *kv, int32_t src, int32_t dst, brisk_error *err) {
    if (src < 0 || src >= kv->n_seq || dst < 0 || dst >= kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "fork %d -> %d: sequence ids out of range [0, %d)", src, dst, kv->n_seq);
    brisk_kv_seq *s = &kv->seqs[src], *d = &kv->seqs[dst];
    if (s->ordered != s->len)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "fork %d -> %d: sequence %d still holds the token tree of an earlier decode (slots %d..%d); keep one "
                          "path of it (brisk_seq_keep_path) or truncate it first",
                          src, dst, src, s->ordered, s->len - 1);
    if (src == dst) return BRISK_OK;
    brisk_kv_truncate(kv, dst, 0);
    const int32_t nb = blocks_for(s->len);
    for (int32_t bi = 0; bi < nb; bi++) {
        block_acquire(kv, s->blocks[bi]);
        d->blocks[bi] = s->blocks[bi];
    }
    d->n_blocks = nb;
    d->len = d->ordered = s->len;
    d->n_indexed = s->n_indexed;
    d->role = s->role;
    brisk_kv_policy_forked(kv, src, dst);   /* a scored policy's statistics come with the slots */
    if (kv->hyb) brisk_kv_hyb_forked(kv, src, dst);
    return BRISK_OK;
}

int32_t brisk_kv_sync_prefix(brisk_kv *kv, int32_t seq, const int32_t *tok, int32_t limit) {
    brisk_kv_seq *s = &kv->seqs[seq];
    int32_t own = 0;
    const int32_t own_max = BRISK_MIN(s->ordered, limit);
    /* a slot matches token own only if it holds position own: after a
     * retention policy dropped slots, slot i holds a later position */
    while (own < own_max && brisk_kv_slot_token(kv, seq, own) == tok[own] && brisk_kv_slot_pos(kv, seq, own) == own &&
           brisk_kv_policy_heads_alike(kv, seq, own))   /* per-head slot maps: every head's slot holds it */
        own++;
    /* k4/k2 K: keeping part of a sealed block would reopen it from its
     * quantized values; recompute that block's tokens instead, so a reused
     * prefix gives the bits a fresh computation gives */
    if (kivi_k(kv) && own < s->len && own % BRISK_KV_BLOCK && kv->blk[s->blocks[own / BRISK_KV_BLOCK]].stage < 0)
        own -= own % BRISK_KV_BLOCK;
    /* hyb: the hot rows are the history of every query the sequence saw, so
     * only all of it continues exactly; and the prefix index's blocks come
     * without any (docs/KV.md "hyb4 and hyb2") */
    if (kv->hyb) {
        if (own < s->len) own = 0;
        brisk_kv_truncate(kv, seq, own);
        return own;
    }
    int32_t nb = 0, parent = -1;
    while ((int64_t)(nb + 1) * BRISK_KV_BLOCK <= limit) {
        const int32_t *t = tok + (size_t)nb * BRISK_KV_BLOCK;
        const int32_t e = index_find(kv, parent, t, block_hash(parent_hash(kv, parent), t));
        if (e < 0) break;
        kv->chain[nb++] = parent = e;
    }
    if ((int64_t)nb * BRISK_KV_BLOCK <= own) {
        brisk_kv_truncate(kv, seq, own);
        return own;
    }
    /* take the cached chain first, so releasing seq's blocks cannot evict it */
    for (int32_t bi = 0; bi < nb; bi++) block_acquire(kv, kv->chain[bi]);
    brisk_kv_truncate(kv, seq, 0);
    memcpy(s->blocks, kv->chain, (size_t)nb * sizeof(int32_t));
    s->n_blocks = s->n_indexed = nb;
    s->len = s->ordered = nb * BRISK_KV_BLOCK;
    kv->n_hit_tokens += s->len;
    brisk_kv_policy_reset_seq(kv, seq);   /* blocks of other requests: no attention of this one on them yet */
    return s->len;
}

/* ---- rows for save/restore ------------------------------------------------------------- */

/* K of one head in row form (rb bytes: head_dim elements, llama.cpp's blocks
 * for the block types) <-> slot sl of a transposed K part. */
static void k_part_get(brisk_kv_type t, const uint8_t *part, int32_t sl, int32_t hd, uint8_t *row) {
    const int32_t B = BRISK_KV_BLOCK;
    switch (t) {
    case BRISK_KV_K4:
    case BRISK_KV_K2: break;   /* per block, not per part: kivi_row_get */
    case BRISK_KV_F16: {
        const uint16_t *k = (const uint16_t *)(const void *)part;
        for (int32_t i = 0; i < hd; i++) memcpy(row + 2 * (size_t)i, &k[(size_t)i * B + (size_t)sl], 2);
        break;
    }
    case BRISK_KV_F32: {
        const float *k = (const float *)(const void *)part;
        for (int32_t i = 0; i < hd; i++) memcpy(row + 4 * (size_t)i, &k[(size_t)i * B + (size_t)sl], 4);
        break;
    }
    case BRISK_KV_Q8_0: {
        const uint16_t *d = (const uint16_t *)(const void *)(part + (size_t)hd * B);
        for (int32_t g = 0; g < hd / 32; g++) {
            brisk_block_q8_0 blk;
            blk.d = d[(size_t)g * B + (size_t)sl];
            for (int32_t j = 0; j < 32; j++) blk.qs[j] = (int8_t)part[(size_t)(32 * g + j) * B + (size_t)sl];
            memcpy(row + (size_t)g * sizeof blk, &blk, sizeof blk);
        }
        break;
    }
    case BRISK_KV_Q4_0: {
        const uint16_t *d = (const uint16_t *)(const void *)(part + (size_t)hd * 16);
        const int sh = sl < 16 ? 0 : 4;
        for (int32_t g = 0; g < hd / 32; g++) {
            brisk_block_q4_0 blk;
            blk.d = d[(size_t)g * B + (size_t)sl];
            for (int32_t j = 0; j < 16; j++) {
                const unsigned lo = (part[(size_t)(32 * g + j) * 16 + (size_t)(sl % 16)] >> sh) & 15u;
                const unsigned hi = (part[(size_t)(32 * g + j + 16) * 16 + (size_t)(sl % 16)] >> sh) & 15u;
                blk.qs[j] = (uint8_t)(lo | (hi << 4));
            }
            memcpy(row + (size_t)g * sizeof blk, &blk, sizeof blk);
        }
        break;
    }
    }
}

static void k_part_set(brisk_kv_type t, uint8_t *part, int32_t sl, int32_t hd, const uint8_t *row) {
    const int32_t B = BRISK_KV_BLOCK;
    switch (t) {
    case BRISK_KV_K4:
    case BRISK_KV_K2: break;   /* kivi_row_set */
    case BRISK_KV_F16: {
        uint16_t *k = (uint16_t *)(void *)part;
        for (int32_t i = 0; i < hd; i++) memcpy(&k[(size_t)i * B + (size_t)sl], row + 2 * (size_t)i, 2);
        break;
    }
    case BRISK_KV_F32: {
        float *k = (float *)(void *)part;
        for (int32_t i = 0; i < hd; i++) memcpy(&k[(size_t)i * B + (size_t)sl], row + 4 * (size_t)i, 4);
        break;
    }
    case BRISK_KV_Q8_0: {
        uint16_t *d = (uint16_t *)(void *)(part + (size_t)hd * B);
        for (int32_t g = 0; g < hd / 32; g++) {
            brisk_block_q8_0 blk;
            memcpy(&blk, row + (size_t)g * sizeof blk, sizeof blk);
            d[(size_t)g * B + (size_t)sl] = blk.d;
            for (int32_t j = 0; j < 32; j++) part[(size_t)(32 * g + j) * B + (size_t)sl] = (uint8_t)blk.qs[j];
        }
        break;
    }
    case BRISK_KV_Q4_0: {
        uint16_t *d = (uint16_t *)(void *)(part + (size_t)hd * 16);
        const int sh = sl < 16 ? 0 : 4;
        const uint8_t keep = sl < 16 ? 0xF0 : 0x0F;
        for (int32_t g = 0; g < hd / 32; g++) {
            brisk_block_q4_0 blk;
            memcpy(&blk, row + (size_t)g * sizeof blk, sizeof blk);
            d[(size_t)g * B + (size_t)sl] = blk.d;
            for (int32_t j = 0; j < 16; j++) {
                uint8_t *lo = &part[(size_t)(32 * g + j) * 16 + (size_t)(sl % 16)], *hi = &part[(size_t)(32 * g + j + 16) * 16 + (size_t)(sl % 16)];
                *lo = (uint8_t)((*lo & keep) | ((blk.qs[j] & 15u) << sh));
                *hi = (uint8_t)((*hi & keep) | ((blk.qs[j] >> 4) << sh));
            }
        }
        break;
    }
    }
}

float brisk_kv_k_value(const brisk_kv *kv, const uint8_t *part, int32_t s, int32_t i) {
    const int32_t B = BRISK_KV_BLOCK, hd = kv->head_dim;
    switch (kv->k_type) {
    case BRISK_KV_F16: {
        uint16_t h;
        memcpy(&h, part + 2 * ((size_t)i * B + (size_t)s), 2);
        return brisk_fp16_to_fp32(h);
    }
    case BRISK_KV_F32: {
        float x;
        memcpy(&x, part + 4 * ((size_t)i * B + (size_t)s), 4);
        return x;
    }
    case BRISK_KV_Q8_0: {
        uint16_t d;
        memcpy(&d, part + (size_t)hd * B + 2 * ((size_t)(i / 32) * B + (size_t)s), 2);
        return brisk_fp16_to_fp32(d) * (float)(int8_t)part[(size_t)i * B + (size_t)s];
    }
    case BRISK_KV_Q4_0: {
        uint16_t d;
        memcpy(&d, part + (size_t)hd * 16 + 2 * ((size_t)(i / 32) * B + (size_t)s), 2);
        const int q = (part[(size_t)i * 16 + (size_t)(s % 16)] >> (s < 16 ? 0 : 4)) & 15;
        return brisk_fp16_to_fp32(d) * (float)(q - 8);
    }
    case BRISK_KV_K4:
    case BRISK_KV_K2: return kivi_k_value(kv->k_type, part, hd, s, i);
    }
    return 0.0f;
}

/* k4/k2 K in row form (brisk_kv_k_row_bytes: per head the F16 staged
 * values, then the channels' d, min (u16) and the slot's codes (u8, 0xFF
 * while open)) <-> slot of seq's block. */
static void kivi_row_get(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, uint8_t *k) {
    const int32_t b = kv->seqs[seq].blocks[slot / BRISK_KV_BLOCK], sl = slot % BRISK_KV_BLOCK, hd = kv->head_dim;
    const brisk_kv_block *x = &kv->blk[b];
    const size_t cb = kivi_codes_bytes(kv->k_type, hd);
    for (int32_t h = 0; h < kv->n_head; h++) {
        uint8_t *r = k + (size_t)h * 7 * (size_t)hd;
        const uint8_t *part = k_part_of(kv, layer, b, h);
        for (int32_t i = 0; i < hd; i++) {
            const uint16_t v = x->stage >= 0 ? stage_part(kv, x->stage, layer, h)[(size_t)i * BRISK_KV_BLOCK + (size_t)sl] : 0;
            uint16_t d = 0, m = 0;
            if (x->sealed) {
                memcpy(&d, part + cb + 2 * (size_t)i, 2);
                memcpy(&m, part + cb + 2 * ((size_t)hd + (size_t)i), 2);
            }
            memcpy(r + 2 * (size_t)i, &v, 2);
            memcpy(r + 2 * ((size_t)hd + (size_t)i), &d, 2);
            memcpy(r + 2 * (2 * (size_t)hd + (size_t)i), &m, 2);
            r[6 * (size_t)hd + (size_t)i] = x->sealed ? (uint8_t)kivi_k_code(kv->k_type, part, sl, i) : 0xFF;
        }
    }
}

static void kivi_row_set(brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, const uint8_t *k) {
    const int32_t b = kv->seqs[seq].blocks[slot / BRISK_KV_BLOCK], sl = slot % BRISK_KV_BLOCK, hd = kv->head_dim;
    brisk_kv_block *x = &kv->blk[b];
    const size_t cb = kivi_codes_bytes(kv->k_type, hd);
    const unsigned top = kv->k_type == BRISK_KV_K4 ? 15u : 3u;
    for (int32_t h = 0; h < kv->n_head; h++) {
        const uint8_t *r = k + (size_t)h * 7 * (size_t)hd;
        uint8_t *part = k_part_of(kv, layer, b, h);
        for (int32_t i = 0; i < hd; i++) {
            if (x->stage >= 0) memcpy(&stage_part(kv, x->stage, layer, h)[(size_t)i * BRISK_KV_BLOCK + (size_t)sl], r + 2 * (size_t)i, 2);
            const uint8_t c = r[6 * (size_t)hd + (size_t)i];
            if (c == 0xFF) continue;
            kivi_k_code_set(kv->k_type, part, sl, i, c & top);
            memcpy(part + cb + 2 * (size_t)i, r + 2 * ((size_t)hd + (size_t)i), 2);
            memcpy(part + cb + 2 * ((size_t)hd + (size_t)i), r + 2 * (2 * (size_t)hd + (size_t)i), 2);
            x->sealed = 1;
        }
    }
}

/* Row form keeps head_dim elements per head for V too (the KV-state file's
 * layout, engine/state.c): a narrower V (head_dim_v, multi-head latent
 * attention) is followed by zero bytes up to that width. */
void brisk_kv_row_get(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, uint8_t *k, uint8_t *v) {
    const size_t krb = brisk_kv_row_bytes(kv->k_type, kv->head_dim), vrb = brisk_kv_row_bytes(kv->v_type, kv->head_dim_v);
    const size_t vform = brisk_kv_row_bytes(kv->v_type, kv->head_dim);
    if (kivi_k(kv)) kivi_row_get(kv, layer, seq, slot, k);
    for (int32_t h = 0; h < kv->n_head; h++) {
        if (!kivi_k(kv))
            k_part_get(kv->k_type, brisk_kv_k_part(kv, layer, seq, slot, h), slot % BRISK_KV_BLOCK, kv->head_dim, k + (size_t)h * krb);
        memcpy(v + (size_t)h * vform, brisk_kv_v_row(kv, layer, seq, slot, h), vrb);
        memset(v + (size_t)h * vform + vrb, 0, vform - vrb);
    }
}

void brisk_kv_row_set(brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, const uint8_t *k, const uint8_t *v) {
    const size_t krb = brisk_kv_row_bytes(kv->k_type, kv->head_dim), vrb = brisk_kv_row_bytes(kv->v_type, kv->head_dim_v);
    const size_t vform = brisk_kv_row_bytes(kv->v_type, kv->head_dim);
    if (kivi_k(kv)) kivi_row_set(kv, layer, seq, slot, k);
    for (int32_t h = 0; h < kv->n_head; h++) {
        if (!kivi_k(kv))
            k_part_set(kv->k_type, brisk_kv_k_part(kv, layer, seq, slot, h), slot % BRISK_KV_BLOCK, kv->head_dim, k + (size_t)h * krb);
        memcpy(brisk_kv_v_row(kv, layer, seq, slot, h), v + (size_t)h * vform, vrb);
    }
}

/* head_dim floats into row form (rb bytes) of type t. */
static void to_row(brisk_kv_type t, const float *x, int32_t hd, uint8_t *row) {
    switch (t) {
    case BRISK_KV_F16:
        for (int32_t i = 0; i < hd; i++) {
            const uint16_t h = brisk_fp32_to_fp16(x[i]);
            memcpy(row + 2 * (size_t)i, &h, 2);
        }
        break;
    case BRISK_KV_F32: memcpy(row, x, (size_t)hd * sizeof(float)); break;
    case BRISK_KV_Q8_0: brisk_q8_0_quantize_x86(x, row, hd); break;   /* llama.cpp's CPU quantize_row_q8_0 (x86) */
    case BRISK_KV_Q4_0: brisk_q4_0_quantize(x, row, hd); break;       /* its quantize_row_q4_0 (= the ref) */
    case BRISK_KV_K4:
    case BRISK_KV_K2: kivi_v_row(t, x, hd, row); break;
    }
}

void brisk_kv_hadamard(float *x, int32_t n) {
    int32_t g = 1;
    while (g < n && n % (2 * g) == 0) g *= 2;
    const float s = 1.0f / sqrtf((float)g);
    for (int32_t o = 0; o < n; o += g) {
        float *y = x + o;
        for (int32_t len = 1; len < g; len *= 2)
            for (int32_t i = 0; i < g; i += 2 * len)
                for (int32_t j = i; j < i + len; j++) {
                    const float a = y[j], b = y[j + len];
                    y[j] = a + b;
                    y[j + len] = a - b;
                }
        for (int32_t i = 0; i < g; i++) y[i] *= s;
    }
}

/* K as the cache stores it: k itself, or with k_hadamard its rotation in buf
 * (q8_0/q4_0 only, so head_dim <= KV_MAX_QHEAD). */
static const float *k_as_stored(const brisk_kv *kv, const float *k, float *buf) {
    if (!kv->k_hadamard) return k;
    memcpy(buf, k, (size_t)kv->head_dim * sizeof *buf);
    brisk_kv_hadamard(buf, kv->head_dim);
    return buf;
}

void brisk_kv_put(brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, int32_t head, const float *k, const float *v) {
    const int32_t hd = kv->head_dim, sl = slot % BRISK_KV_BLOCK;
    float kr[KV_MAX_QHEAD];
    k = k_as_stored(kv, k, kr);
    if (kv->k_type == BRISK_KV_F16) {   /* the common case, straight into the transposed part */
        uint16_t *kd = brisk_kv_k(kv, layer, seq, slot, head);
        for (int32_t i = 0; i < hd; i++) kd[(size_t)i * BRISK_KV_BLOCK] = brisk_fp32_to_fp16(k[i]);
    } else if (kv->k_type == BRISK_KV_F32) {
        float *kd = (float *)(void *)brisk_kv_k_part(kv, layer, seq, slot, head) + sl;
        for (int32_t i = 0; i < hd; i++) kd[(size_t)i * BRISK_KV_BLOCK] = k[i];
    } else if (kivi_k(kv)) {   /* into the open block's staging; its last slot in order seals it */
        const int32_t b = kv->seqs[seq].blocks[slot / BRISK_KV_BLOCK];
        uint16_t *kd = brisk_kv_k_stage(kv, layer, seq, slot, head);
        for (int32_t i = 0; i < hd; i++) kd[(size_t)i * BRISK_KV_BLOCK] = brisk_fp32_to_fp16(k[i]);
        if (sl == BRISK_KV_BLOCK - 1 && head == kv->n_head - 1 && slot < kv->seqs[seq].seal_end) kivi_seal_layer(kv, layer, b);
    } else {
        _Alignas(4) uint8_t row[KV_MAX_QHEAD / 32 * sizeof(brisk_block_q8_0)];
        to_row(kv->k_type, k, hd, row);
        k_part_set(kv->k_type, brisk_kv_k_part(kv, layer, seq, slot, head), sl, hd, row);
    }
    to_row(kv->v_type, v, kv->head_dim_v, brisk_kv_v_row(kv, layer, seq, slot, head));
    if (kv->hyb) {   /* and in F16 beside its K: the window reads it, a refresh may make it hot */
        uint16_t *vs = brisk_kv_v_stage(kv, layer, seq, slot, head);
        for (int32_t j = 0; j < kv->head_dim_v; j++) vs[j] = brisk_fp32_to_fp16(v[j]);
    }
}

int32_t brisk_kv_blocks_obtainable(const brisk_kv *kv, int32_t seq) {
    const brisk_kv_seq *s = &kv->seqs[seq];
    int32_t own = 0;
    for (int32_t bi = 0; bi < s->n_blocks; bi++) own += kv->blk[s->blocks[bi]].ref == 1;
    return kv->n_free + kv->n_cached + own;
}

/* ---- accounting --------------------------------------------------------------------------- */

void brisk_kv_counts(const brisk_kv *kv, int32_t *in_use, int32_t *cached, int32_t *free_blocks) {
    if (in_use) *in_use = kv->n_blocks - kv->n_free - kv->n_cached;
    if (cached) *cached = kv->n_cached;
    if (free_blocks) *free_blocks = kv->n_free;
}

bool brisk_kv_check(const brisk_kv *kv, brisk_error *err) {
    int32_t *refs = calloc((size_t)kv->n_blocks, sizeof(int32_t));
    bool ok = false;
    if (!refs) {
        brisk_fail(err, BRISK_ERR_NOMEM, "kv check: out of memory");
        return false;
    }
    for (int32_t id = 0; id < kv->n_seq; id++) {
        const brisk_kv_seq *s = &kv->seqs[id];
        if (s->len < 0 || s->len > kv->n_ctx || s->ordered < 0 || s->ordered > s->len || s->n_blocks < blocks_for(s->len) ||
            s->n_blocks > kv->max_blocks || s->n_indexed < 0 || s->n_indexed > s->ordered / BRISK_KV_BLOCK) {
            brisk_fail(err, BRISK_ERR_INVALID_ARG, "seq %d: len %d ordered %d blocks %d indexed %d", id, s->len, s->ordered, s->n_blocks,
                       s->n_indexed);
            goto done;
        }
        for (int32_t bi = 0; bi < s->n_blocks; bi++) {
            const int32_t b = s->blocks[bi];
            if (b < 0 || b >= kv->n_blocks) {
                brisk_fail(err, BRISK_ERR_INVALID_ARG, "seq %d: block %d = %d out of range", id, bi, b);
                goto done;
            }
            refs[b]++;
            const brisk_kv_block *x = &kv->blk[b];
            if (bi < s->n_indexed) {
                const int32_t parent = bi ? s->blocks[bi - 1] : -1;
                if (!x->indexed || x->parent != parent || x->parent_gen != (parent < 0 ? 0 : kv->blk[parent].gen)) {
                    brisk_fail(err, BRISK_ERR_INVALID_ARG, "seq %d: block %d (%d) should be indexed after %d", id, bi, b, parent);
                    goto done;
                }
            }
        }
    }
    int32_t n_ref = 0, n_plain = 0, n_cached = 0, n_indexed = 0;
    for (int32_t b = 0; b < kv->n_blocks; b++) {
        const brisk_kv_block *x = &kv->blk[b];
        if (x->ref != refs[b]) {
            brisk_fail(err, BRISK_ERR_INVALID_ARG, "block %d: ref %d but %d block tables hold it", b, x->ref, refs[b]);
            goto done;
        }
        n_ref += x->ref > 0;
        n_plain += x->ref == 0 && !x->indexed;
        n_cached += x->ref == 0 && x->indexed;
        n_indexed += x->indexed;
        if (x->indexed) {
            const bool live = x->parent < 0 || (kv->blk[x->parent].indexed && kv->blk[x->parent].gen == x->parent_gen);
            if (live && x->hash != block_hash(parent_hash(kv, x->parent), block_tok(kv, b))) {
                brisk_fail(err, BRISK_ERR_INVALID_ARG, "block %d: hash does not match its parent and tokens", b);
                goto done;
            }
        }
    }
    /* k4/k2 K staging: every stage held by one block or free; a block in use
     * and open holds one, an unreferenced block none */
    if (kv->n_stage) {
        int32_t held = 0;
        for (int32_t b = 0; b < kv->n_blocks; b++) {
            const brisk_kv_block *x = &kv->blk[b];
            if ((x->ref == 0 && x->stage >= 0) || (x->ref > 0 && !x->sealed && x->stage < 0)) {
                brisk_fail(err, BRISK_ERR_INVALID_ARG, "block %d: ref %d, sealed %d, staging %d", b, x->ref, x->sealed, x->stage);
                goto done;
            }
            held += x->stage >= 0;
        }
        if (held + kv->n_stage_free != kv->n_stage) {
            brisk_fail(err, BRISK_ERR_INVALID_ARG, "staging: %d held + %d free != %d", held, kv->n_stage_free, kv->n_stage);
            goto done;
        }
    }
    /* the queue: exactly the unreferenced blocks, plain ones before cached ones */
    int32_t walked = 0, prev = -1;
    bool seen_cached = false;
    for (int32_t b = kv->free_head; b >= 0; prev = b, b = kv->blk[b].next) {
        const brisk_kv_block *x = &kv->blk[b];
        if (++walked > kv->n_blocks || x->ref != 0 || x->prev != prev || (seen_cached && !x->indexed)) {
            brisk_fail(err, BRISK_ERR_INVALID_ARG, "free queue broken at block %d (ref %d, indexed %d)", b, x->ref, x->indexed);
            goto done;
        }
        seen_cached = seen_cached || x->indexed;
    }
    if (prev != kv->free_tail || walked != n_plain + n_cached || n_plain != kv->n_free || n_cached != kv->n_cached ||
        n_ref + n_plain + n_cached != kv->n_blocks) {
        brisk_fail(err, BRISK_ERR_INVALID_ARG, "counts: queue %d, in use %d + cached %d (%d) + free %d (%d) != %d blocks", walked, n_ref,
                   n_cached, kv->n_cached, n_plain, kv->n_free, kv->n_blocks);
        goto done;
    }
    /* the index: exactly the indexed blocks, each in its hash's bucket */
    int32_t in_buckets = 0;
    for (uint32_t i = 0; i <= kv->bucket_mask; i++)
        for (int32_t b = kv->bucket[i]; b >= 0; b = kv->blk[b].hnext) {
            if (++in_buckets > kv->n_blocks || !kv->blk[b].indexed || (kv->blk[b].hash & kv->bucket_mask) != i) {
                brisk_fail(err, BRISK_ERR_INVALID_ARG, "index: block %d in bucket %u wrongly", b, i);
                goto done;
            }
        }
    if (in_buckets != n_indexed) {
        brisk_fail(err, BRISK_ERR_INVALID_ARG, "index: %d blocks in buckets, %d marked indexed", in_buckets, n_indexed);
        goto done;
    }
    /* hyb: the slot order lists exactly the rows in use, each once, by
     * increasing slot, every slot one of its sequence's */
    for (int32_t sq = 0; kv->hyb && sq < kv->n_seq; sq++)
        for (int32_t il = 0; il < kv->n_layer; il++)
            for (int32_t h = 0; h < kv->n_head; h++) {
                const size_t u = brisk_kv_hyb_unit(kv, sq, il, h);
                const int32_t *rslot = kv->hyb_slot + u * (size_t)kv->hyb_cap, n = kv->hyb_n[u];
                const int16_t *ord = kv->hyb_order + u * (size_t)kv->hyb_cap;
                int32_t used = 0, prev = -1;
                for (int32_t r = 0; r < kv->hyb_cap; r++) used += rslot[r] >= 0;
                bool bad = n != used;
                for (int32_t i = 0; i < n && !bad; i++) {
                    const int32_t r = ord[i];
                    bad = r < 0 || r >= kv->hyb_cap || rslot[r] <= prev || rslot[r] >= kv->seqs[sq].len;
                    prev = bad ? prev : rslot[r];
                }
                if (bad) {
                    brisk_fail(err, BRISK_ERR_INVALID_ARG, "hyb: sequence %d layer %d head %d: the slot order of %d rows (%d in use) is broken", sq, il,
                               h, n, used);
                    goto done;
                }
            }
    ok = true;
done:
    free(refs);
    return ok;
}

/* ---- context shift's support (kv/shift.c) ------------------------------------------------- */

brisk_status brisk_kv_make_own(brisk_kv *kv, int32_t seq, int32_t b0, int32_t b1, brisk_error *err) {
    brisk_kv_seq *s = &kv->seqs[seq];
    int32_t need = 0;
    for (int32_t bi = b0; bi < b1; bi++) need += kv->blk[s->blocks[bi]].ref > 1;
    if (need > kv->n_free + kv->n_cached)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "sequence %d shares %d blocks it must rewrite, %d free or cached", seq, need,
                          kv->n_free + kv->n_cached);
    for (int32_t bi = b0; bi < b1; bi++) {
        const int32_t b = s->blocks[bi];
        if (kv->blk[b].ref > 1) {
            const int32_t nb = block_alloc(kv);
            BRISK_ASSERT(nb >= 0);
            block_copy(kv, nb, b);
            block_release(kv, b);
            s->blocks[bi] = nb;
        } else if (kv->blk[b].indexed) index_remove(kv, b);   /* its content changes: it leaves the index */
    }
    if (s->n_indexed > b0) s->n_indexed = b0;
    return BRISK_OK;
}

void brisk_kv_k_set(brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, int32_t head, const float *k) {
    const int32_t hd = kv->head_dim, sl = slot % BRISK_KV_BLOCK;
    float kr[KV_MAX_QHEAD];
    k = k_as_stored(kv, k, kr);
    if (kv->k_type == BRISK_KV_F16) {
        uint16_t *kd = brisk_kv_k(kv, layer, seq, slot, head);
        for (int32_t i = 0; i < hd; i++) kd[(size_t)i * BRISK_KV_BLOCK] = brisk_fp32_to_fp16(k[i]);
    } else if (kv->k_type == BRISK_KV_F32) {
        float *kd = (float *)(void *)brisk_kv_k_part(kv, layer, seq, slot, head) + sl;
        for (int32_t i = 0; i < hd; i++) kd[(size_t)i * BRISK_KV_BLOCK] = k[i];
    } else {   /* the block types: head_dim <= KV_MAX_QHEAD (type_fits) */
        _Alignas(4) uint8_t row[KV_MAX_QHEAD / 32 * sizeof(brisk_block_q8_0)];
        to_row(kv->k_type, k, hd, row);
        k_part_set(kv->k_type, brisk_kv_k_part(kv, layer, seq, slot, head), sl, hd, row);
    }
}

void brisk_kv_k_get(const brisk_kv *kv, int32_t layer, int32_t seq, int32_t slot, int32_t head, float *k) {
    const uint8_t *part = brisk_kv_k_part(kv, layer, seq, slot, head);
    for (int32_t i = 0; i < kv->head_dim; i++) k[i] = brisk_kv_k_value(kv, part, slot % BRISK_KV_BLOCK, i);
    if (kv->k_hadamard) brisk_kv_hadamard(k, kv->head_dim);   /* back from the rotated storage */
}
