/* The batched speculation plan (src/spec/plan.c brisk_spec_plan): a draft
 * token at depth d is worth a^d (its chance of being accepted), and the pass
 * takes the most valuable tokens across its sequences as far as the expected
 * tokens per second improve (issue #14: "the batch takes the most valuable
 * ones until the marginal cost exceeds their value"). Checked on a policy
 * whose cost curve and acceptances the test sets, with two n-gram sequences:
 * an old one with a weak match (2 tokens, acceptance ~0.5) and a newer one
 * with a strong match (acceptance ~0.95):
 *   - room for 4 drafts, flat cost (a memory-bound pass): all 4 go to the
 *     strong sequence (taking sequences oldest first gave them to the weak);
 *   - room for 16: both sequences' 8 proposals (every token pays at a flat cost);
 *   - a compute-bound pass (cost per token): no draft pays, none is taken;
 *   - a cost that jumps after 3 drafts and then stays flat: the plan looks
 *     past the step when the tokens behind it pay for it, and stops short
 *     of it when they do not. */
#include "spec/spec.h"
#include "test.h"

static brisk_spec_policy *policy_with(double (*cost)(int32_t)) {
    brisk_spec_policy *p = NULL;
    brisk_error err = {0};
    CHECK(brisk_spec_policy_init(&p, 64, &err) == BRISK_OK);
    if (!p) return NULL;
    for (int32_t n = 1; n <= 24; n++) brisk_spec_policy_observe(p, n, n, cost(n));
    /* acceptance: ~0.5 for a 2-token match, ~0.95 for long ones (decayed averages of these trials) */
    for (int i = 0; i < 400; i++) brisk_spec_policy_learn(p, 2, 1, i % 2);
    for (int32_t len = 3; len <= 64; len *= 2)
        for (int i = 0; i < 200; i++) brisk_spec_policy_learn(p, len, 20, 19);
    return p;
}

static double cost_flat(int32_t n) { (void)n; return 0.010; }
static double cost_linear(int32_t n) { return 0.005 * n; }
static double cost_step(int32_t n) { return n <= 5 ? 0.010 : 0.0125; }   /* base 2 + 3 drafts, then a step */

/* The weak sequence (index 0, the older) and the strong one, each with 8 tokens proposed. */
static void propose(brisk_spec_seq *weak, brisk_spec_seq *strong) {
    /* "5 6" occurred once before, after 100: a match of exactly 2 tokens */
    const int32_t h_weak[] = {100, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 200, 5, 6};
    int32_t h_strong[60];
    for (int i = 0; i < 40; i++) h_strong[i] = 300 + i;
    for (int i = 0; i < 20; i++) h_strong[40 + i] = 300 + i;   /* a 20-token repeat */
    CHECK(brisk_spec_seq_propose(weak, h_weak, (int32_t)(sizeof h_weak / sizeof *h_weak), 8) == 8);
    CHECK(brisk_spec_seq_propose(strong, h_strong, 60, 8) == 8);
}

static void plan_case(const char *what, double (*cost)(int32_t), int32_t room, int32_t want_weak, int32_t want_strong) {
    brisk_spec_policy *p = policy_with(cost);
    brisk_spec_seq *weak = NULL, *strong = NULL;
    brisk_error err = {0};
    CHECK(brisk_spec_seq_init(&weak, BRISK_SPEC_AUTO, 8, 2, 1000, &err) == BRISK_OK);
    CHECK(brisk_spec_seq_init(&strong, BRISK_SPEC_AUTO, 8, 2, 1000, &err) == BRISK_OK);
    if (p && weak && strong) {
        CHECKF(fabs(brisk_spec_policy_acceptance(p, 2) - 0.5) < 0.05, "weak acceptance %.3f", brisk_spec_policy_acceptance(p, 2));
        CHECKF(brisk_spec_policy_acceptance(p, 20) > 0.9, "strong acceptance %.3f", brisk_spec_policy_acceptance(p, 20));
        propose(weak, strong);
        brisk_spec_seq *qs[2] = {weak, strong};
        int32_t k[2] = {-1, -1};
        const int32_t total = brisk_spec_plan(p, qs, 2, 2, 2, room, k);
        CHECKF(k[0] == want_weak && k[1] == want_strong && total == want_weak + want_strong,
               "%s: drafts weak %d strong %d (total %d), want %d and %d", what, k[0], k[1], total, want_weak, want_strong);
        printf("%s: weak %d, strong %d\n", what, k[0], k[1]);
    }
    brisk_spec_seq_free(weak);
    brisk_spec_seq_free(strong);
    brisk_spec_policy_free(p);
}

int main(void) {
    plan_case("room 4, flat cost", cost_flat, 4, 0, 4);
    plan_case("room 16, flat cost", cost_flat, 16, 8, 8);
    plan_case("room 16, cost per token", cost_linear, 16, 0, 0);
    /* past the step at 3 drafts the cost is flat: 8 strong (worth 6.4) and 8 weak (1.0) pay for it */
    plan_case("room 16, a step after 3 drafts", cost_step, 16, 8, 8);
    /* room 4: one draft past the step (worth 0.81) does not pay for it (5.52 tokens / 12.5 ms < 4.71 / 10 ms) */
    plan_case("room 4, a step after 3 drafts", cost_step, 4, 0, 3);
    return test_finish();
}
