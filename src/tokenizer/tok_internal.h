/* tok_internal: what the tokenizer's files share and nothing outside uses —
 * the vocab object, the string table, the merge map, the pre-tokenizer
 * interface and the per-algorithm entry points. */
#ifndef BRISK_TOK_INTERNAL_H
#define BRISK_TOK_INTERNAL_H

#include "tokenizer/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <locale.h>

/* Hard caps on vocabulary data (a hostile file must not make us allocate
 * without bound; real vocabularies are far below these). */
#define BRISK_VOCAB_MAX_TOKENS   (1 << 24)         /* ids fit comfortably in int32 */
#define BRISK_VOCAB_MAX_MERGES   (1 << 24)
#define BRISK_VOCAB_MAX_POOL     ((size_t)1 << 31) /* bytes of token + merge text */

/* ---- growable int32 vector (the output of every tokenizer) ---------------- */
typedef struct brisk_ivec {
    int32_t *v;
    size_t n, cap;
} brisk_ivec;

brisk_status brisk_ivec_push(brisk_ivec *a, int32_t x, brisk_error *err);
brisk_status brisk_ivec_reserve(brisk_ivec *a, size_t extra, brisk_error *err);

/* ---- growable byte buffer ---------------------------------------------------- */
typedef struct brisk_bbuf {
    char *p;
    size_t n, cap;
} brisk_bbuf;

brisk_status brisk_bbuf_reserve(brisk_bbuf *b, size_t extra, brisk_error *err);
brisk_status brisk_bbuf_append(brisk_bbuf *b, const void *s, size_t len, brisk_error *err);

/* ---- string table -----------------------------------------------------------
 * Every string has an id: ids [0, n_tokens) are the vocabulary's tokens in
 * file order; higher ids are strings that appear only in BPE merges. A hash
 * index maps text -> id; for duplicate token texts the later id wins (as
 * llama.cpp's token_to_id map). */
typedef struct brisk_strent {
    uint32_t off, len;       /* where an id's text lives in pool */
} brisk_strent;

typedef struct brisk_strtab {
    char *pool;              /* all texts, back to back, each NUL-terminated */
    size_t pool_len, pool_cap;
    brisk_strent *ent;       /* [n] */
    int32_t n, cap;
    uint64_t *slot;          /* [mask+1] open-addressing index: hash << 32 | (id + 1); 0 = empty */
    size_t mask;
} brisk_strtab;

uint64_t brisk_tok_hash(const void *s, size_t len);
void brisk_strtab_free(brisk_strtab *t);
/* Size the table for n strings totalling bytes (avoids rehashing while loading). */
brisk_status brisk_strtab_reserve(brisk_strtab *t, size_t n, size_t bytes, brisk_error *err);
/* -1 when absent. */
int32_t brisk_strtab_find(const brisk_strtab *t, const char *s, size_t len);
/* Append s as a new id and point the index at it (replacing an older id with
 * the same text). */
brisk_status brisk_strtab_append(brisk_strtab *t, const char *s, size_t len, int32_t *id, brisk_error *err);
/* The id of s, appending it if absent. */
brisk_status brisk_strtab_intern(brisk_strtab *t, const char *s, size_t len, int32_t *id, brisk_error *err);
/* Loading many strings is bound by cache misses on the index: hash first,
 * prefetch the slot, intern later with the same hash. */
void brisk_strtab_prefetch(const brisk_strtab *t, uint64_t h64);
brisk_status brisk_strtab_intern_hashed(brisk_strtab *t, const char *s, size_t len, uint64_t h64, int32_t *id,
                                        brisk_error *err);
static inline const char *brisk_strtab_text(const brisk_strtab *t, int32_t id) { return t->pool + t->ent[id].off; }
static inline size_t brisk_strtab_len(const brisk_strtab *t, int32_t id) { return t->ent[id].len; }

/* ---- BPE merge map: (left id, right id) -> (rank, merged id) ---------------- */
typedef struct brisk_pairmap {
    uint64_t *key;           /* [mask+1] left << 32 | right; UINT64_MAX = empty */
    int32_t *rank, *result;  /* [mask+1] */
    size_t mask, used;
} brisk_pairmap;

void brisk_pairmap_free(brisk_pairmap *m);
brisk_status brisk_pairmap_init(brisk_pairmap *m, size_t expected, brisk_error *err);
void brisk_pairmap_prefetch(const brisk_pairmap *m, int32_t left, int32_t right);
/* Insert unless present (the first rank of a repeated merge wins, as llama.cpp). */
void brisk_pairmap_put(brisk_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t result);
/* rank >= 0 and *result on a hit; -1 otherwise. */
static inline int32_t brisk_pairmap_get(const brisk_pairmap *m, int32_t left, int32_t right, int32_t *result) {
    uint64_t k = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 29) & m->mask;
    for (;;) {
        uint64_t kk = m->key[i];
        if (kk == k) {
            *result = m->result[i];
            return m->rank[i];
        }
        if (kk == UINT64_MAX) return -1;
        i = (i + 1) & m->mask;
    }
}

/* ---- pre-tokenizer (pretok.c) ------------------------------------------------ */
enum {
    BRISK_PRE_IGNORE_MERGES = 1 << 0,   /* a whole pre-token that is a token is emitted as is */
    BRISK_PRE_ADD_BOS       = 1 << 1,   /* default add_bos = true */
    BRISK_PRE_KEEP_SPACES   = 1 << 2,   /* clean_up_tokenization_spaces = false */
    BRISK_PRE_RAW_UTF8      = 1 << 3,   /* no GPT-2 byte encoding; <0xXX> byte fallback */
    BRISK_PRE_ESCAPE_WS     = 1 << 4,   /* spaces become U+2581 before BPE (SPM-style BPE) */
    BRISK_PRE_ADD_SEP       = 1 << 5,   /* default add_sep = true */
    BRISK_PRE_NO_BOS        = 1 << 6,   /* no default BOS id */
    BRISK_PRE_NL_TOKENS     = 1 << 7,   /* a pre-token of only newlines that is a token is emitted as is */
    BRISK_PRE_FORCE_BOS     = 1 << 8,   /* add_bos even when the file says false (llama.cpp's Gemma 4 rule) */
};

typedef struct brisk_pretok_def brisk_pretok_def;

/* Resolve a tokenizer.ggml.pre value (NULL/empty -> "default"). NULL when unknown. */
const brisk_pretok_def *brisk_pretok_find(const char *name, size_t len);
unsigned brisk_pretok_flags(const brisk_pretok_def *d);
const char *brisk_pretok_name(const brisk_pretok_def *d);

/* Compiled patterns of one pre-tokenizer (owned by the vocab). */
typedef struct brisk_pretok {
    const brisk_pretok_def *def;
    pcre2_code *re[8];
    size_t n_re;
    bool jit;
    pcre2_match_context *mctx;   /* no match limit: the patterns are linear, and llama.cpp has none */
} brisk_pretok;

brisk_status brisk_pretok_compile(brisk_pretok *p, const brisk_pretok_def *def, brisk_error *err);
void brisk_pretok_free(brisk_pretok *p);

/* One pre-token: bytes [off, off+len) of the normalised text. */
typedef struct brisk_span {
    size_t off, len;
} brisk_span;

/* Per-call scratch of the splitter (reused across fragments of one call). */
typedef struct brisk_split_ctx {
    brisk_bbuf norm;      /* text re-encoded as llama.cpp sees it (invalid bytes -> U+FFFD) */
    brisk_bbuf shadow;    /* what the regexes run on (see pretok.c); empty when == norm */
    brisk_span *spans, *spans2;
    size_t n_spans, cap_spans, cap_spans2;
    pcre2_match_data *md;
} brisk_split_ctx;

void brisk_split_ctx_free(brisk_split_ctx *c);
/* Normalise text into c->norm and split it into pre-tokens (c->spans, offsets in c->norm). */
brisk_status brisk_pretok_split(const brisk_pretok *p, brisk_split_ctx *c, const char *text, size_t len, brisk_error *err);

/* llama.cpp's lenient UTF-8 decoding: one code point from s[*i..n), advancing
 * *i; an invalid byte gives U+FFFD and advances by one. Overlong forms and
 * surrogates decode to their value; values above U+10FFFF give U+FFFD. */
uint32_t brisk_utf8_decode_lenient(const uint8_t *s, size_t n, size_t *i);
/* Encode cp (<= 0x10FFFF; surrogates allowed) into out, return 1..4. */
size_t brisk_utf8_encode(uint32_t cp, char *out);
/* Byte length of a UTF-8 sequence from its lead byte (llama.cpp's unicode_len_utf8). */
static inline size_t brisk_utf8_len(uint8_t c) {
    static const uint8_t lut[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lut[c >> 4];
}
/* The llama.cpp whitespace set (\s of its pre-tokenizers). */
bool brisk_cp_is_space(uint32_t cp);

/* ---- the vocabulary ----------------------------------------------------------- */
struct brisk_vocab {
    brisk_vocab_type type;
    int32_t n_tokens;
    brisk_strtab strs;         /* token texts (+ BPE merge-only strings) */
    float *score;              /* [n_tokens] SPM merge priority */
    uint32_t *attr;            /* [n_tokens] brisk_token_attr bits */
    uint8_t *eog;              /* [n_tokens] 1 = end of generation */
    brisk_pairmap merges;      /* BPE only */
    brisk_pretok pre;          /* BPE only */
    unsigned pre_flags;
    char pre_name[32];

    int32_t bos, eos, eot, eom, unk, sep, pad, mask;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos, add_sep;
    bool add_space_prefix;     /* SPM dummy prefix */
    bool escape_ws;            /* ' ' -> U+2581 before tokenizing */
    bool clean_spaces;
    bool ignore_merges;
    bool byte_encode;          /* GPT-2 byte-to-unicode mapping (BPE) */
    bool wpm_lowercase, wpm_strip_accents;

    int32_t byte_tok[256];     /* byte-fallback token per byte; -1 none */
    uint8_t spm_barrier[256];  /* 1: an ASCII byte that no token of 2+ bytes contains (spm.c) */
    size_t max_token_len;      /* longest token text, bytes (WPM search window) */

    /* special tokens split out of text before tokenizing: ids with
     * CONTROL|USER_DEFINED|UNKNOWN, longest text first */
    int32_t *special;
    size_t n_special;
    uint8_t special_first[256];  /* 1 if some special text starts with this byte */

    /* rendered pieces (special = true), as llama.cpp's token-to-piece cache */
    char *piece_pool;
    uint32_t *piece_off, *piece_len;
    size_t max_piece_len;
    size_t max_piece_out;      /* most bytes one piece can stream out (U+FFFD expansion included) */

    /* WPM classification (wpm.c) */
    pcre2_code *wpm_class;
    locale_t wpm_locale;       /* C.UTF-8, for towlower_l; (locale_t)0 when unavailable */
};

/* Algorithms: append the ids of one raw-text fragment to out. */
brisk_status brisk_spm_tokenize(const brisk_vocab *v, const char *text, size_t len, brisk_ivec *out, brisk_error *err);

typedef struct brisk_bpe_ctx brisk_bpe_ctx;
brisk_status brisk_bpe_ctx_init(brisk_bpe_ctx **out, brisk_error *err);
void brisk_bpe_ctx_free(brisk_bpe_ctx *c);
brisk_status brisk_bpe_tokenize(const brisk_vocab *v, brisk_bpe_ctx *c, const char *text, size_t len, brisk_ivec *out,
                                brisk_error *err);

brisk_status brisk_wpm_init(brisk_vocab *v, brisk_error *err);
void brisk_wpm_free(brisk_vocab *v);
brisk_status brisk_wpm_tokenize(const brisk_vocab *v, const char *text, size_t len, brisk_ivec *out, brisk_error *err);

/* GPT-2's byte-level alphabet: the byte a code point stands for, -1 if none (bpe.c). */
int32_t brisk_bpe_cp_to_byte(uint32_t cp);

/* Bytes the streaming detokenizer emits for s[0..n) on its own (detok.c). */
size_t brisk_detok_sanitized_len(const char *s, size_t n);

/* NFD: the first code point of the canonical decomposition (unicode_nfd.c). */
uint32_t brisk_nfd_first(uint32_t cp);

#endif
