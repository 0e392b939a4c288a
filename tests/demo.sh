#!/bin/sh
# SPDX-License-Identifier: MIT
# make demo: starts sbxd on the embedded default configuration, runs a showcase of tasks
# through build/sbx in several pools, prints what happened and the pool status, then stops
# the daemon cleanly.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
build=${BUILD:-build}
state=$(mktemp -d /tmp/sbx-demo.XXXXXX)
sock="$state/sbxd.sock"
admin="$state/sbxd-admin.sock"
export SBX_SOCKET="$sock"
SBX="$build/sbx"

"$build/sbxd" --state-dir "$state" --socket "$sock" --admin-socket "$admin" --metrics "" \
    >"$state/sbxd.log" 2>&1 &
pid=$!
i=0
until [ -S "$sock" ] && grep -q 'msg="ready"' "$state/sbxd.log" 2>/dev/null; do
    i=$((i + 1))
    if [ $i -gt 200 ] || ! kill -0 $pid 2>/dev/null; then
        echo "demo: sbxd did not start:"; cat "$state/sbxd.log"; exit 1
    fi
    sleep 0.05
done
# Let the warm sets fill so the first tasks show warm starts.
sleep 1

show() { # title, then the command
    title=$1; shift
    printf '\n\033[1m== %s\033[0m\n$ %s\n' "$title" "$*"
    "$@"
    echo "-> exit status $?"
}

show "ping the daemon" "$SBX" ping
show "a normal task in the default pool (python)" \
    "$SBX" exec -- sh -c 'echo "hello from $(hostname) as $(id -un) (uid $(id -u))"; echo "root fs:"; ls /; touch /usr/x 2>&1 | head -1'
show "python in the python pool" \
    "$SBX" exec --pool python -- python3 -c 'import sys, platform; print("python", platform.python_version(), "sum:", sum(range(10**6)))'
show "a parsing job over stdin in the parsing pool" \
    sh -c "printf '{\"tasks\": [1, 2, 3]}' | \"$SBX\" exec --pool parsing -- python3 -c 'import json, sys; d = json.load(sys.stdin); print(\"parsed\", len(d[\"tasks\"]), \"tasks\")'"
show "an output flood: capped at the pool's 32 KiB, sandbox killed" \
    sh -c "\"$SBX\" exec -- sh -c 'yes flood' | wc -c"
show "a timeout: sleep 30 with --timeout 1" \
    "$SBX" exec --timeout 1 -- sleep 30
show "a fork bomb hits the pool's pids limit" \
    "$SBX" exec --json --pool parsing -- python3 -c '
import os
n = 0
try:
    while True:
        if os.fork() == 0:
            import time; time.sleep(30); os._exit(0)
        n += 1
except OSError as e:
    print("fork failed after", n, "children:", e)'
# A listener on the host's loopback that the sandbox must not reach.
/usr/bin/python3 -c 'import socket, time; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' >"$state/port" &
lpid=$!
sleep 0.3
python3_port=$(cat "$state/port")
show "the network: only a private loopback; the host's 127.0.0.1 is not reachable" \
    "$SBX" exec -- python3 -c "
import socket
print('interfaces:', [l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]])
for host in ('127.0.0.1',):
    try:
        socket.create_connection((host, $python3_port), timeout=2)
        print(host, 'connected?!')
    except OSError as e:
        print(host, 'refused:', e.strerror)"
show "a daemonized child does not outlive its task" \
    "$SBX" exec -- sh -c 'setsid sh -c "sleep 100" & echo "started a daemon, exiting"'
show "pool status" "$SBX" pools
kill $lpid 2>/dev/null

kill -TERM $pid
wait $pid
rc=$?
printf '\nsbxd exited with status %d after SIGTERM\n' $rc
# This daemon's own cgroup subtree, as it logged it at start-up: it must be gone.
left=0
for dir in $(sed -n 's/.*cgroup="\([^"]*\)".*/\1/p' "$state/sbxd.log" | head -1 | tr ' ' '\n' | sed -n 's/^[a-z]*=\(\/sys\/fs\/cgroup\/.*\)/\1/p'); do
    [ -d "$dir" ] && left=$((left + 1)) && echo "left behind: $dir"
done
echo "cgroups of this sbxd left behind: $left"
rm -rf "$state"
exit $rc
