/* engine_impl: the structures behind include/brisk.h's model and context
 * handles, shared by the engine's own files (engine.c: models, contexts,
 * decode; and the modules that need a context's insides, such as KV
 * save/restore). Nothing outside src/engine includes this. */
#ifndef BRISK_ENGINE_IMPL_H
#define BRISK_ENGINE_IMPL_H

#include "brisk.h"
#include "base/base.h"
#include "kv/kv.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

struct brisk_model {
    brisk_model_data *data;
    brisk_vocab *vocab;
    /* brisk_gguf_data_hash of the weights, for KV-state files (state.c):
     * reading every tensor byte is too slow for every load, so it is taken
     * the first time a state is written or checked. data_hash_once: 0 = not
     * yet, 1 = one thread is computing it, 2 = data_hash is set. Zero from
     * the calloc in brisk_model_load. */
    _Atomic int data_hash_once;
    uint64_t data_hash;
};

#define BRISK_TREE_RECORD 64   /* tree tokens kept per sequence (a speculative tree has at most 33) */

struct brisk_context {
    const brisk_model *model;
    brisk_kv *kv;
    brisk_forward *fwd;
    int32_t n_batch;
    int32_t n_outputs_max;  /* logit rows */
    float *logits;          /* [n_outputs_max][n_vocab] */
    int32_t n_logits;
    size_t scratch_bytes;
    /* the last decode's tokens, for brisk_seq_keep_path: [n_batch] each */
    int32_t last_n;
    int32_t *last_seq, *last_par, *last_rank;   /* parent: batch index or -1; rank: slot - base */
    int32_t *path_rel;      /* [n_batch] scratch for keep_path */
    int32_t *seq_last;      /* [n_seq] scratch: the latest batch index per sequence */
    int32_t *len0;          /* [n_seq] scratch: lengths before a decode, to undo one whose logits are not finite */
    /* Tree state per sequence: what the decode that last added tokens to
     * it added, so brisk_seq_keep_path works after other sequences' decodes
     * too (one batch, or a scheduler's later steps). Its first
     * BRISK_TREE_RECORD tokens are copied per sequence; a longer one is
     * read from the last_* record, so only until the next decode. */
    int32_t *tree_n;        /* [n_seq] tokens that decode added to the sequence */
    uint8_t *tree_ok;       /* [n_seq] 1 = such a decode happened and nothing changed the sequence since */
    int64_t *tree_decode;   /* [n_seq] which decode (n_decodes) it was */
    int32_t *tree_bidx;     /* [n_seq][BRISK_TREE_RECORD] batch index of the r-th token it added */
    int32_t *tree_pidx;     /* [n_seq][BRISK_TREE_RECORD] that token's parent's batch index, -1: a root */
    int64_t n_decodes;      /* decodes accepted so far */
    /* brisk_seq_sync's prefill batches: [n_batch] each */
    int32_t *sync_pos, *sync_seq;
    uint8_t *sync_want;
};

/* Tests only: the scheduler takes a pass's cost in seconds from clock(user, tokens, logit rows) instead of
 * the wall clock, so what its cost-driven policies (max_stall, --spec auto) decide is reproducible on a
 * loaded machine. NULL restores the wall clock. */
typedef double (*brisk_sched_pass_clock)(void *user, int32_t n_tokens, int32_t n_logits);
void brisk_sched_set_pass_clock(brisk_sched *s, brisk_sched_pass_clock clock, void *user);

#endif
