#!/usr/bin/env bash
# Writes scripts/adorchd.order, the linker's symbol order for the release adorchd (see
# Package.swift): every function of the binary that its start-up and an idle run on the
# embedded default config call, from valgrind's callgrind, so the linker puts them side by side.
# A function the file does not name is placed as before; a name the binary lacks is ignored,
# so a stale file costs memory, never correctness. Run it again after big changes, then check
# scripts/footprint.py.
#
#   scripts/adorchd-order.sh [BUILD_DIR=.build/release] [SECONDS=30]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-.build/release}
seconds=${2:-30}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# valgrind cannot read the DWARF 5 the toolchain writes: a copy without it (the symbols stay).
objcopy --strip-debug "$build/adorchd" "$work/adorchd"
valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" --demangle=no --dump-instr=no \
    --compress-strings=no --compress-pos=no \
    "$work/adorchd" --plugin-dir "$PWD/$build" --socket "$work/adorchd.sock" --state-dir "$work/state" \
    --log-target console >"$work/log" 2>&1 &
pid=$!
sleep "$seconds"
kill -TERM "$pid"
wait "$pid" || true
grep -q 'ready on' "$work/log" || { echo "adorchd never got ready under valgrind:" >&2; cat "$work/log" >&2; exit 1; }
# fn= lines under the binary's ob=; callgrind marks recursion levels with 'N.
awk -v bin="$work/adorchd" '/^ob=/ { ob = substr($0, 4) } /^fn=/ && ob == bin { print substr($0, 4) }' "$work/callgrind.out" |
    sed "s/'[0-9]*\$//" | awk '!seen[$0]++' >scripts/adorchd.order
echo "scripts/adorchd.order: $(wc -l <scripts/adorchd.order) functions"
