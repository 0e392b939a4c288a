#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""build/sbx against tests/helpers/fake_sbxd.py: flags, exit statuses, streaming, --json.

Run from the repository root: /usr/bin/python3 -m unittest tests/e2e/test_cli_fake.py
(or directly). The binary under test is SBX, else sbx in SBX_BUILD (what tests/run.sh
passes: build-san under SAN=1), else build/sbx.
"""

import json
import os
import pty
import random
import signal
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SBX = os.environ.get("SBX", os.path.join(ROOT, os.environ.get("SBX_BUILD", "build"), "sbx"))
FAKE = os.path.join(ROOT, "tests", "helpers", "fake_sbxd.py")
PYTHON = "/usr/bin/python3"

EX_USAGE, EX_UNAVAILABLE, EX_SOFTWARE, EX_NOPERM = 64, 69, 70, 77


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


class CliFakeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(SBX, os.X_OK):
            raise unittest.SkipTest("%s is not built (make build/sbx)" % SBX)
        cls.tmp = tempfile.TemporaryDirectory(prefix="sbx-cli-")
        cls.sock = os.path.join(cls.tmp.name, "sbxd.sock")
        cls.fake = subprocess.Popen([PYTHON, FAKE, cls.sock, "--version", "9.8.7"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = cls.fake.stdout.readline()
        if line.strip() != b"ready":
            cls.fake.kill()
            raise RuntimeError("fake_sbxd did not start: %r %r" % (line, cls.fake.stderr.read()))

    @classmethod
    def tearDownClass(cls):
        cls.fake.terminate()
        cls.fake.wait(timeout=10)
        cls.fake.stdout.close()
        cls.fake.stderr.close()
        cls.tmp.cleanup()

    def sbx(self, *args, input=b"", env=None, socket=True, timeout=60):
        cmd = [SBX] + (["--socket", self.sock] if socket else []) + list(args)
        full_env = dict(os.environ)
        full_env.pop("SBX_SOCKET", None)
        full_env.update(env or {})
        return subprocess.run(cmd, input=input, capture_output=True, env=full_env,
                              timeout=timeout)

    def assertUsage(self, *args):
        r = self.sbx(*args)
        self.assertEqual(r.returncode, EX_USAGE, r)
        self.assertTrue(r.stderr.startswith(b"sbx: "), r.stderr)
        self.assertIn(b"usage: sbx", r.stderr)
        self.assertEqual(r.stdout, b"")

    # ---- global flags, ping, pools ----

    def test_ping(self):
        r = self.sbx("ping")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"pong (version 9.8.7)\n", b""))

    def test_socket_from_env_and_flag_precedence(self):
        r = self.sbx("ping", socket=False, env={"SBX_SOCKET": self.sock})
        self.assertEqual(r.returncode, 0, r)
        missing = os.path.join(self.tmp.name, "nothing.sock")
        r = self.sbx("--socket=" + self.sock, "ping", socket=False, env={"SBX_SOCKET": missing})
        self.assertEqual(r.returncode, 0, r)
        r = self.sbx("ping", socket=False, env={"SBX_SOCKET": missing})
        self.assertEqual(r.returncode, EX_UNAVAILABLE)
        self.assertIn(missing.encode(), r.stderr)

    def test_default_socket_is_relative_var(self):
        r = subprocess.run([SBX, "ping"], capture_output=True, cwd=self.tmp.name,
                           env={k: v for k, v in os.environ.items() if k != "SBX_SOCKET"})
        self.assertEqual(r.returncode, EX_UNAVAILABLE)
        self.assertIn(b"'./var/sbxd.sock'", r.stderr)

    def test_admin_socket_flag_accepted(self):
        r = self.sbx("--admin-socket", "/nonexistent/admin.sock", "ping")
        self.assertEqual(r.returncode, 0, r)

    def test_unreachable_is_69(self):
        r = subprocess.run([SBX, "--socket", os.path.join(self.tmp.name, "none.sock"), "exec",
                            "echo"], capture_output=True)
        self.assertEqual(r.returncode, EX_UNAVAILABLE)
        self.assertTrue(r.stderr.startswith(b"sbx: cannot connect to sbxd"), r.stderr)
        self.assertEqual(r.stderr.count(b"\n"), 1)

    def test_socket_path_too_long(self):
        r = subprocess.run([SBX, "--socket", "/" + "x" * 200, "ping"], capture_output=True)
        self.assertEqual(r.returncode, EX_UNAVAILABLE)
        self.assertIn(b"too long", r.stderr)

    def test_pools_table(self):
        r = self.sbx("pools")
        self.assertEqual(r.returncode, 0, r)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(len(lines), 3)
        self.assertEqual(lines[0].split(), ["NAME", "WARM", "TARGET", "RUNNING", "MAX", "QUEUED",
                                            "QUEUE_MAX", "CREATED", "FAILED", "IMAGE",
                                            "SECCOMP"])
        self.assertEqual(lines[1].split(), ["python", "4", "4", "1", "16", "0", "64", "120", "0",
                                            "python-3.11", "default"])
        self.assertEqual(lines[2].split(), ["integrations-long", "0", "2", "12", "12", "3", "8",
                                            "7", "1234567", "integ", "-"])
        # Aligned: every column starts at the same offset in each line; numbers right-aligned.
        head = lines[0]
        for title in ("WARM", "FAILED"):
            end = head.index(title) + len(title)
            for line in lines[1:]:
                self.assertNotEqual(line[end - 1], " ", (title, line))
                self.assertEqual(line[end], " ")
        for title in ("IMAGE", "SECCOMP"):
            start = head.index(title)
            for line in lines[1:]:
                self.assertEqual(line[start - 1], " ")
                self.assertNotEqual(line[start], " ")

    def test_usage_errors(self):
        self.assertUsage()
        self.assertUsage("frobnicate")
        self.assertUsage("--bogus", "ping")
        self.assertUsage("ping", "extra")
        self.assertUsage("exec")
        self.assertUsage("exec", "--json")
        self.assertUsage("exec", "--")
        self.assertUsage("exec", "--env", "NOEQUALS", "echo")
        self.assertUsage("exec", "--env", "=value", "echo")
        self.assertUsage("exec", "--env")
        self.assertUsage("exec", "--timeout", "abc", "echo")
        self.assertUsage("exec", "--timeout", "0", "echo")
        self.assertUsage("exec", "--timeout", "-1", "echo")
        self.assertUsage("exec", "--pool", "", "echo")
        self.assertUsage("exec", "--cwd=", "echo")
        self.assertUsage("exec", "--frob", "echo")
        r = subprocess.run([SBX, "--socket"], capture_output=True)
        self.assertEqual(r.returncode, EX_USAGE)

    def test_help(self):
        for args in (["--help"], ["help"], ["exec", "--help"], ["help", "exec"]):
            r = self.sbx(*args)
            self.assertEqual(r.returncode, 0, args)
            self.assertIn(b"usage: sbx", r.stdout)

    # ---- exec: request and streaming ----

    def test_params(self):
        r = self.sbx("exec", "--pool", "heavy", "--timeout", "2.5", "--env", "A=1", "--env",
                     "B=x=y", "--env=A=2", "--env", "EMPTY=", "--cwd", "/work", "--",
                     "params", "--json", "-x", "")
        self.assertEqual(r.returncode, 0, r)
        args = json.loads(r.stdout)
        self.assertEqual(args, {"argv": ["params", "--json", "-x", ""], "pool": "heavy",
                                "timeout": 2.5, "env": {"A": "2", "B": "x=y", "EMPTY": ""},
                                "cwd": "/work", "stdin": True})
        r = self.sbx("exec", "--timeout=3", "params")
        self.assertEqual(json.loads(r.stdout), {"argv": ["params"], "timeout": 3, "stdin": True})
        r = self.sbx("exec", "--timeout", "1500ms", "params")
        self.assertEqual(json.loads(r.stdout)["timeout"], 1.5)

    def test_command_starts_at_first_non_option(self):
        r = self.sbx("exec", "params", "--pool", "x")
        self.assertEqual(json.loads(r.stdout)["argv"], ["params", "--pool", "x"])

    def test_streams_stdout_and_stderr(self):
        r = self.sbx("exec", "out", b"hello\n".hex(), b"oops\n".hex())
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"hello\n", b"oops\n"))

    def test_echo_stdin(self):
        r = self.sbx("exec", "echo", input=b"some input\n")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"some input\n", b""))

    def test_stdin_devnull(self):
        with open(os.devnull, "rb") as null:
            r = subprocess.run([SBX, "--socket", self.sock, "exec", "echo", "6"], stdin=null,
                               capture_output=True, timeout=30)
        self.assertEqual((r.returncode, r.stdout), (6, b""))

    def test_stdin_closed_and_stdout_closed(self):
        r = subprocess.run("exec %s --socket %s exec echo 7 <&- >&-" % (SBX, self.sock),
                           shell=True, capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 7, r)

    def test_stdin_tty(self):
        master, slave = pty.openpty()
        try:
            p = subprocess.Popen([SBX, "--socket", self.sock, "exec", "echo"], stdin=slave,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            os.close(slave)
            slave = -1
            time.sleep(0.3)
            os.write(master, b"line one\n")
            time.sleep(0.2)
            os.write(master, b"\x04")  # VEOF: the terminal says end of input
            out, err = p.communicate(timeout=30)
            self.assertEqual((p.returncode, out, err), (0, b"line one\n", b""))
        finally:
            os.close(master)
            if slave >= 0:
                os.close(slave)

    def test_stdin_1mib_round_trip(self):
        data = random.Random(1).randbytes(1 << 20)
        r = self.sbx("exec", "echo", input=data)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, data)
        r = self.sbx("exec", "stdinstats", input=data)
        chunks, biggest, total = map(int, r.stdout.split())
        self.assertEqual(total, 1 << 20)
        self.assertLessEqual(biggest, 64 * 1024)
        r = self.sbx("exec", "--json", "echo", input=data)
        self.assertEqual(r.returncode, 0, r.stderr)
        obj = json.loads(r.stdout)
        self.assertEqual(obj["stdout"], data.decode("utf-8", "replace"))

    def test_stdin_stops_when_task_ends(self):
        with open("/dev/zero", "rb") as zero:
            r = subprocess.run([SBX, "--socket", self.sock, "exec", "exit", "4"], stdin=zero,
                               capture_output=True, timeout=30)
        self.assertEqual((r.returncode, r.stderr), (4, b""))

    def test_slow_reader_keeps_memory_bounded(self):
        p = subprocess.Popen([SBX, "--socket", self.sock, "exec", "big", str(64 << 20)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            time.sleep(1.0)  # nobody reads: sbx must stop reading the socket, not buffer
            with open("/proc/%d/status" % p.pid) as f:
                hwm = [int(line.split()[1]) for line in f if line.startswith("VmHWM:")][0]
            self.assertLess(hwm, 32 * 1024, "sbx peaked at %d KiB" % hwm)
            got = 0
            while True:
                chunk = p.stdout.read(1 << 20)
                if not chunk:
                    break
                got += len(chunk)
            p.wait(timeout=30)
            self.assertEqual((p.returncode, got), (0, 64 << 20))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()

    def test_message_above_cap(self):
        r = self.sbx("exec", "huge", str(20 << 20))
        self.assertEqual(r.returncode, EX_SOFTWARE)
        self.assertTrue(r.stderr.startswith(b"sbx: "), r.stderr)
        self.assertEqual(r.stderr.count(b"\n"), 1)
        self.assertEqual(r.stdout, b"")
        r = self.sbx("exec", "huge", str(8 << 20))
        self.assertEqual((r.returncode, len(r.stdout)), (0, 8 << 20))

    def test_large_output(self):
        r = self.sbx("exec", "big", str(8 << 20), "3")
        self.assertEqual(r.returncode, 3)
        self.assertEqual(len(r.stdout), 8 << 20)
        self.assertEqual(r.stdout[:512], bytes(range(256)) * 2)

    def test_stdout_reader_gone(self):
        p = subprocess.Popen([SBX, "--socket", self.sock, "exec", "big", str(4 << 20), "9"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.read(10)
        p.stdout.close()
        err = p.stderr.read()
        p.wait(timeout=30)
        p.stderr.close()
        self.assertEqual(p.returncode, 9, err)
        self.assertEqual(err, b"")

    # ---- exec: exit statuses ----

    def test_exit_code_passes_through(self):
        for code in (0, 1, 42, 255):
            self.assertEqual(self.sbx("exec", "exit", str(code)).returncode, code)

    def test_signaled(self):
        self.assertEqual(self.sbx("exec", "signal", "9").returncode, 137)
        self.assertEqual(self.sbx("exec", "signal", "15").returncode, 143)

    def test_timeout(self):
        r = self.sbx("exec", "timeout")
        self.assertEqual((r.returncode, r.stdout), (124, b"partial\n"))
        self.assertTrue(r.stderr.startswith(b"sbx: "), r.stderr)

    def test_output_limit(self):
        r = self.sbx("exec", "outlimit", "1000")
        self.assertEqual((r.returncode, r.stdout), (137, b"x" * 1000))
        self.assertEqual(r.stderr, b"sbx: output limit reached (1000 bytes), sandbox killed\n")

    def test_oom(self):
        r = self.sbx("exec", "oom")
        self.assertEqual(r.returncode, 137)
        self.assertEqual(r.stderr, b"allocating\nsbx: out of memory, sandbox killed\n")

    def test_status_error(self):
        r = self.sbx("exec", "/no/such/binary")
        self.assertEqual(r.returncode, 127)
        self.assertEqual(r.stderr, b"sbx: error: execve '/no/such/binary': ENOENT\n")
        r = self.sbx("exec", "error", "sandbox init died: ECHILD")
        self.assertEqual(r.returncode, EX_SOFTWARE)
        self.assertEqual(r.stderr, b"sbx: error: sandbox init died: ECHILD\n")

    def test_rpc_errors(self):
        cases = {"denied": EX_NOPERM, "busy": EX_UNAVAILABLE, "limit": EX_UNAVAILABLE,
                 "shutting_down": EX_UNAVAILABLE, "unknown_pool": EX_USAGE,
                 "bad_request": EX_USAGE, "too_large": EX_USAGE, "internal": EX_SOFTWARE,
                 "no_such_code": EX_SOFTWARE}
        for code, status in cases.items():
            r = self.sbx("exec", "rpcerror", code, "it went \x1b[31mwrong")
            self.assertEqual(r.returncode, status, code)
            self.assertEqual(r.stderr, b"sbx: it went ?[31mwrong (%s)\n" % code.encode())
            self.assertEqual(r.stdout, b"")

    def test_connection_dropped(self):
        r = self.sbx("exec", "drop")
        self.assertEqual(r.returncode, EX_UNAVAILABLE)
        self.assertIn(b"closed the connection", r.stderr)

    def test_garbage_from_daemon(self):
        r = self.sbx("exec", "garbage")
        self.assertEqual(r.returncode, EX_SOFTWARE)
        self.assertTrue(r.stderr.startswith(b"sbx: bad message from sbxd"), r.stderr)

    def interrupt(self, sig, expect):
        marker = os.path.join(self.tmp.name, "closed-%d" % sig)
        p = subprocess.Popen([SBX, "--socket", self.sock, "exec", "hang", marker],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            self.assertEqual(p.stdout.readline(), b"ready\n")
            p.send_signal(sig)
            p.wait(timeout=10)
            self.assertEqual(p.returncode, expect)
            self.assertTrue(wait_for(lambda: os.path.exists(marker)),
                            "the fake did not see the connection close")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (p.stdin, p.stdout, p.stderr):
                f.close()

    def test_sigint_closes_connection(self):
        self.interrupt(signal.SIGINT, 130)

    def test_sigterm_closes_connection(self):
        self.interrupt(signal.SIGTERM, 143)

    # ---- exec --json ----

    def test_json_fields(self):
        r = self.sbx("exec", "--json", "out", b"out\n".hex(), b"err\n".hex(), "5")
        self.assertEqual(r.returncode, 5)
        self.assertEqual(r.stderr, b"")
        self.assertTrue(r.stdout.endswith(b"}\n"))
        self.assertEqual(r.stdout.count(b"\n"), 1)
        obj = json.loads(r.stdout)
        for k in ("status", "exit_code", "signal", "stdout", "stderr", "truncated", "wall_ms",
                  "cpu_ms", "mem_peak_bytes", "sandbox", "task", "pool", "stdout_bytes",
                  "stderr_bytes"):
            self.assertIn(k, obj)
        self.assertNotIn("error", obj)
        self.assertEqual(obj["status"], "exited")
        self.assertEqual(obj["exit_code"], 5)
        self.assertIsNone(obj["signal"])
        self.assertEqual(obj["stdout"], "out\n")
        self.assertEqual(obj["stderr"], "err\n")
        self.assertIs(obj["truncated"], False)
        self.assertEqual(obj["stdout_bytes"], 4)
        self.assertEqual(obj["pool"], "python")
        self.assertTrue(obj["sandbox"].startswith("sb"))

    def test_json_statuses(self):
        r = self.sbx("exec", "--json", "outlimit", "100")
        obj = json.loads(r.stdout)
        self.assertEqual((r.returncode, obj["status"], obj["truncated"]),
                         (137, "output_limit", True))
        r = self.sbx("exec", "--json", "signal", "9")
        obj = json.loads(r.stdout)
        self.assertEqual((r.returncode, obj["status"], obj["signal"]), (137, "signaled", 9))
        r = self.sbx("exec", "--json", "timeout")
        self.assertEqual((r.returncode, json.loads(r.stdout)["status"]), (124, "timeout"))
        r = self.sbx("exec", "--json", "oom")
        obj = json.loads(r.stdout)
        self.assertEqual((r.returncode, obj["status"], obj["stderr"]), (137, "oom", "allocating\n"))
        r = self.sbx("exec", "--json", "missing-binary")
        obj = json.loads(r.stdout)
        self.assertEqual((r.returncode, obj["status"]), (127, "error"))
        self.assertEqual(obj["error"], "execve 'missing-binary': ENOENT")
        r = self.sbx("exec", "--json", "rpcerror", "denied", "no")
        self.assertEqual((r.returncode, r.stdout), (EX_NOPERM, b""))

    def test_json_text_encoding(self):
        cases = [
            b"plain ascii",
            "caf\u00e9 \u2603 \U0001F600 \u2028".encode(),
            b"\x00\x01\x1f\x7f\x0a\x0d\x09\x08\x0c\"\\/",
            "\u0085\u009f".encode(),                      # C1 controls, validly encoded
            b"\xff\xfe bad \x80 lone \xc0\xaf overlong",
            b"\xe0\x80\xaf \xed\xa0\x80 surrogate \xf4\x90\x80\x80 too big",
            b"\xf0\x9f\x98 truncated 4-byte, then \xe2\x82",  # ends inside a sequence
            b"\xc2", b"\xe2\x82\xac", b"\xf5\x80", b"\xed\x9f\xbf", b"\xef\xbf\xbd",
            bytes(range(256)),
            bytes(range(128, 256)) * 3 + b"\xe2",
        ]
        for data in cases:
            r = self.sbx("exec", "--json", "out", data.hex(), data.hex())
            self.assertEqual(r.returncode, 0, data)
            raw = r.stdout
            raw.decode("utf-8")  # the document itself is valid UTF-8
            self.assertFalse(any(b < 0x20 for b in raw[:-1]), raw)  # controls are escaped
            obj = json.loads(raw)  # strict: raw control characters would fail here
            want = data.decode("utf-8", "replace")
            self.assertEqual(obj["stdout"], want, data)
            self.assertEqual(obj["stderr"], want, data)

    def test_json_random_bytes(self):
        rnd = random.Random(7)
        for i in range(20):
            # Mostly-ASCII and mostly-high random mixes, to hit every decoder branch.
            alphabet = bytes(range(256)) if i % 2 else b"ab\n\xc2\xe0\xed\xf0\xf4\x80\xbf\x9f\xa0"
            data = bytes(rnd.choice(alphabet) for _ in range(4000))
            r = self.sbx("exec", "--json", "out", data.hex())
            self.assertEqual(json.loads(r.stdout)["stdout"], data.decode("utf-8", "replace"))

    def test_json_caps_collected_output(self):
        size = (64 << 20) + (1 << 20)
        r = self.sbx("exec", "--json", "big", str(size), timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        obj = json.loads(r.stdout)
        self.assertIs(obj["truncated"], True)
        self.assertEqual(obj["stdout_bytes"], size)
        kept = bytes(range(256)) * ((64 << 20) // 256)
        self.assertEqual(obj["stdout"], kept.decode("utf-8", "replace"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
