#!/bin/sh
# SPDX-License-Identifier: MIT
# Filter cost: a syscall-heavy task (dd bs=1 of 2,000,000 bytes: ~4 million read/write calls)
# run through a private sbxd in a `default` pool and a `strict` pool, beside the same dd run
# directly on the host with no filter at all. There is no seccomp-less pool to compare with
# (no `none` profile is shipped, on purpose), so the sandboxed runs also pay for the sandbox
# itself: a `true` task in each pool measures that fixed part, which is subtracted before the
# per-call cost is worked out. A third host run, under a filter that allows everything, shows
# what having any filter at all costs. RUNS runs of each (default 5), interleaved; medians are shown.
# Needs `make all` first and root (sbxd needs it). Takes about a minute.
set -eu

cd "$(dirname "$0")/.."
B=${BUILD:-build}
PY=/usr/bin/python3
RUNS=${SECCOMP_BENCH_RUNS:-5}
BYTES=${SECCOMP_BENCH_BYTES:-2000000}

die() {
    echo "seccomp_bench: $*" >&2
    exit 1
}

for f in sbxd sbxd-init sbx; do
    [ -x "$B/$f" ] || die "$B/$f is missing: run 'make all' first"
done
[ -x "$PY" ] || die "$PY is missing (apt package python3)"
[ "$(id -u)" = 0 ] || die "sbxd needs root"

tmp=$(mktemp -d /tmp/sbx-seccomp-bench.XXXXXX)
SOCK=$tmp/sbxd.sock
pid=""

# shellcheck source=loadtest/lib.sh
. ./loadtest/lib.sh

cleanup() {
    stop_sbxd 100
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$tmp/pools" "$tmp/state"
cat >"$tmp/sbxd.yaml" <<EOF
socket: $SOCK
admin_socket: $tmp/sbxd-admin.sock
state_dir: $tmp/state
pools_dir: pools
default_pool: default
log_level: warn
metrics: ""
EOF
for profile in default strict; do
    cat >"$tmp/pools/$profile.yaml" <<EOF
name: $profile
warm: 1
max: 2
queue: 16
memory: 256MiB
cpu: 1.0
pids: 64
timeout: 120s
max_timeout: 120s
output_cap: 32KiB
tmp_size: 16MiB
seccomp: $profile
image: host
EOF
done

"$B/sbxd" --config "$tmp/sbxd.yaml" >"$tmp/sbxd.log" 2>&1 &
pid=$!
i=0
until "$B/sbx" --socket "$SOCK" ping >/dev/null 2>&1; do
    if proc_gone "$pid"; then
        cat "$tmp/sbxd.log" >&2
        pid=""
        die "sbxd exited early"
    fi
    i=$((i + 1))
    [ $i -lt 200 ] || die "sbxd did not answer a ping in 20 s"
    sleep 0.1
done

# One sandboxed run: prints "wall_ms cpu_ms seccomp_denials" from the exec result (through
# the Python client: `sbx exec --json` leaves seccomp_denials out).
sbx_run() { # pool argv...
    PYTHONPATH=tests/helpers "$PY" - "$SOCK" "$@" <<'EOF' || die "sbx exec in $1 failed"
import sys
import sbx_client
with sbx_client.Client(sys.argv[1]) as c:
    r, out, err = c.exec(sys.argv[3:], pool=sys.argv[2], timeout=120)
if r.get("status") != "exited" or r.get("exit_code") != 0:
    sys.exit("task did not exit 0: %s %r" % (r, err[-500:]))
d = r.get("seccomp_denials")
print(r["wall_ms"], r["cpu_ms"], -1 if d is None else d)
EOF
}

# One run on the host: prints "NAME wall_ms cpu_ms". NAME host: no filter at all; host_allow:
# under a one-instruction filter that allows everything (what any filter costs by taking the
# syscall slow path, before its BPF runs).
host_run() { # name argv...
    "$PY" - "$@" <<'EOF' || die "host run failed"
import ctypes, resource, subprocess, sys, time

class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]

class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

def allow_all():
    libc = ctypes.CDLL(None, use_errno=True)
    insns = (SockFilter * 1)(SockFilter(0x06, 0, 0, 0x7FFF0000))  # BPF_RET|BPF_K, ALLOW
    prog = SockFprog(1, insns)
    # PR_SET_NO_NEW_PRIVS, then seccomp(SECCOMP_SET_MODE_FILTER, 0, &prog).
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.syscall(317, 1, 0, ctypes.byref(prog)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")

name, argv = sys.argv[1], sys.argv[2:]
ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
t0 = time.monotonic()
subprocess.run(argv, check=True, preexec_fn=allow_all if name == "host_allow" else None)
t1 = time.monotonic()
ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
print("%s %d %d" % (name, (t1 - t0) * 1000, cpu * 1000))
EOF
}

DD="dd if=/dev/zero of=/dev/null bs=1 count=$BYTES status=none"
echo "seccomp_bench: $RUNS runs each of '$DD' (~$((BYTES * 2)) syscalls), $(nproc) CPUs," \
    "Linux $(uname -r)"
r=1
while [ $r -le "$RUNS" ]; do
    host_run host $DD >>"$tmp/results"
    host_run host_allow $DD >>"$tmp/results"
    for pool in default strict; do
        # Three numbers, split into $1 $2 $3 on purpose.
        # shellcheck disable=SC2046
        set -- $(sbx_run "$pool" $DD)
        echo "$pool.dd $1 $2 $3" >>"$tmp/results"
        # shellcheck disable=SC2046
        set -- $(sbx_run "$pool" true)
        echo "$pool.true $1 $2 $3" >>"$tmp/results"
    done
    echo "  run $r/$RUNS: $(grep -c . "$tmp/results") measurements"
    r=$((r + 1))
done

"$PY" - "$tmp/results" "$BYTES" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    k, *v = line.split()
    rows.setdefault(k, []).append([int(x) for x in v])
calls = 2 * int(sys.argv[2])
med = lambda k, i: statistics.median(r[i] for r in rows[k])
hw, hc = med("host", 0), med("host", 1)
print()
print("%-20s %8s %8s %8s %11s %10s" % ("run", "wall_ms", "cpu_ms", "denials", "wall ratio", "cpu ratio"))
print("%-20s %8.0f %8.0f %8s %11.3f %10.3f" % ("host dd (no filter)", hw, hc, "-", 1, 1))
aw, ac = med("host_allow", 0), med("host_allow", 1)
print("%-20s %8.0f %8.0f %8s %11.3f %10.3f" % ("host dd (allow-all)", aw, ac, "-", aw / hw, ac / hc))
for p in ("default", "strict"):
    w, c, d = (med(p + ".dd", i) for i in range(3))
    tw, tc, td = (med(p + ".true", i) for i in range(3))
    print("%-20s %8.0f %8.0f %8.0f %11.3f %10.3f" % (p + " dd", w, c, d, w / hw, c / hc))
    print("%-20s %8.0f %8.0f %8.0f %11s %10s" % (p + " true", tw, tc, td, "-", "-"))
print()
for p in ("default", "strict"):
    w, c = med(p + ".dd", 0), med(p + ".dd", 1)
    tw, tc = med(p + ".true", 0), med(p + ".true", 1)
    print("%s: less the sandbox's fixed cost (the `true` run), %+.1f%% wall, %+.1f%% cpu: "
          "%+.0f ns of CPU per syscall" % (p, ((w - tw) / hw - 1) * 100, ((c - tc) / hc - 1) * 100,
                                          (c - tc - hc) * 1e6 / calls))
print("any filter (allow-all on the host): %+.1f%% cpu: %+.0f ns per syscall"
      % ((ac / hc - 1) * 100, (ac - hc) * 1e6 / calls))
print("(medians of %d interleaved runs. There is no filter-less pool to compare with: the host\n"
      " runs have no cgroup and no namespaces, the sandboxed ones have both, so their difference\n"
      " bounds the profiles' cost from above)" % len(rows["host"]))
EOF
