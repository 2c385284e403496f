/* schema: JSON Schema (draft 2020-12, and the draft-04/07 spellings) compiled to the NFA.
 *
 * The language is exactly the instances the schema accepts, serialized as JSON with flexible (or, in
 * compact mode, json.dumps') whitespace, object properties in definition order then any additional
 * ones, strings in json.dumps(ensure_ascii=False)'s canonical escaping. Where the exact language is out
 * of reach the compiler is stricter, never looser: a keyword it cannot enforce is an error naming the
 * keyword and its JSON pointer (docs/CONSTRAIN.md lists what is supported). */
#include "constrain/nfa_impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEMA_MAX_DEPTH 128
#define REF_INLINE_STATES 3000    /* a referenced definition smaller than this is copied in place, else called */
#define MAX_ANYOF 256

typedef struct ref_ent {
    char *ptr;
    int32_t rule;
    int state;                    /* 1 compiling, 2 done */
    bool recursive;
    cst_frag body;
} ref_ent;

typedef struct sc {
    cst_nfa *n;
    json_t *root;
    cst_schema_opts o;
    brisk_error *err;
    bool failed;
    ref_ent *refs;
    int32_t n_refs, cap_refs;
    int32_t any_rule;
    int depth;
    bool ref_siblings;            /* 2019-09 and later: keywords beside $ref apply too (draft-04..07 ignore them) */
    json_t *keep;                 /* merged schemas, owned here until the end */
} sc;

static void sc_fail(sc *c, brisk_status st, const char *fmt, ...) BRISK_PRINTF(3, 4);
static void sc_fail(sc *c, brisk_status st, const char *fmt, ...) {
    if (c->failed) return;
    c->failed = true;
    va_list ap;
    va_start(ap, fmt);
    char msg[480];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    brisk_fail(c->err, st, "%s", msg);
    cst_nfa_set_error(c->n, "%s", msg);
}

static void unsupported(sc *c, const char *kw, const char *ptr) {
    sc_fail(c, BRISK_ERR_UNSUPPORTED, "JSON Schema keyword '%s' at '%s' is not supported", kw, ptr[0] ? ptr : "#");
}

static bool bad(sc *c) { return c->failed || c->n->failed; }

static void child_ptr(char *out, size_t cap, const char *base, const char *a, const char *b) {
    size_t k = (size_t)snprintf(out, cap, "%s", base);
    const char *parts[2] = {a, b};
    for (int i = 0; i < 2 && k + 2 < cap; i++) {
        if (!parts[i]) continue;
        out[k++] = '/';
        for (const char *p = parts[i]; *p && k + 3 < cap; p++) {
            if (*p == '~') { out[k++] = '~'; out[k++] = '0'; }
            else if (*p == '/') { out[k++] = '~'; out[k++] = '1'; }
            else out[k++] = *p;
        }
    }
    out[k < cap ? k : cap - 1] = 0;
}

/* ---- canonical serialization: Python's json.dumps(v, ensure_ascii=False) ---------------------- */

typedef struct sbuf { char *p; size_t n, cap; bool oom; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t len) {
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + len + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->oom = true; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void cst_json_string(sbuf *b, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)s[i];
        char e[8];
        switch (c) {
        case '"': sb_put(b, "\\\"", 2); break;
        case '\\': sb_put(b, "\\\\", 2); break;
        case '\n': sb_put(b, "\\n", 2); break;
        case '\r': sb_put(b, "\\r", 2); break;
        case '\t': sb_put(b, "\\t", 2); break;
        case '\b': sb_put(b, "\\b", 2); break;
        case '\f': sb_put(b, "\\f", 2); break;
        default:
            if (c < 0x20) {
                memcpy(e, "\\u00", 4);
                e[4] = hex[c >> 4];
                e[5] = hex[c & 15];
                sb_put(b, e, 6);
            } else {
                sb_put(b, (const char *)&s[i], 1);
            }
        }
    }
    sb_put(b, "\"", 1);
}

/* Python's repr(float): the shortest digits that round-trip; exponent form when the decimal exponent
 * is below -4 or at least 16 */
static void py_float(sbuf *b, double x) {
    if (isnan(x)) { sb_str(b, "NaN"); return; }
    if (isinf(x)) { sb_str(b, x < 0 ? "-Infinity" : "Infinity"); return; }
    char buf[64];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
        if (strtod(buf, NULL) == x) break;
    }
    /* buf: [-]d.ddde[+-]XX */
    char digits[32];
    int nd = 0;
    const char *p = buf;
    bool neg = false;
    if (*p == '-') { neg = true; p++; }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    const int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    const int decpt = exp10 + 1;   /* value = 0.d1d2... x 10^decpt */
    if (neg) sb_put(b, "-", 1);
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            sb_str(b, "0.");
            for (int i = 0; i < -decpt; i++) sb_put(b, "0", 1);
            sb_put(b, digits, (size_t)nd);
        } else if (decpt >= nd) {
            sb_put(b, digits, (size_t)nd);
            for (int i = nd; i < decpt; i++) sb_put(b, "0", 1);
            sb_str(b, ".0");
        } else {
            sb_put(b, digits, (size_t)decpt);
            sb_put(b, ".", 1);
            sb_put(b, digits + decpt, (size_t)(nd - decpt));
        }
    } else {
        sb_put(b, digits, 1);
        if (nd > 1) {
            sb_put(b, ".", 1);
            sb_put(b, digits + 1, (size_t)(nd - 1));
        }
        char e[16];
        snprintf(e, sizeof e, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
        sb_str(b, e);
    }
}

static void cst_json_dump(sbuf *b, const json_t *v) {
    char num[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        sb_put(b, "{", 1);
        const char *k;
        json_t *x;
        bool first = true;
        json_object_foreach((json_t *)v, k, x) {
            if (!first) sb_put(b, ", ", 2);
            first = false;
            cst_json_string(b, k, strlen(k));
            sb_put(b, ": ", 2);
            cst_json_dump(b, x);
        }
        sb_put(b, "}", 1);
        break;
    }
    case JSON_ARRAY: {
        sb_put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) sb_put(b, ", ", 2);
            cst_json_dump(b, json_array_get(v, i));
        }
        sb_put(b, "]", 1);
        break;
    }
    case JSON_STRING: cst_json_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        sb_str(b, num);
        break;
    case JSON_REAL: py_float(b, json_real_value(v)); break;
    case JSON_TRUE: sb_str(b, "true"); break;
    case JSON_FALSE: sb_str(b, "false"); break;
    case JSON_NULL: sb_str(b, "null"); break;
    }
}

char *cst_json_dumps(const json_t *v, size_t *len) {
    sbuf b = {0};
    cst_json_dump(&b, v);
    if (b.oom || !b.p) {
        free(b.p);
        if (!b.oom && (b.p = malloc(1))) { b.p[0] = 0; *len = 0; return b.p; }
        return NULL;
    }
    *len = b.n;
    return b.p;
}

/* ---- small fragments --------------------------------------------------------------------------- */

static cst_frag lit(sc *c, const char *s) { return cst_bytes(c->n, s, strlen(s)); }

static cst_frag ws(sc *c) {
    if (c->o.compact) return cst_empty(c->n);
    cst_mark m = cst_mark_here(c->n);
    if (c->o.max_ws <= 0) {
        const int32_t s = cst_state(c->n);
        cst_range(c->n, s, ' ', ' ', s);
        cst_range(c->n, s, '\t', '\n', s);
        cst_range(c->n, s, '\r', '\r', s);
        return cst_frag_close(c->n, m, s, s);
    }
    /* at most max_ws characters: a model cannot stall in whitespace */
    const int32_t start = cst_state(c->n);
    int32_t cur = start;
    const int32_t end = cst_state(c->n);
    for (int32_t k = 0; k < c->o.max_ws; k++) {
        const int32_t nx = cst_state(c->n);
        cst_eps(c->n, cur, end);
        cst_range(c->n, cur, ' ', ' ', nx);
        cst_range(c->n, cur, '\t', '\n', nx);
        cst_range(c->n, cur, '\r', '\r', nx);
        cur = nx;
    }
    cst_eps(c->n, cur, end);
    return cst_frag_close(c->n, m, start, end);
}

static cst_frag punct(sc *c, const char *p, const char *compact) {
    if (c->o.compact) return lit(c, compact);
    cst_mark m = cst_mark_here(c->n);
    cst_frag parts[3];
    parts[0] = ws(c);
    parts[1] = lit(c, p);
    parts[2] = ws(c);
    return cst_seq(c->n, m, parts, 3);
}
static cst_frag comma(sc *c) { return punct(c, ",", ", "); }
static cst_frag colon(sc *c) { return punct(c, ":", ": "); }

static cst_frag str_of(sc *c, cst_frag content, cst_mark m) {
    (void)m;
    cst_frag parts[3];
    cst_mark m2 = {content.s_lo, content.e_lo};
    parts[1] = content;
    parts[0] = lit(c, "\"");
    parts[2] = lit(c, "\"");
    cst_frag q[3] = {parts[0], parts[1], parts[2]};
    /* connect in textual order */
    cst_eps(c->n, q[0].end, q[1].start);
    cst_eps(c->n, q[1].end, q[2].start);
    return cst_frag_close(c->n, m2, q[0].start, q[2].end);
}

static cst_frag any_string(sc *c) {
    cst_mark m = cst_mark_here(c->n);
    cst_frag ch = cst_json_char(c->n);
    cst_frag content = cst_repeat(c->n, ch, 0, -1);
    return str_of(c, content, m);
}

static cst_frag digits_frag(sc *c, char lo, char hi) {
    cst_mark m = cst_mark_here(c->n);
    const int32_t s = cst_state(c->n), e = cst_state(c->n);
    cst_range(c->n, s, (uint8_t)lo, (uint8_t)hi, e);
    return cst_frag_close(c->n, m, s, e);
}

/* [0-9]{k} */
static cst_frag any_digits(sc *c, int32_t k) {
    cst_frag d = digits_frag(c, '0', '9');
    return cst_repeat(c->n, d, k, k);
}

static cst_frag any_int_mag(sc *c) {
    /* 0 | [1-9][0-9]* */
    cst_mark m = cst_mark_here(c->n);
    cst_frag alts[2];
    alts[0] = lit(c, "0");
    cst_mark m2 = cst_mark_here(c->n);
    cst_frag p[2];
    p[0] = digits_frag(c, '1', '9');
    cst_frag d = digits_frag(c, '0', '9');
    p[1] = cst_repeat(c->n, d, 0, -1);
    alts[1] = cst_seq(c->n, m2, p, 2);
    return cst_alt(c->n, m, alts, 2);
}

/* same-length digit strings lo..hi (as text, equal length) */
static cst_frag same_len(sc *c, const char *lo, const char *hi, int len) {
    cst_mark m = cst_mark_here(c->n);
    if (len == 0) return cst_empty(c->n);
    if (lo[0] == hi[0]) {
        cst_frag p[2];
        p[0] = digits_frag(c, lo[0], lo[0]);
        p[1] = same_len(c, lo + 1, hi + 1, len - 1);
        return cst_seq(c->n, m, p, 2);
    }
    bool lo_zero = true, hi_nine = true;
    for (int i = 1; i < len; i++) {
        if (lo[i] != '0') lo_zero = false;
        if (hi[i] != '9') hi_nine = false;
    }
    if (lo_zero && hi_nine) {
        cst_frag p[2];
        p[0] = digits_frag(c, lo[0], hi[0]);
        p[1] = any_digits(c, len - 1);
        return cst_seq(c->n, m, p, 2);
    }
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    cst_frag alts[3];
    int na = 0;
    {
        cst_mark mm = cst_mark_here(c->n);
        cst_frag p[2];
        p[0] = digits_frag(c, lo[0], lo[0]);
        p[1] = same_len(c, lo + 1, nines, len - 1);
        alts[na++] = cst_seq(c->n, mm, p, 2);
    }
    if (lo[0] + 1 <= hi[0] - 1) {
        cst_mark mm = cst_mark_here(c->n);
        cst_frag p[2];
        p[0] = digits_frag(c, (char)(lo[0] + 1), (char)(hi[0] - 1));
        p[1] = any_digits(c, len - 1);
        alts[na++] = cst_seq(c->n, mm, p, 2);
    }
    {
        cst_mark mm = cst_mark_here(c->n);
        cst_frag p[2];
        p[0] = digits_frag(c, hi[0], hi[0]);
        p[1] = same_len(c, zeros, hi + 1, len - 1);
        alts[na++] = cst_seq(c->n, mm, p, 2);
    }
    return cst_alt(c->n, m, alts, na);
}

/* canonical non-negative integers in [lo, hi]; hi < 0: unbounded */
static cst_frag uint_range(sc *c, int64_t lo, int64_t hi) {
    cst_mark m = cst_mark_here(c->n);
    if (lo < 0) lo = 0;
    if (hi >= 0 && hi < lo) return cst_never(c->n);
    cst_frag alts[24];
    int na = 0;
    char a[24], b[24];
    int64_t p10 = 1;
    for (int len = 1; len <= 19; len++) {
        const int64_t first = len == 1 ? 0 : p10;
        const int64_t last = len == 19 ? INT64_MAX : p10 * 10 - 1;
        if (len < 19) p10 *= 10;
        int64_t x = lo > first ? lo : first, y = hi >= 0 && hi < last ? hi : last;
        if (x > y) continue;
        snprintf(a, sizeof a, "%0*lld", len, (long long)x);
        snprintf(b, sizeof b, "%0*lld", len, (long long)y);
        alts[na++] = same_len(c, a, b, len);
    }
    if (hi < 0) {
        /* beyond int64: 20 digits or more */
        cst_mark mm = cst_mark_here(c->n);
        cst_frag p[2];
        p[0] = digits_frag(c, '1', '9');
        cst_frag d = digits_frag(c, '0', '9');
        p[1] = cst_repeat(c->n, d, 19, -1);
        alts[na++] = cst_seq(c->n, mm, p, 2);
    }
    if (na == 0) return cst_never(c->n);
    return cst_alt(c->n, m, alts, na);
}

/* bounds on a number: has, value (integral), exclusive */
typedef struct bound { bool has; int64_t v; bool excl; } bound;

static cst_frag frac_any(sc *c) {
    cst_mark m = cst_mark_here(c->n);
    cst_frag p[2];
    p[0] = lit(c, ".");
    cst_frag d = digits_frag(c, '0', '9');
    p[1] = cst_repeat(c->n, d, 1, -1);
    cst_frag f = cst_seq(c->n, m, p, 2);
    return cst_opt(c->n, f);
}
static cst_frag frac_zero(sc *c) {
    cst_mark m = cst_mark_here(c->n);
    cst_frag p[2];
    p[0] = lit(c, ".");
    cst_frag d = digits_frag(c, '0', '0');
    p[1] = cst_repeat(c->n, d, 1, -1);
    cst_frag f = cst_seq(c->n, m, p, 2);
    return cst_opt(c->n, f);
}
static cst_frag frac_nonzero(sc *c) {
    cst_mark m = cst_mark_here(c->n);
    cst_frag p[4];
    p[0] = lit(c, ".");
    cst_frag d = digits_frag(c, '0', '9');
    p[1] = cst_repeat(c->n, d, 0, -1);
    p[2] = digits_frag(c, '1', '9');
    cst_frag d2 = digits_frag(c, '0', '9');
    p[3] = cst_repeat(c->n, d2, 0, -1);
    return cst_seq(c->n, m, p, 4);
}

/* magnitudes I(.F)? >= 0 within [lo, hi] (integral bounds); integer: no fraction */
static cst_frag mag_range(sc *c, bound lo, bound hi, bool integer) {
    cst_mark m = cst_mark_here(c->n);
    cst_frag alts[4];
    int na = 0;
    if (integer) {
        int64_t a = lo.has ? (lo.excl ? lo.v + 1 : lo.v) : 0, b = hi.has ? (hi.excl ? hi.v - 1 : hi.v) : -1;
        if (a < 0) a = 0;
        if (hi.has && b < a) return cst_never(c->n);
        return uint_range(c, a, hi.has ? b : -1);
    }
    /* I with any fraction: [a, b] */
    int64_t a = 0;
    if (lo.has && lo.v >= 0) a = lo.excl ? lo.v + 1 : lo.v;
    int64_t b = -1;
    if (hi.has) {
        if (hi.v <= 0) b = -2;   /* no I with any fraction */
        else b = hi.v - 1;
    }
    if (b != -2 && (b < 0 || a <= b)) {
        cst_mark mm = cst_mark_here(c->n);
        cst_frag p[2];
        p[0] = uint_range(c, a, b);
        p[1] = frac_any(c);
        alts[na++] = cst_seq(c->n, mm, p, 2);
    }
    /* I == lo with a nonzero fraction (exclusive lower bound), if still below the upper bound */
    if (lo.has && lo.v >= 0 && lo.excl && (!hi.has || hi.v > lo.v)) {
        cst_mark mm = cst_mark_here(c->n);
        cst_frag p[2];
        p[0] = uint_range(c, lo.v, lo.v);
        p[1] = frac_nonzero(c);
        alts[na++] = cst_seq(c->n, mm, p, 2);
    }
    /* I == hi with a zero fraction (inclusive upper bound), if above the lower bound */
    if (hi.has && hi.v >= 0 && !hi.excl && (!lo.has || hi.v > lo.v || (hi.v == lo.v && !lo.excl) || lo.v < 0)) {
        cst_mark mm = cst_mark_here(c->n);
        cst_frag p[2];
        p[0] = uint_range(c, hi.v, hi.v);
        p[1] = frac_zero(c);
        alts[na++] = cst_seq(c->n, mm, p, 2);
    }
    if (na == 0) return cst_never(c->n);
    return cst_alt(c->n, m, alts, na);
}

static cst_frag exponent_frag(sc *c) {
    cst_mark m = cst_mark_here(c->n);
    cst_frag p[3];
    const int32_t s = cst_state(c->n), e = cst_state(c->n);
    cst_range(c->n, s, 'e', 'e', e);
    cst_range(c->n, s, 'E', 'E', e);
    p[0] = cst_frag_close(c->n, m, s, e);
    cst_mark m2 = cst_mark_here(c->n);
    const int32_t s2 = cst_state(c->n), e2 = cst_state(c->n);
    cst_range(c->n, s2, '+', '+', e2);
    cst_range(c->n, s2, '-', '-', e2);
    cst_eps(c->n, s2, e2);
    p[1] = cst_frag_close(c->n, m2, s2, e2);
    cst_frag d = digits_frag(c, '0', '9');
    p[2] = cst_repeat(c->n, d, 1, -1);
    cst_frag f = cst_seq(c->n, m, p, 3);
    return cst_opt(c->n, f);
}

/* a number (integer: no fraction or exponent) within the bounds */
static cst_frag number_frag(sc *c, bound lo, bound hi, bool integer) {
    cst_mark m = cst_mark_here(c->n);
    if (!lo.has && !hi.has) {
        cst_frag p[4];
        int np = 0;
        cst_mark ms = cst_mark_here(c->n);
        const int32_t s = cst_state(c->n), e = cst_state(c->n);
        cst_range(c->n, s, '-', '-', e);
        cst_eps(c->n, s, e);
        p[np++] = cst_frag_close(c->n, ms, s, e);
        p[np++] = any_int_mag(c);
        if (!integer) {
            p[np++] = frac_any(c);
            p[np++] = exponent_frag(c);
        }
        return cst_seq(c->n, m, p, np);
    }
    /* non-negative side: x = magnitude within [lo, hi] ∩ [0, inf) */
    cst_frag alts[2];
    int na = 0;
    if (!hi.has || hi.v > 0 || (hi.v == 0 && !hi.excl)) alts[na++] = mag_range(c, lo, hi, integer);
    /* negative side: x = -mag, mag > 0: x >= lo <=> mag <= -lo; x <= hi <=> mag >= -hi */
    if (!lo.has || lo.v < 0) {
        bound mlo = {hi.has && hi.v < 0, hi.has ? -hi.v : 0, hi.excl};
        bound mhi = {lo.has, lo.has ? -lo.v : 0, lo.excl};
        /* mag must be > 0 (a '-0' is left out: stricter) */
        if (!mlo.has) mlo = (bound){true, 0, true};
        else if (mlo.v == 0) mlo.excl = true;
        cst_mark mm = cst_mark_here(c->n);
        cst_frag p[2];
        p[0] = lit(c, "-");
        p[1] = mag_range(c, mlo, mhi, integer);
        alts[na++] = cst_seq(c->n, mm, p, 2);
    }
    if (na == 0) return cst_never(c->n);
    return cst_alt(c->n, m, alts, na);
}

/* ---- string formats ---------------------------------------------------------------------------- */

static const struct { const char *name, *re; } formats[] = {
    {"date", "^[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))$"},
    {"time", "^(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"},
    {"date-time", "^[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
                  "T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"},
    {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
    {"email", "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$"},
    {"ipv4", "^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"},
    {"hostname", "^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"},
    {"uri", "^[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9\\-._~:/?#\\[\\]@!$&'()*+,;=%]*$"},
    {"uri-reference", "^[A-Za-z0-9\\-._~:/?#\\[\\]@!$&'()*+,;=%]*$"},
    {"json-pointer", "^(?:/(?:[^~/]|~[01])*)*$"},
};

/* the formats of the 2020-12 vocabulary: one of these we cannot check fails closed; any other name is an
 * annotation (validators ignore unknown formats) */
static bool standard_format(const char *name) {
    static const char *const names[] = {"date-time", "date", "time", "duration", "email", "idn-email", "hostname",
                                        "idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference",
                                        "uuid", "uri-template", "json-pointer", "relative-json-pointer", "regex"};
    for (size_t i = 0; i < BRISK_ARRAY_LEN(names); i++)
        if (!strcmp(name, names[i])) return true;
    return false;
}

static const char *format_re(const char *name) {
    for (size_t i = 0; i < BRISK_ARRAY_LEN(formats); i++)
        if (!strcmp(formats[i].name, name)) return formats[i].re;
    return NULL;
}

/* ---- keyword classes --------------------------------------------------------------------------- */

/* annotations and vocabulary we ignore (they never restrict instances) */
static bool annotation(const char *k) {
    static const char *const names[] = {
        "title", "description", "default", "examples", "example", "$comment", "$schema", "$id", "id", "readOnly",
        "writeOnly", "deprecated", "$anchor", "$dynamicAnchor", "contentMediaType", "contentEncoding", "contentSchema",
        "$vocabulary", "definitions", "$defs", "markdownDescription", "enumDescriptions", "markdownEnumDescriptions",
        "discriminator", "nullable_", "xml", "externalDocs", "errorMessage", "deprecationMessage", "readonly",
    };
    for (size_t i = 0; i < BRISK_ARRAY_LEN(names); i++)
        if (!strcmp(k, names[i])) return true;
    return false;
}

/* keywords of the JSON Schema vocabularies: anything else is an unknown (ignored) annotation */
static bool known_keyword(const char *k) {
    static const char *const names[] = {
        "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties", "items",
        "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
        "maxContains", "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref",
        "$dynamicRef", "$recursiveRef", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas",
        "dependencies", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "__patterns", "__never",
    };
    for (size_t i = 0; i < BRISK_ARRAY_LEN(names); i++)
        if (!strcmp(k, names[i])) return true;
    return false;
}

/* ---- $ref -------------------------------------------------------------------------------------- */

static json_t *resolve_ptr(sc *c, const char *ref, const char *ptr) {
    if (ref[0] != '#') {
        sc_fail(c, BRISK_ERR_UNSUPPORTED, "JSON Schema keyword '$ref' at '%s': only local references (#...) are supported, not '%.200s'",
                ptr[0] ? ptr : "#", ref);
        return NULL;
    }
    json_t *cur = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/') {
        sc_fail(c, BRISK_ERR_UNSUPPORTED, "JSON Schema keyword '$ref' at '%s': anchor references ('%.200s') are not supported",
                ptr[0] ? ptr : "#", ref);
        return NULL;
    }
    char tok[512];
    while (*p == '/') {
        p++;
        size_t k = 0;
        while (*p && *p != '/' && k + 1 < sizeof tok) {
            char ch = *p++;
            if (ch == '~' && *p == '0') { ch = '~'; p++; }
            else if (ch == '~' && *p == '1') { ch = '/'; p++; }
            else if (ch == '%' && p[0] && p[1]) {
                char h[3] = {p[0], p[1], 0};
                ch = (char)strtol(h, NULL, 16);
                p += 2;
            }
            tok[k++] = ch;
        }
        tok[k] = 0;
        if (json_is_object(cur)) cur = json_object_get(cur, tok);
        else if (json_is_array(cur)) {
            char *end;
            const long i = strtol(tok, &end, 10);
            cur = *end || i < 0 ? NULL : json_array_get(cur, (size_t)i);
        } else cur = NULL;
        if (!cur) {
            sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema '$ref' at '%s': '%.200s' does not resolve", ptr[0] ? ptr : "#", ref);
            return NULL;
        }
    }
    return cur;
}

/* ---- the compiler ------------------------------------------------------------------------------ */

static cst_frag compile(sc *c, json_t *s, const char *ptr);

static void keep(sc *c, json_t *v) { json_array_append_new(c->keep, v); }

enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_STR = 16, T_INT = 32, T_NUM = 64, T_ALL = 127 };

static int type_bit(const char *t) {
    if (!strcmp(t, "null")) return T_NULL;
    if (!strcmp(t, "boolean")) return T_BOOL;
    if (!strcmp(t, "object")) return T_OBJ;
    if (!strcmp(t, "array")) return T_ARR;
    if (!strcmp(t, "string")) return T_STR;
    if (!strcmp(t, "integer")) return T_INT;
    if (!strcmp(t, "number")) return T_NUM | T_INT;
    return 0;
}

/* the types a schema's "type" allows (T_ALL without one); -1 on a bad value */
static int types_of(sc *c, json_t *s, const char *ptr) {
    json_t *t = json_object_get(s, "type");
    if (!t) return T_ALL;
    int bits = 0;
    if (json_is_string(t)) {
        bits = type_bit(json_string_value(t));
        if (!bits) goto bad_type;
        return bits;
    }
    if (json_is_array(t)) {
        for (size_t i = 0; i < json_array_size(t); i++) {
            json_t *x = json_array_get(t, i);
            const int b = json_is_string(x) ? type_bit(json_string_value(x)) : 0;
            if (!b) goto bad_type;
            bits |= b;
        }
        return bits;
    }
bad_type:
    sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema 'type' at '%s' is not a type name or a list of them", ptr[0] ? ptr : "#");
    return -1;
}

static int value_type(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: return T_NULL;
    case JSON_TRUE: case JSON_FALSE: return T_BOOL;
    case JSON_OBJECT: return T_OBJ;
    case JSON_ARRAY: return T_ARR;
    case JSON_STRING: return T_STR;
    case JSON_INTEGER: return T_INT;
    case JSON_REAL: {
        const double x = json_real_value(v);
        return x == floor(x) && fabs(x) < 9e15 ? T_INT : T_NUM;
    }
    }
    return 0;
}

static size_t utf8_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) k++;
    return k;
}

static bool get_num(json_t *s, const char *k, double *out) {
    json_t *v = json_object_get(s, k);
    if (!v || !json_is_number(v)) return false;
    *out = json_number_value(v);
    return true;
}

/* Is the scalar enum value v allowed by the rest of s? Objects/arrays: only when s has no keyword of
 * their kind (else -1: unsupported). */
static int enum_value_ok(sc *c, json_t *s, json_t *v, const char *ptr) {
    const int t = types_of(c, s, ptr);
    if (t < 0) return -1;
    const int vt = value_type(v);
    if (!(vt & t) && !(vt == T_INT && (t & T_NUM))) return 0;
    const char *k;
    json_t *x;
    json_object_foreach(s, k, x) {
        if (!strcmp(k, "enum") || !strcmp(k, "const") || !strcmp(k, "type") || annotation(k) || !known_keyword(k)) continue;
        if (vt == T_STR) {
            if (!strcmp(k, "minLength") && json_is_integer(x) && utf8_count(json_string_value(v), json_string_length(v)) < (size_t)json_integer_value(x)) return 0;
            if (!strcmp(k, "maxLength") && json_is_integer(x) && utf8_count(json_string_value(v), json_string_length(v)) > (size_t)json_integer_value(x)) return 0;
            if (!strcmp(k, "pattern") && json_is_string(x)) {
                const int r = cst_regex_match(json_string_value(x), json_string_length(x), json_string_value(v), json_string_length(v));
                if (r < 0) return -1;
                if (r == 0) return 0;
            }
            if (!strcmp(k, "minLength") || !strcmp(k, "maxLength") || !strcmp(k, "pattern")) continue;
            if (!strcmp(k, "format")) return -1;
        }
        if (vt == T_INT || vt == T_NUM) {
            const double d = json_number_value(v);
            double b;
            if (!strcmp(k, "minimum") && get_num(s, k, &b)) { if (d < b) return 0; continue; }
            if (!strcmp(k, "maximum") && get_num(s, k, &b)) { if (d > b) return 0; continue; }
            if (!strcmp(k, "exclusiveMinimum") && get_num(s, k, &b)) { if (d <= b) return 0; continue; }
            if (!strcmp(k, "exclusiveMaximum") && get_num(s, k, &b)) { if (d >= b) return 0; continue; }
        }
        /* keywords of other kinds do not apply to this value */
        static const char *const str_kw[] = {"minLength", "maxLength", "pattern", "format"};
        static const char *const num_kw[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
        static const char *const obj_kw[] = {"properties", "required", "additionalProperties", "patternProperties",
                                             "minProperties", "maxProperties", "dependentRequired", "propertyNames", "dependencies"};
        static const char *const arr_kw[] = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains"};
        bool applies = true;
        for (size_t i = 0; i < 4; i++) if (!strcmp(k, str_kw[i])) applies = vt == T_STR;
        for (size_t i = 0; i < 5; i++) if (!strcmp(k, num_kw[i])) applies = vt == T_INT || vt == T_NUM;
        for (size_t i = 0; i < 9; i++) if (!strcmp(k, obj_kw[i])) applies = vt == T_OBJ;
        for (size_t i = 0; i < 7; i++) if (!strcmp(k, arr_kw[i])) applies = vt == T_ARR;
        if (applies) return -1;
    }
    return 1;
}

static cst_frag literal_value(sc *c, json_t *v) {
    sbuf b = {0};
    cst_json_dump(&b, v);
    if (b.oom) {
        free(b.p);
        sc_fail(c, BRISK_ERR_NOMEM, "out of memory");
        return cst_never(c->n);
    }
    cst_frag f = cst_bytes(c->n, b.p, b.n);
    free(b.p);
    return f;
}

static cst_frag compile_enum(sc *c, json_t *s, json_t *values, const char *ptr, const char *kw) {
    cst_mark m = cst_mark_here(c->n);
    const size_t nv = json_array_size(values);
    cst_frag *alts = malloc((nv ? nv : 1) * sizeof *alts);
    if (!alts) { sc_fail(c, BRISK_ERR_NOMEM, "out of memory"); return cst_never(c->n); }
    int32_t na = 0;
    for (size_t i = 0; i < nv && !bad(c); i++) {
        json_t *v = json_array_get(values, i);
        const int ok = enum_value_ok(c, s, v, ptr);
        if (ok < 0) {
            if (!c->failed) sc_fail(c, BRISK_ERR_UNSUPPORTED, "JSON Schema keyword '%s' at '%s' combined with other constraints it cannot check", kw, ptr[0] ? ptr : "#");
            break;
        }
        if (ok) alts[na++] = literal_value(c, v);
    }
    cst_frag f = na ? cst_alt(c->n, m, alts, na) : cst_never(c->n);
    free(alts);
    return f;
}

/* The JSON string content (between the quotes) whose decoded value is not one of names. */
static cst_frag key_not_in(sc *c, const char *const *names, int32_t count) {
    cst_mark m = cst_mark_here(c->n);
    if (count == 0) {
        cst_frag ch = cst_json_char(c->n);
        return cst_repeat(c->n, ch, 0, -1);
    }
    /* a trie of the names over code points: at each node, a different character escapes to "free" */
    typedef struct tnode { int32_t state; bool term; } tnode;
    int32_t total = 1;
    for (int32_t i = 0; i < count; i++) total += (int32_t)strlen(names[i]);
    uint32_t *cps = malloc((size_t)total * sizeof *cps);
    int32_t *parent = malloc((size_t)total * sizeof *parent);
    tnode *nodes = malloc((size_t)total * sizeof *nodes);
    if (!cps || !parent || !nodes) {
        free(cps); free(parent); free(nodes);
        sc_fail(c, BRISK_ERR_NOMEM, "out of memory");
        return cst_never(c->n);
    }
    int32_t nn = 1;
    nodes[0] = (tnode){cst_state(c->n), false};
    parent[0] = -1;
    for (int32_t i = 0; i < count; i++) {
        int32_t cur = 0;
        const unsigned char *p = (const unsigned char *)names[i];
        size_t len = strlen(names[i]);
        for (size_t j = 0; j < len;) {
            uint32_t cp = p[j];
            int l = cp < 0x80 ? 1 : (cp >> 5) == 6 ? 2 : (cp >> 4) == 14 ? 3 : 4;
            if (j + (size_t)l > len) l = 1;
            if (l > 1) {
                cp &= l == 2 ? 0x1F : l == 3 ? 0x0F : 0x07;
                for (int k = 1; k < l; k++) cp = cp << 6 | (p[j + (size_t)k] & 0x3F);
            }
            j += (size_t)l;
            int32_t nx = -1;
            for (int32_t k = 1; k < nn; k++)
                if (parent[k] == cur && cps[k] == cp) { nx = k; break; }
            if (nx < 0) {
                nx = nn++;
                parent[nx] = cur;
                cps[nx] = cp;
                nodes[nx] = (tnode){cst_state(c->n), false};
            }
            cur = nx;
        }
        nodes[cur].term = true;
    }
    const int32_t free_s = cst_state(c->n), end = cst_state(c->n);
    {
        cst_frag ch = cst_json_char(c->n);
        cst_eps(c->n, free_s, ch.start);
        cst_eps(c->n, ch.end, free_s);
        cst_eps(c->n, free_s, end);
    }
    for (int32_t k = 0; k < nn && !bad(c); k++) {
        cst_cpset other = {0};
        for (int32_t j = 1; j < nn; j++) {
            if (parent[j] != k) continue;
            cst_cpset one = {0};
            cst_cpset_add(&one, cps[j], cps[j]);
            cst_frag ch = cst_chars(c->n, &one, CST_JSON);
            cst_cpset_free(&one);
            cst_eps(c->n, nodes[k].state, ch.start);
            cst_eps(c->n, ch.end, nodes[j].state);
            cst_cpset_add(&other, cps[j], cps[j]);
        }
        cst_cpset_negate(&other);
        cst_frag ch = cst_chars(c->n, &other, CST_JSON);
        cst_cpset_free(&other);
        cst_eps(c->n, nodes[k].state, ch.start);
        cst_eps(c->n, ch.end, free_s);
        if (!nodes[k].term) cst_eps(c->n, nodes[k].state, end);
    }
    const int32_t start = nodes[0].state;
    free(cps); free(parent); free(nodes);
    return cst_frag_close(c->n, m, start, end);
}

static int32_t any_rule(sc *c);

static cst_frag any_value(sc *c) { return cst_call_frag(c->n, any_rule(c)); }

/* additionalProperties / items given as a boolean or a schema: 1 any, 0 none, 2 a schema */
static int schema_kind(json_t *v) {
    if (!v || json_is_true(v)) return 1;
    if (json_is_false(v)) return 0;
    if (json_is_object(v) && json_object_size(v) == 0) return 1;
    return 2;
}

static bool only_annotations(json_t *s) {
    const char *k;
    json_t *x;
    json_object_foreach(s, k, x) if (known_keyword(k)) return false;
    return true;
}

static cst_frag compile_value_or_any(sc *c, json_t *v, const char *ptr) {
    if (!v || json_is_true(v) || (json_is_object(v) && only_annotations(v))) return any_value(c);
    return compile(c, v, ptr);
}

static cst_frag compile_object(sc *c, json_t *s, const char *ptr) {
    cst_mark m = cst_mark_here(c->n);
    json_t *props = json_object_get(s, "properties");
    json_t *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    json_t *pprops = json_object_get(s, "patternProperties");
    char cp[1024];
    if (props && !json_is_object(props)) { sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema 'properties' at '%s' is not an object", ptr); return cst_never(c->n); }
    if (req && !json_is_array(req)) { sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema 'required' at '%s' is not an array", ptr); return cst_never(c->n); }
    const char *k;
    json_t *x;
    json_object_foreach(s, k, x) {
        if (!strcmp(k, "propertyNames") || !strcmp(k, "dependentRequired") || !strcmp(k, "dependencies") ||
            !strcmp(k, "dependentSchemas") || !strcmp(k, "unevaluatedProperties")) {
            if (!strcmp(k, "unevaluatedProperties") && json_is_true(x)) continue;
            child_ptr(cp, sizeof cp, ptr, k, NULL);
            unsupported(c, k, ptr);
            return cst_never(c->n);
        }
    }
    /* the property list: properties in order, then required names they do not define */
    const size_t np_def = props ? json_object_size(props) : 0, nreq = req ? json_array_size(req) : 0;
    const size_t cap = np_def + nreq + 1;
    const char **names = malloc(cap * sizeof *names);
    json_t **schemas = malloc(cap * sizeof *schemas);
    bool *required = calloc(cap, sizeof *required);
    if (!names || !schemas || !required) {
        free(names); free(schemas); free(required);
        sc_fail(c, BRISK_ERR_NOMEM, "out of memory");
        return cst_never(c->n);
    }
    int32_t np = 0;
    if (props) json_object_foreach(props, k, x) {
        names[np] = k;
        schemas[np] = x;
        np++;
    }
    for (size_t i = 0; i < nreq; i++) {
        json_t *r = json_array_get(req, i);
        if (!json_is_string(r)) continue;
        int32_t j = 0;
        for (; j < np; j++)
            if (!strcmp(names[j], json_string_value(r))) break;
        if (j == np) {
            names[np] = json_string_value(r);
            schemas[np] = NULL;
            np++;
        }
        required[j] = true;
    }
    int32_t n_req = 0;
    for (int32_t i = 0; i < np; i++) n_req += required[i];
    /* extra keys: additionalProperties, or one patternProperties entry */
    int extra = schema_kind(addl);
    json_t *extra_schema = extra == 2 ? addl : NULL;
    const char *pattern = NULL;
    if (pprops && json_object_size(pprops) > 0) {
        if (!json_is_object(pprops) || json_object_size(pprops) > 1 || extra == 2) {
            unsupported(c, "patternProperties", ptr);
            goto fail;
        }
        json_object_foreach(pprops, k, x) {
            pattern = k;
            extra_schema = x;
        }
        for (int32_t i = 0; i < np; i++) {
            const int r = cst_regex_match(pattern, strlen(pattern), names[i], strlen(names[i]));
            if (r != 0) { unsupported(c, "patternProperties", ptr); goto fail; }
        }
        extra = 3;   /* keys matching the pattern (additional keys are left out: stricter) */
    }
    json_t *minp = json_object_get(s, "minProperties"), *maxp = json_object_get(s, "maxProperties");
    /* minProperties: up to the required count it holds by itself; 1 also by refusing the empty object */
    const bool need_one = minp && json_is_integer(minp) && json_integer_value(minp) == 1 && n_req == 0;
    if (minp && !need_one && (!json_is_integer(minp) || json_integer_value(minp) > n_req)) { unsupported(c, "minProperties", ptr); goto fail; }
    if (maxp && (!json_is_integer(maxp) || extra || json_integer_value(maxp) < np)) {
        if (!(json_is_integer(maxp) && !extra && json_integer_value(maxp) >= np)) { unsupported(c, "maxProperties", ptr); goto fail; }
    }

    {
        cst_frag open = lit(c, "{");
        cst_frag w0 = ws(c);
        cst_eps(c->n, open.end, w0.start);
        int32_t *E = malloc(((size_t)np + 1) * sizeof *E), *N = malloc(((size_t)np + 1) * sizeof *N);
        if (!E || !N) { free(E); free(N); sc_fail(c, BRISK_ERR_NOMEM, "out of memory"); goto fail; }
        for (int32_t i = 0; i <= np; i++) {
            E[i] = cst_state(c->n);
            N[i] = cst_state(c->n);
        }
        cst_eps(c->n, w0.end, E[0]);
        for (int32_t i = 0; i < np && !bad(c); i++) {
            cst_mark km = cst_mark_here(c->n);
            sbuf b = {0};
            cst_json_string(&b, names[i], strlen(names[i]));
            cst_frag parts[3];
            parts[0] = cst_bytes(c->n, b.p, b.n);
            free(b.p);
            parts[1] = colon(c);
            child_ptr(cp, sizeof cp, ptr, "properties", names[i]);
            parts[2] = schemas[i] ? compile_value_or_any(c, schemas[i], cp) : any_value(c);
            cst_frag kv = cst_seq(c->n, km, parts, 3);
            cst_frag cm = comma(c);
            cst_eps(c->n, E[i], kv.start);
            cst_eps(c->n, N[i], cm.start);
            cst_eps(c->n, cm.end, kv.start);
            cst_eps(c->n, kv.end, N[i + 1]);
            if (!required[i]) {
                cst_eps(c->n, E[i], E[i + 1]);
                cst_eps(c->n, N[i], N[i + 1]);
            }
        }
        if (extra && !bad(c)) {
            cst_mark km = cst_mark_here(c->n);
            cst_frag parts[3];
            if (extra == 3) {
                char err[256];
                cst_mark sm = cst_mark_here(c->n);
                cst_frag content = cst_regex(c->n, pattern, strlen(pattern), CST_JSON, false, err, sizeof err);
                parts[0] = str_of(c, content, sm);
            } else {
                cst_mark sm = cst_mark_here(c->n);
                cst_frag content = key_not_in(c, names, np);
                parts[0] = str_of(c, content, sm);
            }
            parts[1] = colon(c);
            child_ptr(cp, sizeof cp, ptr, extra == 3 ? "patternProperties" : "additionalProperties", extra == 3 ? pattern : NULL);
            parts[2] = extra_schema ? compile_value_or_any(c, extra_schema, cp) : any_value(c);
            cst_frag kv = cst_seq(c->n, km, parts, 3);
            cst_frag cm = comma(c);
            cst_eps(c->n, E[np], kv.start);
            cst_eps(c->n, N[np], cm.start);
            cst_eps(c->n, cm.end, kv.start);
            cst_eps(c->n, kv.end, N[np]);
        }
        cst_frag w1 = ws(c);
        cst_frag close = lit(c, "}");
        cst_eps(c->n, w1.end, close.start);
        if (!need_one) cst_eps(c->n, E[np], w1.start);
        cst_eps(c->n, N[np], w1.start);
        free(E);
        free(N);
        free(names); free(schemas); free(required);
        return cst_frag_close(c->n, m, open.start, close.end);
    }
fail:
    free(names); free(schemas); free(required);
    return cst_never(c->n);
}

static cst_frag compile_array(sc *c, json_t *s, const char *ptr) {
    cst_mark m = cst_mark_here(c->n);
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    json_t *addl = json_object_get(s, "additionalItems");
    char cp[1024];
    json_t *x;
    if ((x = json_object_get(s, "contains"))) { unsupported(c, "contains", ptr); return cst_never(c->n); }
    if ((x = json_object_get(s, "unevaluatedItems")) && !json_is_true(x)) { unsupported(c, "unevaluatedItems", ptr); return cst_never(c->n); }
    int64_t min = 0, max = -1;
    if ((x = json_object_get(s, "minItems"))) {
        if (!json_is_integer(x) || json_integer_value(x) < 0) { sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema 'minItems' at '%s' is not a non-negative integer", ptr); return cst_never(c->n); }
        min = json_integer_value(x);
    }
    if ((x = json_object_get(s, "maxItems"))) {
        if (!json_is_integer(x) || json_integer_value(x) < 0) { sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema 'maxItems' at '%s' is not a non-negative integer", ptr); return cst_never(c->n); }
        max = json_integer_value(x);
    }
    if (min > 10000) { unsupported(c, "minItems", ptr); return cst_never(c->n); }
    if (max > 10000) max = -1;   /* practically unbounded (no instance that long is generated) */
    if (max >= 0 && max < min) return cst_never(c->n);
    if ((x = json_object_get(s, "uniqueItems")) && json_is_true(x) && !(max >= 0 && max <= 1)) {
        unsupported(c, "uniqueItems", ptr);
        return cst_never(c->n);
    }
    json_t *tuple = NULL, *rest = items;
    const char *tuple_kw = "prefixItems", *rest_kw = "items";
    if (prefix) {
        tuple = prefix;
    } else if (json_is_array(items)) {
        tuple = items;
        rest = addl;
        tuple_kw = "items";
        rest_kw = "additionalItems";
    }
    if (tuple && !json_is_array(tuple)) { sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema '%s' at '%s' is not an array", tuple_kw, ptr); return cst_never(c->n); }
    const int64_t k = tuple ? (int64_t)json_array_size(tuple) : 0;
    const int rest_kind = schema_kind(rest);
    cst_frag open = lit(c, "[");
    cst_frag w0 = ws(c);
    cst_eps(c->n, open.end, w0.start);
    const int32_t X = cst_state(c->n);
    int32_t cur = w0.end;
    int64_t placed = 0;
    char idx[24];
    for (int64_t i = 0; i < k && (max < 0 || i < max) && !bad(c); i++) {
        if (i >= min) cst_eps(c->n, cur, X);
        snprintf(idx, sizeof idx, "%lld", (long long)i);
        child_ptr(cp, sizeof cp, ptr, tuple_kw, idx);
        cst_mark em = cst_mark_here(c->n);
        cst_frag parts[2];
        int npart = 0;
        if (i > 0) parts[npart++] = comma(c);
        parts[npart++] = compile_value_or_any(c, json_array_get(tuple, (size_t)i), cp);
        cst_frag e = cst_seq(c->n, em, parts, npart);
        cst_eps(c->n, cur, e.start);
        cur = e.end;
        placed++;
    }
    bool ok = true;
    if (placed == k && rest_kind != 0 && (max < 0 || max > k)) {
        const int64_t rmin = min > k ? min - k : 0, rmax = max < 0 ? -1 : max - k;
        child_ptr(cp, sizeof cp, ptr, rest_kw, NULL);
        if (k == 0) {
            /* item (, item){rmin-1, rmax-1}, optional when rmin == 0 */
            cst_mark rm = cst_mark_here(c->n);
            cst_frag parts[2];
            parts[0] = rest_kind == 2 ? compile(c, rest, cp) : any_value(c);
            cst_mark tm = cst_mark_here(c->n);
            cst_frag tp[2];
            tp[0] = comma(c);
            tp[1] = cst_copy(c->n, parts[0]);
            cst_frag tail = cst_seq(c->n, tm, tp, 2);
            parts[1] = cst_repeat(c->n, tail, rmin > 0 ? (int32_t)(rmin - 1) : 0, rmax < 0 ? -1 : (int32_t)(rmax - 1));
            cst_frag r = cst_seq(c->n, rm, parts, 2);
            if (rmin == 0) r = cst_opt(c->n, r);
            cst_eps(c->n, cur, r.start);
            cur = r.end;
        } else {
            cst_mark tm = cst_mark_here(c->n);
            cst_frag tp[2];
            tp[0] = comma(c);
            tp[1] = rest_kind == 2 ? compile(c, rest, cp) : any_value(c);
            cst_frag tail = cst_seq(c->n, tm, tp, 2);
            cst_frag r = cst_repeat(c->n, tail, (int32_t)rmin, rmax < 0 ? -1 : (int32_t)rmax);
            cst_eps(c->n, cur, r.start);
            cur = r.end;
        }
    } else if (min > placed) {
        ok = false;   /* fewer items possible than minItems */
    }
    if (ok) cst_eps(c->n, cur, X);
    if (min == 0 && ok) cst_eps(c->n, w0.end, X);
    cst_frag w1 = ws(c);
    cst_frag close = lit(c, "]");
    cst_eps(c->n, X, w1.start);
    cst_eps(c->n, w1.end, close.start);
    return cst_frag_close(c->n, m, open.start, close.end);
}

static cst_frag compile_string(sc *c, json_t *s, const char *ptr) {
    cst_mark m = cst_mark_here(c->n);
    json_t *x;
    int64_t min = 0, max = -1;
    if ((x = json_object_get(s, "minLength"))) {
        if (!json_is_integer(x) || json_integer_value(x) < 0) { sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema 'minLength' at '%s' is not a non-negative integer", ptr); return cst_never(c->n); }
        min = json_integer_value(x);
    }
    if ((x = json_object_get(s, "maxLength"))) {
        if (!json_is_integer(x) || json_integer_value(x) < 0) { sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema 'maxLength' at '%s' is not a non-negative integer", ptr); return cst_never(c->n); }
        max = json_integer_value(x);
    }
    if (min > 10000) { unsupported(c, "minLength", ptr); return cst_never(c->n); }
    if (max > 10000) max = -1;
    if (max >= 0 && max < min) return cst_never(c->n);
    cst_frag parts[4];
    int np = 0;
    parts[np++] = lit(c, "\"");
    cst_frag content;
    bool have = false;
    const char *pats[8];
    size_t plen[8];
    int npat = 0;
    if ((x = json_object_get(s, "pattern"))) {
        if (!json_is_string(x)) { sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema 'pattern' at '%s' is not a string", ptr); return cst_never(c->n); }
        pats[npat] = json_string_value(x);
        plen[npat++] = json_string_length(x);
    }
    if ((x = json_object_get(s, "__patterns")))
        for (size_t i = 0; i < json_array_size(x) && npat < 8; i++) {
            pats[npat] = json_string_value(json_array_get(x, i));
            plen[npat++] = json_string_length(json_array_get(x, i));
        }
    if ((x = json_object_get(s, "format"))) {
        const char *re = json_is_string(x) ? format_re(json_string_value(x)) : NULL;
        if (!re && json_is_string(x) && !standard_format(json_string_value(x))) {
            /* an unknown format: an annotation */
        } else if (!re) {
            sc_fail(c, BRISK_ERR_UNSUPPORTED, "JSON Schema keyword 'format' at '%s': format '%.100s' is not supported", ptr[0] ? ptr : "#",
                    json_is_string(x) ? json_string_value(x) : "?");
            return cst_never(c->n);
        } else if (npat < 8) {
            pats[npat] = re;
            plen[npat++] = strlen(re);
        }
    }
    for (int i = 0; i < npat && !bad(c); i++) {
        char err[256];
        cst_frag p = cst_regex(c->n, pats[i], plen[i], CST_JSON, false, err, sizeof err);
        if (cst_nfa_failed(c->n)) {
            sc_fail(c, BRISK_ERR_UNSUPPORTED, "JSON Schema keyword 'pattern' at '%s': %s", ptr[0] ? ptr : "#", cst_nfa_error(c->n));
            return cst_never(c->n);
        }
        content = have ? cst_intersect(c->n, content, p) : p;
        have = true;
    }
    if (min > 0 || max >= 0 || !have) {
        cst_frag ch = cst_json_char(c->n);
        cst_frag len = have ? cst_repeat_inline(c->n, ch, (int32_t)min, (int32_t)max) : cst_repeat(c->n, ch, (int32_t)min, (int32_t)max);
        content = have ? cst_intersect(c->n, content, len) : len;
    }
    parts[np++] = content;
    parts[np++] = lit(c, "\"");
    return cst_seq(c->n, m, parts, np);
}

static bool int_bound(json_t *s, const char *kw, bool integer, bool upper, bound *b, bool excl_kw) {
    json_t *x = json_object_get(s, kw);
    if (!x) return true;
    if (json_is_boolean(x)) return true;   /* draft-04 boolean exclusives: handled with minimum/maximum */
    if (!json_is_number(x)) return false;
    const double v = json_number_value(x);
    if (fabs(v) > 9e18) return false;
    bool excl = excl_kw;
    if (!excl_kw) {
        json_t *e = json_object_get(s, upper ? "exclusiveMaximum" : "exclusiveMinimum");
        if (json_is_true(e)) excl = true;
    }
    double r = v;
    if (v != floor(v)) {
        if (!integer) return false;   /* a fractional bound on a number */
        r = upper ? floor(v) : ceil(v);
        excl = false;
    }
    bound nb = {true, (int64_t)r, excl};
    if (!b->has) { *b = nb; return true; }
    /* the tighter one */
    if (upper) { if (nb.v < b->v || (nb.v == b->v && nb.excl)) *b = nb; }
    else if (nb.v > b->v || (nb.v == b->v && nb.excl)) *b = nb;
    return true;
}

static cst_frag compile_number(sc *c, json_t *s, const char *ptr, bool integer) {
    if (json_object_get(s, "multipleOf")) {
        json_t *mo = json_object_get(s, "multipleOf");
        if (!(integer && json_is_number(mo) && json_number_value(mo) == 1.0)) { unsupported(c, "multipleOf", ptr); return cst_never(c->n); }
    }
    bound lo = {0}, hi = {0};
    if (!int_bound(s, "minimum", integer, false, &lo, false) || !int_bound(s, "exclusiveMinimum", integer, false, &lo, true)) {
        unsupported(c, json_object_get(s, "minimum") ? "minimum" : "exclusiveMinimum", ptr);
        return cst_never(c->n);
    }
    if (!int_bound(s, "maximum", integer, true, &hi, false) || !int_bound(s, "exclusiveMaximum", integer, true, &hi, true)) {
        unsupported(c, json_object_get(s, "maximum") ? "maximum" : "exclusiveMaximum", ptr);
        return cst_never(c->n);
    }
    return number_frag(c, lo, hi, integer);
}

/* The schema for one instance type t (a single bit) */
static cst_frag compile_type(sc *c, json_t *s, int t, const char *ptr) {
    switch (t) {
    case T_NULL: return lit(c, "null");
    case T_BOOL: {
        cst_mark m = cst_mark_here(c->n);
        cst_frag a[2] = {lit(c, "true"), lit(c, "false")};
        a[1] = a[1];
        return cst_alt(c->n, m, a, 2);
    }
    case T_OBJ: return compile_object(c, s, ptr);
    case T_ARR: return compile_array(c, s, ptr);
    case T_STR: return compile_string(c, s, ptr);
    case T_INT: return compile_number(c, s, ptr, true);
    default: return compile_number(c, s, ptr, false);
    }
}

/* ---- allOf merging ----------------------------------------------------------------------------- */

static json_t *deref(sc *c, json_t *s, const char *ptr) {
    for (int hop = 0; hop < 32 && json_is_object(s); hop++) {
        json_t *r = json_object_get(s, "$ref");
        if (!r || !json_is_string(r)) return s;
        json_t *t = resolve_ptr(c, json_string_value(r), ptr);
        if (!t) return NULL;
        if (json_object_size(s) > 1 && c->ref_siblings) {
            /* siblings: the target merged with them */
            json_t *sib = json_deep_copy(s);
            json_object_del(sib, "$ref");
            if (only_annotations(sib)) { json_decref(sib); s = t; continue; }
            json_t *all = json_pack("{s:[OO]}", "allOf", t, sib);
            json_decref(sib);
            keep(c, all);
            return all;
        }
        s = t;
    }
    if (json_is_object(s) && json_object_get(s, "$ref")) {
        sc_fail(c, BRISK_ERR_UNSUPPORTED, "JSON Schema '$ref' at '%s': a chain of references too long", ptr);
        return NULL;
    }
    return s;
}

static json_t *merge(sc *c, json_t *a, json_t *b, const char *ptr, int depth);

static json_t *merge(sc *c, json_t *a, json_t *b, const char *ptr, int depth) {
    if (depth > 16) { unsupported(c, "allOf", ptr); return NULL; }
    a = deref(c, a, ptr);
    b = deref(c, b, ptr);
    if (!a || !b) return NULL;
    if (json_is_false(a) || json_is_false(b)) return json_pack("{s:b}", "__never", 1);
    if (json_is_true(a)) return json_incref(b);
    if (json_is_true(b)) return json_incref(a);
    if (!json_is_object(a) || !json_is_object(b)) { sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema at '%s': a subschema is not an object", ptr); return NULL; }
    /* nested allOf first */
    json_t *aa = json_object_get(a, "allOf"), *ba = json_object_get(b, "allOf");
    if (aa || ba) {
        json_t *acc = json_copy(a);
        json_object_del(acc, "allOf");
        json_t *list[2] = {aa, ba};
        json_t *rest = json_copy(b);
        json_object_del(rest, "allOf");
        json_t *cur = merge(c, acc, rest, ptr, depth + 1);
        json_decref(acc);
        json_decref(rest);
        for (int l = 0; l < 2 && cur; l++) {
            if (!list[l]) continue;
            for (size_t i = 0; i < json_array_size(list[l]) && cur; i++) {
                json_t *nx = merge(c, cur, json_array_get(list[l], i), ptr, depth + 1);
                json_decref(cur);
                cur = nx;
            }
        }
        return cur;
    }
    json_t *out = json_object();
    const char *k;
    json_t *x;
    /* keys of a, then keys of b not in a */
    json_object_foreach(a, k, x) {
        json_t *y = json_object_get(b, k);
        if (annotation(k) || (!known_keyword(k) && strcmp(k, "__never"))) continue;
        if (!y) { json_object_set(out, k, x); continue; }
        if (json_equal(x, y)) { json_object_set(out, k, x); continue; }
        if (!strcmp(k, "type")) {
            /* intersect as bit sets */
            int ta = types_of(c, a, ptr), tb = types_of(c, b, ptr);
            if (ta < 0 || tb < 0) goto fail;
            int t = ta & tb;
            if ((ta & T_INT) && (tb & T_NUM) && !(ta & T_NUM)) t |= T_INT;
            json_t *arr = json_array();
            static const char *tn[] = {"null", "boolean", "object", "array", "string", "integer", "number"};
            for (int i = 0; i < 7; i++) {
                if (!(t & (1 << i))) continue;
                if (i == 5 && (t & T_NUM)) continue;
                json_array_append_new(arr, json_string(tn[i]));
            }
            if (json_array_size(arr) == 0) { json_decref(arr); json_object_set_new(out, "__never", json_true()); continue; }
            json_object_set_new(out, "type", arr);
        } else if (!strcmp(k, "required")) {
            json_t *u = json_copy(x);
            for (size_t i = 0; i < json_array_size(y); i++) {
                bool seen = false;
                for (size_t j = 0; j < json_array_size(x); j++)
                    if (json_equal(json_array_get(x, j), json_array_get(y, i))) seen = true;
                if (!seen) json_array_append(u, json_array_get(y, i));
            }
            json_object_set_new(out, k, u);
        } else if (!strcmp(k, "properties")) {
            if (!json_is_object(x) || !json_is_object(y)) goto fail;
            json_t *ap_a = json_object_get(a, "additionalProperties"), *ap_b = json_object_get(b, "additionalProperties");
            if (json_object_get(a, "patternProperties") || json_object_get(b, "patternProperties")) { unsupported(c, "patternProperties", ptr); goto fail; }
            json_t *p = json_object();
            const char *pk;
            json_t *pv;
            json_object_foreach(x, pk, pv) {
                json_t *q = json_object_get(y, pk);
                if (q) json_object_set_new(p, pk, json_pack("{s:[OO]}", "allOf", pv, q));
                else if (ap_b && json_is_false(ap_b)) json_object_set_new(p, pk, json_false());
                else if (ap_b && json_is_object(ap_b)) json_object_set_new(p, pk, json_pack("{s:[OO]}", "allOf", pv, ap_b));
                else json_object_set(p, pk, pv);
            }
            json_object_foreach(y, pk, pv) {
                if (json_object_get(x, pk)) continue;
                if (ap_a && json_is_false(ap_a)) json_object_set_new(p, pk, json_false());
                else if (ap_a && json_is_object(ap_a)) json_object_set_new(p, pk, json_pack("{s:[OO]}", "allOf", pv, ap_a));
                else json_object_set(p, pk, pv);
            }
            json_object_set_new(out, k, p);
        } else if (!strcmp(k, "additionalProperties") || !strcmp(k, "items") || !strcmp(k, "additionalItems") ||
                   !strcmp(k, "propertyNames") || !strcmp(k, "not_")) {
            if (json_is_array(x) || json_is_array(y)) { unsupported(c, k, ptr); goto fail; }
            if (json_is_false(x) || json_is_false(y)) json_object_set_new(out, k, json_false());
            else json_object_set_new(out, k, json_pack("{s:[OO]}", "allOf", x, y));
        } else if (!strcmp(k, "minLength") || !strcmp(k, "minItems") || !strcmp(k, "minProperties") ||
                   !strcmp(k, "minimum") || !strcmp(k, "exclusiveMinimum")) {
            if (!json_is_number(x) || !json_is_number(y)) { unsupported(c, k, ptr); goto fail; }
            json_object_set(out, k, json_number_value(x) >= json_number_value(y) ? x : y);
        } else if (!strcmp(k, "maxLength") || !strcmp(k, "maxItems") || !strcmp(k, "maxProperties") ||
                   !strcmp(k, "maximum") || !strcmp(k, "exclusiveMaximum")) {
            if (!json_is_number(x) || !json_is_number(y)) { unsupported(c, k, ptr); goto fail; }
            json_object_set(out, k, json_number_value(x) <= json_number_value(y) ? x : y);
        } else if (!strcmp(k, "pattern")) {
            json_object_set(out, k, x);
            json_t *pl = json_object_get(out, "__patterns");
            if (!pl) { pl = json_array(); json_object_set_new(out, "__patterns", pl); }
            json_array_append(pl, y);
        } else if (!strcmp(k, "enum") || !strcmp(k, "const")) {
            json_t *ex = !strcmp(k, "const") ? json_pack("[O]", x) : json_incref(x);
            json_t *ey = !strcmp(k, "const") ? json_pack("[O]", y) : json_incref(y);
            json_t *inter = json_array();
            for (size_t i = 0; i < json_array_size(ex); i++)
                for (size_t j = 0; j < json_array_size(ey); j++)
                    if (json_equal(json_array_get(ex, i), json_array_get(ey, j))) { json_array_append(inter, json_array_get(ex, i)); break; }
            json_decref(ex);
            json_decref(ey);
            json_object_set_new(out, "enum", inter);
        } else if (!strcmp(k, "anyOf") && json_is_array(x) && json_is_array(y) &&
                   json_array_size(x) * json_array_size(y) <= 64) {
            /* two alternations: every pair of branches */
            json_t *cross = json_array();
            for (size_t i = 0; i < json_array_size(x); i++)
                for (size_t j = 0; j < json_array_size(y); j++)
                    json_array_append_new(cross, json_pack("{s:[OO]}", "allOf", json_array_get(x, i), json_array_get(y, j)));
            json_object_set_new(out, "anyOf", cross);
        } else if (!strcmp(k, "anyOf") || !strcmp(k, "oneOf")) {
            unsupported(c, "allOf", ptr);   /* two alternations in one allOf */
            goto fail;
        } else {
            unsupported(c, k, ptr);
            goto fail;
        }
    }
    json_object_foreach(b, k, x) {
        if (json_object_get(a, k) || annotation(k) || (!known_keyword(k) && strcmp(k, "__never"))) continue;
        if (!strcmp(k, "properties")) {
            /* b's properties under a's additionalProperties */
            json_t *ap_a = json_object_get(a, "additionalProperties");
            if (ap_a && !json_is_true(ap_a)) {
                json_t *p = json_object();
                const char *pk;
                json_t *pv;
                json_object_foreach(x, pk, pv) {
                    if (json_is_false(ap_a)) json_object_set_new(p, pk, json_false());
                    else json_object_set_new(p, pk, json_pack("{s:[OO]}", "allOf", pv, ap_a));
                }
                json_object_set_new(out, k, p);
                continue;
            }
        }
        if (!strcmp(k, "enum") && json_object_get(a, "const")) continue;
        json_object_set(out, k, x);
    }
    /* a's properties under b's additionalProperties when b has no properties */
    if (json_object_get(a, "properties") && !json_object_get(b, "properties")) {
        json_t *ap_b = json_object_get(b, "additionalProperties");
        if (ap_b && !json_is_true(ap_b)) {
            json_t *p = json_object();
            const char *pk;
            json_t *pv;
            json_object_foreach(json_object_get(a, "properties"), pk, pv) {
                if (json_is_false(ap_b)) json_object_set_new(p, pk, json_false());
                else json_object_set_new(p, pk, json_pack("{s:[OO]}", "allOf", pv, ap_b));
            }
            json_object_set_new(out, "properties", p);
        }
    }
    if (json_object_get(a, "const") && json_object_get(b, "enum")) {
        /* handled above when both had the same key; a const against an enum */
        json_t *cv = json_object_get(a, "const"), *ev = json_object_get(b, "enum");
        json_t *inter = json_array();
        for (size_t j = 0; j < json_array_size(ev); j++)
            if (json_equal(cv, json_array_get(ev, j))) json_array_append(inter, cv);
        json_object_del(out, "const");
        json_object_set_new(out, "enum", inter);
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* ---- oneOf disjointness ------------------------------------------------------------------------ */

static int types_or_values(sc *c, json_t *s, const char *ptr) {
    json_t *e = json_object_get(s, "enum"), *k = json_object_get(s, "const");
    if (k) return value_type(k) | (value_type(k) == T_INT ? T_NUM : 0);
    if (json_is_array(e)) {
        int t = 0;
        for (size_t i = 0; i < json_array_size(e); i++) t |= value_type(json_array_get(e, i));
        return t | ((t & T_INT) ? T_NUM : 0);
    }
    int t = types_of(c, s, ptr);
    if (t & T_NUM) t |= T_INT;
    if (t & T_INT) t |= T_NUM;
    return t;
}

static json_t *values_of(json_t *s) {
    json_t *e = json_object_get(s, "enum"), *k = json_object_get(s, "const");
    if (k) return json_pack("[O]", k);
    if (json_is_array(e)) return json_incref(e);
    return NULL;
}

static bool values_disjoint(json_t *a, json_t *b) {
    json_t *va = values_of(a), *vb = values_of(b);
    bool dis = va && vb;
    for (size_t i = 0; dis && i < json_array_size(va); i++)
        for (size_t j = 0; dis && j < json_array_size(vb); j++)
            if (json_equal(json_array_get(va, i), json_array_get(vb, j))) dis = false;
    json_decref(va);
    json_decref(vb);
    return dis;
}

static bool requires(json_t *s, const char *name) {
    json_t *r = json_object_get(s, "required");
    for (size_t i = 0; i < json_array_size(r); i++)
        if (json_is_string(json_array_get(r, i)) && !strcmp(json_string_value(json_array_get(r, i)), name)) return true;
    return false;
}

static bool forbids(json_t *s, const char *name) {
    json_t *p = json_object_get(s, "properties");
    json_t *v = p ? json_object_get(p, name) : NULL;
    if (v) return json_is_false(v);
    json_t *ap = json_object_get(s, "additionalProperties");
    return ap && json_is_false(ap) && !json_object_get(s, "patternProperties");
}

static bool disjoint(sc *c, json_t *a, json_t *b, const char *ptr) {
    if (!json_is_object(a) || !json_is_object(b)) return false;
    const int ta = types_or_values(c, a, ptr), tb = types_or_values(c, b, ptr);
    if (ta >= 0 && tb >= 0 && !(ta & tb)) return true;
    if (values_disjoint(a, b)) return true;
    /* objects: a property required by one and forbidden by the other, or required by both with disjoint values */
    if ((ta & T_OBJ) && (tb & T_OBJ) && ta == T_OBJ && tb == T_OBJ) {
        json_t *r = json_object_get(a, "required");
        for (size_t i = 0; i < json_array_size(r); i++) {
            json_t *nm = json_array_get(r, i);
            if (!json_is_string(nm)) continue;
            const char *name = json_string_value(nm);
            if (forbids(b, name)) return true;
            if (requires(b, name)) {
                json_t *pa = json_object_get(json_object_get(a, "properties"), name);
                json_t *pb = json_object_get(json_object_get(b, "properties"), name);
                if (pa && pb) {
                    json_t *da = deref(c, pa, ptr), *db = deref(c, pb, ptr);
                    if (da && db && json_is_object(da) && json_is_object(db) && values_disjoint(da, db)) return true;
                }
            }
        }
        r = json_object_get(b, "required");
        for (size_t i = 0; i < json_array_size(r); i++) {
            json_t *nm = json_array_get(r, i);
            if (json_is_string(nm) && forbids(a, json_string_value(nm))) return true;
        }
    }
    return false;
}

/* ---- the main dispatch ------------------------------------------------------------------------- */

/* Does s constrain instances of type bit t (a keyword of t's kind, enum/const, or a composition)? */
static bool constrains_type(json_t *s, int t) {
    static const char *const str_kw[] = {"minLength", "maxLength", "pattern", "format", "__patterns"};
    static const char *const num_kw[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
    static const char *const obj_kw[] = {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
                                         "maxProperties", "dependentRequired", "propertyNames", "dependencies", "dependentSchemas",
                                         "unevaluatedProperties"};
    static const char *const arr_kw[] = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
                                         "unevaluatedItems"};
    static const char *const any_kw[] = {"enum", "const", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref", "__never"};
    const char *k;
    json_t *x;
    json_object_foreach(s, k, x) {
        for (size_t i = 0; i < BRISK_ARRAY_LEN(any_kw); i++) if (!strcmp(k, any_kw[i])) return true;
        if (t == T_STR) for (size_t i = 0; i < BRISK_ARRAY_LEN(str_kw); i++) if (!strcmp(k, str_kw[i])) return true;
        if (t & (T_NUM | T_INT)) for (size_t i = 0; i < BRISK_ARRAY_LEN(num_kw); i++) if (!strcmp(k, num_kw[i])) return true;
        if (t == T_OBJ) for (size_t i = 0; i < BRISK_ARRAY_LEN(obj_kw); i++) if (!strcmp(k, obj_kw[i])) return true;
        if (t == T_ARR) for (size_t i = 0; i < BRISK_ARRAY_LEN(arr_kw); i++) if (!strcmp(k, arr_kw[i])) return true;
    }
    return false;
}

static json_t *with_type(sc *c, json_t *s, const char *type, const char *ptr) {
    json_t *t = json_pack("{s:s}", "type", type);
    json_t *m = merge(c, s, t, ptr, 0);
    json_decref(t);
    return m;
}

/* oneOf whose branches are not provably exclusive, rewritten per instance type into branches that are:
 * a type that two branches accept whole is impossible; a type one branch accepts whole and another in
 * part needs a complement (refused); object branches are made exclusive by forbidding, in each, a key
 * every other branch requires (stricter than oneOf, never looser). NULL: refused. */
static json_t *oneof_rewrite(sc *c, json_t **br, size_t nb, const char *ptr) {
    static const int tbits[6] = {T_NULL, T_BOOL, T_OBJ, T_ARR, T_STR, T_NUM | T_INT};
    static const char *const tname[6] = {"null", "boolean", "object", "array", "string", "number"};
    json_t **d = calloc(nb, sizeof *d);
    json_t *out = json_array();
    if (!d || !out) { free(d); json_decref(out); return NULL; }
    bool ok = true;
    for (size_t i = 0; i < nb && ok; i++) {
        d[i] = deref(c, br[i], ptr);
        if (!d[i] || !json_is_object(d[i])) ok = false;
    }
    /* all branches finite: the values exactly one branch allows */
    bool finite = ok;
    for (size_t i = 0; i < nb && finite; i++) {
        if (!json_object_get(d[i], "enum") && !json_object_get(d[i], "const")) finite = false;
        const char *k;
        json_t *x;
        json_object_foreach(d[i], k, x) if (known_keyword(k) && strcmp(k, "enum") && strcmp(k, "const") && strcmp(k, "type")) finite = false;
    }
    if (finite) {
        json_t *vals = json_array(), *from = json_array();
        for (size_t i = 0; i < nb && ok; i++) {
            json_t *vs = values_of(d[i]);
            for (size_t k = 0; k < json_array_size(vs); k++) {
                json_t *v = json_array_get(vs, k);
                const int r = enum_value_ok(c, d[i], v, ptr);
                if (r < 0) { ok = false; break; }
                if (!r) continue;
                json_array_append(vals, v);
                json_array_append_new(from, json_integer((json_int_t)i));
            }
            json_decref(vs);
        }
        json_t *keep_vals = json_array();
        for (size_t k = 0; k < json_array_size(vals) && ok; k++) {
            size_t branches_with = 0;
            json_int_t last = -1;
            for (size_t q = 0; q < json_array_size(vals); q++)
                if (json_equal(json_array_get(vals, k), json_array_get(vals, q)) && json_integer_value(json_array_get(from, q)) != last) {
                    branches_with++;
                    last = json_integer_value(json_array_get(from, q));
                }
            bool seen = false;
            for (size_t q = 0; q < json_array_size(keep_vals); q++)
                if (json_equal(json_array_get(keep_vals, q), json_array_get(vals, k))) seen = true;
            if (branches_with == 1 && !seen) json_array_append(keep_vals, json_array_get(vals, k));
        }
        json_decref(vals);
        json_decref(from);
        free(d);
        if (!ok) { json_decref(keep_vals); json_decref(out); return NULL; }
        if (json_array_size(keep_vals)) json_array_append_new(out, json_pack("{s:o}", "enum", keep_vals));
        else json_decref(keep_vals);
        return out;
    }
    for (int ti = 0; ti < 6 && ok && !bad(c); ti++) {
        const int t = tbits[ti];
        size_t n_all = 0, n_some = 0, first_all = 0;
        size_t *some = calloc(nb, sizeof *some);
        if (!some) { ok = false; break; }
        for (size_t i = 0; i < nb; i++) {
            const int tv = types_or_values(c, d[i], ptr);
            if (tv < 0 || !(tv & t)) continue;
            if (constrains_type(d[i], t)) some[n_some++] = i;
            else if (n_all++ == 0) first_all = i;
        }
        if (n_all >= 2 || (n_all == 0 && n_some == 0)) { free(some); continue; }   /* impossible, or nobody's */
        if (n_all == 1 && n_some > 0) { ok = false; free(some); break; }
        if (n_all == 1) {
            json_t *b = with_type(c, d[first_all], tname[ti], ptr);
            if (!b) ok = false; else json_array_append_new(out, b);
            free(some);
            continue;
        }
        for (size_t a = 0; a < n_some && ok; a++) {
            json_t *b = with_type(c, d[some[a]], tname[ti], ptr);
            if (!b) { ok = false; break; }
            for (size_t z = 0; z < n_some && ok && b; z++) {
                if (z == a) continue;
                json_t *o = with_type(c, d[some[z]], tname[ti], ptr);
                if (!o) { ok = false; break; }
                if (!disjoint(c, b, o, ptr)) {
                    /* objects: forbid a key the other requires and this one does not */
                    const char *key = NULL;
                    json_t *r = json_object_get(o, "required");
                    for (size_t q = 0; t == T_OBJ && q < json_array_size(r) && !key; q++) {
                        json_t *nm = json_array_get(r, q);
                        if (json_is_string(nm) && !requires(b, json_string_value(nm))) key = json_string_value(nm);
                    }
                    if (!key) ok = false;
                    else {
                        json_t *forbid = json_pack("{s:{s:b}}", "properties", key, 0);
                        json_t *nb2 = merge(c, b, forbid, ptr, 0);
                        json_decref(forbid);
                        json_decref(b);
                        b = nb2;
                        if (!b) ok = false;
                    }
                }
                json_decref(o);
            }
            if (ok && b) json_array_append_new(out, b);
            else json_decref(b);
        }
        free(some);
    }
    free(d);
    if (!ok || bad(c)) { json_decref(out); return NULL; }
    return out;
}

static cst_frag compile_ref(sc *c, const char *ref, const char *ptr) {
    int32_t i = 0;
    for (; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ptr, ref)) break;
    if (i < c->n_refs) {
        ref_ent *e = &c->refs[i];
        if (e->state == 1) {
            e->recursive = true;
            return cst_call_frag(c->n, e->rule);
        }
        if (e->recursive || e->body.s_hi - e->body.s_lo > REF_INLINE_STATES) return cst_call_frag(c->n, e->rule);
        return cst_copy(c->n, e->body);
    }
    json_t *t = resolve_ptr(c, ref, ptr);
    if (!t) return cst_never(c->n);
    if (c->n_refs == c->cap_refs) {
        const int32_t cap = c->cap_refs ? c->cap_refs * 2 : 16;
        ref_ent *r = realloc(c->refs, (size_t)cap * sizeof *r);
        if (!r) { sc_fail(c, BRISK_ERR_NOMEM, "out of memory"); return cst_never(c->n); }
        c->refs = r;
        c->cap_refs = cap;
    }
    char *key = strdup(ref);
    if (!key) { sc_fail(c, BRISK_ERR_NOMEM, "out of memory"); return cst_never(c->n); }
    i = c->n_refs++;
    c->refs[i] = (ref_ent){key, cst_rule_reserve(c->n), 1, false, {0}};
    cst_frag body = compile(c, t, ref + 1);
    ref_ent *e = &c->refs[i];
    e->state = 2;
    e->body = body;
    if (bad(c)) return cst_never(c->n);
    /* the rule's body gets a fresh end (the final mark must not land inside copies' sources) */
    cst_mark m = {body.s_lo, body.e_lo};
    const int32_t end = cst_state(c->n);
    cst_eps(c->n, body.end, end);
    e->body = cst_frag_close(c->n, m, body.start, end);
    cst_rule_define(c->n, e->rule, e->body);
    if (e->recursive || e->body.s_hi - e->body.s_lo > REF_INLINE_STATES) return cst_call_frag(c->n, e->rule);
    return cst_copy(c->n, e->body);
}

static cst_frag compile_alternatives(sc *c, json_t *s, json_t *list, const char *kw, const char *ptr) {
    cst_mark m = cst_mark_here(c->n);
    if (!json_is_array(list) || json_array_size(list) == 0) {
        sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema '%s' at '%s' is not a non-empty array", kw, ptr[0] ? ptr : "#");
        return cst_never(c->n);
    }
    const size_t nb = json_array_size(list);
    if (nb > MAX_ANYOF) { unsupported(c, kw, ptr); return cst_never(c->n); }
    /* siblings apply to every branch */
    json_t *sib = json_copy(s);
    json_object_del(sib, kw);
    const bool plain = only_annotations(sib);
    size_t nb_out = 0;
    json_t **branches = calloc(nb, sizeof *branches);
    if (!branches) { json_decref(sib); sc_fail(c, BRISK_ERR_NOMEM, "out of memory"); return cst_never(c->n); }
    char cp[1024], idx[24];
    for (size_t i = 0; i < nb && !bad(c); i++) {
        json_t *b = json_array_get(list, i);
        snprintf(idx, sizeof idx, "%zu", i);
        child_ptr(cp, sizeof cp, ptr, kw, idx);
        branches[i] = plain ? json_incref(b) : merge(c, sib, b, cp, 0);
    }
    if (!bad(c) && !strcmp(kw, "oneOf")) {
        size_t bi = 0, bj = 0;
        bool exclusive = true;
        for (size_t i = 0; i < nb && exclusive && !bad(c); i++) {
            json_t *di = deref(c, branches[i], ptr);
            for (size_t j = i + 1; j < nb && di && exclusive && !bad(c); j++) {
                json_t *dj = deref(c, branches[j], ptr);
                if (dj && !disjoint(c, di, dj, ptr)) { exclusive = false; bi = i; bj = j; }
            }
        }
        if (!exclusive && !bad(c)) {
            /* rewrite into branches that exclude each other by construction, or refuse */
            json_t *rw = oneof_rewrite(c, branches, nb, ptr);
            if (rw) {
                for (size_t i = 0; i < nb; i++) json_decref(branches[i]);
                free(branches);
                const size_t n2 = json_array_size(rw);
                branches = calloc(n2 ? n2 : 1, sizeof *branches);
                if (!branches) { json_decref(rw); json_decref(sib); sc_fail(c, BRISK_ERR_NOMEM, "out of memory"); return cst_never(c->n); }
                for (size_t i = 0; i < n2; i++) branches[i] = json_incref(json_array_get(rw, i));
                json_decref(rw);
                if (n2 == 0) {
                    free(branches);
                    json_decref(sib);
                    return cst_never(c->n);
                }
                nb_out = n2;
            } else if (!bad(c)) {
                sc_fail(c, BRISK_ERR_UNSUPPORTED, "JSON Schema keyword 'oneOf' at '%s': branches %zu and %zu may both match (only provably exclusive branches are supported)",
                        ptr[0] ? ptr : "#", bi, bj);
            }
        }
    }
    const size_t nb_final = nb_out ? nb_out : nb;
    cst_frag *alts = malloc(nb_final * sizeof *alts);
    int32_t na = 0;
    for (size_t i = 0; i < nb_final && alts && !bad(c); i++) {
        snprintf(idx, sizeof idx, "%zu", i);
        child_ptr(cp, sizeof cp, ptr, kw, idx);
        if (json_is_false(branches[i])) continue;
        alts[na++] = compile_value_or_any(c, branches[i], cp);
    }
    for (size_t i = 0; i < nb_final; i++) json_decref(branches[i]);
    free(branches);
    json_decref(sib);
    cst_frag f = na && !bad(c) ? cst_alt(c->n, m, alts, na) : cst_never(c->n);
    free(alts);
    return f;
}

static cst_frag compile(sc *c, json_t *s, const char *ptr) {
    if (bad(c)) return cst_never(c->n);
    if (json_is_true(s)) return any_value(c);
    if (json_is_false(s)) return cst_never(c->n);
    if (!json_is_object(s)) {
        sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema at '%s' is not an object or a boolean", ptr[0] ? ptr : "#");
        return cst_never(c->n);
    }
    if (++c->depth > SCHEMA_MAX_DEPTH) {
        sc_fail(c, BRISK_ERR_UNSUPPORTED, "JSON Schema at '%s' is nested more than %d levels deep", ptr[0] ? ptr : "#", SCHEMA_MAX_DEPTH);
        return cst_never(c->n);
    }
    cst_frag out;
    const char *k;
    json_t *x;
    json_t *notv = json_object_get(s, "not");
    if (notv) {
        /* not: nothing ({} or true), everything (false), or some types */
        if (json_is_false(notv) || (json_is_object(notv) && json_object_get(notv, "not") && json_object_size(notv) == 1 &&
                                    (json_is_true(json_object_get(notv, "not")) || (json_is_object(json_object_get(notv, "not")) && only_annotations(json_object_get(notv, "not")))))) {
            json_t *rest = json_copy(s);
            json_object_del(rest, "not");
            keep(c, rest);
            c->depth--;
            return compile(c, rest, ptr);
        }
        if (json_is_true(notv) || (json_is_object(notv) && only_annotations(notv))) {
            c->depth--;
            return cst_never(c->n);
        }
        bool only_type = json_is_object(notv) && json_object_get(notv, "type");
        if (only_type) {
            json_object_foreach(notv, k, x) if (strcmp(k, "type") && known_keyword(k)) only_type = false;
        }
        if (only_type) {
            const int mine = types_of(c, s, ptr), theirs = types_of(c, notv, ptr);
            if (mine < 0 || theirs < 0) { c->depth--; return cst_never(c->n); }
            /* "number" minus "integer" is not a type list: refused below */
            if (!((theirs & T_INT) && !(theirs & T_NUM) && (mine & T_NUM))) {
                const int left = mine & ~theirs;
                json_t *rest = json_copy(s);
                json_object_del(rest, "not");
                json_t *arr = json_array();
                static const char *tn[] = {"null", "boolean", "object", "array", "string", "integer", "number"};
                for (int i = 0; i < 7; i++) {
                    if (!(left & (1 << i))) continue;
                    if (i == 5 && (left & T_NUM)) continue;
                    json_array_append_new(arr, json_string(tn[i]));
                }
                if (json_array_size(arr) == 0) json_object_set_new(rest, "__never", json_true());
                json_object_set_new(rest, "type", arr);
                keep(c, rest);
                c->depth--;
                return compile(c, rest, ptr);
            }
        }
    }
    json_object_foreach(s, k, x) {
        if (!strcmp(k, "not") || !strcmp(k, "if") || !strcmp(k, "then") || !strcmp(k, "else") || !strcmp(k, "$dynamicRef") ||
            !strcmp(k, "$recursiveRef")) {
            char cp[1024];
            child_ptr(cp, sizeof cp, ptr, k, NULL);
            unsupported(c, k, ptr);
            c->depth--;
            return cst_never(c->n);
        }
    }
    /* dependentRequired (and draft-04..07 dependencies with arrays): a -> [b...] is "a absent, or a and b...
     * present", an anyOf per dependency */
    json_t *deps = json_object_get(s, "dependentRequired");
    const char *deps_kw = "dependentRequired";
    if (!deps) { deps = json_object_get(s, "dependencies"); deps_kw = "dependencies"; }
    if (deps && json_is_object(deps) && json_object_size(deps) <= 4) {
        bool arrays = true;
        json_object_foreach(deps, k, x) if (!json_is_array(x)) arrays = false;
        if (arrays) {
            json_t *rest = json_copy(s);
            json_object_del(rest, "dependentRequired");
            json_object_del(rest, "dependencies");
            json_t *all = json_array();
            json_array_append_new(all, rest);
            json_object_foreach(deps, k, x) {
                json_t *req = json_pack("[s]", k);
                for (size_t i = 0; i < json_array_size(x); i++) json_array_append(req, json_array_get(x, i));
                json_array_append_new(all, json_pack("{s:[{s:{s:b}},{s:o}]}", "anyOf", "properties", k, 0, "required", req));
            }
            json_t *wrapped = json_pack("{s:o}", "allOf", all);
            keep(c, wrapped);
            c->depth--;
            return compile(c, wrapped, ptr);
        }
    }
    (void)deps_kw;
    json_t *ref = json_object_get(s, "$ref");
    if (json_object_get(s, "__never")) {
        out = cst_never(c->n);
    } else if (ref) {
        if (!json_is_string(ref)) {
            sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema '$ref' at '%s' is not a string", ptr[0] ? ptr : "#");
            out = cst_never(c->n);
        } else {
            json_t *sib = json_copy(s);
            json_object_del(sib, "$ref");
            const bool plain = !c->ref_siblings || only_annotations(sib);
            json_decref(sib);
            if (plain) {
                out = compile_ref(c, json_string_value(ref), ptr);
            } else {
                json_t *t = deref(c, s, ptr);
                out = t ? compile(c, t, ptr) : cst_never(c->n);
            }
        }
    } else if (json_object_get(s, "allOf")) {
        json_t *rest = json_copy(s);
        json_t *list = json_object_get(s, "allOf");
        json_object_del(rest, "allOf");
        json_t *cur = rest;
        if (!json_is_array(list)) {
            sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema 'allOf' at '%s' is not an array", ptr[0] ? ptr : "#");
            cur = NULL;
        }
        for (size_t i = 0; cur && i < json_array_size(list); i++) {
            json_t *nx = merge(c, cur, json_array_get(list, i), ptr, 0);
            json_decref(cur);
            cur = nx;
        }
        if (cur) {
            keep(c, cur);
            out = compile(c, cur, ptr);
        } else {
            if (!bad(c)) unsupported(c, "allOf", ptr);
            out = cst_never(c->n);
        }
    } else if (json_object_get(s, "anyOf") || json_object_get(s, "oneOf")) {
        const bool any = json_object_get(s, "anyOf") != NULL;
        if (any && json_object_get(s, "oneOf")) {
            /* both: the oneOf's branches are merged into each anyOf branch's siblings */
            json_t *rest = json_copy(s);
            json_object_del(rest, "anyOf");
            json_t *wrapped = json_pack("{s:O}", "anyOf", json_object_get(s, "anyOf"));
            json_t *all = json_pack("{s:[OO]}", "allOf", rest, wrapped);
            json_decref(rest);
            json_decref(wrapped);
            keep(c, all);
            unsupported(c, "oneOf", ptr);
            out = cst_never(c->n);
        } else {
            out = compile_alternatives(c, s, json_object_get(s, any ? "anyOf" : "oneOf"), any ? "anyOf" : "oneOf", ptr);
        }
    } else if (json_object_get(s, "enum") || json_object_get(s, "const")) {
        json_t *e = json_object_get(s, "enum");
        if (e && !json_is_array(e)) {
            sc_fail(c, BRISK_ERR_INVALID_ARG, "JSON Schema 'enum' at '%s' is not an array", ptr[0] ? ptr : "#");
            out = cst_never(c->n);
        } else if (json_object_get(s, "const")) {
            json_t *one = json_pack("[O]", json_object_get(s, "const"));
            json_t *filtered = one;
            if (e) {
                filtered = json_array();
                for (size_t i = 0; i < json_array_size(e); i++)
                    if (json_equal(json_array_get(e, i), json_object_get(s, "const"))) json_array_append(filtered, json_object_get(s, "const"));
                json_decref(one);
            }
            out = compile_enum(c, s, filtered, ptr, "const");
            json_decref(filtered);
        } else {
            out = compile_enum(c, s, e, ptr, "enum");
        }
    } else {
        const int t = types_of(c, s, ptr);
        if (t < 0) {
            out = cst_never(c->n);
        } else if (t == T_ALL && only_annotations(s)) {
            out = any_value(c);
        } else {
            cst_mark m = cst_mark_here(c->n);
            cst_frag alts[7];
            int na = 0;
            for (int bit = 1; bit <= T_NUM; bit <<= 1) {
                if (!(t & bit)) continue;
                if (bit == T_INT && (t & T_NUM)) continue;   /* number covers integer */
                alts[na++] = compile_type(c, s, bit, ptr);
            }
            out = na ? cst_alt(c->n, m, alts, na) : cst_never(c->n);
        }
    }
    c->depth--;
    return out;
}

/* any JSON value: a rule (it is recursive) */
static int32_t any_rule(sc *c) {
    if (c->any_rule >= 0) return c->any_rule;
    const int32_t r = cst_rule_reserve(c->n);
    c->any_rule = r;
    cst_nfa *n = c->n;
    cst_mark m = cst_mark_here(n);
    cst_frag alts[7];
    alts[0] = lit(c, "null");
    alts[1] = lit(c, "true");
    alts[2] = lit(c, "false");
    alts[3] = number_frag(c, (bound){0}, (bound){0}, false);
    alts[4] = any_string(c);
    {
        /* [ ws (v (, v)*)? ws ] */
        cst_mark am = cst_mark_here(n);
        cst_frag p[4];
        p[0] = lit(c, "[");
        p[1] = ws(c);
        cst_mark im = cst_mark_here(n);
        cst_frag ip[2];
        ip[0] = cst_call_frag(n, r);
        cst_mark tm = cst_mark_here(n);
        cst_frag tp[2] = {comma(c), cst_call_frag(n, r)};
        cst_frag tail = cst_seq(n, tm, tp, 2);
        ip[1] = cst_repeat(n, tail, 0, -1);
        cst_frag items = cst_seq(n, im, ip, 2);
        items = cst_opt(n, items);
        p[2] = items;
        cst_mark cm = cst_mark_here(n);
        cst_frag cp2[2] = {ws(c), lit(c, "]")};
        p[3] = cst_seq(n, cm, cp2, 2);
        alts[5] = cst_seq(n, am, p, 4);
    }
    {
        cst_mark om = cst_mark_here(n);
        cst_frag p[4];
        p[0] = lit(c, "{");
        p[1] = ws(c);
        cst_mark im = cst_mark_here(n);
        cst_frag kv1[3] = {any_string(c), colon(c), cst_call_frag(n, r)};
        cst_frag first = cst_seq(n, im, kv1, 3);
        cst_mark tm = cst_mark_here(n);
        cst_frag kv2[4] = {comma(c), any_string(c), colon(c), cst_call_frag(n, r)};
        cst_frag tail = cst_seq(n, tm, kv2, 4);
        tail = cst_repeat(n, tail, 0, -1);
        cst_frag both[2] = {first, tail};
        cst_frag items = cst_seq(n, im, both, 2);
        items = cst_opt(n, items);
        p[2] = items;
        cst_mark cm = cst_mark_here(n);
        cst_frag cp2[2] = {ws(c), lit(c, "}")};
        p[3] = cst_seq(n, cm, cp2, 2);
        alts[6] = cst_seq(n, om, p, 4);
    }
    cst_frag body = cst_alt(n, m, alts, 7);
    const int32_t end = cst_state(n);
    cst_eps(n, body.end, end);
    cst_rule_define(n, r, cst_frag_close(n, (cst_mark){body.s_lo, body.e_lo}, body.start, end));
    return r;
}

brisk_status cst_schema_compile(cst_nfa *n, const char *text, size_t len, const cst_schema_opts *o, brisk_error *err) {
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!root) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "JSON Schema: not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    brisk_status st = cst_schema_compile_json(n, root, o, err);
    json_decref(root);
    return st;
}

brisk_status cst_schema_compile_json(cst_nfa *n, json_t *root, const cst_schema_opts *o, brisk_error *err) {
    sc c = {.n = n, .root = root, .err = err, .any_rule = -1};
    if (o) c.o = *o;
    c.keep = json_array();
    json_t *sv = json_is_object(root) ? json_object_get(root, "$schema") : NULL;
    const char *draft = json_is_string(sv) ? json_string_value(sv) : "";
    c.ref_siblings = !(strstr(draft, "draft-03") || strstr(draft, "draft-04") || strstr(draft, "draft-06") || strstr(draft, "draft-07"));
    const int32_t r0 = cst_rule_reserve(n);
    cst_frag f = compile(&c, root, "");
    brisk_status st = BRISK_OK;
    if (!c.failed && n->failed) {
        st = brisk_fail(err, BRISK_ERR_UNSUPPORTED, "JSON Schema: %s", n->err);
    } else if (c.failed) {
        st = err ? err->status : BRISK_ERR_UNSUPPORTED;
        if (st == BRISK_OK) st = BRISK_ERR_UNSUPPORTED;
    } else {
        cst_rule_define(n, r0, f);
    }
    for (int32_t i = 0; i < c.n_refs; i++) free(c.refs[i].ptr);
    free(c.refs);
    json_decref(c.keep);
    return st;
}
