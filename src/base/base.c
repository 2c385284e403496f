/* base: errors, assertions, file mapping and timing. */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

const char *brisk_status_str(brisk_status st) {
    switch (st) {
    case BRISK_OK: return "ok";
    case BRISK_ERR_INVALID_ARG: return "invalid argument";
    case BRISK_ERR_IO: return "i/o error";
    case BRISK_ERR_FORMAT: return "malformed file";
    case BRISK_ERR_UNSUPPORTED: return "unsupported";
    case BRISK_ERR_NOMEM: return "out of memory";
    case BRISK_ERR_CAPACITY: return "capacity exceeded";
    case BRISK_ERR_TEMPLATE: return "template error";
    case BRISK_ERR_NUMERIC: return "non-finite logits";
    }
    return "unknown status";
}

brisk_status brisk_fail(brisk_error *err, brisk_status st, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = st;
    }
    return st;
}

void brisk_error_prefix(brisk_error *err, const char *fmt, ...) {
    if (!err) return;
    char prefix[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* truncation of a long message is acceptable; the prefix is what matters */
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    err->msg[n] = ':';
    err->msg[n + 1] = ' ';
    size_t room = sizeof err->msg - (n + 2) - 1;
    size_t m = strlen(old);
    if (m > room) m = room;
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = 0;
}

void brisk_assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "brisk: internal error: assertion '%s' failed at %s:%d\n", cond, file, line);
    abort();
}

brisk_status brisk_file_map(const char *path, brisk_mapped_file *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    /* O_NONBLOCK: opening a FIFO with no writer must not block; it is refused below */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return brisk_fail(err, BRISK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return brisk_fail(err, BRISK_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return brisk_fail(err, BRISK_ERR_IO, "%s: is a directory, not a file", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        const char *kind = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device"
                         : S_ISBLK(st.st_mode) ? "a block device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a regular file";
        return brisk_fail(err, BRISK_ERR_IO, "%s: is %s, not a regular file", path, kind);
    }
    if (st.st_size == 0) {
        close(fd);
        out->data = (const uint8_t *)"";
        return BRISK_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return brisk_fail(err, BRISK_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
    out->data = p;
    out->size = (size_t)st.st_size;
    out->map_base = p;
    return BRISK_OK;
}

void brisk_file_unmap(brisk_mapped_file *f) {
    if (f && f->map_base) munmap(f->map_base, f->size);
    if (f) memset(f, 0, sizeof *f);
}

brisk_status brisk_file_read(const char *path, uint8_t **out, size_t *len, brisk_error *err) {
    *out = NULL;
    *len = 0;
    brisk_mapped_file f;
    brisk_status st = brisk_file_map(path, &f, err);
    if (st != BRISK_OK) return st;
    uint8_t *buf = malloc(f.size + 1);
    if (!buf) {
        brisk_file_unmap(&f);
        return brisk_fail(err, BRISK_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, f.size + 1);
    }
    if (f.size) memcpy(buf, f.data, f.size);
    buf[f.size] = 0;
    *out = buf;
    *len = f.size;
    brisk_file_unmap(&f);
    return BRISK_OK;
}

double brisk_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t brisk_disk_free(const char *path) {
    struct statvfs sv;
    if (statvfs(path, &sv) != 0) {
        /* path may not exist yet: ask its directory */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0; else snprintf(dir, sizeof dir, ".");
        if (statvfs(dir[0] ? dir : "/", &sv) != 0) return -1;
    }
    return (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
}
