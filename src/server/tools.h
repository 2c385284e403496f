/* tools: structured output and tool calls in the server (docs/SERVER.md,
 * "Structured output and tools").
 *
 * - The tool-call format of a chat template (Llama 3.x JSON, Hermes/Qwen
 *   <tool_call> blocks, Mistral [TOOL_CALLS]), read from the template's text.
 * - The constraint of one choice: response_format's schema, or for
 *   tool_choice required/named the format's wrapper (literal text compiled as
 *   a one-string choice) around a JSON Schema of the allowed calls, each
 *   {"name": const, "arguments"|"parameters": the tool's parameters}. The
 *   parts run one after the other behind one brisk_mask: while a part is
 *   complete, the next part's first tokens are allowed instead of the end
 *   tokens. Compiled on an HTTP thread through brisk_constraint_*; used by
 *   the inference thread alone afterwards.
 * - The parser of a choice's text into content and tool calls, for the final
 *   message and, re-run on the text so far, for streamed deltas. */
#ifndef BRISK_SERVER_TOOLS_H
#define BRISK_SERVER_TOOLS_H

#include "brisk.h"
#include "server/request.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum srv_tool_format {
    SRV_TOOLFMT_NONE = 0,   /* the template shows no tool-call format */
    SRV_TOOLFMT_LLAMA3,     /* {"name": ..., "parameters": {...}} alone (Llama 3.1-3.3's custom tools) */
    SRV_TOOLFMT_HERMES,     /* <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> (Qwen2.5, Qwen3, Hermes) */
    SRV_TOOLFMT_MISTRAL,    /* [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (Mistral, Nemo) */
} srv_tool_format;

/* From the template's source: XML-style calls ("<function=", "<arg_key>", "<parameter=") or Mistral's
 * "[ARGS]" -> none (other formats); else "<tool_call>" with a JSON call shown ({"name": ) and no
 * "<tool_calls>[" list -> Hermes, "[TOOL_CALLS]" -> Mistral, a "parameters" key with Llama 3's header tokens
 * -> Llama 3; else none. */
srv_tool_format srv_tool_format_of(const char *tpl, size_t len);
const char *srv_tool_format_name(srv_tool_format f);

/* One choice's constraint. */
typedef struct srv_constraint srv_constraint;
/* What r asks to enforce (response_format's schema, or tool_choice required/named under format f); *out NULL
 * when nothing is. An unsupported schema is a 400 naming the parameter, the keyword and its pointer. */
/* Finish within n_tokens (the request's cap), for a constraint of one part; others are left as they are. */
void srv_constraint_set_budget(srv_constraint *c, int64_t n_tokens);
bool srv_constraint_new(srv_constraint **out, const brisk_model *m, const srv_request *r, const char *tools_json,
                        srv_tool_format f, srv_error *e);
brisk_mask srv_constraint_mask(srv_constraint *c);
void srv_constraint_free(srv_constraint *c);   /* NULL is a no-op */

/* A choice's text parsed: content[0..content_len) is text for the message (while streaming: what can be sent
 * now, a possible tool-call opening held back), then the calls. A call's name and arguments are slices of the
 * text; args_len grows while the arguments are still being written (args_done false). */
#define SRV_MAX_TOOL_CALLS 16
typedef struct srv_tool_call {
    size_t name_off, name_len;    /* the name's characters (inside its quotes; tool names need no escapes) */
    bool name_done;
    size_t args_off, args_len;    /* the raw JSON of the arguments object */
    bool args_done;
} srv_tool_call;
typedef struct srv_tool_parse {
    size_t content_len;
    srv_tool_call call[SRV_MAX_TOOL_CALLS];
    int32_t n_calls;
} srv_tool_parse;
/* final: the choice has ended (no more text will come). names: the request's tools (a call must name one). */
void srv_tools_parse(srv_tool_format f, const char *text, size_t len, bool final, char *const *names, int32_t n_names,
                     srv_tool_parse *out);

/* The id of call k of choice c of the response named resp_id: "call_" and hex (OpenAI's shape), or 9
 * alphanumerics for Mistral (its templates demand them). out holds at least 48 bytes. */
void srv_tool_call_id(srv_tool_format f, const char *resp_id, int32_t c, int32_t k, char *out);

/* The message's tool_calls: [{"id", "type": "function", "function": {"name", "arguments": the raw JSON text}}]. */
#include <jansson.h>
json_t *srv_tool_calls_json(srv_tool_format f, const char *resp_id, int32_t choice, const char *text, const srv_tool_parse *tp);

#endif
