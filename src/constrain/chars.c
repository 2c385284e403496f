/* chars: sets of code points compiled to byte automata. A code point range becomes the byte-range
 * sequences of its UTF-8 encodings (split until every position is one contiguous byte range); in JSON
 * mode the characters json.dumps escapes become their escape sequences instead. */
#include "constrain/nfa_impl.h"

#include <stdlib.h>
#include <string.h>

void cst_cpset_add(cst_cpset *s, uint32_t lo, uint32_t hi) {
    if (lo > hi) return;
    if (s->n == s->cap) {
        const int32_t cap = s->cap ? s->cap * 2 : 8;
        cst_cprange *r = realloc(s->r, (size_t)cap * sizeof *r);
        if (!r) return;   /* the set stays smaller: callers treat a smaller set as stricter, never looser */
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n++] = (cst_cprange){lo, hi};
}

static int cmp_range(const void *a, const void *b) {
    const cst_cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void cst_cpset_normalize(cst_cpset *s) {
    if (s->n == 0) return;
    qsort(s->r, (size_t)s->n, sizeof *s->r, cmp_range);
    int32_t k = 0;
    for (int32_t i = 0; i < s->n; i++) {
        cst_cprange r = s->r[i];
        if (r.lo > 0x10FFFF) continue;
        if (r.hi > 0x10FFFF) r.hi = 0x10FFFF;
        if (k > 0 && r.lo <= s->r[k - 1].hi + 1) {
            if (r.hi > s->r[k - 1].hi) s->r[k - 1].hi = r.hi;
        } else {
            s->r[k++] = r;
        }
    }
    s->n = k;
}

void cst_cpset_negate(cst_cpset *s) {
    cst_cpset_normalize(s);
    cst_cpset out = {0};
    uint32_t next = 0;
    for (int32_t i = 0; i < s->n; i++) {
        if (s->r[i].lo > next) cst_cpset_add(&out, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (next <= 0x10FFFF) cst_cpset_add(&out, next, 0x10FFFF);
    free(s->r);
    *s = out;
}

void cst_cpset_free(cst_cpset *s) {
    free(s->r);
    memset(s, 0, sizeof *s);
}

bool cst_cpset_has(const cst_cpset *s, uint32_t cp) {
    for (int32_t i = 0; i < s->n; i++)
        if (cp >= s->r[i].lo && cp <= s->r[i].hi) return true;
    return false;
}

static int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

static void utf8_put(uint32_t cp, uint8_t *out) {
    switch (utf8_len(cp)) {
    case 1: out[0] = (uint8_t)cp; break;
    case 2: out[0] = (uint8_t)(0xC0 | cp >> 6); out[1] = (uint8_t)(0x80 | (cp & 0x3F)); break;
    case 3:
        out[0] = (uint8_t)(0xE0 | cp >> 12); out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)); out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        break;
    default:
        out[0] = (uint8_t)(0xF0 | cp >> 18); out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)); out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    }
}

/* lo..hi encode to the same length; emit byte-range chains from s to e */
static void utf8_ranges(cst_nfa *n, uint32_t lo, uint32_t hi, int32_t s, int32_t e) {
    const int len = utf8_len(lo);
    for (int i = 1; i < len; i++) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m) {
                utf8_ranges(n, lo, lo | m, s, e);
                utf8_ranges(n, (lo | m) + 1, hi, s, e);
                return;
            }
            if ((hi & m) != m) {
                utf8_ranges(n, lo, (hi & ~m) - 1, s, e);
                utf8_ranges(n, hi & ~m, hi, s, e);
                return;
            }
        }
    }
    uint8_t a[4], b[4];
    utf8_put(lo, a);
    utf8_put(hi, b);
    int32_t cur = s;
    for (int i = 0; i < len; i++) {
        const int32_t nx = i + 1 == len ? e : cst_state(n);
        cst_range(n, cur, a[i], b[i], nx);
        cur = nx;
    }
}

static void raw_range(cst_nfa *n, uint32_t lo, uint32_t hi, int32_t s, int32_t e) {
    static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    if (lo <= 0xDFFF && hi >= 0xD800) {   /* surrogates have no UTF-8 form */
        if (lo < 0xD800) raw_range(n, lo, 0xD7FF, s, e);
        if (hi > 0xDFFF) raw_range(n, 0xE000, hi, s, e);
        return;
    }
    for (int i = 0; i < 4 && lo <= hi; i++) {
        if (lo > bounds[i]) continue;
        const uint32_t top = hi < bounds[i] ? hi : bounds[i];
        utf8_ranges(n, lo, top, s, e);
        lo = top + 1;
    }
}

/* json.dumps' escape of a control character or quote/backslash, into out; its length */
static int json_escape(uint32_t cp, char *out) {
    static const char hex[] = "0123456789abcdef";
    switch (cp) {
    case '"': memcpy(out, "\\\"", 2); return 2;
    case '\\': memcpy(out, "\\\\", 2); return 2;
    case '\n': memcpy(out, "\\n", 2); return 2;
    case '\r': memcpy(out, "\\r", 2); return 2;
    case '\t': memcpy(out, "\\t", 2); return 2;
    case '\b': memcpy(out, "\\b", 2); return 2;
    case '\f': memcpy(out, "\\f", 2); return 2;
    default:
        memcpy(out, "\\u00", 4);
        out[4] = hex[cp >> 4 & 15];
        out[5] = hex[cp & 15];
        return 6;
    }
}

static void escape_chain(cst_nfa *n, uint32_t cp, int32_t s, int32_t e) {
    char buf[8];
    const int len = json_escape(cp, buf);
    int32_t cur = s;
    for (int i = 0; i < len; i++) {
        const int32_t nx = i + 1 == len ? e : cst_state(n);
        cst_range(n, cur, (uint8_t)buf[i], (uint8_t)buf[i], nx);
        cur = nx;
    }
}

cst_frag cst_chars(cst_nfa *n, const cst_cpset *set, cst_charmode mode) {
    cst_mark m = cst_mark_here(n);
    const int32_t s = cst_state(n), e = cst_state(n);
    for (int32_t i = 0; i < set->n; i++) {
        uint32_t lo = set->r[i].lo, hi = set->r[i].hi;
        if (mode == CST_JSON) {
            /* below 0x20, '"' and '\\' are escaped one by one */
            for (; lo <= hi && (lo < 0x20 || lo == '"' || lo == '\\'); lo++) escape_chain(n, lo, s, e);
            if (lo > hi) continue;
            if (lo < '"' && hi >= '"') {
                raw_range(n, lo, '"' - 1, s, e);
                escape_chain(n, '"', s, e);
                lo = '"' + 1;
            }
            if (lo <= hi && lo < '\\' && hi >= '\\') {
                raw_range(n, lo, '\\' - 1, s, e);
                escape_chain(n, '\\', s, e);
                lo = '\\' + 1;
            }
            if (lo > hi) continue;
        }
        raw_range(n, lo, hi, s, e);
    }
    return cst_frag_close(n, m, s, e);
}

cst_frag cst_json_char(cst_nfa *n) {
    cst_cpset all = {0};
    cst_cpset_add(&all, 0, 0x10FFFF);
    cst_frag f = cst_chars(n, &all, CST_JSON);
    cst_cpset_free(&all);
    return f;
}
