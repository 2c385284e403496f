/* attention: causal attention of a batch's tokens over the paged KV cache,
 * per (token, KV head), with llama.cpp's tiled flash-attention numerics (see
 * brisk_fwd_attn_worker), optional score softcap, window masks and learned
 * per-head sink logits. */
#include "model/forward_impl.h"
#include "kv/policy.h"
#include "quant/blocks.h"
#include "quant/convert.h"

#include <math.h>
#include <string.h>


/* One sequence of several tokens: widen its K once per layer into kt (exact
 * F16 -> F32), 16 positions of one dimension contiguous as in the cache, so
 * each K row serves all the batch's queries without a conversion per query.
 * kt_widen does dimensions [lo, hi) of all KV heads. */
static void kt_widen(const attn_task *at, int64_t lo, int64_t hi) {
    const brisk_forward *f = at->f;
    const brisk_kv *kv = at->kv;
    const int32_t seq = at->b->seq[0], hd = kv->head_dim;
    for (int64_t e = lo; e < hi; e++) {
        const int32_t h = (int32_t)(e / hd), i = (int32_t)(e - (int64_t)h * hd);
        float *dst = (float *)at->kt + (size_t)e * (size_t)f->kt_stride;
        for (int32_t p = 0; p < at->kt_len; p += 16) {   /* 16 positions (half a KV block) at a time */
            if (p >= at->kt_skip0 && p + 16 <= at->kt_skip1) continue;
            const int32_t n = at->kt_len - p < 16 ? at->kt_len - p : 16;
            if (kv->k_type == BRISK_KV_F16) {
                const uint16_t *src = brisk_kv_k(kv, at->layer, seq, p, h) + (size_t)i * BRISK_KV_BLOCK;
                for (int32_t l = 0; l < n; l++) dst[p + l] = f->f16_lut[src[l]];
            } else {   /* another storage type: its exact values (kv.h), as the kernels dequantize them */
                const uint8_t *part = brisk_kv_k_part(kv, at->layer, seq, p, h);
                for (int32_t l = 0; l < n; l++) dst[p + l] = brisk_kv_k_value(kv, part, (p + l) % BRISK_KV_BLOCK, i);
            }
        }
    }
}

/* The widening as its own step, split over (kv head, dimension) rows: all of
 * the batch's tokens read every KV head's rows. */
void brisk_fwd_kt_worker(void *ctx, int ith, int nth) {
    const attn_task *at = ctx;
    int64_t lo, hi;
    brisk_split_range((int64_t)at->f->kvdim, ith, nth, &lo, &hi);
    kt_widen(at, lo, hi);
}

/* The item's m queries (head_dim apart) and, for a Q8_0/Q4_0 K, the same in
 * Q8_0 (codes, and scales head_dim / 32 apart: kernels.h kq_multi_q8_0). */
typedef struct {
    const float *q;
    const int16_t *codes;
    const float *scales;
    /* hyb: the scores of the KV head's hot rows (row r of head h at
     * hs[h * hs_stride + r], before any softcap), or NULL */
    const float *hs;
    size_t hs_stride;
} attn_query;

/* A tree token's position j (base <= j <= its own position) is held in slot
 * anc[j - base]; cached positions j < base in slot j. */
static inline int32_t slot_of(int32_t j, int32_t base, const int32_t *anc) { return j < base ? j : anc[j - base]; }

/* K rows of positions j.. j+n-1 (head kvh) copied in position order into the
 * 16-row scratch kg (row l: head_dim elements) for one kq16 call; rows
 * n..15 are zero (their scores are discarded). */
static void gather_k16(uint16_t *kg, const attn_task *at, int32_t seq, int32_t kvh, int hd, int32_t j, int32_t n, int32_t base,
                       const int32_t *anc) {
    for (int32_t l = 0; l < 16; l++) {
        if (l < n) {
            const uint16_t *kr = brisk_kv_k(at->kv, at->layer, seq, slot_of(j + l, base, anc), kvh);
            for (int i = 0; i < hd; i++) kg[(size_t)l * hd + i] = kr[(size_t)i * BRISK_KV_BLOCK];
        } else memset(kg + (size_t)l * hd, 0, (size_t)hd * sizeof(uint16_t));
    }
}

/* Causal attention for (token, head) pairs, with the numerics of llama.cpp's
 * CPU flash attention for prompt batches (ggml_compute_forward_flash_attn_ext_tiled):
 * F32 throughout (K/V widened from the F16 cache), KV processed in tiles of
 * ATTN_TILE positions aligned to absolute position 0, an online softmax per
 * tile (running max M and unnormalised sum S, exp: brisk_expf, glibc's expf
 * bit for bit on x86-64), and the weighted sum of V
 * divided by S at the end. Matching those roundings matters: the quantized
 * golden models amplify tiny attention differences (llama.cpp's own flash and
 * non-flash paths differ by KL 1.4e-4 on llama-tiny-Q8_0). Tiles are fixed by
 * position, so the result does not depend on the batch. */

/* k4/k2 K (kv.h): a query reads the entries of its own block (from fresh0,
 * the block's first entry) in F16 from the block's staging, the entries
 * before in the sealed blocks' quantized form, so what it sees of a key does
 * not depend on how the tokens were batched. The fast paths (kt, kq_cached)
 * read entries below cached_lim: base for the other types; for k4/k2 fresh0,
 * or, for a tree token whose path crossed into a new block past the cached
 * part, the start of base's block (the entries from there to fresh0 are read
 * as the chain would have sealed them: kivi_virtual). */
static inline int32_t kivi_fresh0(int32_t n_vis) { return (n_vis - 1) / BRISK_KV_BLOCK * BRISK_KV_BLOCK; }

static inline int32_t cached_lim(const brisk_kv *kv, int32_t n_vis, int32_t base) {
    if (!brisk_kv_type_kivi(kv->k_type)) return base;
    const int32_t f0 = kivi_fresh0(n_vis);
    return f0 <= base ? f0 : base / BRISK_KV_BLOCK * BRISK_KV_BLOCK;
}

/* Element i of entry e of a tree token's crossed block: the block of its
 * path's 32 entries (cached slots, then ancestors, all still staged) sealed
 * as a chain decode seals it, with the same quantizer. */
static float kivi_virtual(const attn_task *at, int32_t seq, int32_t kvh, int32_t e, int32_t i, int32_t base, const int32_t *anc) {
    const int32_t vb0 = e / BRISK_KV_BLOCK * BRISK_KV_BLOCK;
    float x[BRISK_KV_BLOCK];
    for (int32_t l = 0; l < BRISK_KV_BLOCK; l++)
        x[l] = brisk_fp16_to_fp32(brisk_kv_k_stage(at->kv, at->layer, seq, slot_of(vb0 + l, base, anc), kvh)[(size_t)i * BRISK_KV_BLOCK]);
    uint16_t d, m;
    uint8_t c[BRISK_KV_BLOCK];
    brisk_kivi_quantize32(x, at->kv->k_type == BRISK_KV_K4 ? 4 : 2, &d, &m, c);
    return (float)c[e - vb0] * brisk_fp16_to_fp32(d) + brisk_fp16_to_fp32(m);
}

/* One (token, query head) of brisk_fwd_attn_worker's group: the scores of tile j0..j0+n-1
 * from group position j on (what the kq_multi kernels did not cover: a tree
 * token's own branch), into kq: gathered into rows for kq16, the last partial
 * group through kq16 as well, and the scalar loop without a kernel table. */
static void attn_scores(const attn_task *at, const float *q, const int16_t *codes, const float *scales, int32_t seq, int32_t kvh, int32_t j0,
                        int32_t j, int32_t n, int32_t n_vis, int32_t base, const int32_t *anc, uint16_t *kg, float scale, float *kq) {
    const brisk_forward *f = at->f;
    const brisk_attn_kernels *g = f->ak;
    const int hd = f->m->hp.head_dim;
    const bool f16 = at->kv->k_type == BRISK_KV_F16;   /* other types: the scalar loop below, on their exact values */
    const bool kivi = brisk_kv_type_kivi(at->kv->k_type);
    const int32_t fresh0 = kivi_fresh0(n_vis), lim = cached_lim(at->kv, n_vis, base);
    if ((hd % 2) == 0 && f16)   /* groups of 16 positions, gathered into rows */
        for (; j + 16 <= n; j += 16) {
            gather_k16(kg, at, seq, kvh, hd, j0 + j, 16, base, anc);
            g->kq16(q, kg, (size_t)hd, hd, scale, kq + j);
        }
    if ((hd % 2) == 0 && f16 && j < n) {
        /* the last partial group of 16: its rows gathered, the rest zero, one
         * kq16 (each lane is the scalar loop's exact chain) instead of n - j
         * serial dot products */
        const int32_t left = n - j;
        float part[16];
        gather_k16(kg, at, seq, kvh, hd, j0 + j, left, base, anc);
        g->kq16(q, kg, (size_t)hd, hd, scale, part);
        memcpy(kq + j, part, (size_t)left * sizeof(float));
        j = n;
    }
    for (; j < n; j++) {
        const int32_t sl = slot_of(j0 + j, base, anc);
        float s = 0.0f;
        if (f16 || (kivi && j0 + j >= fresh0)) {   /* k4/k2: the query's own block, staged */
            const uint16_t *kr = f16 ? brisk_kv_k(at->kv, at->layer, seq, sl, kvh) : brisk_kv_k_stage(at->kv, at->layer, seq, sl, kvh);
            for (int i = 0; i < hd; i++) s += q[i] * f->f16_lut[kr[(size_t)i * BRISK_KV_BLOCK]];
        } else if (kivi && j0 + j >= lim) {
            for (int i = 0; i < hd; i++) s += q[i] * kivi_virtual(at, seq, kvh, j0 + j, i, base, anc);
        } else if (brisk_kv_type_int_dot(at->kv->k_type)) {   /* the kernels' integer dot (kernels.h), same bits */
            s = brisk_kq_q_slot(codes, scales, brisk_kv_k_part(at->kv, at->layer, seq, sl, kvh), sl % BRISK_KV_BLOCK, hd,
                                at->kv->k_type == BRISK_KV_Q4_0);
        } else {
            const uint8_t *part = brisk_kv_k_part(at->kv, at->layer, seq, sl, kvh);
            for (int i = 0; i < hd; i++) s += q[i] * brisk_kv_k_value(at->kv, part, sl % BRISK_KV_BLOCK, i);
        }
        kq[j] = s * scale;
    }
}

/* hyb4/hyb2 (kv/hyb.c): the scores of every hot row of the item's KV head
 * below the query's own block (fresh0) for its m heads, into hs (head h at
 * hs + h * stride): the rows are stored in groups of 16 transposed as the
 * cache's K, so one kq_multi_h per group, each lane the scalar loop's exact
 * chain (the loop attn_scores runs for a staged entry). Once per item: the
 * tiles and the statistics read them. */
static void hyb_hot_scores(const attn_task *at, const attn_query *aq, int m, int32_t seq, int32_t kvh, int32_t fresh0, float *hs,
                           size_t stride) {
    const brisk_kv *kv = at->kv;
    const int hd = at->f->m->hp.head_dim;
    const int32_t *rslot = kv->hyb_slot + brisk_kv_hyb_unit(kv, seq, at->layer, kvh) * (size_t)kv->hyb_cap;
    BRISK_ASSERT((size_t)kv->hyb_cap <= stride);
    for (int32_t r0 = 0; r0 < kv->hyb_cap; r0 += 16) {
        bool any = false;
        for (int32_t l = 0; l < 16 && !any; l++) any = rslot[r0 + l] >= 0 && rslot[r0 + l] < fresh0;
        if (any) at->f->ak->kq_multi_h(aq->q, (size_t)hd, m, brisk_kv_hyb_kt(kv, seq, at->layer, kvh, r0), 16, 1, hd, at->scale, hs + r0, stride,
                                       NULL);
    }
}

/* hyb: the hot entries among [j0, j0 + n) (all below the query's own block,
 * which the fast paths scored quantized) take their hot rows' scores. */
static void hyb_scores(const attn_task *at, const attn_query *aq, int m, int32_t seq, int32_t kvh, int32_t j0, int32_t n, float (*kq)[ATTN_TILE]) {
    const brisk_kv *kv = at->kv;
    const size_t u = brisk_kv_hyb_unit(kv, seq, at->layer, kvh);
    const int16_t *ord = kv->hyb_order + u * (size_t)kv->hyb_cap;
    const int32_t *rslot = kv->hyb_slot + u * (size_t)kv->hyb_cap;
    for (int32_t i = brisk_kv_hyb_lower(kv, u, j0); i < kv->hyb_n[u] && rslot[ord[i]] < j0 + n; i++)
        for (int h = 0; h < m; h++) kq[h][rslot[ord[i]] - j0] = aq->hs[(size_t)h * aq->hs_stride + (size_t)ord[i]];
}

/* hyb: key l of a group of 16 into kg, transposed as the cache's K (element
 * i at kg[i * 16 + l]) from an F16 row with element i at k[i * stride]; NULL:
 * zeros (a lane whose score is ignored). */
static void hyb_gather(uint16_t *kg, int32_t l, const uint16_t *k, size_t stride, int hd) {
    for (int i = 0; i < hd; i++) kg[(size_t)i * 16 + (size_t)l] = k ? k[(size_t)i * stride] : 0;
}

/* Scores of the m heads over ng groups of 16 cached slots from position p
 * (inside one KV block) straight from the cache's K in its storage type. */
static void kq_cached(const attn_task *at, const attn_query *aq, int hd, int m, int32_t seq, int32_t kvh, int32_t p, int32_t ng, float scale,
                      float *out, brisk_attn_pf *pf) {
    const float *q = aq->q;
    const brisk_attn_kernels *g = at->f->ak, *r = brisk_attn_ref();
    const brisk_kv *kv = at->kv;
    const int slot0 = p % BRISK_KV_BLOCK;
    switch (kv->k_type) {
    case BRISK_KV_F16:
        g->kq_multi_h(q, (size_t)hd, m, brisk_kv_k(kv, at->layer, seq, p, kvh), BRISK_KV_BLOCK, ng, hd, scale, out, ATTN_TILE, pf);
        break;
    case BRISK_KV_F32:
        g->kq_multi_t(q, (size_t)hd, m, (const float *)(const void *)brisk_kv_k_part(kv, at->layer, seq, p, kvh) + slot0, BRISK_KV_BLOCK,
                      ng, hd, scale, out, ATTN_TILE);
        break;
    case BRISK_KV_Q8_0:
        (g->kq_multi_q8_0 ? g->kq_multi_q8_0 : r->kq_multi_q8_0)(aq->codes, aq->scales, (size_t)hd, m, brisk_kv_k_part(kv, at->layer, seq, p, kvh),
                                                                 slot0, ng, hd, scale, out, ATTN_TILE, pf);
        break;
    case BRISK_KV_Q4_0:
        (g->kq_multi_q4_0 ? g->kq_multi_q4_0 : r->kq_multi_q4_0)(aq->codes, aq->scales, (size_t)hd, m, brisk_kv_k_part(kv, at->layer, seq, p, kvh),
                                                                 slot0, ng, hd, scale, out, ATTN_TILE, pf);
        break;
    case BRISK_KV_K4:   /* sealed blocks only (cached_lim) */
        (g->kq_multi_k4 ? g->kq_multi_k4 : r->kq_multi_k4)(q, (size_t)hd, m, brisk_kv_k_part(kv, at->layer, seq, p, kvh), slot0, ng, hd,
                                                           scale, out, ATTN_TILE);
        break;
    case BRISK_KV_K2:
        (g->kq_multi_k2 ? g->kq_multi_k2 : r->kq_multi_k2)(q, (size_t)hd, m, brisk_kv_k_part(kv, at->layer, seq, p, kvh), slot0, ng, hd,
                                                           scale, out, ATTN_TILE);
        break;
    }
}

/* o[h] += p[h][j] * V row j for the m heads (o_stride floats apart) over n
 * V rows from vrow (rows of one KV block, or n = 1), V in its storage type;
 * hd is V's head size. */
static void v_rows(const attn_task *at, float *o, size_t o_stride, int hd, int m, const float *p, const uint8_t *vrow, int32_t n,
                   brisk_attn_pf *pf) {
    const brisk_attn_kernels *g = at->f->ak, *r = brisk_attn_ref();
    const size_t rb = at->kv->v_part / BRISK_KV_BLOCK;
    switch (at->kv->v_type) {
    case BRISK_KV_F16:
        g->axpy_f16_rows_multi(o, o_stride, m, p, ATTN_TILE, (const uint16_t *)(const void *)vrow, (size_t)hd, n, hd, pf);
        break;
    case BRISK_KV_F32:
        (g->axpy_f32_rows_multi ? g->axpy_f32_rows_multi : r->axpy_f32_rows_multi)(o, o_stride, m, p, ATTN_TILE,
                                                                                   (const float *)(const void *)vrow, (size_t)hd, n, hd);
        break;
    case BRISK_KV_Q8_0:
        (g->axpy_q8_0_rows_multi ? g->axpy_q8_0_rows_multi : r->axpy_q8_0_rows_multi)(o, o_stride, m, p, ATTN_TILE, vrow, rb, n, hd, pf);
        break;
    case BRISK_KV_Q4_0:
        (g->axpy_q4_0_rows_multi ? g->axpy_q4_0_rows_multi : r->axpy_q4_0_rows_multi)(o, o_stride, m, p, ATTN_TILE, vrow, rb, n, hd, pf);
        break;
    case BRISK_KV_K4:
        (g->axpy_k4_rows_multi ? g->axpy_k4_rows_multi : r->axpy_k4_rows_multi)(o, o_stride, m, p, ATTN_TILE, vrow, rb, n, hd);
        break;
    case BRISK_KV_K2:
        (g->axpy_k2_rows_multi ? g->axpy_k2_rows_multi : r->axpy_k2_rows_multi)(o, o_stride, m, p, ATTN_TILE, vrow, rb, n, hd);
        break;
    }
}

/* The scores of tile j0 (n entries) of the item's m heads (queries q, hd
 * apart) into kq[h][0, n): the cached groups straight from kt or the cache,
 * all heads per call; the rest (a tree token's own branch) by attn_scores;
 * then the softcap and the window's mask [mask0, mask1). The statistics pass
 * calls it again for the same bits. */
static void tile_scores(const attn_task *at, const attn_query *aq, int m, int32_t seq, int32_t kvh, int32_t j0, int32_t n, int32_t n_vis,
                        int32_t base, const int32_t *anc, uint16_t *kg, float (*kq)[ATTN_TILE], int32_t mask0, int32_t mask1,
                        brisk_attn_pf *pf) {
    const float *q = aq->q;
    const brisk_forward *f = at->f;
    const brisk_attn_kernels *g = f->ak;
    const int hd = f->m->hp.head_dim;
    const float scale = at->scale, softcap = at->softcap;
    const int32_t lim = cached_lim(at->kv, n_vis, base);   /* the entries the fast paths read: base, or less for k4/k2 */
    int32_t j = 0;
    if (at->kt) {
        /* kt holds the cached positions (a tree token's own branch comes
         * after base): their groups, all heads in one call; when the
         * whole tile is cached its last partial group too (kt has room
         * past it: the lanes past n are computed and ignored) */
        int32_t ng = 0;
        while (j + 16 * (ng + 1) <= n && j0 + 16 * (ng + 1) <= lim) ng++;
        if (16 * ng < n && j0 + n <= lim && j0 + 16 * (ng + 1) <= f->kt_stride) ng++;
        if (ng) g->kq_multi_t(q, (size_t)hd, m, at->kt + (size_t)kvh * hd * f->kt_stride + (size_t)j0, (size_t)f->kt_stride, ng, hd, scale,
                              kq[0], ATTN_TILE);
        j = 16 * ng < n ? 16 * ng : n;
    } else {
        /* straight from the cache's transposed K: the cached groups,
         * a block's (up to two) per call, all heads; when the whole
         * tile is cached its last partial group too (the block has
         * the slots: the lanes past n are computed and ignored) */
        while (j < n) {
            const int32_t p = j0 + j, in_block = BRISK_KV_BLOCK - p % BRISK_KV_BLOCK;
            int32_t ng = 0;
            while (16 * (ng + 1) <= in_block && j + 16 * (ng + 1) <= n && p + 16 * (ng + 1) <= lim) ng++;
            if (16 * ng < in_block && j + 16 * ng < n && j + 16 * (ng + 1) > n && j0 + n <= lim) ng++;
            if (!ng) break;
            kq_cached(at, aq, hd, m, seq, kvh, p, ng, scale, kq[0] + j, pf);
            j += 16 * ng;
        }
        j = j < n ? j : n;
    }
    if (at->kv->hyb) hyb_scores(at, aq, m, seq, kvh, j0, BRISK_MIN(BRISK_MIN(n, lim - j0), j), kq);
    for (int h = 0; h < m; h++) {
        attn_scores(at, q + (size_t)h * hd, aq->codes ? aq->codes + (size_t)h * hd : NULL, aq->scales ? aq->scales + (size_t)h * (hd / 32) : NULL,
                    seq, kvh, j0, j, n, n_vis, base, anc, kg, scale, kq[h]);
        if (softcap != 0.0f)   /* as ggml's flash attention: tanh of the scaled score, times the cap */
            for (int32_t i = 0; i < n; i++) kq[h][i] = softcap * tanhf(kq[h][i]);
        for (int32_t i = mask0; i < mask1; i++) kq[h][i] = -INFINITY;   /* exp gives 0: no weight */
    }
}

/* A scored retention policy's statistics (kv/policy.h): after an observed
 * query's tiles are done (M, S final), each entry's probability under each of
 * the item's m heads, exp(score - M) / (S + the sink's share), summed over
 * the heads and added to the sequence's mass (per-head: the KV head's own)
 * in fixed point. The scores are
 * recomputed by tile_scores, so the output is untouched; the adds are integer
 * atomics, so their order (threads, other items, layers) does not matter and
 * the sums are batch invariant. Only tokens in position order are observed
 * (direct: entry j is slot j). */
static void observe_item(const attn_task *at, int32_t t, const attn_query *aq, int m, int32_t seq, int32_t kvh, int32_t h0, int32_t n_vis, int32_t base,
                         const int32_t *anc, uint16_t *kg, float (*kq)[ATTN_TILE], const float *M, const float *S, int32_t vsink,
                         int32_t wlo) {
    /* per-head selection: this layer's KV head kvh has its own part of the row */
    int64_t *mass = brisk_kv_policy_mass_head(at->kv, brisk_kv_policy_mass_row(at->kv, seq, at->b->pos[t]), at->layer, kvh);
    float thr = 0.0f;
    int32_t *seen = brisk_kv_policy_seen_row(at->kv, seq, &thr);   /* memdecay: the last query that attended a slot */
    if (seen) seen = brisk_kv_policy_seen_head(at->kv, seen, at->layer, kvh);
    const int32_t qpos = at->b->pos[t];
    float inv[ATTN_HEADS];
    for (int h = 0; h < m; h++) {
        const float tot = S[h] + (at->sinks ? brisk_expf(at->sinks[h0 + h] - M[h]) : 0.0f);
        inv[h] = tot > 0.0f ? 1.0f / tot : 0.0f;
    }
    for (int32_t j0 = 0; j0 < n_vis; j0 += ATTN_TILE) {
        const int32_t n = n_vis - j0 < ATTN_TILE ? n_vis - j0 : ATTN_TILE;
        if (j0 >= vsink && j0 + n <= wlo) continue;
        tile_scores(at, aq, m, seq, kvh, j0, n, n_vis, base, anc, kg, kq, BRISK_MAX(vsink - j0, 0), BRISK_MIN(wlo - j0, n), NULL);
        for (int32_t i = 0; i < n; i++) {
            float p = 0.0f;
            bool hit = false;
            for (int h = 0; h < m; h++) {
                const float ph = brisk_expf(kq[h][i] - M[h]) * inv[h];
                p += ph;
                hit = hit || ph >= thr;
            }
            const int64_t add = (int64_t)((double)p * BRISK_KV_MASS_ONE + 0.5);
            if (add) __atomic_fetch_add(&mass[j0 + i], add, __ATOMIC_RELAXED);
            if (seen && hit) {   /* an atomic max: the same result in any order */
                int32_t cur = __atomic_load_n(&seen[j0 + i], __ATOMIC_RELAXED);
                while (cur < qpos && !__atomic_compare_exchange_n(&seen[j0 + i], &cur, qpos, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                }
            }
        }
    }
}

/* hyb4/hyb2's statistics (kv/hyb.c): the probability an observed query's m
 * heads give each entry that keeps a mass, added to it: the hot rows below
 * its own block (their scores from hyb_hot_scores) and its own block's
 * staged entries (scored again here, 16 per kernel call: the same chains as
 * the tiles'), not the whole context, as exp(score - M) / (S + the sink's
 * share), in fixed point with integer atomics (order free: batch invariant). */
static int64_t hyb_share(const attn_task *at, int m, const float *d, size_t stride, const float *M, const float *inv) {
    float p = 0.0f;
    for (int h = 0; h < m; h++) {
        const float x = at->softcap != 0.0f ? at->softcap * tanhf(d[(size_t)h * stride]) : d[(size_t)h * stride];
        p += brisk_expf(x - M[h]) * inv[h];
    }
    return (int64_t)((double)p * BRISK_KV_MASS_ONE + 0.5);
}

static void observe_hyb(const attn_task *at, const attn_query *aq, int m, int32_t seq, int32_t kvh, int32_t h0, int32_t n_vis, const float *M,
                        const float *S, int32_t vsink, int32_t wlo, uint16_t *kg) {
    const brisk_kv *kv = at->kv;
    const int hd = at->f->m->hp.head_dim;
    const int32_t fresh0 = kivi_fresh0(n_vis), cap = kv->hyb_cap;
    const size_t u = brisk_kv_hyb_unit(kv, seq, at->layer, kvh);
    const int32_t *rslot = kv->hyb_slot + u * (size_t)cap;
    float inv[ATTN_HEADS];
    for (int h = 0; h < m; h++) {
        const float tot = S[h] + (at->sinks ? brisk_expf(at->sinks[h0 + h] - M[h]) : 0.0f);
        inv[h] = tot > 0.0f ? 1.0f / tot : 0.0f;
    }
    for (int32_t r = 0; r < cap; r++) {   /* the hot rows, scored once per item (a window's masked entries get nothing) */
        const int32_t sl = rslot[r];
        if (sl < 0 || sl >= fresh0 || (sl >= vsink && sl < wlo)) continue;
        const int64_t add = hyb_share(at, m, aq->hs + r, aq->hs_stride, M, inv);
        if (add) __atomic_fetch_add(&kv->hyb_mass[u * (size_t)cap + (size_t)r], add, __ATOMIC_RELAXED);
    }
    for (int32_t s0 = fresh0; s0 < n_vis; s0 += 16) {   /* its own block, staged: 16 entries per kernel call */
        const int32_t cnt = BRISK_MIN(16, n_vis - s0);
        for (int32_t l = 0; l < 16; l++) hyb_gather(kg, l, l < cnt ? brisk_kv_k_stage(kv, at->layer, seq, s0 + l, kvh) : NULL, BRISK_KV_BLOCK, hd);
        float d[ATTN_HEADS][16];
        at->f->ak->kq_multi_h(aq->q, (size_t)hd, m, kg, 16, 1, hd, at->scale, d[0], 16, NULL);
        for (int32_t l = 0; l < cnt; l++) {
            const int32_t sl = s0 + l;
            if (sl >= vsink && sl < wlo) continue;
            const int64_t add = hyb_share(at, m, &d[0][l], 16, M, inv);
            if (add) __atomic_fetch_add(&kv->hyb_wmass[u * BRISK_KV_BLOCK + (size_t)(sl % BRISK_KV_BLOCK)], add, __ATOMIC_RELAXED);
        }
    }
}

/* Reads the K and V parts of the cached blocks of tile j0 (one KV head)
 * into the cache ahead of use. A head's parts of consecutive blocks lie
 * n_head parts apart (kv.h: [layer][block][head]), a page or more, where the
 * hardware prefetchers stop: without this every block starts with misses.
 * An F16, Q8_0 or Q4_0 K and V (the kernels that take a brisk_attn_pf) get the parts as
 * pf's queue, which the current tile's kernels issue at a pace that spreads
 * it over the tile (brisk_attn_pf_pace); the other types get every line now. */
static bool pf_queued(int type) { return type == BRISK_KV_F16 || type == BRISK_KV_Q8_0 || type == BRISK_KV_Q4_0; }

static void prefetch_tile(const attn_task *at, int32_t seq, int32_t kvh, int32_t j0, int32_t base, brisk_attn_pf *pf) {
    const brisk_kv *kv = at->kv;
    _Static_assert(ATTN_TILE / BRISK_KV_BLOCK * 2 <= 4, "brisk_attn_pf holds a tile's K and V parts");
    const bool queue = pf_queued(kv->k_type) && pf_queued(kv->v_type) && !kv->hyb;
    const int32_t ticks = brisk_attn_pf_reset(pf);
    for (int32_t p = j0; p < j0 + ATTN_TILE && p < base; p += BRISK_KV_BLOCK) {
        const char *k = (const char *)brisk_kv_k_part(kv, at->layer, seq, p, kvh), *v = (const char *)brisk_kv_v_part(kv, at->layer, seq, p, kvh);
        if (queue) {   /* block by block, K then V (K-parts-first measured the same) */
            pf->base[pf->n] = k, pf->lines[pf->n] = (int32_t)(kv->k_part / 64);
            pf->base[pf->n + 1] = v, pf->lines[pf->n + 1] = (int32_t)(kv->v_part / 64);
            pf->n += 2;
            continue;
        }
        for (size_t o = 0; o < kv->k_part; o += 64) __builtin_prefetch(k + o, 0, 3);
        for (size_t o = 0; o < kv->v_part; o += 64) __builtin_prefetch(v + o, 0, 3);
    }
    brisk_attn_pf_pace(pf, ticks);
}

/* hyb4/hyb2: V of entries [pos, pos + len) of one block (tile entries i..)
 * for the m heads. The query's own block is read in F16 from its staging;
 * in a sealed block the hot rows' weights are taken out of the quantized
 * rows' call (zero) and applied to their F16 rows after it. */
static void hyb_v_rows(const attn_task *at, float *o, size_t o_stride, int hv, int m, float (*kq)[ATTN_TILE], int32_t i, int32_t pos,
                       int32_t len, int32_t seq, int32_t kvh, int32_t fresh0) {
    const brisk_attn_kernels *g = at->f->ak;
    const brisk_kv *kv = at->kv;
    if (pos >= fresh0) {
        for (int32_t l = 0; l < len; l++) {
            const uint16_t *vr = brisk_kv_v_stage(kv, at->layer, seq, pos + l, kvh);
            for (int h = 0; h < m; h++) g->axpy_f16(o + (size_t)h * o_stride, kq[h][i + l], vr, hv);
        }
        return;
    }
    const size_t u = brisk_kv_hyb_unit(kv, seq, at->layer, kvh);
    const int16_t *ord = kv->hyb_order + u * (size_t)kv->hyb_cap;
    const int32_t *rslot = kv->hyb_slot + u * (size_t)kv->hyb_cap;
    int32_t hot[BRISK_KV_BLOCK], row[BRISK_KV_BLOCK], n_hot = 0;
    for (int32_t k = brisk_kv_hyb_lower(kv, u, pos); k < kv->hyb_n[u] && rslot[ord[k]] < pos + len; k++)
        hot[n_hot] = rslot[ord[k]] - pos, row[n_hot++] = ord[k];
    if (!n_hot) {
        v_rows(at, o, o_stride, hv, m, &kq[0][i], brisk_kv_v_row(kv, at->layer, seq, pos, kvh), len, NULL);
        return;
    }
    float w[ATTN_HEADS][ATTN_TILE];
    for (int h = 0; h < m; h++) {
        memcpy(w[h], &kq[h][i], (size_t)len * sizeof(float));
        for (int32_t x = 0; x < n_hot; x++) w[h][hot[x]] = 0.0f;
    }
    v_rows(at, o, o_stride, hv, m, w[0], brisk_kv_v_row(kv, at->layer, seq, pos, kvh), len, NULL);
    for (int32_t x = 0; x < n_hot; x++) {
        const uint16_t *vr = brisk_kv_hyb_v(kv, seq, at->layer, kvh, row[x]);
        for (int h = 0; h < m; h++) g->axpy_f16(o + (size_t)h * o_stride, kq[h][i + hot[x]], vr, hv);
    }
}

/* One work item: a token, one of its KV heads and up to ATTN_HEADS of that
 * head's query heads (h0.., m of them), with what its tiles read. */
typedef struct {
    int32_t t, kvh, h0, seq, n_vis, base;
    int m;
    attn_query aq;
    const int32_t *anc;
} attn_item;

/* The item split of a token: n_head_kv x chunks items, item i covering
 * KV head i / chunks and up to ATTN_HEADS of its query heads (*h0.., *m of
 * them). Returns the items per token. */
static int item_heads(const brisk_hparams *hp, int32_t i, int32_t *kvh, int32_t *h0, int *m) {
    const int gqa = hp->n_head / hp->n_head_kv, per = gqa < ATTN_HEADS ? gqa : ATTN_HEADS, chunks = (gqa + per - 1) / per;
    if (kvh) {
        *kvh = i / chunks;
        *h0 = *kvh * gqa + (i % chunks) * per;
        *m = gqa - (i % chunks) * per < per ? gqa - (i % chunks) * per : per;
    }
    return hp->n_head_kv * chunks;
}

/* Item i of token t (i < n_kv * chunks): its heads, entries, ancestors (a
 * tree token reads its ancestors' rows, wherever the batch put them, in
 * position order, so every operation is the one a chain decode of its path
 * performs) and, for a Q8_0/Q4_0 K, its queries in Q8_0 (as llama.cpp scores
 * a quantized K), in thread ith's scratch. *anc_tok: the token whose
 * ancestors the thread's anc holds. */
static void item_setup(const attn_task *at, int ith, int32_t t, int32_t i, int32_t *anc_tok, attn_item *it) {
    brisk_forward *f = at->f;
    const brisk_hparams *hp = &f->m->hp;
    const int hd = hp->head_dim;
    it->t = t;
    item_heads(hp, i, &it->kvh, &it->h0, &it->m);
    it->seq = at->b->seq[t];
    it->n_vis = f->vis[t] + 1;   /* entries it attends to, itself last */
    it->base = f->direct[t] ? it->n_vis : f->tbase[t];
    int32_t *anc = f->anc + (size_t)ith * (size_t)f->n_batch;
    if (!f->direct[t] && *anc_tok != t) {
        for (int32_t u = t; u >= 0; u = f->par[u]) anc[f->vis[u] - it->base] = f->slot[u];
        *anc_tok = t;
    }
    it->anc = anc;
    const float *q = f->q + (size_t)t * f->qdim + (size_t)it->h0 * hd;
    it->aq = (attn_query){.q = q};
    if (brisk_kv_type_int_dot(at->kv->k_type)) {
        int16_t *codes = f->q8_codes + (size_t)ith * ATTN_HEADS * (size_t)hd;
        float *scales = f->q8_scales + (size_t)ith * ATTN_HEADS * (size_t)(hd / 32 + 1);
        for (int h = 0; h < it->m; h++)
            for (int b = 0; b < hd / 32; b++) {
                brisk_block_q8_0 blk;
                brisk_q8_0_quantize_x86(q + (size_t)h * hd + 32 * b, &blk, 32);
                scales[(size_t)h * (hd / 32) + (size_t)b] = brisk_fp16_to_fp32(blk.d);
                for (int e = 0; e < 32; e++) codes[(size_t)h * hd + (size_t)(32 * b + e)] = blk.qs[e];
            }
        it->aq.codes = codes;
        it->aq.scales = scales;
    }
}

/* The item's tiles over entries [lo, hi) (lo a multiple of ATTN_TILE) from
 * an empty state: the unnormalised output of its m heads into o (head h at
 * o + h * o_stride), their running maxima M and sums S. The tiles run the
 * heads side by side, so each K and V row is read and widened once for all
 * of them, and their independent chains fill the pipeline; every head's
 * arithmetic is still the one-head loop's, in its order. */
static void run_tiles(const attn_task *at, int ith, const attn_item *it, int32_t lo, int32_t hi, float *o, size_t o_stride, float *M, float *S) {
    brisk_forward *f = at->f;
    const brisk_attn_kernels *g = f->ak;
    /* hv: V's and the output's head size (K's differs only for multi-head
     * latent attention, where V holds K's first hv values) */
    const int hv = f->m->hp.head_dim_v, m = it->m;
    const int32_t seq = it->seq, kvh = it->kvh, n_vis = it->n_vis, base = it->base, t = it->t;
    const int32_t *anc = it->anc;
    uint16_t *kg = f->kgather + (size_t)ith * 16 * (size_t)f->m->hp.head_dim;
    float kq[ATTN_HEADS][ATTN_TILE];
    brisk_attn_pf pf = {.n = 0};
    for (int h = 0; h < m; h++) {
        memset(o + (size_t)h * o_stride, 0, (size_t)hv * sizeof(float));
        M[h] = -INFINITY, S[h] = 0.0f;
    }
    const int32_t vsink = at->vsink[t], wlo = at->vlo[t];   /* entries vsink .. wlo - 1 are masked (none without a window) */
    for (int32_t j0 = lo; j0 < hi; j0 += ATTN_TILE) {
        const int32_t n = hi - j0 < ATTN_TILE ? hi - j0 : ATTN_TILE;
        if (j0 >= vsink && j0 + n <= wlo) continue;   /* a whole tile outside the window */
        if (!at->kt) prefetch_tile(at, seq, kvh, j0 + ATTN_TILE, base, &pf);   /* with kt, pf stays empty */
        const int32_t mask0 = BRISK_MAX(vsink - j0, 0), mask1 = BRISK_MIN(wlo - j0, n);   /* masked [mask0, mask1) */
        tile_scores(at, &it->aq, m, seq, kvh, j0, n, n_vis, base, anc, kg, kq, mask0, mask1, &pf);
        for (int h = 0; h < m; h++) {
            /* sixteen independent max chains, four per vector (max is exact
             * in any order; ties between 0 and -0 give the same exp below) */
            float mx[16], tile_max = -INFINITY;
            for (int l = 0; l < 16; l++) mx[l] = -INFINITY;
            int32_t i = 0;
            for (; i + 16 <= n; i += 16)
                for (int l = 0; l < 16; l++) mx[l] = kq[h][i + l] > mx[l] ? kq[h][i + l] : mx[l];
            for (; i < n; i++) tile_max = kq[h][i] > tile_max ? kq[h][i] : tile_max;
            for (int l = 0; l < 16; l++) tile_max = mx[l] > tile_max ? mx[l] : tile_max;
            const float Mnew = M[h] > tile_max ? M[h] : tile_max;
            if (Mnew > M[h]) {
                const float ms = brisk_expf(M[h] - Mnew);
                float *oh = o + (size_t)h * o_stride;
                for (int e = 0; e < hv; e++) oh[e] *= ms;
                S[h] *= ms;
            }
            M[h] = Mnew;
        }
        /* each head's exponentials and their sum (brisk_exp_sub's fixed
         * order of eight partial sums in double) */
        for (int h = 0; h < m; h++) S[h] += (float)f->exp_sub(kq[h], n, M[h]);
        for (int32_t i = 0; i < n; i++) {
            if (i == mask0 && mask1 > mask0) {   /* masked rows add nothing (not even a signed zero) */
                i = mask1 - 1;
                continue;
            }
            if (j0 + i < base) {
                /* cached positions: the rest of this KV block (rows row apart) in one call */
                const int32_t at_pos = j0 + i, blk_left = BRISK_KV_BLOCK - at_pos % BRISK_KV_BLOCK;
                int32_t len = n - i < blk_left ? n - i : blk_left;
                len = base - at_pos < len ? base - at_pos : len;
                if (i < mask0 && mask1 > mask0) len = BRISK_MIN(len, mask0 - i);
                if (at->kv->hyb) hyb_v_rows(at, o, o_stride, hv, m, kq, i, at_pos, len, seq, kvh, kivi_fresh0(n_vis));
                else v_rows(at, o, o_stride, hv, m, &kq[0][i], brisk_kv_v_row(at->kv, at->layer, seq, at_pos, kvh), len, &pf);
                i += len - 1;
                continue;
            }
            const int32_t sl = slot_of(j0 + i, base, anc);
            if (at->kv->v_type == BRISK_KV_F16) {
                const uint16_t *vr = brisk_kv_v(at->kv, at->layer, seq, sl, kvh);
                for (int h = 0; h < m; h++) g->axpy_f16(o + (size_t)h * o_stride, kq[h][i], vr, hv);
            } else v_rows(at, o, o_stride, hv, m, &kq[0][i], brisk_kv_v_row(at->kv, at->layer, seq, sl, kvh), 1, NULL);
        }
    }
}

/* Flash-decoding's merge of one split into the running state, in split
 * order: the state's and the split's outputs and sums, each rescaled to the
 * larger maximum (one of the two factors is exactly 1), added. A split every
 * entry of which is masked (M = -inf) adds nothing. One scalar function
 * compiled once, so a split merged on the thread that computed it and one
 * merged after a parallel step give the same bits. */
static void merge_split(int m, int hv, float *o, size_t o_stride, float *M, float *S, const float *os, size_t os_stride, const float *Ms,
                        const float *Ss) {
    for (int h = 0; h < m; h++) {
        if (Ms[h] == -INFINITY) continue;
        const float Mn = M[h] > Ms[h] ? M[h] : Ms[h];
        const float a = M[h] == Mn ? 1.0f : brisk_expf(M[h] - Mn), b = Ms[h] == Mn ? 1.0f : brisk_expf(Ms[h] - Mn);
        float *oh = o + (size_t)h * o_stride;
        const float *sh = os + (size_t)h * os_stride;
        for (int e = 0; e < hv; e++) oh[e] = oh[e] * a + sh[e] * b;
        S[h] = S[h] * a + Ss[h] * b;
        M[h] = Mn;
    }
}

/* After the last tile (and merge): each head's sink logit, then the division by S. */
static void finish_item(const attn_task *at, const attn_item *it, float *o, const float *M, const float *S) {
    const int hv = at->f->m->hp.head_dim_v;
    for (int h = 0; h < it->m; h++) {
        float *oh = o + (size_t)h * hv, s = S[h];
        if (at->sinks) {
            /* the head's sink logit joins the denominator as a key with
             * no value, after every tile (ggml's flash attention with
             * sinks: S = S * ms + vs, which its FMA build contracts) */
            const float sk = at->sinks[it->h0 + h];
            if (sk > M[h]) {
                const float ms = brisk_expf(M[h] - sk);
                for (int e = 0; e < hv; e++) oh[e] *= ms;
                s = fmaf(s, ms, 1.0f);
            } else {
                s += brisk_expf(sk - M[h]);
            }
        }
        const float inv = s == 0.0f ? 0.0f : 1.0f / s;
        for (int e = 0; e < hv; e++) oh[e] *= inv;
    }
}

/* Entries of the item's split s: [s * split, min((s + 1) * split, n_vis)). */
static inline int32_t n_splits(const brisk_forward *f, int32_t n_vis) { return (n_vis + f->attn_split - 1) / f->attn_split; }

/* Causal attention, one thread's items. Items are (token, KV head, up to
 * ATTN_HEADS of its query heads). A token's entries are attended in splits of
 * f->attn_split (a fixed multiple of ATTN_TILE, by entry index: never by
 * thread count or batch), each from an empty state, merged in split order
 * (merge_split), so a token with more entries than one split gets the same
 * bits whether its splits run here one after the other or side by side in
 * brisk_fwd_attn_split_worker; with one split (every context up to
 * attn_split) nothing is merged, and the bits are those of a single chain. */
void brisk_fwd_attn_worker(void *ctx, int ith, int nth) {
    const attn_task *at = ctx;
    brisk_forward *f = at->f;
    const brisk_hparams *hp = &f->m->hp;
    const int hv = hp->head_dim_v, n_items_tok = item_heads(hp, 0, NULL, NULL, NULL);
    float *os = f->split_o + (size_t)ith * ATTN_HEADS * (size_t)hv;
    float M[ATTN_HEADS], S[ATTN_HEADS], Ms[ATTN_HEADS], Ss[ATTN_HEADS];
    int32_t anc_tok = -1;
    /* items round robin: an item's work grows with its token's position, so
     * contiguous ranges gave the last thread ~3x the first one's in a prefill */
    const int64_t n_items = (int64_t)at->b->n * n_items_tok;
    for (int64_t item = ith; item < n_items; item += nth) {
        if (at->wave >= 0 && f->wave[item / n_items_tok] != at->wave) continue;   /* hyb: another wave's token */
        attn_item it;
        item_setup(at, ith, (int32_t)(item / n_items_tok), (int32_t)(item % n_items_tok), &anc_tok, &it);
        if (at->kv->hyb) {   /* the hot rows' scores, for the tiles and the statistics */
            float *hs = f->hyb_hs + (size_t)ith * ATTN_HEADS * (size_t)f->hyb_hs_cap;
            hyb_hot_scores(at, &it.aq, it.m, it.seq, it.kvh, kivi_fresh0(it.n_vis), hs, (size_t)f->hyb_hs_cap);
            it.aq.hs = hs, it.aq.hs_stride = (size_t)f->hyb_hs_cap;
        }
        float *o = f->att + (size_t)it.t * f->odim + (size_t)it.h0 * hv;
        const int32_t ns = n_splits(f, it.n_vis);
        run_tiles(at, ith, &it, 0, BRISK_MIN(it.n_vis, f->attn_split), o, (size_t)hv, M, S);
        for (int32_t s = 1; s < ns; s++) {
            run_tiles(at, ith, &it, s * f->attn_split, BRISK_MIN(it.n_vis, (s + 1) * f->attn_split), os, (size_t)hv, Ms, Ss);
            merge_split(it.m, hv, o, (size_t)hv, M, S, os, (size_t)hv, Ms, Ss);
        }
        if (f->observe && f->observe[it.t]) {
            float kq[ATTN_HEADS][ATTN_TILE];
            uint16_t *kg = f->kgather + (size_t)ith * 16 * (size_t)hp->head_dim;
            if (at->kv->hyb) observe_hyb(at, &it.aq, it.m, it.seq, it.kvh, it.h0, it.n_vis, M, S, at->vsink[it.t], at->vlo[it.t], kg);
            else observe_item(at, it.t, &it.aq, it.m, it.seq, it.kvh, it.h0, it.n_vis, it.base, it.anc, kg, kq, M, S, at->vsink[it.t], at->vlo[it.t]);
        }
        finish_item(at, &it, o, M, S);
    }
}

/* A split's state in f->split_part: token t (< ATTN_SPLIT_TOKENS), query
 * head h, split s: hv output values, then M and S. */
static inline float *split_state(const brisk_forward *f, int32_t t, int32_t h, int32_t s) {
    const int hv = f->m->hp.head_dim_v;
    return f->split_part + (((size_t)t * (size_t)f->m->hp.n_head + (size_t)h) * (size_t)f->split_cap + (size_t)s) * (size_t)(hv + 2);
}

/* The split items of a small batch (brisk_fwd_attn_split_plan): (token, KV
 * head, heads, split), each from an empty state into its split state, so a
 * lone decode token's long context spreads over every thread. */
void brisk_fwd_attn_split_worker(void *ctx, int ith, int nth) {
    const attn_task *at = ctx;
    brisk_forward *f = at->f;
    const brisk_hparams *hp = &f->m->hp;
    const int hv = hp->head_dim_v;
    float M[ATTN_HEADS], S[ATTN_HEADS];
    int32_t anc_tok = -1, t = 0;
    for (int64_t item = ith; item < at->split_first[at->b->n]; item += nth) {
        while (item >= at->split_first[t + 1]) t++;
        const int64_t r = item - at->split_first[t];
        const int32_t ns = n_splits(f, f->vis[t] + 1), i = (int32_t)(r / ns), s = (int32_t)(r % ns);
        attn_item it;
        item_setup(at, ith, t, i, &anc_tok, &it);
        float *st = split_state(f, t, it.h0, s);
        const size_t stride = (size_t)f->split_cap * (size_t)(hv + 2);   /* from one head's state to the next */
        run_tiles(at, ith, &it, s * f->attn_split, BRISK_MIN(it.n_vis, (s + 1) * f->attn_split), st, stride, M, S);
        for (int h = 0; h < it.m; h++) st[(size_t)h * stride + (size_t)hv] = M[h], st[(size_t)h * stride + (size_t)hv + 1] = S[h];
    }
}

/* Then, per (token, KV head, heads): the splits merged in order, as
 * brisk_fwd_attn_worker merges them, and the item finished. */
void brisk_fwd_attn_merge_worker(void *ctx, int ith, int nth) {
    const attn_task *at = ctx;
    brisk_forward *f = at->f;
    const brisk_hparams *hp = &f->m->hp;
    const int hv = hp->head_dim_v, n_items_tok = item_heads(hp, 0, NULL, NULL, NULL);
    const size_t stride = (size_t)f->split_cap * (size_t)(hv + 2);
    const int64_t n_items = (int64_t)at->b->n * n_items_tok;
    float M[ATTN_HEADS], S[ATTN_HEADS], Ms[ATTN_HEADS], Ss[ATTN_HEADS];
    for (int64_t item = ith; item < n_items; item += nth) {
        const int32_t t = (int32_t)(item / n_items_tok);
        attn_item it = {.t = t};
        item_heads(hp, (int32_t)(item % n_items_tok), &it.kvh, &it.h0, &it.m);
        const int32_t h0 = it.h0;
        const int m = it.m;
        float *o = f->att + (size_t)t * f->odim + (size_t)h0 * hv;
        const float *s0 = split_state(f, t, h0, 0);
        for (int h = 0; h < m; h++) {
            memcpy(o + (size_t)h * hv, s0 + (size_t)h * stride, (size_t)hv * sizeof(float));
            M[h] = s0[(size_t)h * stride + (size_t)hv], S[h] = s0[(size_t)h * stride + (size_t)hv + 1];
        }
        const int32_t ns = n_splits(f, f->vis[t] + 1);
        for (int32_t s = 1; s < ns; s++) {
            const float *ss = split_state(f, t, h0, s);
            for (int h = 0; h < m; h++) Ms[h] = ss[(size_t)h * stride + (size_t)hv], Ss[h] = ss[(size_t)h * stride + (size_t)hv + 1];
            merge_split(m, hv, o, (size_t)hv, M, S, ss, stride, Ms, Ss);
        }
        finish_item(at, &it, o, M, S);
    }
}

/* Whether a batch runs its splits as separate items: a small batch (at most
 * ATTN_SPLIT_TOKENS tokens, every one with at most split_cap splits, none
 * observed by a retention policy) whose (token, KV head, heads) items would
 * leave threads idle or unevenly loaded, and that has a token with more than
 * one split. Fills at->split_first (the first split item of each token). The
 * choice changes no result, only where the work runs. */
bool brisk_fwd_attn_split_plan(attn_task *at, int n_threads) {
    const brisk_forward *f = at->f;
    const brisk_hparams *hp = &f->m->hp;
    const int64_t n_items_tok = item_heads(hp, 0, NULL, NULL, NULL), T = at->b->n;
    if (n_threads < 2 || T > ATTN_SPLIT_TOKENS || !f->split_part || (T * n_items_tok) % n_threads == 0) return false;
    bool many = false;
    at->split_first[0] = 0;
    for (int32_t t = 0; t < T; t++) {
        const int32_t ns = n_splits(f, f->vis[t] + 1);
        if (ns > f->split_cap || (f->observe && f->observe[t])) return false;
        many = many || ns > 1;
        at->split_first[t + 1] = at->split_first[t] + n_items_tok * ns;
    }
    return many;
}
