# SPDX-License-Identifier: MIT
"""Start-up and shutdown: config errors, the embedded default, SIGTERM drains (tasks
finish within the grace, the rest is killed), and nothing is left behind."""
import os
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from harness import Daemon, DaemonTest, pool_yaml, SBXD, sandbox_processes
import sbx_client


def start_and_wait(c, argv):
    """Starts argv on client c and returns its msgid once exec.started has come."""
    started = threading.Event()
    msgid = c.exec_start(argv, on_started=lambda x: started.set())[0]
    while not started.is_set():
        try:
            c.wait(msgid, timeout=0.05)
        except TimeoutError:
            pass
    return msgid


class Config(unittest.TestCase):
    def run_sbxd(self, *args):
        return subprocess.run([SBXD] + list(args), capture_output=True, timeout=30)

    def test_embedded_default_checks(self):
        r = self.run_sbxd("--check-config")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"<embedded>: ok (4 pools)", r.stdout)

    def test_bad_config_names_file_line_and_column(self):
        d = tempfile.mkdtemp(prefix="sbx-cfg-")
        path = os.path.join(d, "bad.yaml")
        with open(path, "w") as f:
            f.write("socket: /tmp/x.sock\nlimits:\n  max_conections: 5\n")
        r = self.run_sbxd("--config", path, "--check-config")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(("%s:3:3: unknown key 'max_conections'" % path).encode(), r.stderr)
        with open(path, "w") as f:
            f.write("socket: [unclosed\n")
        r = self.run_sbxd("--config", path)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(path.encode() + b":", r.stderr)

    def test_bad_pool_file_is_refused(self):
        d = tempfile.mkdtemp(prefix="sbx-cfg-")
        os.mkdir(os.path.join(d, "pools"))
        with open(os.path.join(d, "pools", "python.yaml"), "w") as f:
            f.write("name: python\nwarm: 9\nmax: 2\n")
        with open(os.path.join(d, "sbxd.yaml"), "w") as f:
            f.write("pools_dir: pools\n")
        r = self.run_sbxd("--config", os.path.join(d, "sbxd.yaml"), "--check-config")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"python.yaml:", r.stderr)
        self.assertIn(b"warm", r.stderr)

    def test_unknown_flag_is_a_usage_error(self):
        r = self.run_sbxd("--no-such-flag")
        self.assertEqual(r.returncode, 64)


class Lifecycle(unittest.TestCase):
    def test_embedded_default_serves_its_four_pools(self):
        d = tempfile.mkdtemp(prefix="sbx-emb-")
        sock, admin = os.path.join(d, "a.sock"), os.path.join(d, "b.sock")
        log = open(os.path.join(d, "log"), "w+")
        p = subprocess.Popen([SBXD, "--state-dir", os.path.join(d, "state"), "--socket", sock,
                              "--admin-socket", admin, "--metrics", ""], stdout=log, stderr=log)
        try:
            deadline = time.time() + 20
            while not os.path.exists(sock) and time.time() < deadline:
                time.sleep(0.05)
            with sbx_client.Client(sock) as c:
                names = sorted(x["name"] for x in c.call("pools"))
                self.assertEqual(names, ["heavy", "integrations", "parsing", "python"])
                res, out, _ = c.exec(["echo", "default"])
                self.assertEqual((res["pool"], out), ("python", b"default\n"))
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                code = p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                code = "hung"
            self.assertEqual(code, 0)
        self.assertFalse(os.path.exists(sock))

    def test_second_daemon_does_not_steal_a_live_socket(self):
        d = Daemon(pools=[pool_yaml(warm=1)])
        try:
            r = subprocess.run([SBXD, "--config", d.config], capture_output=True, timeout=30)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(b"in use", r.stderr)
            with d.client() as c:
                self.assertTrue(c.call("ping")["pong"])
        finally:
            d.stop()

    def test_sigterm_lets_running_tasks_finish(self):
        d = Daemon(pools=[pool_yaml(warm=2)], config_extra="")
        c = d.client()
        msgid = start_and_wait(c, ["sh", "-c", "sleep 1; echo finished"])
        d.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        self.assertFalse(os.path.exists(d.sock))  # no new connections
        with self.assertRaises(sbx_client.RpcError) as cm:  # no new tasks
            c.call("exec", {"argv": ["true"]}, timeout=10)
        self.assertEqual(cm.exception.code, "shutting_down")
        res = c.wait(msgid, timeout=30)
        self.assertEqual(res["status"], "exited")
        c.close()
        d.stop()

    def test_grace_over_kills_the_rest(self):
        d = Daemon(pools=[pool_yaml(warm=1)], config_extra="drain_grace: 1s\n")
        c = d.client()
        msgid = start_and_wait(c, ["sh", "-c", "setsid sleep 4401 & sleep 4402"])
        t0 = time.time()
        d.proc.send_signal(signal.SIGTERM)
        res = c.wait(msgid, timeout=30)
        self.assertEqual(res["status"], "error")
        self.assertIn("shut down", res["error"])
        c.close()
        d.stop(timeout=30)
        self.assertLess(time.time() - t0, 15)

    def test_signals_during_the_exit_change_nothing(self):
        # SIGTERM after SIGTERM until sbxd has exited: the drain ends, the cgroup subtree
        # and the sockets go, and the exit status is 0. A signal in the moment between the
        # drain's end and the exit used to find the default action restored (a death by
        # SIGTERM, the cgroup subtree left): with that moment back (signals_close without
        # its block), this test failed in 4 of 5 runs.
        for _ in range(2):
            d = Daemon(pools=[pool_yaml(warm=2)])
            d.wait_warm()
            with d.client() as c:
                res, out, _ = c.exec(["echo", "ok"])
            self.assertEqual(out, b"ok\n")
            pidfd = os.pidfd_open(d.proc.pid)  # no other process gets these, whatever happens
            sent = 0
            try:
                while d.proc.poll() is None:
                    try:
                        signal.pidfd_send_signal(pidfd, signal.SIGTERM)
                        sent += 1
                    except ProcessLookupError:
                        break
                    # About one every 20 us: often enough to hit a window of a few
                    # microseconds, seldom enough for the drain to go on meanwhile.
                    t = time.perf_counter() + 20e-6
                    while time.perf_counter() < t:
                        pass
            finally:
                os.close(pidfd)
            self.assertGreater(sent, 2)
            d.stop()
            # Logged once, however many came after the drain.
            self.assertLessEqual(d.logtext().count("drained already"), 1)

    def test_second_sigterm_kills_at_once(self):
        d = Daemon(pools=[pool_yaml(warm=1)], config_extra="drain_grace: 60s\n")
        c = d.client()
        msgid = start_and_wait(c, ["sleep", "4403"])
        d.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        t0 = time.time()
        d.proc.send_signal(signal.SIGTERM)
        res = c.wait(msgid, timeout=30)
        self.assertEqual(res["status"], "error")
        c.close()
        d.stop(timeout=30)
        self.assertLess(time.time() - t0, 10)
        self.assertEqual(sandbox_processes(d.subtree), [])


class TopUp(DaemonTest):
    # topup_idle 2 s instead of 20 ms, so that the test's timing has room to spare.
    pools = [pool_yaml("python", warm=4, max=8)]
    config_extra = "topup_idle: 2s\n"

    def pool(self, c):
        return [p for p in c.call("pools") if p["name"] == "python"][0]

    def test_waits_for_a_pause_above_half_and_refills_at_once_below(self):
        self.d.wait_warm("python")
        with self.d.client() as c:
            created = self.pool(c)["created"]
            t0 = time.monotonic()
            self.assertEqual(c.exec(["true"])[0]["status"], "exited")
            # 3 of 4 left: no sandbox is made while tasks may still come...
            p = self.pool(c)
            self.assertLess(time.monotonic() - t0, 1.5)
            self.assertEqual((p["created"], p["warm"]), (created, 3), p)
        # ...and the pool is topped up once none has started for topup_idle.
        self.d.wait_warm("python")
        self.assertGreater(time.monotonic() - t0, 1.5)
        with self.d.client() as c:
            self.assertEqual(self.pool(c)["created"], created + 1)
            # Below half (1 of 4 left), it is refilled to its target at once.
            for _ in range(3):
                self.assertEqual(c.exec(["true"])[0]["status"], "exited")
            t1 = time.monotonic()
        self.d.wait_warm("python")
        self.assertLess(time.monotonic() - t1, 1.5)



class SetupTimeout(unittest.TestCase):
    def test_an_init_that_never_gets_ready_is_failed_and_killed(self):
        # An "init" that never answers CTL_SETUP: after the setup timeout (10 s) its sandbox
        # counts as a failed creation and is killed; nothing is left when sbxd stops.
        d0 = tempfile.mkdtemp(prefix="sbx-hang-")
        os.chmod(d0, 0o755)  # the child runs as an unprivileged host id
        fake = os.path.join(d0, "hang-init")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\nexec sleep 4404\n")
        os.chmod(fake, 0o755)
        d = Daemon(pools=[pool_yaml(warm=1, max=1)], config_extra="init_path: %s\n" % fake)
        try:
            deadline = time.time() + 30
            failed = 0
            while time.time() < deadline and failed == 0:
                with d.client() as c:
                    failed = c.call("pools")[0]["failed"]
                time.sleep(0.5)
            self.assertGreaterEqual(failed, 1)
            self.assertIn("did not finish its setup", d.logtext())
        finally:
            d.stop()


def policy_in(stat):
    """The scheduling policy in the text of a /proc/.../stat: field 41, the 39th after the
    comm."""
    return int(stat[stat.rindex(")") + 2:].split()[38])


def policy_of(path):
    with open(path) as f:
        return policy_in(f.read())


class Scheduling(DaemonTest):
    """sbxd, its threads, its fork servers and its sandboxes' tasks run under SCHED_BATCH
    (sched_batch: true, the default)."""
    pools = [pool_yaml("python", warm=1, max=2)]
    expect = os.SCHED_BATCH
    from_scratch = False

    def task_policy(self):
        with self.d.client() as c:
            res, out, err = c.exec(["cat", "/proc/self/stat"])
        self.assertEqual(res["status"], "exited", (res, err))
        return policy_in(out.decode())

    def test_policy_of_sbxd_its_threads_fork_server_and_tasks(self):
        self.assertEqual(self.task_policy(), self.expect)
        pid = self.d.proc.pid
        tids = os.listdir("/proc/%d/task" % pid)
        self.assertGreater(len(tids), 1)  # the audit writer and the workers at least
        for tid in tids:
            self.assertEqual(policy_of("/proc/%d/task/%s/stat" % (pid, tid)), self.expect, tid)
        with self.d.client() as c:
            server = [p for p in c.call("pools") if p["name"] == "python"][0]["fork_server"]
        if self.from_scratch:
            self.assertIsNone(server)
            return
        self.assertGreater(server["pid"], 0)
        self.assertEqual(policy_of("/proc/%d/stat" % server["pid"]), self.expect)


class SchedulingFromScratch(Scheduling):
    """Sandboxes made without a fork server (exec'd by a worker thread's child) too."""
    config_extra = "fork_server: false\n"
    from_scratch = True


class SchedulingOff(Scheduling):
    """sched_batch: false keeps the policy sbxd was started with (the test's own)."""
    config_extra = "sched_batch: false\n"
    expect = os.sched_getscheduler(0)


class SchedulingChosen(Scheduling):
    """A policy other than SCHED_OTHER is the operator's choice: kept, even with
    sched_batch: true."""
    wrap = ["chrt", "--idle", "0"]
    expect = os.SCHED_IDLE


if __name__ == "__main__":
    unittest.main()
