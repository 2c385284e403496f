/* quantize: `brisk quantize`'s engine. It turns an F32/F16/BF16 (or, with
 * allow_requantize, a quantized) GGUF into a quantized one whose bytes are
 * llama-quantize's for the same file type: the same per-tensor type mix, the
 * same tensor order, the same metadata, the same quantized blocks.
 *
 * Two steps, both reusable on their own:
 *  - the plan (brisk_quantize_plan): which type every tensor gets. The rules
 *    are llama.cpp's (src/llama-quant.cpp), written here from its behaviour:
 *    which tensors may be quantized at all, the per-file-type mixture (more
 *    bits for attn_v / ffn_down in the first, last and every third layer ...),
 *    the tied-embedding rule, the shape fallbacks (a row that is not whole
 *    256-blocks falls back to a 32-block type, then to F16), and the user's
 *    overrides (--pure, --output-tensor-type, --token-embedding-type,
 *    --tensor-type).
 *  - the run (brisk_quantize_file): the header is computed first (every size
 *    is known from the plan), then each tensor streams through the input's
 *    mapping in slabs of rows, converted to float, quantized by the
 *    reference quantizers of quant/convert*.c on a few threads and appended,
 *    so memory stays bounded by one slab whatever the model's size. The file
 *    is written beside the target and renamed into place only when complete.
 *
 * Not thread-safe across calls sharing params; each call is independent. */
#ifndef BRISK_QUANT_QUANTIZE_H
#define BRISK_QUANT_QUANTIZE_H

#include "base/base.h"
#include "gguf/gguf.h"

/* llama.cpp's file types (llama_ftype): the value stored in general.file_type. */
typedef enum brisk_ftype {
    BRISK_FTYPE_F32 = 0,
    BRISK_FTYPE_F16 = 1,
    BRISK_FTYPE_Q4_0 = 2,
    BRISK_FTYPE_Q4_1 = 3,
    BRISK_FTYPE_Q8_0 = 7,
    BRISK_FTYPE_Q5_0 = 8,
    BRISK_FTYPE_Q5_1 = 9,
    BRISK_FTYPE_Q2_K = 10,
    BRISK_FTYPE_Q3_K_S = 11,
    BRISK_FTYPE_Q3_K_M = 12,
    BRISK_FTYPE_Q3_K_L = 13,
    BRISK_FTYPE_Q4_K_S = 14,
    BRISK_FTYPE_Q4_K_M = 15,
    BRISK_FTYPE_Q5_K_S = 16,
    BRISK_FTYPE_Q5_K_M = 17,
    BRISK_FTYPE_Q6_K = 18,
    BRISK_FTYPE_IQ4_NL = 25,
    BRISK_FTYPE_IQ4_XS = 30,
    BRISK_FTYPE_BF16 = 32,
    BRISK_FTYPE_MXFP4_MOE = 38,   /* expert (3-D) tensors MXFP4, the other quantizable ones Q8_0 */
} brisk_ftype;

/* A file type by llama-quantize's name ("Q4_K_M", aliases "Q4_K" ..., any
 * case) or number; false when brisk does not write it. */
bool brisk_ftype_parse(const char *s, brisk_ftype *out);
const char *brisk_ftype_name(brisk_ftype f);
/* The names brisk accepts, space-separated (for --help). */
const char *brisk_ftype_list(void);

/* A tensor type by ggml's name ("q8_0", "Q6_K", "f16", any case); -1 when
 * unknown or not one brisk can write. */
int brisk_quantize_type_parse(const char *s);

/* --tensor-type PATTERN=TYPE: the first pattern (a PCRE2 regex, searched in
 * the tensor name) that matches decides. */
typedef struct brisk_quantize_tensor_type {
    const char *pattern;   /* borrowed */
    uint32_t type;         /* a brisk_qtype */
} brisk_quantize_tensor_type;

/* --override-kv KEY=TYPE:VALUE, as llama-quantize writes it: int as u32 of
 * |value|, float as f32, bool, str (at most 127 bytes). */
typedef enum brisk_kv_override_kind { BRISK_KVO_INT, BRISK_KVO_FLOAT, BRISK_KVO_BOOL, BRISK_KVO_STR } brisk_kv_override_kind;
typedef struct brisk_kv_override {
    char key[128];
    brisk_kv_override_kind kind;
    int64_t i;
    double f;
    bool b;
    char s[128];
} brisk_kv_override;
/* Parse "KEY=TYPE:VALUE"; false with a message in err naming what is wrong. */
bool brisk_kv_override_parse(const char *text, brisk_kv_override *out, brisk_error *err);

struct brisk_imatrix;   /* quant/imatrix.h */

typedef void (*brisk_quantize_progress_fn)(int64_t done_bytes, int64_t total_bytes, int i_tensor, int n_tensors,
                                           const char *name, void *ud);

typedef struct brisk_quantize_params {
    brisk_ftype ftype;
    int output_tensor_type;      /* -1 = by the rules */
    int token_embedding_type;    /* -1 = by the rules */
    bool allow_requantize;       /* quantized inputs are dequantized first (else refused) */
    bool leave_output_tensor;    /* output.weight is copied as it is */
    bool pure;                   /* no mixture: every quantizable tensor gets the file type's type */
    const brisk_quantize_tensor_type *tensor_types;   /* borrowed, n_tensor_types of them */
    int n_tensor_types;
    const brisk_kv_override *kv_overrides;           /* borrowed */
    int n_kv_overrides;
    /* --imatrix: the importances (borrowed; NULL or no entries = none). A
     * quantized tensor with an entry of ne0 * ne2 values is quantized with
     * them (ggml's quantize_*_impl fits: quant/convert.h); an entry of another
     * size is an error (except for token_embd, which then goes without, as in
     * llama.cpp); the mixture's ffn_down rules for IQ4_NL/IQ4_XS and
     * Q4_0/Q5_0 change with one. The quantize.imatrix.* keys llama-quantize
     * writes are the caller's kv_overrides (brisk_quantize_imatrix_overrides). */
    const struct brisk_imatrix *imatrix;
    int n_threads;               /* 0 = all CPUs */
    size_t slab_bytes;           /* rows kept in memory at once per tensor; 0 = 64 MiB */
    brisk_quantize_progress_fn progress;   /* may be NULL; called from the calling thread */
    void *progress_ud;
} brisk_quantize_params;

void brisk_quantize_default_params(brisk_quantize_params *p);

/* One tensor of the output, in output order (llama.cpp's: by layer number,
 * then by name; tensors outside blk.N come first). */
typedef struct brisk_quantize_item {
    const brisk_gguf_tensor *src;   /* borrowed from the input */
    char name[BRISK_GGUF_MAX_NAME + 1];
    uint32_t n_dims;                /* trailing 1-dims dropped, as ggml writes them */
    uint32_t type;                  /* output type */
    uint64_t nbytes;                /* output bytes */
    uint64_t offset;                /* in the output's data section */
    bool fallback;                  /* the rule's type did not fit the row length */
    const float *imatrix;           /* its importances (ne0 per expert), NULL: none */
} brisk_quantize_item;

typedef struct brisk_quantize_plan {
    brisk_quantize_item *items;     /* n_items, owned */
    int n_items;
    int n_fallback;
} brisk_quantize_plan;

/* The output type of every tensor of g. Errors (BRISK_ERR_FORMAT /
 * BRISK_ERR_UNSUPPORTED / BRISK_ERR_INVALID_ARG) name the key or tensor:
 * missing architecture or block count, a quantized input without
 * allow_requantize, a bad --tensor-type regex, a type brisk cannot convert. */
brisk_status brisk_quantize_plan_make(const brisk_gguf *g, const brisk_quantize_params *p, brisk_quantize_plan *out,
                                      brisk_error *err);
void brisk_quantize_plan_free(brisk_quantize_plan *plan);

/* The same plan without a file: the model facts the rules read and a tensor
 * table (names, shapes and source types; data unused), e.g. brisk synth's
 * shapes, which it writes in a file type's mixture without an F16 file first.
 * The items' src point into tensors, which must outlive the plan. */
typedef struct brisk_quantize_model {
    const char *arch;                     /* general.architecture */
    uint32_t n_layer, n_expert, n_head, n_head_kv;
} brisk_quantize_model;
brisk_status brisk_quantize_plan_tensors(const brisk_quantize_model *model, const brisk_gguf_tensor *tensors, int n_tensors,
                                         const brisk_quantize_params *p, brisk_quantize_plan *out, brisk_error *err);

/* The keys llama-quantize adds for an importance matrix, as --override-kv
 * entries to append after the user's: quantize.imatrix.file (path, at most
 * 127 bytes), .dataset (when the file names one), .entries_count and
 * .chunks_count (when above 0). Fills out[0..*n) (room for 4). */
void brisk_quantize_imatrix_overrides(const struct brisk_imatrix *m, const char *path, brisk_kv_override *out, int *n);

/* Where the output goes: begin (may be NULL) learns the file's size before
 * the first write; write appends (an error stops the run). release_input: the
 * input is a file mapping whose pages may be dropped once read. */
typedef struct brisk_quantize_sink {
    brisk_status (*begin)(void *ud, uint64_t total_bytes, brisk_error *err);
    brisk_status (*write)(void *ud, const void *data, size_t n, brisk_error *err);
    void *ud;
    bool release_input;
} brisk_quantize_sink;

/* The whole output of g into sink (the engine under brisk_quantize_file; tests
 * and the fuzzer write to memory). */
brisk_status brisk_quantize_gguf(const brisk_gguf *g, const brisk_quantize_params *p, const brisk_quantize_sink *sink,
                                 brisk_error *err);

/* Quantize in_path into out_path (temp file + rename; '-' and /dev/null are
 * written straight). The same file for both is refused. On any error nothing
 * is left at out_path. */
brisk_status brisk_quantize_file(const char *in_path, const char *out_path, const brisk_quantize_params *p,
                                 brisk_error *err);

#endif
