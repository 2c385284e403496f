/* base: status/error helpers, checked size arithmetic, file mapping, timing.
 * Everything else in brisk builds on these; nothing here allocates globals. */
#ifndef BRISK_BASE_H
#define BRISK_BASE_H

#include "brisk.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BRISK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define BRISK_MIN(a, b) ((a) < (b) ? (a) : (b))
#define BRISK_MAX(a, b) ((a) > (b) ? (a) : (b))

#if defined(__GNUC__)
#define BRISK_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define BRISK_PRINTF(f, a)
#endif

/* Record an error (err may be NULL) and return st, so call sites read
 *   return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': ...", name); */
brisk_status brisk_fail(brisk_error *err, brisk_status st, const char *fmt, ...) BRISK_PRINTF(3, 4);

/* Prefix an existing message: "loading X: <old message>". */
void brisk_error_prefix(brisk_error *err, const char *fmt, ...) BRISK_PRINTF(2, 3);

/* Programmer-error check that stays on in release builds (never for input). */
#define BRISK_ASSERT(cond)                                                          \
    do {                                                                            \
        if (!(cond)) brisk_assert_fail(#cond, __FILE__, __LINE__);                  \
    } while (0)
void brisk_assert_fail(const char *cond, const char *file, int line);

/* Overflow-checked size math: return false on overflow. */
static inline bool brisk_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool brisk_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* A read-only view of a whole file (mmap where possible). */
typedef struct brisk_mapped_file {
    const uint8_t *data;
    size_t size;
    void *map_base;   /* what munmap needs; NULL for an empty file */
} brisk_mapped_file;

/* Map path read-only. Errors name the path: missing file, directory, empty, ... */
brisk_status brisk_file_map(const char *path, brisk_mapped_file *out, brisk_error *err);
void brisk_file_unmap(brisk_mapped_file *f);

/* Zeroed memory for a large array that is streamed through (the KV pool):
 * anonymous pages, mapped lazily (nothing is resident until written, so a
 * pool sized for the worst case costs only what is used), starting on a
 * 2 MiB boundary and advised as transparent huge pages (THP is often in
 * "madvise" mode). Attention reads each (block, layer, head) part of the pool
 * as one 4 KiB run at a time, so with 4 KiB pages nearly every part is a TLB
 * miss. NULL when out of memory; free with brisk_free_large and the same
 * size. Under AddressSanitizer this is calloc, so the pool's bounds stay
 * checked. */
void *brisk_alloc_large(size_t bytes);
void brisk_free_large(void *p, size_t bytes);

/* "a FIFO", "a character device", "a directory", ...: what a stat mode is, for messages. */
const char *brisk_file_kind(unsigned mode);

/* Where a write to path goes. Only a regular file is ever replaced (by a
 * temporary file beside it, renamed): renaming over a FIFO or a device node
 * would swap it for a regular file. */
typedef enum brisk_out_kind {
    BRISK_OUT_STDOUT,    /* path is "-" */
    BRISK_OUT_STRAIGHT,  /* /dev/null (or a link to it): open and write it directly */
    BRISK_OUT_REPLACE,   /* a regular file or a new one: write target.tmp.XXXXXX, then rename */
} brisk_out_kind;
/* Classify path; for BRISK_OUT_REPLACE *target is the file to replace (a
 * symlink resolved, so the link survives), malloc'd (caller frees). Refuses
 * an existing directory, FIFO, device or socket with a message naming it. */
brisk_status brisk_out_target(const char *path, brisk_out_kind *kind, char **target, brisk_error *err);

/* An output file written atomically, the one writer of every command and
 * module that writes a file (the CLI's outputs, synth, quantize, the GGUF
 * writer, KV states): brisk_out_target's classification, then for a regular
 * file a temporary file beside the target (mkstemp in the same directory),
 * fsync'd and renamed over it at commit. On any failure, or at abort, the
 * temporary file is removed and the target is untouched. */
typedef struct brisk_outfile {
    FILE *f;            /* where to write */
    const char *path;   /* as given, for messages (borrowed until commit or abort) */
    char *tmp;          /* the temporary file; NULL when written straight or to stdout */
    char *target;       /* what tmp is renamed to (a symlink's target is followed) */
    bool is_stdout;
} brisk_outfile;
/* path "-" is stdout, /dev/null is written straight. need > 0: refused up
 * front when the target's filesystem has fewer bytes free. mode: the file's
 * permissions, 0 = what fopen gives (0666 less the umask). */
brisk_status brisk_outfile_open(brisk_outfile *o, const char *path, uint64_t need, unsigned mode, brisk_error *err);
/* Flush, fsync, close and rename into place (stdout: flush; a closed pipe,
 * EPIPE, is no error). On failure it aborts. */
brisk_status brisk_outfile_commit(brisk_outfile *o, brisk_error *err);
/* Close and remove the temporary file; a no-op on a zeroed or finished one. */
void brisk_outfile_abort(brisk_outfile *o);

/* Read a whole file into a malloc'd buffer (NUL-terminated for convenience;
 * *len excludes the NUL). Caller frees. */
brisk_status brisk_file_read(const char *path, uint8_t **out, size_t *len, brisk_error *err);

/* Monotonic time in seconds. */
double brisk_time_now(void);

/* Free bytes on the filesystem holding path (or its directory); -1 if unknown. */
int64_t brisk_disk_free(const char *path);

#endif
