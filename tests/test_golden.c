/* Golden logits: `brisk logits` on tokens64.i32 against llama.cpp's logits for
 * the same GGUF file (shared/golden, made by the peer's peer-logits).
 * Thresholds (issue #2): mean KL(ref || brisk) <= 1e-4 for F32/F16/BF16/Q8_0,
 * <= 1e-3 for the 2-6-bit types, top-1 agreement >= 63/64 for every file.
 * Each file runs through the CLI, once with the best kernels and once with
 * BRISK_FORCE_REF=1, so every ISA path meets the same bar. */
#include "test.h"
#include "logits_ref.h"

#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

static int is_high_precision(const char *stem) {
    return ends_with(stem, "-F32") || ends_with(stem, "-F16") || ends_with(stem, "-BF16") || ends_with(stem, "-Q8_0");
}

/* One model through the CLI against its reference (stem.gguf, stem.logits.f32). */
static void check_model(const char *dir, const char *stem, const char *tokens, int force_ref) {
    char model[1024], ref_path[1024], out[1024], cmd[4096];
    snprintf(model, sizeof model, "%s/%s.gguf", dir, stem);
    snprintf(ref_path, sizeof ref_path, "%s/%s.logits.f32", dir, stem);
    snprintf(out, sizeof out, "/tmp/brisk-golden-%d-%s.f32", (int)getpid(), stem);
    snprintf(cmd, sizeof cmd, "%s %s logits -m '%s' --tokens '%s' -o '%s' -t 2 2>/tmp/brisk-golden-%d.err",
             force_ref ? "BRISK_FORCE_REF=1" : "", BRISK_CLI_PATH, model, tokens, out, (int)getpid());
    int rc = system(cmd);
    CHECKF(rc == 0, "%s: brisk logits failed (rc %d): see /tmp/brisk-golden-%d.err", stem, rc, (int)getpid());
    if (rc != 0) return;
    size_t nr = 0, ng = 0;
    float *ref = read_f32(ref_path, &nr), *got = read_f32(out, &ng);
    remove(out);
    /* the reference holds 64 rows of the vocabulary brisk reports: a truncated
     * or padded file differs in size from brisk's output */
    CHECKF(ref && got && nr == ng && nr % 64 == 0, "%s: logits %zu floats vs reference %zu (%s)", stem, ng, nr, ref_path);
    if (ref && got && nr == ng && nr % 64 == 0) {
        const int vocab = (int)(nr / 64);
        double kl;
        int top1;
        compare(ref, got, 64, vocab, &kl, &top1);
        const double limit = is_high_precision(stem) ? 1e-4 : 1e-3;
        printf("%-26s %-4s KL %.3e (limit %.0e)  top-1 %d/64\n", stem, force_ref ? "ref" : "best", kl, limit, top1);
        CHECKF(kl <= limit, "%s: mean KL %.3e > %.0e", stem, kl, limit);
        CHECKF(top1 >= 63, "%s: top-1 agreement %d/64 < 63", stem, top1);
    }
    free(ref);
    free(got);
}

static int has_name(char (*names)[TEST_NAME_MAX], int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return 1;
    return 0;
}

/* Every model in dir against its reference, with the best kernels and with the
 * reference ones. The pairs must be whole: a model without its logits (or
 * logits without their model) is a failure, and so is a missing name of
 * `expected` (the committed set) or a missing tokens64.i32. Returns the number
 * of models compared. */
static int run_dir(const char *dir, const char *const *expected, int n_expected) {
    static char models[128][TEST_NAME_MAX], refs[128][TEST_NAME_MAX];
    char tokens[1024];
    snprintf(tokens, sizeof tokens, "%s/tokens64.i32", dir);
    struct stat st;
    CHECKF(stat(tokens, &st) == 0 && st.st_size == 64 * 4, "%s: missing, or not 64 token ids", tokens);
    const int nm = test_list(dir, ".gguf", models, 128), nr = test_list(dir, ".logits.f32", refs, 128);
    CHECKF(nm >= 0 && nr >= 0, "%s: cannot list the directory", dir);
    for (int i = 0; i < n_expected; i++) CHECKF(has_name(models, nm, expected[i]), "%s: committed model %s.gguf is missing", dir, expected[i]);
    for (int i = 0; i < nr; i++) CHECKF(has_name(models, nm, refs[i]), "%s: %s.logits.f32 has no model %s.gguf", dir, refs[i], refs[i]);
    int checked = 0;
    for (int i = 0; i < nm; i++) {
        const int ok = has_name(refs, nr, models[i]);
        CHECKF(ok, "%s: %s.gguf has no reference %s.logits.f32", dir, models[i], models[i]);
        if (!ok) continue;
        check_model(dir, models[i], tokens, 0);
        check_model(dir, models[i], tokens, 1);
        checked++;
    }
    return checked;
}

/* The committed golden sets (tests/data/golden: a model of shared/golden;
 * tests/data/golden-extra: scripts/gen-golden-extra.sh), named so that a
 * deleted pair is noticed. */
static const char *const core_models[] = {"qwen2-tiny-Q4_0"};
static const char *const extra_models[] = {"llama-yarn-tiny-F16", "llama-yarn-tiny-Q4_K_M", "llama-yarn-tiny-Q8_0",
                                           "qwen3-tiny-F16",      "qwen3-tiny-Q4_K_M",      "qwen3-tiny-Q8_0"};

int main(void) {
    char core[1024], extra[1024], shared[1024];
    test_source("tests/data/golden", core, sizeof core);
    test_source("tests/data/golden-extra", extra, sizeof extra);
    test_shared("golden", shared, sizeof shared);
    test_count("committed core golden models (tests/data/golden)", run_dir(core, core_models, 1));
    test_count("committed extra golden models (tests/data/golden-extra)", run_dir(extra, extra_models, 6));
    if (test_exists(shared)) test_count("shared golden models", run_dir(shared, NULL, 0));
    else printf("SKIP shared golden models: %s is absent (only the committed sets ran)\n", shared);
    return test_finish();
}
