#!/usr/bin/env bash
# Builds the fuzz targets with libFuzzer and AddressSanitizer (into .build-fuzz) and runs
# each on its committed seed corpus (Fuzz/corpus/TARGET; what libFuzzer finds goes to
# .build-fuzz/corpus/TARGET). Prints executions, crashes and hangs per target and in all;
# exits 1 if any target crashed or hung. Crash inputs are kept in .build-fuzz/crashes/.
#   usage: scripts/fuzz.sh [--runs N | --seconds S] [TARGET...]   (targets: varlink config rewards)
set -euo pipefail
unit=seconds amount=60
targets=()
while [ $# -gt 0 ]; do
    case $1 in
        --runs) unit=runs amount=$2; shift 2 ;;
        --seconds) unit=seconds amount=$2; shift 2 ;;
        -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) targets+=("$1"); shift ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=(varlink config rewards)
# gold cannot link libFuzzer's objects with Swift's (an internal error in its DWARF reader): lld.
flags=(-c release --build-path .build-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING
       -Xswiftc -Xclang-linker -Xswiftc -fuse-ld=lld)
for t in "${targets[@]}"; do swift build "${flags[@]}" --product "adorch-fuzz-$t"; done

total=0 failed=0
printf '%-10s %14s %10s %8s %8s %7s\n' target executions "exec/s" crashes hangs corpus
for t in "${targets[@]}"; do
    mkdir -p ".build-fuzz/corpus/$t" .build-fuzz/crashes
    log=".build-fuzz/fuzz-$t.log"
    : >"$log"
    status=0 runs=0 started=$SECONDS
    extra=() session=$amount
    # TOMLKit leaks every string, number and key list it hands out (LebJe/TOMLKit#26): leak
    # checks are off for the config target (libFuzzer's per input and LeakSanitizer's at exit),
    # and it runs in sessions short enough that what leaks stays far below the RSS limit; each
    # session starts from the corpus the last grew.
    asan=${ASAN_OPTIONS:-}
    if [ "$t" = config ]; then
        extra=(-detect_leaks=0) asan="${asan:+$asan:}detect_leaks=0"
        [ "$unit" = runs ] && session=50000 || session=30
    fi
    left=$amount
    while [ "$left" -gt 0 ] && [ "$status" = 0 ]; do
        this=$(( left < session ? left : session ))
        [ "$unit" = runs ] && limit=(-runs="$this") || limit=(-max_total_time="$this")
        # -timeout: an input that takes over 10 s is a hang. -rss_limit_mb: a leak or a blow-up is a crash.
        ASAN_OPTIONS=$asan ".build-fuzz/release/adorch-fuzz-$t" "${limit[@]}" "${extra[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix=".build-fuzz/crashes/$t-" ".build-fuzz/corpus/$t" "Fuzz/corpus/$t" >>"$log" 2>&1 || status=$?
        session_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        runs=$(( runs + ${session_runs:-0} ))
        sed -i 's/^stat::number_of_executed_units:/session::executed_units:/' "$log"
        left=$(( left - this ))
    done
    elapsed=$(( SECONDS - started ))
    speed=$(( runs / (elapsed > 0 ? elapsed : 1) ))
    hangs=$(grep -c 'ERROR: libFuzzer: timeout' "$log" || true)
    crashes=$(grep -cE '^==[0-9]+==ERROR: (Address|Leak)Sanitizer|ERROR: libFuzzer: (deadly signal|out-of-memory|fuzz target exited)' "$log" || true)
    if [ "$status" != 0 ]; then
        failed=1
        # An interrupt (Ctrl-C) stops the run early; it is not a crash, but the run is not whole.
        grep -q 'run interrupted' "$log" && echo "adorch-fuzz-$t was interrupted" >&2 \
            || { echo "adorch-fuzz-$t failed (exit $status); its log: $log" >&2; tail -30 "$log" >&2; }
    fi
    total=$(( total + runs ))
    printf '%-10s %14s %10s %8s %8s %7s\n' "$t" "$runs" "$speed" "$crashes" "$hangs" "$(ls ".build-fuzz/corpus/$t" | wc -l)"
done
printf '%-10s %14s\n' all "$total"
exit $failed
