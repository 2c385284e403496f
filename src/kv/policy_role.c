/* policy_role: issue #18's "role" retention for JSON in the context: every
 * slot gets the lexical role its token plays in the JSON around it, from
 * brisk's JSON lexer (base/json_lex.h, from its prose start) that the engine
 * runs over each sequence's tokens as they are
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
 * bracket ends it; an unquoted word inside one is read as a value; nesting
 * deeper than 48 levels is taken as arrays. */
#include "kv/policy.h"

#include "base/json_lex.h"

/* The shared lexer's classes as the policy's roles: a string value and a scalar are both a value. */
static const uint8_t role_of_class[BRISK_JSON_N_CLASSES] = {
    [BRISK_JSON_TEXT] = BRISK_KV_LEX_TEXT,    [BRISK_JSON_PUNCT] = BRISK_KV_LEX_PUNCT,   [BRISK_JSON_KEY] = BRISK_KV_LEX_KEY,
    [BRISK_JSON_STRING] = BRISK_KV_LEX_VALUE, [BRISK_JSON_SCALAR] = BRISK_KV_LEX_VALUE,
};

static bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The state is base/json_lex.h's, from the prose start (0). */
uint8_t brisk_kv_json_step(uint64_t *state, const char *bytes, size_t n) {
    uint8_t role = BRISK_KV_LEX_TEXT;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)bytes[i];
        const brisk_json_class before = brisk_json_lex_inside(*state);
        const bool in_string = before == BRISK_JSON_KEY || before == BRISK_JSON_STRING;
        const uint8_t r = role_of_class[brisk_json_lex_byte(state, c)];
        if (first && (in_string || !is_space(c))) role = r, first = false;
    }
    /* a space-only (or empty) token: the role of where it leaves the lexer (spaces end a scalar) */
    if (first) role = role_of_class[brisk_json_lex_inside(*state)];
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
