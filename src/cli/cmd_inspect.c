/* cmd_inspect: `brisk inspect` — a GGUF file's metadata and tensor table.
 * It reads the container itself (the gguf module), not a loaded model, so it
 * also works on vocab-only files and models of unsupported architectures. */
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <stdio.h>
#include <string.h>

static const cli_use inspect_uses[] = {
    {.id = CLI_O_MODEL, .help = "the GGUF file (or give it as the argument)"}, {.id = CLI_O_ALL}, {.id = CLI_O_END},
};

static const cli_spec inspect_spec = {
    .name = "inspect",
    .usage = "MODEL.gguf [--all]",
    .about = "Prints the GGUF version, every metadata key with its type and value (arrays\n"
             "show their length and first elements; --all prints them whole), then the\n"
             "tensor table: name, type, shape, offset and size.\n",
    .uses = inspect_uses,
    .positional = "file",
    .max_positional = 1,
};

static void print_str(brisk_str s, size_t max) {
    putchar('"');
    for (size_t i = 0; i < s.len && i < max; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
    if (s.len > max) printf("...(%zu bytes)", s.len);
}

static void print_value(const brisk_gguf_value *v, bool all, int depth) {
    switch (v->type) {
    case BRISK_GGUF_UINT8: case BRISK_GGUF_UINT16: case BRISK_GGUF_UINT32: case BRISK_GGUF_UINT64:
        printf("%llu", (unsigned long long)v->v.u64); break;
    case BRISK_GGUF_INT8: case BRISK_GGUF_INT16: case BRISK_GGUF_INT32: case BRISK_GGUF_INT64:
        printf("%lld", (long long)v->v.i64); break;
    case BRISK_GGUF_FLOAT32: case BRISK_GGUF_FLOAT64: printf("%g", v->v.f64); break;
    case BRISK_GGUF_BOOL: printf("%s", v->v.u64 ? "true" : "false"); break;
    case BRISK_GGUF_STRING: print_str(v->v.str, all ? (size_t)-1 : 200); break;
    case BRISK_GGUF_ARRAY: {
        const uint64_t n = v->v.arr.count, show = all ? n : (n < 8 ? n : 8);
        printf("[%s x %llu] [", brisk_gguf_type_name(v->v.arr.elem_type), (unsigned long long)n);
        size_t off = 0;   /* walked in order: value_at is O(i) for strings, and --all prints 152K-token vocabularies */
        for (uint64_t i = 0; i < show && depth < 4; i++) {
            brisk_gguf_value e;
            if (brisk_gguf_value_next(v, &off, &e, NULL) != BRISK_OK) break;
            if (i) printf(", ");
            print_value(&e, all, depth + 1);
        }
        printf("%s]", show < n ? ", ..." : "");
        break;
    }
    default: printf("?"); break;
    }
}

int brisk_cmd_inspect(int argc, char **argv) {
    cli_args a;
    int code;
    if (!cli_parse(&inspect_spec, argc, argv, &a, &code)) {
        cli_args_free(&a);
        return code;
    }
    const char *path = a.s[CLI_O_MODEL];
    const bool all = a.i[CLI_O_ALL];
    if (a.n_pos && path) {
        cli_args_free(&a);
        return cli_usage("inspect", "one file at a time (-m and an argument given)");
    }
    if (a.n_pos) path = a.pos[0];
    cli_args_free(&a);
    if (!path) return cli_usage("inspect", "a GGUF file is required (see brisk inspect --help)");
    brisk_error err = {0};
    brisk_gguf *g = NULL;
    if (brisk_gguf_open(path, &g, &err)) {
        fprintf(stderr, "brisk inspect: %s\n", err.msg);
        return 1;
    }
    printf("file: %s\nGGUF version %u, %zu bytes, %llu metadata keys, %llu tensors, alignment %u\n\nmetadata:\n", path, g->version,
           g->size, (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors, g->alignment);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const brisk_gguf_kv *kv = &g->kv[i];
        printf("  %.*s (%s) = ", (int)kv->key.len, kv->key.ptr, brisk_gguf_type_name(kv->value.type));
        print_value(&kv->value, all, 0);
        putchar('\n');
    }
    printf("\ntensors:\n  %-40s %-6s %-24s %12s %12s\n", "name", "type", "shape", "offset", "bytes");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const brisk_gguf_tensor *t = &g->tensors[i];
        char shape[64] = "[";
        for (uint32_t d = 0; d < t->n_dims; d++) {
            char part[24];
            snprintf(part, sizeof part, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
            strncat(shape, part, sizeof shape - strlen(shape) - 2);
        }
        strcat(shape, "]");
        printf("  %-40.*s %-6s %-24s %12llu %12llu\n", (int)t->name.len, t->name.ptr, brisk_qtype_name(t->type), shape,
               (unsigned long long)t->offset, (unsigned long long)t->nbytes);
    }
    brisk_gguf_close(g);
    return cli_stdout_finish("inspect", CLI_EXIT_OK);
}
