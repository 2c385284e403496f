/* kernel-insns: one matmul tile (16 weight rows x T activation rows of
 * BLOCKS weight blocks) done R times, either by the packed GEMM of the
 * selected table or by one vec_dot per output, for counting the executed
 * instructions under an emulator: bench/neon-insns.sh runs it with R = 1 and
 * R = 3 under qemu-aarch64's instruction trace, and the difference over 2 is
 * the tile's cost (set-up and process start cancel out). Any ISA builds it;
 * BRISK_ISA picks the table as for brisk itself.
 *   kernel-insns gemm|vecdot TYPE T BLOCKS R      (TYPE: Q4_0 ... Q6_K) */
#include "kernels/kernels.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: kernel-insns gemm|vecdot TYPE T BLOCKS R\n");
        return 2;
    }
    const bool gemm = !strcmp(argv[1], "gemm");
    const int T = atoi(argv[3]), R = atoi(argv[5]);
    const int64_t blocks = atoll(argv[4]);
    int wt = -1;
    for (uint32_t t = 0; t < BRISK_Q_TYPE_LIMIT; t++)
        if (brisk_qtype_get(t) && !strcmp(brisk_qtype_name(t), argv[2])) wt = (int)t;
    const brisk_kernels *k = brisk_kernels_best();
    const brisk_gemm_kernels *g = brisk_gemm_best();
    if (wt < 0 || T < 1 || T > 64 || blocks < 1 || blocks > 4096 || R < 0 || (!gemm && strcmp(argv[1], "vecdot"))) {
        fprintf(stderr, "kernel-insns: bad arguments (mode gemm|vecdot, a quantized TYPE, T 1..64, BLOCKS 1..4096, R >= 0)\n");
        return 2;
    }
    if (gemm && (!g || !g->gemm[wt])) {
        fprintf(stderr, "kernel-insns: table %s has no packed GEMM for %s\n", k->isa, argv[2]);
        return 2;
    }
    const uint32_t at = brisk_qtype_get((uint32_t)wt)->act_type;
    const int64_t n = blocks * brisk_qtype_get((uint32_t)wt)->block_elems;
    size_t rb = 0, ab = 0;
    brisk_qtype_row_bytes((uint32_t)wt, n, &rb);
    brisk_qtype_row_bytes(at, n, &ab);
    const int64_t sl = brisk_act_sums_len(n);
    uint8_t *w = malloc(16 * rb), *a = malloc((size_t)T * ab), *pk = malloc(brisk_pack_group_bytes((uint32_t)wt, n) + 64);
    int32_t *s = calloc((size_t)(T * sl), sizeof(int32_t));
    float *x = malloc((size_t)n * sizeof(float)), *o = calloc((size_t)T * 16, sizeof(float));
    if (!w || !a || !pk || !s || !x || !o) {
        fprintf(stderr, "kernel-insns: out of memory\n");
        return 1;
    }
    srand(1);
    for (int r = 0; r < 16; r++) {
        for (int64_t i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        brisk_qtype_from_float((uint32_t)wt)(x, w + (size_t)r * rb, n);
    }
    for (int t = 0; t < T; t++) {
        for (int64_t i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        k->quantize_act[at](x, a + (size_t)t * ab, n);
        if (g && g->act_sums[at]) g->act_sums[at](a + (size_t)t * ab, n, s + (size_t)t * sl);
    }
    if (gemm) brisk_pack_rows((uint32_t)wt, pk, w, rb, n);
    for (int rep = 0; rep < R; rep++) {
        if (gemm) g->gemm[wt](n, pk, a, ab, s, (size_t)sl, T, o, 16);
        else
            for (int t = 0; t < T; t++)
                for (int r = 0; r < 16; r++) k->vec_dot[wt](n, &o[t * 16 + r], w + (size_t)r * rb, a + (size_t)t * ab);
    }
    double sum = 0.0;
    for (int i = 0; i < T * 16; i++) sum += o[i];
    printf("%s %s %s T=%d blocks=%lld R=%d checksum %g\n", k->isa, argv[1], argv[2], T, (long long)blocks, R, sum);
    free(w); free(a); free(pk); free(s); free(x); free(o);
    return 0;
}
