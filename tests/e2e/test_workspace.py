# SPDX-License-Identifier: MIT
"""The task's workspace /work (issue 30): a tmpfs of each sandbox's own, sized per pool
(work_size), noexec, nosuid and nodev, owned by the task's user, and the default working
directory; a missing cwd below /work or /tmp is made before the task starts. Asserted in
sandboxes from the fork server and from scratch."""
import json

from harness import DaemonTest, pool_yaml

PY = "python3"

# Fills /work/big until the tmpfs refuses, then says how and how much it took.
FILL = r"""
import errno, json, os
n = 0
err = None
with open("/work/big", "wb") as f:
    block = b"\0" * 65536
    try:
        while n < 64 << 20:
            n += f.write(block)
            f.flush()
    except OSError as e:
        err = errno.errorcode[e.errno]
print(json.dumps({"err": err, "mib": os.stat("/work/big").st_size >> 20}))
"""


class Workspace:
    def run_sh(self, script, cwd=None):
        with self.d.client() as c:
            res, out, err = c.exec(["sh", "-c", script], pool="w", cwd=cwd)
        self.assertEqual((res["status"], res["exit_code"]), ("exited", 0), (res, err))
        return res, out.decode()

    def test_default_cwd_is_the_workspace(self):
        res, out = self.run_sh("pwd")
        self.assertEqual(out, "/work\n")

    def test_writable_by_the_task_and_its_own(self):
        res, out = self.run_sh("echo data > f && cat f; stat -c '%u:%g %a' /work f; id -u")
        lines = out.splitlines()
        uid = lines[3]
        self.assertEqual(lines[0], "data")
        self.assertEqual(lines[1], "%s:%s 755" % (uid, uid))
        self.assertTrue(lines[2].startswith(uid + ":"), lines)

    def test_noexec_nosuid_nodev(self):
        res, out = self.run_sh("cp /bin/true t && chmod 755 t; ./t; echo $?;"
                               " grep ' /work ' /proc/self/mountinfo")
        lines = out.splitlines()
        self.assertEqual(lines[0], "126")
        self.assertEqual(len(lines), 2, lines)
        f = lines[1].split()
        opts = f[5].split(",")
        for flag in ("rw", "nosuid", "nodev", "noexec"):
            self.assertIn(flag, opts, f)
        self.assertEqual(f[f.index("-") + 1], "tmpfs", f)
        # The size the pool asks for (work_size: 4MiB, in KiB).
        self.assertIn("size=4096k", f[-1].split(","), f)

    def test_size_limit_holds_and_the_task_lives(self):
        with self.d.client() as c:
            res, out, err = c.exec([PY, "-c", FILL], pool="w")
        self.assertEqual((res["status"], res["exit_code"]), ("exited", 0), (res, err))
        got = json.loads(out)
        self.assertEqual(got["err"], "ENOSPC", got)
        self.assertLessEqual(got["mib"], 4, got)

    def test_missing_cwd_below_work_or_tmp_is_made(self):
        for cwd in ("/work/a/b", "/tmp/x/y", "/work/deep//er/"):
            with self.subTest(cwd=cwd):
                res, out = self.run_sh("pwd; stat -c '%u %a' . ..; id -u", cwd=cwd)
                lines = out.splitlines()
                self.assertEqual(lines[0], cwd.replace("//", "/").rstrip("/"))
                self.assertEqual(lines[1:3], [lines[3] + " 755"] * 2, lines)
        # An existing one is used as it is.
        res, out = self.run_sh("pwd", cwd="/tmp")
        self.assertEqual(out, "/tmp\n")

    def test_missing_cwd_elsewhere_still_fails(self):
        for cwd, err in (("/nonexistent", "ENOENT"), ("/usr/nonexistent/x", "ENOENT"),
                         ("/work/../nonexistent", "ENOENT"), ("/tmp/./x", "ENOENT")):
            with self.subTest(cwd=cwd):
                with self.d.client() as c:
                    res, out, _ = c.exec(["pwd"], pool="w", cwd=cwd)
                self.assertEqual((res["status"], res["error_stage"]), ("error", "cwd"), res)
                self.assertEqual(res["error"],
                                 "the task could not start: chdir '%s': %s" % (cwd, err))

    def test_nothing_written_is_seen_by_the_next_task(self):
        with self.d.client() as c:
            r1, _, _ = c.exec(["sh", "-c", "echo secret > /work/left-behind; mkdir /work/d"],
                              pool="w")
            self.assertEqual(r1["exit_code"], 0, r1)
            seen = {r1["sandbox"]}
            for _ in range(3):
                r, out, err = c.exec(["ls", "-A", "/work"], pool="w")
                self.assertEqual((r["exit_code"], out), (0, b""), (r, err))
                self.assertNotIn(r["sandbox"], seen)
                seen.add(r["sandbox"])


POOLS = [pool_yaml("w", warm=1, max=2, extra="work_size: 4MiB\n")]


class FromForkServer(Workspace, DaemonTest):
    pools = POOLS


class FromScratch(Workspace, DaemonTest):
    config_extra = "fork_server: false\n"
    pools = POOLS
