# SPDX-License-Identifier: MIT
"""build/sbx against a live sbxd, where the behaviour involves sbxd: exit statuses (125 for
sbx's failures, 126 and 127 for a command that could not be executed or was not found),
write errors, a closed stdout cancelling the task, --json error objects and egress, the
commands' --json, --version of the three programs, the man page and the bash completion
built from the CLI's command table, and README.md's example commands run as written."""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from harness import BUILD, SBX, SBXD, TOP, Daemon, DaemonTest, pool_yaml
import sbx_client

SBX_FAIL, CANNOT_RUN, NOT_FOUND = 125, 126, 127
with open(os.path.join(TOP, "daemon", "wire", "version.h")) as f:
    VERSION = re.search(r'#define SBX_VERSION "([^"]+)"', f.read()).group(1)

EGRESS = """egress:
  profiles:
    web:
      allow_addresses: ["127.0.0.1/32"]
      routes:
        - name: api
          upstream: http://127.0.0.1:9/base
"""


def wait_for(pred, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


class CliLive(DaemonTest):
    pools = [pool_yaml("python", warm=2, max=8)]
    config_extra = EGRESS

    def admin(self, *args, **kw):
        return subprocess.run([SBX, "--admin-socket", self.d.admin] + list(args),
                              capture_output=True, timeout=60, **kw)

    def audit_chain(self, pred):
        """The newest chains' JSON, once one with a result matches pred."""
        def find():
            r = self.admin("audit", "--json", "--limit", "20")
            for line in r.stdout.decode().splitlines():
                chain = json.loads(line)
                if chain["status"] is not None and pred(chain):
                    return chain
            return None
        chain = wait_for(find)
        self.assertIsNotNone(chain, "no such chain in the audit trail")
        return chain

    # ---- exit statuses ----

    def test_not_found_127_and_not_executable_126(self):
        # Today's kernels say ENOENT for a missing command (or a missing #! interpreter) and
        # EACCES for a file without x or a directory: 127 and 126, as env(1) and the shells.
        # A non-executable file gave 127 before.
        cases = [("/no/such/command", NOT_FOUND, "ENOENT"),
                 ("no-such-command-on-path", NOT_FOUND, "ENOENT"),
                 ("/etc/passwd", CANNOT_RUN, "EACCES"),
                 ("/etc", CANNOT_RUN, "EACCES")]
        for cmd, code, name in cases:
            r = self.d.sbx("exec", "--", cmd)
            self.assertEqual(r.returncode, code, (cmd, r.stderr))
            self.assertRegex(r.stderr, rb"^sbx: error: .*execve .*: %s\n$" % name.encode())
            self.assertEqual(r.stdout, b"")
            res, rc = self.d.exec_json(cmd)
            self.assertEqual(rc, code, cmd)
            self.assertEqual((res["status"], res["error_stage"], res["error_errno"]),
                             ("error", "exec", name))
            self.assertTrue(res["error"].endswith(": " + name), res["error"])
        # A file the task made without x, on its exec-allowed scratch or not: still 126.
        r = self.d.sbx("exec", "--", "sh", "-c", "printf 'true\\n' > /tmp/s; exec /tmp/s")
        self.assertEqual(r.returncode, CANNOT_RUN, r.stderr)

    def test_task_codes_pass_through(self):
        for code in (0, 1, 64, 69, 70, 77, 124, 125, 126, 127, 255):
            r = self.d.sbx("exec", "--", "sh", "-c", "exit %d" % code)
            self.assertEqual((r.returncode, r.stderr), (code, b""), code)

    def test_refused_and_unreachable_are_125_with_json_errors(self):
        r = self.d.sbx("exec", "--pool", "pyhton", "true")
        self.assertEqual((r.returncode, r.stdout), (SBX_FAIL, b""))
        self.assertEqual(r.stderr, b"sbx: unknown pool 'pyhton' (unknown_pool)\n")
        r = self.d.sbx("exec", "--json", "--pool", "pyhton", "true")
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertEqual(json.loads(r.stdout),
                         {"error": {"code": "unknown_pool", "message": "unknown pool 'pyhton'"}})
        r = self.d.sbx("exec", "--json", "--token", "sbx_forged_0000", "true")
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "denied")
        self.assertIn(b"(denied)", r.stderr)
        none = os.path.join(self.d.dir, "none.sock")
        for args in (["exec", "--json", "true"], ["pools", "--json"], ["stats", "--json"]):
            r = subprocess.run([SBX, "--socket", none] + args, capture_output=True, timeout=30)
            self.assertEqual(r.returncode, SBX_FAIL, args)
            err = json.loads(r.stdout)["error"]
            self.assertEqual(err["code"], "unreachable")
            self.assertIn(none, err["message"])
        # The admin socket on the agents' socket: an unknown method, refused.
        r = subprocess.run([SBX, "--admin-socket", self.d.sock, "token", "list", "--json"],
                           capture_output=True, timeout=30)
        self.assertEqual(r.returncode, SBX_FAIL)
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "unknown_method")

    # ---- output ----

    def test_write_error_is_125(self):
        with open("/dev/full", "wb") as full:
            for args in (["exec", "--", "echo", "hi"], ["exec", "--json", "--", "echo", "hi"],
                         ["pools"], ["stats", "--json"]):
                r = subprocess.run([SBX, "--socket", self.d.sock] + args, stdout=full,
                                   stderr=subprocess.PIPE, timeout=60)
                self.assertEqual(r.returncode, SBX_FAIL, (args, r.stderr))
                self.assertIn(b"No space left on device", r.stderr, args)
                self.assertTrue(r.stderr.startswith(b"sbx: writing "), r.stderr)

    def test_closed_stdout_cancels_the_task(self):
        # The task would print 100 lines over 5 s; head takes 2. sbx must die by SIGPIPE
        # (141) and sbxd must end the task: it neither exits nor delivers its 292 bytes.
        script = 'for i in $(seq 100); do echo $i; sleep 0.05; done'
        r = subprocess.run(["bash", "-c", '"$0" --socket "$1" exec -- sh -c "$2" | head -2; '
                            'echo "${PIPESTATUS[*]}"', SBX, self.d.sock, script],
                           capture_output=True, timeout=60)
        self.assertEqual(r.stdout, b"1\n2\n141 0\n", r.stderr)
        self.assertEqual(r.stderr, b"")

        def ours(chain):
            req = [e for e in chain["events"] if e["type"] == "task.request"]
            return req and script in req[0]["fields"].get("argv", [])
        chain = self.audit_chain(ours)
        self.assertNotEqual(chain["status"], "exited", chain)
        fin = [e["fields"] for e in chain["events"] if e["type"] == "task.finished"][0]
        self.assertLess(fin["stdout_bytes"], 292, fin)

    def test_json_output_is_lossless(self):
        data = bytes(range(256))
        res, rc = self.d.exec_json("python3", "-c", "import sys; sys.stdout.buffer.write("
                                   "bytes(range(256))); sys.stderr.write('caf\u00e9')")
        self.assertEqual(rc, 0)
        self.assertEqual(res["stdout"], data.decode("utf-8", "replace"))
        self.assertEqual(base64.b64decode(res["stdout_b64"], validate=True), data)
        self.assertEqual(res["stderr"], "caf\u00e9")
        self.assertNotIn("stderr_b64", res)

    def test_json_has_the_results_egress_map(self):
        r = self.admin("token", "issue", "--net", "web")
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.decode().strip()
        fetch = ("import urllib.request, urllib.error\n"
                 "try:\n"
                 "    urllib.request.urlopen('http://example.com/', timeout=10)\n"
                 "except urllib.error.HTTPError as e:\n"
                 "    print(e.code)\n")
        r = self.d.sbx("exec", "--json", "--token", token, "--", "python3", "-c", fetch)
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        self.assertEqual(res["stdout"], "403\n")
        # What sbxd sent, as its own client reads it.
        with self.d.client() as c:
            raw = c.call("exec", {"argv": ["python3", "-c", fetch], "token": token}, 60)
        self.assertEqual(set(res["egress"]), set(raw["egress"]))
        self.assertEqual(res["egress"]["profile"], "web")
        self.assertGreaterEqual(res["egress"]["denials"], 1)
        self.assertEqual(res["egress"]["denials"], raw["egress"]["denials"])
        res, _ = self.d.exec_json("true")
        self.assertIsNone(res["egress"])

    # ---- the other commands ----

    def test_pools_stats_token_list_json(self):
        with self.d.client() as c:
            pools, stats = c.call("pools"), c.call("stats")
        r = self.d.sbx("pools", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual([p["name"] for p in got], [p["name"] for p in pools])
        self.assertEqual(set(got[0]), set(pools[0]))
        r = self.d.sbx("stats", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(set(json.loads(r.stdout)), set(stats))
        r = self.d.sbx("stats")
        self.assertEqual(r.returncode, 0, r.stderr)
        names = [line.split()[0] for line in r.stdout.decode().splitlines()]
        self.assertIn("sandboxes_live", names)
        self.assertIn("host_id_blocks.total", names)
        r = self.admin("token", "issue", "--ttl", "60", "--uses", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.decode().strip()
        r = self.admin("token", "list", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = json.loads(r.stdout)
        self.assertIn(2, [t["uses"] for t in rows])
        self.assertNotIn(token.encode(), r.stdout)  # never a token
        r = self.admin("token", "issue", "--help")
        self.assertEqual((r.returncode, r.stderr), (0, b""))

    def test_versions(self):
        with self.d.client() as c:
            self.assertEqual(c.call("ping")["version"], VERSION)
        for prog, name in ((SBX, "sbx"), (SBXD, "sbxd"),
                           (os.path.join(BUILD, "sbx-load"), "sbx-load")):
            if not os.path.exists(prog):
                self.skipTest("%s is not built" % prog)
            r = subprocess.run([prog, "--version"], capture_output=True, timeout=30)
            self.assertEqual((r.returncode, r.stdout, r.stderr),
                             (0, ("%s %s\n" % (name, VERSION)).encode(), b""), prog)


class CliDocs(unittest.TestCase):
    """build/sbx.1 and build/sbx.bash-completion, which make writes with sbx itself."""

    def setUp(self):
        self.man = os.path.join(BUILD, "sbx.1")
        self.comp = os.path.join(BUILD, "sbx.bash-completion")
        for p in (self.man, self.comp):
            if not os.path.exists(p):
                self.fail("%s is not built (make all builds it)" % p)

    def test_man_page_renders(self):
        for tool in ("man", "groff"):
            if not shutil.which(tool):
                self.skipTest("%s is not installed (make deps installs it)" % tool)
        r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", self.man],
                           capture_output=True, timeout=60)
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        r = subprocess.run(["man", "-l", self.man], capture_output=True, timeout=60,
                           env=dict(os.environ, MANPAGER="cat", MANWIDTH="100"))
        self.assertEqual(r.returncode, 0, r.stderr)
        text = r.stdout.decode()
        self.assertIn("SBX(1)", text)
        self.assertIn("sbx %s" % VERSION, text)
        # Every command and option of the help is in the page: they come from one table.
        help_text = subprocess.run([SBX, "--help"], capture_output=True).stdout.decode()
        for cmd in re.findall(r"^  sbx (\S+)", help_text, re.M):
            self.assertIn("sbx " + cmd, text)
            sub = subprocess.run([SBX, "help", cmd], capture_output=True).stdout.decode()
            for flag in re.findall(r"^  (--[a-z-]+)", sub, re.M):
                self.assertRegex(text, r"\n\s+%s\b" % re.escape(flag), (cmd, flag))
        for code in ("125", "126", "127", "141"):
            self.assertRegex(text, r"\n\s+%s\s" % code)
        # The man page file is what sbx writes.
        with open(self.man, "rb") as f:
            self.assertEqual(f.read(), subprocess.run([SBX, "help", "--man"],
                                                      capture_output=True).stdout)

    def complete(self, line):
        """COMPREPLY of _sbx for the command line typed so far."""
        script = ('source "$0"; read -ra COMP_WORDS <<< "$1"; '
                  '[[ $1 == *" " ]] && COMP_WORDS+=(""); '
                  'COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _sbx; echo "${COMPREPLY[*]}"')
        r = subprocess.run(["bash", "-c", script, self.comp, line], capture_output=True,
                           timeout=30)
        self.assertEqual((r.returncode, r.stderr), (0, b""), line)
        return r.stdout.decode().split()

    def test_bash_completion(self):
        self.assertEqual(self.complete("sbx ex"), ["exec"])
        self.assertEqual(self.complete("sbx "), ["ping", "pools", "stats", "exec", "session",
                                                 "cp", "token", "audit", "completion", "help"])
        self.assertEqual(self.complete("sbx --socket /tmp/x.sock po"), ["pools"])
        self.assertEqual(self.complete("sbx --v"), ["--version"])
        self.assertEqual(self.complete("sbx exec --po"), ["--pool"])
        self.assertEqual(self.complete("sbx exec --pool python --js"), ["--json"])
        self.assertEqual(self.complete("sbx exec --pool "), [])  # a value: nothing to offer
        self.assertEqual(self.complete("sbx exec -- ls --j"), [])  # the task's words
        self.assertEqual(self.complete("sbx exec ls --j"), [])
        self.assertEqual(self.complete("sbx token "), ["issue", "revoke", "list"])
        self.assertEqual(self.complete("sbx token issue --t"), ["--ttl"])
        self.assertEqual(self.complete("sbx audit v"), ["verify"])
        self.assertEqual(self.complete("sbx session "), ["open", "list", "ls", "close"])
        self.assertEqual(self.complete("sbx session open --i"), ["--idle-timeout"])
        self.assertEqual(self.complete("sbx exec --co"), ["--collect"])
        self.assertEqual(self.complete("sbx exec --file "), [])  # a value
        self.assertEqual(self.complete("sbx cp --t"), ["--token"])
        self.assertEqual(self.complete("sbx audit --se"), ["--session"])
        self.assertEqual(self.complete("sbx help st"), ["stats"])
        with open(self.comp, "rb") as f:
            self.assertEqual(f.read(), subprocess.run([SBX, "completion", "bash"],
                                                      capture_output=True).stdout)


class ReadmeExample(unittest.TestCase):
    """README.md's "Using it" commands, as written, in a directory of their own (./var and
    ./shared are theirs) and a network namespace of their own (the embedded default's
    metrics port, 127.0.0.1:9464, is then theirs too)."""

    def readme_commands(self):
        with open(os.path.join(TOP, "README.md")) as f:
            text = f.read()
        section = text.split("## Using it", 1)[1].split("\n## ", 1)[0]
        lines = [line[4:] for line in section.splitlines() if line.startswith("    ")]
        self.assertGreater(len(lines), 10)
        return lines

    def test_readme_commands_work_as_written(self):
        if not shutil.which("unshare") or not shutil.which("ip"):
            self.skipTest("needs unshare and ip (util-linux, iproute2)")
        work = tempfile.mkdtemp(prefix="sbx-readme-")
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        os.symlink(BUILD, os.path.join(work, "build"))
        script = ["ip link set lo up"]
        for i, line in enumerate(self.readme_commands()):
            script.append(line)
            if line.startswith("build/sbxd"):
                # A daemon in the foreground would never let the next command run.
                self.assertRegex(line, r"&\s*(#.*)?$", "README starts sbxd in the foreground")
                # The one liberty taken: wait until the daemon it started answers.
                script.append("SBXD=$!; for _ in $(seq 400); do "
                              "[ -S var/sbxd.sock ] && [ -S var/sbxd-admin.sock ] && break; "
                              "sleep 0.05; done")
            else:
                script.append('echo "@@ %d $?"' % i)
        script.append('kill -TERM "$SBXD"; wait "$SBXD"; echo "@@ sbxd $?"')
        # Its own session, so that whatever it started is ended with it if it hangs.
        p = subprocess.Popen(["unshare", "--net", "bash", "-c", "\n".join(script)], cwd=work,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        try:
            stdout, stderr = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)
            stdout, stderr = p.communicate(timeout=60)
            self.fail("README's commands hung:\n%s\n%s" % (stdout.decode(errors="replace"),
                                                            stderr.decode(errors="replace")))
        r = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
        out = r.stdout.decode(errors="replace")
        lines = self.readme_commands()
        codes = dict(re.findall(r"^@@ (\S+) (\d+)$", out, re.M))
        for i, line in enumerate(lines):
            if not line.startswith("build/sbxd"):
                self.assertEqual(codes.get(str(i)), "0", "%r failed:\n%s\n%s" %
                                 (line, out[-3000:], r.stderr.decode(errors="replace")[-3000:]))
        self.assertEqual(codes.get("sbxd"), "0", out[-2000:])
        self.assertIn("pong (version %s)" % VERSION, out)
        self.assertRegex(out, r"(?m)^42$")
        self.assertRegex(out, r"(?m)^\{'a': 1\}$")
        self.assertIn('"stdout":"fast\\n"', out)
        self.assertRegex(out, r"(?m)^hello$")  # the token's read-only mount
        self.assertRegex(out, r"(?m)^HELLO$")  # --file in, --collect out
        self.assertRegex(out, r"(?m)^WORLD$")  # a session, sbx cp both ways
        self.assertRegex(out, r"(?m)^ok: \d+ rows verified")
        self.assertIn("sbx_tasks_total", out)
        self.assertFalse(os.path.exists(os.path.join(work, "var", "sbxd.sock")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
