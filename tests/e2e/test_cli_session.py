# SPDX-License-Identifier: MIT
"""build/sbx's sessions against a live sbxd: sbx session open (the id alone on stdout),
sbx exec --session (files in /work and /tmp kept between commands), sbx cp both ways in
chunks (binary, modes kept on upload, - for stdin and stdout, a local directory), sbx
session list and ls, sbx session close (then the id is not_found), a session opened with a
token is refused to another token, and sbx audit --session; and the Python client's
session methods (tests/helpers/sbx_client.py) on the same daemon."""
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time

from harness import SBX, DaemonTest, pool_yaml

SBX_FAIL = 125
ID = re.compile(r"^s-[0-9a-f]{32}$")


def wait_for(pred, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


class CliSession(DaemonTest):
    pools = [pool_yaml("python", warm=2, max=8, memory="256MiB", timeout="30s")]

    def tmpdir(self):
        d = tempfile.mkdtemp(prefix="sbx-session-")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        return d

    def admin(self, *args):
        return subprocess.run([SBX, "--admin-socket", self.d.admin] + list(args),
                              capture_output=True, timeout=60)

    def sbx(self, *args, **kw):
        env = dict(kw.pop("env", {}))
        env.setdefault("SBX_TOKEN", "")
        return self.d.sbx(*args, env=env, **kw)

    def open_session(self, *args):
        r = self.sbx("session", "open", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        self.assertRegex(sid, ID)
        self.assertEqual(r.stdout, (sid + "\n").encode())  # for $(sbx session open)
        self.addCleanup(self.sbx, "session", "close", sid, *args[args.index("--token"):]
                        if "--token" in args else ())
        return sid

    def run_in(self, sid, *argv, **kw):
        return self.sbx("exec", "--session", sid, "--", *argv, **kw)

    def test_files_persist_between_commands(self):
        sid = self.open_session()
        r = self.run_in(sid, "sh", "-c", "echo hi > /work/a; echo tmp > /tmp/b; pwd")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"/work\n", b""))
        r = self.run_in(sid, "cat", "/work/a", "/tmp/b")
        self.assertEqual((r.returncode, r.stdout), (0, b"hi\ntmp\n"), r.stderr)
        r = self.run_in(sid, "sh", "-c", "exit 7")
        self.assertEqual(r.returncode, 7)
        # A fresh sandbox sees none of it.
        r = self.sbx("exec", "--", "sh", "-c", "cat /work/a")
        self.assertNotEqual(r.returncode, 0)

    def test_open_json_and_list(self):
        r = self.sbx("session", "open", "--json", "--ttl", "2m", "--idle-timeout", "90s")
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        sid = res["session"]
        self.addCleanup(self.sbx, "session", "close", sid)
        self.assertRegex(sid, ID)
        self.assertEqual((res["pool"], res["ttl"], res["idle_timeout"]), ("python", 120, 90))
        self.assertAlmostEqual(res["expires_at"], time.time() + 120, delta=30)
        self.assertTrue(res["sandbox"])
        self.assertEqual(self.run_in(sid, "true").returncode, 0)
        r = self.sbx("session", "list", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        mine = [s for s in json.loads(r.stdout) if s["session"] == sid]
        self.assertEqual(len(mine), 1, r.stdout)
        self.assertEqual((mine[0]["pool"], mine[0]["commands"], mine[0]["busy"]),
                         ("python", 1, False))
        r = self.sbx("session", "list")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertTrue(lines[0].startswith("SESSION"), lines)
        row = [line for line in lines if line.startswith(sid)]
        self.assertEqual(len(row), 1, lines)
        self.assertIn("python", row[0].split())

    def test_cp_both_ways(self):
        sid = self.open_session()
        d = self.tmpdir()
        data = os.urandom(1536 << 10) + bytes(range(256))  # three 512 KiB chunks and a bit
        up = os.path.join(d, "tool.bin")
        with open(up, "wb") as f:
            f.write(data)
        os.chmod(up, 0o751)
        r = self.sbx("cp", up, sid + ":dir/tool.bin")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"", b""))
        r = self.run_in(sid, "sh", "-c", "stat -c '%a %s' /work/dir/tool.bin; "
                        "sha256sum < /work/dir/tool.bin")
        self.assertEqual(r.returncode, 0, r.stderr)
        mode, size, digest = r.stdout.decode().split()[:3]
        self.assertEqual((mode, int(size), digest),
                         ("751", len(data), hashlib.sha256(data).hexdigest()))
        # Down, to a file, to a directory (its basename), and to stdout.
        down = os.path.join(d, "back.bin")
        r = self.sbx("cp", sid + ":/work/dir/tool.bin", down)
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        with open(down, "rb") as f:
            self.assertEqual(f.read(), data)
        sub = os.path.join(d, "sub")
        os.mkdir(sub)
        r = self.sbx("cp", sid + ":dir/tool.bin", sub)
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        with open(os.path.join(sub, "tool.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        r = self.sbx("cp", sid + ":dir/tool.bin", "-")
        self.assertEqual((r.returncode, r.stdout), (0, data), r.stderr)
        # Up from stdin (mode 0644), an empty file, and into the workspace's root by name.
        r = self.sbx("cp", "-", sid + ":from-stdin.txt", input=b"piped\n")
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        empty = os.path.join(d, "empty")
        open(empty, "wb").close()
        r = self.sbx("cp", empty, sid + ":")
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        r = self.run_in(sid, "sh", "-c", "stat -c '%a %s %n' from-stdin.txt empty")
        self.assertEqual(r.stdout, b"644 6 from-stdin.txt\n644 0 empty\n", r.stderr)
        r = self.sbx("cp", sid + ":empty", "-")
        self.assertEqual((r.returncode, r.stdout), (0, b""), r.stderr)
        # Replacing a file truncates it.
        r = self.sbx("cp", "-", sid + ":from-stdin.txt", input=b"x")
        self.assertEqual(self.sbx("cp", sid + ":from-stdin.txt", "-").stdout, b"x")
        # ls shows what is there.
        r = self.sbx("session", "ls", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        names = {line.split()[-1]: line.split()[0] for line in r.stdout.decode().splitlines()}
        self.assertEqual(names.get("dir"), "drwxr-xr-x", names)
        self.assertEqual(names.get("empty"), "-rw-r--r--", names)
        r = self.sbx("session", "ls", sid, "dir", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        entries = json.loads(r.stdout)["entries"]
        self.assertEqual([(e["name"], e["type"], e["size"], e["mode"]) for e in entries],
                         [("tool.bin", "file", len(data), 0o751)])

    def test_cp_refusals(self):
        sid = self.open_session()
        d = self.tmpdir()
        for args, needle in (([sid + ":a", sid + ":b"], b"exactly one side"),
                             (["a", "b"], b"exactly one side"),
                             ([sid + ":"], b"needs a source and a destination"),
                             (["-", sid + ":"], b"must name the file"),
                             ([sid + ":", "-"], b"which file")):
            r = self.sbx("cp", *args)
            self.assertEqual(r.returncode, SBX_FAIL, args)
            self.assertIn(needle, r.stderr, args)
        r = self.sbx("cp", sid + ":missing", os.path.join(d, "x"))
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertRegex(r.stderr, rb"^sbx: .*\(\w+\)\n$")
        self.assertFalse(os.path.exists(os.path.join(d, "x")))  # a refused read makes no file
        r = self.sbx("cp", "-", sid + ":../escape", input=b"x")
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertIn(b"(bad_request)", r.stderr)
        r = self.sbx("cp", d, sid + ":x")
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertIn(b"is a directory", r.stderr)

    def test_open_with_files(self):
        d = self.tmpdir()
        src = os.path.join(d, "seed.sh")
        with open(src, "wb") as f:
            f.write(b"echo seeded\n")
        os.chmod(src, 0o700)
        sid = self.open_session("--file", src, "--file", src + ":sub/copy")
        r = self.run_in(sid, "sh", "-c", "sh seed.sh; stat -c '%a %n' seed.sh sub/copy")
        self.assertEqual(r.stdout, b"seeded\n700 seed.sh\n700 sub/copy\n", r.stderr)
        big = os.path.join(d, "big")
        with open(big, "wb") as f:
            f.write(b"x" * (300 << 10))
        r = self.sbx("session", "open", "--file", big)
        self.assertEqual((r.returncode, r.stdout), (SBX_FAIL, b""))
        self.assertIn(b"copy larger ones in with sbx cp", r.stderr)
        r = self.sbx("session", "open", "--file", src + ":../out")
        self.assertEqual((r.returncode, r.stdout), (SBX_FAIL, b""))
        self.assertIn(b"(bad_request)", r.stderr)

    def test_close_then_not_found(self):
        r = self.sbx("session", "open")
        sid = r.stdout.decode().strip()
        self.assertEqual(self.run_in(sid, "true").returncode, 0)
        self.assertEqual(self.run_in(sid, "true").returncode, 0)
        r = self.sbx("session", "close", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout.decode(), r"^%s closed after 2 commands in \d+\.\ds\n$" % sid)
        for args in (["exec", "--session", sid, "--", "true"], ["session", "close", sid],
                     ["cp", sid + ":a", "-"], ["session", "ls", sid]):
            r = self.sbx(*args)
            self.assertEqual(r.returncode, SBX_FAIL, args)
            self.assertIn(b"(not_found)", r.stderr, args)
        r = self.sbx("exec", "--json", "--session", sid, "--", "true")
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "not_found")
        r = self.sbx("session", "list", "--json")
        self.assertNotIn(sid, [s["session"] for s in json.loads(r.stdout)])

    def test_a_token_session_is_its_tokens(self):
        tokens = []
        for _ in range(2):
            r = self.admin("token", "issue", "--ttl", "5m")
            self.assertEqual(r.returncode, 0, r.stderr)
            tokens.append(r.stdout.decode().strip())
        sid = self.open_session("--token", tokens[0])
        r = self.run_in(sid, "sh", "-c", "echo mine > /work/f", env={"SBX_TOKEN": tokens[0]})
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.sbx("cp", sid + ":f", "-", env={"SBX_TOKEN": tokens[0]})
        self.assertEqual((r.returncode, r.stdout), (0, b"mine\n"), r.stderr)
        # Another token is refused; naming none uses the session's own (its id is the secret).
        for args in (["exec", "--session", sid, "--", "cat", "/work/f"], ["cp", sid + ":f", "-"],
                     ["session", "ls", sid], ["session", "close", sid]):
            r = self.sbx(*args, env={"SBX_TOKEN": tokens[1]})
            self.assertEqual(r.returncode, SBX_FAIL, args)
            self.assertIn(b"(denied)", r.stderr, args)
            self.assertEqual(r.stdout, b"")
        r = self.run_in(sid, "cat", "/work/f")
        self.assertEqual((r.returncode, r.stdout), (0, b"mine\n"), r.stderr)
        r = self.sbx("session", "list", "--json", "--token", tokens[0])
        self.assertIn(sid, [s["session"] for s in json.loads(r.stdout)])
        r = self.sbx("session", "list", "--json", "--token", tokens[1])
        self.assertNotIn(sid, [s["session"] for s in json.loads(r.stdout)])

    def test_files_and_collect_in_a_session(self):
        sid = self.open_session()
        d, out = self.tmpdir(), self.tmpdir()
        src = os.path.join(d, "in.txt")
        with open(src, "wb") as f:
            f.write(b"input\n")
        r = self.sbx("exec", "--session", sid, "--file", src, "--collect", "*.out", "--out", out,
                     "--", "sh", "-c", "tr a-z A-Z < in.txt > in.out")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "in.out"), "rb") as f:
            self.assertEqual(f.read(), b"INPUT\n")
        r = self.run_in(sid, "cat", "in.txt", "in.out")  # still there for the next command
        self.assertEqual(r.stdout, b"input\nINPUT\n")

    def test_audit_session(self):
        sid = self.open_session()
        for word in ("one", "two"):
            self.assertEqual(self.run_in(sid, "echo", word).returncode, 0)
        self.sbx("session", "close", sid)

        def chains():
            r = self.admin("audit", "--session", sid, "--json")
            if r.returncode != 0:
                return None
            rows = [json.loads(line) for line in r.stdout.decode().splitlines()]
            done = [c for c in rows if c.get("status") == "exited"]
            return rows if len(done) == 2 else None
        rows = wait_for(chains)
        self.assertIsNotNone(rows, self.admin("audit", "--session", sid, "--json"))
        argvs = []
        for chain in rows:
            for ev in chain["events"]:
                if ev["type"] == "task.request":
                    self.assertEqual(ev["fields"]["session"], sid)
                    argvs.append(ev["fields"]["argv"])
        self.assertEqual(sorted(argvs), [["echo", "one"], ["echo", "two"]])
        types = [ev["type"] for chain in rows for ev in chain["events"]]
        self.assertIn("session.open", types)
        self.assertIn("session.close", types)
        r = self.admin("audit", "--session", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("echo one", r.stdout.decode())
        self.assertIn("session.close", r.stdout.decode())
        r = self.admin("audit", "--session", "s-" + "0" * 32)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"no audit events for session", r.stderr)

    def test_python_client_sessions(self):
        with self.d.client() as c:
            sid = c.session_open(pool="python", ttl=60)["session"]
            try:
                self.assertRegex(sid, ID)
                data = os.urandom(1 << 20) + b"tail"
                c.session_write(sid, "blob", data, mode=0o600)
                self.assertEqual(c.session_read(sid, "blob"), data)
                self.assertEqual(c.session_read(sid, "blob", offset=len(data) - 4), b"tail")
                self.assertEqual(c.session_read(sid, "blob", offset=1, length=3), data[1:4])
                res, out, _ = c.exec(["sh", "-c", "stat -c %a blob; echo x > made"], session=sid)
                self.assertEqual((res["status"], out), ("exited", b"600\n"))
                res, out, _ = c.exec(["cat", "made"], session=sid, capture=True)
                self.assertEqual(out, b"x\n")
                names = [e["name"] for e in c.session_list(sid)["entries"]]
                self.assertEqual(sorted(names), ["blob", "made"])
                self.assertIn(sid, [s["session"] for s in c.session_list()])
            finally:
                closed = c.session_close(sid)
            self.assertEqual((closed["session"], closed["reason"], closed["commands"]),
                             (sid, "closed", 2))

    def test_usage(self):
        for args, needle in ((["session"], b"open, list, ls or close?"),
                             (["session", "close"], b"which session?"),
                             (["session", "open", "extra"], b"unexpected argument"),
                             (["session", "list", "--ttl", "5"], b"unknown option"),
                             (["session", "open", "--ttl", "0"], b"--ttl needs")):
            r = self.sbx(*args)
            self.assertEqual((r.returncode, r.stdout), (SBX_FAIL, b""), args)
            self.assertIn(needle, r.stderr, args)
        r = self.sbx("session", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"--idle-timeout", r.stdout)


if __name__ == "__main__":
    import unittest
    unittest.main(verbosity=2)
