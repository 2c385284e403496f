/* tools: structured output and tool calls (tools.h). */
#include "server/tools.h"
#include "base/base.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *T_INVALID = "invalid_request_error";

/* ---- the template's format --------------------------------------------------------------------- */

static bool has(const char *s, size_t n, const char *what) {
    const size_t w = strlen(what);
    for (size_t i = 0; i + w <= n; i++)
        if (s[i] == what[0] && memcmp(s + i, what, w) == 0) return true;
    return false;
}

srv_tool_format srv_tool_format_of(const char *tpl, size_t len) {
    if (!tpl) return SRV_TOOLFMT_NONE;
    /* XML-style calls (Qwen3-Coder's <function=...>, GLM's <arg_key>) and Mistral's newer
     * [TOOL_CALLS]name[ARGS]{...} are other formats: not parsed here */
    if (has(tpl, len, "<function=") || has(tpl, len, "<arg_key>") || has(tpl, len, "<parameter=") || has(tpl, len, "[ARGS]"))
        return SRV_TOOLFMT_NONE;
    /* Hermes writes a JSON object in the block: the template shows {"name": (its own calls, or the
     * instructions' escaped example); Apriel's <tool_calls>[...] list is another format */
    if (has(tpl, len, "<tool_call>") && (has(tpl, len, "{\"name\": ") || has(tpl, len, "{\\\"name\\\": ")) &&
        !has(tpl, len, "<tool_calls>["))
        return SRV_TOOLFMT_HERMES;
    if (has(tpl, len, "[TOOL_CALLS]")) return SRV_TOOLFMT_MISTRAL;
    if (has(tpl, len, "\"parameters\"") && (has(tpl, len, "<|eot_id|>") || has(tpl, len, "<|start_header_id|>")))
        return SRV_TOOLFMT_LLAMA3;
    return SRV_TOOLFMT_NONE;
}

const char *srv_tool_format_name(srv_tool_format f) {
    switch (f) {
    case SRV_TOOLFMT_LLAMA3: return "llama3";
    case SRV_TOOLFMT_HERMES: return "hermes";
    case SRV_TOOLFMT_MISTRAL: return "mistral";
    default: return "none";
    }
}

/* ---- the constraint: parts in sequence behind one mask ------------------------------------------ */

typedef struct cst_part {
    brisk_constraint *c;
    uint32_t *start;   /* the tokens it allows first */
} cst_part;

struct srv_constraint {
    cst_part part[4];
    int32_t n_main;    /* parts 0 .. n_main - 1 in order; the last may end the output */
    int32_t again;     /* a part that may follow the last (another tool call), then loop_to; -1 = none */
    int32_t loop_to;
    int32_t k;         /* the current part */
    int32_t n_vocab, words;
    int32_t *eog;
    int32_t n_eog;
};

static int32_t next_part(const srv_constraint *c, int32_t k) {
    if (k < c->n_main - 1) return k + 1;
    if (k == c->n_main - 1) return c->again;
    return c->loop_to;   /* k == again */
}

static bool bit(const uint32_t *m, int32_t t) { return (m[t >> 5] >> (t & 31)) & 1u; }

static bool is_eog(const srv_constraint *c, int32_t t) {
    for (int32_t i = 0; i < c->n_eog; i++)
        if (c->eog[i] == t) return true;
    return false;
}

static void mask_fill(void *user, uint32_t *allowed, int32_t n_vocab) {
    srv_constraint *c = user;
    brisk_constraint *p = c->part[c->k].c;
    brisk_mask m = brisk_constraint_mask(p);
    m.fill(m.user, allowed, n_vocab);
    if (!brisk_constraint_complete(p)) return;
    /* a complete part: the next part may start; only the last main part may end the output */
    if (c->k != c->n_main - 1)
        for (int32_t i = 0; i < c->n_eog; i++) allowed[c->eog[i] >> 5] &= ~(1u << (c->eog[i] & 31));
    const int32_t nx = next_part(c, c->k);
    if (nx >= 0)
        for (int32_t w = 0; w < c->words; w++) allowed[w] |= c->part[nx].start[w];
}

static void mask_accept(void *user, int32_t token) {
    srv_constraint *c = user;
    if (token < 0 || token >= c->n_vocab) return;
    brisk_constraint *p = c->part[c->k].c;
    if (brisk_constraint_complete(p) && !is_eog(c, token)) {
        /* the parts' languages are built so that a complete part's own continuations and the next part's
         * first tokens do not overlap (JSON after its closing brace allows only whitespace; the wrappers
         * start with '<' or '[') */
        const int32_t nx = next_part(c, c->k);
        if (nx >= 0 && bit(c->part[nx].start, token)) {
            c->k = nx;
            brisk_constraint_reset(c->part[nx].c);
            if (nx == c->again && c->loop_to >= 0)
                for (int32_t i = c->loop_to; i < c->n_main; i++) brisk_constraint_reset(c->part[i].c);
            brisk_constraint_accept(c->part[nx].c, token);
            return;
        }
    }
    if (is_eog(c, token)) return;   /* the end: the scheduler finishes the choice */
    brisk_constraint_accept(p, token);
}

static void mask_reset(void *user) {
    srv_constraint *c = user;
    c->k = 0;
    for (int32_t i = 0; i < 4; i++)
        if (c->part[i].c) brisk_constraint_reset(c->part[i].c);
}

/* The request's token cap as the constraint's budget, so a constrained output ends complete instead of being
 * cut by max_tokens (docs/CONSTRAIN.md, "Finishing within the token budget"). Only a constraint of one part
 * takes it: the parts of a wrapped tool call each count their own tokens, so no part knows how many the
 * others will take. */
void srv_constraint_set_budget(srv_constraint *c, int64_t n_tokens) {
    if (c && c->n_main == 1 && c->again < 0) brisk_constraint_set_token_budget(c->part[0].c, n_tokens);
}

brisk_mask srv_constraint_mask(srv_constraint *c) {
    return (brisk_mask){.user = c, .fill = mask_fill, .accept = mask_accept, .reset = mask_reset};
}

void srv_constraint_free(srv_constraint *c) {
    if (!c) return;
    for (int32_t i = 0; i < 4; i++) {
        brisk_constraint_free(c->part[i].c);
        free(c->part[i].start);
    }
    free(c->eog);
    free(c);
}

/* Compile part i; its first tokens recorded. */
static bool add_part(srv_constraint *c, int32_t i, const brisk_model *m, brisk_constraint_kind kind, const char *src, size_t len,
                     brisk_error *err) {
    if (brisk_constraint_init(&c->part[i].c, m, kind, src, len, err)) return false;
    if (!(c->part[i].start = calloc((size_t)c->words, sizeof *c->part[i].start))) {
        brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
        return false;
    }
    brisk_mask mk = brisk_constraint_mask(c->part[i].c);
    mk.fill(mk.user, c->part[i].start, c->n_vocab);
    bool any = false;
    for (int32_t w = 0; w < c->words && !any; w++) any = c->part[i].start[w] != 0;
    if (!any) {
        brisk_fail(err, BRISK_ERR_UNSUPPORTED, "this model's vocabulary cannot write the start of %.*s", (int)(len > 60 ? 60 : len), src);
        return false;
    }
    return true;
}

/* A literal as a one-string choice ("\," and "\\" escaped). */
static bool add_literal(srv_constraint *c, int32_t i, const brisk_model *m, const char *lit, brisk_error *err) {
    char buf[128];
    size_t w = 0;
    for (const char *p = lit; *p && w + 2 < sizeof buf; p++) {
        if (*p == ',' || *p == '\\') buf[w++] = '\\';
        buf[w++] = *p;
    }
    return add_part(c, i, m, BRISK_CONSTRAINT_CHOICE, buf, w, err);
}

/* Every local "$ref" ("#..." ) of a schema moved under base (the pointer where the schema now sits). */
static void move_refs(json_t *v, const char *base) {
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) move_refs(json_array_get(v, i), base);
        return;
    }
    if (!json_is_object(v)) return;
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x) {
        if (strcmp(key, "$ref") == 0 && json_is_string(x) && json_string_value(x)[0] == '#') {
            const char *rest = json_string_value(x) + 1;
            char *moved = malloc(strlen(base) + strlen(rest) + 2);
            if (moved) {
                sprintf(moved, "#%s%s", base, rest);
                json_object_set_new(v, key, json_string(moved));
                free(moved);
            }
        } else {
            move_refs(x, base);
        }
    }
}

/* The schema of a call of tool t: {"name": const, ARGKEY: its parameters}, in that order. */
static json_t *call_schema(json_t *tool, srv_tool_format f, const char *base) {
    json_t *fn = json_object_get(tool, "function");
    json_t *params = json_object_get(fn, "parameters");
    json_t *p = params && json_is_object(params) ? json_deep_copy(params) : json_pack("{s:s}", "type", "object");
    if (!p) return NULL;
    move_refs(p, base);
    const char *argkey = f == SRV_TOOLFMT_LLAMA3 ? "parameters" : "arguments";
    json_t *props = json_object();
    json_object_set_new(props, "name", json_pack("{s:O}", "const", json_object_get(fn, "name")));
    json_object_set_new(props, argkey, p);
    if (f == SRV_TOOLFMT_MISTRAL) json_object_set_new(props, "id", json_pack("{s:s, s:s}", "type", "string", "pattern", "^[A-Za-z0-9]{9}$"));
    return json_pack("{s:s, s:o, s:[s, s], s:b}", "type", "object", "properties", props, "required", "name", argkey,
                     "additionalProperties", 0);
}

/* The JSON Schema of what tool_choice allows under format f. */
static json_t *calls_schema(json_t *tools, const srv_request *r, srv_tool_format f) {
    const bool one = r->tool_choice == SRV_TOOL_NAMED || json_array_size(tools) == 1;
    const char *items = f == SRV_TOOLFMT_MISTRAL ? "/items" : "";
    char base[96];
    json_t *calls;
    if (one) {
        const size_t t = r->tool_choice == SRV_TOOL_NAMED ? (size_t)r->tool_named : 0;
        snprintf(base, sizeof base, "%s/properties/%s", items, f == SRV_TOOLFMT_LLAMA3 ? "parameters" : "arguments");
        calls = call_schema(json_array_get(tools, t), f, base);
    } else {
        json_t *any = json_array();
        for (size_t t = 0; any && t < json_array_size(tools); t++) {
            snprintf(base, sizeof base, "%s/anyOf/%zu/properties/%s", items, t, f == SRV_TOOLFMT_LLAMA3 ? "parameters" : "arguments");
            json_t *s = call_schema(json_array_get(tools, t), f, base);
            if (!s || json_array_append_new(any, s)) { json_decref(any); return NULL; }
        }
        calls = any ? json_pack("{s:o}", "anyOf", any) : NULL;
    }
    if (!calls || f != SRV_TOOLFMT_MISTRAL) return calls;
    json_t *arr = json_pack("{s:s, s:o, s:i}", "type", "array", "items", calls, "minItems", 1);
    if (arr && !r->parallel_tool_calls) json_object_set_new(arr, "maxItems", json_integer(1));
    return arr;
}

bool srv_constraint_new(srv_constraint **out, const brisk_model *m, const srv_request *r, const char *tools_json,
                        srv_tool_format f, srv_error *e) {
    *out = NULL;
    const bool tools = r->tool_choice == SRV_TOOL_REQUIRED || r->tool_choice == SRV_TOOL_NAMED;
    if (r->format == SRV_FORMAT_TEXT && !tools) return true;
    srv_constraint *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    brisk_model_info info;
    brisk_model_get_info(m, &info);
    c->n_vocab = info.n_vocab;
    c->words = (info.n_vocab + 31) / 32;
    c->again = c->loop_to = -1;
    if (!(c->eog = malloc(sizeof *c->eog * 64))) goto oom;
    for (int32_t id = 0; id < info.n_vocab && c->n_eog < 64; id++)
        if (brisk_token_is_eog(m, id)) c->eog[c->n_eog++] = id;
    brisk_error err = {0};
    if (!tools) {
        c->n_main = 1;
        if (!add_part(c, 0, m, BRISK_CONSTRAINT_JSON_SCHEMA, r->schema_json, strlen(r->schema_json), &err)) {
            const char *param = r->format == SRV_FORMAT_JSON_SCHEMA ? "response_format.json_schema.schema" : "response_format";
            srv_error_set(e, err.status == BRISK_ERR_NOMEM ? 500 : 400, err.status == BRISK_ERR_NOMEM ? "server_error" : T_INVALID,
                          err.status == BRISK_ERR_UNSUPPORTED ? "unsupported_schema" : "invalid_schema", param,
                          "'%s': %s", param, err.msg);
            srv_constraint_free(c);
            return false;
        }
        *out = c;
        return true;
    }
    if (f == SRV_TOOLFMT_NONE) {
        srv_error_set(e, 400, T_INVALID, "unsupported_parameter", "tool_choice",
                      "the chat template shows no tool-call format (Llama 3 JSON, <tool_call> or [TOOL_CALLS]), so tool calls "
                      "cannot be enforced; start the server with --chat-template FILE of a template that has one");
        srv_constraint_free(c);
        return false;
    }
    json_t *tl = json_loads(tools_json, 0, NULL);
    json_t *schema = tl ? calls_schema(tl, r, f) : NULL;
    char *src = schema ? json_dumps(schema, JSON_COMPACT) : NULL;
    json_decref(schema);
    if (!src) {
        json_decref(tl);
        goto oom;
    }
    int32_t inner = 0;
    bool ok = true;
    if (f == SRV_TOOLFMT_HERMES) {
        c->n_main = 3;
        inner = 1;
        ok = add_literal(c, 0, m, "<tool_call>\n", &err) && add_literal(c, 2, m, "</tool_call>", &err);
        if (ok && r->parallel_tool_calls && r->tool_choice == SRV_TOOL_REQUIRED) {
            c->again = 3;
            c->loop_to = 1;
            ok = add_literal(c, 3, m, "\n<tool_call>\n", &err);
        }
    } else if (f == SRV_TOOLFMT_MISTRAL) {
        c->n_main = 2;
        inner = 1;
        ok = add_literal(c, 0, m, "[TOOL_CALLS]", &err);
    } else {
        c->n_main = 1;
    }
    if (!ok) {
        srv_error_set(e, 500, "server_error", "constraint_failed", NULL, "the tool-call wrapper: %s", err.msg);
        goto fail;
    }
    if (!add_part(c, inner, m, BRISK_CONSTRAINT_JSON_SCHEMA, src, strlen(src), &err)) {
        /* name the tool whose parameters the compiler refused */
        int32_t bad_tool = -1;
        brisk_error terr = {0};
        for (size_t t = 0; t < json_array_size(tl) && bad_tool < 0; t++) {
            json_t *params = json_object_get(json_object_get(json_array_get(tl, t), "function"), "parameters");
            if (!params) continue;
            char *ps = json_dumps(params, JSON_COMPACT);
            brisk_constraint *pc = NULL;
            if (ps && brisk_constraint_init(&pc, m, BRISK_CONSTRAINT_JSON_SCHEMA, ps, strlen(ps), &terr)) bad_tool = (int32_t)t;
            brisk_constraint_free(pc);
            free(ps);
        }
        char param[64];
        if (bad_tool >= 0) snprintf(param, sizeof param, "tools[%d].function.parameters", bad_tool);
        else snprintf(param, sizeof param, "tools");
        srv_error_set(e, 400, T_INVALID, (bad_tool >= 0 ? terr.status : err.status) == BRISK_ERR_UNSUPPORTED ? "unsupported_schema" : "invalid_schema",
                      param, "'%s': %s", param, bad_tool >= 0 ? terr.msg : err.msg);
        goto fail;
    }
    free(src);
    json_decref(tl);
    *out = c;
    return true;
fail:
    free(src);
    json_decref(tl);
    srv_constraint_free(c);
    return false;
oom:
    srv_constraint_free(c);
    srv_error_set(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
    return false;
}

/* ---- parsing a choice's text ----------------------------------------------------------------------- */

static bool ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && ws(s[i])) i++;
    return i;
}

/* A JSON string at s[i] == '"': the index after its closing quote; *complete false when the text ends first. */
static size_t scan_string(const char *s, size_t n, size_t i, bool *complete) {
    for (i++; i < n; i++) {
        if (s[i] == '\\') i++;
        else if (s[i] == '"') {
            *complete = true;
            return i + 1;
        }
    }
    *complete = false;
    return n;
}

/* Any JSON value at s[i] (structure only; the final check parses it): its end; *complete false when the text
 * ends inside it; *bad on a character no value starts with or a mismatched bracket. */
static size_t scan_value(const char *s, size_t n, size_t i, bool final, bool *complete, bool *bad) {
    *complete = false;
    if (i >= n) return n;
    if (s[i] == '"') return scan_string(s, n, i, complete);
    if (s[i] == '{' || s[i] == '[') {
        char stack[64];
        int depth = 0;
        for (; i < n; i++) {
            const char ch = s[i];
            if (ch == '"') {
                bool c2;
                i = scan_string(s, n, i, &c2) - 1;
                if (!c2) return n;
            } else if (ch == '{' || ch == '[') {
                if (depth == (int)sizeof stack) { *bad = true; return n; }
                stack[depth++] = ch == '{' ? '}' : ']';
            } else if (ch == '}' || ch == ']') {
                if (depth == 0 || stack[depth - 1] != ch) { *bad = true; return n; }
                if (--depth == 0) {
                    *complete = true;
                    return i + 1;
                }
            }
        }
        return n;
    }
    const size_t i0 = i;
    while (i < n && (strchr("+-.eE", s[i]) || (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z'))) i++;
    if (i == i0) { *bad = true; return n; }
    *complete = i < n || final;
    return i;
}

/* A call object at s[i] == '{': {"name": "...", "arguments"|"parameters": {...}, ...}. Returns the index after
 * it; *complete false when the text ends inside it. */
static size_t scan_call(const char *s, size_t n, size_t i, bool final, srv_tool_call *tc, bool *complete, bool *bad) {
    memset(tc, 0, sizeof *tc);
    *complete = false;
    i++;
    for (;;) {
        i = skip_ws(s, n, i);
        if (i >= n) return n;
        if (s[i] == '}') {
            *complete = true;
            return i + 1;
        }
        if (s[i] == ',') {
            i++;
            continue;
        }
        if (s[i] != '"') { *bad = true; return n; }
        bool kc;
        const size_t k0 = i + 1, k1 = scan_string(s, n, i, &kc);
        if (!kc) return n;
        const size_t klen = k1 - 1 - k0;
        i = skip_ws(s, n, k1);
        if (i >= n) return n;
        if (s[i] != ':') { *bad = true; return n; }
        i = skip_ws(s, n, i + 1);
        if (i >= n) return n;
        bool vc;
        const size_t v0 = i, v1 = scan_value(s, n, i, final, &vc, bad);
        if (*bad) return n;
        if (klen == 4 && memcmp(s + k0, "name", 4) == 0) {
            if (s[v0] != '"' || tc->name_off) { *bad = true; return n; }   /* not a string, or a second name */
            tc->name_off = v0 + 1;
            tc->name_len = vc ? v1 - 1 - (v0 + 1) : 0;
            tc->name_done = vc;
        } else if ((klen == 9 && memcmp(s + k0, "arguments", 9) == 0) || (klen == 10 && memcmp(s + k0, "parameters", 10) == 0)) {
            if (s[v0] != '{' || tc->args_off) { *bad = true; return n; }
            tc->args_off = v0;
            tc->args_len = v1 - v0;
            tc->args_done = vc;
        }
        if (!vc) return n;
        i = v1;
    }
}

static bool known(const char *s, const srv_tool_call *tc, char *const *names, int32_t n_names) {
    for (int32_t k = 0; k < n_names; k++)
        if (strlen(names[k]) == tc->name_len && memcmp(names[k], s + tc->name_off, tc->name_len) == 0) return true;
    return false;
}

static bool args_valid(const char *s, const srv_tool_call *tc) {
    json_t *a = json_loadb(s + tc->args_off, tc->args_len, 0, NULL);
    const bool ok = json_is_object(a);
    json_decref(a);
    return ok;
}

/* Where marker starts in s[from..n), or n; *partial: the text ends with a proper prefix of it (held back). */
static size_t find_marker(const char *s, size_t n, size_t from, const char *marker, size_t *held) {
    const size_t m = strlen(marker);
    for (size_t i = from; i + m <= n; i++)
        if (s[i] == marker[0] && memcmp(s + i, marker, m) == 0) return i;
    *held = 0;
    for (size_t k = m - 1; k > 0; k--)
        if (k <= n - from && memcmp(s + n - k, marker, k) == 0) {
            *held = k;
            break;
        }
    return n;
}

void srv_tools_parse(srv_tool_format f, const char *s, size_t n, bool final, char *const *names, int32_t n_names,
                     srv_tool_parse *out) {
    memset(out, 0, sizeof *out);
    out->content_len = n;
    if (f == SRV_TOOLFMT_NONE) return;
    bool bad = false, all_done = true;
    if (f == SRV_TOOLFMT_LLAMA3) {
        size_t i = skip_ws(s, n, 0);
        static const char tag[] = "<|python_tag|>";
        if (n - i >= sizeof tag - 1 && memcmp(s + i, tag, sizeof tag - 1) == 0) i = skip_ws(s, n, i + sizeof tag - 1);
        else if (!final && i < n && n - i < sizeof tag - 1 && memcmp(s + i, tag, n - i) == 0) i = n;   /* the tag's start: hold */
        if (i >= n) {
            if (!final) out->content_len = 0;   /* whitespace so far: a call may still come */
            return;
        }
        if (s[i] != '{') return;
        bool complete;
        srv_tool_call *tc = &out->call[0];
        const size_t end = scan_call(s, n, i, final, tc, &complete, &bad);
        out->n_calls = 1;
        out->content_len = 0;
        if (!bad && tc->name_done && !known(s, tc, names, n_names)) bad = true;
        if (!bad && complete && skip_ws(s, n, end) < n) bad = true;   /* text after the call */
        all_done = complete && tc->name_done && tc->args_done;
    } else {
        const char *marker = f == SRV_TOOLFMT_HERMES ? "<tool_call>" : "[TOOL_CALLS]";
        size_t held = 0;
        const size_t at = find_marker(s, n, 0, marker, &held);
        if (at == n) {
            if (final) return;
            /* hold a possible marker's start and the whitespace before it */
            size_t keep = n - held;
            while (keep > 0 && ws(s[keep - 1])) keep--;
            out->content_len = keep;
            return;
        }
        size_t c_end = at;
        while (c_end > 0 && ws(s[c_end - 1])) c_end--;
        out->content_len = c_end;
        size_t i = at + strlen(marker);
        if (f == SRV_TOOLFMT_MISTRAL) {
            i = skip_ws(s, n, i);
            if (i < n && s[i] != '[') bad = true;
            else i++;
        }
        all_done = false;
        while (!bad) {
            i = skip_ws(s, n, i);
            if (i >= n) break;
            if (f == SRV_TOOLFMT_MISTRAL && out->n_calls > 0) {
                if (s[i] == ']') {
                    all_done = skip_ws(s, n, i + 1) == n;
                    bad = !all_done;
                    break;
                }
                if (s[i] != ',') { bad = true; break; }
                i = skip_ws(s, n, i + 1);
                if (i >= n) break;
            }
            if (s[i] != '{' || out->n_calls == SRV_MAX_TOOL_CALLS) { bad = true; break; }
            bool complete;
            srv_tool_call *tc = &out->call[out->n_calls++];
            i = scan_call(s, n, i, final, tc, &complete, &bad);
            if (!bad && tc->name_done && !known(s, tc, names, n_names)) bad = true;
            if (bad || !complete) break;
            if (!tc->name_done || !tc->args_done) { bad = true; break; }
            if (f == SRV_TOOLFMT_HERMES) {
                /* </tool_call>, then the end or the next <tool_call> */
                static const char close[] = "</tool_call>";
                i = skip_ws(s, n, i);
                if (n - i < sizeof close - 1) {
                    if (memcmp(s + i, close, n - i) != 0) bad = true;
                    all_done = final && !bad && i == n;   /* a call cut before its closing tag still counts at the end */
                    break;
                }
                if (memcmp(s + i, close, sizeof close - 1) != 0) { bad = true; break; }
                i = skip_ws(s, n, i + sizeof close - 1);
                if (i >= n) { all_done = true; break; }
                const size_t ml = strlen(marker);
                if (n - i >= ml && memcmp(s + i, marker, ml) == 0) i += ml;
                else if (n - i < ml && memcmp(s + i, marker, n - i) == 0 && !final) break;   /* the next marker's start */
                else { bad = true; break; }
            }
        }
    }
    if (final) {
        /* the end: every call whole and valid, or the whole text is content */
        for (int32_t k = 0; k < out->n_calls && !bad; k++) bad = !args_valid(s, &out->call[k]);
        if (bad || !all_done || out->n_calls == 0) {
            out->n_calls = 0;
            out->content_len = n;
        }
        return;
    }
    if (bad) {
        /* not a call after all: everything is content */
        out->n_calls = 0;
        out->content_len = n;
    }
}

void srv_tool_call_id(srv_tool_format f, const char *resp_id, int32_t c, int32_t k, char *out) {
    /* FNV-1a of the response id, the choice and the call */
    uint64_t h = 1469598103934665603ull;
    for (const char *p = resp_id; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ (uint64_t)(uint32_t)c) * 1099511628211ull;
    h = (h ^ (uint64_t)(uint32_t)k) * 1099511628211ull;
    if (f == SRV_TOOLFMT_MISTRAL) {
        static const char an[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        for (int i = 0; i < 9; i++) {
            out[i] = an[h % 62];
            h /= 62;
            if (i == 4) h = (h ^ (uint64_t)k) * 1099511628211ull;
        }
        out[9] = 0;
        return;
    }
    snprintf(out, 48, "call_%016llx%02x%02x", (unsigned long long)h, (unsigned)(c & 0xff), (unsigned)(k & 0xff));
}

json_t *srv_tool_calls_json(srv_tool_format f, const char *resp_id, int32_t choice, const char *text, const srv_tool_parse *tp) {
    json_t *a = json_array();
    for (int32_t k = 0; a && k < tp->n_calls; k++) {
        const srv_tool_call *tc = &tp->call[k];
        char id[48];
        srv_tool_call_id(f, resp_id, choice, k, id);
        json_t *o = json_pack("{s:s, s:s, s:{s:s%, s:s%}}", "id", id, "type", "function", "function", "name", text + tc->name_off,
                              tc->name_len, "arguments", text + tc->args_off, tc->args_len);
        if (!o || json_array_append_new(a, o)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}
