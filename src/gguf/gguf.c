/* gguf: the strict GGUF v2/v3 reader, typed getters and array accessors.
 *
 * One parser (brisk_gguf_parse) sits under every entry point. It walks the
 * buffer with a bytes-remaining cursor and checks each length against what is
 * left before it uses or allocates anything. All allocations are proportional
 * to the file size: n_kv and n_tensors are bounded by the bytes remaining
 * divided by the smallest possible record. Tensor data stays in the buffer
 * (zero-copy). The writer lives in gguf_write.c. */
#include "gguf/gguf.h"
#include "gguf/gguf_impl.h"
#include "quant/quant.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Smallest encodings, used to bound counts by the bytes remaining. */
#define MIN_KV_BYTES 14       /* key length (8) + 1-byte key + type (4) + 1-byte value */
#define MIN_TENSOR_BYTES 32   /* name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8) */
#define HEADER_BYTES 24       /* magic, version, n_tensors, n_kv */

/* ---- types -------------------------------------------------------------------- */

static const char *const type_names[BRISK_GGUF_TYPE_COUNT] = {
    [BRISK_GGUF_UINT8] = "u8",     [BRISK_GGUF_INT8] = "i8",     [BRISK_GGUF_UINT16] = "u16",
    [BRISK_GGUF_INT16] = "i16",    [BRISK_GGUF_UINT32] = "u32",  [BRISK_GGUF_INT32] = "i32",
    [BRISK_GGUF_FLOAT32] = "f32",  [BRISK_GGUF_BOOL] = "bool",   [BRISK_GGUF_STRING] = "str",
    [BRISK_GGUF_ARRAY] = "arr",    [BRISK_GGUF_UINT64] = "u64",  [BRISK_GGUF_INT64] = "i64",
    [BRISK_GGUF_FLOAT64] = "f64",
};

static const uint8_t type_sizes[BRISK_GGUF_TYPE_COUNT] = {
    [BRISK_GGUF_UINT8] = 1,   [BRISK_GGUF_INT8] = 1,   [BRISK_GGUF_UINT16] = 2,
    [BRISK_GGUF_INT16] = 2,   [BRISK_GGUF_UINT32] = 4, [BRISK_GGUF_INT32] = 4,
    [BRISK_GGUF_FLOAT32] = 4, [BRISK_GGUF_BOOL] = 1,   [BRISK_GGUF_STRING] = 0,
    [BRISK_GGUF_ARRAY] = 0,   [BRISK_GGUF_UINT64] = 8, [BRISK_GGUF_INT64] = 8,
    [BRISK_GGUF_FLOAT64] = 8,
};

const char *brisk_gguf_type_name(brisk_gguf_type t) {
    return (unsigned)t < BRISK_GGUF_TYPE_COUNT ? type_names[t] : "unknown";
}

size_t brisk_gguf_type_size(brisk_gguf_type t) {
    return (unsigned)t < BRISK_GGUF_TYPE_COUNT ? type_sizes[t] : 0;
}

/* Smallest encoding of one element: a string is at least its 8-byte length, an
 * array at least its element type and count. */
static size_t type_min_size(brisk_gguf_type t) {
    if (t == BRISK_GGUF_STRING) return 8;
    if (t == BRISK_GGUF_ARRAY) return 12;
    return brisk_gguf_type_size(t);
}

static bool type_is_uint(brisk_gguf_type t) {
    return t == BRISK_GGUF_UINT8 || t == BRISK_GGUF_UINT16 || t == BRISK_GGUF_UINT32 ||
           t == BRISK_GGUF_UINT64;
}
static bool type_is_sint(brisk_gguf_type t) {
    return t == BRISK_GGUF_INT8 || t == BRISK_GGUF_INT16 || t == BRISK_GGUF_INT32 ||
           t == BRISK_GGUF_INT64;
}
static bool type_is_float(brisk_gguf_type t) {
    return t == BRISK_GGUF_FLOAT32 || t == BRISK_GGUF_FLOAT64;
}

bool brisk_str_eq(brisk_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && (n == 0 || memcmp(s.ptr, cstr, n) == 0);
}

static int str_cmp(brisk_str a, brisk_str b) {
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (c) return c;
    return (a.len > b.len) - (a.len < b.len);
}

/* A bounded, printable copy of a name for one-line messages: control bytes
 * become '?', and long names are cut with "...". */
static const char *show(brisk_str s, char *buf, size_t n) {
    BRISK_ASSERT(n >= 8);
    size_t room = n - 1, take = s.len;
    bool cut = take > room;
    if (cut) take = room - 3;
    for (size_t i = 0; i < take; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    if (cut) memcpy(buf + take, "...", 3);
    buf[take + (cut ? 3 : 0)] = 0;
    return buf;
}

const char *brisk_gguf_show(brisk_str s, char *buf, size_t n) { return show(s, buf, n); }

/* ---- cursor and value decoding ------------------------------------------------- */

typedef struct cursor {
    const uint8_t *buf;
    size_t pos, end;        /* next byte, one past the last readable byte */
    brisk_error *err;
} cursor;

static size_t left(const cursor *c) { return c->end - c->pos; }

static brisk_status need(cursor *c, size_t n, const char *what) {
    if (left(c) >= n) return BRISK_OK;
    return brisk_fail(c->err, BRISK_ERR_FORMAT, "%s truncated (needs %zu bytes, %zu remain)", what, n,
                      left(c));
}

static uint32_t take32(cursor *c) {
    uint32_t v = brisk_gguf_rd32(c->buf + c->pos);
    c->pos += 4;
    return v;
}
static uint64_t take64(cursor *c) {
    uint64_t v = brisk_gguf_rd64(c->buf + c->pos);
    c->pos += 8;
    return v;
}

/* Decode one fixed-size element at p (the caller checked the bytes exist). */
static void decode_scalar(brisk_gguf_type t, const uint8_t *p, brisk_gguf_value *out) {
    out->type = t;
    switch (t) {
    case BRISK_GGUF_UINT8:
    case BRISK_GGUF_BOOL: out->v.u64 = p[0]; break;
    case BRISK_GGUF_INT8: out->v.i64 = (int8_t)p[0]; break;
    case BRISK_GGUF_UINT16: out->v.u64 = brisk_gguf_rd16(p); break;
    case BRISK_GGUF_INT16: out->v.i64 = (int16_t)brisk_gguf_rd16(p); break;
    case BRISK_GGUF_UINT32: out->v.u64 = brisk_gguf_rd32(p); break;
    case BRISK_GGUF_INT32: out->v.i64 = (int32_t)brisk_gguf_rd32(p); break;
    case BRISK_GGUF_UINT64: out->v.u64 = brisk_gguf_rd64(p); break;
    case BRISK_GGUF_INT64: out->v.i64 = (int64_t)brisk_gguf_rd64(p); break;
    case BRISK_GGUF_FLOAT32: {
        uint32_t bits = brisk_gguf_rd32(p);
        float f;
        memcpy(&f, &bits, sizeof f);
        out->v.f64 = f;
        break;
    }
    case BRISK_GGUF_FLOAT64: {
        uint64_t bits = brisk_gguf_rd64(p);
        memcpy(&out->v.f64, &bits, sizeof out->v.f64);
        break;
    }
    default: BRISK_ASSERT(!"decode_scalar: not a fixed-size type");
    }
}

/* A length-prefixed string, capped at cap bytes and at the bytes remaining. */
static brisk_status read_string(cursor *c, uint64_t cap, brisk_str *out) {
    brisk_status st = need(c, 8, "string length");
    if (st) return st;
    uint64_t len = take64(c);
    if (len > cap)
        return brisk_fail(c->err, BRISK_ERR_FORMAT, "string length %" PRIu64 " exceeds the cap of %" PRIu64 " bytes",
                          len, cap);
    if (len > left(c))
        return brisk_fail(c->err, BRISK_ERR_FORMAT,
                          "string length %" PRIu64 " past end of file (%zu bytes remain)", len, left(c));
    out->ptr = (const char *)c->buf + c->pos;
    out->len = (size_t)len;
    c->pos += (size_t)len;
    return BRISK_OK;
}

static brisk_status read_value(cursor *c, brisk_gguf_type t, int depth_left, brisk_gguf_value *out);

/* count elements of type et: bounded by the bytes remaining before any is read. */
static brisk_status read_elems(cursor *c, brisk_gguf_type et, uint64_t count, int depth_left) {
    size_t min = type_min_size(et);
    if (count > left(c) / min)
        return brisk_fail(c->err, BRISK_ERR_FORMAT,
                          "array count %" PRIu64 " of %s (at least %zu bytes each) exceeds the %zu bytes remaining",
                          count, brisk_gguf_type_name(et), min, left(c));
    size_t size = brisk_gguf_type_size(et);
    if (size) {
        if (et == BRISK_GGUF_BOOL) {
            for (uint64_t i = 0; i < count; i++) {
                uint8_t b = c->buf[c->pos + i];
                if (b > 1)
                    return brisk_fail(c->err, BRISK_ERR_FORMAT, "element %" PRIu64 ": bool value %u is not 0 or 1",
                                      i, b);
            }
        }
        c->pos += (size_t)count * size;   /* count * size <= left: no overflow */
        return BRISK_OK;
    }
    for (uint64_t i = 0; i < count; i++) {
        brisk_gguf_value tmp;
        brisk_status st = read_value(c, et, depth_left, &tmp);
        if (st) {
            brisk_error_prefix(c->err, "element %" PRIu64, i);
            return st;
        }
    }
    return BRISK_OK;
}

/* One value of type t (the type tag is already read). depth_left: how many
 * more levels of arrays may open here. */
static brisk_status read_value(cursor *c, brisk_gguf_type t, int depth_left, brisk_gguf_value *out) {
    brisk_status st;
    memset(out, 0, sizeof *out);
    out->type = t;
    if (t == BRISK_GGUF_STRING) return read_string(c, BRISK_GGUF_MAX_STRING, &out->v.str);
    if (t == BRISK_GGUF_ARRAY) {
        if (depth_left <= 0)
            return brisk_fail(c->err, BRISK_ERR_FORMAT, "arrays nested deeper than %d levels",
                              BRISK_GGUF_MAX_DEPTH);
        if ((st = need(c, 12, "array header"))) return st;
        uint32_t et = take32(c);
        uint64_t count = take64(c);
        if (et >= BRISK_GGUF_TYPE_COUNT)
            return brisk_fail(c->err, BRISK_ERR_FORMAT, "unknown array element type %" PRIu32, et);
        size_t start = c->pos;
        if ((st = read_elems(c, (brisk_gguf_type)et, count, depth_left - 1))) return st;
        out->v.arr.elem_type = (brisk_gguf_type)et;
        out->v.arr.count = count;
        out->v.arr.data = c->buf + start;
        out->v.arr.nbytes = c->pos - start;
        return BRISK_OK;
    }
    if ((unsigned)t >= BRISK_GGUF_TYPE_COUNT)
        return brisk_fail(c->err, BRISK_ERR_FORMAT, "unknown value type %u", (unsigned)t);
    size_t size = brisk_gguf_type_size(t);
    char what[32];
    snprintf(what, sizeof what, "%s value", brisk_gguf_type_name(t));
    if ((st = need(c, size, what))) return st;
    decode_scalar(t, c->buf + c->pos, out);
    if (t == BRISK_GGUF_BOOL && out->v.u64 > 1)
        return brisk_fail(c->err, BRISK_ERR_FORMAT, "bool value %" PRIu64 " is not 0 or 1", out->v.u64);
    c->pos += size;
    return BRISK_OK;
}

brisk_status brisk_gguf_check_elems(brisk_gguf_type elem, uint64_t count, const uint8_t *data,
                                    size_t nbytes, int depth_left, brisk_error *err) {
    if ((unsigned)elem >= BRISK_GGUF_TYPE_COUNT)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "unknown array element type %u", (unsigned)elem);
    if (nbytes && !data) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "array data is NULL");
    cursor c = {data, 0, nbytes, err};
    brisk_status st = read_elems(&c, elem, count, depth_left);
    if (st) return st;
    if (c.pos != nbytes)
        return brisk_fail(err, BRISK_ERR_FORMAT, "array of %" PRIu64 " %s holds %zu bytes but its elements use %zu",
                          count, brisk_gguf_type_name(elem), nbytes, c.pos);
    return BRISK_OK;
}

/* ---- parser ------------------------------------------------------------------------ */

static int kv_ptr_cmp(const void *a, const void *b) {
    const brisk_gguf_kv *x = *(const brisk_gguf_kv *const *)a, *y = *(const brisk_gguf_kv *const *)b;
    int c = str_cmp(x->key, y->key);
    return c ? c : (x > y) - (x < y);   /* ties in file order */
}

static int tensor_name_cmp(const void *a, const void *b) {
    const brisk_gguf_tensor *x = *(const brisk_gguf_tensor *const *)a;
    const brisk_gguf_tensor *y = *(const brisk_gguf_tensor *const *)b;
    int c = str_cmp(x->name, y->name);
    return c ? c : (x > y) - (x < y);
}

static int tensor_offset_cmp(const void *a, const void *b) {
    const brisk_gguf_tensor *x = *(const brisk_gguf_tensor *const *)a;
    const brisk_gguf_tensor *y = *(const brisk_gguf_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x > y) - (x < y);
}

static brisk_status parse_header(cursor *c, brisk_gguf *g, uint64_t *n_tensors, uint64_t *n_kv) {
    brisk_error *err = c->err;
    if (left(c) < 4) {
        if (left(c) > 0 && memcmp(c->buf, "GGUF", left(c)) != 0)
            return brisk_fail(err, BRISK_ERR_FORMAT, "not a GGUF file (%zu bytes, no 'GGUF' magic)", left(c));
        return brisk_fail(err, BRISK_ERR_FORMAT, "truncated header: %zu bytes, a GGUF header needs %d", left(c),
                          HEADER_BYTES);
    }
    const uint8_t *m = c->buf;
    if (brisk_gguf_rd32(m) != BRISK_GGUF_MAGIC) {
        char shown[5];
        for (int i = 0; i < 4; i++) shown[i] = (m[i] >= 0x20 && m[i] < 0x7f) ? (char)m[i] : '?';
        shown[4] = 0;
        return brisk_fail(err, BRISK_ERR_FORMAT,
                          "not a GGUF file (magic '%s' = %02x %02x %02x %02x, expected 'GGUF')", shown, m[0], m[1],
                          m[2], m[3]);
    }
    c->pos = 4;
    if (left(c) < 4)
        return brisk_fail(err, BRISK_ERR_FORMAT, "truncated header: %zu bytes, a GGUF header needs %d", c->end,
                          HEADER_BYTES);
    uint32_t version = take32(c);
    if (version == 1)
        return brisk_fail(err, BRISK_ERR_FORMAT, "GGUF v1 is not supported (only v2 and v3); re-convert the model");
    if (version != 0 && (version & 0xffffu) == 0)
        return brisk_fail(err, BRISK_ERR_FORMAT,
                          "GGUF version field 0x%08" PRIx32 " looks byte-swapped: big-endian GGUF files are not supported",
                          version);
    if (version != 2 && version != 3)
        return brisk_fail(err, BRISK_ERR_FORMAT, "unsupported GGUF version %" PRIu32 " (only v2 and v3)", version);
    g->version = version;
    if (left(c) < 16)
        return brisk_fail(err, BRISK_ERR_FORMAT, "truncated header: %zu bytes, a GGUF header needs %d", c->end,
                          HEADER_BYTES);
    *n_tensors = take64(c);
    *n_kv = take64(c);
    /* Bound both counts by the bytes left, so the arrays allocated for them are
     * proportional to the file. Compared by division: no overflow. */
    if (*n_kv > left(c) / MIN_KV_BYTES)
        return brisk_fail(err, BRISK_ERR_FORMAT,
                          "header: n_kv %" PRIu64 " needs at least %d bytes each but only %zu bytes remain", *n_kv,
                          MIN_KV_BYTES, left(c));
    if (*n_tensors > left(c) / MIN_TENSOR_BYTES ||
        *n_kv * MIN_KV_BYTES > left(c) - *n_tensors * MIN_TENSOR_BYTES)
        return brisk_fail(err, BRISK_ERR_FORMAT,
                          "header: n_tensors %" PRIu64 " (at least %d bytes each) and n_kv %" PRIu64
                          " need more than the %zu bytes remaining",
                          *n_tensors, MIN_TENSOR_BYTES, *n_kv, left(c));
    return BRISK_OK;
}

static brisk_status parse_kvs(cursor *c, brisk_gguf *g) {
    brisk_error *err = c->err;
    char name[96];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        brisk_gguf_kv *kv = &g->kv[i];
        brisk_status st = read_string(c, BRISK_GGUF_MAX_STRING, &kv->key);
        if (st) {
            brisk_error_prefix(err, "kv %" PRIu64 ": key", i);
            return st;
        }
        if (kv->key.len == 0) return brisk_fail(err, BRISK_ERR_FORMAT, "kv %" PRIu64 ": empty key", i);
        if (left(c) < 4)
            return brisk_fail(err, BRISK_ERR_FORMAT, "key '%s': value type truncated (%zu bytes remain)",
                              show(kv->key, name, sizeof name), left(c));
        uint32_t t = take32(c);
        if (t >= BRISK_GGUF_TYPE_COUNT)
            return brisk_fail(err, BRISK_ERR_FORMAT, "key '%s': unknown value type %" PRIu32,
                              show(kv->key, name, sizeof name), t);
        if ((st = read_value(c, (brisk_gguf_type)t, BRISK_GGUF_MAX_DEPTH, &kv->value))) {
            brisk_error_prefix(err, "key '%s'", show(kv->key, name, sizeof name));
            return st;
        }
    }
    /* duplicates: sort once, compare neighbours; the index then serves lookups */
    for (uint64_t i = 0; i < g->n_kv; i++) g->kv_sorted[i] = &g->kv[i];
    if (g->n_kv > 1) qsort(g->kv_sorted, (size_t)g->n_kv, sizeof *g->kv_sorted, kv_ptr_cmp);
    for (uint64_t i = 1; i < g->n_kv; i++) {
        const brisk_gguf_kv *a = g->kv_sorted[i - 1], *b = g->kv_sorted[i];
        if (str_cmp(a->key, b->key) == 0)
            return brisk_fail(err, BRISK_ERR_FORMAT, "duplicate key '%s' (kvs %td and %td)",
                              show(a->key, name, sizeof name), a - g->kv, b - g->kv);
    }
    g->alignment = BRISK_GGUF_DEFAULT_ALIGNMENT;
    const brisk_gguf_kv *al = brisk_gguf_find(g, BRISK_GGUF_KEY_ALIGNMENT);
    if (al) {
        if (al->value.type != BRISK_GGUF_UINT32)
            return brisk_fail(err, BRISK_ERR_FORMAT, "key '%s' must be of type u32, found %s",
                              BRISK_GGUF_KEY_ALIGNMENT, brisk_gguf_type_name(al->value.type));
        if (!brisk_gguf_is_pow2(al->value.v.u64))
            return brisk_fail(err, BRISK_ERR_FORMAT, "key '%s': %" PRIu64 " is not a nonzero power of two",
                              BRISK_GGUF_KEY_ALIGNMENT, al->value.v.u64);
        g->alignment = (uint32_t)al->value.v.u64;
    }
    return BRISK_OK;
}

static brisk_status parse_tensor_info(cursor *c, brisk_gguf *g, uint64_t i) {
    brisk_error *err = c->err;
    brisk_gguf_tensor *t = &g->tensors[i];
    char name[96];
    brisk_status st = read_string(c, BRISK_GGUF_MAX_NAME - 1, &t->name);
    if (st) {
        brisk_error_prefix(err, "tensor %" PRIu64 ": name", i);
        return st;
    }
    const char *tn = show(t->name, name, sizeof name);
    if ((st = need(c, 4, "n_dims"))) goto fail;
    t->n_dims = take32(c);
    if (t->n_dims < 1 || t->n_dims > BRISK_GGUF_MAX_DIMS) {
        st = brisk_fail(err, BRISK_ERR_FORMAT, "n_dims %" PRIu32 " not in 1..%d", t->n_dims, BRISK_GGUF_MAX_DIMS);
        goto fail;
    }
    if ((st = need(c, 8 * (size_t)t->n_dims, "dimensions"))) goto fail;
    for (uint32_t d = 0; d < BRISK_GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < t->n_dims ? (int64_t)take64(c) : 1;
        if (t->ne[d] < 0) {
            st = brisk_fail(err, BRISK_ERR_FORMAT, "dimension %" PRIu32 " is %" PRId64 " (negative)", d, t->ne[d]);
            goto fail;
        }
    }
    /* rows and elements must both fit int64, also when ne[0] is 0 */
    int64_t n_rows, n_elems;
    if (__builtin_mul_overflow(t->ne[1], t->ne[2], &n_rows) || __builtin_mul_overflow(n_rows, t->ne[3], &n_rows) ||
        __builtin_mul_overflow(n_rows, t->ne[0], &n_elems)) {
        st = brisk_fail(err, BRISK_ERR_FORMAT,
                        "element count overflows int64 (shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "])",
                        t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
        goto fail;
    }
    if ((st = need(c, 4, "type"))) goto fail;
    t->type = take32(c);
    const brisk_qtype_info *q = brisk_qtype_get(t->type);
    if (!q) {
        if (t->type >= BRISK_Q_TYPE_LIMIT)
            st = brisk_fail(err, BRISK_ERR_FORMAT, "unknown tensor type id %" PRIu32, t->type);
        else
            st = brisk_fail(err, BRISK_ERR_UNSUPPORTED, "tensor type id %" PRIu32 " is not supported by brisk",
                            t->type);
        goto fail;
    }
    if (t->ne[0] % q->block_elems != 0) {
        st = brisk_fail(err, BRISK_ERR_FORMAT,
                        "row length %" PRId64 " is not a whole number of %s blocks (%" PRId64 " elements each)",
                        t->ne[0], q->name, q->block_elems);
        goto fail;
    }
    size_t row, nbytes;
    if (!brisk_qtype_row_bytes(t->type, t->ne[0], &row) || (uint64_t)n_rows > SIZE_MAX ||
        !brisk_mul_size(row, (size_t)n_rows, &nbytes)) {
        st = brisk_fail(err, BRISK_ERR_FORMAT,
                        "byte size overflows (shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "] of %s)",
                        t->ne[0], t->ne[1], t->ne[2], t->ne[3], q->name);
        goto fail;
    }
    t->nbytes = nbytes;
    if ((st = need(c, 8, "offset"))) goto fail;
    t->offset = take64(c);
    if (t->offset % g->alignment != 0) {
        st = brisk_fail(err, BRISK_ERR_FORMAT, "offset %" PRIu64 " is not a multiple of the alignment %" PRIu32,
                        t->offset, g->alignment);
        goto fail;
    }
    return BRISK_OK;
fail:
    brisk_error_prefix(err, "tensor '%s'", tn);
    return st;
}

/* Data ranges: inside the file, and no two tensors share a byte. */
static brisk_status check_tensor_data(brisk_gguf *g, brisk_error *err) {
    char n1[96], n2[96];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        brisk_gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        if (__builtin_add_overflow((uint64_t)g->data_offset, t->offset, &start) ||
            __builtin_add_overflow(start, t->nbytes, &end))
            return brisk_fail(err, BRISK_ERR_FORMAT,
                              "tensor '%s': data offset %" PRIu64 " + %" PRIu64 " bytes overflows (file size %zu)",
                              show(t->name, n1, sizeof n1), t->offset, t->nbytes, g->size);
        if (end > g->size)
            return brisk_fail(err, BRISK_ERR_FORMAT,
                              "tensor '%s': data [%" PRIu64 ", %" PRIu64 ") past end of file (size %zu)",
                              show(t->name, n1, sizeof n1), start, end, g->size);
        t->data = g->buf + start;
    }
    if (g->n_tensors < 2) return BRISK_OK;
    const brisk_gguf_tensor **by_off = malloc((size_t)g->n_tensors * sizeof *by_off);
    if (!by_off) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the tensor offset index");
    for (uint64_t i = 0; i < g->n_tensors; i++) by_off[i] = &g->tensors[i];
    qsort(by_off, (size_t)g->n_tensors, sizeof *by_off, tensor_offset_cmp);
    const brisk_gguf_tensor *prev = NULL;   /* the tensor whose data ends last so far */
    brisk_status st = BRISK_OK;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const brisk_gguf_tensor *t = by_off[i];
        if (t->nbytes == 0) continue;
        if (prev && prev->offset + prev->nbytes > t->offset) {
            st = brisk_fail(err, BRISK_ERR_FORMAT,
                            "tensors '%s' and '%s' overlap: data [%" PRIu64 ", %" PRIu64 ") and [%" PRIu64 ", %" PRIu64
                            ") in the data section",
                            show(prev->name, n1, sizeof n1), show(t->name, n2, sizeof n2), prev->offset,
                            prev->offset + prev->nbytes, t->offset, t->offset + t->nbytes);
            break;
        }
        prev = t;   /* sorted by offset and not overlapping: t ends last */
    }
    free(by_off);
    return st;
}

static brisk_status parse_tensors(cursor *c, brisk_gguf *g) {
    brisk_error *err = c->err;
    char name[96];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        brisk_status st = parse_tensor_info(c, g, i);
        if (st) return st;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) g->tensors_sorted[i] = &g->tensors[i];
    if (g->n_tensors > 1)
        qsort(g->tensors_sorted, (size_t)g->n_tensors, sizeof *g->tensors_sorted, tensor_name_cmp);
    for (uint64_t i = 1; i < g->n_tensors; i++) {
        const brisk_gguf_tensor *a = g->tensors_sorted[i - 1], *b = g->tensors_sorted[i];
        if (str_cmp(a->name, b->name) == 0)
            return brisk_fail(err, BRISK_ERR_FORMAT, "duplicate tensor name '%s' (tensors %td and %td)",
                              show(a->name, name, sizeof name), a - g->tensors, b - g->tensors);
    }
    /* The data section starts at the next multiple of the alignment (as in
     * ggml, only when there are tensors). */
    size_t header_end = c->pos;
    g->data_offset = header_end;
    if (g->n_tensors > 0) {
        size_t pad = (g->alignment - header_end % g->alignment) % g->alignment;
        if (pad > g->size - header_end)
            return brisk_fail(err, BRISK_ERR_FORMAT,
                              "data section start (header end %zu aligned to %" PRIu32 ") past end of file (size %zu)",
                              header_end, g->alignment, g->size);
        g->data_offset = header_end + pad;
    }
    return check_tensor_data(g, err);
}

brisk_status brisk_gguf_parse(const uint8_t *buf, size_t len, brisk_gguf **out, brisk_error *err) {
    *out = NULL;
    if (!buf && len) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "gguf: NULL buffer of %zu bytes", len);
    brisk_gguf *g = calloc(1, sizeof *g);
    if (!g) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the GGUF context");
    g->buf = buf;
    g->size = len;
    g->n_files = 1;
    cursor c = {buf, 0, len, err};
    uint64_t n_tensors = 0, n_kv = 0;
    brisk_status st = parse_header(&c, g, &n_tensors, &n_kv);
    if (st) goto fail;
    /* Counts are bounded by len / 14, so these sizes cannot overflow. */
    g->n_kv = n_kv;
    g->n_tensors = n_tensors;
    g->kv = calloc((size_t)n_kv + 1, sizeof *g->kv);
    g->kv_sorted = calloc((size_t)n_kv + 1, sizeof *g->kv_sorted);
    g->tensors = calloc((size_t)n_tensors + 1, sizeof *g->tensors);
    g->tensors_sorted = calloc((size_t)n_tensors + 1, sizeof *g->tensors_sorted);
    if (!g->kv || !g->kv_sorted || !g->tensors || !g->tensors_sorted) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate %" PRIu64 " kvs and %" PRIu64 " tensors", n_kv,
                        n_tensors);
        goto fail;
    }
    if ((st = parse_kvs(&c, g))) goto fail;
    if ((st = parse_tensors(&c, g))) goto fail;
    *out = g;
    return BRISK_OK;
fail:
    brisk_gguf_close(g);
    return st;
}

static brisk_status brisk_gguf_open_one(const char *path, brisk_gguf **out, brisk_error *err) {
    *out = NULL;
    brisk_mapped_file map;
    brisk_status st = brisk_file_map(path, &map, err);
    if (st) return st;
    if (map.size == 0) {
        brisk_file_unmap(&map);
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s: empty file", path);
    }
    st = brisk_gguf_parse(map.data, map.size, out, err);
    if (st) {
        brisk_file_unmap(&map);
        brisk_error_prefix(err, "%s", path);
        return st;
    }
    (*out)->map = map;
    return BRISK_OK;
}

/* ---- split models (llama.cpp's gguf-split layout) ------------------------------------- */

#define KEY_SPLIT_NO "split.no"
#define KEY_SPLIT_COUNT "split.count"
#define KEY_SPLIT_TENSORS "split.tensors.count"
#define MAX_SPLIT_PATH 4096

/* The file name of split number no (0-based) of count: PREFIX-%05d-of-%05d.gguf,
 * as llama_split_path writes it. */
static bool split_path(char *buf, size_t n, const char *prefix, size_t prefix_len, uint32_t no, uint32_t count) {
    int w = snprintf(buf, n, "%.*s-%05u-of-%05u.gguf", (int)prefix_len, prefix, (unsigned)(no + 1), (unsigned)count);
    return w > 0 && (size_t)w < n;
}

/* split.no and split.count of one file; *count = 0 when the file is not split. */
static brisk_status split_keys(const brisk_gguf *g, const char *path, uint32_t *no, uint32_t *count, brisk_error *err) {
    bool found_count = false, found_no = false;
    *no = 0;
    *count = 0;
    brisk_status st = brisk_gguf_get_u32(g, KEY_SPLIT_COUNT, count, &found_count, err);
    if (!st) st = brisk_gguf_get_u32(g, KEY_SPLIT_NO, no, &found_no, err);
    if (st) {
        brisk_error_prefix(err, "%s", path);
        return st;
    }
    if (!found_count) {
        *count = 0;
        return BRISK_OK;
    }
    if (*count == 0 || *count > 99999)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s: key '" KEY_SPLIT_COUNT "': %u is not a split count (1..99999)", path,
                          *count);
    if (!found_no && *count > 1)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s: key '" KEY_SPLIT_NO "' missing in a file of a %u-way split", path,
                          *count);
    if (*no >= *count)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s: key '" KEY_SPLIT_NO "' is %u but '" KEY_SPLIT_COUNT "' is %u", path,
                          *no, *count);
    return BRISK_OK;
}

/* g was opened from path; when it is the first file of a split model, open the
 * others and merge their tensors into g's table. */
static brisk_status open_split(brisk_gguf *g, const char *path, brisk_error *err) {
    uint32_t no, count;
    brisk_status st = split_keys(g, path, &no, &count, err);
    if (st || count <= 1) return st;
    char want[32], other[MAX_SPLIT_PATH];
    snprintf(want, sizeof want, "-%05u-of-%05u.gguf", (unsigned)(no + 1), (unsigned)count);
    const size_t len = strlen(path), wlen = strlen(want);
    if (len <= wlen || strcmp(path + len - wlen, want) != 0)
        return brisk_fail(err, BRISK_ERR_FORMAT,
                          "%s: file %u of a %u-way split model (key '" KEY_SPLIT_NO "'), but its name does not end in '%s', "
                          "so the other files cannot be found",
                          path, no + 1, count, want);
    const size_t prefix_len = len - wlen;
    if (no != 0) {
        if (!split_path(other, sizeof other, path, prefix_len, 0, count))
            return brisk_fail(err, BRISK_ERR_FORMAT, "%s: path too long", path);
        return brisk_fail(err, BRISK_ERR_FORMAT,
                          "%s: file %u of a %u-way split model (key '" KEY_SPLIT_NO "' = %u); open the first file, %s", path,
                          no + 1, count, no, other);
    }
    g->shards = calloc(count - 1, sizeof *g->shards);
    if (!g->shards) return brisk_fail(err, BRISK_ERR_NOMEM, "%s: cannot allocate %u split files", path, count);
    uint64_t total = g->n_tensors;
    for (uint32_t i = 1; i < count; i++) {
        if (!split_path(other, sizeof other, path, prefix_len, i, count))
            return brisk_fail(err, BRISK_ERR_FORMAT, "%s: path too long", path);
        brisk_gguf *s = NULL;
        if ((st = brisk_gguf_open_one(other, &s, err))) {
            brisk_error_prefix(err, "split file %u of %u (the model is %s)", i + 1, count, path);
            return st;
        }
        g->shards[g->n_files++ - 1] = s;   /* n_files counts the files owned so far, so close frees them */
        uint32_t s_no, s_count;
        if ((st = split_keys(s, other, &s_no, &s_count, err))) return st;
        if (s_count != count || s_no != i)
            return brisk_fail(err, BRISK_ERR_FORMAT,
                              "%s: keys '" KEY_SPLIT_NO "' = %u, '" KEY_SPLIT_COUNT "' = %u, but as file %u of %s's "
                              "%u-way split it must have %u and %u",
                              other, s_no, s_count, i + 1, path, count, i, count);
        total += s->n_tensors;   /* each n_tensors is bounded by its file's size: no overflow */
    }
    brisk_gguf_tensor *all = calloc((size_t)total + 1, sizeof *all);
    const brisk_gguf_tensor **sorted = calloc((size_t)total + 1, sizeof *sorted);
    if (!all || !sorted) {
        free(all);
        free(sorted);
        return brisk_fail(err, BRISK_ERR_NOMEM, "%s: cannot allocate %" PRIu64 " tensors", path, total);
    }
    uint64_t n = 0;
    for (uint32_t i = 0; i < count; i++) {
        const brisk_gguf *f = i == 0 ? g : g->shards[i - 1];
        if (f->n_tensors) memcpy(all + n, f->tensors, (size_t)f->n_tensors * sizeof *all);
        n += f->n_tensors;
    }
    for (uint64_t i = 0; i < total; i++) sorted[i] = &all[i];
    if (total > 1) qsort(sorted, (size_t)total, sizeof *sorted, tensor_name_cmp);
    free(g->tensors);
    free(g->tensors_sorted);
    g->tensors = all;
    g->tensors_sorted = sorted;
    g->n_tensors = total;
    char name[96];
    for (uint64_t i = 1; i < total; i++) {
        const brisk_gguf_tensor *a = sorted[i - 1], *b = sorted[i];
        if (str_cmp(a->name, b->name) == 0)   /* within one file the parser already refused it */
            return brisk_fail(err, BRISK_ERR_FORMAT, "%s: tensor '%s' appears in more than one file of the split model",
                              path, show(a->name, name, sizeof name));
    }
    int64_t want_tensors = 0;
    bool found = false;
    if ((st = brisk_gguf_get_i64(g, KEY_SPLIT_TENSORS, &want_tensors, &found, err))) {
        brisk_error_prefix(err, "%s", path);
        return st;
    }
    if (!found)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s: key '" KEY_SPLIT_TENSORS "' missing in the first file of a split model",
                          path);
    if (want_tensors < 0 || (uint64_t)want_tensors != total)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s: key '" KEY_SPLIT_TENSORS "' is %" PRId64 " but the %u files hold %" PRIu64
                          " tensors", path, want_tensors, count, total);
    return BRISK_OK;
}

brisk_status brisk_gguf_open(const char *path, brisk_gguf **out, brisk_error *err) {
    brisk_status st = brisk_gguf_open_one(path, out, err);
    if (st) return st;
    if ((st = open_split(*out, path, err))) {
        brisk_gguf_close(*out);
        *out = NULL;
    }
    return st;
}

void brisk_gguf_close(brisk_gguf *g) {
    if (!g) return;
    free(g->kv);
    free(g->kv_sorted);
    free(g->tensors);
    free(g->tensors_sorted);
    for (uint32_t i = 0; i + 1 < g->n_files; i++) brisk_gguf_close(g->shards[i]);
    free(g->shards);
    brisk_file_unmap(&g->map);
    free(g);
}

/* ---- lookup -------------------------------------------------------------------------- */

static int str_cmp_c(brisk_str s, const char *cstr, size_t n) {
    brisk_str b = {cstr, n};
    return str_cmp(s, b);
}

const brisk_gguf_kv *brisk_gguf_find(const brisk_gguf *g, const char *key) {
    size_t n = strlen(key), lo = 0, hi = (size_t)g->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = str_cmp_c(g->kv_sorted[mid]->key, key, n);
        if (c == 0) return g->kv_sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const brisk_gguf_tensor *brisk_gguf_find_tensor(const brisk_gguf *g, const char *name) {
    size_t n = strlen(name), lo = 0, hi = (size_t)g->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = str_cmp_c(g->tensors_sorted[mid]->name, name, n);
        if (c == 0) return g->tensors_sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* ---- typed getters ------------------------------------------------------------------- */

/* "u32", or "arr[str]" for arrays: what a type mismatch message shows. */
static const char *value_desc(const brisk_gguf_value *v, char *buf, size_t n) {
    if (v->type != BRISK_GGUF_ARRAY) return brisk_gguf_type_name(v->type);
    snprintf(buf, n, "arr[%s]", brisk_gguf_type_name(v->v.arr.elem_type));
    return buf;
}

static const brisk_gguf_kv *lookup(const brisk_gguf *g, const char *key, bool *found) {
    const brisk_gguf_kv *kv = brisk_gguf_find(g, key);
    if (found) *found = kv != NULL;
    return kv;
}

static brisk_status key_fail(const brisk_gguf_kv *kv, brisk_error *err, const char *fmt, ...) BRISK_PRINTF(3, 4);
static brisk_status key_fail(const brisk_gguf_kv *kv, brisk_error *err, const char *fmt, ...) {
    if (!err) return BRISK_ERR_FORMAT;
    char msg[sizeof err->msg], name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return brisk_fail(err, BRISK_ERR_FORMAT, "key '%s': %s", show(kv->key, name, sizeof name), msg);
}

/* Any integer value as a (negative, magnitude) pair-free signed/unsigned view. */
static bool int_value(const brisk_gguf_value *v, bool *neg, uint64_t *mag, int64_t *sval) {
    if (type_is_uint(v->type)) {
        *neg = false;
        *mag = v->v.u64;
        *sval = 0;
        return true;
    }
    if (type_is_sint(v->type)) {
        *neg = v->v.i64 < 0;
        *mag = *neg ? 0 : (uint64_t)v->v.i64;
        *sval = v->v.i64;
        return true;
    }
    return false;
}

brisk_status brisk_gguf_get_u32(const brisk_gguf *g, const char *key, uint32_t *out, bool *found, brisk_error *err) {
    const brisk_gguf_kv *kv = lookup(g, key, found);
    if (!kv) return BRISK_OK;
    bool neg;
    uint64_t mag;
    int64_t s;
    char d[32];
    if (!int_value(&kv->value, &neg, &mag, &s))
        return key_fail(kv, err, "expected an integer, found %s", value_desc(&kv->value, d, sizeof d));
    if (neg) return key_fail(kv, err, "value %" PRId64 " out of range for u32", s);
    if (mag > UINT32_MAX) return key_fail(kv, err, "value %" PRIu64 " out of range for u32", mag);
    *out = (uint32_t)mag;
    return BRISK_OK;
}

brisk_status brisk_gguf_get_i64(const brisk_gguf *g, const char *key, int64_t *out, bool *found, brisk_error *err) {
    const brisk_gguf_kv *kv = lookup(g, key, found);
    if (!kv) return BRISK_OK;
    bool neg;
    uint64_t mag;
    int64_t s;
    char d[32];
    if (!int_value(&kv->value, &neg, &mag, &s))
        return key_fail(kv, err, "expected an integer, found %s", value_desc(&kv->value, d, sizeof d));
    if (type_is_sint(kv->value.type)) {
        *out = s;
        return BRISK_OK;
    }
    if (mag > INT64_MAX) return key_fail(kv, err, "value %" PRIu64 " out of range for i64", mag);
    *out = (int64_t)mag;
    return BRISK_OK;
}

brisk_status brisk_gguf_get_f32(const brisk_gguf *g, const char *key, float *out, bool *found, brisk_error *err) {
    const brisk_gguf_kv *kv = lookup(g, key, found);
    if (!kv) return BRISK_OK;
    char d[32];
    if (!type_is_float(kv->value.type))
        return key_fail(kv, err, "expected a float, found %s", value_desc(&kv->value, d, sizeof d));
    double v = kv->value.v.f64;
    if (isfinite(v) && fabs(v) > FLT_MAX) return key_fail(kv, err, "value %g out of range for f32", v);
    *out = (float)v;
    return BRISK_OK;
}

brisk_status brisk_gguf_get_bool(const brisk_gguf *g, const char *key, bool *out, bool *found, brisk_error *err) {
    const brisk_gguf_kv *kv = lookup(g, key, found);
    if (!kv) return BRISK_OK;
    char d[32];
    if (kv->value.type != BRISK_GGUF_BOOL)
        return key_fail(kv, err, "expected bool, found %s", value_desc(&kv->value, d, sizeof d));
    *out = kv->value.v.u64 != 0;
    return BRISK_OK;
}

brisk_status brisk_gguf_get_str(const brisk_gguf *g, const char *key, brisk_str *out, bool *found, brisk_error *err) {
    const brisk_gguf_kv *kv = lookup(g, key, found);
    if (!kv) return BRISK_OK;
    char d[32];
    if (kv->value.type != BRISK_GGUF_STRING)
        return key_fail(kv, err, "expected str, found %s", value_desc(&kv->value, d, sizeof d));
    *out = kv->value.v.str;
    return BRISK_OK;
}

brisk_status brisk_gguf_get_arr(const brisk_gguf *g, const char *key, brisk_gguf_type elem, brisk_gguf_value *out,
                                bool *found, brisk_error *err) {
    const brisk_gguf_kv *kv = lookup(g, key, found);
    if (!kv) return BRISK_OK;
    char d[32];
    if (kv->value.type != BRISK_GGUF_ARRAY || kv->value.v.arr.elem_type != elem)
        return key_fail(kv, err, "expected arr[%s], found %s", brisk_gguf_type_name(elem),
                        value_desc(&kv->value, d, sizeof d));
    *out = kv->value;
    return BRISK_OK;
}

/* ---- array elements ------------------------------------------------------------------ */

int64_t brisk_gguf_arr_int(const brisk_gguf_value *arr, uint64_t i) {
    BRISK_ASSERT(arr->type == BRISK_GGUF_ARRAY && i < arr->v.arr.count);
    brisk_gguf_type et = arr->v.arr.elem_type;
    BRISK_ASSERT(type_is_uint(et) || type_is_sint(et) || et == BRISK_GGUF_BOOL);
    brisk_gguf_value v;
    decode_scalar(et, arr->v.arr.data + (size_t)i * brisk_gguf_type_size(et), &v);
    return type_is_sint(et) ? v.v.i64 : (int64_t)v.v.u64;
}

double brisk_gguf_arr_float(const brisk_gguf_value *arr, uint64_t i) {
    BRISK_ASSERT(arr->type == BRISK_GGUF_ARRAY && i < arr->v.arr.count);
    brisk_gguf_type et = arr->v.arr.elem_type;
    BRISK_ASSERT(brisk_gguf_type_size(et) != 0);
    brisk_gguf_value v;
    decode_scalar(et, arr->v.arr.data + (size_t)i * brisk_gguf_type_size(et), &v);
    if (type_is_float(et)) return v.v.f64;
    if (type_is_sint(et)) return (double)v.v.i64;
    return (double)v.v.u64;
}

brisk_status brisk_gguf_arr_strings(const brisk_gguf_value *arr, brisk_str *out, brisk_error *err) {
    if (arr->type != BRISK_GGUF_ARRAY || arr->v.arr.elem_type != BRISK_GGUF_STRING)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "arr_strings: not an array of strings");
    cursor c = {arr->v.arr.data, 0, arr->v.arr.nbytes, err};
    for (uint64_t i = 0; i < arr->v.arr.count; i++) {
        brisk_status st = read_string(&c, BRISK_GGUF_MAX_STRING, &out[i]);
        if (st) {
            brisk_error_prefix(err, "element %" PRIu64, i);
            return st;
        }
    }
    return BRISK_OK;
}

brisk_status brisk_gguf_value_at(const brisk_gguf_value *arr, uint64_t i, brisk_gguf_value *out, brisk_error *err) {
    if (arr->type != BRISK_GGUF_ARRAY)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "value_at: a %s value is not an array",
                          brisk_gguf_type_name(arr->type));
    if (i >= arr->v.arr.count)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "value_at: index %" PRIu64 " out of range (count %" PRIu64 ")",
                          i, arr->v.arr.count);
    brisk_gguf_type et = arr->v.arr.elem_type;
    size_t size = brisk_gguf_type_size(et);
    if (size) {
        if ((uint64_t)arr->v.arr.nbytes / size <= i)
            return brisk_fail(err, BRISK_ERR_FORMAT, "value_at: element %" PRIu64 " past the array's %zu bytes", i,
                              arr->v.arr.nbytes);
        memset(out, 0, sizeof *out);
        decode_scalar(et, arr->v.arr.data + (size_t)i * size, out);
        return BRISK_OK;
    }
    /* variable-size elements: walk to element i */
    cursor c = {arr->v.arr.data, 0, arr->v.arr.nbytes, err};
    for (uint64_t k = 0;; k++) {
        brisk_status st = read_value(&c, et, BRISK_GGUF_MAX_DEPTH, out);
        if (st) {
            brisk_error_prefix(err, "element %" PRIu64, k);
            return st;
        }
        if (k == i) return BRISK_OK;
    }
}

brisk_status brisk_gguf_value_next(const brisk_gguf_value *arr, size_t *offset, brisk_gguf_value *out, brisk_error *err) {
    if (arr->type != BRISK_GGUF_ARRAY)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "value_next: a %s value is not an array", brisk_gguf_type_name(arr->type));
    if (*offset >= arr->v.arr.nbytes)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "value_next: offset %zu is past the array's %zu bytes", *offset, arr->v.arr.nbytes);
    cursor c = {arr->v.arr.data, *offset, arr->v.arr.nbytes, err};
    brisk_status st = read_value(&c, arr->v.arr.elem_type, BRISK_GGUF_MAX_DEPTH, out);
    if (st) return st;
    *offset = c.pos;
    return BRISK_OK;
}
