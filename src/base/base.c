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
        return brisk_fail(err, BRISK_ERR_IO, "%s: is %s, not a regular file", path, brisk_file_kind(st.st_mode));
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

#if defined(__SANITIZE_ADDRESS__)
#define BRISK_LARGE_IS_CALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BRISK_LARGE_IS_CALLOC 1
#endif
#endif

void *brisk_alloc_large(size_t bytes) {
#ifdef BRISK_LARGE_IS_CALLOC
    return calloc(1, bytes ? bytes : 1);
#else
    const size_t huge = (size_t)2 << 20;
    if (bytes == 0) bytes = 1;
    if (bytes < huge) return calloc(1, bytes);
    size_t len;
    if (!brisk_add_size(bytes, huge, &len)) return NULL;
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    /* keep the 2 MiB-aligned part: unmap the head and the tail around it */
    uint8_t *a = (uint8_t *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
    const size_t keep = (bytes + 4095) & ~(size_t)4095;
    if (a > p) munmap(p, (size_t)(a - p));
    if (p + len > a + keep) munmap(a + keep, (size_t)(p + len - (a + keep)));
#ifdef MADV_HUGEPAGE
    madvise(a, keep, MADV_HUGEPAGE);   /* advice only: failure is harmless */
#endif
    return a;
#endif
}

void brisk_free_large(void *p, size_t bytes) {
    if (!p) return;
#ifdef BRISK_LARGE_IS_CALLOC
    (void)bytes;
    free(p);
#else
    if (bytes == 0) bytes = 1;
    if (bytes < ((size_t)2 << 20)) free(p);
    else munmap(p, (bytes + 4095) & ~(size_t)4095);
#endif
}

const char *brisk_file_kind(unsigned mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

brisk_status brisk_out_target(const char *path, brisk_out_kind *kind, char **target, brisk_error *err) {
    *target = NULL;
    if (!strcmp(path, "-")) {
        *kind = BRISK_OUT_STDOUT;
        return BRISK_OK;
    }
    struct stat st, null_st;
    if (stat(path, &st) == 0) {
        if (S_ISCHR(st.st_mode) && stat("/dev/null", &null_st) == 0 && st.st_rdev == null_st.st_rdev) {
            *kind = BRISK_OUT_STRAIGHT;
            return BRISK_OK;
        }
        if (!S_ISREG(st.st_mode))
            return brisk_fail(err, BRISK_ERR_IO, "%s: is %s; refusing to replace it (give a regular file, '-' or /dev/null)", path,
                              brisk_file_kind(st.st_mode));
        struct stat lst;
        if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {   /* replace the file it names, keep the link */
            if (!(*target = realpath(path, NULL)))
                return brisk_fail(err, BRISK_ERR_IO, "%s: cannot resolve the link: %s", path, strerror(errno));
            *kind = BRISK_OUT_REPLACE;
            return BRISK_OK;
        }
    } else if (errno != ENOENT) {
        return brisk_fail(err, BRISK_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!(*target = strdup(path))) return brisk_fail(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    *kind = BRISK_OUT_REPLACE;
    return BRISK_OK;
}

brisk_status brisk_outfile_open(brisk_outfile *o, const char *path, uint64_t need, unsigned mode, brisk_error *err) {
    *o = (brisk_outfile){.path = path};
    brisk_out_kind kind;
    brisk_status st = brisk_out_target(path, &kind, &o->target, err);
    if (st) return st;
    if (kind == BRISK_OUT_STDOUT) {
        o->f = stdout;
        o->is_stdout = true;
        return BRISK_OK;
    }
    if (kind == BRISK_OUT_STRAIGHT) {
        if (!(o->f = fopen(path, "wb"))) return brisk_fail(err, BRISK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return BRISK_OK;
    }
    const int64_t avail = need ? brisk_disk_free(o->target) : -1;
    if (avail >= 0 && (uint64_t)avail < need) {
        brisk_outfile_abort(o);
        return brisk_fail(err, BRISK_ERR_IO, "%s: needs %llu bytes but only %lld are free on its filesystem", path, (unsigned long long)need,
                          (long long)avail);
    }
    const size_t tl = strlen(o->target) + 16;
    if (!(o->tmp = malloc(tl))) {
        brisk_outfile_abort(o);
        return brisk_fail(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(o->tmp, tl, "%s.tmp.XXXXXX", o->target);
    const int fd = mkstemp(o->tmp);
    if (fd < 0) {
        const int e = errno;
        free(o->tmp);
        o->tmp = NULL;
        brisk_outfile_abort(o);
        return brisk_fail(err, BRISK_ERR_IO, "%s: cannot create a temporary file beside it: %s", path, strerror(e));
    }
    if (!mode) {   /* what a plain fopen would give: 0666 less the umask */
        const mode_t mask = umask(0);
        umask(mask);
        mode = 0666u & ~(unsigned)mask;
    }
    if (fchmod(fd, (mode_t)mode) != 0 || !(o->f = fdopen(fd, "wb"))) {
        const int e = errno;
        close(fd);
        brisk_outfile_abort(o);
        return brisk_fail(err, BRISK_ERR_IO, "%s: cannot open a temporary file beside it: %s", path, strerror(e));
    }
    return BRISK_OK;
}

brisk_status brisk_outfile_commit(brisk_outfile *o, brisk_error *err) {
    if (o->is_stdout) {
        errno = 0;
        const bool bad = fflush(stdout) != 0 || ferror(stdout);
        const int e = errno;
        brisk_outfile_abort(o);
        if (bad && e != EPIPE) return brisk_fail(err, BRISK_ERR_IO, "write to stdout failed: %s", e ? strerror(e) : "write error");
        return BRISK_OK;
    }
    errno = 0;
    bool bad = fflush(o->f) != 0 || ferror(o->f);
    int e = errno;
    if (!bad && o->tmp && fsync(fileno(o->f)) != 0) bad = true, e = errno;
    if (fclose(o->f) != 0 && !bad) bad = true, e = errno;
    o->f = NULL;
    if (bad) {
        brisk_outfile_abort(o);
        return brisk_fail(err, BRISK_ERR_IO, "%s: write failed: %s", o->path, e ? strerror(e) : "write error");
    }
    if (o->tmp && rename(o->tmp, o->target) != 0) {
        e = errno;
        brisk_outfile_abort(o);
        return brisk_fail(err, BRISK_ERR_IO, "%s: cannot rename the temporary file into place: %s", o->path, strerror(e));
    }
    free(o->tmp);
    o->tmp = NULL;
    brisk_outfile_abort(o);
    return BRISK_OK;
}

void brisk_outfile_abort(brisk_outfile *o) {
    if (o->f && !o->is_stdout) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->target);
    *o = (brisk_outfile){.path = o->path};
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
