# SPDX-License-Identifier: MIT
"""exec's files (issue 30): written into /work before the command starts, as the task's user,
byte for byte (binary, empty, modes, unicode names, nested directories), inline or streamed
in exec.file chunks (64 MiB under the default 1 MiB message bound), and every refusal (a
path leaving /work, a pool limit, a chunk too many, an upload that stalls) an error with
nothing run, in the audit trail."""
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import urllib.request

from harness import DaemonTest, pool_yaml

PY = "python3"
CHUNK = 512 * 1024  # below the default 1 MiB message bound with room for the envelope

# Prints every file under /work: path, mode, owner uid, size, sha256; and the task's uid.
LIST = r"""
import hashlib, json, os
out = {"uid": os.getuid(), "files": {}, "dirs": {}}
for root, dirs, files in os.walk("/work"):
    for d in dirs:
        p = os.path.join(root, d)
        st = os.lstat(p)
        out["dirs"][os.path.relpath(p, "/work")] = [st.st_mode & 0o7777, st.st_uid]
    for f in files:
        p = os.path.join(root, f)
        st = os.lstat(p)
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for b in iter(lambda: fh.read(1 << 20), b""):
                h.update(b)
        out["files"][os.path.relpath(p, "/work")] = [st.st_mode & 0o7777, st.st_uid, st.st_size,
                                                     h.hexdigest()]
print(json.dumps(out))
"""


def exec_files(c, argv, files, chunks=(), pool="f", collect=None, extra=None, timeout=60):
    """exec with files (and optional collect), then the exec.file chunks: the result and
    every notification of the request, in order."""
    args = {"argv": list(argv), "pool": pool, "files": files}
    if collect is not None:
        args["collect"] = collect
    args.update(extra or {})
    notes = []
    msgid = c.start("exec", args, lambda m, rest: notes.append((m, rest)))
    for ch in chunks:
        c.notify("exec.file", [msgid, ch])
    return c.wait(msgid, timeout), notes


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def split(data, n=CHUNK):
    return [data[i:i + n] for i in range(0, len(data), n)]


def sha(b):
    return hashlib.sha256(b).hexdigest()


class Files:
    def listing(self, files, chunks=(), **kw):
        kw.setdefault("extra", {})["capture"] = True
        with self.d.client() as c:
            res, notes = exec_files(c, [PY, "-c", LIST], files, chunks, **kw)
        self.assertEqual((res["status"], res["exit_code"]), ("exited", 0), res)
        return res, json.loads(res["stdout"])

    def test_inline_round_trip_byte_for_byte(self):
        binary = bytes(range(256)) * 64
        files = [
            {"path": "bin.dat", "data": binary},
            {"path": "/work/empty", "data": b""},
            {"path": "secret", "data": b"s3cr3t\n", "mode": 0o600},
            {"path": "./tool.sh", "data": "#!/bin/sh\necho hi\n", "mode": 0o755},
            {"path": "d\u00e9j\u00e0/\u65e5\u672c/\U0001f600.txt", "data": "unicode\n"},
            {"path": "a/b/c/d/e/deep", "data": b"x" * 10},
            {"path": "/work//a/./b/sibling", "data": b"y"},
        ]
        res, got = self.listing(files, extra={"capture": True})
        uid = got["uid"]
        want = {
            "bin.dat": [0o644, uid, len(binary), sha(binary)],
            "empty": [0o644, uid, 0, sha(b"")],
            "secret": [0o600, uid, 7, sha(b"s3cr3t\n")],
            "tool.sh": [0o755, uid, 18, sha(b"#!/bin/sh\necho hi\n")],
            "d\u00e9j\u00e0/\u65e5\u672c/\U0001f600.txt": [0o644, uid, 8, sha(b"unicode\n")],
            "a/b/c/d/e/deep": [0o644, uid, 10, sha(b"x" * 10)],
            "a/b/sibling": [0o644, uid, 1, sha(b"y")],
        }
        self.assertEqual(got["files"], want)
        # Parents are the task's, 0755.
        for d in ("a", "a/b", "a/b/c/d/e", "d\u00e9j\u00e0", "d\u00e9j\u00e0/\u65e5\u672c"):
            self.assertEqual(got["dirs"][d], [0o755, uid], d)
        self.assertEqual(res["files_in_bytes"], sum(w[2] for w in want.values()))
        self.assertEqual(res["files_out_bytes"], 0)
        self.assertNotIn("files", res)  # no collect: no files key

    def test_the_task_owns_and_can_replace_its_files(self):
        script = ("import os; os.chmod('/work/ro', 0o644); open('/work/ro','w').write('mine');"
                  "print(open('/work/ro').read(), os.stat('/work/ro').st_uid == os.getuid())")
        with self.d.client() as c:
            res, _ = exec_files(c, [PY, "-c", script], [{"path": "ro", "data": b"x",
                                                          "mode": 0o400}],
                                extra={"capture": True})
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(res["stdout"], b"mine True\n")

    def test_streamed_64_mib_under_the_default_message_bound(self):
        big = os.urandom(40 << 20)
        small = os.urandom(24 << 20)
        files = [{"path": "in/big", "size": len(big)},
                 {"path": "in/inline", "data": b"inline"},
                 {"path": "in/nothing", "size": 0},
                 {"path": "in/small", "size": len(small), "mode": 0o600}]
        # One byte stream over the size entries: chunks span them.
        stream = big + small
        res, got = self.listing(files, split(stream, 1000003), pool="big",
                                extra={"capture": True})
        uid = got["uid"]
        self.assertEqual(got["files"], {
            "in/big": [0o644, uid, len(big), sha(big)],
            "in/inline": [0o644, uid, 6, sha(b"inline")],
            "in/nothing": [0o644, uid, 0, sha(b"")],
            "in/small": [0o600, uid, len(small), sha(small)],
        })
        self.assertEqual(res["files_in_bytes"], len(stream) + 6)

    def test_chunks_for_a_queued_task_are_held_under_backpressure(self):
        # Pool "one" has a single sandbox, held by a task that waits for its stdin: a
        # second task's 64 MiB of chunks come while it is queued. sbxd stops reading the
        # connection past its stdin bound (1 MiB), so its memory does not take them.
        def rss():
            with open("/proc/%d/status" % self.d.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        data = os.urandom(64 << 20)
        with self.d.client() as hold, self.d.client() as c:
            started = threading.Event()
            hmsg = hold.start("exec", {"argv": ["cat"], "pool": "one", "stdin": True},
                              lambda m, rest: m == "exec.started" and started.set())
            # Its stdin stays open: it holds the sandbox until the test closes it.
            while not started.is_set():
                with hold.io_lock:
                    hold._pump()
                time.sleep(0.01)
            before = rss()
            msgid = c.start("exec", {"argv": ["sha256sum", "/work/big"], "pool": "one",
                                     "capture": True, "files": [{"path": "big",
                                                                 "size": len(data)}]})
            sender = threading.Thread(target=lambda: [c.notify("exec.file", [msgid, ch])
                                                      for ch in split(data)], daemon=True)
            sender.start()
            sender.join(3)  # it blocks: sbxd reads no more than its bound
            self.assertTrue(sender.is_alive())
            grown = rss() - before
            self.assertLess(grown, 16 << 20, "sbxd grew by %d bytes" % grown)
            hold.notify("exec.stdin", [hmsg, b""])
            self.assertEqual(hold.wait(hmsg, 30)["status"], "exited")
            res = c.wait(msgid, 120)
            sender.join(30)
        self.assertEqual((res["status"], res["exit_code"]), ("exited", 0), res)
        self.assertEqual(res["stdout"].split()[0].decode(), sha(data))
        self.assertEqual(res["files_in_bytes"], len(data))

    def test_only_empty_streamed_entries_need_no_chunk(self):
        res, got = self.listing([{"path": "e1", "size": 0}, {"path": "e/2", "size": 0}],
                                extra={"capture": True})
        self.assertEqual(sorted(got["files"]), ["e/2", "e1"])

    def refused(self, files, code, words, collect=None, pool="f"):
        """files refused with code before anything ran; the refusal is in the trail."""
        marker = "never-run-%d" % time.monotonic_ns()
        with self.d.client() as c:
            args = {"argv": ["echo", marker], "pool": pool, "files": files}
            if collect is not None:
                args["collect"] = collect
            with self.assertRaises(Exception) as cm:
                c.call("exec", args, timeout=30)
        err = cm.exception
        self.assertEqual(getattr(err, "code", None), code, err)
        for w in words:
            self.assertIn(w, err.message)
        # The chain is a refusal's: request, denied decision, result; nothing started.
        rows = self.trail_rows_with(marker)
        self.assertEqual(len(rows), 1, rows)
        task = rows[0]
        types = [t for t, _ in self.query(
            "SELECT type, fields FROM events WHERE task = ? ORDER BY id", (task,))]
        self.assertEqual(types, ["task.request", "policy.decision", "task.result"])
        return err

    def query(self, sql, args=()):
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.d.state, "audit.db"),
                             uri=True, timeout=10)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()

    def trail_rows_with(self, marker):
        deadline = time.time() + 10
        while time.time() < deadline:
            rows = [t for t, f in self.query(
                "SELECT task, fields FROM events WHERE type = 'task.request'") if marker in f]
            if rows:
                return rows
            time.sleep(0.05)
        return []

    def test_paths_leaving_work_are_refused(self):
        for path, why in (("../etc/passwd", ".."), ("/etc/passwd", "/work"),
                          ("a/../../x", ".."), ("/work", "/work"), ("", "empty"),
                          (".", "/work"), ("/work/..", ".."), ("/workx/a", "/work"),
                          ("a\0b", "NUL")):
            with self.subTest(path=path):
                err = self.refused([{"path": path, "data": b"x"}], "bad_request",
                                   ["files[0]"])
                self.assertIn("path", err.message)
        # A name over 255 bytes is a length (pool m: the default files_path_max, 1024).
        err = self.refused([{"path": "x" * 256, "data": b"x"}], "too_large", ["files[0]", "255"],
                           pool="m")

    def test_bad_shapes_are_refused(self):
        for f, words in (({"path": "a"}, ["exactly one"]),
                         ({"path": "a", "data": b"x", "size": 1}, ["exactly one"]),
                         ({"path": "a", "data": b"x", "mode": 0o4755}, ["setuid"]),
                         ({"path": "a", "data": b"x", "mode": 0o1777}, ["sticky"]),
                         ({"path": "a", "data": b"x", "mode": -1}, ["mode"]),
                         ({"path": "a", "data": 5}, ["data"]),
                         ({"path": "a", "size": -1}, ["size"]),
                         ({"path": 3, "data": b"x"}, ["path"]),
                         ({"path": "a", "data": b"x", "owner": 0}, ["unknown key"]),
                         ("a", ["map"])):
            with self.subTest(f=f):
                self.refused([f], "bad_request", words)
        self.refused([{"path": "a/b", "data": b""}, {"path": "a/b", "data": b""}],
                     "bad_request", ["twice"])
        self.refused([{"path": "a/b", "data": b""}, {"path": "a", "data": b""}],
                     "bad_request", ["directory of"])
        self.refused([{"path": "x", "data": b""}], "bad_request", ["collect[0]"],
                     collect=["../x"])

    def test_pool_limits_are_refused(self):
        # files_max_count: 8
        self.refused([{"path": "f%d" % i, "data": b""} for i in range(9)], "too_large",
                     ["files_max_count", "9"])
        # files_max_bytes: 1MiB, counting declared sizes.
        self.refused([{"path": "a", "data": b"x" * 1000}, {"path": "b", "size": 1 << 20}],
                     "too_large", ["files_max_bytes", "files[1]"])
        # files_path_max: 64
        self.refused([{"path": "d/" * 40 + "f", "data": b""}], "too_large", ["files[0]"])
        # The path of exactly the bound is taken.
        res, got = self.listing([{"path": "p" * 64, "data": b"ok"}])
        self.assertIn("p" * 64, got["files"])

    def test_a_chunk_past_the_declared_total_ends_the_task(self):
        marker = "past-%d" % time.monotonic_ns()
        with self.d.client() as c:
            res, notes = exec_files(c, ["echo", marker], [{"path": "a", "size": 4}],
                                    [b"abc", b"de"], extra={"capture": True})
            notes = c.notifications
        self.assertEqual(res["error_stage"], "files", res)
        self.assertIn("more bytes than", res["error"])
        self.assertIsNone(res["exit_code"])
        self.assertEqual(res["stdout"], b"")  # nothing ran
        errs = [n for n in notes if n[0] == "error"]
        self.assertEqual(len(errs), 1, notes)
        self.assertEqual(errs[0][1][0]["code"], "bad_request")
        self.assertEqual(errs[0][1][0]["method"], "exec.file")
        self.assertNoStart(marker)

    def assertNoStart(self, marker):
        rows = self.trail_rows_with(marker)
        self.assertEqual(len(rows), 1, rows)
        deadline = time.time() + 10
        while time.time() < deadline:
            types = [t for (t,) in self.query("SELECT type FROM events WHERE task = ?"
                                              " ORDER BY id", (rows[0],))]
            if "task.result" in types:
                break
            time.sleep(0.05)
        self.assertNotIn("task.started", types)
        self.assertEqual(types[-1], "task.result")
        return rows[0]

    def test_a_chunk_for_a_request_without_streamed_files_ends_the_task(self):
        marker = "nofiles-%d" % time.monotonic_ns()
        with self.d.client() as c:
            # sleep: the chunk arrives while the command could still be running.
            res, notes = exec_files(c, ["sh", "-c", "sleep 5; echo " + marker],
                                    [{"path": "a", "data": b"x"}], [b"stray"])
            notes = c.notifications
        self.assertEqual(res["status"], "error", res)
        self.assertEqual(res["error_stage"], "files", res)
        self.assertTrue([n for n in notes if n[0] == "error"], notes)

    def test_an_upload_that_stalls_ends_at_files_timeout(self):
        marker = "stall-%d" % time.monotonic_ns()
        with self.d.client() as c:
            res, notes = exec_files(c, ["echo", marker], [{"path": "a", "size": 10}], [b"12345"],
                                    pool="slow", extra={"capture": True})
        self.assertEqual(res["status"], "error", res)
        self.assertEqual(res["error_stage"], "files", res)
        self.assertIn("did not arrive within files_timeout", res["error"])
        self.assertEqual(res["stdout"], b"")
        self.assertNoStart(marker)

    def test_a_full_work_fails_the_task_before_it_runs(self):
        marker = "full-%d" % time.monotonic_ns()
        with self.d.client() as c:
            res, _ = exec_files(c, ["echo", marker], [{"path": "big", "size": 5 << 20}],
                                split(b"\0" * (5 << 20)), pool="tiny",
                                extra={"capture": True})
        self.assertEqual((res["status"], res["error_stage"]), ("error", "files"), res)
        self.assertIn("/work is full", res["error"])
        self.assertEqual(res["stdout"], b"")
        self.assertNoStart(marker)

    def test_request_is_audited_with_paths_modes_and_sizes_never_data(self):
        marker = "audit-%d" % time.monotonic_ns()
        with self.d.client() as c:
            res, _ = exec_files(c, ["echo", marker],
                                [{"path": "/work/x/conf", "data": b"TOPSECRETDATA", "mode": 0o600},
                                 {"path": "s", "size": 3}], [b"abc"], collect=["x/*"])
        self.assertEqual(res["status"], "exited", res)
        task = self.trail_rows_with(marker)[0]
        fields = dict((t, json.loads(f)) for t, f in self.query(
            "SELECT type, fields FROM events WHERE task = ? ORDER BY id", (task,)))
        req = fields["task.request"]
        self.assertEqual(req["files"], ["x/conf", "s"])
        self.assertEqual(req["file_modes"], ["0600", "0644"])
        self.assertEqual(req["file_sizes"], ["13", "3"])
        self.assertEqual((req["files_count"], req["files_bytes"], req["files_streamed"]),
                         (2, 16, 3))
        self.assertEqual(req["collect"], ["x/*"])
        result = fields["task.result"]
        self.assertEqual(result["collected"], ["x/conf"])
        self.assertEqual((result["files_in_bytes"], result["files_out_bytes"]), (16, 13))
        rows = self.query("SELECT fields FROM events WHERE task = ?", (task,))
        self.assertFalse([r for r in rows if "TOPSECRETDATA" in r[0]])

    def test_metrics_count_files_in_and_out(self):
        def value(name):
            text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port).read()
            for line in text.decode().splitlines():
                if line.startswith(name + '{pool="m"}'):
                    return float(line.split()[-1])
            raise AssertionError("no series %s{pool=\"m\"}" % name)
        before_in, before_out = value("sbx_files_in_bytes_total"), value(
            "sbx_files_out_bytes_total")
        with self.d.client() as c:
            res, _ = exec_files(c, ["true"], [{"path": "a", "data": b"12345"}], pool="m",
                                collect=["a"])
        self.assertEqual(res["status"], "exited", res)
        self.assertEqual(value("sbx_files_in_bytes_total") - before_in, 5)
        self.assertEqual(value("sbx_files_out_bytes_total") - before_out, 5)


POOLS = [
    pool_yaml("f", warm=1, max=4, extra="work_size: 16MiB\nfiles_max_count: 8\n"
              "files_max_bytes: 1MiB\nfiles_path_max: 64\n"),
    pool_yaml("big", warm=1, max=2, memory="512MiB", extra="work_size: 128MiB\n"),
    pool_yaml("slow", warm=1, max=2, extra="files_timeout: 1s\n"),
    pool_yaml("tiny", warm=1, max=2, extra="work_size: 4MiB\n"),
    pool_yaml("m", warm=1, max=2),
    pool_yaml("one", warm=1, max=1, memory="512MiB", extra="work_size: 128MiB\n"),
]


class FromForkServer(Files, DaemonTest):
    port = free_port()
    config_extra = "metrics: 127.0.0.1:%d\n" % port
    pools = POOLS


class FromScratch(Files, DaemonTest):
    port = free_port()
    config_extra = "fork_server: false\nmetrics: 127.0.0.1:%d\n" % port
    pools = POOLS
