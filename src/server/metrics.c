/* metrics: Prometheus text for GET /metrics (metrics.h). One mutex guards
 * everything; recording is a few additions, rendering a snprintf loop. */
#include "server/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Latency buckets in seconds (vLLM's TTFT buckets, widened to the long end). */
static const double BUCKETS[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                 1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
#define N_BUCKETS ((int)(sizeof BUCKETS / sizeof BUCKETS[0]))

typedef struct histogram {
    uint64_t bucket[N_BUCKETS];   /* observations <= BUCKETS[i] (not cumulative here) */
    uint64_t count;
    double sum;
} histogram;

static const char *const FINISH[] = {"stop", "length", "cancelled", "error"};
#define N_FINISH 4
static const char *const REJECT[] = {"queue_full", "draining", "busy"};
#define N_REJECT 3

enum { H_TTFT, H_ITL, H_E2E, H_QUEUE, H_PREFILL, H_DECODE, N_HIST };
static const struct { const char *name, *help; } HIST[N_HIST] = {
    [H_TTFT] = {"time_to_first_token_seconds", "Time from admission request to the first generated token, per request."},
    [H_ITL] = {"inter_token_latency_seconds", "Time between two tokens of one choice."},
    [H_E2E] = {"e2e_request_latency_seconds", "Time from submission to the last token, per finished request."},
    [H_QUEUE] = {"request_queue_time_seconds", "Time a request waited before its first admission."},
    [H_PREFILL] = {"request_prefill_time_seconds", "Time from first admission to the first token."},
    [H_DECODE] = {"request_decode_time_seconds", "Time from the first token to the last."},
};

typedef struct counts {
    histogram h[N_HIST];
    uint64_t prompt, cached, computed, recomputed, generated, preempted, drafted, accepted;
    uint64_t finished[N_FINISH], rejected[N_REJECT], cancelled;
    uint64_t cache_queries, cache_hits;
    uint64_t bursts, burst_requests;
    uint64_t flops, bytes;
    double energy;
    srv_gauges g;
} counts;

struct srv_metrics {
    pthread_mutex_t mu;
    counts d;
};

srv_metrics *srv_metrics_new(void) {
    srv_metrics *m = calloc(1, sizeof *m);
    if (m && pthread_mutex_init(&m->mu, NULL)) {
        free(m);
        return NULL;
    }
    return m;
}

void srv_metrics_free(srv_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void observe(histogram *h, double v) {
    if (v < 0) v = 0;
    for (int i = 0; i < N_BUCKETS; i++)
        if (v <= BUCKETS[i]) {
            h->bucket[i]++;
            break;
        }
    h->count++;
    h->sum += v;
}

void srv_metrics_request(srv_metrics *m, const srv_request_stats *st) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->d.prompt += (uint64_t)st->prompt;
    m->d.cached += (uint64_t)st->cached;
    m->d.computed += (uint64_t)(st->prompt - st->cached);
    m->d.recomputed += (uint64_t)st->recomputed;
    m->d.generated += (uint64_t)st->completion;
    m->d.preempted += (uint64_t)st->preemptions;
    m->d.drafted += (uint64_t)st->drafted;
    m->d.accepted += (uint64_t)st->accepted;
    m->d.cache_queries += (uint64_t)st->prompt;
    m->d.cache_hits += (uint64_t)st->cached;
    m->d.flops += (uint64_t)st->flops;
    m->d.bytes += (uint64_t)st->bytes_read;
    m->d.energy += st->energy_j;
    for (int i = 0; i < N_FINISH; i++)
        if (st->finish && !strcmp(st->finish, FINISH[i])) m->d.finished[i]++;
    if (st->finish && !strcmp(st->finish, "cancelled")) m->d.cancelled++;
    observe(&m->d.h[H_E2E], st->e2e_s);
    observe(&m->d.h[H_QUEUE], st->queue_s);
    if (st->prefill_s >= 0) {
        observe(&m->d.h[H_PREFILL], st->prefill_s);
        observe(&m->d.h[H_DECODE], st->decode_s);
    }
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_ttft(srv_metrics *m, double s) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    observe(&m->d.h[H_TTFT], s);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_itl(srv_metrics *m, double s) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    observe(&m->d.h[H_ITL], s);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_rejected(srv_metrics *m, const char *reason) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < N_REJECT; i++)
        if (!strcmp(reason, REJECT[i])) m->d.rejected[i]++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_burst(srv_metrics *m, int32_t requests) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->d.bursts++;
    m->d.burst_requests += (uint64_t)(requests > 0 ? requests : 0);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_gauges(srv_metrics *m, const srv_gauges *g) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->d.g = *g;
    pthread_mutex_unlock(&m->mu);
}

/* ---- rendering -------------------------------------------------------------------------------- */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        const size_t cap = b->cap * 2 + (size_t)n;
        char *g = realloc(b->p, cap);
        if (!g) {
            b->oom = true;
            return;
        }
        b->p = g;
        b->cap = cap;
    }
}

static void family(buf *b, const char *name, const char *type, const char *help) {
    put(b, "# HELP brisk:%s %s\n# TYPE brisk:%s %s\n", name, help, name, type);
}

static void counter(buf *b, const char *name, const char *help, uint64_t v) {
    family(b, name, "counter", help);
    put(b, "brisk:%s %llu\n", name, (unsigned long long)v);
}

static void gauge(buf *b, const char *name, const char *help, int64_t v) {
    family(b, name, "gauge", help);
    put(b, "brisk:%s %lld\n", name, (long long)v);
}

char *srv_metrics_render(srv_metrics *m, size_t *len) {
    buf b = {.p = malloc(8192), .cap = 8192};
    if (!b.p) return NULL;
    b.p[0] = 0;
    pthread_mutex_lock(&m->mu);
    const counts c = m->d;   /* a consistent snapshot, rendered without the lock */
    pthread_mutex_unlock(&m->mu);
    gauge(&b, "num_requests_running", "Requests holding slots (prefilling or decoding).", c.g.running);
    gauge(&b, "num_requests_waiting", "Requests waiting for a slot (new and preempted).", c.g.waiting);
    gauge(&b, "kv_blocks_used", "KV pool blocks held by sequences.", c.g.kv_used);
    gauge(&b, "kv_blocks_shared", "KV pool blocks held by more than one sequence (shared prefixes, forks).", c.g.kv_shared);
    gauge(&b, "kv_blocks_cached", "KV pool blocks held only by the prefix cache (reusable, evictable).", c.g.kv_cached);
    gauge(&b, "kv_blocks_free", "KV pool blocks free.", c.g.kv_free);
    counter(&b, "prompt_tokens_total", "Prompt tokens of finished requests (usage.prompt_tokens).", c.prompt);
    counter(&b, "prompt_tokens_cached_total", "Prompt tokens taken from the prefix cache (usage.prompt_tokens_details.cached_tokens).",
            c.cached);
    counter(&b, "prompt_tokens_computed_total", "Prompt tokens computed (prompt_tokens - cached_tokens).", c.computed);
    counter(&b, "recomputed_tokens_total", "Tokens computed again to rebuild preempted requests.", c.recomputed);
    counter(&b, "generation_tokens_total", "Generated tokens returned (usage.completion_tokens).", c.generated);
    family(&b, "request_success_total", "counter", "Finished requests by finish reason.");
    for (int i = 0; i < N_FINISH; i++)
        put(&b, "brisk:request_success_total{finished_reason=\"%s\"} %llu\n", FINISH[i], (unsigned long long)c.finished[i]);
    family(&b, "requests_rejected_total", "counter", "Requests refused at admission (429 queue_full, 503 draining or busy).");
    for (int i = 0; i < N_REJECT; i++)
        put(&b, "brisk:requests_rejected_total{reason=\"%s\"} %llu\n", REJECT[i], (unsigned long long)c.rejected[i]);
    counter(&b, "requests_cancelled_total", "Requests cancelled (the client went away, or a queue timeout).", c.cancelled);
    counter(&b, "num_preemptions_total", "Preemptions of finished requests (their sequences released, rebuilt later).", c.preempted);
    counter(&b, "prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", c.cache_queries);
    counter(&b, "prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", c.cache_hits);
    counter(&b, "spec_decode_num_draft_tokens_total", "Draft tokens verified (speculative decoding).", c.drafted);
    counter(&b, "spec_decode_num_accepted_tokens_total", "Draft tokens accepted.", c.accepted);
    counter(&b, "batch_window_waits_total", "Arrival windows waited with nothing running before a step (--batch-window).", c.bursts);
    counter(&b, "batch_window_requests_total", "Requests that started together in the first step after such a window.",
            c.burst_requests);
    counter(&b, "request_flops_total", "Estimated FLOPs of finished requests (usage.brisk.flops).", c.flops);
    counter(&b, "request_bytes_read_total", "Estimated bytes read from memory for finished requests (usage.brisk.bytes_read).", c.bytes);
    family(&b, "request_energy_joules_total", "counter", "Estimated energy of finished requests (usage.brisk.energy_j).");
    put(&b, "brisk:request_energy_joules_total %.17g\n", c.energy);
    for (int h = 0; h < N_HIST; h++) {
        family(&b, HIST[h].name, "histogram", HIST[h].help);
        uint64_t cum = 0;
        for (int i = 0; i < N_BUCKETS; i++) {
            cum += c.h[h].bucket[i];
            put(&b, "brisk:%s_bucket{le=\"%g\"} %llu\n", HIST[h].name, BUCKETS[i], (unsigned long long)cum);
        }
        put(&b, "brisk:%s_bucket{le=\"+Inf\"} %llu\n", HIST[h].name, (unsigned long long)c.h[h].count);
        put(&b, "brisk:%s_sum %.17g\nbrisk:%s_count %llu\n", HIST[h].name, c.h[h].sum, HIST[h].name,
            (unsigned long long)c.h[h].count);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len) *len = b.len;
    return b.p;
}
