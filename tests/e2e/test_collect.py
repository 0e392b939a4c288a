# SPDX-License-Identifier: MIT
"""exec's collect (issue 30): after the command ends, with every process of the sandbox dead,
sbxd reads the regular files matching the patterns from /work back into the result, within
the pool's collect_max_bytes and collect_max_files. Every hostile case a task can build in
its own /work is tried one by one from inside a real sandbox: symlinks (to /etc, to
/proc/1/root, to each other, a symlinked directory), hard links, a FIFO, a unix socket, a
device (the sandbox cannot make one), a sparse file, a process that keeps appending and
renaming while the main process exits, a tree 10,000 directories deep and a wide directory;
each gives a bounded, correct answer: skipped with its reason, or truncated."""
import os
import time

from harness import DaemonTest, pool_yaml

PY = "python3"


def collect(c, script, patterns, pool="c", files=None, wait=60, **extra):
    """Runs the python script in pool with collect; returns the result."""
    args = {"argv": [PY, "-c", script], "pool": pool, "collect": patterns, "capture": True}
    if files is not None:
        args["files"] = files
    args.update(extra)
    return c.call("exec", args, timeout=wait)


def by_path(res):
    return {f["path"]: f for f in res["files"]}


def skipped(res):
    return {s["path"]: s["reason"] for s in res["skipped"]}


class Collect:
    def collect_run(self, script, patterns, **kw):
        with self.d.client() as c:
            res = collect(c, script, patterns, **kw)
        self.assertIn(res["status"], ("exited",), res)
        self.assertEqual(res["exit_code"], 0, res)
        return res

    def test_round_trip_with_patterns(self):
        script = r"""
import os
os.makedirs("/work/out/sub/deeper")
open("/work/out/a.txt", "wb").write(b"alpha\n")
open("/work/out/b.bin", "wb").write(bytes(range(256)))
open("/work/out/sub/c.txt", "wb").write(b"")
open("/work/out/sub/deeper/d.txt", "wb").write(b"delta")
open("/work/out/\u00e9t\u00e9.txt", "wb").write("\u00e9".encode())
open("/work/out/x1", "wb").write(b"1")
open("/work/out/x2", "wb").write(b"2")
open("/work/top", "wb").write(b"top")
os.chmod("/work/out/a.txt", 0o600)
os.chmod("/work/out/b.bin", 0o755)
"""
        res = self.collect_run(script, ["out/*.txt", "out/**/d.txt", "/work/out/x[1]", "out/b.bi?"])
        got = by_path(res)
        self.assertEqual(sorted(got), ["out/a.txt", "out/b.bin", "out/sub/deeper/d.txt",
                                       "out/x1", "out/\u00e9t\u00e9.txt"])
        self.assertEqual((got["out/a.txt"]["data"], got["out/a.txt"]["mode"]),
                         (b"alpha\n", 0o600))
        self.assertEqual((got["out/b.bin"]["data"], got["out/b.bin"]["mode"]),
                         (bytes(range(256)), 0o755))
        self.assertEqual(got["out/sub/deeper/d.txt"]["data"], b"delta")
        for f in got.values():
            self.assertEqual((f["size"], f["truncated"]), (len(f["data"]), False), f)
        self.assertFalse(res["collect_truncated"])
        self.assertEqual(res["skipped"], [])
        self.assertEqual(res["files_out_bytes"], sum(len(f["data"]) for f in got.values()))

    def test_files_in_come_back_out_byte_for_byte(self):
        data = os.urandom(100000)
        files = [{"path": "io/r.bin", "data": data, "mode": 0o600},
                 {"path": "io/\u65e5\u672c.txt", "data": "x"},
                 {"path": "io/empty", "data": b""}]
        res = self.collect_run("pass", ["io/**"], files=files)
        got = by_path(res)
        self.assertEqual(got["io/r.bin"]["data"], data)
        self.assertEqual(got["io/r.bin"]["mode"], 0o600)
        self.assertEqual(got["io/\u65e5\u672c.txt"]["data"], b"x")
        self.assertEqual((got["io/empty"]["data"], got["io/empty"]["size"]), (b"", 0))
        self.assertEqual(res["files_in_bytes"], len(data) + 1)

    def test_symlinks_are_skipped_never_followed(self):
        script = r"""
import os
os.symlink("/etc/passwd", "/work/passwd")
os.symlink("/etc", "/work/etc")
os.symlink("/proc/1/root", "/work/root1")
os.symlink("/work/loop2", "/work/loop1")
os.symlink("/work/loop1", "/work/loop2")
os.symlink("loop3", "/work/loop3")
os.makedirs("/work/real")
open("/work/real/ok", "w").write("ok")
"""
        res = self.collect_run(script, ["*", "etc/passwd", "root1/etc/shadow", "root1/**", "real/*"])
        got = by_path(res)
        self.assertEqual(sorted(got), ["real/ok"])
        sk = skipped(res)
        for p in ("passwd", "etc", "root1", "loop1", "loop2", "loop3"):
            self.assertEqual(sk.get(p), "symlink", (p, res["skipped"]))
        # Nothing of the host reached the result.
        for f in res["files"]:
            self.assertNotIn(b"root:", f["data"])

    def test_hard_links_are_the_files_they_are(self):
        script = r"""
import errno, os
open("/work/orig", "w").write("shared")
os.link("/work/orig", "/work/link")
# A hard link to a host file cannot be made: /work is a filesystem of its own.
try:
    os.link("/etc/passwd", "/work/passwd")
    print("linked")
except OSError as e:
    print(errno.errorcode[e.errno])
"""
        res = self.collect_run(script, ["*"])
        self.assertIn(res["stdout"], (b"EXDEV\n", b"EPERM\n"))
        got = by_path(res)
        self.assertEqual(sorted(got), ["link", "orig"])
        self.assertEqual(got["link"]["data"], b"shared")

    def test_fifo_is_skipped_without_blocking(self):
        res = self.collect_run("import os; os.mkfifo('/work/fifo'); open('/work/f', 'w').write('f')",
                       ["*"])
        self.assertEqual(sorted(by_path(res)), ["f"])
        self.assertEqual(skipped(res), {"fifo": "fifo"})

    def test_unix_socket_is_skipped(self):
        script = ("import socket; s = socket.socket(socket.AF_UNIX); s.bind('/work/sock');"
                  "s.listen(); open('/work/f', 'w').write('f')")
        res = self.collect_run(script, ["*"])
        self.assertEqual(sorted(by_path(res)), ["f"])
        self.assertEqual(skipped(res), {"sock": "socket"})

    def test_the_sandbox_cannot_make_a_device(self):
        # The device case cannot be built from inside: mknod is refused (no CAP_MKNOD in
        # the init namespace; /work is nodev besides). What is left is a regular file.
        script = r"""
import errno, os, stat
try:
    os.mknod("/work/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    print("made")
except OSError as e:
    print(errno.errorcode[e.errno])
"""
        res = self.collect_run(script, ["*"])
        self.assertIn(res["stdout"], (b"EPERM\n", b"EACCES\n"), res)
        self.assertEqual(res["files"], [])
        self.assertEqual(res["skipped"], [])

    def test_sparse_file_is_read_up_to_the_cap(self):
        script = ("f = open('/work/sparse', 'wb'); f.truncate(1 << 30); f.seek((1 << 30) - 1);"
                  "f.write(b'!'); f.close()")
        res = self.collect_run(script, ["sparse"], pool="capped")
        f = by_path(res)["sparse"]
        self.assertEqual(f["size"], 1 << 30)
        self.assertTrue(f["truncated"])
        self.assertEqual(f["data"], b"\0" * (1 << 20))  # collect_max_bytes: 1MiB
        self.assertTrue(res["collect_truncated"])
        self.assertEqual(res["files_out_bytes"], 1 << 20)

    def test_a_background_writer_is_dead_before_the_collect(self):
        # The main process exits while its child appends and renames as fast as it can; init
        # kills the child before it reports, so the collect sees a tree nothing changes.
        script = r"""
import os, time
if os.fork() == 0:
    os.setsid()
    # Daemonized: its output pipes close with the main process, so that sbxd does not wait
    # for it there. init kills it before it reports (and, a one-shot task's init, exits
    # right after, ending the pid namespace), so the collect reads a tree that is still.
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    n = 0
    while True:
        with open("/work/grow", "ab") as f:
            f.write(b"line %08d\n" % n)
        n += 1
        os.rename("/work/grow", "/work/grown")
        os.rename("/work/grown", "/work/grow")
time.sleep(0.3)
"""
        for _ in range(3):
            res = self.collect_run(script, ["grow*"])
            got = by_path(res)
            self.assertEqual(len(got), 1, res["files"])
            (f,) = got.values()
            self.assertIn(f["path"], ("grow", "grown"))
            self.assertFalse(f["truncated"])
            self.assertEqual(f["size"], len(f["data"]))
            lines = f["data"].split(b"\n")
            self.assertEqual(lines[-1], b"")
            for i, line in enumerate(lines[:-1]):
                self.assertEqual(line, b"line %08d" % i)

    def test_a_tree_10000_deep_is_bounded(self):
        script = r"""
import os
open("/work/shallow", "w").write("s")
os.chdir("/work")
for i in range(10000):
    os.mkdir("d")
    os.chdir("d")
open("bottom", "w").write("b")
"""
        res = self.collect_run(script, ["**"], wait=120)
        got = by_path(res)
        self.assertEqual(got["shallow"]["data"], b"s")
        self.assertNotIn("bottom", [p.rsplit("/", 1)[-1] for p in got])
        self.assertTrue(res["collect_truncated"])
        reasons = set(skipped(res).values())
        self.assertEqual(reasons, {"directory_too_deep"}, res["skipped"])
        deep = res["skipped"][0]["path"]
        self.assertTrue(deep.startswith("d/d/"), deep)

    def test_a_wide_directory_is_bounded(self):
        # As wide as the sandbox makes quickly (a million entries in its 1 GiB, about 15 s;
        # 200000 from the fork server, about 3 s), with patterns that match nearly none of
        # them: the walk still stops at its entry bound (workspace.c's 100000).
        script = r"""
import os
os.mkdir("/work/wide")
for i in range(%d):
    open("/work/wide/f%%07d" %% i, "w").close()
print(len(os.listdir("/work/wide")))
""" % self.wide
        res = self.collect_run(script, ["wide/*.nomatch", "wide/f000000?"], pool="wide", wait=300)
        self.assertEqual(res["stdout"], b"%d\n" % self.wide)
        self.assertTrue(res["collect_truncated"])
        self.assertIn("too_many_entries", set(skipped(res).values()), res["skipped"][:3])
        self.assertLessEqual(len(res["files"]), 10)

    def test_collect_max_files_truncates(self):
        script = "import os\nfor i in range(12): open('/work/f%02d' % i, 'w').write(str(i))"
        res = self.collect_run(script, ["f*"], pool="capped")
        self.assertEqual(sorted(by_path(res)), ["f%02d" % i for i in range(10)])
        self.assertTrue(res["collect_truncated"])
        self.assertEqual(skipped(res), {"f10": "file_limit", "f11": "file_limit"})

    def test_collect_max_bytes_truncates(self):
        script = ("open('/work/a', 'wb').write(b'a' * 700000);"
                  "open('/work/b', 'wb').write(b'b' * 700000);"
                  "open('/work/c', 'wb').write(b'c')")
        res = self.collect_run(script, ["*"], pool="capped")
        got = by_path(res)
        self.assertEqual(got["a"]["data"], b"a" * 700000)
        self.assertEqual(len(got["b"]["data"]), (1 << 20) - 700000)
        self.assertTrue(got["b"]["truncated"])
        self.assertEqual(got["b"]["size"], 700000)
        self.assertTrue(res["collect_truncated"])
        self.assertEqual(skipped(res).get("c"), "collect_limit", res["skipped"])
        self.assertEqual(res["files_out_bytes"], 1 << 20)

    def test_a_timed_out_task_is_still_collected(self):
        with self.d.client() as c:
            res = collect(c, "open('/work/partial', 'w').write('p'); import time; time.sleep(60)",
                          ["partial"], timeout=1)
        self.assertEqual(res["status"], "timeout", res)
        self.assertEqual(by_path(res)["partial"]["data"], b"p")

    def test_empty_collect_gives_an_empty_list(self):
        res = self.collect_run("open('/work/a', 'w').write('a')", [])
        self.assertEqual((res["files"], res["skipped"], res["collect_truncated"]),
                         ([], [], False))


POOLS = [
    pool_yaml("c", warm=1, max=3),
    pool_yaml("capped", warm=1, max=2, extra="collect_max_bytes: 1MiB\ncollect_max_files: 10\n"),
    pool_yaml("wide", warm=0, max=1, memory="1GiB", timeout="110s"),
]


class FromForkServer(Collect, DaemonTest):
    pools = POOLS
    wide = 200000


class FromScratch(Collect, DaemonTest):
    config_extra = "fork_server: false\n"
    pools = POOLS
    wide = 1000000
