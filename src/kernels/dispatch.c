/* dispatch: choose the kernel table for this CPU.
 *
 * Tables are listed best first with the features each needs; the first one
 * the CPU has wins. An ISA's entry exists only in builds that compile that
 * ISA's files (BRISK_ARCH_* from CMake), so there is nothing to #if inside
 * the functions below. */
#include "kernels/kernels.h"
#include "base/cpu.h"

typedef struct kernel_choice {
    const brisk_kernels *(*get)(void);
    bool (*usable)(const brisk_cpu_features *f);
} kernel_choice;

#if defined(BRISK_ARCH_X86)
static bool has_avx2(const brisk_cpu_features *f) { return f->avx2 && f->fma && f->f16c; }
/* the packed GEMM's set too; AVX512_BF16 is optional (the table picks its BF16 kernel) */
static bool has_avx512_vnni(const brisk_cpu_features *f) {
    return f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni && has_avx2(f);
}
#define BRISK_ISA_CHOICES {brisk_kernels_avx512, has_avx512_vnni}, {brisk_kernels_avx2, has_avx2},
#elif defined(BRISK_ARCH_ARM64)
static bool has_neon(const brisk_cpu_features *f) { return f->neon; }
static bool has_neon_dotprod(const brisk_cpu_features *f) { return f->neon && f->dotprod; }
static bool has_neon_i8mm(const brisk_cpu_features *f) { return f->neon && f->dotprod && f->i8mm; }
#define BRISK_ISA_CHOICES {brisk_kernels_neon_i8mm, has_neon_i8mm}, {brisk_kernels_neon_dotprod, has_neon_dotprod}, \
                          {brisk_kernels_neon, has_neon},
#else
#define BRISK_ISA_CHOICES
#endif

static const kernel_choice choices[] = {
    BRISK_ISA_CHOICES
    {NULL, NULL},   /* keeps the array non-empty on builds without ISA tables */
};

const brisk_kernels *brisk_kernels_best(void) {
    const brisk_cpu_features *f = brisk_cpu_features_get();
    if (f->force_ref) return brisk_kernels_ref();
    for (size_t i = 0; choices[i].get; i++)
        if (choices[i].usable(f)) return choices[i].get();
    return brisk_kernels_ref();
}

int brisk_kernels_all(const brisk_kernels **out, int max) {
    const brisk_cpu_features *f = brisk_cpu_features_get();
    int count = 0;
    if (count < max) out[count] = brisk_kernels_ref();
    count++;
    for (size_t i = 0; choices[i].get; i++) {
        if (!choices[i].usable(f)) continue;
        if (count < max) out[count] = choices[i].get();
        count++;
    }
    return count;
}

/* ---- packed GEMM ---- */

const brisk_gemm_kernels *brisk_gemm_best(void) {
    const brisk_cpu_features *f = brisk_cpu_features_get();
    if (f->force_ref) return NULL;
#if defined(BRISK_ARCH_X86)
    if (has_avx512_vnni(f)) return brisk_gemm_avx512();
#endif
    return NULL;
}
