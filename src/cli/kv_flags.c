/* kv_flags: the KV cache storage flags every command that makes a context
 * shares (-ctk/-ctv, llama.cpp's spellings and type names). */
#include "cli/cli.h"

#include <strings.h>

/* llama.cpp's other cache types: named in the refusal so a llama.cpp command
 * line that uses one gets a precise answer rather than "unknown". */
static const char *const peer_only[] = {"bf16", "q4_1", "q5_0", "q5_1", "iq4_nl"};

static int one_type(const cli_args *a, const char *cmd, cli_opt_id id, int32_t *out) {
    if (!a->set[id]) return 0;   /* the default: f16 (0) */
    const char *name = a->s[id];
    const int t = brisk_cache_type_parse(name);
    if (t >= 0) {
        *out = t;
        return 0;
    }
    for (size_t i = 0; i < sizeof peer_only / sizeof peer_only[0]; i++)
        if (!strcasecmp(name, peer_only[i]))
            return cli_usage(cmd, "%s %s: llama.cpp's cache type, not supported by brisk (supported: f16, f32, q8_0, q4_0)", a->given[id], name);
    return cli_usage(cmd, "%s '%s': unknown cache type (supported: f16, f32, q8_0, q4_0)", a->given[id], name);
}

int cli_kv_types(const cli_args *a, const char *cmd, brisk_context_params *cp) {
    int code = one_type(a, cmd, CLI_O_CACHE_TYPE_K, &cp->type_k);
    if (!code) code = one_type(a, cmd, CLI_O_CACHE_TYPE_V, &cp->type_v);
    return code;
}
