/* test_quantize: brisk quantize's output against llama-quantize's, byte for
 * byte, with the peer absent: tests/data/quantize/cases.txt lists the cases
 * (input, file type, llama-quantize options) and cases.sha256 the SHA-256 of
 * llama-quantize's output for each, recorded by tests/data/quantize/record.sh.
 *
 * Inputs: the committed models/pycode-target-f16.gguf (a trained model; its
 * F32 and BF16 forms are cases themselves, so their hashes are llama's too),
 * and five synthetic files this test writes from a seeded integer generator
 * (the same bytes on every machine): a GQA llama (8 layers), a tied-embedding
 * qwen2 with a fused QKV, an 8-expert MoE with 3-D expert tensors in shuffled
 * layer order, an 80-layer llama (llama.cpp's 70B rule) and a falcon. Their
 * rows mix scales, outliers, all-zero, constant, one-signed, tiny and subnormal
 * blocks (where 1/d overflows and ggml's x86 float-to-int conversions
 * decide), so every branch of the quantizers and K-quant scale searches runs.
 * `test_quantize --write-inputs DIR` writes them for record.sh.
 *
 * Also: the --override-kv parser, and bad input refused with a message
 * (NaN weights, a quantized input without --allow-requantize, a missing
 * architecture, a bad --tensor-type regex). */
#include "test.h"

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/quantize.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

/* ---- SHA-256 (FIPS 180-4) --------------------------------------------------------- */

typedef struct sha256 {
    uint32_t h[8];
    uint8_t buf[64];
    size_t n_buf;
    uint64_t total;
} sha256;

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
    0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
    0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
    0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha_block(sha256 *s, const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d; s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

static void sha_init(sha256 *s) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->n_buf = 0;
    s->total = 0;
}

static void sha_update(sha256 *s, const void *data, size_t n) {
    const uint8_t *p = data;
    s->total += n;
    while (n) {
        const size_t k = BRISK_MIN(n, 64 - s->n_buf);
        memcpy(s->buf + s->n_buf, p, k);
        s->n_buf += k;
        p += k;
        n -= k;
        if (s->n_buf == 64) {
            sha_block(s, s->buf);
            s->n_buf = 0;
        }
    }
}

static void sha_hex(sha256 *s, char out[65]) {
    const uint64_t bits = s->total * 8;
    const uint8_t one = 0x80, zero = 0;
    sha_update(s, &one, 1);
    while (s->n_buf != 56) sha_update(s, &zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha_update(s, len, 8);
    for (int i = 0; i < 8; i++) snprintf(out + 8 * i, 9, "%08x", s->h[i]);
}

/* ---- the synthetic inputs ------------------------------------------------------------- */

typedef struct rng { uint64_t s; } rng;
static uint64_t rng_next(rng *r) {   /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Uniform in [-1, 1) on a 2^-23 grid: integer math only, so every machine gets the same floats. */
static float rng_unit(rng *r) { return (float)((int32_t)(rng_next(r) >> 40) - (1 << 23)) * (1.0f / 8388608.0f); }

/* One row: 32-blocks of assorted kinds (plain, outlier, zero, constant, one-signed, tiny). */
static void fill_row(rng *r, float *x, int64_t n) {
    static const float scales[6] = {0.125f, 0.25f, 0.5f, 1.0f, 2.0f, 4.0f};
    const float row_scale = scales[rng_next(r) % 6];
    for (int64_t b = 0; b < n; b += 32) {
        const unsigned kind = (unsigned)(rng_next(r) % 40);
        const int64_t e = BRISK_MIN(n, b + 32);
        for (int64_t i = b; i < e; i++) {
            float v = rng_unit(r) * row_scale;
            if (kind == 0) v = 0.0f;
            else if (kind == 1) v = row_scale * 0.375f;
            else if (kind == 2) v = fabsf(v);
            else if (kind == 3) v = -fabsf(v) * 0.5f;
            else if (kind == 4) v *= 0x1p-70f;                      /* below the K-quants' 1e-15 floor */
            else if (kind == 5) v *= 0x1p-130f;                     /* subnormal: 1/d overflows to inf */
            else if (kind == 6) v = i == b + 7 ? row_scale : v * 0x1p-130f;   /* one normal weight among subnormals */
            else if (rng_next(r) % 97 == 0) v *= 24.0f;
            x[i] = v;
        }
    }
}

typedef struct gen_tensor {
    const char *name;
    uint32_t n_dims;
    int64_t ne[3];
} gen_tensor;

static bool add_tensor(brisk_gguf_writer *w, rng *r, uint32_t type, const char *name, uint32_t n_dims, int64_t ne0,
                       int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    int64_t n = ne0;
    for (uint32_t d = 1; d < n_dims; d++) n *= ne[d];
    float *x = malloc((size_t)n * sizeof *x);
    uint16_t *h = malloc((size_t)n * sizeof *h);
    bool ok = x && h;
    if (ok) {
        for (int64_t row = 0; row < n / ne0; row++) fill_row(r, x + row * ne0, ne0);
        if (strstr(name, "norm")) for (int64_t i = 0; i < n; i++) x[i] = 1.0f + x[i] * 0.0625f;
        brisk_error err = {0};
        if (type == BRISK_Q_F32) {
            ok = brisk_gguf_writer_add_tensor(w, name, type, n_dims, ne, x, (size_t)n * 4, &err) == BRISK_OK;
        } else {
            for (int64_t i = 0; i < n; i++) h[i] = type == BRISK_Q_F16 ? brisk_fp32_to_fp16(x[i]) : brisk_fp32_to_bf16(x[i]);
            ok = brisk_gguf_writer_add_tensor(w, name, type, n_dims, ne, h, (size_t)n * 2, &err) == BRISK_OK;
        }
        if (!ok) fprintf(stderr, "generator: %s\n", err.msg);
    }
    free(x);
    free(h);
    return ok;
}

#define ADD2(name, a, b) ok &= add_tensor(w, &r, wt, name, 2, a, b, 1)
#define ADD3(name, a, b, c) ok &= add_tensor(w, &r, wt, name, 3, a, b, c)
#define ADD1(name, a) ok &= add_tensor(w, &r, BRISK_Q_F32, name, 1, a, 1, 1)

static void set_common(brisk_gguf_writer *w, const char *arch, const char *name, uint32_t n_layer, uint32_t n_embd,
                       uint32_t n_head, uint32_t n_head_kv, uint32_t file_type) {
    char key[96];
    brisk_gguf_writer_set_str(w, "general.architecture", arch);
    brisk_gguf_writer_set_str(w, "general.name", name);
    brisk_gguf_writer_set_u32(w, "general.file_type", file_type);
    snprintf(key, sizeof key, "%s.block_count", arch);
    brisk_gguf_writer_set_u32(w, key, n_layer);
    snprintf(key, sizeof key, "%s.context_length", arch);
    brisk_gguf_writer_set_u32(w, key, 512);
    snprintf(key, sizeof key, "%s.embedding_length", arch);
    brisk_gguf_writer_set_u32(w, key, n_embd);
    snprintf(key, sizeof key, "%s.feed_forward_length", arch);
    brisk_gguf_writer_set_u32(w, key, 512);
    snprintf(key, sizeof key, "%s.attention.head_count", arch);
    brisk_gguf_writer_set_u32(w, key, n_head);
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    brisk_gguf_writer_set_u32(w, key, n_head_kv);
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    brisk_gguf_writer_set_f32(w, key, 1e-5f);
    snprintf(key, sizeof key, "%s.attention.layer_norm_epsilon", arch);
    brisk_gguf_writer_set_f32(w, key, 1e-5f);
    snprintf(key, sizeof key, "%s.vocab_size", arch);
    brisk_gguf_writer_set_u32(w, key, 32);
}

/* The synthetic input called name, as GGUF bytes (malloc'd). */
static bool gen_input(const char *name, uint8_t **out, size_t *len) {
    brisk_gguf_writer *w = NULL;
    brisk_error err = {0};
    if (brisk_gguf_writer_init(&w, 0, &err)) return false;
    rng r = {.s = 0};
    for (const char *c = name; *c; c++) r.s = r.s * 131 + (uint8_t)*c;
    bool ok = true;
    char t[96];
    uint32_t wt;
    if (!strcmp(name, "syn-llama")) {   /* GQA 8:2, 8 layers, untied output, a row of 512, odd-width extras */
        wt = BRISK_Q_F32;
        set_common(w, "llama", name, 8, 256, 8, 2, 0);
        ADD2("token_embd.weight", 256, 32);
        ADD1("output_norm.weight", 256);
        ADD2("output.weight", 256, 32);
        for (int l = 0; l < 8; l++) {
            snprintf(t, sizeof t, "blk.%d.attn_norm.weight", l); ADD1(t, 256);
            snprintf(t, sizeof t, "blk.%d.attn_q.weight", l); ADD2(t, 256, 16);
            snprintf(t, sizeof t, "blk.%d.attn_k.weight", l); ADD2(t, 256, 8);
            snprintf(t, sizeof t, "blk.%d.attn_v.weight", l); ADD2(t, 256, 8);
            snprintf(t, sizeof t, "blk.%d.attn_q.bias", l); ADD1(t, 16);
            snprintf(t, sizeof t, "blk.%d.attn_output.weight", l); ADD2(t, 256, 16);
            snprintf(t, sizeof t, "blk.%d.ffn_norm.weight", l); ADD1(t, 256);
            snprintf(t, sizeof t, "blk.%d.ffn_gate.weight", l); ADD2(t, 256, 16);
            snprintf(t, sizeof t, "blk.%d.ffn_up.weight", l); ADD2(t, 256, 16);
            snprintf(t, sizeof t, "blk.%d.ffn_down.weight", l); ADD2(t, 512, 8);
        }
        ADD2("blk.0.ssm_x.weight", 48, 4);           /* not whole 32-blocks: F16 */
        ADD2("blk.1.attn_kv_a_mqa.weight", 288, 4);  /* not whole 256-blocks: the 32-block fallback */
        ADD2("rope_freqs.weight", 32, 1);            /* 2-D on disk, 1-D to ggml: never quantized */
    } else if (!strcmp(name, "syn-tied")) {   /* no output.weight; fused QKV in some layers; F16 */
        wt = BRISK_Q_F16;
        set_common(w, "qwen2", name, 4, 256, 4, 4, 1);
        ADD2("token_embd.weight", 256, 32);
        ADD1("output_norm.weight", 256);
        for (int l = 0; l < 4; l++) {
            if (l % 2 == 0) {
                snprintf(t, sizeof t, "blk.%d.attn_qkv.weight", l); ADD2(t, 256, 24);
            } else {
                snprintf(t, sizeof t, "blk.%d.attn_q.weight", l); ADD2(t, 256, 8);
                snprintf(t, sizeof t, "blk.%d.attn_k.weight", l); ADD2(t, 256, 8);
                snprintf(t, sizeof t, "blk.%d.attn_v.weight", l); ADD2(t, 256, 8);
            }
            snprintf(t, sizeof t, "blk.%d.attn_output.weight", l); ADD2(t, 256, 8);
            snprintf(t, sizeof t, "blk.%d.ffn_up.weight", l); ADD2(t, 256, 8);
            snprintf(t, sizeof t, "blk.%d.ffn_down.weight", l); ADD2(t, 512, 4);
            snprintf(t, sizeof t, "blk.%d.ffn_norm.weight", l); ADD1(t, 256);
        }
    } else if (!strcmp(name, "syn-moe")) {   /* 8 experts, 3-D tensors, layers written out of order; BF16 */
        wt = BRISK_Q_BF16;
        set_common(w, "llama", name, 4, 256, 4, 2, 32);
        brisk_gguf_writer_set_u32(w, "llama.expert_count", 8);
        brisk_gguf_writer_set_u32(w, "llama.expert_used_count", 2);
        static const int order[4] = {2, 0, 3, 1};
        for (int k = 0; k < 4; k++) {
            const int l = order[k];
            snprintf(t, sizeof t, "blk.%d.attn_q.weight", l); ADD2(t, 256, 8);
            snprintf(t, sizeof t, "blk.%d.attn_k.weight", l); ADD2(t, 256, 4);
            snprintf(t, sizeof t, "blk.%d.attn_v.weight", l); ADD2(t, 256, 4);
            snprintf(t, sizeof t, "blk.%d.attn_output.weight", l); ADD2(t, 256, 8);
            snprintf(t, sizeof t, "blk.%d.ffn_gate_inp.weight", l); ADD2(t, 256, 8);
            snprintf(t, sizeof t, "blk.%d.ffn_gate_exps.weight", l); ADD3(t, 256, 4, 8);
            snprintf(t, sizeof t, "blk.%d.ffn_up_exps.weight", l); ADD3(t, 256, 4, 8);
            snprintf(t, sizeof t, "blk.%d.ffn_down_exps.weight", l); ADD3(t, 256, 4, 8);
            snprintf(t, sizeof t, "blk.%d.ffn_down_shexp.weight", l); ADD2(t, 256, 4);
        }
        ADD2("token_embd.weight", 256, 16);
        ADD2("output.weight", 256, 16);
    } else if (!strcmp(name, "syn-70b")) {   /* 80 layers of llama with GQA: llama.cpp's 70B class */
        wt = BRISK_Q_F16;
        set_common(w, "llama", name, 80, 256, 8, 1, 1);
        ADD2("token_embd.weight", 256, 8);
        ADD2("output.weight", 256, 8);
        for (int l = 0; l < 80; l++) {
            snprintf(t, sizeof t, "blk.%d.attn_v.weight", l); ADD2(t, 256, 1);
            snprintf(t, sizeof t, "blk.%d.attn_output.weight", l); ADD2(t, 256, 1);
            snprintf(t, sizeof t, "blk.%d.ffn_down.weight", l); ADD2(t, 256, 1);
        }
    } else if (!strcmp(name, "syn-falcon")) {   /* falcon's own rules */
        wt = BRISK_Q_F32;
        set_common(w, "falcon", name, 16, 256, 4, 1, 0);
        ADD2("token_embd.weight", 256, 16);
        ADD2("output.weight", 256, 16);
        for (int l = 0; l < 16; l++) {
            snprintf(t, sizeof t, "blk.%d.attn_qkv.weight", l); ADD2(t, 256, 6);
            snprintf(t, sizeof t, "blk.%d.attn_output.weight", l); ADD2(t, 256, 2);
            snprintf(t, sizeof t, "blk.%d.ffn_up.weight", l); ADD2(t, 256, 2);
            snprintf(t, sizeof t, "blk.%d.ffn_down.weight", l); ADD2(t, 256, 2);
        }
    } else if (!strcmp(name, "mini-f16") || !strcmp(name, "mini-moe-bf16")) {   /* fuzz seeds: every role, tiny */
        const bool moe = name[5] == 'm';
        wt = moe ? BRISK_Q_BF16 : BRISK_Q_F16;
        set_common(w, "llama", name, 2, 256, 2, 1, 1);
        if (moe) brisk_gguf_writer_set_u32(w, "llama.expert_count", 2);
        ADD2("token_embd.weight", 256, 2);
        ADD2("output.weight", 256, 1);
        ADD1("output_norm.weight", 256);
        for (int l = 0; l < 2; l++) {
            snprintf(t, sizeof t, "blk.%d.attn_norm.weight", l); ADD1(t, 256);
            snprintf(t, sizeof t, "blk.%d.attn_qkv.weight", l); ADD2(t, 256, 1);
            snprintf(t, sizeof t, "blk.%d.attn_output.weight", l); ADD2(t, 256, 1);
            if (moe) {
                snprintf(t, sizeof t, "blk.%d.ffn_gate_inp.weight", l); ADD2(t, 256, 2);
                snprintf(t, sizeof t, "blk.%d.ffn_up_exps.weight", l); ADD3(t, 256, 1, 2);
                snprintf(t, sizeof t, "blk.%d.ffn_down_exps.weight", l); ADD3(t, 256, 1, 2);
            } else {
                snprintf(t, sizeof t, "blk.%d.ffn_up.weight", l); ADD2(t, 256, 1);
                snprintf(t, sizeof t, "blk.%d.ffn_down.weight", l); ADD2(t, 512, 1);
            }
        }
        ADD2("blk.0.ssm_x.weight", 48, 1);
        ADD2("blk.1.attn_kv_a_mqa.weight", 288, 1);
    } else {
        ok = false;
    }
    ok = ok && brisk_gguf_writer_write_mem(w, out, len, &err) == BRISK_OK;
    brisk_gguf_writer_free(w);
    return ok;
}

static const char *const synthetic[] = {"syn-llama", "syn-tied", "syn-moe", "syn-70b", "syn-falcon"};

static int write_inputs(const char *dir) {
    for (size_t i = 0; i < BRISK_ARRAY_LEN(synthetic); i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.gguf", dir, synthetic[i]);
        FILE *f = NULL;
        if (!gen_input(synthetic[i], &buf, &len) || !(f = fopen(path, "wb")) || fwrite(buf, 1, len, f) != len) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
        fclose(f);
        free(buf);
    }
    return 0;
}

/* ---- the cases ------------------------------------------------------------------------- */

typedef struct mem_sink {
    uint8_t *p;
    size_t len, cap;
} mem_sink;

static brisk_status mem_write(void *ud, const void *data, size_t n, brisk_error *err) {
    mem_sink *m = ud;
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1 << 20;
        while (cap < m->len + n) cap *= 2;
        uint8_t *np = realloc(m->p, cap);
        if (!np) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
        m->p = np;
        m->cap = cap;
    }
    memcpy(m->p + m->len, data, n);
    m->len += n;
    return BRISK_OK;
}

#define MAX_CASES 256
#define MAX_ARGS 16

typedef struct qcase {
    char tag[64], input[64], ftype[16];
    char *args[MAX_ARGS];
    int n_args;
    char sha[65];
    uint8_t *out;        /* kept while a later case reads it */
    size_t out_len;
    bool needed;
} qcase;

/* Options as llama-quantize takes them, into params (the few the cases use). */
static bool case_params(const qcase *c, brisk_quantize_params *p, brisk_quantize_tensor_type *tt, brisk_kv_override *kv) {
    brisk_quantize_default_params(p);
    p->n_threads = 2;
    p->slab_bytes = 1 << 16;   /* small slabs: the slab loop runs many times per tensor */
    if (!brisk_ftype_parse(c->ftype, &p->ftype)) return false;
    p->tensor_types = tt;
    p->kv_overrides = kv;
    for (int i = 0; i < c->n_args; i++) {
        const char *a = c->args[i];
        char *v = i + 1 < c->n_args ? c->args[i + 1] : NULL;
        brisk_error err = {0};
        if (!strcmp(a, "--pure")) p->pure = true;
        else if (!strcmp(a, "--leave-output-tensor")) p->leave_output_tensor = true;
        else if (!strcmp(a, "--allow-requantize")) p->allow_requantize = true;
        else if (!strcmp(a, "--output-tensor-type") && v) { p->output_tensor_type = brisk_quantize_type_parse(v); i++; }
        else if (!strcmp(a, "--token-embedding-type") && v) { p->token_embedding_type = brisk_quantize_type_parse(v); i++; }
        else if (!strcmp(a, "--tensor-type") && v) {
            char *eq = strrchr(v, '=');
            if (!eq) return false;
            *eq = 0;   /* the pattern stays in the case's own copy, lowercased as llama-quantize does */
            for (char *ch = (char *)v; *ch; ch++) *ch = (char)tolower((unsigned char)*ch);
            tt[p->n_tensor_types].pattern = v;
            const int t = brisk_quantize_type_parse(eq + 1);
            if (t < 0) return false;
            tt[p->n_tensor_types++].type = (uint32_t)t;
            i++;
        } else if (!strcmp(a, "--override-kv") && v) {
            if (!brisk_kv_override_parse(v, &kv[p->n_kv_overrides++], &err)) return false;
            i++;
        } else {
            return false;
        }
    }
    return true;
}

static char *read_text(const char *path) {
    uint8_t *buf = NULL;
    size_t len = 0;
    brisk_error err = {0};
    if (brisk_file_read(path, &buf, &len, &err)) return NULL;
    return (char *)buf;
}

/* cases.txt: "TAG INPUT FTYPE [OPTIONS...]" per line ('#' comments); cases.sha256: "SHA TAG". */
static int load_cases(qcase *cs) {
    char path[1024];
    char *text = read_text(test_source("tests/data/quantize/cases.txt", path, sizeof path));
    char *hashes = read_text(test_source("tests/data/quantize/cases.sha256", path, sizeof path));
    CHECKF(text && hashes, "tests/data/quantize/cases.txt or cases.sha256 missing");
    if (!text || !hashes) {
        free(text);
        free(hashes);
        return 0;
    }
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || !line[0]) continue;
        CHECKF(n < MAX_CASES, "too many cases");
        if (n >= MAX_CASES) break;
        qcase *c = &cs[n];
        memset(c, 0, sizeof *c);
        char *s2 = NULL;
        char *tok = strtok_r(line, " \t", &s2);
        int k = 0;
        for (; tok; tok = strtok_r(NULL, " \t", &s2), k++) {
            if (k == 0) snprintf(c->tag, sizeof c->tag, "%s", tok);
            else if (k == 1) snprintf(c->input, sizeof c->input, "%s", tok);
            else if (k == 2) snprintf(c->ftype, sizeof c->ftype, "%s", tok);
            else if (c->n_args < MAX_ARGS) c->args[c->n_args++] = strdup(tok);
        }
        CHECKF(k >= 3, "cases.txt: bad line for '%s'", c->tag);
        n++;
    }
    for (int i = 0; i < n; i++) {
        char needle[96];
        snprintf(needle, sizeof needle, " %.63s\n", cs[i].tag);
        const char *at = strstr(hashes, needle);
        if (at && at - hashes >= 64) {
            memcpy(cs[i].sha, at - 64, 64);
            cs[i].sha[64] = 0;
        }
        CHECKF(cs[i].sha[0], "no recorded hash for case %s", cs[i].tag);
        if (cs[i].input[0] == '@')
            for (int j = 0; j < i; j++)
                if (!strcmp(cs[j].tag, cs[i].input + 1)) cs[j].needed = true;
    }
    free(text);
    free(hashes);
    return n;
}

static void run_cases(void) {
    static qcase cs[MAX_CASES];
    const int n = load_cases(cs);
    char path[1024];
    brisk_gguf *pycode = NULL;
    brisk_error err = {0};
    CHECKF(brisk_gguf_open(test_source("models/pycode-target-f16.gguf", path, sizeof path), &pycode, &err) == BRISK_OK, "%s",
           err.msg);
    uint8_t *syn[BRISK_ARRAY_LEN(synthetic)] = {0};
    size_t syn_len[BRISK_ARRAY_LEN(synthetic)] = {0};
    for (size_t i = 0; i < BRISK_ARRAY_LEN(synthetic); i++)
        CHECKF(gen_input(synthetic[i], &syn[i], &syn_len[i]), "generating %s", synthetic[i]);
    int checked = 0;
    /* BRISK_TEST_QUICK (the sanitizer runs): the synthetic inputs whole, the trained model's 8 MB in a few cases */
    static const char *const quick_py[] = {"py-Q4_K_M", "py-Q2_K", "py-tt", "py-kv"};
    for (int i = 0; i < n; i++) {
        qcase *c = &cs[i];
        if (test_quick() && (!strcmp(c->input, "pycode") || !strncmp(c->input, "@py", 3))) {
            bool keep = false;
            for (size_t k = 0; k < BRISK_ARRAY_LEN(quick_py); k++) keep |= !strcmp(c->tag, quick_py[k]);
            if (!keep) continue;
        }
        const uint8_t *buf = NULL;
        size_t len = 0;
        brisk_gguf *g = NULL, *owned = NULL;
        if (!strcmp(c->input, "pycode")) g = pycode;
        for (size_t k = 0; k < BRISK_ARRAY_LEN(synthetic); k++)
            if (!strcmp(c->input, synthetic[k])) { buf = syn[k]; len = syn_len[k]; }
        if (c->input[0] == '@')
            for (int j = 0; j < i; j++)
                if (!strcmp(cs[j].tag, c->input + 1)) { buf = cs[j].out; len = cs[j].out_len; }
        if (!g && buf) {
            CHECKF(brisk_gguf_parse(buf, len, &owned, &err) == BRISK_OK, "%s: %s", c->tag, err.msg);
            g = owned;
        }
        CHECKF(g != NULL, "case %s: input '%s' unknown or not made", c->tag, c->input);
        brisk_quantize_params p;
        brisk_quantize_tensor_type tt[MAX_ARGS];
        brisk_kv_override kv[MAX_ARGS];
        const bool params_ok = case_params(c, &p, tt, kv);
        CHECKF(params_ok, "case %s: options not understood", c->tag);
        if (g && params_ok) {
            mem_sink m = {0};
            const brisk_quantize_sink sink = {.write = mem_write, .ud = &m};
            const brisk_status st = brisk_quantize_gguf(g, &p, &sink, &err);
            CHECKF(st == BRISK_OK, "case %s: %s", c->tag, err.msg);
            if (st == BRISK_OK) {
                sha256 s;
                char hex[65];
                sha_init(&s);
                sha_update(&s, m.p, m.len);
                sha_hex(&s, hex);
                CHECKF(!strcmp(hex, c->sha), "case %s (%s %s): output differs from llama-quantize's (sha256 %s, recorded %s)",
                       c->tag, c->input, c->ftype, hex, c->sha);
                checked++;
            }
            if (c->needed && st == BRISK_OK) {
                c->out = m.p;
                c->out_len = m.len;
            } else {
                free(m.p);
            }
        }
        brisk_gguf_close(owned);
    }
    test_count("quantize cases against llama-quantize's hashes", checked);
    for (int i = 0; i < n; i++) {
        free(cs[i].out);
        for (int k = 0; k < cs[i].n_args; k++) free(cs[i].args[k]);
    }
    for (size_t i = 0; i < BRISK_ARRAY_LEN(synthetic); i++) free(syn[i]);
    brisk_gguf_close(pycode);
}

/* ---- parsers and refusals ----------------------------------------------------------------- */

static void test_kv_override_parse(void) {
    brisk_kv_override o;
    brisk_error err = {0};
    CHECK(brisk_kv_override_parse("a.b=int:-12", &o, &err) && o.kind == BRISK_KVO_INT && o.i == -12 && !strcmp(o.key, "a.b"));
    CHECK(brisk_kv_override_parse("x=float:1.5", &o, &err) && o.kind == BRISK_KVO_FLOAT && o.f == 1.5);
    CHECK(brisk_kv_override_parse("x=bool:false", &o, &err) && o.kind == BRISK_KVO_BOOL && !o.b);
    CHECK(brisk_kv_override_parse("x=str:a=b:c", &o, &err) && o.kind == BRISK_KVO_STR && !strcmp(o.s, "a=b:c"));
    CHECK(brisk_kv_override_parse("x=str:", &o, &err) && o.kind == BRISK_KVO_STR && !o.s[0]);
    static const char *const bad[] = {"", "=int:1", "x", "x=", "x=int:", "x=int:12a", "x=int:99999999999", "x=float:nan",
                                      "x=float:1e40", "x=bool:yes", "x=list:1", "x=uint:1"};
    for (size_t i = 0; i < BRISK_ARRAY_LEN(bad); i++) {
        err.msg[0] = 0;
        CHECKF(!brisk_kv_override_parse(bad[i], &o, &err) && strstr(err.msg, "--override-kv"), "'%s' accepted", bad[i]);
    }
    char longkey[200];
    memset(longkey, 'k', 150);
    strcpy(longkey + 150, "=int:1");
    CHECK(!brisk_kv_override_parse(longkey, &o, &err));
    char longval[200] = "x=str:";
    memset(longval + 6, 'v', 128);
    longval[134] = 0;
    CHECK(!brisk_kv_override_parse(longval, &o, &err));
}

static void test_names(void) {
    brisk_ftype f;
    CHECK(brisk_ftype_parse("q4_k_m", &f) && f == BRISK_FTYPE_Q4_K_M);
    CHECK(brisk_ftype_parse("Q4_K", &f) && f == BRISK_FTYPE_Q4_K_M);
    CHECK(brisk_ftype_parse("15", &f) && f == BRISK_FTYPE_Q4_K_M);
    CHECK(brisk_ftype_parse("7", &f) && f == BRISK_FTYPE_Q8_0);
    CHECK(brisk_ftype_parse("iq4_xs", &f) && f == BRISK_FTYPE_IQ4_XS && brisk_ftype_parse("25", &f) && f == BRISK_FTYPE_IQ4_NL);
    CHECK(brisk_ftype_parse("MXFP4_MOE", &f) && f == BRISK_FTYPE_MXFP4_MOE && !strcmp(brisk_ftype_name(f), "MXFP4_MOE"));
    CHECK(!brisk_ftype_parse("IQ3_XS", &f) && !brisk_ftype_parse("22", &f) && !brisk_ftype_parse("", &f) &&
          !brisk_ftype_parse("15x", &f) && !brisk_ftype_parse("MXFP4", &f));
    CHECK(brisk_quantize_type_parse("mxfp4") == BRISK_Q_MXFP4 && brisk_quantize_type_parse("iq4_nl") == BRISK_Q_IQ4_NL &&
          brisk_quantize_type_parse("IQ4_XS") == BRISK_Q_IQ4_XS);
    CHECK(brisk_quantize_type_parse("q6_K") == BRISK_Q_Q6_K && brisk_quantize_type_parse("F16") == BRISK_Q_F16);
    CHECK(brisk_quantize_type_parse("q8_1") < 0 && brisk_quantize_type_parse("q8_K") < 0 && brisk_quantize_type_parse("x") < 0);
}

/* Quantize buf with p; the error message (or "" on success). */
static brisk_status try_quantize(const uint8_t *buf, size_t len, const brisk_quantize_params *p, char *msg, size_t n) {
    brisk_gguf *g = NULL;
    brisk_error err = {0};
    brisk_status st = brisk_gguf_parse(buf, len, &g, &err);
    mem_sink m = {0};
    const brisk_quantize_sink sink = {.write = mem_write, .ud = &m};
    if (!st) st = brisk_quantize_gguf(g, p, &sink, &err);
    snprintf(msg, n, "%s", st ? err.msg : "");
    free(m.p);
    brisk_gguf_close(g);
    return st;
}

/* A file of one 256 x 2 tensor called name (F32, or Q8_0 when type is Q8_0). */
static bool named_tensor_file(const char *name, const char *arch, float value, uint32_t type, uint8_t **out, size_t *len) {
    brisk_gguf_writer *w = NULL;
    brisk_error err = {0};
    if (brisk_gguf_writer_init(&w, 0, &err)) return false;
    if (arch) set_common(w, arch, "bad", 1, 256, 1, 1, 0);
    float x[256 * 2];
    for (int i = 0; i < 512; i++) x[i] = (float)(i % 7) * 0.25f;
    x[300] = value;
    const int64_t ne[2] = {256, 2};
    bool ok;
    if (type == BRISK_Q_Q8_0) {
        uint8_t q[2 * 8 * 34];
        brisk_qtype_from_float(BRISK_Q_Q8_0)(x, q, 512);
        ok = !brisk_gguf_writer_add_tensor(w, name, type, 2, ne, q, sizeof q, &err);
    } else {
        ok = !brisk_gguf_writer_add_tensor(w, name, BRISK_Q_F32, 2, ne, x, sizeof x, &err);
    }
    ok = ok && !brisk_gguf_writer_write_mem(w, out, len, &err);
    brisk_gguf_writer_free(w);
    return ok;
}

static bool one_tensor_file(const char *arch, float value, uint32_t type, uint8_t **out, size_t *len) {
    return named_tensor_file("blk.0.attn_q.weight", arch, value, type, out, len);
}

static void test_refusals(void) {
    brisk_quantize_params p;
    brisk_quantize_default_params(&p);
    p.n_threads = 2;
    p.ftype = BRISK_FTYPE_Q4_0;
    char msg[512];
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(one_tensor_file("llama", NAN, BRISK_Q_F32, &buf, &len));
    CHECK(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "blk.0.attn_q.weight") &&
          strstr(msg, "row 1") && strstr(msg, "NaN"));
    free(buf);
    CHECK(one_tensor_file("llama", INFINITY, BRISK_Q_F32, &buf, &len));
    CHECK(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "infinite"));
    free(buf);
    CHECK(one_tensor_file("llama", 3e38f, BRISK_Q_F32, &buf, &len));   /* finite, but its scale overflows fp16 */
    CHECK(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "overflows"));
    free(buf);
    CHECK(one_tensor_file(NULL, 1.0f, BRISK_Q_F32, &buf, &len));
    CHECK(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "general.architecture"));
    free(buf);
    /* a control byte in a tensor's name (fuzz_quantize found one echoed into a message): refused, on one line */
    CHECK(named_tensor_file("blk.0\n.attn_q.weight", "llama", 1.0f, BRISK_Q_F32, &buf, &len));
    CHECKF(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "control byte 0x0a at 5") && !strchr(msg, '\n'), "%s",
           msg);
    free(buf);
    CHECK(one_tensor_file("llama", 1.0f, BRISK_Q_Q8_0, &buf, &len));
    CHECK(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_ERR_INVALID_ARG && strstr(msg, "--allow-requantize"));
    p.allow_requantize = true;
    CHECKF(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_OK, "%s", msg);
    p.allow_requantize = false;
    free(buf);
    CHECK(one_tensor_file("llama", 1.0f, BRISK_Q_F32, &buf, &len));
    const brisk_quantize_tensor_type bad_re = {.pattern = "attn_(q", .type = BRISK_Q_Q8_0};
    p.tensor_types = &bad_re;
    p.n_tensor_types = 1;
    CHECK(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_ERR_INVALID_ARG && strstr(msg, "attn_(q"));
    p.n_tensor_types = 0;
    p.output_tensor_type = 2;   /* Q4_0 is writable; 13 (Q5_K) is; 4 is no type at all */
    CHECKF(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_OK, "%s", msg);
    p.output_tensor_type = 4;
    CHECK(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_ERR_INVALID_ARG && strstr(msg, "--output-tensor-type"));
    p.output_tensor_type = -1;
    p.ftype = (brisk_ftype)22;   /* IQ3_XS: not written */
    CHECK(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_ERR_INVALID_ARG);
    free(buf);
    /* MXFP4: a block whose largest |value| is in [2^-126, 2^-125) gets the scale
     * byte 0xff from ggml's quantizer, which llama-quantize's validation refuses */
    CHECK(one_tensor_file("llama", 1.0f, BRISK_Q_F32, &buf, &len));
    p.ftype = BRISK_FTYPE_Q8_0;
    const brisk_quantize_tensor_type to_mx = {.pattern = "attn_q", .type = BRISK_Q_MXFP4};
    p.tensor_types = &to_mx;
    p.n_tensor_types = 1;
    CHECKF(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_OK, "%s", msg);
    free(buf);
    CHECK(one_tensor_file("llama", 0.0f, BRISK_Q_F32, &buf, &len));
    {   /* the file holds x[i] = (i % 7) / 4; zero the block of element 300 but one value of 1.5 * 2^-126 */
        brisk_gguf *g = NULL;
        brisk_error err = {0};
        CHECK(brisk_gguf_parse(buf, len, &g, &err) == BRISK_OK);
        const brisk_gguf_tensor *t = g ? brisk_gguf_find_tensor(g, "blk.0.attn_q.weight") : NULL;
        CHECK(t != NULL);
        if (t) {
            float tiny = 0x1.8p-126f, zero = 0.0f;
            uint8_t *data = buf + ((const uint8_t *)t->data - buf);
            for (int i = 288; i < 320; i++) memcpy(data + 4 * i, i == 301 ? &tiny : &zero, 4);
        }
        brisk_gguf_close(g);
    }
    CHECK(try_quantize(buf, len, &p, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "MXFP4") && strstr(msg, "row 1"));
    p.n_tensor_types = 0;
    free(buf);
}

/* Seeds for fuzz/fuzz_quantize (a control byte, then a small GGUF): one per
 * input kind the plan tells apart. */
static int write_seeds(const char *dir) {
    static const struct { const char *name; uint8_t ctl; float value; uint32_t type; const char *arch; } seeds[] = {
        {"llama-f32-q4_k_m", 10, 1.0f, BRISK_Q_F32, "llama"},
        {"llama-f32-q2_k-options", 5 | 16, 1.0f, BRISK_Q_F32, "llama"},
        {"llama-f32-nan", 0, NAN, BRISK_Q_F32, "llama"},
        {"llama-f32-huge", 4, 3e38f, BRISK_Q_F32, "llama"},
        {"q8_0-requantize", 13 | 64, 1.0f, BRISK_Q_Q8_0, "llama"},
        {"q8_0-refused", 13, 1.0f, BRISK_Q_Q8_0, "llama"},
        {"no-arch", 2, 1.0f, BRISK_Q_F32, NULL},
        {"falcon-bf16-out", 15 | 32 | 128, 1.0f, BRISK_Q_F32, "falcon"},
    };
    for (size_t i = 0; i < BRISK_ARRAY_LEN(seeds); i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, seeds[i].name);
        FILE *f = NULL;
        if (!one_tensor_file(seeds[i].arch, seeds[i].value, seeds[i].type, &buf, &len) || !(f = fopen(path, "wb")) ||
            fwrite(&seeds[i].ctl, 1, 1, f) != 1 || fwrite(buf, 1, len, f) != len) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
        fclose(f);
        free(buf);
    }
    static const char *const minis[] = {"mini-f16", "mini-moe-bf16"};
    static const uint8_t ctls[] = {10, 1 | 128, 7 | 64};
    for (size_t i = 0; i < BRISK_ARRAY_LEN(minis); i++)
        for (size_t k = 0; k < BRISK_ARRAY_LEN(ctls); k++) {
            uint8_t *buf = NULL;
            size_t len = 0;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s-%u", dir, minis[i], ctls[k]);
            FILE *f = NULL;
            if (!gen_input(minis[i], &buf, &len) || !(f = fopen(path, "wb")) || fwrite(&ctls[k], 1, 1, f) != 1 ||
                fwrite(buf, 1, len, f) != len) {
                fprintf(stderr, "cannot write %s\n", path);
                return 1;
            }
            fclose(f);
            free(buf);
        }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-inputs")) return write_inputs(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--write-seeds")) return write_seeds(argv[2]);
    test_kv_override_parse();
    test_names();
    test_refusals();
    run_cases();
    return test_finish();
}
