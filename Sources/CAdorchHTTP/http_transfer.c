#include "adorch_http.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libcurl is opened at the first transfer, not linked: it brings some thirty libraries
 * (TLS, Kerberos, LDAP ...), which would cost every daemon start and its memory, notices
 * or not. Only its header is used at build time. */
static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} curl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode initialized = CURLE_FAILED_INIT;
static char unavailable[256] = "";

/* dlopen, then curl_global_init, which is not thread-safe: once, before the first transfer. */
static void init(void) {
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        snprintf(unavailable, sizeof unavailable, "libcurl could not be loaded: %s", dlerror());
        return;
    }
#define FIND(field, symbol) \
    if (!(*(void **)&curl.field = dlsym(library, symbol))) { \
        snprintf(unavailable, sizeof unavailable, "libcurl.so.4 has no %s", symbol); \
        return; \
    }
    FIND(global_init, "curl_global_init")
    FIND(easy_init, "curl_easy_init")
    FIND(easy_setopt, "curl_easy_setopt")
    FIND(easy_perform, "curl_easy_perform")
    FIND(easy_getinfo, "curl_easy_getinfo")
    FIND(easy_cleanup, "curl_easy_cleanup")
    FIND(easy_strerror, "curl_easy_strerror")
    FIND(slist_append, "curl_slist_append")
    FIND(slist_free_all, "curl_slist_free_all")
#undef FIND
    initialized = curl.global_init(CURL_GLOBAL_DEFAULT);
    if (initialized != CURLE_OK)
        snprintf(unavailable, sizeof unavailable, "libcurl could not start: %s", curl.easy_strerror(initialized));
}

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
int adorch_http_failed_for_good(int code) {
    return code == CURLE_TOO_MANY_REDIRECTS || code == CURLE_UNSUPPORTED_PROTOCOL || code == CURLE_URL_MALFORMAT;
}
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
        snprintf(answer->error, sizeof answer->error, "%s", unavailable);
        return (int)CURLE_FAILED_INIT;
    }
    CURL *handle = curl.easy_init();
    if (!handle) {
        snprintf(answer->error, sizeof answer->error, "libcurl could not make a transfer");
        return (int)CURLE_FAILED_INIT;
    }
    char words[CURL_ERROR_SIZE] = "";
    struct sink sink = {request->max_bytes, 0, 0, request->keep_body, NULL, 0};
    struct curl_slist *headers = NULL;
    for (size_t i = 0; i < request->header_count; i++) headers = curl.slist_append(headers, request->headers[i]);
    curl.easy_setopt(handle, CURLOPT_URL, request->url);
    curl.easy_setopt(handle, CURLOPT_USERAGENT, request->user_agent);
    curl.easy_setopt(handle, CURLOPT_NOSIGNAL, 1L); /* no SIGALRM: the callers have threads */
    curl.easy_setopt(handle, CURLOPT_TIMEOUT_MS, request->timeout_ms);
    curl.easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
    curl.easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl.easy_setopt(handle, CURLOPT_FOLLOWLOCATION, request->follow_redirects ? 1L : 0L);
    curl.easy_setopt(handle, CURLOPT_MAXREDIRS, 5L);
    curl.easy_setopt(handle, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)request->max_bytes);
    curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body);
    curl.easy_setopt(handle, CURLOPT_WRITEDATA, &sink);
    curl.easy_setopt(handle, CURLOPT_ERRORBUFFER, words);
    if (headers) curl.easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
    if (strcmp(request->method, "POST") == 0) {
        curl.easy_setopt(handle, CURLOPT_POST, 1L);
        curl.easy_setopt(handle, CURLOPT_POSTFIELDS, request->body);
        curl.easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)request->body_len);
    }
    CURLcode result = curl.easy_perform(handle);
    curl.easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &answer->status);
    curl.easy_cleanup(handle);
    curl.slist_free_all(headers);
    if ((result == CURLE_WRITE_ERROR && sink.cut) || result == CURLE_FILESIZE_EXCEEDED) {
        free(sink.data);
        answer->body_len = sink.seen;
        return ADORCH_HTTP_CUT;
    }
    if (result != CURLE_OK) {
        free(sink.data);
        snprintf(answer->error, sizeof answer->error, "%s", words[0] ? words : curl.easy_strerror(result));
        answer->status = 0;
        return (int)result;
    }
    answer->body = sink.data;
    answer->body_len = sink.seen;
    return 0;
}
