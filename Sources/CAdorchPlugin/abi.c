/* Compile-time checks on the plugin ABI: the header must build as plain C, and the two
 * fields a host reads before it knows a plugin's version must never move. */
#include <stddef.h>
#include "adorch/plugin.h"

_Static_assert(offsetof(adorch_plugin_entry_t, abi_major) == 0, "abi_major must stay first");
_Static_assert(offsetof(adorch_plugin_entry_t, abi_minor) == 4, "abi_minor must stay second");
_Static_assert(sizeof(adorch_ad_id) == 8, "ad ids are 64-bit");
/* 1.2 appended flags: everything before it stays where 1.1 had it. */
_Static_assert(offsetof(adorch_plugin_entry_t, flags) == offsetof(adorch_plugin_entry_t, stats_json) + sizeof(void *),
               "flags comes right after 1.1's last field");
/* 1.4 appended the request's privacy: everything before it stays where 1.3 had it. */
_Static_assert(offsetof(adorch_request, privacy) == offsetof(adorch_request, load_uid) + sizeof(void *),
               "privacy comes right after 1.3's last field");
_Static_assert(offsetof(adorch_privacy, struct_size) == 0, "adorch_privacy starts with struct_size");
_Static_assert(sizeof(adorch_privacy_class) == sizeof(uint32_t), "adorch_privacy_class is 32-bit");
/* ADORCH_CLOSED_ENUM is an annotation only: the value enums stay 32-bit unsigned, what the
 * struct fields that carry them (uint32_t format, event; int32_t error) hold. */
_Static_assert(sizeof(adorch_format) == sizeof(uint32_t), "adorch_format is 32-bit");
_Static_assert(sizeof(adorch_error) == sizeof(uint32_t), "adorch_error is 32-bit");
_Static_assert(sizeof(adorch_event) == sizeof(uint32_t), "adorch_event is 32-bit");
_Static_assert((adorch_format)-1 > 0 && (adorch_error)-1 > 0 && (adorch_event)-1 > 0, "the value enums are unsigned");
