#!/usr/bin/env bash
# Runs the XCTest suite and, when it fails, repeats the failures at the end of the output:
# CI keeps only the tail of a run, and 400 tests of passing lines would push them out of it.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp "${TMPDIR:-/tmp}/adorch-test-log.XXXXXX")
trap 'rm -f "$log"' EXIT
"${SWIFT:-swift}" test --skip-build --disable-swift-testing "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    echo
    echo "== the tests failed (exit $status); the failures again:"
    grep -E ": error: |' failed \(|Fatal error|Test Suite .* failed|signal [0-9]+|Exited with" "$log" | grep -v "^Test Suite 'All tests'" | tail -60
fi
exit "$status"
