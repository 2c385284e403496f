/* gguf_write: the GGUF v3 writer.
 *
 * Metadata is kept pre-encoded (type tag + payload, GGUF byte order) in the
 * order keys were first set; setting a key again replaces its value in place.
 * Tensors are copied at add time (or borrowed). Writing lays the file out as
 * ggml does: header, kvs, tensor infos, zero padding to the alignment, then
 * each tensor's data padded to the alignment (no padding when there are no
 * tensors). The alignment is
 * general.alignment when set, else 32; a writer created with another
 * alignment records it as general.alignment so readers agree. */
#include "gguf/gguf.h"
#include "gguf/gguf_impl.h"
#include "quant/quant.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct wkv {
    char *key;          /* owned, NUL-terminated; key_len bytes (may hold NULs if copied) */
    size_t key_len;
    uint8_t *val;       /* owned: type tag (4) + payload */
    size_t val_len;
} wkv;

typedef struct wtensor {
    char *name;         /* owned */
    size_t name_len;
    uint32_t type, n_dims;
    int64_t ne[BRISK_GGUF_MAX_DIMS];
    const void *data;   /* owned (== owned) or borrowed */
    void *owned;
    size_t nbytes;
} wtensor;

struct brisk_gguf_writer {
    uint32_t alignment;
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
};

/* ---- a growable byte buffer ------------------------------------------------------ */

typedef struct bytes {
    uint8_t *p;
    size_t len, cap;
    bool oom;           /* an append failed; the buffer is unusable */
} bytes;

static void put(bytes *b, const void *src, size_t n) {
    if (b->oom || n == 0) return;
    size_t need;
    if (!brisk_add_size(b->len, n, &need)) {
        b->oom = true;
        return;
    }
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < need) {
            if (!brisk_mul_size(cap, 2, &cap)) {
                cap = need;
                break;
            }
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}
static void put_u8(bytes *b, uint8_t v) { put(b, &v, 1); }
static void put_u16(bytes *b, uint16_t v) {
    uint8_t e[2];
    brisk_gguf_wr16(e, v);
    put(b, e, 2);
}
static void put_u32(bytes *b, uint32_t v) {
    uint8_t e[4];
    brisk_gguf_wr32(e, v);
    put(b, e, 4);
}
static void put_u64(bytes *b, uint64_t v) {
    uint8_t e[8];
    brisk_gguf_wr64(e, v);
    put(b, e, 8);
}
static void put_str(bytes *b, const char *s, size_t n) {
    put_u64(b, n);
    put(b, s, n);
}

/* ---- writer object ----------------------------------------------------------------- */

brisk_status brisk_gguf_writer_init(brisk_gguf_writer **out, uint32_t alignment, brisk_error *err) {
    *out = NULL;
    if (alignment == 0) alignment = BRISK_GGUF_DEFAULT_ALIGNMENT;
    if (!brisk_gguf_is_pow2(alignment))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "gguf writer: alignment %" PRIu32 " is not a power of two",
                          alignment);
    brisk_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate the GGUF writer");
    w->alignment = BRISK_GGUF_DEFAULT_ALIGNMENT;
    if (alignment != BRISK_GGUF_DEFAULT_ALIGNMENT) {
        brisk_status st = brisk_gguf_writer_set_u32(w, BRISK_GGUF_KEY_ALIGNMENT, alignment);
        if (st) {
            brisk_gguf_writer_free(w);
            return brisk_fail(err, st, "cannot record the alignment");
        }
    }
    *out = w;
    return BRISK_OK;
}

void brisk_gguf_writer_free(brisk_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].owned);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

/* Store an encoded value under key (replacing an earlier one); takes ownership
 * of val->p on success and frees it on failure. */
static brisk_status set_encoded(brisk_gguf_writer *w, const char *key, size_t key_len, bytes *val) {
    brisk_status st = BRISK_OK;
    if (val->oom) {
        st = BRISK_ERR_NOMEM;
        goto fail;
    }
    if (key_len == 0) {
        st = BRISK_ERR_INVALID_ARG;
        goto fail;
    }
    bool is_align = key_len == strlen(BRISK_GGUF_KEY_ALIGNMENT) && memcmp(key, BRISK_GGUF_KEY_ALIGNMENT, key_len) == 0;
    uint32_t align = 0;
    if (is_align) {
        /* readers reject anything else: refuse to write an unreadable file */
        if (val->len != 8 || brisk_gguf_rd32(val->p) != BRISK_GGUF_UINT32 ||
            !brisk_gguf_is_pow2(align = brisk_gguf_rd32(val->p + 4))) {
            st = BRISK_ERR_INVALID_ARG;
            goto fail;
        }
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (w->kv[i].key_len == key_len && memcmp(w->kv[i].key, key, key_len) == 0) {
            free(w->kv[i].val);
            w->kv[i].val = val->p;
            w->kv[i].val_len = val->len;
            if (is_align) w->alignment = align;
            return BRISK_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        wkv *kv = cap < SIZE_MAX / sizeof *kv ? realloc(w->kv, cap * sizeof *kv) : NULL;
        if (!kv) {
            st = BRISK_ERR_NOMEM;
            goto fail;
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = malloc(key_len + 1);
    if (!k) {
        st = BRISK_ERR_NOMEM;
        goto fail;
    }
    memcpy(k, key, key_len);
    k[key_len] = 0;
    w->kv[w->n_kv++] = (wkv){k, key_len, val->p, val->len};
    if (is_align) w->alignment = align;
    return BRISK_OK;
fail:
    free(val->p);
    val->p = NULL;
    return st;
}

static brisk_status set_scalar(brisk_gguf_writer *w, const char *key, brisk_gguf_type t, uint64_t bits) {
    if (!w || !key) return BRISK_ERR_INVALID_ARG;
    bytes b = {0};
    put_u32(&b, (uint32_t)t);
    switch (brisk_gguf_type_size(t)) {
    case 1: put_u8(&b, (uint8_t)bits); break;
    case 2: put_u16(&b, (uint16_t)bits); break;
    case 4: put_u32(&b, (uint32_t)bits); break;
    default: put_u64(&b, bits); break;
    }
    return set_encoded(w, key, strlen(key), &b);
}

brisk_status brisk_gguf_writer_set_u32(brisk_gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, BRISK_GGUF_UINT32, v);
}
brisk_status brisk_gguf_writer_set_i32(brisk_gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, BRISK_GGUF_INT32, (uint32_t)v);
}
brisk_status brisk_gguf_writer_set_u64(brisk_gguf_writer *w, const char *key, uint64_t v) {
    return set_scalar(w, key, BRISK_GGUF_UINT64, v);
}
brisk_status brisk_gguf_writer_set_f32(brisk_gguf_writer *w, const char *key, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return set_scalar(w, key, BRISK_GGUF_FLOAT32, bits);
}
brisk_status brisk_gguf_writer_set_bool(brisk_gguf_writer *w, const char *key, bool v) {
    return set_scalar(w, key, BRISK_GGUF_BOOL, v ? 1 : 0);
}
brisk_status brisk_gguf_writer_set_str(brisk_gguf_writer *w, const char *key, const char *v) {
    if (!w || !key || !v) return BRISK_ERR_INVALID_ARG;
    size_t n = strlen(v);
    if (n > BRISK_GGUF_MAX_STRING) return BRISK_ERR_INVALID_ARG;
    bytes b = {0};
    put_u32(&b, BRISK_GGUF_STRING);
    put_str(&b, v, n);
    return set_encoded(w, key, strlen(key), &b);
}

/* Encode one native element of a scalar array. */
static void put_native(bytes *b, brisk_gguf_type t, const void *data, uint64_t i) {
    switch (t) {
    case BRISK_GGUF_UINT8:
    case BRISK_GGUF_INT8: put_u8(b, ((const uint8_t *)data)[i]); break;
    case BRISK_GGUF_BOOL: put_u8(b, ((const bool *)data)[i] ? 1 : 0); break;
    case BRISK_GGUF_UINT16:
    case BRISK_GGUF_INT16: put_u16(b, ((const uint16_t *)data)[i]); break;
    case BRISK_GGUF_UINT32:
    case BRISK_GGUF_INT32: put_u32(b, ((const uint32_t *)data)[i]); break;
    case BRISK_GGUF_FLOAT32: {
        uint32_t bits;
        memcpy(&bits, (const float *)data + i, sizeof bits);
        put_u32(b, bits);
        break;
    }
    case BRISK_GGUF_UINT64:
    case BRISK_GGUF_INT64: put_u64(b, ((const uint64_t *)data)[i]); break;
    case BRISK_GGUF_FLOAT64: {
        uint64_t bits;
        memcpy(&bits, (const double *)data + i, sizeof bits);
        put_u64(b, bits);
        break;
    }
    default: BRISK_ASSERT(!"put_native: not a scalar type");
    }
}

brisk_status brisk_gguf_writer_set_arr(brisk_gguf_writer *w, const char *key, brisk_gguf_type elem_type,
                                       const void *data, uint64_t count) {
    if (!w || !key || (count && !data)) return BRISK_ERR_INVALID_ARG;
    if ((unsigned)elem_type >= BRISK_GGUF_TYPE_COUNT || elem_type == BRISK_GGUF_ARRAY) return BRISK_ERR_INVALID_ARG;
    if (count > SIZE_MAX / 8) return BRISK_ERR_INVALID_ARG;
    bytes b = {0};
    put_u32(&b, BRISK_GGUF_ARRAY);
    put_u32(&b, (uint32_t)elem_type);
    put_u64(&b, count);
    for (uint64_t i = 0; i < count && !b.oom; i++) {
        if (elem_type == BRISK_GGUF_STRING) {
            const char *s = ((const char *const *)data)[i];
            size_t n = s ? strlen(s) : 0;
            if (!s || n > BRISK_GGUF_MAX_STRING) {
                free(b.p);
                return BRISK_ERR_INVALID_ARG;
            }
            put_str(&b, s, n);
        } else {
            put_native(&b, elem_type, data, i);
        }
    }
    return set_encoded(w, key, strlen(key), &b);
}

/* Append value v's payload (no type tag) to b, validating it. depth_left: how
 * many levels of arrays may still open (as in the reader). */
static brisk_status put_value(bytes *b, const brisk_gguf_value *v, int depth_left, brisk_error *err) {
    uint64_t u = v->v.u64;
    int64_t s = v->v.i64;
    double f = v->v.f64;
    switch (v->type) {
    case BRISK_GGUF_UINT8: if (u > UINT8_MAX) goto range; put_u8(b, (uint8_t)u); break;
    case BRISK_GGUF_UINT16: if (u > UINT16_MAX) goto range; put_u16(b, (uint16_t)u); break;
    case BRISK_GGUF_UINT32: if (u > UINT32_MAX) goto range; put_u32(b, (uint32_t)u); break;
    case BRISK_GGUF_UINT64: put_u64(b, u); break;
    case BRISK_GGUF_BOOL: if (u > 1) goto range; put_u8(b, (uint8_t)u); break;
    case BRISK_GGUF_INT8: if (s < INT8_MIN || s > INT8_MAX) goto range; put_u8(b, (uint8_t)(int8_t)s); break;
    case BRISK_GGUF_INT16: if (s < INT16_MIN || s > INT16_MAX) goto range; put_u16(b, (uint16_t)(int16_t)s); break;
    case BRISK_GGUF_INT32: if (s < INT32_MIN || s > INT32_MAX) goto range; put_u32(b, (uint32_t)(int32_t)s); break;
    case BRISK_GGUF_INT64: put_u64(b, (uint64_t)s); break;
    case BRISK_GGUF_FLOAT32: {
        if (isfinite(f) && fabs(f) > FLT_MAX) goto range;
        float x = (float)f;
        uint32_t bits;
        memcpy(&bits, &x, sizeof bits);
        put_u32(b, bits);
        break;
    }
    case BRISK_GGUF_FLOAT64: {
        uint64_t bits;
        memcpy(&bits, &f, sizeof bits);
        put_u64(b, bits);
        break;
    }
    case BRISK_GGUF_STRING:
        if (v->v.str.len > BRISK_GGUF_MAX_STRING || (v->v.str.len && !v->v.str.ptr))
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "string of %zu bytes is NULL or over the cap",
                              v->v.str.len);
        put_str(b, v->v.str.ptr, v->v.str.len);
        break;
    case BRISK_GGUF_ARRAY: {
        if (depth_left <= 0)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "arrays nested deeper than %d levels", BRISK_GGUF_MAX_DEPTH);
        brisk_status st = brisk_gguf_check_elems(v->v.arr.elem_type, v->v.arr.count, v->v.arr.data,
                                                 v->v.arr.nbytes, depth_left - 1, err);
        if (st) return st == BRISK_ERR_FORMAT ? BRISK_ERR_INVALID_ARG : st;
        put_u32(b, (uint32_t)v->v.arr.elem_type);
        put_u64(b, v->v.arr.count);
        put(b, v->v.arr.data, v->v.arr.nbytes);
        break;
    }
    default:
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "unknown value type %u", (unsigned)v->type);
    }
    return BRISK_OK;
range:
    return brisk_fail(err, BRISK_ERR_INVALID_ARG, "value out of range for %s", brisk_gguf_type_name(v->type));
}

static brisk_status set_value_n(brisk_gguf_writer *w, const char *key, size_t key_len, const brisk_gguf_value *v,
                                brisk_error *err) {
    bytes b = {0};
    put_u32(&b, (uint32_t)v->type);
    brisk_status st = put_value(&b, v, BRISK_GGUF_MAX_DEPTH, err);
    if (st) {
        free(b.p);
        return st;
    }
    if ((st = set_encoded(w, key, key_len, &b)))
        return brisk_fail(err, st, st == BRISK_ERR_NOMEM ? "out of memory" : "invalid key or value");
    return BRISK_OK;
}

brisk_status brisk_gguf_writer_set_value(brisk_gguf_writer *w, const char *key, const brisk_gguf_value *v,
                                         brisk_error *err) {
    if (!w || !key || !v) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "gguf writer: NULL argument");
    brisk_status st = set_value_n(w, key, strlen(key), v, err);
    if (st) brisk_error_prefix(err, "key '%s'", key);
    return st;
}

brisk_status brisk_gguf_writer_set_arr_nested(brisk_gguf_writer *w, const char *key, const brisk_gguf_value *elems,
                                              uint64_t count, brisk_error *err) {
    if (!w || !key || (count && !elems)) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "gguf writer: NULL argument");
    bytes b = {0};
    put_u32(&b, BRISK_GGUF_ARRAY);
    put_u32(&b, BRISK_GGUF_ARRAY);
    put_u64(&b, count);
    for (uint64_t i = 0; i < count; i++) {
        brisk_status st = BRISK_OK;
        if (elems[i].type != BRISK_GGUF_ARRAY)
            st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "a %s value is not an array",
                            brisk_gguf_type_name(elems[i].type));
        else
            st = put_value(&b, &elems[i], BRISK_GGUF_MAX_DEPTH - 1, err);
        if (st) {
            free(b.p);
            brisk_error_prefix(err, "key '%s': element %" PRIu64, key, i);
            return st;
        }
    }
    brisk_status st = set_encoded(w, key, strlen(key), &b);
    if (st) return brisk_fail(err, st, "key '%s': %s", key, st == BRISK_ERR_NOMEM ? "out of memory" : "invalid key");
    return BRISK_OK;
}

brisk_status brisk_gguf_writer_copy_kv(brisk_gguf_writer *w, const brisk_gguf *g, brisk_error *err) {
    if (!w || !g) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "gguf writer: NULL argument");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const brisk_gguf_kv *kv = &g->kv[i];
        if (kv->key.len > 6 && memcmp(kv->key.ptr, "split.", 6) == 0)
            continue;   /* the file written is one file: a split model's split.* keys would send readers after shards */
        brisk_status st = set_value_n(w, kv->key.ptr, kv->key.len, &kv->value, err);
        if (st) {
            brisk_error_prefix(err, "copying kv %" PRIu64, i);
            return st;
        }
    }
    return BRISK_OK;
}

/* ---- tensors --------------------------------------------------------------------------- */

static brisk_status add_tensor(brisk_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                               const int64_t *ne, const void *data, size_t nbytes, bool copy, brisk_error *err) {
    if (!w || !name || !ne || (nbytes && !data))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "gguf writer: NULL argument");
    size_t name_len = strlen(name);
    if (name_len >= BRISK_GGUF_MAX_NAME)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tensor '%.60s...': name is %zu bytes, the cap is %d", name,
                          name_len, BRISK_GGUF_MAX_NAME - 1);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tensor '%s': added twice", name);
    const brisk_qtype_info *q = brisk_qtype_get(type);
    if (!q) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tensor '%s': unknown tensor type id %" PRIu32, name, type);
    if (n_dims < 1 || n_dims > BRISK_GGUF_MAX_DIMS)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tensor '%s': n_dims %" PRIu32 " not in 1..%d", name, n_dims,
                          BRISK_GGUF_MAX_DIMS);
    int64_t shape[BRISK_GGUF_MAX_DIMS] = {1, 1, 1, 1}, rows = 1, elems;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tensor '%s': dimension %" PRIu32 " is negative", name, d);
        shape[d] = ne[d];
        if (d > 0 && __builtin_mul_overflow(rows, ne[d], &rows))
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tensor '%s': element count overflows", name);
    }
    if (__builtin_mul_overflow(rows, shape[0], &elems))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tensor '%s': element count overflows", name);
    size_t row, want;
    if (shape[0] % q->block_elems != 0)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG,
                          "tensor '%s': row length %" PRId64 " is not a whole number of %s blocks", name, shape[0],
                          q->name);
    if (!brisk_qtype_row_bytes(type, shape[0], &row) || (uint64_t)rows > SIZE_MAX ||
        !brisk_mul_size(row, (size_t)rows, &want))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tensor '%s': byte size overflows", name);
    if (want != nbytes)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tensor '%s': %zu bytes given, shape and type need %zu", name,
                          nbytes, want);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 16;
        wtensor *t = cap < SIZE_MAX / sizeof *t ? realloc(w->t, cap * sizeof *t) : NULL;
        if (!t) return brisk_fail(err, BRISK_ERR_NOMEM, "tensor '%s': out of memory", name);
        w->t = t;
        w->cap_t = cap;
    }
    wtensor t = {0};
    t.name = malloc(name_len + 1);
    if (copy && nbytes) t.owned = malloc(nbytes);
    if (!t.name || (copy && nbytes && !t.owned)) {
        free(t.name);
        free(t.owned);
        return brisk_fail(err, BRISK_ERR_NOMEM, "tensor '%s': cannot allocate %zu bytes", name, nbytes);
    }
    memcpy(t.name, name, name_len + 1);
    t.name_len = name_len;
    t.type = type;
    t.n_dims = n_dims;
    memcpy(t.ne, shape, sizeof shape);
    if (copy && nbytes) memcpy(t.owned, data, nbytes);
    t.data = copy ? t.owned : data;
    t.nbytes = nbytes;
    w->t[w->n_t++] = t;
    return BRISK_OK;
}

brisk_status brisk_gguf_writer_add_tensor(brisk_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                          const int64_t *ne, const void *data, size_t nbytes, brisk_error *err) {
    return add_tensor(w, name, type, n_dims, ne, data, nbytes, true, err);
}

brisk_status brisk_gguf_writer_add_tensor_borrowed(brisk_gguf_writer *w, const char *name, uint32_t type,
                                                   uint32_t n_dims, const int64_t *ne, const void *data,
                                                   size_t nbytes, brisk_error *err) {
    return add_tensor(w, name, type, n_dims, ne, data, nbytes, false, err);
}

/* ---- output ------------------------------------------------------------------------------ */

/* Where bytes go: counted only, copied into a buffer, or written to a file. */
typedef struct sink {
    uint8_t *mem;       /* mem mode */
    FILE *f;            /* file mode */
    size_t pos;
    bool fail;          /* a write failed (errno saved) or the size overflowed */
    int err_no;
} sink;

static void emit(sink *s, const void *p, size_t n) {
    if (s->fail || n == 0) return;
    if (s->mem) memcpy(s->mem + s->pos, p, n);
    if (s->f && fwrite(p, 1, n, s->f) != n) {
        s->fail = true;
        s->err_no = errno ? errno : EIO;
        return;
    }
    if (!brisk_add_size(s->pos, n, &s->pos)) s->fail = true;
}

static void emit_pad(sink *s, size_t align) {
    static const uint8_t zeros[64] = {0};
    size_t pad = (align - s->pos % align) % align;
    while (pad > 0 && !s->fail) {
        size_t n = pad < sizeof zeros ? pad : sizeof zeros;
        emit(s, zeros, n);
        pad -= n;
    }
}

static void emit_u32(sink *s, uint32_t v) {
    uint8_t e[4];
    brisk_gguf_wr32(e, v);
    emit(s, e, 4);
}
static void emit_u64(sink *s, uint64_t v) {
    uint8_t e[8];
    brisk_gguf_wr64(e, v);
    emit(s, e, 8);
}

static size_t padded(size_t n, size_t align) { return n + (align - n % align) % align; }

/* The whole file through s. Offsets are the running sum of padded sizes; a
 * counting pass (mem = f = NULL) runs first, so size overflow shows there. */
static void emit_file(const brisk_gguf_writer *w, sink *s) {
    emit_u32(s, BRISK_GGUF_MAGIC);
    emit_u32(s, 3);
    emit_u64(s, w->n_t);
    emit_u64(s, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        emit_u64(s, w->kv[i].key_len);
        emit(s, w->kv[i].key, w->kv[i].key_len);
        emit(s, w->kv[i].val, w->kv[i].val_len);
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_t && !s->fail; i++) {
        const wtensor *t = &w->t[i];
        emit_u64(s, t->name_len);
        emit(s, t->name, t->name_len);
        emit_u32(s, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) emit_u64(s, (uint64_t)t->ne[d]);
        emit_u32(s, t->type);
        emit_u64(s, offset);
        size_t p = padded(t->nbytes, w->alignment);
        if (p < t->nbytes || __builtin_add_overflow(offset, p, &offset)) s->fail = true;
    }
    /* Unlike ggml's writer, no padding without tensors: readers only align the
     * data section when there is one, and a huge general.alignment copied from
     * another file would otherwise pad an empty data section to gigabytes. */
    if (w->n_t) emit_pad(s, w->alignment);
    for (size_t i = 0; i < w->n_t && !s->fail; i++) {
        emit(s, w->t[i].data, w->t[i].nbytes);
        emit_pad(s, w->alignment);
    }
}

static brisk_status file_size(const brisk_gguf_writer *w, size_t *total, brisk_error *err) {
    sink count = {0};
    emit_file(w, &count);
    if (count.fail) return brisk_fail(err, BRISK_ERR_CAPACITY, "gguf writer: file size overflows");
    *total = count.pos;
    return BRISK_OK;
}

brisk_status brisk_gguf_writer_write_mem(brisk_gguf_writer *w, uint8_t **out, size_t *len, brisk_error *err) {
    *out = NULL;
    *len = 0;
    if (!w) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "gguf writer: NULL argument");
    size_t total = 0;
    brisk_status st = file_size(w, &total, err);
    if (st) return st;
    uint8_t *buf = malloc(total ? total : 1);
    if (!buf) return brisk_fail(err, BRISK_ERR_NOMEM, "gguf writer: cannot allocate %zu bytes", total);
    sink s = {.mem = buf};
    emit_file(w, &s);
    BRISK_ASSERT(!s.fail && s.pos == total);
    *out = buf;
    *len = total;
    return BRISK_OK;
}

brisk_status brisk_gguf_writer_write(brisk_gguf_writer *w, const char *path, brisk_error *err) {
    if (!w || !path) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "gguf writer: NULL argument");
    size_t total = 0;
    brisk_status st = file_size(w, &total, err);
    if (st) return st;
    /* beside the target, then renamed: a reader never sees a half file */
    brisk_outfile o;
    if ((st = brisk_outfile_open(&o, path, total, 0644, err))) return st;
    sink s = {.f = o.f};
    errno = 0;
    emit_file(w, &s);
    if (s.fail) {
        st = brisk_fail(err, BRISK_ERR_IO, "%s: write failed: %s", o.tmp ? o.tmp : path, strerror(s.err_no));
        brisk_outfile_abort(&o);
        return st;
    }
    return brisk_outfile_commit(&o, err);
}
