/* fuzz_kld: libFuzzer target for llama-perplexity's log-probability file
 * (src/kv/kld.c, what `brisk perplexity --kl-divergence` reads): bytes ->
 * brisk_kld_header_parse with the input's own size as the file's, then, for an
 * accepted file of a small vocabulary, brisk_kld_compare of every stored
 * position against fixed logits, each position's token taken from the file's
 * tokens (reduced into the vocabulary, as the command refuses others).
 * Invariants, each a crash when broken: a refusal has a negative status and a
 * one-line message; an accepted header's layout covers exactly the input (no
 * read past it); the statistics count every position.
 * Seeds: fuzz/corpus/fuzz_kld/ (a file llama-perplexity wrote, and hostile
 * headers: bad magic, truncated, negative and overflowing counts). */
#include "fuzz_check.h"
#include "kv/kld.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_kld_header h;
    brisk_error err = {0};
    const brisk_status st = brisk_kld_header_parse(data, size, size, &h, &err);
    if (st != BRISK_OK) {
        FUZZ_CHECK(st < 0 && err.msg[0] && !strchr(err.msg, '\n'));
        return 0;
    }
    FUZZ_CHECK(h.total == size && h.logprob_off <= size && h.n_pos >= 1 && h.nv == brisk_kld_nv(h.n_vocab));
    if (h.n_vocab > 8192) return 0;   /* the per-position work, not the parser, would dominate */
    float *logits = malloc((size_t)h.n_vocab * sizeof *logits);
    if (!logits) return 0;
    for (int32_t i = 0; i < h.n_vocab; i++) logits[i] = (float)((i * 37) % 101) * 0.1f - 5.0f;
    brisk_kld_stats ks = {0};
    const uint8_t *tok = data + BRISK_KLD_HEADER;
    int64_t n = 0;
    for (int32_t c = 0; c < h.n_chunk; c++)
        for (int32_t j = 0; j < h.n_pos; j++, n++) {
            int32_t t;
            memcpy(&t, tok + 4 * ((size_t)c * (size_t)h.n_ctx + (size_t)(h.n_ctx / 2 + j + 1)), 4);
            const int32_t tk = (int32_t)((uint32_t)t % (uint32_t)h.n_vocab);
            uint16_t *row = malloc((size_t)h.nv * sizeof *row);   /* aligned copy, as the command's fread gives */
            if (!row) {
                free(logits);
                return 0;
            }
            memcpy(row, data + h.logprob_off + (size_t)n * (size_t)h.nv * 2, (size_t)h.nv * 2);
            float pd;
            (void)brisk_kld_compare(logits, h.n_vocab, row, tk, &ks, &pd);
            free(row);
        }
    FUZZ_CHECK(ks.count == n);
    free(logits);
    return 0;
}
