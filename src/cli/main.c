/* main: `brisk <command> ...` dispatch. Every command is a thin client of the
 * library; this file only routes, prints the top-level help and sets up what
 * every command shares: SIGPIPE is ignored, so a closed stdout shows up as
 * EPIPE on a write, which the commands treat as a quiet stop. */
#include "cli/cli.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

typedef struct cli_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} cli_command;

static const cli_command commands[] = {
    {"run", brisk_cmd_run, "generate text from a prompt (-cnv: chat)"},
    {"chat", brisk_cmd_chat, "interactive chat using the model's chat template"},
    {"inspect", brisk_cmd_inspect, "print a GGUF file's metadata and tensor table"},
    {"perplexity", brisk_cmd_perplexity, "perplexity of a text file (llama-perplexity's convention)"},
    {"logits", brisk_cmd_logits, "write float32 logits for a token sequence"},
    {"synth", brisk_cmd_synth, "write a random-weight GGUF in a real model's shapes"},
    {"tokenize", brisk_cmd_tokenize, "print the token ids of a text (or pieces with ids)"},
    {"template", brisk_cmd_template, "render a chat template (as transformers' apply_chat_template)"},
    {"bench", brisk_cmd_bench, "prefill and decode tokens/s like llama-bench, with the decode roofline"},
    {"batched-bench", brisk_cmd_batched_bench, "many sequences at once, like llama-batched-bench (S_PP, S_TG)"},
    {"serve", brisk_cmd_serve, "an OpenAI-compatible HTTP server with a web chat page"},
    {"quantize", brisk_cmd_quantize, "quantize a GGUF model, byte for byte as llama-quantize"},
    {"maskbench", brisk_cmd_maskbench, "MaskBench: JSON-schema token masks, speed and correctness"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: brisk <command> [options]   (brisk <command> --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nexit status: 0 success, 1 runtime error, 2 usage error; a closed stdout ends a command quietly (0).\n"
               "brisk --version prints the version.\n");
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return cli_stdout_finish("", CLI_EXIT_OK);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("brisk %s\n", CLI_VERSION);
        return cli_stdout_finish("", CLI_EXIT_OK);
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; i < N_COMMANDS; i++) {
        const size_t d = cli_edit_distance(argv[1], commands[i].name);
        if (d < best_d) { best_d = d; best = commands[i].name; }
    }
    if (best) fprintf(stderr, "brisk: unknown command '%s' (did you mean '%s'?)\n", argv[1], best);
    else fprintf(stderr, "brisk: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
