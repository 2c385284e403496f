/* sample: the sampler, a chain of stages (brisk_stage_i, include/brisk.h):
 * logit bias -> mask -> the stages of params.samplers that are on (llama.cpp's
 * default order: penalties -> dry -> top-n-sigma -> top-k -> typical -> top-p
 * -> min-p -> XTC -> temperature; mirostat v2 replaces them) -> the final
 * softmax and the draw (temperature <= 0 means greedy: the argmax of what is
 * left). Each sampler owns its RNG (xoshiro256**, seeded), so the same seed
 * gives the same tokens. The built-in stages are in stages.c and dry.c. */
#ifndef BRISK_SAMPLE_H
#define BRISK_SAMPLE_H

#include "base/base.h"

/* Public types and functions are declared in brisk.h; these are the extras
 * the speculative verifier needs. */

/* Uniform double in [0, 1) from the sampler's RNG. */
double brisk_sampler_uniform(brisk_sampler *s);
/* Draw an index from a (possibly unnormalised) probability vector with the sampler's RNG. */
int32_t brisk_sampler_draw(brisk_sampler *s, const float *probs, int32_t n);

/* The sampler's state as bytes, for KV save/restore (src/engine/state.c): the seed, the draw's RNG,
 * and every stage's name and state (stages.h: penalty and DRY history, XTC's RNG, mirostat's mu).
 * A stage without a saved form (a custom one, or the mask while a mask is set) makes size fail with
 * BRISK_ERR_UNSUPPORTED. write fills exactly the size's bytes. check validates a state against this
 * sampler's chain (the same stages in the same order, each state fitting its parameters) and changes
 * nothing; load checks, then takes it (all or nothing). */
brisk_status brisk_sampler_state_size(const brisk_sampler *s, size_t *bytes, brisk_error *err);
void brisk_sampler_state_write(const brisk_sampler *s, uint8_t *out);
brisk_status brisk_sampler_state_check(const brisk_sampler *s, const uint8_t *buf, size_t len, brisk_error *err);
brisk_status brisk_sampler_state_load(brisk_sampler *s, const uint8_t *buf, size_t len, brisk_error *err);

#endif
