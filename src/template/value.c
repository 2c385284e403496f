/* value: the render arena, byte buffers, UTF-8 helpers and the Python value
 * model of the template engine: construction, truthiness, ==, <, str(),
 * repr() and json.dumps, each formatted exactly as CPython does. */
#include "template/tpl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ---------------------------------------------------------------------- */

struct tpl_chunk {
    tpl_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

#define TPL_CHUNK_SIZE ((size_t)64 << 10)

void *tpl_alloc(tpl_arena *a, size_t n) {
    if (n == 0) n = 1;
    if (n > ((size_t)1 << 40)) return NULL;
    n = (n + 15) & ~(size_t)15;
    a->handed += n;
    tpl_chunk *c = a->head;
    if (c && c->cap - c->used >= n) {
        void *p = c->data + c->used;
        c->used += n;
        return p;
    }
    size_t cap = n > TPL_CHUNK_SIZE / 4 ? n : TPL_CHUNK_SIZE;
    if (a->limit && a->total + cap + sizeof(tpl_chunk) > a->limit) return NULL;
    tpl_chunk *nc = malloc(sizeof(tpl_chunk) + cap);
    if (!nc) return NULL;
    a->total += cap + sizeof(tpl_chunk);
    nc->cap = cap;
    nc->used = n;
    if (c && cap != TPL_CHUNK_SIZE && c->cap - c->used > 256) {
        /* a big one-off block: keep bumping in the current chunk */
        nc->next = c->next;
        c->next = nc;
    } else {
        nc->next = c;
        a->head = nc;
    }
    return nc->data;
}

void *tpl_alloc_array(tpl_arena *a, size_t n, size_t size) {
    size_t bytes;
    if (!brisk_mul_size(n, size, &bytes)) return NULL;
    return tpl_alloc(a, bytes);
}

void tpl_arena_free(tpl_arena *a) {
    tpl_chunk *c = a->head;
    while (c) {
        tpl_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}

/* ---- byte buffers ----------------------------------------------------------------- */

static bool buf_reserve(tpl_buf *b, size_t extra) {
    if (b->over) return false;
    size_t need;
    if (!brisk_add_size(b->n, extra, &need) || !brisk_add_size(need, 1, &need) ||
        (b->limit && need > b->limit + 1)) {
        b->over = true;
        return false;
    }
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap > ((size_t)1 << 62) ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->over = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

bool tpl_buf_put(tpl_buf *b, const char *s, size_t n) {
    if (n == 0) return !b->over;
    if (!buf_reserve(b, n)) return false;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

bool tpl_buf_putc(tpl_buf *b, char c) { return tpl_buf_put(b, &c, 1); }
bool tpl_buf_puts(tpl_buf *b, const char *s) { return tpl_buf_put(b, s, strlen(s)); }

bool tpl_buf_printf(tpl_buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return false;
    if ((size_t)n < sizeof tmp) return tpl_buf_put(b, tmp, (size_t)n);
    if (!buf_reserve(b, (size_t)n)) return false;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
    return true;
}

void tpl_buf_free(tpl_buf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ---- UTF-8 ------------------------------------------------------------------------- */

uint32_t tpl_utf8_next(const char *s, size_t n, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    size_t k = *i;
    uint32_t c = u[k];
    if (c < 0x80) {
        *i = k + 1;
        return c;
    }
    int len = c >= 0xF0 && c < 0xF8 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (len == 0 || k + (size_t)len > n) goto bad;
    uint32_t cp = c & (0x7F >> len);
    for (int j = 1; j < len; j++) {
        if ((u[k + j] & 0xC0) != 0x80) goto bad;
        cp = (cp << 6) | (u[k + j] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) goto bad;
    *i = k + (size_t)len;
    return cp;
bad:
    *i = k + 1;
    return c;   /* a stray byte stands for itself (Latin-1) */
}

size_t tpl_utf8_put(char *dst, uint32_t cp) {
    unsigned char *d = (unsigned char *)dst;
    if (cp < 0x80) { d[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { d[0] = (unsigned char)(0xC0 | (cp >> 6)); d[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        d[0] = (unsigned char)(0xE0 | (cp >> 12));
        d[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (unsigned char)(0xF0 | (cp >> 18));
    d[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Eight bytes at a time: the common all-ASCII text skips the decoder. */
static bool str_is_ascii(tpl_str s) {
    size_t i = 0;
    for (; i + 8 <= s.n; i += 8) {
        uint64_t w;
        memcpy(&w, s.p + i, 8);
        if (w & 0x8080808080808080ull) return false;
    }
    for (; i < s.n; i++)
        if ((unsigned char)s.p[i] >= 0x80) return false;
    return true;
}

size_t tpl_utf8_len(tpl_str s) {
    if (str_is_ascii(s)) return s.n;
    size_t n = 0;
    for (size_t i = 0; i < s.n;) {
        tpl_utf8_next(s.p, s.n, &i);
        n++;
    }
    return n;
}

size_t tpl_utf8_offset(tpl_str s, size_t ci) {
    if (str_is_ascii(s)) return ci < s.n ? ci : s.n;
    size_t i = 0;
    while (ci > 0 && i < s.n) {
        tpl_utf8_next(s.p, s.n, &i);
        ci--;
    }
    return i;
}

bool tpl_is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool tpl_str_eqc(tpl_str a, const char *c) {
    size_t n = strlen(c);
    return a.n == n && memcmp(a.p, c, n) == 0;
}

/* ---- construction ---------------------------------------------------------------------- */

tpl_str tpl_str_dup(tpl_arena *a, const char *p, size_t n) {
    if (n == 0) return (tpl_str){"", 0};
    char *d = tpl_alloc(a, n + 1);
    if (!d) return (tpl_str){NULL, 0};
    memcpy(d, p, n);
    d[n] = 0;
    return (tpl_str){d, n};
}

/* x + y; returns x or y itself when the other is empty (both must outlive the result) */
tpl_str tpl_str_cat(tpl_arena *a, tpl_str x, tpl_str y) {
    if (y.n == 0) return x;
    if (x.n == 0) return y;
    size_t n = 0;
    if (!brisk_add_size(x.n, y.n, &n)) return (tpl_str){NULL, 0};
    char *d = tpl_alloc(a, n + 1);
    if (!d) return (tpl_str){NULL, 0};
    memcpy(d, x.p, x.n);
    memcpy(d + x.n, y.p, y.n);
    d[n] = 0;
    return (tpl_str){d, n};
}

tpl_value tpl_str_value(tpl_arena *a, const char *cstr) { return tpl_strv(tpl_str_dup(a, cstr, strlen(cstr))); }

tpl_list *tpl_list_new(tpl_arena *a, size_t cap, tpl_list_kind kind) {
    tpl_list *l = tpl_alloc(a, sizeof *l);
    if (!l) return NULL;
    memset(l, 0, sizeof *l);
    l->kind = (uint8_t)kind;
    if (cap) {
        l->v = tpl_alloc_array(a, cap, sizeof(tpl_value));
        if (!l->v) return NULL;
        l->cap = cap;
    }
    return l;
}

bool tpl_list_push(tpl_arena *a, tpl_list *l, tpl_value v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        tpl_value *nv = tpl_alloc_array(a, cap, sizeof(tpl_value));
        if (!nv) return false;
        if (l->n) memcpy(nv, l->v, l->n * sizeof(tpl_value));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    return true;
}

tpl_dict *tpl_dict_new(tpl_arena *a, size_t cap) {
    tpl_dict *d = tpl_alloc(a, sizeof *d);
    if (!d) return NULL;
    memset(d, 0, sizeof *d);
    if (cap) {
        d->k = tpl_alloc_array(a, cap, sizeof(tpl_value));
        d->v = tpl_alloc_array(a, cap, sizeof(tpl_value));
        d->h = tpl_alloc_array(a, cap, sizeof(uint64_t));
        if (!d->k || !d->v || !d->h) return NULL;
        d->cap = cap;
    }
    return d;
}

/* ---- hashing ------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x) {   /* a full-avalanche finalizer (splitmix64's) */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t tpl_hash_str(tpl_str s) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ s.n;
    size_t i = 0;
    for (; i + 8 <= s.n; i += 8) {
        uint64_t w;
        memcpy(&w, s.p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 32;
    }
    uint64_t t = 0;
    for (size_t k = 0; i + k < s.n; k++) t |= (uint64_t)(unsigned char)s.p[i + k] << (8 * k);
    return mix64(h ^ t);
}

enum { H_NONE = 1, H_UNDEF, H_TUPLE, H_RANGE, H_ID };

static int hash_walk(const tpl_value *v, uint64_t *h, tpl_walk *w, int depth) {
    switch ((tpl_type)v->type) {
    case TPL_UNDEF: *h = H_UNDEF; return 1;
    case TPL_NONE: *h = H_NONE; return 1;
    case TPL_BOOL: *h = mix64((uint64_t)v->u.b); return 1;
    case TPL_INT: *h = mix64((uint64_t)v->u.i); return 1;
    case TPL_FLOAT: {
        /* an integral float equals the int of its value, so it hashes as that int */
        double f = v->u.f;
        if (f == trunc(f) && f >= -9223372036854775808.0 && f < 9223372036854775808.0) {
            *h = mix64((uint64_t)(int64_t)f);
        } else {
            uint64_t bits;
            memcpy(&bits, &f, sizeof bits);
            *h = mix64(bits ^ 0x5bd1e995u);
        }
        return 1;
    }
    case TPL_STR:
        if (!tpl_walk_charge(w, 1 + v->u.s.n / 64)) return -1;
        *h = tpl_hash_str(v->u.s);
        return 1;
    case TPL_DICT: return 0;
    case TPL_LIST: {
        const tpl_list *l = v->u.list;
        switch ((tpl_list_kind)l->kind) {
        case TPL_LK_LIST: case TPL_LK_KEYS: case TPL_LK_ITEMS: return 0;
        case TPL_LK_RANGE:   /* equal ranges have the same length, first item and step */
            *h = mix64(H_RANGE ^ mix64(l->n) ^ (l->n ? mix64((uint64_t)l->r_start + 1) : 0) ^
                       (l->n > 1 ? mix64((uint64_t)l->r_step + 2) * 3 : 0));
            return 1;
        case TPL_LK_GEN: case TPL_LK_VALUES:   /* compared by identity */
            *h = mix64((uint64_t)(uintptr_t)l);
            return 1;
        case TPL_LK_TUPLE: break;
        }
        if (!tpl_walk_enter(w, depth)) return -1;
        uint64_t acc = H_TUPLE ^ l->n;
        for (size_t i = 0; i < l->n; i++) {
            uint64_t e;
            int r = hash_walk(&l->v[i], &e, w, depth + 1);
            if (r <= 0) return r;
            acc = (acc ^ e) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
        }
        *h = mix64(acc);
        return 1;
    }
    case TPL_NS: *h = mix64((uint64_t)(uintptr_t)v->u.dict); return 1;
    case TPL_FUNC: *h = mix64((uint64_t)(uintptr_t)v->u.self ^ v->fn); return 1;
    case TPL_MACRO: *h = mix64((uint64_t)(uintptr_t)v->u.macro); return 1;
    case TPL_LOOP: *h = mix64((uint64_t)(uintptr_t)v->u.loop); return 1;
    }
    *h = H_ID;
    return 1;
}

int tpl_hash(const tpl_value *v, uint64_t *h, tpl_walk *w) { return hash_walk(v, h, w, 0); }

/* ---- dicts ------------------------------------------------------------------------------ */

/* Rebuild the index with room for at least `want` entries at half load. */
static bool dict_reindex(tpl_arena *a, tpl_dict *d, size_t want) {
    size_t ns = 32;
    while (ns < 2 * want) ns *= 2;
    uint32_t *slots = tpl_alloc_array(a, ns, sizeof *slots);
    if (!slots) return false;
    memset(slots, 0, ns * sizeof *slots);
    for (size_t i = 0; i < d->n; i++) {
        size_t s = (size_t)d->h[i] & (ns - 1);
        while (slots[s]) s = (s + 1) & (ns - 1);
        slots[s] = (uint32_t)(i + 1);
    }
    d->slots = slots;
    d->nslots = ns;
    return true;
}

static bool key_eq(const tpl_value *x, const tpl_value *k, tpl_walk *w) {
    if (k->type == TPL_STR) return x->type == TPL_STR && tpl_str_eq(x->u.s, k->u.s);
    return tpl_eq(x, k, w, 0);
}

/* Entry index of k, or -1 (absent, or the walk stopped). */
static ptrdiff_t dict_index(const tpl_dict *d, const tpl_value *k, uint64_t h, tpl_walk *w) {
    if (!d->slots) {
        for (size_t i = 0; i < d->n; i++) {
            if (d->h[i] == h && key_eq(&d->k[i], k, w)) return (ptrdiff_t)i;
            if (w->fail) return -1;
        }
        return -1;
    }
    size_t mask = d->nslots - 1;
    for (size_t s = (size_t)h & mask; d->slots[s]; s = (s + 1) & mask) {
        size_t i = d->slots[s] - 1;
        if (d->h[i] == h && key_eq(&d->k[i], k, w)) return (ptrdiff_t)i;
        if (w->fail) return -1;
    }
    return -1;
}

tpl_value *tpl_dict_find(const tpl_dict *d, const tpl_value *k, uint64_t h, tpl_walk *w) {
    ptrdiff_t i = dict_index(d, k, h, w);
    return i < 0 ? NULL : &d->v[i];
}

tpl_value *tpl_dict_gets(const tpl_dict *d, tpl_str k) {
    tpl_value kv = tpl_strv(k);
    tpl_walk w = {.limit = UINT64_MAX};   /* string keys never walk */
    return tpl_dict_find(d, &kv, tpl_hash_str(k), &w);
}

bool tpl_dict_append(tpl_arena *a, tpl_dict *d, tpl_value k, uint64_t h, tpl_value v) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        tpl_value *nk = tpl_alloc_array(a, cap, sizeof(tpl_value));
        tpl_value *nv = tpl_alloc_array(a, cap, sizeof(tpl_value));
        uint64_t *nh = tpl_alloc_array(a, cap, sizeof(uint64_t));
        if (!nk || !nv || !nh) return false;
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(tpl_value));
            memcpy(nv, d->v, d->n * sizeof(tpl_value));
            memcpy(nh, d->h, d->n * sizeof(uint64_t));
        }
        d->k = nk;
        d->v = nv;
        d->h = nh;
        d->cap = cap;
    }
    if (d->n >= UINT32_MAX - 1) return false;
    size_t i = d->n;
    d->k[i] = k;
    d->v[i] = v;
    d->h[i] = h;
    d->n++;
    if (d->slots && 2 * d->n <= d->nslots) {
        size_t mask = d->nslots - 1, s = (size_t)h & mask;
        while (d->slots[s]) s = (s + 1) & mask;
        d->slots[s] = (uint32_t)(i + 1);
    } else if (d->n > TPL_DICT_LINEAR && !dict_reindex(a, d, d->n * 2)) {
        d->n--;
        return false;
    }
    return true;
}

bool tpl_dict_put(tpl_arena *a, tpl_dict *d, tpl_value k, uint64_t h, tpl_value v, tpl_walk *w) {
    ptrdiff_t i = dict_index(d, &k, h, w);
    if (w->fail) return false;
    if (i >= 0) {
        d->v[i] = v;
        return true;
    }
    return tpl_dict_append(a, d, k, h, v);
}

bool tpl_dict_puts(tpl_arena *a, tpl_dict *d, tpl_str k, tpl_value v) {
    tpl_walk w = {.limit = UINT64_MAX};
    return tpl_dict_put(a, d, tpl_strv(k), tpl_hash_str(k), v, &w);
}

tpl_dict *tpl_dict_copy(tpl_arena *a, const tpl_dict *d) {
    tpl_dict *r = tpl_dict_new(a, d->n);
    if (!r) return NULL;
    if (d->n) {
        memcpy(r->k, d->k, d->n * sizeof *d->k);
        memcpy(r->v, d->v, d->n * sizeof *d->v);
        memcpy(r->h, d->h, d->n * sizeof *d->h);
    }
    r->n = d->n;
    if (d->slots) {
        r->slots = tpl_alloc_array(a, d->nslots, sizeof *r->slots);
        if (!r->slots) return NULL;
        memcpy(r->slots, d->slots, d->nslots * sizeof *r->slots);
        r->nslots = d->nslots;
    }
    return r;
}

/* ---- predicates ---------------------------------------------------------------------- */

bool tpl_truthy(const tpl_value *v) {
    switch ((tpl_type)v->type) {
    case TPL_UNDEF: case TPL_NONE: return false;
    case TPL_BOOL: return v->u.b;
    case TPL_INT: return v->u.i != 0;
    case TPL_FLOAT: return v->u.f != 0.0;
    case TPL_STR: return v->u.s.n != 0;
    case TPL_LIST: return v->u.list->kind == TPL_LK_GEN || v->u.list->n != 0;
    case TPL_DICT: return v->u.dict->n != 0;
    case TPL_NS: case TPL_FUNC: case TPL_MACRO: case TPL_LOOP: return true;
    }
    return false;
}

const char *tpl_type_name(const tpl_value *v) {
    switch ((tpl_type)v->type) {
    case TPL_UNDEF: return "Undefined";
    case TPL_NONE: return "NoneType";
    case TPL_BOOL: return "bool";
    case TPL_INT: return "int";
    case TPL_FLOAT: return "float";
    case TPL_STR: return v->flags & TPL_F_MARKUP ? "Markup" : "str";
    case TPL_LIST:
        switch ((tpl_list_kind)v->u.list->kind) {
        case TPL_LK_LIST: return "list";
        case TPL_LK_TUPLE: return "tuple";
        case TPL_LK_GEN: return "generator";
        case TPL_LK_RANGE: return "range";
        case TPL_LK_KEYS: return "dict_keys";
        case TPL_LK_VALUES: return "dict_values";
        case TPL_LK_ITEMS: return "dict_items";
        }
        return "list";
    case TPL_DICT: return "dict";
    case TPL_NS: return "Namespace";
    case TPL_FUNC: return "builtin_function_or_method";
    case TPL_MACRO: return "Macro";
    case TPL_LOOP: return "LoopContext";
    }
    return "object";
}

void tpl_object_desc(const tpl_value *v, char *buf, size_t n) {
    switch ((tpl_type)v->type) {
    case TPL_NONE: snprintf(buf, n, "None"); return;
    case TPL_NS: snprintf(buf, n, "jinja2.utils.Namespace object"); return;
    case TPL_MACRO: snprintf(buf, n, "jinja2.runtime.Macro object"); return;
    case TPL_LOOP: snprintf(buf, n, "jinja2.runtime.LoopContext object"); return;
    case TPL_UNDEF: snprintf(buf, n, "jinja2.runtime.Undefined object"); return;
    case TPL_STR:
        if (v->flags & TPL_F_MARKUP) { snprintf(buf, n, "markupsafe.Markup object"); return; }
        break;
    default: break;
    }
    snprintf(buf, n, "%s object", tpl_type_name(v));
}

/* ---- comparison ------------------------------------------------------------------------ */

static bool num_of(const tpl_value *v, bool *is_float, int64_t *i, double *f) {
    if (v->type == TPL_INT) { *is_float = false; *i = v->u.i; return true; }
    if (v->type == TPL_BOOL) { *is_float = false; *i = v->u.b; return true; }
    if (v->type == TPL_FLOAT) { *is_float = true; *f = v->u.f; return true; }
    return false;
}

/* Exact comparison of an int64 with a double, as Python does (-1, 0, 1; 2 = unordered). */
static int cmp_int_float(int64_t i, double f) {
    if (isnan(f)) return 2;
    if (f >= 9223372036854775808.0) return -1;
    if (f < -9223372036854775808.0) return 1;
    double t = trunc(f);
    int64_t ti = (int64_t)t;
    if (i < ti) return -1;
    if (i > ti) return 1;
    return f > t ? -1 : f < t ? 1 : 0;
}

static int num_cmp(const tpl_value *a, const tpl_value *b) {
    bool fa = false, fb = false;
    int64_t ia = 0, ib = 0;
    double da = 0, db = 0;
    num_of(a, &fa, &ia, &da);
    num_of(b, &fb, &ib, &db);
    if (!fa && !fb) return ia < ib ? -1 : ia > ib;
    if (fa && fb) return isnan(da) || isnan(db) ? 2 : da < db ? -1 : da > db;
    if (!fa) return cmp_int_float(ia, db);
    int r = cmp_int_float(ib, da);
    return r == 2 ? 2 : -r;
}

static bool is_seq_kind(const tpl_value *v, tpl_list_kind k) { return v->type == TPL_LIST && v->u.list->kind == k; }

/* Python ==, walking nested containers under w's depth and work limits. */
bool tpl_eq(const tpl_value *a, const tpl_value *b, tpl_walk *w, int depth) {
    if (tpl_is_num(a) && tpl_is_num(b)) return num_cmp(a, b) == 0;
    if (a->type != b->type) return false;
    switch ((tpl_type)a->type) {
    case TPL_UNDEF: case TPL_NONE: return true;
    case TPL_STR:
        if (a->u.s.n != b->u.s.n) return false;
        if (a->u.s.p == b->u.s.p) return true;
        return tpl_walk_charge(w, 1 + a->u.s.n / 64) && tpl_str_eq(a->u.s, b->u.s);
    case TPL_LIST: {
        const tpl_list *x = a->u.list, *y = b->u.list;
        if (x == y) return true;
        if (x->kind != y->kind) return false;
        if (x->kind == TPL_LK_GEN || x->kind == TPL_LK_VALUES) return false;   /* identity only */
        if (x->kind == TPL_LK_RANGE) {
            if (x->n != y->n) return false;
            if (x->n == 0) return true;
            return x->r_start == y->r_start && (x->n == 1 || x->r_step == y->r_step);
        }
        if (x->n != y->n) return false;
        if (!tpl_walk_enter(w, depth) || !tpl_walk_charge(w, x->n)) return false;
        if (x->kind == TPL_LK_KEYS || x->kind == TPL_LK_ITEMS) {
            /* set semantics; views of big dicts are not compared in real templates, so a
             * scan (charged per pair) stands in for Python's hash lookups */
            for (size_t i = 0; i < x->n; i++) {
                bool found = false;
                for (size_t j = 0; j < y->n && !found; j++) {
                    if (!tpl_walk_charge(w, 1)) return false;
                    found = tpl_eq(&x->v[i], &y->v[j], w, depth + 1);
                    if (w->fail) return false;
                }
                if (!found) return false;
            }
            return true;
        }
        for (size_t i = 0; i < x->n; i++)
            if (!tpl_eq(&x->v[i], &y->v[i], w, depth + 1)) return false;
        return true;
    }
    case TPL_DICT: {
        const tpl_dict *x = a->u.dict, *y = b->u.dict;
        if (x == y) return true;
        if (x->n != y->n) return false;
        if (!tpl_walk_enter(w, depth)) return false;
        for (size_t i = 0; i < x->n; i++) {
            if (!tpl_walk_charge(w, 1)) return false;
            const tpl_value *o = tpl_dict_find(y, &x->k[i], x->h[i], w);
            if (!o || !tpl_eq(&x->v[i], o, w, depth + 1)) return false;
        }
        return true;
    }
    case TPL_NS: return a->u.dict == b->u.dict;
    case TPL_FUNC: return a->fn == b->fn && a->u.self == b->u.self;
    case TPL_MACRO: return a->u.macro == b->u.macro;
    case TPL_LOOP: return a->u.loop == b->u.loop;
    default: return false;
    }
}

static bool lt_walk(const tpl_value *a, const tpl_value *b, bool *lt, char *msg, size_t msgn, tpl_walk *w, int depth) {
    msg[0] = 0;
    if (tpl_is_num(a) && tpl_is_num(b)) {
        *lt = num_cmp(a, b) == -1;
        return true;
    }
    if (a->type == TPL_STR && b->type == TPL_STR) {
        size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
        if (!tpl_walk_charge(w, 1 + n / 64)) return false;
        int r = n ? memcmp(a->u.s.p, b->u.s.p, n) : 0;
        *lt = r < 0 || (r == 0 && a->u.s.n < b->u.s.n);
        return true;
    }
    if ((is_seq_kind(a, TPL_LK_LIST) && is_seq_kind(b, TPL_LK_LIST)) ||
        (is_seq_kind(a, TPL_LK_TUPLE) && is_seq_kind(b, TPL_LK_TUPLE))) {
        const tpl_list *x = a->u.list, *y = b->u.list;
        if (!tpl_walk_enter(w, depth)) return false;
        size_t i = 0;
        while (i < x->n && i < y->n && tpl_eq(&x->v[i], &y->v[i], w, depth + 1)) i++;
        if (w->fail) return false;
        if (i < x->n && i < y->n) return lt_walk(&x->v[i], &y->v[i], lt, msg, msgn, w, depth + 1);
        *lt = x->n < y->n;
        return true;
    }
    snprintf(msg, msgn, "'<' not supported between instances of '%s' and '%s'", tpl_type_name(a), tpl_type_name(b));
    return false;
}

bool tpl_lt(const tpl_value *a, const tpl_value *b, bool *lt, char *msg, size_t msgn, tpl_walk *w) {
    return lt_walk(a, b, lt, msg, msgn, w, 0);
}

/* ---- number formatting ------------------------------------------------------------------- */

/* Digits (without dot) and decimal exponent of "%.*e" output. */
static int parse_e(const char *buf, char *digits, int *exp10) {
    int nd = 0;
    const char *p = buf + (buf[0] == '-');
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < 20) digits[nd++] = *p;
    *exp10 = *p == 'e' ? atoi(p + 1) : 0;
    return nd;
}

static double digits_value(bool neg, const char *digits, int nd, int exp10) {
    char buf[48];
    int k = 0;
    if (neg) buf[k++] = '-';
    buf[k++] = digits[0];
    buf[k++] = '.';
    for (int i = 1; i < nd; i++) buf[k++] = digits[i];
    snprintf(buf + k, sizeof buf - (size_t)k, "e%d", exp10);
    return strtod(buf, NULL);
}

/* Python's float.__repr__: the shortest digit string that reads back as f
 * (the nearest one when two of that length do), shown as fixed point for
 * exponents -4..15 and in scientific notation otherwise. */
void tpl_float_repr(double f, char out[32]) {
    if (isnan(f)) { strcpy(out, "nan"); return; }
    if (isinf(f)) { strcpy(out, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { strcpy(out, signbit(f) ? "-0.0" : "0.0"); return; }
    bool neg = f < 0;
    char buf[48], digits[24];
    int nd = 0, exp10 = 0;
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        nd = parse_e(buf, digits, &exp10);
        double back = strtod(buf, NULL);
        if (back == f) break;
        /* the nearest prec-digit decimal misses; its neighbour on the other side of f may not */
        char alt[24];
        int ae = exp10;
        memcpy(alt, digits, (size_t)nd);
        bool up = (back < f) != neg;
        int i = nd - 1;
        if (up) {
            while (i >= 0 && alt[i] == '9') alt[i--] = '0';
            if (i >= 0) alt[i]++;
            else { alt[0] = '1'; for (int j = 1; j < nd; j++) alt[j] = '0'; ae++; }
        } else {
            while (i >= 0 && alt[i] == '0') alt[i--] = '9';
            if (i > 0 || (i == 0 && alt[0] > '1')) alt[i]--;
            else if (i == 0) { /* 1000.. -> 9999.. one decade down */
                if (nd == 1) { alt[0] = '9'; ae--; }
                else { for (int j = 0; j < nd; j++) alt[j] = '9'; ae--; }
            }
        }
        if (digits_value(neg, alt, nd, ae) == f) {
            memcpy(digits, alt, (size_t)nd);
            exp10 = ae;
            break;
        }
    }
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = out;
    if (neg) *o++ = '-';
    if (exp10 < -4 || exp10 >= 16) {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        snprintf(o, (size_t)(out + 32 - o), "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        return;
    }
    if (exp10 < 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -exp10 - 1; i++) *o++ = '0';
        for (int i = 0; i < nd; i++) *o++ = digits[i];
    } else {
        for (int i = 0; i <= exp10; i++) *o++ = i < nd ? digits[i] : '0';
        *o++ = '.';
        if (nd > exp10 + 1)
            for (int i = exp10 + 1; i < nd; i++) *o++ = digits[i];
        else
            *o++ = '0';
    }
    *o = 0;
}

/* ---- JSON (json.dumps) ---------------------------------------------------------------------- */

static bool json_str(tpl_buf *b, tpl_str s, bool ascii) {
    if (!tpl_buf_putc(b, '"')) return false;
    size_t run = 0;
    for (size_t i = 0; i < s.n;) {
        unsigned char c = (unsigned char)s.p[i];
        const char *esc = NULL;
        char tmp[16];
        size_t start = i;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20 || (ascii && c == 0x7F)) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            esc = tmp;
        } else if (ascii && c >= 0x80) {
            uint32_t cp = tpl_utf8_next(s.p, s.n, &i);
            if (!tpl_buf_put(b, s.p + run, start - run)) return false;
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            }
            if (!tpl_buf_puts(b, tmp)) return false;
            run = i;
            continue;
        }
        i++;
        if (esc) {
            if (!tpl_buf_put(b, s.p + run, start - run) || !tpl_buf_puts(b, esc)) return false;
            run = i;
        }
    }
    return tpl_buf_put(b, s.p + run, s.n - run) && tpl_buf_putc(b, '"');
}

static bool json_newline(tpl_buf *b, const tpl_json_opts *o, int level) {
    if (!tpl_buf_putc(b, '\n')) return false;
    for (int i = 0; i < level; i++)
        if (!tpl_buf_put(b, o->indent->p, o->indent->n)) return false;
    return true;
}

static bool json_float(tpl_buf *b, double f) {
    if (isnan(f)) return tpl_buf_puts(b, "NaN");
    if (isinf(f)) return tpl_buf_puts(b, f < 0 ? "-Infinity" : "Infinity");
    char tmp[32];
    tpl_float_repr(f, tmp);
    return tpl_buf_puts(b, tmp);
}

/* A dict key as json.dumps converts it (str, int, float, bool, None). */
static bool json_key(tpl_buf *b, const tpl_value *k, const tpl_json_opts *o, char *msg, size_t msgn) {
    char tmp[32];
    switch ((tpl_type)k->type) {
    case TPL_STR: return json_str(b, k->u.s, o->ensure_ascii);
    case TPL_INT: snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k->u.i); return tpl_buf_puts(b, tmp);
    case TPL_BOOL: return tpl_buf_puts(b, k->u.b ? "\"true\"" : "\"false\"");
    case TPL_NONE: return tpl_buf_puts(b, "\"null\"");
    case TPL_FLOAT:
        return tpl_buf_putc(b, '"') && json_float(b, k->u.f) && tpl_buf_putc(b, '"');
    default:
        snprintf(msg, msgn, "keys must be str, int, float, bool or None, not %s", tpl_type_name(k));
        return false;
    }
}

/* Stable merge sort of index array by dict key (Python sorted(d.items())). */
static bool sort_keys(const tpl_dict *d, size_t *idx, size_t *tmp, size_t n, char *msg, size_t msgn, tpl_walk *w) {
    if (n < 2) return true;
    size_t h = n / 2;
    if (!sort_keys(d, idx, tmp, h, msg, msgn, w) || !sort_keys(d, idx + h, tmp, n - h, msg, msgn, w)) return false;
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        bool lt;
        if (!tpl_walk_charge(w, 1) || !tpl_lt(&d->k[idx[j]], &d->k[idx[i]], &lt, msg, msgn, w)) return false;
        tmp[k++] = lt ? idx[j++] : idx[i++];
    }
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
    return true;
}

bool tpl_json_dump(tpl_buf *b, const tpl_value *v, const tpl_json_opts *o, int depth, char *msg, size_t msgn,
                   tpl_walk *w) {
    tpl_str item_sep = o->item_sep ? *o->item_sep : (o->indent ? TPL_STR_LIT(",") : TPL_STR_LIT(", "));
    tpl_str key_sep = o->key_sep ? *o->key_sep : TPL_STR_LIT(": ");
    char tmp[32];
    switch ((tpl_type)v->type) {
    case TPL_NONE: return tpl_buf_puts(b, "null");
    case TPL_BOOL: return tpl_buf_puts(b, v->u.b ? "true" : "false");
    case TPL_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v->u.i); return tpl_buf_puts(b, tmp);
    case TPL_FLOAT: return json_float(b, v->u.f);
    case TPL_STR: return json_str(b, v->u.s, o->ensure_ascii);
    case TPL_LIST: {
        const tpl_list *l = v->u.list;
        if (l->kind != TPL_LK_LIST && l->kind != TPL_LK_TUPLE) break;
        if (l->n == 0) return tpl_buf_puts(b, "[]");
        if (!tpl_walk_enter(w, depth)) return false;
        if (!tpl_buf_putc(b, '[')) return false;
        for (size_t i = 0; i < l->n; i++) {
            if (i && !tpl_buf_put(b, item_sep.p, item_sep.n)) return false;
            if (o->indent && !json_newline(b, o, depth + 1)) return false;
            if (!tpl_json_dump(b, &l->v[i], o, depth + 1, msg, msgn, w)) return false;
        }
        if (o->indent && !json_newline(b, o, depth)) return false;
        return tpl_buf_putc(b, ']');
    }
    case TPL_DICT: {
        const tpl_dict *d = v->u.dict;
        if (d->n == 0) return tpl_buf_puts(b, "{}");
        if (!tpl_walk_enter(w, depth)) return false;
        size_t *idx = malloc(2 * d->n * sizeof *idx);
        if (!idx) {
            snprintf(msg, msgn, "out of memory");
            return false;
        }
        for (size_t i = 0; i < d->n; i++) idx[i] = i;
        bool ok = !o->sort_keys || sort_keys(d, idx, idx + d->n, d->n, msg, msgn, w);
        if (ok) ok = tpl_buf_putc(b, '{');
        for (size_t i = 0; ok && i < d->n; i++) {
            if (i) ok = tpl_buf_put(b, item_sep.p, item_sep.n);
            if (ok && o->indent) ok = json_newline(b, o, depth + 1);
            ok = ok && json_key(b, &d->k[idx[i]], o, msg, msgn) && tpl_buf_put(b, key_sep.p, key_sep.n) &&
                 tpl_json_dump(b, &d->v[idx[i]], o, depth + 1, msg, msgn, w);
        }
        if (ok && o->indent) ok = json_newline(b, o, depth);
        if (ok) ok = tpl_buf_putc(b, '}');
        free(idx);
        if (!ok && !msg[0] && !w->fail) snprintf(msg, msgn, "output limit exceeded");
        return ok;
    }
    default: break;
    }
    snprintf(msg, msgn, "Object of type %s is not JSON serializable", tpl_type_name(v));
    return false;
}

/* ---- str() and repr() -------------------------------------------------------------------- */

bool tpl_uni_printable(uint32_t cp) {
    if (cp < 0x80) return cp >= 0x20 && cp < 0x7F;
    size_t lo = 0, hi = tpl_nonprint_nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < tpl_nonprint_ranges[mid][0]) hi = mid;
        else if (cp > tpl_nonprint_ranges[mid][1]) lo = mid + 1;
        else return false;
    }
    return true;
}

static bool repr_str(tpl_buf *b, tpl_str s) {
    bool has_sq = memchr(s.p, '\'', s.n) != NULL, has_dq = memchr(s.p, '"', s.n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    if (!tpl_buf_putc(b, q)) return false;
    size_t run = 0;
    for (size_t i = 0; i < s.n;) {
        size_t start = i;
        uint32_t c = tpl_utf8_next(s.p, s.n, &i);
        char tmp[16];
        const char *esc = NULL;
        if (c == (uint32_t)q || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            tmp[2] = 0;
            esc = tmp;
        } else if (c == '\t') esc = "\\t";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c < 0x20 || c == 0x7F) {
            snprintf(tmp, sizeof tmp, "\\x%02x", c);
            esc = tmp;
        } else if (c >= 0x80 && !tpl_uni_printable(c)) {
            if (c <= 0xFF) snprintf(tmp, sizeof tmp, "\\x%02x", c);
            else if (c <= 0xFFFF) snprintf(tmp, sizeof tmp, "\\u%04x", c);
            else snprintf(tmp, sizeof tmp, "\\U%08x", c);
            esc = tmp;
        }
        if (esc) {
            if (!tpl_buf_put(b, s.p + run, start - run) || !tpl_buf_puts(b, esc)) return false;
            run = i;
        }
    }
    return tpl_buf_put(b, s.p + run, s.n - run) && tpl_buf_putc(b, q);
}

/* Containers being printed, to print a recursive reference as [...] / {...}. */
typedef struct repr_state {
    const void *stack[TPL_MAX_NEST];
    int depth;
    char *msg;
    size_t msgn;
} repr_state;

static brisk_status repr_any(tpl_buf *b, const tpl_value *v, repr_state *st);

static brisk_status unsupported_repr(const tpl_value *v, repr_state *st) {
    snprintf(st->msg, st->msgn, "printing a %s (Python shows its memory address)", tpl_type_name(v));
    return BRISK_ERR_UNSUPPORTED;
}

#define PUT(expr) do { if (!(expr)) return BRISK_ERR_CAPACITY; } while (0)

static brisk_status repr_seq(tpl_buf *b, const tpl_value *items, size_t n, const char *open, const char *close,
                             bool one_comma, repr_state *st) {
    PUT(tpl_buf_puts(b, open));
    for (size_t i = 0; i < n; i++) {
        if (i) PUT(tpl_buf_puts(b, ", "));
        brisk_status s = repr_any(b, &items[i], st);
        if (s) return s;
    }
    if (one_comma && n == 1) PUT(tpl_buf_putc(b, ','));
    PUT(tpl_buf_puts(b, close));
    return BRISK_OK;
}

static brisk_status repr_dict(tpl_buf *b, const tpl_dict *d, repr_state *st) {
    PUT(tpl_buf_putc(b, '{'));
    for (size_t i = 0; i < d->n; i++) {
        if (i) PUT(tpl_buf_puts(b, ", "));
        brisk_status s = repr_any(b, &d->k[i], st);
        if (s) return s;
        PUT(tpl_buf_puts(b, ": "));
        s = repr_any(b, &d->v[i], st);
        if (s) return s;
    }
    PUT(tpl_buf_putc(b, '}'));
    return BRISK_OK;
}

static brisk_status repr_container(tpl_buf *b, const tpl_value *v, repr_state *st) {
    const void *id = v->type == TPL_LIST ? (const void *)v->u.list : (const void *)v->u.dict;
    for (int i = 0; i < st->depth; i++)
        if (st->stack[i] == id) {
            /* Python marks the re-entered container; a Namespace repr wraps its dict's marker */
            PUT(tpl_buf_puts(b, v->type == TPL_NS ? "<Namespace {...}>" : v->type == TPL_DICT ? "{...}"
                                : v->u.list->kind == TPL_LK_TUPLE ? "(...)" : "[...]"));
            return BRISK_OK;
        }
    if (st->depth >= (int)BRISK_ARRAY_LEN(st->stack)) {
        snprintf(st->msg, st->msgn, "value nested deeper than %d levels (in printing)", TPL_MAX_NEST);
        return BRISK_ERR_TEMPLATE;
    }
    st->stack[st->depth++] = id;
    brisk_status s = BRISK_OK;
    if (v->type == TPL_DICT) {
        s = repr_dict(b, v->u.dict, st);
    } else if (v->type == TPL_NS) {
        PUT(tpl_buf_puts(b, "<Namespace "));
        s = repr_dict(b, v->u.dict, st);
        if (!s) PUT(tpl_buf_putc(b, '>'));
    } else {
        const tpl_list *l = v->u.list;
        switch ((tpl_list_kind)l->kind) {
        case TPL_LK_LIST: s = repr_seq(b, l->v, l->n, "[", "]", false, st); break;
        case TPL_LK_TUPLE: s = repr_seq(b, l->v, l->n, "(", ")", true, st); break;
        case TPL_LK_KEYS: s = repr_seq(b, l->v, l->n, "dict_keys([", "])", false, st); break;
        case TPL_LK_VALUES: s = repr_seq(b, l->v, l->n, "dict_values([", "])", false, st); break;
        case TPL_LK_ITEMS: s = repr_seq(b, l->v, l->n, "dict_items([", "])", false, st); break;
        case TPL_LK_RANGE:
            if (l->r_step == 1) PUT(tpl_buf_printf(b, "range(%lld, %lld)", (long long)l->r_start, (long long)l->r_stop));
            else PUT(tpl_buf_printf(b, "range(%lld, %lld, %lld)", (long long)l->r_start, (long long)l->r_stop,
                                    (long long)l->r_step));
            break;
        case TPL_LK_GEN: s = unsupported_repr(v, st); break;
        }
    }
    st->depth--;
    return s;
}

static brisk_status repr_any(tpl_buf *b, const tpl_value *v, repr_state *st) {
    char tmp[40];
    switch ((tpl_type)v->type) {
    case TPL_UNDEF: PUT(tpl_buf_puts(b, "Undefined")); return BRISK_OK;
    case TPL_NONE: PUT(tpl_buf_puts(b, "None")); return BRISK_OK;
    case TPL_BOOL: PUT(tpl_buf_puts(b, v->u.b ? "True" : "False")); return BRISK_OK;
    case TPL_INT: PUT(tpl_buf_printf(b, "%lld", (long long)v->u.i)); return BRISK_OK;
    case TPL_FLOAT: tpl_float_repr(v->u.f, tmp); PUT(tpl_buf_puts(b, tmp)); return BRISK_OK;
    case TPL_STR:
        if (v->flags & TPL_F_MARKUP) {
            PUT(tpl_buf_puts(b, "Markup(") && repr_str(b, v->u.s) && tpl_buf_putc(b, ')'));
        } else {
            PUT(repr_str(b, v->u.s));
        }
        return BRISK_OK;
    case TPL_LIST: case TPL_DICT: case TPL_NS: return repr_container(b, v, st);
    case TPL_MACRO:
        PUT(tpl_buf_puts(b, "<Macro ") && repr_str(b, v->u.macro->node->name) && tpl_buf_putc(b, '>'));
        return BRISK_OK;
    case TPL_LOOP: {
        const tpl_loop *l = v->u.loop;
        PUT(tpl_buf_printf(b, "<LoopContext %zu/%zu>", l->i + 1, l->n));
        return BRISK_OK;
    }
    case TPL_FUNC: return unsupported_repr(v, st);
    }
    return BRISK_OK;
}

brisk_status tpl_repr(tpl_buf *b, const tpl_value *v, char *msg, size_t msgn) {
    repr_state st = {.depth = 0, .msg = msg, .msgn = msgn};
    msg[0] = 0;
    brisk_status s = repr_any(b, v, &st);
    if (s == BRISK_ERR_CAPACITY && !msg[0]) snprintf(msg, msgn, "output limit exceeded");
    return s;
}

brisk_status tpl_to_str(tpl_buf *b, const tpl_value *v, char *msg, size_t msgn) {
    switch ((tpl_type)v->type) {
    case TPL_UNDEF: return BRISK_OK;
    case TPL_STR:
        if (!tpl_buf_put(b, v->u.s.p, v->u.s.n)) {
            snprintf(msg, msgn, "output limit exceeded");
            return BRISK_ERR_CAPACITY;
        }
        return BRISK_OK;
    default: return tpl_repr(b, v, msg, msgn);
    }
}
#undef PUT
