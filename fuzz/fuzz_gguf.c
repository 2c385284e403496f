/* fuzz_gguf: libFuzzer target for the GGUF reader and writer.
 * Parses the input; on success exercises every getter and array accessor on
 * every kv, looks up every tensor, and rebuilds the file with the writer
 * (copy_kv + borrowed tensors), which must parse back to the same content.
 * On failure the message must be a non-empty single line. */
#include "fuzz_check.h"
#include "gguf/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

/* Walk an array value: fixed-size elements all, variable-size ones a few,
 * nested arrays recursively. */
static void walk_array(const brisk_gguf_value *arr, int depth) {
    FUZZ_CHECK(depth <= BRISK_GGUF_MAX_DEPTH);
    brisk_error err;
    brisk_gguf_value e;
    uint64_t n = arr->v.arr.count;
    brisk_gguf_type et = arr->v.arr.elem_type;
    switch (et) {
    case BRISK_GGUF_STRING: {
        brisk_str *s = malloc((size_t)(n ? n : 1) * sizeof *s);
        FUZZ_CHECK(s);
        FUZZ_CHECK(brisk_gguf_arr_strings(arr, s, &err) == BRISK_OK);
        for (uint64_t i = 0; i < n; i++) sink += s[i].len;
        if (n) {
            FUZZ_CHECK(brisk_gguf_value_at(arr, n - 1, &e, &err) == BRISK_OK);
            FUZZ_CHECK(e.v.str.len == s[n - 1].len && e.v.str.ptr == s[n - 1].ptr);
        }
        free(s);
        break;
    }
    case BRISK_GGUF_ARRAY:
        for (uint64_t i = 0; i < n && i < 4; i++) {
            FUZZ_CHECK(brisk_gguf_value_at(arr, i, &e, &err) == BRISK_OK);
            FUZZ_CHECK(e.type == BRISK_GGUF_ARRAY);
            walk_array(&e, depth + 1);
        }
        break;
    case BRISK_GGUF_FLOAT32:
    case BRISK_GGUF_FLOAT64:
        for (uint64_t i = 0; i < n; i++) sink += (uint64_t)(brisk_gguf_arr_float(arr, i) != 0);
        break;
    default:
        for (uint64_t i = 0; i < n; i++) sink += (uint64_t)brisk_gguf_arr_int(arr, i);
        break;
    }
    /* sequential access agrees with indexed access and ends exactly at the array's last byte */
    size_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        brisk_gguf_value f;
        FUZZ_CHECK(brisk_gguf_value_next(arr, &off, &f, &err) == BRISK_OK && f.type == et);
        if (i < 4) {
            FUZZ_CHECK(brisk_gguf_value_at(arr, i, &e, &err) == BRISK_OK);
            FUZZ_CHECK(et == BRISK_GGUF_STRING ? e.v.str.ptr == f.v.str.ptr && e.v.str.len == f.v.str.len
                                               : et == BRISK_GGUF_ARRAY ? e.v.arr.data == f.v.arr.data : e.v.u64 == f.v.u64);
        }
    }
    FUZZ_CHECK(off == arr->v.arr.nbytes);
    if (n) FUZZ_CHECK(brisk_gguf_value_at(arr, 0, &e, &err) == BRISK_OK && e.type == et);
    FUZZ_CHECK(brisk_gguf_value_at(arr, n, &e, &err) == BRISK_ERR_INVALID_ARG);
}

static void exercise_kv(const brisk_gguf *g, const brisk_gguf_kv *kv) {
    char key[256];
    if (kv->key.len < sizeof key && !memchr(kv->key.ptr, 0, kv->key.len)) {
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        FUZZ_CHECK(brisk_gguf_find(g, key) == kv);   /* keys are unique */
        brisk_error err;
        bool found;
        uint32_t u32;
        int64_t i64;
        float f32;
        bool b;
        brisk_str s;
        brisk_gguf_value a;
        brisk_gguf_get_u32(g, key, &u32, &found, &err);
        brisk_gguf_get_i64(g, key, &i64, &found, &err);
        brisk_gguf_get_f32(g, key, &f32, &found, &err);
        brisk_gguf_get_bool(g, key, &b, &found, &err);
        FUZZ_CHECK((brisk_gguf_get_str(g, key, &s, &found, &err) == BRISK_OK) ==
                   (kv->value.type == BRISK_GGUF_STRING));
        FUZZ_CHECK(found);
        if (kv->value.type == BRISK_GGUF_ARRAY)
            FUZZ_CHECK(brisk_gguf_get_arr(g, key, kv->value.v.arr.elem_type, &a, &found, &err) == BRISK_OK);
    }
    if (kv->value.type == BRISK_GGUF_ARRAY) walk_array(&kv->value, 1);
}

static bool same_value(const brisk_gguf_value *a, const brisk_gguf_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case BRISK_GGUF_STRING:
        return a->v.str.len == b->v.str.len && memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len) == 0;
    case BRISK_GGUF_ARRAY:
        return a->v.arr.elem_type == b->v.arr.elem_type && a->v.arr.count == b->v.arr.count &&
               a->v.arr.nbytes == b->v.arr.nbytes && memcmp(a->v.arr.data, b->v.arr.data, a->v.arr.nbytes) == 0;
    case BRISK_GGUF_FLOAT32:
    case BRISK_GGUF_FLOAT64:
        return memcmp(&a->v.f64, &b->v.f64, sizeof a->v.f64) == 0;
    default:
        return a->v.u64 == b->v.u64;
    }
}

/* Rebuild through the writer; the result must parse and carry the same content. */
static void rewrite(const brisk_gguf *g) {
    brisk_error err;
    brisk_gguf_writer *w = NULL;
    FUZZ_CHECK(brisk_gguf_writer_init(&w, 0, &err) == BRISK_OK);
    FUZZ_CHECK(brisk_gguf_writer_copy_kv(w, g, &err) == BRISK_OK);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const brisk_gguf_tensor *t = &g->tensors[i];
        char name[BRISK_GGUF_MAX_NAME];
        if (memchr(t->name.ptr, 0, t->name.len)) goto done;   /* not expressible as a C string */
        memcpy(name, t->name.ptr, t->name.len);
        name[t->name.len] = 0;
        FUZZ_CHECK(brisk_gguf_writer_add_tensor_borrowed(w, name, t->type, t->n_dims, t->ne, t->data,
                                                         (size_t)t->nbytes, &err) == BRISK_OK);
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    FUZZ_CHECK(brisk_gguf_writer_write_mem(w, &buf, &len, &err) == BRISK_OK);
    brisk_gguf *h = NULL;
    if (brisk_gguf_parse(buf, len, &h, &err) != BRISK_OK) {
        fprintf(stderr, "fuzz_gguf: rewritten file does not parse: %s\n", err.msg);
        abort();
    }
    FUZZ_CHECK(h->n_tensors == g->n_tensors && h->alignment == g->alignment);
    uint64_t j = 0;   /* copy_kv leaves out split.* keys: the rewrite is one file */
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const brisk_str k = g->kv[i].key;
        if (k.len > 6 && memcmp(k.ptr, "split.", 6) == 0) continue;
        FUZZ_CHECK(j < h->n_kv && same_value(&g->kv[i].value, &h->kv[j].value));
        j++;
    }
    FUZZ_CHECK(j == h->n_kv);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const brisk_gguf_tensor *a = &g->tensors[i], *b = &h->tensors[i];
        FUZZ_CHECK(a->nbytes == b->nbytes && a->type == b->type && memcmp(a->ne, b->ne, sizeof a->ne) == 0);
        FUZZ_CHECK(a->nbytes == 0 || memcmp(a->data, b->data, (size_t)a->nbytes) == 0);
    }
    brisk_gguf_close(h);
    free(buf);
done:
    brisk_gguf_writer_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_gguf *g = NULL;
    brisk_error err;
    err.msg[0] = 0;
    brisk_status st = brisk_gguf_parse(data, size, &g, &err);
    if (st != BRISK_OK) {
        FUZZ_CHECK(g == NULL && err.msg[0] != 0 && strchr(err.msg, '\n') == NULL);
        FUZZ_CHECK(st == BRISK_ERR_FORMAT || st == BRISK_ERR_UNSUPPORTED);
        return 0;
    }
    for (uint64_t i = 0; i < g->n_kv; i++) exercise_kv(g, &g->kv[i]);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const brisk_gguf_tensor *t = &g->tensors[i];
        char name[BRISK_GGUF_MAX_NAME];
        FUZZ_CHECK(t->name.len < sizeof name);
        FUZZ_CHECK((const uint8_t *)t->data >= g->buf + g->data_offset &&
                   (const uint8_t *)t->data + t->nbytes <= g->buf + g->size);
        if (t->nbytes) sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        if (memchr(t->name.ptr, 0, t->name.len)) continue;
        memcpy(name, t->name.ptr, t->name.len);
        name[t->name.len] = 0;
        FUZZ_CHECK(brisk_gguf_find_tensor(g, name) == t);
    }
    rewrite(g);
    brisk_gguf_close(g);
    return 0;
}
