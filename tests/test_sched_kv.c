/* brisk_sched with KV retention and the context shift (docs/KV.md, docs/SERVER.md "Retention").
 *
 *   policy      for streaming, h2o and snapkv (budget 72 of -c 128, 4 sinks, a window of 16): a request whose
 *               prompt (100 tokens) passes the budget and whose prompt + generation (100 + 60) pass -c gives
 *               greedy tokens and logits bitwise equal to a reference that feeds the same context's sequence
 *               by hand one token at a time (brisk_decode, the policy cutting at every 72nd slot as a decode
 *               does), and so the same alone with a step budget of 512, in steps of 7 tokens, beside 3 other
 *               streams arriving at other steps, under a prefill budget of 5 tokens while they decode, again
 *               (the prefix cache), as choice 0 and 1 of n = 2 (forks), and in a pool so small that requests
 *               are preempted and rebuilt; slots were really dropped.
 *   shift       no policy, -c 64, --context-shift keeping 4: a 40-token prompt + 90 generated tokens equal
 *               the hand-fed reference that shifts (llama.cpp's: keep 4, discard half) whenever the next token
 *               would pass -c, alone, in steps of 5 and beside others; shifts happened.
 *               With the shift too, 100 + 436 tokens pass the trained positions (512) and are renumbered there:
 *               the same equality alone and beside 3 streams.
 *   limits      without a shift a request past -c (no policy) or past the trained positions (policy) is
 *               refused, a policy lets prompt + max_tokens pass -c and ends with "length"; speculation is
 *               refused with retention.
 *   pin         a system prefix pinned (roles from the request) stays in the sequence through evictions, at
 *               every token; the generated tokens are tagged as the request says.
 * Model: models/pycode-target-f16.gguf (trained at 512). */
#include "test.h"
#include "brisk.h"
#include "engine/engine_impl.h"
#include "kv/policy.h"

#include <stdint.h>

#define GEN 448

static brisk_model *model;
static int32_t n_vocab;

#define REC_GEN GEN
#include "sched_rec.h"   /* every rec here records logits: rec_init(..., true) */

/* The context of every case: -c n_ctx, a pool of kv_tokens, n_seq slots, a policy (kind 0: none). */
typedef struct setup {
    int32_t n_ctx, kv_tokens, n_seq, kind, budget, sink, window;
    uint32_t pin;
    bool shift;
} setup;

static brisk_context *new_ctx(const setup *u, int32_t n_seq, int32_t kv_tokens) {
    brisk_context_params p = brisk_context_default_params();
    p.n_ctx_seq = u->n_ctx;
    p.kv_tokens = kv_tokens;
    p.n_batch = 512;
    p.n_seq = n_seq;
    p.n_threads = 2;
    p.kv_policy = u->kind;
    p.kv_budget = u->budget;
    p.kv_sink = u->sink;
    p.kv_window = u->window;
    p.kv_pin = u->pin;
    brisk_error err = {0};
    brisk_context *c = NULL;
    CHECKF(brisk_context_init(model, &p, &c, &err) == BRISK_OK, "context: %s", err.msg);
    return c;
}

static brisk_sched *new_sched(brisk_context *c, const setup *u, int32_t n_batch, int32_t prefill_budget) {
    brisk_sched_params sp = brisk_sched_default_params();
    sp.n_batch = n_batch;
    sp.n_ubatch = n_batch;
    sp.prefill_budget = prefill_budget;
    sp.context_shift = u->shift;
    sp.shift_keep = u->sink;
    brisk_sched *s = NULL;
    brisk_error err = {0};
    CHECKF(brisk_sched_init(&s, c, &sp, &err) == BRISK_OK, "scheduler: %s", err.msg);
    return s;
}

static int64_t add(brisk_sched *s, const int32_t *prompt, int32_t n_prompt, int32_t max_tokens, int32_t n, rec *out) {
    brisk_sched_request r = brisk_sched_default_request();
    r.prompt = prompt;
    r.n_prompt = n_prompt;
    r.max_tokens = max_tokens;
    r.n = n;
    r.ignore_eog = true;
    r.on_token = on_token;
    r.on_logits = on_logits;
    r.user = out;
    int64_t id = 0;
    brisk_error err = {0};
    CHECKF(brisk_sched_add(s, &r, &id, &err) == BRISK_OK, "add: %s", err.msg);
    return id;
}

static brisk_sched_info drain(brisk_sched *s) {
    brisk_sched_info info = {0};
    brisk_error err = {0};
    for (int guard = 0; brisk_sched_pending(s) > 0 && guard < 100000; guard++)
        CHECKF(brisk_sched_step(s, &info, &err) == BRISK_OK, "step: %s", err.msg);
    CHECK(brisk_sched_pending(s) == 0);
    return info;
}

/* The reference: sequence 0 of a fresh context fed by hand, one token per decode at brisk_seq_next_pos; with
 * u->shift, llama.cpp's shift whenever the next token would pass the limit; greedy as the scheduler samples. */
static void reference(const setup *u, const int32_t *prompt, int32_t n_prompt, int32_t n_gen, rec *out) {
    brisk_context *c = new_ctx(u, 1, u->n_ctx);
    brisk_sampler *smp = NULL;
    brisk_sampler_params sp = brisk_sched_default_request().sampling;
    brisk_error err = {0};
    CHECK(brisk_sampler_init(&smp, &sp, n_vocab, &err) == BRISK_OK);
    if (!c || !smp) return;
    for (int32_t i = 0; i < n_prompt; i++) brisk_sampler_accept(smp, prompt[i]);
    brisk_model_info mi;
    brisk_model_get_info(model, &mi);
    const int32_t limit = u->kind ? mi.n_ctx_train : u->n_ctx;
    int32_t tok = prompt[0], seq = 0;
    for (int32_t i = 0; i < n_prompt + n_gen - 1; i++) {
        if (i > 0) tok = i < n_prompt ? prompt[i] : out->tok[i - n_prompt];
        int32_t len = brisk_seq_len(c, 0), pos = brisk_seq_next_pos(c, 0);
        if ((!u->kind && len + 1 > u->n_ctx) || pos + 1 > limit) {
            CHECK(u->shift);
            const int32_t discard = !u->kind || len + 1 > limit ? BRISK_MAX(BRISK_MAX(len - u->sink, 0) / 2, len + 1 - limit) : 0;
            CHECKF(brisk_seq_context_shift(c, 0, u->sink, discard, NULL, &err) == BRISK_OK, "%s", err.msg);
            pos = brisk_seq_next_pos(c, 0);
        }
        const uint8_t want = i >= n_prompt - 1;
        const brisk_batch b = {.n_tokens = 1, .token = &tok, .pos = &pos, .seq = &seq, .logits = &want};
        CHECKF(brisk_decode(c, &b, &err) == BRISK_OK, "reference decode %d: %s", i, err.msg);
        if (!want) continue;
        const float *l = brisk_get_logits(c, 0);
        const int32_t k = out->n;
        memcpy(out->logits + (size_t)k * (size_t)n_vocab, l, (size_t)n_vocab * sizeof(float));
        out->tok[k] = brisk_sampler_sample(smp, l);
        brisk_sampler_accept(smp, out->tok[k]);
        out->n++;
    }
    out->finish = BRISK_FINISH_LENGTH;
    out->n_finish = 1;
    brisk_sampler_free(smp);
    brisk_context_free(c);
}

/* Prompts: a long one for the target (n tokens), and distinct ones for the streams beside it. */
static int32_t *prompt_of(const char *text, int32_t n, int32_t salt) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    brisk_error err = {0};
    CHECKF(brisk_tokenize_text(model, text, strlen(text), true, false, &ids, &n_ids, &err) == BRISK_OK, "%s", err.msg);
    int32_t *p = malloc((size_t)n * sizeof *p);
    for (int32_t i = 0; i < n; i++) p[i] = i < (int32_t)n_ids ? ids[i] : (int32_t)(((uint32_t)i * 2654435761u + (uint32_t)salt * 40503u) % 1000u) + 10;
    if (salt) p[1] = 10 + salt;   /* they differ from the second token on */
    free(ids);
    return p;
}

static const char *const TEXT =
    "import os\nimport sys\n\n\ndef walk(root):\n    for name in os.listdir(root):\n        path = os.path.join(root, name)\n"
    "        if os.path.isdir(path):\n            yield from walk(path)\n        else:\n            yield path\n\n\n"
    "def main(argv):\n    for p in walk(argv[1]):\n        print(p)\n";

/* The target alone in a context of n_seq slots, with others beside it (added at steps `at`), in steps of
 * n_batch tokens and a prefill budget; n > 1: choice 0 and 1 checked against want. */
static void run_case(const setup *u, const char *what, const int32_t *target, int32_t n_prompt, int32_t n_gen, const rec *want,
                     int32_t n_batch, int32_t prefill_budget, int n_other, int32_t kv_tokens, int32_t n_choices, bool twice) {
    brisk_context *c = new_ctx(u, u->n_seq, kv_tokens);
    brisk_sched *s = c ? new_sched(c, u, n_batch, prefill_budget) : NULL;
    if (!s) {
        brisk_context_free(c);
        return;
    }
    rec out[2], other[3];
    int32_t *op[3] = {0};
    rec_init(other, 3, true);
    brisk_sched_info info = {0};
    brisk_error err = {0};
    for (int pass = 0; pass < (twice ? 2 : 1); pass++) {
        rec_init(out, 2, true);
        for (int k = 0; k < n_other; k++) {
            if (!op[k]) op[k] = prompt_of(TEXT, 70 + 9 * k, k + 1);
            rec_reset(&other[k]);
        }
        /* others first and later: the target's prompt shares steps with their prefills and decodes */
        if (n_other > 0) add(s, op[0], 70, 50, 1, &other[0]);
        add(s, target, n_prompt, n_gen, n_choices, out);
        for (int step = 0; brisk_sched_pending(s) > 0 && step < 100000; step++) {
            if (step == 3 && n_other > 1) add(s, op[1], 79, 40, 1, &other[1]);
            if (step == 11 && n_other > 2) add(s, op[2], 88, 30, 1, &other[2]);
            CHECKF(brisk_sched_step(s, &info, &err) == BRISK_OK, "step: %s", err.msg);
        }
        for (int i = 0; i < n_choices; i++)
            CHECKF(rec_same(&out[i], want) && out[i].n_finish == 1, "%s, pass %d, choice %d: %d tokens (want %d), finish %s, first difference at %d",
                   what, pass, i, out[i].n, want->n, brisk_finish_str(out[i].finish), first_diff(&out[i], want));
        for (int k = 0; k < n_other; k++) CHECKF(other[k].n_finish == 1 && other[k].finish == BRISK_FINISH_LENGTH, "%s: stream %d", what, k);
        rec_free(out, 2);
    }
    if (kv_tokens < u->n_ctx * 2) CHECKF(info.n_preemptions > 0, "%s: no preemption in a pool of %d tokens", what, kv_tokens);
    brisk_cache_stats cst;
    brisk_context_cache_stats(c, &cst);
    if (u->kind) CHECKF(cst.dropped > 0, "%s: no slot dropped", what);
    if (u->shift) CHECKF(info.n_shifts > 0, "%s: no context shift", what);
    printf("  %s: %d tokens, %lld slots dropped, %lld shifts, %lld preemptions\n", what, want->n, (long long)cst.dropped,
           (long long)info.n_shifts, (long long)info.n_preemptions);
    rec_free(other, 3);
    for (int k = 0; k < 3; k++) free(op[k]);
    brisk_sched_free(s);
    brisk_context_free(c);
}

static void test_policy(int kind) {
    const setup u = {.n_ctx = 128, .kv_tokens = 4 * 128, .n_seq = 4, .kind = kind, .budget = 72, .sink = 4, .window = 16};
    const int32_t n_prompt = 100, n_gen = 60;
    int32_t *target = prompt_of(TEXT, n_prompt, 0);
    rec want;
    rec_init(&want, 1, true);
    reference(&u, target, n_prompt, n_gen, &want);
    CHECK(want.n == n_gen);
    printf("policy %s\n", brisk_kv_policy_name(kind));
    run_case(&u, "alone, steps of 512", target, n_prompt, n_gen, &want, 512, 0, 0, u.kv_tokens, 1, true);
    run_case(&u, "alone, steps of 7", target, n_prompt, n_gen, &want, 7, 0, 0, u.kv_tokens, 1, false);
    run_case(&u, "beside 3 streams, steps of 64", target, n_prompt, n_gen, &want, 64, 0, 3, u.kv_tokens, 1, false);
    run_case(&u, "beside 3 streams, prefill budget 5", target, n_prompt, n_gen, &want, 512, 5, 3, u.kv_tokens, 1, false);
    run_case(&u, "n = 2", target, n_prompt, n_gen, &want, 512, 0, 0, u.kv_tokens, 2, false);
    /* 4 blocks for streams of up to 3 (72 slots): a decode that opens a block finds none, the youngest is preempted
     * and rebuilt from its history */
    run_case(&u, "preempted in a pool of 128", target, n_prompt, n_gen, &want, 64, 0, 2, 128, 1, false);
    rec_free(&want, 1);
    free(target);
}

static void test_shift(void) {
    const setup u = {.n_ctx = 64, .kv_tokens = 4 * 64, .n_seq = 4, .sink = 4, .shift = true};
    const int32_t n_prompt = 40, n_gen = 90;
    int32_t *target = prompt_of(TEXT, n_prompt, 0);
    rec want;
    rec_init(&want, 1, true);
    reference(&u, target, n_prompt, n_gen, &want);
    CHECK(want.n == n_gen);
    printf("context shift (no policy)\n");
    run_case(&u, "alone, steps of 512", target, n_prompt, n_gen, &want, 512, 0, 0, u.kv_tokens, 1, true);
    run_case(&u, "alone, steps of 5", target, n_prompt, n_gen, &want, 5, 0, 0, u.kv_tokens, 1, false);
    run_case(&u, "beside 3 streams", target, n_prompt, n_gen, &want, 64, 0, 3, u.kv_tokens, 1, false);
    rec_free(&want, 1);
    free(target);
}

/* A policy and the shift: positions pass the trained context (512), the slots are renumbered there. */
static void test_policy_shift(void) {
    brisk_model_info mi;
    brisk_model_get_info(model, &mi);
    const setup u = {.n_ctx = 128, .kv_tokens = 4 * 128, .n_seq = 4, .kind = BRISK_KV_POLICY_STREAMING, .budget = 72, .sink = 4,
                     .window = 16, .shift = true};
    const int32_t n_prompt = 100, n_gen = mi.n_ctx_train - n_prompt + 24;
    if (n_gen > GEN) return;
    int32_t *target = prompt_of(TEXT, n_prompt, 0);
    rec want;
    rec_init(&want, 1, true);
    reference(&u, target, n_prompt, n_gen, &want);
    CHECK(want.n == n_gen);
    printf("policy streaming with the context shift (trained context %d)\n", mi.n_ctx_train);
    run_case(&u, "alone, steps of 512", target, n_prompt, n_gen, &want, 512, 0, 0, u.kv_tokens, 1, false);
    run_case(&u, "beside 3 streams, steps of 64", target, n_prompt, n_gen, &want, 64, 0, 3, u.kv_tokens, 1, false);
    rec_free(&want, 1);
    free(target);
}

static void test_limits(void) {
    int32_t *p = prompt_of(TEXT, 40, 0);
    brisk_model_info mi;
    brisk_model_get_info(model, &mi);
    brisk_error err = {0};
    int64_t id = 0;
    /* no policy, no shift: prompt + max_tokens within -c */
    setup u = {.n_ctx = 64, .kv_tokens = 64, .n_seq = 1, .sink = 4};
    brisk_context *c = new_ctx(&u, 1, 64);
    brisk_sched *s = new_sched(c, &u, 512, 0);
    brisk_sched_request r = brisk_sched_default_request();
    r.prompt = p;
    r.n_prompt = 40;
    r.max_tokens = 25;
    r.on_token = on_token;
    CHECK(brisk_sched_add(s, &r, &id, &err) == BRISK_ERR_CAPACITY);
    brisk_sched_free(s);
    brisk_context_free(c);
    /* a policy: past -c up to the trained positions, then "length" */
    u = (setup){.n_ctx = 64, .kv_tokens = 64, .n_seq = 1, .kind = BRISK_KV_POLICY_STREAMING, .budget = 48, .sink = 4, .window = 8};
    c = new_ctx(&u, 1, 64);
    s = new_sched(c, &u, 512, 0);
    r.max_tokens = mi.n_ctx_train - 40 + 1;
    CHECK(brisk_sched_add(s, &r, &id, &err) == BRISK_ERR_CAPACITY);
    CHECKF(strstr(err.msg, "without a context shift") != NULL, "%s", err.msg);
    r.max_tokens = 50;
    r.spec = BRISK_SCHED_SPEC_NGRAM;
    CHECK(brisk_sched_add(s, &r, &id, &err) == BRISK_ERR_INVALID_ARG);
    CHECKF(strstr(err.msg, "speculative decoding is not available") != NULL, "%s", err.msg);
    r.spec = BRISK_SCHED_SPEC_OFF;
    rec out;
    rec_init(&out, 1, true);
    r.user = &out;
    r.ignore_eog = true;
    CHECK(brisk_sched_add(s, &r, &id, &err) == BRISK_OK);
    drain(s);
    CHECK(out.n == 50 && out.finish == BRISK_FINISH_LENGTH && out.n_finish == 1);
    brisk_cache_stats cst;
    brisk_context_cache_stats(c, &cst);
    CHECK(cst.dropped > 0);
    rec_free(&out, 1);
    brisk_sched_free(s);
    brisk_context_free(c);
    free(p);
}

/* pin: tokens 0..11 of the prompt are "system" and pinned; at every generated token they are still in the
 * sequence at their positions with their tokens. */
typedef struct pin_watch {
    brisk_context *c;
    const int32_t *prompt;
    int32_t tokens, bad;
} pin_watch;

static void pin_on_token(void *user, int64_t id, int32_t choice, int32_t token, brisk_finish finish) {
    (void)id, (void)choice, (void)finish;
    pin_watch *w = user;
    if (token < 0) return;
    w->tokens++;
    const brisk_kv *kv = w->c->kv;
    for (int32_t i = 0; i < 12; i++)
        if (brisk_kv_slot_pos(kv, 0, i) != i || brisk_kv_slot_token(kv, 0, i) != w->prompt[i] ||
            brisk_kv_slot_role(kv, 0, i) != BRISK_ROLE_SYSTEM)
            w->bad++;
    /* the newest slots are generated tokens, tagged "assistant" */
    const int32_t len = brisk_kv_len(kv, 0);
    if (w->tokens > 2 && brisk_kv_slot_role(kv, 0, len - 1) != BRISK_ROLE_ASSISTANT) w->bad++;
}

static void test_pin(void) {
    /* sinks 0: without the pin streaming would drop the system prefix first */
    const setup u = {.n_ctx = 128, .kv_tokens = 128, .n_seq = 1, .kind = BRISK_KV_POLICY_STREAMING, .budget = 48, .sink = 0, .window = 8,
                     .pin = 1u << BRISK_ROLE_SYSTEM};
    int32_t *p = prompt_of(TEXT, 60, 0);
    uint8_t roles[60];
    for (int i = 0; i < 60; i++) roles[i] = i < 12 ? BRISK_ROLE_SYSTEM : BRISK_ROLE_USER;
    brisk_context *c = new_ctx(&u, 1, 128);
    brisk_sched *s = new_sched(c, &u, 512, 0);
    pin_watch w = {.c = c, .prompt = p};
    brisk_sched_request r = brisk_sched_default_request();
    r.prompt = p;
    r.n_prompt = 60;
    r.max_tokens = 80;
    r.ignore_eog = true;
    r.roles = roles;
    r.gen_role = BRISK_ROLE_ASSISTANT;
    r.on_token = pin_on_token;
    r.user = &w;
    brisk_error err = {0};
    int64_t id = 0;
    CHECKF(brisk_sched_add(s, &r, &id, &err) == BRISK_OK, "%s", err.msg);
    drain(s);
    brisk_cache_stats cst;
    brisk_context_cache_stats(c, &cst);
    CHECKF(w.tokens == 80 && w.bad == 0 && cst.dropped > 0, "pin: %d tokens, %d bad, %lld dropped", w.tokens, w.bad, (long long)cst.dropped);
    brisk_sched_free(s);
    brisk_context_free(c);
    free(p);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    char path[1024];
    test_source("models/pycode-target-f16.gguf", path, sizeof path);
    if (!test_exists(path)) TEST_SKIP("models/pycode-target-f16.gguf is missing");
    brisk_error err = {0};
    CHECKF(brisk_model_load(path, &model, &err) == BRISK_OK, "%s", err.msg);
    if (!model) return test_finish();
    brisk_model_info mi;
    brisk_model_get_info(model, &mi);
    n_vocab = mi.n_vocab;
    /* BRISK_TEST_SCHED_KV_SHIFT_ONLY=1: the policy-and-shift case alone (developing it on a loaded machine) */
    if (getenv("BRISK_TEST_SCHED_KV_SHIFT_ONLY")) {
        test_policy_shift();
        brisk_model_free(model);
        return test_finish();
    }
    test_limits();
    test_pin();
    test_shift();
    test_policy(BRISK_KV_POLICY_STREAMING);
    if (!test_quick()) {
        test_policy(BRISK_KV_POLICY_H2O);
        test_policy(BRISK_KV_POLICY_SNAPKV);
        test_policy_shift();
    }
    brisk_model_free(model);
    return test_finish();
}
