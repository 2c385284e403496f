/* constrain: grammars compiled to token masks (docs/CONSTRAIN.md).
 *
 * Every front end (JSON Schema, regular expressions, GBNF, finite sets) emits
 * one internal form: a recursive transition network (RTN). It is an NFA over
 * bytes whose states belong to rules; besides byte-range and epsilon edges an
 * edge may CALL a rule (run it to its end, then continue at the edge's
 * target). Non-recursive structure is inlined, so most JSON schemas compile
 * to a single rule, i.e. a plain regular language.
 *
 * The runtime (automaton.c) determinizes lazily: a DFA state is an epsilon-
 * closed set of NFA states of one rule; a frame is (DFA state, parent frame),
 * hash-consed, so a stack is a frame id (a graph-structured stack); a
 * configuration set ("cset") is a sorted set of frames, hash-consed too. A
 * cset has a lazily filled 256-entry transition table, so walking the
 * vocabulary trie is one table load per trie node, and whole subtrees are
 * skipped as soon as a prefix dies. Each cset's token mask is computed once
 * and cached. */
#ifndef BRISK_CONSTRAIN_H
#define BRISK_CONSTRAIN_H

#include "base/base.h"

/* ---- the vocabulary as byte strings, with its trie --------------------------------------------- */

typedef struct cst_vocab cst_vocab;
/* bytes of token i: pieces[off[i] .. off[i+1]); an empty piece is never allowed by a grammar.
 * eos: the tokens allowed when the grammar is complete (end of generation). */
brisk_status cst_vocab_new(int32_t n_vocab, const uint8_t *pieces, const uint32_t *off, const int32_t *eos, int32_t n_eos,
                           cst_vocab **out, brisk_error *err);
void cst_vocab_free(cst_vocab *v);
int32_t cst_vocab_n(const cst_vocab *v);
/* every single byte is a token of its own: any byte string can then be written one token per byte */
bool cst_vocab_all_bytes(const cst_vocab *v);
/* the bytes of token tok (len 0 for control tokens and ids out of range) */
const uint8_t *cst_vocab_piece(const cst_vocab *v, int32_t tok, size_t *len);

/* ---- the NFA builder (front ends write into it) ------------------------------------------------ */

typedef struct cst_nfa cst_nfa;
/* A fragment: states [s_lo, s_hi) and edges [e_lo, e_hi) made while building it, entered at start and
 * left at end. All its edges stay inside its states, so a fragment can be copied. */
typedef struct cst_frag {
    int32_t start, end;
    int32_t s_lo, s_hi;
    int64_t e_lo, e_hi;
} cst_frag;

cst_nfa *cst_nfa_new(void);
void cst_nfa_free(cst_nfa *n);
/* the first error (budget exceeded, out of memory) sticks; every builder call is then a no-op */
bool cst_nfa_failed(const cst_nfa *n);
const char *cst_nfa_error(const cst_nfa *n);
void cst_nfa_set_error(cst_nfa *n, const char *fmt, ...) BRISK_PRINTF(2, 3);
int32_t cst_nfa_n_states(const cst_nfa *n);

/* mark where a fragment begins (states and edges made from now on belong to it) */
typedef struct cst_mark { int32_t s; int64_t e; } cst_mark;
cst_mark cst_mark_here(const cst_nfa *n);
cst_frag cst_frag_close(const cst_nfa *n, cst_mark m, int32_t start, int32_t end);

int32_t cst_state(cst_nfa *n);
void cst_eps(cst_nfa *n, int32_t from, int32_t to);
void cst_range(cst_nfa *n, int32_t from, uint8_t lo, uint8_t hi, int32_t to);
void cst_call(cst_nfa *n, int32_t from, int32_t rule, int32_t to);

/* combinators: each returns a new fragment made of the given ones (which must be the latest made, in order) */
cst_frag cst_empty(cst_nfa *n);
cst_frag cst_never(cst_nfa *n);
cst_frag cst_bytes(cst_nfa *n, const void *s, size_t len);
cst_frag cst_seq(cst_nfa *n, cst_mark m, const cst_frag *parts, int32_t count);
cst_frag cst_alt(cst_nfa *n, cst_mark m, const cst_frag *parts, int32_t count);
/* a fresh copy of f (its states and edges duplicated) */
cst_frag cst_copy(cst_nfa *n, cst_frag f);
/* f repeated min..max times (max < 0: unbounded); f must be the latest fragment made. Large repeats turn f
 * into a rule and repeat calls to it. */
cst_frag cst_repeat(cst_nfa *n, cst_frag f, int32_t min, int32_t max);
/* the same, always copied in place (for fragments that will be intersected) */
cst_frag cst_repeat_inline(cst_nfa *n, cst_frag f, int32_t min, int32_t max);
cst_frag cst_opt(cst_nfa *n, cst_frag f);
/* the strings both a and b accept (neither may call rules); a and b stay as unused states */
cst_frag cst_intersect(cst_nfa *n, cst_frag a, cst_frag b);

/* Rules: a rule id is reserved first (so recursive uses can call it), then its body defined. */
int32_t cst_rule_reserve(cst_nfa *n);
void cst_rule_define(cst_nfa *n, int32_t rule, cst_frag body);
bool cst_rule_defined(const cst_nfa *n, int32_t rule);
/* a fragment that calls rule */
cst_frag cst_call_frag(cst_nfa *n, int32_t rule);
/* Make f a rule and return a fragment calling it (f is then no longer used in place). */
cst_frag cst_as_call(cst_nfa *n, cst_frag f);

/* ---- characters: code point sets to byte automata ---------------------------------------------- */

typedef struct cst_cprange { uint32_t lo, hi; } cst_cprange;
typedef struct cst_cpset {
    cst_cprange *r;
    int32_t n, cap;
} cst_cpset;
void cst_cpset_add(cst_cpset *s, uint32_t lo, uint32_t hi);
void cst_cpset_normalize(cst_cpset *s);   /* sort, merge, drop surrogates, clamp to U+10FFFF */
void cst_cpset_negate(cst_cpset *s);      /* complement in [0, U+10FFFF] minus surrogates (normalizes) */
void cst_cpset_free(cst_cpset *s);
bool cst_cpset_has(const cst_cpset *s, uint32_t cp);

typedef enum cst_charmode {
    CST_RAW = 0,    /* the character's UTF-8 bytes */
    CST_JSON = 1,   /* inside a JSON string, in json.dumps(ensure_ascii=False)'s canonical escaping */
} cst_charmode;
/* one character of set s */
cst_frag cst_chars(cst_nfa *n, const cst_cpset *s, cst_charmode mode);
/* one JSON string character: any code point, canonical escaping */
cst_frag cst_json_char(cst_nfa *n);

/* ---- front ends -------------------------------------------------------------------------------- */

/* Regular expression (ECMAScript subset used by JSON Schema `pattern`). anchored: the whole text must
 * match (CLI --regex); otherwise ^ and $ anchor and an unanchored side may have anything around it
 * (JSON Schema semantics). Errors go to the NFA error and return cst_never. */
cst_frag cst_regex(cst_nfa *n, const char *re, size_t len, cst_charmode mode, bool anchored, char *err, size_t err_cap);
/* Does text (a decoded string, UTF-8) match the pattern (JSON Schema semantics)? -1 when the pattern is
 * not supported. Used to check enum values and property names against patterns. */
int cst_regex_match(const char *re, size_t re_len, const char *text, size_t len);

#define CST_DEFAULT_MAX_WS 20   /* whitespace characters between two JSON tokens at most */
typedef struct cst_schema_opts {
    bool compact;        /* no whitespace but json.dumps' ", " and ": " */
    int32_t max_ws;      /* whitespace run limit in flexible mode (0: unlimited) */
} cst_schema_opts;
/* JSON Schema text -> the NFA's rule 0. BRISK_ERR_UNSUPPORTED names the keyword and its JSON pointer. */
brisk_status cst_schema_compile(cst_nfa *n, const char *text, size_t len, const cst_schema_opts *o, brisk_error *err);
struct json_t;
/* the same from a parsed document (borrowed) */
brisk_status cst_schema_compile_json(cst_nfa *n, struct json_t *root, const cst_schema_opts *o, brisk_error *err);
/* Python's json.dumps(v, ensure_ascii=False) (separators ", " and ": "), malloc'd and NUL-terminated; NULL: out of memory */
char *cst_json_dumps(const struct json_t *v, size_t *len);
/* GBNF (llama.cpp's grammar format), root rule "root" -> rule 0 */
brisk_status cst_gbnf_compile(cst_nfa *n, const char *text, size_t len, brisk_error *err);
/* a finite set of strings -> rule 0 */
brisk_status cst_choice_compile(cst_nfa *n, const char *const *items, const size_t *lens, int32_t count, brisk_error *err);
/* regex, anchored, raw bytes -> rule 0 */
brisk_status cst_regex_compile(cst_nfa *n, const char *re, size_t len, brisk_error *err);

/* ---- the matcher ------------------------------------------------------------------------------- */

typedef struct cst_grammar cst_grammar;
/* Takes the NFA (rule 0 is the start); v is borrowed and must outlive the grammar. */
brisk_status cst_grammar_new(cst_nfa *n, const cst_vocab *v, cst_grammar **out, brisk_error *err);
void cst_grammar_free(cst_grammar *g);

/* A matcher's state is a cset id of its grammar: CST_DEAD when nothing can follow. */
#define CST_DEAD (-1)
int32_t cst_start(cst_grammar *g);
/* allowed: (n_vocab + 31) / 32 words, overwritten. Returns false when the state space budget ran out
 * (the mask then allows only the end tokens). */
bool cst_mask(cst_grammar *g, int32_t state, uint32_t *allowed);
/* the state after token tok (CST_DEAD when not allowed); end tokens are handled by the caller */
int32_t cst_advance(cst_grammar *g, int32_t state, int32_t tok);
/* The fewest bytes from state to a complete output (0: complete now), from a shortest-derivation fixpoint
 * over the rules and the state's stack; INT32_MAX for CST_DEAD. */
int32_t cst_min_bytes(cst_grammar *g, int32_t state);
/* cst_mask, keeping only the tokens after which the output can still complete within `limit` bytes (the
 * end tokens when complete). When no allowed token goes past the limit the mask is cst_mask's exactly
 * (cached); otherwise one more trie walk, not cached. limit INT32_MAX: cst_mask. */
bool cst_mask_within(cst_grammar *g, int32_t state, int32_t limit, uint32_t *allowed);
int32_t cst_advance_bytes(cst_grammar *g, int32_t state, const uint8_t *s, size_t len);
bool cst_accepting(cst_grammar *g, int32_t state);
bool cst_is_eos(const cst_grammar *g, int32_t tok);
/* work counters (tests, maskbench) */
typedef struct cst_stats {
    int64_t masks_computed, masks_cached, csets, frames, dfa_states, nfa_states;
    int64_t masks_shared;      /* of masks_computed: short tokens taken from an agreeing state */
    size_t bytes;
} cst_stats;
void cst_grammar_stats(const cst_grammar *g, cst_stats *s);

#endif
