# SPDX-License-Identifier: MIT
"""sbx exec's files: --file (inline when small, streamed as exec.file chunks when large, a
64 MiB input within sbxd's 1 MiB message bound), --collect and --out (the result's files
written under DIR, and never outside it whatever paths the result holds), --capture and
--json's files. Two halves: against tests/helpers/fake_sbxd.py, which can send a result
with hostile paths that a real sbxd never would and reports exactly what sbx sent; and
against a live sbxd, byte-for-byte round trips through a real sandbox's /work."""
import base64
import hashlib
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

from harness import SBX, DaemonTest, pool_yaml
from test_cli_fake import start_fake, stop_fake

SBX_FAIL = 125
UNICODE = "donn\u00e9es/r\u00e9sum\u00e9 \u2713.txt"


def sha(data):
    return hashlib.sha256(data).hexdigest()


def write(path, data, mode=0o644):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
    return path


def tree(top):
    """{relative path: (mode, bytes)} of the regular files under top; symlinks as such."""
    out = {}
    for root, dirs, files in os.walk(top):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            p = os.path.join(root, name)
            rel = os.path.relpath(p, top)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("symlink", os.readlink(p))
            else:
                with open(p, "rb") as f:
                    out[rel] = (stat.S_IMODE(st.st_mode), f.read())
    return out


class Tmp:
    def tmpdir(self):
        d = tempfile.mkdtemp(prefix="sbx-files-")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        return d


class CliFilesFake(unittest.TestCase, Tmp):
    """What sbx sends for --file, and what it does with a result's files."""

    @classmethod
    def setUpClass(cls):
        if not os.access(SBX, os.X_OK):
            raise unittest.SkipTest("%s is not built" % SBX)
        cls.dir = tempfile.mkdtemp(prefix="sbx-files-fake-")
        cls.sock = os.path.join(cls.dir, "sbxd.sock")
        cls.fake = start_fake(cls.sock)

    @classmethod
    def tearDownClass(cls):
        stop_fake(cls.fake)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def sbx(self, *args, cwd=None, timeout=120, preexec_fn=None):
        env = dict(os.environ)
        env.pop("SBX_TOKEN", None)
        return subprocess.run([SBX, "--socket", self.sock] + list(args), capture_output=True,
                              cwd=cwd, env=env, timeout=timeout, input=b"",
                              preexec_fn=preexec_fn)

    def sent(self, *file_args):
        """The request's files as the fake received them."""
        r = self.sbx("exec", *file_args, "--", "files")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    # ---- --file ----

    def test_small_files_inline_large_ones_streamed(self):
        d = self.tmpdir()
        binary = bytes(range(256)) * 4
        big = os.urandom(1 << 20)
        a = write(os.path.join(d, "a.bin"), binary, 0o600)
        b = write(os.path.join(d, "big.bin"), big, 0o755)
        e = write(os.path.join(d, "empty"), b"", 0o644)
        u = write(os.path.join(d, "caf\u00e9 \u2713"), "\u00fc".encode(), 0o640)
        colon = write(os.path.join(d, "x:y"), b"colon", 0o644)
        got = self.sent("--file", a, "--file", b + ":data/big", "--file", e, "--file", u,
                        "--file", colon + ":", "--file", colon + ":/work/z")
        want = [("a.bin", 0o600, binary, False), ("data/big", 0o755, big, True),
                ("empty", 0o644, b"", False), ("caf\u00e9 \u2713", 0o640, "\u00fc".encode(), False),
                ("x:y", 0o644, b"colon", False), ("/work/z", 0o644, b"colon", False)]
        self.assertEqual([(f["path"], f["mode"], f["size"], f["sha256"], f["streamed"])
                          for f in got["files"]],
                         [(p, m, len(data), sha(data), s) for p, m, data, s in want])
        self.assertEqual(got["chunks"], 16)  # 1 MiB in 64 KiB chunks
        self.assertEqual(got["max_chunk"], 64 << 10)

    def test_a_64_mib_input_streams_within_the_message_bound(self):
        d = self.tmpdir()
        data = os.urandom(64 << 20)
        p = write(os.path.join(d, "big"), data)
        got = self.sent("--file", p)
        self.assertEqual(got["files"], [{"path": "big", "mode": 0o644, "size": 64 << 20,
                                         "sha256": sha(data), "streamed": True}])
        self.assertEqual((got["chunks"], got["max_chunk"]), (1024, 64 << 10))
        self.assertLess(got["request_bytes"], 4096)

    def test_many_small_files_keep_the_request_below_the_bound(self):
        # 20 files of 200 KiB: each small enough to go inline, together 4 MiB, which one
        # request cannot carry (sbxd's max_message_bytes is 1 MiB): the rest are streamed.
        d = self.tmpdir()
        blobs = [os.urandom(200 << 10) for _ in range(20)]
        args = []
        for i, blob in enumerate(blobs):
            args += ["--file", write(os.path.join(d, "f%02d" % i), blob)]
        got = self.sent(*args)
        self.assertEqual([f["sha256"] for f in got["files"]], [sha(b) for b in blobs])
        self.assertLess(got["request_bytes"], 1 << 20)
        self.assertTrue(any(f["streamed"] for f in got["files"]))
        self.assertFalse(all(f["streamed"] for f in got["files"]))

    def test_more_files_than_fds(self):
        # 300 files (some inline, some streamed) under a limit of 32 fds: sbx holds a file
        # open only while it reads it.
        d = self.tmpdir()
        args, blobs = [], []
        for i in range(300):
            blobs.append(os.urandom(4096 if i % 3 else 300 << 10))
            args += ["--file", write(os.path.join(d, "f%03d" % i), blobs[-1])]

        def few_fds():
            resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
        r = self.sbx("exec", *args, "--", "files", preexec_fn=few_fds)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual([f["sha256"] for f in got["files"]], [sha(b) for b in blobs])

    def test_file_usage_errors_run_nothing(self):
        d = self.tmpdir()
        for args, msg in ((["--file", os.path.join(d, "missing")], b"cannot open"),
                          (["--file", d], b"is not a regular file"),
                          (["--file", d + "/"], b"names a directory"),
                          (["--file", ":x"], b"LOCAL[:PATH]"),
                          (["--out", d], b"--out is where --collect writes")):
            r = self.sbx("exec", *args, "--", "files")
            self.assertEqual((r.returncode, r.stdout), (SBX_FAIL, b""), args)
            self.assertIn(msg, r.stderr, args)
            self.assertIn(b"usage: sbx", r.stderr)

    # ---- --collect ----

    def collected(self, spec, *args, cwd=None):
        return self.sbx("exec", "--collect", "**", *args, "--", "collected", json.dumps(spec),
                        cwd=cwd)

    def test_result_files_are_written_with_their_modes(self):
        out = self.tmpdir()
        binary = bytes(range(256)) * 3
        files = [("bin/data.bin", 0o644, binary), ("empty", 0o644, b""),
                 ("secret", 0o600, b"s3cret\n"), ("run.sh", 0o755, b"#!/bin/sh\necho hi\n"),
                 (UNICODE, 0o640, "\u2713\n".encode())]
        spec = {"files": [{"path": p, "mode": m, "data_hex": d.hex()} for p, m, d in files]}
        old = os.umask(0o077)  # modes are applied, whatever the umask
        try:
            r = self.collected(spec, "--out", out)
        finally:
            os.umask(old)
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        self.assertEqual(tree(out), {p: (m, d) for p, m, d in files})

    def test_out_defaults_to_the_current_directory_and_is_created(self):
        cwd = self.tmpdir()
        spec = {"files": [{"path": "a/b.txt", "data_hex": b"hi".hex()}]}
        r = self.collected(spec, cwd=cwd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(tree(cwd), {"a/b.txt": (0o644, b"hi")})
        r = self.collected(spec, "--out", "new/dir", cwd=cwd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(tree(os.path.join(cwd, "new", "dir")), {"a/b.txt": (0o644, b"hi")})

    def test_hostile_result_paths_are_refused_and_nothing_leaves_out(self):
        top = self.tmpdir()
        out, outside = os.path.join(top, "out"), os.path.join(top, "outside")
        os.mkdir(out)
        os.mkdir(outside)
        os.symlink(outside, os.path.join(out, "link"))
        os.symlink(os.path.join(outside, "victim"), os.path.join(out, "victim"))
        os.symlink("..", os.path.join(out, "up"))
        hostile = ["/etc/sbx-hostile", "../outside/dotdot", "a/../../outside/deep",
                   "link/through", "victim", "up/outside/x", "./dot", "a//b", "", "nul\0x"]
        spec = {"files": [{"path": p, "data_hex": b"evil".hex()} for p in hostile] +
                [{"path": "good.txt", "data_hex": b"good".hex()}]}
        before = tree(out)
        r = self.collected(spec, "--out", out)
        self.assertEqual(r.returncode, SBX_FAIL, r.stderr)
        lines = r.stderr.decode().splitlines()
        self.assertEqual(len([x for x in lines if "collect: cannot write" in x]), len(hostile),
                         r.stderr)
        self.assertIn("sbx: %d collected files could not be written" % len(hostile), lines)
        self.assertEqual(os.listdir(outside), [])
        self.assertFalse(os.path.exists("/etc/sbx-hostile"))
        self.assertEqual(tree(out), dict(before, **{"good.txt": (0o644, b"good")}))
        # --json: the result, with what could not be written.
        r = self.collected(spec, "--out", out, "--json")
        self.assertEqual(r.returncode, SBX_FAIL, r.stderr)
        res = json.loads(r.stdout)
        self.assertEqual(res["status"], "exited")
        self.assertEqual([e["path"] for e in res["collect_errors"]],
                         hostile)
        self.assertEqual(os.listdir(outside), [])

    def test_truncated_skipped_and_collect_truncated_are_told(self):
        out = self.tmpdir()
        spec = {"files": [{"path": "log", "data_hex": b"abc".hex(), "size": 10,
                           "truncated": True}],
                "skipped": [{"path": "ln", "reason": "symlink"},
                            {"path": "deep/\x1b[31mred", "reason": "directory_too_deep"}],
                "collect_truncated": True}
        r = self.collected(spec, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(tree(out), {"log": (0o644, b"abc")})
        self.assertEqual(r.stderr.decode().splitlines(), [
            "sbx: collect: 'log' truncated: 3 of its 10 bytes",
            "sbx: collect: skipped 'ln': symlink",
            "sbx: collect: skipped 'deep/?[31mred': directory_too_deep",  # no escapes
            "sbx: collect: stopped at the pool's collect limits: not every file matched "
            "was collected"])
        # --json tells them in the object, not on stderr.
        r = self.collected(spec, "--out", out, "--json")
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        res = json.loads(r.stdout)
        self.assertEqual(res["skipped"], spec["skipped"])
        self.assertIs(res["collect_truncated"], True)
        self.assertEqual([(f["path"], f["size"], f["truncated"], f["data"]) for f in res["files"]],
                         [("log", 10, True, "abc")])

    def test_json_files_have_text_and_base64_when_not_utf8(self):
        out = self.tmpdir()
        binary = bytes(range(256))
        spec = {"files": [{"path": "t.txt", "data_hex": "caf\u00e9\n".encode().hex()},
                          {"path": "b.bin", "mode": 0o600, "data_hex": binary.hex()}]}
        r = self.collected(spec, "--out", out, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        t, b = res["files"]
        self.assertEqual((t["path"], t["mode"], t["size"], t["data"]), ("t.txt", 0o644, 6,
                                                                         "caf\u00e9\n"))
        self.assertNotIn("data_b64", t)
        self.assertEqual(base64.b64decode(b["data_b64"], validate=True), binary)
        self.assertEqual(b["data"], binary.decode("utf-8", "replace"))
        self.assertEqual(res["files_out_bytes"], 6 + 256)
        self.assertEqual(tree(out), {"t.txt": (0o644, "caf\u00e9\n".encode()),
                                     "b.bin": (0o600, binary)})

    def test_out_that_cannot_be_made_runs_nothing(self):
        d = self.tmpdir()
        f = write(os.path.join(d, "file"), b"")
        r = self.sbx("exec", "--collect", "x", "--out", os.path.join(f, "sub"), "--", "files")
        self.assertEqual((r.returncode, r.stdout), (SBX_FAIL, b""))
        self.assertIn(b"--out: cannot create", r.stderr)


class CliFilesLive(DaemonTest, Tmp):
    """Through a real sandbox's /work, byte for byte."""
    pools = [pool_yaml("python", warm=1, max=4, memory="512MiB", timeout="60s")]

    def test_round_trip_binary_empty_modes_unicode(self):
        d, out = self.tmpdir(), self.tmpdir()
        binary = bytes(range(256)) * 1024 + os.urandom(4096)
        files = {"bin/data.bin": (0o644, binary), "empty": (0o644, b""),
                 "secret": (0o600, b"s3cret\n"), "run.sh": (0o755, b"#!/bin/sh\necho ran\n"),
                 UNICODE: (0o640, "\u2713 caf\u00e9\n".encode())}
        args = []
        for i, (path, (mode, data)) in enumerate(sorted(files.items())):
            args += ["--file", write(os.path.join(d, "l%d" % i), data, mode) + ":in/" + path]
        # The command copies in/ to out/ keeping modes, and the run.sh that came in runs.
        script = "cp -a in out && sh out/run.sh && stat -c '%a %s %n' in/secret in/run.sh"
        r = self.d.sbx("exec", *args, "--collect", "out/**", "--out", out, "--",
                       "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"ran\n600 7 in/secret\n755 19 in/run.sh\n")
        self.assertEqual(r.stderr, b"")
        self.assertEqual(tree(out), {"out/" + p: v for p, v in files.items()})

    def test_a_64_mib_input(self):
        d = self.tmpdir()
        data = os.urandom(64 << 20)
        p = write(os.path.join(d, "big"), data)
        r = self.d.sbx("exec", "--file", p, "--", "sha256sum", "big", timeout=180)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().split()[0], sha(data))

    def test_json_files_and_byte_counts(self):
        out = self.tmpdir()
        r = self.d.sbx("exec", "--json", "--collect", "*.txt", "--out", out, "--", "sh", "-c",
                       "printf 'caf\\303\\251' > a.txt; printf '\\377' > b.txt; ln -s /etc/passwd "
                       "c.txt; echo no > d.log")
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        files = {f["path"]: f for f in res["files"]}
        self.assertEqual(sorted(files), ["a.txt", "b.txt"])
        self.assertEqual(files["a.txt"]["data"], "caf\u00e9")
        self.assertEqual(base64.b64decode(files["b.txt"]["data_b64"]), b"\xff")
        self.assertEqual(res["skipped"], [{"path": "c.txt", "reason": "symlink"}])
        self.assertEqual(res["files_out_bytes"], 6)
        self.assertEqual(tree(out), {"a.txt": (0o644, "caf\u00e9".encode()),
                                     "b.txt": (0o644, b"\xff")})
        r = self.d.sbx("exec", "--collect", "*.txt", "--out", out, "--", "sh", "-c",
                       "ln -s /etc/passwd c.txt")
        self.assertEqual((r.returncode, r.stderr), (0, b"sbx: collect: skipped 'c.txt': symlink\n"))

    def test_capture(self):
        r = self.d.sbx("exec", "--capture", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (3, b"out\n", b"err\n"))
        r = self.d.sbx("exec", "--capture", "--json", "--", "sh", "-c", "echo out; echo err >&2")
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        self.assertEqual((res["stdout"], res["stderr"]), ("out\n", "err\n"))

    def test_refused_files_run_nothing(self):
        d = self.tmpdir()
        p = write(os.path.join(d, "x"), b"x")
        for dst in ("../x", "/etc/x", "/work"):
            r = self.d.sbx("exec", "--json", "--file", p + ":" + dst, "--", "touch", "/tmp/ran")
            self.assertEqual(r.returncode, SBX_FAIL, (dst, r.stderr))
            self.assertEqual(json.loads(r.stdout)["error"]["code"], "bad_request", dst)
            self.assertIn(b"(bad_request)", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
