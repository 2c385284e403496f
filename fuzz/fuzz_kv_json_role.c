/* fuzz_kv_json_role: libFuzzer target for brisk's JSON lexer (src/base/json_lex.c)
 * as the role policy steps it over tokens (src/kv/policy_role.c,
 * brisk_kv_json_step), which reads every token's text of a sequence under
 * --kv-policy role: whatever a prompt or a model writes; and as a JSON Schema
 * constraint's token roles read it, from its value start.
 * The input is a stream of tokens, each a length byte (low 4 bits: 0-15
 * bytes) and its bytes. Invariants, each a crash when broken: every role is
 * one of the four (brisk_kv_lex); the state after the stream depends only on
 * its bytes, not on how they were split into tokens (fed again one byte per
 * token, the final state is the same bits), so chunking never changes a
 * slot's role context; the depth field saturates, never wraps; from the
 * value start every byte's class is a valid one and never text.
 * Seeds: fuzz/corpus/fuzz_kv_json_role/ (JSON documents cut at every kind of
 * boundary, escapes split across tokens, 300 levels of nesting, stray
 * closers, lone quotes, NUL bytes, prose with braces). */
#include "fuzz_check.h"
#include "base/json_lex.h"
#include "kv/policy.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    uint64_t tokens = 0, bytes = 0, value = brisk_json_lex_start(BRISK_JSON_START_VALUE);
    size_t i = 0;
    while (i < size) {
        const size_t n = data[i] & 15u;
        const size_t take = n < size - i - 1 ? n : size - i - 1;
        const uint8_t role = brisk_kv_json_step(&tokens, (const char *)data + i + 1, take);
        FUZZ_CHECK(role < BRISK_KV_N_LEX);
        for (size_t j = 0; j < take; j++) {
            FUZZ_CHECK(brisk_kv_json_step(&bytes, (const char *)data + i + 1 + j, 1) < BRISK_KV_N_LEX);
            const brisk_json_class c = brisk_json_lex_byte(&value, data[i + 1 + j]);
            FUZZ_CHECK(c > BRISK_JSON_TEXT && c < BRISK_JSON_N_CLASSES);
        }
        i += 1 + take;
    }
    FUZZ_CHECK(tokens == bytes);
    return 0;
}
