/* gbnf: llama.cpp's grammar format (grammars/README.md there): rules `name ::= alternatives`, string
 * literals, character classes ([a-z], [^"\\]), '.', groups, '|', the postfix operators * + ? {m} {m,}
 * {m,n}, '#' comments. A newline ends a rule except right after '::=' or '|' and inside parentheses.
 * Every rule becomes an RTN rule (references are calls); "root" is the start. Characters are code
 * points in UTF-8, as llama.cpp's. */
#include "constrain/nfa_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GBNF_MAX_RULES 4096
#define GBNF_MAX_NEST 128
#define GBNF_MAX_COUNT 10000

typedef struct gp {
    cst_nfa *n;
    const uint8_t *s;
    size_t len, i;
    char **names;
    int32_t *rules;
    bool *defined;
    int32_t n_names;
    int nest;
    brisk_error *err;
    bool failed;
    int line;
} gp;

static void gfail(gp *p, const char *msg) {
    if (p->failed) return;
    p->failed = true;
    int line = 1;
    size_t col = 1;
    for (size_t k = 0; k < p->i && k < p->len; k++) {
        if (p->s[k] == '\n') { line++; col = 1; } else col++;
    }
    brisk_fail(p->err, BRISK_ERR_INVALID_ARG, "GBNF: %s at line %d, column %zu", msg, line, col);
}

static bool gend(const gp *p) { return p->i >= p->len; }
static uint8_t gpeek(const gp *p) { return gend(p) ? 0 : p->s[p->i]; }

static void skip_space(gp *p, bool newlines) {
    while (!gend(p)) {
        const uint8_t c = gpeek(p);
        if (c == '#') {
            while (!gend(p) && gpeek(p) != '\n' && gpeek(p) != '\r') p->i++;
        } else if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
            p->i++;
        } else {
            break;
        }
    }
}

static bool name_char(uint8_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

static int32_t rule_of(gp *p, const char *name, size_t len) {
    for (int32_t k = 0; k < p->n_names; k++)
        if (strlen(p->names[k]) == len && !memcmp(p->names[k], name, len)) return k;
    if (p->n_names >= GBNF_MAX_RULES) { gfail(p, "more than 4096 rules"); return -1; }
    char *nm = malloc(len + 1);
    if (!nm) { gfail(p, "out of memory"); return -1; }
    memcpy(nm, name, len);
    nm[len] = 0;
    const int32_t k = p->n_names++;
    p->names[k] = nm;
    p->rules[k] = cst_rule_reserve(p->n);
    p->defined[k] = false;
    return k;
}

static uint32_t decode_cp(gp *p) {
    const uint8_t c = p->s[p->i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (p->i + (size_t)len > p->len) len = 1;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (int k = 1; k < len; k++) {
        const uint8_t b = p->s[p->i + (size_t)k];
        if ((b & 0xC0) != 0x80) { len = 1; cp = c; break; }
        cp = cp << 6 | (b & 0x3Fu);
    }
    p->i += (size_t)len;
    return cp;
}

static uint32_t hex_escape(gp *p, int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        const uint8_t c = gpeek(p);
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (gend(p) || h < 0) { gfail(p, "a bad hex escape"); return 0; }
        v = v << 4 | (uint32_t)h;
        p->i++;
    }
    return v;
}

/* one character of a literal or class, escapes decoded */
static uint32_t char_at(gp *p) {
    if (gpeek(p) != '\\') return decode_cp(p);
    p->i++;
    if (gend(p)) { gfail(p, "a trailing backslash"); return 0; }
    const uint8_t c = p->s[p->i++];
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'x': return hex_escape(p, 2);
    case 'u': return hex_escape(p, 4);
    case 'U': return hex_escape(p, 8);
    case '\\': case '"': case '[': case ']': case '-': case '^': return c;
    default: gfail(p, "an unknown escape"); return 0;
    }
}

static cst_frag g_alts(gp *p);

static cst_frag one_cp(cst_nfa *n, uint32_t cp) {
    cst_cpset s = {0};
    cst_cpset_add(&s, cp, cp);
    cst_cpset_normalize(&s);
    cst_frag f = cst_chars(n, &s, CST_RAW);
    cst_cpset_free(&s);
    return f;
}

static cst_frag g_atom(gp *p) {
    cst_nfa *n = p->n;
    const uint8_t c = gpeek(p);
    if (c == '"') {
        p->i++;
        cst_mark m = cst_mark_here(n);
        cst_frag parts[64];
        int np = 0;
        while (!p->failed && gpeek(p) != '"') {
            if (gend(p)) { gfail(p, "an unterminated string literal"); break; }
            const uint32_t cp = char_at(p);
            if (p->failed) break;
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { gfail(p, "a character outside Unicode"); break; }
            if (np == 64) {
                cst_frag folded = cst_seq(n, m, parts, np);
                parts[0] = folded;
                np = 1;
            }
            parts[np++] = one_cp(n, cp);
        }
        p->i++;
        return cst_seq(n, m, parts, np);
    }
    if (c == '[') {
        p->i++;
        cst_cpset s = {0};
        bool neg = false;
        if (gpeek(p) == '^') { neg = true; p->i++; }
        while (!p->failed && gpeek(p) != ']') {
            if (gend(p)) { gfail(p, "an unterminated character class"); break; }
            const uint32_t lo = char_at(p);
            uint32_t hi = lo;
            if (gpeek(p) == '-' && p->i + 1 < p->len && p->s[p->i + 1] != ']') {
                p->i++;
                hi = char_at(p);
            }
            if (hi < lo) { gfail(p, "a character range out of order"); break; }
            cst_cpset_add(&s, lo, hi);
        }
        p->i++;
        if (neg) cst_cpset_negate(&s);
        else cst_cpset_normalize(&s);
        cst_frag f = p->failed ? cst_never(n) : cst_chars(n, &s, CST_RAW);
        cst_cpset_free(&s);
        return f;
    }
    if (c == '.') {
        p->i++;
        cst_cpset s = {0};
        cst_cpset_add(&s, 0, 0x10FFFF);
        cst_cpset_normalize(&s);
        cst_frag f = cst_chars(n, &s, CST_RAW);
        cst_cpset_free(&s);
        return f;
    }
    if (c == '(') {
        p->i++;
        if (++p->nest > GBNF_MAX_NEST) { gfail(p, "groups nested too deeply"); return cst_never(n); }
        skip_space(p, true);
        cst_frag f = g_alts(p);
        p->nest--;
        skip_space(p, true);
        if (gpeek(p) != ')') { gfail(p, "expected ')'"); return f; }
        p->i++;
        return f;
    }
    if (name_char(c)) {
        const size_t st = p->i;
        while (!gend(p) && name_char(gpeek(p))) p->i++;
        const int32_t k = rule_of(p, (const char *)p->s + st, p->i - st);
        if (k < 0) return cst_never(n);
        return cst_call_frag(n, p->rules[k]);
    }
    gfail(p, "expected a literal, a character class, '.', '(' or a rule name");
    return cst_never(n);
}

static bool g_int(gp *p, int64_t *v) {
    if (gpeek(p) < '0' || gpeek(p) > '9') return false;
    int64_t x = 0;
    while (gpeek(p) >= '0' && gpeek(p) <= '9') {
        x = x * 10 + (gpeek(p) - '0');
        if (x > 1000000) x = 1000000;
        p->i++;
    }
    *v = x;
    return true;
}

static cst_frag g_seq(gp *p) {
    cst_nfa *n = p->n;
    cst_mark m = cst_mark_here(n);
    cst_frag parts[64];
    int np = 0;
    for (;;) {
        skip_space(p, p->nest > 0);
        const uint8_t c = gpeek(p);
        if (p->failed || gend(p) || c == '|' || c == ')' || c == '\n' || c == '\r') break;
        cst_frag f = g_atom(p);
        for (;;) {
            const uint8_t q = gpeek(p);
            int64_t min, max;
            if (q == '*') { min = 0; max = -1; p->i++; }
            else if (q == '+') { min = 1; max = -1; p->i++; }
            else if (q == '?') { min = 0; max = 1; p->i++; }
            else if (q == '{') {
                p->i++;
                skip_space(p, false);
                if (!g_int(p, &min)) { gfail(p, "expected a number after '{'"); break; }
                skip_space(p, false);
                max = min;
                if (gpeek(p) == ',') {
                    p->i++;
                    skip_space(p, false);
                    if (!g_int(p, &max)) max = -1;
                    skip_space(p, false);
                }
                if (gpeek(p) != '}') { gfail(p, "expected '}'"); break; }
                p->i++;
                if (max >= 0 && max < min) { gfail(p, "a {m,n} repetition with n < m"); break; }
                if (min > GBNF_MAX_COUNT || max > GBNF_MAX_COUNT) { gfail(p, "a repetition count above 10000"); break; }
            } else break;
            f = cst_repeat(n, f, (int32_t)min, (int32_t)max);
        }
        if (np == 64) {
            cst_frag folded = cst_seq(n, m, parts, np);
            parts[0] = folded;
            np = 1;
        }
        parts[np++] = f;
    }
    return cst_seq(n, m, parts, np);
}

static cst_frag g_alts(gp *p) {
    cst_nfa *n = p->n;
    cst_mark m = cst_mark_here(n);
    cst_frag parts[128];
    int np = 0;
    for (;;) {
        cst_frag f = g_seq(p);
        if (np == 128) {
            cst_frag folded = cst_alt(n, m, parts, np);
            parts[0] = folded;
            np = 1;
        }
        parts[np++] = f;
        skip_space(p, p->nest > 0);
        if (p->failed || gpeek(p) != '|') break;
        p->i++;
        skip_space(p, true);
    }
    return cst_alt(n, m, parts, np);
}

brisk_status cst_gbnf_compile(cst_nfa *n, const char *text, size_t len, brisk_error *err) {
    gp p = {.n = n, .s = (const uint8_t *)text, .len = len, .err = err};
    p.names = calloc(GBNF_MAX_RULES, sizeof *p.names);
    p.rules = calloc(GBNF_MAX_RULES, sizeof *p.rules);
    p.defined = calloc(GBNF_MAX_RULES, sizeof *p.defined);
    if (!p.names || !p.rules || !p.defined) {
        free(p.names); free(p.rules); free(p.defined);
        return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    }
    /* "root" is rule 0 */
    rule_of(&p, "root", 4);
    for (;;) {
        skip_space(&p, true);
        if (p.failed || gend(&p)) break;
        const size_t st = p.i;
        while (!gend(&p) && name_char(gpeek(&p))) p.i++;
        if (p.i == st) { gfail(&p, "expected a rule name"); break; }
        const int32_t k = rule_of(&p, text + st, p.i - st);
        if (k < 0) break;
        skip_space(&p, false);
        if (p.i + 3 > len || memcmp(text + p.i, "::=", 3)) { gfail(&p, "expected '::='"); break; }
        p.i += 3;
        skip_space(&p, true);
        if (p.defined[k]) { gfail(&p, "a rule defined twice"); break; }
        cst_frag body = g_alts(&p);
        if (p.failed) break;
        skip_space(&p, false);
        if (!gend(&p) && gpeek(&p) != '\n' && gpeek(&p) != '\r') { gfail(&p, "unexpected text after a rule"); break; }
        /* a fresh end, so the rule's final mark stays off inner states */
        cst_mark m = {body.s_lo, body.e_lo};
        const int32_t end = cst_state(n);
        cst_eps(n, body.end, end);
        cst_rule_define(n, p.rules[k], cst_frag_close(n, m, body.start, end));
        p.defined[k] = true;
    }
    brisk_status st = BRISK_OK;
    if (p.failed) {
        st = err ? err->status : BRISK_ERR_INVALID_ARG;
    } else if (!p.defined[0]) {
        st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "GBNF: the grammar has no 'root' rule");
    } else {
        for (int32_t k = 0; k < p.n_names; k++)
            if (!p.defined[k]) { st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "GBNF: rule '%s' is used but never defined", p.names[k]); break; }
    }
    if (st == BRISK_OK && cst_nfa_failed(n)) st = brisk_fail(err, BRISK_ERR_UNSUPPORTED, "GBNF: %s", cst_nfa_error(n));
    for (int32_t k = 0; k < p.n_names; k++) free(p.names[k]);
    free(p.names); free(p.rules); free(p.defined);
    return st;
}
