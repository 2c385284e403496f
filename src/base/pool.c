/* pool: persistent workers with spin-then-sleep waiting (see pool.h). */
#include "base/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Spin this many pause iterations (~20-50 us) before sleeping: long enough to
 * bridge back-to-back steps, short enough not to starve a descheduled worker
 * when the machine is oversubscribed (20000 made decode 100x slower then).
 * A build may set it (-DPOOL_SPIN_ITERS=N): a benchmark binary on a machine
 * shared with low-priority work spins longer, so a sched_yield does not hand
 * its slices to the neighbours (docs/PERFORMANCE.md). */
#ifndef POOL_SPIN_ITERS
#define POOL_SPIN_ITERS 1000
#endif

/* Then poll with sched_yield for up to this long before sleeping. A sleeping
 * worker on this VM took long to wake (its vCPU halts): two-thread F16 decode
 * of llama-3.2-1b, whose 65 steps per token each wait on the other thread,
 * ran 8.6 / 9.0 t/s with the pause spin alone and 9.3 / 9.7 with a 20x longer
 * one. Yielding keeps the vCPU awake when the machine is idle, and gives the
 * CPU to whatever else is runnable when it is oversubscribed (where a long
 * pause spin made decode 100x slower). */
#define POOL_YIELD_NS 1000000

static uint64_t pool_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct pool_worker {
    struct brisk_pool *pool;
    int ith;
    pthread_t tid;
} pool_worker;

struct brisk_pool {
    int n;                       /* workers including the caller */
    /* shared pools (brisk_pool_acquire): the registry's link and references;
     * run_mu makes the runs of callers on different threads take turns */
    struct brisk_pool *next_shared;
    int shared_refs;
    pthread_mutex_t run_mu;
    pool_worker *workers;        /* n - 1 background threads */
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    atomic_uint_fast64_t gen;    /* bumped once per run */
    atomic_int pending;          /* background workers still running this generation */
    atomic_bool stop;
    brisk_pool_fn fn;            /* published before gen is bumped */
    void *ctx;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *arg) {
    pool_worker *w = arg;
    brisk_pool *p = w->pool;
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        for (int i = 0; g == seen && i < POOL_SPIN_ITERS; i++) {
            cpu_relax();
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
        }
        for (const uint64_t t0 = g == seen ? pool_now_ns() : 0; g == seen && pool_now_ns() - t0 < POOL_YIELD_NS;) {
            sched_yield();
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv_work, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = g;
        p->fn(p->ctx, w->ith, p->n);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

brisk_status brisk_pool_init(brisk_pool **out, int n_threads, brisk_error *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return brisk_fail(err, BRISK_ERR_INVALID_ARG, "threads: %d is out of range [1, 1024]", n_threads);
    brisk_pool *p = calloc(1, sizeof *p);
    if (!p) return brisk_fail(err, BRISK_ERR_NOMEM, "thread pool: out of memory");
    p->n = n_threads;
    pthread_mutex_init(&p->run_mu, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, false);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            brisk_pool_free(p);
            return brisk_fail(err, BRISK_ERR_NOMEM, "thread pool: out of memory");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            p->workers[i].pool = p;
            p->workers[i].ith = i + 1;
            if (pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i]) != 0) {
                brisk_pool_free(p);
                return brisk_fail(err, BRISK_ERR_NOMEM, "thread pool: cannot start thread %d of %d", i + 2, n_threads);
            }
            p->n_started++;
        }
    }
    *out = p;
    return BRISK_OK;
}

void brisk_pool_free(brisk_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->workers[i].tid, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    free(p->workers);
    free(p);
}

int brisk_pool_size(const brisk_pool *p) { return p->n; }

void brisk_pool_run(brisk_pool *p, brisk_pool_fn fn, void *ctx) {
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->run_mu);   /* uncontended (tens of ns) unless two threads share the pool */
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    for (int i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) != 0 && i < POOL_SPIN_ITERS; i++)
        cpu_relax();
    for (const uint64_t t0 = pool_now_ns(); atomic_load_explicit(&p->pending, memory_order_acquire) != 0 && pool_now_ns() - t0 < POOL_YIELD_NS;)
        sched_yield();
    if (atomic_load_explicit(&p->pending, memory_order_acquire) != 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->pending, memory_order_acquire) != 0) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_unlock(&p->run_mu);
}

/* ---- shared pools ------------------------------------------------------------------------ */

static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static brisk_pool *shared_pools;   /* one per thread count in use, linked by next_shared */

brisk_status brisk_pool_acquire(brisk_pool **out, int n_threads, brisk_error *err) {
    *out = NULL;
    pthread_mutex_lock(&shared_mu);
    brisk_pool *p = shared_pools;
    while (p && p->n != n_threads) p = p->next_shared;
    brisk_status st = BRISK_OK;
    if (!p && (st = brisk_pool_init(&p, n_threads, err)) == BRISK_OK) {
        p->next_shared = shared_pools;
        shared_pools = p;
    }
    if (p) p->shared_refs++;
    pthread_mutex_unlock(&shared_mu);
    *out = p;
    return st;
}

void brisk_pool_release(brisk_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&shared_mu);
    const bool last = --p->shared_refs == 0;
    if (last)
        for (brisk_pool **l = &shared_pools; *l; l = &(*l)->next_shared)
            if (*l == p) {
                *l = p->next_shared;
                break;
            }
    pthread_mutex_unlock(&shared_mu);
    if (last) brisk_pool_free(p);
}

int brisk_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
