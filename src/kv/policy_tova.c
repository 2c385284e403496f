/* policy_tova: Token Omission Via Attention (Oren et al., 2024,
 * "Transformers are Multi-State RNNs"): drop the slots the newest query
 * attends least, its attention summed over every head and layer (or, with
 * --kv-per-head, per layer and KV head). TOVA
 * decides one token per step; before a batch of several tokens brisk cuts
 * them all at once, by the attention of the previous batch's last query. */
#include "kv/policy.h"

const brisk_kv_policy_ops brisk_kv_policy_tova = {.name = "tova", .score = brisk_kv_policy_score_mass, .observe = BRISK_KV_OBSERVE_LAST,
                                                   .per_head = true};
