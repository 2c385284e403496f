/* kld: llama-perplexity's log-probability file and KL statistics (kld.h). The
 * arithmetic follows llama-perplexity's (float logits, float expf, double
 * sums) so that both tools' files and numbers agree. */
#include "kv/kld.h"

#include <math.h>
#include <string.h>

static const char magic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};

int32_t brisk_kld_nv(int32_t n_vocab) { return 2 * ((n_vocab + 1) / 2) + 4; }

bool brisk_kld_layout(int32_t n_ctx, int32_t n_vocab, int32_t n_chunk, brisk_kld_header *h) {
    memset(h, 0, sizeof *h);
    if (n_ctx < 4 || n_vocab < 1 || n_vocab > INT32_MAX - 8 || n_chunk < 1) return false;
    h->n_ctx = n_ctx, h->n_vocab = n_vocab, h->n_chunk = n_chunk;
    h->nv = brisk_kld_nv(n_vocab);
    h->n_pos = n_ctx - 1 - n_ctx / 2;
    uint64_t tok, lp;
    if (__builtin_mul_overflow((uint64_t)n_chunk, (uint64_t)n_ctx, &tok) || __builtin_mul_overflow(tok, 4, &tok)) return false;
    h->logprob_off = BRISK_KLD_HEADER + tok;
    if (__builtin_mul_overflow((uint64_t)n_chunk * (uint64_t)h->n_pos, (uint64_t)h->nv * 2, &lp) ||
        __builtin_add_overflow(h->logprob_off, lp, &h->total))
        return false;
    return true;
}

static int32_t get_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

brisk_status brisk_kld_header_parse(const uint8_t *p, size_t len, uint64_t file_size, brisk_kld_header *h, brisk_error *err) {
    memset(h, 0, sizeof *h);
    if (len < 8 || memcmp(p, magic, 8))
        return brisk_fail(err, BRISK_ERR_FORMAT, "not a llama-perplexity log-probability file (no \"_logits_\" magic)");
    if (len < BRISK_KLD_HEADER) return brisk_fail(err, BRISK_ERR_FORMAT, "log-probability file truncated: %zu bytes, its header has 20", len);
    const int32_t n_ctx = get_i32(p + 8), n_vocab = get_i32(p + 12), n_chunk = get_i32(p + 16);
    if (n_ctx < 4) return brisk_fail(err, BRISK_ERR_FORMAT, "log-probability file: context %d is below 4", n_ctx);
    if (n_vocab < 1 || n_vocab > INT32_MAX - 8)
        return brisk_fail(err, BRISK_ERR_FORMAT, "log-probability file: vocabulary %d out of range", n_vocab);
    if (n_chunk < 1) return brisk_fail(err, BRISK_ERR_FORMAT, "log-probability file: %d chunks", n_chunk);
    if (!brisk_kld_layout(n_ctx, n_vocab, n_chunk, h))
        return brisk_fail(err, BRISK_ERR_FORMAT, "log-probability file: the size of %d chunks of %d with vocabulary %d overflows", n_chunk,
                          n_ctx, n_vocab);
    if (file_size != h->total)
        return brisk_fail(err, BRISK_ERR_FORMAT, "log-probability file %s: %llu bytes, %d chunks of %d with vocabulary %d take %llu",
                          file_size < h->total ? "truncated" : "has trailing bytes", (unsigned long long)file_size, n_chunk, n_ctx, n_vocab,
                          (unsigned long long)h->total);
    return BRISK_OK;
}

void brisk_kld_header_write(const brisk_kld_header *h, uint8_t *out) {
    memcpy(out, magic, 8);
    memcpy(out + 8, &h->n_ctx, 4);
    memcpy(out + 12, &h->n_vocab, 4);
    memcpy(out + 16, &h->n_chunk, 4);
}

/* llama-perplexity's rounding to the nearest code (half to even, through
 * the float's mantissa); inputs are in [0, 65536). */
static inline uint16_t code_of(float x) { return (uint16_t)lrintf(x); }

double brisk_kld_encode(const float *logits, int32_t n_vocab, int32_t tok, uint16_t *out) {
    float max_logit = logits[0], min_logit = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) {
        max_logit = fmaxf(max_logit, logits[i]);
        min_logit = fminf(min_logit, logits[i]);
    }
    min_logit = fmaxf(min_logit, max_logit - 16);
    double sum_exp = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    const float scale = (max_logit - min_logit) / 65535.f;
    memcpy(out, &scale, 4);
    memcpy(out + 2, &min_log_prob, 4);
    uint16_t *q = out + 4;
    if (scale != 0.0f) {
        const float inv_scale = 1 / scale;
        for (int32_t i = 0; i < n_vocab; i++) q[i] = logits[i] > min_logit ? code_of(inv_scale * (logits[i] - min_logit)) : 0;
    } else memset(q, 0, (size_t)n_vocab * sizeof *q);
    for (int32_t i = n_vocab; i < brisk_kld_nv(n_vocab) - 4; i++) q[i] = 0;   /* the padding */
    return (double)max_logit + (double)log_sum_exp - (double)logits[tok];
}

double brisk_kld_compare(const float *logits, int32_t n_vocab, const uint16_t *base, int32_t tok, brisk_kld_stats *st, float *p_diff_out) {
    float max_logit = logits[0];
    int32_t imax = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > max_logit) {
            max_logit = logits[i];
            imax = i;
        }
    double sum_exp = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    float scale, min_log_prob;
    memcpy(&scale, base, 4);
    memcpy(&min_log_prob, base + 2, 4);
    const uint16_t *q = base + 4;
    const float nll = max_logit + log_sum_exp - logits[tok];
    const float nll_base = -(scale * q[tok] + min_log_prob);
    st->sum_nll += nll;
    st->sum_nll2 += nll * nll;   /* float products, as llama-perplexity's */
    st->sum_nll_base += nll_base;
    st->sum_nll_base2 += nll_base * nll_base;
    st->sum_nll_nll_base += nll * nll_base;
    max_logit += log_sum_exp;
    double sum = 0.0;
    int32_t imax_base = -1;
    float lp_base_max = 0.0f;
    for (int32_t i = 0; i < n_vocab; i++) {
        const float lp_base = scale * q[i] + min_log_prob;
        if (i == 0 || lp_base > lp_base_max) {
            lp_base_max = lp_base;
            imax_base = i;
        }
        if (lp_base > -16.f) sum += expf(lp_base) * (lp_base - logits[i] + max_logit);
    }
    st->sum_kld += sum;
    st->sum_kld2 += sum * sum;
    st->count++;
    if (imax == imax_base) st->n_same_top++;
    const float p_diff = expf(-nll) - expf(-nll_base);
    st->sum_p_diff += p_diff;
    const double p_diff2 = p_diff * p_diff;
    st->sum_p_diff2 += p_diff2;
    st->sum_p_diff4 += p_diff2 * p_diff2;
    st->max_p_diff = fmaxf(st->max_p_diff, fabsf(p_diff));
    *p_diff_out = p_diff;
    return sum;
}
