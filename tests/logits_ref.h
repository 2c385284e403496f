/* logits_ref.h: what test_golden and test_archs share to hold brisk's logits
 * against llama.cpp's (a .logits.f32 file of rows x vocab floats): the file
 * reader, the mean KL(ref || got) with top-1 agreement, and a suffix test for
 * the model stems. Include after test.h. */
#ifndef BRISK_TEST_LOGITS_REF_H
#define BRISK_TEST_LOGITS_REF_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file as floats; NULL when it cannot be read or is not a whole
 * number of floats. */
static float *read_f32(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *buf = NULL;
    long sz = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) > 0 && sz % (long)sizeof(float) == 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)sz)) && fread(buf, 1, (size_t)sz, f) == (size_t)sz) {
        *n = (size_t)sz / sizeof(float);
    } else {
        free(buf);
        buf = NULL;
    }
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

static int ends_with(const char *s, const char *tail) {
    const size_t ls = strlen(s), lt = strlen(tail);
    return ls >= lt && !strcmp(s + ls - lt, tail);
}

#endif
