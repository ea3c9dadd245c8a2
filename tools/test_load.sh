#!/usr/bin/env bash
# The whole suite while busy loops hold every core (issue: a suite that passes on a busy machine).
# usage: tools/test_load.sh RUNS PYTEST-ARGS...   Runs the suite RUNS times in a row and stops at the
# first failure; the loops (one per core, plain shell arithmetic) are stopped by their own PIDs.
set -u
runs="$1"; shift
loops=()
stop_loops() { for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null; done; wait "${loops[@]}" 2>/dev/null; }
trap stop_loops EXIT
for _ in $(seq "$(nproc)"); do
    ( while :; do :; done ) &
    loops+=("$!")
done
echo "test-load: ${#loops[@]} busy loops (PIDs ${loops[*]}), load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$runs"); do
    start=$(date +%s)
    "$@" || { echo "test-load: run $i of $runs FAILED after $(( $(date +%s) - start )) s"; exit 1; }
    echo "test-load: run $i of $runs passed in $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
