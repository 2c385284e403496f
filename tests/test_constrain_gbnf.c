/* test_constrain_gbnf: brisk's GBNF front end gives llama.cpp's verdict on every recorded string.
 * tests/data/constrain/gbnf-verdicts/verdicts.txt holds llama.cpp's own verdicts (its grammar code,
 * scripts/peer/peer-grammar.c) on brisk's outputs under llama.cpp's .gbnf files, on hand-made negative
 * controls and on edits of every output (cut, a control byte inserted, "}" or a newline appended).
 * For each line, brisk_constraint_matches (the whole text a complete output of the grammar) must
 * agree: "accept" or "reject". Needs the bundled model only for its vocabulary. */
#include "brisk.h"
#include "test.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; *len = (size_t)n; }
    return b;
}

int main(void) {
    char path[2048], dir[512], model_path[512];
    test_source("tests/data/constrain/gbnf-verdicts", dir, sizeof dir);
    test_source("models/pycode-target-f16.gguf", model_path, sizeof model_path);
    brisk_error err = {0};
    brisk_model *model = NULL;
    if (brisk_model_load(model_path, &model, &err)) { printf("SKIP: %s: %s\n", model_path, err.msg); return 77; }
    snprintf(path, sizeof path, "%s/verdicts.txt", dir);
    FILE *v = fopen(path, "r");
    CHECKF(v != NULL, "cannot open %s", path);
    if (!v) return test_finish();
    char line[1024], cur_grammar[64] = "";
    brisk_constraint *c = NULL;
    int n_accept = 0, n_reject = 0, n_variant = 0;
    while (fgets(line, sizeof line, v)) {
        char grammar[64], verdict[16], file[512];
        if (sscanf(line, "%63s %15s %511s", grammar, verdict, file) != 3) { CHECKF(false, "bad line: %s", line); continue; }
        if (strcmp(grammar, cur_grammar) != 0) {
            brisk_constraint_free(c);
            c = NULL;
            char gpath[1024];
            size_t glen = 0;
            snprintf(gpath, sizeof gpath, "%s/../gbnf/%s.gbnf", dir, grammar);
            char *g = slurp(gpath, &glen);
            CHECKF(g != NULL, "cannot read %s", gpath);
            if (g) CHECKF(brisk_constraint_init(&c, model, BRISK_CONSTRAINT_GBNF, g, glen, &err) == BRISK_OK, "%s: %s", grammar, err.msg);
            free(g);
            snprintf(cur_grammar, sizeof cur_grammar, "%s", grammar);
        }
        if (!c) continue;
        snprintf(path, sizeof path, "%s/%s", dir, file);
        size_t len = 0;
        char *text = slurp(path, &len);
        CHECKF(text != NULL, "cannot read %s", path);
        if (!text) continue;
        const bool want = strcmp(verdict, "accept") == 0, got = brisk_constraint_matches(c, text, len);
        CHECKF(got == want, "%s under %s.gbnf: llama.cpp says %s, brisk says %s", file, grammar, verdict, got ? "accept" : "reject");
        if (want) n_accept++; else n_reject++;
        if (strncmp(file, "variants/", 9) == 0) n_variant++;
        free(text);
    }
    fclose(v);
    brisk_constraint_free(c);
    brisk_model_free(model);
    printf("%d accepted and %d rejected strings (%d edited outputs) agree with llama.cpp\n", n_accept, n_reject, n_variant);
    CHECKF(n_accept >= 30 && n_reject >= 16, "too few recorded verdicts (%d accept, %d reject)", n_accept, n_reject);
    return test_finish();
}
