# SPDX-License-Identifier: MIT
"""End-to-end harness: starts build/sbxd on private sockets with a config written into a
mkdtemp dir, gives tests a client, and on stop requires exit 0 with no leftover sandbox
process, cgroup or socket."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(TOP, os.environ.get("SBX_BUILD", "build"))
sys.path.insert(0, os.path.join(TOP, "tests", "helpers"))
import sbx_client  # noqa: E402

SBXD = os.path.join(BUILD, "sbxd")
SBX = os.path.join(BUILD, "sbx")
PROBE = os.path.join(BUILD, "probe")
# The host ids of sandboxes (userns in deploy/sbxd.yaml): 1024 blocks of 65536 from
# 0x70000000, one block per live sandbox.
ID_BASE = 0x70000000
ID_COUNT = 1024 * 65536

DEFAULT_POOL = """name: {name}
warm: {warm}
max: {max}
queue: {queue}
memory: {memory}
cpu: 1.0
pids: {pids}
timeout: {timeout}
max_timeout: 120s
output_cap: {output_cap}
tmp_size: 16MiB
seccomp: {seccomp}
image: host
"""


def pool_yaml(name="python", warm=2, max=8, queue=64, memory="256MiB", pids=64,
              timeout="20s", output_cap=32768, seccomp="default", extra=""):
    return DEFAULT_POOL.format(name=name, warm=warm, max=max, queue=queue, memory=memory,
                               pids=pids, timeout=timeout, output_cap=output_cap,
                               seccomp=seccomp) + extra


def sandbox_processes(subtree=None):
    """Live (non-zombie) processes running as a sandbox's host ids; with subtree, only those
    in that cgroup subtree (other daemons may run on this machine at the same time)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/status" % pid) as f:
                st = f.read()
        except OSError:
            continue
        m = re.search(r"^Uid:\s+(\d+)", st, re.M)
        s = re.search(r"^State:\s+(\S)", st, re.M)
        if not m or not s or s.group(1) == "Z":
            continue
        uid = int(m.group(1))
        if not ID_BASE <= uid < ID_BASE + ID_COUNT:
            continue
        if subtree:
            try:
                with open("/proc/%s/cgroup" % pid) as f:
                    if "/%s/" % subtree not in f.read():
                        continue
            except OSError:
                continue
        found.append(int(pid))
    return found


class Daemon:
    def __init__(self, pools=None, config_extra="", args=None, log_level="info", wrap=None,
                 sock=None, admin=None):
        self.dir = tempfile.mkdtemp(prefix="sbx-e2e-")
        # sock, admin: the sockets' paths, else in self.dir (0700, root's alone).
        self.sock = sock or os.path.join(self.dir, "agents.sock")
        self.admin = admin or os.path.join(self.dir, "admin.sock")
        self.state = os.path.join(self.dir, "state")
        pools_dir = os.path.join(self.dir, "pools")
        os.mkdir(pools_dir)
        for text in (pools or [pool_yaml()]):
            name = re.search(r"^name: (\S+)", text, re.M).group(1)
            with open(os.path.join(pools_dir, name + ".yaml"), "w") as f:
                f.write(text)
        first = re.search(r"^name: (\S+)", (pools or [pool_yaml()])[0], re.M).group(1)
        self.config = os.path.join(self.dir, "sbxd.yaml")
        with open(self.config, "w") as f:
            f.write("socket: %s\nadmin_socket: %s\nstate_dir: %s\npools_dir: pools\n"
                    "default_pool: %s\nlog_level: %s\n%s%s%s" %
                    (self.sock, self.admin, self.state, first, log_level,
                     "" if "drain_grace:" in config_extra else "drain_grace: 5s\n",
                     # The default 127.0.0.1:9464 would collide between daemons.
                     "" if "metrics:" in config_extra else "metrics: \"\"\n", config_extra))
        self.log_path = os.path.join(self.dir, "sbxd.log")
        self.log = open(self.log_path, "w+")
        # wrap: an argv prefix that sets something up and then execs sbxd in its place.
        self.proc = subprocess.Popen((wrap or []) + [SBXD, "--config", self.config] + (args or []),
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.cgroup_paths = []
        self.subtree = None
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                text = self.logtext()
                self.log.close()
                raise RuntimeError("sbxd exited %d:\n%s" % (self.proc.returncode, text))
            m = re.search(r'msg="ready"', self.logtext())
            if m and os.path.exists(self.sock):
                break
            time.sleep(0.02)
        else:
            text = self.logtext()
            self.proc.kill()  # not left running behind a failed test
            self.proc.wait()
            self.log.close()
            raise RuntimeError("sbxd did not start:\n" + text)
        m = re.search(r'cgroup="([^"]*)"', self.logtext())
        if m:
            self.cgroup_paths = re.findall(r"(/sys/fs/cgroup/\S+)", m.group(1))
            if self.cgroup_paths:
                self.subtree = os.path.basename(self.cgroup_paths[0])

    def logtext(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def client(self):
        return sbx_client.Client(self.sock)

    def wait_warm(self, pool=None, n=None, timeout=20):
        """Waits until the pool has its warm target (or n) ready."""
        c = self.client()
        try:
            deadline = time.time() + timeout
            while time.time() < deadline:
                for p in c.call("pools", [{}]):
                    if pool in (None, p["name"]) and p["warm"] >= (n if n is not None else p["target"]):
                        return p
                time.sleep(0.02)
            raise AssertionError("pool %s never warm: %s" % (pool, c.call("pools", [{}])))
        finally:
            c.close()

    def sbx(self, *args, input=None, timeout=60, env=None):
        e = dict(os.environ)
        e.pop("SBX_SOCKET", None)
        if env:
            e.update(env)
        return subprocess.run([SBX, "--socket", self.sock] + list(args), input=input,
                              capture_output=True, timeout=timeout, env=e)

    def exec_json(self, *argv, pool=None, timeout=None, input=b""):
        args = ["exec", "--json"]
        if pool:
            args += ["--pool", pool]
        if timeout is not None:
            args += ["--timeout", str(timeout)]
        r = self.sbx(*(args + ["--"] + list(argv)), input=input)
        try:
            return json.loads(r.stdout), r.returncode
        except ValueError:
            raise AssertionError("sbx --json printed %r (stderr %r, rc %d)" %
                                 (r.stdout[:500], r.stderr[:500], r.returncode))

    def stop(self, expect_code=0, sig=signal.SIGTERM, timeout=30):
        """SIGTERM, then require the exit code and that nothing is left behind."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("sbxd did not exit after SIGTERM:\n" + self.logtext()[-4000:])
        code = self.proc.returncode
        problems = []
        if code != expect_code:
            problems.append("exit code %d, expected %d" % (code, expect_code))
        deadline = time.time() + 5
        left = sandbox_processes(self.subtree)
        while left and time.time() < deadline:
            time.sleep(0.05)
            left = sandbox_processes(self.subtree)
        if left:
            desc = []
            for pid in left:
                try:
                    with open("/proc/%d/stat" % pid) as f:
                        desc.append("%d %s" % (pid, f.read()[:80]))
                except OSError:
                    desc.append("%d (gone)" % pid)
            problems.append("sandbox processes left: %s" % desc)
        for p in self.cgroup_paths:
            if os.path.exists(p):
                problems.append("cgroup left: %s (%s)" % (p, os.listdir(p)[:5]))
        for s in (self.sock, self.admin):
            if os.path.exists(s):
                problems.append("socket left: %s" % s)
        self.log.close()
        if problems:
            raise AssertionError("; ".join(problems) + "\n" + self.logtext()[-4000:])


class DaemonTest(unittest.TestCase):
    """One daemon per test class (setUpClass), stopped and checked in tearDownClass."""
    pools = None
    config_extra = ""
    wrap = None

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(pools=cls.pools, config_extra=cls.config_extra, wrap=cls.wrap)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
