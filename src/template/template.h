/* template: chat templates, a Jinja subset rendered byte-identically to
 * Python jinja2 the way Hugging Face transformers' apply_chat_template does
 * (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
 * a json.dumps-style tojson, raise_exception and strftime_now globals).
 *
 * A parsed template is immutable: any number of threads may render it at
 * once. Each render owns its memory (an arena freed at the end) and has hard
 * caps on output size, work (docs/TEMPLATES.md "Limits"), nesting, call depth
 * and memory, so a hostile
 * template fails with an error instead of hanging or exhausting the machine.
 *
 * Errors:
 *   BRISK_ERR_TEMPLATE     the template is invalid or failed at render time the
 *                          way jinja2 would fail (syntax error, undefined
 *                          variable, type error, ...). For raise_exception(msg)
 *                          err->msg is exactly msg (truncated to fit).
 *   BRISK_ERR_UNSUPPORTED  the template uses a construct brisk does not
 *                          implement; the message names it and the line.
 *   BRISK_ERR_CAPACITY     a render cap was hit (output, steps, depth, memory).
 *   BRISK_ERR_INVALID_ARG  messages/extra variables are not valid JSON of the
 *                          right shape.
 * docs/TEMPLATES.md lists the supported subset. */
#ifndef BRISK_TEMPLATE_H
#define BRISK_TEMPLATE_H

#include "base/base.h"

#include <time.h>

typedef struct brisk_template brisk_template;

/* Parse src[0..len) (need not be NUL-terminated). On success *out owns a
 * copy of everything it needs; src may be freed. */
brisk_status brisk_template_parse(const char *src, size_t len, brisk_template **out, brisk_error *err);
void brisk_template_free(brisk_template *t);   /* NULL is a no-op */

/* Render limits and the clock. Zero fields mean "default". The work budget
 * counts what a render costs: one unit per evaluation step, per element
 * visited, copied, compared or hashed, and per 64 bytes scanned or produced;
 * the default keeps any render under about a second on one core while real
 * chat templates use under 0.1% of it (docs/TEMPLATES.md). */
typedef struct brisk_template_opts {
    time_t now;              /* strftime_now's clock (local time); 0 = the real clock */
    size_t max_output;       /* bytes of output (default 64 MiB) */
    size_t max_memory;       /* bytes of render arena (default 512 MiB) */
    uint64_t max_steps;      /* evaluation steps (default: no cap beyond max_work) */
    int max_depth;           /* nested macro calls / loops (default 200) */
    uint64_t max_work;       /* work units (default 50 M) */
} brisk_template_opts;

/* Render with messages_json (a JSON array, bound to `messages`) and
 * extra_vars_json (a JSON object, NULL = {}; each member becomes a variable:
 * tools, add_generation_prompt, bos_token, eos_token, enable_thinking, ...).
 * As in transformers, `tools` and `documents` default to None and
 * `add_generation_prompt` to False when not given.
 * *out: malloc'd, NUL-terminated (the output may itself contain NULs; *out_len
 * is exact). Caller frees. out_len may be NULL. */
brisk_status brisk_template_render(const brisk_template *t, const char *messages_json, const char *extra_vars_json,
                                   char **out, size_t *out_len, brisk_error *err);
brisk_status brisk_template_render_ex(const brisk_template *t, const char *messages_json,
                                      const char *extra_vars_json, const brisk_template_opts *opts, char **out,
                                      size_t *out_len, brisk_error *err);

/* Parse "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SS" (local time) for opts.now,
 * e.g. from the BRISK_TEMPLATE_NOW environment variable the CLI honours. */
brisk_status brisk_template_parse_time(const char *s, time_t *out, brisk_error *err);

#endif
