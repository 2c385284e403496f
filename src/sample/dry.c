/* dry: the DRY ("don't repeat yourself") stage, with llama.cpp's semantics
 * (from koboldcpp, by pi6am): penalise a token by how long the repeat it
 * would extend is, where a repeat is a suffix of the recent tokens that also
 * occurs earlier, and never reaches back across a sequence breaker.
 *
 * One apply is O(last_n) plus the candidates: a backwards scan for the
 * nearest breaker (it bounds every repeat), a Z-function over the reversed
 * window (for each earlier position, how long a suffix of the window ends
 * there), and for each repeat the token that followed it, the one that would
 * extend it. The breakers arrive as token sequences (brisk.h's flat format);
 * brisk_dry_breakers derives them from text as llama.cpp does. */
#include "sample/stages.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct dry_ctx {
    size_t bytes;              /* the whole block (clone copies it, then fixes the pointers) */
    float mult, base;
    int32_t allowed, last_n, n_vocab, n_brk, n_flat;
    int32_t len, head;         /* ring: head = the next slot written; len <= last_n */
    int32_t *ring;             /* [last_n] the accepted tokens */
    int32_t *rep;              /* [last_n] scratch: repeat lengths, see apply */
    int32_t *touched;          /* [last_n] scratch: tokens whose max_rep is set */
    int32_t *max_rep;          /* [n_vocab] scratch, 0 between applies: 1 + longest repeat the token extends */
    int32_t *head_first;       /* [n_vocab] first breaker starting with the token, -1: none */
    int32_t *brk_next;         /* [n_brk] next breaker with the same head, -1: none */
    int32_t *brk_off;          /* [n_brk] where the breaker starts in flat (its length) */
    int32_t *flat;             /* [n_flat] the breakers: length, then the tokens */
    uint8_t *single;           /* [n_vocab] 1: the token is a breaker by itself (never penalised) */
} dry_ctx;

static void dry_fix(dry_ctx *c) {
    int32_t *p = (int32_t *)(c + 1);
    c->ring = p, p += c->last_n;
    c->rep = p, p += c->last_n;
    c->touched = p, p += c->last_n;
    c->max_rep = p, p += c->n_vocab;
    c->head_first = p, p += c->n_vocab;
    c->brk_next = p, p += c->n_brk;
    c->brk_off = p, p += c->n_brk;
    c->flat = p, p += c->n_flat;
    c->single = (uint8_t *)p;
}

/* The breakers' format was checked by the caller (brisk_dry_breakers_check). */
void *brisk_stage_dry_new(const brisk_sampler_params *p, int32_t n_vocab) {
    int32_t n_brk = 0;
    for (int32_t i = 0; i < p->n_dry_breakers; i += 1 + p->dry_breakers[i]) n_brk++;
    const size_t ints = 3 * (size_t)p->dry_penalty_last_n + 2 * (size_t)n_vocab + 2 * (size_t)n_brk + (size_t)p->n_dry_breakers;
    const size_t bytes = sizeof(dry_ctx) + ints * sizeof(int32_t) + (size_t)n_vocab;
    dry_ctx *c = calloc(1, bytes);
    if (!c) return NULL;
    c->bytes = bytes;
    c->mult = p->dry_multiplier;
    c->base = p->dry_base;
    c->allowed = p->dry_allowed_length;
    c->last_n = p->dry_penalty_last_n;
    c->n_vocab = n_vocab;
    c->n_brk = n_brk;
    c->n_flat = p->n_dry_breakers;
    dry_fix(c);
    if (c->n_flat) memcpy(c->flat, p->dry_breakers, (size_t)c->n_flat * sizeof(int32_t));
    for (int32_t t = 0; t < n_vocab; t++) c->head_first[t] = -1;
    /* link each head's breakers; push in reverse so the lists keep the given order */
    int32_t b = 0;
    for (int32_t i = 0; i < c->n_flat; i += 1 + c->flat[i]) c->brk_off[b++] = i;
    for (b = n_brk - 1; b >= 0; b--) {
        const int32_t off = c->brk_off[b], h = c->flat[off + 1];
        c->brk_next[b] = c->head_first[h];
        c->head_first[h] = b;
        if (c->flat[off] == 1) c->single[h] = 1;
    }
    return c;
}

static void *dry_clone(const void *ctx) {
    const dry_ctx *s = ctx;
    dry_ctx *c = malloc(s->bytes);
    if (!c) return NULL;
    memcpy(c, s, s->bytes);
    dry_fix(c);
    return c;
}

/* the i-th most recent token (0: the last accepted) */
static inline int32_t back(const dry_ctx *c, int32_t i) {
    int32_t k = c->head - 1 - i;
    return c->ring[k < 0 ? k + c->last_n : k];
}

static void dry_accept(void *ctx, int32_t token) {
    dry_ctx *c = ctx;
    c->ring[c->head] = token;
    c->head = c->head + 1 == c->last_n ? 0 : c->head + 1;
    if (c->len < c->last_n) c->len++;
}

static void dry_reset(void *ctx) {
    dry_ctx *c = ctx;
    c->len = c->head = 0;
}

/* How far back from the end a repeat may reach: up to (not into) the
 * nearest complete breaker. A breaker [h, t1 .. tm] is complete at distance
 * i when back(i) == h and back(i - 1 - j) == t(j+1): its head lies i tokens
 * from the end and its tail follows toward the end. The longest breaker
 * with that head wins. */
static int32_t repeat_limit(const dry_ctx *c, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        int32_t longest = -1;
        for (int32_t b = c->head_first[back(c, i)]; b >= 0; b = c->brk_next[b]) {
            const int32_t off = c->brk_off[b], tail = c->flat[off] - 1;
            if (tail <= longest || tail > i) continue;
            int32_t j = 0;
            while (j < tail && c->flat[off + 2 + j] == back(c, i - 1 - j)) j++;
            if (j == tail) longest = tail;
        }
        if (longest >= 0) return i - longest;
    }
    return n;
}

static void dry_apply(void *ctx, brisk_token_array *cur) {
    dry_ctx *c = ctx;
    const int32_t n = c->len;
    if (n <= c->allowed) return;
    const int32_t limit = repeat_limit(c, n);
    if (limit < c->allowed) return;
    /* Z-function of the window read backwards (s[k] = back(k)): z(k) is how
     * many of the last tokens recur ending k tokens before the end. Stored
     * as rep[n - 1 - k] = min(z(k), limit), so rep[i] belongs to the token
     * back(n - 1 - i). */
    int32_t *rep = c->rep;
    for (int32_t i = 0; i < n; i++) rep[i] = 0;
    int32_t lt = 0, rt = 0;
    for (int32_t k = 1; k < n; k++) {
        int32_t z;
        if (k > rt) {
            z = 0;
            while (z + k < n && back(c, z) == back(c, z + k)) z++;
            if (z > 0) lt = k, rt = k + z - 1;
        } else if (rep[n - 1 - (k - lt)] < rt - k + 1) {
            z = rep[n - 1 - (k - lt)];
        } else {
            int32_t i = rt + 1;
            while (i < n && back(c, i) == back(c, i - k)) i++;
            z = i - k;
            lt = k, rt = i - 1;
        }
        rep[n - 1 - k] = z < limit ? z : limit;
    }
    /* a repeat of length r ending at back(n - 1 - i) is extended by the token that followed it */
    int32_t n_touched = 0;
    for (int32_t i = 0; i < n - 1; i++) {
        const int32_t r = rep[i];
        if (r < c->allowed) continue;
        const int32_t t = back(c, n - 2 - i);
        if (t < 0 || t >= c->n_vocab) continue;
        if (c->max_rep[t] == 0) c->touched[n_touched++] = t;
        if (c->max_rep[t] < r + 1) c->max_rep[t] = r + 1;
    }
    /* exp(88.72) is FLT_MAX: cap the exponent so the penalty stays finite */
    int32_t max_exp = 0;
    if (c->base > 1.000001f) max_exp = (int32_t)(88.7228391f / logf(c->base));
    for (int32_t i = 0; i < cur->size && n_touched; i++) {
        const int32_t t = cur->data[i].id, m = c->max_rep[t];
        if (m == 0 || c->single[t]) continue;
        int32_t e = m - 1 - c->allowed;
        if (max_exp > 0 && e > max_exp) e = max_exp;
        cur->data[i].logit -= (float)((double)c->mult * pow((double)c->base, (double)e));
        cur->sorted = false;
    }
    for (int32_t i = 0; i < n_touched; i++) c->max_rep[c->touched[i]] = 0;
}

const brisk_stage_i brisk_stage_dry_i = {"dry", dry_apply, dry_accept, dry_reset, dry_clone, free};

/* ---- breakers from text ----------------------------------------------------------------------- */

#define BRK_MAX_CHARS 40   /* llama.cpp's caps: a breaker's bytes, a tail's tokens */
#define BRK_MAX_TAIL 20

typedef struct brk_out {
    int32_t *v;
    size_t n, cap;
} brk_out;

static bool brk_push(brk_out *o, const int32_t *seq, int32_t len) {
    if (o->n + 1 + (size_t)len > o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 256;
        while (cap < o->n + 1 + (size_t)len) cap *= 2;
        int32_t *v = realloc(o->v, cap * sizeof *v);
        if (!v) return false;
        o->v = v, o->cap = cap;
    }
    o->v[o->n++] = len;
    memcpy(o->v + o->n, seq, (size_t)len * sizeof *seq);
    o->n += (size_t)len;
    return true;
}

/* the bytes one token detokenizes to, alone */
static brisk_status token_piece(const brisk_model *m, int32_t id, char *buf, size_t cap, size_t *len, brisk_error *err) {
    brisk_text_stream *ts = NULL;
    brisk_status st = brisk_text_stream_init(m, &ts, err);
    const char *t;
    size_t n;
    *len = 0;
    if (st == BRISK_OK) st = brisk_text_stream_push(ts, id, &t, &n, err);
    for (int pass = 0; st == BRISK_OK && pass < 2; pass++) {
        if (pass == 1) brisk_text_stream_flush(ts, &t, &n);
        const size_t k = n < cap - *len ? n : cap - *len;
        memcpy(buf + *len, t, k);
        *len += k;
    }
    brisk_text_stream_free(ts);
    return st;
}

brisk_status brisk_dry_breakers(const brisk_model *m, const char *const *breakers, int32_t n, int32_t **out,
                                int32_t *n_out, brisk_error *err) {
    *out = NULL;
    *n_out = 0;
    brisk_model_info info;
    brisk_model_get_info(m, &info);
    brk_out o = {0};
    brisk_status st = BRISK_OK;
    int32_t *tail_ids = NULL;
    char piece[1024];
    for (int32_t id = 0; id < info.n_vocab && st == BRISK_OK; id++) {
        size_t wl = 0;
        if ((st = token_piece(m, id, piece, sizeof piece, &wl, err))) break;
        const size_t first = o.n;   /* this token's entries start here (for duplicates) */
        for (int32_t b = 0; b < n && st == BRISK_OK; b++) {
            const char *s = breakers[b];
            size_t sl = s ? strlen(s) : 0;
            if (sl == 0) continue;
            if (sl > BRK_MAX_CHARS) sl = BRK_MAX_CHARS;
            /* the whole breaker inside the token: the token alone breaks */
            bool inside = false;
            for (size_t p = 0; p + sl <= wl && !inside; p++) inside = memcmp(piece + p, s, sl) == 0;
            if (inside) {
                if (!brk_push(&o, &id, 1)) goto oom;
                continue;
            }
            /* the token ends with a proper prefix of the breaker: the rest, tokenized, must follow */
            for (size_t p = 0; p < wl; p++) {
                if (piece[p] != s[0]) continue;
                size_t i = 1;
                while (i < sl && p + i < wl && piece[p + i] == s[i]) i++;
                if (i < sl && p + i < wl) continue;   /* a mismatch inside the token */
                size_t nt = 0;
                free(tail_ids);
                tail_ids = NULL;
                if ((st = brisk_tokenize_text(m, s + i, sl - i, false, false, &tail_ids, &nt, err))) break;
                if (nt > BRK_MAX_TAIL) nt = BRK_MAX_TAIL;
                int32_t seq[1 + BRK_MAX_TAIL];
                seq[0] = id;
                memcpy(seq + 1, tail_ids, nt * sizeof *seq);
                /* skip a duplicate of this token's earlier entries */
                bool dup = false;
                for (size_t q = first; q < o.n && !dup; q += 1 + (size_t)o.v[q])
                    dup = o.v[q] == (int32_t)(1 + nt) && memcmp(o.v + q + 1, seq, (1 + nt) * sizeof *seq) == 0;
                if (!dup && !brk_push(&o, seq, (int32_t)(1 + nt))) goto oom;
            }
        }
    }
    free(tail_ids);
    if (st != BRISK_OK) {
        free(o.v);
        return st;
    }
    if (o.n > INT32_MAX) {
        free(o.v);
        return brisk_fail(err, BRISK_ERR_CAPACITY, "DRY breakers: %zu ints", o.n);
    }
    *out = o.v;
    *n_out = (int32_t)o.n;
    return BRISK_OK;
oom:
    free(tail_ids);
    free(o.v);
    return brisk_fail(err, BRISK_ERR_NOMEM, "DRY breakers: out of memory");
}

/* ---- saved state: the ring of accepted tokens (stages.h) ------------------------------------------ */

size_t brisk_stage_dry_state_size(const void *ctx) { return brisk_ring_state_size(((const dry_ctx *)ctx)->last_n); }

void brisk_stage_dry_state_write(const void *ctx, uint8_t *out) {
    const dry_ctx *c = ctx;
    brisk_ring_state_write(c->last_n, c->len, c->head, c->ring, out);
}

brisk_status brisk_stage_dry_state_read(void *ctx, const uint8_t *in, size_t len, bool apply, brisk_error *err) {
    dry_ctx *c = ctx;
    return brisk_ring_state_read("dry", c->last_n, c->n_vocab, &c->len, &c->head, c->ring, in, len, apply, err);
}
