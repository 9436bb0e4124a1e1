#include "adorch_http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode initialized = CURLE_FAILED_INIT;

/* curl_global_init is not thread-safe: once, before the first transfer. */
static void init(void) { initialized = curl_global_init(CURL_GLOBAL_DEFAULT); }

struct body {
    long max;
    long seen;
    int cut;
};

static size_t on_body(char *data, size_t size, size_t count, void *user) {
    (void)data;
    struct body *body = user;
    size_t n = size * count;
    body->seen += (long)n;
    if (body->seen > body->max) {
        body->cut = 1;
        return 0; /* libcurl stops the transfer: CURLE_WRITE_ERROR */
    }
    return n;
}

int adorch_http_too_many_redirects(void) { return CURLE_TOO_MANY_REDIRECTS; }

int adorch_http_get(const char *url, const char *user_agent, long timeout_ms, long max_bytes,
                    long *status, char *error, size_t error_len) {
    pthread_once(&once, init);
    *status = 0;
    if (error_len > 0) error[0] = '\0';
    if (initialized != CURLE_OK) {
        snprintf(error, error_len, "libcurl could not start: %s", curl_easy_strerror(initialized));
        return (int)initialized;
    }
    CURL *curl = curl_easy_init();
    if (!curl) {
        snprintf(error, error_len, "libcurl could not make a transfer");
        return (int)CURLE_FAILED_INIT;
    }
    char words[CURL_ERROR_SIZE] = "";
    struct body body = {max_bytes, 0, 0};
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, user_agent);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L); /* no SIGALRM: the daemon has threads */
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, words);
    CURLcode result = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(curl);
    if (result == CURLE_WRITE_ERROR && body.cut && *status > 0) return 0;
    if (result != CURLE_OK) {
        snprintf(error, error_len, "%s", words[0] ? words : curl_easy_strerror(result));
        *status = 0;
        return (int)result;
    }
    return 0;
}
