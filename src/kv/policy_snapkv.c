/* policy_snapkv: SnapKV (Li et al., 2024, "SnapKV: LLM Knows What You are
 * Looking for Before Generation"): the queries of an observation window, the
 * last `--kv-window` tokens fed, show which earlier keys matter; their
 * attention, summed over the window's queries and every head, is smoothed by
 * an average pool of 5 neighbouring slots (SnapKV's default kernel: the keys
 * around a selected one keep the context of a hit) and the best-scored slots
 * are kept. At the first eviction of a prefill this is SnapKV's
 * compression. The window is exact whatever the batches (policy.h), so it also
 * serves the later evictions of a decode, where SnapKV itself stops
 * compressing. */
#include "kv/policy.h"

#define SNAPKV_POOL 5   /* slots averaged around each candidate (odd: centred) */

static float snapkv_score(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot) {
    const int32_t len = brisk_kv_len(kv, seq);
    const int32_t lo = slot - SNAPKV_POOL / 2 < 0 ? 0 : slot - SNAPKV_POOL / 2;
    const int32_t hi = slot + SNAPKV_POOL / 2 + 1 > len ? len : slot + SNAPKV_POOL / 2 + 1;
    int64_t sum = 0;   /* the pool's sum: its average without the constant divisor (slots past the ends count 0, as zero padding) */
    for (int32_t s = lo; s < hi; s++) sum += brisk_kv_policy_slot_mass(p, seq, s);
    return (float)sum;
}

const brisk_kv_policy_ops brisk_kv_policy_snapkv = {.name = "snapkv", .score = snapkv_score, .observe = BRISK_KV_OBSERVE_WINDOW};
