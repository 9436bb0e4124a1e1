#!/usr/bin/env bash
# Runs adorchd against a real journald of its own and leaves what it saw in OUT, for
# Tests/IntegrationTests/SystemTests.swift to check. Everything happens in a private mount
# namespace: journald's sockets, its journal and the catalog database never touch the host.
#   usage: journald.sh OUT BUILD_DIR PACKAGE_ROOT
#   exit 77: this machine cannot do it (not root, or no mount namespaces): the test skips.
set -euo pipefail
out=$1 build=$2 root=$3
[ "$(id -u)" = 0 ] || { echo "needs root, for a private mount namespace" >&2; exit 77; }
unshare --mount --propagation private true 2>/dev/null || { echo "mount namespaces are not permitted here" >&2; exit 77; }
[ -x /lib/systemd/systemd-journald ] || { echo "no /lib/systemd/systemd-journald" >&2; exit 77; }

exec unshare --mount --propagation private bash -s -- "$out" "$build" "$root" <<'INNER'
set -euo pipefail
out=$1 build=$2 root=$3
# Waits until a command succeeds, for at most 10 s (0.02 s between tries).
await() { for _ in $(seq 500); do "$@" && return 0; sleep 0.02; done; echo "timed out: $*" >&2; return 1; }
# Private /run (journald's sockets, the volatile journal) and a private persistent journal dir.
mount -t tmpfs -o mode=755 tmpfs /run
[ -d /var/log/journal ] && mount -t tmpfs tmpfs /var/log/journal
mkdir -p /run/systemd/journal /run/log/journal
# Each background process dies with this script, should the test that runs it be killed.
setpriv --pdeathsig KILL /lib/systemd/systemd-journald >"$out/journald.log" 2>&1 &
journald=$!
trap 'kill $journald 2>/dev/null || true' EXIT
await test -S /run/systemd/journal/socket

# --log-target=auto: journald is there and stderr is not a terminal, so the journal.
setpriv --pdeathsig KILL "$build/adorchd" --socket "$out/adorchd.sock" --state-dir "$out/state" --plugin-dir "$build" \
    >"$out/stdout" 2>"$out/stderr" &
daemon=$!
await grep -q "serving on" "$out/stdout"
export ADORCH_SOCKET="$out/adorchd.sock"
await "$build/adorchctl" show rewarded_main --user u-journal --json >"$out/ad.json"
# A consent string set for a user: the journal says it was set, never the string whole.
"$build/adorchctl" privacy set --user u-journal "{\"gdpr_applies\":true,\"tc_string\":\"$(cat "$out/tc-string")\"}" >"$out/privacy.txt" 2>&1
# A user who is not an admin asks for the status: refused, and the journal names them. It runs
# a copy in OUT: the build folder may lie where only its owner may enter.
install -m 755 "$build/adorchctl" "$out/adorchctl"
setpriv --reuid=5555 --regid=5555 --clear-groups "$out/adorchctl" status >"$out/denied.txt" 2>&1 || true
kill -TERM $daemon
wait $daemon && echo 0 >"$out/exit" || echo $? >"$out/exit"
journalctl --sync 2>/dev/null || true

journalctl --no-pager -o json SYSLOG_IDENTIFIER=adorchd >"$out/all.json"
journalctl --no-pager -o json SYSLOG_IDENTIFIER=adorchd SLOT=rewarded_main >"$out/slot.json"

# The catalog, installed as a package would, into private copies of the catalog dirs.
mkdir -p "$out/catalog-src" "$out/catalog-db"
cp /usr/lib/systemd/catalog/*.catalog "$out/catalog-src/" 2>/dev/null || true
cp "$root/systemd/adorchd.catalog" "$out/catalog-src/"
mount --bind "$out/catalog-src" /usr/lib/systemd/catalog
mkdir -p /var/lib/systemd/catalog && mount --bind "$out/catalog-db" /var/lib/systemd/catalog
journalctl --update-catalog
journalctl --no-pager -x SYSLOG_IDENTIFIER=adorchd >"$out/explained.txt"
journalctl --no-pager --dump-catalog >"$out/catalog.txt"
INNER
