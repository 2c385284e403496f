/* cli: the `brisk` command line. Each subcommand is one file (cmd_<name>.c)
 * exporting `int brisk_cmd_<name>(int argc, char **argv)` (argv[0] is the
 * subcommand name) and registered in main.c's table. Helpers for flag parsing
 * shared by all commands live in args.c. */
#ifndef BRISK_CLI_H
#define BRISK_CLI_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int brisk_cmd_run(int argc, char **argv);
int brisk_cmd_chat(int argc, char **argv);
int brisk_cmd_inspect(int argc, char **argv);
int brisk_cmd_perplexity(int argc, char **argv);
int brisk_cmd_logits(int argc, char **argv);
int brisk_cmd_synth(int argc, char **argv);
int brisk_cmd_tokenize(int argc, char **argv);
int brisk_cmd_template(int argc, char **argv);
int brisk_cmd_bench(int argc, char **argv);

/* ---- args.c: strict flag value parsing ----------------------------------------
 * Each returns false after printing "brisk <cmd>: <flag>: <why>" to stderr. */
bool cli_parse_int(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool cli_parse_float(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);
/* Fetch the value after flag argv[*i]; false (with a message) when missing. */
bool cli_need_value(const char *cmd, int argc, char **argv, int *i, const char **out);
/* Read a whole file (malloc'd, NUL-terminated; *len excludes the NUL). */
brisk_status cli_read_file(const char *path, uint8_t **out, size_t *len, brisk_error *err);
/* "brisk <cmd>: unknown option '<arg>' (see brisk <cmd> --help)" */
int cli_unknown(const char *cmd, const char *arg);

#endif
