/* fuzz_kv_budget: libFuzzer target for --kv-budget's value (src/kv/policy.c,
 * brisk_kv_budget_parse: slots or a fraction of -c). The first two bytes pick
 * n_ctx (1 .. 65536), the rest is the text. Invariants, each a crash when
 * broken: an accepted value is within [1, n_ctx]; a refusal is
 * BRISK_ERR_INVALID_ARG with a message and slots 0; an
 * accepted all-digit text is its own integer value.
 * Seeds: fuzz/corpus/fuzz_kv_budget/ (integers, fractions, and hostile forms:
 * signs, exponents, spaces, overflow, two points, NaN/inf spellings). */
#include "fuzz_check.h"
#include "kv/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > 4096) return 0;
    const int32_t n_ctx = 1 + (int32_t)(((uint32_t)data[0] << 8) | data[1]);
    char *text = malloc(size - 1);
    if (!text) return 0;
    memcpy(text, data + 2, size - 2);
    text[size - 2] = 0;   /* an embedded NUL just ends the text early */
    brisk_error err = {0};
    int32_t slots = -1;
    const brisk_status st = brisk_kv_budget_parse(text, n_ctx, &slots, &err);
    if (st == BRISK_OK) {
        FUZZ_CHECK(slots >= 1 && slots <= n_ctx);
        bool digits = text[0] != 0;
        long long v = 0;
        for (const char *c = text; *c && digits; c++) {
            digits = *c >= '0' && *c <= '9';
            v = v * 10 + (*c - '0');
        }
        if (digits) FUZZ_CHECK(v == slots);
    } else {
        FUZZ_CHECK(st == BRISK_ERR_INVALID_ARG && slots == 0);
        FUZZ_CHECK(err.msg[0] != 0);
    }
    free(text);
    return 0;
}
