/* nfa: the builder every front end writes into (constrain.h). States and edges live in two growing
 * arrays; a fragment is the range of both made while building it, so copying a fragment is a renumbered
 * copy of the states reachable from its start. */
#include "constrain/nfa_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NFA_MAX_STATES (1 << 20)      /* a grammar over this many states is refused, not built */
#define REPEAT_INLINE_STATES 4096     /* a repeat copies its body while the copies stay under this */
/* Parse positions reachable without reading a byte (frames one cset expansion visits): a big repeat of a
 * fragment that can match nothing is a chain of calls all reachable at once, and a repeat of such a
 * repeat multiplies the chains. Past this the grammar is refused rather than built. */
#define EPS_WIDTH_MAX (1 << 18)

cst_nfa *cst_nfa_new(void) { return calloc(1, sizeof(cst_nfa)); }

void cst_nfa_free(cst_nfa *n) {
    if (!n) return;
    free(n->final);
    free(n->e);
    free(n->rule_start);
    free(n->rule_end);
    free(n->rule_nullable);
    free(n->rule_width);
    free(n);
}

bool cst_nfa_failed(const cst_nfa *n) { return n->failed; }
const char *cst_nfa_error(const cst_nfa *n) { return n->err; }
int32_t cst_nfa_n_states(const cst_nfa *n) { return n->n_states; }

void cst_nfa_set_error(cst_nfa *n, const char *fmt, ...) {
    if (n->failed) return;
    n->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->err, sizeof n->err, fmt, ap);
    va_end(ap);
}

cst_mark cst_mark_here(const cst_nfa *n) { return (cst_mark){n->n_states, n->n_e}; }

cst_frag cst_frag_close(const cst_nfa *n, cst_mark m, int32_t start, int32_t end) {
    return (cst_frag){start, end, m.s, n->n_states, m.e, n->n_e};
}

int32_t cst_state(cst_nfa *n) {
    if (n->failed) return 0;
    if (n->n_states >= NFA_MAX_STATES) {
        cst_nfa_set_error(n, "the grammar needs more than %d automaton states", NFA_MAX_STATES);
        return 0;
    }
    if (n->n_states == n->cap_states) {
        const int32_t cap = n->cap_states ? n->cap_states * 2 : 1024;
        uint8_t *f = realloc(n->final, (size_t)cap);
        if (!f) { cst_nfa_set_error(n, "out of memory"); return 0; }
        n->final = f;
        n->cap_states = cap;
    }
    n->final[n->n_states] = 0;
    return n->n_states++;
}

static void add_edge(cst_nfa *n, int32_t from, int32_t to, int32_t rule, uint8_t lo, uint8_t hi, uint8_t kind) {
    if (n->failed) return;
    if (n->n_e == n->cap_e) {
        const int64_t cap = n->cap_e ? n->cap_e * 2 : 2048;
        cst_edge *e = realloc(n->e, (size_t)cap * sizeof *e);
        if (!e) { cst_nfa_set_error(n, "out of memory"); return; }
        n->e = e;
        n->cap_e = cap;
    }
    n->e[n->n_e++] = (cst_edge){from, to, rule, lo, hi, kind};
}

void cst_eps(cst_nfa *n, int32_t from, int32_t to) { add_edge(n, from, to, -1, 0, 0, CST_E_EPS); }
void cst_range(cst_nfa *n, int32_t from, uint8_t lo, uint8_t hi, int32_t to) { add_edge(n, from, to, -1, lo, hi, CST_E_RANGE); }
void cst_call(cst_nfa *n, int32_t from, int32_t rule, int32_t to) { add_edge(n, from, to, rule, 0, 0, CST_E_CALL); }

cst_frag cst_empty(cst_nfa *n) {
    cst_mark m = cst_mark_here(n);
    const int32_t s = cst_state(n);
    return cst_frag_close(n, m, s, s);
}

cst_frag cst_never(cst_nfa *n) {
    cst_mark m = cst_mark_here(n);
    const int32_t s = cst_state(n), e = cst_state(n);
    return cst_frag_close(n, m, s, e);
}

cst_frag cst_bytes(cst_nfa *n, const void *s, size_t len) {
    cst_mark m = cst_mark_here(n);
    const uint8_t *b = s;
    const int32_t start = cst_state(n);
    int32_t cur = start;
    for (size_t i = 0; i < len; i++) {
        const int32_t nx = cst_state(n);
        cst_range(n, cur, b[i], b[i], nx);
        cur = nx;
    }
    return cst_frag_close(n, m, start, cur);
}

cst_frag cst_seq(cst_nfa *n, cst_mark m, const cst_frag *parts, int32_t count) {
    if (count == 0) {
        const int32_t s = cst_state(n);
        return cst_frag_close(n, m, s, s);
    }
    for (int32_t i = 0; i + 1 < count; i++) cst_eps(n, parts[i].end, parts[i + 1].start);
    return cst_frag_close(n, m, parts[0].start, parts[count - 1].end);
}

cst_frag cst_alt(cst_nfa *n, cst_mark m, const cst_frag *parts, int32_t count) {
    if (count == 1) return cst_frag_close(n, m, parts[0].start, parts[0].end);
    const int32_t s = cst_state(n), e = cst_state(n);
    for (int32_t i = 0; i < count; i++) {
        cst_eps(n, s, parts[i].start);
        cst_eps(n, parts[i].end, e);
    }
    return cst_frag_close(n, m, s, e);
}

cst_frag cst_opt(cst_nfa *n, cst_frag f) {
    cst_mark m = {f.s_lo, f.e_lo};
    const int32_t s = cst_state(n), e = cst_state(n);
    cst_eps(n, s, f.start);
    cst_eps(n, f.end, e);
    cst_eps(n, s, e);
    return cst_frag_close(n, m, s, e);
}

/* The states of f reachable from its start (edges of f only; calls leave the fragment). */
cst_frag cst_copy(cst_nfa *n, cst_frag f) {
    cst_mark m = cst_mark_here(n);
    if (n->failed) return cst_frag_close(n, m, 0, 0);
    const int32_t ns = f.s_hi - f.s_lo;
    const int64_t ne = f.e_hi - f.e_lo;
    int32_t *map = malloc((size_t)ns * sizeof *map), *deg = calloc((size_t)ns + 1, sizeof *deg);
    int64_t *adj = malloc((size_t)(ne ? ne : 1) * sizeof *adj);
    int32_t *stack = malloc((size_t)ns * sizeof *stack);
    if (!map || !deg || !adj || !stack) {
        cst_nfa_set_error(n, "out of memory");
        free(map); free(deg); free(adj); free(stack);
        return cst_frag_close(n, m, 0, 0);
    }
    for (int64_t i = f.e_lo; i < f.e_hi; i++) deg[n->e[i].from - f.s_lo + 1]++;
    for (int32_t i = 0; i < ns; i++) deg[i + 1] += deg[i];
    int32_t *fill = malloc((size_t)ns * sizeof *fill);
    if (!fill) {
        cst_nfa_set_error(n, "out of memory");
        free(map); free(deg); free(adj); free(stack);
        return cst_frag_close(n, m, 0, 0);
    }
    memcpy(fill, deg, (size_t)ns * sizeof *fill);
    for (int64_t i = f.e_lo; i < f.e_hi; i++) adj[fill[n->e[i].from - f.s_lo]++] = i;
    free(fill);
    for (int32_t i = 0; i < ns; i++) map[i] = -1;
    int32_t sp = 0;
    map[f.start - f.s_lo] = cst_state(n);
    stack[sp++] = f.start - f.s_lo;
    while (sp > 0 && !n->failed) {
        const int32_t s = stack[--sp];
        for (int32_t k = deg[s]; k < deg[s + 1]; k++) {
            const int32_t t = n->e[adj[k]].to - f.s_lo;
            if (map[t] < 0) {
                map[t] = cst_state(n);
                stack[sp++] = t;
            }
        }
    }
    for (int32_t s = 0; s < ns && !n->failed; s++) {
        if (map[s] < 0) continue;
        for (int32_t k = deg[s]; k < deg[s + 1]; k++) {
            const cst_edge e = n->e[adj[k]];
            add_edge(n, map[s], map[e.to - f.s_lo], e.rule, e.lo, e.hi, e.kind);
        }
    }
    int32_t end = map[f.end - f.s_lo];
    if (end < 0) end = cst_state(n);   /* end unreachable: a fresh state nothing reaches */
    const int32_t start = map[f.start - f.s_lo];
    free(map); free(deg); free(adj); free(stack);
    return cst_frag_close(n, m, start, end);
}

int32_t cst_rule_reserve(cst_nfa *n) {
    if (n->failed) return 0;
    if (n->n_rules == n->cap_rules) {
        const int32_t cap = n->cap_rules ? n->cap_rules * 2 : 16;
        int32_t *s = realloc(n->rule_start, (size_t)cap * sizeof *s);
        if (!s) { cst_nfa_set_error(n, "out of memory"); return 0; }
        n->rule_start = s;
        int32_t *e = realloc(n->rule_end, (size_t)cap * sizeof *e);
        if (!e) { cst_nfa_set_error(n, "out of memory"); return 0; }
        n->rule_end = e;
        uint8_t *nl = realloc(n->rule_nullable, (size_t)cap);
        if (!nl) { cst_nfa_set_error(n, "out of memory"); return 0; }
        n->rule_nullable = nl;
        int64_t *w = realloc(n->rule_width, (size_t)cap * sizeof *w);
        if (!w) { cst_nfa_set_error(n, "out of memory"); return 0; }
        n->rule_width = w;
        n->cap_rules = cap;
    }
    n->rule_start[n->n_rules] = -1;
    n->rule_end[n->n_rules] = -1;
    n->rule_nullable[n->n_rules] = 0;
    n->rule_width[n->n_rules] = 0;
    return n->n_rules++;
}

/* What f reaches from its start without reading a byte (epsilon edges, and calls of rules known to match
 * the empty string): whether its end (nullable), and how many parse positions (each call edge reached
 * counts itself and the callee's own width). Calls of rules not yet defined count as non-nullable, so
 * nullable is a proof and width a lower bound of what the runtime meets. */
static void frag_eps_reach(cst_nfa *n, cst_frag f, bool *nullable, int64_t *width) {
    *nullable = false;
    *width = 0;
    const int32_t ns = f.s_hi - f.s_lo;
    if (n->failed || ns <= 0 || f.start < f.s_lo || f.start >= f.s_hi) return;
    int32_t *deg = calloc((size_t)ns + 1, sizeof *deg), *fill = malloc((size_t)ns * sizeof *fill);
    int32_t *stack = malloc((size_t)ns * sizeof *stack);
    int64_t *adj = malloc((size_t)(f.e_hi > f.e_lo ? f.e_hi - f.e_lo : 1) * sizeof *adj);
    uint8_t *seen = calloc((size_t)ns, 1);
    if (!deg || !fill || !stack || !adj || !seen) {
        cst_nfa_set_error(n, "out of memory");
        goto done;
    }
    for (int64_t i = f.e_lo; i < f.e_hi; i++)
        if (n->e[i].from >= f.s_lo && n->e[i].from < f.s_hi) deg[n->e[i].from - f.s_lo + 1]++;
    for (int32_t i = 0; i < ns; i++) deg[i + 1] += deg[i];
    memcpy(fill, deg, (size_t)ns * sizeof *fill);
    for (int64_t i = f.e_lo; i < f.e_hi; i++)
        if (n->e[i].from >= f.s_lo && n->e[i].from < f.s_hi) adj[fill[n->e[i].from - f.s_lo]++] = i;
    int32_t sp = 0;
    seen[f.start - f.s_lo] = 1;
    stack[sp++] = f.start - f.s_lo;
    while (sp > 0) {
        const int32_t s = stack[--sp];
        if (s + f.s_lo == f.end) *nullable = true;
        for (int32_t k = deg[s]; k < deg[s + 1]; k++) {
            const cst_edge *e = &n->e[adj[k]];
            if (e->kind == CST_E_RANGE) continue;
            if (e->kind == CST_E_CALL) {
                *width += 1 + n->rule_width[e->rule];
                if (*width > ((int64_t)1 << 40)) *width = (int64_t)1 << 40;
                if (!n->rule_nullable[e->rule]) continue;
            }
            const int32_t t = e->to - f.s_lo;
            if (t < 0 || t >= ns || seen[t]) continue;
            seen[t] = 1;
            stack[sp++] = t;
        }
    }
done:
    free(deg); free(fill); free(stack); free(adj); free(seen);
}

/* f matches at most the empty string: no edge of it reads a byte or calls a rule */
static bool frag_eps_only(const cst_nfa *n, cst_frag f) {
    for (int64_t i = f.e_lo; i < f.e_hi; i++)
        if (n->e[i].kind != CST_E_EPS) return false;
    return true;
}

void cst_rule_define(cst_nfa *n, int32_t rule, cst_frag body) {
    if (n->failed) return;
    n->rule_start[rule] = body.start;
    n->rule_end[rule] = body.end;
    n->final[body.end] = 1;
    bool nullable;
    int64_t width;
    frag_eps_reach(n, body, &nullable, &width);
    n->rule_nullable[rule] = nullable;
    n->rule_width[rule] = width;
}

bool cst_rule_defined(const cst_nfa *n, int32_t rule) { return !n->failed && n->rule_start[rule] >= 0; }

cst_frag cst_call_frag(cst_nfa *n, int32_t rule) {
    cst_mark m = cst_mark_here(n);
    const int32_t s = cst_state(n), e = cst_state(n);
    cst_call(n, s, rule, e);
    return cst_frag_close(n, m, s, e);
}

cst_frag cst_as_call(cst_nfa *n, cst_frag f) {
    /* the body's end gets the rule's final mark: give it a fresh end so f's inner states stay unmarked */
    cst_mark m = {f.s_lo, f.e_lo};
    const int32_t end = cst_state(n);
    cst_eps(n, f.end, end);
    const int32_t r = cst_rule_reserve(n);
    cst_rule_define(n, r, (cst_frag){f.start, end, f.s_lo, n->n_states, f.e_lo, n->n_e});
    /* the calling fragment is just its two states: copying it must not copy the body */
    (void)m;
    cst_mark cm = cst_mark_here(n);
    const int32_t s = cst_state(n), e = cst_state(n);
    cst_call(n, s, r, e);
    return cst_frag_close(n, cm, s, e);
}

static cst_frag repeat(cst_nfa *n, cst_frag f, int32_t min, int32_t max, bool inline_only);
cst_frag cst_repeat(cst_nfa *n, cst_frag f, int32_t min, int32_t max) { return repeat(n, f, min, max, false); }
cst_frag cst_repeat_inline(cst_nfa *n, cst_frag f, int32_t min, int32_t max) { return repeat(n, f, min, max, true); }

static cst_frag repeat(cst_nfa *n, cst_frag f, int32_t min, int32_t max, bool inline_only) {
    cst_mark m = {f.s_lo, f.e_lo};
    if (max == 0) {
        const int32_t s = cst_state(n);
        return cst_frag_close(n, m, s, s);
    }
    if (min == 1 && max == 1) return f;
    /* f matches only the empty string (or nothing): every repeat of it is f itself (plus the empty
     * string when none is required). Copying it would only build chains of empty steps, and a repeat of
     * such a chain made as calls multiplies them (all reachable at once at run time). */
    if (frag_eps_only(n, f)) return min == 0 ? cst_opt(n, f) : f;
    const int64_t copies = max < 0 ? min + 1 : max;
    /* refuse before copying what cannot fit */
    if (inline_only && (int64_t)(f.s_hi - f.s_lo) * copies > NFA_MAX_STATES) {
        cst_nfa_set_error(n, "the grammar needs more than %d automaton states (a repeat of %lld copies)", NFA_MAX_STATES, (long long)copies);
        return cst_frag_close(n, m, f.start, f.end);
    }
    if (!inline_only && copies > 1 && (int64_t)(f.s_hi - f.s_lo) * copies > REPEAT_INLINE_STATES) {
        bool nullable;
        int64_t width;
        frag_eps_reach(n, f, &nullable, &width);
        /* made of calls, a repeat of a fragment that can match nothing reaches every copy at once */
        if (nullable && copies * (1 + width) > EPS_WIDTH_MAX) {
            cst_nfa_set_error(n, "a repeat of %lld copies of a part that can match the empty string and already holds %lld "
                              "parse positions is too large (over %d positions reachable at once)",
                              (long long)copies, (long long)width, EPS_WIDTH_MAX);
            return cst_frag_close(n, m, f.start, f.end);
        }
        f = cst_as_call(n, f);
        n->call_repeats++;
    }
    const cst_frag body = f;
    const int32_t start = cst_state(n);
    int32_t cur = start;
    for (int32_t i = 0; i < min && !n->failed; i++) {
        const cst_frag c = i == 0 ? body : cst_copy(n, body);
        cst_eps(n, cur, c.start);
        cur = c.end;
    }
    const bool used = min > 0;
    if (max < 0) {
        /* cur -> loop hub: body* */
        const cst_frag c = used ? cst_copy(n, body) : body;
        const int32_t hub = cst_state(n);
        cst_eps(n, cur, hub);
        cst_eps(n, hub, c.start);
        cst_eps(n, c.end, hub);
        return cst_frag_close(n, m, start, hub);
    }
    const int32_t end = cst_state(n);
    for (int32_t i = min; i < max && !n->failed; i++) {
        const cst_frag c = (i == 0 && !used) ? body : cst_copy(n, body);
        cst_eps(n, cur, end);
        cst_eps(n, cur, c.start);
        cur = c.end;
    }
    cst_eps(n, cur, end);
    return cst_frag_close(n, m, start, end);
}

/* ---- intersection ------------------------------------------------------------------------------ */

#define PRODUCT_MAX_STATES 400000

typedef struct seg_adj {
    int32_t lo, n;
    int32_t *off;      /* [n + 1] */
    int64_t *edge;     /* edge indices */
} seg_adj;

static bool seg_build(const cst_nfa *n, cst_frag f, seg_adj *a) {
    a->lo = f.s_lo;
    a->n = f.s_hi - f.s_lo;
    a->off = calloc((size_t)a->n + 1, sizeof *a->off);
    a->edge = malloc((size_t)(f.e_hi - f.e_lo + 1) * sizeof *a->edge);
    if (!a->off || !a->edge) return false;
    for (int64_t i = f.e_lo; i < f.e_hi; i++) a->off[n->e[i].from - f.s_lo + 1]++;
    for (int32_t i = 0; i < a->n; i++) a->off[i + 1] += a->off[i];
    int32_t *fill = malloc((size_t)(a->n + 1) * sizeof *fill);
    if (!fill) return false;
    memcpy(fill, a->off, (size_t)a->n * sizeof *fill);
    for (int64_t i = f.e_lo; i < f.e_hi; i++) a->edge[fill[n->e[i].from - f.s_lo]++] = i;
    free(fill);
    return true;
}

typedef struct pair_map {
    uint64_t *key;
    int32_t *val;
    uint32_t cap, used;
} pair_map;

static int32_t pair_get(pair_map *m, uint64_t k, int32_t fresh, bool *added) {
    if ((m->used + 1) * 2 > m->cap) {
        const uint32_t cap = m->cap ? m->cap * 2 : 1024;
        uint64_t *nk = malloc(cap * sizeof *nk);
        int32_t *nv = malloc(cap * sizeof *nv);
        if (!nk || !nv) { free(nk); free(nv); return -1; }
        memset(nk, 0xff, cap * sizeof *nk);
        for (uint32_t i = 0; i < m->cap; i++) {
            if (m->key[i] == UINT64_MAX) continue;
            uint32_t j = (uint32_t)((m->key[i] * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
            while (nk[j] != UINT64_MAX) j = (j + 1) & (cap - 1);
            nk[j] = m->key[i];
            nv[j] = m->val[i];
        }
        free(m->key); free(m->val);
        m->key = nk; m->val = nv; m->cap = cap;
    }
    uint32_t j = (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32) & (m->cap - 1);
    while (m->key[j] != UINT64_MAX) {
        if (m->key[j] == k) { *added = false; return m->val[j]; }
        j = (j + 1) & (m->cap - 1);
    }
    m->key[j] = k;
    m->val[j] = fresh;
    m->used++;
    *added = true;
    return fresh;
}

cst_frag cst_intersect(cst_nfa *n, cst_frag a, cst_frag b) {
    cst_mark m = cst_mark_here(n);
    seg_adj A = {0}, B = {0};
    pair_map pm = {0};
    int64_t *work = NULL;
    int64_t wn = 0, wcap = 0;
    int32_t start = 0, end = -1;
    if (n->failed) goto done;
    for (int64_t i = a.e_lo; i < a.e_hi; i++)
        if (n->e[i].kind == CST_E_CALL) { cst_nfa_set_error(n, "cannot intersect a recursive or large sub-grammar"); goto done; }
    for (int64_t i = b.e_lo; i < b.e_hi; i++)
        if (n->e[i].kind == CST_E_CALL) { cst_nfa_set_error(n, "cannot intersect a recursive or large sub-grammar"); goto done; }
    if (!seg_build(n, a, &A) || !seg_build(n, b, &B)) { cst_nfa_set_error(n, "out of memory"); goto done; }
    bool added;
    start = cst_state(n);
    const uint64_t k0 = (uint64_t)(uint32_t)(a.start - a.s_lo) << 32 | (uint32_t)(b.start - b.s_lo);
    if (pair_get(&pm, k0, start, &added) < 0) { cst_nfa_set_error(n, "out of memory"); goto done; }
    wcap = 1024;
    work = malloc((size_t)wcap * sizeof *work);
    if (!work) { cst_nfa_set_error(n, "out of memory"); goto done; }
    work[wn++] = (int64_t)k0;
    /* edges are added after the BFS state is known: collect them as we go */
    while (wn > 0 && !n->failed) {
        const uint64_t k = (uint64_t)work[--wn];
        const int32_t p = (int32_t)(k >> 32), q = (int32_t)(k & 0xffffffffu);
        bool dummy;
        const int32_t from = pair_get(&pm, k, -1, &dummy);
        if (p == a.end - a.s_lo && q == b.end - b.s_lo) end = from;
        /* eps on either side, then synchronized byte ranges */
        for (int side = 0; side < 3; side++) {
            const seg_adj *X = side == 1 ? &B : &A;
            const int32_t x = side == 1 ? q : p;
            for (int32_t i = X->off[x]; i < X->off[x + 1]; i++) {
                const cst_edge ex = n->e[X->edge[i]];
                if (side < 2 && ex.kind != CST_E_EPS) continue;
                if (side == 2 && ex.kind != CST_E_RANGE) continue;
                int32_t jlo = 0, jhi = 1;
                if (side == 2) { jlo = B.off[q]; jhi = B.off[q + 1]; }
                for (int32_t j = jlo; j < jhi; j++) {
                    uint8_t lo = 0, hi = 0;
                    int32_t p2 = p, q2 = q;
                    if (side == 0) p2 = ex.to - a.s_lo;
                    else if (side == 1) q2 = ex.to - b.s_lo;
                    else {
                        const cst_edge ey = n->e[B.edge[j]];
                        if (ey.kind != CST_E_RANGE) continue;
                        lo = ex.lo > ey.lo ? ex.lo : ey.lo;
                        hi = ex.hi < ey.hi ? ex.hi : ey.hi;
                        if (lo > hi) continue;
                        p2 = ex.to - a.s_lo;
                        q2 = ey.to - b.s_lo;
                    }
                    const uint64_t k2 = (uint64_t)(uint32_t)p2 << 32 | (uint32_t)q2;
                    if (pm.used >= PRODUCT_MAX_STATES) { cst_nfa_set_error(n, "a string constraint is too large (more than %d states combined)", PRODUCT_MAX_STATES); break; }
                    const int32_t fresh = n->n_states;
                    const int32_t to = pair_get(&pm, k2, fresh, &added);
                    if (to < 0) { cst_nfa_set_error(n, "out of memory"); break; }
                    if (added) {
                        cst_state(n);
                        if (wn == wcap) {
                            int64_t *w = realloc(work, (size_t)wcap * 2 * sizeof *w);
                            if (!w) { cst_nfa_set_error(n, "out of memory"); break; }
                            work = w;
                            wcap *= 2;
                        }
                        work[wn++] = (int64_t)k2;
                    }
                    if (side == 2) cst_range(n, from, lo, hi, to);
                    else cst_eps(n, from, to);
                }
            }
        }
    }
done:
    free(A.off); free(A.edge); free(B.off); free(B.edge);
    free(pm.key); free(pm.val); free(work);
    if (n->failed) return cst_frag_close(n, m, cst_state(n), cst_state(n));
    if (end < 0) end = cst_state(n);
    return cst_frag_close(n, m, start, end);
}
