#include "adorch_malloc_count.h"

#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ADORCH_SANITIZED 1
#endif
#endif

static uint64_t calls;

/* A sanitizer's runtime has its own malloc, which must stay the only one: there nothing is
 * counted, and the benchmark says so. */
#ifndef ADORCH_SANITIZED
/* glibc's own entry point, which its malloc is an alias of. */
extern void *__libc_malloc(size_t size);

/* Swift's allocations (swift_slowAlloc) and Foundation's all come through malloc; free,
 * realloc and the aligned forms stay glibc's, which take what __libc_malloc returned. */
void *malloc(size_t size) {
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    return __libc_malloc(size);
}
#endif

uint64_t adorch_malloc_count(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }
