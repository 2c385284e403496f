/* state: the KV-state format's constants and checksum (state.c has the
 * format), for the tests and the fuzz target, which craft states whose
 * checksum is right so that the checks behind it are reached. */
#ifndef BRISK_ENGINE_STATE_H
#define BRISK_ENGINE_STATE_H

#define BRISK_STATE_MAX_POS (1 << 30)   /* positions a state may hold are below this */

#include <stddef.h>
#include <stdint.h>

#define BRISK_STATE_MAGIC 0x53564b42u   /* "BKVS" little-endian */
#define BRISK_STATE_VERSION 1u
#define BRISK_STATE_HEADER 80u          /* bytes before the token ids */

/* The checksum a state of n bytes records in its last 8 (over its first n - 8). */
uint64_t brisk_state_checksum(const void *state, size_t n);

#endif
