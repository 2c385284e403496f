/* arch: every supported architecture described as data (the table is in
 * arch.c). model.c reads the hyperparameters and binds the tensors an entry
 * names; forward.c runs one layer loop whose stages are switched on and off
 * by these fields and by which optional tensors the file holds. Nothing
 * outside arch.c compares architecture names. */
#ifndef BRISK_ARCH_H
#define BRISK_ARCH_H

#include "ops/ops.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a sublayer (attention, FFN) normalizes: before it (its input), after
 * it (its output, before the residual add), or both. */
enum { BRISK_NORM_PRE = 1, BRISK_NORM_POST = 2 };

typedef enum brisk_ffn_act {
    BRISK_ACT_SWIGLU,        /* silu(gate) * up */
    BRISK_ACT_GEGLU,         /* gelu(gate) * up, llama.cpp's tanh GELU through its F16 table */
    BRISK_ACT_GELU,          /* gelu(up), no gate matrix (starcoder2) */
    /* gpt-oss's clamped SwiGLU (ggml's swiglu_oai): g = min(gate, limit),
     * u = clamp(up, -limit, limit), h = g / (1 + exp(-alpha g)) * (u + 1),
     * alpha and limit from the row (act_alpha, act_limit) */
    BRISK_ACT_SWIGLU_OAI,
} brisk_ffn_act;

/* How the attention scale (multiplier of q.k) is chosen. */
typedef enum brisk_attn_scale_rule {
    BRISK_ASCALE_HEAD,       /* 1/sqrt(head_dim) */
    BRISK_ASCALE_KEY,        /* ARCH.attention.scale when present and nonzero, else 1/sqrt(head_dim) */
    BRISK_ASCALE_GEMMA,      /* 1/sqrt(head_dim); the 27B size (gemma_27b_layers layers) uses 1/sqrt(n_embd/n_head) */
} brisk_attn_scale_rule;

/* Which layers skip RoPE. */
typedef enum brisk_nope_rule {
    BRISK_NOPE_NONE,
    BRISK_NOPE_EVERY_4TH,    /* SmolLM3: layers 3, 7, 11, ... attend without positions */
    BRISK_NOPE_FULL_LAYERS,  /* EXAONE 4: with a sliding window, only the windowed layers rotate */
} brisk_nope_rule;

/* When the architecture uses a sliding window on some layers. */
typedef enum brisk_swa_rule {
    BRISK_SWA_NONE,          /* never (the key is ignored, as llama.cpp does) */
    BRISK_SWA_IF_KEY,        /* when ARCH.attention.sliding_window is present and > 0 */
    BRISK_SWA_ALWAYS,        /* always: the window key overrides swa_window_default */
    BRISK_SWA_IF_64_LAYERS,  /* only the 64-layer size (EXAONE 4 32B), as llama.cpp */
    BRISK_SWA_KEY_REQUIRED,  /* always, and the window key is required (gpt-oss: llama.cpp refuses a file without it) */
} brisk_swa_rule;

/* Whether the FFN is a mixture of experts (ARCH.expert_count > 0 with
 * ffn_gate_inp and the 3-D ffn_{gate,up,down}_exps tensors). */
typedef enum brisk_moe_rule {
    BRISK_MOE_NEVER,         /* dense only: expert_count > 0 is refused */
    BRISK_MOE_OPTIONAL,      /* dense, or experts when expert_count > 0 (llama: Mixtral) */
    BRISK_MOE_ALWAYS,        /* experts are required */
} brisk_moe_rule;

/* The shared expert of an MoE layer (a dense SwiGLU FFN every token runs,
 * added to the routed experts' sum). */
typedef enum brisk_shexp_rule {
    BRISK_SHEXP_NONE,        /* none (shared-expert tensors are refused as unused) */
    BRISK_SHEXP_GATED,       /* always, times sigmoid(ffn_gate_inp_shexp . x) (qwen2moe); width expert_shared_feed_forward_length, else feed_forward_length */
    BRISK_SHEXP_IF_KEY,      /* ungated, when expert_shared_feed_forward_length > 0 (granitemoe) */
    BRISK_SHEXP_COUNT,       /* ungated, width expert_shared_count (required) x the expert width (glm4moe) */
} brisk_shexp_rule;

typedef struct brisk_arch_info {
    const char *name;
    brisk_rope_layout rope_layout;
    uint8_t attn_norm, ffn_norm;           /* BRISK_NORM_PRE | BRISK_NORM_POST */
    bool layer_norm;                       /* the pre-norms and the output norm are LayerNorm (mean and variance, optional bias), not RMSNorm */
    brisk_ffn_act act;
    float act_alpha, act_limit;            /* BRISK_ACT_SWIGLU_OAI's constants (llama.cpp hard-codes gpt-oss's 1.702 and 7) */
    brisk_attn_scale_rule attn_scale;
    int32_t gemma_27b_layers;              /* BRISK_ASCALE_GEMMA: the layer count of the 27B size */
    bool q_prescale;                       /* Q is multiplied by the scale before attention, which then scales by 1 (gemma, phi3) */
    bool embd_scale_sqrt;                  /* embeddings times sqrt(n_embd) (gemma) */
    bool granite_scales;                   /* embedding_scale, residual_scale, logit_scale (granite) */
    bool attn_softcap;                     /* reads attn_logit_softcapping: s = c * tanh(s / c) */
    /* Learned per-head sink logits (blk.N.attn_sinks.weight, [n_head],
     * required): each head's softmax denominator gets exp(sink - max) as if
     * one more key scored the sink and contributed no value (gpt-oss; ggml's
     * flash attention with sinks). */
    bool attn_sinks;
    bool final_softcap;                    /* reads final_logit_softcapping for the logits */
    brisk_swa_rule swa;
    uint32_t swa_window_default;           /* BRISK_SWA_ALWAYS: the window without the key */
    uint32_t swa_pattern_default;          /* without a pattern key: layer il is windowed when il % n < n - 1 */
    bool swa_rope_scale_inherit;           /* windowed layers keep the rope frequency scale (else 1) */
    float swa_rope_base_default;           /* their base without rope.freq_base_swa (0: the global base) */
    brisk_nope_rule nope;
    /* llama.cpp binds every FFN matrix's .scale tensor but only some graphs
     * apply it (build_ffn gets NULL in the others): true = applied. Where it
     * is false the scales are bound and, as in the reference, not applied. */
    bool ffn_scales;
    /* M-RoPE when ARCH.rope.dimension_sections has its first two sections
     * (GLM-4V). For text every section's position is the token's (the
     * fourth's is 0), so it is NEOX rotation; files whose rotated pairs reach
     * the fourth section are refused. */
    bool mrope_sections;
    bool rope_factors;                     /* applies rope_freqs.weight (Llama 3) / rope_factors_long|short.weight (LongRoPE) */
    /* Tensors llama.cpp binds for this architecture but never applies in the
     * forward pass (classifier heads), as name suffixes; bound and counted as
     * read, never used. NULL-terminated, or NULL. */
    const char *const *unused_heads;
    /* Metadata keys (ARCH.suffix) of features this row does not implement:
     * a file where one is present and nonzero is refused. NULL-terminated, or NULL. */
    const char *const *unsupported_nonzero;
    /* Mixture of experts (llama.cpp's build_moe_ffn as each family calls
     * it): softmax over the router logits, the expert_used_count largest,
     * SwiGLU experts, their outputs weighted and summed in that order. */
    brisk_moe_rule moe;
    bool moe_norm_w;                       /* the selected weights are divided by their sum (clamped >= 2^-14) */
    bool moe_exp_scales;                   /* ffn_*_exps.scale ([n_expert], one per expert) are applied; else bound and ignored, as llama.cpp */
    bool moe_ff_key;                       /* expert width from expert_feed_forward_length (default feed_forward_length / expert_used_count); else feed_forward_length */
    brisk_shexp_rule shexp;
    /* glm4moe's router (llama.cpp's build_moe_ffn as glm4-moe.cpp calls it):
     * the gating function from expert_gating_func (1 softmax, 2 sigmoid;
     * absent or 0: sigmoid), the per-layer selection bias exp_probs_b.bias
     * (added to the probabilities to choose the experts, not to weight
     * them), the weights divided by their sum when expert_weights_norm and
     * multiplied by expert_weights_scale (0 or 1: not), and the first
     * leading_dense_block_count layers dense. */
    bool moe_glm_router;
    /* moe_glm_router as deepseek2 loads it: expert_gating_func absent or 0
     * means softmax (its V2 files), sigmoid for the 47/48-layer GLM-4.7
     * lite (n_vocab 154880), as llama.cpp; exp_probs_b.bias is optional (V3
     * has it, V2 not); leading_dense_block_count as glm4moe. */
    bool moe_deepseek2_router;
    /* gpt-oss's router (llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT):
     * the experts are chosen by raw logit (plus ffn_gate_inp.bias), and their
     * weights are the softmax over just the expert_used_count chosen logits. */
    bool moe_softmax_selected;
    /* The router and every expert have biases, all required (gpt-oss):
     * ffn_gate_inp.bias ([n_expert]) is added to the router logits,
     * ffn_{gate,up}_exps.bias ([n_expert][n_ff_exp]) and ffn_down_exps.bias
     * ([n_expert][n_embd]) to each expert's products. */
    bool moe_biases;
    /* The FFN's pre-norm is the tensor post_attention_norm (glm4moe), not
     * ffn_norm; nothing normalizes the attention output. */
    bool ffn_norm_is_post_attention;
    /* ARCH.nextn_predict_layers (multi-token prediction) counts that many
     * extra blocks after the trunk in block_count. llama.cpp runs them only
     * in its MTP graph and, for plain inference, requests their tensors as
     * skipped (TENSOR_SKIP: counted as present, never loaded). brisk does
     * the same: the trunk is block_count - nextn_predict_layers layers, and
     * every tensor named blk.N.* with N in the NextN range is accepted and
     * never read. */
    bool nextn_skip;
    /* Multi-head latent attention (deepseek2.cpp's absorbed MLA): Q is
     * q_nope absorbed through attn_k_b into the latent, then q_pe RoPE'd; K
     * is the normed latent then k_pe RoPE'd; V the latent; MQA over it,
     * then attn_v_b per head and attn_output. Keys q_lora_rank (0 or absent
     * with an attn_q tensor: plain Q), kv_lora_rank, key_length_mla,
     * value_length_mla; kq scale mscale^2 / sqrt(key_length_mla) with
     * rope.scaling.yarn_log_multiplier. */
    bool mla;
} brisk_arch_info;

/* The table entry of an architecture name, or NULL. */
const brisk_arch_info *brisk_arch_find(const char *name, size_t len);
/* Why a known architecture without a row is not run (what it needs that
 * brisk lacks), or NULL for names brisk knows nothing about. */
const char *brisk_arch_missing_reason(const char *name, size_t len);
/* "llama, qwen2, ...": every supported name, for error messages, into buf. */
void brisk_arch_names(char *buf, size_t cap);

#endif
