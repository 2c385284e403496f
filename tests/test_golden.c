/* Golden logits: `brisk logits` on tokens64.i32 against llama.cpp's logits for
 * the same GGUF file (shared/golden, made by the peer's peer-logits).
 * Thresholds (issue #2): mean KL(ref || brisk) <= 1e-4 for F32/F16/BF16/Q8_0,
 * <= 1e-3 for the 2-6-bit types, top-1 agreement >= 63/64 for every file.
 * Each file runs through the CLI, once with the best kernels and once with
 * BRISK_FORCE_REF=1, so every ISA path meets the same bar. */
#include "test.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

static float *read_f32(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *buf = malloc((size_t)sz);
    *n = fread(buf, 1, (size_t)sz, f) / sizeof(float);
    fclose(f);
    return buf;
}

/* mean KL(ref || got) over rows, and how many rows agree on the argmax */
static void compare(const float *ref, const float *got, int rows, int vocab, double *kl_mean, int *top1) {
    double kl = 0.0;
    *top1 = 0;
    for (int r = 0; r < rows; r++) {
        const float *a = ref + (size_t)r * vocab, *b = got + (size_t)r * vocab;
        double ma = a[0], mb = b[0];
        int ia = 0, ib = 0;
        for (int v = 1; v < vocab; v++) {
            if (a[v] > ma) { ma = a[v]; ia = v; }
            if (b[v] > mb) { mb = b[v]; ib = v; }
        }
        double sa = 0, sb = 0;
        for (int v = 0; v < vocab; v++) { sa += exp(a[v] - ma); sb += exp(b[v] - mb); }
        const double la = log(sa), lb = log(sb);
        double k = 0;
        for (int v = 0; v < vocab; v++) {
            const double lpa = a[v] - ma - la, lpb = b[v] - mb - lb;
            k += exp(lpa) * (lpa - lpb);
        }
        kl += k;
        *top1 += ia == ib;
    }
    *kl_mean = kl / rows;
}

static int is_high_precision(const char *name) {
    return strstr(name, "-F32.") || strstr(name, "-F16.") || strstr(name, "-BF16.") || strstr(name, "-Q8_0.");
}

static void check_model(const char *dir, const char *gguf_name, const char *tokens, int force_ref) {
    char model[1024], ref_path[1024], out[1024], cmd[4096];
    snprintf(model, sizeof model, "%s/%s", dir, gguf_name);
    snprintf(ref_path, sizeof ref_path, "%s/%.*s.logits.f32", dir, (int)(strlen(gguf_name) - 5), gguf_name);
    if (!test_exists(ref_path)) return;
    snprintf(out, sizeof out, "/tmp/brisk-golden-%d-%s.f32", (int)getpid(), gguf_name);
    snprintf(cmd, sizeof cmd, "%s %s logits -m '%s' --tokens '%s' -o '%s' -t 2 2>/tmp/brisk-golden-%d.err",
             force_ref ? "BRISK_FORCE_REF=1" : "", BRISK_CLI_PATH, model, tokens, out, (int)getpid());
    int rc = system(cmd);
    CHECKF(rc == 0, "%s: brisk logits failed (rc %d): see /tmp/brisk-golden-%d.err", gguf_name, rc, (int)getpid());
    if (rc != 0) return;
    size_t nr = 0, ng = 0;
    float *ref = read_f32(ref_path, &nr), *got = read_f32(out, &ng);
    remove(out);
    CHECKF(ref && got && nr == ng && nr % 64 == 0, "%s: logits size %zu vs reference %zu", gguf_name, ng, nr);
    if (ref && got && nr == ng && nr % 64 == 0) {
        const int vocab = (int)(nr / 64);
        double kl;
        int top1;
        compare(ref, got, 64, vocab, &kl, &top1);
        const double limit = is_high_precision(gguf_name) ? 1e-4 : 1e-3;
        printf("%-26s %-4s KL %.3e (limit %.0e)  top-1 %d/64\n", gguf_name, force_ref ? "ref" : "best", kl, limit, top1);
        CHECKF(kl <= limit, "%s: mean KL %.3e > %.0e", gguf_name, kl, limit);
        CHECKF(top1 >= 63, "%s: top-1 agreement %d/64 < 63", gguf_name, top1);
    }
    free(ref);
    free(got);
}

static int run_dir(const char *dir) {
    char tokens[1024];
    snprintf(tokens, sizeof tokens, "%s/tokens64.i32", dir);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    char names[128][256];
    while ((e = readdir(d)) && n < 128) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".gguf")) snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < n; i++) {
        check_model(dir, names[i], tokens, 0);
        check_model(dir, names[i], tokens, 1);
    }
    return n;
}

int main(void) {
    char core[1024], shared[1024];
    test_source("tests/data/golden", core, sizeof core);
    test_shared("golden", shared, sizeof shared);
    int n = run_dir(core);
    CHECKF(n >= 1, "committed core golden model missing in %s", core);
    if (test_exists(shared)) {
        run_dir(shared);
    } else {
        printf("SKIP shared golden models: %s is absent (only the committed core subset ran)\n", shared);
    }
    /* the models from brisk's own golden generator (tests/data/golden-extra, if present) */
    char extra[1024];
    test_source("tests/data/golden-extra", extra, sizeof extra);
    if (test_exists(extra)) run_dir(extra);
    return test_finish();
}
