/* regex: the ECMAScript subset JSON Schema's `pattern` uses, compiled by recursive descent straight
 * into NFA fragments over code points (each atom a cst_chars set). Supported: literals, escapes
 * (\d \w \s and their negations, \n \t \xHH \uHHHH \u{H..} \cX, escaped punctuation), classes with
 * ranges and negation, '.', groups (capturing, (?:), named), alternation, the quantifiers * + ? {n}
 * {n,} {n,m} (and their lazy forms, the same language), and ^ / $ at the ends of a top-level
 * alternative. Lookaround, backreferences, word boundaries and \p{} are refused with an error. */
#include "constrain/nfa_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGEX_MAX_COUNT 10000   /* {n,m} bounds above this are refused */
#define REGEX_MAX_NEST 200

typedef struct rx {
    cst_nfa *n;
    const uint8_t *s;
    size_t len, i;
    cst_charmode mode;
    char *err;
    size_t err_cap;
    bool failed;
    int nest;
} rx;

static void rx_fail(rx *r, const char *msg) {
    if (r->failed) return;
    r->failed = true;
    snprintf(r->err, r->err_cap, "%s at offset %zu", msg, r->i);
}

static bool at_end(const rx *r) { return r->i >= r->len; }
static uint32_t peek(const rx *r) { return at_end(r) ? 0 : r->s[r->i]; }

/* next code point (lenient: a bad byte is itself) */
static uint32_t next_cp(rx *r) {
    const uint8_t c = r->s[r->i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (r->i + (size_t)len > r->len) len = 1;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (int k = 1; k < len; k++) {
        const uint8_t b = r->s[r->i + (size_t)k];
        if ((b & 0xC0) != 0x80) { len = 1; cp = c; break; }
        cp = cp << 6 | (b & 0x3Fu);
    }
    r->i += (size_t)len;
    return cp;
}

static void add_class(cst_cpset *s, char c) {
    switch (c) {
    case 'd': cst_cpset_add(s, '0', '9'); break;
    case 'w': cst_cpset_add(s, '0', '9'); cst_cpset_add(s, 'A', 'Z'); cst_cpset_add(s, 'a', 'z'); cst_cpset_add(s, '_', '_'); break;
    case 's':
        /* ECMAScript WhiteSpace and LineTerminator */
        cst_cpset_add(s, 0x09, 0x0D); cst_cpset_add(s, 0x20, 0x20); cst_cpset_add(s, 0xA0, 0xA0);
        cst_cpset_add(s, 0x1680, 0x1680); cst_cpset_add(s, 0x2000, 0x200A); cst_cpset_add(s, 0x2028, 0x2029);
        cst_cpset_add(s, 0x202F, 0x202F); cst_cpset_add(s, 0x205F, 0x205F); cst_cpset_add(s, 0x3000, 0x3000);
        cst_cpset_add(s, 0xFEFF, 0xFEFF);
        break;
    }
}

static int hexval(uint32_t c) {
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
    return -1;
}

static uint32_t read_hex(rx *r, int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        const int h = at_end(r) ? -1 : hexval(r->s[r->i]);
        if (h < 0) { rx_fail(r, "a bad hex escape"); return 0; }
        v = v << 4 | (uint32_t)h;
        r->i++;
    }
    return v;
}

/* After a backslash: a single code point (returns true, *cp), or a class added to set (returns false). */
static bool escape(rx *r, bool in_class, uint32_t *cp, cst_cpset *set) {
    if (at_end(r)) { rx_fail(r, "a trailing backslash"); return true; }
    const uint32_t c = next_cp(r);
    switch (c) {
    case 'd': case 'w': case 's': add_class(set, (char)c); return false;
    case 'D': case 'W': case 'S': {
        cst_cpset t = {0};
        add_class(&t, (char)(c + 32));
        cst_cpset_negate(&t);
        for (int32_t k = 0; k < t.n; k++) cst_cpset_add(set, t.r[k].lo, t.r[k].hi);
        cst_cpset_free(&t);
        return false;
    }
    case 'n': *cp = '\n'; return true;
    case 'r': *cp = '\r'; return true;
    case 't': *cp = '\t'; return true;
    case 'f': *cp = '\f'; return true;
    case 'v': *cp = '\v'; return true;
    case '0': *cp = 0; return true;
    case 'b':
        if (in_class) { *cp = '\b'; return true; }
        rx_fail(r, "a word boundary (\\b) is not supported");
        return true;
    case 'B': rx_fail(r, "a word boundary (\\B) is not supported"); return true;
    case 'x': *cp = read_hex(r, 2); return true;
    case 'u':
        if (peek(r) == '{') {
            r->i++;
            uint32_t v = 0;
            int k = 0;
            while (!at_end(r) && hexval(peek(r)) >= 0 && k < 7) { v = v << 4 | (uint32_t)hexval(peek(r)); r->i++; k++; }
            if (peek(r) != '}' || k == 0 || v > 0x10FFFF) { rx_fail(r, "a bad \\u{...} escape"); return true; }
            r->i++;
            *cp = v;
            return true;
        }
        *cp = read_hex(r, 4);
        if (*cp >= 0xD800 && *cp <= 0xDBFF && r->i + 1 < r->len && r->s[r->i] == '\\' && r->s[r->i + 1] == 'u') {
            const size_t save = r->i;
            r->i += 2;
            const uint32_t lo = read_hex(r, 4);
            if (lo >= 0xDC00 && lo <= 0xDFFF) *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
            else r->i = save;
        }
        return true;
    case 'c':
        if (!at_end(r) && ((peek(r) | 32) >= 'a' && (peek(r) | 32) <= 'z')) { *cp = next_cp(r) % 32; return true; }
        rx_fail(r, "a bad \\c escape");
        return true;
    case 'p': case 'P': rx_fail(r, "Unicode property escapes (\\p{...}) are not supported"); return true;
    case 'k': rx_fail(r, "named backreferences are not supported"); return true;
    default:
        if (c >= '1' && c <= '9') { rx_fail(r, "backreferences are not supported"); return true; }
        *cp = c;   /* escaped punctuation, or an identity escape */
        return true;
    }
}

static cst_frag set_frag(rx *r, cst_cpset *s) {
    cst_cpset_normalize(s);
    cst_frag f = cst_chars(r->n, s, r->mode);
    cst_cpset_free(s);
    return f;
}

static cst_frag parse_class(rx *r) {
    cst_cpset s = {0};
    bool neg = false;
    if (peek(r) == '^') { neg = true; r->i++; }
    bool first = true;
    while (!r->failed) {
        if (at_end(r)) { rx_fail(r, "an unterminated character class"); break; }
        if (peek(r) == ']' && !(first && false)) { r->i++; break; }
        first = false;
        uint32_t lo;
        bool single = true;
        if (peek(r) == '\\') {
            r->i++;
            single = escape(r, true, &lo, &s);
        } else {
            lo = next_cp(r);
        }
        if (!single) continue;
        if (peek(r) == '-' && r->i + 1 < r->len && r->s[r->i + 1] != ']') {
            r->i++;
            uint32_t hi;
            if (peek(r) == '\\') {
                r->i++;
                cst_cpset dummy = {0};
                if (!escape(r, true, &hi, &dummy)) {
                    /* [a-\d]: '-' is a literal, as ECMAScript's Annex B */
                    cst_cpset_add(&s, lo, lo);
                    cst_cpset_add(&s, '-', '-');
                    for (int32_t k = 0; k < dummy.n; k++) cst_cpset_add(&s, dummy.r[k].lo, dummy.r[k].hi);
                    cst_cpset_free(&dummy);
                    continue;
                }
                cst_cpset_free(&dummy);
            } else {
                hi = next_cp(r);
            }
            if (hi < lo) { rx_fail(r, "a character class range out of order"); break; }
            cst_cpset_add(&s, lo, hi);
        } else {
            cst_cpset_add(&s, lo, lo);
        }
    }
    if (neg) cst_cpset_negate(&s);
    if (r->failed) {
        cst_cpset_free(&s);
        return cst_never(r->n);
    }
    return set_frag(r, &s);
}

static cst_frag parse_alt(rx *r);

static cst_frag parse_atom(rx *r) {
    const uint32_t c = peek(r);
    if (c == '(') {
        r->i++;
        if (peek(r) == '?') {
            r->i++;
            const uint32_t k = peek(r);
            if (k == ':') {
                r->i++;
            } else if (k == '<' && r->i + 1 < r->len && r->s[r->i + 1] != '=' && r->s[r->i + 1] != '!') {
                while (!at_end(r) && peek(r) != '>') r->i++;
                if (at_end(r)) { rx_fail(r, "an unterminated group name"); return cst_never(r->n); }
                r->i++;
            } else {
                rx_fail(r, "lookaround assertions are not supported");
                return cst_never(r->n);
            }
        }
        if (++r->nest > REGEX_MAX_NEST) { rx_fail(r, "groups nested too deeply"); return cst_never(r->n); }
        cst_frag f = parse_alt(r);
        r->nest--;
        if (peek(r) != ')') { rx_fail(r, "an unclosed group"); return f; }
        r->i++;
        return f;
    }
    if (c == '[') {
        r->i++;
        return parse_class(r);
    }
    cst_cpset s = {0};
    if (c == '.') {
        r->i++;
        cst_cpset_add(&s, '\n', '\n');
        cst_cpset_add(&s, '\r', '\r');
        cst_cpset_add(&s, 0x2028, 0x2029);
        cst_cpset_negate(&s);
        return set_frag(r, &s);
    }
    if (c == '\\') {
        r->i++;
        uint32_t cp;
        if (escape(r, false, &cp, &s)) cst_cpset_add(&s, cp, cp);
        return set_frag(r, &s);
    }
    if (c == '^' || c == '$') { rx_fail(r, "an anchor inside the pattern is not supported"); return cst_never(r->n); }
    if (c == '*' || c == '+' || c == '?') { rx_fail(r, "nothing to repeat"); return cst_never(r->n); }
    if (c == ')') { rx_fail(r, "an unmatched ')'"); return cst_never(r->n); }
    const uint32_t cp = next_cp(r);
    cst_cpset_add(&s, cp, cp);
    return set_frag(r, &s);
}

static bool parse_int(rx *r, int64_t *v) {
    if (at_end(r) || peek(r) < '0' || peek(r) > '9') return false;
    int64_t x = 0;
    while (!at_end(r) && peek(r) >= '0' && peek(r) <= '9') {
        x = x * 10 + (peek(r) - '0');
        if (x > 100000000) x = 100000000;
        r->i++;
    }
    *v = x;
    return true;
}

/* {n}, {n,}, {n,m}; false (position restored) when the brace is a literal, as ECMAScript's Annex B */
static bool parse_braces(rx *r, int64_t *min, int64_t *max) {
    const size_t save = r->i;
    r->i++;
    if (!parse_int(r, min)) { r->i = save; return false; }
    *max = *min;
    if (peek(r) == ',') {
        r->i++;
        if (peek(r) == '}') *max = -1;
        else if (!parse_int(r, max)) { r->i = save; return false; }
    }
    if (peek(r) != '}') { r->i = save; return false; }
    r->i++;
    return true;
}

static cst_frag parse_seq(rx *r) {
    cst_mark m = cst_mark_here(r->n);
    cst_frag parts[64];
    int32_t np = 0;
    while (!r->failed && !at_end(r) && peek(r) != '|' && peek(r) != ')') {
        if (peek(r) == '$' && r->i + 1 == r->len) break;   /* the caller handles a final anchor */
        if (peek(r) == '$' && r->i + 1 < r->len && (r->s[r->i + 1] == '|' || r->s[r->i + 1] == ')') && r->nest == 0) break;
        cst_frag f = parse_atom(r);
        for (;;) {
            int64_t min, max;
            const uint32_t q = peek(r);
            if (q == '*') { min = 0; max = -1; r->i++; }
            else if (q == '+') { min = 1; max = -1; r->i++; }
            else if (q == '?') { min = 0; max = 1; r->i++; }
            else if (q == '{' && parse_braces(r, &min, &max)) {}
            else break;
            if (peek(r) == '?') r->i++;   /* lazy: the same language */
            if (max >= 0 && max < min) { rx_fail(r, "a {n,m} quantifier with m < n"); break; }
            if (min > REGEX_MAX_COUNT || max > REGEX_MAX_COUNT) { rx_fail(r, "a repeat count above 10000"); break; }
            f = cst_repeat_inline(r->n, f, (int32_t)min, (int32_t)max);
        }
        if (np == 64) {
            /* fold what we have into one part, so long literals need no big array */
            cst_frag folded = cst_seq(r->n, m, parts, np);
            parts[0] = folded;
            np = 1;
        }
        parts[np++] = f;
    }
    return cst_seq(r->n, m, parts, np);
}

static cst_frag parse_alt(rx *r) {
    cst_mark m = cst_mark_here(r->n);
    cst_frag parts[256];
    int32_t np = 0;
    for (;;) {
        cst_frag f = parse_seq(r);
        if (np == 256) {
            cst_frag folded = cst_alt(r->n, m, parts, np);
            parts[0] = folded;
            np = 1;
        }
        parts[np++] = f;
        if (r->failed || peek(r) != '|') break;
        r->i++;
    }
    return cst_alt(r->n, m, parts, np);
}

static cst_frag any_star(cst_nfa *n, cst_charmode mode) {
    cst_cpset all = {0};
    cst_cpset_add(&all, 0, 0x10FFFF);
    cst_cpset_normalize(&all);
    cst_frag c = cst_chars(n, &all, mode);
    cst_cpset_free(&all);
    return cst_repeat(n, c, 0, -1);
}

cst_frag cst_regex(cst_nfa *n, const char *re, size_t len, cst_charmode mode, bool anchored, char *err, size_t err_cap) {
    rx r = {.n = n, .s = (const uint8_t *)re, .len = len, .mode = mode, .err = err, .err_cap = err_cap};
    if (err_cap) err[0] = 0;
    cst_mark m = cst_mark_here(n);
    cst_frag alts[256];
    int32_t na = 0;
    for (;;) {
        const cst_mark am = cst_mark_here(n);
        bool head = false, tail = false;
        if (peek(&r) == '^') { head = true; r.i++; }
        cst_frag parts[3];
        int32_t np = 0;
        if (!head && !anchored) parts[np++] = any_star(n, mode);
        parts[np++] = parse_seq(&r);
        if (peek(&r) == '$') { tail = true; r.i++; }
        if (!tail && !anchored) parts[np++] = any_star(n, mode);
        if (r.failed) break;
        if (na == 256) { rx_fail(&r, "more than 256 top-level alternatives"); break; }
        alts[na++] = cst_seq(n, am, parts, np);
        if (at_end(&r)) break;
        if (peek(&r) == '|') { r.i++; continue; }
        if (peek(&r) == ')') rx_fail(&r, "an unmatched ')'");
        else rx_fail(&r, "an anchor inside the pattern is not supported");
        break;
    }
    if (r.failed) {
        cst_nfa_set_error(n, "regular expression: %s", err);
        return cst_never(n);
    }
    return cst_alt(n, m, alts, na);
}

/* ---- matching a string against a pattern (an NFA simulation, no calls) ------------------------- */

static void closure(const cst_nfa *n, const int32_t *off, const int32_t *adj, uint8_t *on, int32_t *list, int32_t *cnt) {
    for (int32_t i = 0; i < *cnt; i++) {
        const int32_t s = list[i];
        for (int32_t k = off[s]; k < off[s + 1]; k++) {
            const cst_edge *e = &n->e[adj[k]];
            if (e->kind == CST_E_EPS && !on[e->to]) {
                on[e->to] = 1;
                list[(*cnt)++] = e->to;
            }
        }
    }
}

int cst_regex_match(const char *re, size_t re_len, const char *text, size_t len) {
    cst_nfa *n = cst_nfa_new();
    if (!n) return -1;
    char err[256];
    cst_frag f = cst_regex(n, re, re_len, CST_RAW, false, err, sizeof err);
    int result = -1;
    int32_t *off = NULL, *adj = NULL, *a = NULL, *b = NULL;
    uint8_t *on = NULL;
    if (cst_nfa_failed(n)) goto done;
    const int32_t ns = n->n_states;
    off = calloc((size_t)ns + 1, sizeof *off);
    adj = malloc((size_t)(n->n_e ? n->n_e : 1) * sizeof *adj);
    a = malloc((size_t)ns * sizeof *a);
    b = malloc((size_t)ns * sizeof *b);
    on = calloc((size_t)ns, 1);
    if (!off || !adj || !a || !b || !on) goto done;
    for (int64_t i = 0; i < n->n_e; i++) off[n->e[i].from + 1]++;
    for (int32_t i = 0; i < ns; i++) off[i + 1] += off[i];
    int32_t *fill = malloc((size_t)ns * sizeof *fill);
    if (!fill) goto done;
    memcpy(fill, off, (size_t)ns * sizeof *fill);
    for (int64_t i = 0; i < n->n_e; i++) adj[fill[n->e[i].from]++] = (int32_t)i;
    free(fill);
    int32_t na = 0, nb;
    a[na++] = f.start;
    on[f.start] = 1;
    closure(n, off, adj, on, a, &na);
    for (size_t p = 0; p < len && na > 0; p++) {
        for (int32_t i = 0; i < na; i++) on[a[i]] = 0;
        nb = 0;
        const uint8_t c = (uint8_t)text[p];
        for (int32_t i = 0; i < na; i++)
            for (int32_t k = off[a[i]]; k < off[a[i] + 1]; k++) {
                const cst_edge *e = &n->e[adj[k]];
                if (e->kind == CST_E_RANGE && c >= e->lo && c <= e->hi && !on[e->to]) {
                    on[e->to] = 1;
                    b[nb++] = e->to;
                }
            }
        closure(n, off, adj, on, b, &nb);
        int32_t *t = a; a = b; b = t;
        na = nb;
    }
    result = 0;
    for (int32_t i = 0; i < na; i++)
        if (a[i] == f.end) result = 1;
done:
    free(off); free(adj); free(a); free(b); free(on);
    cst_nfa_free(n);
    return result;
}

brisk_status cst_regex_compile(cst_nfa *n, const char *re, size_t len, brisk_error *err) {
    char msg[256];
    const int32_t rule = cst_rule_reserve(n);
    cst_frag f = cst_regex(n, re, len, CST_RAW, true, msg, sizeof msg);
    if (cst_nfa_failed(n)) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "%s", cst_nfa_error(n));
    cst_rule_define(n, rule, f);
    return BRISK_OK;
}
