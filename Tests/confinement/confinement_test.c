/* Applies adorch_sandbox (Sources/CAdorchSandbox) to itself, as the plugin host does before it
 * loads a plugin, then tries what a plugin might: one line per check, "ok: NAME" or
 * "FAIL: NAME: what happened", read by Tests/IntegrationTests/ConfinementTests.swift.
 *
 *   confinement-test full WORK OUTSIDE      WORK: an empty folder under /tmp; OUTSIDE: one elsewhere
 *   confinement-test degraded WORK OUTSIDE  the same on a kernel made to look as if it had neither
 *                                           Landlock nor seccomp filters
 */
#define _GNU_SOURCE
#include "adorch_sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <pthread.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define ADDRESS_SPACE_BYTES (256ULL << 20)

static int failures;

static void check(const char *name, bool passed, const char *detail) {
    if (passed) {
        printf("ok: %s\n", name);
    } else {
        printf("FAIL: %s: %s\n", name, detail);
        failures++;
    }
    fflush(stdout);
}

/* A call that must fail with `expected`: the detail says what it did instead. */
static void check_refused(const char *name, long result, int expected) {
    int error = errno;
    char detail[160];
    if (result >= 0)
        snprintf(detail, sizeof detail, "it succeeded (returned %ld)", result);
    else
        snprintf(detail, sizeof detail, "errno %s, not %s", strerrorname_np(error), strerrorname_np(expected));
    check(name, result < 0 && error == expected, detail);
}

static void check_works(const char *name, long result) {
    char detail[160];
    snprintf(detail, sizeof detail, "failed: %s", strerror(errno));
    check(name, result >= 0, detail);
}

static void make_file(const char *path, const char *text) {
    FILE *file = fopen(path, "w");
    if (file == NULL || fputs(text, file) < 0 || fclose(file) != 0) {
        fprintf(stderr, "setup: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

static char *join(const char *folder, const char *name) {
    char *path;
    if (asprintf(&path, "%s/%s", folder, name) < 0) exit(2);
    return path;
}

static void *thread_body(void *argument) {
    *(int *)argument = 42;
    return NULL;
}

/* What a kernel without Landlock and without seccomp filters answers, made by a filter of
 * this program's own (so the sandbox's degraded paths run on this kernel). */
static void pretend_an_old_kernel(void) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int rc = ctx == NULL ? -ENOMEM : 0;
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(landlock_create_ruleset), 0);
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(seccomp), 0);
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(prctl), 1, SCMP_A0_32(SCMP_CMP_EQ, PR_SET_SECCOMP));
    if (rc == 0) rc = seccomp_load(ctx);
    if (rc != 0) {
        fprintf(stderr, "setup: cannot pretend an old kernel: %s\n", strerror(-rc));
        exit(2);
    }
    seccomp_release(ctx);
    /* libseccomp probed the kernel for the filter above: it probes again, as a new process would. */
    seccomp_reset(NULL, 0);
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "full") != 0 && strcmp(argv[1], "degraded") != 0)) {
        fprintf(stderr, "usage: %s full|degraded WORK OUTSIDE\n", argv[0]);
        return 2;
    }
    bool full = strcmp(argv[1], "full") == 0;
    const char *work = argv[2], *outside = argv[3];
    char *hidden_dir = join(work, "hidden-dir"), *hidden_entry = join(hidden_dir, "secret");
    char *hidden_file = join(work, "hidden-file"), *hidden_later = join(work, "hidden-later");
    char *sibling = join(work, "sibling"), *scratch = join(work, "scratch"), *scratch_file = join(scratch, "made");
    char *outside_file = join(outside, "existing"), *outside_new = join(outside, "made");
    if (mkdir(hidden_dir, 0700) != 0 || mkdir(scratch, 0700) != 0) {
        fprintf(stderr, "setup: %s\n", strerror(errno));
        return 2;
    }
    make_file(hidden_entry, "secret\n");
    make_file(hidden_file, "key\n");
    make_file(sibling, "sibling\n");
    make_file(outside_file, "outside\n");

    int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    printf("kernel: landlock ABI %d\n", abi < 0 ? 0 : abi);
    if (!full) pretend_an_old_kernel();

    const char *hidden[] = {hidden_dir, hidden_file, hidden_later};
    char report[8192];
    unsigned layers = adorch_sandbox_apply(hidden, 3, ADDRESS_SPACE_BYTES, 0, report, sizeof report);
    for (char *line = strtok(report, "\n"); line != NULL; line = strtok(NULL, "\n")) printf("report: %s\n", line);
    printf("layers:%s%s%s%s\n", layers & ADORCH_SANDBOX_NO_NEW_PRIVS ? " no_new_privs" : "",
           layers & ADORCH_SANDBOX_RLIMITS ? " rlimits" : "", layers & ADORCH_SANDBOX_LANDLOCK ? " landlock" : "",
           layers & ADORCH_SANDBOX_SECCOMP ? " seccomp" : "");

    char buffer[64];
    int fd = open(sibling, O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buffer, sizeof buffer);
    check("sibling-readable", n == 8 && memcmp(buffer, "sibling\n", 8) == 0, strerror(errno));
    check_works("usr-lib-listable", opendir("/usr/lib") != NULL ? 0 : -1);
    check_works("usr-lib-file-readable", open("/usr/lib/os-release", O_RDONLY));
    check_works("tmp-writable", open(scratch_file, O_WRONLY | O_CREAT | O_EXCL, 0600));
    check_works("dev-null-writable", open("/dev/null", O_WRONLY | O_TRUNC));
    check_works("inet-socket-allowed", socket(AF_INET, SOCK_STREAM, 0));
    check_works("kill-self-allowed", kill(getpid(), 0));
    int value = 0;
    pthread_t thread;
    int started = pthread_create(&thread, NULL, thread_body, &value);
    if (started == 0) pthread_join(thread, NULL);
    check("thread-starts", started == 0 && value == 42, strerror(started));
    check("address-space-bounds-malloc", malloc(2 * ADDRESS_SPACE_BYTES) == NULL && malloc(1 << 20) != NULL,
          "a malloc of twice the limit succeeded, or one of 1 MiB failed");

    if (full) {
        check_refused("hidden-dir-denied", open(hidden_dir, O_RDONLY | O_DIRECTORY), EACCES);
        check_refused("hidden-dir-entry-denied", open(hidden_entry, O_RDONLY), EACCES);
        check_refused("hidden-file-denied", open(hidden_file, O_RDONLY), EACCES);
        check_refused("hidden-later-not-creatable", open(hidden_later, O_WRONLY | O_CREAT, 0600), EACCES);
        check_refused("write-outside-tmp-denied", open(outside_file, O_WRONLY), EACCES);
        check_refused("create-outside-tmp-denied", open(outside_new, O_WRONLY | O_CREAT, 0600), EACCES);
        check_refused("fork-denied", fork(), EPERM);
        char *const args[] = {"/bin/true", NULL};
        check_refused("execve-denied", execve(args[0], args, environ), EPERM);
        check_refused("unix-socket-denied", socket(AF_UNIX, SOCK_STREAM, 0), EPERM);
        int pair[2];
        check_refused("unix-socketpair-denied", socketpair(AF_UNIX, SOCK_STREAM, 0, pair), EPERM);
        check_refused("kill-parent-denied", kill(getppid(), 0), EPERM);
        check_refused("ptrace-parent-denied", ptrace(PTRACE_ATTACH, getppid(), NULL, NULL), EPERM);
        char parent_memory[64];
        snprintf(parent_memory, sizeof parent_memory, "/proc/%d/mem", (int)getppid());
        check_refused("parent-memory-denied", open(parent_memory, O_RDONLY), EACCES);
    } else {
        /* Without Landlock nothing hides the paths: the degraded host says so and still runs. */
        check_works("hidden-file-readable-without-landlock", open(hidden_file, O_RDONLY));
        pid_t child = fork();
        if (child == 0) _exit(0);
        int status = 0;
        check("fork-works-without-seccomp", child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status), strerror(errno));
    }
    printf("%s: %d failed\n", argv[1], failures);
    return failures == 0 ? 0 : 1;
}
