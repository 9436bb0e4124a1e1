/* A plugin built for a future ABI 2.1, whose entry layout this host does not know. The
 * host must read only the two version fields and refuse it. Compiled by the integration
 * test with plain cc against the installed header. */
#include <stdint.h>
#include "adorch/plugin.h"

ADORCH_PLUGIN_EXPORT const struct {
    uint32_t abi_major, abi_minor;
    const char *something_new;
} adorch_plugin_entry = {2, 1, "a layout from the future"};
