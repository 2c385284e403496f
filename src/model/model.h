/* model: hyperparameters and weights read from a GGUF file, and the forward
 * pass over a batch. Architecture differences are data (the architecture's
 * row in arch.c, the values in brisk_hparams, and which optional tensors a
 * layer holds), never a copied forward function. Every tensor of the file is
 * bound to the graph, or the load fails naming the ones nothing reads. A loaded model is
 * immutable: weights are zero-copy views into the read-only mapping. */
#ifndef BRISK_MODEL_H
#define BRISK_MODEL_H

#include "base/base.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/pack_cache.h"
#include "ops/ops.h"

typedef struct brisk_hparams {
    const brisk_arch_info *ai;   /* the architecture's table row (arch.c) */
    char arch_name[32];
    int32_t n_vocab;
    int32_t n_embd;          /* model width d */
    int32_t n_layer;         /* the layers run (block_count less the NextN blocks, arch.h nextn_skip) */
    int32_t n_layer_nextn;   /* NextN blocks after them: their tensors are accepted, never read */
    int32_t n_head;          /* query heads */
    int32_t n_head_kv;       /* key/value heads (GQA/MQA when < n_head) */
    int32_t head_dim;        /* attention.key_length; may differ from n_embd / n_head */
    int32_t head_dim_v;      /* attention.value_length */
    /* Multi-head latent attention (arch mla, deepseek2): head_dim is the
     * latent plus its RoPE'd part (n_lora_kv + rope.n_rot), head_dim_v the
     * latent, n_head_kv 1; the cache stores that one latent "KV head" per
     * token (attention is MQA over it, as llama.cpp's absorbed form). */
    bool mla;
    int32_t n_lora_q;        /* q's low rank (attention.q_lora_rank); 0: a plain attn_q (the "lite" sizes) */
    int32_t n_lora_kv;       /* the latent's width (attention.kv_lora_rank) */
    int32_t mla_head_k;      /* a query head before absorption: nope + rope dims (attention.key_length_mla) */
    int32_t mla_head_v;      /* a head's output after attn_v_b (attention.value_length_mla) */
    int32_t n_ff;            /* feed-forward width */
    int32_t n_ctx_train;
    int32_t n_expert;        /* experts per MoE layer (0: dense) */
    int32_t n_expert_used;   /* experts each token is routed to */
    int32_t n_ff_exp;        /* an expert's feed-forward width */
    int32_t n_ff_shexp;      /* the shared expert's width (0: none) */
    int32_t n_expert_groups; /* grouped routing (expert_group_count > 1; else 0): experts in that many equal groups */
    int32_t n_group_used;    /* ... of which the tokens' best expert_group_used_count groups are eligible */
    int32_t n_dense_lead;    /* the first n layers have a dense FFN (glm4moe's leading_dense_block_count) */
    bool moe_sigmoid;        /* router probabilities are sigmoid(logit), not the softmax */
    bool moe_norm_w;         /* the selected weights are divided by their sum */
    float moe_w_scale;       /* the selected weights are multiplied by it (0 or 1: not) */
    float act_alpha, act_limit;   /* the clamped SwiGLU (arch BRISK_ACT_SWIGLU_OAI) of every FFN; act_limit 0: plain SwiGLU */
    float norm_eps;          /* RMSNorm epsilon */
    bool tied_output;        /* logits use token_embd (no output.weight) */
    bool fused_qkv;          /* one attn_qkv matrix [q | k | v] (phi3) */
    bool fused_up;           /* ffn_up holds [gate | up] (2 n_ff rows) and there is no ffn_gate (phi3, glm4) */
    float kq_scale;          /* multiplier of q.k inside attention (1 when q_prescale) */
    float q_scale;           /* q_prescale: Q is multiplied by this before attention; else 1 */
    float attn_softcap;      /* 0: none; else scores become c * tanh(s / c) */
    float final_softcap;     /* 0: none; else logits become c * tanh(l / c) */
    float embd_scale;        /* 1: none; the embeddings are multiplied by it */
    float residual_scale;    /* 0: none; each sublayer's output is multiplied by it before the residual add */
    float logit_scale;       /* 0: none; logits are multiplied by 1 / logit_scale (granite) */
    int32_t swa_window;      /* the windowed layers' window (0: no layer is windowed) */
    brisk_rope rope;         /* layout, base, scaling; freq_factors points into the file */
    brisk_rope rope_swa;     /* the windowed layers' RoPE (rope.freq_base_swa) */
    const float *rope_long;  /* LongRoPE factors (phi3): used instead of freq_factors past rope_n_ctx_orig, or NULL */
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

/* A matrix's per-tensor weight scale (NAME.scale, shape [1]): applied to the
 * product as llama.cpp does (projections: times the scale, then the bias;
 * FFN matrices: the bias, then times the scale). */
typedef struct brisk_wscale {
    bool on;
    float v;
} brisk_wscale;

/* A layer's mixture of experts: the router and each expert's matrices, as
 * views into the file's 3-D tensors (expert e is slice e). */
typedef struct brisk_experts {
    brisk_weight router;                    /* ffn_gate_inp: [n_expert][d] */
    brisk_weight *gate, *up, *down;         /* [n_expert] each: [n_ff_exp][d], [n_ff_exp][d], [d][n_ff_exp] */
    const float *s_gate, *s_up, *s_down;    /* per-expert scales [n_expert] (arch moe_exp_scales), or NULL */
    brisk_weight sh_gate, sh_up, sh_down;   /* the shared expert (sh_up.data NULL: none) */
    brisk_weight sh_gate_inp;               /* [d]: the shared expert's sigmoid gate (qwen2moe), or absent */
    brisk_weight probs_bias;                /* [n_expert]: exp_probs_b.bias, added to choose the experts (glm4moe), or absent */
    brisk_weight router_b;                  /* [n_expert]: ffn_gate_inp.bias, added to the router logits (arch moe_biases), or absent */
    const float *b_gate, *b_up, *b_down;    /* [n_expert][n_ff_exp] x2, [n_expert][d]: each expert's biases (moe_biases), or NULL */
} brisk_experts;

typedef struct brisk_layer {
    brisk_weight attn_norm, attn_norm_b;    /* [d] F32 (BRISK_NORM_PRE) */
    brisk_weight wq, wk, wv, wo;            /* [n_head*hd][d], [n_kv*hd][d] x2, [d][n_head*hd_v] */
    brisk_weight wqkv;                      /* fused_qkv: [(n_head + 2 n_kv) hd][d] */
    brisk_weight bq, bk, bv, bo, bqkv;      /* optional biases, F32 */
    brisk_weight q_norm, k_norm;            /* optional: [hd] (per head) or [n_head*hd] / [n_kv*hd] (whole projection) */
    brisk_weight attn_sinks;                /* [n_head] sink logits (arch attn_sinks), or absent */
    /* multi-head latent attention (hparams.mla): Q through a low rank
     * (wq_a [n_lora_q][d], its norm, wq_b [n_head*mla_head_k][n_lora_q]) or
     * wq ([n_head*mla_head_k][d]); the latent and k_pe (wkv_a
     * [n_lora_kv + n_rot][d]) and the latent's norm; per head, wk_b
     * [n_lora_kv][nope] absorbs q_nope into the latent and wv_b
     * [mla_head_v][n_lora_kv] expands the attention output */
    brisk_weight wq_a, q_a_norm, wq_b, wkv_a, kv_a_norm;
    brisk_weight *wk_b, *wv_b;              /* [n_head] views each (wv_b = wk_b + n_head, one allocation) */
    brisk_weight post_attn_norm;            /* [d] (BRISK_NORM_POST) */
    brisk_weight ffn_norm, ffn_norm_b;      /* [d] */
    brisk_weight w_gate, w_up, w_down;      /* [n_ff][d], [n_ff][d] (fused_up: [2 n_ff][d], no gate), [d][n_ff] */
    brisk_weight b_gate, b_up, b_down;      /* optional biases */
    brisk_weight post_ffn_norm;             /* [d] */
    brisk_wscale s_q, s_k, s_v, s_qkv, s_o, s_gate, s_up, s_down;
    brisk_experts moe;                      /* hparams.n_expert > 0: the FFN (w_gate/up/down stay empty) */
    int32_t window;                         /* sliding window of this layer (0: full attention) */
    bool rope;                              /* false: NoPE (no rotation) */
    bool rope_swa;                          /* rotates with hparams.rope_swa */
} brisk_layer;

typedef struct brisk_model_weights {
    brisk_weight tok_embd;                  /* [n_vocab][d] */
    brisk_weight output_norm, output_norm_b; /* [d] */
    brisk_weight output;                    /* [n_vocab][d]; == tok_embd when tied */
    brisk_weight output_b;                  /* optional [n_vocab] */
    brisk_wscale s_output;
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
    /* The packed-layout cache ($BRISK_PACK_CACHE, pack_cache.h). While its file is mapped, the
     * packed copies of the pack_cached weights point into the mapping (not freed one by one). */
    brisk_pack_file pack_file;
    brisk_weight **pack_cached;
    size_t n_pack_cached;
    char pack_cache_note[1024];   /* one line on what the cache did ("used PATH ..."); "" when it is off */
} brisk_model_data;

/* Read hyperparameters and bind every tensor, validating shapes and types.
 * Takes ownership of g (closed by brisk_model_data_free, even on failure). */
brisk_status brisk_model_data_load(brisk_gguf *g, brisk_model_data **out, brisk_error *err);
/* The same for the file at path (g opened from it): with $BRISK_PACK_CACHE set, the packed
 * copies come from (or go to) the pack cache of that file; any problem with the cache is a
 * note in pack_cache_note and a repack, never a failed load. */
brisk_status brisk_model_data_load_file(brisk_gguf *g, const char *path, brisk_model_data **out, brisk_error *err);
void brisk_model_data_free(brisk_model_data *m);

#endif
