/* sample: penalties, top-k, top-p, min-p, temperature and the seeded draw. */
#include "sample/sample.h"

#include <math.h>
#include <sys/random.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    int32_t id;
    float logit;
} cand;

struct brisk_sampler {
    brisk_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];
    int32_t *history;     /* ring of the last repeat_last_n tokens */
    int32_t hist_len, hist_head;
    int32_t *counts;      /* [n_vocab] scratch */
    cand *cands;          /* [n_vocab] scratch */
    float *work;          /* [n_vocab] scratch */
    float *probs;         /* [n_vocab] scratch for brisk_sampler_sample */
};

brisk_sampler_params brisk_sampler_default_params(void) {
    return (brisk_sampler_params){.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.0f,
                                  .repeat_last_n = 64, .freq_penalty = 0.0f, .presence_penalty = 0.0f,
                                  .repeat_mode = BRISK_REPEAT_CLASSIC, .seed = BRISK_SEED_RANDOM};
}

/* ---- RNG: splitmix64 seeding, xoshiro256** ------------------------------------------------ */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A seed for BRISK_SEED_RANDOM: the kernel's entropy, or the clock and the
 * address space's layout where getrandom is unavailable. Never returns
 * BRISK_SEED_RANDOM itself, so brisk_sampler_seed always names a usable seed. */
static uint64_t random_seed(void) {
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t mix = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&ts;
        x = splitmix64(&mix);
    }
    return x == BRISK_SEED_RANDOM ? 0 : x;
}

uint64_t brisk_sampler_seed(const brisk_sampler *s) { return s->p.seed; }

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t s[4]) {
    const uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double brisk_sampler_uniform(brisk_sampler *s) { return (double)(rng_next(s->rng) >> 11) * 0x1.0p-53; }

/* ---- lifecycle ------------------------------------------------------------------------------ */

brisk_status brisk_sampler_init(brisk_sampler **out, const brisk_sampler_params *p, int32_t n_vocab, brisk_error *err) {
    *out = NULL;
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
    brisk_sampler *s = calloc(1, sizeof *s);
    if (!s) return brisk_fail(err, BRISK_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    if (p->seed == BRISK_SEED_RANDOM) s->p.seed = random_seed();
    s->history = malloc((size_t)(p->repeat_last_n ? p->repeat_last_n : 1) * sizeof(int32_t));
    s->counts = calloc((size_t)n_vocab, sizeof(int32_t));
    s->cands = malloc((size_t)n_vocab * sizeof(cand));
    s->work = malloc((size_t)n_vocab * sizeof(float));
    s->probs = malloc((size_t)n_vocab * sizeof(float));
    if (!s->history || !s->counts || !s->cands || !s->work || !s->probs) {
        brisk_sampler_free(s);
        return brisk_fail(err, BRISK_ERR_NOMEM, "sampler: out of memory for %d tokens", n_vocab);
    }
    brisk_sampler_reset(s);
    *out = s;
    return BRISK_OK;
}

void brisk_sampler_free(brisk_sampler *s) {
    if (!s) return;
    free(s->history);
    free(s->counts);
    free(s->cands);
    free(s->work);
    free(s->probs);
    free(s);
}

void brisk_sampler_reset(brisk_sampler *s) {
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    s->hist_len = s->hist_head = 0;
}

void brisk_sampler_accept(brisk_sampler *s, int32_t token) {
    const int32_t n = s->p.repeat_last_n;
    if (n == 0) return;
    s->history[s->hist_head] = token;
    s->hist_head = (s->hist_head + 1) % n;
    if (s->hist_len < n) s->hist_len++;
}

/* ---- the chain ------------------------------------------------------------------------------ */

static int cmp_cand_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id - y->id;   /* deterministic ties: lower id first */
}

/* Heap of the k best candidates with the one that sorts last at the root:
 * after one pass over the vocabulary, c[0..k) holds exactly the first k of
 * the full descending sort (cmp_cand_desc is a total order: ties by id), and
 * sorting them gives the same prefix bit for bit, in O(V log k) instead of
 * O(V log V). */
static void heap_sift_down(cand *h, int32_t k, int32_t i) {
    for (;;) {
        int32_t w = i;
        const int32_t l = 2 * i + 1, r = l + 1;
        if (l < k && cmp_cand_desc(&h[l], &h[w]) > 0) w = l;
        if (r < k && cmp_cand_desc(&h[r], &h[w]) > 0) w = r;
        if (w == i) return;
        const cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static int32_t select_top_k(cand *c, const float *logits, int32_t n_vocab, int32_t k) {
    for (int32_t i = 0; i < k; i++) c[i] = (cand){i, logits[i]};
    for (int32_t i = k / 2 - 1; i >= 0; i--) heap_sift_down(c, k, i);
    for (int32_t i = k; i < n_vocab; i++) {
        const cand x = {i, logits[i]};
        if (cmp_cand_desc(&x, &c[0]) < 0) {
            c[0] = x;
            heap_sift_down(c, k, 0);
        }
    }
    qsort(c, (size_t)k, sizeof *c, cmp_cand_desc);
    return k;
}

static void apply_penalties(brisk_sampler *s, float *logits) {
    const brisk_sampler_params *p = &s->p;
    if (s->hist_len == 0 || (p->repeat_penalty == 1.0f && p->freq_penalty == 0.0f && p->presence_penalty == 0.0f)) return;
    for (int32_t i = 0; i < s->hist_len; i++) {
        const int32_t t = s->history[i];
        if (t >= 0 && t < s->n_vocab) s->counts[t]++;
    }
    if (p->repeat_mode == BRISK_REPEAT_LOGPROB) {
        /* move to log-probabilities so the penalty has a fixed meaning */
        float mx = -INFINITY;
        for (int32_t i = 0; i < s->n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
        double sum = 0.0;
        for (int32_t i = 0; i < s->n_vocab; i++) sum += exp((double)logits[i] - mx);
        const float lse = mx + (float)log(sum);
        for (int32_t i = 0; i < s->n_vocab; i++) logits[i] -= lse;
    }
    const float log_theta = logf(p->repeat_penalty);
    for (int32_t i = 0; i < s->hist_len; i++) {
        const int32_t t = s->history[i];
        if (t < 0 || t >= s->n_vocab || s->counts[t] == 0) continue;
        float *l = &logits[t];
        if (p->repeat_mode == BRISK_REPEAT_LOGPROB) *l -= log_theta;
        else if (*l <= 0.0f) *l *= p->repeat_penalty;
        else *l /= p->repeat_penalty;
        *l -= (float)s->counts[t] * p->freq_penalty + p->presence_penalty;
        s->counts[t] = 0;   /* each distinct token once */
    }
}

/* Produce the filtered candidate list (sorted, descending) and its softmax. */
void brisk_sampler_dist(brisk_sampler *s, const float *logits_in, float *probs) {
    const brisk_sampler_params *p = &s->p;
    float *logits = s->work;
    memcpy(logits, logits_in, (size_t)s->n_vocab * sizeof(float));
    apply_penalties(s, logits);
    memset(probs, 0, (size_t)s->n_vocab * sizeof(float));
    if (p->temp <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < s->n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        probs[best] = 1.0f;
        return;
    }
    cand *c = s->cands;
    int32_t n = s->n_vocab;
    if (p->top_k > 0 && p->top_k < n) n = select_top_k(c, logits, s->n_vocab, p->top_k);
    else {
        for (int32_t i = 0; i < n; i++) c[i] = (cand){i, logits[i]};
        qsort(c, (size_t)n, sizeof *c, cmp_cand_desc);
    }
    if (p->top_p < 1.0f) {
        /* softmax over the survivors, keep the smallest prefix reaching top_p */
        double sum = 0.0;
        for (int32_t i = 0; i < n; i++) sum += exp((double)c[i].logit - c[0].logit);
        double cum = 0.0;
        for (int32_t i = 0; i < n; i++) {
            cum += exp((double)c[i].logit - c[0].logit) / sum;
            if (cum >= p->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) {
        const float floor_logit = c[0].logit + logf(p->min_p);
        int32_t keep = 1;
        while (keep < n && c[keep].logit >= floor_logit) keep++;
        n = keep;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += exp(((double)c[i].logit - c[0].logit) / p->temp);
    for (int32_t i = 0; i < n; i++) probs[c[i].id] = (float)(exp(((double)c[i].logit - c[0].logit) / p->temp) / sum);
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
