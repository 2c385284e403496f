/* test.h: the tiny in-house test harness. Each tests/test_*.c is one CTest
 * test made of CHECKs; it prints "N passed, N failed" and exits non-zero on
 * any failure, or 77 (CTest "skipped") via TEST_SKIP when a fixture is absent. */
#ifndef BRISK_TEST_H
#define BRISK_TEST_H

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int test_passed, test_failed;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) test_passed++;                                                    \
        else {                                                                      \
            test_failed++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);         \
        }                                                                           \
    } while (0)

#define CHECKF(cond, ...)                                                           \
    do {                                                                            \
        if (cond) test_passed++;                                                    \
        else {                                                                      \
            test_failed++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

#define TEST_SKIP_CODE 77
#define TEST_SKIP(...)                                                              \
    do {                                                                            \
        printf("SKIP: ");                                                           \
        printf(__VA_ARGS__);                                                        \
        printf("\n");                                                               \
        exit(TEST_SKIP_CODE);                                                       \
    } while (0)

static inline int test_finish(void) {
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}

/* Path helpers: the shared fixtures and the committed core subset.
 * BRISK_SHARED_DIR in the environment overrides the configured ../shared (as
 * in bench/spec.sh): pointing it at an empty directory shows what a bare clone
 * checks. */
static inline const char *test_shared_dir(void) {
    const char *env = getenv("BRISK_SHARED_DIR");
    return env && *env ? env : BRISK_SHARED_DIR;
}
static inline const char *test_shared(const char *rel, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", test_shared_dir(), rel);
    return buf;
}
static inline const char *test_source(const char *rel, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", BRISK_SOURCE_DIR, rel);
    return buf;
}
static inline int test_exists(const char *path) { return access(path, R_OK) == 0; }
static inline int test_quick(void) { return getenv("BRISK_TEST_QUICK") != NULL; }

/* A test that walks fixtures says how many cases it checked, and checking
 * none is a failure (an emptied fixture directory must not pass). */
static inline void test_count(const char *what, int n) {
    printf("checked %d %s\n", n, what);
    CHECKF(n > 0, "no %s checked", what);
}

/* The names in dir that end in suffix, without it, sorted: up to cap names of
 * up to TEST_NAME_MAX - 1 bytes. Returns the count, or -1 when dir cannot be
 * read; more names than cap, or a longer one, is a failed check (never a
 * silent cut). */
#define TEST_NAME_MAX 256
static inline int test_name_cmp(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }
static inline int test_list(const char *dir, const char *suffix, char (*names)[TEST_NAME_MAX], int cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    const size_t ls = strlen(suffix);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t l = strlen(e->d_name);
        if (l <= ls || strcmp(e->d_name + l - ls, suffix)) continue;
        CHECKF(n < cap && l - ls < TEST_NAME_MAX, "%s: more than %d *%s files, or a name too long (%s)", dir, cap, suffix, e->d_name);
        if (n >= cap || l - ls >= TEST_NAME_MAX) continue;
        memcpy(names[n], e->d_name, l - ls);
        names[n++][l - ls] = 0;
    }
    closedir(d);
    qsort(names, (size_t)n, TEST_NAME_MAX, test_name_cmp);
    return n;
}

/* Regularized upper incomplete gamma Q(a, x), the chi-square tests' p-value
 * (Q(dof/2, chi2/2)): the series below a+1, Lentz's continued fraction above. */
static inline double test_gamma_q(double a, double x) {
    if (x <= 0) return 1.0;
    const double lg = lgamma(a);
    if (x < a + 1.0) {
        double sum = 1.0 / a, term = sum;
        for (int n = 1; n < 10000; n++) {
            term *= x / (a + n);
            sum += term;
            if (fabs(term) < fabs(sum) * 1e-15) break;
        }
        return 1.0 - sum * exp(-x + a * log(x) - lg);
    }
    double b = x + 1.0 - a, c = 1e300, d = 1.0 / b, h = d;
    for (int i = 1; i < 10000; i++) {
        const double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1.0 / d;
        const double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < 1e-15) break;
    }
    return exp(-x + a * log(x) - lg) * h;
}

#endif
