/* model: hyperparameters and weights read from a GGUF file, and the forward
 * pass over a batch. Architecture differences are data (the flags in
 * brisk_hparams), never a copied forward function. A loaded model is
 * immutable: weights are zero-copy views into the read-only mapping. */
#ifndef BRISK_MODEL_H
#define BRISK_MODEL_H

#include "base/base.h"
#include "gguf/gguf.h"
#include "ops/ops.h"

typedef enum brisk_arch { BRISK_ARCH_LLAMA, BRISK_ARCH_QWEN2, BRISK_ARCH_QWEN3 } brisk_arch;

typedef struct brisk_hparams {
    brisk_arch arch;
    char arch_name[32];
    int32_t n_vocab;
    int32_t n_embd;          /* model width d */
    int32_t n_layer;
    int32_t n_head;          /* query heads */
    int32_t n_head_kv;       /* key/value heads (GQA/MQA when < n_head) */
    int32_t head_dim;        /* attention.key_length; may differ from n_embd / n_head */
    int32_t head_dim_v;      /* attention.value_length */
    int32_t n_ff;            /* feed-forward width */
    int32_t n_ctx_train;
    float norm_eps;          /* RMSNorm epsilon */
    bool qkv_bias;           /* Q/K/V projections carry biases (qwen2) */
    bool qk_norm;            /* per-head RMSNorm of Q and K before RoPE (qwen3) */
    bool tied_output;        /* logits use token_embd (no output.weight) */
    brisk_rope rope;         /* layout, base, scaling; freq_factors points into the file */
    int32_t rope_n_ctx_orig;
} brisk_hparams;

/* A 2-D weight matrix [rows][cols] (ggml ne0 = cols, ne1 = rows), or a vector. */
typedef struct brisk_weight {
    const void *data;        /* borrowed from the mapping */
    uint32_t type;           /* brisk_qtype */
    int64_t cols, rows;
    size_t row_bytes;
    /* Rows 0 .. 16*floor(rows/16)-1 repacked at load for the packed GEMM
     * (kernels.h), owned by the model; NULL when the type or CPU has none.
     * The remaining rows, and data, stay canonical. */
    void *packed;
    size_t packed_group_bytes;   /* bytes per group of 16 packed rows */
} brisk_weight;

typedef struct brisk_layer {
    brisk_weight attn_norm;                 /* [d] F32 */
    brisk_weight wq, wk, wv, wo;            /* [n_head*hd][d], [n_kv*hd][d] x2, [d][n_head*hd_v] */
    brisk_weight bq, bk, bv;                /* biases (qkv_bias), F32 */
    brisk_weight q_norm, k_norm;            /* [hd] (qk_norm) */
    brisk_weight ffn_norm;                  /* [d] */
    brisk_weight w_gate, w_up, w_down;      /* [n_ff][d], [n_ff][d], [d][n_ff] */
} brisk_layer;

typedef struct brisk_model_weights {
    brisk_weight tok_embd;                  /* [n_vocab][d] */
    brisk_weight output_norm;               /* [d] */
    brisk_weight output;                    /* [n_vocab][d]; == tok_embd when tied */
    brisk_layer *layers;                    /* [n_layer] */
} brisk_model_weights;

typedef struct brisk_model_data {
    brisk_gguf *gguf;                       /* owns the mapping */
    brisk_hparams hp;
    brisk_model_weights w;
    float *norm_f32;                        /* norm/bias vectors converted to F32 when stored otherwise */
    uint64_t n_params;
    size_t weight_bytes;      /* tensor bytes in the file the model reads */
    size_t packed_bytes;      /* of those, held as packed copies in anonymous memory (the file pages dropped) */
    /* brisk_gguf_header_hash of the file (header, metadata, tensor table,
     * size), taken at load: KV-state files record it (src/engine/state.c) */
    uint64_t header_hash;
} brisk_model_data;

/* Read hyperparameters and bind every tensor, validating shapes and types.
 * Takes ownership of g (closed by brisk_model_data_free, even on failure). */
brisk_status brisk_model_data_load(brisk_gguf *g, brisk_model_data **out, brisk_error *err);
void brisk_model_data_free(brisk_model_data *m);

#endif
