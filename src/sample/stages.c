/* stages: the built-in stages of the sampler chain (see stages.h). The
 * penalties, top-k, top-p, min-p and temperature stages keep the arithmetic
 * the sampler had before it became a chain (double softmax sums, ties by
 * lower id), so the default chain draws the same tokens bit for bit; the
 * stages llama.cpp added later (typical, top-n-sigma, XTC, mirostat v2)
 * follow llama.cpp's float arithmetic so that their candidate sets match its
 * on recorded logits (tests/test_sampler_peer.c). */
#include "sample/stages.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared helpers -------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void brisk_rng_seed(uint64_t s[4], uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ stream;
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t brisk_rng_next(uint64_t s[4]) {
    const uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

int brisk_cand_cmp(const void *a, const void *b) {
    const brisk_token_data *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id - y->id;
}

void brisk_cands_sort(brisk_token_array *cur) {
    if (!cur->sorted) qsort(cur->data, (size_t)cur->size, sizeof *cur->data, brisk_cand_cmp);
    cur->sorted = true;
}

void brisk_cands_softmax_f(brisk_token_array *cur, bool sort) {
    if (cur->size == 0) return;
    if (sort) brisk_cands_sort(cur);
    float mx = cur->data[0].logit;
    for (int32_t i = 1; i < cur->size; i++) mx = cur->data[i].logit > mx ? cur->data[i].logit : mx;
    float sum = 0.0f;
    for (int32_t i = 0; i < cur->size; i++) {
        cur->data[i].p = expf(cur->data[i].logit - mx);
        sum += cur->data[i].p;
    }
    for (int32_t i = 0; i < cur->size; i++) cur->data[i].p /= sum;
}

/* A stage context that is one flat block (no pointers inside) clones by copy. */
typedef struct flat_hdr {
    size_t bytes;   /* the whole block, this header included */
} flat_hdr;

static void *flat_new(size_t bytes) {
    flat_hdr *h = calloc(1, bytes);
    if (h) h->bytes = bytes;
    return h;
}

static void *flat_clone(const void *ctx) {
    const flat_hdr *h = ctx;
    void *c = malloc(h->bytes);
    if (c) memcpy(c, h, h->bytes);
    return c;
}

/* ---- logit bias ------------------------------------------------------------------------------ */

typedef struct logit_bias_ctx {
    flat_hdr h;
    int32_t n;
    brisk_logit_bias b[];   /* [n] */
} logit_bias_ctx;

void *brisk_stage_logit_bias_new(const brisk_logit_bias *b, int32_t n, int32_t n_vocab) {
    (void)n_vocab;
    logit_bias_ctx *c = flat_new(sizeof *c + (size_t)n * sizeof *b);
    if (!c) return NULL;
    c->n = n;
    if (n) memcpy(c->b, b, (size_t)n * sizeof *b);
    return c;
}

static void logit_bias_apply(void *ctx, brisk_token_array *cur) {
    const logit_bias_ctx *c = ctx;
    for (int32_t j = 0; j < c->n; j++) {
        const int32_t t = c->b[j].token;
        if (t < cur->size && cur->data[t].id == t) {   /* still in id order: direct */
            cur->data[t].logit += c->b[j].bias;
            continue;
        }
        for (int32_t i = 0; i < cur->size; i++)
            if (cur->data[i].id == t) {
                cur->data[i].logit += c->b[j].bias;
                break;
            }
    }
    if (c->n) cur->sorted = false;
}

const brisk_stage_i brisk_stage_logit_bias_i = {"logit_bias", logit_bias_apply, NULL, NULL, flat_clone, free};

/* ---- mask ------------------------------------------------------------------------------------ */

typedef struct mask_ctx {
    flat_hdr h;
    brisk_mask m;          /* m.fill == NULL: no mask */
    int32_t n_vocab, n_words;
    uint32_t allowed[];    /* [n_words] */
} mask_ctx;

void *brisk_stage_mask_new(int32_t n_vocab) {
    const int32_t w = (n_vocab + 31) / 32;
    mask_ctx *c = flat_new(sizeof *c + (size_t)w * sizeof(uint32_t));
    if (!c) return NULL;
    c->n_vocab = n_vocab;
    c->n_words = w;
    return c;
}

void brisk_stage_mask_set(void *ctx, const brisk_mask *m) {
    mask_ctx *c = ctx;
    if (m && m->fill) c->m = *m;
    else memset(&c->m, 0, sizeof c->m);
}

static void mask_apply(void *ctx, brisk_token_array *cur) {
    mask_ctx *c = ctx;
    if (!c->m.fill) return;
    memset(c->allowed, 0, (size_t)c->n_words * sizeof(uint32_t));
    c->m.fill(c->m.user, c->allowed, c->n_vocab);
    int32_t n = 0;
    for (int32_t i = 0; i < cur->size; i++) {
        const int32_t t = cur->data[i].id;
        if (c->allowed[t >> 5] >> (t & 31) & 1u) cur->data[n++] = cur->data[i];
    }
    cur->size = n;   /* order kept: sorted stays what it was */
}

static void mask_accept(void *ctx, int32_t token) {
    mask_ctx *c = ctx;
    if (c->m.fill && c->m.accept) c->m.accept(c->m.user, token);
}

static void mask_reset(void *ctx) {
    mask_ctx *c = ctx;
    if (c->m.fill && c->m.reset) c->m.reset(c->m.user);
}

const brisk_stage_i brisk_stage_mask_i = {"mask", mask_apply, mask_accept, mask_reset, flat_clone, free};

/* ---- penalties: repetition (classic or logprob), frequency, presence ---------------------------- */

typedef struct penalties_ctx {
    flat_hdr h;
    float repeat, freq, present;
    brisk_repeat_mode mode;
    int32_t last_n, n_vocab;
    int32_t len, head;     /* ring of the last last_n accepted tokens */
    int32_t *history;      /* [max(last_n, 1)], inside this block */
    int32_t *counts;       /* [n_vocab] scratch, all zero between applies, inside this block */
} penalties_ctx;

static void penalties_fix(penalties_ctx *c) {
    c->history = (int32_t *)(c + 1);
    c->counts = c->history + (c->last_n ? c->last_n : 1);
}

void *brisk_stage_penalties_new(const brisk_sampler_params *p, int32_t n_vocab) {
    const size_t nh = (size_t)(p->repeat_last_n ? p->repeat_last_n : 1);
    penalties_ctx *c = flat_new(sizeof *c + (nh + (size_t)n_vocab) * sizeof(int32_t));
    if (!c) return NULL;
    c->repeat = p->repeat_penalty;
    c->freq = p->freq_penalty;
    c->present = p->presence_penalty;
    c->mode = p->repeat_mode;
    c->last_n = p->repeat_last_n;
    c->n_vocab = n_vocab;
    penalties_fix(c);
    return c;
}

static void *penalties_clone(const void *ctx) {
    penalties_ctx *c = flat_clone(ctx);
    if (c) penalties_fix(c);
    return c;
}

static void penalties_accept(void *ctx, int32_t token) {
    penalties_ctx *c = ctx;
    if (c->last_n == 0) return;
    c->history[c->head] = token;
    c->head = (c->head + 1) % c->last_n;
    if (c->len < c->last_n) c->len++;
}

static void penalties_reset(void *ctx) {
    penalties_ctx *c = ctx;
    c->len = c->head = 0;
}

static void penalties_apply(void *ctx, brisk_token_array *cur) {
    penalties_ctx *c = ctx;
    if (c->len == 0 || (c->repeat == 1.0f && c->freq == 0.0f && c->present == 0.0f)) return;
    for (int32_t i = 0; i < c->len; i++) {
        const int32_t t = c->history[i];
        if (t >= 0 && t < c->n_vocab) c->counts[t]++;
    }
    brisk_token_data *d = cur->data;
    if (c->mode == BRISK_REPEAT_LOGPROB) {
        /* move to log-probabilities so the penalty has a fixed meaning */
        float mx = -INFINITY;
        for (int32_t i = 0; i < cur->size; i++) mx = d[i].logit > mx ? d[i].logit : mx;
        double sum = 0.0;
        for (int32_t i = 0; i < cur->size; i++) sum += exp((double)d[i].logit - mx);
        const float lse = mx + (float)log(sum);
        for (int32_t i = 0; i < cur->size; i++) d[i].logit -= lse;
    }
    const float log_theta = logf(c->repeat);
    for (int32_t i = 0; i < cur->size; i++) {
        const int32_t n = c->counts[d[i].id];
        if (n == 0) continue;
        float *l = &d[i].logit;
        if (c->mode == BRISK_REPEAT_LOGPROB) *l -= log_theta;
        else if (*l <= 0.0f) *l *= c->repeat;
        else *l /= c->repeat;
        *l -= (float)n * c->freq + c->present;
    }
    for (int32_t i = 0; i < c->len; i++) {
        const int32_t t = c->history[i];
        if (t >= 0 && t < c->n_vocab) c->counts[t] = 0;
    }
    cur->sorted = false;
}

const brisk_stage_i brisk_stage_penalties_i = {"penalties", penalties_apply, penalties_accept, penalties_reset,
                                               penalties_clone, free};

/* ---- top-k ----------------------------------------------------------------------------------- */

typedef struct top_k_ctx {
    flat_hdr h;
    int32_t k;
} top_k_ctx;

void *brisk_stage_top_k_new(int32_t k) {
    top_k_ctx *c = flat_new(sizeof *c);
    if (c) c->k = k;
    return c;
}

/* Heap of the k best candidates with the one that sorts last at the root:
 * after one pass, c[0..k) holds exactly the first k of the full descending
 * sort (brisk_cand_cmp is a total order), and sorting them gives the same
 * prefix bit for bit, in O(V log k) instead of O(V log V). */
static void heap_sift_down(brisk_token_data *h, int32_t k, int32_t i) {
    for (;;) {
        int32_t w = i;
        const int32_t l = 2 * i + 1, r = l + 1;
        if (l < k && brisk_cand_cmp(&h[l], &h[w]) > 0) w = l;
        if (r < k && brisk_cand_cmp(&h[r], &h[w]) > 0) w = r;
        if (w == i) return;
        const brisk_token_data t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void top_k_apply(void *ctx, brisk_token_array *cur) {
    const int32_t k = ((top_k_ctx *)ctx)->k;
    if (k <= 0 || k >= cur->size) return;
    brisk_token_data *c = cur->data;
    if (!cur->sorted) {
        for (int32_t i = k / 2 - 1; i >= 0; i--) heap_sift_down(c, k, i);
        for (int32_t i = k; i < cur->size; i++)
            if (brisk_cand_cmp(&c[i], &c[0]) < 0) {
                c[0] = c[i];
                heap_sift_down(c, k, 0);
            }
        qsort(c, (size_t)k, sizeof *c, brisk_cand_cmp);
    }
    cur->size = k;
    cur->sorted = true;
}

const brisk_stage_i brisk_stage_top_k_i = {"top_k", top_k_apply, NULL, NULL, flat_clone, free};

/* ---- top-p and min-p ------------------------------------------------------------------------- */

typedef struct p_ctx {
    flat_hdr h;
    float p;
    int32_t min_keep;
} p_ctx;

static void *p_new(float p, int32_t min_keep) {
    p_ctx *c = flat_new(sizeof *c);
    if (c) {
        c->p = p;
        c->min_keep = min_keep;
    }
    return c;
}

void *brisk_stage_top_p_new(float p, int32_t min_keep) { return p_new(p, min_keep); }
void *brisk_stage_min_p_new(float p, int32_t min_keep) { return p_new(p, min_keep); }

/* The smallest prefix of the sorted softmax reaching p (and min_keep). */
static void top_p_apply(void *ctx, brisk_token_array *cur) {
    const p_ctx *c = ctx;
    if (c->p >= 1.0f || cur->size == 0) return;
    brisk_cands_sort(cur);
    const brisk_token_data *d = cur->data;
    double sum = 0.0;
    for (int32_t i = 0; i < cur->size; i++) sum += exp((double)d[i].logit - d[0].logit);
    double cum = 0.0;
    for (int32_t i = 0; i < cur->size; i++) {
        cum += exp((double)d[i].logit - d[0].logit) / sum;
        if (cum >= c->p && i + 1 >= c->min_keep) {
            cur->size = i + 1;
            return;
        }
    }
}

/* Tokens with p >= min_p * p_max, i.e. logit >= l_max + ln(min_p). */
static void min_p_apply(void *ctx, brisk_token_array *cur) {
    const p_ctx *c = ctx;
    if (c->p <= 0.0f || cur->size == 0) return;
    brisk_cands_sort(cur);
    const brisk_token_data *d = cur->data;
    const float floor_logit = d[0].logit + logf(c->p);
    int32_t keep = 1;
    while (keep < cur->size && (d[keep].logit >= floor_logit || keep < c->min_keep)) keep++;
    cur->size = keep;
}

const brisk_stage_i brisk_stage_top_p_i = {"top_p", top_p_apply, NULL, NULL, flat_clone, free};
const brisk_stage_i brisk_stage_min_p_i = {"min_p", min_p_apply, NULL, NULL, flat_clone, free};

/* ---- typical (Meister et al. 2022) ------------------------------------------------------------ */

typedef struct typ_score {
    float score;   /* |-ln p - H| */
    int32_t idx;   /* into the sorted candidates */
} typ_score;

typedef struct typical_ctx {
    flat_hdr h;
    float p;
    int32_t min_keep, n_vocab;
    typ_score *scores;      /* [n_vocab], inside this block */
    brisk_token_data *tmp;  /* [n_vocab], inside this block */
} typical_ctx;

static void typical_fix(typical_ctx *c) {
    c->scores = (typ_score *)(c + 1);
    c->tmp = (brisk_token_data *)(c->scores + c->n_vocab);
}

void *brisk_stage_typical_new(float p, int32_t min_keep, int32_t n_vocab) {
    typical_ctx *c = flat_new(sizeof *c + (size_t)n_vocab * (sizeof(typ_score) + sizeof(brisk_token_data)));
    if (!c) return NULL;
    c->p = p;
    c->min_keep = min_keep;
    c->n_vocab = n_vocab;
    typical_fix(c);
    return c;
}

static void *typical_clone(const void *ctx) {
    typical_ctx *c = flat_clone(ctx);
    if (c) typical_fix(c);
    return c;
}

static int typ_cmp(const void *a, const void *b) {
    const typ_score *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    return x->idx - y->idx;   /* llama.cpp's std::sort leaves ties unspecified; ours go by probability */
}

/* Keep the tokens whose surprise is closest to the entropy until their mass exceeds p. */
static void typical_apply(void *ctx, brisk_token_array *cur) {
    typical_ctx *c = ctx;
    if (c->p >= 1.0f || cur->size == 0) return;
    brisk_cands_softmax_f(cur, true);
    const brisk_token_data *d = cur->data;
    float entropy = 0.0f;
    for (int32_t i = 0; i < cur->size; i++) entropy += -d[i].p * logf(d[i].p);
    for (int32_t i = 0; i < cur->size; i++) c->scores[i] = (typ_score){fabsf(-logf(d[i].p) - entropy), i};
    qsort(c->scores, (size_t)cur->size, sizeof *c->scores, typ_cmp);
    float cum = 0.0f;
    int32_t last = cur->size;
    for (int32_t i = 0; i < cur->size; i++) {
        cum += d[c->scores[i].idx].p;
        if (cum > c->p && (c->min_keep == 0 || i >= c->min_keep - 1)) {
            last = i + 1;
            break;
        }
    }
    for (int32_t i = 0; i < last; i++) c->tmp[i] = d[c->scores[i].idx];
    memcpy(cur->data, c->tmp, (size_t)last * sizeof *c->tmp);
    cur->size = last;
    cur->sorted = false;
}

const brisk_stage_i brisk_stage_typical_i = {"typ_p", typical_apply, NULL, NULL, typical_clone, free};

/* ---- top-n-sigma (Tang et al. 2024) ----------------------------------------------------------- */

typedef struct sigma_ctx {
    flat_hdr h;
    float n;
} sigma_ctx;

void *brisk_stage_top_n_sigma_new(float n) {
    sigma_ctx *c = flat_new(sizeof *c);
    if (c) c->n = n;
    return c;
}

/* Keep logits >= max - n * std over the finite logits. llama.cpp sets the
 * others to -inf and keeps them in the set; removing them gives the same
 * distribution without 0 * log 0 in a later typical stage. */
static void top_n_sigma_apply(void *ctx, brisk_token_array *cur) {
    const float n = ((sigma_ctx *)ctx)->n;
    if (n <= 0.0f || cur->size <= 1) return;
    brisk_token_data *d = cur->data;
    float mx = d[0].logit, sum = 0.0f;
    int32_t valid = 0;
    for (int32_t i = 0; i < cur->size; i++)
        if (d[i].logit != -INFINITY) {
            mx = d[i].logit > mx ? d[i].logit : mx;
            sum += d[i].logit;
            valid++;
        }
    const float mean = valid > 0 ? sum / (float)valid : 0.0f;
    float acc = 0.0f;
    for (int32_t i = 0; i < cur->size; i++)
        if (d[i].logit != -INFINITY) acc += (float)pow(d[i].logit - mean, 2);
    const float sd = valid > 0 ? (float)sqrt(acc / (float)valid) : 0.0f;
    const float floor_logit = mx - n * sd;
    int32_t k = 0;
    for (int32_t i = 0; i < cur->size; i++)
        if (!(d[i].logit < floor_logit)) d[k++] = d[i];
    cur->size = k;   /* order kept */
}

const brisk_stage_i brisk_stage_top_n_sigma_i = {"top_n_sigma", top_n_sigma_apply, NULL, NULL, flat_clone, free};

/* ---- XTC: exclude top choices ---------------------------------------------------------------- */

#define XTC_STREAM 0x58544321ull   /* its own RNG: turning XTC on leaves the draw's stream alone */

typedef struct xtc_ctx {
    flat_hdr h;
    float probability, threshold;
    int32_t min_keep;
    uint64_t seed, rng[4];
} xtc_ctx;

void *brisk_stage_xtc_new(float probability, float threshold, int32_t min_keep, uint64_t seed) {
    xtc_ctx *c = flat_new(sizeof *c);
    if (!c) return NULL;
    c->probability = probability;
    c->threshold = threshold;
    c->min_keep = min_keep;
    c->seed = seed;
    brisk_rng_seed(c->rng, seed, XTC_STREAM);
    return c;
}

static void xtc_reset(void *ctx) {
    xtc_ctx *c = ctx;
    brisk_rng_seed(c->rng, c->seed, XTC_STREAM);
}

/* With probability `probability`, remove every token with p >= threshold
 * except the least likely of them (when at least two reach it). */
static void xtc_apply(void *ctx, brisk_token_array *cur) {
    xtc_ctx *c = ctx;
    if (c->probability <= 0.0f || c->threshold > 0.5f || cur->size < 2) return;
    const float chance = (float)((double)(brisk_rng_next(c->rng) >> 40) * 0x1.0p-24);   /* [0, 1) */
    if (chance > c->probability) return;
    brisk_cands_softmax_f(cur, true);
    int32_t last = 0;
    for (int32_t i = 0; i < cur->size && cur->data[i].p >= c->threshold; i++) last = i;
    if (cur->size - last >= c->min_keep && last > 0) {
        memmove(cur->data, cur->data + last, (size_t)(cur->size - last) * sizeof *cur->data);
        cur->size -= last;
    }
}

const brisk_stage_i brisk_stage_xtc_i = {"xtc", xtc_apply, NULL, xtc_reset, flat_clone, free};

/* ---- temperature ----------------------------------------------------------------------------- */

typedef struct temp_ctx {
    flat_hdr h;
    float temp;
} temp_ctx;

void *brisk_stage_temp_new(float temp) {
    temp_ctx *c = flat_new(sizeof *c);
    if (c) c->temp = temp;
    return c;
}

static void temp_settle(brisk_token_array *cur, float *temp) {
    if (*temp == 1.0f) return;
    for (int32_t i = 0; i < cur->size; i++) cur->data[i].logit /= *temp;
    *temp = 1.0f;
}

void brisk_stage_temp_apply_lazy(const void *ctx, brisk_token_array *cur, float *temp) {
    const float t = ((const temp_ctx *)ctx)->temp;
    temp_settle(cur, temp);
    if (t > 0.0f) {
        *temp = t;
        return;
    }
    /* greedy: the first best in the current order; ties by lower id */
    if (cur->size == 0) return;
    int32_t best = 0;
    for (int32_t i = 1; i < cur->size; i++)
        if (brisk_cand_cmp(&cur->data[i], &cur->data[best]) < 0) best = i;
    cur->data[0] = cur->data[best];
    cur->size = 1;
    cur->sorted = true;
}

/* Only reached when the chain applies it eagerly (a caller that ran the
 * vtable itself): the same result as the lazy form, settled. */
static void temp_apply(void *ctx, brisk_token_array *cur) {
    float t = 1.0f;
    brisk_stage_temp_apply_lazy(ctx, cur, &t);
    temp_settle(cur, &t);
}

const brisk_stage_i brisk_stage_temp_i = {"temperature", temp_apply, NULL, NULL, flat_clone, free};

/* ---- mirostat v2 (Basu et al. 2021) ------------------------------------------------------------ */

typedef struct mirostat2_ctx {
    flat_hdr h;
    float tau, eta, mu;
    int32_t n_vocab, n_last;   /* n_last: the candidates of the last apply (0: none pending) */
    brisk_token_data *last;    /* [n_vocab], inside this block: their renormalised p */
} mirostat2_ctx;

static void mirostat2_fix(mirostat2_ctx *c) { c->last = (brisk_token_data *)(c + 1); }

void *brisk_stage_mirostat2_new(float tau, float eta, int32_t n_vocab) {
    mirostat2_ctx *c = flat_new(sizeof *c + (size_t)n_vocab * sizeof(brisk_token_data));
    if (!c) return NULL;
    c->tau = tau;
    c->eta = eta;
    c->mu = 2.0f * tau;
    c->n_vocab = n_vocab;
    mirostat2_fix(c);
    return c;
}

static void *mirostat2_clone(const void *ctx) {
    mirostat2_ctx *c = flat_clone(ctx);
    if (c) mirostat2_fix(c);
    return c;
}

/* Keep the tokens whose surprise -log2 p is at most mu (at least one). The
 * draw is the chain's; mu moves when the drawn token is accepted. */
static void mirostat2_apply(void *ctx, brisk_token_array *cur) {
    mirostat2_ctx *c = ctx;
    c->n_last = 0;
    if (cur->size == 0) return;
    brisk_cands_softmax_f(cur, true);
    int32_t n = 0;
    while (n < cur->size && !(-log2f(cur->data[n].p) > c->mu)) n++;
    cur->size = n ? n : 1;
    brisk_cands_softmax_f(cur, true);
    memcpy(c->last, cur->data, (size_t)cur->size * sizeof *cur->data);
    c->n_last = cur->size;
}

/* llama.cpp updates mu right after its own draw; here the drawn token comes
 * back through accept, so the speculative verifier (which draws itself)
 * moves mu exactly as plain sampling does. */
static void mirostat2_accept(void *ctx, int32_t token) {
    mirostat2_ctx *c = ctx;
    for (int32_t i = 0; i < c->n_last; i++)
        if (c->last[i].id == token) {
            const float e = -log2f(c->last[i].p) - c->tau;
            c->mu = c->mu - c->eta * e;
            break;
        }
    c->n_last = 0;
}

static void mirostat2_reset(void *ctx) {
    mirostat2_ctx *c = ctx;
    c->mu = 2.0f * c->tau;
    c->n_last = 0;
}

const brisk_stage_i brisk_stage_mirostat2_i = {"mirostat_v2", mirostat2_apply, mirostat2_accept, mirostat2_reset,
                                               mirostat2_clone, free};

/* ---- saved state ---------------------------------------------------------------------------- */

static void put32(uint8_t **p, const void *v) { memcpy(*p, v, 4), *p += 4; }
static int32_t get_i32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }

/* A history ring (penalties, DRY): last_n, len, head, then the whole ring of last_n tokens. */
size_t brisk_ring_state_size(int32_t last_n) { return 12 + 4 * (size_t)last_n; }

void brisk_ring_state_write(int32_t last_n, int32_t len, int32_t head, const int32_t *ring, uint8_t *out) {
    put32(&out, &last_n);
    put32(&out, &len);
    put32(&out, &head);
    if (last_n) memcpy(out, ring, 4 * (size_t)last_n);
}

/* The ring is filled in order until it is full (accept writes ring[head], then head moves on), so
 * head == len while len < last_n, and the tokens read are ring[0, len) (all of it once full): each
 * must be in [0, n_vocab), since DRY indexes tables with them. */
brisk_status brisk_ring_state_read(const char *stage, int32_t last_n, int32_t n_vocab, int32_t *len, int32_t *head, int32_t *ring,
                                   const uint8_t *in, size_t n, bool apply, brisk_error *err) {
    if (n < 12) return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: stage '%s': %zu bytes, a ring needs 12 or more", stage, n);
    const int32_t ln = get_i32(in), l = get_i32(in + 4), h = get_i32(in + 8);
    if (ln != last_n)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sampler state: stage '%s' remembers %d tokens, this sampler %d", stage, ln, last_n);
    if (n != brisk_ring_state_size(last_n))
        return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: stage '%s': %zu bytes for a ring of %d, expected %zu", stage, n, last_n,
                          brisk_ring_state_size(last_n));
    if (l < 0 || l > last_n || h < 0 || h >= BRISK_MAX(last_n, 1) || (l < last_n && h != l))
        return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: stage '%s': ring length %d, head %d out of range for %d", stage, l, h,
                          last_n);
    for (int32_t i = 0; i < l; i++) {
        const int32_t t = get_i32(in + 12 + 4 * (size_t)i);
        if (t < 0 || t >= n_vocab)
            return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: stage '%s': remembered token %d is %d, outside the vocabulary (%d)",
                              stage, i, t, n_vocab);
    }
    if (!apply) return BRISK_OK;
    *len = l;
    *head = h;
    if (last_n) memcpy(ring, in + 12, 4 * (size_t)last_n);
    return BRISK_OK;
}

size_t brisk_stage_state_size(const brisk_stage_i *iface, const void *ctx) {
    if (iface == &brisk_stage_penalties_i) return brisk_ring_state_size(((const penalties_ctx *)ctx)->last_n);
    if (iface == &brisk_stage_dry_i) return brisk_stage_dry_state_size(ctx);
    if (iface == &brisk_stage_xtc_i) return 5 * sizeof(uint64_t);
    if (iface == &brisk_stage_mirostat2_i) return 8 + 12 * (size_t)((const mirostat2_ctx *)ctx)->n_last;
    if (iface == &brisk_stage_mask_i) return ((const mask_ctx *)ctx)->m.fill ? SIZE_MAX : 0;
    if (iface == &brisk_stage_logit_bias_i || iface == &brisk_stage_top_k_i || iface == &brisk_stage_top_p_i ||
        iface == &brisk_stage_min_p_i || iface == &brisk_stage_typical_i || iface == &brisk_stage_top_n_sigma_i ||
        iface == &brisk_stage_temp_i)
        return 0;
    return SIZE_MAX;
}

void brisk_stage_state_write(const brisk_stage_i *iface, const void *ctx, uint8_t *out) {
    if (iface == &brisk_stage_penalties_i) {
        const penalties_ctx *c = ctx;
        brisk_ring_state_write(c->last_n, c->len, c->head, c->history, out);
    } else if (iface == &brisk_stage_dry_i) {
        brisk_stage_dry_state_write(ctx, out);
    } else if (iface == &brisk_stage_xtc_i) {
        const xtc_ctx *c = ctx;
        memcpy(out, &c->seed, 8);
        memcpy(out + 8, c->rng, 32);
    } else if (iface == &brisk_stage_mirostat2_i) {
        const mirostat2_ctx *c = ctx;
        put32(&out, &c->mu);
        put32(&out, &c->n_last);
        for (int32_t i = 0; i < c->n_last; i++) {
            put32(&out, &c->last[i].id);
            put32(&out, &c->last[i].logit);
            put32(&out, &c->last[i].p);
        }
    }
}

brisk_status brisk_stage_state_read(const brisk_stage_i *iface, void *ctx, const uint8_t *in, size_t len, bool apply,
                                    brisk_error *err) {
    const size_t want = brisk_stage_state_size(iface, ctx);
    if (want == SIZE_MAX)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "sampler state: stage '%s' has no saved form%s", iface->name,
                          iface == &brisk_stage_mask_i ? " while a mask is set (its constraint keeps its own state)" : "");
    if (iface == &brisk_stage_penalties_i) {
        penalties_ctx *c = ctx;
        return brisk_ring_state_read(iface->name, c->last_n, c->n_vocab, &c->len, &c->head, c->history, in, len, apply, err);
    }
    if (iface == &brisk_stage_dry_i) return brisk_stage_dry_state_read(ctx, in, len, apply, err);
    if (iface == &brisk_stage_mirostat2_i) {
        mirostat2_ctx *c = ctx;
        if (len < 8) return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: stage '%s': %zu bytes, expected at least 8", iface->name, len);
        const int32_t n_last = get_i32(in + 4);
        if (n_last < 0 || n_last > c->n_vocab || len != 8 + 12 * (size_t)n_last)
            return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: stage '%s': %d pending candidates in %zu bytes (vocabulary %d)",
                              iface->name, n_last, len, c->n_vocab);
        for (int32_t i = 0; i < n_last; i++) {
            const int32_t id = get_i32(in + 8 + 12 * (size_t)i);
            if (id < 0 || id >= c->n_vocab)
                return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: stage '%s': candidate %d has id %d outside the vocabulary (%d)",
                                  iface->name, i, id, c->n_vocab);
        }
        if (!apply) return BRISK_OK;
        memcpy(&c->mu, in, 4);
        c->n_last = n_last;
        for (int32_t i = 0; i < n_last; i++) {
            const uint8_t *q = in + 8 + 12 * (size_t)i;
            memcpy(&c->last[i].id, q, 4);
            memcpy(&c->last[i].logit, q + 4, 4);
            memcpy(&c->last[i].p, q + 8, 4);
        }
        return BRISK_OK;
    }
    if (len != want)
        return brisk_fail(err, BRISK_ERR_FORMAT, "sampler state: stage '%s': %zu bytes, expected %zu", iface->name, len, want);
    if (apply && iface == &brisk_stage_xtc_i) {
        xtc_ctx *c = ctx;
        memcpy(&c->seed, in, 8);
        memcpy(c->rng, in + 8, 32);
    }
    return BRISK_OK;
}
