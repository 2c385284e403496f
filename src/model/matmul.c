/* matmul: the forward pass's parallel steps and matrix products (see
 * forward_impl.h). Matmuls split output rows across threads, so each weight
 * byte is read once per step for the whole batch, and every output element
 * is one vec_dot call (or the packed GEMM's bit-identical equivalent)
 * whatever the batch size (batch invariance). */
#include "model/forward_impl.h"
#include "quant/quant.h"

#include <stdatomic.h>
#include <string.h>

/* Threads a step of macs multiply-adds runs on (brisk_fwd_run_step's choice). */
static int step_threads(const brisk_forward *f, double macs) { return macs < f->min_parallel_macs ? 1 : f->n_threads; }

void brisk_fwd_run_step(brisk_forward *f, brisk_pool_fn fn, void *ctx, double macs) {
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
    mm_job jobs[MM_ROW_JOBS];
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

/* Tokens per mm_worker pass. A pass reads, for each 16-row group, the
 * activations of all its tokens; once they outgrow L2 they stream from L3 or
 * DRAM again for every group. Splitting the tokens into blocks keeps a block's
 * activations in L2 while the thread's groups go by, at the price of reading
 * the weights once per block. Every output's arithmetic is the same whatever
 * the block (the kernels' tiles compute each token alone), so this changes no
 * bit (test_engine, BRISK_MM_PASS_KIB). A multiple of 24 keeps every kernel's
 * token tile (8, 6, 4, 3, 2) whole.
 * - Packed F16 reads each token's activations as F32 (4 bytes a column): with
 *   all 512 prompt tokens in one pass they streamed from L3 for every group
 *   (16 MiB for llama-3.2-1b's w_down). Passes of ~768 KiB: one-thread
 *   gemm-micro, 512 tokens, 44.5 -> 49.4 GMAC/s at 4864 columns, 45.0 -> 48.0
 *   at 2048, 46.1 -> 49.3 at 896.
 * - The quantized types read about a quarter of the bytes per token (Q8_K: 1.14
 *   a column; Q8_0: 1.06, plus 1.25 of act_sums), and re-reading their
 *   weights costs more: blocks of 1 MiB once a pass would read more than 2 MiB
 *   (session 25, Sapphire Rapids with 2 MiB of L2, 2 threads). 8 prompts of 255
 *   tokens in one 2,040-token batch (serve's burst; `batched-bench -npp 255
 *   -npl 8 -b 2048`), S_PP t/s, one pass against this rule: llama-3.2-1b
 *   Q4_K_M 199-201 -> 206-210, Q4_0 219-226 -> 244-253; llama-3.2-1b Q4_K_M
 *   pp512 (only w_down is split) 203-205 -> 201-206. Other limits measured:
 *   8 MiB / 2 MiB blocks 199 / 240 (burst), 4 / 1 205 / 251, 4 / 2 200 / 238,
 *   2 / 0.5 201 / 252; 1 / 1 cost pp512 4%.
 * BRISK_MM_PASS_KIB (f->mm_pass_bytes) sets one limit for both, in tests. */
#define MM_F16_PASS (768 * 1024)
#define MM_QUANT_PASS_MAX (2 * 1024 * 1024)
#define MM_QUANT_BLOCK (1024 * 1024)

/* The activation bytes the packed GEMM reads per token for one activation type
 * of stride bytes a row over cols columns: F16's kernel reads only the values
 * widened to F32, the others the quantized row and, where the table has them,
 * its act_sums (10 int32 per 32-column block, kernels.h). */
static int64_t mm_act_bytes(const brisk_forward *f, uint32_t act, int64_t cols, size_t stride) {
    if (act == BRISK_Q_F16) return cols * 4;
    return (int64_t)stride + (f->gk && f->gk->act_sums[act] ? cols / 32 * 10 * 4 : 0);
}

/* per_tok: the activation bytes one token of the pass reads, once per activation
 * type (the jobs share x; brisk_fwd_matmul sums mm_act_bytes). */
static int32_t mm_tok_block(const brisk_forward *f, int n, const brisk_weight *const *w, int32_t n_tok, int64_t per_tok) {
    bool f16 = true;
    for (int j = 0; j < n; j++) {
        if (!f->gk || !w[j]->packed) return n_tok;
        f16 &= w[j]->type == BRISK_Q_F16;
    }
    const int64_t max = f->mm_pass_bytes ? f->mm_pass_bytes : f16 ? 0 : MM_QUANT_PASS_MAX;
    const int64_t block = f->mm_pass_bytes ? f->mm_pass_bytes : f16 ? MM_F16_PASS : MM_QUANT_BLOCK;
    if (per_tok * n_tok <= max) return n_tok;
    const int64_t tb = block / per_tok / 24 * 24;
    return tb < 24 ? 24 : tb < n_tok ? (int32_t)tb : n_tok;
}

/* Multiply n_tok input rows (x, row length = every weight's cols) by up to 3
 * weights sharing that input: quantize once per distinct activation type, then
 * one parallel step over all their rows. */
void brisk_fwd_matmul(brisk_forward *f, const float *x, int32_t n_tok, int n, const brisk_weight *const *w,
                   float *const *out, const int64_t *out_stride, const float *const *bias) {
    mm_task mt = {.k = f->k, .g = f->gk, .n_jobs = n, .n_tok = n_tok};
    uint32_t done_types[MM_MAX_JOBS];
    int n_done = 0;
    int64_t act_bytes = 0;   /* per token, for mm_tok_block */
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
            act_bytes += mm_act_bytes(f, act, w[j]->cols, stride);
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
    mt.tok_block = mm_tok_block(f, n, w, n_tok, act_bytes);
    const int nth = step_threads(f, macs);
    mt.ranges = f->ranges;
    for (int i = 0; i < nth; i++) {   /* published to the workers by the pool's generation bump */
        int64_t lo, hi;
        brisk_split_range(mt.total_rows, i, nth, &lo, &hi);
        atomic_store_explicit(&f->ranges[i].lohi, (uint64_t)lo | ((uint64_t)hi << 32), memory_order_relaxed);
    }
    brisk_fwd_run_step(f, mm_worker, &mt, macs);
}

void brisk_fwd_matmul1(brisk_forward *f, const float *x, int32_t n_tok, const brisk_weight *w, float *out, int64_t out_stride) {
    const brisk_weight *ws[1] = {w};
    float *outs[1] = {out};
    int64_t strides[1] = {out_stride};
    brisk_fwd_matmul(f, x, n_tok, 1, ws, outs, strides, NULL);
}


void brisk_fwd_matmul_rows(brisk_forward *f, const float *x, int32_t rows, int n, const brisk_weight *const *w, const int32_t *x_row,
                           float *const *out) {
    mm_task mt = {.k = f->k, .g = f->gk, .n_jobs = n, .n_tok = 1, .tok_block = 1};
    uint32_t done_types[MM_MAX_JOBS];
    size_t strides[MM_MAX_JOBS];
    int n_done = 0;
    double macs = 0.0;
    for (int j = 0; j < n; j++) {
        const uint32_t act = brisk_qtype_get(w[j]->type)->act_type;
        int slot = -1;
        for (int d = 0; d < n_done; d++)
            if (done_types[d] == act) slot = d;
        if (slot < 0) {   /* every row of x in this activation type, as brisk_fwd_matmul quantizes one */
            slot = n_done;
            done_types[n_done++] = act;
            brisk_qtype_row_bytes(act, w[j]->cols, &strides[slot]);   /* validated at load */
            const brisk_quantize_fn qf = f->gk && f->gk->quantize_act[act] ? f->gk->quantize_act[act] : f->k->quantize_act[act];
            quant_task qt = {.quant = qf, .act = act, .x = x, .n = w[j]->cols, .rows = rows, .dst = f->xq[slot], .dst_stride = strides[slot]};
            if (f->gk && f->gk->act_sums[act]) {
                qt.sums_fn = f->gk->act_sums[act];
                qt.sums = f->xs[slot];
                qt.sums_stride = f->xs_stride;
            }
            quant_worker(&qt, 0, 1);   /* a few rows: quicker here than a pool step */
        }
        mt.jobs[j] = (mm_job){.w = w[j], .xq = f->xq[slot] + (size_t)x_row[j] * strides[slot], .xq_stride = strides[slot],
                              .xs = f->xs[slot] ? f->xs[slot] + (size_t)x_row[j] * f->xs_stride : NULL, .xs_stride = f->xs_stride,
                              .out = out[j], .out_stride = w[j]->rows};
        mt.total_rows += (w[j]->rows + BRISK_GEMM_ROWS - 1) / BRISK_GEMM_ROWS;
        macs += (double)w[j]->rows * (double)w[j]->cols;
    }
    const int nth = step_threads(f, macs);
    mt.ranges = f->ranges;
    for (int i = 0; i < nth; i++) {
        int64_t lo, hi;
        brisk_split_range(mt.total_rows, i, nth, &lo, &hi);
        atomic_store_explicit(&f->ranges[i].lohi, (uint64_t)lo | ((uint64_t)hi << 32), memory_order_relaxed);
    }
    brisk_fwd_run_step(f, mm_worker, &mt, macs);
}
