/* decode-stream: how close a packed GEMM kernel at one token (decode) comes to
 * plain reads of the same memory. Two threads each stream half of 512 MiB of
 * packed 16-row groups (2048 columns, huge pages) through the library's gemm
 * at T=1, then read the same halves with plain 64-byte loads, once with an
 * 8 KiB L2 software prefetch and once without (which wins depends on the
 * machine and the thread count); one round is one of each, and the kernel's
 * GB/s is divided by the faster read's of the same round, so the machine's
 * drifting bandwidth (other tenants) cancels. Prints the median and quartiles of that ratio.
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -mavx512f -Isrc -Iinclude bench/decode-stream.c build/libbrisk_core.a \
 *       -lm -lpthread $(pkg-config --libs libpcre2-8 jansson) -o /tmp/decode-stream
 *   /tmp/decode-stream TYPE [ROUNDS [THREADS]]   (TYPE: any packed type, e.g. Q4_0 Q8_0 Q4_K Q6_K F16 IQ4_NL
 *   IQ4_XS MXFP4; ROUNDS default 30; THREADS 1 or 2, default 2: 1 streams the whole 512 MiB on one
 *   thread, the `-t 1` case, where a core's own miss handling rather than the memory bounds a read) */
#include "kernels/kernels.h"
#include "quant/quant.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct job {
    const brisk_gemm_kernels *g;
    int wt;
    int64_t n, groups;
    size_t gb;
    const uint8_t *w, *a;
    const int32_t *s;
    size_t ab, sl;
    int read;   /* 0: the gemm; 1: a plain read with the 8 KiB L2 prefetch; 2: one without */
    float out[16];
    __m512i sink;
} job;

static void *run(void *v) {
    job *j = v;
    if (j->read) {
        __m512i acc = _mm512_setzero_si512();
        const size_t bytes = (size_t)j->groups * j->gb;
        for (size_t o = 0; o + 64 <= bytes; o += 64) {
            if (j->read == 1) _mm_prefetch((const char *)j->w + o + 8192, _MM_HINT_T1);
            acc = _mm512_xor_si512(acc, _mm512_loadu_si512(j->w + o));
        }
        j->sink = acc;
        return NULL;
    }
    for (int64_t gi = 0; gi < j->groups; gi++)
        j->g->gemm[j->wt](j->n, j->w + (size_t)gi * j->gb, j->a, j->ab, j->s, j->sl, 1, j->out, 16);
    return NULL;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

int main(int argc, char **argv) {
    const brisk_gemm_kernels *g = brisk_gemm_best();
    const brisk_kernels *k = brisk_kernels_best();
    if (!g || argc < 2) {
        fprintf(stderr, "usage: decode-stream TYPE [ROUNDS [THREADS]] (needs AVX-512 VNNI)\n");
        return 1;
    }
    int wt = -1;
    for (uint32_t t = 0; t < BRISK_Q_TYPE_LIMIT; t++)
        if (brisk_qtype_get(t) && !strcmp(brisk_qtype_name(t), argv[1])) wt = (int)t;
    if (wt < 0 || !g->gemm[wt]) {
        fprintf(stderr, "decode-stream: no packed GEMM for type %s\n", argv[1]);
        return 1;
    }
    const int rounds = argc > 2 && atoi(argv[2]) > 0 && atoi(argv[2]) <= 1000 ? atoi(argv[2]) : 30;
    const int nt = argc > 3 ? atoi(argv[3]) : 2;
    if (nt != 1 && nt != 2) {
        fprintf(stderr, "decode-stream: THREADS must be 1 or 2, not '%s'\n", argv[3]);
        return 1;
    }
    const uint32_t at = brisk_qtype_get((uint32_t)wt)->act_type;
    const int64_t n = 2048;
    size_t rb, ab;
    brisk_qtype_row_bytes((uint32_t)wt, n, &rb);
    brisk_qtype_row_bytes(at, n, &ab);
    const size_t gb = brisk_pack_group_bytes((uint32_t)wt, n);
    const int64_t groups = ((int64_t)512 << 20) / (int64_t)gb / 2 * 2;
    const size_t bytes = (size_t)groups * gb, huge = (size_t)2 << 20;
    uint8_t *w = aligned_alloc(huge, (bytes + huge - 1) / huge * huge), *src = malloc(16 * rb), *a = malloc(ab);
    const int64_t sl = brisk_act_sums_len(n);
    int32_t *s = calloc((size_t)sl, 4);
    float *x = malloc((size_t)n * 4);
    double *ratio = malloc(sizeof(double) * (size_t)rounds);
    if (!w || !src || !a || !s || !x || !ratio) {
        fprintf(stderr, "decode-stream: out of memory\n");
        return 1;
    }
    madvise(w, bytes, MADV_HUGEPAGE);
    srand(1);
    for (size_t r = 0; r < 16; r++) {   /* finite scales: quantize random floats */
        for (int64_t i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        brisk_qtype_from_float((uint32_t)wt)(x, src + r * rb, n);
    }
    for (int64_t gi = 0; gi < groups; gi++) brisk_pack_rows((uint32_t)wt, w + (size_t)gi * gb, src, rb, n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    k->quantize_act[at](x, a, n);
    if (g->act_sums[at]) g->act_sums[at](a, n, s);
    double best_gemm = 0, best_read[2] = {0, 0};
    for (int r = 0; r < rounds; r++) {
        double gbs[3];
        for (int rd = 0; rd < 3; rd++) {
            job j[2];
            for (int t = 0; t < nt; t++)
                j[t] = (job){.g = g, .wt = wt, .n = n, .groups = groups / nt, .gb = gb, .w = w + (size_t)t * (size_t)(groups / 2) * gb,
                             .a = a, .s = s, .ab = ab, .sl = (size_t)sl, .read = rd};
            pthread_t tid;
            const double t0 = now();
            if (nt == 2) pthread_create(&tid, NULL, run, &j[1]);
            run(&j[0]);
            if (nt == 2) pthread_join(tid, NULL);
            gbs[rd] = (double)bytes / (now() - t0) * 1e-9;
        }
        ratio[r] = gbs[0] / (gbs[1] > gbs[2] ? gbs[1] : gbs[2]);
        if (gbs[0] > best_gemm) best_gemm = gbs[0];
        for (int rd = 0; rd < 2; rd++)
            if (gbs[1 + rd] > best_read[rd]) best_read[rd] = gbs[1 + rd];
    }
    qsort(ratio, (size_t)rounds, sizeof *ratio, cmp_double);
    printf("%s T=1, %d thread%s, %d rounds: gemm / plain read median %.3f (quartiles %.3f %.3f); best gemm %.1f GB/s, best read %.1f GB/s with "
           "prefetch, %.1f without\n",
           argv[1], nt, nt == 1 ? "" : "s", rounds, ratio[rounds / 2], ratio[rounds / 4], ratio[3 * rounds / 4], best_gemm, best_read[0], best_read[1]);
    free(w); free(src); free(a); free(s); free(x); free(ratio);
    return 0;
}
