/* synth: random-weight GGUF writer (see synth.h).
 *
 * Weights are Gaussian with std 1/sqrt(fan_in), token embeddings std 0.1 and
 * norm weights 1 + 0.1 N(0,1), like shared/golden, so logits vary strongly
 * between positions and a mistake shows up. The vocabulary is a synthetic
 * SentencePiece one: <unk>, <s>, </s>, the 256 byte tokens, then filler
 * pieces, so both engines can load and tokenize with it; or, with
 * brisk_synth_write_vocab, a real file's tokenizer.* keys copied as they are. */
#include "model/synth.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/quantize.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const brisk_synth_shape shapes[] = {
    /* tiny shapes for golden tests of features shared/golden lacks */
    {"qwen3-tiny", "qwen3", 512, 128, 2, 4, 2, 64, 384, 4096, 1e6f, 1e-6f, true, false, true, false, NULL, 0, 0, false, false, false, 0, 0, 0, NULL, 0, 0, 0, 0, false, false, false, false, false, false, 0, 0},
    {"llama-yarn-tiny", "llama", 512, 128, 2, 4, 2, 32, 384, 4096, 1e4f, 1e-5f, false, false, false, false, "yarn", 4.0f, 16, false, false, false, 0, 0, 0, NULL, 0, 0, 0, 0, false, false, false, false, false, false, 0, 0},
    {"llama-linear-tiny", "llama", 512, 128, 2, 4, 2, 32, 384, 4096, 1e4f, 1e-5f, false, false, false, false, "linear", 4.0f, 0, false, false, false, 0, 0, 0, NULL, 0, 0, 0, 0, false, false, false, false, false, false, 0, 0},
    /* real model shapes (hyperparameters from their published configs) */
    {"smollm2-135m", "llama", 49152, 576, 30, 9, 3, 64, 1536, 8192, 1e5f, 1e-5f, true, false, false, false, NULL, 0, 0, false, false, false, 0, 0, 0, NULL, 0, 0, 0, 0, false, false, false, false, false, false, 0, 0},
    {"qwen2.5-0.5b", "qwen2", 151936, 896, 24, 14, 2, 64, 4864, 32768, 1e6f, 1e-6f, true, true, false, false, NULL, 0, 0, false, false, false, 0, 0, 0, NULL, 0, 0, 0, 0, false, false, false, false, false, false, 0, 0},
    {"qwen3-0.6b", "qwen3", 151936, 1024, 28, 16, 8, 128, 3072, 40960, 1e6f, 1e-6f, true, false, true, false, NULL, 0, 0, false, false, false, 0, 0, 0, NULL, 0, 0, 0, 0, false, false, false, false, false, false, 0, 0},
    {"llama-3.2-1b", "llama", 128256, 2048, 16, 32, 8, 64, 8192, 131072, 5e5f, 1e-5f, true, false, false, true, NULL, 0, 0, false, false, false, 0, 0, 0, NULL, 0, 0, 0, 0, false, false, false, false, false, false, 0, 0},
    {"tinyllama-1.1b", "llama", 32000, 2048, 22, 32, 4, 64, 5632, 2048, 1e4f, 1e-5f, false, false, false, false, NULL, 0, 0, false, false, false, 0, 0, 0, NULL, 0, 0, 0, 0, false, false, false, false, false, false, 0, 0},
    {"llama-3.1-8b", "llama", 128256, 4096, 32, 32, 8, 128, 14336, 131072, 5e5f, 1e-5f, false, false, false, true, NULL, 0, 0, false, false, false, 0, 0, 0, NULL, 0, 0, 0, 0, false, false, false, false, false, false, 0, 0},
    {.name = "gemma-2-2b", .arch = "gemma2", .n_vocab = 256000, .n_embd = 2304, .n_layer = 26, .n_head = 8, .n_head_kv = 4, .head_dim = 256,
     .n_ff = 9216, .n_ctx = 8192, .rope_base = 1e4f, .norm_eps = 1e-6f, .tied_output = true, .post_norms = true, .swa_window = 4096,
     .attn_softcap = 50.0f, .final_softcap = 30.0f},
    {.name = "gemma-3-1b", .arch = "gemma3", .n_vocab = 262144, .n_embd = 1152, .n_layer = 26, .n_head = 4, .n_head_kv = 1, .head_dim = 256,
     .n_ff = 6912, .n_ctx = 32768, .rope_base = 1e6f, .norm_eps = 1e-6f, .tied_output = true, .qk_norm = true, .post_norms = true,
     .swa_window = 512},
    {.name = "phi-3-mini", .arch = "phi3", .n_vocab = 32064, .n_embd = 3072, .n_layer = 32, .n_head = 32, .n_head_kv = 32, .head_dim = 96,
     .n_ff = 8192, .n_ctx = 4096, .rope_base = 1e4f, .norm_eps = 1e-5f, .fused_qkv = true, .fused_up = true,
     .control_text = "<|endoftext|>"},
    /* tiny shapes of the other families (fuzz seeds, quick checks) */
    {.name = "gemma2-tiny", .arch = "gemma2", .n_vocab = 512, .n_embd = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
     .n_ff = 384, .n_ctx = 4096, .rope_base = 1e4f, .norm_eps = 1e-6f, .tied_output = true, .post_norms = true, .swa_window = 16,
     .attn_softcap = 50.0f, .final_softcap = 30.0f},
    {.name = "gemma3-tiny", .arch = "gemma3", .n_vocab = 512, .n_embd = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 1, .head_dim = 32,
     .n_ff = 384, .n_ctx = 4096, .rope_base = 1e6f, .norm_eps = 1e-6f, .tied_output = true, .qk_norm = true, .post_norms = true,
     .swa_window = 16},
    /* micro shapes: fuzz seeds under libFuzzer's 64 KiB input limit (fuzz/corpus/fuzz_model) */
    {.name = "gemma2-micro", .arch = "gemma2", .n_vocab = 288, .n_embd = 32, .n_layer = 2, .n_head = 2, .n_head_kv = 1, .head_dim = 16,
     .n_ff = 64, .n_ctx = 256, .rope_base = 1e4f, .norm_eps = 1e-6f, .tied_output = true, .post_norms = true, .swa_window = 4,
     .attn_softcap = 50.0f, .final_softcap = 30.0f},
    {.name = "gemma3-micro", .arch = "gemma3", .n_vocab = 288, .n_embd = 32, .n_layer = 2, .n_head = 2, .n_head_kv = 1, .head_dim = 16,
     .n_ff = 64, .n_ctx = 256, .rope_base = 1e6f, .norm_eps = 1e-6f, .tied_output = true, .qk_norm = true, .post_norms = true,
     .swa_window = 4},
    {.name = "phi3-micro", .arch = "phi3", .n_vocab = 288, .n_embd = 32, .n_layer = 2, .n_head = 2, .n_head_kv = 2, .head_dim = 16,
     .n_ff = 64, .n_ctx = 256, .rope_base = 1e4f, .norm_eps = 1e-5f, .fused_qkv = true, .fused_up = true,
     .control_text = "<|endoftext|>"},
    {.name = "phi3-tiny", .arch = "phi3", .n_vocab = 512, .n_embd = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 4, .head_dim = 32,
     .n_ff = 384, .n_ctx = 4096, .rope_base = 1e4f, .norm_eps = 1e-5f, .fused_qkv = true, .fused_up = true,
     .control_text = "<|endoftext|>"},
    /* mixtures of experts: tiny ones with more experts than llama.cpp's fixtures (which route to 2 of 2), so
     * top-k selection is checked, and real shapes */
    {.name = "qwen3moe-tiny", .arch = "qwen3moe", .n_vocab = 512, .n_embd = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
     .n_ff = 384, .n_ctx = 4096, .rope_base = 1e6f, .norm_eps = 1e-6f, .qk_norm = true, .n_expert = 8, .n_expert_used = 3, .n_ff_exp = 64},
    {.name = "qwen2moe-tiny", .arch = "qwen2moe", .n_vocab = 512, .n_embd = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
     .n_ff = 384, .n_ctx = 4096, .rope_base = 1e6f, .norm_eps = 1e-6f, .qkv_bias = true, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 64,
     .n_ff_shexp = 96, .shexp_gate = true},
    {.name = "olmoe-tiny", .arch = "olmoe", .n_vocab = 512, .n_embd = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 4, .head_dim = 32,
     .n_ff = 64, .n_ctx = 4096, .rope_base = 1e4f, .norm_eps = 1e-5f, .qk_norm = true, .qk_norm_full = true, .n_expert = 8, .n_expert_used = 2},
    {.name = "mixtral-tiny", .arch = "llama", .n_vocab = 512, .n_embd = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
     .n_ff = 96, .n_ctx = 4096, .rope_base = 1e6f, .norm_eps = 1e-5f, .n_expert = 8, .n_expert_used = 2},
    /* rows of whole 256-blocks, so the K types apply everywhere (brisk quantize --imatrix's fixtures) */
    {.name = "qwen3moe-k-tiny", .arch = "qwen3moe", .n_vocab = 512, .n_embd = 256, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
     .head_dim = 64, .n_ff = 512, .n_ctx = 4096, .rope_base = 1e6f, .norm_eps = 1e-6f, .tied_output = true, .qk_norm = true,
     .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 256},
    {.name = "qwen3moe-micro", .arch = "qwen3moe", .n_vocab = 288, .n_embd = 32, .n_layer = 2, .n_head = 2, .n_head_kv = 1, .head_dim = 16,
     .n_ff = 64, .n_ctx = 256, .rope_base = 1e6f, .norm_eps = 1e-6f, .qk_norm = true, .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32},
    {.name = "qwen2moe-micro", .arch = "qwen2moe", .n_vocab = 288, .n_embd = 32, .n_layer = 2, .n_head = 2, .n_head_kv = 1, .head_dim = 16,
     .n_ff = 64, .n_ctx = 256, .rope_base = 1e6f, .norm_eps = 1e-6f, .qkv_bias = true, .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32,
     .n_ff_shexp = 32, .shexp_gate = true},
    {.name = "olmoe-1b-7b", .arch = "olmoe", .n_vocab = 50304, .n_embd = 2048, .n_layer = 16, .n_head = 16, .n_head_kv = 16, .head_dim = 128,
     .n_ff = 1024, .n_ctx = 4096, .rope_base = 1e4f, .norm_eps = 1e-5f, .qk_norm = true, .qk_norm_full = true, .n_expert = 64,
     .n_expert_used = 8},
    {.name = "qwen3-30b-a3b", .arch = "qwen3moe", .n_vocab = 151936, .n_embd = 2048, .n_layer = 48, .n_head = 32, .n_head_kv = 4,
     .head_dim = 128, .n_ff = 6144, .n_ctx = 40960, .rope_base = 1e6f, .norm_eps = 1e-6f, .qk_norm = true, .n_expert = 128,
     .n_expert_used = 8, .n_ff_exp = 768},
    /* gpt-oss: openai/gpt-oss-20b's config (YaRN 32x over 4096, a 128-token window on every other layer,
     * attention sinks, biases everywhere) and a tiny one of the same layout */
    {.name = "gpt-oss-20b", .arch = "gpt-oss", .n_vocab = 201088, .n_embd = 2880, .n_layer = 24, .n_head = 64, .n_head_kv = 8,
     .head_dim = 64, .n_ff = 2880, .n_ctx = 131072, .rope_base = 150000.0f, .norm_eps = 1e-5f, .qkv_bias = true,
     .rope_scaling = "yarn", .rope_scaling_factor = 32.0f, .rope_orig_ctx = 4096, .yarn_beta_fast = 32.0f, .yarn_beta_slow = 1.0f,
     .swa_window = 128, .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880, .out_bias = true, .attn_sinks = true,
     .ffn_norm_post_attention = true, .expert_biases = true},
    {.name = "gpt-oss-tiny", .arch = "gpt-oss", .n_vocab = 512, .n_embd = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
     .head_dim = 32, .n_ff = 64, .n_ctx = 4096, .rope_base = 150000.0f, .norm_eps = 1e-5f, .qkv_bias = true,
     .rope_scaling = "yarn", .rope_scaling_factor = 32.0f, .rope_orig_ctx = 128, .yarn_beta_fast = 32.0f, .yarn_beta_slow = 1.0f,
     .swa_window = 16, .n_expert = 8, .n_expert_used = 3, .n_ff_exp = 64, .out_bias = true, .attn_sinks = true,
     .ffn_norm_post_attention = true, .expert_biases = true},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, false, false, NULL, 0, 0, false, false, false, 0, 0, 0, NULL, 0, 0, 0, 0, false, false, false, false, false, false, 0, 0},
};

const brisk_synth_shape *brisk_synth_shapes(void) { return shapes; }

const brisk_synth_shape *brisk_synth_find(const char *name) {
    for (const brisk_synth_shape *s = shapes; s->name; s++)
        if (!strcmp(s->name, name)) return s;
    return NULL;
}

/* ---- deterministic Gaussian noise ------------------------------------------------------ */

typedef struct synth_rng {
    uint64_t s;
    int has_spare;
    double spare;
} synth_rng;

static uint64_t rng_u64(synth_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_normal(synth_rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u, v, s;
    do {
        u = (double)(rng_u64(r) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
        v = (double)(rng_u64(r) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double m = sqrt(-2.0 * log(s) / s);
    r->spare = v * m;
    r->has_spare = 1;
    return u * m;
}

/* ---- tensor list --------------------------------------------------------------------------- */

typedef enum { T_MATRIX, T_EMBED, T_NORM, T_BIAS, T_FREQS } tensor_kind;

typedef struct synth_tensor {
    char name[64];
    tensor_kind kind;
    int64_t cols, rows;   /* rows = 1 for vectors */
    int64_t n3;           /* 3-D expert tensors: the expert count (rows per expert: rows); 0 otherwise */
} synth_tensor;

static int list_tensors(const brisk_synth_shape *s, synth_tensor *out) {
    int n = 0;
    const int64_t d = s->n_embd, qd = (int64_t)s->n_head * s->head_dim, kd = (int64_t)s->n_head_kv * s->head_dim;
#define ADD(kind_, c, r, ...) do { if (out) { snprintf(out[n].name, sizeof out[n].name, __VA_ARGS__); out[n].kind = kind_; out[n].cols = c; out[n].rows = r; out[n].n3 = 0; } n++; } while (0)
#define ADD3(c, r, e, ...) do { ADD(T_MATRIX, c, r, __VA_ARGS__); if (out) out[n - 1].n3 = e; } while (0)
    ADD(T_EMBED, d, s->n_vocab, "token_embd.weight");
    ADD(T_NORM, d, 1, "output_norm.weight");
    if (!s->tied_output) ADD(T_MATRIX, d, s->n_vocab, "output.weight");
    if (s->llama3_rope_freqs) ADD(T_FREQS, s->head_dim / 2, 1, "rope_freqs.weight");
    for (int l = 0; l < s->n_layer; l++) {
        ADD(T_NORM, d, 1, "blk.%d.attn_norm.weight", l);
        if (s->fused_qkv) {
            ADD(T_MATRIX, d, qd + 2 * kd, "blk.%d.attn_qkv.weight", l);
        } else {
            ADD(T_MATRIX, d, qd, "blk.%d.attn_q.weight", l);
            ADD(T_MATRIX, d, kd, "blk.%d.attn_k.weight", l);
            ADD(T_MATRIX, d, kd, "blk.%d.attn_v.weight", l);
        }
        if (s->qkv_bias) {
            ADD(T_BIAS, qd, 1, "blk.%d.attn_q.bias", l);
            ADD(T_BIAS, kd, 1, "blk.%d.attn_k.bias", l);
            ADD(T_BIAS, kd, 1, "blk.%d.attn_v.bias", l);
        }
        if (s->qk_norm) {
            ADD(T_NORM, s->qk_norm_full ? qd : s->head_dim, 1, "blk.%d.attn_q_norm.weight", l);
            ADD(T_NORM, s->qk_norm_full ? kd : s->head_dim, 1, "blk.%d.attn_k_norm.weight", l);
        }
        ADD(T_MATRIX, qd, d, "blk.%d.attn_output.weight", l);
        if (s->out_bias) ADD(T_BIAS, d, 1, "blk.%d.attn_output.bias", l);
        if (s->attn_sinks) ADD(T_BIAS, s->n_head, 1, "blk.%d.attn_sinks.weight", l);
        if (s->post_norms) ADD(T_NORM, d, 1, "blk.%d.post_attention_norm.weight", l);
        if (s->ffn_norm_post_attention) ADD(T_NORM, d, 1, "blk.%d.post_attention_norm.weight", l);
        else ADD(T_NORM, d, 1, "blk.%d.ffn_norm.weight", l);
        if (s->n_expert > 0) {
            const int64_t fe = s->n_ff_exp ? s->n_ff_exp : s->n_ff, ne = s->n_expert;
            ADD(T_MATRIX, d, ne, "blk.%d.ffn_gate_inp.weight", l);
            if (s->expert_biases) ADD(T_BIAS, ne, 1, "blk.%d.ffn_gate_inp.bias", l);
            ADD3(d, fe, ne, "blk.%d.ffn_gate_exps.weight", l);
            ADD3(d, fe, ne, "blk.%d.ffn_up_exps.weight", l);
            ADD3(fe, d, ne, "blk.%d.ffn_down_exps.weight", l);
            if (s->expert_biases) {   /* one bias row per expert */
                ADD(T_BIAS, fe, ne, "blk.%d.ffn_gate_exps.bias", l);
                ADD(T_BIAS, fe, ne, "blk.%d.ffn_up_exps.bias", l);
                ADD(T_BIAS, d, ne, "blk.%d.ffn_down_exps.bias", l);
            }
            if (s->n_ff_shexp) {
                if (s->shexp_gate) ADD(T_NORM, d, 1, "blk.%d.ffn_gate_inp_shexp.weight", l);
                ADD(T_MATRIX, d, s->n_ff_shexp, "blk.%d.ffn_gate_shexp.weight", l);
                ADD(T_MATRIX, d, s->n_ff_shexp, "blk.%d.ffn_up_shexp.weight", l);
                ADD(T_MATRIX, s->n_ff_shexp, d, "blk.%d.ffn_down_shexp.weight", l);
            }
            continue;
        }
        if (s->fused_up) {
            ADD(T_MATRIX, d, 2 * (int64_t)s->n_ff, "blk.%d.ffn_up.weight", l);
        } else {
            ADD(T_MATRIX, d, s->n_ff, "blk.%d.ffn_gate.weight", l);
            ADD(T_MATRIX, d, s->n_ff, "blk.%d.ffn_up.weight", l);
        }
        ADD(T_MATRIX, s->n_ff, d, "blk.%d.ffn_down.weight", l);
        if (s->post_norms) ADD(T_NORM, d, 1, "blk.%d.post_ffw_norm.weight", l);
    }
#undef ADD3
#undef ADD
    return n;
}

static uint32_t tensor_type(const synth_tensor *t, uint32_t type) {
    return t->kind == T_MATRIX || t->kind == T_EMBED ? type : BRISK_Q_F32;
}

/* The shape's tensors and the type each is written in: out[i] for ts[i].
 * A mixture is brisk quantize's plan for the shape's F32 file, so the
 * tensors get exactly the types llama-quantize gives them. */
static brisk_status tensor_types(const brisk_synth_shape *s, const synth_tensor *ts, int n, brisk_synth_types types,
                                 uint32_t *out, brisk_error *err) {
    if (types.ftype < 0) {
        for (int i = 0; i < n; i++) out[i] = tensor_type(&ts[i], types.type);
        return BRISK_OK;
    }
    brisk_gguf_tensor *gt = calloc(n ? (size_t)n : 1, sizeof *gt);
    if (!gt) return brisk_fail(err, BRISK_ERR_NOMEM, "synth: out of memory");
    for (int i = 0; i < n; i++) {
        gt[i].name = (brisk_str){.ptr = ts[i].name, .len = strlen(ts[i].name)};
        gt[i].n_dims = ts[i].n3 ? 3 : ts[i].rows > 1 ? 2 : 1;
        gt[i].ne[0] = ts[i].cols;
        gt[i].ne[1] = ts[i].rows;
        gt[i].ne[2] = ts[i].n3 ? ts[i].n3 : 1;
        gt[i].ne[3] = 1;
        gt[i].type = BRISK_Q_F32;
    }
    brisk_quantize_params p;
    brisk_quantize_default_params(&p);
    p.ftype = (brisk_ftype)types.ftype;
    const brisk_quantize_model m = {.arch = s->arch, .n_layer = (uint32_t)s->n_layer, .n_expert = (uint32_t)s->n_expert,
                                    .n_head = (uint32_t)s->n_head, .n_head_kv = (uint32_t)s->n_head_kv};
    brisk_quantize_plan plan;
    brisk_status st = brisk_quantize_plan_tensors(&m, gt, n, &p, &plan, err);
    if (!st)
        for (int i = 0; i < plan.n_items; i++) out[plan.items[i].src - gt] = plan.items[i].type;
    if (st) brisk_error_prefix(err, "synth %s as %s", s->name, brisk_ftype_name(p.ftype));
    brisk_quantize_plan_free(&plan);
    free(gt);
    return st;
}

static int64_t tensor_rows(const synth_tensor *t) { return t->rows * (t->n3 ? t->n3 : 1); }

brisk_status brisk_synth_file_bytes_types(const brisk_synth_shape *s, brisk_synth_types types, uint64_t *bytes, brisk_error *err) {
    const int n = list_tensors(s, NULL);
    synth_tensor *ts = malloc((size_t)n * sizeof *ts);
    uint32_t *tt = malloc((size_t)n * sizeof *tt);
    brisk_status st = BRISK_OK;
    if (!ts || !tt) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "synth: out of memory");
        goto done;
    }
    list_tensors(s, ts);
    if ((st = tensor_types(s, ts, n, types, tt, err))) goto done;
    uint64_t total = 1 << 20;   /* metadata and vocabulary, generously */
    for (int i = 0; i < n; i++) {
        size_t rb;
        if (!brisk_qtype_row_bytes(tt[i], ts[i].cols, &rb)) {
            st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "synth: tensor '%s': a row of %lld is not whole %s blocks", ts[i].name,
                            (long long)ts[i].cols, brisk_qtype_name(tt[i]));
            goto done;
        }
        total += (uint64_t)rb * (uint64_t)tensor_rows(&ts[i]) + 32;
    }
    *bytes = total;
done:
    free(ts);
    free(tt);
    return st;
}

bool brisk_synth_file_bytes(const brisk_synth_shape *s, uint32_t type, uint64_t *bytes) {
    brisk_error err = {0};
    return brisk_synth_file_bytes_types(s, (brisk_synth_types){.type = type, .ftype = -1}, bytes, &err) == BRISK_OK;
}

/* Llama 3.1 frequency divisors (factor 8, low/high frequency factors 1 and 4). */
static void llama3_freqs(const brisk_synth_shape *s, float *out) {
    const int n = s->head_dim / 2;
    const double factor = 8.0, low = 1.0, high = 4.0, orig = 8192.0;
    const double low_wl = orig / low, high_wl = orig / high;
    for (int i = 0; i < n; i++) {
        const double freq = pow(s->rope_base, -2.0 * i / s->head_dim), wl = 2.0 * M_PI / freq;
        if (wl < high_wl) out[i] = 1.0f;
        else if (wl > low_wl) out[i] = (float)factor;
        else {
            const double smooth = (orig / wl - low) / (high - low);
            out[i] = (float)(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
}

static brisk_status write_vocab(brisk_gguf_writer *w, const brisk_synth_shape *s, brisk_error *err) {
    const int32_t n_vocab = s->n_vocab;
    char **tok = calloc((size_t)n_vocab, sizeof *tok);
    float *scores = malloc((size_t)n_vocab * sizeof *scores);
    int32_t *types = malloc((size_t)n_vocab * sizeof *types);
    brisk_status st = BRISK_OK;
    if (!tok || !scores || !types) { st = brisk_fail(err, BRISK_ERR_NOMEM, "synth: out of memory for vocabulary"); goto done; }
    for (int32_t i = 0; i < n_vocab; i++) {
        char buf[32];
        if (i == 0) snprintf(buf, sizeof buf, "<unk>");
        else if (i == 1) snprintf(buf, sizeof buf, "<s>");
        else if (i == 2) snprintf(buf, sizeof buf, "</s>");
        else if (i < 259) snprintf(buf, sizeof buf, "<0x%02X>", i - 3);
        else if (i == 259 && s->control_text) snprintf(buf, sizeof buf, "%s", s->control_text);
        else snprintf(buf, sizeof buf, "\xe2\x96\x81t%d", i);   /* "▁t<id>" */
        tok[i] = strdup(buf);
        if (!tok[i]) { st = brisk_fail(err, BRISK_ERR_NOMEM, "synth: out of memory for vocabulary"); goto done; }
        scores[i] = i < 259 ? 0.0f : -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : i == 259 && s->control_text ? 3 : 1;   /* unknown, control, byte, normal */
    }
    if ((st = brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama")) ||
        (st = brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, tok, (uint64_t)n_vocab)) ||
        (st = brisk_gguf_writer_set_arr(w, "tokenizer.ggml.scores", BRISK_GGUF_FLOAT32, scores, (uint64_t)n_vocab)) ||
        (st = brisk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, types, (uint64_t)n_vocab)) ||
        (st = brisk_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1)) ||
        (st = brisk_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2)) ||
        (st = brisk_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0)))
        brisk_fail(err, st, "synth: cannot store the vocabulary");
done:
    if (tok)
        for (int32_t i = 0; i < n_vocab; i++) free(tok[i]);
    free(tok);
    free(scores);
    free(types);
    return st;
}

brisk_status brisk_synth_vocab_size(const brisk_gguf *v, const char *path, int32_t *n_vocab, brisk_error *err) {
    const brisk_gguf_kv *kv = brisk_gguf_find(v, "tokenizer.ggml.tokens");
    if (!kv) return brisk_fail(err, BRISK_ERR_FORMAT, "synth: %s has no tokenizer.ggml.tokens: not a vocabulary", path);
    if (kv->value.type != BRISK_GGUF_ARRAY || kv->value.v.arr.elem_type != BRISK_GGUF_STRING)
        return brisk_fail(err, BRISK_ERR_FORMAT, "synth: %s: tokenizer.ggml.tokens is not an array of strings", path);
    const uint64_t n = kv->value.v.arr.count;
    if (n == 0 || n > INT32_MAX)
        return brisk_fail(err, BRISK_ERR_FORMAT, "synth: %s: tokenizer.ggml.tokens holds %llu tokens (want 1 to %d)", path,
                          (unsigned long long)n, INT32_MAX);
    for (uint64_t i = 0; i < v->n_kv; i++) {
        const brisk_gguf_kv *e = &v->kv[i];
        const brisk_str k = e->key;
        if (k.len < 10 || memcmp(k.ptr, "tokenizer.", 10)) continue;
        const bool per_token = brisk_str_eq(k, "tokenizer.ggml.scores") || brisk_str_eq(k, "tokenizer.ggml.token_type");
        if (per_token && (e->value.type != BRISK_GGUF_ARRAY || e->value.v.arr.count != n))
            return brisk_fail(err, BRISK_ERR_FORMAT, "synth: %s: %.*s has %llu entries for %llu tokens", path, (int)k.len, k.ptr,
                              e->value.type == BRISK_GGUF_ARRAY ? (unsigned long long)e->value.v.arr.count : 1ull,
                              (unsigned long long)n);
        static const char suffix[] = "_token_id";
        const size_t sl = sizeof suffix - 1;
        if (k.len > sl && !memcmp(k.ptr + k.len - sl, suffix, sl)) {
            const brisk_gguf_value *x = &e->value;
            const bool is_int = x->type <= BRISK_GGUF_INT32 || x->type == BRISK_GGUF_UINT64 || x->type == BRISK_GGUF_INT64;
            const bool in_range = x->type == BRISK_GGUF_INT8 || x->type == BRISK_GGUF_INT16 || x->type == BRISK_GGUF_INT32 ||
                                          x->type == BRISK_GGUF_INT64
                                      ? x->v.i64 >= -1 && x->v.i64 < (int64_t)n   /* -1: none, as llama.cpp writes it */
                                      : x->v.u64 < n;
            if (!is_int || !in_range)
                return brisk_fail(err, BRISK_ERR_FORMAT, "synth: %s: %.*s is not a token id below its %llu tokens", path, (int)k.len,
                                  k.ptr, (unsigned long long)n);
        }
    }
    *n_vocab = (int32_t)n;
    return BRISK_OK;
}

/* Every tokenizer.* key of v, in its order. */
static brisk_status copy_vocab(brisk_gguf_writer *w, const brisk_gguf *v, brisk_error *err) {
    for (uint64_t i = 0; i < v->n_kv; i++) {
        const brisk_str k = v->kv[i].key;
        if (k.len < 10 || memcmp(k.ptr, "tokenizer.", 10)) continue;
        char *key = malloc(k.len + 1);
        if (!key) return brisk_fail(err, BRISK_ERR_NOMEM, "synth: out of memory for the vocabulary");
        memcpy(key, k.ptr, k.len);
        key[k.len] = 0;
        const brisk_status st = brisk_gguf_writer_set_value(w, key, &v->kv[i].value, err);
        if (st) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            brisk_fail(err, st, "synth: cannot store %s: %s", key, why);
        }
        free(key);
        if (st) return st;
    }
    return BRISK_OK;
}

brisk_status brisk_synth_write(const brisk_synth_shape *s, uint32_t type, uint64_t seed, const char *path,
                               void (*progress)(int, int, void *), void *ud, brisk_error *err) {
    return brisk_synth_write_vocab(s, type, seed, NULL, path, progress, ud, err);
}

brisk_status brisk_synth_write_vocab(const brisk_synth_shape *s, uint32_t type, uint64_t seed, const brisk_gguf *vocab,
                                     const char *path, void (*progress)(int, int, void *), void *ud, brisk_error *err) {
    return brisk_synth_write_types(s, (brisk_synth_types){.type = type, .ftype = -1}, seed, vocab, path, progress, ud, err);
}

/* ---- the file, streamed --------------------------------------------------------------------
 * The bytes are those of the GGUF writer (metadata in the order set, the
 * tensor table, data 32-byte aligned), but the data is generated and written
 * a row at a time: gpt-oss-20b's F16 file would be 40 GB, its MXFP4 one 12. */

#define SYNTH_ALIGN 32

static bool out_put(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }
static bool out_u32(FILE *f, uint32_t v) { return out_put(f, &v, 4); }   /* GGUF is little-endian, as every host brisk runs on */
static bool out_u64(FILE *f, uint64_t v) { return out_put(f, &v, 8); }
static bool out_pad(FILE *f, uint64_t n) {
    static const uint8_t zeros[SYNTH_ALIGN];
    return out_put(f, zeros, (size_t)((SYNTH_ALIGN - n % SYNTH_ALIGN) % SYNTH_ALIGN));
}

brisk_status brisk_synth_write_types(const brisk_synth_shape *s, brisk_synth_types types, uint64_t seed, const brisk_gguf *vocab,
                                     const char *path, void (*progress)(int, int, void *), void *ud, brisk_error *err) {
    if (types.ftype < 0) {
        const uint32_t type = types.type;
        if (!brisk_qtype_from_float(type) || !brisk_qtype_get(type) || type == BRISK_Q_Q8_1 || type == BRISK_Q_Q8_K)
            return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "synth: cannot write weights of type %s", brisk_qtype_name(type));
    }
    const int n = list_tensors(s, NULL);
    synth_tensor *ts = malloc((size_t)n * sizeof *ts);
    uint32_t *tt = malloc((size_t)n * sizeof *tt);
    size_t *row_bytes = malloc((size_t)n * sizeof *row_bytes);
    brisk_gguf_writer *w = NULL;
    uint8_t *kvs = NULL;
    float *row = NULL;
    void *qrow = NULL;
    brisk_outfile o = {0};
    brisk_status st;
    if (!ts || !tt || !row_bytes) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "synth: out of memory");
        goto done;
    }
    list_tensors(s, ts);
    if ((st = tensor_types(s, ts, n, types, tt, err))) goto done;
    size_t widest_row = 1;
    int64_t max_cols = 0;
    for (int i = 0; i < n; i++) {
        if (!brisk_qtype_row_bytes(tt[i], ts[i].cols, &row_bytes[i])) {
            st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "synth: tensor '%s' row of %lld is not whole %s blocks", ts[i].name,
                            (long long)ts[i].cols, brisk_qtype_name(tt[i]));
            goto done;
        }
        widest_row = BRISK_MAX(widest_row, row_bytes[i]);
        max_cols = BRISK_MAX(max_cols, ts[i].cols);
    }
    if ((st = brisk_gguf_writer_init(&w, SYNTH_ALIGN, err))) goto done;

    char key[128];
    const char *a = s->arch;
#define SETU(k, v) (snprintf(key, sizeof key, "%s." k, a), brisk_gguf_writer_set_u32(w, key, (uint32_t)(v)))
#define SETF(k, v) (snprintf(key, sizeof key, "%s." k, a), brisk_gguf_writer_set_f32(w, key, (v)))
    char desc[128];
    snprintf(desc, sizeof desc, "brisk synth %s (random weights)", s->name);
    if ((st = brisk_gguf_writer_set_str(w, "general.architecture", a)) || (st = brisk_gguf_writer_set_str(w, "general.name", desc)) ||
        (st = SETU("context_length", s->n_ctx)) || (st = SETU("embedding_length", s->n_embd)) ||
        (st = SETU("block_count", s->n_layer)) || (st = SETU("feed_forward_length", s->n_ff)) ||
        (st = SETU("attention.head_count", s->n_head)) || (st = SETU("attention.head_count_kv", s->n_head_kv)) ||
        (st = SETU("attention.key_length", s->head_dim)) || (st = SETU("attention.value_length", s->head_dim)) ||
        (st = SETU("rope.dimension_count", s->head_dim)) || (st = SETF("rope.freq_base", s->rope_base)) ||
        (st = SETF("attention.layer_norm_rms_epsilon", s->norm_eps)) || (st = SETU("vocab_size", s->n_vocab))) {
        brisk_fail(err, st, "synth: cannot store metadata");
        goto done;
    }
    if (s->rope_scaling) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        if ((st = brisk_gguf_writer_set_str(w, key, s->rope_scaling)) || (st = SETF("rope.scaling.factor", s->rope_scaling_factor)) ||
            (s->rope_orig_ctx && (st = SETU("rope.scaling.original_context_length", s->rope_orig_ctx)))) {
            brisk_fail(err, st, "synth: cannot store metadata");
            goto done;
        }
    }
    if ((s->swa_window && (st = SETU("attention.sliding_window", s->swa_window))) ||
        (s->attn_softcap != 0.0f && (st = SETF("attn_logit_softcapping", s->attn_softcap))) ||
        (s->final_softcap != 0.0f && (st = SETF("final_logit_softcapping", s->final_softcap))) ||
        (s->yarn_beta_fast != 0.0f && (st = SETF("rope.scaling.yarn_beta_fast", s->yarn_beta_fast))) ||
        (s->yarn_beta_slow != 0.0f && (st = SETF("rope.scaling.yarn_beta_slow", s->yarn_beta_slow)))) {
        brisk_fail(err, st, "synth: cannot store metadata");
        goto done;
    }
    if (s->n_expert > 0 &&
        ((st = SETU("expert_count", s->n_expert)) || (st = SETU("expert_used_count", s->n_expert_used)) ||
         (s->n_ff_exp && (st = SETU("expert_feed_forward_length", s->n_ff_exp))) ||
         (s->n_ff_shexp && (st = SETU("expert_shared_feed_forward_length", s->n_ff_shexp))))) {
        brisk_fail(err, st, "synth: cannot store metadata");
        goto done;
    }
#undef SETU
#undef SETF
    if ((st = vocab ? copy_vocab(w, vocab, err) : write_vocab(w, s, err))) goto done;
    if (types.ftype >= 0 &&   /* as llama-quantize ends its metadata */
        ((st = brisk_gguf_writer_set_u32(w, "general.quantization_version", 2)) ||
         (st = brisk_gguf_writer_set_u32(w, "general.file_type", (uint32_t)types.ftype)))) {
        brisk_fail(err, st, "synth: cannot store metadata");
        goto done;
    }
    /* the metadata as the writer encodes it: a file without tensors is the
     * header and the keys, unpadded; the tensor table follows them */
    size_t kv_len = 0;
    if ((st = brisk_gguf_writer_write_mem(w, &kvs, &kv_len, err))) goto done;
    BRISK_ASSERT(kv_len >= 24);
    const uint64_t n_tensors = (uint64_t)n;
    memcpy(kvs + 8, &n_tensors, 8);
    row = malloc((size_t)max_cols * sizeof(float));
    qrow = malloc(widest_row);
    if (!row || !qrow) { st = brisk_fail(err, BRISK_ERR_NOMEM, "synth: out of memory"); goto done; }
    if ((st = brisk_outfile_open(&o, path, 0, 0644, err))) goto done;
    bool ok = out_put(o.f, kvs, kv_len);
    uint64_t offset = 0, pos = kv_len;
    for (int i = 0; i < n && ok; i++) {
        const synth_tensor *t = &ts[i];
        const size_t name_len = strlen(t->name);
        const uint32_t n_dims = t->n3 ? 3 : t->rows > 1 ? 2 : 1;
        const int64_t ne[3] = {t->cols, t->rows, t->n3};
        ok = out_u64(o.f, name_len) && out_put(o.f, t->name, name_len) && out_u32(o.f, n_dims);
        for (uint32_t d = 0; d < n_dims && ok; d++) ok = out_u64(o.f, (uint64_t)ne[d]);
        ok = ok && out_u32(o.f, tt[i]) && out_u64(o.f, offset);
        pos += 8 + name_len + 4 + 8 * n_dims + 4 + 8;
        const uint64_t bytes = (uint64_t)row_bytes[i] * (uint64_t)tensor_rows(t);
        offset += bytes + (SYNTH_ALIGN - bytes % SYNTH_ALIGN) % SYNTH_ALIGN;
    }
    ok = ok && out_pad(o.f, pos);
    synth_rng rng = {.s = seed};
    for (int i = 0; i < n && ok; i++) {
        const synth_tensor *t = &ts[i];
        brisk_from_float_fn quantize = brisk_qtype_from_float(tt[i]);
        const int64_t rows = tensor_rows(t);   /* an expert tensor's experts one after the other */
        const double std = t->kind == T_EMBED ? 0.1 : 1.0 / sqrt((double)t->cols);
        for (int64_t r = 0; r < rows && ok; r++) {
            for (int64_t c = 0; c < t->cols; c++) {
                const double g = rng_normal(&rng);
                row[c] = (float)(t->kind == T_NORM ? 1.0 + 0.1 * g : t->kind == T_BIAS ? 0.1 * g : std * g);
            }
            if (t->kind == T_FREQS) llama3_freqs(s, row);
            quantize(row, qrow, t->cols);
            ok = out_put(o.f, qrow, row_bytes[i]);
        }
        ok = ok && out_pad(o.f, (uint64_t)row_bytes[i] * (uint64_t)rows);
        if (ok && progress) progress(i + 1, n, ud);
    }
    if (!ok) st = brisk_fail(err, BRISK_ERR_IO, "%s: write failed: %s", path, strerror(errno));
done:
    if (st) brisk_outfile_abort(&o);   /* a no-op before the file was opened */
    else st = brisk_outfile_commit(&o, err);
    free(row);
    free(qrow);
    free(kvs);
    free(ts);
    free(tt);
    free(row_bytes);
    brisk_gguf_writer_free(w);
    return st;
}
