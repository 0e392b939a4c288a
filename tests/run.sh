#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs every unit test binary (cmocka), every fuzz target over its committed corpus, and
# every end-to-end test file (Python unittest against a live sbxd), then prints one line:
# "N passed, N failed" (", N skipped").
# Usage: tests/run.sh [unit|e2e] [BUILD_DIR]
set -u
what=${1:-all}
build=${2:-${BUILD:-build}}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
pass=0; fail=0; skip=0
failed_names=""
log=$(mktemp -d /tmp/sbx-test-log.XXXXXX)

count() { # file name
    # A cmocka binary may run several groups, each with its own summary: add them up.
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$1" | awk '{n += $1} END {print n + 0}')
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$1" | awk '{n += $1} END {print n + 0}')
    s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$1" | awk '{n += $1} END {print n + 0}')
    e=$(sed -n 's/^E2E: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' "$1" | tail -1)
    if [ -n "$e" ]; then set -- "$1" "$2" $e; p=$3; f=$4; s=$5; fi
    p=${p:-0}; f=${f:-0}; s=${s:-0}
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    if [ "$f" -gt 0 ]; then failed_names="$failed_names $2"; fi
}

run_one() { # name command...
    name=$1; shift
    out="$log/$(basename "$name").log"
    start=$(date +%s)
    "$@" >"$out" 2>&1
    rc=$?
    before=$fail
    count "$out" "$name"
    if [ $rc -ne 0 ] && [ $fail -eq $before ]; then
        # Crashed or failed without a count: one failure, so it cannot pass silently.
        fail=$((fail + 1)); failed_names="$failed_names $name"
    fi
    printf '%-40s rc=%d %ss\n' "$name" $rc $(( $(date +%s) - start ))
    if [ $rc -ne 0 ]; then sed 's/^/    /' "$out" | tail -60; fi
}

if [ "$what" = all ] || [ "$what" = unit ]; then
    for t in "$build"/tests/test_*; do
        [ -x "$t" ] || continue
        run_one "$t" env SBX_INIT="$build/sbxd-init" SBX_PROBE="$build/probe" "$t"
    done
    # Fuzz targets over their committed corpus (tests/fuzz/README.md).
    for t in "$build"/tests/fuzz_*; do
        [ -x "$t" ] || continue
        run_one "$t" "$t" "tests/fuzz/corpus/${t##*/fuzz_}"
    done
fi
if [ "$what" = all ] || [ "$what" = e2e ]; then
    for t in tests/e2e/test_*.py; do
        [ -e "$t" ] || continue
        run_one "$t" env SBX_BUILD="$build" /usr/bin/python3 tests/e2e/runner.py "$t"
    done
fi
rm -rf "$log"
[ -n "$failed_names" ] && echo "failed:$failed_names"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
