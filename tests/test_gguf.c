/* test_gguf: the GGUF reader and writer.
 *  - writer -> reader round trip over every value type, nested and string
 *    arrays, tensors of several types, two alignments, path and memory output;
 *  - typed getters and array accessors, including their error messages;
 *  - every truncation of a valid file is rejected, byte flips never crash;
 *  - every committed corrupt file (tests/data/gguf-corrupt, see
 *    tests/gen_gguf_corrupt.py) is rejected with the expected message;
 *  - missing / directory / empty / non-GGUF paths;
 *  - every shared GGUF fixture parses and survives copy_kv + re-write;
 *  - the bundled model split into 2 and 3 files (gguf-split's layout) opens
 *    from its first file with byte-identical logits; each broken split is refused.
 * `test_gguf --write-seeds DIR` writes the valid files used as fuzz seeds. */
#include "test.h"

#include "brisk.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint8_t rnd8(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint8_t)(rng_state >> 24);
}

static bool has(const brisk_error *e, const char *needle) { return strstr(e->msg, needle) != NULL; }
static bool one_line(const brisk_error *e) { return strchr(e->msg, '\n') == NULL && e->msg[0] != 0; }

static void make_tmpdir(char *buf, size_t n) {
    snprintf(buf, n, "/tmp/brisk-test-gguf-XXXXXX");
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        exit(1);
    }
}

typedef struct tspec {
    const char *name;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[4];
} tspec;

static const tspec TENSORS[] = {
    {"token_embd.weight", BRISK_Q_F32, 2, {8, 3, 1, 1}},
    {"blk.0.attn_norm.weight", BRISK_Q_F16, 1, {64, 1, 1, 1}},
    {"blk.0.attn_q.weight", BRISK_Q_Q4_0, 2, {64, 2, 1, 1}},
    {"blk.0.ffn_up.weight", BRISK_Q_Q8_0, 4, {32, 1, 1, 2}},
    {"blk.0.ffn_down.weight", BRISK_Q_Q4_K, 2, {256, 2, 1, 1}},
    {"empty.weight", BRISK_Q_F32, 1, {0, 1, 1, 1}},
    {"output_norm.weight", BRISK_Q_BF16, 3, {3, 1, 5, 1}},
    {"blk.0.attn_k.weight", BRISK_Q_Q6_K, 1, {256, 1, 1, 1}},
};
#define N_TENSORS BRISK_ARRAY_LEN(TENSORS)

static size_t tspec_bytes(const tspec *t) {
    size_t row;
    BRISK_ASSERT(brisk_qtype_row_bytes(t->type, t->ne[0], &row));
    return row * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}

static const char *const STRINGS[] = {"hello", "", "w\xc3\xb6rld", "tab\tand\nnewline", "<s>"};

/* Writer 1: every scalar type, every array type, tensors. Data buffers are
 * owned by the caller (tensor_data[i]) so the reader's view can be checked. */
static brisk_gguf_writer *build_writer(uint32_t alignment, uint8_t **tensor_data) {
    brisk_error err = {0};
    brisk_gguf_writer *w = NULL;
    CHECK(brisk_gguf_writer_init(&w, alignment, &err) == BRISK_OK);
    if (!w) return NULL;
    CHECK(brisk_gguf_writer_set_str(w, "general.architecture", "llama") == BRISK_OK);
    CHECK(brisk_gguf_writer_set_u32(w, "llama.block_count", 2) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_i32(w, "test.i32", -123456) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_u64(w, "test.u64", UINT64_MAX) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_f32(w, "test.f32", 1.5f) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_bool(w, "test.bool", true) == BRISK_OK);
    /* the generic setter covers the types without a convenience setter */
    brisk_gguf_value v = {.type = BRISK_GGUF_UINT8, .v.u64 = 200};
    CHECK(brisk_gguf_writer_set_value(w, "test.u8", &v, &err) == BRISK_OK);
    v = (brisk_gguf_value){.type = BRISK_GGUF_INT8, .v.i64 = -100};
    CHECK(brisk_gguf_writer_set_value(w, "test.i8", &v, &err) == BRISK_OK);
    v = (brisk_gguf_value){.type = BRISK_GGUF_UINT16, .v.u64 = 65535};
    CHECK(brisk_gguf_writer_set_value(w, "test.u16", &v, &err) == BRISK_OK);
    v = (brisk_gguf_value){.type = BRISK_GGUF_INT16, .v.i64 = -32768};
    CHECK(brisk_gguf_writer_set_value(w, "test.i16", &v, &err) == BRISK_OK);
    v = (brisk_gguf_value){.type = BRISK_GGUF_INT64, .v.i64 = INT64_MIN};
    CHECK(brisk_gguf_writer_set_value(w, "test.i64", &v, &err) == BRISK_OK);
    v = (brisk_gguf_value){.type = BRISK_GGUF_FLOAT64, .v.f64 = -2.25e300};
    CHECK(brisk_gguf_writer_set_value(w, "test.f64", &v, &err) == BRISK_OK);
    v = (brisk_gguf_value){.type = BRISK_GGUF_STRING, .v.str = {"a\0b", 3}};
    CHECK(brisk_gguf_writer_set_value(w, "test.str_nul", &v, &err) == BRISK_OK);
    v = (brisk_gguf_value){.type = BRISK_GGUF_BOOL, .v.u64 = 0};
    CHECK(brisk_gguf_writer_set_value(w, "test.bool_false", &v, &err) == BRISK_OK);
    /* out-of-range scalars are refused */
    v = (brisk_gguf_value){.type = BRISK_GGUF_INT8, .v.i64 = 128};
    CHECK(brisk_gguf_writer_set_value(w, "test.bad", &v, &err) == BRISK_ERR_INVALID_ARG);
    CHECKF(has(&err, "key 'test.bad'") && has(&err, "out of range for i8"), "%s", err.msg);
    v = (brisk_gguf_value){.type = BRISK_GGUF_BOOL, .v.u64 = 2};
    CHECK(brisk_gguf_writer_set_value(w, "test.bad", &v, &err) == BRISK_ERR_INVALID_ARG);

    /* arrays of every scalar type (native layout) and strings */
    const uint8_t a_u8[] = {0, 1, 255};
    const int8_t a_i8[] = {-128, 0, 127};
    const uint16_t a_u16[] = {1, 65535};
    const int16_t a_i16[] = {-32768, 32767, -1};
    const uint32_t a_u32[] = {7, 0xffffffffu};
    const int32_t a_i32[] = {-1, 2, INT32_MIN};
    const float a_f32[] = {0.5f, -1e30f, 3.0f};
    const bool a_bool[] = {true, false, true, true};
    const uint64_t a_u64[] = {UINT64_MAX, 0};
    const int64_t a_i64[] = {INT64_MIN, INT64_MAX, -5};
    const double a_f64[] = {1e-300, -0.0};
    CHECK(brisk_gguf_writer_set_arr(w, "arr.u8", BRISK_GGUF_UINT8, a_u8, 3) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.i8", BRISK_GGUF_INT8, a_i8, 3) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.u16", BRISK_GGUF_UINT16, a_u16, 2) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.i16", BRISK_GGUF_INT16, a_i16, 3) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.u32", BRISK_GGUF_UINT32, a_u32, 2) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.i32", BRISK_GGUF_INT32, a_i32, 3) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.f32", BRISK_GGUF_FLOAT32, a_f32, 3) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.bool", BRISK_GGUF_BOOL, a_bool, 4) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.u64", BRISK_GGUF_UINT64, a_u64, 2) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.i64", BRISK_GGUF_INT64, a_i64, 3) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.f64", BRISK_GGUF_FLOAT64, a_f64, 2) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.str", BRISK_GGUF_STRING, STRINGS, BRISK_ARRAY_LEN(STRINGS)) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.empty", BRISK_GGUF_UINT32, NULL, 0) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr(w, "arr.bad", BRISK_GGUF_ARRAY, a_u8, 1) == BRISK_ERR_INVALID_ARG);
    /* setting a key again replaces it in place */
    CHECK(brisk_gguf_writer_set_u32(w, "llama.block_count", 3) == BRISK_OK);
    /* general.alignment must stay a u32 power of two */
    CHECK(brisk_gguf_writer_set_u32(w, "general.alignment", 48) == BRISK_ERR_INVALID_ARG);
    CHECK(brisk_gguf_writer_set_i32(w, "general.alignment", 64) == BRISK_ERR_INVALID_ARG);

    for (size_t i = 0; i < N_TENSORS; i++) {
        const tspec *t = &TENSORS[i];
        size_t n = tspec_bytes(t);
        tensor_data[i] = malloc(n ? n : 1);
        for (size_t k = 0; k < n; k++) tensor_data[i][k] = rnd8();
        brisk_status st = (i % 2) ? brisk_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne,
                                                                 tensor_data[i], n, &err)
                                  : brisk_gguf_writer_add_tensor_borrowed(w, t->name, t->type, t->n_dims, t->ne,
                                                                          tensor_data[i], n, &err);
        CHECKF(st == BRISK_OK, "%s", err.msg);
    }
    /* writer-side tensor validation */
    int64_t ne[4] = {33, 1, 1, 1};
    CHECK(brisk_gguf_writer_add_tensor(w, "bad", BRISK_Q_Q4_0, 1, ne, tensor_data[0], 18, &err) ==
          BRISK_ERR_INVALID_ARG);
    CHECKF(has(&err, "tensor 'bad'") && has(&err, "Q4_0 blocks"), "%s", err.msg);
    ne[0] = 8;
    CHECK(brisk_gguf_writer_add_tensor(w, "bad", BRISK_Q_F32, 1, ne, tensor_data[0], 31, &err) ==
          BRISK_ERR_INVALID_ARG);
    CHECKF(has(&err, "31 bytes given") && has(&err, "need 32"), "%s", err.msg);
    CHECK(brisk_gguf_writer_add_tensor(w, TENSORS[0].name, BRISK_Q_F32, 1, ne, tensor_data[0], 32, &err) ==
          BRISK_ERR_INVALID_ARG);
    CHECKF(has(&err, "added twice"), "%s", err.msg);
    CHECK(brisk_gguf_writer_add_tensor(w, "bad", 1000, 1, ne, tensor_data[0], 32, &err) == BRISK_ERR_INVALID_ARG);
    CHECK(brisk_gguf_writer_add_tensor(w, "bad", BRISK_Q_F32, 5, ne, tensor_data[0], 32, &err) ==
          BRISK_ERR_INVALID_ARG);
    char long_name[80];
    memset(long_name, 'x', 64);
    long_name[64] = 0;
    CHECK(brisk_gguf_writer_add_tensor(w, long_name, BRISK_Q_F32, 1, ne, tensor_data[0], 32, &err) ==
          BRISK_ERR_INVALID_ARG);
    return w;
}

static void check_getters(const brisk_gguf *g) {
    brisk_error err = {0};
    bool found = false;
    uint32_t u32 = 0;
    int64_t i64 = 0;
    float f32 = 0;
    bool b = false;
    brisk_str s = {0};
    brisk_gguf_value a;

    CHECK(brisk_gguf_get_u32(g, "llama.block_count", &u32, &found, &err) == BRISK_OK && found && u32 == 3);
    CHECK(brisk_gguf_get_u32(g, "test.u8", &u32, &found, &err) == BRISK_OK && u32 == 200);
    CHECK(brisk_gguf_get_u32(g, "test.u16", &u32, &found, &err) == BRISK_OK && u32 == 65535);
    CHECK(brisk_gguf_get_u32(g, "test.i32", &u32, &found, &err) == BRISK_ERR_FORMAT);
    CHECKF(has(&err, "key 'test.i32'") && has(&err, "-123456 out of range for u32"), "%s", err.msg);
    CHECK(brisk_gguf_get_u32(g, "test.u64", &u32, &found, &err) == BRISK_ERR_FORMAT);
    CHECK(brisk_gguf_get_u32(g, "general.architecture", &u32, &found, &err) == BRISK_ERR_FORMAT);
    CHECKF(has(&err, "key 'general.architecture': expected an integer, found str"), "%s", err.msg);
    CHECK(brisk_gguf_get_u32(g, "arr.u32", &u32, &found, &err) == BRISK_ERR_FORMAT);
    CHECKF(has(&err, "found arr[u32]"), "%s", err.msg);
    u32 = 77;
    CHECK(brisk_gguf_get_u32(g, "missing.key", &u32, &found, &err) == BRISK_OK && !found && u32 == 77);
    CHECK(brisk_gguf_get_u32(g, "missing.key", &u32, NULL, &err) == BRISK_OK && u32 == 77);

    CHECK(brisk_gguf_get_i64(g, "test.i64", &i64, &found, &err) == BRISK_OK && i64 == INT64_MIN);
    CHECK(brisk_gguf_get_i64(g, "test.i8", &i64, &found, &err) == BRISK_OK && i64 == -100);
    CHECK(brisk_gguf_get_i64(g, "test.i16", &i64, &found, &err) == BRISK_OK && i64 == -32768);
    CHECK(brisk_gguf_get_i64(g, "test.u64", &i64, &found, &err) == BRISK_ERR_FORMAT);
    CHECKF(has(&err, "18446744073709551615 out of range for i64"), "%s", err.msg);
    CHECK(brisk_gguf_get_i64(g, "test.bool", &i64, &found, &err) == BRISK_ERR_FORMAT);

    CHECK(brisk_gguf_get_f32(g, "test.f32", &f32, &found, &err) == BRISK_OK && f32 == 1.5f);
    CHECK(brisk_gguf_get_f32(g, "test.f64", &f32, &found, &err) == BRISK_ERR_FORMAT);
    CHECKF(has(&err, "out of range for f32"), "%s", err.msg);
    CHECK(brisk_gguf_get_f32(g, "test.u8", &f32, &found, &err) == BRISK_ERR_FORMAT);

    CHECK(brisk_gguf_get_bool(g, "test.bool", &b, &found, &err) == BRISK_OK && b);
    CHECK(brisk_gguf_get_bool(g, "test.bool_false", &b, &found, &err) == BRISK_OK && !b);
    CHECK(brisk_gguf_get_bool(g, "test.u8", &b, &found, &err) == BRISK_ERR_FORMAT);

    CHECK(brisk_gguf_get_str(g, "general.architecture", &s, &found, &err) == BRISK_OK && brisk_str_eq(s, "llama"));
    CHECK(brisk_gguf_get_str(g, "test.str_nul", &s, &found, &err) == BRISK_OK && s.len == 3 &&
          memcmp(s.ptr, "a\0b", 3) == 0);
    CHECK(brisk_gguf_get_str(g, "test.u8", &s, &found, &err) == BRISK_ERR_FORMAT);

    /* arrays */
    CHECK(brisk_gguf_get_arr(g, "arr.u8", BRISK_GGUF_UINT8, &a, &found, &err) == BRISK_OK && a.v.arr.count == 3);
    CHECK(brisk_gguf_arr_int(&a, 2) == 255 && brisk_gguf_arr_float(&a, 1) == 1.0);
    CHECK(brisk_gguf_get_arr(g, "arr.u8", BRISK_GGUF_INT8, &a, &found, &err) == BRISK_ERR_FORMAT);
    CHECKF(has(&err, "key 'arr.u8': expected arr[i8], found arr[u8]"), "%s", err.msg);
    CHECK(brisk_gguf_get_arr(g, "arr.i8", BRISK_GGUF_INT8, &a, &found, &err) == BRISK_OK);
    CHECK(brisk_gguf_arr_int(&a, 0) == -128 && brisk_gguf_arr_int(&a, 2) == 127);
    CHECK(brisk_gguf_get_arr(g, "arr.u16", BRISK_GGUF_UINT16, &a, &found, &err) == BRISK_OK);
    CHECK(brisk_gguf_arr_int(&a, 1) == 65535);
    CHECK(brisk_gguf_get_arr(g, "arr.i16", BRISK_GGUF_INT16, &a, &found, &err) == BRISK_OK);
    CHECK(brisk_gguf_arr_int(&a, 0) == -32768 && brisk_gguf_arr_int(&a, 2) == -1);
    CHECK(brisk_gguf_get_arr(g, "arr.u32", BRISK_GGUF_UINT32, &a, &found, &err) == BRISK_OK);
    CHECK(brisk_gguf_arr_int(&a, 1) == 0xffffffffll);
    CHECK(brisk_gguf_get_arr(g, "arr.i32", BRISK_GGUF_INT32, &a, &found, &err) == BRISK_OK);
    CHECK(brisk_gguf_arr_int(&a, 2) == INT32_MIN);
    CHECK(brisk_gguf_get_arr(g, "arr.f32", BRISK_GGUF_FLOAT32, &a, &found, &err) == BRISK_OK);
    CHECK(brisk_gguf_arr_float(&a, 0) == 0.5 && brisk_gguf_arr_float(&a, 1) == (double)-1e30f);
    CHECK(brisk_gguf_get_arr(g, "arr.bool", BRISK_GGUF_BOOL, &a, &found, &err) == BRISK_OK);
    CHECK(brisk_gguf_arr_int(&a, 0) == 1 && brisk_gguf_arr_int(&a, 1) == 0 && a.v.arr.count == 4);
    CHECK(brisk_gguf_get_arr(g, "arr.u64", BRISK_GGUF_UINT64, &a, &found, &err) == BRISK_OK);
    CHECK((uint64_t)brisk_gguf_arr_int(&a, 0) == UINT64_MAX);
    CHECK(brisk_gguf_get_arr(g, "arr.i64", BRISK_GGUF_INT64, &a, &found, &err) == BRISK_OK);
    CHECK(brisk_gguf_arr_int(&a, 0) == INT64_MIN && brisk_gguf_arr_int(&a, 1) == INT64_MAX);
    CHECK(brisk_gguf_get_arr(g, "arr.f64", BRISK_GGUF_FLOAT64, &a, &found, &err) == BRISK_OK);
    CHECK(brisk_gguf_arr_float(&a, 0) == 1e-300 && signbit(brisk_gguf_arr_float(&a, 1)));
    brisk_gguf_value e;
    CHECK(brisk_gguf_value_at(&a, 1, &e, &err) == BRISK_OK && e.type == BRISK_GGUF_FLOAT64 && e.v.f64 == 0.0);
    CHECK(brisk_gguf_value_at(&a, 2, &e, &err) == BRISK_ERR_INVALID_ARG);
    CHECK(brisk_gguf_get_arr(g, "arr.empty", BRISK_GGUF_UINT32, &a, &found, &err) == BRISK_OK && a.v.arr.count == 0);

    CHECK(brisk_gguf_get_arr(g, "arr.str", BRISK_GGUF_STRING, &a, &found, &err) == BRISK_OK);
    brisk_str strs[BRISK_ARRAY_LEN(STRINGS)];
    CHECK(a.v.arr.count == BRISK_ARRAY_LEN(STRINGS));
    CHECK(brisk_gguf_arr_strings(&a, strs, &err) == BRISK_OK);
    for (size_t i = 0; i < BRISK_ARRAY_LEN(STRINGS); i++) {
        CHECKF(brisk_str_eq(strs[i], STRINGS[i]), "string %zu", i);
        CHECK(brisk_gguf_value_at(&a, i, &e, &err) == BRISK_OK && e.type == BRISK_GGUF_STRING &&
              brisk_str_eq(e.v.str, STRINGS[i]));
    }
    brisk_gguf_value not_str;
    CHECK(brisk_gguf_get_arr(g, "arr.u8", BRISK_GGUF_UINT8, &not_str, &found, &err) == BRISK_OK);
    CHECK(brisk_gguf_arr_strings(&not_str, strs, &err) == BRISK_ERR_INVALID_ARG);
    const brisk_gguf_kv *kv = brisk_gguf_find(g, "test.u8");
    CHECK(kv && brisk_gguf_value_at(&kv->value, 0, &e, &err) == BRISK_ERR_INVALID_ARG);
}

static void check_tensors(const brisk_gguf *g, uint8_t **tensor_data, uint32_t alignment) {
    CHECK(g->n_tensors == N_TENSORS);
    CHECK(g->alignment == alignment);
    CHECK(g->data_offset % alignment == 0);
    for (size_t i = 0; i < N_TENSORS; i++) {
        const tspec *t = &TENSORS[i];
        const brisk_gguf_tensor *x = brisk_gguf_find_tensor(g, t->name);
        CHECKF(x != NULL, "tensor %s", t->name);
        if (!x) continue;
        CHECK(x == &g->tensors[i]);   /* file order kept */
        CHECK(x->type == t->type && x->n_dims == t->n_dims);
        CHECK(memcmp(x->ne, t->ne, sizeof x->ne) == 0);
        CHECK(x->nbytes == tspec_bytes(t));
        CHECK(x->offset % alignment == 0);
        CHECK(((const uint8_t *)x->data - g->buf) % alignment == 0);
        CHECKF(x->nbytes == 0 || memcmp(x->data, tensor_data[i], x->nbytes) == 0, "tensor %s data", t->name);
    }
    CHECK(brisk_gguf_find_tensor(g, "nope") == NULL);
    CHECK(brisk_gguf_find_tensor(g, "") == NULL);
}

/* Every prefix shorter than the end of the last tensor's data is rejected. */
static void check_truncations(const uint8_t *buf, size_t len, const brisk_gguf *g) {
    size_t end = g->data_offset;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        end = BRISK_MAX(end, (size_t)(g->data_offset + g->tensors[i].offset + g->tensors[i].nbytes));
    int bad = 0;
    for (size_t n = 0; n < len; n++) {
        brisk_gguf *h = NULL;
        brisk_error err = {0};
        brisk_status st = brisk_gguf_parse(buf, n, &h, &err);
        bool ok = (n < end) ? (st == BRISK_ERR_FORMAT && h == NULL && one_line(&err)) : (st == BRISK_OK);
        if (!ok && bad++ < 5) fprintf(stderr, "truncation at %zu of %zu (end %zu): %d %s\n", n, len, end, st, err.msg);
        brisk_gguf_close(h);
    }
    CHECK(bad == 0);
}

/* Flip bytes of the header: must never crash (ASan watches), may or may not parse. */
static void check_flips(const uint8_t *buf, size_t len, size_t header_len) {
    uint8_t *copy = malloc(len);
    memcpy(copy, buf, len);
    for (size_t i = 0; i < header_len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            copy[i] ^= (uint8_t)(1u << bit);
            brisk_gguf *h = NULL;
            brisk_error err = {0};
            brisk_status st = brisk_gguf_parse(copy, len, &h, &err);
            CHECK((st == BRISK_OK) == (h != NULL));
            if (st != BRISK_OK && !one_line(&err)) CHECKF(false, "flip %zu: message '%s'", i, err.msg);
            brisk_gguf_close(h);
            copy[i] ^= (uint8_t)(1u << bit);
        }
    }
    free(copy);
}

/* Writer 2: nested arrays from writer 1's parsed values, plus copy_kv. */
static void check_nested(const brisk_gguf *g1, const char *tmpdir, const char *seed_dir) {
    brisk_error err = {0};
    brisk_gguf_writer *w = NULL;
    CHECK(brisk_gguf_writer_init(&w, 0, &err) == BRISK_OK);
    CHECK(brisk_gguf_writer_copy_kv(w, g1, &err) == BRISK_OK);
    const char *keys[] = {"arr.u8", "arr.str", "arr.empty", "arr.f64"};
    brisk_gguf_value elems[4];
    for (int i = 0; i < 4; i++) elems[i] = brisk_gguf_find(g1, keys[i])->value;
    CHECK(brisk_gguf_writer_set_arr_nested(w, "nested.2", elems, 4, &err) == BRISK_OK);
    brisk_gguf_value scalar = {.type = BRISK_GGUF_UINT8};
    CHECK(brisk_gguf_writer_set_arr_nested(w, "nested.bad", &scalar, 1, &err) == BRISK_ERR_INVALID_ARG);
    CHECKF(has(&err, "key 'nested.bad': element 0"), "%s", err.msg);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(brisk_gguf_writer_write_mem(w, &buf, &len, &err) == BRISK_OK);
    brisk_gguf *g2 = NULL;
    CHECKF(brisk_gguf_parse(buf, len, &g2, &err) == BRISK_OK, "%s", err.msg);
    if (!g2) goto done;
    CHECK(g2->n_kv == g1->n_kv + 1 && g2->n_tensors == 0);
    /* copy_kv kept every value byte for byte, in order */
    for (uint64_t i = 0; i < g1->n_kv; i++) {
        const brisk_gguf_kv *a = &g1->kv[i], *b = &g2->kv[i];
        CHECK(a->key.len == b->key.len && memcmp(a->key.ptr, b->key.ptr, a->key.len) == 0);
        CHECK(a->value.type == b->value.type);
        if (a->value.type == BRISK_GGUF_ARRAY)
            CHECK(a->value.v.arr.nbytes == b->value.v.arr.nbytes && a->value.v.arr.count == b->value.v.arr.count &&
                  memcmp(a->value.v.arr.data, b->value.v.arr.data, a->value.v.arr.nbytes) == 0);
        else if (a->value.type == BRISK_GGUF_STRING)
            CHECK(a->value.v.str.len == b->value.v.str.len &&
                  memcmp(a->value.v.str.ptr, b->value.v.str.ptr, a->value.v.str.len) == 0);
        else
            CHECK(a->value.v.u64 == b->value.v.u64);
    }
    brisk_gguf_value n2, inner, e;
    bool found;
    CHECK(brisk_gguf_get_arr(g2, "nested.2", BRISK_GGUF_ARRAY, &n2, &found, &err) == BRISK_OK && found);
    CHECK(n2.v.arr.count == 4);
    CHECK(brisk_gguf_value_at(&n2, 1, &inner, &err) == BRISK_OK && inner.type == BRISK_GGUF_ARRAY &&
          inner.v.arr.elem_type == BRISK_GGUF_STRING && inner.v.arr.count == BRISK_ARRAY_LEN(STRINGS));
    CHECK(brisk_gguf_value_at(&inner, 3, &e, &err) == BRISK_OK && brisk_str_eq(e.v.str, STRINGS[3]));
    CHECK(brisk_gguf_value_at(&n2, 0, &inner, &err) == BRISK_OK && brisk_gguf_arr_int(&inner, 2) == 255);
    CHECK(brisk_gguf_value_at(&n2, 2, &inner, &err) == BRISK_OK && inner.v.arr.count == 0);
    CHECK(brisk_gguf_value_at(&n2, 3, &inner, &err) == BRISK_OK && brisk_gguf_arr_float(&inner, 0) == 1e-300);
    CHECK(brisk_gguf_value_at(&n2, 4, &inner, &err) == BRISK_ERR_INVALID_ARG);

    /* nest to the cap: depth 8 is written and read; depth 9 is refused */
    brisk_gguf_writer *w3 = NULL;
    CHECK(brisk_gguf_writer_init(&w3, 64, &err) == BRISK_OK);
    brisk_gguf_value level = n2;   /* 2 levels */
    uint8_t *bufs[8] = {0};
    brisk_gguf *gs[8] = {0};
    int depth = 2, k = 0;
    for (; depth < BRISK_GGUF_MAX_DEPTH && k < 8; depth++, k++) {
        brisk_gguf_writer *wk = NULL;
        size_t lk;
        CHECK(brisk_gguf_writer_init(&wk, 0, &err) == BRISK_OK);
        CHECK(brisk_gguf_writer_set_arr_nested(wk, "n", &level, 1, &err) == BRISK_OK);
        CHECK(brisk_gguf_writer_write_mem(wk, &bufs[k], &lk, &err) == BRISK_OK);
        CHECKF(brisk_gguf_parse(bufs[k], lk, &gs[k], &err) == BRISK_OK, "depth %d: %s", depth + 1, err.msg);
        brisk_gguf_writer_free(wk);
        if (!gs[k]) break;
        level = brisk_gguf_find(gs[k], "n")->value;
    }
    CHECK(depth == BRISK_GGUF_MAX_DEPTH);
    CHECK(brisk_gguf_writer_set_value(w3, "deep", &level, &err) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_arr_nested(w3, "too_deep", &level, 1, &err) == BRISK_ERR_INVALID_ARG);
    CHECKF(has(&err, "nested deeper than 8"), "%s", err.msg);
    /* a tampered array value is refused by the writer */
    brisk_gguf_value bad = brisk_gguf_find(g1, "arr.bool")->value;
    uint8_t bogus[4] = {1, 0, 9, 1};
    bad.v.arr.data = bogus;
    CHECK(brisk_gguf_writer_set_value(w3, "bad", &bad, &err) == BRISK_ERR_INVALID_ARG);
    CHECKF(has(&err, "key 'bad': element 2: bool value 9"), "%s", err.msg);
    bad.v.arr.nbytes = 3;
    CHECK(brisk_gguf_writer_set_value(w3, "bad", &bad, &err) == BRISK_ERR_INVALID_ARG);

    /* the path writer: same bytes as write_mem, alignment 64 kept */
    char path[512];
    snprintf(path, sizeof path, "%s/deep.gguf", tmpdir);
    CHECKF(brisk_gguf_writer_write(w3, path, &err) == BRISK_OK, "%s", err.msg);
    uint8_t *m = NULL;
    size_t ml = 0;
    CHECK(brisk_gguf_writer_write_mem(w3, &m, &ml, &err) == BRISK_OK);
    brisk_gguf *g3 = NULL;
    CHECKF(brisk_gguf_open(path, &g3, &err) == BRISK_OK, "%s", err.msg);
    CHECK(g3 && g3->size == ml && memcmp(g3->buf, m, ml) == 0 && g3->alignment == 64);
    brisk_gguf_close(g3);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0644);
    unlink(path);
    snprintf(path, sizeof path, "%s/no/such/dir/x.gguf", tmpdir);
    CHECK(brisk_gguf_writer_write(w3, path, &err) == BRISK_ERR_IO);
    CHECKF(has(&err, path) && one_line(&err), "%s", err.msg);
    if (seed_dir) {
        char seed[512];
        snprintf(seed, sizeof seed, "%s/valid-deep-align64.gguf", seed_dir);
        CHECKF(brisk_gguf_writer_write(w3, seed, &err) == BRISK_OK, "%s", err.msg);
        snprintf(seed, sizeof seed, "%s/valid-nested-align%u.gguf", seed_dir, g1->alignment);
        CHECKF(brisk_gguf_writer_write(w, seed, &err) == BRISK_OK, "%s", err.msg);
    }
    free(m);
    for (int i = 0; i < 8; i++) {
        brisk_gguf_close(gs[i]);
        free(bufs[i]);
    }
    brisk_gguf_writer_free(w3);
done:
    brisk_gguf_close(g2);
    free(buf);
    brisk_gguf_writer_free(w);
}

static void test_round_trip(uint32_t alignment, const char *tmpdir, const char *seed_dir) {
    uint8_t *tensor_data[N_TENSORS] = {0};
    brisk_gguf_writer *w = build_writer(alignment, tensor_data);
    if (!w) return;
    brisk_error err = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECKF(brisk_gguf_writer_write_mem(w, &buf, &len, &err) == BRISK_OK, "%s", err.msg);
    brisk_gguf *g = NULL;
    CHECKF(brisk_gguf_parse(buf, len, &g, &err) == BRISK_OK, "alignment %u: %s", alignment, err.msg);
    if (g) {
        uint32_t want = alignment ? alignment : BRISK_GGUF_DEFAULT_ALIGNMENT;
        CHECK(g->version == 3);
        check_getters(g);
        check_tensors(g, tensor_data, want);
        check_nested(g, tmpdir, seed_dir);
        if (!test_quick()) check_truncations(buf, len, g);
        check_flips(buf, len, g->data_offset);
        if (seed_dir) {
            char path[512];
            snprintf(path, sizeof path, "%s/valid-align%u.gguf", seed_dir, want);
            CHECKF(brisk_gguf_writer_write(w, path, &err) == BRISK_OK, "%s", err.msg);
        }
    }
    brisk_gguf_close(g);
    free(buf);
    brisk_gguf_writer_free(w);
    for (size_t i = 0; i < N_TENSORS; i++) free(tensor_data[i]);
}

/* A v2 file (same layout as v3) and a file with no tensors. */
static void test_small_files(void) {
    brisk_error err = {0};
    brisk_gguf_writer *w = NULL;
    CHECK(brisk_gguf_writer_init(&w, 0, &err) == BRISK_OK);
    CHECK(brisk_gguf_writer_set_str(w, "general.name", "x") == BRISK_OK);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(brisk_gguf_writer_write_mem(w, &buf, &len, &err) == BRISK_OK);
    brisk_gguf *g = NULL;
    CHECK(brisk_gguf_parse(buf, len, &g, &err) == BRISK_OK && g->n_tensors == 0 && g->n_kv == 1);
    brisk_gguf_close(g);
    buf[4] = 2;   /* version 2 */
    CHECK(brisk_gguf_parse(buf, len, &g, &err) == BRISK_OK && g->version == 2);
    brisk_gguf_close(g);
    free(buf);
    brisk_gguf_writer_free(w);
    /* header only: no kvs, no tensors */
    static const uint8_t minimal[24] = {'G', 'G', 'U', 'F', 3};
    CHECK(brisk_gguf_parse(minimal, sizeof minimal, &g, &err) == BRISK_OK && g->n_kv == 0);
    CHECK(brisk_gguf_find(g, "x") == NULL);
    brisk_gguf_close(g);
    CHECK(brisk_gguf_parse(NULL, 0, &g, &err) == BRISK_ERR_FORMAT && g == NULL);
    CHECK(brisk_gguf_writer_init(&w, 3, &err) == BRISK_ERR_INVALID_ARG && w == NULL);
    brisk_gguf_close(NULL);
    brisk_gguf_writer_free(NULL);
}

/* ---- corrupt corpus and file-level errors --------------------------------------- */

static void test_corrupt_corpus(void) {
    char dir[1024], table[1100];
    test_source("tests/data/gguf-corrupt", dir, sizeof dir);
    snprintf(table, sizeof table, "%s/expected.tsv", dir);
    FILE *f = fopen(table, "r");
    CHECKF(f != NULL, "cannot open %s", table);
    if (!f) return;
    char line[1024], listed[128][96];
    int n_listed = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (line[0] == '#' || line[0] == 0) continue;
        char *name = strtok(line, "\t"), *status = strtok(NULL, "\t"), *expect = strtok(NULL, "\t");
        CHECKF(name && status && expect, "bad table line");
        if (!name || !status || !expect) continue;
        if (n_listed < 128) snprintf(listed[n_listed++], sizeof listed[0], "%s", name);
        brisk_status want = strcmp(status, "unsupported") == 0 ? BRISK_ERR_UNSUPPORTED : BRISK_ERR_FORMAT;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        brisk_gguf *g = NULL;
        brisk_error err = {0};
        brisk_status st = brisk_gguf_open(path, &g, &err);
        CHECKF(st == want && g == NULL, "%s: status %d, want %d (%s)", name, st, want, err.msg);
        CHECKF(has(&err, expect), "%s: message '%s' lacks '%s'", name, err.msg, expect);
        CHECKF(has(&err, path) && one_line(&err), "%s: message '%s' should name the path on one line", name,
               err.msg);
        brisk_gguf_close(g);
        /* the in-memory parser agrees */
        uint8_t *bytes = NULL;
        size_t len = 0;
        if (brisk_file_read(path, &bytes, &len, &err) == BRISK_OK && len > 0) {
            brisk_error err2 = {0};
            CHECKF(brisk_gguf_parse(bytes, len, &g, &err2) == want && has(&err2, expect), "%s: parse: %s", name,
                   err2.msg);
            brisk_gguf_close(g);
        }
        free(bytes);
    }
    fclose(f);
    CHECK(n_listed >= 40);
    /* every committed file is in the table */
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 5, ".gguf") != 0) continue;
        bool in = false;
        for (int i = 0; i < n_listed; i++) in |= strcmp(listed[i], de->d_name) == 0;
        CHECKF(in, "%s is not listed in expected.tsv", de->d_name);
    }
    if (d) closedir(d);
}

static void test_file_errors(const char *tmpdir) {
    char path[512];
    brisk_gguf *g = NULL;
    brisk_error err = {0};
    snprintf(path, sizeof path, "%s/missing.gguf", tmpdir);
    CHECK(brisk_gguf_open(path, &g, &err) == BRISK_ERR_IO && g == NULL);
    CHECKF(has(&err, path) && has(&err, "No such file") && one_line(&err), "%s", err.msg);
    CHECK(brisk_gguf_open(tmpdir, &g, &err) == BRISK_ERR_IO);
    CHECKF(has(&err, tmpdir) && has(&err, "is a directory") && one_line(&err), "%s", err.msg);
    snprintf(path, sizeof path, "%s/empty.gguf", tmpdir);
    FILE *f = fopen(path, "wb");
    fclose(f);
    CHECK(brisk_gguf_open(path, &g, &err) == BRISK_ERR_FORMAT);
    CHECKF(has(&err, path) && has(&err, "empty file") && one_line(&err), "%s", err.msg);
    unlink(path);
    snprintf(path, sizeof path, "%s/text.gguf", tmpdir);
    f = fopen(path, "wb");
    fputs("{\"this\": \"is json\"}\n", f);
    fclose(f);
    CHECK(brisk_gguf_open(path, &g, &err) == BRISK_ERR_FORMAT);
    CHECKF(has(&err, path) && has(&err, "not a GGUF file (magic '{\"th'") && one_line(&err), "%s", err.msg);
    f = fopen(path, "wb");
    fputs("{\n", f);
    fclose(f);
    CHECK(brisk_gguf_open(path, &g, &err) == BRISK_ERR_FORMAT);
    CHECKF(has(&err, path) && has(&err, "not a GGUF file (2 bytes") && one_line(&err), "%s", err.msg);
    unlink(path);
}

/* ---- shared fixtures -------------------------------------------------------------- */

/* Parse, then rebuild through the writer (copy_kv + borrowed tensors) and
 * check the result carries the same metadata and tensor bytes. */
static void check_shared_file(const char *path) {
    brisk_gguf *g = NULL;
    brisk_error err = {0};
    brisk_status st = brisk_gguf_open(path, &g, &err);
    CHECKF(st == BRISK_OK, "%s", err.msg);
    if (st) return;
    brisk_str arch;
    bool found = false;
    CHECKF(brisk_gguf_get_str(g, "general.architecture", &arch, &found, &err) == BRISK_OK && found, "%s", path);
    brisk_gguf_writer *w = NULL;
    CHECK(brisk_gguf_writer_init(&w, 0, &err) == BRISK_OK);
    CHECKF(brisk_gguf_writer_copy_kv(w, g, &err) == BRISK_OK, "%s: %s", path, err.msg);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const brisk_gguf_tensor *t = &g->tensors[i];
        char name[BRISK_GGUF_MAX_NAME];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        st = brisk_gguf_writer_add_tensor_borrowed(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes, &err);
        CHECKF(st == BRISK_OK, "%s: %s", path, err.msg);
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    brisk_gguf *h = NULL;
    CHECK(brisk_gguf_writer_write_mem(w, &buf, &len, &err) == BRISK_OK);
    CHECKF(brisk_gguf_parse(buf, len, &h, &err) == BRISK_OK, "%s rewritten: %s", path, err.msg);
    if (h) {
        CHECK(h->n_kv == g->n_kv && h->n_tensors == g->n_tensors && h->alignment == g->alignment);
        for (uint64_t i = 0; i < g->n_kv && i < h->n_kv; i++) {
            const brisk_gguf_value *a = &g->kv[i].value, *b = &h->kv[i].value;
            bool same = a->type == b->type && g->kv[i].key.len == h->kv[i].key.len &&
                memcmp(g->kv[i].key.ptr, h->kv[i].key.ptr, g->kv[i].key.len) == 0;
            if (same && a->type == BRISK_GGUF_ARRAY)
                same = a->v.arr.nbytes == b->v.arr.nbytes && memcmp(a->v.arr.data, b->v.arr.data, a->v.arr.nbytes) == 0;
            else if (same && a->type == BRISK_GGUF_STRING)
                same = a->v.str.len == b->v.str.len && memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len) == 0;
            else if (same)
                same = memcmp(&a->v, &b->v, sizeof a->v.u64) == 0;
            CHECKF(same, "%s: kv %" PRIu64 " differs after rewrite", path, i);
        }
        for (uint64_t i = 0; i < g->n_tensors && i < h->n_tensors; i++) {
            const brisk_gguf_tensor *a = &g->tensors[i], *b = &h->tensors[i];
            CHECKF(a->nbytes == b->nbytes && a->type == b->type && memcmp(a->ne, b->ne, sizeof a->ne) == 0 &&
                       memcmp(a->data, b->data, a->nbytes) == 0,
                   "%s: tensor %" PRIu64 " differs after rewrite", path, i);
        }
    }
    brisk_gguf_close(h);
    free(buf);
    brisk_gguf_writer_free(w);
    brisk_gguf_close(g);
}

static void test_shared_fixtures(void) {
    static const char *const dirs[] = {"golden", "models", "vocab"};
    int n = 0;
    for (size_t k = 0; k < BRISK_ARRAY_LEN(dirs); k++) {
        char dir[1024];
        test_shared(dirs[k], dir, sizeof dir);
        DIR *d = opendir(dir);
        if (!d) {
            printf("SKIP: shared fixtures: %s absent\n", dir);
            continue;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
            size_t len = strlen(de->d_name);
            if (len < 5 || strcmp(de->d_name + len - 5, ".gguf") != 0) continue;
            char path[1400];
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            check_shared_file(path);
            n++;
        }
        closedir(d);
    }
    printf("shared fixtures: %d GGUF files checked\n", n);
}

/* Fuzz seed from a real model: its metadata (vocab arrays included) and its
 * small tensors, so the fuzzer starts from realistic structure. */
static void write_real_seed(const char *seed_dir) {
    char path[1024], out[1024];
    test_shared("golden/llama-tiny-Q4_K_M.gguf", path, sizeof path);
    if (!test_exists(path)) {
        printf("SKIP: real-model seed: %s absent\n", path);
        return;
    }
    brisk_gguf *g = NULL;
    brisk_gguf_writer *w = NULL;
    brisk_error err = {0};
    CHECK(brisk_gguf_open(path, &g, &err) == BRISK_OK);
    CHECK(brisk_gguf_writer_init(&w, 0, &err) == BRISK_OK);
    if (!g || !w) goto done;
    CHECK(brisk_gguf_writer_copy_kv(w, g, &err) == BRISK_OK);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const brisk_gguf_tensor *t = &g->tensors[i];
        if (t->nbytes > 1024) continue;
        char name[BRISK_GGUF_MAX_NAME];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        CHECK(brisk_gguf_writer_add_tensor_borrowed(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes, &err) ==
              BRISK_OK);
    }
    snprintf(out, sizeof out, "%s/real-llama-tiny-meta.gguf", seed_dir);
    CHECKF(brisk_gguf_writer_write(w, out, &err) == BRISK_OK, "%s", err.msg);
done:
    brisk_gguf_writer_free(w);
    brisk_gguf_close(g);
}

/* ---- split models (llama.cpp's gguf-split layout) -------------------------------- */

typedef enum split_flaw {
    FLAW_NONE, FLAW_WRONG_NO, FLAW_WRONG_COUNT, FLAW_DUPLICATE, FLAW_TENSOR_COUNT
} split_flaw;

/* Write g as n files PREFIX-%05d-of-%05d.gguf the way gguf-split does: the
 * first holds every kv, each holds split.no (u16), split.count (u16) and the
 * first split.tensors.count (i32); tensors go out in order, about T/n each.
 * flaw plants one defect in the second file (or the tensor count). */
static void write_split(const brisk_gguf *g, const char *prefix, uint32_t n, split_flaw flaw) {
    brisk_error err = {0};
    const uint64_t T = g->n_tensors;
    for (uint32_t f = 0; f < n; f++) {
        brisk_gguf_writer *w = NULL;
        CHECK(brisk_gguf_writer_init(&w, g->alignment, &err) == BRISK_OK);
        if (f == 0) CHECKF(brisk_gguf_writer_copy_kv(w, g, &err) == BRISK_OK, "%s", err.msg);
        brisk_gguf_value v = {.type = BRISK_GGUF_UINT16};
        v.v.u64 = (flaw == FLAW_WRONG_NO && f == 1) ? 2 : f;
        CHECK(brisk_gguf_writer_set_value(w, "split.no", &v, &err) == BRISK_OK);
        v.v.u64 = (flaw == FLAW_WRONG_COUNT && f == 1) ? n + 1 : n;
        CHECK(brisk_gguf_writer_set_value(w, "split.count", &v, &err) == BRISK_OK);
        CHECK(brisk_gguf_writer_set_i32(w, "split.tensors.count",
                                        (int32_t)T + (flaw == FLAW_TENSOR_COUNT ? 1 : 0)) == BRISK_OK);
        const uint64_t lo = T * f / n, hi = T * (f + 1) / n;
        for (uint64_t i = lo; i < hi; i++) {
            const brisk_gguf_tensor *t = &g->tensors[i];
            char name[BRISK_GGUF_MAX_NAME];
            snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
            CHECKF(brisk_gguf_writer_add_tensor_borrowed(w, name, t->type, t->n_dims, t->ne, t->data,
                                                         (size_t)t->nbytes, &err) == BRISK_OK, "%s", err.msg);
        }
        if (flaw == FLAW_DUPLICATE && f == 1) {   /* the first tensor again, in the second file */
            const brisk_gguf_tensor *t = &g->tensors[0];
            char name[BRISK_GGUF_MAX_NAME];
            snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
            CHECK(brisk_gguf_writer_add_tensor_borrowed(w, name, t->type, t->n_dims, t->ne, t->data,
                                                        (size_t)t->nbytes, &err) == BRISK_OK);
        }
        char path[1200];
        snprintf(path, sizeof path, "%s-%05u-of-%05u.gguf", prefix, f + 1, n);
        CHECKF(brisk_gguf_writer_write(w, path, &err) == BRISK_OK, "%s", err.msg);
        brisk_gguf_writer_free(w);
    }
}

static void remove_split(const char *prefix, uint32_t n) {
    for (uint32_t f = 0; f < n; f++) {
        char path[1200];
        snprintf(path, sizeof path, "%s-%05u-of-%05u.gguf", prefix, f + 1, n);
        remove(path);
    }
}

/* Logits of a fixed prompt, every position (n_tok * n_vocab floats, malloc'd). */
static float *model_logits(const char *path, int n_tok, int *n_vocab) {
    brisk_error err = {0};
    brisk_model *m = NULL;
    if (brisk_model_load(path, &m, &err) != BRISK_OK) {
        CHECKF(0, "load %s: %s", path, err.msg);
        return NULL;
    }
    brisk_model_info info;
    brisk_model_get_info(m, &info);
    *n_vocab = info.n_vocab;
    brisk_context_params p = brisk_context_default_params();
    p.n_ctx_seq = 64;
    p.n_batch = n_tok;
    p.n_seq = 1;
    p.n_threads = 1;
    p.n_outputs_max = n_tok;
    brisk_context *c = NULL;
    float *out = NULL;
    if (brisk_context_init(m, &p, &c, &err) == BRISK_OK) {
        int32_t tok[16], pos[16], seq[16];
        uint8_t want[16];
        for (int i = 0; i < n_tok; i++) {
            tok[i] = (int32_t)((i * 37 + 11) % info.n_vocab);
            pos[i] = i;
            seq[i] = 0;
            want[i] = 1;
        }
        brisk_batch b = {n_tok, tok, pos, seq, want};
        if (brisk_decode(c, &b, &err) == BRISK_OK) {
            out = malloc((size_t)n_tok * (size_t)info.n_vocab * sizeof *out);
            for (int j = 0; out && j < n_tok; j++)
                memcpy(out + (size_t)j * info.n_vocab, brisk_get_logits(c, j), (size_t)info.n_vocab * sizeof *out);
        }
        CHECKF(out != NULL, "decode %s: %s", path, err.msg);
        brisk_context_free(c);
    } else {
        CHECKF(0, "context %s: %s", path, err.msg);
    }
    brisk_model_free(m);
    return out;
}

static void expect_refused(const char *path, const char *needle1, const char *needle2) {
    brisk_error err = {0};
    brisk_gguf *g = NULL;
    brisk_status st = brisk_gguf_open(path, &g, &err);
    CHECKF(st != BRISK_OK && g == NULL, "%s opened (status %d)", path, (int)st);
    CHECKF(has(&err, needle1) && has(&err, needle2) && one_line(&err), "%s: message '%s' lacks '%s' / '%s'", path,
           err.msg, needle1, needle2);
    printf("refused as expected: %s\n", err.msg);
}

static void test_split(const char *tmpdir) {
    char model[1024];
    test_source("models/pycode-target-f16.gguf", model, sizeof model);
    if (!test_exists(model)) {
        printf("SKIP: split models: %s absent (make models)\n", model);
        return;
    }
    brisk_error err = {0};
    brisk_gguf *g = NULL;
    CHECKF(brisk_gguf_open(model, &g, &err) == BRISK_OK, "%s", err.msg);
    if (!g) return;
    const int n_tok = 12;
    int n_vocab = 0, nv = 0;
    float *want = model_logits(model, n_tok, &n_vocab);
    char prefix[256], first[300], path[300];
    snprintf(prefix, sizeof prefix, "%s/model", tmpdir);
    for (uint32_t n = 2; n <= 3; n++) {
        write_split(g, prefix, n, FLAW_NONE);
        snprintf(first, sizeof first, "%s-00001-of-%05u.gguf", prefix, n);
        brisk_gguf *s = NULL;
        CHECKF(brisk_gguf_open(first, &s, &err) == BRISK_OK, "%u-way: %s", n, err.msg);
        if (s) {
            CHECK(s->n_files == n && s->n_tensors == g->n_tensors);
            for (uint64_t i = 0; i < g->n_tensors; i++) {   /* every tensor found, same bytes */
                const brisk_gguf_tensor *a = &g->tensors[i];
                char name[BRISK_GGUF_MAX_NAME];
                snprintf(name, sizeof name, "%.*s", (int)a->name.len, a->name.ptr);
                const brisk_gguf_tensor *b = brisk_gguf_find_tensor(s, name);
                CHECKF(b && b->nbytes == a->nbytes && memcmp(b->data, a->data, (size_t)a->nbytes) == 0, "%s", name);
            }
            /* the fingerprints cover every file: the first file parsed alone gives others */
            brisk_gguf *alone = NULL;
            CHECK(brisk_gguf_parse(s->buf, s->size, &alone, &err) == BRISK_OK);
            if (alone) {
                CHECK(alone->n_files == 1 && alone->n_tensors < s->n_tensors);
                CHECK(brisk_gguf_header_hash(alone) != brisk_gguf_header_hash(s));
                CHECK(brisk_gguf_data_hash(alone) != brisk_gguf_data_hash(s));
                brisk_gguf_close(alone);
            }
            brisk_gguf_close(s);
        }
        float *got = want ? model_logits(first, n_tok, &nv) : NULL;
        CHECKF(got && nv == n_vocab && memcmp(got, want, (size_t)n_tok * (size_t)n_vocab * sizeof *got) == 0,
               "%u-way split: logits differ from the single file", n);
        free(got);
        /* a later file names the first */
        snprintf(path, sizeof path, "%s-00002-of-%05u.gguf", prefix, n);
        expect_refused(path, "open the first file", first);
        /* a missing file */
        snprintf(path, sizeof path, "%s-%05u-of-%05u.gguf", prefix, n, n);
        remove(path);
        expect_refused(first, path, "split file");
        remove_split(prefix, n);
    }
    /* one file of a split copied to a plain name: its siblings cannot be derived */
    write_split(g, prefix, 2, FLAW_NONE);
    snprintf(first, sizeof first, "%s-00001-of-00002.gguf", prefix);
    snprintf(path, sizeof path, "%s-00002-of-00002.gguf", prefix);   /* each file keeps every bounds check */
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && truncate(path, sb.st_size - 100) == 0);
    expect_refused(first, "split file 2 of 2", "past end of file");
    write_split(g, prefix, 2, FLAW_NONE);
    snprintf(path, sizeof path, "%s/renamed.gguf", tmpdir);
    CHECK(rename(first, path) == 0);
    expect_refused(path, "does not end in '-00001-of-00002.gguf'", "split.no");
    remove(path);
    remove_split(prefix, 2);
    static const struct {
        split_flaw flaw;
        const char *needle1, *needle2;
    } flaws[] = {
        {FLAW_WRONG_NO, "model-00002-of-00003.gguf: keys 'split.no' = 2", "must have 1 and 3"},
        {FLAW_WRONG_COUNT, "model-00002-of-00003.gguf: keys 'split.no' = 1, 'split.count' = 4", "must have 1 and 3"},
        {FLAW_DUPLICATE, "appears in more than one file", "model-00001-of-00003.gguf"},
        {FLAW_TENSOR_COUNT, "key 'split.tensors.count'", "files hold"},
    };
    snprintf(first, sizeof first, "%s-00001-of-00003.gguf", prefix);
    for (size_t k = 0; k < BRISK_ARRAY_LEN(flaws); k++) {
        write_split(g, prefix, 3, flaws[k].flaw);
        expect_refused(first, flaws[k].needle1, flaws[k].needle2);
        remove_split(prefix, 3);
    }
    /* copy_kv drops split.*: a file re-written from a split model is one file */
    brisk_gguf_writer *w = NULL;
    write_split(g, prefix, 2, FLAW_NONE);
    snprintf(first, sizeof first, "%s-00001-of-00002.gguf", prefix);
    brisk_gguf *s = NULL;
    CHECK(brisk_gguf_open(first, &s, &err) == BRISK_OK);
    CHECK(brisk_gguf_writer_init(&w, 0, &err) == BRISK_OK);
    if (s && w) {
        CHECK(brisk_gguf_writer_copy_kv(w, s, &err) == BRISK_OK);
        uint8_t *mem = NULL;
        size_t len = 0;
        CHECK(brisk_gguf_writer_write_mem(w, &mem, &len, &err) == BRISK_OK);
        brisk_gguf *back = NULL;
        CHECK(mem && brisk_gguf_parse(mem, len, &back, &err) == BRISK_OK);
        CHECK(back && !brisk_gguf_find(back, "split.count") && !brisk_gguf_find(back, "split.no"));
        brisk_gguf_close(back);
        free(mem);
    }
    brisk_gguf_writer_free(w);
    brisk_gguf_close(s);
    remove_split(prefix, 2);
    free(want);
    brisk_gguf_close(g);
}

int main(int argc, char **argv) {
    char tmpdir[64];
    make_tmpdir(tmpdir, sizeof tmpdir);
    const char *seed_dir = (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) ? argv[2] : NULL;
    test_round_trip(0, tmpdir, seed_dir);
    test_round_trip(64, tmpdir, seed_dir);
    test_round_trip(1, tmpdir, NULL);
    test_small_files();
    test_corrupt_corpus();
    test_file_errors(tmpdir);
    if (!seed_dir) test_split(tmpdir);
    if (seed_dir) write_real_seed(seed_dir);
    else test_shared_fixtures();
    rmdir(tmpdir);
    return test_finish();
}
