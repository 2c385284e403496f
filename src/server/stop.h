/* stop: stop strings over streamed text. Text that could still turn into a
 * stop string is held back, so a client never sees part of one: each push
 * returns the bytes that are safe to send, and the match itself (with
 * everything after it) is never sent, as OpenAI specifies. */
#ifndef BRISK_SERVER_STOP_H
#define BRISK_SERVER_STOP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct srv_stop {
    char *const *text;     /* borrowed stop strings, NUL-terminated, non-empty */
    int n;
    char *held;            /* bytes not yet released */
    size_t held_len, held_cap;
    bool hit;              /* a stop string matched: nothing more is released */
    int which;             /* after a hit: the index of the string that matched (the earliest match) */
} srv_stop;

void srv_stop_init(srv_stop *s, char *const *text, int n);
/* Append text[0..len). *out (borrowed until the next call) receives the bytes
 * that can no longer be part of a stop string, or, when one matched, the
 * bytes before it (then s->hit). false when out of memory. */
bool srv_stop_push(srv_stop *s, const char *text, size_t len, const char **out, size_t *out_len);
/* At the end of generation: whatever is still held (nothing after a hit). */
void srv_stop_flush(srv_stop *s, const char **out, size_t *out_len);
void srv_stop_free(srv_stop *s);

#endif
