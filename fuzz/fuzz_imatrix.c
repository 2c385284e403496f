/* fuzz_imatrix: libFuzzer target for the importance-matrix reader
 * (quant/imatrix.c), GGUF and legacy. On success every entry is sorted, has a
 * name, at least one finite value, and is found by brisk_imatrix_find; the
 * keys llama-quantize writes for it are well formed. On failure the message
 * is a non-empty single line. */
#include "fuzz_check.h"
#include "quant/imatrix.h"
#include "quant/quantize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_imatrix m;
    brisk_error err = {0};
    if (brisk_imatrix_parse(data, size, "fuzz", &m, &err) != BRISK_OK) {
        FUZZ_CHECK(err.msg[0] != 0);
        FUZZ_CHECK(strchr(err.msg, '\n') == NULL);
        FUZZ_CHECK(m.n_entries == 0 && m.entries == NULL);
        return 0;
    }
    for (int i = 0; i < m.n_entries; i++) {
        const brisk_imatrix_entry *e = &m.entries[i];
        FUZZ_CHECK(e->name && e->n >= 1 && e->values);
        for (int64_t j = 0; j < e->n; j++) FUZZ_CHECK(isfinite(e->values[j]));
        if (i > 0) FUZZ_CHECK(strcmp(m.entries[i - 1].name, e->name) < 0);
        FUZZ_CHECK(brisk_imatrix_find(&m, e->name) == e);
    }
    brisk_kv_override kvo[4];
    int n = 0;
    brisk_quantize_imatrix_overrides(&m, "fuzz.imatrix", kvo, &n);
    FUZZ_CHECK(n >= 0 && n <= 4 && (n > 0) == (m.n_entries > 0));
    for (int i = 0; i < n; i++) FUZZ_CHECK(kvo[i].key[0] && strlen(kvo[i].s) < sizeof kvo[i].s);
    brisk_imatrix_free(&m);
    return 0;
}
