#define _GNU_SOURCE
#include "adorch_sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <sched.h>
#include <signal.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Landlock's values past Debian 12's <linux/landlock.h> (ABI 2), as the kernel defines them. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* The ruleset attribute in its ABI 6 layout: an older kernel takes the longer struct as long
 * as the fields it does not know are 0 (which they are, below the ABI that has them). */
struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

/* The rights a rule on a file (not a folder) may carry; the kernel refuses the others there. */
#define FILE_RIGHTS (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE | \
                     LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define READ_RIGHTS (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
/* /tmp: files and folders made, written, renamed and removed; no device nodes, no sockets
 * (a socket file there would be a rendezvous with a local service). */
#define TMP_RIGHTS (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE | \
                    LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SYM | \
                    LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_REFER)
/* The device files code writes to as a matter of course (`> /dev/null` truncates). */
static const char *const writable_devices[] = {"/dev/null", "/dev/zero", "/dev/urandom"};

struct report {
    char *text;
    size_t size, used;
};

__attribute__((format(printf, 2, 3))) static void say(struct report *r, const char *format, ...) {
    if (r->text == NULL || r->size == 0 || r->used + 1 >= r->size) return;
    va_list args;
    va_start(args, format);
    int n = vsnprintf(r->text + r->used, r->size - r->used, format, args);
    va_end(args);
    if (n < 0) return;
    r->used += (size_t)n < r->size - r->used ? (size_t)n : r->size - r->used - 1;
    if (r->used + 1 < r->size) {
        r->text[r->used++] = '\n';
        r->text[r->used] = '\0';
    }
}

/* ---- Hidden paths ---------------------------------------------------------------------- */

struct hidden {
    char **paths;
    size_t count;
};

/* `path` is `folder` or lies below it. */
static bool is_or_under(const char *path, const char *folder) {
    if (strcmp(folder, "/") == 0) return true;
    size_t n = strlen(folder);
    return strncmp(path, folder, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool is_hidden(const struct hidden *h, const char *path) {
    for (size_t i = 0; i < h->count; i++)
        if (strcmp(h->paths[i], path) == 0) return true;
    return false;
}

static bool hides_below(const struct hidden *h, const char *path) {
    for (size_t i = 0; i < h->count; i++)
        if (is_or_under(h->paths[i], path)) return true;
    return false;
}

/* The real path of `path`. One that does not exist yet is hidden as its real folder's entry,
 * so that the confined process cannot create it either (its folder gets no rule of its own). */
static char *resolve(const char *path) {
    char *real = realpath(path, NULL);
    if (real != NULL || errno != ENOENT) return real;
    char *copy = strdup(path);
    if (copy == NULL) return NULL;
    char *slash = strrchr(copy, '/');
    char *result = NULL;
    if (slash != NULL && slash[1] != '\0') {
        *slash = '\0';
        char *folder = realpath(slash == copy ? "/" : copy, NULL);
        if (folder != NULL && asprintf(&result, "%s/%s", strcmp(folder, "/") == 0 ? "" : folder, slash + 1) < 0) result = NULL;
        free(folder);
    }
    free(copy);
    if (result == NULL) errno = ENOENT;
    return result;
}

/* ---- Landlock -------------------------------------------------------------------------- */

struct landlock {
    int ruleset;
    uint64_t handled;
    const struct hidden *hidden;
    unsigned rules, failures;
    char first_failure[PATH_MAX + 64];
};

static void rule_failed(struct landlock *ll, const char *what, const char *path) {
    if (ll->failures++ == 0) snprintf(ll->first_failure, sizeof ll->first_failure, "%s %s: %s", what, path, strerror(errno));
}

static void add_rule(struct landlock *ll, const char *path, uint64_t rights) {
    int fd = open(path, O_PATH | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        rule_failed(ll, "open", path);
        return;
    }
    struct stat info;
    if (fstat(fd, &info) == 0 && !S_ISDIR(info.st_mode)) rights &= FILE_RIGHTS;
    struct landlock_path_beneath_attr attr = {.allowed_access = rights & ll->handled, .parent_fd = fd};
    if (attr.allowed_access != 0) {
        if (syscall(SYS_landlock_add_rule, ll->ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) == 0)
            ll->rules++;
        else
            rule_failed(ll, "rule for", path);
    }
    close(fd);
}

/* Gives `rights` on `path` and everything below it but the hidden paths: one rule for the
 * whole tree when nothing hidden is in it, else one per entry, recursing only into the
 * entries that lead to a hidden path. A folder on such a branch gets no rule itself (a rule
 * on it would cover the hidden path below it), so it cannot be listed nor written in.
 * Symlinks get none: what they lead to has its own. */
static void allow_tree(struct landlock *ll, const char *path, uint64_t rights) {
    if (is_hidden(ll->hidden, path)) return;
    if (!hides_below(ll->hidden, path)) {
        add_rule(ll, path, rights);
        return;
    }
    DIR *folder = opendir(path);
    if (folder == NULL) {
        rule_failed(ll, "list", path);
        return;
    }
    struct dirent *entry;
    while ((entry = readdir(folder)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        char child[PATH_MAX];
        if (snprintf(child, sizeof child, "%s/%s", strcmp(path, "/") == 0 ? "" : path, entry->d_name) >= (int)sizeof child) {
            errno = ENAMETOOLONG;
            rule_failed(ll, "entry of", path);
            continue;
        }
        /* readdir's d_type, where the filesystem gives it, spares an lstat an entry: a
         * crowded folder on the way to a hidden path (/tmp) costs every host's start. */
        bool link = entry->d_type == DT_LNK;
        if (entry->d_type == DT_UNKNOWN) {
            struct stat info;
            if (lstat(child, &info) != 0) {
                rule_failed(ll, "stat", child);
                continue;
            }
            link = S_ISLNK(info.st_mode);
        }
        if (!link) allow_tree(ll, child, rights);
    }
    closedir(folder);
}

static unsigned thread_count(void) {
    DIR *tasks = opendir("/proc/self/task");
    if (tasks == NULL) return 0;
    unsigned n = 0;
    struct dirent *entry;
    while ((entry = readdir(tasks)) != NULL)
        if (entry->d_name[0] != '.') n++;
    closedir(tasks);
    return n;
}

/* The ABI of the Landlock domain applied, or 0. */
static int apply_landlock(const struct hidden *hidden, struct report *r) {
    int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 0) {
        const char *why = errno == ENOSYS       ? "this kernel has no Landlock"
                          : errno == EOPNOTSUPP ? "Landlock is off (not in the kernel's lsm= list)"
                          : errno == EPERM      ? "a seccomp filter around the process refuses its calls (systemd's SystemCallFilter=?)"
                                                : strerror(errno);
        say(r, "landlock: refused: %s; the hidden paths stay readable", why);
        return 0;
    }
    unsigned threads = thread_count();
    if (threads > 1) {
        say(r, "landlock: refused: %u threads already run, and Landlock would confine only the calling one", threads);
        return 0;
    }
    uint64_t handled = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0 to MAKE_SYM */
    if (abi >= 2) handled |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5) handled |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    struct ruleset_attr attr = {
        .handled_access_fs = handled,
        .scoped = abi >= 6 ? LANDLOCK_SCOPE_SIGNAL | LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET : 0,
    };
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (ruleset < 0) {
        say(r, "landlock: refused: creating the ruleset (ABI %d): %s", abi, strerror(errno));
        return 0;
    }
    struct landlock ll = {.ruleset = ruleset, .handled = handled, .hidden = hidden};
    allow_tree(&ll, "/", READ_RIGHTS);
    for (size_t i = 0; i < sizeof writable_devices / sizeof *writable_devices; i++)
        if (!hides_below(hidden, writable_devices[i]))
            add_rule(&ll, writable_devices[i], LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE);
    char *tmp = realpath("/tmp", NULL);
    if (tmp != NULL) allow_tree(&ll, tmp, TMP_RIGHTS);
    free(tmp);
    int restricted = (int)syscall(SYS_landlock_restrict_self, ruleset, 0);
    int restrict_errno = errno;
    close(ruleset);
    if (restricted != 0) {
        say(r, "landlock: refused: restrict_self (ABI %d): %s", abi, strerror(restrict_errno));
        return 0;
    }
    say(r, "landlock: applied (ABI %d, %u rules): read and execute everywhere but the %zu hidden paths, "
           "write only below /tmp and to %s, %s, %s; %s",
        abi, ll.rules, hidden->count, writable_devices[0], writable_devices[1], writable_devices[2],
        abi >= 6 ? "signals and abstract Unix sockets scoped to the host"
                 : "no signal or abstract-socket scoping below ABI 6 (seccomp still refuses signals to other processes)");
    if (ll.failures > 0)
        say(r, "landlock: %u paths got no rule, so stay out of reach (first: %s)", ll.failures, ll.first_failure);
    return abi;
}

/* ---- seccomp --------------------------------------------------------------------------- */

struct filter {
    scmp_filter_ctx ctx;
    unsigned rules, failures;
    char first_failure[96];
};

static void deny_number(struct filter *f, const char *name, int number, int error, unsigned count,
                        const struct scmp_arg_cmp *compare) {
    int rc = number == __NR_SCMP_ERROR ? -ENOSYS : seccomp_rule_add_array(f->ctx, SCMP_ACT_ERRNO(error), number, count, compare);
    if (rc == 0)
        f->rules++;
    else if (f->failures++ == 0)
        snprintf(f->first_failure, sizeof f->first_failure, "%s: %s", name, strerror(-rc));
}

static void deny(struct filter *f, const char *name, int error, unsigned count, const struct scmp_arg_cmp *compare) {
    deny_number(f, name, seccomp_syscall_resolve_name(name), error, count, compare);
}

/* A call libseccomp may not know by name: its number when the name does not resolve. */
static void deny_numbered(struct filter *f, const char *name, int number) {
    int known = seccomp_syscall_resolve_name(name);
    deny_number(f, name, known == __NR_SCMP_ERROR ? number : known, EPERM, 0, NULL);
}

static void deny_all(struct filter *f, const char *const *names, size_t count, unsigned compares, const struct scmp_arg_cmp *compare) {
    for (size_t i = 0; i < count; i++) deny(f, names[i], EPERM, compares, compare);
}

#define DENY(f, names, ...)                                                              \
    do {                                                                                 \
        const struct scmp_arg_cmp compare_[] = {__VA_ARGS__};                            \
        deny_all(f, names, sizeof names / sizeof *names, sizeof compare_ / sizeof *compare_, compare_); \
    } while (0)
#define DENY_ALWAYS(f, names) deny_all(f, names, sizeof names / sizeof *names, 0, NULL)
/* An int argument equal to `value` in its low 32 bits, whatever the high ones: the kernel reads
 * only those, so a plain 64-bit comparison let AF_UNIX | 1 << 32 through. */
#define INT_IS(arg, value) SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, (uint32_t)(value))

/* Other processes' memory and file descriptors: the daemon's hold the reward key and every
 * app's ads. (pidfd_send_signal too, as its target cannot be told from the pidfd.) */
static const char *const other_processes[] = {"ptrace", "process_vm_readv", "process_vm_writev",
                                              "pidfd_open", "pidfd_send_signal", "pidfd_getfd"};
/* Signals to any process but itself: raise, abort and its own threads still work; stopping
 * or killing the daemon, an app or another host does not. */
static const char *const signals[] = {"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"};
/* No other program and no second process: the host runs the plugin's code in this process
 * only, under these limits (a child would be out of the watchdog's sight). */
static const char *const new_processes[] = {"execve", "execveat", "fork", "vfork"};
/* Sockets of any family but AF_INET, AF_INET6 and AF_NETLINK, which an ad network needs (the
 * network, and route lookups): a Unix socket would reach the daemon's Varlink socket, journald,
 * D-Bus or another local service (the host has its channel to the daemon already), a vsock the
 * hypervisor, a packet socket the raw network. */
static const char *const sockets[] = {"socket", "socketpair"};
/* Mounts, namespaces, root changes: each is a way out of the filesystem view Landlock set. */
static const char *const namespaces[] = {"mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen",
                                         "fsconfig", "fsmount", "fspick", "open_tree", "move_mount", "mount_setattr"};
/* Kernel interfaces no ad SDK needs and that carry much of the kernel's attack surface:
 * eBPF, perf, io_uring (whose operations bypass this filter), userfaultfd (a tool to win
 * kernel races), the keyrings (the daemon's keys could be in its session keyring). */
static const char *const kernel_surface[] = {"bpf", "perf_event_open", "io_uring_setup", "io_uring_enter",
                                             "io_uring_register", "userfaultfd", "keyctl", "add_key", "request_key"};
/* The machine itself: modules, a new kernel, reboot, swap, process accounting. They need
 * privileges the host should not have; refused in case it runs as root. */
static const char *const machine[] = {"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
                                      "reboot", "swapon", "swapoff", "acct"};
/* Files by handle: open_by_handle_at opens a file by its inode, past every path check. */
static const char *const file_handles[] = {"open_by_handle_at", "name_to_handle_at"};
/* TIOCSTI types into a terminal, which the host's stderr may be when run by hand; FIOSETOWN
 * and SIOCSPGRP, like fcntl's F_SETOWN, make a process the target of a socket's SIGIO (or any
 * signal F_SETSIG names): a signal to the daemon by another road. */
static const char *const ioctl_only[] = {"ioctl"};
static const char *const fcntl_only[] = {"fcntl"};
/* Memory outside the address-space limit and the watchdog's sight: a memfd's pages or a System
 * V segment need not be mapped to be held. */
static const char *const unmapped_memory[] = {"memfd_create", "memfd_secret", "shmget"};
/* Calls that name a process by pid (0: the caller): outside a box they reach the daemon and
 * the other hosts of its user, which a box's PID namespace does not let them name. */
static const char *const by_pid_first[] = {"prlimit64", "sched_setaffinity", "sched_setparam", "sched_setscheduler",
                                          "sched_setattr", "migrate_pages", "move_pages"};
static const char *const by_pid_second[] = {"setpriority", "ioprio_set"};
/* A file's mode, owner, times, extended attributes, and watches on it: Landlock has no right
 * for these, so a host could otherwise make the daemon's hidden ledger or key world-readable
 * and writable, lock apps out of the socket folder, or learn when a hidden file changes.
 * Refused for every path, the host's own included: an ad SDK has no need of them. Those on an
 * fd (fchmod, fchown, fsetxattr) stay: the fd was opened under Landlock, and an O_PATH one,
 * opened past it, is refused by the kernel (EBADF). */
static const char *const file_metadata[] = {"chmod", "fchmodat", "chown", "lchown", "fchownat", "utime", "utimes",
                                            "utimensat", "futimesat", "setxattr", "lsetxattr", "removexattr",
                                            "lremovexattr", "inotify_add_watch", "fanotify_init", "fanotify_mark"};
/* The same, added after the libseccomp this is built with knew their names: by number, which
 * every architecture shares since Linux 5.1 numbered new calls alike. fchmodat2 also takes
 * AT_EMPTY_PATH, so an O_PATH fd opened past Landlock would reach it. */
static const struct {
    const char *name;
    int number;
} newer_file_metadata[] = {{"fchmodat2", 452}, {"setxattrat", 463}, {"removexattrat", 466}};
static const char *const set_priority[] = {"setpriority"};
static const char *const set_io_priority[] = {"ioprio_set"};

/* `refuse_truncate`: Landlock applied below ABI 3, which does not control truncate(2): the host
 * could still empty a hidden file, which it cannot open, by its path. */
static bool apply_seccomp(bool refuse_truncate, bool boxed, struct report *r) {
    struct filter f = {.ctx = seccomp_init(SCMP_ACT_ALLOW)};
    if (f.ctx == NULL) {
        say(r, "seccomp: refused: libseccomp could not start a filter");
        return false;
    }
    /* Every thread of the process, not only the caller: that needs seccomp(2), which libseccomp
     * does without (through prctl) where the kernel or a filter around the process refuses it. */
    bool every_thread = seccomp_attr_set(f.ctx, SCMP_FLTATR_CTL_TSYNC, 1) == 0;
    /* The kernel's own error when it refuses the filter (libseccomp says ECANCELED otherwise). */
    seccomp_attr_set(f.ctx, SCMP_FLTATR_API_SYSRAWRC, 1);
    /* A system call of another architecture (int 0x80) has other numbers, which the rules do
     * not name: it kills the host (libseccomp's default kills only the thread, leaving the host
     * hung). */
    seccomp_attr_set(f.ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    pid_t self = getpid();
    DENY_ALWAYS(&f, other_processes);
    DENY(&f, signals, SCMP_A0_32(SCMP_CMP_NE, (uint32_t)self));
    DENY_ALWAYS(&f, new_processes);
    /* A clone that makes a thread shares this process and its filter; any other makes a process. */
    static const char *const clone[] = {"clone"};
    DENY(&f, clone, SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    /* clone3's flags are in memory the filter cannot read: it answers as if absent, and glibc
     * falls back to clone, whose flags it can. */
    deny(&f, "clone3", ENOSYS, 0, NULL);
    for (int family = 0; family < AF_MAX; family++)
        if (family != AF_INET && family != AF_INET6 && family != AF_NETLINK) DENY(&f, sockets, INT_IS(0, family));
    DENY_ALWAYS(&f, namespaces);
    DENY_ALWAYS(&f, kernel_surface);
    DENY_ALWAYS(&f, machine);
    DENY_ALWAYS(&f, file_handles);
    DENY(&f, ioctl_only, INT_IS(1, TIOCSTI));
    DENY(&f, ioctl_only, INT_IS(1, FIOSETOWN));
    DENY(&f, ioctl_only, INT_IS(1, SIOCSPGRP));
    DENY(&f, fcntl_only, INT_IS(1, F_SETOWN));
    DENY(&f, fcntl_only, INT_IS(1, F_SETOWN_EX));
    /* PRIO_USER and PRIO_PGRP (and their I/O priority twins) reach every process of the user
     * or of the process group, which the host shares with the daemon: no PID namespace
     * narrows them. Only a process's own: PRIO_PROCESS, IOPRIO_WHO_PROCESS. */
    DENY(&f, set_priority, SCMP_A0_32(SCMP_CMP_NE, PRIO_PROCESS));
    DENY(&f, set_io_priority, SCMP_A0_32(SCMP_CMP_NE, 1 /* IOPRIO_WHO_PROCESS */));
    DENY_ALWAYS(&f, unmapped_memory);
    DENY_ALWAYS(&f, file_metadata);
    for (size_t i = 0; i < sizeof newer_file_metadata / sizeof *newer_file_metadata; i++)
        deny_numbered(&f, newer_file_metadata[i].name, newer_file_metadata[i].number);
    if (!boxed) {
        DENY(&f, by_pid_first, SCMP_A0_32(SCMP_CMP_NE, 0));
        DENY(&f, by_pid_second, SCMP_A1_32(SCMP_CMP_NE, 0));
    }
    if (refuse_truncate) deny(&f, "truncate", EPERM, 0, NULL);
    int rc = seccomp_load(f.ctx);
    seccomp_release(f.ctx);
    if (rc != 0) {
        say(r, "seccomp: refused: loading the filter: %s", strerror(-rc));
        return false;
    }
    say(r, "seccomp: applied (%u rules): no ptrace, signals only to itself, no exec, fork or clone but threads, "
           "no Unix sockets (network sockets allowed), no mounts or namespaces, no bpf, perf, io_uring, "
           "userfaultfd, keyrings, modules, kexec, reboot, swap, acct, file handles, socket owners (F_SETOWN), "
           "memfd or System V shared memory, no change to a file's mode, owner, times or extended attributes "
           "by path, no inotify or fanotify%s%s",
        f.rules, boxed ? "" : ", limits, priority, affinity or I/O priority of another process",
        refuse_truncate ? ", truncate by path (Landlock below ABI 3 does not control it)" : "");
    if (f.failures > 0) say(r, "seccomp: %u rules missing (first: %s)", f.failures, f.first_failure);
    unsigned threads = every_thread ? 1 : thread_count();
    if (threads > 1)
        say(r, "seccomp: on the calling thread only: seccomp(2) is refused, and %u threads already run", threads);
    return f.failures == 0 && threads <= 1;
}

/* ---- All layers ------------------------------------------------------------------------ */

static bool apply_rlimits(uint64_t address_space_bytes, unsigned box_tasks, struct report *r) {
    bool ok = true;
    /* A core dump would write the plugin's memory (the ads, the host's channel) to disk. */
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0) {
        say(r, "rlimits: core dumps not turned off: %s", strerror(errno));
        ok = false;
    }
    /* Counted in the box's own user namespace: its threads cannot use up its user's task
     * limit, which the daemon and the other hosts share. (Root is exempt: a daemon run as
     * root needs a cgroup's pids.max for this, docs/confinement.md.) */
    struct rlimit tasks = {box_tasks, box_tasks};
    if (box_tasks == 0) {
        say(r, "rlimits: no task limit: not in a box of its own");
    } else if (setrlimit(RLIMIT_NPROC, &tasks) != 0) {
        say(r, "rlimits: tasks not bounded: %s", strerror(errno));
        ok = false;
    } else {
        say(r, "rlimits: at most %u tasks in its box%s", box_tasks, getuid() == 0 ? " (not enforced: it runs as root)" : "");
    }
    if (address_space_bytes == 0) {
        say(r, "rlimits: core dumps off; no address-space limit asked");
        return ok;
    }
    struct rlimit current;
    rlim_t bound = address_space_bytes;
    if (getrlimit(RLIMIT_AS, &current) == 0 && current.rlim_max != RLIM_INFINITY && current.rlim_max < bound)
        bound = current.rlim_max;
    /* The hard limit too, so the plugin cannot raise it again. */
    struct rlimit limit = {bound, bound};
    if (setrlimit(RLIMIT_AS, &limit) != 0) {
        say(r, "rlimits: address space not bounded: %s", strerror(errno));
        return false;
    }
    say(r, "rlimits: core dumps off; address space at most %llu MiB", (unsigned long long)(bound >> 20));
    return ok;
}

unsigned adorch_sandbox_apply(const char *const *hidden_paths, size_t hidden_count, uint64_t address_space_bytes,
                              unsigned box_tasks, char *report, size_t report_size) {
    struct report r = {.text = report, .size = report_size};
    if (report != NULL && report_size > 0) report[0] = '\0';
    unsigned applied = 0;

    if (apply_rlimits(address_space_bytes, box_tasks, &r)) applied |= ADORCH_SANDBOX_RLIMITS;

    /* No setuid or file capability the plugin could exec gains anything; Landlock and an
     * unprivileged seccomp filter need it. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0) {
        applied |= ADORCH_SANDBOX_NO_NEW_PRIVS;
        say(&r, "no_new_privs: applied");
    } else {
        say(&r, "no_new_privs: refused: %s", strerror(errno));
    }

    struct hidden hidden = {.paths = calloc(hidden_count ? hidden_count : 1, sizeof(char *))};
    for (size_t i = 0; hidden.paths != NULL && i < hidden_count; i++) {
        char *real = resolve(hidden_paths[i]);
        if (real == NULL)
            say(&r, "hidden: %s skipped: %s", hidden_paths[i], strerror(errno));
        else
            hidden.paths[hidden.count++] = real;
    }
    if (hidden.paths == NULL) say(&r, "landlock: refused: out of memory");
    int landlock_abi = hidden.paths == NULL ? 0 : apply_landlock(&hidden, &r);
    if (landlock_abi > 0) applied |= ADORCH_SANDBOX_LANDLOCK;
    for (size_t i = 0; i < hidden.count; i++) free(hidden.paths[i]);
    free(hidden.paths);

    /* Last, so that none of the set-up above meets the filter. */
    if (apply_seccomp(landlock_abi > 0 && landlock_abi < 3, box_tasks != 0, &r)) applied |= ADORCH_SANDBOX_SECCOMP;
    return applied;
}

int adorch_sandbox_die_with_parent(int parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return 0;
    return getppid() == (pid_t)parent;
}
