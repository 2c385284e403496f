/* response: OpenAI's response shapes (response.h). */
#include "server/response.h"

#include <stdlib.h>
#include <string.h>

static const char *finish_name(srv_finish f) {
    return f == SRV_FINISH_LENGTH ? "length" : "stop";
}

json_t *srv_token_str(const brisk_model *m, int32_t id, json_t **bytes) {
    brisk_text_stream *ts = NULL;
    const char *a = "", *b = "";
    size_t na = 0, nb = 0;
    char buf[256];
    size_t n = 0;
    if (m && !brisk_text_stream_init(m, &ts, NULL)) {
        if (brisk_text_stream_push(ts, id, &a, &na, NULL)) na = 0;
        if (na > sizeof buf) na = sizeof buf;
        memcpy(buf, a, na);
        n = na;
        brisk_text_stream_flush(ts, &b, &nb);
        if (nb > sizeof buf - n) nb = sizeof buf - n;
        memcpy(buf + n, b, nb);
        n += nb;
    }
    brisk_text_stream_free(ts);
    if (bytes) {
        *bytes = json_array();
        for (size_t k = 0; *bytes && k < n; k++) json_array_append_new(*bytes, json_integer((unsigned char)buf[k]));
    }
    size_t sl = 0;
    char *s = srv_utf8_sanitize(buf, n, &sl);
    json_t *j = s ? json_stringn(s, sl) : NULL;
    free(s);
    return j ? j : json_string("");
}

/* chat's {"token", "logprob", "bytes", "top_logprobs"} for ev */
static json_t *chat_logprob(const srv_event *ev, const brisk_model *m) {
    json_t *bytes = NULL;
    json_t *tok = srv_token_str(m, ev->token, &bytes);
    json_t *top = json_array();
    for (int32_t k = 0; top && k < ev->n_top; k++) {
        json_t *tb = NULL;
        json_t *ts = srv_token_str(m, ev->top[k].id, &tb);
        json_array_append_new(top, json_pack("{s:o, s:f, s:o}", "token", ts, "logprob", (double)ev->top[k].logprob, "bytes",
                                             tb ? tb : json_null()));
    }
    return json_pack("{s:o, s:f, s:o, s:o}", "token", tok, "logprob", (double)ev->logprob, "bytes", bytes ? bytes : json_null(),
                     "top_logprobs", top ? top : json_array());
}

/* completions' legacy object, one token appended */
static bool legacy_logprob(json_t *lp, const srv_event *ev, const brisk_model *m, size_t offset) {
    json_t *tok = srv_token_str(m, ev->token, NULL);
    json_t *top = json_object();
    for (int32_t k = 0; top && k < ev->n_top; k++) {
        json_t *ts = srv_token_str(m, ev->top[k].id, NULL);
        json_object_set_new(top, json_string_value(ts), json_real(ev->top[k].logprob));
        json_decref(ts);
    }
    return !json_array_append_new(json_object_get(lp, "tokens"), tok) &&
           !json_array_append_new(json_object_get(lp, "token_logprobs"), json_real(ev->logprob)) &&
           !json_array_append_new(json_object_get(lp, "top_logprobs"), top) &&
           !json_array_append_new(json_object_get(lp, "text_offset"), json_integer((json_int_t)offset));
}

/* llama-server's {"id", "token", "bytes", "logprob", "top_logprobs": [{"id", "token", "bytes", "logprob"}]} */
static json_t *llama_prob(const srv_event *ev, const brisk_model *m) {
    json_t *bytes = NULL;
    json_t *tok = srv_token_str(m, ev->token, &bytes);
    json_t *top = json_array();
    for (int32_t k = 0; top && k < ev->n_top; k++) {
        json_t *tb = NULL;
        json_t *ts = srv_token_str(m, ev->top[k].id, &tb);
        json_array_append_new(top, json_pack("{s:i, s:o, s:o, s:f}", "id", ev->top[k].id, "token", ts, "bytes", tb ? tb : json_null(),
                                             "logprob", (double)ev->top[k].logprob));
    }
    return json_pack("{s:i, s:o, s:o, s:f, s:o}", "id", ev->token, "token", tok, "bytes", bytes ? bytes : json_null(), "logprob",
                     (double)ev->logprob, "top_logprobs", top ? top : json_array());
}

bool srv_choice_add(srv_choice_acc *acc, srv_kind kind, const srv_event *ev, const brisk_model *m, bool want_logprobs) {
    if (kind == SRV_LLAMA && ev->token >= 0) {
        if (!acc->tokens && !(acc->tokens = json_array())) return false;
        if (json_array_append_new(acc->tokens, json_integer(ev->token))) return false;
    }
    if (ev->finish != SRV_FINISH_NONE) {
        acc->stop_word = ev->stop_word;
        acc->eog = ev->eog;
    }
    if (ev->len) {
        if (acc->len + ev->len + 1 > acc->cap) {
            size_t cap = acc->cap ? acc->cap : 256;
            while (cap < acc->len + ev->len + 1) cap *= 2;
            char *g = realloc(acc->text, cap);
            if (!g) return false;
            acc->text = g;
            acc->cap = cap;
        }
        memcpy(acc->text + acc->len, ev->text, ev->len);
        acc->len += ev->len;
    }
    if (ev->finish != SRV_FINISH_NONE) acc->finish = ev->finish;
    if (want_logprobs && ev->token >= 0) {
        if (!acc->logprobs)
            acc->logprobs = kind == SRV_CHAT || kind == SRV_LLAMA ? json_array()
                                             : json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs",
                                                         "text_offset");
        if (!acc->logprobs) return false;
        if (kind == SRV_CHAT) {
            if (json_array_append_new(acc->logprobs, chat_logprob(ev, m))) return false;
        } else if (kind == SRV_LLAMA) {
            if (json_array_append_new(acc->logprobs, llama_prob(ev, m))) return false;
        } else if (!legacy_logprob(acc->logprobs, ev, m, acc->text_offset)) {
            return false;
        }
    }
    acc->text_offset += ev->len;
    return true;
}

bool srv_choice_echo(srv_choice_acc *acc, const brisk_model *m, const char *text, size_t len, const int32_t *ids, int32_t n,
                     const float *lp, const srv_top *top, int32_t k) {
    char *t = malloc(len + acc->len + 1);
    if (!t) return false;
    memcpy(t, text, len);
    if (acc->len) memcpy(t + len, acc->text, acc->len);
    t[len + acc->len] = 0;
    free(acc->text);
    acc->text = t;
    acc->len += len;
    acc->cap = acc->len + 1;
    if (!lp) return true;
    json_t *o = json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
    if (!o) return false;
    json_t *toks = json_object_get(o, "tokens"), *lps = json_object_get(o, "token_logprobs"), *tops = json_object_get(o, "top_logprobs"),
           *offs = json_object_get(o, "text_offset");
    size_t off = 0;
    bool ok = true;
    for (int32_t i = 0; ok && i < n; i++) {
        json_t *ts = srv_token_str(m, ids[i], NULL);
        const size_t tl = json_string_length(ts);
        ok = !json_array_append_new(toks, ts) && !json_array_append_new(offs, json_integer((json_int_t)off));
        off += tl;
        if (!ok) break;
        if (i == 0) {
            ok = !json_array_append_new(lps, json_null()) && !json_array_append_new(tops, json_null());
            continue;
        }
        json_t *alt = json_object();
        for (int32_t a = 0; alt && a < k; a++) {
            const srv_top *e = &top[(size_t)(i - 1) * (size_t)k + (size_t)a];
            if (e->id < 0) continue;
            json_t *as = srv_token_str(m, e->id, NULL);
            json_object_set_new(alt, json_string_value(as), json_real(e->logprob));
            json_decref(as);
        }
        ok = alt && !json_array_append_new(lps, json_real(lp[i - 1])) && !json_array_append_new(tops, alt);
    }
    /* the generated tokens' entries follow, their offsets moved past the prompt */
    json_t *g = acc->logprobs;
    for (size_t i = 0; ok && g && i < json_array_size(json_object_get(g, "tokens")); i++) {
        ok = !json_array_append(toks, json_array_get(json_object_get(g, "tokens"), i)) &&
             !json_array_append(lps, json_array_get(json_object_get(g, "token_logprobs"), i)) &&
             !json_array_append(tops, json_array_get(json_object_get(g, "top_logprobs"), i)) &&
             !json_array_append_new(offs, json_integer((json_int_t)len + json_integer_value(json_array_get(json_object_get(g, "text_offset"), i))));
    }
    if (!ok) {
        json_decref(o);
        return false;
    }
    json_decref(acc->logprobs);
    acc->logprobs = o;
    return true;
}

void srv_choice_free(srv_choice_acc *acc) {
    free(acc->text);
    json_decref(acc->logprobs);
    json_decref(acc->tokens);
    memset(acc, 0, sizeof *acc);
}

json_t *srv_usage_json(int32_t prompt, int32_t cached, int32_t completion, const srv_cost *cost) {
    json_t *u = json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", prompt, "completion_tokens", completion, "total_tokens",
                          prompt + completion, "prompt_tokens_details", "cached_tokens", cached);
    if (u && cost)
        json_object_set_new(u, "brisk",
                            json_pack("{s:f, s:f, s:f, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:f}", "queue_ms", cost->queue_ms,
                                      "prefill_ms", cost->prefill_ms, "decode_ms", cost->decode_ms, "cached_tokens",
                                      cost->cached_tokens, "sampled_tokens", cost->sampled, "recomputed_tokens", cost->recomputed, "preemptions",
                                      cost->preemptions, "drafted_tokens", (json_int_t)cost->drafted, "accepted_tokens",
                                      (json_int_t)cost->accepted, "flops", (json_int_t)cost->flops, "bytes_read",
                                      (json_int_t)cost->bytes_read, "energy_j", cost->energy_j));
    return u;
}

static json_t *base_object(const srv_resp_meta *meta, const char *object) {
    return json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", meta->id, "object", object, "created", (json_int_t)meta->created,
                     "model", meta->model, "system_fingerprint", meta->fingerprint);
}

json_t *srv_completion_json(const srv_resp_meta *meta, const srv_choice_acc *ch, int32_t n, json_t *usage) {
    json_t *o = base_object(meta, meta->kind == SRV_CHAT ? "chat.completion" : "text_completion");
    json_t *choices = json_array();
    if (!o || !choices) goto fail;
    for (int32_t i = 0; i < n; i++) {
        json_t *text = json_stringn(ch[i].text ? ch[i].text : "", ch[i].len);
        json_t *c;
        if (meta->kind == SRV_CHAT) {
            json_t *lp = ch[i].logprobs ? json_pack("{s:O, s:n}", "content", ch[i].logprobs, "refusal") : json_null();
            c = json_pack("{s:i, s:{s:s, s:o, s:n}, s:o, s:s}", "index", i, "message", "role", "assistant", "content",
                          text ? text : json_string(""), "refusal", "logprobs", lp, "finish_reason", finish_name(ch[i].finish));
        } else {
            c = json_pack("{s:i, s:o, s:O, s:s}", "index", i, "text", text ? text : json_string(""), "logprobs",
                          ch[i].logprobs ? ch[i].logprobs : json_null(), "finish_reason", finish_name(ch[i].finish));
        }
        if (!c || json_array_append_new(choices, c)) goto fail;
    }
    if (json_object_set_new(o, "choices", choices) || json_object_set(o, "usage", usage)) {
        choices = NULL;
        goto fail;
    }
    return o;
fail:
    json_decref(choices);
    json_decref(o);
    return NULL;
}

json_t *srv_chunk_json(const srv_resp_meta *meta, const srv_event *ev, bool first, bool with_usage, const brisk_model *m,
                       bool want_logprobs) {
    const bool chat = meta->kind == SRV_CHAT;
    json_t *o = base_object(meta, chat ? "chat.completion.chunk" : "text_completion");
    if (!o) return NULL;
    json_t *text = json_stringn(ev->text ? ev->text : "", ev->len);
    json_t *fin = ev->finish != SRV_FINISH_NONE ? json_string(finish_name(ev->finish)) : json_null();
    json_t *lp = json_null();
    if (want_logprobs && ev->token >= 0) {
        json_decref(lp);
        if (chat) {
            lp = json_pack("{s:[o], s:n}", "content", chat_logprob(ev, m), "refusal");
        } else {
            lp = json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
            if (lp) legacy_logprob(lp, ev, m, 0);
        }
        if (!lp) lp = json_null();
    }
    json_t *c;
    if (chat) {
        json_t *delta = json_object();
        if (delta && first) json_object_set_new(delta, "role", json_string("assistant"));
        if (delta && (ev->len || ev->finish == SRV_FINISH_NONE || first)) json_object_set_new(delta, "content", text);
        else json_decref(text);
        c = json_pack("{s:i, s:o, s:o, s:o}", "index", ev->choice, "delta", delta ? delta : json_object(), "logprobs", lp,
                      "finish_reason", fin);
    } else {
        c = json_pack("{s:i, s:o, s:o, s:o}", "index", ev->choice, "text", text, "logprobs", lp, "finish_reason", fin);
    }
    if (!c || json_object_set_new(o, "choices", json_pack("[o]", c))) {
        json_decref(o);
        return NULL;
    }
    if (with_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

json_t *srv_delta_chunk_json(const srv_resp_meta *meta, int32_t choice, json_t *delta, const char *finish, bool with_usage) {
    json_t *o = base_object(meta, "chat.completion.chunk");
    json_t *c = json_pack("{s:i, s:o, s:n, s:o}", "index", choice, "delta", delta ? delta : json_object(), "logprobs", "finish_reason",
                          finish ? json_string(finish) : json_null());
    if (!o || !c || json_object_set_new(o, "choices", json_pack("[o]", c))) {
        json_decref(o);
        return NULL;
    }
    if (with_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

json_t *srv_usage_chunk_json(const srv_resp_meta *meta, json_t *usage) {
    json_t *o = base_object(meta, meta->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
    if (!o) return NULL;
    json_object_set_new(o, "choices", json_array());
    json_object_set(o, "usage", usage);
    return o;
}

static json_t *llama_timings(const srv_llama_info *li) {
    const int32_t pn = li->n_prompt - li->n_cached, dn = li->n_decoded;
    const double pms = li->cost ? li->cost->prefill_ms : 0, dms = li->cost ? li->cost->decode_ms : 0;
    return json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f}", "cache_n", li->n_cached, "prompt_n", pn, "prompt_ms", pms,
                     "prompt_per_token_ms", pn > 0 ? pms / pn : 0.0, "prompt_per_second", pms > 0 ? pn * 1e3 / pms : 0.0,
                     "predicted_n", dn, "predicted_ms", dms, "predicted_per_token_ms", dn > 0 ? dms / dn : 0.0,
                     "predicted_per_second", dms > 0 ? dn * 1e3 / dms : 0.0);
}

json_t *srv_llama_final_json(const srv_llama_info *li, const srv_choice_acc *acc, bool stream) {
    const char *stop_type = acc->finish == SRV_FINISH_LENGTH ? "limit" : acc->stop_word ? "word" : acc->eog ? "eos" : "none";
    const size_t len = stream ? 0 : acc->len;
    json_t *content = json_stringn(acc->text && !stream ? acc->text : "", len);
    const bool nl = acc->text && memchr(acc->text, '\n', acc->len) != NULL;
    json_t *tokens = acc->tokens && !stream ? json_incref(acc->tokens) : json_array();
    json_t *o = json_pack("{s:i, s:o, s:o, s:i, s:b, s:s, s:i, s:i, s:s, s:b, s:b, s:s, s:s, s:i, s:o}", "index", 0, "content",
                          content ? content : json_string(""), "tokens", tokens,
                          "id_slot", -1, "stop", 1, "model", li->model, "tokens_predicted", li->n_decoded, "tokens_evaluated",
                          li->n_prompt, "prompt", li->prompt, "has_new_line", nl, "truncated", 0, "stop_type", stop_type,
                          "stopping_word", acc->stop_word ? acc->stop_word : "", "tokens_cached", li->n_prompt + li->n_decoded,
                          "timings", llama_timings(li));
    if (o && !stream && acc->logprobs) json_object_set(o, "completion_probabilities", acc->logprobs);
    return o;
}

json_t *srv_llama_chunk_json(const srv_llama_info *li, const srv_event *ev, const brisk_model *m, bool want_probs) {
    json_t *o = json_pack("{s:i, s:s%, s:[], s:b, s:i, s:i, s:i}", "index", 0, "content", ev->text ? ev->text : "", ev->len,
                          "tokens", "stop", 0, "id_slot", -1, "tokens_predicted", li->n_decoded, "tokens_evaluated", li->n_prompt);
    if (!o) return NULL;
    if (ev->token >= 0) json_array_append_new(json_object_get(o, "tokens"), json_integer(ev->token));
    if (want_probs && ev->token >= 0) json_object_set_new(o, "completion_probabilities", json_pack("[o]", llama_prob(ev, m)));
    return o;
}

json_t *srv_models_json(const char *alias, int64_t created, int32_t n_ctx, const brisk_model_info *info) {
    return json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:{s:s, s:i, s:i, s:I}}]}", "object", "list", "data", "id", alias, "object",
                     "model", "created", (json_int_t)created, "owned_by", "brisk", "meta", "arch", info->arch, "n_ctx", n_ctx,
                     "n_vocab", info->n_vocab, "n_params", (json_int_t)info->n_params);
}
