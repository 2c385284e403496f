/* json_lex: brisk's one streaming JSON lexer, a byte at a time with its
 * whole state in 64 bits, so a caller can keep a state per token (the role
 * KV policy keeps one per slot). It labels each byte with its class in the
 * JSON around it and needs no grammar: the container stack, whether an
 * object wants a key, and whether a string (or its escape) or a scalar is
 * open. On valid JSON it is exact; on anything else it never fails, it only
 * labels. Its two callers map the classes onto their own roles: a JSON
 * Schema constraint's token roles (constrain/api.c, BRISK_ROLE_*) and the
 * role retention policy's (kv/policy_role.c, BRISK_KV_LEX_*).
 *
 * Nesting is counted to 255 levels (deeper brackets saturate the count) and
 * whether a level is an object is known for the outer 48: a deeper level is
 * taken as an array, so a key there is labelled a string value. */
#ifndef BRISK_JSON_LEX_H
#define BRISK_JSON_LEX_H

#include <stdint.h>

/* What a byte is. */
typedef enum brisk_json_class {
    BRISK_JSON_TEXT = 0,     /* outside any JSON value (prose start only) */
    BRISK_JSON_PUNCT = 1,    /* { } [ ] , : and whitespace inside a value */
    BRISK_JSON_KEY = 2,      /* an object key's string, quotes and escapes included */
    BRISK_JSON_STRING = 3,   /* a string value, quotes and escapes included */
    BRISK_JSON_SCALAR = 4,   /* a number, true, false, null (or any other unquoted word) */
} brisk_json_class;
#define BRISK_JSON_N_CLASSES 5

/* Where the lexer starts. */
typedef enum brisk_json_start {
    /* Text that may hold JSON among prose (a prompt, a model's free reply): bytes are TEXT until a
     * '{' or '[' opens a value, and TEXT again after that value's closing bracket. The start state is 0. */
    BRISK_JSON_START_PROSE = 0,
    /* The bytes are one JSON value from the first (a JSON Schema constraint's output): whitespace and
     * structure are PUNCT at every depth, a top-level string or scalar is a value, nothing is TEXT. */
    BRISK_JSON_START_VALUE = 1,
} brisk_json_start;

/* The state before the first byte. */
uint64_t brisk_json_lex_start(brisk_json_start start);

/* One byte: advances *state and returns the byte's class. */
brisk_json_class brisk_json_lex_byte(uint64_t *state, uint8_t byte);

/* What the lexer stands inside after the bytes so far: KEY or STRING in an open string, SCALAR in an
 * unquoted word that has not ended yet, TEXT in prose, PUNCT between the tokens of a value. */
brisk_json_class brisk_json_lex_inside(uint64_t state);

#endif
