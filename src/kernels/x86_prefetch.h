/* x86_prefetch: the software prefetch of the weight stream, shared by the
 * packed GEMM tables for x86 (avx512_gemm.c, avx2_gemm_body.h): one set of
 * distances and one prefetch_ahead, so the tables cannot drift apart.
 * Prefetches are hints: past the end of the weights they do nothing, and no
 * result bit depends on them.
 *
 * PF_AHEAD: to L2, the hardware prefetcher alone keeps too few lines in flight
 * for one core to reach its share of DRAM bandwidth at one token. gemm-micro
 * T=1 Q4_0 over 1.2 GB of weights (65536 groups), 4 interleaved runs at load
 * 3.7: none 8.6-10.3 GB/s, 8 KiB ahead to L2 13.3-13.6 (one outlier 8.7),
 * 2 KiB ahead to L1 8.5-12.5. Only the first token tile of a call prefetches:
 * it is the one that pulls the group's weights from DRAM (the later tiles find
 * them in L1/L2). Before, only tiles smaller than a full token tile did, so an
 * 8-token pass (a speculative verification) streamed without prefetch and cost
 * 1.3x a 7-token one on llama-3.2-1b Q4_0.
 *
 * PF_NEAR: decode tiles also pull the lines they are about to read from L2
 * into L1 (avx512_gemm.c's q4_0_tile).
 *
 * PF_ONE_AHEAD / PF_ONE_NEAR: one-token tiles that prefetch (a CPU where
 * brisk_gemm_prefetch(1) is true: Intel) do it closer. On Sapphire Rapids
 * (bench/decode-stream, two threads, median ratio to a plain read, 2026-12-07)
 * 8 KiB / 2 KiB ahead gave Q4_0 0.85-0.86, Q8_0 0.82, F16 0.75, IQ4_NL
 * 0.72-0.76; 3 KiB / 768 B gave 0.93-0.94, 0.90, 0.80-0.84, 0.88-0.92 (4 KiB /
 * 1 KiB in between). Probably the L1 prefetches far ahead kept more lines in
 * flight than the core has fill buffers (16), and demand loads waited behind
 * them. Multi-token tiles keep the far distances (two tokens: within 4% either
 * way, gemm-micro T=2 from DRAM), and so do the tiles that also prefetch at one
 * token on AMD (Q3_K, Q5_K: pf_class_far; Q6_K's group-start scheme), which
 * were tuned on Zen 4. */
#ifndef BRISK_KERNELS_X86_PREFETCH_H
#define BRISK_KERNELS_X86_PREFETCH_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PF_AHEAD 8192
#define PF_NEAR 2048
#define PF_ONE_AHEAD 3072
#define PF_ONE_NEAR 768

/* prefetch_ahead's distance classes (its near argument): L2 far; L2 and L1 far; L2 and L1 close. */
enum { PF_L2 = 0, PF_L2_L1 = 1, PF_ONE = 2 };

/* The class of a tile of tt tokens that reads each group in order: close at one token (it
 * prefetches there only where the CPU wants it), L1 too at two. */
static inline __attribute__((always_inline)) int pf_class(int tt) { return tt == 1 ? PF_ONE : tt == 2 ? PF_L2_L1 : PF_L2; }

/* The class of a multi-region tile (it prefetches at one token on every CPU): far, L1 too at one or
 * two tokens. */
static inline __attribute__((always_inline)) int pf_class_far(int tt) { return tt <= 2 ? PF_L2_L1 : PF_L2; }

/* The weight bytes [p, p + bytes) ahead of their loads, in the tile that pulls the weights from
 * DRAM (pf): PF_L2 to L2 PF_AHEAD ahead, unrolled; PF_L2_L1 also to L1 PF_NEAR ahead; PF_ONE to L2
 * PF_ONE_AHEAD and L1 PF_ONE_NEAR ahead, as one rolled loop with the two interleaved (unrolled,
 * the Q4_K one-token tile read 0.74-0.79 of a plain read against 0.82-0.84: docs/PERFORMANCE.md,
 * session 24). */
static inline __attribute__((always_inline)) void prefetch_ahead(const uint8_t *p, size_t bytes, bool pf, int near) {
    if (!pf) return;
    if (near == PF_ONE) {
        #pragma GCC unroll 1
        for (size_t o = 0; o < bytes; o += 64) {
            _mm_prefetch((const char *)(p + PF_ONE_AHEAD + o), _MM_HINT_T1);
            _mm_prefetch((const char *)(p + PF_ONE_NEAR + o), _MM_HINT_T0);
        }
        return;
    }
    #pragma GCC unroll 64
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)(p + PF_AHEAD + o), _MM_HINT_T1);
    if (near == PF_L2_L1) {
        #pragma GCC unroll 64
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)(p + PF_NEAR + o), _MM_HINT_T0);
    }
}

#endif
