/*
 * adorch/plugin.h — the contract between the adorch daemon and an ad network plugin.
 *
 * A plugin is a shared object (.so) that exports one data symbol, `adorch_plugin_entry`,
 * of type `adorch_plugin_entry_t`. The daemon dlopens the file, reads the ABI version
 * from the first two fields, refuses any other major version, and then talks to the
 * plugin only through the function pointers below.
 *
 * Versioning: how this ABI grows without breaking anyone.
 *   A minor version (ADORCH_PLUGIN_ABI_MINOR + 1) may only add: fields at the end of a
 *   struct that starts with `struct_size`; new adorch_format, adorch_event and adorch_error
 *   values (the log levels are syslog's and stay as they are); new optional (NULL-able)
 *   functions at the end of the entry. Every addition is marked with the minor that
 *   brought it, where it is declared and in the History line below.
 *   A major version (ADORCH_PLUGIN_ABI_MAJOR + 1) is needed for anything else: a field
 *   that moves, changes type or meaning, a value that changes meaning, a rule above that
 *   changes, a function that becomes required. abi_major and abi_minor are the entry's
 *   first two fields in every major, so any host can read them.
 *   Finding out what the other side has:
 *     - a plugin reads a field of adorch_request or adorch_host only if
 *       ADORCH_STRUCT_HAS(ptr, type, field) says the host's struct_size covers it, and
 *       uses a value (an event it reports, an error) only if host->abi_minor has it;
 *     - the host reads the entry only up to the plugin's struct_size (what lies beyond is
 *       NULL to it), sends a plugin only the events and formats of the plugin's abi_minor
 *       or older, and never asks it for a format it does not claim.
 *   A plugin newer than the host (same major, higher minor) is loaded: the host uses the
 *   part of the entry it knows, ignores format bits it does not know, and logs that the
 *   newer additions are unused. A plugin of another major is refused with a log line
 *   naming both versions. A plugin should ignore an event value it does not know.
 *
 * Threads. Each rule is marked on the function it applies to:
 *   [plugin queue]  the host calls it on the plugin's own serial queue: never two such
 *                   calls at once for one plugin, but not always on the same OS thread.
 *                   It must return quickly (well under 50 ms); slow work (network I/O,
 *                   decoding) belongs on the plugin's own threads.
 *   [any thread]    the plugin may call it from any thread, at any time between init
 *                   and the return of deinit, including from inside a [plugin queue] call.
 *   [show]          ad_show alone: [plugin queue], unless the entry's flags have
 *                   ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD (1.2). Then the host may call it on
 *                   any of its threads, at the same time as [plugin queue] calls on other
 *                   objects of the plugin, and possibly while the same object's ad_load is
 *                   still returning (after its host->loaded). It must then return within
 *                   1 ms and never block on the network or on a host callback. The host
 *                   still never calls ad_show twice for one object, and calls ad_notify or
 *                   ad_destroy for that object only after ad_show returned. A host that
 *                   sees a call take much longer goes back to the plugin queue.
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
 *   3. Deadlines: every request carries one, deadline_monotonic_ns (timeout_ms is the same
 *      moment, counted from the ad_create call). A plugin that has no answer by then gives up
 *      and reports host->failed with ADORCH_ERROR_TIMEOUT itself, at least
 *      ADORCH_DEADLINE_MARGIN_MS before the deadline (1.3). At the deadline the host destroys
 *      the object and counts a timeout; a report that reaches it later is ignored and
 *      counted against the plugin.
 *   4. After ad_destroy returns, the plugin must not report anything for that ad id.
 *   5. No re-entry (stated in 1.3, true of every 1.x host): a host callback never calls into
 *      the plugin before it returns, so a plugin may hold its own lock while calling the host.
 *
 * Interactive sessions (ADORCH_FORMAT_INTERACTIVE, ABI 1.1; docs/rules.md, "Interactive sessions")
 * reuse the ad calls, one object per session, never reused:
 *   init   ad_create + ad_load: fetch at once (request.creative_url, ad_parameters_json,
 *          slot_type). host->loaded is the renderer's fetch_complete (the payload may name
 *          the campaign); host->failed with ADORCH_ERROR_NO_FILL is no_ads_available, any
 *          other failure is a terminal error.
 *   start  ad_show, called only once the fetch completed (an early start waits for it).
 *   pause, resume   ad_notify with ADORCH_EVENT_PAUSE / ADORCH_EVENT_RESUME.
 *   stop   ad_destroy.
 * The plugin then reports the renderer's events through host->event (ADS_AVAILABLE to
 * ERROR below) and exactly one terminal event: COMPLETED, NO_ADS_AVAILABLE or ERROR. The
 * host destroys the session after it; anything reported later is ignored and counted.
 */
#ifndef ADORCH_PLUGIN_H
#define ADORCH_PLUGIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. */
#define ADORCH_PLUGIN_ABI_MAJOR 1
#define ADORCH_PLUGIN_ABI_MINOR 4
/* History: 1.0 the ad formats 1-6; 1.1 interactive sessions (format 7, request fields
 * creative_url, ad_parameters_json and slot_type, events 14-26), video progress events
 * 27-30 and ADORCH_ERROR_MALFORMED; 1.2 the entry's flags, with
 * ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD; 1.3 the request field load_uid,
 * ADORCH_DEADLINE_MARGIN_MS, the callback bounds (ADORCH_PAYLOAD_MAX_BYTES and the rest),
 * and rules 3 and 5 and the impression rule stated in full; 1.4 the request field privacy
 * (adorch_privacy, adorch_privacy_class): the load's privacy class and signals. */

/* 1.3: how long before deadline_monotonic_ns a plugin that gives up reports
 * ADORCH_ERROR_TIMEOUT at the latest, so that its report reaches the host in time (rule 3). */
#define ADORCH_DEADLINE_MARGIN_MS 50

/* 1.3: what the host takes from a plugin, in either isolation mode. A payload_json longer
 * than this fails its load (plugin_fault); a log line or failure message longer than
 * ADORCH_TEXT_MAX_BYTES is cut there, a detail_json longer than it is dropped, and so is
 * every detail_json past ADORCH_DETAIL_BYTES_PER_S of them in a second (the event still
 * arrives, without it); past ADORCH_LOG_LINES_PER_S log lines or ADORCH_CALLBACKS_PER_S
 * other callbacks in a second, the rest of that second's are dropped and counted (one flooding plugin must not drown the
 * daemon's journal or hold up the other plugins' ads). The callbacks are paced within the
 * second too: each 1/ADORCH_CALLBACK_SLICES_PER_S of it admits that share of
 * ADORCH_CALLBACKS_PER_S (1,000 per 50 ms), so that a second's worth never arrives at once.
 * Besides each payload's bound, the host bounds the payload bytes one plugin's ads hold at
 * once, and a load past that fails too (docs/isolation.md, "payload bytes per plugin"). */
#define ADORCH_PAYLOAD_MAX_BYTES (8u << 20)
#define ADORCH_TEXT_MAX_BYTES (16u << 10)
#define ADORCH_LOG_LINES_PER_S 200
#define ADORCH_CALLBACKS_PER_S 20000
#define ADORCH_CALLBACK_SLICES_PER_S 20
#define ADORCH_DETAIL_BYTES_PER_S (256u << 10)

/* 1.3: answers are not a flood. Each ad_load the host makes earns the plugin
 * ADORCH_CALLBACKS_PER_LOAD callbacks (its loaded or failed, and one event such as
 * ads_available) and each ad_show ADORCH_CALLBACKS_PER_SHOW (the show's own events) that do
 * not count against ADORCH_CALLBACKS_PER_S: a plugin that answers what it is asked loses no
 * answer however busy the host keeps it. What is earned and not yet used is kept up to one
 * slice's worth (ADORCH_CALLBACKS_PER_S / ADORCH_CALLBACK_SLICES_PER_S), so a plugin that
 * stays silent cannot save up for a burst. */
#define ADORCH_CALLBACKS_PER_LOAD 2
#define ADORCH_CALLBACKS_PER_SHOW 16

/* Non-zero if the struct at `ptr` (one that starts with struct_size) is long enough to
 * hold `field`: how one side finds out whether the other side's minor version has it. */
#define ADORCH_STRUCT_HAS(ptr, type, field) \
    ((ptr)->struct_size >= __builtin_offsetof(type, field) + sizeof(((const type *)0)->field))

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

/* Marks the value enums below as closed for compilers that understand it (clang: Swift then
 * imports each as an exhaustive enum, so the host's code does not build until it handles a
 * new value). Only an annotation: the enums' type and values are the same either way. */
#if defined(__has_attribute)
#if __has_attribute(enum_extensibility)
#define ADORCH_CLOSED_ENUM __attribute__((enum_extensibility(closed)))
#endif
#endif
#ifndef ADORCH_CLOSED_ENUM
#define ADORCH_CLOSED_ENUM
#endif

/* Ad formats. A plugin lists the ones it supports as a bit mask of (1u << format). */
typedef enum ADORCH_CLOSED_ENUM adorch_format {
    ADORCH_FORMAT_REWARDED = 1,     /* rewarded video: the viewer earns a reward by watching */
    ADORCH_FORMAT_FULLSCREEN = 2,   /* full-screen video, skippable */
    ADORCH_FORMAT_INTERSTITIAL = 3, /* full-screen ad between two screens of the app */
    ADORCH_FORMAT_BANNER = 4,       /* banner of a given size (request.width x request.height) */
    ADORCH_FORMAT_SPLASH = 5,       /* app-launch ad, loaded against a short deadline */
    ADORCH_FORMAT_NATIVE = 6,       /* native assets the app renders itself (request.count ads) */
    ADORCH_FORMAT_INTERACTIVE = 7,  /* 1.1: an interactive session (choice card, interactive unit) */
} adorch_format;

/* The bit for one format in adorch_plugin_entry_t.formats. */
#define ADORCH_FORMAT_BIT(format) (1u << (unsigned)(format))

/* The host's error taxonomy: what host->failed reports and what apps see. */
typedef enum ADORCH_CLOSED_ENUM adorch_error {
    ADORCH_ERROR_INTERNAL = 1,        /* the plugin or its SDK failed in a way not listed below */
    ADORCH_ERROR_NETWORK = 2,         /* the network could not be reached or answered badly */
    ADORCH_ERROR_NO_FILL = 3,         /* the network answered but had no ad for this request */
    ADORCH_ERROR_INVALID_REQUEST = 4, /* the request was refused: bad ad unit id, size, count... */
    ADORCH_ERROR_TIMEOUT = 5,         /* the plugin gave up waiting for its network */
    ADORCH_ERROR_RATE_LIMITED = 6,    /* the network asks us to slow down (e.g. a daily limit) */
    ADORCH_ERROR_NOT_READY = 7,       /* ad_show on an ad that is not loaded */
    ADORCH_ERROR_MALFORMED = 8,       /* 1.1: the network's answer could not be parsed (the host
                                       * counts it as plugin_fault: the plugin could not use it) */
} adorch_error;

/* Events. Plugin->host through host->event; host->plugin through ad_notify. */
typedef enum ADORCH_CLOSED_ENUM adorch_event {
    ADORCH_EVENT_MEDIA_CACHED = 1, /* plugin->host: the video is cached and plays without stalls */
    ADORCH_EVENT_IMPRESSION = 2,   /* the viewer saw the ad (counted once per ad, app's or plugin's) */
    ADORCH_EVENT_CLICK = 3,        /* the viewer clicked the ad */
    ADORCH_EVENT_CLOSE = 4,        /* the viewer closed the ad; its object ends after this */
    ADORCH_EVENT_COMPLETE = 5,     /* the video played to its end */
    ADORCH_EVENT_SKIP = 6,         /* the viewer skipped the video */
    ADORCH_EVENT_REWARD = 7,       /* plugin->host: the network granted the reward; detail may
                                    * carry its {"trans_id": "..."}, unique across daemon runs
                                    * (1.3: from request.load_uid, never from the ad id alone) */
    ADORCH_EVENT_SHOW_FAILED = 8,  /* plugin->host: the ad could not be presented */
    ADORCH_EVENT_WILL_PRESENT = 9, /* plugin->host: the ad is about to be presented */
    ADORCH_EVENT_PRESENTED = 10,   /* plugin->host: the ad is on screen */
    ADORCH_EVENT_LEFT_APPLICATION = 11, /* plugin->host: a click took the viewer out of the app */
    ADORCH_EVENT_WILL_CLOSE = 12,  /* plugin->host: the ad is about to close */
    ADORCH_EVENT_DISLIKE = 13,     /* plugin->host: the viewer disliked it; detail {"reasons": [...]} */
    /* Interactive sessions (1.1). Plugin->host unless marked otherwise. */
    ADORCH_EVENT_ADS_AVAILABLE = 14,   /* the fetch found an ad for this viewer */
    ADORCH_EVENT_STARTED = 15,         /* the unit is on screen; detail {"campaign_name": "..."} */
    ADORCH_EVENT_OPT_IN = 16,          /* the viewer chose the interactive ad;
                                        * detail {"campaign_name": "...", "ad_id": n} */
    ADORCH_EVENT_OPT_OUT = 17,         /* the viewer chose normal ads; detail {"user_initiated": bool},
                                        * false when the choice card's countdown ran out */
    ADORCH_EVENT_SKIP_CARD_SHOWN = 18, /* a skip card is shown (credit from an earlier pre-roll) */
    ADORCH_EVENT_USER_CANCEL = 19,     /* the viewer backed out to the choice card; may opt in again */
    ADORCH_EVENT_POPUP_WEBSITE = 20,   /* the viewer opened a link; detail {"url": "..."} */
    ADORCH_EVENT_AD_FREE_POD = 21,     /* the viewer earned the credit: skip the pod's other ads */
    ADORCH_EVENT_COMPLETED = 22,       /* terminal: the unit is done; detail {"time_spent_s": n} */
    ADORCH_EVENT_NO_ADS_AVAILABLE = 23, /* terminal: no ad for this viewer */
    ADORCH_EVENT_ERROR = 24,           /* terminal: unrecoverable; detail {"message": "..."} */
    ADORCH_EVENT_PAUSE = 25,           /* host->plugin: pause video, audio and timers */
    ADORCH_EVENT_RESUME = 26,          /* host->plugin: resume after PAUSE */
    /* Video progress the app reported (1.1), host->plugin, each at most once per ad. */
    ADORCH_EVENT_START = 27,           /* the video started playing */
    ADORCH_EVENT_FIRST_QUARTILE = 28,  /* 25 % played */
    ADORCH_EVENT_MIDPOINT = 29,        /* 50 % played */
    ADORCH_EVENT_THIRD_QUARTILE = 30,  /* 75 % played */
    /* 1.4, host->plugin: a bidder's ad ends unshown, ad_destroy follows; detail
     * {"reason": n}, n an adorch_loss. Sent only for entries configured `bidder = true`. */
    ADORCH_EVENT_LOSS = 31,
} adorch_event;

/* Why a bidder's ad ended unshown (ADORCH_EVENT_LOSS): OpenRTB's loss reason codes, so a
 * bidder plugin can put n in its lurl's ${AUCTION_LOSS} as it is. More may be added. */
typedef enum adorch_loss {
    ADORCH_LOSS_EXPIRED = 2,               /* it expired (or neared expiry and was replaced) untaken */
    ADORCH_LOSS_BELOW_FLOOR = 100,         /* its price was under the slot's floor (request.bid_floor) */
    ADORCH_LOSS_LOST_TO_HIGHER_BID = 102,  /* its auction went to higher prices */
} adorch_loss;

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

/* 1.4: the privacy class a load is made under (docs/privacy.md, "Classes"). The daemon shows
 * the ad only to viewers whose signals allow its class, so the network must serve it as such. */
typedef enum ADORCH_CLOSED_ENUM adorch_privacy_class {
    ADORCH_PRIVACY_PERSONALIZED = 1,     /* targeted on the viewer's profile, as the signals allow */
    ADORCH_PRIVACY_NON_PERSONALIZED = 2, /* no profile: contextual only (Google's npa=1) */
    ADORCH_PRIVACY_CHILD_DIRECTED = 3,   /* a child or a viewer under the age of consent: COPPA-safe
                                          * ads only, no profile, no tracking; the daemon may show
                                          * it to any viewer allowed non-personalised ads too */
} adorch_privacy_class;

/* 1.4: what the viewer's app said about privacy, and the class the daemon chose from it, for
 * one load (docs/privacy.md, "What reaches a plugin"). A preload is made before anyone asks:
 * its signals are those of the most recent viewer of the slot whose signals allow the class
 * (perhaps another app's), and the ad goes to whichever viewer of that class asks first; a
 * Load's (an app's banner, splash or native load on demand) are that app's. Pass each signal
 * to the network as its SDK or protocol asks (OpenRTB regs.gdpr, user.consent, regs.gpp, regs.gpp_sid,
 * regs.us_privacy, regs.coppa; an SDK's own setters) and never log the strings in full: they
 * are personal data. Every field is set by the host, from what the app said (SetPrivacy, or
 * the call's own signals). Like the rest of the request, the struct and all it points to are
 * valid only during the ad_create call ([plugin queue]): copy what you keep. Strings are
 * non-NULL and UTF-8, as long as the daemon lets an app send them (docs/privacy.md,
 * "Decoding"); "" means the app gave none, never a signal of its own.
 * A plugin built for ABI 1.3 or older never receives this struct (request.privacy is NULL to
 * it), and the daemon asks it only for loads that need no signal. */
typedef struct adorch_privacy {
    uint32_t struct_size;          /* sizeof(adorch_privacy) as the host knows it */
    uint32_t privacy_class;        /* an adorch_privacy_class: what this ad must be, set by the daemon */
    int32_t gdpr;                  /* the GDPR applies to the viewer: 1 yes, 0 no, -1 the app did not say */
    int32_t coppa;                 /* 1: child-directed (COPPA: the app is for children, or says the
                                    * viewer is a child), 0 not */
    int32_t under_age_of_consent;  /* 1: the viewer is under the age of digital consent (GDPR art. 8), 0 not */
    int32_t non_personalized;      /* 1: limit ad tracking is on, or the app asked for non-personalised
                                    * ads (npa), 0 not */
    const char *tc_string;         /* the TCF v2 TC string, as the app gave it; "" none */
    const char *gpp;               /* the GPP string, as the app gave it; "" none */
    const uint32_t *gpp_sid;       /* the GPP section ids that apply (OpenRTB gpp_sid), gpp_sid_count
                                    * of them, each 1 to 1000; NULL when gpp_sid_count is 0 */
    uint32_t gpp_sid_count;        /* how many ids gpp_sid holds: 0 (none) to 32, the sections a GPP string may carry */
    const char *us_privacy;        /* the US Privacy string ("1YNN"), as the app gave it; "" none */
    const char *max_content_rating; /* the highest ad content rating the app accepts: "G", "PG", "T"
                                     * or "MA"; "" no limit */
} adorch_privacy;

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
    uint32_t timeout_ms;            /* the deadline in ms from the ad_create call, rounded down */
    uint64_t deadline_monotonic_ns; /* the deadline on CLOCK_MONOTONIC in ns: it wins (rule 3) */
    int32_t test_mode;              /* non-zero: ask the network for test ads */
    const adorch_reward *reward;    /* the reward model for rewarded ads, NULL otherwise */
    const char *variant;            /* native: "feed", "banner" or "interstitial"; "" otherwise */
    const char *image_options_json; /* native image options as a JSON object, "{}" for defaults:
                                     * "urls_only" (bool), "multiple" (bool), "aspect_ratio" (string) */
    /* ABI 1.1; present when struct_size covers them. "" / "{}" for other formats. */
    const char *creative_url;       /* interactive: the creative (asset) URL the app was given */
    const char *ad_parameters_json; /* interactive: the ad's AdParameters, as a JSON object */
    const char *slot_type;          /* interactive: "preroll" or "midroll" */
    /* ABI 1.3; present when struct_size covers it. */
    const char *load_uid;           /* this load's id: 32 hex digits, random, never repeated */
    /* ABI 1.4; present when struct_size covers it. */
    const adorch_privacy *privacy;  /* this load's privacy class and signals; never NULL to a plugin
                                     * built for 1.4 or later, NULL to an older one */
    double bid_floor;               /* the slot's floor per 1,000 impressions (OpenRTB imp.bidfloor),
                                     * 0 for none: an ad whose price is under it is refused */
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
     * "expires_in_s" (number, the ad's lifetime; under 1 s counts as 1 s), "price" (number, its eCPM) and
     * "tracks_impressions" (true: the plugin counts impressions and clicks itself, so the
     * host does not ad_notify it of them; false or absent: the host does). A plugin that
     * tracks them reports ADORCH_EVENT_IMPRESSION through host->event once, when its network
     * counts the view (after ad_show returned 0: at PRESENTED or later), and CLICK for each
     * click; the host counts each once per ad (1.3). For a rewarded
     * ad, "reward_by": "network" says the plugin reports ADORCH_EVENT_REWARD itself;
     * otherwise the host grants the reward when the app reports the video complete.
     * (1.4) "notices" hands the ad's notice URLs to the daemon, which sends each once from a
     * durable outbox in its state directory, retried with backoff, across crashes of the
     * plugin and of itself; apps never see the key. An object of arrays of absolute http or
     * https URLs, escaped, at most 16 per array and 4096 bytes per URL: "win" (sent when the
     * ad is handed to a viewer), "billing" (when its impression counts; "${AUCTION_IMP_TS}"
     * becomes the time in ms since the epoch), "loss" (when it ends unshown;
     * "${AUCTION_LOSS}" becomes its adorch_loss, any other end than those named being
     * ADORCH_LOSS_EXPIRED) and "due" (sent now: losses the plugin decided itself). For
     * several ads ({"ads": [...]}) each ad carries its own; an interactive session's are read
     * and dropped. A malformed "notices" fails the load as the plugin's fault, naming the
     * problem. */
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

/* Bits of adorch_plugin_entry_t.flags (1.2). */
#define ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD (1u << 0) /* ad_show is cheap and safe on any host thread ([show]) */

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

    /* [show] The ad is being shown; `context_json` is a JSON object with
     * "user_id" and the app's context. Called at most once, only on a loaded ad (for an
     * interactive session: start). Return 0, or ADORCH_ERROR_NOT_READY if the ad cannot be shown. */
    int32_t (*ad_show)(adorch_ad *ad, const char *context_json);

    /* [plugin queue] An event the app reported for a shown ad (an adorch_event:
     * impression, click, close, complete, skip, start, the quartiles), or PAUSE / RESUME for an interactive
     * session; `detail_json` is a JSON object or NULL.
     * A plugin that tracks impressions and clicks itself may ignore it. */
    void (*ad_notify)(adorch_ad *ad, uint32_t event, const char *detail_json);

    /* [plugin queue] The host is done with `ad`: free it and cancel its pending work. */
    void (*ad_destroy)(adorch_ad *ad);

    /* [plugin queue] Optional (may be NULL): the plugin's own counters as a JSON object,
     * shown to operators in the daemon's status. The string stays the plugin's and must
     * stay valid until the next call to stats_json or deinit. */
    const char *(*stats_json)(void);

    uint32_t flags; /* 1.2: ADORCH_PLUGIN_FLAG_* bits; the host reads 0 from an older entry */
} adorch_plugin_entry_t;

#ifdef __cplusplus
}
#endif

#endif /* ADORCH_PLUGIN_H */
