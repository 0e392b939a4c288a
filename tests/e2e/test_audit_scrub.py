# SPDX-License-Identifier: MIT
"""What `sbx audit --task` shows of a task's argv: the ordinary commands of
tests/unit/scrub_corpus/ordinary.txt exactly as they were sent (whole, as `sh -c` gets them,
and split into words, as an agent's argv), and the secrets of secrets.txt gone with the
rest of each line kept, as the unit test of lib/scrub.c expects; none of the secrets is in
the database files or the log."""
import json
import os
import shlex
import subprocess

from harness import SBX, TOP, DaemonTest

CORPUS = os.path.join(TOP, "tests", "unit", "scrub_corpus")
MARK = "[REDACTED]"
# Lines per task: an event is cut at 64 KiB, and these stay far below it.
BATCH = 40


def corpus(name):
    with open(os.path.join(CORPUS, name)) as f:
        return [line.rstrip("\n") for line in f
                if line.strip() and not line.startswith("# ")]


def secret_case(line):
    """(what is sent, what the trail must show, the secrets) of a secrets.txt line."""
    sent, want, secrets = [], [], []
    rest = line.replace("<NL>", "\n")
    while rest:
        a = rest.find("{{")
        if a < 0:
            sent.append(rest)
            want.append(rest)
            break
        b = rest.index("}}", a)
        sent += [rest[:a], rest[a + 2:b]]
        want += [rest[:a], MARK]
        secrets.append(rest[a + 2:b])
        rest = rest[b + 2:]
    return "".join(sent), "".join(want), secrets


def batches(items):
    return [items[i:i + BATCH] for i in range(0, len(items), BATCH)]


class AuditScrub(DaemonTest):
    def admin(self, *args):
        return subprocess.run([SBX, "--admin-socket", self.d.admin] + list(args),
                              capture_output=True, timeout=60)

    def audited_argv(self, argv):
        """Runs argv (its first word "true") and returns the argv `sbx audit --task` shows."""
        with self.d.client() as c:
            res, _, _ = c.exec(argv)
        self.assertEqual(res["status"], "exited", res)
        r = self.admin("audit", "--task", res["task"], "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        chain = json.loads(r.stdout.decode().splitlines()[0])
        req = [e for e in chain["events"] if e["type"] == "task.request"][0]["fields"]
        self.assertEqual(req["argc"], len(argv))
        return req["argv"]

    def assert_same(self, got, want):
        diffs = ["  sent %r\n  shown %r" % (w, g) for g, w in zip(got, want) if g != w]
        self.assertEqual(len(got), len(want))
        self.assertFalse(diffs, "%d arguments changed:\n%s" % (len(diffs), "\n".join(diffs)))

    def test_ordinary_commands_shown_as_sent(self):
        lines = corpus("ordinary.txt")
        self.assertGreaterEqual(len(lines), 200)
        for batch in batches(lines):
            argv = ["true"] + batch
            self.assert_same(self.audited_argv(argv), argv)

    def test_ordinary_commands_split_into_words_shown_as_sent(self):
        words = []
        for line in corpus("ordinary.txt"):
            try:
                words += shlex.split(line)
            except ValueError:
                continue  # not shell syntax (a Windows path, a message): sent whole above
        self.assertGreater(len(words), 1000)
        for batch in [words[i:i + 200] for i in range(0, len(words), 200)]:
            argv = ["true"] + batch
            self.assert_same(self.audited_argv(argv), argv)

    def test_secrets_redacted_and_the_rest_kept(self):
        cases = [secret_case(line) for line in corpus("secrets.txt")]
        secrets = [s for _, _, ss in cases for s in ss]
        for batch in batches(cases):
            got = self.audited_argv(["true"] + [sent for sent, _, _ in batch])
            self.assert_same(got, ["true"] + [want for _, want, _ in batch])
        # The option rule on separate arguments: the one after --password goes whole.
        argv = ["mysql", "-u", "root", "--password", "hunter2-e2e", "--sig",
                "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "app"]
        got = self.audited_argv(["true"] + argv)
        self.assertEqual(got, ["true", "mysql", "-u", "root", "--password", MARK, "--sig",
                               MARK, "app"])
        secrets += [argv[4], argv[6]]
        state = os.path.join(self.d.state, "audit.db")
        blobs = {}
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(state + suffix):
                with open(state + suffix, "rb") as f:
                    blobs[state + suffix] = f.read()
        blobs["log"] = self.d.logtext().encode()
        # Short secrets (hunter2) are also words of other lines, and the ordinary commands
        # are stored as sent: look for the long secrets that no ordinary line holds.
        ordinary = "\n".join(corpus("ordinary.txt"))
        for s in (s for s in secrets if len(s) >= 12 and s not in ordinary):
            for name, blob in blobs.items():
                if s.encode() in blob:
                    self.fail("the secret %r is in %s" % (s, name))

    def test_sbx_audit_table_shows_the_commit(self):
        sha = "9fceb02d0ae598e95dc970b74767f19372d61af8"
        with self.d.client() as c:
            res, _, _ = c.exec(["true", "git", "show", sha])
        r = self.admin("audit", "--task", res["task"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("true git show " + sha, r.stdout.decode())
