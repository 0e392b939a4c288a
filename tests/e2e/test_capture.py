# SPDX-License-Identifier: MIT
"""exec with capture: true: the task's stdout and stderr come back in the result (as bin,
within the pool's output cap) instead of as exec.stdout/exec.stderr notifications, so that
a client that only sees responses gets the output. Debian's neovim is such a client: its
vim.rpcrequest returns the response, and the notifications sbxd sends are dispatched to its
own API, where a script never sees them."""
import json
import os
import unittest

from harness import DaemonTest, pool_yaml
from test_clients import CLIENTS, Relay, run_client
import sbx_client

CAP = 4096


class Capture(DaemonTest):
    pools = [pool_yaml("python", warm=2, max=4, output_cap=CAP)]

    def run_exec(self, args):
        """Runs exec with args; returns (result, the notification methods it got)."""
        notes = []
        with self.d.client() as c:
            msgid = c.start("exec", args, lambda method, rest: notes.append((method, rest)))
            res = c.wait(msgid, 60)
        return res, notes

    def test_binary_stdout_in_the_result(self):
        want = bytes(range(256)) * 4  # every byte value, NUL included
        # The bytes come from inside the sandbox: printf of every octal escape.
        script = "printf '%s'" % "".join("\\%03o" % b for b in bytes(range(256)))
        res, notes = self.run_exec({"argv": ["sh", "-c", "for i in 1 2 3 4; do %s; done" %
                                             script], "capture": True})
        self.assertEqual((res["status"], res["exit_code"]), ("exited", 0), res)
        self.assertIsInstance(res["stdout"], bytes)
        self.assertEqual(res["stdout"], want)
        self.assertEqual(res["stderr"], b"")
        self.assertEqual((res["stdout_bytes"], res["stderr_bytes"], res["truncated"]),
                         (len(want), 0, False))
        methods = [m for m, _ in notes]
        self.assertNotIn("exec.stdout", methods)
        self.assertNotIn("exec.stderr", methods)
        self.assertEqual(methods, ["exec.started"])

    def test_both_streams(self):
        res, notes = self.run_exec({"argv": ["sh", "-c", "echo out; echo err >&2; echo more; "
                                             "printf 'x\\000y' >&2; exit 5"], "capture": True})
        self.assertEqual((res["status"], res["exit_code"]), ("exited", 5), res)
        self.assertEqual((res["stdout"], res["stderr"]), (b"out\nmore\n", b"err\nx\x00y"))
        self.assertEqual((res["stdout_bytes"], res["stderr_bytes"]), (9, 7))
        self.assertFalse([m for m, _ in notes if m in ("exec.stdout", "exec.stderr")], notes)

    def test_empty_output(self):
        res, _ = self.run_exec({"argv": ["true"], "capture": True})
        self.assertEqual((res["status"], res["stdout"], res["stderr"]), ("exited", b"", b""))

    def test_over_the_cap_is_truncated(self):
        res, notes = self.run_exec({"argv": ["sh", "-c", "echo e >&2; yes"], "capture": True})
        self.assertEqual(res["status"], "output_limit", res)
        self.assertTrue(res["truncated"])
        self.assertEqual(len(res["stdout"]) + len(res["stderr"]), CAP)
        self.assertEqual(res["stderr"], b"e\n")
        self.assertEqual(res["stdout"], b"y\n" * ((CAP - 2) // 2))
        self.assertEqual((res["stdout_bytes"], res["stderr_bytes"]), (CAP - 2, 2))
        self.assertFalse([m for m, _ in notes if m in ("exec.stdout", "exec.stderr")], notes)

    def test_without_capture_nothing_changes(self):
        for args in ({"argv": ["sh", "-c", "echo out; echo err >&2"]},
                     {"argv": ["sh", "-c", "echo out; echo err >&2"], "capture": False},
                     {"argv": ["sh", "-c", "echo out; echo err >&2"], "capture": None}):
            res, notes = self.run_exec(args)
            self.assertNotIn("stdout", res)
            self.assertNotIn("stderr", res)
            got = {m: b"".join(r[0] for mm, r in notes if mm == m)
                   for m in ("exec.stdout", "exec.stderr")}
            self.assertEqual(got, {"exec.stdout": b"out\n", "exec.stderr": b"err\n"})

    def test_capture_must_be_a_boolean(self):
        with self.d.client() as c:
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.call("exec", {"argv": ["true"], "capture": "yes"}, 30)
        self.assertEqual(cm.exception.code, "bad_request")
        self.assertIn("capture", cm.exception.message)

    def test_audit_trail_has_only_byte_counts(self):
        # The output is not in the argv (which the trail records): printf joins it.
        marker = b"capture-secret-8c1f"
        res, _ = self.run_exec({"argv": ["printf", "%s-%s", "capture-secret", "8c1f"],
                                "capture": True})
        self.assertEqual(res["stdout"], marker)
        trail = b""
        for root, _, files in os.walk(self.d.dir):
            for f in files:
                if "audit" in root or f.startswith("audit"):
                    with open(os.path.join(root, f), "rb") as fh:
                        trail += fh.read()
        self.assertTrue(trail)
        self.assertFalse(marker in trail, "the captured output is in the audit trail")
        # The request records where the output went.
        import sqlite3
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.d.state, "audit.db"),
                             uri=True, timeout=10)
        try:
            (fields,), = db.execute("SELECT fields FROM events WHERE task = ? AND "
                                    "type = 'task.request'", (res["task"],)).fetchall()
        finally:
            db.close()
        self.assertIs(json.loads(fields)["capture"], True)

    def test_neovim_gets_the_output_only_with_capture(self):
        relay = Relay(self.d.sock, os.path.join(self.d.dir, "relay-capture.sock"))
        try:
            r = run_client(["nvim", "--headless", "--clean", "-i", "NONE", "-c",
                            "luafile nvim_capture.lua"], env={"SBX_SOCK": relay.path})
        finally:
            relay.close()
        got = relay.to_client
        # With capture, the output is in what vim.rpcrequest returned.
        cap = r["capture"]
        self.assertTrue(cap["ok"], cap)
        self.assertEqual((cap["res"]["status"], cap["res"]["exit_code"]), ("exited", 0))
        self.assertEqual((cap["res"]["stdout"], cap["res"]["stderr"]), ("hello\n", "oops\n"))
        self.assertFalse([m for m in got if m[0] == 2 and m[1] in ("exec.stdout", "exec.stderr")
                          and m[2][0] == cap["id"]])
        # Without capture neovim gets the result and no output at all: sbxd sent it as
        # notifications (the relay saw them), which neovim never passes to the script.
        plain = r["plain"]
        self.assertTrue(plain["ok"], plain)
        self.assertEqual(plain["res"]["stdout_bytes"], 6)
        self.assertNotIn("stdout", plain["res"])
        self.assertIn([2, "exec.stdout", [plain["id"], b"hello\n"]], got)


if __name__ == "__main__":
    unittest.main()
