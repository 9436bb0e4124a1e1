/* adorch_sandbox: confines the calling process, irreversibly: the plugin host applies it
 * before it dlopens the plugin (docs/confinement.md says what each layer takes away and what
 * a confined plugin can still do). A layer the kernel lacks is skipped and said so in the
 * report; the others still apply. */
#ifndef ADORCH_SANDBOX_H
#define ADORCH_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The layers, as bits of adorch_sandbox_apply's result. */
enum {
    ADORCH_SANDBOX_NO_NEW_PRIVS = 1u << 0,  /* PR_SET_NO_NEW_PRIVS */
    ADORCH_SANDBOX_RLIMITS = 1u << 1,       /* RLIMIT_CORE 0, when asked RLIMIT_AS, in a box RLIMIT_NPROC */
    ADORCH_SANDBOX_LANDLOCK = 1u << 2,      /* the filesystem allow-list (and scopes, ABI >= 6) */
    ADORCH_SANDBOX_SECCOMP = 1u << 3,       /* the system call filter */
};

/* Applies every layer to the calling process, hiding the `hidden_count` paths of
 * `hidden_paths` (files or folders, resolved through symlinks; one that does not exist yet
 * is hidden as an entry of its folder, so it cannot be made either; one whose folder does
 * not exist is reported and skipped) and, when `address_space_bytes` is not 0, bounding RLIMIT_AS.
 * Call it before the process starts threads: Landlock confines the calling thread and the
 * threads it starts later only, so a process with other threads already running gets no
 * Landlock layer (said in the report). `box_tasks` is 0 for a process that is not in a box
 * of its own (adorch_spawn_boxed): the system call filter then also refuses the calls that
 * name another process by pid (limits, priority, affinity, I/O priority), which a box's PID
 * namespace keeps from reaching outside. In a box it is the most tasks (threads) the box may
 * run: RLIMIT_NPROC, which the kernel counts per user namespace, so only the box's own.
 * Returns the bits of the layers that applied in full, and writes one line per layer
 * (applied, degraded, or refused, with the reason) to `report`, cut to fit `report_size`. */
unsigned adorch_sandbox_apply(const char *const *hidden_paths, size_t hidden_count,
                              uint64_t address_space_bytes, unsigned box_tasks, char *report, size_t report_size);

/* Makes the calling process die with SIGKILL when its parent does (PR_SET_PDEATHSIG), and
 * returns non-zero if its parent is still `parent` (the parent may have died before this
 * took effect). A plugin host calls it first: nothing of a dead daemon's may run on. */
int adorch_sandbox_die_with_parent(int parent);

/* Starts the program `path` in a box: new user, PID and IPC namespaces, the caller's uid
 * and gid mapped to themselves. No process inside can name one outside by pid (kill, prlimit,
 * setpriority, F_SETOWN, ptrace …: ESRCH), and its tasks are counted apart. `channel_fd`
 * becomes the child's `channel_target`, the write end of a new pipe its `status_target`,
 * stdin is /dev/null, `output_fd` its stdout and stderr, every signal is at its default and
 * none blocked; `envp` is its whole environment. Safe from a threaded process. Returns 0, the child's pid (pid 1 of the box,
 * which must call adorch_box_init) and the pipe's read end (close-on-exec) in `status_fd`;
 * -errno when the kernel refused the namespaces (no user namespaces, or a filter around the
 * caller: the caller may start it unboxed); errno when the program could not be started. */
int adorch_spawn_boxed(const char *path, char *const argv[], char *const envp[], int channel_fd, int channel_target,
                       int status_target, int output_fd, pid_t *pid, int *status_fd);

/* A pipe whose both ends close on exec (pipe2 with O_CLOEXEC, which Swift's Glibc module does
 * not declare): made that way at once, so no child another thread starts meanwhile keeps an
 * end. Returns 0 or errno. */
int adorch_cloexec_pipe(int fds[2]);

/* For the program adorch_spawn_boxed started, first thing, before any thread: forks the
 * process that does the work, which returns 0 (it is pid 2 of the box and closes
 * `status_fd`). The caller stays in this function as the box's pid 1 and never returns:
 * it closes `channel_fd`, reaps, and when the worker ends writes its wait status (an int)
 * to `status_fd` and exits 0, which ends everything left in the box. Returns -errno if the
 * fork failed. */
int adorch_box_init(int status_fd, int channel_fd);

#endif
