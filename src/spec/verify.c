/* verify: the greedy and the lossless stochastic verifiers.
 *
 * Stochastic verification is the standard speculative-sampling rule (Leviathan
 * et al. 2023; Chen et al. 2023) applied to the sampler chain's final
 * distributions: draft token x drawn from q is accepted with probability
 * min(1, p(x)/q(x)); on rejection the token comes from norm(max(0, p - q)).
 * Either way the token is distributed as p. p is computed with
 * brisk_sampler_dist at each position after the accepted tokens have been
 * recorded in the sampler, so penalties see the history of that position.
 *
 * Tree verification walks the tree from the root. Greedy: along the target's
 * choices; with tree-masked logits that are bitwise the chain's, the output is
 * plain greedy decoding's. Sampling (point-mass children, i.e. n-gram trees):
 * multi-candidate rejection sampling (as SpecInfer / SpecTr with
 * deterministic drafts): child x_i is accepted with probability
 * p(x_i) / (1 - p(x_1) - ... - p(x_{i-1})), a rejected child leaves p, and
 * without an accepted child the token comes from what is left, so every
 * token is distributed as p. */
#include "spec/spec.h"
#include "sample/sample.h"

int32_t brisk_spec_verify(brisk_sampler *smp, int32_t n_vocab, const float *const *logits, const brisk_draft *d,
                          const brisk_verify_opts *o, float *scratch, int32_t *out) {
    float *p = scratch, *r = scratch + n_vocab;
    int32_t m = 0;
    if (o->greedy) {
        /* the target's choice at each position (argmax after penalties) */
        for (int32_t i = 0; i <= d->n; i++) {
            const int32_t t = brisk_sampler_sample(smp, logits[i]);
            brisk_sampler_accept(smp, t);
            out[m++] = t;
            if (i == d->n || t != d->tokens[i]) break;
        }
        return m;
    }
    for (int32_t i = 0; i < d->n; i++) {
        const int32_t x = d->tokens[i];
        brisk_sampler_dist(smp, logits[i], p);
        const float *q = d->q ? d->q + (size_t)i * (size_t)n_vocab : NULL;
        const double qx = q ? q[x] : 1.0, px = p[x];
        /* u < p/q, written without the division; q(x) = 0 cannot be drawn and is rejected */
        if (qx > 0.0 && brisk_sampler_uniform(smp) * qx < px) {
            brisk_sampler_accept(smp, x);
            out[m++] = x;
            continue;
        }
        const float *from = p;
        if (!o->broken_residual) {
            double sum = 0.0;
            for (int32_t j = 0; j < n_vocab; j++) {
                const float qj = q ? q[j] : (j == x ? 1.0f : 0.0f);
                r[j] = p[j] > qj ? p[j] - qj : 0.0f;
                sum += r[j];
            }
            /* sum == 0 only when p == q up to rounding, where the rejection itself had probability ~0 */
            if (sum > 0.0) from = r;
        }
        const int32_t t = brisk_sampler_draw(smp, from, n_vocab);
        brisk_sampler_accept(smp, t);
        out[m++] = t;
        return m;
    }
    /* every draft accepted: the bonus token from the last position */
    brisk_sampler_dist(smp, logits[d->n], p);
    const int32_t t = brisk_sampler_draw(smp, p, n_vocab);
    brisk_sampler_accept(smp, t);
    out[m++] = t;
    return m;
}

int32_t brisk_spec_verify_tree(brisk_sampler *smp, int32_t n_vocab, const float *const *logits, const brisk_draft_tree *t,
                               const brisk_verify_opts *o, float *scratch, int32_t *out, int32_t *path) {
    float *p = scratch;
    int32_t cur = -1, m = 0;   /* cur: the node whose logits are next (-1: the pending token) */
    for (;;) {
        int32_t next = -1, tok;
        if (o->greedy) {
            tok = brisk_sampler_sample(smp, logits[cur + 1]);
            for (int32_t i = cur + 1; i < t->n && next < 0; i++)   /* children come after their parent */
                if (t->parent[i] == cur && t->tokens[i] == tok) next = i;
        } else {
            /* The children are point masses (fixed by the history, as n-gram
             * drafts are): try them in turn, each accepted with its probability
             * under what is left of p, and remove each rejected one from p;
             * then draw from the rest. Token y comes out with probability p(y). */
            brisk_sampler_dist(smp, logits[cur + 1], p);
            double z = 0.0;
            for (int32_t j = 0; j < n_vocab; j++) z += p[j];
            for (int32_t i = cur + 1; i < t->n && next < 0; i++) {
                if (t->parent[i] != cur) continue;
                const int32_t x = t->tokens[i];
                if (brisk_sampler_uniform(smp) * z < p[x]) {
                    next = i;
                } else if (!o->broken_residual) {
                    z -= p[x];
                    p[x] = 0.0f;
                }
            }
            if (next >= 0) {
                tok = t->tokens[next];
            } else {
                /* z <= 0 only when rounding rejected the last child holding all
                 * the mass (probability ~0): draw from p itself then */
                if (!(z > 0.0)) brisk_sampler_dist(smp, logits[cur + 1], p);
                tok = brisk_sampler_draw(smp, p, n_vocab);
            }
        }
        brisk_sampler_accept(smp, tok);
        out[m++] = tok;
        if (next < 0) return m;
        path[m - 1] = next;
        cur = next;
    }
}
