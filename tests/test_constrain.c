/* test_constrain: constrained decoding against independent truth.
 *  - regular expressions against PCRE2 (search semantics, as JSON Schema's `pattern`), on a table of
 *    patterns and every string up to length 4 over a small alphabet;
 *  - JSON Schema against MaskBench's labelled instances (tests/data/constrain/maskbench-sample.jsonl):
 *    no invalid instance is ever accepted, and most valid ones are;
 *  - token masks against the brute-force definition (token t allowed iff its bytes keep the parse
 *    alive; an end token iff the output is complete) on the bundled model's vocabulary, all tokens,
 *    at every step of real instances;
 *  - GBNF: llama.cpp's example grammars all compile; hand-made accept/reject tables;
 *  - errors name the unsupported keyword and its JSON pointer; hostile inputs fail cleanly. */
#include "constrain/constrain.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "test.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>

brisk_status cst_vocab_from_tokenizer(const brisk_vocab *v, cst_vocab **out, brisk_error *err);

/* a vocabulary of the 256 single bytes (token i = byte i) and an end token 256 */
static cst_vocab *byte_vocab(void) {
    static uint8_t pieces[256];
    static uint32_t off[258];
    for (int i = 0; i < 256; i++) { pieces[i] = (uint8_t)i; off[i] = (uint32_t)i; }
    off[256] = 256;
    off[257] = 256;
    const int32_t eos = 256;
    cst_vocab *v = NULL;
    brisk_error err = {0};
    if (cst_vocab_new(257, pieces, off, &eos, 1, &v, &err)) return NULL;
    return v;
}

static cst_grammar *compile_kind(const cst_vocab *v, const char *kind, const char *src, size_t len, brisk_error *err) {
    cst_nfa *n = cst_nfa_new();
    brisk_status st;
    if (!strcmp(kind, "gbnf")) st = cst_gbnf_compile(n, src, len, err);
    else if (!strcmp(kind, "regex")) st = cst_regex_compile(n, src, len, err);
    else {
        cst_schema_opts o = {.max_ws = CST_DEFAULT_MAX_WS};
        st = cst_schema_compile(n, src, len, &o, err);
    }
    cst_grammar *g = NULL;
    if (st == BRISK_OK) st = cst_grammar_new(n, v, &g, err);
    cst_nfa_free(n);
    return st == BRISK_OK ? g : NULL;
}

static bool matches(cst_grammar *g, const char *s) {
    return cst_accepting(g, cst_advance_bytes(g, cst_start(g), (const uint8_t *)s, strlen(s)));
}

/* ---- regex vs PCRE2 ---------------------------------------------------------------------------- */

static int pcre_search(pcre2_code *re, const char *s, size_t n) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    const int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

static void test_regex_vs_pcre(void) {
    static const char *const patterns[] = {
        "abc", "^abc$", "^a|b$", "^[a-c]+$", "^a{2,3}$", "^(ab|ba)*$", "^[^a]b?$", "^a.c$", "^\\d+$", "^\\w{1,2}\\s?$",
        "b+", "^(?:a|bc){2}$", "^[a-c-]$", "^x?$", "^(a(b(c)?)?)?$", "a{0}b", "^[\\-a]+$", "c$", "^$", "^a+?b*?$",
        "^(?:[ab]{2})+$", "^[a-c]{1,3}b$", "\\.", "^[\\d\\-]{2,}$", "^(?<n>a|b)c$",
    };
    const char alphabet[] = "abc1 -.x";
    const int na = (int)strlen(alphabet);
    int compared = 0, mismatches = 0;
    for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
        int errcode;
        PCRE2_SIZE erroff;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)patterns[p], PCRE2_ZERO_TERMINATED, PCRE2_UTF, &errcode, &erroff, NULL);
        CHECKF(re != NULL, "PCRE2 rejects %s", patterns[p]);
        if (!re) continue;
        char s[8];
        for (int len = 0; len <= 4; len++) {
            int total = 1;
            for (int k = 0; k < len; k++) total *= na;
            for (int code = 0; code < total; code++) {
                int c = code;
                for (int k = 0; k < len; k++) { s[k] = alphabet[c % na]; c /= na; }
                s[len] = 0;
                const int want = pcre_search(re, s, (size_t)len);
                const int got = cst_regex_match(patterns[p], strlen(patterns[p]), s, (size_t)len);
                compared++;
                if (got != want) {
                    if (mismatches++ < 10) fprintf(stderr, "regex %s on '%s': brisk %d, PCRE2 %d\n", patterns[p], s, got, want);
                }
            }
        }
        pcre2_code_free(re);
    }
    CHECKF(mismatches == 0, "%d of %d regex verdicts differ from PCRE2", mismatches, compared);
    /* unicode: '.' is one code point, classes of multibyte characters */
    CHECK(cst_regex_match("^.$", 3, "\xc3\xa9", 2) == 1);
    CHECK(cst_regex_match("^.$", 3, "\xe2\x82\xac", 3) == 1);
    CHECK(cst_regex_match("^.$", 3, "ab", 2) == 0);
    CHECK(cst_regex_match("^[\xc3\xa0-\xc3\xbf]+$", strlen("^[\xc3\xa0-\xc3\xbf]+$"), "\xc3\xa9\xc3\xa8", 4) == 1);
    CHECK(cst_regex_match("^[\xc3\xa0-\xc3\xbf]+$", strlen("^[\xc3\xa0-\xc3\xbf]+$"), "\xc3\xa9z", 3) == 0);
    CHECK(cst_regex_match("^\\u00e9$", 8, "\xc3\xa9", 2) == 1);
    /* what is not supported is refused, not guessed */
    CHECK(cst_regex_match("(?=a)a", 6, "a", 1) == -1);
    CHECK(cst_regex_match("(a)\\1", 5, "aa", 2) == -1);
    CHECK(cst_regex_match("a\\b", 3, "a", 1) == -1);
    CHECK(cst_regex_match("a^b", 3, "a", 1) == -1);
    CHECK(cst_regex_match("(", 1, "", 0) == -1);
    CHECK(cst_regex_match("[b-a]", 5, "", 0) == -1);
    CHECK(cst_regex_match("a{3,1}", 6, "", 0) == -1);
}

/* ---- JSON Schema vs MaskBench's labels ---------------------------------------------------------- */

static void test_schema_maskbench(const cst_vocab *bv) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/constrain/maskbench-sample.jsonl", BRISK_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    CHECKF(f != NULL, "%s", path);
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    int schemas = 0, compiled = 0, valid = 0, valid_ok = 0, invalid = 0, invalid_accepted = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t je;
        json_t *item = json_loads(line, JSON_ALLOW_NUL, &je);
        CHECKF(item != NULL, "line %d: %s", schemas + 1, je.text);
        if (!item) continue;
        schemas++;
        cst_nfa *n = cst_nfa_new();
        brisk_error err = {0};
        cst_schema_opts o = {.max_ws = CST_DEFAULT_MAX_WS};
        cst_grammar *g = NULL;
        if (cst_schema_compile_json(n, json_object_get(item, "schema"), &o, &err) == BRISK_OK &&
            cst_grammar_new(n, bv, &g, &err) == BRISK_OK) {
            compiled++;
            json_t *tests = json_object_get(item, "tests");
            for (size_t i = 0; i < json_array_size(tests); i++) {
                json_t *t = json_array_get(tests, i);
                size_t len = 0;
                char *text = cst_json_dumps(json_object_get(t, "data"), &len);
                if (!text) continue;
                const bool ok = cst_accepting(g, cst_advance_bytes(g, cst_start(g), (const uint8_t *)text, len));
                if (json_is_true(json_object_get(t, "valid"))) {
                    valid++;
                    valid_ok += ok;
                } else {
                    invalid++;
                    if (ok) {
                        invalid_accepted++;
                        fprintf(stderr, "schema %lld accepts the invalid %s\n",
                                (long long)json_integer_value(json_object_get(item, "index")), text);
                    }
                }
                free(text);
            }
        } else {
            /* a compile error must say what was not supported */
            CHECKF(err.msg[0] != 0, "schema %lld: an error without a message", (long long)json_integer_value(json_object_get(item, "index")));
        }
        cst_grammar_free(g);
        cst_nfa_free(n);
        json_decref(item);
    }
    free(line);
    fclose(f);
    printf("maskbench sample: %d schemas, %d compiled; valid accepted %d of %d; invalid accepted %d of %d\n", schemas,
           compiled, valid_ok, valid, invalid_accepted, invalid);
    CHECK(schemas == 150);
    CHECKF(invalid_accepted == 0, "%d invalid instances accepted", invalid_accepted);
    CHECKF(compiled * 100 >= schemas * 85, "only %d of %d schemas compiled", compiled, schemas);
    CHECKF(valid_ok * 100 >= valid * 90, "only %d of %d valid instances accepted", valid_ok, valid);
}

/* ---- masks vs brute force, on a real vocabulary ------------------------------------------------ */

static int brute_check(cst_grammar *g, const cst_vocab *v, const brisk_vocab *tok, const char *text, int *steps) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    brisk_error err = {0};
    brisk_tokenize_opts to = {0};
    if (brisk_tokenize(tok, text, strlen(text), to, &ids, &n_ids, &err)) return -1;
    const int32_t nv = cst_vocab_n(v);
    uint32_t *mask = calloc(((size_t)nv + 31) / 32, sizeof *mask);
    int bad = 0;
    int32_t s = cst_start(g);
    for (size_t k = 0; k <= n_ids && mask; k++) {
        cst_mask(g, s, mask);
        for (int32_t t = 0; t < nv; t++) {
            const bool got = mask[t >> 5] >> (t & 31) & 1u;
            const bool want = cst_is_eos(g, t) ? cst_accepting(g, s) : cst_advance(g, s, t) != CST_DEAD;
            if (got != want && bad++ < 5) fprintf(stderr, "'%s' step %zu token %d: mask %d, brute force %d\n", text, k, t, got, want);
        }
        (*steps)++;
        if (k < n_ids) {
            s = cst_advance(g, s, ids[k]);
            if (s == CST_DEAD) { bad++; fprintf(stderr, "'%s': token %zu not allowed\n", text, k); break; }
        }
    }
    CHECKF(s == CST_DEAD || cst_accepting(g, s), "'%s' is not complete at its end", text);
    free(mask);
    free(ids);
    return bad;
}

static void test_masks_brute_force(const char *path) {
    brisk_gguf *gg = NULL;
    brisk_vocab *tok = NULL;
    cst_vocab *v = NULL;
    brisk_error err = {0};
    if (brisk_gguf_open(path, &gg, &err) || brisk_vocab_load(gg, &tok, &err) || cst_vocab_from_tokenizer(tok, &v, &err)) {
        printf("SKIP masks vs brute force: %s\n", err.msg);
        brisk_gguf_close(gg);
        brisk_vocab_free(tok);
        return;
    }
    brisk_gguf_close(gg);
    static const struct { const char *kind, *src, *text; } cases[] = {
        {"schema", "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},\"n\":{\"type\":\"integer\",\"minimum\":-3,\"maximum\":250},"
                   "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b c\"]},\"maxItems\":3}},\"required\":[\"name\"]}",
         "{\"name\": \"hi\\\"x\", \"n\": 42, \"tags\": [\"b c\", \"a\"]}"},
        {"schema", "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"number\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
                   "\"required\":[\"v\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}",
         "{\"v\": 1.5e3, \"kids\": [{\"v\": -2, \"kids\": []}, {\"v\": 0}]}"},
        {"schema", "{}", "{\"a\": [1, {\"b\": null}], \"c\": \"\xc3\xa9t\xc3\xa9\\n\"}"},
        {"schema", "{\"type\":\"string\",\"pattern\":\"^[a-z]+-[0-9]{2}$\"}", "\"abc-42\""},
        {"schema", "{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-02-28T10:11:12.5Z\""},
        {"gbnf", "root ::= \"SELECT \" cols \" FROM \" [a-z]+\ncols ::= [a-z]+ (\", \" [a-z]+)*", "SELECT a, bc FROM t"},
        {"regex", "(def|class) [A-Za-z_][A-Za-z_0-9]*\\(\\):", "def foo_1():"},
        /* length counters: the walk's chain shortcut (a subtree accepted whole while the counter lasts) */
        {"schema", "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":20,\"maxLength\":40}},\"required\":[\"s\"]}",
         "{\"s\": \"the quick brown fox jumps over it\"}"},
        {"regex", "[a-z ]{10,60}x[0-9]{30}", "hello world of counters x012345678901234567890123456789"},
        /* multi-byte string bodies: the walk's UTF-8 shortcut (subtrees of whole characters accepted at once),
         * where every character loops back, and where some do not (an excluded character, a length counter) */
        {"schema", "{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"string\"}}}",
         "{\"k\": \"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e caf\xc3\xa9 \xf0\x9f\x99\x82 \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xe2\x80\x94 ok\"}"},
        {"gbnf", "root ::= \"\\\"\" [^\"\xc3\xa9]* \"\\\"\"", "\"abc \xe6\x97\xa5\xe6\x9c\xac \xc3\xb1\""},
        {"schema", "{\"type\":\"string\",\"maxLength\":6}", "\"\xe6\x97\xa5\xe6\x9c\xac\xc3\xa9\xf0\x9f\x99\x82\""},
        /* long counters: mask sharing (states that agree on every string of up to SHORT_LEN bytes share
         * the short tokens' bits), up to and past the point where the bound comes within reach */
        {"schema", "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":5,\"maxLength\":90}},\"required\":[\"s\"]}",
         "{\"s\": \"a long counted string,                 with runs of spaces, \xc3\xa9 and \\n escapes to its end\"}"},
        {"regex", "[a-z ]{0,120}!", "padding                                  so the counter walks far                          along!"},
    };
    int bad = 0, steps = 0;
    int64_t shared = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cst_grammar *g = compile_kind(v, cases[i].kind, cases[i].src, strlen(cases[i].src), &err);
        CHECKF(g != NULL, "case %zu: %s", i, err.msg);
        if (!g) continue;
        bad += brute_check(g, v, tok, cases[i].text, &steps);
        cst_stats st;
        cst_grammar_stats(g, &st);
        shared += st.masks_shared;
        cst_grammar_free(g);
    }
    printf("masks vs brute force (%s): %d steps x %d tokens, %d mismatches, %lld masks shared\n", path, steps, cst_vocab_n(v), bad,
           (long long)shared);
    CHECK(bad == 0);
    CHECKF(shared > 0, "no mask was shared between counter states");
    CHECK(steps > 40);
    cst_vocab_free(v);
    brisk_vocab_free(tok);
}


/* ---- the token budget ----------------------------------------------------------------------------- */

/* cst_min_bytes against a breadth-first search over bytes (the byte vocabulary: every state's
 * successors by all 256 bytes) on small grammars, at the start and along an instance. */
static int32_t bfs_min_bytes(cst_grammar *g, int32_t s0, int32_t cap) {
    int32_t *q = malloc(sizeof(int32_t) * 200000), *dq = malloc(sizeof(int32_t) * 200000);
    int32_t n = 0, head = 0, found = -1;
    uint8_t *seen = calloc(1 << 20, 1);
    q[n] = s0; dq[n++] = 0;
    while (head < n && found < 0) {
        const int32_t s = q[head], d = dq[head++];
        if (cst_accepting(g, s)) { found = d; break; }
        if (d >= cap) continue;
        for (int b = 0; b < 256 && n < 200000; b++) {
            const int32_t t = cst_advance(g, s, b);
            if (t < 0 || t >= (1 << 20) || seen[t]) continue;
            seen[t] = 1;
            q[n] = t; dq[n++] = d + 1;
        }
    }
    free(q); free(dq); free(seen);
    return found;
}

static void test_min_bytes(const cst_vocab *bv) {
    static const struct { const char *kind, *src, *text; } cases[] = {
        {"schema", "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":5},\"n\":{\"type\":\"integer\"}},\"required\":[\"name\",\"n\"]}",
         "{\"name\": \"abcdef\", \"n\": 12}"},
        {"schema", "{\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"},\"minItems\":1}}}},\"$ref\":\"#/$defs/t\"}",
         "{\"k\": [{\"k\": [{}]}]}"},
        {"schema", "{\"type\":\"array\",\"items\":{\"enum\":[\"abc\",\"de\",7]},\"minItems\":3}", "[\"abc\", 7, \"de\"]"},
        {"gbnf", "root ::= \"(\" e \")\"\ne ::= t (\"+\" t)*\nt ::= \"x\" | \"[\" e \"]\"", "([[x+x]+x])"},
        {"gbnf", "root ::= w{3,5} \"!\"\nw ::= [a-z]{2,4} \" \"", "ab cde fghi !"},
        {"regex", "[a-z]{3}(-[0-9]{2,}){2}", "abc-12-345"},
    };
    int checked = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        brisk_error err = {0};
        cst_grammar *g = compile_kind(bv, cases[i].kind, cases[i].src, strlen(cases[i].src), &err);
        CHECKF(g != NULL, "min bytes case %zu: %s", i, err.msg);
        if (!g) continue;
        int32_t s = cst_start(g);
        for (size_t k = 0; s != CST_DEAD; k++) {
            const int32_t want = bfs_min_bytes(g, s, 64);
            CHECKF(want >= 0 && cst_min_bytes(g, s) == want, "min bytes case %zu at %zu: %d, breadth-first %d", i, k,
                   cst_min_bytes(g, s), want);
            checked++;
            if (!cases[i].text[k]) break;
            s = cst_advance(g, s, (uint8_t)cases[i].text[k]);
        }
        CHECKF(s != CST_DEAD && cst_min_bytes(g, s) == 0, "min bytes case %zu: the instance is not complete", i);
        cst_grammar_free(g);
    }
    printf("min bytes vs breadth-first search: %d states\n", checked);
}

/* Generation under a budget with the bundled model's vocabulary: token pickers that never end by
 * themselves (the end token only when nothing else is allowed) or pick uniformly, under a budget
 * just above the shortest instance; every run must end with the end token within the budget, and the
 * text be a complete instance. Far from the limit, masks equal the unbudgeted ones bit for bit. */
static void test_token_budget(const char *path) {
    brisk_model *m = NULL;
    brisk_gguf *gg = NULL;
    brisk_vocab *tok = NULL;
    brisk_error err = {0};
    if (brisk_model_load(path, &m, &err) || brisk_gguf_open(path, &gg, &err) || brisk_vocab_load(gg, &tok, &err)) {
        printf("SKIP token budget: %s\n", err.msg);
        brisk_model_free(m);
        brisk_gguf_close(gg);
        return;
    }
    brisk_gguf_close(gg);
    brisk_model_info info;
    brisk_model_get_info(m, &info);
    const int32_t nv = info.n_vocab;
    uint32_t *mask = malloc(((size_t)nv + 31) / 32 * 4), *mask2 = malloc(((size_t)nv + 31) / 32 * 4);
    int32_t *allowed = malloc((size_t)nv * sizeof *allowed);
    static const char *const schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":12},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
        "\"minItems\":3},\"n\":{\"type\":\"number\"}},\"required\":[\"name\",\"tags\",\"n\"]}",
        "{\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"k\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"}}},"
        "\"required\":[\"v\"]}},\"$ref\":\"#/$defs/t\"}",
        "{}",
    };
    uint64_t rng = 0x243F6A8885A308D3ull;
    char text[8192];
    int runs = 0, ended = 0, same_far = 0, steps_far = 0;
    for (size_t si = 0; si < sizeof schemas / sizeof schemas[0]; si++) {
        brisk_constraint *c = NULL, *plain = NULL;
        if (brisk_constraint_init(&c, m, BRISK_CONSTRAINT_JSON_SCHEMA, schemas[si], strlen(schemas[si]), &err) ||
            brisk_constraint_init(&plain, m, BRISK_CONSTRAINT_JSON_SCHEMA, schemas[si], strlen(schemas[si]), &err)) {
            CHECKF(0, "budget schema %zu: %s", si, err.msg);
            brisk_constraint_free(c);
            continue;
        }
        const int32_t shortest = brisk_constraint_min_bytes(c);
        CHECKF(shortest > 0 && shortest < 200, "budget schema %zu: shortest %d bytes", si, shortest);
        for (int run = 0; run < 24; run++) {
            const bool far = run >= 20;                  /* the last runs: a budget far away, masks compared */
            const int64_t budget = far ? 1000000 : shortest + 1 + run % 4;
            CHECK(brisk_constraint_set_token_budget(c, budget));
            brisk_constraint_reset(c);
            brisk_constraint_reset(plain);
            const brisk_mask mk = brisk_constraint_mask(c), mp = brisk_constraint_mask(plain);
            size_t len = 0;
            bool got_end = false;
            const int max_steps = far ? 60 : (int)budget;
            for (int64_t step = 0; step < max_steps; step++) {
                mk.fill(mk.user, mask, nv);
                if (far) {
                    mp.fill(mp.user, mask2, nv);
                    steps_far++;
                    same_far += !memcmp(mask, mask2, ((size_t)nv + 31) / 32 * 4);
                }
                int32_t n_allowed = 0, end_tok = -1;
                for (int32_t t = 0; t < nv; t++)
                    if (mask[t >> 5] >> (t & 31) & 1u) {
                        if (brisk_token_is_eog(m, t)) end_tok = t;
                        else allowed[n_allowed++] = t;
                    }
                if (n_allowed == 0) {
                    CHECKF(end_tok >= 0, "budget schema %zu run %d: an empty mask at step %lld", si, run, (long long)step);
                    got_end = end_tok >= 0;
                    break;
                }
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                /* half the runs stay in the longest tokens they may take, the others uniformly */
                int32_t pick = allowed[(rng >> 33) % (uint64_t)n_allowed];
                if (run % 2) {
                    for (int tries = 0; tries < 8; tries++) {
                        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                        const int32_t t = allowed[(rng >> 33) % (uint64_t)n_allowed];
                        size_t a = 0, b = 0;
                        char p1[256], p2[256];
                        brisk_token_to_piece(tok, t, p1, sizeof p1, &a, NULL);
                        brisk_token_to_piece(tok, pick, p2, sizeof p2, &b, NULL);
                        if (a > b) pick = t;
                    }
                }
                size_t plen = 0;
                CHECK(brisk_token_to_piece(tok, pick, text + len, sizeof text - len - 1, &plen, NULL) == BRISK_OK);
                len += plen;
                CHECK(brisk_constraint_accept(c, pick));
                if (far) CHECK(brisk_constraint_accept(plain, pick));
            }
            if (far) continue;
            runs++;
            ended += got_end;
            CHECKF(got_end, "budget schema %zu run %d (budget %lld, shortest %d bytes): no end token within the budget", si, run,
                   (long long)budget, shortest);
            CHECKF(brisk_constraint_matches(c, text, len), "budget schema %zu run %d: '%.*s' is not complete", si, run, (int)len, text);
        }
        brisk_constraint_free(c);
        brisk_constraint_free(plain);
    }
    printf("token budget: %d of %d runs ended within budgets of the shortest + 1..4 tokens; far budget: %d of %d masks identical\n",
           ended, runs, same_far, steps_far);
    CHECK(same_far == steps_far && steps_far > 0);
    free(mask); free(mask2); free(allowed);
    brisk_vocab_free(tok);
    brisk_model_free(m);
}

/* Token roles along real instances (the valid ones of the MaskBench sample), each tokenized and fed
 * through a JSON Schema constraint; the per-byte roles go to a file that tests/data/constrain/
 * json_roles.py checks against Python's own JSON scanners. */
static void test_token_roles(const char *path) {
    brisk_model *m = NULL;
    brisk_gguf *gg = NULL;
    brisk_vocab *tok = NULL;
    brisk_error err = {0};
    if (system("python3 -c 1 >/dev/null 2>&1") != 0) {
        printf("SKIP token roles: python3 absent (the reference)\n");
        return;
    }
    if (brisk_model_load(path, &m, &err) || brisk_gguf_open(path, &gg, &err) || brisk_vocab_load(gg, &tok, &err)) {
        printf("SKIP token roles: %s\n", err.msg);
        brisk_model_free(m);
        brisk_gguf_close(gg);
        return;
    }
    brisk_gguf_close(gg);
    char sample[1024], out_path[] = "/tmp/brisk-roles-XXXXXX";
    snprintf(sample, sizeof sample, "%s/tests/data/constrain/maskbench-sample.jsonl", BRISK_SOURCE_DIR);
    FILE *f = fopen(sample, "r");
    const int fd = mkstemp(out_path);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(f && out);
    char *line = NULL;
    size_t cap = 0;
    int instances = 0, schemas = 0, kinds[5] = {0};
    while (f && out && getline(&line, &cap, f) > 0 && schemas < 60) {
        json_t *item = json_loads(line, JSON_ALLOW_NUL, NULL);
        if (!item) continue;
        char *schema = json_dumps(json_object_get(item, "schema"), JSON_COMPACT);
        brisk_constraint *c = NULL;
        if (schema && brisk_constraint_init(&c, m, BRISK_CONSTRAINT_JSON_SCHEMA, schema, strlen(schema), &err) == BRISK_OK) {
            schemas++;
            json_t *tests = json_object_get(item, "tests");
            for (size_t i = 0; i < json_array_size(tests); i++) {
                json_t *t = json_array_get(tests, i);
                if (!json_is_true(json_object_get(t, "valid"))) continue;
                size_t len = 0;
                char *text = cst_json_dumps(json_object_get(t, "data"), &len);
                int32_t *ids = NULL;
                size_t n_ids = 0;
                brisk_tokenize_opts to = {0};
                if (text && brisk_tokenize(tok, text, len, to, &ids, &n_ids, &err) == BRISK_OK) {
                    brisk_constraint_reset(c);
                    char *roles = malloc(len + 1);
                    size_t r = 0;
                    bool ok = roles != NULL;
                    for (size_t k = 0; k < n_ids && ok; k++) {
                        ok = brisk_constraint_accept(c, ids[k]);
                        uint8_t br[256];
                        const size_t nb = brisk_constraint_last_token_roles(c, br, sizeof br);
                        const brisk_token_role tr = brisk_constraint_last_token_role(c);
                        kinds[tr]++;
                        /* the token's role is its first byte that is not punctuation */
                        brisk_token_role want = BRISK_ROLE_PUNCT;
                        for (size_t b = 0; b < nb; b++)
                            if (br[b] != BRISK_ROLE_PUNCT) { want = (brisk_token_role)br[b]; break; }
                        CHECK(tr == want);
                        for (size_t b = 0; b < nb && r < len; b++) roles[r++] = (char)('0' + br[b]);
                    }
                    if (ok && r == len) {
                        for (size_t b = 0; b < len; b++) fprintf(out, "%02x", (uint8_t)text[b]);
                        roles[r] = 0;
                        fprintf(out, " %s\n", roles);
                        instances++;
                    }
                    free(roles);
                }
                free(ids);
                free(text);
            }
        }
        brisk_constraint_free(c);
        free(schema);
        json_decref(item);
    }
    free(line);
    if (f) fclose(f);
    if (out) fclose(out);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 %s/tests/data/constrain/json_roles.py %s", BRISK_SOURCE_DIR, out_path);
    const int rc = system(cmd);
    printf("token roles: %d instances under %d schemas (tokens: %d punctuation, %d key, %d string, %d scalar)\n", instances,
           schemas, kinds[BRISK_ROLE_PUNCT], kinds[BRISK_ROLE_KEY], kinds[BRISK_ROLE_STRING], kinds[BRISK_ROLE_SCALAR]);
    CHECKF(rc == 0, "json_roles.py: exit %d", rc);
    CHECK(instances > 50 && kinds[BRISK_ROLE_KEY] > 0 && kinds[BRISK_ROLE_STRING] > 0 && kinds[BRISK_ROLE_SCALAR] > 0);
    unlink(out_path);
    /* GBNF output is plain text */
    brisk_constraint *c = NULL;
    const char *gb = "root ::= \"{\\\"a\\\": 1}\"";
    if (brisk_constraint_init(&c, m, BRISK_CONSTRAINT_GBNF, gb, strlen(gb), &err) == BRISK_OK) {
        int32_t *ids = NULL;
        size_t n_ids = 0;
        brisk_tokenize_opts to = {0};
        if (brisk_tokenize(tok, "{\"a\": 1}", 8, to, &ids, &n_ids, &err) == BRISK_OK && n_ids > 0) {
            CHECK(brisk_constraint_accept(c, ids[0]));
            CHECK(brisk_constraint_last_token_role(c) == BRISK_ROLE_TEXT);
        }
        free(ids);
    }
    brisk_constraint_free(c);
    brisk_vocab_free(tok);
    brisk_model_free(m);
}

/* ---- GBNF ---------------------------------------------------------------------------------------- */

static void test_gbnf(const cst_vocab *bv) {
    static const char *const files[] = {"arithmetic", "c", "chess", "english", "japanese", "json", "json_arr", "list"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/data/constrain/gbnf/%s.gbnf", BRISK_SOURCE_DIR, files[i]);
        uint8_t *text = NULL;
        size_t len = 0;
        brisk_error err = {0};
        CHECKF(brisk_file_read(path, &text, &len, &err) == BRISK_OK, "%s", err.msg);
        cst_grammar *g = text ? compile_kind(bv, "gbnf", (const char *)text, len, &err) : NULL;
        CHECKF(g != NULL, "%s.gbnf: %s", files[i], err.msg);
        if (g && !strcmp(files[i], "json")) {
            CHECK(matches(g, "{\"a\": [1, 2.5, \"x\"], \"b\": null}"));
            CHECK(matches(g, "{}"));
            CHECK(!matches(g, "{\"a\": }"));
            CHECK(!matches(g, "[1]"));   /* json.gbnf's root is an object */
        }
        if (g && !strcmp(files[i], "arithmetic")) {
            CHECK(matches(g, "1+2*3=x\n"));
            CHECK(matches(g, "(a+b)*c= 7\n"));
            CHECK(!matches(g, "1+\n"));
        }
        if (g && !strcmp(files[i], "list")) CHECK(matches(g, "- one\n- two\n"));
        cst_grammar_free(g);
        free(text);
    }
    static const struct { const char *src, *yes, *no; } cases[] = {
        {"root ::= \"a\" b{2,3}\nb ::= [xy]", "axyx", "ax"},
        {"root ::= ( \"x\" | \"y\" )+ # comment\n", "xyyx", ""},
        {"root ::= [^\\n]* \"\\n\"", "abc\n", "ab\nc\n"},
        {"root ::= .? \"\\x41\\u00e9\"", "zA\xc3\xa9", "A"},
        {"root ::=\n  ( \"a\"\n  | \"b\" )", "b", "c"},
        {"root ::= expr\nexpr ::= \"(\" expr \")\" | \"x\"", "((x))", "((x)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        brisk_error err = {0};
        cst_grammar *g = compile_kind(bv, "gbnf", cases[i].src, strlen(cases[i].src), &err);
        CHECKF(g != NULL, "gbnf case %zu: %s", i, err.msg);
        if (!g) continue;
        CHECKF(matches(g, cases[i].yes), "gbnf case %zu rejects '%s'", i, cases[i].yes);
        CHECKF(!matches(g, cases[i].no), "gbnf case %zu accepts '%s'", i, cases[i].no);
        cst_grammar_free(g);
    }
    static const char *const bad[] = {"root ::= \"a", "root ::= [a-", "root ::= x", "x ::= \"a\"", "root ::= \"a\"\nroot ::= \"b\"",
                                      "root ::= (\"a\"", "root := \"a\"", "root ::= \"a\"{3,1}", "root ::= \"\\q\"",
                                      "root ::= \"a\"\n  | \"b\""};   /* as llama.cpp: a newline ends a rule outside parentheses */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        brisk_error err = {0};
        cst_grammar *g = compile_kind(bv, "gbnf", bad[i], strlen(bad[i]), &err);
        CHECKF(g == NULL && strstr(err.msg, "GBNF"), "bad grammar %zu: '%s'", i, err.msg);
        cst_grammar_free(g);
    }
}

/* Repeats of fragments that match only the empty string, or may match it (fuzz_gbnf found the first:
 * seven nested empty groups repeated {0,10000} twice ran the lazy tables out of memory, after which the
 * end token's mask bit and cst_accepting disagreed). Each grammar either compiles to a small automaton
 * whose byte masks equal the brute force, its end bit equal to cst_accepting, or is refused by name. */
static void test_empty_repeats(const cst_vocab *bv) {
    static const struct { const char *src, *yes, *no; bool refused; } cases[] = {
        {"root ::= ((((((())))))){0,10000}{0,10000}", "", "a", false},
        {"root ::= ((((((())))))){3,10000}{2,10000} \"b\"", "b", "", false},
        {"root ::= (){0,10000}{0,10000}{0,10000} \"a\"{1,3}", "aaa", "aaaa", false},
        {"root ::= (\"a\"?){0,100}{0,100}", "aaaaaaaaaa", "b", false},
        {"root ::= (\"a\"?){0,10000}", "aaaa", "ab", false},
        {"root ::= (\"a\"){0,10000}{0,10000}", "aaaa", "b", false},
        {"root ::= (\"a\"?){0,10000}{0,10000}", "", "", true},
        /* the same through rules used before their definition: only the built grammar knows them */
        {"root ::= y{0,10000}\ny ::= x{0,10000}\nx ::= \"a\"?", "", "", true},
        {"root ::= y{0,40}\ny ::= x{0,40}\nx ::= \"a\"?", "aaaaa", "b", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        brisk_error err = {0};
        cst_grammar *g = compile_kind(bv, "gbnf", cases[i].src, strlen(cases[i].src), &err);
        if (cases[i].refused) {
            CHECKF(g == NULL && strstr(err.msg, "the empty string"), "empty repeat %zu: '%s'", i, err.msg);
            cst_grammar_free(g);
            continue;
        }
        CHECKF(g != NULL, "empty repeat %zu: %s", i, err.msg);
        if (!g) continue;
        CHECKF(matches(g, cases[i].yes), "empty repeat %zu rejects '%s'", i, cases[i].yes);
        CHECKF(!matches(g, cases[i].no), "empty repeat %zu accepts '%s'", i, cases[i].no);
        /* masks along the accepted text, against the brute force */
        int32_t s = cst_start(g);
        for (size_t k = 0; s != CST_DEAD; k++) {
            uint32_t mask[(257 + 31) / 32];
            CHECKF(cst_mask(g, s, mask), "empty repeat %zu: the automaton ran out of its budget", i);
            for (int t = 0; t < 256; t++)
                CHECKF((int)(mask[t >> 5] >> (t & 31) & 1u) == (cst_advance(g, s, t) != CST_DEAD), "empty repeat %zu byte %d", i, t);
            CHECKF((int)(mask[256 >> 5] & 1u) == (int)cst_accepting(g, s), "empty repeat %zu: end bit vs accepting at %zu", i, k);
            if (!cases[i].yes[k]) break;
            s = cst_advance(g, s, (uint8_t)cases[i].yes[k]);
        }
        cst_stats st;
        cst_grammar_stats(g, &st);
        CHECKF(st.frames < 1000000, "empty repeat %zu: %lld frames", i, (long long)st.frames);
        cst_grammar_free(g);
    }
}

/* ---- hand-made schema tables, errors, serialization --------------------------------------------- */

static void test_schema_tables(const cst_vocab *bv) {
    static const struct { const char *schema, *yes, *no; } cases[] = {
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", "-5", "121"},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", "120", "-6"},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":0}", "1", "0"},
        {"{\"type\":\"integer\",\"minimum\":0}", "123456789012345678901234", "-1"},
        {"{\"type\":\"number\",\"minimum\":0,\"exclusiveMaximum\":10}", "9.99", "10.0"},
        {"{\"type\":\"number\",\"minimum\":-1,\"maximum\":1}", "-0.5", "-1.5"},
        {"{\"type\":\"number\",\"minimum\":-1,\"maximum\":1}", "1.0", "1.01"},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"\xc3\xa9\xc3\xa9\"", "\"a\""},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"\\\"\\\\\"", "\"abcd\""},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2023-12-31\"", "\"2023-02-30\""},
        {"{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-e89b-12d3-a456-426614174000\"", "\"123e4567\""},
        {"{\"type\":\"string\",\"format\":\"email\"}", "\"a.b@ex-ample.org\"", "\"a@b\""},
        {"{\"type\":\"string\",\"format\":\"ipv4\"}", "\"192.168.0.255\"", "\"256.1.1.1\""},
        {"{\"enum\":[\"x\",1,null,[1,2],{\"k\":true}]}", "{\"k\": true}", "2"},
        {"{\"const\":\"a\\u0000b\"}", "\"a\\u0000b\"", "\"ab\""},
        {"{\"type\":[\"string\",\"null\"]}", "null", "1"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}", "[1, 2, 3]", "[1]"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}", "[1,2]", "[1, 2, 3, 4]"},
        {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":false}", "[\"a\", 1]", "[\"a\", 1, 2]"},
        {"{\"type\":\"array\",\"items\":[{\"type\":\"string\"}],\"additionalItems\":{\"type\":\"boolean\"}}", "[\"a\", true]", "[\"a\", 1]"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", "{\"a\": 1, \"z\": [2]}", "{\"z\": 1, \"a\": 1}"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"b\": \"x\"}", "{\"a\": \"x\"}"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":false}", "{}", "{\"b\": 1}"},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"x\": 1, \"y\": 2}", "{\"x\": \"1\"}"},
        {"{\"type\":\"object\",\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},\"additionalProperties\":false}", "{\"x-a\": 1}", "{\"y\": 1}"},
        {"{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":1}]}", "\"a\"", "\"ab\""},
        {"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"boolean\"}]}", "true", "\"a\""},
        {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},{\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}]}",
         "{\"a\": 1, \"b\": \"x\"}", "{\"a\": 1}"},
        {"{\"allOf\":[{\"type\":\"integer\",\"minimum\":0},{\"maximum\":3}]}", "3", "4"},
        {"{\"definitions\":{\"p\":{\"type\":\"integer\"}},\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/definitions/p\"}}}", "{\"a\": 1}", "{\"a\": 1.5}"},
        {"{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#\"}},\"additionalProperties\":false}", "{\"next\": {\"next\": {}}}", "{\"next\": 1}"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],\"minProperties\":1}", "{\"a\": 1}", "{}"},
        {"true", "[{\"x\": [null]}]", "[1,]"},
        {"{\"not\":{\"type\":\"string\"}}", "null", "\"a\""},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{}},\"b\":{\"type\":\"integer\"}}}", "{\"b\": 1}", "{\"a\": 1}"},
        {"{\"type\":\"object\",\"minProperties\":1}", "{\"x\": 1}", "{}"},
        {"{\"type\":\"integer\",\"not\":false}", "7", "7.5"},
        /* an anyOf branch whose type contradicts its siblings' allows nothing (MaskBench dev line 3109) */
        {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\",\"anyOf\":[{\"type\":\"string\"}]}],\"not\":{\"type\":\"object\"}}", "\"a\"", "{}"},
        {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\",\"anyOf\":[{\"type\":\"string\"}]}],\"not\":{\"type\":\"object\"}}", "\"a\"", "[]"},
        /* dependencies (array form): a needs b, c needs a */
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"},\"c\":{}},\"dependencies\":{\"a\":[\"b\"],\"c\":[\"a\"]}}",
         "{\"a\": 1, \"b\": \"x\", \"c\": 2}", "{\"b\": \"x\", \"c\": 2}"},
        {"{\"type\":\"object\",\"dependentRequired\":{\"a\":[\"b\"]}}", "{\"b\": 1}", "{\"a\": 1}"},
        /* oneOf rewritten to exclusive branches: both keys match both branches, a string matches both */
        {"{\"oneOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}", "{\"a\": 1}", "{\"a\": 1, \"b\": 2}"},
        {"{\"oneOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}", "{\"b\": 1}", "\"x\""},
        {"{\"oneOf\":[{\"enum\":[\"a\",\"b\",1]},{\"enum\":[\"b\",\"c\"]}]}", "\"c\"", "\"b\""},
        {"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":1}},\"required\":[\"k\"]},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":2}},\"required\":[\"k\"]}]}",
         "{\"k\": 2}", "{\"k\": 3}"},
        {"{\"type\":\"string\",\"format\":\"my-own-format\"}", "\"anything\"", "1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        brisk_error err = {0};
        cst_grammar *g = compile_kind(bv, "schema", cases[i].schema, strlen(cases[i].schema), &err);
        CHECKF(g != NULL, "schema case %zu: %s", i, err.msg);
        if (!g) continue;
        CHECKF(matches(g, cases[i].yes), "schema case %zu rejects %s", i, cases[i].yes);
        CHECKF(!matches(g, cases[i].no), "schema case %zu accepts %s", i, cases[i].no);
        cst_grammar_free(g);
    }
    /* fail closed: the error names the keyword and where it is */
    static const struct { const char *schema, *kw, *ptr; } errs[] = {
        {"{\"properties\":{\"a\":{\"not\":{\"required\":[\"x\"]}}}}", "'not'", "/properties/a"},
        {"{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"integer\",\"multipleOf\":3}}}", "'multipleOf'", "/properties/b"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}", "'uniqueItems'", "#"},
        {"{\"if\":{\"type\":\"string\"},\"then\":{\"minLength\":1}}", "'if'", "#"},
        {"{\"type\":\"number\",\"not\":{\"type\":\"integer\"}}", "'not'", "#"},
        {"{\"not\":{\"enum\":[1]}}", "'not'", "#"},
        {"{\"type\":\"object\",\"dependencies\":{\"a\":{\"required\":[\"b\"]}}}", "'dependencies'", "#"},
        {"{\"type\":\"string\",\"pattern\":\"(?=x)\"}", "'pattern'", "#"},
        {"{\"oneOf\":[{\"type\":\"object\"},{\"type\":\"object\",\"required\":[\"a\"]}]}", "'oneOf'", "#"},
        {"{\"$ref\":\"http://example.com/s.json\"}", "'$ref'", "#"},
        {"{\"type\":\"string\",\"format\":\"ipv6\"}", "'format'", "#"},
    };
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        brisk_error err = {0};
        cst_grammar *g = compile_kind(bv, "schema", errs[i].schema, strlen(errs[i].schema), &err);
        CHECKF(g == NULL && err.status == BRISK_ERR_UNSUPPORTED && strstr(err.msg, errs[i].kw) && strstr(err.msg, errs[i].ptr),
               "error case %zu: '%s'", i, err.msg);
        cst_grammar_free(g);
    }
    /* malformed input: clear errors, no crash */
    static const char *const hostile[] = {"", "{", "[]", "{\"type\":5}", "{\"type\":\"strin\"}", "{\"$ref\":\"#/nope\"}",
                                          "{\"$ref\":\"#\"}", "{\"anyOf\":[]}", "{\"minLength\":-1,\"type\":\"string\"}",
                                          "{\"type\":\"string\",\"pattern\":\"a{99999}\"}", "{\"enum\":7}"};
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        brisk_error err = {0};
        cst_grammar *g = compile_kind(bv, "schema", hostile[i], strlen(hostile[i]), &err);
        CHECKF(g == NULL && err.msg[0], "hostile schema %zu ('%s') compiled or gave no message", i, hostile[i]);
        cst_grammar_free(g);
    }
    /* deep nesting is refused, not a stack overflow */
    {
        const int depth = 5000;
        char *deep = malloc((size_t)depth * 16 + 16), *p = deep;
        for (int k = 0; k < depth; k++) p += sprintf(p, "{\"items\":");
        p += sprintf(p, "{}");
        for (int k = 0; k < depth; k++) *p++ = '}';
        *p = 0;
        brisk_error err = {0};
        cst_grammar *g = compile_kind(bv, "schema", deep, strlen(deep), &err);
        CHECKF(g == NULL && err.msg[0], "a schema nested %d deep: '%s'", depth, err.msg);
        cst_grammar_free(g);
        free(deep);
    }
}

static void test_dumps(void) {
    /* Python's json.dumps(json.loads(x), ensure_ascii=False), recorded */
    static const struct { const char *in, *want; } cases[] = {
        {"1e-5", "1e-05"}, {"1e16", "1e+16"}, {"1e15", "1000000000000000.0"}, {"100.0", "100.0"}, {"0.1", "0.1"},
        {"1.5e-7", "1.5e-07"}, {"123456789012345.6", "123456789012345.6"}, {"-0.0", "-0.0"}, {"0.0001", "0.0001"},
        {"2.5e+300", "2.5e+300"}, {"12", "12"}, {"[1, {\"a\":\"\\u00e9\\n\\u0001\"}]", "[1, {\"a\": \"\xc3\xa9\\n\\u0001\"}]"},
        {"{\"b\":1,\"a\":[]}", "{\"b\": 1, \"a\": []}"}, {"\"\\/\"", "\"/\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_error_t je;
        json_t *v = json_loads(cases[i].in, JSON_DECODE_ANY, &je);
        size_t len = 0;
        char *s = v ? cst_json_dumps(v, &len) : NULL;
        CHECKF(s && !strcmp(s, cases[i].want), "dumps(%s) = %s, want %s", cases[i].in, s ? s : "(null)", cases[i].want);
        free(s);
        json_decref(v);
    }
}

int main(void) {
    cst_vocab *bv = byte_vocab();
    CHECK(bv != NULL);
    if (!bv) return test_finish();
    test_regex_vs_pcre();
    test_dumps();
    test_schema_tables(bv);
    test_gbnf(bv);
    test_empty_repeats(bv);
    test_min_bytes(bv);
    test_schema_maskbench(bv);
    char path[1024];
    snprintf(path, sizeof path, "%s/models/pycode-target-f16.gguf", BRISK_SOURCE_DIR);
    test_masks_brute_force(path);
    test_token_budget(path);
    test_token_roles(path);
    /* the Llama 3 vocabulary (128,256 tokens) when the shared fixtures are there */
    test_masks_brute_force(test_shared("vocab/ggml-vocab-llama-bpe.gguf", path, sizeof path));
    cst_vocab_free(bv);
    return test_finish();
}
