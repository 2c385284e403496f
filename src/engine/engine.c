/* engine: the public API of include/brisk.h — models, vocabulary access,
 * contexts (KV cache + forward scratch), batches and logits. The CLI and
 * (later) the server are thin clients of these functions. */
#include "engine/engine_impl.h"
#include "base/pool.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "kv/policy.h"
#include "kv/shift.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- models ------------------------------------------------------------------------------ */

brisk_status brisk_model_load(const char *path, brisk_model **out, brisk_error *err) {
    *out = NULL;
    brisk_gguf *g = NULL;
    brisk_status st = brisk_isa_check(err);   /* the kernel table packs the weights at load */
    if (st) return st;
    st = brisk_gguf_open(path, &g, err);
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
    if ((st = brisk_model_data_load_file(g, path, &m->data, err))) {
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
    *out = (brisk_model_info){.arch = hp->arch_name, .n_vocab = hp->n_vocab, .n_vocab_tokens = brisk_vocab_size(m->vocab), .n_embd = hp->n_embd, .n_layer = hp->n_layer,
                              .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim, .n_ff = hp->n_ff,
                              .n_ctx_train = hp->n_ctx_train, .n_params = m->data->n_params, .weight_bytes = m->data->weight_bytes,
                              .pack_cache = m->data->pack_cache_note[0] ? m->data->pack_cache_note : NULL};
}

/* ---- vocabulary ------------------------------------------------------------------------------ */

int32_t brisk_token_bos(const brisk_model *m) { return brisk_vocab_bos(m->vocab); }
int32_t brisk_token_eos(const brisk_model *m) { return brisk_vocab_eos(m->vocab); }
bool brisk_token_is_eog(const brisk_model *m, int32_t id) { return brisk_vocab_is_eog(m->vocab, id); }
bool brisk_vocab_adds_bos(const brisk_model *m) { return brisk_vocab_add_bos(m->vocab); }
/* The role policy's token text: the piece the detokenizer renders (NULL when
 * it does not fit buf: the lexer then treats the token as text). */
static const char *policy_token_text(const void *user, int32_t token, char *buf, size_t cap, size_t *n) {
    const brisk_model *m = user;
    brisk_error e = {0};
    if (brisk_token_to_piece(m->vocab, token, buf, cap, n, &e) != BRISK_OK) return *n = 0, NULL;
    return buf;
}

const char *brisk_token_text(const brisk_model *m, int32_t id, size_t *len) {
    if (id >= brisk_vocab_size(m->vocab) && id < m->data->hp.n_vocab) {   /* padding rows: no text */
        *len = 0;
        return "";
    }
    return brisk_vocab_token_text(m->vocab, id, len);
}

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
    int32_t n_text, n_rows;   /* ids in [n_text, n_rows) are padding: they add no bytes */
    size_t cap;               /* brisk_detok_push_cap: one push always fits */
    char *buf;
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
    s->n_text = brisk_vocab_size(m->vocab);
    s->n_rows = m->data->hp.n_vocab;
    /* sized from the vocabulary's longest piece (a flush needs at most 3 bytes) */
    s->cap = BRISK_MAX(brisk_detok_push_cap(s->d), (size_t)16);
    if (!(s->buf = malloc(s->cap))) {
        const size_t cap = s->cap;
        brisk_text_stream_free(s);
        return brisk_fail(err, BRISK_ERR_NOMEM, "text stream: out of memory for a %zu-byte buffer", cap);
    }
    *out = s;
    return BRISK_OK;
}

void brisk_text_stream_free(brisk_text_stream *s) {
    if (!s) return;
    brisk_detok_free(s->d);
    free(s->buf);
    free(s);
}

brisk_status brisk_text_stream_push(brisk_text_stream *s, int32_t id, const char **text, size_t *len, brisk_error *err) {
    *text = s->buf;
    *len = 0;
    if (id >= s->n_text && id < s->n_rows) return BRISK_OK;
    return brisk_detok_push(s->d, id, s->buf, s->cap, len, err);
}

void brisk_text_stream_flush(brisk_text_stream *s, const char **text, size_t *len) {
    *text = s->buf;
    *len = brisk_detok_flush(s->d, s->buf, s->cap);
}

/* ---- contexts ---------------------------------------------------------------------------------- */

brisk_context_params brisk_context_default_params(void) {
    return (brisk_context_params){.n_ctx_seq = 0, .kv_tokens = 0, .n_batch = 0, .n_outputs_max = 0, .n_seq = 1, .n_threads = 0,
                                  .attn_window = 0, .attn_sink = 0, .kv_sink = 4, .kv_window = 32};
}

/* The limits a context's parameters resolve to (0 = default), validated. */
typedef struct ctx_shape {
    int32_t n_ctx, kv_tokens, n_seq, n_batch, n_outputs, n_threads;
    brisk_kv_type type_k, type_v;
    int32_t kv_policy, kv_window;   /* the retention policy, whose statistics the plan counts */
    int32_t kv_heads;               /* its per-head slot maps: n_layer x KV heads, else 1 */
} ctx_shape;

static brisk_status resolve_params(const brisk_model *m, const brisk_context_params *p, ctx_shape *o, brisk_error *err) {
    const brisk_hparams *hp = &m->data->hp;
    if (p->n_ctx_seq < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "context size %d must not be negative", p->n_ctx_seq);
    if (p->kv_tokens < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV pool size %d must not be negative", p->kv_tokens);
    if (p->n_batch < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch size %d must not be negative", p->n_batch);
    if (p->n_outputs_max < 0)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "output rows %d must not be negative", p->n_outputs_max);
    if (p->n_seq < 0 || p->n_seq > 4096) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequences %d out of range [1, 4096]", p->n_seq);
    if (p->k_hadamard) {
        if (!brisk_kv_type_hadamard(p->type_k))
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "a Hadamard-rotated K (k_hadamard, --k-hadamard) needs a q8_0 or q4_0 K cache; K is %s",
                              p->type_k >= 0 && p->type_k < BRISK_KV_N_TYPES ? brisk_kv_type_name((brisk_kv_type)p->type_k) : "unknown");
        if (hp->mla)
            return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "a Hadamard-rotated K (k_hadamard, --k-hadamard) is not supported with multi-head "
                              "latent attention (%s)", hp->arch_name);
    }
    for (int w = 0; w < 2; w++) {
        const int32_t t = w ? p->type_v : p->type_k;
        if (t < 0 || t >= BRISK_KV_N_NAMES)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "KV cache type %s = %d unknown (supported: f16, f32, q8_0, q4_0, k4, k2, hyb4, hyb2)",
                              w ? "type_v" : "type_k", t);
        if (t != BRISK_KV_F16 && t != BRISK_KV_F32 && hp->head_dim % 32)
            return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "KV cache type %s for %s needs a head size that is a multiple of 32, the model's is %d",
                              brisk_kv_type_name(t), w ? "V" : "K", hp->head_dim);
    }
    if (brisk_kv_type_hyb(p->type_k) != brisk_kv_type_hyb(p->type_v))
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                          "KV cache types %s/%s: hyb4 and hyb2 keep a slot's K and V in F16 together, so they go on K and V together "
                          "(-ctk hyb4 -ctv hyb4, or hyb2)", brisk_kv_type_name(p->type_k), brisk_kv_type_name(p->type_v));
    if ((brisk_kv_type_kivi(p->type_k) || brisk_kv_type_hyb(p->type_k)) && p->kv_policy)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                          "KV cache type %s for K keeps each channel's 32 slots of a block as one quantized group, so a retention "
                          "policy cannot compact it; use another K type (f16, f32, q8_0, q4_0) with --kv-policy",
                          brisk_kv_type_name(p->type_k));
    o->type_k = (brisk_kv_type)p->type_k;
    o->type_v = (brisk_kv_type)p->type_v;
    if (p->kv_per_head) {
        /* windowed attention masks by the cache's positions, which per-head slots no longer share */
        if (hp->swa_window > 0 || p->attn_window > 0)
            return brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                              "per-head KV selection (kv_per_head, --kv-per-head) is not supported with windowed attention (%s)",
                              p->attn_window > 0 ? "attn_window" : hp->arch_name);
        if (!p->kv_policy)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "per-head KV selection (kv_per_head, --kv-per-head) needs a retention policy (kv_policy)");
    }
    o->kv_policy = p->kv_policy;
    o->kv_window = p->kv_window;
    o->kv_heads = p->kv_per_head ? hp->n_layer * hp->n_head_kv : 1;
    o->n_ctx = p->n_ctx_seq > 0 ? p->n_ctx_seq : hp->n_ctx_train;
    o->kv_tokens = p->kv_tokens > 0 ? p->kv_tokens : o->n_ctx;
    o->n_seq = p->n_seq > 0 ? p->n_seq : 1;
    o->n_batch = p->n_batch > 0 ? p->n_batch : BRISK_MIN(512, o->n_ctx);
    o->n_outputs = p->n_outputs_max > 0 ? BRISK_MIN(p->n_outputs_max, o->n_batch) : (int32_t)BRISK_MIN((int64_t)o->n_batch, 64 * (int64_t)o->n_seq);
    o->n_threads = p->n_threads > 0 ? p->n_threads : brisk_cpu_count();
    if (p->n_threads < 0 || o->n_threads > 1024) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "threads %d out of range [1, 1024]", p->n_threads);
    if (o->n_batch > 65536) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch size %d out of range [1, 65536]", o->n_batch);
    if (p->attn_window < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "attention window %d must not be negative", p->attn_window);
    if (p->attn_sink < 0) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "attention sink %d must not be negative", p->attn_sink);
    if (p->attn_sink > 0 && p->attn_window == 0)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "attention sink %d given without an attention window", p->attn_sink);
    return BRISK_OK;
}

/* Memory this process can still take: MemAvailable, lowered to the cgroup's
 * limit minus its usage when a (v2) limit is set. 0 = unknown. */
static size_t read_u64_file(const char *path, bool *ok) {
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    *ok = f && fscanf(f, "%llu", &v) == 1;
    if (f) fclose(f);
    return (size_t)v;
}

static size_t memory_available(void) {
    size_t avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                avail = (size_t)kb * 1024;
                break;
            }
        fclose(f);
    }
    /* cgroup v2: "0::/path" in /proc/self/cgroup names this process's group */
    char rel[600] = "", path[700];
    f = fopen("/proc/self/cgroup", "r");
    if (f) {
        char line[600];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "0::", 3)) {
                snprintf(rel, sizeof rel, "%s", line + 3);
                rel[strcspn(rel, "\n")] = 0;
            }
        fclose(f);
    }
    bool ok_max, ok_cur;
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", rel);
    const size_t max = read_u64_file(path, &ok_max);   /* "max" (no limit) does not parse */
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", rel);
    const size_t cur = read_u64_file(path, &ok_cur);
    if (ok_max && ok_cur) {
        const size_t left = max > cur ? max - cur : 0;
        if (avail == 0 || left < avail) avail = left;
    }
    return avail;
}

static brisk_status plan_shape(const brisk_model *m, const ctx_shape *sh, brisk_memory_plan *out, brisk_error *err) {
    const brisk_hparams *hp = &m->data->hp;
    memset(out, 0, sizeof *out);
    out->weights = m->data->weight_bytes;
    if (!brisk_kv_plan_full(hp->n_layer, hp->n_head_kv, hp->head_dim, hp->head_dim_v, sh->n_ctx, sh->kv_tokens, sh->n_seq, sh->n_batch, sh->type_k,
                            sh->type_v, &out->kv))
        return brisk_fail(err, BRISK_ERR_CAPACITY, "KV cache size for a pool of %d tokens and %d sequences overflows", sh->kv_tokens,
                          sh->n_seq);
    if (!brisk_forward_plan(m->data, sh->n_batch, sh->n_ctx, sh->n_threads, &out->scratch))
        return brisk_fail(err, BRISK_ERR_CAPACITY, "scratch size for batch %d overflows", sh->n_batch);
    /* the context's own bookkeeping, [n_batch] and [n_seq] arrays */
    out->scratch += (size_t)sh->n_batch * (6 * sizeof(int32_t) + 1) +
                    (size_t)sh->n_seq * (3 * sizeof(int32_t) + 1 + sizeof(int64_t) + 2 * BRISK_TREE_RECORD * sizeof(int32_t));
    /* the retention policy's scratch and attention statistics (the oracle's table: n_seq x n_ctx^2 sums); a table
     * over its limit is left to the policy's init, which names it */
    size_t policy = 0;
    brisk_kv_policy_plan_heads(sh->kv_policy, sh->kv_window, sh->n_seq, sh->n_ctx, sh->kv_heads, &policy);
    if (!brisk_add_size(out->scratch, policy, &out->scratch)) return brisk_fail(err, BRISK_ERR_CAPACITY, "context memory overflows");
    if (!brisk_mul_size((size_t)sh->n_outputs * sizeof(float), (size_t)hp->n_vocab, &out->logits))
        return brisk_fail(err, BRISK_ERR_CAPACITY, "logits for %d output rows x %d vocabulary overflow", sh->n_outputs, hp->n_vocab);
    size_t t = out->weights;
    if (!brisk_add_size(t, out->kv, &t) || !brisk_add_size(t, out->scratch, &t) || !brisk_add_size(t, out->logits, &t))
        return brisk_fail(err, BRISK_ERR_CAPACITY, "context memory overflows");
    out->total = t;
    const size_t avail = memory_available();
    out->available = avail ? avail + m->data->packed_bytes : 0;
    return BRISK_OK;
}

brisk_status brisk_context_plan(const brisk_model *m, const brisk_context_params *p, brisk_memory_plan *out, brisk_error *err) {
    ctx_shape sh;
    brisk_status st = resolve_params(m, p, &sh, err);
    if (st) return st;
    return plan_shape(m, &sh, out, err);
}

static double mib(size_t b) { return (double)b / 1048576.0; }

void brisk_memory_plan_format(const brisk_memory_plan *p, char *buf, size_t cap) {
    if (!cap) return;
    int n = snprintf(buf, cap, "weights %.1f MiB + KV %.1f MiB + scratch %.1f MiB + logits %.1f MiB = %.1f MiB", mib(p->weights),
                     mib(p->kv), mib(p->scratch), mib(p->logits), mib(p->total));
    if (n >= 0 && (size_t)n < cap) {
        if (p->available) snprintf(buf + n, cap - (size_t)n, " (available: %.1f MiB)", mib(p->available));
        else snprintf(buf + n, cap - (size_t)n, " (available: unknown)");
    }
}

brisk_status brisk_memory_plan_check(const brisk_memory_plan *plans, int n, brisk_error *err) {
    brisk_memory_plan sum = {0};
    for (int i = 0; i < n; i++) {
        const brisk_memory_plan *p = &plans[i];
        if (!brisk_add_size(sum.weights, p->weights, &sum.weights) || !brisk_add_size(sum.kv, p->kv, &sum.kv) ||
            !brisk_add_size(sum.scratch, p->scratch, &sum.scratch) || !brisk_add_size(sum.logits, p->logits, &sum.logits) ||
            !brisk_add_size(sum.total, p->total, &sum.total))
            return brisk_fail(err, BRISK_ERR_CAPACITY, "memory plan overflows");
        /* every plan read the same MemAvailable, plus its own model's packed weights */
        if (i == 0) sum.available = p->available;
        else if (p->available && sum.available) sum.available += p->available - BRISK_MIN(p->available, plans[0].available);
    }
    if (sum.available && sum.total > sum.available) {
        char plan[256];
        brisk_memory_plan_format(&sum, plan, sizeof plan);
        return brisk_fail(err, BRISK_ERR_CAPACITY, "not enough memory: %s%s; lower -c (KV) or -b (scratch, logits)", plan,
                          n > 1 ? " for the models together" : "");
    }
    return BRISK_OK;
}

brisk_status brisk_context_init(const brisk_model *m, const brisk_context_params *p, brisk_context **out, brisk_error *err) {
    *out = NULL;
    const brisk_hparams *hp = &m->data->hp;
    ctx_shape sh;
    brisk_memory_plan plan;
    brisk_status st = resolve_params(m, p, &sh, err);
    if (st) return st;
    if ((st = plan_shape(m, &sh, &plan, err)) || (st = brisk_memory_plan_check(&plan, 1, err))) return st;
    const int32_t n_ctx = sh.n_ctx, n_seq = sh.n_seq, n_batch = sh.n_batch;

    brisk_context *c = calloc(1, sizeof *c);
    if (!c) return brisk_fail(err, BRISK_ERR_NOMEM, "context: out of memory");
    c->model = m;
    c->n_batch = n_batch;
    c->n_outputs_max = sh.n_outputs;
    if ((st = brisk_kv_init_full(&c->kv, hp->n_layer, hp->n_head_kv, hp->head_dim, hp->head_dim_v, n_ctx, sh.kv_tokens, n_seq, n_batch, sh.type_k,
                                 sh.type_v, err)))
        goto fail;
    c->kv->k_hadamard = p->k_hadamard;
    if ((st = brisk_forward_init(&c->fwd, m->data, n_batch, n_ctx, sh.n_threads, err))) goto fail;
    brisk_forward_set_window(c->fwd, p->attn_window, p->attn_sink);
    if (p->kv_pin >> BRISK_KV_N_ROLES) {
        st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "kv_pin 0x%x names roles past the %d known (brisk_kv_role)", (unsigned)p->kv_pin, BRISK_KV_N_ROLES);
        goto fail;
    }
    c->kv->pin_mask = p->kv_pin;   /* before the policy, which checks it against per-head selection */
    if (p->kv_policy) {
        const brisk_kv_policy_config pc = {.kind = p->kv_policy, .budget = p->kv_budget, .sink = p->kv_sink, .window = p->kv_window,
                                           .seed = p->kv_seed, .per_head = p->kv_per_head};
        if ((st = brisk_kv_policy_set(c->kv, &pc, err))) goto fail;
        brisk_kv_policy_set_text(c->kv, policy_token_text, m);
    }
    c->logits = malloc(plan.logits);
    if (!c->logits) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "context: cannot allocate %.1f MiB of logits", mib(plan.logits));
        goto fail;
    }
    c->last_seq = malloc((size_t)n_batch * sizeof(int32_t));
    c->last_par = malloc((size_t)n_batch * sizeof(int32_t));
    c->last_rank = malloc((size_t)n_batch * sizeof(int32_t));
    c->path_rel = malloc((size_t)n_batch * sizeof(int32_t));
    c->seq_last = malloc((size_t)n_seq * sizeof(int32_t));
    c->tree_n = malloc((size_t)n_seq * sizeof(int32_t));
    c->len0 = malloc((size_t)n_seq * sizeof(int32_t));
    c->tree_ok = calloc((size_t)n_seq, 1);
    c->tree_decode = calloc((size_t)n_seq, sizeof(int64_t));
    c->tree_bidx = malloc((size_t)n_seq * BRISK_TREE_RECORD * sizeof(int32_t));
    c->tree_pidx = malloc((size_t)n_seq * BRISK_TREE_RECORD * sizeof(int32_t));
    c->sync_pos = malloc((size_t)n_batch * sizeof(int32_t));
    c->sync_seq = malloc((size_t)n_batch * sizeof(int32_t));
    c->sync_want = malloc((size_t)n_batch);
    if (!c->last_seq || !c->last_par || !c->last_rank || !c->path_rel || !c->seq_last || !c->tree_n || !c->len0 || !c->tree_ok ||
        !c->tree_decode || !c->tree_bidx || !c->tree_pidx ||
        !c->sync_pos || !c->sync_seq || !c->sync_want) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "context: out of memory");
        goto fail;
    }
    c->scratch_bytes = plan.scratch + plan.logits;
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
    free(c->last_seq); free(c->last_par); free(c->last_rank); free(c->path_rel); free(c->seq_last); free(c->tree_n); free(c->len0); free(c->tree_ok);
    free(c->tree_decode); free(c->tree_bidx); free(c->tree_pidx);
    free(c->sync_pos); free(c->sync_seq); free(c->sync_want);
    free(c);
}

void brisk_context_memory(const brisk_context *c, size_t *kv_bytes, size_t *scratch_bytes) {
    if (kv_bytes) *kv_bytes = c->kv->bytes;   /* what brisk_kv_init allocated (= brisk_kv_plan) */
    if (scratch_bytes) *scratch_bytes = c->scratch_bytes;
}

int32_t brisk_context_n_ctx(const brisk_context *c) { return c->kv->n_ctx; }
int32_t brisk_context_kv_tokens(const brisk_context *c) { return (c->kv->n_blocks - (c->kv->n_seq - 1)) * BRISK_KV_BLOCK; }
int32_t brisk_context_n_batch(const brisk_context *c) { return c->n_batch; }
int32_t brisk_context_n_outputs_max(const brisk_context *c) { return c->n_outputs_max; }
int32_t brisk_context_n_seq(const brisk_context *c) { return c->kv->n_seq; }
const char *brisk_context_isa(const brisk_context *c) { return brisk_forward_isa(c->fwd); }

_Static_assert((int)BRISK_CACHE_F16 == (int)BRISK_KV_F16 && (int)BRISK_CACHE_F32 == (int)BRISK_KV_F32 &&
                   (int)BRISK_CACHE_Q8_0 == (int)BRISK_KV_Q8_0 && (int)BRISK_CACHE_Q4_0 == (int)BRISK_KV_Q4_0 &&
                   (int)BRISK_CACHE_K4 == (int)BRISK_KV_K4 && (int)BRISK_CACHE_K2 == (int)BRISK_KV_K2 &&
                   (int)BRISK_CACHE_HYB4 == BRISK_KV_HYB4 && (int)BRISK_CACHE_HYB2 == BRISK_KV_HYB2,
               "public and KV cache type numbers");
int brisk_cache_type_parse(const char *name) { return brisk_kv_type_parse(name); }
const char *brisk_cache_type_name(int type) { return brisk_kv_type_name(type); }

brisk_status brisk_decode(brisk_context *c, const brisk_batch *b, brisk_error *err) { return brisk_decode_tree(c, b, NULL, err); }

/* Padding ids (past the vocabulary's tokens, below the embedding's rows) get
 * -INFINITY, so no sampler or drafter can choose them; any other non-finite
 * logit (NaN weights, overflow) fails the decode rather than being sampled. */
static brisk_status finish_logits(brisk_context *c, int32_t n_out, brisk_error *err) {
    const size_t nv = (size_t)c->model->data->hp.n_vocab, nt = (size_t)brisk_vocab_size(c->model->vocab);
    for (int32_t r = 0; r < n_out; r++) {
        float *row = c->logits + (size_t)r * nv;
        for (size_t k = nt; k < nv; k++) row[k] = -INFINITY;
        /* x - x is 0 for finite x and NaN for NaN and +-inf: one test per element, vectorizable */
        float acc = 0.0f;
        for (size_t k = 0; k < nt; k++) acc += row[k] - row[k];
        if (acc != 0.0f) {
            size_t k = 0;
            while (k < nt && isfinite(row[k])) k++;
            return brisk_fail(err, BRISK_ERR_NUMERIC, "the model computed a non-finite logit (%g for token %zu, output row %d): "
                              "its weights hold NaN or infinite values, or the activations overflow", k < nt ? (double)row[k] : 0.0,
                              k, r);
        }
    }
    return BRISK_OK;
}

brisk_status brisk_decode_tree(brisk_context *c, const brisk_batch *b, const int32_t *parent, brisk_error *err) {
    if (!b || !b->token || !b->pos || !b->seq || !b->logits)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "batch: token, pos, seq and logits arrays are required");
    c->n_logits = 0;
    int32_t n_want = 0;
    for (int32_t i = 0; i < b->n_tokens; i++) n_want += b->logits[i] != 0;
    if (n_want > c->n_outputs_max)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "batch asks for %d logit rows; the context keeps at most %d (n_outputs_max)", n_want,
                          c->n_outputs_max);
    brisk_fwd_batch fb = {.n = b->n_tokens, .token = b->token, .pos = b->pos, .seq = b->seq, .want = b->logits, .parent = parent};
    /* forward_run validates the sequence ids before it appends anything */
    for (int32_t i = 0; i < b->n_tokens; i++)
        if (b->seq[i] >= 0 && b->seq[i] < c->kv->n_seq) c->len0[b->seq[i]] = brisk_kv_len(c->kv, b->seq[i]);
    brisk_status st = brisk_forward_run(c->fwd, c->kv, &fb, c->logits, err);
    if (st) return st;
    if (c->kv->policy) {   /* a retention policy may have cut sequences first: the batch's rows are each one's last */
        for (int32_t i = 0; i < b->n_tokens; i++) c->len0[b->seq[i]] = brisk_kv_len(c->kv, b->seq[i]);
        for (int32_t i = 0; i < b->n_tokens; i++) c->len0[b->seq[i]]--;
    }
    int32_t n_out = 0;
    for (int32_t i = 0; i < b->n_tokens; i++) n_out += b->logits[i] != 0;
    if ((st = finish_logits(c, n_out, err))) {
        /* undo the decode: nothing is appended to any sequence on error; a hyb
         * cache's refreshes cannot be undone (the rows they let go have no F16
         * left), so its sequences are emptied, and the message says so */
        for (int32_t i = 0; i < b->n_tokens; i++) {
            brisk_kv_truncate(c->kv, b->seq[i], c->kv->hyb ? 0 : c->len0[b->seq[i]]);
            c->tree_ok[b->seq[i]] = 0;
        }
        if (c->kv->hyb && err) {
            const size_t l = strlen(err->msg);
            snprintf(err->msg + l, sizeof err->msg - l, "; the batch's sequences were emptied (a hyb4/hyb2 cache cannot undo a batch)");
        }
        return st;
    }
    c->n_logits = n_out;
    /* record the batch's tree (a chain without parents) for keep_path, per
     * sequence it touched; a refused decode leaves the previous records */
    c->n_decodes++;
    for (int32_t i = 0; i < b->n_tokens; i++) c->seq_last[b->seq[i]] = -1;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const int32_t s = b->seq[i];
        c->last_seq[i] = s;
        c->last_par[i] = parent ? parent[i] : c->seq_last[s];
        c->last_rank[i] = c->seq_last[s] < 0 ? 0 : c->last_rank[c->seq_last[s]] + 1;
        c->seq_last[s] = i;
        c->tree_ok[s] = 1;
        c->tree_n[s] = c->last_rank[i] + 1;
        c->tree_decode[s] = c->n_decodes;
        if (c->last_rank[i] < BRISK_TREE_RECORD) {
            c->tree_bidx[(size_t)s * BRISK_TREE_RECORD + (size_t)c->last_rank[i]] = i;
            c->tree_pidx[(size_t)s * BRISK_TREE_RECORD + (size_t)c->last_rank[i]] = c->last_par[i];
        }
    }
    /* the batch is accepted: blocks it filled in position order join the prefix index */
    for (int32_t i = 0; i < b->n_tokens; i++)
        if (c->seq_last[b->seq[i]] == i) brisk_kv_commit(c->kv, b->seq[i]);
    c->last_n = b->n_tokens;
    return BRISK_OK;
}

const float *brisk_get_logits(const brisk_context *c, int32_t i) {
    if (i < 0 || i >= c->n_logits) return NULL;
    return c->logits + (size_t)i * (size_t)c->model->data->hp.n_vocab;
}

int32_t brisk_n_logits(const brisk_context *c) { return c->n_logits; }

const float *brisk_get_hidden(const brisk_context *c, int32_t i) {
    if (i < 0 || i >= c->n_logits) return NULL;
    return brisk_forward_hidden(c->fwd) + (size_t)i * (size_t)c->model->data->hp.n_embd;
}

int32_t brisk_seq_len(const brisk_context *c, int32_t seq) {
    if (seq < 0 || seq >= c->kv->n_seq) return -1;
    return c->kv->seqs[seq].len;
}

int32_t brisk_seq_next_pos(const brisk_context *c, int32_t seq) {
    if (seq < 0 || seq >= c->kv->n_seq) return -1;
    return brisk_kv_next_pos(c->kv, seq);
}

int32_t brisk_seq_policy_room(const brisk_context *c, int32_t seq) {
    if (seq < 0 || seq >= c->kv->n_seq) return -1;
    return brisk_kv_policy_room(c->kv, seq);
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
    if (c->kv->hyb)   /* speculative decoding's step: every query the decode ran has ranked the hot rows already */
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                          "sequence %d: keeping a path is not supported with a %s cache: every query of the decode has already ranked "
                          "its hot rows (truncate the sequence instead: lossy, docs/KV.md)",
                          seq, brisk_kv_hyb_name(c->kv));
    if (!c->tree_ok[seq])
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "sequence %d: no decode added tokens to it since it last changed: no tree to keep a path of", seq);
    const int32_t n_tree = c->tree_n[seq];
    const bool own = n_tree <= BRISK_TREE_RECORD;   /* recorded per sequence, else only in the last decode's record */
    if (!own && c->tree_decode[seq] != c->n_decodes)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "sequence %d: its decode of %d tokens (more than %d) was not the last decode; keep a path of it right after "
                          "the decode that added it", seq, n_tree, BRISK_TREE_RECORD);
    if (n_path < 0 || n_path > n_tree || (n_path > 0 && !path))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d: bad path of %d tokens (its decode added %d)", seq, n_path, n_tree);
    const int32_t *bidx = c->tree_bidx + (size_t)seq * BRISK_TREE_RECORD, *pidx = c->tree_pidx + (size_t)seq * BRISK_TREE_RECORD;
    for (int32_t d = 0; d < n_path; d++) {
        const int32_t i = path[d];
        int32_t rank = -1, par = -2;
        if (own) {
            for (int32_t r = 0; r < n_tree && rank < 0; r++)
                if (bidx[r] == i) rank = r, par = pidx[r];
        } else if (i >= 0 && i < c->last_n && c->last_seq[i] == seq) {
            rank = c->last_rank[i];
            par = c->last_par[i];
        }
        if (rank < 0)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d: path[%d] = %d is not a token its decode added to it", seq, d, i);
        if (d == 0 && par != -1)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d: path[0] = token %d has parent %d; a path starts at a root (parent -1)",
                              seq, i, par);
        if (d > 0 && par != path[d - 1])
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d: path[%d] = token %d has parent %d, not path[%d] = %d", seq, d, i,
                              par, d - 1, path[d - 1]);
        c->path_rel[d] = rank;   /* parents come first in a batch, so these increase */
    }
    brisk_kv_keep_path(c->kv, seq, brisk_kv_len(c->kv, seq) - n_tree, c->path_rel, n_path);
    brisk_kv_commit(c->kv, seq);
    c->tree_ok[seq] = 0;
    return BRISK_OK;
}

/* ---- sequences that know their tokens ----------------------------------------------------------- */

brisk_status brisk_seq_tokens(const brisk_context *c, int32_t seq, int32_t *tokens, int32_t cap, int32_t *n_tokens, brisk_error *err) {
    if (n_tokens) *n_tokens = 0;
    if (seq < 0 || seq >= c->kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence id %d out of range [0, %d)", seq, c->kv->n_seq);
    const int32_t len = brisk_kv_len(c->kv, seq);
    if (n_tokens) *n_tokens = len;
    if (cap < len || (len > 0 && !tokens))
        return brisk_fail(err, BRISK_ERR_CAPACITY, "sequence %d holds %d tokens, the buffer has room for %d", seq, len, BRISK_MAX(cap, 0));
    for (int32_t i = 0; i < len; i++) tokens[i] = brisk_kv_slot_token(c->kv, seq, i);
    return BRISK_OK;
}

brisk_status brisk_seq_fork(brisk_context *c, int32_t src, int32_t dst, brisk_error *err) {
    brisk_status st = brisk_kv_fork(c->kv, src, dst, err);
    if (st) return st;
    c->tree_ok[dst] = 0;
    return BRISK_OK;
}

brisk_status brisk_seq_sync(brisk_context *c, int32_t seq, const int32_t *tokens, int32_t n, int32_t *n_reused, brisk_error *err) {
    if (n_reused) *n_reused = 0;
    if (seq < 0 || seq >= c->kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence id %d out of range [0, %d)", seq, c->kv->n_seq);
    if (n < 0 || (n > 0 && !tokens)) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d: bad token list of %d tokens", seq, n);
    if (n > c->kv->n_ctx)
        return brisk_fail(err, BRISK_ERR_CAPACITY, "sequence %d: %d tokens exceed the context size %d", seq, n, c->kv->n_ctx);
    const int32_t n_vocab = c->model->data->hp.n_vocab;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence %d: token %d: id %d out of range [0, %d)", seq, i, tokens[i], n_vocab);
    c->n_logits = 0;
    c->tree_ok[seq] = 0;
    /* the last token is always computed, so its logits are there to sample from */
    const int32_t kept = brisk_kv_sync_prefix(c->kv, seq, tokens, n > 0 ? n - 1 : 0);
    if (n_reused) *n_reused = kept;
    for (int32_t i0 = kept; i0 < n; i0 += c->n_batch) {
        const int32_t m = BRISK_MIN(c->n_batch, n - i0);
        for (int32_t j = 0; j < m; j++) {
            c->sync_pos[j] = i0 + j;
            c->sync_seq[j] = seq;
            c->sync_want[j] = i0 + j == n - 1;
        }
        const brisk_batch b = {.n_tokens = m, .token = tokens + i0, .pos = c->sync_pos, .seq = c->sync_seq, .logits = c->sync_want};
        brisk_status st = brisk_decode(c, &b, err);
        if (st) {
            brisk_error_prefix(err, "sequence %d: prefill of tokens %d..%d", seq, i0, i0 + m - 1);
            return st;
        }
    }
    return BRISK_OK;
}

void brisk_context_cache_stats(const brisk_context *c, brisk_cache_stats *out) {
    memset(out, 0, sizeof *out);
    out->n_blocks = c->kv->n_blocks;
    out->block_tokens = BRISK_KV_BLOCK;
    brisk_kv_counts(c->kv, &out->in_use, &out->cached, &out->free);
    out->hit_tokens = c->kv->n_hit_tokens;
    out->evicted = c->kv->n_evicted;
    out->in_use_max = c->kv->in_use_max;
    out->block_bytes = (size_t)c->kv->n_layer * (size_t)c->kv->n_head * (c->kv->k_part + c->kv->v_part);
    out->dropped = c->kv->n_compacted;
    const brisk_kv *kv = c->kv;
    out->f16_block_bytes = (size_t)kv->n_layer * (size_t)kv->n_head * ((size_t)kv->head_dim + (size_t)kv->head_dim_v) * BRISK_KV_BLOCK * 2;
    out->hot_bytes_per_seq = kv->hyb_seq_bytes;
}

/* ---- roles and the context shift (kv/shift.c) ---------------------------------------------------- */

static const char *const role_names[BRISK_KV_N_ROLES] = {"none", "system", "user", "assistant", "tool", "prompt", "generated"};

const char *brisk_kv_role_name(int role) { return role >= 0 && role < BRISK_KV_N_ROLES ? role_names[role] : "?"; }

int brisk_kv_role_parse(const char *name) {
    for (int r = 0; name && r < BRISK_KV_N_ROLES; r++)
        if (!strcasecmp(name, role_names[r])) return r;
    return -1;
}

brisk_status brisk_seq_set_role(brisk_context *c, int32_t seq, int32_t role, brisk_error *err) {
    if (seq < 0 || seq >= c->kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence id %d out of range [0, %d)", seq, c->kv->n_seq);
    if (role < 0 || role >= BRISK_KV_N_ROLES)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "role %d out of range [0, %d) (brisk_kv_role)", role, BRISK_KV_N_ROLES);
    c->kv->seqs[seq].role = (uint8_t)role;
    return BRISK_OK;
}

brisk_status brisk_seq_oracle(brisk_context *c, int32_t seq, bool record, brisk_error *err) {
    if (seq < 0 || seq >= c->kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence id %d out of range [0, %d)", seq, c->kv->n_seq);
    if (!c->kv->policy || c->kv->policy->cfg.kind != BRISK_KV_POLICY_ORACLE)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "brisk_seq_oracle needs the context's KV policy to be oracle (kv_policy %d)",
                          BRISK_KV_POLICY_ORACLE);
    brisk_status st;
    if (record) {   /* empty first, then record from position 0 */
        if ((st = brisk_seq_truncate(c, seq, 0, err))) return st;
        return brisk_kv_policy_oracle_phase(c->kv, seq, BRISK_KV_ORACLE_RECORD, err);
    }
    /* seal what the slots recorded, then empty */
    if ((st = brisk_kv_policy_oracle_phase(c->kv, seq, BRISK_KV_ORACLE_REPLAY, err))) return st;
    return brisk_seq_truncate(c, seq, 0, err);
}

static const brisk_rope *ctx_layer_rope(const void *user, int32_t il) { return brisk_forward_layer_rope((const brisk_forward *)user, il); }

static brisk_status shift_supported(const brisk_context *c, int32_t seq, brisk_error *err) {
    if (seq < 0 || seq >= c->kv->n_seq)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "sequence id %d out of range [0, %d)", seq, c->kv->n_seq);
    if (c->model->data->hp.mla)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "context shift: %s's multi-head latent attention keeps K as a latent; not supported",
                          c->model->data->hp.arch_name);
    return BRISK_OK;
}

brisk_status brisk_seq_shift(brisk_context *c, int32_t seq, int32_t from_slot, int32_t delta, brisk_error *err) {
    brisk_status st = shift_supported(c, seq, err);
    if (st) return st;
    if ((st = brisk_kv_shift(c->kv, seq, from_slot, delta, ctx_layer_rope, c->fwd, err))) return st;
    c->tree_ok[seq] = 0;
    return BRISK_OK;
}

brisk_status brisk_seq_context_shift(brisk_context *c, int32_t seq, int32_t n_keep, int32_t n_discard, int32_t *n_dropped,
                                     brisk_error *err) {
    if (n_dropped) *n_dropped = 0;
    brisk_status st = shift_supported(c, seq, err);
    if (st) return st;
    /* scratch for one shift: a shift happens once per many tokens, never per token */
    const size_t n = (size_t)BRISK_MAX(brisk_kv_len(c->kv, seq), 1);
    int32_t *keep = malloc(n * sizeof *keep), *new_pos = malloc(n * sizeof *new_pos);
    if (!keep || !new_pos) st = brisk_fail(err, BRISK_ERR_NOMEM, "context shift: out of memory for %zu slots", n);
    else st = brisk_kv_context_shift(c->kv, seq, n_keep, n_discard, ctx_layer_rope, c->fwd, keep, new_pos, n_dropped, err);
    free(keep);
    free(new_pos);
    if (!st) c->tree_ok[seq] = 0;
    return st;
}
