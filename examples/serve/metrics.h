/*
 * The server's counters for GET /metrics, in Prometheus' text format (version 0.0.4):
 * requests by route and status, queue and inference time histograms, batch sizes, tokens.
 * Thread-safe: every function may be called from any thread.
 */
#ifndef CLATTN_SERVE_METRICS_H
#define CLATTN_SERVE_METRICS_H

#include <stddef.h>

typedef struct serve_metrics serve_metrics;

serve_metrics *serve_metrics_create(void);
void serve_metrics_destroy(serve_metrics **m);

/* One finished request: its route ("/v1/embeddings", ...; "other" for unknown ones), HTTP status,
 * texts, tokens and the milliseconds it spent queued, in inference and in all. */
void serve_metrics_request(serve_metrics *m, const char *route, int status, size_t texts,
                           size_t tokens, double queue_ms, double inference_ms, double total_ms);
/* A request that never reached a route (libmicrohttpd refused it: a malformed request line or
 * header), answered `status`: counted in clattn_requests_total under the route "malformed",
 * in no histogram (its duration is not known). */
void serve_metrics_malformed(serve_metrics *m, int status);
/* One batch the scheduler ran: its texts and their tokens. */
void serve_metrics_batch(serve_metrics *m, size_t texts, size_t tokens);

/* The whole exposition, NUL-terminated, in a malloc'd buffer (NULL when out of memory), with
 * `pending` as the current queue depth. */
char *serve_metrics_render(serve_metrics *m, size_t pending);

#endif /* CLATTN_SERVE_METRICS_H */
