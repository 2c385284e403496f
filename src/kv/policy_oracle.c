/* policy_oracle: the reference row of issue #18's tables that no online
 * policy can beat at choosing shared slots: at an eviction before the batch
 * that starts at position P, keep the slots that the queries at P and after
 * attend to most, in a run of the same tokens with every slot kept. Only a
 * caller that knows the text ahead can provide those queries, so the oracle
 * runs in two passes over it (brisk_seq_oracle; brisk perplexity does it per
 * chunk, every other command refuses the policy):
 *   record  every slot kept; each query's attention, summed over heads and
 *           layers in fixed point as every scored policy sums it
 *           (observe_item), is added to the row of its position: table[q][s],
 *           n_ctx x n_ctx sums (policy.h, BRISK_KV_ORACLE_MAX_BYTES);
 *   seal    row q := rows q, q + 1, ... summed, per key position s (integer
 *           sums: exact and independent of the order);
 *   replay  the same tokens from position 0; a candidate slot's score at an
 *           eviction is table[P][its position], P the position the batch
 *           starts at (brisk_kv_next_pos).
 * The future queries are those of the full-cache pass, not of the replay's
 * reduced cache: the choice is "exact top-k by the future attention computed
 * offline", issue #18's definition. The score depends only on the sequence's
 * own slots and the recording, so the replay keeps batch invariance (the
 * recording's sums are the same bits however its pass was batched). With
 * --kv-per-head the table has a part per (layer, KV head) and each head
 * keeps what its own future queries attend to most: the reference for the
 * per-head policies (n_ctx^2 x the heads' sums, same limit). */
#include "kv/policy.h"

static float oracle_score(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot) {
    const int32_t next = brisk_kv_next_pos(kv, seq), pos = brisk_kv_policy_slot_pos(p, kv, seq, slot);
    if (next >= p->recorded[seq] || pos >= p->recorded[seq]) return 0.0f;   /* past the recording: no query left to count */
    /* per-head (--kv-per-head): the head's own part of the row, as attention recorded it */
    return (float)brisk_kv_policy_mass_row(kv, seq, next)[(size_t)(p->head > 0 ? p->head : 0) * (size_t)p->n_ctx + (size_t)pos];
}

const brisk_kv_policy_ops brisk_kv_policy_oracle = {.name = "oracle", .score = oracle_score, .observe = BRISK_KV_OBSERVE_RECORD,
                                                   .per_head = true};
