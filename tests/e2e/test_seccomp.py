# SPDX-License-Identifier: MIT
"""seccomp against a live sbxd: under each profile (default, strict) and in each shipped pool,
a probe calling syscall(2) directly through ctypes sees every dangerous call fail with its
errno, a 32-bit int 0x80 call kills its caller with SIGSYS, /proc shows one filter in mode 2,
ordinary tools still work, and the result's seccomp_denials counts exactly the denied calls,
even 100000 of them, without sbxd slowing down."""
import glob
import json
import json.decoder
import os
import re
import signal
import subprocess
import threading
import time
import unittest

from harness import DaemonTest, pool_yaml, TOP
from test_forkserver import children_of

PY = "python3"

# x86_64 numbers: (name, nr, args, expected errno name, counted as a denial).
CLONE_NEWUSER = 0x10000000
DANGEROUS = [
    ("ptrace_traceme", 101, (0, 0, 0, 0), "EPERM", True),
    ("unshare_newuser", 272, (CLONE_NEWUSER,), "EPERM", True),
    ("clone_newuser", 56, (CLONE_NEWUSER | signal.SIGCHLD, 0, 0, 0, 0), "EPERM", True),
    ("clone3", 435, (0, 0), "ENOSYS", False),
    ("keyctl", 250, (0, -3, 0), "EPERM", True),  # KEYCTL_GET_KEYRING_ID of the session
    ("add_key", 248, (0, 0, 0, 0, -3), "EPERM", True),
    ("io_uring_setup", 425, (1, 0), "EPERM", True),
    ("bpf", 321, (0, 0, 0), "EPERM", True),
    ("perf_event_open", 298, (0, 0, -1, -1, 0), "EPERM", True),
    ("userfaultfd", 323, (0,), "EPERM", True),
    ("mount", 165, (0, 0, 0, 0, 0), "EPERM", True),
    ("setns", 308, (-1, 0), "EPERM", True),
    ("personality_no_aslr", 135, (0x0040000,), "EPERM", True),
    ("kexec_load", 246, (0, 0, 0, 0), "EPERM", True),
    ("init_module", 175, (0, 0, 0), "EPERM", True),
]
COUNTED = sum(1 for c in DANGEROUS if c[4])

# Calls each listed syscall once and prints {name: errno name or "returned N"} as JSON.
PROBE = r"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
for name, nr, args in json.loads(sys.argv[1]):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r == 0 and nr == 56:
        os._exit(0)  # a clone that got through: the copy must not report
    e = ctypes.get_errno()
    out[name] = errno.errorcode.get(e, str(e)) if r == -1 else "returned %d" % r
print(json.dumps(out))
"""

# Makes argv[1] calls of ptrace(PTRACE_TRACEME) from argv[2] threads; prints how many failed
# with EPERM.
SPAM = r"""
import ctypes, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
n, nthreads = int(sys.argv[1]), int(sys.argv[2])
eperm = [0] * nthreads
def spam(i, k):
    f, nr, z = libc.syscall, ctypes.c_long(101), ctypes.c_long(0)
    for _ in range(k):
        if f(nr, z, z, z, z) == -1 and ctypes.get_errno() == 1:
            eperm[i] += 1
ts = [threading.Thread(target=spam, args=(i, n // nthreads + (i < n % nthreads)))
      for i in range(nthreads)]
for t in ts: t.start()
for t in ts: t.join()
print(sum(eperm))
"""

# getpid through the 32-bit ABI (mov eax, 20; int 0x80; ret) in a forked child.
INT80 = r"""
import ctypes, mmap, os, sys
m = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
              prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")
fn = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
pid = os.fork()
if pid == 0:
    r = fn()
    print("RESULT", r, flush=True)
    os._exit(0)
_, st = os.waitpid(pid, 0)
print("STATUS signaled=%d sig=%d" % (os.WIFSIGNALED(st), os.WTERMSIG(st) if os.WIFSIGNALED(st) else 0))
"""

WORK = [
    ["sh", "-c", "printf 'b 2\\na 1\\nc 3\\n' > /tmp/f; sed 's/ /=/' /tmp/f | grep -v c | "
                 "awk -F= '{s += $2} END {print s}'; for i in 1 2; do echo $i; done | wc -l"],
    [PY, "-c", "import hashlib, json, subprocess, threading\n"
               "r = []\n"
               "t = threading.Thread(target=lambda: r.append(hashlib.sha256(b'x').hexdigest()[:8]))\n"
               "t.start(); t.join()\n"
               "p = subprocess.run(['sh', '-c', 'echo sub'], capture_output=True, text=True)\n"
               "print(json.dumps({'h': r[0], 'sub': p.stdout.strip()}))"],
]
WORK_OUT = [b"3\n2\n", b'{"h": "2d711642", "sub": "sub"}\n']


def shipped_pools():
    """The repository's pools/*.yaml, sized down to warm 1, max 2."""
    texts = []
    for path in sorted(glob.glob(os.path.join(TOP, "pools", "*.yaml"))):
        with open(path) as f:
            text = f.read()
        text = re.sub(r"^warm:\s*\d+", "warm: 1", text, flags=re.M)
        text = re.sub(r"^max:\s*\d+", "max: 2", text, flags=re.M)
        texts.append(text)
    return texts


class ProfileChecks:
    """Checks run in every pool of the class's daemon (self.pool_names)."""

    def run_in(self, pool, argv, timeout=None):
        with self.d.client() as c:
            res, out, err = c.exec(argv, pool=pool, timeout=timeout)
        self.assertEqual(res["status"], "exited", (pool, argv, res, err[-2000:]))
        return res, out, err

    def test_dangerous_calls_fail_with_their_errno(self):
        calls = [(n, nr, args) for n, nr, args, _, _ in DANGEROUS]
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                res, out, err = self.run_in(pool, [PY, "-c", PROBE, json.dumps(calls)])
                self.assertEqual(res["exit_code"], 0, err)
                got = json.loads(out)
                self.assertEqual(got, {n: e for n, _, _, e, _ in DANGEROUS})
                # clone3's ENOSYS is not counted; everything else is.
                self.assertEqual(res["seccomp_denials"], COUNTED, (pool, res))

    def test_int80_kills_the_caller(self):
        # Where the kernel has no IA-32 emulation (this VM's since session 14), int 0x80
        # faults (SIGSEGV) before any filter sees it: then that is what the sandbox shows.
        host = subprocess.run([PY, "-c", INT80], capture_output=True, timeout=30).stdout
        if b"RESULT" in host:
            want = signal.SIGSYS  # the kernel runs it: the filter must kill the caller
        else:
            self.assertEqual(host, b"STATUS signaled=1 sig=%d\n" % signal.SIGSEGV)
            want = signal.SIGSEGV
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                res, out, err = self.run_in(pool, [PY, "-c", INT80])
                self.assertNotIn(b"RESULT", out)
                self.assertEqual(out, b"STATUS signaled=1 sig=%d\n" % want, err)
                self.assertEqual(res["seccomp_denials"], 0)

    def test_proc_shows_one_filter(self):
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                res, out, _ = self.run_in(pool, ["grep", "^Seccomp", "/proc/self/status"])
                self.assertEqual(out, b"Seccomp:\t2\nSeccomp_filters:\t1\n")

    def test_the_shared_page_cache_is_neither_evicted_nor_probed(self):
        # A file of the image that the host has cached: a task may read it, but neither
        # drop its pages from the cache the host and every sandbox share (fadvise DONTNEED)
        # nor ask whether a page is cached without loading it (preadv2 RWF_NOWAIT). Either
        # would let it time other tenants' use of the image's files.
        path = json.decoder.__file__
        with open(path, "rb") as f:
            f.read()

        def cached():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.preadv(fd, [bytearray(4096)], 0, os.RWF_NOWAIT)
                return True
            except BlockingIOError:
                return False
            finally:
                os.close(fd)
        self.assertTrue(cached())
        probe = ("import errno, os, sys\nf = os.open(sys.argv[1], os.O_RDONLY)\n"
                 "def err(call):\n    try:\n        call()\n        return 'ok'\n"
                 "    except OSError as e:\n        return errno.errorcode[e.errno]\n"
                 "print(err(lambda: os.posix_fadvise(f, 0, 0, os.POSIX_FADV_DONTNEED)),"
                 " err(lambda: os.preadv(f, [bytearray(64)], 0, os.RWF_NOWAIT)),"
                 " err(lambda: os.posix_fadvise(f, 0, 0, os.POSIX_FADV_SEQUENTIAL)),"
                 " err(lambda: os.preadv(f, [bytearray(64)], 0, 0)))\n")
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                res, out, err = self.run_in(pool, [PY, "-c", probe, path])
                # default: EPERM; strict: its default ENOSYS (and glibc's preadv2 turns
                # ENOSYS with flags into EOPNOTSUPP, default's own answer, which Python
                # names ENOTSUP: the same 95).
                self.assertIn(out.decode().split(),
                              (["EPERM", "ENOTSUP", "ok", "ok"],
                               ["ENOSYS", "ENOTSUP", "ok", "ok"]), err)
                self.assertEqual(res["seccomp_denials"], 2, res)
                self.assertTrue(cached(), "a task dropped the host's cached pages")

    def test_socket_families_are_unix_and_ip_only(self):
        # Every other family is refused by the filter, not only those this kernel lacks:
        # each refusal is counted. default answers EAFNOSUPPORT and leaves AF_UNSPEC (0) to
        # the kernel; strict answers with its ENOSYS, 0 included. socketpair too.
        probe = ("import errno, json, socket\nres = {}\n"
                 "for fam in range(64):\n"
                 "    try:\n"
                 "        socket.socket(fam, socket.SOCK_STREAM if fam in (1, 2, 10) else"
                 " socket.SOCK_DGRAM).close()\n"
                 "        res[fam] = 'open'\n"
                 "    except OSError as e:\n"
                 "        res[fam] = errno.errorcode[e.errno]\n"
                 "try:\n    socket.socketpair(30)\n    pair = 'open'\n"
                 "except OSError as e:\n    pair = errno.errorcode[e.errno]\n"
                 "a, b = socket.socketpair(); a.close(); b.close()\n"
                 "print(json.dumps([sorted(f for f in res if res[f] == 'open'),"
                 " sorted(set(v for f, v in res.items() if f and v != 'open')), pair]))\n")
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                res, out, err = self.run_in(pool, [PY, "-c", probe])
                self.assertEqual(res["exit_code"], 0, err)
                opened, errs, pair = json.loads(out)
                self.assertEqual(opened, [1, 2, 10], out)
                self.assertIn(errs, (["EAFNOSUPPORT"], ["ENOSYS"]), out)
                self.assertEqual(pair, errs[0], out)
                # 3-9 and 11-63, socketpair(30), and for strict AF_UNSPEC
                want = 61 if errs == ["EAFNOSUPPORT"] else 62
                self.assertEqual(res["seccomp_denials"], want, res)

    def test_huge_pages_are_refused(self):
        # No memory cgroup counts hugetlb pages: a task mapping them took a host's whole
        # reserved pool (8 of 8 pages in a manual run with vm.nr_hugepages=8) while its
        # mem_peak_bytes stayed at 4 MB. Each way to make them is refused and counted,
        # as it would be on a host with pages free (and this one's, if any, stay free).
        # With none reserved the kernel also refuses mmap and shmget (the task is not in
        # vm.hugetlb_shm_group), but memfd_create(MFD_HUGETLB) would give an fd.
        probe = ("import ctypes, errno, json\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "libc.mmap.restype = ctypes.c_void_p\n"
                 "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,"
                 " ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
                 "def err(r):\n    return errno.errorcode[ctypes.get_errno()] if r in"
                 " (-1, None, ctypes.c_void_p(-1).value) else 'ok'\n"
                 "print(json.dumps([err(libc.mmap(None, 2 << 20, 3, 0x22 | 0x40000, -1, 0)),"
                 " err(libc.memfd_create(b'x', 4)), err(libc.shmget(0, 2 << 20, 0o1000 | 0x800"
                 " | 0o600)), err(libc.mmap(None, 4096, 3, 0x22, -1, 0)),"
                 " err(libc.memfd_create(b'x', 0))]))\n")

        def free():
            with open("/proc/meminfo") as f:
                return [line for line in f if line.startswith("HugePages_Free")]
        before = free()
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                res, out, err = self.run_in(pool, [PY, "-c", probe])
                self.assertEqual(res["exit_code"], 0, err)
                # shmget: default EPERM; strict does not allow it at all (ENOSYS)
                self.assertIn(json.loads(out), (["ENOMEM", "EINVAL", "EPERM", "ok", "ok"],
                                                ["ENOMEM", "EINVAL", "ENOSYS", "ok", "ok"]))
                self.assertEqual(res["seccomp_denials"], 3, res)
        self.assertEqual(free(), before)

    def test_ordinary_work_runs_without_denials(self):
        for pool in self.pool_names:
            for argv, want in zip(WORK, WORK_OUT):
                with self.subTest(pool=pool, cmd=argv[0]):
                    res, out, err = self.run_in(pool, argv)
                    self.assertEqual((res["exit_code"], out), (0, want), err)
                    self.assertEqual(res["seccomp_denials"], 0, res)


class Profiles(ProfileChecks, DaemonTest):
    pools = [pool_yaml("dflt", warm=1, max=2, pids=64, seccomp="default"),
             pool_yaml("strct", warm=1, max=2, pids=64, seccomp="strict")]
    pool_names = ["dflt", "strct"]

    def test_filter_is_on_before_the_task_comes(self):
        # Both shipped profiles allow what the waiting task child does after its filter
        # (bpf_early_ok), so it installs the filter as soon as it is forked: every
        # warm sandbox's task child already runs under it, off the task's path.
        def status(pid):
            with open("/proc/%d/status" % pid) as f:
                return dict(l.split(":\t", 1) for l in f.read().splitlines() if ":\t" in l)

        def waiting_children():
            out = []
            for init in children_of(self.d.proc.pid):
                out += children_of(init)  # a zygote has none; an init, its task child
            return out

        deadline = time.monotonic() + 20
        kids = waiting_children()
        while len(kids) < len(self.pool_names) and time.monotonic() < deadline:
            time.sleep(0.1)
            kids = waiting_children()
        self.assertGreaterEqual(len(kids), len(self.pool_names), kids)
        for pid in kids:
            try:
                st = status(pid)
            except OSError:
                continue  # taken by a task meanwhile
            self.assertEqual((st["Seccomp"], st["Seccomp_filters"], st["NoNewPrivs"]),
                             ("2", "1", "1"), pid)

    def test_count_is_exact(self):
        for pool in self.pool_names:
            for n in (0, 1, 5):
                with self.subTest(pool=pool, n=n):
                    res, out, err = self.run_in(pool, [PY, "-c", SPAM, str(n), "1"])
                    self.assertEqual(out, b"%d\n" % n, err)
                    self.assertEqual(res["seccomp_denials"], n)
            with self.subTest(pool=pool, mixed=True):
                # Five counted kinds and clone3, whose ENOSYS is not counted.
                calls = [(name, nr, args) for name, nr, args, _, _ in DANGEROUS
                         if name in ("ptrace_traceme", "unshare_newuser", "keyctl", "bpf", "mount",
                                  "clone3")]
                res, out, err = self.run_in(pool, [PY, "-c", PROBE, json.dumps(calls)])
                self.assertEqual(len(json.loads(out)), 6, err)
                self.assertEqual(res["seccomp_denials"], 5)

    def test_denials_of_children_are_counted(self):
        # Three processes, two denials each: the task tree shares one listener.
        script = ("for i in 1 2 3; do python3 -c \"$0\" 2 1 & done; wait")
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                res, out, err = self.run_in(pool, ["sh", "-c", script, SPAM])
                self.assertEqual(out, b"2\n2\n2\n", err)
                self.assertEqual(res["seccomp_denials"], 6)

    def test_spam_is_counted_exactly_and_sbxd_stays_responsive(self):
        n = 100000
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                started = threading.Event()
                pings = []
                with self.d.client() as c, self.d.client() as pc:
                    msgid, out, err = c.exec_start([PY, "-c", SPAM, str(n), "4"], pool=pool,
                                                   timeout=100,
                                                   on_started=lambda _: started.set())
                    done = threading.Event()
                    box = {}

                    def wait_result():
                        try:
                            box["res"] = c.wait(msgid, 110)
                        finally:
                            done.set()

                    th = threading.Thread(target=wait_result)
                    th.start()
                    while not done.is_set():
                        t0 = time.monotonic()
                        pc.call("ping", timeout=5)
                        pings.append((time.monotonic() - t0, started.is_set() and not done.is_set()))
                        time.sleep(0.05)
                    th.join()
                res = box["res"]
                self.assertEqual(res["status"], "exited", (res, b"".join(err)[-2000:]))
                self.assertEqual(b"".join(out), b"%d\n" % n, b"".join(err)[-2000:])
                self.assertEqual(res["seccomp_denials"], n)
                during = [dt for dt, running in pings if running]
                self.assertGreater(len(during), 3, pings)
                self.assertLess(max(during), 1.0, sorted(during)[-5:])

    def test_exit_is_reported_while_children_spam(self):
        # sbxd-init answers denials in bounded batches, so the task's exit still reaches it
        # while 8 background processes keep the listener busy.
        script = ("for i in 1 2 3 4 5 6 7 8; do python3 -c \"$0\" 100000000 1 & done; "
                  "sleep 1; echo done")
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                t0 = time.monotonic()
                res, out, err = self.run_in(pool, ["sh", "-c", script, SPAM], timeout=30)
                self.assertEqual(out, b"done\n", err)
                self.assertLess(time.monotonic() - t0, 6)
                # A snapshot at the task's exit: the children were still going.
                self.assertGreater(res["seccomp_denials"], 1000)

    def test_spamming_task_still_times_out(self):
        spin = ("import ctypes\nl = ctypes.CDLL(None)\nprint('go', flush=True)\n"
                "while True: l.syscall(101, 0, 0, 0, 0)\n")
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                t0 = time.monotonic()
                with self.d.client() as c:
                    res, out, _ = c.exec([PY, "-c", spin], pool=pool, timeout=1)
                self.assertEqual(res["status"], "timeout", res)
                self.assertEqual(out, b"go\n")
                self.assertLess(time.monotonic() - t0, 10)


# Installs a filter that allows everything, with its user-notification listener held open
# (as a container runtime's notifier would), then execs argv in its place: every process
# below, each sandbox's task process included, gets EBUSY when it asks for a listener.
OUTER_NOTIFIER = r"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
insn = ctypes.create_string_buffer(struct.pack("=HBBI", 0x06, 0, 0, 0x7fff0000))  # ret ALLOW
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = Prog(1, ctypes.addressof(insn))
fd = libc.syscall(317, 1, 8, ctypes.byref(prog))  # seccomp(SET_MODE_FILTER, NEW_LISTENER)
if fd < 0:
    sys.exit("outer notifier: seccomp: errno %d" % ctypes.get_errno())
os.set_inheritable(fd, True)  # sbxd keeps it open: the listener lives as long as sbxd
os.execv(sys.argv[1], sys.argv[1:])
"""


class UnderAnOuterNotifier(DaemonTest):
    """Where the kernel gives the task's process no listener (one is held further up), the
    program goes on in its plain form, stripped in the task process's own copy: the same
    errno for every denied call, nothing counted, and init's copy untouched."""
    pools = [pool_yaml("dflt", warm=1, max=2, pids=64, seccomp="default")]
    wrap = [PY, "-c", OUTER_NOTIFIER]

    def exec_ok(self, argv):
        with self.d.client() as c:
            res, out, err = c.exec(argv, pool="dflt")
        self.assertEqual((res["status"], res["exit_code"]), ("exited", 0), (res, err[-2000:]))
        return res, out

    def test_denied_calls_keep_their_errno_and_are_not_counted(self):
        calls = [(n, nr, args) for n, nr, args, _, _ in DANGEROUS]
        for _ in range(2):  # the second from a sandbox made after the first one's strip
            res, out = self.exec_ok([PY, "-c", PROBE, json.dumps(calls)])
            self.assertEqual(json.loads(out), {n: e for n, _, _, e, _ in DANGEROUS})
            self.assertIsNone(res["seccomp_denials"], res)

    def test_both_filters_are_on_and_work_runs(self):
        res, out = self.exec_ok(["grep", "^Seccomp", "/proc/self/status"])
        self.assertEqual(out, b"Seccomp:\t2\nSeccomp_filters:\t2\n")
        for argv, want in zip(WORK, WORK_OUT):
            res, out = self.exec_ok(argv)
            self.assertEqual(out, want)


class ShippedPools(ProfileChecks, DaemonTest):
    pools = shipped_pools()
    pool_names = [re.search(r"^name: (\S+)", t, re.M).group(1) for t in pools]

    def test_shipped_pools_cover_both_profiles(self):
        profiles = {re.search(r"^seccomp:\s*(\S+)", t, re.M).group(1) for t in self.pools}
        self.assertEqual(profiles, {"default", "strict"})


if __name__ == "__main__":
    unittest.main()
