/* pack_cache: the packed-layout cache file (format and rules in pack_cache.h).
 *
 * Three layers: the image (parse, match, layout, header: pure functions on
 * bytes, what fuzz/fuzz_pack_cache.c drives), the key (what this process
 * would pack: the layout fingerprint, the kernel table, the model file's
 * stat), and the files (map and check, write beside and rename). */
#include "model/pack_cache.h"
#include "kernels/kernels.h"
#include "quant/quant.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22   /* Linux 5.14 */
#endif

#define CHECK_SEED 0x4252534b5041434bull    /* "BRSKPACK" */
#define LAYOUT_SEED 0x4252534b4c41594full
#define CHECK_AT 248u

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* ---- the layout fingerprint ----------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t brisk_pack_layout_fingerprint(void) {
    static const int64_t widths[] = {256, 768};
    enum { MAX_ROW = 768 * 4 };   /* the widest row below (F32-sized bound) */
    uint8_t *src = malloc((size_t)BRISK_GEMM_ROWS * MAX_ROW), *dst = malloc((size_t)BRISK_GEMM_ROWS * MAX_ROW);
    brisk_hash64 h;
    brisk_hash64_init(&h, LAYOUT_SEED);
    const uint64_t rows = BRISK_GEMM_ROWS;
    brisk_hash64_update(&h, &rows, sizeof rows);
    const bool ok = src && dst;
    for (uint32_t t = 0; ok && t < BRISK_Q_TYPE_LIMIT; t++) {
        if (!brisk_pack_supported(t)) continue;
        for (size_t k = 0; k < BRISK_ARRAY_LEN(widths); k++) {
            size_t row_bytes = 0;
            const size_t gbytes = brisk_pack_group_bytes(t, widths[k]);
            if (!brisk_qtype_row_bytes(t, widths[k], &row_bytes) || gbytes == 0 || row_bytes > MAX_ROW ||
                gbytes > (size_t)BRISK_GEMM_ROWS * MAX_ROW)
                continue;
            uint64_t s = LAYOUT_SEED ^ ((uint64_t)t << 32) ^ (uint64_t)widths[k];
            for (size_t i = 0; i < (size_t)BRISK_GEMM_ROWS * row_bytes; i += 8) {
                const uint64_t r = splitmix(&s);
                memcpy(src + i, &r, (size_t)BRISK_GEMM_ROWS * row_bytes - i < 8 ? (size_t)BRISK_GEMM_ROWS * row_bytes - i : 8);
            }
            brisk_pack_rows(t, dst, src, row_bytes, widths[k]);
            const uint64_t meta[3] = {t, (uint64_t)widths[k], gbytes};
            brisk_hash64_update(&h, meta, sizeof meta);
            brisk_hash64_update(&h, dst, gbytes);
        }
    }
    free(src);
    free(dst);
    return ok ? brisk_hash64_final(&h) : 0;   /* 0: out of memory; no cache is ever made with it */
}

/* ---- the image ------------------------------------------------------------------------- */

static uint64_t image_checksum(const uint8_t *buf, uint64_t n_entries) {
    brisk_hash64 h;
    brisk_hash64_init(&h, CHECK_SEED);
    brisk_hash64_update(&h, buf, CHECK_AT);
    brisk_hash64_update(&h, buf + BRISK_PACK_CACHE_HEADER, (size_t)n_entries * BRISK_PACK_CACHE_ENTRY);
    return brisk_hash64_final(&h);
}

brisk_status brisk_pack_cache_parse(const uint8_t *buf, size_t len, brisk_pack_image *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    if (len < BRISK_PACK_CACHE_HEADER)
        return brisk_fail(err, BRISK_ERR_FORMAT, "is %zu bytes, shorter than the %u-byte header (truncated)", len, BRISK_PACK_CACHE_HEADER);
    if (memcmp(buf, BRISK_PACK_CACHE_MAGIC, 8) != 0) return brisk_fail(err, BRISK_ERR_FORMAT, "is not a brisk pack cache (bad magic)");
    const uint32_t version = get_u32(buf + 8), entry_bytes = get_u32(buf + 12);
    if (version != BRISK_PACK_CACHE_VERSION)
        return brisk_fail(err, BRISK_ERR_FORMAT, "has format version %" PRIu32 ", this build reads %u", version, BRISK_PACK_CACHE_VERSION);
    if (entry_bytes != BRISK_PACK_CACHE_ENTRY)
        return brisk_fail(err, BRISK_ERR_FORMAT, "has %" PRIu32 "-byte table entries, version %u has %u", entry_bytes,
                          BRISK_PACK_CACHE_VERSION, BRISK_PACK_CACHE_ENTRY);
    out->file_size = get_u64(buf + 16);
    out->data_offset = get_u64(buf + 24);
    out->n_entries = get_u64(buf + 32);
    if (out->file_size != len)
        return brisk_fail(err, BRISK_ERR_FORMAT, "is %zu bytes but its header says %" PRIu64 " (truncated or appended to)", len,
                          out->file_size);
    if (out->n_entries > (len - BRISK_PACK_CACHE_HEADER) / BRISK_PACK_CACHE_ENTRY)
        return brisk_fail(err, BRISK_ERR_FORMAT, "claims %" PRIu64 " table entries, more than its %zu bytes hold", out->n_entries, len);
    const uint64_t table_end = BRISK_PACK_CACHE_HEADER + out->n_entries * BRISK_PACK_CACHE_ENTRY;
    if (out->data_offset < table_end || out->data_offset % BRISK_PACK_CACHE_ALIGN || out->data_offset > len)
        return brisk_fail(err, BRISK_ERR_FORMAT, "has data offset %" PRIu64 " (must be a multiple of %u from %" PRIu64 " to the file size %zu)",
                          out->data_offset, BRISK_PACK_CACHE_ALIGN, table_end, len);
    if (get_u64(buf + CHECK_AT) != image_checksum(buf, out->n_entries))
        return brisk_fail(err, BRISK_ERR_FORMAT, "header checksum mismatch (corrupt)");
    brisk_pack_key *k = &out->key;
    k->layout = get_u64(buf + 40);
    memcpy(k->isa, buf + 48, sizeof k->isa);
    if (k->isa[sizeof k->isa - 1] != 0) return brisk_fail(err, BRISK_ERR_FORMAT, "has a kernel table name that is not NUL-terminated");
    for (const char *c = k->isa; *c; c++)   /* it is printed in messages: letters, digits, '-' and '_' only */
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
            return brisk_fail(err, BRISK_ERR_FORMAT, "has a kernel table name with a byte 0x%02x that is not a letter, digit, '-' or '_'",
                              (unsigned)(unsigned char)*c);
    k->packed_types = get_u64(buf + 64);
    k->model_size = get_u64(buf + 72);
    k->header_hash = get_u64(buf + 80);
    k->data_hash = get_u64(buf + 88);
    k->dev = get_u64(buf + 96);
    k->ino = get_u64(buf + 104);
    k->mtime_s = (int64_t)get_u64(buf + 112), k->mtime_ns = (int64_t)get_u64(buf + 120);
    k->ctime_s = (int64_t)get_u64(buf + 128), k->ctime_ns = (int64_t)get_u64(buf + 136);
    k->group_rows = get_u32(buf + 144);
    out->table = buf + BRISK_PACK_CACHE_HEADER;
    uint64_t end = out->data_offset;   /* where the previous entry's data ended */
    for (uint64_t i = 0; i < out->n_entries; i++) {
        brisk_pack_entry e;
        brisk_pack_cache_entry(out, i, &e);
        uint64_t bytes = 0, stop = 0;
        if (e.type >= BRISK_Q_TYPE_LIMIT || e.groups == 0 || e.group_bytes == 0 || e.rows < 1 || e.cols < 1 ||
            e.groups > (uint64_t)e.rows / (k->group_rows ? k->group_rows : 1) || get_u32(out->table + i * BRISK_PACK_CACHE_ENTRY + 12))
            return brisk_fail(err, BRISK_ERR_FORMAT, "table entry %" PRIu64 " is malformed (type %" PRIu32 ", %" PRId64 " x %" PRId64 ", %" PRIu64 " groups of %" PRIu64 " bytes)",
                              i, e.type, e.rows, e.cols, e.groups, e.group_bytes);
        if (__builtin_mul_overflow(e.groups, e.group_bytes, &bytes) || bytes != e.bytes)
            return brisk_fail(err, BRISK_ERR_FORMAT, "table entry %" PRIu64 ": %" PRIu64 " bytes is not %" PRIu64 " groups x %" PRIu64, i, e.bytes,
                              e.groups, e.group_bytes);
        if (e.offset % BRISK_PACK_CACHE_ALIGN || e.offset < end || __builtin_add_overflow(e.offset, e.bytes, &stop) || stop > len)
            return brisk_fail(err, BRISK_ERR_FORMAT, "table entry %" PRIu64 ": data at %" PRIu64 "..+%" PRIu64 " is misaligned, out of order, overlaps "
                              "the previous entry or runs past the file's %zu bytes", i, e.offset, e.bytes, len);
        end = stop;
    }
    return BRISK_OK;
}

void brisk_pack_cache_entry(const brisk_pack_image *im, uint64_t i, brisk_pack_entry *out) {
    const uint8_t *p = im->table + i * BRISK_PACK_CACHE_ENTRY;
    out->src_offset = get_u64(p);
    out->type = get_u32(p + 8);
    out->rows = (int64_t)get_u64(p + 16);
    out->cols = (int64_t)get_u64(p + 24);
    out->groups = get_u64(p + 32);
    out->group_bytes = get_u64(p + 40);
    out->offset = get_u64(p + 48);
    out->bytes = get_u64(p + 56);
}

static bool same_identity(const brisk_pack_key *a, const brisk_pack_key *b) {
    return a->dev == b->dev && a->ino == b->ino && a->mtime_s == b->mtime_s && a->mtime_ns == b->mtime_ns && a->ctime_s == b->ctime_s &&
           a->ctime_ns == b->ctime_ns;
}

brisk_pack_match brisk_pack_cache_match(const brisk_pack_image *im, const brisk_pack_key *want, const brisk_pack_entry *entries,
                                        uint64_t n, brisk_error *err) {
    const brisk_pack_key *k = &im->key;
    if (k->layout != want->layout) {
        brisk_fail(err, BRISK_ERR_FORMAT, "written by a build with another packed layout (fingerprint %016" PRIx64 ", this build's %016" PRIx64 ")",
                   k->layout, want->layout);
        return BRISK_PACK_MISMATCH;
    }
    if (strcmp(k->isa, want->isa) != 0 || k->packed_types != want->packed_types || k->group_rows != want->group_rows) {
        brisk_fail(err, BRISK_ERR_FORMAT, "made for the %s kernels (packed types %016" PRIx64 "), this process runs %s (%016" PRIx64 ")", k->isa,
                   k->packed_types, want->isa, want->packed_types);
        return BRISK_PACK_MISMATCH;
    }
    if (k->model_size != want->model_size || k->header_hash != want->header_hash) {
        brisk_fail(err, BRISK_ERR_FORMAT, "made for another model file (%" PRIu64 " bytes, header hash %016" PRIx64 "; this one: %" PRIu64 ", %016" PRIx64 ")",
                   k->model_size, k->header_hash, want->model_size, want->header_hash);
        return BRISK_PACK_MISMATCH;
    }
    if (im->n_entries != n) {
        brisk_fail(err, BRISK_ERR_FORMAT, "holds %" PRIu64 " packed matrices, this model packs %" PRIu64, im->n_entries, n);
        return BRISK_PACK_MISMATCH;
    }
    for (uint64_t i = 0; i < n; i++) {
        brisk_pack_entry e;
        brisk_pack_cache_entry(im, i, &e);
        const brisk_pack_entry *w = &entries[i];
        if (e.src_offset != w->src_offset || e.type != w->type || e.rows != w->rows || e.cols != w->cols || e.groups != w->groups ||
            e.group_bytes != w->group_bytes) {
            brisk_fail(err, BRISK_ERR_FORMAT, "matrix %" PRIu64 " (%s %" PRId64 " x %" PRId64 " at %" PRIu64 ", %" PRIu64 " groups of %" PRIu64
                       " bytes) is not the model's (%s %" PRId64 " x %" PRId64 " at %" PRIu64 ", %" PRIu64 " groups of %" PRIu64 " bytes)",
                       i, brisk_qtype_name(e.type), e.rows, e.cols, e.src_offset, e.groups, e.group_bytes, brisk_qtype_name(w->type), w->rows,
                       w->cols, w->src_offset, w->groups, w->group_bytes);
            return BRISK_PACK_MISMATCH;
        }
    }
    return same_identity(k, want) ? BRISK_PACK_MATCH : BRISK_PACK_MATCH_IDENTITY;
}

static bool align_up(uint64_t v, uint64_t *out) {
    if (v > UINT64_MAX - (BRISK_PACK_CACHE_ALIGN - 1)) return false;
    *out = (v + BRISK_PACK_CACHE_ALIGN - 1) / BRISK_PACK_CACHE_ALIGN * BRISK_PACK_CACHE_ALIGN;
    return true;
}

size_t brisk_pack_cache_layout(brisk_pack_entry *entries, uint64_t n, uint64_t *file_size) {
    uint64_t table = 0, data = 0, at = 0;
    if (n > (UINT64_MAX - BRISK_PACK_CACHE_HEADER) / BRISK_PACK_CACHE_ENTRY) return 0;
    table = BRISK_PACK_CACHE_HEADER + n * BRISK_PACK_CACHE_ENTRY;
    if (!align_up(table, &data) || data > SIZE_MAX) return 0;
    at = data;
    for (uint64_t i = 0; i < n; i++) {
        if (__builtin_mul_overflow(entries[i].groups, entries[i].group_bytes, &entries[i].bytes) || !align_up(at, &entries[i].offset)) return 0;
        if (__builtin_add_overflow(entries[i].offset, entries[i].bytes, &at)) return 0;
    }
    *file_size = at;
    return (size_t)data;
}

void brisk_pack_cache_header(const brisk_pack_key *key, const brisk_pack_entry *entries, uint64_t n, size_t data_offset,
                             uint64_t file_size, uint8_t *hdr) {
    memset(hdr, 0, data_offset);
    memcpy(hdr, BRISK_PACK_CACHE_MAGIC, 8);
    put_u32(hdr + 8, BRISK_PACK_CACHE_VERSION);
    put_u32(hdr + 12, BRISK_PACK_CACHE_ENTRY);
    put_u64(hdr + 16, file_size);
    put_u64(hdr + 24, data_offset);
    put_u64(hdr + 32, n);
    put_u64(hdr + 40, key->layout);
    memcpy(hdr + 48, key->isa, sizeof key->isa);
    hdr[48 + sizeof key->isa - 1] = 0;
    put_u64(hdr + 64, key->packed_types);
    put_u64(hdr + 72, key->model_size);
    put_u64(hdr + 80, key->header_hash);
    put_u64(hdr + 88, key->data_hash);
    put_u64(hdr + 96, key->dev);
    put_u64(hdr + 104, key->ino);
    put_u64(hdr + 112, (uint64_t)key->mtime_s), put_u64(hdr + 120, (uint64_t)key->mtime_ns);
    put_u64(hdr + 128, (uint64_t)key->ctime_s), put_u64(hdr + 136, (uint64_t)key->ctime_ns);
    put_u32(hdr + 144, key->group_rows);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *p = hdr + BRISK_PACK_CACHE_HEADER + i * BRISK_PACK_CACHE_ENTRY;
        const brisk_pack_entry *e = &entries[i];
        put_u64(p, e->src_offset);
        put_u32(p + 8, e->type);
        put_u64(p + 16, (uint64_t)e->rows), put_u64(p + 24, (uint64_t)e->cols);
        put_u64(p + 32, e->groups), put_u64(p + 40, e->group_bytes);
        put_u64(p + 48, e->offset), put_u64(p + 56, e->bytes);
    }
    put_u64(hdr + CHECK_AT, image_checksum(hdr, n));
}

void brisk_pack_cache_seal(uint8_t *buf, size_t len) {
    if (len < BRISK_PACK_CACHE_HEADER) return;
    put_u64(buf + 16, len);
    uint64_t n = get_u64(buf + 32);
    const uint64_t fit = (len - BRISK_PACK_CACHE_HEADER) / BRISK_PACK_CACHE_ENTRY;
    if (n > fit) n = fit;
    put_u64(buf + CHECK_AT, image_checksum(buf, n));
}

/* ---- the key ------------------------------------------------------------------------- */

bool brisk_pack_cache_path(const char *model_path, const char *isa, uint64_t header_hash, char *out, size_t n) {
    const char *env = getenv("BRISK_PACK_CACHE");
    if (!env || !*env || !strcmp(env, "off")) return false;
    int w;
    if (!strcmp(env, "auto")) {
        w = snprintf(out, n, "%s.%s.brisk-pack", model_path, isa);
    } else {
        const char *base = strrchr(model_path, '/');
        base = base ? base + 1 : model_path;
        w = snprintf(out, n, "%s%s%s.%016" PRIx64 ".%s.brisk-pack", env, env[strlen(env) - 1] == '/' ? "" : "/", base, header_hash, isa);
    }
    return w > 0 && (size_t)w < n;
}

brisk_status brisk_pack_cache_key(const char *model_path, const brisk_gguf *g, brisk_pack_key *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(model_path, &st) != 0) return brisk_fail(err, BRISK_ERR_IO, "cannot stat the model %s: %s", model_path, strerror(errno));
    const brisk_gemm_kernels *gk = brisk_gemm_best();
    if (!gk) return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "these kernels pack nothing");
    out->layout = brisk_pack_layout_fingerprint();
    if (!out->layout) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    snprintf(out->isa, sizeof out->isa, "%s", gk->isa);
    for (uint32_t t = 0; t < BRISK_Q_TYPE_LIMIT && t < 64; t++)
        if (gk->gemm[t] && brisk_pack_supported(t)) out->packed_types |= 1ull << t;
    out->group_rows = BRISK_GEMM_ROWS;
    out->model_size = g->size;
    out->header_hash = brisk_gguf_header_hash(g);
    out->dev = (uint64_t)st.st_dev;
    out->ino = (uint64_t)st.st_ino;
    out->mtime_s = (int64_t)st.st_mtim.tv_sec, out->mtime_ns = (int64_t)st.st_mtim.tv_nsec;
    out->ctime_s = (int64_t)st.st_ctim.tv_sec, out->ctime_ns = (int64_t)st.st_ctim.tv_nsec;
    out->mode = (uint32_t)(st.st_mode & 0666);
    return BRISK_OK;
}

/* ---- files --------------------------------------------------------------------------- */

brisk_status brisk_pack_cache_open(const char *cache_path, brisk_pack_key *want, const brisk_gguf *g, brisk_pack_entry *entries,
                                   uint64_t n, brisk_pack_file *out, bool *identity_changed, brisk_error *err) {
    memset(out, 0, sizeof *out);
    *identity_changed = false;
    const int fd = open(cache_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return brisk_fail(err, BRISK_ERR_IO, "%s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        const int e = errno;
        close(fd);
        return brisk_fail(err, BRISK_ERR_IO, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return brisk_fail(err, BRISK_ERR_IO, "is %s, not a regular file", brisk_file_kind(st.st_mode));
    }
    if ((uint64_t)st.st_size < BRISK_PACK_CACHE_HEADER) {
        close(fd);
        return brisk_fail(err, BRISK_ERR_FORMAT, "is %lld bytes, shorter than the %u-byte header (truncated)", (long long)st.st_size,
                          BRISK_PACK_CACHE_HEADER);
    }
    const size_t size = (size_t)st.st_size;
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    const int e = errno;
    close(fd);
    if (p == MAP_FAILED) return brisk_fail(err, BRISK_ERR_IO, "mmap failed: %s", strerror(e));
    /* advice only: 2 MiB folios in the page cache (readahead at PMD order) get mapped whole, as
     * the anonymous copies are (decode streams every weight once per token) */
    madvise(p, size, MADV_HUGEPAGE);
    brisk_pack_image im;
    brisk_status s = brisk_pack_cache_parse(p, size, &im, err);
    if (!s) {
        const brisk_pack_match m = brisk_pack_cache_match(&im, want, entries, n, err);
        if (m == BRISK_PACK_MISMATCH) {
            s = BRISK_ERR_FORMAT;
        } else if (m == BRISK_PACK_MATCH_IDENTITY) {
            /* another file with the same size and header (a copy, or touched): its data decides */
            if (!want->data_hash) want->data_hash = brisk_gguf_data_hash(g);
            if (want->data_hash != im.key.data_hash)
                s = brisk_fail(err, BRISK_ERR_FORMAT, "made for another model file (same header, other data: data hash %016" PRIx64 ", this one's %016" PRIx64 ")",
                               im.key.data_hash, want->data_hash);
            *identity_changed = true;
        }
    }
    if (s) {
        munmap(p, size);
        return s;
    }
    for (uint64_t i = 0; i < n; i++) {
        brisk_pack_entry got;
        brisk_pack_cache_entry(&im, i, &got);
        entries[i].offset = got.offset;
        entries[i].bytes = got.bytes;
    }
    madvise(p, size, MADV_POPULATE_READ);   /* map it all now (a few hundred 2 MiB faults); failure is harmless */
    out->data = p;
    out->size = size;
    return BRISK_OK;
}

void brisk_pack_cache_close(brisk_pack_file *f) {
    if (f && f->data) munmap((void *)f->data, f->size);
    if (f) memset(f, 0, sizeof *f);
}

/* Write iov[0..n) to fd whole: writev in batches of at most IOV_MAX, resuming after short writes. */
static bool write_all(int fd, struct iovec *iov, size_t n) {
    size_t i = 0;
    while (i < n) {
        const int batch = (int)(n - i < IOV_MAX ? n - i : IOV_MAX);
        const ssize_t w = writev(fd, iov + i, batch);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        size_t left = (size_t)w;
        while (i < n && left >= iov[i].iov_len) left -= iov[i++].iov_len;
        if (left) {
            iov[i].iov_base = (uint8_t *)iov[i].iov_base + left;
            iov[i].iov_len -= left;
        }
        if (w == 0 && i < n) {
            errno = EIO;
            return false;
        }
    }
    return true;
}

brisk_status brisk_pack_cache_write(const char *cache_path, brisk_pack_key *key, const brisk_gguf *g, brisk_pack_entry *entries,
                                    const void *const *data, uint64_t n, brisk_error *err) {
    static const uint8_t zeros[BRISK_PACK_CACHE_ALIGN];
    uint64_t file_size = 0;
    const size_t data_offset = brisk_pack_cache_layout(entries, n, &file_size);
    if (!data_offset || file_size > (uint64_t)INT64_MAX) return brisk_fail(err, BRISK_ERR_CAPACITY, "the packed weights are too large to lay out");
    if (!key->data_hash) key->data_hash = brisk_gguf_data_hash(g);
    uint8_t *hdr = malloc(data_offset);
    struct iovec *iov = calloc((size_t)n * 2 + 1, sizeof *iov);
    const size_t plen = strlen(cache_path);
    char *tmp = malloc(plen + 16);
    if (!hdr || !iov || !tmp) {
        free(hdr), free(iov), free(tmp);
        return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
    }
    brisk_pack_cache_header(key, entries, n, data_offset, file_size, hdr);
    size_t k = 0;
    iov[k++] = (struct iovec){hdr, data_offset};
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t at = i + 1 < n ? entries[i + 1].offset : file_size;
        iov[k++] = (struct iovec){(void *)data[i], (size_t)entries[i].bytes};
        if (at > entries[i].offset + entries[i].bytes) iov[k++] = (struct iovec){(void *)zeros, (size_t)(at - entries[i].offset - entries[i].bytes)};
    }
    /* the temporary name: ".brisk-pack.XXXXXX" beside the target, so rename stays on one file system */
    const char *slash = strrchr(cache_path, '/');
    const int dir_len = slash ? (int)(slash - cache_path + 1) : 0;
    snprintf(tmp, plen + 16, "%.*s.%s.XXXXXX", dir_len, cache_path, cache_path + dir_len);
    brisk_status st = BRISK_OK;
    const int fd = mkstemp(tmp);
    if (fd < 0) {
        st = brisk_fail(err, BRISK_ERR_IO, "cannot create a temporary file beside it: %s", strerror(errno));
    } else {
        const bool ok = fchmod(fd, key->mode ? (mode_t)key->mode : 0600) == 0 && write_all(fd, iov, k) && fsync(fd) == 0;
        const int e = errno;
        if (close(fd) != 0 && ok) st = brisk_fail(err, BRISK_ERR_IO, "close failed: %s", strerror(errno));
        else if (!ok) st = brisk_fail(err, BRISK_ERR_IO, "write failed: %s", strerror(e));
        else if (rename(tmp, cache_path) != 0) st = brisk_fail(err, BRISK_ERR_IO, "cannot rename the temporary file over it: %s", strerror(errno));
        if (st) unlink(tmp);
    }
    free(hdr), free(iov), free(tmp);
    return st;
}
