#!/usr/bin/env bash
# Runs a command on a host where systemd-journald is running, as on any ordinary systemd
# machine: a journald of its own in a private mount namespace (its sockets and journal
# never touch the real host). For checking that the tests pass with a journald there:
#   scripts/with-journald.sh make test
# Needs root (for the mount namespace). The command's exit status is this script's.
set -euo pipefail
case "${1:-}" in
  ""|-h|--help) sed -n '2,6s/^# \{0,1\}//p' "$0"; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "with-journald.sh: needs root, for a private mount namespace" >&2; exit 1; }
[ -x /lib/systemd/systemd-journald ] || { echo "with-journald.sh: no /lib/systemd/systemd-journald (apt-get install systemd)" >&2; exit 1; }
exec unshare --mount --propagation private bash -s -- "$@" <<'INNER'
set -euo pipefail
mount -t tmpfs -o mode=755 tmpfs /run/systemd 2>/dev/null || { mkdir -p /run/systemd && mount -t tmpfs -o mode=755 tmpfs /run/systemd; }
mkdir -p /run/systemd/journal /run/log
mount -t tmpfs -o mode=755 tmpfs /run/log
[ -d /var/log/journal ] && mount -t tmpfs tmpfs /var/log/journal
/lib/systemd/systemd-journald >/dev/null 2>&1 &
journald=$!
trap 'kill $journald 2>/dev/null || true' EXIT
for _ in $(seq 500); do [ -S /run/systemd/journal/socket ] && break; sleep 0.02; done
[ -S /run/systemd/journal/socket ] || { echo "with-journald.sh: journald did not start" >&2; exit 1; }
echo "with-journald.sh: systemd-journald running (pid $journald); running: $*" >&2
"$@"
INNER
