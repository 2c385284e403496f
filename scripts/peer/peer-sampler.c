// peer-sampler: llama.cpp's sampler stages on recorded logits, for recording
// test data (tests/data/sampler/). Not part of brisk; links the peer's
// libllama (see ../../shared/tools/peer/setup.sh) and needs no model: the
// stages used here take no vocabulary.
//
// usage: peer-sampler LOGITS.f32 N_VOCAB > cases.txt
// LOGITS.f32: float32 [n][N_VOCAB]. For each case of the table below it runs
// the named llama.cpp samplers in order (llama_sampler_apply, one after the
// other, as a chain does) over one or more of the vectors and prints what
// survives: "step VEC N ACCEPTED" then N lines "ID P", P the softmax of the
// surviving logits (double), ids ascending. Mirostat v2 draws with its own
// RNG; the drawn token is ACCEPTED (-1 for other cases) and brisk accepts it
// before the next step, so the update of mu is checked too.
//
// Case keys (brisk's test reads the same line): order=NAME;NAME (llama.cpp's
// common names), vecs=I,J, scale=X (logits multiplied), temp, top_k, top_p,
// min_p, typ_p, top_n_sigma, xtc_p, xtc_t, min_keep, mirostat=2, tau, eta,
// rep, freq, pres, last_n, history=T,T (accepted first), bias=T:B,T:B.
// build: cc -O2 -o peer-sampler peer-sampler.c -I $PEER/src/include -I $PEER/src/ggml/include
//          -L $PEER/bin -lllama -Wl,-rpath,$PEER/bin
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

static const char *cases[] = {
    "order=top_k top_k=40 vecs=0,1",
    "order=top_k top_k=7 scale=3 vecs=2",
    "order=top_p top_p=0.9 scale=3 vecs=0,1,2,3",
    "order=top_p top_p=0.5 min_keep=4 scale=4 vecs=1",
    "order=min_p min_p=0.1 scale=3 vecs=0,1,2,3",
    "order=min_p min_p=0.3 min_keep=6 scale=4 vecs=2",
    "order=typ_p typ_p=0.9 vecs=0",
    "order=typ_p typ_p=0.5 scale=3 vecs=0,1,2,3",
    "order=typ_p typ_p=0.2 min_keep=5 scale=4 vecs=3",
    "order=top_n_sigma top_n_sigma=1 vecs=0,1,2,3",
    "order=top_n_sigma top_n_sigma=2.5 scale=3 vecs=0,2",
    "order=xtc xtc_p=1 xtc_t=0.1 scale=4 vecs=2,3",
    "order=xtc xtc_p=1 xtc_t=0.05 min_keep=3 scale=5 vecs=0",
    "order=temperature temp=0.7 vecs=3",
    "order=temperature temp=0 vecs=1",
    "order=temperature;top_p;min_p temp=1.5 top_p=0.8 min_p=0.05 scale=3 vecs=0,1",
    "order=penalties rep=1.3 freq=0.2 pres=0.3 last_n=8 history=HIST vecs=0",
    "order=top_k bias=BIAS top_k=10 scale=3 vecs=0",
    "order=penalties;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature rep=1.1 last_n=16 history=HIST "
    "top_n_sigma=3 top_k=60 typ_p=0.95 top_p=0.95 min_p=0.02 xtc_p=1 xtc_t=0.1 temp=0.8 scale=3 vecs=0,1,2,3",
    "order=penalties;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature top_k=40 top_p=0.95 min_p=0.05 temp=0 "
    "scale=3 vecs=2",
    "mirostat=2 tau=3 eta=0.1 temp=0.8 scale=3 vecs=0,1,2,3,0,1",
    "mirostat=2 tau=5 eta=0.3 temp=1 scale=2 vecs=3,2,1,0",
};

static const char *get(const char *spec, const char *key, char *buf, size_t cap) {
    size_t kl = strlen(key);
    for (const char *q = spec; (q = strstr(q, key)); q += kl) {
        if ((q == spec || q[-1] == ' ') && q[kl] == '=') {
            const char *v = q + kl + 1, *e = strchr(v, ' ');
            size_t n = e ? (size_t)(e - v) : strlen(v);
            if (n >= cap) n = cap - 1;
            memcpy(buf, v, n);
            buf[n] = 0;
            return buf;
        }
    }
    return NULL;
}

static double getf(const char *spec, const char *key, double def) {
    char b[64];
    return get(spec, key, b, sizeof b) ? atof(b) : def;
}

static int cmp_desc(const void *a, const void *b) {
    const llama_token_data *x = a, *y = b;
    return x->logit != y->logit ? (x->logit > y->logit ? -1 : 1) : x->id - y->id;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s LOGITS.f32 N_VOCAB\n", argv[0]); return 2; }
    const int nv = atoi(argv[2]);
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    fseek(f, 0, SEEK_END); long nb = ftell(f); fseek(f, 0, SEEK_SET);
    const int nvec = (int)(nb / 4 / nv);
    float *lg = malloc((size_t)nb);
    if (fread(lg, 1, (size_t)nb, f) != (size_t)nb) return 1;
    fclose(f);
    llama_token_data *d = malloc(sizeof *d * nv), *s = malloc(sizeof *s * nv);
    // history: the 6 best tokens of vector 0 (so the penalties bite); bias: +-inf/+ on vector 0's best
    for (int i = 0; i < nv; i++) s[i] = (llama_token_data){i, lg[i], 0};
    qsort(s, nv, sizeof *s, cmp_desc);
    char hist[128], bias[128];
    snprintf(hist, sizeof hist, "%d,%d,%d,%d,%d,%d,%d", s[0].id, s[1].id, s[2].id, s[0].id, s[3].id, s[5].id, s[0].id);
    snprintf(bias, sizeof bias, "%d:-inf,%d:-1.5,%d:2.5", s[0].id, s[1].id, s[20].id);

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char spec[1024], tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", cases[c]);
        char *h = strstr(tmp, "HIST"), *b = strstr(tmp, "BIAS");
        if (h) { *h = 0; snprintf(spec, sizeof spec, "%s%s%s", tmp, hist, h + 4); }
        else if (b) { *b = 0; snprintf(spec, sizeof spec, "%s%s%s", tmp, bias, b + 4); }
        else snprintf(spec, sizeof spec, "%s", tmp);
        printf("case %s\n", spec);

        struct llama_sampler *chain[16];
        int n = 0, mk = (int)getf(spec, "min_keep", 0);
        char buf[512];
        if (get(spec, "bias", buf, sizeof buf)) {
            llama_logit_bias lb[16];
            int nl = 0;
            for (char *t = strtok(buf, ","); t && nl < 16; t = strtok(NULL, ",")) {
                char *colon = strchr(t, ':');
                lb[nl].token = atoi(t);
                lb[nl].bias = strcmp(colon + 1, "-inf") == 0 ? -INFINITY : (float)atof(colon + 1);
                nl++;
            }
            chain[n++] = llama_sampler_init_logit_bias(nv, nl, lb);
        }
        if (getf(spec, "mirostat", 0) == 2) {
            chain[n++] = llama_sampler_init_temp((float)getf(spec, "temp", 1));
            chain[n++] = llama_sampler_init_mirostat_v2(1234, (float)getf(spec, "tau", 5), (float)getf(spec, "eta", 0.1));
        } else if (get(spec, "order", buf, sizeof buf)) {
            for (char *t = strtok(buf, ";"); t; t = strtok(NULL, ";")) {
                if (!strcmp(t, "top_k")) chain[n++] = llama_sampler_init_top_k((int)getf(spec, "top_k", 0));
                else if (!strcmp(t, "top_p")) chain[n++] = llama_sampler_init_top_p((float)getf(spec, "top_p", 1), mk);
                else if (!strcmp(t, "min_p")) chain[n++] = llama_sampler_init_min_p((float)getf(spec, "min_p", 0), mk);
                else if (!strcmp(t, "typ_p")) chain[n++] = llama_sampler_init_typical((float)getf(spec, "typ_p", 1), mk);
                else if (!strcmp(t, "top_n_sigma")) chain[n++] = llama_sampler_init_top_n_sigma((float)getf(spec, "top_n_sigma", -1));
                else if (!strcmp(t, "xtc")) chain[n++] = llama_sampler_init_xtc((float)getf(spec, "xtc_p", 0), (float)getf(spec, "xtc_t", 0.1), mk, 1234);
                else if (!strcmp(t, "temperature")) chain[n++] = llama_sampler_init_temp((float)getf(spec, "temp", 1));
                else if (!strcmp(t, "penalties"))
                    chain[n++] = llama_sampler_init_penalties(nv, (int)getf(spec, "last_n", 64), (float)getf(spec, "rep", 1),
                                                              (float)getf(spec, "freq", 0), (float)getf(spec, "pres", 0));
                else { fprintf(stderr, "unknown sampler %s\n", t); return 1; }
            }
        }
        if (get(spec, "history", buf, sizeof buf))
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
                for (int i = 0; i < n; i++) llama_sampler_accept(chain[i], atoi(t));
        const double scale = getf(spec, "scale", 1);
        get(spec, "vecs", buf, sizeof buf);
        for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
            const int v = atoi(t);
            if (v >= nvec) { fprintf(stderr, "vector %d of %d\n", v, nvec); return 1; }
            for (int i = 0; i < nv; i++) d[i] = (llama_token_data){i, (float)(lg[(size_t)v * nv + i] * scale), 0};
            llama_token_data_array cur = {d, (size_t)nv, -1, false};
            for (int i = 0; i < n; i++) llama_sampler_apply(chain[i], &cur);
            int m = 0;
            double mx = -INFINITY, sum = 0;
            for (size_t i = 0; i < cur.size; i++)
                if (cur.data[i].logit != -INFINITY) { s[m++] = cur.data[i]; mx = fmax(mx, cur.data[i].logit); }
            for (int i = 0; i < m; i++) sum += exp(s[i].logit - mx);
            const int acc = cur.selected >= 0 ? cur.data[cur.selected].id : -1;
            for (int i = 0; i < m; i++) s[i].p = 0, s[i].logit = (float)(exp(s[i].logit - mx) / sum);   // logit field: p
            for (int i = 1; i < m; i++)   // by id
                for (int j = i; j > 0 && s[j - 1].id > s[j].id; j--) { llama_token_data x = s[j]; s[j] = s[j - 1]; s[j - 1] = x; }
            printf("step %d %d %d\n", v, m, acc);
            // exp/sum computed in double above; print its float with 9 digits
            for (int i = 0; i < m; i++) printf("%d %.9g\n", s[i].id, s[i].logit);
            if (acc >= 0)   // the draw goes to the next step as an accept (llama.cpp's chain accepts it too)
                for (int i = 0; i < n; i++) llama_sampler_accept(chain[i], acc);
        }
        for (int i = 0; i < n; i++) llama_sampler_free(chain[i]);
        printf("end\n");
    }
    return 0;
}
