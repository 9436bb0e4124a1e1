/* A plugin that declares ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD and breaks it: its ad_show
 * sends a "tracking request" and waits 20 ms for the answer, where it may take 1 ms.
 * Otherwise well behaved (interstitial, every load fills at once), so that the checks that
 * fail are the ones about this. */
#include <stdlib.h>
#include <time.h>

#include "adorch/plugin.h"

static const adorch_host *g_host;

typedef struct blocking_ad {
    adorch_ad_id id;
    int loaded;
} blocking_ad;

static int32_t blocking_init(const adorch_host *host, const char *config_json) {
    (void)config_json;
    g_host = host;
    return 0;
}

static void blocking_deinit(void) { g_host = NULL; }

static adorch_ad *blocking_ad_create(adorch_ad_id id, const adorch_request *request) {
    (void)request;
    blocking_ad *ad = calloc(1, sizeof *ad);
    if (ad) ad->id = id;
    return ad;
}

static int32_t blocking_ad_load(adorch_ad *opaque) {
    blocking_ad *ad = opaque;
    ad->loaded = 1;
    g_host->loaded(g_host, ad->id, "{\"title\":\"blocks in ad_show\",\"expires_in_s\":3600}");
    return 0;
}

static int32_t blocking_ad_show(adorch_ad *opaque, const char *context_json) {
    (void)context_json;
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL); /* the blocking "tracking request" */
    return ((blocking_ad *)opaque)->loaded ? 0 : ADORCH_ERROR_NOT_READY;
}

static void blocking_ad_notify(adorch_ad *opaque, uint32_t event, const char *detail_json) {
    (void)opaque, (void)event, (void)detail_json;
}

static void blocking_ad_destroy(adorch_ad *opaque) { free(opaque); }

ADORCH_PLUGIN_EXPORT const adorch_plugin_entry_t adorch_plugin_entry = {
    .abi_major = ADORCH_PLUGIN_ABI_MAJOR,
    .abi_minor = ADORCH_PLUGIN_ABI_MINOR,
    .struct_size = sizeof(adorch_plugin_entry_t),
    .name = "blocking",
    .version = "1.0.0",
    .description = "declares SHOW_ANY_THREAD, then blocks in ad_show",
    .formats = ADORCH_FORMAT_BIT(ADORCH_FORMAT_INTERSTITIAL),
    .init = blocking_init,
    .deinit = blocking_deinit,
    .ad_create = blocking_ad_create,
    .ad_load = blocking_ad_load,
    .ad_show = blocking_ad_show,
    .ad_notify = blocking_ad_notify,
    .ad_destroy = blocking_ad_destroy,
    .flags = ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD,
};
