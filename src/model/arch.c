/* arch: the architecture table (see arch.h). Each row is llama.cpp's graph
 * for that family (src/models/NAME.cpp in the peer) written down as data;
 * docs/MODELS.md says how each row was checked. Optional tensors (biases,
 * per-tensor scales, q/k norms, fused projections) are not listed: the loader
 * binds whichever the file holds and the forward pass applies them, as
 * llama.cpp does. */
#include "model/arch.h"

#include <stdio.h>
#include <string.h>

static const char *const qwen3_unused[] = {"cls.output.weight", "cls.output.bias", NULL};
/* Mistral's attention temperature (Q scaled by a log of the position) */
static const char *const mistral3_unsupported[] = {"attention.temperature_scale", NULL};
/* GLM-4's multi-token-prediction layers (counted in block_count, not run) */
static const char *const glm4_unsupported[] = {"nextn_predict_layers", NULL};

/* deepseek2: Mistral-Large's attention temperature, GLM-4.7 lite's NextN block */
static const char *const deepseek2_unsupported[] = {"attention.temperature_scale", "nextn_predict_layers", NULL};

#define PRE BRISK_NORM_PRE
#define POST BRISK_NORM_POST

static const brisk_arch_info arch_table[] = {
    /* pre-norm decoders with SwiGLU */
    {.name = "llama", .rope_layout = BRISK_ROPE_NORMAL, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .ffn_scales = true, .rope_factors = true,
     .moe = BRISK_MOE_OPTIONAL, .moe_norm_w = true, .moe_exp_scales = true},
    {.name = "mistral3", .rope_layout = BRISK_ROPE_NORMAL, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .ffn_scales = true, .rope_factors = true, .unsupported_nonzero = mistral3_unsupported},
    {.name = "smollm3", .rope_layout = BRISK_ROPE_NORMAL, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .nope = BRISK_NOPE_EVERY_4TH},
    {.name = "granite", .rope_layout = BRISK_ROPE_NORMAL, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_KEY, .granite_scales = true, .rope_factors = true},
    /* mixtures of experts (build_moe_ffn) with softmax routing */
    {.name = "granitemoe", .rope_layout = BRISK_ROPE_NORMAL, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_KEY, .granite_scales = true, .rope_factors = true,
     .moe = BRISK_MOE_ALWAYS, .moe_norm_w = true, .shexp = BRISK_SHEXP_IF_KEY},
    {.name = "qwen2moe", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .moe = BRISK_MOE_ALWAYS, .moe_ff_key = true, .shexp = BRISK_SHEXP_GATED},
    {.name = "qwen3moe", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .moe = BRISK_MOE_ALWAYS, .moe_norm_w = true, .moe_exp_scales = true, .moe_ff_key = true},
    {.name = "olmoe", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .moe = BRISK_MOE_ALWAYS},
    /* sigmoid routing with a selection bias, leading dense layers, shared experts */
    {.name = "glm4moe", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .mrope_sections = true,
     .moe = BRISK_MOE_ALWAYS, .moe_ff_key = true, .shexp = BRISK_SHEXP_COUNT, .moe_glm_router = true,
     .ffn_norm_is_post_attention = true, .nextn_skip = true},
    /* multi-head latent attention, softmax or sigmoid routing with an
     * optional selection bias, leading dense layers, shared experts */
    {.name = "deepseek2", .rope_layout = BRISK_ROPE_NORMAL, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .mla = true, .unsupported_nonzero = deepseek2_unsupported,
     .moe = BRISK_MOE_ALWAYS, .moe_ff_key = true, .shexp = BRISK_SHEXP_COUNT, .moe_glm_router = true, .moe_deepseek2_router = true},
    /* gpt-oss: attention sinks, windowed layers alternating with full ones,
     * biases everywhere, the clamped SwiGLU, top-k by logit then a softmax
     * over the chosen ones; the FFN's pre-norm is post_attention_norm */
    {.name = "gpt-oss", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU_OAI,
     .act_alpha = 1.702f, .act_limit = 7.0f, .attn_scale = BRISK_ASCALE_HEAD, .attn_sinks = true,
     .swa = BRISK_SWA_KEY_REQUIRED, .swa_pattern_default = 2, .swa_rope_scale_inherit = true,
     .moe = BRISK_MOE_ALWAYS, .moe_ff_key = true, .moe_softmax_selected = true, .moe_biases = true,
     .ffn_norm_is_post_attention = true},
    {.name = "qwen2", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD},
    {.name = "qwen3", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .ffn_scales = true, .unused_heads = qwen3_unused},
    {.name = "phi3", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .q_prescale = true, .rope_factors = true},
    /* Gemma: GeGLU, embeddings times sqrt(d), Q scaled before attention */
    {.name = "gemma", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE, .ffn_norm = PRE, .act = BRISK_ACT_GEGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .q_prescale = true, .embd_scale_sqrt = true},
    {.name = "gemma2", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE | POST, .ffn_norm = PRE | POST, .act = BRISK_ACT_GEGLU,
     .attn_scale = BRISK_ASCALE_GEMMA, .gemma_27b_layers = 46, .q_prescale = true, .embd_scale_sqrt = true,
     .attn_softcap = true, .final_softcap = true,
     .swa = BRISK_SWA_ALWAYS, .swa_window_default = 4096, .swa_pattern_default = 2, .swa_rope_scale_inherit = true},
    {.name = "gemma3", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE | POST, .ffn_norm = PRE | POST, .act = BRISK_ACT_GEGLU,
     .attn_scale = BRISK_ASCALE_GEMMA, .gemma_27b_layers = 62, .q_prescale = true, .embd_scale_sqrt = true,
     .final_softcap = true, .swa = BRISK_SWA_IF_KEY, .swa_pattern_default = 6, .swa_rope_base_default = 10000.0f},
    /* post-norm only (no norm before the sublayers) */
    {.name = "olmo2", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = POST, .ffn_norm = POST, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .swa = BRISK_SWA_IF_KEY, .swa_pattern_default = 4},
    {.name = "exaone4", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = POST, .ffn_norm = POST, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .rope_factors = true, .nope = BRISK_NOPE_FULL_LAYERS,
     .swa = BRISK_SWA_IF_64_LAYERS, .swa_window_default = 4096, .swa_pattern_default = 4, .swa_rope_scale_inherit = true},
    /* pre and post norms, fused gate+up */
    {.name = "glm4", .rope_layout = BRISK_ROPE_NORMAL, .attn_norm = PRE | POST, .ffn_norm = PRE | POST, .act = BRISK_ACT_SWIGLU,
     .attn_scale = BRISK_ASCALE_HEAD, .mrope_sections = true, .unsupported_nonzero = glm4_unsupported},
    /* LayerNorm and a plain GELU FFN, biases everywhere */
    {.name = "starcoder2", .rope_layout = BRISK_ROPE_NEOX, .attn_norm = PRE, .ffn_norm = PRE, .layer_norm = true,
     .act = BRISK_ACT_GELU, .attn_scale = BRISK_ASCALE_HEAD},
};

#undef PRE
#undef POST

const brisk_arch_info *brisk_arch_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof arch_table / sizeof arch_table[0]; i++)
        if (strlen(arch_table[i].name) == len && !memcmp(arch_table[i].name, name, len)) return &arch_table[i];
    return NULL;
}

/* Relatives of the supported families that have no row, and what each lacks. */
static const struct {
    const char *name, *reason;
} missing[] = {
    {"deepseek2-ocr", "it is deepseek2 with plain (not latent) attention on some layers and a vision tower, which brisk does not implement"},
    {"deepseek32", "it is deepseek2 with a sparse-attention indexer, which brisk does not implement"},
};

const char *brisk_arch_missing_reason(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++)
        if (strlen(missing[i].name) == len && !memcmp(missing[i].name, name, len)) return missing[i].reason;
    return NULL;
}

void brisk_arch_names(char *buf, size_t cap) {
    size_t n = 0;
    if (cap) buf[0] = 0;
    for (size_t i = 0; i < sizeof arch_table / sizeof arch_table[0] && n < cap; i++) {
        const int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", arch_table[i].name);
        if (w < 0) break;
        n += (size_t)w;
    }
}
