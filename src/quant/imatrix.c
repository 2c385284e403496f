/* imatrix: the importance-matrix reader (see imatrix.h). The normalization
 * is llama-quantize's (tools/quantize/quantize.cpp load_imatrix), read there
 * and written anew; where llama.cpp would read out of bounds or divide by
 * zero on a malformed file, brisk refuses it instead. */
#include "quant/imatrix.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A name for a one-line message: at most 80 bytes, control bytes as '?'. */
typedef struct shown { char s[84]; } shown;
static shown show(const char *p, size_t n) {
    shown r;
    size_t k = 0;
    for (; k < n && k < 80; k++) r.s[k] = (unsigned char)p[k] < 0x20 || p[k] == 0x7f ? '?' : p[k];
    if (k < n) r.s[k++] = '.', r.s[k++] = '.', r.s[k++] = '.';
    r.s[k] = 0;
    return r;
}

void brisk_imatrix_free(brisk_imatrix *m) {
    if (!m) return;
    for (int i = 0; i < m->n_entries; i++) {
        free(m->entries[i].name);
        free(m->entries[i].values);
    }
    free(m->entries);
    free(m->dataset);
    memset(m, 0, sizeof *m);
}

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const brisk_imatrix_entry *)a)->name, ((const brisk_imatrix_entry *)b)->name);
}

void brisk_imatrix_filter(brisk_imatrix *m, const char *const *names, int n, bool include) {
    int kept = 0;
    for (int i = 0; i < m->n_entries; i++) {
        bool hit = false;
        for (int k = 0; k < n && !hit; k++) hit = strstr(m->entries[i].name, names[k]) != NULL;
        if (hit == include) m->entries[kept++] = m->entries[i];
        else {
            free(m->entries[i].name);
            free(m->entries[i].values);
        }
    }
    m->n_entries = kept;
}

const brisk_imatrix_entry *brisk_imatrix_find(const brisk_imatrix *m, const char *name) {
    if (!m || !m->n_entries) return NULL;
    const brisk_imatrix_entry key = {.name = (char *)name};
    return bsearch(&key, m->entries, (size_t)m->n_entries, sizeof key, entry_cmp);
}

/* A new entry (or, for a name seen before, the old one emptied: the last wins,
 * as in llama.cpp's map). */
static brisk_imatrix_entry *entry_for(brisk_imatrix *m, const char *name, size_t name_len, int *cap, brisk_error *err) {
    for (int i = 0; i < m->n_entries; i++)
        if (strlen(m->entries[i].name) == name_len && !memcmp(m->entries[i].name, name, name_len)) {
            free(m->entries[i].values);
            m->entries[i].values = NULL;
            m->entries[i].n = 0;
            return &m->entries[i];
        }
    if (m->n_entries == *cap) {
        const int nc = *cap ? *cap * 2 : 16;
        brisk_imatrix_entry *ne = realloc(m->entries, (size_t)nc * sizeof *ne);
        if (!ne) {
            brisk_fail(err, BRISK_ERR_NOMEM, "imatrix: out of memory");
            return NULL;
        }
        m->entries = ne;
        *cap = nc;
    }
    brisk_imatrix_entry *e = &m->entries[m->n_entries];
    memset(e, 0, sizeof *e);
    if (!(e->name = malloc(name_len + 1))) {
        brisk_fail(err, BRISK_ERR_NOMEM, "imatrix: out of memory");
        return NULL;
    }
    memcpy(e->name, name, name_len);
    e->name[name_len] = 0;
    m->n_entries++;
    return e;
}

static brisk_status check_finite(const brisk_imatrix *m, const char *what, brisk_error *err) {
    for (int i = 0; i < m->n_entries; i++)
        for (int64_t j = 0; j < m->entries[i].n; j++)
            if (!isfinite(m->entries[i].values[j]))
                return brisk_fail(err, BRISK_ERR_FORMAT, "%s: entry '%s': value %lld is not finite (%g)", what,
                                  show(m->entries[i].name, strlen(m->entries[i].name)).s, (long long)j, (double)m->entries[i].values[j]);
    return BRISK_OK;
}

/* ---- legacy .dat ----------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p;
    size_t len, pos;
} reader;

static bool rd_i32(reader *r, int32_t *v) {
    if (r->len - r->pos < 4) return false;
    memcpy(v, r->p + r->pos, 4);   /* little-endian, as llama.cpp wrote it on every host brisk runs on */
    r->pos += 4;
    return true;
}

static brisk_status parse_legacy(const uint8_t *buf, size_t len, const char *what, brisk_imatrix *m, brisk_error *err) {
    reader r = {buf, len, 0};
    int32_t n_entries = 0;
    if (!rd_i32(&r, &n_entries) || n_entries < 1)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s: not a GGUF imatrix, and as a legacy one it holds no entries", what);
    int cap = 0;
    for (int32_t i = 0; i < n_entries; i++) {
        int32_t name_len = 0, ncall = 0, nval = 0;
        if (!rd_i32(&r, &name_len) || name_len < 0 || (size_t)name_len > r.len - r.pos)
            return brisk_fail(err, BRISK_ERR_FORMAT, "%s: legacy imatrix: entry %d: cannot read its name", what, i + 1);
        const char *name = (const char *)r.p + r.pos;
        r.pos += (size_t)name_len;
        const size_t used = strnlen(name, (size_t)name_len);   /* llama.cpp keeps the name up to a NUL */
        if (!rd_i32(&r, &ncall) || !rd_i32(&r, &nval) || nval < 1)
            return brisk_fail(err, BRISK_ERR_FORMAT, "%s: legacy imatrix: entry %d ('%s'): cannot read its value count", what, i + 1,
                              show(name, used).s);
        if ((size_t)nval > (r.len - r.pos) / 4)
            return brisk_fail(err, BRISK_ERR_FORMAT, "%s: legacy imatrix: entry %d ('%s'): %d values run past the end", what, i + 1,
                              show(name, used).s, nval);
        brisk_imatrix_entry *e = entry_for(m, name, used, &cap, err);
        if (!e) return BRISK_ERR_NOMEM;
        if (!(e->values = malloc((size_t)nval * sizeof(float)))) return brisk_fail(err, BRISK_ERR_NOMEM, "imatrix: out of memory");
        e->n = nval;
        memcpy(e->values, r.p + r.pos, (size_t)nval * 4);
        r.pos += (size_t)nval * 4;
        if (ncall > 0)   /* the values are means times ncall */
            for (int32_t j = 0; j < nval; j++) e->values[j] = e->values[j] / (float)ncall;
    }
    /* optional: the chunk count, then the dataset's name; llama.cpp takes what
     * a short read leaves (the bytes there, zeros after them) as the count */
    if (r.pos < r.len) {
        uint8_t b[4] = {0};
        const size_t k = r.len - r.pos < 4 ? r.len - r.pos : 4;
        memcpy(b, r.p + r.pos, k);
        r.pos += k;
        memcpy(&m->chunk_count, b, 4);
        int32_t dlen = 0;
        if (k == 4 && rd_i32(&r, &dlen) && dlen > 0 && (size_t)dlen <= r.len - r.pos) {
            const char *d = (const char *)r.p + r.pos;
            const size_t dl = strnlen(d, (size_t)dlen);
            if (!(m->dataset = malloc(dl + 1))) return brisk_fail(err, BRISK_ERR_NOMEM, "imatrix: out of memory");
            memcpy(m->dataset, d, dl);
            m->dataset[dl] = 0;
        }
    }
    m->legacy = true;
    return BRISK_OK;
}

/* ---- GGUF -------------------------------------------------------------------------------- */

static bool name_has_suffix(brisk_str n, const char *suffix, size_t *stem) {
    const size_t sl = strlen(suffix);
    if (n.len < sl || memcmp(n.ptr + n.len - sl, suffix, sl)) return false;
    *stem = n.len - sl;
    return true;
}

static const brisk_gguf_tensor *find_tensor(const brisk_gguf *g, const char *stem, size_t stem_len, const char *suffix) {
    const size_t sl = strlen(suffix);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const brisk_str n = g->tensors[i].name;
        if (n.len == stem_len + sl && !memcmp(n.ptr, stem, stem_len) && !memcmp(n.ptr + stem_len, suffix, sl)) return &g->tensors[i];
    }
    return NULL;
}

static int64_t n_elements(const brisk_gguf_tensor *t) {
    int64_t n = 1;
    for (uint32_t d = 0; d < BRISK_GGUF_MAX_DIMS; d++) n *= t->ne[d];
    return n;
}

static brisk_status get_u32_key(const brisk_gguf *g, const char *key, const char *what, int32_t *out, brisk_error *err) {
    const brisk_gguf_kv *kv = brisk_gguf_find(g, key);
    if (kv->value.type != BRISK_GGUF_UINT32)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s: %s is a %s, not a u32", what, key, brisk_gguf_type_name(kv->value.type));
    if (kv->value.v.u64 > INT32_MAX)
        return brisk_fail(err, BRISK_ERR_FORMAT, "%s: %s = %llu is out of range", what, key, (unsigned long long)kv->value.v.u64);
    *out = (int32_t)kv->value.v.u64;
    return BRISK_OK;
}

static brisk_status parse_gguf(const uint8_t *buf, size_t len, const char *what, brisk_imatrix *m, brisk_error *err) {
    brisk_gguf *g = NULL;
    brisk_status st = brisk_gguf_parse(buf, len, &g, err);
    if (st) {
        brisk_error_prefix(err, "%s: GGUF imatrix", what);
        return st;
    }
    int cap = 0;
    if (g->n_tensors < 1) {
        st = brisk_fail(err, BRISK_ERR_FORMAT, "%s: the GGUF imatrix holds no tensors", what);
        goto done;
    }
    static const char *const keys[] = {"imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"};
    for (int k = 0; k < 3; k++)
        if (!brisk_gguf_find(g, keys[k])) {
            st = brisk_fail(err, BRISK_ERR_FORMAT, "%s: missing imatrix metadata: no %s key (llama-quantize refuses such a file too)", what,
                            keys[k]);
            goto done;
        }
    int32_t chunk_size = 0;
    if ((st = get_u32_key(g, "imatrix.chunk_count", what, &m->chunk_count, err)) ||
        (st = get_u32_key(g, "imatrix.chunk_size", what, &chunk_size, err)))
        goto done;
    const brisk_gguf_kv *ds = brisk_gguf_find(g, "imatrix.datasets");
    if (ds->value.type == BRISK_GGUF_ARRAY && ds->value.v.arr.elem_type == BRISK_GGUF_STRING && ds->value.v.arr.count > 0) {
        size_t off = 0;
        brisk_gguf_value first;
        if ((st = brisk_gguf_value_next(&ds->value, &off, &first, err))) goto done;
        if (!(m->dataset = malloc(first.v.str.len + 1))) goto nomem;
        memcpy(m->dataset, first.v.str.ptr, first.v.str.len);
        m->dataset[first.v.str.len] = 0;
        m->dataset[strnlen(m->dataset, first.v.str.len)] = 0;   /* a C string, as llama.cpp keeps it */
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const brisk_gguf_tensor *t = &g->tensors[i];
        size_t stem = 0;
        const bool is_sums = name_has_suffix(t->name, ".in_sum2", &stem);
        if (!is_sums && !name_has_suffix(t->name, ".counts", &stem)) continue;   /* not an imatrix tensor: ignored */
        const char *s = t->name.ptr;
        const brisk_gguf_tensor *sums = is_sums ? t : find_tensor(g, s, stem, ".in_sum2");
        const brisk_gguf_tensor *counts = is_sums ? find_tensor(g, s, stem, ".counts") : t;
        if (!sums || !counts) {
            st = brisk_fail(err, BRISK_ERR_FORMAT, "%s: mismatched sums and counts for '%s' (it has only %s)", what, show(s, stem).s,
                            is_sums ? ".in_sum2" : ".counts");
            goto done;
        }
        if (!is_sums) continue;   /* the pair is taken at its .in_sum2 */
        if (sums->type != BRISK_Q_F32 || counts->type != BRISK_Q_F32) {
            st = brisk_fail(err, BRISK_ERR_FORMAT, "%s: sums and counts for '%s' must be F32 (they are %s and %s)", what, show(s, stem).s,
                            brisk_qtype_name(sums->type), brisk_qtype_name(counts->type));
            goto done;
        }
        const int64_t nval = n_elements(sums), ncounts = n_elements(counts);
        if (nval < 1 || ncounts < 1 || nval / ncounts < 1) {
            st = brisk_fail(err, BRISK_ERR_FORMAT, "%s: '%s': %lld sums for %lld counts", what, show(s, stem).s, (long long)nval,
                            (long long)ncounts);
            goto done;
        }
        brisk_imatrix_entry *e = entry_for(m, s, stem, &cap, err);
        if (!e) { st = BRISK_ERR_NOMEM; goto done; }
        if (!(e->values = calloc((size_t)nval, sizeof(float)))) goto nomem;
        e->n = nval;
        const int64_t ne0 = nval / ncounts;   /* values past ncounts * ne0 stay 0, as in llama.cpp */
        for (int64_t j = 0; j < ncounts; j++) {
            float c;
            memcpy(&c, (const uint8_t *)counts->data + 4 * j, 4);
            if (!isfinite(c) || fabsf(c) > 0x1p62f) {
                st = brisk_fail(err, BRISK_ERR_FORMAT, "%s: '%s': count %lld is %g", what, show(s, stem).s, (long long)j, (double)c);
                goto done;
            }
            const float count = (float)lroundf(c);   /* llama.cpp rounds the counts to integers */
            for (int64_t k = 0; k < ne0; k++) {
                if (count > 0.0f) {
                    float v;
                    memcpy(&v, (const uint8_t *)sums->data + 4 * (j * ne0 + k), 4);
                    e->values[j * ne0 + k] = v / count;
                } else {
                    e->values[j * ne0 + k] = 1.0f;   /* an expert no token reached */
                }
            }
        }
    }
    goto done;
nomem:
    st = brisk_fail(err, BRISK_ERR_NOMEM, "imatrix: out of memory");
done:
    brisk_gguf_close(g);
    return st;
}

brisk_status brisk_imatrix_parse(const uint8_t *buf, size_t len, const char *what, brisk_imatrix *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    if (!buf && len) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "imatrix: NULL buffer");
    const bool gguf = len >= 4 && !memcmp(buf, "GGUF", 4);
    brisk_status st = gguf ? parse_gguf(buf, len, what, out, err) : parse_legacy(buf, len, what, out, err);
    if (!st) st = check_finite(out, what, err);
    if (st) {
        brisk_imatrix_free(out);
        return st;
    }
    if (out->n_entries > 1) qsort(out->entries, (size_t)out->n_entries, sizeof *out->entries, entry_cmp);
    return BRISK_OK;
}

brisk_status brisk_imatrix_load(const char *path, brisk_imatrix *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    uint8_t *buf = NULL;
    size_t len = 0;
    brisk_status st = brisk_file_read(path, &buf, &len, err);
    if (st) return st;
    st = brisk_imatrix_parse(buf, len, path, out, err);
    free(buf);
    return st;
}
