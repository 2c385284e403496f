/* pretok: BPE pre-tokenizers — a data table from tokenizer.ggml.pre to a
 * list of regexes plus flags — and the splitter that runs them with PCRE2
 * (UTF + UCP, JIT when available).
 *
 * Matching llama.cpp exactly takes three rules, all from its src/unicode.cpp:
 *  1. Text is decoded leniently: every byte that does not start a well-formed
 *     sequence becomes U+FFFD (so pre-tokens carry EF BF BD), and overlong
 *     forms are re-encoded canonically. This is the "norm" text.
 *  2. Its \s is a fixed set (ASCII \t\n\v\f\r and space, U+0085 and the Z
 *     category) and its regex engines see every non-ASCII space as \v. We run
 *     the regexes on a "shadow" copy where exactly that substitution is made
 *     (and surrogates become U+E000, another category-C code point, so PCRE2
 *     sees valid UTF-8), then map match offsets back to the norm text.
 *  3. Each regex refines the pieces the previous one produced: it runs inside
 *     every piece separately (lookaheads and \z stop at the piece's end), and
 *     the unmatched gaps between matches become pieces too.
 * Unicode categories come from PCRE2's tables plus, for code points those
 * leave unassigned, the Unicode 15.1 additions of unicode_delta.h: llama.cpp's
 * table is Unicode 15.1, Debian 12's libpcre2 (10.42) is Unicode 14. Every
 * \p{X} of the table is widened with them when the patterns are compiled. */
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode_delta.h"

#include <stdlib.h>
#include <string.h>

/* ---- the table --------------------------------------------------------------------- */

/* Contractions, case-sensitive per letter: llama.cpp rewrites HF's
 * (?i:'s|...) this way, so 'ſ (which PCRE2 would case-fold to 's) stays apart. */
#define RX_CONTRACTIONS "'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])"
#define RX_GPT2 "'(?:s|t|re|ve|m|ll|d)| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RX_LLAMA3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_LLAMA3 RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" RX_LLAMA3_TAIL
#define RX_QWEN2 RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" RX_LLAMA3_TAIL
#define RX_QWEN35                                                                              \
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*" \
                    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_CJK "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define RX_BLOOM " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"
/* DeepSeek LLM's cased-letter class (from its tokenizer.json), as ranges. */
#define RX_DEEPSEEK_LETTERS                                                                              \
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"   \
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}" \
    "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"         \
    "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"      \
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"      \
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}" \
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}" \
    "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"       \
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"        \
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"       \
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"       \
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"      \
    "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"   \
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}" \
    "\\x{1E900}-\\x{1E943}]+"

/* A regex family: the patterns applied in order. */
typedef struct pretok_family {
    const char *name;
    const char *patterns[7];   /* NULL-terminated */
} pretok_family;

enum {
    FAM_DEFAULT, FAM_LLAMA3, FAM_QWEN2, FAM_QWEN35, FAM_GPT2, FAM_STARCODER, FAM_FALCON,
    FAM_DEEPSEEK_CODER, FAM_DEEPSEEK_LLM, FAM_GEMMA4, FAM_BLOOM, FAM_VIKING,
};

static const pretok_family families[] = {
    [FAM_DEFAULT] = {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL}},
    [FAM_LLAMA3] = {"llama3", {RX_LLAMA3, NULL}},
    [FAM_QWEN2] = {"qwen2", {RX_QWEN2, NULL}},
    [FAM_QWEN35] = {"qwen35", {RX_QWEN35, NULL}},
    [FAM_GPT2] = {"gpt2", {RX_GPT2, NULL}},
    [FAM_STARCODER] = {"starcoder", {"\\p{N}", RX_GPT2, NULL}},
    [FAM_FALCON] = {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]", NULL}},
    [FAM_DEEPSEEK_CODER] = {"deepseek-coder", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK, "\\p{N}", NULL}},
    [FAM_DEEPSEEK_LLM] = {"deepseek-llm",
                          {"[\\r\\n]", RX_DEEPSEEK_LETTERS,
                           "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
                           "\\s+\\z", RX_CJK, "\\p{N}+", NULL}},
    [FAM_GEMMA4] = {"gemma4", {"[^\\n]+|\\n+", NULL}},
    [FAM_BLOOM] = {"bloom", {RX_BLOOM, NULL}},
    [FAM_VIKING] = {"viking", {RX_BLOOM, "\\p{N}", NULL}},
};

/* tokenizer.ggml.pre value -> family + flags (llama.cpp's names). */
struct brisk_pretok_def {
    const char *name;
    int family;
    unsigned flags;
};

#define KEEP BRISK_PRE_KEEP_SPACES
static const brisk_pretok_def pretok_defs[] = {
    {"default", FAM_DEFAULT, 0},
    /* Llama 3 and its relatives: whole-word lookup before merging, BOS by default */
    {"llama3", FAM_LLAMA3, BRISK_PRE_IGNORE_MERGES | BRISK_PRE_ADD_BOS},
    {"llama-v3", FAM_LLAMA3, BRISK_PRE_IGNORE_MERGES | BRISK_PRE_ADD_BOS},
    {"llama-bpe", FAM_LLAMA3, BRISK_PRE_IGNORE_MERGES | BRISK_PRE_ADD_BOS},
    {"falcon3", FAM_LLAMA3, BRISK_PRE_IGNORE_MERGES | BRISK_PRE_ADD_BOS},
    {"falcon-h1", FAM_LLAMA3, BRISK_PRE_IGNORE_MERGES | BRISK_PRE_ADD_BOS},
    {"pixtral", FAM_LLAMA3, BRISK_PRE_IGNORE_MERGES | BRISK_PRE_ADD_BOS},
    {"midm-2.0", FAM_LLAMA3, BRISK_PRE_IGNORE_MERGES | BRISK_PRE_ADD_BOS},
    {"lfm2", FAM_LLAMA3, BRISK_PRE_IGNORE_MERGES | BRISK_PRE_ADD_BOS},
    {"jina-v5-nano", FAM_LLAMA3, BRISK_PRE_IGNORE_MERGES | BRISK_PRE_ADD_BOS},
    {"dbrx", FAM_LLAMA3, 0},
    {"smaug-bpe", FAM_LLAMA3, 0},
    {"chatglm-bpe", FAM_LLAMA3, BRISK_PRE_NO_BOS},
    {"glm4", FAM_LLAMA3, BRISK_PRE_NO_BOS},
    /* DeepSeek */
    {"deepseek-llm", FAM_DEEPSEEK_LLM, KEEP},
    {"deepseek-coder", FAM_DEEPSEEK_CODER, KEEP},
    /* Falcon, MPT, StarCoder family */
    {"falcon", FAM_FALCON, 0},
    {"mpt", FAM_GPT2, 0},
    {"olmo", FAM_GPT2, 0},
    {"jais", FAM_GPT2, 0},
    {"trillion", FAM_GPT2, KEEP},
    {"granite-docling", FAM_GPT2, KEEP},
    {"starcoder", FAM_STARCODER, 0},
    {"refact", FAM_STARCODER, 0},
    {"codeshell", FAM_STARCODER, 0},
    {"exaone", FAM_STARCODER, 0},
    {"minerva-7b", FAM_STARCODER, 0},
    {"mellum2", FAM_STARCODER, 0},
    {"command-r", FAM_STARCODER, KEEP},
    {"smollm", FAM_STARCODER, KEEP},
    /* GPT-2 */
    {"gpt-2", FAM_GPT2, 0},
    {"phi-2", FAM_GPT2, 0},
    {"jina-es", FAM_GPT2, 0},
    {"jina-de", FAM_GPT2, 0},
    {"gigachat", FAM_GPT2, 0},
    {"jina-v2-es", FAM_GPT2, 0},
    {"jina-v2-de", FAM_GPT2, 0},
    {"a.x-4.0", FAM_GPT2, 0},
    {"mellum", FAM_GPT2, 0},
    {"modern-bert", FAM_GPT2, 0},
    {"exaone4", FAM_GPT2, 0},
    {"jina-v1-en", FAM_GPT2, BRISK_PRE_ADD_SEP},
    {"jina-v2-code", FAM_GPT2, BRISK_PRE_ADD_SEP},
    {"roberta-bpe", FAM_GPT2, BRISK_PRE_ADD_SEP},
    /* Qwen */
    {"qwen2", FAM_QWEN2, KEEP},
    {"deepseek-r1-qwen", FAM_QWEN2, KEEP},
    {"kormo", FAM_QWEN2, KEEP},
    {"f2llmv2", FAM_QWEN2, KEEP},
    {"hunyuan", FAM_QWEN2, KEEP},
    {"solar-open", FAM_QWEN2, KEEP},
    {"stablelm2", FAM_QWEN2, 0},
    {"megrez", FAM_QWEN2, 0},
    {"qwen35", FAM_QWEN35, KEEP},
    /* SPM-style BPE over raw UTF-8 with U+2581 for spaces */
    {"gemma4", FAM_GEMMA4, BRISK_PRE_RAW_UTF8 | BRISK_PRE_ESCAPE_WS | BRISK_PRE_NL_TOKENS | BRISK_PRE_FORCE_BOS},
    {"granite-embed-multi-311m", FAM_GEMMA4, BRISK_PRE_RAW_UTF8 | BRISK_PRE_ESCAPE_WS | BRISK_PRE_NL_TOKENS | BRISK_PRE_FORCE_BOS},
    {"sarvam-moe", FAM_GEMMA4, BRISK_PRE_RAW_UTF8 | BRISK_PRE_ESCAPE_WS | KEEP},
    /* BLOOM family */
    {"poro-chat", FAM_BLOOM, KEEP},
    {"bloom", FAM_BLOOM, 0},
    {"gpt3-finnish", FAM_BLOOM, 0},
    {"viking", FAM_VIKING, KEEP},
};
#undef KEEP

const brisk_pretok_def *brisk_pretok_find(const char *name, size_t len) {
    if (!name || len == 0) return &pretok_defs[0];
    for (size_t i = 0; i < BRISK_ARRAY_LEN(pretok_defs); i++)
        if (strlen(pretok_defs[i].name) == len && memcmp(pretok_defs[i].name, name, len) == 0) return &pretok_defs[i];
    return NULL;
}

unsigned brisk_pretok_flags(const brisk_pretok_def *d) { return d->flags; }
const char *brisk_pretok_name(const brisk_pretok_def *d) { return families[d->family].name; }

/* ---- compile ------------------------------------------------------------------------- */

void brisk_pretok_free(brisk_pretok *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_re; i++) pcre2_code_free(p->re[i]);
    pcre2_match_context_free(p->mctx);
    memset(p, 0, sizeof *p);
}

/* Copy pattern pat with every \p{L}, \p{N}, \p{M}, \p{P}, \p{S} widened by
 * the code points PCRE2's tables lack (a class item inside [...], a class of
 * its own outside). */
static brisk_status widen_categories(const char *pat, brisk_bbuf *out, brisk_error *err) {
    static const struct {
        char cls;
        const char *extra;
    } extra[] = {{'L', BRISK_UCD_EXTRA_L}, {'N', BRISK_UCD_EXTRA_N}, {'M', BRISK_UCD_EXTRA_M},
                 {'P', BRISK_UCD_EXTRA_P}, {'S', BRISK_UCD_EXTRA_S}};
    out->n = 0;
    bool in_class = false;
    brisk_status st = BRISK_OK;
    for (size_t i = 0; pat[i] && st == BRISK_OK;) {
        if (pat[i] == '\\' && pat[i + 1] == 'p' && pat[i + 2] == '{' && pat[i + 3] && pat[i + 4] == '}') {
            const char *x = NULL;
            for (size_t k = 0; k < BRISK_ARRAY_LEN(extra); k++)
                if (extra[k].cls == pat[i + 3]) x = extra[k].extra;
            if (x) {
                if (!in_class) st = brisk_bbuf_append(out, "[", 1, err);
                if (st == BRISK_OK) st = brisk_bbuf_append(out, pat + i, 5, err);
                if (st == BRISK_OK) st = brisk_bbuf_append(out, x, strlen(x), err);
                if (st == BRISK_OK && !in_class) st = brisk_bbuf_append(out, "]", 1, err);
                i += 5;
                continue;
            }
        }
        if (pat[i] == '\\' && pat[i + 1]) {   /* any other escape: copy both characters */
            st = brisk_bbuf_append(out, pat + i, 2, err);
            i += 2;
            continue;
        }
        if (pat[i] == '[') in_class = true;
        else if (pat[i] == ']') in_class = false;
        st = brisk_bbuf_append(out, pat + i, 1, err);
        i++;
    }
    return st;
}

brisk_status brisk_pretok_compile(brisk_pretok *p, const brisk_pretok_def *def, brisk_error *err) {
    memset(p, 0, sizeof *p);
    p->def = def;
    const pretok_family *fam = &families[def->family];
    uint32_t jit_ok = 0;
    pcre2_config(PCRE2_CONFIG_JIT, &jit_ok);
    p->jit = jit_ok != 0;
    /* A 10 MB run of spaces makes \s*[\r\n]+ backtrack 10M steps: more than
     * PCRE2's default limit of 10M, though still linear. */
    p->mctx = pcre2_match_context_create(NULL);
    if (!p->mctx) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate a regex match context");
    pcre2_set_match_limit(p->mctx, UINT32_MAX);
    pcre2_set_depth_limit(p->mctx, UINT32_MAX);
    brisk_bbuf pat = {0};
    for (size_t i = 0; fam->patterns[i]; i++) {
        BRISK_ASSERT(i < BRISK_ARRAY_LEN(p->re));
        int ec = 0;
        PCRE2_SIZE eo = 0;
        brisk_status st = widen_categories(fam->patterns[i], &pat, err);
        if (st != BRISK_OK) {
            free(pat.p);
            brisk_pretok_free(p);
            return st;
        }
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat.p, pat.n, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
        if (!re) {
            free(pat.p);
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ec, msg, sizeof msg);
            brisk_pretok_free(p);
            /* a bug in the table, but report it rather than abort */
            return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "pre-tokenizer '%s': pattern %zu: %s at offset %zu",
                              fam->name, i, (const char *)msg, (size_t)eo);
        }
        if (p->jit && pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) != 0) p->jit = false;
        p->re[p->n_re++] = re;
    }
    free(pat.p);
    return BRISK_OK;
}

/* ---- UTF-8 helpers ---------------------------------------------------------------------- */

uint32_t brisk_utf8_decode_lenient(const uint8_t *s, size_t n, size_t *i) {
    size_t k = *i;
    uint8_t c = s[k];
    if (c < 0x80) {
        *i = k + 1;
        return c;
    }
    size_t need;
    uint32_t cp;
    if (!(c & 0x40)) goto bad;   /* a lone continuation byte */
    if (!(c & 0x20)) {
        need = 1;
        cp = c & 0x1F;
    } else if (!(c & 0x10)) {
        need = 2;
        cp = c & 0x0F;
    } else if (!(c & 0x08)) {
        need = 3;
        cp = c & 0x07;
    } else {
        goto bad;
    }
    if (k + need >= n) goto bad;   /* not enough bytes left */
    for (size_t j = 1; j <= need; j++) {
        if ((s[k + j] & 0xC0) != 0x80) goto bad;
        cp = (cp << 6) | (s[k + j] & 0x3F);
    }
    *i = k + need + 1;
    return cp > 0x10FFFF ? 0xFFFD : cp;
bad:
    *i = k + 1;
    return 0xFFFD;
}

size_t brisk_utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool brisk_cp_is_space(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* ---- splitting ----------------------------------------------------------------------------- */

void brisk_split_ctx_free(brisk_split_ctx *c) {
    if (!c) return;
    free(c->norm.p);
    free(c->shadow.p);
    free(c->spans);
    free(c->spans2);
    if (c->md) pcre2_match_data_free(c->md);
    memset(c, 0, sizeof *c);
}

/* Build c->norm (and c->shadow when it differs) from the raw text. */
static brisk_status split_normalise(brisk_split_ctx *c, const uint8_t *s, size_t n, brisk_error *err) {
    c->norm.n = 0;
    c->shadow.n = 0;
    /* U+FFFD (3 bytes) can replace 1 byte: size for the worst case once */
    size_t worst;
    if (!brisk_mul_size(n, 3, &worst)) return brisk_fail(err, BRISK_ERR_NOMEM, "text of %zu bytes is too large", n);
    brisk_status st = brisk_bbuf_reserve(&c->norm, worst, err);
    if (st != BRISK_OK) return st;
    char *o = c->norm.p;
    size_t on = 0;
    bool need_shadow = false;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {   /* ASCII run: copy as is */
            size_t j = i + 1;
            while (j < n && s[j] < 0x80) j++;
            memcpy(o + on, s + i, j - i);
            on += j - i;
            i = j;
            continue;
        }
        uint32_t cp = brisk_utf8_decode_lenient(s, n, &i);
        on += brisk_utf8_encode(cp, o + on);
        if (brisk_cp_is_space(cp) || (cp >= 0xD800 && cp <= 0xDFFF)) need_shadow = true;
    }
    c->norm.n = on;
    o[on] = 0;
    if (!need_shadow) return BRISK_OK;

    st = brisk_bbuf_reserve(&c->shadow, on, err);
    if (st != BRISK_OK) return st;
    const uint8_t *p = (const uint8_t *)c->norm.p;
    char *w = c->shadow.p;
    size_t wn = 0;
    i = 0;
    while (i < on) {
        if (p[i] < 0x80) {
            w[wn++] = (char)p[i++];
            continue;
        }
        size_t k = i;
        uint32_t cp = brisk_utf8_decode_lenient(p, on, &i);
        if (brisk_cp_is_space(cp)) {
            w[wn++] = '\v';
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            wn += brisk_utf8_encode(0xE000, w + wn);
        } else {
            memcpy(w + wn, p + k, i - k);
            wn += i - k;
        }
    }
    c->shadow.n = wn;
    w[wn] = 0;
    return BRISK_OK;
}

static brisk_status spans_push(brisk_span **arr, size_t *n, size_t *cap, size_t off, size_t len, brisk_error *err) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        if (nc > SIZE_MAX / sizeof(brisk_span)) return brisk_fail(err, BRISK_ERR_NOMEM, "too many pre-tokens");
        brisk_span *p = realloc(*arr, nc * sizeof *p);
        if (!p) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate %zu pre-tokens", nc);
        *arr = p;
        *cap = nc;
    }
    (*arr)[*n].off = off;
    (*arr)[*n].len = len;
    (*n)++;
    return BRISK_OK;
}

/* Run one regex inside every current span (subject = shadow text). */
static brisk_status split_one(const brisk_pretok *p, brisk_split_ctx *c, const pcre2_code *re, const char *subj,
                              brisk_error *err) {
    size_t n2 = 0;
    brisk_status st = BRISK_OK;
    for (size_t si = 0; si < c->n_spans; si++) {
        const char *base = subj + c->spans[si].off;
        size_t blen = c->spans[si].len;
        size_t pos = 0, prev = 0;
        while (pos < blen) {
            int rc = p->jit ? pcre2_jit_match(re, (PCRE2_SPTR)base, blen, pos, 0, c->md, p->mctx)
                            : pcre2_match(re, (PCRE2_SPTR)base, blen, pos, PCRE2_NO_UTF_CHECK, c->md, p->mctx);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[160];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return brisk_fail(err, BRISK_ERR_CAPACITY, "pre-tokenizer '%s': regex failed: %s",
                                  brisk_pretok_name(p->def), (const char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
            size_t ms = ov[0], me = ov[1];
            if (me == ms) {   /* empty match: no piece, step one character */
                pos = ms + brisk_utf8_len((uint8_t)base[ms]);
                continue;
            }
            if (ms > prev) {
                st = spans_push(&c->spans2, &n2, &c->cap_spans2, c->spans[si].off + prev, ms - prev, err);
                if (st != BRISK_OK) return st;
            }
            st = spans_push(&c->spans2, &n2, &c->cap_spans2, c->spans[si].off + ms, me - ms, err);
            if (st != BRISK_OK) return st;
            prev = pos = me;
        }
        if (prev < blen) {
            st = spans_push(&c->spans2, &n2, &c->cap_spans2, c->spans[si].off + prev, blen - prev, err);
            if (st != BRISK_OK) return st;
        }
    }
    brisk_span *t = c->spans;
    c->spans = c->spans2;
    c->spans2 = t;
    size_t tc = c->cap_spans;
    c->cap_spans = c->cap_spans2;
    c->cap_spans2 = tc;
    c->n_spans = n2;
    return BRISK_OK;
}

/* Shadow offsets -> norm offsets: both texts have the same code points, only
 * some encodings differ in length. Span boundaries are increasing, so one walk
 * over both texts converts them all. */
static void spans_to_norm(brisk_split_ctx *c) {
    const uint8_t *sh = (const uint8_t *)c->shadow.p, *no = (const uint8_t *)c->norm.p;
    size_t sp = 0, np = 0;
    for (size_t k = 0; k < c->n_spans; k++) {
        size_t s0 = c->spans[k].off, s1 = s0 + c->spans[k].len;
        while (sp < s0) {
            sp += brisk_utf8_len(sh[sp]);
            np += brisk_utf8_len(no[np]);
        }
        size_t n0 = np;
        while (sp < s1) {
            sp += brisk_utf8_len(sh[sp]);
            np += brisk_utf8_len(no[np]);
        }
        c->spans[k].off = n0;
        c->spans[k].len = np - n0;
    }
}

brisk_status brisk_pretok_split(const brisk_pretok *p, brisk_split_ctx *c, const char *text, size_t len, brisk_error *err) {
    brisk_status st = split_normalise(c, (const uint8_t *)text, len, err);
    if (st != BRISK_OK) return st;
    c->n_spans = 0;
    if (c->norm.n == 0) return BRISK_OK;
    if (!c->md) {
        c->md = pcre2_match_data_create(4, NULL);
        if (!c->md) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate regex match data");
    }
    bool shadow = c->shadow.n > 0;
    const char *subj = shadow ? c->shadow.p : c->norm.p;
    size_t subj_len = shadow ? c->shadow.n : c->norm.n;
    st = spans_push(&c->spans, &c->n_spans, &c->cap_spans, 0, subj_len, err);
    if (st != BRISK_OK) return st;
    for (size_t i = 0; i < p->n_re; i++) {
        st = split_one(p, c, p->re[i], subj, err);
        if (st != BRISK_OK) return st;
    }
    if (shadow) spans_to_norm(c);
    return BRISK_OK;
}
