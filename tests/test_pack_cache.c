/* test_pack_cache: the pack-cache image rules (src/model/pack_cache.c), one
 * hand-made hostile image per rule, each refused with its reason; a valid
 * image round-trips through layout, header and parse; the layout fingerprint
 * is stable and sees a changed byte of the packed output. The file paths
 * (load, refuse, rewrite, concurrent writers, logits byte-identical with and
 * without the cache) are tests/cli_pack_cache.sh.
 *
 * BRISK_REGEN_PACK_CACHE_SEEDS=1 also writes the images to
 * fuzz/corpus/fuzz_pack_cache/ (the fuzz target's seeds). */
#include "test.h"
#include "../fuzz/fuzz_pack_cache_key.h"
#include "model/pack_cache.h"

#include <stdint.h>
#include <sys/stat.h>

/* A valid image for the fuzz expectation: layout, header, data bytes a pattern. */
static uint8_t *make_image(const brisk_pack_key *key, size_t *len) {
    brisk_pack_entry e[FUZZ_PACK_N];
    fuzz_pack_expectation(e);
    uint64_t file_size = 0;
    const size_t data_offset = brisk_pack_cache_layout(e, FUZZ_PACK_N, &file_size);
    if (!data_offset) return NULL;
    uint8_t *buf = calloc(1, (size_t)file_size);
    if (!buf) return NULL;
    brisk_pack_cache_header(key, e, FUZZ_PACK_N, data_offset, file_size, buf);
    for (int i = 0; i < FUZZ_PACK_N; i++)
        for (uint64_t b = 0; b < e[i].bytes; b++) buf[e[i].offset + b] = (uint8_t)(b * 7 + (uint64_t)i);
    *len = (size_t)file_size;
    return buf;
}

static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* the images kept as seeds (11.5 KB each): one per kind of refusal, and the valid ones */
static const char *const seeds[] = {"valid", "truncated", "version-2", "bad-checksum", "many-entries", "data-offset", "overlapping-offsets",
                                    "misaligned", "past-end", "groups-overflow", "offset-wraps", "stale-model", "wrong-isa",
                                    "layout-changed", "other-matrix", "identity-ino", "isa-newline"};

static void save_seed(const char *name, const uint8_t *buf, size_t len) {
    if (!getenv("BRISK_REGEN_PACK_CACHE_SEEDS")) return;
    bool keep = false;
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) keep |= !strcmp(seeds[i], name);
    if (!keep) return;
    char path[512];
    mkdir(BRISK_SOURCE_DIR "/fuzz/corpus/fuzz_pack_cache", 0755);
    snprintf(path, sizeof path, "%s/fuzz/corpus/fuzz_pack_cache/%s", BRISK_SOURCE_DIR, name);
    FILE *f = fopen(path, "wb");
    CHECKF(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0, "writing seed %s", path);
}

/* Parse (and match) a copy of an image edited by edit(); expect the reason. */
typedef void (*edit_fn)(uint8_t *buf, size_t *len);

static void expect(const char *name, const uint8_t *image, size_t len, edit_fn edit, bool seal, const char *want_parse,
                   const char *want_match, brisk_pack_match want_m) {
    uint8_t *b = malloc(len + 8192);
    CHECK(b != NULL);
    if (!b) return;
    memcpy(b, image, len);
    memset(b + len, 0, 8192);
    size_t n = len;
    if (edit) edit(b, &n);
    if (seal) brisk_pack_cache_seal(b, n);
    save_seed(name, b, n);
    brisk_pack_image im;
    brisk_error err = {0};
    const brisk_status st = brisk_pack_cache_parse(b, n, &im, &err);
    if (want_parse) {
        CHECKF(st == BRISK_ERR_FORMAT && strstr(err.msg, want_parse), "%s: parse gave %d '%s', want '%s'", name, st, err.msg, want_parse);
        free(b);
        return;
    }
    CHECKF(st == BRISK_OK, "%s: parse refused: %s", name, err.msg);
    if (st) {
        free(b);
        return;
    }
    brisk_pack_key key;
    fuzz_pack_key(&key);
    brisk_pack_entry e[FUZZ_PACK_N];
    fuzz_pack_expectation(e);
    memset(&err, 0, sizeof err);
    const brisk_pack_match m = brisk_pack_cache_match(&im, &key, e, FUZZ_PACK_N, &err);
    CHECKF(m == want_m, "%s: match gave %d (%s), want %d", name, m, err.msg, want_m);
    if (want_match) CHECKF(strstr(err.msg, want_match) != NULL, "%s: match said '%s', want '%s'", name, err.msg, want_match);
    free(b);
}

#define ENTRY(i) (BRISK_PACK_CACHE_HEADER + (i) * BRISK_PACK_CACHE_ENTRY)

static void e_none(uint8_t *b, size_t *n) { (void)b, (void)n; }
static void e_short(uint8_t *b, size_t *n) { (void)b, *n = 100; }
static void e_trunc(uint8_t *b, size_t *n) { (void)b, *n -= 1; }
static void e_append(uint8_t *b, size_t *n) { (void)b, *n += 4096; }
static void e_magic(uint8_t *b, size_t *n) { (void)n, b[0] = 'X'; }
static void e_version(uint8_t *b, size_t *n) { (void)n, put32(b + 8, 2); }
static void e_entry_bytes(uint8_t *b, size_t *n) { (void)n, put32(b + 12, 48); }
static void e_flip_table(uint8_t *b, size_t *n) { (void)n, b[ENTRY(1) + 20] ^= 1; }
static void e_many(uint8_t *b, size_t *n) { (void)n, put64(b + 32, UINT64_MAX / 2); }
static void e_data_offset(uint8_t *b, size_t *n) { (void)n, put64(b + 24, 256); }
static void e_isa_unterminated(uint8_t *b, size_t *n) { (void)n, memset(b + 48, 'a', 16); }
static void e_isa_newline(uint8_t *b, size_t *n) { (void)n, memcpy(b + 48, "avx\n512", 7); }
static void e_overlap(uint8_t *b, size_t *n) { (void)n, put64(b + ENTRY(1) + 48, 4096); }
static void e_misaligned(uint8_t *b, size_t *n) { (void)n, put64(b + ENTRY(1) + 48, 8192 + 64); }
static void e_past_end(uint8_t *b, size_t *n) {   /* a second group: the entry ends past the file */
    (void)n, put64(b + ENTRY(1) + 16, 32), put64(b + ENTRY(1) + 32, 2), put64(b + ENTRY(1) + 56, 2 * 3360);
}
static void e_bytes(uint8_t *b, size_t *n) { (void)n, put64(b + ENTRY(0) + 56, 100); }
static void e_huge_groups(uint8_t *b, size_t *n) {   /* groups x bytes overflows 64 bits */
    (void)n, put64(b + ENTRY(0) + 32, INT64_MAX / 16), put64(b + ENTRY(0) + 40, 64), put64(b + ENTRY(0) + 16, INT64_MAX);
}
static void e_wrap(uint8_t *b, size_t *n) {   /* offset + bytes wraps */
    (void)n, put64(b + ENTRY(1) + 48, UINT64_MAX - 4095), put64(b + ENTRY(1) + 32, 1), put64(b + ENTRY(1) + 40, 8192),
        put64(b + ENTRY(1) + 56, 8192);
}
static void e_type(uint8_t *b, size_t *n) { (void)n, put32(b + ENTRY(0) + 8, 200); }
static void e_groups_rows(uint8_t *b, size_t *n) { (void)n, put64(b + ENTRY(0) + 16, 31); }
static void e_stale(uint8_t *b, size_t *n) { (void)n, put64(b + 80, 0x1111222233334445ull); }
static void e_size(uint8_t *b, size_t *n) { (void)n, put64(b + 72, (1u << 20) + 1); }
static void e_isa(uint8_t *b, size_t *n) { (void)n, memset(b + 48, 0, 16), memcpy(b + 48, "avx2", 4); }
static void e_types(uint8_t *b, size_t *n) { (void)n, put64(b + 64, 1ull << BRISK_Q_Q4_0); }
static void e_layout(uint8_t *b, size_t *n) { (void)n, put64(b + 40, 0x0123456789abcdeeull); }
static void e_identity(uint8_t *b, size_t *n) { (void)n, put64(b + 104, 78); }
static void e_ctime(uint8_t *b, size_t *n) { (void)n, put64(b + 136, 7); }
static void e_src(uint8_t *b, size_t *n) { (void)n, put64(b + ENTRY(1), 16384 + 4096); }
static void e_one_entry(uint8_t *b, size_t *n) { (void)n, put64(b + 32, 1); }

int main(void) {
    /* the fingerprint: stable, and not 0 (0 is "could not compute") */
    const uint64_t f1 = brisk_pack_layout_fingerprint(), f2 = brisk_pack_layout_fingerprint();
    CHECK(f1 != 0 && f1 == f2);

    brisk_pack_key key;
    fuzz_pack_key(&key);
    size_t len = 0;
    uint8_t *image = make_image(&key, &len);
    CHECK(image != NULL && len == 8192 + 3360);
    if (!image) return test_finish();

    /* valid: parses, its fields come back, it matches */
    expect("valid", image, len, e_none, false, NULL, NULL, BRISK_PACK_MATCH);
    brisk_pack_image im;
    brisk_error err = {0};
    CHECK(brisk_pack_cache_parse(image, len, &im, &err) == BRISK_OK);
    CHECK(im.n_entries == FUZZ_PACK_N && im.data_offset == 4096 && !strcmp(im.key.isa, "avx512"));
    CHECK(im.key.data_hash == key.data_hash && im.key.ctime_ns == key.ctime_ns && im.key.group_rows == 16);
    brisk_pack_entry e;
    brisk_pack_cache_entry(&im, 1, &e);
    CHECK(e.offset == 8192 && e.bytes == 3360 && e.type == BRISK_Q_Q6_K && e.src_offset == 16384);

    /* the bytes themselves */
    expect("short", image, len, e_short, false, "shorter than the 256-byte header", NULL, 0);
    expect("truncated", image, len, e_trunc, false, "truncated or appended to", NULL, 0);
    expect("appended", image, len, e_append, false, "truncated or appended to", NULL, 0);
    expect("bad-magic", image, len, e_magic, false, "bad magic", NULL, 0);
    expect("version-2", image, len, e_version, true, "format version 2, this build reads 1", NULL, 0);
    expect("entry-bytes", image, len, e_entry_bytes, true, "48-byte table entries", NULL, 0);
    expect("bad-checksum", image, len, e_flip_table, false, "checksum mismatch", NULL, 0);
    expect("many-entries", image, len, e_many, true, "table entries, more than", NULL, 0);
    expect("data-offset", image, len, e_data_offset, true, "data offset 256", NULL, 0);
    expect("isa-unterminated", image, len, e_isa_unterminated, true, "not NUL-terminated", NULL, 0);
    expect("isa-newline", image, len, e_isa_newline, true, "byte 0x0a that is not a letter", NULL, 0);
    expect("overlapping-offsets", image, len, e_overlap, true, "overlaps", NULL, 0);
    expect("misaligned", image, len, e_misaligned, true, "misaligned", NULL, 0);
    expect("past-end", image, len, e_past_end, true, "runs past the file's 11552 bytes", NULL, 0);
    expect("bytes-not-groups", image, len, e_bytes, true, "100 bytes is not 2 groups x 288", NULL, 0);
    expect("groups-overflow", image, len, e_huge_groups, true, "bytes is not", NULL, 0);
    expect("offset-wraps", image, len, e_wrap, true, "runs past", NULL, 0);
    expect("bad-type", image, len, e_type, true, "is malformed (type 200", NULL, 0);
    expect("groups-over-rows", image, len, e_groups_rows, true, "is malformed", NULL, 0);

    /* well-formed, but not this process's */
    expect("stale-model", image, len, e_stale, true, NULL, "made for another model file", BRISK_PACK_MISMATCH);
    expect("stale-size", image, len, e_size, true, NULL, "made for another model file", BRISK_PACK_MISMATCH);
    expect("wrong-isa", image, len, e_isa, true, NULL, "made for the avx2 kernels", BRISK_PACK_MISMATCH);
    expect("wrong-types", image, len, e_types, true, NULL, "this process runs avx512", BRISK_PACK_MISMATCH);
    expect("layout-changed", image, len, e_layout, true, NULL, "another packed layout", BRISK_PACK_MISMATCH);
    expect("other-matrix", image, len, e_src, true, NULL, "matrix 1 (Q6_K", BRISK_PACK_MISMATCH);
    expect("one-entry", image, len, e_one_entry, true, NULL, "holds 1 packed matrices, this model packs 2", BRISK_PACK_MISMATCH);
    expect("identity-ino", image, len, e_identity, true, NULL, NULL, BRISK_PACK_MATCH_IDENTITY);
    expect("identity-ctime", image, len, e_ctime, true, NULL, NULL, BRISK_PACK_MATCH_IDENTITY);

    /* layout: overflow is refused, not wrapped */
    brisk_pack_entry big[1] = {{.groups = UINT64_MAX / 2, .group_bytes = 4}};
    uint64_t fs = 0;
    CHECK(brisk_pack_cache_layout(big, 1, &fs) == 0);
    free(image);
    return test_finish();
}
