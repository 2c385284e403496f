/* gen_model_seeds: writes the tiny models that seed fuzz/fuzz_model.c and
 * drive tests/test_alloc_fail.c: every architecture brisk loads (llama, qwen2
 * with attention biases, qwen3 with Q/K norms) and every weight type, each
 * file under the 64 KiB libFuzzer input limit (scripts/run-fuzz.sh).
 *
 *   gen_model_seeds OUT_DIR
 *
 * Shapes: 2 layers, 32 wide (4 heads of 8, 2 KV heads), FFN 64, a 64-token
 * SentencePiece vocabulary. F32 has 1 layer to stay under the limit. K-quants
 * need rows of 256, so their seeds have an FFN of 256 with ffn_down in the
 * K-quant type and everything else Q8_0: each K-quant kernel still runs. Two
 * more files cover tied output with YaRN scaling and Llama-3 rope_freqs, and
 * one has a padded vocabulary (embedding rows past the token list). Weights
 * are deterministic noise, std 1/sqrt(fan-in). */
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct seed_spec {
    const char *file;
    const char *arch;
    uint32_t type;        /* matrices and embedding */
    uint32_t down_type;   /* ffn_down */
    int n_layer, n_ff;
    int n_vocab_rows;     /* embedding rows; > 64 = padded vocabulary */
    bool tied, yarn, rope_freqs;
} seed_spec;

enum { N_EMBD = 32, N_HEAD = 4, N_HEAD_KV = 2, HEAD_DIM = 8, N_TOKENS = 64 };

static const seed_spec specs[] = {
    {"llama-F32.gguf", "llama", BRISK_Q_F32, BRISK_Q_F32, 1, 64, 64, false, false, false},
    {"llama-F16.gguf", "llama", BRISK_Q_F16, BRISK_Q_F16, 2, 64, 64, false, false, false},
    {"llama-BF16.gguf", "llama", BRISK_Q_BF16, BRISK_Q_BF16, 2, 64, 64, false, false, false},
    {"llama-Q8_0.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q8_0, 2, 64, 64, false, false, false},
    {"llama-Q4_0.gguf", "llama", BRISK_Q_Q4_0, BRISK_Q_Q4_0, 2, 64, 64, false, false, false},
    {"llama-Q4_1.gguf", "llama", BRISK_Q_Q4_1, BRISK_Q_Q4_1, 2, 64, 64, false, false, false},
    {"llama-Q5_0.gguf", "llama", BRISK_Q_Q5_0, BRISK_Q_Q5_0, 2, 64, 64, false, false, false},
    {"llama-Q5_1.gguf", "llama", BRISK_Q_Q5_1, BRISK_Q_Q5_1, 2, 64, 64, false, false, false},
    {"llama-Q2_K.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q2_K, 2, 256, 64, false, false, false},
    {"llama-Q3_K.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q3_K, 2, 256, 64, false, false, false},
    {"llama-Q4_K.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q4_K, 2, 256, 64, false, false, false},
    {"llama-Q5_K.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q5_K, 2, 256, 64, false, false, false},
    {"llama-Q6_K.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q6_K, 2, 256, 64, false, false, false},
    {"qwen2-Q8_0.gguf", "qwen2", BRISK_Q_Q8_0, BRISK_Q_Q8_0, 2, 64, 64, false, false, false},
    {"qwen3-Q4_0.gguf", "qwen3", BRISK_Q_Q4_0, BRISK_Q_Q4_0, 2, 64, 64, false, false, false},
    {"llama-tied-yarn-Q8_0.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q8_0, 2, 64, 64, true, true, false},
    {"llama-rope-freqs-F16.gguf", "llama", BRISK_Q_F16, BRISK_Q_F16, 2, 64, 64, false, false, true},
    {"llama-padded-vocab-Q8_0.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q8_0, 2, 64, 96, false, false, false},
};

static uint64_t rng_state;
static double noise(void) {   /* uniform in [-sqrt3, sqrt3): unit variance, deterministic */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((double)(z >> 11) * 0x1.0p-53 * 2.0 - 1.0) * 1.7320508;
}

static int add(brisk_gguf_writer *w, const char *name, uint32_t type, int64_t cols, int64_t rows, float scale, float offset) {
    float *f = malloc((size_t)(cols * rows) * sizeof *f);
    size_t rb;
    if (!f || !brisk_qtype_row_bytes(type, cols, &rb)) return free(f), 1;
    for (int64_t i = 0; i < cols * rows; i++) f[i] = offset + scale * (float)noise();
    uint8_t *q = malloc(rb * (size_t)rows);
    if (!q) return free(f), 1;
    brisk_from_float_fn conv = brisk_qtype_from_float(type);
    for (int64_t r = 0; r < rows; r++) conv(f + r * cols, q + (size_t)r * rb, cols);
    const int64_t ne[2] = {cols, rows};
    brisk_error err = {0};
    const int bad = brisk_gguf_writer_add_tensor(w, name, type, rows > 1 ? 2 : 1, ne, q, rb * (size_t)rows, &err) != BRISK_OK;
    if (bad) fprintf(stderr, "gen_model_seeds: %s: %s\n", name, err.msg);
    free(f);
    free(q);
    return bad;
}

static int write_seed(const seed_spec *s, const char *dir) {
    brisk_gguf_writer *w = NULL;
    brisk_error err = {0};
    if (brisk_gguf_writer_init(&w, 32, &err)) return 1;
    char key[128];
    const char *a = s->arch;
    int bad = 0;
#define SETU(k, v) (snprintf(key, sizeof key, "%s." k, a), bad |= brisk_gguf_writer_set_u32(w, key, (uint32_t)(v)) != BRISK_OK)
#define SETF(k, v) (snprintf(key, sizeof key, "%s." k, a), bad |= brisk_gguf_writer_set_f32(w, key, (v)) != BRISK_OK)
    bad |= brisk_gguf_writer_set_str(w, "general.architecture", a) != BRISK_OK;
    bad |= brisk_gguf_writer_set_str(w, "general.name", s->file) != BRISK_OK;
    SETU("context_length", 256);
    SETU("embedding_length", N_EMBD);
    SETU("block_count", s->n_layer);
    SETU("feed_forward_length", s->n_ff);
    SETU("attention.head_count", N_HEAD);
    SETU("attention.head_count_kv", N_HEAD_KV);
    SETF("attention.layer_norm_rms_epsilon", 1e-5f);
    SETF("rope.freq_base", 10000.0f);
    if (s->yarn) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        bad |= brisk_gguf_writer_set_str(w, key, "yarn") != BRISK_OK;
        SETF("rope.scaling.factor", 4.0f);
        SETU("rope.scaling.original_context_length", 64);
    }
#undef SETU
#undef SETF
    /* the vocabulary: control tokens, then single letters and "▁"-prefixed pieces */
    const char *tok[N_TOKENS];
    char store[N_TOKENS][16];
    float scores[N_TOKENS];
    int32_t types[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++) {
        if (i == 0) snprintf(store[i], sizeof store[i], "<unk>");
        else if (i == 1) snprintf(store[i], sizeof store[i], "<s>");
        else if (i == 2) snprintf(store[i], sizeof store[i], "</s>");
        else if (i < 3 + 26) snprintf(store[i], sizeof store[i], "%c", 'a' + (i - 3));
        else if (i < 3 + 52) snprintf(store[i], sizeof store[i], "\xe2\x96\x81%c", 'a' + (i - 29));
        else snprintf(store[i], sizeof store[i], "\xe2\x96\x81%c%c", 'a' + (i - 55), 'e');
        tok[i] = store[i];
        scores[i] = i < 3 ? 0.0f : -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : 1;   /* unknown, control, normal */
    }
    bad |= brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") != BRISK_OK;
    bad |= brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, tok, N_TOKENS) != BRISK_OK;
    bad |= brisk_gguf_writer_set_arr(w, "tokenizer.ggml.scores", BRISK_GGUF_FLOAT32, scores, N_TOKENS) != BRISK_OK;
    bad |= brisk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, types, N_TOKENS) != BRISK_OK;
    bad |= brisk_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) != BRISK_OK;
    bad |= brisk_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2) != BRISK_OK;
    bad |= brisk_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0) != BRISK_OK;

    const int64_t d = N_EMBD, qd = N_HEAD * HEAD_DIM, kd = N_HEAD_KV * HEAD_DIM;
    const float ws = 1.0f / sqrtf((float)d), fs = 1.0f / sqrtf((float)s->n_ff);
    bad |= add(w, "token_embd.weight", s->type, d, s->n_vocab_rows, 0.5f, 0.0f);
    bad |= add(w, "output_norm.weight", BRISK_Q_F32, d, 1, 0.1f, 1.0f);
    if (!s->tied) bad |= add(w, "output.weight", s->type, d, s->n_vocab_rows, ws, 0.0f);
    if (s->rope_freqs) bad |= add(w, "rope_freqs.weight", BRISK_Q_F32, HEAD_DIM / 2, 1, 0.5f, 2.0f);
    const bool biases = !strcmp(a, "qwen2"), qk_norm = !strcmp(a, "qwen3");
    for (int l = 0; l < s->n_layer && !bad; l++) {
        char n[64];
#define T(fmt) (snprintf(n, sizeof n, "blk.%d." fmt, l), n)
        bad |= add(w, T("attn_norm.weight"), BRISK_Q_F32, d, 1, 0.1f, 1.0f);
        bad |= add(w, T("attn_q.weight"), s->type, d, qd, ws, 0.0f);
        bad |= add(w, T("attn_k.weight"), s->type, d, kd, ws, 0.0f);
        bad |= add(w, T("attn_v.weight"), s->type, d, kd, ws, 0.0f);
        if (biases) {
            bad |= add(w, T("attn_q.bias"), BRISK_Q_F32, qd, 1, 0.1f, 0.0f);
            bad |= add(w, T("attn_k.bias"), BRISK_Q_F32, kd, 1, 0.1f, 0.0f);
            bad |= add(w, T("attn_v.bias"), BRISK_Q_F32, kd, 1, 0.1f, 0.0f);
        }
        if (qk_norm) {
            bad |= add(w, T("attn_q_norm.weight"), BRISK_Q_F32, HEAD_DIM, 1, 0.1f, 1.0f);
            bad |= add(w, T("attn_k_norm.weight"), BRISK_Q_F32, HEAD_DIM, 1, 0.1f, 1.0f);
        }
        bad |= add(w, T("attn_output.weight"), s->type, qd, d, ws, 0.0f);
        bad |= add(w, T("ffn_norm.weight"), BRISK_Q_F32, d, 1, 0.1f, 1.0f);
        bad |= add(w, T("ffn_gate.weight"), s->type, d, s->n_ff, ws, 0.0f);
        bad |= add(w, T("ffn_up.weight"), s->type, d, s->n_ff, ws, 0.0f);
        bad |= add(w, T("ffn_down.weight"), s->down_type, s->n_ff, d, fs, 0.0f);
#undef T
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, s->file);
    if (!bad && brisk_gguf_writer_write(w, path, &err)) {
        fprintf(stderr, "gen_model_seeds: %s: %s\n", path, err.msg);
        bad = 1;
    }
    brisk_gguf_writer_free(w);
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gen_model_seeds OUT_DIR\n");
        return 2;
    }
    int bad = 0;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        rng_state = 0x5eed0000u + i;
        bad |= write_seed(&specs[i], argv[1]);
    }
    return bad;
}
