/* vocab: building a brisk_vocab from GGUF tokenizer.ggml.* metadata, the
 * same way llama.cpp's llama_vocab::impl::load does (defaults per model type,
 * special ids, the end-of-generation set, the special-token list, per-token
 * attribute fixes), plus the rendered piece of every token. */
#include "tokenizer/tok_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers -------------------------------------------------------------------- */

static int32_t find_token(const brisk_vocab *v, const char *s) {
    int32_t id = brisk_strtab_find(&v->strs, s, strlen(s));
    return id < v->n_tokens ? id : -1;
}

/* Read an optional integer key into *id when it names a token in range. */
static brisk_status read_special_id(const brisk_gguf *g, const char *key, int32_t n_tokens, int32_t *id, brisk_error *err) {
    bool found = false;
    int64_t x = 0;
    brisk_status st = brisk_gguf_get_i64(g, key, &x, &found, err);
    if (st != BRISK_OK) return st;
    if (found && x >= 0 && x < n_tokens) *id = (int32_t)x;   /* out of range: keep the default, as llama.cpp */
    return BRISK_OK;
}

static brisk_status read_bool(const brisk_gguf *g, const char *key, bool *out, brisk_error *err) {
    bool found = false, b = false;
    brisk_status st = brisk_gguf_get_bool(g, key, &b, &found, err);
    if (st == BRISK_OK && found) *out = b;
    return st;
}

/* ---- pieces ---------------------------------------------------------------------------------- */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The byte of a <0xXX> token (strtol semantics on the two characters after "<0x"). */
static uint8_t byte_token_value(const char *t, size_t n) {
    if (n < 4) return 0;
    int hi = hexval(t[3]);
    if (hi < 0) return 0;
    int lo = n >= 5 ? hexval(t[4]) : -1;
    return (uint8_t)(lo < 0 ? hi : hi * 16 + lo);
}

/* Render token id with special = true into b (appending). */
static brisk_status render_piece(const brisk_vocab *v, int32_t id, brisk_bbuf *b, brisk_error *err) {
    if (v->type == BRISK_VOCAB_TEST) {   /* llama.cpp's test vocabulary detokenizes an id as its hex digits */
        char hex[16];
        const int n = snprintf(hex, sizeof hex, "%x", (unsigned)id);
        return brisk_bbuf_append(b, hex, (size_t)n, err);
    }
    if (v->type == BRISK_VOCAB_NONE) return BRISK_OK;   /* no text at all */
    const char *t = brisk_strtab_text(&v->strs, id);
    size_t n = brisk_strtab_len(&v->strs, id);
    uint32_t a = v->attr[id];
    if (a & (BRISK_TOKEN_UNKNOWN | BRISK_TOKEN_CONTROL | BRISK_TOKEN_USER_DEFINED)) return brisk_bbuf_append(b, t, n, err);
    if (a & BRISK_TOKEN_NORMAL) {
        if (v->type == BRISK_VOCAB_BPE && !v->escape_ws) {
            /* byte-level text back to bytes; a character outside the byte map
             * gives llama.cpp's "[UNK_BYTE_0x..<text>]" marker */
            size_t i = 0;
            while (i < n) {
                uint32_t cp = brisk_utf8_decode_lenient((const uint8_t *)t, n, &i);
                int32_t byte = brisk_bpe_cp_to_byte(cp);
                brisk_status st;
                if (byte >= 0) {
                    char c = (char)byte;
                    st = brisk_bbuf_append(b, &c, 1, err);
                } else {
                    char u[4], hex[16];
                    size_t un = brisk_utf8_encode(cp, u);
                    st = brisk_bbuf_append(b, "[UNK_BYTE_0x", 12, err);
                    for (size_t j = 0; st == BRISK_OK && j < un; j++) {
                        snprintf(hex, sizeof hex, "%02x", (unsigned)(uint8_t)u[j]);
                        st = brisk_bbuf_append(b, hex, 2, err);
                    }
                    if (st == BRISK_OK) st = brisk_bbuf_append(b, t, n, err);
                    if (st == BRISK_OK) st = brisk_bbuf_append(b, "]", 1, err);
                }
                if (st != BRISK_OK) return st;
            }
            return BRISK_OK;
        }
        /* U+2581 -> space */
        size_t i = 0;
        while (i < n) {
            if (i + 3 <= n && memcmp(t + i, "\xE2\x96\x81", 3) == 0) {
                brisk_status st = brisk_bbuf_append(b, " ", 1, err);
                if (st != BRISK_OK) return st;
                i += 3;
                continue;
            }
            size_t j = i + 1;
            while (j < n && !(j + 3 <= n && memcmp(t + j, "\xE2\x96\x81", 3) == 0)) j++;
            brisk_status st = brisk_bbuf_append(b, t + i, j - i, err);
            if (st != BRISK_OK) return st;
            i = j;
        }
        return BRISK_OK;
    }
    if ((a & BRISK_TOKEN_BYTE) && v->type != BRISK_VOCAB_WPM) {
        char c = (char)byte_token_value(t, n);
        return brisk_bbuf_append(b, &c, 1, err);
    }
    return BRISK_OK;   /* unused / undefined tokens render as nothing */
}

static brisk_status build_pieces(brisk_vocab *v, brisk_error *err) {
    brisk_bbuf b = {0};
    v->piece_off = malloc((size_t)v->n_tokens * sizeof *v->piece_off);
    v->piece_len = malloc((size_t)v->n_tokens * sizeof *v->piece_len);
    if (!v->piece_off || !v->piece_len) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the piece table");
    for (int32_t id = 0; id < v->n_tokens; id++) {
        size_t before = b.n;
        brisk_status st = render_piece(v, id, &b, err);
        if (st == BRISK_OK && b.n > UINT32_MAX) st = brisk_fail(err, BRISK_ERR_CAPACITY, "rendered pieces exceed 4 GiB");
        if (st != BRISK_OK) {
            free(b.p);
            return st;
        }
        v->piece_off[id] = (uint32_t)before;
        v->piece_len[id] = (uint32_t)(b.n - before);
        size_t pl = b.n - before;
        if (pl > v->max_piece_len) v->max_piece_len = pl;
        size_t po = pl ? brisk_detok_sanitized_len(b.p + before, pl) : 0;   /* b.p is NULL until a piece has bytes */
        if (po > v->max_piece_out) v->max_piece_out = po;
    }
    v->piece_pool = b.p ? b.p : calloc(1, 1);
    if (!v->piece_pool) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the piece table");
    return BRISK_OK;
}

/* ---- special tokens ------------------------------------------------------------------------------ */

static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "<end_of_utterance>", NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
                                            "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const fim_suf_texts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>",
                                            "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const fim_mid_texts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
                                            "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[", NULL};

/* When *slot is unset, take the listed text with the lowest id and make it a
 * control token. (llama.cpp walks a hash map, so when a vocabulary holds
 * several candidates its pick is arbitrary; ours is the lowest id.) */
static void detect_by_text(brisk_vocab *v, int32_t *slot, const char *const *texts) {
    if (*slot >= 0) return;
    int32_t best = -1;
    for (size_t i = 0; texts[i]; i++) {
        int32_t id = find_token(v, texts[i]);
        if (id >= 0 && (best < 0 || id < best)) best = id;
    }
    if (best < 0) return;
    *slot = best;
    v->attr[best] |= BRISK_TOKEN_CONTROL;
}

static void set_eog(brisk_vocab *v) {
    int32_t *fim[] = {&v->fim_pad, &v->fim_rep, &v->fim_sep};
    for (size_t i = 0; i < BRISK_ARRAY_LEN(fim); i++)
        if (*fim[i] >= 0) v->eog[*fim[i]] = 1;
    for (size_t i = 0; eog_texts[i]; i++) {
        int32_t id = find_token(v, eog_texts[i]);
        if (id < 0) continue;
        v->eog[id] = 1;
        v->attr[id] |= BRISK_TOKEN_CONTROL;
    }
    /* gpt-oss: these render even without special */
    static const char *const always[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (size_t i = 0; i < BRISK_ARRAY_LEN(always); i++) {
        int32_t id = find_token(v, always[i]);
        if (id >= 0) v->attr[id] = BRISK_TOKEN_USER_DEFINED;
    }
    if (v->eos >= 0) v->eog[v->eos] = 1;
    if (v->eot >= 0) v->eog[v->eot] = 1;
    if (v->eom >= 0) v->eog[v->eom] = 1;

    /* harmony / solar-open: <|end|> is not the end when <|return|>+<|call|>
     * (or <|calls|>+<|flush|>) are also end-of-generation tokens */
    int32_t ret = find_token(v, "<|return|>"), call = find_token(v, "<|call|>"), calls = find_token(v, "<|calls|>");
    int32_t flush = find_token(v, "<|flush|>"), end = find_token(v, "<|end|>");
    bool has_return = ret >= 0 && v->eog[ret], has_flush = flush >= 0 && v->eog[flush];
    bool has_call = (call >= 0 && v->eog[call]) || (calls >= 0 && v->eog[calls]);
    if (end >= 0 && v->eog[end] && ((has_return && has_call) || (has_call && has_flush))) {
        v->eog[end] = 0;
        v->attr[end] = BRISK_TOKEN_USER_DEFINED;
    }
    /* gemma 4: </s> is an ordinary token there */
    int32_t tool = find_token(v, "<|tool_response>"), s_end = find_token(v, "</s>");
    if (tool >= 0 && v->eog[tool] && s_end >= 0 && v->eog[s_end]) {
        v->eog[s_end] = 0;
        v->attr[s_end] = BRISK_TOKEN_NORMAL;
    }
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const brisk_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = brisk_strtab_len(&v->strs, x), ly = brisk_strtab_len(&v->strs, y);
    if (lx != ly) return lx > ly ? -1 : 1;   /* longest first */
    return x < y ? -1 : x > y;
}

static brisk_status build_special(brisk_vocab *v, brisk_error *err) {
    size_t n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->attr[id] & (BRISK_TOKEN_CONTROL | BRISK_TOKEN_USER_DEFINED | BRISK_TOKEN_UNKNOWN)) n++;
    v->special = malloc((n ? n : 1) * sizeof *v->special);
    if (!v->special) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the special-token list");
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->attr[id] & (BRISK_TOKEN_CONTROL | BRISK_TOKEN_USER_DEFINED | BRISK_TOKEN_UNKNOWN)) {
            v->special[v->n_special++] = id;
            v->special_first[(uint8_t)brisk_strtab_text(&v->strs, id)[0]] = 1;
        }
    qsort_r(v->special, v->n_special, sizeof *v->special, cmp_special, v);
    return BRISK_OK;
}

/* llama.cpp's per-model attribute fixes (by general.name / pre / architecture). */
static void attr_fixes(brisk_vocab *v, const brisk_gguf *g) {
    char name[128] = {0}, pre[64] = {0}, arch[64] = {0};
    brisk_str s;
    bool found;
    if (brisk_gguf_get_str(g, "general.name", &s, &found, NULL) == BRISK_OK && found)
        snprintf(name, sizeof name, "%.*s", (int)BRISK_MIN(s.len, sizeof name - 1), s.ptr);
    if (brisk_gguf_get_str(g, "tokenizer.ggml.pre", &s, &found, NULL) == BRISK_OK && found)
        snprintf(pre, sizeof pre, "%.*s", (int)BRISK_MIN(s.len, sizeof pre - 1), s.ptr);
    if (brisk_gguf_get_str(g, "general.architecture", &s, &found, NULL) == BRISK_OK && found)
        snprintf(arch, sizeof arch, "%.*s", (int)BRISK_MIN(s.len, sizeof arch - 1), s.ptr);
    for (char *p = name; *p; p++) *p = (char)tolower((unsigned char)*p);

    if (strstr(pre, "jina-v2-de") || strstr(pre, "jina-v2-es") || strstr(pre, "jina-v2-code") ||
        strstr(arch, "nomic-bert-moe") || strstr(arch, "jina-bert-v3")) {
        int32_t id = find_token(v, "<mask>");
        if (id >= 0) v->attr[id] |= BRISK_TOKEN_LSTRIP;
    } else if (strstr(name, "phi-3") || strstr(name, "phi3")) {
        for (size_t i = 0; i < v->n_special; i++) v->attr[v->special[i]] |= BRISK_TOKEN_RSTRIP;
        int32_t id = find_token(v, "</s>");
        if (id >= 0) v->attr[id] |= BRISK_TOKEN_RSTRIP;
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t i = 0; i < BRISK_ARRAY_LEN(keep); i++) {
            id = find_token(v, keep[i]);
            if (id >= 0) v->attr[id] &= ~(uint32_t)BRISK_TOKEN_RSTRIP;
        }
    } else if (strstr(name, "modern-bert")) {
        int32_t id = find_token(v, "[MASK]");
        if (id >= 0) v->attr[id] |= BRISK_TOKEN_LSTRIP;
    }
}

/* ---- load ------------------------------------------------------------------------------------------ */

void brisk_vocab_free(brisk_vocab *v) {
    if (!v) return;
    brisk_strtab_free(&v->strs);
    free(v->score);
    free(v->attr);
    free(v->eog);
    brisk_pairmap_free(&v->merges);
    brisk_pretok_free(&v->pre);
    free(v->special);
    free(v->piece_pool);
    free(v->piece_off);
    free(v->piece_len);
    brisk_wpm_free(v);
    free(v);
}

static brisk_status load_tokens(brisk_vocab *v, const brisk_gguf *g, brisk_error *err) {
    brisk_gguf_value arr;
    bool found = false;
    brisk_status st = brisk_gguf_get_arr(g, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, &arr, &found, err);
    if (st != BRISK_OK) return st;
    if (!found) return brisk_fail(err, BRISK_ERR_FORMAT, "tokenizer.ggml.tokens: missing (no vocabulary in this file)");
    if (arr.v.arr.count == 0 || arr.v.arr.count > BRISK_VOCAB_MAX_TOKENS)
        return brisk_fail(err, BRISK_ERR_FORMAT, "tokenizer.ggml.tokens: %llu tokens (must be 1..%d)",
                          (unsigned long long)arr.v.arr.count, BRISK_VOCAB_MAX_TOKENS);
    size_t n = (size_t)arr.v.arr.count;
    brisk_str *strs = malloc(n * sizeof *strs);
    if (!strs) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate %zu token strings", n);
    st = brisk_gguf_arr_strings(&arr, strs, err);
    size_t bytes = n * 16;   /* room for "[EMPTY_n]" placeholders and the NULs */
    for (size_t i = 0; st == BRISK_OK && i < n; i++) bytes += strs[i].len;
    if (st == BRISK_OK) st = brisk_strtab_reserve(&v->strs, n, bytes, err);
    for (size_t i = 0; st == BRISK_OK && i < n; i++) {
        int32_t id;
        char empty[32];
        const char *p = strs[i].ptr;
        size_t len = strs[i].len;
        if (len == 0) {   /* as llama.cpp: an empty token gets a placeholder text */
            len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%zu]", i);
            p = empty;
        }
        st = brisk_strtab_append(&v->strs, p, len, &id, err);
        if (st == BRISK_OK && len > v->max_token_len) v->max_token_len = len;
    }
    free(strs);
    if (st != BRISK_OK) return st;
    v->n_tokens = (int32_t)n;

    v->score = calloc(n, sizeof *v->score);
    v->attr = malloc(n * sizeof *v->attr);
    v->eog = calloc(n, 1);
    if (!v->score || !v->attr || !v->eog) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate token tables");

    /* scores: float32 or int32 */
    st = brisk_gguf_get_arr(g, "tokenizer.ggml.scores", BRISK_GGUF_FLOAT32, &arr, &found, NULL);
    bool is_float = st == BRISK_OK && found;
    if (!is_float) {
        st = brisk_gguf_get_arr(g, "tokenizer.ggml.scores", BRISK_GGUF_INT32, &arr, &found, NULL);
        if (st != BRISK_OK)
            return brisk_fail(err, BRISK_ERR_FORMAT, "tokenizer.ggml.scores: must be an array of float32 or int32");
    }
    if (found) {
        if (arr.v.arr.count < n)
            return brisk_fail(err, BRISK_ERR_FORMAT, "tokenizer.ggml.scores: %llu scores for %zu tokens",
                              (unsigned long long)arr.v.arr.count, n);
        for (size_t i = 0; i < n; i++)
            v->score[i] = is_float ? (float)brisk_gguf_arr_float(&arr, i) : (float)brisk_gguf_arr_int(&arr, i);
    }

    /* token types */
    st = brisk_gguf_get_arr(g, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, &arr, &found, err);
    if (st != BRISK_OK) return st;
    if (found && arr.v.arr.count < n)
        return brisk_fail(err, BRISK_ERR_FORMAT, "tokenizer.ggml.token_type: %llu types for %zu tokens",
                          (unsigned long long)arr.v.arr.count, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t a = BRISK_TOKEN_NORMAL;
        if (found) {
            switch (brisk_gguf_arr_int(&arr, i)) {
            case 1: a = BRISK_TOKEN_NORMAL; break;
            case 2: a = BRISK_TOKEN_UNKNOWN; break;
            case 3: a = BRISK_TOKEN_CONTROL; break;
            case 4: a = BRISK_TOKEN_USER_DEFINED; break;
            case 5: a = BRISK_TOKEN_UNUSED; break;
            case 6: a = BRISK_TOKEN_BYTE; break;
            default: a = BRISK_TOKEN_UNDEFINED; break;
            }
        }
        v->attr[i] = a;
    }
    return BRISK_OK;
}

static brisk_status load_merges(brisk_vocab *v, const brisk_gguf *g, brisk_error *err) {
    brisk_gguf_value arr;
    bool found = false;
    brisk_status st = brisk_gguf_get_arr(g, "tokenizer.ggml.merges", BRISK_GGUF_STRING, &arr, &found, err);
    if (st != BRISK_OK) return st;
    if (!found) return brisk_fail(err, BRISK_ERR_FORMAT, "tokenizer.ggml.merges: missing (required by a BPE vocabulary)");
    if (arr.v.arr.count > BRISK_VOCAB_MAX_MERGES)
        return brisk_fail(err, BRISK_ERR_FORMAT, "tokenizer.ggml.merges: %llu merges (at most %d)",
                          (unsigned long long)arr.v.arr.count, BRISK_VOCAB_MAX_MERGES);
    size_t n = (size_t)arr.v.arr.count;
    brisk_str *m = malloc((n ? n : 1) * sizeof *m);
    if (!m) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate %zu merges", n);
    st = brisk_gguf_arr_strings(&arr, m, err);
    if (st == BRISK_OK) st = brisk_pairmap_init(&v->merges, n, err);
    if (st == BRISK_OK) st = brisk_strtab_reserve(&v->strs, (size_t)v->strs.n + n / 16 + 1024, v->strs.pool_len, err);
    /* in batches: hash all strings of a batch and prefetch their index slots,
     * then intern them, then insert the pairs (3x fewer stalls on the ~1M
     * random index accesses of a large vocabulary) */
    enum { BATCH = 32 };
    struct pending {
        const char *l, *r;
        size_t ll, rl, coff;
        uint64_t hl, hr, hc;
        int32_t il, ir, ic;
    } pb[BATCH];
    brisk_bbuf cat = {0};
    for (size_t base = 0; st == BRISK_OK && base < n; base += BATCH) {
        size_t nb = 0;
        cat.n = 0;
        for (size_t i = base; st == BRISK_OK && i < n && i < base + BATCH; i++) {
            /* "left right", split at the first space after the first byte; a
             * merge without one is an empty pair in llama.cpp that never matches */
            const char *sp = m[i].len > 1 ? memchr(m[i].ptr + 1, ' ', m[i].len - 1) : NULL;
            struct pending *p = &pb[nb];
            if (!sp) {
                p->l = NULL;
                nb++;
                continue;
            }
            p->l = m[i].ptr;
            p->ll = (size_t)(sp - m[i].ptr);
            p->r = sp + 1;
            p->rl = m[i].len - p->ll - 1;
            p->coff = cat.n;
            st = brisk_bbuf_append(&cat, p->l, p->ll, err);
            if (st == BRISK_OK) st = brisk_bbuf_append(&cat, p->r, p->rl, err);
            nb++;
        }
        for (size_t k = 0; st == BRISK_OK && k < nb; k++) {
            struct pending *p = &pb[k];
            if (!p->l) continue;
            p->hl = brisk_tok_hash(p->l, p->ll);
            p->hr = brisk_tok_hash(p->r, p->rl);
            p->hc = brisk_tok_hash(cat.p + p->coff, p->ll + p->rl);
            brisk_strtab_prefetch(&v->strs, p->hl);
            brisk_strtab_prefetch(&v->strs, p->hr);
            brisk_strtab_prefetch(&v->strs, p->hc);
        }
        for (size_t k = 0; st == BRISK_OK && k < nb; k++) {
            struct pending *p = &pb[k];
            if (!p->l) continue;
            st = brisk_strtab_intern_hashed(&v->strs, p->l, p->ll, p->hl, &p->il, err);
            if (st == BRISK_OK) st = brisk_strtab_intern_hashed(&v->strs, p->r, p->rl, p->hr, &p->ir, err);
            if (st == BRISK_OK)
                st = brisk_strtab_intern_hashed(&v->strs, cat.p + p->coff, p->ll + p->rl, p->hc, &p->ic, err);
            if (st == BRISK_OK) brisk_pairmap_prefetch(&v->merges, p->il, p->ir);
        }
        for (size_t k = 0; st == BRISK_OK && k < nb; k++)
            if (pb[k].l) brisk_pairmap_put(&v->merges, pb[k].il, pb[k].ir, (int32_t)(base + k), pb[k].ic);
    }
    free(cat.p);
    free(m);
    if (st != BRISK_OK) brisk_error_prefix(err, "tokenizer.ggml.merges");
    return st;
}

/* "none" without a token list: ARCH.vocab_size placeholder tokens, as
 * llama.cpp's dummy vocabulary (ids only; their text is never shown). */
static brisk_status dummy_tokens(brisk_vocab *v, const brisk_gguf *g, brisk_error *err) {
    brisk_str arch = {0};
    bool found = false;
    brisk_status st = brisk_gguf_get_str(g, "general.architecture", &arch, &found, err);
    if (st != BRISK_OK) return st;
    char key[96];
    snprintf(key, sizeof key, "%.*s.vocab_size", (int)BRISK_MIN(arch.len, 64), found ? arch.ptr : "");
    uint32_t n = 0;
    if ((st = brisk_gguf_get_u32(g, key, &n, &found, err)) != BRISK_OK) return st;
    if (!found || n == 0 || n > BRISK_VOCAB_MAX_TOKENS)
        return brisk_fail(err, BRISK_ERR_FORMAT, "tokenizer.ggml.model 'none' without tokens needs %s in 1..%d", key, BRISK_VOCAB_MAX_TOKENS);
    if ((st = brisk_strtab_reserve(&v->strs, n, (size_t)n * 16, err)) != BRISK_OK) return st;
    for (uint32_t i = 0; i < n; i++) {
        char t[32];
        int32_t id;
        const int len = snprintf(t, sizeof t, "[EMPTY_%u]", i);
        if ((st = brisk_strtab_append(&v->strs, t, (size_t)len, &id, err)) != BRISK_OK) return st;
        if ((size_t)len > v->max_token_len) v->max_token_len = (size_t)len;
    }
    v->n_tokens = (int32_t)n;
    v->score = calloc(n, sizeof *v->score);
    v->attr = malloc(n * sizeof *v->attr);
    v->eog = calloc(n, 1);
    if (!v->score || !v->attr || !v->eog) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate token tables");
    for (uint32_t i = 0; i < n; i++) v->attr[i] = BRISK_TOKEN_NORMAL;
    return BRISK_OK;
}

brisk_status brisk_vocab_load(const brisk_gguf *g, brisk_vocab **out, brisk_error *err) {
    *out = NULL;
    brisk_vocab *v = calloc(1, sizeof *v);
    if (!v) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate a vocabulary");
    brisk_status st;
    brisk_str model = {0}, pre = {0};
    bool found = false, has_pre = false;

    st = brisk_gguf_get_str(g, "tokenizer.ggml.model", &model, &found, err);
    if (st != BRISK_OK) goto fail;
    if (!found) {
        st = brisk_fail(err, BRISK_ERR_FORMAT, "tokenizer.ggml.model: missing (no tokenizer in this file)");
        goto fail;
    }
    st = brisk_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &has_pre, err);
    if (st != BRISK_OK) goto fail;

    /* defaults per model type, as llama.cpp */
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->mask = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;
    v->escape_ws = true;
    if (brisk_str_eq(model, "llama")) {
        v->type = BRISK_VOCAB_SPM;
        v->bos = 1, v->eos = 2, v->unk = 0;
        v->add_space_prefix = true;
        v->add_bos = true;
        snprintf(v->pre_name, sizeof v->pre_name, "default");
    } else if (brisk_str_eq(model, "bert")) {
        v->type = BRISK_VOCAB_WPM;
        v->bos = 101, v->unk = 100, v->sep = 102, v->pad = 0, v->mask = 103;
        v->add_sep = true;
        v->add_bos = true;
        v->clean_spaces = true;
        snprintf(v->pre_name, sizeof v->pre_name, "default");
    } else if (brisk_str_eq(model, "gpt2") || brisk_str_eq(model, "gemma4")) {
        v->type = BRISK_VOCAB_BPE;
        bool gemma4 = brisk_str_eq(model, "gemma4");
        const brisk_pretok_def *def = gemma4 ? brisk_pretok_find("gemma4", 6)
                                             : brisk_pretok_find(has_pre ? pre.ptr : NULL, has_pre ? pre.len : 0);
        if (!def) {
            st = brisk_fail(err, BRISK_ERR_UNSUPPORTED, "tokenizer.ggml.pre: unknown pre-tokenizer '%.*s'",
                            (int)BRISK_MIN(pre.len, 64), pre.ptr);
            goto fail;
        }
        if (!gemma4) v->bos = v->eos = 11;
        v->pre_flags = brisk_pretok_flags(def);
        if (v->pre_flags & BRISK_PRE_NO_BOS) v->bos = -1;
        v->escape_ws = (v->pre_flags & BRISK_PRE_ESCAPE_WS) != 0;
        v->clean_spaces = !(v->pre_flags & BRISK_PRE_KEEP_SPACES);
        v->ignore_merges = (v->pre_flags & BRISK_PRE_IGNORE_MERGES) != 0;
        v->add_bos = (v->pre_flags & BRISK_PRE_ADD_BOS) != 0;
        v->add_sep = (v->pre_flags & BRISK_PRE_ADD_SEP) != 0;
        v->byte_encode = !(v->pre_flags & BRISK_PRE_RAW_UTF8);
        snprintf(v->pre_name, sizeof v->pre_name, "%s", brisk_pretok_name(def));
        st = brisk_pretok_compile(&v->pre, def, err);
        if (st != BRISK_OK) goto fail;
    } else if (brisk_str_eq(model, "test")) {
        /* llama.cpp's test-llama-archs fixtures: no special tokens, no BOS */
        v->type = BRISK_VOCAB_TEST;
        snprintf(v->pre_name, sizeof v->pre_name, "test");
    } else if (brisk_str_eq(model, "none") || brisk_str_eq(model, "no_vocab")) {
        v->type = BRISK_VOCAB_NONE;
        snprintf(v->pre_name, sizeof v->pre_name, "none");
    } else {
        st = brisk_fail(err, BRISK_ERR_UNSUPPORTED, "tokenizer.ggml.model: unsupported tokenizer '%.*s'",
                        (int)BRISK_MIN(model.len, 64), model.ptr);
        goto fail;
    }
    st = read_bool(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err);
    if (st != BRISK_OK) goto fail;

    st = v->type == BRISK_VOCAB_NONE && !brisk_gguf_find(g, "tokenizer.ggml.tokens") ? dummy_tokens(v, g, err) : load_tokens(v, g, err);
    if (st != BRISK_OK) goto fail;
    if (v->type == BRISK_VOCAB_BPE) {
        st = load_merges(v, g, err);
        if (st != BRISK_OK) goto fail;
    }

    /* special ids: defaults out of range are disabled; metadata overrides */
    {
        struct {
            const char *key;
            int32_t *id;
        } keys[] = {
            {"tokenizer.ggml.bos_token_id", &v->bos},        {"tokenizer.ggml.eos_token_id", &v->eos},
            {"tokenizer.ggml.eot_token_id", &v->eot},        {"tokenizer.ggml.eom_token_id", &v->eom},
            {"tokenizer.ggml.unknown_token_id", &v->unk},    {"tokenizer.ggml.seperator_token_id", &v->sep},
            {"tokenizer.ggml.padding_token_id", &v->pad},    {"tokenizer.ggml.mask_token_id", &v->mask},
            {"tokenizer.ggml.fim_pre_token_id", &v->fim_pre}, {"tokenizer.ggml.fim_suf_token_id", &v->fim_suf},
            {"tokenizer.ggml.fim_mid_token_id", &v->fim_mid}, {"tokenizer.ggml.fim_pad_token_id", &v->fim_pad},
            {"tokenizer.ggml.fim_rep_token_id", &v->fim_rep}, {"tokenizer.ggml.fim_sep_token_id", &v->fim_sep},
            {"tokenizer.ggml.prefix_token_id", &v->fim_pre},  {"tokenizer.ggml.suffix_token_id", &v->fim_suf},
            {"tokenizer.ggml.middle_token_id", &v->fim_mid},
        };
        for (size_t i = 0; i < BRISK_ARRAY_LEN(keys); i++) {
            if (*keys[i].id >= v->n_tokens) *keys[i].id = -1;
            st = read_special_id(g, keys[i].key, v->n_tokens, keys[i].id, err);
            if (st != BRISK_OK) goto fail;
        }
    }
    if ((st = read_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos, err)) != BRISK_OK) goto fail;
    if ((st = read_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos, err)) != BRISK_OK) goto fail;
    if ((st = read_bool(g, "tokenizer.ggml.add_sep_token", &v->add_sep, err)) != BRISK_OK) goto fail;
    if (v->pre_flags & BRISK_PRE_FORCE_BOS) v->add_bos = true;
    v->wpm_lowercase = true;
    if ((st = read_bool(g, "tokenizer.ggml.normalizer.lowercase", &v->wpm_lowercase, err)) != BRISK_OK) goto fail;
    v->wpm_strip_accents = v->wpm_lowercase;
    if ((st = read_bool(g, "tokenizer.ggml.normalizer.strip_accents", &v->wpm_strip_accents, err)) != BRISK_OK) goto fail;

    /* recognise end-of-turn / FIM tokens by their text */
    detect_by_text(v, &v->eot, eot_texts);
    detect_by_text(v, &v->eom, eom_texts);
    detect_by_text(v, &v->fim_pre, fim_pre_texts);
    detect_by_text(v, &v->fim_suf, fim_suf_texts);
    detect_by_text(v, &v->fim_mid, fim_mid_texts);
    detect_by_text(v, &v->fim_pad, fim_pad_texts);
    detect_by_text(v, &v->fim_rep, fim_rep_texts);
    detect_by_text(v, &v->fim_sep, fim_sep_texts);
    for (int32_t id = 0; id < v->n_tokens; id++) {   /* control tokens named "unused" */
        if ((v->attr[id] & BRISK_TOKEN_CONTROL) &&
            memmem(brisk_strtab_text(&v->strs, id), brisk_strtab_len(&v->strs, id), "unused", 6))
            v->attr[id] |= BRISK_TOKEN_UNUSED;
    }
    set_eog(v);

    /* byte fallback: <0xXX>, else the byte itself as a one-character token */
    for (int b = 0; b < 256; b++) {
        char hx[8];
        snprintf(hx, sizeof hx, "<0x%02X>", b);
        int32_t id = find_token(v, hx);
        if (id < 0 && v->type == BRISK_VOCAB_SPM) {
            char c = (char)b;
            id = brisk_strtab_find(&v->strs, &c, 1);
            if (id >= v->n_tokens) id = -1;
        }
        v->byte_tok[b] = id;
    }

    /* SPM barrier bytes: ASCII bytes that no multi-byte token contains */
    if (v->type == BRISK_VOCAB_SPM) {
        memset(v->spm_barrier, 1, 128);
        for (int32_t id = 0; id < v->n_tokens; id++) {
            size_t tl = brisk_strtab_len(&v->strs, id);
            const uint8_t *t = (const uint8_t *)brisk_strtab_text(&v->strs, id);
            if (tl >= 2)
                for (size_t j = 0; j < tl; j++)
                    if (t[j] < 0x80) v->spm_barrier[t[j]] = 0;
        }
    }

    st = build_special(v, err);
    if (st == BRISK_OK) st = build_pieces(v, err);
    if (st != BRISK_OK) goto fail;
    attr_fixes(v, g);
    if (v->type == BRISK_VOCAB_WPM) {
        st = brisk_wpm_init(v, err);
        if (st != BRISK_OK) goto fail;
    }
    *out = v;
    return BRISK_OK;
fail:
    brisk_vocab_free(v);
    return st;
}

/* ---- getters ---------------------------------------------------------------------------------------------- */

int32_t brisk_vocab_size(const brisk_vocab *v) { return v->n_tokens; }
brisk_vocab_type brisk_vocab_get_type(const brisk_vocab *v) { return v->type; }
const char *brisk_vocab_type_name(const brisk_vocab *v) {
    switch (v->type) {
    case BRISK_VOCAB_SPM: return "SPM";
    case BRISK_VOCAB_BPE: return "BPE";
    case BRISK_VOCAB_WPM: return "WPM";
    case BRISK_VOCAB_TEST: return "TEST";
    case BRISK_VOCAB_NONE: return "NONE";
    }
    return "?";
}
const char *brisk_vocab_pre_name(const brisk_vocab *v) { return v->pre_name; }
int32_t brisk_vocab_bos(const brisk_vocab *v) { return v->bos; }
int32_t brisk_vocab_eos(const brisk_vocab *v) { return v->eos; }
int32_t brisk_vocab_eot(const brisk_vocab *v) { return v->eot; }
int32_t brisk_vocab_unk(const brisk_vocab *v) { return v->unk; }
int32_t brisk_vocab_pad(const brisk_vocab *v) { return v->pad; }
int32_t brisk_vocab_sep(const brisk_vocab *v) { return v->sep; }
bool brisk_vocab_add_bos(const brisk_vocab *v) { return v->add_bos; }
bool brisk_vocab_add_eos(const brisk_vocab *v) { return v->add_eos; }
bool brisk_vocab_is_eog(const brisk_vocab *v, int32_t id) { return id >= 0 && id < v->n_tokens && v->eog[id]; }
bool brisk_vocab_is_control(const brisk_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens && (v->attr[id] & BRISK_TOKEN_CONTROL);
}
uint32_t brisk_vocab_token_attr(const brisk_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens ? v->attr[id] : 0;
}
const char *brisk_vocab_token_text(const brisk_vocab *v, int32_t id, size_t *len) {
    if (id < 0 || id >= v->n_tokens) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = brisk_strtab_len(&v->strs, id);
    return brisk_strtab_text(&v->strs, id);
}
size_t brisk_vocab_max_piece_len(const brisk_vocab *v) { return v->max_piece_len; }

brisk_status brisk_token_to_piece_special(const brisk_vocab *v, int32_t id, bool special, char *buf, size_t cap,
                                          size_t *len, brisk_error *err) {
    *len = 0;
    if (id < 0 || id >= v->n_tokens)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "token id %d out of range [0, %d)", id, v->n_tokens);
    if (!special && (v->attr[id] & (BRISK_TOKEN_UNKNOWN | BRISK_TOKEN_CONTROL))) return BRISK_OK;
    size_t n = v->piece_len[id];
    *len = n;
    if (n > cap) return brisk_fail(err, BRISK_ERR_CAPACITY, "token %d: piece of %zu bytes exceeds buffer of %zu", id, n, cap);
    if (n) memcpy(buf, v->piece_pool + v->piece_off[id], n);
    return BRISK_OK;
}

brisk_status brisk_token_to_piece(const brisk_vocab *v, int32_t id, char *buf, size_t cap, size_t *len, brisk_error *err) {
    return brisk_token_to_piece_special(v, id, false, buf, cap, len, err);
}
