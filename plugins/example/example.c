/*
 * example — the smallest correct adorch plugin. Copy this file to start a new one.
 *
 * It serves one "house ad" (an ad the publisher runs for itself) for every format it
 * claims, without any network. Everything a real plugin must do is here: export the entry,
 * keep the host pointer from init, make a fresh object per ad_create, complete every
 * load exactly once, never report after destroy, and free what it allocated.
 *
 * Build it with SwiftPM (it is a product of this package), or on its own:
 *   cc -shared -fPIC -fvisibility=hidden -I/usr/include example.c -o libadorch-plugin-example.so
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adorch/plugin.h"

/* Set by init, cleared by deinit. The host guarantees it outlives every ad. */
static const adorch_host *g_host;

/* One ad object: what ad_load needs to build the payload. */
typedef struct example_ad {
    adorch_ad_id id;
    int loaded; /* the host was told loaded: only then may it be shown */
    char slot_id[128];
} example_ad;

static int32_t example_init(const adorch_host *host, const char *config_json) {
    (void)config_json; /* a real plugin reads its app id or API key from here */
    g_host = host;
    host->log(host, ADORCH_LOG_INFO, "example plugin ready");
    return 0;
}

static void example_deinit(void) {
    g_host = NULL; /* no threads to stop: this plugin never calls back from elsewhere */
}

static adorch_ad *example_ad_create(adorch_ad_id id, const adorch_request *request) {
    example_ad *ad = calloc(1, sizeof *ad);
    if (ad == NULL) return NULL;
    ad->id = id;
    /* A house ad profiles nobody, so it suits every privacy class as it is. A network plugin
     * passes request->privacy (ABI 1.4) on to its network: plugins/README.md, "Privacy signals". */
    /* Copy what we keep: request strings are only valid during this call. */
    snprintf(ad->slot_id, sizeof ad->slot_id, "%s", request->slot_id);
    return ad;
}

static int32_t example_ad_load(adorch_ad *opaque) {
    example_ad *ad = opaque;
    char payload[512];
    /* A real plugin starts an asynchronous request here and reports from its callback.
     * Completing at once is allowed: host callbacks may be called from inside ad_load. */
    snprintf(payload, sizeof payload,
             "{\"title\":\"Try our premium plan\",\"media_url\":\"https://example.invalid/house.mp4\","
             "\"slot\":\"%s\",\"expires_in_s\":3600,\"price\":0.0,\"tracks_impressions\":false}",
             ad->slot_id);
    ad->loaded = 1;
    g_host->loaded(g_host, ad->id, payload);
    return 0;
}

static int32_t example_ad_show(adorch_ad *opaque, const char *context_json) {
    example_ad *ad = opaque;
    (void)context_json;
    /* The host shows only loaded ads; saying so anyway costs one line and catches a bug. */
    if (!ad->loaded) return ADORCH_ERROR_NOT_READY;
    return 0; /* nothing to present: the app renders the payload itself */
}

static void example_ad_notify(adorch_ad *opaque, uint32_t event, const char *detail_json) {
    (void)opaque;
    (void)event;
    (void)detail_json; /* the host records impressions and clicks for us */
}

static void example_ad_destroy(adorch_ad *opaque) {
    free(opaque);
}

ADORCH_PLUGIN_EXPORT const adorch_plugin_entry_t adorch_plugin_entry = {
    .abi_major = ADORCH_PLUGIN_ABI_MAJOR,
    .abi_minor = ADORCH_PLUGIN_ABI_MINOR,
    .struct_size = sizeof(adorch_plugin_entry_t),
    .name = "example",
    .version = "1.0.0",
    .description = "house ads, no network: the template for plugin authors",
    .formats = ADORCH_FORMAT_BIT(ADORCH_FORMAT_REWARDED) | ADORCH_FORMAT_BIT(ADORCH_FORMAT_FULLSCREEN) |
               ADORCH_FORMAT_BIT(ADORCH_FORMAT_INTERSTITIAL),
    .init = example_init,
    .deinit = example_deinit,
    .ad_create = example_ad_create,
    .ad_load = example_ad_load,
    .ad_show = example_ad_show,
    .ad_notify = example_ad_notify,
    .ad_destroy = example_ad_destroy,
    .stats_json = NULL,
#ifdef ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD /* 1.2; the tests also build this file against 1.0 */
    /* ad_show reads one field that ad_load set before host->loaded, and nothing writes it
     * afterwards: safe from any thread, and instant. */
    .flags = ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD,
#endif
};
