#!/bin/sh
# SPDX-License-Identifier: MIT
# make bench, part 4: sessions and files, each beside its floor in the same run.
#  - /bin/true in an open session at concurrency 1, and in 8 sessions at concurrency 8,
#    in interleaved slices with the unisolated posix_spawn floor (spawnbench) at the same
#    concurrency: p50 above the floor's at c=1 (target <= 0.3 ms), tasks/s as a ratio of the
#    floor's at c=8 (target >= 0.6x).
#  - session.open from a warm pool (each open followed by its close, paced so that the pool
#    stays warm): p50 (target < 1 ms).
#  - 10 MiB in through exec's files and 10 MiB back through collect: MiB/s each way
#    (target >= 200), from medians of the same exec with and without the transfer.
#  - 100 idle sessions: sbxd's RSS growth (target <= 5 MiB) and the kernel memory each holds.
# Needs `make all` first, and root. About a minute; BENCH_QUICK=1 shortens it.
set -eu

cd "$(dirname "$0")/.."
B=${BUILD:-build}
PY=/usr/bin/python3
QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then
    PAIRS=2; N1=100; N8=200; N_OPEN=60; XFER_RUNS=3
else
    PAIRS=${BENCH_PAIRS:-6}; N1=300; N8=1000; N_OPEN=300; XFER_RUNS=9
fi
IDLE=100

die() {
    echo "session_bench: $*" >&2
    exit 1
}

for f in sbxd sbxd-init sbx sbx-load spawnbench; do
    [ -x "$B/$f" ] || die "$B/$f is missing: run 'make all' first"
done
[ "$(id -u)" = 0 ] || die "sbxd needs root"

tmp=$(mktemp -d /tmp/sbx-session-bench.XXXXXX)
SOCK=$tmp/sbxd.sock
pid=""

# shellcheck source=loadtest/lib.sh
. ./loadtest/lib.sh

cleanup() {
    stop_sbxd
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$tmp/pools" "$tmp/state"
cat >"$tmp/sbxd.yaml" <<EOC
socket: $SOCK
admin_socket: $tmp/sbxd-admin.sock
state_dir: $tmp/state
pools_dir: pools
default_pool: python
log_level: warn
metrics: ""
EOC
# max 256 so that 100 idle sessions (max_sessions 120) leave room for the pool's warm set.
cat >"$tmp/pools/python.yaml" <<EOC
name: python
warm: 16
max: 256
max_sessions: 120
queue: 512
memory: 512MiB
cpu: 1.0
pids: 128
timeout: 30s
max_timeout: 60s
output_cap: 32KiB
tmp_size: 64MiB
seccomp: default
image: host
EOC
"$B/sbxd" --config "$tmp/sbxd.yaml" >"$tmp/sbxd.log" 2>&1 &
pid=$!

warm_count() {
    "$B/sbx" --socket "$SOCK" pools 2>/dev/null | awk '
        NR == 1 { for (i = 1; i <= NF; i++) if ($i == "WARM") c = i; next }
        $1 == "python" && c { print $c }'
}
settle() {
    i=0
    while [ $i -lt 150 ]; do
        proc_gone "$pid" && { cat "$tmp/sbxd.log" >&2; pid=""; die "sbxd exited early"; }
        w=$(warm_count)
        [ -n "$w" ] && [ "$w" -ge 16 ] && break
        i=$((i + 1))
        sleep 0.1
    done
    sleep "${1:-1}"
}
settle

load() { # name sbx-load-args...
    name=$1
    shift
    timeout -s INT -k 5 150 "$B/sbx-load" --socket "$SOCK" --pid "$pid" --json "$@" \
        >"$tmp/$name.json" 2>"$tmp/$name.err" || true
    if ! grep -q '"tasks"' "$tmp/$name.json"; then
        cat "$tmp/$name.err" >&2
        tail -n 20 "$tmp/sbxd.log" >&2
        die "sbx-load did not finish ($name)"
    fi
}
floor() { # name tasks concurrency
    timeout -k 5 150 "$B/spawnbench" --tasks "$2" --concurrency "$3" -- /bin/true \
        >"$tmp/$1.json" || true
    grep -q '"tasks"' "$tmp/$1.json" || die "spawnbench did not finish ($1)"
}

echo "4. sessions and files ($PAIRS interleaved slices each)"
pair=1
while [ $pair -le "$PAIRS" ]; do
    echo "  pair $pair/$PAIRS: /bin/true in a session c=1 ($N1) and in 8 sessions c=8 ($N8)," \
        "the floor beside each"
    if [ $((pair % 2)) = 0 ]; then floor "floor1.$pair" "$N1" 1; fi
    load "sess1.$pair" --sessions --tasks "$N1" --concurrency 1 --warmup 20 -- /bin/true
    if [ $((pair % 2)) = 1 ]; then floor "floor1.$pair" "$N1" 1; fi
    settle 0.5
    if [ $((pair % 2)) = 1 ]; then floor "floor8.$pair" "$N8" 8; fi
    load "sess8.$pair" --sessions --tasks "$N8" --concurrency 8 --warmup 40 -- /bin/true
    if [ $((pair % 2)) = 0 ]; then floor "floor8.$pair" "$N8" 8; fi
    settle 0.5
    pair=$((pair + 1))
done
echo "  session.open from the warm pool ($N_OPEN, 100 a second)"
load open --session-open --tasks "$N_OPEN" --concurrency 1 --rate 100
settle
echo "  10 MiB in through files, 10 MiB out through collect ($XFER_RUNS runs each); $IDLE idle sessions"
"$PY" loadtest/session_bench.py "$SOCK" "$pid" "$XFER_RUNS" "$IDLE" >"$tmp/xfer.json" ||
    die "session_bench.py failed"
stop_sbxd
[ "$stop_rc" = 0 ] || die "sbxd exited $stop_rc after SIGTERM"

"$PY" - "$tmp" "$PAIRS" <<'EOP'
import json, os, statistics, sys
tmp, pairs = sys.argv[1], int(sys.argv[2])
def rd(n):
    with open(os.path.join(tmp, n + ".json")) as f:
        return json.loads(f.read().strip().splitlines()[-1])
def errs(r):
    return sum(r.get("errors", {}).values()) if isinstance(r.get("errors"), dict) else 0
rows = []
d1, r8 = [], []
bad = 0
for p in range(1, pairs + 1):
    s1, f1, s8, f8 = rd("sess1.%d" % p), rd("floor1.%d" % p), rd("sess8.%d" % p), rd("floor8.%d" % p)
    bad += errs(s1) + errs(s8)
    d1.append(s1["p50_ms"] - f1["p50_ms"])
    r8.append(s8["rate"] / f8["rate"] if f8["rate"] else 0)
    rows.append((p, s1["p50_ms"], f1["p50_ms"], s8["rate"], f8["rate"]))
print("== sessions and files ==")
for p, a, b, c, d in rows:
    print("  slice %d: c=1 p50 %.3f ms (floor %.3f ms, +%.3f); c=8 %.0f tasks/s (floor %.0f, %.2fx)"
          % (p, a, b, a - b, c, d, c / d if d else 0))
m1, m8 = statistics.median(d1), statistics.median(r8)
print("a command in a session, c=1: p50 %+.3f ms over the floor (median of %d slices; target <= +0.3 ms): %s"
      % (m1, pairs, "met" if m1 <= 0.3 else "NOT met"))
print("8 sessions, c=8: %.2fx the floor's tasks/s (median of %d slices; target >= 0.6x): %s"
      % (m8, pairs, "met" if m8 >= 0.6 else "NOT met"))
o = rd("open")
print("session.open from a warm pool: p50 %.3f ms, p99 %.3f ms (%d opens; target p50 < 1 ms): %s"
      % (o["p50_ms"], o["p99_ms"], o["tasks"], "met" if o["p50_ms"] < 1.0 else "NOT met"))
x = rd("xfer")
print("files in: %.0f MiB/s; collect out: %.0f MiB/s (10 MiB each, medians of %d; target >= 200 each): %s"
      % (x["in_mib_s"], x["out_mib_s"], x["runs"],
         "met" if x["in_mib_s"] >= 200 and x["out_mib_s"] >= 200 else "NOT met"))
print("%d idle sessions: sbxd RSS %+.2f MiB (target <= 5 MiB: %s); per session the kernel holds "
      "%.0f KiB (slab %.0f, page tables %.0f, kernel stacks %.0f, tmpfs %.0f) and its init %.0f KiB of RSS"
      % (x["idle"], x["rss_growth_mib"], "met" if x["rss_growth_mib"] <= 5 else "NOT met",
         x["kernel_kib"], x["slab_kib"], x["pagetables_kib"], x["kstack_kib"], x["shmem_kib"],
         x["init_rss_kib"]))
if bad:
    print("session_bench: %d errors in the session runs" % bad)
    sys.exit(1)
EOP
