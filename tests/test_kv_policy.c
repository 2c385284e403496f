/* test_kv_policy: KV retention policies (src/kv/policy*.c) and compaction
 * (brisk_kv_compact; docs/KV.md).
 *   - parsing: --kv-budget's slots / fraction forms and their refusals; policy names;
 *   - compaction on a bare cache, every storage type: each kept slot's K and V
 *     rows (read back through brisk_kv_row_get, kv.c's independent row path)
 *     and its token and position are those of its source slot, the dropped
 *     slots' blocks return to the pool, a block shared with another sequence is
 *     copied rather than written (the other sequence is unchanged), indexed
 *     blocks leave the index, and the pool's invariants hold (brisk_kv_check);
 *   - engine, models/pycode-target-f16.gguf, streaming and random, F16 / Q8_0 /
 *     Q4_0 caches: the budget is never exceeded (after every decode, and the
 *     pool's high-water mark with the pool sized to the budget), the sinks and
 *     the window are always kept; the logits after each eviction are bitwise
 *     those of a policy-free context into which the same live rows were copied
 *     (an uncompacted cache holding the same slots); batch invariance: seq 0
 *     alone (1 thread) and batched with another sequence that evicts on its own
 *     schedule (2 threads) give the same bits, and so does a prefill chunked
 *     7 tokens at a time before the same policy schedule; a batch too large for
 *     the budget is refused with a message;
 *   - the same for the scored policies h2o, snapkv and tova, and their attention
 *     statistics: each observed query's softmax probabilities sum to 1 per head
 *     and layer, so after n tokens the mass sums to (observed queries) x n_layer
 *     x n_head (h2o: all n, snapkv: the window, tova: 1) to the fixed point's
 *     rounding; the mass is the same bits fed in one batch, in chunks of 7, or
 *     batched with another sequence; a fork copies it, eviction carries it with
 *     the kept slots;
 *   - snapkv and h2o against their definitions: at every eviction the kept
 *     candidates' score, computed here from the slots' mass before the batch
 *     (snapkv: the window's mass max-pooled over 7 neighbouring slots; h2o:
 *     the mass over the queries that saw the slot, beyond its recent half),
 *     is at least every dropped candidate's;
 *   - the oracle (F16): its recording, sealed, is exactly (integer sums) what h2o's
 *     mass says the queries after each position give each slot (h2o's sum
 *     over all N queries minus its sum over the first P); each eviction of the
 *     replay keeps candidates that score at least as high as every dropped
 *     one by that difference, within the budget, sinks and window kept; the
 *     replay's logits are the same bits alone (1 thread) and with the
 *     recording chunked by 7 and both passes batched beside another
 *     sequence's (2 threads); the refusals (no recording, another policy, a
 *     table past its limit);
 *   - memdecay (with the engine tests above too): the last position that
 *     attended each slot is the same bits in one batch and in chunks of 7
 *     batched with another sequence, lies between the slot's position and the
 *     newest query, is copied by a fork, and follows the kept slots; each
 *     eviction keeps candidates whose decayed priority (by role: user slots
 *     decay at half the rate) is at least every dropped one's;
 *   - per-head selection (kv_per_head): brisk_kv_compact_heads on a bare cache
 *     (every storage type: each head's kept rows are its sources', a fork is
 *     unchanged, blocks return, equal lists give brisk_kv_compact's bytes);
 *     h2o, snapkv, tova and memdecay on the engine: budget, sinks and window
 *     per head, heads that choose differently, logits bitwise those of a
 *     policy-free cache holding each head's kept rows, prefix reuse only
 *     where every head holds the position, no state file while heads differ;
 *     the per-head mass summed over heads is the shared mass bit for bit;
 *     batch invariance as above; the refusals. */
#include "brisk.h"
#include "base/json_lex.h"
#include "engine/engine_impl.h"
#include "kv/kv.h"
#include "kv/policy.h"
#include "test.h"

#include <math.h>
#include <stdint.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float frand(void) { return (float)(urand() >> 8) / 16777216.0f * 2.0f - 1.0f; }

static void test_parse(void) {
    brisk_error err = {0};
    int32_t v = 0;
    CHECK(brisk_kv_budget_parse("512", 2048, &v, &err) == BRISK_OK && v == 512);
    CHECK(brisk_kv_budget_parse("1", 2048, &v, &err) == BRISK_OK && v == 1);
    CHECK(brisk_kv_budget_parse("2048", 2048, &v, &err) == BRISK_OK && v == 2048);
    CHECK(brisk_kv_budget_parse("0.25", 2048, &v, &err) == BRISK_OK && v == 512);
    CHECK(brisk_kv_budget_parse(".5", 2048, &v, &err) == BRISK_OK && v == 1024);
    CHECK(brisk_kv_budget_parse("0.0001", 100, &v, &err) == BRISK_OK && v == 1);
    static const struct { const char *in, *msg; } bad[] = {
        {"0", "at least 1"},          {"2049", "exceed the context"}, {"1.0", "strictly between"}, {"0.0", "strictly between"},
        {"1.5", "strictly between"},  {"-3", "neither"},              {"abc", "neither"},          {"0.5x", "neither"},
        {"5e-1", "neither"},          {"", "empty"},                  {"1.", "neither"},           {"0..5", "neither"},
        {"99999999999", "too many"},  {" 12", "neither"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        const brisk_status st = brisk_kv_budget_parse(bad[i].in, 2048, &v, &err);
        CHECKF(st == BRISK_ERR_INVALID_ARG && strstr(err.msg, bad[i].msg), "'%s': %d %s", bad[i].in, st, err.msg);
    }
    CHECK(brisk_kv_policy_parse("streaming") == BRISK_KV_POLICY_STREAMING && brisk_kv_policy_parse("RANDOM") == BRISK_KV_POLICY_RANDOM);
    CHECK(brisk_kv_policy_parse("none") == BRISK_KV_POLICY_NONE && brisk_kv_policy_parse("h3o") == -1 && brisk_kv_policy_parse(NULL) == -1);
    CHECK(brisk_kv_policy_parse("H2O") == BRISK_KV_POLICY_H2O && brisk_kv_policy_parse("snapkv") == BRISK_KV_POLICY_SNAPKV &&
          brisk_kv_policy_parse("tova") == BRISK_KV_POLICY_TOVA && brisk_kv_policy_parse("Oracle") == BRISK_KV_POLICY_ORACLE &&
          brisk_kv_policy_parse("memdecay") == BRISK_KV_POLICY_MEMDECAY);
    for (int k = 0; k < BRISK_KV_N_POLICIES; k++) CHECKF(strstr(brisk_kv_policy_names(), brisk_kv_policy_name(k)), "%d missing from the names", k);
    CHECK(!strcmp(brisk_kv_policy_name(BRISK_KV_POLICY_RANDOM), "random") && !strcmp(brisk_kv_policy_name(9), "?"));
}

/* ---- compaction on a bare cache ------------------------------------------------------------ */

enum { CL = 2, CH = 2, CD = 64, CN = 256 };

static void fill_rows(brisk_kv *kv, int32_t seq, int32_t from, int32_t to, int32_t tok0) {
    float k[CD], v[CD];
    for (int32_t s = from; s < to; s++) {
        for (int32_t il = 0; il < CL; il++)
            for (int32_t h = 0; h < CH; h++) {
                for (int i = 0; i < CD; i++) k[i] = 4.0f * frand(), v[i] = 3.0f * frand();
                brisk_kv_put(kv, il, seq, s, h, k, v);
            }
        brisk_kv_written(kv, seq, s, tok0 + s, s, true);
    }
}

/* make_room refuses a batch before it changes anything: in a batch of two
 * sequences, the first would be cut and the second's pinned slots leave it
 * no room; the refusal names the second and the first keeps every slot
 * (before, the first had been compacted already). Alone, the first is cut. */
static void test_make_room_atomic(void) {
    brisk_kv *kv = NULL;
    brisk_error err = {0};
    if (brisk_kv_init(&kv, CL, CH, CD, CN, CN * 2, 2, BRISK_KV_F16, BRISK_KV_F16, &err) != BRISK_OK) {
        CHECKF(0, "init: %s", err.msg);
        return;
    }
    const brisk_kv_policy_config cfg = {.kind = BRISK_KV_POLICY_STREAMING, .budget = 64, .sink = 4, .window = 8};
    CHECKF(brisk_kv_policy_set(kv, &cfg, &err) == BRISK_OK, "%s", err.msg);
    kv->pin_mask = 1u << BRISK_ROLE_SYSTEM;
    CHECK(brisk_kv_reserve(kv, 0, 64, &err) == BRISK_OK);
    fill_rows(kv, 0, 0, 64, 100);
    brisk_kv_commit(kv, 0);
    kv->seqs[1].role = BRISK_ROLE_SYSTEM;   /* every slot of sequence 1 pinned */
    CHECK(brisk_kv_reserve(kv, 1, 64, &err) == BRISK_OK);
    fill_rows(kv, 1, 0, 64, 500);
    brisk_kv_commit(kv, 1);
    const int32_t both[2] = {0, 1};
    bool changed = true;
    err.msg[0] = 0;
    CHECK(brisk_kv_policy_make_room(kv, both, 2, &changed, &err) == BRISK_ERR_CAPACITY);
    CHECKF(strstr(err.msg, "sequence 1") != NULL, "%s", err.msg);
    CHECK(!changed && brisk_kv_len(kv, 0) == 64 && brisk_kv_len(kv, 1) == 64 && kv->policy->n_runs == 0);
    int bad = 0;
    for (int32_t s = 0; s < 64; s++) bad += brisk_kv_slot_pos(kv, 0, s) != s;
    CHECKF(bad == 0, "%d slots of sequence 0 moved in a refused batch", bad);
    CHECK(brisk_kv_policy_make_room(kv, both, 1, &changed, &err) == BRISK_OK);
    CHECK(changed && brisk_kv_len(kv, 0) < 64);
    CHECKF(brisk_kv_check(kv, &err), "%s", err.msg);
    brisk_kv_free(kv);
}

/* k4/k2 K (KIVI): a channel's 32 slots of a block are one quantized group,
 * so compaction that moves slots is refused, naming the type, and changes
 * nothing; dropping only a tail still works. */
static void test_compact_kivi(brisk_kv_type t) {
    brisk_kv *kv = NULL;
    brisk_error err = {0};
    if (brisk_kv_init(&kv, CL, CH, CD, CN, CN * 2, 2, t, t, &err) != BRISK_OK) {
        CHECKF(0, "init %s: %s", brisk_kv_type_name(t), err.msg);
        return;
    }
    CHECK(brisk_kv_reserve(kv, 0, 70, &err) == BRISK_OK);
    fill_rows(kv, 0, 0, 70, 1000);
    brisk_kv_commit(kv, 0);
    int32_t keep[70], n = 0;
    for (int32_t s = 0; s < 70; s++)
        if (s != 10) keep[n++] = s;
    CHECKF(brisk_kv_compact(kv, 0, keep, n, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, brisk_kv_type_name(t)), "%s: %s",
           brisk_kv_type_name(t), err.msg);
    CHECK(brisk_kv_len(kv, 0) == 70 && brisk_kv_slot_token(kv, 0, 10) == 1010);
    CHECK(brisk_kv_compact(kv, 0, keep, 10, &err) == BRISK_OK && brisk_kv_len(kv, 0) == 10);   /* keep 0..9: a tail */
    CHECKF(brisk_kv_check(kv, &err), "%s: %s", brisk_kv_type_name(t), err.msg);
    brisk_kv_free(kv);
}

static void test_compact_type(brisk_kv_type t) {
    brisk_kv *kv = NULL;
    brisk_error err = {0};
    if (brisk_kv_type_kivi(t)) {
        test_compact_kivi(t);
        return;
    }
    if (brisk_kv_init(&kv, CL, CH, CD, CN, CN * 2, 2, t, t, &err) != BRISK_OK) {
        CHECKF(0, "init %s: %s", brisk_kv_type_name(t), err.msg);
        return;
    }
    const size_t krb = brisk_kv_row_bytes(t, (int64_t)CH * CD), vrb = brisk_kv_row_bytes(t, (int64_t)CH * CD);
    const int32_t n0 = 200;
    CHECK(brisk_kv_reserve(kv, 0, n0, &err) == BRISK_OK);
    fill_rows(kv, 0, 0, n0, 1000);
    brisk_kv_commit(kv, 0);   /* its 6 full blocks join the prefix index */
    CHECK(kv->seqs[0].n_indexed == n0 / BRISK_KV_BLOCK);
    /* sequence 1 shares the first 192 slots (6 full blocks) */
    CHECK(brisk_kv_fork(kv, 0, 1, &err) == BRISK_OK);
    uint8_t *k0 = malloc((size_t)CL * n0 * krb), *v0 = malloc((size_t)CL * n0 * vrb), *kr = malloc(krb), *vr = malloc(vrb);
    for (int32_t s = 0; s < n0; s++)
        for (int32_t il = 0; il < CL; il++)
            brisk_kv_row_get(kv, il, 0, s, k0 + ((size_t)s * CL + (size_t)il) * krb, v0 + ((size_t)s * CL + (size_t)il) * vrb);
    /* keep: 5 sinks, a random half of the middle, the last 20 */
    int32_t keep[CN], n = 0;
    for (int32_t s = 0; s < n0; s++)
        if (s < 5 || s >= n0 - 20 || (urand() & 1)) keep[n++] = s;
    int32_t in_use0 = 0;
    brisk_kv_counts(kv, &in_use0, NULL, NULL);
    CHECKF(brisk_kv_compact(kv, 0, keep, n, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(brisk_kv_check(kv, &err), "%s: %s", brisk_kv_type_name(t), err.msg);
    CHECK(brisk_kv_len(kv, 0) == n && brisk_kv_ordered(kv, 0) == n && brisk_kv_next_pos(kv, 0) == n0);
    int bad = 0;
    for (int32_t d = 0; d < n; d++) {
        bad += brisk_kv_slot_pos(kv, 0, d) != keep[d] || brisk_kv_slot_token(kv, 0, d) != 1000 + keep[d];
        for (int32_t il = 0; il < CL; il++) {
            brisk_kv_row_get(kv, il, 0, d, kr, vr);
            bad += memcmp(kr, k0 + ((size_t)keep[d] * CL + (size_t)il) * krb, krb) != 0;
            bad += memcmp(vr, v0 + ((size_t)keep[d] * CL + (size_t)il) * vrb, vrb) != 0;
        }
    }
    CHECKF(bad == 0, "%s: %d kept rows, tokens or positions differ from their source", brisk_kv_type_name(t), bad);
    /* the forked sequence still reads its own (shared, now copied-from) blocks unchanged */
    bad = 0;
    for (int32_t s = 0; s < brisk_kv_len(kv, 1); s++)
        for (int32_t il = 0; il < CL; il++) {
            brisk_kv_row_get(kv, il, 1, s, kr, vr);
            bad += memcmp(kr, k0 + ((size_t)s * CL + (size_t)il) * krb, krb) != 0 || brisk_kv_slot_pos(kv, 1, s) != s;
        }
    CHECKF(bad == 0, "%s: the fork's rows changed under compaction", brisk_kv_type_name(t));
    /* the first moved slot is keep's first gap: blocks from there on are no longer indexed */
    int32_t first = 0;
    while (keep[first] == first) first++;
    CHECK(kv->seqs[0].n_indexed <= first / BRISK_KV_BLOCK);
    /* seq 1 alone now: the dropped blocks of seq 0 went back (seq 1 holds its 7) */
    brisk_kv_truncate(kv, 1, 0);
    int32_t in_use = 0;
    brisk_kv_counts(kv, &in_use, NULL, NULL);
    CHECKF(in_use == (n + BRISK_KV_BLOCK - 1) / BRISK_KV_BLOCK, "%s: %d blocks in use for %d slots", brisk_kv_type_name(t), in_use, n);
    /* a sync with the original tokens keeps only slots that hold their own
     * position: the compacted ones never pass for a prefix (here the fork's
     * original blocks, cached in the prefix index, are taken instead) */
    int32_t orig[CN];
    for (int32_t s = 0; s < n0; s++) orig[s] = 1000 + s;
    const int32_t synced = brisk_kv_sync_prefix(kv, 0, orig, n0);
    bad = 0;
    for (int32_t s = 0; s < synced; s++) bad += brisk_kv_slot_pos(kv, 0, s) != s || brisk_kv_slot_token(kv, 0, s) != orig[s];
    CHECKF(bad == 0 && synced >= first, "%s: sync kept %d slots, %d not at their position", brisk_kv_type_name(t), synced, bad);
    CHECKF(brisk_kv_check(kv, &err), "%s", err.msg);
    /* without the index's copy: a sequence compacted from slot 5 on syncs back to 5 slots */
    brisk_kv_truncate(kv, 0, 0);
    CHECK(brisk_kv_reserve(kv, 1, 40, &err) == BRISK_OK);
    fill_rows(kv, 1, 0, 40, 5000);   /* other tokens, not committed: nothing in the index matches */
    for (int32_t s = 0; s < 40; s++) orig[s] = 5000 + s;
    int32_t k2[30];
    for (int32_t d = 0; d < 30; d++) k2[d] = d < 5 ? d : d + 10;
    CHECK(brisk_kv_compact(kv, 1, k2, 30, &err) == BRISK_OK);
    CHECK(brisk_kv_sync_prefix(kv, 1, orig, 40) == 5);
    /* refusals change nothing */
    int32_t dec[3] = {5, 3, 7};
    const int32_t len = brisk_kv_len(kv, 1);
    CHECK(brisk_kv_compact(kv, 1, dec, 3, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "increasing") && brisk_kv_len(kv, 1) == len);
    CHECK(brisk_kv_compact(kv, 3, dec, 1, &err) == BRISK_ERR_INVALID_ARG && brisk_kv_len(kv, 1) == len);
    CHECK(brisk_kv_compact(kv, 1, dec, 99, &err) == BRISK_ERR_INVALID_ARG && brisk_kv_len(kv, 1) == len);
    free(k0), free(v0), free(kr), free(vr);
    brisk_kv_free(kv);
}

/* Per-head compaction (brisk_kv_compact_heads) on a bare cache: each (layer,
 * head) keeps its own random slots; each kept slot of each head holds its
 * source's K (dequantized, bitwise) and V row bytes in that head only; the
 * blocks past the kept count return to the pool; a fork sharing the blocks is
 * unchanged; the rewritten blocks never rejoin the prefix index; with every
 * head's list equal it is brisk_kv_compact, byte for byte. */
static void test_compact_heads(brisk_kv_type t) {
    brisk_kv *kv = NULL, *kw = NULL;
    brisk_error err = {0};
    if (brisk_kv_init(&kv, CL, CH, CD, CN, CN * 2, 2, t, t, &err) != BRISK_OK || brisk_kv_init(&kw, CL, CH, CD, CN, CN * 2, 2, t, t, &err)) {
        CHECKF(0, "init %s: %s", brisk_kv_type_name(t), err.msg);
        brisk_kv_free(kv);
        return;
    }
    enum { NH = CL * CH };
    const size_t vrb = kv->v_part / BRISK_KV_BLOCK;
    const int32_t n0 = 150, n = 90;
    const uint64_t seed = rng;
    CHECK(brisk_kv_reserve(kv, 0, n0, &err) == BRISK_OK && brisk_kv_reserve(kw, 0, n0, &err) == BRISK_OK);
    fill_rows(kv, 0, 0, n0, 1000);
    rng = seed;
    fill_rows(kw, 0, 0, n0, 1000);   /* the same rows */
    brisk_kv_commit(kv, 0);
    CHECK(brisk_kv_fork(kv, 0, 1, &err) == BRISK_OK);
    static float k0[NH][150][CD], kr[CD];
    static uint8_t v0[NH][150][64 * 4];
    for (int32_t il = 0; il < CL; il++)
        for (int32_t h = 0; h < CH; h++)
            for (int32_t s = 0; s < n0; s++) {
                brisk_kv_k_get(kv, il, 0, s, h, k0[il * CH + h][s]);
                memcpy(v0[il * CH + h][s], brisk_kv_v_row(kv, il, 0, s, h), vrb);
            }
    /* each head: sinks 0..3, the last 10, and its own random choice of the middle, n in all */
    static int32_t keep[NH * CN];
    for (int32_t h = 0; h < NH; h++) {
        int32_t *k = keep + (size_t)h * CN, m = 0;
        bool take[150] = {0};
        for (int32_t s = 0; s < 4; s++) take[s] = true;
        for (int32_t s = n0 - 10; s < n0; s++) take[s] = true;
        for (int32_t left = n - 14; left > 0;) {
            const int32_t s = 4 + (int32_t)(urand() % (uint32_t)(n0 - 14));
            if (!take[s]) take[s] = true, left--;
        }
        for (int32_t s = 0; s < n0; s++)
            if (take[s]) k[m++] = s;
        CHECK(m == n);
    }
    CHECKF(brisk_kv_compact_heads(kv, 0, keep, CN, n, &err) == BRISK_OK, "%s: %s", brisk_kv_type_name(t), err.msg);
    CHECKF(brisk_kv_check(kv, &err), "%s: %s", brisk_kv_type_name(t), err.msg);
    CHECK(brisk_kv_len(kv, 0) == n && brisk_kv_next_pos(kv, 0) == n0);
    int bad = 0, differ = 0;
    for (int32_t il = 0; il < CL; il++)
        for (int32_t h = 0; h < CH; h++) {
            const int32_t lh = il * CH + h, *k = keep + (size_t)lh * CN;
            for (int32_t d = 0; d < n; d++) {
                brisk_kv_k_get(kv, il, 0, d, h, kr);
                bad += memcmp(kr, k0[lh][k[d]], sizeof kr) != 0;
                bad += memcmp(brisk_kv_v_row(kv, il, 0, d, h), v0[lh][k[d]], vrb) != 0;
                differ += k[d] != keep[d];
            }
        }
    CHECKF(bad == 0 && differ > 0, "%s: %d per-head rows differ from their sources (%d slots differ from head 0's)", brisk_kv_type_name(t), bad,
           differ);
    for (int32_t d = 0; d < n; d++) bad += brisk_kv_slot_pos(kv, 0, d) != keep[d] || brisk_kv_slot_token(kv, 0, d) != 1000 + keep[d];
    CHECKF(bad == 0, "%s: the cache's positions and tokens are not head 0's", brisk_kv_type_name(t));
    for (int32_t il = 0; il < CL; il++)   /* the fork still reads the original rows */
        for (int32_t h = 0; h < CH; h++)
            for (int32_t s = 0; s < n0; s++) {
                brisk_kv_k_get(kv, il, 1, s, h, kr);
                bad += memcmp(kr, k0[il * CH + h][s], sizeof kr) != 0;
            }
    CHECKF(bad == 0, "%s: the fork's rows changed under per-head compaction", brisk_kv_type_name(t));
    int32_t first = n;
    for (int32_t h = 0; h < NH; h++) {
        int32_t f = 0;
        while (keep[(size_t)h * CN + f] == f) f++;
        first = BRISK_MIN(first, f);
    }
    brisk_kv_commit(kv, 0);
    CHECK(kv->seqs[0].n_indexed <= first / BRISK_KV_BLOCK);
    brisk_kv_truncate(kv, 1, 0);
    int32_t in_use = 0;
    brisk_kv_counts(kv, &in_use, NULL, NULL);
    CHECKF(in_use == (n + BRISK_KV_BLOCK - 1) / BRISK_KV_BLOCK, "%s: %d blocks in use for %d slots", brisk_kv_type_name(t), in_use, n);
    /* every head the same list: brisk_kv_compact's bytes */
    for (int32_t h = 1; h < NH; h++) memcpy(keep + (size_t)h * CN, keep, (size_t)n * sizeof *keep);
    brisk_kv *kx = NULL;
    CHECK(brisk_kv_init(&kx, CL, CH, CD, CN, CN * 2, 2, t, t, &err) == BRISK_OK);
    if (kx) {
        rng = seed;
        CHECK(brisk_kv_reserve(kx, 0, n0, &err) == BRISK_OK);
        fill_rows(kx, 0, 0, n0, 1000);
        CHECK(brisk_kv_compact_heads(kw, 0, keep, CN, n, &err) == BRISK_OK && brisk_kv_compact(kx, 0, keep, n, &err) == BRISK_OK);
        const size_t krb = brisk_kv_row_bytes(t, (int64_t)CH * CD);
        uint8_t *ka = malloc(krb), *kb = malloc(krb), *va = malloc(krb), *vb = malloc(krb);
        for (int32_t d = 0; d < n; d++)
            for (int32_t il = 0; il < CL; il++) {
                brisk_kv_row_get(kw, il, 0, d, ka, va);
                brisk_kv_row_get(kx, il, 0, d, kb, vb);
                bad += memcmp(ka, kb, krb) != 0 || memcmp(va, vb, brisk_kv_row_bytes(t, (int64_t)CH * CD)) != 0;
            }
        CHECKF(bad == 0, "%s: equal per-head lists differ from brisk_kv_compact at %d rows", brisk_kv_type_name(t), bad);
        free(ka), free(kb), free(va), free(vb);
        brisk_kv_free(kx);
    }
    /* refusals change nothing */
    keep[(size_t)1 * CN + 5] = keep[(size_t)1 * CN + 4];
    CHECK(brisk_kv_compact_heads(kv, 0, keep, CN, 10, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "head 1") && brisk_kv_len(kv, 0) == n);
    CHECK(brisk_kv_compact_heads(kv, 0, keep, CN, n + 1, &err) == BRISK_ERR_INVALID_ARG && brisk_kv_len(kv, 0) == n);
    brisk_kv_free(kv);
    brisk_kv_free(kw);
}

static void test_policy_config(void) {
    brisk_kv *kv = NULL;
    brisk_error err = {0};
    CHECK(brisk_kv_init(&kv, 1, 1, 32, 128, 128, 1, BRISK_KV_F16, BRISK_KV_F16, &err) == BRISK_OK);
    if (!kv) return;
    static const struct { brisk_kv_policy_config c; const char *msg; } bad[] = {
        {{.kind = 1, .budget = 64, .sink = 4, .window = 0}, "at least 1"},
        {{.kind = 1, .budget = 36, .sink = 4, .window = 32}, "room to spare"},
        {{.kind = 2, .budget = 129, .sink = 4, .window = 32}, "at most the context"},
        {{.kind = 1, .budget = 64, .sink = -1, .window = 8}, "negative"},
        {{.kind = BRISK_KV_N_POLICIES, .budget = 64, .sink = 4, .window = 8}, "unknown"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        CHECKF(brisk_kv_policy_set(kv, &bad[i].c, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, bad[i].msg) && !kv->policy, "%zu: %s", i,
               err.msg);
    }
    const brisk_kv_policy_config ok = {.kind = 1, .budget = 64, .sink = 4, .window = 8};
    CHECK(brisk_kv_policy_set(kv, &ok, &err) == BRISK_OK && kv->policy);
    const brisk_kv_policy_config none = {.kind = 0};
    CHECK(brisk_kv_policy_set(kv, &none, &err) == BRISK_OK && !kv->policy);
    brisk_kv_free(kv);
}

/* ---- with a model ---------------------------------------------------------------------------- */

static brisk_model *model;
static int32_t n_vocab;
enum { NCTX = 512, BUDGET = 100, SINK = 4, WIN = 16, NTOK = 420, UBMAX = 24 };

static bool per_head_mode;   /* contexts made with kv_per_head (the per-head tests) */

static brisk_context *ctx_policy_b(int kind, int type, int n_seq, int threads, int kv_tokens, int budget) {
    brisk_context_params p = brisk_context_default_params();
    p.kv_per_head = per_head_mode && kind;
    p.n_ctx_seq = NCTX;
    p.n_batch = 96;
    p.n_outputs_max = 96;
    p.n_seq = n_seq;
    p.n_threads = threads;
    p.type_k = p.type_v = type;
    p.kv_tokens = kv_tokens;
    p.kv_policy = kind;
    p.kv_budget = budget;
    p.kv_sink = SINK;
    p.kv_window = WIN;
    p.kv_seed = 42;
    brisk_error err = {0};
    brisk_context *c = NULL;
    CHECKF(brisk_context_init(model, &p, &c, &err) == BRISK_OK, "context: %s", err.msg);
    return c;
}

static brisk_context *ctx_policy(int kind, int type, int n_seq, int threads, int kv_tokens) {
    return ctx_policy_b(kind, type, n_seq, threads, kv_tokens, BUDGET);
}

/* One decode of tok[p0, p0 + m) for seq, every token's logits wanted. */
static brisk_status feed(brisk_context *c, int32_t seq, const int32_t *tok, int32_t p0, int32_t m, brisk_error *err) {
    int32_t pos[96], sq[96];
    uint8_t w[96];
    for (int32_t j = 0; j < m; j++) pos[j] = p0 + j, sq[j] = seq, w[j] = 1;
    brisk_batch b = {m, tok + p0, pos, sq, w};
    return brisk_decode(c, &b, err);
}

/* One decode of seq 1's tok1[p1, p1 + m1) then seq 0's tok[p0, p0 + m) (m1 + m <= 64), seq 0's logits
 * copied to out at rows p0 .. p0 + m - 1. */
static brisk_status feed_beside(brisk_context *c, const int32_t *tok1, int32_t p1, int32_t m1, const int32_t *tok, int32_t p0, int32_t m,
                                float *out, brisk_error *err) {
    int32_t bt[64], bp[64], bs[64];
    uint8_t bw[64];
    int32_t n = 0;
    for (int32_t j = 0; j < m1; j++) bt[n] = tok1[p1 + j], bp[n] = p1 + j, bs[n] = 1, bw[n++] = 1;
    for (int32_t j = 0; j < m; j++) bt[n] = tok[p0 + j], bp[n] = p0 + j, bs[n] = 0, bw[n++] = 1;
    brisk_batch bb = {n, bt, bp, bs, bw};
    brisk_status st = brisk_decode(c, &bb, err);
    if (st) return st;
    for (int32_t j = 0; j < m; j++) memcpy(out + (size_t)(p0 + j) * n_vocab, brisk_get_logits(c, m1 + j), (size_t)n_vocab * sizeof(float));
    return BRISK_OK;
}

/* The ubatch schedule: sizes 1..UBMAX from a fixed stream. */
static int32_t schedule(int32_t *sizes) {
    uint64_t s = 0x1234567ull;
    int32_t n = 0, total = 0;
    while (total < NTOK) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const int32_t m = BRISK_MIN((int32_t)(1 + (s >> 33) % UBMAX), NTOK - total);
        sizes[n++] = m;
        total += m;
    }
    return n;
}

static void check_kept(brisk_context *c, int kind, const char *what, int32_t next, int *bad_budget, int *bad_kept) {
    const brisk_kv *kv = c->kv;
    const int32_t len = brisk_kv_len(kv, 0);
    *bad_budget += len > BUDGET;
    for (int32_t s = 0; s < SINK && s < next; s++) *bad_kept += brisk_kv_slot_pos(kv, 0, s) != s;
    for (int32_t i = 1; i <= WIN && i <= next; i++) *bad_kept += brisk_kv_slot_pos(kv, 0, len - i) != next - i;
    for (int32_t s = 1; s < len; s++) *bad_kept += brisk_kv_slot_pos(kv, 0, s) <= brisk_kv_slot_pos(kv, 0, s - 1);
    if (kind == BRISK_KV_POLICY_STREAMING && next > len)   /* sinks, then the newest len - SINK positions */
        for (int32_t s = SINK; s < len; s++) *bad_kept += brisk_kv_slot_pos(kv, 0, s) != next - (len - s);
    (void)what;
}

/* The reference r (a policy-free cache the caller filled with a's kept rows) fed the same m tokens as a
 * was: each of a's logits rows against r's, bit for bit. */
static void compare_ref(brisk_context *a, brisk_context *r, const int32_t *tok, int32_t p0, int32_t m, const char *what, int *bad_bits,
                        int *compared) {
    brisk_error err = {0};
    if (!brisk_kv_check(r->kv, &err)) CHECKF(0, "%s", err.msg);
    CHECKF(feed(r, 0, tok, p0, m, &err) == BRISK_OK, "%s ref: %s", what, err.msg);
    for (int32_t j = 0; j < m; j++) *bad_bits += memcmp(brisk_get_logits(a, j), brisk_get_logits(r, j), (size_t)n_vocab * sizeof(float)) != 0;
    *compared += m;
}

/* Budget, kept slots, and compaction against a policy-free cache holding the same live rows. */
static void test_engine_policy(int kind, int type, const int32_t *tok) {
    const char *what = brisk_kv_policy_name(kind);
    brisk_context *a = ctx_policy(kind, type, 1, 2, BUDGET), *r = ctx_policy(0, type, 1, 2, NCTX);
    if (!a || !r) goto done;
    brisk_kv *ka = a->kv, *kr = r->kv;
    const size_t krb = brisk_kv_row_bytes(ka->k_type, ka->row), vrb = brisk_kv_row_bytes(ka->v_type, ka->row);
    const int32_t nl = ka->n_layer;
    uint8_t *ks = malloc((size_t)BUDGET * nl * krb), *vs = malloc((size_t)BUDGET * nl * vrb);
    int32_t spos[BUDGET], stok[BUDGET], sizes[NTOK];
    const int32_t n_ub = schedule(sizes);
    int bad_budget = 0, bad_kept = 0, bad_bits = 0, compared = 0, evictions = 0, older = 0;
    brisk_error err = {0};
    for (int32_t u = 0, p0 = 0; u < n_ub; p0 += sizes[u++]) {
        const int32_t m = sizes[u], len0 = brisk_kv_len(ka, 0);
        /* the rows before the decode (the policy will cut some of them first) */
        for (int32_t s = 0; s < len0; s++) {
            spos[s] = brisk_kv_slot_pos(ka, 0, s);
            stok[s] = brisk_kv_slot_token(ka, 0, s);
            for (int32_t il = 0; il < nl; il++)
                brisk_kv_row_get(ka, il, 0, s, ks + ((size_t)s * nl + il) * krb, vs + ((size_t)s * nl + il) * vrb);
        }
        CHECKF(feed(a, 0, tok, p0, m, &err) == BRISK_OK, "%s: %s", what, err.msg);
        const int32_t len = brisk_kv_len(ka, 0), kept = len - m;
        check_kept(a, kind, what, p0 + m, &bad_budget, &bad_kept);
        if (kept < len0) evictions++;
        /* slots kept past the sinks that streaming would have dropped: a scored policy's own choice */
        for (int32_t s = SINK; s < len; s++) older += brisk_kv_slot_pos(ka, 0, s) < p0 + m - (len - SINK);
        /* the reference: the same kept rows copied, by position, into a policy-free cache */
        if (kept < len0 || u % 5 == 0) {
            brisk_seq_truncate(r, 0, 0, &err);
            CHECK(brisk_kv_reserve(kr, 0, kept, &err) == BRISK_OK);
            for (int32_t d = 0, s = 0; d < kept; d++) {
                const int32_t want = brisk_kv_slot_pos(ka, 0, d);
                while (s < len0 && spos[s] != want) s++;
                if (s == len0) {
                    bad_bits++;
                    break;
                }
                for (int32_t il = 0; il < nl; il++) brisk_kv_row_set(kr, il, 0, d, ks + ((size_t)s * nl + il) * krb, vs + ((size_t)s * nl + il) * vrb);
                brisk_kv_written(kr, 0, d, stok[s], spos[s], true);
            }
            compare_ref(a, r, tok, p0, m, what, &bad_bits, &compared);
        }
    }
    brisk_cache_stats cs;
    brisk_context_cache_stats(a, &cs);
    if (getenv("BRISK_TEST_VERBOSE"))
        printf("%s %s: %d ubatches, %d evictions, peak %d blocks, %lld dropped, %d tokens compared\n", what, brisk_kv_type_name(type), n_ub,
               evictions, cs.in_use_max, (long long)cs.dropped, compared);
    CHECKF(bad_budget == 0 && cs.in_use_max <= (BUDGET + BRISK_KV_BLOCK - 1) / BRISK_KV_BLOCK, "%s: budget exceeded %d times, peak %d blocks",
           what, bad_budget, cs.in_use_max);
    CHECKF(bad_kept == 0, "%s %s: %d sink/window/order violations", what, brisk_kv_type_name(type), bad_kept);
    CHECKF(evictions > 5 && compared > 100 && cs.dropped == NTOK - brisk_kv_len(ka, 0), "%s: %d evictions, %d compared, %lld dropped", what,
           evictions, compared, (long long)cs.dropped);
    CHECKF(bad_bits == 0, "%s %s: %d of %d tokens' logits differ from a cache holding the same slots", what, brisk_kv_type_name(type),
           bad_bits, compared);
    CHECKF(kind == BRISK_KV_POLICY_STREAMING ? older == 0 : older > 0, "%s: %d older slots kept beside the newest", what, older);
    CHECKF(brisk_kv_check(ka, &err), "%s", err.msg);
    free(ks), free(vs);
done:
    brisk_context_free(a);
    brisk_context_free(r);
}

/* seq 0's logits, its policy running on its own schedule: alone (1 thread), or
 * batched with seq 1 (its own tokens and ubatch sizes, evicting at other
 * times; 2 threads), or with the first 60 tokens (below the budget) fed in
 * chunks of 7. */
static void test_invariance(int kind, int type, const int32_t *tok, const int32_t *tok1) {
    const char *what = brisk_kv_policy_name(kind);
    brisk_context *a = ctx_policy(kind, type, 1, 1, BUDGET), *b = ctx_policy(kind, type, 2, 2, 2 * BUDGET), *c = ctx_policy(kind, type, 1, 2, BUDGET);
    int32_t sizes[NTOK];
    const int32_t n_ub = schedule(sizes);
    float *la = malloc((size_t)NTOK * n_vocab * sizeof(float)), *lb = malloc((size_t)NTOK * n_vocab * sizeof(float)),
          *lc = malloc((size_t)NTOK * n_vocab * sizeof(float));
    brisk_error err = {0};
    if (!a || !b || !c) goto done;
    int32_t p1 = 0;
    for (int32_t u = 0, p0 = 0; u < n_ub; p0 += sizes[u++]) {
        const int32_t m = sizes[u], m1 = BRISK_MIN(UBMAX + 1 - m, NTOK - p1);
        CHECKF(feed(a, 0, tok, p0, m, &err) == BRISK_OK, "%s", err.msg);
        for (int32_t j = 0; j < m; j++) memcpy(la + (size_t)(p0 + j) * n_vocab, brisk_get_logits(a, j), (size_t)n_vocab * sizeof(float));
        CHECKF(feed_beside(b, tok1, p1, m1, tok, p0, m, lb, &err) == BRISK_OK, "%s", err.msg);   /* b: seq 1 beside seq 0 */
        p1 += m1;
        /* c: the first 60 tokens in chunks of 7, then the same schedule */
        if (p0 + m <= 60) {
            if (p0 + m == 60 || (u + 1 < n_ub && p0 + m + sizes[u + 1] > 60)) {
                for (int32_t q = 0; q < p0 + m; q += 7) {
                    const int32_t k = BRISK_MIN(7, p0 + m - q);
                    CHECKF(feed(c, 0, tok, q, k, &err) == BRISK_OK, "%s", err.msg);
                    for (int32_t j = 0; j < k; j++) memcpy(lc + (size_t)(q + j) * n_vocab, brisk_get_logits(c, j), (size_t)n_vocab * sizeof(float));
                }
            }
        } else {
            CHECKF(feed(c, 0, tok, p0, m, &err) == BRISK_OK, "%s", err.msg);
            for (int32_t j = 0; j < m; j++) memcpy(lc + (size_t)(p0 + j) * n_vocab, brisk_get_logits(c, j), (size_t)n_vocab * sizeof(float));
        }
    }
    brisk_cache_stats sa, sb;
    brisk_context_cache_stats(a, &sa);
    brisk_context_cache_stats(b, &sb);
    CHECKF(sa.dropped > 0 && sb.dropped > sa.dropped, "%s: dropped %lld alone, %lld batched", what, (long long)sa.dropped, (long long)sb.dropped);
    int bad_b = 0, bad_c = 0;
    for (int32_t p = 0; p < NTOK; p++) {
        bad_b += memcmp(la + (size_t)p * n_vocab, lb + (size_t)p * n_vocab, (size_t)n_vocab * sizeof(float)) != 0;
        bad_c += memcmp(la + (size_t)p * n_vocab, lc + (size_t)p * n_vocab, (size_t)n_vocab * sizeof(float)) != 0;
    }
    CHECKF(bad_b == 0, "%s %s: %d of %d positions differ alone vs batched with another sequence", what, brisk_kv_type_name(type), bad_b, NTOK);
    CHECKF(bad_c == 0, "%s %s: %d of %d positions differ with the prefill chunked by 7", what, brisk_kv_type_name(type), bad_c, NTOK);
    /* a batch bigger than the budget leaves room for is refused, naming the way out */
    int32_t big[BUDGET];
    for (int i = 0; i < BUDGET; i++) big[i] = tok[i];
    brisk_seq_truncate(a, 0, 0, &err);
    CHECKF(feed(a, 0, big, 0, BUDGET - SINK - WIN + 1, &err) == BRISK_ERR_CAPACITY && strstr(err.msg, "feed it in batches of at most 80"),
           "%s", err.msg);
done:
    free(la), free(lb), free(lc);
    brisk_context_free(a);
    brisk_context_free(b);
    brisk_context_free(c);
}

/* The scored policies' attention mass (policy.h) against what softmax
 * guarantees, and its invariance to batching. */
static void test_mass(int kind, const int32_t *tok, const int32_t *tok1) {
    const char *what = brisk_kv_policy_name(kind);
    brisk_model_info info;
    brisk_model_get_info(model, &info);
    const int32_t n = 70;   /* below the budget: nothing evicted yet */
    brisk_context *a = ctx_policy(kind, BRISK_KV_F16, 2, 2, 2 * BUDGET), *c = ctx_policy(kind, BRISK_KV_F16, 2, 1, 2 * BUDGET);
    brisk_error err = {0};
    if (!a || !c) goto done;
    /* a: seq 0 in one batch; c: seq 0 in chunks of 7, each batched with 3 tokens of seq 1 */
    CHECKF(feed(a, 0, tok, 0, n, &err) == BRISK_OK, "%s", err.msg);
    for (int32_t q = 0; q < n; q += 7) {
        int32_t bt[10], bp[10], bs[10];
        uint8_t bw[10];
        int32_t m = 0;
        for (int32_t j = 0; j < 3; j++) bt[m] = tok1[q / 7 * 3 + j], bp[m] = q / 7 * 3 + j, bs[m] = 1, bw[m++] = 1;
        for (int32_t j = 0; j < 7 && q + j < n; j++) bt[m] = tok[q + j], bp[m] = q + j, bs[m] = 0, bw[m++] = 1;
        brisk_batch bb = {m, bt, bp, bs, bw};
        CHECKF(brisk_decode(c, &bb, &err) == BRISK_OK, "%s", err.msg);
    }
    const brisk_kv_policy *pa = a->kv->policy, *pc = c->kv->policy;
    int64_t total = 0;
    int differ = 0;
    for (int32_t s = 0; s < n; s++) {
        total += brisk_kv_policy_slot_mass(pa, 0, s);
        differ += brisk_kv_policy_slot_mass(pa, 0, s) != brisk_kv_policy_slot_mass(pc, 0, s);
    }
    const int32_t observed = kind == BRISK_KV_POLICY_H2O || kind == BRISK_KV_POLICY_MEMDECAY ? n : kind == BRISK_KV_POLICY_SNAPKV ? WIN : 1;
    const double want = (double)observed * info.n_layer * info.n_head * BRISK_KV_MASS_ONE;
    /* each add rounds to the nearest unit: at most half a unit per (query, layer, KV-head group, slot) */
    const double slack = (double)observed * info.n_layer * info.n_head * n;
    CHECKF(fabs((double)total - want) <= slack, "%s: mass %.1f, want %.1f +- %.0f (%d queries x %d layers x %d heads)", what, (double)total, want,
           slack, observed, info.n_layer, info.n_head);
    CHECKF(differ == 0, "%s: %d of %d slots' mass differs between one batch and chunks of 7 batched with another sequence", what, differ, n);
    /* a fork copies the statistics */
    CHECK(brisk_seq_fork(a, 0, 1, &err) == BRISK_OK);
    differ = 0;
    for (int32_t s = 0; s < n; s++) differ += brisk_kv_policy_slot_mass(pa, 0, s) != brisk_kv_policy_slot_mass(pa, 1, s);
    CHECKF(differ == 0, "%s: a fork's mass differs at %d slots", what, differ);
done:
    brisk_context_free(a);
    brisk_context_free(c);
}

/* ---- per-head selection (--kv-per-head) ---------------------------------------------------- */

/* After every decode each head holds at most the budget, its sinks and its
 * window, in increasing positions; the heads choose differently; and the
 * logits are bitwise those of a policy-free cache into which each head's
 * kept rows were copied by that head's positions (F16: the row API's
 * float round trip is exact). */
static void test_engine_per_head(int kind, const int32_t *tok) {
    const char *what = brisk_kv_policy_name(kind);
    per_head_mode = true;
    brisk_context *a = ctx_policy(kind, BRISK_KV_F16, 1, 2, BUDGET), *r = ctx_policy(0, BRISK_KV_F16, 1, 2, NCTX);
    per_head_mode = false;
    float *ks = NULL;
    uint8_t *vs = NULL;
    int32_t *hp = NULL;
    if (!a || !r) goto done;
    brisk_kv *ka = a->kv, *kr = r->kv;
    const int32_t nl = ka->n_layer, nkv = ka->n_head, nh = nl * nkv, hd = ka->head_dim;
    const size_t vrb = ka->v_part / BRISK_KV_BLOCK;
    ks = malloc((size_t)BUDGET * nh * hd * sizeof *ks);
    vs = malloc((size_t)BUDGET * nh * vrb);
    hp = malloc((size_t)BUDGET * nh * sizeof *hp);
    int32_t stok[BUDGET], sizes[NTOK];
    const int32_t n_ub = schedule(sizes);
    int bad_budget = 0, bad_kept = 0, bad_bits = 0, compared = 0, evictions = 0, heads_differ = 0;
    brisk_error err = {0};
    for (int32_t u = 0, p0 = 0; u < n_ub; p0 += sizes[u++]) {
        const int32_t m = sizes[u], len0 = brisk_kv_len(ka, 0);
        for (int32_t s = 0; s < len0; s++) {
            stok[s] = brisk_kv_slot_token(ka, 0, s);
            for (int32_t il = 0; il < nl; il++)
                for (int32_t h = 0; h < nkv; h++) {
                    const size_t at = (size_t)s * nh + (size_t)(il * nkv + h);
                    brisk_kv_k_get(ka, il, 0, s, h, ks + at * hd);
                    memcpy(vs + at * vrb, brisk_kv_v_row(ka, il, 0, s, h), vrb);
                    hp[at] = brisk_kv_policy_head_pos(ka, 0, il * nkv + h, s);
                }
        }
        CHECKF(feed(a, 0, tok, p0, m, &err) == BRISK_OK, "%s: %s", what, err.msg);
        const int32_t len = brisk_kv_len(ka, 0), kept = len - m, next = p0 + m;
        bad_budget += len > BUDGET;
        if (kept < len0) evictions++;
        for (int32_t lh = 0; lh < nh; lh++) {
            for (int32_t s = 0; s < SINK && s < next; s++) bad_kept += brisk_kv_policy_head_pos(ka, 0, lh, s) != s;
            for (int32_t i = 1; i <= WIN && i <= next; i++) bad_kept += brisk_kv_policy_head_pos(ka, 0, lh, len - i) != next - i;
            for (int32_t s = 1; s < len; s++) bad_kept += brisk_kv_policy_head_pos(ka, 0, lh, s) <= brisk_kv_policy_head_pos(ka, 0, lh, s - 1);
            for (int32_t s = 0; lh > 0 && s < len; s++) heads_differ += brisk_kv_policy_head_pos(ka, 0, lh, s) != brisk_kv_slot_pos(ka, 0, s);
        }
        if (kept < len0 || u % 5 == 0) {   /* the reference: each head's kept rows, by its positions */
            brisk_seq_truncate(r, 0, 0, &err);
            CHECK(brisk_kv_reserve(kr, 0, kept, &err) == BRISK_OK);
            for (int32_t lh = 0; lh < nh; lh++)
                for (int32_t d = 0, s = 0; d < kept; d++) {
                    const int32_t want = brisk_kv_policy_head_pos(ka, 0, lh, d);
                    while (s < len0 && hp[(size_t)s * nh + (size_t)lh] != want) s++;
                    if (s == len0) {
                        bad_bits++;
                        break;
                    }
                    const size_t at = (size_t)s * nh + (size_t)lh;
                    brisk_kv_k_set(kr, lh / nkv, 0, d, lh % nkv, ks + at * hd);
                    memcpy(brisk_kv_v_row(kr, lh / nkv, 0, d, lh % nkv), vs + at * vrb, vrb);
                    if (lh == 0) brisk_kv_written(kr, 0, d, stok[s], want, true);
                }
            compare_ref(a, r, tok, p0, m, what, &bad_bits, &compared);
        }
    }
    brisk_cache_stats cs;
    brisk_context_cache_stats(a, &cs);
    CHECKF(bad_budget == 0 && cs.in_use_max <= (BUDGET + BRISK_KV_BLOCK - 1) / BRISK_KV_BLOCK,
           "%s per-head: budget exceeded %d times, peak %d blocks", what, bad_budget, cs.in_use_max);
    CHECKF(bad_kept == 0, "%s per-head: %d sink/window/order violations", what, bad_kept);
    CHECKF(evictions > 5 && compared > 100 && heads_differ > 0, "%s per-head: %d evictions, %d compared, heads differ at %d slots", what, evictions,
           compared, heads_differ);
    CHECKF(bad_bits == 0, "%s per-head: %d of %d tokens' logits differ from a cache holding each head's slots", what, bad_bits, compared);
    CHECKF(brisk_kv_check(ka, &err), "%s", err.msg);
    /* a sync with the original tokens keeps only slots that hold their position in every head (head 0's alone
     * would take the others' compacted slots for a prefix) */
    brisk_context *y = NULL;
    per_head_mode = true;
    if (kind == BRISK_KV_POLICY_H2O || !getenv("BRISK_TEST_QUICK")) y = ctx_policy(kind, BRISK_KV_F16, 2, 2, 2 * NCTX);
    per_head_mode = false;
    if (y) {
        int32_t sizes1[NTOK], over = 0, first = INT32_MAX;
        const int32_t n1 = schedule(sizes1);
        for (int32_t u = 0, q = 0; u < n1; q += sizes1[u++]) CHECKF(feed(y, 0, tok, q, sizes1[u], &err) == BRISK_OK, "%s", err.msg);
        for (int32_t lh = 0; lh < nh; lh++) {
            int32_t f = 0;
            while (f < brisk_kv_len(y->kv, 0) && brisk_kv_policy_head_pos(y->kv, 0, lh, f) == f) f++;
            first = BRISK_MIN(first, f);
        }
        int32_t h0 = 0;   /* head 0's own aligned prefix: where a head-0-only check would stop */
        while (h0 < brisk_kv_len(y->kv, 0) && brisk_kv_slot_pos(y->kv, 0, h0) == h0) h0++;
        const int32_t kept = brisk_kv_sync_prefix(y->kv, 0, tok, NTOK);
        for (int32_t lh = 0; lh < nh; lh++)
            for (int32_t s = 0; s < kept; s++) over += brisk_kv_policy_head_pos(y->kv, 0, lh, s) != s;
        /* h2o's recent half leaves head 0 aligned past another head's first change here: the case the check is for */
        CHECKF(over == 0 && kept == first && (h0 > first || kind != BRISK_KV_POLICY_H2O),
               "%s per-head: sync kept %d slots (%d not at their position in some head; every head aligned up to %d, head 0 up to %d)", what,
               kept, over, first, h0);
        brisk_context_free(y);
    }
    /* a sequence whose heads differ has no state file; one cut back to its aligned slots has */
    if (brisk_kv_policy_heads_differ(ka, 0)) {
        size_t need = 0;
        CHECKF(brisk_seq_state_get(a, 0, NULL, NULL, 0, &need, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, "per-head"), "%s", err.msg);
        CHECK(brisk_seq_truncate(a, 0, 0, &err) == BRISK_OK && !brisk_kv_policy_heads_differ(ka, 0));
        CHECKF(feed(a, 0, tok, 0, 20, &err) == BRISK_OK && brisk_seq_state_get(a, 0, NULL, NULL, 0, &need, &err) == BRISK_ERR_CAPACITY && need > 0,
               "%s", err.msg);
    } else {
        CHECKF(0, "%s per-head: the heads hold the same slots at the end", what);
    }
done:
    free(ks), free(vs), free(hp);
    brisk_context_free(a);
    brisk_context_free(r);
}

/* Per-head mass is the shared mass split by (layer, KV head): the same
 * integer adds land in the head's part, so summed over the heads it is the
 * shared policy's, bit for bit. */
static void test_mass_per_head(int kind, const int32_t *tok) {
    brisk_context *a = ctx_policy(kind, BRISK_KV_F16, 1, 2, BUDGET);
    per_head_mode = true;
    brisk_context *b = ctx_policy(kind, BRISK_KV_F16, 1, 1, BUDGET);
    per_head_mode = false;
    brisk_error err = {0};
    if (!a || !b) goto done;
    const int32_t n = 70;
    CHECKF(feed(a, 0, tok, 0, n, &err) == BRISK_OK && feed(b, 0, tok, 0, n, &err) == BRISK_OK, "%s", err.msg);
    int differ = 0, nonzero_heads = 0;
    for (int32_t s = 0; s < n; s++) differ += brisk_kv_policy_slot_mass(a->kv->policy, 0, s) != brisk_kv_policy_slot_mass(b->kv->policy, 0, s);
    brisk_kv_policy *pb = b->kv->policy;
    for (pb->head = 0; pb->head < pb->n_heads; pb->head++) nonzero_heads += brisk_kv_policy_slot_mass(pb, 0, n - 1) > 0;
    pb->head = -1;
    CHECKF(differ == 0 && nonzero_heads == pb->n_heads, "%s: per-head mass summed differs from the shared mass at %d of %d slots (%d heads)",
           brisk_kv_policy_name(kind), differ, n, nonzero_heads);
done:
    brisk_context_free(a);
    brisk_context_free(b);
}

/* Per-head selection's refusals: other policies, pinning, windowed attention. */
static void test_per_head_refusals(void) {
    brisk_context_params p = brisk_context_default_params();
    p.n_ctx_seq = NCTX;
    p.kv_policy = BRISK_KV_POLICY_STREAMING, p.kv_budget = BUDGET, p.kv_sink = SINK, p.kv_window = WIN, p.kv_per_head = true;
    brisk_context *c = NULL;
    brisk_error err = {0};
    CHECKF(brisk_context_init(model, &p, &c, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "per-head") && !c, "%s", err.msg);
    p.kv_policy = BRISK_KV_POLICY_SNAPKV, p.kv_pin = 1u << BRISK_ROLE_PROMPT;
    CHECKF(brisk_context_init(model, &p, &c, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, "pinned") && !c, "%s", err.msg);
    p.kv_pin = 0, p.attn_window = 64;
    CHECKF(brisk_context_init(model, &p, &c, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, "windowed") && !c, "%s", err.msg);
    p.attn_window = 0, p.kv_policy = 0;
    CHECKF(brisk_context_init(model, &p, &c, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "needs a retention policy") && !c, "%s", err.msg);
}

/* A budget equal to the context: the batch that would take a sequence past
 * -c is made room for first, not refused as past the context. */
static void test_budget_at_context(int kind, const int32_t *tok) {
    brisk_context_params p = brisk_context_default_params();
    p.n_ctx_seq = 128;
    p.n_batch = 16;
    p.n_outputs_max = 16;
    p.kv_policy = kind;
    p.kv_budget = 128;
    p.kv_sink = SINK;
    p.kv_window = WIN;
    p.kv_seed = 42;
    brisk_error err = {0};
    brisk_context *c = NULL;
    CHECKF(brisk_context_init(model, &p, &c, &err) == BRISK_OK, "context: %s", err.msg);
    if (!c) return;
    int bad = 0;
    for (int32_t p0 = 0; p0 < 320 && !bad; p0 += 8) {
        err.msg[0] = 0;
        if (feed(c, 0, tok, p0, 8, &err) != BRISK_OK) {
            CHECKF(0, "%s, budget = -c = 128: the batch at %d was refused: %s", brisk_kv_policy_name(kind), p0, err.msg);
            bad = 1;
        }
        bad += brisk_seq_len(c, 0) > 128;
    }
    CHECKF(!bad, "%s: budget = -c", brisk_kv_policy_name(kind));
    CHECK(brisk_seq_next_pos(c, 0) == (bad ? brisk_seq_next_pos(c, 0) : 320));
    brisk_context_free(c);
}

/* A scored policy's choice against its definition (snapkv: the window's mass
 * max-pooled over 7 slots; h2o: the mean mass, the recent half protected). */
static void test_scored_top(int kind, const int32_t *tok) {
    const char *what = brisk_kv_policy_name(kind);
    brisk_context *c = ctx_policy(kind, BRISK_KV_F16, 1, 2, BUDGET);
    if (!c) return;
    int32_t sizes[NTOK], before[BUDGET];
    int64_t mass[BUDGET];
    const int32_t n_ub = schedule(sizes);
    int evictions = 0, bad_top = 0;
    brisk_error err = {0};
    for (int32_t u = 0, p0 = 0; u < n_ub; p0 += sizes[u++]) {
        const int32_t m = sizes[u], len0 = brisk_seq_len(c, 0);
        for (int32_t s = 0; s < len0; s++) before[s] = brisk_kv_slot_pos(c->kv, 0, s), mass[s] = brisk_kv_policy_slot_mass(c->kv->policy, 0, s);
        CHECKF(feed(c, 0, tok, p0, m, &err) == BRISK_OK, "%s: %s", what, err.msg);
        const int32_t kept = brisk_seq_len(c, 0) - m;
        if (kept == len0) continue;
        evictions++;
        /* h2o protects the recent half of what it keeps beside the sinks (no pins here) */
        const int32_t n_keep = BUDGET - BRISK_MAX(m, BRISK_MIN(BRISK_KV_BLOCK, (BUDGET - SINK - WIN) / 2));
        const int32_t recent = kind == BRISK_KV_POLICY_H2O ? BRISK_MAX(WIN, (n_keep - SINK) / 2) : WIN;
        float min_kept = INFINITY, max_dropped = -INFINITY;
        for (int32_t s = SINK, k = 0; s < len0 - recent; s++) {
            int64_t best = 0;
            for (int32_t t = BRISK_MAX(0, s - 3); t <= s + 3 && t < len0; t++) best = mass[t] > best ? mass[t] : best;
            const float f = kind == BRISK_KV_POLICY_H2O ? (float)((double)mass[s] / (double)(p0 - before[s])) : (float)best;
            while (k < kept && brisk_kv_slot_pos(c->kv, 0, k) < before[s]) k++;
            if (k < kept && brisk_kv_slot_pos(c->kv, 0, k) == before[s]) min_kept = f < min_kept ? f : min_kept;
            else max_dropped = f > max_dropped ? f : max_dropped;
        }
        bad_top += min_kept < max_dropped;
    }
    CHECKF(evictions > 5 && bad_top == 0, "%s: %d of %d evictions dropped a candidate with a higher score", what, bad_top, evictions);
    brisk_context_free(c);
}

/* ---- the oracle ------------------------------------------------------------------------------ */

/* One pass of the schedule for seq 0 of c; logits (optional) of every position kept. */
static void oracle_pass(brisk_context *c, const int32_t *tok, const int32_t *sizes, int32_t n_ub, float *logits, const char *what) {
    brisk_error err = {0};
    for (int32_t u = 0, p0 = 0; u < n_ub; p0 += sizes[u++]) {
        CHECKF(feed(c, 0, tok, p0, sizes[u], &err) == BRISK_OK, "%s: %s", what, err.msg);
        if (logits)
            for (int32_t j = 0; j < sizes[u]; j++) memcpy(logits + (size_t)(p0 + j) * n_vocab, brisk_get_logits(c, j), (size_t)n_vocab * sizeof(float));
    }
}

static void test_oracle(int type, const int32_t *tok, const int32_t *tok1) {
    const char *what = brisk_kv_type_name(type);
    int32_t sizes[NTOK];
    const int32_t n_ub = schedule(sizes);
    /* h2o with a budget of the whole context: never evicts; its mass after P tokens at slot s = position s is the
     * sum over the queries before P, so H_N - H_P is what the queries at P and after give s */
    int64_t *hp = calloc((size_t)(NTOK + 1) * NTOK, sizeof *hp);
    float *la = malloc((size_t)NTOK * n_vocab * sizeof(float)), *lb = malloc((size_t)NTOK * n_vocab * sizeof(float));
    brisk_context *h = ctx_policy_b(BRISK_KV_POLICY_H2O, type, 1, 2, NCTX, NCTX), *o = ctx_policy(BRISK_KV_POLICY_ORACLE, type, 1, 1, NCTX);
    brisk_context *b = ctx_policy(BRISK_KV_POLICY_ORACLE, type, 2, 2, 2 * NCTX);
    brisk_error err = {0};
    if (!hp || !la || !lb || !h || !o || !b) goto done;
    for (int32_t u = 0, p0 = 0; u <= n_ub; p0 += sizes[u++]) {
        for (int32_t s = 0; s < p0; s++) hp[(size_t)p0 * NTOK + (size_t)s] = brisk_kv_policy_slot_mass(h->kv->policy, 0, s);
        if (u == n_ub) break;
        CHECKF(feed(h, 0, tok, p0, sizes[u], &err) == BRISK_OK, "h2o: %s", err.msg);
    }
    CHECK(brisk_seq_len(h, 0) == NTOK);
    const int64_t *hn = hp + (size_t)NTOK * NTOK;
    /* the recording, sealed: row P = H_N - H_P, exactly */
    CHECKF(brisk_seq_oracle(o, 0, true, &err) == BRISK_OK, "%s", err.msg);
    oracle_pass(o, tok, sizes, n_ub, NULL, "record");
    CHECKF(brisk_seq_len(o, 0) == NTOK, "%s: the recording evicted (%d slots)", what, brisk_seq_len(o, 0));
    CHECKF(brisk_seq_oracle(o, 0, false, &err) == BRISK_OK, "%s", err.msg);
    CHECK(brisk_seq_len(o, 0) == 0);
    int bad_table = 0, rows = 0;
    for (int32_t u = 0, p0 = 0; u < n_ub; p0 += sizes[u++], rows++)
        for (int32_t s = 0; s < NTOK; s++)
            bad_table += brisk_kv_policy_mass_row(o->kv, 0, p0)[s] != hn[s] - (s < p0 ? hp[(size_t)p0 * NTOK + (size_t)s] : 0);
    CHECKF(bad_table == 0, "%s: %d of %d recorded sums differ from h2o's future mass", what, bad_table, rows * NTOK);
    /* the replay: budget, sinks, window, and the top of the future mass kept */
    int bad_budget = 0, bad_kept = 0, bad_top = 0, evictions = 0, older = 0;
    int32_t before[BUDGET];
    for (int32_t u = 0, p0 = 0; u < n_ub; p0 += sizes[u++]) {
        const int32_t m = sizes[u], len0 = brisk_seq_len(o, 0);
        for (int32_t s = 0; s < len0; s++) before[s] = brisk_kv_slot_pos(o->kv, 0, s);
        CHECKF(feed(o, 0, tok, p0, m, &err) == BRISK_OK, "%s replay: %s", what, err.msg);
        for (int32_t j = 0; j < m; j++) memcpy(la + (size_t)(p0 + j) * n_vocab, brisk_get_logits(o, j), (size_t)n_vocab * sizeof(float));
        check_kept(o, BRISK_KV_POLICY_ORACLE, what, p0 + m, &bad_budget, &bad_kept);
        const int32_t len = brisk_seq_len(o, 0), kept = len - m;
        if (kept == len0) continue;
        evictions++;
        /* candidates: neither the first SINK nor the last WIN slots before the batch */
        float min_kept = INFINITY, max_dropped = -INFINITY;
        for (int32_t s = SINK, k = SINK; s < len0 - WIN; s++) {
            const float f = (float)(hn[before[s]] - hp[(size_t)p0 * NTOK + (size_t)before[s]]);
            while (k < kept && brisk_kv_slot_pos(o->kv, 0, k) < before[s]) k++;
            if (k < kept && brisk_kv_slot_pos(o->kv, 0, k) == before[s]) min_kept = f < min_kept ? f : min_kept;
            else max_dropped = f > max_dropped ? f : max_dropped;
        }
        bad_top += min_kept < max_dropped;
        for (int32_t s = SINK; s < len; s++) older += brisk_kv_slot_pos(o->kv, 0, s) < p0 + m - (len - SINK);
    }
    CHECKF(bad_budget == 0 && bad_kept == 0, "%s: budget exceeded %d times, %d sink/window/order violations", what, bad_budget, bad_kept);
    CHECKF(evictions > 5 && bad_top == 0, "%s: %d of %d evictions dropped a candidate the future queries attend to more than a kept one", what,
           bad_top, evictions);
    CHECKF(older > 0, "%s: the oracle kept nothing streaming would have dropped", what);
    /* batch invariance: b records seq 0 in chunks of 7 beside seq 1 (chunks of 5), then replays both on their own schedules */
    CHECKF(brisk_seq_oracle(b, 0, true, &err) == BRISK_OK && brisk_seq_oracle(b, 1, true, &err) == BRISK_OK, "%s", err.msg);
    for (int32_t q = 0, q1 = 0; q < NTOK; q += 7, q1 += 5) {
        int32_t bt[16], bp[16], bs[16];
        uint8_t bw[16];
        int32_t n = 0;
        for (int32_t j = 0; j < 5 && q1 + j < NTOK; j++) bt[n] = tok1[q1 + j], bp[n] = q1 + j, bs[n] = 1, bw[n++] = 0;
        for (int32_t j = 0; j < 7 && q + j < NTOK; j++) bt[n] = tok[q + j], bp[n] = q + j, bs[n] = 0, bw[n++] = 0;
        brisk_batch bb = {n, bt, bp, bs, bw};
        CHECKF(brisk_decode(b, &bb, &err) == BRISK_OK, "%s", err.msg);
    }
    const int32_t n1 = brisk_seq_len(b, 1);   /* seq 1's recording */
    CHECKF(brisk_seq_oracle(b, 0, false, &err) == BRISK_OK && brisk_seq_oracle(b, 1, false, &err) == BRISK_OK, "%s", err.msg);
    int32_t p1 = 0;
    for (int32_t u = 0, p0 = 0; u < n_ub; p0 += sizes[u++]) {
        const int32_t m = sizes[u], m1 = BRISK_MIN(UBMAX + 1 - m, n1 - p1);
        CHECKF(feed_beside(b, tok1, p1, m1, tok, p0, m, lb, &err) == BRISK_OK, "%s", err.msg);
        p1 += m1;
    }
    int bad_b = 0;
    for (int32_t p = 0; p < NTOK; p++) bad_b += memcmp(la + (size_t)p * n_vocab, lb + (size_t)p * n_vocab, (size_t)n_vocab * sizeof(float)) != 0;
    CHECKF(bad_b == 0, "oracle %s: %d of %d positions differ alone vs recorded in chunks of 7 and batched with another sequence", what, bad_b, NTOK);
    /* refusals: an eviction with nothing recorded, a replay without a recording, another policy */
    CHECKF(brisk_seq_oracle(o, 0, false, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "no recording"), "%s", err.msg);
    brisk_kv_policy_reset_seq(o->kv, 0);
    brisk_seq_truncate(o, 0, 0, &err);
    brisk_status st = BRISK_OK;
    for (int32_t p0 = 0; p0 < NTOK && !st; p0 += 20) st = feed(o, 0, tok, p0, 20, &err);
    CHECKF(st == BRISK_ERR_INVALID_ARG && strstr(err.msg, "no recorded pass"), "%d %s", st, err.msg);
    CHECKF(brisk_seq_oracle(h, 0, true, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "oracle"), "%s", err.msg);
done:
    free(hp), free(la), free(lb);
    brisk_context_free(h);
    brisk_context_free(o);
    brisk_context_free(b);
}

/* The oracle's table is bounded: -c 12288 would need 1152 MiB; per-head, 4
 * layers x 8 KV heads at -c 2048, 1024 MiB. */
static void test_oracle_limit(void) {
    brisk_kv *kv = NULL;
    brisk_error err = {0};
    CHECK(brisk_kv_init(&kv, 1, 1, 32, 12288, 128, 1, BRISK_KV_F16, BRISK_KV_F16, &err) == BRISK_OK);
    if (!kv) return;
    const brisk_kv_policy_config c = {.kind = BRISK_KV_POLICY_ORACLE, .budget = 1024, .sink = 4, .window = 32};
    CHECKF(brisk_kv_policy_set(kv, &c, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "1152 MiB") && strstr(err.msg, "limit") && !kv->policy,
           "%s", err.msg);
    CHECK(brisk_kv_policy_oracle_phase(kv, 0, BRISK_KV_ORACLE_RECORD, &err) == BRISK_ERR_INVALID_ARG);
    brisk_kv_free(kv);
    CHECK(brisk_kv_init(&kv, 4, 8, 32, 2048, 128, 1, BRISK_KV_F16, BRISK_KV_F16, &err) == BRISK_OK);
    if (!kv) return;
    const brisk_kv_policy_config h = {.kind = BRISK_KV_POLICY_ORACLE, .budget = 1024, .sink = 4, .window = 32, .per_head = true};
    CHECKF(brisk_kv_policy_set(kv, &h, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "32 heads") && strstr(err.msg, "1024 MiB") && !kv->policy,
           "%s", err.msg);
    brisk_kv_free(kv);
}

/* ---- memdecay ---------------------------------------------------------------------------- */

static const int32_t *seen_of(const brisk_context *c, int32_t seq) { return c->kv->policy->seen + (size_t)seq * (size_t)c->kv->n_ctx; }

static float decayed(const brisk_kv *kv, int32_t seen, int32_t pos, int32_t role, int32_t next) {
    return -(role == BRISK_ROLE_USER ? 0.5f : 1.0f) * (float)(next - (seen > pos ? seen : pos));
}

static void test_memdecay(const int32_t *tok, const int32_t *tok1) {
    const int32_t n = 70;   /* below the budget: nothing evicted yet */
    brisk_context *a = ctx_policy(BRISK_KV_POLICY_MEMDECAY, BRISK_KV_F16, 2, 2, 2 * BUDGET), *c = ctx_policy(BRISK_KV_POLICY_MEMDECAY, BRISK_KV_F16, 2, 1, 2 * BUDGET);
    brisk_context *e = ctx_policy(BRISK_KV_POLICY_MEMDECAY, BRISK_KV_F16, 1, 2, BUDGET);
    brisk_error err = {0};
    if (!a || !c || !e) goto done;
    CHECKF(feed(a, 0, tok, 0, n, &err) == BRISK_OK, "%s", err.msg);
    for (int32_t q = 0; q < n; q += 7) {
        int32_t bt[10], bp[10], bs[10];
        uint8_t bw[10];
        int32_t m = 0;
        for (int32_t j = 0; j < 3; j++) bt[m] = tok1[q / 7 * 3 + j], bp[m] = q / 7 * 3 + j, bs[m] = 1, bw[m++] = 1;
        for (int32_t j = 0; j < 7 && q + j < n; j++) bt[m] = tok[q + j], bp[m] = q + j, bs[m] = 0, bw[m++] = 1;
        brisk_batch bb = {m, bt, bp, bs, bw};
        CHECKF(brisk_decode(c, &bb, &err) == BRISK_OK, "%s", err.msg);
    }
    int differ = 0, out = 0, attended = 0;
    for (int32_t s = 0; s < n; s++) {
        const int32_t v = seen_of(a, 0)[s];
        differ += v != seen_of(c, 0)[s];
        out += v != -1 && (v < s || v > n - 1);
        attended += v >= 0;
    }
    CHECKF(differ == 0, "memdecay: %d of %d slots' last attending position differs between one batch and chunks of 7 batched", differ, n);
    CHECKF(out == 0 && attended > n / 2, "memdecay: %d positions out of range, %d of %d slots attended", out, attended, n);
    CHECK(brisk_seq_fork(a, 0, 1, &err) == BRISK_OK && !memcmp(seen_of(a, 0), seen_of(a, 1), (size_t)n * sizeof(int32_t)));
    /* evictions: user slots (positions 100-179) decay at half the rate; the kept candidates rank at least as high as the dropped */
    int32_t sizes[NTOK], before[BUDGET], bseen[BUDGET], brole[BUDGET];
    const int32_t n_ub = schedule(sizes);
    int evictions = 0, bad_top = 0, bad_follow = 0, user_kept = 0;
    for (int32_t u = 0, p0 = 0; u < n_ub; p0 += sizes[u++]) {
        const int32_t m = sizes[u], len0 = brisk_seq_len(e, 0);
        for (int32_t s = 0; s < len0; s++)
            before[s] = brisk_kv_slot_pos(e->kv, 0, s), bseen[s] = seen_of(e, 0)[s], brole[s] = brisk_kv_slot_role(e->kv, 0, s);
        CHECK(brisk_seq_set_role(e, 0, p0 >= 100 && p0 < 180 ? BRISK_ROLE_USER : BRISK_ROLE_NONE, &err) == BRISK_OK);
        CHECKF(feed(e, 0, tok, p0, m, &err) == BRISK_OK, "memdecay: %s", err.msg);
        const int32_t kept = brisk_seq_len(e, 0) - m;
        if (kept == len0) continue;
        evictions++;
        float min_kept = INFINITY, max_dropped = -INFINITY;
        for (int32_t s = SINK, k = 0; s < len0 - WIN; s++) {
            const float f = decayed(e->kv, bseen[s], before[s], brole[s], p0);
            while (k < kept && brisk_kv_slot_pos(e->kv, 0, k) < before[s]) k++;
            if (k < kept && brisk_kv_slot_pos(e->kv, 0, k) == before[s]) {
                min_kept = f < min_kept ? f : min_kept;
                /* the kept slot's record followed it (or was raised by the batch's queries) */
                bad_follow += seen_of(e, 0)[k] < bseen[s];
                user_kept += brole[s] == BRISK_ROLE_USER && p0 - before[s] > 2 * BUDGET;
            } else
                max_dropped = f > max_dropped ? f : max_dropped;
        }
        bad_top += min_kept < max_dropped;
    }
    CHECKF(evictions > 5 && bad_top == 0 && bad_follow == 0, "memdecay: %d of %d evictions dropped a higher priority, %d records lost", bad_top,
           evictions, bad_follow);
    if (getenv("BRISK_TEST_VERBOSE")) printf("memdecay: %d evictions, %d old user slots kept\n", evictions, user_kept);
done:
    brisk_context_free(a);
    brisk_context_free(c);
    brisk_context_free(e);
}

/* The JSON lexer against hand-labelled tokens: keys (quotes included), values (strings in arrays and after
 * colons, numbers, literals), punctuation, text outside; escapes, nesting, a token spanning roles (its first
 * non-space byte decides), space-only tokens (where they stand). */
static void test_role_lexer(void) {
    enum { T = BRISK_KV_LEX_TEXT, P = BRISK_KV_LEX_PUNCT, V = BRISK_KV_LEX_VALUE, K = BRISK_KV_LEX_KEY };
    static const struct {
        const char *piece;
        uint8_t want;
    } doc[] = {
        {"Say", T}, {" it", T},      {" {", P},       {"\"na", K},   {"me\"", K}, {":", P},   {" \"Bo", V}, {"b\\\"", V}, {"x\"", V},
        {",", P},   {" \"tags\":", K}, {" [", P},       {"\"a\"", V}, {", ", P},    {"{\"", P}, {"k", K},     {"\": ", K},    {"true", V},
        {"}]", P},  {",\n  ", P},    {"\"n\"", K},   {":", P},       {" -1", V},   {".5e3", V}, {" ", P},   {"}", P},      {" done", T},
        {"[", P},   {"null", V},     {",", P},        {"[", P},       {"2", V},     {"]]", P},  {" ok", T},
    };
    uint64_t st = 0;
    int bad = 0;
    for (size_t i = 0; i < sizeof doc / sizeof doc[0]; i++) {
        const uint8_t got = brisk_kv_json_step(&st, doc[i].piece, strlen(doc[i].piece));
        if (got != doc[i].want) {
            bad++;
            printf("lexer: token %zu '%s': role %d, want %d\n", i, doc[i].piece, got, doc[i].want);
        }
    }
    CHECKF(bad == 0, "the JSON lexer mislabelled %d tokens", bad);
    /* unbalanced closers in prose do not underflow, and a deep nest is tracked past its stack (taken as arrays) */
    st = 0;
    CHECK(brisk_kv_json_step(&st, "}} ]", 4) == T && brisk_kv_json_step(&st, "x", 1) == T);
    st = 0;
    for (int d = 0; d < 60; d++) brisk_kv_json_step(&st, "{", 1);
    CHECK(brisk_kv_json_step(&st, "\"q\"", 3) == V);   /* level 60 > 48: an array's string */
    for (int d = 0; d < 60; d++) brisk_kv_json_step(&st, "}", 1);
    CHECK(brisk_kv_json_step(&st, "after", 5) == T);
}

/* The shared JSON lexer (base/json_lex.h) byte by byte in both starts, against hand-labelled classes (T text,
 * P punct, K key, S string value, N scalar): the same bytes are prose's TEXT outside a value but a value's
 * string or scalar from the value start; a value start never returns to TEXT; where a state stands
 * (brisk_json_lex_inside); objects are known for the outer 48 levels, deeper ones are arrays; the depth
 * count saturates at 255. */
static int lex_mismatches(brisk_json_start start, const char *doc, const char *want) {
    static const char letter[BRISK_JSON_N_CLASSES] = {[BRISK_JSON_TEXT] = 'T', [BRISK_JSON_PUNCT] = 'P', [BRISK_JSON_KEY] = 'K',
                                                      [BRISK_JSON_STRING] = 'S', [BRISK_JSON_SCALAR] = 'N'};
    CHECKF(strlen(doc) == strlen(want), "'%s': %zu labels for %zu bytes", doc, strlen(want), strlen(doc));
    uint64_t st = brisk_json_lex_start(start);
    int bad = 0;
    for (size_t i = 0; doc[i] && want[i]; i++) {
        const char got = letter[brisk_json_lex_byte(&st, (uint8_t)doc[i])];
        if (got != want[i]) {
            if (bad++ < 3) printf("json_lex (%s start): '%s' byte %zu '%c': %c, want %c\n", start ? "value" : "prose", doc, i, doc[i], got, want[i]);
        }
    }
    return bad;
}

static void test_json_lex(void) {
    static const struct {
        brisk_json_start start;
        const char *doc, *want;
    } cases[] = {
        {BRISK_JSON_START_VALUE, "{\"k\\\"\": [12, \"v\", true], \"o\": {\"n\": null}} \n",
                                 "PKKKKKPPPNNPPSSSPPNNNNPPPKKKPPPKKKPPNNNNPPPP"},
        {BRISK_JSON_START_VALUE, "\"a,b\" ", "SSSSSP"},
        {BRISK_JSON_START_VALUE, " -1.5e3\t", "PNNNNNNP"},
        {BRISK_JSON_START_VALUE, "[{\"a\":1},\"b\"]", "PPKKKPNPPSSSP"},
        {BRISK_JSON_START_PROSE, "Hi {\"a\": [1]} \"q\" [x] end", "TTTPKKKPPPNPPTTTTTPNPTTTT"},
        {BRISK_JSON_START_PROSE, "a, b: \"c\" }] {", "TTTTTTTTTTTTTP"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) bad += lex_mismatches(cases[i].start, cases[i].doc, cases[i].want);
    CHECKF(bad == 0, "the JSON lexer mislabelled %d bytes", bad);
    /* where a state stands: in a key, in a scalar, back in prose after the value; a value start stays in structure */
    uint64_t st = brisk_json_lex_start(BRISK_JSON_START_PROSE);
    CHECK(st == 0 && brisk_json_lex_inside(st) == BRISK_JSON_TEXT);
    const char *prose = "x {\"ke";
    for (const char *c = prose; *c; c++) brisk_json_lex_byte(&st, (uint8_t)*c);
    CHECK(brisk_json_lex_inside(st) == BRISK_JSON_KEY);
    const char *rest = "y\": 4";
    for (const char *c = rest; *c; c++) brisk_json_lex_byte(&st, (uint8_t)*c);
    CHECK(brisk_json_lex_inside(st) == BRISK_JSON_SCALAR);
    CHECK(brisk_json_lex_byte(&st, '}') == BRISK_JSON_PUNCT && brisk_json_lex_inside(st) == BRISK_JSON_TEXT);
    st = brisk_json_lex_start(BRISK_JSON_START_VALUE);
    CHECK(brisk_json_lex_inside(st) == BRISK_JSON_PUNCT);
    CHECK(brisk_json_lex_byte(&st, '[') == BRISK_JSON_PUNCT && brisk_json_lex_byte(&st, ']') == BRISK_JSON_PUNCT);
    CHECK(brisk_json_lex_inside(st) == BRISK_JSON_PUNCT && brisk_json_lex_byte(&st, 'x') == BRISK_JSON_SCALAR);
    /* level 48 is a known object, level 49 an array: its string is a value; back at 48 the next string is a key again */
    for (int start = BRISK_JSON_START_PROSE; start <= BRISK_JSON_START_VALUE; start++) {
        st = brisk_json_lex_start((brisk_json_start)start);
        for (int d = 0; d < 48; d++) brisk_json_lex_byte(&st, '{');
        CHECK(brisk_json_lex_byte(&st, '"') == BRISK_JSON_KEY);
        brisk_json_lex_byte(&st, '"');
        brisk_json_lex_byte(&st, ':');
        CHECK(brisk_json_lex_byte(&st, '{') == BRISK_JSON_PUNCT && brisk_json_lex_byte(&st, '"') == BRISK_JSON_STRING);
        brisk_json_lex_byte(&st, '"');
        brisk_json_lex_byte(&st, '}');
        CHECK(brisk_json_lex_byte(&st, ',') == BRISK_JSON_PUNCT && brisk_json_lex_byte(&st, '"') == BRISK_JSON_KEY);
    }
    /* 300 openers count as 255: in prose the 255th closer ends the value */
    st = brisk_json_lex_start(BRISK_JSON_START_PROSE);
    for (int d = 0; d < 300; d++) brisk_json_lex_byte(&st, '[');
    for (int d = 0; d < 255; d++) CHECK(brisk_json_lex_byte(&st, ']') == BRISK_JSON_PUNCT);
    CHECK(brisk_json_lex_byte(&st, ']') == BRISK_JSON_TEXT);
}

/* role in the engine: each slot's role is the lexer's over the token pieces in order (the state threaded
 * across ubatches), it moves with compaction (a kept slot keeps its token's role), and truncating then feeding
 * again gives the same roles as feeding straight. */
static void test_role_engine(void) {
    const char *json = "Data: {\"name\": \"brisk\", \"tags\": [\"fast\", \"c\"], \"size\": 42, \"ok\": true} and ";
    brisk_error err = {0};
    int32_t *ids = NULL;
    size_t n_one = 0;
    CHECKF(brisk_tokenize_text(model, json, strlen(json), false, false, &ids, &n_one, &err) == BRISK_OK, "%s", err.msg);
    enum { N = 400 };
    int32_t tok[N];
    uint8_t want[N];
    for (int i = 0; i < N && n_one; i++) tok[i] = ids[(size_t)i % n_one];
    free(ids);
    uint64_t st = 0;
    for (int i = 0; i < N; i++) {
        char buf[256];
        size_t n = 0;
        CHECK(brisk_token_to_piece(model->vocab, tok[i], buf, sizeof buf, &n, &err) == BRISK_OK);
        want[i] = brisk_kv_json_step(&st, buf, n);
    }
    int counts[BRISK_KV_N_LEX] = {0};
    for (int i = 0; i < N; i++) counts[want[i]]++;
    CHECKF(counts[BRISK_KV_LEX_KEY] > 20 && counts[BRISK_KV_LEX_VALUE] > 20 && counts[BRISK_KV_LEX_PUNCT] > 20 && counts[BRISK_KV_LEX_TEXT] > 10,
           "the document's roles: text %d, punct %d, value %d, key %d", counts[0], counts[1], counts[2], counts[3]);
    brisk_context *a = ctx_policy(BRISK_KV_POLICY_ROLE, BRISK_KV_F16, 1, 2, BUDGET), *b = ctx_policy(BRISK_KV_POLICY_ROLE, BRISK_KV_F16, 1, 2, BUDGET);
    if (!a || !b) goto done;
    int bad = 0, checked = 0, evicted = 0;
    for (int32_t p0 = 0; p0 < N;) {
        const int32_t m = BRISK_MIN(1 + p0 % 13, N - p0);
        CHECKF(feed(a, 0, tok, p0, m, &err) == BRISK_OK, "%s", err.msg);
        p0 += m;
        const brisk_kv_policy *p = a->kv->policy;
        for (int32_t s = 0; s < brisk_kv_len(a->kv, 0); s++, checked++) bad += p->lex[s] != want[brisk_kv_slot_pos(a->kv, 0, s)];
        evicted = brisk_kv_len(a->kv, 0) < p0;
    }
    CHECKF(bad == 0 && evicted && checked > 1000, "role: %d of %d slots' roles differ from the lexer's over the pieces (evicted: %d)", bad,
           checked, evicted);
    /* truncate b part way, feed the rest again: the same roles as a straight feed */
    CHECK(feed(b, 0, tok, 0, 50, &err) == BRISK_OK && brisk_seq_truncate(b, 0, 23, &err) == BRISK_OK && feed(b, 0, tok, 23, 40, &err) == BRISK_OK);
    bad = 0;
    for (int32_t s = 0; s < brisk_kv_len(b->kv, 0); s++) bad += b->kv->policy->lex[s] != want[s];
    CHECKF(bad == 0 && brisk_kv_len(b->kv, 0) == 63, "role after a truncation: %d slots differ", bad);
done:
    brisk_context_free(a);
    brisk_context_free(b);
}

int main(void) {
    test_parse();
    test_role_lexer();
    test_json_lex();
    test_policy_config();
    test_oracle_limit();
    test_make_room_atomic();
    for (int t = 0; t < BRISK_KV_N_TYPES; t++) test_compact_type((brisk_kv_type)t);
    for (int t = 0; t < BRISK_KV_N_TYPES; t++)
        if (!brisk_kv_type_kivi(t)) test_compact_heads((brisk_kv_type)t);
    char path[1024];
    test_source("models/pycode-target-f16.gguf", path, sizeof path);
    if (!test_exists(path)) TEST_SKIP("%s absent (make models)", path);
    brisk_error err = {0};
    CHECKF(brisk_model_load(path, &model, &err) == BRISK_OK, "%s", err.msg);
    if (!model) return test_finish();
    brisk_model_info info;
    brisk_model_get_info(model, &info);
    n_vocab = info.n_vocab;
    int32_t tok[NTOK], tok1[NTOK];
    for (int i = 0; i < NTOK; i++) tok[i] = (int32_t)(urand() % (uint32_t)n_vocab), tok1[i] = (int32_t)(urand() % (uint32_t)n_vocab);
    static const int types[] = {BRISK_KV_F16, BRISK_KV_Q8_0, BRISK_KV_Q4_0};
    for (int kind = BRISK_KV_POLICY_H2O; kind <= BRISK_KV_POLICY_TOVA; kind++) test_mass(kind, tok, tok1);
    test_oracle(BRISK_KV_F16, tok, tok1);   /* Q8_0 and Q4_0: test_kv_shift's test_pinned replays the oracle on them */
    test_mass(BRISK_KV_POLICY_MEMDECAY, tok, tok1);
    test_scored_top(BRISK_KV_POLICY_SNAPKV, tok);
    test_scored_top(BRISK_KV_POLICY_H2O, tok);
    test_memdecay(tok, tok1);
    test_role_engine();
    test_per_head_refusals();
    for (int kind = BRISK_KV_POLICY_H2O; kind <= BRISK_KV_POLICY_MEMDECAY; kind++) {
        if (kind == BRISK_KV_POLICY_ORACLE) continue;   /* its replay: cli_kv_policy.sh and docs/KV.md */
        if (kind != BRISK_KV_POLICY_MEMDECAY) test_mass_per_head(kind, tok);
        test_engine_per_head(kind, tok);
        /* alone vs beside another sequence vs chunked, per-head (BRISK_TEST_QUICK, the ASan run: snapkv on F16 only) */
        per_head_mode = true;
        const bool quick = getenv("BRISK_TEST_QUICK") != NULL;
        if (!quick || kind == BRISK_KV_POLICY_SNAPKV) test_invariance(kind, BRISK_KV_F16, tok, tok1);
        if (!quick) test_invariance(kind, BRISK_KV_Q8_0, tok, tok1);
        per_head_mode = false;
    }
    test_budget_at_context(BRISK_KV_POLICY_STREAMING, tok);
    test_budget_at_context(BRISK_KV_POLICY_SNAPKV, tok);
    /* BRISK_TEST_QUICK (the ASan run): every policy on F16, the quantized caches with streaming and h2o
     * only (the policies share the compaction and scoring code that the quantized types reach; the
     * release run keeps the whole matrix) */
    const bool quick = getenv("BRISK_TEST_QUICK") != NULL;
    for (int kind = BRISK_KV_POLICY_STREAMING; kind < BRISK_KV_N_POLICIES; kind++)
        for (size_t t = 0; kind != BRISK_KV_POLICY_ORACLE && t < sizeof types / sizeof types[0]; t++) {   /* the oracle: test_oracle */
            if (quick && t > 0 && kind != BRISK_KV_POLICY_STREAMING && kind != BRISK_KV_POLICY_H2O) continue;
            test_engine_policy(kind, types[t], tok);
            if (types[t] != BRISK_KV_Q4_0) test_invariance(kind, types[t], tok, tok1);
        }
    brisk_model_free(model);
    return test_finish();
}
