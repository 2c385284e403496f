/* policy_role: issue #18's "role" retention for JSON in the context: every
 * slot gets the lexical role its token plays in the JSON around it, from a
 * JSON lexer that the engine runs over each sequence's tokens as they are
 * written (brisk_kv_policy_written; the token's text is the piece the
 * detokenizer renders, through the callback the engine attaches,
 * brisk_kv_policy_set_text):
 *   key    inside an object key's string (its quotes included),
 *   value  a string value, a number, true / false / null,
 *   punct  the structure: { } [ ] , : and whitespace between them,
 *   text   anything outside a JSON value (the prose around it).
 * A token takes the role of its first non-space byte (a space-only token
 * that of where it leaves the lexer: spaces after a number are punctuation). A slot's score is its age scaled by its role's
 * rate (below): the newest slots stay, as in StreamingLLM, but how far back
 * a role reaches depends on the role.
 *
 * The lexer's state after each slot is kept beside the slot (p->lexst), so a
 * truncation continues from the right state, and it moves with compaction
 * and forks as the scored policies' statistics do. A sequence re-synced to a
 * prompt (the prefix cache) or loaded from a state re-lexes its slots from
 * their tokens. The state is a pure function
 * of the sequence's tokens, so batch invariance holds. The lexer tolerates
 * what is not JSON: a '{' or '[' in prose starts a value and its closing
 * bracket ends it; an unquoted word inside one is read as a value. */
#include "kv/policy.h"


/* The state, in 64 bits: mode (bits 0-2), the open string is a key (bit 3), the
 * next string in this object is a key (bit 4), nesting depth (bits 8-15, up to
 * JSON_MAX_DEPTH tracked; deeper brackets count but are taken as arrays), and
 * per level whether it is an object (bits 16-63). */
enum { M_TEXT = 0, M_STRUCT = 1, M_STR = 2, M_ESC = 3, M_ATOM = 4 };
#define JSON_MAX_DEPTH 48
#define ST_MODE(s) ((int)((s) & 7u))
#define ST_KEY(s) (((s) >> 3) & 1u)
#define ST_EXPECT(s) (((s) >> 4) & 1u)
#define ST_DEPTH(s) ((int)(((s) >> 8) & 0xffu))

static uint64_t st_make(int mode, uint64_t key, uint64_t expect, int depth, uint64_t stack) {
    return (uint64_t)mode | key << 3 | expect << 4 | (uint64_t)depth << 8 | stack << 16;
}

static bool top_is_object(uint64_t s) {
    const int d = ST_DEPTH(s);
    return d > 0 && d <= JSON_MAX_DEPTH && ((s >> (16 + d - 1)) & 1u);
}

static bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* One byte: the new state and the byte's role. */
static uint8_t lex_byte(uint64_t *state, unsigned char c) {
    uint64_t s = *state, stack = s >> 16;
    int mode = ST_MODE(s), depth = ST_DEPTH(s);
    uint64_t key = ST_KEY(s), expect = ST_EXPECT(s);
    uint8_t role;
    if (mode == M_ATOM && (is_space(c) || c == ',' || c == '}' || c == ']' || c == ':')) mode = M_STRUCT;   /* the atom ends here */
    switch (mode) {
    case M_STR:
        role = key ? BRISK_KV_LEX_KEY : BRISK_KV_LEX_VALUE;
        if (c == '\\') mode = M_ESC;
        else if (c == '"') mode = M_STRUCT, key = 0;
        break;
    case M_ESC:
        role = key ? BRISK_KV_LEX_KEY : BRISK_KV_LEX_VALUE;
        mode = M_STR;
        break;
    case M_ATOM: role = BRISK_KV_LEX_VALUE; break;
    default:   /* text or structure */
        if (c == '{' || c == '[') {
            if (depth < 255) depth++;
            if (depth <= JSON_MAX_DEPTH) stack = c == '{' ? stack | (uint64_t)1 << (depth - 1) : stack & ~((uint64_t)1 << (depth - 1));
            mode = M_STRUCT;
            expect = c == '{';
            role = BRISK_KV_LEX_PUNCT;
        } else if (mode == M_TEXT) role = BRISK_KV_LEX_TEXT;
        else if (c == '}' || c == ']') {
            if (depth > 0) depth--;
            mode = depth ? M_STRUCT : M_TEXT;
            expect = 0;
            role = BRISK_KV_LEX_PUNCT;
        } else if (c == '"') {
            key = expect && top_is_object(st_make(mode, 0, 0, depth, stack));
            mode = M_STR;
            role = key ? BRISK_KV_LEX_KEY : BRISK_KV_LEX_VALUE;
        } else if (c == ':') expect = 0, role = BRISK_KV_LEX_PUNCT;
        else if (c == ',') expect = top_is_object(st_make(mode, 0, 0, depth, stack)), role = BRISK_KV_LEX_PUNCT;
        else if (is_space(c)) role = BRISK_KV_LEX_PUNCT;
        else mode = M_ATOM, role = BRISK_KV_LEX_VALUE;
        break;
    }
    *state = st_make(mode, key, expect, depth, stack & 0xffffffffffffull);
    return role;
}

uint8_t brisk_kv_json_step(uint64_t *state, const char *bytes, size_t n) {
    uint8_t role = BRISK_KV_LEX_TEXT;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)bytes[i];
        const bool in_string = ST_MODE(*state) == M_STR || ST_MODE(*state) == M_ESC;
        const uint8_t r = lex_byte(state, c);
        if (first && (in_string || !is_space(c))) role = r, first = false;
    }
    if (first) {   /* a space-only (or empty) token: the role of where it leaves the lexer (spaces end an atom) */
        const int mode = ST_MODE(*state);
        role = mode == M_TEXT ? BRISK_KV_LEX_TEXT : mode == M_STR || mode == M_ESC ? (ST_KEY(*state) ? BRISK_KV_LEX_KEY : BRISK_KV_LEX_VALUE)
               : mode == M_ATOM ? BRISK_KV_LEX_VALUE : BRISK_KV_LEX_PUNCT;
    }
    return role;
}

/* Each role's slots age at their own rate: a slot's score is -rate x its
 * age (positions since it was written), so the policy is StreamingLLM's
 * recency with a longer reach for some roles (each role's budget is what its
 * rate gives it). The rates were chosen on 10 chunks of MaskBench JSON at a
 * 50% budget (docs/KV.md "role"; all rates 1 is streaming): punctuation
 * twice as fast, values 0.75, keys 1.5 (faster than values: slowing keys,
 * the first guess, lost to streaming), text 1. */
static const float role_rate[BRISK_KV_N_LEX] = {[BRISK_KV_LEX_TEXT] = 1.0f, [BRISK_KV_LEX_PUNCT] = 2.0f, [BRISK_KV_LEX_VALUE] = 0.75f,
                                               [BRISK_KV_LEX_KEY] = 1.5f};

static float role_score(const brisk_kv_policy *p, const brisk_kv *kv, int32_t seq, int32_t slot) {
    const uint8_t lex = p->lex[(size_t)seq * (size_t)p->n_ctx + (size_t)slot];
    const int32_t age = brisk_kv_next_pos(kv, seq) - brisk_kv_slot_pos(kv, seq, slot);
    return -role_rate[lex < BRISK_KV_N_LEX ? lex : BRISK_KV_LEX_TEXT] * (float)age;
}

const brisk_kv_policy_ops brisk_kv_policy_role = {.name = "role", .score = role_score, .lexes = true};
