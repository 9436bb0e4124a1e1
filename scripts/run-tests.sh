#!/usr/bin/env bash
# Runs the XCTest suite and, when it fails, repeats the failures at the end of the output:
# CI keeps only the tail of a run, and 400 tests of passing lines would push them out of it.
set -uo pipefail
cd "$(dirname "$0")/.."
# The tests run programs as other uids and hand them sockets and files in the temporary
# folder: a TMPDIR only its owner may enter (libpam-tmpdir's /tmp/user/0 is 0700) cannot
# serve them, so /tmp is used instead, and said.
if [ -n "${TMPDIR:-}" ]; then
    dir=$(realpath -m "$TMPDIR")
    while [ -d "$dir" ] && [ $(( 0$(stat -c %a "$dir") & 1 )) -eq 1 ] && [ "$dir" != / ]; do dir=$(dirname "$dir"); done
    if [ "$dir" != / ]; then
        echo "run-tests: TMPDIR=$TMPDIR: other uids cannot enter $dir, and the tests run programs as other uids; using /tmp" >&2
        export TMPDIR=/tmp
    fi
fi
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
