/* brisk.h: the public C API of the brisk inference engine.
 *
 * Handles are opaque. Every fallible call returns brisk_status (BRISK_OK = 0,
 * errors negative) and, when given a brisk_error, fills it with a message that
 * names what was wrong. Nothing here calls exit() or abort() on bad input.
 *
 * Thread safety: a loaded brisk_model is immutable and may be shared by any
 * number of threads. A brisk_context (and the sequences in it) belongs to one
 * thread at a time. Samplers own their RNG and are not shared.
 *
 * This header includes only standard headers and compiles as C++. */
#ifndef BRISK_H
#define BRISK_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and errors ----------------------------------------------------- */

typedef enum brisk_status {
    BRISK_OK               =  0,
    BRISK_ERR_INVALID_ARG  = -1,  /* a parameter, flag or token id out of range */
    BRISK_ERR_IO           = -2,  /* open/read/map/write failed */
    BRISK_ERR_FORMAT       = -3,  /* a file is malformed (bad magic, bad offsets ...) */
    BRISK_ERR_UNSUPPORTED  = -4,  /* well-formed but not supported (architecture, type) */
    BRISK_ERR_NOMEM        = -5,  /* an allocation failed */
    BRISK_ERR_CAPACITY     = -6,  /* a request does not fit a configured limit (KV, batch) */
    BRISK_ERR_TEMPLATE     = -7,  /* a chat template failed to render */
} brisk_status;

/* Caller-owned error report; msg is always NUL-terminated. */
typedef struct brisk_error {
    brisk_status status;
    char msg[512];
} brisk_error;

/* Static name of a status ("invalid argument", ...). */
const char *brisk_status_str(brisk_status st);

#ifdef __cplusplus
}
#endif
#endif /* BRISK_H */
