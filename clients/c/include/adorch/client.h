/*
 * adorch/client.h — libadorch-client: the C client of the adorch daemon's Varlink API
 * (interfaces io.adorch.Ads and io.adorch.Manager, see Sources/AdorchDaemon/API/AdsInterface.swift).
 *
 * Two layers:
 *   - adorch_client_*: one call per IDL method, typed results, plus events
 *     (adorch_client_subscribe, adorch_client_next_event or an event callback).
 *   - the SDK-like layer: adorch_rewarded_ad (load, is_ready, show), adorch_shown_ad (report,
 *     listener, wait_reward), adorch_banner_load / adorch_splash_load / adorch_native_load,
 *     adorch_interactive_session.
 *
 * Blocking and non-blocking. Every call blocks until its reply (or the client's call timeout).
 * Events can be read blocking (adorch_client_next_event with a timeout) or from an app's own
 * event loop: poll adorch_client_get_fd() for adorch_client_get_events(), then call
 * adorch_client_process(), which reads what is there, reconnects when it is time, and hands
 * events to the event callback and replies of adorch_client_call_async to theirs.
 *
 * Threads. An adorch_client, and every object made from it (rewarded ad, shown ad, session),
 * is used from one thread at a time: the library takes no locks, but a call from a second
 * thread while one is inside returns ADORCH_E_BUSY. Different clients are independent.
 * Callbacks (events, replies, listeners, log) run on the thread that called into the library,
 * inside that call; they may read what they are given and make plain calls (such as
 * adorch_client_report or adorch_client_ack_reward; not from the log callback of a blocking
 * call), while adorch_client_process, adorch_client_next_event and adorch_client_subscribe
 * return ADORCH_E_BUSY there. adorch_client_free inside a callback frees the client when the
 * call that ran the callback returns (no further callbacks run).
 *
 * fork(). A client belongs to the process that made it: in a child, calls return
 * ADORCH_E_ARGUMENT and adorch_client_free only closes the child's copies of its fds (the
 * parent's client goes on). Make a new client in the child.
 *
 * Errors. Every function that can fail returns an adorch_status (ADORCH_OK = 0) and fills an
 * optional adorch_error (pass NULL if you only want the code) with the daemon's error name,
 * message and the reply's parameters as JSON text. Each error of the IDLs has its own code;
 * a daemon error name this version does not know is ADORCH_E_DAEMON (forward compatible).
 *
 * Reconnect. When the daemon restarts, the client reconnects with a bounded backoff (options
 * reconnect_timeout_ms, default 30 s), logging one line per retry. Reads (ListSlots,
 * ListRewards, ListEvents, GetStatus, GetCaps, GetInterfaceDescription, GetPrivacy, and SetPrivacy, which
 * sets the same however often it is sent) are retried on the new
 * connection, and so is any call whose message did not get out whole (it had no effect), each
 * after the backoff. A call that may have taken effect (Show, Load, Report, AckReward, the
 * session calls) whose connection broke after it was sent is never retried: it fails with
 * ADORCH_E_CONNECTION_LOST; one that met the call timeout fails with ADORCH_E_TIMEOUT and may
 * have taken effect just the same (a Show's ad may have been handed out). The call timeout
 * bounds the time a call waits for replies, summed over its sends; waiting for a daemon to come
 * back is bounded by reconnect_timeout_ms. A call over the daemon's max_message_bytes gets the
 * daemon's refusal (ADORCH_E_VARLINK_INVALID_PARAMETER), once. A subscription subscribes again
 * on the new connection and its events go on in one stream (the second "subscribed" event is
 * logged, not delivered); rewards not yet acknowledged are delivered again then, so dedupe
 * rewards by trans_id. Retries go on until the budget is spent, the last one at its end.
 *
 * Rewards are ledger first (docs/rules.md, "Rewards"): the library never acknowledges a reward;
 * call adorch_client_ack_reward once the user has been credited.
 *
 * Memory. Strings passed in are copied or used only during the call. Results are owned by the
 * caller and freed with their *_free function; const char * fields inside a result live as
 * long as the result. Pointers given to a callback are valid during the callback only.
 *
 * Versioning. ADORCH_CLIENT_VERSION_* is the header's version, adorch_client_version() the
 * library's. Within one major, structs the app fills (options, load request, reward model,
 * listener) start with `size` and only grow at the end; results the library fills grow only
 * into their reserved fields, so arrays of them keep their stride.
 */
#ifndef ADORCH_CLIENT_H
#define ADORCH_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The header's version: a new major breaks the ABI, a new minor only adds. */
#define ADORCH_CLIENT_VERSION_MAJOR 0
#define ADORCH_CLIENT_VERSION_MINOR 3
#define ADORCH_CLIENT_VERSION_PATCH 0

/* Marks the library's exported symbols; everything else is hidden (-fvisibility=hidden). */
#if defined(ADORCH_CLIENT_BUILDING)
#define ADORCH_CLIENT_EXPORT __attribute__((visibility("default")))
#else
#define ADORCH_CLIENT_EXPORT
#endif

/* The library's version as "MAJOR.MINOR.PATCH"; compare with the macros above. */
ADORCH_CLIENT_EXPORT const char *adorch_client_version(void);

/* ---- Status codes and errors ------------------------------------------------------------ */

/* What a call returned: 0 for success, one code per daemon error, then the library's own. */
typedef enum adorch_status {
    ADORCH_OK = 0,                            /* success */
    /* io.adorch.Ads errors (and Manager's of the same name) */
    ADORCH_E_NO_AD_READY = 1,                 /* io.adorch.Ads.NoAdReady: the slot has no valid ad now */
    ADORCH_E_SLOT_NOT_FOUND = 2,              /* io.adorch.Ads/Manager.SlotNotFound: no slot has this id */
    ADORCH_E_AD_NOT_VALID = 3,                /* io.adorch.Ads.AdNotValid: unknown/ended ad or repeated report */
    ADORCH_E_SESSION_NOT_FOUND = 4,           /* io.adorch.Ads.SessionNotFound: no live session has this id */
    ADORCH_E_LOAD_FAILED = 5,                 /* io.adorch.Ads.LoadFailed: a Load ended without ads */
    ADORCH_E_INVALID_PARAMETER = 6,           /* io.adorch.Ads.InvalidParameter: a parameter is out of range */
    ADORCH_E_REWARD_NOT_FOUND = 7,            /* io.adorch.Ads.RewardNotFound: no reward has this trans_id */
    ADORCH_E_LEDGER_FAILED = 8,               /* io.adorch.Ads/Manager.LedgerFailed: the reward ledger failed */
    ADORCH_E_SHUTTING_DOWN = 9,               /* io.adorch.Ads.ShuttingDown: the daemon is stopping */
    ADORCH_E_RATE_LIMITED = 10,               /* io.adorch.Ads.RateLimited: too fast; see retry_after_ms */
    ADORCH_E_TOO_MANY_OPEN_ADS = 11,          /* io.adorch.Ads.TooManyOpenAds: report close on ads you are done with, or (budget
                                                 max_unacknowledged_rewards_per_uid) AckReward the rewards waiting */
    ADORCH_E_TOO_MANY_SESSIONS = 12,          /* io.adorch.Ads.TooManySessions: stop a session first */
    ADORCH_E_PERMISSION_DENIED = 13,          /* io.adorch.Ads/Manager.PermissionDenied: this user may not */
    ADORCH_E_CAPPED = 14,                     /* io.adorch.Ads.Capped: a frequency rule holds the Show; retry_after_ms, "slot", "rule" */
    ADORCH_E_TOO_MANY_PRIVACY_RECORDS = 15,   /* io.adorch.Ads.TooManyPrivacyRecords: the app keeps "limit" privacy records; clear one first */
    ADORCH_E_PRIVACY_NOT_STORED = 16,         /* io.adorch.Ads.PrivacyNotStored: the daemon could not write it (a full disk); nothing changed */
    /* io.adorch.Manager errors */
    ADORCH_E_NO_REWARD_KEY = 20,              /* io.adorch.Manager.NoRewardKey: no reward key is configured */
    ADORCH_E_RELOAD_FAILED = 21,              /* io.adorch.Manager.ReloadFailed: the new config was refused */
    /* connection-level errors the daemon sends before closing a connection */
    ADORCH_E_TOO_MANY_CONNECTIONS = 30,       /* io.adorch.TooManyConnections: over the connection budget */
    ADORCH_E_INCOMPLETE_MESSAGE = 31,         /* io.adorch.IncompleteMessage: a message was not finished in time */
    ADORCH_E_READER_TOO_SLOW = 32,            /* io.adorch.ReaderTooSlow: this client did not read its replies */
    ADORCH_E_TOO_MANY_PENDING_BYTES = 33,     /* io.adorch.TooManyPendingBytes: this uid sent more calls than the daemon holds unhandled */
    /* org.varlink.service errors */
    ADORCH_E_VARLINK_INTERFACE_NOT_FOUND = 40,    /* org.varlink.service.InterfaceNotFound */
    ADORCH_E_VARLINK_METHOD_NOT_FOUND = 41,       /* org.varlink.service.MethodNotFound */
    ADORCH_E_VARLINK_METHOD_NOT_IMPLEMENTED = 42, /* org.varlink.service.MethodNotImplemented */
    ADORCH_E_VARLINK_INVALID_PARAMETER = 43,      /* org.varlink.service.InvalidParameter: wrong parameter name or type */
    ADORCH_E_VARLINK_EXPECTED_MORE = 44,          /* org.varlink.service.ExpectedMore: call needs "more" */
    ADORCH_E_VARLINK_PERMISSION_DENIED = 45,      /* org.varlink.service.PermissionDenied */
    /* the library's own */
    ADORCH_E_DAEMON = 60,                     /* a daemon error whose name this version does not know (see name) */
    ADORCH_E_CONNECT = 61,                    /* cannot connect to the socket (after retrying; sys_errno says why) */
    ADORCH_E_CONNECTION_LOST = 62,            /* the connection broke after a call that may have taken effect was sent */
    ADORCH_E_TIMEOUT = 63,                    /* no reply or event within the timeout (a call may have taken effect) */
    ADORCH_E_PROTOCOL = 64,                   /* the daemon sent something that is not a valid reply (not the IDL's types) */
    ADORCH_E_NO_MEMORY = 65,                  /* out of memory */
    ADORCH_E_ARGUMENT = 66,                   /* a bad argument to a library function (NULL, bad JSON text, not UTF-8) */
    ADORCH_E_BUSY = 67,                       /* async calls in flight, no subscription, another thread, or inside a callback */
    ADORCH_E_ENDED = 68                       /* a stream is over (session after its terminal event) */
} adorch_status;

/* A failed call's details; all strings are owned by it and freed by adorch_error_clear. */
typedef struct adorch_error {
    adorch_status code;       /* the status the call returned */
    char *name;               /* the daemon's qualified error name, or the library's ("adorch.client.Timeout") */
    char *message;            /* human-readable: the daemon's "message" parameter, or the library's text */
    char *parameters;         /* the error reply's parameters as JSON object text ("{}" for library errors) */
    int64_t retry_after_ms;   /* RateLimited's and Capped's retry_after_ms; -1 otherwise */
    int sys_errno;            /* errno behind ADORCH_E_CONNECT / CONNECTION_LOST; 0 otherwise */
    void *reserved[4];        /* for growth; do not touch */
} adorch_error;

/* Initializes an adorch_error on the stack: adorch_error e = ADORCH_ERROR_INIT; */
#define ADORCH_ERROR_INIT { ADORCH_OK, NULL, NULL, NULL, -1, 0, { NULL, NULL, NULL, NULL } }

/* Frees what an error holds and resets it to ADORCH_ERROR_INIT; a NULL error is ignored. */
ADORCH_CLIENT_EXPORT void adorch_error_clear(adorch_error *error);
/* A string parameter of the error reply (e.g. "slot", "parameter"), or NULL; valid until cleared. */
ADORCH_CLIENT_EXPORT const char *adorch_error_parameter(const adorch_error *error, const char *key);
/* An integer parameter of the error reply (e.g. TooManyOpenAds' "limit"): true and *value if it has one. */
ADORCH_CLIENT_EXPORT bool adorch_error_parameter_int(const adorch_error *error, const char *key, int64_t *value);
/* The code of a qualified error name ("io.adorch.Ads.NoAdReady", or the library's own
 * "adorch.client.Timeout"); ADORCH_E_DAEMON if unknown. */
ADORCH_CLIENT_EXPORT adorch_status adorch_error_code_from_name(const char *name);
/* The qualified name of a code (the Ads one where Ads and Manager share it); NULL for unknown codes. */
ADORCH_CLIENT_EXPORT const char *adorch_error_name(adorch_status code);

/* ---- Client ---------------------------------------------------------------------------- */

/* One connection to the daemon (plus one per open subscription); opaque. */
typedef struct adorch_client adorch_client;

/* Log levels of the library's own lines. */
typedef enum adorch_log_level {
    ADORCH_LOG_DEBUG = 0,    /* details: swallowed resubscriptions */
    ADORCH_LOG_INFO = 1,     /* reconnected */
    ADORCH_LOG_WARNING = 2,  /* a retry (one line per retry) */
    ADORCH_LOG_ERROR = 3     /* giving up */
} adorch_log_level;

/* Receives the library's log lines (default: stderr, "adorch-client: ..."); see Threads. */
typedef void (*adorch_log_fn)(void *userdata, adorch_log_level level, const char *message);

/* How long a call waits for its reply unless the options say otherwise (a Load waits its timeout_ms, or 60 s, more). */
#define ADORCH_CLIENT_DEFAULT_CALL_TIMEOUT_MS 30000
/* How long the client keeps retrying a lost daemon unless the options say otherwise. */
#define ADORCH_CLIENT_DEFAULT_RECONNECT_TIMEOUT_MS 30000

/* How to connect; start from ADORCH_CLIENT_OPTIONS_INIT, which sets size and the defaults. */
typedef struct adorch_client_options {
    uint32_t size;                  /* sizeof(adorch_client_options) of the caller's header */
    const char *socket_path;        /* NULL: $ADORCH_SOCKET, else this user's daemon's if it exists, else /run/adorch/adorchd.sock
                                     * if that exists, else this user's (adorchctl's rule); "" or too long: ADORCH_E_ARGUMENT */
    int32_t call_timeout_ms;        /* how long a call waits for its reply; 0: the default above; < 0: forever */
    int32_t reconnect_timeout_ms;   /* how long to keep retrying a lost daemon; 0: the default above; < 0: never retry */
    adorch_log_fn log;              /* NULL: stderr */
    void *log_userdata;             /* passed to log */
} adorch_client_options;

/* Default options: the socket by the default rule, the default timeouts, log to stderr. */
#define ADORCH_CLIENT_OPTIONS_INIT { (uint32_t)sizeof(adorch_client_options), NULL, 0, 0, NULL, NULL }

/* Makes a client and connects it (retrying as for a restart); options may be NULL. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_new(adorch_client **out, const adorch_client_options *options, adorch_error *error);
/* Closes the client's connections and frees it; NULL is ignored. Pending async calls are dropped. */
ADORCH_CLIENT_EXPORT void adorch_client_free(adorch_client *client);
/* The socket path the client uses (after the default rule). */
ADORCH_CLIENT_EXPORT const char *adorch_client_socket_path(const adorch_client *client);

/* ---- Results ------------------------------------------------------------------------------ */

/* A frequency rule that holds a slot for a user (IDL type CapHold, docs/caps.md). */
typedef struct adorch_cap_hold {
    const char *rule;         /* its name: "pacing 30s per user", "sim: 1 per 1d per user" */
    const char *kind;         /* cap or pacing */
    const char *network;      /* a network's rule: its plugin; NULL for the slot's own */
    int64_t retry_after_ms;   /* a Show after this many milliseconds is let in, if no other ad is shown before */
    const char *until;        /* RFC 3339: the same moment */
    void *reserved[4];        /* for growth */
} adorch_cap_hold;

/* A slot (IDL type Slot). */
typedef struct adorch_slot {
    const char *id;           /* the slot's id */
    const char *format;       /* rewarded, fullscreen, interstitial, banner, splash, native, interactive */
    int64_t buffer;           /* the daemon's target of ready ads now */
    int64_t buffer_min;       /* the target's lower bound */
    int64_t buffer_max;       /* the target's upper bound */
    int64_t ready;            /* valid ads ready now */
    int64_t loading;          /* loads in flight */
    const char *demand;       /* the Demand object as JSON text, or NULL */
    const char *unservable;   /* why the slot cannot fill, or NULL */
    const adorch_cap_hold *capped; /* the rule that holds a Show for the user ListSlots was given, or NULL;
                                    * since 0.2, in what was reserved[0] (a 0.1 library leaves it NULL) */
    void *reserved[3];        /* for growth */
} adorch_slot;

/* The slots of ListSlots. */
typedef struct adorch_slot_list {
    size_t count;             /* number of items */
    adorch_slot *items;       /* count slots */
} adorch_slot_list;

/* One frequency rule of a slot or of one of its networks, and what it counts now (IDL type
 * CapRule of io.adorch.Manager.GetCaps). */
typedef struct adorch_cap_rule {
    const char *rule;         /* as Capped names it: "3 per 1h per user", "sim: pacing 30s per slot" */
    const char *kind;         /* cap or pacing */
    const char *scope;        /* user or slot */
    const char *network;      /* a network's rule: its plugin; NULL for the slot's own */
    const char *ad_unit_id;   /* a network's rule: its ad unit; NULL for the slot's own */
    int64_t impressions;      /* at most this many ads in any window of window_ms */
    int64_t window_ms;        /* the window */
    int64_t counted;          /* impressions the rule counts for the user (or the slot) now */
    int64_t retry_after_ms;   /* the rule holds a Show now: one after this many ms is let in; -1 when it does not hold */
    const char *until;        /* RFC 3339: the same moment, or NULL */
    void *reserved[4];        /* for growth */
} adorch_cap_rule;

/* The rules of GetCaps. */
typedef struct adorch_cap_rule_list {
    size_t count;             /* number of items */
    adorch_cap_rule *items;   /* count rules */
} adorch_cap_rule_list;

/* An ad handed to the app (IDL type Ad). */
typedef struct adorch_ad {
    const char *id;           /* pass it to Report */
    const char *slot;         /* its slot */
    const char *network;      /* the plugin that filled it */
    const char *format;       /* its format */
    const char *payload;      /* what the app renders, JSON object text */
    const char *expires_at;   /* RFC 3339: display it before then */
    double price;             /* eCPM, 0 when unknown */
    void *reserved[4];        /* for growth */
} adorch_ad;

/* The ads of a Load. */
typedef struct adorch_ad_list {
    size_t count;             /* number of items */
    adorch_ad *items;         /* count ads */
} adorch_ad_list;

/* A reward in the ledger (IDL type Reward). */
typedef struct adorch_reward {
    const char *trans_id;     /* the transaction id: acknowledge and dedupe by it */
    const char *ad_id;        /* the ad that earned it */
    const char *user_id;      /* the user_id given to Show */
    const char *slot;         /* its slot */
    const char *network;      /* the ad's network */
    const char *reward_name;  /* e.g. "coins" */
    int64_t reward_amount;    /* e.g. 10 */
    const char *extra;        /* custom data of the reward model */
    const char *granted_at;   /* RFC 3339 */
    bool acknowledged;        /* whether AckReward was called for it */
    void *reserved[4];        /* for growth */
} adorch_reward;

/* A page of ListRewards. */
typedef struct adorch_reward_list {
    size_t count;             /* number of items */
    adorch_reward *items;     /* count rewards, oldest first */
    bool more;                /* more follow: call again with after = the last trans_id */
} adorch_reward_list;

/* An event (IDL type Event); absent optional strings are NULL. */
typedef struct adorch_event {
    const char *kind;         /* subscribed, ad_loaded, ad_shown, ad_event, reward_granted, session_event, ... */
    const char *time;         /* RFC 3339 */
    const char *slot;         /* its slot */
    const char *ad_id;        /* its ad */
    const char *network;      /* its network */
    const char *error;        /* host error code (no_fill, timeout, ...) */
    const char *message;      /* text */
    const char *viewer_event; /* ad_event: impression, click, close, complete, skip, ... */
    const char *user_id;      /* ad_shown, reward_granted: the app's user id */
    const char *name;         /* the ad event vocabulary name (impression, closed, reward, started, completed...) */
    const char *detail;       /* JSON object text, or NULL (reward_granted: the Reward) */
    const char *session_id;   /* session_event: its session */
    int64_t network_code;     /* the network's error code; valid if has_network_code */
    bool has_network_code;    /* whether network_code was sent */
    bool terminal;            /* session_event: the session's last event */
    bool ad_free_pod;         /* the session's last event: the viewer earned the ad-free pod */
    int64_t rewards_waiting;  /* subscribed: rewards beyond those redelivered; -1 when absent */
    const char *json;         /* the whole event as JSON text */
    void *reserved[4];        /* for growth */
} adorch_event;

/* An event list of ListEvents. */
typedef struct adorch_event_list {
    size_t count;             /* number of items */
    adorch_event *items;      /* count events, oldest first */
} adorch_event_list;

ADORCH_CLIENT_EXPORT void adorch_slot_list_free(adorch_slot_list *list);      /* frees; NULL ignored */
ADORCH_CLIENT_EXPORT void adorch_ad_free(adorch_ad *ad);                      /* frees; NULL ignored */
ADORCH_CLIENT_EXPORT void adorch_ad_list_free(adorch_ad_list *list);          /* frees; NULL ignored */
ADORCH_CLIENT_EXPORT void adorch_reward_free(adorch_reward *reward);          /* frees; NULL ignored */
ADORCH_CLIENT_EXPORT void adorch_reward_list_free(adorch_reward_list *list);  /* frees; NULL ignored */
ADORCH_CLIENT_EXPORT void adorch_event_free(adorch_event *event);             /* frees; NULL ignored */
ADORCH_CLIENT_EXPORT void adorch_event_list_free(adorch_event_list *list);    /* frees; NULL ignored */
ADORCH_CLIENT_EXPORT void adorch_cap_rule_list_free(adorch_cap_rule_list *list); /* frees; NULL ignored */
/* Frees a string the library returned (JSON text of get_status, call); NULL ignored. */
ADORCH_CLIENT_EXPORT void adorch_string_free(char *text);

/* ---- Plain calls, 1:1 with the IDL ---------------------------------------------------------- */

/* A reward model for Show: NULL fields (amount < 0) keep the slot's. */
typedef struct adorch_reward_model {
    uint32_t size;            /* sizeof(adorch_reward_model) */
    const char *name;         /* reward name, or NULL */
    int64_t amount;           /* reward amount, or -1 */
    const char *extra;        /* custom data, or NULL */
} adorch_reward_model;

/* What a Load asks for; zero fields take the slot's defaults. */
typedef struct adorch_load_request {
    uint32_t size;            /* sizeof(adorch_load_request) */
    const char *slot;         /* the slot (banner, splash, native) */
    int32_t count;            /* native: 1 to 10; 0: the slot's */
    int32_t width;            /* 0: unset */
    int32_t height;           /* 0: unset */
    int32_t timeout_ms;       /* 0: the slot's */
    const char *targeting;    /* JSON object text, or NULL */
    const char *privacy;      /* a Privacy as JSON object text, for this Load only (see adorch_client_set_privacy), or NULL; since 0.3 */
} adorch_load_request;

/* ListSlots; each slot's capped is for a Show without a user_id. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_list_slots(adorch_client *client, adorch_slot_list **out, adorch_error *error);
/* ListSlots(user_id): each slot's capped says whether a frequency rule holds a Show for user_id (NULL: for one without). */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_list_slots_for_user(adorch_client *client, const char *user_id, adorch_slot_list **out,
                                                                     adorch_error *error);
/* Show: user_id and reward may be NULL (a rewarded slot needs a user_id). */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_show(adorch_client *client, const char *slot, const char *user_id,
                                                      const adorch_reward_model *reward, adorch_ad **out, adorch_error *error);
/* Show with a Privacy (JSON object text, or NULL) for this Show only, over what adorch_client_set_privacy set. Since 0.3. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_show_with_privacy(adorch_client *client, const char *slot, const char *user_id,
                                                                   const adorch_reward_model *reward, const char *privacy,
                                                                   adorch_ad **out, adorch_error *error);
/* Report a viewer event: impression, click, close, complete, skip, start, first_quartile, midpoint, third_quartile. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_report(adorch_client *client, const char *ad_id, const char *event, adorch_error *error);
/* Load ads of a banner, splash or native slot. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_load(adorch_client *client, const adorch_load_request *request, adorch_ad_list **out, adorch_error *error);
/* ListRewards: any of user_id, since, after may be NULL; limit 0: the daemon's default. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_list_rewards(adorch_client *client, const char *user_id, const char *since,
                                                              const char *after, int32_t limit, adorch_reward_list **out, adorch_error *error);
/* AckReward: the app credited this reward; it is not offered again. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_ack_reward(adorch_client *client, const char *trans_id, adorch_error *error);
/* SetPrivacy (docs/privacy.md, "Setting a viewer's state"): what the app's viewers said about their privacy, for
 * user_id or (NULL) the app as a whole. privacy is a Privacy as JSON object text (gdpr_applies, tc_string, gpp,
 * gpp_sid, us_privacy, child_directed, under_age_of_consent, non_personalized, max_content_rating), or NULL to
 * clear it. Returns once the daemon has it on disk; a string that does not decode is ADORCH_E_INVALID_PARAMETER,
 * its "parameter" naming it (privacy.tc_string), and nothing changes. Sent again after a lost connection:
 * setting the same twice is setting it once. Since 0.3. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_set_privacy(adorch_client *client, const char *user_id, const char *privacy,
                                                             adorch_error *error);
/* GetPrivacy: what applies to the app's calls for user_id (NULL: calls without one). *privacy is the Privacy as JSON
 * object text, or NULL when none applies; *source "user", "app" or "none". Free both with adorch_string_free. Since 0.3. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_get_privacy(adorch_client *client, const char *user_id, char **privacy,
                                                             char **source, adorch_error *error);
/* InitInteractive: slot_type "preroll" or "midroll"; ad_parameters is JSON object text. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_init_interactive(adorch_client *client, const char *slot, const char *creative_url,
                                                                  const char *ad_parameters, const char *slot_type,
                                                                  char **session_id, adorch_error *error);
/* Start a session's unit. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_start(adorch_client *client, const char *session_id, adorch_error *error);
/* Pause a session's unit. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_pause(adorch_client *client, const char *session_id, adorch_error *error);
/* Resume a paused unit. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_resume(adorch_client *client, const char *session_id, adorch_error *error);
/* Stop a session at once. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_stop(adorch_client *client, const char *session_id, adorch_error *error);
/* ListEvents: slots may be NULL (all) with slot_count 0; limit 0: the daemon's default (50), else 1 to the 512 kept. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_list_events(adorch_client *client, const char *const *slots, size_t slot_count,
                                                             int32_t limit, adorch_event_list **out, adorch_error *error);
/* io.adorch.Manager.GetStatus: the reply's parameters as JSON text (free with adorch_string_free). */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_get_status(adorch_client *client, char **status_json, adorch_error *error);
/* io.adorch.Manager.GetCaps: every frequency rule of slot and its networks, counted for user_id (NULL: Shows without one). */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_get_caps(adorch_client *client, const char *slot, const char *user_id,
                                                          adorch_cap_rule_list **out, adorch_error *error);
/* org.varlink.service.GetInterfaceDescription: the IDL text of an interface. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_get_interface_description(adorch_client *client, const char *interface_name,
                                                                          char **description, adorch_error *error);
/* Any method by its qualified name, parameters as JSON object text (NULL: {}); reply parameters as JSON text.
 * It is taken for one that may have taken effect (never retried after it was sent). Every string
 * argument of every call must be UTF-8 (JSON's): one that is not is ADORCH_E_ARGUMENT naming it. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_call(adorch_client *client, const char *method, const char *parameters,
                                                      char **reply, adorch_error *error);

/* ---- Events ------------------------------------------------------------------------------ */

/* Receives an event in adorch_client_process / adorch_client_next_event (see Threads). */
typedef void (*adorch_event_fn)(void *userdata, const adorch_event *event);

/* Subscribe on the client's own event connection (slots NULL / 0: all); one subscription per
 * client, replacing any earlier one. Returns once the "subscribed" event arrived (it is delivered too). */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_subscribe(adorch_client *client, const char *const *slots, size_t slot_count, adorch_error *error);
/* Ends the subscription; its unread events are dropped. */
ADORCH_CLIENT_EXPORT void adorch_client_unsubscribe(adorch_client *client);
/* Sets (or with NULL, clears) the event callback: then events go to it instead of next_event. */
ADORCH_CLIENT_EXPORT void adorch_client_set_event_callback(adorch_client *client, adorch_event_fn callback, void *userdata);
/* The next event, waiting up to timeout_ms (0: only what is there; < 0: forever); reconnects as needed.
 * ADORCH_E_TIMEOUT if none came; ADORCH_E_BUSY without a subscription. Free the event. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_next_event(adorch_client *client, int timeout_ms, adorch_event **out, adorch_error *error);

/* ---- Non-blocking mode ------------------------------------------------------------------------ */

/* Receives the reply of an async call: status, reply parameters as JSON text (NULL on error), the error. */
typedef void (*adorch_reply_fn)(void *userdata, adorch_status status, const char *reply, const adorch_error *error);

/* The fd to poll (stable for the client's life; it is an epoll fd covering the client's sockets and timers). */
ADORCH_CLIENT_EXPORT int adorch_client_get_fd(const adorch_client *client);
/* The poll events to wait for on that fd (POLLIN). */
ADORCH_CLIENT_EXPORT short adorch_client_get_events(const adorch_client *client);
/* Does what is due without blocking: reads replies and events, reconnects when its timer fires,
 * times out async calls, dispatches to callbacks (events are queued for next_event if no event
 * callback is set). Returns an error only when the subscription gave up reconnecting
 * (ADORCH_E_CONNECT) or its stream was not valid events (ADORCH_E_PROTOCOL): then it is over. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_process(adorch_client *client, adorch_error *error);
/* Sends a call (as adorch_client_call) without waiting for the reply, which goes to callback from
 * adorch_client_process; with no reply within call_timeout_ms the callback gets ADORCH_E_TIMEOUT
 * (and the calls after it, whose connection goes, ADORCH_E_CONNECTION_LOST). While async calls are
 * in flight, blocking calls return ADORCH_E_BUSY. If the call connection has to be made again
 * first, it is one connect attempt: ADORCH_E_CONNECT at once if the daemon is not there. */
ADORCH_CLIENT_EXPORT adorch_status adorch_client_call_async(adorch_client *client, const char *method, const char *parameters,
                                                            adorch_reply_fn callback, void *userdata, adorch_error *error);

/* ---- SDK-like layer: preloaded ads ---------------------------------------------------------- */

/* A preloaded slot (rewarded, fullscreen, interstitial) an app shows ads of; opaque. */
typedef struct adorch_rewarded_ad adorch_rewarded_ad;
/* The same object serves fullscreen and interstitial slots. */
typedef adorch_rewarded_ad adorch_interstitial_ad;
/* The same object serves fullscreen and interstitial slots. */
typedef adorch_rewarded_ad adorch_fullscreen_ad;
/* An ad the app is showing: its Ad, reports, listener, reward; opaque. */
typedef struct adorch_shown_ad adorch_shown_ad;

/* A rewarded (or fullscreen, interstitial) ad of a slot, used through client (which must outlive it);
 * SlotNotFound for an unknown slot, ADORCH_E_ARGUMENT for a slot of another format (ListSlots). */
ADORCH_CLIENT_EXPORT adorch_status adorch_rewarded_ad_new(adorch_client *client, const char *slot, adorch_rewarded_ad **out, adorch_error *error);
/* Frees it; NULL ignored. */
ADORCH_CLIENT_EXPORT void adorch_rewarded_ad_free(adorch_rewarded_ad *ad);
/* Waits up to timeout_ms until the slot has a valid ad ready (at once if it has; else its ad_loaded event). */
ADORCH_CLIENT_EXPORT adorch_status adorch_rewarded_ad_load(adorch_rewarded_ad *ad, int timeout_ms, adorch_error *error);
/* Whether the slot has a valid ad ready now (ListSlots); false with error filled on failure. */
ADORCH_CLIENT_EXPORT bool adorch_rewarded_ad_is_ready(adorch_rewarded_ad *ad, adorch_error *error);
/* Shows the slot's best ad for user_id (reward may be NULL); the shown ad is the caller's to free. */
ADORCH_CLIENT_EXPORT adorch_status adorch_rewarded_ad_show(adorch_rewarded_ad *ad, const char *user_id, const adorch_reward_model *reward,
                                                           adorch_shown_ad **out, adorch_error *error);

/* What happens to a shown ad, from the client's subscription (subscribe to its slot, or all, for them to fire). */
typedef struct adorch_ad_listener {
    uint32_t size;                                                    /* sizeof(adorch_ad_listener) */
    void (*on_impression)(void *userdata, adorch_shown_ad *ad);       /* first impression; may be NULL */
    void (*on_click)(void *userdata, adorch_shown_ad *ad);            /* each click; may be NULL */
    void (*on_close)(void *userdata, adorch_shown_ad *ad);            /* the ad closed; may be NULL */
    void (*on_reward)(void *userdata, adorch_shown_ad *ad, const adorch_reward *reward); /* reward granted (once); may be NULL */
    void (*on_failed_to_display)(void *userdata, adorch_shown_ad *ad); /* the network could not present it; may be NULL */
} adorch_ad_listener;

/* The shown ad's Ad (valid while the shown ad lives). */
ADORCH_CLIENT_EXPORT const adorch_ad *adorch_shown_ad_get_ad(const adorch_shown_ad *shown);
/* Reports a viewer event for it (as adorch_client_report). */
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report(adorch_shown_ad *shown, const char *event, adorch_error *error);
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report_impression(adorch_shown_ad *shown, adorch_error *error); /* "impression" */
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report_click(adorch_shown_ad *shown, adorch_error *error);      /* "click" */
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report_complete(adorch_shown_ad *shown, adorch_error *error);   /* "complete": earns the reward */
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report_skip(adorch_shown_ad *shown, adorch_error *error);       /* "skip" */
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report_close(adorch_shown_ad *shown, adorch_error *error);      /* "close": ends the ad */
/* Sets the listener (copied; NULL clears); it fires while the client processes its subscription's events. */
ADORCH_CLIENT_EXPORT void adorch_shown_ad_set_listener(adorch_shown_ad *shown, const adorch_ad_listener *listener, void *userdata);
/* Waits up to timeout_ms for this ad's reward (reward_granted, or ListRewards if granted earlier) on a
 * connection of its own; does not acknowledge it. If the daemon restarts meanwhile and the ledger has
 * no reward for the ad, ADORCH_E_AD_NOT_VALID (no open ad outlives a restart). */
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_wait_reward(adorch_shown_ad *shown, int timeout_ms, adorch_reward **out, adorch_error *error);
/* Frees it (the ad itself lives on in the daemon until closed or ended); NULL ignored. */
ADORCH_CLIENT_EXPORT void adorch_shown_ad_free(adorch_shown_ad *shown);

/* ---- SDK-like layer: on-demand ads -------------------------------------------------------------- */

/* Loads one banner of slot (width/height 0: the slot's). These three check the slot's format first
 * (ListSlots): ADORCH_E_ARGUMENT for a slot of another one. */
ADORCH_CLIENT_EXPORT adorch_status adorch_banner_load(adorch_client *client, const char *slot, int32_t width, int32_t height,
                                                      adorch_ad **out, adorch_error *error);
/* Loads one splash ad of slot within timeout_ms (0: the slot's, splash default 2000). */
ADORCH_CLIENT_EXPORT adorch_status adorch_splash_load(adorch_client *client, const char *slot, int32_t timeout_ms, adorch_ad **out, adorch_error *error);
/* Loads count native ads (1 to 10, 0: the slot's) of slot. */
ADORCH_CLIENT_EXPORT adorch_status adorch_native_load(adorch_client *client, const char *slot, int32_t count, adorch_ad_list **out, adorch_error *error);

/* ---- SDK-like layer: interactive sessions ---------------------------------------------------------- */

/* An interactive session with its own event connection, subscribed before InitInteractive; opaque. */
typedef struct adorch_interactive_session adorch_interactive_session;

/* InitInteractive on slot (slot_type "preroll"/"midroll", ad_parameters JSON object text). */
ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_new(adorch_client *client, const char *slot, const char *creative_url,
                                                                  const char *ad_parameters, const char *slot_type,
                                                                  adorch_interactive_session **out, adorch_error *error);
/* The session's id. */
ADORCH_CLIENT_EXPORT const char *adorch_interactive_session_id(const adorch_interactive_session *session);
ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_start(adorch_interactive_session *session, adorch_error *error);  /* Start */
ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_pause(adorch_interactive_session *session, adorch_error *error);  /* Pause */
ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_resume(adorch_interactive_session *session, adorch_error *error); /* Resume */
ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_stop(adorch_interactive_session *session, adorch_error *error);   /* Stop */
/* The session's next session_event, waiting up to timeout_ms; ADORCH_E_ENDED after the terminal one. */
ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_next_event(adorch_interactive_session *session, int timeout_ms,
                                                                         adorch_event **out, adorch_error *error);
/* Frees it (does not Stop it); NULL ignored. */
ADORCH_CLIENT_EXPORT void adorch_interactive_session_free(adorch_interactive_session *session);

#ifdef __cplusplus
}
#endif

#endif /* ADORCH_CLIENT_H */
