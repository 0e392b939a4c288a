# SPDX-License-Identifier: MIT
"""Random traffic on both sockets (seeded, so a failure replays): valid and broken execs,
stdin for tasks that do or do not exist, wrong shapes and types, random msgpack, raw bytes,
truncated messages, connections dropped mid-task. Meanwhile a well-behaved client runs
tasks and must get exactly its output every time. Afterwards sbxd is alive with nothing
running, queued or dying and no failed creation; at exit (SIGTERM, code 0) nothing is left
(the harness checks processes, cgroups and sockets), the audit trail verifies, and every
task it recorded has its result: bad input never crashes sbxd, loses a record or leaks a
sandbox."""
import os
import random
import shutil
import socket
import sqlite3
import sys
import tempfile
import threading
import time
import unittest

import msgpack

from harness import Daemon, pool_yaml, TOP
import sbx_client

SEED = int(os.environ.get("SBX_FUZZ_SEED", "20261130"))
SECONDS = float(os.environ.get("SBX_FUZZ_SECONDS", "20"))
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
            end = time.time() + SECONDS
            while time.time() < end:
                frames += fz.session(d.sock if fz.r.random() < 0.8 else d.admin)
                conns += 1
                self.assertIsNone(d.proc.poll(), "sbxd died (seed %d)" % SEED)
        finally:
            stop.set()
            t.join(120)
        try:
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
            agents = [threading.Thread(target=agent) for _ in range(3)]
            for t in agents:
                t.start()
            time.sleep(SECONDS / 4)
            fds_early = fds()
            time.sleep(SECONDS * 3 / 4)
            stop.set()
            for t in agents:
                t.join(120)
            self.assertIsNone(d.proc.poll(), "sbxd died (seed %d)" % SEED)
            with d.client() as c:
                p = c.call("pools")[0]
            print("hostile init: seed %d, outcomes %s, created %d, failed %d, fds %d then %d"
                  % (SEED, outcomes, p["created"], p["failed"], fds_early, fds()), file=sys.stderr)
            self.assertGreater(sum(outcomes.values()), 10, outcomes)
            self.assertEqual([k for k in outcomes if k.startswith("broken")], [], outcomes)
            self.assertGreater(p["failed"], 10, p)
            # Creation goes on at its backoff's pace; descriptors do not pile up with it.
            self.assertLess(fds(), fds_early + 40)
            with sbx_client.Client(d.admin) as a:
                self.assertTrue(a.call("audit.verify")["ok"])
        finally:
            stop.set()
            d.stop()
            shutil.rmtree(tmp, ignore_errors=True)
        for task, types in trail(d):
            if "task.request" in types.split(","):
                self.assertIn("task.result", types.split(","), (task, types))


if __name__ == "__main__":
    unittest.main()
