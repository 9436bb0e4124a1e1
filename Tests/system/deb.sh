#!/usr/bin/env bash
# The Debian package, end to end: scripts/mkdeb.sh packs the release build (as `make deb`
# does), lintian checks it, then a real systemd boots as PID 1 of private namespaces (the recipe
# of Tests/system/systemd.sh) where /usr, /etc and /var are overlays, the Swift toolchain
# (/opt/swift) and the build tree are hidden, and `dpkg -i` installs the package. The socket
# is started, a client calls through it, and the package is removed and purged. What it sees
# goes to OUT for Tests/IntegrationTests/DebPackageTests.swift to check.
#   usage: deb.sh OUT PACKAGE_ROOT          (packs .build/release: `make test` builds it)
#   OUT/vast-docs holds the VAST documents the vast plugin is validated against.
#   exit 77: this machine cannot boot systemd in namespaces: the test skips, saying why.
set -euo pipefail
out=$(realpath "$1") root=$(realpath "$2")

. "$root/Tests/system/private-systemd.sh"
ps_preflight
[ -x "$root/.build/release/adorchd" ] || { echo "no release build in $root/.build/release: swift build -c release (make test does)" >&2; exit 1; }

ps_cgroup adorch-deb-$$
scratch=$out/ns
mkdir -p "$scratch/units" "$scratch/pkg"
cp -r "$out/vast-docs" "$scratch/vast-docs"
# What the namespace runs from the checkout, copied into the scratch folder it sees: the
# checkout may lie below /tmp, which is private there, or where only its owner may enter.
mkdir -p "$scratch/tree/Tests/vast"
cp -r "$root/examples" "$scratch/tree/examples"
cp "$root/Tests/vast/adserver.py" "$scratch/tree/Tests/vast/"
cp "$root/Tests/loopback_http.py" "$scratch/tree/Tests/"
for layer in usr etc var; do mkdir -p "$scratch/$layer-upper" "$scratch/$layer-work"; done
: >"$scratch/console.log"

# The package, as `make deb` makes it, and lintian's verdict on it.
deb=$(DEB_XZ_LEVEL=0 "$root/scripts/mkdeb.sh" "$out/build" 2>"$out/mkdeb.err")
cp "$deb" "$scratch/pkg/adorch.deb"
dpkg-deb --field "$deb" Version Depends >"$out/fields.txt"
dpkg-deb --contents "$deb" >"$out/contents.txt"
lintian --tag-display-limit 0 "$deb" >"$out/lintian.txt" 2>&1 && echo 0 >"$out/lintian-exit.txt" || echo $? >"$out/lintian-exit.txt"

# Only the test stubs; the package's own units come from where dpkg puts them.
for unit in sysinit.target basic.target shutdown.target adorch-test.target; do
    printf '[Unit]\nDescription=%s (test stub)\nDefaultDependencies=no\n' "$unit" >"$scratch/units/$unit"
done

cat >"$scratch/inner.sh" <<'INNER'
#!/bin/bash
# PID 1 of the new pid namespace, inside private mount/uts/ipc/net/cgroup namespaces.
set -eu
scratch=$1 root=$2
. "$root/Tests/system/private-systemd.sh"
ps_enter_private_root
# dpkg writes only into overlays: the host's /usr, /etc and /var stay as they are.
for layer in usr etc var; do
    mount -t overlay overlay -o "lowerdir=/$layer,upperdir=$scratch/$layer-upper,workdir=$scratch/$layer-work" /$layer
done
[ -d /var/log/journal ] && mount -t tmpfs tmpfs /var/log/journal
# This host's policy-rc.d (a container image's) forbids every service action of maintainer
# scripts; a Debian machine has none, and the package's stop on removal is under test.
rm -f /usr/sbin/policy-rc.d
# The private systemd sees only the stubs, the units the package installs and what the
# maintainer scripts enable (so deb-systemd-invoke sees it as enabled, as on a real machine).
mount -t tmpfs tmpfs /usr/lib/systemd/system
mount -t tmpfs tmpfs /etc/systemd/system
# No Swift toolchain and no build tree: what runs comes from the package alone.
mount -t tmpfs -o ro tmpfs /opt/swift
[ -d "$root/.build" ] && mount -t tmpfs -o ro tmpfs "$root/.build"
[ -d "$scratch/../build" ] && mount -t tmpfs -o ro tmpfs "$scratch/../build"
hostname adorch-deb
exec env -i container=adorch-deb PATH=/usr/sbin:/usr/bin:/sbin:/bin SYSTEMD_UNIT_PATH="$scratch/units:/etc/systemd/system:/usr/lib/systemd/system" \
    /lib/systemd/systemd --system --unit=adorch-test.target --log-target=console --log-level=info --show-status=no
INNER
chmod +x "$scratch/inner.sh"

ps_launch 180 "$scratch/inner.sh" "$scratch" "$root"
await booted

# What the namespace shows of the toolchain: nothing.
{ $NS sh -c 'command -v swift || echo "no swift"; ls -A /opt/swift | wc -l'; } >"$out/toolchain.txt" 2>&1 || true

# Install, with systemd running: the maintainer scripts talk to this systemd only.
$NS dpkg -i "$scratch/pkg/adorch.deb" >"$out/dpkg-install.log" 2>&1 && echo 0 >"$out/dpkg-install-exit.txt" || echo $? >"$out/dpkg-install-exit.txt"
$NS getent passwd adorch >"$out/user.txt" 2>&1 || true
$NS journalctl --list-catalog >"$out/catalog.txt" 2>&1 || true
$NS sh -c 'test -L /etc/systemd/system/sockets.target.wants/adorchd.socket && echo enabled || echo not-enabled' >"$out/enabled.txt"
$NS systemctl is-active adorchd.socket adorchd.service >"$out/after-install.txt" 2>&1 || true
# Every ELF file the package installed resolves its libraries here, where /opt/swift is empty.
$NS sh -c 'for f in $(dpkg -L adorch); do [ -f "$f" ] && head -c4 "$f" | grep -q ELF && { echo "== $f"; ldd "$f"; }; done' >"$out/ldd.txt" 2>&1 || true

# The installed daemon loads the Swift plugins too, each with its own private runtime.
$NS sh -c 'printf "[plugins.swift-example]\n[plugins.vast]\n" >/etc/adorch/adorchd.toml.d/swift-plugins.toml'
$NS systemctl start adorchd.socket
$NS systemctl is-active adorchd.socket >"$out/socket-active.txt" || true
# The client call through the socket; the first one starts the service.
$NS adorchctl status --json >"$out/status.json" 2>"$out/status.err" || true
# The client libraries as an app uses them, from the package alone: the Python example imports
# the installed package (no PYTHONPATH), and the C example is built against the installed
# header and pkg-config file; each shows a rewarded ad and prints its reward.
$NS python3 "$scratch/tree/examples/python/rewarded.py" >"$out/python-client.txt" 2>&1 \
    && echo 0 >"$out/python-client-exit.txt" || echo $? >"$out/python-client-exit.txt"
dpkg-architecture -qDEB_HOST_MULTIARCH >"$out/multiarch.txt"
$NS python3 -c 'import adorch; print(adorch.__file__)' >"$out/python-module.txt" 2>&1 || true
$NS make -s -C "$scratch/tree/examples/c" OUT="$scratch" >"$out/c-client.txt" 2>&1 && $NS "$scratch/rewarded" >>"$out/c-client.txt" 2>&1 \
    && echo 0 >"$out/c-client-exit.txt" || echo $? >"$out/c-client-exit.txt"
$NS systemctl is-active adorchd.service >"$out/service-after-call.txt" || true
# The Swift plugins carry their own static Swift runtime: the validator loads and drives one.
$NS adorch-plugin-validate /usr/lib/adorch/plugins/libadorch-plugin-swift-example.so --iterations 200 >"$out/validate-swift.txt" 2>&1 \
    && echo 0 >"$out/validate-swift-exit.txt" || echo $? >"$out/validate-swift-exit.txt"
# vast's private runtime holds Foundation's URLSession and XMLParser: the validator drives it
# against the test ad server on the namespace's loopback.
$NS sh -c "echo \$\$ >$scratch/adserver.pid; exec python3 $scratch/tree/Tests/vast/adserver.py --root $scratch/vast-docs" >"$scratch/adserver.out" 2>&1 &
await grep -q "listening on" "$scratch/adserver.out"
port=$(sed -n 's/.*listening on \([0-9]*\).*/\1/p' "$scratch/adserver.out")
$NS adorch-plugin-validate /usr/lib/adorch/plugins/libadorch-plugin-vast.so --server-parameter "tag_url=http://127.0.0.1:$port/vast/inline.xml" \
    --iterations 200 >"$out/validate-vast.txt" 2>&1 && echo 0 >"$out/validate-vast-exit.txt" || echo $? >"$out/validate-vast-exit.txt"
$NS kill "$(cat "$scratch/adserver.pid")"

# Remove: the service and socket stop; purge: the config and the state go, the user stays.
$NS rm /etc/adorch/adorchd.toml.d/swift-plugins.toml
$NS dpkg -r adorch >"$out/dpkg-remove.log" 2>&1 && echo 0 >"$out/dpkg-remove-exit.txt" || echo $? >"$out/dpkg-remove-exit.txt"
$NS systemctl is-active adorchd.socket adorchd.service >"$out/after-remove.txt" 2>&1 || true
$NS pgrep -x adorchd >"$out/leftover.txt" || true
$NS sh -c 'ls -A /etc/adorch /var/lib/adorch' >"$out/after-remove-files.txt" 2>&1 || true
$NS dpkg -P adorch >"$out/dpkg-purge.log" 2>&1 && echo 0 >"$out/dpkg-purge-exit.txt" || echo $? >"$out/dpkg-purge-exit.txt"
$NS sh -c 'for p in /etc/adorch /var/lib/adorch; do [ -e $p ] && echo "$p present" || echo "$p gone"; done' >"$out/after-purge.txt" 2>&1 || true
echo done >"$out/done.txt"
