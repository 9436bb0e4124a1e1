/* Compile-time checks on the plugin ABI: the header must build as plain C, and the two
 * fields a host reads before it knows a plugin's version must never move. */
#include <stddef.h>
#include "adorch/plugin.h"

_Static_assert(offsetof(adorch_plugin_entry_t, abi_major) == 0, "abi_major must stay first");
_Static_assert(offsetof(adorch_plugin_entry_t, abi_minor) == 4, "abi_minor must stay second");
_Static_assert(sizeof(adorch_ad_id) == 8, "ad ids are 64-bit");
