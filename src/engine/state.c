/* state: saving and loading one sequence's KV (and a sampler's state), the
 * "saving and loading a sequence's KV" section of include/brisk.h.
 *
 * The format (version 1; docs/KVSTATE.md has the same table). All integers
 * little-endian (the only byte order brisk runs on); offsets in bytes:
 *
 *   header, 80 bytes
 *     0  u32  magic "BKVS" (42 4b 56 53)
 *     4  u32  version (1)
 *     8  u32  flags: bit 0 = a sampler section follows the K/V; bit 1 = K was
 *          re-rotated by a context shift (never prefix-indexed); bit 2 = K stored
 *          Hadamard-rotated (k_hadamard: loads only into such a context); others 0
 *    12  u32  n_tokens: the sequence's length
 *    16  u64  the model's header hash (GGUF header, metadata, tensor table, file size)
 *    24  u64  the model's data hash (every tensor byte)
 *    32  u32  K storage type, 36 u32 V storage type (brisk_kv_type: 0 = F16, 1 = F32, 2 = Q8_0, 3 = Q4_0, 4 = K4, 5 = K2)
 *    40  u32  block size (BRISK_KV_BLOCK, 32)
 *    44  u32  n_layer, 48 u32 n_head_kv, 52 u32 head_dim
 *    56  u64  sampler section bytes (0 without one)
 *    64  u64  total bytes, the checksum included
 *    72  u32  n_vocab (the range of the token ids)
 *    76  u32  reserved, 0
 *   tokens     n_tokens x i32, slot order
 *   positions  n_tokens x i32, increasing with the slot, each >= its slot (= it unless the sequence was compacted), < 2^30
 *   K          n_layer x n_tokens x (n_head_kv * head_dim) x u16: per layer, per
 *              token, its row (KV head after KV head) in its storage type's row form (kv.h), as stored
 *   V          the same for V
 *   sampler    brisk_sampler_state_write's bytes (src/sample/sample.h)
 *   checksum   u64: brisk_hash64 of every byte before it
 *
 * The K/V order is by token, not by pool block, so a state does not depend
 * on which blocks the sequence held, and a save after a load gives the same
 * bytes. A load trusts nothing: the header's sizes must add up to the
 * buffer's length (overflow-checked) before anything is read past the
 * header, then the checksum, the fingerprints, the shape, the limits, the
 * token ids and positions and the sampler section are checked, then the
 * blocks are reserved (counted first, so a refusal changes nothing), and
 * only then is the sequence replaced. Nothing is allocated from the file's
 * numbers: the only allocation is one K+V row of the context's own shape. */
#include "engine/state.h"
#include "engine/engine_impl.h"
#include "gguf/gguf.h"
#include "kv/policy.h"
#include "sample/sample.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_MAGIC BRISK_STATE_MAGIC
#define STATE_VERSION BRISK_STATE_VERSION
#define STATE_HEADER BRISK_STATE_HEADER
#define STATE_FLAG_SAMPLER 1u
/* K rows re-rotated by a context shift (kv/shift.c): the loaded blocks are
 * marked so, and never enter the prefix index (a hit there must be exact) */
#define STATE_FLAG_ROTATED 2u
/* K stored Hadamard-rotated (brisk_context_params.k_hadamard): loads only into such a context */
#define STATE_FLAG_K_HADAMARD 4u
#define CHECKSUM_SEED 0x424b56534b53554dull

typedef struct state_header {
    uint32_t magic, version, flags, n_tokens;
    uint64_t header_hash, data_hash;
    uint32_t k_type, v_type, block, n_layer, n_head_kv, head_dim;
    uint64_t sampler_bytes, total_bytes;
    uint32_t n_vocab, reserved;
} state_header;

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static void header_write(const state_header *h, uint8_t *p) {
    put_u32(p + 0, h->magic), put_u32(p + 4, h->version), put_u32(p + 8, h->flags), put_u32(p + 12, h->n_tokens);
    put_u64(p + 16, h->header_hash), put_u64(p + 24, h->data_hash);
    put_u32(p + 32, h->k_type), put_u32(p + 36, h->v_type), put_u32(p + 40, h->block);
    put_u32(p + 44, h->n_layer), put_u32(p + 48, h->n_head_kv), put_u32(p + 52, h->head_dim);
    put_u64(p + 56, h->sampler_bytes), put_u64(p + 64, h->total_bytes);
    put_u32(p + 72, h->n_vocab), put_u32(p + 76, h->reserved);
}

static void header_read(const uint8_t *p, state_header *h) {
    h->magic = get_u32(p + 0), h->version = get_u32(p + 4), h->flags = get_u32(p + 8), h->n_tokens = get_u32(p + 12);
    h->header_hash = get_u64(p + 16), h->data_hash = get_u64(p + 24);
    h->k_type = get_u32(p + 32), h->v_type = get_u32(p + 36), h->block = get_u32(p + 40);
    h->n_layer = get_u32(p + 44), h->n_head_kv = get_u32(p + 48), h->head_dim = get_u32(p + 52);
    h->sampler_bytes = get_u64(p + 56), h->total_bytes = get_u64(p + 64);
    h->n_vocab = get_u32(p + 72), h->reserved = get_u32(p + 76);
}

/* Section offsets of a state with this header: false when its sizes overflow
 * 64 bits (a hostile header). kv_off: K's start; v_off: V's; smp_off: the
 * sampler's; sum_off: the checksum's; total: everything. */
typedef struct state_layout {
    uint64_t k_row, v_row, tok_off, pos_off, kv_off, v_off, smp_off, sum_off, total;   /* k_row, v_row: bytes of one token's row */
} state_layout;

static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static bool add_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }

/* Bytes of one token's row of n elements in storage type t (its row form,
 * kv.h): false for an unknown type or a block type that does not divide. */
static bool row_of(uint32_t t, uint64_t n, uint64_t *out) {
    switch (t) {
    case BRISK_KV_F16: return mul_u64(n, 2, out);
    case BRISK_KV_F32: return mul_u64(n, 4, out);
    case BRISK_KV_Q8_0: return n % 32 == 0 && mul_u64(n / 32, 34, out);
    case BRISK_KV_Q4_0: return n % 32 == 0 && mul_u64(n / 32, 18, out);
    case BRISK_KV_K4: return n % 32 == 0 && mul_u64(n / 32, 20, out);
    case BRISK_KV_K2: return n % 32 == 0 && mul_u64(n / 32, 12, out);
    default: return false;
    }
}

/* A K row: row_of, except k4/k2, whose K row form keeps per element its
 * staged F16 value, its channel group's d and min and its code (kv.h,
 * brisk_kv_k_row_bytes: 7 bytes). */
static bool k_row_of(uint32_t t, uint64_t n, uint64_t *out) {
    if (t == BRISK_KV_K4 || t == BRISK_KV_K2) return n % 32 == 0 && mul_u64(n, 7, out);
    return row_of(t, n, out);
}

static bool layout_of(const state_header *h, state_layout *l) {
    uint64_t k_bytes, v_bytes, tok_bytes, k_head, v_head;   /* k_head, v_head: one KV head's bytes (blocks never straddle heads) */
    l->tok_off = STATE_HEADER;
    return k_row_of(h->k_type, h->head_dim, &k_head) && row_of(h->v_type, h->head_dim, &v_head) &&
           mul_u64(k_head, (uint64_t)h->n_head_kv, &l->k_row) && mul_u64(v_head, (uint64_t)h->n_head_kv, &l->v_row) &&
           mul_u64((uint64_t)h->n_tokens, 4, &tok_bytes) && add_u64(l->tok_off, tok_bytes, &l->pos_off) &&
           add_u64(l->pos_off, tok_bytes, &l->kv_off) && mul_u64(l->k_row, (uint64_t)h->n_tokens, &k_bytes) &&
           mul_u64(k_bytes, (uint64_t)h->n_layer, &k_bytes) && add_u64(l->kv_off, k_bytes, &l->v_off) &&
           mul_u64(l->v_row, (uint64_t)h->n_tokens, &v_bytes) && mul_u64(v_bytes, (uint64_t)h->n_layer, &v_bytes) &&
           add_u64(l->v_off, v_bytes, &l->smp_off) && add_u64(l->smp_off, h->sampler_bytes, &l->sum_off) &&
           add_u64(l->sum_off, 8, &l->total);
}

uint64_t brisk_state_checksum(const void *state, size_t n) { return brisk_hash64_of(state, n >= 8 ? n - 8 : 0, CHECKSUM_SEED); }

/* The model's data hash, taken once per model by whichever thread asks first
 * (the others wait for it): it reads every tensor byte. The model is
 * immutable; this only fills in a value derived from it. */
static uint64_t model_data_hash(const brisk_model *cm) {
    brisk_model *m = (brisk_model *)cm;
    if (atomic_load_explicit(&m->data_hash_once, memory_order_acquire) == 2) return m->data_hash;
    int expect = 0;
    if (atomic_compare_exchange_strong_explicit(&m->data_hash_once, &expect, 1, memory_order_acq_rel, memory_order_acquire)) {
        m->data_hash = brisk_gguf_data_hash(m->data->gguf);
        atomic_store_explicit(&m->data_hash_once, 2, memory_order_release);
        return m->data_hash;
    }
    while (atomic_load_explicit(&m->data_hash_once, memory_order_acquire) != 2) sched_yield();
    return m->data_hash;
}

/* The header this context writes for a sequence of n tokens. */
static state_header header_for(const brisk_context *c, uint32_t n_tokens, uint64_t sampler_bytes, bool with_sampler, bool rotated) {
    const brisk_kv *kv = c->kv;
    return (state_header){.magic = STATE_MAGIC, .version = STATE_VERSION,
                          .flags = (with_sampler ? STATE_FLAG_SAMPLER : 0) | (rotated ? STATE_FLAG_ROTATED : 0) |
                                   (kv->k_hadamard ? STATE_FLAG_K_HADAMARD : 0),
                          .n_tokens = n_tokens, .header_hash = c->model->data->header_hash,
                          .data_hash = model_data_hash(c->model), .k_type = (uint32_t)kv->k_type, .v_type = (uint32_t)kv->v_type,
                          .block = BRISK_KV_BLOCK, .n_layer = (uint32_t)kv->n_layer, .n_head_kv = (uint32_t)kv->n_head,
                          .head_dim = (uint32_t)kv->head_dim, .sampler_bytes = sampler_bytes,
                          .n_vocab = (uint32_t)c->model->data->hp.n_vocab};
}

/* ---- saving ------------------------------------------------------------------------------------- */

brisk_status brisk_seq_state_get(const brisk_context *c, int32_t seq, const struct brisk_sampler *smp, void *buf, size_t cap,
                                 size_t *n_bytes, brisk_error *err) {
    if (n_bytes) *n_bytes = 0;
    if (!c || !n_bytes) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV state: context and size pointer are required");
    const brisk_kv *kv = c->kv;
    if (seq < 0 || seq >= kv->n_seq) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence id %d out of range [0, %d)", seq, kv->n_seq);
    const brisk_kv_seq *s = &kv->seqs[seq];
    if (s->ordered != s->len)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "sequence %d: cannot save: slots %d..%d hold the token tree of the last decode; keep one path of it "
                          "(brisk_seq_keep_path) or truncate first",
                          seq, s->ordered, s->len - 1);
    if (kv->hyb)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                          "sequence %d: cannot save a %s cache: its hot F16 rows and their attention history are not part of the state "
                          "format", seq, brisk_kv_hyb_name(kv));
    if (brisk_kv_policy_heads_differ(kv, seq))
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                          "sequence %d: cannot save: per-head KV selection (--kv-per-head) left each KV head its own slots, which a "
                          "state file (one token and position per slot) cannot describe",
                          seq);
    size_t smp_bytes = 0;
    brisk_status st;
    if (smp && (st = brisk_sampler_state_size(smp, &smp_bytes, err))) return st;
    bool rotated = false;
    for (int32_t bi = 0; bi < s->n_blocks; bi++) rotated = rotated || kv->blk[s->blocks[bi]].rotated;
    const state_header h0 = header_for(c, (uint32_t)s->len, smp_bytes, smp != NULL, rotated);
    state_layout l;
    if (!layout_of(&h0, &l) || l.total > SIZE_MAX)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "sequence %d: its state's size overflows", seq);
    *n_bytes = (size_t)l.total;
    if (!buf || cap < l.total)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "sequence %d: its state needs %" PRIu64 " bytes, the buffer has %zu", seq, l.total, cap);
    uint8_t *row = malloc((size_t)(l.k_row + l.v_row));   /* K then V */
    if (!row) return brisk_fail(err, BRISK_ERR_NOMEM, "KV state: out of memory for a row of %" PRIu64 " bytes", l.k_row + l.v_row);
    uint8_t *out = buf;
    state_header h = h0;
    h.total_bytes = l.total;
    header_write(&h, out);
    for (int32_t i = 0; i < s->len; i++) {
        put_u32(out + l.tok_off + 4 * (size_t)i, (uint32_t)brisk_kv_slot_token(kv, seq, i));
        put_u32(out + l.pos_off + 4 * (size_t)i, (uint32_t)brisk_kv_slot_pos(kv, seq, i));
    }
    const size_t krb = (size_t)l.k_row, vrb = (size_t)l.v_row;
    for (int32_t il = 0; il < kv->n_layer; il++)
        for (int32_t i = 0; i < s->len; i++) {
            const size_t at = (size_t)il * (size_t)s->len + (size_t)i;
            brisk_kv_row_get(kv, il, seq, i, row, row + krb);
            memcpy(out + l.kv_off + at * krb, row, krb);
            memcpy(out + l.v_off + at * vrb, row + krb, vrb);
        }
    free(row);
    if (smp) brisk_sampler_state_write(smp, out + l.smp_off);
    put_u64(out + l.sum_off, brisk_state_checksum(out, (size_t)l.total));
    return BRISK_OK;
}

brisk_status brisk_seq_state_get_alloc(const brisk_context *c, int32_t seq, const struct brisk_sampler *smp, uint8_t **out,
                                       size_t *n_bytes, brisk_error *err) {
    if (!out || !n_bytes) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV state: output pointers are required");
    *out = NULL;
    size_t need = 0;
    brisk_error probe = {0};
    brisk_status st = brisk_seq_state_get(c, seq, smp, NULL, 0, &need, &probe);
    if (st != BRISK_ERR_CAPACITY || need == 0) {
        if (err) *err = probe;
        return st ? st : brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV state: size query failed");
    }
    uint8_t *buf = malloc(need);
    if (!buf) return brisk_fail(err, BRISK_ERR_NOMEM, "sequence %d: cannot allocate %zu bytes for its state", seq, need);
    if ((st = brisk_seq_state_get(c, seq, smp, buf, need, n_bytes, err))) {
        free(buf);
        return st;
    }
    *out = buf;
    return BRISK_OK;
}

/* ---- loading ------------------------------------------------------------------------------------ */

static const char *kv_type_name(uint32_t t) { return t < BRISK_KV_N_TYPES ? brisk_kv_type_name((int)t) : "unknown"; }

/* Every check of a load, in the order that names the most useful difference
 * first; nothing here changes the context or the sampler. */
static brisk_status state_check(const brisk_context *c, int32_t seq, const struct brisk_sampler *smp, const uint8_t *p, size_t len,
                                state_header *h, state_layout *l, brisk_error *err) {
    const brisk_kv *kv = c->kv;
    if (kv->hyb)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "KV state: cannot load into a %s cache (its hot F16 rows are not part of the state format)",
                          brisk_kv_hyb_name(kv));
    if (len < 4 || get_u32(p) != STATE_MAGIC)
        return brisk_fail(err, BRISK_ERR_FORMAT, "not a brisk KV state (%s)", len < 4 ? "shorter than its magic" : "bad magic; expected \"BKVS\"");
    if (len < 8) return brisk_fail(err, BRISK_ERR_FORMAT, "KV state truncated: %zu bytes, the header has %u", len, STATE_HEADER);
    if (get_u32(p + 4) != STATE_VERSION)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "KV state version %u; this build reads version %u", get_u32(p + 4), STATE_VERSION);
    if (len < STATE_HEADER + 8)
        return brisk_fail(err, BRISK_ERR_FORMAT, "KV state truncated: %zu bytes, the header and checksum alone take %u", len, STATE_HEADER + 8);
    header_read(p, h);
    if (h->flags & ~(STATE_FLAG_SAMPLER | STATE_FLAG_ROTATED | STATE_FLAG_K_HADAMARD)) return brisk_fail(err, BRISK_ERR_FORMAT, "KV state: unknown flags 0x%x", h->flags);
    if (h->reserved) return brisk_fail(err, BRISK_ERR_FORMAT, "KV state: reserved header field is %u, not 0", h->reserved);
    if (!(h->flags & STATE_FLAG_SAMPLER) && h->sampler_bytes)
        return brisk_fail(err, BRISK_ERR_FORMAT, "KV state: %" PRIu64 " sampler bytes without the sampler flag", h->sampler_bytes);
    if (h->k_type >= BRISK_KV_N_TYPES || h->v_type >= BRISK_KV_N_TYPES)
        return brisk_fail(err, BRISK_ERR_FORMAT, "KV state: unknown K/V storage types %u/%u (known: 0 f16, 1 f32, 2 q8_0, 3 q4_0, 4 k4, 5 k2)", h->k_type,
                          h->v_type);
    if (!layout_of(h, l))
        return brisk_fail(err, BRISK_ERR_FORMAT, "KV state: the header's sizes overflow (%u tokens, %u layers, %u heads of %u)", h->n_tokens,
                          h->n_layer, h->n_head_kv, h->head_dim);
    if (l->total != h->total_bytes)
        return brisk_fail(err, BRISK_ERR_FORMAT, "KV state: the header's sizes add up to %" PRIu64 " bytes, it records %" PRIu64, l->total,
                          h->total_bytes);
    if (h->total_bytes != len)
        return brisk_fail(err, BRISK_ERR_FORMAT, "KV state %s: %zu bytes, the header says %" PRIu64,
                          len < h->total_bytes ? "truncated" : "has trailing bytes", len, h->total_bytes);
    const uint64_t sum = brisk_state_checksum(p, (size_t)l->total), want = get_u64(p + l->sum_off);
    if (sum != want)
        return brisk_fail(err, BRISK_ERR_FORMAT, "KV state corrupted: checksum %016" PRIx64 ", the file records %016" PRIx64, sum, want);
    /* well-formed: does it belong to this model and this cache? */
    const brisk_model_data *md = c->model->data;
    if (h->header_hash != md->header_hash)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "KV state is from another model: GGUF header/metadata/tensor table hash %016" PRIx64 ", this model's %016" PRIx64,
                          h->header_hash, md->header_hash);
    if (h->k_type != (uint32_t)kv->k_type || h->v_type != (uint32_t)kv->v_type)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV state stores K/V as %s/%s (types %u/%u), this context %s/%s", kv_type_name(h->k_type),
                          kv_type_name(h->v_type), h->k_type, h->v_type, kv_type_name((uint32_t)kv->k_type), kv_type_name((uint32_t)kv->v_type));
    if (!(h->flags & STATE_FLAG_K_HADAMARD) != !kv->k_hadamard)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV state stores K %s, this context %s (--k-hadamard)",
                          h->flags & STATE_FLAG_K_HADAMARD ? "Hadamard-rotated" : "unrotated", kv->k_hadamard ? "rotated" : "unrotated");
    if (h->block != BRISK_KV_BLOCK || h->n_layer != (uint32_t)kv->n_layer || h->n_head_kv != (uint32_t)kv->n_head ||
        h->head_dim != (uint32_t)kv->head_dim || h->n_vocab != (uint32_t)md->hp.n_vocab)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "KV state shape: block %u, %u layers, %u KV heads of %u, vocabulary %u; this context: block %d, %d layers, %d "
                          "KV heads of %d, vocabulary %d",
                          h->block, h->n_layer, h->n_head_kv, h->head_dim, h->n_vocab, BRISK_KV_BLOCK, kv->n_layer, kv->n_head,
                          kv->head_dim, md->hp.n_vocab);
    const uint64_t data_hash = model_data_hash(c->model);
    if (h->data_hash != data_hash)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "KV state is from another model: tensor data hash %016" PRIx64 ", this model's %016" PRIx64
                          " (same header and metadata, different weights)",
                          h->data_hash, data_hash);
    if (seq < 0 || seq >= kv->n_seq) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence id %d out of range [0, %d)", seq, kv->n_seq);
    if (h->n_tokens > (uint32_t)kv->n_ctx)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "KV state holds %u tokens, more than the context size %d (n_ctx_seq)", h->n_tokens, kv->n_ctx);
    for (uint32_t i = 0, prev = 0; i < h->n_tokens; i++) {
        const int32_t t = (int32_t)get_u32(p + l->tok_off + 4 * (size_t)i), pos = (int32_t)get_u32(p + l->pos_off + 4 * (size_t)i);
        if (t < 0 || t >= md->hp.n_vocab)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV state: token %u: id %d out of range [0, %d)", i, t, md->hp.n_vocab);
        /* positions increase with the slot (equal to it unless a retention policy compacted the sequence),
         * below 2^30 so the sequence's later positions stay far from int32 overflow */
        if (pos < (int32_t)i || (i > 0 && (uint32_t)pos <= prev) || pos >= BRISK_STATE_MAX_POS)
            return brisk_fail(err, BRISK_ERR_FORMAT, "KV state: slot %u holds position %d; positions must increase from slot to slot, "
                              "each at least its slot and below %d", i, pos, BRISK_STATE_MAX_POS);
        prev = (uint32_t)pos;
    }
    if (smp) {
        if (!(h->flags & STATE_FLAG_SAMPLER))
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV state holds no sampler state, but a sampler was given to restore");
        brisk_status st = brisk_sampler_state_check(smp, p + l->smp_off, (size_t)h->sampler_bytes, err);
        if (st) return st;
    }
    const int32_t need = (int32_t)(((int64_t)h->n_tokens + BRISK_KV_BLOCK - 1) / BRISK_KV_BLOCK);
    const int32_t have = brisk_kv_blocks_obtainable(kv, seq);
    if (need > have)
        return brisk_fail(err, BRISK_ERR_CAPACITY,
                          "KV state of %u tokens needs %d blocks of %d; the pool can give sequence %d only %d (the other sequences hold "
                          "the rest)",
                          h->n_tokens, need, BRISK_KV_BLOCK, seq, have);
    return BRISK_OK;
}

brisk_status brisk_seq_state_set(brisk_context *c, int32_t seq, struct brisk_sampler *smp, const void *buf, size_t len,
                                 brisk_error *err) {
    if (!c || (!buf && len)) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV state: context and buffer are required");
    const uint8_t *p = buf;
    state_header h;
    state_layout l;
    brisk_status st = state_check(c, seq, smp, p, len, &h, &l, err);
    if (st) return st;
    brisk_kv *kv = c->kv;
    const size_t krb = (size_t)l.k_row, vrb = (size_t)l.v_row, n = h.n_tokens;
    uint8_t *row = malloc(krb + vrb);
    if (!row) return brisk_fail(err, BRISK_ERR_NOMEM, "KV state: out of memory for a row of %zu bytes", krb + vrb);
    /* from here on it cannot fail: the blocks were counted above. Block by
     * block, each committed before the next: a k4/k2 K block's F16 staging
     * is returned once it is sealed, so a state longer than the staging loads */
    brisk_kv_truncate(kv, seq, 0);
    for (size_t b0 = 0; b0 < n; b0 += BRISK_KV_BLOCK) {
        const size_t b1 = BRISK_MIN(n, b0 + BRISK_KV_BLOCK);
        st = brisk_kv_reserve(kv, seq, (int32_t)b1, err);
        BRISK_ASSERT(st == BRISK_OK);
        if (h.flags & STATE_FLAG_ROTATED) kv->blk[kv->seqs[seq].blocks[b0 / BRISK_KV_BLOCK]].rotated = 1;
        for (int32_t il = 0; il < kv->n_layer; il++)
            for (size_t i = b0; i < b1; i++) {
                const size_t at = (size_t)il * n + i;
                memcpy(row, p + l.kv_off + at * krb, krb);
                memcpy(row + krb, p + l.v_off + at * vrb, vrb);
                brisk_kv_row_set(kv, il, seq, (int32_t)i, row, row + krb);
            }
        for (size_t i = b0; i < b1; i++)
            brisk_kv_written(kv, seq, (int32_t)i, (int32_t)get_u32(p + l.tok_off + 4 * i), (int32_t)get_u32(p + l.pos_off + 4 * i), true);
        brisk_kv_commit(kv, seq);
    }
    free(row);
    c->tree_ok[seq] = 0;
    if (smp) {
        st = brisk_sampler_state_load(smp, p + l.smp_off, (size_t)h.sampler_bytes, err);
        BRISK_ASSERT(st == BRISK_OK);   /* checked above */
    }
    return BRISK_OK;
}

/* ---- files -------------------------------------------------------------------------------------- */

brisk_status brisk_seq_save(const brisk_context *c, int32_t seq, const struct brisk_sampler *smp, const char *path, brisk_error *err) {
    if (!path) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV state: no path to save to");
    uint8_t *blob = NULL;
    size_t n = 0;
    brisk_status st = brisk_seq_state_get_alloc(c, seq, smp, &blob, &n, err);
    if (st) return st;
    /* beside the target, then renamed: a reader never sees half a state */
    brisk_outfile o;
    if (!(st = brisk_outfile_open(&o, path, n, 0644, err))) {
        if (fwrite(blob, 1, n, o.f) != n) {
            st = brisk_fail(err, BRISK_ERR_IO, "%s: write failed: %s", o.tmp ? o.tmp : path, strerror(errno ? errno : EIO));
            brisk_outfile_abort(&o);
        } else {
            st = brisk_outfile_commit(&o, err);
        }
    }
    free(blob);
    return st;
}

brisk_status brisk_seq_load(brisk_context *c, int32_t seq, struct brisk_sampler *smp, const char *path, brisk_error *err) {
    if (!path) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV state: no path to load from");
    brisk_mapped_file f;
    brisk_status st = brisk_file_map(path, &f, err);
    if (st) return st;
    st = brisk_seq_state_set(c, seq, smp, f.data, f.size, err);
    brisk_file_unmap(&f);
    if (st) brisk_error_prefix(err, "%s", path);
    return st;
}
