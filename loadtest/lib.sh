# SPDX-License-Identifier: MIT
# Shell helpers shared by the benchmark scripts (sourced, not run).

# True once pid $1 has exited: gone, or a zombie waiting for us to reap it.
proc_gone() {
    [ ! -r "/proc/$1/stat" ] && return 0
    state=$(sed -n 's/^.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null || true)
    [ -z "$state" ] || [ "$state" = Z ]
}

# Stops the sbxd whose pid is in $pid (started by this script): SIGTERM, then SIGKILL after
# $1 tenths of a second (default 300). Sets stop_rc (its exit status; 255 when it had to be
# killed) and clears pid.
# shellcheck disable=SC2034 # stop_rc is for the scripts that source this file
stop_sbxd() {
    stop_rc=0
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    i=0
    while [ $i -lt "${1:-300}" ] && ! proc_gone "$pid"; do
        sleep 0.1
        i=$((i + 1))
    done
    if proc_gone "$pid"; then
        wait "$pid" || stop_rc=$?
    else
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        stop_rc=255
    fi
    pid=""
}
