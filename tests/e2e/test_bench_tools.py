# SPDX-License-Identifier: MIT
"""What make bench builds its equivalent bwrap sandbox from: `sbxd --export-seccomp` writes a
built-in profile as raw BPF that, loaded by another process, denies what sbx denies with
plain errno; spawnbench's --cgroup slots put each run under the given limits in a cgroup of
its concurrency slot, --open hands each run a file on a numbered fd, and nothing of the
slots' cgroups is left behind, also when the setup fails."""
import ctypes
import json
import os
import struct
import subprocess
import tempfile
import unittest

from harness import BUILD

SBXD = os.path.join(BUILD, "sbxd")
SPAWNBENCH = os.path.join(BUILD, "spawnbench")
PY = "/usr/bin/python3"

# Loads the BPF in argv[1] as this process's filter, then makes the calls and prints
# {name: errno name or "returned N"}.
LOADER = r"""
import ctypes, errno, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
prog = open(sys.argv[1], "rb").read()
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
fp = Fprog(len(prog) // 8, prog)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
if libc.prctl(22, 2, ctypes.byref(fp), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    print(json.dumps({"load": errno.errorcode[ctypes.get_errno()]}))
    sys.exit(0)
out = {}
for name, nr, args in [("ptrace", 101, (0, 0, 0, 0)), ("unshare_newuser", 272, (0x10000000,)),
                       ("kexec_load", 246, (0, 0, 0, 0)), ("getpid", 39, ())]:
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    e = ctypes.get_errno()
    out[name] = errno.errorcode.get(e, str(e)) if r == -1 else "returned"
out["mode"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")][0]
print(json.dumps(out))
"""


def v1_dir(ctrl):
    """Our own cgroup in the v1 hierarchy of ctrl, or None."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if ctrl in ctrls.split(","):
                d = "/sys/fs/cgroup/%s%s" % (ctrl, path.rstrip("/"))
                return d if os.path.isfile(d + "/cgroup.procs") else None
    return None


class ExportSeccomp(unittest.TestCase):
    def export(self, name):
        with tempfile.NamedTemporaryFile(prefix="sbx-bpf-", delete=False) as f:
            path = f.name
        self.addCleanup(os.unlink, path)
        with open(path, "wb") as out:
            p = subprocess.run([SBXD, "--export-seccomp", name], stdout=out,
                               stderr=subprocess.PIPE, timeout=30)
        return p, path

    def test_default_profile_denies_with_plain_errno_when_loaded_elsewhere(self):
        p, path = self.export("default")
        self.assertEqual(p.returncode, 0, p.stderr)
        prog = open(path, "rb").read()
        self.assertGreater(len(prog), 8)
        self.assertEqual(len(prog) % 8, 0)
        rets = [k for code, _, _, k in struct.iter_unpack("=HBBI", prog) if code == 0x06]
        self.assertTrue(rets)
        # Plain form: no USER_NOTIF return (nobody would answer it); errno returns exist.
        self.assertNotIn(0x7FC00000, {k & 0xFFFF0000 for k in rets})
        self.assertIn(0x00050000, {k & 0xFFFF0000 for k in rets})
        r = subprocess.run([PY, "-c", LOADER, path], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out, {"ptrace": "EPERM", "unshare_newuser": "EPERM",
                               "kexec_load": "EPERM", "getpid": "returned", "mode": "2"})

    def test_strict_differs_from_default(self):
        p1, d = self.export("default")
        p2, s = self.export("strict")
        self.assertEqual((p1.returncode, p2.returncode), (0, 0))
        self.assertNotEqual(open(d, "rb").read(), open(s, "rb").read())

    def test_a_terminal_is_refused(self):
        master, slave = os.openpty()
        try:
            p = subprocess.run([SBXD, "--export-seccomp", "default"], stdout=slave,
                               stderr=subprocess.PIPE, timeout=30)
        finally:
            os.close(slave)
            os.close(master)
        self.assertEqual(p.returncode, 64)
        self.assertIn(b"redirect stdout to a file", p.stderr)

    def test_unknown_profile_is_a_usage_error(self):
        p, path = self.export("no-such-profile")
        self.assertEqual(p.returncode, 64)
        self.assertIn(b"no seccomp profile 'no-such-profile'", p.stderr)
        self.assertEqual(os.path.getsize(path), 0)


class SpawnbenchSlots(unittest.TestCase):
    def setUp(self):
        self.dirs = [v1_dir(c) for c in ("memory", "pids", "cpu")]
        if None in self.dirs:
            self.skipTest("no cgroup v1 memory, pids and cpu hierarchies here")
        self.name = "sbx-test-%d" % os.getpid()
        self.tmp = tempfile.mkdtemp(prefix="sbx-spawnbench-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp])
        for d in self.dirs:
            for e in os.listdir(d):
                if e.startswith(self.name + "-"):
                    os.rmdir(os.path.join(d, e))

    def left(self):
        return sorted(e for d in self.dirs for e in os.listdir(d)
                      if e.startswith(self.name + "-"))

    def spawnbench(self, extra, cmd, tasks=6, concurrency=2):
        args = [SPAWNBENCH, "--tasks", str(tasks), "--concurrency", str(concurrency),
                "--cgroup-name", self.name]
        for d in self.dirs:
            args += ["--cgroup", d]
        return subprocess.run(args + extra + ["--"] + cmd, capture_output=True, text=True,
                              timeout=60)

    def test_runs_join_their_slots_limits_and_get_the_file(self):
        blob = os.path.join(self.tmp, "blob")
        with open(blob, "wb") as f:
            f.write(b"x" * 1234)
        script = ('d=$(sed -n "s/^[0-9]*:memory://p" /proc/self/cgroup); '
                  'p=$(sed -n "s/^[0-9]*:pids://p" /proc/self/cgroup); '
                  'c=$(sed -n "s/^[0-9]*:cpu://p" /proc/self/cgroup); '
                  '{ echo "$d"; echo "$p"; echo "$c"; '
                  'cat /sys/fs/cgroup/memory$d/memory.limit_in_bytes; '
                  'cat /sys/fs/cgroup/pids$p/pids.max; '
                  'cat /sys/fs/cgroup/cpu$c/cpu.cfs_quota_us; '
                  'wc -c <&9; } > %s/out.$$' % self.tmp)
        p = self.spawnbench(["--cgroup-set", "memory.limit_in_bytes=268435456",
                             "--cgroup-set", "memory.memsw.limit_in_bytes?=268435456",
                             "--cgroup-set", "pids.max=77",
                             "--cgroup-set", "cpu.cfs_quota_us=50000",
                             "--open", "9:" + blob], ["sh", "-c", script])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["tasks"], 6)
        outs = [open(os.path.join(self.tmp, f)).read().split()
                for f in os.listdir(self.tmp) if f.startswith("out.")]
        self.assertEqual(len(outs), 6)
        slots = set()
        for mem, pids, cpu, limit, pmax, quota, nbytes in outs:
            base = os.path.basename(mem)
            self.assertRegex(base, "^%s-[01]$" % self.name)
            self.assertEqual([os.path.basename(pids), os.path.basename(cpu)], [base, base])
            self.assertEqual((limit, pmax, quota, nbytes), ("268435456", "77", "50000", "1234"))
            slots.add(base)
        self.assertEqual(len(slots), 2)  # two slots at concurrency 2, each reused
        self.assertEqual(self.left(), [])

    def test_a_setting_no_cgroup_has_fails_and_leaves_nothing(self):
        p = self.spawnbench(["--cgroup-set", "memory.no_such_knob=1"], ["true"])
        self.assertEqual(p.returncode, 64)
        self.assertIn("no cgroup under any --cgroup has 'memory.no_such_knob'", p.stderr)
        self.assertEqual(self.left(), [])

    def test_a_bad_value_fails_and_leaves_nothing(self):
        p = self.spawnbench(["--cgroup-set", "pids.max=lots"], ["true"])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("pids.max = lots", p.stderr)
        self.assertEqual(self.left(), [])

    def test_a_file_that_cannot_be_opened_fails_each_run(self):
        p = self.spawnbench(["--open", "9:%s/missing" % self.tmp], ["true"], tasks=3)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(json.loads(p.stdout)["failures"], 3)
        self.assertIn("exited with 126", p.stderr)
        self.assertEqual(self.left(), [])


if __name__ == "__main__":
    unittest.main()
