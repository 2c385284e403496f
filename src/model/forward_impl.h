/* forward_impl.h: what the stages of the forward pass share, internal to
 * src/model. forward.c: scratch, batch checks and the pass; matmul.c: the
 * parallel steps and matmuls; attention.c: attention over the paged KV;
 * layer.c: one layer's stages (norms, projections, activations, residuals),
 * the embeddings and the logits. */
#ifndef BRISK_FORWARD_IMPL_H
#define BRISK_FORWARD_IMPL_H

#include "model/forward.h"

#include <stdatomic.h>

#define MM_MAX_JOBS 3
#define MM_ROW_JOBS 16   /* jobs of one brisk_fwd_matmul_rows step (decode: gate and up of 8 experts) */


/* A thread's share of a matmul's units, [lo, hi) packed in one atomic word
 * (lo in the low half) on its own cache line: the owner takes chunks from
 * the front, a thread that ran out takes single units from the back. */
typedef struct mm_range {
    _Alignas(64) atomic_uint_fast64_t lohi;
} mm_range;

struct brisk_forward {
    const brisk_model_data *m;
    const brisk_kernels *k;
    const brisk_gemm_kernels *gk;                /* packed GEMM, or NULL */
    const brisk_attn_kernels *ak;                /* attention (the kernel table's ISA, or ref): never NULL */
    char isa_name[48];                           /* brisk_forward_isa's answer */
    brisk_pool *pool;
    int32_t n_batch, n_ctx;
    int32_t qdim, kvdim, maxdim;
    int32_t vdim, odim;                          /* V per token (n_head_kv * head_dim_v), attention output (n_head * head_dim_v) */
    float *x, *xn, *q, *kc, *vc, *att, *g, *u;   /* activations, [n_batch][dim]: q qdim, kc kvdim, vc vdim, att odim */
    /* multi-head latent attention (hparams.mla; NULL otherwise): the
     * low-rank q ([n_batch][n_lora_q]), the projected q ([n_batch][n_head *
     * mla_head_k]), one head's gathered input and output rows of attn_k_b /
     * attn_v_b ([n_batch][n_lora_kv] each) and the heads' expanded outputs
     * ([n_batch][n_head * mla_head_v]) */
    float *mla_qa, *mla_q, *mla_hin, *mla_hout, *mla_o;
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
    double (*exp_sub)(float *x, int64_t n, float m);
    void (*swiglu)(float *h, const float *g, const float *u, int64_t n);
    /* per batch token, filled by validate_batch: its KV slot, its parent (-1:
     * follows the cache), the sequence's cached length before the batch, and
     * whether it and all its ancestors sit at slot == position ("direct") */
    int32_t *slot, *par, *tbase;
    uint8_t *direct;
    /* [n_batch] 1: a scored retention policy observes this token's attention
     * (brisk_kv_policy_observes; set per batch, NULL never) */
    uint8_t *observe;
    /* [n_batch] hyb4/hyb2 caches: the token's wave, its block counted from its
     * sequence's first block in the batch (attention runs one wave after the
     * other, kv/hyb.c refreshing the hot rows between) */
    int32_t *wave;
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
    /* mixture of experts (hparams.n_expert > 0; NULL otherwise) */
    float *moe_logits;                           /* [n_batch][n_expert] router logits, then probabilities */
    int32_t *moe_sel;                            /* [n_batch][n_expert_used] chosen experts, best first */
    float *moe_w;                                /* [n_batch][n_expert_used] their weights */
    int32_t *moe_start, *moe_list;               /* [n_expert + 1] / [n_batch * n_expert_used]: (token, rank) pairs by expert */
    float *moe_x;                                /* [n_batch][n_embd] one expert's gathered input rows */
    float *moe_y;                                /* [n_batch][n_embd] its output rows (and the shared expert's) */
    float *moe_out;                              /* [n_batch * n_expert_used][n_embd] every (token, rank) output */
    int n_threads;
    double min_parallel_macs;                    /* PARALLEL_MIN_MACS, or BRISK_PARALLEL_MIN_MACS (tests: 0) */
    int64_t mm_pass_bytes;                       /* 0, or BRISK_MM_PASS_KIB (tests): every matmul pass's activation limit (mm_tok_block) */
    struct mm_range *ranges;                     /* [thread] matmul unit ranges, for stealing */
    int32_t *anc;                                /* tree tokens: [thread][n_batch] slots of positions base.. */
    uint16_t *kgather;                           /* tree tokens: [thread][16][head_dim] K rows in position order */
    /* hyb4/hyb2 caches: [thread][ATTN_HEADS][hyb_hs_cap] an item's scores of
     * its KV head's hot rows (attention.c), hyb_hs_cap = brisk_kv_hyb_cap(n_ctx) */
    float *hyb_hs;
    int32_t hyb_hs_cap;
    int16_t *q8_codes;                           /* a Q8_0/Q4_0 K: [thread][ATTN_HEADS][head_dim] the item's queries in Q8_0 */
    float *q8_scales;                            /* their scales, [thread][ATTN_HEADS][head_dim / 32] */
    int32_t attn_split;                          /* entries per attention split (ATTN_SPLIT, or BRISK_ATTN_SPLIT) */
    int32_t split_cap;                           /* splits a token may have in split_part (0: no split items) */
    float *split_o;                              /* [thread][ATTN_HEADS][head_dim_v] one split's output beside the running one */
    float *split_part;                           /* [ATTN_SPLIT_TOKENS][n_head][split_cap][head_dim_v + 2] split states */
    size_t bytes;
    bool dry;                                    /* planning only: count bytes, allocate nothing */
};

/* The widest FFN row the scratch holds: the dense FFN, an expert, the shared expert. */
static inline int32_t brisk_fwd_ff_max(const brisk_hparams *hp) {
    const int32_t a = hp->n_ff > hp->n_ff_exp ? hp->n_ff : hp->n_ff_exp;
    return a > hp->n_ff_shexp ? a : hp->n_ff_shexp;
}

/* ---- parallel steps ------------------------------------------------------------------ */

/* A pool step costs a wake-up and a barrier (microseconds, more when workers
 * sleep or share a core with other work). A step with less arithmetic than
 * this many multiply-adds runs on the calling thread instead: a tiny model's
 * single-token decode then costs the same at 1 and at N threads, while its
 * multi-token passes (speculative verification, prefill) still spread out.
 * Every worker splits by output rows or (token, head) items, so where a step
 * runs never changes a result. */
#define PARALLEL_MIN_MACS (256 * 1024)

/* Attention tiles: ATTN_TILE positions aligned to absolute position 0 (attention.c). */
#define ATTN_TILE 64
/* query heads of one KV head processed together (they share every K and V row) */
#define ATTN_HEADS 8
/* Flash-decoding splits (attention.c): a token's visible entries are attended
 * in runs of ATTN_SPLIT (a multiple of ATTN_TILE; BRISK_ATTN_SPLIT overrides
 * it, for tests), merged in order. Batches of at most ATTN_SPLIT_TOKENS
 * tokens may run the splits as separate items; ATTN_SPLIT_CAP bounds the
 * splits one token may have there (its scratch), a longer context's run on
 * one thread each (the same bits). */
#define ATTN_SPLIT 1024
#define ATTN_SPLIT_TOKENS 4
#define ATTN_SPLIT_CAP 512

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
    const float *sinks;           /* [n_head] learned sink logits joining each head's softmax denominator (arch attn_sinks), or NULL */
    int64_t split_first[ATTN_SPLIT_TOKENS + 1];   /* split items: token t's are [split_first[t], split_first[t + 1]) */
    int32_t wave;         /* hyb: only the tokens of this wave (f->wave), else -1: all */
} attn_task;

/* SwiGLU of the FFN rows, split by token: an expf per element, on the calling
 * thread it was ~2% of a 2-thread F16 prefill profile during which the other
 * thread waited. */
typedef struct swiglu_task {
    void (*fn)(float *h, const float *g, const float *u, int64_t n);   /* f->swiglu (SwiGLU) */
    const float *gelu_lut;   /* GeGLU instead: ggml's F16 GELU table */
    float oai_alpha, oai_limit;   /* the clamped SwiGLU instead when oai_limit > 0 (arch BRISK_ACT_SWIGLU_OAI) */
    float *h;         /* [rows][n] result (may be g) */
    const float *g;   /* [rows] with g_stride */
    const float *u;
    int64_t n, g_stride;   /* u has g's stride */
    int32_t rows;
} swiglu_task;

/* A step of macs multiply-adds: on the calling thread below f->min_parallel_macs, else on the pool. */
void brisk_fwd_run_step(brisk_forward *f, brisk_pool_fn fn, void *ctx, double macs);
/* n_tok input rows of x times up to MM_MAX_JOBS weights sharing that input
 * (one quantization per activation type, one parallel step); bias[j] (or
 * NULL) is added inside. */
void brisk_fwd_matmul(brisk_forward *f, const float *x, int32_t n_tok, int n, const brisk_weight *const *w, float *const *out,
                      const int64_t *out_stride, const float *const *bias);
void brisk_fwd_matmul1(brisk_forward *f, const float *x, int32_t n_tok, const brisk_weight *w, float *out, int64_t out_stride);
/* One token's products with n (<= MM_ROW_JOBS) weights of the same cols in
 * one parallel step, job j multiplying row x_row[j] of x ([rows][cols]) by
 * w[j] into out[j]: each distinct row is quantized once per activation type,
 * and every output gets the bits brisk_fwd_matmul gives it with n_tok 1
 * (same quantizer, same per-unit kernel choice). Decode runs all selected
 * experts of a token with two of these. */
void brisk_fwd_matmul_rows(brisk_forward *f, const float *x, int32_t rows, int n, const brisk_weight *const *w, const int32_t *x_row,
                           float *const *out);
/* pool workers over an attn_task / swiglu_task */
void brisk_fwd_kt_worker(void *ctx, int ith, int nth);
void brisk_fwd_attn_worker(void *ctx, int ith, int nth);
/* a small batch's splits as items, then their merge (brisk_fwd_attn_split_plan says when) */
bool brisk_fwd_attn_split_plan(attn_task *at, int n_threads);
void brisk_fwd_attn_split_worker(void *ctx, int ith, int nth);
void brisk_fwd_attn_merge_worker(void *ctx, int ith, int nth);
void brisk_fwd_swiglu_worker(void *ctx, int ith, int nth);
/* The stages of brisk_forward_run (layer.c). */
void brisk_fwd_embed(brisk_forward *f, const brisk_fwd_batch *b);
void brisk_fwd_attention_block(brisk_forward *f, brisk_kv *kv, const brisk_fwd_batch *b, int32_t il, const brisk_layer *L);
void brisk_fwd_ffn_block(brisk_forward *f, const brisk_layer *L, int32_t T);
void brisk_fwd_logits(brisk_forward *f, const brisk_fwd_batch *b, float *out);

#endif
