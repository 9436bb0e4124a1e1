/* adorch_load: the control API's load generator, in the shape of redis-benchmark's default:
 * one event loop, many connections, pipelining off (one request in flight per connection).
 * In C on epoll so that the client costs as little as redis-benchmark does and the figures
 * measure the daemon. Single-threaded; call from any one thread at a time. */
#ifndef ADORCH_LOAD_H
#define ADORCH_LOAD_H

#include <stddef.h>
#include <stdint.h>

/* What one round trip is. */
typedef enum adorch_load_call {
    ADORCH_LOAD_GET_INFO = 0,     /* org.varlink.service.GetInfo: the cheapest call */
    ADORCH_LOAD_SHOW_REPORT = 1,  /* io.adorch.Ads.Show, then Report(impression) on the ad it gave */
} adorch_load_call;

typedef struct adorch_load_result {
    uint64_t answered;       /* round trips answered (with or without an error) */
    uint64_t errors;         /* of those, answered with a Varlink error */
    char first_error[160];   /* the first error reply, cut to fit ("" if none) */
    double seconds;          /* from the first request sent to the last answer read */
    uint64_t *latencies_ns;  /* answered entries, in completion order; free() it */
} adorch_load_result;

/* Connects `connections` clients to the Unix socket at `path` and runs `requests` round
 * trips of `call` over them (`slot` and `user_id` for Show). Returns 0, or -1 with a
 * message in `error` (connect failed, a connection closed, a reply without an ad id). */
int adorch_load_run(const char *path, int connections, uint64_t requests, adorch_load_call call,
                    const char *slot, const char *user_id, adorch_load_result *out,
                    char *error, size_t error_size);

/* Subscribers that read and drop every event: io.adorch.Ads.Subscribe with "more" on
 * `count` connections, drained by a thread of their own so the daemon never waits on them. */
typedef struct adorch_subscribers adorch_subscribers;

/* Connects and subscribes them all; returns NULL with a message in `error` on failure. */
adorch_subscribers *adorch_subscribers_start(const char *path, int count, char *error, size_t error_size);

/* Events received so far, over all of them. [any thread] */
uint64_t adorch_subscribers_events(const adorch_subscribers *subscribers);

/* Stops the thread, closes the connections and frees; returns the events received. */
uint64_t adorch_subscribers_stop(adorch_subscribers *subscribers);

#endif
