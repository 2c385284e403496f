/* pyops: Python's operations on template values, as jinja2's sandbox
 * applies them: iteration, attribute and item access (a dict's methods shadow
 * its keys for `.name`, not for `['name']`; blocked mutators), slices,
 * `in`, and arithmetic with Python's int/float/str/list semantics, including
 * markupsafe's escaping when a Markup meets a plain string. */
#include "template/tpl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jinja2's undefined(obj=obj, name=name) message */
static brisk_status undef_attr(tpl_ctx *c, const tpl_value *obj, tpl_str name, tpl_value *out) {
    char desc[64], rn[200];
    tpl_object_desc(obj, desc, sizeof desc);
    tpl_repr_name(name, rn, sizeof rn);
    return tpl_make_undef_hint(c, out, "'%s' has no attribute %s", desc, rn);
}

static brisk_status undef_elem(tpl_ctx *c, const tpl_value *obj, const tpl_value *key, tpl_value *out) {
    char desc[64];
    tpl_object_desc(obj, desc, sizeof desc);
    tpl_buf b = {.limit = 200};
    char msg[64];
    tpl_repr(&b, key, msg, sizeof msg);
    brisk_status st = tpl_make_undef_hint(c, out, "%s has no element %s", desc, b.p ? b.p : "?");
    tpl_buf_free(&b);
    return st;
}

/* ---- iteration and indexing -------------------------------------------------------------------- */

brisk_status tpl_iterate(tpl_ctx *c, const tpl_value *v, const tpl_value **items, size_t *n) {
    switch ((tpl_type)v->type) {
    case TPL_UNDEF:
        *items = NULL;
        *n = 0;
        return BRISK_OK;
    case TPL_LIST: {
        tpl_list *l = v->u.list;
        if (l->kind == TPL_LK_GEN) {
            if (l->consumed) {
                *items = NULL;
                *n = 0;
                return BRISK_OK;
            }
            l->consumed = true;
        }
        *items = l->v;
        *n = l->n;
        return BRISK_OK;
    }
    case TPL_DICT:
        *items = v->u.dict->k;
        *n = v->u.dict->n;
        return BRISK_OK;
    case TPL_STR: {
        tpl_str s = v->u.s;
        brisk_status st = tpl_charge(c, s.n / 8);   /* plus the array, charged as memory */
        if (st) return st;
        size_t cnt = tpl_utf8_len(s);
        tpl_value *arr = tpl_alloc_array(&c->arena, cnt ? cnt : 1, sizeof *arr);
        if (!arr) return tpl_nomem(c);
        size_t k = 0;
        for (size_t i = 0; i < s.n;) {
            size_t start = i;
            tpl_utf8_next(s.p, s.n, &i);
            arr[k++] = tpl_strv((tpl_str){s.p + start, i - start});   /* iterating a Markup yields plain str */
        }
        *items = arr;
        *n = k;
        return BRISK_OK;
    }
    default:
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "'%s' object is not iterable", tpl_type_name(v));
    }
}

static brisk_status bound_method(tpl_ctx *c, const tpl_value *obj, int id, tpl_value *out) {
    tpl_value *self = tpl_alloc(&c->arena, sizeof *self);
    if (!self) return tpl_nomem(c);
    *self = *obj;
    *out = tpl_undef();
    out->type = TPL_FUNC;
    out->fn = (uint16_t)id;
    out->u.self = self;
    return BRISK_OK;
}

/* Python attribute lookup (methods), or -1 when there is none. */
static brisk_status py_attr(tpl_ctx *c, const tpl_value *obj, tpl_str name, tpl_value *out, bool *found) {
    *found = false;
    int id = tpl_method_find(obj, name);
    if (id == 0) return BRISK_OK;
    *found = true;
    if (id == -1)
        return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "the %s method '%.*s'", tpl_type_name(obj), (int)name.n, name.p);
    if (id == -2) {
        char rn[200];
        tpl_repr_name(name, rn, sizeof rn);
        brisk_status st = tpl_make_undef_hint(c, out, "access to attribute %s of '%s' object is unsafe.", rn, tpl_type_name(obj));
        out->flags |= TPL_F_UNSAFE;
        return st;
    }
    return bound_method(c, obj, id, out);
}

static brisk_status loop_attr(tpl_ctx *c, const tpl_value *obj, tpl_str name, tpl_value *out, bool *found) {
    const tpl_loop *l = obj->u.loop;
    *found = true;
    int64_t i = (int64_t)l->i, n = (int64_t)l->n;
    if (tpl_str_eqc(name, "index")) *out = tpl_int(i + 1);
    else if (tpl_str_eqc(name, "index0")) *out = tpl_int(i);
    else if (tpl_str_eqc(name, "revindex")) *out = tpl_int(n - i);
    else if (tpl_str_eqc(name, "revindex0")) *out = tpl_int(n - i - 1);
    else if (tpl_str_eqc(name, "first")) *out = tpl_bool(i == 0);
    else if (tpl_str_eqc(name, "last")) *out = tpl_bool(i == n - 1);
    else if (tpl_str_eqc(name, "length")) *out = tpl_int(n);
    else if (tpl_str_eqc(name, "depth")) *out = tpl_int(l->depth);
    else if (tpl_str_eqc(name, "depth0")) *out = tpl_int(l->depth - 1);
    else if (tpl_str_eqc(name, "previtem")) {
        if (i > 0) *out = l->items[i - 1];
        else return tpl_make_undef_hint(c, out, "there is no previous item");
    } else if (tpl_str_eqc(name, "nextitem")) {
        if (i + 1 < n) *out = l->items[i + 1];
        else return tpl_make_undef_hint(c, out, "there is no next item");
    } else if (tpl_str_eqc(name, "cycle") || tpl_str_eqc(name, "changed")) {
        return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "loop.%.*s", (int)name.n, name.p);
    } else {
        *found = false;
    }
    return BRISK_OK;
}

brisk_status tpl_getattr(tpl_ctx *c, const tpl_value *obj, tpl_str name, tpl_value *out) {
    brisk_status st;
    bool found;
    switch ((tpl_type)obj->type) {
    case TPL_UNDEF: return tpl_undef_fail(c, obj);
    case TPL_NS: {
        const tpl_value *v = tpl_dict_gets(obj->u.dict, name);
        if (v) {
            *out = *v;
            return BRISK_OK;
        }
        return undef_attr(c, obj, name, out);
    }
    case TPL_LOOP:
        if ((st = loop_attr(c, obj, name, out, &found)) || found) return st;
        return undef_attr(c, obj, name, out);
    case TPL_MACRO: case TPL_FUNC:
        return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "attributes of a %s", tpl_type_name(obj));
    default: break;
    }
    if (name.n && name.p[0] == '_') {
        /* dunders are unsafe in the sandbox; other private names are plain keys */
        if (obj->type == TPL_DICT) {
            const tpl_value *v = tpl_dict_gets(obj->u.dict, name);
            if (v) {
                *out = *v;
                return BRISK_OK;
            }
        }
        return undef_attr(c, obj, name, out);
    }
    if ((st = py_attr(c, obj, name, out, &found)) || found) return st;
    if (obj->type == TPL_DICT) {
        const tpl_value *v = tpl_dict_gets(obj->u.dict, name);
        if (v) {
            *out = *v;
            return BRISK_OK;
        }
    }
    return undef_attr(c, obj, name, out);
}

/* Python index of a sequence of length n: false when out of range. */
static bool seq_index(int64_t i, size_t n, size_t *out) {
    if (i < 0) i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n) return false;
    *out = (size_t)i;
    return true;
}

static bool is_index(const tpl_value *k, int64_t *i) {
    if (k->type == TPL_INT) { *i = k->u.i; return true; }
    if (k->type == TPL_BOOL) { *i = k->u.b; return true; }
    return false;
}

brisk_status tpl_getitem(tpl_ctx *c, const tpl_value *obj, const tpl_value *key, tpl_value *out) {
    int64_t i;
    size_t idx;
    switch ((tpl_type)obj->type) {
    case TPL_UNDEF: return tpl_undef_fail(c, obj);
    case TPL_DICT: {
        /* an unhashable key is a TypeError that jinja2's getitem turns into undefined */
        uint64_t h;
        tpl_walk w;
        tpl_walk_begin(c, &w);
        int r = tpl_hash(key, &h, &w);
        const tpl_value *v = r > 0 ? tpl_dict_find(obj->u.dict, key, h, &w) : NULL;
        brisk_status st = tpl_walk_end(c, &w, r < 0 ? "hashing" : "comparison");
        if (st) return st;
        if (v) {
            *out = *v;
            return BRISK_OK;
        }
        break;
    }
    case TPL_LIST: {
        const tpl_list *l = obj->u.list;
        bool indexable = l->kind == TPL_LK_LIST || l->kind == TPL_LK_TUPLE || l->kind == TPL_LK_RANGE;
        if (indexable && is_index(key, &i)) {
            if (seq_index(i, l->n, &idx)) {
                *out = l->v[idx];
                return BRISK_OK;
            }
            return undef_elem(c, obj, key, out);
        }
        break;
    }
    case TPL_STR:
        if (is_index(key, &i)) {
            brisk_status st = tpl_charge(c, obj->u.s.n / 8);   /* code points are counted */
            if (st) return st;
            size_t len = tpl_utf8_len(obj->u.s);
            if (!seq_index(i, len, &idx)) return undef_elem(c, obj, key, out);
            size_t a = tpl_utf8_offset(obj->u.s, idx), b = a;
            tpl_utf8_next(obj->u.s.p, obj->u.s.n, &b);
            *out = tpl_strv((tpl_str){obj->u.s.p + a, b - a});
            out->flags = obj->flags & TPL_F_MARKUP;
            return BRISK_OK;
        }
        break;
    default: break;
    }
    if (key->type == TPL_STR) {
        if (obj->type == TPL_DICT) {   /* a method of dict when no such key */
            bool found;
            brisk_status st;
            if (key->u.s.n && key->u.s.p[0] == '_') return undef_attr(c, obj, key->u.s, out);
            if ((st = py_attr(c, obj, key->u.s, out, &found)) || found) return st;
            return undef_attr(c, obj, key->u.s, out);
        }
        return tpl_getattr(c, obj, key->u.s, out);
    }
    return undef_elem(c, obj, key, out);
}

/* Python slice index normalization (PySlice_AdjustIndices). */
static brisk_status slice_arg(tpl_ctx *c, const tpl_value *v, bool *given, int64_t *out) {
    if (v->type == TPL_NONE) {
        *given = false;
        return BRISK_OK;
    }
    if (!is_index(v, out))
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "slice indices must be integers or None or have an __index__ method");
    *given = true;
    return BRISK_OK;
}

brisk_status tpl_slice(tpl_ctx *c, const tpl_value *obj, const tpl_value *sv, const tpl_value *ev,
                             const tpl_value *tv, tpl_value *out) {
    if (obj->type == TPL_UNDEF) return tpl_undef_fail(c, obj);
    bool is_str = obj->type == TPL_STR;
    bool is_seq = obj->type == TPL_LIST && (obj->u.list->kind == TPL_LK_LIST || obj->u.list->kind == TPL_LK_TUPLE ||
                                            obj->u.list->kind == TPL_LK_RANGE);
    if (!is_str && !is_seq) {   /* jinja2 compiles a slice to a plain Python subscript */
        if (obj->type == TPL_DICT) return tpl_fail(c, BRISK_ERR_TEMPLATE, "unhashable type: 'slice'");
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "'%s' object is not subscriptable", tpl_type_name(obj));
    }
    brisk_status st;
    bool hs = false, he = false, ht = false;
    int64_t s = 0, e = 0, t = 1;
    if ((st = slice_arg(c, sv, &hs, &s)) || (st = slice_arg(c, ev, &he, &e)) || (st = slice_arg(c, tv, &ht, &t))) return st;
    if (!ht) t = 1;
    if (t == 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "slice step cannot be zero");
    if (is_str && (st = tpl_charge(c, obj->u.s.n / 8))) return st;
    size_t len = is_str ? tpl_utf8_len(obj->u.s) : obj->u.list->n;
    int64_t n = (int64_t)len;
    if (!hs) s = t < 0 ? n - 1 : 0;
    else if (s < 0) { s += n; if (s < 0) s = t < 0 ? -1 : 0; }
    else if (s >= n) s = t < 0 ? n - 1 : n;
    if (!he) e = t < 0 ? -1 : n;
    else if (e < 0) { e += n; if (e < 0) e = t < 0 ? -1 : 0; }
    else if (e >= n) e = t < 0 ? n - 1 : n;
    size_t count = 0;
    if (t > 0 && s < e) count = (size_t)((e - s - 1) / t + 1);
    else if (t < 0 && e < s) count = (size_t)((s - e - 1) / (-t) + 1);
    if (is_str) {
        tpl_str str = obj->u.s;
        if (t == 1) {
            size_t a = tpl_utf8_offset(str, (size_t)s), b = count ? tpl_utf8_offset(str, (size_t)e) : a;
            *out = tpl_strv((tpl_str){str.p + a, b - a});
        } else {
            /* per code point: collect offsets */
            size_t *offs = malloc((len + 1) * sizeof *offs);
            if (!offs) return tpl_nomem(c);
            size_t k = 0;
            for (size_t i = 0; i < str.n;) {
                offs[k++] = i;
                tpl_utf8_next(str.p, str.n, &i);
            }
            offs[k] = str.n;
            tpl_buf b = {0};
            for (size_t j = 0; j < count; j++) {
                size_t ci = (size_t)(s + (int64_t)j * t);
                tpl_buf_put(&b, str.p + offs[ci], offs[ci + 1] - offs[ci]);
            }
            free(offs);
            tpl_str r = tpl_str_dup(&c->arena, b.p ? b.p : "", b.n);
            bool over = b.over;
            tpl_buf_free(&b);
            if (over || !r.p) return tpl_nomem(c);
            *out = tpl_strv(r);
        }
        out->flags = obj->flags & TPL_F_MARKUP;
        return BRISK_OK;
    }
    if ((st = tpl_charge(c, count))) return st;
    const tpl_list *l = obj->u.list;
    tpl_list *r = tpl_list_new(&c->arena, count, l->kind == TPL_LK_TUPLE ? TPL_LK_TUPLE : TPL_LK_LIST);
    if (!r) return tpl_nomem(c);
    for (size_t j = 0; j < count; j++) r->v[j] = l->v[s + (int64_t)j * t];
    r->n = count;
    if (l->kind == TPL_LK_RANGE) {
        r->kind = TPL_LK_RANGE;
        r->r_step = l->r_step * t;
        r->r_start = count ? r->v[0].u.i : l->r_start;
        r->r_stop = count ? r->v[count - 1].u.i + r->r_step : r->r_start;
    }
    *out = tpl_listv(r);
    return BRISK_OK;
}

/* `item in container` */
brisk_status tpl_contains(tpl_ctx *c, const tpl_value *item, const tpl_value *cont, bool *out) {
    switch ((tpl_type)cont->type) {
    case TPL_UNDEF: *out = false; return BRISK_OK;
    case TPL_STR:
        if (item->type != TPL_STR)
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "'in <string>' requires string as left operand, not %s", tpl_type_name(item));
    {
        /* memmem (glibc's two-way search) is linear in the haystack */
        brisk_status st = tpl_charge(c, 1 + cont->u.s.n / 64);
        if (st) return st;
        *out = item->u.s.n == 0 || (cont->u.s.n >= item->u.s.n && memmem(cont->u.s.p, cont->u.s.n, item->u.s.p, item->u.s.n));
        return BRISK_OK;
    }
    case TPL_DICT: {
        const tpl_value *v;
        brisk_status st = tpl_dict_lookup(c, cont->u.dict, item, &v);
        *out = !st && v;
        return st;
    }
    case TPL_LIST: {
        /* a list scan, as Python's; each comparison is charged by the walk */
        const tpl_value *items = NULL;
        size_t n = 0;
        brisk_status st = tpl_iterate(c, cont, &items, &n);
        if (st) return st;
        tpl_walk w;
        tpl_walk_begin(c, &w);
        *out = false;
        for (size_t i = 0; i < n && !*out && !w.fail; i++)
            if (tpl_walk_charge(&w, 1)) *out = tpl_eq(&items[i], item, &w, 0);
        return tpl_walk_end(c, &w, "comparison");
    }
    default:
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "argument of type '%s' is not iterable", tpl_type_name(cont));
    }
}

/* ---- arithmetic ----------------------------------------------------------------------------------- */

static const char *const binop_sym[] = {"+", "-", "*", "/", "//", "%", "**"};

static brisk_status type_error_op(tpl_ctx *c, int op, const tpl_value *a, const tpl_value *b) {
    return tpl_fail(c, BRISK_ERR_TEMPLATE, "unsupported operand type(s) for %s: '%s' and '%s'", binop_sym[op],
                    tpl_type_name(a), tpl_type_name(b));
}

static brisk_status int_overflow(tpl_ctx *c) {
    return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "integer result beyond 64 bits (Python would use a big integer)");
}

/* markupsafe.escape of a str */
static brisk_status markup_escape(tpl_ctx *c, tpl_str s, tpl_str *out) {
    size_t extra = 0;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        extra += ch == '&' ? 4 : ch == '<' || ch == '>' ? 3 : ch == '"' || ch == '\'' ? 4 : 0;
    }
    if (!extra) {
        *out = s;
        return BRISK_OK;
    }
    char *d = tpl_alloc(&c->arena, s.n + extra + 1);
    if (!d) return tpl_nomem(c);
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++) {
        const char *r = NULL;
        switch (s.p[i]) {
        case '&': r = "&amp;"; break;
        case '<': r = "&lt;"; break;
        case '>': r = "&gt;"; break;
        case '"': r = "&#34;"; break;
        case '\'': r = "&#39;"; break;
        default: d[k++] = s.p[i]; continue;
        }
        size_t rl = strlen(r);
        memcpy(d + k, r, rl);
        k += rl;
    }
    d[k] = 0;
    *out = (tpl_str){d, k};
    return BRISK_OK;
}

/* Growable strings: templates build prompts with `{% set ns.out = ns.out ~ x %}`
 * in a loop. Copying the whole string each time is what jinja2 does too, but
 * every copy would stay in the arena until the render ends, so memory would
 * grow with the square of the prompt. A long concatenation result is instead
 * put in a block with spare room; a string that ends exactly at the block's
 * high-water mark (`used`) may append in place (older values keep their own
 * shorter length and never see the new bytes), anything else copies. */
typedef struct grow_hdr {
    size_t cap;    /* data bytes available (excluding the NUL) */
    size_t used;   /* bytes claimed by the longest string in the block */
} grow_hdr;

#define TPL_GROW_MIN 256

brisk_status tpl_str_append(tpl_ctx *c, tpl_value *acc, tpl_str add) {
    tpl_str s = acc->u.s;
    if (add.n == 0) return BRISK_OK;
    brisk_status st = tpl_charge(c, 1 + add.n / 64);
    if (st) return st;
    if (acc->flags & TPL_F_GROW) {
        grow_hdr *h = (grow_hdr *)(void *)((char *)(uintptr_t)s.p - sizeof(grow_hdr));
        if (h->used == s.n && h->cap - s.n >= add.n) {
            char *d = (char *)(uintptr_t)s.p;
            memcpy(d + s.n, add.p, add.n);
            s.n += add.n;
            d[s.n] = 0;
            h->used = s.n;
            acc->u.s = s;
            return BRISK_OK;
        }
    }
    size_t n;
    if (!brisk_add_size(s.n, add.n, &n)) return tpl_nomem(c);
    if ((st = tpl_charge(c, s.n / 64))) return st;   /* the copy */
    if (n < TPL_GROW_MIN) {
        /* add may be a scratch buffer: always copy (tpl_str_cat would return add itself for an empty s) */
        tpl_str r = s.n ? tpl_str_cat(&c->arena, s, add) : tpl_str_dup(&c->arena, add.p, add.n);
        if (!r.p) return tpl_nomem(c);
        *acc = tpl_strv(r);
        return BRISK_OK;
    }
    size_t cap = n > ((size_t)1 << 40) ? n : 2 * n;
    grow_hdr *h = tpl_alloc(&c->arena, sizeof *h + cap + 1);
    if (!h) return tpl_nomem(c);
    char *d = (char *)(h + 1);
    memcpy(d, s.p, s.n);
    memcpy(d + s.n, add.p, add.n);
    d[n] = 0;
    h->cap = cap;
    h->used = n;
    *acc = tpl_strv((tpl_str){d, n});
    acc->flags = TPL_F_GROW;
    return BRISK_OK;
}

static brisk_status repeat(tpl_ctx *c, const tpl_value *seq, int64_t times, tpl_value *out) {
    if (times < 0) times = 0;
    if (seq->type == TPL_STR) {
        size_t total;
        if (!brisk_mul_size(seq->u.s.n, (size_t)times, &total) || total > c->max_output) return tpl_nomem(c);
        brisk_status st = tpl_charge(c, total / 64 + (uint64_t)times / 16);
        if (st) return st;
        char *d = tpl_alloc(&c->arena, total + 1);
        if (!d) return tpl_nomem(c);
        for (int64_t i = 0; i < times; i++) memcpy(d + (size_t)i * seq->u.s.n, seq->u.s.p, seq->u.s.n);
        d[total] = 0;
        *out = tpl_strv((tpl_str){d, total});
        out->flags = seq->flags & TPL_F_MARKUP;
        return BRISK_OK;
    }
    const tpl_list *l = seq->u.list;
    size_t total;
    if (!brisk_mul_size(l->n, (size_t)times, &total) || total > ((size_t)1 << 26)) return tpl_nomem(c);
    brisk_status st = tpl_charge(c, total);
    if (st) return st;
    tpl_list *r = tpl_list_new(&c->arena, total, (tpl_list_kind)l->kind);
    if (!r) return tpl_nomem(c);
    for (size_t i = 0; i < total; i++) r->v[i] = l->v[i % l->n];
    r->n = total;
    *out = tpl_listv(r);
    return BRISK_OK;
}

static double py_fmod(double a, double b) {
    double m = fmod(a, b);
    if (m != 0 && ((b < 0) != (m < 0))) m += b;
    else if (m == 0) m = copysign(0.0, b);
    return m;
}

brisk_status tpl_arith(tpl_ctx *c, int op, const tpl_value *a, const tpl_value *b, tpl_value *out) {
    if (op == TPL_OP_MOD && a->type == TPL_STR) return tpl_str_mod(c, a, b, out);
    if (a->type == TPL_UNDEF) return tpl_undef_fail(c, a);
    if (b->type == TPL_UNDEF) return tpl_undef_fail(c, b);
    brisk_status st;
    if (tpl_is_num(a) && tpl_is_num(b)) {
        bool fl = a->type == TPL_FLOAT || b->type == TPL_FLOAT;
        int64_t x = a->type == TPL_BOOL ? a->u.b : a->u.i, y = b->type == TPL_BOOL ? b->u.b : b->u.i;
        double fx = a->type == TPL_FLOAT ? a->u.f : (double)x, fy = b->type == TPL_FLOAT ? b->u.f : (double)y;
        int64_t r;
        switch (op) {
        case TPL_OP_ADD:
            if (fl) { *out = tpl_float(fx + fy); return BRISK_OK; }
            if (__builtin_add_overflow(x, y, &r)) return int_overflow(c);
            *out = tpl_int(r);
            return BRISK_OK;
        case TPL_OP_SUB:
            if (fl) { *out = tpl_float(fx - fy); return BRISK_OK; }
            if (__builtin_sub_overflow(x, y, &r)) return int_overflow(c);
            *out = tpl_int(r);
            return BRISK_OK;
        case TPL_OP_MUL:
            if (fl) { *out = tpl_float(fx * fy); return BRISK_OK; }
            if (__builtin_mul_overflow(x, y, &r)) return int_overflow(c);
            *out = tpl_int(r);
            return BRISK_OK;
        case TPL_OP_DIV:
            if (fy == 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, fl ? "float division by zero" : "division by zero");
            if (!fl && (llabs(x) > (1LL << 53) || llabs(y) > (1LL << 53)))
                return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "true division of integers beyond 2**53");
            *out = tpl_float(fx / fy);
            return BRISK_OK;
        case TPL_OP_FLOORDIV: case TPL_OP_MOD:
            if (fl) {
                if (fy == 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, op == TPL_OP_MOD ? "float modulo" : "float floor division by zero");
                double m = py_fmod(fx, fy);
                if (op == TPL_OP_MOD) { *out = tpl_float(m); return BRISK_OK; }
                double d = (fx - m) / fy;
                double fd = floor(d);
                if (d - fd > 0.5) fd += 1.0;
                if (d == 0) fd = copysign(0.0, fx / fy);
                *out = tpl_float(fd);
                return BRISK_OK;
            }
            if (y == 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) return int_overflow(c);
            r = x / y;
            int64_t m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) { r -= 1; m += y; }
            *out = tpl_int(op == TPL_OP_MOD ? m : r);
            return BRISK_OK;
        case TPL_OP_POW:
            if (!fl && y >= 0) {
                int64_t acc = 1, base = x;
                for (int64_t e = y; e > 0; e >>= 1) {
                    if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) return int_overflow(c);
                    if (e > 1 && __builtin_mul_overflow(base, base, &base)) return int_overflow(c);
                }
                *out = tpl_int(acc);
                return BRISK_OK;
            }
            if (fx == 0 && fy < 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "0.0 cannot be raised to a negative power");
            if (fx < 0 && fy != floor(fy)) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "a negative number to a fractional power (complex result)");
            *out = tpl_float(pow(fx, fy));
            if (isinf(out->u.f) && !isinf(fx) && !isinf(fy)) return tpl_fail(c, BRISK_ERR_TEMPLATE, "(34, 'Numerical result out of range')");
            return BRISK_OK;
        }
    }
    if (op == TPL_OP_ADD) {
        if (a->type == TPL_STR && b->type == TPL_STR) {
            tpl_str x = a->u.s, y = b->u.s;
            bool markup = (a->flags | b->flags) & TPL_F_MARKUP;
            if (markup) {   /* Markup + str escapes the plain side */
                if (!(a->flags & TPL_F_MARKUP) && (st = markup_escape(c, x, &x))) return st;
                if (!(b->flags & TPL_F_MARKUP) && (st = markup_escape(c, y, &y))) return st;
            }
            if (!markup) {
                *out = *a;
                return tpl_str_append(c, out, y);
            }
            tpl_str r = tpl_str_cat(&c->arena, x, y);
            if (!r.p) return tpl_nomem(c);
            *out = tpl_strv(r);
            out->flags = TPL_F_MARKUP;
            return BRISK_OK;
        }
        if (a->type == TPL_LIST && b->type == TPL_LIST && a->u.list->kind == b->u.list->kind &&
            (a->u.list->kind == TPL_LK_LIST || a->u.list->kind == TPL_LK_TUPLE)) {
            const tpl_list *x = a->u.list, *y = b->u.list;
            if ((st = tpl_charge(c, x->n + y->n))) return st;
            tpl_list *r = tpl_list_new(&c->arena, x->n + y->n, (tpl_list_kind)x->kind);
            if (!r) return tpl_nomem(c);
            if (x->n) memcpy(r->v, x->v, x->n * sizeof(tpl_value));
            if (y->n) memcpy(r->v + x->n, y->v, y->n * sizeof(tpl_value));
            r->n = x->n + y->n;
            *out = tpl_listv(r);
            return BRISK_OK;
        }
        if (a->type == TPL_STR && !(a->flags & TPL_F_MARKUP))
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "can only concatenate str (not \"%s\") to str", tpl_type_name(b));
        if (a->type == TPL_LIST && (a->u.list->kind == TPL_LK_LIST || a->u.list->kind == TPL_LK_TUPLE))
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "can only concatenate %s (not \"%s\") to %s", tpl_type_name(a),
                            tpl_type_name(b), tpl_type_name(a));
        return type_error_op(c, op, a, b);
    }
    if (op == TPL_OP_MUL) {
        const tpl_value *seq = NULL, *cnt = NULL;
        if (a->type == TPL_STR || (a->type == TPL_LIST && (a->u.list->kind == TPL_LK_LIST || a->u.list->kind == TPL_LK_TUPLE)))
            seq = a, cnt = b;
        else if (b->type == TPL_STR || (b->type == TPL_LIST && (b->u.list->kind == TPL_LK_LIST || b->u.list->kind == TPL_LK_TUPLE)))
            seq = b, cnt = a;
        if (seq && (cnt->type == TPL_INT || cnt->type == TPL_BOOL))
            return repeat(c, seq, cnt->type == TPL_BOOL ? cnt->u.b : cnt->u.i, out);
        if (seq && cnt->type != TPL_UNDEF)
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "can't multiply sequence by non-int of type '%s'", tpl_type_name(cnt));
    }
    if (op == TPL_OP_MOD && a->type == TPL_STR) return tpl_str_mod(c, a, b, out);
    return type_error_op(c, op, a, b);
}

