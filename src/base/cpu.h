/* cpu: what the CPU (and OS) can run, read once per process.
 *
 * This is brisk's only global: a table written once, under pthread_once, on
 * first use, and read-only afterwards, so any thread may call these at any
 * time. */
#ifndef BRISK_BASE_CPU_H
#define BRISK_BASE_CPU_H

#include <stdbool.h>
#include <stddef.h>

typedef struct brisk_cpu_features {
    /* x86-64; each true only when the OS also saves the registers involved */
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq;
    bool avx512vnni, avx512bf16, avxvnni;
    /* aarch64 */
    bool neon, dotprod, i8mm, fp16;
    /* BRISK_FORCE_REF=1 in the environment at first use: run reference kernels */
    bool force_ref;
    /* BRISK_ISA=NAME at first use (BRISK_FORCE_REF=1 reads as "ref"): the
     * kernel table to run, "" = the best one; kernels/dispatch.c resolves
     * and checks it (brisk_isa_check) */
    char isa[24];
    /* Whether the GEMM kernels prefetch the weight stream in software (to L2
     * 3 KiB and to L1 768 B ahead, each line with its loads: PF_ONE in
     * avx512_gemm.c) at one token, in the tiles that read each group in order
     * (multi-token tiles and the multi-region K-quant tiles always do:
     * kernels.h's brisk_gemm_prefetch, avx2_gemm_body.h; the Q6_K one-token
     * tiles also take their scheme from it). On where
     * it was measured to pay, Intel (Sapphire Rapids: one core's hardware
     * prefetcher alone kept too few lines in flight), and by default
     * elsewhere; off on AMD, where the hardware prefetchers alone stream
     * faster (Zen 4, one core: a plain read 30-33 GB/s without software
     * prefetch, 20 with it; docs/PERFORMANCE.md "Session 21").
     * BRISK_DECODE_PREFETCH=0 or 1 at first use overrides; any other value
     * sets prefetch_env_bad, which brisk_isa_check refuses. */
    bool decode_prefetch, prefetch_env_bad;
} brisk_cpu_features;

/* The process-wide table (never NULL). */
const brisk_cpu_features *brisk_cpu_features_get(void);

/* "avx2 fma f16c avx512f ..." into buf (always NUL-terminated); returns buf. */
const char *brisk_cpu_features_describe(const brisk_cpu_features *f, char *buf, size_t len);

#endif
