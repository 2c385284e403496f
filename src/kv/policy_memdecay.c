/* policy_memdecay: issue #18's "memdecay": each slot has a priority that
 * decays with the steps (positions) since it was last attended, at a rate
 * set by the role of its region, and the lowest priorities go first. A slot
 * is attended by a query when some head of some layer gives it a probability
 * of at least MEMDECAY_ATTENDED (attention records that query's position,
 * p->seen, with an atomic max: the same whatever the batching); a slot not
 * attended since it was written counts from its own position. The priority
 * is exp(-rate x steps), so the score is its logarithm, -rate x steps.
 *
 * The roles are those the engine tags per slot (brisk_seq_set_role): chat's
 * system, user, assistant and tool, run's prompt and generated. The rates are
 * set by reasoning, not calibrated from measured attention lifetimes (issue
 * #18 asks for that; not done): a system prompt is read for a whole
 * conversation and decays slowest, the user's turns and tool results (what
 * the answer is about) at half the rate of the assistant's own text. On
 * untagged text (brisk perplexity) every slot has rate 1 and the policy keeps
 * the slots attended most recently. Pinned roles (--kv-pin) are kept by the
 * default select before any score is looked at. */
#include "kv/policy.h"

/* A probability that counts as attending: a head that gives a slot 5% of its
 * attention reads it. Chosen, not tuned: no other value was measured
 * (docs/KV.md has this one's KL). */
#define MEMDECAY_ATTENDED 0.05f

static const float role_rate[BRISK_KV_N_ROLES] = {
    [BRISK_ROLE_NONE] = 1.0f,   [BRISK_ROLE_SYSTEM] = 0.125f, [BRISK_ROLE_USER] = 0.5f,     [BRISK_ROLE_ASSISTANT] = 1.0f,
    [BRISK_ROLE_TOOL] = 0.5f,   [BRISK_ROLE_PROMPT] = 0.5f,   [BRISK_ROLE_GENERATED] = 1.0f,
};

static float memdecay_score(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot) {
    /* per-head (--kv-per-head): the head's own position, role and last attending query */
    const int32_t pos = brisk_kv_policy_slot_pos(p, kv, seq, slot), seen = brisk_kv_policy_slot_seen(p, seq, slot);
    const int32_t steps = brisk_kv_next_pos(kv, seq) - (seen > pos ? seen : pos);
    const uint8_t role = brisk_kv_policy_slot_role(p, kv, seq, slot);
    return -(role < BRISK_KV_N_ROLES ? role_rate[role] : 1.0f) * (float)steps;
}

const brisk_kv_policy_ops brisk_kv_policy_memdecay = {
    .name = "memdecay", .score = memdecay_score, .observe = BRISK_KV_OBSERVE_ALL, .seen_threshold = MEMDECAY_ATTENDED,
    .per_head = true};
