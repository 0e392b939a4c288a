#!/bin/sh
# SPDX-License-Identifier: MIT
# make bench: measures sbx beside what users would use instead, in one run on this machine.
#  1. Comparison, on one fresh sbxd (pool "python": warm 16, max 32): /bin/true,
#     `python3 -c pass` and a 1 MiB stdin-to-stdout parse through sbx at concurrency 1, 8
#     and 64; the floor (posix_spawn, no isolation) and bubblewrap per task at concurrency
#     8; crun where it runs. Ratios pair by pair from the same run.
#     Then the two speed targets again in short interleaved slices (BENCH_PAIRS, default 6:
#     sbx c=8 and bwrap c=8 in alternating order, then sbx c=1 and the floor c=1 in
#     alternating order), so that the machine's swings between runs fall on both sides of
#     each ratio.
#  2. Soak: open loop at 80% of the peak measured in 1, BENCH_SOAK_S seconds (default 60),
#     p50/p99 of the first and last 10 s, sbxd's RSS at start and end.
#  3. Scaling: a fresh sbxd per warm pool size (1, 8, 32; max 64) at concurrency 1, 8, 64
#     and 256: throughput, p99, sbxd RSS. With 32 warm: sbxd's RSS holding 1000 idle
#     connections.
#  4. Sessions and files (loadtest/session_bench.sh, its own sbxd): a command in a session at
#     concurrency 1 and 8 beside the floor, session.open, 10 MiB through files and collect,
#     100 idle sessions' memory.
# Needs `make all` first; run as root (sbxd needs it). About five minutes; BENCH_QUICK=1
# shortens every run (a smoke test, not numbers to publish).
set -eu

cd "$(dirname "$0")/.."
B=${BUILD:-build}
PY=/usr/bin/python3
ROUNDS=${BENCH_ROUNDS:-1}
QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then
    T_TRUE=${BENCH_SBX_TASKS:-200}; T_TRUE1=${BENCH_SBX_C1_TASKS:-100}
    T_FLOOR=${BENCH_FLOOR_TASKS:-200}; T_BWRAP=${BENCH_BWRAP_TASKS:-50}
    T_PY=12; T_PY1=6; SCALE_TASKS=60; SOAK_S=${BENCH_SOAK_S:-25}; IDLE_CONNS=1000
    PAIRS=${BENCH_PAIRS:-2}; P_SBX=100; P_BWRAP=20; P_SBX1=50
else
    T_TRUE=${BENCH_SBX_TASKS:-2000}; T_TRUE1=${BENCH_SBX_C1_TASKS:-300}
    # bwrap does the same work as sbx (issue 2: "beside the same work"): 2000 sandboxes.
    T_FLOOR=${BENCH_FLOOR_TASKS:-1000}; T_BWRAP=${BENCH_BWRAP_TASKS:-2000}
    T_PY=${BENCH_PY_TASKS:-200}; T_PY1=${BENCH_PY_C1_TASKS:-50}
    SCALE_TASKS=${BENCH_SCALE_TASKS:-300}; SOAK_S=${BENCH_SOAK_S:-60}; IDLE_CONNS=1000
    PAIRS=${BENCH_PAIRS:-6}; P_SBX=400; P_BWRAP=60; P_SBX1=100
fi
# /usr/bin/python3 by path: PATH may find another python (pyenv, a venv) that the sandboxes,
# which see only the host's /usr, do not have; the floor and bwrap run the same binary.
PARSE_BYTES=1048576
PARSE_CODE='import sys; sys.stdout.write(str(len(sys.stdin.buffer.read())))'

die() {
    echo "bench: $*" >&2
    exit 1
}

for f in sbxd sbxd-init sbx sbx-load spawnbench; do
    [ -x "$B/$f" ] || die "$B/$f is missing: run 'make all' first"
done
[ -x "$PY" ] || die "$PY is missing (apt package python3)"
[ "$(id -u)" = 0 ] || die "sbxd needs root"
# 1000 idle connections: sbxd and the holder each need more than 1024 descriptors. (POSIX
# leaves `ulimit -n` out; dash and bash, the shells this runs under, both have it.)
# shellcheck disable=SC3045
ulimit -n 8192 2>/dev/null || ulimit -n 4096 2>/dev/null || true
# shellcheck disable=SC3045
[ "$(ulimit -n)" -ge 2048 ] || die "cannot raise the open-file limit to 2048 (ulimit -n)"

# ---- the machine ---------------------------------------------------------------------------
cpu_model=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n 1)
mem_total_kib=$(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo)
echo "machine: $(nproc) CPUs, ${cpu_model:-unknown CPU}, Linux $(uname -r)," \
    "$((mem_total_kib / 1024)) MiB RAM; $(date -u '+%Y-%m-%d %H:%M UTC')"

# Benchmarks on a busy machine measure the other work too: say so up front.
load1=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load1" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
    echo "bench: warning: load average $load1 on $(nproc) CPUs; the numbers will be noisy"
fi

mem_available() {
    sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo
}
rss_kib() {
    sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"
}

# ---- private sbxds ---------------------------------------------------------------------------
tmp=$(mktemp -d /tmp/sbx-bench.XXXXXX)
pid=""
holder=""
WARM=16

# shellcheck source=loadtest/lib.sh
. ./loadtest/lib.sh

cleanup() {
    if [ -n "$holder" ]; then
        kill -TERM "$holder" 2>/dev/null || true
        wait "$holder" 2>/dev/null || true
    fi
    stop_sbxd
    # spawnbench removes its slots' cgroups itself, unless it was killed: then its runs may
    # take a moment to leave them.
    for d in ${BWRAPL_CGROUPS:-}; do
        for c in "$d"/sbx-bench-$$-*; do
            n=0
            while [ -d "$c" ] && ! rmdir "$c" 2>/dev/null && [ $n -lt 40 ]; do
                n=$((n + 1))
                sleep 0.05
            done
        done
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_sbxd TAG WARM MAX: a fresh sbxd on its own state dir; waits for WARM warm sandboxes.
start_sbxd() {
    d=$tmp/$1
    WARM=$2
    SOCK=$d/sbxd.sock
    mkdir -p "$d/pools" "$d/state"
    cat >"$d/sbxd.yaml" <<EOC
socket: $SOCK
admin_socket: $d/sbxd-admin.sock
state_dir: $d/state
pools_dir: pools
default_pool: python
log_level: warn
metrics: ""
limits:
  max_connections: 1100
  max_requests_per_connection: 64
EOC
    cat >"$d/pools/python.yaml" <<EOC
name: python
warm: $2
max: $3
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
    "$B/sbxd" --config "$d/sbxd.yaml" >"$d/sbxd.log" 2>&1 &
    pid=$!
    LOG=$d/sbxd.log
    start_ns=$(date +%s%N)
    i=0
    while :; do
        sbxd_alive
        warm=$(pool_field WARM)
        [ -n "$warm" ] && [ "$warm" -ge "$WARM" ] && break
        i=$((i + 1))
        [ $i -lt 600 ] || die "pool did not reach $WARM warm sandboxes in 60 s (warm: ${warm:-?})"
        sleep 0.1
    done
    warm_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
}

# A column of the python pool's row in `sbx pools` (by its title), or nothing.
pool_field() {
    "$B/sbx" --socket "$SOCK" pools 2>/dev/null | awk -v col="$1" '
        NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
        $1 == "python" && c { print $c }'
}

sbxd_alive() {
    if proc_gone "$pid"; then
        echo "bench: sbxd exited early; its log:" >&2
        cat "$LOG" >&2
        pid=""
        exit 1
    fi
}

# Between runs: the pool refilled and nothing running, then a pause, so that one run's
# leftovers (refills, the kernel's deferred network namespace cleanup) do not land in the next.
settle() {
    i=0
    while [ $i -lt 150 ]; do
        warm=$(pool_field WARM)
        running=$(pool_field RUNNING)
        [ -n "$warm" ] && [ "$warm" -ge "$WARM" ] && [ "${running:-1}" = 0 ] && break
        i=$((i + 1))
        sleep 0.1
    done
    sleep "${1:-1}"
}

# ---- runs --------------------------------------------------------------------------------------
# Each run writes one JSON line to $tmp/NAME.json. A run longer than RUN_LIMIT seconds is
# stopped (SIGINT, then SIGKILL), so a stuck sbxd ends the benchmark with its log.
RUN_LIMIT=${BENCH_RUN_LIMIT:-150}
run_load() { # name sbx-load-args...
    name=$1
    shift
    timeout -s INT -k 5 "$RUN_LIMIT" "$B/sbx-load" --socket "$SOCK" --pid "$pid" --json "$@" \
        >"$tmp/$name.json" 2>"$tmp/$name.err" || true
    if ! grep -q '"tasks"' "$tmp/$name.json"; then
        cat "$tmp/$name.err" >&2
        "$B/sbx" --socket "$SOCK" pools >&2 || true
        echo "bench: last lines of sbxd's log:" >&2
        tail -n 20 "$LOG" >&2
        die "sbx-load did not finish ($name; limit ${RUN_LIMIT}s)"
    fi
}
# The machine's CPU time a run costs: busy jiffies of all CPUs (user, nice, system, irq,
# softirq; not idle, iowait or steal) from busy_mark to busy_save NAME, in $tmp/NAME.busy.json.
# For sbx the window ends once the pool is warm again, so that it holds the creation of as
# many sandboxes as the run used.
CLK_TCK=$(getconf CLK_TCK)
busy_jiffies() { awk '/^cpu /{ print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat; }
busy_mark() { busy0=$(busy_jiffies); }
busy_save() {
    echo "{\"busy_ms\": $(( ($(busy_jiffies) - busy0) * 1000 / CLK_TCK ))}" >"$tmp/$1.busy.json"
}
run_spawn() { # name tasks concurrency spawnbench-args... -- command...
    name=$1
    tasks=$2
    conc=$3
    shift 3
    busy_mark
    timeout -k 5 "$RUN_LIMIT" "$B/spawnbench" --tasks "$tasks" --concurrency "$conc" "$@" \
        >"$tmp/$name.json" || true
    busy_save "$name"
    grep -q '"tasks"' "$tmp/$name.json" || die "spawnbench did not finish ($name)"
}

# ---- alternatives ------------------------------------------------------------------------------
BWRAP_ARGS="--unshare-all --die-with-parent --new-session --ro-bind /usr /usr
    --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64
    --symlink usr/sbin /sbin --ro-bind /etc/ld.so.cache /etc/ld.so.cache --tmpfs /tmp
    --proc /proc --dev /dev --cap-drop ALL --hostname sbx --"
bwrap_ok=0
# shellcheck disable=SC2086
if ! command -v bwrap >/dev/null 2>&1; then
    echo "bwrap: skipped (not installed; apt package bubblewrap)"
elif ! out=$(bwrap $BWRAP_ARGS /bin/true 2>&1); then
    echo "bwrap: skipped (does not work here: $out)"
else
    bwrap_ok=1
fi
# The same bwrap sandbox with what else an sbx sandbox has: the pool's limits in cgroups
# (memory 512 MiB, pids 128, one CPU), one per concurrency slot, made once and reused (as
# sbx reuses its cgroups; a cgroup made and removed per task would cost bwrap more), and
# sbx's `default` seccomp profile (`sbxd --export-seccomp`, denials as plain errno) through
# bwrap --seccomp. Cgroup v1 only: under v2, spawnbench's cgroups would need controllers
# enabled below the cgroup it runs in, which holds processes.
bwrapl_ok=0
BWRAPL_ARGS=""
BWRAPL_CGROUPS=""
bwrapl_note=""
if [ $bwrap_ok = 1 ]; then
    bpf=$tmp/default.bpf
    "$B/sbxd" --export-seccomp default >"$bpf" || die "sbxd --export-seccomp default failed"
    for ctrl in memory pids cpu; do
        # Our cgroup in the hierarchy (co-mounted ones such as cpu,cpuacct have a symlink
        # per controller under /sys/fs/cgroup).
        rel=$(awk -F: -v c="$ctrl" '{ n = split($2, cs, ","); for (i = 1; i <= n; i++)
            if (cs[i] == c) print $3 }' /proc/self/cgroup)
        dir=/sys/fs/cgroup/$ctrl${rel%/}
        if [ -z "$rel" ] || [ ! -f "$dir/cgroup.procs" ]; then
            bwrapl_note="bwrap with limits: skipped (no cgroup v1 '$ctrl' hierarchy)"
            break
        fi
        BWRAPL_ARGS="$BWRAPL_ARGS --cgroup $dir"
        BWRAPL_CGROUPS="$BWRAPL_CGROUPS $dir"
    done
    if [ -z "$bwrapl_note" ]; then
        BWRAPL_ARGS="$BWRAPL_ARGS --cgroup-name sbx-bench-$$
            --cgroup-set memory.limit_in_bytes=536870912
            --cgroup-set memory.memsw.limit_in_bytes?=536870912 --cgroup-set pids.max=128
            --cgroup-set cpu.cfs_period_us=100000 --cgroup-set cpu.cfs_quota_us=100000
            --open 9:$bpf"
        # shellcheck disable=SC2086
        if out=$("$B/spawnbench" --tasks 1 --stderr $BWRAPL_ARGS -- \
            bwrap --seccomp 9 $BWRAP_ARGS /bin/true 2>&1); then
            bwrapl_ok=1
        else
            bwrapl_note="bwrap with limits: skipped (does not work here: $out)"
        fi
    fi
    [ -z "$bwrapl_note" ] || echo "$bwrapl_note"
fi
# crun needs an OCI bundle and a cgroup layout it supports; this machine's hybrid v1
# layout (cgroup2 without controllers) is one it refuses.
crun_note=""
if ! command -v crun >/dev/null 2>&1; then
    crun_note="crun: skipped (not installed)"
elif [ -d /sys/fs/cgroup/unified ] && [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
    crun_note="crun: skipped (hybrid cgroup v1/v2 layout, which crun refuses)"
else
    crun_note="crun: skipped (bundle benchmark not implemented for this layout; crun $(crun --version | head -n 1))"
fi
echo "$crun_note"

# comparison WORKLOAD TASKS TASKS_C1 STDIN_BYTES command...: sbx c=1, 8, 64, floor, bwrap
comparison() {
    w=$1
    n=$2
    n1=$3
    sb=$4
    shift 4
    sbx_stdin=""
    sp_stdin=""
    if [ "$sb" -gt 0 ]; then
        sbx_stdin="--stdin-bytes $sb"
        sp_stdin="--stdin-bytes $sb"
    fi
    r=1
    while [ $r -le "$ROUNDS" ]; do
        echo "  $w round $r/$ROUNDS: sbx c=8 ($n tasks)"
        c0=$(pool_field CREATED)
        t0=$(date +%s%N)
        busy_mark
        # shellcheck disable=SC2086
        run_load "$w.sbx8.$r" --tasks "$n" --concurrency 8 $sbx_stdin -- "$@"
        t1=$(date +%s%N)
        c1=$(pool_field CREATED)
        echo "{\"created\": $((c1 - c0)), \"ms\": $(( (t1 - t0) / 1000000 ))}" \
            >"$tmp/$w.refill.$r.json"
        sbxd_alive
        settle 0
        busy_save "$w.sbx8.$r"
        sleep 1
        echo "  $w round $r/$ROUNDS: sbx c=1 ($n1 tasks)"
        # shellcheck disable=SC2086
        run_load "$w.sbx1.$r" --tasks "$n1" --concurrency 1 $sbx_stdin -- "$@"
        sbxd_alive
        settle
        echo "  $w round $r/$ROUNDS: sbx c=64 ($n tasks)"
        # shellcheck disable=SC2086
        run_load "$w.sbx64.$r" --tasks "$n" --concurrency 64 $sbx_stdin -- "$@"
        sbxd_alive
        settle
        nf=$n
        [ "$w" = true ] && nf=$T_FLOOR
        echo "  $w round $r/$ROUNDS: floor c=8 ($nf tasks)"
        # shellcheck disable=SC2086
        run_spawn "$w.floor.$r" "$nf" 8 $sp_stdin -- "$@"
        settle 0.5
        if [ $bwrap_ok = 1 ]; then
            nb=$n
            [ "$w" = true ] && nb=$T_BWRAP
            echo "  $w round $r/$ROUNDS: bwrap c=8 ($nb sandboxes)"
            # shellcheck disable=SC2086
            run_spawn "$w.bwrap.$r" "$nb" 8 $sp_stdin -- bwrap $BWRAP_ARGS "$@"
            settle 0.5
        fi
        if [ $bwrapl_ok = 1 ]; then
            echo "  $w round $r/$ROUNDS: bwrap with limits and seccomp c=8 ($nb sandboxes)"
            # shellcheck disable=SC2086
            run_spawn "$w.bwrapl.$r" "$nb" 8 $sp_stdin $BWRAPL_ARGS -- \
                bwrap --seccomp 9 $BWRAP_ARGS "$@"
            settle 0.5
        fi
        r=$((r + 1))
    done
}

# ---- 1. comparison -----------------------------------------------------------------------------
# Work of others measured as ours would skew every number, and the load average lags by a
# minute: wait (at most a minute) until less than a fifth of one CPU was busy over a second.
wait_idle() {
    waited=0
    while :; do
        b0=$(busy_jiffies)
        sleep 1
        pct=$(( ($(busy_jiffies) - b0) * 100 / CLK_TCK ))
        [ "$pct" -lt 20 ] && break
        [ "$waited" = 0 ] && echo "bench: waiting for the machine to be idle ($pct% of a CPU busy)"
        waited=$((waited + 1))
        if [ "$waited" -ge 60 ]; then
            echo "bench: warning: still $pct% of a CPU busy after a minute; the numbers will be noisy"
            break
        fi
    done
    [ "$waited" -gt 0 ] && echo "bench: idle after ${waited} s" || true
}
wait_idle
start_sbxd cmp 16 32
echo "sbxd: pid $pid, 16 warm sandboxes after $warm_ms ms"
settle
rss_warm_kib=$(rss_kib "$pid")
mem_before_kib=$(mem_available)
echo "1. comparison"
comparison true "$T_TRUE" "$T_TRUE1" 0 /bin/true
comparison pypass "$T_PY" "$T_PY1" 0 /usr/bin/python3 -c pass
comparison parse "$T_PY" "$T_PY1" "$PARSE_BYTES" /usr/bin/python3 -c "$PARSE_CODE"
# The targets in slices a few seconds apart: sbx c=8 and bwrap c=8 back to back, the first of
# the two alternating, then sbx c=1. (settle uses i.)
pair_bwrap() { # pair: bwrap's slices (plain, then with limits), when the pair's parity is $2
    if [ $(($1 % 2)) = "$2" ] && [ $bwrap_ok = 1 ]; then
        # shellcheck disable=SC2086
        run_spawn "pair.bwrap.$1" "$P_BWRAP" 8 -- bwrap $BWRAP_ARGS /bin/true
        settle 0.5
    fi
    if [ $(($1 % 2)) = "$2" ] && [ $bwrapl_ok = 1 ]; then
        # shellcheck disable=SC2086
        run_spawn "pair.bwrapl.$1" "$P_BWRAP" 8 $BWRAPL_ARGS -- \
            bwrap --seccomp 9 $BWRAP_ARGS /bin/true
        settle 0.5
    fi
}
# The floor at c=1 beside sbx c=1 (before it in even slices, after it in odd ones): what no
# sandbox can beat, since each task is at least a spawn of its command.
pair_floor1() { # pair parity
    if [ $(($1 % 2)) = "$2" ]; then
        run_spawn "pair.floor1.$1" "$P_SBX1" 1 -- /bin/true
        settle 0.5
    fi
}
pair=1
while [ $pair -le "$PAIRS" ]; do
    echo "  pair $pair/$PAIRS: sbx c=8 ($P_SBX tasks), bwrap c=8 ($P_BWRAP, plain and with" \
        "limits), sbx c=1 and the floor c=1 ($P_SBX1 each)"
    pair_bwrap $pair 0
    busy_mark
    run_load "pair.sbx8.$pair" --tasks "$P_SBX" --concurrency 8 -- /bin/true
    sbxd_alive
    settle 0
    busy_save "pair.sbx8.$pair"
    sleep 1
    pair_bwrap $pair 1
    pair_floor1 $pair 0
    run_load "pair.sbx1.$pair" --tasks "$P_SBX1" --concurrency 1 -- /bin/true
    sbxd_alive
    settle
    pair_floor1 $pair 1
    pair=$((pair + 1))
done
mem_after_kib=$(mem_available)
rss_after_kib=$(rss_kib "$pid")
failed=$(pool_field FAILED)

# ---- 2. soak -----------------------------------------------------------------------------------
peak=$("$PY" -c '
import json, sys
best = 0
for n in sys.argv[1:]:
    try:
        best = max(best, json.load(open(n))["rate"])
    except (OSError, ValueError, KeyError):
        pass
print("%.1f" % best)' "$tmp"/true.sbx8.*.json "$tmp"/true.sbx64.*.json)
soak_rate=$("$PY" -c "print('%.1f' % (0.8 * $peak))")
# The soak is three phases: the first 10 s, the middle, the last 10 s.
[ "$SOAK_S" -ge 21 ] || die "BENCH_SOAK_S must be at least 21 (seconds)"
mid_s=$((SOAK_S - 20))
echo "2. soak: ${SOAK_S} s open loop at $soak_rate tasks/s (80% of the peak $peak)"
settle
echo "{\"peak\": $peak, \"rate\": $soak_rate, \"seconds\": $SOAK_S, \"rss_start_kib\": $(rss_kib "$pid")}" \
    >"$tmp/soak.meta.json"
run_load soak.first --rate "$soak_rate" --duration 10s --concurrency 256 -- /bin/true
run_load soak.mid --rate "$soak_rate" --duration "${mid_s}s" --concurrency 256 -- /bin/true
run_load soak.last --rate "$soak_rate" --duration 10s --concurrency 256 -- /bin/true
sbxd_alive
echo "{\"rss_end_kib\": $(rss_kib "$pid")}" >"$tmp/soak.end.json"

stop_sbxd
stop_note="comparison sbxd exited $stop_rc after SIGTERM"
[ "$stop_rc" = 0 ] || die "$stop_note"

# ---- 3. scaling and idle connections ------------------------------------------------------------
echo "3. scaling"
for w in 1 8 32; do
    start_sbxd "scale$w" "$w" 64
    settle
    for c in 1 8 64 256; do
        echo "  warm $w, c=$c ($SCALE_TASKS tasks)"
        run_load "scale.$w.$c" --tasks "$SCALE_TASKS" --concurrency "$c" -- /bin/true
        sbxd_alive
        settle 0.5
    done
    if [ "$w" = 32 ]; then
        settle
        idle_before=$(rss_kib "$pid")
        idle_fds_before=$(ls "/proc/$pid/fd" | wc -l)
        "$PY" - "$SOCK" "$IDLE_CONNS" "$tmp/idle.ready" <<'EOP' &
import os, signal, socket, sys, time
path, n, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
held = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    held.append(s)
open(ready, "w").write("%d\n" % len(held))
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    time.sleep(1)
EOP
        holder=$!
        i=0
        while [ ! -s "$tmp/idle.ready" ] && [ $i -lt 300 ]; do
            sleep 0.1
            i=$((i + 1))
        done
        [ -s "$tmp/idle.ready" ] || die "could not open $IDLE_CONNS connections to sbxd"
        sleep 2
        sbxd_alive
        # The connections must still be open: sbxd rejects beyond max_connections.
        run_load idle.probe --tasks 20 --concurrency 1 -- /bin/true
        idle_after=$(rss_kib "$pid")
        idle_warm=$(pool_field WARM)
        idle_fds=$(ls "/proc/$pid/fd" | wc -l)
        echo "{\"before_kib\": $idle_before, \"after_kib\": $idle_after, \"conns\": $IDLE_CONNS, \"warm\": ${idle_warm:-0}, \"fds_before\": $idle_fds_before, \"fds\": $idle_fds}" \
            >"$tmp/idle.json"
        kill -TERM "$holder" 2>/dev/null || true
        wait "$holder" 2>/dev/null || true
        holder=""
    fi
    stop_sbxd
    [ "$stop_rc" = 0 ] || die "sbxd (warm $w) exited $stop_rc after SIGTERM"
done

# ---- report -----------------------------------------------------------------------------------
export BENCH_TMP="$tmp" BENCH_ROUNDS="$ROUNDS" BENCH_PAIRS="$PAIRS" \
    BENCH_RSS_WARM_KIB="$rss_warm_kib" \
    BENCH_RSS_AFTER_KIB="$rss_after_kib" BENCH_MEM_BEFORE_KIB="$mem_before_kib" \
    BENCH_MEM_AFTER_KIB="$mem_after_kib" BENCH_FAILED="${failed:-?}" BENCH_BWRAP="$bwrap_ok" \
    BENCH_BWRAPL="$bwrapl_ok" BENCH_CRUN="$crun_note" BENCH_BWRAPL_NOTE="$bwrapl_note"
"$PY" loadtest/bench_report.py
echo
echo "$stop_note; the scaling sbxds exited 0"

# ---- 4. sessions and files: its own sbxd and report (loadtest/session_bench.sh) -----------------
echo
BUILD="$B" BENCH_QUICK="$QUICK" BENCH_PAIRS="$PAIRS" sh loadtest/session_bench.sh
