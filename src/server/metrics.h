/* metrics: the server's Prometheus counters, gauges and histograms (GET
 * /metrics; names prefixed "brisk:" as vLLM's are "vllm:"). The inference
 * thread records each finished request (from the same numbers its usage
 * reports, so the counters are the sums of the usage returned), each token's
 * latency and the gauges after each step; the HTTP threads record
 * rejections and render the text format. Every call is thread-safe. */
#ifndef BRISK_SERVER_METRICS_H
#define BRISK_SERVER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct srv_metrics srv_metrics;

/* One finished request, as its usage reports it. */
typedef struct srv_request_stats {
    int32_t prompt, cached, completion;   /* usage: prompt_tokens, cached_tokens, completion_tokens */
    int32_t recomputed;                   /* tokens computed again after preemptions */
    int32_t preemptions;
    int64_t drafted, accepted;
    const char *finish;                   /* the request's finish reason: "stop", "length", "cancelled", "error" */
    double queue_s, prefill_s, decode_s, e2e_s;   /* prefill_s < 0: it never produced a token */
    int64_t flops, bytes_read;
    double energy_j;
} srv_request_stats;

typedef struct srv_gauges {
    int32_t running, waiting;
    int32_t kv_used, kv_cached, kv_shared, kv_free;
} srv_gauges;

srv_metrics *srv_metrics_new(void);   /* NULL when out of memory */
void srv_metrics_free(srv_metrics *m);
void srv_metrics_request(srv_metrics *m, const srv_request_stats *st);
void srv_metrics_ttft(srv_metrics *m, double s);
void srv_metrics_itl(srv_metrics *m, double s);
/* reason: "queue_full", "draining", "busy" */
void srv_metrics_rejected(srv_metrics *m, const char *reason);
void srv_metrics_gauges(srv_metrics *m, const srv_gauges *g);
/* --batch-window: a window waited with nothing running, and the requests that then started in one step. */
void srv_metrics_burst(srv_metrics *m, int32_t requests);
/* The text exposition format (version 0.0.4), malloc'd, NUL-terminated; NULL when out of memory. */
char *srv_metrics_render(srv_metrics *m, size_t *len);

#endif
