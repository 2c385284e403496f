/* fuzz_kvstate: libFuzzer target for the KV-state loader (src/engine/state.c):
 * bytes -> brisk_seq_state_set into sequence 1 of a context of a tiny model
 * (fuzz/corpus/fuzz_model/llama-Q4_0.gguf; BRISK_FUZZ_KVSTATE_MODEL
 * overrides it) whose sequence 0 holds 40 tokens, once with the sampler
 * (penalties, DRY, XTC: the stages with state) and once without.
 *
 * Invariants, each a crash when broken:
 *   - a refusal has a negative status and a one-line message, and changes
 *     nothing: both sequences' tokens, the cache statistics and the sampler's
 *     state are what they were;
 *   - the pool's invariants hold after every call (brisk_kv_check);
 *   - an accepted state is canonical: saving the sequence (and the sampler)
 *     again gives the input back (the K/V of full blocks excepted: a crafted
 *     state's full block may be replaced by the prefix cache's block with the
 *     same tokens, see docs/KVSTATE.md); and the sequence decodes (a status,
 *     never a crash, even for NaN rows).
 * Seeds: fuzz/corpus/fuzz_kvstate/ (valid states, written by tests/test_state.c
 * with BRISK_REGEN_KVSTATE_SEEDS=1). Half the mutations are resealed
 * (LLVMFuzzerCustomMutator: the total-size field set to the input's size and
 * the checksum recomputed), so the checks behind the checksum are reached. */
#include "fuzz_check.h"
#include "brisk.h"
#include "engine/engine_impl.h"
#include "engine/state.h"
#include "sample/sample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_BASE 40

static brisk_model *model;
static brisk_context *ctx;
static brisk_sampler *smp;
static uint8_t *smp_pristine;   /* the sampler's state at init, restored after each accepted load */
static size_t n_smp_pristine;
static int32_t base[N_BASE];

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char path[4096];
    const char *env = getenv("BRISK_FUZZ_KVSTATE_MODEL");
    if (env && *env) snprintf(path, sizeof path, "%s", env);
    else {
        const char *here = __FILE__, *slash = strrchr(here, '/');
        snprintf(path, sizeof path, "%.*scorpus/fuzz_model/llama-Q4_0.gguf", slash ? (int)(slash - here + 1) : 0, here);
    }
    brisk_error err = {0};
    if (brisk_model_load(path, &model, &err)) {
        fprintf(stderr, "fuzz_kvstate: %s (set BRISK_FUZZ_KVSTATE_MODEL)\n", err.msg);
        abort();
    }
    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = 128;
    cp.kv_tokens = 256;
    cp.n_seq = 2;
    cp.n_batch = 16;
    cp.n_threads = 1;
    FUZZ_CHECK(brisk_context_init(model, &cp, &ctx, &err) == BRISK_OK);
    /* the same sampler as tests/test_state.c's sampled mode, so its seeds carry a matching section */
    brisk_sampler_params sp = brisk_sampler_default_params();
    sp.seed = 1;
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
    FUZZ_CHECK(brisk_sampler_init(&smp, &sp, 64, &err) == BRISK_OK);
    FUZZ_CHECK(brisk_sampler_state_size(smp, &n_smp_pristine, &err) == BRISK_OK);
    smp_pristine = malloc(n_smp_pristine);
    FUZZ_CHECK(smp_pristine);
    brisk_sampler_state_write(smp, smp_pristine);
    for (int i = 0; i < N_BASE; i++) base[i] = 3 + (i * 7) % 60;
    FUZZ_CHECK(brisk_seq_sync(ctx, 0, base, N_BASE, NULL, &err) == BRISK_OK);
    return 0;
}

typedef struct snapshot {
    int32_t len[2], tok[2][128];
    brisk_cache_stats stats;
    uint8_t smp[4096];
    size_t n_smp;
} snapshot;

static void snap(snapshot *s) {
    memset(s, 0, sizeof *s);
    for (int32_t q = 0; q < 2; q++) FUZZ_CHECK(brisk_seq_tokens(ctx, q, s->tok[q], 128, &s->len[q], NULL) == BRISK_OK);
    brisk_context_cache_stats(ctx, &s->stats);
    FUZZ_CHECK(brisk_sampler_state_size(smp, &s->n_smp, NULL) == BRISK_OK && s->n_smp <= sizeof s->smp);
    brisk_sampler_state_write(smp, s->smp);
}

static void check_pool(void) {
    brisk_error err = {0};
    if (!brisk_kv_check(ctx->kv, &err)) {
        fprintf(stderr, "fuzz_kvstate: pool invariant: %s\n", err.msg);
        abort();
    }
}

static void one_load(const uint8_t *data, size_t size, bool with_sampler) {
    snapshot before, after;
    snap(&before);
    brisk_error err = {0};
    const brisk_status st = brisk_seq_state_set(ctx, 1, with_sampler ? smp : NULL, data, size, &err);
    check_pool();
    if (st != BRISK_OK) {
        FUZZ_CHECK(st < 0 && err.msg[0] && !strchr(err.msg, '\n'));
        snap(&after);
        FUZZ_CHECK(!memcmp(&before, &after, sizeof before));
        return;
    }
    /* accepted: canonical (saving again gives the input back), and usable. Except for the K/V
     * of full blocks: brisk_kv_commit replaces a loaded full block by an indexed one with the
     * same tokens after the same prefix, whose rows a crafted state need not match. */
    uint8_t *again = NULL;
    size_t n_again = 0;
    FUZZ_CHECK(brisk_seq_state_get_alloc(ctx, 1, with_sampler ? smp : NULL, &again, &n_again, &err) == BRISK_OK);
    uint32_t n_tok, n_layer, n_head, head_dim;
    memcpy(&n_tok, data + 12, 4), memcpy(&n_layer, data + 44, 4), memcpy(&n_head, data + 48, 4), memcpy(&head_dim, data + 52, 4);
    const size_t kv_off = BRISK_STATE_HEADER + 8 * (size_t)n_tok, row = 2 * (size_t)n_head * head_dim;
    const size_t kv_end = kv_off + 2 * (size_t)n_layer * n_tok * row, full = n_tok / 32 * 32;
    /* hashes and shape; n_vocab, tokens and positions (the sampler size and the total differ without a sampler) */
    FUZZ_CHECK(n_again >= kv_end + 8 && !memcmp(again + 16, data + 16, 40) && !memcmp(again + 72, data + 72, kv_off - 72));
    for (size_t part = 0; part < 2 * (size_t)n_layer; part++)   /* K then V, per layer: the partial block's rows */
        FUZZ_CHECK(!memcmp(again + kv_off + (part * n_tok + full) * row, data + kv_off + (part * n_tok + full) * row, (n_tok - full) * row));
    if (with_sampler) FUZZ_CHECK(n_again == size && !memcmp(again + kv_end, data + kv_end, size - kv_end - 8));
    free(again);
    const int32_t len = brisk_seq_len(ctx, 1);
    if (len > 0 && len < 128) {
        int32_t tok = 3, pos = len, seq = 1;
        uint8_t want = 1;
        brisk_batch b = {.n_tokens = 1, .token = &tok, .pos = &pos, .seq = &seq, .logits = &want};
        const brisk_status ds = brisk_decode(ctx, &b, &err);
        FUZZ_CHECK(ds == BRISK_OK || (ds < 0 && err.msg[0]));
        check_pool();
    }
    FUZZ_CHECK(brisk_seq_truncate(ctx, 1, 0, &err) == BRISK_OK);
    if (with_sampler) FUZZ_CHECK(brisk_sampler_state_load(smp, smp_pristine, n_smp_pristine, &err) == BRISK_OK);
    check_pool();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one_load(data, size, true);
    one_load(data, size, false);
    return 0;
}

/* Half of the mutations keep the state's total-size field and checksum right. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    size = LLVMFuzzerMutate(data, size, max_size);
    if ((seed & 1) && size >= BRISK_STATE_HEADER + 8) {
        const uint64_t total = size;
        memcpy(data + 64, &total, 8);
        const uint64_t sum = brisk_state_checksum(data, size);
        memcpy(data + size - 8, &sum, 8);
    }
    return size;
}
