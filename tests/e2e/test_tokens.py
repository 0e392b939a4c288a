# SPDX-License-Identifier: MIT
"""Capability tokens (docs/TOKENS.md): minted on the admin socket only, stored hashed, granting
read-only mounts and pools for a time and a number of uses; denied when forged, revoked,
expired or used up; expiry and revocation kill the tasks running under them; tokens survive a
restart and their strings appear nowhere in the state dir or the log."""
import base64
import os
import secrets
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
import unittest

from harness import Daemon, pool_yaml, SBX
import sbx_client

# sbx's statuses (issue 29): a refusal is sbx's failure, 125, told apart by its code; a
# task killed for its token's expiry or revocation is a kill, 137. Both used to be 77.
EXIT_DENIED = 125
EXIT_TOKEN_KILLED = 137


def make_root():
    """A mount root with a data dir, a file, and two ways out: a symlink and a sibling."""
    root = tempfile.mkdtemp(prefix="sbx-tokroot-")
    outside = tempfile.mkdtemp(prefix="sbx-tokout-")
    for d in (root, outside):
        os.chmod(d, 0o755)
    # World-writable on the host, so that only the read-only mount stops the task (EROFS),
    # not the permissions of a host-owned file.
    data = os.path.join(root, "data")
    os.mkdir(data)
    os.chmod(data, 0o777)
    with open(os.path.join(data, "hello.txt"), "w") as f:
        f.write("hello from the host\n")
    os.chmod(os.path.join(data, "hello.txt"), 0o666)
    with open(os.path.join(outside, "secret.txt"), "w") as f:
        f.write("not for sandboxes\n")
    os.symlink(outside, os.path.join(root, "escape"))
    os.symlink("/etc", os.path.join(data, "etc-link"))
    return root, outside


def admin(d, *args, env=None, timeout=30):
    e = dict(os.environ)
    e.pop("SBX_ADMIN_SOCKET", None)
    e.pop("SBX_TOKEN", None)
    e.update(env or {})
    return subprocess.run([SBX, "--socket", d.sock, "--admin-socket", d.admin] + list(args),
                          capture_output=True, timeout=timeout, env=e)


def issue(d, *args):
    """Issues a token with the CLI; returns (token, id)."""
    r = admin(d, "token", "issue", *args)
    if r.returncode != 0:
        raise AssertionError("token issue %s: rc %d: %s" % (args, r.returncode, r.stderr))
    token = r.stdout.decode().strip()
    tid = r.stderr.decode().split("token ", 1)[1].split()[0]
    return token, tid


def run(client, argv, token=None, pool=None, timeout=None, on_started=None):
    """exec through the Python client; returns (result, stdout, stderr)."""
    args = {"argv": list(argv)}
    if token is not None:
        args["token"] = token
    if pool:
        args["pool"] = pool
    if timeout:
        args["timeout"] = timeout
    out, err = [], []

    def on_notify(method, rest):
        if method == "exec.stdout":
            out.append(rest[0])
        elif method == "exec.stderr":
            err.append(rest[0])
        elif method == "exec.started" and on_started:
            on_started(rest[0])

    msgid = client.start("exec", args, on_notify)
    res = client.wait(msgid, 90)
    return res, b"".join(out), b"".join(err)


def forged_token():
    return "sbx_" + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


class Tokens(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root, cls.outside = make_root()
        cls.data = os.path.join(cls.root, "data")
        cls.d = Daemon(pools=[pool_yaml(name="python", warm=2), pool_yaml(name="other", warm=1),
                              pool_yaml(name="single", warm=1, max=1)],
                       config_extra="tokens:\n  mount_roots: [%s]\n  max_ttl: 1h\n" % cls.root)
        cls.issued = []

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        # The token strings appear nowhere in the state dir (raw bytes) or the log.
        blobs = [open(cls.d.log_path, "rb").read()]
        for top, _, files in os.walk(cls.d.state):
            for name in files:
                with open(os.path.join(top, name), "rb") as f:
                    blobs.append(f.read())
        for t in cls.issued:
            for b in blobs:
                assert t.encode() not in b and t[4:].encode() not in b, "token leaked"
        # The trail has the admin actions, the expiries, and the denials with their reason.
        db = sqlite3.connect(os.path.join(cls.d.state, "audit.db"))
        try:
            types = dict(db.execute("SELECT type, count(*) FROM events GROUP BY type").fetchall())
            denied = db.execute("SELECT count(*) FROM events WHERE type = 'policy.decision'"
                                " AND fields LIKE '%unknown token%'").fetchone()[0]
        finally:
            db.close()
        assert types.get("token.issue", 0) >= len(cls.issued) - 1, types
        assert types.get("token.revoke", 0) >= 2 and types.get("token.expire", 0) >= 1, types
        assert denied >= 1, types
        for p in (cls.root, cls.outside):
            shutil.rmtree(p)

    def issue(self, *args):
        token, tid = issue(self.d, *args)
        self.issued.append(token)
        return token, tid

    def client(self):
        c = self.d.client()
        self.addCleanup(c.close)
        return c

    def test_mount_is_readable_read_only_and_host_unchanged(self):
        hello = os.path.join(self.data, "hello.txt")
        before = os.stat(hello)
        token, _ = self.issue("--mount", "%s:/data" % self.data, "--ttl", "60")
        res, out, err = run(self.client(), ["sh", "-c",
                                            "cat /data/hello.txt; echo changed > /data/hello.txt;"
                                            " echo rc=$?; touch /data/new; echo rc=$?;"
                                            " grep ' /data ' /proc/self/mountinfo"], token=token)
        self.assertEqual(res["status"], "exited", res)
        self.assertIn(b"hello from the host\n", out)
        self.assertEqual(err.count(b"Read-only file system"), 2, err)
        self.assertNotIn(b"rc=0", out)
        opts = out.split(b" /data ")[1].split()[0].split(b",")
        for o in (b"ro", b"nosuid", b"nodev"):
            self.assertIn(o, opts)
        after = os.stat(hello)
        self.assertEqual((before.st_mtime_ns, before.st_size), (after.st_mtime_ns, after.st_size))
        with open(hello) as f:
            self.assertEqual(f.read(), "hello from the host\n")
        self.assertFalse(os.path.exists(os.path.join(self.data, "new")))

    def test_file_mount_and_the_cli_with_env_token(self):
        token, _ = self.issue("--mount", "%s/hello.txt:/tmp/in/hello" % self.data,
                              "--mount", "%s:/srv/data" % self.data)
        r = self.d.sbx("exec", "--", "sh", "-c", "cat /tmp/in/hello /srv/data/hello.txt",
                       env={"SBX_TOKEN": token})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"hello from the host\n" * 2)
        r = self.d.sbx("exec", "--token", token, "--", "sh", "-c", "echo x >> /tmp/in/hello")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"Read-only file system", r.stderr)

    def test_without_the_token_dst_does_not_exist(self):
        res, out, _ = run(self.client(), ["sh", "-c", "test -e /data; echo $?; ls /"])
        self.assertEqual(out.split()[0], b"1")
        self.assertNotIn(b"data", out.split(b"\n", 1)[1])
        token, _ = self.issue("--ttl", "60")  # a token without mounts grants none
        res, out, _ = run(self.client(), ["sh", "-c", "test -e /data; echo $?"], token=token)
        self.assertEqual(out, b"1\n")

    def test_escapes_are_refused_at_issue(self):
        for src in (os.path.join(self.root, "escape"),                   # symlink out of the root
                    os.path.join(self.data, "etc-link"),                 # symlink to /etc
                    os.path.join(self.data, "..", "..", os.path.basename(self.outside)),
                    self.outside, "/", "/etc", os.path.dirname(self.root)):
            r = admin(self.d, "token", "issue", "--mount", "%s:/data" % src)
            self.assertEqual(r.returncode, EXIT_DENIED, (src, r.stderr))
            self.assertIn(b"not under an allowed mount root", r.stderr, src)
            self.assertEqual(r.stdout, b"")
        r = admin(self.d, "token", "issue", "--mount", "%s/missing:/data" % self.root)
        self.assertNotEqual(r.returncode, 0)

    def test_system_destinations_are_refused(self):
        for dst in ("/", "/usr/x", "/etc", "/tmp", "/proc/x", "/dev/x", "/lib64/x", "/bin",
                    "/data/../etc", "/data//x", "/data/"):
            r = admin(self.d, "token", "issue", "--mount", "%s:%s" % (self.data, dst))
            self.assertEqual(r.returncode, EXIT_DENIED, (dst, r.stderr))
            self.assertEqual(r.stdout, b"")
        r = admin(self.d, "token", "issue", "--mount", "%s:/a" % self.data,
                  "--mount", "%s:/a/b" % self.data)
        self.assertEqual(r.returncode, EXIT_DENIED, r.stderr)
        self.assertIn(b"overlap", r.stderr)

    def test_ttl_above_the_maximum_is_refused(self):
        r = admin(self.d, "token", "issue", "--ttl", "2h")
        self.assertEqual(r.returncode, EXIT_DENIED, r.stderr)
        self.assertIn(b"max_ttl", r.stderr)

    def assert_denied(self, token, reason, pool=None):
        args = ["exec"] + (["--pool", pool] if pool else []) + ["--", "true"]
        r = self.d.sbx(*args, env={"SBX_TOKEN": token})
        self.assertEqual(r.returncode, EXIT_DENIED, r.stderr)
        self.assertIn(reason.encode(), r.stderr)
        self.assertIn(b"(denied)", r.stderr)
        self.assertNotIn(token.encode(), r.stderr)
        with self.assertRaises(sbx_client.RpcError) as cm:
            run(self.client(), ["true"], token=token, pool=pool)
        self.assertEqual(cm.exception.code, "denied")

    def test_forged_and_malformed_tokens_are_denied(self):
        self.assert_denied(forged_token(), "unknown token")
        self.assert_denied("sbx_short", "malformed token")
        self.assert_denied("not-a-token-at-all", "malformed token")
        token, _ = self.issue("--ttl", "60")
        flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
        self.assert_denied(flipped, "token")

    def test_revoked_token_is_denied(self):
        token, tid = self.issue("--ttl", "60")
        res, _, _ = run(self.client(), ["true"], token=token)
        self.assertEqual(res["status"], "exited")
        r = admin(self.d, "token", "revoke", tid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(tid.encode(), r.stdout)
        self.assert_denied(token, "revoked")
        # Revoking by the token string works too, and again is harmless.
        r = admin(self.d, "token", "revoke", token)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(token.encode(), r.stdout + r.stderr)

    def test_expired_token_is_denied(self):
        token, _ = self.issue("--ttl", "1")
        time.sleep(1.3)
        self.assert_denied(token, "expired")

    def test_used_up_token_is_denied(self):
        token, tid = self.issue("--uses", "2", "--ttl", "60")
        for _ in range(2):
            res, _, _ = run(self.client(), ["true"], token=token)
            self.assertEqual(res["status"], "exited", res)
        self.assert_denied(token, "used up")
        listing = admin(self.d, "token", "list").stdout.decode()
        line = [ln for ln in listing.splitlines() if ln.startswith(tid)][0]
        self.assertIn("used_up", line)
        self.assertIn("0/2 left", line)

    def test_pool_not_named_by_the_token_is_denied(self):
        token, _ = self.issue("--pool", "other", "--ttl", "60")
        self.assert_denied(token, "does not grant pool 'python'")
        res, _, _ = run(self.client(), ["true"], token=token, pool="other")
        self.assertEqual(res["status"], "exited", res)
        r = admin(self.d, "token", "issue", "--pool", "nosuchpool")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"unknown_pool", r.stderr)

    def test_expiry_kills_a_running_task(self):
        token, tid = self.issue("--ttl", "2", "--mount", "%s:/data" % self.data)
        t0 = time.monotonic()
        res, _, _ = run(self.client(), ["sleep", "60"], token=token, timeout=90)
        self.assertEqual(res["status"], "token_expired", res)
        self.assertLess(time.monotonic() - t0, 20)
        self.assertIsNone(res["exit_code"])
        # The CLI reports it as a kill.
        token, _ = self.issue("--ttl", "2")
        r = self.d.sbx("exec", "--token", token, "--", "sleep", "60")
        self.assertEqual(r.returncode, EXIT_TOKEN_KILLED, r.stderr)
        self.assertIn(b"token expired", r.stderr)

    def test_revoke_kills_a_running_task(self):
        token, tid = self.issue("--ttl", "600")
        started = threading.Event()
        box = {}

        def go():
            c = self.d.client()
            try:
                box["res"] = run(c, ["sleep", "60"], token=token, timeout=90,
                                 on_started=lambda _: started.set())[0]
            finally:
                c.close()

        th = threading.Thread(target=go)
        th.start()
        self.assertTrue(started.wait(30))
        time.sleep(0.3)
        r = admin(self.d, "token", "revoke", tid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"1 running task killed", r.stdout)
        th.join(30)
        self.assertEqual(box["res"]["status"], "token_revoked", box)

    def test_revoke_refuses_a_queued_task(self):
        running, running_id = self.issue("--ttl", "600", "--pool", "single")
        queued, queued_id = self.issue("--ttl", "600", "--pool", "single")
        started = threading.Event()
        box = {}

        def go(key, token, on_started=None):
            c = self.d.client()
            try:
                box[key] = run(c, ["sleep", "60"], token=token, pool="single", timeout=90,
                               on_started=on_started)[0]
            except sbx_client.RpcError as e:
                box[key] = e
            finally:
                c.close()

        a = threading.Thread(target=go, args=("a", running, lambda _: started.set()))
        a.start()
        self.assertTrue(started.wait(30))
        b = threading.Thread(target=go, args=("b", queued))
        b.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the single sandbox is busy: b waits in the queue
            pools = {p["name"]: p for p in self.client().call("pools", {})}
            if pools["single"]["queued"] == 1:
                break
            time.sleep(0.05)
        self.assertEqual(admin(self.d, "token", "revoke", queued_id).returncode, 0)
        b.join(30)
        self.assertIsInstance(box["b"], sbx_client.RpcError)
        self.assertEqual(box["b"].code, "denied")
        self.assertIn("revoked before the task started", box["b"].message)
        self.assertEqual(admin(self.d, "token", "revoke", running_id).returncode, 0)
        a.join(30)
        self.assertEqual(box["a"]["status"], "token_revoked", box)

    def test_list_shows_grants_never_tokens(self):
        token, tid = self.issue("--mount", "%s:/data" % self.data, "--pool", "other",
                                "--uses", "3", "--ttl", "600")
        r = admin(self.d, "token", "list")
        self.assertEqual(r.returncode, 0, r.stderr)
        text = r.stdout.decode()
        self.assertIn("ID", text.splitlines()[0])
        line = [ln for ln in text.splitlines() if ln.startswith(tid)][0]
        self.assertIn("active", line)
        self.assertIn("3/3 left", line)
        self.assertIn("other", line)
        self.assertIn("%s:/data" % self.data, line)
        for t in self.issued:
            self.assertNotIn(t, text)
            self.assertNotIn(t[4:], text)

    def test_agents_socket_refuses_token_methods(self):
        c = self.client()
        for method, params in (("token.issue", {}), ("token.list", {}),
                               ("token.revoke", {"id": "0" * 16})):
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.call(method, params)
            self.assertEqual(cm.exception.code, "unknown_method")
        r = subprocess.run([SBX, "--admin-socket", self.d.sock, "token", "list"],
                           capture_output=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"unknown_method", r.stderr)

    def test_admin_socket_is_private(self):
        self.assertEqual(os.stat(self.d.admin).st_mode & 0o777, 0o600)
        self.assertEqual(os.stat(os.path.join(self.d.state, "tokens.db")).st_mode & 0o777, 0o600)

    def test_bad_issue_requests(self):
        a = sbx_client.Client(self.d.admin)
        self.addCleanup(a.close)
        for params, code in (({"bogus": 1}, "bad_request"),
                             ({"mounts": [{"src": self.data}]}, "bad_request"),
                             ({"mounts": "x"}, "bad_request"),
                             ({"ttl": -1}, "bad_request"),
                             ({"net": "nosuchprofile"}, "bad_request"),
                             ({"mounts": [{"src": self.data, "dst": "/m%d" % i}
                                          for i in range(9)]}, "bad_request")):
            with self.assertRaises(sbx_client.RpcError) as cm:
                a.call("token.issue", params)
            self.assertEqual(cm.exception.code, code, params)
        res = a.call("token.issue", {"net": "none", "ttl": 5})
        self.issued.append(res["token"])
        self.assertEqual(res["info"]["net"], "none")
        with self.assertRaises(sbx_client.RpcError) as cm:
            a.call("token.revoke", {"id": "nope"})
        self.assertEqual(cm.exception.code, "bad_request")


class Restart(unittest.TestCase):
    """Tokens survive a restart with the same state dir; only hashes are stored."""

    def start(self):
        return Daemon(pools=[pool_yaml(warm=1)], args=["--state-dir", self.state,
                                                       "--mount-root", self.root])

    def setUp(self):
        self.root, outside = make_root()
        self.state = tempfile.mkdtemp(prefix="sbx-tokstate-")
        for p in (self.root, outside, self.state):
            self.addCleanup(shutil.rmtree, p)

    def test_tokens_survive_a_restart_and_are_stored_hashed(self):
        d = self.start()
        logs = []
        try:
            keep, keep_id = issue(d, "--mount", "%s/data:/data" % self.root, "--uses", "3",
                                  "--ttl", "600")
            gone, gone_id = issue(d, "--ttl", "600")
            c = d.client()
            res, out, _ = run(c, ["cat", "/data/hello.txt"], token=keep)
            c.close()
            self.assertEqual(out, b"hello from the host\n", res)
            self.assertEqual(admin(d, "token", "revoke", gone_id).returncode, 0)
            time.sleep(0.5)  # the use count is written back in the background
        finally:
            d.stop()
            logs.append(d.logtext())
        d = self.start()
        try:
            c = d.client()
            self.addCleanup(c.close)
            res, out, _ = run(c, ["cat", "/data/hello.txt"], token=keep)
            self.assertEqual(out, b"hello from the host\n", res)
            with self.assertRaises(sbx_client.RpcError) as cm:
                run(c, ["true"], token=gone)
            self.assertIn("revoked", cm.exception.message)
            listing = admin(d, "token", "list").stdout.decode()
            self.assertIn("1/3 left", [ln for ln in listing.splitlines()
                                       if ln.startswith(keep_id)][0])
            run(c, ["true"], token=keep)
            with self.assertRaises(sbx_client.RpcError) as cm:
                run(c, ["true"], token=keep)
            self.assertIn("used up", cm.exception.message)
        finally:
            d.stop()
            logs.append(d.logtext())
        # Raw bytes of every file in the state dir, and both logs: no token anywhere.
        found = []
        for top, _, files in os.walk(self.state):
            for name in files:
                with open(os.path.join(top, name), "rb") as f:
                    blob = f.read()
                for t in (keep, gone):
                    if t.encode() in blob or t[4:].encode() in blob:
                        found.append(name)
        for text in logs:
            for t in (keep, gone):
                if t in text or t[4:] in text:
                    found.append("log")
        self.assertEqual(found, [])
        self.assertTrue(os.path.exists(os.path.join(self.state, "tokens.db")))


class Forbidden(unittest.TestCase):
    """Even under an allowed root, sbxd's state dir and sockets (and what holds them) are
    never exposed."""

    def test_state_dir_and_sockets_are_refused(self):
        d = Daemon(pools=[pool_yaml(warm=0)], args=["--mount-root", "/tmp"])
        try:
            for src in (d.state, d.dir, os.path.dirname(d.dir), "/tmp"):
                r = admin(d, "token", "issue", "--mount", "%s:/x" % src)
                self.assertEqual(r.returncode, EXIT_DENIED, (src, r.stderr))
                self.assertIn(b"sbxd's state or sockets", r.stderr, src)
            other = tempfile.mkdtemp(prefix="sbx-tokok-")
            self.addCleanup(os.rmdir, other)
            r = admin(d, "token", "issue", "--mount", "%s:/x" % other)
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
