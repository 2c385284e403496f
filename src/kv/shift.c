/* shift: positions reassigned inside the KV cache, K re-rotated (see shift.h). */
#include "kv/shift.h"
#include "kv/policy.h"

#include <math.h>
#include <string.h>

#define SHIFT_MAX_HEAD 4096   /* forward.c's largest head_dim */

/* RoPE of a position delta without its magnitude: brisk_rope_cache scales
 * cos/sin by attn_factor (and YaRN's 1 + 0.1 ln(1/freq_scale)), which K
 * already carries from its first rotation. */
static brisk_rope unit_rope(const brisk_rope *r) {
    brisk_rope u = *r;
    u.attn_factor = r->ext_factor != 0.0f ? 1.0f / (1.0f + 0.1f * logf(1.0f / r->freq_scale)) : 1.0f;
    return u;
}

brisk_status brisk_kv_reposition(brisk_kv *kv, int32_t seq, int32_t from, const int32_t *new_pos, brisk_kv_layer_rope_fn rope,
                                 const void *user, brisk_error *err) {
    if (seq < 0 || seq >= kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "shift: sequence id %d out of range [0, %d)", seq, kv->n_seq);
    brisk_kv_seq *s = &kv->seqs[seq];
    if (s->ordered != s->len)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "shift: sequence %d still holds the token tree of an earlier decode", seq);
    if (from < 0 || from > s->len) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "shift: slot %d outside [0, %d]", from, s->len);
    if (kv->head_dim > SHIFT_MAX_HEAD) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "shift: head size %d > %d", kv->head_dim, SHIFT_MAX_HEAD);
    if (kv->k_type == BRISK_KV_K4 || kv->k_type == BRISK_KV_K2)   /* a channel's scale spans 32 slots: a rotation would requantize whole blocks */
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "shift: a %s K cache (quantized per channel over each block of 32 slots) cannot be re-rotated; "
                          "use -ctk f16, q8_0 or q4_0 with a context shift", brisk_kv_type_name(kv->k_type));
    int32_t prev = from > 0 ? brisk_kv_slot_pos(kv, seq, from - 1) : -1, first = -1;
    for (int32_t i = 0; i < s->len - from; i++) {
        if (new_pos[i] <= prev)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                              "shift: slot %d would take position %d, not above the previous slot's %d (positions must increase)", from + i,
                              new_pos[i], prev);
        prev = new_pos[i];
        if (first < 0 && new_pos[i] != brisk_kv_slot_pos(kv, seq, from + i)) first = from + i;
    }
    /* per-head slot maps (a per-head retention policy): each head's slot has its own position, so each head's K
     * turns by its own delta */
    const bool heads = brisk_kv_policy_heads_differ(kv, seq);
    if (heads && from > 0 && from < s->len)
        for (int32_t h = 0; h < kv->n_layer * kv->n_head; h++)
            if (new_pos[0] <= brisk_kv_policy_head_pos(kv, seq, h, from - 1))
                return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                                  "shift: slot %d would take position %d, not above head %d's previous slot's %d (positions must increase)",
                                  from, new_pos[0], h, brisk_kv_policy_head_pos(kv, seq, h, from - 1));
    if (heads) first = from < s->len ? from : -1;
    if (first < 0) return BRISK_OK;   /* nothing moves */
    brisk_status st = brisk_kv_make_own(kv, seq, first / BRISK_KV_BLOCK, (s->len + BRISK_KV_BLOCK - 1) / BRISK_KV_BLOCK, err);
    if (st) return st;
    float k[SHIFT_MAX_HEAD], cache[SHIFT_MAX_HEAD];
    for (int32_t slot = first; slot < s->len; slot++) {
        const int32_t at = s->blocks[slot / BRISK_KV_BLOCK];
        int32_t *pos = &kv->pos[(size_t)at * BRISK_KV_BLOCK + (size_t)(slot % BRISK_KV_BLOCK)];
        const int32_t delta = new_pos[slot - from] - *pos;
        if (delta == 0 && !heads) continue;
        for (int32_t il = 0; il < kv->n_layer; il++) {
            const brisk_rope *r = rope ? rope(user, il) : NULL;
            if (!r || r->n_rot <= 0) continue;
            const brisk_rope u = unit_rope(r);
            if (!heads) brisk_rope_cache(&u, delta, cache);
            for (int32_t h = 0; h < kv->n_head; h++) {
                if (heads) {
                    const int32_t dh = new_pos[slot - from] - brisk_kv_policy_head_pos(kv, seq, il * kv->n_head + h, slot);
                    if (dh == 0) continue;
                    brisk_rope_cache(&u, dh, cache);
                }
                brisk_kv_k_get(kv, il, seq, slot, h, k);
                brisk_rope_apply(&u, cache, k, 1, kv->head_dim);
                brisk_kv_k_set(kv, il, seq, slot, h, k);
            }
        }
        *pos = new_pos[slot - from];
        kv->blk[at].rotated = 1;
    }
    brisk_kv_policy_heads_moved(kv, seq, from, s->len, new_pos, 0);
    return BRISK_OK;
}

brisk_status brisk_kv_shift(brisk_kv *kv, int32_t seq, int32_t from, int32_t delta, brisk_kv_layer_rope_fn rope, const void *user,
                            brisk_error *err) {
    if (seq < 0 || seq >= kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "shift: sequence id %d out of range [0, %d)", seq, kv->n_seq);
    const int32_t len = brisk_kv_len(kv, seq);
    if (from < 0 || from > len) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "shift: slot %d outside [0, %d]", from, len);
    if (from == len || delta == 0) return BRISK_OK;
    /* the positions live in the pool's pos array; the new ones are checked there before anything changes */
    const int32_t lo = brisk_kv_slot_pos(kv, seq, from) + delta, floor_pos = from > 0 ? brisk_kv_slot_pos(kv, seq, from - 1) : -1;
    if (lo <= floor_pos)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "shift: slot %d would take position %d, not above the previous slot's %d (positions must increase)", from, lo,
                          floor_pos);
    if ((int64_t)brisk_kv_slot_pos(kv, seq, len - 1) + delta > INT32_MAX)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "shift: positions + %d overflow", delta);
    brisk_status st = brisk_kv_make_own(kv, seq, from / BRISK_KV_BLOCK, (len + BRISK_KV_BLOCK - 1) / BRISK_KV_BLOCK, err);
    if (st) return st;
    float k[SHIFT_MAX_HEAD], cache[SHIFT_MAX_HEAD];
    for (int32_t il = 0; il < kv->n_layer; il++) {   /* one delta: one cos/sin table per layer */
        const brisk_rope *r = rope ? rope(user, il) : NULL;
        if (!r || r->n_rot <= 0) continue;
        const brisk_rope u = unit_rope(r);
        brisk_rope_cache(&u, delta, cache);
        for (int32_t slot = from; slot < len; slot++)
            for (int32_t h = 0; h < kv->n_head; h++) {
                brisk_kv_k_get(kv, il, seq, slot, h, k);
                brisk_rope_apply(&u, cache, k, 1, kv->head_dim);
                brisk_kv_k_set(kv, il, seq, slot, h, k);
            }
    }
    for (int32_t slot = from; slot < len; slot++) {
        const int32_t at = kv->seqs[seq].blocks[slot / BRISK_KV_BLOCK];
        kv->pos[(size_t)at * BRISK_KV_BLOCK + (size_t)(slot % BRISK_KV_BLOCK)] += delta;
        kv->blk[at].rotated = 1;
    }
    brisk_kv_policy_heads_moved(kv, seq, from, len, NULL, delta);
    brisk_kv_policy_repositioned(kv, seq, delta);
    return BRISK_OK;
}

brisk_status brisk_kv_context_shift(brisk_kv *kv, int32_t seq, int32_t n_keep, int32_t n_discard, brisk_kv_layer_rope_fn rope,
                                    const void *user, int32_t *keep, int32_t *new_pos, int32_t *n_dropped, brisk_error *err) {
    if (n_dropped) *n_dropped = 0;
    if (seq < 0 || seq >= kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "context shift: sequence id %d out of range [0, %d)", seq, kv->n_seq);
    const int32_t len = brisk_kv_len(kv, seq);
    if (n_keep < 0 || n_discard < 0)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "context shift: keep %d, discard %d must not be negative", n_keep, n_discard);
    if (n_keep > len) n_keep = len;
    /* the oldest unpinned slots after the kept ones go; pinned slots stay wherever they are */
    int32_t n = 0, dropped = 0;
    for (int32_t slot = 0; slot < len; slot++) {
        if (slot >= n_keep && dropped < n_discard && !brisk_kv_slot_pinned(kv, seq, slot)) {
            dropped++;
            continue;
        }
        keep[n++] = slot;
    }
    brisk_status st;
    if (dropped > 0) {
        if ((st = brisk_kv_compact(kv, seq, keep, n, err))) return st;
        brisk_kv_policy_compacted(kv, seq, len, keep, n);
    }
    if (n_dropped) *n_dropped = dropped;
    /* consecutive positions from n_keep on: the gaps the drop (and any retention policy) left close */
    const int32_t base = n_keep > 0 ? brisk_kv_slot_pos(kv, seq, n_keep - 1) + 1 : 0;
    if (n_keep >= n) return BRISK_OK;
    const int32_t tail_delta = base + (n - 1 - n_keep) - brisk_kv_slot_pos(kv, seq, n - 1);
    for (int32_t slot = n_keep; slot < n; slot++) new_pos[slot - n_keep] = base + (slot - n_keep);
    if ((st = brisk_kv_reposition(kv, seq, n_keep, new_pos, rope, user, err))) return st;
    brisk_kv_policy_repositioned(kv, seq, tail_delta);
    return BRISK_OK;
}
