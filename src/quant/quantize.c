/* quantize: the plan (which type each tensor gets) and the streaming run of
 * `brisk quantize` (see quantize.h). The rules are llama.cpp's (read in its
 * src/llama-quant.cpp, written anew here, checked on its outputs); every rule that changes a type
 * is a branch of plan_rule_type below, in the order llama.cpp applies them,
 * because the order decides which rule wins. */
#include "quant/quantize.h"
#include "base/pool.h"
#include "quant/blocks.h"
#include "quant/convert.h"
#include "quant/imatrix.h"
#include "quant/quant.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define QUANT_ALIGN 32           /* llama-quantize pads to ggml's default alignment */
#define QUANT_MAX_LAYERS 512     /* llama.cpp's LLAMA_MAX_LAYERS */
#define QUANT_VERSION 2          /* general.quantization_version (ggml's GGML_QNT_VERSION) */

/* ---- file types --------------------------------------------------------------- */

typedef struct ftype_row {
    const char *name;
    brisk_ftype ftype;
    uint32_t base;   /* the type every quantizable tensor starts from */
} ftype_row;

static const ftype_row ftype_rows[] = {
    {"Q4_0", BRISK_FTYPE_Q4_0, BRISK_Q_Q4_0},     {"Q4_1", BRISK_FTYPE_Q4_1, BRISK_Q_Q4_1},
    {"Q5_0", BRISK_FTYPE_Q5_0, BRISK_Q_Q5_0},     {"Q5_1", BRISK_FTYPE_Q5_1, BRISK_Q_Q5_1},
    {"Q2_K", BRISK_FTYPE_Q2_K, BRISK_Q_Q2_K},     {"Q3_K", BRISK_FTYPE_Q3_K_M, BRISK_Q_Q3_K},
    {"Q3_K_S", BRISK_FTYPE_Q3_K_S, BRISK_Q_Q3_K}, {"Q3_K_M", BRISK_FTYPE_Q3_K_M, BRISK_Q_Q3_K},
    {"Q3_K_L", BRISK_FTYPE_Q3_K_L, BRISK_Q_Q3_K}, {"Q4_K", BRISK_FTYPE_Q4_K_M, BRISK_Q_Q4_K},
    {"Q4_K_S", BRISK_FTYPE_Q4_K_S, BRISK_Q_Q4_K}, {"Q4_K_M", BRISK_FTYPE_Q4_K_M, BRISK_Q_Q4_K},
    {"Q5_K", BRISK_FTYPE_Q5_K_M, BRISK_Q_Q5_K},   {"Q5_K_S", BRISK_FTYPE_Q5_K_S, BRISK_Q_Q5_K},
    {"Q5_K_M", BRISK_FTYPE_Q5_K_M, BRISK_Q_Q5_K}, {"Q6_K", BRISK_FTYPE_Q6_K, BRISK_Q_Q6_K},
    {"Q8_0", BRISK_FTYPE_Q8_0, BRISK_Q_Q8_0},     {"IQ4_NL", BRISK_FTYPE_IQ4_NL, BRISK_Q_IQ4_NL},
    {"IQ4_XS", BRISK_FTYPE_IQ4_XS, BRISK_Q_IQ4_XS}, {"MXFP4_MOE", BRISK_FTYPE_MXFP4_MOE, BRISK_Q_MXFP4},
    {"F16", BRISK_FTYPE_F16, BRISK_Q_F16},
    {"BF16", BRISK_FTYPE_BF16, BRISK_Q_BF16},     {"F32", BRISK_FTYPE_F32, BRISK_Q_F32},
};

static const ftype_row *ftype_row_of(brisk_ftype f) {
    for (size_t i = 0; i < BRISK_ARRAY_LEN(ftype_rows); i++)
        if (ftype_rows[i].ftype == f && strcmp(ftype_rows[i].name, "Q3_K") && strcmp(ftype_rows[i].name, "Q4_K") &&
            strcmp(ftype_rows[i].name, "Q5_K"))
            return &ftype_rows[i];
    return NULL;
}

bool brisk_ftype_parse(const char *s, brisk_ftype *out) {
    for (size_t i = 0; i < BRISK_ARRAY_LEN(ftype_rows); i++)
        if (!strcasecmp(s, ftype_rows[i].name)) {
            *out = ftype_rows[i].ftype;
            return true;
        }
    /* a number, as llama-quantize also takes it */
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s && end && !*end && !errno)
        for (size_t i = 0; i < BRISK_ARRAY_LEN(ftype_rows); i++)
            if ((long)ftype_rows[i].ftype == v) {
                *out = ftype_rows[i].ftype;
                return true;
            }
    return false;
}

const char *brisk_ftype_name(brisk_ftype f) {
    const ftype_row *r = ftype_row_of(f);
    return r ? r->name : "unknown";
}

const char *brisk_ftype_list(void) {
    return "Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M (Q3_K) Q3_K_L Q4_K_S Q4_K_M (Q4_K) Q5_K_S Q5_K_M (Q5_K) "
           "Q6_K IQ4_NL IQ4_XS MXFP4_MOE F16 BF16 F32";
}

static bool type_writable(uint32_t t) {
    return t != BRISK_Q_Q8_1 && t != BRISK_Q_Q8_K && brisk_qtype_get(t) && brisk_qtype_from_float(t);
}

int brisk_quantize_type_parse(const char *s) {
    for (uint32_t t = 0; t < BRISK_Q_TYPE_LIMIT; t++)
        if (type_writable(t) && !strcasecmp(s, brisk_qtype_name(t))) return (int)t;
    return -1;
}

static bool is_quantized(uint32_t t) {
    return t != BRISK_Q_F32 && t != BRISK_Q_F16 && t != BRISK_Q_BF16;
}

/* ---- --override-kv ---------------------------------------------------------------- */

bool brisk_kv_override_parse(const char *text, brisk_kv_override *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    const char *eq = strchr(text, '=');
    if (!eq || eq == text || (size_t)(eq - text) >= sizeof out->key) {
        brisk_fail(err, BRISK_ERR_INVALID_ARG, "--override-kv '%s': expected KEY=TYPE:VALUE with a key of 1..127 bytes", text);
        return false;
    }
    memcpy(out->key, text, (size_t)(eq - text));
    const char *v = eq + 1;
    char *end = NULL;
    if (!strncmp(v, "int:", 4)) {
        v += 4;
        errno = 0;
        out->i = strtoll(v, &end, 10);
        if (!*v || *end || errno) goto bad_value;
        if (out->i < -(int64_t)UINT32_MAX || out->i > (int64_t)UINT32_MAX) {
            brisk_fail(err, BRISK_ERR_INVALID_ARG, "--override-kv '%s': an int override is stored as u32; |%s| is too large", text, v);
            return false;
        }
        out->kind = BRISK_KVO_INT;
    } else if (!strncmp(v, "float:", 6)) {
        v += 6;
        errno = 0;
        out->f = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(out->f) || !isfinite((float)out->f)) goto bad_value;
        out->kind = BRISK_KVO_FLOAT;
    } else if (!strncmp(v, "bool:", 5)) {
        v += 5;
        if (!strcmp(v, "true")) out->b = true;
        else if (!strcmp(v, "false")) out->b = false;
        else goto bad_value;
        out->kind = BRISK_KVO_BOOL;
    } else if (!strncmp(v, "str:", 4)) {
        v += 4;
        if (strlen(v) >= sizeof out->s) {
            brisk_fail(err, BRISK_ERR_INVALID_ARG, "--override-kv '%s': a string value is at most 127 bytes", text);
            return false;
        }
        strcpy(out->s, v);
        out->kind = BRISK_KVO_STR;
    } else {
        brisk_fail(err, BRISK_ERR_INVALID_ARG, "--override-kv '%s': TYPE must be int, float, bool or str", text);
        return false;
    }
    return true;
bad_value:
    brisk_fail(err, BRISK_ERR_INVALID_ARG, "--override-kv '%s': '%s' is not a valid value of its type", text, v);
    return false;
}

void brisk_quantize_default_params(brisk_quantize_params *p) {
    memset(p, 0, sizeof *p);
    p->ftype = BRISK_FTYPE_Q8_0;
    p->output_tensor_type = -1;
    p->token_embedding_type = -1;
}

/* ---- the plan ------------------------------------------------------------------------ */

typedef enum tensor_role {
    ROLE_TOKEN_EMBD, ROLE_ATTN_Q, ROLE_ATTN_V, ROLE_ATTN_K, ROLE_ATTN_QKV, ROLE_ATTN_KV_B, ROLE_ATTN_OUT,
    ROLE_FFN_UP, ROLE_FFN_GATE, ROLE_FFN_DOWN, ROLE_OUTPUT, ROLE_OTHER
} tensor_role;

static tensor_role role_of(const char *name) {
    if (!strcmp(name, "output.weight")) return ROLE_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")) return ROLE_TOKEN_EMBD;
    if (strstr(name, "attn_qkv.weight")) return ROLE_ATTN_QKV;
    if (strstr(name, "attn_kv_b.weight")) return ROLE_ATTN_KV_B;
    if (strstr(name, "attn_v.weight")) return ROLE_ATTN_V;
    if (strstr(name, "attn_k.weight")) return ROLE_ATTN_K;
    if (strstr(name, "attn_q.weight")) return ROLE_ATTN_Q;
    if (strstr(name, "attn_output.weight")) return ROLE_ATTN_OUT;
    if (strstr(name, "ffn_up")) return ROLE_FFN_UP;
    if (strstr(name, "ffn_gate")) return ROLE_FFN_GATE;
    if (strstr(name, "ffn_down")) return ROLE_FFN_DOWN;
    return ROLE_OTHER;
}

/* attn_v and the tensors that carry V (fused QKV, MLA's kv_b): the most
 * sensitive to quantization, so the mixtures give them more bits. */
static bool role_is_v(tensor_role r) { return r == ROLE_ATTN_V || r == ROLE_ATTN_QKV || r == ROLE_ATTN_KV_B; }

/* Small or special tensors llama.cpp never quantizes (by name). */
static const char *const never_quantized[] = {
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
    "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
    "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight",
    "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
    "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_",
    ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
};

static bool may_quantize(const brisk_quantize_params *p, const char *name, uint32_t n_dims) {
    if (n_dims < 2) return false;
    const size_t len = strlen(name);
    /* "ends with weight"; llama.cpp's test (rfind == size - 6) also passes a 5-byte name */
    if (!(len == 5 || (len >= 6 && !strcmp(name + len - 6, "weight")))) return false;
    if (p->leave_output_tensor && !strcmp(name, "output.weight")) return false;
    if (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight")) return false;
    for (size_t i = 0; i < BRISK_ARRAY_LEN(never_quantized); i++)
        if (strstr(name, never_quantized[i])) return false;
    return true;
}

/* The model facts the rules read. */
typedef struct plan_model {
    char arch[64];
    uint32_t n_layer;
    uint32_t n_expert;
    uint32_t n_gqa;        /* head_count / head_count_kv of layer 0; 0 when head_count_kv is 0 */
    bool is_70b;           /* llama.cpp's LLM_TYPE_70B, which gives Llama-2/3-70B's small attn_v more bits */
    bool falcon;
    bool tied;             /* no output.weight: the token embedding is also the output projection */
} plan_model;

typedef struct plan_state {
    const brisk_quantize_params *p;
    plan_model m;
    pcre2_code **re;       /* one per --tensor-type */
    pcre2_match_data *md;
    int n_attn_v, i_attn_v, i_ffn_down, i_ffn_gate, i_ffn_up;
    bool has_imatrix;
} plan_state;

/* llama.cpp's "use more bits" layers: the first and last eighth, and every third between. */
static bool more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* "blk.%d." as sscanf reads it: the number after "blk." (spaces and a sign allowed). */
static bool layer_of_name(const char *name, int *layer) {
    if (strncmp(name, "blk.", 4)) return false;
    const char *s = name + 4;
    while (isspace((unsigned char)*s)) s++;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s) return false;
    if (errno || v > INT32_MAX || v < INT32_MIN) v = v < 0 ? INT32_MIN : INT32_MAX;
    *layer = (int)v;
    return true;
}

/* The layer index the ffn rules use: a running count of ffn tensors of that
 * kind, or (with experts, whose tensors need not come in layer order) the
 * number in the name. */
static brisk_status ffn_layer(const plan_state *s, int counter, const char *name, int *layer, brisk_error *err) {
    *layer = counter;
    if (s->m.n_expert > 1) {
        if (!layer_of_name(name, layer))
            return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': cannot tell its layer (expected blk.N.)", name);
        if (*layer < 0 || *layer >= (int)s->m.n_layer)
            return brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': layer %d is outside [0, %u)", name, *layer, s->m.n_layer);
    }
    return BRISK_OK;
}

/* The file type's mixture: the type one quantizable tensor gets. */
static brisk_status plan_rule_type(plan_state *s, uint32_t t, const brisk_gguf_tensor *src, const char *name,
                                   tensor_role role, uint32_t *out, brisk_error *err) {
    const brisk_ftype ft = s->p->ftype;
    const plan_model *m = &s->m;
    const int n_layer = (int)m->n_layer;
    brisk_status st;
    int il;
    if (role == ROLE_OUTPUT || (m->tied && role == ROLE_TOKEN_EMBD)) {
        if (s->p->output_tensor_type >= 0) {
            t = (uint32_t)s->p->output_tensor_type;
        } else {
            const int64_t blk = brisk_qtype_get(t)->block_elems;
            if (ft == BRISK_FTYPE_MXFP4_MOE || m->falcon || src->ne[0] % blk != 0) t = BRISK_Q_Q8_0;
            else if (t != BRISK_Q_Q8_0) t = BRISK_Q_Q6_K;
        }
    } else if (ft == BRISK_FTYPE_MXFP4_MOE) {
        /* expert tensors (a third dimension) MXFP4, everything else Q8_0; llama.cpp's
         * bailingmoe3 also has 3-D MLA projections, so there only the FFN experts count */
        const bool ffn = role == ROLE_FFN_UP || role == ROLE_FFN_GATE || role == ROLE_FFN_DOWN;
        t = src->ne[2] > 1 && (strcmp(m->arch, "bailingmoe3") || ffn) ? BRISK_Q_MXFP4 : BRISK_Q_Q8_0;
    } else if (role == ROLE_TOKEN_EMBD) {
        if (s->p->token_embedding_type >= 0) t = (uint32_t)s->p->token_embedding_type;
    } else if (role_is_v(role)) {
        if (ft == BRISK_FTYPE_Q2_K) t = m->n_gqa >= 4 ? BRISK_Q_Q4_K : BRISK_Q_Q3_K;
        else if (ft == BRISK_FTYPE_Q3_K_M) t = s->i_attn_v < 2 ? BRISK_Q_Q5_K : BRISK_Q_Q4_K;
        else if (ft == BRISK_FTYPE_Q3_K_L) t = BRISK_Q_Q5_K;
        else if ((ft == BRISK_FTYPE_IQ4_NL || ft == BRISK_FTYPE_IQ4_XS) && m->n_gqa >= 4) t = BRISK_Q_Q5_K;
        else if ((ft == BRISK_FTYPE_Q4_K_M || ft == BRISK_FTYPE_Q5_K_M) && more_bits(s->i_attn_v, s->n_attn_v)) t = BRISK_Q_Q6_K;
        else if (ft == BRISK_FTYPE_Q4_K_S && s->i_attn_v < 4) t = BRISK_Q_Q5_K;
        if (m->is_70b && (t == BRISK_Q_Q3_K || t == BRISK_Q_Q4_K)) t = BRISK_Q_Q5_K;
        if (m->n_expert == 8) t = BRISK_Q_Q8_0;
        s->i_attn_v++;
    } else if (role == ROLE_ATTN_K) {
        if (m->n_expert == 8) t = BRISK_Q_Q8_0;
    } else if (role == ROLE_FFN_DOWN) {
        if ((st = ffn_layer(s, s->i_ffn_down, name, &il, err))) return st;
        if (ft == BRISK_FTYPE_Q2_K) {
            t = BRISK_Q_Q3_K;
        } else if (ft == BRISK_FTYPE_Q3_K_M) {
            t = il < n_layer / 16 ? BRISK_Q_Q5_K : (!m->falcon || more_bits(il, n_layer)) ? BRISK_Q_Q4_K : BRISK_Q_Q3_K;
        } else if (ft == BRISK_FTYPE_Q3_K_L) {
            t = m->falcon ? BRISK_Q_Q4_K : BRISK_Q_Q5_K;
        } else if (ft == BRISK_FTYPE_Q4_K_M) {
            if (m->falcon) t = il < n_layer / 16 ? BRISK_Q_Q6_K : more_bits(il, n_layer) ? BRISK_Q_Q5_K : BRISK_Q_Q4_K;
            else if (more_bits(il, n_layer)) t = BRISK_Q_Q6_K;
        } else if (il < n_layer / 8 && (ft == BRISK_FTYPE_IQ4_NL || ft == BRISK_FTYPE_IQ4_XS) && !s->has_imatrix) {
            t = BRISK_Q_Q5_K;
        } else if (ft == BRISK_FTYPE_Q5_K_M && more_bits(il, n_layer)) {
            t = BRISK_Q_Q6_K;
        } else if (ft == BRISK_FTYPE_Q4_K_S && !m->falcon && il < n_layer / 8) {
            t = BRISK_Q_Q5_K;
        } else if ((ft == BRISK_FTYPE_Q4_0 || ft == BRISK_FTYPE_Q5_0) && s->has_imatrix && il < n_layer / 8) {
            /* llama.cpp guards the first ffn_down layers of an imatrix Q4_0/Q5_0 this way */
            t = ft == BRISK_FTYPE_Q4_0 ? BRISK_Q_Q4_1 : BRISK_Q_Q5_1;
        }
        s->i_ffn_down++;
    } else if (role == ROLE_ATTN_OUT) {
        if (!m->falcon) {
            if (m->n_expert == 8) {
                if (ft == BRISK_FTYPE_Q2_K || ft == BRISK_FTYPE_Q3_K_S || ft == BRISK_FTYPE_Q3_K_M ||
                    ft == BRISK_FTYPE_Q4_K_S || ft == BRISK_FTYPE_Q4_K_M || ft == BRISK_FTYPE_IQ4_NL ||
                    ft == BRISK_FTYPE_IQ4_XS)
                    t = BRISK_Q_Q5_K;
            } else {
                if (ft == BRISK_FTYPE_Q2_K) t = BRISK_Q_Q3_K;
                else if (ft == BRISK_FTYPE_Q3_K_M) t = BRISK_Q_Q4_K;
                else if (ft == BRISK_FTYPE_Q3_K_L) t = BRISK_Q_Q5_K;
            }
        } else if (ft == BRISK_FTYPE_Q3_K_L) {
            t = BRISK_Q_Q4_K;
        }
    } else if (role == ROLE_FFN_GATE) {
        if ((st = ffn_layer(s, s->i_ffn_gate, name, &il, err))) return st;
        s->i_ffn_gate++;
    } else if (role == ROLE_FFN_UP) {
        if ((st = ffn_layer(s, s->i_ffn_up, name, &il, err))) return st;
        s->i_ffn_up++;
    }
    *out = t;
    return BRISK_OK;
}

static bool pattern_matches(plan_state *s, int i, const char *name) {
    return pcre2_match(s->re[i], (PCRE2_SPTR)name, strlen(name), 0, 0, s->md, NULL) >= 0;
}

/* A row that is not whole blocks of the chosen type gets a smaller-block type
 * (llama.cpp's fallback table), and F16 when even that does not fit. */
static uint32_t shape_fallback(uint32_t t, int64_t ncols, bool *fell) {
    *fell = false;
    const int64_t blk = brisk_qtype_get(t)->block_elems;
    if (ncols % blk == 0) return t;
    *fell = true;
    uint32_t r = t;
    switch (t) {
    case BRISK_Q_Q2_K: case BRISK_Q_Q3_K: r = BRISK_Q_Q4_0; break;
    case BRISK_Q_Q4_K: r = BRISK_Q_Q5_0; break;
    case BRISK_Q_Q5_K: r = BRISK_Q_Q5_1; break;
    case BRISK_Q_Q6_K: r = BRISK_Q_Q8_0; break;
    case BRISK_Q_IQ4_XS: r = BRISK_Q_IQ4_NL; break;
    default: break;   /* a 32-block type: F16 below */
    }
    if (ncols % brisk_qtype_get(r)->block_elems != 0) r = BRISK_Q_F16;
    return r;
}

static brisk_status plan_tensor_type(plan_state *s, const brisk_gguf_tensor *src, const char *name, uint32_t n_dims,
                                     tensor_role role, uint32_t *out, bool *fell, brisk_error *err) {
    const brisk_quantize_params *p = s->p;
    *fell = false;
    *out = src->type;
    if (!may_quantize(p, name, n_dims)) return BRISK_OK;
    if (p->token_embedding_type >= 0 && role == ROLE_TOKEN_EMBD) {
        /* per_layer_token_embd follows --token-embedding-type unless a --tensor-type names it */
        bool named = false;
        if (!strcmp(name, "per_layer_token_embd.weight"))
            for (int i = 0; i < p->n_tensor_types && !named; i++) named = pattern_matches(s, i, name);
        if (!named) {
            *out = (uint32_t)p->token_embedding_type;
            return BRISK_OK;
        }
    }
    if (p->output_tensor_type >= 0 && role == ROLE_OUTPUT) {
        *out = (uint32_t)p->output_tensor_type;
        return BRISK_OK;
    }
    uint32_t t = ftype_row_of(p->ftype)->base;
    if (!is_quantized(t)) {   /* F32 / F16 / BF16 files: no mixture, no fallback */
        *out = t;
        return BRISK_OK;
    }
    bool manual = false;
    for (int i = 0; i < p->n_tensor_types; i++)
        if (pattern_matches(s, i, name)) {
            t = p->tensor_types[i].type;
            manual = true;
            break;
        }
    if (!manual && !p->pure) {
        brisk_status st = plan_rule_type(s, t, src, name, role, &t, err);
        if (st) return st;
    }
    *out = shape_fallback(t, src->ne[0], fell);
    return BRISK_OK;
}

/* u32 of a key that may also be a per-layer array (its first element). */
static brisk_status get_u32_or_first(const brisk_gguf *g, const char *key, uint32_t *out, bool *found, brisk_error *err) {
    const brisk_gguf_kv *kv = brisk_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return BRISK_OK;
    if (kv->value.type == BRISK_GGUF_ARRAY) {
        const brisk_gguf_value *a = &kv->value;
        if (a->v.arr.count == 0 || a->v.arr.elem_type == BRISK_GGUF_STRING || a->v.arr.elem_type == BRISK_GGUF_ARRAY ||
            a->v.arr.elem_type == BRISK_GGUF_FLOAT32 || a->v.arr.elem_type == BRISK_GGUF_FLOAT64 ||
            a->v.arr.elem_type == BRISK_GGUF_BOOL)
            return brisk_fail(err, BRISK_ERR_FORMAT, "metadata '%s': expected an integer or an array of integers", key);
        const int64_t v = brisk_gguf_arr_int(a, 0);
        if (v < 0 || v > UINT32_MAX) return brisk_fail(err, BRISK_ERR_FORMAT, "metadata '%s': %" PRId64 " is out of range", key, v);
        *out = (uint32_t)v;
        return BRISK_OK;
    }
    return brisk_gguf_get_u32(g, key, out, found, err);
}

/* The facts a rule reads that follow from the counts (llama.cpp's size class among them). */
static brisk_status plan_model_from(const brisk_quantize_model *q, plan_model *m, brisk_error *err) {
    memset(m, 0, sizeof *m);
    const size_t len = q->arch ? strlen(q->arch) : 0;
    if (len == 0 || len >= sizeof m->arch)
        return brisk_fail(err, BRISK_ERR_FORMAT, "metadata 'general.architecture': length %zu is not 1..%zu", len, sizeof m->arch - 1);
    memcpy(m->arch, q->arch, len + 1);
    if (q->n_layer == 0 || q->n_layer > QUANT_MAX_LAYERS)
        return brisk_fail(err, BRISK_ERR_FORMAT, "metadata '%s.block_count': %u is not 1..%d", m->arch, q->n_layer, QUANT_MAX_LAYERS);
    m->n_layer = q->n_layer;
    m->n_expert = q->n_expert;
    const uint32_t n_head = q->n_head, n_head_kv = q->n_head_kv;
    m->n_gqa = n_head_kv ? n_head / n_head_kv : 0;
    m->falcon = !strcmp(m->arch, "falcon");
    /* llama.cpp's 70B size class, from each family's layer count */
    if (m->n_layer == 80) {
        if (!strcmp(m->arch, "llama")) m->is_70b = m->n_expert != 8 && n_head != n_head_kv;
        else m->is_70b = !strcmp(m->arch, "qwen2") || !strcmp(m->arch, "deci") || !strcmp(m->arch, "olmo");
    } else if (m->n_layer == 68) {
        m->is_70b = !strcmp(m->arch, "jais2");
    }
    return BRISK_OK;
}

static brisk_status plan_read_model(const brisk_gguf *g, plan_model *m, brisk_error *err) {
    memset(m, 0, sizeof *m);
    brisk_str arch;
    bool found = false;
    brisk_status st = brisk_gguf_get_str(g, "general.architecture", &arch, &found, err);
    if (st) return st;
    if (!found) return brisk_fail(err, BRISK_ERR_FORMAT, "metadata 'general.architecture' is missing");
    char name[64];
    if (arch.len == 0 || arch.len >= sizeof name)
        return brisk_fail(err, BRISK_ERR_FORMAT, "metadata 'general.architecture': length %zu is not 1..%zu", arch.len,
                          sizeof name - 1);
    /* the name becomes part of metadata keys and messages: printable ASCII only (every family's is) */
    for (size_t i = 0; i < arch.len; i++) {
        const unsigned char ch = (unsigned char)arch.ptr[i];
        if (ch < 0x20 || ch >= 0x7f) {
            char shown[68];
            return brisk_fail(err, BRISK_ERR_FORMAT, "metadata 'general.architecture' ('%s'): byte 0x%02x at %zu is not printable ASCII",
                              brisk_gguf_show(arch, shown, sizeof shown), ch, i);
        }
    }
    memcpy(name, arch.ptr, arch.len);
    name[arch.len] = 0;
    brisk_quantize_model q = {.arch = name};
    char key[128];
    snprintf(key, sizeof key, "%s.block_count", name);
    if ((st = brisk_gguf_get_u32(g, key, &q.n_layer, &found, err))) return st;
    if (!found) return brisk_fail(err, BRISK_ERR_FORMAT, "metadata '%s' is missing", key);
    snprintf(key, sizeof key, "%s.expert_count", name);
    if ((st = brisk_gguf_get_u32(g, key, &q.n_expert, &found, err))) return st;
    bool has_kv = false;
    snprintf(key, sizeof key, "%s.attention.head_count", name);
    if ((st = get_u32_or_first(g, key, &q.n_head, &found, err))) return st;
    snprintf(key, sizeof key, "%s.attention.head_count_kv", name);
    if ((st = get_u32_or_first(g, key, &q.n_head_kv, &has_kv, err))) return st;
    if (!has_kv) q.n_head_kv = q.n_head;
    return plan_model_from(&q, m, err);
}

/* Tensor order of llama.cpp's loader: by the layer number of "blk.N." (-1 for
 * other tensors), then by name. */
static int item_cmp(const void *pa, const void *pb) {
    const brisk_quantize_item *a = pa, *b = pb;
    int la = -1, lb = -1;
    layer_of_name(a->name, &la);
    layer_of_name(b->name, &lb);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a->name, b->name);
}

void brisk_quantize_plan_free(brisk_quantize_plan *plan) {
    if (!plan) return;
    free(plan->items);
    memset(plan, 0, sizeof *plan);
}

/* The item's importances: an entry of ne0 * ne2 values, or none. */
static brisk_status attach_imatrix(const brisk_imatrix *im, brisk_quantize_item *it, brisk_error *err) {
    const brisk_imatrix_entry *e = brisk_imatrix_find(im, it->name);
    const brisk_gguf_tensor *t = it->src;
    if (!e) return BRISK_OK;   /* llama-quantize: "did not find weights", quantized without */
    if (e->n != t->ne[0] * t->ne[2]) {
        if (!strcmp(it->name, "token_embd.weight") || !strcmp(it->name, "per_layer_token_embd.weight")) return BRISK_OK;
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "imatrix size %" PRId64 " is different from tensor size %" PRId64 " for %s", e->n,
                          t->ne[0] * t->ne[2], it->name);
    }
    if (t->ne[3] > 1)
        return brisk_fail(err, BRISK_ERR_UNSUPPORTED, "tensor '%s' is 4-D: llama-quantize's importance rows cover 3-D tensors only", it->name);
    it->imatrix = e->values;
    return BRISK_OK;
}

static brisk_status plan_make(const plan_model *m, const brisk_gguf_tensor *tensors, uint64_t n_tensors,
                              const brisk_quantize_params *p, brisk_quantize_plan *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    if (!ftype_row_of(p->ftype)) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "file type %d is not one brisk writes", (int)p->ftype);
    if (p->output_tensor_type >= 0 && !type_writable((uint32_t)p->output_tensor_type))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "--output-tensor-type: brisk cannot write type %d", p->output_tensor_type);
    if (p->token_embedding_type >= 0 && !type_writable((uint32_t)p->token_embedding_type))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "--token-embedding-type: brisk cannot write type %d", p->token_embedding_type);
    if (n_tensors > (uint64_t)INT32_MAX) return brisk_fail(err, BRISK_ERR_FORMAT, "too many tensors (%" PRIu64 ")", n_tensors);
    plan_state s = {.p = p, .m = *m, .has_imatrix = p->imatrix && p->imatrix->n_entries > 0};
    brisk_status st = BRISK_OK;
    if (p->n_tensor_types > 0) {
        s.re = calloc((size_t)p->n_tensor_types, sizeof *s.re);
        s.md = pcre2_match_data_create(4, NULL);
        if (!s.re || !s.md) {
            st = brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int i = 0; i < p->n_tensor_types; i++) {
            int code = 0;
            PCRE2_SIZE off = 0;
            s.re[i] = pcre2_compile((PCRE2_SPTR)p->tensor_types[i].pattern, PCRE2_ZERO_TERMINATED, 0, &code, &off, NULL);
            if (!s.re[i]) {
                PCRE2_UCHAR msg[160];
                pcre2_get_error_message(code, msg, sizeof msg);
                st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "--tensor-type '%s': not a regular expression (%s at offset %zu)",
                                p->tensor_types[i].pattern, (const char *)msg, (size_t)off);
                goto done;
            }
            if (!type_writable(p->tensor_types[i].type)) {
                st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "--tensor-type '%s': brisk cannot write that type",
                                p->tensor_types[i].pattern);
                goto done;
            }
        }
    }
    const int n = (int)n_tensors;
    out->items = calloc(n ? (size_t)n : 1, sizeof *out->items);
    if (!out->items) {
        st = brisk_fail(err, BRISK_ERR_NOMEM, "out of memory");
        goto done;
    }
    out->n_items = n;
    s.m.tied = true;
    for (int i = 0; i < n; i++) {
        brisk_quantize_item *it = &out->items[i];
        const brisk_gguf_tensor *t = &tensors[i];
        it->src = t;
        BRISK_ASSERT(t->name.len <= BRISK_GGUF_MAX_NAME);
        memcpy(it->name, t->name.ptr, t->name.len);
        it->name[t->name.len] = 0;
        if (strlen(it->name) != t->name.len) {
            st = brisk_fail(err, BRISK_ERR_FORMAT, "tensor %d: its name contains a NUL byte", i);
            goto done;
        }
        /* the name goes into one-line messages below: no control bytes (no real model's name has one) */
        for (size_t c = 0; c < t->name.len; c++)
            if ((unsigned char)it->name[c] < 0x20 || (unsigned char)it->name[c] == 0x7f) {
                char shown[64];
                st = brisk_fail(err, BRISK_ERR_FORMAT, "tensor %d ('%s'): its name holds the control byte 0x%02x at %zu", i,
                                brisk_gguf_show(t->name, shown, sizeof shown), (unsigned)(unsigned char)it->name[c], c);
                goto done;
            }
        it->n_dims = 1;
        for (uint32_t d = 1; d < BRISK_GGUF_MAX_DIMS; d++)
            if (t->ne[d] > 1) it->n_dims = d + 1;
        for (uint32_t d = 0; d < BRISK_GGUF_MAX_DIMS; d++)
            if (t->ne[d] == 0) {   /* ggml drops trailing dims <= 1, so the file would claim elements it lacks */
                st = brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': dimension %u is 0 (an empty tensor cannot be written as ggml writes shapes)",
                                it->name, d);
                goto done;
            }
        const tensor_role r = role_of(it->name);
        if (role_is_v(r)) s.n_attn_v++;
        if (r == ROLE_OUTPUT) s.m.tied = false;
    }
    qsort(out->items, (size_t)n, sizeof *out->items, item_cmp);
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        brisk_quantize_item *it = &out->items[i];
        const brisk_gguf_tensor *t = it->src;
        if ((st = plan_tensor_type(&s, t, it->name, it->n_dims, role_of(it->name), &it->type, &it->fallback, err))) goto done;
        out->n_fallback += it->fallback;
        if (it->type != t->type) {
            if (is_quantized(t->type) && !p->allow_requantize) {
                st = brisk_fail(err, BRISK_ERR_INVALID_ARG,
                                "tensor '%s' is already quantized (%s); requantizing loses quality, pass --allow-requantize to do it anyway",
                                it->name, brisk_qtype_name(t->type));
                goto done;
            }
            if (!brisk_qtype_to_float(t->type)) {
                st = brisk_fail(err, BRISK_ERR_UNSUPPORTED, "tensor '%s': brisk cannot convert from %s", it->name,
                                brisk_qtype_name(t->type));
                goto done;
            }
        }
        const int64_t blk = brisk_qtype_get(it->type)->block_elems;
        if (t->ne[0] % blk != 0) {
            st = brisk_fail(err, BRISK_ERR_INVALID_ARG, "tensor '%s': rows of %" PRId64 " are not whole %s blocks of %" PRId64,
                            it->name, t->ne[0], brisk_qtype_name(it->type), blk);
            goto done;
        }
        size_t row = 0, total = 0;
        const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];   /* the reader checked the element count */
        if (!brisk_qtype_row_bytes(it->type, t->ne[0], &row) || !brisk_mul_size(row, (size_t)rows, &total)) {
            st = brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': size overflows", it->name);
            goto done;
        }
        it->nbytes = total;
        it->offset = offset;
        if (s.has_imatrix && it->type != t->type && (st = attach_imatrix(p->imatrix, it, err))) goto done;
        offset += (total + QUANT_ALIGN - 1) / QUANT_ALIGN * QUANT_ALIGN;
    }
done:
    if (s.re)
        for (int i = 0; i < p->n_tensor_types; i++) pcre2_code_free(s.re[i]);
    free(s.re);
    pcre2_match_data_free(s.md);
    if (st) brisk_quantize_plan_free(out);
    return st;
}

brisk_status brisk_quantize_plan_make(const brisk_gguf *g, const brisk_quantize_params *p, brisk_quantize_plan *out,
                                      brisk_error *err) {
    memset(out, 0, sizeof *out);
    plan_model m;
    brisk_status st = plan_read_model(g, &m, err);
    if (st) return st;
    return plan_make(&m, g->tensors, g->n_tensors, p, out, err);
}

brisk_status brisk_quantize_plan_tensors(const brisk_quantize_model *model, const brisk_gguf_tensor *tensors, int n_tensors,
                                         const brisk_quantize_params *p, brisk_quantize_plan *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    if (!model || !p || n_tensors < 0 || (n_tensors > 0 && !tensors))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "quantize: bad arguments to the plan");
    for (int i = 0; i < n_tensors; i++)
        if (tensors[i].name.len > BRISK_GGUF_MAX_NAME)
            return brisk_fail(err, BRISK_ERR_INVALID_ARG, "tensor %d: its name is over %d bytes", i, BRISK_GGUF_MAX_NAME);
    plan_model m;
    brisk_status st = plan_model_from(model, &m, err);
    if (st) return st;
    return plan_make(&m, tensors, (uint64_t)n_tensors, p, out, err);
}

/* ---- the header ---------------------------------------------------------------------------
 * GGUF v3 as ggml writes it: the input's keys in their order, minus the ones
 * set again (general.quantization_version, general.file_type, then each
 * --override-kv, each moved to the end as ggml's set does) and the split keys;
 * then the tensor table. */

typedef struct hbuf {
    uint8_t *p;
    size_t len, cap;
    bool fail;
} hbuf;

static void hb_put(hbuf *b, const void *data, size_t n) {
    if (b->fail) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) {
            if (cap > SIZE_MAX / 2) { b->fail = true; return; }
            cap *= 2;
        }
        uint8_t *np = realloc(b->p, cap);
        if (!np) { b->fail = true; return; }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}
static void hb_u32(hbuf *b, uint32_t v) { hb_put(b, &v, 4); }   /* GGUF is little-endian; so is every host brisk runs on */
static void hb_u64(hbuf *b, uint64_t v) { hb_put(b, &v, 8); }
static void hb_str(hbuf *b, const char *s, size_t n) { hb_u64(b, n); hb_put(b, s, n); }

static bool key_is(brisk_str k, const char *s) { return brisk_str_eq(k, s); }

static bool key_overridden(brisk_str k, const brisk_quantize_params *p) {
    if (key_is(k, "general.quantization_version") || key_is(k, "general.file_type") || key_is(k, "split.no") ||
        key_is(k, "split.count") || key_is(k, "split.tensors.count"))
        return true;
    for (int i = 0; i < p->n_kv_overrides; i++)
        if (key_is(k, p->kv_overrides[i].key)) return true;
    return false;
}

static void put_scalar(hbuf *b, const brisk_gguf_value *v) {
    uint8_t u8; uint16_t u16; uint32_t u32; float f32;
    switch (v->type) {
    case BRISK_GGUF_UINT8: case BRISK_GGUF_INT8: case BRISK_GGUF_BOOL:
        u8 = (uint8_t)v->v.u64; hb_put(b, &u8, 1); break;
    case BRISK_GGUF_UINT16: case BRISK_GGUF_INT16:
        u16 = (uint16_t)v->v.u64; hb_put(b, &u16, 2); break;
    case BRISK_GGUF_UINT32: case BRISK_GGUF_INT32:
        u32 = (uint32_t)v->v.u64; hb_put(b, &u32, 4); break;
    case BRISK_GGUF_FLOAT32:
        f32 = (float)v->v.f64; hb_put(b, &f32, 4); break;
    case BRISK_GGUF_UINT64: case BRISK_GGUF_INT64:
        hb_u64(b, v->v.u64); break;
    case BRISK_GGUF_FLOAT64:
        hb_put(b, &v->v.f64, 8); break;
    case BRISK_GGUF_STRING:
        hb_str(b, v->v.str.ptr, v->v.str.len); break;
    default: BRISK_ASSERT(0 && "not a scalar");
    }
}

static void put_kv(hbuf *b, const brisk_gguf_kv *kv) {
    hb_str(b, kv->key.ptr, kv->key.len);
    hb_u32(b, (uint32_t)kv->value.type);
    if (kv->value.type == BRISK_GGUF_ARRAY) {
        hb_u32(b, (uint32_t)kv->value.v.arr.elem_type);
        hb_u64(b, kv->value.v.arr.count);
        hb_put(b, kv->value.v.arr.data, kv->value.v.arr.nbytes);   /* already in GGUF encoding */
    } else {
        put_scalar(b, &kv->value);
    }
}

static void put_override(hbuf *b, const brisk_kv_override *o) {
    hb_str(b, o->key, strlen(o->key));
    switch (o->kind) {
    case BRISK_KVO_INT: hb_u32(b, BRISK_GGUF_UINT32); hb_u32(b, (uint32_t)llabs(o->i)); break;
    case BRISK_KVO_FLOAT: { float f = (float)o->f; hb_u32(b, BRISK_GGUF_FLOAT32); hb_put(b, &f, 4); } break;
    case BRISK_KVO_BOOL: { uint8_t v = o->b; hb_u32(b, BRISK_GGUF_BOOL); hb_put(b, &v, 1); } break;
    case BRISK_KVO_STR: hb_u32(b, BRISK_GGUF_STRING); hb_str(b, o->s, strlen(o->s)); break;
    }
}

static brisk_status build_header(const brisk_gguf *g, const brisk_quantize_params *p, const brisk_quantize_plan *plan,
                                 hbuf *b, brisk_error *err) {
    uint64_t n_kv = 0;
    for (uint64_t i = 0; i < g->n_kv; i++) n_kv += !key_overridden(g->kv[i].key, p);
    /* an override of quantization_version / file_type replaces ours, at its place */
    bool ov_qv = false, ov_ft = false;
    for (int i = 0; i < p->n_kv_overrides; i++) {
        ov_qv |= !strcmp(p->kv_overrides[i].key, "general.quantization_version");
        ov_ft |= !strcmp(p->kv_overrides[i].key, "general.file_type");
    }
    for (int i = 0; i < p->n_kv_overrides; i++) {   /* a key given twice is written once, at its last place */
        bool later = false;
        for (int j = i + 1; j < p->n_kv_overrides; j++) later |= !strcmp(p->kv_overrides[i].key, p->kv_overrides[j].key);
        n_kv += !later;
    }
    n_kv += !ov_qv + !ov_ft;
    hb_u32(b, BRISK_GGUF_MAGIC);
    hb_u32(b, 3);
    hb_u64(b, (uint64_t)plan->n_items);
    hb_u64(b, n_kv);
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (!key_overridden(g->kv[i].key, p)) put_kv(b, &g->kv[i]);
    if (!ov_qv) {
        hb_str(b, "general.quantization_version", strlen("general.quantization_version"));
        hb_u32(b, BRISK_GGUF_UINT32);
        hb_u32(b, QUANT_VERSION);
    }
    if (!ov_ft) {
        hb_str(b, "general.file_type", strlen("general.file_type"));
        hb_u32(b, BRISK_GGUF_UINT32);
        hb_u32(b, (uint32_t)p->ftype);
    }
    for (int i = 0; i < p->n_kv_overrides; i++) {
        bool later = false;
        for (int j = i + 1; j < p->n_kv_overrides; j++) later |= !strcmp(p->kv_overrides[i].key, p->kv_overrides[j].key);
        if (!later) put_override(b, &p->kv_overrides[i]);
    }
    for (int i = 0; i < plan->n_items; i++) {
        const brisk_quantize_item *it = &plan->items[i];
        hb_str(b, it->name, strlen(it->name));
        hb_u32(b, it->n_dims);
        for (uint32_t d = 0; d < it->n_dims; d++) hb_u64(b, (uint64_t)it->src->ne[d]);
        hb_u32(b, it->type);
        hb_u64(b, it->offset);
    }
    static const uint8_t zeros[QUANT_ALIGN];
    hb_put(b, zeros, (QUANT_ALIGN - b->len % QUANT_ALIGN) % QUANT_ALIGN);
    if (b->fail) return brisk_fail(err, BRISK_ERR_NOMEM, "out of memory building the header");
    return BRISK_OK;
}

/* ---- the run ---------------------------------------------------------------------------- */

/* Where a block's fp16 fields are (llama.cpp refuses a quantized row whose
 * scales overflowed to inf or are NaN; so does brisk). */
typedef struct fp16_fields {
    uint16_t off[2];
    int n;
} fp16_fields;

static fp16_fields fp16_fields_of(uint32_t t) {
    switch (t) {
    case BRISK_Q_Q4_0: case BRISK_Q_Q5_0: case BRISK_Q_Q8_0: return (fp16_fields){{0, 0}, 1};
    case BRISK_Q_Q4_1: case BRISK_Q_Q5_1: case BRISK_Q_Q4_K: case BRISK_Q_Q5_K: return (fp16_fields){{0, 2}, 2};
    case BRISK_Q_Q2_K: return (fp16_fields){{offsetof(brisk_block_q2_k, d), offsetof(brisk_block_q2_k, dmin)}, 2};
    case BRISK_Q_Q3_K: return (fp16_fields){{offsetof(brisk_block_q3_k, d), 0}, 1};
    case BRISK_Q_Q6_K: return (fp16_fields){{offsetof(brisk_block_q6_k, d), 0}, 1};
    case BRISK_Q_IQ4_NL: return (fp16_fields){{offsetof(brisk_block_iq4_nl, d), 0}, 1};
    case BRISK_Q_IQ4_XS: return (fp16_fields){{offsetof(brisk_block_iq4_xs, d), 0}, 1};
    default: return (fp16_fields){{0, 0}, 0};
    }
}

static bool half_finite(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return (h & 0x7c00) != 0x7c00;
}

/* One slab of rows of one tensor, split over the pool's workers. */
typedef struct slab_job {
    const brisk_quantize_item *it;
    const uint8_t *src;           /* the slab's first source row */
    uint8_t *dst;                 /* the slab's first output row */
    int64_t rows;
    size_t src_row, dst_row;
    float **scratch;              /* per worker: one row of floats */
    int64_t *bad_row;             /* per worker: first row (in the slab) with a non-finite value, -1 none */
    int64_t *bad_out;             /* per worker: first row whose quantized scales are not finite, -1 none */
    int64_t first_row;            /* the slab's first row in the tensor (for the importance rows) */
} slab_job;

static void slab_worker(void *ctx, int ith, int nth) {
    slab_job *j = ctx;
    const int64_t n = j->it->src->ne[0];
    const uint32_t st = j->it->src->type, dt = j->it->type;
    brisk_to_float_fn to_float = brisk_qtype_to_float(st);
    brisk_from_float_fn from_float = brisk_qtype_from_float(dt);
    /* with importances, one row of ne0 per expert (ne1 rows each), as llama.cpp slices them */
    brisk_from_float_imatrix_fn weighted = j->it->imatrix ? brisk_qtype_from_float_imatrix(dt) : NULL;
    const int64_t rows_per_expert = j->it->src->ne[1];
    const fp16_fields ff = fp16_fields_of(dt);
    const size_t blk_bytes = brisk_qtype_get(dt)->block_bytes;
    const int64_t blk_elems = brisk_qtype_get(dt)->block_elems;
    float *row = j->scratch[ith];
    int64_t lo, hi;
    brisk_split_range(j->rows, ith, nth, &lo, &hi);
    j->bad_row[ith] = j->bad_out[ith] = -1;
    for (int64_t r = lo; r < hi; r++) {
        const uint8_t *s = j->src + (size_t)r * j->src_row;
        uint8_t *d = j->dst + (size_t)r * j->dst_row;
        const float *x;
        if (st == BRISK_Q_F32) {
            memcpy(row, s, (size_t)n * sizeof(float));   /* the mapping need not be 4-byte aligned for floats */
        } else {
            to_float(s, row, n);
        }
        x = row;
        bool finite = true;
        for (int64_t i = 0; i < n; i++) finite &= isfinite(x[i]) != 0;
        if (!finite) {
            j->bad_row[ith] = r;
            return;
        }
        if (weighted) weighted(x, d, n, j->it->imatrix + ((j->first_row + r) / rows_per_expert) * n);
        else from_float(x, d, n);
        if (dt == BRISK_Q_F16 || dt == BRISK_Q_BF16) {
            for (int64_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, d + 2 * i, 2);
                const bool inf = dt == BRISK_Q_F16 ? (h & 0x7c00) == 0x7c00 : (h & 0x7f80) == 0x7f80;
                if (inf) { j->bad_out[ith] = r; return; }
            }
        }
        for (int64_t b = 0; ff.n && b < n / blk_elems; b++)
            for (int k = 0; k < ff.n; k++)
                if (!half_finite(d + (size_t)b * blk_bytes + ff.off[k])) { j->bad_out[ith] = r; return; }
        if (dt == BRISK_Q_MXFP4)   /* scale 0xff: ggml's quantizer wrapped a tiny block's exponent there, its check refuses it */
            for (int64_t b = 0; b < n / blk_elems; b++)
                if (d[(size_t)b * blk_bytes + offsetof(brisk_block_mxfp4, e)] == 0xff) { j->bad_out[ith] = r; return; }
    }
}

/* Drop the pages of a source range we are done with: the mapping is the
 * file's page cache, so this keeps the resident set to about one slab. */
static void release_pages(const void *p, size_t n) {
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || !n) return;
    uintptr_t a = (uintptr_t)p, e = a + n;
    a = (a + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    e = e / (uintptr_t)page * (uintptr_t)page;
    if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
}

static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void brisk_quantize_imatrix_overrides(const brisk_imatrix *m, const char *path, brisk_kv_override *out, int *n) {
    *n = 0;
    if (!m || m->n_entries == 0) return;
    brisk_kv_override *o = &out[(*n)++];
    memset(o, 0, sizeof *o);
    snprintf(o->key, sizeof o->key, "quantize.imatrix.file");
    o->kind = BRISK_KVO_STR;
    snprintf(o->s, sizeof o->s, "%s", path);   /* llama-quantize keeps 127 bytes */
    if (m->dataset) {
        o = &out[(*n)++];
        memset(o, 0, sizeof *o);
        snprintf(o->key, sizeof o->key, "quantize.imatrix.dataset");
        o->kind = BRISK_KVO_STR;
        snprintf(o->s, sizeof o->s, "%s", m->dataset);
    }
    o = &out[(*n)++];
    memset(o, 0, sizeof *o);
    snprintf(o->key, sizeof o->key, "quantize.imatrix.entries_count");
    o->kind = BRISK_KVO_INT;
    o->i = m->n_entries;
    if (m->chunk_count > 0) {
        o = &out[(*n)++];
        memset(o, 0, sizeof *o);
        snprintf(o->key, sizeof o->key, "quantize.imatrix.chunks_count");
        o->kind = BRISK_KVO_INT;
        o->i = m->chunk_count;
    }
}

/* The file sink: brisk_outfile (a temporary file beside the target, renamed at the end). */
typedef struct file_sink {
    brisk_outfile out;
    const char *path;
    bool output_failed;   /* the error is the output's (it names its path), not the input's */
} file_sink;

static brisk_status file_sink_begin(void *ud, uint64_t total, brisk_error *err) {
    file_sink *fs = ud;
    brisk_status st = brisk_outfile_open(&fs->out, fs->path, total, 0644, err);
    fs->output_failed = st != BRISK_OK;
    return st;
}

static brisk_status file_sink_write(void *ud, const void *data, size_t n, brisk_error *err) {
    file_sink *fs = ud;
    brisk_status st = BRISK_OK;
    if (n && fwrite(data, 1, n, fs->out.f) != n)
        st = brisk_fail(err, BRISK_ERR_IO, "%s: write failed: %s", fs->out.tmp ? fs->out.tmp : fs->path, strerror(errno));
    fs->output_failed |= st != BRISK_OK;
    return st;
}

brisk_status brisk_quantize_gguf(const brisk_gguf *g, const brisk_quantize_params *p, const brisk_quantize_sink *sink,
                                 brisk_error *err) {
    if (!g || !p || !sink || !sink->write) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "quantize: NULL argument");
    brisk_quantize_plan plan = {0};
    brisk_pool *pool = NULL;
    hbuf hdr = {0};
    uint8_t *dst = NULL;
    float **scratch = NULL;
    int64_t *bad = NULL;
    int nth = 0;
    brisk_status st = BRISK_OK;
    const brisk_gguf_kv *al = brisk_gguf_find(g, "general.alignment");
    if (al && g->alignment != QUANT_ALIGN) {
        st = brisk_fail(err, BRISK_ERR_UNSUPPORTED,
                        "general.alignment is %u; llama-quantize copies the key but writes %d-byte aligned data, so brisk "
                        "refuses to write a file that contradicts itself",
                        g->alignment, QUANT_ALIGN);
        goto done;
    }
    if ((st = brisk_quantize_plan_make(g, p, &plan, err))) goto done;
    if ((st = build_header(g, p, &plan, &hdr, err))) goto done;
    uint64_t total = hdr.len, total_src = 0;
    for (int i = 0; i < plan.n_items; i++) {
        total += (plan.items[i].nbytes + QUANT_ALIGN - 1) / QUANT_ALIGN * QUANT_ALIGN;
        total_src += plan.items[i].src->nbytes;
    }
    /* the workers and their buffers, sized once for the widest row */
    nth = p->n_threads > 0 ? p->n_threads : brisk_cpu_count();
    if (nth > 64) nth = 64;
    int64_t widest = 1;
    for (int i = 0; i < plan.n_items; i++) {   /* rows converted: a tensor of no rows may have any row length */
        const brisk_gguf_tensor *t = plan.items[i].src;
        if (plan.items[i].type != t->type && t->ne[1] * t->ne[2] * t->ne[3] > 0) widest = BRISK_MAX(widest, t->ne[0]);
    }
    if ((st = brisk_pool_init(&pool, nth, err))) goto done;
    scratch = calloc((size_t)nth, sizeof *scratch);
    bad = calloc((size_t)nth * 2, sizeof *bad);
    if (!scratch || !bad) goto nomem;
    for (int t = 0; t < nth; t++)
        if (!(scratch[t] = malloc((size_t)widest * sizeof(float)))) goto nomem;
    const size_t slab_bytes = p->slab_bytes ? p->slab_bytes : ((size_t)64 << 20);
    size_t dst_cap = 0;
    if (sink->begin && (st = sink->begin(sink->ud, total, err))) goto done;
    if ((st = sink->write(sink->ud, hdr.p, hdr.len, err))) goto done;
    static const uint8_t zeros[QUANT_ALIGN];
    int64_t done_src = 0;
    for (int i = 0; i < plan.n_items; i++) {
        const brisk_quantize_item *it = &plan.items[i];
        const brisk_gguf_tensor *t = it->src;
        if (p->progress) p->progress(done_src, (int64_t)total_src, i, plan.n_items, it->name, p->progress_ud);
        if (it->type == t->type) {
            if ((st = sink->write(sink->ud, t->data, t->nbytes, err))) goto done;
        } else if (t->ne[1] * t->ne[2] * t->ne[3] > 0) {   /* a tensor of no rows has no data, whatever its row length */
            size_t src_row = 0, dst_row = 0;
            BRISK_ASSERT(brisk_qtype_row_bytes(t->type, t->ne[0], &src_row) && brisk_qtype_row_bytes(it->type, t->ne[0], &dst_row));
            const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
            const int64_t slab = BRISK_MAX((int64_t)1, BRISK_MIN(rows, (int64_t)(slab_bytes / (src_row + dst_row))));
            if ((size_t)slab * dst_row > dst_cap) {
                free(dst);
                dst_cap = (size_t)slab * dst_row;
                if (!(dst = malloc(dst_cap))) goto nomem;
            }
            for (int64_t r0 = 0; r0 < rows; r0 += slab) {
                const int64_t nr = BRISK_MIN(slab, rows - r0);
                slab_job job = {.it = it, .src = (const uint8_t *)t->data + (size_t)r0 * src_row, .dst = dst, .rows = nr,
                                .src_row = src_row, .dst_row = dst_row, .scratch = scratch, .bad_row = bad,
                                .bad_out = bad + nth, .first_row = r0};
                brisk_pool_run(pool, slab_worker, &job);
                for (int w = 0; w < nth; w++) {
                    if (bad[w] >= 0) {
                        st = brisk_fail(err, BRISK_ERR_FORMAT, "tensor '%s': row %" PRId64 " holds a NaN or infinite value",
                                        it->name, r0 + bad[w]);
                        goto done;
                    }
                    if (bad[nth + w] >= 0 && it->type == BRISK_Q_MXFP4) {
                        st = brisk_fail(err, BRISK_ERR_FORMAT,
                                        "tensor '%s': row %" PRId64 " does not fit MXFP4 (a block's largest |value| lies in [2^-126, 2^-125), "
                                        "where llama.cpp's MXFP4 quantizer writes the invalid scale 0xff)",
                                        it->name, r0 + bad[nth + w]);
                        goto done;
                    }
                    if (bad[nth + w] >= 0) {
                        st = brisk_fail(err, BRISK_ERR_FORMAT,
                                        "tensor '%s': row %" PRId64 " does not fit %s (a value or scale overflows: values too large)",
                                        it->name, r0 + bad[nth + w], brisk_qtype_name(it->type));
                        goto done;
                    }
                }
                if ((st = sink->write(sink->ud, dst, (size_t)nr * dst_row, err))) goto done;
                if (sink->release_input) release_pages(job.src, (size_t)nr * src_row);
                if (p->progress)
                    p->progress(done_src + (int64_t)((size_t)(r0 + nr) * src_row), (int64_t)total_src, i, plan.n_items, it->name,
                                p->progress_ud);
            }
        }
        if ((st = sink->write(sink->ud, zeros, (QUANT_ALIGN - it->nbytes % QUANT_ALIGN) % QUANT_ALIGN, err))) goto done;
        done_src += (int64_t)t->nbytes;
    }
    if (p->progress) p->progress((int64_t)total_src, (int64_t)total_src, plan.n_items, plan.n_items, "", p->progress_ud);
    goto done;
nomem:
    st = brisk_fail(err, BRISK_ERR_NOMEM, "quantize: out of memory");
done:
    if (scratch)
        for (int t = 0; t < nth; t++) free(scratch[t]);
    free(scratch);
    free(bad);
    free(dst);
    free(hdr.p);
    brisk_pool_free(pool);
    brisk_quantize_plan_free(&plan);
    return st;
}

brisk_status brisk_quantize_file(const char *in_path, const char *out_path, const brisk_quantize_params *p,
                                 brisk_error *err) {
    if (!in_path || !out_path || !p) return brisk_fail(err, BRISK_ERR_INVALID_ARG, "quantize: NULL argument");
    if (strcmp(out_path, "-") && same_file(in_path, out_path))
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "%s: input and output are the same file", out_path);
    brisk_gguf *g = NULL;
    brisk_status st = brisk_gguf_open(in_path, &g, err);
    if (st) return st;
    file_sink fs = {.path = out_path};
    const brisk_quantize_sink sink = {.begin = file_sink_begin, .write = file_sink_write, .ud = &fs, .release_input = true};
    st = brisk_quantize_gguf(g, p, &sink, err);
    if (st && !fs.output_failed) brisk_error_prefix(err, "%s", in_path);
    if (st) brisk_outfile_abort(&fs.out);   /* a no-op when it never opened */
    else st = brisk_outfile_commit(&fs.out, err);
    brisk_gguf_close(g);
    return st;
}
