/* dispatch: choose the kernel table for this CPU.
 *
 * Tables are listed best first with the features each needs; the first one
 * the CPU has wins. An ISA's entry exists only in builds that compile that
 * ISA's files (BRISK_ARCH_* from CMake), so there is nothing to #if inside
 * the functions below. */
#include "kernels/kernels.h"
#include "base/cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kernel_choice {
    const char *name;   /* BRISK_ISA's name for it (= the table's isa) */
    const brisk_kernels *(*get)(void);
    bool (*usable)(const brisk_cpu_features *f);
} kernel_choice;

#if defined(BRISK_ARCH_X86)
static bool has_avx2(const brisk_cpu_features *f) { return f->avx2 && f->fma && f->f16c; }
/* the packed GEMM's set too; AVX512_BF16 is optional (the table picks its BF16 kernel) */
static bool has_avx512_vnni(const brisk_cpu_features *f) {
    return f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni && has_avx2(f);
}
static bool has_avx2_vnni(const brisk_cpu_features *f) { return has_avx2(f) && f->avxvnni; }
#define BRISK_ISA_CHOICES {"avx512", brisk_kernels_avx512, has_avx512_vnni}, {"avx2-vnni", brisk_kernels_avx2_vnni, has_avx2_vnni}, \
                          {"avx2", brisk_kernels_avx2, has_avx2},
#elif defined(BRISK_ARCH_ARM64)
static bool has_neon(const brisk_cpu_features *f) { return f->neon; }
static bool has_neon_dotprod(const brisk_cpu_features *f) { return f->neon && f->dotprod; }
static bool has_neon_i8mm(const brisk_cpu_features *f) { return f->neon && f->dotprod && f->i8mm; }
#define BRISK_ISA_CHOICES {"neon-i8mm", brisk_kernels_neon_i8mm, has_neon_i8mm}, \
                          {"neon-dotprod", brisk_kernels_neon_dotprod, has_neon_dotprod}, {"neon", brisk_kernels_neon, has_neon},
#else
#define BRISK_ISA_CHOICES
#endif

static const kernel_choice choices[] = {
    BRISK_ISA_CHOICES
    {NULL, NULL, NULL},   /* keeps the array non-empty on builds without ISA tables */
};

/* Names BRISK_ISA accepts on some build, for the message naming a table this build lacks. */
static const char *const known_isas[] = {"ref", "avx2", "avx2-vnni", "avx512", "neon", "neon-dotprod", "neon-i8mm"};

/* The choice BRISK_ISA names when it is built and usable, else NULL. */
static const kernel_choice *forced_choice(const brisk_cpu_features *f) {
    for (size_t i = 0; choices[i].get; i++)
        if (!strcmp(f->isa, choices[i].name) && choices[i].usable(f)) return &choices[i];
    return NULL;
}

brisk_status brisk_isa_check(brisk_error *err) {
    const brisk_cpu_features *f = brisk_cpu_features_get();
    if (f->prefetch_env_bad) {
        const char *v = getenv("BRISK_DECODE_PREFETCH");   /* as read at first use, unless the process changed it since */
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "BRISK_DECODE_PREFETCH=%s: expected 0 (no software prefetch of the weights at one token) or 1",
                          v ? v : "(unset since it was read)");
    }
    if (!f->isa[0] || !strcmp(f->isa, "ref") || forced_choice(f)) return BRISK_OK;
    char usable[128] = "ref";
    for (size_t i = 0; choices[i].get; i++)
        if (choices[i].usable(f)) {
            const size_t u = strlen(usable);
            snprintf(usable + u, sizeof usable - u, " %s", choices[i].name);
        }
    bool built = false, known = false;
    char names[128] = "";
    for (size_t i = 0; choices[i].get; i++) built = built || !strcmp(f->isa, choices[i].name);
    for (size_t i = 0; i < BRISK_ARRAY_LEN(known_isas); i++) {
        known = known || !strcmp(f->isa, known_isas[i]);
        const size_t u = strlen(names);
        snprintf(names + u, sizeof names - u, "%s%s", i ? " " : "", known_isas[i]);
    }
    char feats[256];
    brisk_cpu_features_describe(f, feats, sizeof feats);
    if (built)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "BRISK_ISA=%s: this CPU cannot run it (it has: %s); usable here: %s", f->isa, feats,
                          usable);
    if (known)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "BRISK_ISA=%s: this build has no %s kernel table; usable here: %s", f->isa, f->isa,
                          usable);
    return brisk_fail(err, BRISK_ERR_INVALID_ARG, "BRISK_ISA=%s: unknown kernel table (names: %s); usable here: %s", f->isa, names, usable);
}

const brisk_kernels *brisk_kernels_best(void) {
    const brisk_cpu_features *f = brisk_cpu_features_get();
    if (f->force_ref) return brisk_kernels_ref();
    const kernel_choice *forced = f->isa[0] ? forced_choice(f) : NULL;
    if (forced) return forced->get();
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

/* The packed-GEMM table that goes with a kernel table, by its ISA (NULL: none). */
static const brisk_gemm_kernels *gemm_for(const brisk_kernels *k) {
#if defined(BRISK_ARCH_X86)
    if (!strcmp(k->isa, "avx512")) return brisk_gemm_avx512();
    if (!strcmp(k->isa, "avx2-vnni")) return brisk_gemm_avx2_vnni();
    if (!strcmp(k->isa, "avx2")) return brisk_gemm_avx2();
#elif defined(BRISK_ARCH_ARM64)
    /* baseline neon (no SDOT) keeps its per-row vec_dot */
    if (!strcmp(k->isa, "neon-i8mm")) return brisk_gemm_neon_i8mm();
    if (!strcmp(k->isa, "neon-dotprod")) return brisk_gemm_neon_dotprod();
#endif
    (void)k;
    return NULL;
}

const brisk_gemm_kernels *brisk_gemm_best(void) { return gemm_for(brisk_kernels_best()); }

int brisk_gemm_all(const brisk_gemm_kernels **out, int max) {
    const brisk_kernels *k[16];
    const int nk = brisk_kernels_all(k, 16);
    int count = 0;
    for (int i = 0; i < nk && i < 16; i++) {
        const brisk_gemm_kernels *g = gemm_for(k[i]);
        if (!g) continue;
        if (count < max) out[count] = g;
        count++;
    }
    return count;
}

/* ---- attention ---- */

/* The attention table that goes with a kernel table, by its ISA: neon's for
 * every NEON table (the attention kernels need no dotprod or i8mm). */
static const brisk_attn_kernels *attn_for(const brisk_kernels *k) {
#if defined(BRISK_ARCH_X86)
    if (!strcmp(k->isa, "avx512")) return brisk_attn_avx512();
    if (!strncmp(k->isa, "avx2", 4)) return brisk_attn_avx2();   /* avx2 and avx2-vnni */
#elif defined(BRISK_ARCH_ARM64)
    if (!strncmp(k->isa, "neon", 4)) return brisk_attn_neon();
#endif
    (void)k;
    return brisk_attn_ref();
}

const brisk_attn_kernels *brisk_attn_best(void) { return attn_for(brisk_kernels_best()); }

int brisk_attn_all(const brisk_attn_kernels **out, int max) {
    const brisk_kernels *k[16];
    const int nk = brisk_kernels_all(k, 16);
    int count = 0;
    for (int i = 0; i < nk && i < 16; i++) {
        const brisk_attn_kernels *a = attn_for(k[i]);
        bool seen = false;
        for (int j = 0; j < count && j < max; j++) seen = seen || out[j] == a;
        if (seen) continue;
        if (count < max) out[count] = a;
        count++;
    }
    return count;
}
