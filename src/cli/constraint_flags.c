/* constraint_flags: the constrained-decoding flags of run and chat, turned into a brisk_constraint. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

static const cli_opt_id flags[] = {CLI_O_GRAMMAR, CLI_O_GRAMMAR_FILE, CLI_O_JSON_SCHEMA, CLI_O_JSON_SCHEMA_FILE, CLI_O_REGEX, CLI_O_CHOICE};

bool cli_constraint_given(const cli_args *a) {
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
        if (a->set[flags[k]]) return true;
    return false;
}

brisk_status cli_constraint(const cli_args *a, const brisk_model *m, brisk_constraint **out, brisk_error *err) {
    *out = NULL;
    int given = -1;
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        if (!a->set[flags[k]]) continue;
        if (given >= 0)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "%s and %s: give at most one constraint", a->given[flags[given]], a->given[flags[k]]);
        given = (int)k;
    }
    if (given < 0) return BRISK_OK;
    const cli_opt_id id = flags[given];
    static const brisk_constraint_kind kinds[] = {BRISK_CONSTRAINT_GBNF, BRISK_CONSTRAINT_GBNF, BRISK_CONSTRAINT_JSON_SCHEMA,
                                                   BRISK_CONSTRAINT_JSON_SCHEMA, BRISK_CONSTRAINT_REGEX, BRISK_CONSTRAINT_CHOICE};
    uint8_t *file = NULL;
    size_t len = 0;
    const char *src = a->s[id];
    if (id == CLI_O_GRAMMAR_FILE || id == CLI_O_JSON_SCHEMA_FILE) {
        brisk_status st = cli_read_input(a->s[id], a->given[id], (size_t)a->i[CLI_O_MAX_INPUT] ? (size_t)a->i[CLI_O_MAX_INPUT] : (64u << 20), &file, &len, err);
        if (st) return st;
        src = (const char *)file;
    } else {
        len = strlen(src);
    }
    brisk_status st = brisk_constraint_init(out, m, kinds[given], src, len, err);
    if (st) brisk_error_prefix(err, "%s", a->given[id]);
    free(file);
    return st;
}
