# SPDX-License-Identifier: MIT
"""sbxd driven by clients nobody on the project wrote: npm's msgpack5rpc and @msgpack/msgpack
(pinned by tests/clients/package-lock.json, installed into BUILD/npm by `make clients`) and
Debian's neovim as a msgpack-rpc client. Each runs ping, exec with stdin streamed, argv that
is not UTF-8, and the malformed requests sbxd must answer rather than drop (tests/clients/*
say which each can send), under a deadline of its own and one here: a client left waiting
is a failure. A missing client fails the test: nothing is skipped."""
import json
import os
import shutil
import socket
import subprocess
import threading
import unittest

import msgpack

from harness import BUILD, DaemonTest, TOP, pool_yaml

CLIENTS = os.path.join(TOP, "tests", "clients")
NODE_MODULES = os.path.join(BUILD, "npm", "node_modules")
DEADLINE = 120  # seconds; the clients' own guards fire at 60


def run_client(argv, env=None):
    """Runs a client script; returns its JSON report (a hang or a crash fails the test)."""
    e = dict(os.environ, NODE_PATH=NODE_MODULES)
    e.update(env or {})
    try:
        r = subprocess.run(argv, capture_output=True, timeout=DEADLINE, env=e, cwd=CLIENTS,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError("%s hung: %r" % (argv[0], exc.stdout)) from None
    lines = [ln for ln in r.stdout.decode(errors="replace").splitlines() if ln.startswith("{")]
    if not lines:
        raise AssertionError("%s printed no report (rc %d): %r %r" %
                             (argv[0], r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    report = json.loads(lines[-1])
    if r.returncode != 0 or "timeout" in report or "exception" in report:
        raise AssertionError("%s failed (rc %d): %s\n%s" %
                             (argv[0], r.returncode, json.dumps(report)[:4000], r.stderr[-2000:]))
    return report


class Relay:
    """A Unix socket in front of sbxd's that passes bytes both ways unchanged and decodes
    what goes by: how the test sees what a client that cannot show it (neovim) was sent."""

    def __init__(self, upstream, path):
        self.upstream, self.path = upstream, path
        self.to_client, self.to_daemon = [], []
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lsock.bind(path)
        self.lsock.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        client, _ = self.lsock.accept()
        daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        daemon.connect(self.upstream)
        pumps = [threading.Thread(target=self._pump, args=(client, daemon, self.to_daemon)),
                 threading.Thread(target=self._pump, args=(daemon, client, self.to_client))]
        for t in pumps:
            t.start()
        for t in pumps:
            t.join()
        client.close()
        daemon.close()

    @staticmethod
    def _pump(src, dst, log):
        # A client's str need not be UTF-8 (neovim's argv below is not).
        up = msgpack.Unpacker(raw=False, unicode_errors="surrogateescape")
        decoding = True
        while True:
            try:
                data = src.recv(65536)
                if data:
                    dst.sendall(data)
            except OSError:
                data = b""
            if not data:
                break
            try:
                if decoding:
                    up.feed(data)
                    log.extend(up)
            except Exception as e:  # the bytes still pass; the test sees why it has no log
                log.append(["undecodable", repr(e)])
                decoding = False
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self):
        self.thread.join(timeout=DEADLINE)
        self.lsock.close()


class RealClients(DaemonTest):
    pools = [pool_yaml("python", warm=2, max=4)]

    @classmethod
    def setUpClass(cls):
        # Not a skip: the Makefile installs these (make clients, a prerequisite of make test).
        missing = [p for p in (os.path.join(NODE_MODULES, "msgpack5rpc"),
                               os.path.join(NODE_MODULES, "@msgpack", "msgpack"))
                   if not os.path.isdir(p)]
        missing += [b for b in ("node", "nvim") if not shutil.which(b)]
        if missing:
            raise RuntimeError("real clients missing (run make clients): %s" % missing)
        super().setUpClass()

    def assert_exited(self, result, code=0):
        self.assertEqual((result["status"], result["exit_code"]), ("exited", code), result)

    def assert_error_names(self, note, msgid, method):
        self.assertEqual((note["code"], note["msgid"], note["method"]),
                         ("bad_request", msgid, method), note)
        self.assertTrue(note["message"])

    def test_msgpack5rpc(self):
        r = run_client(["node", "msgpack5rpc_client.js", self.d.sock])
        self.assertEqual(r["ping"], {"err": None, "res": {"pong": True, "version": "0.1.0"}})
        st = r["stdin"]
        self.assert_exited(st["result"])
        self.assertEqual((st["stdout"], st["stderr"], st["started"]),
                         ("hello world\n", "done\n", 1))
        # argv and env values sent as bin, not UTF-8: the task saw exactly those bytes.
        self.assert_exited(r["bin_argv"]["result"])
        self.assertEqual(r["bin_argv"]["stdout_hex"], "fffe2080" + "7c" + "c0af")
        self.assertEqual(r["nul_argv"]["err"]["code"], "bad_request")
        self.assertIsNone(r["nul_argv"]["result"])
        # stdin for a request that did not ask for it: answered, and the task unharmed.
        sn = r["stdin_not_asked"]
        self.assert_error_names(sn["error"], sn["id"], "exec.stdin")
        self.assert_exited(sn["result"])
        self.assertEqual(sn["stdout"], "ok\n")
        # A msgid past 2^32 gets an error notification naming it instead of silence.
        self.assert_error_names(r["msgid_too_big"], 2**32, "ping")
        self.assertTrue(r["ping_after"]["res"]["pong"])
        self.assertEqual(r["bad_args"]["err"]["code"], "bad_request")
        self.assertEqual(r["unknown_method"]["err"]["code"], "unknown_method")

    def test_msgpack_codec_client(self):
        r = run_client(["node", "msgpack_client.js", self.d.sock])
        self.assertTrue(r["ping"]["res"]["pong"])
        st = r["stdin"]
        self.assert_exited(st["result"])
        self.assertEqual(st["stdout"], st["want"] + "  -\n")  # 1 MiB streamed, intact
        self.assertEqual(st["started"], 1)
        self.assert_exited(r["bin_argv"]["result"])
        self.assertEqual(r["bin_argv"]["stdout_hex"], "fffe20807cc0af")
        self.assertEqual(r["nul_argv"]["err"]["code"], "bad_request")
        sn = r["stdin_not_asked"]
        self.assert_error_names(sn["error"], 5, "exec.stdin")
        self.assert_exited(sn["result"])
        self.assertEqual(sn["stdout"], "ok\n")
        self.assert_error_names(r["msgid_too_big"], 2**32, "ping")
        self.assert_error_names(r["msgid_negative"], -1, "exec")
        self.assertTrue(r["ping_after"]["res"]["pong"])
        # A second exec under msgid 7 while the first runs: refused, the first untouched.
        dup = r["duplicate_msgid"]
        self.assertEqual(dup["refusal"]["err"]["code"], "bad_request")
        self.assertIn("in flight", dup["refusal"]["err"]["message"])
        self.assertEqual(len(dup["responses"]), 2, dup)
        self.assertIsNone(dup["responses"][1]["err"])
        self.assert_exited(dup["responses"][1]["res"])
        self.assertEqual((dup["started"], dup["stdout"]), (1, "first\n"))
        self.assertEqual(set(dup["after_refusal"]), {"exec.stdout"}, dup)

    def test_neovim(self):
        relay = Relay(self.d.sock, os.path.join(self.d.dir, "relay.sock"))
        try:
            r = run_client(["nvim", "--headless", "--clean", "-i", "NONE", "-c",
                            "luafile nvim_client.lua"], env={"SBX_SOCK": relay.path})
        finally:
            relay.close()
        sent, got = relay.to_daemon, relay.to_client
        requests = {m[1]: m for m in sent if m[0] == 0}

        def response(step):
            msgid = r[step]["id"]
            self.assertEqual(requests[msgid][2], "exec" if step != "unknown_method"
                             else "rm_rf")  # neovim numbered its requests as the script says
            return [m for m in got if m[0] == 1 and m[1] == msgid][0]

        def stdout(step):
            return b"".join(m[2][1] for m in got if m[:2] == [2, "exec.stdout"] and
                            m[2][0] == r[step]["id"])

        self.assertTrue(r["ping"]["ok"])
        self.assertTrue(r["ping"]["res"]["pong"])
        # stdin streamed from neovim while its request waited.
        self.assertTrue(r["stdin"]["ok"], r["stdin"])
        self.assert_exited(r["stdin"]["res"], 3)
        self.assertEqual(r["stdin"]["res"]["stdout_bytes"], 12)
        self.assertEqual(stdout("stdin"), b"hello world\n")
        self.assertEqual(response("stdin")[3]["exit_code"], 3)
        # A str that is not UTF-8 reaches the task as the same bytes.
        self.assert_exited(r["odd_argv"]["res"])
        self.assertEqual(stdout("odd_argv"), b"\xff\xfe")
        # stdin for a request that did not ask for it: sbxd answered neovim, before the
        # task's result, which is unharmed.
        msgid = r["stdin_not_asked"]["id"]
        self.assertIn([2, "exec.stdin", [msgid, "lost"]], sent)
        notes = [i for i, m in enumerate(got) if m[:2] == [2, "error"]]
        self.assertEqual(len(notes), 1, got)
        self.assert_error_names(got[notes[0]][2][0], msgid, "exec.stdin")
        self.assertLess(notes[0], got.index(response("stdin_not_asked")))
        # Neovim's own word that it got it: it dispatches notifications to its API, and
        # says so back for a method it does not have (sbxd ignores unknown notifications).
        self.assertIn([2, "nvim_error_event", [0, "Invalid method: error"]], sent)
        self.assert_exited(r["stdin_not_asked"]["res"])
        self.assertEqual(stdout("stdin_not_asked"), b"ok\n")
        # Neovim shows only "unknown error" for a map error; the relay saw the codes.
        self.assertFalse(r["bad_args"]["ok"])
        self.assertEqual(response("bad_args")[2]["code"], "bad_request")
        self.assertFalse(r["unknown_method"]["ok"])
        self.assertEqual(response("unknown_method")[2]["code"], "unknown_method")


if __name__ == "__main__":
    unittest.main()
