/* adorch_worker_stat: /proc/TID/stat of the plugin host's own threads, right in a box.
 * Linked into adorch-plugin-host alone (worker_stat.c says why). */
#ifndef ADORCH_WORKER_STAT_H
#define ADORCH_WORKER_STAT_H

#include <stddef.h>

/* If `path` is exactly "/proc/TID/stat" and TID is one of this process's threads as its own
 * PID namespace numbers it (gettid()), writes that thread's entry in the mounted /proc,
 * "/proc/self/task/TID'/stat", to `out` and returns 1; otherwise returns 0 and leaves `out`
 * alone. Any thread may call it. */
int adorch_worker_stat_path(const char *path, char *out, size_t out_size);

#endif
