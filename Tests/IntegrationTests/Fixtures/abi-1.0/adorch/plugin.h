/*
 * adorch/plugin.h — the contract between the adorch daemon and an ad network plugin.
 *
 * A plugin is a shared object (.so) that exports one data symbol, `adorch_plugin_entry`,
 * of type `adorch_plugin_entry_t`. The daemon dlopens the file, reads the ABI version
 * from the first two fields, refuses any other major version, and then talks to the
 * plugin only through the function pointers below.
 *
 * Versioning. ADORCH_PLUGIN_ABI_MAJOR changes when an existing field moves or changes
 * meaning; the host refuses a plugin of another major. ADORCH_PLUGIN_ABI_MINOR grows
 * when fields are appended to the end of a struct; every struct that may grow starts
 * with `struct_size`, so each side reads only what the other side knows about.
 *
 * Threads. Each rule is marked on the function it applies to:
 *   [plugin queue]  the host calls it on the plugin's own serial queue: never two such
 *                   calls at once for one plugin, but not always on the same OS thread.
 *                   It must return quickly (well under 50 ms); slow work (network I/O,
 *                   decoding) belongs on the plugin's own threads.
 *   [any thread]    the plugin may call it from any thread, at any time between init
 *                   and the return of deinit, including from inside a [plugin queue] call.
 *
 * Ownership. Every string the host passes is UTF-8, NUL-terminated and valid only for
 * the duration of the call: copy what you keep. Every string a plugin passes to a host
 * callback is copied by the host before the callback returns.
 *
 * The rules the host enforces (so that a plugin author cannot get them wrong):
 *   1. Fresh object per load: the host calls ad_create for every load, ad_load exactly
 *      once on that object, and never loads it again; a shown object is never reused.
 *   2. Completion exactly once: each ad_load ends with exactly one host->loaded or
 *      host->failed. A second report, a report after the deadline, or a report for a
 *      destroyed ad is ignored by the host and counted against the plugin.
 *   3. Deadlines: every request carries one; after it the host destroys the object and
 *      counts a timeout. A plugin should give up its own work when it passes.
 *   4. After ad_destroy returns, the plugin must not report anything for that ad id.
 */
#ifndef ADORCH_PLUGIN_H
#define ADORCH_PLUGIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. */
#define ADORCH_PLUGIN_ABI_MAJOR 1
#define ADORCH_PLUGIN_ABI_MINOR 0

/* The name of the one symbol a plugin exports: the entry itself, a const data symbol. */
#define ADORCH_PLUGIN_ENTRY_SYMBOL "adorch_plugin_entry"

/* For languages that can export functions but not data (Swift's @_cdecl): instead of the
 * data symbol, export this function returning a pointer to an entry that lives as long as
 * the library. The host looks for the data symbol first. [any thread] */
#define ADORCH_PLUGIN_GET_ENTRY_SYMBOL "adorch_plugin_get_entry"
typedef const struct adorch_plugin_entry_t *(*adorch_plugin_get_entry_fn)(void);

/* Marks the entry symbol as exported from a plugin built with -fvisibility=hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define ADORCH_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define ADORCH_PLUGIN_EXPORT
#endif

/* Ad formats. A plugin lists the ones it supports as a bit mask of (1u << format). */
typedef enum adorch_format {
    ADORCH_FORMAT_REWARDED = 1,     /* rewarded video: the viewer earns a reward by watching */
    ADORCH_FORMAT_FULLSCREEN = 2,   /* full-screen video, skippable */
    ADORCH_FORMAT_INTERSTITIAL = 3, /* full-screen ad between two screens of the app */
    ADORCH_FORMAT_BANNER = 4,       /* banner of a given size (request.width x request.height) */
    ADORCH_FORMAT_SPLASH = 5,       /* app-launch ad, loaded against a short deadline */
    ADORCH_FORMAT_NATIVE = 6,       /* native assets the app renders itself (request.count ads) */
} adorch_format;

/* The bit for one format in adorch_plugin_entry_t.formats. */
#define ADORCH_FORMAT_BIT(format) (1u << (unsigned)(format))

/* The host's error taxonomy: what host->failed reports and what apps see. */
typedef enum adorch_error {
    ADORCH_ERROR_INTERNAL = 1,        /* the plugin or its SDK failed in a way not listed below */
    ADORCH_ERROR_NETWORK = 2,         /* the network could not be reached or answered badly */
    ADORCH_ERROR_NO_FILL = 3,         /* the network answered but had no ad for this request */
    ADORCH_ERROR_INVALID_REQUEST = 4, /* the request was refused: bad ad unit id, size, count... */
    ADORCH_ERROR_TIMEOUT = 5,         /* the plugin gave up waiting for its network */
    ADORCH_ERROR_RATE_LIMITED = 6,    /* the network asks us to slow down (e.g. a daily limit) */
    ADORCH_ERROR_NOT_READY = 7,       /* ad_show on an ad that is not loaded */
} adorch_error;

/* Events. Plugin->host through host->event; host->plugin through ad_notify. */
typedef enum adorch_event {
    ADORCH_EVENT_MEDIA_CACHED = 1, /* plugin->host: the video is cached and plays without stalls */
    ADORCH_EVENT_IMPRESSION = 2,   /* the viewer saw the ad (counted once per ad) */
    ADORCH_EVENT_CLICK = 3,        /* the viewer clicked the ad */
    ADORCH_EVENT_CLOSE = 4,        /* the viewer closed the ad; its object ends after this */
    ADORCH_EVENT_COMPLETE = 5,     /* the video played to its end */
    ADORCH_EVENT_SKIP = 6,         /* the viewer skipped the video */
    ADORCH_EVENT_REWARD = 7,       /* plugin->host: the network granted the reward; detail may
                                    * carry its {"trans_id": "..."} */
    ADORCH_EVENT_SHOW_FAILED = 8,  /* plugin->host: the ad could not be presented */
    ADORCH_EVENT_WILL_PRESENT = 9, /* plugin->host: the ad is about to be presented */
    ADORCH_EVENT_PRESENTED = 10,   /* plugin->host: the ad is on screen */
    ADORCH_EVENT_LEFT_APPLICATION = 11, /* plugin->host: a click took the viewer out of the app */
    ADORCH_EVENT_WILL_CLOSE = 12,  /* plugin->host: the ad is about to close */
    ADORCH_EVENT_DISLIKE = 13,     /* plugin->host: the viewer disliked it; detail {"reasons": [...]} */
} adorch_event;

/* Log levels for host->log, most severe first (the syslog order). */
typedef enum adorch_log_level {
    ADORCH_LOG_ERROR = 3,   /* something failed and a user will notice */
    ADORCH_LOG_WARNING = 4, /* something unexpected the plugin recovered from */
    ADORCH_LOG_NOTICE = 5,  /* a normal but significant condition */
    ADORCH_LOG_INFO = 6,    /* what happened, for operators */
    ADORCH_LOG_DEBUG = 7,   /* detail for the plugin's author */
} adorch_log_level;

/* The host's name for one ad. Never reused within a daemon's lifetime, so a late report
 * for an ended ad can never be mistaken for another ad. */
typedef uint64_t adorch_ad_id;

/* The reward model of a rewarded ad (docs/rules.md, "Rewards"). */
typedef struct adorch_reward {
    const char *user_id;     /* the app's user id; "" while preloading, set at show time */
    const char *reward_name; /* the reward's name, "" if the slot has none */
    int64_t reward_amount;   /* how many of it, 0 if the slot has none */
    const char *extra;       /* opaque string passed through to the server callback, may be "" */
} adorch_reward;

/* One load request, handed to ad_create. All strings are non-NULL (possibly ""). */
typedef struct adorch_request {
    uint32_t struct_size;           /* sizeof(adorch_request) as the host knows it */
    uint32_t format;                /* an adorch_format */
    const char *slot_id;            /* the daemon's slot this ad is for */
    const char *ad_unit_id;         /* the network's ad unit id, opaque to the host */
    const char *server_parameter;   /* network-specific parameters from the config, opaque */
    const char *targeting_json;     /* targeting as a JSON object, "{}" when there is none */
    uint32_t width;                 /* requested width in points, 0 if not applicable */
    uint32_t height;                /* requested height in points, 0 if not applicable */
    uint32_t count;                 /* how many ads (native), 1 otherwise; at most 10 */
    uint32_t timeout_ms;            /* the host waits this long after ad_load returns */
    uint64_t deadline_monotonic_ns; /* the same deadline on CLOCK_MONOTONIC, in nanoseconds */
    int32_t test_mode;              /* non-zero: ask the network for test ads */
    const adorch_reward *reward;    /* the reward model for rewarded ads, NULL otherwise */
    const char *variant;            /* native: "feed", "banner" or "interstitial"; "" otherwise */
    const char *image_options_json; /* native image options as a JSON object, "{}" for defaults:
                                     * "urls_only" (bool), "multiple" (bool), "aspect_ratio" (string) */
} adorch_request;

/* What the host gives the plugin at init. The functions are thread-safe. */
typedef struct adorch_host adorch_host;
struct adorch_host {
    uint32_t struct_size; /* sizeof(adorch_host) as the host knows it */
    uint32_t abi_major;   /* the host's ADORCH_PLUGIN_ABI_MAJOR */
    uint32_t abi_minor;   /* the host's ADORCH_PLUGIN_ABI_MINOR */
    void *host_data;      /* the host's; pass the host pointer back, never touch this */

    /* [any thread] The load of `ad` succeeded. `payload_json` is a JSON object with what
     * the app needs to render the ad; for a native load of several ads (request.count > 1)
     * it holds them as {"ads": [ad, ...]}. A native ad has the canonical assets: "headline"
     * (required), "body", "call_to_action", "images", "icon", "star_rating", "store",
     * "price", "advertiser", "extra_assets", "has_video". The host reads three keys when present:
     * "expires_in_s" (number, the ad's lifetime), "price" (number, its eCPM) and
     * "tracks_impressions" (true: the plugin counts impressions and clicks itself, so the
     * host does not ad_notify it of them; false or absent: the host does). For a rewarded
     * ad, "reward_by": "network" says the plugin reports ADORCH_EVENT_REWARD itself;
     * otherwise the host grants the reward when the app reports the video complete. */
    void (*loaded)(const adorch_host *host, adorch_ad_id ad, const char *payload_json);

    /* [any thread] The load of `ad` failed with `error` (an adorch_error). `network_code`
     * and `message` are the network's own code and text (0 and "" when there are none). */
    void (*failed)(const adorch_host *host, adorch_ad_id ad, int32_t error, int64_t network_code,
                   const char *message);

    /* [any thread] Something happened to `ad` (an adorch_event); `detail_json` is a JSON
     * object or NULL. */
    void (*event)(const adorch_host *host, adorch_ad_id ad, uint32_t event, const char *detail_json);

    /* [any thread] A line for the daemon's log (journald), tagged with the plugin's name. */
    void (*log)(const adorch_host *host, uint32_t level, const char *message);
};

/* An ad object, the plugin's own; the host only passes it back. */
typedef void adorch_ad;

/* The one symbol a plugin exports. The first two fields never move. */
typedef struct adorch_plugin_entry_t {
    uint32_t abi_major;      /* ADORCH_PLUGIN_ABI_MAJOR the plugin was built against */
    uint32_t abi_minor;      /* ADORCH_PLUGIN_ABI_MINOR the plugin was built against */
    uint32_t struct_size;    /* sizeof(adorch_plugin_entry_t) as the plugin knows it */
    const char *name;        /* short network name, [a-z0-9_-]+, e.g. "sim" */
    const char *version;     /* the plugin's own version, e.g. "1.2.0" */
    const char *description; /* one line for operators */
    uint32_t formats;        /* supported formats, a mask of ADORCH_FORMAT_BIT(f) */

    /* [plugin queue] Called once before anything else. `host` stays valid until deinit
     * returns. `config_json` is the plugin's section of the daemon config as a JSON object.
     * Return 0 on success; anything else refuses the plugin (say why through host->log). */
    int32_t (*init)(const adorch_host *host, const char *config_json);

    /* [plugin queue] Called once, last, after every ad was destroyed. Stop your threads:
     * no host callback may be made after this returns. init may be called again later. */
    void (*deinit)(void);

    /* [plugin queue] Make a new ad object for one load of `request`. The host calls it for
     * every load and never reuses the object. Return NULL if the object cannot be made. */
    adorch_ad *(*ad_create)(adorch_ad_id id, const adorch_request *request);

    /* [plugin queue] Start loading `ad`; called exactly once per object. Return 0 and later
     * report host->loaded or host->failed exactly once, or return an adorch_error now (the
     * host then reports the failure itself and expects no callback). */
    int32_t (*ad_load)(adorch_ad *ad);

    /* [plugin queue] The ad is being shown; `context_json` is a JSON object with
     * "user_id" and the app's context. Called at most once, only on a loaded ad.
     * Return 0, or ADORCH_ERROR_NOT_READY if the ad cannot be shown. */
    int32_t (*ad_show)(adorch_ad *ad, const char *context_json);

    /* [plugin queue] An event the app reported for a shown ad (an adorch_event:
     * impression, click, close, complete, skip); `detail_json` is a JSON object or NULL.
     * A plugin that tracks impressions and clicks itself may ignore it. */
    void (*ad_notify)(adorch_ad *ad, uint32_t event, const char *detail_json);

    /* [plugin queue] The host is done with `ad`: free it and cancel its pending work. */
    void (*ad_destroy)(adorch_ad *ad);

    /* [plugin queue] Optional (may be NULL): the plugin's own counters as a JSON object,
     * shown to operators in the daemon's status. The string stays the plugin's and must
     * stay valid until the next call to stats_json or deinit. */
    const char *(*stats_json)(void);
} adorch_plugin_entry_t;

#ifdef __cplusplus
}
#endif

#endif /* ADORCH_PLUGIN_H */
