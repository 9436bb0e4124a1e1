#!/usr/bin/env bash
# Runs every benchmark part, prints the tables as they come and writes them into
# BENCHMARKS.md with the date, the commit and the machine, so the file always holds the
# latest run. The release adorchd and plugins must be built beside adorch-bench.
set -euo pipefail
bench=${1:-.build/release/adorch-bench}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
started=$(date +%s)
"$bench" all --workload bench/workload.toml | tee "$out"
{
    echo "# adorch benchmarks"
    echo
    echo "Latest \`make bench\`: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet -- . ':!BENCHMARKS.md' 2>/dev/null || echo ' (with uncommitted changes)'),"
    echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), $(redis-server --version | cut -d' ' -f1-3)."
    echo "The whole run took $(( $(date +%s) - started )) s. Figures are measured, never asserted: on a shared machine"
    echo "they vary from run to run, so comparisons are ratios measured side by side in the same run."
    echo
    cat "$out"
} > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
