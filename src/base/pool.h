/* pool: a persistent thread pool for data-parallel steps. The calling thread
 * is worker 0; workers spin briefly on a generation counter, then sleep on a
 * condition variable, so back-to-back steps (one per matmul) cost no syscalls
 * while idle workers cost no CPU. */
#ifndef BRISK_POOL_H
#define BRISK_POOL_H

#include "base/base.h"

typedef struct brisk_pool brisk_pool;

/* fn runs once on each of nth workers with ith in [0, nth). */
typedef void (*brisk_pool_fn)(void *ctx, int ith, int nth);

brisk_status brisk_pool_init(brisk_pool **out, int n_threads, brisk_error *err);
void brisk_pool_free(brisk_pool *p);
/* The process's shared pool of n_threads workers (created on first use,
 * reference counted): contexts of one process (a target model and its draft)
 * use one set of workers instead of 2 x n_threads threads competing for the
 * cores. Runs from different threads take turns (brisk_pool_run locks).
 * Release with brisk_pool_release, never brisk_pool_free. */
brisk_status brisk_pool_acquire(brisk_pool **out, int n_threads, brisk_error *err);
void brisk_pool_release(brisk_pool *p);   /* NULL is a no-op */
int brisk_pool_size(const brisk_pool *p);
/* Run fn on all workers and wait until every one returned. Not reentrant
 * (fn must not run the same pool); callers on several threads take turns. */
void brisk_pool_run(brisk_pool *p, brisk_pool_fn fn, void *ctx);

/* Split [0, n) into nth near-equal parts; part ith is [*lo, *hi). */
static inline void brisk_split_range(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

/* Number of online CPUs (at least 1). */
int brisk_cpu_count(void);

#endif
