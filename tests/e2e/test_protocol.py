# SPDX-License-Identifier: MIT
"""Bad input on the sockets: garbage, oversize messages, wrong types, unknown methods and
pools, bounds on connections and in-flight requests. Each gets a clear error or a closed
connection, and nothing else is disturbed."""
import json
import os
import socket
import sqlite3
import subprocess
import time
import unittest

import msgpack

from harness import DaemonTest, pool_yaml, TOP
import sbx_client


def raw(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(10)
    return s


def read_msgs(s, want=1):
    up = msgpack.Unpacker(raw=False)
    msgs = []
    while len(msgs) < want:
        data = s.recv(65536)
        if not data:
            break
        up.feed(data)
        msgs.extend(up)
    return msgs


class Protocol(DaemonTest):
    pools = [pool_yaml("python", warm=2, max=4)]
    config_extra = ("limits:\n  max_connections: 20\n  max_requests_per_connection: 4\n"
                    "  max_message_bytes: 64KiB\n  max_argv_bytes: 16KiB\n")

    def assert_daemon_fine(self):
        with self.d.client() as c:
            res, out, _ = c.exec(["echo", "still fine"])
        self.assertEqual(out, b"still fine\n")

    def test_garbage_bytes_close_the_connection_with_an_error(self):
        with self.d.client() as bystander:
            s = raw(self.d.sock)
            s.sendall(bytes([0xc1]) * 16 + os.urandom(256))
            msgs = read_msgs(s)
            self.assertEqual(msgs[0][0:2], [2, "error"])
            self.assertEqual(msgs[0][2][0]["code"], "bad_request")
            self.assertEqual(s.recv(10), b"")  # closed
            s.close()
            self.assertTrue(bystander.call("ping")["pong"])
        self.assert_daemon_fine()

    def test_oversize_message_is_refused(self):
        s = raw(self.d.sock)
        big = msgpack.packb([0, 1, "exec", [{"argv": ["echo", "x" * (100 << 10)]}]])
        try:
            s.sendall(big)
        except BrokenPipeError:
            pass
        msgs = read_msgs(s)
        self.assertEqual(msgs[0][2][0]["code"], "too_large")
        s.close()
        self.assert_daemon_fine()

    def test_a_valid_value_that_is_not_rpc_gets_bad_request(self):
        s = raw(self.d.sock)
        s.sendall(msgpack.packb([0, 7, 42, []]) + msgpack.packb({"hello": 1}) +
                  msgpack.packb([0, 8, "ping", []]))
        msgs = read_msgs(s, 2)
        self.assertEqual(msgs[0][0:2], [1, 7])
        self.assertEqual(msgs[0][2]["code"], "bad_request")
        self.assertEqual(msgs[1], [1, 8, None, msgs[1][3]])
        self.assertTrue(msgs[1][3]["pong"])
        s.close()

    def test_unknown_method(self):
        with self.d.client() as c:
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.call("rm_rf", {})
        self.assertEqual(cm.exception.code, "unknown_method")

    def test_admin_methods_are_not_on_the_agents_socket_and_vice_versa(self):
        with sbx_client.Client(self.d.admin) as a:
            self.assertTrue(a.call("ping")["pong"])
            with self.assertRaises(sbx_client.RpcError) as cm:
                a.call("exec", {"argv": ["true"]})
            self.assertEqual(cm.exception.code, "unknown_method")
        self.assertEqual(os.stat(self.d.admin).st_mode & 0o777, 0o600)

    def test_wrong_types_and_values(self):
        bad = [
            {},
            {"argv": "echo hi"},
            {"argv": []},
            {"argv": [1, 2]},
            {"argv": [""]},
            {"argv": ["echo"], "timeout": "5"},
            {"argv": ["echo"], "timeout": -1},
            {"argv": ["echo"], "timeout": float("nan")},
            {"argv": ["echo"], "env": {"A=B": "c"}},
            {"argv": ["echo"], "env": ["A"]},
            {"argv": ["echo"], "env": {"A": 1}},
            {"argv": ["echo"], "cwd": "relative"},
            {"argv": ["echo"], "stdin": "yes"},
            {"argv": ["echo\0x"]},
            {"argv": ["echo"], "surprise": True},
        ]
        with self.d.client() as c:
            for args in bad:
                with self.assertRaises(sbx_client.RpcError, msg=repr(args)) as cm:
                    c.call("exec", args)
                self.assertEqual(cm.exception.code, "bad_request", args)
                self.assertTrue(cm.exception.message)
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.call("exec", {"argv": ["true"], "pool": "nope"})
            self.assertEqual(cm.exception.code, "unknown_pool")
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.call("exec", {"argv": ["x" * 10000, "y" * 10000]})
            self.assertIn(cm.exception.code, ("too_large",))
        self.assert_daemon_fine()

    def test_empty_strings_are_values_like_any_other(self):
        # msgpack-c decodes an empty str with a NULL pointer (a crash under UBSan before).
        with self.d.client() as c:
            res, out, err = c.exec(["sh", "-c", 'printf "[%s][%s][%s]" "$1" "$A" "$#"', "sh", ""],
                                   env={"A": ""})
            self.assertEqual((res["status"], out), ("exited", b"[][][1]"), (res, err))
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.call("", {})
            self.assertEqual(cm.exception.code, "unknown_method")
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.call("exec", {"argv": ["true"], "pool": ""})
            self.assertEqual(cm.exception.code, "unknown_pool")
        self.assert_daemon_fine()

    def test_refusals_outside_exec_are_in_the_trail(self):
        # Bad input that never became an exec is audited too (rpc.refused), not only counted.
        tag = "probe%d" % time.monotonic_ns()
        s = raw(self.d.sock)
        s.sendall(bytes([0xc1]) + os.urandom(64))
        read_msgs(s)
        s.close()
        with self.d.client() as c:
            with self.assertRaises(sbx_client.RpcError):
                c.call(tag, {})
        s = raw(self.d.sock)
        try:
            s.sendall(msgpack.packb([0, 1, "exec", [{"argv": ["echo", "x" * (100 << 10)]}]]))
        except BrokenPipeError:
            pass
        read_msgs(s)
        s.close()
        db = os.path.join(self.d.state, "audit.db")
        deadline = time.time() + 10
        rows = []
        while time.time() < deadline:
            con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
            try:
                rows = [json.loads(f) for (f,) in con.execute(
                    "SELECT fields FROM events WHERE type = 'rpc.refused' ORDER BY seq")]
            finally:
                con.close()
            if any(r.get("method") == tag for r in rows) and \
                    any(r["code"] == "too_large" for r in rows):
                break
            time.sleep(0.05)
        mine = [r for r in rows if r.get("method") == tag]
        self.assertEqual(len(mine), 1, rows)
        self.assertEqual(mine[0]["code"], "unknown_method")
        self.assertEqual(mine[0]["socket"], "agents")
        self.assertEqual(mine[0]["peer_uid"], os.getuid())
        self.assertEqual(mine[0]["peer_pid"], os.getpid())
        self.assertIn(tag, mine[0]["reason"])
        codes = {r["code"] for r in rows}
        self.assertIn("bad_request", codes)
        self.assertIn("too_large", codes)

    def test_in_flight_requests_are_bounded_per_connection(self):
        with self.d.client() as c:
            ids = [c.start("exec", {"argv": ["sleep", "0.3"]}) for _ in range(6)]
            outcomes = []
            for m in ids:
                try:
                    outcomes.append(c.wait(m, timeout=60)["status"])
                except sbx_client.RpcError as e:
                    outcomes.append(e.code)
        self.assertEqual(outcomes.count("exited"), 4)
        self.assertEqual(outcomes.count("limit"), 2)

    def test_connections_are_bounded(self):
        # The earlier tests' connections may still be closing on sbxd's side, so the 20 are
        # opened until each answers a ping (sbxd accepted it), from a quiet daemon.
        for _ in range(50):
            held = []
            try:
                for _ in range(20):
                    s = raw(self.d.sock)
                    held.append(s)
                    s.sendall(msgpack.packb([0, 1, "ping", []]))
                    if read_msgs(s)[0][:3] != [1, 1, None]:
                        raise ConnectionError("refused")
                break
            except (ConnectionError, IndexError):
                for s in held:
                    s.close()
                time.sleep(0.1)
        else:
            self.fail("sbxd never accepted 20 connections")
        try:
            extra = raw(self.d.sock)
            msgs = read_msgs(extra)
            self.assertEqual(msgs[0][2][0]["code"], "limit")
            extra.close()
        finally:
            for s in held:
                s.close()
        time.sleep(0.2)
        self.assert_daemon_fine()

    def test_half_message_then_disconnect(self):
        s = raw(self.d.sock)
        s.sendall(msgpack.packb([0, 1, "exec", [{"argv": ["echo", "hi"]}]])[:10])
        s.close()
        self.assert_daemon_fine()

    def test_stdin_for_unknown_task_is_ignored(self):
        with self.d.client() as c:
            c.notify("exec.stdin", [999, b"data"])
            c.notify("exec.stdin", ["x", 1])
            c.notify("no.such.thing", [])
            self.assertTrue(c.call("ping")["pong"])
        # Only the malformed one is answered: late stdin for a finished task is normal.
        self.assertEqual(c.notifications, [("error", [{
            "code": "bad_request", "message": "exec.stdin takes [msgid, bin]",
            "method": "exec.stdin", "msgid": "x"}])])

    def test_msgid_outside_u32_gets_an_error_notification_naming_it(self):
        # A request no response can name must not leave its client waiting in silence.
        s = raw(self.d.sock)
        s.sendall(msgpack.packb([0, 2**32, "exec", [{"argv": ["true"]}]]) +
                  msgpack.packb([0, -1, "ping", []]) + msgpack.packb([0, 1.5, "ping", []]) +
                  msgpack.packb([0, "seven", "pools", []]) + msgpack.packb([0]) +
                  msgpack.packb([0, 9, "ping", []]))
        msgs = read_msgs(s, 6)
        notes = [m for m in msgs if m[0] == 2]
        self.assertEqual(len(notes), 5, msgs)
        for m in notes:
            self.assertEqual(m[1], "error")
            self.assertEqual(m[2][0]["code"], "bad_request")
            self.assertIn("msgid", m[2][0]["message"])
        named = [(m[2][0].get("msgid"), m[2][0].get("method")) for m in notes]
        self.assertEqual(named, [(2**32, "exec"), (-1, "ping"), (1.5, "ping"),
                                 ("seven", "pools"), (None, None)])
        self.assertEqual(msgs[-1][:3], [1, 9, None])  # the connection stays open
        s.close()
        self.assert_daemon_fine()

    def test_stdin_for_a_request_without_stdin_gets_an_error_notification(self):
        s = raw(self.d.sock)
        s.sendall(msgpack.packb([0, 3, "exec", [{"argv": ["sh", "-c", "sleep 1; echo done"]}]]) +
                  msgpack.packb([2, "exec.stdin", [3, b"lost bytes"]], use_bin_type=True) +
                  msgpack.packb([2, "exec.stdin", [3, b""]], use_bin_type=True))
        msgs = []
        while not any(m[0] == 1 for m in msgs):
            msgs += read_msgs(s)
        notes = [m[2][0] for m in msgs if m[:2] == [2, "error"]]
        self.assertEqual(len(notes), 2, msgs)
        for n in notes:
            self.assertEqual((n["code"], n["method"], n["msgid"]), ("bad_request", "exec.stdin", 3))
            self.assertIn("stdin", n["message"])
        res = [m for m in msgs if m[0] == 1][0]
        self.assertEqual(res[:3], [1, 3, None])
        self.assertEqual((res[3]["status"], res[3]["exit_code"]), ("exited", 0))
        out = b"".join(m[2][1] for m in msgs if m[:2] == [2, "exec.stdout"])
        self.assertEqual(out, b"done\n")
        s.close()

    def test_argv_and_env_values_may_be_bin_and_any_bytes_but_nul(self):
        odd = b"\xff\xfe caf\xc3\xa9 \x80"
        with self.d.client() as c:
            res, out, err = c.exec([b"sh", "-c", b'printf "%s|%s" "$1" "$V"', b"sh", odd],
                                   env={"V": b"\xc0\xafv"})
            self.assertEqual((res["status"], res["exit_code"]), ("exited", 0), (res, err))
            self.assertEqual(out, odd + b"|\xc0\xafv")
            for args in ({"argv": [b"echo", b"a\0b"]}, {"argv": [b""]},
                         {"argv": ["echo"], "env": {"V": b"a\0b"}}, {"argv": ["echo", 5]}):
                with self.assertRaises(sbx_client.RpcError, msg=repr(args)) as cm:
                    c.call("exec", args)
                self.assertEqual(cm.exception.code, "bad_request", args)
        self.assert_daemon_fine()

    def test_a_second_exec_under_a_msgid_in_flight_is_refused(self):
        s = raw(self.d.sock)
        s.sendall(msgpack.packb([0, 5, "exec", [{"argv": ["cat"], "stdin": True}]]))
        msgs = read_msgs(s)  # exec.started: the first task is in flight
        self.assertEqual(msgs[0][:2], [2, "exec.started"], msgs)
        s.sendall(msgpack.packb([0, 5, "exec", [{"argv": ["echo", "second"]}]]))
        refusal = read_msgs(s)
        self.assertEqual(len(refusal), 1, refusal)
        self.assertEqual(refusal[0][:2], [1, 5])
        self.assertEqual(refusal[0][2]["code"], "bad_request")
        self.assertIn("in flight", refusal[0][2]["message"])
        s.sendall(msgpack.packb([2, "exec.stdin", [5, b"first\n"]], use_bin_type=True) +
                  msgpack.packb([2, "exec.stdin", [5, b""]], use_bin_type=True))
        msgs = []
        while not any(m[0] == 1 for m in msgs):
            msgs += read_msgs(s)
        self.assertEqual([m for m in msgs if m[0] == 2 and m[1] != "exec.stdout"], [], msgs)
        self.assertEqual(b"".join(m[2][1] for m in msgs if m[1] == "exec.stdout"), b"first\n")
        res = msgs[-1]
        self.assertEqual(res[:3], [1, 5, None])
        self.assertEqual((res[3]["status"], res[3]["exit_code"]), ("exited", 0))
        # Once the first is done, the msgid may be used again.
        s.sendall(msgpack.packb([0, 5, "exec", [{"argv": ["echo", "again"]}]]))
        msgs = []
        while not any(m[0] == 1 for m in msgs):
            msgs += read_msgs(s)
        self.assertEqual(msgs[-1][3]["status"], "exited")
        s.close()

    def test_example_client_script(self):
        r = subprocess.run(["/usr/bin/python3", os.path.join(TOP, "tests", "helpers", "sbx_client.py"),
                            "--socket", self.d.sock, "--", "sh", "-c", "echo via-python"],
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"via-python", r.stdout)
        self.assertIn(b'"status": "exited"', r.stdout)


if __name__ == "__main__":
    unittest.main()
