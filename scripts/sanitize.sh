#!/usr/bin/env bash
# Builds everything with a sanitizer (into .build-asan or .build-tsan) and runs the whole
# test suite on that build: the test runner, and every adorchd, adorchctl and validator the
# tests start, with the plugins they dlopen. Every process writes what the sanitizer reports
# to .build-SAN/reports/; the run is clean only if all tests pass and that folder stays empty.
#   usage: scripts/sanitize.sh address|thread [swift test arguments, e.g. --filter LimitsTests]
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
    address) short=asan ;;
    thread) short=tsan ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: scripts/sanitize.sh address|thread [swift test arguments]" >&2; exit 64 ;;
esac
sanitizer=$1; shift
build=.build-$short
flags=(--sanitize="$sanitizer" --build-path "$build")
# The TSan runtime is linked into each executable and exports only the symbols on its .syms
# list; Swift code built with -sanitize=thread also calls these three, so a Swift plugin
# (swift-example, vast) would not dlopen into adorchd or the validator without them.
if [ "$sanitizer" = thread ]; then
    for symbol in __tsan_external_write __tsan_ignore_thread_begin __tsan_ignore_thread_end; do
        flags+=(-Xlinker "--export-dynamic-symbol=$symbol")
    done
fi
swift build --build-tests "${flags[@]}"

reports=$PWD/$build/reports
rm -rf "$reports" && mkdir -p "$reports"
# A report goes to a file per process (report.PID), so one from a daemon a test started is not
# lost in its log. Leaks in other people's code are suppressed by scripts/lsan.supp.
# handle_segv=0: a plugin that segfaults must die of SIGSEGV, as in a normal build (the crash
# tests check the signal); under the sanitizer's own handler its host exited with status 66.
export ASAN_OPTIONS="log_path=$reports/report:detect_leaks=1:abort_on_error=0:handle_segv=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export TSAN_OPTIONS="log_path=$reports/report:halt_on_error=0:handle_segv=0${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
# A daemon that dies of its in-process plugin's crash (the crash tests) must die of that
# signal: the Swift runtime's backtracer would clone a process for its backtrace first, which
# ThreadSanitizer's clone interceptor fails on (CHECK failed, exit 66).
export SWIFT_BACKTRACE=${SWIFT_BACKTRACE:-enable=no}
# Everything runs several times slower: the tests wait that much longer for what they expect
# (never less: bounds a test asserts on the daemon's own timers stay as they are).
export ADORCH_TEST_TIME_SCALE=${ADORCH_TEST_TIME_SCALE:-$([ "$sanitizer" = thread ] && echo 6 || echo 3)}

status=0
swift test --skip-build "${flags[@]}" --disable-swift-testing "$@" 2>&1 | tee "$build/test.log" || status=$?
found=$(find "$reports" -type f | wc -l)
if [ "$found" -gt 0 ]; then
    echo "sanitize: $sanitizer: $found report(s) in $reports:" >&2
    for report in "$reports"/*; do echo "--- $report" >&2; head -60 "$report" >&2; done
    status=1
fi
summary=$(grep -E '^\s*Executed [0-9]+ tests' "$build/test.log" | tail -1 | sed 's/^ *//')
echo "sanitize: $sanitizer: ${summary:-no test summary}; $found sanitizer report(s)"
exit $status
