/* kv_flags: the KV cache storage flags every command that makes a context
 * shares (-ctk/-ctv, llama.cpp's spellings and type names). */
#include "cli/cli.h"
#include "kv/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
            return cli_usage(cmd, "%s %s: llama.cpp's cache type, not supported by brisk (supported: f16, f32, q8_0, q4_0, k4, k2, hyb4, hyb2)", a->given[id], name);
    return cli_usage(cmd, "%s '%s': unknown cache type (supported: f16, f32, q8_0, q4_0, k4, k2, hyb4, hyb2)", a->given[id], name);
}

int cli_kv_types(const cli_args *a, const char *cmd, brisk_context_params *cp) {
    int code = one_type(a, cmd, CLI_O_CACHE_TYPE_K, &cp->type_k);
    if (!code) code = one_type(a, cmd, CLI_O_CACHE_TYPE_V, &cp->type_v);
    if (!code && brisk_kv_type_hyb(cp->type_k) != brisk_kv_type_hyb(cp->type_v))
        return cli_usage(cmd, "-ctk %s -ctv %s: hyb4 and hyb2 keep a slot's K and V in F16 together, so they go on both (-ctk hyb4 -ctv hyb4)",
                         brisk_cache_type_name(cp->type_k), brisk_cache_type_name(cp->type_v));
    if (!code && a->set[CLI_O_K_HADAMARD] && a->i[CLI_O_K_HADAMARD]) {
        if (!brisk_kv_type_hadamard(cp->type_k))
            return cli_usage(cmd, "%s needs -ctk q8_0 or q4_0 (K is %s): an F16/F32 K loses nothing to rotate away, and k4/k2 "
                             "quantize per channel, which the rotation would mix", a->given[CLI_O_K_HADAMARD], brisk_cache_type_name(cp->type_k));
        cp->k_hadamard = true;
    }
    return code;
}

void cli_kv_copy(brisk_context_params *cp, const brisk_context_params *kv) {
    cp->type_k = kv->type_k;
    cp->type_v = kv->type_v;
    cp->k_hadamard = kv->k_hadamard;
    cp->kv_policy = kv->kv_policy;
    cp->kv_budget = kv->kv_budget;
    cp->kv_sink = kv->kv_sink;
    cp->kv_window = kv->kv_window;
    cp->kv_per_head = kv->kv_per_head;
    cp->kv_pin = kv->kv_pin;
}

int cli_kv_policy(const cli_args *a, const char *cmd, int64_t n_ctx, int32_t ubatch, brisk_context_params *cp) {
    const int kind = a->set[CLI_O_KV_POLICY] ? brisk_kv_policy_parse(a->s[CLI_O_KV_POLICY]) : BRISK_KV_POLICY_NONE;
    if (kind < 0) return cli_usage(cmd, "--kv-policy '%s': unknown (%s)", a->s[CLI_O_KV_POLICY], brisk_kv_policy_names());
    if (kind == BRISK_KV_POLICY_ORACLE && strcmp(cmd, "perplexity") != 0)
        return cli_usage(cmd,
                         "--kv-policy oracle ranks slots by the attention of queries still to come, recorded by a first pass over the whole "
                         "text with every slot kept: only brisk perplexity knows its text ahead (a chunk), %s cannot; it is a reference "
                         "row for measuring the other policies (docs/KV.md)",
                         cmd);
    if (kind == BRISK_KV_POLICY_NONE) {
        static const cli_opt_id needs[] = {CLI_O_KV_BUDGET, CLI_O_KV_SINK, CLI_O_KV_WINDOW, CLI_O_KV_PER_HEAD};
        /* a context shift keeps the first --kv-sink slots too */
        const bool shift = a->set[CLI_O_CONTEXT_SHIFT] && a->i[CLI_O_CONTEXT_SHIFT];
        for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++)
            if (a->set[needs[i]] && !(shift && needs[i] == CLI_O_KV_SINK))
                return cli_usage(cmd, "%s needs --kv-policy NAME (one other than none)%s", a->given[needs[i]],
                                 needs[i] == CLI_O_KV_SINK ? " or --context-shift" : "");
        if (shift) cp->kv_sink = (int32_t)a->i[CLI_O_KV_SINK];
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
    if (a->set[CLI_O_KV_PER_HEAD] && a->i[CLI_O_KV_PER_HEAD]) {
        if (!brisk_kv_policy_per_head_ok(kind))
            return cli_usage(cmd, "--kv-per-head ranks slots by the attention each KV head gives them: it needs --kv-policy h2o, snapkv, "
                             "tova, oracle or memdecay (not %s)", brisk_kv_policy_name(kind));
        if (a->n_list[CLI_O_KV_PIN] > 0)
            return cli_usage(cmd, "--kv-per-head does not keep pinned roles yet: drop --kv-pin or --kv-per-head");
        cp->kv_per_head = true;
    }
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
    if (has_draft && (brisk_kv_type_hyb(dp->type_k) || brisk_kv_type_hyb(dp->type_v)))   /* (serve: inherited from -ctk too) */
        return cli_usage(cmd,
                         "%s/%s %s: the draft's cache is cut back after every rejected draft, and a hyb4/hyb2 cache continues only "
                         "whole (its hot rows hold every query's attention), so it would be recomputed from the start each time; use "
                         "k4, k2, q8_0 or q4_0 for the draft",
                         a->given[CLI_O_CACHE_TYPE_K_DRAFT], a->given[CLI_O_CACHE_TYPE_V_DRAFT],
                         brisk_cache_type_name(brisk_kv_type_hyb(dp->type_k) ? dp->type_k : dp->type_v));
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
    if (kind == BRISK_KV_POLICY_ORACLE)
        return cli_usage(cmd,
                         "%s oracle ranks slots by the attention of queries still to come, recorded by a first pass over the whole "
                         "text: a draft model does not know its text ahead; only brisk perplexity runs it (docs/KV.md)",
                         a->given[CLI_O_KV_POLICY_DRAFT]);
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

/* ---- pinning and generation past the context (run, chat) ------------------------------------------ */

int cli_kv_retention(const cli_args *a, const char *cmd, uint32_t roles, brisk_context_params *cp, cli_retention *r) {
    r->shift_on = a->set[CLI_O_CONTEXT_SHIFT] && a->i[CLI_O_CONTEXT_SHIFT];
    r->policy_given = a->set[CLI_O_KV_POLICY] && strcmp(a->s[CLI_O_KV_POLICY], "none") != 0;
    r->c_early = a->set[CLI_O_CTX_SIZE] && a->i[CLI_O_CTX_SIZE] > 0 ? a->i[CLI_O_CTX_SIZE] : 0;
    int code;
    if ((r->c_early || !r->policy_given) && (code = cli_kv_policy(a, cmd, r->c_early ? r->c_early : INT32_MAX, 1, cp))) return code;
    return cli_kv_pin(a, cmd, roles, r->policy_given || r->shift_on, cp);
}

int cli_kv_pin(const cli_args *a, const char *cmd, uint32_t roles, bool evicting, brisk_context_params *cp) {
    cp->kv_pin = 0;
    for (int k = 0; k < a->n_list[CLI_O_KV_PIN]; k++) {
        const char *name = a->list[CLI_O_KV_PIN][k];
        const int r = brisk_kv_role_parse(name);
        if (r <= 0 || !((roles >> r) & 1u)) {
            char names[128];
            size_t o = 0;
            names[0] = 0;
            for (int q = 1; q < BRISK_KV_N_ROLES && o < sizeof names; q++)
                if ((roles >> q) & 1u) o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", o ? ", " : "", brisk_kv_role_name(q));
            return cli_usage(cmd, "--kv-pin '%s': %s (%s tags: %s)", name, r < 0 ? "unknown role" : "not a role this command tags",
                             cmd, names);
        }
        cp->kv_pin |= 1u << r;
    }
    if (cp->kv_pin && !evicting)
        return cli_usage(cmd, "--kv-pin needs --kv-policy NAME or --context-shift (without them no slot is ever dropped)");
    return 0;
}

void cli_ctx_shift_init(cli_ctx_shift *cs, const brisk_context *ctx, const brisk_context_params *cp, bool on, int32_t n_ctx_train) {
    memset(cs, 0, sizeof *cs);
    cs->on = on;
    cs->policy = cp->kv_policy != 0;
    cs->n_ctx = brisk_context_n_ctx(ctx);
    /* without a policy the slots fill -c first; with one, positions grow past -c and the trained context bounds them */
    cs->pos_limit = cs->policy && n_ctx_train > 0 ? n_ctx_train : cs->n_ctx;
    cs->n_keep = cp->kv_sink;
    cs->batch = brisk_context_n_batch(ctx);
    if (cs->policy) cs->batch = BRISK_MIN(cs->batch, cp->kv_budget - cp->kv_sink - cp->kv_window);
    if (cs->batch < 1) cs->batch = 1;
}

brisk_status cli_ctx_make_room(brisk_context *ctx, cli_ctx_shift *cs, int32_t n, bool *ok, brisk_error *err) {
    *ok = true;
    const int32_t len = brisk_seq_len(ctx, 0), next = brisk_seq_next_pos(ctx, 0);
    const bool slots_full = !cs->policy && (int64_t)len + n > cs->n_ctx, pos_full = (int64_t)next + n > cs->pos_limit;
    if (!slots_full && !pos_full) return BRISK_OK;
    if (!cs->on) {
        *ok = false;
        return BRISK_OK;
    }
    /* llama.cpp's: keep n_keep, discard half of the rest. With a policy the slots already fit the budget: renumbering
     * them is enough, unless even their count reaches the trained positions */
    const int32_t limit = cs->policy ? cs->pos_limit : BRISK_MIN(cs->n_ctx, cs->pos_limit);
    int32_t n_discard = 0;
    if (!cs->policy || (int64_t)len + n > limit) n_discard = BRISK_MAX(BRISK_MAX(len - cs->n_keep, 0) / 2, len + n - limit);
    int32_t dropped = 0;
    brisk_status st = brisk_seq_context_shift(ctx, 0, cs->n_keep, n_discard, &dropped, err);
    if (st) return st;
    cs->n_shifts++;
    cs->n_discarded += dropped;
    if ((!cs->policy && (int64_t)brisk_seq_len(ctx, 0) + n > cs->n_ctx) || (int64_t)brisk_seq_next_pos(ctx, 0) + n > cs->pos_limit)
        return brisk_fail(err, BRISK_ERR_CAPACITY,
                          "context shift: %d slots stay (the first %d and the pinned ones, --kv-pin) and leave no room for %d more "
                          "tokens in %d; pin fewer roles or raise -c",
                          brisk_seq_len(ctx, 0), cs->n_keep, n, limit);
    return BRISK_OK;
}

brisk_status cli_ctx_feed(brisk_context *ctx, cli_ctx_shift *cs, const int32_t *tokens, int32_t n, const uint8_t *role, int32_t role0,
                          bool *ok, brisk_error *err) {
    *ok = true;
    brisk_status st = BRISK_OK;
    int32_t *pos = malloc((size_t)cs->batch * sizeof *pos), *seq = calloc((size_t)cs->batch, sizeof *seq);
    uint8_t *want = calloc((size_t)cs->batch, 1);
    if (!pos || !seq || !want) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int32_t i0 = 0; i0 < n;) {
        /* one batch: at most cs->batch tokens of one role */
        const int32_t r = role ? role[i0] : role0;
        int32_t m = 1;
        while (i0 + m < n && m < cs->batch && (role ? role[i0 + m] : role0) == r) m++;
        /* a fixed schedule, so that the output does not depend on -b: a context shift only when the slots or
         * positions are full (room for one more token), then no batch crosses their end, and with a policy no
         * batch crosses the point where it cuts (brisk_seq_policy_room; 0, pinned slots filling the budget: a
         * batch of one, which the policy refuses with the reason) */
        if ((st = cli_ctx_make_room(ctx, cs, 1, ok, err)) || !*ok) goto done;
        int64_t left = (int64_t)cs->pos_limit - brisk_seq_next_pos(ctx, 0);
        if (!cs->policy) left = BRISK_MIN(left, (int64_t)cs->n_ctx - brisk_seq_len(ctx, 0));
        if (left < m) m = (int32_t)left;   /* >= 1 after make_room */
        if (cs->policy) m = BRISK_MAX(1, BRISK_MIN(m, brisk_seq_policy_room(ctx, 0)));
        if ((st = brisk_seq_set_role(ctx, 0, r, err))) goto done;
        const int32_t p0 = brisk_seq_next_pos(ctx, 0);
        for (int32_t j = 0; j < m; j++) {
            pos[j] = p0 + j;
            want[j] = i0 + j == n - 1;
        }
        const brisk_batch b = {.n_tokens = m, .token = tokens + i0, .pos = pos, .seq = seq, .logits = want};
        if ((st = brisk_decode(ctx, &b, err))) goto done;
        i0 += m;
    }
done:
    free(pos);
    free(seq);
    free(want);
    return st;
}

void cli_ctx_shift_describe(const brisk_context *ctx, const brisk_context_params *cp, const cli_ctx_shift *cs, char *buf, size_t cap) {
    brisk_cache_stats cst;
    brisk_context_cache_stats(ctx, &cst);
    size_t o = 0;
#define PUT(...) (o += o < cap ? (size_t)snprintf(buf + o, cap - o, __VA_ARGS__) : 0)
    PUT("KV | K %s, V %s | ", brisk_cache_type_name(cp->type_k), brisk_cache_type_name(cp->type_v));
    if (cp->kv_policy)
        PUT("%s budget %d (sink %d, window %d%s) | %lld slots dropped | ", brisk_kv_policy_name(cp->kv_policy), cp->kv_budget, cp->kv_sink,
            cp->kv_window, cp->kv_per_head ? ", per head" : "", (long long)(cst.dropped - cs->n_discarded));
    PUT("context shift %s", cs->on ? "on" : "off");
    if (cs->on) PUT(" (keep %d): %lld shifts, %lld slots discarded", cs->n_keep, (long long)cs->n_shifts, (long long)cs->n_discarded);
    if (cp->kv_pin) {
        PUT(" | pinned");
        for (int r = 1; r < BRISK_KV_N_ROLES; r++)
            if ((cp->kv_pin >> r) & 1u) PUT(" %s", brisk_kv_role_name(r));
    }
    PUT(" | peak %d blocks x %zu bytes = %.1f KiB", cst.in_use_max, cst.block_bytes, (double)cst.in_use_max * (double)cst.block_bytes / 1024.0);
#undef PUT
    if (o >= cap && cap) buf[cap - 1] = 0;
}
