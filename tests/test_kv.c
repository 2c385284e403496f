/* The KV block pool (src/kv): reference counts, fork, copy on write of a
 * shared partial block, all-or-nothing batch reservation, the prefix index
 * (exact hits, deduplication of equal blocks), LRU eviction order, and a
 * randomized run of 3,000 operations with the pool's invariants (blocks in
 * use + cached + free = pool size, among others: brisk_kv_check) and every
 * sequence's content checked after each one.
 *
 * No model: a "decode" writes K/V values that are a function of the tokens
 * up to and including the slot (as a transformer's are), so a block shared,
 * cached or copied wrongly shows up as a wrong value. */
#include "test.h"
#include "kv/kv.h"

#include <stdint.h>

#define N_LAYER 2
#define N_HEAD 2
#define HEAD_DIM 4
#define MAX_SEQ 4
#define MAX_CTX 256

static uint64_t mix(uint64_t x) {
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 32);
}

static uint64_t prefix_step(uint64_t ph, int32_t tok) { return mix(ph ^ ((uint64_t)(uint32_t)tok * 0x100000001b3ull + 1)); }
#define PREFIX_SEED 12345u

static uint16_t elem(uint64_t ph, int layer, int head, int e, int is_v) {
    return (uint16_t)mix(ph + (uint64_t)layer * 1000003u + (uint64_t)head * 7919u + (uint64_t)e * 31u + (uint64_t)is_v * 17u);
}

/* what each sequence should hold */
static int32_t shadow[MAX_SEQ][MAX_CTX];
static int32_t shadow_len[MAX_SEQ];

static void reset_shadow(void) { memset(shadow_len, 0, sizeof shadow_len); }

/* Append cnt[j] tokens toks[j] to sequence ids[j] (j < n), interleaved in one
 * batch as a decode would, through one reservation. */
static brisk_status append(brisk_kv *kv, int n, const int32_t *ids, const int32_t *cnt, const int32_t *const *toks, brisk_error *err) {
    int32_t bseq[4 * MAX_CTX], bslot[4 * MAX_CTX], btok[4 * MAX_CTX];
    int nb = 0;
    for (int r = 0;; r++) {
        int any = 0;
        for (int j = 0; j < n; j++)
            if (r < cnt[j]) {
                bseq[nb] = ids[j];
                bslot[nb] = brisk_kv_len(kv, ids[j]) + r;
                btok[nb] = toks[j][r];
                nb++;
                any = 1;
            }
        if (!any) break;
    }
    brisk_status st = brisk_kv_reserve_batch(kv, bseq, bslot, nb, err);
    if (st) return st;
    for (int i = 0; i < nb; i++) {
        const int32_t s = bseq[i], slot = bslot[i];
        shadow[s][slot] = btok[i];
        uint64_t ph = PREFIX_SEED;
        for (int32_t k = 0; k <= slot; k++) ph = prefix_step(ph, shadow[s][k]);
        for (int l = 0; l < N_LAYER; l++)
            for (int h = 0; h < N_HEAD; h++) {
                uint16_t *kd = brisk_kv_k(kv, l, s, slot, h), *vd = brisk_kv_v(kv, l, s, slot, h);
                for (int e = 0; e < HEAD_DIM; e++) {
                    kd[e * BRISK_KV_BLOCK] = elem(ph, l, h, e, 0);
                    vd[e] = elem(ph, l, h, e, 1);
                }
            }
        brisk_kv_written(kv, s, slot, btok[i], slot, true);
    }
    for (int j = 0; j < n; j++) {
        shadow_len[ids[j]] += cnt[j];
        brisk_kv_commit(kv, ids[j]);
    }
    return BRISK_OK;
}

static brisk_status append1(brisk_kv *kv, int32_t s, const int32_t *tok, int32_t n) {
    brisk_error err = {0};
    return append(kv, 1, &s, &n, &tok, &err);
}

/* seq s holds exactly shadow[s][0..shadow_len[s]): tokens, positions, K and V */
static int verify_seq(const brisk_kv *kv, int32_t s) {
    if (brisk_kv_len(kv, s) != shadow_len[s] || brisk_kv_ordered(kv, s) != shadow_len[s]) {
        fprintf(stderr, "seq %d: len %d ordered %d, expected %d\n", s, brisk_kv_len(kv, s), brisk_kv_ordered(kv, s), shadow_len[s]);
        return 0;
    }
    uint64_t ph = PREFIX_SEED;
    for (int32_t i = 0; i < shadow_len[s]; i++) {
        ph = prefix_step(ph, shadow[s][i]);
        if (brisk_kv_slot_token(kv, s, i) != shadow[s][i] || brisk_kv_slot_pos(kv, s, i) != i) {
            fprintf(stderr, "seq %d slot %d: token %d pos %d, expected %d at %d\n", s, i, brisk_kv_slot_token(kv, s, i),
                    brisk_kv_slot_pos(kv, s, i), shadow[s][i], i);
            return 0;
        }
        for (int l = 0; l < N_LAYER; l++)
            for (int h = 0; h < N_HEAD; h++) {
                const uint16_t *kd = brisk_kv_k(kv, l, s, i, h), *vd = brisk_kv_v(kv, l, s, i, h);
                for (int e = 0; e < HEAD_DIM; e++)
                    if (kd[e * BRISK_KV_BLOCK] != elem(ph, l, h, e, 0) || vd[e] != elem(ph, l, h, e, 1)) {
                        fprintf(stderr, "seq %d slot %d layer %d head %d: K/V differ\n", s, i, l, h);
                        return 0;
                    }
            }
    }
    return 1;
}

static int verify_all(const brisk_kv *kv) {
    brisk_error err = {0};
    if (!brisk_kv_check(kv, &err)) {
        fprintf(stderr, "kv check: %s\n", err.msg);
        return 0;
    }
    int32_t u, c, f;
    brisk_kv_counts(kv, &u, &c, &f);
    if (u + c + f != kv->n_blocks || u < 0 || c < 0 || f < 0) return 0;
    for (int32_t s = 0; s < kv->n_seq; s++)
        if (!verify_seq(kv, s)) return 0;
    return 1;
}

static brisk_kv *new_kv(int32_t n_ctx, int32_t n_seq) {
    brisk_kv *kv = NULL;
    brisk_error err = {0};
    CHECKF(brisk_kv_init(&kv, N_LAYER, N_HEAD, HEAD_DIM, n_ctx, n_ctx, n_seq, BRISK_KV_F16, BRISK_KV_F16, &err) == BRISK_OK, "%s", err.msg);
    reset_shadow();
    return kv;
}

static void seq_tokens(int32_t *t, int n, int32_t salt) {
    for (int i = 0; i < n; i++) t[i] = (int32_t)(mix((uint64_t)salt * 1000 + (uint64_t)i) % 50000);
}

static int32_t ref_of(const brisk_kv *kv, int32_t s, int32_t bi) { return kv->blk[kv->seqs[s].blocks[bi]].ref; }

/* sync_prefix with the test's shadow following */
static int32_t sync_to(brisk_kv *kv, int32_t s, const int32_t *tok, int32_t limit) {
    const int32_t kept = brisk_kv_sync_prefix(kv, s, tok, limit);
    memcpy(shadow[s], tok, (size_t)kept * sizeof(int32_t));
    shadow_len[s] = kept;
    return kept;
}

static void truncate_to(brisk_kv *kv, int32_t s, int32_t n) {
    brisk_kv_truncate(kv, s, n);
    if (n < shadow_len[s]) shadow_len[s] = n;
}

static void test_plan(void) {
    size_t bytes = 0;
    CHECK(brisk_kv_plan(N_LAYER, N_HEAD, HEAD_DIM, 100, 100, 3, BRISK_KV_F16, BRISK_KV_F16, &bytes));
    brisk_kv *kv = new_kv(100, 3);
    if (!kv) return;
    CHECK(kv->bytes == bytes);
    CHECK(kv->n_blocks == 4 + 2);   /* ceil(100 / 32) + one partial block per extra sequence */
    /* K and V alone: 6 blocks x 32 slots x 8 elements x 2 bytes x 2 layers, each */
    CHECK(bytes > 2 * (size_t)6 * 32 * 8 * 2 * 2);
    CHECK(!brisk_kv_plan(N_LAYER, N_HEAD, HEAD_DIM, INT32_MAX, INT32_MAX, 4096, BRISK_KV_F16, BRISK_KV_F16, &bytes) ||
          bytes > ((size_t)1 << 40));
    CHECK(!brisk_kv_plan(0, N_HEAD, HEAD_DIM, 100, 100, 1, BRISK_KV_F16, BRISK_KV_F16, &bytes));
    CHECK(!brisk_kv_plan(N_LAYER, N_HEAD, HEAD_DIM, 100, 100, 1, (brisk_kv_type)7, BRISK_KV_F16, &bytes));
    brisk_kv *bad = NULL;
    brisk_error err = {0};
    CHECK(brisk_kv_init(&bad, N_LAYER, N_HEAD, HEAD_DIM, 100, 100, 1, (brisk_kv_type)7, BRISK_KV_F16, &err) == BRISK_ERR_UNSUPPORTED && !bad);
    CHECK(verify_all(kv));
    brisk_kv_free(kv);
    brisk_kv_free(NULL);
}

/* fork shares every block (refs 2), copies nothing; the first write into the
 * shared partial block copies it, the other sequence's rows are untouched;
 * the second writer then owns the original and writes in place */
static void test_fork_cow(void) {
    brisk_kv *kv = new_kv(128, 4);
    if (!kv) return;
    brisk_error err = {0};
    int32_t t[128], u[8], w[8];
    seq_tokens(t, 128, 1);
    seq_tokens(u, 8, 2);
    seq_tokens(w, 8, 3);
    CHECK(append1(kv, 0, t, 40) == BRISK_OK);
    int32_t in_use, cached, fr;
    brisk_kv_counts(kv, &in_use, &cached, &fr);
    CHECK(in_use == 2 && cached == 0 && fr == kv->n_blocks - 2);
    CHECK(kv->seqs[0].n_indexed == 1 && kv->blk[kv->seqs[0].blocks[0]].indexed && !kv->blk[kv->seqs[0].blocks[1]].indexed);
    CHECK(brisk_kv_fork(kv, 0, 1, &err) == BRISK_OK);
    memcpy(shadow[1], shadow[0], sizeof shadow[0]);
    shadow_len[1] = shadow_len[0];
    brisk_kv_counts(kv, &in_use, NULL, NULL);
    CHECK(in_use == 2 && ref_of(kv, 0, 0) == 2 && ref_of(kv, 0, 1) == 2);
    CHECK(kv->seqs[1].blocks[0] == kv->seqs[0].blocks[0] && kv->seqs[1].blocks[1] == kv->seqs[0].blocks[1]);
    CHECK(verify_all(kv));
    const int32_t tail0 = kv->seqs[0].blocks[1];
    CHECK(append1(kv, 1, u, 3) == BRISK_OK);   /* copy on write */
    brisk_kv_counts(kv, &in_use, NULL, NULL);
    CHECK(in_use == 3 && kv->seqs[1].blocks[1] != tail0 && kv->seqs[0].blocks[1] == tail0 && ref_of(kv, 0, 1) == 1);
    CHECK(ref_of(kv, 0, 0) == 2 && kv->seqs[1].blocks[0] == kv->seqs[0].blocks[0]);
    CHECK(verify_all(kv));
    CHECK(append1(kv, 0, w, 5) == BRISK_OK);   /* the original is seq 0's alone now: in place */
    brisk_kv_counts(kv, &in_use, NULL, NULL);
    CHECK(in_use == 3 && kv->seqs[0].blocks[1] == tail0);
    CHECK(verify_all(kv));
    /* a fork of a fork, then the source cleared: the blocks live on in the others */
    CHECK(brisk_kv_fork(kv, 1, 2, &err) == BRISK_OK);
    memcpy(shadow[2], shadow[1], sizeof shadow[1]);
    shadow_len[2] = shadow_len[1];
    truncate_to(kv, 1, 0);
    CHECK(verify_all(kv));
    CHECK(brisk_kv_fork(kv, 2, 2, &err) == BRISK_OK && verify_all(kv));   /* onto itself: nothing */
    /* forking onto a sequence releases what it held */
    CHECK(brisk_kv_fork(kv, 1, 0, &err) == BRISK_OK);
    shadow_len[0] = 0;
    CHECK(verify_all(kv));
    CHECK(brisk_kv_fork(kv, 0, 9, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "out of range"));
    brisk_kv_free(kv);
}

/* truncating into an indexed block and writing again copies the block, so
 * the prefix cache keeps the original; with no block to spare it leaves the
 * index instead */
static void test_cow_indexed(void) {
    brisk_kv *kv = new_kv(96, 2);   /* 3 + 1 = 4 blocks */
    if (!kv) return;
    int32_t a[96], b[96];
    seq_tokens(a, 96, 10);
    memcpy(b, a, sizeof b);
    for (int i = 40; i < 96; i++) b[i] = a[i] + 1;
    CHECK(append1(kv, 0, a, 64) == BRISK_OK);
    CHECK(kv->seqs[0].n_indexed == 2);
    const int32_t blk1 = kv->seqs[0].blocks[1];
    truncate_to(kv, 0, 40);
    CHECK(kv->seqs[0].n_indexed == 1 && kv->blk[blk1].indexed);
    CHECK(append1(kv, 0, b + 40, 24) == BRISK_OK);
    int32_t in_use, cached, fr;
    brisk_kv_counts(kv, &in_use, &cached, &fr);
    CHECK(kv->seqs[0].blocks[1] != blk1 && cached == 1 && in_use == 2);
    CHECK(verify_all(kv));
    /* the original is still a hit for a's prefix */
    CHECK(sync_to(kv, 1, a, 90) == 64);
    CHECK(kv->seqs[1].blocks[1] == blk1 && kv->seqs[1].blocks[0] == kv->seqs[0].blocks[0]);
    CHECK(verify_all(kv));
    CHECK(kv->n_hit_tokens == 64);
    /* own prefix beats a shorter cached one: seq 0 keeps its 64 (b), the index has 64 of b too */
    CHECK(sync_to(kv, 0, b, 95) == 64);
    CHECK(verify_all(kv));
    /* fill the pool, then truncate into an indexed block with nothing to spare */
    CHECK(append1(kv, 1, a + 64, 32) == BRISK_OK);   /* seq 1: 96 = 3 blocks, seq 0: 2 blocks: 5 > 4 */
    brisk_kv_counts(kv, &in_use, &cached, &fr);
    CHECK(in_use == 4 && cached == 0 && fr == 0);
    truncate_to(kv, 1, 70);   /* block 2 of seq 1 (indexed, full) kept in part */
    const int32_t blk2 = kv->seqs[1].blocks[2];
    CHECK(kv->blk[blk2].indexed);
    CHECK(append1(kv, 1, b, 5) == BRISK_OK);
    CHECK(kv->seqs[1].blocks[2] == blk2 && !kv->blk[blk2].indexed);   /* written in place, left the index */
    CHECK(verify_all(kv));
    brisk_kv_free(kv);
}

/* all or nothing: a batch that does not fit changes no sequence and no count */
static void test_all_or_nothing(void) {
    brisk_kv *kv = new_kv(96, 3);   /* 3 + 2 = 5 blocks */
    if (!kv) return;
    brisk_error err = {0};
    int32_t t[96], u[128], v[96];
    seq_tokens(t, 96, 20);
    seq_tokens(u, 128, 21);
    seq_tokens(v, 96, 22);
    CHECK(append1(kv, 0, t, 64) == BRISK_OK);
    CHECK(append1(kv, 1, u, 32) == BRISK_OK);
    int32_t u0, c0, f0;
    brisk_kv_counts(kv, &u0, &c0, &f0);
    CHECK(u0 == 3 && f0 == 2);
    const int32_t ids[3] = {0, 1, 2}, cnt[3] = {32, 64, 1};
    const int32_t *toks[3] = {t + 64, u + 32, v};
    CHECK(append(kv, 3, ids, cnt, toks, &err) == BRISK_ERR_CAPACITY);   /* 1 + 2 + 1 blocks > 2 */
    CHECKF(strstr(err.msg, "KV cache full") && strstr(err.msg, "the batch 4"), "%s", err.msg);
    int32_t u1, c1, f1;
    brisk_kv_counts(kv, &u1, &c1, &f1);
    CHECK(u1 == u0 && c1 == c0 && f1 == f0 && kv->seqs[0].n_blocks == 2 && kv->seqs[1].n_blocks == 1 && kv->seqs[2].n_blocks == 0);
    CHECK(verify_all(kv));
    /* one sequence past n_ctx: refused, nothing changed */
    const int32_t cnt2[2] = {1, 1};
    CHECK(append(kv, 2, ids + 1, cnt2, toks + 1, &err) == BRISK_OK);   /* seq 1 to 33, seq 2 to 1: 2 blocks */
    const int32_t cnt3[2] = {64, 1};   /* seq 1 to 97 > 96 */
    const int32_t *toks3[2] = {u + 33, v + 1};
    CHECK(append(kv, 2, ids + 1, cnt3, toks3, &err) == BRISK_ERR_CAPACITY && strstr(err.msg, "context size 96"));
    CHECK(verify_all(kv));
    /* the forked partial block: two writers each count a copy */
    brisk_kv_free(kv);
    kv = new_kv(96, 3);
    CHECK(append1(kv, 0, t, 40) == BRISK_OK);
    CHECK(brisk_kv_fork(kv, 0, 1, &err) == BRISK_OK);
    memcpy(shadow[1], shadow[0], sizeof shadow[0]);
    shadow_len[1] = shadow_len[0];
    const int32_t both[2] = {0, 1}, one[2] = {1, 1};
    const int32_t *tk[2] = {u, v};
    CHECK(append(kv, 2, both, one, tk, &err) == BRISK_OK);
    brisk_kv_counts(kv, &u1, NULL, NULL);
    CHECK(u1 == 3);   /* the second writer found the original its own and wrote in place */
    CHECK(verify_all(kv));
    brisk_kv_free(kv);
}

/* Eviction: plain free blocks first, then cached ones least recently
 * released first; a hit moves a block to the most recent end; a sequence's
 * blocks are released last first, so its tail goes before its head. */
static void test_lru(void) {
    brisk_kv *kv = new_kv(160, 2);   /* 5 + 1 = 6 blocks */
    if (!kv) return;
    int32_t A[32], B[32], C[32], D[160], E[128], X[64];
    seq_tokens(A, 32, 30);
    seq_tokens(B, 32, 31);
    seq_tokens(C, 32, 32);
    seq_tokens(D, 160, 33);
    seq_tokens(E, 128, 34);
    seq_tokens(X, 64, 35);
    const int32_t *abc[3] = {A, B, C};
    for (int i = 0; i < 3; i++) {
        CHECK(append1(kv, 0, abc[i], 32) == BRISK_OK);
        truncate_to(kv, 0, 0);
    }
    int32_t in_use, cached, fr;
    brisk_kv_counts(kv, &in_use, &cached, &fr);
    CHECK(in_use == 0 && cached == 3 && fr == 3);
    CHECK(verify_all(kv));
    /* touch A: order B, C, A */
    CHECK(sync_to(kv, 1, A, 32) == 32);
    truncate_to(kv, 1, 0);
    CHECK(append1(kv, 0, D, 96) == BRISK_OK);   /* the 3 plain blocks */
    CHECK(kv->n_evicted == 0);
    CHECK(append1(kv, 0, D + 96, 1) == BRISK_OK);   /* evicts B */
    CHECK(kv->n_evicted == 1);
    CHECK(verify_all(kv));
    CHECK(append1(kv, 1, X, 1) == BRISK_OK);   /* evicts C */
    CHECK(kv->n_evicted == 2);
    truncate_to(kv, 1, 0);   /* X's partial block: not indexed, back to plain free */
    CHECK(sync_to(kv, 1, B, 32) == 0 && sync_to(kv, 1, C, 32) == 0 && sync_to(kv, 1, A, 32) == 32);
    truncate_to(kv, 1, 0);
    CHECK(verify_all(kv));
    /* a stale child is never reached: evict a prefix's first block only */
    truncate_to(kv, 0, 0);   /* D's 4 blocks: cached (3 full) + 1 plain; queue: plain..., D2, D1, D0 (and A) */
    brisk_kv_counts(kv, &in_use, &cached, &fr);
    CHECK(in_use == 0 && cached == 4);
    CHECK(append1(kv, 0, E, 128) == BRISK_OK);   /* 2 plain, then evicts A, then D2 */
    CHECK(sync_to(kv, 1, D, 128) == 64);        /* D0, D1 survive */
    truncate_to(kv, 1, 0);
    CHECK(verify_all(kv));
    truncate_to(kv, 0, 0);
    /* queue now: D1, D0, E3, E2, E1, E0 (E released last first) */
    CHECK(append1(kv, 0, X, 64) == BRISK_OK);   /* evicts D1, D0 */
    CHECK(append1(kv, 1, X, 64) == BRISK_OK);   /* evicts E3, E2; deduplicated: seq 1 shares seq 0's X blocks */
    CHECK(kv->seqs[1].blocks[0] == kv->seqs[0].blocks[0] && kv->seqs[1].blocks[1] == kv->seqs[0].blocks[1]);
    CHECK(ref_of(kv, 0, 0) == 2 && ref_of(kv, 1, 1) == 2);
    brisk_kv_counts(kv, &in_use, &cached, &fr);
    CHECK(in_use == 2);
    CHECK(verify_all(kv));
    truncate_to(kv, 1, 0);
    CHECK(append1(kv, 0, X, 64) == BRISK_OK);   /* seq 0 to 128: 2 more blocks */
    CHECK(sync_to(kv, 1, E, 128) == 64);   /* E0, E1 outlived E3, E2 */
    CHECK(sync_to(kv, 1, D, 128) == 0);
    truncate_to(kv, 1, 0);
    CHECK(verify_all(kv));
    brisk_kv_free(kv);
}

/* 3,000 random operations over 4 sequences in a 11-block pool, prompts drawn
 * from 3 templates so prefixes repeat (hits, dedup, eviction, copies all
 * happen); the invariants and every sequence's content after each. */
static void test_random(void) {
    brisk_kv *kv = new_kv(256, 4);   /* 8 + 3 = 11 blocks */
    if (!kv) return;
    enum { N_TPL = 3, OPS = 3000 };
    int32_t tpl[N_TPL][MAX_CTX];
    for (int k = 0; k < N_TPL; k++) seq_tokens(tpl[k], MAX_CTX, 100 + k);
    uint64_t rng = 42;
    int failures = 0, capacity = 0, hits = 0, forks = 0;
    int32_t buf[4][MAX_CTX];
    for (int op = 0; op < OPS && failures == 0; op++) {
        rng = mix(rng + 1);
        const int kind = (int)(rng % 100);
        const int32_t s = (int32_t)((rng >> 8) % 4);
        brisk_error err = {0};
        if (kind < 40) {   /* append to 1-3 sequences in one batch */
            int32_t ids[3], cnt[3];
            const int32_t *toks[3];
            int n = 1 + (int)((rng >> 16) % 3);
            for (int j = 0; j < n; j++) {
                ids[j] = (s + j) % 4;
                uint64_t r = mix(rng + (uint64_t)j);
                cnt[j] = 1 + (int32_t)(r % 40);
                const int k = (int)((r >> 8) % N_TPL);
                for (int32_t i = 0; i < cnt[j]; i++) {
                    const int32_t slot = shadow_len[ids[j]] + i;
                    /* mostly the template's token at that slot, sometimes a divergence */
                    buf[j][i] = slot < MAX_CTX && (mix(r + (uint64_t)i) % 16) ? tpl[k][slot] : (int32_t)(mix(r ^ (uint64_t)i) % 7);
                }
                toks[j] = buf[j];
            }
            int32_t u0, c0, f0, lens[4];
            brisk_kv_counts(kv, &u0, &c0, &f0);
            for (int j = 0; j < 4; j++) lens[j] = brisk_kv_len(kv, j);
            const brisk_status st = append(kv, n, ids, cnt, toks, &err);
            if (st) {
                capacity++;
                int32_t u1, c1, f1;
                brisk_kv_counts(kv, &u1, &c1, &f1);
                if (st != BRISK_ERR_CAPACITY || u1 != u0 || c1 != c0 || f1 != f0) failures++;
                for (int j = 0; j < 4; j++) failures += brisk_kv_len(kv, j) != lens[j];
            }
        } else if (kind < 60) {
            truncate_to(kv, s, (int32_t)((rng >> 20) % (uint64_t)(shadow_len[s] + 1)));
        } else if (kind < 70) {
            const int32_t d = (int32_t)((rng >> 24) % 4);
            if (brisk_kv_fork(kv, s, d, &err) != BRISK_OK) failures++;
            else if (d != s) {
                memcpy(shadow[d], shadow[s], sizeof shadow[s]);
                shadow_len[d] = shadow_len[s];
                forks++;
            }
        } else if (kind < 90) {
            const int k = (int)((rng >> 24) % N_TPL);
            const int32_t lim = (int32_t)((rng >> 32) % (MAX_CTX + 1));
            const int64_t before = kv->n_hit_tokens;
            sync_to(kv, s, tpl[k], lim);
            hits += kv->n_hit_tokens > before;
        } else {
            truncate_to(kv, s, 0);
        }
        if (!verify_all(kv)) {
            fprintf(stderr, "after operation %d (kind %d, seq %d)\n", op, kind, s);
            failures++;
        }
    }
    CHECKF(failures == 0, "%d failures", failures);
    CHECKF(capacity > 0 && hits > 50 && forks > 50 && kv->n_evicted > 50, "capacity %d hits %d forks %d evicted %lld", capacity, hits,
           forks, (long long)kv->n_evicted);
    printf("random: %d ops, %d refused for capacity, %d syncs hit the index, %d forks, %lld evictions\n", OPS, capacity, hits, forks,
           (long long)kv->n_evicted);
    brisk_kv_free(kv);
}

/* brisk_alloc_large (base.h), the pool's K and V arrays: zeroed, writable over
 * its whole size, 2 MiB-aligned from 2 MiB up (where it maps its own pages;
 * under ASan it is calloc), and freed by its size. Whether the kernel gives
 * huge pages is its choice (THP may be off), so that is not asserted. */
static void test_large_alloc(void) {
    const size_t mib2 = (size_t)2 << 20;
    const size_t sizes[] = {0, 1, 4095, 4097, mib2 - 1, mib2, mib2 + 1, 3 * mib2 + 12345};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const size_t n = sizes[i];
        uint8_t *p = brisk_alloc_large(n);
        CHECKF(p != NULL, "brisk_alloc_large(%zu) failed", n);
        if (!p) continue;
#if !defined(__SANITIZE_ADDRESS__)
        if (n >= mib2) CHECKF(((uintptr_t)p & (mib2 - 1)) == 0, "brisk_alloc_large(%zu) = %p: not 2 MiB-aligned", n, (void *)p);
#endif
        size_t nonzero = 0;
        for (size_t j = 0; j < n; j += 997) nonzero += p[j] != 0;
        if (n) nonzero += p[n - 1] != 0;
        CHECKF(nonzero == 0, "brisk_alloc_large(%zu): %zu sampled bytes not zero", n, nonzero);
        memset(p, 0xa5, n);
        CHECK(n == 0 || (p[0] == 0xa5 && p[n - 1] == 0xa5));
        brisk_free_large(p, n);
    }
    brisk_free_large(NULL, 123);   /* like free(NULL) */
}

int main(void) {
    test_large_alloc();
    test_plan();
    test_fork_cow();
    test_cow_indexed();
    test_all_or_nothing();
    test_lru();
    test_random();
    return test_finish();
}
