/* cpu: runtime CPU feature detection (cpuid + xgetbv on x86-64, auxv hwcaps
 * on aarch64 Linux), done once per process. */
#include "base/cpu.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static brisk_cpu_features cpu_table;   /* written once by detect(), under cpu_once */
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void detect_arch(brisk_cpu_features *f) {
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) {   /* vendor "AuthenticAMD": ebx, edx, ecx */
        char vendor[13];
        memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
        vendor[12] = '\0';
        f->decode_prefetch = strcmp(vendor, "AuthenticAMD") != 0;
    }
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const bool osxsave = (c >> 27) & 1;
    const bool avx = (c >> 28) & 1;
    const bool fma = (c >> 12) & 1;
    const bool f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return;
    const uint64_t xcr0 = read_xcr0();
    const bool ymm_ok = (xcr0 & 0x6) == 0x6;      /* SSE + AVX state */
    const bool zmm_ok = (xcr0 & 0xe6) == 0xe6;    /* + opmask, ZMM_Hi256, Hi16_ZMM */
    if (!ymm_ok) return;
    f->fma = fma;
    f->f16c = f16c;
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = (b >> 5) & 1;
    if (zmm_ok) {
        f->avx512f = (b >> 16) & 1;
        f->avx512dq = (b >> 17) & 1;
        f->avx512bw = (b >> 30) & 1;
        f->avx512vl = (b >> 31) & 1;
        f->avx512vnni = (c >> 11) & 1;
    }
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f->avxvnni = (a1 >> 4) & 1;
    if (zmm_ok) f->avx512bf16 = (a1 >> 5) & 1;
}

#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>

static void detect_arch(brisk_cpu_features *f) {
    const unsigned long hw = getauxval(AT_HWCAP);
    const unsigned long hw2 = getauxval(AT_HWCAP2);
    f->neon = (hw >> 1) & 1;       /* HWCAP_ASIMD */
    f->fp16 = (hw >> 10) & 1;      /* HWCAP_ASIMDHP */
    f->dotprod = (hw >> 20) & 1;   /* HWCAP_ASIMDDP */
    f->i8mm = (hw2 >> 13) & 1;     /* HWCAP2_I8MM */
}

#elif defined(__aarch64__)
static void detect_arch(brisk_cpu_features *f) { f->neon = true; }   /* NEON is baseline */

#else
static void detect_arch(brisk_cpu_features *f) { (void)f; }
#endif

static void detect(void) {
    brisk_cpu_features f;
    memset(&f, 0, sizeof f);
    f.decode_prefetch = true;   /* detect_arch turns it off where it measured slower */
    detect_arch(&f);
    const char *prefetch = getenv("BRISK_DECODE_PREFETCH");
    if (prefetch && prefetch[0]) {
        if (!strcmp(prefetch, "0") || !strcmp(prefetch, "1")) f.decode_prefetch = prefetch[0] == '1';
        else f.prefetch_env_bad = true;
    }
    const char *force = getenv("BRISK_FORCE_REF");
    f.force_ref = force && strcmp(force, "0") != 0 && force[0] != '\0';
    const char *isa = getenv("BRISK_ISA");
    if (f.force_ref) snprintf(f.isa, sizeof f.isa, "ref");
    else if (isa && isa[0]) {
        /* kept whole when it fits; a longer name is cut to one that matches no table, so it is refused, not truncated into a real one */
        if (strlen(isa) < sizeof f.isa) snprintf(f.isa, sizeof f.isa, "%s", isa);
        else snprintf(f.isa, sizeof f.isa, "(too long)");
    }
    f.force_ref = f.force_ref || !strcmp(f.isa, "ref");
    cpu_table = f;
}

const brisk_cpu_features *brisk_cpu_features_get(void) {
    pthread_once(&cpu_once, detect);
    return &cpu_table;
}

const char *brisk_cpu_features_describe(const brisk_cpu_features *f, char *buf, size_t len) {
    const struct { bool on; const char *name; } flags[] = {
        {f->avx2, "avx2"}, {f->fma, "fma"}, {f->f16c, "f16c"}, {f->avx512f, "avx512f"},
        {f->avx512bw, "avx512bw"}, {f->avx512vl, "avx512vl"}, {f->avx512dq, "avx512dq"},
        {f->avx512vnni, "avx512vnni"}, {f->avx512bf16, "avx512bf16"}, {f->avxvnni, "avxvnni"},
        {f->neon, "neon"}, {f->dotprod, "dotprod"}, {f->i8mm, "i8mm"}, {f->fp16, "fp16"},
        {f->force_ref, "force_ref"},
    };
    if (!len) return buf;
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (!flags[i].on) continue;
        int w = snprintf(buf + used, len - used, "%s%s", used ? " " : "", flags[i].name);
        if (w < 0 || (size_t)w >= len - used) break;
        used += (size_t)w;
    }
    return buf;
}
