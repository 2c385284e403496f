/* Greedy continuations of the bundled model equal llama.cpp's, token for
 * token (tests/data/greedy, recorded by scripts/gen-greedy-golden.sh from the
 * peer). Also checks that brisk tokenizes each prompt to llama.cpp's ids. */
#include "test.h"
#include "brisk.h"

#include <dirent.h>

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

static void run_case(brisk_model *m, const char *dir, const char *name) {  /* dir < 1024, name < 8 */
    char path[1100], *text = NULL;
    snprintf(path, sizeof path, "%s/%s.prompt", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = malloc((size_t)len + 1);
    if (fread(text, 1, (size_t)len, f) != (size_t)len) len = 0;
    fclose(f);
    snprintf(path, sizeof path, "%s/%s.ids", dir, name);
    f = fopen(path, "r");
    static int32_t want_prompt[4096], want_gen[1024];
    int np = read_ids(f, want_prompt, 4096);
    char sep[8];
    if (!fgets(sep, sizeof sep, f)) np = -1;
    int ng = read_ids(f, want_gen, 1024);
    if (ng < 0) ng = 0;   /* an empty line: the reference stopped at end of generation at once */
    fclose(f);

    brisk_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    CHECKF(brisk_tokenize_text(m, text, (size_t)len, true, false, &ids, &n, &err) == BRISK_OK, "%s: %s", name, err.msg);
    free(text);
    int same = (int)n == np;
    for (int i = 0; same && i < np; i++) same = ids[i] == want_prompt[i];
    CHECKF(same, "%s: prompt tokenization differs from llama.cpp (%zu vs %d ids)", name, n, np);
    if (!same) { free(ids); return; }

    brisk_context_params cp = brisk_context_default_params();
    cp.n_ctx = (int32_t)n + 80;
    cp.n_threads = 2;
    brisk_context *c = NULL;
    CHECKF(brisk_context_init(m, &cp, &c, &err) == BRISK_OK, "%s", err.msg);
    if (!c) { free(ids); return; }
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
}

int main(void) {
    char model_path[1024], dir[1024];
    test_source("models/pycode-target-f16.gguf", model_path, sizeof model_path);
    test_source("tests/data/greedy", dir, sizeof dir);
    brisk_model *m = NULL;
    brisk_error err = {0};
    CHECKF(brisk_model_load(model_path, &m, &err) == BRISK_OK, "%s", err.msg);
    if (!m) return test_finish();
    for (int i = 0; i < 100; i++) {
        char name[8];
        snprintf(name, sizeof name, "%02d", i);
        char p[1100];
        snprintf(p, sizeof p, "%s/%s.prompt", dir, name);
        if (!test_exists(p)) break;
        if (test_quick() && i % 3) continue;   /* the sanitizer run checks every third case */
        run_case(m, dir, name);
    }
    brisk_model_free(m);
    return test_finish();
}
