/* imatrix: llama.cpp's importance matrices, as `llama-quantize --imatrix`
 * reads them (its common/imatrix-loader.cpp and tools/quantize), for
 * `brisk quantize --imatrix`.
 *
 * Two formats:
 *  - GGUF (current llama-imatrix): per weight matrix NAME two F32 tensors,
 *    NAME.in_sum2 (the sums of squared activations, ne0 per expert) and
 *    NAME.counts (one count per expert); keys imatrix.datasets (strings),
 *    imatrix.chunk_count and imatrix.chunk_size (u32), all three required.
 *    The importance of a column is in_sum2 / round(count), or 1 for an
 *    expert that never got a token.
 *  - legacy .dat: i32 entry count, then per entry i32 name length, the name,
 *    i32 ncall, i32 value count, the f32 values (already means times
 *    ncall), optionally followed by i32 chunk count, i32 length and the
 *    dataset name. The importance is value / ncall (value when ncall <= 0).
 * A buffer is GGUF when it starts with "GGUF"; anything else is read as
 * legacy. Every inconsistency is an error naming what is wrong; no value
 * that is not finite is accepted (llama-quantize refuses those too). */
#ifndef BRISK_QUANT_IMATRIX_H
#define BRISK_QUANT_IMATRIX_H

#include "base/base.h"

typedef struct brisk_imatrix_entry {
    char *name;          /* the weight's tensor name */
    float *values;       /* n importances: ne0 per expert, experts one after the other */
    int64_t n;
} brisk_imatrix_entry;

typedef struct brisk_imatrix {
    brisk_imatrix_entry *entries;   /* sorted by name */
    int n_entries;
    char *dataset;                  /* the first dataset's name, NULL when none */
    int32_t chunk_count;            /* 0 when the file does not say */
    bool legacy;
} brisk_imatrix;

/* Parse len bytes (borrowed only during the call); `what` names the input in
 * errors. On error *out is empty. */
brisk_status brisk_imatrix_parse(const uint8_t *buf, size_t len, const char *what, brisk_imatrix *out, brisk_error *err);
brisk_status brisk_imatrix_load(const char *path, brisk_imatrix *out, brisk_error *err);
void brisk_imatrix_free(brisk_imatrix *m);
/* llama-quantize's --include-weights / --exclude-weights: keep only the
 * entries whose name contains one of names[0, n) (include), or drop those
 * (exclude); substring matches, as its prepare_imatrix. The order stays
 * sorted; the matrix may end up empty. */
void brisk_imatrix_filter(brisk_imatrix *m, const char *const *names, int n, bool include);
/* The entry of a tensor, NULL when the matrix has none. */
const brisk_imatrix_entry *brisk_imatrix_find(const brisk_imatrix *m, const char *name);

#endif
