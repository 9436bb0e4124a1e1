#define _GNU_SOURCE
#include "adorch_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Writes all of `text` to `path`; 0 or errno. Async-signal-safe: it runs in the child of a
 * threaded process, between clone and exec. */
static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    size_t length = strlen(text);
    ssize_t written = write(fd, text, length);
    int error = written == (ssize_t)length ? 0 : (written < 0 ? errno : EIO);
    close(fd);
    return error;
}

/* The child between clone and exec: only async-signal-safe calls (another thread of the
 * daemon may have held malloc's lock when it was cloned). On failure it writes its errno to
 * `error_fd` and exits 127. */
static void child(const char *path, char *const argv[], char *const envp[], int channel_fd, int channel_target,
                  int status_fd, int status_target, int output_fd, const char *uid_map, const char *gid_map, int error_fd) {
    int error = 0;
    /* Every signal at its default and none blocked: the daemon's handling is not the host's. */
    struct sigaction fallback = {.sa_handler = SIG_DFL};
    for (int sig = 1; sig < NSIG; sig++) sigaction(sig, &fallback, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* One uid and one gid mapped, the daemon's own: the host is the same user inside, with no
     * capability over anything outside (and, as the daemon is not root, none inside after exec). */
    if (!error) error = write_file("/proc/self/setgroups", "deny");
    if (!error) error = write_file("/proc/self/uid_map", uid_map);
    if (!error) error = write_file("/proc/self/gid_map", gid_map);
    /* Above every target first, so that moving one descriptor cannot close the other. */
    int channel = error ? -1 : fcntl(channel_fd, F_DUPFD, 10);
    int status = channel < 0 ? -1 : fcntl(status_fd, F_DUPFD, 10);
    if (!error && (channel < 0 || status < 0)) error = errno;
    if (!error && (dup2(channel, channel_target) < 0 || dup2(status, status_target) < 0)) error = errno;
    int null = error ? -1 : open("/dev/null", O_RDONLY);
    if (!error && (null < 0 || dup2(null, STDIN_FILENO) < 0)) error = errno;
    if (!error && (dup2(output_fd, STDOUT_FILENO) < 0 || dup2(output_fd, STDERR_FILENO) < 0)) error = errno;
    if (!error) {
        if (null > STDIN_FILENO) close(null);
        close(channel);
        close(status);
        execve(path, argv, envp);
        error = errno;
    }
    ssize_t ignored = write(error_fd, &error, sizeof error);
    (void)ignored;
    _exit(127);
}

int adorch_spawn_boxed(const char *path, char *const argv[], char *const envp[], int channel_fd, int channel_target,
                       int status_target, int output_fd, pid_t *pid, int *status_fd) {
    /* Formatted before the clone: the child may not call snprintf. */
    char uid_map[64], gid_map[64];
    snprintf(uid_map, sizeof uid_map, "%u %u 1\n", (unsigned)geteuid(), (unsigned)geteuid());
    snprintf(gid_map, sizeof gid_map, "%u %u 1\n", (unsigned)getegid(), (unsigned)getegid());
    int errors[2], status[2];
    if (pipe2(errors, O_CLOEXEC) != 0) return errno;
    if (pipe2(status, O_CLOEXEC) != 0) {
        int error = errno;
        close(errors[0]);
        close(errors[1]);
        return error;
    }
    /* A NULL stack without CLONE_VM: the child runs on a copy of this one, as after fork. */
    long made = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWIPC | SIGCHLD, NULL, NULL, NULL, 0);
    if (made == 0) {
        close(errors[0]);
        child(path, argv, envp, channel_fd, channel_target, status[1], status_target, output_fd, uid_map, gid_map, errors[1]);
    }
    int clone_error = errno;
    close(errors[1]);
    close(status[1]);
    if (made < 0) {
        close(errors[0]);
        close(status[0]);
        return -clone_error;
    }
    int error = 0;
    ssize_t got;
    do got = read(errors[0], &error, sizeof error);
    while (got < 0 && errno == EINTR);
    close(errors[0]);
    if (got == (ssize_t)sizeof error) {
        int ignored;
        waitpid((pid_t)made, &ignored, 0);
        close(status[0]);
        return error ? error : EIO;
    }
    *pid = (pid_t)made;
    *status_fd = status[0];
    return 0;
}

int adorch_cloexec_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC) == 0 ? 0 : errno; }

int adorch_box_init(int status_fd, int channel_fd) {
    /* The daemon gone is the end of the box: pid 1 taking its namespace with it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    pid_t host = fork();
    if (host < 0) return -errno;
    if (host == 0) {
        close(status_fd);
        /* The host dies with this process too, and so with the daemon. */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        return getppid() == 1 ? 0 : -ESRCH;
    }
    close(channel_fd);
    /* pid 1 of the box: reaps whatever ends in it until the host does, then hands the host's
     * wait status to the daemon (its own exit says nothing: a signal pid 1 sends itself, as
     * abort does, is ignored) and leaves, which ends every other process in the box. */
    for (;;) {
        int status;
        pid_t ended = waitpid(-1, &status, 0);
        if (ended == host) {
            ssize_t ignored = write(status_fd, &status, sizeof status);
            (void)ignored;
            _exit(0);
        }
        if (ended < 0 && errno != EINTR) _exit(1);
    }
}
