/* gguf: strict, zero-copy reader and a streaming writer for GGUF v2/v3.
 *
 * The reader distrusts every field: each length is checked against the bytes
 * remaining before anything is allocated; strings and arrays have hard caps;
 * enums are range-checked; element counts and byte sizes are overflow-checked;
 * tensor data must be whole quant blocks per row, aligned to general.alignment,
 * inside the file and non-overlapping. Each rejection names the field.
 *
 * Strings and tensor data point into the caller's buffer (or the mapping made
 * by brisk_gguf_open): they stay valid until brisk_gguf_close. */
#ifndef BRISK_GGUF_H
#define BRISK_GGUF_H

#include "base/base.h"

#define BRISK_GGUF_MAGIC 0x46554747u          /* "GGUF" little-endian */
#define BRISK_GGUF_DEFAULT_ALIGNMENT 32
#define BRISK_GGUF_MAX_DIMS 4
#define BRISK_GGUF_MAX_STRING (1u << 30)       /* hard cap on one string's length */
#define BRISK_GGUF_MAX_NAME 64                 /* tensor name cap, as in ggml */
#define BRISK_GGUF_MAX_DEPTH 8                 /* arrays nest at most this deep (array of array ...) */

typedef enum brisk_gguf_type {
    BRISK_GGUF_UINT8 = 0, BRISK_GGUF_INT8 = 1, BRISK_GGUF_UINT16 = 2, BRISK_GGUF_INT16 = 3,
    BRISK_GGUF_UINT32 = 4, BRISK_GGUF_INT32 = 5, BRISK_GGUF_FLOAT32 = 6, BRISK_GGUF_BOOL = 7,
    BRISK_GGUF_STRING = 8, BRISK_GGUF_ARRAY = 9, BRISK_GGUF_UINT64 = 10, BRISK_GGUF_INT64 = 11,
    BRISK_GGUF_FLOAT64 = 12,
    BRISK_GGUF_TYPE_COUNT
} brisk_gguf_type;

/* A length-delimited string inside the file (not NUL-terminated). */
typedef struct brisk_str {
    const char *ptr;
    size_t len;
} brisk_str;

/* One metadata value. Scalars are decoded; arrays stay in the file and are read
 * with the accessors below (nested arrays are walked with brisk_gguf_value_at). */
typedef struct brisk_gguf_value {
    brisk_gguf_type type;
    union {
        uint64_t u64;   /* all unsigned ints and bool */
        int64_t i64;    /* all signed ints */
        double f64;     /* FLOAT32 and FLOAT64 */
        brisk_str str;
        struct {
            brisk_gguf_type elem_type;
            uint64_t count;
            const uint8_t *data;    /* first element, in the file's encoding */
            size_t nbytes;          /* encoded size of all elements */
        } arr;
    } v;
} brisk_gguf_value;

typedef struct brisk_gguf_kv {
    brisk_str key;
    brisk_gguf_value value;
} brisk_gguf_kv;

typedef struct brisk_gguf_tensor {
    brisk_str name;
    uint32_t n_dims;
    int64_t ne[BRISK_GGUF_MAX_DIMS];   /* ne[0] is the row length (fastest), unused dims = 1 */
    uint32_t type;                     /* a brisk_qtype (quant/quant.h) */
    uint64_t offset;                   /* relative to the data section */
    uint64_t nbytes;
    const void *data;                  /* borrowed: points into the file */
} brisk_gguf_tensor;

typedef struct brisk_gguf {
    uint32_t version;
    uint64_t n_kv;
    brisk_gguf_kv *kv;
    uint64_t n_tensors;
    brisk_gguf_tensor *tensors;
    uint32_t alignment;
    size_t data_offset;              /* start of the tensor data section in the file */
    const uint8_t *buf;              /* the whole file */
    size_t size;
    brisk_mapped_file map;           /* owned when opened from a path */
    /* internal: lookup indexes, sorted by key / tensor name (owned) */
    const brisk_gguf_kv **kv_sorted;
    const brisk_gguf_tensor **tensors_sorted;
    /* A split model (split.count > 1, opened from its first file): tensors holds
     * the tensors of every file, each data pointer into its own file's mapping;
     * shards[0..n_files-1) are files 2..n_files (owned; their kvs and tensor
     * tables are theirs, checked like any file). n_files is 1 otherwise. */
    uint32_t n_files;
    struct brisk_gguf **shards;
} brisk_gguf;

/* Parse an in-memory GGUF. buf is borrowed and must outlive the result.
 * Errors: BRISK_ERR_FORMAT for a malformed file; BRISK_ERR_UNSUPPORTED for a
 * well-formed tensor type id brisk does not implement (e.g. IQ2_XXS); NOMEM.
 * Rules beyond ggml's: n_dims must be 1..4, arrays may nest (up to
 * BRISK_GGUF_MAX_DEPTH), tensor data may come in any order with gaps but no
 * two tensors may share a byte. The lookup functions are O(log n). */
brisk_status brisk_gguf_parse(const uint8_t *buf, size_t len, brisk_gguf **out, brisk_error *err);
/* Map and parse a file. Errors for missing/dir/empty/non-GGUF files are one line naming the path.
 * A split model (llama.cpp's gguf-split: PREFIX-00001-of-0000N.gguf, keys split.no,
 * split.count, split.tensors.count) is opened from its first file: the other N-1
 * files are derived from its name, opened and checked (split.no/split.count,
 * no tensor name twice, split.tensors.count equal to the sum), and their tensors
 * join one table. Opening any other file of the split names the first one. */
brisk_status brisk_gguf_open(const char *path, brisk_gguf **out, brisk_error *err);
void brisk_gguf_close(brisk_gguf *g);   /* NULL is a no-op */

/* Lookup: NULL when absent. */
const brisk_gguf_kv *brisk_gguf_find(const brisk_gguf *g, const char *key);
const brisk_gguf_tensor *brisk_gguf_find_tensor(const brisk_gguf *g, const char *name);

/* Typed getters. They fail with BRISK_ERR_FORMAT naming the key when it is
 * present with an incompatible type or out of range. A missing key leaves *out
 * unchanged and returns BRISK_OK with *found = false (found may be NULL); a
 * present key sets *found = true, also on error. Integer getters accept any
 * integer type whose value fits (not bool); get_f32 accepts f32 and f64. */
brisk_status brisk_gguf_get_u32(const brisk_gguf *g, const char *key, uint32_t *out, bool *found, brisk_error *err);
brisk_status brisk_gguf_get_i64(const brisk_gguf *g, const char *key, int64_t *out, bool *found, brisk_error *err);
brisk_status brisk_gguf_get_f32(const brisk_gguf *g, const char *key, float *out, bool *found, brisk_error *err);
brisk_status brisk_gguf_get_bool(const brisk_gguf *g, const char *key, bool *out, bool *found, brisk_error *err);
brisk_status brisk_gguf_get_str(const brisk_gguf *g, const char *key, brisk_str *out, bool *found, brisk_error *err);
/* A string from the file as one line of a message: a bounded copy into buf
 * (n >= 8 bytes) with control bytes shown as '?' and a long string cut with
 * "...". Returns buf. */
const char *brisk_gguf_show(brisk_str s, char *buf, size_t n);
/* An array of the given element type (STRING arrays: elements read with brisk_gguf_arr_strings). */
brisk_status brisk_gguf_get_arr(const brisk_gguf *g, const char *key, brisk_gguf_type elem, brisk_gguf_value *out, bool *found, brisk_error *err);

/* Element access for arrays of scalars/strings (the array was validated at parse
 * time; these do not fail for i < count). String arrays are walked sequentially:
 * brisk_gguf_arr_strings fills out[0..count) in one pass (out is caller-owned,
 * count entries; the strings are borrowed from the file).
 * arr_int: integer and bool elements (u64 values above INT64_MAX wrap negative);
 * arr_float: any fixed-size numeric element. Calling them with i >= count or on
 * another element type is a programmer error (BRISK_ASSERT). */
int64_t brisk_gguf_arr_int(const brisk_gguf_value *arr, uint64_t i);
double brisk_gguf_arr_float(const brisk_gguf_value *arr, uint64_t i);
brisk_status brisk_gguf_arr_strings(const brisk_gguf_value *arr, brisk_str *out, brisk_error *err);
/* Nested arrays / any element: decode element i (O(i) for variable-size elements). */
brisk_status brisk_gguf_value_at(const brisk_gguf_value *arr, uint64_t i, brisk_gguf_value *out, brisk_error *err);
/* Sequential access to any element type: decode the element that starts at
 * byte *offset of the array's data (0 for the first) and advance *offset past
 * it, so walking a whole array is linear in its bytes. */
brisk_status brisk_gguf_value_next(const brisk_gguf_value *arr, size_t *offset, brisk_gguf_value *out, brisk_error *err);

const char *brisk_gguf_type_name(brisk_gguf_type t);
bool brisk_str_eq(brisk_str s, const char *cstr);

/* ---- writer ------------------------------------------------------------------
 * Collect metadata and tensors, then write the file in one pass (v3, aligned).
 * Tensor data is copied at add time unless added with _borrowed.
 * Keys keep the order they were first set in; setting a key again replaces its
 * value in place. The file's alignment is general.alignment when set (it must
 * be a u32 power of two, else the setter returns BRISK_ERR_INVALID_ARG), else
 * 32. The scalar setters return BRISK_ERR_INVALID_ARG (NULL/empty key, string
 * over the cap) or BRISK_ERR_NOMEM. Not thread-safe; one writer per thread. */
typedef struct brisk_gguf_writer brisk_gguf_writer;

/* alignment: 0 = the default (32); any other power of two is recorded as general.alignment. */
brisk_status brisk_gguf_writer_init(brisk_gguf_writer **out, uint32_t alignment, brisk_error *err);
void brisk_gguf_writer_free(brisk_gguf_writer *w);
brisk_status brisk_gguf_writer_set_u32(brisk_gguf_writer *w, const char *key, uint32_t v);
brisk_status brisk_gguf_writer_set_i32(brisk_gguf_writer *w, const char *key, int32_t v);
brisk_status brisk_gguf_writer_set_u64(brisk_gguf_writer *w, const char *key, uint64_t v);
brisk_status brisk_gguf_writer_set_f32(brisk_gguf_writer *w, const char *key, float v);
brisk_status brisk_gguf_writer_set_bool(brisk_gguf_writer *w, const char *key, bool v);
brisk_status brisk_gguf_writer_set_str(brisk_gguf_writer *w, const char *key, const char *v);
/* Arrays: elem_type a scalar type; data holds count elements in native layout
 * (for STRING: const char *const *). */
brisk_status brisk_gguf_writer_set_arr(brisk_gguf_writer *w, const char *key, brisk_gguf_type elem_type, const void *data, uint64_t count);
/* Any value, e.g. one read by brisk_gguf_parse: scalars of every type (range-checked
 * against v->type), strings, and arrays, nested ones included (v.arr.data holds the
 * elements in GGUF encoding, as the reader returns them; it is validated). The value's
 * bytes are copied. */
brisk_status brisk_gguf_writer_set_value(brisk_gguf_writer *w, const char *key, const brisk_gguf_value *v, brisk_error *err);
/* An array of arrays: elems[0..count) are ARRAY values (e.g. from the reader); copied. */
brisk_status brisk_gguf_writer_set_arr_nested(brisk_gguf_writer *w, const char *key, const brisk_gguf_value *elems, uint64_t count, brisk_error *err);
/* Copy every kv of g (e.g. to derive a quantized file), except split.* keys: the output is one file. */
brisk_status brisk_gguf_writer_copy_kv(brisk_gguf_writer *w, const brisk_gguf *g, brisk_error *err);
/* Tensors: name under BRISK_GGUF_MAX_NAME bytes and unique, a known type, n_dims 1..4,
 * rows of whole blocks, nbytes exactly the shape's size; else BRISK_ERR_INVALID_ARG
 * with a message naming the tensor. Data is laid out in the order added. */
brisk_status brisk_gguf_writer_add_tensor(brisk_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne, const void *data, size_t nbytes, brisk_error *err);
/* As add_tensor, but data is borrowed: it must stay valid until the last write/write_mem. */
brisk_status brisk_gguf_writer_add_tensor_borrowed(brisk_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne, const void *data, size_t nbytes, brisk_error *err);
/* Write to path atomically: a temporary file beside it, fsync'd, then renamed.
 * A target that exists and is not a regular file is refused (a FIFO or a
 * device is never replaced); "-" writes to stdout and /dev/null is written
 * straight. */
brisk_status brisk_gguf_writer_write(brisk_gguf_writer *w, const char *path, brisk_error *err);
/* Write to memory (malloc'd; caller frees) — used by tests and fuzz seeds. */
brisk_status brisk_gguf_writer_write_mem(brisk_gguf_writer *w, uint8_t **out, size_t *len, brisk_error *err);

/* ---- fingerprints (gguf_hash.c) ------------------------------------------------
 * A 64-bit streaming hash of brisk's own (integrity, not security): hashing
 * a buffer in any split gives the same value. Used for the checksum of
 * KV-state files and for the model fingerprints they record. */
typedef struct brisk_hash64 {
    uint64_t lane[4];
    uint8_t tail[32];   /* bytes not yet consumed, n_tail of them */
    size_t n_tail;
    uint64_t total;     /* bytes hashed */
} brisk_hash64;
void brisk_hash64_init(brisk_hash64 *h, uint64_t seed);
void brisk_hash64_update(brisk_hash64 *h, const void *data, size_t len);
uint64_t brisk_hash64_final(const brisk_hash64 *h);   /* h is unchanged: more may follow */
uint64_t brisk_hash64_of(const void *data, size_t len, uint64_t seed);
/* The file's header, metadata and tensor table (bytes before the data
 * section) and its size: cheap, so every model load takes it. A split model
 * also hashes each other file's size and header, in order; a single file's
 * hash is unchanged. */
uint64_t brisk_gguf_header_hash(const brisk_gguf *g);
/* Every byte of the tensor data section: reads the whole file (taken lazily,
 * when a KV state is written or checked). A split model streams every file's
 * data section, in order. */
uint64_t brisk_gguf_data_hash(const brisk_gguf *g);

#endif
