/* test_state: byte-exact save/restore of a sequence's KV (brisk_seq_save /
 * brisk_seq_load / brisk_seq_state_get / brisk_seq_state_set).
 *
 * - lossless: a state saved mid-generation and loaded into another context,
 *   and into another sequence id of the same context, continues with bitwise
 *   the logits and the tokens of the uninterrupted run: greedy, seeded
 *   sampling with penalties, DRY and XTC (the sampler's state restored into a
 *   sampler seeded differently), and mirostat v2;
 * - canonical: save -> load -> save gives the same bytes, and the file is the
 *   memory form byte for byte;
 * - every refusal (another model, a changed metadata value, a changed tensor
 *   byte, another KV shape, truncation at every length, corrupted bytes, a
 *   token id out of range, positions out of order, more tokens than
 *   n_ctx_seq, a full pool, a sampler that differs) has its status and leaves
 *   every sequence, the cache statistics and the sampler as they were, and
 *   decoding afterwards gives the logits it gave before;
 * - the committed fuzz seeds (fuzz/corpus/fuzz_kvstate) still load
 *   (BRISK_REGEN_KVSTATE_SEEDS=1 rewrites them).
 * Models: tests/data/golden/qwen2-tiny-Q4_0.gguf and models/pycode-target-f16.gguf
 * (skipped with a message when absent), fuzz/corpus/fuzz_model/llama-Q4_0.gguf. */
#include "test.h"
#include "brisk.h"
#include "engine/engine_impl.h"
#include "engine/state.h"
#include "gguf/gguf.h"
#include "sample/sample.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#define N_PROMPT 45
#define N_SAVE 7     /* generated tokens before the save */
#define N_GEN 20     /* generated tokens in all */

static char tmpdir[256];

/* brisk_kv_check over the context's pool */
static bool brisk_kv_check_ctx_ok(const brisk_context *c, brisk_error *err) { return brisk_kv_check(c->kv, err); }

static void never_applied(void *ctx, brisk_token_array *cur) {
    (void)ctx;
    (void)cur;
}

static brisk_context *make_ctx(const brisk_model *m, int32_t n_ctx, int32_t kv_tokens, int32_t n_seq) {
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = n_ctx;
    cp.kv_tokens = kv_tokens;
    cp.n_seq = n_seq;
    cp.n_batch = 16;   /* the prompt is chunked: batch invariance is part of what is checked */
    cp.n_threads = 2;
    brisk_context *c = NULL;
    brisk_error err = {0};
    brisk_status st = brisk_context_init(m, &cp, &c, &err);
    CHECKF(st == BRISK_OK, "context: %s", err.msg);
    return c;
}

typedef enum { MODE_GREEDY, MODE_SAMPLED, MODE_MIROSTAT, MODE_COUNT } mode;
static const char *mode_names[] = {"greedy", "sampled (penalties, DRY, XTC)", "mirostat v2"};

static brisk_sampler *make_sampler(mode md, int32_t n_vocab, uint64_t seed) {
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.seed = seed;
    if (md == MODE_GREEDY) sp.temp = 0.0f;
    if (md == MODE_SAMPLED) {
        sp.temp = 1.2f;
        sp.top_k = 0;
        sp.top_p = 1.0f;
        sp.min_p = 0.0f;
        sp.repeat_penalty = 1.3f;
        sp.repeat_last_n = 16;
        sp.freq_penalty = 0.2f;
        sp.presence_penalty = 0.1f;
        sp.dry_multiplier = 0.8f;
        sp.dry_allowed_length = 1;
        sp.dry_penalty_last_n = 32;
        sp.xtc_probability = 0.5f;
        sp.xtc_threshold = 0.1f;
    }
    if (md == MODE_MIROSTAT) {
        sp.temp = 1.0f;
        sp.mirostat = 2;
        sp.mirostat_tau = 3.0f;
    }
    brisk_sampler *s = NULL;
    brisk_error err = {0};
    CHECKF(brisk_sampler_init(&s, &sp, n_vocab, &err) == BRISK_OK, "sampler: %s", err.msg);
    return s;
}

/* The uninterrupted run, recorded: the tokens and every step's logits, and
 * the state (KV + sampler) taken before step N_SAVE. */
typedef struct run {
    int32_t n_vocab;
    int32_t prompt[N_PROMPT];
    int32_t tok[N_GEN];
    float *logits;        /* [N_GEN][n_vocab]: the logits step i sampled from */
    uint8_t *state;       /* with the sampler */
    size_t n_state;
    uint8_t *kv_only;     /* without a sampler */
    size_t n_kv_only;
} run;

static void run_free(run *r) {
    free(r->logits);
    free(r->state);
    free(r->kv_only);
}

static int32_t decode_one(brisk_context *c, int32_t seq, int32_t tok) {
    const int32_t pos = brisk_seq_len(c, seq);
    uint8_t one = 1;
    brisk_batch b = {.n_tokens = 1, .token = &tok, .pos = &pos, .seq = &seq, .logits = &one};
    brisk_error err = {0};
    brisk_status st = brisk_decode(c, &b, &err);
    CHECKF(st == BRISK_OK, "decode: %s", err.msg);
    return st;
}

static void record_run(const brisk_model *m, mode md, run *r) {
    brisk_model_info info;
    brisk_model_get_info(m, &info);
    r->n_vocab = info.n_vocab;
    r->logits = malloc((size_t)N_GEN * (size_t)info.n_vocab * sizeof(float));
    for (int i = 0; i < N_PROMPT; i++) r->prompt[i] = 3 + (i * 7 + i / 5) % (info.n_vocab_tokens - 3);
    brisk_context *c = make_ctx(m, 256, 0, 2);
    brisk_sampler *s = make_sampler(md, info.n_vocab, 1234);
    brisk_error err = {0};
    CHECKF(brisk_seq_sync(c, 0, r->prompt, N_PROMPT, NULL, &err) == BRISK_OK, "prefill: %s", err.msg);
    for (int i = 0; i < N_PROMPT; i++) brisk_sampler_accept(s, r->prompt[i]);
    for (int i = 0; i < N_GEN; i++) {
        if (i == N_SAVE) {
            CHECKF(brisk_seq_state_get_alloc(c, 0, s, &r->state, &r->n_state, &err) == BRISK_OK, "save: %s", err.msg);
            CHECKF(brisk_seq_state_get_alloc(c, 0, NULL, &r->kv_only, &r->n_kv_only, &err) == BRISK_OK, "save: %s", err.msg);
        }
        const float *l = brisk_get_logits(c, 0);
        memcpy(r->logits + (size_t)i * (size_t)r->n_vocab, l, (size_t)r->n_vocab * sizeof(float));
        r->tok[i] = brisk_sampler_sample(s, l);
        brisk_sampler_accept(s, r->tok[i]);
        decode_one(c, 0, r->tok[i]);
    }
    brisk_sampler_free(s);
    brisk_context_free(c);
}

/* Sequence seq of c holds the state of step N_SAVE: recompute its last token
 * and go on; every logit and token must be the recorded one, bit for bit. */
static bool continue_matches(brisk_context *c, int32_t seq, brisk_sampler *s, const run *r, int32_t from) {
    int32_t toks[N_PROMPT + N_GEN], n = 0;
    brisk_error err = {0};
    CHECKF(brisk_seq_tokens(c, seq, toks, N_PROMPT + N_GEN, &n, &err) == BRISK_OK, "tokens: %s", err.msg);
    CHECKF(n == N_PROMPT + from, "sequence %d holds %d tokens, expected %d", seq, n, N_PROMPT + from);
    if (n != N_PROMPT + from) return false;
    bool same = !memcmp(toks, r->prompt, sizeof r->prompt) && !memcmp(toks + N_PROMPT, r->tok, (size_t)from * sizeof(int32_t));
    CHECKF(same, "sequence %d: the loaded token ids differ from the saved ones", seq);
    int32_t reused = -1;
    CHECKF(brisk_seq_sync(c, seq, toks, n, &reused, &err) == BRISK_OK, "sync: %s", err.msg);
    CHECKF(reused == n - 1, "sync reused %d of %d (the loaded sequence should serve all but the last)", reused, n);
    for (int i = from; i < N_GEN && same; i++) {
        const float *l = brisk_get_logits(c, 0);
        if (memcmp(l, r->logits + (size_t)i * (size_t)r->n_vocab, (size_t)r->n_vocab * sizeof(float))) {
            CHECKF(0, "sequence %d: step %d: logits differ from the uninterrupted run", seq, i);
            return false;
        }
        if (s) {
            const int32_t t = brisk_sampler_sample(s, l);
            CHECKF(t == r->tok[i], "sequence %d: step %d: sampled %d, the uninterrupted run %d", seq, i, t, r->tok[i]);
            if (t != r->tok[i]) return false;
            brisk_sampler_accept(s, t);
        }
        if (decode_one(c, seq, r->tok[i])) return false;
    }
    return same;
}

/* ---- snapshots: what a refused load must leave alone ------------------------------------------------ */

#define MAX_SEQ 4
typedef struct snapshot {
    int32_t n_seq, len[MAX_SEQ], tokens[MAX_SEQ][512];
    brisk_cache_stats stats;
    uint8_t *smp;
    size_t n_smp;
} snapshot;

static void snap(const brisk_context *c, const brisk_sampler *s, snapshot *o) {
    memset(o, 0, sizeof *o);
    o->n_seq = brisk_context_n_seq(c);
    for (int32_t q = 0; q < o->n_seq && q < MAX_SEQ; q++) brisk_seq_tokens(c, q, o->tokens[q], 512, &o->len[q], NULL);
    brisk_context_cache_stats(c, &o->stats);
    if (s && brisk_sampler_state_size(s, &o->n_smp, NULL) == BRISK_OK) {
        o->smp = malloc(o->n_smp);
        brisk_sampler_state_write(s, o->smp);
    }
}

static bool snap_equal(const snapshot *a, const snapshot *b) {
    if (a->n_seq != b->n_seq || memcmp(&a->stats, &b->stats, sizeof a->stats) || a->n_smp != b->n_smp) return false;
    if (a->n_smp && memcmp(a->smp, b->smp, a->n_smp)) return false;
    for (int32_t q = 0; q < a->n_seq && q < MAX_SEQ; q++)
        if (a->len[q] != b->len[q] || memcmp(a->tokens[q], b->tokens[q], (size_t)a->len[q] * sizeof(int32_t))) return false;
    return true;
}

/* A refused load: the status, a message, and nothing changed. */
static void expect_refused(brisk_context *c, int32_t seq, brisk_sampler *s, const uint8_t *buf, size_t len, brisk_status want,
                           const char *needle, const char *what) {
    snapshot before, after;
    snap(c, s, &before);
    brisk_error err = {0};
    const brisk_status st = brisk_seq_state_set(c, seq, s, buf, len, &err);
    snap(c, s, &after);
    CHECKF(st == want, "%s: status %d (%s), expected %d", what, st, err.msg, want);
    CHECKF(st == BRISK_OK || (err.msg[0] && !strchr(err.msg, '\n')), "%s: no one-line message", what);
    CHECKF(!needle || strstr(err.msg, needle), "%s: message '%s' does not name '%s'", what, err.msg, needle);
    CHECKF(snap_equal(&before, &after), "%s: the refused load changed the context or the sampler", what);
    free(before.smp);
    free(after.smp);
}

static uint8_t *copy_of(const uint8_t *p, size_t n) {
    uint8_t *q = malloc(n);
    memcpy(q, p, n);
    return q;
}

static void reseal(uint8_t *p, size_t n) {
    const uint64_t sum = brisk_state_checksum(p, n);
    memcpy(p + n - 8, &sum, 8);
}

static void put32_at(uint8_t *p, size_t off, uint32_t v) { memcpy(p + off, &v, 4); }

static bool write_file(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    const bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)sz + 1);
    *n = fread(p, 1, (size_t)sz, f);
    fclose(f);
    return p;
}

/* A copy of the model file with one metadata string's first byte or one tensor byte changed. */
static bool write_modified_model(const char *src, const char *dst, bool tensor_byte) {
    size_t n = 0;
    uint8_t *buf = read_file(src, &n);
    if (!buf) return false;
    brisk_gguf *g = NULL;
    brisk_error err = {0};
    bool ok = brisk_gguf_parse(buf, n, &g, &err) == BRISK_OK;
    if (ok && tensor_byte) {
        const brisk_gguf_tensor *t = brisk_gguf_find_tensor(g, "token_embd.weight");
        ok = t && t->nbytes > 40;
        if (ok) buf[(const uint8_t *)t->data - buf + 37] ^= 0x11;
    } else if (ok) {
        const brisk_gguf_kv *kv = brisk_gguf_find(g, "general.name");
        ok = kv && kv->value.type == BRISK_GGUF_STRING && kv->value.v.str.len > 0;
        if (ok) buf[(const uint8_t *)kv->value.v.str.ptr - buf] ^= 0x20;
    }
    brisk_gguf_close(g);
    ok = ok && write_file(dst, buf, n);
    free(buf);
    return ok;
}

/* ---- the checks ------------------------------------------------------------------------------------ */

static void check_lossless(const brisk_model *m, const char *label) {
    for (int md = 0; md < MODE_COUNT; md++) {
        run r = {0};
        record_run(m, (mode)md, &r);
        if (!r.state) {
            run_free(&r);
            continue;
        }
        brisk_error err = {0};
        /* into another context */
        brisk_context *c2 = make_ctx(m, 256, 0, 3);
        brisk_sampler *s2 = make_sampler((mode)md, r.n_vocab, 999);   /* another seed: the state brings the saved one */
        CHECKF(brisk_seq_state_set(c2, 0, s2, r.state, r.n_state, &err) == BRISK_OK, "%s %s: load: %s", label, mode_names[md], err.msg);
        CHECKF(brisk_sampler_seed(s2) == 1234, "%s: the sampler's seed was not restored", label);
        /* save -> load -> save: the same bytes, sampler included */
        uint8_t *again = NULL;
        size_t n_again = 0;
        CHECK(brisk_seq_state_get_alloc(c2, 0, s2, &again, &n_again, &err) == BRISK_OK);
        CHECKF(n_again == r.n_state && again && !memcmp(again, r.state, r.n_state), "%s %s: save after load differs", label, mode_names[md]);
        free(again);
        CHECKF(continue_matches(c2, 0, s2, &r, N_SAVE), "%s %s: continuation in another context", label, mode_names[md]);
        /* into another sequence id of the same context (seq 0 now holds a longer sequence sharing the prefix) */
        brisk_sampler *s3 = make_sampler((mode)md, r.n_vocab, 5);
        CHECKF(brisk_seq_state_set(c2, 2, s3, r.state, r.n_state, &err) == BRISK_OK, "%s: load into seq 2: %s", label, err.msg);
        CHECKF(continue_matches(c2, 2, s3, &r, N_SAVE), "%s %s: continuation in sequence 2", label, mode_names[md]);
        printf("lossless %s, %s: %d tokens continued bitwise in another context and in sequence 2 (state %zu bytes)\n", label,
               mode_names[md], N_GEN - N_SAVE, r.n_state);
        brisk_error kerr = {0};
        CHECKF(brisk_kv_check_ctx_ok(c2, &kerr), "%s: pool invariants: %s", label, kerr.msg);
        brisk_sampler_free(s3);
        /* KV only, greedy: the file form; the file is the memory form byte for byte */
        if (md == MODE_GREEDY) {
            char p1[400], p2[400];
            snprintf(p1, sizeof p1, "%s/a.kvs", tmpdir);
            snprintf(p2, sizeof p2, "%s/b.kvs", tmpdir);
            brisk_context *c3 = make_ctx(m, 256, 0, 2);
            CHECKF(brisk_seq_state_set(c3, 1, NULL, r.kv_only, r.n_kv_only, &err) == BRISK_OK, "load: %s", err.msg);
            CHECKF(brisk_seq_save(c3, 1, NULL, p1, &err) == BRISK_OK, "save: %s", err.msg);
            size_t n1 = 0;
            uint8_t *f1 = read_file(p1, &n1);
            CHECKF(f1 && n1 == r.n_kv_only && !memcmp(f1, r.kv_only, n1), "%s: the file differs from the memory form", label);
            free(f1);
            CHECKF(brisk_seq_load(c3, 0, NULL, p1, &err) == BRISK_OK, "file load: %s", err.msg);
            CHECKF(brisk_seq_save(c3, 0, NULL, p2, &err) == BRISK_OK, "save: %s", err.msg);
            size_t n2 = 0;
            uint8_t *f2 = read_file(p2, &n2);
            CHECKF(f2 && n2 == n1 && !memcmp(f2, r.kv_only, n2), "%s: save -> load -> save changed the file", label);
            free(f2);
            CHECKF(continue_matches(c3, 0, NULL, &r, N_SAVE), "%s: continuation from the file", label);
            /* a sampler given, the state has none */
            expect_refused(c3, 1, s2, r.kv_only, r.n_kv_only, BRISK_ERR_INVALID_ARG, "no sampler state", "sampler without state");
            brisk_context_free(c3);
        }
        brisk_sampler_free(s2);
        brisk_context_free(c2);
        run_free(&r);
    }
}

/* Seq 0 of c holds the state (a greedy run's, at step N_SAVE): after the refused load,
 * recomputing its last token gives the recorded logits. */
static void check_still_decodes(brisk_context *c, const run *r, const char *what) {
    int32_t toks[N_PROMPT + N_GEN], n = 0;
    brisk_seq_tokens(c, 0, toks, N_PROMPT + N_GEN, &n, NULL);
    brisk_error err = {0};
    CHECKF(brisk_seq_sync(c, 0, toks, n, NULL, &err) == BRISK_OK, "%s: sync: %s", what, err.msg);
    const float *l = brisk_get_logits(c, 0);
    CHECKF(n == N_PROMPT + N_SAVE && l && !memcmp(l, r->logits + (size_t)N_SAVE * (size_t)r->n_vocab, (size_t)r->n_vocab * sizeof(float)),
           "%s: decoding after the refused load gives other logits", what);
}

static void check_refusals(const brisk_model *m, const brisk_model *other, const char *model_path) {
    run r = {0};
    record_run(m, MODE_SAMPLED, &r);
    if (!r.state) return run_free(&r);
    const uint8_t *st = r.state;
    const size_t n = r.n_state;
    brisk_context *c = make_ctx(m, 256, 0, 2);
    brisk_sampler *s = make_sampler(MODE_SAMPLED, r.n_vocab, 77);
    brisk_error err = {0};
    CHECKF(brisk_seq_state_set(c, 0, s, st, n, &err) == BRISK_OK, "load: %s", err.msg);
    CHECK(brisk_seq_sync(c, 1, r.prompt, 40, NULL, &err) == BRISK_OK);   /* another sequence, sharing a prefix */

    /* truncated at every length; trailing bytes */
    for (size_t k = 0; k < n; k += (k < 200 || n - k < 200) ? 1 : 13) {
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu bytes", k);
        expect_refused(c, 0, s, st, k, BRISK_ERR_FORMAT, NULL, what);
    }
    uint8_t *b = malloc(n + 1);
    memcpy(b, st, n);
    b[n] = 0;
    expect_refused(c, 0, s, b, n + 1, BRISK_ERR_FORMAT, "trailing", "one trailing byte");
    free(b);
    /* every byte flipped somewhere in each section: magic, version, header, tokens, K/V, sampler, checksum */
    int n_flip = 0;
    for (size_t k = 0; k < n; k += k < 100 ? 1 : 29) {
        b = copy_of(st, n);
        b[k] ^= 0x40;
        expect_refused(c, 0, s, b, n, k >= 4 && k < 8 ? BRISK_ERR_UNSUPPORTED : BRISK_ERR_FORMAT, NULL, "a flipped byte");
        free(b);
        n_flip++;
    }
    test_count("flipped bytes refused", n_flip);
    b = copy_of(st, n);
    b[n / 2] ^= 1;
    expect_refused(c, 0, s, b, n, BRISK_ERR_FORMAT, "checksum", "a corrupted K/V byte");
    free(b);
    /* crafted (checksum resealed): each check behind the checksum */
    struct {
        size_t off;
        uint32_t val;
        brisk_status want;
        const char *needle, *what;
    } crafted[] = {
        {4, 2, BRISK_ERR_UNSUPPORTED, "version", "version 2"},
        {0, 0x46554747u, BRISK_ERR_FORMAT, "magic", "a GGUF magic"},
        {8, 9, BRISK_ERR_FORMAT, "flags", "unknown flags"},
        {8, 5, BRISK_ERR_INVALID_ARG, "Hadamard-rotated", "K marked Hadamard-rotated (--k-hadamard), loaded into an unrotated context"},
        {76, 1, BRISK_ERR_FORMAT, "reserved", "reserved field"},
        /* another storage type changes the rows' sizes (test_kv_quant loads real states of other types) */
        {32, 1, BRISK_ERR_FORMAT, "sizes add up", "K type F32"},
        {36, 7, BRISK_ERR_FORMAT, "unknown K/V storage types", "V type 7"},
        {40, 16, BRISK_ERR_INVALID_ARG, "block", "block size 16"},
        {16, 12345, BRISK_ERR_INVALID_ARG, "another model", "header hash"},
        {24, 12345, BRISK_ERR_INVALID_ARG, "tensor data", "data hash"},
        {72, 17, BRISK_ERR_INVALID_ARG, "vocabulary", "vocabulary size"},
        {BRISK_STATE_HEADER + 4 * 3, (uint32_t)r.n_vocab, BRISK_ERR_INVALID_ARG, "out of range", "token id n_vocab"},
        {BRISK_STATE_HEADER + 4 * 5, 0xffffffffu, BRISK_ERR_INVALID_ARG, "out of range", "token id -1"},
        {BRISK_STATE_HEADER + 4 * (N_PROMPT + N_SAVE) + 4 * 9, 8, BRISK_ERR_FORMAT, "position", "position out of order"},
        {BRISK_STATE_HEADER + 4 * (N_PROMPT + N_SAVE) + 4 * (N_PROMPT + N_SAVE - 1), 0x7fffffffu, BRISK_ERR_FORMAT, "below",
         "last position INT32_MAX (the next one would overflow)"},
    };
    for (size_t i = 0; i < sizeof crafted / sizeof crafted[0]; i++) {
        b = copy_of(st, n);
        put32_at(b, crafted[i].off, crafted[i].val);
        reseal(b, n);
        expect_refused(c, 0, s, b, n, crafted[i].want, crafted[i].needle, crafted[i].what);
        free(b);
    }
    /* a compacted sequence's state (positions increasing, past their slots
     * from slot 9 on, as after a retention policy dropped 5 positions) is
     * accepted, and the sequence continues one past its last position */
    {
        brisk_context *c2 = make_ctx(m, 256, 0, 2);
        b = copy_of(st, n);
        for (int i = 9; i < N_PROMPT + N_SAVE; i++) put32_at(b, BRISK_STATE_HEADER + 4 * (N_PROMPT + N_SAVE) + 4 * (size_t)i, (uint32_t)(i + 5));
        reseal(b, n);
        CHECKF(brisk_seq_state_set(c2, 0, NULL, b, n, &err) == BRISK_OK, "compacted state: %s", err.msg);
        CHECK(brisk_seq_len(c2, 0) == N_PROMPT + N_SAVE && brisk_kv_next_pos(c2->kv, 0) == N_PROMPT + N_SAVE + 5 &&
              brisk_kv_slot_pos(c2->kv, 0, 9) == 14);
        CHECKF(brisk_kv_check(c2->kv, &err), "%s", err.msg);
        free(b);
        brisk_context_free(c2);
    }
    /* a shape change with sizes that still add up: heads and head size swapped */
    {
        uint32_t nh, hd;
        memcpy(&nh, st + 48, 4);
        memcpy(&hd, st + 52, 4);
        CHECK(nh != hd);
        b = copy_of(st, n);
        put32_at(b, 48, hd);
        put32_at(b, 52, nh);
        reseal(b, n);
        expect_refused(c, 0, s, b, n, BRISK_ERR_INVALID_ARG, "KV heads", "heads and head size swapped");
        free(b);
    }
    /* a stage name with a newline in the sampler section: the message stays one line */
    {
        uint64_t smp_bytes;
        memcpy(&smp_bytes, st + 56, 8);
        b = copy_of(st, n);
        b[n - 8 - smp_bytes + 44 + 4] = '\n';
        reseal(b, n);
        expect_refused(c, 0, s, b, n, BRISK_ERR_INVALID_ARG, "saved chain", "a newline in a stage name");
        free(b);
    }
    /* sizes that do not add up, or overflow: a huge token count */
    b = copy_of(st, n);
    put32_at(b, 12, 0x7fffffffu);
    reseal(b, n);
    expect_refused(c, 0, s, b, n, BRISK_ERR_FORMAT, "add up", "2^31 tokens");
    put32_at(b, 44, 0xffffffffu);
    put32_at(b, 48, 0xffffffffu);
    put32_at(b, 52, 0xffffffffu);
    reseal(b, n);
    expect_refused(c, 0, s, b, n, BRISK_ERR_FORMAT, "overflow", "sizes that overflow");
    free(b);
    /* the sampler: another chain, a custom stage */
    brisk_sampler *greedy = make_sampler(MODE_GREEDY, r.n_vocab, 1);
    expect_refused(c, 0, greedy, st, n, BRISK_ERR_INVALID_ARG, "stage", "another sampler chain");
    static const brisk_stage_i custom_i = {.name = "custom", .apply = never_applied};
    brisk_sampler *cs = make_sampler(MODE_SAMPLED, r.n_vocab, 1);
    CHECK(brisk_sampler_add_stage(cs, -1, &custom_i, NULL, &err) == BRISK_OK);
    expect_refused(c, 0, cs, st, n, BRISK_ERR_INVALID_ARG, "stages", "a chain with one more stage");
    size_t need = 0;
    CHECK(brisk_seq_state_get(c, 0, cs, NULL, 0, &need, &err) == BRISK_ERR_UNSUPPORTED);
    CHECKF(strstr(err.msg, "custom"), "custom stage refusal names it: %s", err.msg);
    brisk_sampler_free(cs);
    brisk_sampler_free(greedy);
    /* bad arguments */
    expect_refused(c, 5, s, st, n, BRISK_ERR_INVALID_ARG, "sequence id", "sequence id out of range");
    check_still_decodes(c, &r, "after the refusals");

    /* more tokens than n_ctx_seq */
    brisk_context *small = make_ctx(m, 32, 0, 1);
    expect_refused(small, 0, s, st, n, BRISK_ERR_CAPACITY, "context size", "more tokens than n_ctx_seq");
    brisk_context_free(small);
    /* not enough blocks: seq 1 holds 2 of the pool's 3, the state needs 2 */
    brisk_context *tight = make_ctx(m, 256, 64, 2);
    int32_t fill[64];
    for (int i = 0; i < 64; i++) fill[i] = 3 + i % 20;
    CHECK(brisk_seq_sync(tight, 1, fill, 64, NULL, &err) == BRISK_OK);
    CHECK(brisk_seq_sync(tight, 0, fill, 5, NULL, &err) == BRISK_OK);
    expect_refused(tight, 0, s, st, n, BRISK_ERR_CAPACITY, "blocks", "a full pool");
    /* once seq 1 lets go, the same state fits (seq 0's own block counts) */
    CHECK(brisk_seq_truncate(tight, 1, 0, &err) == BRISK_OK);
    CHECKF(brisk_seq_state_set(tight, 0, s, st, n, &err) == BRISK_OK, "load into the freed pool: %s", err.msg);
    brisk_error kerr = {0};
    CHECKF(brisk_kv_check_ctx_ok(tight, &kerr), "pool invariants: %s", kerr.msg);
    brisk_context_free(tight);

    /* another model; a copy with one metadata value changed; a copy with one tensor byte changed */
    if (other) {
        brisk_context *oc = make_ctx(other, 256, 0, 1);
        expect_refused(oc, 0, NULL, st, n, BRISK_ERR_INVALID_ARG, "another model", "another model");
        brisk_context_free(oc);
    }
    for (int tensor = 0; tensor < 2; tensor++) {
        char path[400];
        snprintf(path, sizeof path, "%s/modified-%d.gguf", tmpdir, tensor);
        CHECKF(write_modified_model(model_path, path, tensor), "cannot write %s", path);
        brisk_model *mm = NULL;
        CHECKF(brisk_model_load(path, &mm, &err) == BRISK_OK, "modified model: %s", err.msg);
        if (!mm) continue;
        brisk_context *mc = make_ctx(mm, 256, 0, 1);
        CHECK(brisk_seq_sync(mc, 0, r.prompt, 10, NULL, &err) == BRISK_OK);
        expect_refused(mc, 0, NULL, st, n, BRISK_ERR_INVALID_ARG, tensor ? "tensor data hash" : "metadata",
                       tensor ? "one tensor byte changed" : "one metadata value changed");
        brisk_context_free(mc);
        brisk_model_free(mm);
    }
    brisk_sampler_free(s);
    brisk_context_free(c);
    run_free(&r);
}

/* The fuzz target's seeds: valid states of fuzz/corpus/fuzz_model/llama-Q4_0.gguf in a context
 * like fuzz_kvstate's (n_ctx 128, a pool of 256 tokens, 2 sequences; the "-sampler" ones with the
 * sampled mode's sampler, as fuzz_kvstate builds it), each under 64 KiB. */
static void check_fuzz_seeds(void) {
    char mpath[512], dir[512];
    test_source("fuzz/corpus/fuzz_model/llama-Q4_0.gguf", mpath, sizeof mpath);
    test_source("fuzz/corpus/fuzz_kvstate", dir, sizeof dir);
    brisk_model *m = NULL;
    brisk_error err = {0};
    CHECKF(brisk_model_load(mpath, &m, &err) == BRISK_OK, "%s", err.msg);
    if (!m) return;
    brisk_context *c = make_ctx(m, 128, 256, 2);
    brisk_sampler *fs = make_sampler(MODE_SAMPLED, 64, 1);
    if (getenv("BRISK_REGEN_KVSTATE_SEEDS")) {
        mkdir(dir, 0755);
        static const int lens[] = {1, 31, 32, 33, 70};
        for (int k = 0; k < 5; k++) {
            int32_t toks[128];
            for (int i = 0; i < lens[k]; i++) toks[i] = 3 + (i * 5 + k) % 60;
            CHECK(brisk_seq_sync(c, 0, toks, lens[k], NULL, &err) == BRISK_OK);
            brisk_sampler *s = k % 2 ? make_sampler(MODE_SAMPLED, 64, 42) : NULL;
            for (int i = 0; s && i < lens[k]; i++) brisk_sampler_accept(s, toks[i]);
            char path[700];
            snprintf(path, sizeof path, "%s/len%d%s.kvs", dir, lens[k], s ? "-sampler" : "");
            CHECKF(brisk_seq_save(c, 0, s, path, &err) == BRISK_OK, "%s", err.msg);
            brisk_sampler_free(s);
        }
    }
    char names[32][TEST_NAME_MAX];
    const int n = test_list(dir, ".kvs", names, 32);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        char path[16384];
        snprintf(path, sizeof path, "%s/%s.kvs", dir, names[i]);
        struct stat sb;
        CHECKF(stat(path, &sb) == 0 && sb.st_size < 65536, "%s: a seed must stay under 64 KiB", path);
        const brisk_status st = brisk_seq_load(c, 1, strstr(names[i], "-sampler") ? fs : NULL, path, &err);
        CHECKF(st == BRISK_OK, "seed %s: %s", names[i], err.msg);
        ok += st == BRISK_OK;
    }
    test_count("fuzz seeds loaded", ok);
    brisk_sampler_free(fs);
    brisk_context_free(c);
    brisk_model_free(m);
}

/* The model's data hash is taken lazily, once, by whichever thread asks first: four threads save
 * states of one freshly loaded model at once (each its own context) and must record the same hash,
 * the one a later save records. */
typedef struct saver {
    const brisk_model *m;
    uint64_t data_hash;
    brisk_status st;
} saver;

static void *save_thread(void *arg) {
    saver *w = arg;
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = 64;
    cp.n_threads = 1;
    brisk_context *c = NULL;
    w->st = brisk_context_init(w->m, &cp, &c, NULL);
    const int32_t toks[3] = {3, 4, 5};
    if (!w->st) w->st = brisk_seq_sync(c, 0, toks, 3, NULL, NULL);
    uint8_t *blob = NULL;
    size_t n = 0;
    if (!w->st) w->st = brisk_seq_state_get_alloc(c, 0, NULL, &blob, &n, NULL);
    if (blob) memcpy(&w->data_hash, blob + 24, 8);
    free(blob);
    brisk_context_free(c);
    return NULL;
}

static void check_threads(const char *model_path) {
    brisk_model *m = NULL;
    if (brisk_model_load(model_path, &m, NULL) != BRISK_OK) return;
    saver w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (saver){.m = m};
        CHECK(pthread_create(&th[i], NULL, save_thread, &w[i]) == 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    saver last = {.m = m};
    save_thread(&last);
    for (int i = 0; i < 4; i++)
        CHECKF(w[i].st == BRISK_OK && w[i].data_hash == last.data_hash && last.data_hash != 0, "thread %d: status %d, data hash %016llx vs %016llx",
               i, w[i].st, (unsigned long long)w[i].data_hash, (unsigned long long)last.data_hash);
    brisk_model_free(m);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/brisk-test-state-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    char qpath[512], ppath[512];
    test_source("tests/data/golden/qwen2-tiny-Q4_0.gguf", qpath, sizeof qpath);
    test_source("models/pycode-target-f16.gguf", ppath, sizeof ppath);
    brisk_model *q = NULL, *p = NULL;
    brisk_error err = {0};
    CHECKF(brisk_model_load(qpath, &q, &err) == BRISK_OK, "%s", err.msg);
    if (test_exists(ppath)) CHECKF(brisk_model_load(ppath, &p, &err) == BRISK_OK, "%s", err.msg);
    else printf("SKIP part: %s is absent (it links into ../shared): the pycode checks do not run\n", ppath);
    if (q) {
        check_lossless(q, "qwen2-tiny");
        check_refusals(q, p, qpath);
    }
    if (p) check_lossless(p, "pycode-f16");
    check_fuzz_seeds();
    check_threads(qpath);
    brisk_model_free(q);
    brisk_model_free(p);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_finish();
}
