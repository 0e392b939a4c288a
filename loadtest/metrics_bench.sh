#!/bin/sh
# SPDX-License-Identifier: MIT
# Scrape cost: what a Prometheus scrape every second costs sbxd's throughput. Starts a private
# sbxd with metrics on a free loopback port (python pool: warm 16, max 32, as `make bench`),
# then runs sbx-load (c=8, /bin/true) ROUNDS times without and ROUNDS times with a scraper
# that GETs /metrics once a second, interleaved A B B A so drift hits both alike, and prints
# the median throughputs and their ratio. It also measures one scrape directly: sbxd's own
# CPU time over many back-to-back scrapes of an idle daemon, divided by their number.
# Needs `make all` first and root (sbxd needs it). Takes about a minute.
set -eu

cd "$(dirname "$0")/.."
B=${BUILD:-build}
PY=/usr/bin/python3
ROUNDS=${METRICS_BENCH_ROUNDS:-3}
TASKS=${METRICS_BENCH_TASKS:-3000}
SCRAPES=${METRICS_BENCH_SCRAPES:-2000}

die() {
    echo "metrics_bench: $*" >&2
    exit 1
}

for f in sbxd sbxd-init sbx sbx-load; do
    [ -x "$B/$f" ] || die "$B/$f is missing: run 'make all' first"
done
[ -x "$PY" ] || die "$PY is missing (apt package python3)"
[ "$(id -u)" = 0 ] || die "sbxd needs root"

tmp=$(mktemp -d /tmp/sbx-metrics-bench.XXXXXX)
SOCK=$tmp/sbxd.sock
pid=""
scraper=""

# shellcheck source=loadtest/lib.sh
. ./loadtest/lib.sh

stop_scraper() {
    if [ -n "$scraper" ]; then
        kill -TERM "$scraper" 2>/dev/null || true
        wait "$scraper" 2>/dev/null || true
        scraper=""
    fi
}

cleanup() {
    stop_scraper
    stop_sbxd 100
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$port/metrics"

mkdir -p "$tmp/pools" "$tmp/state"
cat >"$tmp/sbxd.yaml" <<EOF
socket: $SOCK
admin_socket: $tmp/sbxd-admin.sock
state_dir: $tmp/state
pools_dir: pools
default_pool: python
log_level: warn
metrics: 127.0.0.1:$port
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

# Private copies: a rebuild of build/ during the run cannot mix an old sbxd with a new init.
# Sandboxes execute sbxd-init as their mapped root, which must be able to reach it.
mkdir -p "$tmp/bin"
chmod 711 "$tmp"
chmod 755 "$tmp/bin"
cp "$B/sbxd" "$B/sbxd-init" "$B/sbx-load" "$tmp/bin/"
"$tmp/bin/sbxd" --config "$tmp/sbxd.yaml" >"$tmp/sbxd.log" 2>&1 &
pid=$!

warm_count() {
    "$PY" - "$URL" <<'EOF' 2>/dev/null || echo 0
import sys, urllib.request
body = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
for line in body.splitlines():
    if line.startswith('sbx_pool_warm{pool="python"} '):
        print(int(float(line.split()[1])))
EOF
}

wait_warm() {
    i=0
    while :; do
        proc_gone "$pid" && { cat "$tmp/sbxd.log" >&2; die "sbxd exited early"; }
        w=$(warm_count)
        [ -n "$w" ] && [ "$w" -ge 16 ] && break
        i=$((i + 1))
        [ $i -lt 600 ] || die "the python pool did not reach 16 warm sandboxes in 60 s"
        sleep 0.1
    done
}

wait_warm
echo "sbxd: pid $pid, metrics on $URL, 16 warm sandboxes"

# ---- one scrape, measured directly ----------------------------------------------------------
cpu_ticks() { # utime + stime of sbxd
    sed 's/^.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }'
}
sleep 1
size=$(curl -s "$URL" | wc -c)
t0=$(cpu_ticks)
w0=$(date +%s%N)
"$PY" - "$port" "$SCRAPES" <<'EOF'
import http.client, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    r = c.getresponse()
    r.read()
    assert r.status == 200
    c.close()
EOF
w1=$(date +%s%N)
t1=$(cpu_ticks)
hz=$(getconf CLK_TCK)

# ---- throughput with and without a scraper ----------------------------------------------------
run_load() { # name
    timeout 600 "$tmp/bin/sbx-load" --socket "$SOCK" --pid "$pid" --json --tasks "$TASKS" \
        --concurrency 8 --warmup 100 -- /bin/true >"$tmp/$1.json" 2>"$tmp/$1.err" || true
    [ -s "$tmp/$1.json" ] || { cat "$tmp/$1.err" >&2; die "sbx-load failed ($1)"; }
}

start_scraper() {
    "$PY" - "$port" >"$tmp/scraper.log" 2>&1 <<'EOF' &
import http.client, sys, time
port = int(sys.argv[1])
n = 0
next_t = time.monotonic()
while True:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/metrics")
    c.getresponse().read()
    c.close()
    n += 1
    print(n, flush=True)
    next_t += 1.0
    time.sleep(max(0.0, next_t - time.monotonic()))
EOF
    scraper=$!
}

r=1
while [ "$r" -le "$ROUNDS" ]; do
    for kind in $( [ $((r % 2)) = 1 ] && echo "plain scraped" || echo "scraped plain"); do
        wait_warm
        echo "round $r/$ROUNDS: $kind ($TASKS tasks, c=8)..."
        if [ "$kind" = scraped ]; then
            start_scraper
        fi
        run_load "$kind.$r"
        if [ "$kind" = scraped ]; then
            stop_scraper
            scrapes=$(tail -n 1 "$tmp/scraper.log" 2>/dev/null || echo 0)
            echo "{\"scrapes\": ${scrapes:-0}}" >"$tmp/scrapes.$r.json"
        fi
    done
    r=$((r + 1))
done

export MB_TMP="$tmp" MB_ROUNDS="$ROUNDS" MB_SIZE="$size" MB_T0="$t0" MB_T1="$t1" MB_HZ="$hz" \
    MB_W0="$w0" MB_W1="$w1" MB_SCRAPES="$SCRAPES"
"$PY" - <<'EOF'
import json, os, statistics

tmp, rounds = os.environ["MB_TMP"], int(os.environ["MB_ROUNDS"])

def load(name):
    out = []
    for r in range(1, rounds + 1):
        try:
            with open(os.path.join(tmp, "%s.%d.json" % (name, r))) as f:
                out.append(json.load(f))
        except (OSError, ValueError):
            pass
    return out

plain, scraped = load("plain"), load("scraped")
scrapes = [x["scrapes"] for x in load("scrapes")]
rp = [x["rate"] for x in plain]
rs = [x["rate"] for x in scraped]
n = int(os.environ["MB_SCRAPES"])
cpu_ms = (int(os.environ["MB_T1"]) - int(os.environ["MB_T0"])) * 1000.0 / int(os.environ["MB_HZ"]) / n
wall_ms = (int(os.environ["MB_W1"]) - int(os.environ["MB_W0"])) / 1e6 / n
print()
print("one scrape: %d bytes; sbxd CPU %.3f ms per scrape (%d back-to-back scrapes, %.2f ms "
      "wall each)" % (int(os.environ["MB_SIZE"]), cpu_ms, n, wall_ms))
print("  at one scrape a second: %.3f%% of one CPU" % (cpu_ms / 10.0))
print("throughput, sbx exec /bin/true c=8, %d rounds each (tasks/s):" % rounds)
print("  without scraper: %s  median %.1f" % (" ".join("%.1f" % x for x in rp), statistics.median(rp)))
print("  with 1 s scraper: %s  median %.1f  (%s scrapes per run)"
      % (" ".join("%.1f" % x for x in rs), statistics.median(rs), "/".join(map(str, scrapes))))
ratio = statistics.median(rs) / statistics.median(rp)
pairs = [b["rate"] / a["rate"] for a, b in zip(plain, scraped) if a.get("rate")]
print("  ratio with/without: %.4f (%+.2f%%); per round: %s" % (
    ratio, (ratio - 1) * 100, " ".join("%.3f" % x for x in pairs)))
spread = (max(rp) - min(rp)) / statistics.median(rp) * 100
print("  run-to-run spread without scraper: %.2f%% (the noise floor of the ratio)" % spread)

def cpu_per_task(runs):
    v = [(x["cpu_seconds"]["after"] - x["cpu_seconds"]["before"]) * 1000.0 / x["tasks"]
         for x in runs if "cpu_seconds" in x and x.get("tasks")]
    return statistics.median(v) if v else float("nan")

cp, cs = cpu_per_task(plain), cpu_per_task(scraped)
print("sbxd CPU per task (its loop is the shared bottleneck): %.3f ms without, %.3f ms with "
      "the scraper (%+.2f%%)" % (cp, cs, (cs / cp - 1) * 100 if cp else float("nan")))
# The scraper's share of what sbxd spends per second at the measured rate: what a scrape a
# second can take from throughput when sbxd is the bottleneck, free of the run-to-run noise.
busy_ms = statistics.median(rp) * cp
print("scrape share of sbxd's CPU at %.1f tasks/s: %.3f ms of %.1f ms per second = %.3f%%"
      % (statistics.median(rp), cpu_ms, busy_ms, cpu_ms / busy_ms * 100 if busy_ms else float("nan")))
EOF
