/* stages: the built-in stages of the sampler chain, each a brisk_stage_i
 * (include/brisk.h) over the candidate set, with llama.cpp's semantics
 * (src/llama-sampler.cpp of the peer): logit bias, mask, penalties, top-k,
 * top-p, min-p, typical, top-n-sigma, XTC, temperature and mirostat v2
 * (stages.c), and DRY (dry.c).
 * Every stage sizes its scratch at construction for n_vocab; apply allocates
 * nothing. The constructors return NULL when out of memory; the caller has
 * validated the parameters. */
#ifndef BRISK_SAMPLE_STAGES_H
#define BRISK_SAMPLE_STAGES_H

#include "base/base.h"

/* ---- shared helpers -------------------------------------------------------------------------- */

/* xoshiro256** seeded through splitmix64; stream distinguishes the RNGs of one seed. */
void brisk_rng_seed(uint64_t s[4], uint64_t seed, uint64_t stream);
uint64_t brisk_rng_next(uint64_t s[4]);
/* Descending logit, ties by lower id: the total order every sort of the chain uses. */
int brisk_cand_cmp(const void *a, const void *b);
/* Sort cur fully unless it is sorted already. */
void brisk_cands_sort(brisk_token_array *cur);
/* llama.cpp's softmax (float arithmetic, max-subtracted) into data[].p; sorts first when sort. */
void brisk_cands_softmax_f(brisk_token_array *cur, bool sort);

/* ---- the stages ------------------------------------------------------------------------------ */

extern const brisk_stage_i brisk_stage_logit_bias_i, brisk_stage_mask_i, brisk_stage_penalties_i, brisk_stage_top_k_i,
    brisk_stage_top_p_i, brisk_stage_min_p_i, brisk_stage_typical_i, brisk_stage_top_n_sigma_i, brisk_stage_xtc_i,
    brisk_stage_temp_i, brisk_stage_mirostat2_i, brisk_stage_dry_i;

void *brisk_stage_logit_bias_new(const brisk_logit_bias *b, int32_t n, int32_t n_vocab);
void *brisk_stage_mask_new(int32_t n_vocab);
void brisk_stage_mask_set(void *ctx, const brisk_mask *m);
void *brisk_stage_penalties_new(const brisk_sampler_params *p, int32_t n_vocab);
void *brisk_stage_top_k_new(int32_t k);
void *brisk_stage_top_p_new(float p, int32_t min_keep);
void *brisk_stage_min_p_new(float p, int32_t min_keep);
void *brisk_stage_typical_new(float p, int32_t min_keep, int32_t n_vocab);
void *brisk_stage_top_n_sigma_new(float n);
void *brisk_stage_xtc_new(float probability, float threshold, int32_t min_keep, uint64_t seed);
void *brisk_stage_temp_new(float temp);
void *brisk_stage_mirostat2_new(float tau, float eta, int32_t n_vocab);
void *brisk_stage_dry_new(const brisk_sampler_params *p, int32_t n_vocab);   /* dry.c */

/* The temperature stage leaves its division pending in *temp (the chain applies it in the final
 * softmax, or before the next stage that reads logits), so the default chain's arithmetic is
 * exp((l - l_max) / temp) in double, as before the chain existed. temp <= 0 keeps only the argmax. */
void brisk_stage_temp_apply_lazy(const void *ctx, brisk_token_array *cur, float *temp);

/* ---- saved state (KV save/restore, brisk_sampler_state_* in sample.c) ----------------------------
 * What a built-in stage learned since its construction or reset, as bytes: penalties' and DRY's
 * history rings, XTC's RNG (and seed), mirostat's mu and its pending candidates; the other built-ins
 * are pure functions of their parameters (0 bytes). State is native little-endian. */

/* Bytes of the stage's state; SIZE_MAX when it cannot be saved (a custom stage, or the mask stage
 * while a mask is set: a constraint's state lives with its owner). */
size_t brisk_stage_state_size(const brisk_stage_i *iface, const void *ctx);
/* Write exactly brisk_stage_state_size bytes (it must not be SIZE_MAX). */
void brisk_stage_state_write(const brisk_stage_i *iface, const void *ctx, uint8_t *out);
/* Check that in[0..len) is a state this stage (with its parameters) can take; with apply, also take
 * it. A state that fails the check changes nothing and names the field in err. */
brisk_status brisk_stage_state_read(const brisk_stage_i *iface, void *ctx, const uint8_t *in, size_t len, bool apply,
                                    brisk_error *err);
/* A history ring's state (penalties, DRY): last_n, len, head, then the ring. */
size_t brisk_ring_state_size(int32_t last_n);
void brisk_ring_state_write(int32_t last_n, int32_t len, int32_t head, const int32_t *ring, uint8_t *out);
brisk_status brisk_ring_state_read(const char *stage, int32_t last_n, int32_t n_vocab, int32_t *len, int32_t *head, int32_t *ring,
                                   const uint8_t *in, size_t n, bool apply, brisk_error *err);
/* DRY's (dry.c), called through the three above. */
size_t brisk_stage_dry_state_size(const void *ctx);
void brisk_stage_dry_state_write(const void *ctx, uint8_t *out);
brisk_status brisk_stage_dry_state_read(void *ctx, const uint8_t *in, size_t len, bool apply, brisk_error *err);

#endif
