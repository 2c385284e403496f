/* gbnf: llama.cpp's grammar format (placeholder until the parser lands). */
#include "constrain/constrain.h"

brisk_status cst_gbnf_compile(cst_nfa *n, const char *text, size_t len, brisk_error *err) {
    (void)n; (void)text; (void)len;
    return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "GBNF grammars are not supported yet");
}
