/* embed: POST /v1/embeddings — the request (OpenAI's shape), the pooled and
 * L2-normalised vector of each input, and the response. */
#ifndef BRISK_SERVER_EMBED_H
#define BRISK_SERVER_EMBED_H

#include "brisk.h"
#include "server/request.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define SRV_EMBED_MAX_INPUTS 256

/* How a sequence's hidden states become one vector: llama.cpp's pooling_type
 * values (the GGUF key ARCH.pooling_type). */
typedef enum srv_pooling { SRV_POOL_MEAN = 1, SRV_POOL_CLS = 2, SRV_POOL_LAST = 3 } srv_pooling;
/* The pooling for a model's ARCH.pooling_type (-1 = the key is absent): none
 * or absent is last-token; -1 for a value not supported (rank, unknown). */
int srv_embed_pooling_of(int64_t key);

/* One input: text (borrowed from the parsed body, owned by req->root) or token ids. */
typedef struct srv_embed_input {
    const char *text;       /* NULL: ids */
    size_t text_len;
    int32_t *ids;           /* malloc'd when text is NULL */
    int32_t n_ids;
} srv_embed_input;

typedef struct srv_embed_req {
    json_t *root;           /* the parsed body (holds the texts) */
    srv_embed_input *in;
    int32_t n_in;
    bool single;            /* input was one item, not a list: errors name "input", not "input[i]" */
    bool base64;            /* encoding_format "base64": little-endian float32, base64 */
} srv_embed_req;

/* Parse and validate a body. n_vocab bounds token ids, n_embd is the only
 * `dimensions` accepted. False with e set (400 naming the field) on bad input. */
bool srv_embed_parse(const uint8_t *body, size_t len, int32_t n_vocab, int32_t n_embd, srv_embed_req *out, srv_error *e);
void srv_embed_req_free(srv_embed_req *r);

/* The embedding of one sequence: its tokens' final hidden states (the
 * output-normed rows the LM head reads) pooled (last token, first token or
 * the mean), L2-normalised, into out[n_embd]. The context needs
 * n_outputs_max >= srv_embed_rows(pooling, its n_batch).
 * Sequence 0 of c is cleared first and afterwards, so an input's vector does
 * not depend on what was embedded before it. */
brisk_status srv_embed_tokens(brisk_context *c, int32_t n_embd, int pooling, const int32_t *ids, int32_t n, float *out, brisk_error *err);
int32_t srv_embed_rows(int pooling, int32_t n_batch);

/* {"object":"embedding","index":i,"embedding":[...] or "base64"} (NULL when out of memory). */
json_t *srv_embed_item(int32_t index, const float *v, int32_t n, bool base64);

#endif
