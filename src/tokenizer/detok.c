/* detok: streaming detokenizer. Pieces are joined byte by byte and only
 * complete, well-formed UTF-8 characters leave it; the bytes of a character
 * that is still being spelled out by byte tokens wait (at most 3). Bytes that
 * can never form a character become U+FFFD (one per maximal ill-formed
 * subsequence, as the Unicode standard recommends), so the output is always
 * valid UTF-8 however the model misbehaves. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

struct brisk_detok {
    const brisk_vocab *v;
    uint8_t hold[4];   /* a well-formed but incomplete character prefix */
    size_t n_hold;
};

static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

brisk_status brisk_detok_init(brisk_detok **out, const brisk_vocab *v, brisk_error *err) {
    *out = calloc(1, sizeof **out);
    if (!*out) return brisk_fail(err, BRISK_ERR_NOMEM, "cannot allocate a detokenizer");
    (*out)->v = v;
    return BRISK_OK;
}

void brisk_detok_free(brisk_detok *d) { free(d); }

void brisk_detok_reset(brisk_detok *d) { d->n_hold = 0; }

/* One push emits what the piece gives on its own plus what the held bytes
 * become: a held prefix ends as one character (at most 4 bytes, made of
 * bytes the piece alone would have turned into at least as much) or as one
 * U+FFFD; 12 bytes cover it with room to spare. */
size_t brisk_detok_push_cap(const brisk_detok *d) { return d->v->max_piece_out + 12; }

/* Length of the character a lead byte starts (0: cannot start one) and the
 * allowed range of its second byte. */
static size_t lead_info(uint8_t c, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) {
        if (c == 0xE0) *lo = 0xA0;
        if (c == 0xED) *hi = 0x9F;   /* no surrogates */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (c == 0xF0) *lo = 0x90;
        if (c == 0xF4) *hi = 0x8F;   /* nothing above U+10FFFF */
        return 4;
    }
    return 0;
}

/* Decode s[0..n) into out (NULL: only count). Returns bytes emitted; leaves a
 * trailing incomplete-but-valid prefix in hold. */
static size_t emit(const uint8_t *s, size_t n, char *out, uint8_t *hold, size_t *n_hold) {
    size_t o = 0, i = 0;
    *n_hold = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            if (out) out[o] = (char)c;
            o++, i++;
            continue;
        }
        uint8_t lo, hi;
        size_t need = lead_info(c, &lo, &hi);
        if (need == 0) {
            if (out) memcpy(out + o, fffd, 3);
            o += 3, i++;
            continue;
        }
        size_t k = 1;
        while (k < need && i + k < n) {
            uint8_t b = s[i + k];
            if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
            k++;
        }
        if (k == need) {
            if (out) memcpy(out + o, s + i, need);
            o += need, i += need;
        } else if (i + k == n) {   /* valid so far, cut by the end: wait for more */
            memcpy(hold, s + i, k);
            *n_hold = k;
            break;
        } else {                   /* ill-formed: the prefix becomes one U+FFFD */
            if (out) memcpy(out + o, fffd, 3);
            o += 3, i += k;
        }
    }
    return o;
}

size_t brisk_detok_sanitized_len(const char *s, size_t n) {
    uint8_t hold[4];
    size_t n_hold;
    return emit((const uint8_t *)s, n, NULL, hold, &n_hold) + (n_hold ? 3 : 0);
}

brisk_status brisk_detok_push(brisk_detok *d, int32_t id, char *out, size_t cap, size_t *len, brisk_error *err) {
    *len = 0;
    const brisk_vocab *v = d->v;
    if (id < 0 || id >= v->n_tokens)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "detokenize: token id %d out of range [0, %d)", id, v->n_tokens);
    if (v->attr[id] & (BRISK_TOKEN_UNKNOWN | BRISK_TOKEN_CONTROL)) return BRISK_OK;
    const uint8_t *p = (const uint8_t *)v->piece_pool + v->piece_off[id];
    size_t pl = v->piece_len[id];
    if (pl == 0) return BRISK_OK;

    /* the held bytes plus the new piece; a held prefix is at most 3 bytes, so
     * it is cheap to stitch the first few piece bytes onto it */
    uint8_t head[8];
    size_t hn = d->n_hold;
    memcpy(head, d->hold, hn);
    size_t take = BRISK_MIN(pl, sizeof head - hn);
    memcpy(head + hn, p, take);

    /* exact size first when the worst case might not fit, so a failed push consumes nothing */
    if (3 * (hn + pl) > cap) {
        uint8_t h2[4];
        size_t n2;
        size_t need = emit(head, hn + take, NULL, h2, &n2);
        if (take < pl) need += emit(p + (take - n2), pl - (take - n2), NULL, h2, &n2);
        if (need > cap) {
            *len = need;
            return brisk_fail(err, BRISK_ERR_CAPACITY, "detokenize: %zu output bytes do not fit in %zu", need, cap);
        }
    }
    size_t o = emit(head, hn + take, out, d->hold, &d->n_hold);
    if (take < pl) {
        /* whatever the head left held is the start of p[take - n_hold ..]: re-read from there */
        size_t from = take - d->n_hold;
        o += emit(p + from, pl - from, out + o, d->hold, &d->n_hold);
    }
    *len = o;
    return BRISK_OK;
}

size_t brisk_detok_flush(brisk_detok *d, char *out, size_t cap) {
    size_t n = 0;
    if (d->n_hold && cap >= 3) {
        memcpy(out, fffd, 3);
        n = 3;
    }
    d->n_hold = 0;
    return n;
}
