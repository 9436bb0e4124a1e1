/* The C client's tests against a real adorchd (ADORCH_SOCKET), driven from
 * Tests/IntegrationTests/CClientTests.swift:
 *   client-test basics          the SDK layer and the plain calls on the embedded default config
 *   client-test nonblocking     events and async replies through adorch_client_get_fd + poll
 *   client-test errors EMPTY    typed errors, and every `error` of both IDLs maps to its own code
 *   client-test caps PACED      a Show within the pacing (60 s per user) of slot PACED is Capped, and
 *                               ListSlots for the user and GetCaps tell the hold
 *   client-test restart         a subscription that lives through a daemon restart (the XCTest
 *                               restarts the daemon and makes the Show this waits for)
 *   client-test brokenpeer DIR  what a broken connection does to each kind of call, against a peer
 *                               in this program that breaks on cue (no daemon does so on demand)
 *   client-test fakepeer DIR    replies no daemon sends (malformed, "continues" to a plain call, none
 *                               at all, an event stream that ends), from a scripted peer in this program
 *   client-test arguments       what the app passes that cannot go out as it is: a call over the
 *                               daemon's max_message_bytes, strings that are not UTF-8, NULLs
 *   client-test threads         the one-thread-at-a-time rule and the callback rules, enforced
 * Each prints what it checked and exits 0, or prints the failed check and exits 1. */
#include <adorch/client.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            printf("FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);                       \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* A call that must succeed: on failure, the error's name and message. */
#define OK(call)                                                                           \
    do {                                                                                   \
        adorch_error e_ = ADORCH_ERROR_INIT;                                               \
        adorch_error *error = &e_;                                                         \
        adorch_status st_ = (call);                                                        \
        CHECK(st_ == ADORCH_OK, "status %d %s: %s", st_, e_.name, e_.message);             \
        adorch_error_clear(&e_);                                                           \
    } while (0)

/* A call that must fail with `code`, the daemon's (or library's) name for it in the error. */
#define FAILS(want, call)                                                                  \
    do {                                                                                   \
        adorch_error e_ = ADORCH_ERROR_INIT;                                               \
        adorch_error *error = &e_;                                                         \
        adorch_status st_ = (call);                                                        \
        CHECK(st_ == (want) && e_.code == (want), "expected %s, got %d %s: %s", #want, st_, e_.name, e_.message); \
        CHECK(e_.name && (adorch_error_code_from_name(e_.name) == (want) || strcmp(e_.name, adorch_error_name(want)) == 0), \
              "name %s", e_.name);                                                         \
        CHECK(e_.message && *e_.message && e_.parameters, "message and parameters are filled"); \
        printf("ok: %s -> %s (%s)\n", #call, e_.name, e_.message);                         \
        adorch_error_clear(&e_);                                                           \
    } while (0)

static bool reconnected;
static int calls_again; /* log lines saying a call is sent again */

/* Log lines go to stdout, where the XCTest reads them. */
static void log_line(void *userdata, adorch_log_level level, const char *message) {
    (void)userdata;
    printf("LOG %d %s\n", level, message);
    fflush(stdout);
    if (strstr(message, "subscribed again")) reconnected = true;
    if (strstr(message, "calling again")) calls_again++;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static adorch_client *connect_client(void) {
    adorch_client_options options = ADORCH_CLIENT_OPTIONS_INIT;
    options.log = log_line;
    adorch_client *client = NULL;
    OK(adorch_client_new(&client, &options, error));
    return client;
}

struct heard {
    int impressions, clicks, closes, rewards, failures;
};

static void on_impression(void *u, adorch_shown_ad *ad) { (void)ad; ((struct heard *)u)->impressions++; }
static void on_click(void *u, adorch_shown_ad *ad) { (void)ad; ((struct heard *)u)->clicks++; }
static void on_close(void *u, adorch_shown_ad *ad) { (void)ad; ((struct heard *)u)->closes++; }
static void on_reward(void *u, adorch_shown_ad *ad, const adorch_reward *r) {
    CHECK(strcmp(r->ad_id, adorch_shown_ad_get_ad(ad)->id) == 0, "the reward is this ad's");
    ((struct heard *)u)->rewards++;
}
static void on_failed(void *u, adorch_shown_ad *ad) { (void)ad; ((struct heard *)u)->failures++; }

static void basics(void) {
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", ADORCH_CLIENT_VERSION_MAJOR, ADORCH_CLIENT_VERSION_MINOR, ADORCH_CLIENT_VERSION_PATCH);
    CHECK(strcmp(adorch_client_version(), version) == 0, "library %s, header %s", adorch_client_version(), version);
    adorch_client *client = connect_client();
    const char *rewarded_slot = "rewarded_main";
    OK(adorch_client_subscribe(client, &rewarded_slot, 1, error));
    adorch_event *first = NULL;
    OK(adorch_client_next_event(client, 5000, &first, error));
    CHECK(strcmp(first->kind, "subscribed") == 0, "first event %s", first->kind);
    adorch_event_free(first);

    /* A rewarded ad: load, is_ready, show, report, the listener, the reward, ack. */
    adorch_rewarded_ad *rewarded = NULL;
    OK(adorch_rewarded_ad_new(client, rewarded_slot, &rewarded, error));
    OK(adorch_rewarded_ad_load(rewarded, 20000, error));
    CHECK(adorch_rewarded_ad_is_ready(rewarded, NULL), "ready after load");
    adorch_shown_ad *shown = NULL;
    OK(adorch_rewarded_ad_show(rewarded, "c-user-1", NULL, &shown, error));
    const adorch_ad *ad = adorch_shown_ad_get_ad(shown);
    CHECK(ad->id && strcmp(ad->slot, rewarded_slot) == 0 && strcmp(ad->format, "rewarded") == 0 && ad->payload && ad->payload[0] == '{',
          "ad %s %s %s %s", ad->id, ad->slot, ad->format, ad->payload);
    printf("shown ad %s from %s, price %.2f, expires %s\n", ad->id, ad->network, ad->price, ad->expires_at);
    struct heard heard = {0};
    adorch_ad_listener listener = {sizeof listener, on_impression, on_click, on_close, on_reward, on_failed};
    adorch_shown_ad_set_listener(shown, &listener, &heard);
    OK(adorch_shown_ad_report_impression(shown, error));
    OK(adorch_shown_ad_report_click(shown, error));
    OK(adorch_shown_ad_report_complete(shown, error));
    OK(adorch_shown_ad_report_close(shown, error));
    FAILS(ADORCH_E_AD_NOT_VALID, adorch_shown_ad_report_close(shown, error));
    adorch_reward *reward = NULL;
    OK(adorch_shown_ad_wait_reward(shown, 10000, &reward, error));
    CHECK(strcmp(reward->ad_id, ad->id) == 0 && strcmp(reward->reward_name, "coins") == 0 && reward->reward_amount == 10 &&
              strcmp(reward->user_id, "c-user-1") == 0 && !reward->acknowledged,
          "reward %s %s %lld %s", reward->ad_id, reward->reward_name, (long long)reward->reward_amount, reward->user_id);
    printf("reward %lld %s, transaction %s\n", (long long)reward->reward_amount, reward->reward_name, reward->trans_id);
    /* The listener fires as the client's subscription delivers the ad's events. */
    time_t until = time(NULL) + 10;
    while ((heard.impressions == 0 || heard.closes == 0 || heard.rewards == 0) && time(NULL) < until) {
        adorch_event *event = NULL;
        adorch_error e = ADORCH_ERROR_INIT;
        adorch_status st = adorch_client_next_event(client, 1000, &event, &e);
        CHECK(st == ADORCH_OK || st == ADORCH_E_TIMEOUT, "next_event %d %s", st, e.message);
        adorch_error_clear(&e);
        adorch_event_free(event);
    }
    CHECK(heard.impressions == 1 && heard.clicks >= 1 && heard.closes == 1 && heard.rewards == 1 && heard.failures == 0,
          "listener heard %d impressions, %d clicks, %d closes, %d rewards, %d failures", heard.impressions, heard.clicks,
          heard.closes, heard.rewards, heard.failures);
    printf("listener: %d impression, %d click, %d close, %d reward\n", heard.impressions, heard.clicks, heard.closes, heard.rewards);
    OK(adorch_client_ack_reward(client, reward->trans_id, error));
    adorch_reward_list *rewards = NULL;
    OK(adorch_client_list_rewards(client, "c-user-1", NULL, NULL, 0, &rewards, error));
    for (size_t i = 0; i < rewards->count; i++) CHECK(strcmp(rewards->items[i].trans_id, reward->trans_id) != 0, "acked reward listed again");
    adorch_reward_list_free(rewards);
    adorch_reward_free(reward);
    adorch_shown_ad_free(shown);

    /* The Show's own reward model overrides the slot's. */
    adorch_reward_model model = {sizeof model, "gems", 3, "level-2"};
    OK(adorch_rewarded_ad_load(rewarded, 20000, error));
    OK(adorch_rewarded_ad_show(rewarded, "c-user-1", &model, &shown, error));
    OK(adorch_shown_ad_report_complete(shown, error));
    OK(adorch_shown_ad_wait_reward(shown, 10000, &reward, error));
    CHECK(strcmp(reward->reward_name, "gems") == 0 && reward->reward_amount == 3 && strcmp(reward->extra, "level-2") == 0,
          "reward %lld %s %s", (long long)reward->reward_amount, reward->reward_name, reward->extra);
    OK(adorch_client_ack_reward(client, reward->trans_id, error));
    OK(adorch_shown_ad_report_close(shown, error));
    adorch_reward_free(reward);
    adorch_shown_ad_free(shown);
    adorch_rewarded_ad_free(rewarded);

    /* On-demand formats. */
    adorch_ad *banner = NULL, *splash = NULL;
    OK(adorch_banner_load(client, "banner_main", 320, 50, &banner, error));
    CHECK(strcmp(banner->format, "banner") == 0, "banner format %s", banner->format);
    OK(adorch_splash_load(client, "splash_main", 0, &splash, error));
    CHECK(strcmp(splash->format, "splash") == 0, "splash format %s", splash->format);
    adorch_ad_list *natives = NULL;
    OK(adorch_native_load(client, "native_main", 3, &natives, error));
    CHECK(natives->count == 3, "%zu native ads", natives->count);
    for (size_t i = 0; i < natives->count; i++) CHECK(strcmp(natives->items[i].format, "native") == 0, "native format");
    printf("loaded banner %s, splash %s, %zu native ads\n", banner->id, splash->id, natives->count);
    adorch_ad_free(banner);
    adorch_ad_free(splash);
    adorch_ad_list_free(natives);

    /* An interactive session to its terminal event. */
    adorch_interactive_session *session = NULL;
    OK(adorch_interactive_session_new(client, "interactive_main", "https://creative.invalid/unit.js",
                                      "{\"vast_config_url\":\"https://x.invalid/vast\"}", "preroll", &session, error));
    OK(adorch_interactive_session_start(session, error));
    char names[512] = "";
    adorch_event *last = NULL;
    for (;;) {
        adorch_event *event = NULL;
        OK(adorch_interactive_session_next_event(session, 30000, &event, error));
        strncat(names, event->name ? event->name : "?", sizeof names - strlen(names) - 2);
        strcat(names, " ");
        adorch_event_free(last);
        last = event;
        if (event->terminal) break;
    }
    printf("session %s: %s\n", adorch_interactive_session_id(session), names);
    CHECK(strcmp(last->name, "completed") == 0 && last->ad_free_pod, "terminal event %s", last->name);
    adorch_event_free(last);
    adorch_event *after = NULL;
    FAILS(ADORCH_E_ENDED, adorch_interactive_session_next_event(session, 0, &after, error));
    FAILS(ADORCH_E_SESSION_NOT_FOUND, adorch_interactive_session_stop(session, error));
    adorch_interactive_session_free(session);

    /* Plain calls: slots, events, status. */
    adorch_slot_list *slots = NULL;
    OK(adorch_client_list_slots(client, &slots, error));
    CHECK(slots->count >= 7, "%zu slots", slots->count);
    adorch_slot_list_free(slots);
    adorch_event_list *events = NULL;
    OK(adorch_client_list_events(client, &rewarded_slot, 1, 10, &events, error));
    CHECK(events->count > 0 && events->count <= 10, "%zu events", events->count);
    adorch_event_list_free(events);
    char *status = NULL;
    OK(adorch_client_get_status(client, &status, error));
    CHECK(strstr(status, "\"plugins\""), "status %s", status);
    adorch_string_free(status);
    adorch_client_free(client);
    printf("basics: all passed\n");
}

struct loop_state {
    const char *ad_id;
    int shown_events;
    int replies;
    char *reply;
};

static void on_event(void *u, const adorch_event *event) {
    struct loop_state *s = u;
    printf("event %s %s\n", event->kind, event->ad_id ? event->ad_id : "");
    if (s->ad_id && strcmp(event->kind, "ad_shown") == 0 && event->ad_id && strcmp(event->ad_id, s->ad_id) == 0) s->shown_events++;
}

static void on_reply(void *u, adorch_status status, const char *reply, const adorch_error *error) {
    struct loop_state *s = u;
    CHECK(status == ADORCH_OK, "async reply %d %s", status, error ? error->message : "");
    s->replies++;
    s->reply = strdup(reply);
}

/* The app's own event loop: poll the client's fd, then process. */
static void nonblocking(void) {
    adorch_client *listener = connect_client(), *app = connect_client();
    struct loop_state state = {0};
    adorch_client_set_event_callback(listener, on_event, &state);
    const char *slot = "rewarded_main";
    OK(adorch_client_subscribe(listener, &slot, 1, error));
    OK(adorch_client_call_async(listener, "io.adorch.Ads.ListSlots", NULL, on_reply, &state, error));
    adorch_slot_list *slots = NULL;
    FAILS(ADORCH_E_BUSY, adorch_client_list_slots(listener, &slots, error));
    adorch_rewarded_ad *rewarded = NULL;
    OK(adorch_rewarded_ad_new(app, slot, &rewarded, error));
    OK(adorch_rewarded_ad_load(rewarded, 20000, error));
    adorch_shown_ad *shown = NULL;
    OK(adorch_rewarded_ad_show(rewarded, "c-user-2", NULL, &shown, error));
    state.ad_id = adorch_shown_ad_get_ad(shown)->id;
    int wakeups = 0;
    time_t until = time(NULL) + 10;
    while ((state.shown_events == 0 || state.replies == 0) && time(NULL) < until) {
        struct pollfd p = {.fd = adorch_client_get_fd(listener), .events = adorch_client_get_events(listener)};
        int ready = poll(&p, 1, 1000);
        CHECK(ready >= 0, "poll");
        if (ready > 0) wakeups++;
        OK(adorch_client_process(listener, error));
    }
    CHECK(state.shown_events == 1 && state.replies == 1 && strstr(state.reply, "\"slots\""), "%d ad_shown events, %d replies",
          state.shown_events, state.replies);
    printf("nonblocking: ad_shown of %s and the async reply after %d wakeups of fd %d\n", state.ad_id, wakeups,
           adorch_client_get_fd(listener));
    OK(adorch_client_list_slots(listener, &slots, error));
    adorch_slot_list_free(slots);
    OK(adorch_shown_ad_report_close(shown, error));
    free(state.reply);
    adorch_shown_ad_free(shown);
    adorch_rewarded_ad_free(rewarded);
    adorch_client_free(listener);
    adorch_client_free(app);
    printf("nonblocking: all passed\n");
}

/* Every `error NAME` line of an interface's IDL maps to its own code, and that code's name back to it. */
static int check_idl_errors(adorch_client *client, const char *interface) {
    char *idl = NULL;
    OK(adorch_client_get_interface_description(client, interface, &idl, error));
    int count = 0;
    for (char *line = strtok(idl, "\n"); line; line = strtok(NULL, "\n")) {
        char name[128];
        if (sscanf(line, "error %127[A-Za-z0-9_]", name) != 1) continue;
        char qualified[256];
        snprintf(qualified, sizeof qualified, "%s.%s", interface, name);
        adorch_status code = adorch_error_code_from_name(qualified);
        CHECK(code != ADORCH_E_DAEMON, "%s has no code of its own", qualified);
        const char *back = adorch_error_name(code);
        size_t n = strlen(name), m = strlen(back);
        CHECK(m > n && back[m - n - 1] == '.' && strcmp(back + m - n, name) == 0, "%s -> %d -> %s", qualified, code, back);
        printf("ok: %s -> %d (%s)\n", qualified, code, back);
        count++;
    }
    free(idl);
    return count;
}

static void errors(const char *empty_slot) {
    adorch_client *client = connect_client();
    int mapped = check_idl_errors(client, "io.adorch.Ads") + check_idl_errors(client, "io.adorch.Manager");
    CHECK(mapped >= 15, "only %d IDL errors", mapped);
    printf("every IDL error maps to a code: %d errors\n", mapped);
    CHECK(adorch_error_code_from_name("io.adorch.Ads.SomethingNew") == ADORCH_E_DAEMON, "unknown names are the base code");
    CHECK(adorch_error_code_from_name("adorch.client.Timeout") == ADORCH_E_TIMEOUT, "the library's own names map back too");

    adorch_ad *ad = NULL;
    FAILS(ADORCH_E_SLOT_NOT_FOUND, adorch_client_show(client, "no-such-slot", "u", NULL, &ad, error));
    {
        adorch_error e = ADORCH_ERROR_INIT;
        adorch_client_show(client, "no-such-slot", "u", NULL, &ad, &e);
        CHECK(adorch_error_parameter(&e, "slot") && strcmp(adorch_error_parameter(&e, "slot"), "no-such-slot") == 0, "slot parameter");
        adorch_error_clear(&e);
    }
    FAILS(ADORCH_E_NO_AD_READY, adorch_client_show(client, empty_slot, "u", NULL, &ad, error));
    FAILS(ADORCH_E_INVALID_PARAMETER, adorch_client_show(client, "r", NULL, NULL, &ad, error));
    /* The config allows one open ad per uid: a second Show before the first is closed is refused. */
    OK(adorch_client_show(client, "r", "u", NULL, &ad, error));
    adorch_ad *second = NULL;
    FAILS(ADORCH_E_TOO_MANY_OPEN_ADS, adorch_client_show(client, "r", "u", NULL, &second, error));
    {
        adorch_error e = ADORCH_ERROR_INIT;
        int64_t limit = 0;
        adorch_client_show(client, "r", "u", NULL, &second, &e);
        CHECK(adorch_error_parameter_int(&e, "limit", &limit) && limit == 1, "TooManyOpenAds' limit %lld", (long long)limit);
        CHECK(!adorch_error_parameter_int(&e, "budget", &limit), "budget is a string");
        adorch_error_clear(&e);
    }
    OK(adorch_client_report(client, ad->id, "close", error));
    adorch_ad_free(ad);
    FAILS(ADORCH_E_AD_NOT_VALID, adorch_client_report(client, "no-such-ad", "impression", error));
    FAILS(ADORCH_E_SESSION_NOT_FOUND, adorch_client_stop(client, "no-such-session", error));
    FAILS(ADORCH_E_REWARD_NOT_FOUND, adorch_client_ack_reward(client, "no-such-transaction", error));
    char *reply = NULL;
    FAILS(ADORCH_E_VARLINK_INVALID_PARAMETER, adorch_client_call(client, "io.adorch.Ads.ListSlots", "{\"extra\":1}", &reply, error));
    FAILS(ADORCH_E_VARLINK_METHOD_NOT_FOUND, adorch_client_call(client, "io.adorch.Ads.NoSuchMethod", NULL, &reply, error));
    FAILS(ADORCH_E_VARLINK_INTERFACE_NOT_FOUND, adorch_client_call(client, "io.example.Nope.Method", NULL, &reply, error));
    FAILS(ADORCH_E_ARGUMENT, adorch_client_call(client, "io.adorch.Ads.ListSlots", "[not json", &reply, error));
    adorch_event *event = NULL;
    FAILS(ADORCH_E_BUSY, adorch_client_next_event(client, 0, &event, error));
    adorch_client_free(client);

    adorch_client_options options = ADORCH_CLIENT_OPTIONS_INIT;
    options.socket_path = "/nonexistent/adorchd.sock";
    options.reconnect_timeout_ms = 300;
    options.log = log_line;
    adorch_client *nowhere = NULL;
    FAILS(ADORCH_E_CONNECT, adorch_client_new(&nowhere, &options, error));
    printf("errors: all passed\n");
}

/* SetPrivacy and GetPrivacy: the app's record, a user's over it, a refusal naming the field and
 * changing nothing, a clear; a Load with a privacy of its own. */
static void privacy(void) {
    adorch_client *client = connect_client();
    char *given = NULL, *source = NULL;
    OK(adorch_client_get_privacy(client, NULL, &given, &source, error));
    CHECK(given == NULL && strcmp(source, "none") == 0, "nothing set: %s", source);
    adorch_string_free(source);
    OK(adorch_client_set_privacy(client, NULL, "{\"us_privacy\":\"1YNN\",\"gdpr_applies\":false}", error));
    OK(adorch_client_set_privacy(client, "u1", "{\"non_personalized\":true}", error));
    OK(adorch_client_get_privacy(client, "u1", &given, &source, error));
    CHECK(strcmp(source, "user") == 0 && strstr(given, "\"non_personalized\":true"), "u1's: %s %s", source, given);
    adorch_string_free(given);
    adorch_string_free(source);
    OK(adorch_client_get_privacy(client, "u2", &given, &source, error));
    CHECK(strcmp(source, "app") == 0 && strstr(given, "\"us_privacy\":\"1YNN\""), "u2 has the app's: %s %s", source, given);
    adorch_string_free(given);
    adorch_string_free(source);
    {
        adorch_error e = ADORCH_ERROR_INIT;
        CHECK(adorch_client_set_privacy(client, "u1", "{\"us_privacy\":\"2---\"}", &e) == ADORCH_E_INVALID_PARAMETER, "bad string refused");
        CHECK(adorch_error_parameter(&e, "parameter") && strcmp(adorch_error_parameter(&e, "parameter"), "privacy.us_privacy") == 0,
              "the refusal names the field: %s", e.parameters);
        adorch_error_clear(&e);
    }
    FAILS(ADORCH_E_ARGUMENT, adorch_client_set_privacy(client, "u1", "[not json", error));
    OK(adorch_client_get_privacy(client, "u1", &given, &source, error));
    CHECK(strcmp(source, "user") == 0, "the refused call changed nothing: %s", source);
    adorch_string_free(given);
    adorch_string_free(source);
    OK(adorch_client_set_privacy(client, "u1", NULL, error));
    OK(adorch_client_get_privacy(client, "u1", &given, &source, error));
    CHECK(strcmp(source, "app") == 0, "cleared: %s", source);
    adorch_string_free(given);
    adorch_string_free(source);
    /* One call's own privacy: a viewer outside the GDPR who asked for non-personalised ads, whom
     * sim serves (it serves no children unless its entry says serves_children). */
    adorch_load_request request = {.size = sizeof request, .slot = "banner_main",
                                   .privacy = "{\"gdpr_applies\":false,\"non_personalized\":true}"};
    adorch_ad_list *ads = NULL;
    OK(adorch_client_load(client, &request, &ads, error));
    adorch_ad_list_free(ads);
    request.privacy = "{\"max_content_rating\":\"R\"}";
    FAILS(ADORCH_E_INVALID_PARAMETER, adorch_client_load(client, &request, &ads, error));
    adorch_ad *ad = NULL;
    FAILS(ADORCH_E_INVALID_PARAMETER, adorch_client_show_with_privacy(client, "rewarded_main", "u1", NULL, "{\"gpp_sid\":[2]}", &ad, error));
    adorch_client_free(client);
    printf("privacy: all passed\n");
}

/* PACED allows one ad a minute per user: after a Show and its impression, the user's next Show
 * is ADORCH_E_CAPPED naming the rule; ListSlots tells that user's hold (no other user's), and
 * GetCaps counts the impression. */
static void caps(const char *paced) {
    adorch_client *client = connect_client();
    adorch_interstitial_ad *interstitial = NULL;
    OK(adorch_rewarded_ad_new(client, paced, &interstitial, error));
    OK(adorch_rewarded_ad_load(interstitial, 20000, error));
    adorch_slot_list *slots = NULL;
    OK(adorch_client_list_slots_for_user(client, "c-paced", &slots, error));
    CHECK(slots->count == 1 && slots->items[0].capped == NULL, "%zu slots, before any ad was shown", slots->count);
    adorch_slot_list_free(slots);

    adorch_shown_ad *shown = NULL, *again = NULL;
    OK(adorch_rewarded_ad_show(interstitial, "c-paced", NULL, &shown, error));
    OK(adorch_shown_ad_report_impression(shown, error));
    FAILS(ADORCH_E_CAPPED, adorch_rewarded_ad_show(interstitial, "c-paced", NULL, &again, error));
    {
        /* A Capped Show changes nothing: asking again gets the same answer, to read its fields. */
        adorch_error e = ADORCH_ERROR_INIT;
        adorch_rewarded_ad_show(interstitial, "c-paced", NULL, &again, &e);
        const char *slot = adorch_error_parameter(&e, "slot"), *rule = adorch_error_parameter(&e, "rule");
        CHECK(e.code == ADORCH_E_CAPPED && slot && strcmp(slot, paced) == 0 && rule && strcmp(rule, "pacing 1m per user") == 0 &&
                  e.retry_after_ms > 0 && e.retry_after_ms <= 60000,
              "%s: slot %s, rule %s, retry_after_ms %lld", e.name, slot, rule, (long long)e.retry_after_ms);
        adorch_error_clear(&e);
    }

    OK(adorch_client_list_slots_for_user(client, "c-paced", &slots, error));
    const adorch_cap_hold *hold = slots->items[0].capped;
    CHECK(hold && strcmp(hold->rule, "pacing 1m per user") == 0 && strcmp(hold->kind, "pacing") == 0 && hold->network == NULL &&
              hold->retry_after_ms > 0 && hold->retry_after_ms <= 60000 && hold->until && *hold->until,
          "ListSlots' hold for c-paced: %s", hold ? hold->rule : "none");
    printf("capped for c-paced: %s (%s), %lld ms more, until %s\n", hold->rule, hold->kind, (long long)hold->retry_after_ms, hold->until);
    adorch_slot_list_free(slots);
    OK(adorch_client_list_slots_for_user(client, "c-other", &slots, error));
    CHECK(slots->items[0].capped == NULL, "the pacing is per user: %s holds c-other", slots->items[0].capped->rule);
    adorch_slot_list_free(slots);
    OK(adorch_client_list_slots(client, &slots, error));
    CHECK(slots->items[0].capped == NULL, "nothing holds Shows without a user id: %s", slots->items[0].capped->rule);
    adorch_slot_list_free(slots);

    adorch_cap_rule_list *rules = NULL;
    OK(adorch_client_get_caps(client, paced, "c-paced", &rules, error));
    CHECK(rules->count == 1, "%zu rules", rules->count);
    const adorch_cap_rule *r = &rules->items[0];
    CHECK(strcmp(r->rule, "pacing 1m per user") == 0 && strcmp(r->kind, "pacing") == 0 && strcmp(r->scope, "user") == 0 &&
              r->network == NULL && r->ad_unit_id == NULL && r->impressions == 1 && r->window_ms == 60000 && r->counted == 1 &&
              r->retry_after_ms > 0 && r->retry_after_ms <= 60000 && r->until,
          "GetCaps: %s %s %s, %lld per %lld ms, counted %lld, retry_after_ms %lld", r->rule, r->kind, r->scope, (long long)r->impressions,
          (long long)r->window_ms, (long long)r->counted, (long long)r->retry_after_ms);
    adorch_cap_rule_list_free(rules);
    {
        adorch_error e = ADORCH_ERROR_INIT;
        CHECK(adorch_client_get_caps(client, "no-such-slot", NULL, &rules, &e) == ADORCH_E_SLOT_NOT_FOUND &&
                  strcmp(e.name, "io.adorch.Manager.SlotNotFound") == 0,
              "GetCaps of no slot: %s", e.name);
        adorch_error_clear(&e);
    }

    OK(adorch_shown_ad_report_close(shown, error));
    adorch_shown_ad_free(shown);
    adorch_rewarded_ad_free(interstitial);
    adorch_client_free(client);
    printf("caps: all passed\n");
}

/* Prints READY once subscribed, then every event, and exits after the first ad_shown that
 * came after the client reconnected by itself. */
static void restart(void) {
    adorch_client *client = connect_client();
    OK(adorch_client_subscribe(client, NULL, 0, error));
    printf("READY\n");
    fflush(stdout);
    int subscribed = 0;
    for (;;) {
        adorch_event *event = NULL;
        OK(adorch_client_next_event(client, 60000, &event, error));
        printf("EVENT %s %s\n", event->kind, event->ad_id ? event->ad_id : "-");
        fflush(stdout);
        if (strcmp(event->kind, "subscribed") == 0) subscribed++;
        bool done = reconnected && strcmp(event->kind, "ad_shown") == 0;
        if (done) printf("RESUMED %s subscribed-events=%d\n", event->ad_id, subscribed);
        adorch_event_free(event);
        if (done) break;
    }
    CHECK(subscribed == 1, "%d subscribed events reached the app", subscribed);
    /* The call connection, opened before the restart, is found closed and opened again. */
    adorch_slot_list *slots = NULL;
    OK(adorch_client_list_slots(client, &slots, error));
    CHECK(slots->count == 2, "%zu slots after the restart", slots->count);
    adorch_slot_list_free(slots);
    printf("calls work after the restart\n");
    adorch_client_free(client);
}

/* The peer: a listening socket, and what each call it was sent asked for, "conn:method" in order. */
struct peer {
    int listener;
    char calls[8][96];
    int call_count;
};

/* One message from fd (up to its NUL) into the peer's log; false at EOF. */
static bool peer_read(struct peer *p, int fd, int connection) {
    char message[4096];
    size_t len = 0;
    while (len < sizeof message - 1) {
        ssize_t n = read(fd, message + len, 1);
        if (n <= 0) return false;
        if (message[len] == '\0') break;
        len++;
    }
    message[len] = '\0';
    const char *method = strstr(message, "\"method\":\"");
    char name[64] = "?";
    if (method) sscanf(method + 10, "%63[^\"]", name);
    snprintf(p->calls[p->call_count++ % 8], sizeof p->calls[0], "%d:%s", connection, name);
    return true;
}

/* Connection 1: reads a call and hangs up unanswered. 2: the same. 3: answers its first call
 * with no slots, leaves the second unanswered, and waits for the client to go. */
static void *peer_run(void *arg) {
    struct peer *p = arg;
    for (int connection = 1; connection <= 3; connection++) {
        int fd = accept(p->listener, NULL, NULL);
        if (fd < 0) return NULL;
        if (peer_read(p, fd, connection) && connection == 3) {
            static const char reply[] = "{\"parameters\":{\"slots\":[]}}";
            if (write(fd, reply, sizeof reply) == (ssize_t)sizeof reply) {
                while (peer_read(p, fd, connection)) {}
            }
        }
        close(fd);
    }
    return NULL;
}

static void brokenpeer(const char *dir) {
    struct peer peer = {0};
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s/peer.sock", dir);
    unlink(addr.sun_path);
    peer.listener = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(peer.listener, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(peer.listener, 4) == 0, "listen on %s", addr.sun_path);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, peer_run, &peer) == 0, "peer thread");

    adorch_client_options options = ADORCH_CLIENT_OPTIONS_INIT;
    options.socket_path = addr.sun_path;
    options.call_timeout_ms = 500;
    options.log = log_line;
    adorch_client *client = NULL;
    OK(adorch_client_new(&client, &options, error));
    /* A Show whose connection broke after it was sent may have taken effect: not sent again. */
    adorch_ad *ad = NULL;
    FAILS(ADORCH_E_CONNECTION_LOST, adorch_client_show(client, "r", "u", NULL, &ad, error));
    /* A read is sent again: connection 2 breaks too, connection 3 answers. */
    adorch_slot_list *slots = NULL;
    OK(adorch_client_list_slots(client, &slots, error));
    CHECK(slots->count == 0, "%zu slots", slots->count);
    adorch_slot_list_free(slots);
    /* No answer within the call timeout. */
    FAILS(ADORCH_E_TIMEOUT, adorch_client_list_slots(client, &slots, error));
    adorch_client_free(client);
    pthread_join(thread, NULL);
    close(peer.listener);
    unlink(addr.sun_path);

    const char *expected[] = {"1:io.adorch.Ads.Show", "2:io.adorch.Ads.ListSlots", "3:io.adorch.Ads.ListSlots", "3:io.adorch.Ads.ListSlots"};
    CHECK(peer.call_count == 4, "the peer got %d calls", peer.call_count);
    for (int i = 0; i < 4; i++) CHECK(strcmp(peer.calls[i], expected[i]) == 0, "call %d was %s, not %s", i, peer.calls[i], expected[i]);
    printf("brokenpeer: all passed\n");
}

/* ---- The scripted peer: replies no daemon sends, on cue ---------------------------------------- */

static int fake_listener;
static char fake_path[108];
/* Switches the test sets before the call that meets them, and what the peer saw. */
static atomic_int fake_bad_slots, fake_bad_event, fake_end_stream, fake_restart_once, fake_subscribes;

static void fake_send(int fd, const char *json) {
    /* The client may have closed already (that is what some of these replies are for). */
    if (send(fd, json, strlen(json) + 1, MSG_NOSIGNAL) < 0) printf("fake peer: send: %s\n", strerror(errno));
}

/* One message from fd, up to its NUL; false at EOF. */
static bool fake_read(int fd, char *message, size_t size) {
    size_t len = 0;
    while (len < size - 1) {
        if (read(fd, message + len, 1) <= 0) return false;
        if (message[len] == '\0') return true;
        len++;
    }
    message[len] = '\0';
    return true;
}

#define FAKE_AD "{\"id\":\"a1\",\"slot\":\"s\",\"network\":\"n\",\"format\":\"rewarded\",\"payload\":{},\"expires_at\":\"x\",\"price\":1}"

static void *fake_connection(void *arg) {
    int fd = (int)(intptr_t)arg;
    char m[8192];
    while (fake_read(fd, m, sizeof m)) {
        if (strstr(m, "\"io.adorch.Ads.Show\"")) {
            if (strstr(m, "\"slot\":\"continues\"")) {
                fake_send(fd, "{\"parameters\":{\"ad\":" FAKE_AD "},\"continues\":true}");
                fake_send(fd, "{\"parameters\":{\"ad\":" FAKE_AD "}}");
            } else if (strstr(m, "\"slot\":\"id_number\"")) {
                fake_send(fd, "{\"parameters\":{\"ad\":{\"id\":5,\"slot\":\"s\",\"network\":\"n\",\"format\":\"f\",\"payload\":{},\"expires_at\":\"x\",\"price\":1}}}");
            } else if (strstr(m, "\"slot\":\"partial\"")) {
                fake_send(fd, "{\"parameters\":{\"ad\":{\"id\":\"a1\"}}}");
            } else if (strstr(m, "\"slot\":\"payload_string\"")) {
                fake_send(fd, "{\"parameters\":{\"ad\":{\"id\":\"a1\",\"slot\":\"s\",\"network\":\"n\",\"format\":\"f\",\"payload\":\"notobj\",\"expires_at\":\"x\",\"price\":1}}}");
            } else if (strstr(m, "\"slot\":\"restart\"")) {
                fake_send(fd, "{\"parameters\":{\"ad\":" FAKE_AD "}}");
            } else if (strstr(m, "\"slot\":\"nul\"")) {
                fake_send(fd, "{\"parameters\":{\"ad\":{\"id\":\"a\\u0000b\",\"slot\":\"s\",\"network\":\"n\",\"format\":\"f\",\"payload\":{},\"expires_at\":\"x\",\"price\":1}}}");
            } else if (strstr(m, "\"slot\":\"bye\"")) {
                break; /* hangs up unanswered */
            } /* "hang": no reply at all */
        } else if (strstr(m, "\"io.adorch.Ads.ListSlots\"") && strstr(m, "\"user_id\":\"bad_capped\"")) {
            fake_send(fd, "{\"parameters\":{\"slots\":[{\"id\":\"p\",\"format\":\"interstitial\",\"buffer\":1,\"buffer_min\":0,"
                          "\"buffer_max\":2,\"ready\":1,\"loading\":0,\"capped\":{\"rule\":\"pacing 1s per user\",\"kind\":\"pacing\",\"until\":\"x\"}}]}}");
        } else if (strstr(m, "\"io.adorch.Ads.ListSlots\"")) {
            fake_send(fd, fake_bad_slots ? "{\"parameters\":{\"slots\":[{\"id\":5},\"str\",null]}}"
                                         : "{\"parameters\":{\"slots\":[{\"id\":\"restart\",\"format\":\"rewarded\",\"buffer\":1,\"buffer_min\":0,"
                                           "\"buffer_max\":2,\"ready\":1,\"loading\":0}]}}");
        } else if (strstr(m, "\"io.adorch.Ads.ListRewards\"")) {
            fake_send(fd, "{\"parameters\":{\"rewards\":[],\"more\":false}}");
        } else if (strstr(m, "\"io.adorch.Ads.Subscribe\"")) {
            fake_subscribes++;
            fake_send(fd, "{\"parameters\":{\"event\":{\"kind\":\"subscribed\",\"time\":\"t\"}},\"continues\":true}");
            if (fake_restart_once) {
                /* A restart: this stream ends, the next Subscribe is a new daemon's. */
                fake_restart_once = 0;
                break;
            }
            if (fake_bad_event) fake_send(fd, "{\"parameters\":{\"event\":{\"kind\":5,\"time\":\"t\"}},\"continues\":true}");
            if (fake_end_stream) {
                /* The daemon is gone for good: no socket to connect to any more. */
                unlink(fake_path);
                shutdown(fake_listener, SHUT_RDWR);
                break;
            }
        } else {
            fake_send(fd, "{\"error\":\"org.varlink.service.MethodNotFound\",\"parameters\":{}}");
        }
    }
    close(fd);
    return NULL;
}

static void *fake_accept(void *arg) {
    (void)arg;
    for (;;) {
        int fd = accept(fake_listener, NULL, NULL);
        if (fd < 0) return NULL;
        pthread_t thread;
        pthread_create(&thread, NULL, fake_connection, (void *)(intptr_t)fd);
        pthread_detach(thread);
    }
}

static adorch_client *fake_client(int reconnect_timeout_ms) {
    adorch_client_options options = ADORCH_CLIENT_OPTIONS_INIT;
    options.socket_path = fake_path;
    options.call_timeout_ms = 300;
    options.reconnect_timeout_ms = reconnect_timeout_ms;
    options.log = log_line;
    adorch_client *client = NULL;
    OK(adorch_client_new(&client, &options, error));
    return client;
}

struct async_reply {
    adorch_status status;
    int count;
};

static void on_async(void *u, adorch_status status, const char *reply, const adorch_error *error) {
    (void)reply;
    struct async_reply *r = u;
    printf("async reply %d %s\n", status, error ? error->message : "");
    r->status = status;
    r->count++;
}

static void fakepeer(const char *dir) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(fake_path, sizeof fake_path, "%s/fake.sock", dir);
    strcpy(addr.sun_path, fake_path);
    unlink(fake_path);
    fake_listener = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(fake_listener, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(fake_listener, 8) == 0, "listen on %s", fake_path);
    pthread_t acceptor;
    CHECK(pthread_create(&acceptor, NULL, fake_accept, NULL) == 0, "peer thread");
    adorch_client *client = fake_client(0);

    /* A reply that says more follow, to a call without more: its second reply is not the next call's. */
    adorch_ad *ad = NULL;
    adorch_slot_list *slots = NULL;
    FAILS(ADORCH_E_PROTOCOL, adorch_client_show(client, "continues", "u", NULL, &ad, error));
    OK(adorch_client_list_slots(client, &slots, error));
    CHECK(slots->count == 1, "ListSlots got %zu slots: another call's reply", slots->count);
    adorch_slot_list_free(slots);

    /* Replies that do not have the IDL's types are not a success with NULL fields. */
    FAILS(ADORCH_E_PROTOCOL, adorch_client_show(client, "id_number", "u", NULL, &ad, error));
    FAILS(ADORCH_E_PROTOCOL, adorch_client_show(client, "partial", "u", NULL, &ad, error));
    FAILS(ADORCH_E_PROTOCOL, adorch_client_show(client, "payload_string", "u", NULL, &ad, error));
    {
        /* A \u0000 no C string can carry: the Show's ad is lost to the app, and the error says so. */
        adorch_error e = ADORCH_ERROR_INIT;
        CHECK(adorch_client_show(client, "nul", "u", NULL, &ad, &e) == ADORCH_E_PROTOCOL && strstr(e.message, "\\u0000") &&
                  strstr(e.message, "may have taken effect"),
              "a \\u0000 in Show's reply: %s", e.message);
        adorch_error_clear(&e);
    }
    fake_bad_slots = 1;
    FAILS(ADORCH_E_PROTOCOL, adorch_client_list_slots(client, &slots, error));
    fake_bad_slots = 0;
    {
        /* A slot's capped is checked too: one without its retry_after_ms is not a hold of 0 ms. */
        adorch_error e = ADORCH_ERROR_INIT;
        CHECK(adorch_client_list_slots_for_user(client, "bad_capped", &slots, &e) == ADORCH_E_PROTOCOL &&
                  strstr(e.message, "slots[0].capped.retry_after_ms"),
              "a capped without retry_after_ms: %s", e.message);
        adorch_error_clear(&e);
    }

    /* An async call the peer never answers times out through the callback, from the polled fd. */
    struct async_reply reply = {ADORCH_OK, 0};
    OK(adorch_client_call_async(client, "io.adorch.Ads.Show", "{\"slot\":\"hang\"}", on_async, &reply, error));
    int64_t sent = now_ms(), start;
    while (reply.count == 0 && now_ms() - sent < 5000) {
        struct pollfd p = {.fd = adorch_client_get_fd(client), .events = adorch_client_get_events(client)};
        CHECK(poll(&p, 1, 5000) >= 0, "poll");
        OK(adorch_client_process(client, error));
    }
    int64_t waited = now_ms() - sent;
    CHECK(reply.count == 1 && reply.status == ADORCH_E_TIMEOUT && waited >= 250 && waited < 2000,
          "async reply: %d replies, status %d after %lld ms (call timeout 300)", reply.count, reply.status, (long long)waited);
    OK(adorch_client_list_slots(client, &slots, error)); /* not ADORCH_E_BUSY any more */
    adorch_slot_list_free(slots);
    printf("async call timed out after %lld ms\n", (long long)waited);

    /* An event that is not an Event ends the subscription with a protocol error, without subscribing again. */
    fake_bad_event = 1;
    OK(adorch_client_subscribe(client, NULL, 0, error));
    adorch_event *event = NULL;
    OK(adorch_client_next_event(client, 2000, &event, error));
    CHECK(strcmp(event->kind, "subscribed") == 0, "first event %s", event->kind);
    adorch_event_free(event);
    FAILS(ADORCH_E_PROTOCOL, adorch_client_next_event(client, 2000, &event, error));
    FAILS(ADORCH_E_BUSY, adorch_client_next_event(client, 0, &event, error));
    CHECK(fake_subscribes == 1, "subscribed %d times", (int)fake_subscribes);
    fake_bad_event = 0;

    /* A restart while waiting for a shown ad's reward: the ad is gone with the daemon, so the
     * wait ends (the ledger has no reward for it) instead of running out its timeout. */
    adorch_rewarded_ad *rewarded = NULL;
    adorch_shown_ad *shown = NULL;
    adorch_reward *reward = NULL;
    OK(adorch_rewarded_ad_new(client, "restart", &rewarded, error));
    OK(adorch_rewarded_ad_show(rewarded, "u", NULL, &shown, error));
    fake_restart_once = 1;
    int64_t asked = now_ms();
    FAILS(ADORCH_E_AD_NOT_VALID, adorch_shown_ad_wait_reward(shown, 10000, &reward, error));
    CHECK(now_ms() - asked < 3000, "wait_reward ended after %lld ms", (long long)(now_ms() - asked));
    adorch_shown_ad_free(shown);
    adorch_rewarded_ad_free(rewarded);
    adorch_client_free(client);

    /* A subscription whose daemon is gone for good gives up within its reconnect budget. */
    enum { BUDGET_MS = 1500 };
    client = fake_client(BUDGET_MS);
    fake_end_stream = 1;
    OK(adorch_client_subscribe(client, NULL, 0, error));
    int64_t lost = now_ms();
    OK(adorch_client_next_event(client, 2000, &event, error));
    adorch_event_free(event);
    FAILS(ADORCH_E_CONNECT, adorch_client_next_event(client, 10000, &event, error));
    int64_t gave_up = now_ms() - lost;
    CHECK(gave_up >= BUDGET_MS - 50 && gave_up <= BUDGET_MS + 300, "gave up after %lld ms of a %d ms budget", (long long)gave_up, BUDGET_MS);
    printf("the subscription gave up after %lld ms of its %d ms budget\n", (long long)gave_up, BUDGET_MS);
    /* With no daemon, an async call does not hold up the app's event loop for the backoff. */
    FAILS(ADORCH_E_CONNECTION_LOST, adorch_client_show(client, "bye", "u", NULL, &ad, error));
    start = now_ms();
    FAILS(ADORCH_E_CONNECT, adorch_client_call_async(client, "io.adorch.Ads.ListSlots", NULL, on_async, &reply, error));
    CHECK(now_ms() - start < 300, "call_async waited %lld ms for a daemon", (long long)(now_ms() - start));
    adorch_client_free(client);
    close(fake_listener);
    pthread_join(acceptor, NULL);
    printf("fakepeer: all passed\n");
}

/* ---- What the app passes ------------------------------------------------------------------------ */

static void arguments(void) {
    adorch_client *client = connect_client();
    /* Over the daemon's max_message_bytes (1 MiB by default): its refusal, at once, and sent once. */
    enum { BIG = 2000000 };
    char *big = malloc(BIG + 1);
    CHECK(big, "malloc");
    memset(big, 'u', BIG);
    big[BIG] = '\0';
    adorch_ad *ad = NULL;
    adorch_reward_list *rewards = NULL;
    int64_t start = now_ms();
    FAILS(ADORCH_E_VARLINK_INVALID_PARAMETER, adorch_client_show(client, "rewarded_main", big, NULL, &ad, error));
    FAILS(ADORCH_E_VARLINK_INVALID_PARAMETER, adorch_client_report(client, big, "click", error));
    FAILS(ADORCH_E_VARLINK_INVALID_PARAMETER, adorch_client_list_rewards(client, big, NULL, NULL, 0, &rewards, error));
    int64_t took = now_ms() - start;
    CHECK(calls_again == 0 && took < 3000, "%d resends, %lld ms", calls_again, (long long)took);
    printf("three oversized calls refused in %lld ms, none sent again\n", (long long)took);
    free(big);
    adorch_slot_list *slots = NULL;
    OK(adorch_client_list_slots(client, &slots, error));
    adorch_slot_list_free(slots);

    /* Strings that are not UTF-8 cannot be JSON: named, not dropped from the call. */
    const char *bad = "caf\xc3";
    adorch_reward_model model = {sizeof model, bad, 1, NULL};
    FAILS(ADORCH_E_ARGUMENT, adorch_client_show(client, "rewarded_main", "u", &model, &ad, error));
    model = (adorch_reward_model){sizeof model, NULL, 1, "\xed\xa0\x80"}; /* a surrogate */
    FAILS(ADORCH_E_ARGUMENT, adorch_client_show(client, "rewarded_main", "u", &model, &ad, error));
    FAILS(ADORCH_E_ARGUMENT, adorch_client_show(client, "rewarded_main", "\xc0\xaf", NULL, &ad, error)); /* overlong */
    FAILS(ADORCH_E_ARGUMENT, adorch_client_show(client, bad, "u", NULL, &ad, error));
    FAILS(ADORCH_E_ARGUMENT, adorch_client_report(client, "x", bad, error));
    FAILS(ADORCH_E_ARGUMENT, adorch_client_ack_reward(client, bad, error));
    FAILS(ADORCH_E_ARGUMENT, adorch_client_list_rewards(client, bad, NULL, NULL, 0, &rewards, error));
    adorch_event_list *events = NULL;
    const char *bad_slots[] = {"rewarded_main", bad}, *null_slots[] = {"rewarded_main", NULL};
    FAILS(ADORCH_E_ARGUMENT, adorch_client_list_events(client, bad_slots, 2, 0, &events, error));
    FAILS(ADORCH_E_ARGUMENT, adorch_client_list_events(client, null_slots, 2, 0, &events, error));
    FAILS(ADORCH_E_ARGUMENT, adorch_client_subscribe(client, bad_slots, 2, error));
    char *text = NULL;
    FAILS(ADORCH_E_ARGUMENT, adorch_client_call(client, "io.adorch.Ads.ListSlots\xff", NULL, &text, error));
    FAILS(ADORCH_E_ARGUMENT, adorch_client_get_interface_description(client, bad, &text, error));
    {
        adorch_error e = ADORCH_ERROR_INIT;
        adorch_client_show(client, "rewarded_main", "u", &(adorch_reward_model){sizeof model, bad, 1, NULL}, &ad, &e);
        CHECK(strstr(e.message, "reward.name") && strstr(e.message, "UTF-8"), "the message names the parameter: %s", e.message);
        adorch_error_clear(&e);
        adorch_client_list_events(client, null_slots, 2, 0, &events, &e);
        CHECK(strstr(e.message, "slots[1]"), "the message names the entry: %s", e.message);
        adorch_error_clear(&e);
    }
    OK(adorch_client_list_rewards(client, "\xc3\xbc-user \xf0\x9f\x8e\x81", NULL, NULL, 0, &rewards, error)); /* UTF-8 goes out */
    adorch_reward_list_free(rewards);

    /* Slots of the wrong format for an SDK object or helper, and socket paths no retry can fix. */
    adorch_rewarded_ad *rewarded = NULL;
    FAILS(ADORCH_E_ARGUMENT, adorch_rewarded_ad_new(client, "banner_main", &rewarded, error));
    FAILS(ADORCH_E_SLOT_NOT_FOUND, adorch_rewarded_ad_new(client, "no-such-slot", &rewarded, error));
    FAILS(ADORCH_E_ARGUMENT, adorch_banner_load(client, "native_main", 0, 0, &ad, error));
    adorch_ad_list *ads = NULL;
    FAILS(ADORCH_E_ARGUMENT, adorch_native_load(client, "banner_main", 3, &ads, error));
    adorch_client_options options = ADORCH_CLIENT_OPTIONS_INIT;
    options.log = log_line;
    adorch_client *nowhere = NULL;
    char long_path[200];
    memset(long_path, 'p', sizeof long_path - 1);
    long_path[0] = '/';
    long_path[sizeof long_path - 1] = '\0';
    start = now_ms();
    options.socket_path = "";
    FAILS(ADORCH_E_ARGUMENT, adorch_client_new(&nowhere, &options, error));
    options.socket_path = long_path;
    FAILS(ADORCH_E_ARGUMENT, adorch_client_new(&nowhere, &options, error));
    CHECK(now_ms() - start < 1000, "socket paths refused after %lld ms of retrying", (long long)(now_ms() - start));

    /* NULLs and the library's own error names. */
    {
        adorch_error e = ADORCH_ERROR_INIT;
        CHECK(!adorch_rewarded_ad_is_ready(NULL, &e) && e.code == ADORCH_E_ARGUMENT, "is_ready(NULL) fills the error: %d", e.code);
        adorch_error_clear(&e);
    }
    for (adorch_status code = ADORCH_E_DAEMON; code <= ADORCH_E_ENDED; code++)
        CHECK(adorch_error_code_from_name(adorch_error_name(code)) == code, "%s does not map back to %d", adorch_error_name(code), code);
    adorch_client_free(client);
    printf("arguments: all passed\n");
}

/* ---- Threads and callbacks -------------------------------------------------------------------------- */

struct racer {
    adorch_client *client;
    pthread_barrier_t *start;
    int ok, busy;
};

static void *race(void *arg) {
    struct racer *r = arg;
    pthread_barrier_wait(r->start);
    for (int i = 0; i < 300; i++) {
        adorch_slot_list *slots = NULL;
        adorch_error e = ADORCH_ERROR_INIT;
        adorch_status st = adorch_client_list_slots(r->client, &slots, &e);
        CHECK(st == ADORCH_OK || st == ADORCH_E_BUSY, "list_slots from two threads: %d %s", st, e.message);
        if (st == ADORCH_OK) r->ok++, adorch_slot_list_free(slots);
        else r->busy++;
        adorch_error_clear(&e);
    }
    return NULL;
}

struct inside {
    adorch_client *client;
    int events;
    adorch_status process, next_event, list_slots;
};

static void free_inside(void *u, const adorch_event *event) {
    struct inside *in = u;
    in->events++;
    CHECK(strcmp(event->kind, "subscribed") == 0, "the first event is %s", event->kind);
    adorch_event *next = NULL;
    adorch_slot_list *slots = NULL;
    in->process = adorch_client_process(in->client, NULL);
    in->next_event = adorch_client_next_event(in->client, 0, &next, NULL);
    in->list_slots = adorch_client_list_slots(in->client, &slots, NULL);
    adorch_slot_list_free(slots);
    adorch_client_free(in->client); /* freed once the process that runs this returns */
}

static void threads(void) {
    adorch_client *client = connect_client();
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    struct racer a = {client, &start, 0, 0}, b = {client, &start, 0, 0};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, race, &a) == 0 && pthread_create(&tb, NULL, race, &b) == 0, "threads");
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&start);
    CHECK(a.ok + b.ok > 0 && a.busy + b.busy > 0, "two threads: %d calls ok, %d refused busy", a.ok + b.ok, a.busy + b.busy);
    printf("two threads on one client: %d calls ok, %d refused as busy\n", a.ok + b.ok, a.busy + b.busy);

    /* Inside an event callback: no event processing, plain calls, and a free that waits for the way out. */
    struct inside in = {client, 0, -1, -1, -1};
    adorch_client_set_event_callback(client, free_inside, &in);
    OK(adorch_client_subscribe(client, NULL, 0, error));
    OK(adorch_client_process(client, error));
    CHECK(in.events == 1 && in.process == ADORCH_E_BUSY && in.next_event == ADORCH_E_BUSY && in.list_slots == ADORCH_OK,
          "inside the callback: %d events, process %d, next_event %d, list_slots %d", in.events, in.process, in.next_event, in.list_slots);
    printf("inside a callback: process and next_event busy, a plain call ok, free deferred\n");

    /* After a fork the child may not use the parent's client; the parent's goes on. */
    client = connect_client();
    OK(adorch_client_subscribe(client, NULL, 0, error));
    pid_t child = fork();
    if (child == 0) {
        adorch_slot_list *slots = NULL;
        adorch_status st = adorch_client_list_slots(client, &slots, NULL);
        adorch_client_free(client);
        _exit(st == ADORCH_E_ARGUMENT ? 0 : 1);
    }
    int status = -1;
    CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's call was refused");
    adorch_slot_list *slots = NULL;
    OK(adorch_client_list_slots(client, &slots, error));
    adorch_slot_list_free(slots);
    adorch_event *event = NULL;
    OK(adorch_client_next_event(client, 2000, &event, error));
    adorch_event_free(event);
    adorch_client_free(client);
    printf("fork: the child's call refused, the parent's client goes on\n");
    printf("threads: all passed\n");
}

/* Prints the socket the default rule picked, for SocketPathRuleTests: where the client connected,
 * or the path its connection error names (no retry: nothing listens there in that test). */
static void socket_path(void) {
    adorch_client_options options = ADORCH_CLIENT_OPTIONS_INIT;
    options.reconnect_timeout_ms = -1;
    options.log = log_line;
    adorch_client *client = NULL;
    adorch_error e = ADORCH_ERROR_INIT;
    if (adorch_client_new(&client, &options, &e) == ADORCH_OK) {
        printf("socket %s\n", adorch_client_socket_path(client));
        adorch_client_free(client);
        return;
    }
    CHECK(e.code == ADORCH_E_CONNECT, "expected ADORCH_E_CONNECT, got %d %s: %s", e.code, e.name, e.message);
    printf("error %s\n", e.message);
    adorch_error_clear(&e);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "basics") == 0) basics();
    else if (strcmp(mode, "nonblocking") == 0) nonblocking();
    else if (strcmp(mode, "errors") == 0 && argc > 2) errors(argv[2]);
    else if (strcmp(mode, "caps") == 0 && argc > 2) caps(argv[2]);
    else if (strcmp(mode, "restart") == 0) restart();
    else if (strcmp(mode, "brokenpeer") == 0 && argc > 2) brokenpeer(argv[2]);
    else if (strcmp(mode, "fakepeer") == 0 && argc > 2) fakepeer(argv[2]);
    else if (strcmp(mode, "arguments") == 0) arguments();
    else if (strcmp(mode, "threads") == 0) threads();
    else if (strcmp(mode, "socket-path") == 0) socket_path();
    else if (strcmp(mode, "privacy") == 0) privacy();
    else {
        fprintf(stderr, "usage: client-test basics|nonblocking|errors EMPTY_SLOT|caps PACED_SLOT|restart|brokenpeer DIR|fakepeer DIR|arguments|threads|socket-path|privacy\n");
        return 2;
    }
    return 0;
}
