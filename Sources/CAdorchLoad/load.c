#define _GNU_SOURCE
#include "adorch_load.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

typedef struct conn {
    int fd;
    int awaiting_report;  /* 1 after the Show answered, while its Report is in flight */
    uint64_t started_ns;
    char *buf;
    size_t len, cap;
} conn;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Requests are a few hundred bytes: the socket buffer always takes one whole, so a
 * blocking send never waits on the daemon. */
static int send_all(int fd, const char *msg, size_t len) {
    while (len > 0) {
        ssize_t n = send(fd, msg, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        msg += n;
        len -= (size_t)n;
    }
    return 0;
}

int adorch_load_run(const char *path, int connections, uint64_t requests, adorch_load_call call,
                    const char *slot, const char *user_id, adorch_load_result *out,
                    char *error, size_t error_size) {
    memset(out, 0, sizeof *out);
    if (connections < 1 || requests < 1 || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        snprintf(error, error_size, "bad arguments");
        return -1;
    }
    char first[512];
    size_t first_len;
    if (call == ADORCH_LOAD_GET_INFO)
        first_len = (size_t)snprintf(first, sizeof first, "{\"method\":\"org.varlink.service.GetInfo\"}") + 1;
    else
        first_len = (size_t)snprintf(first, sizeof first,
                                     "{\"method\":\"io.adorch.Ads.Show\",\"parameters\":{\"slot\":\"%s\",\"user_id\":\"%s\"}}",
                                     slot, user_id) + 1;

    out->latencies_ns = malloc(sizeof(uint64_t) * requests);
    conn *conns = calloc((size_t)connections, sizeof(conn));
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int rc = -1;
    if (!out->latencies_ns || !conns || ep < 0) {
        snprintf(error, error_size, "out of memory or epoll: %s", strerror(errno));
        goto done;
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, path);
    for (int i = 0; i < connections; i++) {
        conns[i].fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (conns[i].fd < 0 || connect(conns[i].fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
            snprintf(error, error_size, "connect %s (connection %d): %s", path, i + 1, strerror(errno));
            goto done;
        }
        conns[i].cap = 4096;
        conns[i].buf = malloc(conns[i].cap);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (!conns[i].buf || epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev) < 0) {
            snprintf(error, error_size, "epoll_ctl: %s", strerror(errno));
            goto done;
        }
    }

    uint64_t issued = 0;
    uint64_t began = now_ns();
    for (int i = 0; i < connections && issued < requests; i++, issued++) {
        conns[i].started_ns = now_ns();
        if (send_all(conns[i].fd, first, first_len) < 0) {
            snprintf(error, error_size, "send: %s", strerror(errno));
            goto done;
        }
    }
    struct epoll_event events[256];
    char chunk[65536];
    while (out->answered < requests) {
        int n = epoll_wait(ep, events, 256, 10000);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            snprintf(error, error_size, "no answer within 10 s (%llu of %llu answered)",
                     (unsigned long long)out->answered, (unsigned long long)requests);
            goto done;
        }
        for (int e = 0; e < n; e++) {
            conn *c = &conns[events[e].data.u32];
            ssize_t got = recv(c->fd, chunk, sizeof chunk, MSG_DONTWAIT);
            if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (got <= 0) {
                snprintf(error, error_size, "the daemon closed a connection (%s)", got < 0 ? strerror(errno) : "EOF");
                goto done;
            }
            if (c->len + (size_t)got > c->cap) {
                while (c->len + (size_t)got > c->cap) c->cap *= 2;
                char *grown = realloc(c->buf, c->cap);
                if (!grown) {
                    snprintf(error, error_size, "out of memory");
                    goto done;
                }
                c->buf = grown;
            }
            memcpy(c->buf + c->len, chunk, (size_t)got);
            c->len += (size_t)got;
            char *end;
            while ((end = memchr(c->buf, '\0', c->len)) != NULL) {
                size_t msg_len = (size_t)(end - c->buf) + 1;
                /* Replies start with their error, if any: {"error":"name",...} */
                int failed = strncmp(c->buf, "{\"error\"", 8) == 0;
                if (failed && !out->first_error[0]) snprintf(out->first_error, sizeof out->first_error, "%s", c->buf);
                int round_trip_done = 1;
                if (call == ADORCH_LOAD_SHOW_REPORT && !c->awaiting_report && !failed) {
                    char *id = strstr(c->buf, "\"id\":\"");
                    char *close = id ? strchr(id + 6, '"') : NULL;
                    if (!close || close - (id + 6) > 100) {
                        snprintf(error, error_size, "a Show reply without an ad id: %.200s", c->buf);
                        goto done;
                    }
                    char report[256];
                    size_t report_len = (size_t)snprintf(report, sizeof report,
                        "{\"method\":\"io.adorch.Ads.Report\",\"parameters\":{\"ad_id\":\"%.*s\",\"event\":\"impression\"}}",
                        (int)(close - (id + 6)), id + 6) + 1;
                    if (send_all(c->fd, report, report_len) < 0) {
                        snprintf(error, error_size, "send: %s", strerror(errno));
                        goto done;
                    }
                    c->awaiting_report = 1;
                    round_trip_done = 0;
                }
                memmove(c->buf, end + 1, c->len - msg_len);
                c->len -= msg_len;
                if (!round_trip_done) continue;
                out->latencies_ns[out->answered++] = now_ns() - c->started_ns;
                if (failed) out->errors++;
                c->awaiting_report = 0;
                if (issued < requests) {
                    issued++;
                    c->started_ns = now_ns();
                    if (send_all(c->fd, first, first_len) < 0) {
                        snprintf(error, error_size, "send: %s", strerror(errno));
                        goto done;
                    }
                }
            }
        }
    }
    out->seconds = (double)(now_ns() - began) / 1e9;
    rc = 0;

done:
    for (int i = 0; conns && i < connections; i++) {
        if (conns[i].fd > 0) close(conns[i].fd);
        free(conns[i].buf);
    }
    free(conns);
    if (ep >= 0) close(ep);
    if (rc != 0) {
        free(out->latencies_ns);
        out->latencies_ns = NULL;
    }
    return rc;
}

struct adorch_subscribers {
    int count;
    int *fds;
    int ep;
    int wake[2];  /* a pipe: a byte stops the thread */
    pthread_t thread;
    _Atomic uint64_t events;
};

static void *drain(void *arg) {
    adorch_subscribers *s = arg;
    struct epoll_event events[256];
    char chunk[65536];
    for (;;) {
        int n = epoll_wait(s->ep, events, 256, -1);
        for (int e = 0; e < n; e++) {
            if (events[e].data.u32 == UINT32_MAX) return NULL;
            ssize_t got = recv(s->fds[events[e].data.u32], chunk, sizeof chunk, MSG_DONTWAIT);
            for (ssize_t i = 0; i < got; i++)
                if (chunk[i] == '\0') atomic_fetch_add(&s->events, 1);
            if (got == 0) epoll_ctl(s->ep, EPOLL_CTL_DEL, s->fds[events[e].data.u32], NULL);
        }
    }
}

adorch_subscribers *adorch_subscribers_start(const char *path, int count, char *error, size_t error_size) {
    adorch_subscribers *s = calloc(1, sizeof *s);
    if (!s || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        snprintf(error, error_size, "bad arguments");
        free(s);
        return NULL;
    }
    s->count = count;
    s->fds = calloc((size_t)count, sizeof(int));
    s->ep = epoll_create1(EPOLL_CLOEXEC);
    if (!s->fds || s->ep < 0 || pipe2(s->wake, O_CLOEXEC) < 0) {
        snprintf(error, error_size, "setup: %s", strerror(errno));
        goto fail;
    }
    struct epoll_event wake = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
    epoll_ctl(s->ep, EPOLL_CTL_ADD, s->wake[0], &wake);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, path);
    static const char subscribe[] = "{\"method\":\"io.adorch.Ads.Subscribe\",\"more\":true}";
    for (int i = 0; i < count; i++) {
        s->fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s->fds[i] < 0 || connect(s->fds[i], (struct sockaddr *)&addr, sizeof addr) < 0 ||
            send_all(s->fds[i], subscribe, sizeof subscribe) < 0) {
            snprintf(error, error_size, "subscriber %d: %s", i + 1, strerror(errno));
            goto fail;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(s->ep, EPOLL_CTL_ADD, s->fds[i], &ev);
    }
    if (pthread_create(&s->thread, NULL, drain, s) != 0) {
        snprintf(error, error_size, "pthread_create failed");
        goto fail;
    }
    return s;
fail:
    for (int i = 0; s->fds && i < count; i++)
        if (s->fds[i] > 0) close(s->fds[i]);
    free(s->fds);
    if (s->ep >= 0) close(s->ep);
    free(s);
    return NULL;
}

uint64_t adorch_subscribers_events(const adorch_subscribers *s) { return atomic_load(&s->events); }

uint64_t adorch_subscribers_stop(adorch_subscribers *s) {
    char byte = 1;
    ssize_t ignored = write(s->wake[1], &byte, 1);
    (void)ignored;
    pthread_join(s->thread, NULL);
    uint64_t events = atomic_load(&s->events);
    for (int i = 0; i < s->count; i++) close(s->fds[i]);
    close(s->wake[0]);
    close(s->wake[1]);
    close(s->ep);
    free(s->fds);
    free(s);
    return events;
}
