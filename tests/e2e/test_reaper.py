# SPDX-License-Identifier: MIT
"""Crash safety and the reaper: after `kill -9` of sbxd while tasks run (one of them with a
daemonized child), a restarted sbxd with the same state dir leaves no process and no cgroup
of those sandboxes, marks the interrupted tasks abandoned, and every result returned before
the kill is in the trail. A second sbxd cannot take a state dir in use, and the periodic
sweep removes a cgroup in our subtree that no sandbox owns."""
import json
import os
import re
import select
import signal
import sqlite3
import subprocess
import time
import unittest

from harness import SBX, SBXD, Daemon, pool_yaml
from test_forkserver import children_of


def query(d, sql, args=()):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.state, "audit.db"), uri=True,
                         timeout=10)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def wait_until(pred, timeout=15, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def pump_until(c, pred, timeout=15):
    """Reads the client's socket (dispatching notifications) until pred() holds."""
    deadline = time.time() + timeout
    while not pred():
        if time.time() > deadline:
            raise AssertionError("timed out pumping the client")
        with c.io_lock:
            if select.select([c.sock], [], [], 0.05)[0]:
                c._pump()


def sandbox_cgroups(d):
    """{controller path: [sandbox cgroup names]} in this daemon's subtree."""
    return {p: sorted(n for n in os.listdir(p) if os.path.isdir(os.path.join(p, n)))
            for p in d.cgroup_paths if os.path.isdir(p)}


def cgroups_running(d, argv):
    """The names of the cgroups that hold a process running argv (exactly): the running
    tasks' sandboxes. Cgroups are reused by later sandboxes of a pool, so a cgroup's name is
    not the id of the sandbox in it."""
    want = ("\0".join(argv) + "\0").encode()
    p = d.cgroup_paths[0]
    found = []
    for n in sorted(os.listdir(p)):
        try:
            with open(os.path.join(p, n, "cgroup.procs")) as f:
                pids = [int(x) for x in f.read().split()]
        except OSError:
            continue
        for pid in pids:
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    if f.read() == want:
                        found.append(n)
                        break
            except OSError:
                pass
    return found


def start_time(pid):
    """(start time, state) of a live pid, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[19]), rest[0]
    except (OSError, IndexError, ValueError):
        return None


def procs_in(d, names):
    """{pid: start time} of the processes in those sandbox cgroups."""
    found = {}
    for p in d.cgroup_paths:
        for n in names:
            try:
                with open(os.path.join(p, n, "cgroup.procs")) as f:
                    for line in f:
                        pid = int(line)
                        st = start_time(pid)
                        if st:
                            found[pid] = st[0]
            except OSError:
                pass
    return found


def alive(procs):
    """The processes of procs still running (same pid and start time, not a zombie)."""
    left = []
    for pid, start in procs.items():
        st = start_time(pid)
        if st and st[0] == start and st[1] != "Z":
            left.append(pid)
    return left


def restart(d, env=None):
    """Starts sbxd again on d's config (same state dir); d.stop() checks it as usual."""
    d.log.close()
    d.log_path = os.path.join(d.dir, "sbxd-restarted.log")
    d.log = open(d.log_path, "w+")
    d.proc = subprocess.Popen([SBXD, "--config", d.config], stdout=d.log,
                              stderr=subprocess.STDOUT, env=env)
    wait_until(lambda: 'msg="ready"' in d.logtext() or d.proc.poll() is not None, 30,
               "the restarted sbxd")
    if d.proc.poll() is not None:
        raise AssertionError("sbxd exited %d:\n%s" % (d.proc.returncode, d.logtext()))


class KillNine(unittest.TestCase):
    def test_kill9_then_restart_reaps_and_marks_abandoned(self):
        d = Daemon(pools=[pool_yaml(warm=2, max=8)])
        stray = None
        try:
            d.wait_warm()
            c = d.client()
            returned = [c.exec(["echo", str(i)])[0]["task"] for i in range(5)]
            started = {}
            on_started = lambda info: started.update({info["task"]: info})  # noqa: E731
            c.exec_start(["sleep", "60"], on_started=on_started)
            # A daemon: its own session, stdio let go, outliving the task's main process.
            c.exec_start(["sh", "-c", "setsid sh -c 'while :; do sleep 1; done' "
                                      "</dev/null >/dev/null 2>&1 & sleep 60"],
                         on_started=on_started)
            pump_until(c, lambda: len(started) == 2)
            running = sorted(started)
            sandboxes = [started[t]["sandbox"] for t in running]
            self.assertEqual(len(set(sandboxes)), 2)
            wait_until(lambda: len(cgroups_running(d, ["sleep", "60"])) == 2,
                       what="both tasks' sleep 60")
            cgroups = cgroups_running(d, ["sleep", "60"])
            # init + sleep, and init + sh + sleep + the daemon's sh and its sleep
            wait_until(lambda: len(procs_in(d, cgroups)) >= 6, what="the tasks' processes")
            procs = procs_in(d, cgroups)
            # Events nobody waits for (task.started) are committed within 10 ms.
            time.sleep(0.2)

            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            c.close()
            left = sandbox_cgroups(d)
            for names in left.values():
                for cg in cgroups:
                    self.assertIn(cg, names, "the dead sbxd's cgroups are there to reap")
            # A process of ours placed in a leftover sandbox cgroup: the reaper must kill it
            # (by pidfd, from that cgroup's cgroup.procs) before it can remove the cgroup.
            stray = subprocess.Popen(["sleep", "300"])
            for p in d.cgroup_paths:
                with open(os.path.join(p, cgroups[0], "cgroup.procs"), "w") as f:
                    f.write(str(stray.pid))

            restart(d)
            self.assertEqual(stray.wait(timeout=10), -signal.SIGKILL)
            stray = None
            self.assertEqual(alive(procs), [], "processes of the dead sbxd's sandboxes remain")
            for names in sandbox_cgroups(d).values():
                for cg in cgroups:
                    self.assertNotIn(cg, names, "a cgroup of the dead sbxd remains")
            log = d.logtext()
            m = re.search(r"cgroups=(\d+) processes=(\d+) failed=0 msg=\"a previous sbxd left",
                          log)
            self.assertIsNotNone(m, log)
            self.assertGreaterEqual(int(m.group(1)), 2)
            self.assertGreaterEqual(int(m.group(2)), 1)

            # the trail: results returned before the kill are there, the rest abandoned (the
            # restarted sbxd writes that before its daemon.start)
            wait_until(lambda: len(query(d, "SELECT 1 FROM events WHERE type = "
                                            "'daemon.start'")) == 2, what="daemon.start")
            for t in returned:
                (status,), = query(d, "SELECT json_extract(fields, '$.status') FROM events "
                                      "WHERE task = ? AND type = 'task.result'", (t,))
                self.assertEqual(status, "exited")
            for t, sb in zip(running, sandboxes):
                chain = query(d, "SELECT type, fields FROM events WHERE task = ? ORDER BY id",
                              (t,))
                types = [x for x, _ in chain]
                self.assertEqual(types[:4], ["task.request", "policy.decision",
                                             "sandbox.assigned", "task.started"])
                self.assertEqual(types[-2:], ["sandbox.destroyed", "task.result"])
                destroyed, result = json.loads(chain[-2][1]), json.loads(chain[-1][1])
                self.assertEqual((destroyed["sandbox"], destroyed["how"], destroyed["by"]),
                                 (sb, "reaped", "reaper"))
                self.assertEqual((result["status"], result["delivered"]), ("abandoned", False))
            (start,), = query(d, "SELECT fields FROM events WHERE type = 'daemon.start' "
                                 "ORDER BY id DESC LIMIT 1")
            start = json.loads(start)
            self.assertEqual(start["abandoned_tasks"], 2)
            self.assertGreaterEqual(start["reaped_cgroups"], 2)
            r = subprocess.run([SBX, "--admin-socket", d.admin, "audit", "--status",
                                "abandoned", "--json"], capture_output=True, timeout=30)
            lines = r.stdout.decode().splitlines()
            self.assertEqual(sorted(json.loads(x)["task"] for x in lines), running)
            r = subprocess.run([SBX, "--admin-socket", d.admin, "audit", "verify"],
                               capture_output=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stdout)
            # and the restarted sbxd works
            with d.client() as c2:
                self.assertEqual(c2.exec(["echo", "again"])[1], b"again\n")
        finally:
            if stray:
                stray.kill()
                stray.wait()
            d.stop()


class ResultsSurvive(unittest.TestCase):
    def test_every_result_received_before_kill9_is_in_the_trail(self):
        """Results stream in; sbxd dies mid-stream. Everything the client got (including
        what was still in the socket when sbxd died) must be in the trail."""
        d = Daemon(pools=[pool_yaml(warm=4, max=8, queue=256)])
        try:
            d.wait_warm()
            c = d.client()
            ids = [c.exec_start(["echo", str(i)])[0] for i in range(60)]
            pending = dict(c.pending)

            def done():
                return [m for m in ids if pending[m].done]
            pump_until(c, lambda: len(done()) >= 20, timeout=60)
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            pump_until(c, lambda: c.closed is not None, timeout=15)
            got = [pending[m].result for m in done() if pending[m].result is not None]
            c.close()
            self.assertGreaterEqual(len(got), 20)
            restart(d)
            wait_until(lambda: len(query(d, "SELECT 1 FROM events WHERE type = "
                                            "'daemon.start'")) == 2, what="daemon.start")
            for res in got:
                rows = query(d, "SELECT json_extract(fields, '$.status'), "
                                "json_extract(fields, '$.delivered') FROM events "
                                "WHERE task = ? AND type = 'task.result'", (res["task"],))
                self.assertEqual(rows, [(res["status"], 1)], res["task"])
            # nothing received is marked abandoned; what was not received may be
            received = {r["task"] for r in got}
            for (task,) in query(d, "SELECT task FROM events WHERE type = 'task.result' AND "
                                    "json_extract(fields, '$.status') = 'abandoned'"):
                self.assertNotIn(task, received)
        finally:
            d.stop()


class StateDirLock(unittest.TestCase):
    def test_second_sbxd_on_the_same_state_dir_is_refused(self):
        d = Daemon(pools=[pool_yaml(warm=1, max=2)])
        try:
            d.wait_warm()
            r = subprocess.run([SBXD, "--config", d.config, "--socket", d.sock + "2",
                                "--admin-socket", d.admin + "2"], capture_output=True,
                               timeout=30)
            self.assertEqual(r.returncode, 73)
            self.assertIn(b"is in use by another sbxd", r.stderr)
            # the first one lost nothing
            with d.client() as c:
                self.assertEqual(c.exec(["echo", "still"])[1], b"still\n")
        finally:
            d.stop()


    def test_second_sbxd_without_the_state_dir_lock_is_refused_by_the_cgroup_lock(self):
        # The state dir's lock file is gone (deleted under the running sbxd, or the same
        # path in another mount namespace): the second sbxd gets the same cgroup subtree,
        # whose lock stops it before its start-up reaper could kill the first one's
        # sandboxes as leftovers.
        d = Daemon(pools=[pool_yaml(warm=2, max=2)])
        try:
            d.wait_warm()
            kids = sorted(children_of(d.proc.pid))  # the fork server and the warm inits
            self.assertGreaterEqual(len(kids), 3, kids)
            os.unlink(os.path.join(d.state, "sbxd.lock"))
            second = subprocess.Popen([SBXD, "--config", d.config, "--socket", d.sock + "2",
                                       "--admin-socket", d.admin + "2"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                _, err = second.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                second.send_signal(signal.SIGTERM)
                second.communicate(timeout=30)
                self.fail("a second sbxd started on the same cgroup subtree")
            self.assertEqual(second.returncode, 73, err)
            self.assertIn(b"is in use by another sbxd", err)
            self.assertEqual(sorted(children_of(d.proc.pid)), kids)
            with d.client() as c:
                self.assertEqual(c.exec(["echo", "still"])[1], b"still\n")
        finally:
            d.stop()


class BusyCgroup(unittest.TestCase):
    def test_a_process_left_in_a_dead_sandboxs_cgroup_is_killed_before_reuse(self):
        """A dead sandbox's cgroup is reset at once by the loop when it is empty, which it
        nearly always is (init reaped, its pid namespace gone). A process that joined it
        from outside the namespace keeps it busy: a worker waits, then kills that process,
        and only then is the cgroup given to the pool's next sandbox."""
        d = Daemon(pools=[pool_yaml(warm=1, max=1)], log_level="debug")
        stray = None
        try:
            d.wait_warm()
            c = d.client()
            msgid, _, _ = c.exec_start(["sleep", "2"])
            cgroups = wait_until(lambda: cgroups_running(d, ["sleep", "2"]),
                                 what="the task's cgroup")
            stray = subprocess.Popen(["sleep", "300"])
            for p in d.cgroup_paths:
                with open(os.path.join(p, cgroups[0], "cgroup.procs"), "w") as f:
                    f.write(str(stray.pid))
            self.assertEqual(c.wait(msgid, 15)["status"], "exited")
            self.assertEqual(stray.wait(timeout=15), -signal.SIGKILL)
            stray = None
            wait_until(lambda: "cgroup still busy, emptied on a worker" in d.logtext(),
                       what="the worker's job in the log")
            # The cgroup was reset (a spare of the pool, or its next sandbox's), or removed
            # when the pool had its max of spares: never more than its one sandbox and one
            # spare. The next sandboxes take the loop's way.
            for _ in range(3):
                self.assertEqual(c.exec(["true"])[0]["status"], "exited")
            for names in sandbox_cgroups(d).values():
                self.assertLessEqual(len(names), 2, names)
            self.assertNotIn("leaking it", d.logtext())
            self.assertEqual(d.logtext().count("emptied on a worker"), 1)
            c.close()
        finally:
            if stray:
                stray.kill()
                stray.wait()
            d.stop()


class Sweep(unittest.TestCase):
    def test_sweep_removes_a_leaked_cgroup(self):
        os.environ["SBXD_REAPER_INTERVAL_MS"] = "200"
        try:
            d = Daemon(pools=[pool_yaml(warm=1, max=2)])
        finally:
            del os.environ["SBXD_REAPER_INTERVAL_MS"]
        stray = None
        try:
            d.wait_warm()
            leak = "0badc0de000001"
            for p in d.cgroup_paths:
                os.mkdir(os.path.join(p, leak))
            stray = subprocess.Popen(["sleep", "300"])
            for p in d.cgroup_paths:
                with open(os.path.join(p, leak, "cgroup.procs"), "w") as f:
                    f.write(str(stray.pid))
            self.assertEqual(stray.wait(timeout=15), -signal.SIGKILL)
            stray = None
            wait_until(lambda: all(not os.path.exists(os.path.join(p, leak))
                                   for p in d.cgroup_paths), what="the leaked cgroup removed")
            wait_until(lambda: "leaked cgroup in our subtree" in d.logtext(), what="the log")
            self.assertIn("level=error mod=reaper cgroup=%s" % leak, d.logtext())
            ev = wait_until(lambda: query(d, "SELECT fields FROM events WHERE type = "
                                             "'reaper.leak'"), what="the reaper.leak event")
            f = json.loads(ev[0][0])
            self.assertEqual((f["cgroup"], f["removed"]), (leak, True))
            self.assertGreaterEqual(f["processes_killed"], 1)
            # live sandboxes are never taken for leaks
            with d.client() as c:
                for _ in range(5):
                    self.assertEqual(c.exec(["sleep", "0.3"])[0]["status"], "exited")
            self.assertEqual(len(query(d, "SELECT 1 FROM events WHERE type = 'reaper.leak'")), 1)
        finally:
            if stray:
                stray.kill()
                stray.wait()
            d.stop()


if __name__ == "__main__":
    unittest.main()
