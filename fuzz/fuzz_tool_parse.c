/* fuzz_tool_parse: libFuzzer target for the server's tool-call parser (src/server/tools.c,
 * srv_tools_parse). The first byte picks the format (Llama 3 JSON, Hermes <tool_call>, Mistral
 * [TOOL_CALLS]), the rest is a model's output. The text is parsed at every prefix as a stream would
 * (final = false), then whole (final = true). Checks: no crash, leak or UB; every slice (content, each
 * call's name and arguments) lies inside the text; the content a stream may send never shrinks as text
 * arrives (what was sent stays sent); a call's arguments only grow while it is being written; and at the
 * end every call names one of the tools and its arguments parse as a JSON object (else the whole text is
 * content). */
#include "fuzz_check.h"
#include "server/tools.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_bounds(const srv_tool_parse *p, size_t n) {
    FUZZ_CHECK(p->content_len <= n);
    FUZZ_CHECK(p->n_calls >= 0 && p->n_calls <= SRV_MAX_TOOL_CALLS);
    for (int32_t k = 0; k < p->n_calls; k++) {
        const srv_tool_call *c = &p->call[k];
        FUZZ_CHECK(c->name_off + c->name_len <= n);
        FUZZ_CHECK(c->args_off + c->args_len <= n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    static char *const names[] = {"get_weather", "add", "f"};
    const srv_tool_format f = (srv_tool_format)(1 + data[0] % 3);
    const char *s = (const char *)data + 1;
    const size_t n = size - 1;
    srv_tool_parse prev, cur;
    memset(&prev, 0, sizeof prev);
    for (size_t k = 0; k <= n; k++) {
        srv_tools_parse(f, s, k, false, names, 3, &cur);
        check_bounds(&cur, k);
        FUZZ_CHECK(cur.content_len >= prev.content_len || prev.n_calls > 0);
        for (int32_t c = 0; c < cur.n_calls && c < prev.n_calls; c++)
            if (prev.call[c].args_len && cur.call[c].args_off == prev.call[c].args_off) FUZZ_CHECK(cur.call[c].args_len >= prev.call[c].args_len);
        prev = cur;
    }
    srv_tools_parse(f, s, n, true, names, 3, &cur);
    check_bounds(&cur, n);
    if (cur.n_calls == 0) FUZZ_CHECK(cur.content_len == n);
    for (int32_t c = 0; c < cur.n_calls; c++) {
        const srv_tool_call *tc = &cur.call[c];
        FUZZ_CHECK(tc->name_done && tc->args_done);
        bool known = false;
        for (int i = 0; i < 3; i++) known |= strlen(names[i]) == tc->name_len && memcmp(names[i], s + tc->name_off, tc->name_len) == 0;
        FUZZ_CHECK(known);
        json_t *a = json_loadb(s + tc->args_off, tc->args_len, 0, NULL);
        FUZZ_CHECK(json_is_object(a));
        json_decref(a);
        json_t *calls = srv_tool_calls_json(f, "chatcmpl-0123", 0, s, &cur);
        FUZZ_CHECK(calls && json_array_size(calls) == (size_t)cur.n_calls);
        json_decref(calls);
    }
    return 0;
}
