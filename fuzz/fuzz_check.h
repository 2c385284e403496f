/* fuzz_check.h: the fuzz targets' one assertion. A failed FUZZ_CHECK names the target's source file, the
 * line and the condition, then aborts, which libFuzzer reports as a crash with the input that caused it
 * (a plain assert would vanish under NDEBUG). */
#ifndef BRISK_FUZZ_CHECK_H
#define BRISK_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                               \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
            abort();                                                                   \
        }                                                                              \
    } while (0)

#endif
