/* policy_h2o: Heavy-Hitter Oracle (Zhang et al., 2023, "H2O: Heavy-Hitter
 * Oracle for Efficient Generative Inference of Large Language Models"): keep
 * the recent tokens and the "heavy hitters", the slots that collected the
 * most attention so far over every query since the slot was written. As in
 * the paper, the budget beside the sinks is split evenly between the two
 * (its 50/50 default): the recent part is half of it, or --kv-window if that
 * is larger.
 *
 * The score is the slot's mean attention: its mass divided by the queries
 * that saw it (every query since it was written: the next position minus
 * its own). The paper's raw sum favours old slots, which more queries have
 * seen: on val.txt's first 20 chunks the mean gave a mean KL of 0.038717 at
 * a 25% budget (the sum 0.058169) and 0.009195 at 50% (the sum 0.013158);
 * all 83 chunks in docs/KV.md. A function of the slot's mass and positions
 * only, so batch invariance holds.
 *
 * By default a slot is shared by all layers and heads of a sequence (a block
 * holds every layer), so the sum runs over all of them; with per-head
 * selection (--kv-per-head) each (layer, KV head) ranks its own slots by its
 * own mass and positions, as the paper does. Ties (slots no query has seen)
 * keep the later slot. */
#include "kv/policy.h"

static float h2o_score(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot) {
    const int32_t seen = brisk_kv_next_pos(kv, seq) - brisk_kv_policy_slot_pos(p, kv, seq, slot);
    return (float)((double)brisk_kv_policy_slot_mass(p, seq, slot) / (double)(seen > 1 ? seen : 1));
}

static void h2o_select(brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t n_keep, int32_t *keep) {
    const int32_t window = p->cfg.window, len = brisk_kv_len(kv, seq);
    int32_t half = (n_keep - p->cfg.sink) / 2;
    /* pinned slots older than the recent half are kept beside it: the half narrows until they fit (down to --kv-window,
     * where make_room has checked that they do) */
    while (half > window && p->cfg.sink + half + brisk_kv_policy_pinned_in(kv, seq, p->cfg.sink, len - half) > n_keep) half--;
    if (half > window) p->cfg.window = half;   /* the recent half, for this selection only */
    brisk_kv_policy_select_top(p, kv, seq, n_keep, keep);
    p->cfg.window = window;
}

const brisk_kv_policy_ops brisk_kv_policy_h2o = {.name = "h2o", .score = h2o_score, .select = h2o_select, .observe = BRISK_KV_OBSERVE_ALL,
                                                  .per_head = true};
