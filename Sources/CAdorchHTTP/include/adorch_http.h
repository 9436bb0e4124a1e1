/* One HTTP GET for the daemon's notice outbox (docs/bidding.md, "Notices"), through
 * Debian's libcurl: C because curl_easy_setopt is variadic, which Swift cannot call. */
#ifndef ADORCH_HTTP_H
#define ADORCH_HTTP_H

#include <stddef.h>

/* [any thread] GETs `url` (http or https only, redirects followed up to 5 times within
 * them), blocking the calling thread for at most `timeout_ms`. The body is read up to
 * `max_bytes` and dropped: the transfer stops there rather than read an endless answer.
 * Returns 0 when an answer came, its status in *status (a body cut at max_bytes still
 * counts); else libcurl's CURLcode, with its words in `error` (NUL-terminated). */
int adorch_http_get(const char *url, const char *user_agent, long timeout_ms, long max_bytes,
                    long *status, char *error, size_t error_len);

/* The CURLcode of a redirect chain longer than the 5 followed: an answer that never comes. */
int adorch_http_too_many_redirects(void);

#endif
