/* fuzz_quantize: libFuzzer target for `brisk quantize`'s plan and run.
 * Input: one control byte, then a GGUF file. The byte picks the file type
 * and the options (pure, leave-output, allow-requantize, a --tensor-type,
 * an --override-kv, output/embedding types); the GGUF goes through the reader,
 * the plan and the run into memory. A refusal must be a one-line message; a
 * success must be a GGUF that parses back with the planned types and sizes,
 * of exactly the size announced to the sink. */
#include "fuzz_check.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mem {
    uint8_t *p;
    size_t len, cap;
    uint64_t announced;
    bool began;
} mem;

static brisk_status mem_begin(void *ud, uint64_t total, brisk_error *err) {
    mem *m = ud;
    if (total > (64u << 20)) return brisk_fail(err, BRISK_ERR_CAPACITY, "output of %llu bytes is over the fuzz cap",
                                               (unsigned long long)total);
    m->announced = total;
    m->began = true;
    return BRISK_OK;
}

static brisk_status mem_write(void *ud, const void *data, size_t n, brisk_error *err) {
    mem *m = ud;
    FUZZ_CHECK(m->began);
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + n) cap *= 2;
        uint8_t *np = realloc(m->p, cap);
        if (!np) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
        m->p = np;
        m->cap = cap;
    }
    memcpy(m->p + m->len, data, n);
    m->len += n;
    return BRISK_OK;
}

static const brisk_ftype ftypes[16] = {
    BRISK_FTYPE_Q4_0, BRISK_FTYPE_Q4_1, BRISK_FTYPE_Q5_0, BRISK_FTYPE_Q5_1, BRISK_FTYPE_Q8_0, BRISK_FTYPE_Q2_K,
    BRISK_FTYPE_Q3_K_S, BRISK_FTYPE_Q3_K_M, BRISK_FTYPE_Q3_K_L, BRISK_FTYPE_Q4_K_S, BRISK_FTYPE_Q4_K_M,
    BRISK_FTYPE_Q5_K_S, BRISK_FTYPE_Q5_K_M, BRISK_FTYPE_Q6_K, BRISK_FTYPE_F16, BRISK_FTYPE_BF16,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t ctl = data[0];
    brisk_gguf *g = NULL;
    brisk_error err = {0};
    /* the file as a mapping would hold it: aligned (data + 1 is not) */
    uint8_t *file = malloc(size);
    FUZZ_CHECK(file);
    memcpy(file, data + 1, size - 1);
    if (brisk_gguf_parse(file, size - 1, &g, &err) != BRISK_OK) {
        free(file);
        return 0;
    }
    brisk_quantize_params p;
    brisk_quantize_default_params(&p);
    p.ftype = ftypes[ctl & 15];
    /* the lookup-table file types, picked by the input's last byte (tensor
     * data, so the seeds' own choices above stay as they were) */
    static const brisk_ftype lut4[4] = {BRISK_FTYPE_IQ4_NL, BRISK_FTYPE_IQ4_XS, BRISK_FTYPE_MXFP4_MOE, BRISK_FTYPE_IQ4_XS};
    if (size > 1 && (data[size - 1] & 0xc0) == 0xc0) p.ftype = lut4[data[size - 1] & 3];
    p.n_threads = 1 + (ctl >> 7);
    p.slab_bytes = 4096;
    p.pure = ctl & 16;
    p.leave_output_tensor = ctl & 32;
    p.allow_requantize = ctl & 64;
    const brisk_quantize_tensor_type tt[2] = {{"attn_(q|v)", BRISK_Q_Q8_0}, {"^blk\\.1\\.", BRISK_Q_F16}};
    brisk_kv_override kv[2];
    FUZZ_CHECK(brisk_kv_override_parse("general.name=str:fuzz", &kv[0], &err));
    FUZZ_CHECK(brisk_kv_override_parse("general.file_type=int:-3", &kv[1], &err));
    if ((ctl & 3) == 1) {
        p.tensor_types = tt;
        p.n_tensor_types = 2;
        p.kv_overrides = kv;
        p.n_kv_overrides = 2;
        p.output_tensor_type = BRISK_Q_Q4_K;
        p.token_embedding_type = BRISK_Q_Q5_1;
    }
    mem m = {0};
    const brisk_quantize_sink sink = {.begin = mem_begin, .write = mem_write, .ud = &m};
    err.msg[0] = 0;
    const brisk_status st = brisk_quantize_gguf(g, &p, &sink, &err);
    if (st != BRISK_OK) {
        FUZZ_CHECK(err.msg[0] && !strchr(err.msg, '\n'));
    } else {
        FUZZ_CHECK(m.len == m.announced);
        brisk_quantize_plan plan;
        FUZZ_CHECK(brisk_quantize_plan_make(g, &p, &plan, &err) == BRISK_OK);
        brisk_gguf *back = NULL;
        const brisk_status bst = brisk_gguf_parse(m.p, m.len, &back, &err);
        if (bst != BRISK_OK) fprintf(stderr, "fuzz_quantize: output does not parse: %s\n", err.msg);
        FUZZ_CHECK(bst == BRISK_OK);
        FUZZ_CHECK(back->n_tensors == (uint64_t)plan.n_items);
        for (int i = 0; i < plan.n_items; i++) {
            const brisk_gguf_tensor *t = brisk_gguf_find_tensor(back, plan.items[i].name);
            FUZZ_CHECK(t && t->type == plan.items[i].type && t->nbytes == plan.items[i].nbytes);
        }
        brisk_gguf_close(back);
        brisk_quantize_plan_free(&plan);
    }
    free(m.p);
    brisk_gguf_close(g);
    free(file);
    return 0;
}
