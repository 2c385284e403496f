/* render: the evaluator (statements, expressions, scopes, macros, loops) and
 * the public API of template.h.
 *
 * Scopes follow jinja2's frames: the template top level is one scope; each
 * for-loop iteration, macro call, set/filter block body, with and generation
 * block gets a fresh child scope; `if` does not. Names resolve through the
 * chain at the time they are read (a macro sees its defining scope's current
 * values, as Python closures do). Namespaces are the only way to carry a value
 * out of a loop, exactly as in jinja2.
 *
 * Every evaluation step is counted and capped, as are call depth, output size
 * and arena memory, so no template can hang or exhaust the process. */
#include "template/tpl.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TPL_DEFAULT_MAX_OUTPUT ((size_t)64 << 20)
#define TPL_DEFAULT_MAX_MEMORY ((size_t)512 << 20)
#define TPL_DEFAULT_MAX_WORK ((uint64_t)50000000)
#define TPL_DEFAULT_MAX_DEPTH 200
#define TPL_MAX_SOURCE (4u << 20)
/* Nested eval/exec frames: an expression nested TPL_MAX_NEST deep in the parser,
 * or max_depth macro calls, each take a few. This bounds the C stack (under
 * ASan ~0.3 KiB a frame). */
#define TPL_MAX_RDEPTH (4 * TPL_MAX_NEST)

enum { TPL_BREAK = 1, TPL_CONTINUE = 2 };

struct tpl_scope {
    tpl_scope *parent;
    uint32_t n, cap;
    uint32_t *sym;
    tpl_value *val;
};

/* ---- errors ---------------------------------------------------------------------------------- */

brisk_status tpl_fail(tpl_ctx *c, brisk_status st, const char *fmt, ...) {
    char msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return brisk_fail(c->err, st, "template line %u: %s%s", c->line, st == BRISK_ERR_UNSUPPORTED ? "unsupported: " : "", msg);
}

brisk_status tpl_nomem(tpl_ctx *c) {
    return tpl_fail(c, BRISK_ERR_CAPACITY, "render memory limit exceeded (%zu bytes)", c->arena.limit);
}

void tpl_repr_name(tpl_str s, char *buf, size_t n) {
    tpl_buf b = {.limit = n > 8 ? n - 8 : 0};
    char msg[8];
    tpl_value v = tpl_strv(s);
    if (tpl_repr(&b, &v, msg, sizeof msg) || !b.p) snprintf(buf, n, "'%.*s'", (int)(s.n < 100 ? s.n : 100), s.p);
    else snprintf(buf, n, "%s", b.p);
    tpl_buf_free(&b);
}

brisk_status tpl_undef_fail(tpl_ctx *c, const tpl_value *u) {
    if (u->flags & TPL_F_HINT) return tpl_fail(c, BRISK_ERR_TEMPLATE, "%.*s", (int)u->u.s.n, u->u.s.p);
    char name[200];
    tpl_repr_name(u->u.s, name, sizeof name);
    return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s is undefined", name);
}

brisk_status tpl_make_undef_hint(tpl_ctx *c, tpl_value *out, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    *out = tpl_undef();
    out->flags = TPL_F_HINT;
    out->u.s = tpl_str_dup(&c->arena, msg, strlen(msg));
    return out->u.s.p ? BRISK_OK : tpl_nomem(c);
}

/* ---- work ------------------------------------------------------------------------------------- */

static brisk_status over_budget(tpl_ctx *c) {
    return tpl_fail(c, BRISK_ERR_CAPACITY, "template work budget exceeded (%llu units)", (unsigned long long)c->max_work);
}

brisk_status tpl_charge(tpl_ctx *c, uint64_t n) {
    if (c->work > c->max_work || n > c->max_work - c->work) {
        c->work = c->max_work;
        return over_budget(c);
    }
    c->work += n;
    return BRISK_OK;
}

void tpl_walk_begin(tpl_ctx *c, tpl_walk *w) {
    *w = (tpl_walk){.work = 0, .limit = c->work < c->max_work ? c->max_work - c->work : 0, .fail = TPL_WALK_OK};
}

brisk_status tpl_walk_end(tpl_ctx *c, tpl_walk *w, const char *what) {
    if (w->fail == TPL_WALK_DEEP)
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "value nested deeper than %d levels (in %s)", TPL_MAX_NEST, what);
    if (w->fail == TPL_WALK_BUDGET) {
        c->work = c->max_work;
        return over_budget(c);
    }
    return tpl_charge(c, w->work);
}

brisk_status tpl_equal(tpl_ctx *c, const tpl_value *a, const tpl_value *b, bool *out) {
    tpl_walk w;
    tpl_walk_begin(c, &w);
    *out = tpl_eq(a, b, &w, 0);
    return tpl_walk_end(c, &w, "comparison");
}

brisk_status tpl_less(tpl_ctx *c, const tpl_value *a, const tpl_value *b, bool *lt) {
    tpl_walk w;
    char msg[200];
    tpl_walk_begin(c, &w);
    bool ok = tpl_lt(a, b, lt, msg, sizeof msg, &w);
    brisk_status st = tpl_walk_end(c, &w, "comparison");
    if (st) return st;
    return ok ? BRISK_OK : tpl_fail(c, BRISK_ERR_TEMPLATE, "%s", msg);
}

brisk_status tpl_hash_key(tpl_ctx *c, const tpl_value *k, uint64_t *h) {
    tpl_walk w;
    tpl_walk_begin(c, &w);
    int r = tpl_hash(k, h, &w);
    brisk_status st = tpl_walk_end(c, &w, "hashing");
    if (st) return st;
    if (r == 0) return tpl_fail(c, BRISK_ERR_TEMPLATE, "unhashable type: '%s'", tpl_type_name(k));
    return BRISK_OK;
}

brisk_status tpl_dict_lookup(tpl_ctx *c, const tpl_dict *d, const tpl_value *k, const tpl_value **out) {
    uint64_t h;
    brisk_status st = tpl_hash_key(c, k, &h);
    if (st) return st;
    tpl_walk w;
    tpl_walk_begin(c, &w);
    *out = tpl_dict_find(d, k, h, &w);
    return tpl_walk_end(c, &w, "comparison");
}

brisk_status tpl_dict_insert(tpl_ctx *c, tpl_dict *d, tpl_value k, tpl_value v) {
    uint64_t h;
    brisk_status st = tpl_hash_key(c, &k, &h);
    if (st) return st;
    tpl_walk w;
    tpl_walk_begin(c, &w);
    bool ok = tpl_dict_put(&c->arena, d, k, h, v, &w);
    if ((st = tpl_walk_end(c, &w, "comparison"))) return st;
    return ok ? BRISK_OK : tpl_nomem(c);
}

/* One step, plus the render memory handed out since the last one: between two
 * steps a builtin may allocate up to the memory cap, but small allocations
 * (a scope per loop iteration) are what costs time, so they count as work. */
static brisk_status step(tpl_ctx *c, uint32_t line) {
    c->line = line;
    if (++c->steps > c->max_steps)
        return tpl_fail(c, BRISK_ERR_CAPACITY, "evaluation step limit exceeded (%llu)", (unsigned long long)c->max_steps);
    uint64_t handed = c->arena.handed - c->handed_charged;
    c->handed_charged = c->arena.handed;
    return tpl_charge(c, 1 + handed / 16);
}

static brisk_status emit(tpl_ctx *c, const char *p, size_t n) {
    brisk_status st = tpl_charge(c, n / 64);
    if (st) return st;
    if (!tpl_buf_put(c->out, p, n) && n) return tpl_fail(c, BRISK_ERR_CAPACITY, "output limit exceeded (%zu bytes)", c->max_output);
    return BRISK_OK;
}

/* ---- scopes ---------------------------------------------------------------------------------- */

static tpl_scope *scope_new(tpl_ctx *c, tpl_scope *parent) {
    tpl_scope *s = tpl_alloc(&c->arena, sizeof *s);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}

/* Scopes are scanned: real templates have a few names per scope. The scan is
 * charged (one unit per 64 names) so a template with 100k names set in one scope
 * runs out of work instead of time. */
static const tpl_value *scope_lookup(tpl_ctx *c, const tpl_scope *s, uint32_t sym) {
    uint64_t scanned = 0;
    const tpl_value *r = NULL;
    for (; s && !r; s = s->parent) {
        uint32_t i = 0;
        while (i < s->n && s->sym[i] != sym) i++;
        if (i < s->n) r = &s->val[i];
        scanned += i + 1;
    }
    c->work += scanned / 64;   /* checked at the next step */
    return r;
}

static brisk_status scope_set(tpl_ctx *c, tpl_scope *s, uint32_t sym, tpl_value v) {
    c->work += s->n / 64;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->sym[i] == sym) {
            s->val[i] = v;
            return BRISK_OK;
        }
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 4;
        uint32_t *ns = tpl_alloc_array(&c->arena, cap, sizeof *ns);
        tpl_value *nv = tpl_alloc_array(&c->arena, cap, sizeof *nv);
        if (!ns || !nv) return tpl_nomem(c);
        if (s->n) {
            memcpy(ns, s->sym, s->n * sizeof *ns);
            memcpy(nv, s->val, s->n * sizeof *nv);
        }
        s->sym = ns;
        s->val = nv;
        s->cap = cap;
    }
    s->sym[s->n] = sym;
    s->val[s->n] = v;
    s->n++;
    return BRISK_OK;
}

/* ---- JSON input ------------------------------------------------------------------------------ */

static brisk_status from_json(tpl_ctx *c, json_t *j, tpl_value *out, int depth) {
    if (depth >= TPL_MAX_NEST)
        return brisk_fail(c->err, BRISK_ERR_INVALID_ARG, "template input: JSON nested deeper than %d levels", TPL_MAX_NEST);
    switch (json_typeof(j)) {
    case JSON_NULL: *out = tpl_none(); return BRISK_OK;
    case JSON_TRUE: *out = tpl_bool(true); return BRISK_OK;
    case JSON_FALSE: *out = tpl_bool(false); return BRISK_OK;
    case JSON_INTEGER: *out = tpl_int((int64_t)json_integer_value(j)); return BRISK_OK;
    case JSON_REAL: *out = tpl_float(json_real_value(j)); return BRISK_OK;
    case JSON_STRING: {
        tpl_str s = tpl_str_dup(&c->arena, json_string_value(j), json_string_length(j));
        if (!s.p) return tpl_nomem(c);
        *out = tpl_strv(s);
        return BRISK_OK;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        tpl_list *l = tpl_list_new(&c->arena, n, TPL_LK_LIST);
        if (!l) return tpl_nomem(c);
        for (size_t i = 0; i < n; i++) {
            brisk_status st = from_json(c, json_array_get(j, i), &l->v[i], depth + 1);
            if (st) return st;
        }
        l->n = n;
        *out = tpl_listv(l);
        return BRISK_OK;
    }
    case JSON_OBJECT: {
        tpl_dict *d = tpl_dict_new(&c->arena, json_object_size(j));
        if (!d) return tpl_nomem(c);
        const char *key;
        json_t *v;
        json_object_foreach(j, key, v) {
            tpl_value kv, vv;
            kv = tpl_strv(tpl_str_dup(&c->arena, key, strlen(key)));
            if (!kv.u.s.p) return tpl_nomem(c);
            brisk_status st = from_json(c, v, &vv, depth + 1);
            if (st) return st;
            /* jansson's object keys are unique */
            if (!tpl_dict_append(&c->arena, d, kv, tpl_hash_str(kv.u.s), vv)) return tpl_nomem(c);
        }
        *out = tpl_dictv(d);
        return BRISK_OK;
    }
    }
    return brisk_fail(c->err, BRISK_ERR_INVALID_ARG, "template input: unexpected JSON value");
}

/* ---- expressions -------------------------------------------------------------------------------- */

static brisk_status eval(tpl_ctx *c, tpl_scope *s, const tpl_node *n, tpl_value *out);
static brisk_status exec_body(tpl_ctx *c, tpl_scope *s, const tpl_nodes *body);

/* Evaluate call arguments into arena arrays. */
static brisk_status eval_args(tpl_ctx *c, tpl_scope *s, const tpl_node *n, tpl_args *a) {
    memset(a, 0, sizeof *a);
    brisk_status st;
    if (n->args.n) {
        tpl_value *pos = tpl_alloc_array(&c->arena, n->args.n, sizeof *pos);
        if (!pos) return tpl_nomem(c);
        for (uint32_t i = 0; i < n->args.n; i++)
            if ((st = eval(c, s, n->args.v[i], &pos[i]))) return st;
        a->pos = pos;
        a->npos = n->args.n;
    }
    if (n->defs.n) {
        tpl_value *kw = tpl_alloc_array(&c->arena, n->defs.n, sizeof *kw);
        if (!kw) return tpl_nomem(c);
        for (uint32_t i = 0; i < n->defs.n; i++)
            if ((st = eval(c, s, n->defs.v[i], &kw[i]))) return st;
        a->kw = kw;
        a->kwnames = n->kwnames;
        a->nkw = n->defs.n;
    }
    return BRISK_OK;
}

static brisk_status capture(tpl_ctx *c, tpl_scope *s, const tpl_nodes *body, tpl_str *out) {
    tpl_buf b = {.limit = c->max_output};
    tpl_buf *saved = c->out;
    c->out = &b;
    brisk_status st = exec_body(c, s, body);
    c->out = saved;
    if (st) {
        tpl_buf_free(&b);
        return st;
    }
    *out = tpl_str_dup(&c->arena, b.p ? b.p : "", b.n);
    tpl_buf_free(&b);
    return out->p ? BRISK_OK : tpl_nomem(c);
}

static brisk_status call_macro(tpl_ctx *c, const tpl_macro *m, const tpl_args *a, tpl_value *out) {
    const tpl_node *n = m->node;
    uint32_t nparams = n->args.n, ndefs = n->defs.n;
    if (a->npos > nparams && !(n->flags & TPL_NF_USES_VARARGS))
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "macro '%.*s' takes not more than %u argument(s)", (int)n->name.n, n->name.p, nparams);
    bool *used = NULL;
    if (a->nkw) {
        used = tpl_alloc(&c->arena, a->nkw);
        if (!used) return tpl_nomem(c);
        memset(used, 0, a->nkw);
    }
    brisk_status st;
    /* keyword arguments are matched to parameters by a scan of both */
    if ((st = tpl_charge(c, 1 + nparams + (uint64_t)nparams * a->nkw / 8))) return st;
    tpl_scope *s = scope_new(c, m->closure);
    if (!s) return tpl_nomem(c);
    uint32_t line = c->line;
    for (uint32_t i = 0; i < nparams; i++) {
        const tpl_node *pn = n->args.v[i];
        tpl_value v;
        bool have = false;
        if (i < a->npos) {
            v = a->pos[i];
            have = true;
        } else {
            for (size_t k = 0; k < a->nkw && !have; k++)
                if (!used[k] && tpl_str_eq(a->kwnames[k], pn->name)) {
                    used[k] = true;
                    v = a->kw[k];
                    have = true;
                }
        }
        if (!have && i + ndefs >= nparams) {
            if ((st = eval(c, s, n->defs.v[i + ndefs - nparams], &v))) return st;
            have = true;
        }
        if (!have) {
            char rn[200];
            tpl_repr_name(pn->name, rn, sizeof rn);
            if ((st = tpl_make_undef_hint(c, &v, "parameter %s was not provided", rn))) return st;
        }
        if ((st = scope_set(c, s, pn->sym, v))) return st;
    }
    c->line = line;
    if (n->flags & TPL_NF_USES_KWARGS) {
        tpl_dict *d = tpl_dict_new(&c->arena, 0);
        if (!d) return tpl_nomem(c);
        for (size_t k = 0; k < a->nkw; k++)
            if (!used[k] && !tpl_dict_puts(&c->arena, d, a->kwnames[k], a->kw[k])) return tpl_nomem(c);
        if ((st = scope_set(c, s, TPL_SYM_KWARGS, tpl_dictv(d)))) return st;
    } else {
        for (size_t k = 0; k < a->nkw; k++)
            if (!used[k])
                return tpl_fail(c, BRISK_ERR_TEMPLATE, "macro '%.*s' takes no keyword argument '%.*s'", (int)n->name.n,
                                n->name.p, (int)a->kwnames[k].n, a->kwnames[k].p);
    }
    if (n->flags & TPL_NF_USES_VARARGS) {
        size_t extra = a->npos > nparams ? a->npos - nparams : 0;
        tpl_list *l = tpl_list_new(&c->arena, extra, TPL_LK_TUPLE);
        if (!l) return tpl_nomem(c);
        for (size_t k = 0; k < extra; k++) l->v[k] = a->pos[nparams + k];
        l->n = extra;
        if ((st = scope_set(c, s, TPL_SYM_VARARGS, tpl_listv(l)))) return st;
    }
    if (++c->depth > c->max_depth)
        return tpl_fail(c, BRISK_ERR_CAPACITY, "macro calls nested deeper than %d (maximum recursion depth exceeded)", c->max_depth);
    tpl_str r;
    st = capture(c, s, &n->body, &r);
    c->depth--;
    if (st) return st;
    *out = tpl_strv(r);
    return BRISK_OK;
}

brisk_status tpl_call_value(tpl_ctx *c, const tpl_value *fn, const tpl_args *a, tpl_value *out) {
    switch ((tpl_type)fn->type) {
    case TPL_MACRO: return call_macro(c, fn->u.macro, a, out);
    case TPL_FUNC: return tpl_call_builtin(c, fn->fn, fn->u.self, a, out);
    case TPL_UNDEF:
        if (fn->flags & TPL_F_UNSAFE) return tpl_fail(c, BRISK_ERR_TEMPLATE, "%.*s", (int)fn->u.s.n, fn->u.s.p);
        return tpl_undef_fail(c, fn);
    default:
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "'%s' object is not callable", tpl_type_name(fn));
    }
}

brisk_status tpl_stringify(tpl_ctx *c, const tpl_value *v, tpl_str *out) {
    if (v->type == TPL_STR) {
        *out = v->u.s;
        return BRISK_OK;
    }
    if (v->type == TPL_UNDEF) {
        *out = (tpl_str){"", 0};
        return BRISK_OK;
    }
    tpl_buf b = {.limit = c->max_output};
    char msg[200];
    brisk_status st = tpl_to_str(&b, v, msg, sizeof msg);
    if (st) {
        tpl_buf_free(&b);
        return tpl_fail(c, st, "%s", msg);
    }
    *out = tpl_str_dup(&c->arena, b.p ? b.p : "", b.n);
    tpl_buf_free(&b);
    return out->p ? BRISK_OK : tpl_nomem(c);
}

static brisk_status compare(tpl_ctx *c, int op, const tpl_value *a, const tpl_value *b, bool *out) {
    bool lt;
    char msg[200];
    brisk_status st;
    switch (op) {
    case TPL_CMP_EQ: return tpl_equal(c, a, b, out);
    case TPL_CMP_NE:
        st = tpl_equal(c, a, b, out);
        *out = !*out;
        return st;
    case TPL_CMP_IN: return tpl_contains(c, a, b, out);
    case TPL_CMP_NOTIN:
        st = tpl_contains(c, a, b, out);
        *out = !*out;
        return st;
    default: break;
    }
    if (a->type == TPL_UNDEF) return tpl_undef_fail(c, a);
    if (b->type == TPL_UNDEF) return tpl_undef_fail(c, b);
    const tpl_value *x = a, *y = b;
    if (op == TPL_CMP_GT || op == TPL_CMP_LE) x = b, y = a;
    tpl_walk w;
    tpl_walk_begin(c, &w);
    bool ok = tpl_lt(x, y, &lt, msg, sizeof msg, &w);
    if ((st = tpl_walk_end(c, &w, "comparison"))) return st;
    if (!ok) {
        static const char *const sym[] = {"==", "!=", "<", "<=", ">", ">="};
        char *q = strchr(msg, '<');
        if (q && q[1] == '\'') {   /* name the operator actually used */
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "'%s' not supported between instances of '%s' and '%s'", sym[op],
                            tpl_type_name(a), tpl_type_name(b));
        }
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "%s", msg);
    }
    /* lt is a < b for LT/GE and b < a for GT/LE */
    *out = op == TPL_CMP_LT || op == TPL_CMP_GT ? lt : !lt;
    if (!*out || op == TPL_CMP_LT || op == TPL_CMP_GT) return BRISK_OK;
    if ((a->type == TPL_FLOAT && isnan(a->u.f)) || (b->type == TPL_FLOAT && isnan(b->u.f))) *out = false;
    return BRISK_OK;
}

static brisk_status eval_node(tpl_ctx *c, tpl_scope *s, const tpl_node *n, tpl_value *out);

/* Every recursive path of the evaluator passes here or exec_stmt: one cap on C recursion. */
static brisk_status eval(tpl_ctx *c, tpl_scope *s, const tpl_node *n, tpl_value *out) {
    if (++c->rdepth > TPL_MAX_RDEPTH) {
        c->rdepth--;
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "evaluation nested deeper than %d frames (maximum recursion depth exceeded)", TPL_MAX_RDEPTH);
    }
    brisk_status st = eval_node(c, s, n, out);
    c->rdepth--;
    return st;
}

static brisk_status eval_node(tpl_ctx *c, tpl_scope *s, const tpl_node *n, tpl_value *out) {
    brisk_status st;
    if ((st = step(c, n->line))) return st;
    tpl_value a, b;
    switch ((tpl_node_kind)n->kind) {
    case TPL_N_CONST:
        *out = n->cval;
        return BRISK_OK;
    case TPL_N_NAME: {
        const tpl_value *v = scope_lookup(c, s, n->sym);
        if (v) {
            *out = *v;
        } else {
            *out = tpl_undef();
            out->u.s = n->name;
        }
        return BRISK_OK;
    }
    case TPL_N_GETATTR:
        if ((st = eval(c, s, n->a, &a))) return st;
        c->line = n->line;
        return tpl_getattr(c, &a, n->name, out);
    case TPL_N_GETITEM:
        if ((st = eval(c, s, n->a, &a)) || (st = eval(c, s, n->b, &b))) return st;
        c->line = n->line;
        return tpl_getitem(c, &a, &b, out);
    case TPL_N_SLICE: {
        tpl_value parts[3] = {tpl_none(), tpl_none(), tpl_none()};
        if ((st = eval(c, s, n->a, &a))) return st;
        if (n->b && (st = eval(c, s, n->b, &parts[0]))) return st;
        if (n->c && (st = eval(c, s, n->c, &parts[1]))) return st;
        if (n->d && (st = eval(c, s, n->d, &parts[2]))) return st;
        c->line = n->line;
        bool sliceable = a.type == TPL_STR || a.type == TPL_UNDEF ||
                         (a.type == TPL_LIST && (a.u.list->kind == TPL_LK_LIST || a.u.list->kind == TPL_LK_TUPLE ||
                                                 a.u.list->kind == TPL_LK_RANGE));
        if (!sliceable && (n->flags & TPL_NF_CONST)) {
            /* jinja2 folds a constant subscript through environment.getitem: undefined */
            char desc[64];
            tpl_object_desc(&a, desc, sizeof desc);
            return tpl_make_undef_hint(c, out, "%s has no element slice", desc);
        }
        return tpl_slice(c, &a, &parts[0], &parts[1], &parts[2], out);
    }
    case TPL_N_CALL: {
        tpl_args args;
        if ((st = eval(c, s, n->a, &a)) || (st = eval_args(c, s, n, &args))) return st;
        c->line = n->line;
        return tpl_call_value(c, &a, &args, out);
    }
    case TPL_N_FILTER: {
        tpl_args args;
        if (n->a) {
            if ((st = eval(c, s, n->a, &a))) return st;
        } else {
            a = *c->block_value;
        }
        if ((st = eval_args(c, s, n, &args))) return st;
        c->line = n->line;
        if (n->op == 0) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "the '%.*s' filter", (int)n->name.n, n->name.p);
        return tpl_call_builtin(c, n->op, &a, &args, out);
    }
    case TPL_N_TEST: {
        tpl_args args;
        bool r;
        if ((st = eval(c, s, n->a, &a)) || (st = eval_args(c, s, n, &args))) return st;
        c->line = n->line;
        if (n->op == 0) return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "the '%.*s' test", (int)n->name.n, n->name.p);
        if ((st = tpl_run_test(c, n->op, &a, &args, &r))) return st;
        *out = tpl_bool(r);
        return BRISK_OK;
    }
    case TPL_N_UNKNOWN_FN:
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "No %s named '%.*s' found.", n->op ? "test" : "filter", (int)n->name.n, n->name.p);
    case TPL_N_BLOCK_VALUE:
        *out = *c->block_value;
        return BRISK_OK;
    case TPL_N_NOT:
        if ((st = eval(c, s, n->a, &a))) return st;
        *out = tpl_bool(!tpl_truthy(&a));
        return BRISK_OK;
    case TPL_N_NEG: case TPL_N_POS:
        if ((st = eval(c, s, n->a, &a))) return st;
        c->line = n->line;
        if (a.type == TPL_UNDEF) return tpl_undef_fail(c, &a);
        if (a.type == TPL_FLOAT) *out = tpl_float(n->kind == TPL_N_NEG ? -a.u.f : a.u.f);
        else if (a.type == TPL_INT || a.type == TPL_BOOL) {
            int64_t v = a.type == TPL_BOOL ? a.u.b : a.u.i;
            if (n->kind == TPL_N_NEG && v == INT64_MIN)
                return tpl_fail(c, BRISK_ERR_UNSUPPORTED, "integer result beyond 64 bits (Python would use a big integer)");
            *out = tpl_int(n->kind == TPL_N_NEG ? -v : v);
        } else {
            return tpl_fail(c, BRISK_ERR_TEMPLATE, "bad operand type for unary %c: '%s'", n->kind == TPL_N_NEG ? '-' : '+',
                            tpl_type_name(&a));
        }
        return BRISK_OK;
    case TPL_N_BINOP:
        if ((st = eval(c, s, n->a, &a)) || (st = eval(c, s, n->b, &b))) return st;
        c->line = n->line;
        return tpl_arith(c, n->op, &a, &b, out);
    case TPL_N_CONCAT: {
        /* str(a) ~ str(b) ~ ...: a plain str, appended in place when the first part allows it */
        tpl_value acc;
        tpl_buf buf = {.limit = c->max_output};
        char msg[200];
        for (uint32_t i = 0; i < n->args.n; i++) {
            if ((st = eval(c, s, n->args.v[i], &a))) break;
            tpl_str part;
            if (a.type == TPL_STR) {
                part = a.u.s;
            } else {
                buf.n = 0;
                if ((st = tpl_to_str(&buf, &a, msg, sizeof msg))) {
                    c->line = n->line;
                    st = tpl_fail(c, st, "%s", msg);
                    break;
                }
                part = (tpl_str){buf.p ? buf.p : "", buf.n};
            }
            if (i == 0) {
                if (a.type == TPL_STR) {
                    acc = a;
                    acc.flags &= TPL_F_GROW;
                } else {
                    acc = tpl_strv(tpl_str_dup(&c->arena, part.p, part.n));
                    if (!acc.u.s.p) { st = tpl_nomem(c); break; }
                }
            } else if ((st = tpl_str_append(c, &acc, part))) {
                break;
            }
        }
        tpl_buf_free(&buf);
        if (st) return st;
        *out = acc;
        return BRISK_OK;
    }
    case TPL_N_AND:
        if ((st = eval(c, s, n->a, &a))) return st;
        if (!tpl_truthy(&a)) {
            *out = a;
            return BRISK_OK;
        }
        return eval(c, s, n->b, out);
    case TPL_N_OR:
        if ((st = eval(c, s, n->a, &a))) return st;
        if (tpl_truthy(&a)) {
            *out = a;
            return BRISK_OK;
        }
        return eval(c, s, n->b, out);
    case TPL_N_COMPARE: {
        if ((st = eval(c, s, n->a, &a))) return st;
        bool r = true;
        for (uint32_t i = 0; i < n->args.n && r; i++) {
            if ((st = eval(c, s, n->args.v[i], &b))) return st;
            c->line = n->line;
            if ((st = compare(c, n->cmpops[i], &a, &b, &r))) return st;
            a = b;
        }
        *out = tpl_bool(r);
        return BRISK_OK;
    }
    case TPL_N_CONDEXPR:
        if ((st = eval(c, s, n->a, &a))) return st;
        if (tpl_truthy(&a)) return eval(c, s, n->b, out);
        if (n->c) return eval(c, s, n->c, out);
        return tpl_make_undef_hint(c, out, "the inline if-expression on line %u evaluated to false and no else section was defined.", n->line);
    case TPL_N_LIST: case TPL_N_TUPLE: {
        tpl_list *l = tpl_list_new(&c->arena, n->args.n, n->kind == TPL_N_LIST ? TPL_LK_LIST : TPL_LK_TUPLE);
        if (!l) return tpl_nomem(c);
        for (uint32_t i = 0; i < n->args.n; i++)
            if ((st = eval(c, s, n->args.v[i], &l->v[i]))) return st;
        l->n = n->args.n;
        *out = tpl_listv(l);
        return BRISK_OK;
    }
    case TPL_N_DICT: {
        tpl_dict *d = tpl_dict_new(&c->arena, n->args.n);
        if (!d) return tpl_nomem(c);
        for (uint32_t i = 0; i < n->args.n; i++) {
            if ((st = eval(c, s, n->args.v[i], &a)) || (st = eval(c, s, n->defs.v[i], &b))) return st;
            c->line = n->line;
            if ((st = tpl_dict_insert(c, d, a, b))) return st;
        }
        *out = tpl_dictv(d);
        return BRISK_OK;
    }
    default:
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "internal: statement node in expression");
    }
}

/* ---- statements ----------------------------------------------------------------------------------- */

static brisk_status assign(tpl_ctx *c, tpl_scope *s, const tpl_node *target, const tpl_value *v) {
    brisk_status st;
    c->line = target->line;
    if (target->kind == TPL_N_NAME) return scope_set(c, s, target->sym, *v);
    if (target->kind == TPL_N_NSREF) {
        const tpl_value *ns = scope_lookup(c, s, target->sym);
        if (!ns || ns->type != TPL_NS) return tpl_fail(c, BRISK_ERR_TEMPLATE, "cannot assign attribute on non-namespace object");
        if (!tpl_dict_puts(&c->arena, ns->u.dict, target->name, *v)) return tpl_nomem(c);
        return BRISK_OK;
    }
    /* tuple unpacking */
    const tpl_value *items = NULL;
    size_t n = 0;
    if (v->type == TPL_UNDEF) return tpl_undef_fail(c, v);
    if ((st = tpl_iterate(c, v, &items, &n))) return st;
    uint32_t want = target->args.n;
    if (n > want) return tpl_fail(c, BRISK_ERR_TEMPLATE, "too many values to unpack (expected %u)", want);
    if (n < want) return tpl_fail(c, BRISK_ERR_TEMPLATE, "not enough values to unpack (expected %u, got %zu)", want, n);
    for (uint32_t i = 0; i < want; i++)
        if ((st = assign(c, s, target->args.v[i], &items[i]))) return st;
    return BRISK_OK;
}

static brisk_status target_value(tpl_ctx *c, const tpl_scope *s, const tpl_node *target, tpl_value *out) {
    if (target->kind == TPL_N_NAME) {
        const tpl_value *v = scope_lookup(c, s, target->sym);
        *out = v ? *v : tpl_undef();
        return BRISK_OK;
    }
    tpl_list *l = tpl_list_new(&c->arena, target->args.n, TPL_LK_TUPLE);
    if (!l) return tpl_nomem(c);
    for (uint32_t i = 0; i < target->args.n; i++) {
        brisk_status st = target_value(c, s, target->args.v[i], &l->v[i]);
        if (st) return st;
    }
    l->n = target->args.n;
    *out = tpl_listv(l);
    return BRISK_OK;
}

static brisk_status exec_for(tpl_ctx *c, tpl_scope *s, const tpl_node *n) {
    brisk_status st;
    tpl_value it;
    if ((st = eval(c, s, n->b, &it))) return st;
    c->line = n->line;
    const tpl_value *items = NULL;
    size_t count;
    if ((st = tpl_iterate(c, &it, &items, &count))) return st;
    if (n->c) {   /* loop filter: evaluated up front so loop.length/last see the filtered items */
        tpl_value *kept = tpl_alloc_array(&c->arena, count ? count : 1, sizeof *kept);
        if (!kept) return tpl_nomem(c);
        size_t k = 0;
        for (size_t i = 0; i < count; i++) {
            tpl_scope *fs = scope_new(c, s);
            tpl_value r;
            if (!fs) return tpl_nomem(c);
            if ((st = assign(c, fs, n->a, &items[i])) || (st = eval(c, fs, n->c, &r))) return st;
            if (!tpl_truthy(&r)) continue;
            /* jinja2's filtered loop yields the target: a tuple target yields the unpacked values */
            if (n->a->kind == TPL_N_TUPLE) {
                if ((st = target_value(c, fs, n->a, &kept[k++]))) return st;
            } else {
                kept[k++] = items[i];
            }
        }
        items = kept;
        count = k;
    }
    /* jinja2 runs the else block unless some iteration reached the end of the
     * body: an empty loop, but also one whose every iteration hit break/continue */
    bool completed = false;
    if (count && ++c->depth > c->max_depth) return tpl_fail(c, BRISK_ERR_CAPACITY, "loops nested deeper than %d", c->max_depth);
    tpl_loop *loop = tpl_alloc(&c->arena, sizeof *loop);
    if (!loop) return tpl_nomem(c);
    *loop = (tpl_loop){.items = items, .n = count, .i = 0, .depth = 1};
    tpl_value lv = tpl_undef();
    lv.type = TPL_LOOP;
    lv.u.loop = loop;
    for (size_t i = 0; i < count; i++) {
        loop->i = i;
        if ((st = step(c, n->line))) return st;   /* an empty body still costs an iteration */
        tpl_scope *is = scope_new(c, s);
        if (!is) return tpl_nomem(c);
        if ((st = scope_set(c, is, TPL_SYM_LOOP, lv)) || (st = assign(c, is, n->a, &items[i]))) return st;
        st = exec_body(c, is, &n->body);
        if (st == (brisk_status)TPL_BREAK) break;
        if (st == (brisk_status)TPL_CONTINUE) continue;
        if (st) return st;
        completed = true;
    }
    if (count) c->depth--;
    if (completed || !n->orelse.n) return BRISK_OK;
    tpl_scope *es = scope_new(c, s);
    if (!es) return tpl_nomem(c);
    return exec_body(c, es, &n->orelse);
}

static brisk_status exec_node(tpl_ctx *c, tpl_scope *s, const tpl_node *n);

static brisk_status exec_stmt(tpl_ctx *c, tpl_scope *s, const tpl_node *n) {
    if (++c->rdepth > TPL_MAX_RDEPTH) {
        c->rdepth--;
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "evaluation nested deeper than %d frames (maximum recursion depth exceeded)", TPL_MAX_RDEPTH);
    }
    brisk_status st = exec_node(c, s, n);
    c->rdepth--;
    return st;
}

static brisk_status exec_node(tpl_ctx *c, tpl_scope *s, const tpl_node *n) {
    brisk_status st;
    if ((st = step(c, n->line))) return st;
    tpl_value v;
    switch ((tpl_node_kind)n->kind) {
    case TPL_N_DATA:
        return emit(c, n->cval.u.s.p, n->cval.u.s.n);
    case TPL_N_OUTPUT: {
        if ((st = eval(c, s, n->a, &v))) return st;
        c->line = n->line;
        if (v.type == TPL_STR) return emit(c, v.u.s.p, v.u.s.n);
        char msg[200];
        if ((st = tpl_to_str(c->out, &v, msg, sizeof msg))) {
            if (st == BRISK_ERR_CAPACITY && c->out->over)
                return tpl_fail(c, st, "output limit exceeded (%zu bytes)", c->max_output);
            return tpl_fail(c, st, "%s", msg);
        }
        return BRISK_OK;
    }
    case TPL_N_IF:
        if ((st = eval(c, s, n->a, &v))) return st;
        return exec_body(c, s, tpl_truthy(&v) ? &n->body : &n->orelse);
    case TPL_N_FOR:
        return exec_for(c, s, n);
    case TPL_N_SET:
        if ((st = eval(c, s, n->b, &v))) return st;
        return assign(c, s, n->a, &v);
    case TPL_N_SET_BLOCK: {
        tpl_scope *bs = scope_new(c, s);
        tpl_str body;
        if (!bs) return tpl_nomem(c);
        if ((st = capture(c, bs, &n->body, &body))) return st;
        v = tpl_strv(body);
        if (n->c) {
            const tpl_value *saved = c->block_value;
            c->block_value = &v;
            st = eval(c, s, n->c, &v);
            c->block_value = saved;
            if (st) return st;
        }
        return assign(c, s, n->a, &v);
    }
    case TPL_N_MACRO: {
        tpl_macro *m = tpl_alloc(&c->arena, sizeof *m);
        if (!m) return tpl_nomem(c);
        m->node = n;
        m->closure = s;
        v = tpl_undef();
        v.type = TPL_MACRO;
        v.u.macro = m;
        return scope_set(c, s, n->sym, v);
    }
    case TPL_N_FILTER_BLOCK: {
        tpl_scope *bs = scope_new(c, s);
        tpl_str body;
        if (!bs) return tpl_nomem(c);
        if ((st = capture(c, bs, &n->body, &body))) return st;
        tpl_value bv = tpl_strv(body);
        const tpl_value *saved = c->block_value;
        c->block_value = &bv;
        st = eval(c, s, n->c, &v);
        c->block_value = saved;
        if (st) return st;
        tpl_str r;
        if ((st = tpl_stringify(c, &v, &r))) return st;
        return emit(c, r.p, r.n);
    }
    case TPL_N_SCOPE: {
        tpl_scope *bs = scope_new(c, s);
        if (!bs) return tpl_nomem(c);
        return exec_body(c, bs, &n->body);
    }
    case TPL_N_WITH: {
        tpl_scope *ws = scope_new(c, s);
        if (!ws) return tpl_nomem(c);
        for (uint32_t i = 0; i < n->args.n; i++) {
            if ((st = eval(c, s, n->defs.v[i], &v)) || (st = assign(c, ws, n->args.v[i], &v))) return st;
        }
        return exec_body(c, ws, &n->body);
    }
    case TPL_N_BREAK: return (brisk_status)TPL_BREAK;
    case TPL_N_CONTINUE: return (brisk_status)TPL_CONTINUE;
    default:
        return tpl_fail(c, BRISK_ERR_TEMPLATE, "internal: expression node as statement");
    }
}

static brisk_status exec_body(tpl_ctx *c, tpl_scope *s, const tpl_nodes *body) {
    for (uint32_t i = 0; i < body->n; i++) {
        brisk_status st = exec_stmt(c, s, body->v[i]);
        if (st) return st;
    }
    return BRISK_OK;
}

/* ---- public API ------------------------------------------------------------------------------------- */

brisk_status brisk_template_parse(const char *src, size_t len, brisk_template **out, brisk_error *err) {
    *out = NULL;
    if (!src && len) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "template: NULL source");
    if (len > TPL_MAX_SOURCE)   /* real chat templates are tens of KiB */
        return brisk_fail(err, BRISK_ERR_CAPACITY, "template: %zu bytes is over the %u-byte limit", len, TPL_MAX_SOURCE);
    brisk_template *t = calloc(1, sizeof *t);
    if (!t) return brisk_fail(err, BRISK_ERR_NOMEM, "template: out of memory");
    t->arena.limit = (size_t)1 << 30;
    tpl_tokens toks = {0};
    brisk_status st;
    /* normalize newlines (\r\n, \r -> \n) and drop one trailing newline, as jinja2 does */
    t->src = malloc(len + 1);
    if (!t->src) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "template: out of memory");
        goto fail;
    }
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            t->src[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            t->src[k++] = src[i];
        }
    }
    if (k && t->src[k - 1] == '\n') k--;
    t->src[k] = 0;
    t->src_len = k;
    if ((st = tpl_lex(t->src, t->src_len, &toks, err))) goto fail;
    if ((st = tpl_parse(t, &toks, err))) goto fail;
    tpl_tokens_free(&toks);
    *out = t;
    return BRISK_OK;
fail:
    tpl_tokens_free(&toks);
    brisk_template_free(t);
    return st;
}

void brisk_template_free(brisk_template *t) {
    if (!t) return;
    tpl_arena_free(&t->arena);
    free(t->src);
    free(t);
}

static brisk_status find_sym(const brisk_template *t, const char *name, size_t n, uint32_t *out) {
    for (uint32_t i = 0; i < t->nsyms; i++)
        if (t->syms[i].n == n && !memcmp(t->syms[i].p, name, n)) {
            *out = i;
            return BRISK_OK;
        }
    return BRISK_ERR_INVALID_ARG;
}

static brisk_status set_global_fn(tpl_ctx *c, tpl_scope *s, uint32_t sym, int fn) {
    tpl_value v = tpl_undef();
    v.type = TPL_FUNC;
    v.fn = (uint16_t)fn;
    v.u.self = NULL;
    return scope_set(c, s, sym, v);
}

brisk_status brisk_template_render_ex(const brisk_template *t, const char *messages_json, const char *extra_vars_json,
                                      const brisk_template_opts *opts, char **out, size_t *out_len, brisk_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !out) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "template render: NULL argument");
    brisk_template_opts o = opts ? *opts : (brisk_template_opts){0};
    tpl_ctx c = {0};
    c.t = t;
    c.err = err;
    c.arena.limit = o.max_memory ? o.max_memory : TPL_DEFAULT_MAX_MEMORY;
    c.max_steps = o.max_steps ? o.max_steps : UINT64_MAX;   /* steps are work too: max_work bounds them */
    c.max_work = o.max_work ? o.max_work : TPL_DEFAULT_MAX_WORK;
    c.max_depth = o.max_depth > 0 ? o.max_depth : TPL_DEFAULT_MAX_DEPTH;
    c.max_output = o.max_output ? o.max_output : TPL_DEFAULT_MAX_OUTPUT;
    c.now = o.now ? o.now : time(NULL);
    tpl_buf buf = {.limit = c.max_output};
    c.out = &buf;
    json_t *jm = NULL, *jx = NULL;
    json_error_t je;
    brisk_status st;

    jm = json_loads(messages_json ? messages_json : "[]", JSON_ALLOW_NUL, &je);
    if (!jm || !json_is_array(jm)) {
        st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "template messages: %s",
                        jm ? "expected a JSON array" : je.text);
        goto done;
    }
    if (extra_vars_json) {
        jx = json_loads(extra_vars_json, JSON_ALLOW_NUL, &je);
        if (!jx || !json_is_object(jx)) {
            st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "template variables: %s", jx ? "expected a JSON object" : je.text);
            goto done;
        }
    }
    tpl_scope *root = scope_new(&c, NULL);
    if (!root) { st = tpl_nomem(&c); goto done; }
    static const struct { uint32_t sym; int fn; } globals[] = {
        {TPL_SYM_RANGE, TPL_G_RANGE}, {TPL_SYM_NAMESPACE, TPL_G_NAMESPACE}, {TPL_SYM_DICT, TPL_G_DICT},
        {TPL_SYM_RAISE, TPL_G_RAISE}, {TPL_SYM_STRFTIME, TPL_G_STRFTIME}, {TPL_SYM_LIPSUM, TPL_G_LIPSUM},
        {TPL_SYM_CYCLER, TPL_G_CYCLER}, {TPL_SYM_JOINER, TPL_G_JOINER},
    };
    for (size_t i = 0; i < BRISK_ARRAY_LEN(globals); i++)
        if ((st = set_global_fn(&c, root, globals[i].sym, globals[i].fn))) goto done;
    if ((st = scope_set(&c, root, TPL_SYM_TOOLS, tpl_none())) || (st = scope_set(&c, root, TPL_SYM_DOCUMENTS, tpl_none())) ||
        (st = scope_set(&c, root, TPL_SYM_AGP, tpl_bool(false))))
        goto done;
    tpl_value v;
    if ((st = from_json(&c, jm, &v, 0)) || (st = scope_set(&c, root, TPL_SYM_MESSAGES, v))) goto done;
    if (jx) {
        const char *key;
        json_t *jv;
        json_object_foreach(jx, key, jv) {
            uint32_t sym;
            if (find_sym(t, key, strlen(key), &sym)) continue;   /* the template never names it */
            if ((st = from_json(&c, jv, &v, 0)) || (st = scope_set(&c, root, sym, v))) goto done;
        }
    }
    st = exec_body(&c, root, &t->root);
    if (st > 0) st = tpl_fail(&c, BRISK_ERR_TEMPLATE, "break/continue outside a loop");
    if (st) goto done;
    if (buf.over) { st = tpl_fail(&c, BRISK_ERR_CAPACITY, "output limit exceeded (%zu bytes)", c.max_output); goto done; }
    if (!buf.p && !(buf.p = calloc(1, 1))) { st = brisk_fail(err, BRISK_ERR_NOMEM, "template: out of memory"); goto done; }
    *out = buf.p;
    if (out_len) *out_len = buf.n;
    buf.p = NULL;
done:
    tpl_buf_free(&buf);
    tpl_arena_free(&c.arena);
    json_decref(jm);
    json_decref(jx);
    return st;
}

brisk_status brisk_template_render(const brisk_template *t, const char *messages_json, const char *extra_vars_json,
                                   char **out, size_t *out_len, brisk_error *err) {
    return brisk_template_render_ex(t, messages_json, extra_vars_json, NULL, out, out_len, err);
}

brisk_status brisk_template_parse_time(const char *s, time_t *out, brisk_error *err) {
    int y, mo, d, h = 0, mi = 0, sec = 0;
    char tail = 0;
    int n = sscanf(s, "%4d-%2d-%2d%c%2d:%2d:%2d", &y, &mo, &d, &tail, &h, &mi, &sec);
    if (!(n == 3 || (n == 7 && (tail == 'T' || tail == ' '))) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
        mi > 59 || sec > 60 || y < 1970 || y > 9999)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "time '%s': expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS", s);
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    if (t == (time_t)-1) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "time '%s' is not representable", s);
    *out = t;
    return BRISK_OK;
}
