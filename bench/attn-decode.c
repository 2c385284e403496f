/* attn-decode: one KV head's decode attention over a cache laid out as
 * brisk's (kv/kv.h: [layer][block][head] parts, 8 KV heads, head size 64,
 * 32 slots a block, 4 query heads per KV head as llama-3.2-1b), tile by tile
 * as attention.c's run_tiles: the next tile's parts queued for prefetch
 * (brisk_attn_pf), the K scores of the tile's two blocks, the exponentials,
 * the V accumulation. One thread, the best table of this CPU; the cache is
 * far larger than the caches, so this is the memory side of decode at depth
 * without the weights (docs/PERFORMANCE.md, "Session 27").
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/attn-decode.c build/libbrisk_core.a \
 *       -lm -lpthread $(pkg-config --libs libpcre2-8 jansson) -o /tmp/attn-decode
 *   /tmp/attn-decode f16|q8_0|q4_0 [paced|unpaced|none] [DEPTH] [LAYERS] [REPS]
 * paced: the queue spread over the tile (what attention.c does); unpaced:
 * one line per kernel iteration until it is empty (session 26); none: no
 * prefetch. Prints nanoseconds per key and KV head, and the GB/s read. */
#include "base/base.h"
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

enum { D = 64, M = 4, NH = 8, TILE = 64, BLK = 32 };

int main(int argc, char **argv) {
    const char *type = argc > 1 ? argv[1] : "q8_0", *mode = argc > 2 ? argv[2] : "paced";
    const long depth = argc > 3 ? strtol(argv[3], NULL, 10) : 16384, layers = argc > 4 ? strtol(argv[4], NULL, 10) : 16;
    const long reps = argc > 5 ? strtol(argv[5], NULL, 10) : 3;
    const int T = !strcmp(type, "f16") ? 0 : !strcmp(type, "q8_0") ? 1 : !strcmp(type, "q4_0") ? 2 : -1;
    const int pf_mode = !strcmp(mode, "paced") ? 2 : !strcmp(mode, "unpaced") ? 1 : !strcmp(mode, "none") ? 0 : -1;
    if (T < 0 || pf_mode < 0 || depth < TILE || depth % TILE || layers < 1 || reps < 1) {
        fprintf(stderr, "attn-decode: usage: attn-decode f16|q8_0|q4_0 [paced|unpaced|none] [DEPTH, a multiple of %d] [LAYERS] [REPS]\n",
                TILE);
        return 2;
    }
    const brisk_attn_kernels *g = brisk_attn_best();
    const brisk_gemm_kernels *gk = brisk_gemm_best();
    double (*exp_sub)(float *, int64_t, float) = gk && gk->exp_sub ? gk->exp_sub : brisk_kernels_best()->exp_sub;
    if (T && !(T == 1 ? g->kq_multi_q8_0 && g->axpy_q8_0_rows_multi : g->kq_multi_q4_0 && g->axpy_q4_0_rows_multi)) {
        fprintf(stderr, "attn-decode: the %s table has no %s kernels\n", g->isa, type);
        return 1;
    }
    /* part sizes as kv.c's part_bytes: codes, then one F16 scale per 32 channels and slot (K); rows of blocks (V) */
    const size_t kpart = T == 0 ? D * BLK * 2 : (size_t)D * (T == 1 ? 32 : 16) + (D / 32) * BLK * 2;
    const size_t rb = T == 0 ? D * 2 : (D / 32) * (T == 1 ? 34 : 18), vpart = rb * BLK;
    const size_t nblk = (size_t)depth / BLK, nparts = (size_t)layers * nblk * NH;
    /* as kv.c allocates the pool (2 MiB-aligned, huge pages advised) */
    uint8_t *K = brisk_alloc_large(nparts * kpart), *V = brisk_alloc_large(nparts * vpart);
    if (!K || !V) return 1;
    /* small F16 values (0x2c00 = 1/16, 0x3c00 + i % 7 near 1) and codes that vary */
    for (size_t pi = 0; pi < nparts; pi++) {
        uint8_t *k = K + pi * kpart, *v = V + pi * vpart;
        for (size_t i = 0; i < kpart; i++) k[i] = (uint8_t)((pi + i) * 7 % 251);
        for (size_t i = 0; i < vpart; i++) v[i] = (uint8_t)((pi + i) * 5 % 241);
        const uint16_t h = 0x2c00;
        if (T == 0)
            for (size_t i = 0; i < kpart / 2; i++) {
                const uint16_t x = (uint16_t)(0x3000 + i % 7), y = (uint16_t)(0x3000 + i % 5);
                memcpy(k + 2 * i, &x, 2), memcpy(v + 2 * i, &y, 2);
            }
        else {
            for (size_t i = 0; i < (D / 32) * BLK; i++) memcpy(k + (size_t)D * (T == 1 ? 32 : 16) + 2 * i, &h, 2);
            for (size_t r = 0; r < BLK; r++)
                for (size_t b = 0; b < D / 32; b++) memcpy(v + r * rb + b * (T == 1 ? 34 : 18), &h, 2);
        }
    }
    int16_t qq[M * D];
    float qd[M * D / 32], qf[M * D], kq[M][TILE], o[M * D];
    for (int i = 0; i < M * D; i++) qq[i] = (int16_t)(i % 200 - 100), qf[i] = 0.001f * (float)(i % 17);
    for (int i = 0; i < M * D / 32; i++) qd[i] = 0.01f;
    double best = 1e30, sink = 0.0;
    for (long rep = 0; rep < reps; rep++) {
        const double t0 = now();
        for (long L = 0; L < layers; L++)
            for (int h = 0; h < NH; h++) {
                brisk_attn_pf pf = {.n = 0};
                memset(o, 0, sizeof o);
                for (long j0 = 0; j0 < depth; j0 += TILE) {
                    const int32_t ticks = brisk_attn_pf_reset(&pf);
                    for (long p = j0 + TILE; pf_mode && p < j0 + 2 * TILE && p < depth; p += BLK) {
                        const size_t pi = ((size_t)L * nblk + (size_t)p / BLK) * NH + (size_t)h;
                        pf.base[pf.n] = (const char *)K + pi * kpart, pf.lines[pf.n] = (int32_t)(kpart / 64);
                        pf.base[pf.n + 1] = (const char *)V + pi * vpart, pf.lines[pf.n + 1] = (int32_t)(vpart / 64);
                        pf.n += 2;
                    }
                    brisk_attn_pf_pace(&pf, pf_mode == 2 ? ticks : 0);
                    for (int b = 0; b < TILE / BLK; b++) {
                        const uint8_t *k = K + (((size_t)L * nblk + (size_t)j0 / BLK + (size_t)b) * NH + (size_t)h) * kpart;
                        if (T == 0) g->kq_multi_h(qf, D, M, (const uint16_t *)(const void *)k, BLK, 2, D, 0.125f, kq[0] + b * BLK, TILE, &pf);
                        else (T == 1 ? g->kq_multi_q8_0 : g->kq_multi_q4_0)(qq, qd, D, M, k, 0, 2, D, 0.125f, kq[0] + b * BLK, TILE, &pf);
                    }
                    for (int hh = 0; hh < M; hh++) sink += exp_sub(kq[hh], TILE, 1.0f);
                    for (int b = 0; b < TILE / BLK; b++) {
                        const uint8_t *v = V + (((size_t)L * nblk + (size_t)j0 / BLK + (size_t)b) * NH + (size_t)h) * vpart;
                        if (T == 0) g->axpy_f16_rows_multi(o, D, M, kq[0] + b * BLK, TILE, (const uint16_t *)(const void *)v, D, BLK, D, &pf);
                        else (T == 1 ? g->axpy_q8_0_rows_multi : g->axpy_q4_0_rows_multi)(o, D, M, kq[0] + b * BLK, TILE, v, rb, BLK, D, &pf);
                    }
                }
                sink += (double)o[3];
            }
        const double t = now() - t0;
        best = t < best ? t : best;
    }
    const double keys = (double)layers * NH * (double)depth;
    printf("%s %s %s depth %ld, %ld layers: %.2f ns per key and KV head, %.2f GB/s [%g]\n", g->isa, type, mode, depth, layers,
           best / keys * 1e9, (double)(nparts * (kpart + vpart)) / best / 1e9, sink);
    brisk_free_large(K, nparts * kpart);
    brisk_free_large(V, nparts * vpart);
    return 0;
}
