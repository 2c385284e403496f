/* fuzz_schema: libFuzzer target for the constrained-decoding schema front end. The input is compiled
 * against a vocabulary of the 256 single bytes (and an end token); a compile must either succeed or
 * fail with a status and a message. When it succeeds, a walk of up to 64 steps follows the first
 * allowed byte chosen by the input's own bytes, and every mask is checked against the brute-force
 * definition (byte b allowed iff advancing by it leaves the parse alive; the end token iff complete). */
#include "constrain_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cst_vocab *vocab = fuzz_byte_vocab();
    brisk_error err = {0};
    cst_nfa *n = cst_nfa_new();
    FUZZ_CHECK(n != NULL);
    cst_schema_opts o = {.max_ws = CST_DEFAULT_MAX_WS};
    brisk_status st = cst_schema_compile(n, (const char *)data, size, &o, &err);
    cst_grammar *g = NULL;
    if (st == BRISK_OK) st = cst_grammar_new(n, vocab, &g, &err);
    cst_nfa_free(n);
    if (st != BRISK_OK) {
        FUZZ_CHECK(err.status == st && err.msg[0]);
        return 0;
    }
    fuzz_walk_masks(g, data, size);
    return 0;
}
