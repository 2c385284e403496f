/* Greedy continuations of the bundled model equal llama.cpp's, token for
 * token (tests/data/greedy, recorded by scripts/gen-greedy-golden.sh from the
 * peer). Also checks that brisk tokenizes each prompt to llama.cpp's ids. */
#include "test.h"
#include "brisk.h"


static int read_ids(FILE *f, int32_t *ids, int cap) {
    char line[1 << 16];
    int n = 0;
    if (!fgets(line, sizeof line, f)) return -1;
    for (char *p = line, *end; n < cap; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n++] = (int32_t)v;
    }
    return n;
}

/* One case: name.prompt and name.ids in dir. Returns 1 when it was compared
 * (pass or fail), 0 when its fixture could not be read (a failed check). */
static int run_case(brisk_model *m, const char *dir, const char *name) {  /* dir < 1024, name < 256 */
    char path[1400], *text = NULL;
    snprintf(path, sizeof path, "%.1023s/%.255s.prompt", dir, name);
    FILE *f = fopen(path, "rb");
    long len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)len + 1)) &&
        fread(text, 1, (size_t)len, f) != (size_t)len)
        len = -1;
    if (f) fclose(f);
    CHECKF(text && len > 0, "%s: cannot read a non-empty prompt", path);
    if (!text || len <= 0) { free(text); return 0; }
    snprintf(path, sizeof path, "%.1023s/%.255s.ids", dir, name);
    f = fopen(path, "r");
    CHECKF(f, "%s: the reference is missing", path);
    if (!f) { free(text); return 0; }
    static int32_t want_prompt[4096], want_gen[1024];
    int np = read_ids(f, want_prompt, 4096);
    char sep[8];
    const bool has_sep = fgets(sep, sizeof sep, f) && !strcmp(sep, "--\n");
    int ng = read_ids(f, want_gen, 1024);
    if (ng < 0) ng = 0;   /* an empty line: the reference stopped at end of generation at once */
    fclose(f);
    CHECKF(np > 0 && has_sep, "%s: not 'prompt ids, --, generated ids'", path);
    if (np <= 0 || !has_sep) { free(text); return 0; }

    brisk_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    CHECKF(brisk_tokenize_text(m, text, (size_t)len, true, false, &ids, &n, &err) == BRISK_OK, "%s: %s", name, err.msg);
    free(text);
    int same = (int)n == np;
    for (int i = 0; same && i < np; i++) same = ids[i] == want_prompt[i];
    CHECKF(same, "%s: prompt tokenization differs from llama.cpp (%zu vs %d ids)", name, n, np);
    if (!same) { free(ids); return 1; }

    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx_seq = (int32_t)n + 80;
    cp.n_threads = 2;
    brisk_context *c = NULL;
    CHECKF(brisk_context_init(m, &cp, &c, &err) == BRISK_OK, "%s", err.msg);
    if (!c) { free(ids); return 1; }
    const int32_t nb = brisk_context_n_batch(c);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)nb), *seq = calloc((size_t)nb, sizeof(int32_t));
    uint8_t *want = calloc((size_t)nb, 1);
    for (size_t i0 = 0; i0 < n; i0 += (size_t)nb) {
        int32_t k = (int32_t)(n - i0 < (size_t)nb ? n - i0 : (size_t)nb);
        for (int32_t j = 0; j < k; j++) { pos[j] = (int32_t)i0 + j; want[j] = i0 + (size_t)j == n - 1; }
        brisk_batch b = {k, ids + i0, pos, seq, want};
        CHECKF(brisk_decode(c, &b, &err) == BRISK_OK, "%s", err.msg);
    }
    int32_t got[1024];
    int ngot = 0;
    brisk_model_info info;
    brisk_model_get_info(m, &info);
    for (int k = 0; k < 64; k++) {
        const float *lg = brisk_get_logits(c, 0);
        int32_t best = 0;
        for (int32_t v = 1; v < info.n_vocab; v++) if (lg[v] > lg[best]) best = v;
        if (brisk_token_is_eog(m, best)) break;
        got[ngot++] = best;
        int32_t p = (int32_t)n + k, s0 = 0;
        uint8_t one = 1;
        brisk_batch b = {1, &best, &p, &s0, &one};
        if (brisk_decode(c, &b, &err) != BRISK_OK) { CHECKF(0, "%s", err.msg); break; }
    }
    int match = 0;
    while (match < ngot && match < ng && got[match] == want_gen[match]) match++;
    printf("%s: prompt %zu tokens, %d/%d generated tokens equal llama.cpp's\n", name, n, match, ng);
    CHECKF(ngot == ng && match == ng, "%s: greedy continuation diverges at token %d (brisk %d tokens, llama.cpp %d)", name, match, ngot, ng);
    free(pos); free(seq); free(want); free(ids);
    brisk_context_free(c);
    return 1;
}

/* scripts/gen-greedy-golden.sh writes cases 00..09: a deleted pair is noticed */
#define GREEDY_CASES 10

int main(void) {
    char model_path[1024], dir[1024];
    test_source("models/pycode-target-f16.gguf", model_path, sizeof model_path);
    test_source("tests/data/greedy", dir, sizeof dir);
    static char prompts[128][TEST_NAME_MAX], refs[128][TEST_NAME_MAX];
    const int np = test_list(dir, ".prompt", prompts, 128), nr = test_list(dir, ".ids", refs, 128);
    CHECKF(np == GREEDY_CASES && nr == GREEDY_CASES, "%s: %d prompts and %d references, not %d of each", dir, np, nr, GREEDY_CASES);
    for (int i = 0; i < nr; i++) {   /* a reference whose prompt is gone */
        int found = 0;
        for (int j = 0; j < np && !found; j++) found = !strcmp(prompts[j], refs[i]);
        CHECKF(found, "%s: %s.ids has no %s.prompt", dir, refs[i], refs[i]);
    }
    brisk_model *m = NULL;
    brisk_error err = {0};
    CHECKF(brisk_model_load(model_path, &m, &err) == BRISK_OK, "%s", err.msg);
    if (!m) return test_finish();
    int checked = 0;
    for (int i = 0; i < np; i++) {
        if (test_quick() && i % 3) continue;   /* the sanitizer run checks every third case */
        checked += run_case(m, dir, prompts[i]);
    }
    test_count("greedy cases", checked);
    brisk_model_free(m);
    return test_finish();
}
