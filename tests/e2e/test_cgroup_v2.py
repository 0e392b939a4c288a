# SPDX-License-Identifier: MIT
"""sbxd on cgroup v2, the unified hierarchy production hosts run. This machine's cgroup2 mount
has no controllers, so the daemon refuses it (it could not enforce memory, cpu or pids)
unless told to run without limits (`cgroup.require_limits: false`). So told, the rest of
the v2 backend runs for real: every sandbox, forked by the pool's fork server
(`CLONE_INTO_CGROUP`) or made from scratch, lives in a cgroup of its own below sbxd's
subtree, its CPU time comes from `cpu.stat`, a timeout kills all of it through
`cgroup.kill`, and the subtree is gone when sbxd exits (the harness checks)."""
import os
import re
import time
import unittest

from harness import Daemon, DaemonTest, pool_yaml

V2_LIMITS = ("memory", "cpu", "pids")


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[0] == "cgroup2":
                return left.split()[4]
    return None


def own_v2_cgroup():
    """The directory of the unified-hierarchy cgroup this process is in, or None."""
    mnt = cgroup2_mount()
    if not mnt:
        return None
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return mnt + line[3:].strip().rstrip("/")
    return None


def v2_has_limits():
    d = own_v2_cgroup()
    with open(os.path.join(d, "cgroup.controllers")) as f:
        have = f.read().split()
    return all(c in have for c in V2_LIMITS)


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def marked(marker):
    """Pids of live processes whose argv holds marker."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and marker.encode() in cmdline(int(name)):
            out.append(int(name))
    return out


def v2_line(pid):
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def skip_without_cgroup2():
    if os.geteuid() != 0:
        raise unittest.SkipTest("not root")
    if not own_v2_cgroup():
        raise unittest.SkipTest("no cgroup2 mount")


V2_CONFIG = "cgroup:\n  version: 2\n  require_limits: false\n"


class RefusedWithoutControllers(unittest.TestCase):
    def test_v2_without_controllers_is_refused_by_default(self):
        skip_without_cgroup2()
        if v2_has_limits():
            self.skipTest("memory, cpu and pids are delegated on v2 here: sbxd starts")
        before = set(os.listdir(own_v2_cgroup()))
        with self.assertRaises(RuntimeError) as cm:
            Daemon(config_extra="cgroup:\n  version: 2\n")
        msg = str(cm.exception)
        self.assertIn("sbxd exited 71", msg)
        self.assertIn("cannot enforce memory, cpu and pids limits", msg)
        self.assertIn("require_limits: false", msg)
        # It left no subtree behind.
        self.assertEqual(set(os.listdir(own_v2_cgroup())) - before, set())


class OnV2(DaemonTest):
    """The fork server's path: sandboxes are cloned straight into their v2 cgroups."""
    pools = [pool_yaml("python", warm=2, max=4)]
    config_extra = V2_CONFIG
    fork_server = True

    @classmethod
    def setUpClass(cls):
        skip_without_cgroup2()
        if cls.fork_server is False:
            cls.config_extra = V2_CONFIG + "fork_server: false\n"
        super().setUpClass()

    def subtree_dir(self):
        self.assertTrue(self.d.cgroup_paths, self.d.logtext())
        path = self.d.cgroup_paths[0]
        # sbxd's subtree is on the unified hierarchy, below the cgroup sbxd started in.
        self.assertEqual(os.path.dirname(path), own_v2_cgroup())
        self.assertTrue(os.path.exists(os.path.join(path, "cgroup.controllers")))
        return path

    def test_warns_that_limits_are_off(self):
        if v2_has_limits():
            self.skipTest("memory, cpu and pids are delegated on v2 here: limits are on")
        log = self.d.logtext()
        self.assertRegex(log, r'level=warn .*cgroup limits NOT enforced')
        self.assertRegex(log, r'cgroup="v2 \S+ controllers=\S+ kill=\S+ limits=no"')

    def test_each_sandbox_has_a_v2_cgroup_of_its_own(self):
        sub = self.subtree_dir()
        marker = "30.%d%d" % (os.getpid(), time.monotonic_ns() % 1000000)
        with self.d.client() as c:
            msgid, _, _ = c.exec_start(["sleep", marker], None, 60, None, None, None, None,
                                       None)
            deadline = time.time() + 10
            pids = []
            while not pids and time.time() < deadline:
                pids = marked(marker)
                time.sleep(0.02)
            self.assertEqual(len(pids), 1)
            task = pids[0]
            # The task is in a cgroup one level below sbxd's subtree...
            cg = cgroup2_mount() + v2_line(task)
            self.assertEqual(os.path.dirname(cg), sub)
            with open(os.path.join(cg, "cgroup.procs")) as f:
                members = sorted(int(p) for p in f.read().split())
            # ...with its init and nothing else, and no other sandbox shares it.
            self.assertIn(task, members)
            self.assertEqual(len(members), 2, members)
            init = [p for p in members if p != task][0]
            self.assertTrue(os.readlink("/proc/%d/exe" % init).endswith("sbxd-init"))
            self.assertEqual(v2_line(init), v2_line(task))
            for other in os.listdir(sub):
                o = os.path.join(sub, other)
                if os.path.isdir(o) and o != cg:
                    with open(os.path.join(o, "cgroup.procs")) as f:
                        self.assertNotIn(str(task), f.read().split())
            # Inside, the cgroup namespace's root is that cgroup.
            self.assertNotEqual(os.readlink("/proc/%d/ns/cgroup" % task),
                                os.readlink("/proc/self/ns/cgroup"))
            os.kill(task, 15)
            res = c.wait(msgid, 20)
        self.assertEqual((res["status"], res["signal"]), ("signaled", 15), res)
        with self.d.client() as c:
            pools = {p["name"]: p for p in c.call("pools")}
        fs = pools["python"]["fork_server"]
        if self.fork_server:
            self.assertGreater(fs["spawned"], 0, fs)
        else:
            self.assertIsNone(fs)

    def test_timeout_kills_the_whole_cgroup(self):
        marker = "%d%d" % (os.getpid(), time.monotonic_ns() % 1000000)
        res, _ = self.d.exec_json(
            "sh", "-c", "(setsid sleep 41.%s &) ; sleep 42.%s" % (marker, marker), timeout=1)
        self.assertEqual(res["status"], "timeout", res)
        deadline = time.time() + 5
        while (marked("41." + marker) or marked("42." + marker)) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(marked("41." + marker) + marked("42." + marker), [])
        # Nothing of the dead sandbox is left in any cgroup of the subtree: only warm inits.
        self.d.wait_warm("python")
        sub = self.subtree_dir()
        for name in os.listdir(sub):
            p = os.path.join(sub, name)
            if os.path.isdir(p):
                with open(os.path.join(p, "cgroup.procs")) as f:
                    for pid in f.read().split():
                        try:
                            exe = os.readlink("/proc/%s/exe" % pid)
                        except OSError:
                            continue  # gone since: not a leftover
                        self.assertTrue(exe.endswith("sbxd-init"), (name, pid, exe))

    def test_cpu_time_comes_from_cpu_stat(self):
        res, rc = self.d.exec_json(
            "sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo $i")
        self.assertEqual((res["status"], rc, res["stdout"]), ("exited", 0, "300000\n"), res)
        # sh counting to 300000 takes well over 50 ms of CPU on any machine.
        self.assertGreater(res["cpu_ms"], 50, res)
        self.assertLessEqual(res["cpu_ms"], res["wall_ms"] * 2 + 10, res)

    def test_many_tasks_reuse_the_subtree(self):
        sub = self.subtree_dir()
        for i in range(12):
            res, rc = self.d.exec_json("sh", "-c", "echo %d" % i)
            self.assertEqual((res["status"], res["stdout"]), ("exited", "%d\n" % i), res)
        self.d.wait_warm("python")
        # Dead sandboxes' cgroups are kept as spares or removed: never more than the pool's max
        # (plus those being made), never one holding a process that is not a warm init.
        dirs = [n for n in os.listdir(sub) if os.path.isdir(os.path.join(sub, n))]
        self.assertLessEqual(len(dirs), 4 + 2, dirs)


class OnV2FromScratch(OnV2):
    """Without the fork server: a worker clones each sandbox into its v2 cgroup."""
    fork_server = False


if __name__ == "__main__":
    unittest.main()
