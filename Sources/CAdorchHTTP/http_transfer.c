#include "adorch_http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode initialized = CURLE_FAILED_INIT;

/* curl_global_init is not thread-safe: once, before the first transfer. */
static void init(void) { initialized = curl_global_init(CURL_GLOBAL_DEFAULT); }

struct sink {
    long max;
    size_t seen;
    int cut;
    int keep;
    unsigned char *data;
    size_t capacity;
};

static size_t on_body(char *data, size_t size, size_t count, void *user) {
    struct sink *sink = user;
    size_t n = size * count;
    if (sink->seen + n > (size_t)sink->max) {
        sink->cut = 1;
        return 0; /* libcurl stops the transfer: CURLE_WRITE_ERROR */
    }
    if (sink->keep) {
        if (sink->seen + n > sink->capacity) {
            size_t capacity = sink->capacity ? sink->capacity : 16384;
            while (capacity < sink->seen + n) capacity *= 2;
            if (capacity > (size_t)sink->max) capacity = (size_t)sink->max;
            unsigned char *grown = realloc(sink->data, capacity);
            if (!grown) return 0;
            sink->data = grown;
            sink->capacity = capacity;
        }
        memcpy(sink->data + sink->seen, data, n);
    }
    sink->seen += n;
    return n;
}

int adorch_http_timed_out(int code) { return code == CURLE_OPERATION_TIMEDOUT; }
int adorch_http_too_many_redirects(int code) { return code == CURLE_TOO_MANY_REDIRECTS; }
int adorch_http_tls_failed(int code) {
    return code == CURLE_SSL_CONNECT_ERROR || code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CERTPROBLEM
        || code == CURLE_SSL_CIPHER || code == CURLE_SSL_CACERT_BADFILE || code == CURLE_SSL_ENGINE_NOTFOUND
        || code == CURLE_SSL_ENGINE_SETFAILED || code == CURLE_SSL_ENGINE_INITFAILED || code == CURLE_SSL_ISSUER_ERROR
        || code == CURLE_SSL_PINNEDPUBKEYNOTMATCH || code == CURLE_SSL_INVALIDCERTSTATUS || code == CURLE_SSL_SHUTDOWN_FAILED
        || code == CURLE_SSL_CRL_BADFILE || code == CURLE_SSL_CLIENTCERT;
}

void adorch_http_free(adorch_http_answer *answer) {
    free(answer->body);
    answer->body = NULL;
    answer->body_len = 0;
}

int adorch_http_perform(const adorch_http_request *request, adorch_http_answer *answer) {
    pthread_once(&once, init);
    memset(answer, 0, sizeof *answer);
    if (initialized != CURLE_OK) {
        snprintf(answer->error, sizeof answer->error, "libcurl could not start: %s", curl_easy_strerror(initialized));
        return (int)initialized;
    }
    CURL *curl = curl_easy_init();
    if (!curl) {
        snprintf(answer->error, sizeof answer->error, "libcurl could not make a transfer");
        return (int)CURLE_FAILED_INIT;
    }
    char words[CURL_ERROR_SIZE] = "";
    struct sink sink = {request->max_bytes, 0, 0, request->keep_body, NULL, 0};
    struct curl_slist *headers = NULL;
    for (size_t i = 0; i < request->header_count; i++) headers = curl_slist_append(headers, request->headers[i]);
    curl_easy_setopt(curl, CURLOPT_URL, request->url);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, request->user_agent);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L); /* no SIGALRM: the callers have threads */
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, request->timeout_ms);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, request->follow_redirects ? 1L : 0L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)request->max_bytes);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, words);
    if (headers) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    if (strcmp(request->method, "POST") == 0) {
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request->body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)request->body_len);
    }
    CURLcode result = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer->status);
    curl_easy_cleanup(curl);
    curl_slist_free_all(headers);
    if ((result == CURLE_WRITE_ERROR && sink.cut) || result == CURLE_FILESIZE_EXCEEDED) {
        free(sink.data);
        answer->body_len = sink.seen;
        return ADORCH_HTTP_CUT;
    }
    if (result != CURLE_OK) {
        free(sink.data);
        snprintf(answer->error, sizeof answer->error, "%s", words[0] ? words : curl_easy_strerror(result));
        answer->status = 0;
        return (int)result;
    }
    answer->body = sink.data;
    answer->body_len = sink.seen;
    return 0;
}
