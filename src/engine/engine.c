/* engine: the public API of include/brisk.h — models, vocabulary access,
 * contexts (KV cache + forward scratch), batches and logits. The CLI and
 * (later) the server are thin clients of these functions. */
#include "brisk.h"
#include "base/base.h"
#include "base/pool.h"
#include "gguf/gguf.h"
#include "kv/kv.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

struct brisk_model {
    brisk_model_data *data;
    brisk_vocab *vocab;
};

struct brisk_context {
    const brisk_model *model;
    brisk_kv *kv;
    brisk_forward *fwd;
    int32_t n_batch;
    float *logits;          /* [n_batch][n_vocab] */
    int32_t n_logits;
    size_t scratch_bytes;
    /* the last decode's tokens, for brisk_seq_keep_path: [n_batch] each */
    int32_t last_n;
    int32_t *last_seq, *last_par, *last_rank;   /* parent: batch index or -1; rank: slot - base */
    int32_t *path_rel;      /* [n_batch] scratch for keep_path */
    int32_t *seq_last;      /* [n_seq] scratch: the latest batch index per sequence */
    int32_t *tree_n;        /* [n_seq] tokens the last decode added to the sequence */
    uint8_t *tree_ok;       /* [n_seq] 1 = the last decode had tokens of it and nothing changed it since */
};

/* ---- models ------------------------------------------------------------------------------ */

brisk_status brisk_model_load(const char *path, brisk_model **out, brisk_error *err) {
    *out = NULL;
    brisk_gguf *g = NULL;
    brisk_status st = brisk_gguf_open(path, &g, err);
    if (st) return st;
    brisk_model *m = calloc(1, sizeof *m);
    if (!m) {
        brisk_gguf_close(g);
        return brisk_fail(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    }
    /* the vocabulary copies what it needs, so load it before the model data takes g */
    if ((st = brisk_vocab_load(g, &m->vocab, err))) {
        brisk_gguf_close(g);
        brisk_error_prefix(err, "%s", path);
        goto fail;
    }
    if ((st = brisk_model_data_load(g, &m->data, err))) {
        brisk_error_prefix(err, "%s", path);
        goto fail;
    }
    if (brisk_vocab_size(m->vocab) > m->data->hp.n_vocab) {
        st = brisk_fail(err, BRISK_ERR_FORMAT, "%s: vocabulary has %d tokens but token_embd.weight has %d rows", path,
                        brisk_vocab_size(m->vocab), m->data->hp.n_vocab);
        goto fail;
    }
    *out = m;
    return BRISK_OK;
fail:
    brisk_model_free(m);
    return st;
}

void brisk_model_free(brisk_model *m) {
    if (!m) return;
    brisk_model_data_free(m->data);
    brisk_vocab_free(m->vocab);
    free(m);
}

void brisk_model_get_info(const brisk_model *m, brisk_model_info *out) {
    const brisk_hparams *hp = &m->data->hp;
    *out = (brisk_model_info){.arch = hp->arch_name, .n_vocab = hp->n_vocab, .n_embd = hp->n_embd, .n_layer = hp->n_layer,
                              .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim, .n_ff = hp->n_ff,
                              .n_ctx_train = hp->n_ctx_train, .n_params = m->data->n_params, .weight_bytes = m->data->weight_bytes};
}

/* ---- vocabulary ------------------------------------------------------------------------------ */

int32_t brisk_token_bos(const brisk_model *m) { return brisk_vocab_bos(m->vocab); }
int32_t brisk_token_eos(const brisk_model *m) { return brisk_vocab_eos(m->vocab); }
bool brisk_token_is_eog(const brisk_model *m, int32_t id) { return brisk_vocab_is_eog(m->vocab, id); }
bool brisk_vocab_adds_bos(const brisk_model *m) { return brisk_vocab_add_bos(m->vocab); }
const char *brisk_token_text(const brisk_model *m, int32_t id, size_t *len) { return brisk_vocab_token_text(m->vocab, id, len); }

const char *brisk_model_chat_template(const brisk_model *m, size_t *len) {
    brisk_str s;
    bool found = false;
    if (brisk_gguf_get_str(m->data->gguf, "tokenizer.chat_template", &s, &found, NULL) != BRISK_OK || !found) return NULL;
    *len = s.len;
    return s.ptr;
}

brisk_status brisk_tokenize_text(const brisk_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                                 int32_t **ids, size_t *n_ids, brisk_error *err) {
    brisk_tokenize_opts o = {.add_special = add_special, .parse_special = parse_special};
    return brisk_tokenize(m->vocab, text, len, o, ids, n_ids, err);
}

struct brisk_text_stream {
    brisk_detok *d;
    char buf[1024];
};

brisk_status brisk_text_stream_init(const brisk_model *m, brisk_text_stream **out, brisk_error *err) {
    *out = NULL;
    brisk_text_stream *s = calloc(1, sizeof *s);
    if (!s) return brisk_fail(err, BRISK_ERR_NOMEM, "text stream: out of memory");
    brisk_status st = brisk_detok_init(&s->d, m->vocab, err);
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    return BRISK_OK;
}

void brisk_text_stream_free(brisk_text_stream *s) {
    if (!s) return;
    brisk_detok_free(s->d);
    free(s);
}

brisk_status brisk_text_stream_push(brisk_text_stream *s, int32_t id, const char **text, size_t *len, brisk_error *err) {
    *text = s->buf;
    *len = 0;
    return brisk_detok_push(s->d, id, s->buf, sizeof s->buf, len, err);
}

void brisk_text_stream_flush(brisk_text_stream *s, const char **text, size_t *len) {
    *text = s->buf;
    *len = brisk_detok_flush(s->d, s->buf, sizeof s->buf);
}

/* ---- contexts ---------------------------------------------------------------------------------- */

brisk_context_params brisk_context_default_params(void) {
    return (brisk_context_params){.n_ctx = 0, .n_batch = 0, .n_seq = 1, .n_threads = 0, .attn_window = 0, .attn_sink = 0};
}

brisk_status brisk_context_init(const brisk_model *m, const brisk_context_params *p, brisk_context **out, brisk_error *err) {
    *out = NULL;
    const brisk_hparams *hp = &m->data->hp;
    const int32_t n_ctx = p->n_ctx > 0 ? p->n_ctx : hp->n_ctx_train;
    const int32_t n_seq = p->n_seq > 0 ? p->n_seq : 1;
    const int32_t n_batch = p->n_batch > 0 ? p->n_batch : BRISK_MIN(512, n_ctx);
    const int n_threads = p->n_threads > 0 ? p->n_threads : brisk_cpu_count();
    if (p->n_ctx < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "context size %d must not be negative", p->n_ctx);
    if (p->n_batch < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch size %d must not be negative", p->n_batch);
    if (p->n_threads < 0 || n_threads > 1024) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "threads %d out of range [1, 1024]", p->n_threads);
    if (n_batch > 65536) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch size %d out of range [1, 65536]", n_batch);
    if (p->attn_window < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "attention window %d must not be negative", p->attn_window);
    if (p->attn_sink < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "attention sink %d must not be negative", p->attn_sink);
    if (p->attn_sink > 0 && p->attn_window == 0)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "attention sink %d given without an attention window", p->attn_sink);

    /* logits buffer: check the size before allocating */
    size_t logit_bytes;
    if (!brisk_mul_size((size_t)n_batch * sizeof(float), (size_t)hp->n_vocab, &logit_bytes))
        return brisk_fail(err, BRISK_ERR_CAPACITY, "logits for batch %d overflow", n_batch);

    brisk_context *c = calloc(1, sizeof *c);
    if (!c) return brisk_fail(err, BRISK_ERR_NOMEM, "context: out of memory");
    c->model = m;
    c->n_batch = n_batch;
    brisk_status st = brisk_kv_init(&c->kv, hp->n_layer, hp->n_head_kv, hp->head_dim, n_ctx, n_seq, err);
    if (st) goto fail;
    if ((st = brisk_forward_init(&c->fwd, m->data, n_batch, n_ctx, n_threads, err))) goto fail;
    brisk_forward_set_window(c->fwd, p->attn_window, p->attn_sink);
    c->logits = malloc(logit_bytes);
    if (!c->logits) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "context: cannot allocate %.1f MiB of logits", (double)logit_bytes / 1048576.0);
        goto fail;
    }
    c->last_seq = malloc((size_t)n_batch * sizeof(int32_t));
    c->last_par = malloc((size_t)n_batch * sizeof(int32_t));
    c->last_rank = malloc((size_t)n_batch * sizeof(int32_t));
    c->path_rel = malloc((size_t)n_batch * sizeof(int32_t));
    c->seq_last = malloc((size_t)n_seq * sizeof(int32_t));
    c->tree_n = malloc((size_t)n_seq * sizeof(int32_t));
    c->tree_ok = calloc((size_t)n_seq, 1);
    if (!c->last_seq || !c->last_par || !c->last_rank || !c->path_rel || !c->seq_last || !c->tree_n || !c->tree_ok) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "context: out of memory");
        goto fail;
    }
    c->scratch_bytes = brisk_forward_bytes(c->fwd) + logit_bytes + (size_t)n_batch * 4 * sizeof(int32_t) +
                       (size_t)n_seq * (2 * sizeof(int32_t) + 1);
    *out = c;
    return BRISK_OK;
fail:
    brisk_context_free(c);
    return st;
}

void brisk_context_free(brisk_context *c) {
    if (!c) return;
    brisk_forward_free(c->fwd);
    brisk_kv_free(c->kv);
    free(c->logits);
    free(c->last_seq); free(c->last_par); free(c->last_rank); free(c->path_rel); free(c->seq_last); free(c->tree_n); free(c->tree_ok);
    free(c);
}

void brisk_context_memory(const brisk_context *c, size_t *kv_bytes, size_t *scratch_bytes) {
    size_t kvb = 0;
    brisk_kv_plan(c->kv->n_layer, c->kv->row, c->kv->n_ctx, c->kv->n_seq, &kvb);
    if (kv_bytes) *kv_bytes = kvb;
    if (scratch_bytes) *scratch_bytes = c->scratch_bytes;
}

int32_t brisk_context_n_ctx(const brisk_context *c) { return c->kv->n_ctx; }
int32_t brisk_context_n_batch(const brisk_context *c) { return c->n_batch; }
const char *brisk_context_isa(const brisk_context *c) { return brisk_forward_isa(c->fwd); }

brisk_status brisk_decode(brisk_context *c, const brisk_batch *b, brisk_error *err) { return brisk_decode_tree(c, b, NULL, err); }

brisk_status brisk_decode_tree(brisk_context *c, const brisk_batch *b, const int32_t *parent, brisk_error *err) {
    if (!b || !b->token || !b->pos || !b->seq || !b->logits)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch: token, pos, seq and logits arrays are required");
    c->n_logits = 0;
    brisk_fwd_batch fb = {.n = b->n_tokens, .token = b->token, .pos = b->pos, .seq = b->seq, .want = b->logits, .parent = parent};
    brisk_status st = brisk_forward_run(c->fwd, c->kv, &fb, c->logits, err);
    if (st) return st;
    for (int32_t i = 0; i < b->n_tokens; i++) c->n_logits += b->logits[i] != 0;
    /* record the batch's tree (a chain without parents) for keep_path; a
     * refused decode leaves the previous record */
    memset(c->tree_ok, 0, (size_t)c->kv->n_seq);
    for (int32_t i = 0; i < b->n_tokens; i++) c->seq_last[b->seq[i]] = -1;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const int32_t s = b->seq[i];
        c->last_seq[i] = s;
        c->last_par[i] = parent ? parent[i] : c->seq_last[s];
        c->last_rank[i] = c->seq_last[s] < 0 ? 0 : c->last_rank[c->seq_last[s]] + 1;
        c->seq_last[s] = i;
        c->tree_ok[s] = 1;
        c->tree_n[s] = c->last_rank[i] + 1;
    }
    c->last_n = b->n_tokens;
    return BRISK_OK;
}

const float *brisk_get_logits(const brisk_context *c, int32_t i) {
    if (i < 0 || i >= c->n_logits) return NULL;
    return c->logits + (size_t)i * (size_t)c->model->data->hp.n_vocab;
}

int32_t brisk_n_logits(const brisk_context *c) { return c->n_logits; }

int32_t brisk_seq_len(const brisk_context *c, int32_t seq) {
    if (seq < 0 || seq >= c->kv->n_seq) return -1;
    return c->kv->seqs[seq].len;
}

brisk_status brisk_seq_truncate(brisk_context *c, int32_t seq, int32_t n_keep, brisk_error *err) {
    if (seq < 0 || seq >= c->kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence id %d out of range [0, %d)", seq, c->kv->n_seq);
    if (n_keep < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d: cannot keep %d tokens", seq, n_keep);
    const brisk_kv_seq *s = &c->kv->seqs[seq];
    if (n_keep < s->len && n_keep > s->ordered)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "sequence %d: cannot keep %d tokens: only the first %d are in position order after the last tree "
                          "decode; keep a path of the tree (brisk_seq_keep_path) instead",
                          seq, n_keep, s->ordered);
    if (n_keep < s->len) c->tree_ok[seq] = 0;
    brisk_kv_truncate(c->kv, seq, n_keep);
    return BRISK_OK;
}

brisk_status brisk_seq_keep_path(brisk_context *c, int32_t seq, const int32_t *path, int32_t n_path, brisk_error *err) {
    if (seq < 0 || seq >= c->kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence id %d out of range [0, %d)", seq, c->kv->n_seq);
    if (!c->tree_ok[seq])
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "sequence %d: the last decode added no tokens to it (or it was changed since): no tree to keep a path of", seq);
    if (n_path < 0 || n_path > c->last_n || (n_path > 0 && !path))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d: bad path of %d tokens (the last decode had %d)", seq, n_path, c->last_n);
    for (int32_t d = 0; d < n_path; d++) {
        const int32_t i = path[d];
        if (i < 0 || i >= c->last_n || c->last_seq[i] != seq)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d: path[%d] = %d is not a token of this sequence in the last decode",
                              seq, d, i);
        if (d == 0 && c->last_par[i] != -1)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d: path[0] = token %d has parent %d; a path starts at a root (parent -1)",
                              seq, i, c->last_par[i]);
        if (d > 0 && c->last_par[i] != path[d - 1])
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d: path[%d] = token %d has parent %d, not path[%d] = %d", seq, d, i,
                              c->last_par[i], d - 1, path[d - 1]);
        c->path_rel[d] = c->last_rank[i];   /* parents come first in a batch, so these increase */
    }
    brisk_kv_keep_path(c->kv, seq, c->kv->seqs[seq].len - c->tree_n[seq], c->path_rel, n_path);
    c->tree_ok[seq] = 0;
    return BRISK_OK;
}
