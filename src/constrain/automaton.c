/* automaton: the token engine (constrain.h has the design). Lazy subset construction per rule, a
 * graph-structured stack of hash-consed frames, hash-consed configuration sets with lazily filled byte
 * transition tables, and per-set masks computed by one walk of the vocabulary trie. */
#include "constrain/nfa_impl.h"

#include <stdlib.h>
#include <string.h>

#define UNKNOWN (-2)
#define CST_FAR INT32_MAX   /* no way to the end (never met after pruning) */
#define MAX_DEPTH 192                   /* stack frames; deeper nesting is rejected (stricter, never looser) */
#define MEM_BUDGET ((size_t)1 << 30)    /* lazily built tables and masks; past it the grammar stops growing */
#define SHORT_LEN 16                    /* mask sharing: tokens up to this long come from a state that agrees */

/* ---- vocabulary trie --------------------------------------------------------------------------- */

/* A UTF-8 decoder state: 0 at a character boundary; 1-3 continuation bytes [80,BF] still due; 4: after E0
 * (next in [A0,BF], then 1); 5: after ED ([80,9F], then 1); 6: after F0 ([90,BF], then 2); 7: after F4
 * ([80,8F], then 2). Returns the next state, -1 for a byte that is not well-formed there. */
static int8_t utf8_step(int8_t q, uint8_t b) {
    switch (q) {
    case 0:
        if (b < 0x80) return 0;
        if (b >= 0xC2 && b <= 0xDF) return 1;
        if (b == 0xE0) return 4;
        if (b == 0xED) return 5;
        if (b >= 0xE1 && b <= 0xEF) return 2;
        if (b == 0xF0) return 6;
        if (b >= 0xF1 && b <= 0xF3) return 3;
        if (b == 0xF4) return 7;
        return -1;
    case 1: case 2: case 3: return b >= 0x80 && b <= 0xBF ? (int8_t)(q - 1) : -1;
    case 4: return b >= 0xA0 && b <= 0xBF ? 1 : -1;
    case 5: return b >= 0x80 && b <= 0x9F ? 1 : -1;
    case 6: return b >= 0x90 && b <= 0xBF ? 2 : -1;
    case 7: return b >= 0x80 && b <= 0x8F ? 2 : -1;
    default: return -1;
    }
}

/* What the walk reads of a trie node, in one place, with every node's children next to each other
 * (breadth-first ids). A walk that takes whole subtrees at once visits nodes far apart in preorder: one
 * cache miss per node per array (eight of them) was most of its time. Here a node is one read, and the
 * siblings it goes through next are in the same or the next cache line. */
typedef struct cst_node {
    uint64_t sub64;        /* sub64[] of the preorder node */
    uint32_t kids;         /* the first child's id (children are consecutive) << 9 | the number of children */
    uint32_t tb;           /* wtok[] | flags << 21 | the edge byte << 24 */
} cst_node;
enum { NODE_MULTI = 1, NODE_U8 = 2, NODE_DEEP = 4 };
#define NODE_MAX_NODES (1 << 23)
#define NODE_MAX_VOCAB ((1 << 21) - 1)   /* wtok's "none" is n_vocab */
#define NODE_TOK(n) ((int32_t)((n).tb & 0x1FFFFF))
#define NODE_FLAGS(n) ((n).tb >> 21 & 7)
#define NODE_BYTE(n) ((uint8_t)((n).tb >> 24))
#define NODE_CHILD(n) ((int32_t)((n).kids >> 9))
#define NODE_N_CHILD(n) ((int32_t)((n).kids & 511))

struct cst_vocab {
    int32_t n_vocab;
    int32_t n_nodes;
    uint8_t *byte;         /* [n_nodes] the edge byte into the node (node 0 is the root) */
    uint8_t *depth;        /* [n_nodes] */
    uint8_t *multi;        /* [n_nodes] 1: more tokens than tok[] with these bytes (follow dup) */
    int32_t *skip;         /* [n_nodes] the first node after the subtree */
    int32_t *tok;          /* [n_nodes] a token whose bytes end here, -1 */
    int32_t *wtok;         /* [n_nodes] the same with n_vocab for none (the walk's spare bit) */
    int32_t *dup;          /* [n_vocab] the next token with the same bytes, -1 */
    uint64_t *sub;         /* [n_nodes][4] the bytes of the node's descendants (a 256-bit set) */
    uint64_t *sub64;       /* [n_nodes] the same by byte group (grp[]): one load to rule most subtrees in or out */
    uint8_t *u8;           /* [n_nodes] 1: every byte string below the node (after its own byte) is a prefix of
                            * well-formed UTF-8 and holds a byte >= 0x80 (the string-body shortcut in walk) */
    uint8_t *deep;         /* [n_nodes] 1: a token longer than SHORT_LEN bytes ends in the subtree (node included) */
    uint32_t *long_tok;    /* [words] the tokens longer than SHORT_LEN bytes */
    cst_node *node;        /* [n_nodes] the walk's copy of the arrays above, in breadth-first order */
    int32_t *pre;          /* [n_nodes] the preorder index of each breadth-first id (for sub[]) */
    int32_t *below;        /* [n_nodes][3] a breadth-first node's tokens in order[]: its own from tok_lo[i],
                            * those strictly below from tok_lo[i + 1] up to tok_lo[skip[i]] (its preorder i) */
    uint32_t *all_tok;     /* [words] the bit of every token in the trie (not those without bytes) */
    uint8_t grp[256];      /* byte -> one of 64 groups; JSON's structural bytes and digits are groups of their own */
    uint64_t grp_bytes[64][4];
    uint64_t grp_ascii;    /* the groups of bytes below 0x80 */
    int32_t *tok_lo;       /* [n_nodes + 1] the node's first token in order[]; its subtree's are up to tok_lo[skip] */
    int32_t *order;        /* tokens in trie preorder (duplicates included) */
    uint8_t *pieces;
    uint32_t *off;
    int32_t *eos;
    int32_t n_eos;
    int32_t max_len;
    bool all_bytes;        /* every single byte is a token of its own (so any byte string is tokenizable 1 byte : 1 token) */
};

static const uint8_t *sort_pieces;
static const uint32_t *sort_off;
static int cmp_tok(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const uint32_t lx = sort_off[x + 1] - sort_off[x], ly = sort_off[y + 1] - sort_off[y];
    const int c = memcmp(sort_pieces + sort_off[x], sort_pieces + sort_off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

void cst_vocab_free(cst_vocab *v) {
    if (!v) return;
    free(v->byte); free(v->depth); free(v->skip); free(v->tok); free(v->dup);
    free(v->sub); free(v->sub64); free(v->u8); free(v->deep); free(v->long_tok); free(v->tok_lo); free(v->order); free(v->multi); free(v->wtok); free(v->node); free(v->pre); free(v->below); free(v->all_tok);
    free(v->pieces); free(v->off); free(v->eos);
    free(v);
}

int32_t cst_vocab_n(const cst_vocab *v) { return v->n_vocab; }
bool cst_vocab_all_bytes(const cst_vocab *v) { return v->all_bytes; }
const uint8_t *cst_vocab_piece(const cst_vocab *v, int32_t tok, size_t *len) {
    if (tok < 0 || tok >= v->n_vocab) { *len = 0; return v->pieces; }
    *len = v->off[tok + 1] - v->off[tok];
    return v->pieces + v->off[tok];
}
int32_t cst_vocab_nodes(const cst_vocab *v);
int32_t cst_vocab_nodes(const cst_vocab *v) { return v->n_nodes; }

brisk_status cst_vocab_new(int32_t n_vocab, const uint8_t *pieces, const uint32_t *off, const int32_t *eos, int32_t n_eos,
                           cst_vocab **out, brisk_error *err) {
    *out = NULL;
    cst_vocab *v = calloc(1, sizeof *v);
    int32_t *order = malloc((size_t)(n_vocab ? n_vocab : 1) * sizeof *order);
    if (!v || !order) goto oom;
    v->n_vocab = n_vocab;
    const size_t total = off[n_vocab];
    v->pieces = malloc(total ? total : 1);
    v->off = malloc(((size_t)n_vocab + 1) * sizeof *v->off);
    v->eos = malloc((size_t)(n_eos ? n_eos : 1) * sizeof *v->eos);
    v->dup = malloc((size_t)(n_vocab ? n_vocab : 1) * sizeof *v->dup);
    if (!v->pieces || !v->off || !v->eos || !v->dup) goto oom;
    memcpy(v->pieces, pieces, total);
    memcpy(v->off, off, ((size_t)n_vocab + 1) * sizeof *off);
    memcpy(v->eos, eos, (size_t)n_eos * sizeof *eos);
    v->n_eos = n_eos;
    int32_t n_tok = 0;
    size_t max_nodes = 1;
    {
        uint64_t seen[4] = {0};
        for (int32_t i = 0; i < n_vocab; i++)
            if (off[i + 1] - off[i] == 1) seen[pieces[off[i]] >> 6] |= 1ull << (pieces[off[i]] & 63);
        v->all_bytes = !~seen[0] && !~seen[1] && !~seen[2] && !~seen[3];
    }
    for (int32_t i = 0; i < n_vocab; i++) {
        v->dup[i] = -1;
        const uint32_t len = off[i + 1] - off[i];
        if (len == 0) continue;
        if (len > 255) return free(order), cst_vocab_free(v), brisk_fail(err, BRISK_ERR_UNSUPPORTED, "token %d is %u bytes long (at most 255)", i, len);
        if ((int32_t)len > v->max_len) v->max_len = (int32_t)len;
        order[n_tok++] = i;
        max_nodes += len;
    }
    sort_pieces = pieces;
    sort_off = off;
    qsort(order, (size_t)n_tok, sizeof *order, cmp_tok);
    v->byte = malloc(max_nodes);
    v->depth = malloc(max_nodes);
    v->skip = malloc(max_nodes * sizeof *v->skip);
    v->tok = malloc(max_nodes * sizeof *v->tok);
    v->multi = calloc(max_nodes, 1);
    v->tok_lo = malloc((max_nodes + 1) * sizeof *v->tok_lo);
    v->order = malloc((size_t)(n_tok ? n_tok : 1) * sizeof *v->order);
    if (!v->byte || !v->depth || !v->skip || !v->tok || !v->tok_lo || !v->order || !v->multi) goto oom;
    int32_t n_order = 0;
    /* preorder: the path of open nodes; a node's subtree ends when it is popped */
    int32_t path[257];
    int32_t depth = 0, nn = 1;
    v->byte[0] = 0; v->depth[0] = 0; v->tok[0] = -1;
    path[0] = 0;
    const uint8_t *prev = NULL;
    uint32_t prev_len = 0;
    for (int32_t k = 0; k < n_tok; k++) {
        const int32_t t = order[k];
        const uint8_t *p = pieces + off[t];
        const uint32_t len = off[t + 1] - off[t];
        uint32_t common = 0;
        while (prev && common < len && common < prev_len && p[common] == prev[common]) common++;
        while ((uint32_t)depth > common) v->skip[path[depth--]] = nn;
        for (uint32_t i = common; i < len; i++) {
            v->byte[nn] = p[i];
            v->depth[nn] = (uint8_t)(i + 1);
            v->tok[nn] = -1;
            v->tok_lo[nn] = n_order;
            path[++depth] = nn++;
        }
        v->order[n_order++] = t;
        const int32_t node = path[depth];
        if (v->tok[node] < 0) {
            v->tok[node] = t;
        } else {
            int32_t last = v->tok[node];
            while (v->dup[last] >= 0) last = v->dup[last];
            v->dup[last] = t;
            v->multi[node] = 1;   /* the walk follows dup only where this says so */
        }
        prev = p;
        prev_len = len;
    }
    while (depth > 0) v->skip[path[depth--]] = nn;
    v->skip[0] = nn;
    v->n_nodes = nn;
    v->tok_lo[0] = 0;
    v->tok_lo[nn] = n_order;
    v->wtok = malloc((size_t)nn * sizeof *v->wtok);
    if (!v->wtok) goto oom;
    for (int32_t i = 0; i < nn; i++) v->wtok[i] = v->tok[i] >= 0 ? v->tok[i] : n_vocab;
    /* descendants' bytes, children before parents (reverse preorder) */
    v->sub = calloc((size_t)nn * 4, sizeof *v->sub);
    if (!v->sub) goto oom;
    {
        int32_t stack_depth[257];
        (void)stack_depth;
        for (int32_t i = nn - 1; i >= 1; i--) {
            /* the parent of i is the closest earlier node one level up */
            int32_t p2 = i - 1;
            while (v->depth[p2] >= v->depth[i]) p2--;
            uint64_t *ps = v->sub + (size_t)p2 * 4, *is = v->sub + (size_t)i * 4;
            for (int k = 0; k < 4; k++) ps[k] |= is[k];
            ps[v->byte[i] >> 6] |= 1ull << (v->byte[i] & 63);
        }
    }
    /* byte groups: controls; every printable byte that ends or structures a JSON token or a number on its
     * own, the other printable ones in pairs; continuation bytes; lead bytes */
    {
        static const char own[] = " \"\\,:{}[]-.+/0123456789e";
        int next = 1;
        for (int b = 0; b < 0x20; b++) v->grp[b] = 0;
        for (int b = 0x20; b < 0x80; b++)
            if (strchr(own, b)) v->grp[b] = (uint8_t)next++;
        int pair = 0;
        for (int b = 0x20; b < 0x80; b++) {
            if (strchr(own, b)) continue;
            v->grp[b] = (uint8_t)(next + pair / 2);
            pair++;
        }
        next += (pair + 1) / 2;
        for (int b = 0x80; b < 0xC0; b++) v->grp[b] = (uint8_t)next;
        for (int b = 0xC0; b < 0x100; b++) v->grp[b] = (uint8_t)(next + 1);
        for (int b = 0; b < 256; b++) v->grp_bytes[v->grp[b]][b >> 6] |= 1ull << (b & 63);
        for (int b = 0; b < 0x80; b++) v->grp_ascii |= 1ull << v->grp[b];
    }
    v->sub64 = calloc((size_t)nn, sizeof *v->sub64);
    if (!v->sub64) goto oom;
    for (int32_t i = 0; i < nn; i++) {
        const uint64_t *sb = v->sub + (size_t)i * 4;
        uint64_t m = 0;
        for (int k = 0; k < 4; k++)
            for (uint64_t w = sb[k]; w; w &= w - 1) m |= 1ull << v->grp[k * 64 + __builtin_ctzll(w)];
        v->sub64[i] = m;
    }
    /* subtrees that read as UTF-8 from their top: one preorder scan of each subtree with a non-ASCII byte,
     * the UTF-8 decoder's state kept per depth */
    v->u8 = calloc((size_t)nn, sizeof *v->u8);
    if (!v->u8) goto oom;
    for (int32_t i = 1; i < nn; i++) {
        const uint64_t *sb = v->sub + (size_t)i * 4;
        if (v->skip[i] <= i + 2 || !(sb[2] | sb[3])) continue;
        int8_t q[258];
        q[v->depth[i]] = 0;
        bool ok = true;
        for (int32_t j = i + 1; j < v->skip[i] && ok; j++) {
            const int8_t r = utf8_step(q[v->depth[j] - 1], v->byte[j]);
            q[v->depth[j]] = r;
            ok = r >= 0;
        }
        v->u8[i] = ok;
    }
    /* the longest token below each node (children of i are i + 1, skip[i + 1], ... up to skip[i]) */
    v->deep = calloc((size_t)nn, sizeof *v->deep);
    uint8_t *longest = calloc((size_t)nn, 1);
    v->long_tok = calloc(((size_t)n_vocab + 31) / 32 + 1, sizeof *v->long_tok);
    if (!v->deep || !longest || !v->long_tok) {
        free(longest);
        goto oom;
    }
    for (int32_t i = nn - 1; i >= 1; i--) {
        uint8_t m = v->depth[i];
        for (int32_t j = i + 1; j < v->skip[i]; j = v->skip[j]) m = longest[j] > m ? longest[j] : m;
        longest[i] = m;
        v->deep[i] = m > SHORT_LEN;
    }
    free(longest);
    for (int32_t t = 0; t < n_vocab; t++)
        if (off[t + 1] - off[t] > SHORT_LEN) v->long_tok[t >> 5] |= 1u << (t & 31);
    /* breadth-first ids: bfs[k] is the preorder node with id k; a node's children (i + 1, then each
     * child's skip, up to skip[i]) get consecutive ids */
    v->node = malloc((size_t)nn * sizeof *v->node);
    int32_t *bfs = v->pre = malloc((size_t)nn * sizeof *bfs);
    v->below = malloc((size_t)nn * 3 * sizeof *v->below);
    v->all_tok = calloc(((size_t)n_vocab + 31) / 32, sizeof *v->all_tok);
    if (!v->node || !bfs || !v->below || !v->all_tok) goto oom;
    for (int32_t k = 0; k < v->tok_lo[nn]; k++) v->all_tok[v->order[k] >> 5] |= 1u << (v->order[k] & 31);   /* the trie's */
    if (nn >= NODE_MAX_NODES || n_vocab >= NODE_MAX_VOCAB) {
        cst_vocab_free(v);
        free(order);
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "the vocabulary's token trie is too large for constraints (%d nodes, %d tokens; "
                          "at most %d and %d)", nn, n_vocab, NODE_MAX_NODES - 1, NODE_MAX_VOCAB - 1);
    }
    {
        int32_t head = 0, tail = 1;
        bfs[0] = 0;
        while (head < tail) {
            const int32_t k = head++, i = bfs[k];
            const int32_t first = tail;
            for (int32_t j = i + 1; j < v->skip[i]; j = v->skip[j]) bfs[tail++] = j;
            const uint32_t flags = (v->multi[i] ? NODE_MULTI : 0) | (v->u8[i] ? NODE_U8 : 0) | (v->deep[i] ? NODE_DEEP : 0);
            v->node[k] = (cst_node){.sub64 = v->sub64[i], .kids = (uint32_t)first << 9 | (uint32_t)(tail - first),
                                    .tb = (uint32_t)v->wtok[i] | flags << 21 | (uint32_t)v->byte[i] << 24};
            v->below[3 * k] = v->tok_lo[i];
            v->below[3 * k + 1] = v->tok_lo[i + 1];
            v->below[3 * k + 2] = v->tok_lo[v->skip[i]];
        }
    }
    free(order);
    *out = v;
    return BRISK_OK;
oom:
    free(order);
    cst_vocab_free(v);
    return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory building the vocabulary trie");
}

/* ---- hash tables of int sequences -------------------------------------------------------------- */

typedef struct ihash {
    int32_t *slot;     /* id or -1 */
    uint32_t cap;      /* power of two */
    uint32_t used;
} ihash;

static uint64_t hash_ints(const int32_t *a, int32_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint32_t)a[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

/* ---- the grammar ------------------------------------------------------------------------------- */

typedef struct dstate {
    int32_t set_off, set_n;     /* NFA states, sorted, in g->pool */
    int32_t *trans;             /* [256] lazily; UNKNOWN, CST_DEAD or a dstate */
    int32_t calls_off, calls_n; /* (rule, return dstate) pairs in g->calls; calls_n < 0: not computed */
    int32_t minb;               /* the fewest bytes that end the rule from here */
    uint8_t accepting;
} dstate;

typedef struct frame {
    int32_t d, parent, depth;   /* (d, parent) is the hash key */
    int32_t minb;               /* the fewest bytes that end the whole parse: this rule's, then the parents' */
} frame;

typedef struct cset {
    int32_t off, n;            /* frames in g->fpool */
    int32_t ready_off, ready_n;   /* expansion in g->rpool; ready_n < 0: not computed */
    int8_t accepting;          /* -1 unknown */
    int8_t utf8;               /* every well-formed multi-byte character leads back here: 1 yes, -1 no, 0 unknown */
    int32_t max_after;         /* the largest cmin of a state one allowed token leads to; -1: not known */
    uint32_t *mask;
} cset;

struct cst_grammar {
    const cst_vocab *v;
    /* the NFA, frozen: CSR adjacency */
    int32_t n_states;
    uint8_t *final;
    int32_t *adj_off;          /* [n_states + 1] */
    cst_edge *adj;
    int32_t n_rules;
    int32_t *rule_start;       /* NFA states */
    int32_t *rule_dstart;      /* dstate of each rule's start, -1 until needed */
    /* dstates */
    dstate *ds;
    int32_t n_ds, cap_ds;
    int32_t *pool;
    int64_t n_pool, cap_pool;
    int32_t *calls;
    int64_t n_calls, cap_calls;
    ihash ds_hash;
    /* frames */
    frame *fr;
    int32_t n_fr, cap_fr;
    ihash fr_hash;
    /* csets */
    cset *cs;
    int32_t n_cs, cap_cs;
    int32_t *T;                /* [n_cs][n_cls] byte-class transitions: UNKNOWN, CST_DEAD or a cset */
    uint8_t cls[256];          /* byte -> class: bytes no edge tells apart share one (and one transition) */
    int32_t n_cls;
    uint64_t cls_bytes[256][4];   /* the bytes of each class */
    uint64_t *SL;              /* [n_cs][4] bytes known to lead back to the same cset */
    int32_t *cmin;             /* [n_cs] the fewest bytes to a complete output (min over the cset's frames) */
    uint64_t *SLg;             /* [n_cs][2] SL by byte group: the groups it meets, the groups it holds whole */
    int64_t cap_T, cap_SL, cap_cmin, cap_SLg;
    int32_t *dist;             /* [n_states] the fewest bytes from an NFA state to its rule's end (calls at their rule's minimum) */
    int32_t *fpool;
    int64_t n_fpool, cap_fpool;
    int32_t *rpool;
    int64_t n_rpool, cap_rpool;
    ihash cs_hash;
    /* scratch */
    uint32_t *mark;            /* NFA state generation marks */
    uint32_t gen;
    int32_t *stack, *buf;
    int32_t *fmark;            /* frame marks for expansion */
    int32_t cap_fmark;
    uint32_t fgen;
    int32_t *fbuf;
    int64_t cap_fbuf;
    int32_t start;
    /* a recording walk's token ranges (in order[]) of subtrees taken whole and of dead ones */
    struct ranges { int32_t *r; int64_t n, cap, tokens; } bulk, dead;
    uint32_t *scratch;         /* the walk's mask, one spare word */
    size_t scratch_words;
    size_t bytes;
    bool over;                 /* the memory budget ran out */
    int64_t masks_computed, masks_cached, masks_shared;
    /* mask sharing (cst_mask): the last cset whose mask was walked, and the pair memo of the check */
    int32_t last_walked;
    uint64_t *pair_key;        /* [PAIR_SLOTS] (x, y) + 1, 0: empty in this generation */
    int32_t *pair_queue;       /* [2 * (PAIR_VISITS + 1)] agree's breadth-first queue */
    uint32_t *pair_gen;
    uint32_t pair_gen_now;
    uint8_t cls_rep[256];      /* a byte of each class */
    int32_t pair_visits, pair_budget;
    int64_t walk_nodes, last_walked_nodes;   /* nodes the last walk read, and those of last_walked's */
};

static bool grow(void **p, int64_t *cap, int64_t need, size_t elem, size_t *bytes) {
    if (need <= *cap) return true;
    int64_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return false;
    *bytes += (size_t)(c - *cap) * elem;
    *p = q;
    *cap = c;
    return true;
}
static bool grow32(void **p, int32_t *cap, int32_t need, size_t elem, size_t *bytes) {
    int64_t c = *cap;
    const bool ok = grow(p, &c, need, elem, bytes);
    *cap = (int32_t)c;
    return ok;
}

static bool ihash_init(ihash *h) {
    h->cap = 1024;
    h->used = 0;
    h->slot = malloc(h->cap * sizeof *h->slot);
    if (!h->slot) return false;
    memset(h->slot, 0xff, h->cap * sizeof *h->slot);
    return true;
}

void cst_grammar_free(cst_grammar *g) {
    if (!g) return;
    free(g->final); free(g->adj_off); free(g->adj); free(g->rule_start); free(g->rule_dstart);
    for (int32_t i = 0; i < g->n_ds; i++) free(g->ds[i].trans);
    free(g->ds); free(g->pool); free(g->calls); free(g->ds_hash.slot);
    free(g->fr); free(g->fr_hash.slot);
    for (int32_t i = 0; i < g->n_cs; i++) free(g->cs[i].mask);
    free(g->T);
    free(g->SL);
    free(g->cmin);
    free(g->SLg);
    free(g->dist);
    free(g->cs); free(g->fpool); free(g->rpool); free(g->cs_hash.slot);
    free(g->mark); free(g->stack); free(g->buf); free(g->fmark); free(g->fbuf); free(g->scratch); free(g->bulk.r); free(g->dead.r);
    free(g->pair_key); free(g->pair_queue); free(g->pair_gen);
    free(g);
}

/* hash-consed lookup: key(i) gives an id's sequence; returns the id or -1 */
typedef const int32_t *(*key_fn)(const cst_grammar *g, int32_t id, int32_t *n);

static const int32_t *ds_key(const cst_grammar *g, int32_t id, int32_t *n) {
    *n = g->ds[id].set_n;
    return g->pool + g->ds[id].set_off;
}
static const int32_t *fr_key(const cst_grammar *g, int32_t id, int32_t *n) {
    *n = 2;
    return &g->fr[id].d;
}
static const int32_t *cs_key(const cst_grammar *g, int32_t id, int32_t *n) {
    *n = g->cs[id].n;
    return g->fpool + g->cs[id].off;
}

static int32_t ihash_find(const cst_grammar *g, const ihash *h, key_fn key, const int32_t *a, int32_t n, uint64_t hv,
                          uint32_t *slot) {
    uint32_t i = (uint32_t)hv & (h->cap - 1);
    for (;;) {
        const int32_t id = h->slot[i];
        if (id < 0) {
            *slot = i;
            return -1;
        }
        int32_t kn;
        const int32_t *k = key(g, id, &kn);
        if (kn == n && !memcmp(k, a, (size_t)n * sizeof *a)) return id;
        i = (i + 1) & (h->cap - 1);
    }
}

static bool ihash_insert(cst_grammar *g, ihash *h, key_fn key, int32_t id, uint32_t slot) {
    h->slot[slot] = id;
    if (++h->used * 2 <= h->cap) return true;
    const uint32_t cap = h->cap * 2;
    int32_t *s = malloc(cap * sizeof *s);
    if (!s) return false;
    g->bytes += cap * sizeof *s / 2;
    memset(s, 0xff, cap * sizeof *s);
    for (uint32_t i = 0; i < h->cap; i++) {
        const int32_t x = h->slot[i];
        if (x < 0) continue;
        int32_t kn;
        const int32_t *k = key(g, x, &kn);
        uint32_t j = (uint32_t)hash_ints(k, kn) & (cap - 1);
        while (s[j] >= 0) j = (j + 1) & (cap - 1);
        s[j] = x;
    }
    free(h->slot);
    h->slot = s;
    h->cap = cap;
    return true;
}

static bool budget(cst_grammar *g) {
    if (g->bytes > MEM_BUDGET) g->over = true;
    return !g->over;
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* epsilon closure of buf[0..n) (marked with g->gen) into a sorted set, then interned */
static int32_t ds_intern_closure(cst_grammar *g, int32_t n) {
    int32_t sp = 0;
    for (int32_t i = 0; i < n; i++) g->stack[sp++] = g->buf[i];
    while (sp > 0) {
        const int32_t s = g->stack[--sp];
        for (int32_t k = g->adj_off[s]; k < g->adj_off[s + 1]; k++) {
            const cst_edge *e = &g->adj[k];
            if (e->kind != CST_E_EPS || g->mark[e->to] == g->gen) continue;
            g->mark[e->to] = g->gen;
            g->buf[n++] = e->to;
            g->stack[sp++] = e->to;
        }
    }
    if (n == 0) return CST_DEAD;
    qsort(g->buf, (size_t)n, sizeof *g->buf, cmp_i32);
    const uint64_t hv = hash_ints(g->buf, n);
    uint32_t slot;
    int32_t id = ihash_find(g, &g->ds_hash, ds_key, g->buf, n, hv, &slot);
    if (id >= 0) return id;
    if (!budget(g) || !grow32((void **)&g->ds, &g->cap_ds, g->n_ds + 1, sizeof *g->ds, &g->bytes) ||
        !grow((void **)&g->pool, &g->cap_pool, g->n_pool + n, sizeof *g->pool, &g->bytes)) {
        g->over = true;
        return CST_DEAD;
    }
    id = g->n_ds++;
    dstate *d = &g->ds[id];
    d->set_off = (int32_t)g->n_pool;
    d->set_n = n;
    d->trans = NULL;
    d->calls_n = -1;
    d->calls_off = 0;
    d->accepting = 0;
    d->minb = CST_FAR;
    memcpy(g->pool + g->n_pool, g->buf, (size_t)n * sizeof *g->buf);
    g->n_pool += n;
    for (int32_t i = 0; i < n; i++) {
        if (g->final[g->buf[i]]) d->accepting = 1;
        if (g->dist && g->dist[g->buf[i]] < d->minb) d->minb = g->dist[g->buf[i]];
    }
    if (!ihash_insert(g, &g->ds_hash, ds_key, id, slot)) g->over = true;
    return id;
}

static int32_t ds_of_state(cst_grammar *g, int32_t s) {
    g->gen++;
    g->mark[s] = g->gen;
    g->buf[0] = s;
    return ds_intern_closure(g, 1);
}

static int32_t rule_dstart(cst_grammar *g, int32_t r) {
    if (g->rule_dstart[r] == -1) g->rule_dstart[r] = ds_of_state(g, g->rule_start[r]);
    return g->rule_dstart[r];
}

static int32_t ds_trans(cst_grammar *g, int32_t d, uint8_t b) {
    if (!g->ds[d].trans) {
        int32_t *t = malloc((size_t)g->n_cls * sizeof *t);
        if (!t || !budget(g)) {
            free(t);
            g->over = true;
            return CST_DEAD;
        }
        for (int i = 0; i < g->n_cls; i++) t[i] = UNKNOWN;
        g->ds[d].trans = t;
        g->bytes += (size_t)g->n_cls * sizeof *t;
    }
    const int k_cls = g->cls[b];
    int32_t r = g->ds[d].trans[k_cls];
    if (r != UNKNOWN) return r;
    g->gen++;
    int32_t n = 0;
    const dstate ds = g->ds[d];
    for (int32_t i = 0; i < ds.set_n; i++) {
        const int32_t s = g->pool[ds.set_off + i];
        for (int32_t k = g->adj_off[s]; k < g->adj_off[s + 1]; k++) {
            const cst_edge *e = &g->adj[k];
            if (e->kind != CST_E_RANGE || b < e->lo || b > e->hi || g->mark[e->to] == g->gen) continue;
            g->mark[e->to] = g->gen;
            g->buf[n++] = e->to;
        }
    }
    r = ds_intern_closure(g, n);
    if (g->over) return CST_DEAD;
    g->ds[d].trans[k_cls] = r;
    return r;
}

/* (rule, return dstate) for every rule some state of d calls */
static void ds_calls(cst_grammar *g, int32_t d) {
    if (g->ds[d].calls_n >= 0) return;
    g->ds[d].calls_n = 0;
    const int32_t off = g->ds[d].set_off, n = g->ds[d].set_n;
    /* collect call edges, grouped by rule */
    int32_t n_call = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t s = g->pool[off + i];
        for (int32_t k = g->adj_off[s]; k < g->adj_off[s + 1]; k++)
            if (g->adj[k].kind == CST_E_CALL) n_call++;
    }
    if (n_call == 0) return;
    int32_t *pairs = malloc((size_t)n_call * 2 * sizeof *pairs);
    if (!pairs) { g->over = true; return; }
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t s = g->pool[off + i];
        for (int32_t k = g->adj_off[s]; k < g->adj_off[s + 1]; k++)
            if (g->adj[k].kind == CST_E_CALL) {
                pairs[2 * m] = g->adj[k].rule;
                pairs[2 * m + 1] = g->adj[k].to;
                m++;
            }
    }
    qsort(pairs, (size_t)m, 2 * sizeof *pairs, cmp_i32);   /* by rule (first int of each pair) */
    int32_t out[2 * 64];
    int32_t n_out = 0;
    for (int32_t i = 0; i < m;) {
        const int32_t rule = pairs[2 * i];
        g->gen++;
        int32_t k = 0;
        for (; i < m && pairs[2 * i] == rule; i++) {
            const int32_t t = pairs[2 * i + 1];
            if (g->mark[t] == g->gen) continue;
            g->mark[t] = g->gen;
            g->buf[k++] = t;
        }
        const int32_t ret = ds_intern_closure(g, k);
        if (ret == CST_DEAD) continue;
        if (n_out == 64) break;   /* more than 64 distinct rules called from one place: the rest are dropped (stricter) */
        out[2 * n_out] = rule;
        out[2 * n_out + 1] = ret;
        n_out++;
    }
    free(pairs);
    if (!grow((void **)&g->calls, &g->cap_calls, g->n_calls + 2 * n_out, sizeof *g->calls, &g->bytes)) {
        g->over = true;
        return;
    }
    memcpy(g->calls + g->n_calls, out, (size_t)n_out * 2 * sizeof *out);
    g->ds[d].calls_off = (int32_t)g->n_calls;
    g->ds[d].calls_n = n_out;
    g->n_calls += 2 * n_out;
}

static int32_t frame_intern(cst_grammar *g, int32_t d, int32_t parent, int32_t depth) {
    const int32_t key[2] = {d, parent};
    const uint64_t hv = hash_ints(key, 2);
    uint32_t slot;
    int32_t id = ihash_find(g, &g->fr_hash, fr_key, key, 2, hv, &slot);
    if (id >= 0) return id;
    if (!budget(g) || !grow32((void **)&g->fr, &g->cap_fr, g->n_fr + 1, sizeof *g->fr, &g->bytes) ||
        !grow32((void **)&g->fmark, &g->cap_fmark, g->n_fr + 1, sizeof *g->fmark, &g->bytes)) {
        g->over = true;
        return -1;
    }
    id = g->n_fr++;
    const int64_t mb = (int64_t)g->ds[d].minb + (parent >= 0 ? g->fr[parent].minb : 0);
    g->fr[id] = (frame){d, parent, depth, mb < CST_FAR ? (int32_t)mb : CST_FAR};
    g->fmark[id] = 0;
    if (!ihash_insert(g, &g->fr_hash, fr_key, id, slot)) g->over = true;
    return id;
}

/* sorted unique frames in fbuf[0..n) -> cset id */
static int32_t cs_intern(cst_grammar *g, int32_t *f, int32_t n) {
    if (n == 0) return CST_DEAD;
    qsort(f, (size_t)n, sizeof *f, cmp_i32);
    int32_t k = 1;
    for (int32_t i = 1; i < n; i++)
        if (f[i] != f[k - 1]) f[k++] = f[i];
    n = k;
    const uint64_t hv = hash_ints(f, n);
    uint32_t slot;
    int32_t id = ihash_find(g, &g->cs_hash, cs_key, f, n, hv, &slot);
    if (id >= 0) return id;
    if (!budget(g) || !grow32((void **)&g->cs, &g->cap_cs, g->n_cs + 1, sizeof *g->cs, &g->bytes) ||
        !grow((void **)&g->T, &g->cap_T, ((int64_t)g->n_cs + 1) * g->n_cls, sizeof *g->T, &g->bytes) ||
        !grow((void **)&g->SL, &g->cap_SL, ((int64_t)g->n_cs + 1) * 4, sizeof *g->SL, &g->bytes) ||
        !grow((void **)&g->cmin, &g->cap_cmin, (int64_t)g->n_cs + 1, sizeof *g->cmin, &g->bytes) ||
        !grow((void **)&g->SLg, &g->cap_SLg, ((int64_t)g->n_cs + 1) * 2, sizeof *g->SLg, &g->bytes) ||
        !grow((void **)&g->fpool, &g->cap_fpool, g->n_fpool + n, sizeof *g->fpool, &g->bytes)) {
        g->over = true;
        return CST_DEAD;
    }
    id = g->n_cs++;
    for (int i = 0; i < g->n_cls; i++) g->T[(size_t)id * (size_t)g->n_cls + (size_t)i] = UNKNOWN;
    memset(g->SL + (size_t)id * 4, 0, 4 * sizeof *g->SL);
    g->SLg[(size_t)id * 2] = g->SLg[(size_t)id * 2 + 1] = 0;
    cset *c = &g->cs[id];
    memset(c, 0, sizeof *c);
    c->off = (int32_t)g->n_fpool;
    c->n = n;
    c->ready_n = -1;
    c->accepting = -1;
    c->max_after = -1;
    int32_t mb = CST_FAR;
    for (int32_t i = 0; i < n && g->dist; i++)
        if (g->fr[f[i]].minb < mb) mb = g->fr[f[i]].minb;
    g->cmin[id] = mb;
    memcpy(g->fpool + g->n_fpool, f, (size_t)n * sizeof *f);
    g->n_fpool += n;
    if (!ihash_insert(g, &g->cs_hash, cs_key, id, slot)) g->over = true;
    return id;
}

static bool fbuf_push(cst_grammar *g, int64_t *n, int32_t x) {
    if (!grow((void **)&g->fbuf, &g->cap_fbuf, *n + 1, sizeof *g->fbuf, &g->bytes)) {
        g->over = true;
        return false;
    }
    g->fbuf[(*n)++] = x;
    return true;
}

/* The frames reachable from c's by calls (push) and completed rules (pop): those that may read a byte. */
static void cs_expand(cst_grammar *g, int32_t c) {
    if (g->cs[c].ready_n >= 0) return;
    g->fgen++;
    if (g->fgen == 0) {
        memset(g->fmark, 0, (size_t)g->n_fr * sizeof *g->fmark);
        g->fgen = 1;
    }
    /* fbuf: [0, top) the work stack; results go to rpool directly */
    int64_t top = 0;
    const int64_t r0 = g->n_rpool;
    for (int32_t i = 0; i < g->cs[c].n; i++)
        if (!fbuf_push(g, &top, g->fpool[g->cs[c].off + i])) return;
    while (top > 0 && !g->over) {
        const int32_t f = g->fbuf[--top];
        if ((uint32_t)g->fmark[f] == g->fgen) continue;
        g->fmark[f] = (int32_t)g->fgen;
        if (!grow((void **)&g->rpool, &g->cap_rpool, g->n_rpool + 1, sizeof *g->rpool, &g->bytes)) { g->over = true; return; }
        g->rpool[g->n_rpool++] = f;
        const frame fr = g->fr[f];
        ds_calls(g, fr.d);
        const int32_t n_calls = g->ds[fr.d].calls_n, off = g->ds[fr.d].calls_off;
        for (int32_t k = 0; k < n_calls && fr.depth + 1 < MAX_DEPTH; k++) {
            const int32_t rule = g->calls[off + 2 * k], ret = g->calls[off + 2 * k + 1];
            const int32_t below = frame_intern(g, ret, fr.parent, fr.depth);
            const int32_t ds = rule_dstart(g, rule);
            if (below < 0 || ds == CST_DEAD) continue;
            const int32_t child = frame_intern(g, ds, below, fr.depth + 1);
            if (child < 0) continue;
            if (!fbuf_push(g, &top, child)) return;
        }
        if (g->ds[fr.d].accepting && fr.parent >= 0)
            if (!fbuf_push(g, &top, fr.parent)) return;
    }
    if (g->over) return;
    g->cs[c].ready_off = (int32_t)r0;
    g->cs[c].ready_n = (int32_t)(g->n_rpool - r0);
    int8_t acc = 0;
    for (int64_t i = r0; i < g->n_rpool; i++) {
        const frame fr = g->fr[g->rpool[i]];
        if (fr.parent < 0 && g->ds[fr.d].accepting) acc = 1;
    }
    g->cs[c].accepting = acc;
}

static int32_t cs_step(cst_grammar *g, int32_t c, uint8_t b) {
    cs_expand(g, c);
    if (g->over) return CST_DEAD;
    const int32_t off = g->cs[c].ready_off, n = g->cs[c].ready_n;
    int64_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        const frame fr = g->fr[g->rpool[off + i]];
        const int32_t d2 = ds_trans(g, fr.d, b);
        if (d2 == CST_DEAD) continue;
        const int32_t f2 = frame_intern(g, d2, fr.parent, fr.depth);
        if (f2 < 0) continue;
        if (!fbuf_push(g, &m, f2)) return CST_DEAD;
    }
    if (g->over) return CST_DEAD;
    return cs_intern(g, g->fbuf, (int32_t)m);
}

static int32_t cs_trans_slow(cst_grammar *g, int32_t c, uint8_t b) {
    const int32_t r = cs_step(g, c, b);
    if (g->over) return CST_DEAD;
    const int k = g->cls[b];
    g->T[(size_t)c * (size_t)g->n_cls + (size_t)k] = r;
    if (r == c) {
        uint64_t *sl = g->SL + (size_t)c * 4;
        for (int w = 0; w < 4; w++) sl[w] |= g->cls_bytes[k][w];
        uint64_t meets = 0, whole = 0;
        for (int q = 0; q < 64; q++) {
            const uint64_t *gb = g->v->grp_bytes[q];
            bool any = false, all = true;
            for (int w = 0; w < 4; w++) {
                any |= (gb[w] & sl[w]) != 0;
                all &= (gb[w] & ~sl[w]) == 0;
            }
            if (any) meets |= 1ull << q;
            if (any && all) whole |= 1ull << q;
        }
        g->SLg[(size_t)c * 2] = meets;
        g->SLg[(size_t)c * 2 + 1] = whole;
    }
    return r;
}

static inline int32_t cs_trans(cst_grammar *g, int32_t c, uint8_t b) {
    const int32_t r = g->T[(size_t)c * (size_t)g->n_cls + g->cls[b]];
    return r != UNKNOWN ? r : cs_trans_slow(g, c, b);
}


/* The fewest bytes from every NFA state to the end of its rule: a shortest-derivation fixpoint over the
 * recursive transition network (a byte edge costs 1, an epsilon 0, a call its rule's own minimum, which
 * is the distance of the rule's start). Dijkstra in the order of final distances: a call edge's cost is
 * known once both its rule's start and its target are final, and it is then no smaller than either, so
 * the order stays monotone (Knuth's generalization to grammars). */
typedef struct heap_item { int32_t d, s; } heap_item;
static void heap_push(heap_item *h, int64_t *n, heap_item x) {
    int64_t i = (*n)++;
    while (i > 0) {
        const int64_t p = (i - 1) / 2;
        if (h[p].d <= x.d) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}
static heap_item heap_pop(heap_item *h, int64_t *n) {
    const heap_item top = h[0], x = h[--(*n)];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1].d < h[c].d) c++;
        if (h[c].d >= x.d) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = x;
    return top;
}

static bool shortest_completions(cst_grammar *g) {
    const int32_t ns = g->n_states, nr = g->n_rules;
    const int64_t ne = g->adj_off[ns];
    g->dist = malloc(((size_t)ns + 1) * sizeof *g->dist);
    int32_t *rmin = malloc((size_t)nr * sizeof *rmin);
    int32_t *in_off = calloc((size_t)ns + 2, sizeof *in_off), *call_off = calloc((size_t)nr + 2, sizeof *call_off);
    int32_t *starts_off = calloc((size_t)ns + 2, sizeof *starts_off), *starts = malloc(((size_t)nr + 1) * sizeof *starts);
    int64_t *in = malloc((size_t)(ne ? ne : 1) * sizeof *in), *calls = malloc((size_t)(ne ? ne : 1) * sizeof *calls);
    uint8_t *done = calloc((size_t)ns + 1, 1);
    heap_item *heap = malloc((size_t)(2 * ne + ns + 2) * sizeof *heap);
    bool ok = g->dist && rmin && in_off && call_off && starts_off && starts && in && calls && done && heap;
    if (ok) {
        for (int64_t k = 0; k < ne; k++) {
            in_off[g->adj[k].to + 2]++;
            if (g->adj[k].kind == CST_E_CALL) call_off[g->adj[k].rule + 2]++;
        }
        for (int32_t r = 0; r < nr; r++) starts_off[g->rule_start[r] + 2]++;
        for (int32_t i = 0; i < ns; i++) { in_off[i + 2] += in_off[i + 1]; starts_off[i + 2] += starts_off[i + 1]; }
        for (int32_t r = 0; r < nr; r++) call_off[r + 2] += call_off[r + 1];
        for (int64_t k = 0; k < ne; k++) {
            in[in_off[g->adj[k].to + 1]++] = k;
            if (g->adj[k].kind == CST_E_CALL) calls[call_off[g->adj[k].rule + 1]++] = k;
        }
        for (int32_t r = 0; r < nr; r++) starts[starts_off[g->rule_start[r] + 1]++] = r;
        for (int32_t i = 0; i < ns; i++) g->dist[i] = CST_FAR;
        for (int32_t r = 0; r < nr; r++) rmin[r] = CST_FAR;
        int64_t hn = 0;
        for (int32_t i = 0; i < ns; i++)
            if (g->final[i]) { g->dist[i] = 0; heap_push(heap, &hn, (heap_item){0, i}); }
        /* each edge pushes at most once per relaxation that lowers a distance: at most 2 per edge here */
        while (hn > 0) {
            const heap_item it = heap_pop(heap, &hn);
            const int32_t t = it.s;
            if (done[t] || it.d != g->dist[t]) continue;
            done[t] = 1;
#define RELAX(u, cand)                                                                              \
    do {                                                                                            \
        const int64_t c_ = (cand);                                                                  \
        if (!done[u] && c_ < g->dist[u]) {                                                          \
            g->dist[u] = (int32_t)c_;                                                               \
            if (hn >= 2 * ne + ns + 1) { ok = false; break; }                                      \
            heap_push(heap, &hn, (heap_item){(int32_t)c_, u});                                      \
        }                                                                                           \
    } while (0)
            for (int32_t k = in_off[t]; k < in_off[t + 1] && ok; k++) {
                const cst_edge *e = &g->adj[in[k]];
                if (e->kind == CST_E_CALL) {
                    if (rmin[e->rule] < CST_FAR) RELAX(e->from, (int64_t)it.d + rmin[e->rule]);
                } else {
                    RELAX(e->from, (int64_t)it.d + (e->kind == CST_E_RANGE));
                }
            }
            for (int32_t k = starts_off[t]; k < starts_off[t + 1] && ok; k++) {
                const int32_t r = starts[k];
                rmin[r] = it.d;
                for (int32_t j = call_off[r]; j < call_off[r + 1] && ok; j++) {
                    const cst_edge *e = &g->adj[calls[j]];
                    if (done[e->to]) RELAX(e->from, (int64_t)g->dist[e->to] + it.d);
                }
            }
#undef RELAX
        }
    }
    free(rmin); free(in_off); free(call_off); free(starts_off); free(starts); free(in); free(calls); free(done); free(heap);
    return ok;
}

/* Parse positions one cset expansion can reach from a call of each rule without reading a byte: its
 * start's epsilon closure through calls of rules that match the empty string (the shortest completions
 * say which), each call reached counting itself and its rule's own width; a rule on the current path
 * (recursion) counts 0, the parser's depth limit bounds it. Over EPS_WIDTH_MAX the grammar is refused. */
#define EPS_WIDTH_MAX (1 << 18)
static int64_t rule_eps_width(cst_grammar *g, int32_t r, int64_t *width, uint8_t *state, int32_t *stack, uint32_t *seen,
                              uint32_t *gen, int depth) {
    if (state[r] == 2) return width[r];
    if (state[r] == 1 || depth > 512) return 0;
    state[r] = 1;
    /* the closure first (it uses seen[] and the stack), then the callees (which reuse them) */
    int32_t sp = 0, n_calls = 0;
    int32_t *calls = NULL;
    int32_t cap = 0;
    (*gen)++;
    const uint32_t my = *gen;
    stack[sp++] = g->rule_start[r];
    seen[g->rule_start[r]] = my;
    while (sp > 0) {
        const int32_t s = stack[--sp];
        for (int32_t k = g->adj_off[s]; k < g->adj_off[s + 1]; k++) {
            const cst_edge *e = &g->adj[k];
            if (e->kind == CST_E_RANGE) continue;
            if (e->kind == CST_E_CALL) {
                if (n_calls == cap) {
                    cap = cap ? cap * 2 : 16;
                    int32_t *c2 = realloc(calls, (size_t)cap * sizeof *c2);
                    if (!c2) { free(calls); state[r] = 2; return width[r] = (int64_t)1 << 40; }
                    calls = c2;
                }
                calls[n_calls++] = e->rule;
                if (g->dist[g->rule_start[e->rule]] != 0) continue;   /* cannot match nothing: the walk stops here */
            }
            if (seen[e->to] == my) continue;
            seen[e->to] = my;
            stack[sp++] = e->to;
        }
    }
    int64_t w = 0;
    for (int32_t i = 0; i < n_calls && w <= EPS_WIDTH_MAX; i++)
        w += 1 + rule_eps_width(g, calls[i], width, state, stack, seen, gen, depth + 1);
    free(calls);
    state[r] = 2;
    return width[r] = w;
}

static brisk_status check_eps_width(cst_grammar *g, brisk_error *err) {
    if (!g->dist && !shortest_completions(g)) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    int64_t *width = calloc((size_t)g->n_rules, sizeof *width);
    uint8_t *state = calloc((size_t)g->n_rules, 1);
    int32_t *stack = malloc(((size_t)g->n_states + 1) * sizeof *stack);
    uint32_t *seen = calloc((size_t)g->n_states + 1, sizeof *seen);
    uint32_t gen = 0;
    brisk_status st = BRISK_OK;
    if (!width || !state || !stack || !seen) st = brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    for (int32_t r = 0; r < g->n_rules && st == BRISK_OK; r++) {
        const int64_t w = rule_eps_width(g, r, width, state, stack, seen, &gen, 0);
        if (w > EPS_WIDTH_MAX)
            st = brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                            "the grammar nests repeats of parts that can match the empty string too deeply: %lld parse positions "
                            "reachable at once (at most %d)", (long long)w, EPS_WIDTH_MAX);
    }
    free(width); free(state); free(stack); free(seen);
    return st;
}

brisk_status cst_grammar_new(cst_nfa *n, const cst_vocab *v, cst_grammar **out, brisk_error *err) {
    *out = NULL;
    if (n->failed) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "%s", n->err);
    if (n->n_rules == 0 || n->rule_start[0] < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "the grammar has no start rule");
    for (int32_t r = 0; r < n->n_rules; r++)
        if (n->rule_start[r] < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "rule %d is used but never defined", r);
    cst_grammar *g = calloc(1, sizeof *g);
    if (!g) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    g->v = v;
    const int32_t ns = n->n_states;
    g->n_states = ns;
    g->final = malloc((size_t)ns + 1);
    g->adj_off = calloc((size_t)ns + 1, sizeof *g->adj_off);
    g->adj = malloc((size_t)(n->n_e ? n->n_e : 1) * sizeof *g->adj);
    g->n_rules = n->n_rules;
    g->rule_start = malloc((size_t)n->n_rules * sizeof *g->rule_start);
    g->rule_dstart = malloc((size_t)n->n_rules * sizeof *g->rule_dstart);
    g->mark = calloc((size_t)ns + 1, sizeof *g->mark);
    g->stack = malloc(((size_t)ns + 1) * sizeof *g->stack);
    g->buf = malloc(((size_t)ns + 1) * sizeof *g->buf);
    if (!g->final || !g->adj_off || !g->adj || !g->rule_start || !g->rule_dstart || !g->mark || !g->stack || !g->buf ||
        !ihash_init(&g->ds_hash) || !ihash_init(&g->fr_hash) || !ihash_init(&g->cs_hash)) {
        cst_grammar_free(g);
        return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    }
    memcpy(g->final, n->final, (size_t)ns);
    /* keep only edges into states from which the rule can still end: no prefix the grammar allows is a dead end */
    uint8_t *useful = calloc((size_t)ns + 1, 1), *prod = calloc((size_t)n->n_rules, 1);
    int32_t *roff = calloc((size_t)ns + 2, sizeof *roff), *work = malloc(((size_t)ns + 1) * sizeof *work);
    int64_t *redge = malloc((size_t)(n->n_e ? n->n_e : 1) * sizeof *redge);
    if (!useful || !prod || !roff || !work || !redge) {
        free(useful); free(prod); free(roff); free(work); free(redge);
        cst_grammar_free(g);
        return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < n->n_e; i++) roff[n->e[i].to + 1]++;
    for (int32_t i = 0; i < ns; i++) roff[i + 1] += roff[i];
    {
        int32_t *rfill = malloc(((size_t)ns + 1) * sizeof *rfill);
        if (!rfill) {
            free(useful); free(prod); free(roff); free(work); free(redge);
            cst_grammar_free(g);
            return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
        }
        memcpy(rfill, roff, (size_t)ns * sizeof *rfill);
        for (int64_t i = 0; i < n->n_e; i++) redge[rfill[n->e[i].to]++] = i;
        free(rfill);
    }
    for (bool changed = true; changed;) {
        changed = false;
        int32_t wn = 0;
        for (int32_t i = 0; i < ns; i++)
            if (n->final[i] || useful[i]) {
                useful[i] = 1;
                work[wn++] = i;
            }
        while (wn > 0) {
            const int32_t t = work[--wn];
            for (int32_t k = roff[t]; k < roff[t + 1]; k++) {
                const cst_edge *e = &n->e[redge[k]];
                if (useful[e->from] || (e->kind == CST_E_CALL && !prod[e->rule])) continue;
                useful[e->from] = 1;
                work[wn++] = e->from;
            }
        }
        for (int32_t r = 0; r < n->n_rules; r++)
            if (!prod[r] && useful[n->rule_start[r]]) prod[r] = 1, changed = true;
    }
    free(roff); free(work); free(redge);
    if (!prod[0]) {
        free(useful); free(prod);
        cst_grammar_free(g);
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "the grammar accepts nothing (an unsatisfiable schema or grammar)");
    }
    int64_t kept = 0;
    for (int64_t i = 0; i < n->n_e; i++) {
        const cst_edge *e = &n->e[i];
        if (!useful[e->to] || (e->kind == CST_E_CALL && !prod[e->rule])) continue;
        n->e[kept++] = *e;
    }
    n->n_e = kept;
    free(useful); free(prod);
    {
        bool cut[257] = {false};
        cut[0] = true;
        for (int64_t i = 0; i < n->n_e; i++) {
            if (n->e[i].kind != CST_E_RANGE) continue;
            cut[n->e[i].lo] = true;
            cut[n->e[i].hi + 1] = true;
        }
        int k = -1;
        for (int b = 0; b < 256; b++) {
            if (cut[b]) k++;
            g->cls[b] = (uint8_t)k;
            g->cls_bytes[k][b >> 6] |= 1ull << (b & 63);
        }
        g->n_cls = k + 1;
    }
    for (int64_t i = 0; i < n->n_e; i++) g->adj_off[n->e[i].from + 1]++;
    for (int32_t i = 0; i < ns; i++) g->adj_off[i + 1] += g->adj_off[i];
    int32_t *fill = malloc(((size_t)ns + 1) * sizeof *fill);
    if (!fill) {
        cst_grammar_free(g);
        return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    }
    memcpy(fill, g->adj_off, (size_t)ns * sizeof *fill);
    for (int64_t i = 0; i < n->n_e; i++) g->adj[fill[n->e[i].from]++] = n->e[i];
    free(fill);
    memcpy(g->rule_start, n->rule_start, (size_t)n->n_rules * sizeof *g->rule_start);
    for (int32_t r = 0; r < n->n_rules; r++) g->rule_dstart[r] = -1;
    g->bytes = (size_t)n->n_e * sizeof *g->adj + (size_t)ns * 18;
    if (n->call_repeats > 0) {
        /* the builder checked each big repeat of a part that can match nothing against what it knew then;
         * a rule used before its definition (GBNF) is only known now: check every rule again */
        const brisk_status st = check_eps_width(g, err);
        if (st != BRISK_OK) {
            cst_grammar_free(g);
            return st;
        }
    }
    const int32_t d0 = rule_dstart(g, 0);
    const int32_t f0 = d0 == CST_DEAD ? -1 : frame_intern(g, d0, -1, 0);
    if (f0 < 0) {
        cst_grammar_free(g);
        return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    }
    int32_t one = f0;
    g->last_walked = -1;
    g->start = cs_intern(g, &one, 1);
    if (g->start == CST_DEAD) {
        cst_grammar_free(g);
        return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    }
    *out = g;
    return BRISK_OK;
}

int32_t cst_start(cst_grammar *g) { return g->start; }

bool cst_accepting(cst_grammar *g, int32_t c) {
    if (c < 0) return false;
    cs_expand(g, c);
    return g->cs[c].accepting == 1;
}

bool cst_is_eos(const cst_grammar *g, int32_t tok) {
    for (int32_t i = 0; i < g->v->n_eos; i++)
        if (g->v->eos[i] == tok) return true;
    return false;
}

static void set_eos(const cst_grammar *g, uint32_t *allowed) {
    for (int32_t i = 0; i < g->v->n_eos; i++) {
        const int32_t t = g->v->eos[i];
        allowed[t >> 5] |= 1u << (t & 31);
    }
}

/* Whether every well-formed multi-byte UTF-8 character read from cset c leads back to c (JSON string
 * bodies). Each byte range of the character is read from every distinct state the earlier bytes reached;
 * more than 16 distinct states counts as no. May add states (the caller reloads its table pointers). */
static int8_t utf8_loop(cst_grammar *g, int32_t c) {
    static const struct { uint8_t lead_lo, lead_hi, n, lo[3], hi[3]; } forms[] = {
        {0xC2, 0xDF, 1, {0x80}, {0xBF}},
        {0xE0, 0xE0, 2, {0xA0, 0x80}, {0xBF, 0xBF}},
        {0xE1, 0xEC, 2, {0x80, 0x80}, {0xBF, 0xBF}},
        {0xED, 0xED, 2, {0x80, 0x80}, {0x9F, 0xBF}},
        {0xEE, 0xEF, 2, {0x80, 0x80}, {0xBF, 0xBF}},
        {0xF0, 0xF0, 3, {0x90, 0x80, 0x80}, {0xBF, 0xBF, 0xBF}},
        {0xF1, 0xF3, 3, {0x80, 0x80, 0x80}, {0xBF, 0xBF, 0xBF}},
        {0xF4, 0xF4, 3, {0x80, 0x80, 0x80}, {0x8F, 0xBF, 0xBF}},
    };
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++)
        for (int lead = forms[f].lead_lo; lead <= forms[f].lead_hi; lead++) {
            int32_t cur[16], nxt[16];
            int n_cur = 1, n_nxt;
            cur[0] = cs_trans(g, c, (uint8_t)lead);
            if (g->over || cur[0] < 0) return -1;
            for (int k = 0; k < forms[f].n; k++) {
                n_nxt = 0;
                for (int x = 0; x < n_cur; x++)
                    for (int b = forms[f].lo[k]; b <= forms[f].hi[k]; b++) {
                        const int32_t r = cs_trans(g, cur[x], (uint8_t)b);
                        if (g->over || r < 0) return -1;
                        int y = 0;
                        while (y < n_nxt && nxt[y] != r) y++;
                        if (y == n_nxt) {
                            if (n_nxt == 16) return -1;
                            nxt[n_nxt++] = r;
                        }
                    }
                memcpy(cur, nxt, (size_t)n_nxt * sizeof *cur);
                n_cur = n_nxt;
            }
            if (n_cur != 1 || cur[0] != c) return -1;
        }
    return 1;
}

static bool range_push(cst_grammar *g, struct ranges *q, int32_t lo, int32_t hi) {
    if (q->n + 2 > q->cap) {
        const int64_t cap = q->cap ? 2 * q->cap : 4096;
        int32_t *r = realloc(q->r, (size_t)cap * sizeof *r);
        if (!r) {
            g->over = true;
            return false;
        }
        g->bytes += (size_t)(cap - q->cap) * sizeof *r;
        q->r = r;
        q->cap = cap;
    }
    q->r[q->n++] = lo;
    q->r[q->n++] = hi;
    q->tokens += hi - lo;
    return true;
}

/* The tokens order[lo .. hi) of a subtree taken whole: recorded as a range (the caller writes the mask
 * later, whichever way is cheaper) or set in acc now. False when recording ran out of memory. */
static inline bool take_whole(cst_grammar *g, bool record, uint32_t *acc, int32_t lo, int32_t hi) {
    if (record) return range_push(g, &g->bulk, lo, hi);
    const int32_t *order = g->v->order;
    for (int32_t k = lo; k < hi; k++) acc[order[k] >> 5] |= 1u << (order[k] & 31);
    return true;
}

/* One walk of the vocabulary trie from cset c into acc (words + 1 words, the spare bit included),
 * allowing a token only when the state it leads to can still complete within `limit` bytes (CST_FAR:
 * every token). Returns the largest such completion over the tokens that stay alive (the max_after of
 * c when limit is CST_FAR). False when the memory budget ran out. */
static inline __attribute__((always_inline)) bool walk(cst_grammar *g, int32_t c, int32_t limit, uint32_t *acc,
                                                       int32_t *max_after, bool long_only, bool record) {
    const cst_vocab *v = g->v;
    int32_t path[257];
    const int32_t *row[257];
    path[0] = c;
    const size_t ncls = (size_t)g->n_cls;
    const uint8_t *cls = g->cls;
    const int32_t *T = g->T;
    const uint64_t *SL = g->SL, *SLg = g->SLg;
    const int32_t *cmin = g->cmin;
    row[0] = T + (size_t)c * ncls;
    /* new states may move g's tables: reload them and the rows of path[0 .. n) */
#define RELOAD_TABLES(n)                                                        \
    do {                                                                        \
        T = g->T;                                                               \
        SL = g->SL;                                                             \
        SLg = g->SLg;                                                           \
        cmin = g->cmin;                                                         \
        for (int32_t k = 0; k < (n); k++) row[k] = T + (size_t)path[k] * ncls;  \
    } while (0)
    const cst_node *node = v->node;
    const int32_t *dup = v->dup;
    const uint64_t *sub = v->sub;
    const uint64_t grp_ascii = v->grp_ascii;
    const int32_t none = v->n_vocab;
    int32_t ma = 0;
    /* at depth dp the walk goes through the siblings cur[dp] .. end[dp] - 1 */
    int32_t cur[258], end[258];
    int64_t n_read = 0;
    int32_t dp = 1;
    cur[1] = NODE_CHILD(node[0]);
    end[1] = cur[1] + NODE_N_CHILD(node[0]);
    const int32_t *below = v->below;
    for (;;) {
        if (cur[dp] == end[dp]) {
            if (--dp == 0) break;
            continue;
        }
        const int32_t i = cur[dp]++;
        const cst_node nd = node[i];
        n_read++;
        const uint32_t flags = NODE_FLAGS(nd);
        if (long_only && !(flags & NODE_DEEP)) continue;
        int32_t s = row[dp - 1][cls[NODE_BYTE(nd)]];
        if (s == UNKNOWN) {
            s = cs_trans_slow(g, path[dp - 1], NODE_BYTE(nd));
            RELOAD_TABLES(dp);
            if (g->over) break;
        }
        if (s < 0) {
            if (record && !range_push(g, &g->dead, below[3 * i], below[3 * i + 2])) break;
            continue;
        }
        path[dp] = s;
        row[dp] = T + (size_t)s * ncls;
        const int32_t cm = cmin[s];
        const bool fits = limit == CST_FAR || cm <= limit;
        const int32_t t0 = fits ? NODE_TOK(nd) : none;
        acc[t0 >> 5] |= 1u << (t0 & 31);
        if (t0 != none && cm > ma) ma = cm;
        if ((flags & NODE_MULTI) && fits)
            for (int32_t t = dup[t0]; t >= 0; t = dup[t]) acc[t >> 5] |= 1u << (t & 31);
        /* every descendant byte loops back to s: the whole subtree stays alive (and every token in it
         * leads to s, so the limit decides for all of them at once) */
        const uint64_t meets = SLg[(size_t)s * 2];
        if (NODE_N_CHILD(nd) && meets && !(nd.sub64 & ~meets)) {
            /* by groups first (one load): a group the loop bytes miss rules the subtree out, groups they
             * hold whole rule it in; only a subtree in partly held groups needs the 256-bit test */
            const uint64_t *sl = SL + (size_t)s * 4, *sb = sub + (size_t)v->pre[i] * 4;
            if (!(nd.sub64 & ~SLg[(size_t)s * 2 + 1]) ||
                (!(sb[0] & ~sl[0]) && !(sb[1] & ~sl[1]) && !(sb[2] & ~sl[2]) && !(sb[3] & ~sl[3]))) {
                if (fits) {
                    const int32_t e = below[3 * i + 2];
                    if (below[3 * i + 1] < e && cm > ma) ma = cm;
                    if (!take_whole(g, record, acc, below[3 * i + 1], e)) break;
                }
                continue;
            }
        }
        /* a subtree that reads as UTF-8, from a state every multi-byte character leads back to, whose ASCII
         * bytes are loop bytes of s: every byte string below is a prefix of characters that each return to
         * s, so all of it stays alive. Tokens ending inside a character are at most 3 bytes from s, so
         * cm + 3 bounds their completions (max_after is an upper bound) */
        if ((flags & NODE_U8) && limit == CST_FAR) {
            int8_t u = g->cs[s].utf8;
            if (u == 0) {
                u = utf8_loop(g, s);
                g->cs[s].utf8 = u;
                RELOAD_TABLES(dp + 1);
                if (g->over) break;
            }
            /* the subtree's ASCII bytes are loop bytes: by whole groups first (one load of sub64, which the
             * 256-bit sets, 8.8 MB for a 128K vocabulary, would miss the cache on) */
            const uint64_t *sl = SL + (size_t)s * 4, *sb = sub + (size_t)v->pre[i] * 4;
            if (u > 0 && (!(nd.sub64 & grp_ascii & ~SLg[(size_t)s * 2 + 1]) || (!(sb[0] & ~sl[0]) && !(sb[1] & ~sl[1])))) {
                const int32_t e = below[3 * i + 2];
                if (below[3 * i + 1] < e) {
                    const int32_t cm3 = cm > CST_FAR - 3 ? CST_FAR : cm + 3;
                    if (cm3 > ma) ma = cm3;
                }
                if (!take_whole(g, record, acc, below[3 * i + 1], e)) break;
                continue;
            }
        }
        if (NODE_N_CHILD(nd)) {
            dp++;
            cur[dp] = NODE_CHILD(nd);
            end[dp] = cur[dp] + NODE_N_CHILD(nd);
        }
    }
#undef RELOAD_TABLES
    *max_after = ma;
    g->walk_nodes = n_read;
    return !g->over;
}

static bool scratch_ready(cst_grammar *g, size_t sw) {
    if (g->scratch_words >= sw) return true;
    uint32_t *sc = realloc(g->scratch, sw * sizeof *sc);
    if (!sc) return false;
    g->scratch = sc;
    g->scratch_words = sw;
    return true;
}

static void only_eos(cst_grammar *g, uint32_t *allowed, size_t words) {
    memset(allowed, 0, words * sizeof *allowed);
    set_eos(g, allowed);
}

/* Mask sharing. A token is allowed from c exactly when reading its bytes from c never dies (no dead ends
 * after pruning, and the subtree shortcuts of walk are exact), so two csets whose byte strings of up to
 * SHORT_LEN bytes die alike allow the same tokens up to that long. That is what the states of a length
 * counter far from its bound look like (maxLength 255: every position is a fresh cset, and each walked the
 * whole trie). agree(x, y, d): every string of at most d bytes (one byte per class) dies from x iff it dies
 * from y; 1 yes, 0 no, -1 gave up after PAIR_VISITS transitions (the caller walks). Breadth first, so a
 * pair is met first with the most bytes left to check, and is never explored twice (agreeing to d bytes
 * implies agreeing to fewer): the work is the distinct pairs times the classes. */
#define PAIR_SLOTS 16384   /* a power of two, at least 2 * PAIR_VISITS */
#define PAIR_VISITS 8192   /* pairs of transitions read; a walk of a whole trie reads ~270K nodes */
static bool pair_seen(cst_grammar *g, int32_t x, int32_t y) {
    const uint64_t key = ((uint64_t)(uint32_t)x << 32 | (uint32_t)y) + 1;
    uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 50) & (PAIR_SLOTS - 1);
    while (g->pair_gen[h] == g->pair_gen_now) {
        if (g->pair_key[h] == key) return true;
        h = (h + 1) & (PAIR_SLOTS - 1);
    }
    g->pair_gen[h] = g->pair_gen_now;
    g->pair_key[h] = key;
    return false;
}

static int agree(cst_grammar *g, int32_t x, int32_t y, int d) {   /* y: a cset whose mask was walked */
    if (x == y || d == 0) return 1;
    /* fail fast: a few runs of one repeated byte first (a counter near its bound dies on them at another
     * length than the last walked state); a run y's walk never read settles nothing and stops */
    for (int k = 0, probes = 0; k < g->n_cls && probes < 4; k++) {
        int32_t a = x, b = y;
        bool any = false;
        for (int L = 0; L < d; L++) {
            const int32_t b2 = g->T[(size_t)b * (size_t)g->n_cls + (size_t)k];
            if (b2 == UNKNOWN) break;
            const int32_t a2 = cs_trans(g, a, g->cls_rep[k]);
            if (g->over) return -1;
            if ((a2 < 0) != (b2 < 0)) return 0;
            if (a2 < 0 || a2 == b2) break;
            a = a2;
            b = b2;
            any = true;
        }
        probes += any;
    }
    int32_t *q = g->pair_queue;   /* pairs, level by level */
    int32_t head = 0, tail = 0, level_end;
    q[tail++] = x;
    q[tail++] = y;
    (void)pair_seen(g, x, y);
    for (int level = 0; level < d && head < tail; level++) {
        level_end = tail;
        while (head < level_end) {
            const int32_t a = q[head], b = q[head + 1];
            head += 2;
            for (int k = 0; k < g->n_cls; k++) {
                const uint8_t byte = g->cls_rep[k];
                /* y's side first, without computing it: y's mask was walked, so every transition on a trie
                 * path that keeps y alive (or kills it there) is known; one that is not known leads to no
                 * token, and what follows it does not matter to the mask */
                const int32_t b2 = g->T[(size_t)b * (size_t)g->n_cls + (size_t)k];
                if (b2 == UNKNOWN) continue;
                if (++g->pair_visits > g->pair_budget) return -1;
                const int32_t a2 = cs_trans(g, a, byte);
                if (g->over) return -1;
                /* x reads a byte back to itself: a loop (a string body), not a counter; its walk takes whole
                 * subtrees at once and costs less than the rest of this check */
                if (a == x && a2 == x) return -1;
                if ((a2 < 0) != (b2 < 0)) return 0;
                if (a2 < 0 || a2 == b2 || level + 1 == d || pair_seen(g, a2, b2)) continue;
                q[tail++] = a2;   /* at most one pair per visit: PAIR_VISITS pairs fit */
                q[tail++] = b2;
            }
        }
    }
    return 1;
}

static bool shares_last_mask(cst_grammar *g, int32_t c) {
    const int32_t p = g->last_walked;
    if (p < 0 || p == c || !g->cs[p].mask) return false;
    if (cst_accepting(g, c) != cst_accepting(g, p)) return false;
    if (!g->pair_key) {
        g->pair_key = malloc(PAIR_SLOTS * sizeof *g->pair_key);
        g->pair_queue = malloc(2 * (PAIR_VISITS + 1) * sizeof *g->pair_queue);
        g->pair_gen = calloc(PAIR_SLOTS, sizeof *g->pair_gen);
        if (!g->pair_key || !g->pair_queue || !g->pair_gen) return false;
        g->pair_gen_now = 0;
        for (int b = 255; b >= 0; b--) g->cls_rep[g->cls[b]] = (uint8_t)b;
    }
    if (++g->pair_gen_now == 0) {
        memset(g->pair_gen, 0, PAIR_SLOTS * sizeof *g->pair_gen);
        g->pair_gen_now = 1;
    }
    g->pair_visits = 0;
    /* a check that fails must not cost more than walking: only after a walk of a quarter of the trie or more
     * (what a counter's states do; smaller walks are cheaper to repeat than to check), and a few visits per
     * node that walk read */
    if (g->last_walked_nodes * 4 < g->v->n_nodes) return false;
    g->pair_budget = (int32_t)(g->last_walked_nodes / 8 < PAIR_VISITS ? g->last_walked_nodes / 8 : PAIR_VISITS);
    return agree(g, c, p, g->v->max_len < SHORT_LEN ? g->v->max_len : SHORT_LEN) == 1 && !g->over;
}

bool cst_mask(cst_grammar *g, int32_t c, uint32_t *allowed) {
    const cst_vocab *v = g->v;
    const size_t words = ((size_t)v->n_vocab + 31) / 32;
    if (c < 0 || g->over) {
        only_eos(g, allowed, words);
        return !g->over;
    }
    if (g->cs[c].mask) {
        memcpy(allowed, g->cs[c].mask, words * sizeof *allowed);
        g->masks_cached++;
        return true;
    }
    /* the walk writes a scratch mask with one spare word: nodes without a token set bit n_vocab, so the
     * loop has no branch on it */
    const size_t sw = words + 1;
    if (!scratch_ready(g, sw)) {
        g->over = true;
        only_eos(g, allowed, words);
        return false;
    }
    uint32_t *acc = g->scratch;
    memset(acc, 0, sw * sizeof *acc);
    /* a state that agrees with the last walked one on every string of up to SHORT_LEN bytes has its mask
     * on the tokens up to that long; only the subtrees holding longer tokens are walked */
    const bool shared = shares_last_mask(g, c);
    if (g->over) {
        only_eos(g, allowed, words);
        return false;
    }
    if (shared) {
        int32_t unused;
        if (!walk(g, c, CST_FAR, acc, &unused, true, false)) {
            only_eos(g, allowed, words);
            return false;
        }
        const uint32_t *pm = g->cs[g->last_walked].mask;
        for (size_t w = 0; w < words; w++) allowed[w] = (pm[w] & ~v->long_tok[w]) | acc[w];
        if (v->n_vocab & 31) allowed[words - 1] &= (1u << (v->n_vocab & 31)) - 1;
        if (cst_accepting(g, c)) set_eos(g, allowed);
        g->masks_computed++;
        g->masks_shared++;
        g->cs[c].max_after = -1;
        uint32_t *m = malloc(words * sizeof *m);
        if (m && budget(g)) {
            memcpy(m, allowed, words * sizeof *m);
            g->cs[c].mask = m;
            g->bytes += words * sizeof *m;
        } else {
            free(m);
        }
        return true;
    }
    int32_t max_after = 0;
    /* The walk records the subtrees it takes whole and the dead ones; a string body's state allows most of
     * the vocabulary in a few thousand subtrees, and setting their ~120K bits one by one cost more than the
     * walk. The mask is then whichever is cheaper: the walked tokens plus the whole subtrees, or every
     * token but the dead subtrees' (the same set: each token is in exactly one of a walked node, a whole
     * subtree, or a dead one). */
    g->bulk.n = g->bulk.tokens = g->dead.n = g->dead.tokens = 0;
    if (!walk(g, c, CST_FAR, acc, &max_after, false, true)) {
        only_eos(g, allowed, words);
        return false;
    }
    const int32_t *order = v->order;
    if (g->dead.tokens + (int64_t)words < g->bulk.tokens) {
        memcpy(acc, v->all_tok, words * sizeof *acc);
        for (int64_t k = 0; k < g->dead.n; k += 2)
            for (int32_t j = g->dead.r[k]; j < g->dead.r[k + 1]; j++) {
                const int32_t t = order[j];
                acc[t >> 5] &= ~(1u << (t & 31));
            }
    } else {
        for (int64_t k = 0; k < g->bulk.n; k += 2)
            for (int32_t j = g->bulk.r[k]; j < g->bulk.r[k + 1]; j++) {
                const int32_t t = order[j];
                acc[t >> 5] |= 1u << (t & 31);
            }
    }
    memcpy(allowed, acc, words * sizeof *allowed);
    /* the spare bit (n_vocab) must not leak into the last word */
    if (v->n_vocab & 31) allowed[words - 1] &= (1u << (v->n_vocab & 31)) - 1;
    if (cst_accepting(g, c)) set_eos(g, allowed);
    g->masks_computed++;
    g->cs[c].max_after = g->dist ? max_after : -1;
    uint32_t *m = malloc(words * sizeof *m);
    if (m && budget(g)) {
        memcpy(m, allowed, words * sizeof *m);
        g->cs[c].mask = m;
        g->bytes += words * sizeof *m;
        g->last_walked = c;
        g->last_walked_nodes = g->walk_nodes;
    } else {
        free(m);
    }
    return true;
}

/* The shortest completions are computed on first use (only a budget needs them), then the states made so
 * far get theirs: dstates from their NFA states, frames in id order (a parent is older than its child),
 * csets from their frames. Masks cached before hold no max_after (-1). */
static bool ensure_min_bytes(cst_grammar *g) {
    if (g->dist) return true;
    if (!shortest_completions(g)) {
        free(g->dist);
        g->dist = NULL;
        return false;
    }
    for (int32_t d = 0; d < g->n_ds; d++) {
        int32_t mb = CST_FAR;
        for (int32_t i = 0; i < g->ds[d].set_n; i++)
            if (g->dist[g->pool[g->ds[d].set_off + i]] < mb) mb = g->dist[g->pool[g->ds[d].set_off + i]];
        g->ds[d].minb = mb;
    }
    for (int32_t f = 0; f < g->n_fr; f++) {
        const frame fr = g->fr[f];
        const int64_t mb = (int64_t)g->ds[fr.d].minb + (fr.parent >= 0 ? g->fr[fr.parent].minb : 0);
        g->fr[f].minb = mb < CST_FAR ? (int32_t)mb : CST_FAR;
    }
    for (int32_t c = 0; c < g->n_cs; c++) {
        int32_t mb = CST_FAR;
        for (int32_t i = 0; i < g->cs[c].n; i++)
            if (g->fr[g->fpool[g->cs[c].off + i]].minb < mb) mb = g->fr[g->fpool[g->cs[c].off + i]].minb;
        g->cmin[c] = mb;
    }
    g->bytes += (size_t)g->n_states * sizeof *g->dist;
    return true;
}

int32_t cst_min_bytes(cst_grammar *g, int32_t c) {
    if (c < 0 || !ensure_min_bytes(g)) return CST_FAR;
    return g->cmin[c];
}

bool cst_mask_within(cst_grammar *g, int32_t c, int32_t limit, uint32_t *allowed) {
    if (!ensure_min_bytes(g)) return cst_mask(g, c, allowed);
    if (!cst_mask(g, c, allowed)) return false;
    if (c < 0 || limit == CST_FAR || (g->cs[c].max_after >= 0 && g->cs[c].max_after <= limit))
        return true;   /* nothing to remove: the same mask */
    const cst_vocab *v = g->v;
    const size_t words = ((size_t)v->n_vocab + 31) / 32, sw = words + 1;
    if (!scratch_ready(g, sw)) return true;   /* out of memory: the unrestricted mask (still exact for the grammar) */
    uint32_t *acc = g->scratch;
    memset(acc, 0, sw * sizeof *acc);
    int32_t unused;
    if (!walk(g, c, limit < 0 ? -1 : limit, acc, &unused, false, false)) return true;
    memcpy(allowed, acc, words * sizeof *allowed);
    if (v->n_vocab & 31) allowed[words - 1] &= (1u << (v->n_vocab & 31)) - 1;
    if (cst_accepting(g, c)) set_eos(g, allowed);
    return true;
}

int32_t cst_advance_bytes(cst_grammar *g, int32_t c, const uint8_t *s, size_t len) {
    for (size_t i = 0; i < len && c >= 0; i++) c = cs_trans(g, c, s[i]);
    return c;
}

int32_t cst_advance(cst_grammar *g, int32_t c, int32_t tok) {
    const cst_vocab *v = g->v;
    if (c < 0 || tok < 0 || tok >= v->n_vocab) return CST_DEAD;
    const uint32_t len = v->off[tok + 1] - v->off[tok];
    if (len == 0) return CST_DEAD;
    return cst_advance_bytes(g, c, v->pieces + v->off[tok], len);
}

void cst_grammar_stats(const cst_grammar *g, cst_stats *s) {
    s->masks_computed = g->masks_computed;
    s->masks_shared = g->masks_shared;
    s->masks_cached = g->masks_cached;
    s->csets = g->n_cs;
    s->frames = g->n_fr;
    s->dfa_states = g->n_ds;
    s->nfa_states = g->n_states;
    s->bytes = g->bytes;
}
