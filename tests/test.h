/* test.h: the tiny in-house test harness. Each tests/test_*.c is one CTest
 * test made of CHECKs; it prints "N passed, N failed" and exits non-zero on
 * any failure, or 77 (CTest "skipped") via TEST_SKIP when a fixture is absent. */
#ifndef BRISK_TEST_H
#define BRISK_TEST_H

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

/* Path helpers: the shared fixtures and the committed core subset. */
static inline const char *test_shared(const char *rel, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", BRISK_SHARED_DIR, rel);
    return buf;
}
static inline const char *test_source(const char *rel, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", BRISK_SOURCE_DIR, rel);
    return buf;
}
static inline int test_exists(const char *path) { return access(path, R_OK) == 0; }
static inline int test_quick(void) { return getenv("BRISK_TEST_QUICK") != NULL; }

#endif
