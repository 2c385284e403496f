/* request: the server's request parser and validator. A JSON body (bytes and
 * a length, never trusted) becomes a srv_request with every field checked, or
 * an OpenAI-shaped error naming the parameter that was wrong. Nothing here
 * touches the model or the network, so the libFuzzer target drives it alone
 * (fuzz/fuzz_serve_request.c); the limits that need the model (vocabulary
 * size, context) come in through srv_limits. */
#ifndef BRISK_SERVER_REQUEST_H
#define BRISK_SERVER_REQUEST_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What went wrong, in OpenAI's error shape: {"error": {"message", "type", "param", "code"}}. */
typedef struct srv_error {
    int http;            /* 400, 401, 404, 413, 429, 500, 503 */
    const char *type;    /* static: "invalid_request_error", "authentication_error", ... */
    const char *code;    /* static string code: "invalid_json", "invalid_type", ... */
    char param[64];      /* the offending field ("messages[2].content"), "" = null */
    char message[512];
} srv_error;

void srv_error_set(srv_error *e, int http, const char *type, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* The error as its JSON body (malloc'd, NUL-terminated; NULL when out of memory). */
char *srv_error_json(const srv_error *e);

typedef enum srv_kind {
    SRV_CHAT,            /* POST /v1/chat/completions */
    SRV_COMPLETION,      /* POST /v1/completions */
    SRV_TOKENIZE,        /* POST /tokenize */
    SRV_DETOKENIZE,      /* POST /detokenize */
    SRV_APPLY_TEMPLATE,  /* POST /apply-template */
    SRV_LLAMA,           /* POST /completion (llama-server's own) */
    SRV_KV_SAVE,         /* POST /kv/save {"name", "prompt"} */
    SRV_KV_RESTORE,      /* POST /kv/restore {"name"} */
    SRV_N_KINDS
} srv_kind;

/* Caps a request is checked against (from the command line and the model). */
typedef struct srv_limits {
    int32_t n_vocab;        /* token ids (prompt arrays, logit_bias, detokenize) must be in [0, n_vocab) */
    int32_t max_n;          /* n at most (--max-running) */
    int32_t max_messages;   /* messages per chat request */
    int32_t max_stop;       /* stop strings */
    int32_t max_stop_len;   /* bytes per stop string */
    int32_t max_logit_bias; /* logit_bias entries */
    int32_t max_top_logprobs;
} srv_limits;
srv_limits srv_limits_default(int32_t n_vocab, int32_t max_n);

typedef enum srv_format {
    SRV_FORMAT_TEXT = 0,       /* response_format absent or {"type": "text"} */
    SRV_FORMAT_JSON_OBJECT,    /* {"type": "json_object"}: any JSON object */
    SRV_FORMAT_JSON_SCHEMA,    /* {"type": "json_schema", "json_schema": {"name", "schema", "strict"}} */
} srv_format;

typedef enum srv_tool_choice {
    SRV_TOOL_NONE = 0,         /* no tools, or "none": the tools are shown, never called */
    SRV_TOOL_AUTO,             /* the model answers in text or calls tools (parsed from its output) */
    SRV_TOOL_REQUIRED,         /* it must call some tool (enforced by a constraint) */
    SRV_TOOL_NAMED,            /* it must call tool_named (enforced) */
} srv_tool_choice;

typedef struct srv_request {
    srv_kind kind;
    /* chat / apply-template: the messages as a JSON array for the template,
     * each content flattened to a string (text parts joined); malloc'd */
    char *messages_json;
    /* completions / tokenize: the prompt as text (prompt_text, malloc'd, may
     * hold NULs: prompt_len is exact) or as token ids (prompt_ids, malloc'd) */
    char *prompt_text;
    size_t prompt_len;
    int32_t *prompt_ids;
    int32_t n_prompt_ids;
    bool prompt_is_ids;
    /* generation */
    int64_t max_tokens;     /* -1 = not given (completions: 16; chat: to the end of the context) */
    int32_t n;              /* choices, 1..max_n */
    bool stream, include_usage;
    bool ignore_eos;
    bool logprobs;          /* chat: logprobs true; completions: logprobs = k given */
    int32_t top_logprobs;   /* k alternatives per token (0..max_top_logprobs) */
    int64_t min_tokens;     /* llama.cpp's: end of generation banned before this many tokens */
    bool echo;              /* completions: the prompt's text (and, with logprobs, its tokens' logprobs) first */
    bool spec_set;          /* "spec": "off" | "ngram" | "auto" given (brisk's extension) */
    brisk_sched_spec spec;
    brisk_sampler_params sampling;   /* defaults from the server, then the request's fields */
    brisk_logit_bias *bias; /* malloc'd, n_bias entries; sampling.logit_bias points here */
    int32_t n_bias;
    char **stop;            /* n_stop strings, malloc'd, NUL-terminated (no NUL inside: JSON strings without \u0000) */
    int32_t n_stop;
    /* tokenize / detokenize */
    bool add_special, with_pieces;
    int32_t *tokens;        /* detokenize: malloc'd */
    int32_t n_tokens;
    bool add_generation_prompt;   /* apply-template */
    /* structured output (response_format): the schema to enforce, compact JSON, malloc'd; NULL = free text */
    srv_format format;
    char *schema_json;
    /* tools (chat, apply-template): the tools array as the template gets it (compact JSON, malloc'd; NULL =
     * none), their names (tool_names[n_tools], malloc'd), tool_choice, and the named tool's index */
    char *tools_json;
    char **tool_names;
    int32_t n_tools;
    srv_tool_choice tool_choice;
    int32_t tool_named;
    bool parallel_tool_calls;
    char kv_name[72];       /* kv save / restore: a checked name (srv_kv_name_ok) */
} srv_request;

/* Parse and validate body[0..len) for kind. defaults: the server's sampler
 * settings (copied; its pointers must be NULL). On failure (false) e says why
 * (400 invalid_json / invalid_type / invalid_value / unsupported, ...) and
 * *out holds nothing to free; on success srv_request_free releases it. */
bool srv_request_parse(const uint8_t *body, size_t len, srv_kind kind, const srv_limits *lim,
                       const brisk_sampler_params *defaults, srv_request *out, srv_error *e);
void srv_request_free(srv_request *r);

/* A KV state's name: 1..64 bytes of [A-Za-z0-9_.-], not starting with '.'
 * (no "..", no '/', no hidden files): it becomes DIR/NAME.kvstate. */
bool srv_kv_name_ok(const char *name, size_t len);

/* A copy of s[0..n) with every byte that is not part of well-formed UTF-8
 * replaced by U+FFFD (JSON strings must be UTF-8); malloc'd, NUL-terminated,
 * *out_len exact. NULL when out of memory. */
char *srv_utf8_sanitize(const char *s, size_t n, size_t *out_len);

#endif
