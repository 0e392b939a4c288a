# SPDX-License-Identifier: MIT
"""The audit trail: secrets never reach the database or the log, every task leaves its
seven-event chain in order, `sbx audit` shows chains (table and JSON lines), `sbx audit
verify` names the first altered, removed or inserted row, and 5000 tasks leave exactly
5000 complete chains."""
import base64
import json
import os
import random
import signal
import sqlite3
import string
import subprocess
import time
import unittest

from harness import BUILD, SBX, Daemon, DaemonTest, pool_yaml
import sbx_client

CHAIN = ["task.request", "policy.decision", "sandbox.assigned", "task.started",
         "task.finished", "sandbox.destroyed", "task.result"]
SBX_LOAD = os.path.join(BUILD, "sbx-load")


def db_path(d):
    return os.path.join(d.state, "audit.db")


def query(d, sql, args=()):
    """Rows from the daemon's trail, read-only (WAL readers never block sbxd)."""
    db = sqlite3.connect("file:%s?mode=ro" % db_path(d), uri=True, timeout=10)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def chain_of(d, task):
    return [(t, json.loads(f)) for t, f in
            query(d, "SELECT type, fields FROM events WHERE task = ? ORDER BY id", (task,))]


def wait_until(pred, timeout=10, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def admin(d, *args, timeout=60):
    return subprocess.run([SBX, "--admin-socket", d.admin] + list(args), capture_output=True,
                          timeout=timeout)


def sqlite_shell(d, sql):
    """Edits the trail with the sqlite3 shell, as an intruder would."""
    r = subprocess.run(["sqlite3", "-cmd", ".timeout 10000", db_path(d), sql],
                       capture_output=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError("sqlite3 %r: %s" % (sql, r.stderr.decode()))
    return r.stdout.decode()


def verify(d):
    r = admin(d, "audit", "verify", "--json")
    if r.returncode not in (0, 1):
        raise AssertionError("sbx audit verify: rc %d %r" % (r.returncode, r.stderr))
    v = json.loads(r.stdout)
    assert v["ok"] == (r.returncode == 0), v
    return v


def rand(alphabet, n):
    rng = random.SystemRandom()
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Secrets(unittest.TestCase):
    """Tasks whose argv, env and output carry JWTs and tokens leave none of them in the
    database files (db, -wal, -shm) or in the daemon's log, even at debug level."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(log_level="debug")

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_no_secret_in_database_or_log(self):
        d = self.d
        jwt = "%s.%s.%s" % (b64url(b'{"alg":"HS256","typ":"JWT"}'),
                            b64url(json.dumps({"sub": rand(string.digits, 10),
                                               "name": "agent"}).encode()),
                            rand(string.ascii_letters + string.digits + "-_", 43))
        token = "sk-live-" + rand(string.ascii_letters + string.digits, 32)
        password = "hunter2-" + rand(string.ascii_lowercase, 12)
        aws_id = "AKIA" + rand(string.ascii_uppercase + string.digits, 16)
        aws_secret = "A1b" + rand(string.ascii_letters + string.digits + "+/", 37)
        hextok = rand("0123456789abcdef", 64)
        session = rand(string.ascii_letters, 20)
        secrets = [jwt, jwt.split(".")[1], jwt.split(".")[2], token, token[8:], password,
                   aws_id, aws_secret, hextok, session]
        c = d.client()
        try:
            # env values, argv and output all carry secrets
            res, out, _ = c.exec(
                ["sh", "-c", 'echo "$API_TOKEN $SESSION_COOKIE"; echo "$1"; echo "$0"',
                 "Authorization: Bearer " + jwt, "--token=" + token],
                env={"API_TOKEN": token, "SESSION_COOKIE": session, "DB_PASSWORD": password})
            self.assertEqual(res["status"], "exited")
            self.assertIn(token.encode(), out)
            self.assertIn(jwt.encode(), out)
            task1 = res["task"]
            res, _, _ = c.exec(["true", "--password", password, "-H",
                                "authorization: bearer " + jwt, "AWS_ACCESS_KEY_ID=" + aws_id,
                                "s3cmd", aws_secret, "--sig", hextok, jwt,
                                "https://user:%s@example.com/x" % password])
            self.assertEqual(res["status"], "exited")
            task2 = res["task"]
            # a denied request carries them too
            with self.assertRaises(sbx_client.RpcError):
                c.exec(["echo", "Bearer " + token, jwt], pool="no-such-pool",
                       env={"GITHUB_TOKEN": token})
        finally:
            c.close()
        # Denials are written within milliseconds, not waited for: wait for the row.
        wait_until(lambda: query(d, "SELECT 1 FROM events WHERE type = 'task.result' AND "
                                    "fields LIKE '%\"denied\"%'"), what="the denial's chain")
        # Names, plain words and the structure stay readable.
        req = dict(chain_of(d, task1))["task.request"]
        self.assertEqual(sorted(req["env"]), ["API_TOKEN", "DB_PASSWORD", "SESSION_COOKIE"])
        self.assertEqual(req["argv"][3], "Authorization: Bearer [REDACTED]")
        self.assertEqual(req["argv"][4], "--token=[REDACTED]")
        req2 = dict(chain_of(d, task2))["task.request"]
        self.assertEqual(req2["argv"][:2], ["true", "--password"])
        self.assertEqual(req2["argv"][2], "[REDACTED]")
        self.assertIn("s3cmd", req2["argv"])
        self.assertEqual(req2["argv"][-1], "https://user:[REDACTED]@example.com/x")
        files = [db_path(d) + s for s in ("", "-wal", "-shm")]
        blobs = {f: open(f, "rb").read() for f in files if os.path.exists(f)}
        self.assertIn(db_path(d), blobs)
        self.assertTrue(any(b"API_TOKEN" in b for b in blobs.values()))
        blobs["log"] = d.logtext().encode()
        for name, blob in blobs.items():
            for s in secrets:
                self.assertNotIn(s.encode(), blob, "a secret is in %s" % name)


class Chains(DaemonTest):
    """Every task's chain, its fields, and `sbx audit`."""

    def run_task(self, argv, **kw):
        with self.d.client() as c:
            res, out, err = c.exec(argv, **kw)
        return res

    def test_chain_has_seven_events_in_order(self):
        res = self.run_task(["sh", "-c", "echo out; echo err >&2; exit 3"],
                            env={"MY_VAR": "x"})
        self.assertEqual((res["status"], res["exit_code"]), ("exited", 3))
        chain = chain_of(self.d, res["task"])
        self.assertEqual([t for t, _ in chain], CHAIN)
        ev = dict(chain)
        req = ev["task.request"]
        self.assertEqual(req["peer_pid"], os.getpid())
        self.assertEqual(req["peer_uid"], os.getuid())
        self.assertEqual(req["socket"], "agents")
        self.assertEqual(req["pool"], "python")
        self.assertEqual(req["argv"], ["sh", "-c", "echo out; echo err >&2; exit 3"])
        self.assertEqual(req["env"], ["MY_VAR"])
        self.assertIsNone(req["token_id"])
        self.assertTrue(ev["policy.decision"]["allowed"])
        self.assertEqual(ev["sandbox.assigned"]["sandbox"], res["sandbox"])
        self.assertEqual(ev["sandbox.assigned"]["warm"], not res["cold"])
        fin = ev["task.finished"]
        self.assertEqual((fin["status"], fin["exit_code"], fin["signal"]), ("exited", 3, None))
        self.assertEqual((fin["stdout_bytes"], fin["stderr_bytes"]), (4, 4))
        self.assertEqual(fin["truncated"], False)
        self.assertEqual(fin["wall_ms"], res["wall_ms"])
        self.assertEqual(ev["sandbox.destroyed"]["sandbox"], res["sandbox"])
        self.assertEqual(ev["task.result"]["status"], "exited")
        self.assertTrue(ev["task.result"]["delivered"])
        # sequence numbers grow along the chain
        seqs = [s for (s,) in query(self.d, "SELECT seq FROM events WHERE task = ? ORDER BY id",
                                    (res["task"],))]
        self.assertEqual(seqs, sorted(seqs))

    def test_timeout_and_output_limit_chains(self):
        res = self.run_task(["sleep", "30"], timeout=0.5)
        self.assertEqual(res["status"], "timeout")
        fin = dict(chain_of(self.d, res["task"]))["task.finished"]
        self.assertEqual((fin["status"], fin["killed_for"]), ("timeout", "timeout"))
        res = self.run_task(["sh", "-c", "yes"], timeout=10)
        self.assertEqual(res["status"], "output_limit")
        chain = chain_of(self.d, res["task"])
        self.assertEqual([t for t, _ in chain], CHAIN)
        self.assertTrue(dict(chain)["task.finished"]["truncated"])

    def test_denied_request_chain(self):
        with self.d.client() as c:
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.exec(["echo"], pool="nope")
            self.assertEqual(cm.exception.code, "unknown_pool")
            with self.assertRaises(sbx_client.RpcError):
                c.call("exec", {"argv": "not a list"})

        def denied():
            return query(self.d, "SELECT task FROM events WHERE type = 'task.request' AND "
                                 "json_extract(fields, '$.pool') = 'nope'")
        task = wait_until(denied, what="the denied request")[0][0]
        wait_until(lambda: len(chain_of(self.d, task)) == 3, what="the denied chain")
        chain = chain_of(self.d, task)
        self.assertEqual([t for t, _ in chain],
                         ["task.request", "policy.decision", "task.result"])
        dec, result = chain[1][1], chain[2][1]
        self.assertEqual((dec["allowed"], dec["code"]), (False, "unknown_pool"))
        self.assertIn("unknown pool 'nope'", dec["reason"])
        self.assertEqual((result["status"], result["code"]), ("denied", "unknown_pool"))

    def test_sbx_audit_task_json_and_table(self):
        res = self.run_task(["echo", "audit-me"])
        r = admin(self.d, "audit", "--task", res["task"], "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(len(lines), 1)
        ch = json.loads(lines[0])
        self.assertEqual((ch["task"], ch["pool"], ch["status"]), (res["task"], "python", "exited"))
        self.assertEqual([e["type"] for e in ch["events"]], CHAIN)
        self.assertEqual(ch["events"][0]["fields"]["argv"], ["echo", "audit-me"])
        self.assertTrue(ch["events"][0]["time"].endswith("Z"))
        self.assertEqual([e["seq"] for e in ch["events"]], sorted(e["seq"] for e in ch["events"]))
        r = admin(self.d, "audit", "--task", res["task"])
        self.assertEqual(r.returncode, 0, r.stderr)
        text = r.stdout.decode()
        self.assertIn(res["task"], text)
        self.assertIn("echo audit-me", text)
        for t in CHAIN:
            self.assertIn(t, text)
        r = admin(self.d, "audit", "--task", "0000000000000000")
        self.assertEqual(r.returncode, 1)
        # the agents' socket has no audit methods
        with self.d.client() as c:
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.call("audit.query", {})
            self.assertEqual(cm.exception.code, "unknown_method")

    def test_sbx_audit_filters_newest_first(self):
        self.run_task(["true"])
        first = self.run_task(["true"])
        second = self.run_task(["sh", "-c", "exit 1"])
        r = admin(self.d, "audit", "--pool", "python", "--since", "10m", "--limit", "2", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        chains = [json.loads(x) for x in r.stdout.decode().splitlines()]
        self.assertEqual([c["task"] for c in chains], [second["task"], first["task"]])
        self.assertIn(b"more chains match", r.stderr)
        r = admin(self.d, "audit", "--status", "exited", "--json", "--limit", "1000")
        statuses = {json.loads(x)["status"] for x in r.stdout.decode().splitlines()}
        self.assertEqual(statuses, {"exited"})
        r = admin(self.d, "audit", "--pool", "other", "--json")
        self.assertEqual(r.stdout, b"")
        r = admin(self.d, "audit", "--since", "later")
        self.assertEqual(r.returncode, 125)  # a usage error: sbx's failure (was 64)
        r = admin(self.d, "audit")
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith(b"TIME"))


class Tamper(DaemonTest):
    """sbx audit verify walks the chain and names the first row altered, removed or
    inserted with the sqlite3 shell."""

    def test_verify_names_altered_removed_and_inserted_rows(self):
        with self.d.client() as c:
            tasks = [c.exec(["echo", str(i)])[0]["task"] for i in range(3)]
        r = admin(self.d, "audit", "verify")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(b"ok:", r.stdout)
        v = verify(self.d)
        self.assertTrue(v["ok"])
        # the finished event of the middle task
        (seq, rid, fields), = query(self.d, "SELECT seq, id, fields FROM events WHERE task = ? "
                                            "AND type = 'task.finished'", (tasks[1],))
        self.assertIn('"exit_code":0', fields)

        # altered: the exit code rewritten
        sqlite_shell(self.d, "UPDATE events SET fields = replace(fields, '\"exit_code\":0', "
                             "'\"exit_code\":1') WHERE seq = %d" % seq)
        v = verify(self.d)
        self.assertEqual((v["ok"], v["problem"], v["bad_seq"], v["bad_id"]),
                         (False, "altered", seq, rid))
        r = admin(self.d, "audit", "verify")
        self.assertEqual(r.returncode, 1)
        self.assertIn(("row seq %d altered" % seq).encode(), r.stdout)
        sqlite_shell(self.d, "UPDATE events SET fields = replace(fields, '\"exit_code\":1', "
                             "'\"exit_code\":0') WHERE seq = %d" % seq)
        self.assertTrue(verify(self.d)["ok"])

        # removed: the row deleted, then put back
        row = query(self.d, "SELECT id, seq, time, type, task, fields, prev, hash FROM events "
                            "WHERE seq = ?", (seq,))[0]
        sqlite_shell(self.d, "DELETE FROM events WHERE seq = %d" % seq)
        v = verify(self.d)
        self.assertEqual((v["problem"], v["bad_seq"]), ("removed", seq))
        esc = lambda s: "NULL" if s is None else "'%s'" % str(s).replace("'", "''")  # noqa: E731
        sqlite_shell(self.d, "INSERT INTO events(id, seq, time, type, task, fields, prev, hash) "
                             "VALUES(%s)" % ", ".join(esc(x) if isinstance(x, str) or x is None
                                                      else str(x) for x in row))
        self.assertTrue(verify(self.d)["ok"])

        # inserted: a forged copy of the row, claiming another exit code
        sqlite_shell(self.d, "INSERT INTO events(seq, time, type, task, fields, prev, hash) "
                             "SELECT seq, time, type, task, replace(fields, '\"exit_code\":0', "
                             "'\"exit_code\":7'), prev, hash FROM events WHERE seq = %d" % seq)
        v = verify(self.d)
        self.assertEqual((v["problem"], v["bad_seq"]), ("inserted", seq))
        forged = v["bad_id"]
        self.assertGreater(forged, rid)
        sqlite_shell(self.d, "DELETE FROM events WHERE id = %d" % forged)
        self.assertTrue(verify(self.d)["ok"])


class Unwritable(unittest.TestCase):
    """While the trail cannot be written, results wait and new tasks are refused; when it
    can again, the waiting results go out; when the drain gives up on it, a waiting result
    is withheld (error), never sent unrecorded."""

    def hold_write_lock(self, d):
        p = subprocess.Popen(
            ["/usr/bin/python3", "-c",
             "import sqlite3, sys, time\n"
             "db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)\n"
             "db.execute('BEGIN IMMEDIATE')\n"
             "print('locked', flush=True)\n"
             "sys.stdin.read()\n", db_path(d)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.assertEqual(p.stdout.readline(), b"locked\n")
        return p

    def test_results_wait_for_the_trail(self):
        d = Daemon(config_extra="drain_grace: 1s\n")
        lock = None
        try:
            d.wait_warm()
            c = d.client()
            lock = self.hold_write_lock(d)
            msgid = c.exec_start(["echo", "waits"])[0]
            wait_until(lambda: "cannot write the audit trail" in d.logtext(), 30, "the failure")
            with self.assertRaises(TimeoutError):
                c.wait(msgid, timeout=0.5)
            with d.client() as c2:
                with self.assertRaises(sbx_client.RpcError) as cm:
                    c2.exec(["true"])
                self.assertEqual(cm.exception.code, "busy")
            lock.stdin.close()
            lock.wait()
            res = c.wait(msgid, timeout=30)
            self.assertEqual(res["status"], "exited")
            self.assertEqual([t for t, _ in chain_of(d, res["task"])], CHAIN)

            lock = self.hold_write_lock(d)
            n = d.logtext().count("cannot write the audit trail")
            msgid = c.exec_start(["echo", "withheld"])[0]
            wait_until(lambda: d.logtext().count("cannot write the audit trail") > n, 30,
                       "the second failure")
            d.proc.send_signal(signal.SIGTERM)
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.wait(msgid, timeout=30)
            self.assertEqual(cm.exception.code, "internal")
            self.assertIn("withheld", cm.exception.message)
            c.close()
        finally:
            if lock:
                lock.stdin.close()
                lock.wait()
            d.stop()
        self.assertIn("giving up on the audit trail", d.logtext())


class Load(unittest.TestCase):
    """5000 tasks through the writer thread leave exactly 5000 complete chains."""
    N = 5000

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(pools=[pool_yaml(warm=16, max=32, queue=256)],
                       config_extra="refill_parallelism: 4\n")

    @classmethod
    def tearDownClass(cls):
        cls.d.stop(timeout=60)

    @unittest.skipUnless(os.access(SBX_LOAD, os.X_OK), "build/sbx-load is not built")
    def test_5000_tasks_5000_chains(self):
        d = self.d
        d.wait_warm()
        r = subprocess.run([SBX_LOAD, "--socket", d.sock, "--tasks", str(self.N),
                            "--concurrency", "16", "--json"], capture_output=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr.decode()[-2000:])
        rep = json.loads(r.stdout)
        self.assertEqual(rep["outcomes"], {"exited": self.N})
        chains = {}
        for task, typ in query(d, "SELECT task, type FROM events WHERE task IS NOT NULL "
                                  "ORDER BY id"):
            chains.setdefault(task, []).append(typ)
        complete = [t for t, c in chains.items() if c == CHAIN]
        self.assertEqual(len(complete), self.N)
        self.assertEqual(len(chains), self.N, "tasks with incomplete chains")
        (results,), = query(d, "SELECT count(*) FROM events WHERE type = 'task.result' AND "
                               "json_extract(fields, '$.status') = 'exited'")
        self.assertEqual(results, self.N)
        self.assertTrue(verify(d)["ok"])


if __name__ == "__main__":
    unittest.main()
