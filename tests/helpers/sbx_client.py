#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Example sbxd client (docs/PROTOCOL.md), used as a library by the Python end-to-end tests.

    c = Client("/run/sbxd/agents.sock")
    result, out, err = c.exec(["python3", "-c", "print(1)"], pool="python", timeout=5)

Several requests can be in flight on one Client, from one or several threads: start() sends
a request, wait() collects its response, and meanwhile whoever reads the socket routes each
message to its request by msgid. Script use prints the result as JSON:

    /usr/bin/python3 tests/helpers/sbx_client.py --socket PATH [--pool P] -- CMD ARGS...
"""
import argparse
import json
import select
import socket
import sys
import threading
import time

import msgpack

CHUNK = 64 * 1024  # stdin chunk size, far below the daemon's message size limit


class RpcError(Exception):
    """An error response; .code is the stable error code, .message is for people."""

    def __init__(self, error):
        if not isinstance(error, dict):
            error = {"code": "internal", "message": repr(error)}
        self.error, self.code, self.message = error, error.get("code"), error.get("message", "")
        super().__init__(f"{self.code}: {self.message}")


class _Pending:
    def __init__(self, on_notify):
        self.done, self.result, self.error, self.on_notify = False, None, None, on_notify


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        self.sock.connect(path)
        self.sock.setblocking(False)
        self.unpacker = msgpack.Unpacker(raw=False)
        self.packer = msgpack.Packer(use_bin_type=True)
        self.pending, self.next_id, self.closed, self.last_error = {}, 1, None, None
        self.notifications = []  # notifications for no request in flight, e.g. "error"
        self.io_lock, self.send_lock, self.id_lock = (threading.Lock() for _ in range(3))

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _pump(self):
        """Reads what the socket has and dispatches it. Caller holds io_lock."""
        try:
            data = self.sock.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError as e:
            data, self.closed = b"", f"connection failed: {e}"
        if not data:
            why = self.last_error and f"sbxd: {RpcError(self.last_error)}"
            self.closed = self.closed or why or "connection closed by sbxd"
            for p in self.pending.values():
                if not p.done:
                    p.done, p.error = True, ConnectionError(self.closed)
            return
        self.unpacker.feed(data)
        for msg in self.unpacker:
            self._dispatch(msg)

    def _dispatch(self, msg):
        if msg[0] == 1 and len(msg) == 4:
            p = self.pending.get(msg[1])
            if p and not p.done:
                p.result = msg[3]
                p.error = RpcError(msg[2]) if msg[2] is not None else None
                p.done = True
        elif msg[0] == 2 and len(msg) == 3:
            params = msg[2]
            p = None
            if isinstance(params, list) and params and isinstance(params[0], int):
                p = self.pending.get(params[0])
            if p and not p.done and p.on_notify:
                p.on_notify(msg[1], params[1:])
            elif not p:
                # An "error" notification either comes before sbxd closes the connection
                # (its reason, kept for ConnectionError) or names a message it refused.
                self.notifications.append((msg[1], params))
                if msg[1] == "error" and params:
                    self.last_error = params[0]

    def _send(self, obj):
        view = memoryview(self.packer.pack(obj))
        with self.send_lock:
            while view:
                if self.closed:
                    raise ConnectionError(self.closed)
                # Read while we wait to write, so a daemon blocked on writing to us cannot
                # deadlock against us blocked on writing to it.
                reading = self.io_lock.acquire(blocking=False)
                try:
                    r, w, _ = select.select([self.sock] if reading else [], [self.sock], [])
                    if r:
                        self._pump()
                finally:
                    if reading:
                        self.io_lock.release()
                if w:
                    try:
                        view = view[self.sock.send(view):]
                    except BlockingIOError:
                        pass

    def start(self, method, params=None, on_notify=None):
        """Sends a request and returns its msgid. params: a dict of named arguments."""
        with self.id_lock:
            msgid, self.next_id = self.next_id, (self.next_id + 1) & 0xFFFFFFFF
            self.pending[msgid] = _Pending(on_notify)
        self._send([0, msgid, method, [params if params is not None else {}]])
        return msgid

    def notify(self, method, params):
        self._send([2, method, params])

    def wait(self, msgid, timeout=None):
        """The result of request msgid; raises RpcError, ConnectionError or TimeoutError."""
        p = self.pending.get(msgid)
        if p is None:
            raise KeyError(f"no request {msgid} in flight")
        deadline = None if timeout is None else time.monotonic() + timeout
        while not p.done:
            with self.io_lock:
                if p.done:
                    break
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not select.select([self.sock], [], [], left)[0] and deadline is not None:
                    raise TimeoutError(f"no response to request {msgid}")
                self._pump()
        del self.pending[msgid]
        if p.error:
            raise p.error
        return p.result

    def call(self, method, params=None, timeout=None):
        return self.wait(self.start(method, params), timeout)

    def exec_start(self, argv, pool=None, timeout=None, env=None, cwd=None, stdin=None,
                   on_stdout=None, on_stderr=None, on_started=None):
        """Starts an exec; returns (msgid, out_chunks, err_chunks). stdin: bytes, an iterable
        of bytes chunks (streamed), or None for an empty stdin."""
        args = {"argv": list(argv)}
        for key, val in (("pool", pool), ("timeout", timeout), ("env", env), ("cwd", cwd)):
            if val is not None:
                args[key] = val
        if stdin is not None:
            args["stdin"] = True
        out, err = [], []

        def on_notify(method, rest):
            sinks = {"exec.stdout": (out, on_stdout), "exec.stderr": (err, on_stderr)}
            if method in sinks and rest:
                sinks[method][0].append(rest[0])
                if sinks[method][1]:
                    sinks[method][1](rest[0])
            elif method == "exec.started" and on_started and rest:
                on_started(rest[0])

        msgid = self.start("exec", args, on_notify)
        if stdin is not None:
            chunks = [stdin] if isinstance(stdin, (bytes, bytearray, memoryview)) else stdin
            for chunk in chunks:
                for off in range(0, len(chunk), CHUNK):
                    self.notify("exec.stdin", [msgid, bytes(chunk[off:off + CHUNK])])
            self.notify("exec.stdin", [msgid, b""])
        return msgid, out, err

    def exec(self, argv, pool=None, timeout=None, env=None, stdin=None, on_stdout=None,
             on_stderr=None, cwd=None, wait_timeout=None):
        """Runs argv in a sandbox: returns (result_dict, stdout_bytes, stderr_bytes)."""
        msgid, out, err = self.exec_start(argv, pool, timeout, env, cwd, stdin, on_stdout,
                                          on_stderr)
        result = self.wait(msgid, wait_timeout)
        return result, b"".join(out), b"".join(err)


def main():
    ap = argparse.ArgumentParser(description="Run a command through sbxd; print the result "
                                 "as JSON, with the task's output under stdout/stderr.")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--pool")
    ap.add_argument("--timeout", type=float)
    ap.add_argument("--stdin", action="store_true", help="stream our stdin to the task")
    ap.add_argument("--call", metavar="METHOD", help="call METHOD (e.g. ping, pools) instead")
    ap.add_argument("cmd", nargs="*")
    a = ap.parse_args()
    with Client(a.socket) as c:
        try:
            if a.call:
                print(json.dumps(c.call(a.call), indent=2))
                return 0
            if not a.cmd:
                ap.error("a command is required after --")
            stdin = iter(lambda: sys.stdin.buffer.read1(CHUNK), b"") if a.stdin else None
            res, out, err = c.exec(a.cmd, pool=a.pool, timeout=a.timeout, stdin=stdin)
        except RpcError as e:
            print(json.dumps({"error": e.error}, indent=2))
            return 1
    res = dict(res, stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"))
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
