/* libadorch-client: see include/adorch/client.h for the contract. */
#define _GNU_SOURCE
#include "adorch/client.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define STR2(x) #x
#define STR(x) STR2(x)

enum {
    /* Reconnect backoff: doubles from the first delay up to the cap. */
    BACKOFF_FIRST_MS = 100,
    BACKOFF_MAX_MS = 2000,
    /* A reply bigger than this is taken for a broken peer rather than buffered without end. */
    MAX_MESSAGE_BYTES = 64 * 1024 * 1024,
    /* The longest a Load may take in the daemon (LoadBounds.timeoutMilliseconds in
       Sources/AdorchEngine/LoadBounds.swift): a Load without timeout_ms runs to its slot's
       load_timeout_ms, which the client does not know, so it waits this much beyond the call timeout. */
    MOST_LOAD_MS = 60000,
};

static const char SYSTEM_SOCKET[] = "/run/adorch/adorchd.sock";

ADORCH_CLIENT_EXPORT const char *adorch_client_version(void) {
    return STR(ADORCH_CLIENT_VERSION_MAJOR) "." STR(ADORCH_CLIENT_VERSION_MINOR) "." STR(ADORCH_CLIENT_VERSION_PATCH);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* -1: no deadline. */
static int64_t deadline_after(int timeout_ms) { return timeout_ms < 0 ? -1 : now_ms() + timeout_ms; }

/* What poll() should wait for until the deadline (or until `wake`, whichever is first; -1: none). */
static int wait_ms(int64_t deadline, int64_t wake) {
    int64_t until = deadline;
    if (wake >= 0 && (until < 0 || wake < until)) until = wake;
    if (until < 0) return -1;
    int64_t left = until - now_ms();
    return left <= 0 ? 0 : left > 1000000 ? 1000000 : (int)left;
}

static int backoff_ms(int attempt) {
    int64_t delay = BACKOFF_FIRST_MS;
    for (int i = 1; i < attempt && delay < BACKOFF_MAX_MS; i++) delay *= 2;
    return delay > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : (int)delay;
}

/* ---- Errors ------------------------------------------------------------------------------ */

static const struct { adorch_status code; const char *name; } error_names[] = {
    {ADORCH_E_NO_AD_READY, "io.adorch.Ads.NoAdReady"},
    {ADORCH_E_SLOT_NOT_FOUND, "io.adorch.Ads.SlotNotFound"},
    {ADORCH_E_SLOT_NOT_FOUND, "io.adorch.Manager.SlotNotFound"},
    {ADORCH_E_AD_NOT_VALID, "io.adorch.Ads.AdNotValid"},
    {ADORCH_E_SESSION_NOT_FOUND, "io.adorch.Ads.SessionNotFound"},
    {ADORCH_E_LOAD_FAILED, "io.adorch.Ads.LoadFailed"},
    {ADORCH_E_INVALID_PARAMETER, "io.adorch.Ads.InvalidParameter"},
    {ADORCH_E_REWARD_NOT_FOUND, "io.adorch.Ads.RewardNotFound"},
    {ADORCH_E_LEDGER_FAILED, "io.adorch.Ads.LedgerFailed"},
    {ADORCH_E_LEDGER_FAILED, "io.adorch.Manager.LedgerFailed"},
    {ADORCH_E_SHUTTING_DOWN, "io.adorch.Ads.ShuttingDown"},
    {ADORCH_E_RATE_LIMITED, "io.adorch.Ads.RateLimited"},
    {ADORCH_E_CAPPED, "io.adorch.Ads.Capped"},
    {ADORCH_E_TOO_MANY_OPEN_ADS, "io.adorch.Ads.TooManyOpenAds"},
    {ADORCH_E_TOO_MANY_SESSIONS, "io.adorch.Ads.TooManySessions"},
    {ADORCH_E_TOO_MANY_PRIVACY_RECORDS, "io.adorch.Ads.TooManyPrivacyRecords"},
    {ADORCH_E_PRIVACY_NOT_STORED, "io.adorch.Ads.PrivacyNotStored"},
    {ADORCH_E_PERMISSION_DENIED, "io.adorch.Ads.PermissionDenied"},
    {ADORCH_E_PERMISSION_DENIED, "io.adorch.Manager.PermissionDenied"},
    {ADORCH_E_NO_REWARD_KEY, "io.adorch.Manager.NoRewardKey"},
    {ADORCH_E_RELOAD_FAILED, "io.adorch.Manager.ReloadFailed"},
    {ADORCH_E_TOO_MANY_CONNECTIONS, "io.adorch.TooManyConnections"},
    {ADORCH_E_INCOMPLETE_MESSAGE, "io.adorch.IncompleteMessage"},
    {ADORCH_E_READER_TOO_SLOW, "io.adorch.ReaderTooSlow"},
    {ADORCH_E_TOO_MANY_PENDING_BYTES, "io.adorch.TooManyPendingBytes"},
    {ADORCH_E_VARLINK_INTERFACE_NOT_FOUND, "org.varlink.service.InterfaceNotFound"},
    {ADORCH_E_VARLINK_METHOD_NOT_FOUND, "org.varlink.service.MethodNotFound"},
    {ADORCH_E_VARLINK_METHOD_NOT_IMPLEMENTED, "org.varlink.service.MethodNotImplemented"},
    {ADORCH_E_VARLINK_INVALID_PARAMETER, "org.varlink.service.InvalidParameter"},
    {ADORCH_E_VARLINK_EXPECTED_MORE, "org.varlink.service.ExpectedMore"},
    {ADORCH_E_VARLINK_PERMISSION_DENIED, "org.varlink.service.PermissionDenied"},
    /* The library's own, named so that an adorch_error always has a name. */
    {ADORCH_E_DAEMON, "adorch.client.DaemonError"},
    {ADORCH_E_CONNECT, "adorch.client.CannotConnect"},
    {ADORCH_E_CONNECTION_LOST, "adorch.client.ConnectionLost"},
    {ADORCH_E_TIMEOUT, "adorch.client.Timeout"},
    {ADORCH_E_PROTOCOL, "adorch.client.ProtocolError"},
    {ADORCH_E_NO_MEMORY, "adorch.client.NoMemory"},
    {ADORCH_E_ARGUMENT, "adorch.client.BadArgument"},
    {ADORCH_E_BUSY, "adorch.client.Busy"},
    {ADORCH_E_ENDED, "adorch.client.Ended"},
};

ADORCH_CLIENT_EXPORT adorch_status adorch_error_code_from_name(const char *name) {
    if (name == NULL) return ADORCH_E_DAEMON;
    for (size_t i = 0; i < sizeof error_names / sizeof error_names[0]; i++) {
        if (strcmp(error_names[i].name, name) == 0) return error_names[i].code;
    }
    return ADORCH_E_DAEMON;
}

/* The code of an error name a daemon sent: the library's own names ("adorch.client.*") never come
 * from a daemon, so one that does is an unknown daemon error. */
static adorch_status wire_error_code(const char *name) {
    return name && strncmp(name, "adorch.client.", 14) == 0 ? ADORCH_E_DAEMON : adorch_error_code_from_name(name);
}

ADORCH_CLIENT_EXPORT const char *adorch_error_name(adorch_status code) {
    for (size_t i = 0; i < sizeof error_names / sizeof error_names[0]; i++) {
        if (error_names[i].code == code) return error_names[i].name;
    }
    return NULL;
}

ADORCH_CLIENT_EXPORT void adorch_error_clear(adorch_error *error) {
    if (error == NULL) return;
    free(error->name);
    free(error->message);
    free(error->parameters);
    json_decref(error->reserved[0]);
    *error = (adorch_error)ADORCH_ERROR_INIT;
}

ADORCH_CLIENT_EXPORT const char *adorch_error_parameter(const adorch_error *error, const char *key) {
    if (error == NULL || error->reserved[0] == NULL || key == NULL) return NULL;
    return json_string_value(json_object_get(error->reserved[0], key));
}

ADORCH_CLIENT_EXPORT bool adorch_error_parameter_int(const adorch_error *error, const char *key, int64_t *value) {
    json_t *v = error && error->reserved[0] && key ? json_object_get(error->reserved[0], key) : NULL;
    if (!json_is_integer(v)) return false;
    if (value) *value = json_integer_value(v);
    return true;
}

/* Fills `error` (if any) and returns `code`; `parameters` is borrowed. */
static adorch_status fill_error(adorch_error *error, adorch_status code, const char *name, const char *message,
                                json_t *parameters, int sys_errno) {
    if (error == NULL) return code;
    adorch_error_clear(error);
    error->code = code;
    error->name = strdup(name ? name : "adorch.client.Unknown");
    error->message = strdup(message ? message : "");
    json_t *params = parameters && json_is_object(parameters) ? json_incref(parameters) : json_object();
    error->parameters = json_dumps(params, JSON_COMPACT);
    error->reserved[0] = params;
    json_t *retry = json_object_get(params, "retry_after_ms");
    error->retry_after_ms = json_is_integer(retry) ? json_integer_value(retry) : -1;
    error->sys_errno = sys_errno;
    return code;
}

static adorch_status lib_error(adorch_error *error, adorch_status code, int sys_errno, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static adorch_status lib_error(adorch_error *error, adorch_status code, int sys_errno, const char *format, ...) {
    if (error == NULL) return code;
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    return fill_error(error, code, adorch_error_name(code), message, NULL, sys_errno);
}

/* An error reply: its name's code, message and parameters. */
static adorch_status daemon_error(adorch_error *error, json_t *reply) {
    const char *name = json_string_value(json_object_get(reply, "error"));
    json_t *params = json_object_get(reply, "parameters");
    const char *message = json_string_value(json_object_get(params, "message"));
    adorch_status code = wire_error_code(name);
    return fill_error(error, code, name, message ? message : name, params, 0);
}

/* ---- Results: a box owns the parsed reply the result's strings point into ---------------- */

struct box {
    json_t *json;
    char **texts;
    size_t text_count;
    void *items;
    adorch_cap_hold *holds; /* a slot list's: what each slot's capped points to */
    union {
        adorch_ad ad;
        adorch_ad_list ads;
        adorch_reward reward;
        adorch_reward_list rewards;
        adorch_event event;
        adorch_event_list events;
        adorch_slot_list slots;
        adorch_cap_rule_list caps;
    } u;
};

#define BOX_OF(p) ((struct box *)((char *)(p) - offsetof(struct box, u)))

static struct box *box_new(json_t *json) {
    struct box *box = calloc(1, sizeof *box);
    if (box) box->json = json_incref(json);
    return box;
}

static void box_free(struct box *box) {
    if (box == NULL) return;
    for (size_t i = 0; i < box->text_count; i++) free(box->texts[i]);
    free(box->texts);
    free(box->items);
    free(box->holds);
    json_decref(box->json);
    free(box);
}

/* A JSON value as compact text owned by the box; NULL for NULL or null. */
static const char *box_text(struct box *box, json_t *value) {
    if (value == NULL || json_is_null(value)) return NULL;
    char *text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
    char **grown = text ? realloc(box->texts, (box->text_count + 1) * sizeof *grown) : NULL;
    if (grown == NULL) {
        free(text);
        return NULL;
    }
    box->texts = grown;
    box->texts[box->text_count++] = text;
    return text;
}

static const char *jstr(json_t *object, const char *key) { return json_string_value(json_object_get(object, key)); }
static int64_t jint(json_t *object, const char *key, int64_t fallback) {
    json_t *v = json_object_get(object, key);
    return json_is_integer(v) ? json_integer_value(v) : fallback;
}

/* ---- Replies are checked against the IDL's types before a result is made of them ------------- */

enum jtype { J_STRING, J_INT, J_NUMBER, J_BOOL, J_OBJECT };

/* A field of an IDL type: its JSON type, and whether it is optional (?type: absent or null). */
struct field {
    const char *key;
    enum jtype type;
    bool optional;
};

static bool has_type(json_t *v, enum jtype type) {
    switch (type) {
    case J_STRING: return json_is_string(v);
    case J_INT: return json_is_integer(v);
    case J_NUMBER: return json_is_number(v);
    case J_BOOL: return json_is_boolean(v);
    case J_OBJECT: return json_is_object(v);
    }
    return false;
}

/* NULL if `o` is an object whose fields have their types, else the first field that does not. */
static const char *bad_field(json_t *o, const struct field *fields, size_t count) {
    if (!json_is_object(o)) return "(not an object)";
    for (size_t i = 0; i < count; i++) {
        json_t *v = json_object_get(o, fields[i].key);
        if (fields[i].optional && (v == NULL || json_is_null(v))) continue;
        if (!has_type(v, fields[i].type)) return fields[i].key;
    }
    return NULL;
}

#define FIELDS(array) array, sizeof array / sizeof array[0]

static const struct field ad_fields[] = {
    {"id", J_STRING, false}, {"slot", J_STRING, false}, {"network", J_STRING, false}, {"format", J_STRING, false},
    {"payload", J_OBJECT, false}, {"expires_at", J_STRING, false}, {"price", J_NUMBER, false},
};
static const struct field slot_fields[] = {
    {"id", J_STRING, false}, {"format", J_STRING, false}, {"buffer", J_INT, false}, {"buffer_min", J_INT, false},
    {"buffer_max", J_INT, false}, {"ready", J_INT, false}, {"loading", J_INT, false}, {"demand", J_OBJECT, true},
    {"unservable", J_STRING, true}, {"capped", J_OBJECT, true},
};
static const struct field cap_hold_fields[] = {
    {"rule", J_STRING, false}, {"kind", J_STRING, false}, {"network", J_STRING, true}, {"retry_after_ms", J_INT, false},
    {"until", J_STRING, false},
};
static const struct field cap_rule_fields[] = {
    {"rule", J_STRING, false}, {"kind", J_STRING, false}, {"scope", J_STRING, false}, {"network", J_STRING, true},
    {"ad_unit_id", J_STRING, true}, {"impressions", J_INT, false}, {"window_ms", J_INT, false}, {"counted", J_INT, false},
    {"retry_after_ms", J_INT, true}, {"until", J_STRING, true},
};
static const struct field reward_fields[] = {
    {"trans_id", J_STRING, false}, {"ad_id", J_STRING, false}, {"user_id", J_STRING, false}, {"slot", J_STRING, false},
    {"network", J_STRING, false}, {"reward_name", J_STRING, false}, {"reward_amount", J_INT, false}, {"extra", J_STRING, false},
    {"granted_at", J_STRING, false}, {"acknowledged", J_BOOL, false},
};
static const struct field event_fields[] = {
    {"kind", J_STRING, false}, {"time", J_STRING, false}, {"slot", J_STRING, true}, {"ad_id", J_STRING, true},
    {"network", J_STRING, true}, {"error", J_STRING, true}, {"network_code", J_INT, true}, {"message", J_STRING, true},
    {"viewer_event", J_STRING, true}, {"user_id", J_STRING, true}, {"name", J_STRING, true}, {"detail", J_OBJECT, true},
    {"session_id", J_STRING, true}, {"terminal", J_BOOL, true}, {"ad_free_pod", J_BOOL, true}, {"rewards_waiting", J_INT, true},
};

/* ADORCH_OK if reply[key] is an array of objects with `fields`, else ADORCH_E_PROTOCOL naming what is wrong. */
static adorch_status check_list(json_t *reply, const char *key, const struct field *fields, size_t count, const char *method,
                                adorch_error *error) {
    json_t *list = json_object_get(reply, key);
    if (!json_is_array(list)) return lib_error(error, ADORCH_E_PROTOCOL, 0, "%s: the reply's %s is not an array", method, key);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *bad = bad_field(json_array_get(list, i), fields, count);
        if (bad) return lib_error(error, ADORCH_E_PROTOCOL, 0, "%s: the reply's %s[%zu].%s is missing or of the wrong type", method, key, i, bad);
    }
    return ADORCH_OK;
}

/* ---- Arguments: every string an app passes goes out as JSON, which must be UTF-8 --------------- */

/* Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). */
static bool utf8_valid(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned char b = *p;
        int extra = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : -1;
        if (extra < 0) return false;
        uint32_t cp = extra == 0 ? b : b & (0x3F >> extra);
        for (int i = 1; i <= extra; i++) {
            if ((p[i] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        static const uint32_t least[] = {0, 0x80, 0x800, 0x10000};
        if (cp < least[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        p += extra + 1;
    }
    return true;
}

/* An app's string as a JSON string, or NULL with ADORCH_E_ARGUMENT naming it (jansson would
 * refuse it silently) or ADORCH_E_NO_MEMORY in *status. */
static json_t *arg_string(const char *value, const char *name, adorch_status *status, adorch_error *error) {
    if (!utf8_valid(value)) {
        *status = lib_error(error, ADORCH_E_ARGUMENT, 0, "%s is not valid UTF-8", name);
        return NULL;
    }
    json_t *string = json_string_nocheck(value);
    if (string == NULL) *status = lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    return string;
}

/* Sets object[key] to an app's string (nothing for NULL); ADORCH_OK or the error of arg_string.
 * Does nothing once *status is an error, so a run of them is checked once at the end. */
static void put_string(json_t *object, const char *key, const char *value, const char *name, adorch_status *status, adorch_error *error) {
    if (*status != ADORCH_OK || value == NULL) return;
    json_t *string = arg_string(value, name, status, error);
    if (string && json_object_set_new(object, key, string) != 0) *status = lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
}

/* Sets object[key] to an integer or a JSON value (taken), as put_string. */
static void put_value(json_t *object, const char *key, json_t *value, adorch_status *status, adorch_error *error) {
    if (*status != ADORCH_OK) {
        json_decref(value);
        return;
    }
    if (value == NULL || json_object_set_new(object, key, value) != 0) *status = lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
}

/* An array of the app's strings (slot names); a NULL entry or one not UTF-8 is ADORCH_E_ARGUMENT. */
static json_t *arg_strings(const char *const *values, size_t count, const char *name, adorch_status *status, adorch_error *error) {
    json_t *list = json_array();
    if (list == NULL) *status = lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    for (size_t i = 0; list && i < count; i++) {
        char item[64];
        snprintf(item, sizeof item, "%s[%zu]", name, i);
        json_t *string = values[i] ? arg_string(values[i], item, status, error) : NULL;
        if (values[i] == NULL) *status = lib_error(error, ADORCH_E_ARGUMENT, 0, "%s is NULL", item);
        if (string == NULL || json_array_append_new(list, string) != 0) {
            if (*status == ADORCH_OK) *status = lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

static void fill_ad(struct box *box, adorch_ad *ad, json_t *o) {
    *ad = (adorch_ad){.id = jstr(o, "id"), .slot = jstr(o, "slot"), .network = jstr(o, "network"), .format = jstr(o, "format"),
                      .payload = box_text(box, json_object_get(o, "payload")), .expires_at = jstr(o, "expires_at"),
                      .price = json_number_value(json_object_get(o, "price"))};
}

static void fill_reward(adorch_reward *r, json_t *o) {
    *r = (adorch_reward){.trans_id = jstr(o, "trans_id"), .ad_id = jstr(o, "ad_id"), .user_id = jstr(o, "user_id"),
                         .slot = jstr(o, "slot"), .network = jstr(o, "network"), .reward_name = jstr(o, "reward_name"),
                         .reward_amount = jint(o, "reward_amount", 0), .extra = jstr(o, "extra"),
                         .granted_at = jstr(o, "granted_at"), .acknowledged = json_is_true(json_object_get(o, "acknowledged"))};
}

static void fill_event(struct box *box, adorch_event *e, json_t *o) {
    json_t *code = json_object_get(o, "network_code");
    *e = (adorch_event){.kind = jstr(o, "kind"), .time = jstr(o, "time"), .slot = jstr(o, "slot"), .ad_id = jstr(o, "ad_id"),
                        .network = jstr(o, "network"), .error = jstr(o, "error"), .message = jstr(o, "message"),
                        .viewer_event = jstr(o, "viewer_event"), .user_id = jstr(o, "user_id"), .name = jstr(o, "name"),
                        .detail = box_text(box, json_object_get(o, "detail")), .session_id = jstr(o, "session_id"),
                        .network_code = json_is_integer(code) ? json_integer_value(code) : 0,
                        .has_network_code = json_is_integer(code), .terminal = json_is_true(json_object_get(o, "terminal")),
                        .ad_free_pod = json_is_true(json_object_get(o, "ad_free_pod")),
                        .rewards_waiting = jint(o, "rewards_waiting", -1), .json = box_text(box, o)};
}

/* `hold` is where the slot's capped goes, if it has one. */
static void fill_slot(struct box *box, adorch_slot *s, adorch_cap_hold *hold, json_t *o) {
    json_t *capped = json_object_get(o, "capped");
    if (json_is_object(capped))
        *hold = (adorch_cap_hold){.rule = jstr(capped, "rule"), .kind = jstr(capped, "kind"), .network = jstr(capped, "network"),
                                  .retry_after_ms = jint(capped, "retry_after_ms", 0), .until = jstr(capped, "until")};
    *s = (adorch_slot){.id = jstr(o, "id"), .format = jstr(o, "format"), .buffer = jint(o, "buffer", 0),
                       .buffer_min = jint(o, "buffer_min", 0), .buffer_max = jint(o, "buffer_max", 0),
                       .ready = jint(o, "ready", 0), .loading = jint(o, "loading", 0),
                       .demand = box_text(box, json_object_get(o, "demand")), .unservable = jstr(o, "unservable"),
                       .capped = json_is_object(capped) ? hold : NULL};
}

static void fill_cap_rule(adorch_cap_rule *r, json_t *o) {
    *r = (adorch_cap_rule){.rule = jstr(o, "rule"), .kind = jstr(o, "kind"), .scope = jstr(o, "scope"), .network = jstr(o, "network"),
                           .ad_unit_id = jstr(o, "ad_unit_id"), .impressions = jint(o, "impressions", 0),
                           .window_ms = jint(o, "window_ms", 0), .counted = jint(o, "counted", 0),
                           .retry_after_ms = jint(o, "retry_after_ms", -1), .until = jstr(o, "until")};
}

static adorch_event *event_new(json_t *o) {
    struct box *box = box_new(o);
    if (box == NULL) return NULL;
    fill_event(box, &box->u.event, o);
    return &box->u.event;
}

static adorch_reward *reward_new(json_t *o) {
    struct box *box = box_new(o);
    if (box == NULL) return NULL;
    fill_reward(&box->u.reward, o);
    return &box->u.reward;
}

static adorch_ad *ad_new(json_t *o) {
    struct box *box = box_new(o);
    if (box == NULL) return NULL;
    fill_ad(box, &box->u.ad, o);
    return &box->u.ad;
}

ADORCH_CLIENT_EXPORT void adorch_slot_list_free(adorch_slot_list *list) { if (list) box_free(BOX_OF(list)); }
ADORCH_CLIENT_EXPORT void adorch_ad_free(adorch_ad *ad) { if (ad) box_free(BOX_OF(ad)); }
ADORCH_CLIENT_EXPORT void adorch_ad_list_free(adorch_ad_list *list) { if (list) box_free(BOX_OF(list)); }
ADORCH_CLIENT_EXPORT void adorch_reward_free(adorch_reward *reward) { if (reward) box_free(BOX_OF(reward)); }
ADORCH_CLIENT_EXPORT void adorch_reward_list_free(adorch_reward_list *list) { if (list) box_free(BOX_OF(list)); }
ADORCH_CLIENT_EXPORT void adorch_event_free(adorch_event *event) { if (event) box_free(BOX_OF(event)); }
ADORCH_CLIENT_EXPORT void adorch_event_list_free(adorch_event_list *list) { if (list) box_free(BOX_OF(list)); }
ADORCH_CLIENT_EXPORT void adorch_cap_rule_list_free(adorch_cap_rule_list *list) { if (list) box_free(BOX_OF(list)); }
ADORCH_CLIENT_EXPORT void adorch_string_free(char *text) { free(text); }

/* ---- One Varlink connection: NUL-terminated JSON messages on a non-blocking socket ---------- */

struct conn {
    int fd;
    char *in;
    size_t in_len, in_cap;
    char *out;
    size_t out_len;
    uint32_t epoll_events; /* what it is registered for in the client's epoll; 0: not registered */
};

#define CONN_INIT {.fd = -1}

static void conn_close(struct conn *c, int epfd) {
    if (c->fd >= 0) {
        if (c->epoll_events && epfd >= 0) epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    free(c->in);
    free(c->out);
    *c = (struct conn)CONN_INIT;
}

/* 0 or the errno of socket/connect. */
static int conn_connect(struct conn *c, const char *path) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) return ENAMETOOLONG;
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return errno;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int err = errno;
        close(fd);
        /* A Unix socket connects at once or not at all; EAGAIN is a full backlog: retry later. */
        return err;
    }
    *c = (struct conn)CONN_INIT;
    c->fd = fd;
    return 0;
}

/* Appends a message and its NUL to the output; 0 or ENOMEM. */
static int conn_queue(struct conn *c, json_t *message) {
    char *text = json_dumps(message, JSON_COMPACT);
    if (text == NULL) return ENOMEM;
    size_t n = strlen(text) + 1;
    char *grown = realloc(c->out, c->out_len + n);
    if (grown == NULL) {
        free(text);
        return ENOMEM;
    }
    memcpy(grown + c->out_len, text, n);
    c->out = grown;
    c->out_len += n;
    free(text);
    return 0;
}

/* Writes what it can without blocking; 0 (maybe some left) or the errno of a failed write. */
static int conn_flush(struct conn *c) {
    while (c->out_len > 0) {
        ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno == EAGAIN ? 0 : errno;
        }
        memmove(c->out, c->out + n, c->out_len - (size_t)n);
        c->out_len -= (size_t)n;
    }
    return 0;
}

/* Reads once without blocking: > 0 bytes, 0 at EOF, -EAGAIN when nothing is there, else -errno. */
static ssize_t conn_fill(struct conn *c) {
    if (c->in_cap - c->in_len < 4096) {
        size_t cap = c->in_cap ? c->in_cap * 2 : 8192;
        if (cap > MAX_MESSAGE_BYTES + 8192) return -EMSGSIZE;
        char *grown = realloc(c->in, cap);
        if (grown == NULL) return -ENOMEM;
        c->in = grown;
        c->in_cap = cap;
    }
    for (;;) {
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        c->in_len += (size_t)n;
        return n;
    }
}

/* The next whole message: 1 (with *out, an object), 0 if none is complete yet, -1 if it is not JSON. */
static int conn_pop(struct conn *c, json_t **out) {
    char *end = c->in_len ? memchr(c->in, '\0', c->in_len) : NULL;
    if (end == NULL) return 0;
    size_t len = (size_t)(end - c->in);
    json_t *message = json_loadb(c->in, len, 0, NULL);
    memmove(c->in, end + 1, c->in_len - len - 1);
    c->in_len -= len + 1;
    if (!json_is_object(message)) {
        json_decref(message);
        return -1;
    }
    *out = message;
    return 1;
}

/* WAIT_ANSWERED_SEND_FAILED: the peer answered, then closed before it took the whole call (the
 * daemon refuses a message over its max_message_bytes so): the answer is in *out. */
enum wait_result { WAIT_MESSAGE, WAIT_ANSWERED_SEND_FAILED, WAIT_TIMEOUT, WAIT_SEND_FAILED, WAIT_BROKEN, WAIT_PROTOCOL };

/* Flushes the output, then waits until the deadline for the next message. */
static enum wait_result conn_wait(struct conn *c, int64_t deadline, json_t **out, int *sys_errno) {
    for (;;) {
        int err = conn_flush(c);
        if (err) {
            *sys_errno = err;
            /* What the peer said before it closed is there to read, up to its EOF. */
            for (;;) {
                int popped = conn_pop(c, out);
                if (popped > 0) return WAIT_ANSWERED_SEND_FAILED;
                ssize_t n = popped < 0 ? 0 : conn_fill(c);
                if (n == -EAGAIN) {
                    struct pollfd p = {.fd = c->fd, .events = POLLIN};
                    if (poll(&p, 1, wait_ms(deadline, -1)) != 0) continue;
                }
                if (n <= 0) return WAIT_SEND_FAILED;
            }
        }
        int popped = conn_pop(c, out);
        if (popped > 0) return WAIT_MESSAGE;
        if (popped < 0) return WAIT_PROTOCOL;
        struct pollfd p = {.fd = c->fd, .events = POLLIN | (c->out_len ? POLLOUT : 0)};
        int ready = poll(&p, 1, wait_ms(deadline, -1));
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) return WAIT_TIMEOUT;
        if (p.revents & POLLIN || p.revents & (POLLHUP | POLLERR)) {
            ssize_t n = conn_fill(c);
            if (n == 0 || (n < 0 && n != -EAGAIN)) {
                *sys_errno = n == 0 ? ECONNRESET : (int)-n;
                return n == -EMSGSIZE ? WAIT_PROTOCOL : WAIT_BROKEN;
            }
        }
    }
}

/* ---- The client ------------------------------------------------------------------------------- */

enum sub_state { SUB_OFF, SUB_CONNECTED, SUB_WAITING };

/* A subscription that survives daemon restarts: the client's own, and the SDK layer's private ones. */
struct sub {
    enum sub_state state;
    struct conn conn;
    json_t *parameters;        /* Subscribe's parameters, sent again on every new connection */
    bool subscribed_delivered; /* the first "subscribed" went out */
    bool one_stream;           /* the app's: later "subscribed" are swallowed; the SDK layer's see them, to look again */
    int attempt;               /* retries since the connection was lost */
    int64_t lost_at;           /* when it was lost (monotonic ms) */
    int64_t next_try;          /* when to connect again, or to give up */
    bool give_up;              /* the reconnect budget is spent: give up at next_try */
    char *broken;              /* why it ended on a protocol error: told once its queued events are out */
    char *lost_why;            /* what broke it, for the retry log lines */
    json_t *queue;             /* events received, not yet delivered: a JSON array */
};

struct pending {
    struct pending *next;
    adorch_reply_fn callback;
    void *userdata;
    int64_t deadline; /* when it times out (monotonic ms); -1: never */
};

struct adorch_client {
    char *socket_path;
    int call_timeout_ms;
    int reconnect_timeout_ms;
    adorch_log_fn log;
    void *log_userdata;
    struct conn call;
    struct pending *pending, *pending_tail;
    struct sub sub;
    int epfd, timerfd;
    int64_t timer_armed; /* -1: disarmed */
    adorch_event_fn event_callback;
    void *event_userdata;
    struct adorch_shown_ad *listening; /* shown ads with a listener */
    /* The guard of the one-thread-at-a-time rule (client.h, Threads): */
    pid_t pid;             /* the process that made it: after a fork the child must not use it */
    _Atomic pid_t owner;   /* the thread inside the library with it (gettid), 0: none */
    int depth;             /* how deep that thread is in it: > 1 inside a callback */
    bool in_call;          /* a blocking call is using the call connection */
    bool free_requested;   /* adorch_client_free from inside a callback: freed when the outer call returns */
};

static void logf_(adorch_client *c, adorch_log_level level, const char *format, ...) __attribute__((format(printf, 3, 4)));
static void logf_(adorch_client *c, adorch_log_level level, const char *format, ...) {
    char line[768];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    if (c->log) c->log(c->log_userdata, level, line);
    else fprintf(stderr, "adorch-client: %s\n", line);
}

enum entry {
    ENTRY_CALL,   /* a plain call: allowed inside a callback, not inside another blocking call */
    ENTRY_EVENTS, /* processes events (process, next_event, subscribe): never inside a callback */
};

/* Admits one thread at a time, and from inside a callback (the same thread, deeper) only what the
 * kind allows; pair with leave(). */
static adorch_status enter(adorch_client *c, enum entry kind, const char *what, adorch_error *error) {
    if (c->pid != getpid()) return lib_error(error, ADORCH_E_ARGUMENT, 0, "%s: the client was made in another process (before a fork): make one in this process", what);
    pid_t self = gettid(), none = 0;
    if (!atomic_compare_exchange_strong(&c->owner, &none, self) && none != self)
        return lib_error(error, ADORCH_E_BUSY, 0, "%s: another thread is using this client (one thread at a time)", what);
    if (c->depth > 0 && (kind == ENTRY_EVENTS || c->in_call))
        return lib_error(error, ADORCH_E_BUSY, 0, "%s: not allowed inside a callback of this client%s", what,
                         kind == ENTRY_EVENTS ? " (it would process events)" : " during a blocking call");
    c->depth++;
    return ADORCH_OK;
}

static void client_destroy(adorch_client *c);

/* Leaves what enter() admitted; a free asked for inside a callback happens here (do not touch c after). */
static void leave(adorch_client *c) {
    if (--c->depth > 0) return;
    if (c->free_requested) client_destroy(c);
    else atomic_store(&c->owner, 0);
}

/* The socket rule of SocketPath.client (Sources/AdorchPaths/SocketPath.swift), line for line; SocketPathRuleTests holds them equal. */
static char *default_socket_path(void) {
    const char *env = getenv("ADORCH_SOCKET");
    if (env && *env) return strdup(env);
    char own[sizeof(((struct sockaddr_un *)0)->sun_path) + 64];
    if (geteuid() == 0) return strdup(SYSTEM_SOCKET);
    const char *runtime = getenv("XDG_RUNTIME_DIR");
    if (runtime && *runtime) snprintf(own, sizeof own, "%s/adorch/adorchd.sock", runtime);
    else snprintf(own, sizeof own, "/tmp/adorch-%u/adorchd.sock", (unsigned)getuid());
    struct stat st;
    if (stat(own, &st) != 0 && stat(SYSTEM_SOCKET, &st) == 0) return strdup(SYSTEM_SOCKET);
    return strdup(own);
}

/* How long to wait before retry `attempt` of what broke at `since`: the backoff, cut to what is
 * left of the reconnect budget so the last retry comes at its end; -1: the budget is spent. */
static int64_t retry_delay(const adorch_client *c, int64_t since, int attempt) {
    int64_t left = c->reconnect_timeout_ms < 0 ? 0 : since + c->reconnect_timeout_ms - now_ms();
    if (left <= 0) return -1;
    int64_t delay = backoff_ms(attempt);
    return delay < left ? delay : left;
}

/* Connects `conn`, retrying with backoff within the reconnect budget, one log line per retry. */
static adorch_status connect_retrying(adorch_client *c, struct conn *conn, const char *why, adorch_error *error) {
    int64_t start = now_ms();
    for (int attempt = 1;; attempt++) {
        int err = conn_connect(conn, c->socket_path);
        if (err == 0) {
            if (attempt > 1) logf_(c, ADORCH_LOG_INFO, "connected to %s after %d retries", c->socket_path, attempt - 1);
            return ADORCH_OK;
        }
        int64_t delay = retry_delay(c, start, attempt);
        if (delay < 0) {
            logf_(c, ADORCH_LOG_ERROR, "cannot connect to %s: %s; giving up", c->socket_path, strerror(err));
            return lib_error(error, ADORCH_E_CONNECT, err, "cannot connect to %s: %s", c->socket_path, strerror(err));
        }
        logf_(c, ADORCH_LOG_WARNING, "%s: cannot connect to %s: %s; retry %d in %lld ms", why, c->socket_path, strerror(err),
              attempt, (long long)delay);
        poll(NULL, 0, (int)delay);
    }
}

/* Makes sure the call connection is there and was not closed by the daemon while idle. */
static adorch_status ensure_call(adorch_client *c, bool retrying, adorch_error *error) {
    if (c->call.fd >= 0 && c->pending == NULL) {
        char byte;
        ssize_t n = recv(c->call.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        /* EOF, an error, or a message nobody asked for (a connection-level error before a close),
         * read already or not: what it says belongs to no call. */
        if (!(n < 0 && errno == EAGAIN) || c->call.in_len > 0) conn_close(&c->call, c->epfd);
    }
    if (c->call.fd >= 0) return ADORCH_OK;
    if (retrying) return connect_retrying(c, &c->call, "call", error);
    int err = conn_connect(&c->call, c->socket_path);
    return err ? lib_error(error, ADORCH_E_CONNECT, err, "cannot connect to %s: %s", c->socket_path, strerror(err)) : ADORCH_OK;
}

static json_t *call_message(const char *method, json_t *parameters, bool more) {
    json_t *message = json_pack("{s:s, s:O}", "method", method, "parameters", parameters ? parameters : json_object());
    if (message && more) json_object_set_new(message, "more", json_true());
    return message;
}

/* One call and its reply. read_only calls, and calls whose message did not get out whole, are sent
 * again on a fresh connection if it breaks, after the reconnect backoff and within its budget; the
 * call timeout bounds the time spent waiting for replies over all the sends. Takes `parameters`;
 * on success *reply holds the reply's parameters. */
static adorch_status call_blocking(adorch_client *c, const char *method, json_t *parameters, bool read_only, int64_t extra_wait_ms, json_t **reply,
                                   adorch_error *error) {
    adorch_status status = enter(c, ENTRY_CALL, method, error);
    if (status != ADORCH_OK) {
        json_decref(parameters);
        return status;
    }
    json_t *message = NULL, *answer = NULL;
    if (c->pending) {
        json_decref(parameters);
        status = lib_error(error, ADORCH_E_BUSY, 0, "%s: async calls are in flight; process their replies first", method);
        goto out;
    }
    message = call_message(method, parameters, false);
    json_decref(parameters);
    if (message == NULL) {
        status = lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "%s: out of memory", method);
        goto out;
    }
    c->in_call = true;
    int64_t waited = 0, first_break = -1;
    for (int attempt = 1;; attempt++) {
        if ((status = ensure_call(c, true, error)) != ADORCH_OK) goto done;
        if (conn_queue(&c->call, message) != 0) {
            status = lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "%s: out of memory", method);
            goto done;
        }
        int err = 0;
        int64_t started = now_ms();
        enum wait_result r = conn_wait(&c->call, c->call_timeout_ms < 0 ? -1 : started + c->call_timeout_ms + extra_wait_ms - waited, &answer, &err);
        waited += now_ms() - started;
        /* An answer before the whole call went out is a refusal, and the daemon closes after it. */
        if (r == WAIT_MESSAGE && c->call.out_len == 0) break;
        conn_close(&c->call, c->epfd);
        if (r == WAIT_MESSAGE || r == WAIT_ANSWERED_SEND_FAILED) break;
        if (r == WAIT_TIMEOUT) {
            status = lib_error(error, ADORCH_E_TIMEOUT, 0, "%s: no reply within %lld ms%s", method, (long long)(c->call_timeout_ms + extra_wait_ms),
                               read_only ? "" : " (the call may have taken effect)");
            goto done;
        }
        if (r == WAIT_PROTOCOL) {
            status = lib_error(error, ADORCH_E_PROTOCOL, 0, "%s: the reply is not a Varlink message (a JSON object without \\u0000 in its strings, ended by a NUL, "
                               "at most %d bytes)%s", method, MAX_MESSAGE_BYTES, read_only ? "" : "; the call may have taken effect");
            goto done;
        }
        /* A write that failed delivered no whole message: the call had no effect and may go again. */
        bool may_retry = read_only || r == WAIT_SEND_FAILED;
        if (first_break < 0) first_break = now_ms();
        int64_t delay = may_retry ? retry_delay(c, first_break, attempt) : -1;
        if (delay < 0) {
            status = lib_error(error, ADORCH_E_CONNECTION_LOST, err, "%s: the connection broke %s (%s)", method,
                               r == WAIT_SEND_FAILED ? "before the call was sent whole, and went on breaking" : "after the call was sent",
                               strerror(err));
            goto done;
        }
        logf_(c, ADORCH_LOG_WARNING, "%s: connection lost (%s); calling again on a new connection in %lld ms", method, strerror(err),
              (long long)delay);
        poll(NULL, 0, (int)delay);
    }
    json_t *params = json_object_get(answer, "parameters");
    if (json_is_true(json_object_get(answer, "continues"))) {
        /* More replies would follow, and the next call would take them for its own. */
        conn_close(&c->call, c->epfd);
        status = lib_error(error, ADORCH_E_PROTOCOL, 0, "%s: the reply says more replies follow (continues), to a call without more", method);
    } else if (params && !json_is_object(params)) {
        status = lib_error(error, ADORCH_E_PROTOCOL, 0, "%s: the reply's parameters are not an object", method);
    } else if (json_object_get(answer, "error")) {
        status = json_is_string(json_object_get(answer, "error")) ? daemon_error(error, answer)
                                                                   : lib_error(error, ADORCH_E_PROTOCOL, 0, "%s: the reply's error is not a string", method);
    } else {
        *reply = params ? json_incref(params) : json_object();
        status = ADORCH_OK;
    }
done:
    c->in_call = false;
out:
    json_decref(answer);
    json_decref(message);
    leave(c);
    return status;
}

/* Parses JSON object text given by the app; NULL text is {}. */
static adorch_status parse_object(const char *text, const char *what, json_t **out, adorch_error *error) {
    if (text == NULL) {
        *out = json_object();
        return ADORCH_OK;
    }
    json_error_t why;
    json_t *value = json_loads(text, 0, &why);
    if (!json_is_object(value)) {
        bool parsed = value != NULL;
        json_decref(value);
        if (parsed) return lib_error(error, ADORCH_E_ARGUMENT, 0, "%s is JSON but not an object", what);
        return lib_error(error, ADORCH_E_ARGUMENT, 0, "%s is not JSON: %s (at byte %d)", what, why.text, why.position);
    }
    *out = value;
    return ADORCH_OK;
}

/* ---- Subscriptions ------------------------------------------------------------------------------ */

static void sub_free(struct sub *s, int epfd) {
    conn_close(&s->conn, epfd);
    json_decref(s->parameters);
    json_decref(s->queue);
    free(s->lost_why);
    free(s->broken);
    *s = (struct sub){.state = SUB_OFF, .conn = CONN_INIT};
}

static void sub_lost(adorch_client *c, struct sub *s, int epfd, const char *why) {
    conn_close(&s->conn, epfd);
    if (s->attempt == 0) s->lost_at = now_ms();
    free(s->lost_why);
    s->lost_why = strdup(why);
    s->state = SUB_WAITING;
    s->attempt++;
    int64_t delay = retry_delay(c, s->lost_at, s->attempt);
    s->give_up = delay < 0;
    s->next_try = s->give_up ? now_ms() : now_ms() + delay;
    if (!s->give_up)
        logf_(c, ADORCH_LOG_WARNING, "subscription: %s; reconnecting to %s, retry %d in %lld ms", why, c->socket_path, s->attempt,
              (long long)delay);
}

/* Ends the subscription for a message that is not a valid event stream (reconnecting would get the
 * same); the events before it are still delivered, then sub_ended tells why. */
static void sub_protocol(adorch_client *c, struct sub *s, int epfd, const char *what) {
    logf_(c, ADORCH_LOG_ERROR, "subscription: %s; ending it", what);
    conn_close(&s->conn, epfd);
    s->state = SUB_OFF;
    free(s->broken);
    s->broken = strdup(what);
}

/* What asking an ended subscription for an event returns: its protocol error once, then ADORCH_E_BUSY. */
static adorch_status sub_ended(struct sub *s, adorch_error *error) {
    if (s->broken == NULL) return lib_error(error, ADORCH_E_BUSY, 0, "no subscription: call adorch_client_subscribe");
    adorch_status st = lib_error(error, ADORCH_E_PROTOCOL, 0, "subscription: %s", s->broken);
    free(s->broken);
    s->broken = NULL;
    return st;
}

/* Connects and sends Subscribe; on failure schedules the next try. */
static void sub_connect(adorch_client *c, struct sub *s, int epfd) {
    int err = conn_connect(&s->conn, c->socket_path);
    json_t *message = err ? NULL : call_message("io.adorch.Ads.Subscribe", s->parameters, true);
    if (!err && (message == NULL || conn_queue(&s->conn, message) != 0)) err = ENOMEM;
    json_decref(message);
    if (!err) err = conn_flush(&s->conn);
    if (err) {
        char why[128];
        snprintf(why, sizeof why, "cannot connect: %s", strerror(err));
        sub_lost(c, s, epfd, why);
        return;
    }
    s->state = SUB_CONNECTED;
}

/* Does the subscription's due work without blocking: reads events into its queue, reconnects when
 * it is time. Returns an error only when it gave up (then it is SUB_OFF). */
static adorch_status sub_pump(adorch_client *c, struct sub *s, int epfd, adorch_error *error) {
    if (s->state == SUB_WAITING && now_ms() >= s->next_try) {
        if (s->give_up) {
            logf_(c, ADORCH_LOG_ERROR, "subscription lost (%s); giving up after %d retries", s->lost_why, s->attempt);
            adorch_status st = lib_error(error, ADORCH_E_CONNECT, 0, "subscription lost (%s); no daemon at %s after %d retries",
                                         s->lost_why, c->socket_path, s->attempt);
            conn_close(&s->conn, epfd);
            s->state = SUB_OFF;
            return st;
        }
        sub_connect(c, s, epfd);
    }
    if (s->state != SUB_CONNECTED) return ADORCH_OK;
    int err = conn_flush(&s->conn);
    for (;;) {
        json_t *message = NULL;
        int popped = conn_pop(&s->conn, &message);
        if (popped < 0) {
            sub_protocol(c, s, epfd, "the daemon sent a message that is not a Varlink message");
            return ADORCH_OK;
        }
        if (popped == 0) {
            if (err) {
                sub_lost(c, s, epfd, strerror(err));
                return ADORCH_OK;
            }
            ssize_t n = conn_fill(&s->conn);
            if (n == -EAGAIN) return ADORCH_OK;
            if (n <= 0) {
                sub_lost(c, s, epfd, n == 0 ? "the daemon closed the connection" : strerror((int)-n));
                return ADORCH_OK;
            }
            continue;
        }
        const char *error_name = jstr(message, "error");
        json_t *event = json_object_get(json_object_get(message, "parameters"), "event");
        const char *bad = error_name ? NULL : bad_field(event, FIELDS(event_fields));
        if (bad) {
            char what[160];
            snprintf(what, sizeof what, "a reply whose event%s%s is missing or of the wrong type", event ? "." : "", event ? bad : "");
            json_decref(message);
            sub_protocol(c, s, epfd, what);
            return ADORCH_OK;
        }
        if (error_name) {
            char why[256];
            snprintf(why, sizeof why, "%s", error_name);
            /* A refused Subscribe (unknown slot, no permission) is the app's error, not a restart. */
            if (error_name && !s->subscribed_delivered && wire_error_code(error_name) != ADORCH_E_SHUTTING_DOWN) {
                adorch_status st = daemon_error(error, message);
                json_decref(message);
                conn_close(&s->conn, epfd);
                s->state = SUB_OFF;
                return st;
            }
            json_decref(message);
            sub_lost(c, s, epfd, why);
            return ADORCH_OK;
        }
        const char *kind = jstr(event, "kind");
        if (kind && strcmp(kind, "subscribed") == 0) {
            if (s->attempt > 0) logf_(c, ADORCH_LOG_INFO, "subscribed again after %d retries", s->attempt);
            s->attempt = 0;
            if (s->subscribed_delivered && s->one_stream) {
                logf_(c, ADORCH_LOG_DEBUG, "the new connection's subscribed event is not delivered: the stream goes on");
                json_decref(message);
                continue;
            }
            s->subscribed_delivered = true;
        }
        json_array_append(s->queue, event);
        json_decref(message);
    }
}

/* The earliest time the subscription needs a pump without input: its reconnect. -1: none. */
static int64_t sub_wake(const struct sub *s) { return s->state == SUB_WAITING ? s->next_try : -1; }

static adorch_status sub_start(adorch_client *c, struct sub *s, const char *const *slots, size_t slot_count, adorch_error *error) {
    *s = (struct sub){.state = SUB_OFF, .conn = CONN_INIT, .parameters = json_object(), .queue = json_array()};
    if (s->parameters == NULL || s->queue == NULL) return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    if (slot_count > 0) {
        adorch_status st = ADORCH_OK;
        json_t *list = arg_strings(slots, slot_count, "slots", &st, error);
        if (list) put_value(s->parameters, "slots", list, &st, error);
        if (st != ADORCH_OK) return st;
    }
    adorch_status st = connect_retrying(c, &s->conn, "subscribe", error);
    if (st != ADORCH_OK) return st;
    json_t *message = call_message("io.adorch.Ads.Subscribe", s->parameters, true);
    int err = message ? conn_queue(&s->conn, message) : ENOMEM;
    json_decref(message);
    if (err) return lib_error(error, ADORCH_E_NO_MEMORY, err, "out of memory");
    s->state = SUB_CONNECTED;
    return ADORCH_OK;
}

/* Takes the next queued event (a reference), or NULL. */
static json_t *sub_take(struct sub *s) {
    if (s->queue == NULL || json_array_size(s->queue) == 0) return NULL;
    json_t *event = json_incref(json_array_get(s->queue, 0));
    json_array_remove(s->queue, 0);
    return event;
}

/* Blocks until the subscription has an event queued or the deadline passes, reconnecting meanwhile. */
static adorch_status sub_wait(adorch_client *c, struct sub *s, int epfd, int64_t deadline, json_t **event, adorch_error *error) {
    for (;;) {
        adorch_status st = sub_pump(c, s, epfd, error);
        if (st != ADORCH_OK) return st;
        if ((*event = sub_take(s)) != NULL) return ADORCH_OK;
        if (s->state == SUB_OFF) return sub_ended(s, error);
        int timeout = wait_ms(deadline, sub_wake(s));
        if (deadline >= 0 && now_ms() >= deadline) return lib_error(error, ADORCH_E_TIMEOUT, 0, "no event within the timeout");
        if (s->state == SUB_CONNECTED) {
            struct pollfd p = {.fd = s->conn.fd, .events = POLLIN | (s->conn.out_len ? POLLOUT : 0)};
            poll(&p, 1, timeout);
        } else {
            poll(NULL, 0, timeout);
        }
    }
}

/* A private subscription of the SDK layer, returned once it is subscribed (that event is dropped). */
static adorch_status sub_open_private(adorch_client *c, struct sub *s, const char *slot, adorch_error *error) {
    adorch_status st = sub_start(c, s, &slot, slot ? 1 : 0, error);
    json_t *first = NULL;
    if (st == ADORCH_OK) st = sub_wait(c, s, -1, deadline_after(c->call_timeout_ms), &first, error);
    json_decref(first);
    if (st != ADORCH_OK) sub_free(s, -1);
    return st;
}

/* ---- Client life ------------------------------------------------------------------------------- */

ADORCH_CLIENT_EXPORT adorch_status adorch_client_new(adorch_client **out, const adorch_client_options *options, adorch_error *error) {
    if (out == NULL) return lib_error(error, ADORCH_E_ARGUMENT, 0, "out is NULL");
    *out = NULL;
    adorch_client_options o = ADORCH_CLIENT_OPTIONS_INIT;
    if (options) {
        if (options->size < offsetof(adorch_client_options, log)) return lib_error(error, ADORCH_E_ARGUMENT, 0, "options.size is too small");
        memcpy(&o, options, options->size < sizeof o ? options->size : sizeof o);
    }
    adorch_client *c = calloc(1, sizeof *c);
    if (c == NULL) return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    c->call = (struct conn)CONN_INIT;
    c->sub = (struct sub){.state = SUB_OFF, .conn = CONN_INIT};
    c->socket_path = o.socket_path ? strdup(o.socket_path) : default_socket_path();
    c->call_timeout_ms = o.call_timeout_ms == 0 ? ADORCH_CLIENT_DEFAULT_CALL_TIMEOUT_MS : o.call_timeout_ms;
    c->reconnect_timeout_ms = o.reconnect_timeout_ms == 0 ? ADORCH_CLIENT_DEFAULT_RECONNECT_TIMEOUT_MS : o.reconnect_timeout_ms;
    c->log = o.log;
    c->log_userdata = o.log_userdata;
    c->timer_armed = -1;
    c->pid = getpid();
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    c->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event timer = {.events = EPOLLIN, .data.fd = c->timerfd};
    if (c->socket_path == NULL || c->epfd < 0 || c->timerfd < 0 || epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->timerfd, &timer) != 0) {
        int err = errno;
        adorch_client_free(c);
        return lib_error(error, ADORCH_E_NO_MEMORY, err, "cannot set up the client: %s", strerror(err));
    }
    /* A path no retry can make work is the app's error, at once. */
    size_t path_len = strlen(c->socket_path);
    if (path_len == 0 || path_len >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        adorch_status st = lib_error(error, ADORCH_E_ARGUMENT, path_len ? ENAMETOOLONG : 0, "the socket path is %s (%zu bytes; a Unix socket path has at most %zu)",
                                     path_len ? "too long" : "empty", path_len, sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
        adorch_client_free(c);
        return st;
    }
    adorch_status st = connect_retrying(c, &c->call, "connect", error);
    if (st != ADORCH_OK) {
        adorch_client_free(c);
        return st;
    }
    *out = c;
    return ADORCH_OK;
}

ADORCH_CLIENT_EXPORT void adorch_client_free(adorch_client *c) {
    if (c == NULL) return;
    if (c->pid == getpid()) {
        pid_t self = gettid(), owner = 0;
        if (!atomic_compare_exchange_strong(&c->owner, &owner, self) && owner != self) {
            logf_(c, ADORCH_LOG_ERROR, "adorch_client_free while another thread uses the client: not freed (one thread at a time)");
            return;
        }
        if (c->depth > 0) {
            c->free_requested = true; /* inside a callback: the call that runs it frees it on its way out */
            return;
        }
    }
    client_destroy(c);
}

static void client_destroy(adorch_client *c) {
    /* A forked child shares the epoll instance with its parent: it only closes its copies. */
    int epfd = c->pid == getpid() ? c->epfd : -1;
    conn_close(&c->call, epfd);
    sub_free(&c->sub, epfd);
    while (c->pending) {
        struct pending *next = c->pending->next;
        free(c->pending);
        c->pending = next;
    }
    if (c->epfd >= 0) close(c->epfd);
    if (c->timerfd >= 0) close(c->timerfd);
    free(c->socket_path);
    free(c);
}

ADORCH_CLIENT_EXPORT const char *adorch_client_socket_path(const adorch_client *c) { return c ? c->socket_path : NULL; }

/* ---- Plain calls ------------------------------------------------------------------------------------ */

#define REQUIRE(cond, what) \
    do { if (!(cond)) return lib_error(error, ADORCH_E_ARGUMENT, 0, "%s", what); } while (0)

ADORCH_CLIENT_EXPORT adorch_status adorch_client_list_slots(adorch_client *c, adorch_slot_list **out, adorch_error *error) {
    return adorch_client_list_slots_for_user(c, NULL, out, error);
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_list_slots_for_user(adorch_client *c, const char *user_id, adorch_slot_list **out,
                                                                     adorch_error *error) {
    REQUIRE(c && out, "client and out are required");
    adorch_status st = ADORCH_OK;
    json_t *params = json_object();
    put_string(params, "user_id", user_id, "user_id", &st, error);
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    st = call_blocking(c, "io.adorch.Ads.ListSlots", params, true, 0, &reply, error);
    if (st == ADORCH_OK) st = check_list(reply, "slots", FIELDS(slot_fields), "ListSlots", error);
    json_t *slots = json_object_get(reply, "slots");
    /* check_list looks at a slot's fields, not into its capped: fill_slot reads CapHold's. */
    for (size_t i = 0; st == ADORCH_OK && i < json_array_size(slots); i++) {
        json_t *capped = json_object_get(json_array_get(slots, i), "capped");
        const char *bad = json_is_object(capped) ? bad_field(capped, FIELDS(cap_hold_fields)) : NULL;
        if (bad) st = lib_error(error, ADORCH_E_PROTOCOL, 0, "ListSlots: the reply's slots[%zu].capped.%s is missing or of the wrong type", i, bad);
    }
    if (st != ADORCH_OK) {
        json_decref(reply);
        return st;
    }
    struct box *box = box_new(reply);
    json_decref(reply);
    size_t n = json_array_size(slots);
    adorch_slot *items = box ? calloc(n ? n : 1, sizeof *items) : NULL;
    adorch_cap_hold *holds = items ? calloc(n ? n : 1, sizeof *holds) : NULL;
    if (holds == NULL) {
        free(items);
        box_free(box);
        return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    }
    box->items = items;
    box->holds = holds;
    for (size_t i = 0; i < n; i++) fill_slot(box, &items[i], &holds[i], json_array_get(slots, i));
    box->u.slots = (adorch_slot_list){.count = n, .items = items};
    *out = &box->u.slots;
    return ADORCH_OK;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_show(adorch_client *c, const char *slot, const char *user_id,
                                                      const adorch_reward_model *reward, adorch_ad **out, adorch_error *error) {
    return adorch_client_show_with_privacy(c, slot, user_id, reward, NULL, out, error);
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_show_with_privacy(adorch_client *c, const char *slot, const char *user_id,
                                                                   const adorch_reward_model *reward, const char *privacy,
                                                                   adorch_ad **out, adorch_error *error) {
    REQUIRE(c && slot && out, "client, slot and out are required");
    REQUIRE(reward == NULL || reward->size >= sizeof *reward, "reward->size is too small");
    adorch_status st = ADORCH_OK;
    json_t *params = json_object();
    put_string(params, "slot", slot, "slot", &st, error);
    put_string(params, "user_id", user_id, "user_id", &st, error);
    if (reward && st == ADORCH_OK) {
        json_t *model = json_object();
        put_string(model, "name", reward->name, "reward.name", &st, error);
        if (reward->amount >= 0) put_value(model, "amount", json_integer(reward->amount), &st, error);
        put_string(model, "extra", reward->extra, "reward.extra", &st, error);
        put_value(params, "reward", model, &st, error);
    }
    if (privacy && st == ADORCH_OK) {
        json_t *object = NULL;
        st = parse_object(privacy, "privacy", &object, error);
        if (st == ADORCH_OK) put_value(params, "privacy", object, &st, error);
    }
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    st = call_blocking(c, "io.adorch.Ads.Show", params, false, 0, &reply, error);
    if (st != ADORCH_OK) return st;
    json_t *ad = json_object_get(reply, "ad");
    const char *bad = bad_field(ad, FIELDS(ad_fields));
    *out = bad ? NULL : ad_new(ad);
    /* The daemon handed an ad out: say so, as the app cannot Report or close what it did not get. */
    if (bad) st = lib_error(error, ADORCH_E_PROTOCOL, 0, "Show: the reply's ad%s%s is missing or of the wrong type (an ad may have been handed out)",
                            json_is_object(ad) ? "." : "", json_is_object(ad) ? bad : "");
    else if (*out == NULL) st = lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    json_decref(reply);
    return st;
}

/* A call with one string parameter and an empty reply. */
static adorch_status call_void(adorch_client *c, const char *method, const char *key, const char *value, adorch_error *error) {
    REQUIRE(c && value, "client and the id are required");
    adorch_status st = ADORCH_OK;
    json_t *params = json_object();
    put_string(params, key, value, key, &st, error);
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    st = call_blocking(c, method, params, false, 0, &reply, error);
    json_decref(reply);
    return st;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_report(adorch_client *c, const char *ad_id, const char *event, adorch_error *error) {
    REQUIRE(c && ad_id && event, "client, ad_id and event are required");
    adorch_status st = ADORCH_OK;
    json_t *params = json_object();
    put_string(params, "ad_id", ad_id, "ad_id", &st, error);
    put_string(params, "event", event, "event", &st, error);
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    st = call_blocking(c, "io.adorch.Ads.Report", params, false, 0, &reply, error);
    json_decref(reply);
    return st;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_load(adorch_client *c, const adorch_load_request *request, adorch_ad_list **out,
                                                      adorch_error *error) {
    REQUIRE(c && request && request->slot && out, "client, request, request->slot and out are required");
    REQUIRE(request->size >= offsetof(adorch_load_request, targeting), "request->size is too small");
    adorch_status st = ADORCH_OK;
    json_t *params = json_object();
    put_string(params, "slot", request->slot, "request->slot", &st, error);
    if (request->count) put_value(params, "count", json_integer(request->count), &st, error);
    if (request->width) put_value(params, "width", json_integer(request->width), &st, error);
    if (request->height) put_value(params, "height", json_integer(request->height), &st, error);
    if (request->timeout_ms) put_value(params, "timeout_ms", json_integer(request->timeout_ms), &st, error);
    /* A field past the caller's size is not there: its header was older. */
    if (st == ADORCH_OK && request->size >= offsetof(adorch_load_request, targeting) + sizeof request->targeting && request->targeting) {
        json_t *targeting = NULL;
        st = parse_object(request->targeting, "targeting", &targeting, error);
        if (st == ADORCH_OK) put_value(params, "targeting", targeting, &st, error);
    }
    if (st == ADORCH_OK && request->size >= offsetof(adorch_load_request, privacy) + sizeof request->privacy && request->privacy) {
        json_t *privacy = NULL;
        st = parse_object(request->privacy, "privacy", &privacy, error);
        if (st == ADORCH_OK) put_value(params, "privacy", privacy, &st, error);
    }
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    st = call_blocking(c, "io.adorch.Ads.Load", params, false, request->timeout_ms > 0 ? request->timeout_ms : MOST_LOAD_MS, &reply, error);
    if (st == ADORCH_OK) st = check_list(reply, "ads", FIELDS(ad_fields), "Load", error);
    if (st != ADORCH_OK) {
        json_decref(reply);
        return st;
    }
    json_t *ads = json_object_get(reply, "ads");
    struct box *box = box_new(reply);
    json_decref(reply);
    size_t n = json_array_size(ads);
    adorch_ad *items = box ? calloc(n ? n : 1, sizeof *items) : NULL;
    if (items == NULL) {
        box_free(box);
        return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    }
    box->items = items;
    for (size_t i = 0; i < n; i++) fill_ad(box, &items[i], json_array_get(ads, i));
    box->u.ads = (adorch_ad_list){.count = n, .items = items};
    *out = &box->u.ads;
    return ADORCH_OK;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_list_rewards(adorch_client *c, const char *user_id, const char *since, const char *after,
                                                              int32_t limit, adorch_reward_list **out, adorch_error *error) {
    REQUIRE(c && out, "client and out are required");
    adorch_status st = ADORCH_OK;
    json_t *params = json_object();
    put_string(params, "user_id", user_id, "user_id", &st, error);
    put_string(params, "since", since, "since", &st, error);
    put_string(params, "after", after, "after", &st, error);
    if (limit) put_value(params, "limit", json_integer(limit), &st, error);
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    st = call_blocking(c, "io.adorch.Ads.ListRewards", params, true, 0, &reply, error);
    if (st == ADORCH_OK) st = check_list(reply, "rewards", FIELDS(reward_fields), "ListRewards", error);
    if (st == ADORCH_OK && !json_is_boolean(json_object_get(reply, "more")))
        st = lib_error(error, ADORCH_E_PROTOCOL, 0, "ListRewards: the reply's more is missing or not a bool");
    if (st != ADORCH_OK) {
        json_decref(reply);
        return st;
    }
    json_t *rewards = json_object_get(reply, "rewards");
    struct box *box = box_new(reply);
    json_decref(reply);
    size_t n = json_array_size(rewards);
    adorch_reward *items = box ? calloc(n ? n : 1, sizeof *items) : NULL;
    if (items == NULL) {
        box_free(box);
        return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    }
    box->items = items;
    for (size_t i = 0; i < n; i++) fill_reward(&items[i], json_array_get(rewards, i));
    box->u.rewards = (adorch_reward_list){.count = n, .items = items, .more = json_is_true(json_object_get(box->json, "more"))};
    *out = &box->u.rewards;
    return ADORCH_OK;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_ack_reward(adorch_client *c, const char *trans_id, adorch_error *error) {
    return call_void(c, "io.adorch.Ads.AckReward", "trans_id", trans_id, error);
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_init_interactive(adorch_client *c, const char *slot, const char *creative_url,
                                                                  const char *ad_parameters, const char *slot_type, char **session_id,
                                                                  adorch_error *error) {
    REQUIRE(c && slot && creative_url && slot_type && session_id, "client, slot, creative_url, slot_type and session_id are required");
    json_t *parameters = NULL;
    adorch_status st = parse_object(ad_parameters, "ad_parameters", &parameters, error);
    if (st != ADORCH_OK) return st;
    json_t *params = json_object();
    put_string(params, "slot", slot, "slot", &st, error);
    put_string(params, "creative_url", creative_url, "creative_url", &st, error);
    put_value(params, "ad_parameters", parameters, &st, error);
    put_string(params, "slot_type", slot_type, "slot_type", &st, error);
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    st = call_blocking(c, "io.adorch.Ads.InitInteractive", params, false, 0, &reply, error);
    if (st != ADORCH_OK) return st;
    const char *id = jstr(reply, "session_id");
    *session_id = id ? strdup(id) : NULL;
    json_decref(reply);
    if (*session_id == NULL) return lib_error(error, ADORCH_E_PROTOCOL, 0, "InitInteractive's reply has no session_id");
    return ADORCH_OK;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_start(adorch_client *c, const char *session_id, adorch_error *error) {
    return call_void(c, "io.adorch.Ads.Start", "session_id", session_id, error);
}
ADORCH_CLIENT_EXPORT adorch_status adorch_client_pause(adorch_client *c, const char *session_id, adorch_error *error) {
    return call_void(c, "io.adorch.Ads.Pause", "session_id", session_id, error);
}
ADORCH_CLIENT_EXPORT adorch_status adorch_client_resume(adorch_client *c, const char *session_id, adorch_error *error) {
    return call_void(c, "io.adorch.Ads.Resume", "session_id", session_id, error);
}
ADORCH_CLIENT_EXPORT adorch_status adorch_client_stop(adorch_client *c, const char *session_id, adorch_error *error) {
    return call_void(c, "io.adorch.Ads.Stop", "session_id", session_id, error);
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_list_events(adorch_client *c, const char *const *slots, size_t slot_count, int32_t limit,
                                                             adorch_event_list **out, adorch_error *error) {
    REQUIRE(c && out && (slots || slot_count == 0), "client and out are required, slots with a count");
    adorch_status st = ADORCH_OK;
    json_t *params = json_object();
    if (slot_count) {
        json_t *list = arg_strings(slots, slot_count, "slots", &st, error);
        if (list) put_value(params, "slots", list, &st, error);
    }
    if (limit) put_value(params, "limit", json_integer(limit), &st, error);
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    st = call_blocking(c, "io.adorch.Ads.ListEvents", params, true, 0, &reply, error);
    if (st == ADORCH_OK) st = check_list(reply, "events", FIELDS(event_fields), "ListEvents", error);
    if (st != ADORCH_OK) {
        json_decref(reply);
        return st;
    }
    json_t *events = json_object_get(reply, "events");
    struct box *box = box_new(reply);
    json_decref(reply);
    size_t n = json_array_size(events);
    adorch_event *items = box ? calloc(n ? n : 1, sizeof *items) : NULL;
    if (items == NULL) {
        box_free(box);
        return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    }
    box->items = items;
    for (size_t i = 0; i < n; i++) fill_event(box, &items[i], json_array_get(events, i));
    box->u.events = (adorch_event_list){.count = n, .items = items};
    *out = &box->u.events;
    return ADORCH_OK;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_set_privacy(adorch_client *c, const char *user_id, const char *privacy,
                                                             adorch_error *error) {
    REQUIRE(c, "client is required");
    adorch_status st = ADORCH_OK;
    json_t *params = json_object();
    put_string(params, "user_id", user_id, "user_id", &st, error);
    if (privacy && st == ADORCH_OK) {
        json_t *object = NULL;
        st = parse_object(privacy, "privacy", &object, error);
        if (st == ADORCH_OK) put_value(params, "privacy", object, &st, error);
    }
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    /* Setting the same record twice is setting it once: safe to send again, as a read is. */
    st = call_blocking(c, "io.adorch.Ads.SetPrivacy", params, true, 0, &reply, error);
    json_decref(reply);
    return st;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_get_privacy(adorch_client *c, const char *user_id, char **privacy, char **source,
                                                             adorch_error *error) {
    REQUIRE(c && privacy && source, "client, privacy and source are required");
    adorch_status st = ADORCH_OK;
    json_t *params = json_object();
    put_string(params, "user_id", user_id, "user_id", &st, error);
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    st = call_blocking(c, "io.adorch.Ads.GetPrivacy", params, true, 0, &reply, error);
    if (st != ADORCH_OK) return st;
    json_t *given = json_object_get(reply, "privacy"), *whence = json_object_get(reply, "source");
    if (!json_is_string(whence) || !(given == NULL || json_is_null(given) || json_is_object(given))) {
        json_decref(reply);
        return lib_error(error, ADORCH_E_PROTOCOL, 0, "GetPrivacy: the reply's source or privacy is missing or of the wrong type");
    }
    *privacy = json_is_object(given) ? json_dumps(given, JSON_COMPACT) : NULL;
    *source = strdup(json_string_value(whence));
    json_decref(reply);
    if (*source == NULL || (json_is_object(given) && *privacy == NULL)) {
        free(*privacy);
        free(*source);
        *privacy = *source = NULL;
        return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    }
    return ADORCH_OK;
}

/* A call whose reply parameters go back as JSON text. */
static adorch_status call_text(adorch_client *c, const char *method, json_t *params, bool read_only, char **out, adorch_error *error) {
    json_t *reply = NULL;
    adorch_status st = call_blocking(c, method, params, read_only, 0, &reply, error);
    if (st != ADORCH_OK) return st;
    *out = json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    return *out ? ADORCH_OK : lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_get_status(adorch_client *c, char **status_json, adorch_error *error) {
    REQUIRE(c && status_json, "client and status_json are required");
    return call_text(c, "io.adorch.Manager.GetStatus", json_object(), true, status_json, error);
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_get_caps(adorch_client *c, const char *slot, const char *user_id,
                                                          adorch_cap_rule_list **out, adorch_error *error) {
    REQUIRE(c && slot && out, "client, slot and out are required");
    adorch_status st = ADORCH_OK;
    json_t *params = json_object();
    put_string(params, "slot", slot, "slot", &st, error);
    put_string(params, "user_id", user_id, "user_id", &st, error);
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    st = call_blocking(c, "io.adorch.Manager.GetCaps", params, true, 0, &reply, error);
    if (st == ADORCH_OK) st = check_list(reply, "rules", FIELDS(cap_rule_fields), "GetCaps", error);
    if (st != ADORCH_OK) {
        json_decref(reply);
        return st;
    }
    json_t *rules = json_object_get(reply, "rules");
    struct box *box = box_new(reply);
    json_decref(reply);
    size_t n = json_array_size(rules);
    adorch_cap_rule *items = box ? calloc(n ? n : 1, sizeof *items) : NULL;
    if (items == NULL) {
        box_free(box);
        return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    }
    box->items = items;
    for (size_t i = 0; i < n; i++) fill_cap_rule(&items[i], json_array_get(rules, i));
    box->u.caps = (adorch_cap_rule_list){.count = n, .items = items};
    *out = &box->u.caps;
    return ADORCH_OK;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_get_interface_description(adorch_client *c, const char *interface_name, char **description,
                                                                          adorch_error *error) {
    REQUIRE(c && interface_name && description, "client, interface_name and description are required");
    adorch_status st = ADORCH_OK;
    json_t *params = json_object();
    put_string(params, "interface", interface_name, "interface_name", &st, error);
    if (st != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    json_t *reply = NULL;
    st = call_blocking(c, "org.varlink.service.GetInterfaceDescription", params, true, 0, &reply, error);
    if (st != ADORCH_OK) return st;
    const char *text = jstr(reply, "description");
    *description = text ? strdup(text) : NULL;
    json_decref(reply);
    return *description ? ADORCH_OK : lib_error(error, ADORCH_E_PROTOCOL, 0, "the reply has no description");
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_call(adorch_client *c, const char *method, const char *parameters, char **reply,
                                                      adorch_error *error) {
    REQUIRE(c && method && reply, "client, method and reply are required");
    REQUIRE(utf8_valid(method), "method is not valid UTF-8");
    json_t *params = NULL;
    adorch_status st = parse_object(parameters, "parameters", &params, error);
    if (st != ADORCH_OK) return st;
    return call_text(c, method, params, false, reply, error);
}

/* ---- Events and the non-blocking mode ----------------------------------------------------------- */

struct adorch_shown_ad {
    adorch_client *client;
    adorch_ad *ad;
    char *user_id;
    adorch_ad_listener listener;
    void *userdata;
    bool impression_told, close_told, failure_told, reward_told;
    struct adorch_shown_ad *next; /* in client->listening */
};

/* Hands an event to the listeners of the shown ad it is about. */
static void tell_listeners(adorch_client *c, const adorch_event *e) {
    if (e->ad_id == NULL) return;
    for (struct adorch_shown_ad *s = c->listening, *next; s; s = next) {
        next = s->next;
        if (strcmp(s->ad->id, e->ad_id) != 0) continue;
        const adorch_ad_listener *l = &s->listener;
        const char *what = e->viewer_event ? e->viewer_event : e->name ? e->name : e->message ? e->message : "";
        if (strcmp(e->kind, "reward_granted") == 0) {
            json_t *detail = e->detail ? json_loads(e->detail, 0, NULL) : NULL;
            adorch_reward *reward = detail ? reward_new(detail) : NULL;
            /* A resubscription delivers an unacknowledged reward again: one grant, told once. */
            if (reward && !s->reward_told && l->on_reward) l->on_reward(s->userdata, s, reward);
            s->reward_told = s->reward_told || reward != NULL;
            adorch_reward_free(reward);
            json_decref(detail);
        } else if (strcmp(e->kind, "ad_event") != 0) {
            continue;
        } else if (strcmp(what, "impression") == 0) {
            if (!s->impression_told && l->on_impression) l->on_impression(s->userdata, s);
            s->impression_told = true;
        } else if (strcmp(what, "click") == 0) {
            if (l->on_click) l->on_click(s->userdata, s);
        } else if (strcmp(what, "close") == 0 || strcmp(what, "closed") == 0) {
            if (!s->close_told && l->on_close) l->on_close(s->userdata, s);
            s->close_told = true;
        } else if (strcmp(what, "failed_to_display") == 0) {
            if (!s->failure_told && l->on_failed_to_display) l->on_failed_to_display(s->userdata, s);
            s->failure_told = true;
        }
    }
}

/* Registers the client's sockets and timer with its epoll for what each needs now. */
static void refresh_epoll(adorch_client *c) {
    struct conn *conns[2] = {&c->call, &c->sub.conn};
    /* The call connection is watched only while async replies are due: an idle one has nothing to say. */
    uint32_t wanted[2] = {
        c->call.fd >= 0 && (c->pending || c->call.out_len) ? EPOLLIN | (c->call.out_len ? EPOLLOUT : 0) : 0,
        c->sub.state == SUB_CONNECTED ? EPOLLIN | (c->sub.conn.out_len ? EPOLLOUT : 0) : 0,
    };
    for (int i = 0; i < 2; i++) {
        struct conn *k = conns[i];
        if (k->fd < 0 || k->epoll_events == wanted[i]) continue;
        struct epoll_event ev = {.events = wanted[i], .data.fd = k->fd};
        int op = wanted[i] == 0 ? EPOLL_CTL_DEL : k->epoll_events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
        if (epoll_ctl(c->epfd, op, k->fd, &ev) == 0 || op == EPOLL_CTL_DEL) k->epoll_events = wanted[i];
    }
    /* Replies come in order, so the first pending call is the first to time out. */
    int64_t wake = sub_wake(&c->sub), due = c->pending ? c->pending->deadline : -1;
    if (due >= 0 && (wake < 0 || due < wake)) wake = due;
    if (wake != c->timer_armed) {
        struct itimerspec spec = {0};
        if (wake >= 0) {
            /* CLOCK_MONOTONIC, absolute; a zero it_value would disarm it, so never before 1 ms. */
            int64_t at = wake > 0 ? wake : 1;
            spec.it_value = (struct timespec){.tv_sec = at / 1000, .tv_nsec = (at % 1000) * 1000000};
        }
        timerfd_settime(c->timerfd, wake >= 0 ? TFD_TIMER_ABSTIME : 0, &spec, NULL);
        c->timer_armed = wake;
    }
}

/* Takes the first pending async call off the list. */
static struct pending *pending_take(adorch_client *c) {
    struct pending *p = c->pending;
    c->pending = p->next;
    if (c->pending == NULL) c->pending_tail = NULL;
    return p;
}

/* Closes the call connection and fails every pending async call: the first with `first`, the
 * rest with ADORCH_E_CONNECTION_LOST (each may have taken effect). Stops if a callback freed the client. */
static void fail_pending(adorch_client *c, adorch_status first, int err, const char *why) {
    conn_close(&c->call, c->epfd);
    for (bool head = true; c->pending && !c->free_requested; head = false) {
        struct pending *p = pending_take(c);
        adorch_error e = ADORCH_ERROR_INIT;
        adorch_status st = lib_error(&e, head ? first : ADORCH_E_CONNECTION_LOST, err, "%s%s (the call may have taken effect)",
                                     head ? "" : "the connection went with an earlier call: ", why);
        p->callback(p->userdata, st, NULL, &e);
        adorch_error_clear(&e);
        free(p);
    }
}

/* Reads the async replies that are there and hands them to their callbacks; times out the first
 * one whose deadline passed (the connection goes with it: later replies would be taken for it). */
static void process_calls(adorch_client *c) {
    if (c->call.fd < 0 || (c->pending == NULL && c->call.out_len == 0)) return;
    int err = conn_flush(&c->call);
    const char *why = NULL;
    char text[160];
    while (!err && c->pending && !c->free_requested) {
        json_t *reply = NULL;
        int popped = conn_pop(&c->call, &reply);
        if (popped < 0) {
            err = EPROTO;
            why = "a reply is not a Varlink message";
            break;
        }
        if (popped == 0) {
            ssize_t n = conn_fill(&c->call);
            if (n == -EAGAIN) break;
            if (n <= 0) {
                err = n == 0 ? ECONNRESET : (int)-n;
                break;
            }
            continue;
        }
        json_t *params = json_object_get(reply, "parameters"), *name = json_object_get(reply, "error");
        if (json_is_true(json_object_get(reply, "continues")) || (params && !json_is_object(params)) || (name && !json_is_string(name))) {
            json_decref(reply);
            err = EPROTO;
            why = "a reply is not one to a call without more (continues, or parameters not an object, or error not a string)";
            break;
        }
        struct pending *p = pending_take(c);
        adorch_error e = ADORCH_ERROR_INIT;
        if (name) {
            adorch_status st = daemon_error(&e, reply);
            p->callback(p->userdata, st, NULL, &e);
        } else {
            char *dumped = json_dumps(params ? params : json_object(), JSON_COMPACT);
            p->callback(p->userdata, ADORCH_OK, dumped, NULL);
            free(dumped);
        }
        adorch_error_clear(&e);
        json_decref(reply);
        free(p);
    }
    if (c->free_requested) return;
    if (err) {
        if (why == NULL) {
            snprintf(text, sizeof text, "the connection broke before the reply (%s)", strerror(err));
            why = text;
        }
        fail_pending(c, err == EPROTO ? ADORCH_E_PROTOCOL : ADORCH_E_CONNECTION_LOST, err, why);
    } else if (c->pending && c->pending->deadline >= 0 && now_ms() >= c->pending->deadline) {
        snprintf(text, sizeof text, "no reply within %d ms", c->call_timeout_ms);
        fail_pending(c, ADORCH_E_TIMEOUT, 0, text);
    }
}

static adorch_status pump(adorch_client *c, bool to_callback, adorch_error *error) {
    uint64_t expirations;
    while (read(c->timerfd, &expirations, sizeof expirations) > 0) {}
    c->timer_armed = -1; /* a fired timer is disarmed; refresh_epoll arms it again if due */
    process_calls(c);
    adorch_status st = c->sub.state != SUB_OFF ? sub_pump(c, &c->sub, c->epfd, error) : ADORCH_OK;
    if (to_callback && c->event_callback) {
        json_t *event;
        while (!c->free_requested && c->event_callback && (event = sub_take(&c->sub)) != NULL) {
            adorch_event *e = event_new(event);
            json_decref(event);
            if (e == NULL) continue;
            tell_listeners(c, e);
            if (!c->free_requested && c->event_callback) c->event_callback(c->event_userdata, e);
            adorch_event_free(e);
        }
        /* Its events are out: now the reason it ended. */
        if (st == ADORCH_OK && !c->free_requested && c->sub.broken && json_array_size(c->sub.queue) == 0) st = sub_ended(&c->sub, error);
    }
    refresh_epoll(c);
    return st;
}

ADORCH_CLIENT_EXPORT int adorch_client_get_fd(const adorch_client *c) { return c ? c->epfd : -1; }
ADORCH_CLIENT_EXPORT short adorch_client_get_events(const adorch_client *c) { return c ? POLLIN : 0; }

ADORCH_CLIENT_EXPORT adorch_status adorch_client_process(adorch_client *c, adorch_error *error) {
    REQUIRE(c, "client is required");
    adorch_status st = enter(c, ENTRY_EVENTS, "adorch_client_process", error);
    if (st != ADORCH_OK) return st;
    st = pump(c, true, error);
    leave(c);
    return st;
}

static adorch_status subscribe(adorch_client *c, const char *const *slots, size_t slot_count, adorch_error *error);

ADORCH_CLIENT_EXPORT adorch_status adorch_client_subscribe(adorch_client *c, const char *const *slots, size_t slot_count, adorch_error *error) {
    REQUIRE(c && (slots || slot_count == 0), "client is required, slots with a count");
    adorch_status st = enter(c, ENTRY_EVENTS, "adorch_client_subscribe", error);
    if (st != ADORCH_OK) return st;
    st = subscribe(c, slots, slot_count, error);
    leave(c);
    return st;
}

static adorch_status subscribe(adorch_client *c, const char *const *slots, size_t slot_count, adorch_error *error) {
    sub_free(&c->sub, c->epfd);
    adorch_status st = sub_start(c, &c->sub, slots, slot_count, error);
    c->sub.one_stream = true;
    /* Wait for the subscribed event (it stays queued for the app), so a refused Subscribe fails here. */
    int64_t deadline = deadline_after(c->call_timeout_ms);
    while (st == ADORCH_OK && json_array_size(c->sub.queue) == 0) {
        st = sub_pump(c, &c->sub, c->epfd, error);
        if (st != ADORCH_OK || json_array_size(c->sub.queue) > 0) break;
        if (c->sub.state == SUB_OFF) st = sub_ended(&c->sub, error);
        else if (deadline >= 0 && now_ms() >= deadline) st = lib_error(error, ADORCH_E_TIMEOUT, 0, "Subscribe: no reply within the timeout");
        else if (c->sub.state == SUB_CONNECTED) {
            struct pollfd p = {.fd = c->sub.conn.fd, .events = POLLIN};
            poll(&p, 1, wait_ms(deadline, -1));
        } else poll(NULL, 0, wait_ms(deadline, sub_wake(&c->sub)));
    }
    if (st != ADORCH_OK) sub_free(&c->sub, c->epfd);
    refresh_epoll(c);
    return st;
}

ADORCH_CLIENT_EXPORT void adorch_client_unsubscribe(adorch_client *c) {
    if (c == NULL) return;
    adorch_error e = ADORCH_ERROR_INIT;
    if (enter(c, ENTRY_CALL, "adorch_client_unsubscribe", &e) != ADORCH_OK) {
        if (c->pid == getpid()) logf_(c, ADORCH_LOG_ERROR, "%s: still subscribed", e.message);
        adorch_error_clear(&e);
        return;
    }
    sub_free(&c->sub, c->epfd);
    refresh_epoll(c);
    leave(c);
}

ADORCH_CLIENT_EXPORT void adorch_client_set_event_callback(adorch_client *c, adorch_event_fn callback, void *userdata) {
    if (c == NULL) return;
    c->event_callback = callback;
    c->event_userdata = userdata;
}

static adorch_status next_event(adorch_client *c, int timeout_ms, adorch_event **out, adorch_error *error);

ADORCH_CLIENT_EXPORT adorch_status adorch_client_next_event(adorch_client *c, int timeout_ms, adorch_event **out, adorch_error *error) {
    REQUIRE(c && out, "client and out are required");
    *out = NULL;
    adorch_status st = enter(c, ENTRY_EVENTS, "adorch_client_next_event", error);
    if (st != ADORCH_OK) return st;
    st = next_event(c, timeout_ms, out, error);
    leave(c);
    return st;
}

static adorch_status next_event(adorch_client *c, int timeout_ms, adorch_event **out, adorch_error *error) {
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        json_t *event = sub_take(&c->sub);
        if (event) {
            *out = event_new(event);
            json_decref(event);
            if (*out == NULL) return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
            tell_listeners(c, *out);
            return ADORCH_OK;
        }
        if (c->sub.state == SUB_OFF) return sub_ended(&c->sub, error);
        adorch_status st = pump(c, false, error);
        if (st != ADORCH_OK) return st;
        if (json_array_size(c->sub.queue) > 0) continue;
        if (deadline >= 0 && now_ms() >= deadline) return lib_error(error, ADORCH_E_TIMEOUT, 0, "no event within %d ms", timeout_ms);
        struct pollfd p = {.fd = c->epfd, .events = POLLIN};
        poll(&p, 1, wait_ms(deadline, -1));
    }
}

ADORCH_CLIENT_EXPORT adorch_status adorch_client_call_async(adorch_client *c, const char *method, const char *parameters,
                                                            adorch_reply_fn callback, void *userdata, adorch_error *error) {
    REQUIRE(c && method && callback, "client, method and callback are required");
    REQUIRE(utf8_valid(method), "method is not valid UTF-8");
    json_t *params = NULL;
    adorch_status st = parse_object(parameters, "parameters", &params, error);
    if (st != ADORCH_OK) return st;
    if ((st = enter(c, ENTRY_CALL, method, error)) != ADORCH_OK) {
        json_decref(params);
        return st;
    }
    struct pending *p = calloc(1, sizeof *p);
    json_t *message = call_message(method, params, false);
    json_decref(params);
    if (p == NULL || message == NULL) st = lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    /* One connect attempt, no backoff: an app's event loop is not held up waiting for a daemon. */
    else if ((st = ensure_call(c, false, error)) == ADORCH_OK && conn_queue(&c->call, message) != 0)
        st = lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    json_decref(message);
    if (st != ADORCH_OK) {
        free(p);
        leave(c);
        return st;
    }
    *p = (struct pending){.callback = callback, .userdata = userdata, .deadline = deadline_after(c->call_timeout_ms)};
    if (c->pending_tail) c->pending_tail->next = p;
    else c->pending = p;
    c->pending_tail = p;
    conn_flush(&c->call); /* a failure shows as a broken connection in process */
    refresh_epoll(c);
    leave(c);
    return ADORCH_OK;
}

/* ---- SDK layer: preloaded ads ---------------------------------------------------------------------- */

struct adorch_rewarded_ad {
    adorch_client *client;
    char *slot;
};

/* The slot of this id in a fresh ListSlots (*slots, the caller's to free, holds it); an unknown
 * slot is SlotNotFound, as the daemon would say. */
static adorch_status lookup_slot(adorch_client *c, const char *id, adorch_slot_list **slots, const adorch_slot **slot, adorch_error *error) {
    adorch_status st = adorch_client_list_slots(c, slots, error);
    if (st != ADORCH_OK) return st;
    for (size_t i = 0; i < (*slots)->count; i++)
        if (strcmp((*slots)->items[i].id, id) == 0) *slot = &(*slots)->items[i];
    if (*slot) return ADORCH_OK;
    json_t *params = json_object();
    json_object_set_new(params, "slot", json_stringn(id, strlen(id)));
    st = fill_error(error, ADORCH_E_SLOT_NOT_FOUND, adorch_error_name(ADORCH_E_SLOT_NOT_FOUND), "no slot has this id", params, 0);
    json_decref(params);
    return st;
}

/* SlotNotFound for a slot the daemon does not have, ADORCH_E_ARGUMENT for one of a format not in
 * `formats` (a NULL-ended list): the SDK object or helper is for those formats only. */
static adorch_status check_slot_format(adorch_client *c, const char *id, const char *const *formats, const char *what, adorch_error *error) {
    adorch_slot_list *slots = NULL;
    const adorch_slot *slot = NULL;
    adorch_status st = lookup_slot(c, id, &slots, &slot, error);
    bool fits = false;
    for (size_t i = 0; st == ADORCH_OK && formats[i]; i++) fits = fits || strcmp(slot->format, formats[i]) == 0;
    if (st == ADORCH_OK && !fits) st = lib_error(error, ADORCH_E_ARGUMENT, 0, "slot %s is a %s slot, not one %s serves", id, slot->format, what);
    adorch_slot_list_free(slots);
    return st;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_rewarded_ad_new(adorch_client *c, const char *slot, adorch_rewarded_ad **out, adorch_error *error) {
    REQUIRE(c && slot && out, "client, slot and out are required");
    static const char *const preloaded[] = {"rewarded", "fullscreen", "interstitial", NULL};
    adorch_status st = check_slot_format(c, slot, preloaded, "adorch_rewarded_ad", error);
    if (st != ADORCH_OK) return st;
    adorch_rewarded_ad *ad = calloc(1, sizeof *ad);
    if (ad == NULL || (ad->slot = strdup(slot)) == NULL) {
        free(ad);
        return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    }
    ad->client = c;
    *out = ad;
    return ADORCH_OK;
}

ADORCH_CLIENT_EXPORT void adorch_rewarded_ad_free(adorch_rewarded_ad *ad) {
    if (ad == NULL) return;
    free(ad->slot);
    free(ad);
}

/* How many ads the slot has ready; an unknown slot is SlotNotFound. */
static adorch_status slot_ready(adorch_rewarded_ad *ad, int64_t *ready, adorch_error *error) {
    adorch_slot_list *slots = NULL;
    const adorch_slot *slot = NULL;
    adorch_status st = lookup_slot(ad->client, ad->slot, &slots, &slot, error);
    if (st == ADORCH_OK) *ready = slot->ready;
    adorch_slot_list_free(slots);
    return st;
}

ADORCH_CLIENT_EXPORT bool adorch_rewarded_ad_is_ready(adorch_rewarded_ad *ad, adorch_error *error) {
    int64_t ready = 0;
    if (ad == NULL) {
        lib_error(error, ADORCH_E_ARGUMENT, 0, "ad is required");
        return false;
    }
    return slot_ready(ad, &ready, error) == ADORCH_OK && ready > 0;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_rewarded_ad_load(adorch_rewarded_ad *ad, int timeout_ms, adorch_error *error) {
    REQUIRE(ad, "ad is required");
    int64_t deadline = deadline_after(timeout_ms);
    struct sub s;
    /* Subscribed before looking, so an ad_loaded between the look and the wait is not missed. */
    adorch_status st = sub_open_private(ad->client, &s, ad->slot, error);
    if (st != ADORCH_OK) return st;
    for (;;) {
        int64_t ready = 0;
        if ((st = slot_ready(ad, &ready, error)) != ADORCH_OK || ready > 0) break;
        json_t *event = NULL;
        do {
            json_decref(event);
            event = NULL;
            st = sub_wait(ad->client, &s, -1, deadline, &event, error);
            /* ad_loaded, or subscribed again after a lost stream (an ad_loaded may have been missed): look again. */
        } while (st == ADORCH_OK && strcmp(jstr(event, "kind"), "ad_loaded") != 0 && strcmp(jstr(event, "kind"), "subscribed") != 0);
        json_decref(event);
        if (st != ADORCH_OK) break;
    }
    sub_free(&s, -1);
    return st;
}

ADORCH_CLIENT_EXPORT adorch_status adorch_rewarded_ad_show(adorch_rewarded_ad *ad, const char *user_id, const adorch_reward_model *reward,
                                                           adorch_shown_ad **out, adorch_error *error) {
    REQUIRE(ad && out, "ad and out are required");
    adorch_shown_ad *shown = calloc(1, sizeof *shown);
    if (shown == NULL || (user_id && (shown->user_id = strdup(user_id)) == NULL)) {
        free(shown);
        return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    }
    adorch_status st = adorch_client_show(ad->client, ad->slot, user_id, reward, &shown->ad, error);
    if (st != ADORCH_OK) {
        free(shown->user_id);
        free(shown);
        return st;
    }
    shown->client = ad->client;
    *out = shown;
    return ADORCH_OK;
}

ADORCH_CLIENT_EXPORT const adorch_ad *adorch_shown_ad_get_ad(const adorch_shown_ad *s) { return s ? s->ad : NULL; }

ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report(adorch_shown_ad *s, const char *event, adorch_error *error) {
    REQUIRE(s, "shown ad is required");
    return adorch_client_report(s->client, s->ad->id, event, error);
}
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report_impression(adorch_shown_ad *s, adorch_error *e) { return adorch_shown_ad_report(s, "impression", e); }
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report_click(adorch_shown_ad *s, adorch_error *e) { return adorch_shown_ad_report(s, "click", e); }
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report_complete(adorch_shown_ad *s, adorch_error *e) { return adorch_shown_ad_report(s, "complete", e); }
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report_skip(adorch_shown_ad *s, adorch_error *e) { return adorch_shown_ad_report(s, "skip", e); }
ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_report_close(adorch_shown_ad *s, adorch_error *e) { return adorch_shown_ad_report(s, "close", e); }

static void stop_listening(adorch_shown_ad *s) {
    for (adorch_shown_ad **p = &s->client->listening; *p; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    s->next = NULL;
}

ADORCH_CLIENT_EXPORT void adorch_shown_ad_set_listener(adorch_shown_ad *s, const adorch_ad_listener *listener, void *userdata) {
    if (s == NULL) return;
    stop_listening(s);
    s->listener = (adorch_ad_listener){0};
    if (listener == NULL) return;
    memcpy(&s->listener, listener, listener->size < sizeof s->listener ? listener->size : sizeof s->listener);
    s->userdata = userdata;
    s->next = s->client->listening;
    s->client->listening = s;
}

/* This ad's reward among the unacknowledged ones of ListRewards, paging through them. */
static adorch_status find_reward(adorch_shown_ad *s, adorch_reward **out, adorch_error *error) {
    char *after = NULL;
    adorch_status st;
    for (;;) {
        adorch_reward_list *page = NULL;
        st = adorch_client_list_rewards(s->client, s->user_id, NULL, after, 0, &page, error);
        free(after);
        after = NULL;
        if (st != ADORCH_OK) return st;
        for (size_t i = 0; i < page->count && *out == NULL; i++) {
            if (page->items[i].ad_id && strcmp(page->items[i].ad_id, s->ad->id) == 0) {
                json_t *rows = json_object_get(BOX_OF(page)->json, "rewards");
                *out = reward_new(json_array_get(rows, i));
            }
        }
        bool more = page->more && page->count > 0 && *out == NULL;
        if (more) after = strdup(page->items[page->count - 1].trans_id);
        adorch_reward_list_free(page);
        if (!more) return ADORCH_OK;
    }
}

ADORCH_CLIENT_EXPORT adorch_status adorch_shown_ad_wait_reward(adorch_shown_ad *s, int timeout_ms, adorch_reward **out, adorch_error *error) {
    REQUIRE(s && out, "shown ad and out are required");
    *out = NULL;
    int64_t deadline = deadline_after(timeout_ms);
    struct sub sub;
    /* Subscribed first, then the ledger: a reward granted in between is in one or the other. */
    adorch_status st = sub_open_private(s->client, &sub, s->ad->slot, error);
    if (st != ADORCH_OK) return st;
    st = find_reward(s, out, error);
    while (st == ADORCH_OK && *out == NULL) {
        json_t *event = NULL;
        st = sub_wait(s->client, &sub, -1, deadline, &event, error);
        const char *kind = jstr(event, "kind"), *ad_id = jstr(event, "ad_id");
        json_t *detail = json_object_get(event, "detail");
        if (st == ADORCH_OK && strcmp(kind, "reward_granted") == 0 && ad_id && strcmp(ad_id, s->ad->id) == 0 && json_is_object(detail)) {
            *out = reward_new(detail);
            if (*out == NULL) st = lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
        } else if (st == ADORCH_OK && strcmp(kind, "subscribed") == 0) {
            /* The stream was lost and subscribed again: a daemon restart, which no open ad outlives.
             * A reward granted before it is in the ledger; none there, none will come. */
            st = find_reward(s, out, error);
            if (st == ADORCH_OK && *out == NULL) {
                json_t *params = json_pack("{s:s}", "ad_id", s->ad->id);
                st = fill_error(error, ADORCH_E_AD_NOT_VALID, adorch_error_name(ADORCH_E_AD_NOT_VALID),
                                "the event stream was lost (a daemon restart?) and this ad's reward is not in the ledger: an ad does not outlive a restart",
                                params, 0);
                json_decref(params);
            }
        }
        json_decref(event);
    }
    sub_free(&sub, -1);
    return st;
}

ADORCH_CLIENT_EXPORT void adorch_shown_ad_free(adorch_shown_ad *s) {
    if (s == NULL) return;
    stop_listening(s);
    adorch_ad_free(s->ad);
    free(s->user_id);
    free(s);
}

/* ---- SDK layer: on-demand ads --------------------------------------------------------------------- */

/* The first ad of a Load, as one adorch_ad. */
static adorch_status load_one(adorch_client *c, adorch_load_request *request, const char *format, adorch_ad **out, adorch_error *error) {
    REQUIRE(c && request->slot && out, "client, slot and out are required");
    const char *formats[] = {format, NULL};
    adorch_status st = check_slot_format(c, request->slot, formats, format, error);
    if (st != ADORCH_OK) return st;
    adorch_ad_list *ads = NULL;
    st = adorch_client_load(c, request, &ads, error);
    if (st != ADORCH_OK) return st;
    json_t *first = json_array_get(json_object_get(BOX_OF(ads)->json, "ads"), 0);
    *out = first ? ad_new(first) : NULL;
    adorch_ad_list_free(ads);
    return *out ? ADORCH_OK : lib_error(error, ADORCH_E_PROTOCOL, 0, "Load returned no ad");
}

ADORCH_CLIENT_EXPORT adorch_status adorch_banner_load(adorch_client *c, const char *slot, int32_t width, int32_t height, adorch_ad **out,
                                                      adorch_error *error) {
    adorch_load_request request = {.size = sizeof request, .slot = slot, .count = 1, .width = width, .height = height};
    return load_one(c, &request, "banner", out, error);
}

ADORCH_CLIENT_EXPORT adorch_status adorch_splash_load(adorch_client *c, const char *slot, int32_t timeout_ms, adorch_ad **out, adorch_error *error) {
    adorch_load_request request = {.size = sizeof request, .slot = slot, .count = 1, .timeout_ms = timeout_ms};
    return load_one(c, &request, "splash", out, error);
}

ADORCH_CLIENT_EXPORT adorch_status adorch_native_load(adorch_client *c, const char *slot, int32_t count, adorch_ad_list **out, adorch_error *error) {
    REQUIRE(c && slot && out, "client, slot and out are required");
    static const char *const native[] = {"native", NULL};
    adorch_status st = check_slot_format(c, slot, native, "adorch_native_load", error);
    if (st != ADORCH_OK) return st;
    adorch_load_request request = {.size = sizeof request, .slot = slot, .count = count};
    return adorch_client_load(c, &request, out, error);
}

/* ---- SDK layer: interactive sessions --------------------------------------------------------------- */

struct adorch_interactive_session {
    adorch_client *client;
    char *id;
    struct sub sub;
    bool ended;
};

ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_new(adorch_client *c, const char *slot, const char *creative_url,
                                                                  const char *ad_parameters, const char *slot_type,
                                                                  adorch_interactive_session **out, adorch_error *error) {
    REQUIRE(c && slot && out, "client, slot and out are required");
    adorch_interactive_session *s = calloc(1, sizeof *s);
    if (s == NULL) return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
    s->client = c;
    /* Subscribed before InitInteractive: the session starts fetching, and telling, at once. */
    adorch_status st = sub_open_private(c, &s->sub, slot, error);
    if (st != ADORCH_OK) {
        free(s);
        return st;
    }
    st = adorch_client_init_interactive(c, slot, creative_url, ad_parameters, slot_type, &s->id, error);
    if (st != ADORCH_OK) {
        sub_free(&s->sub, -1);
        free(s);
        return st;
    }
    *out = s;
    return ADORCH_OK;
}

ADORCH_CLIENT_EXPORT const char *adorch_interactive_session_id(const adorch_interactive_session *s) { return s ? s->id : NULL; }
ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_start(adorch_interactive_session *s, adorch_error *error) {
    REQUIRE(s, "session is required");
    return adorch_client_start(s->client, s->id, error);
}
ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_pause(adorch_interactive_session *s, adorch_error *error) {
    REQUIRE(s, "session is required");
    return adorch_client_pause(s->client, s->id, error);
}
ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_resume(adorch_interactive_session *s, adorch_error *error) {
    REQUIRE(s, "session is required");
    return adorch_client_resume(s->client, s->id, error);
}
ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_stop(adorch_interactive_session *s, adorch_error *error) {
    REQUIRE(s, "session is required");
    return adorch_client_stop(s->client, s->id, error);
}

ADORCH_CLIENT_EXPORT adorch_status adorch_interactive_session_next_event(adorch_interactive_session *s, int timeout_ms, adorch_event **out,
                                                                         adorch_error *error) {
    REQUIRE(s && out, "session and out are required");
    *out = NULL;
    if (s->ended) return lib_error(error, ADORCH_E_ENDED, 0, "session %s has ended", s->id);
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        json_t *event = NULL;
        adorch_status st = sub_wait(s->client, &s->sub, -1, deadline, &event, error);
        if (st != ADORCH_OK) return st;
        const char *kind = jstr(event, "kind"), *id = jstr(event, "session_id");
        if (kind && strcmp(kind, "session_event") == 0 && id && strcmp(id, s->id) == 0) {
            *out = event_new(event);
            json_decref(event);
            if (*out == NULL) return lib_error(error, ADORCH_E_NO_MEMORY, ENOMEM, "out of memory");
            s->ended = (*out)->terminal;
            return ADORCH_OK;
        }
        json_decref(event);
    }
}

ADORCH_CLIENT_EXPORT void adorch_interactive_session_free(adorch_interactive_session *s) {
    if (s == NULL) return;
    sub_free(&s->sub, -1);
    free(s->id);
    free(s);
}
