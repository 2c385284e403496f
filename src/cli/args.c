/* args: strict parsing of flag values shared by every subcommand. A value
 * that does not parse completely, or is out of range, is an error (never clamped). */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool cli_parse_int(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0') {
        fprintf(stderr, "brisk %s: %s: '%s' is not an integer\n", cmd, flag, s);
        return false;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "brisk %s: %s: %lld is out of range [%lld, %lld]\n", cmd, flag, v, (long long)lo, (long long)hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_float(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v)) {
        fprintf(stderr, "brisk %s: %s: '%s' is not a number\n", cmd, flag, s);
        return false;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "brisk %s: %s: %g is out of range [%g, %g]\n", cmd, flag, v, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_need_value(const char *cmd, int argc, char **argv, int *i, const char **out) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "brisk %s: %s needs a value (see brisk %s --help)\n", cmd, argv[*i], cmd);
        return false;
    }
    *out = argv[++*i];
    return true;
}

int cli_unknown(const char *cmd, const char *arg) {
    fprintf(stderr, "brisk %s: unknown option '%s' (see brisk %s --help)\n", cmd, arg, cmd);
    return 2;
}

brisk_status cli_read_file(const char *path, uint8_t **out, size_t *len, brisk_error *err) {
    *out = NULL;
    *len = 0;
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err->msg, sizeof err->msg, "%s: cannot open: %s", path, strerror(errno));
        return err->status = BRISK_ERR_IO;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(err->msg, sizeof err->msg, "%s: is a directory, not a file", path);
        return err->status = BRISK_ERR_IO;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err->msg, sizeof err->msg, "%s: cannot open: %s", path, strerror(errno));
        return err->status = BRISK_ERR_IO;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            uint8_t *nb = cap > SIZE_MAX / 4 ? NULL : realloc(buf, cap * 2 + 1);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) {
        snprintf(err->msg, sizeof err->msg, "%s: out of memory", path);
        return err->status = BRISK_ERR_NOMEM;
    }
    if (bad) {
        free(buf);
        snprintf(err->msg, sizeof err->msg, "%s: read error", path);
        return err->status = BRISK_ERR_IO;
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return BRISK_OK;
}
