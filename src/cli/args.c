/* args: strict parsing of flag values. A value that does not parse completely,
 * or is out of range, is an error (never clamped), and so is NaN. */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_usage(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "brisk %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

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

/* -1 = random; otherwise any seed brisk_sampler_seed can print (0 .. 2^64-2),
 * so a printed random seed can always be given back. */
bool cli_parse_seed(const char *cmd, const char *flag, const char *s, uint64_t *out) {
    if (!strcmp(s, "-1")) {
        *out = BRISK_SEED_RANDOM;
        return true;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = s[0] == '-' ? 0 : strtoull(s, &end, 10);
    if (s[0] == '-' || errno || end == s || *end != '\0' || v == UINT64_MAX) {
        fprintf(stderr, "brisk %s: %s: '%s' is not a seed (-1 = random, or 0 .. %llu)\n", cmd, flag, s,
                (unsigned long long)(UINT64_MAX - 1));
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_size(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int shift = 0;
    if (end && end != s && end[0] && !end[1]) {
        switch (end[0]) {
        case 'k': case 'K': shift = 10; end++; break;
        case 'm': case 'M': shift = 20; end++; break;
        case 'g': case 'G': shift = 30; end++; break;
        default: break;
        }
    }
    if (errno || end == s || *end != '\0') {
        fprintf(stderr, "brisk %s: %s: '%s' is not a size (bytes, or with a K, M or G suffix)\n", cmd, flag, s);
        return false;
    }
    if (v < 0 || v > (INT64_MAX >> shift) || (v << shift) < lo || (v << shift) > hi) {
        fprintf(stderr, "brisk %s: %s: %s is out of range [%lld, %lld] bytes\n", cmd, flag, s, (long long)lo, (long long)hi);
        return false;
    }
    *out = (int64_t)v << shift;
    return true;
}

size_t cli_edit_distance(const char *a, const char *b) {
    const size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64) return SIZE_MAX;   /* flags are short; a long argument is no typo of one */
    size_t row[65];
    for (size_t j = 0; j <= m; j++) row[j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            const size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}
