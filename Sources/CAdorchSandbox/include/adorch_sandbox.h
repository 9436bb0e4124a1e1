/* adorch_sandbox: confines the calling process, irreversibly: the plugin host applies it
 * before it dlopens the plugin (docs/confinement.md says what each layer takes away and what
 * a confined plugin can still do). A layer the kernel lacks is skipped and said so in the
 * report; the others still apply. */
#ifndef ADORCH_SANDBOX_H
#define ADORCH_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

/* The layers, as bits of adorch_sandbox_apply's result. */
enum {
    ADORCH_SANDBOX_NO_NEW_PRIVS = 1u << 0,  /* PR_SET_NO_NEW_PRIVS */
    ADORCH_SANDBOX_RLIMITS = 1u << 1,       /* RLIMIT_CORE 0 and, when asked, RLIMIT_AS */
    ADORCH_SANDBOX_LANDLOCK = 1u << 2,      /* the filesystem allow-list (and scopes, ABI >= 6) */
    ADORCH_SANDBOX_SECCOMP = 1u << 3,       /* the system call filter */
};

/* Applies every layer to the calling process, hiding the `hidden_count` paths of
 * `hidden_paths` (files or folders, resolved through symlinks; one that does not exist yet
 * is hidden as an entry of its folder, so it cannot be made either; one whose folder does
 * not exist is reported and skipped) and, when `address_space_bytes` is not 0, bounding RLIMIT_AS.
 * Call it before the process starts threads: Landlock confines the calling thread and the
 * threads it starts later only, so a process with other threads already running gets no
 * Landlock layer (said in the report). Returns the bits of the layers that applied in full,
 * and writes one line per layer (applied, degraded, or refused, with the reason) to
 * `report`, cut to fit `report_size`. */
unsigned adorch_sandbox_apply(const char *const *hidden_paths, size_t hidden_count,
                              uint64_t address_space_bytes, char *report, size_t report_size);

/* Makes the calling process die with SIGKILL when its parent does (PR_SET_PDEATHSIG), and
 * returns non-zero if its parent is still `parent` (the parent may have died before this
 * took effect). A plugin host calls it first: nothing of a dead daemon's may run on. */
int adorch_sandbox_die_with_parent(int parent);

#endif
