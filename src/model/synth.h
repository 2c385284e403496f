/* synth: write random-weight GGUF models in the exact tensor shapes of real
 * ones (or of tiny test models), so speed and correctness can be measured
 * without downloading weights. The files load in brisk and in llama.cpp. */
#ifndef BRISK_SYNTH_H
#define BRISK_SYNTH_H

#include "base/base.h"
#include "gguf/gguf.h"

typedef struct brisk_synth_shape {
    const char *name;
    const char *arch;           /* general.architecture (a row of arch.c) */
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float rope_base, norm_eps;
    bool tied_output;
    bool qkv_bias;              /* qwen2 */
    bool qk_norm;               /* qwen3 */
    bool llama3_rope_freqs;     /* write rope_freqs.weight (Llama 3.1 style, factor 8) */
    const char *rope_scaling;   /* NULL, "linear" or "yarn" */
    float rope_scaling_factor;
    int32_t rope_orig_ctx;
    bool post_norms;            /* post_attention_norm / post_ffw_norm (gemma2, gemma3) */
    bool fused_qkv;             /* one attn_qkv matrix (phi3) */
    bool fused_up;              /* ffn_up holds [gate | up], no ffn_gate (phi3) */
    int32_t swa_window;         /* ARCH.attention.sliding_window, 0: none written */
    float attn_softcap, final_softcap;   /* 0: not written */
    const char *control_text;   /* token 259 is this control token (llama.cpp's phi3 vocabulary wants <|endoftext|>), or NULL */
    /* mixture of experts (n_expert > 0): ffn_gate_inp and 3-D ffn_*_exps
     * instead of the dense FFN, experts n_ff_exp wide (ARCH.expert_feed_forward_length) */
    int32_t n_expert, n_expert_used, n_ff_exp;
    int32_t n_ff_shexp;         /* a shared expert of this width (expert_shared_feed_forward_length), 0: none */
    bool shexp_gate;            /* with its ffn_gate_inp_shexp vector (qwen2moe) */
    bool qk_norm_full;          /* Q/K norms over the whole projection (olmoe), not per head */
    /* gpt-oss */
    bool out_bias;              /* attn_output.bias */
    bool attn_sinks;            /* attn_sinks.weight: one learned logit per head */
    bool ffn_norm_post_attention;   /* the FFN's pre-norm is named post_attention_norm (no ffn_norm) */
    bool expert_biases;         /* ffn_gate_inp.bias and the 2-D ffn_{gate,up,down}_exps.bias */
    float yarn_beta_fast, yarn_beta_slow;   /* rope.scaling.yarn_beta_*, 0: not written */
} brisk_synth_shape;

/* The table of known shapes; NULL-terminated by name. */
const brisk_synth_shape *brisk_synth_shapes(void);
const brisk_synth_shape *brisk_synth_find(const char *name);

/* What the weights are stored as: one tensor type for every matrix and the
 * embedding (norms and biases F32), or a llama-quantize file type's mixture
 * (ftype >= 0, a brisk_ftype: each tensor gets the type `brisk quantize`
 * would give it in the shape's F32 file, e.g. MXFP4_MOE's MXFP4 experts and
 * Q8_0 rest; the file then also has general.file_type and
 * general.quantization_version, as llama-quantize writes them). */
typedef struct brisk_synth_types {
    uint32_t type;   /* used when ftype < 0 */
    int ftype;
} brisk_synth_types;

/* Bytes the file will take (approximately, within alignment) for this type. */
bool brisk_synth_file_bytes(const brisk_synth_shape *s, uint32_t type, uint64_t *bytes);
/* The same for either kind of types; false (message in err) when a row is not whole blocks of its type. */
brisk_status brisk_synth_file_bytes_types(const brisk_synth_shape *s, brisk_synth_types types, uint64_t *bytes, brisk_error *err);

/* Write the model with matrices in `type` (norms and biases stay F32).
 * progress (may be NULL) is called after each tensor with done/total counts.
 * The file streams out row by row (a temporary file beside path, renamed
 * when complete): memory stays a few rows whatever the model's size. */
brisk_status brisk_synth_write(const brisk_synth_shape *s, uint32_t type, uint64_t seed, const char *path,
                               void (*progress)(int done, int total, void *ud), void *ud, brisk_error *err);

/* A real tokenizer for a synthetic model: the token count of vocab (a model or a
 * vocabulary-only GGUF, e.g. shared/vocab/ggml-vocab-*.gguf), after checking that
 * it has tokenizer.ggml.tokens (strings), that its other per-token arrays
 * (scores, token_type) have as many entries and that every tokenizer.*_token_id
 * names one of them. Errors name the file's key that is wrong. */
brisk_status brisk_synth_vocab_size(const brisk_gguf *vocab, const char *path, int32_t *n_vocab, brisk_error *err);

/* As brisk_synth_write, with every tokenizer.* key of vocab (NULL: the synthetic
 * vocabulary) instead of the synthetic vocabulary; s->n_vocab must equal
 * brisk_synth_vocab_size(vocab) (give a copy of the shape with it replaced). */
brisk_status brisk_synth_write_vocab(const brisk_synth_shape *s, uint32_t type, uint64_t seed, const brisk_gguf *vocab,
                                     const char *path, void (*progress)(int done, int total, void *ud), void *ud,
                                     brisk_error *err);

/* As brisk_synth_write_vocab, with the weights in `types`. */
brisk_status brisk_synth_write_types(const brisk_synth_shape *s, brisk_synth_types types, uint64_t seed, const brisk_gguf *vocab,
                                     const char *path, void (*progress)(int done, int total, void *ud), void *ud,
                                     brisk_error *err);

#endif
