/* fuzz_pack_cache_key.h: the fixed expectation fuzz_pack_cache matches
 * images against, and the seeds tests/test_pack_cache.c writes are made for:
 * a made-up "avx512" key and two packed matrices (Q4_0 32 x 32, Q6_K
 * 16 x 256), small so that each seed is 11.5 KB. Only the numbers matter; no model file is read. */
#ifndef FUZZ_PACK_CACHE_KEY_H
#define FUZZ_PACK_CACHE_KEY_H

#include "model/pack_cache.h"
#include "quant/quant.h"

#include <string.h>

#define FUZZ_PACK_N 2

static inline void fuzz_pack_key(brisk_pack_key *k) {
    memset(k, 0, sizeof *k);
    k->layout = 0x0123456789abcdefull;
    strcpy(k->isa, "avx512");
    k->packed_types = (1ull << BRISK_Q_Q4_0) | (1ull << BRISK_Q_Q6_K);
    k->group_rows = 16;
    k->model_size = 1u << 20;
    k->header_hash = 0x1111222233334444ull;
    k->data_hash = 0x5555666677778888ull;
    k->dev = 2049, k->ino = 77;
    k->mtime_s = 1700000000, k->mtime_ns = 5;
    k->ctime_s = 1700000001, k->ctime_ns = 6;
}

/* Q4_0: 18-byte blocks of 32, 1 per row, 16 rows per group: 288 bytes; Q6_K: 210-byte blocks of 256: 3360. */
static inline void fuzz_pack_expectation(brisk_pack_entry *e) {
    memset(e, 0, sizeof *e * FUZZ_PACK_N);
    e[0] = (brisk_pack_entry){.src_offset = 4096, .type = BRISK_Q_Q4_0, .rows = 32, .cols = 32, .groups = 2, .group_bytes = 288};
    e[1] = (brisk_pack_entry){.src_offset = 16384, .type = BRISK_Q_Q6_K, .rows = 16, .cols = 256, .groups = 1, .group_bytes = 3360};
}

#endif
