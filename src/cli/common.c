/* common: steps several commands share around making a context: threads,
 * the -ngl note, the training-context warning and the memory plan. */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int32_t cli_threads(const cli_args *a) {
    if (a->set[CLI_O_THREADS]) return (int32_t)a->i[CLI_O_THREADS];
    const char *env = getenv("BRISK_THREADS");
    if (env && *env) {
        char *end = NULL;
        const long v = strtol(env, &end, 10);
        if (*end == 0 && v >= 1 && v <= 1024) return (int32_t)v;
    }
    return 0;
}

void cli_note_ngl(const cli_args *a) {
    if (a->set[CLI_O_NGL])
        fprintf(stderr, "brisk %s: note: %s has no effect: brisk runs on the CPU\n", a->spec->name, a->given[CLI_O_NGL]);
}

void cli_warn_ctx(const char *cmd, int64_t n_ctx, int32_t n_ctx_train) {
    if (n_ctx_train > 0 && n_ctx > n_ctx_train)
        fprintf(stderr, "brisk %s: warning: n_ctx (%lld) > n_ctx_train (%d) -- possible training context overflow\n", cmd,
                (long long)n_ctx, n_ctx_train);
}

brisk_status cli_plan(const char *cmd, const char *what, const brisk_model *m, const brisk_context_params *cp, bool verbose,
                      brisk_memory_plan *out, brisk_error *err) {
    brisk_status st = brisk_context_plan(m, cp, out, err);
    if (st) return st;
    if (verbose) {
        char buf[256];
        brisk_memory_plan_format(out, buf, sizeof buf);
        fprintf(stderr, "brisk %s: %s: %s\n", cmd, what, buf);
    }
    return BRISK_OK;
}

int cli_fail(const char *cmd, const brisk_error *err) {
    fprintf(stderr, "brisk %s: %s\n", cmd, err->msg[0] ? err->msg : brisk_status_str(err->status));
    return CLI_EXIT_RUNTIME;
}

int64_t cli_ctx_size(const cli_args *a, int32_t n_ctx_train) {
    int64_t n = a->i[CLI_O_CTX_SIZE];
    if (!a->set[CLI_O_CTX_SIZE] && !a->has_default[CLI_O_CTX_SIZE]) n = n_ctx_train < 4096 ? n_ctx_train : 4096;
    else if (n == 0) n = n_ctx_train;
    if (n < 1) n = 4096;   /* a model that states no training context */
    cli_warn_ctx(a->spec->name, n, n_ctx_train);
    return n;
}

void cli_sampler_params(const cli_args *a, brisk_sampler_params *sp) {
    *sp = brisk_sampler_default_params();
    sp->temp = (float)a->f[CLI_O_TEMP];
    sp->top_k = (int32_t)a->i[CLI_O_TOP_K];
    sp->top_p = (float)a->f[CLI_O_TOP_P];
    sp->min_p = (float)a->f[CLI_O_MIN_P];
    sp->repeat_penalty = (float)a->f[CLI_O_REPEAT_PENALTY];
    sp->repeat_last_n = (int32_t)a->i[CLI_O_REPEAT_LAST_N];
    sp->freq_penalty = (float)a->f[CLI_O_FREQ_PENALTY];
    sp->presence_penalty = (float)a->f[CLI_O_PRESENCE_PENALTY];
    sp->repeat_mode = a->i[CLI_O_REPEAT_MODE] == 1 ? BRISK_REPEAT_LOGPROB : BRISK_REPEAT_CLASSIC;
    sp->seed = a->u[CLI_O_SEED];
    sp->typical_p = (float)a->f[CLI_O_TYPICAL];
    sp->top_n_sigma = (float)a->f[CLI_O_TOP_NSIGMA];
    sp->xtc_probability = (float)a->f[CLI_O_XTC_PROB];
    sp->xtc_threshold = (float)a->f[CLI_O_XTC_THRESH];
    sp->mirostat = (int32_t)a->i[CLI_O_MIROSTAT];
    sp->mirostat_eta = (float)a->f[CLI_O_MIROSTAT_LR];
    sp->mirostat_tau = (float)a->f[CLI_O_MIROSTAT_ENT];
    sp->min_keep = (int32_t)a->i[CLI_O_MIN_KEEP];
    sp->samplers = a->s[CLI_O_SAMPLERS];   /* borrowed from argv (or the table's default) */
    sp->dry_multiplier = (float)a->f[CLI_O_DRY_MULT];
    sp->dry_base = (float)a->f[CLI_O_DRY_BASE];
    sp->dry_allowed_length = (int32_t)a->i[CLI_O_DRY_ALLOWED];
    sp->dry_penalty_last_n = a->i[CLI_O_DRY_LAST_N] < 0 ? 0 : (int32_t)a->i[CLI_O_DRY_LAST_N];   /* -1: cli_sampler_dry */
}

brisk_status cli_sampler_dry(const cli_args *a, const brisk_model *m, int32_t n_ctx, brisk_sampler_params *sp,
                             int32_t **owned, brisk_error *err) {
    *owned = NULL;
    if (a->i[CLI_O_DRY_LAST_N] < 0) sp->dry_penalty_last_n = n_ctx;
    if (sp->dry_multiplier == 0.0f || sp->dry_base < 1.0f || sp->dry_penalty_last_n == 0) return BRISK_OK;
    static const char *const defaults[] = {"\n", ":", "\"", "*"};
    const char *const *brk = defaults;
    int32_t n = 4;
    if (a->n_list[CLI_O_DRY_BREAKER] > 0) {
        brk = a->list[CLI_O_DRY_BREAKER];
        n = a->n_list[CLI_O_DRY_BREAKER];
        if (n == 1 && strcmp(brk[0], "none") == 0) n = 0;
    }
    brisk_status st = brisk_dry_breakers(m, brk, n, owned, &sp->n_dry_breakers, err);
    sp->dry_breakers = *owned;
    return st;
}

/* ---- reverse prompts ----------------------------------------------------------------- */

brisk_status cli_stop_init(cli_stop *s, const cli_args *a, brisk_error *err) {
    *s = (cli_stop){0};
    const int n = a->n_list[CLI_O_REVERSE];
    if (n == 0) return BRISK_OK;
    s->text = calloc((size_t)n, sizeof *s->text);
    s->len = calloc((size_t)n, sizeof *s->len);
    if (!s->text || !s->len) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    for (int k = 0; k < n; k++) {
        const char *r = a->list[CLI_O_REVERSE][k];
        size_t len = strlen(r);
        if (!(s->text[k] = malloc(len + 1))) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
        memcpy(s->text[k], r, len + 1);
        if (a->i[CLI_O_ESCAPE]) cli_unescape(s->text[k], &len);
        s->len[k] = len;
        s->n++;
        if (len > s->max) s->max = len;
    }
    s->tail_cap = 2 * s->max + 64;
    if (!(s->tail = malloc(s->tail_cap))) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    return BRISK_OK;
}

bool cli_stop_push(cli_stop *s, const char *text, size_t len) {
    if (s->n == 0 || len == 0) return false;
    /* the last max-1 bytes before this piece, then the piece: a stop string
     * ending inside the piece (a token may carry text after it, "?>\n") */
    const size_t need = s->tail_len + len;
    if (need > s->tail_cap) {
        char *g = realloc(s->tail, need);
        if (!g) return false;
        s->tail = g;
        s->tail_cap = need;
    }
    memcpy(s->tail + s->tail_len, text, len);
    s->tail_len = need;
    bool hit = false;
    for (int k = 0; k < s->n && !hit; k++)
        hit = s->len[k] <= s->tail_len && memmem(s->tail, s->tail_len, s->text[k], s->len[k]) != NULL;
    const size_t keep = s->max - 1 < s->tail_len ? s->max - 1 : s->tail_len;
    memmove(s->tail, s->tail + s->tail_len - keep, keep);
    s->tail_len = keep;
    return hit;
}

void cli_stop_reset(cli_stop *s) { s->tail_len = 0; }

void cli_stop_free(cli_stop *s) {
    for (int k = 0; k < s->n; k++) free(s->text[k]);
    free(s->text);
    free(s->len);
    free(s->tail);
    *s = (cli_stop){0};
}

/* ---- --ignore-eos ------------------------------------------------------------------- */

brisk_status cli_eog_init(cli_eog *e, const brisk_model *m, int32_t n_vocab, brisk_error *err) {
    *e = (cli_eog){0};
    e->logits = malloc((size_t)n_vocab * sizeof *e->logits);
    if (!e->logits) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    e->n_vocab = n_vocab;
    for (int32_t id = 0; id < n_vocab; id++)
        if (brisk_token_is_eog(m, id)) {
            int32_t *g = realloc(e->ids, ((size_t)e->n_ids + 1) * sizeof *g);
            if (!g) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
            e->ids = g;
            e->ids[e->n_ids++] = id;
        }
    return BRISK_OK;
}

const float *cli_eog_mask(cli_eog *e, const float *logits) {
    memcpy(e->logits, logits, (size_t)e->n_vocab * sizeof *logits);
    for (int32_t k = 0; k < e->n_ids; k++) e->logits[e->ids[k]] = -INFINITY;
    return e->logits;
}

void cli_eog_free(cli_eog *e) {
    free(e->logits);
    free(e->ids);
    *e = (cli_eog){0};
}

/* ---- --pack-cache ---------------------------------------------------------------------- */

int cli_pack_cache(const cli_args *a) {
    if (!a->set[CLI_O_PACK_CACHE]) return 0;
    const char *v = a->s[CLI_O_PACK_CACHE];
    struct stat st;
    if (strcmp(v, "auto") && strcmp(v, "off") && (stat(v, &st) != 0 || !S_ISDIR(st.st_mode)))
        return cli_usage(a->spec->name, "%s %s: not a directory (give auto, off or an existing directory)", a->given[CLI_O_PACK_CACHE], v);
    if (setenv("BRISK_PACK_CACHE", v, 1) != 0) return cli_usage(a->spec->name, "%s: cannot set BRISK_PACK_CACHE", a->given[CLI_O_PACK_CACHE]);
    return 0;
}

void cli_note_pack_cache(const char *cmd, const brisk_model *m) {
    brisk_model_info info;
    brisk_model_get_info(m, &info);
    if (info.pack_cache) fprintf(stderr, "brisk %s: pack cache: %s\n", cmd, info.pack_cache);
}
