/* pack_cache: the packed-GEMM copies of a model's weights kept in a file
 * beside the model (opt-in, BRISK_PACK_CACHE), so a later load maps them
 * read-only instead of repacking: no pack loops and no fresh anonymous pages
 * to zero. The file's pages are the page cache's, shared by every process
 * that loads the same model.
 *
 * The format (version 1; docs/PERFORMANCE.md "A packed-layout cache file"
 * has the same table). Little-endian (the only byte order brisk runs on):
 *
 *   header, 256 bytes
 *     0  8 bytes  magic "BRSKPACK"
 *     8  u32  version (1)
 *    12  u32  entry bytes (64)
 *    16  u64  file size (every byte of the file)
 *    24  u64  data offset (the first entry's data; a multiple of 4096)
 *    32  u64  entries
 *    40  u64  layout fingerprint (brisk_pack_layout_fingerprint)
 *    48  16 bytes  the packed-GEMM table's name, NUL-padded ("avx512")
 *    64  u64  packed types: bit t set when that table packs type t
 *    72  u64  the model's file size
 *    80  u64  the model's header hash (brisk_gguf_header_hash)
 *    88  u64  the model's data hash (brisk_gguf_data_hash)
 *    96  u64  st_dev, 104 u64 st_ino of the model file when the cache was written
 *   112  i64  st_mtim seconds, 120 i64 nanoseconds; 128 i64 st_ctim seconds, 136 i64 nanoseconds
 *   144  u32  rows per packed group (BRISK_GEMM_ROWS, 16), 148 u32 reserved (0)
 *   152  96 bytes reserved (0)
 *   248  u64  checksum: brisk_hash64 of bytes 0..247 and of the table
 *   table, entries x 64 bytes, in the order the model packs its matrices
 *     0  u64  the matrix's byte offset in the model file (its canonical rows)
 *     8  u32  weight type, 12 u32 reserved (0)
 *    16  i64  rows, 24 i64 cols (the whole matrix; groups x 16 of the rows are packed)
 *    32  u64  groups, 40 u64 bytes per group
 *    48  u64  offset of the packed data in this file (a multiple of 4096, increasing, no overlap)
 *    56  u64  bytes (groups x bytes per group)
 *   data: each entry's packed groups at its offset; the gaps are zero.
 *
 * A cache is used only when everything matches what this process would
 * pack: format, layout fingerprint, table name and packed types, the model
 * (file size and header hash; file identity equal, or else the data hash
 * recomputed and equal), and every entry of the table. Anything else is
 * refused with a one-line reason and the model is repacked (and the cache
 * rewritten). The packed bytes themselves are not hashed at load (that would
 * cost what the cache saves); the file is written to a temporary name,
 * fsync'd and renamed, so a reader only ever sees a complete file. */
#ifndef BRISK_PACK_CACHE_H
#define BRISK_PACK_CACHE_H

#include "base/base.h"
#include "gguf/gguf.h"

#define BRISK_PACK_CACHE_MAGIC "BRSKPACK"
#define BRISK_PACK_CACHE_VERSION 1u
#define BRISK_PACK_CACHE_HEADER 256u
#define BRISK_PACK_CACHE_ENTRY 64u
#define BRISK_PACK_CACHE_ALIGN 4096u

/* What a cache must have been made for: this build's layout and kernels, and the model file. */
typedef struct brisk_pack_key {
    uint64_t layout;          /* brisk_pack_layout_fingerprint() */
    char isa[16];             /* the packed-GEMM table's name, NUL-terminated */
    uint64_t packed_types;    /* bit t: the table packs type t */
    uint32_t group_rows;      /* BRISK_GEMM_ROWS */
    uint64_t model_size, header_hash, data_hash;
    uint64_t dev, ino;
    int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
    uint32_t mode;            /* the model file's permission bits (not stored): the cache gets them, so it is as readable as the model */
} brisk_pack_key;

/* One packed matrix. */
typedef struct brisk_pack_entry {
    uint64_t src_offset;
    uint32_t type;
    int64_t rows, cols;
    uint64_t groups, group_bytes;
    uint64_t offset, bytes;   /* in the cache file */
} brisk_pack_entry;

/* A parsed cache image: the header's fields and the table (borrowed from buf). */
typedef struct brisk_pack_image {
    brisk_pack_key key;
    uint64_t file_size, data_offset, n_entries;
    const uint8_t *table;
} brisk_pack_image;

/* Hash of brisk_pack_rows' output, for every packable type at two widths, on
 * a fixed pseudo-random input, and of the group sizes: any change to a packed
 * layout changes it, so old caches are refused without a version bump. */
uint64_t brisk_pack_layout_fingerprint(void);

/* Parse and check a cache image of len bytes (the whole file): magic,
 * version, sizes, checksum, and every entry (bounds, alignment, order, no
 * overlap, size = groups x bytes per group, all overflow-checked). Nothing is
 * allocated. BRISK_ERR_FORMAT with a one-line reason otherwise. */
brisk_status brisk_pack_cache_parse(const uint8_t *buf, size_t len, brisk_pack_image *out, brisk_error *err);
/* Entry i of a parsed image (i < n_entries). */
void brisk_pack_cache_entry(const brisk_pack_image *im, uint64_t i, brisk_pack_entry *out);

/* How a parsed image compares with what this process wants. */
typedef enum brisk_pack_match {
    BRISK_PACK_MATCH = 0,         /* usable as it is */
    BRISK_PACK_MATCH_IDENTITY,    /* all equal but the model file's identity: usable when its data hash is */
    BRISK_PACK_MISMATCH,          /* refused; err says why */
} brisk_pack_match;
/* Compare im with want (want->data_hash is not compared: the caller checks
 * it on BRISK_PACK_MATCH_IDENTITY) and with the n entries this process would
 * pack (their offset and bytes are not compared). */
brisk_pack_match brisk_pack_cache_match(const brisk_pack_image *im, const brisk_pack_key *want, const brisk_pack_entry *entries,
                                        uint64_t n, brisk_error *err);

/* Lay out n entries (their offset and bytes from groups x group_bytes) and
 * write header and table into hdr (data_offset bytes, zeroed beyond them);
 * returns the data offset and sets *file_size; 0 on overflow. */
size_t brisk_pack_cache_layout(brisk_pack_entry *entries, uint64_t n, uint64_t *file_size);
void brisk_pack_cache_header(const brisk_pack_key *key, const brisk_pack_entry *entries, uint64_t n, size_t data_offset,
                             uint64_t file_size, uint8_t *hdr);
/* Recompute the checksum of a whole image (tests, the fuzz target's resealing). */
void brisk_pack_cache_seal(uint8_t *buf, size_t len);

/* ---- files ---------------------------------------------------------------------- */

/* The cache file for the model at model_path under the current kernel table,
 * from $BRISK_PACK_CACHE: unset, "" or "off": false (no cache); "auto":
 * MODEL_PATH.ISA.brisk-pack beside the model; a directory:
 * DIR/BASENAME.HEADERHASH.ISA.brisk-pack. */
bool brisk_pack_cache_path(const char *model_path, const char *isa, uint64_t header_hash, char *out, size_t n);

/* The key for the model at model_path (g its open file): stat of the path,
 * the current packed-GEMM table, the layout fingerprint; data_hash left 0. */
brisk_status brisk_pack_cache_key(const char *model_path, const brisk_gguf *g, brisk_pack_key *out, brisk_error *err);

/* An open cache file: its read-only mapping. */
typedef struct brisk_pack_file {
    const uint8_t *data;
    size_t size;
} brisk_pack_file;

/* Map cache_path and check it against want and entries; on success the
 * entries' offset/bytes are filled from the file and *out holds the
 * mapping. A missing file or any mismatch: BRISK_ERR_IO/FORMAT with the
 * reason in err, nothing held. A model identity that differs is settled by
 * hashing g's data (want->data_hash is set then, and *identity_changed). */
brisk_status brisk_pack_cache_open(const char *cache_path, brisk_pack_key *want, const brisk_gguf *g, brisk_pack_entry *entries,
                                   uint64_t n, brisk_pack_file *out, bool *identity_changed, brisk_error *err);
void brisk_pack_cache_close(brisk_pack_file *f);

/* Write the cache: a temporary file beside cache_path, fsync'd, renamed over
 * it (concurrent writers each rename a whole file; the last one stays).
 * data[i] holds entries[i]'s packed groups. key->data_hash is computed from
 * g when 0. On failure the temporary file is removed and err says why. */
brisk_status brisk_pack_cache_write(const char *cache_path, brisk_pack_key *key, const brisk_gguf *g, brisk_pack_entry *entries,
                                    const void *const *data, uint64_t n, brisk_error *err);

#endif
