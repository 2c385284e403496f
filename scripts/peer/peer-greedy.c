// peer-greedy: llama.cpp's greedy continuation as token ids, for recording
// test data (tests/data/greedy/). Not part of brisk; built against the peer
// (see ../../shared/tools/peer/setup.sh) by scripts/gen-greedy-golden.sh.
//
// usage: peer-greedy MODEL PROMPT_FILE N_PREDICT
// prints: prompt ids, a line "--", then the generated ids (stops at EOG).
// The prompt file's bytes are used as is (add_special, no special parsing).
#include <stdio.h>
#include <stdlib.h>
#include "llama.h"

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s MODEL PROMPT_FILE N\n", argv[0]); return 2; }
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 1; }
    fseek(f, 0, SEEK_END); long nb = ftell(f); fseek(f, 0, SEEK_SET);
    char *text = malloc(nb + 1);
    if (fread(text, 1, nb, f) != (size_t)nb) return 1;
    text[nb] = 0; fclose(f);
    int n_predict = atoi(argv[3]);

    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int cap = (int)nb + 16;
    llama_token *toks = malloc(sizeof(llama_token) * cap);
    int n = llama_tokenize(vocab, text, (int)nb, toks, cap, true, false);
    if (n < 0) return 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n + n_predict + 8; cp.n_batch = n; cp.n_threads = 2; cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    for (int i = 0; i < n; i++) printf("%d%c", toks[i], i + 1 < n ? ' ' : '\n');
    printf("--\n");
    struct llama_batch b = llama_batch_get_one(toks, n);
    if (llama_decode(ctx, b)) return 1;
    int nv = llama_vocab_n_tokens(vocab);
    for (int k = 0; k < n_predict; k++) {
        const float *lg = llama_get_logits_ith(ctx, -1);
        llama_token best = 0;
        for (int v = 1; v < nv; v++) if (lg[v] > lg[best]) best = v;
        if (llama_vocab_is_eog(vocab, best)) break;
        printf("%d ", best);
        b = llama_batch_get_one(&best, 1);
        if (llama_decode(ctx, b)) return 1;
    }
    printf("\n");
    llama_free(ctx); llama_model_free(model);
    return 0;
}
