/* hyb: hybrid-precision KV (hyb4, hyb2; docs/KV.md "hyb4 and hyb2").
 *
 * K and V are stored as k4 / k2 (kv.c), and per (sequence, layer, KV head)
 * a small set of hot rows keeps F16 K and V of the sinks (the first
 * BRISK_KV_HYB_SINK slots), of the newest full block (the window), and of
 * the ceil(5%) of the slots before it with the most mean attention. A query reads its own block in F16 from the
 * block's staging (K as k4's, V staged beside it for hyb), a hot slot from
 * its hot row, every other slot quantized (model/attention.c).
 *
 * A slot's F16 exists only while its block is staged, so a slot can become
 * hot only at the refresh that follows its block's last query, and it may
 * stop being hot at any later refresh, never to come back. The ranking is by
 * attention mass, the integer fixed point of kv/policy.h (order free), added
 * by the queries of the same layer: while the slot's block is open to the
 * open block's masses (hyb_wmass), then to its hot row's. Each refresh
 * depends on the positions alone (the queries up to the end of the block),
 * and forward.c runs a batch's attention in one wave per block with the
 * refreshes between, so a sequence's hot rows, and therefore its logits, are
 * the same token by token, in chunks, or beside other sequences. */
#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>

/* A candidate of a refresh (kv.h's hyb_cand scratch holds hyb_cap). */
typedef struct {
    double mass;   /* its mean attention */
    int32_t slot, row;   /* row: its hot row, or -1: in the block being refreshed */
} hyb_cand;
_Static_assert(sizeof(hyb_cand) == BRISK_KV_HYB_CAND_BYTES, "kv.c sizes the refresh scratch with BRISK_KV_HYB_CAND_BYTES");

/* More mass first; equal masses: the earlier slot (slots are distinct, so
 * the order is total and qsort's result unique). */
static int cand_cmp(const void *a, const void *b) {
    const hyb_cand *x = a, *y = b;
    if (x->mass != y->mass) return x->mass > y->mass ? -1 : 1;
    return (x->slot > y->slot) - (x->slot < y->slot);
}

/* Slot s of seq (its block staged) takes the first free hot row of unit u
 * = (layer, head) from *free_r on, with mass, and the end of the slot order
 * (s is past every slot hot so far). */
static void make_hot(brisk_kv *kv, int32_t layer, int32_t seq, int32_t head, int32_t s, int64_t mass, int32_t *free_r) {
    const size_t u = brisk_kv_hyb_unit(kv, seq, layer, head);
    int32_t *rslot = kv->hyb_slot + u * (size_t)kv->hyb_cap;
    while (*free_r < kv->hyb_cap && rslot[*free_r] >= 0) (*free_r)++;
    BRISK_ASSERT(*free_r < kv->hyb_cap);   /* brisk_kv_hyb_cap: enough for any length up to n_ctx */
    const int32_t r = *free_r, n = kv->hyb_n[u];
    BRISK_ASSERT(n == 0 || kv->hyb_slot[u * (size_t)kv->hyb_cap + (size_t)kv->hyb_order[u * (size_t)kv->hyb_cap + (size_t)(n - 1)]] < s);
    rslot[r] = s;
    kv->hyb_mass[u * (size_t)kv->hyb_cap + (size_t)r] = mass;
    kv->hyb_order[u * (size_t)kv->hyb_cap + (size_t)n] = (int16_t)r;
    kv->hyb_n[u] = n + 1;
    uint16_t *k = brisk_kv_hyb_kt(kv, seq, layer, head, r) + r % 16, *v = (uint16_t *)brisk_kv_hyb_v(kv, seq, layer, head, r);
    const uint16_t *ks = brisk_kv_k_stage(kv, layer, seq, s, head);   /* transposed both: element e at [e * BLOCK], [e * 16] */
    for (int32_t e = 0; e < kv->head_dim; e++) k[(size_t)e * 16] = ks[(size_t)e * BRISK_KV_BLOCK];
    memcpy(v, brisk_kv_v_stage(kv, layer, seq, s, head), (size_t)kv->head_dim_v * sizeof(uint16_t));
}

/* Unit u's slot order without the rows freed (slot -1), in order. */
static void order_prune(brisk_kv *kv, size_t u) {
    int16_t *ord = kv->hyb_order + u * (size_t)kv->hyb_cap;
    const int32_t *rslot = kv->hyb_slot + u * (size_t)kv->hyb_cap;
    int32_t m = 0;
    for (int32_t i = 0; i < kv->hyb_n[u]; i++)
        if (rslot[ord[i]] >= 0) ord[m++] = ord[i];
    kv->hyb_n[u] = m;
}

void brisk_kv_hyb_refresh(brisk_kv *kv, int32_t layer, int32_t seq, int32_t bi) {
    const int32_t cap = kv->hyb_cap, s0 = bi * BRISK_KV_BLOCK;
    const int32_t want_max = (int32_t)(((int64_t)s0 * BRISK_KV_HYB_PCT + 99) / 100);
    hyb_cand *c = kv->hyb_cand;   /* hyb_cap entries; refreshes run on one thread (forward.c) */
    for (int32_t head = 0; head < kv->n_head; head++) {
        const size_t u = brisk_kv_hyb_unit(kv, seq, layer, head);
        int32_t *rslot = kv->hyb_slot + u * (size_t)cap;
        int64_t *rmass = kv->hyb_mass + u * (size_t)cap, *wmass = kv->hyb_wmass + u * BRISK_KV_BLOCK;
        /* the candidates: every hot row but the sinks (the block before, held
         * whole as the window, and the rows chosen before), ranked by their
         * mean attention (mass over the queries that saw them, as brisk's
         * h2o: a slot seen by few queries is not outranked by age alone) */
        int32_t n = 0;
        for (int32_t r = 0; r < cap; r++)
            if (rslot[r] >= BRISK_KV_HYB_SINK)
                c[n++] = (hyb_cand){.mass = (double)rmass[r] / (double)(s0 + BRISK_KV_BLOCK - rslot[r]), .slot = rslot[r], .row = r};
        qsort(c, (size_t)n, sizeof *c, cand_cmp);
        const int32_t want = BRISK_MIN(n, want_max);
        for (int32_t i = want; i < n; i++) {   /* the others go back to their quantized values for good */
            rslot[c[i].row] = -1;
            rmass[c[i].row] = 0;
        }
        order_prune(kv, u);
        /* the block itself, whole (sinks included): the next block's queries
         * read it in F16 too, as the window's older half */
        int32_t free_r = 0;
        for (int32_t l = 0; l < BRISK_KV_BLOCK; l++) make_hot(kv, layer, seq, head, s0 + l, wmass[l], &free_r);
        memset(wmass, 0, BRISK_KV_BLOCK * sizeof *wmass);
    }
}

/* Every hot row of unit u past slot n freed, and the open block's masses
 * cleared; n = 0: all of them. */
static void drop_from(brisk_kv *kv, size_t u, int32_t n) {
    int32_t *rslot = kv->hyb_slot + u * (size_t)kv->hyb_cap;
    int64_t *rmass = kv->hyb_mass + u * (size_t)kv->hyb_cap;
    for (int32_t r = 0; r < kv->hyb_cap; r++)
        if (rslot[r] >= n) {
            rslot[r] = -1;
            rmass[r] = 0;
        }
    order_prune(kv, u);
    memset(kv->hyb_wmass + u * BRISK_KV_BLOCK, 0, BRISK_KV_BLOCK * sizeof(int64_t));
}

void brisk_kv_hyb_truncated(brisk_kv *kv, int32_t seq, int32_t n) {
    n -= n % BRISK_KV_BLOCK;   /* the block cut into reopens: its slots are read staged again, and made hot when it fills */
    for (int32_t il = 0; il < kv->n_layer; il++)
        for (int32_t h = 0; h < kv->n_head; h++) drop_from(kv, brisk_kv_hyb_unit(kv, seq, il, h), n);
}

void brisk_kv_hyb_forked(brisk_kv *kv, int32_t src, int32_t dst) {
    const size_t U = (size_t)kv->n_layer * (size_t)kv->n_head, cap = (size_t)kv->hyb_cap;
    const size_t s = brisk_kv_hyb_unit(kv, src, 0, 0), d = brisk_kv_hyb_unit(kv, dst, 0, 0);
    memcpy(kv->hyb_slot + d * cap, kv->hyb_slot + s * cap, U * cap * sizeof(int32_t));
    memcpy(kv->hyb_mass + d * cap, kv->hyb_mass + s * cap, U * cap * sizeof(int64_t));
    memcpy(kv->hyb_wmass + d * BRISK_KV_BLOCK, kv->hyb_wmass + s * BRISK_KV_BLOCK, U * BRISK_KV_BLOCK * sizeof(int64_t));
    memcpy(kv->hyb_order + d * cap, kv->hyb_order + s * cap, U * cap * sizeof(int16_t));
    memcpy(kv->hyb_n + d, kv->hyb_n + s, U * sizeof(int32_t));
    memcpy(kv->hyb_k + d * cap * (size_t)kv->head_dim, kv->hyb_k + s * cap * (size_t)kv->head_dim, U * cap * (size_t)kv->head_dim * sizeof(uint16_t));
    memcpy(kv->hyb_v + d * cap * (size_t)kv->head_dim_v, kv->hyb_v + s * cap * (size_t)kv->head_dim_v,
           U * cap * (size_t)kv->head_dim_v * sizeof(uint16_t));
}
