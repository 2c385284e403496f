/* tpl: internals of the template engine shared by its files.
 *
 *   value.c     arena, strings and UTF-8, values, Python str()/repr(), JSON
 *   lexer.c     source -> tokens (whitespace control, trim/lstrip_blocks)
 *   parser.c    tokens -> syntax tree
 *   render.c    the evaluator and the public API of template.h
 *   pyops.c     Python operations: iteration, attribute/item access, slices, `in`, arithmetic
 *   builtins.c  filters, tests, globals
 *   methods.c   Python str/list/dict methods and case mapping
 *
 * Memory: the syntax tree lives in the template's arena; every value made
 * while rendering lives in the render's arena and dies with it. Lists and
 * dicts are shared by reference, as in Python. */
#ifndef BRISK_TPL_H
#define BRISK_TPL_H

#include "template/template.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena ------------------------------------------------------------------ */

typedef struct tpl_chunk tpl_chunk;
typedef struct tpl_arena {
    tpl_chunk *head;
    size_t total;      /* bytes obtained from malloc */
    size_t limit;      /* cap on total; 0 = none */
    uint64_t handed;   /* bytes handed out so far (the render charges them as work) */
} tpl_arena;

/* NULL when the allocation fails or would pass the limit. Memory is 16-aligned. */
void *tpl_alloc(tpl_arena *a, size_t n);
void *tpl_alloc_array(tpl_arena *a, size_t n, size_t size);
void tpl_arena_free(tpl_arena *a);

/* ---- strings ------------------------------------------------------------------ */

typedef struct tpl_str {
    const char *p;
    size_t n;
} tpl_str;

#define TPL_STR_LIT(s) ((tpl_str){(s), sizeof(s) - 1})

static inline bool tpl_str_eq(tpl_str a, tpl_str b) {
    return a.n == b.n && (a.n == 0 || __builtin_memcmp(a.p, b.p, a.n) == 0);
}
bool tpl_str_eqc(tpl_str a, const char *c);

/* UTF-8: decode one code point at s[*i] (advancing *i); malformed bytes decode
 * as themselves (U+0080..U+00FF) so nothing is lost. */
uint32_t tpl_utf8_next(const char *s, size_t n, size_t *i);
size_t tpl_utf8_put(char *dst, uint32_t cp);   /* writes 1..4 bytes */
size_t tpl_utf8_len(tpl_str s);                 /* code points */
/* Byte offset of code point index ci (ci <= length). */
size_t tpl_utf8_offset(tpl_str s, size_t ci);
bool tpl_is_space(uint32_t cp);                 /* Python str.isspace() */

/* Growable byte buffer (malloc'd), with a cap. */
typedef struct tpl_buf {
    char *p;
    size_t n, cap;
    size_t limit;      /* 0 = none */
    bool over;         /* a write passed the limit or malloc failed */
} tpl_buf;

bool tpl_buf_put(tpl_buf *b, const char *s, size_t n);
bool tpl_buf_putc(tpl_buf *b, char c);
bool tpl_buf_puts(tpl_buf *b, const char *s);
bool tpl_buf_printf(tpl_buf *b, const char *fmt, ...) BRISK_PRINTF(2, 3);
void tpl_buf_free(tpl_buf *b);

/* ---- values -------------------------------------------------------------------- */

typedef enum tpl_type {
    TPL_UNDEF, TPL_NONE, TPL_BOOL, TPL_INT, TPL_FLOAT, TPL_STR,
    TPL_LIST,    /* list, tuple, generator, range, dict views: see tpl_list.kind */
    TPL_DICT,
    TPL_NS,      /* jinja2 namespace(): a dict whose attributes can be assigned */
    TPL_FUNC,    /* builtin function or bound method (fn, self) */
    TPL_MACRO,
    TPL_LOOP,    /* the `loop` object of a for loop */
} tpl_type;

/* value flags */
enum {
    TPL_F_MARKUP = 1,    /* TPL_STR: a markupsafe.Markup (from |safe, |escape) */
    TPL_F_HINT = 2,      /* TPL_UNDEF: u.s is the full message, not a name */
    TPL_F_UNSAFE = 4,    /* TPL_UNDEF: a sandbox-blocked attribute (SecurityError when used) */
    TPL_F_GROW = 8,      /* TPL_STR: u.s.p is the data of a growable block (see str_append in render.c) */
};

typedef enum tpl_list_kind {
    TPL_LK_LIST, TPL_LK_TUPLE, TPL_LK_GEN, TPL_LK_RANGE, TPL_LK_KEYS, TPL_LK_VALUES, TPL_LK_ITEMS,
} tpl_list_kind;

typedef struct tpl_list tpl_list;
typedef struct tpl_dict tpl_dict;
typedef struct tpl_macro tpl_macro;
typedef struct tpl_loop tpl_loop;
typedef struct tpl_value tpl_value;

struct tpl_value {
    uint8_t type;     /* tpl_type */
    uint8_t flags;
    uint16_t fn;      /* TPL_FUNC: builtin id */
    union {
        bool b;
        int64_t i;
        double f;
        tpl_str s;    /* TPL_STR; TPL_UNDEF: variable name or message (TPL_F_HINT) */
        tpl_list *list;
        tpl_dict *dict;    /* TPL_DICT, TPL_NS */
        tpl_macro *macro;
        tpl_loop *loop;
        const tpl_value *self;   /* TPL_FUNC: bound receiver (NULL for a plain function) */
    } u;
};

struct tpl_list {
    size_t n, cap;
    tpl_value *v;
    uint8_t kind;        /* tpl_list_kind */
    bool consumed;       /* TPL_LK_GEN: iterated once already (generators are single-use) */
    int64_t r_start, r_stop, r_step;   /* TPL_LK_RANGE, for repr */
};

/* A dict keeps its entries in insertion order (Python's iteration order) and,
 * once it has more than TPL_DICT_LINEAR of them, an open-addressing index
 * over them, so lookups and inserts cost O(1) expected instead of a scan. */
struct tpl_dict {
    size_t n, cap;
    tpl_value *k, *v;    /* insertion order, as Python dicts */
    uint64_t *h;         /* tpl_hash of each key */
    uint32_t *slots;     /* entry index + 1 per slot, 0 = empty (linear probing); NULL while small */
    size_t nslots;       /* power of two, at least twice n */
};

#define TPL_DICT_LINEAR 8

typedef struct tpl_node tpl_node;
typedef struct tpl_scope tpl_scope;

struct tpl_macro {
    const tpl_node *node;     /* TPL_N_MACRO */
    tpl_scope *closure;       /* the scope it was defined in (names bind late, as in jinja2) */
};

struct tpl_loop {
    const tpl_value *items;   /* the (filtered) items iterated */
    size_t n;
    size_t i;                 /* current index0 */
    int depth;                /* loop.depth (1 = outermost recursive level) */
};

static inline tpl_value tpl_undef(void) { tpl_value v = {0}; v.type = TPL_UNDEF; return v; }
static inline tpl_value tpl_none(void) { tpl_value v = {0}; v.type = TPL_NONE; return v; }
static inline tpl_value tpl_bool(bool b) { tpl_value v = {0}; v.type = TPL_BOOL; v.u.b = b; return v; }
static inline tpl_value tpl_int(int64_t i) { tpl_value v = {0}; v.type = TPL_INT; v.u.i = i; return v; }
static inline tpl_value tpl_float(double f) { tpl_value v = {0}; v.type = TPL_FLOAT; v.u.f = f; return v; }
static inline tpl_value tpl_strv(tpl_str s) { tpl_value v = {0}; v.type = TPL_STR; v.u.s = s; return v; }
static inline tpl_value tpl_listv(tpl_list *l) { tpl_value v = {0}; v.type = TPL_LIST; v.u.list = l; return v; }
static inline tpl_value tpl_dictv(tpl_dict *d) { tpl_value v = {0}; v.type = TPL_DICT; v.u.dict = d; return v; }
static inline bool tpl_is_str(const tpl_value *v) { return v->type == TPL_STR; }
static inline bool tpl_is_num(const tpl_value *v) {
    return v->type == TPL_INT || v->type == TPL_FLOAT || v->type == TPL_BOOL;
}

/* ---- nesting and work ------------------------------------------------------------ */

/* The engine's one nesting limit. Every recursive walk of a value (hashing,
 * ==, <, str()/repr(), tojson) stops with an error past this many levels, and
 * so do JSON input and the parser; the evaluator's own frames are capped at a
 * multiple of it (render.c). Python stops near 1000 levels (its recursion
 * limit) for all of these but tuple hashing; real chat values nest under 20
 * deep (tool schemas), so 512 is out of every real template's reach while
 * a walk this deep needs well under 1 MiB of stack even under ASan. */
#define TPL_MAX_NEST 512

/* State of one walk over values: the work it did (elements visited, bytes
 * hashed or compared / 64) against the work the render has left, and why it
 * stopped early. Walks never allocate from it; the caller charges w.work to
 * the render and turns fail into an error (tpl_walk_end in render.c). */
enum { TPL_WALK_OK, TPL_WALK_DEEP, TPL_WALK_BUDGET };
typedef struct tpl_walk {
    uint64_t work, limit;
    uint8_t fail;
} tpl_walk;

/* Count n units of work; false (and fail set) once past the limit. */
static inline bool tpl_walk_charge(tpl_walk *w, uint64_t n) {
    w->work += n;
    if (w->work > w->limit) {
        if (!w->fail) w->fail = TPL_WALK_BUDGET;
        return false;
    }
    return true;
}
static inline bool tpl_walk_enter(tpl_walk *w, int depth) {
    if (depth >= TPL_MAX_NEST) {
        if (!w->fail) w->fail = TPL_WALK_DEEP;
        return false;
    }
    return tpl_walk_charge(w, 1);
}

tpl_list *tpl_list_new(tpl_arena *a, size_t cap, tpl_list_kind kind);
bool tpl_list_push(tpl_arena *a, tpl_list *l, tpl_value v);
tpl_dict *tpl_dict_new(tpl_arena *a, size_t cap);
/* Python hash(): 1 with *h set, 0 for an unhashable value (list, dict, ...),
 * -1 when the walk stopped (w->fail). Equal values (tpl_eq) hash alike:
 * 1 == 1.0 == True, a Markup and the str of the same text. */
int tpl_hash(const tpl_value *v, uint64_t *h, tpl_walk *w);
uint64_t tpl_hash_str(tpl_str s);
/* Lookup of a key whose hash is h; NULL when absent or the walk stopped. */
tpl_value *tpl_dict_find(const tpl_dict *d, const tpl_value *k, uint64_t h, tpl_walk *w);
tpl_value *tpl_dict_gets(const tpl_dict *d, tpl_str k);
/* Insert or replace (Python dict assignment). false: out of memory or the
 * walk stopped (w->fail). */
bool tpl_dict_put(tpl_arena *a, tpl_dict *d, tpl_value k, uint64_t h, tpl_value v, tpl_walk *w);
bool tpl_dict_puts(tpl_arena *a, tpl_dict *d, tpl_str k, tpl_value v);
/* Append a key known to be absent (JSON objects, copies). */
bool tpl_dict_append(tpl_arena *a, tpl_dict *d, tpl_value k, uint64_t h, tpl_value v);
tpl_dict *tpl_dict_copy(tpl_arena *a, const tpl_dict *d);

tpl_str tpl_str_dup(tpl_arena *a, const char *p, size_t n);   /* n=0 gives a static "" */
tpl_str tpl_str_cat(tpl_arena *a, tpl_str x, tpl_str y);
tpl_value tpl_str_value(tpl_arena *a, const char *cstr);      /* copies */

/* Python truthiness (generators are always true, as in Python). */
bool tpl_truthy(const tpl_value *v);
/* Python type name for messages: "str", "int", "dict", "NoneType", ... */
const char *tpl_type_name(const tpl_value *v);
/* jinja2's object_type_repr: "'dict object'", "'None'", ... without quotes */
void tpl_object_desc(const tpl_value *v, char *buf, size_t n);

/* Python ==. Mismatched types are unequal; false with w->fail set when the
 * walk stopped (too deep, out of work). */
bool tpl_eq(const tpl_value *a, const tpl_value *b, tpl_walk *w, int depth);
/* Python <: *lt = a < b. Fails (false) for unorderable types (message in msg)
 * or when the walk stopped (w->fail set, msg empty). */
bool tpl_lt(const tpl_value *a, const tpl_value *b, bool *lt, char *msg, size_t msgn, tpl_walk *w);

/* Python str() / repr() appended to b. BRISK_ERR_UNSUPPORTED (message in msg)
 * for values whose Python repr shows a memory address (functions, generators);
 * BRISK_ERR_CAPACITY when b is full or nesting is too deep. */
brisk_status tpl_to_str(tpl_buf *b, const tpl_value *v, char *msg, size_t msgn);
brisk_status tpl_repr(tpl_buf *b, const tpl_value *v, char *msg, size_t msgn);
void tpl_float_repr(double f, char out[32]);   /* Python float.__repr__ */

/* Unicode data of the reference Python (unicode_tables.c, generated). */
typedef struct tpl_case_run {
    uint32_t lo, hi;
    int32_t du, dl, dt;     /* code point deltas to upper/lower/title */
    uint8_t alt, cased;     /* alt: odd offsets use deltas - 1 */
} tpl_case_run;
typedef struct tpl_case_special {
    uint32_t cp;
    uint32_t upper[3], lower[3], title[3];   /* 0-terminated when shorter */
} tpl_case_special;
extern const tpl_case_run tpl_case_runs[];
extern const size_t tpl_case_nruns;
extern const tpl_case_special tpl_case_specials[];
extern const size_t tpl_case_nspecials;
extern const uint32_t tpl_nonprint_ranges[][2];
extern const size_t tpl_nonprint_nranges;
bool tpl_uni_printable(uint32_t cp);     /* str.isprintable() of one code point */

/* json.dumps. indent: NULL for none (else the indent unit); item_sep/key_sep
 * NULL for Python's defaults. Fails with a Python-style message in msg. */
typedef struct tpl_json_opts {
    bool ensure_ascii;
    bool sort_keys;
    const tpl_str *indent;
    const tpl_str *item_sep, *key_sep;
} tpl_json_opts;
bool tpl_json_dump(tpl_buf *b, const tpl_value *v, const tpl_json_opts *o, int depth, char *msg, size_t msgn,
                   tpl_walk *w);

/* ---- symbols --------------------------------------------------------------------- */

/* Names the engine knows by id; the parser interns them first, in this order. */
typedef enum tpl_sym_builtin {
    TPL_SYM_LOOP, TPL_SYM_VARARGS, TPL_SYM_KWARGS, TPL_SYM_CALLER,
    TPL_SYM_MESSAGES, TPL_SYM_TOOLS, TPL_SYM_DOCUMENTS, TPL_SYM_AGP,
    TPL_SYM_RANGE, TPL_SYM_NAMESPACE, TPL_SYM_DICT, TPL_SYM_RAISE, TPL_SYM_STRFTIME,
    TPL_SYM_LIPSUM, TPL_SYM_CYCLER, TPL_SYM_JOINER,
    TPL_SYM_N_BUILTIN
} tpl_sym_builtin;

/* ---- syntax tree ----------------------------------------------------------------- */

typedef enum tpl_node_kind {
    /* statements */
    TPL_N_DATA,        /* cval: the text */
    TPL_N_OUTPUT,      /* a: expression */
    TPL_N_IF,          /* a: test, body, orelse */
    TPL_N_FOR,         /* a: target, b: iterable, c: filter or NULL, body, orelse; op: recursive */
    TPL_N_SET,         /* a: target (NAME/NSREF/TUPLE), b: value */
    TPL_N_SET_BLOCK,   /* a: target, c: filter chain over TPL_N_BLOCK_VALUE or NULL, body */
    TPL_N_MACRO,       /* sym: name, args: parameters (NAME), defs: defaults (last ndefs), body */
    TPL_N_FILTER_BLOCK,/* c: filter chain over TPL_N_BLOCK_VALUE, body */
    TPL_N_SCOPE,       /* body in its own scope ({% generation %}) */
    TPL_N_WITH,        /* args: targets, defs: values, body */
    TPL_N_BREAK, TPL_N_CONTINUE,
    /* expressions */
    TPL_N_CONST,       /* cval */
    TPL_N_NAME,        /* sym, name */
    TPL_N_NSREF,       /* assignment target ns.attr: sym, name (attr) */
    TPL_N_GETATTR,     /* a . name */
    TPL_N_GETITEM,     /* a [ b ] */
    TPL_N_SLICE,       /* a [ b : c : d ] (each of b, c, d may be NULL) */
    TPL_N_CALL,        /* a ( args, kwnames=kwargs ) */
    TPL_N_FILTER,      /* a | name(args...); op: builtin id; a NULL in filter blocks */
    TPL_N_TEST,        /* a is name(args...); op: builtin id */
    TPL_N_BLOCK_VALUE, /* the rendered body of a filter block / set block */
    TPL_N_NEG, TPL_N_POS, TPL_N_NOT,
    TPL_N_BINOP,       /* a op b; op: tpl_binop */
    TPL_N_CONCAT,      /* args joined with ~ */
    TPL_N_AND, TPL_N_OR,
    TPL_N_COMPARE,     /* a, then args[i] with cmpops[i] */
    TPL_N_CONDEXPR,    /* b if a else c (c may be NULL) */
    TPL_N_LIST, TPL_N_TUPLE,   /* args */
    TPL_N_DICT,        /* args: keys, defs: values */
    TPL_N_UNKNOWN_FN,  /* filter/test jinja2 does not have (runtime error): name, op 0=filter 1=test */
} tpl_node_kind;

typedef enum tpl_binop {
    TPL_OP_ADD, TPL_OP_SUB, TPL_OP_MUL, TPL_OP_DIV, TPL_OP_FLOORDIV, TPL_OP_MOD, TPL_OP_POW,
} tpl_binop;

typedef enum tpl_cmpop {
    TPL_CMP_EQ, TPL_CMP_NE, TPL_CMP_LT, TPL_CMP_LE, TPL_CMP_GT, TPL_CMP_GE, TPL_CMP_IN, TPL_CMP_NOTIN,
} tpl_cmpop;

typedef struct tpl_nodes {
    tpl_node **v;
    uint32_t n;
} tpl_nodes;

struct tpl_node {
    uint8_t kind;        /* tpl_node_kind */
    uint8_t flags;
    uint16_t op;         /* operator, builtin id, recursive flag */
    uint32_t line;
    uint32_t sym;        /* TPL_N_NAME / NSREF / MACRO */
    tpl_str name;        /* attribute, filter or test name; variable name */
    tpl_node *a, *b, *c, *d;
    tpl_nodes body, orelse;
    tpl_nodes args;      /* positional arguments, list items, dict keys, macro params */
    tpl_nodes defs;      /* keyword argument values, dict values, macro defaults */
    tpl_str *kwnames;    /* keyword argument names (defs.n of them) */
    uint8_t *cmpops;     /* TPL_N_COMPARE: args.n operators */
    tpl_value cval;
};

enum {
    TPL_NF_USES_VARARGS = 1, TPL_NF_USES_KWARGS = 2, TPL_NF_USES_CALLER = 4,   /* TPL_N_MACRO */
    TPL_NF_CONST = 8,    /* expression of literals only (jinja2 folds it at compile time) */
};

struct brisk_template {
    tpl_arena arena;     /* nodes, strings, symbols */
    char *src;           /* normalized source (newlines \n, one trailing \n dropped) */
    size_t src_len;
    tpl_nodes root;
    tpl_str *syms;       /* symbol id -> name */
    uint32_t nsyms;
};

/* ---- lexer ------------------------------------------------------------------------ */

typedef enum tpl_tok_type {
    TPL_T_EOF, TPL_T_DATA, TPL_T_VAR_BEGIN, TPL_T_VAR_END, TPL_T_BLOCK_BEGIN, TPL_T_BLOCK_END,
    TPL_T_NAME, TPL_T_STRING, TPL_T_INT, TPL_T_FLOAT, TPL_T_OP,
} tpl_tok_type;

typedef struct tpl_token {
    uint8_t type;
    char op[3];          /* TPL_T_OP: the operator text, NUL-terminated */
    uint32_t line;
    tpl_str text;        /* a slice of the normalized source (strings: with quotes) */
} tpl_token;

typedef struct tpl_tokens {
    tpl_token *v;
    size_t n, cap;
} tpl_tokens;

/* Tokenize t->src. Errors are BRISK_ERR_TEMPLATE with "template line N: ...". */
brisk_status tpl_lex(const char *src, size_t len, tpl_tokens *out, brisk_error *err);
void tpl_tokens_free(tpl_tokens *t);

/* ---- parser ------------------------------------------------------------------------ */

brisk_status tpl_parse(brisk_template *t, const tpl_tokens *toks, brisk_error *err);

/* ---- builtins (builtins.c, methods.c) ------------------------------------------------ */

typedef enum tpl_fn_kind { TPL_FK_FILTER, TPL_FK_TEST, TPL_FK_GLOBAL, TPL_FK_METHOD } tpl_fn_kind;

/* Builtin ids: one space, split in ranges by kind. */
enum { TPL_ID_GLOBAL = 1, TPL_ID_FILTER = 64, TPL_ID_TEST = 192, TPL_ID_METHOD = 320, TPL_ID_END = 512 };
typedef enum tpl_global_id {
    TPL_G_RANGE = TPL_ID_GLOBAL, TPL_G_NAMESPACE, TPL_G_DICT, TPL_G_RAISE, TPL_G_STRFTIME,
    TPL_G_LIPSUM, TPL_G_CYCLER, TPL_G_JOINER, TPL_G_LOOP_CYCLE, TPL_G_LOOP_CHANGED, TPL_G_END
} tpl_global_id;

/* Builtin lookup by name. Returns the id (> 0), 0 when jinja2 has no such
 * filter/test, or -1 when jinja2 has it but brisk does not implement it. */
int tpl_builtin_find(tpl_fn_kind kind, tpl_str name);
const char *tpl_builtin_name(int id);

/* Method lookup on a receiver type. Returns the id (> 0); 0 when Python's type
 * has no such attribute; -1 when it has but brisk does not implement it; -2
 * when the sandbox blocks it (a mutating method). */
int tpl_method_find(const tpl_value *self, tpl_str name);

typedef struct tpl_ctx tpl_ctx;

typedef struct tpl_args {
    const tpl_value *pos;
    size_t npos;
    const tpl_str *kwnames;
    const tpl_value *kw;
    size_t nkw;
} tpl_args;

/* Bind call arguments to a Python-style parameter list: slots[i] points at
 * the value given for params[i], or is NULL. Fails like Python's TypeError. */
brisk_status tpl_bind(tpl_ctx *c, const char *fname, const char *const *params, size_t nparams, const tpl_args *a,
                      const tpl_value **slots);

/* Call builtin `id` (a filter gets its input as self; a method its receiver). */
brisk_status tpl_call_builtin(tpl_ctx *c, int id, const tpl_value *self, const tpl_args *a, tpl_value *out);
/* Run test `id` on v. */
brisk_status tpl_run_test(tpl_ctx *c, int id, const tpl_value *v, const tpl_args *a, bool *out);

/* Case mapping (methods.c): Python str.upper/lower/title/capitalize. Fails
 * with BRISK_ERR_UNSUPPORTED for cased scripts brisk has no table for. */
typedef enum tpl_case { TPL_CASE_UPPER, TPL_CASE_LOWER, TPL_CASE_TITLE, TPL_CASE_CAPITALIZE } tpl_case;
brisk_status tpl_str_case(tpl_ctx *c, tpl_str s, tpl_case mode, tpl_str *out);
brisk_status tpl_call_method(tpl_ctx *c, int id, const tpl_value *self, const tpl_args *a, tpl_value *out);
/* Python's printf-style `fmt % args` (methods.c). */
brisk_status tpl_str_mod(tpl_ctx *c, const tpl_value *fmt, const tpl_value *args, tpl_value *out);

/* ---- render context (render.c) --------------------------------------------------------- */

struct tpl_ctx {
    const brisk_template *t;
    tpl_arena arena;
    brisk_error *err;
    tpl_buf *out;              /* current output sink */
    uint64_t steps, max_steps;
    uint64_t work, max_work;   /* the work budget: see tpl_charge */
    uint64_t handed_charged;   /* arena.handed already charged */
    int depth, max_depth;      /* macro calls and loops */
    int rdepth;                /* evaluator C recursion */
    size_t max_output;
    time_t now;
    uint32_t line;             /* line of the node being evaluated, for messages */
    const tpl_value *block_value;
};

/* Charge n units of work to the render; fails once the budget is spent. One
 * unit is one evaluation step or loop iteration, one element visited, copied,
 * compared or hashed, 64 bytes scanned, copied or produced, 8 bytes of text
 * walked code point by code point, or 16 bytes of render memory handed out
 * (docs/TEMPLATES.md). */
brisk_status tpl_charge(tpl_ctx *c, uint64_t n);
/* A walk over values with the render's remaining work as its limit, and its
 * end: charges what it did and turns a stop into an error naming `what`. */
void tpl_walk_begin(tpl_ctx *c, tpl_walk *w);
brisk_status tpl_walk_end(tpl_ctx *c, tpl_walk *w, const char *what);
/* Python ==, < and hash() as render operations (charged, failing cleanly). */
brisk_status tpl_equal(tpl_ctx *c, const tpl_value *a, const tpl_value *b, bool *out);
brisk_status tpl_less(tpl_ctx *c, const tpl_value *a, const tpl_value *b, bool *lt);
/* hash(k), failing with Python's "unhashable type" TypeError. */
brisk_status tpl_hash_key(tpl_ctx *c, const tpl_value *k, uint64_t *h);
/* d[k] (NULL when absent) / d[k] = v, with the key checks Python makes. */
brisk_status tpl_dict_lookup(tpl_ctx *c, const tpl_dict *d, const tpl_value *k, const tpl_value **out);
brisk_status tpl_dict_insert(tpl_ctx *c, tpl_dict *d, tpl_value k, tpl_value v);
/* Record an error "template line N: <msg>" and return st. */
brisk_status tpl_fail(tpl_ctx *c, brisk_status st, const char *fmt, ...) BRISK_PRINTF(3, 4);
brisk_status tpl_nomem(tpl_ctx *c);
/* Calling an undefined value / using it in arithmetic: jinja2's UndefinedError
 * (or SecurityError for blocked attributes). */
brisk_status tpl_undef_fail(tpl_ctx *c, const tpl_value *u);
/* Items of an iterable (list/tuple/range/views/generator/str/dict keys). Generators
 * are marked consumed. Undefined iterates as empty. Fails for non-iterables. */
brisk_status tpl_iterate(tpl_ctx *c, const tpl_value *v, const tpl_value **items, size_t *n);
/* Call any callable (macro, builtin) with arguments. */
brisk_status tpl_call_value(tpl_ctx *c, const tpl_value *fn, const tpl_args *a, tpl_value *out);
/* jinja2 environment.getattr / getitem semantics (sandboxed). */
brisk_status tpl_getattr(tpl_ctx *c, const tpl_value *obj, tpl_str name, tpl_value *out);
brisk_status tpl_getitem(tpl_ctx *c, const tpl_value *obj, const tpl_value *key, tpl_value *out);
/* Python repr() of a name for messages ('x', "it's"). */
void tpl_repr_name(tpl_str s, char *buf, size_t n);
/* obj[start:stop:step] (each NONE when absent). */
brisk_status tpl_slice(tpl_ctx *c, const tpl_value *obj, const tpl_value *start, const tpl_value *stop,
                       const tpl_value *step, tpl_value *out);
/* *acc (a str) += add, in place when acc owns the tail of a growable block. */
brisk_status tpl_str_append(tpl_ctx *c, tpl_value *acc, tpl_str add);
/* Python `item in cont`. */
brisk_status tpl_contains(tpl_ctx *c, const tpl_value *item, const tpl_value *cont, bool *out);
/* Binary arithmetic with Python semantics (op: tpl_binop). */
brisk_status tpl_arith(tpl_ctx *c, int op, const tpl_value *a, const tpl_value *b, tpl_value *out);
/* str(v) as a string value (strings are returned as is). */
brisk_status tpl_stringify(tpl_ctx *c, const tpl_value *v, tpl_str *out);
brisk_status tpl_make_undef_hint(tpl_ctx *c, tpl_value *out, const char *fmt, ...) BRISK_PRINTF(3, 4);

#endif
