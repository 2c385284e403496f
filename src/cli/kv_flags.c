/* kv_flags: the KV cache storage flags every command that makes a context
 * shares (-ctk/-ctv, llama.cpp's spellings and type names). */
#include "cli/cli.h"
#include "kv/policy.h"

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
            return cli_usage(cmd, "%s %s: llama.cpp's cache type, not supported by brisk (supported: f16, f32, q8_0, q4_0, k4, k2)", a->given[id], name);
    return cli_usage(cmd, "%s '%s': unknown cache type (supported: f16, f32, q8_0, q4_0, k4, k2)", a->given[id], name);
}

int cli_kv_types(const cli_args *a, const char *cmd, brisk_context_params *cp) {
    int code = one_type(a, cmd, CLI_O_CACHE_TYPE_K, &cp->type_k);
    if (!code) code = one_type(a, cmd, CLI_O_CACHE_TYPE_V, &cp->type_v);
    return code;
}

int cli_kv_policy(const cli_args *a, const char *cmd, int64_t n_ctx, int32_t ubatch, brisk_context_params *cp) {
    const int kind = a->set[CLI_O_KV_POLICY] ? brisk_kv_policy_parse(a->s[CLI_O_KV_POLICY]) : BRISK_KV_POLICY_NONE;
    if (kind < 0) return cli_usage(cmd, "--kv-policy '%s': unknown (%s)", a->s[CLI_O_KV_POLICY], brisk_kv_policy_names());
    if (kind == BRISK_KV_POLICY_NONE) {
        static const cli_opt_id needs[] = {CLI_O_KV_BUDGET, CLI_O_KV_SINK, CLI_O_KV_WINDOW};
        for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++)
            if (a->set[needs[i]]) return cli_usage(cmd, "%s needs --kv-policy NAME (one other than none)", a->given[needs[i]]);
        return 0;
    }
    if (!a->set[CLI_O_KV_BUDGET]) return cli_usage(cmd, "--kv-policy %s needs --kv-budget N|F (slots, or a fraction of -c)", brisk_kv_policy_name(kind));
    brisk_error err = {0};
    int32_t budget = 0;
    if (brisk_kv_budget_parse(a->s[CLI_O_KV_BUDGET], (int32_t)n_ctx, &budget, &err)) return cli_usage(cmd, "--kv-budget: %s", err.msg);
    const int64_t sink = a->i[CLI_O_KV_SINK], window = a->i[CLI_O_KV_WINDOW];
    if (sink + window + ubatch > budget)
        return cli_usage(cmd,
                         "--kv-budget %s = %d slots cannot hold the %lld sinks (--kv-sink), the %lld-slot window (--kv-window) and a "
                         "ubatch of %d tokens (-ub)",
                         a->s[CLI_O_KV_BUDGET], budget, (long long)sink, (long long)window, ubatch);
    cp->kv_policy = kind;
    cp->kv_budget = budget;
    cp->kv_sink = (int32_t)sink;
    cp->kv_window = (int32_t)window;
    return 0;
}

/* ---- the draft model's cache (drafter-only compression) ---------------------------------------- */

static const cli_opt_id draft_kv_flags[] = {CLI_O_CACHE_TYPE_K_DRAFT, CLI_O_CACHE_TYPE_V_DRAFT, CLI_O_KV_POLICY_DRAFT,
                                            CLI_O_KV_BUDGET_DRAFT,    CLI_O_KV_SINK_DRAFT,      CLI_O_KV_WINDOW_DRAFT};

bool cli_kv_draft_given(const cli_args *a) {
    for (size_t i = 0; i < sizeof draft_kv_flags / sizeof draft_kv_flags[0]; i++)
        if (a->set[draft_kv_flags[i]]) return true;
    return false;
}

int cli_kv_draft(const cli_args *a, const char *cmd, bool has_draft, int64_t n_ctx, brisk_context_params *dp) {
    if (!has_draft)
        for (size_t i = 0; i < sizeof draft_kv_flags / sizeof draft_kv_flags[0]; i++)
            if (a->set[draft_kv_flags[i]]) return cli_usage(cmd, "%s needs a draft model (-md)", a->given[draft_kv_flags[i]]);
    int code = one_type(a, cmd, CLI_O_CACHE_TYPE_K_DRAFT, &dp->type_k);
    if (!code) code = one_type(a, cmd, CLI_O_CACHE_TYPE_V_DRAFT, &dp->type_v);
    if (code) return code;
    const char *name = a->set[CLI_O_KV_POLICY_DRAFT] ? a->s[CLI_O_KV_POLICY_DRAFT] : "none";
    const int kind = brisk_kv_policy_parse(name);
    if (kind < 0) {
        /* the names src/kv knows, so a policy added there is listed without a change here */
        char names[256];
        size_t o = 0;
        names[0] = 0;
        for (int k = 0; k < BRISK_KV_N_POLICIES && o < sizeof names; k++)
            o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", k ? ", " : "", brisk_kv_policy_name(k));
        return cli_usage(cmd, "%s '%s': unknown policy (%s)", a->given[CLI_O_KV_POLICY_DRAFT], name, names);
    }
    if (kind == BRISK_KV_POLICY_NONE) {
        static const cli_opt_id needs[] = {CLI_O_KV_BUDGET_DRAFT, CLI_O_KV_SINK_DRAFT, CLI_O_KV_WINDOW_DRAFT};
        for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++)
            if (a->set[needs[i]]) return cli_usage(cmd, "%s needs --kv-policy-draft NAME (a policy other than none)", a->given[needs[i]]);
        dp->kv_policy = BRISK_KV_POLICY_NONE;
        return 0;
    }
    if (!a->set[CLI_O_KV_BUDGET_DRAFT])
        return cli_usage(cmd, "--kv-policy-draft %s needs --kv-budget-draft N|F (slots, or a fraction of -c)", brisk_kv_policy_name(kind));
    brisk_error err = {0};
    int32_t budget = 0;
    /* before the model loads without -c the context is not known: only the value's form is checked */
    if (brisk_kv_budget_parse(a->s[CLI_O_KV_BUDGET_DRAFT], n_ctx > 0 ? (int32_t)BRISK_MIN(n_ctx, INT32_MAX) : INT32_MAX, &budget, &err))
        return cli_usage(cmd, "%s: %s", a->given[CLI_O_KV_BUDGET_DRAFT], err.msg);
    const int64_t sink = a->i[CLI_O_KV_SINK_DRAFT], window = a->i[CLI_O_KV_WINDOW_DRAFT];
    /* the draft's batches are cut to budget - sink - window tokens, so one token of room is enough */
    if (n_ctx > 0 && sink + window + 1 > budget)
        return cli_usage(cmd,
                         "%s %s = %d slots cannot hold the %lld sinks (--kv-sink-draft), the %lld-slot window (--kv-window-draft) "
                         "and one more token",
                         a->given[CLI_O_KV_BUDGET_DRAFT], a->s[CLI_O_KV_BUDGET_DRAFT], budget, (long long)sink, (long long)window);
    dp->kv_policy = kind;
    dp->kv_budget = budget;
    dp->kv_sink = (int32_t)sink;
    dp->kv_window = (int32_t)window;
    return 0;
}
