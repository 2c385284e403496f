/* sample: the sampler chain. Order follows llama.cpp's default chain:
 *   penalties -> top-k -> top-p -> min-p -> temperature -> draw
 * (temperature <= 0 means greedy: argmax after penalties). Each sampler owns
 * its RNG (xoshiro256**, seeded), so the same seed gives the same tokens. */
#ifndef BRISK_SAMPLE_H
#define BRISK_SAMPLE_H

#include "base/base.h"

/* Public types and functions are declared in brisk.h; these are the extras
 * the speculative verifier needs. */

/* Uniform double in [0, 1) from the sampler's RNG. */
double brisk_sampler_uniform(brisk_sampler *s);
/* Draw an index from a (possibly unnormalised) probability vector with the sampler's RNG. */
int32_t brisk_sampler_draw(brisk_sampler *s, const float *probs, int32_t n);

#endif
