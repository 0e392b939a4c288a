#!/bin/sh
# SPDX-License-Identifier: MIT
# `make fuzz`: runs each libFuzzer target for FUZZ_SECONDS (default 60) from the committed
# corpus (tests/fuzz/corpus/NAME/), writing what it finds new to FUZZ_BUILD/corpus/NAME/
# and any crash to FUZZ_BUILD/crash-NAME-*. FUZZ_MERGE=1 then merges the new inputs into
# the committed corpus, minimized. Exits non-zero when a target crashed.
# Usage: tests/fuzz/run.sh FUZZ_BUILD NAME...
set -u
fb=$1; shift
secs=${FUZZ_SECONDS:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
status=0
for name in "$@"; do
    bin="$fb/fuzz_$name"
    seeds="tests/fuzz/corpus/$name"
    found="$fb/corpus/$name"
    mkdir -p "$found" "$seeds"
    echo "== fuzz_$name: ${secs}s from $(find "$seeds" -type f | wc -l) committed inputs"
    # -dict: the target's tokens, when it has some.
    dict=""
    [ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
    # shellcheck disable=SC2086
    if ! "$bin" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$fb/crash-$name-" \
        -timeout=10 -rss_limit_mb=2048 $dict "$found" "$seeds" >"$fb/fuzz_$name.log" 2>&1; then
        status=1
        echo "fuzz_$name: FAILED (log: $fb/fuzz_$name.log)"
        grep -E 'ERROR|SUMMARY|check failed|runtime error' "$fb/fuzz_$name.log" | head -20
        continue
    fi
    grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$fb/fuzz_$name.log" |
        tr '\n' ' '
    echo
    grep -E 'cov: [0-9]+' "$fb/fuzz_$name.log" | tail -1
    if [ "${FUZZ_MERGE:-0}" = 1 ]; then
        "$bin" -merge=1 "$seeds" "$found" >"$fb/merge_$name.log" 2>&1 ||
            { status=1; echo "fuzz_$name: merge failed (log: $fb/merge_$name.log)"; }
        echo "fuzz_$name: committed corpus now $(find "$seeds" -type f | wc -l) inputs"
    fi
done
exit $status
