#!/usr/bin/env bash
# Boots a real systemd as PID 1 of private namespaces (Tests/system/private-systemd.sh),
# installs adorch into it with a DESTDIR install of the project's own units, and drives it
# with systemctl. What it sees goes to OUT for
# Tests/IntegrationTests/SystemTests.swift to check.
#   usage: systemd.sh OUT PACKAGE_ROOT BUILD_PATH   (installs BUILD_PATH's debug build: the tests' own)
#   exit 77: this machine cannot boot systemd in namespaces: the test skips, saying why.
# The host is left as it was: private /run, /tmp, /dev, /etc (an overlay), /var/lib and
# cgroup; read-only /proc/sys and /sys; everything torn down by PID at the end.
set -euo pipefail
out=$(realpath "$1") root=$(realpath "$2") build=$(realpath "$3")

. "$root/Tests/system/private-systemd.sh"
ps_preflight
ps_cgroup adorch-st-$$
scratch=$out/ns
mkdir -p "$scratch/units" "$scratch/etc-upper" "$scratch/etc-work" "$scratch/var-lib"
: >"$scratch/console.log"
# What the namespace runs from the checkout, copied into the scratch folder it sees: the
# checkout may lie below /tmp, which is private there, or where only its owner may enter.
mkdir -p "$scratch/tree/clients"
cp -r "$root/clients/python" "$scratch/tree/clients/python"

# The project's own install, as a package would lay it out.
make -s -C "$root" install-files CONFIGURATION=debug BUILD_PATH="$build" DESTDIR="$scratch/dest" PREFIX=/usr/local >"$out/install.log" 2>&1 \
    || { echo "systemd.sh: installing the build failed:" >&2; cat "$out/install.log" >&2; exit 1; }
cp "$scratch/dest/usr/local/lib/systemd/system/adorchd.service" "$scratch/dest/usr/local/lib/systemd/system/adorchd.socket" "$scratch/units/"
for unit in sysinit.target basic.target shutdown.target adorch-test.target; do
    printf '[Unit]\nDescription=%s (test stub)\nDefaultDependencies=no\n' "$unit" >"$scratch/units/$unit"
done
# A sanitizer build (make asan, make tsan) needs its runtime's options in the service too, or
# the daemon an in-process plugin's SIGSEGV kills exits 66 from the sanitizer's own handler.
# Its reports go to the service's stderr: the unit cannot write to the run's reports folder.
if [ -n "${TSAN_OPTIONS:-}${ASAN_OPTIONS:-}" ]; then
    mkdir -p "$scratch/units/adorchd.service.d"
    printf '[Service]\nEnvironment=SWIFT_BACKTRACE=enable=no TSAN_OPTIONS=halt_on_error=0:handle_segv=0 ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:handle_segv=0\n' \
        >"$scratch/units/adorchd.service.d/sanitizer.conf"
fi

cat >"$scratch/inner.sh" <<'INNER'
#!/bin/bash
# PID 1 of the new pid namespace, inside private mount/uts/ipc/net/cgroup namespaces.
set -eu
scratch=$1 root=$2
. "$root/Tests/system/private-systemd.sh"
ps_enter_private_root
# A private /etc (sysusers writes the adorch user there), the install, and state.
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$scratch/etc-upper,workdir=$scratch/etc-work" /etc
mount -t tmpfs tmpfs /etc/systemd/system
cp -a "$scratch/dest/etc/adorch" /etc/adorch
mount --bind "$scratch/dest/usr/local" /usr/local
mount --bind "$scratch/var-lib" /var/lib
[ -d /var/log/journal ] && mount -t tmpfs tmpfs /var/log/journal
systemd-sysusers /usr/local/lib/sysusers.d/adorch.conf
hostname adorch-st
exec env -i container=adorch-st PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SYSTEMD_UNIT_PATH="$scratch/units" \
    /lib/systemd/systemd --system --unit=adorch-test.target --log-target=console --log-level=info --show-status=no
INNER
chmod +x "$scratch/inner.sh"

# adorchctl is installed under /usr/local, bound to the DESTDIR install.
ns_path=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ps_launch 120 "$scratch/inner.sh" "$scratch" "$root"
await booted
echo "booted: $($NS systemctl is-system-running || true)" >"$out/boot.txt"

$NS systemctl start adorchd.socket
$NS systemctl is-active adorchd.socket >"$out/socket-active.txt" || true
$NS systemctl is-active adorchd.service >"$out/service-before.txt" || true
# The first call starts the service through the socket.
$NS adorchctl slots --json >"$out/first-call.json" 2>"$out/first-call.err" || true
$NS systemctl is-active adorchd.service >"$out/service-after.txt" || true
# The Shows below take interstitial_main's ads: rewarded_main's idle buffer is checked at the reload.
# A client library's subscription across `systemctl restart`: the socket stays with systemd,
# the Python client subscribes again on the new daemon and hears a Show made after it.
$NS systemctl show -p MainPID --value adorchd.service >"$out/restart-pids.txt"
$NS env PYTHONPATH="$scratch/tree/clients/python" ADORCH_SOCKET=/run/adorch/adorchd.sock \
    python3 -B "$scratch/tree/clients/python/tests/restart_probe.py" sync interstitial_main >"$out/restart-probe.txt" 2>&1 &
probe=$!
await grep -q SUBSCRIBED "$out/restart-probe.txt"
$NS systemctl restart adorchd.service
$NS systemctl show -p MainPID --value adorchd.service >>"$out/restart-pids.txt"
await grep -q "subscribed again on" "$out/restart-probe.txt"
# The new daemon has its first ad ready a moment after it started.
shown() { $NS adorchctl show interstitial_main --json >"$out/restart-show.json" 2>&1; }
await shown || true
wait $probe && echo 0 >"$out/restart-probe-exit.txt" || echo $? >"$out/restart-probe-exit.txt"
# Two apps as other users, through the unit as installed: the daemon sees their own uids
# (SO_PEERCRED), so one may not report on the other's ad.
$NS useradd -M -N -g adorch adorch-app1
$NS useradd -M -N -g adorch adorch-app2
# The Show above took the slot's ad: app1's waits for the refill, as the restart's did.
app1_shown() { $NS setpriv --reuid adorch-app1 --regid adorch --init-groups adorchctl show interstitial_main --json >"$out/app1-show.json" 2>"$out/app1-show.err"; }
await app1_shown || true
ad=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["ad"]["id"])' <"$out/app1-show.json" 2>/dev/null) || ad=none
$NS setpriv --reuid adorch-app2 --regid adorch --init-groups adorchctl report "$ad" impression >"$out/app2-report.txt" 2>&1 || true
$NS id -u adorch-app1 >"$out/app1-uid.txt"
# The state directory is the daemon's alone, and the ledger is in it.
$NS stat -c '%a %U' /var/lib/adorch >"$out/state-dir.txt" 2>&1 || true
$NS ls /var/lib/adorch >>"$out/state-dir.txt" 2>&1 || true
full() { $NS adorchctl slots --json | python3 -c 'import json,sys; s=json.load(sys.stdin)["slots"]; sys.exit(0 if all(x["ready"]==x["buffer"] for x in s) else 1)'; }
await full || true
$NS systemctl status --no-pager adorchd.service >"$out/status.txt" 2>&1 || true
$NS adorchctl status --json >"$out/before-reload.json" 2>&1 || true
$NS systemctl reload adorchd.service 2>"$out/reload.err" && echo ok >"$out/reload.txt" || echo failed >"$out/reload.txt"
$NS adorchctl status --json >"$out/after-reload.json" 2>&1 || true
# Issue 22: a plugin that crashes in process takes the daemon with it, and the shipped unit's
# Restart=on-failure brings it back. A drop-in adds a slot whose sim entry segfaults at show.
$NS systemctl show -p Restart -p RestartUSec adorchd.service >"$out/crash-policy.txt"
restarts() { $NS systemctl show -p NRestarts --value adorchd.service; }
main_pid() { $NS systemctl show -p MainPID --value adorchd.service; }
crash_restarts=$(restarts) crash_pid=$(main_pid)
$NS mkdir -p /etc/adorch/adorchd.toml.d
$NS tee /etc/adorch/adorchd.toml.d/90-crash.toml >/dev/null <<'TOML'
# In the daemon's own process: the reload restarts sim there, and its crash is the daemon's.
[plugins.sim]
isolation = "in-process"

[[slots]]
id = "crash_main"
format = "interstitial"
buffer = 1
  [[slots.waterfall]]
  plugin = "sim"
  ad_unit_id = "sim-crash"
  server_parameter = "latency_ms=5 misbehave=segv at=show"
TOML
$NS systemctl reload adorchd.service
crash_ready() { $NS adorchctl slots --json | python3 -c 'import json,sys; sys.exit(0 if any(s["id"]=="crash_main" and s["ready"]>0 for s in json.load(sys.stdin)["slots"]) else 1)'; }
await crash_ready || true
$NS adorchctl show crash_main --json >"$out/crash-show.txt" 2>&1 || true
# How it died, read while systemd waits RestartSec to start it again; then a new main
# process, and one that answers.
crashed() { [ "$($NS systemctl show -p SubState --value adorchd.service)" = auto-restart ]; }
await crashed || true
$NS systemctl show -p SubState -p Result -p ExecMainCode -p ExecMainStatus adorchd.service >"$out/crash-exit.txt"
restarted() { local n p; n=$(restarts) p=$(main_pid); [ "$n" -gt "$crash_restarts" ] && [ "$p" != 0 ] && [ "$p" != "$crash_pid" ]; }
await restarted || true
echo "$crash_restarts $(restarts)" >"$out/crash-restarts.txt"
echo "$crash_pid $(main_pid)" >"$out/crash-pids.txt"
answers() { $NS adorchctl status --json >"$out/crash-after.json" 2>"$out/crash-after.err"; }
await answers || true
mainpid=$($NS systemctl show -p MainPID --value adorchd.service)
echo "$mainpid" >"$out/mainpid.txt"
# The service first, so that its exit status is read while the socket keeps the unit loaded.
$NS systemctl stop adorchd.service 2>"$out/stop.err" || true
$NS systemctl show -p ActiveState -p Result -p ExecMainCode -p ExecMainStatus adorchd.service >"$out/stopped.txt" || true
$NS systemctl stop adorchd.socket 2>>"$out/stop.err" || true
$NS pgrep -x adorchd >"$out/leftover.txt" || true
$NS test -e /run/adorch/adorchd.sock && echo present >"$out/socket-file.txt" || echo removed >"$out/socket-file.txt"
echo done >"$out/done.txt"
