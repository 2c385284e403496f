/* cmd_synth: `brisk synth` — write a random-weight GGUF in a real model's
 * tensor shapes (or a tiny test shape), for benchmarks and golden tests. */
#include "cli/cli.h"
#include "model/synth.h"
#include "quant/quant.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const cli_use synth_uses[] = {
    {.id = CLI_O_SHAPE}, {.id = CLI_O_TYPE},
    {.id = CLI_O_OUTPUT, .help = "output file: written beside it and renamed into place (a FIFO or device is refused; "
                                 "'-' = stdout, /dev/null is written straight)"},
    {.id = CLI_O_SEED, .def = "1", .help = "RNG seed of the weights; -1 = random (printed to stderr)"},
    {.id = CLI_O_END},
};

static char synth_epilog[1024];

static const cli_spec synth_spec = {
    .name = "synth",
    .usage = "--shape NAME --type TYPE -o OUT.gguf [--seed S]",
    .about = "Writes a GGUF model with random weights (Gaussian, std 1/sqrt(fan_in)) and a\n"
             "synthetic SentencePiece vocabulary, in the exact tensor shapes of a real model.\n"
             "Norms and biases are F32; matrices and the embedding use TYPE. Free disk space is\n"
             "checked before writing.\n",
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
    const char *shape = a.s[CLI_O_SHAPE], *type_name = a.s[CLI_O_TYPE], *out = a.s[CLI_O_OUTPUT];
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
    const brisk_synth_shape *s = brisk_synth_find(shape);
    if (!s) {
        fprintf(stderr, "brisk synth: unknown shape '%s' (see brisk synth --help)\n", shape);
        return 2;
    }
    int type = -1;
    for (uint32_t t = 0; t < BRISK_Q_TYPE_LIMIT; t++)
        if (brisk_qtype_get(t) && !strcasecmp(brisk_qtype_name(t), type_name) && t != BRISK_Q_Q8_1 && t != BRISK_Q_Q8_K) type = (int)t;
    if (type < 0) {
        fprintf(stderr, "brisk synth: unknown or unsupported type '%s' (see brisk synth --help)\n", type_name);
        return 2;
    }
    uint64_t need = 0;
    if (!brisk_synth_file_bytes(s, (uint32_t)type, &need)) {
        fprintf(stderr, "brisk synth: shape %s cannot be stored as %s (rows are not whole blocks)\n", shape, type_name);
        return 2;
    }
    const bool straight = !strcmp(out, "-") || !strcmp(out, "/dev/null");
    struct stat st;
    if (!straight && stat(out, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* the writer refuses it too; say so before generating the weights */
        fprintf(stderr, "brisk synth: %s: exists and is not a regular file; refusing to replace it (give a regular file, '-' or /dev/null)\n", out);
        return 1;
    }
    const int64_t free_bytes = straight ? -1 : brisk_disk_free(out);
    if (free_bytes >= 0 && (uint64_t)free_bytes < need + (64u << 20)) {
        fprintf(stderr, "brisk synth: %s needs about %.1f MiB but only %.1f MiB are free there\n", out, (double)need / 1048576.0,
                (double)free_bytes / 1048576.0);
        return 1;
    }
    fprintf(stderr, "brisk synth: %s as %s, about %.1f MiB -> %s\n", shape, brisk_qtype_name((uint32_t)type), (double)need / 1048576.0, out);
    brisk_error err = {0};
    if (brisk_synth_write(s, (uint32_t)type, (uint64_t)seed, out, show_progress, NULL, &err)) {
        fprintf(stderr, "brisk synth: %s\n", err.msg);
        return 1;
    }
    return 0;
}
