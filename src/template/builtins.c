/* builtins: jinja2's filters and tests, the globals transformers and jinja2
 * provide (range, namespace, dict, raise_exception, strftime_now), and
 * Python-style argument binding. Each filter follows jinja2 3.1's filters.py
 * with autoescape off (transformers' environment); lazy filters (map,
 * select*, reject*, unique, items, reverse) return single-use generators as
 * jinja2's do, so e.g. printing one or taking its length fails the same way.
 * The tojson filter is transformers' json.dumps wrapper, not jinja2's. */
#include "template/tpl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    /* filters */
    FI_ABS = TPL_ID_FILTER, FI_ATTR, FI_CAPITALIZE, FI_CENTER, FI_COUNT, FI_DEFAULT, FI_DICTSORT, FI_ESCAPE,
    FI_FIRST, FI_FLOAT, FI_FORCEESCAPE, FI_INDENT, FI_INT, FI_ITEMS, FI_JOIN, FI_LAST, FI_LENGTH, FI_LIST,
    FI_LOWER, FI_MAP, FI_MAX, FI_MIN, FI_REJECT, FI_REJECTATTR, FI_REPLACE, FI_REVERSE, FI_ROUND, FI_SAFE,
    FI_SELECT, FI_SELECTATTR, FI_SORT, FI_STRING, FI_SUM, FI_TITLE, FI_TOJSON, FI_TRIM, FI_UNIQUE, FI_UPPER,
    FI_FORMAT, FI_TRUNCATE, FI_END,
    /* tests */
    TE_BOOLEAN = TPL_ID_TEST, TE_CALLABLE, TE_DEFINED, TE_DIVISIBLEBY, TE_EQ, TE_ESCAPED, TE_EVEN, TE_FALSE,
    TE_FILTER, TE_FLOAT, TE_GE, TE_GT, TE_IN, TE_INTEGER, TE_ITERABLE, TE_LE, TE_LOWER, TE_LT, TE_MAPPING,
    TE_NE, TE_NONE, TE_NUMBER, TE_ODD, TE_SAMEAS, TE_SEQUENCE, TE_STRING, TE_TEST, TE_TRUE, TE_UNDEFINED,
    TE_UPPER, TE_END,
};

typedef struct builtin_name {
    const char *name;
    int id;   /* -1: jinja2 has it, brisk does not */
} builtin_name;

static const builtin_name filters[] = {
    {"abs", FI_ABS}, {"attr", FI_ATTR}, {"batch", -1}, {"capitalize", FI_CAPITALIZE}, {"center", FI_CENTER},
    {"count", FI_COUNT}, {"d", FI_DEFAULT}, {"default", FI_DEFAULT}, {"dictsort", FI_DICTSORT}, {"e", FI_ESCAPE},
    {"escape", FI_ESCAPE}, {"filesizeformat", -1}, {"first", FI_FIRST}, {"float", FI_FLOAT},
    {"forceescape", FI_FORCEESCAPE}, {"format", FI_FORMAT}, {"groupby", -1}, {"indent", FI_INDENT}, {"int", FI_INT},
    {"items", FI_ITEMS}, {"join", FI_JOIN}, {"last", FI_LAST}, {"length", FI_LENGTH}, {"list", FI_LIST},
    {"lower", FI_LOWER}, {"map", FI_MAP}, {"max", FI_MAX}, {"min", FI_MIN}, {"pprint", -1}, {"random", -1},
    {"reject", FI_REJECT}, {"rejectattr", FI_REJECTATTR}, {"replace", FI_REPLACE}, {"reverse", FI_REVERSE},
    {"round", FI_ROUND}, {"safe", FI_SAFE}, {"select", FI_SELECT}, {"selectattr", FI_SELECTATTR}, {"slice", -1},
    {"sort", FI_SORT}, {"string", FI_STRING}, {"striptags", -1}, {"sum", FI_SUM}, {"title", FI_TITLE},
    {"tojson", FI_TOJSON}, {"trim", FI_TRIM}, {"truncate", FI_TRUNCATE}, {"unique", FI_UNIQUE}, {"upper", FI_UPPER},
    {"urlencode", -1}, {"urlize", -1}, {"wordcount", -1}, {"wordwrap", -1}, {"xmlattr", -1},
};

static const builtin_name tests[] = {
    {"!=", TE_NE}, {"<", TE_LT}, {"<=", TE_LE}, {"==", TE_EQ}, {">", TE_GT}, {">=", TE_GE},
    {"boolean", TE_BOOLEAN}, {"callable", TE_CALLABLE}, {"defined", TE_DEFINED}, {"divisibleby", TE_DIVISIBLEBY},
    {"eq", TE_EQ}, {"equalto", TE_EQ}, {"escaped", TE_ESCAPED}, {"even", TE_EVEN}, {"false", TE_FALSE},
    {"filter", TE_FILTER}, {"float", TE_FLOAT}, {"ge", TE_GE}, {"greaterthan", TE_GT}, {"gt", TE_GT},
    {"in", TE_IN}, {"integer", TE_INTEGER}, {"iterable", TE_ITERABLE}, {"le", TE_LE}, {"lessthan", TE_LT},
    {"lower", TE_LOWER}, {"lt", TE_LT}, {"mapping", TE_MAPPING}, {"ne", TE_NE}, {"none", TE_NONE},
    {"number", TE_NUMBER}, {"odd", TE_ODD}, {"sameas", TE_SAMEAS}, {"sequence", TE_SEQUENCE},
    {"string", TE_STRING}, {"test", TE_TEST}, {"true", TE_TRUE}, {"undefined", TE_UNDEFINED}, {"upper", TE_UPPER},
};

static const builtin_name globals_names[] = {
    {"range", TPL_G_RANGE}, {"namespace", TPL_G_NAMESPACE}, {"dict", TPL_G_DICT}, {"raise_exception", TPL_G_RAISE},
    {"strftime_now", TPL_G_STRFTIME}, {"lipsum", TPL_G_LIPSUM}, {"cycler", TPL_G_CYCLER}, {"joiner", TPL_G_JOINER},
};

static int find_in(const builtin_name *tab, size_t n, tpl_str name) {
    for (size_t i = 0; i < n; i++)
        if (tpl_str_eqc(name, tab[i].name)) return tab[i].id;
    return 0;
}

int tpl_builtin_find(tpl_fn_kind kind, tpl_str name) {
    switch (kind) {
    case TPL_FK_FILTER: return find_in(filters, BRISK_ARRAY_LEN(filters), name);
    case TPL_FK_TEST: return find_in(tests, BRISK_ARRAY_LEN(tests), name);
    case TPL_FK_GLOBAL: return find_in(globals_names, BRISK_ARRAY_LEN(globals_names), name);
    case TPL_FK_METHOD: return 0;
    }
    return 0;
}

const char *tpl_builtin_name(int id) {
    const builtin_name *tabs[] = {filters, tests, globals_names};
    size_t ns[] = {BRISK_ARRAY_LEN(filters), BRISK_ARRAY_LEN(tests), BRISK_ARRAY_LEN(globals_names)};
    for (size_t t = 0; t < 3; t++)
        for (size_t i = 0; i < ns[t]; i++)
            if (tabs[t][i].id == id) return tabs[t][i].name;
    return "?";
}

/* ---- argument binding ----------------------------------------------------------------------- */

brisk_status tpl_bind(tpl_ctx *c, const char *fname, const char *const *params, size_t nparams, const tpl_args *a,
                      const tpl_value **slots) {
    for (size_t i = 0; i < nparams; i++) slots[i] = NULL;
    if (a->npos > nparams)
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s() takes at most %zu argument(s) (%zu given)", fname, nparams, a->npos);
    for (size_t i = 0; i < a->npos; i++) slots[i] = &a->pos[i];
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        while (i < nparams && !tpl_str_eqc(a->kwnames[k], params[i])) i++;
        if (i == nparams)
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s() got an unexpected keyword argument '%.*s'", fname,
                            (int)a->kwnames[k].n, a->kwnames[k].p);
        if (slots[i]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s() got multiple values for argument '%s'", fname, params[i]);
        slots[i] = &a->kw[k];
    }
    return BRISK_OK;
}

#define BIND(fname, ...)                                                                          \
    static const char *const params_[] = {__VA_ARGS__};                                           \
    const tpl_value *arg[BRISK_ARRAY_LEN(params_)];                                               \
    if ((st = tpl_bind(c, fname, params_, BRISK_ARRAY_LEN(params_), a, arg))) return st

static brisk_status no_args(tpl_ctx *c, const char *fname, const tpl_args *a) {
    if (a->npos || a->nkw) return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s() takes no arguments", fname);
    return BRISK_OK;
}

/* ---- helpers ------------------------------------------------------------------------------------ */

static brisk_status want_int(tpl_ctx *c, const tpl_value *v, const char *what, int64_t *out) {
    if (v->type == TPL_INT) *out = v->u.i;
    else if (v->type == TPL_BOOL) *out = v->u.b;
    else if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);
    else return tpl_fail(c, BRISK_ERR_TEMPLATE, "'%s' object cannot be interpreted as an integer (%s)", tpl_type_name(v), what);
    return BRISK_OK;
}

static tpl_list *new_list(tpl_ctx *c, size_t cap, tpl_list_kind kind) { return tpl_list_new(&c->arena, cap, kind); }

static brisk_status push(tpl_ctx *c, tpl_list *l, tpl_value v) {
    return tpl_list_push(&c->arena, l, v) ? BRISK_OK : tpl_nomem(c);
}

static brisk_status tuple2(tpl_ctx *c, tpl_value x, tpl_value y, tpl_value *out) {
    tpl_list *t = new_list(c, 2, TPL_LK_TUPLE);
    if (!t) return tpl_nomem(c);
    t->v[0] = x;
    t->v[1] = y;
    t->n = 2;
    *out = tpl_listv(t);
    return BRISK_OK;
}

static brisk_status len_of(tpl_ctx *c, const tpl_value *v, int64_t *out) {
    switch ((tpl_type)v->type) {
    case TPL_UNDEF: *out = 0; return BRISK_OK;
    case TPL_STR: *out = (int64_t)tpl_utf8_len(v->u.s); return tpl_charge(c, v->u.s.n / 8);
    case TPL_DICT: *out = (int64_t)v->u.dict->n; return BRISK_OK;
    case TPL_LIST:
        if (v->u.list->kind != TPL_LK_GEN) {
            *out = (int64_t)v->u.list->n;
            return BRISK_OK;
        }
        break;
    case TPL_LOOP: *out = (int64_t)v->u.loop->n; return BRISK_OK;
    default: break;
    }
    return tpl_fail(c, BRISK_ERR_TEMPLATE, "object of type '%s' has no len()", tpl_type_name(v));
}

/* jinja2's _prepare_attribute_parts + environment.getitem per part */
static brisk_status attr_get(tpl_ctx *c, const tpl_value *item, const tpl_value *attribute, tpl_value *out) {
    if (attribute->type == TPL_INT) return tpl_getitem(c, item, attribute, out);
    if (attribute->type != TPL_STR) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "an attribute argument of type %s", tpl_type_name(attribute));
    tpl_str s = attribute->u.s;
    tpl_value cur = *item;
    brisk_status st0 = tpl_charge(c, s.n / 64);
    if (st0) return st0;
    size_t start = 0;
    for (size_t i = 0; i <= s.n; i++) {
        if (i < s.n && s.p[i] != '.') continue;
        tpl_str part = {s.p + start, i - start};
        tpl_value key = tpl_strv(part);
        bool digits = part.n > 0;
        int64_t num = 0;
        for (size_t k = 0; k < part.n && digits; k++) {
            digits = part.p[k] >= '0' && part.p[k] <= '9';
            if (digits && num < 1000000000000LL) num = num * 10 + (part.p[k] - '0');
        }
        if (digits) key = tpl_int(num);
        brisk_status st = tpl_getitem(c, &cur, &key, &cur);
        if (st) return st;
        start = i + 1;
    }
    *out = cur;
    return BRISK_OK;
}

static brisk_status ignore_case(tpl_ctx *c, tpl_value *v) {
    if (v->type != TPL_STR) return BRISK_OK;
    tpl_str r;
    brisk_status st = tpl_str_case(c, v->u.s, TPL_CASE_LOWER, &r);
    if (!st) v->u.s = r;
    return st;
}

/* Stable merge sort of idx[] by keys[] (Python sorted with key, reverse). */
static brisk_status msort(tpl_ctx *c, const tpl_value *keys, size_t *idx, size_t *tmp, size_t n, bool reverse) {
    if (n < 2) return BRISK_OK;
    size_t h = n / 2;
    brisk_status st;
    if ((st = msort(c, keys, idx, tmp, h, reverse)) || (st = msort(c, keys, idx + h, tmp, n - h, reverse))) return st;
    size_t i = 0, j = h, k = 0;
    char msg[200];
    if ((st = tpl_charge(c, n))) return st;   /* the merge's moves */
    while (i < h && j < n) {
        bool lt;
        /* take from the right only when strictly before the left (stability) */
        const tpl_value *x = &keys[idx[j]], *y = &keys[idx[i]];
        if (reverse) x = &keys[idx[i]], y = &keys[idx[j]];
        if (x->type == TPL_UNDEF) return tpl_undef_fail(c, x);
        if (y->type == TPL_UNDEF) return tpl_undef_fail(c, y);
        tpl_walk w;
        tpl_walk_begin(c, &w);
        bool ok = tpl_walk_charge(&w, 1) && tpl_lt(x, y, &lt, msg, sizeof msg, &w);
        if ((st = tpl_walk_end(c, &w, "comparison"))) return st;
        if (!ok) return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s", msg);
        tmp[k++] = lt ? idx[j++] : idx[i++];
    }
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
    return BRISK_OK;
}

static brisk_status sorted(tpl_ctx *c, const tpl_value *items, const tpl_value *keys, size_t n, bool reverse, tpl_list *out) {
    size_t *idx = malloc((2 * n + 1) * sizeof *idx);
    if (!idx) return tpl_nomem(c);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    brisk_status st = msort(c, keys, idx, idx + n, n, reverse);
    for (size_t i = 0; !st && i < n; i++) out->v[i] = items[idx[i]];
    if (!st) out->n = n;
    free(idx);
    return st;
}

/* ---- tests ------------------------------------------------------------------------------------------- */

static brisk_status cased_check(tpl_ctx *c, tpl_str s, bool upper, bool *out) {
    /* str.islower()/isupper(): some cased char, and all cased chars in that case */
    tpl_str conv;
    brisk_status st = tpl_str_case(c, s, upper ? TPL_CASE_LOWER : TPL_CASE_UPPER, &conv);
    if (st) return st;
    tpl_str same;
    if ((st = tpl_str_case(c, s, upper ? TPL_CASE_UPPER : TPL_CASE_LOWER, &same))) return st;
    /* has a cased char iff converting to the other case changes something or it is caseless-cased;
     * approximate with: equal to its own case conversion and differs from the other */
    *out = tpl_str_eq(same, s) && !tpl_str_eq(conv, s);
    return BRISK_OK;
}

brisk_status tpl_run_test(tpl_ctx *c, int id, const tpl_value *v, const tpl_args *a, bool *out) {
    brisk_status st;
    const tpl_value *other = a->npos ? &a->pos[0] : a->nkw ? &a->kw[0] : NULL;
    int expect_args = 0;
    switch (id) {
    case TE_DIVISIBLEBY: case TE_EQ: case TE_NE: case TE_GE: case TE_GT: case TE_LE: case TE_LT: case TE_IN:
    case TE_SAMEAS:
        expect_args = 1;
        break;
    default: break;
    }
    if (a->npos + a->nkw != (size_t)expect_args)
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "test '%s' takes %d argument(s) (%zu given)", tpl_builtin_name(id),
                        expect_args, a->npos + a->nkw);
    switch (id) {
    case TE_DEFINED: *out = v->type != TPL_UNDEF; return BRISK_OK;
    case TE_UNDEFINED: *out = v->type == TPL_UNDEF; return BRISK_OK;
    case TE_NONE: *out = v->type == TPL_NONE; return BRISK_OK;
    case TE_BOOLEAN: *out = v->type == TPL_BOOL; return BRISK_OK;
    case TE_FALSE: *out = v->type == TPL_BOOL && !v->u.b; return BRISK_OK;
    case TE_TRUE: *out = v->type == TPL_BOOL && v->u.b; return BRISK_OK;
    case TE_INTEGER: *out = v->type == TPL_INT; return BRISK_OK;
    case TE_FLOAT: *out = v->type == TPL_FLOAT; return BRISK_OK;
    case TE_NUMBER: *out = tpl_is_num(v); return BRISK_OK;
    case TE_STRING: *out = v->type == TPL_STR; return BRISK_OK;
    case TE_MAPPING: *out = v->type == TPL_DICT; return BRISK_OK;
    case TE_ESCAPED: *out = v->type == TPL_STR && (v->flags & TPL_F_MARKUP); return BRISK_OK;
    case TE_CALLABLE: *out = v->type == TPL_FUNC || v->type == TPL_MACRO || v->type == TPL_UNDEF; return BRISK_OK;
    case TE_ITERABLE:
        *out = v->type == TPL_STR || v->type == TPL_LIST || v->type == TPL_DICT || v->type == TPL_UNDEF || v->type == TPL_LOOP;
        return BRISK_OK;
    case TE_SEQUENCE:
        *out = v->type == TPL_STR || v->type == TPL_DICT || v->type == TPL_UNDEF ||
               (v->type == TPL_LIST && (v->u.list->kind == TPL_LK_LIST || v->u.list->kind == TPL_LK_TUPLE ||
                                        v->u.list->kind == TPL_LK_RANGE));
        return BRISK_OK;
    case TE_ODD: case TE_EVEN: case TE_DIVISIBLEBY: {
        /* value % 2 == 1 / value % 2 == 0 / value % num == 0, with Python's % */
        tpl_value two = tpl_int(2), r, want = tpl_int(id == TE_ODD ? 1 : 0);
        if ((st = tpl_arith(c, TPL_OP_MOD, v, id == TE_DIVISIBLEBY ? other : &two, &r))) return st;
        return tpl_equal(c, &r, &want, out);
    }
    case TE_LOWER: case TE_UPPER: {
        tpl_str s;
        if ((st = tpl_stringify(c, v, &s))) return st;
        return cased_check(c, s, id == TE_UPPER, out);
    }
    case TE_IN: return tpl_contains(c, v, other, out);
    case TE_EQ: return tpl_equal(c, v, other, out);
    case TE_NE:
        st = tpl_equal(c, v, other, out);
        *out = !*out;
        return st;
    case TE_LT: case TE_GT: case TE_LE: case TE_GE: {
        if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);
        if (other->type == TPL_UNDEF) return tpl_undef_fail(c, other);
        bool lt;
        const tpl_value *x = v, *y = other;
        if (id == TE_GT || id == TE_LE) x = other, y = v;   /* x < y */
        if ((st = tpl_less(c, x, y, &lt))) return st;
        /* lt is v < other for LT/GE and other < v for GT/LE */
        *out = id == TE_LT || id == TE_GT ? lt : !lt;
        if (*out && (id == TE_LE || id == TE_GE) &&
            ((v->type == TPL_FLOAT && isnan(v->u.f)) || (other->type == TPL_FLOAT && isnan(other->u.f))))
            *out = false;
        return BRISK_OK;
    }
    case TE_SAMEAS:
        if (v->type == TPL_NONE || v->type == TPL_BOOL || other->type == TPL_NONE || other->type == TPL_BOOL) {
            *out = v->type == other->type && (v->type == TPL_NONE || v->u.b == other->u.b);
            return BRISK_OK;
        }
        if (v->type == TPL_INT && other->type == TPL_INT && v->u.i >= -5 && v->u.i <= 256) {
            *out = v->u.i == other->u.i;
            return BRISK_OK;
        }
        if (v->type != other->type) {
            *out = false;
            return BRISK_OK;
        }
        if (v->type == TPL_LIST || v->type == TPL_DICT || v->type == TPL_NS || v->type == TPL_MACRO) {
            *out = v->type == TPL_LIST ? v->u.list == other->u.list : v->type == TPL_MACRO ? v->u.macro == other->u.macro
                                                                                            : v->u.dict == other->u.dict;
            return BRISK_OK;
        }
        return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "'sameas' on %s values (object identity)", tpl_type_name(v));
    case TE_FILTER: case TE_TEST:
        if (v->type != TPL_STR) {
            *out = false;
            return BRISK_OK;
        }
        *out = tpl_builtin_find(id == TE_FILTER ? TPL_FK_FILTER : TPL_FK_TEST, v->u.s) != 0;
        return BRISK_OK;
    }
    return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "the '%s' test", tpl_builtin_name(id));
}

/* call_test by name (select/reject) */
static brisk_status test_by_name(tpl_ctx *c, const tpl_value *name, const tpl_value *v, const tpl_args *a, bool *out) {
    if (name->type != TPL_STR) return tpl_fail(c, BRISK_ERR_TEMPLATE, "test name must be a string");
    int id = tpl_builtin_find(TPL_FK_TEST, name->u.s);
    if (id == 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "No test named '%.*s'.", (int)name->u.s.n, name->u.s.p);
    if (id < 0) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "the '%.*s' test", (int)name->u.s.n, name->u.s.p);
    return tpl_run_test(c, id, v, a, out);
}

/* ---- filters ------------------------------------------------------------------------------------------ */

static brisk_status f_default(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("default", "default_value", "boolean");
    bool use = v->type == TPL_UNDEF || (arg[1] && tpl_truthy(arg[1]) && !tpl_truthy(v));
    if (!use) *out = *v;
    else if (arg[0]) *out = *arg[0];
    else *out = tpl_strv((tpl_str){"", 0});
    return BRISK_OK;
}

static brisk_status f_tojson(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("tojson", "ensure_ascii", "indent", "separators", "sort_keys");
    tpl_json_opts o = {0};
    o.ensure_ascii = arg[0] && tpl_truthy(arg[0]);
    o.sort_keys = arg[3] && tpl_truthy(arg[3]);
    tpl_str indent_s, seps[2];
    char spaces[64];
    if (arg[1] && arg[1]->type != TPL_NONE) {
        if (arg[1]->type == TPL_STR) {
            indent_s = arg[1]->u.s;
        } else if (arg[1]->type == TPL_INT || arg[1]->type == TPL_BOOL) {
            int64_t w = arg[1]->type == TPL_BOOL ? arg[1]->u.b : arg[1]->u.i;
            if (w < 0) w = 0;
            if (w > (int64_t)sizeof spaces) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "tojson indent above %zu", sizeof spaces);
            memset(spaces, ' ', (size_t)w);
            indent_s = (tpl_str){spaces, (size_t)w};
        } else {
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "can't multiply sequence by non-int of type '%s'", tpl_type_name(arg[1]));
        }
        o.indent = &indent_s;
    }
    if (arg[2] && arg[2]->type != TPL_NONE) {
        const tpl_value *items = NULL;
        size_t n = 0;
        if ((st = tpl_iterate(c, arg[2], &items, &n))) return st;
        if (n != 2 || items[0].type != TPL_STR || items[1].type != TPL_STR)
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "tojson separators must be a pair of strings");
        seps[0] = items[0].u.s;
        seps[1] = items[1].u.s;
        o.item_sep = &seps[0];
        o.key_sep = &seps[1];
    }
    tpl_buf b = {.limit = c->max_output};
    char msg[200] = "";
    tpl_walk w;
    tpl_walk_begin(c, &w);
    bool ok = tpl_json_dump(&b, v, &o, 0, msg, sizeof msg, &w);
    if ((st = tpl_walk_end(c, &w, "tojson")) || (!ok && (st = BRISK_ERR_CAPACITY))) {
        bool over = b.over;
        tpl_buf_free(&b);
        if (w.fail) return st;
        if (over || !msg[0]) return tpl_fail(c, BRISK_ERR_CAPACITY, "output limit exceeded (%zu bytes)", c->max_output);
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s", msg);
    }
    if ((st = tpl_charge(c, b.n / 64))) {
        tpl_buf_free(&b);
        return st;
    }
    tpl_str r = tpl_str_dup(&c->arena, b.p ? b.p : "", b.n);
    tpl_buf_free(&b);
    if (!r.p) return tpl_nomem(c);
    *out = tpl_strv(r);
    return BRISK_OK;
}

static brisk_status f_join(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("join", "d", "attribute");
    tpl_str sep = {"", 0};
    if (arg[0] && (st = tpl_stringify(c, arg[0], &sep))) return st;
    const tpl_value *items = NULL;
    size_t n = 0;
    if ((st = tpl_iterate(c, v, &items, &n))) return st;
    tpl_buf b = {.limit = c->max_output};
    for (size_t i = 0; i < n; i++) {
        tpl_value item = items[i];
        if (arg[1] && arg[1]->type != TPL_NONE && (st = attr_get(c, &items[i], arg[1], &item))) goto fail;
        tpl_str s;
        if ((st = tpl_stringify(c, &item, &s))) goto fail;
        if ((st = tpl_charge(c, 1 + (s.n + sep.n) / 64))) goto fail;
        if (i) tpl_buf_put(&b, sep.p, sep.n);
        tpl_buf_put(&b, s.p, s.n);
    }
    if (b.over) { st = tpl_nomem(c); goto fail; }
    tpl_str r = tpl_str_dup(&c->arena, b.p ? b.p : "", b.n);
    tpl_buf_free(&b);
    if (!r.p) return tpl_nomem(c);
    *out = tpl_strv(r);
    return BRISK_OK;
fail:
    tpl_buf_free(&b);
    return st;
}

static brisk_status f_indent(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("indent", "width", "first", "blank");
    tpl_str ind;
    char spaces[256];
    if (!arg[0]) {
        ind = (tpl_str){"    ", 4};
    } else if (arg[0]->type == TPL_STR) {
        ind = arg[0]->u.s;
    } else {
        int64_t w;
        if ((st = want_int(c, arg[0], "indent width", &w))) return st;
        if (w < 0) w = 0;
        if (w > (int64_t)sizeof spaces) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "indent width above %zu", sizeof spaces);
        memset(spaces, ' ', (size_t)w);
        ind = (tpl_str){spaces, (size_t)w};
    }
    bool first = arg[1] && tpl_truthy(arg[1]), blank = arg[2] && tpl_truthy(arg[2]);
    /* jinja2 3.1 does `s += "\n"` on the value itself: only strings work */
    if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);
    if (v->type != TPL_STR) {
        if (v->type == TPL_LIST && v->u.list->kind == TPL_LK_LIST)
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "'list' object has no attribute 'splitlines'");
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "unsupported operand type(s) for +=: '%s' and 'str'", tpl_type_name(v));
    }
    tpl_str s = v->u.s;
    if ((st = tpl_charge(c, s.n / 8))) return st;
    /* lines = (s + "\n").splitlines(): every line break ends a line, and the text after
     * the last one (possibly empty) is the last line */
    tpl_buf b = {.limit = c->max_output};
    size_t start = 0, line = 0;
    for (;;) {
        size_t end = s.n, next = s.n;
        bool found = false;
        for (size_t k = start; k < s.n;) {
            size_t kk = k;
            uint32_t cp = tpl_utf8_next(s.p, s.n, &kk);
            if (cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D || cp == 0x1E ||
                cp == 0x85 || cp == 0x2028 || cp == 0x2029) {
                end = k;
                next = kk;
                if (cp == '\r' && kk < s.n && s.p[kk] == '\n') next = kk + 1;
                found = true;
                break;
            }
            k = kk;
        }
        bool empty = end == start;
        if (line > 0) tpl_buf_putc(&b, '\n');
        if ((line == 0 && first) || (line > 0 && (blank || !empty))) tpl_buf_put(&b, ind.p, ind.n);
        tpl_buf_put(&b, s.p + start, end - start);
        line++;
        if (!found) break;
        start = next;
    }
    if (b.over) {
        tpl_buf_free(&b);
        return tpl_nomem(c);
    }
    tpl_str r = tpl_str_dup(&c->arena, b.p ? b.p : "", b.n);
    tpl_buf_free(&b);
    if (!r.p) return tpl_nomem(c);
    *out = tpl_strv(r);
    out->flags = v->type == TPL_STR ? (v->flags & TPL_F_MARKUP) : 0;
    return BRISK_OK;
}

static brisk_status parse_py_number(tpl_str s, bool want_float, tpl_value *out) {
    char buf[128];
    size_t a = 0, b = s.n;
    while (a < b && tpl_is_space((unsigned char)s.p[a])) a++;
    while (b > a && tpl_is_space((unsigned char)s.p[b - 1])) b--;
    if (b - a == 0 || b - a >= sizeof buf) return BRISK_ERR_INVALID_ARG;
    size_t m = 0;
    for (size_t i = a; i < b; i++) {
        char ch = s.p[i];
        if (ch == '_') {
            if (i == a || i + 1 == b || !(s.p[i - 1] >= '0' && s.p[i - 1] <= '9') || !(s.p[i + 1] >= '0' && s.p[i + 1] <= '9'))
                return BRISK_ERR_INVALID_ARG;
            continue;
        }
        buf[m++] = ch;
    }
    buf[m] = 0;
    char *end;
    errno = 0;
    if (!want_float) {
        const char *d = buf;
        if (*d == '+' || *d == '-') d++;
        for (const char *q = d; *q; q++)
            if (*q < '0' || *q > '9') return BRISK_ERR_INVALID_ARG;
        if (!*d) return BRISK_ERR_INVALID_ARG;
        long long v = strtoll(buf, &end, 10);
        if (errno) return BRISK_ERR_UNSUPPORTED;
        *out = tpl_int(v);
        return BRISK_OK;
    }
    for (const char *q = buf; *q; q++)   /* Python float() takes no hex */
        if (*q == 'x' || *q == 'X' || *q == 'p' || *q == 'P') return BRISK_ERR_INVALID_ARG;
    double d = strtod(buf, &end);
    if (*end) return BRISK_ERR_INVALID_ARG;
    *out = tpl_float(d);
    return BRISK_OK;
}

static brisk_status f_int(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("int", "default", "base");
    if (arg[1] && !(arg[1]->type == TPL_INT && arg[1]->u.i == 10))
        return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "int filter with a base other than 10");
    tpl_value dflt = arg[0] ? *arg[0] : tpl_int(0);
    if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);   /* int(Undefined) raises */
    switch ((tpl_type)v->type) {
    case TPL_INT: *out = *v; return BRISK_OK;
    case TPL_BOOL: *out = tpl_int(v->u.b); return BRISK_OK;
    case TPL_FLOAT:
        if (isnan(v->u.f)) { *out = dflt; return BRISK_OK; }
        if (isinf(v->u.f)) return tpl_fail(c, BRISK_ERR_TEMPLATE, "cannot convert float infinity to integer");
        if (fabs(v->u.f) >= 9.2e18) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "integer beyond 64 bits");
        *out = tpl_int((int64_t)v->u.f);
        return BRISK_OK;
    case TPL_STR: {
        st = parse_py_number(v->u.s, false, out);
        if (st == BRISK_OK) return BRISK_OK;
        if (st == BRISK_ERR_UNSUPPORTED) return tpl_fail(c, st, "integer beyond 64 bits");
        tpl_value f;
        if (parse_py_number(v->u.s, true, &f) == BRISK_OK) {
            if (isnan(f.u.f)) { *out = dflt; return BRISK_OK; }
            if (isinf(f.u.f)) return tpl_fail(c, BRISK_ERR_TEMPLATE, "cannot convert float infinity to integer");
            if (fabs(f.u.f) >= 9.2e18) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "integer beyond 64 bits");
            *out = tpl_int((int64_t)f.u.f);
            return BRISK_OK;
        }
        *out = dflt;
        return BRISK_OK;
    }
    default:
        *out = dflt;
        return BRISK_OK;
    }
}

static brisk_status f_float(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("float", "default");
    tpl_value dflt = arg[0] ? *arg[0] : tpl_float(0.0);
    if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);
    switch ((tpl_type)v->type) {
    case TPL_INT: *out = tpl_float((double)v->u.i); return BRISK_OK;
    case TPL_BOOL: *out = tpl_float(v->u.b); return BRISK_OK;
    case TPL_FLOAT: *out = *v; return BRISK_OK;
    case TPL_STR:
        if (parse_py_number(v->u.s, true, out) == BRISK_OK) return BRISK_OK;
        *out = dflt;
        return BRISK_OK;
    default:
        *out = dflt;
        return BRISK_OK;
    }
}

static brisk_status f_round(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("round", "precision", "method");
    int64_t prec = 0;
    if (arg[0] && (st = want_int(c, arg[0], "precision", &prec))) return st;
    tpl_str method = arg[1] && arg[1]->type == TPL_STR ? arg[1]->u.s : TPL_STR_LIT("common");
    if (!tpl_str_eqc(method, "common") && !tpl_str_eqc(method, "ceil") && !tpl_str_eqc(method, "floor"))
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "method must be common, ceil or floor");
    if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);
    if (!tpl_is_num(v)) return tpl_fail(c, BRISK_ERR_TEMPLATE, "type %s doesn't define __round__ method", tpl_type_name(v));
    if (prec < 0 || prec > 15) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "round() precision %lld", (long long)prec);
    double x = v->type == TPL_FLOAT ? v->u.f : (double)(v->type == TPL_BOOL ? v->u.b : v->u.i);
    if (tpl_str_eqc(method, "common")) {
        if (v->type != TPL_FLOAT) {
            *out = tpl_int(v->type == TPL_BOOL ? v->u.b : v->u.i);
            return BRISK_OK;
        }
        if (!isfinite(x)) {
            *out = *v;
            return BRISK_OK;
        }
        char buf[400];
        snprintf(buf, sizeof buf, "%.*f", (int)prec, x);   /* exact value, round-half-even: Python's round() */
        *out = tpl_float(strtod(buf, NULL));
        return BRISK_OK;
    }
    double scale = pow(10.0, (double)prec);
    double r = tpl_str_eqc(method, "ceil") ? ceil(x * scale) : floor(x * scale);
    *out = tpl_float(r / scale);
    return BRISK_OK;
}

static brisk_status f_first_last(tpl_ctx *c, const tpl_value *v, bool last, tpl_value *out) {
    if (last && v->type == TPL_LIST && v->u.list->kind == TPL_LK_GEN)
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "'generator' object is not reversible");
    const tpl_value *items = NULL;
    size_t n = 0;
    brisk_status st = tpl_iterate(c, v, &items, &n);
    if (st) return st;
    if (n == 0) return tpl_make_undef_hint(c, out, "No %s item, sequence was empty.", last ? "last" : "first");
    *out = items[last ? n - 1 : 0];
    return BRISK_OK;
}

static brisk_status make_gen(tpl_ctx *c, tpl_list **out) {
    *out = new_list(c, 0, TPL_LK_GEN);
    return *out ? BRISK_OK : tpl_nomem(c);
}

static brisk_status f_items(tpl_ctx *c, const tpl_value *v, tpl_value *out) {
    tpl_list *g;
    brisk_status st;
    if ((st = make_gen(c, &g))) return st;
    *out = tpl_listv(g);
    if (v->type == TPL_UNDEF) return BRISK_OK;
    if (v->type != TPL_DICT) return tpl_fail(c, BRISK_ERR_TEMPLATE, "Can only get item pairs from a mapping.");
    for (size_t i = 0; i < v->u.dict->n; i++) {
        tpl_value t;
        if ((st = tuple2(c, v->u.dict->k[i], v->u.dict->v[i], &t)) || (st = push(c, g, t))) return st;
    }
    return BRISK_OK;
}

static brisk_status f_dictsort(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("dictsort", "case_sensitive", "by", "reverse");
    bool cs = arg[0] && tpl_truthy(arg[0]), rev = arg[2] && tpl_truthy(arg[2]);
    int pos = 0;
    if (arg[1]) {
        if (arg[1]->type == TPL_STR && tpl_str_eqc(arg[1]->u.s, "value")) pos = 1;
        else if (!(arg[1]->type == TPL_STR && tpl_str_eqc(arg[1]->u.s, "key")))
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "You can only sort by either \"key\" or \"value\"");
    }
    if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);
    if (v->type != TPL_DICT) return tpl_fail(c, BRISK_ERR_TEMPLATE, "'%s' object has no attribute 'items'", tpl_type_name(v));
    size_t n = v->u.dict->n;
    tpl_value *items = tpl_alloc_array(&c->arena, n ? n : 1, sizeof *items);
    tpl_value *keys = tpl_alloc_array(&c->arena, n ? n : 1, sizeof *keys);
    tpl_list *r = new_list(c, n, TPL_LK_LIST);
    if (!items || !keys || !r) return tpl_nomem(c);
    for (size_t i = 0; i < n; i++) {
        if ((st = tuple2(c, v->u.dict->k[i], v->u.dict->v[i], &items[i]))) return st;
        keys[i] = pos ? v->u.dict->v[i] : v->u.dict->k[i];
        if (!cs && (st = ignore_case(c, &keys[i]))) return st;
    }
    if ((st = sorted(c, items, keys, n, rev, r))) return st;
    *out = tpl_listv(r);
    return BRISK_OK;
}

static brisk_status f_sort(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("sort", "reverse", "case_sensitive", "attribute");
    bool rev = arg[0] && tpl_truthy(arg[0]), cs = arg[1] && tpl_truthy(arg[1]);
    const tpl_value *items = NULL;
    size_t n = 0;
    if ((st = tpl_iterate(c, v, &items, &n))) return st;
    tpl_value *keys = tpl_alloc_array(&c->arena, n ? n : 1, sizeof *keys);
    tpl_list *r = new_list(c, n, TPL_LK_LIST);
    if (!keys || !r) return tpl_nomem(c);
    bool multi = arg[2] && arg[2]->type == TPL_STR && memchr(arg[2]->u.s.p, ',', arg[2]->u.s.n);
    if (multi) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "sort by several attributes");
    for (size_t i = 0; i < n; i++) {
        keys[i] = items[i];
        if (arg[2] && arg[2]->type != TPL_NONE && (st = attr_get(c, &items[i], arg[2], &keys[i]))) return st;
        if (!cs && (st = ignore_case(c, &keys[i]))) return st;
    }
    if ((st = sorted(c, items, keys, n, rev, r))) return st;
    *out = tpl_listv(r);
    return BRISK_OK;
}

static brisk_status f_minmax(tpl_ctx *c, const tpl_value *v, const tpl_args *a, bool max, tpl_value *out) {
    brisk_status st;
    BIND(max ? "max" : "min", "case_sensitive", "attribute");
    bool cs = arg[0] && tpl_truthy(arg[0]);
    const tpl_value *items = NULL;
    size_t n = 0;
    if ((st = tpl_iterate(c, v, &items, &n))) return st;
    if (n == 0) return tpl_make_undef_hint(c, out, "No aggregated item, sequence was empty.");
    size_t best = 0;
    tpl_value bestk;
    for (size_t i = 0; i < n; i++) {
        tpl_value k = items[i];
        if (arg[1] && arg[1]->type != TPL_NONE && (st = attr_get(c, &items[i], arg[1], &k))) return st;
        if (!cs && (st = ignore_case(c, &k))) return st;
        if (i == 0) {
            bestk = k;
            continue;
        }
        bool better;
        if (k.type == TPL_UNDEF) return tpl_undef_fail(c, &k);
        if ((st = tpl_charge(c, 1)) || (st = tpl_less(c, max ? &bestk : &k, max ? &k : &bestk, &better))) return st;
        if (better) {
            best = i;
            bestk = k;
        }
    }
    *out = items[best];
    return BRISK_OK;
}

static brisk_status f_map(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    tpl_list *g;
    if ((st = make_gen(c, &g))) return st;
    *out = tpl_listv(g);
    if (!tpl_truthy(v)) return BRISK_OK;   /* jinja2: `if value:` before anything else */
    const tpl_value *items = NULL;
    size_t n = 0;
    if (a->npos == 0) {
        const tpl_value *attribute = NULL, *dflt = NULL;
        for (size_t k = 0; k < a->nkw; k++) {
            if (tpl_str_eqc(a->kwnames[k], "attribute")) attribute = &a->kw[k];
            else if (tpl_str_eqc(a->kwnames[k], "default")) dflt = &a->kw[k];
            else return tpl_fail(c, BRISK_ERR_TEMPLATE, "Unexpected keyword argument '%.*s'", (int)a->kwnames[k].n, a->kwnames[k].p);
        }
        if (!attribute) return tpl_fail(c, BRISK_ERR_TEMPLATE, "map requires a filter argument");
        if ((st = tpl_iterate(c, v, &items, &n))) return st;
        for (size_t i = 0; i < n; i++) {
            tpl_value r;
            if ((st = tpl_charge(c, 1)) || (st = attr_get(c, &items[i], attribute, &r))) return st;
            if (dflt && dflt->type != TPL_NONE && r.type == TPL_UNDEF) r = *dflt;
            if ((st = push(c, g, r))) return st;
        }
    } else {
        const tpl_value *name = &a->pos[0];
        if (name->type != TPL_STR) return tpl_fail(c, BRISK_ERR_TEMPLATE, "filter name must be a string");
        int id = tpl_builtin_find(TPL_FK_FILTER, name->u.s);
        if (id == 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "No filter named '%.*s'.", (int)name->u.s.n, name->u.s.p);
        if (id < 0) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "the '%.*s' filter", (int)name->u.s.n, name->u.s.p);
        tpl_args rest = *a;
        rest.pos++;
        rest.npos--;
        if ((st = tpl_iterate(c, v, &items, &n))) return st;
        for (size_t i = 0; i < n; i++) {
            tpl_value r;
            if ((st = tpl_charge(c, 1)) || (st = tpl_call_builtin(c, id, &items[i], &rest, &r)) || (st = push(c, g, r))) return st;
        }
    }
    *out = tpl_listv(g);
    return BRISK_OK;
}

static brisk_status f_select(tpl_ctx *c, const tpl_value *v, const tpl_args *a, bool attr, bool reject, tpl_value *out) {
    brisk_status st;
    tpl_list *g;
    if ((st = make_gen(c, &g))) return st;
    *out = tpl_listv(g);
    if (!tpl_truthy(v)) return BRISK_OK;
    size_t off = 0;
    const tpl_value *attribute = NULL;
    if (attr) {
        if (a->npos < 1) return tpl_fail(c, BRISK_ERR_TEMPLATE, "Missing parameter for attribute name");
        attribute = &a->pos[0];
        off = 1;
    }
    const tpl_value *test = a->npos > off ? &a->pos[off] : NULL;
    tpl_args rest = *a;
    rest.pos = a->pos ? a->pos + (test ? off + 1 : off) : NULL;
    rest.npos = a->npos - (test ? off + 1 : off);
    const tpl_value *items = NULL;
    size_t n = 0;
    if ((st = tpl_iterate(c, v, &items, &n))) return st;
    for (size_t i = 0; i < n; i++) {
        tpl_value x = items[i];
        if ((st = tpl_charge(c, 1))) return st;
        if (attribute && (st = attr_get(c, &items[i], attribute, &x))) return st;
        bool keep;
        if (test) {
            if ((st = test_by_name(c, test, &x, &rest, &keep))) return st;
        } else {
            keep = tpl_truthy(&x);
        }
        if (keep != reject && (st = push(c, g, items[i]))) return st;
    }
    return BRISK_OK;
}

static brisk_status f_unique(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("unique", "case_sensitive", "attribute");
    bool cs = arg[0] && tpl_truthy(arg[0]);
    tpl_list *g;
    if ((st = make_gen(c, &g))) return st;
    const tpl_value *items = NULL;
    size_t n = 0;
    if ((st = tpl_iterate(c, v, &items, &n))) return st;
    /* jinja2 keeps a set of the keys seen: a hashed dict here, O(1) per item */
    tpl_dict *seen = tpl_dict_new(&c->arena, 0);
    if (!seen) return tpl_nomem(c);
    for (size_t i = 0; i < n; i++) {
        tpl_value k = items[i];
        if ((st = tpl_charge(c, 1))) return st;
        if (arg[1] && arg[1]->type != TPL_NONE && (st = attr_get(c, &items[i], arg[1], &k))) return st;
        if (!cs && (st = ignore_case(c, &k))) return st;
        const tpl_value *dup;
        if ((st = tpl_dict_lookup(c, seen, &k, &dup))) return st;
        if (dup) continue;
        if ((st = tpl_dict_insert(c, seen, k, tpl_none())) || (st = push(c, g, items[i]))) return st;
    }
    *out = tpl_listv(g);
    return BRISK_OK;
}

static brisk_status f_reverse(tpl_ctx *c, const tpl_value *v, tpl_value *out) {
    brisk_status st;
    if (v->type == TPL_STR) {
        if ((st = tpl_charge(c, v->u.s.n / 8))) return st;
        tpl_buf b = {.limit = c->max_output};
        size_t i = v->u.s.n;
        while (i > 0) {
            size_t e = i;
            i--;
            while (i > 0 && ((unsigned char)v->u.s.p[i] & 0xC0) == 0x80) i--;
            tpl_buf_put(&b, v->u.s.p + i, e - i);
        }
        tpl_str r = tpl_str_dup(&c->arena, b.p ? b.p : "", b.n);
        tpl_buf_free(&b);
        if (!r.p) return tpl_nomem(c);
        *out = tpl_strv(r);
        out->flags = v->flags & TPL_F_MARKUP;
        return BRISK_OK;
    }
    bool lazy = !(v->type == TPL_LIST && v->u.list->kind == TPL_LK_GEN);   /* reversed() vs list().reverse() */
    const tpl_value *items = NULL;
    size_t n = 0;
    if ((st = tpl_iterate(c, v, &items, &n))) return st;
    if ((st = tpl_charge(c, n))) return st;
    tpl_list *r = new_list(c, n, lazy ? TPL_LK_GEN : TPL_LK_LIST);
    if (!r) return tpl_nomem(c);
    for (size_t i = 0; i < n; i++) r->v[i] = items[n - 1 - i];
    r->n = n;
    *out = tpl_listv(r);
    return BRISK_OK;
}

static brisk_status f_sum(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("sum", "attribute", "start");
    tpl_value acc = arg[1] ? *arg[1] : tpl_int(0);
    const tpl_value *items = NULL;
    size_t n = 0;
    if ((st = tpl_iterate(c, v, &items, &n))) return st;
    if ((st = tpl_charge(c, n))) return st;
    for (size_t i = 0; i < n; i++) {
        tpl_value x = items[i];
        if (arg[0] && arg[0]->type != TPL_NONE && (st = attr_get(c, &items[i], arg[0], &x))) return st;
        if (!tpl_is_num(&acc) || !tpl_is_num(&x))
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "unsupported operand type(s) for +: '%s' and '%s'", tpl_type_name(&acc), tpl_type_name(&x));
        if (acc.type == TPL_FLOAT || x.type == TPL_FLOAT) {
            double p = acc.type == TPL_FLOAT ? acc.u.f : (double)(acc.type == TPL_BOOL ? acc.u.b : acc.u.i);
            double q = x.type == TPL_FLOAT ? x.u.f : (double)(x.type == TPL_BOOL ? x.u.b : x.u.i);
            acc = tpl_float(p + q);
        } else {
            int64_t r;
            if (__builtin_add_overflow(acc.type == TPL_BOOL ? acc.u.b : acc.u.i, x.type == TPL_BOOL ? x.u.b : x.u.i, &r))
                return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "integer beyond 64 bits");
            acc = tpl_int(r);
        }
    }
    *out = acc;
    return BRISK_OK;
}

static brisk_status f_escape(tpl_ctx *c, const tpl_value *v, bool force, tpl_value *out) {
    if (v->type == TPL_STR && (v->flags & TPL_F_MARKUP) && !force) {
        *out = *v;
        return BRISK_OK;
    }
    tpl_str s;
    brisk_status st = tpl_stringify(c, v, &s);
    if (st || (st = tpl_charge(c, s.n / 8))) return st;
    size_t extra = 0;
    for (size_t i = 0; i < s.n; i++) extra += strchr("&<>\"'", s.p[i]) && s.p[i] ? 5 : 0;
    char *d = tpl_alloc(&c->arena, s.n + extra + 1);
    if (!d) return tpl_nomem(c);
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++) {
        const char *r = s.p[i] == '&' ? "&amp;" : s.p[i] == '<' ? "&lt;" : s.p[i] == '>' ? "&gt;"
                        : s.p[i] == '"' ? "&#34;" : s.p[i] == '\'' ? "&#39;" : NULL;
        if (!r) {
            d[k++] = s.p[i];
            continue;
        }
        size_t rl = strlen(r);
        memcpy(d + k, r, rl);
        k += rl;
    }
    d[k] = 0;
    *out = tpl_strv((tpl_str){d, k});
    out->flags = TPL_F_MARKUP;
    return BRISK_OK;
}

/* trim(value, chars=None) == soft_str(value).strip(chars); the str method does the work */
static brisk_status call_str_method(tpl_ctx *c, const char *name, const tpl_value *s, const tpl_args *a, tpl_value *out) {
    tpl_value self = *s;
    int id = tpl_method_find(&self, (tpl_str){name, strlen(name)});
    if (id <= 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "internal: no str method %s", name);
    return tpl_call_method(c, id, &self, a, out);
}

static brisk_status soft_str(tpl_ctx *c, const tpl_value *v, tpl_value *out) {
    if (v->type == TPL_STR) {
        *out = *v;
        return BRISK_OK;
    }
    tpl_str s;
    brisk_status st = tpl_stringify(c, v, &s);
    *out = tpl_strv(s);
    return st;
}

static brisk_status f_replace(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("replace", "old", "new", "count");
    if (!arg[0] || !arg[1]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "do_replace() missing required argument");
    tpl_value s, args3[3];
    tpl_str str, old, new_;
    if ((st = tpl_stringify(c, v, &str)) || (st = tpl_stringify(c, arg[0], &old)) || (st = tpl_stringify(c, arg[1], &new_))) return st;
    s = tpl_strv(str);
    args3[0] = tpl_strv(old);
    args3[1] = tpl_strv(new_);
    args3[2] = arg[2] && arg[2]->type != TPL_NONE ? *arg[2] : tpl_int(-1);
    tpl_args ra = {.pos = args3, .npos = 3};
    return call_str_method(c, "replace", &s, &ra, out);
}

/* format(value, *args, **kwargs) == soft_str(value) % (kwargs or args) */
static brisk_status f_format(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    if (a->npos && a->nkw) return tpl_fail(c, BRISK_ERR_TEMPLATE, "can't handle positional and keyword arguments at the same time");
    if (a->nkw) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "the format filter with keyword arguments");
    tpl_value s;
    if ((st = soft_str(c, v, &s))) return st;
    tpl_list *t = new_list(c, a->npos, TPL_LK_TUPLE);
    if (!t) return tpl_nomem(c);
    if (a->npos) memcpy(t->v, a->pos, a->npos * sizeof *a->pos);
    t->n = a->npos;
    tpl_value tv = tpl_listv(t);
    return tpl_str_mod(c, &s, &tv, out);
}

/* truncate(s, length=255, killwords=False, end='...', leeway=5) */
static brisk_status f_truncate(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("truncate", "length", "killwords", "end", "leeway");
    int64_t length = 255, leeway = 5;
    if (arg[0] && (st = want_int(c, arg[0], "length", &length))) return st;
    if (arg[3] && arg[3]->type != TPL_NONE && (st = want_int(c, arg[3], "leeway", &leeway))) return st;
    tpl_str end = TPL_STR_LIT("...");
    if (arg[2] && (st = tpl_stringify(c, arg[2], &end))) return st;
    if (v->type != TPL_STR) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "truncate of a %s", tpl_type_name(v));
    tpl_str s = v->u.s;
    if ((st = tpl_charge(c, (s.n + end.n) / 8))) return st;
    int64_t endlen = (int64_t)tpl_utf8_len(end), len = (int64_t)tpl_utf8_len(s);
    if (length < endlen) return tpl_fail(c, BRISK_ERR_TEMPLATE, "expected length >= %lld, got %lld", (long long)endlen, (long long)length);
    if (leeway < 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "expected leeway >= 0, got %lld", (long long)leeway);
    if (len <= length + leeway) {
        *out = *v;
        return BRISK_OK;
    }
    tpl_str head = {s.p, tpl_utf8_offset(s, (size_t)(length - endlen))};
    if (!(arg[1] && tpl_truthy(arg[1]))) {   /* .rsplit(" ", 1)[0] */
        const char *sp = NULL;
        for (size_t i = head.n; i-- > 0;)
            if (head.p[i] == ' ') { sp = head.p + i; break; }
        if (sp) head.n = (size_t)(sp - head.p);
    }
    tpl_str r = tpl_str_cat(&c->arena, head, end);
    if (!r.p) return tpl_nomem(c);
    *out = tpl_strv(r);
    if (v->flags & TPL_F_MARKUP) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "truncate of a Markup string");
    return BRISK_OK;
}

static brisk_status f_center(tpl_ctx *c, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("center", "width");
    tpl_value s, w = arg[0] ? *arg[0] : tpl_int(80);
    if ((st = soft_str(c, v, &s))) return st;
    tpl_args ra = {.pos = &w, .npos = 1};
    return call_str_method(c, "center", &s, &ra, out);
}

/* ---- globals ------------------------------------------------------------------------------------------- */

static brisk_status g_range(tpl_ctx *c, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    if (a->nkw) return tpl_fail(c, BRISK_ERR_TEMPLATE, "range() takes no keyword arguments");
    if (a->npos < 1 || a->npos > 3) return tpl_fail(c, BRISK_ERR_TEMPLATE, "range expected at most 3 arguments, got %zu", a->npos);
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < a->npos; i++)
        if ((st = want_int(c, &a->pos[i], "range", &v[i]))) return st;
    int64_t start = a->npos == 1 ? 0 : v[0], stop = a->npos == 1 ? v[0] : v[1], stepv = a->npos == 3 ? v[2] : 1;
    if (stepv == 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "range() arg 3 must not be zero");
    int64_t n = 0;
    if (stepv > 0 && start < stop) n = (int64_t)(((__int128)stop - start - 1) / stepv + 1);
    else if (stepv < 0 && stop < start) n = (int64_t)(((__int128)start - stop - 1) / (-(__int128)stepv) + 1);
    if (n > 100000)
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    tpl_list *l = new_list(c, (size_t)n, TPL_LK_RANGE);
    if (!l) return tpl_nomem(c);
    for (int64_t i = 0; i < n; i++) l->v[i] = tpl_int(start + i * stepv);
    l->n = (size_t)n;
    l->r_start = start;
    l->r_stop = stop;
    l->r_step = stepv;
    *out = tpl_listv(l);
    return BRISK_OK;
}

/* dict(*args, **kwargs) / namespace(...) */
static brisk_status g_dict(tpl_ctx *c, const tpl_args *a, bool ns, tpl_value *out) {
    brisk_status st;
    const char *fname = ns ? "namespace" : "dict";
    if (a->npos > 1) return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s expected at most 1 argument, got %zu", fname, a->npos);
    tpl_dict *d = tpl_dict_new(&c->arena, a->nkw);
    if (!d) return tpl_nomem(c);
    if (a->npos == 1) {
        const tpl_value *src = &a->pos[0];
        if (src->type == TPL_DICT || src->type == TPL_NS) {
            if ((st = tpl_charge(c, src->u.dict->n))) return st;
            tpl_dict *copy = tpl_dict_copy(&c->arena, src->u.dict);
            if (!copy) return tpl_nomem(c);
            d = copy;
        } else {
            const tpl_value *items = NULL;
            size_t n = 0;
            if ((st = tpl_iterate(c, src, &items, &n))) return st;
            for (size_t i = 0; i < n; i++) {
                const tpl_value *pair;
                size_t pn;
                if (items[i].type != TPL_LIST && items[i].type != TPL_STR)
                    return tpl_fail(c, BRISK_ERR_TEMPLATE, "cannot convert dictionary update sequence element #%zu to a sequence", i);
                if ((st = tpl_iterate(c, &items[i], &pair, &pn))) return st;
                if (pn != 2)
                    return tpl_fail(c, BRISK_ERR_TEMPLATE, "dictionary update sequence element #%zu has length %zu; 2 is required", i, pn);
                if ((st = tpl_dict_insert(c, d, pair[0], pair[1]))) return st;
            }
        }
    }
    for (size_t k = 0; k < a->nkw; k++)
        if (!tpl_dict_puts(&c->arena, d, a->kwnames[k], a->kw[k])) return tpl_nomem(c);
    *out = tpl_dictv(d);
    if (ns) out->type = TPL_NS;
    return BRISK_OK;
}

static brisk_status g_strftime(tpl_ctx *c, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    BIND("strftime_now", "format");
    if (!arg[0]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "strftime_now() missing 1 required positional argument: 'format'");
    if (arg[0]->type != TPL_STR)
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "strftime() argument 1 must be str, not %s", tpl_type_name(arg[0]));
    struct tm tm;
    time_t now = c->now;
    if (!localtime_r(&now, &tm)) return tpl_fail(c, BRISK_ERR_TEMPLATE, "strftime_now: bad clock");
    /* datetime.strftime: %f, %z, %Z are expanded by Python (naive datetime: %z, %Z empty) */
    tpl_buf fmt = {.limit = 4096};
    tpl_str f = arg[0]->u.s;
    for (size_t i = 0; i < f.n; i++) {
        if (f.p[i] == '%' && i + 1 < f.n) {
            char k = f.p[i + 1];
            if (k == 'f') { tpl_buf_puts(&fmt, "000000"); i++; continue; }
            if (k == 'z' || k == 'Z') { i++; continue; }
            tpl_buf_putc(&fmt, '%');
            tpl_buf_putc(&fmt, k);
            i++;
            continue;
        }
        if (f.p[i] == 0) {
            tpl_buf_free(&fmt);
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "embedded null character");
        }
        tpl_buf_putc(&fmt, f.p[i]);
    }
    if (fmt.over) {
        tpl_buf_free(&fmt);
        return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "strftime format longer than 4096 bytes");
    }
    char res[8192];
    size_t n = fmt.p ? strftime(res, sizeof res, fmt.p, &tm) : 0;
    tpl_buf_free(&fmt);
    tpl_str r = tpl_str_dup(&c->arena, res, n);
    if (!r.p) return tpl_nomem(c);
    *out = tpl_strv(r);
    return BRISK_OK;
}

/* ---- dispatch ---------------------------------------------------------------------------------------------- */

static brisk_status call_filter(tpl_ctx *c, int id, const tpl_value *v, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    int64_t n = 0;
    switch (id) {
    case FI_DEFAULT: return f_default(c, v, a, out);
    case FI_TOJSON: return f_tojson(c, v, a, out);
    case FI_JOIN: return f_join(c, v, a, out);
    case FI_INDENT: return f_indent(c, v, a, out);
    case FI_INT: return f_int(c, v, a, out);
    case FI_FLOAT: return f_float(c, v, a, out);
    case FI_ROUND: return f_round(c, v, a, out);
    case FI_DICTSORT: return f_dictsort(c, v, a, out);
    case FI_SORT: return f_sort(c, v, a, out);
    case FI_MAX: return f_minmax(c, v, a, true, out);
    case FI_MIN: return f_minmax(c, v, a, false, out);
    case FI_MAP: return f_map(c, v, a, out);
    case FI_SELECT: return f_select(c, v, a, false, false, out);
    case FI_REJECT: return f_select(c, v, a, false, true, out);
    case FI_SELECTATTR: return f_select(c, v, a, true, false, out);
    case FI_REJECTATTR: return f_select(c, v, a, true, true, out);
    case FI_UNIQUE: return f_unique(c, v, a, out);
    case FI_SUM: return f_sum(c, v, a, out);
    case FI_REPLACE: return f_replace(c, v, a, out);
    case FI_CENTER: return f_center(c, v, a, out);
    case FI_FORMAT: return f_format(c, v, a, out);
    case FI_TRUNCATE: return f_truncate(c, v, a, out);
    default: break;
    }
    /* filters without parameters */
    switch (id) {
    case FI_TRIM: {
        tpl_value s;
        if ((st = soft_str(c, v, &s))) return st;
        return call_str_method(c, "strip", &s, a, out);
    }
    case FI_ATTR: {
        static const char *const p[] = {"name"};
        const tpl_value *arg[1];
        if ((st = tpl_bind(c, "attr", p, 1, a, arg))) return st;
        if (!arg[0]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "do_attr() missing 1 required positional argument: 'name'");
        if (arg[0]->type != TPL_STR) return tpl_make_undef_hint(c, out, "attribute name must be a string");
        if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);
        if (v->type == TPL_NS || v->type == TPL_LOOP) return tpl_getattr(c, v, arg[0]->u.s, out);
        if (v->type == TPL_DICT || v->type == TPL_STR || v->type == TPL_LIST) {
            int m = tpl_method_find(v, arg[0]->u.s);
            if (m > 0) {
                tpl_value *self = tpl_alloc(&c->arena, sizeof *self);
                if (!self) return tpl_nomem(c);
                *self = *v;
                *out = tpl_undef();
                out->type = TPL_FUNC;
                out->fn = (uint16_t)m;
                out->u.self = self;
                return BRISK_OK;
            }
            if (m == -1) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "attr() of a %s method", tpl_type_name(v));
        }
        return tpl_make_undef_hint(c, out, "'%s object' has no attribute '%.*s'", tpl_type_name(v), (int)arg[0]->u.s.n, arg[0]->u.s.p);
    }
    default: break;
    }
    if ((st = no_args(c, tpl_builtin_name(id), a))) return st;
    switch (id) {
    case FI_ABS:
        if (v->type == TPL_INT) {
            if (v->u.i == INT64_MIN) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "integer beyond 64 bits");
            *out = tpl_int(v->u.i < 0 ? -v->u.i : v->u.i);
        } else if (v->type == TPL_BOOL) *out = tpl_int(v->u.b);
        else if (v->type == TPL_FLOAT) *out = tpl_float(fabs(v->u.f));
        else if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);
        else return tpl_fail(c, BRISK_ERR_TEMPLATE, "bad operand type for abs(): '%s'", tpl_type_name(v));
        return BRISK_OK;
    case FI_COUNT: case FI_LENGTH:
        if ((st = len_of(c, v, &n))) return st;
        *out = tpl_int(n);
        return BRISK_OK;
    case FI_FIRST: return f_first_last(c, v, false, out);
    case FI_LAST: return f_first_last(c, v, true, out);
    case FI_ITEMS: return f_items(c, v, out);
    case FI_LIST: {
        const tpl_value *items = NULL;
        size_t cnt = 0;
        if ((st = tpl_iterate(c, v, &items, &cnt)) || (st = tpl_charge(c, cnt))) return st;
        tpl_list *l = new_list(c, cnt, TPL_LK_LIST);
        if (!l) return tpl_nomem(c);
        if (cnt) memcpy(l->v, items, cnt * sizeof *items);
        l->n = cnt;
        *out = tpl_listv(l);
        return BRISK_OK;
    }
    case FI_REVERSE: return f_reverse(c, v, out);
    case FI_SAFE: {
        tpl_value s;
        if ((st = soft_str(c, v, &s))) return st;
        *out = s;
        out->flags = TPL_F_MARKUP;
        return BRISK_OK;
    }
    case FI_ESCAPE: return f_escape(c, v, false, out);
    case FI_FORCEESCAPE: return f_escape(c, v, true, out);
    case FI_STRING: return soft_str(c, v, out);
    case FI_LOWER: case FI_UPPER: case FI_CAPITALIZE: case FI_TITLE: {
        tpl_value s;
        if ((st = soft_str(c, v, &s))) return st;
        tpl_str r;
        tpl_case mode = id == FI_LOWER ? TPL_CASE_LOWER : id == FI_UPPER ? TPL_CASE_UPPER
                        : id == FI_CAPITALIZE ? TPL_CASE_CAPITALIZE : TPL_CASE_TITLE;
        if (id == FI_TITLE) {
            /* jinja2's do_title: split on ([-\s({\[<]+), then word[0].upper() + word[1:].lower() */
            tpl_buf b = {.limit = c->max_output};
            size_t i = 0;
            while (i < s.u.s.n) {
                size_t j = i;
                bool sep_run = false;
                for (;;) {
                    if (j >= s.u.s.n) break;
                    size_t k = j;
                    uint32_t cp = tpl_utf8_next(s.u.s.p, s.u.s.n, &k);
                    bool is_sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || tpl_is_space(cp);
                    if (j == i) sep_run = is_sep;
                    else if (is_sep != sep_run) break;
                    j = k;
                }
                tpl_str part = {s.u.s.p + i, j - i};
                if (sep_run) {
                    tpl_buf_put(&b, part.p, part.n);
                } else {
                    size_t k = 0;
                    tpl_utf8_next(part.p, part.n, &k);
                    tpl_str up, low;
                    if ((st = tpl_str_case(c, (tpl_str){part.p, k}, TPL_CASE_UPPER, &up)) ||
                        (st = tpl_str_case(c, (tpl_str){part.p + k, part.n - k}, TPL_CASE_LOWER, &low))) {
                        tpl_buf_free(&b);
                        return st;
                    }
                    tpl_buf_put(&b, up.p, up.n);
                    tpl_buf_put(&b, low.p, low.n);
                }
                i = j;
            }
            r = tpl_str_dup(&c->arena, b.p ? b.p : "", b.n);
            bool over = b.over;
            tpl_buf_free(&b);
            if (over || !r.p) return tpl_nomem(c);
        } else if ((st = tpl_str_case(c, s.u.s, mode, &r))) {
            return st;
        }
        *out = tpl_strv(r);
        /* do_title joins with "".join: a plain str even for Markup input */
        out->flags = id == FI_TITLE ? 0 : s.flags & TPL_F_MARKUP;
        return BRISK_OK;
    }
    default: break;
    }
    return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "the '%s' filter", tpl_builtin_name(id));
}

static brisk_status call_global(tpl_ctx *c, int id, const tpl_args *a, tpl_value *out) {
    brisk_status st;
    switch (id) {
    case TPL_G_RANGE: return g_range(c, a, out);
    case TPL_G_NAMESPACE: return g_dict(c, a, true, out);
    case TPL_G_DICT: return g_dict(c, a, false, out);
    case TPL_G_STRFTIME: return g_strftime(c, a, out);
    case TPL_G_RAISE: {
        BIND("raise_exception", "message");
        if (!arg[0]) return tpl_fail(c, BRISK_ERR_TEMPLATE, "raise_exception() missing 1 required positional argument: 'message'");
        tpl_str m;
        if (arg[0]->type == TPL_UNDEF) m = (tpl_str){"", 0};   /* str(Undefined) */
        else if ((st = tpl_stringify(c, arg[0], &m))) return st;
        return brisk_fail(c->err, BRISK_ERR_TEMPLATE, "%.*s", (int)(m.n > 510 ? 510 : m.n), m.p);
    }
    default: break;
    }
    return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "the global function %s()", tpl_builtin_name(id));
}

brisk_status tpl_call_builtin(tpl_ctx *c, int id, const tpl_value *self, const tpl_args *a, tpl_value *out) {
    if (id >= TPL_ID_METHOD) return tpl_call_method(c, id, self, a, out);
    if (id >= TPL_ID_TEST) {
        bool r;
        brisk_status st = tpl_run_test(c, id, self, a, &r);
        *out = tpl_bool(r);
        return st;
    }
    if (id >= TPL_ID_FILTER) return call_filter(c, id, self, a, out);
    return call_global(c, id, a, out);
}
