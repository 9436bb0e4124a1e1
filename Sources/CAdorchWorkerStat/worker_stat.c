/* libdispatch's own thread pool on Linux checks, once a second while a global queue has work
 * waiting, how many of its workers are running: it opens "/proc/TID/stat" for each, TID its
 * gettid(), and if an open fails it ends the process ("workq: registered worker exited
 * prematurely", SIGILL). In a box (box.c) TID is the box's PID namespace's number while /proc
 * is the machine's (or, under adorchd.service's ProtectProc=invisible, the part of it the
 * daemon's user may see), so that path names another process or none, and the host died under
 * load every 10 to 15 minutes. A /proc of the box's own would need a mount the unit's
 * hardening and older kernels refuse (docs/confinement.md), so the host answers those paths
 * itself: this `open`, which libdispatch (linked into the host, statically in a release build)
 * binds to before the C library's, sends a thread's own box-numbered stat path to the same
 * thread's entry under /proc/self/task, and every other path on to the C library unchanged. */
#define _GNU_SOURCE
/* Its own `open` below: never glibc's inline checking wrapper of the same name. */
#undef _FORTIFY_SOURCE
#include "adorch_worker_stat.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* TID from "/proc/TID/stat", or 0 if `path` is anything else. */
static long stat_tid(const char *path) {
    static const char prefix[] = "/proc/";
    if (strncmp(path, prefix, sizeof prefix - 1) != 0) return 0;
    const char *digits = path + sizeof prefix - 1;
    char *end;
    long tid = strtol(digits, &end, 10);
    if (end == digits || *digits < '1' || *digits > '9' || strcmp(end, "/stat") != 0) return 0;
    return tid;
}

/* The innermost number of "NSpid:" in a task's status: the thread as its own namespace has it. */
static long innermost_tid(int task_dir) {
    int fd = openat(task_dir, "status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[4096];
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    if (got <= 0) return 0;
    text[got] = '\0';
    const char *line = strstr(text, "\nNSpid:");
    if (line == NULL) return 0;
    line += 7;
    long last = 0;
    for (;;) {
        char *end;
        long value = strtol(line, &end, 10);
        if (end == line) return last;
        last = value;
        line = end;
    }
}

int adorch_worker_stat_path(const char *path, char *out, size_t out_size) {
    long tid = stat_tid(path);
    if (tid <= 0) return 0;
    DIR *tasks = opendir("/proc/self/task");
    if (tasks == NULL) return 0;
    int found = 0;
    struct dirent *entry;
    while (!found && (entry = readdir(tasks)) != NULL) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
        int task = openat(dirfd(tasks), entry->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (task < 0) continue;
        if (innermost_tid(task) == tid) {
            int length = snprintf(out, out_size, "/proc/self/task/%s/stat", entry->d_name);
            found = length > 0 && (size_t)length < out_size;
        }
        close(task);
    }
    closedir(tasks);
    return found;
}

int open(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & O_CREAT || (flags & O_TMPFILE) == O_TMPFILE) {
        va_list arguments;
        va_start(arguments, flags);
        mode = va_arg(arguments, mode_t);
        va_end(arguments);
    }
    char own[64];
    return openat(AT_FDCWD, adorch_worker_stat_path(path, own, sizeof own) ? own : path, flags, mode);
}
