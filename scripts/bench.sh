#!/usr/bin/env bash
# Runs the benchmarks, prints their tables and writes them into BENCHMARKS.md with the
# date, the commit and the machine, so the file always holds the latest run.
set -euo pipefail
bench=${1:-.build/release/adorch-bench}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bench" day --workload bench/workload.toml | tee "$out"
{
    echo "# adorch benchmarks"
    echo
    echo "Latest \`make bench\`: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet -- . ':!BENCHMARKS.md' 2>/dev/null || echo ' (with uncommitted changes)'),"
    echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)."
    echo "Figures are measured, never asserted: on a shared machine they vary from run to run."
    echo
    echo "Not measured yet (issue 7, open): the control API against redis, the daemon's footprint, and how"
    echo "Show scales with slots and subscribers."
    echo
    echo "## A day of traffic"
    echo
    echo "The standard day of \`bench/workload.toml\` (../shared/data/preload-workload.md) replayed to"
    echo "adorch's engine and to the reference policies of \`Sources/AdorchBench/Policies.swift\`."
    echo
    cat "$out"
} > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
