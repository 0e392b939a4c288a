# SPDX-License-Identifier: MIT
"""Sessions (docs/PROTOCOL.md, "Sessions") against a real sbxd: files in /work and /tmp
persist across a session's commands and are seen by no other session nor a one-shot task;
a command's processes (a daemonized one too) are gone before the next starts; the TTL
kills a running command (status timeout), the idle timeout ends an idle session, a revoked
token ends its session mid-command (token_revoked), session.close cancels a running one;
another uid and another token are denied, a second concurrent command is busy; the global
and per-pool limits refuse; after kill -9 of sbxd its sessions' sandboxes are gone and a
restarted sbxd records them abandoned; audit.query {session} and the metrics."""
import json
import os
import re
import signal
import sqlite3
import time
import unittest
import urllib.request

import sbx_client
from harness import Daemon, DaemonTest, pool_yaml, sandbox_processes
from test_forkserver import children_of, exe_of
from test_metrics import free_port
from test_reaper import restart, wait_until



def call(c, method, params, timeout=60):
    return c.call(method, params, timeout=timeout)


def run(c, sid, argv, timeout=None, wait=60, **extra):
    """A command in session sid, its output captured: the result."""
    args = dict({"session": sid, "argv": list(argv), "capture": True}, **extra)
    if timeout is not None:
        args["timeout"] = timeout
    return c.wait(c.start("exec", args), wait)


def error_code(fn):
    try:
        fn()
    except sbx_client.RpcError as e:
        return e.code
    return None


def trail(d, sql, args=()):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.state, "audit.db"), uri=True,
                         timeout=10)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def close_reason(d, sid):
    rows = trail(d, "SELECT json_extract(fields, '$.reason') FROM events WHERE task = ? AND "
                    "type = 'session.close'", (sid,))
    return rows[0][0] if rows else None


def wait_closed(d, sid, timeout=30):
    return wait_until(lambda: close_reason(d, sid), timeout, "session.close of " + sid)


class Sessions(DaemonTest):
    port = free_port()
    config_extra = "metrics: 127.0.0.1:%d\n" % port
    pools = [pool_yaml("python", warm=2, max=8, timeout="20s")]

    def setUp(self):
        self.c = self.d.client()

    def tearDown(self):
        self.c.close()

    def open(self, **params):
        s = call(self.c, "session.open", params)
        self.assertRegex(s["session"], r"^s-[0-9a-f]{32}$")
        return s["session"]

    def test_files_persist_across_commands_and_through_the_file_methods(self):
        sid = self.open()
        r = run(self.c, sid, ["sh", "-c", "echo one > /work/a.txt; mkdir -p /work/d; "
                                          "echo tmp > /tmp/t.txt; echo ok"])
        self.assertEqual((r["status"], r["stdout"]), ("exited", b"ok\n"))
        r = run(self.c, sid, ["sh", "-c", "cat /work/a.txt /tmp/t.txt; pwd"])
        self.assertEqual(r["stdout"], b"one\ntmp\n/work\n")
        # session.write / read / list between commands
        blob = bytes(range(256)) * 64
        self.assertEqual(call(self.c, "session.write",
                              {"session": sid, "path": "d/blob.bin", "data": blob,
                               "mode": 0o600})["size"], len(blob))
        self.assertEqual(call(self.c, "session.write",
                              {"session": sid, "path": "/work/d/blob.bin", "data": b"XY",
                               "offset": 10})["size"], len(blob))
        want = blob[:10] + b"XY" + blob[12:]
        got = call(self.c, "session.read", {"session": sid, "path": "d/blob.bin",
                                             "offset": 0, "length": 1000})
        self.assertEqual((got["data"], got["size"], got["eof"]), (want[:1000], len(blob), False))
        got = call(self.c, "session.read", {"session": sid, "path": "d/blob.bin",
                                             "offset": 1000})
        self.assertEqual((got["data"], got["eof"]), (want[1000:], True))
        r = run(self.c, sid, ["sh", "-c", "stat -c '%a %U %s' /work/d/blob.bin"])
        self.assertEqual(r["stdout"], b"600 sandbox %d\n" % len(blob))
        entries = call(self.c, "session.list", {"session": sid})["entries"]
        self.assertEqual([(e["name"], e["type"]) for e in entries],
                         [("a.txt", "file"), ("d", "dir")])
        entries = call(self.c, "session.list", {"session": sid, "path": "d"})["entries"]
        self.assertEqual([(e["name"], e["size"], e["mode"]) for e in entries],
                         [("blob.bin", len(blob), 0o600)])
        # refused paths and missing files
        for bad in ("../etc/passwd", "/etc/passwd", "/work", "a/../../x"):
            self.assertEqual(error_code(lambda: call(self.c, "session.read",
                                                     {"session": sid, "path": bad})),
                             "bad_request", bad)
        self.assertEqual(error_code(lambda: call(self.c, "session.read",
                                                 {"session": sid, "path": "nope"})),
                         "not_found")
        self.assertEqual(error_code(lambda: call(self.c, "session.write",
                                                 {"session": sid, "path": "x", "data": b"",
                                                  "mode": 0o4755})), "bad_request")
        # the caller's sessions, and its close
        mine = [s["session"] for s in call(self.c, "session.list", {})["sessions"]]
        self.assertIn(sid, mine)
        closed = call(self.c, "session.close", {"session": sid})
        self.assertEqual((closed["session"], closed["reason"], closed["commands"]),
                         (sid, "closed", 3))
        self.assertEqual(error_code(lambda: run(self.c, sid, ["true"])), "not_found")
        self.assertEqual(wait_closed(self.d, sid), "closed")

    def test_open_with_files_and_a_command_with_files_and_collect(self):
        sid = call(self.c, "session.open", {"files": [
            {"path": "in/data.bin", "data": b"\x00\xffbinary", "mode": 0o600},
            {"path": "/work/run.sh", "data": "echo run\n", "mode": 0o755}]})["session"]
        r = run(self.c, sid, ["sh", "-c", "stat -c '%a %s %n' in/data.bin run.sh; sh run.sh"])
        self.assertEqual(r["stdout"], b"600 8 in/data.bin\n755 9 run.sh\nrun\n")
        r = run(self.c, sid, ["sh", "-c", "cat more.txt > out.txt; echo x >> out.txt"],
                files=[{"path": "more.txt", "data": b"more\n"}], collect=["*.txt"])
        self.assertEqual(r["status"], "exited")
        got = {f["path"]: f["data"] for f in r["files"]}
        self.assertEqual(got, {"more.txt": b"more\n", "out.txt": b"more\nx\n"})
        # and they stay for the next command
        self.assertEqual(run(self.c, sid, ["cat", "out.txt"])["stdout"], b"more\nx\n")
        # refused before anything: a bad path, a streamed file, another pool
        for files in ([{"path": "../x", "data": b""}], [{"path": "x", "size": 3}]):
            self.assertEqual(error_code(lambda: call(self.c, "session.open", {"files": files})),
                             "bad_request")
        self.assertEqual(error_code(lambda: run(self.c, sid, ["true"], pool="nope")),
                         "bad_request")
        closed = call(self.c, "session.close", {"session": sid})
        self.assertEqual(closed["commands"], 3)
        (fields,), = trail(self.d, "SELECT fields FROM events WHERE task = ? AND "
                                   "type = 'session.close'", (sid,))
        fields = json.loads(fields)
        # its own (the open's 8 + 9) and its commands' (5 in, 5 + 7 collected)
        self.assertEqual((fields["files_in_bytes"], fields["files_out_bytes"]), (22, 12))

    def test_nothing_of_a_session_is_seen_elsewhere(self):
        a, b = self.open(), self.open()
        run(self.c, a, ["sh", "-c", "echo secret > /work/s.txt; echo secret > /tmp/s.txt"])
        r = run(self.c, b, ["sh", "-c", "ls -A /work /tmp; cat /work/s.txt /tmp/s.txt"])
        self.assertNotIn(b"secret", r["stdout"])
        self.assertNotEqual(r["exit_code"], 0)
        res, out, _ = self.c.exec(["sh", "-c", "ls -A /work /tmp; cat /work/s.txt"])
        self.assertNotIn(b"secret", out)
        self.assertNotEqual(res["exit_code"], 0)
        self.assertEqual(error_code(lambda: call(self.c, "session.read",
                                                 {"session": b, "path": "s.txt"})), "not_found")
        for sid in (a, b):
            call(self.c, "session.close", {"session": sid})

    def test_a_daemonized_child_is_gone_before_the_next_command(self):
        sid = self.open()
        r = run(self.c, sid, ["sh", "-c", "setsid sh -c 'while :; do sleep 1; done' "
                                          "</dev/null >/dev/null 2>&1 & echo started"])
        self.assertEqual(r["stdout"], b"started\n")
        r = run(self.c, sid, ["sh", "-c", "for p in /proc/[0-9]*; do "
                                          "tr '\\0' ' ' < $p/cmdline; echo; done"])
        procs = r["stdout"].decode()
        self.assertNotIn("while", procs)
        self.assertNotIn("sleep", procs)
        call(self.c, "session.close", {"session": sid})

    def test_the_next_commands_process_holds_nothing_of_the_last(self):
        # After a command, init clones the process that waits for the next one. It must
        # hold only its stdio (the sandbox's /dev/null), its socket to init and its own
        # seccomp listener: not the listener of the command that ended (init's, still open
        # at the clone).
        sid = self.open()
        for _ in range(2):
            self.assertEqual(run(self.c, sid, ["true"])["exit_code"], 0)
        init = [p for p in children_of(self.d.proc.pid) if exe_of(p).endswith("sbxd-init")]
        checked = 0
        for pid in init:
            for kid in children_of(pid):
                try:
                    # Its closes of init's fds come first thing, before its filter goes on:
                    # look once the filter is on.
                    deadline = time.monotonic() + 10
                    while "Seccomp:\t2" not in open("/proc/%d/status" % kid).read():
                        self.assertLess(time.monotonic(), deadline, kid)
                        time.sleep(0.01)
                    fd_dir = "/proc/%d/fd" % kid
                    fds = {int(n): os.readlink(os.path.join(fd_dir, n)) for n in os.listdir(fd_dir)}
                except OSError:
                    continue  # taken by a task, or gone
                # Its own listener (when the profile counts denials) goes to init and is
                # CLOEXEC: one at most.
                kinds = sorted("socket" if v.startswith("socket:") else v
                               for n, v in fds.items() if n > 2)
                self.assertIn(kinds, (["socket"], ["anon_inode:seccomp notify", "socket"]),
                              (kid, fds))
                self.assertEqual([fds[n] for n in (0, 1, 2)], ["/dev/null"] * 3, (kid, fds))
                checked += 1
        self.assertGreaterEqual(checked, 1)
        call(self.c, "session.close", {"session": sid})

    def test_ttl_kills_the_running_command(self):
        sid = self.open(ttl=1.5)
        r = run(self.c, sid, ["sleep", "30"], timeout=25)
        self.assertEqual(r["status"], "timeout")
        self.assertEqual(wait_closed(self.d, sid), "ttl")
        self.assertEqual(error_code(lambda: run(self.c, sid, ["true"])), "not_found")

    def test_idle_timeout_ends_an_idle_session(self):
        sid = self.open(ttl=60, idle_timeout=0.5)
        run(self.c, sid, ["true"])
        self.assertEqual(wait_closed(self.d, sid), "idle")
        self.assertEqual(error_code(lambda: run(self.c, sid, ["true"])), "not_found")

    def test_close_while_a_command_runs_cancels_it(self):
        sid = self.open()
        started = []
        msgid = self.c.start("exec", {"session": sid, "argv": ["sleep", "30"]},
                             lambda m, rest: started.append(m) if m == "exec.started" else None)
        c2 = self.d.client()
        try:
            wait_until(lambda: call(c2, "session.list", {})["sessions"] and
                       [s for s in call(c2, "session.list", {})["sessions"]
                        if s["session"] == sid and s["busy"]], what="the busy session")
            # a second command at once: busy
            self.assertEqual(error_code(lambda: run(c2, sid, ["true"])), "busy")
            closed = call(c2, "session.close", {"session": sid})
            self.assertEqual(closed["reason"], "closed")
        finally:
            c2.close()
        r = self.c.wait(msgid, 30)
        self.assertEqual(r["status"], "cancelled")
        self.assertEqual(wait_closed(self.d, sid), "closed")

    def test_another_uid_is_denied(self):
        sid = self.open()
        os.chmod(self.d.dir, 0o711)
        os.chmod(self.d.sock, 0o666)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                codes = []
                with sbx_client.Client(self.d.sock) as c:
                    codes.append(error_code(lambda: run(c, sid, ["true"])))
                    codes.append(error_code(lambda: call(c, "session.read",
                                                         {"session": sid, "path": "x"})))
                    codes.append(error_code(lambda: call(c, "session.close",
                                                         {"session": sid})))
                    codes.append(len(call(c, "session.list", {})["sessions"]))
                os.write(w, json.dumps(codes).encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            codes = json.loads(f.read() or "null")
        os.waitpid(pid, 0)
        os.chmod(self.d.sock, 0o660)
        os.chmod(self.d.dir, 0o700)
        self.assertEqual(codes, ["denied", "denied", "denied", 0])
        # still the owner's, untouched
        self.assertEqual(run(self.c, sid, ["echo", "mine"])["stdout"], b"mine\n")
        call(self.c, "session.close", {"session": sid})
        # the refusals are in the trail
        rows = trail(self.d, "SELECT count(*) FROM events WHERE type = 'task.result' AND "
                             "json_extract(fields, '$.code') = 'denied'")
        self.assertGreaterEqual(rows[0][0], 1)

    def test_audit_query_session_and_the_metrics(self):
        sid = self.open()
        tasks = [run(self.c, sid, ["echo", str(i)])["task"] for i in range(3)]
        call(self.c, "session.close", {"session": sid})
        with sbx_client.Client(self.d.admin) as a:
            q = a.call("audit.query", [{"session": sid}][0], timeout=30)
        chains = q["chains"]
        self.assertEqual(chains[0]["task"], sid)
        self.assertEqual([e["type"] for e in chains[0]["events"]],
                         ["session.open", "session.close"])
        opened = chains[0]["events"][0]["fields"]
        self.assertEqual((opened["session"], opened["pool"], opened["peer_uid"]),
                         (sid, "python", os.getuid()))
        self.assertEqual(chains[0]["events"][1]["fields"]["commands"], 3)
        self.assertEqual([ch["task"] for ch in chains[1:]], tasks)
        for ch in chains[1:]:
            req = ch["events"][0]
            self.assertEqual((req["type"], req["fields"]["session"]), ("task.request", sid))
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port,
                                      timeout=10).read().decode()
        m = re.search(r'^sbx_sessions_total\{pool="python",reason="closed"\} (\d+)', text, re.M)
        self.assertIsNotNone(m, text[:2000])
        self.assertGreaterEqual(int(m.group(1)), 1)
        self.assertRegex(text, r'(?m)^sbx_sessions_open\{pool="python"\} \d+')
        self.assertRegex(text, r'(?m)^sbx_session_commands_count\{pool="python"\} [1-9]')
        self.assertRegex(text, r'(?m)^sbx_session_lifetime_seconds_count\{pool="python"\} [1-9]')


class Tokens(DaemonTest):
    pools = [pool_yaml("python", warm=2, max=8)]

    def issue(self, a):
        return a.call("token.issue", {"ttl": 600}, timeout=30)

    def test_token_revoked_mid_command_ends_the_session_and_another_token_is_denied(self):
        with sbx_client.Client(self.d.admin) as a, self.d.client() as c:
            t1, t2 = self.issue(a), self.issue(a)
            sid = call(c, "session.open", {"token": t1["token"]})["session"]
            self.assertEqual(error_code(lambda: run(c, sid, ["true"], token=t2["token"])),
                             "denied")
            self.assertEqual(run(c, sid, ["echo", "ok"], token=t1["token"])["stdout"], b"ok\n")
            started = []
            msgid = c.start("exec", {"session": sid, "argv": ["sleep", "30"]},
                            lambda m, rest: started.append(m))
            while "exec.started" not in started:
                with c.io_lock:
                    c._pump()
            a.call("token.revoke", {"id": t1["info"]["id"]}, timeout=30)
            self.assertEqual(c.wait(msgid, 30)["status"], "token_revoked")
            self.assertEqual(wait_closed(self.d, sid), "token_revoked")
            self.assertEqual(error_code(lambda: run(c, sid, ["true"])), "not_found")


    def test_token_expiry_ends_the_session(self):
        with sbx_client.Client(self.d.admin) as a, self.d.client() as c:
            t = a.call("token.issue", {"ttl": 2}, timeout=30)
            sid = call(c, "session.open", {"token": t["token"]})["session"]
            self.assertEqual(run(c, sid, ["echo", "ok"])["stdout"], b"ok\n")
            self.assertEqual(wait_closed(self.d, sid), "token_expired")
            self.assertEqual(error_code(lambda: run(c, sid, ["true"])), "not_found")


class Limits(unittest.TestCase):
    def test_the_pools_and_the_global_limit_refuse(self):
        d = Daemon(pools=[pool_yaml("python", warm=1, max=4, extra="max_sessions: 1\n"),
                          pool_yaml("other", warm=1, max=4)],
                   config_extra="limits:\n  max_sessions: 2\n")
        try:
            with d.client() as c:
                s1 = call(c, "session.open", {})["session"]
                self.assertEqual(error_code(lambda: call(c, "session.open", {})), "limit")
                s2 = call(c, "session.open", {"pool": "other"})["session"]
                self.assertEqual(error_code(lambda: call(c, "session.open", {"pool": "other"})),
                                 "limit")
                # one-shot tasks still run beside them
                self.assertEqual(c.exec(["echo", "x"])[1], b"x\n")
                call(c, "session.close", {"session": s1})
                s3 = call(c, "session.open", {})["session"]
                for sid in (s2, s3):
                    call(c, "session.close", {"session": sid})
            refused = trail(d, "SELECT count(*) FROM events WHERE type = 'rpc.refused' AND "
                               "json_extract(fields, '$.code') = 'limit'")
            self.assertEqual(refused[0][0], 2)
        finally:
            d.stop()

    def test_max_sessions_must_be_below_max(self):
        with self.assertRaises(RuntimeError) as cm:
            Daemon(pools=[pool_yaml("python", warm=1, max=2, extra="max_sessions: 2\n")])
        self.assertIn("'max_sessions' (2) must be below 'max' (2)", str(cm.exception))


class KillNine(unittest.TestCase):
    def test_kill9_leaves_nothing_and_the_restart_records_abandoned(self):
        d = Daemon(pools=[pool_yaml("python", warm=2, max=8)])
        try:
            with d.client() as c:
                idle = call(c, "session.open", {})["session"]
                busy = call(c, "session.open", {})["session"]
                run(c, idle, ["sh", "-c", "echo x > /work/x"])
                started = []
                c.start("exec", {"session": busy, "argv": ["sh", "-c", "setsid sleep 300 "
                                                           "</dev/null >/dev/null 2>&1 & "
                                                           "sleep 300"]},
                        lambda m, rest: started.append(m))
                while "exec.started" not in started:
                    with c.io_lock:
                        c._pump()
                wait_until(lambda: len(sandbox_processes(d.subtree)) >= 4,
                           what="the sessions' processes")
                # Each session.open was answered once committed: no wait needed.
                d.proc.send_signal(signal.SIGKILL)
                d.proc.wait()
            # Every sandbox's init dies with its control socket: nothing of the sessions
            # runs, even before a restart.
            wait_until(lambda: not sandbox_processes(d.subtree), 15, "the sessions' processes")
            restart(d)
            self.assertEqual(close_reason(d, idle), "abandoned")
            self.assertEqual(close_reason(d, busy), "abandoned")
            (start,), = trail(d, "SELECT fields FROM events WHERE type = 'daemon.start' "
                                 "ORDER BY id DESC LIMIT 1")
            self.assertEqual(json.loads(start)["abandoned_sessions"], 2)
            (fields,), = trail(d, "SELECT fields FROM events WHERE task = ? AND "
                                  "type = 'session.close'", (idle,))
            self.assertEqual(json.loads(fields)["commands"], 1)
            with d.client() as c:
                self.assertEqual(error_code(lambda: run(c, idle, ["true"])), "not_found")
                sid = call(c, "session.open", {})["session"]
                self.assertEqual(run(c, sid, ["echo", "again"])["stdout"], b"again\n")
        finally:
            d.stop()
        # left open at SIGTERM: the drain ended it
        self.assertEqual(close_reason(d, sid), "shutdown")


if __name__ == "__main__":
    unittest.main()
