/* request: JSON body -> validated srv_request, or an OpenAI-shaped error.
 * Every field is type- and range-checked here, once, so what reaches the
 * inference thread is known good; unknown fields are ignored (as llama-server
 * does). See request.h. */
#include "server/request.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *T_INVALID = "invalid_request_error";

void srv_error_set(srv_error *e, int http, const char *type, const char *code, const char *param, const char *fmt, ...) {
    e->http = http;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

char *srv_error_json(const srv_error *e) {
    size_t ml = 0;
    char *msg = srv_utf8_sanitize(e->message, strlen(e->message), &ml);
    if (!msg) return NULL;
    json_t *o = json_pack("{s:{s:s%, s:s, s:o, s:s}}", "error", "message", msg, ml, "type", e->type ? e->type : T_INVALID,
                          "param", e->param[0] ? json_string(e->param) : json_null(), "code", e->code ? e->code : "error");
    free(msg);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

srv_limits srv_limits_default(int32_t n_vocab, int32_t max_n) {
    return (srv_limits){.n_vocab = n_vocab, .max_n = max_n, .max_messages = 4096, .max_stop = 16, .max_stop_len = 256,
                        .max_logit_bias = 1024, .max_top_logprobs = 20};
}

/* ---- UTF-8 --------------------------------------------------------------------------------- */

/* Length of the well-formed UTF-8 character at s (n bytes left), 0 when not one. */
static size_t utf8_char(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
    else return 0;
    if (n < len) return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

char *srv_utf8_sanitize(const char *s, size_t n, size_t *out_len) {
    size_t cap;
    if (!__builtin_mul_overflow(n, (size_t)3, &cap) && cap + 1 > cap) cap += 1;
    else return NULL;
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        const size_t k = utf8_char((const unsigned char *)s + i, n - i);
        if (k) {
            memcpy(out + w, s + i, k);
            w += k;
            i += k;
        } else {
            memcpy(out + w, "\xef\xbf\xbd", 3);
            w += 3;
            i++;
        }
    }
    out[w] = 0;
    if (out_len) *out_len = w;
    return out;
}

/* ---- typed fields ----------------------------------------------------------------------------- */

static bool bad_type(srv_error *e, const char *param, const char *want) {
    srv_error_set(e, 400, T_INVALID, "invalid_type", param, "'%s' must be %s", param, want);
    return false;
}

static bool bad_value(srv_error *e, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool bad_value(srv_error *e, const char *param, const char *fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    srv_error_set(e, 400, T_INVALID, "invalid_value", param, "'%s' %s", param, buf);
    return false;
}

/* A present, non-null field (NULL when absent or null: the default applies). */
static json_t *field(json_t *o, const char *name) {
    json_t *v = json_object_get(o, name);
    return v && !json_is_null(v) ? v : NULL;
}

static bool get_bool(json_t *o, const char *name, bool *out, srv_error *e) {
    json_t *v = field(o, name);
    if (!v) return true;
    if (!json_is_boolean(v)) return bad_type(e, name, "a boolean");
    *out = json_is_true(v);
    return true;
}

static bool get_num(json_t *o, const char *name, double lo, double hi, float *out, srv_error *e) {
    json_t *v = field(o, name);
    if (!v) return true;
    if (!json_is_number(v)) return bad_type(e, name, "a number");
    const double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi) return bad_value(e, name, "must be between %g and %g (got %g)", lo, hi, d);
    *out = (float)d;
    return true;
}

static bool get_int(json_t *o, const char *name, int64_t lo, int64_t hi, int64_t *out, bool *given, srv_error *e) {
    json_t *v = field(o, name);
    if (given) *given = false;
    if (!v) return true;
    if (!json_is_integer(v)) {
        /* 16.0 is an integer in JSON's eyes and in most clients' */
        if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e15) {
            const int64_t i = (int64_t)json_real_value(v);
            if (i < lo || i > hi) return bad_value(e, name, "must be between %lld and %lld", (long long)lo, (long long)hi);
            *out = i;
            if (given) *given = true;
            return true;
        }
        return bad_type(e, name, "an integer");
    }
    const json_int_t i = json_integer_value(v);
    if (i < lo || i > hi) return bad_value(e, name, "must be between %lld and %lld (got %lld)", (long long)lo, (long long)hi, (long long)i);
    *out = (int64_t)i;
    if (given) *given = true;
    return true;
}

/* A JSON string's bytes as a malloc'd NUL-terminated copy. */
static char *dup_str(json_t *s, size_t *len) {
    const size_t n = json_string_length(s);
    char *c = malloc(n + 1);
    if (!c) return NULL;
    memcpy(c, json_string_value(s), n);
    c[n] = 0;
    if (len) *len = n;
    return c;
}

static bool oom(srv_error *e) {
    srv_error_set(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
    return false;
}

/* An array of token ids in [0, n_vocab). */
static bool get_ids(json_t *a, const char *param, int32_t n_vocab, int32_t **out, int32_t *n, srv_error *e) {
    const size_t len = json_array_size(a);
    if (len > (1u << 24)) return bad_value(e, param, "has too many tokens (%zu)", len);
    int32_t *ids = malloc((len ? len : 1) * sizeof *ids);
    if (!ids) return oom(e);
    for (size_t k = 0; k < len; k++) {
        json_t *t = json_array_get(a, k);
        char p[64];
        snprintf(p, sizeof p, "%s[%zu]", param, k);
        if (!json_is_integer(t)) {
            free(ids);
            return bad_type(e, p, "a token id (an integer)");
        }
        const json_int_t id = json_integer_value(t);
        if (id < 0 || id >= n_vocab) {
            free(ids);
            return bad_value(e, p, "is not a token id of this model (%lld; the vocabulary has %d)", (long long)id, n_vocab);
        }
        ids[k] = (int32_t)id;
    }
    *out = ids;
    *n = (int32_t)len;
    return true;
}

/* ---- messages ------------------------------------------------------------------------------- */

/* An assistant message's tool_calls as templates expect them (transformers' convention): each
 * function.arguments an object, where OpenAI's clients send it as a JSON string. */
static bool tool_calls_for_template(json_t *msg, size_t k, srv_error *e) {
    json_t *tc = json_object_get(msg, "tool_calls");
    if (!tc || json_is_null(tc)) return true;
    char p[80];
    snprintf(p, sizeof p, "messages[%zu].tool_calls", k);
    if (!json_is_array(tc)) return bad_type(e, p, "an array of tool calls");
    json_t *copy = json_deep_copy(tc);
    if (!copy || json_object_set_new(msg, "tool_calls", copy)) return oom(e);
    for (size_t i = 0; i < json_array_size(copy); i++) {
        json_t *c = json_array_get(copy, i);
        snprintf(p, sizeof p, "messages[%zu].tool_calls[%zu].function", k, i);
        json_t *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
        if (!json_is_object(fn)) return bad_type(e, p, "an object");
        json_t *name = json_object_get(fn, "name");
        if (!json_is_string(name)) {
            snprintf(p + strlen(p), sizeof p - strlen(p), ".name");
            return bad_type(e, p, "a string");
        }
        json_t *args = json_object_get(fn, "arguments");
        if (json_is_string(args)) {
            json_t *parsed = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, NULL);
            if (json_is_object(parsed)) json_object_set_new(fn, "arguments", parsed);
            else json_decref(parsed);
        }
    }
    return true;
}

/* The messages for the template: each content a string (an array of text
 * parts joined; null stays null, or "" for an assistant turn with tool calls), the
 * other members copied as they are. */
static bool get_messages(json_t *body, const srv_limits *lim, char **out, srv_error *e) {
    json_t *msgs = json_object_get(body, "messages");
    if (!msgs) {
        srv_error_set(e, 400, T_INVALID, "missing_required_parameter", "messages", "'messages' is required");
        return false;
    }
    if (!json_is_array(msgs)) return bad_type(e, "messages", "an array of messages");
    const size_t n = json_array_size(msgs);
    if (n == 0) return bad_value(e, "messages", "must hold at least one message");
    if (n > (size_t)lim->max_messages) return bad_value(e, "messages", "holds %zu messages; at most %d are accepted", n, lim->max_messages);
    json_t *norm = json_array();
    if (!norm) return oom(e);
    char p[64];
    for (size_t k = 0; k < n; k++) {
        json_t *m = json_array_get(msgs, k);
        snprintf(p, sizeof p, "messages[%zu]", k);
        if (!json_is_object(m)) { json_decref(norm); return bad_type(e, p, "an object"); }
        json_t *role = json_object_get(m, "role");
        snprintf(p, sizeof p, "messages[%zu].role", k);
        if (!role) {
            json_decref(norm);
            srv_error_set(e, 400, T_INVALID, "missing_required_parameter", p, "'%s' is required", p);
            return false;
        }
        if (!json_is_string(role) || json_string_length(role) == 0) { json_decref(norm); return bad_type(e, p, "a non-empty string"); }
        json_t *copy = json_copy(m);   /* shallow: members are shared, content replaced below */
        if (!copy || json_array_append_new(norm, copy)) { json_decref(norm); return oom(e); }
        if (!tool_calls_for_template(copy, k, e)) { json_decref(norm); return false; }
        json_t *content = json_object_get(m, "content");
        snprintf(p, sizeof p, "messages[%zu].content", k);
        if (!content || json_is_null(content)) {
            /* an assistant turn that only calls tools: "" (as llama-server passes it), since templates such as
             * Qwen3's test "'</think>' in message.content", which fails on null */
            json_t *tc = json_object_get(m, "tool_calls");
            const bool calls = json_is_array(tc) && json_array_size(tc) > 0;
            if (json_object_set_new(copy, "content", calls ? json_string("") : json_null())) { json_decref(norm); return oom(e); }
            continue;
        }
        if (json_is_string(content)) continue;
        if (!json_is_array(content)) { json_decref(norm); return bad_type(e, p, "a string or an array of content parts"); }
        /* text parts joined with no separator (as OpenAI concatenates them) */
        size_t total = 0;
        const size_t np = json_array_size(content);
        for (size_t j = 0; j < np; j++) {
            json_t *part = json_array_get(content, j);
            char pp[80];
            snprintf(pp, sizeof pp, "messages[%zu].content[%zu]", k, j);
            if (!json_is_object(part)) { json_decref(norm); return bad_type(e, pp, "a content part object"); }
            json_t *type = json_object_get(part, "type");
            if (!json_is_string(type)) { json_decref(norm); snprintf(pp + strlen(pp), sizeof pp - strlen(pp), ".type"); return bad_type(e, pp, "a string"); }
            if (strcmp(json_string_value(type), "text") != 0) {
                json_decref(norm);
                srv_error_set(e, 400, T_INVALID, "unsupported_content", pp, "content parts of type '%s' are not supported (text only)",
                              json_string_value(type));
                return false;
            }
            json_t *text = json_object_get(part, "text");
            if (!json_is_string(text)) { json_decref(norm); snprintf(pp + strlen(pp), sizeof pp - strlen(pp), ".text"); return bad_type(e, pp, "a string"); }
            total += json_string_length(text);
        }
        char *joined = malloc(total + 1);
        if (!joined) { json_decref(norm); return oom(e); }
        size_t w = 0;
        for (size_t j = 0; j < np; j++) {
            json_t *text = json_object_get(json_array_get(content, j), "text");
            memcpy(joined + w, json_string_value(text), json_string_length(text));
            w += json_string_length(text);
        }
        json_t *js = json_stringn_nocheck(joined, w);   /* parts were valid UTF-8, so is their concatenation */
        free(joined);
        if (!js || json_object_set_new(copy, "content", js)) { json_decref(norm); return oom(e); }
    }
    *out = json_dumps(norm, JSON_COMPACT);
    json_decref(norm);
    return *out ? true : oom(e);
}

/* ---- the request ------------------------------------------------------------------------------ */

static bool get_prompt(json_t *body, srv_kind kind, const srv_limits *lim, srv_request *r, srv_error *e) {
    const char *name = kind == SRV_TOKENIZE ? "content" : "prompt";
    json_t *p = json_object_get(body, name);
    if (!p || json_is_null(p)) {
        srv_error_set(e, 400, T_INVALID, "missing_required_parameter", name, "'%s' is required", name);
        return false;
    }
    if (json_is_array(p) && (kind == SRV_COMPLETION || kind == SRV_LLAMA)) {
        const size_t n = json_array_size(p);
        if (n == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
        else if (n > 0 && json_is_string(json_array_get(p, 0)))
            return bad_value(e, name, "holds %zu prompts; one prompt per request is supported", n);
        else if (n > 0 && json_is_array(json_array_get(p, 0)))
            return bad_value(e, name, "holds several token arrays; one prompt per request is supported");
        else {
            if (!get_ids(p, name, lim->n_vocab, &r->prompt_ids, &r->n_prompt_ids, e)) return false;
            r->prompt_is_ids = true;
            return true;
        }
    }
    if (!json_is_string(p))
        return bad_type(e, name, kind == SRV_COMPLETION || kind == SRV_LLAMA ? "a string or an array of token ids" : "a string");
    if (!(r->prompt_text = dup_str(p, &r->prompt_len))) return oom(e);
    return true;
}

static bool get_stop(json_t *body, const srv_limits *lim, srv_request *r, srv_error *e) {
    json_t *s = field(body, "stop");
    if (!s) return true;
    json_t *one = json_is_string(s) ? s : NULL;
    if (!one && !json_is_array(s)) return bad_type(e, "stop", "a string or an array of strings");
    const size_t n = one ? 1 : json_array_size(s);
    if (n > (size_t)lim->max_stop) return bad_value(e, "stop", "holds %zu strings; at most %d are accepted", n, lim->max_stop);
    if (n == 0) return true;
    if (!(r->stop = calloc(n, sizeof *r->stop))) return oom(e);
    for (size_t k = 0; k < n; k++) {
        json_t *v = one ? one : json_array_get(s, k);
        char p[32];
        snprintf(p, sizeof p, one ? "stop" : "stop[%zu]", k);
        if (!json_is_string(v)) return bad_type(e, p, "a string");
        const size_t len = json_string_length(v);
        if (len == 0) return bad_value(e, p, "must not be empty");
        if (len > (size_t)lim->max_stop_len) return bad_value(e, p, "is %zu bytes; at most %d are accepted", len, lim->max_stop_len);
        if (!(r->stop[k] = dup_str(v, NULL))) return oom(e);
        r->n_stop++;
    }
    return true;
}

static bool get_logit_bias(json_t *body, const srv_limits *lim, srv_request *r, srv_error *e) {
    json_t *b = field(body, "logit_bias");
    if (!b) return true;
    if (!json_is_object(b)) return bad_type(e, "logit_bias", "an object mapping token ids to biases");
    const size_t n = json_object_size(b);
    if (n > (size_t)lim->max_logit_bias) return bad_value(e, "logit_bias", "holds %zu entries; at most %d are accepted", n, lim->max_logit_bias);
    if (n == 0) return true;
    if (!(r->bias = calloc(n, sizeof *r->bias))) return oom(e);
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v) {
        char p[64];
        snprintf(p, sizeof p, "logit_bias.%.40s", key);
        char *end = NULL;
        const long long id = strtoll(key, &end, 10);
        if (!*key || *end || key[0] == '+' || key[0] == ' ' || id < 0 || id >= lim->n_vocab)
            return bad_value(e, p, "names no token id of this model (keys are ids in [0, %d))", lim->n_vocab);
        if (!json_is_number(v)) return bad_type(e, p, "a number");
        const double d = json_number_value(v);
        if (!isfinite(d) || d < -100 || d > 100) return bad_value(e, p, "must be between -100 and 100");
        /* -100 bans the token, as OpenAI documents it */
        r->bias[r->n_bias++] = (brisk_logit_bias){(int32_t)id, d <= -100 ? -INFINITY : (float)d};
    }
    r->sampling.logit_bias = r->bias;
    r->sampling.n_logit_bias = r->n_bias;
    return true;
}

static bool unsupported(json_t *body, srv_error *e) {
    if (field(body, "suffix")) {
        srv_error_set(e, 400, T_INVALID, "unsupported_parameter", "suffix", "'suffix' (fill in the middle) is not supported");
        return false;
    }
    return true;
}

/* response_format: text (the default), json_object (any JSON object; llama.cpp's "schema" member there makes it
 * a schema) or json_schema {"name", "schema", "strict"}. The schema is compiled against the vocabulary later
 * (an unsupported keyword is a 400 then); here only its shape is checked. */
static bool get_response_format(json_t *body, srv_request *r, srv_error *e) {
    json_t *rf = field(body, "response_format");
    if (!rf) return true;
    if (!json_is_object(rf)) return bad_type(e, "response_format", "an object");
    json_t *t = json_object_get(rf, "type");
    if (!t) {
        srv_error_set(e, 400, T_INVALID, "missing_required_parameter", "response_format.type", "'response_format.type' is required");
        return false;
    }
    if (!json_is_string(t)) return bad_type(e, "response_format.type", "a string");
    const char *ty = json_string_value(t);
    json_t *schema = NULL;
    if (strcmp(ty, "text") == 0) return true;
    if (strcmp(ty, "json_object") == 0) {
        schema = field(rf, "schema");
        if (schema && !json_is_object(schema)) return bad_type(e, "response_format.schema", "a JSON Schema object");
        r->format = schema ? SRV_FORMAT_JSON_SCHEMA : SRV_FORMAT_JSON_OBJECT;
    } else if (strcmp(ty, "json_schema") == 0) {
        json_t *js = json_object_get(rf, "json_schema");
        if (!js || json_is_null(js)) {
            srv_error_set(e, 400, T_INVALID, "missing_required_parameter", "response_format.json_schema",
                          "'response_format.json_schema' is required with type 'json_schema'");
            return false;
        }
        if (!json_is_object(js)) return bad_type(e, "response_format.json_schema", "an object");
        json_t *name = field(js, "name");
        if (name && !json_is_string(name)) return bad_type(e, "response_format.json_schema.name", "a string");
        json_t *strict = field(js, "strict");
        if (strict && !json_is_boolean(strict)) return bad_type(e, "response_format.json_schema.strict", "a boolean");
        schema = field(js, "schema");
        if (!schema) {
            srv_error_set(e, 400, T_INVALID, "missing_required_parameter", "response_format.json_schema.schema",
                          "'response_format.json_schema.schema' is required");
            return false;
        }
        if (!json_is_object(schema) && !json_is_boolean(schema))
            return bad_type(e, "response_format.json_schema.schema", "a JSON Schema (an object or a boolean)");
        r->format = SRV_FORMAT_JSON_SCHEMA;
    } else {
        return bad_value(e, "response_format.type", "must be \"text\", \"json_object\" or \"json_schema\" (got \"%.40s\")", ty);
    }
    if (r->format == SRV_FORMAT_JSON_OBJECT) {
        if (!(r->schema_json = strdup("{\"type\":\"object\"}"))) return oom(e);
    } else if (!(r->schema_json = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY))) {
        return oom(e);
    }
    return true;
}

/* A function name as OpenAI allows it: 1..64 of [A-Za-z0-9_-]. */
static bool tool_name_ok(const char *s, size_t n) {
    if (n < 1 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

/* tools [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}], tool_choice
 * ("none", "auto", "required" or {"type": "function", "function": {"name"}}) and parallel_tool_calls. */
static bool get_tools(json_t *body, srv_request *r, srv_error *e) {
    json_t *tools = field(body, "tools");
    json_t *choice = field(body, "tool_choice");
    r->parallel_tool_calls = true;
    if (!get_bool(body, "parallel_tool_calls", &r->parallel_tool_calls, e)) return false;
    if (tools && !json_is_array(tools)) return bad_type(e, "tools", "an array of tools");
    const size_t n = tools ? json_array_size(tools) : 0;
    if (n > 128) return bad_value(e, "tools", "holds %zu tools; at most 128 are accepted", n);
    if (n == 0) {
        if (choice && !(json_is_string(choice) && strcmp(json_string_value(choice), "none") == 0)) {
            srv_error_set(e, 400, T_INVALID, "invalid_value", "tool_choice", "'tool_choice' is only allowed when 'tools' are given");
            return false;
        }
        return true;
    }
    if (!(r->tool_names = calloc(n, sizeof *r->tool_names))) return oom(e);
    char p[64];
    for (size_t k = 0; k < n; k++) {
        json_t *t = json_array_get(tools, k);
        snprintf(p, sizeof p, "tools[%zu]", k);
        if (!json_is_object(t)) return bad_type(e, p, "an object");
        json_t *ty = json_object_get(t, "type");
        snprintf(p, sizeof p, "tools[%zu].type", k);
        if (!json_is_string(ty) || strcmp(json_string_value(ty), "function") != 0) return bad_value(e, p, "must be \"function\"");
        json_t *fn = json_object_get(t, "function");
        snprintf(p, sizeof p, "tools[%zu].function", k);
        if (!json_is_object(fn)) return bad_type(e, p, "an object");
        json_t *name = json_object_get(fn, "name");
        snprintf(p, sizeof p, "tools[%zu].function.name", k);
        if (!json_is_string(name)) return bad_type(e, p, "a string");
        if (!tool_name_ok(json_string_value(name), json_string_length(name)))
            return bad_value(e, p, "must be 1 to 64 of the characters a-z A-Z 0-9 _ -");
        for (size_t j = 0; j < k; j++)
            if (strcmp(r->tool_names[j], json_string_value(name)) == 0) return bad_value(e, p, "repeats the name of tools[%zu]", j);
        json_t *params = field(fn, "parameters");
        snprintf(p, sizeof p, "tools[%zu].function.parameters", k);
        if (params && !json_is_object(params)) return bad_type(e, p, "a JSON Schema object");
        json_t *desc = field(fn, "description");
        snprintf(p, sizeof p, "tools[%zu].function.description", k);
        if (desc && !json_is_string(desc)) return bad_type(e, p, "a string");
        if (!(r->tool_names[k] = dup_str(name, NULL))) return oom(e);
        r->n_tools++;
    }
    r->tool_choice = SRV_TOOL_AUTO;
    if (choice) {
        if (json_is_string(choice)) {
            const char *c = json_string_value(choice);
            if (strcmp(c, "none") == 0) r->tool_choice = SRV_TOOL_NONE;
            else if (strcmp(c, "auto") == 0) r->tool_choice = SRV_TOOL_AUTO;
            else if (strcmp(c, "required") == 0) r->tool_choice = SRV_TOOL_REQUIRED;
            else return bad_value(e, "tool_choice", "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}} (got \"%.40s\")", c);
        } else if (json_is_object(choice)) {
            json_t *ty = json_object_get(choice, "type");
            if (!json_is_string(ty) || strcmp(json_string_value(ty), "function") != 0)
                return bad_value(e, "tool_choice.type", "must be \"function\"");
            json_t *fn = json_object_get(choice, "function");
            json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
            if (!json_is_string(name)) return bad_type(e, "tool_choice.function.name", "a string");
            int32_t which = -1;
            for (int32_t k = 0; k < r->n_tools; k++)
                if (strcmp(r->tool_names[k], json_string_value(name)) == 0) which = k;
            if (which < 0) return bad_value(e, "tool_choice.function.name", "names no tool of 'tools' (\"%.64s\")", json_string_value(name));
            r->tool_choice = SRV_TOOL_NAMED;
            r->tool_named = which;
        } else {
            return bad_type(e, "tool_choice", "a string or an object");
        }
    }
    if (!(r->tools_json = json_dumps(tools, JSON_COMPACT))) return oom(e);
    return true;
}

static bool get_generation(json_t *body, srv_kind kind, const srv_limits *lim, srv_request *r, srv_error *e) {
    if (!unsupported(body, e)) return false;
    brisk_sampler_params *sp = &r->sampling;
    int64_t v = 0;
    bool given = false;
    /* echo (legacy completions): the prompt comes back first, with its logprobs when logprobs is given;
     * max_tokens 0 then scores the prompt alone (what evaluation harnesses send) */
    if (!get_bool(body, "echo", &r->echo, e)) return false;
    if (r->echo && kind != SRV_COMPLETION) {
        srv_error_set(e, 400, T_INVALID, "unsupported_parameter", "echo", "'echo' is a /v1/completions parameter");
        return false;
    }
    if (!get_int(body, "max_tokens", -1, 1 << 30, &v, &given, e)) return false;
    if (given && v == 0 && !r->echo) return bad_value(e, "max_tokens", "must be at least 1 (or -1 for no limit; 0 only with echo)");
    if (given) r->max_tokens = v;
    if (!get_int(body, "max_completion_tokens", -1, 1 << 30, &v, &given, e)) return false;
    if (given && v == 0) return bad_value(e, "max_completion_tokens", "must be at least 1 (or -1 for no limit)");
    if (given) r->max_tokens = v;
    if (!get_int(body, "n_predict", -1, 1 << 30, &v, &given, e)) return false;   /* llama.cpp's name */
    if (given && v != 0) r->max_tokens = v;
    r->n = 1;
    if (!get_int(body, "n", 1, lim->max_n, &v, &given, e)) return false;
    if (given) r->n = (int32_t)v;
    if (!get_bool(body, "stream", &r->stream, e)) return false;
    json_t *so = field(body, "stream_options");
    if (so) {
        if (!json_is_object(so)) return bad_type(e, "stream_options", "an object");
        json_t *iu = field(so, "include_usage");
        if (iu && !json_is_boolean(iu)) return bad_type(e, "stream_options.include_usage", "a boolean");
        r->include_usage = iu && json_is_true(iu);
    }
    if (!get_num(body, "temperature", 0, 100, &sp->temp, e)) return false;
    if (!get_num(body, "top_p", 0, 1, &sp->top_p, e)) return false;
    if (!get_num(body, "min_p", 0, 1, &sp->min_p, e)) return false;
    if (!get_num(body, "typical_p", 0, 1, &sp->typical_p, e)) return false;
    if (!get_int(body, "top_k", 0, 1 << 24, &v, &given, e)) return false;
    if (given) sp->top_k = (int32_t)v;
    if (!get_num(body, "presence_penalty", -100, 100, &sp->presence_penalty, e)) return false;
    if (!get_num(body, "frequency_penalty", -100, 100, &sp->freq_penalty, e)) return false;
    if (!get_num(body, "repeat_penalty", 1e-3, 1e3, &sp->repeat_penalty, e)) return false;
    if (!get_int(body, "repeat_last_n", 0, 1 << 20, &v, &given, e)) return false;
    if (given) sp->repeat_last_n = (int32_t)v;
    if (!get_int(body, "seed", INT64_MIN, INT64_MAX, &v, &given, e)) return false;
    if (given) sp->seed = v < 0 ? BRISK_SEED_RANDOM : (uint64_t)v;
    if (!get_bool(body, "ignore_eos", &r->ignore_eos, e)) return false;
    bool cache_prompt = true;   /* accepted; the prefix cache is always on */
    if (!get_bool(body, "cache_prompt", &cache_prompt, e)) return false;
    /* logprobs: chat takes a boolean and top_logprobs; completions an integer k */
    json_t *lp = field(body, "logprobs");
    if (lp && kind == SRV_CHAT) {
        if (!json_is_boolean(lp)) return bad_type(e, "logprobs", "a boolean");
        r->logprobs = json_is_true(lp);
        if (!get_int(body, "top_logprobs", 0, lim->max_top_logprobs, &v, &given, e)) return false;
        if (given && !r->logprobs) return bad_value(e, "top_logprobs", "needs 'logprobs': true");
        if (given) r->top_logprobs = (int32_t)v;
    } else if (lp) {
        if (!get_int(body, "logprobs", 0, lim->max_top_logprobs, &v, &given, e)) return false;
        r->logprobs = true;
        r->top_logprobs = (int32_t)v;
    }
    /* llama.cpp's n_probs: top alternatives per token (its completions shape; here the request's logprobs) */
    if (!get_int(body, "n_probs", 0, lim->max_top_logprobs, &v, &given, e)) return false;
    if (given && v > 0 && !r->logprobs) {
        r->logprobs = true;
        r->top_logprobs = (int32_t)v;
    }
    if (!get_int(body, "min_tokens", 0, 1 << 30, &v, &given, e)) return false;
    if (given) r->min_tokens = v;
    json_t *sp_mode = field(body, "spec");
    if (sp_mode) {
        /* brisk_sched_spec's order; "draft" needs the server's -md (the scheduler refuses it otherwise: a 400) */
        static const char *const modes[] = {"off", "ngram", "auto", "draft"};
        if (!json_is_string(sp_mode)) return bad_type(e, "spec", "a string (\"off\", \"ngram\", \"auto\" or \"draft\")");
        int k = 0;
        while (k < 4 && strcmp(json_string_value(sp_mode), modes[k])) k++;
        if (k == 4) return bad_value(e, "spec", "must be \"off\", \"ngram\", \"auto\" or \"draft\"");
        r->spec_set = true;
        r->spec = (brisk_sched_spec)k;
    }
    if (!get_stop(body, lim, r, e)) return false;
    if (!get_logit_bias(body, lim, r, e)) return false;
    if (kind == SRV_LLAMA && field(body, "response_format")) {
        srv_error_set(e, 400, T_INVALID, "unsupported_parameter", "response_format", "'response_format' is a /v1 parameter");
        return false;
    }
    if (!get_response_format(body, r, e)) return false;
    if (kind == SRV_CHAT && !get_tools(body, r, e)) return false;
    if (kind != SRV_CHAT && field(body, "tools")) {
        srv_error_set(e, 400, T_INVALID, "unsupported_parameter", "tools", "'tools' is a /v1/chat/completions parameter");
        return false;
    }
    const bool constrained = r->format != SRV_FORMAT_TEXT || r->tool_choice == SRV_TOOL_REQUIRED || r->tool_choice == SRV_TOOL_NAMED;
    if (r->format != SRV_FORMAT_TEXT && r->tool_choice != SRV_TOOL_NONE) {
        srv_error_set(e, 400, T_INVALID, "unsupported_parameter", "response_format",
                      "'response_format' together with 'tools' is not supported (unless 'tool_choice' is \"none\")");
        return false;
    }
    /* a constraint that is complete allows only end-of-generation tokens: banning them would leave nothing */
    if (constrained && r->ignore_eos) {
        srv_error_set(e, 400, T_INVALID, "unsupported_parameter", "ignore_eos",
                      "'ignore_eos' cannot be combined with constrained output (response_format, or tool_choice required or named)");
        return false;
    }
    if (constrained && r->min_tokens > 0) {
        srv_error_set(e, 400, T_INVALID, "unsupported_parameter", "min_tokens",
                      "'min_tokens' cannot be combined with constrained output (response_format, or tool_choice required or named)");
        return false;
    }
    return true;
}

bool srv_kv_name_ok(const char *name, size_t len) {
    if (len < 1 || len > 64 || name[0] == '.') return false;
    for (size_t i = 0; i < len; i++) {
        const char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

static bool get_kv_name(json_t *body, srv_request *r, srv_error *e) {
    json_t *n = json_object_get(body, "name");
    if (!n || json_is_null(n)) {
        srv_error_set(e, 400, T_INVALID, "missing_required_parameter", "name", "'name' is required");
        return false;
    }
    if (!json_is_string(n)) return bad_type(e, "name", "a string");
    if (!srv_kv_name_ok(json_string_value(n), json_string_length(n)))
        return bad_value(e, "name", "must be 1 to 64 of the characters A-Z a-z 0-9 _ - . and not start with '.'");
    memcpy(r->kv_name, json_string_value(n), json_string_length(n) + 1);
    return true;
}

bool srv_request_parse(const uint8_t *body, size_t len, srv_kind kind, const srv_limits *lim,
                       const brisk_sampler_params *defaults, srv_request *out, srv_error *e) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->max_tokens = -1;
    out->n = 1;
    out->sampling = *defaults;
    out->sampling.logit_bias = NULL;
    out->sampling.n_logit_bias = 0;
    out->sampling.samplers = NULL;
    out->sampling.dry_breakers = NULL;
    out->sampling.n_dry_breakers = 0;
    json_error_t je;
    json_t *root = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        srv_error_set(e, 400, T_INVALID, "invalid_json", NULL, "the body is not valid JSON: %s (at byte %d)", je.text, je.position);
        return false;
    }
    bool ok = false;
    if (!json_is_object(root)) {
        srv_error_set(e, 400, T_INVALID, "invalid_type", NULL, "the body must be a JSON object");
        goto done;
    }
    switch (kind) {
    case SRV_CHAT:
        if (!get_messages(root, lim, &out->messages_json, e)) goto done;
        if (!get_generation(root, kind, lim, out, e)) goto done;
        break;
    case SRV_COMPLETION:
    case SRV_LLAMA:
        if (!get_prompt(root, kind, lim, out, e)) goto done;
        if (!get_generation(root, kind, lim, out, e)) goto done;
        break;
    case SRV_TOKENIZE:
        if (!get_prompt(root, kind, lim, out, e)) goto done;
        if (!get_bool(root, "add_special", &out->add_special, e)) goto done;
        if (!get_bool(root, "with_pieces", &out->with_pieces, e)) goto done;
        break;
    case SRV_DETOKENIZE: {
        json_t *t = json_object_get(root, "tokens");
        if (!t) {
            srv_error_set(e, 400, T_INVALID, "missing_required_parameter", "tokens", "'tokens' is required");
            goto done;
        }
        if (!json_is_array(t)) { bad_type(e, "tokens", "an array of token ids"); goto done; }
        if (!get_ids(t, "tokens", lim->n_vocab, &out->tokens, &out->n_tokens, e)) goto done;
        break;
    }
    case SRV_APPLY_TEMPLATE:
        if (!get_messages(root, lim, &out->messages_json, e)) goto done;
        if (!get_tools(root, out, e)) goto done;
        out->add_generation_prompt = true;
        if (!get_bool(root, "add_generation_prompt", &out->add_generation_prompt, e)) goto done;
        break;
    case SRV_KV_SAVE:
        if (!get_kv_name(root, out, e)) goto done;
        if (!get_prompt(root, SRV_COMPLETION, lim, out, e)) goto done;
        break;
    case SRV_KV_RESTORE:
        if (!get_kv_name(root, out, e)) goto done;
        break;
    case SRV_N_KINDS: goto done;
    }
    ok = true;
done:
    json_decref(root);
    if (!ok) srv_request_free(out);
    return ok;
}

void srv_request_free(srv_request *r) {
    free(r->messages_json);
    free(r->prompt_text);
    free(r->prompt_ids);
    free(r->bias);
    for (int32_t k = 0; k < r->n_stop; k++) free(r->stop[k]);
    free(r->stop);
    free(r->tokens);
    free(r->schema_json);
    free(r->tools_json);
    for (int32_t k = 0; k < r->n_tools; k++) free(r->tool_names[k]);
    free(r->tool_names);
    const srv_kind kind = r->kind;
    memset(r, 0, sizeof *r);
    r->kind = kind;
}
