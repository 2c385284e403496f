/* gemm-micro: throughput of the AVX-512 GEMM kernels, one thread, weights in L2.
 * 64 groups of 16 rows x 2048 columns (random bytes) against T activation rows;
 * best of 20 passes. Prints multiply-adds per second and weight bytes per second.
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/gemm-micro.c build-perf/libbrisk_core.a \
 *       -lm -lpthread $(pkg-config --libs libpcre2-8 jansson) -o /tmp/gemm-micro
 *   /tmp/gemm-micro T TYPE [GROUPS [vecdot]] (TYPE: any the table packs, e.g. Q4_0 Q8_0 Q4_K Q6_K F16
 *   IQ4_NL IQ4_XS MXFP4; GROUPS default 64, i.e. weights in L2/L3; 16384 groups of F16 = 1 GiB
 *   streams from DRAM like decode; vecdot: the same products as matmul's unpacked path, one
 *   vec_dot per (row, token) over canonical rows, for A/B against the packed kernel)   */
#include "kernels/kernels.h"
#include "quant/quant.h"

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
    const brisk_gemm_kernels *g = brisk_gemm_best();
    const brisk_kernels *k = brisk_kernels_best();
    if (!g || argc < 3) {
        fprintf(stderr, "usage: gemm-micro T TYPE (needs AVX-512 VNNI)\n");
        return 1;
    }
    const int T = atoi(argv[1]);
    int wt = -1;
    for (uint32_t t = 0; t < BRISK_Q_TYPE_LIMIT; t++)
        if (brisk_qtype_get(t) && !strcmp(brisk_qtype_name(t), argv[2])) wt = (int)t;
    const bool vecdot = argc > 4 && !strcmp(argv[4], "vecdot");
    if (wt < 0 || T < 1 || (!g->gemm[wt] && !g->gemm_rows[wt]) || (vecdot && !k->vec_dot[wt])) {
        fprintf(stderr, "gemm-micro: no GEMM for type %s\n", argv[2]);
        return 1;
    }
    const uint32_t at = brisk_qtype_get((uint32_t)wt)->act_type;
    const int64_t n = 2048, G = argc > 3 && atoll(argv[3]) > 0 ? atoll(argv[3]) : 64;
    size_t rb, ab;
    brisk_qtype_row_bytes((uint32_t)wt, n, &rb);
    brisk_qtype_row_bytes(at, n, &ab);
    const size_t gb = g->gemm[wt] && !vecdot ? brisk_pack_group_bytes((uint32_t)wt, n) : 16 * rb;
    uint8_t *w = calloc((size_t)G, gb), *src = calloc(16, rb), *a = calloc((size_t)T, ab);
    const int64_t sl = brisk_act_sums_len(n);
    int32_t *s = calloc((size_t)(T * sl), 4);
    float *x = malloc((size_t)n * 4), *o = calloc((size_t)(T * 16 * G), 4);
    srand(1);
    for (size_t i = 0; i < 16 * rb; i++) src[i] = (uint8_t)rand();
    if (wt == BRISK_Q_F16 || wt == BRISK_Q_Q4_K || wt == BRISK_Q_Q5_K || wt == BRISK_Q_Q6_K || wt == BRISK_Q_Q4_0 || wt == BRISK_Q_Q5_0 || wt == BRISK_Q_Q8_0 ||
        wt == BRISK_Q_IQ4_NL || wt == BRISK_Q_IQ4_XS || wt == BRISK_Q_MXFP4)
        for (size_t r = 0; r < 16; r++) {   /* finite scales: quantize random floats */
            for (int64_t i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
            brisk_qtype_from_float((uint32_t)wt)(x, src + r * rb, n);
        }
    for (int64_t gi = 0; gi < G; gi++) {
        if (g->gemm[wt] && !vecdot) brisk_pack_rows((uint32_t)wt, w + (size_t)gi * gb, src, rb, n);
        else memcpy(w + (size_t)gi * gb, src, gb);
    }
    for (int t = 0; t < T; t++) {
        for (int64_t i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        k->quantize_act[at](x, a + (size_t)t * ab, n);
        if (g->act_sums[at]) g->act_sums[at](a + (size_t)t * ab, n, s + t * sl);
    }
    double best = 1e9;
    for (int rep = 0; rep < (G > 64 ? 5 : 20); rep++) {
        const double t0 = now();
        for (int64_t gi = 0; gi < G; gi++) {
            if (vecdot) {
                for (int r = 0; r < 16; r++)
                    for (int t = 0; t < T; t++) k->vec_dot[wt](n, o + (int64_t)t * 16 * G + gi * 16 + r, w + (size_t)gi * gb + (size_t)r * rb, a + (size_t)t * ab);
            } else if (g->gemm[wt]) g->gemm[wt](n, w + (size_t)gi * gb, a, ab, s, (size_t)sl, T, o + gi * 16, 16 * G);
            else g->gemm_rows[wt](n, w + (size_t)gi * gb, rb, (const float *)s, (size_t)sl, T, o + gi * 16, 16 * G);
        }
        const double dt = now() - t0;
        if (dt < best) best = dt;
    }
    const double mac = (double)G * 16 * (double)n * T;
    printf("T=%d %s%s: %.1f GMAC/s (weights %.1f GB/s)\n", T, argv[2], vecdot ? " (vec_dot)" : "", mac / best * 1e-9, (double)G * (double)gb / best * 1e-9);
    free(w); free(src); free(a); free(s); free(x); free(o);
    return 0;
}
