/* wpm: WordPiece (tokenizer.ggml.model = "bert"), as llama.cpp's
 * llm_tokenizer_wpm.
 *
 * Normalisation, per code point (invalid UTF-8 becomes U+FFFD first):
 *   strip_accents: map to the first code point of its NFD (unicode_nfd.c);
 *   whitespace ends a word; NUL, U+FFFD and category C (Cc Cf Co Cs) vanish;
 *   strip_accents: marks (M) vanish; lowercase: simple lowercase mapping;
 *   punctuation (P), ASCII symbols (S) and CJK ideographs stand alone.
 * Each word, prefixed with U+2581, is then cut greedily into the longest
 * tokens from the left; a word with any uncovered rest becomes [UNK].
 *
 * Categories come from PCRE2's Unicode tables (plus the Unicode 15.1 additions
 * of unicode_delta.h, as llama.cpp's table), the lowercase mapping from
 * glibc's C.UTF-8 locale (towlower_l on a locale object the vocab owns, so no
 * global locale is touched). */
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode_delta.h"

#include <stdlib.h>
#include <string.h>
#include <wctype.h>

enum { WPM_OTHER = 0, WPM_PUNCT, WPM_MARK, WPM_CONTROL, WPM_SYMBOL };

brisk_status brisk_wpm_init(brisk_vocab *v, brisk_error *err) {
    int ec = 0;
    PCRE2_SIZE eo = 0;
    /* group numbers are the WPM_* values; the extras are Unicode 15.1 (unicode_delta.h) */
    static const char pat[] = "([\\p{P}" BRISK_UCD_EXTRA_P "])|([\\p{M}" BRISK_UCD_EXTRA_M "])"
                              "|([\\p{Cc}\\p{Cf}\\p{Co}" BRISK_UCD_EXTRA_C "])|([\\p{S}" BRISK_UCD_EXTRA_S "])";
    v->wpm_class = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &ec, &eo, NULL);
    if (!v->wpm_class) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "WordPiece: cannot compile the category classifier");
    v->wpm_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    return BRISK_OK;
}

void brisk_wpm_free(brisk_vocab *v) {
    if (v->wpm_class) pcre2_code_free(v->wpm_class);
    if (v->wpm_locale) freelocale(v->wpm_locale);
    v->wpm_class = NULL;
    v->wpm_locale = (locale_t)0;
}

static int classify_ascii(uint32_t c) {
    if (c < 0x20 || c == 0x7F) return WPM_CONTROL;
    if (strchr("!\"#%&'()*,-./:;?@[\\]_{}", (int)c)) return WPM_PUNCT;
    if (strchr("$+<=>^`|~", (int)c)) return WPM_SYMBOL;
    return WPM_OTHER;
}

static int classify(const brisk_vocab *v, pcre2_match_data *md, uint32_t cp) {
    if (cp < 0x80) return classify_ascii(cp);
    if (cp >= 0xD800 && cp <= 0xDFFF) return WPM_CONTROL;   /* Cs; not encodable for PCRE2 */
    char buf[4];
    size_t n = brisk_utf8_encode(cp, buf);
    int rc = pcre2_match(v->wpm_class, (PCRE2_SPTR)buf, n, 0, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc <= 1) return WPM_OTHER;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    for (int g = 1; g < rc; g++)
        if (ov[2 * g] != PCRE2_UNSET) return g;   /* group number == WPM_* value */
    return WPM_OTHER;
}

static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) ||
           (c >= 0x2B920 && c <= 0x2CEAF) ||   /* sic: 0x2B820 in Unicode; HF (and llama.cpp) use 0x2B920 */
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static uint32_t to_lower(const brisk_vocab *v, uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    if (!v->wpm_locale || (cp >= 0xD800 && cp <= 0xDFFF)) return cp;
    wint_t r = towlower_l((wint_t)cp, v->wpm_locale);
    return (uint32_t)r <= 0x10FFFF ? (uint32_t)r : cp;
}

/* Greedy longest-match of "▁" + word (w[0..n) already has the prefix). */
static brisk_status wpm_word(const brisk_vocab *v, const char *w, size_t n, brisk_ivec *out, brisk_error *err) {
    size_t start = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = BRISK_MIN(n, i + v->max_token_len + 1);
        int32_t id = -1;
        for (; j > i; j--) {
            id = brisk_strtab_find(&v->strs, w + i, j - i);
            if (id >= 0 && id < v->n_tokens) break;
            id = -1;
        }
        if (id < 0) {   /* an uncovered rest: drop the word's tokens */
            out->n = start;
            break;
        }
        brisk_status st = brisk_ivec_push(out, id, err);
        if (st != BRISK_OK) return st;
        i = j;
    }
    if (out->n == start && v->unk >= 0) return brisk_ivec_push(out, v->unk, err);
    return BRISK_OK;
}

brisk_status brisk_wpm_tokenize(const brisk_vocab *v, const char *text, size_t len, brisk_ivec *out, brisk_error *err) {
    static const char prefix[] = "\xE2\x96\x81";
    brisk_status st = BRISK_OK;
    brisk_bbuf word = {0};
    pcre2_match_data *md = pcre2_match_data_create(5, NULL);
    if (!md) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate regex match data");
    st = brisk_bbuf_append(&word, prefix, 3, err);

    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (st == BRISK_OK && i <= len) {
        bool end = i == len;
        uint32_t cp = 0;
        if (!end) {
            cp = brisk_utf8_decode_lenient(s, len, &i);
            if (v->wpm_strip_accents) cp = brisk_nfd_first(cp);
        }
        if (end || brisk_cp_is_space(cp)) {
            if (word.n > 3) st = wpm_word(v, word.p, word.n, out, err);
            word.n = 3;
            if (end) break;
            continue;
        }
        int cls = classify(v, md, cp);
        if (cp == 0 || cp == 0xFFFD || cls == WPM_CONTROL) continue;
        if (v->wpm_strip_accents && cls == WPM_MARK) continue;
        char u[4];
        size_t un = brisk_utf8_encode(v->wpm_lowercase ? to_lower(v, cp) : cp, u);
        if (cls == WPM_PUNCT || (cp < 0x7F && cls == WPM_SYMBOL) || is_cjk(cp)) {
            if (word.n > 3) st = wpm_word(v, word.p, word.n, out, err);
            word.n = 3;
            if (st == BRISK_OK) st = brisk_bbuf_append(&word, u, un, err);
            if (st == BRISK_OK) st = wpm_word(v, word.p, word.n, out, err);
            word.n = 3;
        } else {
            st = brisk_bbuf_append(&word, u, un, err);
        }
    }
    free(word.p);
    pcre2_match_data_free(md);
    return st;
}
