# SPDX-License-Identifier: MIT
"""make bench's report: reads the JSON lines loadtest/bench.sh left in $BENCH_TMP and prints
the comparison (medians over rounds), pair-by-pair ratios, the soak, the scaling grid and
the idle-connection memory, as plain text and as Markdown tables for docs/BENCHMARKS.md."""
import json
import os
import statistics

tmp = os.environ["BENCH_TMP"]
rounds = int(os.environ["BENCH_ROUNDS"])
bwrap = os.environ.get("BENCH_BWRAP") == "1"
# bwrap's sandbox with sbx's limits (cgroups) and seccomp profile added: the equivalent one.
bwrapl = os.environ.get("BENCH_BWRAPL") == "1"


def read(name):
    try:
        with open(os.path.join(tmp, name + ".json")) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def runs(name):
    out = [read("%s.%d" % (name, r)) for r in range(1, rounds + 1)]
    return [x for x in out if x]


def med(rs, key):
    vals = [x[key] for x in rs if key in x]
    return statistics.median(vals) if vals else float("nan")


def errors(rs):
    n = 0
    for x in rs:
        n += sum(x.get("errors", {}).values()) if "errors" in x else x.get("failures", 0)
    return n


def busy_per_task(name):
    """The machine's busy CPU ms per task of run NAME (bench.sh's busy_save), or None."""
    x, b = read(name), read(name + ".busy")
    if not x or not b or not x.get("tasks"):
        return None
    return b["busy_ms"] / x["tasks"]


def busy_med(name):
    vals = [v for v in (busy_per_task("%s.%d" % (name, r)) for r in range(1, rounds + 1))
            if v is not None]
    return statistics.median(vals) if vals else float("nan")


def ratio(a, b, key):
    x, y = med(a, key), med(b, key)
    return x / y if y else float("nan")


# The runners whose machine CPU per task bench.sh records, by their row name.
BUSY_KEYS = {"sbx c=8": ".sbx8", "floor: posix_spawn c=8": ".floor",
             "bwrap per task c=8": ".bwrap", "bwrap + limits + seccomp c=8": ".bwrapl"}
WORKLOADS = [("true", "/bin/true"), ("pypass", "/usr/bin/python3 -c pass"),
             ("parse", "1 MiB stdin -> python3 -> its length")]
rows = []
for w, desc in WORKLOADS:
    rows.append((w, desc, "sbx c=1", runs(w + ".sbx1")))
    rows.append((w, desc, "sbx c=8", runs(w + ".sbx8")))
    rows.append((w, desc, "sbx c=64", runs(w + ".sbx64")))
    rows.append((w, desc, "floor: posix_spawn c=8", runs(w + ".floor")))
    if bwrap:
        rows.append((w, desc, "bwrap per task c=8", runs(w + ".bwrap")))
    if bwrapl:
        rows.append((w, desc, "bwrap + limits + seccomp c=8", runs(w + ".bwrapl")))

print()
print("== comparison (medians of %d round%s) ==" % (rounds, "" if rounds == 1 else "s"))
print("%-38s %-28s %9s %9s %9s %7s %8s" % ("workload", "runner", "tasks/s", "p50 ms", "p99 ms",
                                            "errors", "cpu ms"))
for w, desc, name, rs in rows:
    print("%-38s %-28s %9.1f %9.2f %9.2f %7d %8s" % (
        desc, name, med(rs, "rate"), med(rs, "p50_ms"), med(rs, "p99_ms"), errors(rs),
        BUSY_KEYS.get(name) and "%.2f" % busy_med(w + BUSY_KEYS[name]) or "-"))
print("(cpu ms: the machine's busy CPU time per task, all processes; for sbx c=8 until the "
      "pool is warm again)")
print(os.environ.get("BENCH_CRUN", ""))
if os.environ.get("BENCH_BWRAPL_NOTE"):
    print(os.environ["BENCH_BWRAPL_NOTE"])

print()
print("== ratios (same run) ==")
ratio_lines = []
for w, desc in WORKLOADS:
    s1, s8, s64 = runs(w + ".sbx1"), runs(w + ".sbx8"), runs(w + ".sbx64")
    fl = runs(w + ".floor")
    line = "%s: sbx c=8 / floor c=8: throughput %.2fx, p50 %.2fx" % (
        desc, ratio(s8, fl, "rate"), ratio(s8, fl, "p50_ms"))
    if bwrap:
        bw = runs(w + ".bwrap")
        line += "; sbx c=8 / bwrap c=8: throughput %.2fx, p50 %.2fx; sbx c=64 / bwrap c=8: " \
                "throughput %.2fx" % (ratio(s8, bw, "rate"), ratio(s8, bw, "p50_ms"),
                                      ratio(s64, bw, "rate"))
    if bwrapl:
        bl = runs(w + ".bwrapl")
        line += "; sbx c=8 / bwrap with limits and seccomp c=8: throughput %.2fx, p50 %.2fx" % (
            ratio(s8, bl, "rate"), ratio(s8, bl, "p50_ms"))
    cpu_s8 = busy_med(w + ".sbx8")
    for label, key, on in (("bwrap", ".bwrap", bwrap),
                           ("bwrap with limits and seccomp", ".bwrapl", bwrapl)):
        if on and cpu_s8 == cpu_s8 and cpu_s8 > 0:
            line += "; machine CPU per task, %s / sbx: %.2fx" % (label, busy_med(w + key) / cpu_s8)
    ratio_lines.append(line)
    print(line)

# ---- the targets in interleaved slices
pairs = int(os.environ.get("BENCH_PAIRS", "0"))
p8 = [read("pair.sbx8.%d" % i) for i in range(1, pairs + 1)]
p1 = [read("pair.sbx1.%d" % i) for i in range(1, pairs + 1)]
pf1 = [read("pair.floor1.%d" % i) for i in range(1, pairs + 1)]
pb = [read("pair.bwrap.%d" % i) for i in range(1, pairs + 1)]
pbl = [read("pair.bwrapl.%d" % i) for i in range(1, pairs + 1)]
pair_lines = []


def slice_ratios(label, key, bws):
    got = [(a, b) for a, b in zip(p8, bws) if a and b and b.get("rate")]
    if not got:
        return ""
    rs = sorted(a["rate"] / b["rate"] for a, b in got)
    bwr = [b["rate"] for _, b in got]
    out = "; %s c=8: median %.0f/s; sbx / it slice by slice: median %.2fx (%.2f-%.2fx)" % (
        label, statistics.median(bwr), statistics.median(rs), rs[0], rs[-1])
    cpu = []
    for i in range(1, pairs + 1):
        s_ms, b_ms = busy_per_task("pair.sbx8.%d" % i), busy_per_task("pair.%s.%d" % (key, i))
        if s_ms and b_ms:
            cpu.append(b_ms / s_ms)
    if cpu:
        cpu.sort()
        out += ", its machine CPU per task / sbx's: median %.2fx (%.2f-%.2fx)" % (
            statistics.median(cpu), cpu[0], cpu[-1])
    return out


if p8 and any(p8):
    print()
    print("== the targets in %d interleaved slices ==" % pairs)
    s8r = [x["rate"] for x in p8 if x]
    line = "true, sbx c=8: median %.0f tasks/s (slices %.0f-%.0f)" % (
        statistics.median(s8r), min(s8r), max(s8r))
    line += slice_ratios("bwrap", "bwrap", pb)
    line += slice_ratios("bwrap with limits and seccomp", "bwrapl", pbl)
    s8cpu = [v for v in (busy_per_task("pair.sbx8.%d" % i) for i in range(1, pairs + 1)) if v]
    if s8cpu:
        line += "; sbx's machine CPU per task: median %.2f ms" % statistics.median(s8cpu)
    pair_lines.append(line)
    c1 = [x["p50_ms"] for x in p1 if x]
    if c1:
        line = "true, sbx c=1: p50 of the slices: median %.2f ms (%.2f-%.2f ms)" % (
            statistics.median(c1), min(c1), max(c1))
        f1 = [x["p50_ms"] for x in pf1 if x]
        if f1:
            line += "; floor: posix_spawn c=1, no isolation: median %.2f ms (%.2f-%.2f ms)" % (
                statistics.median(f1), min(f1), max(f1))
        pair_lines.append(line)
    for line in pair_lines:
        print(line)
    print()

notes = []
rss = int(os.environ["BENCH_RSS_WARM_KIB"] or 0)
notes.append("sbxd RSS with 16 warm sandboxes, idle: %.1f MiB (after the comparison: %.1f MiB)"
             % (rss / 1024, int(os.environ["BENCH_RSS_AFTER_KIB"] or 0) / 1024))
refills = []
for r in range(1, rounds + 1):
    x = read("true.refill.%d" % r)
    if x and x.get("ms"):
        refills.append(x["created"] * 1000.0 / x["ms"])
if refills:
    notes.append("refill rate during sbx true c=8: %.1f sandboxes/s; pool creation failures: %s"
                 % (statistics.median(refills), os.environ["BENCH_FAILED"]))
s8 = runs("true.sbx8")
cpu = [(x["cpu_seconds"]["after"] - x["cpu_seconds"]["before"]) * 1000.0 / x["tasks"]
       for x in s8 if "cpu_seconds" in x and x.get("tasks")]
ccpu = [(x["children_cpu_seconds"]["after"] - x["children_cpu_seconds"]["before"]) * 1000.0
        / x["tasks"] for x in s8 if "children_cpu_seconds" in x and x.get("tasks")]
if cpu:
    notes.append("sbxd CPU per task, true c=8: %.2f ms (reaped children: %.2f ms)"
                 % (statistics.median(cpu), statistics.median(ccpu) if ccpu else 0.0))
mb, ma = int(os.environ["BENCH_MEM_BEFORE_KIB"]), int(os.environ["BENCH_MEM_AFTER_KIB"])
notes.append("MemAvailable: %.0f MiB before the comparison, %.0f MiB after (%+.0f MiB)"
             % (mb / 1024, ma / 1024, (ma - mb) / 1024))
for n in notes:
    print(n)

# ---- soak
meta, end = read("soak.meta"), read("soak.end")
first, mid, last = read("soak.first"), read("soak.mid"), read("soak.last")
soak_lines = []
if meta and end and first and last:
    print()
    print("== soak: %d s open loop at %.1f tasks/s (80%% of %.1f) ==" % (
        meta["seconds"], meta["rate"], meta["peak"]))
    errs = sum(sum(x.get("errors", {}).values()) for x in (first, mid, last) if x)
    for label, x in (("first 10 s", first), ("middle", mid), ("last 10 s", last)):
        if x:
            soak_lines.append("| %s | %d | %.1f | %.2f | %.2f | %.2f |" % (
                label, x["tasks"], x["rate"], x["p50_ms"], x["p99_ms"], x["max_ms"]))
            print("%-10s tasks %5d  %.1f tasks/s  p50 %.2f ms  p99 %.2f ms  max %.2f ms" % (
                label, x["tasks"], x["rate"], x["p50_ms"], x["p99_ms"], x["max_ms"]))
    r0, r1 = meta["rss_start_kib"] / 1024, end["rss_end_kib"] / 1024
    drift = last["p99_ms"] / first["p99_ms"] if first["p99_ms"] else float("nan")
    verdict = ("sbxd RSS %.1f MiB at the start, %.1f MiB at the end (%+.1f MiB); p99 last/first "
               "%.2fx; errors %d" % (r0, r1, r1 - r0, drift, errs))
    print(verdict)
    soak_lines.append(verdict)

# ---- scaling
print()
print("== scaling: /bin/true, fresh sbxd per warm size (max 64) ==")
print("%-6s %-6s %9s %9s %9s %9s" % ("warm", "c", "tasks/s", "p50 ms", "p99 ms", "RSS MiB"))
scale_md = []
for w in (1, 8, 32):
    for c in (1, 8, 64, 256):
        x = read("scale.%d.%d" % (w, c))
        if not x:
            continue
        rssm = x.get("rss_bytes", {}).get("after", 0) / 1048576
        print("%-6d %-6d %9.1f %9.2f %9.2f %9.1f" % (w, c, x["rate"], x["p50_ms"], x["p99_ms"],
                                                    rssm))
        scale_md.append("| %d | %d | %.0f | %.2f | %.2f | %.1f |" % (w, c, x["rate"], x["p50_ms"],
                                                                     x["p99_ms"], rssm))
idle = read("idle")
idle_line = ""
if idle:
    idle_line = ("sbxd RSS with %d warm sandboxes: %.1f MiB idle, %.1f MiB holding %d idle "
                 "connections" % (idle["warm"], idle["before_kib"] / 1024,
                                  idle["after_kib"] / 1024, idle["conns"]))
    if "fds" in idle:
        idle_line += " (sbxd's open files: %d before, %d with them)" % (idle["fds_before"],
                                                                       idle["fds"])
    print(idle_line)

# ---- markdown
print()
print("| workload | runner | tasks/s | p50 ms | p99 ms | errors | machine CPU ms/task |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for w, desc, name, rs in rows:
    print("| %s | %s | %.0f | %.2f | %.2f | %d | %s |" % (
        desc, name, med(rs, "rate"), med(rs, "p50_ms"), med(rs, "p99_ms"), errors(rs),
        BUSY_KEYS.get(name) and "%.2f" % busy_med(w + BUSY_KEYS[name]) or ""))
print()
print("| warm | concurrency | tasks/s | p50 ms | p99 ms | sbxd RSS MiB |")
print("| ---: | ---: | ---: | ---: | ---: | ---: |")
for line in scale_md:
    print(line)
if soak_lines:
    print()
    print("| soak window | tasks | tasks/s | p50 ms | p99 ms | max ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for line in soak_lines[:-1]:
        print(line)
    print()
    print(soak_lines[-1])
