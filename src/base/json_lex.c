/* json_lex: the streaming JSON lexer (json_lex.h). It tolerates what is not
 * JSON, since the role policy reads whatever a prompt or a model writes: a
 * '{' or '[' in prose starts a value and its closing bracket ends it, an
 * unquoted word inside a value is a scalar up to the next whitespace or
 * structure byte, and stray closers never underflow the depth. */
#include "base/json_lex.h"

#include <stdbool.h>

/* The state, in 64 bits: mode (bits 0-2), the open string is a key (bit 3),
 * the next string in this object is a key (bit 4), the bytes are one value
 * (bit 5: BRISK_JSON_START_VALUE, depth 0 is structure and not prose),
 * nesting depth (bits 8-15, saturating at 255), and per level whether it is
 * an object (bits 16-63, the outer MAX_TRACKED levels; deeper ones are taken
 * as arrays). The prose start state is 0, so a zeroed array of states starts
 * every entry in prose. */
enum { M_TEXT = 0, M_STRUCT = 1, M_STR = 2, M_ESC = 3, M_ATOM = 4 };
#define MAX_TRACKED 48
#define MAX_DEPTH 255
#define VALUE_BIT ((uint64_t)1 << 5)
#define ST_MODE(s) ((int)((s) & 7u))
#define ST_KEY(s) (((s) >> 3) & 1u)
#define ST_EXPECT(s) (((s) >> 4) & 1u)
#define ST_DEPTH(s) ((int)(((s) >> 8) & 0xffu))

static uint64_t st_make(int mode, uint64_t key, uint64_t expect, uint64_t value, int depth, uint64_t stack) {
    return (uint64_t)mode | key << 3 | expect << 4 | value | (uint64_t)depth << 8 | (stack & 0xffffffffffffull) << 16;
}

static bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* the innermost open level is a tracked object (stack: bits 16-63 shifted down) */
static bool top_is_object(int depth, uint64_t stack) { return depth > 0 && depth <= MAX_TRACKED && ((stack >> (depth - 1)) & 1u); }

uint64_t brisk_json_lex_start(brisk_json_start start) { return start == BRISK_JSON_START_VALUE ? VALUE_BIT | M_STRUCT : 0; }

brisk_json_class brisk_json_lex_byte(uint64_t *state, uint8_t c) {
    const uint64_t s = *state, value = s & VALUE_BIT;
    uint64_t stack = s >> 16, key = ST_KEY(s), expect = ST_EXPECT(s);
    int mode = ST_MODE(s), depth = ST_DEPTH(s);
    brisk_json_class cls;
    if (mode == M_ATOM && (is_space(c) || c == ',' || c == '}' || c == ']' || c == ':')) mode = M_STRUCT;   /* the word ends here */
    switch (mode) {
    case M_STR:
        cls = key ? BRISK_JSON_KEY : BRISK_JSON_STRING;
        if (c == '\\') mode = M_ESC;
        else if (c == '"') mode = M_STRUCT, key = 0;
        break;
    case M_ESC:
        cls = key ? BRISK_JSON_KEY : BRISK_JSON_STRING;
        mode = M_STR;
        break;
    case M_ATOM: cls = BRISK_JSON_SCALAR; break;
    default:   /* prose or structure */
        if (c == '{' || c == '[') {
            if (depth < MAX_DEPTH) depth++;
            if (depth <= MAX_TRACKED) stack = c == '{' ? stack | (uint64_t)1 << (depth - 1) : stack & ~((uint64_t)1 << (depth - 1));
            mode = M_STRUCT;
            expect = c == '{';
            cls = BRISK_JSON_PUNCT;
        } else if (mode == M_TEXT) cls = BRISK_JSON_TEXT;
        else if (c == '}' || c == ']') {
            if (depth > 0) depth--;
            mode = depth || value ? M_STRUCT : M_TEXT;   /* prose resumes after the outermost value */
            expect = 0;
            cls = BRISK_JSON_PUNCT;
        } else if (c == '"') {
            key = expect && top_is_object(depth, stack);
            mode = M_STR;
            cls = key ? BRISK_JSON_KEY : BRISK_JSON_STRING;
        } else if (c == ':') expect = 0, cls = BRISK_JSON_PUNCT;
        else if (c == ',') expect = top_is_object(depth, stack), cls = BRISK_JSON_PUNCT;
        else if (is_space(c)) cls = BRISK_JSON_PUNCT;
        else mode = M_ATOM, cls = BRISK_JSON_SCALAR;
        break;
    }
    *state = st_make(mode, key, expect, value, depth, stack);
    return cls;
}

brisk_json_class brisk_json_lex_inside(uint64_t state) {
    switch (ST_MODE(state)) {
    case M_TEXT: return BRISK_JSON_TEXT;
    case M_STR: case M_ESC: return ST_KEY(state) ? BRISK_JSON_KEY : BRISK_JSON_STRING;
    case M_ATOM: return BRISK_JSON_SCALAR;
    default: return BRISK_JSON_PUNCT;
    }
}
