# SPDX-License-Identifier: MIT
"""Random traffic on both sockets (seeded, so a failure replays): valid and broken execs,
stdin for tasks that do or do not exist, wrong shapes and types, random msgpack, raw bytes,
truncated messages, connections dropped mid-task. Meanwhile a well-behaved client runs
tasks and must get exactly its output every time. Afterwards sbxd is alive with nothing
running, queued or dying and no failed creation; at exit (SIGTERM, code 0) nothing is left
(the harness checks processes, cgroups and sockets), the audit trail verifies, and every
task it recorded has its result: bad input never crashes sbxd, loses a record or leaks a
sandbox. The same holds with a hostile init in every sandbox (HostileInit) and with tasks
throwing mutated requests at the egress proxy (EgressFuzz). SBX_FUZZ_SEED replays a run,
SBX_FUZZ_SECONDS lengthens it; under SAN=1 the sanitizers watch."""
import os
import random
import shutil
import socket
import socketserver
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import msgpack

from harness import Daemon, pool_yaml, SBX, TOP
import sbx_client

SEED = int(os.environ.get("SBX_FUZZ_SEED", "20261130"))
SECONDS = float(os.environ.get("SBX_FUZZ_SECONDS", "20"))
# How long each egress fuzz task runs: half of SECONDS, at most 90 s, so that it ends well
# within its exec timeout (30 s more) and the harness's pools' max_timeout (120 s).
EGRESS_TASK_S = min(SECONDS / 2, 90.0)
KEYS = ["argv", "pool", "timeout", "env", "cwd", "stdin", "token", "x", "", "ARGV"]
METHODS = ["exec", "ping", "pools", "exec.stdin", "audit.query", "audit.verify", "token.issue",
           "token.list", "token.revoke", "stats", "nope", ""]
ARGVS = [["true"], ["sh", "-c", "echo hi >&2; exit 2"], ["sleep", "0.3"], ["cat"],
         ["sh", "-c", "head -c 100000 /dev/zero"], ["/nonexistent"], [""],
         ["sh", "-c", "sleep 5 & echo bg"], ["sh", "-c", "kill -9 $$"]]


class Fuzzer:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.replies = msgpack.Unpacker(raw=False)

    def value(self, depth=0):
        r = self.r
        t = r.randrange(12 if depth < 3 else 8)
        if t == 0:
            return None
        if t == 1:
            return r.choice([True, False])
        if t == 2:
            return r.choice([0, -1, 1, 2**31, 2**63 - 1, -2**63, 2**64 - 1, r.randrange(-99, 99)])
        if t == 3:
            return r.choice([0.0, -1.5, 1e308, float("inf"), float("nan"), 0.001, 3.5])
        if t == 4:
            return r.choice(["", "python", "true", "/tmp", "a=b", "\x00", "\u00e9" * 10,
                             "x" * r.randrange(0, 5000)])
        if t == 5:
            return r.randbytes(r.randrange(0, 64))
        if t == 6:
            return r.choice(["sh", "-c", "echo hi; exit 3", "sleep", "0.2", "cat"])
        if t == 7:
            return r.randrange(256)
        if t == 8:
            return [self.value(depth + 1) for _ in range(r.randrange(0, 5))]
        if t == 9:
            return {(self.value(3) if r.random() < 0.3 else r.choice(KEYS)):
                    self.value(depth + 1) for _ in range(r.randrange(0, 5))}
        if t == 10:
            return msgpack.ExtType(r.randrange(0, 128), r.randbytes(r.randrange(0, 8)))
        return [r.choice(["sh", "true", "echo"]), "-c", "echo x"]

    def good_exec(self):
        r = self.r
        p = {"argv": r.choice(ARGVS)}
        extra = {"timeout": lambda: r.choice([0.5, 1, 2, 0.001, 31, -1, "x"]),
                 "env": lambda: r.choice([{"A": "b"}, {"A=B": "c"}, {"": ""}, {"X": "\x00"},
                                          {"K": "v" * 100}, []]),
                 "cwd": lambda: r.choice(["/tmp", "/", "/nonexistent", "rel", "/proc/1"]),
                 "stdin": lambda: r.choice([True, False, 1]),
                 "pool": lambda: r.choice(["python", "nope", ""])}
        for k in r.sample(sorted(extra), r.randrange(0, 3)):
            p[k] = extra[k]()
        return [0, r.randrange(0, 50), "exec", [p]]

    def frame(self):
        r = self.r
        x = r.random()
        if x < 0.45:
            return self.good_exec()
        if x < 0.55:
            return [2, "exec.stdin", [r.randrange(0, 50),
                                      r.choice([b"", b"data\n", r.randbytes(100), "str"])]]
        mid = r.choice([r.randrange(0, 100), -1, 2**32, 2**63, "x", None, 1.5])
        if x < 0.75:
            return [0, mid, r.choice(METHODS), [self.value()] if r.random() < 0.5 else self.value()]
        if x < 0.85:
            return [2, r.choice(METHODS), self.value()]
        if x < 0.93:
            return [r.randrange(-2, 5), mid, self.value(), self.value(), self.value()][:r.randrange(0, 6)]
        return self.value()

    def session(self, path):
        """One connection: a burst of frames, maybe a wait for answers, then a close."""
        r = self.r
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.settimeout(0.1)
        sent = 0
        try:
            for _ in range(r.randrange(1, 20)):
                if r.random() < 0.05:
                    s.sendall(r.randbytes(r.randrange(1, 100)))
                else:
                    b = msgpack.packb(self.frame(), use_bin_type=r.random() < 0.8)
                    if r.random() < 0.1:
                        b = b[:r.randrange(len(b) + 1)]
                    s.sendall(b)
                sent += 1
            t0 = time.time()
            linger = r.choice([0, 0.05, 0.4])
            while time.time() - t0 < linger:
                data = s.recv(65536)
                if not data:
                    break
                # Whatever sbxd sends is msgpack-rpc whose strings are valid UTF-8.
                self.replies.feed(data)
                for msg in self.replies:
                    assert isinstance(msg, list) and msg[0] in (1, 2), msg
        except OSError:
            pass  # sbxd closed a connection it could not parse: expected
        finally:
            s.close()
            self.replies = msgpack.Unpacker(raw=False)
        return sent


def trail(d):
    """Each task's event types, from the trail of a stopped daemon."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.state, "audit.db"), uri=True)
    try:
        return db.execute("SELECT task, group_concat(type) FROM events WHERE task IS NOT NULL"
                          " GROUP BY task").fetchall()
    finally:
        db.close()


STATUSES = {"exited", "signaled", "timeout", "output_limit", "oom", "error"}


class Fuzz(unittest.TestCase):
    def test_random_traffic_disturbs_nothing_else(self):
        d = Daemon(pools=[pool_yaml("python", warm=4, max=8, queue=64)])
        stop = threading.Event()
        bystander = {"ok": 0, "bad": []}

        def well_behaved():
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    with d.client() as c:
                        res, out, err = c.exec(["sh", "-c", "echo out-%d; echo err-%d >&2" % (n, n)],
                                               wait_timeout=60)
                    if (res["status"], out, err) == ("exited", b"out-%d\n" % n, b"err-%d\n" % n):
                        bystander["ok"] += 1
                    else:
                        bystander["bad"].append((res, out, err))
                except Exception as e:  # noqa: BLE001 - any failure is the finding
                    bystander["bad"].append(repr(e))

        t = threading.Thread(target=well_behaved)
        t.start()
        fz = Fuzzer(SEED)
        frames = conns = 0
        try:
            try:
                end = time.time() + SECONDS
                while time.time() < end:
                    frames += fz.session(d.sock if fz.r.random() < 0.8 else d.admin)
                    conns += 1
                    self.assertIsNone(d.proc.poll(), "sbxd died (seed %d)" % SEED)
            finally:
                stop.set()
                t.join(120)
            print("fuzz: seed %d, %d frames over %d connections, bystander %d tasks"
                  % (SEED, frames, conns, bystander["ok"]), file=sys.stderr)
            self.assertGreater(frames, 200)
            self.assertEqual(bystander["bad"], [], "seed %d" % SEED)
            self.assertGreater(bystander["ok"], 5)
            with d.client() as c:
                deadline = time.time() + 30
                while True:
                    p = c.call("pools")[0]
                    if (p["running"], p["queued"], p["dying"]) == (0, 0, 0) or time.time() > deadline:
                        break
                    time.sleep(0.1)
            self.assertEqual((p["running"], p["queued"], p["dying"], p["failed"]), (0, 0, 0, 0), p)
            # The fuzzer's valid execs ran: sandboxes were used beyond the bystander's.
            self.assertGreater(p["tasks"], bystander["ok"] + 20, p)
            with sbx_client.Client(d.admin) as a:
                v = a.call("audit.verify")
            self.assertTrue(v["ok"], v)
        finally:
            d.stop()
        rows = trail(d)
        started = [t for t, types in rows if "task.started" in types.split(",")]
        self.assertGreater(len(started), bystander["ok"])
        for task, types in rows:
            types = types.split(",")
            if "task.request" in types:
                self.assertIn("task.result", types, (task, types))
            if "task.started" in types:
                for need in ("sandbox.assigned", "task.finished", "sandbox.destroyed"):
                    self.assertIn(need, types, (task, types))


class HostileInit(unittest.TestCase):
    def test_an_init_that_lies_floods_and_talks_garbage_harms_nothing(self):
        # Every sandbox's init (and the pool's fork server) is tests/helpers/hostile_init.py:
        # what an init a task had taken over could send sbxd. Tasks keep coming; each gets a
        # result or an error, sbxd stays up without piling up descriptors, and nothing is
        # left at exit.
        tmp = tempfile.mkdtemp(prefix="sbx-hostile-")
        os.chmod(tmp, 0o755)  # inits run as an unprivileged host id
        fake = os.path.join(tmp, "hostile_init.py")
        shutil.copy(os.path.join(TOP, "tests", "helpers", "hostile_init.py"), fake)
        os.chmod(fake, 0o755)
        with open(os.path.join(tmp, "seed"), "w") as f:
            f.write(str(SEED))
        d = Daemon(pools=[pool_yaml("python", warm=2, max=4, queue=64, timeout="3s")],
                   config_extra="init_path: %s\n" % fake)
        outcomes = {}
        lock = threading.Lock()
        stop = threading.Event()

        def agent():
            while not stop.is_set():
                try:
                    with d.client() as c:
                        res, _, _ = c.exec(["true"], wait_timeout=60)
                    key = res["status"]
                    self.assertIn(key, STATUSES, res)
                except sbx_client.RpcError as e:
                    key = "rpc:" + str(e.code)
                    time.sleep(0.05)
                except Exception as e:  # noqa: BLE001 - e.g. a reply that is not valid msgpack
                    key = "broken: %r" % e
                with lock:
                    outcomes[key] = outcomes.get(key, 0) + 1

        try:
            fds = lambda: len(os.listdir("/proc/%d/fd" % d.proc.pid))  # noqa: E731
            # sbxd's descriptors before any task. The pool's sandboxes, spare cgroups and
            # kept namespaces add a bounded number (about 70 here, whatever the seed or the
            # run's length); failures must not add more.
            fds_start = fds()
            agents = [threading.Thread(target=agent) for _ in range(3)]
            for t in agents:
                t.start()
            time.sleep(SECONDS)
            # The hostile inits choose at random, by the clock, and a run of silent ones (10 s
            # each until sbxd gives up on them) with the pool's backoff can leave few attempts
            # in SECONDS on a slow VM: go on, up to three times as long, until there were
            # enough of both.
            deadline = time.time() + 2 * SECONDS
            while time.time() < deadline and d.proc.poll() is None:
                with lock:
                    n = sum(outcomes.values())
                with d.client() as c:
                    failed = c.call("pools")[0]["failed"]
                if n > 10 and failed > 10:
                    break
                time.sleep(0.5)
            stop.set()
            for t in agents:
                t.join(120)
            self.assertIsNone(d.proc.poll(), "sbxd died (seed %d)" % SEED)
            with d.client() as c:
                p = c.call("pools")[0]
            print("hostile init: seed %d, outcomes %s, created %d, failed %d, fds %d at start, %d at the end"
                  % (SEED, outcomes, p["created"], p["failed"], fds_start, fds()), file=sys.stderr)
            self.assertGreater(sum(outcomes.values()), 10, outcomes)
            self.assertEqual([k for k in outcomes if k.startswith("broken")], [], outcomes)
            self.assertGreater(p["failed"], 10, p)
            # Creation goes on at its backoff's pace; descriptors do not pile up with it.
            self.assertLess(fds(), fds_start + 120)
            with sbx_client.Client(d.admin) as a:
                self.assertTrue(a.call("audit.verify")["ok"])
        finally:
            stop.set()
            d.stop()
            shutil.rmtree(tmp, ignore_errors=True)
        for task, types in trail(d):
            if "task.request" in types.split(","):
                self.assertIn("task.result", types.split(","), (task, types))


class HostileUpstream(socketserver.BaseRequestHandler):
    """An upstream that answers anything with a random, often malformed, response."""
    def handle(self):
        r = random.Random()
        self.request.settimeout(2)
        try:
            self.request.recv(65536)
            parts = [b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 999 X\r\n", b"HTTP/1.0 204 No\r\n",
                     b"HTTTP/1.1 200\r\n", b"Content-Length: 5\r\n", b"Content-Length: -3\r\n",
                     b"Content-Length: 99999999999999999999\r\n",
                     b"Transfer-Encoding: chunked\r\n", b"Connection: close\r\n",
                     b"X-" + b"h" * 9000 + b": v\r\n", b"\r\n", b"hello", b"5\r\nhello\r\n",
                     b"fffffffffffffffff\r\n", b"0\r\n\r\n", b"Bad header\r\n", b"\n\n"]
            for _ in range(r.randrange(1, 12)):
                self.request.sendall(r.choice(parts) if r.random() < 0.9 else r.randbytes(64))
        except OSError:
            pass


EGRESS_TASK = r"""
import os, random, socket, sys, time
R = random.Random(int(sys.argv[1]))
EVIL, GOOD = sys.argv[2], sys.argv[3]
HEADS = [
    b"GET http://evil/v1/x HTTP/1.1\r\nHost: evil\r\n\r\n",
    b"GET http://good/v1/x HTTP/1.1\r\nHost: good\r\n\r\n",
    b"POST http://evil/v1/p HTTP/1.1\r\nHost: evil\r\nContent-Length: 5\r\n\r\nhello",
    b"POST http://good/v1/p HTTP/1.1\r\nHost: good\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"CONNECT localhost:" + EVIL.encode() + b" HTTP/1.1\r\nHost: localhost\r\n\r\n\x16\x03\x01\x00\x05hello",
    b"CONNECT example.com:443 HTTP/1.1\r\n\r\n",
    b"GET /v1/x HTTP/1.1\r\nHost: good\r\n\r\nGET /v1/y HTTP/1.1\r\nHost: good\r\n\r\n",
    b"HEAD http://good/v1/x HTTP/1.0\r\n\r\n",
]
TOKENS = [b"\r\n", b"\n", b" ", b":", b"\x00", b"%2e%2e/", b"Content-Length: 7\r\n",
          b"Transfer-Encoding: chunked\r\n", b"Host: a\r\n", b"X: " + b"y" * 9000 + b"\r\n",
          b"http://", b"[::1]", b"localhost:0", b"\xff\xfe"]
def mutate(b):
    b = bytearray(b)
    for _ in range(R.randrange(0, 4)):
        at = R.randrange(len(b) + 1)
        op = R.randrange(4)
        if op == 0 and b:
            b[min(at, len(b) - 1)] = R.randrange(256)
        elif op == 1:
            b[at:at] = R.choice(TOKENS)
        elif op == 2:
            del b[at:at + R.randrange(1, 10)]
        else:
            b = b[:at]
    return bytes(b)
end = time.time() + float(sys.argv[4])
n = 0
while time.time() < end:
    s = socket.socket()
    s.settimeout(0.5)
    try:
        s.connect(("127.0.0.1", 3128))
        data = mutate(R.choice(HEADS))
        while data:
            k = R.randrange(1, len(data) + 1)
            s.sendall(data[:k])
            data = data[k:]
        if R.random() < 0.3:
            s.shutdown(socket.SHUT_WR)
        t0 = time.time()
        while time.time() - t0 < R.choice([0, 0.1, 0.5]):
            if not s.recv(65536):
                break
    except OSError:
        pass
    finally:
        s.close()
    n += 1
print(n)
"""


class EgressFuzz(unittest.TestCase):
    def test_random_requests_to_the_egress_proxy_harm_nothing(self):
        # Tasks with a network token throw mutated requests at the proxy in their sandbox
        # (sbxd parses them), through routes to a sane and a hostile upstream; afterwards a
        # plain request through the proxy still works and nothing is left.
        import http.server
        evil = socketserver.ThreadingTCPServer(("127.0.0.1", 0), HostileUpstream)
        evil.daemon_threads = True

        class Good(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _ok(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(b"ok")
            do_GET = do_POST = do_HEAD = _ok

            def log_message(self, *args):
                pass

        class Quiet(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # clients the proxy cut off

        good = Quiet(("127.0.0.1", 0), Good)
        for srv in (evil, good):
            threading.Thread(target=srv.serve_forever, daemon=True).start()
        ep, gp = evil.server_address[1], good.server_address[1]
        config = """egress:
  profiles:
    fz:
      allow: ["localhost:{ep}"]
      allow_addresses: ["127.0.0.1/32"]
      max_connections: 8
      routes:
        - {{name: evil, upstream: "http://127.0.0.1:{ep}/e"}}
        - {{name: good, upstream: "http://127.0.0.1:{gp}/g"}}
""".format(ep=ep, gp=gp)
        d = Daemon(pools=[pool_yaml("python", warm=2, max=4, timeout="30s")], config_extra=config)
        try:
            def token():
                r = subprocess.run([SBX, "--admin-socket", d.admin, "token", "issue", "--net",
                                    "fz"], capture_output=True, timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr)
                return r.stdout.decode().strip()

            results = []

            toks = [token() for _ in range(4)]
            threads = []
            for i, tok in enumerate(toks):
                def run(i=i, tok=tok):
                    with d.client() as c:
                        args = {"argv": ["python3", "-c", EGRESS_TASK, str(SEED + i), str(ep),
                                         str(gp), str(EGRESS_TASK_S)], "token": tok,
                                "timeout": int(EGRESS_TASK_S) + 30}
                        results.append(c.wait(c.start("exec", args), EGRESS_TASK_S + 90))
                threads.append(threading.Thread(target=run))
            for t in threads[:2]:
                t.start()
            for t in threads[:2]:
                t.join(EGRESS_TASK_S + 150)
            for t in threads[2:]:
                t.start()
            for t in threads[2:]:
                t.join(EGRESS_TASK_S + 150)
            self.assertIsNone(d.proc.poll(), "sbxd died (seed %d)" % SEED)
            self.assertEqual(len(results), 4, results)
            for res in results:
                self.assertEqual((res["status"], res["exit_code"]), ("exited", 0), res)
            print("egress fuzz: seed %d, proxy denials %s" % (
                SEED, [r["egress"]["denials"] for r in results]), file=sys.stderr)
            # The proxy still serves a plain request.
            with d.client() as c:
                args = {"argv": ["python3", "-c", "import urllib.request as u; print(u.urlopen("
                                 "'http://good/v1/x', timeout=10).read().decode())"],
                        "token": token()}
                out = []
                res = c.wait(c.start("exec", args, lambda m, rest: out.append(rest[0])
                                     if m == "exec.stdout" else None), 60)
            self.assertEqual((res["status"], b"".join(out)), ("exited", b"ok\n"), res)
            with sbx_client.Client(d.admin) as a:
                self.assertTrue(a.call("audit.verify")["ok"])
        finally:
            d.stop()
            for srv in (evil, good):
                srv.shutdown()
                srv.server_close()


if __name__ == "__main__":
    unittest.main()
