/* Thread pool: every worker runs every step exactly once, and a step sees all
 * writes of the previous one (double-buffered stencil compared with a serial
 * run). Uneven and rapid steps; runs under TSan in `make test`. */
#include "test.h"
#include "base/pool.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct step_ctx {
    atomic_int calls;
    const int64_t *src;   /* read by everyone */
    int64_t *dst;         /* each worker writes its own slice */
    int64_t n, step;
} step_ctx;

static int64_t stencil(const int64_t *src, int64_t n, int64_t i, int64_t step) {
    return (src[(i + n - 1) % n] + 3 * src[i] + src[(i + 1) % n] + step) % 1000003;
}

static void step_fn(void *p, int ith, int nth) {
    step_ctx *c = p;
    atomic_fetch_add(&c->calls, 1);
    int64_t lo, hi;
    brisk_split_range(c->n, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) c->dst[i] = stencil(c->src, c->n, i, c->step);
}

/* One caller's stencil run on a (shared) pool, checked against serial. */
typedef struct caller_ctx {
    brisk_pool *pool;
    int steps;
    const int64_t *expect;
    int64_t n;
    bool ok;
} caller_ctx;

static void *caller_main(void *arg) {
    caller_ctx *cc = arg;
    int64_t *buf[2] = {calloc((size_t)cc->n, 8), calloc((size_t)cc->n, 8)};
    for (int64_t i = 0; i < cc->n; i++) buf[0][i] = i;
    step_ctx c = {.n = cc->n};
    atomic_init(&c.calls, 0);
    for (int s = 0; s < cc->steps; s++) {
        c.src = buf[s & 1];
        c.dst = buf[(s + 1) & 1];
        c.step = s;
        brisk_pool_run(cc->pool, step_fn, &c);
    }
    cc->ok = atomic_load(&c.calls) == cc->steps * brisk_pool_size(cc->pool) && !memcmp(buf[cc->steps & 1], cc->expect, (size_t)cc->n * 8);
    free(buf[0]); free(buf[1]);
    return NULL;
}

/* Shared pools: one per thread count, reference counted; two threads running
 * steps on the same pool at once take turns and both get the serial result. */
static void pool_shared_check(int steps, const int64_t *expect, int64_t n) {
    brisk_error err = {0};
    brisk_pool *a = NULL, *b = NULL, *c = NULL;
    CHECKF(brisk_pool_acquire(&a, 2, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(brisk_pool_acquire(&b, 2, &err) == BRISK_OK, "%s", err.msg);
    CHECKF(brisk_pool_acquire(&c, 3, &err) == BRISK_OK, "%s", err.msg);
    CHECK(a && a == b && c && c != a && brisk_pool_size(c) == 3);
    caller_ctx cc[2] = {{.pool = a, .steps = steps, .expect = expect, .n = n}, {.pool = b, .steps = steps, .expect = expect, .n = n}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, caller_main, &cc[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(cc[0].ok && cc[1].ok);
    brisk_pool_release(a);
    /* still held by b: the next acquire finds the same pool */
    brisk_pool *d = NULL;
    CHECK(brisk_pool_acquire(&d, 2, &err) == BRISK_OK && d == b);
    brisk_pool_release(d);
    brisk_pool_release(b);
    brisk_pool_release(c);
    brisk_pool_release(NULL);
    CHECK(brisk_pool_acquire(&d, 0, &err) == BRISK_ERR_INVALID_ARG && d == NULL);
}

int main(void) {
    const int steps = test_quick() ? 300 : 3000;
    const int64_t n = 997;
    int64_t *serial[2] = {calloc((size_t)n, 8), calloc((size_t)n, 8)};
    for (int64_t i = 0; i < n; i++) serial[0][i] = i;
    for (int s = 0; s < steps; s++)
        for (int64_t i = 0; i < n; i++) serial[(s + 1) & 1][i] = stencil(serial[s & 1], n, i, s);
    for (int threads = 1; threads <= 4; threads++) {
        brisk_pool *p = NULL;
        brisk_error err = {0};
        CHECKF(brisk_pool_init(&p, threads, &err) == BRISK_OK, "%s", err.msg);
        CHECK(brisk_pool_size(p) == threads);
        int64_t *buf[2] = {calloc((size_t)n, 8), calloc((size_t)n, 8)};
        for (int64_t i = 0; i < n; i++) buf[0][i] = i;
        step_ctx c = {.n = n};
        atomic_init(&c.calls, 0);
        for (int s = 0; s < steps; s++) {
            c.src = buf[s & 1];
            c.dst = buf[(s + 1) & 1];
            c.step = s;
            brisk_pool_run(p, step_fn, &c);
        }
        CHECKF(atomic_load(&c.calls) == steps * threads, "calls %d, expected %d", atomic_load(&c.calls), steps * threads);
        CHECKF(memcmp(buf[steps & 1], serial[steps & 1], (size_t)n * 8) == 0, "%d threads: result differs from the serial run", threads);
        free(buf[0]); free(buf[1]);
        brisk_pool_free(p);
    }
    pool_shared_check(steps, serial[steps & 1], n);
    free(serial[0]); free(serial[1]);
    brisk_pool *bad = NULL;
    brisk_error err = {0};
    CHECK(brisk_pool_init(&bad, 0, &err) == BRISK_ERR_INVALID_ARG && bad == NULL);
    brisk_pool_free(NULL);
    return test_finish();
}
