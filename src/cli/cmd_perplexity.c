/* cmd_perplexity: `brisk perplexity` with llama-perplexity's scoring
 * convention, so the two engines' numbers are directly comparable. */
#include "brisk.h"
#include "cli/cli.h"
#include "kv/kld.h"
#include "kv/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_use ppl_uses[] = {
    {.id = CLI_O_MODEL}, {.id = CLI_O_FILE, .help = "the text file ('-' = stdin)"},
    {.id = CLI_O_CTX_SIZE, .def = "512", .help = "chunk length in tokens, at least 4; 0 = the model's training context"},
    {.id = CLI_O_BATCH, .def_help = "the chunk length"}, {.id = CLI_O_THREADS}, {.id = CLI_O_CHUNKS},
    {.id = CLI_O_MAX_INPUT}, {.id = CLI_O_VERBOSE}, {.id = CLI_O_NGL},
    {.id = CLI_O_CACHE_TYPE_K}, {.id = CLI_O_CACHE_TYPE_V}, {.id = CLI_O_K_HADAMARD}, {.id = CLI_O_FLASH_ATTN},
    {.id = CLI_O_KLD_BASE}, {.id = CLI_O_KLD},
    {.id = CLI_O_KV_POLICY}, {.id = CLI_O_KV_BUDGET}, {.id = CLI_O_KV_SINK}, {.id = CLI_O_KV_WINDOW}, {.id = CLI_O_KV_PER_HEAD},
    {.id = CLI_O_UBATCH, .def_help = "64 with --kv-policy, else the batch"},
    {.id = CLI_O_SEED, .def = "0", .help = "the seed of --kv-policy random's choice"},
    {.id = CLI_O_PACK_CACHE},
    {.id = CLI_O_END},
};

static const cli_spec ppl_spec = {
    .name = "perplexity",
    .usage = "-m MODEL -f TEXT [-c CTX] [-b BATCH] [-t THREADS] [--chunks N] [-ctk TYPE] [-ctv TYPE]\n"
             "       [--kl-divergence-base FILE [--kl-divergence]]\n"
             "       [--kv-policy streaming|random|h2o|snapkv|tova|oracle|memdecay|role --kv-budget N|F [--kv-sink N] [--kv-window N] [-ub N]]",
    .about = "Perplexity of a text file, scored exactly as llama-perplexity does:\n"
             "  1. read the file (one trailing newline is dropped, as llama.cpp's -f does)\n"
             "     and tokenize all of it with BOS (when the vocabulary adds BOS);\n"
             "  2. cut the tokens into non-overlapping chunks of CTX tokens (a partial\n"
             "     last chunk is dropped);\n"
             "  3. replace each chunk's first token with BOS;\n"
             "  4. score only the second half of each chunk: the logits at positions\n"
             "     CTX/2 .. CTX-2 predict the tokens at CTX/2+1 .. CTX-1;\n"
             "  5. PPL = exp(mean negative log-likelihood over all scored tokens).\n"
             "With --kl-divergence-base FILE alone, the scored positions' log-probabilities\n"
             "are also written to FILE in llama-perplexity's format; with --kl-divergence\n"
             "too, FILE is read (its tokens, -c and --chunks must match; -f may be left\n"
             "out, the file's tokens are then used) and llama-perplexity's KL-divergence\n"
             "statistics are printed. With --kv-policy, each chunk is fed in ubatches of\n"
             "-ub tokens and the policy cuts the cache to --kv-budget slots before each\n"
             "one, so no token is computed with more than the budget resident; the KV\n"
             "pool is sized to the budget and its peak use is printed. --kv-policy oracle\n"
             "(a reference row) first runs each chunk with every slot kept, recording the\n"
             "attention of every query on every position, then runs it again keeping at\n"
             "each eviction the slots the queries still to come attend to most; its pool\n"
             "holds the full chunk for the first pass. docs/KV.md.\n",
    .uses = ppl_uses,
};

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* llama-perplexity's percentile: linear between the sorted values. */
static float percentile(const float *v, size_t n, float fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float p = fraction * (float)(n - 1);
    const size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static void mean_unc(double sum, double sum2, int64_t count, double *f, double *df) {
    *f = 0.0, *df = 0.0;
    if (count < 1) return;
    *f = sum / (double)count;
    const double v = sum2 / (double)count - *f * *f;
    *df = v > 0 && count > 10 ? sqrt(v / (double)(count - 1)) : 0.0;
}

static double covariance(double a, double b, double ab, int64_t count) {
    if (count < 10) return 0.0;
    return (ab / (double)count - (a / (double)count) * (b / (double)count)) / (double)(count - 1);
}

static float median_of(const float *v, size_t n) { return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2]; }

/* llama-perplexity's closing block of a --kl-divergence run, in its format. */
static void print_kld(const brisk_kld_stats *k, float *kld, float *pd, size_t n) {
    if (k->count < 100) return;   /* as llama-perplexity: no statistics on so few values */
    qsort(kld, n, sizeof *kld, cmp_float);
    qsort(pd, n, sizeof *pd, cmp_float);
    double lp, lp_unc, lb, lb_unc;
    mean_unc(k->sum_nll, k->sum_nll2, k->count, &lp, &lp_unc);
    mean_unc(k->sum_nll_base, k->sum_nll_base2, k->count, &lb, &lb_unc);
    const double ppl = exp(lp), ppl_unc = ppl * lp_unc, ppl_b = exp(lb), ppl_b_unc = ppl_b * lb_unc;
    printf("====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6lf ± %10.6lf\n", ppl, ppl_unc);
    printf("Mean PPL(base)                : %10.6lf ± %10.6lf\n", ppl_b, ppl_b_unc);
    const double cov = covariance(k->sum_nll, k->sum_nll_base, k->sum_nll_nll_base, k->count);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2lf%%\n", 100.0 * cov / (lp_unc * lb_unc));
    const double r = lp - lb, r_unc = sqrt(lp_unc * lp_unc + lb_unc * lb_unc - 2.0 * cov);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6lf ± %10.6lf\n", r, r_unc);
    printf("Mean PPL(Q)/PPL(base)         : %10.6lf ± %10.6lf\n", exp(r), exp(r) * r_unc);
    const double pcov = ppl * ppl_b * cov;
    printf("Mean PPL(Q)-PPL(base)         : %10.6lf ± %10.6lf\n", ppl - ppl_b, sqrt(ppl_unc * ppl_unc + ppl_b_unc * ppl_b_unc - 2.0 * pcov));
    printf("\n====== KL divergence statistics ======\n");
    double m, mu;
    mean_unc(k->sum_kld, k->sum_kld2, k->count, &m, &mu);
    printf("Mean    KLD: %10.6lf ± %10.6lf\n", m, mu);
    printf("Maximum KLD: %10.6f\n", (double)kld[n - 1]);
    static const struct { const char *label; float f; } kq[] = {{"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f}};
    static const struct { const char *label; float f; } kl[] = {{"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f}, {" 0.1%", 0.001f}};
    for (int i = 0; i < 4; i++) printf("%s   KLD: %10.6f\n", kq[i].label, (double)percentile(kld, n, kq[i].f));
    printf("Median  KLD: %10.6f\n", (double)median_of(kld, n));
    for (int i = 0; i < 4; i++) printf("%s   KLD: %10.6f\n", kl[i].label, (double)percentile(kld, n, kl[i].f));
    printf("Minimum KLD: %10.6f\n", (double)kld[0]);
    printf("\n====== Token probability statistics ======\n");
    mean_unc(k->sum_p_diff, k->sum_p_diff2, k->count, &m, &mu);
    printf("Mean    Δp: %6.3lf ± %5.3lf %%\n", 100.0 * m, 100.0 * mu);
    printf("Maximum Δp: %6.3lf%%\n", 100.0 * pd[n - 1]);
    static const struct { const char *label; float f; } pq[] = {{"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f},
                                                                  {"75.0%", 0.750f}};
    static const struct { const char *label; float f; } pl[] = {{"25.0%", 0.250f}, {"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f},
                                                                  {" 0.1%", 0.001f}};
    for (int i = 0; i < 5; i++) printf("%s   Δp: %6.3lf%%\n", pq[i].label, 100.0 * percentile(pd, n, pq[i].f));
    printf("Median  Δp: %6.3lf%%\n", 100.0 * median_of(pd, n));
    for (int i = 0; i < 5; i++) printf("%s   Δp: %6.3lf%%\n", pl[i].label, 100.0 * percentile(pd, n, pl[i].f));
    printf("Minimum Δp: %6.3lf%%\n", 100.0 * pd[0]);
    double mse, mse_unc;
    mean_unc(k->sum_p_diff2, k->sum_p_diff4, k->count, &mse, &mse_unc);
    const double rms = sqrt(mse);
    printf("RMS Δp    : %6.3lf ± %5.3lf %%\n", 100.0 * rms, 100.0 * 0.5 / rms * mse_unc);
    const double same = (double)k->n_same_top / (double)k->count;
    printf("Same top p: %6.3lf ± %5.3lf %%\n", 100.0 * same, 100.0 * sqrt(same * (1.0 - same) / (double)(k->count - 1)));
}

/* The base file of a --kl-divergence run: its header and tokens, checked. */
static brisk_status read_base(const char *path, brisk_kld_header *h, int32_t **tokens, FILE **out, brisk_error *err) {
    *tokens = NULL;
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return brisk_fail(err, BRISK_ERR_IO, "%s: cannot open the log-probability file", path);
    uint8_t hdr[BRISK_KLD_HEADER];
    const size_t got = fread(hdr, 1, sizeof hdr, fp);
    uint64_t size = 0;
    if (fseeko(fp, 0, SEEK_END) == 0) size = (uint64_t)ftello(fp);
    brisk_status st = brisk_kld_header_parse(hdr, got, size, h, err);
    if (st) {
        fclose(fp);
        return st;
    }
    const size_t n_tok = (size_t)h->n_chunk * (size_t)h->n_ctx;
    *tokens = malloc(n_tok * sizeof **tokens);
    if (!*tokens || fseeko(fp, BRISK_KLD_HEADER, SEEK_SET) || fread(*tokens, sizeof **tokens, n_tok, fp) != n_tok) {
        fclose(fp);
        free(*tokens);
        *tokens = NULL;
        return brisk_fail(err, BRISK_ERR_IO, "%s: cannot read its %zu tokens", path, n_tok);
    }
    *out = fp;   /* positioned at the first chunk's log-probabilities */
    return BRISK_OK;
}

int brisk_cmd_perplexity(int argc, char **argv) {
    const char *C = "perplexity";
    cli_args a;
    int code;
    if (!cli_parse(&ppl_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    const char *model_path = a.s[CLI_O_MODEL], *text_path = a.s[CLI_O_FILE], *base_path = a.s[CLI_O_KLD_BASE];
    const bool kld_mode = a.set[CLI_O_KLD] && a.i[CLI_O_KLD];
    int64_t n_ctx = a.i[CLI_O_CTX_SIZE];
    const int64_t n_batch = a.set[CLI_O_BATCH] ? a.i[CLI_O_BATCH] : 0, max_chunks = a.set[CLI_O_CHUNKS] ? a.i[CLI_O_CHUNKS] : -1;
    if (kld_mode && !base_path) {
        cli_args_free(&a);
        return cli_usage(C, "--kl-divergence needs --kl-divergence-base FILE (the reference log-probabilities)");
    }
    if (!model_path || (!text_path && !kld_mode)) {
        cli_args_free(&a);
        return cli_usage(C, "-m MODEL and -f TEXT are required (see brisk perplexity --help)");
    }
    const int pack_rc = cli_pack_cache(&a);
    if (pack_rc) {
        cli_args_free(&a);
        return pack_rc;
    }
    if (n_ctx != 0 && n_ctx < 4) {
        cli_args_free(&a);
        return cli_usage(C, "-c: a chunk of %lld tokens is too short to score; give at least 4", (long long)n_ctx);
    }
    brisk_context_params cp = brisk_context_default_params();
    if ((code = cli_kv_types(&a, C, &cp))) {
        cli_args_free(&a);
        return code;
    }
    cli_note_ngl(&a);
    brisk_error err = {0};
    int rc = 1;
    uint8_t *text = NULL;
    size_t text_len = 0, n_tok = 0;
    int32_t *tok = NULL, *pos = NULL, *seq = NULL, *chunk = NULL, *base_tok = NULL;
    uint8_t *want = NULL;
    uint16_t *lp_row = NULL;
    float *logits_keep = NULL, *kld_v = NULL, *pd_v = NULL;
    FILE *base_fp = NULL;
    brisk_model *model = NULL;
    brisk_context *ctx = NULL;
    brisk_kld_header bh = {0};

    if (kld_mode && read_base(base_path, &bh, &base_tok, &base_fp, &err)) goto fail;
    if (text_path) {
        if (cli_read_input(text_path, a.given[CLI_O_FILE], (size_t)a.i[CLI_O_MAX_INPUT], &text, &text_len, &err)) goto fail;
        if (text_len && text[text_len - 1] == '\n') text_len--;
    }
    if (brisk_model_load(model_path, &model, &err)) goto fail;
    cli_note_pack_cache(C, model);
    brisk_model_info info;
    brisk_model_get_info(model, &info);
    if (kld_mode) {
        if (bh.n_vocab != info.n_vocab) {
            snprintf(err.msg, sizeof err.msg, "%s: vocabulary %d, the model's is %d", base_path, bh.n_vocab, (int)info.n_vocab);
            goto fail;
        }
        if (a.set[CLI_O_CTX_SIZE] && cli_ctx_size(&a, info.n_ctx_train) != bh.n_ctx) {
            snprintf(err.msg, sizeof err.msg, "%s: written with -c %d, this run has -c %lld", base_path, bh.n_ctx,
                     (long long)cli_ctx_size(&a, info.n_ctx_train));
            goto fail;
        }
        if (max_chunks > 0 && max_chunks != bh.n_chunk) {
            snprintf(err.msg, sizeof err.msg, "%s: holds %d chunks, this run has --chunks %lld", base_path, bh.n_chunk, (long long)max_chunks);
            goto fail;
        }
        n_ctx = bh.n_ctx;
    } else {
        n_ctx = cli_ctx_size(&a, info.n_ctx_train);
    }
    if (n_ctx < 4) { snprintf(err.msg, sizeof err.msg, "the model's training context (%lld) is too short a chunk", (long long)n_ctx); goto fail; }
    /* a policy feeds ubatches of -ub tokens (64 by default) and runs before each */
    const bool policy = a.set[CLI_O_KV_POLICY] && strcmp(a.s[CLI_O_KV_POLICY], "none") != 0;
    const int64_t ubatch = a.set[CLI_O_UBATCH] ? a.i[CLI_O_UBATCH] : policy ? 64 : 0;
    if ((code = cli_kv_policy(&a, C, n_ctx, (int32_t)(ubatch > 0 ? BRISK_MIN(ubatch, n_ctx) : n_ctx), &cp))) {
        rc = code;
        goto fail;
    }
    cp.kv_seed = a.u[CLI_O_SEED];
    if (text_path) {
        if (brisk_tokenize_text(model, (const char *)text, text_len, true, false, &tok, &n_tok, &err)) goto fail;
    } else {   /* --kl-divergence without -f: the file's tokens, as llama-perplexity */
        tok = base_tok;
        base_tok = NULL;
        n_tok = (size_t)bh.n_chunk * (size_t)bh.n_ctx;
    }
    for (size_t i = 0; i < n_tok; i++)
        if (tok[i] < 0 || tok[i] >= info.n_vocab) {
            snprintf(err.msg, sizeof err.msg, "token %zu is %d, outside the vocabulary of %d", i, tok[i], (int)info.n_vocab);
            goto fail;
        }
    const int64_t n_chunk_all = (int64_t)n_tok / n_ctx;
    if (n_chunk_all < 1) {
        snprintf(err.msg, sizeof err.msg, "%s: %zu tokens is less than one chunk of %lld; lower -c", text_path, n_tok, (long long)n_ctx);
        goto fail;
    }
    int64_t n_chunk = max_chunks > 0 && max_chunks < n_chunk_all ? max_chunks : n_chunk_all;
    if (kld_mode) {
        if (n_chunk_all < bh.n_chunk) {
            snprintf(err.msg, sizeof err.msg, "%s: %lld chunks of %lld, %s holds %d", text_path, (long long)n_chunk_all, (long long)n_ctx,
                     base_path, bh.n_chunk);
            goto fail;
        }
        n_chunk = bh.n_chunk;
        if (base_tok)
            for (size_t i = 0; i < (size_t)n_chunk * (size_t)n_ctx; i++)
                if (base_tok[i] != tok[i]) {
                    snprintf(err.msg, sizeof err.msg, "%s: tokens differ from %s's at token %zu (%d vs %d): another text or tokenizer",
                             text_path, base_path, i, tok[i], base_tok[i]);
                    goto fail;
                }
    }
    cp.n_ctx_seq = (int32_t)n_ctx;
    cp.n_batch = (int32_t)(n_batch > 0 && n_batch < n_ctx ? n_batch : n_ctx);
    if (ubatch > 0 && ubatch < cp.n_batch) cp.n_batch = (int32_t)ubatch;   /* the physical batch: one decode each */
    const bool oracle = cp.kv_policy == BRISK_KV_POLICY_ORACLE;
    /* the pool sized to the budget: memory really saved (the oracle's first pass keeps the whole chunk) */
    if (cp.kv_policy) cp.kv_tokens = oracle ? (int32_t)n_ctx : cp.kv_budget;
    cp.n_outputs_max = cp.n_batch;   /* every token's logits */
    cp.n_threads = cli_threads(&a);
    brisk_memory_plan plan;
    if (cli_plan(C, "memory plan", model, &cp, a.i[CLI_O_VERBOSE], &plan, &err)) goto fail;
    if (brisk_context_init(model, &cp, &ctx, &err)) goto fail;
    const int32_t nb = brisk_context_n_batch(ctx), first = (int32_t)n_ctx / 2, n_pos = (int32_t)n_ctx - 1 - first;
    const int32_t nv = brisk_kld_nv(info.n_vocab);
    pos = malloc((size_t)nb * sizeof *pos);
    seq = calloc((size_t)nb, sizeof *seq);
    want = malloc((size_t)nb);
    chunk = malloc((size_t)n_ctx * sizeof *chunk);
    logits_keep = malloc((size_t)n_ctx * (size_t)info.n_vocab * sizeof(float));
    lp_row = base_path ? malloc((size_t)n_pos * (size_t)nv * sizeof *lp_row) : NULL;
    if (kld_mode) {
        kld_v = malloc((size_t)n_chunk * (size_t)n_pos * sizeof *kld_v);
        pd_v = malloc((size_t)n_chunk * (size_t)n_pos * sizeof *pd_v);
    }
    if (!pos || !seq || !want || !chunk || !logits_keep || (base_path && !lp_row) || (kld_mode && (!kld_v || !pd_v))) {
        snprintf(err.msg, sizeof err.msg, "out of memory for chunk of %lld tokens", (long long)n_ctx);
        goto fail;
    }
    if (base_path && !kld_mode) {   /* the reference file: header and tokens first, as llama-perplexity */
        if (!brisk_kld_layout((int32_t)n_ctx, info.n_vocab, (int32_t)n_chunk, &bh)) {
            snprintf(err.msg, sizeof err.msg, "%s: %lld chunks of %lld are too many for the file", base_path, (long long)n_chunk, (long long)n_ctx);
            goto fail;
        }
        if (!(base_fp = fopen(base_path, "wb"))) {
            snprintf(err.msg, sizeof err.msg, "%s: cannot create the log-probability file", base_path);
            goto fail;
        }
        uint8_t hdr[BRISK_KLD_HEADER];
        brisk_kld_header_write(&bh, hdr);
        if (fwrite(hdr, 1, sizeof hdr, base_fp) != sizeof hdr ||
            fwrite(tok, sizeof *tok, (size_t)n_chunk * (size_t)n_ctx, base_fp) != (size_t)n_chunk * (size_t)n_ctx) {
            snprintf(err.msg, sizeof err.msg, "%s: write failed", base_path);
            goto fail;
        }
    }
    fprintf(stderr, "brisk perplexity: %zu tokens, %lld chunks of %lld, scoring %lld tokens per chunk, KV cache K %s V %s\n", n_tok,
            (long long)n_chunk, (long long)n_ctx, (long long)n_pos, brisk_cache_type_name(cp.type_k), brisk_cache_type_name(cp.type_v));
    if (cp.kv_policy)
        fprintf(stderr, "brisk perplexity: KV policy %s, budget %d slots (%.1f%% of -c), %d sinks, window %d, ubatch %d\n",
                a.s[CLI_O_KV_POLICY], cp.kv_budget, 100.0 * cp.kv_budget / (double)n_ctx, cp.kv_sink, cp.kv_window, nb);
    double nll = 0.0, nll2 = 0.0;
    int64_t count = 0;
    brisk_kld_stats ks = {0};
    const int32_t bos = brisk_token_bos(model);
    for (int64_t c = 0; c < n_chunk; c++) {
        memcpy(chunk, tok + c * n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (brisk_vocab_adds_bos(model) && bos >= 0) chunk[0] = bos;
        if (oracle) {   /* the recording pass: every slot kept, no logits */
            if (brisk_seq_oracle(ctx, 0, true, &err)) goto fail;
            for (int32_t i0 = 0; i0 < n_ctx; i0 += nb) {
                const int32_t m = (int32_t)(n_ctx - i0 < nb ? n_ctx - i0 : nb);
                for (int32_t j = 0; j < m; j++) pos[j] = i0 + j, want[j] = 0;
                brisk_batch b = {.n_tokens = m, .token = chunk + i0, .pos = pos, .seq = seq, .logits = want};
                if (brisk_decode(ctx, &b, &err)) goto fail;
            }
            if (brisk_seq_oracle(ctx, 0, false, &err)) goto fail;
        }
        if (brisk_seq_truncate(ctx, 0, 0, &err)) goto fail;
        for (int32_t i0 = 0; i0 < n_ctx; i0 += nb) {
            const int32_t m = (int32_t)(n_ctx - i0 < nb ? n_ctx - i0 : nb);
            int32_t n_want = 0;
            for (int32_t j = 0; j < m; j++) {
                pos[j] = i0 + j;
                want[j] = i0 + j >= first && i0 + j < n_ctx - 1;
            }
            brisk_batch b = {.n_tokens = m, .token = chunk + i0, .pos = pos, .seq = seq, .logits = want};
            if (brisk_decode(ctx, &b, &err)) goto fail;
            for (int32_t j = 0; j < m; j++)
                if (want[j]) {
                    memcpy(logits_keep + (size_t)(i0 + j) * (size_t)info.n_vocab, brisk_get_logits(ctx, n_want), (size_t)info.n_vocab * sizeof(float));
                    n_want++;
                }
        }
        if (kld_mode && fread(lp_row, sizeof *lp_row, (size_t)n_pos * (size_t)nv, base_fp) != (size_t)n_pos * (size_t)nv) {
            snprintf(err.msg, sizeof err.msg, "%s: cannot read the log-probabilities of chunk %lld", base_path, (long long)c + 1);
            goto fail;
        }
        for (int32_t j = first; j < n_ctx - 1; j++) {
            const float *lg = logits_keep + (size_t)j * (size_t)info.n_vocab;
            const int32_t next = tok[c * n_ctx + j + 1];
            if (kld_mode) {
                const size_t at = (size_t)c * (size_t)n_pos + (size_t)(j - first);
                kld_v[at] = (float)brisk_kld_compare(lg, info.n_vocab, lp_row + (size_t)(j - first) * (size_t)nv, next, &ks, &pd_v[at]);
                continue;
            }
            if (base_path) brisk_kld_encode(lg, info.n_vocab, next, lp_row + (size_t)(j - first) * (size_t)nv);
            float mx = lg[0];
            for (int32_t k = 1; k < info.n_vocab; k++) mx = lg[k] > mx ? lg[k] : mx;
            double sum = 0.0;
            for (int32_t k = 0; k < info.n_vocab; k++) sum += exp((double)lg[k] - mx);
            const double lp = (double)lg[next] - mx - log(sum);
            nll -= lp;
            nll2 += lp * lp;
            count++;
        }
        if (base_path && !kld_mode && fwrite(lp_row, sizeof *lp_row, (size_t)n_pos * (size_t)nv, base_fp) != (size_t)n_pos * (size_t)nv) {
            snprintf(err.msg, sizeof err.msg, "%s: write failed", base_path);
            goto fail;
        }
        if (kld_mode) {
            double m, mu;
            mean_unc(ks.sum_kld, ks.sum_kld2, ks.count, &m, &mu);
            fprintf(stderr, "[%lld] KLD %.6f%s", (long long)c + 1, m, (c + 1) % 5 == 0 || c + 1 == n_chunk ? "\n" : ", ");
        } else
            fprintf(stderr, "[%lld]%.4f%s", (long long)c + 1, exp(nll / (double)count), (c + 1) % 10 == 0 || c + 1 == n_chunk ? "\n" : ",");
    }
    {   /* the KV memory used: the pool's peak of blocks in use, against a full cache of -c slots */
        brisk_cache_stats cs;
        brisk_context_cache_stats(ctx, &cs);
        const int64_t full = (n_ctx + cs.block_tokens - 1) / cs.block_tokens;
        fprintf(cp.kv_policy ? stdout : stderr, "KV memory: peak %d blocks x %zu bytes = %.3f MiB; a full cache of -c %lld: %lld blocks = %.3f MiB (%.1f%%); %lld slots "
               "dropped\n",
               cs.in_use_max, cs.block_bytes, (double)cs.in_use_max * (double)cs.block_bytes / 1048576.0, (long long)n_ctx, (long long)full,
               (double)full * (double)cs.block_bytes / 1048576.0, 100.0 * cs.in_use_max / (double)full, (long long)cs.dropped);
        if (cs.hot_bytes_per_seq) {   /* hyb4/hyb2: the hot rows beside the blocks, against an F16 cache of -c slots */
            const double f16 = (double)full * (double)cs.f16_block_bytes;
            fprintf(stderr, "KV memory: hot rows %.3f MiB per sequence; blocks + hot rows = %.1f%% of an F16 cache of -c %lld (%.3f MiB)\n",
                    (double)cs.hot_bytes_per_seq / 1048576.0, 100.0 * ((double)cs.in_use_max * (double)cs.block_bytes + (double)cs.hot_bytes_per_seq) / f16,
                    (long long)n_ctx, f16 / 1048576.0);
        }
    }
    if (kld_mode) {
        print_kld(&ks, kld_v, pd_v, (size_t)ks.count);
        if (ks.count < 100) printf("(%lld positions: llama-perplexity prints no statistics for fewer than 100)\n", (long long)ks.count);
    } else {
        if (base_fp) {
            const int closed = fclose(base_fp);
            base_fp = NULL;
            if (closed) {
                snprintf(err.msg, sizeof err.msg, "%s: write failed", base_path);
                goto fail;
            }
        }
        const double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
        const double ppl = exp(mean), ppl_err = var > 0 ? ppl * sqrt(var / (double)(count - 1 > 0 ? count - 1 : 1)) : 0.0;
        printf("Final estimate: PPL = %.4f +/- %.5f (%lld tokens scored in %lld chunks of %lld)\n", ppl, ppl_err, (long long)count,
               (long long)n_chunk, (long long)n_ctx);
    }
    rc = cli_stdout_finish(C, CLI_EXIT_OK);
fail:
    if (rc && err.msg[0]) cli_fail(C, &err);
    if (base_fp) fclose(base_fp);
    free(text); free(tok); free(base_tok); free(pos); free(seq); free(want); free(chunk);
    free(logits_keep); free(lp_row); free(kld_v); free(pd_v);
    brisk_context_free(ctx);
    brisk_model_free(model);
    cli_args_free(&a);
    return rc;
}
