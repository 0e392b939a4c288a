# SPDX-License-Identifier: MIT
"""The fork server: each pool's sandboxes are forked from a zygote that built the pool's root
once; they are sbxd's children with names of their own, and losing the zygote costs nothing
but speed."""
import hashlib
import json
import os
import signal
import subprocess
import time
import unittest

from harness import Daemon, DaemonTest, pool_yaml


def ppid_of(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("PPid:"):
                return int(line.split()[1])
    return None


def children_of(pid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if ppid_of(int(name)) == pid:
                    out.append(int(name))
            except OSError:
                pass
    return out


def exe_of(pid):
    """The process's executable, or "" when it is gone (a dying sandbox reaped meanwhile)."""
    try:
        return os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return ""


class ForkServer(DaemonTest):
    pools = [pool_yaml("python", warm=2, max=4), pool_yaml("py_2", warm=1, max=2)]

    def fork_server(self):
        with self.d.client() as c:
            pools = {p["name"]: p for p in c.call("pools")}
        return pools["python"]["fork_server"]

    def running_fork_server(self):
        """The fork server's counters once one runs (sandboxes are made as tasks use them)."""
        deadline = time.time() + 10
        while True:
            st = self.fork_server()
            if st["pid"] > 0 or time.time() > deadline:
                return st
            self.run_sh("true")

    def warm_init(self):
        """The pid of a warm sandbox's init (sbxd's child, as the fork server is)."""
        self.running_fork_server()
        self.d.wait_warm("python")
        self.d.wait_warm("py_2")
        with self.d.client() as c:
            servers = {p["fork_server"]["pid"] for p in c.call("pools")}
        inits = [p for p in children_of(self.d.proc.pid)
                 if p not in servers and exe_of(p).endswith("sbxd-init")]
        self.assertTrue(inits)
        return inits[0]

    def run_sh(self, script):
        with self.d.client() as c:
            res, out, err = c.exec(["sh", "-c", script])
        self.assertEqual(res["status"], "exited", (res, err))
        return res, out.decode()

    def test_sandboxes_come_from_the_fork_server(self):
        self.d.wait_warm("python")
        before = self.fork_server()["spawned"]
        for _ in range(5):
            self.run_sh("true")
        # The pool tops itself up once tasks stop coming (daemon_refill): from the server.
        self.d.wait_warm("python")
        st = self.running_fork_server()
        self.assertGreaterEqual(st["spawned"], before + 5, st)
        self.assertFalse(st["disabled"], st)
        z = st["pid"]
        self.assertGreater(z, 0)
        # The zygote: sbxd-init, sbxd's child, in mount and network namespaces of its own.
        self.assertEqual(ppid_of(z), self.d.proc.pid)
        self.assertTrue(os.readlink("/proc/%d/exe" % z).endswith("sbxd-init"))
        for ns in ("mnt", "net"):
            self.assertNotEqual(os.readlink("/proc/%d/ns/%s" % (z, ns)),
                                os.readlink("/proc/self/ns/%s" % ns), ns)
        # It keeps CAP_SYS_ADMIN (to join network namespaces) and CAP_SETUID (to create each
        # sandbox's user namespace as that sandbox's root), and CAP_SYS_PTRACE (to join each
        # new sandbox's pid namespace through its pidfd for vm.memfd_noexec, where the kernel
        # has it: issue 29) alone, and no_new_privs; between forks it is the host's root
        # again, all four ids.
        status = dict(l.split(":\t", 1) for l in open("/proc/%d/status" % z).read().splitlines()
                      if ":\t" in l)
        caps = (1 << 21) | (1 << 7)
        if os.path.exists("/proc/sys/vm/memfd_noexec"):
            caps |= 1 << 19
        self.assertEqual(int(status["CapEff"], 16), caps)
        self.assertEqual(int(status["CapPrm"], 16), caps)
        self.assertEqual(status["NoNewPrivs"].strip(), "1")
        self.assertEqual(status["Uid"].split(), ["0", "0", "0", "0"])
        # Its root is the template: /tmp and /work empty (sandboxes build on mounts of their
        # own) and a /proc that lists no process at all, should a sandbox's own ever be
        # uncovered.
        root = "/proc/%d/root" % z
        self.assertEqual(os.listdir(root + "/tmp"), [])
        self.assertEqual(os.listdir(root + "/work"), [])
        self.assertFalse([n for n in os.listdir(root + "/proc") if n.isdigit()])
        self.assertTrue(os.path.isdir(root + "/usr/bin"))
        # Sandboxes are sbxd's children (CLONE_PARENT): the zygote has none.
        self.assertEqual(children_of(z), [])

    def test_init_lives_in_the_programs_first_2_mib(self):
        """A warm sandbox's init has no stack or heap mapping of its own: the zygote's
        stacks are MADV_DONTFORK, init starts on a stack in the bss, and nothing of it
        allocates (ARCHITECTURE.md, "Address space"). All it can write lies in one 2 MiB
        block with the program, under one page-table page."""
        if os.uname().machine != "x86_64":
            self.skipTest("the stacks in the bss need sys.c's x86-64 trampoline")
        pid = self.warm_init()
        maps = open("/proc/%d/maps" % pid).read().splitlines()
        names = [l.split()[5] for l in maps if len(l.split()) > 5]
        self.assertNotIn("[stack]", names, maps)
        self.assertNotIn("[heap]", names, maps)
        blocks = set()
        for l in maps:
            span, perms = l.split()[:2]
            if "w" in perms:
                lo, hi = (int(x, 16) for x in span.split("-"))
                blocks |= {lo >> 21, (hi - 1) >> 21}
        self.assertEqual(len(blocks), 1, maps)
        # The zygote keeps the stack it was started on, which no sandbox gets.
        z = self.fork_server()["pid"]
        self.assertIn("[stack]", open("/proc/%d/maps" % z).read())

    def test_sandboxes_share_their_pools_names(self):
        # The names are the template's: no mount of a sandbox's own for them.
        script = ("hostname; cat /etc/hostname; getent hosts $(hostname) | cut -f1 -d' ';"
                  " stat -c %F /etc/hosts; echo x > /etc/hosts 2>/dev/null || echo refused;"
                  " grep -c -e ' /etc' -e ' /run' /proc/self/mountinfo")
        for pool, name in (("python", "sbx-python"), ("py_2", "sbx-py-2")):
            seen = set()
            for _ in range(2):
                with self.d.client() as c:
                    res, out, err = c.exec(["sh", "-c", script], pool=pool)
                self.assertEqual(res["status"], "exited", (res, err))
                lines = out.decode().split("\n")
                self.assertEqual(lines[:6], [name, name, "127.0.1.1", "regular file", "refused",
                                             "0"])
                seen.add(res["sandbox"])
            self.assertEqual(len(seen), 2)

    def test_dev_is_a_read_only_directory_of_the_template(self):
        # No mount of its own to copy and tear down: the six nodes on the template's root,
        # which has no nodev but is read-only, and stays so for the sandbox.
        res, out = self.run_sh("grep -c ' /dev ' /proc/self/mountinfo;"
                               " grep ' / / ' /proc/self/mountinfo | cut -d' ' -f6;"
                               " touch /dev/x 2>&1 | grep -c 'Read-only';"
                               " mount -o remount,rw / 2>/dev/null || echo refused;"
                               " head -c 3 /dev/zero | wc -c; echo hi > /dev/null && echo null-ok;"
                               " ls /dev | tr '\\n' ' '")
        lines = out.splitlines()
        self.assertEqual(lines[0], "0")
        self.assertIn("ro", lines[1].split(","))
        self.assertNotIn("nodev", lines[1].split(","))
        self.assertEqual(lines[2:6], ["1", "refused", "3", "null-ok"])
        self.assertEqual(lines[6].split(), ["fd", "full", "null", "random", "stderr", "stdin",
                                            "stdout", "tty", "urandom", "zero"])
        # Nor may the sandbox's root (init's namespaces, every capability there) make it
        # writable: the kernel locked the flag when it copied the template.
        r = subprocess.run(["nsenter", "-t", str(self.warm_init()), "-a", "--",
                            "mount", "-o", "remount,bind,rw", "/"],
                           capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("permission denied", r.stderr.lower())

    def test_kernel_knobs_stay_out_of_reach_of_the_sandbox_root(self):
        # A forked sandbox binds only /proc/sys read-only over its /proc (and its boot id into
        # it): the rest of /proc's writable files belong to the host's root, whom its user
        # namespace does not map.
        # Checked as the sandbox's root itself (all of init's namespaces, uid 0 and
        # every capability there), opening for writing without writing anything.
        inits = [self.warm_init()]
        probe = ("import errno, json, os\n"
                 "out = {'uid': os.getuid(), 'cap': [l.split()[1] for l in open('/proc/self/status')"
                 " if l.startswith('CapEff')][0]}\n"
                 "for p in %r:\n"
                 "    try:\n"
                 "        os.close(os.open(p, os.O_WRONLY)); out[p] = 'opened'\n"
                 "    except OSError as e:\n"
                 "        out[p] = errno.errorcode[e.errno]\n"
                 "out['mounts'] = [l.split()[4] + ' ' + l.split()[5].split(',')[0]"
                 " for l in open('/proc/self/mountinfo') if l.split()[4].startswith('/proc/')]\n"
                 "print(json.dumps(out))\n")
        # The sysctls of the sandbox's ipc namespace are its root's: the bind stops them. The
        # rest is the host's root's, the uts and network sysctls included.
        own = ["/proc/sys/kernel/shmmax", "/proc/sys/kernel/msgmax"]
        paths = own + ["/proc/sys/kernel/hostname", "/proc/sys/net/ipv4/ip_forward",
                       "/proc/irq/default_smp_affinity", "/proc/sysrq-trigger"]
        paths += sorted("/proc/bus/pci/%s/%s" % (b, f) for b in os.listdir("/proc/bus/pci")
                        if os.path.isdir("/proc/bus/pci/" + b)
                        for f in os.listdir("/proc/bus/pci/" + b))[:1]
        r = subprocess.run(["nsenter", "-t", str(inits[0]), "-a", "--",
                            "/usr/bin/python3", "-c", probe % paths],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["uid"], 0)
        self.assertEqual(int(out["cap"], 16) & (1 << 21), 1 << 21)  # CAP_SYS_ADMIN there
        # And its own boot id over the host's (issue 29), read-only too.
        self.assertEqual(out["mounts"], ["/proc/sys ro", "/proc/sys/kernel/random/boot_id ro"])
        for p in own:
            self.assertEqual(out[p], "EROFS", p)
        for p in paths[len(own):]:
            if os.path.exists(p):
                self.assertEqual(out[p], "EACCES", p)
            else:
                self.assertEqual(out[p], "ENOENT", p)
        # The task, with neither that uid nor any capability, can open none of them either.
        with self.d.client() as c:
            res, tout, err = c.exec(["python3", "-c", probe % paths])
        self.assertEqual(res["status"], "exited", (res, err))
        task = json.loads(tout)
        self.assertEqual((task["uid"], task["cap"]), (10001, "0000000000000000"))
        self.assertEqual(task["mounts"], ["/proc/sys ro", "/proc/sys/kernel/random/boot_id ro"])
        for p in paths:
            self.assertIn(task[p], ("EROFS", "EACCES", "ENOENT"), p)
            self.assertEqual(task[p] == "ENOENT", out[p] == "ENOENT", p)

    def test_losing_the_fork_server_costs_nothing_but_speed(self):
        st = self.running_fork_server()
        z = st["pid"]
        self.assertGreater(z, 0)
        os.kill(z, signal.SIGKILL)  # sbxd's child, started by this test's daemon
        for _ in range(8):
            res, out = self.run_sh("echo ok")
            self.assertEqual(out, "ok\n")
        deadline = time.time() + 10
        while time.time() < deadline:
            now = self.fork_server()
            if now["starts"] > st["starts"] and now["pid"] not in (0, z):
                break
            time.sleep(0.1)
        self.assertGreater(now["starts"], st["starts"], now)
        self.assertGreaterEqual(now["failures"], st["failures"] + 1, now)
        self.assertNotIn(now["pid"], (0, z))
        self.assertFalse(now["disabled"], now)
        self.assertFalse(os.path.exists("/proc/%d" % z), "the lost zygote was not reaped")

    def test_host_loader_files_copied_and_followed(self):
        # The template holds copies of the host's loader files (no mount per file)...
        res, out = self.run_sh("grep -c ' /etc/' /proc/self/mountinfo;"
                               " sha256sum /etc/ld.so.cache | cut -c1-64")
        with open("/etc/ld.so.cache", "rb") as f:
            host = hashlib.sha256(f.read()).hexdigest()
        self.assertEqual(out.split(), ["0", host])
        # ...and a change to one of them (here only the time of /etc/alternatives, which
        # changes when an alternative does) gets the pool a new zygote within a second.
        before = self.fork_server()
        os.utime("/etc/alternatives")
        deadline = time.time() + 10
        while time.time() < deadline:
            self.run_sh("true")
            now = self.fork_server()
            if now["starts"] > before["starts"]:
                break
            time.sleep(0.2)
        self.assertGreater(now["starts"], before["starts"], now)
        self.assertEqual(now["failures"], before["failures"], now)
        # Every sandbox of the new zygote serves its task to the end: the first (which the
        # worker that started the zygote forks) and those the loop asks for. The loop polls
        # the new control socket through a descriptor of its own: polling the zygote's,
        # which the replaced zygote's had the number of, once took the first sandbox's
        # control socket out of the loop's epoll, and its task never finished.
        with self.d.client() as c:
            for _ in range(8):
                res, _, err = c.exec(["true"], timeout=5)
                self.assertEqual(res["status"], "exited", (res, err))


class ForkServerLost(unittest.TestCase):
    """The loop's requests in flight when a fork server stops answering: they fail (their
    sandboxes count as failed creations), nothing else does, and the next creation starts a
    new one. The old one is killed and reaped."""

    def lose_it(self, how):
        # Silent: the reply timeout, shortened from 10 s (with room for a loaded machine's
        # template build and forks, which it bounds too). Killed: the default.
        if how == "silent":
            os.environ["SBXD_ZYGOTE_REPLY_TIMEOUT_MS"] = "3000"
        try:
            d = Daemon(pools=[pool_yaml("python", warm=2, max=4)])
        finally:
            os.environ.pop("SBXD_ZYGOTE_REPLY_TIMEOUT_MS", None)
        z = 0
        try:
            c = d.client()
            fork_server = lambda: c.call("pools")[0]["fork_server"]  # noqa: E731
            d.wait_warm()
            for _ in range(4):  # sandboxes made by the loop's requests since
                self.assertEqual(c.exec(["true"])[0]["status"], "exited")
            d.wait_warm()
            st = fork_server()
            z = st["pid"]
            self.assertGreater(z, 0)
            os.kill(z, signal.SIGSTOP)  # sbxd's child, started by this test's daemon
            # Two tasks take the warm sandboxes; their replacements are asked for and stall.
            for _ in range(2):
                self.assertEqual(c.exec(["true"])[0]["status"], "exited")
            time.sleep(0.3)
            if how == "killed":
                os.kill(z, signal.SIGKILL)
            lost = "fork server lost"
            deadline = time.time() + 10
            while lost not in d.logtext() and time.time() < deadline:
                time.sleep(0.05)
            line = [x for x in d.logtext().splitlines() if lost in x]
            self.assertTrue(line, d.logtext())
            # Killed, it leaves our requests unread: the socket says so (ECONNRESET), or EOF.
            self.assertRegex(line[0], 'detail="no reply within 3000 ms"' if how == "silent" else
                             'detail="(it exited|receive reply: ECONNRESET)"')
            self.assertRegex(line[0], r"requests=[12] ")
            # The pool carries on with a new fork server.
            for _ in range(6):
                res, out, _ = c.exec(["echo", "ok"])
                self.assertEqual((res["status"], out), ("exited", b"ok\n"))
            now = fork_server()
            self.assertGreater(now["starts"], st["starts"], now)
            self.assertGreaterEqual(now["failures"], st["failures"] + 1, now)
            self.assertNotIn(now["pid"], (0, z))
            self.assertFalse(os.path.exists("/proc/%d" % z), "the lost zygote was not reaped")
            pools = c.call("pools")[0]
            self.assertGreaterEqual(pools["failed"], 1, pools)
            c.close()
        finally:
            if z and os.path.exists("/proc/%d" % z):
                os.kill(z, signal.SIGKILL)
            d.stop()

    def test_a_fork_server_that_falls_silent(self):
        self.lose_it("silent")

    def test_a_fork_server_killed_with_requests_in_flight(self):
        self.lose_it("killed")


if __name__ == "__main__":
    unittest.main()
