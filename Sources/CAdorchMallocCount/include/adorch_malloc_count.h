#ifndef ADORCH_MALLOC_COUNT_H
#define ADORCH_MALLOC_COUNT_H

#include <stdint.h>

/* Calls to malloc so far in this process (all threads): linked into a program, this library's
 * malloc stands in front of glibc's and counts, so a benchmark can tell allocations per call. */
uint64_t adorch_malloc_count(void);

#endif
