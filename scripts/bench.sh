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
    echo
    echo "## The code's shape"
    echo
    over=$(find Sources -name '*.swift' -exec wc -l {} + | awk '$2 != "total" && $1 > 400 {print $2 " (" $1 " lines)"}')
    echo "The longest files in Sources/: $(find Sources -name '*.swift' -exec wc -l {} + | awk '$2 != "total"' | sort -rn | head -3 | awk '{printf "%s%s %s", sep, $2, $1; sep=", "}') lines."
    echo
    echo "Targets:"
    echo
    if [ -z "$over" ]; then echo "- [met] no file in Sources/ over 400 lines"; else echo "- [MISSED] no file in Sources/ over 400 lines: $over"; fi
} > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
