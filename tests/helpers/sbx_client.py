#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Example sbxd client (docs/PROTOCOL.md), used as a library by the Python end-to-end tests.

    c = Client("/run/sbxd/agents.sock")
    result, out, err = c.exec(["python3", "-c", "print(1)"], pool="python", timeout=5)

Files go in with files=[{"path": "in.txt", "data": b"...", "mode": 0o644}] (large ones are
streamed after the request as exec.file chunks) and come back with collect=["*.txt"] in
result["files"]. A session keeps one sandbox for several commands:

    sid = c.session_open(pool="python")["session"]
    c.session_write(sid, "script.py", b"print(2)")
    result, out, err = c.exec(["python3", "script.py"], session=sid)
    data = c.session_read(sid, "script.py")
    c.session_close(sid)

Several requests can be in flight on one Client, from one or several threads: start() sends
a request, wait() collects its response, and meanwhile whoever reads the socket routes each
message to its request by msgid. Script use prints the result as JSON:

    /usr/bin/python3 tests/helpers/sbx_client.py --socket PATH [--pool P] -- CMD ARGS...
"""
import argparse
import json
import os
import select
import socket
import sys
import threading
import time

import msgpack

CHUNK = 64 * 1024  # stdin and exec.file chunk size, far below the daemon's message size limit
INLINE_MAX = 256 * 1024  # larger files are streamed (exec.file), as sbx does
INLINE_TOTAL = 512 * 1024  # inline bytes in one request, well below max_message_bytes
RW_CHUNK = 512 * 1024  # session.write and session.read chunk size


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

    @staticmethod
    def _files_plan(files):
        """exec's files entries, and the bytes to stream after the request, in order: an
        entry with "stream": True, or whose data is over INLINE_MAX, or that would take the
        request's inline bytes over INLINE_TOTAL, is declared by size and streamed."""
        entries, streamed, inline = [], [], 0
        for f in files:
            data = f.get("data", b"")
            if isinstance(data, str):
                data = data.encode()
            e = {k: v for k, v in f.items() if k not in ("data", "stream")}
            if "size" in f and "data" not in f:
                entries.append(e)  # declared by the caller, who streams it
                continue
            if f.get("stream") or len(data) > INLINE_MAX or inline + len(data) > INLINE_TOTAL:
                e["size"] = len(data)
                streamed.append(data)
            else:
                e["data"] = data
                inline += len(data)
            entries.append(e)
        return entries, streamed

    def send_file_chunks(self, msgid, data):
        """Streams data as exec.file chunks of at most CHUNK bytes for request msgid."""
        view = memoryview(data)
        for off in range(0, len(view), CHUNK):
            self.notify("exec.file", [msgid, bytes(view[off:off + CHUNK])])

    def exec_start(self, argv, pool=None, timeout=None, env=None, cwd=None, stdin=None,
                   on_stdout=None, on_stderr=None, on_started=None, files=None, collect=None,
                   capture=None, session=None, token=None):
        """Starts an exec; returns (msgid, out_chunks, err_chunks). stdin: bytes, an iterable
        of bytes chunks (streamed), or None for an empty stdin. files: a list of
        {"path", "data" (bytes or str), "mode"?} written under /work before the command
        starts; large data is declared by size and streamed (exec.file) right after the
        request, with backpressure (a send waits while sbxd does not read). collect: a list
        of paths or patterns under /work, returned in the result's "files". capture: the
        output comes in the result ("stdout", "stderr") rather than as notifications.
        session: run in that open session (pool and token may then be left out)."""
        args = {"argv": list(argv)}
        for key, val in (("pool", pool), ("timeout", timeout), ("env", env), ("cwd", cwd),
                         ("collect", collect), ("capture", capture), ("session", session),
                         ("token", token)):
            if val is not None:
                args[key] = list(val) if key == "collect" else val
        streamed = []
        if files is not None:
            args["files"], streamed = self._files_plan(files)
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
        for data in streamed:
            self.send_file_chunks(msgid, data)
        if stdin is not None:
            chunks = [stdin] if isinstance(stdin, (bytes, bytearray, memoryview)) else stdin
            for chunk in chunks:
                for off in range(0, len(chunk), CHUNK):
                    self.notify("exec.stdin", [msgid, bytes(chunk[off:off + CHUNK])])
            self.notify("exec.stdin", [msgid, b""])
        return msgid, out, err

    def exec(self, argv, pool=None, timeout=None, env=None, stdin=None, on_stdout=None,
             on_stderr=None, cwd=None, wait_timeout=None, files=None, collect=None,
             capture=None, session=None, token=None):
        """Runs argv in a sandbox (or in session's): returns (result_dict, stdout_bytes,
        stderr_bytes); with capture, the bytes are the result's "stdout" and "stderr".
        files, collect, capture, session: as exec_start takes them."""
        msgid, out, err = self.exec_start(argv, pool, timeout, env, cwd, stdin, on_stdout,
                                          on_stderr, files=files, collect=collect,
                                          capture=capture, session=session, token=token)
        result = self.wait(msgid, wait_timeout)
        if capture:
            return result, result.get("stdout", b""), result.get("stderr", b"")
        return result, b"".join(out), b"".join(err)

    # ---- sessions (docs/PROTOCOL.md, "Sessions") ----

    @staticmethod
    def _args(**kw):
        return {k: v for k, v in kw.items() if v is not None}

    def session_open(self, pool=None, token=None, ttl=None, idle_timeout=None, files=None,
                     timeout=None):
        """Opens a session: a sandbox kept for several commands. Returns sbxd's answer
        {session, pool, sandbox, ttl, idle_timeout, expires_at}. files: inline entries
        {"path", "data", "mode"?} written into its /work first. Raises RpcError (limit,
        denied, unknown_pool, ...)."""
        args = self._args(pool=pool, token=token, ttl=ttl, idle_timeout=idle_timeout)
        if files is not None:
            args["files"] = [dict(f, data=f["data"].encode() if isinstance(f["data"], str)
                                  else f["data"]) for f in files]
        return self.call("session.open", args, timeout)

    def session_write(self, session, path, data, offset=0, mode=None, token=None,
                      timeout=None):
        """Writes data into the session's file path, in RW_CHUNK pieces: offset 0 creates or
        replaces the file (with mode, default 0644), offset > 0 writes into an existing one.
        Returns the last answer, {size}."""
        view = memoryview(data.encode() if isinstance(data, str) else data)
        res, pos = None, 0
        while res is None or pos < len(view):
            chunk = bytes(view[pos:pos + RW_CHUNK])
            args = self._args(session=session, path=path, data=chunk, offset=offset + pos,
                              token=token, mode=mode if pos == 0 else None)
            res = self.call("session.write", args, timeout)
            pos += len(chunk)
        return res

    def session_read(self, session, path, offset=0, length=None, token=None, timeout=None):
        """Reads the session's file path from offset: all of it to its end, or at most length
        bytes, in RW_CHUNK requests. Returns the bytes (symlinks and non-files are refused)."""
        parts, pos = [], offset
        while length is None or pos - offset < length:
            want = RW_CHUNK if length is None else min(RW_CHUNK, length - (pos - offset))
            res = self.call("session.read", self._args(session=session, path=path, offset=pos,
                                                       length=want, token=token), timeout)
            parts.append(res["data"])
            pos += len(res["data"])
            if res.get("eof") or not res["data"]:
                break
        return b"".join(parts)

    def session_list(self, session=None, path=None, token=None, timeout=None):
        """Without session: the caller's open sessions (a list of {session, pool, sandbox,
        created_at, expires_at, idle_timeout, commands, busy}). With session: the listing of
        its directory path (default /work), {entries: [{name, type, size, mode}], truncated}."""
        res = self.call("session.list", self._args(session=session, path=path, token=token),
                        timeout)
        return res["sessions"] if session is None else res

    def session_close(self, session, token=None, timeout=None):
        """Closes the session (a running command is killed, its result status "cancelled");
        returns {session, reason, commands, lifetime_ms}."""
        return self.call("session.close", self._args(session=session, token=token), timeout)


def main():
    ap = argparse.ArgumentParser(description="Run a command through sbxd; print the result "
                                 "as JSON, with the task's output under stdout/stderr.")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--pool")
    ap.add_argument("--timeout", type=float)
    ap.add_argument("--stdin", action="store_true", help="stream our stdin to the task")
    ap.add_argument("--call", metavar="METHOD", help="call METHOD (e.g. ping, pools) instead")
    ap.add_argument("--session", help="run in this open session")
    ap.add_argument("--capture", action="store_true", help="the output comes in the result")
    ap.add_argument("--file", action="append", default=[], metavar="LOCAL[:PATH]",
                    help="copy LOCAL into /work (as PATH; default its basename)")
    ap.add_argument("--collect", action="append", metavar="PATTERN",
                    help="return the files under /work that match (data as text)")
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
            files = []
            for spec in a.file:
                local, _, path = spec.rpartition(":") if ":" in spec else (spec, "", "")
                with open(local, "rb") as f:
                    files.append({"path": path or os.path.basename(local), "data": f.read(),
                                  "mode": os.stat(local).st_mode & 0o777})
            res, out, err = c.exec(a.cmd, pool=a.pool, timeout=a.timeout, stdin=stdin,
                                   files=files or None, collect=a.collect,
                                   capture=a.capture or None, session=a.session)
        except RpcError as e:
            print(json.dumps({"error": e.error}, indent=2))
            return 1
    res = dict(res, stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"))
    for f in res.get("files", []):
        f["data"] = f["data"].decode(errors="replace")
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
