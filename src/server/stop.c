/* stop: see stop.h. The held text is at most the longest stop string minus
 * one byte between pushes, so a push costs O(held + len) per string. */
#include "server/stop.h"

#include <stdlib.h>
#include <string.h>

void srv_stop_init(srv_stop *s, char *const *text, int n) {
    memset(s, 0, sizeof *s);
    s->text = text;
    s->n = n;
}

bool srv_stop_push(srv_stop *s, const char *text, size_t len, const char **out, size_t *out_len) {
    *out = "";
    *out_len = 0;
    if (s->hit) return true;
    if (s->n == 0) {
        *out = text;
        *out_len = len;
        return true;
    }
    if (s->held_len + len + 1 > s->held_cap) {
        size_t cap = s->held_cap ? s->held_cap : 64;
        while (cap < s->held_len + len + 1) cap *= 2;
        char *g = realloc(s->held, cap);
        if (!g) return false;
        s->held = g;
        s->held_cap = cap;
    }
    memcpy(s->held + s->held_len, text, len);
    s->held_len += len;
    /* the earliest match of any stop string ends generation there */
    size_t first = s->held_len;
    int which = -1;
    for (int k = 0; k < s->n; k++) {
        const char *m = memmem(s->held, s->held_len, s->text[k], strlen(s->text[k]));
        if (m && (size_t)(m - s->held) < first) {
            first = (size_t)(m - s->held);
            which = k;
        }
    }
    if (first < s->held_len) {
        s->hit = true;
        s->which = which;
        *out = s->held;
        *out_len = first;
        s->held_len = 0;   /* the caller reads *out before the next call, which returns early */
        return true;
    }
    /* hold the longest suffix that is a proper prefix of some stop string */
    size_t keep = 0;
    for (int k = 0; k < s->n; k++) {
        const size_t sl = strlen(s->text[k]);
        for (size_t j = sl - 1 < s->held_len ? sl - 1 : s->held_len; j > keep; j--)
            if (memcmp(s->held + s->held_len - j, s->text[k], j) == 0) {
                keep = j;
                break;
            }
    }
    /* the released bytes are copied out of the way of the held ones: the
     * caller's view must survive the memmove below, so release through a
     * second buffer region past held_len */
    const size_t rel = s->held_len - keep;
    if (rel == 0) return true;
    if (s->held_len + rel + 1 > s->held_cap) {
        size_t cap = s->held_cap;
        while (cap < s->held_len + rel + 1) cap *= 2;
        char *g = realloc(s->held, cap);
        if (!g) return false;
        s->held = g;
        s->held_cap = cap;
    }
    memcpy(s->held + s->held_len, s->held, rel);          /* out copy after the live bytes */
    memmove(s->held, s->held + rel, keep);                /* the kept suffix to the front */
    memmove(s->held + keep, s->held + s->held_len, rel);  /* the out copy right after it */
    s->held_len = keep;
    *out = s->held + keep;
    *out_len = rel;
    return true;
}

void srv_stop_flush(srv_stop *s, const char **out, size_t *out_len) {
    *out = s->held ? s->held : "";
    *out_len = s->hit ? 0 : s->held_len;
    s->held_len = 0;
}

void srv_stop_free(srv_stop *s) {
    free(s->held);
    memset(s, 0, sizeof *s);
}
