/* fuzz_pack_cache: libFuzzer target for the pack-cache header and table
 * parser (src/model/pack_cache.c): bytes -> brisk_pack_cache_parse, then
 * brisk_pack_cache_match against a fixed expectation (the key and the two
 * entries the seeds are made for), as a load does before it maps anything.
 *
 * Invariants, each a crash when broken:
 *   - a refusal has a negative status and a one-line, non-empty message;
 *   - an accepted image is consistent: every entry lies inside the buffer,
 *     after the header and table, 4096-aligned, in order without overlap,
 *     its bytes = groups x bytes per group; and reading every byte of every
 *     entry's data stays inside the buffer (ASan checks the reads);
 *   - a match leaves the entries equal to the expectation's.
 * Seeds: fuzz/corpus/fuzz_pack_cache/ (valid, truncated, stale, wrong ISA,
 * overlapping offsets ...), written by tests/test_pack_cache.c with
 * BRISK_REGEN_PACK_CACHE_SEEDS=1. Half the mutations are resealed
 * (LLVMFuzzerCustomMutator: the file-size field set to the input's size and
 * the checksum recomputed), so the checks behind the checksum are reached. */
#include "fuzz_check.h"
#include "model/pack_cache.h"
#include "fuzz_pack_cache_key.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    size = LLVMFuzzerMutate(data, size, max_size);
    if (seed & 1) brisk_pack_cache_seal(data, size);
    return size;
}

static bool refused(brisk_status st, const brisk_error *err) {
    return st < 0 && err->msg[0] && !strchr(err->msg, '\n');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_pack_image im;
    brisk_error err = {0};
    const brisk_status st = brisk_pack_cache_parse(data, size, &im, &err);
    if (st) {
        FUZZ_CHECK(refused(st, &err));
        return 0;
    }
    FUZZ_CHECK(im.file_size == size && im.data_offset <= size && im.data_offset % BRISK_PACK_CACHE_ALIGN == 0);
    FUZZ_CHECK(im.data_offset >= BRISK_PACK_CACHE_HEADER + im.n_entries * BRISK_PACK_CACHE_ENTRY);
    uint64_t end = im.data_offset, sum = 0;
    for (uint64_t i = 0; i < im.n_entries; i++) {
        brisk_pack_entry e;
        brisk_pack_cache_entry(&im, i, &e);
        FUZZ_CHECK(e.offset >= end && e.offset % BRISK_PACK_CACHE_ALIGN == 0 && e.bytes <= size && e.offset <= size - e.bytes);
        FUZZ_CHECK(e.groups > 0 && e.bytes == e.groups * e.group_bytes && e.bytes / e.groups == e.group_bytes);
        for (uint64_t b = 0; b < e.bytes; b++) sum += data[e.offset + b];
        end = e.offset + e.bytes;
    }
    (void)sum;
    brisk_pack_entry want[FUZZ_PACK_N];
    fuzz_pack_expectation(want);
    brisk_pack_key key;
    fuzz_pack_key(&key);
    memset(&err, 0, sizeof err);
    const brisk_pack_match m = brisk_pack_cache_match(&im, &key, want, FUZZ_PACK_N, &err);
    if (m == BRISK_PACK_MISMATCH) {
        FUZZ_CHECK(err.msg[0] && !strchr(err.msg, '\n'));
        return 0;
    }
    FUZZ_CHECK(im.n_entries == FUZZ_PACK_N);
    for (uint64_t i = 0; i < FUZZ_PACK_N; i++) {
        brisk_pack_entry e;
        brisk_pack_cache_entry(&im, i, &e);
        FUZZ_CHECK(e.type == want[i].type && e.rows == want[i].rows && e.cols == want[i].cols && e.groups == want[i].groups &&
                   e.group_bytes == want[i].group_bytes && e.src_offset == want[i].src_offset);
    }
    return 0;
}
