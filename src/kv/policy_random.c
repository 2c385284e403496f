/* policy_random: the reference row of issue #18's tables. Sinks and window
 * are kept as every policy keeps them; the rest is a random choice, so a
 * scored policy has to beat it. The "random" score of a slot is a hash of the
 * seed and the slot's position (splitmix64's finalizer, 24 bits so the float
 * is exact): it depends on nothing but the sequence's own slots, so the
 * choice is the same alone or batched, and a slot keeps its score from one
 * eviction to the next (what survived one cut is not reshuffled by the next). */
#include "kv/policy.h"

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static float random_score(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot) {
    const uint64_t h = mix64(p->cfg.seed ^ mix64((uint64_t)(uint32_t)brisk_kv_slot_pos(kv, seq, slot) + 0x9e3779b97f4a7c15ull));
    return (float)(h >> 40);
}

const brisk_kv_policy_ops brisk_kv_policy_random = {.name = "random", .score = random_score};
