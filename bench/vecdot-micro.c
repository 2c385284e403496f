/* vecdot-micro: ns per row of every kernel table's vec_dot, one thread.
 * ROWS weight rows of n = 4096 elements (quantized random floats; 64 rows of
 * even F32 stay in L2) against one activation row; best of 50 passes.
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/vecdot-micro.c build/libbrisk_core.a \
 *       -lm -lpthread $(pkg-config --libs libpcre2-8 jansson) -o /tmp/vecdot-micro
 *   /tmp/vecdot-micro [TYPE...] (default: Q4_1 Q5_1 Q2_K Q3_K Q5_K BF16 F32)   */
#include "kernels/kernels.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 4096, ROWS = 64, PASSES = 50 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int type_by_name(const char *name) {
    for (uint32_t t = 0; t < BRISK_Q_TYPE_LIMIT; t++)
        if (brisk_qtype_get(t) && !strcmp(brisk_qtype_name(t), name)) return (int)t;
    return -1;
}

static int bench_type(uint32_t wt, const brisk_kernels *const *tables, int ntables) {
    const uint32_t at = brisk_qtype_get(wt)->act_type;
    size_t rb, ab;
    brisk_qtype_row_bytes(wt, N, &rb);
    brisk_qtype_row_bytes(at, N, &ab);
    uint8_t *w = malloc(ROWS * rb), *a = malloc(ab);
    float *x = malloc(N * sizeof(float)), out[ROWS];
    if (!w || !a || !x) return 1;
    for (int r = 0; r < ROWS; r++) {
        for (int i = 0; i < N; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        brisk_qtype_from_float(wt)(x, w + (size_t)r * rb, N);
    }
    for (int i = 0; i < N; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    /* the tables take turns within each pass, so that load from elsewhere on
     * the machine hits them alike */
    double best[8];
    for (int t = 0; t < ntables; t++) best[t] = 1e9;
    for (int p = 0; p < PASSES; p++) {
        for (int t = 0; t < ntables; t++) {
            tables[t]->quantize_act[at](x, a, N);
            const double t0 = now();
            for (int r = 0; r < ROWS; r++) tables[t]->vec_dot[wt](N, &out[r], w + (size_t)r * rb, a);
            const double dt = now() - t0;
            if (dt < best[t]) best[t] = dt;
        }
    }
    printf("%-5s", brisk_qtype_name(wt));
    for (int t = 0; t < ntables; t++) printf("  %s %8.1f", tables[t]->isa, best[t] / ROWS * 1e9);
    printf("  ns/row (n=%d)\n", N);
    free(w); free(a); free(x);
    return 0;
}

int main(int argc, char **argv) {
    static const char *const defaults[] = {"Q4_1", "Q5_1", "Q2_K", "Q3_K", "Q5_K", "BF16", "F32"};
    const brisk_kernels *tables[8];
    const int ntables = brisk_kernels_all(tables, 8);
    const int ntypes = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]);
    for (int i = 0; i < ntypes; i++) {
        const char *name = argc > 1 ? argv[i + 1] : defaults[i];
        const int wt = type_by_name(name);
        if (wt < 0) {
            fprintf(stderr, "vecdot-micro: unknown type %s\n", name);
            return 1;
        }
        if (bench_type((uint32_t)wt, tables, ntables)) return 1;
    }
    return 0;
}
