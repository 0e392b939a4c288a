# SPDX-License-Identifier: MIT
# Shell helpers shared by the benchmark scripts (sourced, not run).

# True once pid $1 has exited: gone, or a zombie waiting for us to reap it.
proc_gone() {
    [ ! -r "/proc/$1/stat" ] && return 0
    state=$(sed -n 's/^.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null || true)
    [ -z "$state" ] || [ "$state" = Z ]
}
