/* A hostile plugin for the box tests: once the file its config names appears (config
 * {"go":"PATH"}; at once without one) it tries, as an attacker who has read
 * plugin.h and knows it runs isolated, every road it knows to the daemon and the other
 * plugins' hosts, found by name in /proc. One log line per try, "boxbreaker: TRY: RESULT",
 * where RESULT is "done" if the call succeeded or "refused (ERRNO)", then
 * "boxbreaker: open /proc/TID/stat of its own thread: RESULT" (as libdispatch does),
 * "boxbreaker: stderr: N lines written" (a flood on its stderr), "boxbreaker: threads: N made"
 * (it stops at 2000) and "boxbreaker: finished". The threads it made sleep until
 * the host ends. Compiled by the integration test with plain cc against the header. */
#define _GNU_SOURCE
#include <dirent.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "adorch/plugin.h"

static const adorch_host *host;
static pthread_t attacker;

static void say(const char *try, long result, int error) {
    char line[256];
    if (result < 0)
        snprintf(line, sizeof line, "boxbreaker: %s: refused (%s)", try, strerrorname_np(error));
    else
        snprintf(line, sizeof line, "boxbreaker: %s: done", try);
    host->log(host, ADORCH_LOG_WARNING, line);
}

#define TRY(name, call)              \
    do {                             \
        errno = 0;                   \
        long result_ = (long)(call); \
        say(name, result_, errno);   \
    } while (0)

/* A field of /proc/PID/status ("NSpid", "PPid") as the machine's /proc names it: in a box,
 * getpid() and getppid() are the box's own numbers. */
static pid_t status_field(pid_t pid, const char *field) {
    char path[64], line[256];
    snprintf(path, sizeof path, pid ? "/proc/%d/status" : "/proc/self/status", pid);
    FILE *status = fopen(path, "r");
    pid_t value = 0;
    size_t length = strlen(field);
    while (status && fgets(line, sizeof line, status))
        if (strncmp(line, field, length) == 0 && line[length] == ':') value = (pid_t)atol(line + length + 1);
    if (status) fclose(status);
    return value;
}

/* Whether `pid` has children (/proc/PID/task/PID/children is not empty). */
static int has_children(pid_t pid) {
    char path[96], first = 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
    FILE *file = fopen(path, "r");
    if (file) {
        first = (char)fgetc(file);
        fclose(file);
    }
    return first != 0 && first != EOF;
}

/* Whether `pid` is a zombie: a host of an earlier daemon whose parent is gone, left to a pid 1
 * that does not reap (as in some containers). It has no memory to attack. */
static int is_zombie(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *status = fopen(path, "r");
    int zombie = 0;
    while (status && fgets(line, sizeof line, status))
        if (strncmp(line, "State:", 6) == 0) zombie = strchr(line, 'Z') != NULL || strchr(line, 'X') != NULL;
    if (status) fclose(status);
    return zombie;
}

/* The first process of its user whose comm is `name`, other than those in `skip` and zombies,
 * and with `workers_only` one without children (a box's pid 1 runs the host binary too, with
 * the host its child); 0 if none. */
static pid_t find(const char *name, const pid_t skip[2], int workers_only) {
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    pid_t found = 0;
    while (proc && !found && (entry = readdir(proc)) != NULL) {
        pid_t pid = (pid_t)atol(entry->d_name);
        if (pid <= 0 || pid == skip[0] || pid == skip[1]) continue;
        char path[64], comm[64] = "";
        snprintf(path, sizeof path, "/proc/%d/comm", pid);
        FILE *file = fopen(path, "r");
        if (!file) continue;
        if (fgets(comm, sizeof comm, file)) comm[strcspn(comm, "\n")] = 0;
        fclose(file);
        /* Its own user's only: another user's processes are out of reach anyway. */
        if (strcmp(comm, name) == 0 && (uid_t)status_field(pid, "Uid") == getuid() && !(workers_only && has_children(pid)) && !is_zombie(pid)) found = pid;
    }
    if (proc) closedir(proc);
    return found;
}

static void *sleeper(void *unused) {
    (void)unused;
    for (;;) pause();
    return NULL;
}

/* Everything it tries against `target` (a process outside its box), named `who`. */
static void against(const char *who, pid_t target) {
    char name[96];
    struct rlimit ten = {10, 10}, one = {1, 1}, small = {64 << 20, 64 << 20};
#define AGAINST(what, call)                              \
    do {                                                 \
        snprintf(name, sizeof name, "%s %s", what, who); \
        TRY(name, call);                                 \
    } while (0)
    AGAINST("prlimit RLIMIT_NOFILE 10 on", prlimit(target, RLIMIT_NOFILE, &ten, NULL));
    AGAINST("prlimit RLIMIT_CPU 1 on", prlimit(target, RLIMIT_CPU, &one, NULL));
    AGAINST("prlimit RLIMIT_AS 64 MiB on", prlimit(target, RLIMIT_AS, &small, NULL));
    AGAINST("setpriority 19 on", setpriority(PRIO_PROCESS, (id_t)target, 19));
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(0, &cpus);
    AGAINST("sched_setaffinity on", sched_setaffinity(target, sizeof cpus, &cpus));
    AGAINST("ioprio_set idle on", syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, target, 3 << 13 /* IDLE */));
    AGAINST("kill SIGKILL to", kill(target, SIGKILL));
    /* A signal by another road: the socket's owner is the target, its signal SIGKILL, and
     * O_ASYNC makes a datagram arriving on it send that signal. */
    int sock = socket(AF_INET, SOCK_DGRAM, 0);
    AGAINST("F_SETOWN socket to", fcntl(sock, F_SETOWN, target));
    struct f_owner_ex owner = {.type = F_OWNER_PID, .pid = target};
    AGAINST("F_SETOWN_EX socket to", fcntl(sock, F_SETOWN_EX, &owner));
    int owner_pid = target;
    AGAINST("FIOSETOWN socket to", ioctl(sock, FIOSETOWN, &owner_pid));
    AGAINST("SIOCSPGRP socket to", ioctl(sock, SIOCSPGRP, &owner_pid));
    struct sockaddr_in self = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof self;
    if (fcntl(sock, F_SETSIG, SIGKILL) == 0 && fcntl(sock, F_SETFL, O_ASYNC | O_NONBLOCK) == 0 &&
        bind(sock, (struct sockaddr *)&self, sizeof self) == 0 && getsockname(sock, (struct sockaddr *)&self, &length) == 0)
        (void)!sendto(sock, "x", 1, 0, (struct sockaddr *)&self, sizeof self);
    close(sock);
    /* What the kernel guards as tracing: a secret in the environment, the memory's layout and contents. */
    static const char *const guarded[] = {"environ", "maps", "mem"};
    for (size_t i = 0; i < sizeof guarded / sizeof guarded[0]; i++) {
        char path[64], what[32];
        snprintf(path, sizeof path, "/proc/%d/%s", target, guarded[i]);
        snprintf(what, sizeof what, "open /proc/PID/%s of", guarded[i]);
        AGAINST(what, open(path, O_RDONLY | O_CLOEXEC));
    }
#undef AGAINST
}

/* What Landlock has no right for: a hidden file's mode, owner, times, extended attributes and
 * watches. Each is tried so that, done, it changes nothing (the same mode, no owner, the same
 * times): the test's daemon keeps serving whatever the result. */
static void metadata(const char *socket_path) {
    char folder[4096];
    snprintf(folder, sizeof folder, "%s", socket_path);
    char *slash = strrchr(folder, '/');
    if (slash == NULL || slash == folder) return;
    *slash = '\0';
    struct stat seen;
    mode_t mode = stat(folder, &seen) == 0 ? seen.st_mode & 07777 : 0700;
    TRY("chmod the daemon's socket folder", chmod(folder, mode));
    TRY("fchmodat2 the daemon's socket folder", syscall(452 /* fchmodat2 */, AT_FDCWD, folder, mode, 0));
    TRY("lchown the daemon's socket", lchown(socket_path, (uid_t)-1, (gid_t)-1));
    struct timespec unchanged[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
    TRY("utimensat the daemon's socket folder", utimensat(AT_FDCWD, folder, unchanged, 0));
    TRY("setxattr on the daemon's socket folder", setxattr(folder, "user.boxbreaker", "1", 1, 0));
    int watcher = inotify_init1(IN_CLOEXEC);
    TRY("inotify_add_watch on the daemon's socket folder", inotify_add_watch(watcher, folder, IN_ALL_EVENTS));
    close(watcher);
}

/* Its stdout and stderr: emptied, a line written to pass for the daemon's, and a flood
 * written without waiting until the pipe is full. Its log lines and its stderr share 200
 * lines a second, so the flood waits a second after the lines before it, and the lines after
 * wait for the daemon to have read the flood and a second more. */
static void output(void) {
    TRY("ftruncate stderr", ftruncate(STDERR_FILENO, 0));
    usleep(1100 * 1000);
    dprintf(STDERR_FILENO, "adorchd[1]: FORGED a line of the daemon's\n");
    fcntl(STDERR_FILENO, F_SETFL, fcntl(STDERR_FILENO, F_GETFL) | O_NONBLOCK);
    int written = 0;
    while (written < 100000 && write(STDERR_FILENO, "flood\n", 6) == 6) written++;
    int queued = 1;
    for (int waited = 0; queued > 0 && waited < 1000 && ioctl(STDERR_FILENO, FIONREAD, &queued) == 0; waited++) usleep(10 * 1000);
    usleep(1100 * 1000);
    char line[96];
    snprintf(line, sizeof line, "boxbreaker: stderr: %d lines written", written);
    host->log(host, ADORCH_LOG_WARNING, line);
}

/* A thread of its own that waits on `release`, for own_thread_stat. */
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static pid_t waiting_tid;
static int release;

static void *waiter(void *unused) {
    (void)unused;
    pthread_mutex_lock(&held);
    waiting_tid = gettid();
    pthread_cond_broadcast(&changed);
    while (!release) pthread_cond_wait(&changed, &held);
    pthread_mutex_unlock(&held);
    return NULL;
}

/* What libdispatch's thread pool does once a second under load: open /proc/TID/stat of a
 * thread of its own, TID as gettid() numbers it in the box, here one for which the machine's
 * /proc has no entry (threads are started and ended until the box's next number is such a one). */
static void own_thread_stat(void) {
    for (int tries = 0; tries < 3000; tries++) {
        pthread_t thread;
        pthread_mutex_lock(&held);
        waiting_tid = 0;
        release = 0;
        pthread_mutex_unlock(&held);
        if (pthread_create(&thread, NULL, waiter, NULL) != 0) break;
        pthread_mutex_lock(&held);
        while (waiting_tid == 0) pthread_cond_wait(&changed, &held);
        pid_t tid = waiting_tid;
        pthread_mutex_unlock(&held);
        char path[64];
        snprintf(path, sizeof path, "/proc/%d", tid);
        struct stat seen;
        int unknown = stat(path, &seen) != 0;
        if (unknown) {
            snprintf(path, sizeof path, "/proc/%d/stat", tid);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            say("open /proc/TID/stat of its own thread", fd, errno);
            if (fd >= 0) close(fd);
        }
        pthread_mutex_lock(&held);
        release = 1;
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&held);
        pthread_join(thread, NULL);
        if (unknown) return;
    }
    host->log(host, ADORCH_LOG_WARNING, "boxbreaker: no thread number free of the machine's pids");
}

/* The file whose appearance starts the attack (config {"go":"PATH"}): the test's signal that
 * it is measuring. */
static char go[512];

static void *attack(void *unused) {
    (void)unused;
    for (int waited = 0; go[0] && access(go, F_OK) != 0 && waited < 3000; waited++) usleep(20 * 1000);
    /* In a box its parent is the box's pid 1, a host binary too; outside one, the daemon. */
    pid_t self = status_field(0, "NSpid"), parent = status_field(0, "PPid");
    const pid_t skip[2] = {self, getppid() == 1 ? parent : 0};
    pid_t daemon = find("adorchd", skip, 0), other = 0;
    /* The other plugin's host may start after this one: looked for for up to 10 s. */
    for (int tries = 0; daemon > 0 && other == 0 && tries < 200; tries++) {
        other = find("adorch-plugin-h", skip, 1);
        if (other == 0) usleep(50 * 1000);
    }
    char line[128];
    snprintf(line, sizeof line, "boxbreaker: found the daemon at %d and another host at %d (itself %d)", daemon, other, self);
    host->log(host, ADORCH_LOG_WARNING, line);
    if (daemon > 0) {
        against("the daemon", daemon);
        /* The socket apps call, from the daemon's command line: unlinked, an impostor could take its place. */
        char path[64], cmdline[4096] = "";
        snprintf(path, sizeof path, "/proc/%d/cmdline", daemon);
        FILE *file = fopen(path, "r");
        size_t length = file ? fread(cmdline, 1, sizeof cmdline - 1, file) : 0;
        if (file) fclose(file);
        for (size_t at = 0; at < length; at += strlen(cmdline + at) + 1)
            if (strcmp(cmdline + at, "--socket") == 0 && at + 9 < length) {
                const char *socket_path = cmdline + at + 9;
                TRY("unlink the daemon's socket", unlink(socket_path));
                char moved[4200];
                snprintf(moved, sizeof moved, "%s.moved", socket_path);
                TRY("rename the daemon's socket", rename(socket_path, moved));
                metadata(socket_path);
            }
    }
    if (other > 0) against("another host", other);
    TRY("setpriority 19 on the whole user", setpriority(PRIO_USER, 0, 19));
    /* The filter must read an int argument's low 32 bits only, as the kernel does. */
    TRY("socket AF_UNIX with high bits set", syscall(SYS_socket, 0x100000000UL | AF_UNIX, SOCK_STREAM, 0));
    TRY("socket AF_VSOCK", socket(AF_VSOCK, SOCK_STREAM, 0));
    TRY("socket AF_PACKET", socket(AF_PACKET, SOCK_RAW, 0));
    TRY("setpriority 19 on the process group", setpriority(PRIO_PGRP, 0, 19));
    TRY("memfd_create", syscall(SYS_memfd_create, "hoard", 0));
    TRY("shmget 1 GiB", shmget(IPC_PRIVATE, 1UL << 30, IPC_CREAT | 0600));
    own_thread_stat();
    output();
    int made = 0;
    pthread_t thread;
    pthread_attr_t small;
    pthread_attr_init(&small);
    pthread_attr_setstacksize(&small, 64 * 1024);
    while (made < 2000 && pthread_create(&thread, &small, sleeper, NULL) == 0) made++;
    snprintf(line, sizeof line, "boxbreaker: threads: %d made", made);
    host->log(host, ADORCH_LOG_WARNING, line);
    host->log(host, ADORCH_LOG_WARNING, "boxbreaker: finished");
    return NULL;
}

static int32_t boxbreaker_init(const adorch_host *h, const char *config_json) {
    host = h;
    const char *path = strstr(config_json, "\"go\"");
    if (path) path = strchr(path + 4, '"');
    if (path) {
        path += 1;
        size_t length = strcspn(path, "\"");
        if (length >= sizeof go) return ADORCH_ERROR_INVALID_REQUEST;
        memcpy(go, path, length);
    }
    return pthread_create(&attacker, NULL, attack, NULL) == 0 ? 0 : ADORCH_ERROR_INTERNAL;
}

static void boxbreaker_deinit(void) {}

typedef struct { adorch_ad_id id; } boxbreaker_ad;

static adorch_ad *boxbreaker_create(adorch_ad_id id, const adorch_request *request) {
    (void)request;
    boxbreaker_ad *ad = calloc(1, sizeof *ad);
    if (ad) ad->id = id;
    return ad;
}

static int32_t boxbreaker_load(adorch_ad *opaque) {
    boxbreaker_ad *ad = opaque;
    host->failed(host, ad->id, ADORCH_ERROR_NO_FILL, 0, "");
    return 0;
}

static int32_t boxbreaker_show(adorch_ad *ad, const char *context) { (void)ad; (void)context; return ADORCH_ERROR_NOT_READY; }
static void boxbreaker_notify(adorch_ad *ad, uint32_t event, const char *detail) { (void)ad; (void)event; (void)detail; }
static void boxbreaker_destroy(adorch_ad *ad) { free(ad); }

ADORCH_PLUGIN_EXPORT const adorch_plugin_entry_t adorch_plugin_entry = {
    .abi_major = ADORCH_PLUGIN_ABI_MAJOR, .abi_minor = ADORCH_PLUGIN_ABI_MINOR, .struct_size = sizeof(adorch_plugin_entry_t),
    .name = "boxbreaker", .version = "1.0.0", .description = "tries every road out of its box (tests only)",
    .formats = ADORCH_FORMAT_BIT(ADORCH_FORMAT_INTERSTITIAL),
    .init = boxbreaker_init, .deinit = boxbreaker_deinit, .ad_create = boxbreaker_create, .ad_load = boxbreaker_load,
    .ad_show = boxbreaker_show, .ad_notify = boxbreaker_notify, .ad_destroy = boxbreaker_destroy,
};
