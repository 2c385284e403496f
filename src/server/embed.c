/* embed: POST /v1/embeddings (see embed.h). Without a pooling_type key the
 * pooling is the last token's hidden state: the model is causal, so the last
 * position is the only one that has seen the whole input (llama.cpp's
 * --pooling last). */
#include "server/embed.h"
#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool bad(srv_error *e, const char *param, const char *msg) {
    srv_error_set(e, 400, "invalid_request_error", "invalid_value", param, "%s", msg);
    return false;
}

static bool parse_ids(json_t *arr, int32_t n_vocab, srv_embed_input *in, const char *param, srv_error *e) {
    const size_t n = json_array_size(arr);
    if (n == 0) return bad(e, param, "a token array must not be empty");
    if (!(in->ids = malloc(n * sizeof *in->ids))) {
        srv_error_set(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
        return false;
    }
    for (size_t k = 0; k < n; k++) {
        json_t *t = json_array_get(arr, k);
        const json_int_t v = json_is_integer(t) ? json_integer_value(t) : -1;
        if (!json_is_integer(t) || v < 0 || v >= n_vocab) {
            srv_error_set(e, 400, "invalid_request_error", "invalid_value", param,
                          "'%s' item %zu must be a token id in [0, %d)", param, k, n_vocab);
            return false;
        }
        in->ids[k] = (int32_t)v;
    }
    in->n_ids = (int32_t)n;
    return true;
}

static bool parse_text(json_t *s, srv_embed_input *in, const char *param, srv_error *e) {
    in->text = json_string_value(s);
    in->text_len = json_string_length(s);
    if (in->text_len == 0) return bad(e, param, "an input string must not be empty");
    return true;
}

bool srv_embed_parse(const uint8_t *body, size_t len, int32_t n_vocab, int32_t n_embd, srv_embed_req *out, srv_error *e) {
    memset(out, 0, sizeof *out);
    json_error_t je;
    out->root = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
    if (!out->root) {
        srv_error_set(e, 400, "invalid_request_error", "invalid_json", NULL, "the body is not valid JSON: %s (line %d)", je.text, je.line);
        return false;
    }
    if (!json_is_object(out->root)) return bad(e, NULL, "the body must be a JSON object");
    json_t *fmt = json_object_get(out->root, "encoding_format");
    if (fmt && !json_is_null(fmt)) {
        const char *f = json_string_value(fmt);
        if (!f || (strcmp(f, "float") && strcmp(f, "base64"))) return bad(e, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
        out->base64 = !strcmp(f, "base64");
    }
    json_t *dim = json_object_get(out->root, "dimensions");
    if (dim && !json_is_null(dim) && (!json_is_integer(dim) || json_integer_value(dim) != n_embd)) {
        srv_error_set(e, 400, "invalid_request_error", "invalid_value", "dimensions",
                      "'dimensions' must be the model's width %d (vectors are not shortened)", n_embd);
        return false;
    }
    json_t *input = json_object_get(out->root, "input");
    if (!input || json_is_null(input)) return bad(e, "input", "'input' is required: a string, an array of strings, or token-id arrays");
    /* one input (a string, or one token array) or a list of them */
    const bool single = json_is_string(input) || (json_is_array(input) && json_array_size(input) > 0 && json_is_integer(json_array_get(input, 0)));
    if (!single && !json_is_array(input)) return bad(e, "input", "'input' must be a string, an array of strings, or token-id arrays");
    const size_t n = single ? 1 : json_array_size(input);
    if (n == 0) return bad(e, "input", "'input' must not be an empty array");
    if (n > SRV_EMBED_MAX_INPUTS) {
        srv_error_set(e, 400, "invalid_request_error", "invalid_value", "input", "'input' holds %zu items; at most %d per request", n,
                      SRV_EMBED_MAX_INPUTS);
        return false;
    }
    if (!(out->in = calloc(n, sizeof *out->in))) {
        srv_error_set(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
        return false;
    }
    out->n_in = (int32_t)n;
    out->single = single;
    if (single) return json_is_string(input) ? parse_text(input, &out->in[0], "input", e) : parse_ids(input, n_vocab, &out->in[0], "input", e);
    for (size_t k = 0; k < n; k++) {
        char param[64];
        snprintf(param, sizeof param, "input[%zu]", k);
        json_t *it = json_array_get(input, k);
        bool ok;
        if (json_is_string(it)) ok = parse_text(it, &out->in[k], param, e);
        else if (json_is_array(it)) ok = parse_ids(it, n_vocab, &out->in[k], param, e);
        else ok = bad(e, param, "each item of 'input' must be a string or an array of token ids");
        if (!ok) return false;
    }
    return true;
}

void srv_embed_req_free(srv_embed_req *r) {
    if (!r) return;
    for (int32_t k = 0; k < r->n_in; k++) free(r->in[k].ids);
    free(r->in);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}

int srv_embed_pooling_of(int64_t key) {
    if (key == -1 || key == 0 || key == SRV_POOL_LAST) return SRV_POOL_LAST;
    if (key == SRV_POOL_MEAN || key == SRV_POOL_CLS) return (int)key;
    return -1;
}

/* mean pooling reads every token's row: chunks of at most 64 rows keep the
 * context's logits buffer small */
int32_t srv_embed_rows(int pooling, int32_t n_batch) { return pooling == SRV_POOL_MEAN ? (n_batch < 64 ? n_batch : 64) : 1; }

brisk_status srv_embed_tokens(brisk_context *c, int32_t n_embd, int pooling, const int32_t *ids, int32_t n, float *out, brisk_error *err) {
    if (pooling != SRV_POOL_MEAN && pooling != SRV_POOL_CLS && pooling != SRV_POOL_LAST)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "pooling type %d is not supported", pooling);
    if (n <= 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "no tokens to embed");
    if (n > brisk_context_n_ctx(c))
        return brisk_fail(err, BRISK_ERR_CAPACITY, "%d tokens; the embedding context holds %d", n, brisk_context_n_ctx(c));
    brisk_status st = brisk_seq_truncate(c, 0, 0, err);
    if (st) return st;
    const int32_t nb = pooling == SRV_POOL_MEAN ? srv_embed_rows(pooling, brisk_context_n_batch(c)) : brisk_context_n_batch(c);
    double *sum = calloc((size_t)n_embd, sizeof *sum);
    int32_t *pos = malloc((size_t)nb * sizeof *pos), *seq = calloc((size_t)nb, sizeof *seq);
    uint8_t *want = calloc((size_t)nb, 1);
    if (!pos || !seq || !want || !sum) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int32_t at = 0; at < n && !st; at += nb) {
        const int32_t m = n - at < nb ? n - at : nb;
        for (int32_t k = 0; k < m; k++) {
            pos[k] = at + k;
            want[k] = pooling == SRV_POOL_MEAN || at + k == (pooling == SRV_POOL_CLS ? 0 : n - 1);
        }
        const brisk_batch b = {.n_tokens = m, .token = ids + at, .pos = pos, .seq = seq, .logits = want};
        if ((st = brisk_decode(c, &b, err))) break;
        for (int32_t r = 0; r < brisk_n_logits(c); r++) {
            const float *h = brisk_get_hidden(c, r);
            for (int32_t k = 0; k < n_embd; k++) sum[k] += h[k];
        }
    }
    if (!st) {
        const double scale = pooling == SRV_POOL_MEAN ? 1.0 / n : 1.0;
        double ss = 0.0;
        for (int32_t k = 0; k < n_embd; k++) {
            sum[k] *= scale;
            ss += sum[k] * sum[k];
        }
        /* llama.cpp's euclidean normalisation: a zero vector stays zero */
        const double inv = ss > 0.0 ? 1.0 / sqrt(ss) : 0.0;
        for (int32_t k = 0; k < n_embd; k++) out[k] = (float)(sum[k] * inv);
    }
done:
    free(sum);
    free(pos);
    free(seq);
    free(want);
    brisk_error ignored;
    brisk_seq_truncate(c, 0, 0, &ignored);
    return st;
}

static char *base64_of(const float *v, int32_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t nbytes = (size_t)n * 4;
    unsigned char *b = malloc(nbytes ? nbytes : 1);
    char *s = malloc((nbytes + 2) / 3 * 4 + 1);
    if (!b || !s) {
        free(b);
        free(s);
        return NULL;
    }
    for (int32_t k = 0; k < n; k++) {   /* little-endian float32, whatever the host */
        uint32_t u;
        memcpy(&u, &v[k], 4);
        for (int j = 0; j < 4; j++) b[4 * (size_t)k + (size_t)j] = (unsigned char)(u >> (8 * j));
    }
    size_t o = 0;
    for (size_t i = 0; i < nbytes; i += 3) {
        const uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < nbytes ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < nbytes ? b[i + 2] : 0);
        s[o++] = tab[x >> 18 & 63];
        s[o++] = tab[x >> 12 & 63];
        s[o++] = i + 1 < nbytes ? tab[x >> 6 & 63] : '=';
        s[o++] = i + 2 < nbytes ? tab[x & 63] : '=';
    }
    s[o] = 0;
    free(b);
    return s;
}

json_t *srv_embed_item(int32_t index, const float *v, int32_t n, bool base64) {
    json_t *emb;
    if (base64) {
        char *s = base64_of(v, n);
        emb = s ? json_string(s) : NULL;
        free(s);
    } else {
        emb = json_array();
        for (int32_t k = 0; emb && k < n; k++)
            if (json_array_append_new(emb, json_real(v[k]))) {
                json_decref(emb);
                emb = NULL;
            }
    }
    if (!emb) return NULL;
    return json_pack("{s:s, s:i, s:o}", "object", "embedding", "index", index, "embedding", emb);
}
