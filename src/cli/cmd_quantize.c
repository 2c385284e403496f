/* cmd_quantize: `brisk quantize IN.gguf OUT.gguf TYPE` — llama-quantize's
 * command line over quant/quantize.c, whose output is byte-identical to
 * llama-quantize's (docs/QUANTIZE.md). */
#include "cli/cli.h"
#include "quant/imatrix.h"
#include "quant/quantize.h"
#include "quant/quant.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_use quantize_uses[] = {
    {.id = CLI_O_ALLOW_REQUANTIZE}, {.id = CLI_O_LEAVE_OUTPUT}, {.id = CLI_O_PURE},
    {.id = CLI_O_OUTPUT_TENSOR_TYPE}, {.id = CLI_O_TOKEN_EMBD_TYPE}, {.id = CLI_O_TENSOR_TYPE},
    {.id = CLI_O_OVERRIDE_KV},
    {.id = CLI_O_IMATRIX, .help = "importance matrix of llama-imatrix (GGUF or legacy .dat): the quantizers fit with it, as llama-quantize --imatrix"},
    {.id = CLI_O_INCLUDE_WEIGHTS}, {.id = CLI_O_EXCLUDE_WEIGHTS},
    {.id = CLI_O_THREADS, .def_help = "$BRISK_THREADS, else all CPUs (a 4th argument N also sets it, as llama-quantize's)"},
    {.id = CLI_O_VERBOSE, .help = "print each tensor's type on stderr"},
    {.id = CLI_O_END},
};

static char quantize_epilog[512];

static const cli_spec quantize_spec = {
    .name = "quantize",
    .usage = "[options] IN.gguf OUT.gguf TYPE [N_THREADS]",
    .about = "Writes OUT.gguf, IN.gguf with its tensors quantized to TYPE's mixture; the file is\n"
             "byte-identical to what llama-quantize writes for the same arguments (metadata, tensor\n"
             "order, per-tensor types, blocks). IN may be F32, F16 or BF16 (or quantized, with\n"
             "--allow-requantize). Tensors stream through the input's mapping, so memory stays\n"
             "about one 64 MiB slab whatever the model's size. OUT is written beside its final\n"
             "name and renamed into place when complete: an error never leaves a partial file.\n",
    .uses = quantize_uses,
    .positional = "argument",
    .max_positional = 4,
    .epilog = quantize_epilog,
};

typedef struct progress_state {
    bool tty, verbose;
    int last_pct, last_tensor;
    double t0;
    const brisk_quantize_plan *plan;
} progress_state;

static void show_progress(int64_t done, int64_t total, int i, int n, const char *name, void *ud) {
    progress_state *ps = ud;
    if (!ps->tty) return;
    const int pct = total > 0 ? (int)(done * 100 / total) : 100;
    if (pct == ps->last_pct && i == ps->last_tensor) return;
    ps->last_pct = pct;
    ps->last_tensor = i;
    char bar[31];
    const int fill = pct * 30 / 100;
    for (int k = 0; k < 30; k++) bar[k] = k < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\r\033[Kbrisk quantize: [%s] %3d%%  %d/%d %s", bar, pct, i < n ? i + 1 : n, n, name);
    if (i >= n) fputc('\n', stderr);
}

/* "REGEX=TYPE", the regex lowercased as llama-quantize does. */
static bool parse_tensor_type(const char *arg, char **pattern, uint32_t *type) {
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) {
        fprintf(stderr, "brisk quantize: --tensor-type '%s': expected REGEX=TYPE\n", arg);
        return false;
    }
    const int t = brisk_quantize_type_parse(eq + 1);
    if (t < 0) {
        fprintf(stderr, "brisk quantize: --tensor-type '%s': unknown or unsupported type '%s'\n", arg, eq + 1);
        return false;
    }
    *pattern = strndup(arg, (size_t)(eq - arg));
    if (!*pattern) return false;
    for (char *c = *pattern; *c; c++) *c = (char)tolower((unsigned char)*c);
    *type = (uint32_t)t;
    return true;
}

static bool parse_type_flag(const cli_args *a, cli_opt_id id, int *out) {
    *out = -1;
    if (!a->set[id]) return true;
    *out = brisk_quantize_type_parse(a->s[id]);
    if (*out < 0) {
        fprintf(stderr, "brisk quantize: %s: unknown or unsupported type '%s' (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS MXFP4)\n",
                a->given[id], a->s[id]);
        return false;
    }
    return true;
}

int brisk_cmd_quantize(int argc, char **argv) {
    snprintf(quantize_epilog, sizeof quantize_epilog,
             "types: %s\n--imatrix FILE: llama.cpp's importance matrix (GGUF, or the legacy .dat); the\n"
             "quantize.imatrix.* keys are written as llama-quantize writes them.\n",
             brisk_ftype_list());
    cli_args a;
    int code;
    if (!cli_parse(&quantize_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    int rc = CLI_EXIT_USAGE;
    brisk_quantize_params p;
    brisk_quantize_default_params(&p);
    brisk_quantize_tensor_type *tt = NULL;
    brisk_kv_override *kvo = NULL;
    brisk_imatrix imatrix = {0};
    int n_tt = 0;
    if (a.n_pos < 3) {
        fprintf(stderr, "brisk quantize: expected IN.gguf OUT.gguf TYPE (see brisk quantize --help)\n");
        goto done;
    }
    const char *in = a.pos[0], *out = a.pos[1], *type = a.pos[2];
    if (!brisk_ftype_parse(type, &p.ftype)) {
        fprintf(stderr, "brisk quantize: unknown or unsupported type '%s' (one of: %s)\n", type, brisk_ftype_list());
        goto done;
    }
    p.n_threads = cli_threads(&a);
    if (a.n_pos == 4 && !a.set[CLI_O_THREADS]) {
        int64_t n = 0;
        if (!cli_parse_int("quantize", "N_THREADS", a.pos[3], 1, 1024, &n)) goto done;
        p.n_threads = (int)n;
    }
    p.allow_requantize = a.i[CLI_O_ALLOW_REQUANTIZE] != 0;
    p.leave_output_tensor = a.i[CLI_O_LEAVE_OUTPUT] != 0;
    p.pure = a.i[CLI_O_PURE] != 0;
    if (!parse_type_flag(&a, CLI_O_OUTPUT_TENSOR_TYPE, &p.output_tensor_type) ||
        !parse_type_flag(&a, CLI_O_TOKEN_EMBD_TYPE, &p.token_embedding_type))
        goto done;
    const int n_tt_arg = a.n_list[CLI_O_TENSOR_TYPE], n_kvo = a.n_list[CLI_O_OVERRIDE_KV];
    tt = calloc((size_t)n_tt_arg + 1, sizeof *tt);
    kvo = calloc((size_t)n_kvo + 4, sizeof *kvo);   /* room for the imatrix's keys */
    if (!tt || !kvo) {
        fprintf(stderr, "brisk quantize: out of memory\n");
        rc = CLI_EXIT_RUNTIME;
        goto done;
    }
    for (; n_tt < n_tt_arg; n_tt++) {
        char *pat = NULL;
        if (!parse_tensor_type(a.list[CLI_O_TENSOR_TYPE][n_tt], &pat, &tt[n_tt].type)) goto done;
        tt[n_tt].pattern = pat;
    }
    for (int i = 0; i < n_kvo; i++) {
        brisk_error err = {0};
        if (!brisk_kv_override_parse(a.list[CLI_O_OVERRIDE_KV][i], &kvo[i], &err)) {
            fprintf(stderr, "brisk quantize: %s\n", err.msg);
            goto done;
        }
    }
    int n_imatrix_kv = 0;
    const int n_inc = a.n_list[CLI_O_INCLUDE_WEIGHTS], n_exc = a.n_list[CLI_O_EXCLUDE_WEIGHTS];
    if (n_inc && n_exc) {   /* llama-quantize refuses the pair too */
        fprintf(stderr, "brisk quantize: --include-weights and --exclude-weights cannot be used together\n");
        goto done;
    }
    if ((n_inc || n_exc) && !a.set[CLI_O_IMATRIX]) {
        fprintf(stderr, "brisk quantize: %s selects importance-matrix entries: it needs --imatrix FILE\n",
                n_inc ? "--include-weights" : "--exclude-weights");
        goto done;
    }
    if (a.set[CLI_O_IMATRIX]) {
        brisk_error err = {0};
        if (brisk_imatrix_load(a.s[CLI_O_IMATRIX], &imatrix, &err)) {
            fprintf(stderr, "brisk quantize: --imatrix: %s\n", err.msg);
            rc = CLI_EXIT_RUNTIME;
            goto done;
        }
        if (n_inc || n_exc)
            brisk_imatrix_filter(&imatrix, (const char *const *)(n_inc ? a.list[CLI_O_INCLUDE_WEIGHTS] : a.list[CLI_O_EXCLUDE_WEIGHTS]),
                                 n_inc ? n_inc : n_exc, n_inc > 0);
        /* after the user's overrides, as llama-quantize appends them; a
         * matrix the selection emptied is not used, and its keys are not written */
        brisk_quantize_imatrix_overrides(&imatrix, a.s[CLI_O_IMATRIX], kvo + n_kvo, &n_imatrix_kv);
        p.imatrix = imatrix.n_entries ? &imatrix : NULL;
    }
    p.tensor_types = tt;
    p.n_tensor_types = n_tt;
    p.kv_overrides = kvo;
    p.n_kv_overrides = n_kvo + n_imatrix_kv;
    progress_state ps = {.tty = isatty(2) != 0, .verbose = a.i[CLI_O_VERBOSE] != 0, .last_pct = -1, .last_tensor = -1,
                         .t0 = brisk_time_now()};
    p.progress = show_progress;
    p.progress_ud = &ps;
    brisk_error err = {0};
    if (ps.verbose) {   /* the plan, before any work */
        brisk_gguf *g = NULL;
        brisk_quantize_plan plan;
        if (brisk_gguf_open(in, &g, &err) || brisk_quantize_plan_make(g, &p, &plan, &err)) {
            brisk_gguf_close(g);
            fprintf(stderr, "brisk quantize: %s\n", err.msg);
            rc = CLI_EXIT_RUNTIME;
            goto done;
        }
        for (int i = 0; i < plan.n_items; i++)
            fprintf(stderr, "brisk quantize: [%4d/%4d] %-36s %5s -> %-5s%s\n", i + 1, plan.n_items, plan.items[i].name,
                    brisk_qtype_name(plan.items[i].src->type), brisk_qtype_name(plan.items[i].type),
                    plan.items[i].fallback ? " (row length does not fit the mixture's type: fallback)" : "");
        brisk_quantize_plan_free(&plan);
        brisk_gguf_close(g);
    }
    if (brisk_quantize_file(in, out, &p, &err)) {
        if (ps.tty && ps.last_pct >= 0) fputc('\n', stderr);
        fprintf(stderr, "brisk quantize: %s\n", err.msg);
        rc = CLI_EXIT_RUNTIME;
        goto done;
    }
    char with[160] = "";
    if (p.imatrix)
        snprintf(with, sizeof with, " with imatrix %s (%d entries%s%s)", a.s[CLI_O_IMATRIX], imatrix.n_entries,
                 imatrix.dataset ? ", from " : "", imatrix.dataset ? imatrix.dataset : "");
    fprintf(stderr, "brisk quantize: %s -> %s as %s%s in %.2f s\n", in, out, brisk_ftype_name(p.ftype), with, brisk_time_now() - ps.t0);
    rc = CLI_EXIT_OK;
done:
    for (int i = 0; i < n_tt; i++) free((char *)tt[i].pattern);
    brisk_imatrix_free(&imatrix);
    free(tt);
    free(kvo);
    cli_args_free(&a);
    return rc;
}
