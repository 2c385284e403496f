/* io: the command line's files and stdout. Input files are regular files or
 * '-' (stdin), read whole up to a cap (output files: brisk_outfile, in
 * base); stdout is flushed and checked after every
 * write that matters, and a closed pipe is a quiet stop. Also the two text
 * helpers the commands share: escape processing (-e) and UTF-8 checking. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Read fd to its end, at most cap bytes (more is refused). */
static brisk_status read_fd(int fd, const char *path, const char *flag, size_t cap, size_t hint, uint8_t **out, size_t *len,
                            brisk_error *err) {
    size_t size = hint < cap ? hint : cap;
    size = size < ((size_t)1 << 16) ? (size_t)1 << 16 : size + 1;
    uint8_t *buf = malloc(size + 1);
    size_t n = 0;
    if (!buf) return brisk_fail(err, BRISK_ERR_NOMEM, "%s %s: out of memory", flag, path);
    for (;;) {
        if (n == size) {
            if (n > cap) break;
            size_t grown = size > cap / 2 ? cap + 1 : size * 2;
            uint8_t *g = realloc(buf, grown + 1);
            if (!g) {
                free(buf);
                return brisk_fail(err, BRISK_ERR_NOMEM, "%s %s: out of memory after %zu bytes", flag, path, n);
            }
            buf = g;
            size = grown;
        }
        ssize_t got = read(fd, buf + n, size - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            const int e = errno;
            free(buf);
            return brisk_fail(err, BRISK_ERR_IO, "%s %s: read error: %s", flag, path, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    if (n > cap) {
        free(buf);
        return brisk_fail(err, BRISK_ERR_CAPACITY, "%s %s: more than the input cap of %zu bytes (raise it with --max-input-bytes)",
                          flag, path, cap);
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return BRISK_OK;
}

brisk_status cli_read_input(const char *path, const char *flag, size_t cap, uint8_t **out, size_t *len, brisk_error *err) {
    *out = NULL;
    *len = 0;
    if (!strcmp(path, "-")) return read_fd(STDIN_FILENO, "(stdin)", flag, cap, 0, out, len, err);
    struct stat st, fst;
    if (stat(path, &st) != 0) return brisk_fail(err, BRISK_ERR_IO, "%s %s: cannot open: %s", flag, path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return brisk_fail(err, BRISK_ERR_IO, "%s %s: is %s; only a regular file or '-' (stdin) is read", flag, path,
                          brisk_file_kind(st.st_mode));
    /* O_NONBLOCK: if the path was swapped for a FIFO since stat, open must not wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return brisk_fail(err, BRISK_ERR_IO, "%s %s: cannot open: %s", flag, path, strerror(errno));
    brisk_status s = BRISK_OK;
    if (fstat(fd, &fst) != 0) {
        s = brisk_fail(err, BRISK_ERR_IO, "%s %s: cannot stat: %s", flag, path, strerror(errno));
    } else if (!S_ISREG(fst.st_mode)) {
        s = brisk_fail(err, BRISK_ERR_IO, "%s %s: is %s; only a regular file or '-' (stdin) is read", flag, path,
                       brisk_file_kind(fst.st_mode));
    } else if ((uint64_t)fst.st_size > cap) {
        s = brisk_fail(err, BRISK_ERR_CAPACITY,
                       "%s %s: %lld bytes is more than the input cap of %zu bytes (raise it with --max-input-bytes)", flag,
                       path, (long long)fst.st_size, cap);
    } else {
        const int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        s = read_fd(fd, path, flag, cap, (size_t)fst.st_size, out, len, err);
    }
    close(fd);
    return s;
}

/* ---- stdout -------------------------------------------------------------------------- */

static bool stdout_reported;

cli_stdout_state cli_stdout_flush(const char *cmd) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return CLI_STDOUT_OK;
    const int e = errno;
    if (e == EPIPE) return CLI_STDOUT_CLOSED;
    if (!stdout_reported)
        fprintf(stderr, "brisk%s%s: write to stdout failed: %s\n", cmd[0] ? " " : "", cmd, e ? strerror(e) : "write error");
    stdout_reported = true;
    return CLI_STDOUT_FAILED;
}

int cli_stdout_finish(const char *cmd, int rc) {
    const cli_stdout_state s = cli_stdout_flush(cmd);
    if (s == CLI_STDOUT_FAILED && rc == CLI_EXIT_OK) return CLI_EXIT_RUNTIME;
    return rc;
}

/* ---- text ------------------------------------------------------------------------------ */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void cli_unescape(char *s, size_t *len) {
    const size_t n = *len;
    size_t w = 0;
    for (size_t r = 0; r < n; r++) {
        if (s[r] != '\\' || r + 1 == n) {
            s[w++] = s[r];
            continue;
        }
        const char c = s[++r];
        switch (c) {
        case 'n': s[w++] = '\n'; break;
        case 't': s[w++] = '\t'; break;
        case 'r': s[w++] = '\r'; break;
        case 'a': s[w++] = '\a'; break;
        case 'b': s[w++] = '\b'; break;
        case 'f': s[w++] = '\f'; break;
        case 'v': s[w++] = '\v'; break;
        case '\\': case '"': case '\'': case '?': s[w++] = c; break;
        case 'x':
            if (r + 2 < n && hexval(s[r + 1]) >= 0 && hexval(s[r + 2]) >= 0) {
                s[w++] = (char)(hexval(s[r + 1]) * 16 + hexval(s[r + 2]));
                r += 2;
            } else {   /* not two hex digits: kept as written */
                s[w++] = '\\';
                s[w++] = c;
            }
            break;
        default:
            s[w++] = '\\';
            s[w++] = c;
            break;
        }
    }
    *len = w;
    if (w < n) s[w] = 0;
}

size_t cli_utf8_check(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        const unsigned c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xe0) == 0xc0) { k = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { k = 2; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { k = 3; cp = c & 0x07; min = 0x10000; }
        else return i;
        if (n - i <= k) return i;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return i;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
        i += k + 1;
    }
    return n;
}
