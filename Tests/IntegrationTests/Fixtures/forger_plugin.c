/* A hostile plugin for the isolation tests: it knows it runs in adorch-plugin-host with the
 * daemon's channel on fd 3 and the wire's frame layout (PluginWire), and abuses both.
 *   config {"mode":"pong"}   ad_load never returns, while a thread writes forged heartbeat
 *                            answers (pong, seq 1..) to fd 3: the watchdog must still kill it.
 *   config {"mode":"flood"}  a thread calls host->event (each with a detail just under
 *                            ADORCH_TEXT_MAX_BYTES) and host->log without pause: the other
 *                            plugins' Shows must not wait behind it.
 *   config {"mode":"big"}    each load answers with a payload over ADORCH_PAYLOAD_MAX_BYTES.
 *   config {"mode":"slowinit"} init takes 2 s, as an SDK fetching its remote config may.
 *   config {"mode":"loop"}   each load answers at once with a payload just under the 8 MiB
 *                            bound, expiring after the entry's server_parameter in seconds
 *                            (1e-300: at once), and logs a line per load: for the lifetime
 *                            floor, the per-plugin payload budget and the log rate bound.
 *   config {"mode":"events"} each load fills at once, and a thread reports clicks on the ads
 *                            it loaded without pause: events on its own live ads, each of which
 *                            goes to every subscriber.
 *   config {"mode":"spin"}   init starts 8 threads that spin for ever; its plugin queue stays
 *                            free and answers every heartbeat: for the watchdog's CPU bound.
 * Compiled by the integration test with plain cc against the header. */
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "adorch/plugin.h"

static const adorch_host *host;
static int mode; /* 1 pong, 2 flood, 3 big, 4 slowinit, 5 loop, 6 spin, 7 events */
/* Mode 7: the ads it loaded, the newest last (a ring: old ones are gone anyway). */
static adorch_ad_id loaded_ids[64];
static volatile unsigned loaded_count;
static volatile int stop;
static pthread_t worker;

/* A JSON object of ADORCH_TEXT_MAX_BYTES - 1 bytes: {"x":"aaa…"}. */
static char detail[ADORCH_TEXT_MAX_BYTES];

static void *forge(void *unused) {
    (void)unused;
    memset(detail, 'a', sizeof detail - 1);
    memcpy(detail, "{\"x\":\"", 6);
    memcpy(detail + sizeof detail - 3, "\"}", 3);
    for (uint64_t seq = 1; !stop; seq++) {
        if (mode == 1) {
            unsigned char frame[13] = {9, 0, 0, 0, 7};
            for (int i = 0; i < 8; i++) frame[5 + i] = (unsigned char)(seq >> (8 * i));
            (void)!write(3, frame, sizeof frame);
            struct timespec pause = {0, 20 * 1000 * 1000};
            nanosleep(&pause, NULL);
        } else if (mode == 7) {
            unsigned count = loaded_count;
            if (count == 0) {
                struct timespec pause = {0, 1000 * 1000};
                nanosleep(&pause, NULL);
            } else {
                host->event(host, loaded_ids[seq % (count < 64 ? count : 64)], ADORCH_EVENT_CLICK, NULL);
            }
        } else {
            host->event(host, seq % 1000 + 1000000, ADORCH_EVENT_CLICK, detail);
            if (seq % 10 == 0) host->log(host, ADORCH_LOG_WARNING, "forger: flooding\nFORGED LINE");
        }
    }
    return NULL;
}

static void *spin(void *unused) {
    (void)unused;
    for (volatile uint64_t turns = 0; !stop; turns++) {}
    return NULL;
}

static int32_t forger_init(const adorch_host *h, const char *config_json) {
    host = h;
    mode = strstr(config_json, "\"pong\"") ? 1 : strstr(config_json, "\"flood\"") ? 2 : strstr(config_json, "\"big\"") ? 3 : strstr(config_json, "\"slowinit\"") ? 4 : strstr(config_json, "\"loop\"") ? 5 : strstr(config_json, "\"spin\"") ? 6 : strstr(config_json, "\"events\"") ? 7 : 0;
    if (mode == 4) {
        struct timespec wait = {2, 0};
        nanosleep(&wait, NULL);
    }
    if (mode == 2 || mode == 7) pthread_create(&worker, NULL, forge, NULL);
    for (int i = 0; mode == 6 && i < 8; i++) {
        pthread_t spinner;
        if (pthread_create(&spinner, NULL, spin, NULL) == 0) pthread_detach(spinner);
    }
    return 0;
}

static void forger_deinit(void) {
    stop = 1;
    if (mode == 2 || mode == 7) pthread_join(worker, NULL);
}

typedef struct {
    adorch_ad_id id;
    char expires[32];
} forger_ad;

static adorch_ad *forger_create(adorch_ad_id id, const adorch_request *request) {
    forger_ad *ad = calloc(1, sizeof *ad);
    if (!ad) return NULL;
    ad->id = id;
    snprintf(ad->expires, sizeof ad->expires, "%s", request->server_parameter[0] ? request->server_parameter : "1e-300");
    return ad;
}

static int32_t forger_load(adorch_ad *opaque) {
    forger_ad *ad = opaque;
    if (mode == 1) {
        pthread_create(&worker, NULL, forge, NULL);
        for (;;) pause(); /* stuck in the SDK, for good */
    }
    if (mode == 5) {
        char head[96];
        int length = snprintf(head, sizeof head, "{\"expires_in_s\":%s,\"pad\":\"", ad->expires);
        size_t size = ADORCH_PAYLOAD_MAX_BYTES - 1024;
        char *payload = malloc(size + 1);
        if (!payload) return ADORCH_ERROR_INTERNAL;
        memset(payload, 'x', size);
        memcpy(payload, head, (size_t)length);
        memcpy(payload + size - 2, "\"}", 2);
        payload[size] = 0;
        host->log(host, ADORCH_LOG_WARNING, "forger: loaded another that expires at once");
        host->loaded(host, ad->id, payload);
        free(payload);
        return 0;
    }
    if (mode == 3) {
        size_t size = ADORCH_PAYLOAD_MAX_BYTES + 16;
        char *payload = malloc(size + 1);
        if (!payload) return ADORCH_ERROR_INTERNAL;
        memset(payload, ' ', size);
        memcpy(payload, "{\"pad\":\"", 8);
        memcpy(payload + size - 2, "\"}", 2);
        payload[size] = 0;
        host->loaded(host, ad->id, payload);
        free(payload);
        return 0;
    }
    if (mode == 7) {
        host->loaded(host, ad->id, "{\"expires_in_s\":3600}");
        loaded_ids[loaded_count % 64] = ad->id;
        loaded_count++;
        return 0;
    }
    host->failed(host, ad->id, ADORCH_ERROR_NO_FILL, 0, "");
    return 0;
}

static int32_t forger_show(adorch_ad *ad, const char *context) { (void)ad; (void)context; return ADORCH_ERROR_NOT_READY; }
static void forger_notify(adorch_ad *ad, uint32_t event, const char *detail) { (void)ad; (void)event; (void)detail; }
static void forger_destroy(adorch_ad *ad) { free(ad); }

ADORCH_PLUGIN_EXPORT const adorch_plugin_entry_t adorch_plugin_entry = {
    .abi_major = ADORCH_PLUGIN_ABI_MAJOR, .abi_minor = ADORCH_PLUGIN_ABI_MINOR, .struct_size = sizeof(adorch_plugin_entry_t),
    .name = "forger", .version = "1.0.0", .description = "forges heartbeat answers or floods the host (tests only)",
    .formats = ADORCH_FORMAT_BIT(ADORCH_FORMAT_INTERSTITIAL),
    .init = forger_init, .deinit = forger_deinit, .ad_create = forger_create, .ad_load = forger_load, .ad_show = forger_show,
    .ad_notify = forger_notify, .ad_destroy = forger_destroy,
};
