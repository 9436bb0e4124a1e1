/*
 * sim — a simulated ad network for the demo, the tests and the benchmarks.
 *
 * Everything a real network does to a mediation host, on purpose and repeatably: latency,
 * no-fill, a real SDK's error codes (docs/rules.md, "Error taxonomy"), ad expiry, a separate
 * "media cached" moment, and misbehaviour on request. It also watches the host: every
 * object counts its loads and shows, and a second load or show of one object, or a show
 * of an unloaded one, is counted as a contract violation (visible in stats_json).
 *
 * Each waterfall entry configures it through its server parameter, space-separated
 * key=value tokens, all optional:
 *   fill=0.9                 share of answered requests that return an ad (default 1)
 *   latency_ms=20..80        load latency, uniform in the range, or one number (default 10..50)
 *   errors=-2:0.02,40020:0.01 that SDK's error codes and their probabilities (default none)
 *   ttl_s=1800               the ad's lifetime, reported as expires_in_s (default 3600)
 *   cached_ms=100            media cached this long after the load (default 0: at once)
 *   price=1.5                the eCPM reported in the payload (default 1.0)
 *   non_personalized_fill=0.8   ABI 1.4: a non-personalised load (request.privacy's class) fills
 *                            this share of what a personalised one does, as networks fill less
 *                            without a profile (default 1: as personalised, so a config that
 *                            says nothing of privacy runs as it did before 1.4, when every
 *                            viewer who set nothing is non-personalised); personalised loads
 *                            are never changed
 *   non_personalized_price=0.6  its price, as a share of price= (default 1)
 *   child_directed_fill=0.7  the same for a child-directed load (default 1)
 *   child_directed_price=0.5 (default 1)
 *   seed=42                  random seed, for repeatable runs (default 1)
 *   misbehave=never|twice|after_destroy|empty_payload|leak   break the contract (default none);
 *                            leak keeps every destroyed object's memory, as an SDK that
 *                            retains its ad objects does
 *   block_ms=3000            ad_load blocks the plugin queue this long, like a stuck SDK call
 *   tracks=1                 the payload says the plugin tracks impressions and clicks itself
 *                            (it then reports the impression itself once the ad is presented)
 *   give_up=1                a load whose latency would pass its deadline gives up instead,
 *                            reporting ADORCH_ERROR_TIMEOUT twice ADORCH_DEADLINE_MARGIN_MS
 *                            before it (the margin is the latest; its timer may run late)
 *   impression_twice=1       with tracks=1, the impression is reported twice (the host counts one)
 *   ad_id_trans_id=1         with reward=network, the trans_id is built from the ad id alone, as
 *                            a plugin written before ABI 1.3 might: it repeats across daemon runs
 *   show_fail=1              ad_show fails (docs/rules.md, "Show")
 *   dislike=1                after presenting, the viewer "dislikes" the ad, with reasons
 *   reward=network           rewarded ads: sim decides the reward itself, reporting it (with
 *                            its own trans_id, "sim-" and the request's load_uid) when told the
 *                            video completed; default host
 *   reward_delay_ms=N        with reward=network, the reward comes N ms after the complete, as a
 *                            network's server-side reward: also after the app's close, and even
 *                            once the ad is destroyed (a late reward the host must refuse)
 *   script=opt_in_complete   interactive sessions: the viewer's path through the choice card
 *                            (see "Interactive sessions" below; default opt_in_complete)
 *   step_ms=20               interactive sessions: time between two of the viewer's steps
 *   misbehave=segv|abort|spin|balloon|snoop   a fault at one call (with at=, which it needs):
 *                            segv dereferences a bad pointer (a real SIGSEGV); abort calls
 *                            abort(); spin takes sim's mutex and busy-loops holding it
 *                            forever, so the scheduler thread stops too; balloon allocates and
 *                            touches memory without end, and goes on asking when malloc fails,
 *                            until the process is killed; snoop, a compromised plugin, tries
 *                            open(2) on each snoop= path, logs each result as a warning line
 *                            `sim snoop: open(/path) = EACCES` (the errno's name, or `ok`),
 *                            and then goes on as usual
 *   at=load:3                the call that misbehaves: load, show, notify or destroy, and
 *                            optionally which one (default 1: the first). Counted per server
 *                            parameter, in this process: the 3rd ad_load of an object made
 *                            with this parameter (other entries' loads do not count); a
 *                            restarted process (or deinit and init) counts from 0 again, so
 *                            it fills a couple of ads, then fails again
 *   snoop=/var/lib/adorch,/etc/adorch/reward.key   misbehave=snoop: the paths to try, comma-
 *                            separated, without spaces
 *
 * On a show, sim reports will_present and then presented, as an SDK's delegate would.
 *
 * Interactive sessions (format 7; docs/rules.md, "Interactive sessions") play a renderer's
 * choice card with a scripted viewer. The
 * fetch (ad_load) takes latency_ms and reports loaded (fetch_complete) then ads_available;
 * on start (ad_show) the script's first step comes at once and each next one step_ms later.
 * PAUSE holds the script and RESUME continues it, step_ms later. Scripts:
 *   opt_in_complete  started, opt_in, ad_free_pod, completed
 *   opt_out          started, opt_out (user_initiated true), completed
 *   countdown        started, opt_out (user_initiated false: the countdown ran out), completed
 *   cancel_opt_in    started, opt_in, user_cancel, opt_in, ad_free_pod, completed
 *   popup            started, opt_in, popup_website, ad_free_pod, completed
 *   skip_card        started, skip_card_shown, ad_free_pod, completed (a later mid-roll)
 *   error            started, error
 *   no_ads           the fetch fails with no fill (the host's no_ads_available)
 *   hang_fetch       the fetch never completes (for the host's fetch timeout)
 *   hang_start       start is accepted but nothing is ever shown (the start timeout)
 * misbehave=twice sends a second terminal event after the first.
 *
 * The plugin's own config (init's config_json) understands {"fail_init": true}: init then
 * fails, to show how the host treats a plugin that cannot start. {"record_loads": "/path"}
 * appends one JSON line per ad_create to that file (made 0600), with what the request said of
 * the load's privacy (ABI 1.4), as received: {"load_uid", "slot", "format", "privacy": null for
 * a host older than 1.4, else {"class", "gdpr", "tc_string", "gpp", "gpp_sid", "us_privacy",
 * "coppa", "under_age_of_consent", "non_personalized", "max_content_rating"}}; an interstitial's
 * or a rewarded ad's payload names its load_uid, so a shown ad is found in the record. It is test
 * tooling, for the tests and benchmarks to see what reached the network: it holds consent
 * strings in full, so no production config names it. It also takes misbehave,
 * at and snoop as strings, as above, for every entry of the plugin; there at=init works too
 * (init has no server parameter), and the count is of all such calls in this process, e.g.
 * {"misbehave": "segv", "at": "init"} or {"misbehave": "abort", "at": "show:2"}.
 *
 * Threads: ad_* run on the host's plugin queue (ad_show on any host thread: sim declares
 * ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD); completions fire from one scheduler
 * thread started by init and joined by deinit. One mutex guards all state, and host
 * callbacks are made while holding it, so a destroyed ad can never be reported (unless
 * misbehave=after_destroy asks for exactly that). That relies on plugin.h's rule 5: a host
 * that called back into sim from inside a callback would deadlock on that mutex, so every
 * entry point first checks that its thread is not inside one, and counts it if it is
 * (stats_json's "reentrant_calls").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strerrorname_np: snoop names the errno, as the log line promises */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "adorch/plugin.h"

enum misbehaviour { MB_NONE, MB_NEVER, MB_TWICE, MB_AFTER_DESTROY, MB_EMPTY_PAYLOAD, MB_LEAK };

/* The faults of misbehave= that strike at one chosen call, rather than bend the contract. */
enum fault_kind { FAULT_NONE, FAULT_SEGV, FAULT_ABORT, FAULT_SPIN, FAULT_BALLOON, FAULT_SNOOP };
static const char *const FAULT_NAMES[] = {
    [FAULT_SEGV] = "segv", [FAULT_ABORT] = "abort", [FAULT_SPIN] = "spin", [FAULT_BALLOON] = "balloon", [FAULT_SNOOP] = "snoop"};

enum sim_call { CALL_INIT, CALL_LOAD, CALL_SHOW, CALL_NOTIFY, CALL_DESTROY, CALL_KINDS };
static const char *const CALL_NAMES[CALL_KINDS] = {"init", "load", "show", "notify", "destroy"};

#define SIM_SNOOP_CHARS 1024

typedef struct sim_fault {
    enum fault_kind kind;
    enum sim_call at;
    uint64_t nth; /* strikes at the nth such call, counted from 1 */
    char snoop[SIM_SNOOP_CHARS]; /* FAULT_SNOOP: the paths, comma-separated */
} sim_fault;

/* One step of a scripted viewer: an event and its detail (NULL: none; "time" for
 * completed: the time spent, computed when it happens). */
typedef struct sim_step {
    uint32_t event;
    const char *detail;
} sim_step;

#define SIM_CAMPAIGN "{\"campaign_name\":\"Sim Coffee - Interactive Ad #1 - Q4\"}"
#define SIM_OPT_IN "{\"campaign_name\":\"Sim Coffee - Interactive Ad #1 - Q4\",\"ad_id\":4242}"
#define SIM_TIME "time"

static const sim_step SCRIPT_OPT_IN_COMPLETE[] = {{ADORCH_EVENT_STARTED, SIM_CAMPAIGN}, {ADORCH_EVENT_OPT_IN, SIM_OPT_IN},
    {ADORCH_EVENT_AD_FREE_POD, NULL}, {ADORCH_EVENT_COMPLETED, SIM_TIME}, {0, NULL}};
static const sim_step SCRIPT_OPT_OUT[] = {{ADORCH_EVENT_STARTED, SIM_CAMPAIGN},
    {ADORCH_EVENT_OPT_OUT, "{\"user_initiated\":true}"}, {ADORCH_EVENT_COMPLETED, SIM_TIME}, {0, NULL}};
static const sim_step SCRIPT_COUNTDOWN[] = {{ADORCH_EVENT_STARTED, SIM_CAMPAIGN},
    {ADORCH_EVENT_OPT_OUT, "{\"user_initiated\":false}"}, {ADORCH_EVENT_COMPLETED, SIM_TIME}, {0, NULL}};
static const sim_step SCRIPT_CANCEL_OPT_IN[] = {{ADORCH_EVENT_STARTED, SIM_CAMPAIGN}, {ADORCH_EVENT_OPT_IN, SIM_OPT_IN},
    {ADORCH_EVENT_USER_CANCEL, NULL}, {ADORCH_EVENT_OPT_IN, SIM_OPT_IN}, {ADORCH_EVENT_AD_FREE_POD, NULL},
    {ADORCH_EVENT_COMPLETED, SIM_TIME}, {0, NULL}};
static const sim_step SCRIPT_POPUP[] = {{ADORCH_EVENT_STARTED, SIM_CAMPAIGN}, {ADORCH_EVENT_OPT_IN, SIM_OPT_IN},
    {ADORCH_EVENT_POPUP_WEBSITE, "{\"url\":\"https://sim.invalid/landing\"}"}, {ADORCH_EVENT_AD_FREE_POD, NULL},
    {ADORCH_EVENT_COMPLETED, SIM_TIME}, {0, NULL}};
static const sim_step SCRIPT_SKIP_CARD[] = {{ADORCH_EVENT_STARTED, SIM_CAMPAIGN}, {ADORCH_EVENT_SKIP_CARD_SHOWN, NULL},
    {ADORCH_EVENT_AD_FREE_POD, NULL}, {ADORCH_EVENT_COMPLETED, SIM_TIME}, {0, NULL}};
static const sim_step SCRIPT_ERROR[] = {{ADORCH_EVENT_STARTED, SIM_CAMPAIGN},
    {ADORCH_EVENT_ERROR, "{\"message\":\"sim: the renderer failed on purpose (script=error)\"}"}, {0, NULL}};
static const sim_step SCRIPT_NONE[] = {{0, NULL}};

static const struct {
    const char *name;
    const sim_step *steps;
} SCRIPTS[] = {
    {"opt_in_complete", SCRIPT_OPT_IN_COMPLETE}, {"opt_out", SCRIPT_OPT_OUT}, {"countdown", SCRIPT_COUNTDOWN},
    {"cancel_opt_in", SCRIPT_CANCEL_OPT_IN}, {"popup", SCRIPT_POPUP}, {"skip_card", SCRIPT_SKIP_CARD},
    {"error", SCRIPT_ERROR}, {"no_ads", SCRIPT_NONE}, {"hang_fetch", SCRIPT_NONE}, {"hang_start", SCRIPT_NONE},
};

#define SIM_MAX_ERRORS 16
#define SIM_MAX_JOBS_PER_AD 8

typedef struct sim_config {
    struct sim_config *next;
    char *server_parameter; /* the key this config was parsed from */
    char parse_error[160];  /* non-empty: every load with this parameter fails with it */
    double fill;
    uint32_t latency_lo_ms, latency_hi_ms;
    int n_errors;
    int64_t error_codes[SIM_MAX_ERRORS];
    double error_probs[SIM_MAX_ERRORS];
    uint32_t ttl_s, cached_ms;
    double price;
    /* ABI 1.4: what a load of each class fills and is paid, as shares of fill and price
     * (index: an adorch_privacy_class; personalised and "no privacy given" stay 1). */
    double class_fill[4], class_price[4];
    uint64_t seed;
    enum misbehaviour misbehave;
    sim_fault fault;
    uint64_t calls[CALL_KINDS]; /* calls on this config's objects, what its fault counts */
    uint32_t block_ms;
    int tracks, show_fail, dislike, reward_by_network, give_up, impression_twice, ad_id_trans_id;
    const char *script; /* a name from SCRIPTS */
    const sim_step *steps;
    uint32_t step_ms;
    /* reward_delay_ms: its reward's delay after the complete, -1 for sim's own 2 ms */
    int64_t reward_delay_ms;
    uint64_t creates; /* objects made with this config: each one's random stream */
} sim_config;

typedef enum job_kind { JOB_LOADED, JOB_FAILED, JOB_MEDIA_CACHED, JOB_STRAY_LOADED, JOB_EVENT, JOB_STEP } job_kind;

struct sim_ad;

typedef struct sim_job {
    uint64_t due_ns;
    job_kind kind;
    adorch_ad_id ad_id;
    struct sim_ad *owner; /* NULL for a stray job that outlives its ad on purpose */
    int cancelled;
    int32_t error; /* JOB_FAILED: the error; JOB_EVENT: the event; JOB_LOADED: an event to
                    * report right after loaded, or 0 */
    int64_t network_code;
    char *text; /* payload for JOB_LOADED, message for JOB_FAILED */
} sim_job;

/* Power of two: 64 KiB of index, a chain grows by one entry per 8,192 live objects. */
#define SIM_LIVE_BUCKETS 8192

typedef struct sim_ad {
    struct sim_ad *prev, *next; /* the list of live objects, for deinit and stats */
    struct sim_ad *bucket_next; /* the live index's chain: recognises a stale pointer without touching it */
    adorch_ad_id id;
    sim_config *config;
    uint32_t format;
    uint32_t count, width, height;
    int test_mode;
    char variant[16];
    char targeting[2048]; /* echoed in banner payloads, so tests can see what reached the network */
    char slot_id[96];
    char creative_url[512]; /* interactive: echoed in the fetch's payload, JSON-escaped */
    char slot_type[16];
    char load_uid[33]; /* ABI 1.3: the request's, for a trans_id unique across host runs; "" before */
    uint32_t privacy_class; /* ABI 1.4: the request's adorch_privacy_class; 0 from an older host */
    uint64_t deadline_ns;
    uint64_t rng;
    uint32_t loads, shows;
    int loaded; /* the host was told loaded */
    /* Interactive sessions: the next step of the script, whether it is paused, the pending
     * step job (to cancel on pause) and the time on screen so far. */
    size_t step;
    int running, paused;
    struct sim_job *step_job;
    uint64_t shown_ns, active_ns, active_since_ns;
    sim_job *jobs[SIM_MAX_JOBS_PER_AD];
} sim_ad;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    int running;
    const adorch_host *host;
    sim_config *configs;
    sim_ad *live;
    sim_ad *retained; /* misbehave=leak: destroyed objects the "SDK" keeps until deinit */
    sim_ad *buckets[SIM_LIVE_BUCKETS]; /* live objects by address, so is_live costs O(1), not O(live) */
    sim_job **heap; /* min-heap of jobs by due_ns */
    size_t heap_len, heap_cap;
    char stats[1536];
    int record_fd; /* {"record_loads": path}: each load's privacy, a line each; -1 none */
    sim_fault fault; /* the plugin config's, for every entry */
    uint64_t calls[CALL_KINDS]; /* in this process, never reset: what the plugin config's fault counts */
    void *ballast; /* misbehave=balloon: every chunk, linked through its first word, so none can be optimised away */
    struct {
        uint64_t creates, loads, shows, notifies, destroys, live;
        uint64_t loaded_reports, failed_reports, events_reported;
        uint64_t second_loads, second_shows, show_unloaded, stale_objects;
        uint64_t misbehaviours, ballooned_bytes;
        uint64_t class_loads[4]; /* ad_create by the request's privacy class (0: none given) */
    } n;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .record_fd = -1};

/* Set on a thread while it is inside a host callback (plugin.h, rule 5: the host never calls
 * back into the plugin from one); entry points count a call made under it and refuse it
 * rather than deadlock on g.lock, which that thread holds. */
static __thread int in_host_callback;
static uint64_t reentrant_calls; /* atomic: counted without g.lock, which may be held */

static int reentered(void) {
    if (!in_host_callback) return 0;
    __atomic_add_fetch(&reentrant_calls, 1, __ATOMIC_RELAXED);
    return 1;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64: small, fast and good enough for a simulation. */
static uint64_t rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *state) {
    return (double)(rng_next(state) >> 11) / (double)(1ull << 53);
}

/* ---- configuration ---------------------------------------------------------------- */

static int parse_u32(const char *s, uint32_t *out) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v > UINT32_MAX) return -1;
    *out = (uint32_t)v;
    return 0;
}

static int parse_unit(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0.0 && v <= 1.0)) return -1;
    *out = v;
    return 0;
}

/* misbehave= (a fault's name), at= or snoop=, from the server parameter or the plugin config:
 * 0 taken, -1 a bad value, 1 none of these (misbehave= then names a contract breach, or nothing). */
static int parse_fault_key(sim_fault *f, const char *key, const char *val) {
    if (!strcmp(key, "misbehave")) {
        f->kind = FAULT_NONE;
        for (int k = FAULT_SEGV; k <= FAULT_SNOOP; k++)
            if (!strcmp(val, FAULT_NAMES[k])) f->kind = (enum fault_kind)k;
        return f->kind == FAULT_NONE;
    }
    if (!strcmp(key, "at")) {
        const char *colon = strchr(val, ':');
        size_t len = colon ? (size_t)(colon - val) : strlen(val);
        uint32_t nth = 1;
        if (colon && (parse_u32(colon + 1, &nth) || nth == 0)) return -1;
        for (int call = 0; call < CALL_KINDS; call++)
            if (strlen(CALL_NAMES[call]) == len && !strncmp(val, CALL_NAMES[call], len)) {
                f->at = (enum sim_call)call;
                f->nth = nth;
                return 0;
            }
        return -1;
    }
    if (!strcmp(key, "snoop")) {
        if (!*val || strlen(val) >= sizeof f->snoop) return -1;
        strcpy(f->snoop, val);
        return 0;
    }
    return 1;
}

/* What is wrong with a fault's keys taken together, or NULL. at=init only in the plugin config. */
static const char *fault_problem(const sim_fault *f, int init_possible) {
    if (f->kind == FAULT_NONE)
        return f->nth || f->snoop[0] ? "at and snoop go with misbehave=segv, abort, spin, balloon or snoop" : NULL;
    if (!f->nth) return "this misbehave needs at: init, load, show, notify or destroy";
    if (f->at == CALL_INIT && !init_possible) return "at=init needs the plugin config: init has no server parameter";
    if (f->kind == FAULT_SNOOP && !f->snoop[0]) return "misbehave=snoop needs snoop=PATH,...";
    if (f->kind != FAULT_SNOOP && f->snoop[0]) return "snoop goes with misbehave=snoop";
    return NULL;
}

/* The server parameter's 0/1 keys, or NULL for another key. */
static int *flag_for(sim_config *c, const char *key) {
    if (!strcmp(key, "tracks")) return &c->tracks;
    if (!strcmp(key, "show_fail")) return &c->show_fail;
    if (!strcmp(key, "dislike")) return &c->dislike;
    if (!strcmp(key, "give_up")) return &c->give_up;
    if (!strcmp(key, "impression_twice")) return &c->impression_twice;
    if (!strcmp(key, "ad_id_trans_id")) return &c->ad_id_trans_id;
    return NULL;
}

/* The server parameter's per-class shares (non_personalized_fill and the rest), or NULL. */
static double *class_share_for(sim_config *c, const char *key) {
    if (!strcmp(key, "non_personalized_fill")) return &c->class_fill[ADORCH_PRIVACY_NON_PERSONALIZED];
    if (!strcmp(key, "non_personalized_price")) return &c->class_price[ADORCH_PRIVACY_NON_PERSONALIZED];
    if (!strcmp(key, "child_directed_fill")) return &c->class_fill[ADORCH_PRIVACY_CHILD_DIRECTED];
    if (!strcmp(key, "child_directed_price")) return &c->class_price[ADORCH_PRIVACY_CHILD_DIRECTED];
    return NULL;
}

static void parse_config(sim_config *c, const char *text) {
    c->fill = 1.0;
    c->latency_lo_ms = 10;
    c->latency_hi_ms = 50;
    c->ttl_s = 3600;
    c->price = 1.0;
    for (int k = 0; k < 4; k++) c->class_fill[k] = c->class_price[k] = 1.0;
    c->seed = 1;
    c->script = SCRIPTS[0].name;
    c->steps = SCRIPTS[0].steps;
    c->step_ms = 20;
    c->reward_delay_ms = -1;
    char *copy = strdup(text), *save = NULL;
    for (char *tok = strtok_r(copy, " \t;", &save); tok; tok = strtok_r(NULL, " \t;", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            snprintf(c->parse_error, sizeof c->parse_error, "token '%s' is not key=value", tok);
            break;
        }
        *eq = '\0';
        const char *key = tok, *val = eq + 1;
        int bad = 0, fault = parse_fault_key(&c->fault, key, val);
        if (!strcmp(key, "misbehave")) c->misbehave = MB_NONE;
        if (fault <= 0) {
            bad = fault;
        } else if (!strcmp(key, "fill")) {
            bad = parse_unit(val, &c->fill);
        } else if (class_share_for(c, key)) {
            bad = parse_unit(val, class_share_for(c, key));
        } else if (!strcmp(key, "latency_ms")) {
            char *dots = strstr(val, "..");
            if (dots) {
                *dots = '\0';
                bad = parse_u32(val, &c->latency_lo_ms) || parse_u32(dots + 2, &c->latency_hi_ms) ||
                      c->latency_hi_ms < c->latency_lo_ms;
            } else {
                bad = parse_u32(val, &c->latency_lo_ms);
                c->latency_hi_ms = c->latency_lo_ms;
            }
        } else if (!strcmp(key, "ttl_s")) {
            bad = parse_u32(val, &c->ttl_s);
        } else if (!strcmp(key, "cached_ms")) {
            bad = parse_u32(val, &c->cached_ms);
        } else if (!strcmp(key, "price")) {
            char *end;
            c->price = strtod(val, &end);
            bad = end == val || *end || c->price < 0;
        } else if (!strcmp(key, "seed")) {
            char *end;
            c->seed = strtoull(val, &end, 10);
            bad = end == val || *end;
        } else if (!strcmp(key, "errors")) {
            char *save2 = NULL;
            char *list = strdup(val);
            for (char *e = strtok_r(list, ",", &save2); e && !bad; e = strtok_r(NULL, ",", &save2)) {
                char *colon = strchr(e, ':'), *end;
                if (!colon || c->n_errors == SIM_MAX_ERRORS) {
                    bad = 1;
                    break;
                }
                *colon = '\0';
                c->error_codes[c->n_errors] = strtoll(e, &end, 10);
                bad = end == e || *end || parse_unit(colon + 1, &c->error_probs[c->n_errors]);
                c->n_errors++;
            }
            free(list);
        } else if (!strcmp(key, "script")) {
            bad = 1;
            for (size_t i = 0; i < sizeof SCRIPTS / sizeof SCRIPTS[0]; i++)
                if (!strcmp(val, SCRIPTS[i].name)) {
                    c->script = SCRIPTS[i].name;
                    c->steps = SCRIPTS[i].steps;
                    bad = 0;
                }
        } else if (!strcmp(key, "step_ms")) {
            bad = parse_u32(val, &c->step_ms);
        } else if (!strcmp(key, "reward_delay_ms")) {
            uint32_t v = 0;
            bad = parse_u32(val, &v);
            c->reward_delay_ms = v;
        } else if (!strcmp(key, "block_ms")) {
            bad = parse_u32(val, &c->block_ms);
        } else if (flag_for(c, key)) {
            uint32_t v = 0;
            bad = parse_u32(val, &v) || v > 1;
            *flag_for(c, key) = (int)v;
        } else if (!strcmp(key, "reward")) {
            if (!strcmp(val, "network")) c->reward_by_network = 1;
            else if (!strcmp(val, "host")) c->reward_by_network = 0;
            else bad = 1;
        } else if (!strcmp(key, "misbehave")) {
            if (!strcmp(val, "never")) c->misbehave = MB_NEVER;
            else if (!strcmp(val, "twice")) c->misbehave = MB_TWICE;
            else if (!strcmp(val, "after_destroy")) c->misbehave = MB_AFTER_DESTROY;
            else if (!strcmp(val, "empty_payload")) c->misbehave = MB_EMPTY_PAYLOAD;
            else if (!strcmp(val, "leak")) c->misbehave = MB_LEAK;
            else if (strcmp(val, "none")) bad = 1;
        } else {
            snprintf(c->parse_error, sizeof c->parse_error, "unknown key '%s'", key);
            break;
        }
        if (bad) {
            snprintf(c->parse_error, sizeof c->parse_error, "bad value for '%s'", key);
            break;
        }
    }
    free(copy);
    const char *problem = c->parse_error[0] ? NULL : fault_problem(&c->fault, 0);
    if (problem) snprintf(c->parse_error, sizeof c->parse_error, "%s", problem);
}

/* Configs live until deinit: an entry's parameter rarely changes, and keeping each one
 * keeps its random stream going across loads. Called with the lock held. */
static sim_config *config_for(const char *server_parameter) {
    for (sim_config *c = g.configs; c; c = c->next)
        if (!strcmp(c->server_parameter, server_parameter)) return c;
    sim_config *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->server_parameter = strdup(server_parameter);
    parse_config(c, server_parameter);
    c->next = g.configs;
    g.configs = c;
    return c;
}

/* A real SDK's error codes onto the host's taxonomy (docs/rules.md, "Error taxonomy"). */
static int32_t host_error_for(int64_t code) {
    switch (code) {
    case 20001: case -3: return ADORCH_ERROR_NO_FILL;
    case -2: return ADORCH_ERROR_NETWORK;
    case 10002: return ADORCH_ERROR_TIMEOUT;
    case 40020: return ADORCH_ERROR_RATE_LIMITED;
    case 10001: case 40004: case 40005: case 40006: case 40007: case 40008: case 40016:
        return ADORCH_ERROR_INVALID_REQUEST;
    default: return ADORCH_ERROR_INTERNAL;
    }
}

static const char *message_for(int64_t code) {
    switch (code) {
    case 20001: return "no ads";
    case -3: return "parsed data has no ads";
    case -2: return "network request failed";
    case -1: return "parsing failed";
    case 10001: return "parameter error";
    case 10002: return "timeout";
    case 40004: return "missing ad slot description";
    case 40006: return "the ad slot ID is invalid";
    case 40020: return "the ad space exceeds its daily request limit";
    case 50001: return "ad server error";
    default: return "simulated error";
    }
}

/* ---- faults: misbehave=segv|abort|spin|balloon|snoop ---------------------------------- */

/* The string value of "key" in the plugin config, a flat JSON object: 0 found, 1 absent, -1
 * not a plain string that fits (these values are words and paths: no escapes to undo). */
static int json_string_of(const char *json, const char *key, char *out, size_t size) {
    char quoted[32];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    const char *p = json;
    /* The key is the quoted word a colon follows: the same word as a value ("snoop") is not. */
    do {
        if (!p || !(p = strstr(p, quoted))) return 1;
        p += strlen(quoted);
        p += strspn(p, " \t\r\n");
    } while (*p != ':');
    p++;
    p += strspn(p, " \t\r\n");
    if (*p++ != '"') return -1;
    const char *end = strchr(p, '"');
    if (!end || memchr(p, '\\', (size_t)(end - p)) || (size_t)(end - p) >= size) return -1;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    return 0;
}

/* Never returns. The lock is let go, so stats_json can show the bytes grow; the memory never is. */
__attribute__((noreturn)) static void balloon(void) {
    enum { CHUNK = 1 << 20 };
    pthread_mutex_unlock(&g.lock);
    for (;;) {
        void **chunk = malloc(CHUNK);
        if (!chunk) continue; /* the leak never stops: ask again, until the process is killed */
        memset(chunk, 0xa5, CHUNK); /* touched: resident, not merely reserved */
        pthread_mutex_lock(&g.lock);
        *chunk = g.ballast;
        g.ballast = chunk;
        g.n.ballooned_bytes += CHUNK;
        pthread_mutex_unlock(&g.lock);
    }
}

/* The compromised plugin: what it could open, one warning line per path. Called with the lock held. */
static void snoop(const char *paths) {
    char list[SIM_SNOOP_CHARS], *save = NULL;
    snprintf(list, sizeof list, "%s", paths);
    for (char *path = strtok_r(list, ",", &save); path; path = strtok_r(NULL, ",", &save)) {
        /* O_NONBLOCK: a FIFO among the paths must not hang the call. */
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC), err = errno;
        char result[32] = "ok";
        if (fd >= 0) close(fd);
        else if (strerrorname_np(err)) snprintf(result, sizeof result, "%s", strerrorname_np(err));
        else snprintf(result, sizeof result, "errno %d", err);
        char line[SIM_SNOOP_CHARS + 64];
        snprintf(line, sizeof line, "sim snoop: open(%s) = %s", path, result);
        g.host->log(g.host, ADORCH_LOG_WARNING, line);
    }
}

/* `f` strikes if this is its call, the nth time round (`calls` counts them). Called with the
 * lock held; returns, with it held, only from snoop. */
static void strike(const sim_fault *f, enum sim_call call, uint64_t calls) {
    if (f->kind == FAULT_NONE || f->at != call || calls != f->nth) return;
    g.n.misbehaviours++;
    switch (f->kind) {
    case FAULT_SEGV:
        /* A store through a bad pointer, as a buggy SDK makes: the kernel's SIGSEGV, not raise(). */
        {
            int *volatile bad = (int *)(uintptr_t)16; /* volatile: no compiler sees through it */
            *bad = 1;
        }
        break;
    case FAULT_ABORT:
        abort();
    case FAULT_SPIN:
        /* The lock stays held: every other call, and the scheduler thread, wait on it for good. */
        for (volatile uint64_t spins = 0;; spins++) {}
    case FAULT_BALLOON:
        balloon();
    case FAULT_SNOOP:
        snoop(f->snoop);
        break;
    case FAULT_NONE:
        break;
    }
}

/* Counts a call of this kind, per process and per config, and lets a fault waiting for it
 * strike. Called with the lock held. */
static void strike_at(enum sim_call call, sim_config *c) {
    strike(&g.fault, call, ++g.calls[call]);
    if (c && !c->parse_error[0]) strike(&c->fault, call, ++c->calls[call]);
}

/* ---- the scheduler ---------------------------------------------------------------- */

static void heap_push(sim_job *job) {
    if (g.heap_len == g.heap_cap) {
        size_t cap = g.heap_cap ? g.heap_cap * 2 : 64;
        sim_job **grown = realloc(g.heap, cap * sizeof *grown);
        if (!grown) abort();
        g.heap = grown;
        g.heap_cap = cap;
    }
    size_t i = g.heap_len++;
    while (i > 0 && g.heap[(i - 1) / 2]->due_ns > job->due_ns) {
        g.heap[i] = g.heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    g.heap[i] = job;
}

static sim_job *heap_pop(void) {
    sim_job *top = g.heap[0], *last = g.heap[--g.heap_len];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= g.heap_len) break;
        if (child + 1 < g.heap_len && g.heap[child + 1]->due_ns < g.heap[child]->due_ns) child++;
        if (g.heap[child]->due_ns >= last->due_ns) break;
        g.heap[i] = g.heap[child];
        i = child;
    }
    if (g.heap_len) g.heap[i] = last;
    return top;
}

/* Called with the lock held. */
static sim_job *schedule(sim_ad *owner, adorch_ad_id id, job_kind kind, uint64_t delay_ms, int32_t error,
                     int64_t network_code, const char *text) {
    sim_job *job = calloc(1, sizeof *job);
    if (!job) abort();
    job->due_ns = now_ns() + delay_ms * 1000000ull;
    job->kind = kind;
    job->ad_id = id;
    job->owner = owner;
    job->error = error;
    job->network_code = network_code;
    job->text = text ? strdup(text) : NULL;
    if (owner) {
        int kept = 0;
        for (int i = 0; i < SIM_MAX_JOBS_PER_AD && !kept; i++)
            if (!owner->jobs[i]) {
                owner->jobs[i] = job;
                kept = 1;
            }
        /* A job its ad cannot cancel must not point at it: the ad may be freed first. */
        if (!kept) job->owner = NULL;
    }
    heap_push(job);
    pthread_cond_signal(&g.wake);
    return job;
}

/* The viewer's next step. A job its ad had no room to keep runs unowned and is freed when
 * done, so step_job must not point at it (a later pause would write to freed memory).
 * Called with the lock held. */
static sim_job *schedule_step(sim_ad *ad, uint64_t delay_ms) {
    sim_job *job = schedule(ad, ad->id, JOB_STEP, delay_ms, 0, 0, NULL);
    return job->owner ? job : NULL;
}

static void detach_job(sim_job *job) {
    if (!job->owner) return;
    for (int i = 0; i < SIM_MAX_JOBS_PER_AD; i++)
        if (job->owner->jobs[i] == job) job->owner->jobs[i] = NULL;
}

/* Takes a pending job back: it stays in the heap, cancelled and owned by no ad. */
static void cancel_job(sim_ad *ad, sim_job *job) {
    for (int i = 0; i < SIM_MAX_JOBS_PER_AD; i++)
        if (ad->jobs[i] == job) ad->jobs[i] = NULL;
    job->cancelled = 1;
    job->owner = NULL;
}

static int is_terminal(uint32_t event) {
    return event == ADORCH_EVENT_COMPLETED || event == ADORCH_EVENT_ERROR || event == ADORCH_EVENT_NO_ADS_AVAILABLE;
}

/* The scripted viewer's next step; the one after it is scheduled unless paused or done.
 * Called with the lock held. */
static void run_step(sim_ad *ad) {
    const sim_step *step = &ad->config->steps[ad->step];
    if (!step->event) return;
    ad->step++;
    char detail[64];
    const char *text = step->detail;
    if (text && !strcmp(text, SIM_TIME)) {
        uint64_t active = ad->active_ns + (now_ns() - ad->active_since_ns);
        snprintf(detail, sizeof detail, "{\"time_spent_s\":%" PRIu64 "}", (uint64_t)active / 1000000000u);
        text = detail;
    }
    g.n.events_reported++;
    g.host->event(g.host, ad->id, step->event, text);
    if (is_terminal(step->event)) {
        ad->running = 0;
        if (ad->config->misbehave == MB_TWICE) {
            g.n.misbehaviours++; /* a second terminal event, which the host must ignore */
            schedule(NULL, ad->id, JOB_EVENT, 2, ADORCH_EVENT_COMPLETED, 0, "{\"time_spent_s\":0}");
        }
    } else if (!ad->paused) {
        ad->step_job = schedule_step(ad, ad->config->step_ms);
    }
}

static void run_job(sim_job *job) {
    const adorch_host *h = g.host;
    in_host_callback = 1;
    switch (job->kind) {
    case JOB_LOADED:
    case JOB_STRAY_LOADED:
        if (job->owner) job->owner->loaded = 1;
        g.n.loaded_reports++;
        h->loaded(h, job->ad_id, job->text ? job->text : "");
        if (job->error) { /* an event that follows the load at once (interactive: ads_available) */
            g.n.events_reported++;
            h->event(h, job->ad_id, (uint32_t)job->error, NULL);
        }
        break;
    case JOB_FAILED:
        g.n.failed_reports++;
        h->failed(h, job->ad_id, job->error, job->network_code, job->text ? job->text : "");
        break;
    case JOB_MEDIA_CACHED:
        g.n.events_reported++;
        h->event(h, job->ad_id, ADORCH_EVENT_MEDIA_CACHED, NULL);
        break;
    case JOB_EVENT: /* the event in error, its detail (a JSON object or NULL) in text */
        g.n.events_reported++;
        h->event(h, job->ad_id, (uint32_t)job->error, job->text);
        break;
    case JOB_STEP:
        if (job->owner) {
            job->owner->step_job = NULL;
            run_step(job->owner);
        }
        break;
    }
    in_host_callback = 0;
}

static void *scheduler_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g.lock);
    while (g.running) {
        if (g.heap_len == 0) {
            pthread_cond_wait(&g.wake, &g.lock);
            continue;
        }
        uint64_t now = now_ns(), due = g.heap[0]->due_ns;
        if (due > now) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t wait = due - now;
            ts.tv_sec += (time_t)(wait / 1000000000ull);
            ts.tv_nsec += (long)(wait % 1000000000ull);
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&g.wake, &g.lock, &ts);
            continue;
        }
        sim_job *job = heap_pop();
        detach_job(job);
        if (!job->cancelled) run_job(job);
        free(job->text);
        free(job);
    }
    pthread_mutex_unlock(&g.lock);
    return NULL;
}

/* ---- the entry points ------------------------------------------------------------- */

static int32_t sim_init(const adorch_host *host, const char *config_json) {
    /* Everything else is per waterfall entry, in the server parameter. A flat check is
     * enough for the one switch this config has. */
    if (config_json && strstr(config_json, "\"fail_init\"") && strstr(config_json, "true")) {
        host->log(host, ADORCH_LOG_ERROR, "sim: init refused on purpose (fail_init)");
        return 1;
    }
    sim_fault fault = {0};
    static const char *const FAULT_KEYS[] = {"misbehave", "at", "snoop"};
    char problem[160] = "";
    for (size_t i = 0; i < sizeof FAULT_KEYS / sizeof FAULT_KEYS[0] && !problem[0]; i++) {
        char value[SIM_SNOOP_CHARS];
        int found = json_string_of(config_json, FAULT_KEYS[i], value, sizeof value);
        if (found < 0 || (found == 0 && parse_fault_key(&fault, FAULT_KEYS[i], value) != 0))
            snprintf(problem, sizeof problem, "bad value for \"%s\"", FAULT_KEYS[i]);
    }
    char record[SIM_SNOOP_CHARS] = "";
    int has_record = problem[0] ? 1 : json_string_of(config_json, "record_loads", record, sizeof record);
    if (has_record < 0 || (has_record == 0 && !record[0])) snprintf(problem, sizeof problem, "bad value for \"record_loads\"");
    const char *why = problem[0] ? NULL : fault_problem(&fault, 1);
    if (why) snprintf(problem, sizeof problem, "%s", why);
    if (problem[0]) {
        char line[256];
        snprintf(line, sizeof line, "sim: config: %s", problem);
        host->log(host, ADORCH_LOG_ERROR, line);
        return 1;
    }
    int record_fd = -1;
    if (record[0] && (record_fd = open(record, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600)) < 0) {
        char line[SIM_SNOOP_CHARS + 96];
        snprintf(line, sizeof line, "sim: config: record_loads: cannot open %s: %s", record, strerror(errno));
        host->log(host, ADORCH_LOG_ERROR, line);
        return 1;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g.wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_lock(&g.lock);
    g.host = host;
    g.running = 1;
    g.fault = fault;
    g.record_fd = record_fd;
    memset(&g.n, 0, sizeof g.n);
    pthread_mutex_unlock(&g.lock);
    if (pthread_create(&g.thread, NULL, scheduler_main, NULL) != 0) {
        host->log(host, ADORCH_LOG_ERROR, "sim: cannot start its scheduler thread");
        g.running = 0;
        if (g.record_fd >= 0) close(g.record_fd);
        g.record_fd = -1;
        return 1;
    }
    pthread_mutex_lock(&g.lock);
    strike_at(CALL_INIT, NULL);
    pthread_mutex_unlock(&g.lock);
    host->log(host, ADORCH_LOG_INFO, "sim: simulated network ready");
    return 0;
}

static void sim_deinit(void) {
    if (reentered()) return;
    pthread_mutex_lock(&g.lock);
    g.running = 0;
    pthread_cond_signal(&g.wake);
    pthread_mutex_unlock(&g.lock);
    pthread_join(g.thread, NULL);
    while (g.heap_len) {
        sim_job *job = heap_pop();
        free(job->text);
        free(job);
    }
    free(g.heap);
    g.heap = NULL;
    g.heap_cap = 0;
    while (g.live) {
        sim_ad *ad = g.live;
        g.live = ad->next;
        free(ad);
    }
    while (g.retained) {
        sim_ad *ad = g.retained;
        g.retained = ad->next;
        free(ad);
    }
    memset(g.buckets, 0, sizeof g.buckets);
    while (g.configs) {
        sim_config *c = g.configs;
        g.configs = c->next;
        free(c->server_parameter);
        free(c);
    }
    memset(&g.fault, 0, sizeof g.fault);
    if (g.record_fd >= 0) close(g.record_fd);
    g.record_fd = -1;
    g.host = NULL;
}

/* `in` as the inside of a JSON string; cut short (never mid-escape) if it does not fit. */
static void json_escape(char *out, size_t size, const char *in) {
    size_t n = 0;
    for (; *in && n + 7 < size; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, size - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = '\0';
}

static size_t bucket_of(const sim_ad *ad) {
    return (size_t)(((uintptr_t)ad >> 4) * 0x9E3779B97F4A7C15ull >> 51) & (SIM_LIVE_BUCKETS - 1);
}

/* Compares addresses only: a pointer the host should no longer hold is never dereferenced. */
static int is_live(const sim_ad *ad) {
    for (sim_ad *a = g.buckets[bucket_of(ad)]; a; a = a->bucket_next)
        if (a == ad) return 1;
    return 0;
}

static void index_live(sim_ad *ad) {
    ad->bucket_next = g.buckets[bucket_of(ad)];
    g.buckets[bucket_of(ad)] = ad;
}

static void unindex_live(sim_ad *ad) {
    sim_ad **link = &g.buckets[bucket_of(ad)];
    while (*link != ad) link = &(*link)->bucket_next;
    *link = ad->bucket_next;
}

static const char *format_name(uint32_t format) {
    switch (format) {
    case ADORCH_FORMAT_REWARDED: return "rewarded";
    case ADORCH_FORMAT_FULLSCREEN: return "fullscreen";
    case ADORCH_FORMAT_INTERSTITIAL: return "interstitial";
    case ADORCH_FORMAT_BANNER: return "banner";
    case ADORCH_FORMAT_SPLASH: return "splash";
    case ADORCH_FORMAT_NATIVE: return "native";
    case ADORCH_FORMAT_INTERACTIVE: return "interactive";
    default: return "unknown";
    }
}

/* `in` as a JSON string's inside, in memory of its own (the caller frees it): whole, however long. */
static char *json_quoted(const char *in) {
    size_t size = strlen(in) * 6 + 8; /* \u00XX at most per byte, as json_escape writes it */
    char *out = malloc(size);
    if (!out) abort();
    json_escape(out, size, in);
    return out;
}

static const char *class_name(uint32_t privacy_class) {
    switch (privacy_class) {
    case ADORCH_PRIVACY_PERSONALIZED: return "personalized";
    case ADORCH_PRIVACY_NON_PERSONALIZED: return "non_personalized";
    case ADORCH_PRIVACY_CHILD_DIRECTED: return "child_directed";
    default: return "unknown";
    }
}

/* {"record_loads": path}: one line for this load, with its privacy as the request had it (NULL:
 * none given). One write() of the whole line, so lines never interleave. Called with the lock held. */
static void record_load(const sim_ad *ad, const adorch_privacy *p) {
    if (g.record_fd < 0) return;
    char *uid = json_quoted(ad->load_uid), *slot = json_quoted(ad->slot_id);
    char *tc = json_quoted(p ? p->tc_string : ""), *gpp = json_quoted(p ? p->gpp : "");
    char *usp = json_quoted(p ? p->us_privacy : ""), *rating = json_quoted(p ? p->max_content_rating : "");
    uint32_t sid_count = p && p->gpp_sid ? p->gpp_sid_count : 0;
    size_t sids_size = (size_t)sid_count * 12 + 3, used = 1;
    char *sids = malloc(sids_size);
    if (!sids) abort();
    strcpy(sids, "[");
    for (uint32_t i = 0; i < sid_count; i++)
        used += (size_t)snprintf(sids + used, sids_size - used, "%s%u", i ? "," : "", p->gpp_sid[i]);
    strcpy(sids + used, "]");
    size_t size = strlen(uid) + strlen(slot) + strlen(tc) + strlen(gpp) + strlen(usp) + strlen(rating) + strlen(sids) + 512;
    char *line = malloc(size);
    if (!line) abort();
    int n = snprintf(line, size, "{\"load_uid\":\"%s\",\"slot\":\"%s\",\"format\":\"%s\",\"privacy\":", uid, slot, format_name(ad->format));
    if (p)
        n += snprintf(line + n, size - (size_t)n,
                      "{\"class\":\"%s\",\"gdpr\":%d,\"tc_string\":\"%s\",\"gpp\":\"%s\",\"gpp_sid\":%s,\"us_privacy\":\"%s\","
                      "\"coppa\":%d,\"under_age_of_consent\":%d,\"non_personalized\":%d,\"max_content_rating\":\"%s\"}}\n",
                      class_name(p->privacy_class), p->gdpr, tc, gpp, sids, usp, p->coppa, p->under_age_of_consent,
                      p->non_personalized, rating);
    else
        n += snprintf(line + n, size - (size_t)n, "null}\n");
    for (ssize_t off = 0, w; off < n; off += w)
        if ((w = write(g.record_fd, line + off, (size_t)(n - off))) < 0) {
            if (errno == EINTR) { w = 0; continue; }
            g.host->log(g.host, ADORCH_LOG_ERROR, "sim: record_loads: a write failed; this load's line is short");
            break;
        }
    free(line);
    free(sids);
    free(uid); free(slot); free(tc); free(gpp); free(usp); free(rating);
}

static adorch_ad *sim_ad_create(adorch_ad_id id, const adorch_request *request) {
    if (reentered()) return NULL;
    pthread_mutex_lock(&g.lock);
    sim_config *config = config_for(request->server_parameter);
    sim_ad *ad = config ? calloc(1, sizeof *ad) : NULL;
    if (ad) {
        ad->id = id;
        ad->config = config;
        ad->format = request->format;
        ad->count = request->count ? request->count : 1;
        ad->width = request->width;
        ad->height = request->height;
        snprintf(ad->variant, sizeof ad->variant, "%s", request->variant ? request->variant : "");
        ad->test_mode = request->test_mode;
        /* Too long to keep whole: an empty object rather than broken JSON. */
        if (strlen(request->targeting_json) < sizeof ad->targeting)
            snprintf(ad->targeting, sizeof ad->targeting, "%s", request->targeting_json);
        else
            strcpy(ad->targeting, "{}");
        snprintf(ad->slot_id, sizeof ad->slot_id, "%s", request->slot_id);
        /* ABI 1.1 fields: read only if the host's request has them. */
        if (request->struct_size >= offsetof(adorch_request, slot_type) + sizeof request->slot_type) {
            json_escape(ad->creative_url, sizeof ad->creative_url, request->creative_url);
            snprintf(ad->slot_type, sizeof ad->slot_type, "%s", request->slot_type);
        }
        if (ADORCH_STRUCT_HAS(request, adorch_request, load_uid))
            snprintf(ad->load_uid, sizeof ad->load_uid, "%s", request->load_uid);
        /* ABI 1.4: the load's privacy, every field of which came in 1.4. A class this build
         * does not know is taken as none given (plugin.h: ignore a value you do not know). */
        const adorch_privacy *privacy = ADORCH_STRUCT_HAS(request, adorch_request, privacy) ? request->privacy : NULL;
        if (privacy && !ADORCH_STRUCT_HAS(privacy, adorch_privacy, max_content_rating)) privacy = NULL;
        if (privacy && privacy->privacy_class <= ADORCH_PRIVACY_CHILD_DIRECTED) ad->privacy_class = privacy->privacy_class;
        g.n.class_loads[ad->privacy_class]++;
        ad->deadline_ns = request->deadline_monotonic_ns;
        ad->rng = config->seed * 0x9E3779B97F4A7C15ull + ++config->creates;
        ad->next = g.live;
        if (g.live) g.live->prev = ad;
        g.live = ad;
        index_live(ad);
        record_load(ad, privacy);
        g.n.creates++;
        g.n.live++;
    }
    pthread_mutex_unlock(&g.lock);
    return ad;
}

static int32_t sim_ad_load(adorch_ad *opaque) {
    if (reentered()) return ADORCH_ERROR_INTERNAL;
    sim_ad *ad = opaque;
    pthread_mutex_lock(&g.lock);
    uint32_t block_ms = is_live(ad) ? ad->config->block_ms : 0;
    pthread_mutex_unlock(&g.lock);
    if (block_ms) {
        /* A stuck SDK call: the plugin queue waits, the scheduler thread does not. */
        struct timespec pause = {.tv_sec = block_ms / 1000, .tv_nsec = (long)(block_ms % 1000) * 1000000L};
        while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {}
    }
    pthread_mutex_lock(&g.lock);
    if (!is_live(ad)) {
        g.n.stale_objects++;
        pthread_mutex_unlock(&g.lock);
        return ADORCH_ERROR_INTERNAL;
    }
    g.n.loads++;
    strike_at(CALL_LOAD, ad->config);
    if (++ad->loads > 1) {
        /* The host broke docs/rules.md, "Fresh object per load": one load per object. Count it and refuse. */
        g.n.second_loads++;
        g.host->log(g.host, ADORCH_LOG_ERROR, "sim: contract violation: second ad_load of one object");
        pthread_mutex_unlock(&g.lock);
        return ADORCH_ERROR_INTERNAL;
    }
    const sim_config *c = ad->config;
    if (c->parse_error[0]) {
        char message[256];
        snprintf(message, sizeof message, "sim: server_parameter: %s", c->parse_error);
        schedule(ad, ad->id, JOB_FAILED, 0, ADORCH_ERROR_INVALID_REQUEST, 10001, message);
        pthread_mutex_unlock(&g.lock);
        return 0;
    }
    uint64_t latency = c->latency_lo_ms;
    if (c->latency_hi_ms > c->latency_lo_ms)
        latency += rng_next(&ad->rng) % (uint64_t)(c->latency_hi_ms - c->latency_lo_ms + 1);
    /* plugin.h, rule 3: an answer that would come too late is a timeout, reported in time:
     * the margin is the latest, so aim a margin earlier still, for a timer that runs late. */
    uint64_t margin_ns = 2 * ADORCH_DEADLINE_MARGIN_MS * 1000000ull, now = now_ns();
    if (c->give_up && now + latency * 1000000ull + margin_ns > ad->deadline_ns) {
        uint64_t left_ms = ad->deadline_ns > now + margin_ns ? (ad->deadline_ns - now - margin_ns) / 1000000ull : 0;
        schedule(ad, ad->id, JOB_FAILED, left_ms, ADORCH_ERROR_TIMEOUT, 10002, message_for(10002));
        pthread_mutex_unlock(&g.lock);
        return 0;
    }

    double draw = rng_unit(&ad->rng), acc = 0.0;
    for (int i = 0; i < c->n_errors; i++) {
        acc += c->error_probs[i];
        if (draw < acc) {
            int64_t code = c->error_codes[i];
            schedule(ad, ad->id, JOB_FAILED, latency, host_error_for(code), code, message_for(code));
            pthread_mutex_unlock(&g.lock);
            return 0;
        }
    }
    int interactive = ad->format == ADORCH_FORMAT_INTERACTIVE;
    /* A network fills less, and is paid less, without a profile to target (ABI 1.4's class). */
    double fill = c->fill * c->class_fill[ad->privacy_class], price = c->price * c->class_price[ad->privacy_class];
    if (rng_unit(&ad->rng) >= fill || (interactive && !strcmp(c->script, "no_ads"))) {
        schedule(ad, ad->id, JOB_FAILED, latency, ADORCH_ERROR_NO_FILL, 20001, message_for(20001));
        pthread_mutex_unlock(&g.lock);
        return 0;
    }
    char payload[8192];
    if (interactive) {
        /* The renderer's fetch: fetch_complete (loaded), then ads_available. */
        if (!strcmp(c->script, "hang_fetch")) {
            pthread_mutex_unlock(&g.lock);
            return 0;
        }
        snprintf(payload, sizeof payload,
                 "{\"network\":\"sim\",\"campaign_name\":\"Sim Coffee - Interactive Ad #1 - Q4\",\"script\":\"%s\","
                 "\"creative_url\":\"%s\",\"slot_type\":\"%s\"}",
                 c->script, ad->creative_url, ad->slot_type);
        /* One job, under one hold of the lock: the host may start the session as soon as
         * loaded arrives, and ads_available must still come before started. */
        schedule(ad, ad->id, JOB_LOADED, latency, ADORCH_EVENT_ADS_AVAILABLE, 0, payload);
        pthread_mutex_unlock(&g.lock);
        return 0;
    }
    uint64_t serial = rng_next(&ad->rng) % 1000000000ull;
    if (c->misbehave == MB_EMPTY_PAYLOAD) {
        payload[0] = '\0';
    } else if (ad->format == ADORCH_FORMAT_NATIVE) {
        /* The canonical native assets, one object per ad; several as {"ads": [...]}. */
        size_t used = (size_t)snprintf(payload, sizeof payload,
                                       "{\"network\":\"sim\",\"expires_in_s\":%u,\"price\":%.4f,\"tracks_impressions\":%s,\"ads\":[",
                                       c->ttl_s, price, c->tracks ? "true" : "false");
        for (uint32_t i = 0; i < ad->count && i < 10 && used < sizeof payload; i++) {
            used += (size_t)snprintf(payload + used, sizeof payload - used,
                "%s{\"headline\":\"Simulated native %09" PRIu64 "-%u\",\"body\":\"A simulated %s native ad.\","
                "\"call_to_action\":\"Install\",\"images\":[{\"url\":\"https://sim.invalid/n/%09" PRIu64 "-%u.jpg\","
                "\"width\":1200,\"height\":628}],\"icon\":{\"url\":\"https://sim.invalid/icon.png\",\"width\":128,"
                "\"height\":128},\"star_rating\":4.5,\"store\":\"Sim Store\",\"price\":\"free\",\"advertiser\":\"Sim Inc.\","
                "\"extra_assets\":{},\"has_video\":false,\"network_ad_id\":\"sim-%" PRIu64 "-%09" PRIu64 "-%u\"}",
                i ? "," : "", serial, i, ad->variant[0] ? ad->variant : "feed", serial, i, c->seed, serial, i);
        }
        if (used + 3 < sizeof payload) strcpy(payload + used, "]}");
    } else if (ad->format == ADORCH_FORMAT_BANNER) {
        snprintf(payload, sizeof payload,
                 "{\"network\":\"sim\",\"network_ad_id\":\"sim-%" PRIu64 "-%09" PRIu64 "\",\"format\":\"banner\","
                 "\"width\":%u,\"height\":%u,\"image_url\":\"https://sim.invalid/b/%09" PRIu64 "-%ux%u.png\","
                 "\"click_url\":\"https://sim.invalid/c/%09" PRIu64 "\",\"expires_in_s\":%u,\"price\":%.4f,"
                 "\"tracks_impressions\":%s,\"test\":%s,\"targeting\":%s}",
                 c->seed, serial, ad->width, ad->height, serial, ad->width, ad->height, serial, c->ttl_s, price,
                 c->tracks ? "true" : "false", ad->test_mode ? "true" : "false", ad->targeting);
    } else if (ad->format == ADORCH_FORMAT_SPLASH) {
        snprintf(payload, sizeof payload,
                 "{\"network\":\"sim\",\"network_ad_id\":\"sim-%" PRIu64 "-%09" PRIu64 "\",\"format\":\"splash\","
                 "\"image_url\":\"https://sim.invalid/s/%09" PRIu64 ".jpg\",\"duration_s\":3,\"skippable\":true,"
                 "\"expires_in_s\":%u,\"price\":%.4f,\"tracks_impressions\":%s,\"test\":true}",
                 c->seed, serial, serial, c->ttl_s, price, c->tracks ? "true" : "false");
    } else {
        snprintf(payload, sizeof payload,
                 "{\"network\":\"sim\",\"network_ad_id\":\"sim-%" PRIu64 "-%09" PRIu64 "\","
                 "\"format\":\"%s\",\"title\":\"Simulated ad %09" PRIu64 "\","
                 "\"media_url\":\"https://sim.invalid/media/%09" PRIu64 ".mp4\",\"duration_s\":%d,"
                 "\"expires_in_s\":%u,\"price\":%.4f,\"tracks_impressions\":%s,\"reward_by\":\"%s\",\"test\":true,"
                 "\"load_uid\":\"%s\"}",
                 c->seed, serial, format_name(ad->format), serial, serial,
                 ad->format == ADORCH_FORMAT_REWARDED ? 30 : 15, c->ttl_s, price, c->tracks ? "true" : "false",
                 c->reward_by_network ? "network" : "host", ad->load_uid);
    }
    switch (c->misbehave) {
    case MB_NEVER:
        g.n.misbehaviours++;
        break;
    case MB_TWICE:
        g.n.misbehaviours++;
        schedule(ad, ad->id, JOB_LOADED, latency, 0, 0, payload);
        schedule(ad, ad->id, JOB_LOADED, latency + 1, 0, 0, payload);
        break;
    case MB_EMPTY_PAYLOAD:
        g.n.misbehaviours++;
        /* fall through */
    default:
        schedule(ad, ad->id, JOB_LOADED, latency, 0, 0, payload);
        schedule(ad, ad->id, JOB_MEDIA_CACHED, latency + c->cached_ms, 0, 0, NULL);
        break;
    }
    pthread_mutex_unlock(&g.lock);
    return 0;
}

static int32_t sim_ad_show(adorch_ad *opaque, const char *context_json) {
    (void)context_json;
    if (reentered()) return ADORCH_ERROR_NOT_READY;
    sim_ad *ad = opaque;
    int32_t rc = 0;
    pthread_mutex_lock(&g.lock);
    if (!is_live(ad)) {
        g.n.stale_objects++;
        rc = ADORCH_ERROR_INTERNAL;
    } else {
        g.n.shows++;
        strike_at(CALL_SHOW, ad->config);
        if (++ad->shows > 1) {
            g.n.second_shows++; /* docs/rules.md, "adValid": a shown ad is never shown again */
            g.host->log(g.host, ADORCH_LOG_ERROR, "sim: contract violation: second ad_show of one object");
            rc = ADORCH_ERROR_NOT_READY;
        } else if (!ad->loaded) {
            g.n.show_unloaded++;
            g.host->log(g.host, ADORCH_LOG_ERROR, "sim: contract violation: ad_show before loaded");
            rc = ADORCH_ERROR_NOT_READY;
        } else if (ad->config->show_fail) {
            rc = ADORCH_ERROR_NOT_READY; /* asked for: a network that cannot present */
        } else if (ad->format == ADORCH_FORMAT_INTERACTIVE) {
            /* Start: the scripted viewer takes over, unless the unit never shows (hang_start). */
            if (strcmp(ad->config->script, "hang_start")) {
                ad->running = 1;
                ad->active_since_ns = now_ns();
                /* The unit is on screen at once (started); the viewer then takes step_ms a step. */
                if (!ad->paused) ad->step_job = schedule_step(ad, 1);
            }
        } else {
            schedule(ad, ad->id, JOB_EVENT, 0, ADORCH_EVENT_WILL_PRESENT, 0, NULL);
            schedule(ad, ad->id, JOB_EVENT, 5, ADORCH_EVENT_PRESENTED, 0, NULL);
            if (ad->config->tracks) schedule(ad, ad->id, JOB_EVENT, 6, ADORCH_EVENT_IMPRESSION, 0, NULL);
            if (ad->config->tracks && ad->config->impression_twice)
                schedule(ad, ad->id, JOB_EVENT, 7, ADORCH_EVENT_IMPRESSION, 0, NULL);
            if (ad->config->dislike)
                schedule(ad, ad->id, JOB_EVENT, 8, ADORCH_EVENT_DISLIKE, 0, "{\"reasons\":[\"not interested\",\"seen it too often\"]}");
        }
    }
    pthread_mutex_unlock(&g.lock);
    return rc;
}

static void sim_ad_notify(adorch_ad *opaque, uint32_t event, const char *detail_json) {
    (void)detail_json;
    if (reentered()) return;
    sim_ad *ad = opaque;
    pthread_mutex_lock(&g.lock);
    if (is_live(ad)) {
        g.n.notifies++;
        strike_at(CALL_NOTIFY, ad->config);
        if (event == ADORCH_EVENT_PAUSE && !ad->paused) {
            /* Video, audio and timers stop: the viewer's next step waits for resume. */
            ad->paused = 1;
            if (ad->running) ad->active_ns += now_ns() - ad->active_since_ns;
            if (ad->step_job) cancel_job(ad, ad->step_job);
            ad->step_job = NULL;
        } else if (event == ADORCH_EVENT_RESUME && ad->paused) {
            ad->paused = 0;
            if (ad->running) {
                ad->active_since_ns = now_ns();
                ad->step_job = schedule_step(ad, ad->config->step_ms);
            }
        }
        if (event == ADORCH_EVENT_COMPLETE && ad->format == ADORCH_FORMAT_REWARDED && ad->config->reward_by_network) {
            /* The network verifies the view and grants the reward, with its own transaction id. */
            char detail[128];
            /* plugin.h, ADORCH_EVENT_REWARD: unique across daemon runs, which the ad id is not;
             * a host older than 1.3 gives no load_uid, and the ad id is the best there is. */
            if (ad->load_uid[0] && !ad->config->ad_id_trans_id)
                snprintf(detail, sizeof detail, "{\"trans_id\":\"sim-%s\"}", ad->load_uid);
            else
                snprintf(detail, sizeof detail, "{\"trans_id\":\"sim-%" PRIu64 "-%" PRIu64 "\"}", ad->config->seed, ad->id);
            /* A delay set is the network's server-side reward: it comes whether or not the ad
             * still exists then, so it is not the ad's job (destroy does not cancel it). */
            if (ad->config->reward_delay_ms < 0)
                schedule(ad, ad->id, JOB_EVENT, 2, ADORCH_EVENT_REWARD, 0, detail);
            else
                schedule(NULL, ad->id, JOB_EVENT, (uint32_t)ad->config->reward_delay_ms, ADORCH_EVENT_REWARD, 0, detail);
        }
    } else {
        g.n.stale_objects++;
    }
    pthread_mutex_unlock(&g.lock);
}

static void sim_ad_destroy(adorch_ad *opaque) {
    if (reentered()) return;
    sim_ad *ad = opaque;
    pthread_mutex_lock(&g.lock);
    if (!is_live(ad)) {
        g.n.stale_objects++;
        pthread_mutex_unlock(&g.lock);
        return;
    }
    strike_at(CALL_DESTROY, ad->config);
    for (int i = 0; i < SIM_MAX_JOBS_PER_AD; i++)
        if (ad->jobs[i]) {
            ad->jobs[i]->cancelled = 1;
            ad->jobs[i]->owner = NULL;
        }
    if (ad->config->misbehave == MB_AFTER_DESTROY) {
        g.n.misbehaviours++;
        schedule(NULL, ad->id, JOB_STRAY_LOADED, 5, 0, 0, "{\"network\":\"sim\",\"stray\":true}");
    }
    if (ad->prev) ad->prev->next = ad->next;
    else g.live = ad->next;
    if (ad->next) ad->next->prev = ad->prev;
    unindex_live(ad);
    g.n.destroys++;
    g.n.live--;
    if (ad->config->misbehave == MB_LEAK) {
        /* Retained, not lost: memory grows as with the real SDKs, and LeakSanitizer stays quiet. */
        g.n.misbehaviours++;
        ad->next = g.retained;
        g.retained = ad;
    } else {
        free(ad);
    }
    pthread_mutex_unlock(&g.lock);
}

static const char *sim_stats_json(void) {
    if (reentered()) return "{}";
    pthread_mutex_lock(&g.lock);
    uint64_t paused = 0;
    for (sim_ad *a = g.live; a; a = a->next) paused += a->paused ? 1 : 0;
    snprintf(g.stats, sizeof g.stats,
             "{\"creates\":%" PRIu64 ",\"loads\":%" PRIu64 ",\"shows\":%" PRIu64 ",\"notifies\":%" PRIu64
             ",\"destroys\":%" PRIu64 ",\"live\":%" PRIu64 ",\"loaded_reports\":%" PRIu64
             ",\"failed_reports\":%" PRIu64 ",\"second_loads\":%" PRIu64 ",\"second_shows\":%" PRIu64
             ",\"show_unloaded\":%" PRIu64 ",\"stale_objects\":%" PRIu64 ",\"contract_violations\":%" PRIu64
             ",\"misbehaviours\":%" PRIu64 ",\"events_reported\":%" PRIu64 ",\"paused\":%" PRIu64
             ",\"ballooned_bytes\":%" PRIu64 ",\"reentrant_calls\":%" PRIu64 ",\"loads_by_class\":{\"none\":%" PRIu64
             ",\"personalized\":%" PRIu64 ",\"non_personalized\":%" PRIu64 ",\"child_directed\":%" PRIu64 "}}",
             g.n.creates, g.n.loads, g.n.shows, g.n.notifies, g.n.destroys, g.n.live, g.n.loaded_reports,
             g.n.failed_reports, g.n.second_loads, g.n.second_shows, g.n.show_unloaded, g.n.stale_objects,
             g.n.second_loads + g.n.second_shows + g.n.show_unloaded + g.n.stale_objects, g.n.misbehaviours,
             g.n.events_reported, paused, g.n.ballooned_bytes, __atomic_load_n(&reentrant_calls, __ATOMIC_RELAXED),
             g.n.class_loads[0], g.n.class_loads[ADORCH_PRIVACY_PERSONALIZED], g.n.class_loads[ADORCH_PRIVACY_NON_PERSONALIZED],
             g.n.class_loads[ADORCH_PRIVACY_CHILD_DIRECTED]);
    pthread_mutex_unlock(&g.lock);
    return g.stats;
}

ADORCH_PLUGIN_EXPORT const adorch_plugin_entry_t adorch_plugin_entry = {
    .abi_major = ADORCH_PLUGIN_ABI_MAJOR,
    .abi_minor = ADORCH_PLUGIN_ABI_MINOR,
    .struct_size = sizeof(adorch_plugin_entry_t),
    .name = "sim",
    .version = "1.2.0",
    .description = "simulated ad network: latency, no-fill, network error codes, expiry, misbehaviour",
    .formats = ADORCH_FORMAT_BIT(ADORCH_FORMAT_REWARDED) | ADORCH_FORMAT_BIT(ADORCH_FORMAT_FULLSCREEN) |
               ADORCH_FORMAT_BIT(ADORCH_FORMAT_INTERSTITIAL) | ADORCH_FORMAT_BIT(ADORCH_FORMAT_BANNER) |
               ADORCH_FORMAT_BIT(ADORCH_FORMAT_SPLASH) | ADORCH_FORMAT_BIT(ADORCH_FORMAT_NATIVE) |
               ADORCH_FORMAT_BIT(ADORCH_FORMAT_INTERACTIVE),
    .init = sim_init,
    .deinit = sim_deinit,
    .ad_create = sim_ad_create,
    .ad_load = sim_ad_load,
    .ad_show = sim_ad_show,
    .ad_notify = sim_ad_notify,
    .ad_destroy = sim_ad_destroy,
    .stats_json = sim_stats_json,
    /* ad_show only takes the one mutex, and nothing holds it for long: no call sleeps or
     * waits under it, and the host callbacks made under it only hand the report over. */
    .flags = ADORCH_PLUGIN_FLAG_SHOW_ANY_THREAD,
};
