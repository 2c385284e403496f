/* tokenize: text -> ids. Special tokens are split out of the text first
 * (longest text first, as llama.cpp's tokenizer_st_partition); the raw
 * fragments between them go to the vocabulary's algorithm. Also the one-shot
 * detokenizer, with llama.cpp's optional clean-up of spaces. */
#include "tokenizer/tok_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* A fragment: a special token (token >= 0) or raw text [off, off + len). */
typedef struct frag {
    int32_t token;
    size_t off, len;
} frag;

typedef struct frag_list {
    frag *a;
    size_t n, cap;
} frag_list;

static brisk_status frag_push(frag_list *l, int32_t token, size_t off, size_t len, brisk_error *err) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        if (cap > SIZE_MAX / sizeof(frag)) return brisk_fail(err, BRISK_ERR_NOMEM, "too many text fragments");
        frag *p = realloc(l->a, cap * sizeof *p);
        if (!p) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate %zu text fragments", cap);
        l->a = p;
        l->cap = cap;
    }
    l->a[l->n++] = (frag){token, off, len};
    return BRISK_OK;
}

/* n-gram presence filter over the text: a special token whose 2-grams or
 * 4-grams do not all occur in the text cannot occur in it. One pass over the
 * text replaces one substring search per special token (Qwen2 has ~300 that
 * are always searched). */
#define NG4_BITS 18

typedef struct ngram_filter {
    uint8_t byte[256];
    uint64_t pair[65536 / 64];
    uint64_t quad[(1u << NG4_BITS) / 64];
} ngram_filter;

static inline uint32_t quad_hash(uint32_t q) { return (q * 0x9E3779B1u) >> (32 - NG4_BITS); }

static void ngram_build(ngram_filter *f, const uint8_t *s, size_t n) {
    memset(f, 0, sizeof *f);
    uint32_t q = 0;
    for (size_t i = 0; i < n; i++) {
        f->byte[s[i]] = 1;
        q = (q << 8) | s[i];
        if (i >= 1) {
            uint32_t p = q & 0xFFFF;
            f->pair[p >> 6] |= 1ull << (p & 63);
        }
        if (i >= 3) {
            uint32_t h = quad_hash(q);
            f->quad[h >> 6] |= 1ull << (h & 63);
        }
    }
}

static bool ngram_may_contain(const ngram_filter *f, const uint8_t *t, size_t n) {
    if (n == 0) return false;
    if (!f->byte[t[0]]) return false;
    uint32_t q = t[0];
    for (size_t i = 1; i < n; i++) {
        q = (q << 8) | t[i];
        uint32_t p = q & 0xFFFF;
        if (!(f->pair[p >> 6] & (1ull << (p & 63)))) return false;
        if (i >= 3) {
            uint32_t h = quad_hash(q);
            if (!(f->quad[h >> 6] & (1ull << (h & 63)))) return false;
        }
    }
    return true;
}

static brisk_status partition(const brisk_vocab *v, const char *text, size_t len, bool parse_special, frag_list *out,
                              brisk_error *err) {
    brisk_status st = BRISK_OK;
    out->n = 0;
    if (len == 0) return BRISK_OK;
    st = frag_push(out, -1, 0, len, err);
    if (st != BRISK_OK || v->n_special == 0) return st;

    ngram_filter *f = malloc(sizeof *f);
    if (!f) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the special-token filter");
    ngram_build(f, (const uint8_t *)text, len);
    frag_list next = {0};
    for (size_t si = 0; si < v->n_special && st == BRISK_OK; si++) {
        int32_t id = v->special[si];
        uint32_t attr = v->attr[id];
        if (!parse_special && (attr & (BRISK_TOKEN_CONTROL | BRISK_TOKEN_UNKNOWN))) continue;
        const char *t = brisk_strtab_text(&v->strs, id);
        size_t tl = brisk_strtab_len(&v->strs, id);
        if (tl > len || !ngram_may_contain(f, (const uint8_t *)t, tl)) continue;

        next.n = 0;
        for (size_t fi = 0; fi < out->n && st == BRISK_OK; fi++) {
            frag fr = out->a[fi];
            if (fr.token >= 0) {
                st = frag_push(&next, fr.token, 0, 0, err);
                continue;
            }
            size_t off = fr.off, end = fr.off + fr.len;
            while (st == BRISK_OK && off < end) {
                const char *m = memmem(text + off, end - off, t, tl);
                if (!m) {
                    st = frag_push(&next, -1, off, end - off, err);
                    break;
                }
                size_t mpos = (size_t)(m - text), left = mpos - off;
                if (attr & BRISK_TOKEN_LSTRIP)
                    while (left > 0 && isspace((unsigned char)text[off + left - 1])) left--;
                if (left > 0) st = frag_push(&next, -1, off, left, err);
                if (st == BRISK_OK) st = frag_push(&next, id, 0, 0, err);
                off = mpos + tl;
                if (attr & BRISK_TOKEN_RSTRIP)
                    while (off < end && isspace((unsigned char)text[off])) off++;
            }
        }
        frag_list t2 = *out;
        *out = next;
        next = t2;
    }
    free(next.a);
    free(f);
    return st;
}

/* SPM and SPM-style BPE see spaces as U+2581; SPM also adds a dummy-prefix space. */
static brisk_status escape_fragment(brisk_bbuf *b, const char *s, size_t n, bool prefix_space, brisk_error *err) {
    b->n = 0;
    size_t spaces = prefix_space ? 1 : 0;
    for (size_t i = 0; i < n; i++) spaces += s[i] == ' ';
    size_t need;
    if (!brisk_mul_size(spaces, 2, &need) || !brisk_add_size(need, n + 1, &need))
        return brisk_fail(err, BRISK_ERR_NOMEM, "text too large");
    brisk_status st = brisk_bbuf_reserve(b, need, err);
    if (st != BRISK_OK) return st;
    char *o = b->p;
    size_t k = 0;
    if (prefix_space) {
        memcpy(o, "\xE2\x96\x81", 3);
        k = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(o + k, "\xE2\x96\x81", 3);
            k += 3;
        } else {
            o[k++] = s[i];
        }
    }
    b->n = k;
    o[k] = 0;
    return BRISK_OK;
}

brisk_status brisk_tokenize(const brisk_vocab *v, const char *text, size_t len, brisk_tokenize_opts opts, int32_t **ids,
                            size_t *n_ids, brisk_error *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tokenize: NULL text of length %zu", len);
    brisk_ivec out = {0};
    frag_list frags = {0};
    brisk_bbuf esc = {0};
    brisk_bpe_ctx *bpe = NULL;
    brisk_status st = partition(v, text, len, opts.parse_special, &frags, err);
    if (st != BRISK_OK) goto done;
    /* a first guess at the output size: about 4 bytes per token */
    st = brisk_ivec_reserve(&out, len / 4 + 8, err);
    if (st != BRISK_OK) goto done;

    bool add_bos = opts.add_special && (v->type == BRISK_VOCAB_WPM || v->add_bos) && v->bos >= 0;
    if (add_bos && (st = brisk_ivec_push(&out, v->bos, err)) != BRISK_OK) goto done;
    if (v->type == BRISK_VOCAB_BPE && (st = brisk_bpe_ctx_init(&bpe, err)) != BRISK_OK) goto done;

    bool prev_special = true;   /* SPM: the dummy prefix goes before the first fragment and after special tokens */
    for (size_t i = 0; i < frags.n && st == BRISK_OK; i++) {
        const frag *fr = &frags.a[i];
        if (fr->token >= 0) {
            st = brisk_ivec_push(&out, fr->token, err);
            prev_special = true;
            continue;
        }
        const char *s = text + fr->off;
        switch (v->type) {
        case BRISK_VOCAB_SPM:
            st = escape_fragment(&esc, s, fr->len, v->add_space_prefix && prev_special, err);
            if (st == BRISK_OK) st = brisk_spm_tokenize(v, esc.p, esc.n, &out, err);
            break;
        case BRISK_VOCAB_BPE:
            if (v->escape_ws) {
                st = escape_fragment(&esc, s, fr->len, false, err);
                if (st == BRISK_OK) st = brisk_bpe_tokenize(v, bpe, esc.p, esc.n, &out, err);
            } else {
                st = brisk_bpe_tokenize(v, bpe, s, fr->len, &out, err);
            }
            break;
        case BRISK_VOCAB_WPM:
            st = brisk_wpm_tokenize(v, s, fr->len, &out, err);
            break;
        case BRISK_VOCAB_TEST:
            /* llama.cpp's test tokenizer: each 5-byte chunk, hashed (h = 31 h + byte), modulo the vocabulary */
            for (size_t pos = 0; st == BRISK_OK && pos < fr->len; pos += 5) {
                uint64_t h = 0;
                for (size_t i = pos; i < fr->len && i < pos + 5; i++) h = h * 31 + (uint8_t)s[i];
                st = brisk_ivec_push(&out, (int32_t)(h % (uint64_t)v->n_tokens), err);
            }
            break;
        case BRISK_VOCAB_NONE:
            st = brisk_fail(err, BRISK_ERR_UNSUPPORTED, "this model has no vocabulary (tokenizer.ggml.model 'none'): text cannot be tokenized, give token ids");
            break;
        }
        prev_special = false;
    }
    if (st != BRISK_OK) goto done;
    if (opts.add_special) {
        if (v->type == BRISK_VOCAB_WPM) {
            if (v->sep >= 0) st = brisk_ivec_push(&out, v->sep, err);
        } else if (v->add_eos && v->eos >= 0) {
            st = brisk_ivec_push(&out, v->eos, err);
        }
    }
done:
    brisk_bpe_ctx_free(bpe);
    free(frags.a);
    free(esc.p);
    if (st != BRISK_OK) {
        free(out.v);
        return st;
    }
    if (out.n == 0) {
        free(out.v);
        out.v = NULL;
    }
    *ids = out.v;
    *n_ids = out.n;
    return BRISK_OK;
}

/* ---- one-shot detokenization ------------------------------------------------------------- */

/* llama.cpp's clean_up_tokenization_spaces: " ?", " !", " .", " ," lose the
 * space; a lone "'" between spaces loses both; " 's", " 'm", " 're", " 've"
 * lose the space. */
static size_t clean_spaces(char *t, size_t total) {
    size_t n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) n--;
        t[n++] = x;
    }
    total = n;
    n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) {
        char x = t[i];
        if (x == '\'' && i + 1 < total && t[i - 1] == ' ' && t[i + 1] == ' ') {
            n--;
            t[++i] = '\0';
        }
        t[n++] = x;
    }
    total = n;
    n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < total) {
            char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm') n--;
            else if (i + 2 < total && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e'))) n--;
        }
        t[n++] = x;
    }
    return n;
}

brisk_status brisk_detokenize(const brisk_vocab *v, const int32_t *ids, size_t n, brisk_detokenize_opts opts, char **out,
                              size_t *len, brisk_error *err) {
    *out = NULL;
    *len = 0;
    brisk_bbuf b = {0};
    brisk_status st = brisk_bbuf_reserve(&b, n * 4, err);
    for (size_t i = 0; st == BRISK_OK && i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= v->n_tokens) {
            st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "detokenize: token id %d at %zu out of range [0, %d)", id, i,
                            v->n_tokens);
            break;
        }
        if (!opts.special && (v->attr[id] & (BRISK_TOKEN_UNKNOWN | BRISK_TOKEN_CONTROL))) continue;
        const char *p = v->piece_pool + v->piece_off[id];
        size_t pl = v->piece_len[id];
        if (i == 0 && opts.strip_leading && v->add_space_prefix && pl && p[0] == ' ') p++, pl--;
        st = brisk_bbuf_append(&b, p, pl, err);
    }
    if (st == BRISK_OK && !b.p) st = brisk_bbuf_reserve(&b, 0, err);
    if (st != BRISK_OK) {
        free(b.p);
        return st;
    }
    if (opts.clean_spaces && v->clean_spaces) b.n = clean_spaces(b.p, b.n);
    b.p[b.n] = 0;
    *out = b.p;
    *len = b.n;
    return BRISK_OK;
}
