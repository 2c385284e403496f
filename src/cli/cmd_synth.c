/* cmd_synth: `brisk synth` — write a random-weight GGUF in a real model's
 * tensor shapes (or a tiny test shape), for benchmarks and golden tests. */
#include "cli/cli.h"
#include "model/synth.h"
#include "quant/quant.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: brisk synth --shape NAME --type TYPE -o OUT.gguf [--seed S]\n"
            "\n"
            "Writes a GGUF model with random weights (Gaussian, std 1/sqrt(fan_in)) and a\n"
            "synthetic SentencePiece vocabulary, in the exact tensor shapes of a real model.\n"
            "Norms and biases are F32; matrices and the embedding use TYPE. Free disk space is\n"
            "checked before writing.\n"
            "\n"
            "  --shape NAME   one of:");
    for (const brisk_synth_shape *s = brisk_synth_shapes(); s->name; s++) fprintf(f, " %s", s->name);
    fprintf(f, "\n"
               "  --type TYPE    F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K\n"
               "  -o PATH        output file\n"
               "  --seed S       RNG seed (default 1)\n");
}

static void show_progress(int done, int total, void *ud) {
    (void)ud;
    if (done == total || done % 16 == 0) fprintf(stderr, "\rbrisk synth: %d/%d tensors", done, total);
    if (done == total) fputc('\n', stderr);
}

int brisk_cmd_synth(int argc, char **argv) {
    const char *shape = NULL, *type_name = NULL, *out = NULL, *v;
    int64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--shape")) { if (!cli_need_value("synth", argc, argv, &i, &shape)) return 2; }
        else if (!strcmp(a, "--type")) { if (!cli_need_value("synth", argc, argv, &i, &type_name)) return 2; }
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) { if (!cli_need_value("synth", argc, argv, &i, &out)) return 2; }
        else if (!strcmp(a, "--seed")) {
            if (!cli_need_value("synth", argc, argv, &i, &v) || !cli_parse_int("synth", a, v, 0, INT64_MAX, &seed)) return 2;
        } else return cli_unknown("synth", a);
    }
    if (!shape || !type_name || !out) {
        fprintf(stderr, "brisk synth: --shape, --type and -o are required (see brisk synth --help)\n");
        return 2;
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
    const int64_t free_bytes = brisk_disk_free(out);
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
