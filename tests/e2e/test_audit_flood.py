# SPDX-License-Identifier: MIT
"""The hostile tester's floods (issue 29), run while a victim task's chain is in the trail:
one connection to the agents' socket knocking with refused execs, clients reconnecting to
do the same, and a task with a network profile hammering the egress proxy with denied
requests. None of them may make the trail or the log lose or hide another task's records,
or grow faster than the budgets allow: the victim's chain stays (`sbx audit --task`),
`sbx audit verify` passes, what was over a budget is in summaries with the right counts,
and over max_rows and max_bytes the refused requests' rows go first and the file stays
under its byte bound. Small limits keep it quick; nothing here is timed."""
import json
import os
import re
import socket
import sqlite3
import subprocess
import tempfile
import threading
import unittest

import msgpack

from harness import SBX, Daemon, pool_yaml
import sbx_client


def query(d, sql, args=()):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.state, "audit.db"), uri=True,
                         timeout=10)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def admin(d, *args):
    r = subprocess.run([SBX, "--admin-socket", d.admin] + list(args), capture_output=True,
                       timeout=120)
    return r


def verify(d):
    r = admin(d, "audit", "verify", "--json")
    return json.loads(r.stdout), r.returncode


def task_events(d, task):
    """The victim's chain as `sbx audit --task ID --json` shows it."""
    r = admin(d, "audit", "--task", task, "--json")
    if r.returncode != 0:
        return []
    lines = [json.loads(l) for l in r.stdout.decode().splitlines() if l.strip()]
    return [e["type"] for c in lines for e in c["events"]]


def refused_flood(path, n, args=None):
    """Sends n execs for pool "x" (refused: unknown_pool) on one connection, pipelined,
    and reads every answer. Returns the error codes seen."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    s.connect(path)
    req = args or {"argv": ["true"], "pool": "x"}
    codes = []

    def reader():
        u = msgpack.Unpacker(raw=False)
        while len(codes) < n:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            u.feed(chunk)
            for m in u:
                if m[0] == 1:
                    codes.append(m[2]["code"] if m[2] else None)

    t = threading.Thread(target=reader)
    t.start()
    p = msgpack.Packer(use_bin_type=True)
    batch = []
    for i in range(n):
        batch.append(p.pack([0, i + 1, "exec", [req]]))
        if len(batch) == 256 or i == n - 1:
            s.sendall(b"".join(batch))
            batch = []
    t.join(120)
    s.close()
    return codes


def summaries(d, type_):
    return [json.loads(f) for (f,) in
            query(d, "SELECT fields FROM events WHERE type = ? ORDER BY id", (type_,))]


def wait_for(pred, what, tries=3000):
    import time
    for _ in range(tries):
        v = pred()
        if v:
            return v
        time.sleep(0.01)
    raise AssertionError("never happened: " + what)


BUDGETS = """audit:
  max_rows: 1000
  max_bytes: 1MiB
  refusals_per_connection: 10
  refusals_per_peer: 25
  denials_per_task: 10
  budget_window: 720h
  summary_interval: 200ms
"""


class AgentsSocketFlood(unittest.TestCase):
    """One connection floods refused execs; then 200 clients reconnect and do the same."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(pools=[pool_yaml("python", warm=1, max=4)], config_extra=BUDGETS)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_flood_keeps_the_victim_and_is_summarized(self):
        d = self.d
        with d.client() as c:
            res, _, _ = c.exec(["true"])
        victim = res["task"]
        self.assertEqual(task_events(d, victim)[-1], "task.result")
        n = 6000
        codes = refused_flood(d.sock, n)
        self.assertEqual(len(codes), n)
        self.assertEqual(set(codes), {"unknown_pool"})
        # Reconnecting is the same peer (uid): its budget is not renewed per connection.
        for _ in range(200):
            self.assertEqual(refused_flood(d.sock, 5), ["unknown_pool"] * 5)
        total = n + 200 * 5
        # 10 from the first connection (its own budget), 15 more from the next ones (the
        # peer's budget of 25), one by one; the rest counted in the peer's summaries.
        counted = total - 25
        got = wait_for(lambda: (sum(s["count"] for s in summaries(d, "rpc.refused.summary"))
                                == counted) or None, "summaries of %d refusals" % counted)
        self.assertTrue(got)
        sums = summaries(d, "rpc.refused.summary")
        for s in sums:
            self.assertEqual(s["socket"], "agents")
            self.assertEqual(s["peer_uid"], os.getuid())
            self.assertEqual(set(s["by"]), {"unknown_pool"})
            self.assertEqual(s["by"]["unknown_pool"], s["count"])
            self.assertGreaterEqual(s["last_ns"], s["first_ns"])
        self.assertGreaterEqual(sum(s["connections"] for s in sums), 190)
        denied = query(d, "SELECT count(*) FROM events WHERE type = 'task.result' AND "
                          "json_extract(fields, '$.status') = 'denied'")[0][0]
        self.assertEqual(denied, 25)
        # Each refused chain's rows are marked as a refusal's (pruned first).
        self.assertEqual(query(d, "SELECT count(*) FROM events WHERE refusal = 1 AND "
                                  "type = 'task.request'")[0][0], 25)
        # The flood is visible.
        self.assertIn('level=warn mod=audit type=rpc.refused.summary socket=agents uid=%d'
                      % os.getuid(), d.logtext())
        self.assertEqual(task_events(d, victim), [
            "task.request", "policy.decision", "sandbox.assigned", "task.started",
            "task.finished", "sandbox.destroyed", "task.result"])
        v, rc = verify(d)
        self.assertEqual(rc, 0, v)
        self.assertTrue(v["ok"], v)
        rows = query(d, "SELECT count(*) FROM events")[0][0]
        self.assertLess(rows, 1000)


class FullPoolFlood(unittest.TestCase):
    """A client fills a pool with its own tasks (one running, one queued), then knocks with
    valid execs that the full pool refuses: those refusals are budgeted like any other."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(pools=[pool_yaml("python", warm=1, max=1, queue=1, timeout="60s")],
                       config_extra=BUDGETS)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_busy_refusals_are_budgeted(self):
        d = self.d
        with d.client() as c:
            victim, _, _ = c.exec(["true"])
        with sbx_client.Client(d.sock) as c:
            running = threading.Event()
            hold = c.exec_start(["sleep", "30"], on_started=lambda x: running.set())[0]
            while not running.is_set():
                try:
                    c.wait(hold, timeout=0.05)
                except TimeoutError:
                    pass
            c.start("exec", {"argv": ["true"]})  # the queue's one place
            n = 2000
            codes = refused_flood(d.sock, n, {"argv": ["true"], "pool": "python"})
            self.assertEqual(codes, ["busy"] * n)
            # 10 one by one (the connection's budget), the rest in the peer's summaries.
            got = wait_for(lambda: (sum(s["count"] for s in summaries(d, "rpc.refused.summary"))
                                    == n - 10) or None, "summaries of %d busy refusals" % (n - 10))
            self.assertTrue(got)
            self.assertEqual(query(d, "SELECT count(*) FROM events WHERE type = 'task.result' AND "
                                      "json_extract(fields, '$.code') = 'busy'")[0][0], 10)
        self.assertEqual(len(task_events(d, victim["task"])), 7)
        v, rc = verify(d)
        self.assertEqual(rc, 0, v)


class RefusalsPrunedFirst(unittest.TestCase):
    """With budgets too large to hold anything back, a flood of refused execs with large
    argv takes the trail over max_rows and max_bytes: refused requests' rows are pruned,
    with recorded gaps, the victims' chains (before and inside the flood) stay, verify
    passes, and the file stays under max_bytes."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(pools=[pool_yaml("python", warm=1, max=4)], config_extra="""audit:
  max_rows: 1000
  max_bytes: 1MiB
  refusals_per_connection: 1000000
  refusals_per_peer: 1000000
""")

    @classmethod
    def tearDownClass(cls):
        if cls.d.proc.poll() is None:
            cls.d.stop()

    def test_refusals_go_first_and_the_file_is_bounded(self):
        d = self.d
        with d.client() as c:
            first, _, _ = c.exec(["true"])
        big = {"argv": ["true"] + ["a%03d-" % i + "b" * 3000 for i in range(12)], "pool": "x"}
        self.assertEqual(len(refused_flood(d.sock, 600, big)), 600)
        with d.client() as c:
            middle, _, _ = c.exec(["true"])
        self.assertEqual(len(refused_flood(d.sock, 600, big)), 600)
        self.assertEqual(len(refused_flood(d.sock, 1500)), 1500)
        # Pruning runs after the batches that went over the limits.
        wait_for(lambda: query(d, "SELECT count(*) FROM events")[0][0] <= 1000 or None,
                 "pruning under max_rows")
        pruned = summaries(d, "audit.pruned")
        self.assertTrue(pruned)
        self.assertTrue(all(p["reason"] == "refusals" for p in pruned), pruned)
        self.assertTrue(any(p.get("gaps") for p in pruned), pruned)
        for t in (first["task"], middle["task"]):
            self.assertEqual(len(task_events(d, t)), 7, t)
        v, rc = verify(d)
        self.assertEqual(rc, 0, v)
        d.stop()
        size = os.path.getsize(os.path.join(d.state, "audit.db"))
        self.assertLessEqual(size, 1 << 20)


PROXY_FLOOD = r'''
import socket
n = 0
for i in range(%d):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(b"GET http://denied.invalid/x HTTP/1.1\r\nHost: denied.invalid\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    s.close()
    n += data.startswith(b"HTTP/1.1 403")
print(n)
'''


class ProxyFlood(unittest.TestCase):
    """A task with a network profile hammers the egress proxy with denied requests."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-flood-")
        cls.d = Daemon(pools=[pool_yaml("python", warm=1, max=4, timeout="60s")],
                       config_extra=BUDGETS + """egress:
  profiles:
    full:
      allow: ["localhost:9"]
      allow_addresses: ["127.0.0.1/32"]
""")

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_denials_over_budget_are_summarized(self):
        d = self.d
        with d.client() as c:
            victim, _, _ = c.exec(["true"])
        r = admin(d, "token", "issue", "--net", "full")
        self.assertEqual(r.returncode, 0, r.stderr)
        tok = r.stdout.decode().strip()
        n = 1500
        with sbx_client.Client(d.sock) as c:
            out = []
            msgid = c.start("exec", {"argv": ["python3", "-c", PROXY_FLOOD % n], "token": tok},
                            lambda m, rest: out.append(rest[0]) if m == "exec.stdout" else None)
            res = c.wait(msgid, 120)
        self.assertEqual(res["status"], "exited", res)
        self.assertEqual(b"".join(out).strip(), str(n).encode())
        self.assertEqual(res["egress"]["denials"], n)
        self.assertTrue(res["egress"]["flagged"])
        task = res["task"]
        # The result is sent after its chain is committed, summary included.
        one_by_one = query(d, "SELECT count(*) FROM events WHERE task = ? AND "
                              "type = 'proxy.denied'", (task,))[0][0]
        self.assertEqual(one_by_one, 10)
        sums = [json.loads(f) for (f,) in query(
            d, "SELECT fields FROM events WHERE task = ? AND type = 'proxy.denied.summary'",
            (task,))]
        self.assertTrue(sums)
        self.assertEqual(sum(s["count"] for s in sums), n - 10)
        self.assertEqual(sum(s["by"].get("denied", 0) for s in sums), n - 10)
        self.assertEqual(sums[-1]["denials"], n)
        self.assertEqual(sums[-1]["profile"], "full")
        # The task's summary comes before its result in its chain.
        types = task_events(d, task)
        self.assertEqual(types[-1], "task.result")
        self.assertLess(types.index("proxy.denied.summary"), types.index("task.result"))
        # The log: one line per recorded denial, and the summaries' lines.
        log = d.logtext()
        self.assertEqual(len(re.findall(r'task=%s profile=full dest=\S+ msg="egress denied"'
                                        % task, log)), 10)
        self.assertIn("type=proxy.denied.summary task=%s profile=full suppressed=" % task, log)
        self.assertEqual(len(task_events(d, victim["task"])), 7)
        v, rc = verify(d)
        self.assertEqual(rc, 0, v)


if __name__ == "__main__":
    unittest.main()
