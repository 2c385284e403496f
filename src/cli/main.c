/* main: `brisk <command> ...` dispatch. Every command is a thin client of the
 * library; this file only routes and prints the top-level help. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

typedef struct cli_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} cli_command;

static const cli_command commands[] = {
    {"run", brisk_cmd_run, "generate text from a prompt"},
    {"chat", brisk_cmd_chat, "interactive chat using the model's chat template"},
    {"inspect", brisk_cmd_inspect, "print a GGUF file's metadata and tensor table"},
    {"perplexity", brisk_cmd_perplexity, "perplexity of a text file (llama-perplexity's convention)"},
    {"logits", brisk_cmd_logits, "write float32 logits for a token sequence"},
    {"synth", brisk_cmd_synth, "write a random-weight GGUF in a real model's shapes"},
    {"tokenize", brisk_cmd_tokenize, "print the token ids of a text (or pieces with ids)"},
    {"template", brisk_cmd_template, "render a chat template (as transformers' apply_chat_template)"},
    {"bench", brisk_cmd_bench, "prefill and decode tokens/s like llama-bench, with the decode roofline"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: brisk <command> [options]   (brisk <command> --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "brisk: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
