/* lexer: template source -> tokens, with jinja2's whitespace control as
 * transformers configures it (trim_blocks=True, lstrip_blocks=True):
 *   - `{%-`/`{{-`/`{#-` strip all whitespace before the tag, `-%}`/`-}}`/`-#}`
 *     all whitespace after it;
 *   - trim_blocks: the first newline after a block or comment tag is dropped
 *     (not after `+%}`);
 *   - lstrip_blocks: spaces and tabs from the start of a line up to a block or
 *     comment tag are dropped (not before `{%+`).
 * The source was normalized first (\r\n and \r to \n, one trailing newline
 * dropped), so every token is a slice of it. */
#include "template/tpl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer {
    const char *s;
    size_t n;
    size_t pos;
    uint32_t line;
    bool line_starting;   /* the last match ended with a newline (jinja2's line_starting) */
    tpl_tokens *out;
    brisk_error *err;
} lexer;

static brisk_status lex_fail(lexer *lx, const char *fmt, ...) BRISK_PRINTF(2, 3);
static brisk_status lex_fail(lexer *lx, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return brisk_fail(lx->err, BRISK_ERR_TEMPLATE, "template line %u: %s", lx->line, msg);
}

static brisk_status emit(lexer *lx, tpl_tok_type type, const char *p, size_t n, uint32_t line) {
    tpl_tokens *t = lx->out;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        tpl_token *v = realloc(t->v, cap * sizeof *v);
        if (!v) return brisk_fail(lx->err, BRISK_ERR_NOMEM, "template: out of memory");
        t->v = v;
        t->cap = cap;
    }
    tpl_token *k = &t->v[t->n++];
    memset(k, 0, sizeof *k);
    k->type = (uint8_t)type;
    k->line = line;
    k->text = (tpl_str){p, n};
    if (type == TPL_T_OP) {
        memcpy(k->op, p, n < 2 ? n : 2);
    }
    return BRISK_OK;
}

/* Python's \s at s[i]: its byte length, or 0. */
static size_t space_at(const char *s, size_t n, size_t i) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return tpl_is_space(c) ? 1 : 0;
    size_t j = i;
    uint32_t cp = tpl_utf8_next(s, n, &j);
    return tpl_is_space(cp) ? j - i : 0;
}

static size_t skip_space(lexer *lx, size_t i) {
    size_t k;
    while (i < lx->n && (k = space_at(lx->s, lx->n, i)) > 0) {
        if (lx->s[i] == '\n') lx->line++;
        i += k;
    }
    return i;
}

static uint32_t count_nl(const char *p, size_t n) {
    uint32_t c = 0;
    for (size_t i = 0; i < n; i++) c += p[i] == '\n';
    return c;
}

/* Text before a tag, stripped per the tag's sign ('-', '+' or 0); block is
 * true for block/comment tags (lstrip_blocks does not touch {{). */
static size_t strip_text_end(lexer *lx, size_t start, size_t end, char sign, bool block) {
    if (sign == '-') {
        /* rstrip(): back over whitespace code points */
        size_t e = end;
        while (e > start) {
            size_t b = e - 1;
            while (b > start && ((unsigned char)lx->s[b] & 0xC0) == 0x80) b--;
            if (space_at(lx->s, lx->n, b) != e - b) break;
            e = b;
        }
        return e;
    }
    if (sign == '+' || !block) return end;
    size_t l = end;
    while (l > start && lx->s[l - 1] != '\n') l--;
    if (l == start && !lx->line_starting) return end;
    if (l == end) return end;
    for (size_t i = l; i < end;) {
        size_t k = space_at(lx->s, lx->n, i);
        if (!k) return end;
        i += k;
    }
    return l;
}

static bool match_at(const lexer *lx, size_t i, const char *lit) {
    size_t k = strlen(lit);
    return i + k <= lx->n && memcmp(lx->s + i, lit, k) == 0;
}

/* After a block/comment end marker "%}"/"#}" at i (2 bytes), with the sign
 * before it: returns the position after the end (incl. trimmed whitespace). */
static size_t after_block_end(lexer *lx, size_t i, char sign) {
    size_t p = i + 2;
    if (sign == '-') {
        p = skip_space(lx, p);
    } else if (sign != '+' && p < lx->n && lx->s[p] == '\n') {
        lx->line++;
        p++;
    }
    lx->line_starting = p > 0 && lx->s[p - 1] == '\n';
    return p;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80; }
static bool is_name_char(unsigned char c) { return is_name_start(c) || is_digit((char)c); }

/* (\d+_)*\d+ at i: end position, or i when absent. */
static size_t digits_(const lexer *lx, size_t i, bool (*ok)(char)) {
    size_t p = i;
    if (p >= lx->n || !ok(lx->s[p])) return i;
    while (p < lx->n && ok(lx->s[p])) p++;
    while (p + 1 < lx->n && lx->s[p] == '_' && ok(lx->s[p + 1])) {
        p++;
        while (p < lx->n && ok(lx->s[p])) p++;
    }
    return p;
}

static size_t float_at(const lexer *lx, size_t i) {
    if (i > 0 && lx->s[i - 1] == '.') return 0;
    size_t p = digits_(lx, i, is_digit);
    if (p == i) return 0;
    size_t frac = p;
    if (p + 1 < lx->n && lx->s[p] == '.' && is_digit(lx->s[p + 1])) frac = digits_(lx, p + 1, is_digit);
    size_t e = frac;
    if (e < lx->n && (lx->s[e] == 'e' || lx->s[e] == 'E')) {
        size_t q = e + 1;
        if (q < lx->n && (lx->s[q] == '+' || lx->s[q] == '-')) q++;
        size_t r = digits_(lx, q, is_digit);
        if (r > q) return r;
    }
    return frac > p ? frac : 0;
}

static bool is_bin(char c) { return c == '0' || c == '1'; }
static bool is_oct(char c) { return c >= '0' && c <= '7'; }
static bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* (_?X)+ after a prefix */
static size_t prefixed_digits(const lexer *lx, size_t p, bool (*ok)(char)) {
    size_t start = p;
    for (;;) {
        size_t q = p;
        if (q < lx->n && lx->s[q] == '_') q++;
        if (q < lx->n && ok(lx->s[q])) p = q + 1;
        else break;
    }
    return p > start ? p : 0;
}

static size_t int_at(const lexer *lx, size_t i) {
    const char *s = lx->s;
    if (s[i] == '0' && i + 1 < lx->n) {
        char x = s[i + 1];
        size_t r = 0;
        if (x == 'b' || x == 'B') r = prefixed_digits(lx, i + 2, is_bin);
        else if (x == 'o' || x == 'O') r = prefixed_digits(lx, i + 2, is_oct);
        else if (x == 'x' || x == 'X') r = prefixed_digits(lx, i + 2, is_hex);
        if (r) return r;
    }
    if (s[i] == '0') {
        size_t p = i + 1;
        for (;;) {
            size_t q = p;
            if (q < lx->n && s[q] == '_') q++;
            if (q < lx->n && s[q] == '0') p = q + 1;
            else break;
        }
        return p;
    }
    size_t p = i + 1;
    for (;;) {
        size_t q = p;
        if (q < lx->n && s[q] == '_') q++;
        if (q < lx->n && is_digit(s[q])) p = q + 1;
        else break;
    }
    return p;
}

static const char *const ops2[] = {"//", "**", "==", "!=", ">=", "<="};
static const char ops1[] = "+-/*%~[](){}><=.:|,;";

/* Tokens inside {{ }} or {% %} up to and including the end marker. */
static brisk_status lex_tag(lexer *lx, size_t p, bool block) {
    char balance[TPL_MAX_NEST / 2];   /* the parser's nesting limit (parser.c) */
    int depth = 0;
    brisk_status st;
    for (;;) {
        p = skip_space(lx, p);
        if (p >= lx->n) return lex_fail(lx, "unexpected end of template inside a %s", block ? "block tag" : "variable tag");
        const char *s = lx->s;
        if (depth == 0) {
            if (block) {
                char sign = 0;
                size_t q = p;
                if (s[q] == '-' || s[q] == '+') sign = s[q++];
                if (match_at(lx, q, "%}")) {
                    uint32_t line = lx->line;
                    lx->pos = after_block_end(lx, q, sign);
                    return emit(lx, TPL_T_BLOCK_END, s + p, q + 2 - p, line);
                }
            } else {
                bool minus = s[p] == '-' && match_at(lx, p + 1, "}}");
                if (minus || match_at(lx, p, "}}")) {
                    uint32_t line = lx->line;
                    size_t e = p + (minus ? 3 : 2);
                    if ((st = emit(lx, TPL_T_VAR_END, s + p, e - p, line))) return st;
                    if (minus) e = skip_space(lx, e);
                    lx->line_starting = s[e - 1] == '\n';
                    lx->pos = e;
                    return BRISK_OK;
                }
            }
        }
        unsigned char c = (unsigned char)s[p];
        size_t e;
        if (is_digit((char)c)) {
            e = float_at(lx, p);
            if (e) {
                if ((st = emit(lx, TPL_T_FLOAT, s + p, e - p, lx->line))) return st;
            } else {
                e = int_at(lx, p);
                if ((st = emit(lx, TPL_T_INT, s + p, e - p, lx->line))) return st;
            }
            p = e;
            continue;
        }
        if (is_name_start(c)) {
            /* ASCII identifier characters, or any non-space code point beyond ASCII (whole sequences) */
            e = p;
            while (e < lx->n) {
                unsigned char ch = (unsigned char)s[e];
                if (ch < 0x80) {
                    if (!is_name_char(ch)) break;
                    e++;
                    continue;
                }
                size_t k = e;
                if (tpl_is_space(tpl_utf8_next(s, lx->n, &k))) break;
                e = k;
            }
            if ((st = emit(lx, TPL_T_NAME, s + p, e - p, lx->line))) return st;
            p = e;
            continue;
        }
        if (c == '\'' || c == '"') {
            uint32_t line = lx->line;
            e = p + 1;
            while (e < lx->n && s[e] != (char)c) {
                if (s[e] == '\\' && e + 1 < lx->n) e++;
                if (s[e] == '\n') lx->line++;
                e++;
            }
            if (e >= lx->n) return lex_fail(lx, "unexpected char %c at %zu (unterminated string)", c, p);
            e++;
            if ((st = emit(lx, TPL_T_STRING, s + p, e - p, line))) return st;
            p = e;
            continue;
        }
        size_t oplen = 0;
        for (size_t k = 0; k < BRISK_ARRAY_LEN(ops2); k++)
            if (match_at(lx, p, ops2[k])) oplen = 2;
        if (!oplen && c && strchr(ops1, c)) oplen = 1;
        if (!oplen) {
            if (c >= 0x20 && c < 0x7F) return lex_fail(lx, "unexpected char '%c' at %zu", c, p);
            return lex_fail(lx, "unexpected char (byte 0x%02x) at %zu", c, p);
        }
        if (oplen == 1) {
            if (c == '(' || c == '[' || c == '{') {
                if (depth >= (int)sizeof balance) return lex_fail(lx, "brackets nested deeper than %d levels", (int)sizeof balance);
                balance[depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
            } else if (c == ')' || c == ']' || c == '}') {
                if (depth == 0) return lex_fail(lx, "unexpected '%c'", c);
                if (balance[depth - 1] != (char)c) return lex_fail(lx, "unexpected '%c', expected '%c'", c, balance[depth - 1]);
                depth--;
            }
        }
        if ((st = emit(lx, TPL_T_OP, s + p, oplen, lx->line))) return st;
        p += oplen;
    }
}

/* {% raw %}...{% endraw %} starting at the tag; returns false when s[k..] is
 * not a raw tag. */
static bool raw_begin(lexer *lx, size_t k, size_t *body) {
    size_t p = k + 2;
    if (p < lx->n && (lx->s[p] == '-' || lx->s[p] == '+')) p++;
    while (p < lx->n && space_at(lx->s, lx->n, p)) p += space_at(lx->s, lx->n, p);
    if (!match_at(lx, p, "raw")) return false;
    p += 3;
    while (p < lx->n && space_at(lx->s, lx->n, p)) p += space_at(lx->s, lx->n, p);
    if (match_at(lx, p, "-%}")) {
        p += 3;
        while (p < lx->n && space_at(lx->s, lx->n, p)) p += space_at(lx->s, lx->n, p);
    } else if (match_at(lx, p, "%}")) {
        p += 2;
    } else {
        return false;
    }
    *body = p;
    return true;
}

static brisk_status lex_raw(lexer *lx, size_t tag, size_t body) {
    lx->line += count_nl(lx->s + tag, body - tag);
    lx->line_starting = lx->s[body - 1] == '\n';
    for (size_t k = body; k + 1 < lx->n; k++) {
        if (lx->s[k] != '{' || lx->s[k + 1] != '%') continue;
        size_t p = k + 2;
        char sign = 0;
        if (p < lx->n && (lx->s[p] == '-' || lx->s[p] == '+')) sign = lx->s[p++];
        while (p < lx->n && space_at(lx->s, lx->n, p)) p += space_at(lx->s, lx->n, p);
        if (!match_at(lx, p, "endraw")) continue;
        p += 6;
        while (p < lx->n && space_at(lx->s, lx->n, p)) p += space_at(lx->s, lx->n, p);
        char esign = 0;
        if (p < lx->n && (lx->s[p] == '-' || lx->s[p] == '+')) esign = lx->s[p++];
        if (!match_at(lx, p, "%}")) continue;
        size_t te = strip_text_end(lx, body, k, sign, true);
        brisk_status st;
        if (te > body && (st = emit(lx, TPL_T_DATA, lx->s + body, te - body, lx->line))) return st;
        lx->line += count_nl(lx->s + body, p - body);
        lx->pos = after_block_end(lx, p, esign);
        return BRISK_OK;
    }
    return lex_fail(lx, "Missing end of raw directive");
}

brisk_status tpl_lex(const char *src, size_t len, tpl_tokens *out, brisk_error *err) {
    lexer lx = {.s = src, .n = len, .pos = 0, .line = 1, .line_starting = true, .out = out, .err = err};
    brisk_status st;
    while (lx.pos < lx.n) {
        size_t k = lx.pos;
        const char *hit = NULL;
        while (k + 1 < lx.n) {
            hit = memchr(lx.s + k, '{', lx.n - 1 - k);
            if (!hit) break;
            k = (size_t)(hit - lx.s);
            char c = lx.s[k + 1];
            if (c == '{' || c == '%' || c == '#') break;
            k++;
            hit = NULL;
        }
        if (!hit) {
            if ((st = emit(&lx, TPL_T_DATA, lx.s + lx.pos, lx.n - lx.pos, lx.line))) return st;
            break;
        }
        char kind = lx.s[k + 1];
        size_t after = k + 2;
        char sign = 0;
        if (after < lx.n && (lx.s[after] == '-' || lx.s[after] == '+')) sign = lx.s[after++];
        size_t raw_body = 0;
        bool is_raw = kind == '%' && raw_begin(&lx, k, &raw_body);
        size_t te = strip_text_end(&lx, lx.pos, k, sign, kind != '{');
        if (te > lx.pos && (st = emit(&lx, TPL_T_DATA, lx.s + lx.pos, te - lx.pos, lx.line))) return st;
        lx.line += count_nl(lx.s + lx.pos, k - lx.pos);
        if (is_raw) {
            if ((st = lex_raw(&lx, k, raw_body))) return st;
        } else if (kind == '#') {
            /* the comment ends at the first "#}" (or "-#}"/"+#}" just before it) */
            const char *q = NULL;
            for (size_t i = after; i + 1 < lx.n; i++)
                if (lx.s[i] == '#' && lx.s[i + 1] == '}') { q = lx.s + i; break; }
            if (!q) return lex_fail(&lx, "Missing end of comment tag");
            size_t qi = (size_t)(q - lx.s);
            char esign = 0;
            if (qi > after && (lx.s[qi - 1] == '-' || lx.s[qi - 1] == '+')) esign = lx.s[qi - 1];
            lx.line += count_nl(lx.s + after, qi - after);
            lx.pos = after_block_end(&lx, qi, esign);
        } else {
            if ((st = emit(&lx, kind == '{' ? TPL_T_VAR_BEGIN : TPL_T_BLOCK_BEGIN, lx.s + k, after - k, lx.line))) return st;
            if ((st = lex_tag(&lx, after, kind == '%'))) return st;
        }
    }
    return emit(&lx, TPL_T_EOF, lx.s + lx.n, 0, lx.line);
}

void tpl_tokens_free(tpl_tokens *t) {
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}
