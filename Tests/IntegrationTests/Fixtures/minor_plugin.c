/* A small, well-behaved interstitial plugin for the ABI evolution tests, built two ways:
 *   against the frozen 1.0 header (Fixtures/abi-1.0): a plugin from before 1.1, which must
 *     still load and must never be sent an event 1.0 did not have;
 *   against today's header with -DFROM_THE_FUTURE: a plugin of the next minor, whose entry
 *     is longer (an optional function this host does not know) and which claims a format
 *     bit this host does not know; it must load, with only the known part used.
 * Every load fills at once; stats_json says the highest event value ad_notify received. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "adorch/plugin.h"

static const adorch_host *g_host;
static uint32_t g_highest_event;
static char g_stats[64];

typedef struct minor_ad {
    adorch_ad_id id;
    int loaded;
} minor_ad;

static int32_t minor_init(const adorch_host *host, const char *config_json) {
    (void)config_json;
    g_host = host;
    g_highest_event = 0;
    return 0;
}

static void minor_deinit(void) { g_host = NULL; }

static adorch_ad *minor_ad_create(adorch_ad_id id, const adorch_request *request) {
    (void)request;
    minor_ad *ad = calloc(1, sizeof *ad);
    if (ad) ad->id = id;
    return ad;
}

static int32_t minor_ad_load(adorch_ad *opaque) {
    minor_ad *ad = opaque;
    ad->loaded = 1;
    g_host->loaded(g_host, ad->id, "{\"title\":\"from another minor\",\"expires_in_s\":3600}");
    return 0;
}

static int32_t minor_ad_show(adorch_ad *opaque, const char *context_json) {
    (void)context_json;
    return ((minor_ad *)opaque)->loaded ? 0 : ADORCH_ERROR_NOT_READY;
}

static void minor_ad_notify(adorch_ad *opaque, uint32_t event, const char *detail_json) {
    (void)opaque;
    (void)detail_json;
    if (event > g_highest_event && event < 1000) g_highest_event = event; /* 1000: the validator's unknown event */
}

static void minor_ad_destroy(adorch_ad *opaque) { free(opaque); }

static const char *minor_stats_json(void) {
    snprintf(g_stats, sizeof g_stats, "{\"highest_event\":%u}", g_highest_event);
    return g_stats;
}

#define MINOR_ENTRY                                                                         \
    ADORCH_PLUGIN_ABI_MAJOR, MINOR_ABI, sizeof(MINOR_ENTRY_TYPE), "minor", "1.0.0",          \
        "a plugin of another minor ABI version", MINOR_FORMATS, minor_init, minor_deinit,   \
        minor_ad_create, minor_ad_load, minor_ad_show, minor_ad_notify, minor_ad_destroy,    \
        minor_stats_json MINOR_FLAGS

/* Against a 1.2 header or newer the entry ends with flags: none. */
#ifdef ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD
#define MINOR_FLAGS , 0
#else
#define MINOR_FLAGS
#endif

#ifdef FROM_THE_FUTURE
/* The next minor: the entry gains an optional function at its end, and a new format. */
#define MINOR_ABI (ADORCH_PLUGIN_ABI_MINOR + 1)
#define MINOR_FORMATS (ADORCH_FORMAT_BIT(ADORCH_FORMAT_INTERSTITIAL) | ADORCH_FORMAT_BIT(20))
typedef struct {
    adorch_plugin_entry_t known;
    int32_t (*ad_prefetch_hint)(const char *slot_id); /* what the next minor might add */
} future_entry;
#define MINOR_ENTRY_TYPE future_entry
static int32_t minor_prefetch_hint(const char *slot_id) {
    (void)slot_id;
    abort(); /* this host does not know the field: it must never call it */
}
ADORCH_PLUGIN_EXPORT const future_entry adorch_plugin_entry = {{MINOR_ENTRY}, minor_prefetch_hint};
#else
#define MINOR_ABI ADORCH_PLUGIN_ABI_MINOR
#define MINOR_FORMATS ADORCH_FORMAT_BIT(ADORCH_FORMAT_INTERSTITIAL)
#define MINOR_ENTRY_TYPE adorch_plugin_entry_t
ADORCH_PLUGIN_EXPORT const adorch_plugin_entry_t adorch_plugin_entry = {MINOR_ENTRY};
#endif
