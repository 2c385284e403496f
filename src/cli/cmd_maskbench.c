/* cmd_maskbench: `brisk maskbench` — the MaskBench protocol of JSONSchemaBench (its runner.py), as
 * ../shared/constrain/README.md describes it: per schema, compile (time to first mask, TTFM); per
 * test, serialize `data` as json.dumps(ensure_ascii=False), tokenize it without BOS, and for each token
 * compute the mask (time between masks, TBM) and check the token is allowed; at the end the
 * end-of-text token must be allowed. A valid instance rejected is a validation error, an invalid one
 * accepted an invalidation error; a schema passes when it compiles and every test behaves as labelled.
 * Single thread. Exit 0 whenever the run completes. */
#include "brisk.h"
#include "cli/cli.h"
#include "constrain/constrain.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

brisk_status cst_vocab_from_tokenizer(const brisk_vocab *v, cst_vocab **out, brisk_error *err);

static const char *usage_text =
    "usage: brisk maskbench -m VOCAB.gguf FILE.jsonl[.gz]... [--time-limit S] [--per-schema] [-o json]\n"
    "                       [--first N] [--compact] [--clock wall|cpu]\n"
    "\n"
    "Runs MaskBench (JSONSchemaBench's token-mask benchmark) on the schemas of the files, with the\n"
    "vocabulary of VOCAB.gguf (a vocab-only GGUF is enough), single thread.\n"
    "  --time-limit S   bound each schema (compile and all its tests) to S seconds (default 60);\n"
    "                   a schema over it counts in timeout\n"
    "  --per-schema     one JSON line per schema on stderr (index, description, result, error)\n"
    "  -o json          stdout gets exactly one JSON object (else a table)\n"
    "  --first N        only the first N schemas (development)\n"
    "  --compact        compile with json.dumps' separators only (no other whitespace)\n"
    "  --clock cpu      time masks with the thread's CPU clock instead of the wall clock (the protocol's):\n"
    "                   on a shared machine, time the thread spent descheduled is then left out\n"
    "Exit status: 0 when the run completes whatever the results; 2 usage; 1 a file or vocabulary error.\n";

typedef struct dvec { double *v; size_t n, cap; } dvec;
static bool dpush(dvec *d, double x) {
    if (d->n == d->cap) {
        const size_t cap = d->cap ? d->cap * 2 : 4096;
        double *p = realloc(d->v, cap * sizeof *p);
        if (!p) return false;
        d->v = p;
        d->cap = cap;
    }
    d->v[d->n++] = x;
    return true;
}
static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(const dvec *d, double p) {
    if (d->n == 0) return 0.0;
    size_t i = (size_t)(p / 100.0 * (double)(d->n - 1) + 0.5);
    if (i >= d->n) i = d->n - 1;
    return d->v[i];
}

/* a line reader over a file or `gzip -dc FILE` */
typedef struct reader { FILE *f; pid_t pid; char *line; size_t cap; } reader;

static bool reader_open(reader *r, const char *path) {
    memset(r, 0, sizeof *r);
    const size_t n = strlen(path);
    if (n > 3 && !strcmp(path + n - 3, ".gz")) {
        if (access(path, R_OK) != 0) return false;
        int fd[2];
        if (pipe(fd) != 0) return false;
        const pid_t pid = fork();
        if (pid < 0) return false;
        if (pid == 0) {
            dup2(fd[1], 1);
            close(fd[0]);
            close(fd[1]);
            execlp("gzip", "gzip", "-dc", "--", path, (char *)NULL);
            _exit(127);
        }
        close(fd[1]);
        r->f = fdopen(fd[0], "r");
        r->pid = pid;
        return r->f != NULL;
    }
    r->f = fopen(path, "r");
    return r->f != NULL;
}

static void reader_close(reader *r) {
    if (r->f) fclose(r->f);
    if (r->pid > 0) waitpid(r->pid, NULL, 0);
    free(r->line);
}

typedef struct totals {
    int64_t schemas, passing, compile_error, validation_error, invalidation_error, timeout, tokens;
    int64_t masks_computed, masks_cached;
    dvec tbm, ttfm;
} totals;

static bool cpu_clock;
static double now(void) {
    if (!cpu_clock) return brisk_time_now();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct bench {
    const brisk_vocab *tok;
    cst_vocab *vocab;
    int32_t eos;
    double time_limit;
    bool per_schema, compact;
    uint32_t *mask;
} bench;

static void per_schema_line(const bench *b, int64_t index, json_t *item, const char *result, const char *error, double ttfm,
                            double tbm_max) {
    if (!b->per_schema) return;
    json_t *o = json_object();
    json_object_set_new(o, "index", json_integer(index));
    json_t *d = json_object_get(item, "description");
    if (json_is_string(d)) json_object_set(o, "description", d);
    json_object_set_new(o, "result", json_string(result));
    if (error) json_object_set_new(o, "error", json_string(error));
    if (ttfm >= 0) json_object_set_new(o, "ttfm_us", json_real(ttfm));
    if (tbm_max >= 0) json_object_set_new(o, "tbm_max_us", json_real(tbm_max));
    char *s = json_dumps(o, JSON_COMPACT);
    if (s) fprintf(stderr, "%s\n", s);
    free(s);
    json_decref(o);
}

static void run_schema(bench *b, totals *t, int64_t index, json_t *item) {
    json_t *schema = json_object_get(item, "schema"), *tests = json_object_get(item, "tests");
    t->schemas++;
    const double t0 = now(), t0_wall = brisk_time_now();
    cst_nfa *n = cst_nfa_new();
    brisk_error err = {0};
    cst_schema_opts o = {.compact = b->compact, .max_ws = CST_DEFAULT_MAX_WS};
    cst_grammar *g = NULL;
    brisk_status st = n ? cst_schema_compile_json(n, schema, &o, &err) : brisk_fail(&err, BRISK_ERR_NOMEM, "out of memory");
    if (st == BRISK_OK) st = cst_grammar_new(n, b->vocab, &g, &err);
    cst_nfa_free(n);
    if (st != BRISK_OK) {
        t->compile_error++;
        per_schema_line(b, index, item, "compile_error", err.msg, -1, -1);
        return;
    }
    const int32_t start = cst_start(g);
    cst_mask(g, start, b->mask);
    const double ttfm = (now() - t0) * 1e6;
    dpush(&t->ttfm, ttfm);
    int64_t val_err = 0, inval_err = 0;
    double tbm_max = 0;
    bool timed_out = false;
    char why[256] = "";
    for (size_t i = 0; i < json_array_size(tests) && !timed_out; i++) {
        json_t *test = json_array_get(tests, i);
        const bool valid = json_is_true(json_object_get(test, "valid"));
        size_t len = 0;
        char *text = cst_json_dumps(json_object_get(test, "data"), &len);
        int32_t *ids = NULL;
        size_t n_ids = 0;
        brisk_tokenize_opts to = {.add_special = false, .parse_special = false};
        if (!text || brisk_tokenize(b->tok, text, len, to, &ids, &n_ids, &err) != BRISK_OK) {
            free(text);
            continue;
        }
        int32_t s = start;
        bool accepted = true;
        for (size_t k = 0; k <= n_ids; k++) {
            const double m0 = now();
            if (!(i == 0 && k == 0)) {
                cst_mask(g, s, b->mask);
                const double us = (now() - m0) * 1e6;
                dpush(&t->tbm, us);
                if (us > tbm_max) tbm_max = us;
            }
            t->tokens++;
            const int32_t tok = k < n_ids ? ids[k] : b->eos;
            if (!(b->mask[tok >> 5] >> (tok & 31) & 1u)) {
                accepted = false;
                if (valid && !why[0]) snprintf(why, sizeof why, "test %zu: token %zu of %zu rejected", i, k, n_ids);
                break;
            }
            if (k < n_ids) s = cst_advance(g, s, tok);
            if (brisk_time_now() - t0_wall > b->time_limit) { timed_out = true; break; }
        }
        if (!timed_out) {
            if (valid && !accepted) val_err++;
            if (!valid && accepted) {
                inval_err++;
                if (!why[0]) snprintf(why, sizeof why, "test %zu: an invalid instance was accepted", i);
            }
        }
        free(ids);
        free(text);
    }
    cst_stats cs;
    cst_grammar_stats(g, &cs);
    t->masks_computed += cs.masks_computed;
    t->masks_cached += cs.masks_cached;
    cst_grammar_free(g);
    t->validation_error += val_err;
    t->invalidation_error += inval_err;
    if (timed_out) {
        t->timeout++;
        per_schema_line(b, index, item, "timeout", NULL, ttfm, tbm_max);
    } else if (val_err || inval_err) {
        per_schema_line(b, index, item, inval_err ? "invalidation_error" : "validation_error", why, ttfm, tbm_max);
    } else {
        t->passing++;
        per_schema_line(b, index, item, "pass", NULL, ttfm, tbm_max);
    }
}

static json_t *pct_obj(dvec *d) {
    qsort(d->v, d->n, sizeof *d->v, cmp_d);
    json_t *o = json_object();
    static const double ps[] = {25, 50, 75, 90, 95, 99};
    static const char *names[] = {"p25", "p50", "p75", "p90", "p95", "p99"};
    for (int i = 0; i < 6; i++) json_object_set_new(o, names[i], json_real(pct(d, ps[i])));
    json_object_set_new(o, "max", json_real(d->n ? d->v[d->n - 1] : 0.0));
    return o;
}

int brisk_cmd_maskbench(int argc, char **argv) {
    const char *vocab_path = NULL, *format = NULL;
    double time_limit = 60.0;
    int64_t first = -1;
    bool per_schema = false, compact = false;
    const char **files = calloc((size_t)argc, sizeof *files);
    int n_files = 0;
    if (!files) return CLI_EXIT_RUNTIME;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            free(files);
            return cli_stdout_finish("maskbench", CLI_EXIT_OK);
        }
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) { vocab_path = argv[++i]; continue; }
        if (!strcmp(a, "--time-limit") && i + 1 < argc) {
            char *end;
            time_limit = strtod(argv[++i], &end);
            if (*end || !(time_limit > 0)) { free(files); return cli_usage("maskbench", "--time-limit: '%s' is not a positive number of seconds", argv[i]); }
            continue;
        }
        if (!strcmp(a, "--first") && i + 1 < argc) {
            char *end;
            first = strtoll(argv[++i], &end, 10);
            if (*end || first < 0) { free(files); return cli_usage("maskbench", "--first: '%s' is not a count", argv[i]); }
            continue;
        }
        if (!strcmp(a, "--per-schema")) { per_schema = true; continue; }
        if (!strcmp(a, "--compact")) { compact = true; continue; }
        if (!strcmp(a, "--clock") && i + 1 < argc) {
            const char *c = argv[++i];
            if (!strcmp(c, "cpu")) cpu_clock = true;
            else if (strcmp(c, "wall")) { free(files); return cli_usage("maskbench", "--clock: 'wall' or 'cpu', not '%s'", c); }
            continue;
        }
        if (!strcmp(a, "-o") && i + 1 < argc) {
            format = argv[++i];
            if (strcmp(format, "json")) { free(files); return cli_usage("maskbench", "-o: only 'json' is known, not '%s'", format); }
            continue;
        }
        if (a[0] == '-' && a[1]) { free(files); return cli_usage("maskbench", "unknown or incomplete option '%s' (see brisk maskbench --help)", a); }
        files[n_files++] = a;
    }
    if (!vocab_path || n_files == 0) { free(files); return cli_usage("maskbench", "-m VOCAB.gguf and at least one FILE are required"); }
    brisk_error err = {0};
    brisk_gguf *gg = NULL;
    brisk_vocab *v = NULL;
    bench b = {.time_limit = time_limit, .per_schema = per_schema, .compact = compact};
    totals t = {0};
    int rc = CLI_EXIT_RUNTIME;
    if (brisk_gguf_open(vocab_path, &gg, &err) != BRISK_OK || brisk_vocab_load(gg, &v, &err) != BRISK_OK) {
        fprintf(stderr, "brisk maskbench: %s: %s\n", vocab_path, err.msg);
        goto done;
    }
    brisk_gguf_close(gg);
    gg = NULL;
    if (cst_vocab_from_tokenizer(v, &b.vocab, &err) != BRISK_OK) {
        fprintf(stderr, "brisk maskbench: %s\n", err.msg);
        goto done;
    }
    b.tok = v;
    b.eos = brisk_vocab_eos(v);
    if (b.eos < 0) { fprintf(stderr, "brisk maskbench: %s has no end-of-text token\n", vocab_path); goto done; }
    b.mask = malloc(((size_t)brisk_vocab_size(v) + 31) / 32 * sizeof *b.mask);
    if (!b.mask) { fprintf(stderr, "brisk maskbench: out of memory\n"); goto done; }
    int64_t index = 0;
    for (int f = 0; f < n_files && (first < 0 || index < first); f++) {
        reader r;
        if (!reader_open(&r, files[f])) {
            fprintf(stderr, "brisk maskbench: cannot read %s\n", files[f]);
            reader_close(&r);
            goto done;
        }
        ssize_t got;
        while ((first < 0 || index < first) && (got = getline(&r.line, &r.cap, r.f)) > 0) {
            json_error_t je;
            json_t *item = json_loadb(r.line, (size_t)got, JSON_ALLOW_NUL, &je);
            if (!item) {
                /* a line Jansson cannot hold (an integer beyond 64 bits): a compile error, reported */
                t.schemas++;
                t.compile_error++;
                if (per_schema) fprintf(stderr, "{\"index\":%lld,\"result\":\"compile_error\",\"error\":\"line not parsed: %s\"}\n", (long long)index, je.text);
                index++;
                continue;
            }
            run_schema(&b, &t, index, item);
            json_decref(item);
            index++;
            if (!format && index % 500 == 0) fprintf(stderr, "brisk maskbench: %lld schemas\n", (long long)index);
        }
        reader_close(&r);
    }
    json_t *o = json_object();
    json_object_set_new(o, "schemas", json_integer(t.schemas));
    json_object_set_new(o, "passing", json_integer(t.passing));
    json_object_set_new(o, "compile_error", json_integer(t.compile_error));
    json_object_set_new(o, "validation_error", json_integer(t.validation_error));
    json_object_set_new(o, "invalidation_error", json_integer(t.invalidation_error));
    json_object_set_new(o, "timeout", json_integer(t.timeout));
    json_object_set_new(o, "tokens", json_integer(t.tokens));
    json_object_set_new(o, "tbm_us", pct_obj(&t.tbm));
    json_object_set_new(o, "ttfm_us", pct_obj(&t.ttfm));
    if (format) {
        char *s = json_dumps(o, JSON_COMPACT);
        if (s) printf("%s\n", s);
        free(s);
    } else {
        printf("schemas %lld | passing %lld (%.1f%%) | compile errors %lld | validation errors %lld | invalid accepted %lld | "
               "timeouts %lld | tokens %lld\n",
               (long long)t.schemas, (long long)t.passing, t.schemas ? 100.0 * (double)t.passing / (double)t.schemas : 0.0,
               (long long)t.compile_error, (long long)t.validation_error, (long long)t.invalidation_error, (long long)t.timeout,
               (long long)t.tokens);
        printf("masks computed %lld, from the cache %lld\n", (long long)t.masks_computed, (long long)t.masks_cached);
        printf("TBM us: p50 %.1f p90 %.1f p99 %.1f max %.1f | TTFM us: p50 %.1f p99 %.1f\n", pct(&t.tbm, 50), pct(&t.tbm, 90),
               pct(&t.tbm, 99), t.tbm.n ? t.tbm.v[t.tbm.n - 1] : 0.0, pct(&t.ttfm, 50), pct(&t.ttfm, 99));
    }
    json_decref(o);
    rc = cli_stdout_finish("maskbench", CLI_EXIT_OK);
done:
    free(files);
    free(b.mask);
    free(t.tbm.v);
    free(t.ttfm.v);
    cst_vocab_free(b.vocab);
    brisk_vocab_free(v);
    brisk_gguf_close(gg);
    return rc;
}
