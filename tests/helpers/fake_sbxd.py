#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A fake sbxd for client tests: msgpack-rpc over a Unix socket with scripted answers.

usage: fake_sbxd.py SOCKET [--version V]

Prints "ready" on stdout once it listens. ping and pools answer fixed values; exec
behaves according to its argv[0]:

  echo [CODE]             copy stdin to stdout until EOF, then exit CODE (default 0)
  exit CODE               exit with CODE without reading stdin
  out HEX [HEX [CODE]]    write these bytes to stdout (and stderr), exit CODE
  big N [CODE]            write N bytes of stdout in 64 KiB chunks, exit CODE
  huge N                  one exec.stdout notification of N bytes, then exit 0
  hugeheader N            the start of an exec.stdout notification whose bin header says
                          N bytes (none follow), then nothing
  signal N                killed by signal N
  timeout | oom           the matching status, after a little output
  outlimit N              N bytes of stdout, then status output_limit, truncated
  error MSG [STAGE]       status error with MSG (and error_stage STAGE)
  execfail ERRNO          status error as sbxd reports an execve that failed with ERRNO
  egress                  exit 0 with the result's egress map filled in
  expired                 status token_expired
  spew MARKER             a line of stdout every 10 ms until the client closes the
                          connection, then write MARKER
  rpcerror CODE MSG       answer the request with an RPC error
  params                  stdout is the JSON of the request's first parameter
  hang MARKER             send "ready\\n" and never finish; write MARKER when the
                          client closes the connection
  drop                    close the connection without answering
  garbage                 send bytes that are not msgpack
  stdinstats              after stdin EOF, stdout is "<chunks> <max chunk> <bytes>"
  files                   stdout is the JSON of the request's files as received:
                          {"files": [{path, mode, size, sha256, streamed}], "chunks": N,
                          "max_chunk": N, "request_bytes": N}
  collected JSON          exit 0 with the result's files, skipped and collect_truncated
                          from JSON ({"files": [{path, mode, data_hex, truncated,
                          size?}], "skipped": [...], "collect_truncated": bool}): paths
                          as hostile as a test wants
  other                   (any other argv[0]) an execve that failed with ENOENT

stats and token.list answer fixed values too.

It checks the client's side of the protocol: stdin chunks of at most 64 KiB, nothing
after the EOF, stdin only after exec.started, exec.file chunks of at most 64 KiB that add
up to the files declared by size (before exec.started, as sbxd starts the command only
once they are in), and answers violations with status error.
"""

import hashlib
import json
import os
import socket
import socketserver
import sys
import threading
import time
import queue

import msgpack

VERSION = "0.0-fake"
STDIN_MAX = 64 * 1024
FILE_CHUNK_MAX = 64 * 1024
MESSAGE_MAX = 1 << 20  # sbxd's default max_message_bytes

STATS = {"sandboxes_live": 3, "tasks_running": 1, "netns_recycling": True,
         "netns": {"created": 5, "reused": 7, "dropped": 0},
         "host_id_blocks": {"held": 3, "total": 1024}}

TOKENS = [
    {"id": "tok1", "state": "active", "created_at_ms": 1700000000000,
     "expires_at_ms": 1700000300000, "revoked_at_ms": None, "uses": 3, "uses_left": 2,
     "running": 0, "net": "none", "pools": ["python"],
     "mounts": [{"src": "/srv/data", "dst": "/data"}]},
]

EGRESS = {"profile": "web", "requests": 4, "denials": 1, "bytes": 1234, "flagged": True}

POOLS = [
    {"name": "python", "warm": 4, "target": 4, "running": 1, "max": 16, "queued": 0,
     "queue_max": 64, "created": 120, "failed": 0, "image": "python-3.11",
     "seccomp": "default"},
    {"name": "integrations-long", "warm": 0, "target": 2, "running": 12, "max": 12,
     "queued": 3, "queue_max": 8, "created": 7, "failed": 1234567, "image": "integ",
     "seccomp": None},
]


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.lock = threading.Lock()
        self.tasks = {}  # msgid -> queue of stdin chunks (None: connection closed)
        self.file_queues = {}  # msgid -> queue of exec.file chunks (None: connection closed)
        self.closed_markers = []
        self.started = set()  # msgids whose exec.started was sent
        self.gone = False  # the client closed the connection

    def send(self, obj):
        data = msgpack.packb(obj, use_bin_type=True)
        with self.lock:
            try:
                self.sock.sendall(data)
            except OSError:
                pass

    def notify(self, method, msgid, payload):
        self.send([2, method, [msgid, payload]])

    def respond(self, msgid, result, error=None):
        self.send([1, msgid, error, result])


def result(status, task_no, **kw):
    r = {"status": status, "exit_code": None, "signal": None, "wall_ms": 12, "cpu_ms": 3,
         "mem_peak_bytes": 1 << 20, "stdout_bytes": 0, "stderr_bytes": 0,
         "truncated": False, "sandbox": "sb%04d" % task_no, "task": "t%04d" % task_no,
         "pool": "python"}
    r.update(kw)
    return r


TASK_COUNTER = [0]


def receive_files(args, file_q, request_bytes):
    """The request's files with the streamed ones filled from exec.file chunks: (report,
    violation)."""
    entries = args.get("files") or []
    declared = sum(e.get("size", 0) for e in entries if "data" not in e)
    stream, chunks, max_chunk = b"", 0, 0
    while len(stream) < declared:
        c = file_q.get()
        if c is None:
            return None, "connection closed before the files arrived"
        if not isinstance(c, bytes):
            return None, "exec.file payload is not bin"
        if len(c) > FILE_CHUNK_MAX:
            return None, "exec.file chunk of %d bytes" % len(c)
        chunks, max_chunk = chunks + 1, max(max_chunk, len(c))
        stream += c
    if len(stream) > declared:
        return None, "exec.file bytes past the declared %d" % declared
    files, off = [], 0
    for e in entries:
        if "data" in e:
            data, streamed = e["data"], False
        else:
            data, streamed = stream[off:off + e["size"]], True
            off += e["size"]
        if isinstance(data, str):
            data = data.encode()
        files.append({"path": e.get("path"), "mode": e.get("mode"), "size": len(data),
                      "sha256": hashlib.sha256(data).hexdigest(), "streamed": streamed})
    return {"files": files, "chunks": chunks, "max_chunk": max_chunk,
            "request_bytes": request_bytes}, None


def run_exec(conn, msgid, args, stdin_q, file_q, request_bytes):
    TASK_COUNTER[0] += 1
    n = TASK_COUNTER[0]
    argv = args.get("argv") or [""]
    cmd, rest = argv[0], argv[1:]
    sent = {"out": 0, "err": 0}

    def out(data):
        sent["out"] += len(data)
        conn.notify("exec.stdout", msgid, data)

    def err(data):
        sent["err"] += len(data)
        conn.notify("exec.stderr", msgid, data)

    def finish(status, **kw):
        conn.respond(msgid, result(status, n, stdout_bytes=sent["out"],
                                   stderr_bytes=sent["err"], **kw))

    def read_stdin(on_chunk=None):
        """Returns (chunks, violation) once stdin reached EOF or the client broke a rule."""
        chunks = []
        while True:
            c = stdin_q.get()
            if c is None:
                return chunks, "connection closed before stdin EOF"
            if isinstance(c, str):
                return chunks, c
            if len(c) > STDIN_MAX:
                return chunks, "stdin chunk of %d bytes" % len(c)
            if len(c) == 0:
                return chunks, None
            chunks.append(c)
            if on_chunk:
                on_chunk(c)

    if cmd == "rpcerror":
        conn.respond(msgid, None, {"code": rest[0], "message": rest[1]})
        return
    if cmd == "drop":
        conn.sock.shutdown(socket.SHUT_RDWR)
        return
    if cmd == "garbage":
        with conn.lock:
            conn.sock.sendall(b"\xc1\xc1\xc1\xc1")
        return

    received, violation = receive_files(args, file_q, request_bytes)
    if violation:
        finish("error", error="protocol violation: " + violation)
        return
    conn.started.add(msgid)
    conn.notify("exec.started", msgid, {"task": "t%04d" % n, "sandbox": "sb%04d" % n,
                                        "pool": args.get("pool", "python")})
    if cmd == "echo":
        _, violation = read_stdin(out)
        if violation:
            finish("error", error="protocol violation: " + violation)
            return
        finish("exited", exit_code=int(rest[0]) if rest else 0)
    elif cmd == "stdinstats":
        chunks, violation = read_stdin()
        if violation:
            finish("error", error="protocol violation: " + violation)
            return
        sizes = [len(c) for c in chunks]
        out(("%d %d %d" % (len(sizes), max(sizes or [0]), sum(sizes))).encode())
        finish("exited", exit_code=0)
    elif cmd == "exit":
        finish("exited", exit_code=int(rest[0]))
    elif cmd == "files":
        out(json.dumps(received, sort_keys=True).encode())
        finish("exited", exit_code=0)
    elif cmd == "collected":
        spec = json.loads(rest[0])
        files = [{"path": f["path"], "mode": f.get("mode", 0o644),
                  "size": f.get("size", len(bytes.fromhex(f.get("data_hex", "")))),
                  "data": bytes.fromhex(f.get("data_hex", "")),
                  "truncated": f.get("truncated", False)} for f in spec.get("files", [])]
        finish("exited", exit_code=0, files=files, skipped=spec.get("skipped", []),
               collect_truncated=spec.get("collect_truncated", False),
               files_in_bytes=0, files_out_bytes=sum(len(f["data"]) for f in files))
    elif cmd == "out":
        out(bytes.fromhex(rest[0]))
        if len(rest) > 1:
            err(bytes.fromhex(rest[1]))
        finish("exited", exit_code=int(rest[2]) if len(rest) > 2 else 0)
    elif cmd == "big":
        total = int(rest[0])
        block = bytes(range(256)) * 256
        while total > 0:
            k = min(total, len(block))
            out(block[:k])
            total -= k
        finish("exited", exit_code=int(rest[1]) if len(rest) > 1 else 0)
    elif cmd == "huge":
        out(b"h" * int(rest[0]))
        finish("exited", exit_code=0)
    elif cmd == "hugeheader":
        # [2, "exec.stdout", [msgid, bin32 of N]]: a reader bounded below N refuses it on the
        # header, so the body need not exist.
        data = (b"\x93" + msgpack.packb(2) + msgpack.packb("exec.stdout") + b"\x92" +
                msgpack.packb(msgid) + b"\xc6" + int(rest[0]).to_bytes(4, "big"))
        with conn.lock:
            try:
                conn.sock.sendall(data)
            except OSError:
                pass
    elif cmd == "signal":
        finish("signaled", signal=int(rest[0]))
    elif cmd == "timeout":
        out(b"partial\n")
        finish("timeout", wall_ms=2000)
    elif cmd == "oom":
        err(b"allocating\n")
        finish("oom", mem_peak_bytes=256 << 20)
    elif cmd == "outlimit":
        out(b"x" * int(rest[0]))
        finish("output_limit", truncated=True)
    elif cmd == "error":
        extra = {"error_stage": rest[1]} if len(rest) > 1 else {}
        finish("error", error=rest[0], **extra)
    elif cmd == "execfail":
        finish("error", error="cannot execute the command: execve 'x y': %s" % rest[0],
               error_stage="exec", error_errno=rest[0])
    elif cmd == "egress":
        finish("exited", exit_code=0, egress=EGRESS)
    elif cmd == "expired":
        finish("token_expired")
    elif cmd == "spew":
        conn.closed_markers.append(rest[0])
        i = 0
        while not conn.gone:
            i += 1
            out(b"%d\n" % i)
            time.sleep(0.01)
    elif cmd == "params":
        out(json.dumps(args, sort_keys=True).encode())
        finish("exited", exit_code=0)
    elif cmd == "hang":
        conn.closed_markers.append(rest[0])
        out(b"ready\n")
    else:
        finish("error", error="cannot execute the command: execve '%s': ENOENT" % cmd,
               error_stage="exec", error_errno="ENOENT")


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        conn = Conn(self.request)
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=64 << 20)
        try:
            while True:
                data = self.request.recv(1 << 16)
                if not data:
                    break
                unpacker.feed(data)
                for msg in unpacker:
                    self.dispatch(conn, msg)
        except (OSError, ValueError):
            pass
        finally:
            conn.gone = True
            for q in list(conn.tasks.values()) + list(conn.file_queues.values()):
                q.put(None)
            for marker in conn.closed_markers:
                with open(marker, "w") as f:
                    f.write("closed\n")

    def dispatch(self, conn, msg):
        if msg[0] == 0:
            _, msgid, method, params = msg
            args = params[0] if params else {}
            if method == "ping":
                conn.respond(msgid, {"pong": True, "version": self.server.version})
            elif method == "pools":
                conn.respond(msgid, POOLS)
            elif method == "stats":
                conn.respond(msgid, STATS)
            elif method == "token.list":
                conn.respond(msgid, TOKENS)
            elif method == "exec":
                if args.get("stdin") is not True:
                    conn.respond(msgid, None, {"code": "bad_request",
                                               "message": "stdin must be true"})
                    return
                q, fq = queue.Queue(), queue.Queue()
                conn.tasks[msgid] = q
                conn.file_queues[msgid] = fq
                size = len(msgpack.packb(msg, use_bin_type=True))
                if size > MESSAGE_MAX:
                    conn.respond(msgid, None, {"code": "too_large",
                                               "message": "request above the message bound"})
                    return
                threading.Thread(target=run_exec, args=(conn, msgid, args, q, fq, size),
                                 daemon=True).start()
            else:
                conn.respond(msgid, None, {"code": "unknown_method",
                                           "message": "unknown method '%s'" % method})
        elif msg[0] == 2 and msg[1] == "exec.file":
            msgid, chunk = msg[2]
            fq = conn.file_queues.get(msgid)
            if fq is not None:
                fq.put(chunk)
        elif msg[0] == 2 and msg[1] == "exec.stdin":
            msgid, chunk = msg[2]
            q = conn.tasks.get(msgid)
            if q is None:
                return
            if msgid not in conn.started:
                q.put("stdin before exec.started")
                return
            if getattr(q, "eof", False):
                q.put("data after EOF")
                return
            if not isinstance(chunk, bytes):
                q.put("stdin payload is not bin")
                return
            if len(chunk) == 0:
                q.eof = True
            q.put(chunk)


class Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


def main():
    path = sys.argv[1]
    version = VERSION
    if len(sys.argv) > 3 and sys.argv[2] == "--version":
        version = sys.argv[3]
    if os.path.exists(path):
        os.unlink(path)
    srv = Server(path, Handler)
    srv.version = version
    print("ready", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
