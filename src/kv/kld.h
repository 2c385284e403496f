/* kld: llama-perplexity's log-probability file (--kl-divergence-base), read
 * and written byte-compatibly, and its KL-divergence statistics, so that a
 * KV cache type (or any other change) is measured against a reference run of
 * brisk or of llama.cpp. docs/KV.md describes the format:
 *
 *   "_logits_" | n_ctx i32 | n_vocab i32 | n_chunk i32 | tokens i32[n_chunk * n_ctx]
 *   then per chunk, per scored position (n_ctx - 1 - n_ctx/2 of them: the
 *   logits at n_ctx/2 .. n_ctx-2), nv = 2*((n_vocab+1)/2) + 4 uint16:
 *   float scale, float min_log_prob, then n_vocab codes q, log p = scale*q + min_log_prob
 *   (codes of logits below max - 16 are 0), padded to nv.
 */
#ifndef BRISK_KLD_H
#define BRISK_KLD_H

#include "base/base.h"

#define BRISK_KLD_HEADER 20   /* magic + n_ctx + n_vocab + n_chunk */

typedef struct brisk_kld_header {
    int32_t n_ctx, n_vocab, n_chunk;
    int32_t nv;              /* uint16 per scored position */
    int32_t n_pos;           /* scored positions per chunk: n_ctx - 1 - n_ctx/2 */
    uint64_t logprob_off;    /* where the first chunk's log-probabilities start */
    uint64_t total;          /* the file's exact size */
} brisk_kld_header;

/* uint16 per scored position for a vocabulary (llama-perplexity's nv). */
int32_t brisk_kld_nv(int32_t n_vocab);
/* The header for these numbers: false when they are out of range (n_ctx < 4,
 * n_vocab < 1, n_chunk < 1) or the sizes overflow. */
bool brisk_kld_layout(int32_t n_ctx, int32_t n_vocab, int32_t n_chunk, brisk_kld_header *h);
/* Parse the first len (>= BRISK_KLD_HEADER) bytes of a file of file_size
 * bytes: magic, ranges, and file_size equal to the layout's total (naming a
 * truncated file or trailing bytes). */
brisk_status brisk_kld_header_parse(const uint8_t *p, size_t len, uint64_t file_size, brisk_kld_header *h, brisk_error *err);
/* The 20 header bytes for h. */
void brisk_kld_header_write(const brisk_kld_header *h, uint8_t *out);

/* One position's log-softmax in the file's form (nv uint16), as
 * llama-perplexity computes it; returns the position's NLL of token tok. */
double brisk_kld_encode(const float *logits, int32_t n_vocab, int32_t tok, uint16_t *out);

/* The running sums of llama-perplexity's KL-divergence statistics. */
typedef struct brisk_kld_stats {
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2, sum_p_diff, sum_p_diff2, sum_p_diff4;
    float max_p_diff;
    int64_t n_same_top, count;
} brisk_kld_stats;

/* One position: logits against the base row (nv uint16 as in the file) for
 * token tok; adds to st, returns the position's KL divergence (and its
 * probability difference of tok in *p_diff). */
double brisk_kld_compare(const float *logits, int32_t n_vocab, const uint16_t *base, int32_t tok, brisk_kld_stats *st, float *p_diff);

#endif
