/* forward: the transformer over a multi-sequence batch (see forward.h).
 *
 * Per layer: rmsnorm -> Q/K/V (one parallel step) -> [q/k norm] -> RoPE ->
 * K/V into the paged cache -> causal attention per (token, head) -> output
 * projection + residual -> rmsnorm -> gate/up (one step) -> SwiGLU -> down +
 * residual. Matmuls split output rows across threads, so each weight byte is
 * read once per step for the whole batch, and every output element is one
 * vec_dot call whatever the batch size (batch invariance). */
#include "model/forward.h"
#include "quant/quant.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MM_MAX_JOBS 3

struct brisk_forward {
    const brisk_model_data *m;
    const brisk_kernels *k;
    const brisk_gemm_kernels *gk;                /* packed GEMM, or NULL */
    const brisk_attn_kernels *ak;                /* attention (the kernel table's ISA, or ref): never NULL */
    char isa_name[48];                           /* brisk_forward_isa's answer */
    brisk_pool *pool;
    int32_t n_batch, n_ctx;
    int32_t qdim, kvdim, maxdim;
    float *x, *xn, *q, *kc, *vc, *att, *g, *u;   /* activations, [n_batch][dim] */
    uint8_t *xq[MM_MAX_JOBS];                    /* quantized matmul inputs */
    int32_t *xs[MM_MAX_JOBS];                    /* their integer sums for the packed GEMM */
    size_t xq_cap, xs_stride;
    float *rope_cache;                           /* [n_batch][n_rot] */
    float *f16_lut;                              /* 65536 entries: F16 -> F32 for the KV reads */
    float *kt;                                   /* prefill: one sequence's K widened, [kv head][dim][pos] */
    int32_t kt_cap;                              /* positions kt holds (0: none) */
    int32_t kt_stride;                           /* floats from one of kt's rows to the next (see init) */
    int32_t window, sink;                        /* windowed attention (0: full) */
    /* exp_sub and swiglu of the GEMM table (vectorized) or of k: the same bits */
    void (*exp_sub)(float *x, int64_t n, float m);
    void (*swiglu)(float *h, const float *g, const float *u, int64_t n);
    /* per batch token, filled by validate_batch: its KV slot, its parent (-1:
     * follows the cache), the sequence's cached length before the batch, and
     * whether it and all its ancestors sit at slot == position ("direct") */
    int32_t *slot, *par, *tbase;
    uint8_t *direct;
    /* per batch token, for attention, which runs over a token's visible
     * entries in order: the cached slots [0, tbase) then its ancestors in the
     * batch and itself. vis: its own index in that order; [vsink, vlo): the
     * indices windowed attention masks, found from the positions the KV
     * recorded for each slot (set_window_masks). Attention never assumes a
     * slot's position: a sequence whose slots were compacted (positions
     * increasing, not consecutive) is attended the same way. */
    int32_t *vis, *vsink, *vlo;
    /* the same masks for the model's windowed layers (hparams.swa_window) */
    int32_t *vsink_swa, *vlo_swa;
    int32_t window_swa, sink_swa;                /* their window (the model's, or the context's when tighter) */
    brisk_rope rope, rope_swa;                   /* the model's RoPE with this context's factors (LongRoPE) */
    float *rope_cache_swa;                       /* [n_batch][n_rot], windowed layers (NULL: same as rope_cache) */
    float *qkv;                                  /* fused QKV output, [n_batch][qdim + 2 kvdim] (NULL: none) */
    int32_t qkv_dim;
    float *gelu_lut;                             /* GeGLU: F16 input -> gelu (ggml's table, rounded to F16) */
    int n_threads;
    double min_parallel_macs;                    /* PARALLEL_MIN_MACS, or BRISK_PARALLEL_MIN_MACS (tests: 0) */
    struct mm_range *ranges;                     /* [thread] matmul unit ranges, for stealing */
    int32_t *anc;                                /* tree tokens: [thread][n_batch] slots of positions base.. */
    uint16_t *kgather;                           /* tree tokens: [thread][16][head_dim] K rows in position order */
    size_t bytes;
    bool dry;                                    /* planning only: count bytes, allocate nothing */
};

/* ---- parallel steps ------------------------------------------------------------------ */

/* A pool step costs a wake-up and a barrier (microseconds, more when workers
 * sleep or share a core with other work). A step with less arithmetic than
 * this many multiply-adds runs on the calling thread instead: a tiny model's
 * single-token decode then costs the same at 1 and at N threads, while its
 * multi-token passes (speculative verification, prefill) still spread out.
 * Every worker splits by output rows or (token, head) items, so where a step
 * runs never changes a result. */
#define PARALLEL_MIN_MACS (256 * 1024)

/* Threads a step of macs multiply-adds runs on (run_step's choice). */
static int step_threads(const brisk_forward *f, double macs) { return macs < f->min_parallel_macs ? 1 : f->n_threads; }

static void run_step(brisk_forward *f, brisk_pool_fn fn, void *ctx, double macs) {
    if (step_threads(f, macs) == 1) fn(ctx, 0, 1);
    else brisk_pool_run(f->pool, fn, ctx);
}

typedef struct quant_task {
    brisk_quantize_fn quant;
    uint32_t act;
    const float *x;
    int64_t n;          /* elements per row */
    int32_t rows;
    const int32_t *row_idx;   /* optional gather: row i reads x[row_idx[i]] */
    uint8_t *dst;
    size_t dst_stride;
    brisk_act_sums_fn sums_fn;   /* optional: also write the packed GEMM's sums */
    int32_t *sums;
    size_t sums_stride;
} quant_task;

static void quant_worker(void *ctx, int ith, int nth) {
    const quant_task *t = ctx;
    int64_t lo, hi;
    brisk_split_range(t->rows, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const int64_t src = t->row_idx ? t->row_idx[r] : r;
        t->quant(t->x + src * t->n, t->dst + (size_t)r * t->dst_stride, t->n);
        if (t->sums_fn) t->sums_fn(t->dst + (size_t)r * t->dst_stride, t->n, t->sums + (size_t)r * t->sums_stride);
    }
}

/* SwiGLU of the FFN rows, split by token: an expf per element, on the calling
 * thread it was ~2% of a 2-thread F16 prefill profile during which the other
 * thread waited. */
typedef struct swiglu_task {
    void (*fn)(float *h, const float *g, const float *u, int64_t n);   /* f->swiglu (SwiGLU) */
    const float *gelu_lut;   /* GeGLU instead: ggml's F16 GELU table */
    float *h;         /* [rows][n] result (may be g) */
    const float *g;   /* [rows] with g_stride */
    const float *u;
    int64_t n, g_stride;   /* u has g's stride */
    int32_t rows;
} swiglu_task;

/* llama.cpp's GELU (ggml_vec_geglu_f32 with GGML_GELU_FP16): 0 below -10,
 * the identity above 10, else the tanh GELU of x rounded to F16, looked up
 * in a table whose entries are rounded to F16 too. */
static void geglu_row(const float *lut, float *h, const float *g, const float *u, int64_t n) {
    if (!u) {   /* GELU without a gate (ggml_vec_gelu_f32) */
        for (int64_t i = 0; i < n; i++) {
            const float x = g[i];
            h[i] = x <= -10.0f ? 0.0f : x >= 10.0f ? x : lut[brisk_fp32_to_fp16(x)];
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        h[i] = x <= -10.0f ? 0.0f : x >= 10.0f ? x * u[i] : lut[brisk_fp32_to_fp16(x)] * u[i];
    }
}

static void swiglu_worker(void *ctx, int ith, int nth) {
    const swiglu_task *t = ctx;
    int64_t lo, hi;
    brisk_split_range(t->rows, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        float *h = t->h + r * t->n;
        const float *g = t->g + r * t->g_stride, *u = t->u ? t->u + r * t->g_stride : NULL;
        if (t->gelu_lut) geglu_row(t->gelu_lut, h, g, u, t->n);
        else t->fn(h, g, u, t->n);
    }
}

typedef struct mm_job {
    const brisk_weight *w;
    const uint8_t *xq;
    size_t xq_stride;
    const int32_t *xs;   /* act sums (packed weights only) */
    size_t xs_stride;
    float *out;          /* out[t * out_stride + r] */
    int64_t out_stride;
    const float *bias;   /* [rows] or NULL */
} mm_job;

/* A thread's share of a matmul's units, [lo, hi) packed in one atomic word
 * (lo in the low half) on its own cache line: the owner takes chunks from
 * the front, a thread that ran out takes single units from the back. */
typedef struct mm_range {
    _Alignas(64) atomic_uint_fast64_t lohi;
} mm_range;

#define MM_OWN_CHUNK 4   /* units the owner takes per claim: few atomics, little left to steal */

static bool range_take(mm_range *r, bool front, int64_t want, int64_t *a, int64_t *b) {
    uint64_t v = atomic_load_explicit(&r->lohi, memory_order_relaxed);
    for (;;) {
        const int64_t lo = (int64_t)(v & 0xffffffffu), hi = (int64_t)(v >> 32);
        if (lo >= hi) return false;
        const int64_t n = hi - lo < want ? hi - lo : want;
        const uint64_t nv = front ? (uint64_t)(lo + n) | ((uint64_t)hi << 32) : (uint64_t)lo | ((uint64_t)(hi - n) << 32);
        if (atomic_compare_exchange_weak_explicit(&r->lohi, &v, nv, memory_order_relaxed, memory_order_relaxed)) {
            *a = front ? lo : hi - n;
            *b = front ? lo + n : hi;
            return true;
        }
    }
}

typedef struct mm_task {
    const brisk_kernels *k;
    const brisk_gemm_kernels *g;
    mm_job jobs[MM_MAX_JOBS];
    int n_jobs;
    int32_t n_tok;
    int32_t tok_block;   /* tokens per pass over the rows (mm_tok_block) */
    int64_t total_rows;
    mm_range *ranges;    /* one pass (tok_block == n_tok): per-thread shares, stealable */
} mm_task;

/* Units [lo, hi) of the task's jobs (numbered across them) for the nt tokens
 * from t0. A full unit of a packed weight is one gemm call, anything else one
 * vec_dot per (row, token). */
static void mm_units(const mm_task *t, int32_t t0, int32_t nt, int64_t lo, int64_t hi) {
    int64_t base = 0;
    for (int j = 0; j < t->n_jobs && lo < hi; j++) {
        const mm_job *jb = &t->jobs[j];
        const int64_t rows = jb->w->rows, units = (rows + BRISK_GEMM_ROWS - 1) / BRISK_GEMM_ROWS;
        const int64_t a = lo > base ? lo - base : 0, b = hi - base < units ? hi - base : units;
        const brisk_vec_dot_fn dot = t->k->vec_dot[jb->w->type];
        const uint8_t *xq = jb->xq + (size_t)t0 * jb->xq_stride;
        const int32_t *xs = jb->xs ? jb->xs + (size_t)t0 * jb->xs_stride : NULL;
        float *out = jb->out + (int64_t)t0 * jb->out_stride;
        for (int64_t u = a; u < b; u++) {
            const int64_t r0 = u * BRISK_GEMM_ROWS, r1 = r0 + BRISK_GEMM_ROWS < rows ? r0 + BRISK_GEMM_ROWS : rows;
            if (jb->w->packed && r1 - r0 == BRISK_GEMM_ROWS) {
                const uint8_t *wp = (const uint8_t *)jb->w->packed + (size_t)u * jb->w->packed_group_bytes;
                t->g->gemm[jb->w->type](jb->w->cols, wp, xq, jb->xq_stride, xs, jb->xs_stride, nt, out + r0, jb->out_stride);
            } else if (t->g && t->g->gemm_rows[jb->w->type] && r1 - r0 == BRISK_GEMM_ROWS && jb->w->cols % 32 == 0) {
                t->g->gemm_rows[jb->w->type](jb->w->cols, (const uint8_t *)jb->w->data + (size_t)r0 * jb->w->row_bytes,
                                             jb->w->row_bytes, (const float *)xs, jb->xs_stride, nt, out + r0, jb->out_stride);
            } else {
                const brisk_vec_dot_2x2_fn dot2 = t->k->vec_dot_2x2[jb->w->type];
                const int64_t os = jb->out_stride;
                int64_t r = r0;
                if (dot2 && nt >= 2)   /* row pairs x token pairs, the odd token row by row */
                    for (; r + 2 <= r1; r += 2) {
                        const uint8_t *wrow = (const uint8_t *)jb->w->data + (size_t)r * jb->w->row_bytes;
                        int32_t tk = 0;
                        for (; tk + 2 <= nt; tk += 2)
                            dot2(jb->w->cols, out + (int64_t)tk * os + r, os, wrow, jb->w->row_bytes, xq + (size_t)tk * jb->xq_stride, jb->xq_stride);
                        for (; tk < nt; tk++) {
                            dot(jb->w->cols, out + (int64_t)tk * os + r, wrow, xq + (size_t)tk * jb->xq_stride);
                            dot(jb->w->cols, out + (int64_t)tk * os + r + 1, wrow + jb->w->row_bytes, xq + (size_t)tk * jb->xq_stride);
                        }
                    }
                for (; r < r1; r++) {
                    const uint8_t *wrow = (const uint8_t *)jb->w->data + (size_t)r * jb->w->row_bytes;
                    for (int32_t tk = 0; tk < nt; tk++) dot(jb->w->cols, out + (int64_t)tk * os + r, wrow, xq + (size_t)tk * jb->xq_stride);
                }
            }
            if (jb->bias)
                for (int32_t tk = 0; tk < nt; tk++)
                    for (int64_t r = r0; r < r1; r++) out[(int64_t)tk * jb->out_stride + r] += jb->bias[r];
        }
        base += units;
    }
}

/* Work is split in units of BRISK_GEMM_ROWS rows of one weight (the last
 * unit of a weight may be shorter); every unit's outputs are computed the
 * same way whichever thread takes it, so the split never changes a result.
 * A single pass (decode, most prefill) starts from even contiguous shares and
 * lets a thread that finishes early take units off the end of another's:
 * at one token both threads stream DRAM, and whichever is slowed (the other
 * vCPU's neighbour, an unlucky page walk) no longer leaves the other waiting
 * at the step's end. */
static void mm_worker(void *ctx, int ith, int nth) {
    const mm_task *t = ctx;
    if (t->ranges && t->tok_block >= t->n_tok) {
        int64_t a, b;
        while (range_take(&t->ranges[ith], true, MM_OWN_CHUNK, &a, &b)) mm_units(t, 0, t->n_tok, a, b);
        for (int v = 1; v < nth; v++)
            while (range_take(&t->ranges[(ith + v) % nth], false, 1, &a, &b)) mm_units(t, 0, t->n_tok, a, b);
        return;
    }
    int64_t lo, hi;
    brisk_split_range(t->total_rows, ith, nth, &lo, &hi);   /* total_rows counts units here */
    for (int32_t t0 = 0; t0 < t->n_tok; t0 += t->tok_block) {
        const int32_t nt = t->n_tok - t0 < t->tok_block ? t->n_tok - t0 : t->tok_block;
        mm_units(t, t0, nt, lo, hi);
    }
}

/* Tokens per mm_worker pass. Packed F16 reads each token's activations as
 * F32 (4 bytes a column) once per 16-row group; with all 512 prompt tokens in
 * one pass they stream from L3 for every group (16 MiB for llama-3.2-1b's
 * w_down). Passes whose activations fit in ~768 KiB stay in L2 while the
 * thread's groups go by; the weights are read again per pass (a group's 32
 * bytes a column now serve 24-216 tokens, not 512). In a one-thread GEMM micro-benchmark
 * (bench/gemm-micro.c, 512 tokens) this gave 44.5 -> 49.4 GMAC/s at 4864
 * columns, 45.0 -> 48.0 at 2048, 46.1 -> 49.3 at 896. A multiple of 24 keeps
 * every kernel's token tile (8, 6, 4, 3, 2) whole. The quantized types read
 * about a quarter of the bytes per token and keep one pass. */
static int32_t mm_tok_block(const brisk_forward *f, int n, const brisk_weight *const *w, int32_t n_tok) {
    int64_t cols = 0;
    for (int j = 0; j < n; j++) {
        if (!f->gk || w[j]->type != BRISK_Q_F16 || !w[j]->packed) return n_tok;
        cols = w[j]->cols > cols ? w[j]->cols : cols;
    }
    const int64_t tb = (768 * 1024) / (cols * 4) / 24 * 24;
    return tb < 24 ? 24 : tb < n_tok ? (int32_t)tb : n_tok;
}

/* Multiply n_tok input rows (x, row length = every weight's cols) by up to 3
 * weights sharing that input: quantize once per distinct activation type, then
 * one parallel step over all their rows. */
static void matmul(brisk_forward *f, const float *x, int32_t n_tok, int n, const brisk_weight *const *w,
                   float *const *out, const int64_t *out_stride, const float *const *bias) {
    mm_task mt = {.k = f->k, .g = f->gk, .n_jobs = n, .n_tok = n_tok};
    uint32_t done_types[MM_MAX_JOBS];
    int n_done = 0;
    for (int j = 0; j < n; j++) {
        const brisk_qtype_info *qi = brisk_qtype_get(w[j]->type);
        const uint32_t act = qi->act_type;
        size_t stride = 0;
        brisk_qtype_row_bytes(act, w[j]->cols, &stride);   /* validated at load */
        int slot = -1;
        for (int d = 0; d < n_done; d++)
            if (done_types[d] == act) slot = d;
        if (slot < 0) {
            slot = n_done;
            done_types[n_done++] = act;
            const brisk_quantize_fn qf = f->gk && f->gk->quantize_act[act] ? f->gk->quantize_act[act] : f->k->quantize_act[act];
            quant_task qt = {.quant = qf, .act = act, .x = x, .n = w[j]->cols, .rows = n_tok, .dst = f->xq[slot], .dst_stride = stride};
            if (f->gk && f->gk->act_sums[act]) {
                qt.sums_fn = f->gk->act_sums[act];
                qt.sums = f->xs[slot];
                qt.sums_stride = f->xs_stride;
            }
            /* a few rows are quicker on this thread than a pool step (same bytes either way) */
            if (n_tok < 4) quant_worker(&qt, 0, 1);
            else brisk_pool_run(f->pool, quant_worker, &qt);
        }
        mt.jobs[j] = (mm_job){.w = w[j], .xq = f->xq[slot], .xq_stride = stride, .xs = f->xs[slot], .xs_stride = f->xs_stride, .out = out[j],
                              .out_stride = out_stride[j], .bias = bias ? bias[j] : NULL};
        mt.total_rows += (w[j]->rows + BRISK_GEMM_ROWS - 1) / BRISK_GEMM_ROWS;
    }
    double macs = 0.0;
    for (int j = 0; j < n; j++) macs += (double)w[j]->rows * (double)w[j]->cols * n_tok;
    mt.tok_block = mm_tok_block(f, n, w, n_tok);
    const int nth = step_threads(f, macs);
    mt.ranges = f->ranges;
    for (int i = 0; i < nth; i++) {   /* published to the workers by the pool's generation bump */
        int64_t lo, hi;
        brisk_split_range(mt.total_rows, i, nth, &lo, &hi);
        atomic_store_explicit(&f->ranges[i].lohi, (uint64_t)lo | ((uint64_t)hi << 32), memory_order_relaxed);
    }
    run_step(f, mm_worker, &mt, macs);
}

static void matmul1(brisk_forward *f, const float *x, int32_t n_tok, const brisk_weight *w, float *out, int64_t out_stride) {
    const brisk_weight *ws[1] = {w};
    float *outs[1] = {out};
    int64_t strides[1] = {out_stride};
    matmul(f, x, n_tok, 1, ws, outs, strides, NULL);
}

typedef struct attn_task {
    brisk_forward *f;
    const brisk_kv *kv;
    const brisk_fwd_batch *b;
    int32_t layer;
    const float *kt;     /* K of the batch's one sequence, widened and transposed, or NULL */
    int32_t kt_len;      /* visible entries (cached slots) in kt (its row stride is f->kt_stride) */
    int32_t kt_skip0, kt_skip1;   /* windowed attention: entries no token of the batch sees, not widened */
    const int32_t *vsink, *vlo;   /* this layer's window masks (f->vsink/vlo, or the windowed layers' set) */
    bool windowed;
    float scale;                  /* multiplier of q.k (divided by the softcap when there is one) */
    float softcap;                /* 0, or scores become softcap * tanh(q.k * scale) */
} attn_task;


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
            const uint16_t *src = brisk_kv_k(kv, at->layer, seq, p, h) + (size_t)i * BRISK_KV_BLOCK;
            const int32_t n = at->kt_len - p < 16 ? at->kt_len - p : 16;
            for (int32_t l = 0; l < n; l++) dst[p + l] = f->f16_lut[src[l]];
        }
    }
}

/* The widening as its own step, split over (kv head, dimension) rows: all of
 * the batch's tokens read every KV head's rows. */
static void kt_worker(void *ctx, int ith, int nth) {
    const attn_task *at = ctx;
    int64_t lo, hi;
    brisk_split_range((int64_t)at->f->kvdim, ith, nth, &lo, &hi);
    kt_widen(at, lo, hi);
}

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
#define ATTN_TILE 64
#define ATTN_HEADS 8   /* query heads of one KV head processed together (they share every K and V row) */

/* One (token, query head) of attn_worker's group: the scores of tile j0..j0+n-1
 * from group position j on (what the kq_multi kernels did not cover: a tree
 * token's own branch), into kq: gathered into rows for kq16, the last partial
 * group through kq16 as well, and the scalar loop without a kernel table. */
static void attn_scores(const attn_task *at, const float *q, int32_t seq, int32_t kvh, int32_t j0, int32_t j, int32_t n,
                        int32_t base, const int32_t *anc, uint16_t *kg, float scale, float *kq) {
    const brisk_forward *f = at->f;
    const brisk_attn_kernels *g = f->ak;
    const int hd = f->m->hp.head_dim;
    if ((hd % 2) == 0)   /* groups of 16 positions, gathered into rows */
        for (; j + 16 <= n; j += 16) {
            gather_k16(kg, at, seq, kvh, hd, j0 + j, 16, base, anc);
            g->kq16(q, kg, (size_t)hd, hd, scale, kq + j);
        }
    if ((hd % 2) == 0 && j < n) {
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
        const uint16_t *kr = brisk_kv_k(at->kv, at->layer, seq, slot_of(j0 + j, base, anc), kvh);
        float s = 0.0f;
        for (int i = 0; i < hd; i++) s += q[i] * f->f16_lut[kr[(size_t)i * BRISK_KV_BLOCK]];
        kq[j] = s * scale;
    }
}

/* Work items are (token, KV head, up to ATTN_HEADS of its query heads): the
 * heads run side by side through every tile, so each K and V row is read and
 * widened once for all of them, and their independent chains fill the
 * pipeline. Every head's arithmetic is still the one-head loop's, in its order. */
static void attn_worker(void *ctx, int ith, int nth) {
    const attn_task *at = ctx;
    brisk_forward *f = at->f;
    const brisk_hparams *hp = &f->m->hp;
    int32_t *anc = f->anc + (size_t)ith * (size_t)f->n_batch;
    uint16_t *kg = f->kgather + (size_t)ith * 16 * (size_t)hp->head_dim;
    int32_t anc_tok = -1;   /* the token whose ancestors anc holds */
    const int hd = hp->head_dim, n_kv = hp->n_head_kv, gqa = hp->n_head / hp->n_head_kv;
    const int per = gqa < ATTN_HEADS ? gqa : ATTN_HEADS, chunks = (gqa + per - 1) / per;
    const float scale = at->scale, softcap = at->softcap;
    const brisk_attn_kernels *g = f->ak;
    float kq[ATTN_HEADS][ATTN_TILE], M[ATTN_HEADS], S[ATTN_HEADS];
    /* items round robin: an item's work grows with its token's position, so
     * contiguous ranges gave the last thread ~3x the first one's in a prefill */
    const int64_t n_items = (int64_t)at->b->n * n_kv * chunks;
    for (int64_t item = ith; item < n_items; item += nth) {
        const int32_t t = (int32_t)(item / (n_kv * chunks)), r = (int32_t)(item % (n_kv * chunks));
        const int32_t kvh = r / chunks, h0 = kvh * gqa + (r % chunks) * per;
        const int m = gqa - (r % chunks) * per < per ? gqa - (r % chunks) * per : per;
        const int32_t seq = at->b->seq[t], n_vis = f->vis[t] + 1;   /* entries it attends to, itself last */
        /* A tree token reads its ancestors' rows (wherever the batch put them)
         * in position order, so every operation is the one a chain decode of
         * its path performs: same tiles, same kernels, same order. */
        const bool direct = f->direct[t];
        const int32_t base = direct ? n_vis : f->tbase[t];
        if (!direct && anc_tok != t) {
            for (int32_t u = t; u >= 0; u = f->par[u]) anc[f->vis[u] - base] = f->slot[u];
            anc_tok = t;
        }
        const float *q = f->q + (size_t)t * f->qdim + (size_t)h0 * hd;
        float *o = f->att + (size_t)t * f->qdim + (size_t)h0 * hd;
        memset(o, 0, (size_t)m * hd * sizeof(float));
        for (int h = 0; h < m; h++) M[h] = -INFINITY, S[h] = 0.0f;
        const int32_t vsink = at->vsink[t], wlo = at->vlo[t];   /* entries vsink .. wlo - 1 are masked (none without a window) */
        for (int32_t j0 = 0; j0 < n_vis; j0 += ATTN_TILE) {
            const int32_t n = n_vis - j0 < ATTN_TILE ? n_vis - j0 : ATTN_TILE;
            if (j0 >= vsink && j0 + n <= wlo) continue;   /* a whole tile outside the window */
            int32_t j = 0;
            if (at->kt) {
                /* kt holds the cached positions (a tree token's own branch comes
                 * after base): their groups, all heads in one call; when the
                 * whole tile is cached its last partial group too (kt has room
                 * past it: the lanes past n are computed and ignored) */
                int32_t ng = 0;
                while (j + 16 * (ng + 1) <= n && j0 + 16 * (ng + 1) <= base) ng++;
                if (16 * ng < n && j0 + n <= base && j0 + 16 * (ng + 1) <= f->kt_stride) ng++;
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
                    while (16 * (ng + 1) <= in_block && j + 16 * (ng + 1) <= n && p + 16 * (ng + 1) <= base) ng++;
                    if (16 * ng < in_block && j + 16 * ng < n && j + 16 * (ng + 1) > n && j0 + n <= base) ng++;
                    if (!ng) break;
                    g->kq_multi_h(q, (size_t)hd, m, brisk_kv_k(at->kv, at->layer, seq, p, kvh), BRISK_KV_BLOCK, ng, hd, scale, kq[0] + j,
                                  ATTN_TILE);
                    j += 16 * ng;
                }
                j = j < n ? j : n;
            }
            const int32_t mask0 = BRISK_MAX(vsink - j0, 0), mask1 = BRISK_MIN(wlo - j0, n);   /* masked [mask0, mask1) */
            for (int h = 0; h < m; h++) {
                attn_scores(at, q + (size_t)h * hd, seq, kvh, j0, j, n, base, anc, kg, scale, kq[h]);
                if (softcap != 0.0f)   /* as ggml's flash attention: tanh of the scaled score, times the cap */
                    for (int32_t i = 0; i < n; i++) kq[h][i] = softcap * tanhf(kq[h][i]);
                for (int32_t i = mask0; i < mask1; i++) kq[h][i] = -INFINITY;   /* exp gives 0: no weight */
                /* four independent max chains (max is exact in any order; ties
                 * between 0 and -0 give the same exp below) */
                float m4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, tile_max = -INFINITY;
                int32_t i = 0;
                for (; i + 4 <= n; i += 4)
                    for (int l = 0; l < 4; l++) m4[l] = kq[h][i + l] > m4[l] ? kq[h][i + l] : m4[l];
                for (; i < n; i++) m4[0] = kq[h][i] > m4[0] ? kq[h][i] : m4[0];
                for (int l = 0; l < 4; l++) tile_max = m4[l] > tile_max ? m4[l] : tile_max;
                const float Mnew = M[h] > tile_max ? M[h] : tile_max;
                if (Mnew > M[h]) {
                    const float ms = brisk_expf(M[h] - Mnew);
                    float *oh = o + (size_t)h * hd;
                    for (int e = 0; e < hd; e++) oh[e] *= ms;
                    S[h] *= ms;
                }
                M[h] = Mnew;
            }
            for (int h = 0; h < m; h++) f->exp_sub(kq[h], n, M[h]);
            /* each head's sum in position order; four heads' chains side by
             * side in registers (the add latency bounds one chain) */
            for (int h = 0; h < m; h += 4) {
                const float *k0 = kq[h], *k1 = kq[h + 1 < m ? h + 1 : h], *k2 = kq[h + 2 < m ? h + 2 : h], *k3 = kq[h + 3 < m ? h + 3 : h];
                double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
                for (int32_t i = 0; i < n; i++) {
                    s0 += k0[i];
                    s1 += k1[i];
                    s2 += k2[i];
                    s3 += k3[i];
                }
                const double sums[4] = {s0, s1, s2, s3};
                for (int l = 0; l < 4 && h + l < m; l++) S[h + l] += (float)sums[l];
            }
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
                    const uint16_t *vr = brisk_kv_v(at->kv, at->layer, seq, at_pos, kvh);
                    g->axpy_f16_rows_multi(o, (size_t)hd, m, &kq[0][i], ATTN_TILE, vr, (size_t)hd, len, hd);
                    i += len - 1;
                    continue;
                }
                const uint16_t *vr = brisk_kv_v(at->kv, at->layer, seq, slot_of(j0 + i, base, anc), kvh);
                for (int h = 0; h < m; h++) g->axpy_f16(o + (size_t)h * hd, kq[h][i], vr, hd);
            }
        }
        for (int h = 0; h < m; h++) {
            const float inv = S[h] == 0.0f ? 0.0f : 1.0f / S[h];
            float *oh = o + (size_t)h * hd;
            for (int e = 0; e < hd; e++) oh[e] *= inv;
        }
    }
}

void brisk_forward_set_window(brisk_forward *f, int32_t window, int32_t sink) {
    f->window = window;
    f->sink = window > 0 ? sink : 0;
    /* the model's windowed layers keep their own window, or this one when it is tighter */
    const int32_t w = f->m->hp.swa_window;
    const bool ctx_tighter = f->window > 0 && f->window < w;
    f->window_swa = ctx_tighter ? f->window : w;
    f->sink_swa = ctx_tighter ? f->sink : 0;
}

/* ---- init ----------------------------------------------------------------------------- */

static void *xcalloc_track(brisk_forward *f, size_t n, size_t sz, bool *ok) {
    size_t bytes;
    if (!brisk_mul_size(n, sz, &bytes) || !brisk_add_size(f->bytes, bytes, &f->bytes)) {
        *ok = false;
        return NULL;
    }
    if (f->dry) return NULL;
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) *ok = false;
    return p;
}

/* Every scratch buffer, sized from f's model, batch, context and thread
 * count. With f->dry set it only adds up f->bytes, so the plan and the
 * allocation cannot disagree. False when a size overflows or (not dry) an
 * allocation fails; f's buffers are then freed by brisk_forward_free. */
static bool alloc_scratch(brisk_forward *f) {
    const brisk_hparams *hp = &f->m->hp;
    bool ok = true;
    const size_t nb = (size_t)f->n_batch;
    f->x = xcalloc_track(f, nb * (size_t)hp->n_embd, sizeof(float), &ok);
    f->xn = xcalloc_track(f, nb * (size_t)f->maxdim, sizeof(float), &ok);
    f->q = xcalloc_track(f, nb * (size_t)f->qdim, sizeof(float), &ok);
    f->kc = xcalloc_track(f, nb * (size_t)f->kvdim, sizeof(float), &ok);
    f->vc = xcalloc_track(f, nb * (size_t)f->kvdim, sizeof(float), &ok);
    f->att = xcalloc_track(f, nb * (size_t)f->qdim, sizeof(float), &ok);
    f->g = xcalloc_track(f, nb * (size_t)hp->n_ff, sizeof(float), &ok);
    f->u = xcalloc_track(f, nb * (size_t)hp->n_ff * (hp->fused_up ? 2 : 1), sizeof(float), &ok);
    if (hp->fused_qkv) f->qkv = xcalloc_track(f, nb * (size_t)f->qkv_dim, sizeof(float), &ok);
    if (hp->swa_window) {
        f->vsink_swa = xcalloc_track(f, nb, sizeof(int32_t), &ok);
        f->vlo_swa = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    }
    if (hp->ai->act == BRISK_ACT_GEGLU || hp->ai->act == BRISK_ACT_GELU) f->gelu_lut = xcalloc_track(f, 65536, sizeof(float), &ok);
    if (f->rope_swa.freq_base != f->rope.freq_base || f->rope_swa.freq_scale != f->rope.freq_scale)
        f->rope_cache_swa = xcalloc_track(f, nb * (size_t)hp->rope.n_rot, sizeof(float), &ok);
    f->xq_cap = nb * ((size_t)f->maxdim * sizeof(float) + 64);   /* F32 is the widest activation format */
    for (int i = 0; i < MM_MAX_JOBS; i++) f->xq[i] = xcalloc_track(f, f->xq_cap, 1, &ok);
    f->xs_stride = (size_t)brisk_act_sums_len(f->maxdim);
    for (int i = 0; i < MM_MAX_JOBS; i++) f->xs[i] = f->gk ? xcalloc_track(f, nb * f->xs_stride + 1, sizeof(int32_t), &ok) : NULL;
    f->rope_cache = xcalloc_track(f, nb * (size_t)hp->rope.n_rot, sizeof(float), &ok);
    f->f16_lut = xcalloc_track(f, 65536, sizeof(float), &ok);
    f->slot = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->par = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->tbase = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->direct = xcalloc_track(f, nb, 1, &ok);
    f->vis = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->vsink = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->vlo = xcalloc_track(f, nb, sizeof(int32_t), &ok);
    f->bytes += (size_t)f->n_threads * sizeof *f->ranges;
    if (!f->dry) {
        f->ranges = aligned_alloc(64, (size_t)f->n_threads * sizeof *f->ranges);
        if (!f->ranges) ok = false;
    }
    f->anc = xcalloc_track(f, (size_t)f->n_threads * nb, sizeof(int32_t), &ok);
    f->kgather = xcalloc_track(f, (size_t)f->n_threads * 16, (size_t)hp->head_dim * sizeof(uint16_t), &ok);
    if (nb > 1) {   /* at most 4096 positions: 8 MiB for 8 KV heads of 64 */
        f->kt_cap = f->n_ctx < 4096 ? f->n_ctx : 4096;
        /* An odd number of 64-byte lines from row to row: the kernels walk
         * kt down a column (one line per dimension), and with a 4 KiB-multiple
         * stride (n_ctx 1024, 4096) every line fell in one L1 set. */
        f->kt_stride = (f->kt_cap + 15) / 16 * 16;
        if ((f->kt_stride / 16) % 2 == 0) f->kt_stride += 16;
        f->kt = xcalloc_track(f, (size_t)f->kt_stride * (size_t)f->kvdim, sizeof(float), &ok);
    }
    return ok;
}

/* The fields alloc_scratch reads, from the model and the context's limits. */
static void scratch_shape(brisk_forward *f, const brisk_model_data *m, int32_t n_batch, int32_t n_ctx) {
    const brisk_hparams *hp = &m->hp;
    f->m = m;
    f->gk = brisk_gemm_best();
    f->n_batch = n_batch;
    f->n_ctx = n_ctx;
    f->qdim = hp->n_head * hp->head_dim;
    f->kvdim = hp->n_head_kv * hp->head_dim;
    f->maxdim = BRISK_MAX(BRISK_MAX(hp->n_embd, hp->n_ff), f->qdim);
    f->qkv_dim = f->qdim + 2 * f->kvdim;
    /* LongRoPE (phi3): the long factors when this context reaches past the original length, as llama.cpp */
    f->rope = hp->rope;
    f->rope_swa = hp->rope_swa;
    if (hp->rope_long && n_ctx > hp->rope_n_ctx_orig) f->rope.freq_factors = f->rope_swa.freq_factors = hp->rope_long;
}

bool brisk_forward_plan(const brisk_model_data *m, int32_t n_batch, int32_t n_ctx, int n_threads, size_t *bytes) {
    brisk_forward f = {.dry = true, .n_threads = n_threads};
    if (n_batch < 1 || n_threads < 1) return false;
    scratch_shape(&f, m, n_batch, n_ctx);
    if (!alloc_scratch(&f)) return false;
    *bytes = f.bytes;
    return true;
}

brisk_status brisk_forward_init(brisk_forward **out, const brisk_model_data *m, int32_t n_batch, int32_t n_ctx,
                                int n_threads, brisk_error *err) {
    *out = NULL;
    const brisk_hparams *hp = &m->hp;
    if (n_batch < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch size %d must be positive", n_batch);
    if (hp->head_dim > 4096) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "head_dim %d > 4096", hp->head_dim);
    brisk_status ist = brisk_isa_check(err);
    if (ist) return ist;
    brisk_forward *f = calloc(1, sizeof *f);
    if (!f) return brisk_fail(err, BRISK_ERR_NOMEM, "forward: out of memory");
    scratch_shape(f, m, n_batch, n_ctx);
    f->k = brisk_kernels_best();
    f->ak = brisk_attn_best();
    f->exp_sub = f->gk && f->gk->exp_sub ? f->gk->exp_sub : f->k->exp_sub;
    f->swiglu = f->gk && f->gk->swiglu ? f->gk->swiglu : f->k->swiglu;
    if (f->gk) snprintf(f->isa_name, sizeof f->isa_name, "%s+%s-gemm", f->k->isa, f->gk->isa);
    else snprintf(f->isa_name, sizeof f->isa_name, "%s", f->k->isa);
    f->min_parallel_macs = PARALLEL_MIN_MACS;
    const char *min_env = getenv("BRISK_PARALLEL_MIN_MACS");
    if (min_env) {
        char *end = NULL;
        const double v = strtod(min_env, &end);
        if (end == min_env || *end || !(v >= 0.0)) {
            free(f);
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "BRISK_PARALLEL_MIN_MACS='%s' is not a non-negative number", min_env);
        }
        f->min_parallel_macs = v;
    }
    brisk_status st = brisk_pool_acquire(&f->pool, n_threads, err);   /* shared with the process's other contexts */
    if (st) {
        free(f);
        return st;
    }
    f->n_threads = brisk_pool_size(f->pool);
    /* every matmul's weights must have a kernel in the table */
    for (int il = 0; il < hp->n_layer; il++) {
        const brisk_layer *L = &m->w.layers[il];
        const brisk_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->wqkv};
        for (size_t i = 0; i < BRISK_ARRAY_LEN(ws); i++)
            if (ws[i]->data && (!f->k->vec_dot[ws[i]->type] || !f->k->quantize_act[brisk_qtype_get(ws[i]->type)->act_type])) {
                brisk_forward_free(f);
                return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "blk.%d: no kernel for weight type %s", il, brisk_qtype_name(ws[i]->type));
            }
    }
    if (!f->k->vec_dot[m->w.output.type] || !brisk_qtype_to_float(m->w.tok_embd.type)) {
        brisk_forward_free(f);
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "no kernel for output/embedding type %s", brisk_qtype_name(m->w.output.type));
    }
    if (!alloc_scratch(f)) {
        brisk_forward_free(f);
        return brisk_fail(err, BRISK_ERR_NOMEM, "forward: cannot allocate scratch for batch %d", n_batch);
    }
    for (uint32_t h = 0; h < 65536; h++) f->f16_lut[h] = brisk_fp16_to_fp32((uint16_t)h);
    if (f->gelu_lut)   /* ggml_table_gelu_f16: the tanh GELU of every F16 value, rounded to F16 */
        for (uint32_t h = 0; h < 65536; h++) {
            const float x = f->f16_lut[h];
            const float y = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
            f->gelu_lut[h] = brisk_fp16_to_fp32(brisk_fp32_to_fp16(y));
        }
    brisk_forward_set_window(f, 0, 0);
    *out = f;
    return BRISK_OK;
}

void brisk_forward_free(brisk_forward *f) {
    if (!f) return;
    brisk_pool_release(f->pool);
    free(f->x); free(f->xn); free(f->q); free(f->kc); free(f->vc); free(f->att); free(f->g); free(f->u);
    for (int i = 0; i < MM_MAX_JOBS; i++) {
        free(f->xq[i]);
        free(f->xs[i]);
    }
    free(f->rope_cache); free(f->f16_lut); free(f->kt);
    free(f->qkv); free(f->vsink_swa); free(f->vlo_swa); free(f->gelu_lut); free(f->rope_cache_swa);
    free(f->slot); free(f->par); free(f->tbase); free(f->direct); free(f->vis); free(f->vsink); free(f->vlo); free(f->anc); free(f->ranges); free(f->kgather);
    free(f);
}

size_t brisk_forward_bytes(const brisk_forward *f) { return f->bytes; }
const brisk_kernels *brisk_forward_kernels(const brisk_forward *f) { return f->k; }

const char *brisk_forward_isa(const brisk_forward *f) { return f->isa_name; }

/* ---- the pass ---------------------------------------------------------------------------- */

/* Checks every token and fills f->slot/par/tbase/direct (see brisk_forward). */
static brisk_status validate_batch(brisk_forward *f, const brisk_kv *kv, const brisk_fwd_batch *b, brisk_error *err) {
    const brisk_hparams *hp = &f->m->hp;
    if (b->n < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "empty batch");
    if (b->n > f->n_batch)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "batch of %d tokens exceeds the batch size %d", b->n, f->n_batch);
    for (int32_t i = 0; i < b->n; i++) {
        if (b->token[i] < 0 || b->token[i] >= hp->n_vocab)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: id %d out of range [0, %d)", i, b->token[i], hp->n_vocab);
        if (b->seq[i] < 0 || b->seq[i] >= brisk_kv_n_seq(kv))
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: sequence id %d out of range [0, %d)", i, b->seq[i],
                              brisk_kv_n_seq(kv));
        const int32_t len = brisk_kv_len(kv, b->seq[i]), ordered = brisk_kv_ordered(kv, b->seq[i]);
        if (ordered != len)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                              "batch token %d: sequence %d still holds the token tree of an earlier decode (slots %d..%d); "
                              "keep one path of it (brisk_seq_keep_path) or truncate it first",
                              i, b->seq[i], ordered, len - 1);
        /* the token's rank among its sequence's tokens in this batch gives its KV slot */
        int32_t rank = 0, prev = -1;
        for (int32_t j = 0; j < i; j++)
            if (b->seq[j] == b->seq[i]) {
                rank++;
                prev = j;
            }
        int32_t par = prev;
        if (b->parent) {
            par = b->parent[i];
            if (par < -1 || par >= i)
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: parent %d out of range [-1, %d)", i, par, i);
            if (par >= 0 && b->seq[par] != b->seq[i])
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: parent %d belongs to sequence %d, not %d", i, par,
                                  b->seq[par], b->seq[i]);
        }
        const int32_t expect = par < 0 ? brisk_kv_next_pos(kv, b->seq[i]) : b->pos[par] + 1;
        if (b->pos[i] != expect) {
            if (b->parent && par >= 0)
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: position %d, but its parent (token %d at position %d) needs %d",
                                  i, b->pos[i], par, b->pos[par], expect);
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch token %d: position %d, but sequence %d continues at %d",
                              i, b->pos[i], b->seq[i], expect);
        }
        const int32_t slot = len + rank, n_ctx = brisk_kv_n_ctx(kv);
        if (slot >= n_ctx) {
            if (slot != b->pos[i])
                return brisk_fail(err, BRISK_ERR_CAPACITY, "batch token %d: its KV slot %d (position %d) exceeds the context size %d", i,
                                  slot, b->pos[i], n_ctx);
            return brisk_fail(err, BRISK_ERR_CAPACITY, "batch token %d: position %d exceeds the context size %d", i, b->pos[i], n_ctx);
        }
        f->slot[i] = slot;
        f->par[i] = par;
        f->tbase[i] = len;
        f->vis[i] = par < 0 ? len : f->vis[par] + 1;
        /* its slot is its visible index, and so are its ancestors': the entries
         * it attends to are slots 0.. vis in order (a chain) */
        f->direct[i] = slot == f->vis[i] && (par < 0 || f->direct[par]);
    }
    return BRISK_OK;
}

/* How many of token t's visible entries (see brisk_forward.vis) have a
 * position below p: the cached slots' recorded positions increase with the
 * slot (binary search), and its in-batch entries (ancestors, itself) hold
 * consecutive positions ending at its own. */
static int32_t entries_below(const brisk_kv *kv, const brisk_forward *f, const brisk_fwd_batch *b, int32_t t, int32_t p) {
    const int32_t seq = b->seq[t], n_cached = f->tbase[t];
    int32_t lo = 0, hi = n_cached;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (brisk_kv_slot_pos(kv, seq, mid) < p) lo = mid + 1;
        else hi = mid;
    }
    if (lo < n_cached) return lo;
    const int32_t first = b->pos[t] - (f->vis[t] - n_cached);   /* the position of entry n_cached */
    return n_cached + BRISK_MAX(0, BRISK_MIN(p - first, f->vis[t] - n_cached + 1));
}

/* Windowed attention's mask per token, from positions to visible entries:
 * positions sink .. window_lo - 1 are masked. */
static void window_masks(const brisk_forward *f, const brisk_kv *kv, const brisk_fwd_batch *b, int32_t window, int32_t sink,
                         int32_t *vsink, int32_t *vlo) {
    for (int32_t t = 0; t < b->n; t++) {
        if (window <= 0) {
            vsink[t] = vlo[t] = 0;
            continue;
        }
        vsink[t] = entries_below(kv, f, b, t, sink);
        vlo[t] = entries_below(kv, f, b, t, b->pos[t] - window + 1);
    }
}

static void set_window_masks(brisk_forward *f, const brisk_kv *kv, const brisk_fwd_batch *b) {
    window_masks(f, kv, b, f->window, f->sink, f->vsink, f->vlo);
    if (f->vsink_swa) window_masks(f, kv, b, f->window_swa, f->sink_swa, f->vsink_swa, f->vlo_swa);
}

/* ---- layer stages ---------------------------------------------------------------------- */

static void scale_rows(float *x, int64_t n, float s) {
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

/* x becomes c * tanh(x / c), as llama.cpp's final-logit softcap (scale by 1/c, tanh, scale by c). */
static void softcap_rows(float *x, int64_t n, float c) {
    const float inv = 1.0f / c;
    for (int64_t i = 0; i < n; i++) x[i] = c * tanhf(x[i] * inv);
}

/* A projection's optional per-tensor scale and bias over rows of n outputs
 * (stride apart), in llama.cpp's order: attention projections and the
 * logits scale first (build_lora_mm), the FFN matrices add the bias first. */
static void affine_rows(float *y, int32_t rows, int64_t n, int64_t stride, const void *bias, brisk_wscale s, bool bias_first) {
    const float *bv = bias;
    if (!bv && !s.on) return;
    for (int32_t t = 0; t < rows; t++) {
        float *r = y + (size_t)t * (size_t)stride;
        if (bias_first && bv)
            for (int64_t i = 0; i < n; i++) r[i] += bv[i];
        if (s.on)
            for (int64_t i = 0; i < n; i++) r[i] *= s.v;
        if (!bias_first && bv)
            for (int64_t i = 0; i < n; i++) r[i] += bv[i];
    }
}

/* LayerNorm as ggml_norm: the mean (a double sum, rounded to float), the
 * centred values, their mean square (a double sum), then the scale. */
static void layernorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i];
    const float mean = (float)sum / (float)n;
    double var = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float c = x[i] - mean;
        out[i] = c;
        var += (double)(c * c);
    }
    const float scale = 1.0f / sqrtf((float)(var / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) out[i] *= scale;
    if (w)
        for (int64_t i = 0; i < n; i++) out[i] *= w[i];
}

/* The architecture's norm of one row (RMSNorm, or LayerNorm), then the optional norm bias. */
static void norm_row(const brisk_hparams *hp, float *out, const float *x, const brisk_weight *w, const brisk_weight *bias, int64_t n) {
    if (hp->ai->layer_norm) layernorm(out, x, w->data, n, hp->norm_eps);
    else brisk_rmsnorm(out, x, w->data, n, hp->norm_eps);
    if (bias->data) {
        const float *bv = bias->data;
        for (int64_t i = 0; i < n; i++) out[i] += bv[i];
    }
}

/* After a sublayer wrote its output to f->xn: its post-norm, the residual
 * scale, and the residual add into f->x. */
static void residual_add(brisk_forward *f, int32_t T, const brisk_weight *post_norm) {
    const brisk_hparams *hp = &f->m->hp;
    const int32_t d = hp->n_embd;
    if (post_norm->data)
        for (int32_t t = 0; t < T; t++) brisk_rmsnorm(f->xn + (size_t)t * d, f->xn + (size_t)t * d, post_norm->data, d, hp->norm_eps);
    if (hp->residual_scale != 0.0f) scale_rows(f->xn, (int64_t)T * d, hp->residual_scale);
    for (size_t i = 0; i < (size_t)T * d; i++) f->x[i] += f->xn[i];
}

/* Q/K norm: per head when the weight has head_dim entries, else over the whole projection. */
static void qk_norm(float *x, const brisk_weight *w, int n_heads, int hd, float eps) {
    if (w->cols == hd)
        for (int h = 0; h < n_heads; h++) brisk_rmsnorm(x + h * hd, x + h * hd, w->data, hd, eps);
    else
        brisk_rmsnorm(x, x, w->data, (int64_t)n_heads * hd, eps);
}

/* Norm -> Q, K, V -> q/k norms -> RoPE -> K/V into the cache -> attention ->
 * output projection -> post-norm -> residual. */
static void run_attention_block(brisk_forward *f, brisk_kv *kv, const brisk_fwd_batch *b, int32_t il, const brisk_layer *L) {
    const brisk_hparams *hp = &f->m->hp;
    const int32_t T = b->n, d = hp->n_embd, hd = hp->head_dim;
    const float *ain = f->x;
    if (L->attn_norm.data) {
        for (int32_t t = 0; t < T; t++)
            norm_row(hp, f->xn + (size_t)t * d, f->x + (size_t)t * d, &L->attn_norm, &L->attn_norm_b, d);
        ain = f->xn;
    }
    if (L->wqkv.data) {
        matmul1(f, ain, T, &L->wqkv, f->qkv, f->qkv_dim);
        affine_rows(f->qkv, T, f->qkv_dim, f->qkv_dim, L->bqkv.data, L->s_qkv, false);
        for (int32_t t = 0; t < T; t++) {
            const float *r = f->qkv + (size_t)t * f->qkv_dim;
            memcpy(f->q + (size_t)t * f->qdim, r, (size_t)f->qdim * sizeof(float));
            memcpy(f->kc + (size_t)t * f->kvdim, r + f->qdim, (size_t)f->kvdim * sizeof(float));
            memcpy(f->vc + (size_t)t * f->kvdim, r + f->qdim + f->kvdim, (size_t)f->kvdim * sizeof(float));
        }
        affine_rows(f->q, T, f->qdim, f->qdim, L->bq.data, (brisk_wscale){0}, false);
        affine_rows(f->kc, T, f->kvdim, f->kvdim, L->bk.data, (brisk_wscale){0}, false);
        affine_rows(f->vc, T, f->kvdim, f->kvdim, L->bv.data, (brisk_wscale){0}, false);
    } else {
        const brisk_weight *ws[3] = {&L->wq, &L->wk, &L->wv};
        float *outs[3] = {f->q, f->kc, f->vc};
        const int64_t strides[3] = {f->qdim, f->kvdim, f->kvdim};
        /* without scales the biases are added inside the matmul (the same sums) */
        const bool scaled = L->s_q.on || L->s_k.on || L->s_v.on;
        const float *bias[3] = {L->bq.data, L->bk.data, L->bv.data};
        matmul(f, ain, T, 3, ws, outs, strides, scaled ? NULL : bias);
        if (scaled) {
            affine_rows(f->q, T, f->qdim, f->qdim, L->bq.data, L->s_q, false);
            affine_rows(f->kc, T, f->kvdim, f->kvdim, L->bk.data, L->s_k, false);
            affine_rows(f->vc, T, f->kvdim, f->kvdim, L->bv.data, L->s_v, false);
        }
    }
    const float *rcache = L->rope_swa && f->rope_cache_swa ? f->rope_cache_swa : f->rope_cache;
    const brisk_rope *rope = L->rope_swa ? &f->rope_swa : &f->rope;
    for (int32_t t = 0; t < T; t++) {
        float *q = f->q + (size_t)t * f->qdim, *k = f->kc + (size_t)t * f->kvdim;
        if (L->q_norm.data) {
            qk_norm(q, &L->q_norm, hp->n_head, hd, hp->norm_eps);
            qk_norm(k, &L->k_norm, hp->n_head_kv, hd, hp->norm_eps);
        }
        if (L->rope) {
            const float *rc = rcache + (size_t)t * f->rope.n_rot;
            brisk_rope_apply(rope, rc, q, hp->n_head, hd);
            brisk_rope_apply(rope, rc, k, hp->n_head_kv, hd);
        }
        if (hp->q_scale != 1.0f) scale_rows(q, f->qdim, hp->q_scale);
        const float *v = f->vc + (size_t)t * f->kvdim;
        for (int h = 0; h < hp->n_head_kv; h++) {
            uint16_t *kd = brisk_kv_k(kv, il, b->seq[t], f->slot[t], h), *vd = brisk_kv_v(kv, il, b->seq[t], f->slot[t], h);
            for (int i = 0; i < hd; i++) {
                kd[(size_t)i * BRISK_KV_BLOCK] = brisk_fp32_to_fp16(k[h * hd + i]);   /* K is stored transposed */
                vd[i] = brisk_fp32_to_fp16(v[h * hd + i]);
            }
        }
    }
    const bool swa_layer = L->window > 0 && f->vsink_swa;
    attn_task at = {.f = f, .kv = kv, .b = b, .layer = il, .vsink = swa_layer ? f->vsink_swa : f->vsink,
                    .vlo = swa_layer ? f->vlo_swa : f->vlo, .windowed = swa_layer ? f->window_swa > 0 : f->window > 0,
                    .scale = hp->attn_softcap != 0.0f ? hp->kq_scale / hp->attn_softcap : hp->kq_scale, .softcap = hp->attn_softcap};
    /* Several tokens of one sequence, short enough: widen its K once for
     * all the batch's queries (tree batches too: kt serves their cached
     * positions), so each K element is converted once, not once per
     * token. One token reads the cache's transposed K directly. */
    if (f->kt && T >= 2) {
        int32_t len = 0;
        bool one = true;
        for (int32_t t = 0; t < T; t++) {
            one = one && b->seq[t] == b->seq[0];
            len = f->vis[t] + 1 > len ? f->vis[t] + 1 : len;
        }
        if (one && len <= f->kt_cap) {
            at.kt = f->kt;
            at.kt_len = len;
            at.kt_skip0 = at.kt_skip1 = 0;
            if (at.windowed) {   /* the gap no token of the batch sees, in whole 64-entry tiles */
                int32_t lo = INT32_MAX, sink = 0;
                for (int32_t t = 0; t < T; t++) {
                    lo = BRISK_MIN(lo, at.vlo[t]);
                    sink = BRISK_MAX(sink, at.vsink[t]);
                }
                at.kt_skip0 = (sink + ATTN_TILE - 1) / ATTN_TILE * ATTN_TILE;
                at.kt_skip1 = lo / ATTN_TILE * ATTN_TILE;
            }
            run_step(f, kt_worker, &at, (double)len * f->kvdim);
        }
    }
    double attn_macs = 0.0;   /* q.k and p.v over every attended position */
    for (int32_t t = 0; t < T; t++) attn_macs += 2.0 * (f->vis[t] + 1) * hp->n_head * hd;
    run_step(f, attn_worker, &at, attn_macs);
    matmul1(f, f->att, T, &L->wo, f->xn, d);
    affine_rows(f->xn, T, d, d, L->bo.data, L->s_o, false);
    residual_add(f, T, &L->post_attn_norm);
}

/* Norm -> gate, up -> SwiGLU / GeGLU -> down -> post-norm -> residual. */
static void run_ffn_block(brisk_forward *f, const brisk_layer *L, int32_t T) {
    const brisk_hparams *hp = &f->m->hp;
    const int32_t d = hp->n_embd;
    const int64_t ff = hp->n_ff;
    const float *fin = f->x;
    if (L->ffn_norm.data) {
        for (int32_t t = 0; t < T; t++)
            norm_row(hp, f->xn + (size_t)t * d, f->x + (size_t)t * d, &L->ffn_norm, &L->ffn_norm_b, d);
        fin = f->xn;
    }
    swiglu_task sw = {.fn = f->swiglu, .gelu_lut = f->gelu_lut, .h = f->g, .n = ff, .rows = T};
    if (hp->fused_up) {   /* one [gate | up] matrix: its rows' halves */
        matmul1(f, fin, T, &L->w_up, f->u, 2 * ff);
        affine_rows(f->u, T, 2 * ff, 2 * ff, L->b_up.data, L->s_up, true);
        sw.g = f->u, sw.u = f->u + ff, sw.g_stride = 2 * ff;
    } else if (!L->w_gate.data) {   /* GELU(up), no gate */
        matmul1(f, fin, T, &L->w_up, f->g, ff);
        affine_rows(f->g, T, ff, ff, L->b_up.data, L->s_up, true);
        sw.g = f->g, sw.u = NULL, sw.g_stride = ff;
    } else {
        const brisk_weight *ws[2] = {&L->w_gate, &L->w_up};
        float *outs[2] = {f->g, f->u};
        const int64_t strides[2] = {ff, ff};
        matmul(f, fin, T, 2, ws, outs, strides, NULL);
        affine_rows(f->g, T, ff, ff, L->b_gate.data, L->s_gate, true);
        affine_rows(f->u, T, ff, ff, L->b_up.data, L->s_up, true);
        sw.g = f->g, sw.u = f->u, sw.g_stride = ff;
    }
    if (T < 4) swiglu_worker(&sw, 0, 1);   /* as the activation quantizer: a pool step costs more */
    else brisk_pool_run(f->pool, swiglu_worker, &sw);
    matmul1(f, f->g, T, &L->w_down, f->xn, d);
    affine_rows(f->xn, T, d, d, L->b_down.data, L->s_down, true);
    residual_add(f, T, &L->post_ffn_norm);
}

brisk_status brisk_forward_run(brisk_forward *f, brisk_kv *kv, const brisk_fwd_batch *b, float *out, brisk_error *err) {
    if (kv->k_type != BRISK_KV_F16 || kv->v_type != BRISK_KV_F16)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "attention reads an F16 KV cache only");
    brisk_status st = validate_batch(f, kv, b, err);
    if (st) return st;
    /* every sequence's slots, all or nothing, before touching anything (shared
     * blocks the batch writes into are copied here) */
    if ((st = brisk_kv_reserve_batch(kv, b->seq, f->slot, b->n, err))) return st;
    set_window_masks(f, kv, b);

    const brisk_model_data *m = f->m;
    const brisk_hparams *hp = &m->hp;
    const int32_t T = b->n, d = hp->n_embd;

    /* embeddings (times the architecture's embedding scale) */
    const brisk_to_float_fn emb = brisk_qtype_to_float(m->w.tok_embd.type);
    for (int32_t t = 0; t < T; t++)
        emb((const uint8_t *)m->w.tok_embd.data + (size_t)b->token[t] * m->w.tok_embd.row_bytes, f->x + (size_t)t * d, d);
    if (hp->embd_scale != 1.0f) scale_rows(f->x, (int64_t)T * d, hp->embd_scale);
    for (int32_t t = 0; t < T; t++) brisk_rope_cache(&f->rope, b->pos[t], f->rope_cache + (size_t)t * f->rope.n_rot);
    if (f->rope_cache_swa)
        for (int32_t t = 0; t < T; t++) brisk_rope_cache(&f->rope_swa, b->pos[t], f->rope_cache_swa + (size_t)t * f->rope.n_rot);

    for (int32_t il = 0; il < hp->n_layer; il++) {
        const brisk_layer *L = &m->w.layers[il];
        run_attention_block(f, kv, b, il, L);
        run_ffn_block(f, L, T);
    }

    /* the sequences now hold these tokens (their ids and positions recorded
     * per slot); they stay in position order up to the first token that is
     * not at slot == position */
    for (int32_t t = 0; t < T; t++) brisk_kv_written(kv, b->seq[t], f->slot[t], b->token[t], b->pos[t], f->direct[t]);

    int32_t n_out = 0;
    for (int32_t t = 0; t < T; t++)
        if (b->want[t]) {
            norm_row(hp, f->xn + (size_t)n_out * d, f->x + (size_t)t * d, &m->w.output_norm, &m->w.output_norm_b, d);
            n_out++;
        }
    if (n_out) {
        const int64_t nv = hp->n_vocab;
        matmul1(f, f->xn, n_out, &m->w.output, out, nv);
        affine_rows(out, n_out, nv, nv, m->w.output_b.data, m->w.s_output, false);
        if (hp->logit_scale != 0.0f) scale_rows(out, (int64_t)n_out * nv, 1.0f / hp->logit_scale);
        if (hp->final_softcap != 0.0f) softcap_rows(out, (int64_t)n_out * nv, hp->final_softcap);
    }
    return BRISK_OK;
}
