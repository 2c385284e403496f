/* fuzz_template: libFuzzer target for the chat template engine.
 * Parses the input as a template and, when it parses, renders it with a small
 * fixed conversation (system/user/assistant with a tool call, a tool result)
 * and tools, under tight caps on steps, work, output, memory and depth, so any
 * input finishes quickly. Checks: no crash/leak/UB (sanitizers), every
 * failure carries a status and a message, output is NUL-terminated with the
 * reported length, and rendering twice gives the same result. */
#include "fuzz_check.h"
#include "template/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *messages =
    "[{\"role\":\"system\",\"content\":\"You are terse. \\u00e9\"},"
    "{\"role\":\"user\",\"content\":\"Hi <b>&\\\"'\\n\\t there\"},"
    "{\"role\":\"assistant\",\"content\":\"<think>hmm</think>ok\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1,\"y\":[true,null,2.5]}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"parts\"}]}]";
static const char *vars =
    "{\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"enable_thinking\":false,"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}},\"required\":[\"x\"]}}}]}";

static void check_err(brisk_status st, const brisk_error *err) {
    FUZZ_CHECK(st == BRISK_ERR_TEMPLATE || st == BRISK_ERR_UNSUPPORTED || st == BRISK_ERR_CAPACITY ||
               st == BRISK_ERR_NOMEM);
    FUZZ_CHECK(err->status == st);
    (void)err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_template *t = NULL;
    brisk_error err;
    memset(&err, 0, sizeof err);
    brisk_status st = brisk_template_parse((const char *)data, size, &t, &err);
    if (st != BRISK_OK) {
        FUZZ_CHECK(t == NULL);
        check_err(st, &err);
        FUZZ_CHECK(err.msg[0] != 0);
        return 0;
    }
    brisk_template_opts o = {.now = 1767361530, .max_output = 1 << 20, .max_memory = 64 << 20,
                             .max_steps = 200000, .max_depth = 40, .max_work = 2000000};
    char *out = NULL, *out2 = NULL;
    size_t n = 0, n2 = 0;
    st = brisk_template_render_ex(t, messages, vars, &o, &out, &n, &err);
    if (st == BRISK_OK) {
        FUZZ_CHECK(out != NULL && out[n] == 0 && n <= o.max_output);
    } else {
        FUZZ_CHECK(out == NULL);
        check_err(st, &err);
    }
    brisk_error err2;
    memset(&err2, 0, sizeof err2);
    brisk_status st2 = brisk_template_render_ex(t, messages, vars, &o, &out2, &n2, &err2);
    FUZZ_CHECK(st2 == st);
    if (st == BRISK_OK) FUZZ_CHECK(n2 == n && memcmp(out, out2, n) == 0);
    else FUZZ_CHECK(strcmp(err.msg, err2.msg) == 0);
    free(out);
    free(out2);
    brisk_template_free(t);
    return 0;
}
