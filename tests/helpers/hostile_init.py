#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A hostile sbxd-init for tests/e2e/test_fuzz.py (config `init_path`): it answers sbxd's
control messages (daemon/ctl.h) with garbage, lies, floods, stray descriptors and silence,
at random, as a sandbox's init that a task had taken over could. As a pool's fork server it
fails or talks garbage too, so that sbxd falls back to building sandboxes from scratch, with
this same program as their init. The seed comes from the file `seed` next to it, mixed with
the clock (each sandbox's init is pid 1 of its own namespace), so that each sandbox behaves
differently."""
import ctypes
import os
import random
import socket
import struct
import time

CTL_MAGIC = 0x53425808
SETUP, TASK, ZYGOTE, SPAWN = 1, 2, 3, 4
READY, SETUP_FAILED, EXITED, EXEC_FAILED, SPAWNED = 10, 11, 13, 14, 15
EVENT = struct.Struct("<IIiIiIQQQII128s")  # struct ctl_event

here = os.path.dirname(os.path.abspath(__file__))
try:
    with open(os.path.join(here, "seed")) as f:
        seed = int(f.read())
except (OSError, ValueError):
    seed = 1
R = random.Random("%d-%d" % (seed, time.monotonic_ns()))
ctl = socket.socket(fileno=3)


def i32():
    return R.choice([0, 1, -1, 2**31 - 1, -2**31, R.randrange(-2**31, 2**31)])


def u32():
    return R.choice([0, 1, 2**32 - 1, R.randrange(2**32)])


def u64():
    return R.choice([0, 1, 2**64 - 1, R.randrange(2**64)])


def event(kind, **kw):
    return EVENT.pack(kw.get("magic", CTL_MAGIC), kind, kw.get("err", i32()), kw.get("stage", u32()),
                      kw.get("wstatus", i32()), kw.get("pid", u32()), u64(), u64(), u64(), u32(),
                      0, R.randbytes(128))


def send(data, nfds=0):
    fds = []
    try:
        fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(nfds)]
        if fds:
            ctl.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))])
        else:
            ctl.send(data)
    except OSError:
        pass
    finally:
        for fd in fds:
            os.close(fd)


last = b""


def receive(timeout):
    global last
    ctl.settimeout(timeout)
    try:
        msg, anc, _, _ = ctl.recvmsg(1 << 17, socket.CMSG_SPACE(16 * 4))
    except OSError:
        return None
    if len(msg) < 8:
        return None
    last = msg
    return struct.unpack_from("<II", msg)[1]


def work_dir():
    """A /work as sbxd wants it with READY (a tmpfs directory of the task's user, mode 0755),
    mounted over this program's directory in our own mount namespace; None when that fails."""
    if len(last) < 16:
        return None
    uid, gid = struct.unpack_from("<II", last, 8)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = ("mode=0755,uid=%d,gid=%d,size=1m" % (uid, gid)).encode()
    if libc.mount(b"tmpfs", here.encode(), b"tmpfs", 0, opts) != 0:
        return None
    try:
        return os.open(here, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None


def garbage():
    r = R.random()
    if r < 0.3:
        send(R.randbytes(R.randrange(1, 400)))
    elif r < 0.5:
        send(event(R.choice([READY, EXITED, EXEC_FAILED, SPAWNED, 99, 0]))[:R.choice([8, 183])])
    elif r < 0.6:
        send(event(READY) + b"extra")
    elif r < 0.7:
        send(event(R.randrange(256), magic=u32()))
    elif r < 0.8:
        for _ in range(R.randrange(50, 500)):
            send(event(R.choice([READY, SETUP_FAILED, EXITED, EXEC_FAILED, 12, 77])))
    elif r < 0.9:
        send(event(R.choice([READY, EXITED])), nfds=R.choice([2, 16, 200]))
    else:
        send(b"")


def end():
    if R.random() < 0.5:
        time.sleep(60)  # until sbxd kills it
    os._exit(R.choice([0, 1, 137]))


first = receive(10)
if first == ZYGOTE:
    r = R.random()
    if r < 0.4:
        send(event(SETUP_FAILED))
    elif r < 0.7:
        garbage()
    else:
        send(event(READY))
        for _ in range(R.randrange(1, 4)):
            if receive(5) != SPAWN:
                break
            r = R.random()
            if r < 0.4:
                send(event(SETUP_FAILED))
            elif r < 0.7:
                garbage()
            else:  # a reply without the pidfd it must carry, or with a stray one
                send(event(SPAWNED, pid=R.choice([0, 2**31 - 1])), nfds=R.choice([0, 0, 3]))
    end()

r = R.random()
if r < 0.15:
    garbage()
    end()
if r < 0.25:
    send(event(SETUP_FAILED))
    end()
if r < 0.3:
    send(event(R.choice([EXITED, EXEC_FAILED])))  # a result before any task
    end()
if r < 0.35:
    end()  # silence, or a death before READY
work = work_dir() if R.random() < 0.6 else None
if work is not None:
    # The READY sbxd takes, with a lie or two in it (the pid) and at times a stray listener.
    fds = [work] + [os.open("/dev/null", os.O_RDONLY) for _ in range(R.choice([0, 0, 1]))]
    try:
        ctl.sendmsg([event(READY, pid=R.choice([2, 0, 2**32 - 1]))],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))])
    except OSError:
        pass
    for fd in fds:
        os.close(fd)
else:
    send(event(READY, pid=R.choice([2, 0, 2**32 - 1])), nfds=R.choice([0, 0, 1, 3]))
if R.random() < 0.2:
    send(event(READY))  # twice
got = receive(30)
if got != TASK:
    end()
r = R.random()
if r < 0.4:
    send(event(EXITED))
elif r < 0.6:
    send(event(EXEC_FAILED))
elif r < 0.8:
    garbage()
if R.random() < 0.3:
    send(event(EXITED))  # and again
end()
