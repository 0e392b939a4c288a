# SPDX-License-Identifier: MIT
"""A task cannot run a binary it wrote (docs/SECCOMP.md, "Exec from writable memory"): every
writable mount is noexec, and a memfd, the one writable file that lives on no mount of the
sandbox, is sealed against exec by vm.memfd_noexec=2 in the sandbox's pid namespace, or,
where sbxd cannot set that, refused by the seccomp profiles. Each route is tried from inside
a task, in every shipped pool, from the fork server and from scratch."""
import glob
import json
import os
import re
import shutil
import unittest

from harness import TOP, DaemonTest, pool_yaml

PY = "python3"

# Writes /bin/true's bytes where the task can write, and tries to run them by every route it
# has: the path, fexecve, execveat(AT_EMPTY_PATH) and /proc/self/fd/N. Prints, per route,
# "ran" (the binary ran: exit 0), the errno name the exec or the file's creation failed
# with, or "absent" (no such place in this pool).
ROUTES = r"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.memfd_create.argtypes = [ctypes.c_char_p, ctypes.c_uint]
AT_EMPTY_PATH, MFD_EXEC = 0x1000, 0x10
data = open("/bin/true", "rb").read()
argv = (ctypes.c_char_p * 2)(b"true", None)
envp = (ctypes.c_char_p * 1)(None)
out = {}

def execveat(fd):
    libc.syscall(322, fd, b"", argv, envp, AT_EMPTY_PATH)
    raise OSError(ctypes.get_errno(), "execveat")

def attempt(name, run):
    pid = os.fork()
    if pid == 0:
        try:
            run()
        except OSError as e:
            os._exit(e.errno)
        os._exit(250)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    out[name] = "ran" if code == 0 else errno.errorcode.get(code, str(code))

def memfd(flags):
    fd = libc.memfd_create(b"x", flags)
    if fd < 0:
        return None, errno.errorcode[ctypes.get_errno()]
    os.write(fd, data)
    try:
        os.fchmod(fd, 0o755)
    except OSError:
        pass  # sealed against exec: the routes below say what that means
    return fd, None

def routes(prefix, fd, path=None):
    if path:
        attempt(prefix + "path", lambda: os.execv(path, ["true"]))
    attempt(prefix + "fexecve", lambda: os.execve(fd, ["true"], {}))
    attempt(prefix + "execveat", lambda: execveat(fd))
    attempt(prefix + "proc_fd", lambda: os.execv("/proc/self/fd/%d" % fd, ["true"]))

for name, flags in (("memfd", 0), ("memfd_exec", MFD_EXEC)):
    fd, err = memfd(flags)
    if fd is None:
        for r in ("fexecve", "execveat", "proc_fd"):
            out[name + "_" + r] = err
    else:
        routes(name + "_", fd)

# memfd_secret (447): its file is on a mount of its own, and exec cannot read it.
fd = libc.syscall(447, 0)
if fd < 0:
    for r in ("fexecve", "execveat", "proc_fd"):
        out["secret_" + r] = errno.errorcode[ctypes.get_errno()]
else:
    import mmap
    os.ftruncate(fd, len(data))
    with mmap.mmap(fd, len(data)) as m:
        m[:] = data
    os.fchmod(fd, 0o755)
    routes("secret_", fd)

for d in ("/tmp", "/work", "/dev/shm"):
    key = d.strip("/").replace("/", "_")
    if not os.path.isdir(d) or not os.access(d, os.W_OK):
        for r in ("path", "fexecve", "execveat", "proc_fd", "tmpfile_proc_fd"):
            out[key + "_" + r] = "absent"
        continue
    path = os.path.join(d, "t")
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o755)
    routes(key + "_", os.open(path, os.O_RDONLY), path)
    fd = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o755)
    os.write(fd, data)
    attempt(key + "_tmpfile_proc_fd", lambda: os.execv("/proc/self/fd/%d" % fd, ["true"]))

# Every mount the task could write to, and whether it may exec from it.
writable = []
for line in open("/proc/self/mountinfo"):
    f = line.split()
    opts = f[5].split(",")
    if "rw" in opts and "noexec" not in opts:
        writable.append(f[4])
out["writable_exec_mounts"] = writable
print(json.dumps(out))
"""

MEMFD_ROUTES = ["memfd_fexecve", "memfd_execveat", "memfd_proc_fd",
                "memfd_exec_fexecve", "memfd_exec_execveat", "memfd_exec_proc_fd"]
FILE_ROUTES = ["%s_%s" % (d, r) for d in ("tmp", "work", "dev_shm")
               for r in ("path", "fexecve", "execveat", "proc_fd", "tmpfile_proc_fd")]


def shipped_pools():
    """The repository's pools/*.yaml, sized down to warm 1, max 2."""
    texts = []
    for path in sorted(glob.glob(os.path.join(TOP, "pools", "*.yaml"))):
        with open(path) as f:
            text = f.read()
        text = re.sub(r"^warm:\s*\d+", "warm: 1", text, flags=re.M)
        text = re.sub(r"^max:\s*\d+", "max: 2", text, flags=re.M)
        texts.append(text)
    return texts


def pool_names(texts):
    return [re.search(r"^name: (\S+)", t, re.M).group(1) for t in texts]


class ExecRoutes:
    """The routes in every pool of the class's daemon. memfd_want: what a memfd route gives."""
    memfd_want = ("EACCES", "EPERM")

    def routes_in(self, pool):
        with self.d.client() as c:
            res, out, err = c.exec([PY, "-c", ROUTES], pool=pool)
        self.assertEqual((res["status"], res["exit_code"]), ("exited", 0), (pool, res, err))
        return json.loads(out)

    def test_no_route_runs_a_written_binary(self):
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                got = self.routes_in(pool)
                for route in MEMFD_ROUTES:
                    self.assertIn(got[route], self.memfd_want, (route, got))
                for route in ("secret_fexecve", "secret_execveat", "secret_proc_fd"):
                    # ENOSYS: strict does not allow memfd_secret.
                    self.assertIn(got[route], ("EACCES", "ENOSYS"), (route, got))
                for route in FILE_ROUTES:
                    self.assertIn(got[route], ("EACCES", "absent"), (route, got))
                self.assertEqual(got["writable_exec_mounts"], [], got)
                self.assertEqual(got["tmp_path"], "EACCES", got)
                self.assertEqual(got["work_path"], "EACCES", got)


class FromForkServer(ExecRoutes, DaemonTest):
    pools = shipped_pools()
    pool_names = pool_names(pools)

    def test_memfd_without_flags_still_works(self):
        """vm.memfd_noexec=2 seals a memfd made without flags instead of refusing it: programs
        that use memfds as memory (Python's multiprocessing heap, JITs' double maps) go on."""
        prog = ("import os; fd = os.memfd_create('x'); os.write(fd, b'abc');"
                " print(os.pread(fd, 3, 0).decode())")
        for pool in self.pool_names:
            with self.subTest(pool=pool):
                with self.d.client() as c:
                    res, out, err = c.exec([PY, "-c", prog], pool=pool)
                self.assertEqual((res["exit_code"], out), (0, b"abc\n"), (res, err))

    def test_the_sysctl_is_the_sandboxs_own(self):
        """The sandbox's pid namespace has 2; sbxd's (the host's here) keeps its own value."""
        with open("/proc/sys/vm/memfd_noexec") as f:
            host = f.read().strip()
        with self.d.client() as c:
            res, out, err = c.exec(["cat", "/proc/sys/vm/memfd_noexec"], pool=self.pool_names[0])
        self.assertEqual(out, b"2\n", (res, err))
        with open("/proc/sys/vm/memfd_noexec") as f:
            self.assertEqual(f.read().strip(), host)


class FromScratch(ExecRoutes, DaemonTest):
    config_extra = "fork_server: false\n"
    pools = [pool_yaml("dflt", warm=1, max=2), pool_yaml("strict", warm=1, max=2, seccomp="strict",
                                                         extra="dev_shm: true\nshm_size: 1MiB\n")]
    pool_names = ["dflt", "strict"]


# Makes /proc/sys/vm read-only in a mount namespace of its own, then execs argv: sbxd cannot
# open vm.memfd_noexec for writing there, as on a kernel without it (linux < 6.3).
NO_SYSCTL = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             "mount --bind /proc/sys/vm /proc/sys/vm && "
             "mount -o remount,bind,ro /proc/sys/vm && exec \"$@\"", "sh"]


@unittest.skipUnless(shutil.which("unshare"), "util-linux unshare is missing")
class WithoutTheSysctl(ExecRoutes, DaemonTest):
    """Where sbxd cannot set vm.memfd_noexec, every profile refuses memfd_create with ENOSYS
    (what a kernel without memfds answers), so no route to an executable memfd is left."""
    memfd_want = ("ENOSYS",)
    wrap = NO_SYSCTL
    pools = shipped_pools()
    pool_names = pool_names(pools)

    def test_denial_is_counted(self):
        with self.d.client() as c:
            res, out, err = c.exec([PY, "-c", "import os\ntry:\n os.memfd_create('x')\n"
                                    "except OSError as e:\n print(e.errno)"],
                                   pool=self.pool_names[0])
        self.assertEqual(out, b"38\n", (res, err))
        self.assertEqual(res["seccomp_denials"], 1, res)


if __name__ == "__main__":
    unittest.main()
