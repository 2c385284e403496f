/* methods: the Python methods templates call on values (str.split,
 * str.strip, dict.get, dict.items, list.pop, ...) with CPython's semantics on
 * code points, Markup's escaping of arguments, and Unicode case mapping from
 * the reference interpreter's tables (unicode_tables.c).
 *
 * ImmutableSandboxedEnvironment blocks methods that mutate lists and dicts
 * (append, update, ...): looking them up yields an "unsafe" undefined that
 * fails when called. list.pop is not blocked by jinja2, so it works here too. */
#include "template/tpl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    /* str */
    M_CAPITALIZE = TPL_ID_METHOD, M_CENTER, M_COUNT, M_ENDSWITH, M_FIND, M_FORMAT, M_INDEX, M_ISALNUM, M_ISALPHA,
    M_ISDIGIT, M_ISLOWER, M_ISSPACE, M_ISUPPER, M_JOIN, M_LJUST, M_LOWER, M_LSTRIP, M_PARTITION, M_REMOVEPREFIX,
    M_REMOVESUFFIX, M_REPLACE, M_RFIND, M_RINDEX, M_RJUST, M_RPARTITION, M_RSPLIT, M_RSTRIP, M_SPLIT,
    M_SPLITLINES, M_STARTSWITH, M_STRIP, M_SWAPCASE, M_TITLE, M_UPPER, M_ZFILL,
    /* list / tuple */
    M_LIST_COPY, M_LIST_COUNT, M_LIST_INDEX, M_LIST_POP,
    /* dict */
    M_DICT_COPY, M_DICT_GET, M_DICT_ITEMS, M_DICT_KEYS, M_DICT_VALUES,
    M_END
};

typedef struct method_name {
    const char *name;
    int id;   /* -1: unsupported, -2: blocked by the sandbox */
} method_name;

static const method_name str_methods[] = {
    {"capitalize", M_CAPITALIZE}, {"casefold", -1}, {"center", M_CENTER}, {"count", M_COUNT}, {"encode", -1},
    {"endswith", M_ENDSWITH}, {"expandtabs", -1}, {"find", M_FIND}, {"format", M_FORMAT}, {"format_map", -1},
    {"index", M_INDEX}, {"isalnum", M_ISALNUM}, {"isalpha", M_ISALPHA}, {"isascii", -1}, {"isdecimal", -1},
    {"isdigit", M_ISDIGIT}, {"isidentifier", -1}, {"islower", M_ISLOWER}, {"isnumeric", -1}, {"isprintable", -1},
    {"isspace", M_ISSPACE}, {"istitle", -1}, {"isupper", M_ISUPPER}, {"join", M_JOIN}, {"ljust", M_LJUST},
    {"lower", M_LOWER}, {"lstrip", M_LSTRIP}, {"maketrans", -1}, {"partition", M_PARTITION},
    {"removeprefix", M_REMOVEPREFIX}, {"removesuffix", M_REMOVESUFFIX}, {"replace", M_REPLACE}, {"rfind", M_RFIND},
    {"rindex", M_RINDEX}, {"rjust", M_RJUST}, {"rpartition", M_RPARTITION}, {"rsplit", M_RSPLIT},
    {"rstrip", M_RSTRIP}, {"split", M_SPLIT}, {"splitlines", M_SPLITLINES}, {"startswith", M_STARTSWITH},
    {"strip", M_STRIP}, {"swapcase", M_SWAPCASE}, {"title", M_TITLE}, {"translate", -1}, {"upper", M_UPPER},
    {"zfill", M_ZFILL},
};
static const method_name markup_methods[] = {{"escape", -1}, {"unescape", -1}, {"striptags", -1}};
static const method_name list_methods[] = {
    {"append", -2}, {"clear", -2}, {"copy", M_LIST_COPY}, {"count", M_LIST_COUNT}, {"extend", -2},
    {"index", M_LIST_INDEX}, {"insert", -2}, {"pop", M_LIST_POP}, {"remove", -2}, {"reverse", -2}, {"sort", -2},
};
static const method_name tuple_methods[] = {{"count", M_LIST_COUNT}, {"index", M_LIST_INDEX}};
static const method_name dict_methods[] = {
    {"clear", -2}, {"copy", M_DICT_COPY}, {"fromkeys", -1}, {"get", M_DICT_GET}, {"items", M_DICT_ITEMS},
    {"keys", M_DICT_KEYS}, {"pop", -2}, {"popitem", -2}, {"setdefault", -2}, {"update", -2}, {"values", M_DICT_VALUES},
};
static const method_name int_methods[] = {
    {"as_integer_ratio", -1}, {"bit_count", -1}, {"bit_length", -1}, {"conjugate", -1}, {"denominator", -1},
    {"from_bytes", -1}, {"imag", -1}, {"numerator", -1}, {"real", -1}, {"to_bytes", -1},
};
static const method_name float_methods[] = {
    {"as_integer_ratio", -1}, {"conjugate", -1}, {"fromhex", -1}, {"hex", -1}, {"imag", -1}, {"is_integer", -1}, {"real", -1},
};
static const method_name range_methods[] = {{"count", -1}, {"index", -1}, {"start", -1}, {"stop", -1}, {"step", -1}};
static const method_name view_methods[] = {{"isdisjoint", -1}, {"mapping", -1}};
static const method_name gen_methods[] = {{"close", -1}, {"send", -1}, {"throw", -1}};

static int lookup(const method_name *tab, size_t n, tpl_str name) {
    for (size_t i = 0; i < n; i++)
        if (tpl_str_eqc(name, tab[i].name)) return tab[i].id;
    return 0;
}
#define LOOKUP(tab) lookup(tab, BRISK_ARRAY_LEN(tab), name)

int tpl_method_find(const tpl_value *self, tpl_str name) {
    int id;
    switch ((tpl_type)self->type) {
    case TPL_STR:
        if ((self->flags & TPL_F_MARKUP) && (id = LOOKUP(markup_methods))) return id;
        return LOOKUP(str_methods);
    case TPL_DICT: return LOOKUP(dict_methods);
    case TPL_INT: case TPL_BOOL: return LOOKUP(int_methods);
    case TPL_FLOAT: return LOOKUP(float_methods);
    case TPL_LIST:
        switch ((tpl_list_kind)self->u.list->kind) {
        case TPL_LK_LIST: return LOOKUP(list_methods);
        case TPL_LK_TUPLE: return LOOKUP(tuple_methods);
        case TPL_LK_RANGE: return LOOKUP(range_methods);
        case TPL_LK_GEN: return LOOKUP(gen_methods);
        default: return LOOKUP(view_methods);
        }
    default: return 0;
    }
}

/* ---- case mapping ----------------------------------------------------------------------------- */

static const tpl_case_special *find_special(uint32_t cp) {
    size_t lo = 0, hi = tpl_case_nspecials;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tpl_case_specials[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < tpl_case_nspecials && tpl_case_specials[lo].cp == cp ? &tpl_case_specials[lo] : NULL;
}

static const tpl_case_run *find_run(uint32_t cp) {
    size_t lo = 0, hi = tpl_case_nruns;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tpl_case_runs[mid].hi < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < tpl_case_nruns && tpl_case_runs[lo].lo <= cp ? &tpl_case_runs[lo] : NULL;
}

static bool is_cased(uint32_t cp) {
    const tpl_case_run *r = find_run(cp);
    return r && r->cased;
}

/* Map one code point (which: 0 upper, 1 lower, 2 title) into out[]; returns the count. */
static int map_cp(uint32_t cp, int which, uint32_t out[3]) {
    if (cp < 0x80) {
        if (which != 1 && cp >= 'a' && cp <= 'z') cp -= 32;
        else if (which == 1 && cp >= 'A' && cp <= 'Z') cp += 32;
        out[0] = cp;
        return 1;
    }
    const tpl_case_special *sp = find_special(cp);
    if (sp) {
        const uint32_t *m = which == 0 ? sp->upper : which == 1 ? sp->lower : sp->title;
        int n = 0;
        while (n < 3 && m[n]) out[n] = m[n], n++;
        return n;
    }
    const tpl_case_run *r = find_run(cp);
    if (!r) {
        out[0] = cp;
        return 1;
    }
    int32_t d = which == 0 ? r->du : which == 1 ? r->dl : r->dt;
    if (r->alt && ((cp - r->lo) & 1)) d -= 1;
    out[0] = (uint32_t)((int32_t)cp + d);
    return 1;
}

brisk_status tpl_str_case(tpl_ctx *c, tpl_str s, tpl_case mode, tpl_str *out) {
    size_t cap;
    if (!brisk_mul_size(s.n, 3, &cap)) return tpl_nomem(c);
    char *d = tpl_alloc(&c->arena, cap + 1);
    if (!d) return tpl_nomem(c);
    size_t k = 0;
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < s.n;) {
        uint32_t cp = tpl_utf8_next(s.p, s.n, &i);
        int which;
        switch (mode) {
        case TPL_CASE_UPPER: which = 0; break;
        case TPL_CASE_LOWER: which = 1; break;
        case TPL_CASE_TITLE: which = prev_cased ? 1 : 2; break;
        default: which = first ? 2 : 1; break;
        }
        if (cp == 0x3A3 && which == 1)   /* final sigma depends on Unicode word context */
            return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "lowercasing a capital sigma (Python's final-sigma rule)");
        uint32_t m[3];
        int n = map_cp(cp, which, m);
        for (int j = 0; j < n; j++) k += tpl_utf8_put(d + k, m[j]);
        prev_cased = is_cased(cp);
        first = false;
    }
    d[k] = 0;
    *out = (tpl_str){d, k};
    return BRISK_OK;
}

/* ---- helpers ------------------------------------------------------------------------------------ */

static brisk_status new_str(tpl_ctx *c, const char *p, size_t n, const tpl_value *self, tpl_value *out) {
    tpl_str s = tpl_str_dup(&c->arena, p, n);
    if (!s.p) return tpl_nomem(c);
    *out = tpl_strv(s);
    out->flags = self->flags & TPL_F_MARKUP;
    return BRISK_OK;
}

static brisk_status slice_str(tpl_ctx *c, tpl_str s, size_t a, size_t b, const tpl_value *self, tpl_value *out) {
    (void)c;
    *out = tpl_strv((tpl_str){s.p + a, b - a});
    out->flags = self->flags & TPL_F_MARKUP;
    return BRISK_OK;
}

static brisk_status want_str(tpl_ctx *c, const tpl_value *v, const char *what, tpl_str *out) {
    if (v->type == TPL_STR) {
        *out = v->u.s;
        return BRISK_OK;
    }
    if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);
    return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s must be str, not %s", what, tpl_type_name(v));
}

static brisk_status opt_int(tpl_ctx *c, const tpl_value *v, int64_t dflt, int64_t *out) {
    if (!v || v->type == TPL_NONE) *out = dflt;
    else if (v->type == TPL_INT) *out = v->u.i;
    else if (v->type == TPL_BOOL) *out = v->u.b;
    else if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);
    else return tpl_fail(c, BRISK_ERR_TEMPLATE, "'%s' object cannot be interpreted as an integer", tpl_type_name(v));
    return BRISK_OK;
}

#define BIND(fname, ...)                                                                          \
    static const char *const params_[] = {__VA_ARGS__};                                           \
    const tpl_value *arg[BRISK_ARRAY_LEN(params_)];                                               \
    if ((st = tpl_bind(c, fname, params_, BRISK_ARRAY_LEN(params_), a, arg))) return st

static size_t cp_index(tpl_str s, size_t byte_off) {
    size_t n = 0;
    for (size_t i = 0; i < byte_off;) {
        tpl_utf8_next(s.p, s.n, &i);
        n++;
    }
    return n;
}

/* set of code points for strip(chars) */
static bool in_chars(tpl_str chars, uint32_t cp) {
    for (size_t i = 0; i < chars.n;)
        if (tpl_utf8_next(chars.p, chars.n, &i) == cp) return true;
    return false;
}

static brisk_status do_strip(tpl_ctx *c, const tpl_value *self, const tpl_args *a, bool left, bool right, tpl_value *out) {
    brisk_status st;
    BIND("strip", "chars");
    tpl_str s = self->u.s, chars = {NULL, 0};
    bool ws = !arg[0] || arg[0]->type == TPL_NONE;
    if (!ws) {
        if (arg[0]->type != TPL_STR) return tpl_fail(c, BRISK_ERR_TEMPLATE, "strip arg must be None or str");
        chars = arg[0]->u.s;
    }
    size_t b = 0, e = s.n;
    if (left) {
        while (b < e) {
            size_t k = b;
            uint32_t cp = tpl_utf8_next(s.p, s.n, &k);
            if (ws ? !tpl_is_space(cp) : !in_chars(chars, cp)) break;
            b = k;
        }
    }
    if (right) {
        while (e > b) {
            size_t k = e - 1;
            while (k > b && ((unsigned char)s.p[k] & 0xC0) == 0x80) k--;
            size_t kk = k;
            uint32_t cp = tpl_utf8_next(s.p, s.n, &kk);
            if (kk != e) cp = (unsigned char)s.p[e - 1], k = e - 1;   /* malformed tail byte */
            if (ws ? !tpl_is_space(cp) : !in_chars(chars, cp)) break;
            e = k;
        }
    }
    return slice_str(c, s, b, e, self, out);
}

static const char *find_bytes(tpl_str h, tpl_str n, size_t from) {
    if (n.n == 0) return h.p + from;
    if (from > h.n || h.n - from < n.n) return NULL;
    return memmem(h.p + from, h.n - from, n.p, n.n);
}

/* The last occurrence of n in h. Candidates are found with memrchr and each
 * costs a memcmp of up to n.n bytes, so the worst case is |h|·|n| byte
 * compares: *cost grows by the work done, in budget units (tpl_charge). */
static const char *rfind_bytes(tpl_str h, tpl_str n, uint64_t *cost) {
    if (n.n > h.n) return NULL;
    if (n.n == 0) return h.p + h.n;
    size_t end = h.n - n.n + 1;   /* candidate starts are [0, end) */
    while (end > 0) {
        const char *p = memrchr(h.p, (unsigned char)n.p[0], end);
        if (!p) {
            *cost += end / 64;
            return NULL;
        }
        size_t i = (size_t)(p - h.p);
        *cost += (end - i) / 64 + 1 + n.n / 64;
        if (memcmp(p, n.p, n.n) == 0) return p;
        end = i;
    }
    return NULL;
}

static brisk_status str_list(tpl_ctx *c, tpl_list **out) {
    *out = tpl_list_new(&c->arena, 0, TPL_LK_LIST);
    return *out ? BRISK_OK : tpl_nomem(c);
}

static brisk_status push_slice(tpl_ctx *c, tpl_list *l, tpl_str s, size_t a, size_t b, const tpl_value *self) {
    tpl_value v = tpl_strv((tpl_str){s.p + a, b - a});
    v.flags = self->flags & TPL_F_MARKUP;
    return tpl_list_push(&c->arena, l, v) ? BRISK_OK : tpl_nomem(c);
}

static brisk_status do_split(tpl_ctx *c, const tpl_value *self, const tpl_args *a, bool reverse, tpl_value *out) {
    brisk_status st;
    BIND(reverse ? "rsplit" : "split", "sep", "maxsplit");
    tpl_str s = self->u.s;
    int64_t maxsplit;
    if ((st = opt_int(c, arg[1], -1, &maxsplit))) return st;
    tpl_list *l;
    if ((st = str_list(c, &l))) return st;
    if (!arg[0] || arg[0]->type == TPL_NONE) {
        /* runs of whitespace; leading/trailing ignored */
        size_t n = 0;
        size_t *bounds = NULL;   /* pairs, collected left to right */
        size_t cap = 0, cnt = 0;
        size_t i = 0;
        while (i < s.n) {
            size_t k = i;
            uint32_t cp = tpl_utf8_next(s.p, s.n, &k);
            if (tpl_is_space(cp)) {
                i = k;
                continue;
            }
            size_t start = i;
            while (i < s.n) {
                k = i;
                cp = tpl_utf8_next(s.p, s.n, &k);
                if (tpl_is_space(cp)) break;
                i = k;
            }
            if (cnt + 2 > cap) {
                cap = cap ? cap * 2 : 16;
                size_t *nb = realloc(bounds, cap * sizeof *nb);
                if (!nb) { free(bounds); return tpl_nomem(c); }
                bounds = nb;
            }
            bounds[cnt++] = start;
            bounds[cnt++] = i;
            n++;
        }
        size_t words = cnt / 2;
        if (maxsplit < 0 || (size_t)maxsplit >= words) {
            for (size_t w = 0; w < words && !st; w++) st = push_slice(c, l, s, bounds[2 * w], bounds[2 * w + 1], self);
        } else if (!reverse) {
            for (size_t w = 0; w < (size_t)maxsplit && !st; w++) st = push_slice(c, l, s, bounds[2 * w], bounds[2 * w + 1], self);
            if (!st && words) st = push_slice(c, l, s, bounds[2 * maxsplit], s.n, self);   /* keeps trailing space */
        } else {
            /* rsplit: the remainder keeps its leading whitespace */
            size_t first_kept = words - (size_t)maxsplit;
            if (first_kept > 0) st = push_slice(c, l, s, 0, bounds[2 * (first_kept - 1) + 1], self);
            for (size_t w = first_kept; w < words && !st; w++) st = push_slice(c, l, s, bounds[2 * w], bounds[2 * w + 1], self);
        }
        free(bounds);
        (void)n;
        if (st) return st;
        *out = tpl_listv(l);
        return BRISK_OK;
    }
    tpl_str sep = {0};
    if ((st = want_str(c, arg[0], "sep", &sep))) return st;
    if (sep.n == 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "empty separator");
    if (!reverse) {
        size_t start = 0;
        int64_t splits = 0;
        const char *hit;
        while ((maxsplit < 0 || splits < maxsplit) && (hit = find_bytes(s, sep, start))) {
            size_t at = (size_t)(hit - s.p);
            if ((st = push_slice(c, l, s, start, at, self))) return st;
            start = at + sep.n;
            splits++;
        }
        if ((st = push_slice(c, l, s, start, s.n, self))) return st;
    } else {
        /* collect from the right, then reverse */
        size_t end = s.n;
        int64_t splits = 0;
        uint64_t cost = 0;
        while (maxsplit < 0 || splits < maxsplit) {
            tpl_str head = {s.p, end};
            const char *hit = rfind_bytes(head, sep, &cost);
            if ((st = tpl_charge(c, cost))) return st;
            cost = 0;
            if (!hit) break;
            size_t at = (size_t)(hit - s.p);
            if ((st = push_slice(c, l, s, at + sep.n, end, self))) return st;
            end = at;
            splits++;
        }
        if ((st = push_slice(c, l, s, 0, end, self))) return st;
        for (size_t i = 0; i < l->n / 2; i++) {
            tpl_value t = l->v[i];
            l->v[i] = l->v[l->n - 1 - i];
            l->v[l->n - 1 - i] = t;
        }
    }
    *out = tpl_listv(l);
    return BRISK_OK;
}

static brisk_status do_splitlines(tpl_ctx *c, const tpl_value *self, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("splitlines", "keepends");
    bool keep = arg[0] && tpl_truthy(arg[0]);
    tpl_str s = self->u.s;
    tpl_list *l;
    if ((st = str_list(c, &l))) return st;
    size_t start = 0, i = 0;
    while (i < s.n) {
        size_t k = i;
        uint32_t cp = tpl_utf8_next(s.p, s.n, &k);
        bool br = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D || cp == 0x1E ||
                  cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (!br) {
            i = k;
            continue;
        }
        if (cp == '\r' && k < s.n && s.p[k] == '\n') k++;
        if ((st = push_slice(c, l, s, start, keep ? k : i, self))) return st;
        start = i = k;
    }
    if (start < s.n && (st = push_slice(c, l, s, start, s.n, self))) return st;
    *out = tpl_listv(l);
    return BRISK_OK;
}

static brisk_status do_affix(tpl_ctx *c, const tpl_value *self, const tpl_args *a, bool ends, tpl_value *out) {
    brisk_status st;
    BIND(ends ? "endswith" : "startswith", "prefix", "start", "end");
    if (!arg[0]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s() takes at least 1 argument (0 given)", ends ? "endswith" : "startswith");
    if ((arg[1] && arg[1]->type != TPL_NONE) || (arg[2] && arg[2]->type != TPL_NONE))
        return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "start/end arguments of str.%s", ends ? "endswith" : "startswith");
    tpl_str s = self->u.s;
    const tpl_value *cands = arg[0];
    size_t nc = 1;
    if (arg[0]->type == TPL_LIST && arg[0]->u.list->kind == TPL_LK_TUPLE) {
        cands = arg[0]->u.list->v;
        nc = arg[0]->u.list->n;
    } else if (arg[0]->type != TPL_STR) {
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s first arg must be str or a tuple of str, not %s",
                        ends ? "endswith" : "startswith", tpl_type_name(arg[0]));
    }
    bool r = false;
    for (size_t i = 0; i < nc && !r; i++) {
        if (cands[i].type != TPL_STR)
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "tuple for %s must only contain str, not %s", ends ? "endswith" : "startswith",
                            tpl_type_name(&cands[i]));
        tpl_str x = cands[i].u.s;
        r = x.n <= s.n && memcmp(ends ? s.p + s.n - x.n : s.p, x.p, x.n) == 0;
    }
    *out = tpl_bool(r);
    return BRISK_OK;
}

static brisk_status do_replace(tpl_ctx *c, const tpl_value *self, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("replace", "old", "new", "count");
    if (!arg[0] || !arg[1]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "replace expected at least 2 arguments");
    tpl_str s = self->u.s, old = {0}, nw = {0};
    if ((st = want_str(c, arg[0], "replace() argument 1", &old)) || (st = want_str(c, arg[1], "replace() argument 2", &nw))) return st;
    int64_t count;
    if ((st = opt_int(c, arg[2], -1, &count))) return st;
    tpl_buf b = {.limit = c->max_output};
    int64_t done = 0;
    if (old.n == 0) {
        /* insert `new` before every code point and at the end */
        size_t i = 0;
        while (i <= s.n) {
            if (count < 0 || done < count) {
                tpl_buf_put(&b, nw.p, nw.n);
                done++;
            }
            if (i == s.n) break;
            size_t k = i;
            tpl_utf8_next(s.p, s.n, &k);
            tpl_buf_put(&b, s.p + i, k - i);
            i = k;
        }
    } else {
        size_t start = 0;
        const char *hit;
        while ((count < 0 || done < count) && (hit = find_bytes(s, old, start))) {
            size_t at = (size_t)(hit - s.p);
            tpl_buf_put(&b, s.p + start, at - start);
            tpl_buf_put(&b, nw.p, nw.n);
            start = at + old.n;
            done++;
        }
        tpl_buf_put(&b, s.p + start, s.n - start);
    }
    if (b.over) {
        tpl_buf_free(&b);
        return tpl_fail(c, BRISK_ERR_CAPACITY, "string longer than the output limit");
    }
    st = new_str(c, b.p ? b.p : "", b.n, self, out);
    tpl_buf_free(&b);
    return st;
}

static brisk_status do_find(tpl_ctx *c, const tpl_value *self, const tpl_args *a, int id, tpl_value *out) {
    brisk_status st;
    BIND("find", "sub", "start", "end");
    if (!arg[0]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "find() takes at least 1 argument (0 given)");
    if ((arg[1] && arg[1]->type != TPL_NONE) || (arg[2] && arg[2]->type != TPL_NONE))
        return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "start/end arguments of str.find/index/count");
    tpl_str s = self->u.s, sub;
    if ((st = want_str(c, arg[0], "argument", &sub))) return st;
    if (id == M_COUNT) {
        int64_t n = 0;
        if (sub.n == 0) n = (int64_t)tpl_utf8_len(s) + 1;
        else
            for (const char *h = find_bytes(s, sub, 0); h; h = find_bytes(s, sub, (size_t)(h - s.p) + sub.n)) n++;
        *out = tpl_int(n);
        return BRISK_OK;
    }
    bool rev = id == M_RFIND || id == M_RINDEX;
    uint64_t cost = 0;
    const char *hit = rev ? rfind_bytes(s, sub, &cost) : find_bytes(s, sub, 0);
    if ((st = tpl_charge(c, cost))) return st;
    if (!hit) {
        if (id == M_INDEX || id == M_RINDEX) return tpl_fail(c, BRISK_ERR_TEMPLATE, "substring not found");
        *out = tpl_int(-1);
        return BRISK_OK;
    }
    *out = tpl_int((int64_t)cp_index(s, (size_t)(hit - s.p)));
    return BRISK_OK;
}

static brisk_status do_pad(tpl_ctx *c, const tpl_value *self, const tpl_args *a, int id, tpl_value *out) {
    brisk_status st;
    BIND("pad", "width", "fillchar");
    if (!arg[0]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "expected at least 1 argument, got 0");
    int64_t width;
    if ((st = opt_int(c, arg[0], 0, &width))) return st;
    tpl_str fill = {" ", 1};
    if (arg[1]) {
        if ((st = want_str(c, arg[1], "fill character", &fill))) return st;
        if (tpl_utf8_len(fill) != 1) return tpl_fail(c, BRISK_ERR_TEMPLATE, "The fill character must be exactly one character long");
    }
    tpl_str s = self->u.s;
    int64_t len = (int64_t)tpl_utf8_len(s);
    if (width > (int64_t)c->max_output) return tpl_fail(c, BRISK_ERR_CAPACITY, "padding wider than the output limit");
    int64_t marg = width - len;
    if (marg <= 0) return slice_str(c, s, 0, s.n, self, out);
    int64_t left = 0;
    if (id == M_CENTER) left = marg / 2 + (marg & width & 1);
    else if (id == M_RJUST || id == M_ZFILL) left = marg;
    int64_t right = marg - left;
    tpl_buf b = {.limit = c->max_output};
    size_t body = 0;
    if (id == M_ZFILL && s.n && (s.p[0] == '+' || s.p[0] == '-')) {
        tpl_buf_putc(&b, s.p[0]);
        body = 1;
    }
    for (int64_t i = 0; i < left; i++) tpl_buf_put(&b, id == M_ZFILL ? "0" : fill.p, id == M_ZFILL ? 1 : fill.n);
    tpl_buf_put(&b, s.p + body, s.n - body);
    for (int64_t i = 0; i < right; i++) tpl_buf_put(&b, fill.p, fill.n);
    st = b.over ? tpl_nomem(c) : new_str(c, b.p ? b.p : "", b.n, self, out);
    tpl_buf_free(&b);
    return st;
}

static brisk_status do_partition(tpl_ctx *c, const tpl_value *self, const tpl_args *a, bool rev, tpl_value *out) {
    brisk_status st;
    BIND("partition", "sep");
    if (!arg[0]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "partition() takes exactly one argument (0 given)");
    tpl_str s = self->u.s, sep = {0};
    if ((st = want_str(c, arg[0], "partition() argument", &sep))) return st;
    if (sep.n == 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "empty separator");
    uint64_t cost = 0;
    const char *hit = rev ? rfind_bytes(s, sep, &cost) : find_bytes(s, sep, 0);
    if ((st = tpl_charge(c, cost))) return st;
    tpl_list *t = tpl_list_new(&c->arena, 3, TPL_LK_TUPLE);
    if (!t) return tpl_nomem(c);
    size_t at, e;
    if (hit) at = (size_t)(hit - s.p), e = at + sep.n;
    else if (rev) at = e = 0;
    else at = e = s.n;
    tpl_value parts[3];
    slice_str(c, s, 0, at, self, &parts[0]);
    slice_str(c, s, at, e, self, &parts[1]);
    slice_str(c, s, e, s.n, self, &parts[2]);
    if (!hit) parts[1].u.s = (tpl_str){"", 0};
    memcpy(t->v, parts, sizeof parts);
    t->n = 3;
    *out = tpl_listv(t);
    return BRISK_OK;
}

/* str.format with {}, {0}, {name} and !r/!s conversions; format specs are unsupported */
static brisk_status do_format(tpl_ctx *c, const tpl_value *self, const tpl_args *a, tpl_value *out) {
    tpl_str f = self->u.s;
    tpl_buf b = {.limit = c->max_output};
    brisk_status st = BRISK_OK;
    int auto_idx = 0;
    bool used_auto = false, used_manual = false;
    for (size_t i = 0; i < f.n && !st; i++) {
        char ch = f.p[i];
        if (ch == '}') {
            if (i + 1 < f.n && f.p[i + 1] == '}') {
                tpl_buf_putc(&b, '}');
                i++;
                continue;
            }
            st = tpl_fail(c, BRISK_ERR_TEMPLATE, "Single '}' encountered in format string");
            break;
        }
        if (ch != '{') {
            tpl_buf_putc(&b, ch);
            continue;
        }
        if (i + 1 < f.n && f.p[i + 1] == '{') {
            tpl_buf_putc(&b, '{');
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < f.n && f.p[j] != '}' && f.p[j] != '{') j++;
        if (j >= f.n || f.p[j] != '}') {
            st = tpl_fail(c, BRISK_ERR_TEMPLATE, j >= f.n ? "Single '{' encountered in format string" : "unexpected '{' in field name");
            break;
        }
        tpl_str field = {f.p + i + 1, j - i - 1};
        char conv = 0;
        const char *bang = memchr(field.p, '!', field.n), *colon = memchr(field.p, ':', field.n);
        if (colon && (!bang || colon < bang)) {
            st = tpl_fail(c, BRISK_ERR_UNSUPPORTED, "format specs in str.format");
            break;
        }
        if (bang) {
            size_t rest = field.n - (size_t)(bang - field.p);
            if (rest != 2 || (bang[1] != 'r' && bang[1] != 's')) {
                st = tpl_fail(c, BRISK_ERR_UNSUPPORTED, "str.format conversion '%.*s'", (int)rest, bang);
                break;
            }
            conv = bang[1];
            field.n = (size_t)(bang - field.p);
        }
        const tpl_value *v = NULL;
        if (field.n == 0) {
            if (used_manual) { st = tpl_fail(c, BRISK_ERR_TEMPLATE, "cannot switch from manual field specification to automatic field numbering"); break; }
            used_auto = true;
            if ((size_t)auto_idx >= a->npos) { st = tpl_fail(c, BRISK_ERR_TEMPLATE, "Replacement index %d out of range for positional args tuple", auto_idx); break; }
            v = &a->pos[auto_idx++];
        } else if (field.p[0] >= '0' && field.p[0] <= '9') {
            size_t idx = 0;
            for (size_t k = 0; k < field.n; k++) {
                if (field.p[k] < '0' || field.p[k] > '9' || idx > 100000) { st = tpl_fail(c, BRISK_ERR_UNSUPPORTED, "str.format field '%.*s'", (int)field.n, field.p); break; }
                idx = idx * 10 + (size_t)(field.p[k] - '0');
            }
            if (st) break;
            if (used_auto) { st = tpl_fail(c, BRISK_ERR_TEMPLATE, "cannot switch from automatic field numbering to manual field specification"); break; }
            used_manual = true;
            if (idx >= a->npos) { st = tpl_fail(c, BRISK_ERR_TEMPLATE, "Replacement index %zu out of range for positional args tuple", idx); break; }
            v = &a->pos[idx];
        } else {
            for (size_t k = 0; k < field.n; k++)
                if (field.p[k] == '.' || field.p[k] == '[') { st = tpl_fail(c, BRISK_ERR_UNSUPPORTED, "str.format field '%.*s'", (int)field.n, field.p); break; }
            if (st) break;
            for (size_t k = 0; k < a->nkw && !v; k++)
                if (tpl_str_eq(a->kwnames[k], field)) v = &a->kw[k];
            if (!v) { st = tpl_fail(c, BRISK_ERR_TEMPLATE, "'%.*s'", (int)field.n, field.p); break; }
        }
        char msg[200];
        if (conv == 'r') st = tpl_repr(&b, v, msg, sizeof msg);
        else st = tpl_to_str(&b, v, msg, sizeof msg);
        if (st) st = tpl_fail(c, st, "%s", msg);
        i = j;
    }
    if (!st && b.over) st = tpl_nomem(c);
    if (!st) st = new_str(c, b.p ? b.p : "", b.n, self, out);
    tpl_buf_free(&b);
    return st;
}

static brisk_status do_join(tpl_ctx *c, const tpl_value *self, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("join", "iterable");
    if (!arg[0]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "join() takes exactly one argument (0 given)");
    const tpl_value *items = NULL;
    size_t n = 0;
    if (arg[0]->type == TPL_UNDEF) return tpl_undef_fail(c, arg[0]);
    if ((st = tpl_iterate(c, arg[0], &items, &n))) return st;
    tpl_buf b = {.limit = c->max_output};
    for (size_t i = 0; i < n; i++) {
        if (items[i].type != TPL_STR) {
            tpl_buf_free(&b);
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "sequence item %zu: expected str instance, %s found", i, tpl_type_name(&items[i]));
        }
        if (i) tpl_buf_put(&b, self->u.s.p, self->u.s.n);
        tpl_buf_put(&b, items[i].u.s.p, items[i].u.s.n);
    }
    st = b.over ? tpl_nomem(c) : new_str(c, b.p ? b.p : "", b.n, self, out);
    tpl_buf_free(&b);
    return st;
}

static brisk_status do_is(tpl_ctx *c, const tpl_value *self, int id, tpl_value *out) {
    tpl_str s = self->u.s;
    if (id == M_ISLOWER || id == M_ISUPPER) {
        tpl_str up, low;
        brisk_status st;
        if ((st = tpl_str_case(c, s, TPL_CASE_UPPER, &up)) || (st = tpl_str_case(c, s, TPL_CASE_LOWER, &low))) return st;
        *out = tpl_bool(id == M_ISLOWER ? tpl_str_eq(low, s) && !tpl_str_eq(up, s) : tpl_str_eq(up, s) && !tpl_str_eq(low, s));
        return BRISK_OK;
    }
    bool r = s.n > 0;
    for (size_t i = 0; i < s.n && r;) {
        uint32_t cp = tpl_utf8_next(s.p, s.n, &i);
        if (id == M_ISSPACE) {
            r = tpl_is_space(cp);
            continue;
        }
        if (cp >= 0x80) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "str.isalpha/isdigit/isalnum on non-ASCII text");
        bool alpha = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'), digit = cp >= '0' && cp <= '9';
        r = id == M_ISALPHA ? alpha : id == M_ISDIGIT ? digit : alpha || digit;
    }
    *out = tpl_bool(r);
    return BRISK_OK;
}

/* The bytes a str method reads besides self: its string arguments (strip's
 * chars are scanned once per code point of self). */
static uint64_t str_args_cost(const tpl_value *self, int id, const tpl_args *a) {
    uint64_t n = 0;
    for (size_t i = 0; i < a->npos + a->nkw; i++) {
        const tpl_value *v = i < a->npos ? &a->pos[i] : &a->kw[i - a->npos];
        if (v->type == TPL_STR) n += v->u.s.n;
    }
    if ((id == M_STRIP || id == M_LSTRIP || id == M_RSTRIP) && n) n *= self->u.s.n;
    return n;
}

static brisk_status call_str(tpl_ctx *c, int id, const tpl_value *self, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    tpl_str s = self->u.s, r;
    /* every method walks self once, most code point by code point (rfind-style
     * searches are charged per candidate on top; see rfind_bytes) */
    uint64_t cost = 1 + (s.n + str_args_cost(self, id, a)) / 8;
    if ((st = tpl_charge(c, cost))) return st;
    switch (id) {
    case M_STRIP: return do_strip(c, self, a, true, true, out);
    case M_LSTRIP: return do_strip(c, self, a, true, false, out);
    case M_RSTRIP: return do_strip(c, self, a, false, true, out);
    case M_SPLIT: return do_split(c, self, a, false, out);
    case M_RSPLIT: return do_split(c, self, a, true, out);
    case M_SPLITLINES: return do_splitlines(c, self, a, out);
    case M_STARTSWITH: return do_affix(c, self, a, false, out);
    case M_ENDSWITH: return do_affix(c, self, a, true, out);
    case M_REPLACE: return do_replace(c, self, a, out);
    case M_FIND: case M_RFIND: case M_INDEX: case M_RINDEX: case M_COUNT: return do_find(c, self, a, id, out);
    case M_CENTER: case M_LJUST: case M_RJUST: return do_pad(c, self, a, id, out);
    case M_ZFILL: {
        BIND("zfill", "width");
        if (!arg[0]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "zfill() takes exactly one argument (0 given)");
        tpl_args pa = {.pos = arg[0], .npos = 1};
        return do_pad(c, self, &pa, M_ZFILL, out);
    }
    case M_PARTITION: return do_partition(c, self, a, false, out);
    case M_RPARTITION: return do_partition(c, self, a, true, out);
    case M_FORMAT: return do_format(c, self, a, out);
    case M_JOIN: return do_join(c, self, a, out);
    case M_REMOVEPREFIX: case M_REMOVESUFFIX: {
        BIND("removeprefix", "prefix");
        tpl_str x = {0};
        if (!arg[0]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "removeprefix() takes exactly one argument (0 given)");
        if ((st = want_str(c, arg[0], "argument", &x))) return st;
        bool suf = id == M_REMOVESUFFIX;
        if (x.n && x.n <= s.n && !memcmp(suf ? s.p + s.n - x.n : s.p, x.p, x.n))
            return slice_str(c, s, suf ? 0 : x.n, suf ? s.n - x.n : s.n, self, out);
        return slice_str(c, s, 0, s.n, self, out);
    }
    default: break;
    }
    if (a->npos || a->nkw) return tpl_fail(c, BRISK_ERR_TEMPLATE, "str method takes no arguments");
    switch (id) {
    case M_UPPER: st = tpl_str_case(c, s, TPL_CASE_UPPER, &r); break;
    case M_LOWER: st = tpl_str_case(c, s, TPL_CASE_LOWER, &r); break;
    case M_TITLE: st = tpl_str_case(c, s, TPL_CASE_TITLE, &r); break;
    case M_CAPITALIZE: st = tpl_str_case(c, s, TPL_CASE_CAPITALIZE, &r); break;
    case M_SWAPCASE: return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "str.swapcase");
    case M_ISALNUM: case M_ISALPHA: case M_ISDIGIT: case M_ISSPACE: case M_ISLOWER: case M_ISUPPER:
        return do_is(c, self, id, out);
    default: return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "str method %d", id);
    }
    if (st) return st;
    *out = tpl_strv(r);
    out->flags = self->flags & TPL_F_MARKUP;
    return BRISK_OK;
}

/* Markup methods escape their string arguments (markupsafe's _simple_escaping_wrapper). */
static brisk_status escape_args(tpl_ctx *c, const tpl_args *a, tpl_args *out) {
    *out = *a;
    size_t n = a->npos + a->nkw;
    if (!n) return BRISK_OK;
    tpl_value *vals = tpl_alloc_array(&c->arena, n, sizeof *vals);
    if (!vals) return tpl_nomem(c);
    for (size_t i = 0; i < n; i++) {
        const tpl_value *v = i < a->npos ? &a->pos[i] : &a->kw[i - a->npos];
        vals[i] = *v;
        if (v->type != TPL_STR || (v->flags & TPL_F_MARKUP)) continue;
        tpl_str s = v->u.s;
        tpl_buf b = {0};
        for (size_t k = 0; k < s.n; k++) {
            const char *r = s.p[k] == '&' ? "&amp;" : s.p[k] == '<' ? "&lt;" : s.p[k] == '>' ? "&gt;"
                            : s.p[k] == '"' ? "&#34;" : s.p[k] == '\'' ? "&#39;" : NULL;
            if (r) tpl_buf_puts(&b, r);
            else tpl_buf_putc(&b, s.p[k]);
        }
        vals[i].u.s = tpl_str_dup(&c->arena, b.p ? b.p : "", b.n);
        vals[i].flags = TPL_F_MARKUP;
        bool bad = b.over || !vals[i].u.s.p;
        tpl_buf_free(&b);
        if (bad) return tpl_nomem(c);
    }
    out->pos = vals;
    out->kw = vals + a->npos;
    return BRISK_OK;
}

/* Markup keeps its type through these methods (markupsafe wraps them); the
 * string arguments of the *_ESC ones are escaped first. */
static bool markup_keeps(int id) {
    switch (id) {
    case M_CAPITALIZE: case M_TITLE: case M_LOWER: case M_UPPER: case M_REPLACE: case M_LJUST: case M_RJUST:
    case M_LSTRIP: case M_RSTRIP: case M_CENTER: case M_STRIP: case M_ZFILL: case M_JOIN: case M_SPLIT:
    case M_RSPLIT: case M_SPLITLINES: case M_PARTITION: case M_RPARTITION: case M_FORMAT:
        return true;
    default: return false;
    }
}

static bool markup_escapes_args(int id) {
    switch (id) {
    case M_REPLACE: case M_LJUST: case M_RJUST: case M_LSTRIP: case M_RSTRIP: case M_CENTER: case M_STRIP:
    case M_PARTITION: case M_RPARTITION: case M_FORMAT:
        return true;
    default: return false;
    }
}

brisk_status tpl_call_method(tpl_ctx *c, int id, const tpl_value *self, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    if (id < M_LIST_COPY) {
        if (!self || self->type != TPL_STR) return tpl_fail(c, BRISK_ERR_TEMPLATE, "internal: str method on %s", self ? tpl_type_name(self) : "nothing");
        if (!(self->flags & TPL_F_MARKUP)) return call_str(c, id, self, a, out);
        tpl_args ea = *a;
        if (id == M_FORMAT) {
            for (size_t i = 0; i < a->npos + a->nkw; i++) {
                const tpl_value *v = i < a->npos ? &a->pos[i] : &a->kw[i - a->npos];
                if (v->type != TPL_STR && !tpl_is_num(v) && v->type != TPL_NONE)
                    return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "Markup.format with a %s argument", tpl_type_name(v));
            }
        }
        if (markup_escapes_args(id) && (st = escape_args(c, a, &ea))) return st;
        if (id == M_JOIN && ea.npos == 1 && ea.pos[0].type != TPL_UNDEF) {
            /* Markup.join escapes each item */
            const tpl_value *items;
            size_t n;
            if ((st = tpl_iterate(c, &ea.pos[0], &items, &n))) return st;
            tpl_args one = {.pos = items, .npos = n};
            tpl_args esc;
            if ((st = escape_args(c, &one, &esc))) return st;
            tpl_list *l = tpl_list_new(&c->arena, n, TPL_LK_LIST);
            if (!l) return tpl_nomem(c);
            if (n) memcpy(l->v, esc.pos, n * sizeof *l->v);
            l->n = n;
            tpl_value lv = tpl_listv(l);
            tpl_args ja = {.pos = &lv, .npos = 1};
            st = call_str(c, id, self, &ja, out);
        } else {
            st = call_str(c, id, self, &ea, out);
        }
        if (!st && !markup_keeps(id) && out->type == TPL_STR) out->flags &= (uint8_t)~TPL_F_MARKUP;
        return st;
    }
    if (id <= M_LIST_POP) {
        if (!self || self->type != TPL_LIST) return tpl_fail(c, BRISK_ERR_TEMPLATE, "internal: list method");
        tpl_list *l = self->u.list;
        switch (id) {
        case M_LIST_COPY: {
            if (a->npos || a->nkw) return tpl_fail(c, BRISK_ERR_TEMPLATE, "copy() takes no arguments");
            if ((st = tpl_charge(c, l->n))) return st;
            tpl_list *r = tpl_list_new(&c->arena, l->n, TPL_LK_LIST);
            if (!r) return tpl_nomem(c);
            if (l->n) memcpy(r->v, l->v, l->n * sizeof *l->v);
            r->n = l->n;
            *out = tpl_listv(r);
            return BRISK_OK;
        }
        case M_LIST_COUNT: case M_LIST_INDEX: {
            if (a->npos != 1 || a->nkw) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "list.%s with other than one argument", id == M_LIST_COUNT ? "count" : "index");
            int64_t n = 0;
            for (size_t i = 0; i < l->n; i++) {
                bool eq;
                if ((st = tpl_charge(c, 1)) || (st = tpl_equal(c, &l->v[i], &a->pos[0], &eq))) return st;
                if (eq) {
                    if (id == M_LIST_INDEX) {
                        *out = tpl_int((int64_t)i);
                        return BRISK_OK;
                    }
                    n++;
                }
            }
            if (id == M_LIST_INDEX) {
                tpl_buf b = {.limit = 200};
                char msg[64];
                tpl_repr(&b, &a->pos[0], msg, sizeof msg);
                st = tpl_fail(c, BRISK_ERR_TEMPLATE, "%s is not in %s", b.p ? b.p : "?", l->kind == TPL_LK_TUPLE ? "tuple" : "list");
                tpl_buf_free(&b);
                return st;
            }
            *out = tpl_int(n);
            return BRISK_OK;
        }
        case M_LIST_POP: {
            BIND("pop", "index");
            int64_t i;
            if ((st = opt_int(c, arg[0], -1, &i))) return st;
            if (l->n == 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "pop from empty list");
            if (i < 0) i += (int64_t)l->n;
            if (i < 0 || (size_t)i >= l->n) return tpl_fail(c, BRISK_ERR_TEMPLATE, "pop index out of range");
            if ((st = tpl_charge(c, l->n - (size_t)i))) return st;   /* the move */
            *out = l->v[i];
            memmove(&l->v[i], &l->v[i + 1], (l->n - (size_t)i - 1) * sizeof *l->v);
            l->n--;
            return BRISK_OK;
        }
        default: break;
        }
    }
    if (!self || self->type != TPL_DICT) return tpl_fail(c, BRISK_ERR_TEMPLATE, "internal: dict method");
    const tpl_dict *d = self->u.dict;
    if (id == M_DICT_GET) {
        if (a->nkw) return tpl_fail(c, BRISK_ERR_TEMPLATE, "get() takes no keyword arguments");
        if (a->npos < 1 || a->npos > 2) return tpl_fail(c, BRISK_ERR_TEMPLATE, "get expected at most 2 arguments, got %zu", a->npos);
        const tpl_value *v;
        if ((st = tpl_dict_lookup(c, d, &a->pos[0], &v))) return st;
        *out = v ? *v : a->npos == 2 ? a->pos[1] : tpl_none();
        return BRISK_OK;
    }
    if (a->npos || a->nkw) return tpl_fail(c, BRISK_ERR_TEMPLATE, "dict method takes no arguments");
    if ((st = tpl_charge(c, d->n))) return st;   /* a copy or a view of every entry */
    if (id == M_DICT_COPY) {
        tpl_dict *r = tpl_dict_copy(&c->arena, d);
        if (!r) return tpl_nomem(c);
        *out = tpl_dictv(r);
        return BRISK_OK;
    }
    tpl_list_kind kind = id == M_DICT_KEYS ? TPL_LK_KEYS : id == M_DICT_VALUES ? TPL_LK_VALUES : TPL_LK_ITEMS;
    tpl_list *l = tpl_list_new(&c->arena, d->n, kind);
    if (!l) return tpl_nomem(c);
    for (size_t i = 0; i < d->n; i++) {
        if (kind == TPL_LK_KEYS) l->v[i] = d->k[i];
        else if (kind == TPL_LK_VALUES) l->v[i] = d->v[i];
        else {
            tpl_list *t = tpl_list_new(&c->arena, 2, TPL_LK_TUPLE);
            if (!t) return tpl_nomem(c);
            t->v[0] = d->k[i];
            t->v[1] = d->v[i];
            t->n = 2;
            l->v[i] = tpl_listv(t);
        }
    }
    l->n = d->n;
    *out = tpl_listv(l);
    return BRISK_OK;
}

/* ---- printf-style formatting ---------------------------------------------------------- */

brisk_status tpl_str_mod(tpl_ctx *c, const tpl_value *fmtv, const tpl_value *args, tpl_value *out) {
    if (fmtv->flags & TPL_F_MARKUP) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "%% formatting of a Markup string");
    /* a mapping-like right side (dict, Undefined) is one value and may go unused */
    bool mapping = args->type == TPL_DICT || args->type == TPL_UNDEF ||
                   (args->type == TPL_LIST && (args->u.list->kind == TPL_LK_LIST || args->u.list->kind == TPL_LK_RANGE));
    const tpl_value *vals = args;
    size_t nvals = 1, used = 0;
    if (args->type == TPL_LIST && args->u.list->kind == TPL_LK_TUPLE) {
        vals = args->u.list->v;
        nvals = args->u.list->n;
    }
    tpl_str f = fmtv->u.s;
    tpl_buf b = {.limit = c->max_output};
    brisk_status st = BRISK_OK;
    char msg[200];
    for (size_t i = 0; i < f.n && !st; i++) {
        if (f.p[i] != '%') {
            tpl_buf_putc(&b, f.p[i]);
            continue;
        }
        size_t j = i + 1;
        char flags[8];
        int nf = 0;
        while (j < f.n && strchr("-+ 0#", f.p[j]) && nf < 6) flags[nf++] = f.p[j++];
        flags[nf] = 0;
        int width = -1, prec = -1;
        if (j < f.n && f.p[j] == '(') { st = tpl_fail(c, BRISK_ERR_UNSUPPORTED, "%% formatting with a mapping key"); break; }
        if (j < f.n && f.p[j] == '*') { st = tpl_fail(c, BRISK_ERR_UNSUPPORTED, "%% formatting with * width"); break; }
        while (j < f.n && f.p[j] >= '0' && f.p[j] <= '9' && width < 10000) width = (width < 0 ? 0 : width * 10) + (f.p[j++] - '0');
        if (j < f.n && f.p[j] == '.') {
            j++;
            prec = 0;
            while (j < f.n && f.p[j] >= '0' && f.p[j] <= '9' && prec < 1000) prec = prec * 10 + (f.p[j++] - '0');
        }
        while (j < f.n && (f.p[j] == 'h' || f.p[j] == 'l' || f.p[j] == 'L')) j++;
        if (j >= f.n) { st = tpl_fail(c, BRISK_ERR_TEMPLATE, "incomplete format"); break; }
        char conv = f.p[j];
        i = j;
        if (conv == '%') {
            tpl_buf_putc(&b, '%');
            continue;
        }
        if (used >= nvals) { st = tpl_fail(c, BRISK_ERR_TEMPLATE, "not enough arguments for format string"); break; }
        const tpl_value *v = &vals[used++];
        char spec[32], tmp[512];
        if (conv == 's' || conv == 'r' || conv == 'a') {
            if (conv == 'a') { st = tpl_fail(c, BRISK_ERR_UNSUPPORTED, "%%a formatting"); break; }
            tpl_buf sb = {.limit = c->max_output};
            st = conv == 's' ? tpl_to_str(&sb, v, msg, sizeof msg) : tpl_repr(&sb, v, msg, sizeof msg);
            if (st) { tpl_buf_free(&sb); st = tpl_fail(c, st, "%s", msg); break; }
            tpl_str s = {sb.p ? sb.p : "", sb.n};
            if (prec >= 0) s.n = tpl_utf8_offset(s, (size_t)prec);
            size_t len = tpl_utf8_len(s);
            bool left = strchr(flags, '-') != NULL;
            if (!left) for (int k = (int)len; k < width; k++) tpl_buf_putc(&b, ' ');
            tpl_buf_put(&b, s.p, s.n);
            if (left) for (int k = (int)len; k < width; k++) tpl_buf_putc(&b, ' ');
            tpl_buf_free(&sb);
            continue;
        }
        if (v->type == TPL_UNDEF) { st = tpl_undef_fail(c, v); break; }
        if (!tpl_is_num(v)) {
            st = tpl_fail(c, BRISK_ERR_TEMPLATE, "%%%c format: a %s is required, not %s", conv,
                          strchr("dixXoc", conv) ? "number" : "real number", tpl_type_name(v));
            break;
        }
        double fv = v->type == TPL_FLOAT ? v->u.f : (double)(v->type == TPL_BOOL ? v->u.b : v->u.i);
        long long iv = v->type == TPL_FLOAT ? (long long)v->u.f : (long long)(v->type == TPL_BOOL ? v->u.b : v->u.i);
        if (v->type == TPL_FLOAT && strchr("dixXoc", conv) && (!isfinite(v->u.f) || fabs(v->u.f) >= 9.2e18)) {
            st = tpl_fail(c, BRISK_ERR_UNSUPPORTED, "%% formatting of a huge float as an integer");
            break;
        }
        int n;
        if (width >= 0 && prec >= 0) n = snprintf(spec, sizeof spec, "%%%s%d.%d", flags, width, prec);
        else if (width >= 0) n = snprintf(spec, sizeof spec, "%%%s%d", flags, width);
        else if (prec >= 0) n = snprintf(spec, sizeof spec, "%%%s.%d", flags, prec);
        else n = snprintf(spec, sizeof spec, "%%%s", flags);
        (void)n;
        switch (conv) {
        case 'd': case 'i': case 'u':
            strcat(spec, "lld");
            snprintf(tmp, sizeof tmp, spec, iv);
            break;
        case 'x': case 'X': case 'o':
            if (iv < 0 || strchr(flags, '#')) { st = tpl_fail(c, BRISK_ERR_UNSUPPORTED, "%%%c of a negative number or with #", conv); break; }
            strcat(spec, conv == 'x' ? "llx" : conv == 'X' ? "llX" : "llo");
            snprintf(tmp, sizeof tmp, spec, iv);
            break;
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
            if (!isfinite(fv)) { st = tpl_fail(c, BRISK_ERR_UNSUPPORTED, "%% formatting of inf/nan"); break; }
            size_t k = strlen(spec);
            spec[k] = conv;
            spec[k + 1] = 0;
            snprintf(tmp, sizeof tmp, spec, fv);
            break;
        }
        default:
            st = tpl_fail(c, BRISK_ERR_UNSUPPORTED, "%%%c formatting", conv);
            break;
        }
        if (!st) tpl_buf_puts(&b, tmp);
    }
    if (!st && used < nvals && !mapping) st = tpl_fail(c, BRISK_ERR_TEMPLATE, "not all arguments converted during string formatting");
    if (!st && b.over) st = tpl_nomem(c);
    if (!st) {
        tpl_str r = tpl_str_dup(&c->arena, b.p ? b.p : "", b.n);
        if (!r.p) st = tpl_nomem(c);
        else *out = tpl_strv(r);
    }
    tpl_buf_free(&b);
    return st;
}
