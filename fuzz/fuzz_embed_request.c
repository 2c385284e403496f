/* fuzz_embed_request: libFuzzer target for the /v1/embeddings request parser
 * (src/server/embed.c) and its base64 item writer. Checks: no crash, leak or
 * UB; a refusal is a 4xx/5xx with a message; an accepted request has 1..256
 * inputs, each a non-empty text or non-empty in-range token ids; and an item
 * built from the ids (as floats) in either encoding is a well-formed object. */
#include "fuzz_check.h"
#include "server/embed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_VOCAB = 1000, N_EMBD = 16 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    srv_embed_req q;
    srv_error e;
    if (!srv_embed_parse(data, size, N_VOCAB, N_EMBD, &q, &e)) {
        FUZZ_CHECK(e.http >= 400 && e.http < 600 && e.message[0]);
        srv_embed_req_free(&q);
        return 0;
    }
    FUZZ_CHECK(q.n_in >= 1 && q.n_in <= SRV_EMBED_MAX_INPUTS);
    for (int32_t k = 0; k < q.n_in; k++) {
        const srv_embed_input *in = &q.in[k];
        if (in->text) {
            FUZZ_CHECK(in->text_len > 0);
            continue;
        }
        FUZZ_CHECK(in->ids && in->n_ids > 0);
        float v[N_EMBD] = {0};
        for (int32_t j = 0; j < in->n_ids; j++) {
            FUZZ_CHECK(in->ids[j] >= 0 && in->ids[j] < N_VOCAB);
            v[j % N_EMBD] = (float)in->ids[j];
        }
        json_t *item = srv_embed_item(k, v, N_EMBD, q.base64);
        FUZZ_CHECK(item && json_is_object(item));
        json_t *emb = json_object_get(item, "embedding");
        if (q.base64) FUZZ_CHECK(json_is_string(emb) && json_string_length(emb) == (N_EMBD * 4 + 2) / 3 * 4);
        else FUZZ_CHECK(json_array_size(emb) == N_EMBD);
        json_decref(item);
    }
    srv_embed_req_free(&q);
    return 0;
}
