/* libsystemd's daemon and journal APIs, from Debian's libsystemd-dev. */
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
