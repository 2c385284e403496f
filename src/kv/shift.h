/* shift: positions reassigned inside the KV cache, K re-rotated (llama.cpp's
 * context shift: llama_memory_seq_rm + llama_memory_seq_add, rewritten for
 * brisk's paged cache; docs/KV.md "Generation past the context").
 *
 * K is stored already rotated by RoPE at its slot's position. Moving a slot
 * from position p to p + d multiplies each rotated pair by the rotation of
 * angle theta_i * d (RoPE's angle is linear in the position, YaRN's mix and
 * the frequency factors included), without RoPE's magnitude factor (that was
 * applied once, at p). V does not depend on the position and stays. A
 * quantized K (q8_0, q4_0) is dequantized, rotated and quantized again: one
 * more rounding of each shifted slot per shift (docs/KV.md measures it). */
#ifndef BRISK_KV_SHIFT_H
#define BRISK_KV_SHIFT_H

#include "kv/kv.h"
#include "ops/ops.h"

/* The RoPE of layer il, or NULL for a layer that does not rotate (NoPE). */
typedef const brisk_rope *(*brisk_kv_layer_rope_fn)(const void *user, int32_t il);

/* Slots [from, len) of seq take positions new_pos[0 .. len - from) (strictly
 * increasing, >= 0, above slot from - 1's position); each moved slot's K is
 * re-rotated by its delta in every layer that rotates. The blocks rewritten
 * are made seq's own first and are never indexed afterwards. Fails, changing
 * nothing, with BRISK_ERR_INVALID_ARG on bad arguments or a token tree, and
 * BRISK_ERR_CAPACITY when the copies of shared blocks do not fit the pool. */
brisk_status brisk_kv_reposition(brisk_kv *kv, int32_t seq, int32_t from, const int32_t *new_pos, brisk_kv_layer_rope_fn rope,
                                 const void *user, brisk_error *err);
/* brisk_kv_reposition with new_pos[i] = old + delta for every slot >= from. */
brisk_status brisk_kv_shift(brisk_kv *kv, int32_t seq, int32_t from, int32_t delta, brisk_kv_layer_rope_fn rope, const void *user,
                            brisk_error *err);
/* The context shift: drop the n_discard oldest slots after the first n_keep
 * that are not pinned (kv->pin_mask; fewer if fewer are unpinned), compact,
 * then renumber every slot from n_keep on to consecutive positions after slot
 * n_keep - 1's (re-rotating K). *n_dropped (optional) = slots dropped.
 * Scratch: keep[len] and new_pos[len] (caller's, at least n_ctx each). */
brisk_status brisk_kv_context_shift(brisk_kv *kv, int32_t seq, int32_t n_keep, int32_t n_discard, brisk_kv_layer_rope_fn rope,
                                    const void *user, int32_t *keep, int32_t *new_pos, int32_t *n_dropped, brisk_error *err);

#endif
