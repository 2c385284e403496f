/* cmd_synth: `brisk synth` — write a random-weight GGUF in a real model's
 * tensor shapes (or a tiny test shape), for benchmarks and golden tests. */
#include "cli/cli.h"
#include "model/synth.h"
#include "quant/quant.h"
#include "quant/quantize.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const cli_use synth_uses[] = {
    {.id = CLI_O_SHAPE}, {.id = CLI_O_TYPE}, {.id = CLI_O_SYNTH_VOCAB},
    {.id = CLI_O_OUTPUT, .help = "output file: written beside it and renamed into place (a FIFO or device is refused; "
                                 "'-' = stdout, /dev/null is written straight)"},
    {.id = CLI_O_SEED, .def = "1", .help = "RNG seed of the weights; -1 = random (printed to stderr)"},
    {.id = CLI_O_END},
};

static char synth_epilog[1024];

static const cli_spec synth_spec = {
    .name = "synth",
    .usage = "--shape NAME --type TYPE -o OUT.gguf [--vocab FILE.gguf] [--seed S]",
    .about = "Writes a GGUF model with random weights (Gaussian, std 1/sqrt(fan_in)) and a\n"
             "synthetic SentencePiece vocabulary, in the exact tensor shapes of a real model.\n"
             "Norms and biases are F32; matrices and the embedding use TYPE. TYPE may also be\n"
             "one of llama-quantize's mixtures that is not a tensor type (Q4_K_M, Q3_K_M,\n"
             "Q5_K_M, Q4_K_S, MXFP4_MOE ...): each tensor then gets the type brisk quantize (and\n"
             "llama-quantize) gives it in the shape's F32 file, written straight, with no F16\n"
             "file first (gpt-oss-20b as MXFP4_MOE: MXFP4 experts, Q8_0 rest, about 12 GB).\n"
             "The file streams out row by row, so memory stays small whatever its size. Free\n"
             "disk space is checked before writing.\n"
             "With --vocab FILE.gguf the model carries FILE's tokenizer instead (every tokenizer.*\n"
             "key: tokens, scores, types, merges, special ids, pre-tokenizer, chat template...), so it\n"
             "tokenizes exactly as FILE does; token_embd and output get FILE's token count, which\n"
             "wins over the shape's vocabulary size. A FILE without tokenizer.ggml.tokens, with\n"
             "per-token arrays of another length or a special id past its tokens is refused.\n",
    .uses = synth_uses,
    .epilog = synth_epilog,
};

static void show_progress(int done, int total, void *ud) {
    (void)ud;
    if (done == total || done % 16 == 0) fprintf(stderr, "\rbrisk synth: %d/%d tensors", done, total);
    if (done == total) fputc('\n', stderr);
}

int brisk_cmd_synth(int argc, char **argv) {
    size_t w = (size_t)snprintf(synth_epilog, sizeof synth_epilog, "shapes:");
    for (const brisk_synth_shape *sh = brisk_synth_shapes(); sh->name && w < sizeof synth_epilog; sh++)
        w += (size_t)snprintf(synth_epilog + w, sizeof synth_epilog - w, " %s", sh->name);
    if (w < sizeof synth_epilog) snprintf(synth_epilog + w, sizeof synth_epilog - w, "\n");
    cli_args a;
    int code;
    if (!cli_parse(&synth_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    const char *shape = a.s[CLI_O_SHAPE], *type_name = a.s[CLI_O_TYPE], *out = a.s[CLI_O_OUTPUT], *vocab_path = a.s[CLI_O_SYNTH_VOCAB];
    uint64_t seed = a.u[CLI_O_SEED];
    cli_args_free(&a);
    if (!shape || !type_name || !out) {
        fprintf(stderr, "brisk synth: --shape, --type and -o are required (see brisk synth --help)\n");
        return 2;
    }
    if (seed == BRISK_SEED_RANDOM) {
        if (getentropy(&seed, sizeof seed) != 0) seed = (uint64_t)time(NULL);
        if (seed == BRISK_SEED_RANDOM) seed--;
        fprintf(stderr, "brisk synth: seed: %llu\n", (unsigned long long)seed);
    }
    const brisk_synth_shape *found = brisk_synth_find(shape);
    if (!found) {
        fprintf(stderr, "brisk synth: unknown shape '%s' (see brisk synth --help)\n", shape);
        return 2;
    }
    brisk_synth_shape shaped = *found;   /* with --vocab, the vocabulary's token count */
    const brisk_synth_shape *s = &shaped;
    int type = -1;
    for (uint32_t t = 0; t < BRISK_Q_TYPE_LIMIT; t++)
        if (brisk_qtype_get(t) && !strcasecmp(brisk_qtype_name(t), type_name) && t != BRISK_Q_Q8_1 && t != BRISK_Q_Q8_K) type = (int)t;
    brisk_synth_types types = {.type = type < 0 ? 0 : (uint32_t)type, .ftype = -1};
    brisk_ftype ftype;
    if (type < 0 && brisk_ftype_parse(type_name, &ftype)) types.ftype = (int)ftype;   /* a mixture */
    if (type < 0 && types.ftype < 0) {
        fprintf(stderr, "brisk synth: unknown or unsupported type '%s' (see brisk synth --help)\n", type_name);
        return 2;
    }
    brisk_gguf *vocab = NULL;
    brisk_error err = {0};
    if (vocab_path) {
        if (brisk_gguf_open(vocab_path, &vocab, &err)) {
            fprintf(stderr, "brisk synth: --vocab: %s\n", err.msg);
            return 1;
        }
        if (brisk_synth_vocab_size(vocab, vocab_path, &shaped.n_vocab, &err)) {
            fprintf(stderr, "brisk synth: --vocab: %s\n", err.msg);
            brisk_gguf_close(vocab);
            return 1;
        }
        shaped.control_text = NULL;   /* the synthetic vocabulary's; FILE has its own special tokens */
        if (shaped.n_vocab != found->n_vocab)
            fprintf(stderr, "brisk synth: %s has %d tokens: token_embd%s get %d rows (the shape has %d)\n", vocab_path, shaped.n_vocab,
                    shaped.tied_output ? "" : " and output", shaped.n_vocab, found->n_vocab);
    }
    int rc = 1;
    uint64_t need = 0;
    if (brisk_synth_file_bytes_types(s, types, &need, &err)) {
        fprintf(stderr, "brisk synth: shape %s cannot be stored as %s (rows are not whole blocks): %s\n", shape, type_name, err.msg);
        rc = 2;
        goto done;
    }
    if (vocab) need += vocab->size;   /* its tokenizer keys, at most the whole file */
    const bool straight = !strcmp(out, "-") || !strcmp(out, "/dev/null");
    struct stat st;
    if (!straight && stat(out, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* the writer refuses it too; say so before generating the weights */
        fprintf(stderr, "brisk synth: %s: exists and is not a regular file; refusing to replace it (give a regular file, '-' or /dev/null)\n", out);
        goto done;
    }
    const int64_t free_bytes = straight ? -1 : brisk_disk_free(out);
    if (free_bytes >= 0 && (uint64_t)free_bytes < need + (64u << 20)) {
        fprintf(stderr, "brisk synth: %s needs about %.1f MiB but only %.1f MiB are free there\n", out, (double)need / 1048576.0,
                (double)free_bytes / 1048576.0);
        goto done;
    }
    fprintf(stderr, "brisk synth: %s as %s%s, about %.1f MiB -> %s\n", shape,
            types.ftype >= 0 ? brisk_ftype_name((brisk_ftype)types.ftype) : brisk_qtype_name(types.type),
            types.ftype >= 0 ? " (llama-quantize's mixture)" : "", (double)need / 1048576.0, out);
    if (brisk_synth_write_types(s, types, (uint64_t)seed, vocab, out, show_progress, NULL, &err)) {
        fprintf(stderr, "brisk synth: %s\n", err.msg);
        goto done;
    }
    rc = 0;
done:
    brisk_gguf_close(vocab);
    return rc;
}
