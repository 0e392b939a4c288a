# SPDX-License-Identifier: MIT
"""make bench, part 4 (loadtest/session_bench.sh): files in and out, and idle sessions.

usage: session_bench.py SOCKET SBXD_PID RUNS IDLE

Prints one JSON object: the MiB/s of 10 MiB in through exec's files (streamed in exec.file
chunks under the 1 MiB message bound) and back through collect, each from medians of RUNS
execs with and without the transfer, the bytes checked; then sbxd's RSS growth and the
kernel memory per session with IDLE sessions open and idle.
"""
import json
import os
import socket
import statistics
import sys
import time

import msgpack

MIB = 1 << 20
CHUNK = 960 << 10  # an exec.file chunk, with its header well under the 1 MiB message bound


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.u = msgpack.Unpacker(raw=False, max_buffer_size=64 * MIB)
        self.msgid = 0

    def send(self, obj):
        self.s.sendall(msgpack.packb(obj, use_bin_type=True))

    def request(self, method, params, chunks=()):
        self.msgid += 1
        mid = self.msgid
        self.send([0, mid, method, [params]])
        for c in chunks:
            self.send([2, "exec.file", [mid, c]])
        while True:
            for m in self.u:
                if m[0] == 1 and m[1] == mid:
                    if m[2] is not None:
                        raise RuntimeError("%s: %s" % (method, m[2]))
                    return m[3]
                if m[0] == 2 and m[1] == "error":
                    raise RuntimeError("sbxd: %s" % (m[2],))
            data = self.s.recv(1 << 20)
            if not data:
                raise RuntimeError("sbxd closed the connection")
            self.u.feed(data)


def timed(f):
    t0 = time.perf_counter()
    r = f()
    return time.perf_counter() - t0, r


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0])
    return out


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def init_pss_kib(sbxd):
    """Mean Pss of sbxd's sbxd-init children (sandboxes and fork servers)."""
    vals = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            if int(st[st.rindex(")") + 2:].split()[1]) != sbxd or "(sbxd-init)" not in st:
                continue
            with open("/proc/%s/smaps_rollup" % d) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        vals.append(int(line.split()[1]))
        except (OSError, ValueError):
            continue
    return statistics.mean(vals) if vals else 0.0


def warm(c):
    for p in c.request("pools", {}):
        if p["name"] == "python":
            return p["warm"]
    return 0


def settle(c, n=16):
    for _ in range(300):
        if warm(c) >= n:
            break
        time.sleep(0.1)
    time.sleep(1)


def main():
    path, sbxd, runs, idle = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    c = Conn(path)
    data = os.urandom(10 * MIB)
    chunks = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]
    true = {"argv": ["/bin/true"]}
    streamed = dict(true, files=[{"path": "in.bin", "size": len(data), "mode": 0o644}])
    collected = dict(streamed, collect=["in.bin"])
    base, t_in, t_out = [], [], []
    for _ in range(runs):
        dt, r = timed(lambda: c.request("exec", true))
        base.append(dt)
        dt, r = timed(lambda: c.request("exec", streamed, chunks))
        if r.get("status") != "exited" or r.get("files_in_bytes") != len(data):
            raise RuntimeError("files in: %r" % {k: v for k, v in r.items() if k != "files"})
        t_in.append(dt)
        dt, r = timed(lambda: c.request("exec", collected, chunks))
        files = r.get("files") or []
        if len(files) != 1 or files[0]["data"] != data or files[0]["truncated"]:
            raise RuntimeError("collect out: the file did not come back whole")
        t_out.append(dt)
        settle(c)
    mb, mi, mo = statistics.median(base), statistics.median(t_in), statistics.median(t_out)
    in_s = max(mi - mb, 1e-6)
    out_s = max(mo - mi, 1e-6)

    settle(c)
    rss0, m0 = rss_kib(sbxd), meminfo()
    ids = [c.request("session.open", {"pool": "python"})["session"] for _ in range(idle)]
    settle(c)
    time.sleep(2)
    rss1, m1 = rss_kib(sbxd), meminfo()
    pss = init_pss_kib(sbxd)
    for s in ids:
        c.request("session.close", {"session": s})

    def per(k):
        return (m1[k] - m0[k]) / idle

    slab, pt, ks, shm = per("Slab"), per("PageTables"), per("KernelStack"), per("Shmem")
    print(json.dumps({
        "runs": runs,
        "base_ms": mb * 1e3, "in_ms": mi * 1e3, "inout_ms": mo * 1e3,
        "in_mib_s": 10 / in_s, "out_mib_s": 10 / out_s,
        "idle": idle, "rss_growth_mib": (rss1 - rss0) / 1024.0,
        "slab_kib": slab, "pagetables_kib": pt, "kstack_kib": ks, "shmem_kib": shm,
        "kernel_kib": slab + pt + ks + shm,
        "mem_available_kib": (m0["MemAvailable"] - m1["MemAvailable"]) / idle,
        "init_rss_kib": pss,
    }))


if __name__ == "__main__":
    main()
