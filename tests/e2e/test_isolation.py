# SPDX-License-Identifier: MIT
"""Every isolation property of a sandbox, asserted from inside a live sbxd's task."""
import ctypes
import errno
import os
import re
import threading
import time
import unittest

from harness import DaemonTest, pool_yaml

PY = "python3"


UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


class Isolation(DaemonTest):
    userns = True
    pools = [pool_yaml("python", warm=2, max=8), pool_yaml("parsing", warm=1, max=4,
                                                           extra="dev_shm: true\n")]

    @classmethod
    def setUpClass(cls):
        # Before sbxd starts: no sandbox of this class is older than this.
        cls.started_boottime = time.clock_gettime(time.CLOCK_BOOTTIME)
        super().setUpClass()

    def run_sh(self, script, **kw):
        with self.d.client() as c:
            res, out, err = c.exec(["sh", "-c", script], **kw)
        return res, out.decode(), err.decode()

    def test_ping_and_pools(self):
        with self.d.client() as c:
            self.assertEqual(c.call("ping")["pong"], True)
            pools = {p["name"]: p for p in c.call("pools")}
        self.assertEqual(set(pools), {"python", "parsing"})
        for key in ("warm", "target", "running", "max", "queued", "created", "failed"):
            self.assertIn(key, pools["python"])
        self.assertEqual(pools["python"]["max"], 8)

    def test_user_caps_and_no_new_privs(self):
        res, out, _ = self.run_sh("id -u; id -g; id -G; grep -E '^(Cap|NoNewPrivs)' /proc/self/status")
        self.assertEqual(res["status"], "exited", res)
        lines = out.split("\n")
        self.assertEqual(lines[0:3], ["10001", "10001", "10001"])
        caps = dict(re.findall(r"^(\w+):\s+(\S+)$", out, re.M))
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(int(caps[cap], 16), 0, cap)
        self.assertEqual(caps["NoNewPrivs"], "1")

    def test_new_session_and_pid_namespace(self):
        res, out, _ = self.run_sh("echo $$; ps -o pid= -e 2>/dev/null | wc -l; "
                                  "ls /proc | grep -c '^[0-9]'; "
                                  "python3 -c 'import os; print(os.getsid(0) == os.getpid() or os.getsid(0))'")
        lines = out.split()
        # The task is pid 2 (init is 1); only the sandbox's few processes are visible.
        self.assertEqual(lines[0], "2")
        self.assertLessEqual(int(lines[2]), 6)

    def test_read_only_root_and_scratch_tmp(self):
        script = ("for p in / /usr /etc /bin/x /usr/bin/x /dev/x; do "
                  "  touch $p/probe 2>/dev/null && echo WROTE $p; done; "
                  "echo data > /tmp/f && cat /tmp/f; "
                  "cp /bin/true /tmp/t && chmod +x /tmp/t; /tmp/t 2>/dev/null && echo EXEC_TMP; "
                  "grep ' /tmp ' /proc/mounts; grep ' / ' /proc/mounts")
        res, out, _ = self.run_sh(script)
        self.assertNotIn("WROTE", out)
        self.assertIn("data\n", out)
        self.assertNotIn("EXEC_TMP", out)
        tmp = [l for l in out.split("\n") if " /tmp " in l][0]
        for flag in ("nosuid", "nodev", "noexec"):
            self.assertIn(flag, tmp)
        root = [l for l in out.split("\n") if re.match(r"\S+ / ", l)][-1]
        self.assertIn("ro", root.split()[3].split(","))

    def test_tmp_is_size_limited(self):
        res, out, _ = self.run_sh("dd if=/dev/zero of=/tmp/big bs=1M count=64 2>&1; "
                                  "du -m /tmp/big | cut -f1")
        # tmp_size is 16 MiB in this test's pool.
        self.assertIn("No space left", out)
        self.assertLessEqual(int(out.strip().split("\n")[-1]), 16)

    def test_no_host_paths_visible(self):
        res, out, _ = self.run_sh("ls -a / ; ls /home /root /var /sys 2>&1; "
                                  "cat /etc/shadow 2>&1; ls /etc")
        top = set(out.split("\n")[0:20])
        # /work is the sandbox's own workspace (test_workspace.py), nothing of the host's.
        for path in ("home", "root", "var", "sys", "srv", "mnt", "opt"):
            self.assertNotIn(path, top)
        # /run, when there is one (a fork server's template has it for mount_rebase), is
        # empty: nothing of the host's /run.
        res, run, _ = self.run_sh("find /run 2>/dev/null | sort")
        self.assertIn(run.split(), ([], ["/run"]))
        self.assertNotIn(self.d.dir, out)
        self.assertIn("No such file", out)
        etc = out.split("\n")
        self.assertNotIn("shadow", etc)
        self.assertNotIn("ssh", etc)

    def test_state_dir_and_sockets_invisible(self):
        res, out, _ = self.run_sh("ls %s 2>&1; ls %s 2>&1" % (self.d.state, self.d.sock))
        self.assertEqual(out.count("No such file"), 2, out)

    def test_etc_names_sandbox_user_and_tools_work(self):
        res, out, _ = self.run_sh("grep sandbox /etc/passwd; awk 'BEGIN{print 6*7}'; "
                                  "echo abc | sed s/b/X/; whoami")
        self.assertIn(":10001:10001:", out)
        self.assertIn("42\n", out)
        self.assertIn("aXc\n", out)
        self.assertTrue(out.strip().endswith("sandbox"))

    def test_minimal_dev(self):
        res, out, _ = self.run_sh("ls /dev | sort | tr '\\n' ' '; echo; head -c 8 /dev/urandom | wc -c; "
                                  "echo x > /dev/null && echo NULL_OK; echo x > /dev/full 2>/dev/null || echo FULL_OK")
        names = out.split("\n")[0].split()
        for n in ("null", "zero", "full", "random", "urandom"):
            self.assertIn(n, names)
        for n in ("sda", "vda", "mem", "kmsg", "shm"):
            self.assertNotIn(n, names)
        self.assertIn("NULL_OK", out)
        self.assertIn("FULL_OK", out)

    def test_dev_shm_only_when_the_pool_asks(self):
        res, out, _ = self.run_sh("ls -d /dev/shm 2>&1", pool="parsing")
        self.assertEqual(out.strip(), "/dev/shm")
        # Its own tmpfs, writable by the task, with nodev (/dev itself is read-only).
        res, out, _ = self.run_sh("echo x > /dev/shm/x && cat /dev/shm/x; touch /dev/x 2>&1 |"
                                  " grep -c Read-only; grep ' /dev/shm ' /proc/self/mountinfo"
                                  " | cut -d' ' -f6", pool="parsing")
        lines = out.split()
        self.assertEqual(lines[:2], ["x", "1"])
        self.assertTrue({"rw", "nosuid", "nodev", "noexec"} <= set(lines[2].split(",")), lines)
        res, out, _ = self.run_sh("ls -d /dev/shm 2>&1", pool="python")
        self.assertIn("No such file", out)

    def test_network_is_loopback_only(self):
        # The interfaces from /proc/net/dev: if_nameindex asks netlink, which the default
        # seccomp profile refuses (test_netlink_is_refused).
        script = ("import socket\n"
                  "print(sorted(l.split(':')[0].strip()"
                  " for l in open('/proc/net/dev').read().splitlines()[2:]))\n"
                  "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
                  "c = socket.create_connection(s.getsockname(), timeout=2); print('LOOPBACK_OK')\n")
        with self.d.client() as c:
            res, out, err = c.exec([PY, "-c", script])
        self.assertEqual(res["status"], "exited", err)
        self.assertIn("['lo']", out.decode())
        self.assertIn("LOOPBACK_OK", out.decode())

    def test_netlink_is_refused(self):
        # The kernel's replies to a netlink socket wait, unread, in memory that no cgroup is
        # charged for: 100 sockets with 3000 replies each took 659 MiB of the host while
        # the sandbox's cgroup counted 4 MiB. Both profiles refuse the socket (default:
        # EAFNOSUPPORT, strict: ENOSYS); what asks netlink in passing gets by without it.
        script = ("import errno, socket\n"
                  "try:\n    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)\n"
                  "    print('open')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])\n"
                  "print(socket.getaddrinfo('localhost', 80, type=socket.SOCK_STREAM,"
                  " flags=socket.AI_ADDRCONFIG)[0][4])\n")
        with self.d.client() as c:
            res, out, err = c.exec([PY, "-c", script])
        self.assertEqual(res["status"], "exited", err)
        self.assertEqual(out.decode().split("\n")[:2], ["EAFNOSUPPORT", "('127.0.0.1', 80)"])
        self.assertGreaterEqual(res["seccomp_denials"], 1, res)

    def test_host_loopback_unreachable(self):
        import socket
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen()
        port = ls.getsockname()[1]
        try:
            with self.d.client() as c:
                res, out, _ = c.exec([PY, "-c",
                                      "import socket\ntry:\n socket.create_connection(('127.0.0.1', %d), timeout=2); print('CONNECTED')\n"
                                      "except OSError as e: print('REFUSED', e.errno)" % port])
            self.assertIn("REFUSED", out.decode())
        finally:
            ls.close()

    def test_hostname_is_the_pools(self):
        # A uts namespace of its own, named after the pool: not the host's name, and no
        # sandbox id (whose counter would tell a task how many sandboxes others had).
        with self.d.client() as c:
            res, out, _ = c.exec(["sh", "-c", "hostname; cat /etc/hostname; "
                                              "getent hosts $(hostname)"])
        lines = out.decode().split("\n")
        self.assertEqual(lines[:2], ["sbx-python", "sbx-python"])
        self.assertEqual(lines[2].split(), ["127.0.1.1", "sbx-python"])
        self.assertNotIn(res["sandbox"], out.decode())
        self.assertNotEqual(os.uname().nodename, "sbx-python")

    def test_task_runs_at_normal_priority(self):
        # Sandboxes are made at a background nice value and their task process is forked
        # ahead: the task and init must be back at 0 when the task runs (field 19 of stat).
        with self.d.client() as c:
            res, out, _ = c.exec(["sh", "-c", "cut -d' ' -f19 /proc/self/stat /proc/1/stat"])
        self.assertEqual(out.decode().split(), ["0", "0"], res)

    def test_environment_is_only_what_the_daemon_sets(self):
        os.environ["SBX_LEAK_CHECK"] = "leaked"
        with self.d.client() as c:
            res, out, _ = c.exec(["env"], env={"FOO": "bar"})
        env = dict(l.split("=", 1) for l in out.decode().strip().split("\n"))
        self.assertEqual(set(env), {"PATH", "HOME", "LANG", "TMPDIR", "FOO"})
        self.assertEqual(env["HOME"], "/tmp")
        self.assertEqual(env["FOO"], "bar")

    def test_cwd(self):
        with self.d.client() as c:
            res, out, _ = c.exec(["pwd"], cwd="/usr")
            self.assertEqual(out.decode().strip(), "/usr")
            res, out, _ = c.exec(["pwd"])
            self.assertEqual(out.decode().strip(), "/work")
            res, out, err = c.exec(["pwd"], cwd="/nonexistent")
            self.assertEqual(res["status"], "error")
            self.assertEqual(res["error_stage"], "cwd")
            self.assertEqual(res["error"], "the task could not start: chdir '/nonexistent': ENOENT")
            res, out, err = c.exec(["no-such-command"])
            self.assertEqual((res["status"], res["error_stage"]), ("error", "exec"))
            # The error's name once: init's message carries it.
            self.assertEqual(res["error"],
                             "cannot execute the command: execve 'no-such-command': ENOENT")

    def test_each_task_gets_a_fresh_sandbox(self):
        with self.d.client() as c:
            r1, _, _ = c.exec(["sh", "-c", "echo secret > /tmp/left-behind"])
            seen = set([r1["sandbox"]])
            for _ in range(6):
                r, out, _ = c.exec(["sh", "-c", "cat /tmp/left-behind 2>&1"])
                self.assertNotIn(r["sandbox"], seen)
                seen.add(r["sandbox"])
                self.assertIn("No such file", out.decode())

    def hold_while(self, holder, then):
        """Runs python code holder in a sandbox until it prints a line, then calls then()
        while the holder still holds what it took; returns (the holder's line, then's
        value) once the holder has ended."""
        held = threading.Event()
        lines = []

        def on_out(chunk):
            lines.append(chunk.decode())
            held.set()
        with self.d.client() as a:
            msgid = a.start("exec", {"argv": [PY, "-c", holder + "\nsys.stdin.read()\n"],
                                     "stdin": True},
                            lambda m, rest: m == "exec.stdout" and rest and on_out(rest[0]))
            results = []
            waiter = threading.Thread(target=lambda: results.append(a.wait(msgid, 60)))
            waiter.start()
            try:
                self.assertTrue(held.wait(30), "the holding task did not report")
                value = then()
            finally:
                a.notify("exec.stdin", [msgid, b""])
                waiter.join()
        self.assertEqual(len(results), 1)
        self.assertEqual(results[0]["status"], "exited", results[0])
        return "".join(lines), value

    def run_py(self, code):
        with self.d.client() as c:
            res, out, err = c.exec([PY, "-c", code])
        self.assertEqual(res["status"], "exited", (res, err))
        return out.decode()

    def test_host_ids_say_nothing_of_other_sandboxes(self):
        # A task sees its block of host ids in /proc/self/uid_map. Handed out in turn, the
        # blocks of two tasks would differ by the number of sandboxes made in between, for
        # anyone: in turn, six tasks one after the other got blocks within a few of each
        # other. At random among the free blocks (1024 by default), six fall within 64
        # consecutive ones about 6 times in a million.
        if not self.userns:
            self.skipTest("without user namespaces tasks run as the host's uid 10001")
        blocks = []
        with self.d.client() as c:
            for _ in range(6):
                res, out, _ = c.exec(["cat", "/proc/self/uid_map"])
                self.assertEqual(res["status"], "exited", res)
                inside, host, count = (int(x) for x in out.split())
                self.assertEqual((inside, count), (0, 65536))
                blocks.append((host - 0x70000000) // 65536)
        self.assertGreater(max(blocks) - min(blocks), 64, blocks)

    def test_per_user_kernel_limits_are_the_sandbox_own(self):
        # The kernel counts inotify instances (and POSIX queue bytes, pending signals...)
        # against every user namespace up the chain, each level against the id that created
        # the namespace below it. A sandbox takes all the inotify instances it can get and
        # holds them: another sandbox and the host's root must still get theirs, which they
        # do only when each sandbox's namespace is owned by an id of its own (its root's
        # host id), not by the host's root, which sbxd and its fork servers run as.
        if not self.userns:
            self.skipTest("without user namespaces tasks run as the host's uid 10001")
        probe = ("import ctypes, fcntl, os, struct, sys\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "n = 0\n"
                 "while n < %d and libc.inotify_init1(0) >= 0: n += 1\n"
                 "e = ctypes.get_errno() if n < %d else 0\n"
                 "with open('/proc/self/ns/user') as f:\n"
                 "    owner = struct.unpack('I', fcntl.ioctl(f, 0xb704, b'    '))[0]\n"
                 "m = open('/proc/self/uid_map').read().split()\n"
                 "print(n, e, owner, m[1], m[2], flush=True)\n")
        libc = ctypes.CDLL(None, use_errno=True)

        def host_inotify():
            fd = libc.inotify_init1(0)
            if fd >= 0:
                os.close(fd)
            return fd >= 0
        if not host_inotify():
            self.skipTest("this host's root has no inotify instance to spare")
        line, (out, host_ok) = self.hold_while(
            probe % (4096, 4096), lambda: (self.run_py(probe % (1, 1)), host_inotify()))
        n_a, err_a, owner_a, base_a, count_a = map(int, line.split())
        n_b, _, owner_b, base_b, count_b = map(int, out.split())
        # The holder ran out (EMFILE) at its own budget, not at the host's.
        self.assertEqual(err_a, errno.EMFILE)
        self.assertGreater(n_a, 0)
        self.assertEqual(n_b, 1, "a second sandbox got no inotify instance")
        self.assertTrue(host_ok, "the host's root got no inotify instance")
        # Owned by its own root (0 inside), not by an id it cannot see (65534: the host's).
        self.assertEqual((owner_a, owner_b), (0, 0))
        # Blocks of host ids of their own, which do not overlap.
        self.assertEqual(count_a, count_b)
        self.assertGreaterEqual(abs(base_a - base_b), count_a)

    def test_pipe_buffers_are_the_sandbox_own(self):
        # Pipe buffer pages count per host user (fs.pipe-user-pages-soft, 64 MiB by default):
        # past it, that user's new pipes get 2 pages instead of 16 and may grow no more. A
        # sandbox holds as many 1 MiB pipes as it may; another sandbox's new pipe must still
        # get the default 64 KiB, which it does only when no two sandboxes share host ids.
        if not self.userns:
            self.skipTest("without user namespaces tasks run as the host's uid 10001")
        holder = ("import fcntl, os, sys\n"
                  "held, total = [], 0\n"
                  "while total < (80 << 20):\n"
                  "    r, w = os.pipe()\n"
                  "    held.append((r, w))\n"
                  "    try:\n"
                  "        fcntl.fcntl(w, 1031, 1 << 20)\n"
                  "    except OSError:\n"
                  "        break\n"
                  "    total += fcntl.fcntl(w, 1032)\n"
                  "print(total, flush=True)\n")
        probe = "import fcntl, os; r, w = os.pipe(); print(fcntl.fcntl(w, 1032))"
        line, out = self.hold_while(holder, lambda: self.run_py(probe))
        # The holder got what the soft limit allows (on this host: 64 MiB), no more.
        self.assertGreaterEqual(int(line), 16 << 20)
        self.assertEqual(int(out), 65536)

    def test_own_boot_id(self):
        """Each sandbox has a boot id of its own (a random UUID, read-only, stable within the
        sandbox), never the host's."""
        with open("/proc/sys/kernel/random/boot_id") as f:
            host = f.read().strip()
        seen = {}
        for pool in ("python", "parsing"):
            for _ in range(2):
                res, out, _ = self.run_sh("cat /proc/sys/kernel/random/boot_id; "
                                          "cat /proc/sys/kernel/random/boot_id; "
                                          "echo x > /proc/sys/kernel/random/boot_id 2>/dev/null"
                                          " && echo WROTE", pool=pool)
                self.assertEqual(res["status"], "exited", res)
                lines = out.split()
                self.assertEqual(len(lines), 2, out)
                self.assertRegex(lines[0], UUID4)
                self.assertEqual(lines[0], lines[1])
                seen[res["sandbox"]] = lines[0]
        self.assertEqual(len(seen), 4, seen)
        self.assertEqual(len(set(seen.values())), 4, seen)
        self.assertNotIn(host, seen.values())

    def test_own_uptime_and_clocks(self):
        """Each sandbox has a time namespace whose boot and monotonic clocks start at its
        creation: a task's uptime is at most the time since this class started sbxd, which
        the host's, over 60 s on any machine that ran the suite's setup, is not."""
        with open("/proc/uptime") as f:
            host = float(f.read().split()[0])
        if host < 60:
            self.skipTest("host uptime %.0f s is too short to tell apart" % host)
        prog = ("import time; print(open('/proc/uptime').read().split()[0],"
                " time.clock_gettime(time.CLOCK_BOOTTIME), time.monotonic())")
        with self.d.client() as c:
            res, out, err = c.exec([PY, "-c", prog])
        self.assertEqual(res["status"], "exited", (res, err))
        bound = time.clock_gettime(time.CLOCK_BOOTTIME) - self.started_boottime + 1
        for value in out.split():
            self.assertLessEqual(float(value), bound, (out, bound, host))
        self.assertLess(bound, host)

    def test_clocks_still_time_things(self):
        """Timers and waits on CLOCK_MONOTONIC (relative and absolute) work in the time
        namespace, sbxd's timeout still ends a task, and wall_ms is measured by sbxd."""
        prog = ("import ctypes, threading, time\n"
                "class TS(ctypes.Structure):\n"
                "    _fields_ = [('s', ctypes.c_long), ('ns', ctypes.c_long)]\n"
                "t0 = time.monotonic(); time.sleep(0.2); a = time.monotonic() - t0\n"
                "t0 = time.monotonic(); threading.Event().wait(0.2); b = time.monotonic() - t0\n"
                "t0 = time.monotonic(); end = t0 + 0.2\n"
                "ts = TS(int(end), int((end % 1) * 1e9))\n"
                "ctypes.CDLL(None).clock_nanosleep(1, 1, ctypes.byref(ts), None)  # ABSTIME\n"
                "c = time.monotonic() - t0\n"
                "print(a >= 0.2, b >= 0.2, c >= 0.2)\n")
        with self.d.client() as c:
            res, out, err = c.exec([PY, "-c", prog])
            self.assertEqual((res["status"], out), ("exited", b"True True True\n"), (res, err))
            self.assertGreaterEqual(res["wall_ms"], 600)
            res, _, _ = c.exec(["sleep", "30"], timeout=1)
        self.assertEqual(res["status"], "timeout", res)
        self.assertGreaterEqual(res["wall_ms"], 1000)

    def test_python_stdlib_works(self):
        script = ("import json, hashlib, subprocess, threading\n"
                  "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
                  "print(json.dumps({'h': hashlib.sha256(b'x').hexdigest()[:8],"
                  " 'sub': subprocess.run(['echo', 'hi'], capture_output=True).stdout.decode().strip()}))\n")
        with self.d.client() as c:
            res, out, err = c.exec([PY, "-c", script])
        self.assertEqual(res["status"], "exited", err)
        self.assertEqual(out.decode().strip(), '{"h": "2d711642", "sub": "hi"}')


class HostIdBlocks(DaemonTest):
    """As few blocks of host ids as the pool's max: a new sandbox waits for a dying one's
    block, and tasks never fail for it."""
    pools = [pool_yaml("python", warm=2, max=2)]
    config_extra = "userns:\n  slots: 2\n"

    def test_sandboxes_wait_for_a_block_and_reuse_it(self):
        script = "cat /proc/self/uid_map"
        bases = set()
        with self.d.client() as c:
            for _ in range(8):
                res, out, _ = c.exec(["sh", "-c", script])
                self.assertEqual(res["status"], "exited", res)
                bases.add(int(out.split()[1]))
            # Two at once hold both blocks; the pool refills as they die.
            ids = [c.exec_start(["sh", "-c", "sleep 0.3; " + script])[0] for _ in range(2)]
            for i in ids:
                self.assertEqual(c.wait(i, 30)["status"], "exited")
            pools = {p["name"]: p for p in c.call("pools")}
            blocks = c.call("stats")["host_id_blocks"]
        self.assertEqual(len(bases), 2, bases)
        self.assertEqual(pools["python"]["failed"], 0)
        self.assertEqual(blocks["total"], 2)
        self.assertLessEqual(blocks["held"], 2)


class IsolationFromScratch(Isolation):
    """The same properties when every sandbox is built from scratch (no fork server)."""
    config_extra = "fork_server: false\n"

    def test_ping_and_pools(self):
        super().test_ping_and_pools()
        with self.d.client() as c:
            self.assertTrue(all(p["fork_server"] is None for p in c.call("pools")))


class IsolationWithoutUserNamespace(Isolation):
    """The same properties with user namespaces off (from scratch: the fork server needs
    them): the task's ids are then the host's 10001, still without any capability."""
    config_extra = "userns:\n  enabled: false\n"
    userns = False

    def test_ping_and_pools(self):
        super().test_ping_and_pools()
        with self.d.client() as c:
            self.assertTrue(all(p["fork_server"] is None for p in c.call("pools")))


if __name__ == "__main__":
    unittest.main()
