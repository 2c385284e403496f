/* policy_streaming: StreamingLLM (Xiao et al., 2023, "Efficient Streaming
 * Language Models with Attention Sinks"): keep the first tokens, which
 * collect attention whatever they hold (the sinks), and the most recent ones.
 * As a table row: a slot's score is its position, so the default select keeps
 * the sinks and then the newest slots up to the budget. */
#include "kv/policy.h"

static float streaming_score(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot) {
    (void)p;
    return (float)brisk_kv_slot_pos(kv, seq, slot);   /* positions < 2^24 are exact */
}

const brisk_kv_policy_ops brisk_kv_policy_streaming = {.name = "streaming", .score = streaming_score};
