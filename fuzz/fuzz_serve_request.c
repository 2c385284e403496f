/* fuzz_serve_request: libFuzzer target for the server's request parser and
 * validator (src/server/request.c) and its stop-string holdback (stop.c).
 * The first byte picks the endpoint, the rest is the JSON body. Checks: no
 * crash, leak or UB; a refusal is an OpenAI error whose JSON has exactly
 * message/type/param/code and a 4xx/5xx status; an accepted request has every
 * field in range; a chat request's messages render through a small template;
 * and streaming the prompt through the stop strings in uneven pieces releases
 * exactly the text before the first match (or all of it). */
#include "fuzz_check.h"
#include "server/request.h"
#include "server/stop.h"
#include "template/template.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char tpl_src[] =
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] if m['content'] is string else '' }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}";

static void check_error(const srv_error *e) {
    FUZZ_CHECK(e->http >= 400 && e->http < 600);
    FUZZ_CHECK(e->code && e->type && e->message[0]);
    char *js = srv_error_json(e);
    FUZZ_CHECK(js);
    json_t *o = json_loads(js, 0, NULL);
    FUZZ_CHECK(o);
    json_t *err = json_object_get(o, "error");
    FUZZ_CHECK(json_is_object(err) && json_object_size(err) == 4);
    FUZZ_CHECK(json_is_string(json_object_get(err, "message")) && json_is_string(json_object_get(err, "code")));
    json_decref(o);
    free(js);
}

/* The stop holdback against a direct search: the text arrives in pieces of
 * 1..7 bytes (as tokens would), and generation stops after the first piece
 * at whose end a stop string occurs, cut at the earliest match start. */
static void check_stop(const srv_request *r, const uint8_t *seed, size_t n_seed) {
    if (!r->prompt_text || r->n_stop == 0) return;
    const char *t = r->prompt_text;
    const size_t n = r->prompt_len;
    size_t maxlen = 0;
    for (int32_t k = 0; k < r->n_stop; k++) maxlen = strlen(r->stop[k]) > maxlen ? strlen(r->stop[k]) : maxlen;
    srv_stop s;
    srv_stop_init(&s, r->stop, r->n_stop);
    char *got = malloc(n + 1);
    FUZZ_CHECK(got);
    size_t got_n = 0, off = 0, step = 0, first = n;
    bool hit = false;
    while (off < n && !hit) {
        size_t piece = 1 + (n_seed ? seed[step++ % n_seed] % 7 : 0);
        if (piece > n - off) piece = n - off;
        const char *o;
        size_t on;
        FUZZ_CHECK(srv_stop_push(&s, t + off, piece, &o, &on));
        FUZZ_CHECK(got_n + on <= n);
        memcpy(got + got_n, o, on);
        got_n += on;
        /* a new match ends inside this piece */
        const size_t from = off + 1 > maxlen ? off + 1 - maxlen : 0;
        off += piece;
        for (int32_t k = 0; k < r->n_stop; k++) {
            const char *m = memmem(t + from, off - from, r->stop[k], strlen(r->stop[k]));
            if (m && (size_t)(m - t) < first) first = (size_t)(m - t);
        }
        hit = first < n;
        FUZZ_CHECK(s.hit == hit);
    }
    const char *o;
    size_t on;
    srv_stop_flush(&s, &o, &on);
    FUZZ_CHECK(got_n + on <= n);
    memcpy(got + got_n, o, on);
    got_n += on;
    FUZZ_CHECK(got_n == first && memcmp(got, t, first) == 0);
    srv_stop_free(&s);
    free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static brisk_template *tpl;
    if (!tpl) {
        brisk_error err;
        FUZZ_CHECK(brisk_template_parse(tpl_src, strlen(tpl_src), &tpl, &err) == BRISK_OK);
    }
    if (size < 1) return 0;
    const srv_kind kind = (srv_kind)(data[0] % SRV_N_KINDS);
    const srv_limits lim = srv_limits_default(4096, 8);
    const brisk_sampler_params def = brisk_sampler_default_params();
    srv_request r;
    srv_error e;
    memset(&e, 0, sizeof e);
    if (!srv_request_parse(data + 1, size - 1, kind, &lim, &def, &r, &e)) {
        check_error(&e);
        return 0;
    }
    FUZZ_CHECK(r.kind == kind);
    FUZZ_CHECK(r.n >= 1 && r.n <= lim.max_n);
    FUZZ_CHECK(r.max_tokens == -1 || r.max_tokens >= 1 || (r.max_tokens == 0 && r.echo));
    FUZZ_CHECK(!r.echo || kind == SRV_COMPLETION);
    if (kind == SRV_KV_SAVE || kind == SRV_KV_RESTORE) {
        /* a name that cannot leave the directory */
        FUZZ_CHECK(srv_kv_name_ok(r.kv_name, strlen(r.kv_name)) && !strchr(r.kv_name, '/') && r.kv_name[0] != '.');
    }
    FUZZ_CHECK(r.min_tokens >= 0);
    FUZZ_CHECK(!r.spec_set || (r.spec >= BRISK_SCHED_SPEC_OFF && r.spec <= BRISK_SCHED_SPEC_DRAFT));   /* off, ngram, auto, draft */
    FUZZ_CHECK(r.n_stop >= 0 && r.n_stop <= lim.max_stop);
    for (int32_t k = 0; k < r.n_stop; k++) FUZZ_CHECK(r.stop[k] && r.stop[k][0]);
    FUZZ_CHECK(r.n_bias <= lim.max_logit_bias);
    for (int32_t k = 0; k < r.n_bias; k++) FUZZ_CHECK(r.bias[k].token >= 0 && r.bias[k].token < lim.n_vocab);
    for (int32_t k = 0; k < r.n_prompt_ids; k++) FUZZ_CHECK(r.prompt_ids[k] >= 0 && r.prompt_ids[k] < lim.n_vocab);
    for (int32_t k = 0; k < r.n_tokens; k++) FUZZ_CHECK(r.tokens[k] >= 0 && r.tokens[k] < lim.n_vocab);
    FUZZ_CHECK(r.top_logprobs >= 0 && r.top_logprobs <= lim.max_top_logprobs);
    /* structured output and tools: a schema to compile exactly when one is asked for, a named tool among the tools */
    FUZZ_CHECK((r.format == SRV_FORMAT_TEXT) == (r.schema_json == NULL));
    FUZZ_CHECK((r.tools_json != NULL) == (r.n_tools > 0));
    FUZZ_CHECK(r.tool_choice != SRV_TOOL_NAMED || (r.tool_named >= 0 && r.tool_named < r.n_tools));
    FUZZ_CHECK(r.tool_choice == SRV_TOOL_NONE || r.n_tools > 0);
    for (int32_t k = 0; k < r.n_tools; k++) FUZZ_CHECK(r.tool_names[k] && r.tool_names[k][0]);
    if (kind == SRV_CHAT || kind == SRV_APPLY_TEMPLATE) {
        FUZZ_CHECK(r.messages_json);
        json_t *m = json_loads(r.messages_json, 0, NULL);
        FUZZ_CHECK(json_is_array(m) && json_array_size(m) >= 1);
        json_decref(m);
        brisk_template_opts o = {.now = 1767361530, .max_output = 1 << 20, .max_work = 2000000};
        char *out = NULL;
        size_t out_len = 0;
        brisk_error err;
        const brisk_status st = brisk_template_render_ex(tpl, r.messages_json, "{\"add_generation_prompt\":true}", &o, &out,
                                                         &out_len, &err);
        FUZZ_CHECK(st == BRISK_OK || st == BRISK_ERR_CAPACITY || st == BRISK_ERR_TEMPLATE);
        free(out);
    }
    check_stop(&r, data, size);
    /* the text of any piece the server sends is valid UTF-8 */
    if (r.prompt_text) {
        size_t sl = 0;
        char *clean = srv_utf8_sanitize(r.prompt_text, r.prompt_len, &sl);
        FUZZ_CHECK(clean);
        json_t *js = json_stringn(clean, sl);
        FUZZ_CHECK(js);
        json_decref(js);
        free(clean);
    }
    srv_request_free(&r);
    return 0;
}
