#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""build/sbx against tests/helpers/fake_sbxd.py: flags, exit statuses, streaming, --json.

Run from the repository root: /usr/bin/python3 -m unittest tests/e2e/test_cli_fake.py
(or directly). The binary under test is SBX, else sbx in SBX_BUILD (what tests/run.sh
passes: build-san under SAN=1), else build/sbx.
"""

import base64
import json
import os
import pty
import re
import random
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SBX = os.environ.get("SBX", os.path.join(ROOT, os.environ.get("SBX_BUILD", "build"), "sbx"))
FAKE = os.path.join(ROOT, "tests", "helpers", "fake_sbxd.py")
sys.path.insert(0, os.path.dirname(FAKE))
import fake_sbxd  # noqa: E402  (its fixed answers)
PYTHON = "/usr/bin/python3"


def start_fake(sock, *args):
    """tests/helpers/fake_sbxd.py serving sock (with its extra args), once it says ready."""
    fake = subprocess.Popen([PYTHON, FAKE, sock] + list(args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    line = fake.stdout.readline()
    if line.strip() != b"ready":
        fake.kill()
        raise RuntimeError("fake_sbxd did not start: %r %r" % (line, fake.stderr.read()))
    return fake


def stop_fake(fake):
    fake.terminate()
    fake.wait(timeout=10)
    fake.stdout.close()
    fake.stderr.close()

# sbx's own failures, as docker run, podman and GNU timeout give them: one status, told
# apart by the message (and by --json's error code), never mistaken for a task's exit code.
SBX_FAIL, CANNOT_RUN, NOT_FOUND = 125, 126, 127
VERSION_H = os.path.join(ROOT, "daemon", "wire", "version.h")


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
        cls.fake = start_fake(cls.sock, "--version", "9.8.7")

    @classmethod
    def tearDownClass(cls):
        stop_fake(cls.fake)
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
        self.assertEqual(r.returncode, SBX_FAIL, r)
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
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertIn(missing.encode(), r.stderr)

    def test_default_socket_is_relative_var(self):
        r = subprocess.run([SBX, "ping"], capture_output=True, cwd=self.tmp.name,
                           env={k: v for k, v in os.environ.items() if k != "SBX_SOCKET"})
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertIn(b"'./var/sbxd.sock'", r.stderr)

    def test_admin_socket_flag_accepted(self):
        r = self.sbx("--admin-socket", "/nonexistent/admin.sock", "ping")
        self.assertEqual(r.returncode, 0, r)

    def test_unreachable_is_125(self):
        r = subprocess.run([SBX, "--socket", os.path.join(self.tmp.name, "none.sock"), "exec",
                            "echo"], capture_output=True)
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertTrue(r.stderr.startswith(b"sbx: cannot connect to sbxd"), r.stderr)
        self.assertEqual(r.stderr.count(b"\n"), 1)

    def test_socket_path_too_long(self):
        r = subprocess.run([SBX, "--socket", "/" + "x" * 200, "ping"], capture_output=True)
        self.assertEqual(r.returncode, SBX_FAIL)
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

    def test_pools_json(self):
        r = self.sbx("pools", "--json")
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        self.assertEqual(json.loads(r.stdout), fake_sbxd.POOLS)

    def test_stats(self):
        r = self.sbx("stats", "--json")
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        self.assertEqual(json.loads(r.stdout), fake_sbxd.STATS)
        r = self.sbx("stats")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = dict(line.split() for line in r.stdout.decode().splitlines())
        self.assertEqual(rows, {"sandboxes_live": "3", "tasks_running": "1",
                                "netns_recycling": "yes", "netns.created": "5",
                                "netns.reused": "7", "netns.dropped": "0",
                                "host_id_blocks.held": "3", "host_id_blocks.total": "1024"})

    def test_token_list_json(self):
        r = self.sbx("--admin-socket", self.sock, "token", "list", "--json")
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        self.assertEqual(json.loads(r.stdout), fake_sbxd.TOKENS)
        r = self.sbx("--admin-socket", self.sock, "token", "list")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(b"\n")[1].split()[0], b"tok1")

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
        self.assertEqual(r.returncode, SBX_FAIL)

    def test_help(self):
        for args in (["--help"], ["help"], ["exec", "--help"], ["help", "exec"]):
            r = self.sbx(*args)
            self.assertEqual(r.returncode, 0, args)
            self.assertIn(b"usage: sbx", r.stdout)

    def test_every_help_exits_0(self):
        # token issue --help was a usage error (64) while every other help exited 0.
        for args in (["ping", "--help"], ["pools", "--help"], ["stats", "--help"],
                     ["exec", "-h"], ["token", "--help"], ["token", "issue", "--help"],
                     ["token", "issue", "--ttl", "5", "-h"], ["token", "revoke", "--help"],
                     ["token", "list", "--help"], ["audit", "--help"],
                     ["audit", "verify", "--help"], ["completion", "--help"],
                     ["help", "token"]):
            r = self.sbx(*args)
            self.assertEqual((r.returncode, r.stderr), (0, b""), args)
            self.assertIn(b"usage: sbx", r.stdout, args)
            self.assertIn(b"sbx " + args[0].encode() if args[0] != "help" else b"sbx token",
                          r.stdout, args)

    def test_version(self):
        with open(VERSION_H) as f:
            version = re.search(r'#define SBX_VERSION "([^"]+)"', f.read()).group(1)
        r = self.sbx("--version", socket=False)
        self.assertEqual((r.returncode, r.stdout, r.stderr),
                         (0, ("sbx %s\n" % version).encode(), b""))

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
        # sbx's bound is sbxd's largest result (320 MiB: a collect at its pools' caps,
        # cli/sbx_conn.c), refused on the header that declares more.
        r = self.sbx("exec", "hugeheader", str(321 << 20))
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertTrue(r.stderr.startswith(b"sbx: "), r.stderr)
        self.assertEqual(r.stderr.count(b"\n"), 1)
        self.assertEqual(r.stdout, b"")
        # Above the 16 MiB it had before exec's collect: a default pool's full collect.
        r = self.sbx("exec", "huge", str(20 << 20))
        self.assertEqual((r.returncode, len(r.stdout)), (0, 20 << 20))

    def test_large_output(self):
        r = self.sbx("exec", "big", str(8 << 20), "3")
        self.assertEqual(r.returncode, 3)
        self.assertEqual(len(r.stdout), 8 << 20)
        self.assertEqual(r.stdout[:512], bytes(range(256)) * 2)

    def test_stdout_reader_gone(self):
        # The pipeline convention (issue 29): once nobody reads stdout, sbx ends as a
        # process killed by SIGPIPE, silently. It used to go on and exit with the task's 9.
        p = subprocess.Popen([SBX, "--socket", self.sock, "exec", "big", str(4 << 20), "9"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.read(10)
        p.stdout.close()
        err = p.stderr.read()
        p.wait(timeout=30)
        p.stderr.close()
        self.assertEqual(p.returncode, -signal.SIGPIPE, err)
        self.assertEqual(err, b"")

    def test_closed_stdout_cancels_the_task(self):
        # `sbx exec ... | head -2`: the task is cancelled (sbx closes its connection, which
        # the fake sees) and the shell sees sbx killed by SIGPIPE (141).
        marker = os.path.join(self.tmp.name, "spew-closed")
        r = subprocess.run(["bash", "-c", '"$0" --socket "$1" exec spew "$2" | head -2; '
                            'echo "${PIPESTATUS[*]}"', SBX, self.sock, marker],
                           capture_output=True, timeout=60)
        self.assertEqual(r.stdout, b"1\n2\n141 0\n", r.stderr)
        self.assertEqual(r.stderr, b"")
        self.assertTrue(wait_for(lambda: os.path.exists(marker)),
                        "the fake did not see the connection close")

    def test_write_error_fails(self):
        # A write error is sbx's failure: reported, 125, the task cancelled. It used to exit 0
        # with no message.
        with open("/dev/full", "wb") as full:
            for args in (["exec", "out", b"hi\n".hex()], ["exec", "big", str(1 << 20)],
                         ["exec", "--json", "out", b"hi\n".hex()], ["pools"], ["ping"],
                         ["stats", "--json"], ["--version"], ["--help"]):
                r = subprocess.run([SBX, "--socket", self.sock] + args, stdout=full,
                                   stderr=subprocess.PIPE, timeout=60)
                self.assertEqual(r.returncode, SBX_FAIL, (args, r.stderr))
                self.assertTrue(r.stderr.startswith(b"sbx: writing "), (args, r.stderr))
                self.assertIn(b"No space left on device", r.stderr, args)
        with open("/dev/full", "wb") as full:
            r = subprocess.run([SBX, "--socket", self.sock, "exec", "out", b"".hex(),
                                b"oops\n".hex()], stdout=subprocess.PIPE, stderr=full,
                               timeout=60)
        self.assertEqual((r.returncode, r.stdout), (SBX_FAIL, b""))

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
        self.assertEqual(r.returncode, NOT_FOUND)
        self.assertEqual(r.stderr, b"sbx: error: cannot execute the command: execve "
                                   b"'/no/such/binary': ENOENT\n")
        r = self.sbx("exec", "error", "sandbox init died: ECHILD")
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertEqual(r.stderr, b"sbx: error: sandbox init died: ECHILD\n")

    def test_found_but_not_executable_is_126(self):
        # env(1) and the shells: 127 only for ENOENT, 126 for a command that exists but
        # could not be executed. EACCES gave 127 before.
        for errno_name, code in (("ENOENT", NOT_FOUND), ("EACCES", CANNOT_RUN),
                                 ("ENOEXEC", CANNOT_RUN), ("ELOOP", CANNOT_RUN),
                                 ("E2BIG", CANNOT_RUN)):
            r = self.sbx("exec", "execfail", errno_name)
            self.assertEqual(r.returncode, code, errno_name)
            self.assertEqual(r.stderr, b"sbx: error: cannot execute the command: execve "
                                       b"'x y': %s\n" % errno_name.encode())
            r = self.sbx("exec", "--json", "execfail", errno_name)
            self.assertEqual(r.returncode, code, errno_name)
            self.assertTrue(r.stderr.startswith(b"sbx: error: "), r.stderr)
            obj = json.loads(r.stdout)
            self.assertEqual((obj["status"], obj["error_stage"], obj["error_errno"]),
                             ("error", "exec", errno_name))
            self.assertTrue(obj["error"].endswith(errno_name))
        # A failure before the command (its cwd, the token's mounts) is not the command's.
        for stage in ("cwd", "mounts", "setup"):
            r = self.sbx("exec", "error", "chdir '/nope': ENOENT", stage)
            self.assertEqual(r.returncode, SBX_FAIL, stage)

    def test_task_exit_codes_are_not_sbx_failures(self):
        # The old 64, 69, 70 and 77 were also what a task could exit with.
        for code in (64, 69, 70, 77, 124, 125):
            r = self.sbx("exec", "exit", str(code))
            self.assertEqual((r.returncode, r.stderr), (code, b""))

    def test_token_expiry_is_a_kill(self):
        r = self.sbx("exec", "expired")
        self.assertEqual(r.returncode, 137)
        self.assertEqual(r.stderr, b"sbx: the task's token expired, sandbox killed\n")

    def test_rpc_errors(self):
        # Every refusal is a failure of sbx (125); the code tells them apart, on stderr and in
        # --json's error object. They were 77, 69, 64 and 70 by code.
        for code in ("denied", "busy", "limit", "shutting_down", "unknown_pool", "bad_request",
                     "too_large", "internal", "no_such_code"):
            r = self.sbx("exec", "rpcerror", code, "it went \x1b[31mwrong")
            self.assertEqual(r.returncode, SBX_FAIL, code)
            self.assertEqual(r.stderr, b"sbx: it went ?[31mwrong (%s)\n" % code.encode())
            self.assertEqual(r.stdout, b"")
            r = self.sbx("exec", "--json", "rpcerror", code, "it went \x1b[31mwrong")
            self.assertEqual(r.returncode, SBX_FAIL, code)
            self.assertEqual(r.stderr, b"sbx: it went ?[31mwrong (%s)\n" % code.encode())
            self.assertEqual(json.loads(r.stdout),
                             {"error": {"code": code, "message": "it went ?[31mwrong"}})
            self.assertEqual(r.stdout.count(b"\n"), 1)

    def test_json_error_objects(self):
        # --json printed nothing when sbxd was unreachable or the connection broke.
        none = os.path.join(self.tmp.name, "none.sock")
        cases = [
            (["--socket", none, "exec", "--json", "true"], "unreachable"),
            (["--socket", none, "pools", "--json"], "unreachable"),
            (["--socket", none, "stats", "--json"], "unreachable"),
            (["--admin-socket", none, "token", "list", "--json"], "unreachable"),
            (["--admin-socket", none, "audit", "--json"], "unreachable"),
            (["--admin-socket", none, "audit", "verify", "--json"], "unreachable"),
            (["--socket", self.sock, "exec", "--json", "drop"], "disconnected"),
            (["--socket", self.sock, "exec", "--json", "garbage"], "protocol"),
        ]
        for args, code in cases:
            r = subprocess.run([SBX] + args, capture_output=True, timeout=60)
            self.assertEqual(r.returncode, SBX_FAIL, args)
            obj = json.loads(r.stdout)
            self.assertEqual(list(obj), ["error"], args)
            self.assertEqual(obj["error"]["code"], code, args)
            self.assertEqual(r.stderr, b"sbx: %s\n" % obj["error"]["message"].encode(), args)

    def test_connection_dropped(self):
        r = self.sbx("exec", "drop")
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertIn(b"closed the connection", r.stderr)

    def test_garbage_from_daemon(self):
        r = self.sbx("exec", "garbage")
        self.assertEqual(r.returncode, SBX_FAIL)
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
        self.assertEqual(obj["error"], "cannot execute the command: execve 'missing-binary': "
                                       "ENOENT")
        r = self.sbx("exec", "--json", "rpcerror", "denied", "no")
        self.assertEqual((r.returncode, json.loads(r.stdout)),
                         (SBX_FAIL, {"error": {"code": "denied", "message": "no"}}))

    def test_json_egress(self):
        # sbxd sends the result's egress map; --json dropped it.
        r = self.sbx("exec", "--json", "egress")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["egress"],
                         {"profile": "web", "requests": 4, "denials": 1, "bytes": 1234,
                          "flagged": True})
        r = self.sbx("exec", "--json", "exit", "0")
        self.assertIsNone(json.loads(r.stdout)["egress"])

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
            # Lossless: the bytes themselves beside the text whenever the text lost some.
            try:
                data.decode("utf-8")
                self.assertNotIn("stdout_b64", obj)
                self.assertNotIn("stderr_b64", obj)
            except UnicodeDecodeError:
                self.assertEqual(base64.b64decode(obj["stdout_b64"], validate=True), data)
                self.assertEqual(base64.b64decode(obj["stderr_b64"], validate=True), data)

    def answer_once(self, result):
        """A socket whose one connection's first request is answered with result, raw
        msgpack bytes: answers fake_sbxd would not give. Returns its path and thread."""
        import msgpack
        import socket
        import threading
        path = os.path.join(self.tmp.name, "raw-%d.sock" % random.randrange(1 << 30))
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(1)

        def serve():
            conn, _ = srv.accept()
            unpacker = msgpack.Unpacker(raw=False)
            with conn:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    unpacker.feed(data)
                    for msg in unpacker:
                        conn.sendall(b"\x94\x01" + msgpack.packb(msg[1]) + b"\xc0" + result)
            srv.close()
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        return path, t

    def test_json_raw_answers(self):
        import msgpack
        # A map with a repeated key, a NUL inside a key and an unsigned integer above
        # INT64_MAX: unique keys (the last value), the NUL kept, a number.
        raw = (b"\x84" + msgpack.packb("a") + msgpack.packb(1) + msgpack.packb("a") +
               msgpack.packb(2) + msgpack.packb("n\x00ul") + msgpack.packb(3) +
               msgpack.packb("big") + msgpack.packb((1 << 64) - 1))
        path, t = self.answer_once(raw)
        r = self.sbx("--socket", path, "stats", "--json", socket=False)
        t.join(timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        pairs = json.loads(r.stdout, object_pairs_hook=lambda kv: kv)
        self.assertEqual([k for k, _ in pairs], ["a", "n\x00ul", "big"])
        obj = dict(pairs)
        self.assertEqual((obj["a"], obj["n\x00ul"]), (2, 3))
        self.assertEqual(obj["big"], float((1 << 64) - 1))

    def test_json_random_bytes(self):
        rnd = random.Random(7)
        for i in range(20):
            # Mostly-ASCII and mostly-high random mixes, to hit every decoder branch.
            alphabet = bytes(range(256)) if i % 2 else b"ab\n\xc2\xe0\xed\xf0\xf4\x80\xbf\x9f\xa0"
            data = bytes(rnd.choice(alphabet) for _ in range(4000))
            r = self.sbx("exec", "--json", "out", data.hex())
            obj = json.loads(r.stdout)
            self.assertEqual(obj["stdout"], data.decode("utf-8", "replace"))
            self.assertEqual(base64.b64decode(obj.get("stdout_b64", "")) or data, data)
        for n in range(7):  # every length modulo 3, empty included
            data = b"\xff" * n
            r = self.sbx("exec", "--json", "out", data.hex())
            obj = json.loads(r.stdout)
            self.assertEqual(base64.b64decode(obj.get("stdout_b64", "")), data, n)
            self.assertEqual(obj.get("stdout_b64", ""), base64.b64encode(data).decode(), n)

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
