/* forward: one transformer evaluation over a batch of tokens that may belong
 * to several sequences. K/V of every token are written to the paged cache
 * first, then each token attends causally to its own sequence's cached slots
 * and its ancestors in the batch (positions read from the KV, see kv.h). Every per-token computation is independent of the rest of the
 * batch and reduces in a fixed order, so a sequence's logits are the same
 * alone, batched, or chunked (DESIGN.md invariant 1). */
#ifndef BRISK_FORWARD_H
#define BRISK_FORWARD_H

#include "base/pool.h"
#include "kernels/kernels.h"
#include "kv/kv.h"
#include "model/model.h"

typedef struct brisk_fwd_batch {
    int32_t n;
    const int32_t *token;
    const int32_t *pos;
    const int32_t *seq;
    const uint8_t *want;     /* per token: 1 = produce logits */
    /* per token: the batch index (< i, same sequence) of its tree parent, or
     * -1 = it follows the sequence's cached tokens; NULL = each token follows
     * the previous token of its sequence in the batch (a chain) */
    const int32_t *parent;
} brisk_fwd_batch;

typedef struct brisk_forward brisk_forward;

/* Scratch for batches of up to n_batch tokens with contexts up to n_ctx; all
 * memory is allocated here, none per call. */
brisk_status brisk_forward_init(brisk_forward **out, const brisk_model_data *m, int32_t n_batch, int32_t n_ctx,
                                int n_threads, brisk_error *err);
void brisk_forward_free(brisk_forward *f);
size_t brisk_forward_bytes(const brisk_forward *f);
/* The bytes brisk_forward_init would allocate for these limits (= its
 * brisk_forward_bytes), computed without allocating; false on overflow. */
bool brisk_forward_plan(const brisk_model_data *m, int32_t n_batch, int32_t n_ctx, int n_threads, size_t *bytes);

/* Evaluate b; logits for the tokens with want[i] set go to out in batch order,
 * [n_want][n_vocab]. Without parents, positions must extend each sequence
 * contiguously: the first token of seq s in the batch has pos == brisk_kv_next_pos(kv, s)
 * (after any truncation), later ones follow. With parents (a token tree),
 * pos[i] == pos[parent[i]] + 1, or brisk_kv_next_pos(kv, s) for a root; the K/V row of
 * the r-th token of seq s in the batch goes to slot len + r whatever its
 * position, and each token attends to the cached tokens, its ancestors and
 * itself, presented in position order so its logits are bitwise those of the
 * same path decoded as a chain. The sequence then holds len + (its tokens)
 * slots, no longer in position order (brisk_kv_ordered stays at len) until
 * brisk_kv_keep_path or brisk_kv_truncate resolves it; a sequence in that state
 * is refused. The batch's slots are reserved all or nothing before anything is
 * written (brisk_kv_reserve_batch: shared blocks are copied there), and each
 * slot's token and position are recorded; indexing the filled blocks in the
 * prefix cache (brisk_kv_commit) is the caller's, once it accepts the batch. */
brisk_status brisk_forward_run(brisk_forward *f, brisk_kv *kv, const brisk_fwd_batch *b, float *out, brisk_error *err);
/* After a successful brisk_forward_run: the output-normed hidden states of
 * the tokens with want[i] set, [n_want][n_embd] in batch order (the rows the
 * output matrix was applied to); overwritten by the next run. */
const float *brisk_forward_hidden(const brisk_forward *f);

/* Windowed attention (brisk_context_params.attn_window/attn_sink): a token at
 * position p attends to positions < sink and p - window + 1 .. p; window 0 =
 * full attention. Masked by absolute position, so batch invariance holds. */
void brisk_forward_set_window(brisk_forward *f, int32_t window, int32_t sink);

/* The kernel table in use (ref or SIMD), chosen once at init. */
const brisk_kernels *brisk_forward_kernels(const brisk_forward *f);
/* "avx2", "avx512+avx512vnni-gemm", "ref": the dot-product table, plus the packed GEMM set when one is used. */
const char *brisk_forward_isa(const brisk_forward *f);
/* The RoPE layer il's K is rotated with in this context (LongRoPE's factors
 * chosen for its n_ctx, the windowed layers' own base), NULL for a layer
 * without RoPE: what a context shift re-rotates K with (kv/shift.c). */
const brisk_rope *brisk_forward_layer_rope(const brisk_forward *f, int32_t il);

#endif
