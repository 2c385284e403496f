// peer-sampler-dry: llama.cpp's DRY sampler on recorded logits, for
// recording tests/data/sampler/cases-dry.txt (the same format as
// peer-sampler.c's cases.txt). C++ because llama.cpp takes token-sequence
// breakers only through llama_sampler_init_dry_testing (a C++ signature,
// exported by libllama); the text breakers of llama_sampler_init_dry need a
// vocabulary, and brisk's own brisk_dry_breakers derives the token sequences.
//
// usage: peer-sampler-dry LOGITS.f32 N_VOCAB [MODEL.gguf] > cases-dry.txt
// With a model (the shared pycode-target-f32.gguf), two more cases use
// llama.cpp's text breakers (llama_sampler_init_dry with the model's
// vocabulary; textbrk=K names the set, the same two sets as the test's) on
// a tokenized history, over vector 0 of LOGITS tiled to the model's
// vocabulary (l[i] = v0[i % N_VOCAB] * scale, + 5 for the history's tokens
// so that DRY's penalties move real probability): brisk_dry_breakers is then
// checked through the distribution DRY gives.
// build: c++ -O2 -o peer-sampler-dry peer-sampler-dry.cpp -I $PEER/src/include -I $PEER/src/ggml/include
//          -L $PEER/bin -lllama -Wl,-rpath,$PEER/bin
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "llama.h"

llama_sampler *llama_sampler_init_dry_testing(float dry_multiplier, float dry_base, int32_t dry_allowed_length,
                                              int32_t dry_penalty_last_n, const std::vector<std::vector<llama_token>> &seq_breakers);

struct dry_case {
    float mult, base;
    int allowed, last_n;
    std::vector<int> hist;                 // indices into the ranked tokens of vector 0 (0 = its best)
    std::vector<std::vector<int>> brk;     // likewise
    int vec;
    double scale;
};

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s LOGITS.f32 N_VOCAB\n", argv[0]); return 2; }
    const int nv = atoi(argv[2]);
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    std::vector<float> lg;
    float x;
    while (fread(&x, 4, 1, f) == 1) lg.push_back(x);
    fclose(f);
    std::vector<int> rank(nv);
    for (int i = 0; i < nv; i++) rank[i] = i;
    std::sort(rank.begin(), rank.end(), [&](int a, int b) { return lg[a] != lg[b] ? lg[a] > lg[b] : a < b; });
    std::vector<int> periodic;
    for (int i = 0; i < 40; i++) periodic.push_back(i % 7);
    std::vector<int> long_rep;
    for (int i = 0; i < 30; i++) long_rep.push_back(i % 2 ? 1 : 0);
    const dry_case cases[] = {
        {0.8f, 1.75f, 2, 64, {0, 1, 2, 3, 4, 0, 1, 2, 3}, {}, 0, 3},
        {0.8f, 1.75f, 2, 64, {0, 1, 2, 3, 4, 0, 1, 2, 3}, {{2}}, 0, 3},
        {0.8f, 1.75f, 1, 64, {0, 1, 2, 3, 4, 0, 1, 2, 3}, {{1, 2}, {5}}, 0, 3},
        {1.0f, 1.5f, 3, 16, periodic, {{0}}, 0, 3},
        {0.5f, 2.0f, 2, 32, periodic, {{6, 0, 9}, {8}}, 0, 3},   // breakers that never complete
        {2.0f, 3.0f, 2, 64, long_rep, {}, 0, 3},
        {0.8f, 1.75f, 0, 8, {5, 6, 5, 6, 7, 5, 6}, {}, 3, 2},
    };
    for (const dry_case &c : cases) {
        std::string hist, brk;
        for (size_t i = 0; i < c.hist.size(); i++) hist += (i ? "," : "") + std::to_string(rank[c.hist[i]]);
        std::vector<std::vector<llama_token>> breakers;
        for (const auto &b : c.brk) {
            std::vector<llama_token> t;
            brk += (brk.empty() ? "" : ",") + std::to_string(b.size());
            for (int r : b) { t.push_back(rank[r]); brk += "," + std::to_string(rank[r]); }
            breakers.push_back(t);
        }
        printf("case order=dry dry_mult=%g dry_base=%g dry_allowed=%d dry_last_n=%d history=%s%s%s scale=%g vecs=%d\n",
               c.mult, c.base, c.allowed, c.last_n, hist.c_str(), brk.empty() ? "" : " breakers=", brk.c_str(), c.scale, c.vec);
        llama_sampler *s = llama_sampler_init_dry_testing(c.mult, c.base, c.allowed, c.last_n, breakers);
        for (int h : c.hist) llama_sampler_accept(s, rank[h]);
        std::vector<llama_token_data> d(nv);
        for (int i = 0; i < nv; i++) d[i] = {i, (float)(lg[(size_t)c.vec * nv + i] * c.scale), 0};
        llama_token_data_array cur = {d.data(), (size_t)nv, -1, false};
        llama_sampler_apply(s, &cur);
        double mx = -INFINITY, sum = 0;
        for (size_t i = 0; i < cur.size; i++) mx = std::max(mx, (double)cur.data[i].logit);
        for (size_t i = 0; i < cur.size; i++) sum += exp(cur.data[i].logit - mx);
        std::vector<std::pair<int, double>> out;
        for (size_t i = 0; i < cur.size; i++) out.push_back({cur.data[i].id, exp(cur.data[i].logit - mx) / sum});
        std::sort(out.begin(), out.end());
        printf("step %d %zu -1\n", c.vec, out.size());
        for (auto &o : out) printf("%d %.9g\n", o.first, o.second);
        printf("end\n");
        llama_sampler_free(s);
    }
    if (argc > 3) {
        llama_backend_init();
        llama_model_params mp = llama_model_default_params();
        mp.vocab_only = true;
        llama_model *model = llama_model_load_from_file(argv[3], mp);
        if (!model) { fprintf(stderr, "cannot load %s\n", argv[3]); return 1; }
        const llama_vocab *vocab = llama_model_get_vocab(model);
        const int mv = llama_vocab_n_tokens(vocab);
        const char *sets[2][4] = {{"\n", ":", "\"", "*"}, {"return", "x *", "):", nullptr}};
        const int set_n[2] = {4, 3};
        // the second text puts a multi-token breaker ("x *" = "▁x" then "▁*") right before a repeat
        const std::string texts[2] = {"def f(x):\n    return x * 2\ndef g(x):\n    return x * 2\ndef f(x):\n    return x",
                                      "a = x * y + z\nb = x * y + z\nc = x * y +"};
        const int runs[3][2] = {{0, 0}, {1, 0}, {1, 1}};   // (breaker set, text)
        for (const auto &run : runs) {
            const int k = run[0];
            const std::string &text = texts[run[1]];
            std::vector<llama_token> hist(text.size() + 8);
            const int nh = llama_tokenize(vocab, text.c_str(), (int)text.size(), hist.data(), (int)hist.size(), false, false);
            hist.resize(nh);
            std::string hs;
            for (int i = 0; i < nh; i++) hs += (i ? "," : "") + std::to_string(hist[i]);
            printf("case order=dry dry_mult=0.8 dry_base=1.75 dry_allowed=1 dry_last_n=64 textbrk=%d history=%s scale=3 "
                   "tile=%d boost=5 vecs=0\n", k, hs.c_str(), mv);
            llama_sampler *s = llama_sampler_init_dry(vocab, 0.8f, 1.75f, 1, 64, sets[k], set_n[k]);
            for (llama_token t : hist) llama_sampler_accept(s, t);
            std::vector<llama_token_data> d(mv);
            for (int i = 0; i < mv; i++) d[i] = {i, (float)(lg[i % nv] * 3.0), 0};
            for (llama_token t : hist) d[t].logit = (float)(lg[t % nv] * 3.0) + 5.0f;   // boost: the history's tokens likely
            llama_token_data_array cur = {d.data(), (size_t)mv, -1, false};
            llama_sampler_apply(s, &cur);
            double mx = -INFINITY, sum = 0;
            for (size_t i = 0; i < cur.size; i++) mx = std::max(mx, (double)cur.data[i].logit);
            for (size_t i = 0; i < cur.size; i++) sum += exp(cur.data[i].logit - mx);
            std::vector<std::pair<int, double>> out;
            for (size_t i = 0; i < cur.size; i++) out.push_back({cur.data[i].id, exp(cur.data[i].logit - mx) / sum});
            std::sort(out.begin(), out.end());
            printf("step 0 %zu -1\n", out.size());
            for (auto &o : out) printf("%d %.9g\n", o.first, o.second);
            printf("end\n");
            llama_sampler_free(s);
        }
        llama_model_free(model);
    }
    return 0;
}
