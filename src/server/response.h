/* response: the JSON the server sends, in OpenAI's shapes: completion
 * objects (chat and legacy), stream chunks, usage, logprobs, the model list.
 * Pure functions of their inputs (no model, no network), shared by the HTTP
 * layer and the tests. */
#ifndef BRISK_SERVER_RESPONSE_H
#define BRISK_SERVER_RESPONSE_H

#include "brisk.h"
#include "server/engine.h"
#include "server/request.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* What every object of one response shares. */
typedef struct srv_resp_meta {
    srv_kind kind;             /* SRV_CHAT or SRV_COMPLETION */
    char id[48];               /* "chatcmpl-..." / "cmpl-..." */
    int64_t created;           /* Unix seconds */
    const char *model;         /* the alias */
    const char *fingerprint;   /* system_fingerprint */
} srv_resp_meta;

/* One choice of a non-streamed response, built from its events. */
typedef struct srv_choice_acc {
    char *text;
    size_t len, cap;
    srv_finish finish;
    json_t *logprobs;          /* chat: the content array; completions: the legacy object; NULL without logprobs */
    size_t text_offset;        /* completions' logprobs text_offset */
    json_t *tokens;            /* /completion: the generated ids */
    const char *stop_word;     /* /completion: the stop string that ended it (borrowed from the job) */
    bool eog;                  /* /completion: ended by an end-of-generation token */
} srv_choice_acc;

/* Append an event to acc (text, finish, logprobs when want_logprobs). piece:
 * the token's own text (for logprobs), NULL otherwise. false when out of memory. */
bool srv_choice_add(srv_choice_acc *acc, srv_kind kind, const srv_event *ev, const brisk_model *m, bool want_logprobs);
void srv_choice_free(srv_choice_acc *acc);
/* echo: text[0..len) (the prompt, valid UTF-8) goes before the choice's text;
 * with lp (NULL: no logprobs), its tokens ids[0..n) go before the legacy
 * logprobs' entries, the first with a null logprob (nothing predicts it),
 * token i with lp[i - 1] and top[(i - 1) * k ..]. false when out of memory. */
bool srv_choice_echo(srv_choice_acc *acc, const brisk_model *m, const char *text, size_t len, const int32_t *ids, int32_t n,
                     const float *lp, const srv_top *top, int32_t k);

/* OpenAI's usage; cost (NULL: left out) adds brisk's own "brisk" object. */
json_t *srv_usage_json(int32_t prompt, int32_t cached, int32_t completion, const srv_cost *cost);
/* The whole response (non-streamed). */
json_t *srv_completion_json(const srv_resp_meta *meta, const srv_choice_acc *ch, int32_t n, json_t *usage);
/* One stream chunk for ev. first: the choice's first chunk (chat adds the
 * role). with_usage: add "usage": null. NULL when out of memory. */
json_t *srv_chunk_json(const srv_resp_meta *meta, const srv_event *ev, bool first, bool with_usage, const brisk_model *m,
                       bool want_logprobs);
/* A chat stream chunk of choice with delta (taken; NULL = {}) and finish (NULL = null): tool-call deltas. */
json_t *srv_delta_chunk_json(const srv_resp_meta *meta, int32_t choice, json_t *delta, const char *finish, bool with_usage);
/* The final usage chunk of include_usage: "choices": [] and the usage. */
json_t *srv_usage_chunk_json(const srv_resp_meta *meta, json_t *usage);
/* llama-server's /completion shapes: the final object (non-streamed, or the
 * stream's last event with content "") and a stream event for one token. */
typedef struct srv_llama_info {
    const char *model, *prompt;   /* prompt: the request's text ("" for token ids) */
    int32_t n_prompt, n_cached, n_decoded;
    const srv_cost *cost;
} srv_llama_info;
json_t *srv_llama_final_json(const srv_llama_info *li, const srv_choice_acc *acc, bool stream);
json_t *srv_llama_chunk_json(const srv_llama_info *li, const srv_event *ev, const brisk_model *m, bool want_probs);

json_t *srv_models_json(const char *alias, int64_t created, int32_t n_ctx, const brisk_model_info *info);

/* A token's own text (decoded alone, valid UTF-8) and its raw bytes as a JSON array. */
json_t *srv_token_str(const brisk_model *m, int32_t id, json_t **bytes);

#endif
