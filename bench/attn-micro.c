/* attn-micro: the decode attention kernels alone, one thread: kq_multi_h (the
 * scores of one KV head's 4 query heads against F16 K straight from the
 * cache's transposed block layout, 32 slots a block) and axpy_f16_rows_multi
 * (those 4 heads' V accumulation over the block's F16 rows), head size 64 (a
 * llama-3.2-1b KV head), over BLOCKS blocks of 4 KiB K + 4 KiB V, repeated.
 * Prints nanoseconds per key for each and the bytes they stream: with 4
 * blocks the parts stay in L1, with thousands they come from DRAM, so the
 * two readings separate arithmetic from memory (docs/PERFORMANCE.md,
 * "Session 18: decode attention at batch").
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/attn-micro.c build/libbrisk_core.a \
 *       -lm -lpthread $(pkg-config --libs libpcre2-8 jansson) -o /tmp/attn-micro
 *   /tmp/attn-micro [BLOCKS] [REPS]   (every attention table this CPU runs, ref first) */
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const size_t nblk = argc > 1 ? strtoul(argv[1], NULL, 10) : 16;
    const long reps = argc > 2 ? strtol(argv[2], NULL, 10) : 20000;
    const brisk_attn_kernels *tables[8];
    const int n_tables = brisk_attn_all(tables, 8);
    if (nblk < 1 || reps < 1) {
        fprintf(stderr, "attn-micro: usage: attn-micro [BLOCKS >= 1] [REPS >= 1]\n");
        return 2;
    }
    enum { D = 64, M = 4, SLOTS = 32 };
    uint16_t *k = aligned_alloc(64, nblk * D * SLOTS * 2), *v = aligned_alloc(64, nblk * D * SLOTS * 2);
    if (!k || !v) return 1;
    for (size_t i = 0; i < nblk * D * SLOTS; i++) k[i] = (uint16_t)(0x3c00 + i % 7), v[i] = (uint16_t)(0x3c00 + i % 5);
    float q[M * D], scores[M * 64], o[M * D], p[M * 64];
    for (int i = 0; i < M * D; i++) q[i] = 0.01f * (float)i, o[i] = 0.0f;
    for (int i = 0; i < M * 64; i++) p[i] = 1e-3f;
    for (int ti = 0; ti < n_tables; ti++) {
        const brisk_attn_kernels *g = tables[ti];
        const double t0 = now();
        for (long r = 0; r < reps; r++)
            for (size_t b = 0; b < nblk; b++) g->kq_multi_h(q, D, M, k + b * D * SLOTS, SLOTS, SLOTS / 16, D, 0.125f, scores, 64, NULL);
        const double t1 = now();
        for (long r = 0; r < reps; r++)
            for (size_t b = 0; b < nblk; b++) g->axpy_f16_rows_multi(o, D, M, p, 64, v + b * D * SLOTS, D, SLOTS, D, NULL);
        const double t2 = now();
        const double keys = (double)reps * (double)nblk * SLOTS;
        printf("%-7s %zu blocks (%zu KiB of K): K scores %.2f ns/key (%.1f GB/s), V %.2f ns/key (%.1f GB/s), %d query heads, "
               "head size %d [%g]\n",
               g->isa, nblk, nblk * D * SLOTS * 2 / 1024, (t1 - t0) / keys * 1e9, keys * D * 2 / (t1 - t0) / 1e9, (t2 - t1) / keys * 1e9,
               keys * D * 2 / (t2 - t1) / 1e9, M, D, (double)(scores[5] + o[3]));
    }
    free(k);
    free(v);
    return 0;
}
