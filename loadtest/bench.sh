#!/bin/sh
# SPDX-License-Identifier: MIT
# make bench: measures sbx against the floor (posix_spawn of /bin/true, no isolation) and
# against bubblewrap starting an equivalent sandbox per task. Starts a private sbxd on a
# temporary state dir (python pool: warm 16, max 32), runs every benchmark BENCH_ROUNDS
# times (default 3, interleaved), and prints the medians as a table and in Markdown.
# Needs `make all` first; run as root (sbxd needs it). Takes about two to three minutes.
set -eu

cd "$(dirname "$0")/.."
B=${BUILD:-build}
PY=/usr/bin/python3
ROUNDS=${BENCH_ROUNDS:-3}
SBX_TASKS=${BENCH_SBX_TASKS:-2000}
SBX_C1_TASKS=${BENCH_SBX_C1_TASKS:-500}
FLOOR_TASKS=${BENCH_FLOOR_TASKS:-2000}
BWRAP_TASKS=${BENCH_BWRAP_TASKS:-500}

die() {
    echo "bench: $*" >&2
    exit 1
}

for f in sbxd sbxd-init sbx sbx-load spawnbench; do
    [ -x "$B/$f" ] || die "$B/$f is missing: run 'make all' first"
done
[ -x "$PY" ] || die "$PY is missing (apt package python3)"
[ "$(id -u)" = 0 ] || die "sbxd needs root"

# ---- the machine ---------------------------------------------------------------------------
cpu_model=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n 1)
mem_total_kib=$(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo)
echo "machine: $(nproc) CPUs, ${cpu_model:-unknown CPU}, Linux $(uname -r)," \
    "$((mem_total_kib / 1024)) MiB RAM"

# Benchmarks on a busy machine measure the other work too: say so up front.
load1=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load1" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
    echo "bench: warning: load average $load1 on $(nproc) CPUs; the numbers will be noisy"
fi

mem_available() {
    sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo
}

# ---- a private sbxd --------------------------------------------------------------------------
tmp=$(mktemp -d /tmp/sbx-bench.XXXXXX)
SOCK=$tmp/sbxd.sock
pid=""

cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        i=0
        while [ $i -lt 100 ] && ! proc_gone "$pid"; do
            sleep 0.1
            i=$((i + 1))
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# True once pid has exited: gone, or a zombie waiting for us to reap it.
proc_gone() {
    [ ! -r "/proc/$1/stat" ] && return 0
    state=$(sed -n 's/^.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null || true)
    [ -z "$state" ] || [ "$state" = Z ]
}

mkdir -p "$tmp/pools" "$tmp/state"
cat >"$tmp/sbxd.yaml" <<EOF
socket: $SOCK
admin_socket: $tmp/sbxd-admin.sock
state_dir: $tmp/state
pools_dir: pools
default_pool: python
log_level: warn
metrics: ""
EOF
cat >"$tmp/pools/python.yaml" <<EOF
name: python
warm: 16
max: 32
queue: 256
memory: 512MiB
cpu: 1.0
pids: 128
timeout: 30s
max_timeout: 60s
output_cap: 32KiB
tmp_size: 64MiB
seccomp: default
image: host
EOF

"$B/sbxd" --config "$tmp/sbxd.yaml" >"$tmp/sbxd.log" 2>&1 &
pid=$!

# A column of the python pool's row in `sbx pools` (by its title), or nothing.
pool_field() {
    "$B/sbx" --socket "$SOCK" pools 2>/dev/null | awk -v col="$1" '
        NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
        $1 == "python" && c { print $c }'
}

sbxd_alive() {
    if proc_gone "$pid"; then
        echo "bench: sbxd exited early; its log:" >&2
        cat "$tmp/sbxd.log" >&2
        pid=""
        exit 1
    fi
}

# Between runs: the pool refilled and nothing running, then a pause, so that one run's
# leftovers (refills, the kernel's deferred network namespace cleanup) do not land in the next.
settle() {
    i=0
    while [ $i -lt 100 ]; do
        warm=$(pool_field WARM)
        running=$(pool_field RUNNING)
        [ -n "$warm" ] && [ "$warm" -ge 16 ] && [ "${running:-1}" = 0 ] && break
        i=$((i + 1))
        sleep 0.1
    done
    sleep 1
}

start_ns=$(date +%s%N)
i=0
while :; do
    sbxd_alive
    warm=$(pool_field WARM)
    [ -n "$warm" ] && [ "$warm" -ge 16 ] && break
    i=$((i + 1))
    [ $i -lt 600 ] || die "the python pool did not reach 16 warm sandboxes in 60 s (warm: ${warm:-?})"
    sleep 0.1
done
warm_s=$(( ($(date +%s%N) - start_ns) / 1000000 ))
echo "sbxd: pid $pid, 16 warm sandboxes after $warm_s ms"

# Idle: nothing running or queued, and a moment for the last refill to settle.
settle
rss_warm_kib=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status")
mem_before_kib=$(mem_available)

# ---- bubblewrap ------------------------------------------------------------------------------
bwrap_ok=0
set -- --unshare-all --die-with-parent --new-session --ro-bind /usr /usr \
    --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
    --symlink usr/sbin /sbin --ro-bind /etc/ld.so.cache /etc/ld.so.cache --tmpfs /tmp \
    --proc /proc --dev /dev --cap-drop ALL --hostname sbx -- /bin/true
if ! command -v bwrap >/dev/null 2>&1; then
    echo "bench: bwrap not found (apt package bubblewrap): skipping the bwrap benchmark"
elif ! out=$(bwrap "$@" 2>&1); then
    echo "bench: bwrap does not work here, skipping it: $out"
else
    bwrap_ok=1
fi

# ---- the runs --------------------------------------------------------------------------------
# Each run writes one JSON line; the refill counters go to a side file.
# A run that takes longer than RUN_LIMIT seconds is stopped (SIGINT, then SIGKILL), so that
# a stuck sbxd ends the benchmark with its log instead of hanging it.
RUN_LIMIT=${BENCH_RUN_LIMIT:-120}
run_load() { # name tasks concurrency
    timeout -s INT -k 5 "$RUN_LIMIT" "$B/sbx-load" --socket "$SOCK" --pid "$pid" --json \
        --tasks "$2" --concurrency "$3" -- /bin/true >"$tmp/$1.json" 2>"$tmp/$1.err" || true
    if ! grep -q '"tasks"' "$tmp/$1.json"; then
        cat "$tmp/$1.err" >&2
        "$B/sbx" --socket "$SOCK" pools >&2 || true
        echo "bench: last lines of sbxd's log:" >&2
        tail -n 20 "$tmp/sbxd.log" >&2
        die "sbx-load did not finish ($1; limit ${RUN_LIMIT}s)"
    fi
}
run_spawn() { # name tasks command...
    name=$1
    tasks=$2
    shift 2
    timeout -k 5 "$RUN_LIMIT" "$B/spawnbench" --tasks "$tasks" --concurrency 8 -- "$@" \
        >"$tmp/$name.json" || true
    grep -q '"tasks"' "$tmp/$name.json" || die "spawnbench did not finish ($name)"
}

r=1
while [ $r -le "$ROUNDS" ]; do
    echo "round $r/$ROUNDS: sbx c=8 ($SBX_TASKS tasks)..."
    c0=$(pool_field CREATED)
    t0=$(date +%s%N)
    run_load "sbx8.$r" "$SBX_TASKS" 8
    t1=$(date +%s%N)
    c1=$(pool_field CREATED)
    echo "{\"created\": $((c1 - c0)), \"ms\": $(( (t1 - t0) / 1000000 ))}" \
        >"$tmp/refill.$r.json"
    sbxd_alive
    settle

    echo "round $r/$ROUNDS: sbx c=1 ($SBX_C1_TASKS tasks)..."
    run_load "sbx1.$r" "$SBX_C1_TASKS" 1
    sbxd_alive
    settle

    echo "round $r/$ROUNDS: floor c=8 ($FLOOR_TASKS x /bin/true)..."
    run_spawn "floor.$r" "$FLOOR_TASKS" /bin/true
    settle

    if [ $bwrap_ok = 1 ]; then
        echo "round $r/$ROUNDS: bwrap c=8 ($BWRAP_TASKS sandboxes)..."
        run_spawn "bwrap.$r" "$BWRAP_TASKS" bwrap "$@"
    fi
    settle
    r=$((r + 1))
done

mem_after_kib=$(mem_available)
rss_after_kib=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status")
failed=$(pool_field FAILED)

# ---- stop sbxd ------------------------------------------------------------------------------
kill -TERM "$pid"
i=0
while [ $i -lt 300 ] && ! proc_gone "$pid"; do
    sleep 0.1
    i=$((i + 1))
done
rc=0
if proc_gone "$pid"; then
    wait "$pid" || rc=$?
    stop_note="sbxd exited $rc after SIGTERM"
else
    stop_note="sbxd did not exit within 30 s of SIGTERM"
    rc=255
fi
pid=""

# ---- report -----------------------------------------------------------------------------------
export BENCH_TMP="$tmp" BENCH_ROUNDS="$ROUNDS" BENCH_RSS_WARM_KIB="$rss_warm_kib" \
    BENCH_RSS_AFTER_KIB="$rss_after_kib" BENCH_MEM_BEFORE_KIB="$mem_before_kib" \
    BENCH_MEM_AFTER_KIB="$mem_after_kib" BENCH_FAILED="${failed:-?}" BENCH_BWRAP="$bwrap_ok"
"$PY" - <<'EOF'
import json, os, statistics

tmp = os.environ["BENCH_TMP"]
rounds = int(os.environ["BENCH_ROUNDS"])

def load(name):
    out = []
    for r in range(1, rounds + 1):
        try:
            with open(os.path.join(tmp, "%s.%d.json" % (name, r))) as f:
                out.append(json.loads(f.read()))
        except (OSError, ValueError):
            pass
    return out

def med(runs, key):
    vals = [x[key] for x in runs if key in x]
    return statistics.median(vals) if vals else float("nan")

def errors(runs):
    n = 0
    for x in runs:
        n += sum(x.get("errors", {}).values()) if "errors" in x else x.get("failures", 0)
    return n

rows = [
    ("sbx exec /bin/true, c=8", load("sbx8")),
    ("sbx exec /bin/true, c=1", load("sbx1")),
    ("floor: posix_spawn /bin/true, c=8", load("floor")),
]
if os.environ["BENCH_BWRAP"] == "1":
    rows.append(("bwrap sandbox per task, c=8", load("bwrap")))

print()
print("medians of %d round%s" % (rounds, "" if rounds == 1 else "s"))
print("%-36s %9s %9s %9s %8s" % ("benchmark", "tasks/s", "p50 ms", "p99 ms", "errors"))
for name, runs in rows:
    print("%-36s %9.1f %9.2f %9.2f %8d" % (name, med(runs, "rate"), med(runs, "p50_ms"),
                                           med(runs, "p99_ms"), errors(runs)))

sbx8 = rows[0][1]
floor = rows[2][1]
print()
def ratio(a, b, key):
    x, y = med(a, key), med(b, key)
    return x / y if y else float("nan")
notes = []
if os.environ["BENCH_BWRAP"] == "1":
    bw = rows[3][1]
    notes.append("sbx/bwrap at c=8: throughput %.2fx, p50 %.2fx, p99 %.2fx"
                 % (ratio(sbx8, bw, "rate"), ratio(sbx8, bw, "p50_ms"), ratio(sbx8, bw, "p99_ms")))
notes.append("sbx/floor at c=8: throughput %.2fx, p50 %.2fx, p99 %.2fx"
             % (ratio(sbx8, floor, "rate"), ratio(sbx8, floor, "p50_ms"),
                ratio(sbx8, floor, "p99_ms")))
rss = int(os.environ["BENCH_RSS_WARM_KIB"] or 0) * 1024
notes.append("sbxd RSS with 16 warm sandboxes, idle: %.1f MiB (after the runs: %.1f MiB)"
             % (rss / 1048576, int(os.environ["BENCH_RSS_AFTER_KIB"] or 0) / 1024))
refills = []
for r in range(1, rounds + 1):
    try:
        with open(os.path.join(tmp, "refill.%d.json" % r)) as f:
            x = json.load(f)
        refills.append(x["created"] * 1000.0 / x["ms"])
    except (OSError, ValueError, KeyError, ZeroDivisionError):
        pass
if refills:
    notes.append("refill rate during sbx c=8: %.1f sandboxes/s (median); pool creation "
                 "failures: %s" % (statistics.median(refills), os.environ["BENCH_FAILED"]))
cpu = [(x["cpu_seconds"]["after"] - x["cpu_seconds"]["before"]) * 1000.0 / x["tasks"]
       for x in sbx8 if "cpu_seconds" in x and x.get("tasks")]
ccpu = [(x["children_cpu_seconds"]["after"] - x["children_cpu_seconds"]["before"]) * 1000.0
        / x["tasks"] for x in sbx8 if "children_cpu_seconds" in x and x.get("tasks")]
if cpu:
    notes.append("sbxd CPU per task at c=8: %.2f ms (reaped children: %.2f ms)"
                 % (statistics.median(cpu), statistics.median(ccpu) if ccpu else 0.0))
mb, ma = int(os.environ["BENCH_MEM_BEFORE_KIB"]), int(os.environ["BENCH_MEM_AFTER_KIB"])
notes.append("MemAvailable: %.0f MiB before the runs, %.0f MiB after (%+.0f MiB)"
             % (mb / 1024, ma / 1024, (ma - mb) / 1024))
for n in notes:
    print(n)

print()
print("| benchmark (medians of %d) | tasks/s | p50 ms | p99 ms |" % rounds)
print("| --- | ---: | ---: | ---: |")
for name, runs in rows:
    print("| %s | %.0f | %.2f | %.2f |" % (name, med(runs, "rate"), med(runs, "p50_ms"),
                                         med(runs, "p99_ms")))
EOF
echo
echo "$stop_note"
[ "$rc" = 0 ] || exit 1
