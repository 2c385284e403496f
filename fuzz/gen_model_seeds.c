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
 * more files cover tied output with YaRN scaling and Llama-3 rope_freqs, one
 * has a padded vocabulary (embedding rows past the token list), and one
 * stores head_count_kv per layer as an array (a mutation of its element type
 * away from the bug class of typed hyperparameters). Weights
 * are deterministic noise, std 1/sqrt(fan-in).
 *
 *   gen_model_seeds --hostile OUT_DIR
 *
 * writes the model files of the hostile-input corpus (tests/hostile/model.cases,
 * committed in tests/data/hostile/models): a 1-layer Q4_0 llama with one
 * defect each (typed hyperparameters, non-finite RoPE/YaRN values, NaN
 * weights, 1,500-byte tokens, a block_count the tensors cannot back).
 *
 *   gen_model_seeds --vocab N OUT_FILE
 *   gen_model_seeds --rows N OUT_FILE
 *
 * write a vocabulary-only file of N tokens (inspect --all on a Qwen2-sized
 * vocabulary without committing one), and a 1-layer model whose embedding and
 * output have N rows (Qwen2's 151,936: the logits buffer of a huge batch). */
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum mutation {
    M_NONE,
    M_HCKV_U32,                                      /* head_count_kv per layer, arr[u32]: valid */
    M_HCKV_F32, M_HCKV_STR, M_HCKV_NESTED,         /* head_count_kv as arr[f32], arr[str], arr[arr] */
    M_FREQ_BASE_INF, M_ATTN_FACTOR_NAN, M_EPS_NAN,   /* non-finite hyperparameters */
    M_YARN_BETA_NAN, M_YARN_BETA_HUGE, M_YARN_ORIG_ZERO,
    M_NAN_WEIGHTS,                                   /* output_norm holds a NaN: every logit is NaN */
    M_LONG_TOKENS,                                   /* every ordinary piece is 1,500 bytes */
    M_LAYERS_HUGE,                                   /* block_count 1,000,000 with one layer's tensors */
    M_HEADS_HUGE,                                    /* 65,536 heads of 4,096 */
} mutation;

typedef struct seed_spec {
    const char *file;
    const char *arch;
    uint32_t type;        /* matrices and embedding */
    uint32_t down_type;   /* ffn_down */
    int n_layer, n_ff;
    int n_vocab_rows;     /* embedding rows; > 64 = padded vocabulary */
    bool tied, yarn, rope_freqs;
    mutation mut;
} seed_spec;

enum { N_EMBD = 32, N_HEAD = 4, N_HEAD_KV = 2, HEAD_DIM = 8, N_TOKENS = 64 };

static const seed_spec specs[] = {
    {"llama-F32.gguf", "llama", BRISK_Q_F32, BRISK_Q_F32, 1, 64, 64, false, false, false, M_NONE},
    {"llama-F16.gguf", "llama", BRISK_Q_F16, BRISK_Q_F16, 2, 64, 64, false, false, false, M_NONE},
    {"llama-BF16.gguf", "llama", BRISK_Q_BF16, BRISK_Q_BF16, 2, 64, 64, false, false, false, M_NONE},
    {"llama-Q8_0.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q8_0, 2, 64, 64, false, false, false, M_NONE},
    {"llama-Q4_0.gguf", "llama", BRISK_Q_Q4_0, BRISK_Q_Q4_0, 2, 64, 64, false, false, false, M_NONE},
    {"llama-Q4_1.gguf", "llama", BRISK_Q_Q4_1, BRISK_Q_Q4_1, 2, 64, 64, false, false, false, M_NONE},
    {"llama-Q5_0.gguf", "llama", BRISK_Q_Q5_0, BRISK_Q_Q5_0, 2, 64, 64, false, false, false, M_NONE},
    {"llama-Q5_1.gguf", "llama", BRISK_Q_Q5_1, BRISK_Q_Q5_1, 2, 64, 64, false, false, false, M_NONE},
    {"llama-Q2_K.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q2_K, 2, 256, 64, false, false, false, M_NONE},
    {"llama-Q3_K.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q3_K, 2, 256, 64, false, false, false, M_NONE},
    {"llama-Q4_K.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q4_K, 2, 256, 64, false, false, false, M_NONE},
    {"llama-Q5_K.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q5_K, 2, 256, 64, false, false, false, M_NONE},
    {"llama-Q6_K.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q6_K, 2, 256, 64, false, false, false, M_NONE},
    {"qwen2-Q8_0.gguf", "qwen2", BRISK_Q_Q8_0, BRISK_Q_Q8_0, 2, 64, 64, false, false, false, M_NONE},
    {"qwen3-Q4_0.gguf", "qwen3", BRISK_Q_Q4_0, BRISK_Q_Q4_0, 2, 64, 64, false, false, false, M_NONE},
    {"llama-tied-yarn-Q8_0.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q8_0, 2, 64, 64, true, true, false, M_NONE},
    {"llama-rope-freqs-F16.gguf", "llama", BRISK_Q_F16, BRISK_Q_F16, 2, 64, 64, false, false, true, M_NONE},
    {"llama-padded-vocab-Q8_0.gguf", "llama", BRISK_Q_Q8_0, BRISK_Q_Q8_0, 2, 64, 96, false, false, false, M_NONE},
    {"llama-kv-heads-per-layer-Q4_0.gguf", "llama", BRISK_Q_Q4_0, BRISK_Q_Q4_0, 2, 64, 64, false, false, false, M_HCKV_U32},
};

#define HOSTILE(file, mut, yarn) {file, "llama", BRISK_Q_Q4_0, BRISK_Q_Q4_0, 1, 64, 64, false, yarn, false, mut}
static const seed_spec hostile[] = {
    HOSTILE("head-count-kv-arr-f32.gguf", M_HCKV_F32, false),
    HOSTILE("head-count-kv-arr-str.gguf", M_HCKV_STR, false),
    HOSTILE("head-count-kv-arr-arr.gguf", M_HCKV_NESTED, false),
    HOSTILE("rope-freq-base-inf.gguf", M_FREQ_BASE_INF, false),
    HOSTILE("rope-attn-factor-nan.gguf", M_ATTN_FACTOR_NAN, false),
    HOSTILE("rms-eps-nan.gguf", M_EPS_NAN, false),
    HOSTILE("yarn-beta-fast-nan.gguf", M_YARN_BETA_NAN, true),
    HOSTILE("yarn-beta-slow-huge.gguf", M_YARN_BETA_HUGE, true),
    HOSTILE("yarn-orig-ctx-zero.gguf", M_YARN_ORIG_ZERO, true),
    HOSTILE("nan-weights.gguf", M_NAN_WEIGHTS, false),
    HOSTILE("long-tokens.gguf", M_LONG_TOKENS, false),
    HOSTILE("block-count-huge.gguf", M_LAYERS_HUGE, false),
    HOSTILE("head-count-huge.gguf", M_HEADS_HUGE, false),
};
#undef HOSTILE

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
    if (s->mut == M_LAYERS_HUGE) SETU("block_count", 1000000);
    if (s->mut == M_HEADS_HUGE) {
        SETU("attention.head_count", 65536);
        SETU("attention.key_length", 4096);
        SETU("attention.value_length", 4096);
    } else {
        SETU("attention.head_count", N_HEAD);
    }
    snprintf(key, sizeof key, "%s.attention.head_count_kv", a);
    if (s->mut == M_HCKV_U32) {
        const uint32_t v[2] = {N_HEAD_KV, N_HEAD_KV};
        bad |= brisk_gguf_writer_set_arr(w, key, BRISK_GGUF_UINT32, v, 2) != BRISK_OK;
    } else if (s->mut == M_HCKV_F32) {
        const float v[1] = {2.0f};
        bad |= brisk_gguf_writer_set_arr(w, key, BRISK_GGUF_FLOAT32, v, 1) != BRISK_OK;
    } else if (s->mut == M_HCKV_STR) {
        const char *v[1] = {"2"};
        bad |= brisk_gguf_writer_set_arr(w, key, BRISK_GGUF_STRING, v, 1) != BRISK_OK;
    } else if (s->mut == M_HCKV_NESTED) {
        static const uint8_t inner[4] = {2, 0, 0, 0};   /* one u32 in GGUF (little-endian) encoding */
        brisk_gguf_value e = {.type = BRISK_GGUF_ARRAY};
        e.v.arr.elem_type = BRISK_GGUF_UINT32;
        e.v.arr.count = 1;
        e.v.arr.data = inner;
        e.v.arr.nbytes = sizeof inner;
        bad |= brisk_gguf_writer_set_arr_nested(w, key, &e, 1, &err) != BRISK_OK;
    } else {
        SETU("attention.head_count_kv", N_HEAD_KV);
    }
    SETF("attention.layer_norm_rms_epsilon", s->mut == M_EPS_NAN ? NAN : 1e-5f);
    SETF("rope.freq_base", s->mut == M_FREQ_BASE_INF ? INFINITY : 10000.0f);
    if (s->mut == M_ATTN_FACTOR_NAN) SETF("rope.scaling.attn_factor", NAN);
    if (s->yarn) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        bad |= brisk_gguf_writer_set_str(w, key, "yarn") != BRISK_OK;
        SETF("rope.scaling.factor", 4.0f);
        SETU("rope.scaling.original_context_length", s->mut == M_YARN_ORIG_ZERO ? 0 : 64);
        if (s->mut == M_YARN_BETA_NAN) SETF("rope.scaling.yarn_beta_fast", NAN);
        if (s->mut == M_YARN_BETA_HUGE) SETF("rope.scaling.yarn_beta_slow", 1e30f);
    }
#undef SETU
#undef SETF
    /* the vocabulary: control tokens, then single letters and "▁"-prefixed pieces */
    const char *tok[N_TOKENS];
    static char store[N_TOKENS][1600];
    float scores[N_TOKENS];
    int32_t types[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++) {
        if (i == 0) snprintf(store[i], sizeof store[i], "<unk>");
        else if (i == 1) snprintf(store[i], sizeof store[i], "<s>");
        else if (i == 2) snprintf(store[i], sizeof store[i], "</s>");
        else if (i < 3 + 26) snprintf(store[i], sizeof store[i], "%c", 'a' + (i - 3));
        else if (i < 3 + 52) snprintf(store[i], sizeof store[i], "\xe2\x96\x81%c", 'a' + (i - 29));
        else snprintf(store[i], sizeof store[i], "\xe2\x96\x81%c%c", 'a' + (i - 55), 'e');
        if (s->mut == M_LONG_TOKENS && i >= 3) {   /* 1,500 bytes: the letter, then '=' padding */
            memset(store[i] + 1, '=', 1499);
            store[i][0] = (char)('a' + i % 26);
            store[i][1500] = 0;
        }
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
    bad |= add(w, "output_norm.weight", BRISK_Q_F32, d, 1, 0.1f, s->mut == M_NAN_WEIGHTS ? NAN : 1.0f);
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

/* A vocabulary-only file (llama SPM, no tensors) of n tokens. */
static int write_vocab_file(long n, const char *path) {
    brisk_gguf_writer *w = NULL;
    brisk_error err = {0};
    char **tok = calloc((size_t)n, sizeof *tok);
    float *scores = malloc((size_t)n * sizeof *scores);
    int32_t *types = malloc((size_t)n * sizeof *types);
    int bad = !tok || !scores || !types || brisk_gguf_writer_init(&w, 32, &err) != BRISK_OK;
    for (long i = 0; i < n && !bad; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "\xe2\x96\x81t%ld", i);
        bad |= !(tok[i] = strdup(buf));
        scores[i] = -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : 1;
    }
    if (!bad) {
        bad |= brisk_gguf_writer_set_str(w, "general.architecture", "llama") != BRISK_OK;
        bad |= brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") != BRISK_OK;
        bad |= brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, tok, (uint64_t)n) != BRISK_OK;
        bad |= brisk_gguf_writer_set_arr(w, "tokenizer.ggml.scores", BRISK_GGUF_FLOAT32, scores, (uint64_t)n) != BRISK_OK;
        bad |= brisk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, types, (uint64_t)n) != BRISK_OK;
        bad |= brisk_gguf_writer_write(w, path, &err) != BRISK_OK;
    }
    if (bad) fprintf(stderr, "gen_model_seeds: %s: cannot write a %ld-token vocabulary %s\n", path, n, err.msg);
    if (tok)
        for (long i = 0; i < n; i++) free(tok[i]);
    free(tok);
    free(scores);
    free(types);
    brisk_gguf_writer_free(w);
    return bad;
}

int main(int argc, char **argv) {
    const seed_spec *list = specs;
    size_t n = sizeof specs / sizeof specs[0];
    const char *dir = argv[argc - 1];
    if (argc == 4 && !strcmp(argv[1], "--vocab")) {
        char *end;
        const long v = strtol(argv[2], &end, 10);
        if (*end || v < 3 || v > (1 << 24)) {
            fprintf(stderr, "gen_model_seeds: --vocab: '%s' is not a count in [3, 16777216]\n", argv[2]);
            return 2;
        }
        return write_vocab_file(v, argv[3]);
    }
    if (argc == 4 && !strcmp(argv[1], "--rows")) {   /* a 1-layer Q4_0 llama whose 64 tokens are padded to N rows */
        char *end;
        const long v = strtol(argv[2], &end, 10);
        if (*end || v < 64 || v > (1 << 24)) {
            fprintf(stderr, "gen_model_seeds: --rows: '%s' is not a count in [64, 16777216]\n", argv[2]);
            return 2;
        }
        const char *slash = strrchr(argv[3], '/');
        char d[1024];
        snprintf(d, sizeof d, "%.*s", slash ? (int)(slash - argv[3]) : 1, slash ? argv[3] : ".");
        seed_spec sp = {slash ? slash + 1 : argv[3], "llama", BRISK_Q_Q4_0, BRISK_Q_Q4_0, 1, 64, (int)v, false, false, false, M_NONE};
        return write_seed(&sp, d);
    }
    if (argc == 3 && !strcmp(argv[1], "--hostile")) {
        list = hostile;
        n = sizeof hostile / sizeof hostile[0];
    } else if (argc != 2) {
        fprintf(stderr, "usage: gen_model_seeds [--hostile] OUT_DIR | gen_model_seeds --vocab|--rows N OUT_FILE\n");
        return 2;
    }
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        rng_state = 0x5eed0000u + i;
        bad |= write_seed(&list[i], dir);
    }
    return bad;
}
