/* parser: tokens -> syntax tree, following jinja2's grammar (parser.py's
 * precedence: condexpr < or < and < not < compare < + - < ~ < * / // % < ** <
 * unary - + < postfix . [] () < | filters and `is` tests).
 *
 * Statements: if/elif/else, for (tuple targets, `if` filter, else, recursive
 * is rejected), set (names, tuples, namespace attributes, block set with
 * filters), macro, filter blocks, with, break/continue, print, raw, and
 * transformers' {% generation %}. Tags jinja2 knows but brisk does not
 * (call, block, extends, include, import, from, autoescape) fail as
 * unsupported; unknown tags fail as jinja2 does.
 *
 * Like jinja2, an unknown filter or test is a compile error unless it sits
 * inside an `if` or conditional expression of the same frame, where it only
 * fails when evaluated. */
#include "template/tpl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Expression / block nesting. Each level is a handful of C frames of the
 * recursive-descent parser (and later of the evaluator), so the parser takes
 * half the engine's nesting limit; jinja2's own parser gives up near 100
 * nested parentheses (Python's recursion limit). */
#define TPL_PARSE_NEST (TPL_MAX_NEST / 2)

typedef struct parser {
    brisk_template *t;
    const tpl_token *tok;
    size_t n, i;
    brisk_error *err;
    int nest;
    bool soft;                 /* inside if/condexpr of the current frame */
    int loop_depth;            /* for break/continue */
    tpl_node *macro;           /* innermost macro being parsed */
    /* unknown filters/tests outside soft frames: compile errors, unless a
     * conditional expression turns out to enclose them */
    struct pending { const tpl_node *node; uint8_t is_test; } *pending;
    size_t npending, cappending;
    /* symbol interning: open addressing over t->syms */
    uint32_t *hash;
    size_t hcap;
    size_t symcap;
} parser;

static const char *const builtin_syms[TPL_SYM_N_BUILTIN] = {
    "loop", "varargs", "kwargs", "caller", "messages", "tools", "documents", "add_generation_prompt",
    "range", "namespace", "dict", "raise_exception", "strftime_now", "lipsum", "cycler", "joiner",
};

/* ---- helpers ---------------------------------------------------------------------------- */

static brisk_status pfail(parser *p, brisk_status st, uint32_t line, const char *fmt, ...) BRISK_PRINTF(4, 5);
static brisk_status pfail(parser *p, brisk_status st, uint32_t line, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return brisk_fail(p->err, st, "template line %u: %s%s", line, st == BRISK_ERR_UNSUPPORTED ? "unsupported: " : "", msg);
}

static brisk_status nomem(parser *p) { return brisk_fail(p->err, BRISK_ERR_NOMEM, "template: out of memory"); }

static const tpl_token *cur(parser *p) { return &p->tok[p->i]; }
static const tpl_token *look(parser *p) { return &p->tok[p->i + 1 < p->n ? p->i + 1 : p->i]; }
static void advance(parser *p) {
    if (p->i + 1 < p->n) p->i++;
}

static bool is_op(const tpl_token *k, const char *op) { return k->type == TPL_T_OP && !strcmp(k->op, op); }
static bool is_name(const tpl_token *k, const char *name) { return k->type == TPL_T_NAME && tpl_str_eqc(k->text, name); }

static const char *tok_desc(const tpl_token *k, char *buf, size_t n) {
    switch ((tpl_tok_type)k->type) {
    case TPL_T_EOF: return "end of template";
    case TPL_T_VAR_END: return "end of print statement";
    case TPL_T_BLOCK_END: return "end of statement block";
    case TPL_T_VAR_BEGIN: return "begin of print statement";
    case TPL_T_BLOCK_BEGIN: return "begin of statement block";
    case TPL_T_DATA: return "template data";
    default: break;
    }
    snprintf(buf, n, "%.*s", (int)(k->text.n < 40 ? k->text.n : 40), k->text.p);
    return buf;
}

static brisk_status unexpected(parser *p, const char *expected) {
    char b[64];
    return pfail(p, BRISK_ERR_TEMPLATE, cur(p)->line, "expected %s, got '%s'", expected, tok_desc(cur(p), b, sizeof b));
}

static brisk_status expect_op(parser *p, const char *op) {
    if (!is_op(cur(p), op)) {
        char e[16];
        snprintf(e, sizeof e, "'%s'", op);
        return unexpected(p, e);
    }
    advance(p);
    return BRISK_OK;
}

static brisk_status expect_type(parser *p, tpl_tok_type type, const char *what) {
    if (cur(p)->type != type) return unexpected(p, what);
    advance(p);
    return BRISK_OK;
}

static tpl_node *new_node(parser *p, tpl_node_kind kind, uint32_t line) {
    tpl_node *n = tpl_alloc(&p->t->arena, sizeof *n);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

/* growable node vector (malloc), frozen into the arena */
typedef struct nvec {
    tpl_node **v;
    size_t n, cap;
} nvec;

static bool nvec_push(nvec *v, tpl_node *x) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        tpl_node **nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) return false;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return true;
}

static bool nvec_freeze(parser *p, nvec *v, tpl_nodes *out) {
    out->n = (uint32_t)v->n;
    out->v = NULL;
    if (v->n) {
        out->v = tpl_alloc_array(&p->t->arena, v->n, sizeof(tpl_node *));
        if (!out->v) {
            free(v->v);
            v->v = NULL;
            return false;
        }
        memcpy(out->v, v->v, v->n * sizeof(tpl_node *));
    }
    free(v->v);
    v->v = NULL;
    v->n = v->cap = 0;
    return true;
}

/* ---- symbols ------------------------------------------------------------------------------ */

static uint32_t str_hash(tpl_str s) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < s.n; i++) h = (h ^ (unsigned char)s.p[i]) * 16777619u;
    return h;
}

static brisk_status intern(parser *p, tpl_str name, uint32_t *out) {
    brisk_template *t = p->t;
    if ((t->nsyms + 1) * 2 > p->hcap) {
        size_t cap = p->hcap ? p->hcap * 2 : 64;
        uint32_t *h = malloc(cap * sizeof *h);
        if (!h) return nomem(p);
        memset(h, 0xFF, cap * sizeof *h);
        for (uint32_t i = 0; i < t->nsyms; i++) {
            size_t k = str_hash(t->syms[i]) & (cap - 1);
            while (h[k] != UINT32_MAX) k = (k + 1) & (cap - 1);
            h[k] = i;
        }
        free(p->hash);
        p->hash = h;
        p->hcap = cap;
    }
    size_t k = str_hash(name) & (p->hcap - 1);
    while (p->hash[k] != UINT32_MAX) {
        if (tpl_str_eq(t->syms[p->hash[k]], name)) {
            *out = p->hash[k];
            return BRISK_OK;
        }
        k = (k + 1) & (p->hcap - 1);
    }
    if (t->nsyms == p->symcap) {
        size_t cap = p->symcap ? p->symcap * 2 : 64;
        tpl_str *ns = tpl_alloc_array(&t->arena, cap, sizeof *ns);
        if (!ns) return nomem(p);
        if (t->nsyms) memcpy(ns, t->syms, t->nsyms * sizeof *ns);
        t->syms = ns;
        p->symcap = cap;
    }
    tpl_str copy = tpl_str_dup(&t->arena, name.p, name.n);
    if (!copy.p) return nomem(p);
    t->syms[t->nsyms] = copy;
    p->hash[k] = t->nsyms;
    *out = t->nsyms++;
    return BRISK_OK;
}

/* ---- literals --------------------------------------------------------------------------- */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Python's unicode-escape decoding of a string literal body (jinja2 first
 * backslash-escapes non-ASCII characters, so "\é" reads as the text "\xe9"). */
static brisk_status unescape(parser *p, const tpl_token *k, tpl_buf *b) {
    const char *s = k->text.p + 1;
    size_t n = k->text.n - 2;
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\' || i + 1 >= n) {
            if (!tpl_buf_putc(b, s[i])) return nomem(p);
            i++;
            continue;
        }
        char c = s[i + 1];
        i += 2;
        uint32_t cp;
        char tmp[16];
        switch (c) {
        case '\n': continue;
        case '\\': case '\'': case '"': tpl_buf_putc(b, c); continue;
        case 'a': tpl_buf_putc(b, '\a'); continue;
        case 'b': tpl_buf_putc(b, '\b'); continue;
        case 'f': tpl_buf_putc(b, '\f'); continue;
        case 'n': tpl_buf_putc(b, '\n'); continue;
        case 'r': tpl_buf_putc(b, '\r'); continue;
        case 't': tpl_buf_putc(b, '\t'); continue;
        case 'v': tpl_buf_putc(b, '\v'); continue;
        case 'x': case 'u': case 'U': {
            int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            cp = 0;
            for (int j = 0; j < nd; j++) {
                int h = i + (size_t)j < n ? hexval(s[i + (size_t)j]) : -1;
                if (h < 0)
                    return pfail(p, BRISK_ERR_TEMPLATE, k->line, "(unicode error) truncated \\%c escape in a string literal", c);
                cp = cp * 16 + (uint32_t)h;
            }
            i += (size_t)nd;
            if (cp > 0x10FFFF) return pfail(p, BRISK_ERR_TEMPLATE, k->line, "(unicode error) illegal Unicode character");
            if (cp >= 0xD800 && cp < 0xE000)
                return pfail(p, BRISK_ERR_UNSUPPORTED, k->line, "a lone surrogate escape in a string literal");
            tpl_buf_put(b, tmp, tpl_utf8_put(tmp, cp));
            continue;
        }
        case 'N': return pfail(p, BRISK_ERR_UNSUPPORTED, k->line, "\\N{...} escapes in string literals");
        default: break;
        }
        if (c >= '0' && c <= '7') {
            cp = (uint32_t)(c - '0');
            for (int j = 0; j < 2 && i < n && s[i] >= '0' && s[i] <= '7'; j++) cp = cp * 8 + (uint32_t)(s[i++] - '0');
            tpl_buf_put(b, tmp, tpl_utf8_put(tmp, cp));
            continue;
        }
        if ((unsigned char)c >= 0x80) {
            /* "\" + a non-ASCII character: jinja2's backslashreplace turns it into an escape's text */
            size_t j = i - 1;
            cp = tpl_utf8_next(s, n, &j);
            i = j;
            if (cp <= 0xFF) snprintf(tmp, sizeof tmp, "\\x%02x", cp);
            else if (cp <= 0xFFFF) snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            else snprintf(tmp, sizeof tmp, "\\U%08x", cp);
            tpl_buf_puts(b, tmp);
            continue;
        }
        tpl_buf_putc(b, '\\');   /* unknown escapes stay as written */
        tpl_buf_putc(b, c);
    }
    return b->over ? nomem(p) : BRISK_OK;
}

static brisk_status number(parser *p, const tpl_token *k, tpl_value *out) {
    char buf[128];
    size_t m = 0;
    for (size_t i = 0; i < k->text.n && m + 1 < sizeof buf; i++)
        if (k->text.p[i] != '_') buf[m++] = k->text.p[i];
    buf[m] = 0;
    if (k->type == TPL_T_FLOAT) {
        *out = tpl_float(strtod(buf, NULL));
        return BRISK_OK;
    }
    int base = 10;
    const char *digits = buf;
    if (m > 1 && buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')) base = 16, digits = buf + 2;
    else if (m > 1 && buf[0] == '0' && (buf[1] == 'o' || buf[1] == 'O')) base = 8, digits = buf + 2;
    else if (m > 1 && buf[0] == '0' && (buf[1] == 'b' || buf[1] == 'B')) base = 2, digits = buf + 2;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(digits, &end, base);
    if (errno || k->text.n >= sizeof buf || v > (unsigned long long)INT64_MAX)
        return pfail(p, BRISK_ERR_UNSUPPORTED, k->line, "integer literal %.*s (brisk integers are 64-bit)",
                     (int)(k->text.n < 60 ? k->text.n : 60), k->text.p);
    *out = tpl_int((int64_t)v);
    return BRISK_OK;
}

/* ---- expressions --------------------------------------------------------------------------- */

static brisk_status parse_expression(parser *p, bool with_condexpr, tpl_node **out);
static brisk_status parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                                bool explicit_parens, tpl_node **out);
static brisk_status parse_unary(parser *p, bool with_filter, tpl_node **out);
static brisk_status parse_filter(parser *p, tpl_node *node, bool start_inline, tpl_node **out);

static brisk_status enter(parser *p) {
    if (++p->nest > TPL_PARSE_NEST)
        return pfail(p, BRISK_ERR_TEMPLATE, cur(p)->line, "expression nested deeper than %d levels", TPL_PARSE_NEST);
    return BRISK_OK;
}

static brisk_status parse_call_args(parser *p, tpl_node *call) {
    brisk_status st;
    if ((st = expect_op(p, "("))) return st;
    nvec args = {0}, kws = {0};
    tpl_str *names = NULL;
    size_t nnames = 0, capnames = 0;
    while (!is_op(cur(p), ")")) {
        if (args.n || kws.n) {
            if ((st = expect_op(p, ","))) goto fail;
            if (is_op(cur(p), ")")) break;
        }
        if (is_op(cur(p), "*") || is_op(cur(p), "**")) {
            st = pfail(p, BRISK_ERR_UNSUPPORTED, cur(p)->line, "*args / **kwargs in calls");
            goto fail;
        }
        tpl_node *e = NULL;
        if (cur(p)->type == TPL_T_NAME && is_op(look(p), "=")) {
            tpl_str key = cur(p)->text;
            advance(p);
            advance(p);
            if ((st = parse_expression(p, true, &e))) goto fail;
            if (nnames == capnames) {
                capnames = capnames ? capnames * 2 : 4;
                tpl_str *nn = realloc(names, capnames * sizeof *nn);
                if (!nn) { st = nomem(p); goto fail; }
                names = nn;
            }
            names[nnames++] = key;
            if (!nvec_push(&kws, e)) { st = nomem(p); goto fail; }
        } else {
            if (kws.n) {
                st = pfail(p, BRISK_ERR_TEMPLATE, cur(p)->line, "Invalid argument syntax: positional argument follows keyword argument");
                goto fail;
            }
            if ((st = parse_expression(p, true, &e))) goto fail;
            if (!nvec_push(&args, e)) { st = nomem(p); goto fail; }
        }
    }
    if ((st = expect_op(p, ")"))) goto fail;
    if (nnames) {
        call->kwnames = tpl_alloc_array(&p->t->arena, nnames, sizeof(tpl_str));
        if (!call->kwnames) { st = nomem(p); goto fail; }
        memcpy(call->kwnames, names, nnames * sizeof(tpl_str));
    }
    free(names);
    names = NULL;
    if (!nvec_freeze(p, &args, &call->args) || !nvec_freeze(p, &kws, &call->defs)) return nomem(p);
    return BRISK_OK;
fail:
    free(args.v);
    free(kws.v);
    free(names);
    return st;
}

static brisk_status parse_list_or_dict(parser *p, bool dict, tpl_node **out) {
    uint32_t line = cur(p)->line;
    brisk_status st;
    advance(p);
    nvec keys = {0}, vals = {0};
    const char *close = dict ? "}" : "]";
    while (!is_op(cur(p), close)) {
        if (keys.n && (st = expect_op(p, ","))) goto fail;
        if (is_op(cur(p), close)) break;
        tpl_node *k, *v;
        if ((st = parse_expression(p, true, &k))) goto fail;
        if (!nvec_push(&keys, k)) { st = nomem(p); goto fail; }
        if (dict) {
            if ((st = expect_op(p, ":"))) goto fail;
            if ((st = parse_expression(p, true, &v))) goto fail;
            if (!nvec_push(&vals, v)) { st = nomem(p); goto fail; }
        }
    }
    if ((st = expect_op(p, close))) goto fail;
    tpl_node *n = new_node(p, dict ? TPL_N_DICT : TPL_N_LIST, line);
    if (!n || !nvec_freeze(p, &keys, &n->args) || !nvec_freeze(p, &vals, &n->defs)) return nomem(p);
    *out = n;
    return BRISK_OK;
fail:
    free(keys.v);
    free(vals.v);
    return st;
}

static brisk_status parse_primary(parser *p, tpl_node **out) {
    const tpl_token *k = cur(p);
    brisk_status st;
    tpl_node *n;
    switch ((tpl_tok_type)k->type) {
    case TPL_T_NAME:
        advance(p);
        if (tpl_str_eqc(k->text, "true") || tpl_str_eqc(k->text, "True") || tpl_str_eqc(k->text, "false") ||
            tpl_str_eqc(k->text, "False")) {
            if (!(n = new_node(p, TPL_N_CONST, k->line))) return nomem(p);
            n->cval = tpl_bool(k->text.p[0] == 't' || k->text.p[0] == 'T');
        } else if (tpl_str_eqc(k->text, "none") || tpl_str_eqc(k->text, "None")) {
            if (!(n = new_node(p, TPL_N_CONST, k->line))) return nomem(p);
            n->cval = tpl_none();
        } else {
            if (!(n = new_node(p, TPL_N_NAME, k->line))) return nomem(p);
            if ((st = intern(p, k->text, &n->sym))) return st;
            n->name = p->t->syms[n->sym];
            if (p->macro && (n->sym == TPL_SYM_VARARGS || n->sym == TPL_SYM_KWARGS || n->sym == TPL_SYM_CALLER))
                p->macro->flags |= n->sym == TPL_SYM_VARARGS ? TPL_NF_USES_VARARGS
                                   : n->sym == TPL_SYM_KWARGS ? TPL_NF_USES_KWARGS : TPL_NF_USES_CALLER;
        }
        *out = n;
        return BRISK_OK;
    case TPL_T_STRING: {
        tpl_buf b = {0};
        uint32_t line = k->line;
        while (cur(p)->type == TPL_T_STRING) {   /* adjacent literals concatenate */
            if ((st = unescape(p, cur(p), &b))) { tpl_buf_free(&b); return st; }
            advance(p);
        }
        if (!(n = new_node(p, TPL_N_CONST, line))) { tpl_buf_free(&b); return nomem(p); }
        tpl_str s = tpl_str_dup(&p->t->arena, b.p ? b.p : "", b.n);
        tpl_buf_free(&b);
        if (!s.p) return nomem(p);
        n->cval = tpl_strv(s);
        *out = n;
        return BRISK_OK;
    }
    case TPL_T_INT: case TPL_T_FLOAT:
        if (!(n = new_node(p, TPL_N_CONST, k->line))) return nomem(p);
        if ((st = number(p, k, &n->cval))) return st;
        advance(p);
        *out = n;
        return BRISK_OK;
    case TPL_T_OP:
        if (is_op(k, "(")) {
            advance(p);
            if ((st = parse_tuple(p, false, true, NULL, true, out))) return st;
            return expect_op(p, ")");
        }
        if (is_op(k, "[")) return parse_list_or_dict(p, false, out);
        if (is_op(k, "{")) return parse_list_or_dict(p, true, out);
        break;
    default: break;
    }
    char b[64];
    return pfail(p, BRISK_ERR_TEMPLATE, k->line, "unexpected '%s'", tok_desc(k, b, sizeof b));
}

static brisk_status parse_subscribed(parser *p, tpl_node **out) {
    uint32_t line = cur(p)->line;
    brisk_status st;
    tpl_node *parts[3] = {NULL, NULL, NULL};
    if (is_op(cur(p), ":")) {
        advance(p);
    } else {
        tpl_node *e = NULL;
        if ((st = parse_expression(p, true, &e))) return st;
        if (!is_op(cur(p), ":")) {
            *out = e;
            return BRISK_OK;
        }
        advance(p);
        parts[0] = e;
    }
    if (!is_op(cur(p), ":") && !is_op(cur(p), "]") && !is_op(cur(p), ",")) {
        if ((st = parse_expression(p, true, &parts[1]))) return st;
    }
    if (is_op(cur(p), ":")) {
        advance(p);
        if (!is_op(cur(p), "]") && !is_op(cur(p), ",")) {
            if ((st = parse_expression(p, true, &parts[2]))) return st;
        }
    }
    tpl_node *n = new_node(p, TPL_N_SLICE, line);
    if (!n) return nomem(p);
    n->b = parts[0];
    n->c = parts[1];
    n->d = parts[2];
    *out = n;
    return BRISK_OK;
}

/* An expression of literals only. jinja2 evaluates such an expression at
 * compile time when it is a whole {{ }} output; constant subscripts then go
 * through environment.getitem (a slice of a number is undefined there, a
 * TypeError at run time). */
/* Chains (a + b + c ..., a.b.c ..., x|f|g ...) nest the tree without nesting
 * the parser, so these walks carry their own depth: past the limit the
 * expression counts as not constant (the evaluator then refuses it as too
 * deep anyway). */
static bool is_const(const tpl_node *n, int depth) {
    if (!n) return true;
    if (depth >= TPL_MAX_NEST) return false;
    switch ((tpl_node_kind)n->kind) {
    case TPL_N_CONST: return true;
    case TPL_N_NEG: case TPL_N_POS: case TPL_N_NOT: case TPL_N_BINOP: case TPL_N_AND: case TPL_N_OR:
    case TPL_N_CONDEXPR: case TPL_N_SLICE: case TPL_N_GETITEM: case TPL_N_GETATTR:
    case TPL_N_LIST: case TPL_N_TUPLE: case TPL_N_DICT: case TPL_N_CONCAT: case TPL_N_COMPARE:
        if (!is_const(n->a, depth + 1) || !is_const(n->b, depth + 1) || !is_const(n->c, depth + 1) ||
            !is_const(n->d, depth + 1))
            return false;
        for (uint32_t i = 0; i < n->args.n; i++)
            if (!is_const(n->args.v[i], depth + 1)) return false;
        for (uint32_t i = 0; i < n->defs.n; i++)
            if (!is_const(n->defs.v[i], depth + 1)) return false;
        return true;
    default: return false;
    }
}

/* Only called on trees is_const accepted, so no deeper than TPL_MAX_NEST. */
static void mark_const_slices(tpl_node *n) {
    if (!n) return;
    if (n->kind == TPL_N_SLICE) n->flags |= TPL_NF_CONST;
    mark_const_slices(n->a);
    mark_const_slices(n->b);
    mark_const_slices(n->c);
    mark_const_slices(n->d);
    for (uint32_t i = 0; i < n->args.n; i++) mark_const_slices(n->args.v[i]);
    for (uint32_t i = 0; i < n->defs.n; i++) mark_const_slices(n->defs.v[i]);
}

static brisk_status parse_postfix(parser *p, tpl_node *node, tpl_node **out) {
    brisk_status st;
    for (;;) {
        const tpl_token *k = cur(p);
        if (is_op(k, ".")) {
            advance(p);
            const tpl_token *a = cur(p);
            tpl_node *n;
            if (a->type == TPL_T_NAME) {
                if (!(n = new_node(p, TPL_N_GETATTR, k->line))) return nomem(p);
                n->name = tpl_str_dup(&p->t->arena, a->text.p, a->text.n);
                if (!n->name.p) return nomem(p);
            } else if (a->type == TPL_T_INT) {
                if (!(n = new_node(p, TPL_N_GETITEM, k->line))) return nomem(p);
                tpl_node *c = new_node(p, TPL_N_CONST, a->line);
                if (!c) return nomem(p);
                if ((st = number(p, a, &c->cval))) return st;
                n->b = c;
            } else {
                return pfail(p, BRISK_ERR_TEMPLATE, a->line, "expected name or number");
            }
            advance(p);
            n->a = node;
            node = n;
        } else if (is_op(k, "[")) {
            advance(p);
            nvec args = {0};
            while (!is_op(cur(p), "]")) {
                if (args.n && (st = expect_op(p, ","))) { free(args.v); return st; }
                if (is_op(cur(p), "]")) break;
                tpl_node *e = NULL;
                if ((st = parse_subscribed(p, &e))) { free(args.v); return st; }
                if (!nvec_push(&args, e)) { free(args.v); return nomem(p); }
            }
            if ((st = expect_op(p, "]"))) { free(args.v); return st; }
            if (args.n == 0) { free(args.v); return pfail(p, BRISK_ERR_TEMPLATE, k->line, "expected an expression in []"); }
            tpl_node *key;
            if (args.n == 1) {
                key = args.v[0];
                free(args.v);
            } else {
                for (size_t i = 0; i < args.n; i++)
                    if (args.v[i]->kind == TPL_N_SLICE) {
                        free(args.v);
                        return pfail(p, BRISK_ERR_UNSUPPORTED, k->line, "slices inside a tuple subscript");
                    }
                key = new_node(p, TPL_N_TUPLE, k->line);
                if (!key || !nvec_freeze(p, &args, &key->args)) { free(args.v); return nomem(p); }
            }
            tpl_node *n;
            if (key->kind == TPL_N_SLICE) {
                n = key;
            } else {
                if (!(n = new_node(p, TPL_N_GETITEM, k->line))) return nomem(p);
                n->b = key;
            }
            n->a = node;
            node = n;
        } else if (is_op(k, "(")) {
            tpl_node *n = new_node(p, TPL_N_CALL, k->line);
            if (!n) return nomem(p);
            n->a = node;
            if ((st = parse_call_args(p, n))) return st;
            node = n;
        } else {
            break;
        }
    }
    *out = node;
    return BRISK_OK;
}

static brisk_status resolve_fn(parser *p, tpl_node *n, tpl_fn_kind kind) {
    int id = tpl_builtin_find(kind, n->name);
    if (id > 0) {
        n->op = (uint16_t)id;
        return BRISK_OK;
    }
    if (id < 0) {   /* jinja2 has it: fail when evaluated */
        n->op = 0;
        return BRISK_OK;
    }
    n->kind = TPL_N_UNKNOWN_FN;
    n->op = kind == TPL_FK_TEST;
    if (!p->soft) {
        if (p->npending == p->cappending) {
            size_t cap = p->cappending ? p->cappending * 2 : 8;
            struct pending *np = realloc(p->pending, cap * sizeof *np);
            if (!np) return nomem(p);
            p->pending = np;
            p->cappending = cap;
        }
        p->pending[p->npending++] = (struct pending){n, (uint8_t)(kind == TPL_FK_TEST)};
    }
    return BRISK_OK;
}

static brisk_status parse_dotted_name(parser *p, tpl_str *out) {
    if (cur(p)->type != TPL_T_NAME) return unexpected(p, "name");
    tpl_buf b = {0};
    tpl_buf_put(&b, cur(p)->text.p, cur(p)->text.n);
    advance(p);
    while (is_op(cur(p), ".") && look(p)->type == TPL_T_NAME) {
        advance(p);
        tpl_buf_putc(&b, '.');
        tpl_buf_put(&b, cur(p)->text.p, cur(p)->text.n);
        advance(p);
    }
    *out = tpl_str_dup(&p->t->arena, b.p ? b.p : "", b.n);
    tpl_buf_free(&b);
    return out->p ? BRISK_OK : nomem(p);
}

static brisk_status parse_filter(parser *p, tpl_node *node, bool start_inline, tpl_node **out) {
    brisk_status st;
    while (is_op(cur(p), "|") || start_inline) {
        if (!start_inline) advance(p);
        start_inline = false;
        tpl_node *n = new_node(p, TPL_N_FILTER, cur(p)->line);
        if (!n) return nomem(p);
        if ((st = parse_dotted_name(p, &n->name))) return st;
        if (is_op(cur(p), "(") && (st = parse_call_args(p, n))) return st;
        n->a = node;
        if ((st = resolve_fn(p, n, TPL_FK_FILTER))) return st;
        node = n;
    }
    *out = node;
    return BRISK_OK;
}

static brisk_status parse_test(parser *p, tpl_node *node, tpl_node **out) {
    uint32_t line = cur(p)->line;
    brisk_status st;
    advance(p);   /* is */
    bool negated = false;
    if (is_name(cur(p), "not")) {
        advance(p);
        negated = true;
    }
    tpl_node *n = new_node(p, TPL_N_TEST, line);
    if (!n) return nomem(p);
    if ((st = parse_dotted_name(p, &n->name))) return st;
    n->a = node;
    const tpl_token *k = cur(p);
    if (is_op(k, "(")) {
        if ((st = parse_call_args(p, n))) return st;
    } else if ((k->type == TPL_T_NAME || k->type == TPL_T_STRING || k->type == TPL_T_INT || k->type == TPL_T_FLOAT ||
                is_op(k, "[") || is_op(k, "{")) &&
               !is_name(k, "else") && !is_name(k, "or") && !is_name(k, "and")) {
        if (is_name(k, "is")) return pfail(p, BRISK_ERR_TEMPLATE, k->line, "You cannot chain multiple tests with is");
        tpl_node *arg;
        if ((st = parse_primary(p, &arg)) || (st = parse_postfix(p, arg, &arg))) return st;
        nvec args = {0};
        if (!nvec_push(&args, arg) || !nvec_freeze(p, &args, &n->args)) return nomem(p);
    }
    if ((st = resolve_fn(p, n, TPL_FK_TEST))) return st;
    if (negated) {
        tpl_node *m = new_node(p, TPL_N_NOT, line);
        if (!m) return nomem(p);
        m->a = n;
        n = m;
    }
    *out = n;
    return BRISK_OK;
}

static brisk_status parse_filter_expr(parser *p, tpl_node *node, tpl_node **out) {
    brisk_status st;
    for (;;) {
        if (is_op(cur(p), "|")) {
            if ((st = parse_filter(p, node, false, &node))) return st;
        } else if (is_name(cur(p), "is")) {
            if ((st = parse_test(p, node, &node))) return st;
        } else if (is_op(cur(p), "(")) {
            tpl_node *n = new_node(p, TPL_N_CALL, cur(p)->line);
            if (!n) return nomem(p);
            n->a = node;
            if ((st = parse_call_args(p, n))) return st;
            node = n;
        } else {
            break;
        }
    }
    *out = node;
    return BRISK_OK;
}

static brisk_status parse_unary(parser *p, bool with_filter, tpl_node **out) {
    brisk_status st;
    if ((st = enter(p))) return st;
    const tpl_token *k = cur(p);
    tpl_node *node;
    if (is_op(k, "-") || is_op(k, "+")) {
        advance(p);
        node = new_node(p, is_op(k, "-") ? TPL_N_NEG : TPL_N_POS, k->line);
        if (!node) return nomem(p);
        if ((st = parse_unary(p, false, &node->a))) return st;
    } else {
        if ((st = parse_primary(p, &node))) return st;
    }
    if ((st = parse_postfix(p, node, &node))) return st;
    if (with_filter && (st = parse_filter_expr(p, node, &node))) return st;
    p->nest--;
    *out = node;
    return BRISK_OK;
}

static brisk_status binop(parser *p, tpl_node_kind kind, uint16_t op, uint32_t line, tpl_node *a, tpl_node *b,
                          tpl_node **out) {
    tpl_node *n = new_node(p, kind, line);
    if (!n) return nomem(p);
    n->op = op;
    n->a = a;
    n->b = b;
    *out = n;
    return BRISK_OK;
}

static brisk_status parse_pow(parser *p, tpl_node **out) {
    brisk_status st;
    tpl_node *left, *right;
    if ((st = parse_unary(p, true, &left))) return st;
    while (is_op(cur(p), "**")) {
        uint32_t line = cur(p)->line;
        advance(p);
        if ((st = parse_unary(p, true, &right)) || (st = binop(p, TPL_N_BINOP, TPL_OP_POW, line, left, right, &left)))
            return st;
    }
    *out = left;
    return BRISK_OK;
}

static brisk_status parse_math2(parser *p, tpl_node **out) {
    brisk_status st;
    tpl_node *left, *right;
    if ((st = parse_pow(p, &left))) return st;
    for (;;) {
        const tpl_token *k = cur(p);
        int op = is_op(k, "*") ? TPL_OP_MUL : is_op(k, "/") ? TPL_OP_DIV : is_op(k, "//") ? TPL_OP_FLOORDIV
                 : is_op(k, "%") ? TPL_OP_MOD : -1;
        if (op < 0) break;
        advance(p);
        if ((st = parse_pow(p, &right)) || (st = binop(p, TPL_N_BINOP, (uint16_t)op, k->line, left, right, &left)))
            return st;
    }
    *out = left;
    return BRISK_OK;
}

static brisk_status parse_concat(parser *p, tpl_node **out) {
    brisk_status st;
    tpl_node *first;
    uint32_t line = cur(p)->line;
    if ((st = parse_math2(p, &first))) return st;
    if (!is_op(cur(p), "~")) {
        *out = first;
        return BRISK_OK;
    }
    nvec args = {0};
    if (!nvec_push(&args, first)) return nomem(p);
    while (is_op(cur(p), "~")) {
        advance(p);
        tpl_node *e = NULL;
        if ((st = parse_math2(p, &e))) { free(args.v); return st; }
        if (!nvec_push(&args, e)) { free(args.v); return nomem(p); }
    }
    tpl_node *n = new_node(p, TPL_N_CONCAT, line);
    if (!n || !nvec_freeze(p, &args, &n->args)) { free(args.v); return nomem(p); }
    *out = n;
    return BRISK_OK;
}

static brisk_status parse_math1(parser *p, tpl_node **out) {
    brisk_status st;
    tpl_node *left, *right;
    if ((st = parse_concat(p, &left))) return st;
    for (;;) {
        const tpl_token *k = cur(p);
        int op = is_op(k, "+") ? TPL_OP_ADD : is_op(k, "-") ? TPL_OP_SUB : -1;
        if (op < 0) break;
        advance(p);
        if ((st = parse_concat(p, &right)) || (st = binop(p, TPL_N_BINOP, (uint16_t)op, k->line, left, right, &left)))
            return st;
    }
    *out = left;
    return BRISK_OK;
}

static brisk_status parse_compare(parser *p, tpl_node **out) {
    brisk_status st;
    tpl_node *expr;
    uint32_t line = cur(p)->line;
    if ((st = parse_math1(p, &expr))) return st;
    nvec ops = {0};
    uint8_t opcodes[64];
    for (;;) {
        const tpl_token *k = cur(p);
        int op = is_op(k, "==") ? TPL_CMP_EQ : is_op(k, "!=") ? TPL_CMP_NE : is_op(k, "<") ? TPL_CMP_LT
                 : is_op(k, "<=") ? TPL_CMP_LE : is_op(k, ">") ? TPL_CMP_GT : is_op(k, ">=") ? TPL_CMP_GE : -1;
        if (op >= 0) {
            advance(p);
        } else if (is_name(k, "in")) {
            advance(p);
            op = TPL_CMP_IN;
        } else if (is_name(k, "not") && is_name(look(p), "in")) {
            advance(p);
            advance(p);
            op = TPL_CMP_NOTIN;
        } else {
            break;
        }
        if (ops.n >= BRISK_ARRAY_LEN(opcodes)) { free(ops.v); return pfail(p, BRISK_ERR_CAPACITY, k->line, "comparison chain too long"); }
        tpl_node *e = NULL;
        if ((st = parse_math1(p, &e))) { free(ops.v); return st; }
        opcodes[ops.n] = (uint8_t)op;
        if (!nvec_push(&ops, e)) { free(ops.v); return nomem(p); }
    }
    if (!ops.n) {
        *out = expr;
        return BRISK_OK;
    }
    tpl_node *n = new_node(p, TPL_N_COMPARE, line);
    if (!n) { free(ops.v); return nomem(p); }
    n->a = expr;
    n->cmpops = tpl_alloc(&p->t->arena, ops.n);
    if (!n->cmpops) { free(ops.v); return nomem(p); }
    memcpy(n->cmpops, opcodes, ops.n);
    if (!nvec_freeze(p, &ops, &n->args)) return nomem(p);
    *out = n;
    return BRISK_OK;
}

static brisk_status parse_not(parser *p, tpl_node **out) {
    brisk_status st;
    if (is_name(cur(p), "not")) {
        uint32_t line = cur(p)->line;
        advance(p);
        if ((st = enter(p))) return st;
        tpl_node *n = new_node(p, TPL_N_NOT, line);
        if (!n) return nomem(p);
        if ((st = parse_not(p, &n->a))) return st;
        p->nest--;
        *out = n;
        return BRISK_OK;
    }
    return parse_compare(p, out);
}

static brisk_status parse_and(parser *p, tpl_node **out) {
    brisk_status st;
    tpl_node *left, *right;
    if ((st = parse_not(p, &left))) return st;
    while (is_name(cur(p), "and")) {
        uint32_t line = cur(p)->line;
        advance(p);
        if ((st = parse_not(p, &right)) || (st = binop(p, TPL_N_AND, 0, line, left, right, &left))) return st;
    }
    *out = left;
    return BRISK_OK;
}

static brisk_status parse_or(parser *p, tpl_node **out) {
    brisk_status st;
    tpl_node *left, *right;
    if ((st = parse_and(p, &left))) return st;
    while (is_name(cur(p), "or")) {
        uint32_t line = cur(p)->line;
        advance(p);
        if ((st = parse_and(p, &right)) || (st = binop(p, TPL_N_OR, 0, line, left, right, &left))) return st;
    }
    *out = left;
    return BRISK_OK;
}

static brisk_status parse_condexpr(parser *p, tpl_node **out) {
    brisk_status st;
    tpl_node *expr1;
    bool soft = p->soft;
    size_t npending = p->npending;
    if ((st = parse_or(p, &expr1))) return st;
    while (is_name(cur(p), "if")) {
        uint32_t line = cur(p)->line;
        advance(p);
        p->npending = npending;   /* jinja2 compiles the whole conditional expression in a soft frame */
        if ((st = enter(p))) return st;
        p->soft = true;
        tpl_node *n = new_node(p, TPL_N_CONDEXPR, line);
        if (!n) return nomem(p);
        n->b = expr1;
        if ((st = parse_or(p, &n->a))) return st;
        if (is_name(cur(p), "else")) {
            advance(p);
            if ((st = parse_condexpr(p, &n->c))) return st;
        }
        p->soft = soft;
        p->nest--;
        expr1 = n;
    }
    *out = expr1;
    return BRISK_OK;
}

static brisk_status parse_expression(parser *p, bool with_condexpr, tpl_node **out) {
    brisk_status st;
    if ((st = enter(p))) return st;
    st = with_condexpr ? parse_condexpr(p, out) : parse_or(p, out);
    p->nest--;
    return st;
}

static bool is_tuple_end(parser *p, const char *extra_end) {
    const tpl_token *k = cur(p);
    if (k->type == TPL_T_VAR_END || k->type == TPL_T_BLOCK_END || k->type == TPL_T_EOF || is_op(k, ")")) return true;
    return extra_end && is_name(k, extra_end);
}

static brisk_status parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                                bool explicit_parens, tpl_node **out) {
    brisk_status st;
    uint32_t line = cur(p)->line;
    nvec args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n && (st = expect_op(p, ","))) goto fail;
        if (is_tuple_end(p, extra_end)) break;
        tpl_node *e = NULL;
        if (simplified) {
            if ((st = parse_primary(p, &e))) goto fail;
        } else if ((st = parse_expression(p, with_condexpr, &e))) {
            goto fail;
        }
        if (!nvec_push(&args, e)) { st = nomem(p); goto fail; }
        if (is_op(cur(p), ",")) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (args.n) {
            *out = args.v[0];
            free(args.v);
            return BRISK_OK;
        }
        if (!explicit_parens) {
            char b[64];
            free(args.v);
            return pfail(p, BRISK_ERR_TEMPLATE, cur(p)->line, "Expected an expression, got '%s'", tok_desc(cur(p), b, sizeof b));
        }
    }
    tpl_node *n = new_node(p, TPL_N_TUPLE, line);
    if (!n || !nvec_freeze(p, &args, &n->args)) { free(args.v); return nomem(p); }
    *out = n;
    return BRISK_OK;
fail:
    free(args.v);
    return st;
}

/* ---- statements ------------------------------------------------------------------------------- */

static brisk_status subparse(parser *p, const char *const *end, tpl_nodes *out);

static bool can_assign(const tpl_node *n) {
    if (n->kind == TPL_N_NAME) return true;
    if (n->kind == TPL_N_NSREF) return true;
    if (n->kind != TPL_N_TUPLE) return false;
    for (uint32_t i = 0; i < n->args.n; i++)
        if (!can_assign(n->args.v[i]) || n->args.v[i]->kind == TPL_N_NSREF) return false;
    return true;
}

static brisk_status parse_assign_target(parser *p, bool with_namespace, bool name_only, const char *extra_end,
                                        tpl_node **out) {
    brisk_status st;
    const tpl_token *k = cur(p);
    tpl_node *n;
    if (with_namespace && k->type == TPL_T_NAME && is_op(look(p), ".")) {
        advance(p);
        advance(p);
        if (cur(p)->type != TPL_T_NAME) return unexpected(p, "name");
        if (!(n = new_node(p, TPL_N_NSREF, k->line))) return nomem(p);
        if ((st = intern(p, k->text, &n->sym))) return st;
        n->name = tpl_str_dup(&p->t->arena, cur(p)->text.p, cur(p)->text.n);
        if (!n->name.p) return nomem(p);
        advance(p);
    } else if (name_only) {
        if (k->type != TPL_T_NAME) return unexpected(p, "name");
        if (!(n = new_node(p, TPL_N_NAME, k->line))) return nomem(p);
        if ((st = intern(p, k->text, &n->sym))) return st;
        n->name = p->t->syms[n->sym];
        advance(p);
    } else {
        if ((st = parse_tuple(p, true, true, extra_end, false, &n))) return st;
    }
    if (!can_assign(n)) return pfail(p, BRISK_ERR_TEMPLATE, k->line, "can't assign to this expression");
    if (n->kind == TPL_N_NAME && (tpl_str_eqc(n->name, "true") || tpl_str_eqc(n->name, "false") ||
                                  tpl_str_eqc(n->name, "none") || tpl_str_eqc(n->name, "True") ||
                                  tpl_str_eqc(n->name, "False") || tpl_str_eqc(n->name, "None")))
        return pfail(p, BRISK_ERR_TEMPLATE, k->line, "can't assign to a constant");
    *out = n;
    return BRISK_OK;
}

/* `%}` then a body up to one of end; leaves the end name current. */
static brisk_status parse_statements(parser *p, const char *const *end, bool drop_needle, tpl_nodes *out) {
    brisk_status st;
    if (is_op(cur(p), ":")) advance(p);
    if ((st = expect_type(p, TPL_T_BLOCK_END, "end of statement block"))) return st;
    if ((st = subparse(p, end, out))) return st;
    if (cur(p)->type == TPL_T_EOF)
        return pfail(p, BRISK_ERR_TEMPLATE, cur(p)->line, "Unexpected end of template. Jinja was looking for the following tags: '%s'.", end[0]);
    if (drop_needle) advance(p);
    return BRISK_OK;
}

static brisk_status parse_for(parser *p, tpl_node *n) {
    static const char *const end1[] = {"endfor", "else", NULL};
    static const char *const end2[] = {"endfor", NULL};
    brisk_status st;
    if ((st = parse_assign_target(p, false, false, "in", &n->a))) return st;
    if (!is_name(cur(p), "in")) return unexpected(p, "'in'");
    advance(p);
    if ((st = parse_tuple(p, false, false, "recursive", false, &n->b))) return st;
    bool soft = p->soft;
    p->soft = false;   /* the loop body and filter are an inner frame */
    if (is_name(cur(p), "if")) {
        advance(p);
        if ((st = parse_expression(p, true, &n->c))) return st;
    }
    if (is_name(cur(p), "recursive")) return pfail(p, BRISK_ERR_UNSUPPORTED, cur(p)->line, "recursive for loops");
    p->loop_depth++;
    if ((st = parse_statements(p, end1, false, &n->body))) return st;
    p->loop_depth--;
    bool has_else = is_name(cur(p), "else");
    advance(p);
    if (has_else && (st = parse_statements(p, end2, true, &n->orelse))) return st;
    p->soft = soft;
    return BRISK_OK;
}

static brisk_status parse_if(parser *p, tpl_node *n) {
    static const char *const end1[] = {"elif", "else", "endif", NULL};
    static const char *const end2[] = {"endif", NULL};
    brisk_status st;
    bool soft = p->soft;
    p->soft = true;
    tpl_node *node = n;
    for (;;) {
        if ((st = parse_tuple(p, false, false, NULL, false, &node->a))) return st;
        if ((st = parse_statements(p, end1, false, &node->body))) return st;
        if (is_name(cur(p), "elif")) {
            tpl_node *e = new_node(p, TPL_N_IF, cur(p)->line);
            if (!e) return nomem(p);
            advance(p);
            nvec one = {0};
            if (!nvec_push(&one, e) || !nvec_freeze(p, &one, &node->orelse)) return nomem(p);
            node = e;
            continue;
        }
        if (is_name(cur(p), "else")) {
            advance(p);
            if ((st = parse_statements(p, end2, true, &node->orelse))) return st;
        } else {
            advance(p);   /* endif */
        }
        break;
    }
    p->soft = soft;
    return BRISK_OK;
}

static brisk_status parse_set(parser *p, tpl_node *n) {
    static const char *const end[] = {"endset", NULL};
    brisk_status st;
    if ((st = parse_assign_target(p, true, false, NULL, &n->a))) return st;
    if (is_op(cur(p), "=")) {
        advance(p);
        return parse_tuple(p, false, true, NULL, false, &n->b);
    }
    n->kind = TPL_N_SET_BLOCK;
    if (n->a->kind == TPL_N_TUPLE) return pfail(p, BRISK_ERR_TEMPLATE, n->line, "can't assign a block to a tuple");
    if (is_op(cur(p), "|")) {
        tpl_node *ph = new_node(p, TPL_N_BLOCK_VALUE, n->line);
        if (!ph) return nomem(p);
        if ((st = parse_filter(p, ph, false, &n->c))) return st;
    }
    bool soft = p->soft;
    p->soft = false;
    st = parse_statements(p, end, true, &n->body);
    p->soft = soft;
    return st;
}

static brisk_status parse_macro(parser *p, tpl_node *n) {
    static const char *const end[] = {"endmacro", NULL};
    brisk_status st;
    if (cur(p)->type != TPL_T_NAME) return unexpected(p, "name");
    if ((st = intern(p, cur(p)->text, &n->sym))) return st;
    n->name = p->t->syms[n->sym];
    advance(p);
    bool soft = p->soft;
    int loop_depth = p->loop_depth;
    tpl_node *outer = p->macro;
    p->soft = false;
    p->loop_depth = 0;
    p->macro = n;
    if ((st = expect_op(p, "("))) return st;
    nvec params = {0}, defs = {0};
    while (!is_op(cur(p), ")")) {
        if (params.n && (st = expect_op(p, ","))) goto fail;
        tpl_node *arg, *def;
        if ((st = parse_assign_target(p, false, true, NULL, &arg))) goto fail;
        if (is_op(cur(p), "=")) {
            advance(p);
            if ((st = parse_expression(p, true, &def))) goto fail;
            if (!nvec_push(&defs, def)) { st = nomem(p); goto fail; }
        } else if (defs.n) {
            st = pfail(p, BRISK_ERR_TEMPLATE, arg->line, "non-default argument follows default argument");
            goto fail;
        }
        if (!nvec_push(&params, arg)) { st = nomem(p); goto fail; }
    }
    advance(p);
    if (!nvec_freeze(p, &params, &n->args) || !nvec_freeze(p, &defs, &n->defs)) return nomem(p);
    if ((st = parse_statements(p, end, true, &n->body))) return st;
    if (n->flags & TPL_NF_USES_CALLER) return pfail(p, BRISK_ERR_UNSUPPORTED, n->line, "macros that use caller()");
    p->soft = soft;
    p->loop_depth = loop_depth;
    p->macro = outer;
    return BRISK_OK;
fail:
    free(params.v);
    free(defs.v);
    return st;
}

static brisk_status parse_with(parser *p, tpl_node *n) {
    static const char *const end[] = {"endwith", NULL};
    brisk_status st;
    nvec targets = {0}, values = {0};
    while (cur(p)->type != TPL_T_BLOCK_END) {
        if (targets.n && (st = expect_op(p, ","))) goto fail;
        tpl_node *t, *v;
        if ((st = parse_assign_target(p, false, false, NULL, &t))) goto fail;
        if ((st = expect_op(p, "="))) goto fail;
        if ((st = parse_expression(p, true, &v))) goto fail;
        if (!nvec_push(&targets, t) || !nvec_push(&values, v)) { st = nomem(p); goto fail; }
    }
    if (!nvec_freeze(p, &targets, &n->args) || !nvec_freeze(p, &values, &n->defs)) return nomem(p);
    bool soft = p->soft;
    p->soft = false;
    st = parse_statements(p, end, true, &n->body);
    p->soft = soft;
    return st;
fail:
    free(targets.v);
    free(values.v);
    return st;
}

static brisk_status parse_statement(parser *p, tpl_node **out) {
    static const char *const end_filter[] = {"endfilter", NULL};
    static const char *const end_gen[] = {"endgeneration", NULL};
    const tpl_token *k = cur(p);
    brisk_status st;
    if (k->type != TPL_T_NAME) return pfail(p, BRISK_ERR_TEMPLATE, k->line, "tag name expected");
    if (++p->nest > TPL_PARSE_NEST) return pfail(p, BRISK_ERR_TEMPLATE, k->line, "blocks nested deeper than %d levels", TPL_PARSE_NEST);
    tpl_node *n = new_node(p, TPL_N_OUTPUT, k->line);
    if (!n) return nomem(p);
    tpl_str tag = k->text;
    advance(p);
    if (tpl_str_eqc(tag, "for")) {
        n->kind = TPL_N_FOR;
        st = parse_for(p, n);
    } else if (tpl_str_eqc(tag, "if")) {
        n->kind = TPL_N_IF;
        st = parse_if(p, n);
    } else if (tpl_str_eqc(tag, "set")) {
        n->kind = TPL_N_SET;
        st = parse_set(p, n);
    } else if (tpl_str_eqc(tag, "macro")) {
        n->kind = TPL_N_MACRO;
        st = parse_macro(p, n);
    } else if (tpl_str_eqc(tag, "print")) {
        n->kind = TPL_N_OUTPUT;
        st = parse_tuple(p, false, true, NULL, false, &n->a);
    } else if (tpl_str_eqc(tag, "filter")) {
        n->kind = TPL_N_FILTER_BLOCK;
        tpl_node *ph = new_node(p, TPL_N_BLOCK_VALUE, n->line);
        if (!ph) return nomem(p);
        bool soft = p->soft;
        st = parse_filter(p, ph, true, &n->c);
        p->soft = false;
        if (!st) st = parse_statements(p, end_filter, true, &n->body);
        p->soft = soft;
    } else if (tpl_str_eqc(tag, "with")) {
        n->kind = TPL_N_WITH;
        st = parse_with(p, n);
    } else if (tpl_str_eqc(tag, "generation")) {
        n->kind = TPL_N_SCOPE;
        bool soft = p->soft;
        p->soft = false;
        st = parse_statements(p, end_gen, true, &n->body);
        p->soft = soft;
    } else if (tpl_str_eqc(tag, "break") || tpl_str_eqc(tag, "continue")) {
        n->kind = tag.p[0] == 'b' ? TPL_N_BREAK : TPL_N_CONTINUE;
        st = p->loop_depth ? BRISK_OK
                           : pfail(p, BRISK_ERR_TEMPLATE, n->line, "'%s' outside loop", tag.p[0] == 'b' ? "break" : "continue");
    } else if (tpl_str_eqc(tag, "call") || tpl_str_eqc(tag, "block") || tpl_str_eqc(tag, "extends") ||
               tpl_str_eqc(tag, "include") || tpl_str_eqc(tag, "import") || tpl_str_eqc(tag, "from") ||
               tpl_str_eqc(tag, "autoescape")) {
        st = pfail(p, BRISK_ERR_UNSUPPORTED, n->line, "the {%% %.*s %%} tag", (int)tag.n, tag.p);
    } else {
        st = pfail(p, BRISK_ERR_TEMPLATE, n->line, "Encountered unknown tag '%.*s'.", (int)(tag.n < 60 ? tag.n : 60), tag.p);
    }
    if (st) return st;
    p->nest--;
    *out = n;
    return expect_type(p, TPL_T_BLOCK_END, "end of statement block");
}

static bool at_end_tag(parser *p, const char *const *end) {
    if (!end || cur(p)->type != TPL_T_NAME) return false;
    for (; *end; end++)
        if (is_name(cur(p), *end)) return true;
    return false;
}

static brisk_status subparse(parser *p, const char *const *end, tpl_nodes *out) {
    nvec body = {0};
    brisk_status st = BRISK_OK;
    for (;;) {
        const tpl_token *k = cur(p);
        tpl_node *n = NULL;
        if (k->type == TPL_T_EOF) {
            break;
        } else if (k->type == TPL_T_DATA) {
            if (!(n = new_node(p, TPL_N_DATA, k->line))) { st = nomem(p); goto fail; }
            n->cval = tpl_strv(k->text);
            advance(p);
        } else if (k->type == TPL_T_VAR_BEGIN) {
            advance(p);
            if (!(n = new_node(p, TPL_N_OUTPUT, k->line))) { st = nomem(p); goto fail; }
            if ((st = parse_tuple(p, false, true, NULL, false, &n->a))) goto fail;
            if ((st = expect_type(p, TPL_T_VAR_END, "end of print statement"))) goto fail;
            if (is_const(n->a, 0)) mark_const_slices(n->a);
        } else if (k->type == TPL_T_BLOCK_BEGIN) {
            advance(p);
            if (at_end_tag(p, end)) break;
            if ((st = parse_statement(p, &n))) goto fail;
        } else {
            char b[64];
            st = pfail(p, BRISK_ERR_TEMPLATE, k->line, "unexpected '%s'", tok_desc(k, b, sizeof b));
            goto fail;
        }
        if (!nvec_push(&body, n)) { st = nomem(p); goto fail; }
    }
    if (!nvec_freeze(p, &body, out)) return nomem(p);
    return BRISK_OK;
fail:
    free(body.v);
    return st;
}

brisk_status tpl_parse(brisk_template *t, const tpl_tokens *toks, brisk_error *err) {
    parser p = {.t = t, .tok = toks->v, .n = toks->n, .i = 0, .err = err};
    brisk_status st = BRISK_OK;
    for (int i = 0; i < TPL_SYM_N_BUILTIN && !st; i++) {
        uint32_t id;
        st = intern(&p, (tpl_str){builtin_syms[i], strlen(builtin_syms[i])}, &id);
    }
    if (!st) st = subparse(&p, NULL, &t->root);
    if (!st && cur(&p)->type != TPL_T_EOF) {
        char b[64];
        st = pfail(&p, BRISK_ERR_TEMPLATE, cur(&p)->line, "Encountered unknown tag '%s'.", tok_desc(cur(&p), b, sizeof b));
    }
    if (!st && p.npending) {
        const tpl_node *n = p.pending[0].node;
        st = pfail(&p, BRISK_ERR_TEMPLATE, n->line, "No %s named '%.*s'.", p.pending[0].is_test ? "test" : "filter",
                   (int)n->name.n, n->name.p);
    }
    free(p.pending);
    free(p.hash);
    return st;
}
