/*
 * The server's counters for GET /metrics, in Prometheus' text format (version 0.0.4):
 * requests by route and status, queue and inference time histograms, batch sizes, tokens; a chat
 * model's tokens, time to first token, inter-token latency and slots.
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

/* A chat model's generation that ended: its prompt tokens, of them those its slot held already,
 * and the tokens it generated. */
void serve_metrics_generation(serve_metrics *m, size_t prompt_tokens, size_t cached_tokens,
                              size_t generated_tokens);
/* A prompt chunk run. */
void serve_metrics_prompt_chunk(serve_metrics *m);
/* A generation's time to its first token, and between two of its tokens (ms). */
void serve_metrics_first_token(serve_metrics *m, double ms);
void serve_metrics_inter_token(serve_metrics *m, double ms);

/* A chat model's slots when rendered. */
typedef struct serve_slot_load {
    size_t slots, busy;
    size_t cached_tokens, capacity_tokens;
} serve_slot_load;

/* The whole exposition, NUL-terminated, in a malloc'd buffer (NULL when out of memory), with
 * `pending` as the current queue depth; slots: a chat model's (its families rendered), or
 * NULL. */
char *serve_metrics_render(serve_metrics *m, size_t pending, const serve_slot_load *slots);

#endif /* CLATTN_SERVE_METRICS_H */
