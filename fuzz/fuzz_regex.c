/* fuzz_regex: libFuzzer target for the constrained-decoding regex front end. The input is compiled
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
    brisk_status st = cst_regex_compile(n, (const char *)data, size, &err);
    /* the JSON Schema flavour too (unanchored, JSON-escaped characters) */
    {
        cst_nfa *n2 = cst_nfa_new();
        char msg[256];
        FUZZ_CHECK(n2 != NULL);
        (void)cst_regex(n2, (const char *)data, size, CST_JSON, false, msg, sizeof msg);
        FUZZ_CHECK(!cst_nfa_failed(n2) || msg[0] || cst_nfa_error(n2)[0]);
        cst_nfa_free(n2);
        (void)cst_regex_match((const char *)data, size, "abc", 3);
    }
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
