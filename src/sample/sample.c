/* sample: the sampler as a chain of stages (stages.c), its final softmax and
 * the seeded draw. The chain is logit bias -> mask -> the stages the
 * parameters turn on, in the order of params.samplers -> softmax; a
 * temperature stage's division is folded into that softmax when nothing
 * after it reads logits, which keeps today's default chain
 * (penalties -> top-k -> top-p -> min-p -> temperature -> draw) bit for bit.
 * The draw's RNG is the sampler's own; stages that need randomness (XTC)
 * own theirs. */
#include "sample/sample.h"
#include "sample/stages.h"

#include <math.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

typedef struct stage {
    const brisk_stage_i *iface;   /* borrowed: the built-ins' are static */
    void *ctx;                    /* owned */
} stage;

struct brisk_sampler {
    brisk_sampler_params p;       /* p.samplers and p.logit_bias are not kept (borrowed during init only) */
    int32_t n_vocab;
    uint64_t rng[4];              /* the draw's */
    stage *stages;                /* [n_stages], capacity cap */
    int32_t n_stages, cap;
    void *mask;                   /* the mask stage's ctx (also in stages) */
    brisk_token_data *cands;      /* [n_vocab] scratch */
    float *probs;                 /* [n_vocab] scratch for brisk_sampler_sample */
};

brisk_sampler_params brisk_sampler_default_params(void) {
    return (brisk_sampler_params){.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.0f,
                                  .repeat_last_n = 64, .freq_penalty = 0.0f, .presence_penalty = 0.0f,
                                  .repeat_mode = BRISK_REPEAT_CLASSIC, .seed = BRISK_SEED_RANDOM,
                                  .typical_p = 1.0f, .top_n_sigma = -1.0f, .xtc_probability = 0.0f,
                                  .xtc_threshold = 0.1f, .mirostat = 0, .mirostat_tau = 5.0f, .mirostat_eta = 0.1f,
                                  .min_keep = 0, .samplers = NULL, .logit_bias = NULL, .n_logit_bias = 0,
                                  .dry_multiplier = 0.0f, .dry_base = 1.75f, .dry_allowed_length = 2,
                                  .dry_penalty_last_n = 64, .dry_breakers = NULL, .n_dry_breakers = 0};
}

/* ---- RNG ----------------------------------------------------------------------------------- */

#define DRAW_STREAM 0ull   /* the draw's stream: the seeding the sampler always had */

/* A seed for BRISK_SEED_RANDOM: the kernel's entropy, or the clock and the
 * address space's layout where getrandom is unavailable. Never returns
 * BRISK_SEED_RANDOM itself, so brisk_sampler_seed always names a usable seed. */
static uint64_t random_seed(void) {
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t mix = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&ts;
        uint64_t r[4];
        brisk_rng_seed(r, mix, 0);
        x = r[0];
    }
    return x == BRISK_SEED_RANDOM ? 0 : x;
}

uint64_t brisk_sampler_seed(const brisk_sampler *s) { return s->p.seed; }

double brisk_sampler_uniform(brisk_sampler *s) { return (double)(brisk_rng_next(s->rng) >> 11) * 0x1.0p-53; }

/* ---- the order ------------------------------------------------------------------------------ */

typedef enum stage_kind {
    K_PENALTIES, K_DRY, K_TOP_N_SIGMA, K_TOP_K, K_TYPICAL, K_TOP_P, K_MIN_P, K_XTC, K_TEMP, K_COUNT
} stage_kind;

/* llama.cpp's canonical names and aliases (common/sampling.cpp), kebab-case and no-dash forms included */
static const struct {
    const char *name;
    stage_kind kind;
} stage_names[] = {
    {"penalties", K_PENALTIES}, {"dry", K_DRY}, {"top_n_sigma", K_TOP_N_SIGMA}, {"top-n-sigma", K_TOP_N_SIGMA},
    {"topnsigma", K_TOP_N_SIGMA}, {"top_k", K_TOP_K}, {"top-k", K_TOP_K}, {"topk", K_TOP_K},
    {"typ_p", K_TYPICAL}, {"typ-p", K_TYPICAL}, {"typp", K_TYPICAL}, {"typ", K_TYPICAL},
    {"top_p", K_TOP_P}, {"top-p", K_TOP_P}, {"topp", K_TOP_P}, {"nucleus", K_TOP_P},
    {"min_p", K_MIN_P}, {"min-p", K_MIN_P}, {"minp", K_MIN_P}, {"xtc", K_XTC},
    {"temperature", K_TEMP}, {"temp", K_TEMP},
};

#define DEFAULT_ORDER "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature"

static brisk_status parse_order(const char *spec, stage_kind *out, int32_t *n_out, brisk_error *err) {
    int32_t n = 0;
    for (const char *q = spec; *q;) {
        const char *e = strchr(q, ';');
        const size_t len = e ? (size_t)(e - q) : strlen(q);
        if (len > 0) {
            int found = -1;
            for (size_t i = 0; i < sizeof stage_names / sizeof stage_names[0] && found < 0; i++)
                if (strlen(stage_names[i].name) == len && strncasecmp(stage_names[i].name, q, len) == 0)
                    found = (int)stage_names[i].kind;
            if (found < 0)
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: unknown sampler '%.*s' in the order '%s'",
                                  (int)(len < 64 ? len : 64), q, spec);
            if (n == 32) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: more than 32 samplers in the order");
            out[n++] = (stage_kind)found;
        }
        q += len + (e ? 1 : 0);
    }
    *n_out = n;
    return BRISK_OK;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static brisk_status push_stage(brisk_sampler *s, int32_t pos, const brisk_stage_i *iface, void *ctx, brisk_error *err) {
    if (s->n_stages == s->cap) {
        const int32_t cap = s->cap ? 2 * s->cap : 8;
        stage *st = realloc(s->stages, (size_t)cap * sizeof *st);
        if (!st) return brisk_fail(err, BRISK_ERR_NOMEM, "sampler: out of memory for stage '%s'", iface->name);
        s->stages = st;
        s->cap = cap;
    }
    if (pos < 0 || pos > s->n_stages) pos = s->n_stages;
    memmove(s->stages + pos + 1, s->stages + pos, (size_t)(s->n_stages - pos) * sizeof *s->stages);
    s->stages[pos] = (stage){iface, ctx};
    s->n_stages++;
    return BRISK_OK;
}

/* push a built-in stage, freeing ctx if it cannot be pushed */
static brisk_status push_own(brisk_sampler *s, const brisk_stage_i *iface, void *ctx, brisk_error *err) {
    if (!ctx) return brisk_fail(err, BRISK_ERR_NOMEM, "sampler: out of memory for stage '%s'", iface->name);
    const brisk_status st = push_stage(s, -1, iface, ctx, err);
    if (st != BRISK_OK && ctx) iface->free(ctx);
    return st;
}

static brisk_status validate(const brisk_sampler_params *p, int32_t n_vocab, brisk_error *err) {
    if (n_vocab < 1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: vocabulary size %d", n_vocab);
    if (!isfinite(p->temp)) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: temperature %g is not finite", p->temp);
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f)) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: top-p %g out of range [0, 1]", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: min-p %g out of range [0, 1]", p->min_p);
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: repeat penalty %g must be positive", p->repeat_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > (1 << 20))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: repeat window %d out of range", p->repeat_last_n);
    if (!isfinite(p->freq_penalty) || !isfinite(p->presence_penalty))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: penalties must be finite");
    if (!(p->typical_p >= 0.0f) || !isfinite(p->typical_p))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: typical-p %g must be >= 0", p->typical_p);
    if (!isfinite(p->top_n_sigma)) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: top-n-sigma %g is not finite", p->top_n_sigma);
    if (!(p->xtc_probability >= 0.0f && p->xtc_probability <= 1.0f))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: XTC probability %g out of range [0, 1]", p->xtc_probability);
    if (!(p->xtc_threshold >= 0.0f && p->xtc_threshold <= 1.0f))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: XTC threshold %g out of range [0, 1]", p->xtc_threshold);
    if (p->mirostat != 0 && p->mirostat != 2)
        return brisk_fail(err, p->mirostat == 1 ? BRISK_ERR_UNSUPPORTED : BRISK_ERR_INVALID_ARG,
                          "sampler: mirostat %d (0 = off, 2 = mirostat v2; v1 is not supported)", p->mirostat);
    if (p->mirostat && (!isfinite(p->mirostat_tau) || !(p->mirostat_tau >= 0.0f) || !isfinite(p->mirostat_eta) || !(p->mirostat_eta >= 0.0f)))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: mirostat entropy %g and rate %g must be finite and >= 0",
                          p->mirostat_tau, p->mirostat_eta);
    if (p->min_keep < 0 || p->min_keep > n_vocab)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: min-keep %d out of range [0, %d]", p->min_keep, n_vocab);
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: %d logit biases without a list", p->n_logit_bias);
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const brisk_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: logit bias for token %d outside the vocabulary (%d)", b->token, n_vocab);
        if (isnan(b->bias) || b->bias == INFINITY)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: logit bias %g for token %d (finite or -inf)", b->bias, b->token);
    }
    if (!isfinite(p->dry_multiplier) || !isfinite(p->dry_base) || p->dry_allowed_length < 0 || p->dry_penalty_last_n < 0 ||
        p->dry_penalty_last_n > (1 << 20))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: DRY multiplier %g, base %g, allowed length %d, window %d",
                          p->dry_multiplier, p->dry_base, p->dry_allowed_length, p->dry_penalty_last_n);
    if (p->n_dry_breakers < 0 || (p->n_dry_breakers > 0 && !p->dry_breakers))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: %d DRY breaker ints without a list", p->n_dry_breakers);
    for (int32_t i = 0; i < p->n_dry_breakers; i += 1 + p->dry_breakers[i]) {
        const int32_t len = p->dry_breakers[i];
        if (len < 1 || len > p->n_dry_breakers - i - 1)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: DRY breaker at %d: length %d does not fit", i, len);
        for (int32_t j = 1; j <= len; j++)
            if (p->dry_breakers[i + j] < 0 || p->dry_breakers[i + j] >= n_vocab)
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: DRY breaker at %d: token %d outside the vocabulary (%d)",
                                  i, p->dry_breakers[i + j], n_vocab);
    }
    return BRISK_OK;
}

/* The stages the parameters turn on, in order. Greedy (temp <= 0) leaves out
 * top-k, top-p and min-p: each keeps the best candidate, so the argmax is the
 * same without them (and greedy decoding skips their sorts). */
static brisk_status build(brisk_sampler *s, const brisk_sampler_params *p, brisk_error *err) {
    brisk_status st;
    const int32_t nv = s->n_vocab;
    if (p->n_logit_bias > 0 &&
        (st = push_own(s, &brisk_stage_logit_bias_i, brisk_stage_logit_bias_new(p->logit_bias, p->n_logit_bias, nv), err)))
        return st;
    s->mask = brisk_stage_mask_new(nv);
    if ((st = push_own(s, &brisk_stage_mask_i, s->mask, err))) return st;
    if (p->mirostat == 2) {
        if ((st = push_own(s, &brisk_stage_temp_i, brisk_stage_temp_new(p->temp), err))) return st;
        if (p->temp <= 0.0f) return BRISK_OK;   /* one candidate left: mirostat keeps it */
        return push_own(s, &brisk_stage_mirostat2_i, brisk_stage_mirostat2_new(p->mirostat_tau, p->mirostat_eta, nv), err);
    }
    stage_kind order[32];
    int32_t n = 0;
    if ((st = parse_order(p->samplers ? p->samplers : DEFAULT_ORDER, order, &n, err))) return st;
    const bool greedy = p->temp <= 0.0f;
    for (int32_t i = 0; i < n; i++) {
        switch (order[i]) {
        case K_PENALTIES:
            if (p->repeat_last_n == 0 || (p->repeat_penalty == 1.0f && p->freq_penalty == 0.0f && p->presence_penalty == 0.0f)) break;
            st = push_own(s, &brisk_stage_penalties_i, brisk_stage_penalties_new(p, nv), err);
            break;
        case K_DRY:
            if (p->dry_multiplier != 0.0f && p->dry_base >= 1.0f && p->dry_penalty_last_n > 0)
                st = push_own(s, &brisk_stage_dry_i, brisk_stage_dry_new(p, nv), err);
            break;
        case K_TOP_N_SIGMA:
            if (p->top_n_sigma > 0.0f) st = push_own(s, &brisk_stage_top_n_sigma_i, brisk_stage_top_n_sigma_new(p->top_n_sigma), err);
            break;
        case K_TOP_K:
            if (!greedy && p->top_k > 0 && p->top_k < nv) st = push_own(s, &brisk_stage_top_k_i, brisk_stage_top_k_new(p->top_k), err);
            break;
        case K_TYPICAL:
            if (p->typical_p < 1.0f)
                st = push_own(s, &brisk_stage_typical_i, brisk_stage_typical_new(p->typical_p, p->min_keep, nv), err);
            break;
        case K_TOP_P:
            if (!greedy && p->top_p < 1.0f) st = push_own(s, &brisk_stage_top_p_i, brisk_stage_top_p_new(p->top_p, p->min_keep), err);
            break;
        case K_MIN_P:
            if (!greedy && p->min_p > 0.0f) st = push_own(s, &brisk_stage_min_p_i, brisk_stage_min_p_new(p->min_p, p->min_keep), err);
            break;
        case K_XTC:
            if (p->xtc_probability > 0.0f && p->xtc_threshold <= 0.5f)
                st = push_own(s, &brisk_stage_xtc_i,
                              brisk_stage_xtc_new(p->xtc_probability, p->xtc_threshold, p->min_keep, s->p.seed), err);
            break;
        case K_TEMP: st = push_own(s, &brisk_stage_temp_i, brisk_stage_temp_new(p->temp), err); break;
        case K_COUNT: break;
        }
        if (st) return st;
    }
    return BRISK_OK;
}

static brisk_sampler *alloc_sampler(int32_t n_vocab) {
    brisk_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n_vocab = n_vocab;
    s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    s->probs = malloc((size_t)n_vocab * sizeof *s->probs);
    if (!s->cands || !s->probs) {
        brisk_sampler_free(s);
        return NULL;
    }
    return s;
}

brisk_status brisk_sampler_init(brisk_sampler **out, const brisk_sampler_params *p, int32_t n_vocab, brisk_error *err) {
    *out = NULL;
    brisk_status st = validate(p, n_vocab, err);
    if (st) return st;
    brisk_sampler *s = alloc_sampler(n_vocab);
    if (!s) return brisk_fail(err, BRISK_ERR_NOMEM, "sampler: out of memory for %d tokens", n_vocab);
    s->p = *p;
    s->p.samplers = NULL;
    s->p.logit_bias = NULL;
    s->p.n_logit_bias = 0;
    s->p.dry_breakers = NULL;
    s->p.n_dry_breakers = 0;
    if (p->seed == BRISK_SEED_RANDOM) s->p.seed = random_seed();
    if ((st = build(s, p, err))) {
        brisk_sampler_free(s);
        return st;
    }
    brisk_rng_seed(s->rng, s->p.seed, DRAW_STREAM);
    *out = s;
    return BRISK_OK;
}

void brisk_sampler_free(brisk_sampler *s) {
    if (!s) return;
    for (int32_t i = 0; i < s->n_stages; i++)
        if (s->stages[i].iface->free) s->stages[i].iface->free(s->stages[i].ctx);
    free(s->stages);
    free(s->cands);
    free(s->probs);
    free(s);
}

brisk_status brisk_sampler_clone(const brisk_sampler *s, brisk_sampler **out, brisk_error *err) {
    *out = NULL;
    for (int32_t i = 0; i < s->n_stages; i++)
        if (!s->stages[i].iface->clone)
            return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "sampler: stage '%s' cannot be cloned", s->stages[i].iface->name);
    brisk_sampler *c = alloc_sampler(s->n_vocab);
    if (!c) return brisk_fail(err, BRISK_ERR_NOMEM, "sampler: out of memory cloning");
    c->p = s->p;
    memcpy(c->rng, s->rng, sizeof c->rng);
    for (int32_t i = 0; i < s->n_stages; i++) {
        const stage *st = &s->stages[i];
        void *ctx = st->iface->clone(st->ctx);
        if ((!ctx && st->ctx) || push_stage(c, -1, st->iface, ctx, err) != BRISK_OK) {
            if (ctx && st->iface->free) st->iface->free(ctx);
            brisk_sampler_free(c);
            return brisk_fail(err, BRISK_ERR_NOMEM, "sampler: out of memory cloning stage '%s'", st->iface->name);
        }
        if (st->ctx == s->mask) c->mask = ctx;
    }
    *out = c;
    return BRISK_OK;
}

void brisk_sampler_reset(brisk_sampler *s) {
    brisk_rng_seed(s->rng, s->p.seed, DRAW_STREAM);
    for (int32_t i = 0; i < s->n_stages; i++)
        if (s->stages[i].iface->reset) s->stages[i].iface->reset(s->stages[i].ctx);
}

void brisk_sampler_accept(brisk_sampler *s, int32_t token) {
    for (int32_t i = 0; i < s->n_stages; i++)
        if (s->stages[i].iface->accept) s->stages[i].iface->accept(s->stages[i].ctx, token);
}

brisk_status brisk_sampler_add_stage(brisk_sampler *s, int32_t pos, const brisk_stage_i *iface, void *ctx, brisk_error *err) {
    if (!iface || !iface->apply) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler: a stage needs an apply function");
    return push_stage(s, pos, iface, ctx, err);
}

int32_t brisk_sampler_n_stages(const brisk_sampler *s) { return s->n_stages; }

const char *brisk_sampler_stage_name(const brisk_sampler *s, int32_t i) {
    return i >= 0 && i < s->n_stages ? s->stages[i].iface->name : NULL;
}

void brisk_sampler_set_mask(brisk_sampler *s, const brisk_mask *m) { brisk_stage_mask_set(s->mask, m); }

/* ---- applying the chain --------------------------------------------------------------------- */

/* Run every stage over all tokens; the survivors are left sorted in s->cands, their count returned,
 * and the pending temperature in *temp. */
static int32_t run_chain(brisk_sampler *s, const float *logits, float *temp) {
    brisk_token_data *c = s->cands;
    for (int32_t i = 0; i < s->n_vocab; i++) c[i] = (brisk_token_data){i, logits[i], 0.0f};
    brisk_token_array cur = {c, s->n_vocab, false};
    *temp = 1.0f;
    for (int32_t i = 0; i < s->n_stages && cur.size > 0; i++) {
        const stage *st = &s->stages[i];
        if (st->iface == &brisk_stage_temp_i) {
            brisk_stage_temp_apply_lazy(st->ctx, &cur, temp);
            continue;
        }
        if (*temp != 1.0f) {   /* a stage that reads logits after a temperature: apply it now */
            for (int32_t j = 0; j < cur.size; j++) cur.data[j].logit /= *temp;
            *temp = 1.0f;
        }
        st->iface->apply(st->ctx, &cur);
    }
    if (cur.data != c && cur.size > 0) memmove(c, cur.data, (size_t)cur.size * sizeof *c);
    brisk_cands_sort(&(brisk_token_array){c, cur.size, cur.sorted});
    return cur.size;
}

void brisk_sampler_dist(brisk_sampler *s, const float *logits, float *probs) {
    float temp;
    const int32_t n = run_chain(s, logits, &temp);
    const brisk_token_data *c = s->cands;
    memset(probs, 0, (size_t)s->n_vocab * sizeof(float));
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += exp(((double)c[i].logit - c[0].logit) / temp);
    for (int32_t i = 0; i < n; i++) probs[c[i].id] = (float)(exp(((double)c[i].logit - c[0].logit) / temp) / sum);
}

int32_t brisk_sampler_draw(brisk_sampler *s, const float *probs, int32_t n) {
    double r = brisk_sampler_uniform(s), cum = 0.0, total = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++) total += probs[i];
    r *= total;
    for (int32_t i = 0; i < n; i++) {
        if (probs[i] <= 0.0f) continue;
        cum += probs[i];
        last = i;
        if (r < cum) return i;
    }
    return last < 0 ? 0 : last;
}

int32_t brisk_sampler_sample(brisk_sampler *s, const float *logits) {
    brisk_sampler_dist(s, logits, s->probs);
    return brisk_sampler_draw(s, s->probs, s->n_vocab);
}

/* ---- logprobs ------------------------------------------------------------------------------- */

/* ids/lp as a heap with the worst kept candidate at the root */
static bool lp_worse(float la, int32_t ia, float lb, int32_t ib) { return la != lb ? la < lb : ia > ib; }

static void lp_sift(int32_t *ids, float *lp, int32_t k, int32_t i) {
    for (;;) {
        int32_t w = i;
        const int32_t l = 2 * i + 1, r = l + 1;
        if (l < k && lp_worse(lp[l], ids[l], lp[w], ids[w])) w = l;
        if (r < k && lp_worse(lp[r], ids[r], lp[w], ids[w])) w = r;
        if (w == i) return;
        const int32_t ti = ids[i];
        const float tl = lp[i];
        ids[i] = ids[w], lp[i] = lp[w];
        ids[w] = ti, lp[w] = tl;
        i = w;
    }
}

int32_t brisk_logprobs_top_k(const float *logits, int32_t n_vocab, int32_t k, int32_t *ids, float *logprobs) {
    if (k > n_vocab) k = n_vocab;
    if (k <= 0) return 0;
    float mx = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    const double lse = mx + log(sum);
    for (int32_t i = 0; i < k; i++) ids[i] = i, logprobs[i] = logits[i];
    for (int32_t i = k / 2 - 1; i >= 0; i--) lp_sift(ids, logprobs, k, i);
    for (int32_t i = k; i < n_vocab; i++)
        if (lp_worse(logprobs[0], ids[0], logits[i], i)) {
            ids[0] = i, logprobs[0] = logits[i];
            lp_sift(ids, logprobs, k, 0);
        }
    /* heap sort: repeatedly move the worst to the end */
    for (int32_t n = k - 1; n > 0; n--) {
        const int32_t ti = ids[0];
        const float tl = logprobs[0];
        ids[0] = ids[n], logprobs[0] = logprobs[n];
        ids[n] = ti, logprobs[n] = tl;
        lp_sift(ids, logprobs, n, 0);
    }
    for (int32_t i = 0; i < k; i++) logprobs[i] = (float)((double)logprobs[i] - lse);
    return k;
}

/* ---- saved state (KV save/restore) ------------------------------------------------------------
 * seed (u64), the draw's RNG (4 x u64), the stage count (u32), then per stage its name (u32 length
 * and the bytes) and its state (u32 length and the bytes, stages.h). Native little-endian. */

#define STATE_NAME_MAX 64

brisk_status brisk_sampler_state_size(const brisk_sampler *s, size_t *bytes, brisk_error *err) {
    size_t n = 8 + 32 + 4;
    for (int32_t i = 0; i < s->n_stages; i++) {
        const stage *st = &s->stages[i];
        const size_t b = brisk_stage_state_size(st->iface, st->ctx);
        if (b == SIZE_MAX)
            return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "sampler: stage %d '%s' cannot be saved%s", i, st->iface->name,
                              st->iface == &brisk_stage_mask_i ? " while a mask is set (its constraint keeps its own state)"
                                                               : " (a custom stage has no serialization)");
        const size_t name = strlen(st->iface->name);
        if (name > STATE_NAME_MAX)
            return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "sampler: stage %d's name is longer than %d bytes", i, STATE_NAME_MAX);
        n += 8 + name + b;
    }
    *bytes = n;
    return BRISK_OK;
}

void brisk_sampler_state_write(const brisk_sampler *s, uint8_t *out) {
    memcpy(out, &s->p.seed, 8);
    memcpy(out + 8, s->rng, 32);
    const uint32_t n = (uint32_t)s->n_stages;
    memcpy(out + 40, &n, 4);
    out += 44;
    for (int32_t i = 0; i < s->n_stages; i++) {
        const stage *st = &s->stages[i];
        const uint32_t name = (uint32_t)strlen(st->iface->name), b = (uint32_t)brisk_stage_state_size(st->iface, st->ctx);
        memcpy(out, &name, 4);
        memcpy(out + 4, st->iface->name, name);
        out += 4 + name;
        memcpy(out, &b, 4);
        brisk_stage_state_write(st->iface, st->ctx, out + 4);
        out += 4 + b;
    }
}

/* One pass over the state: with apply false it only checks (everything a later apply needs), with
 * apply true it checks again and takes it; callers check first so that apply cannot fail half way. */
static brisk_status state_pass(brisk_sampler *s, const uint8_t *buf, size_t len, bool apply, brisk_error *err) {
    if (len < 44) return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: %zu bytes, shorter than its 44-byte header", len);
    uint32_t n;
    memcpy(&n, buf + 40, 4);
    if (n != (uint32_t)s->n_stages)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler state: saved from a chain of %u stages, this sampler has %d", n, s->n_stages);
    size_t off = 44;
    for (int32_t i = 0; i < s->n_stages; i++) {
        const stage *st = &s->stages[i];
        uint32_t name, b;
        if (len - off < 4) return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: truncated at stage %d's name", i);
        memcpy(&name, buf + off, 4);
        off += 4;
        if (name > STATE_NAME_MAX || len - off < name)
            return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: stage %d: name of %u bytes (at most %d, %zu left)", i, name,
                              STATE_NAME_MAX, len - off);
        if (strlen(st->iface->name) != name || memcmp(st->iface->name, buf + off, name)) {
            char shown[STATE_NAME_MAX + 1];   /* the file's bytes, printable ones only: the message stays one line */
            for (uint32_t k = 0; k < name; k++) shown[k] = buf[off + k] >= 0x20 && buf[off + k] < 0x7f ? (char)buf[off + k] : '?';
            shown[name] = 0;
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler state: stage %d is '%s' in the saved chain, '%s' in this sampler", i,
                              shown, st->iface->name);
        }
        off += name;
        if (len - off < 4) return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: truncated at stage %d's state", i);
        memcpy(&b, buf + off, 4);
        off += 4;
        if (len - off < b)
            return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: stage %d '%s': %u bytes of state, %zu left", i, st->iface->name, b,
                              len - off);
        brisk_status r = brisk_stage_state_read(st->iface, st->ctx, buf + off, b, apply, err);
        if (r) return r;
        off += b;
    }
    if (off != len) return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: %zu bytes left over after the last stage", len - off);
    if (apply) {
        memcpy(&s->p.seed, buf, 8);
        memcpy(s->rng, buf + 8, 32);
    }
    return BRISK_OK;
}

brisk_status brisk_sampler_state_check(const brisk_sampler *s, const uint8_t *buf, size_t len, brisk_error *err) {
    return state_pass((brisk_sampler *)s, buf, len, false, err);   /* apply false: nothing is written */
}

brisk_status brisk_sampler_state_load(brisk_sampler *s, const uint8_t *buf, size_t len, brisk_error *err) {
    brisk_status st = state_pass(s, buf, len, false, err);
    return st ? st : state_pass(s, buf, len, true, err);
}
