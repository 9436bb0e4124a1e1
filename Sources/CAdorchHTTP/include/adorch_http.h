/* One HTTP transfer through Debian's libcurl, for the daemon's notice outbox and the openrtb
 * plugin (docs/bidding.md): bounded in time and in the body read, the transfer stopped at
 * either bound rather than left running. C because curl_easy_setopt is variadic, which
 * Swift cannot call. */
#ifndef ADORCH_HTTP_H
#define ADORCH_HTTP_H

#include <stddef.h>

/* adorch_http_perform's result when the body passed max_bytes: the transfer was stopped
 * there (or refused at once, by its Content-Length), the status known. */
#define ADORCH_HTTP_CUT (-1)

typedef struct adorch_http_request {
    const char *method;          /* "GET" or "POST" */
    const char *url;             /* http or https only; any other scheme fails */
    const char *user_agent;
    const char *const *headers;  /* header_count lines "Name: value", or NULL */
    size_t header_count;
    const void *body;            /* a POST's body, body_len bytes */
    size_t body_len;
    long timeout_ms;             /* the whole transfer, connecting included */
    long max_bytes;              /* the most of the answer's body read */
    int follow_redirects;        /* nonzero: up to 5, within http and https; zero: a 3xx is the answer */
    int keep_body;               /* nonzero: the body is returned; zero: read and dropped */
} adorch_http_request;

typedef struct adorch_http_answer {
    long status;                 /* the HTTP status, 0 when none came */
    unsigned char *body;         /* body_len bytes when kept (malloc'd; adorch_http_free), else NULL */
    size_t body_len;
    char error[256];             /* libcurl's words when the result is a CURLcode */
} adorch_http_answer;

/* [any thread] Performs `request`, blocking the calling thread at most its timeout_ms.
 * Returns 0 when the answer came whole, ADORCH_HTTP_CUT when its body passed max_bytes,
 * else libcurl's CURLcode, with its words in answer->error. */
int adorch_http_perform(const adorch_http_request *request, adorch_http_answer *answer);

/* [any thread] Frees what adorch_http_perform put in `answer`. */
void adorch_http_free(adorch_http_answer *answer);

/* CURLcodes a caller tells apart: the time limit; a failure no retry mends (a redirect chain
 * past 5, a redirect to another scheme, a URL libcurl cannot use); a TLS failure. */
int adorch_http_timed_out(int code);
int adorch_http_failed_for_good(int code);
int adorch_http_tls_failed(int code);

#endif
