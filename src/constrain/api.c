/* api: brisk.h's constrained-decoding entry points over the internal engine, the finite-set front
 * end, and the vocabulary's token bytes. */
#include "constrain/constrain.h"
#include "base/json_lex.h"
/* only m->vocab is read: the token bytes need the tokenizer's own piece rendering */
#include "engine/engine_impl.h"
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

brisk_status cst_choice_compile(cst_nfa *n, const char *const *items, const size_t *lens, int32_t count, brisk_error *err) {
    if (count <= 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "a choice needs at least one string");
    const int32_t r = cst_rule_reserve(n);
    cst_mark m = cst_mark_here(n);
    cst_frag *alts = malloc((size_t)count * sizeof *alts);
    if (!alts) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < count; i++) alts[i] = cst_bytes(n, items[i], lens[i]);
    cst_frag f = cst_alt(n, m, alts, count);
    free(alts);
    if (cst_nfa_failed(n)) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "%s", cst_nfa_error(n));
    cst_rule_define(n, r, f);
    return BRISK_OK;
}

/* every token's bytes as the detokenizer renders them (control tokens: none); end tokens: the EOG set */
brisk_status cst_vocab_from_tokenizer(const brisk_vocab *v, cst_vocab **out, brisk_error *err);
brisk_status cst_vocab_from_tokenizer(const brisk_vocab *v, cst_vocab **out, brisk_error *err) {
    const int32_t nv = brisk_vocab_size(v);
    const size_t cap_piece = brisk_vocab_max_piece_len(v) + 1;
    uint32_t *off = malloc(((size_t)nv + 1) * sizeof *off);
    int32_t *eos = malloc((size_t)(nv ? nv : 1) * sizeof *eos);
    char *piece = malloc(cap_piece);
    uint8_t *pieces = NULL;
    size_t n_bytes = 0, cap = 1 << 20;
    pieces = malloc(cap);
    brisk_status st = BRISK_OK;
    if (!off || !eos || !piece || !pieces) { st = brisk_fail(err, BRISK_ERR_NOMEM, "out of memory"); goto done; }
    int32_t n_eos = 0;
    for (int32_t i = 0; i < nv; i++) {
        off[i] = (uint32_t)n_bytes;
        if (brisk_vocab_is_eog(v, i)) eos[n_eos++] = i;
        size_t len = 0;
        if (brisk_vocab_is_control(v, i) || brisk_token_to_piece(v, i, piece, cap_piece, &len, NULL) != BRISK_OK) len = 0;
        if (n_bytes + len > cap) {
            cap *= 2;
            uint8_t *p = realloc(pieces, cap);
            if (!p) { st = brisk_fail(err, BRISK_ERR_NOMEM, "out of memory"); goto done; }
            pieces = p;
        }
        memcpy(pieces + n_bytes, piece, len);
        n_bytes += len;
    }
    off[nv] = (uint32_t)n_bytes;
    st = cst_vocab_new(nv, pieces, off, eos, n_eos, out, err);
done:
    free(off); free(eos); free(piece); free(pieces);
    return st;
}

/* "A,B,C" with "\," for a comma and "\\" for a backslash inside an item */
static brisk_status split_choices(const char *src, size_t len, char ***items, size_t **lens, int32_t *count, brisk_error *err) {
    int32_t n = 1;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\\' && i + 1 < len) { i++; continue; }
        if (src[i] == ',') n++;
    }
    char **it = calloc((size_t)n, sizeof *it);
    size_t *ln = calloc((size_t)n, sizeof *ln);
    char *buf = malloc(len + 1);
    if (!it || !ln || !buf) {
        free(it); free(ln); free(buf);
        return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    }
    int32_t k = 0;
    size_t start = 0, w = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || src[i] == ',') {
            it[k] = buf + start;
            ln[k] = w - start;
            if (ln[k] == 0) {
                free(it); free(ln); free(buf);
                return brisk_fail(err, BRISK_ERR_INVALID_ARG, "choice %d is empty (write a comma inside a choice as \\,)", k + 1);
            }
            k++;
            start = w;
            continue;
        }
        if (src[i] == '\\' && i + 1 < len) i++;
        buf[w++] = src[i];
    }
    *items = it;
    *lens = ln;
    *count = k;
    return BRISK_OK;
}

/* Token roles come from brisk's JSON lexer (base/json_lex.h) over the output bytes, from its value start
 * (the output is one JSON value): exact on JSON, which is all a JSON Schema constraint lets through, so
 * it needs no grammar. Whether a level is an object is known for the outer 48 levels, deeper ones are
 * taken as arrays: a key nested deeper than 48 levels is reported as BRISK_ROLE_STRING. (Before the
 * lexer was shared this file kept its own with 256 levels, so the roles changed only past 48.) The depth
 * count saturates at 255 levels; only an output nested deeper than that would be mislabelled after it
 * closes, which a schema nested at most 128 levels deep reaches only through recursion. */
static const uint8_t role_of_class[BRISK_JSON_N_CLASSES] = {
    [BRISK_JSON_TEXT] = BRISK_ROLE_TEXT, [BRISK_JSON_PUNCT] = BRISK_ROLE_PUNCT,   [BRISK_JSON_KEY] = BRISK_ROLE_KEY,
    [BRISK_JSON_STRING] = BRISK_ROLE_STRING, [BRISK_JSON_SCALAR] = BRISK_ROLE_SCALAR,
};

struct brisk_constraint {
    cst_vocab *vocab;
    cst_grammar *g;
    int32_t state;
    bool ended;       /* an end token was accepted */
    int64_t budget;   /* tokens the output may take, its end token included; -1: none */
    int64_t used;     /* tokens accepted since the start (or the last reset) */
    bool json;        /* a JSON Schema constraint: roles from the lexer, else BRISK_ROLE_TEXT */
    uint64_t lex;     /* the JSON lexer's state (base/json_lex.h) */
    uint8_t last_roles[256];   /* per byte of the last accepted token */
    size_t last_len;
};

/* The budget rule (docs/CONSTRAIN.md): with r tokens left (this one included), a token is allowed only
 * when the output can still end within them: itself, then the fewest bytes to completion one token per
 * byte (the vocabulary has every single byte), then the end token: 1 + min_bytes(after) + 1 <= r. This
 * keeps the invariant min_bytes + 1 <= r, so some token always fits. When nothing can fit any more (the
 * budget was set late or is below the shortest output), tokens that bring the end closer by at least one
 * byte are kept, so the output still heads for completion. */
static void mask_with_budget(brisk_constraint *c, uint32_t *allowed, int32_t n_vocab) {
    const int64_t left = c->budget - c->used;
    const int32_t need = cst_min_bytes(c->g, c->state);
    int64_t limit = left - 2;
    if (need < INT32_MAX && limit < (int64_t)need - 1) limit = (int64_t)need - 1;
    if (limit >= INT32_MAX || !cst_mask_within(c->g, c->state, (int32_t)limit, allowed)) {
        cst_mask(c->g, c->state, allowed);
        return;
    }
    /* a stack deeper than the parser allows can make the estimate unreachable: never hand the sampler an empty mask */
    for (int32_t w = 0; w < (n_vocab + 31) / 32; w++)
        if (allowed[w]) return;
    cst_mask(c->g, c->state, allowed);
}

static void mask_fill(void *user, uint32_t *allowed, int32_t n_vocab) {
    brisk_constraint *c = user;
    const int32_t nv = cst_vocab_n(c->vocab);
    if (nv > n_vocab) return;   /* a vocabulary wider than the logits row: allow nothing */
    if (c->ended) return;
    if (c->budget >= 0) mask_with_budget(c, allowed, nv);
    else cst_mask(c->g, c->state, allowed);
}

static void mask_accept(void *user, int32_t token) { brisk_constraint_accept(user, token); }
static void mask_reset(void *user) { brisk_constraint_reset(user); }

brisk_status brisk_constraint_init(brisk_constraint **out, const brisk_model *m, brisk_constraint_kind kind, const char *src,
                                   size_t len, brisk_error *err) {
    *out = NULL;
    if (!m || !src) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "brisk_constraint_init: a model and a source are required");
    brisk_constraint *c = calloc(1, sizeof *c);
    cst_nfa *n = cst_nfa_new();
    if (!c || !n) {
        free(c);
        cst_nfa_free(n);
        return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    }
    brisk_status st;
    switch (kind) {
    case BRISK_CONSTRAINT_JSON_SCHEMA:
    case BRISK_CONSTRAINT_JSON_SCHEMA_COMPACT: {
        cst_schema_opts o = {.compact = kind == BRISK_CONSTRAINT_JSON_SCHEMA_COMPACT, .max_ws = CST_DEFAULT_MAX_WS};
        st = cst_schema_compile(n, src, len, &o, err);
        break;
    }
    case BRISK_CONSTRAINT_REGEX: st = cst_regex_compile(n, src, len, err); break;
    case BRISK_CONSTRAINT_GBNF: st = cst_gbnf_compile(n, src, len, err); break;
    case BRISK_CONSTRAINT_CHOICE: {
        char **items = NULL;
        size_t *lens = NULL;
        int32_t count = 0;
        st = split_choices(src, len, &items, &lens, &count, err);
        if (st == BRISK_OK) st = cst_choice_compile(n, (const char *const *)items, lens, count, err);
        if (items) free(items[0]);
        free(items);
        free(lens);
        break;
    }
    default: st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "unknown constraint kind %d", (int)kind);
    }
    if (st == BRISK_OK) st = cst_vocab_from_tokenizer(m->vocab, &c->vocab, err);
    if (st == BRISK_OK) st = cst_grammar_new(n, c->vocab, &c->g, err);
    cst_nfa_free(n);
    if (st != BRISK_OK) {
        brisk_constraint_free(c);
        return st;
    }
    c->state = cst_start(c->g);
    c->budget = -1;
    c->json = kind == BRISK_CONSTRAINT_JSON_SCHEMA || kind == BRISK_CONSTRAINT_JSON_SCHEMA_COMPACT;
    c->lex = brisk_json_lex_start(BRISK_JSON_START_VALUE);
    *out = c;
    return BRISK_OK;
}

void brisk_constraint_free(brisk_constraint *c) {
    if (!c) return;
    cst_grammar_free(c->g);
    cst_vocab_free(c->vocab);
    free(c);
}

brisk_mask brisk_constraint_mask(brisk_constraint *c) {
    return (brisk_mask){.user = c, .fill = mask_fill, .accept = mask_accept, .reset = mask_reset};
}

bool brisk_constraint_accept(brisk_constraint *c, int32_t token) {
    if (c->ended) return false;
    if (cst_is_eos(c->g, token)) {
        if (!cst_accepting(c->g, c->state)) {
            c->state = CST_DEAD;
            return false;
        }
        c->ended = true;
        return true;
    }
    c->state = cst_advance(c->g, c->state, token);
    c->used++;
    size_t len = 0;
    const uint8_t *bytes = cst_vocab_piece(c->vocab, token, &len);
    c->last_len = len;
    for (size_t i = 0; i < len; i++) c->last_roles[i] = c->json ? role_of_class[brisk_json_lex_byte(&c->lex, bytes[i])] : (uint8_t)BRISK_ROLE_TEXT;
    return c->state != CST_DEAD;
}

bool brisk_constraint_set_token_budget(brisk_constraint *c, int64_t n_tokens) {
    if (n_tokens < 0) {
        c->budget = -1;
        return true;
    }
    if (!cst_vocab_all_bytes(c->vocab)) {
        c->budget = -1;   /* one token per byte is not guaranteed: no bound can be promised, the masks stay as they are */
        return false;
    }
    c->budget = n_tokens;
    return true;
}

int32_t brisk_constraint_min_bytes(brisk_constraint *c) {
    if (c->ended) return 0;
    return cst_min_bytes(c->g, c->state);
}

bool brisk_constraint_complete(brisk_constraint *c) { return c->ended || cst_accepting(c->g, c->state); }

void brisk_constraint_reset(brisk_constraint *c) {
    c->state = cst_start(c->g);
    c->ended = false;
    c->used = 0;
    c->lex = brisk_json_lex_start(BRISK_JSON_START_VALUE);
    c->last_len = 0;
}

bool brisk_constraint_matches(brisk_constraint *c, const char *text, size_t len) {
    return cst_accepting(c->g, cst_advance_bytes(c->g, cst_start(c->g), (const uint8_t *)text, len));
}

brisk_token_role brisk_constraint_last_token_role(const brisk_constraint *c) {
    if (!c->json) return BRISK_ROLE_TEXT;
    for (size_t i = 0; i < c->last_len; i++)
        if (c->last_roles[i] != BRISK_ROLE_PUNCT) return (brisk_token_role)c->last_roles[i];
    return BRISK_ROLE_PUNCT;
}

size_t brisk_constraint_last_token_roles(const brisk_constraint *c, uint8_t *roles, size_t cap) {
    const size_t n = c->last_len < cap ? c->last_len : cap;
    if (roles) memcpy(roles, c->last_roles, n);
    return c->last_len;
}
