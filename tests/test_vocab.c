/* test_vocab: tokenizer parity with llama.cpp.
 *
 *  - every case of every .inp/.out pair in ../shared/vocab (test-tokenizer-0
 *    format: add_special and parse_special off), and the committed copies in
 *    tests/data/vocab (llama-spm; baichuan and gpt-neox with ids recorded from
 *    llama-tokenize; the bundled pycode model with Python snippets);
 *  - detokenizing reproduces the input where the tokenizer is lossless;
 *  - special-token handling (add_special / parse_special) against recorded ids;
 *  - the streaming detokenizer never emits half a character;
 *  - malformed vocabularies are rejected with a message naming the key. */
#include "test.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>

#define SEP "\n__ggml_vocab_test__\n"

typedef struct cases {
    char **text;
    size_t *len;
    int32_t **ids;
    size_t *n_ids;
    size_t n;
    uint8_t *inp_buf, *out_buf;
} cases;

static void cases_free(cases *c) {
    for (size_t i = 0; i < c->n; i++) free(c->ids[i]);
    free(c->text);
    free(c->len);
    free(c->ids);
    free(c->n_ids);
    free(c->inp_buf);
    free(c->out_buf);
    memset(c, 0, sizeof *c);
}

static void cases_add(cases *c, char *text, size_t len) {
    c->text = realloc(c->text, (c->n + 1) * sizeof *c->text);
    c->len = realloc(c->len, (c->n + 1) * sizeof *c->len);
    c->ids = realloc(c->ids, (c->n + 1) * sizeof *c->ids);
    c->n_ids = realloc(c->n_ids, (c->n + 1) * sizeof *c->n_ids);
    c->text[c->n] = text;
    c->len[c->n] = len;
    c->ids[c->n] = NULL;
    c->n_ids[c->n] = 0;
    c->n++;
}

/* test-tokenizer-0's reader: cases split on SEP (nothing after a final SEP);
 * one .out line per case, ids separated by spaces. */
static int cases_read(const char *inp, const char *out, cases *c) {
    memset(c, 0, sizeof *c);
    size_t ni, no;
    brisk_error err;
    if (brisk_file_read(inp, &c->inp_buf, &ni, &err) != BRISK_OK) return -1;
    if (brisk_file_read(out, &c->out_buf, &no, &err) != BRISK_OK) return -1;
    char *s = (char *)c->inp_buf, *end = s + ni;
    size_t sl = strlen(SEP);
    while (s < end) {
        char *m = memmem(s, (size_t)(end - s), SEP, sl);
        if (!m) {
            cases_add(c, s, (size_t)(end - s));
            break;
        }
        cases_add(c, s, (size_t)(m - s));
        s = m + sl;
    }
    char *line = (char *)c->out_buf, *oend = line + no;
    size_t k = 0;
    while (line < oend) {
        char *nl = memchr(line, '\n', (size_t)(oend - line));
        if (!nl) nl = oend;
        if (k >= c->n) return -1;
        int32_t *ids = NULL;
        size_t n = 0;
        for (char *p = line; p < nl;) {
            while (p < nl && *p == ' ') p++;
            if (p >= nl) break;
            ids = realloc(ids, (n + 1) * sizeof *ids);
            ids[n++] = (int32_t)strtol(p, &p, 10);
        }
        c->ids[k] = ids;
        c->n_ids[k] = n;
        k++;
        line = nl + 1;
    }
    return k == c->n ? 0 : -1;
}

static brisk_vocab *load_vocab(const char *path) {
    brisk_gguf *g = NULL;
    brisk_vocab *v = NULL;
    brisk_error err = {0};
    if (brisk_gguf_open(path, &g, &err) != BRISK_OK) {
        fprintf(stderr, "open %s: %s\n", path, err.msg);
        return NULL;
    }
    if (brisk_vocab_load(g, &v, &err) != BRISK_OK) fprintf(stderr, "load %s: %s\n", path, err.msg);
    brisk_gguf_close(g);
    return v;
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

static bool valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = (uint8_t)s[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if (((uint8_t)s[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

static bool contains(const char *s, size_t n, const char *needle) { return memmem(s, n, needle, strlen(needle)) != NULL; }

/* Stream ids through the detokenizer one at a time; the output must be valid
 * UTF-8 after every push and, for valid input, equal the one-shot result. */
static void check_stream(const brisk_vocab *v, const int32_t *ids, size_t n, const char *expect, size_t expect_len,
                         const char *label) {
    brisk_detok *d = NULL;
    brisk_error err = {0};
    CHECK(brisk_detok_init(&d, v, &err) == BRISK_OK);
    size_t cap = brisk_detok_push_cap(d);
    char *buf = malloc(cap), *all = malloc(expect_len * 3 + 16);
    size_t total = 0;
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        if (brisk_detok_push(d, ids[i], buf, cap, &len, &err) != BRISK_OK) {
            ok = false;
            break;
        }
        if (!valid_utf8(buf, len)) ok = false;
        if (total + len <= expect_len * 3 + 8) memcpy(all + total, buf, len);
        total += len;
    }
    total += brisk_detok_flush(d, all + total, 8);
    CHECKF(ok, "%s: streaming output not valid UTF-8 per push", label);
    if (valid_utf8(expect, expect_len))
        CHECKF(total == expect_len && memcmp(all, expect, total) == 0, "%s: streamed text differs from one-shot", label);
    free(buf);
    free(all);
    brisk_detok_free(d);
}

/* Returns the number of failing cases. */
static int run_cases(const char *vocab_path, const char *inp, const char *out, const char *label) {
    cases c;
    if (cases_read(inp, out, &c) != 0) {
        CHECKF(0, "%s: cannot read %s / %s", label, inp, out);
        cases_free(&c);
        return 1;
    }
    brisk_vocab *v = load_vocab(vocab_path);
    CHECKF(v != NULL, "%s: vocabulary did not load", label);
    if (!v) {
        cases_free(&c);
        return 1;
    }
    int failed = 0, rt_checked = 0, rt_failed = 0;
    for (size_t i = 0; i < c.n; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        brisk_error err = {0};
        brisk_tokenize_opts opts = {.add_special = false, .parse_special = false};
        brisk_status st = brisk_tokenize(v, c.text[i], c.len[i], opts, &ids, &n, &err);
        bool same = st == BRISK_OK && n == c.n_ids[i] && (n == 0 || memcmp(ids, c.ids[i], n * sizeof *ids) == 0);
        if (!same) {
            failed++;
            fprintf(stderr, "%s case %zu '%.*s': %s\n", label, i, (int)c.len[i], c.text[i], st ? err.msg : "ids differ");
            print_ids("expected", c.ids[i], c.n_ids[i]);
            print_ids("got     ", ids, n);
        }
        /* round trip, where the tokenizer is lossless (see docs/TOKENIZER.md):
         * not WordPiece (lowercases, drops spaces), not text holding U+2581 for
         * the vocabularies that use it as the space, not invalid UTF-8 for
         * byte-level BPE (it becomes U+FFFD) */
        bool lossless = brisk_vocab_get_type(v) != BRISK_VOCAB_WPM && valid_utf8(c.text[i], c.len[i]) &&
                        !contains(c.text[i], c.len[i], "\xE2\x96\x81");
        if (same && lossless) {
            char *txt = NULL;
            size_t tl = 0;
            brisk_detokenize_opts dopts = {.special = false, .strip_leading = true, .clean_spaces = false};
            CHECK(brisk_detokenize(v, ids, n, dopts, &txt, &tl, &err) == BRISK_OK);
            rt_checked++;
            if (!(tl == c.len[i] && memcmp(txt, c.text[i], tl) == 0)) {
                rt_failed++;
                fprintf(stderr, "%s case %zu: detokenized '%.*s' != input '%.*s'\n", label, i, (int)tl, txt,
                        (int)c.len[i], c.text[i]);
            }
            /* the stream never strips the dummy-prefix space: compare with that */
            brisk_detokenize_opts sopts = {.special = false, .strip_leading = false, .clean_spaces = false};
            char *st_txt = NULL;
            size_t st_len = 0;
            CHECK(brisk_detokenize(v, ids, n, sopts, &st_txt, &st_len, &err) == BRISK_OK);
            check_stream(v, ids, n, st_txt, st_len, label);
            free(st_txt);
            free(txt);
        }
        free(ids);
    }
    CHECKF(failed == 0, "%s: %d of %zu cases differ from the reference", label, failed, c.n);
    CHECKF(rt_failed == 0, "%s: %d of %d round trips differ", label, rt_failed, rt_checked);
    printf("%-40s %3zu/%3zu cases match, %d/%d round trips exact\n", label, c.n - (size_t)failed, c.n,
           rt_checked - rt_failed, rt_checked);
    brisk_vocab_free(v);
    cases_free(&c);
    return failed;
}

static void test_vocab_dir(const char *dir, const char *const *names, size_t n_names, const char *case_dir) {
    char vp[1200], ip[1200], op[1200];
    for (size_t i = 0; i < n_names; i++) {
        snprintf(vp, sizeof vp, "%s/ggml-vocab-%s.gguf", dir, names[i]);
        snprintf(ip, sizeof ip, "%s/ggml-vocab-%s.gguf.inp", case_dir, names[i]);
        snprintf(op, sizeof op, "%s/ggml-vocab-%s.gguf.out", case_dir, names[i]);
        run_cases(vp, ip, op, names[i]);
    }
}

/* special.tsv, bytes.tsv: vocab, add_special, parse_special, text as hex, ids */
static void test_tsv(const char *label, const char *vocab_dir, const char *tsv) {
    uint8_t *buf = NULL;
    size_t n = 0;
    brisk_error err;
    if (brisk_file_read(tsv, &buf, &n, &err) != BRISK_OK) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    int total = 0, bad = 0;
    char *save = NULL, cur_path[1200] = "";
    brisk_vocab *v = NULL;
    for (char *line = strtok_r((char *)buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        char *f[5] = {0};
        char *s2 = NULL;
        int k = 0;
        for (char *t = strtok_r(line, "\t", &s2); t && k < 5; t = strtok_r(NULL, "\t", &s2)) f[k++] = t;
        if (k < 4) continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", vocab_dir, f[0]);
        if (strcmp(path, cur_path) != 0) {
            brisk_vocab_free(v);
            v = load_vocab(path);
            snprintf(cur_path, sizeof cur_path, "%s", path);
        }
        CHECKF(v != NULL, "%s: %s did not load", label, path);
        if (!v) continue;
        size_t hl = strlen(f[3]), tl = hl / 2;
        char *text = malloc(tl + 1);
        for (size_t i = 0; i < tl; i++) {
            unsigned x;
            sscanf(f[3] + 2 * i, "%2x", &x);
            text[i] = (char)x;
        }
        int32_t expect[256];
        size_t ne = 0;
        for (char *p = f[4]; p && *p && ne < 256;) {
            expect[ne++] = (int32_t)strtol(p, &p, 10);
            while (*p == ' ') p++;
        }
        brisk_tokenize_opts opts = {.add_special = f[1][0] == '1', .parse_special = f[2][0] == '1'};
        int32_t *ids = NULL;
        size_t nids = 0;
        CHECK(brisk_tokenize(v, text, tl, opts, &ids, &nids, &err) == BRISK_OK);
        bool same = nids == ne && (ne == 0 || memcmp(ids, expect, ne * sizeof *ids) == 0);
        total++;
        if (!same) {
            bad++;
            fprintf(stderr, "%s %s add=%s parse=%s '%s'\n", label, f[0], f[1], f[2], f[3]);
            print_ids("expected", expect, ne);
            print_ids("got     ", ids, nids);
        }
        free(ids);
        free(text);
    }
    brisk_vocab_free(v);
    CHECKF(bad == 0, "%s: %d of %d cases differ", label, bad, total);
    printf("%-40s %3d/%3d cases match\n", label, total - bad, total);
    free(buf);
}

/* Byte-fallback pieces split a character across tokens: the stream must hold
 * the bytes back until the character is complete. */
static void test_stream_bytes(const char *vocab_path) {
    brisk_vocab *v = load_vocab(vocab_path);
    if (!v) return;
    brisk_error err;
    /* U+1F999 (llama) has no token in llama-spm: four <0xXX> byte tokens */
    const char *text = "a\xF0\x9F\xA6\x99z";
    int32_t *ids = NULL;
    size_t n = 0;
    brisk_tokenize_opts opts = {0};
    CHECK(brisk_tokenize(v, text, strlen(text), opts, &ids, &n, &err) == BRISK_OK);
    brisk_detok *d;
    CHECK(brisk_detok_init(&d, v, &err) == BRISK_OK);
    char out[256];
    size_t len, emitted = 0;
    char all[64];
    for (size_t i = 0; i < n; i++) {
        CHECK(brisk_detok_push(d, ids[i], out, sizeof out, &len, &err) == BRISK_OK);
        CHECK(valid_utf8(out, len));
        memcpy(all + emitted, out, len);
        emitted += len;
    }
    CHECK(brisk_detok_flush(d, out, sizeof out) == 0);
    CHECK(emitted == strlen(text) + 1 && memcmp(all, " a", 2) == 0 && memcmp(all + 1, text, strlen(text)) == 0);

    /* a cut character at the end becomes U+FFFD on flush; a stray byte at once */
    int32_t b_f0 = -1, b_9f = -1, b_80 = -1;
    for (int32_t id = 0; id < brisk_vocab_size(v); id++) {
        size_t tl;
        const char *t = brisk_vocab_token_text(v, id, &tl);
        if (tl == 6 && !memcmp(t, "<0xF0>", 6)) b_f0 = id;
        if (tl == 6 && !memcmp(t, "<0x9F>", 6)) b_9f = id;
        if (tl == 6 && !memcmp(t, "<0x80>", 6)) b_80 = id;
    }
    CHECK(b_f0 >= 0 && b_9f >= 0 && b_80 >= 0);
    brisk_detok_reset(d);
    CHECK(brisk_detok_push(d, b_f0, out, sizeof out, &len, &err) == BRISK_OK && len == 0);
    CHECK(brisk_detok_push(d, b_9f, out, sizeof out, &len, &err) == BRISK_OK && len == 0);
    CHECK(brisk_detok_flush(d, out, sizeof out) == 3 && !memcmp(out, "\xEF\xBF\xBD", 3));
    CHECK(brisk_detok_push(d, b_80, out, sizeof out, &len, &err) == BRISK_OK && len == 3 &&
          !memcmp(out, "\xEF\xBF\xBD", 3));
    CHECK(brisk_detok_push(d, b_f0, out, sizeof out, &len, &err) == BRISK_OK && len == 0);
    CHECK(brisk_detok_push(d, ids[0], out, sizeof out, &len, &err) == BRISK_OK);   /* " a" cuts the F0 */
    CHECK(len >= 4 && !memcmp(out, "\xEF\xBF\xBD", 3) && valid_utf8(out, len));
    /* errors */
    CHECK(brisk_detok_push(d, -1, out, sizeof out, &len, &err) == BRISK_ERR_INVALID_ARG);
    CHECK(brisk_detok_push(d, brisk_vocab_size(v), out, sizeof out, &len, &err) == BRISK_ERR_INVALID_ARG);
    CHECK(brisk_detok_push(d, ids[0], out, 0, &len, &err) == BRISK_ERR_CAPACITY && len > 0);
    CHECK(brisk_detok_push_cap(d) <= 256);
    char piece[8];
    CHECK(brisk_token_to_piece(v, -5, piece, sizeof piece, &len, &err) == BRISK_ERR_INVALID_ARG);
    CHECK(brisk_token_to_piece(v, brisk_vocab_bos(v), piece, sizeof piece, &len, &err) == BRISK_OK && len == 0);
    CHECK(brisk_token_to_piece_special(v, brisk_vocab_bos(v), true, piece, sizeof piece, &len, &err) == BRISK_OK &&
          len == 3 && !memcmp(piece, "<s>", 3));
    CHECK(brisk_vocab_bos(v) == 1 && brisk_vocab_eos(v) == 2 && brisk_vocab_add_bos(v) && !brisk_vocab_add_eos(v));
    CHECK(brisk_vocab_is_eog(v, 2) && !brisk_vocab_is_eog(v, 1) && !brisk_vocab_is_eog(v, -1));
    brisk_detok_free(d);
    free(ids);
    brisk_vocab_free(v);
}

/* Hand-made vocabularies: each rejection names the key. */
static brisk_status load_mem(brisk_gguf_writer *w, char *msg, size_t msg_len) {
    uint8_t *buf = NULL;
    size_t len = 0;
    brisk_error err = {0};
    brisk_gguf *g = NULL;
    brisk_vocab *v = NULL;
    brisk_status st = brisk_gguf_writer_write_mem(w, &buf, &len, &err);
    if (st == BRISK_OK) st = brisk_gguf_parse(buf, len, &g, &err);
    if (st == BRISK_OK) st = brisk_vocab_load(g, &v, &err);
    snprintf(msg, msg_len, "%s", st == BRISK_OK ? "" : err.msg);
    brisk_vocab_free(v);
    brisk_gguf_close(g);
    free(buf);
    brisk_gguf_writer_free(w);
    return st;
}

static void test_bad_vocabs(void) {
    static const char *const toks[] = {"a", "b", "ab", "<s>", "</s>"};
    char msg[512];
    brisk_gguf_writer *w;
    brisk_error err;

    CHECK(brisk_gguf_writer_init(&w, 32, &err) == BRISK_OK);
    CHECK(load_mem(w, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "tokenizer.ggml.model"));

    CHECK(brisk_gguf_writer_init(&w, 32, &err) == BRISK_OK);
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "unigram-x");
    brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, toks, 5);
    CHECK(load_mem(w, msg, sizeof msg) == BRISK_ERR_UNSUPPORTED && strstr(msg, "unigram-x"));

    CHECK(brisk_gguf_writer_init(&w, 32, &err) == BRISK_OK);
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    CHECK(load_mem(w, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "tokenizer.ggml.tokens"));

    CHECK(brisk_gguf_writer_init(&w, 32, &err) == BRISK_OK);
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, toks, 5);
    CHECK(load_mem(w, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "tokenizer.ggml.merges"));

    CHECK(brisk_gguf_writer_init(&w, 32, &err) == BRISK_OK);
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.pre", "no-such-pre");
    brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, toks, 5);
    CHECK(load_mem(w, msg, sizeof msg) == BRISK_ERR_UNSUPPORTED && strstr(msg, "no-such-pre"));

    float scores[4] = {0};
    CHECK(brisk_gguf_writer_init(&w, 32, &err) == BRISK_OK);
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, toks, 5);
    brisk_gguf_writer_set_arr(w, "tokenizer.ggml.scores", BRISK_GGUF_FLOAT32, scores, 4);
    CHECK(load_mem(w, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "tokenizer.ggml.scores"));

    int32_t types[5] = {1, 1, 1, 3, 3};
    CHECK(brisk_gguf_writer_init(&w, 32, &err) == BRISK_OK);
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, toks, 5);
    brisk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, types, 4);
    CHECK(load_mem(w, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "tokenizer.ggml.token_type"));

    CHECK(brisk_gguf_writer_init(&w, 32, &err) == BRISK_OK);
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.tokens", 7);
    CHECK(load_mem(w, msg, sizeof msg) == BRISK_ERR_FORMAT && strstr(msg, "tokenizer.ggml.tokens"));

    /* a minimal SPM vocab without byte tokens: unknown characters become <unk>
     * (llama.cpp would throw), out-of-range special ids keep the default */
    static const char *const toks2[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", ("\xE2\x96\x81" "a")};
    CHECK(brisk_gguf_writer_init(&w, 32, &err) == BRISK_OK);
    brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_STRING, toks2, 7);
    brisk_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 99);
    uint8_t *buf = NULL;
    size_t len = 0;
    brisk_gguf *g = NULL;
    brisk_vocab *v = NULL;
    CHECK(brisk_gguf_writer_write_mem(w, &buf, &len, &err) == BRISK_OK);
    brisk_gguf_writer_free(w);
    CHECK(brisk_gguf_parse(buf, len, &g, &err) == BRISK_OK);
    CHECK(brisk_vocab_load(g, &v, &err) == BRISK_OK);
    brisk_gguf_close(g);
    free(buf);
    if (v) {
        CHECK(brisk_vocab_bos(v) == 1);
        int32_t *ids = NULL;
        size_t n = 0;
        brisk_tokenize_opts o = {.add_special = true};
        CHECK(brisk_tokenize(v, "ab\xC3", 3, o, &ids, &n, &err) == BRISK_OK);
        CHECK(n == 4 && ids[0] == 1 && ids[1] == 6 && ids[2] == 5 && ids[3] == 0);
        free(ids);
        brisk_vocab_free(v);
    }
}

int main(void) {
    char dir[512], p1[1024], p2[1024], p3[1024];
    test_source("tests/data/vocab", dir, sizeof dir);

    /* committed essentials */
    snprintf(p1, sizeof p1, "%s/ggml-vocab-llama-spm.gguf", dir);
    snprintf(p2, sizeof p2, "%s/ggml-vocab-llama-spm.gguf.inp", dir);
    snprintf(p3, sizeof p3, "%s/ggml-vocab-llama-spm.gguf.out", dir);
    run_cases(p1, p2, p3, "llama-spm (tests/data)");
    test_source("models/pycode-target-f16.gguf", p1, sizeof p1);
    snprintf(p2, sizeof p2, "%s/pycode.inp", dir);
    snprintf(p3, sizeof p3, "%s/pycode.out", dir);
    if (test_exists(p1)) run_cases(p1, p2, p3, "pycode (models/)");
    else printf("SKIP pycode: %s absent\n", p1);
    snprintf(p1, sizeof p1, "%s/ggml-vocab-llama-spm.gguf", dir);
    test_stream_bytes(p1);
    test_bad_vocabs();

    /* the shared fixtures */
    char shared[512];
    test_shared("vocab", shared, sizeof shared);
    if (!test_exists(shared)) {
        printf("SKIP shared vocabularies: %s absent\n", shared);
    } else {
        static const char *const with_cases[] = {
            "llama-spm", "phi-3", "bert-bge", "gpt-2", "llama-bpe", "qwen2", "qwen35", "deepseek-coder",
            "deepseek-llm", "falcon", "mpt", "starcoder", "refact", "gemma-4",
        };
        test_vocab_dir(shared, with_cases, BRISK_ARRAY_LEN(with_cases), shared);
        static const char *const recorded[] = {"baichuan", "gpt-neox"};
        test_vocab_dir(shared, recorded, BRISK_ARRAY_LEN(recorded), dir);
        snprintf(p1, sizeof p1, "%s/special.tsv", dir);
        test_tsv("special tokens (add/parse_special)", shared, p1);
        snprintf(p1, sizeof p1, "%s/bytes.tsv", dir);
        test_tsv("bad UTF-8, NUL, spaces, Unicode 15", shared, p1);
    }
    return test_finish();
}
