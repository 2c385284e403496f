/* test_kv_shift: the context shift (src/kv/shift.c, brisk_seq_shift /
 * brisk_seq_context_shift) and pinning (brisk_seq_set_role, kv_pin;
 * docs/KV.md "Generation past the context", "Pinning").
 *   - re-rotation on a bare cache, every storage type, NORMAL and NEOX RoPE,
 *     full and partial rotary, frequency factors and YaRN: K stored at p and
 *     shifted by d against K computed at p + d and stored. Not bitwise: the
 *     shifted K went through the storage type's rounding at p, then is
 *     rotated and rounded again, and cos/sin of p + d are not those of p
 *     composed with d in float. The bound per element is stated per type
 *     (below, with its reason); V, tokens and roles are unchanged bitwise; the
 *     positions move; the rewritten blocks leave the prefix index and never
 *     rejoin it; refusals (positions that would not increase) change nothing;
 *   - engine, models/pycode-target-f16.gguf, after llama.cpp's shift (keep 4,
 *     discard half): layer 0's K against a fresh context fed the kept tokens
 *     at the shifted positions, within the bare bounds (deeper layers' K saw
 *     the discarded tokens: nothing fresh can match them); F32: the next
 *     logits against a reference holding the unshifted rows with K moved the
 *     long way round (RoPE undone at p, applied at q) through the row API,
 *     and positions moved without re-rotation shown to be far off; every
 *     type: a whole-sequence shift keeps the relative positions, so the next
 *     logits equal the unshifted run's up to the type's rounding (bounds in
 *     test_shift_logits, measurements in docs/KV.md);
 *   - batch invariance: seq 0 shifted alone (1 thread) and beside another
 *     sequence that is fed and shifted on its own schedule (2 threads) gives
 *     bitwise the same rows and next logits;
 *   - pinning: for every policy x F16/Q8_0/Q4_0, a schedule of ubatches with
 *     pinned segments: no pinned slot is ever evicted (and the budget holds);
 *     a context shift never discards a pinned slot; pinned slots that leave no
 *     room fail with BRISK_ERR_CAPACITY naming --kv-pin. */
#include "brisk.h"
#include "engine/engine_impl.h"
#include "kv/kv.h"
#include "kv/policy.h"
#include "kv/shift.h"
#include "ops/ops.h"
#include "test.h"

#include <math.h>
#include <stdint.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float frand(void) { return (float)(urand() >> 8) / 16777216.0f * 2.0f - 1.0f; }

/* ---- re-rotation on a bare cache ------------------------------------------------------------- */

enum { BL = 2, BH = 2, BD = 64, BN = 96 };

static const brisk_rope *the_rope(const void *user, int32_t il) {
    const brisk_rope *r = user;
    return il == 1 && r[1].n_rot == 0 ? NULL : &r[il];   /* layer 1 may be a NoPE layer */
}

/* K of (slot, layer, head) at position p: raw[] rotated by r at p. */
static void k_at(const brisk_rope *r, const float *raw, int32_t p, float *k) {
    float cache[BD];
    memcpy(k, raw, BD * sizeof *k);
    if (!r) return;
    brisk_rope_cache(r, p, cache);
    brisk_rope_apply(r, cache, k, 1, BD);
}

/* The bound of |shifted - fresh| per element, from the storage type (amax: the
 * head row's largest |value|): F32 only carries float rounding of the angles
 * (|p| < 2^11, so ~2^11 x 2^-24 relative) and of the rotation: 1e-4 x amax;
 * F16 rounds K twice (at p, then after the rotation) to 11 bits: 2^-10 x amax
 * plus the F32 term; Q8_0 and Q4_0 quantize twice with a step d = amax/127
 * (amax/8 for Q4_0; the block's amax, bounded by the row's): each
 * quantization moves a value by d/2 at most, so the two paths differ by at
 * most d plus the rotation of the first rounding (another d): 2d. */
static float bound(brisk_kv_type t, float amax) {
    switch (t) {
    case BRISK_KV_F32: return 1e-4f * amax;
    case BRISK_KV_F16: return (1.0f / 1024.0f + 1e-4f) * amax;
    case BRISK_KV_Q8_0: return 2.0f * amax / 127.0f + 1e-4f * amax;
    case BRISK_KV_Q4_0: return 2.0f * amax / 8.0f + 1e-4f * amax;
    case BRISK_KV_K4:
    case BRISK_KV_K2: return 0;   /* refused (test_rerotate checks the refusal) */
    }
    return 0;
}

static void test_rerotate(brisk_kv_type t, const brisk_rope *rope, const char *what) {
    brisk_error err = {0};
    brisk_kv *kv = NULL, *ref = NULL;
    CHECKF(brisk_kv_init(&kv, BL, BH, BD, 4096, BN, 2, t, BRISK_KV_F16, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(brisk_kv_init(&ref, BL, BH, BD, 4096, BN, 1, t, BRISK_KV_F16, &err) == BRISK_OK, "%s", err.msg);
    if (!kv || !ref) goto done;
    static float raw[BN][BL][BH][BD], vraw[BN][BL][BH][BD];
    const int32_t n = 80, from = 20, delta = -13 - (int32_t)(urand() % 1500);
    const int32_t p0 = 1600;   /* the first position: large positions are where the angles' rounding shows */
    CHECK(brisk_kv_reserve(kv, 0, n, &err) == BRISK_OK && brisk_kv_reserve(ref, 0, n, &err) == BRISK_OK);
    for (int32_t s = 0; s < n; s++) {
        const int32_t p = s < from ? s : p0 + s, q = s < from ? s : p + delta;   /* slots >= from move by delta */
        for (int il = 0; il < BL; il++)
            for (int h = 0; h < BH; h++) {
                float k[BD];
                for (int i = 0; i < BD; i++) raw[s][il][h][i] = 3.0f * frand(), vraw[s][il][h][i] = frand();
                k_at(the_rope(rope, il), raw[s][il][h], p, k);
                brisk_kv_put(kv, il, 0, s, h, k, vraw[s][il][h]);
                k_at(the_rope(rope, il), raw[s][il][h], q, k);
                brisk_kv_put(ref, il, 0, s, h, k, vraw[s][il][h]);
            }
        brisk_kv_written(kv, 0, s, 1000 + s, p, true);
        brisk_kv_written(ref, 0, s, 1000 + s, q, true);
        kv->role[(size_t)kv->seqs[0].blocks[s / 32] * 32 + (size_t)(s % 32)] = (uint8_t)(s % 3);
    }
    /* a second sequence shares the first block: the shift must copy, not write, what it shares */
    CHECK(brisk_kv_fork(kv, 0, 1, &err) == BRISK_OK);
    brisk_kv_truncate(kv, 1, 32);
    static uint8_t v_before[BN][BL][BH * BD * 2], k1_before[32][BL][BH * BD * 4], vrow[BH * BD * 2], krow[BH * BD * 4];
    for (int32_t s = 0; s < n; s++)
        for (int il = 0; il < BL; il++) brisk_kv_row_get(kv, il, 0, s, krow, v_before[s][il]);
    for (int32_t s = 0; s < 32; s++)
        for (int il = 0; il < BL; il++) brisk_kv_row_get(kv, il, 1, s, k1_before[s][il], vrow);
    /* a refusal changes nothing: slot from would fall to or below slot from - 1's position */
    const int32_t too_far = -(p0 + from);
    err.msg[0] = 0;
    CHECKF(brisk_kv_shift(kv, 0, from, too_far, the_rope, rope, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "must increase"), "%s", err.msg);
    CHECK(brisk_kv_slot_pos(kv, 0, from) == p0 + from);
    CHECKF(brisk_kv_shift(kv, 0, from, delta, the_rope, rope, &err) == BRISK_OK, "%s: %s", what, err.msg);
    int bad = 0, bad_v = 0, bad_meta = 0;
    float worst = 0.0f;
    for (int32_t s = 0; s < n; s++) {
        bad_meta += brisk_kv_slot_pos(kv, 0, s) != brisk_kv_slot_pos(ref, 0, s) || brisk_kv_slot_token(kv, 0, s) != 1000 + s ||
                    brisk_kv_slot_role(kv, 0, s) != s % 3;
        for (int il = 0; il < BL; il++) {
            brisk_kv_row_get(kv, il, 0, s, krow, vrow);
            bad_v += memcmp(vrow, v_before[s][il], sizeof vrow) != 0;
            for (int h = 0; h < BH; h++) {
                float a[BD], b[BD], amax = 0.0f;
                brisk_kv_k_get(kv, il, 0, s, h, a);
                brisk_kv_k_get(ref, il, 0, s, h, b);
                for (int i = 0; i < BD; i++) amax = fmaxf(amax, fabsf(b[i]));
                for (int i = 0; i < BD; i++) {
                    const float d = fabsf(a[i] - b[i]);
                    if (s < from && d != 0.0f) bad++;   /* not moved: bitwise */
                    if (d > bound(t, amax)) bad++;
                    if (amax > 0) worst = fmaxf(worst, d / amax);
                }
            }
        }
    }
    CHECKF(bad == 0 && bad_v == 0 && bad_meta == 0, "%s %s: %d K elements past the bound (worst %.3g of amax), %d V rows changed, %d slots' "
           "position/token/role wrong", what, brisk_kv_type_name(t), bad, (double)worst, bad_v, bad_meta);
    int bad_fork = 0;
    for (int32_t s = 0; s < 32; s++)
        for (int il = 0; il < BL; il++) {
            brisk_kv_row_get(kv, il, 1, s, krow, vrow);
            bad_fork += memcmp(krow, k1_before[s][il], brisk_kv_row_bytes(t, BH * BD)) != 0 ||
                        brisk_kv_slot_pos(kv, 1, s) != (s < from ? s : p0 + s);
        }
    CHECKF(bad_fork == 0, "%s: the fork sharing the first block changed (%d rows)", what, bad_fork);
    CHECKF(brisk_kv_check(kv, &err), "%s", err.msg);
    /* the rotated blocks are never indexed, even once their positions equal their slots again */
    for (int32_t b = from / 32; b < (n + 31) / 32; b++) CHECK(kv->blk[kv->seqs[0].blocks[b]].rotated == 1);
    if (t == BRISK_KV_F16) printf("re-rotation %s: worst |shifted - fresh| = %.3g of the row's amax\n", what, (double)worst);
done:
    brisk_kv_free(kv);
    brisk_kv_free(ref);
}

static void test_rerotate_all(void) {
    static float ff[BD / 2];
    for (int i = 0; i < BD / 2; i++) ff[i] = 1.0f + 0.25f * (float)(i % 5);
    brisk_rope normal = {.layout = BRISK_ROPE_NORMAL, .n_rot = BD, .freq_base = 10000.0f, .freq_scale = 1.0f, .attn_factor = 1.0f};
    brisk_rope r[6][BL];
    const char *names[6] = {"normal", "neox", "neox partial (n_rot 32)", "normal + freq factors", "neox + YaRN (scale 1/4, attn 0.8)",
                            "normal, layer 1 NoPE"};
    for (int c = 0; c < 6; c++) r[c][0] = r[c][1] = normal;
    r[1][0].layout = r[1][1].layout = BRISK_ROPE_NEOX;
    r[2][0].layout = r[2][1].layout = BRISK_ROPE_NEOX;
    r[2][0].n_rot = r[2][1].n_rot = BD / 2;
    r[3][0].freq_factors = r[3][1].freq_factors = ff;
    r[3][1].freq_base = 500000.0f;   /* like a windowed layer's own base */
    for (int l = 0; l < BL; l++) {
        r[4][l].layout = BRISK_ROPE_NEOX;
        r[4][l].freq_scale = 0.25f;
        r[4][l].ext_factor = 1.0f;
        r[4][l].attn_factor = 0.8f;
        brisk_rope_yarn_corr_dims(BD, 512, 10000.0f, 32.0f, 1.0f, r[4][l].corr_dims);
    }
    r[5][1].n_rot = 0;
    for (int t = 0; t < BRISK_KV_N_TYPES; t++)
        if (t != BRISK_KV_K4 && t != BRISK_KV_K2)
            for (int c = 0; c < 6; c++) test_rerotate((brisk_kv_type)t, r[c], names[c]);
    /* a per-channel K cannot be re-rotated slot by slot: refused, naming the type */
    for (int t = BRISK_KV_K4; t <= BRISK_KV_K2; t++) {
        brisk_kv *kv = NULL;
        brisk_error err = {0};
        CHECKF(brisk_kv_init(&kv, BL, BH, BD, 4096, BN, 1, (brisk_kv_type)t, BRISK_KV_F16, &err) == BRISK_OK, "%s", err.msg);
        if (!kv) continue;
        CHECK(brisk_kv_reserve(kv, 0, 40, NULL) == BRISK_OK);
        int32_t np[40];
        for (int i = 0; i < 40; i++) np[i] = i + 7;
        CHECK(brisk_kv_reposition(kv, 0, 0, np, NULL, NULL, &err) == BRISK_ERR_UNSUPPORTED && strstr(err.msg, brisk_kv_type_name(t)));
        brisk_kv_free(kv);
    }
}

/* ---- the engine ------------------------------------------------------------------------------- */

static brisk_model *model;
static int32_t n_vocab;
static bool k_hadamard;   /* make_ctx's contexts store K Hadamard-rotated */
static bool per_head;     /* make_ctx's contexts with a policy select per head (kv_per_head) */
enum { NCTX = 512, NTOK = 300 };

static brisk_context *make_ctx(int type, int n_seq, int threads, int policy, int32_t budget, uint32_t pin) {
    brisk_context_params p = brisk_context_default_params();
    p.n_ctx_seq = NCTX;
    p.n_batch = 64;
    p.n_outputs_max = 64;
    p.n_seq = n_seq;
    p.n_threads = threads;
    p.type_k = p.type_v = type;
    p.kv_policy = policy;
    p.kv_budget = budget;
    p.kv_sink = 4;
    p.kv_window = 16;
    p.kv_seed = 7;
    p.kv_pin = pin;
    p.k_hadamard = k_hadamard;
    p.kv_per_head = per_head && policy;
    brisk_error err = {0};
    brisk_context *c = NULL;
    CHECKF(brisk_context_init(model, &p, &c, &err) == BRISK_OK, "context: %s", err.msg);
    return c;
}

/* tok[0..m) into seq at its next positions, the last token's logits kept. */
static brisk_status feed(brisk_context *c, int32_t seq, const int32_t *tok, int32_t m, brisk_error *err) {
    int32_t pos[64], sq[64];
    uint8_t w[64];
    const int32_t p0 = brisk_seq_next_pos(c, seq);
    for (int32_t j = 0; j < m; j++) pos[j] = p0 + j, sq[j] = seq, w[j] = j == m - 1;
    brisk_batch b = {m, tok, pos, sq, w};
    return brisk_decode(c, &b, err);
}

static brisk_status feed_all(brisk_context *c, int32_t seq, const int32_t *tok, int32_t n, int32_t chunk, brisk_error *err) {
    for (int32_t i = 0; i < n; i += chunk) {
        brisk_status st = feed(c, seq, tok + i, BRISK_MIN(chunk, n - i), err);
        if (st) return st;
    }
    return BRISK_OK;
}

static float max_diff(const float *a, const float *b, int32_t n) {
    float m = 0.0f;
    for (int32_t i = 0; i < n; i++) m = fmaxf(m, fabsf(a[i] - b[i]));
    return m;
}

/* The model's RoPE of layer il in c (what the forward pass rotates K with). */
static const brisk_rope *model_rope(const brisk_context *c, int32_t il) { return brisk_forward_layer_rope(c->fwd, il); }

/* K of a row moved from position p to q the long way round, independently of
 * the shift's delta rotation: undo RoPE at p (the rotation by -p), then apply
 * it at q, with the model's own cos/sin tables (magnitude 1: no YaRN here). */
static void rotate_long_way(const brisk_rope *r, float *k, int32_t n_head, int32_t hd, int32_t p, int32_t q) {
    float cache[256];
    brisk_rope_cache(r, -p, cache);
    brisk_rope_apply(r, cache, k, n_head, hd);
    brisk_rope_cache(r, q, cache);
    brisk_rope_apply(r, cache, k, n_head, hd);
}

/* After llama.cpp's shift (keep 4, discard half):
 *   - layer 0's K, which depends only on the token and its position, against
 *     a fresh context fed the kept tokens at the shifted positions, within the
 *     bare test's bound per type (the deeper layers' K saw the discarded
 *     tokens: no fresh computation can match them, in any engine);
 *   - F32: the next logits against a reference context holding the unshifted
 *     run's rows, each K row moved to its new position the long way round
 *     (above) and copied in through the row API; then positions moved without
 *     re-rotation are far off, so the comparison can tell;
 *   - every type: a shift of the whole sequence leaves every relative
 *     position as it was, so the next logits equal the unshifted ones up to
 *     the storage type's rounding. */
static void test_shift_logits(int type, const int32_t *tok) {
    brisk_error err = {0};
    brisk_context *a = make_ctx(type, 1, 2, 0, 0, 0), *f = make_ctx(type, 1, 2, 0, 0, 0), *u = make_ctx(type, 1, 2, 0, 0, 0);
    float *la = malloc((size_t)n_vocab * sizeof *la), *lf = malloc((size_t)n_vocab * sizeof *lf);
    int32_t kept[NTOK + 1];
    if (!a || !f || !u || !la || !lf) goto done;
    const brisk_kv_type kt = (brisk_kv_type)type;
    const int32_t n_keep = 4, n_discard = (NTOK - n_keep) / 2, x = tok[NTOK];
    CHECKF(feed_all(a, 0, tok, NTOK, 64, &err) == BRISK_OK && feed_all(u, 0, tok, NTOK, 64, &err) == BRISK_OK, "%s", err.msg);
    /* the whole sequence moved by +37 (in w, fed as u): the relative positions, and so the logits, stay */
    brisk_context *w = make_ctx(type, 1, 2, 0, 0, 0);
    float d_all = INFINITY;
    if (w) {
        CHECKF(feed_all(w, 0, tok, NTOK, 64, &err) == BRISK_OK, "%s", err.msg);
        CHECKF(brisk_seq_shift(w, 0, 0, 37, &err) == BRISK_OK && brisk_seq_next_pos(w, 0) == NTOK + 37, "%s", err.msg);
        CHECKF(feed(w, 0, &x, 1, &err) == BRISK_OK && feed(u, 0, &x, 1, &err) == BRISK_OK, "%s", err.msg);
        d_all = max_diff(brisk_get_logits(w, 0), brisk_get_logits(u, 0), n_vocab);
        brisk_context_free(w);
    }
    /* F32: float's rounding of the rotation; the others: the type's rounding of K, once more */
    const float tol_all = type == BRISK_KV_F32 ? 1e-2f : type == BRISK_KV_F16 ? 0.05f : type == BRISK_KV_Q8_0 ? 0.2f : 1.0f;
    CHECKF(d_all <= tol_all, "%s: a whole-sequence shift moved the logits by %g (bound %g)", brisk_kv_type_name(type), (double)d_all,
           (double)tol_all);
    CHECK(brisk_seq_truncate(u, 0, NTOK, &err) == BRISK_OK);
    int32_t dropped = -1;
    CHECKF(brisk_seq_context_shift(a, 0, n_keep, n_discard, &dropped, &err) == BRISK_OK, "%s", err.msg);
    CHECK(dropped == n_discard && brisk_seq_len(a, 0) == NTOK - n_discard && brisk_seq_next_pos(a, 0) == NTOK - n_discard);
    int32_t n = 0;
    for (int32_t i = 0; i < n_keep; i++) kept[n++] = tok[i];
    for (int32_t i = n_keep + n_discard; i < NTOK; i++) kept[n++] = tok[i];
    CHECKF(feed_all(f, 0, kept, n, 64, &err) == BRISK_OK, "%s", err.msg);
    const int32_t hd = a->kv->head_dim, nh = a->kv->n_head;
    int bad = 0;
    float worst = 0.0f;
    for (int32_t s = 0; s < n; s++)
        for (int32_t h = 0; h < nh; h++) {
            float ka[256], kf[256], amax = 0.0f;
            brisk_kv_k_get(a->kv, 0, 0, s, h, ka);
            brisk_kv_k_get(f->kv, 0, 0, s, h, kf);
            if (a->kv->k_hadamard) {   /* compared as stored, where the type's bound applies to each element */
                brisk_kv_hadamard(ka, hd);
                brisk_kv_hadamard(kf, hd);
            }
            for (int32_t i = 0; i < hd; i++) amax = fmaxf(amax, fabsf(kf[i]));
            for (int32_t i = 0; i < hd; i++) {
                const float d = fabsf(ka[i] - kf[i]);
                bad += d > bound(kt, amax);
                if (amax > 0) worst = fmaxf(worst, d / amax);
            }
        }
    CHECKF(bad == 0, "%s: %d elements of layer 0's K past the bound after the shift (worst %.3g of amax)", brisk_kv_type_name(type), bad,
           (double)worst);
    printf("shift %s: layer-0 K worst |shifted - fresh| %.3g of amax; whole-sequence shift moved the logits by %.3g\n",
           brisk_kv_type_name(type), (double)worst, (double)d_all);
    CHECK(a->kv->seqs[0].n_indexed == 0);
    CHECKF(brisk_kv_check(a->kv, &err), "%s", err.msg);
    {   /* its state says the K was re-rotated (flags bit 1), and a context loading it keeps the blocks out of the prefix index */
        uint8_t *st = NULL;
        size_t n_st = 0;
        CHECKF(brisk_seq_state_get_alloc(a, 0, NULL, &st, &n_st, &err) == BRISK_OK, "%s", err.msg);
        if (st) {
            CHECK(n_st > 12 && (st[8] & 2u));
            brisk_context *l = make_ctx(type, 1, 2, 0, 0, 0);
            if (l) {
                CHECKF(brisk_seq_state_set(l, 0, NULL, st, n_st, &err) == BRISK_OK, "%s", err.msg);
                CHECK(brisk_seq_len(l, 0) == n && l->kv->seqs[0].n_indexed == 0);
                brisk_context_free(l);
            }
            free(st);
        }
        /* and an unshifted sequence's state does not: its full blocks are indexed once loaded */
        CHECKF(brisk_seq_state_get_alloc(f, 0, NULL, &st, &n_st, &err) == BRISK_OK, "%s", err.msg);
        if (st) {
            CHECK(!(st[8] & 2u));
            brisk_context *l = make_ctx(type, 1, 2, 0, 0, 0);
            if (l) {
                CHECKF(brisk_seq_state_set(l, 0, NULL, st, n_st, &err) == BRISK_OK, "%s", err.msg);
                CHECK(l->kv->seqs[0].n_indexed == n / BRISK_KV_BLOCK);
                brisk_context_free(l);
            }
            free(st);
        }
    }
    if (type == BRISK_KV_F32) {
        /* the reference: u's unshifted rows, moved the long way round into r by the row API */
        brisk_context *r = make_ctx(type, 1, 2, 0, 0, 0);
        if (r) {
            CHECK(brisk_kv_reserve(r->kv, 0, n, &err) == BRISK_OK);
            static float krow[4096], vrow[4096];
            for (int32_t s = 0; s < n; s++) {
                const int32_t src = s < n_keep ? s : s + n_discard;   /* u's slot == its position */
                for (int32_t il = 0; il < r->kv->n_layer; il++) {
                    brisk_kv_row_get(u->kv, il, 0, src, (uint8_t *)krow, (uint8_t *)vrow);
                    const brisk_rope *rp = model_rope(r, il);
                    if (rp) rotate_long_way(rp, krow, nh, hd, src, s);
                    brisk_kv_row_set(r->kv, il, 0, s, (const uint8_t *)krow, (const uint8_t *)vrow);
                }
                brisk_kv_written(r->kv, 0, s, kept[s], s, true);
            }
            CHECKF(feed(a, 0, &x, 1, &err) == BRISK_OK && feed(r, 0, &x, 1, &err) == BRISK_OK, "%s", err.msg);
            memcpy(la, brisk_get_logits(a, 0), (size_t)n_vocab * sizeof *la);
            memcpy(lf, brisk_get_logits(r, 0), (size_t)n_vocab * sizeof *lf);
            const float d = max_diff(la, lf, n_vocab);
            /* two float paths of one rotation (by q - p, and by -p then q): the angles' rounding, ~p x 2^-24 rad at p < 300,
             * grows through the layers; 3e-3 measured */
            CHECKF(d <= 1e-2f, "f32: logits after the shift differ from the reference's by %g (bound 1e-2)", (double)d);
            /* positions moved without re-rotating K */
            CHECK(brisk_seq_truncate(r, 0, 0, &err) == BRISK_OK);
            CHECK(brisk_kv_reserve(r->kv, 0, n, &err) == BRISK_OK);
            for (int32_t s = 0; s < n; s++) {
                const int32_t src = s < n_keep ? s : s + n_discard;
                for (int32_t il = 0; il < r->kv->n_layer; il++) {
                    brisk_kv_row_get(u->kv, il, 0, src, (uint8_t *)krow, (uint8_t *)vrow);
                    brisk_kv_row_set(r->kv, il, 0, s, (const uint8_t *)krow, (const uint8_t *)vrow);
                }
                brisk_kv_written(r->kv, 0, s, kept[s], s, true);
            }
            CHECKF(feed(r, 0, &x, 1, &err) == BRISK_OK, "%s", err.msg);
            const float dw = max_diff(brisk_get_logits(r, 0), lf, n_vocab);
            CHECKF(dw > 0.1f, "positions moved without re-rotating K are only %g off", (double)dw);
            printf("shift f32: next logits vs the long-way-round reference %.3g; without re-rotation %.3g\n", (double)d, (double)dw);
            brisk_context_free(r);
        }
    }
done:
    free(la);
    free(lf);
    brisk_context_free(a);
    brisk_context_free(f);
    brisk_context_free(u);
}

/* Per-head selection (kv_per_head, h2o) then llama.cpp's shift, F32: each
 * head's slots have their own positions, so each head's K turns by its own
 * delta (a shift that drops 8 slots, so that slots where the heads differ
 * stay). Every head's K after the shift against its K before, moved the long
 * way round from that head's old position to its new one, within the bare
 * test's F32 bound; head 0's delta applied to every head is shown to be off
 * (so the check can tell). Then a whole-sequence shift moves every head's
 * positions alike. */
static void test_shift_per_head(const int32_t *tok) {
    per_head = true;
    brisk_context *a = make_ctx(BRISK_KV_F32, 1, 2, BRISK_KV_POLICY_H2O, 128, 0);
    per_head = false;
    brisk_error err = {0};
    float *k0 = NULL;
    int32_t *p0 = NULL;
    if (!a) return;
    brisk_kv *kv = a->kv;
    CHECKF(feed_all(a, 0, tok, NTOK, 16, &err) == BRISK_OK, "%s", err.msg);
    CHECK(brisk_kv_policy_heads_differ(kv, 0));
    const int32_t nl = kv->n_layer, nkv = kv->n_head, nh = nl * nkv, hd = kv->head_dim, len = brisk_kv_len(kv, 0);
    k0 = malloc((size_t)nh * len * hd * sizeof *k0);
    p0 = malloc((size_t)nh * len * sizeof *p0);
    if (!k0 || !p0) goto done;
    int differ = 0;
    for (int32_t lh = 0; lh < nh; lh++)
        for (int32_t s = 0; s < len; s++) {
            brisk_kv_k_get(kv, lh / nkv, 0, s, lh % nkv, k0 + ((size_t)lh * len + s) * hd);
            p0[(size_t)lh * len + s] = brisk_kv_policy_head_pos(kv, 0, lh, s);
            differ += p0[(size_t)lh * len + s] != p0[s];
        }
    CHECKF(differ > 0, "per-head: every head holds head 0's positions (%d slots)", len);
    int32_t dropped = 0;
    const int32_t n_keep = 4;
    /* a few slots only: the older ones, where the heads differ, must stay (the newest, h2o's recent half, are alike) */
    CHECKF(brisk_seq_context_shift(a, 0, n_keep, 8, &dropped, &err) == BRISK_OK, "%s", err.msg);
    const int32_t n = brisk_kv_len(kv, 0);
    CHECK(dropped == 8 && n == len - dropped && brisk_seq_next_pos(a, 0) == n);
    int bad = 0, bad_pos = 0, off = 0;
    for (int32_t lh = 0; lh < nh; lh++) {
        const brisk_rope *rp = model_rope(a, lh / nkv);
        for (int32_t s = 0; s < n; s++) {
            const int32_t src = s < n_keep ? s : s + dropped, from = p0[(size_t)lh * len + src];
            bad_pos += brisk_kv_policy_head_pos(kv, 0, lh, s) != s;
            float want[256], head0[256], got[256], amax = 0.0f;
            memcpy(want, k0 + ((size_t)lh * len + src) * hd, (size_t)hd * sizeof *want);
            memcpy(head0, want, (size_t)hd * sizeof *want);
            if (rp) {
                rotate_long_way(rp, want, 1, hd, from, s);
                rotate_long_way(rp, head0, 1, hd, p0[src], s);   /* head 0's old position for every head: wrong */
            }
            brisk_kv_k_get(kv, lh / nkv, 0, s, lh % nkv, got);
            for (int32_t i = 0; i < hd; i++) amax = fmaxf(amax, fabsf(want[i]));
            for (int32_t i = 0; i < hd; i++) {
                bad += fabsf(got[i] - want[i]) > bound(BRISK_KV_F32, amax);
                off += fabsf(got[i] - head0[i]) > bound(BRISK_KV_F32, amax);
            }
        }
    }
    CHECKF(bad_pos == 0, "per-head shift: %d head slots not at their new position", bad_pos);
    CHECKF(bad == 0 && off > 0, "per-head shift: %d K elements past the bound; head 0's delta for every head would put %d past it", bad, off);
    CHECKF(brisk_seq_shift(a, 0, 0, 37, &err) == BRISK_OK, "%s", err.msg);
    bad_pos = 0;
    for (int32_t lh = 0; lh < nh; lh++)
        for (int32_t s = 0; s < n; s++) bad_pos += brisk_kv_policy_head_pos(kv, 0, lh, s) != s + 37;
    CHECKF(bad_pos == 0, "per-head: a whole-sequence shift of 37 left %d head slots elsewhere", bad_pos);
    CHECKF(feed(a, 0, tok, 8, &err) == BRISK_OK && brisk_kv_check(kv, &err), "%s", err.msg);
done:
    free(k0), free(p0);
    brisk_context_free(a);
}

/* seq 0 shifted alone (1 thread) and beside seq 1 (2 threads, its own tokens and shifts): the same bits. */
static void test_shift_invariance(int type, const int32_t *tok, const int32_t *tok1) {
    brisk_error err = {0};
    brisk_context *a = make_ctx(type, 1, 1, 0, 0, 0), *b = make_ctx(type, 2, 2, 0, 0, 0);
    float *la = malloc((size_t)n_vocab * sizeof *la);
    if (!a || !b || !la) goto done;
    CHECKF(feed_all(a, 0, tok, NTOK, 64, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(feed_all(b, 1, tok1, 200, 29, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(feed_all(b, 0, tok, NTOK, 7, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(brisk_seq_context_shift(b, 1, 2, 50, NULL, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(brisk_seq_context_shift(a, 0, 4, 100, NULL, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(brisk_seq_context_shift(b, 0, 4, 100, NULL, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(brisk_seq_shift(a, 0, 150, 5, &err) == BRISK_OK && brisk_seq_shift(b, 0, 150, 5, &err) == BRISK_OK, "%s", err.msg);
    int bad = 0;
    static uint8_t ka[8192], va[8192], kb[8192], vb[8192];
    for (int32_t s = 0; s < brisk_seq_len(a, 0); s++)
        for (int il = 0; il < a->kv->n_layer; il++) {
            brisk_kv_row_get(a->kv, il, 0, s, ka, va);
            brisk_kv_row_get(b->kv, il, 0, s, kb, vb);
            bad += memcmp(ka, kb, brisk_kv_row_bytes(a->kv->k_type, a->kv->row)) != 0 ||
                   brisk_kv_slot_pos(a->kv, 0, s) != brisk_kv_slot_pos(b->kv, 0, s);
        }
    CHECKF(bad == 0 && brisk_seq_len(a, 0) == brisk_seq_len(b, 0), "%s: %d rows differ alone vs batched", brisk_kv_type_name(type), bad);
    const int32_t x = tok[NTOK];
    CHECKF(feed(a, 0, &x, 1, &err) == BRISK_OK, "%s", err.msg);
    memcpy(la, brisk_get_logits(a, 0), (size_t)n_vocab * sizeof *la);
    /* seq 0's next token in one batch with seq 1's */
    int32_t t2[2] = {x, tok1[200]}, p2[2] = {brisk_seq_next_pos(b, 0), brisk_seq_next_pos(b, 1)}, s2[2] = {0, 1};
    uint8_t w2[2] = {1, 1};
    brisk_batch bb = {2, t2, p2, s2, w2};
    CHECKF(brisk_decode(b, &bb, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(!memcmp(la, brisk_get_logits(b, 0), (size_t)n_vocab * sizeof *la), "%s: logits after the shift differ alone vs batched",
           brisk_kv_type_name(type));
done:
    free(la);
    brisk_context_free(a);
    brisk_context_free(b);
}

/* Pinned slots of seq 0. */
static int32_t pinned_slots(const brisk_context *c) {
    int32_t n = 0;
    for (int32_t s = 0; s < brisk_seq_len(c, 0); s++) n += brisk_kv_slot_pinned(c->kv, 0, s);
    return n;
}

/* Role of token i of the pinning schedule: two user segments and a system prefix are pinned. */
static int32_t role_of(int32_t i) {
    if (i < 12) return BRISK_ROLE_SYSTEM;
    if ((i >= 60 && i < 75) || (i >= 200 && i < 210)) return BRISK_ROLE_USER;
    return BRISK_ROLE_ASSISTANT;
}

static void test_pinned(int policy, int type, const int32_t *tok) {
    brisk_error err = {0};
    const uint32_t pin = 1u << BRISK_ROLE_SYSTEM | 1u << BRISK_ROLE_USER;
    brisk_context *c = make_ctx(type, 1, 2, policy, 96, pin);
    if (!c) return;
    int32_t fed_pinned = 0, bad = 0, bad_budget = 0, i = 0, k = 0;
    static const int32_t sizes[] = {1, 5, 17, 3, 24, 1, 1, 9, 13, 2};
    const bool oracle = policy == BRISK_KV_POLICY_ORACLE;
    /* the oracle first records the same batches with every slot kept (the pool holds -c), then replays them */
    for (int pass = oracle ? 0 : 1; pass < 2; pass++, i = 0, k = 0) {
        CHECK(!oracle || brisk_seq_oracle(c, 0, pass == 0, &err) == BRISK_OK);
        while (pass == 0 && i < NTOK) {
            const int32_t r = role_of(i);
            int32_t m = BRISK_MIN(sizes[k++ % 10], NTOK - i);
            for (int32_t j = 1; j < m; j++)
                if (role_of(i + j) != r) { m = j; break; }
            CHECK(brisk_seq_set_role(c, 0, r, &err) == BRISK_OK);
            CHECKF(feed(c, 0, tok + i, m, &err) == BRISK_OK, "oracle's recording at token %d: %s", i, err.msg);
            i += m;
        }
    }
    while (i < NTOK) {
        /* one batch of one role: the role changes only between batches */
        const int32_t r = role_of(i);
        int32_t m = BRISK_MIN(sizes[k++ % 10], NTOK - i);
        for (int32_t j = 1; j < m; j++)
            if (role_of(i + j) != r) { m = j; break; }
        CHECK(brisk_seq_set_role(c, 0, r, &err) == BRISK_OK);
        brisk_status st = feed(c, 0, tok + i, m, &err);
        CHECKF(st == BRISK_OK, "%s %s at token %d: %s", brisk_kv_policy_name(policy), brisk_kv_type_name(type), i, err.msg);
        if (st) break;
        fed_pinned += (r == BRISK_ROLE_SYSTEM || r == BRISK_ROLE_USER) ? m : 0;
        bad += pinned_slots(c) != fed_pinned;
        bad_budget += brisk_seq_len(c, 0) > 96;
        i += m;
    }
    CHECKF(bad == 0 && bad_budget == 0, "%s %s: pinned slots evicted after %d batches; budget exceeded %d times", brisk_kv_policy_name(policy),
           brisk_kv_type_name(type), bad, bad_budget);
    CHECKF(c->kv->n_compacted > 0, "%s: nothing was evicted: the test saw no eviction", brisk_kv_policy_name(policy));
    /* every pinned position is still there, with its token */
    int32_t found = 0;
    for (int32_t s = 0; s < brisk_seq_len(c, 0); s++) {
        const int32_t p = brisk_kv_slot_pos(c->kv, 0, s);
        if (role_of(p) != BRISK_ROLE_ASSISTANT) found += brisk_kv_slot_token(c->kv, 0, s) == tok[p] && brisk_kv_slot_pinned(c->kv, 0, s);
    }
    CHECKF(found == fed_pinned, "%s %s: %d of %d pinned positions found", brisk_kv_policy_name(policy), brisk_kv_type_name(type), found, fed_pinned);
    /* and a context shift (renumbering, discarding) keeps them too */
    int32_t dropped = 0;
    CHECKF(brisk_seq_context_shift(c, 0, 4, 20, &dropped, &err) == BRISK_OK, "%s", err.msg);
    CHECK(dropped == 20 && pinned_slots(c) == fed_pinned && brisk_seq_next_pos(c, 0) == brisk_seq_len(c, 0));
    CHECKF(brisk_kv_check(c->kv, &err), "%s", err.msg);
    /* more pinned tokens than the budget leaves room for: a clear refusal, nothing evicted (the oracle: the shift moved
     * the positions its recording ranks, so its next eviction is refused before the pins run out) */
    CHECK(brisk_seq_set_role(c, 0, BRISK_ROLE_USER, &err) == BRISK_OK);
    brisk_status st = BRISK_OK;
    for (int32_t j = 0; j < 20 && !st; j++) st = feed(c, 0, tok + (j * 8) % NTOK, 8, &err);
    if (oracle) CHECKF(st == BRISK_ERR_INVALID_ARG && strstr(err.msg, "no recorded pass"), "%d %s", st, err.msg);
    else CHECKF(st == BRISK_ERR_CAPACITY && strstr(err.msg, "pinned") && strstr(err.msg, "--kv-pin"), "%d %s", st, err.msg);
    brisk_context_free(c);
}

/* A context shift without a policy never discards pinned slots; when pins leave nothing to discard it drops fewer. */
static void test_shift_pinned(const int32_t *tok) {
    brisk_error err = {0};
    brisk_context *c = make_ctx(BRISK_KV_F16, 1, 2, 0, 0, 1u << BRISK_ROLE_PROMPT);
    if (!c) return;
    CHECK(brisk_seq_set_role(c, 0, BRISK_ROLE_PROMPT, &err) == BRISK_OK);
    CHECKF(feed_all(c, 0, tok, 100, 64, &err) == BRISK_OK, "%s", err.msg);
    CHECK(brisk_seq_set_role(c, 0, BRISK_ROLE_GENERATED, &err) == BRISK_OK);
    CHECKF(feed_all(c, 0, tok + 100, 60, 64, &err) == BRISK_OK, "%s", err.msg);
    int32_t dropped = 0;
    CHECKF(brisk_seq_context_shift(c, 0, 4, 80, &dropped, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(dropped == 60 && brisk_seq_len(c, 0) == 100 && pinned_slots(c) == 100, "dropped %d, %d slots, %d pinned", dropped,
           brisk_seq_len(c, 0), pinned_slots(c));
    CHECK(brisk_seq_next_pos(c, 0) == 100);
    CHECK(brisk_seq_set_role(c, 0, BRISK_KV_N_ROLES, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "role"));
    CHECK(brisk_seq_shift(c, 0, 10, -11, &err) == BRISK_ERR_INVALID_ARG && brisk_seq_next_pos(c, 0) == 100);
    brisk_context_free(c);
    brisk_context_params p = brisk_context_default_params();
    p.kv_pin = 1u << BRISK_KV_N_ROLES;
    brisk_context *bad = NULL;
    CHECK(brisk_context_init(model, &p, &bad, &err) == BRISK_ERR_INVALID_ARG && !bad && strstr(err.msg, "kv_pin"));
    CHECK(!strcmp(brisk_kv_role_name(BRISK_ROLE_TOOL), "tool") && brisk_kv_role_parse("Assistant") == BRISK_ROLE_ASSISTANT &&
          brisk_kv_role_parse("bot") == -1 && !strcmp(brisk_kv_role_name(99), "?"));
}

/* brisk_kv_hadamard: orthonormal (norms and dot products kept) and its own inverse, per group of the largest
 * power of two dividing the head (96: three groups of 32, each mixed only within itself). */
static void test_hadamard_transform(void) {
    static const int32_t dims[] = {32, 64, 96, 128, 256};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        const int32_t n = dims[i];
        float x[256] = {0}, y[256] = {0}, z[256];
        double dot = 0, dot_r = 0, max_back = 0;
        for (int32_t j = 0; j < n; j++) x[j] = (float)((int32_t)(urand() % 2001) - 1000) / 100.0f, y[j] = (float)((int32_t)(urand() % 2001) - 1000) / 300.0f;
        for (int32_t j = 0; j < n; j++) dot += (double)x[j] * y[j];
        memcpy(z, x, sizeof z);
        brisk_kv_hadamard(z, n);
        float yr[256];
        memcpy(yr, y, sizeof yr);
        brisk_kv_hadamard(yr, n);
        for (int32_t j = 0; j < n; j++) dot_r += (double)z[j] * yr[j];
        brisk_kv_hadamard(z, n);
        for (int32_t j = 0; j < n; j++) max_back = fmax(max_back, fabs((double)z[j] - x[j]));
        CHECKF(fabs(dot - dot_r) <= 1e-4 * (1 + fabs(dot)) && max_back <= 1e-4, "hadamard %d: dot %.6f vs rotated %.6f, back to x within %g", n, dot,
               dot_r, max_back);
    }
    float e[96] = {0};
    e[40] = 1.0f;   /* a unit vector in the second group of 32: only that group changes, every element by 1/sqrt(32) */
    brisk_kv_hadamard(e, 96);
    int spread = 1;
    for (int32_t j = 0; j < 96; j++) spread &= (j >= 32 && j < 64) ? fabsf(fabsf(e[j]) - 1.0f / sqrtf(32.0f)) < 1e-6f : e[j] == 0.0f;
    CHECKF(spread, "hadamard 96: a unit vector of group 1 spreads over that group alone");
}

/* A Hadamard-rotated K (k_hadamard) on a q8_0 and a q4_0 cache:
 *   - its logits stay near an F32 cache's, as the plain type's do (the rotation keeps q.k);
 *   - batch invariant: fed in chunks of 7 beside another sequence, the same logits bits as fed alone in 64s;
 *   - a state saved from it continues bitwise in another rotated context, and an unrotated context refuses it;
 *   - F16 K with the rotation is refused at init, naming the types it needs. */
static void test_hadamard_engine(const int32_t *tok, const int32_t *tok1) {
    brisk_error err = {0};
    static const int types[] = {BRISK_KV_Q8_0, BRISK_KV_Q4_0};
    float *lr = malloc((size_t)n_vocab * sizeof *lr), *lp = malloc((size_t)n_vocab * sizeof *lp);
    k_hadamard = false;
    brisk_context *ref = make_ctx(BRISK_KV_F32, 1, 2, 0, 0, 0);
    if (!ref || !lr || !lp) goto done;
    CHECKF(feed_all(ref, 0, tok, NTOK, 64, &err) == BRISK_OK, "%s", err.msg);
    memcpy(lr, brisk_get_logits(ref, 0), (size_t)n_vocab * sizeof *lr);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        k_hadamard = false;
        brisk_context *plain = make_ctx(types[t], 1, 2, 0, 0, 0);
        k_hadamard = true;
        brisk_context *a = make_ctx(types[t], 1, 2, 0, 0, 0), *b = make_ctx(types[t], 2, 2, 0, 0, 0), *c = make_ctx(types[t], 1, 2, 0, 0, 0);
        k_hadamard = false;
        brisk_context *u = make_ctx(types[t], 1, 2, 0, 0, 0);
        uint8_t *st = NULL;
        size_t n_st = 0;
        if (!plain || !a || !b || !c || !u) goto next;
        CHECK(a->kv->k_hadamard && !plain->kv->k_hadamard);
        CHECKF(feed_all(plain, 0, tok, NTOK, 64, &err) == BRISK_OK && feed_all(a, 0, tok, NTOK, 64, &err) == BRISK_OK, "%s", err.msg);
        memcpy(lp, brisk_get_logits(plain, 0), (size_t)n_vocab * sizeof *lp);
        const float d_plain = max_diff(lp, lr, n_vocab), d_rot = max_diff(brisk_get_logits(a, 0), lr, n_vocab);
        const float tol = types[t] == BRISK_KV_Q8_0 ? 0.5f : 3.0f;
        CHECKF(d_rot < tol && memcmp(lp, brisk_get_logits(a, 0), (size_t)n_vocab * sizeof *lp) != 0,
               "%s rotated: logits %g from the F32 cache's (plain %s: %g), and not the plain cache's bits", brisk_kv_type_name(types[t]), d_rot,
               brisk_kv_type_name(types[t]), d_plain);
        printf("hadamard %s: logits vs an F32 cache %.3g (plain %.3g)\n", brisk_kv_type_name(types[t]), d_rot, d_plain);
        /* alone in 64s vs chunks of 7 beside sequence 1 */
        CHECKF(feed_all(b, 1, tok1, 100, 13, &err) == BRISK_OK && feed_all(b, 0, tok, NTOK, 7, &err) == BRISK_OK, "%s", err.msg);
        CHECKF(!memcmp(brisk_get_logits(a, 0), brisk_get_logits(b, 0), (size_t)n_vocab * sizeof(float)),
               "%s rotated: logits differ alone vs chunked beside another sequence", brisk_kv_type_name(types[t]));
        /* a state: continues bitwise in a rotated context, refused by an unrotated one */
        CHECKF(brisk_seq_state_get_alloc(a, 0, NULL, &st, &n_st, &err) == BRISK_OK, "%s", err.msg);
        if (st) {
            CHECKF(brisk_seq_state_set(c, 0, NULL, st, n_st, &err) == BRISK_OK, "%s", err.msg);
            const int32_t x = tok[NTOK];
            CHECKF(feed(a, 0, &x, 1, &err) == BRISK_OK && feed(c, 0, &x, 1, &err) == BRISK_OK, "%s", err.msg);
            CHECKF(!memcmp(brisk_get_logits(a, 0), brisk_get_logits(c, 0), (size_t)n_vocab * sizeof(float)),
                   "%s rotated: a loaded state does not continue bitwise", brisk_kv_type_name(types[t]));
            CHECKF(brisk_seq_state_set(u, 0, NULL, st, n_st, &err) == BRISK_ERR_INVALID_ARG && strstr(err.msg, "Hadamard-rotated") &&
                       strstr(err.msg, "--k-hadamard"),
                   "an unrotated context took a rotated state: %s", err.msg);
        }
    next:
        free(st);
        brisk_context_free(plain);
        brisk_context_free(a);
        brisk_context_free(b);
        brisk_context_free(c);
        brisk_context_free(u);
    }
    {
        brisk_context_params p = brisk_context_default_params();
        p.n_ctx_seq = 64;
        p.k_hadamard = true;   /* F16 K */
        brisk_context *c = NULL;
        CHECKF(brisk_context_init(model, &p, &c, &err) == BRISK_ERR_INVALID_ARG && !c && strstr(err.msg, "needs a q8_0 or q4_0 K cache; K is f16"),
               "f16 K with the rotation: %s", err.msg);
        brisk_context_free(c);
    }
done:
    k_hadamard = false;
    free(lr);
    free(lp);
    brisk_context_free(ref);
}

int main(void) {
    test_rerotate_all();
    char path[1024];
    test_source("models/pycode-target-f16.gguf", path, sizeof path);
    if (!test_exists(path)) TEST_SKIP("%s absent (make models)", path);
    brisk_error err = {0};
    CHECKF(brisk_model_load(path, &model, &err) == BRISK_OK, "%s", err.msg);
    if (!model) return test_finish();
    brisk_model_info info;
    brisk_model_get_info(model, &info);
    n_vocab = info.n_vocab;
    static int32_t tok[NTOK + 1], tok1[NTOK + 1];
    for (int i = 0; i <= NTOK; i++) tok[i] = (int32_t)(urand() % (uint32_t)n_vocab), tok1[i] = (int32_t)(urand() % (uint32_t)n_vocab);
    static const int types[] = {BRISK_KV_F32, BRISK_KV_F16, BRISK_KV_Q8_0, BRISK_KV_Q4_0};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) test_shift_logits(types[t], tok);
    test_shift_invariance(BRISK_KV_F16, tok, tok1);
    test_shift_invariance(BRISK_KV_Q8_0, tok, tok1);
    test_hadamard_engine(tok, tok1);
    /* a shift through a rotated K: brisk_kv_k_get/k_set undo and redo the rotation around RoPE's */
    k_hadamard = true;
    test_shift_logits(BRISK_KV_Q8_0, tok);
    test_shift_logits(BRISK_KV_Q4_0, tok);
    test_shift_invariance(BRISK_KV_Q8_0, tok, tok1);
    k_hadamard = false;
    test_shift_pinned(tok);
    test_shift_per_head(tok);
    /* BRISK_TEST_QUICK (the ASan run): every policy on F16, the quantized caches with streaming and h2o,
     * as test_kv_policy's quick run (the pinning and compaction code is the same for every policy) */
    const bool quick = getenv("BRISK_TEST_QUICK") != NULL;
    for (int kind = BRISK_KV_POLICY_STREAMING; kind < BRISK_KV_N_POLICIES; kind++)
        for (size_t t = 1; t < sizeof types / sizeof types[0]; t++)
            if (!quick || types[t] == BRISK_KV_F16 || kind == BRISK_KV_POLICY_STREAMING || kind == BRISK_KV_POLICY_H2O)
                test_pinned(kind, types[t], tok);
    brisk_model_free(model);
    test_hadamard_transform();   /* last: its random draws must not move the tests' above */
    return test_finish();
}
