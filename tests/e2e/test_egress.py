# SPDX-License-Identifier: MIT
"""The egress proxy (docs/EGRESS.md), end to end through real capability tokens: named
routes with an injected credential the task never sees, HTTPS CONNECT with the ClientHello's
server name checked, addresses checked after resolution, read-only profiles, byte and
connection limits, denials answered with 403, audited, counted in metrics and flagged in the
task's result. Every server here listens on 127.0.0.1 only."""
import http.server
import json
import os
import re
import shutil
import socket
import sqlite3
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

from harness import Daemon, pool_yaml, SBX, SBXD
import sbx_client

SECRET = "Bearer sbx-test-credential-7d1c0c5e2a9b4f36"
SECRET_TOKEN = SECRET.split(" ", 1)[1]
BIG = 200 * 1024


class Upstream(http.server.BaseHTTPRequestHandler):
    """Records every request; /base/v1/echo answers with the request's headers (so that a
    credential echoed back must be scrubbed), /base/v1/chunked the same in small chunks
    split inside the credential, /base/v1/big 200 KiB."""
    protocol_version = "HTTP/1.1"
    seen = []

    def _record(self, body):
        Upstream.seen.append({"method": self.command, "path": self.path,
                              "headers": dict(self.headers), "body": len(body)})

    def _slow(self):
        """Waits for the proxy to close this connection (at most 20 s); records how it ended."""
        self.connection.settimeout(20)
        try:
            closed = self.connection.recv(1) == b""
        except OSError:
            closed = True
        Upstream.seen.append({"method": self.command, "path": self.path, "closed": closed})
        self.close_connection = True

    def _answer(self):
        if self.path.endswith("/slow"):
            return self._slow()
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        self._record(body)
        if self.path.endswith("/big"):
            payload = b"x" * BIG
        elif self.path.endswith("/chunked"):
            payload = None
        else:
            payload = json.dumps({"path": self.path, "headers": dict(self.headers),
                                  "body": len(body)}).encode()
        self.send_response(200)
        self.send_header("X-Echo-Auth", self.headers.get("Authorization", ""))
        if payload is None:
            text = json.dumps(dict(self.headers)).encode()
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(0, len(text), 7):
                part = text[i:i + 7]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_HEAD = do_OPTIONS = do_DELETE = _answer

    def log_message(self, *args):
        pass


class TlsUpstream(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello over tls " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    """Clients cut off by a byte limit are expected here, not errors."""
    def handle_error(self, request, client_address):
        pass


def serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RawUpstream:
    """Records the bytes each connection brings, exactly as the proxy sent them, and never
    answers: what a lenient upstream parser would have to work with."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        data = b""
        conn.settimeout(20)
        try:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        conn.close()
        with self.lock:
            self.received.append(data)

    def close(self):
        self.sock.close()


def egress_config(up, tls, cred, metrics, raw=9):
    return """metrics: 127.0.0.1:{metrics}
egress:
  profiles:
    full:
      allow: ["localhost:{tls}"]
      allow_addresses: ["127.0.0.1/32"]
      routes:
        - name: api
          methods: [GET, HEAD, POST]
          path_prefix: /v1/
          upstream: http://127.0.0.1:{up}/base
          credential_file: {cred}
        - name: raw
          methods: [POST]
          upstream: http://127.0.0.1:{raw}/r
    ro:
      read_only: true
      allow_addresses: ["127.0.0.1/32"]
      routes:
        - name: api
          path_prefix: /v1/
          upstream: http://127.0.0.1:{up}/base
          credential_file: {cred}
    noaddr:
      allow: ["localhost:{tls}"]
      routes:
        - name: api
          upstream: http://127.0.0.1:{up}/base
    small:
      allow_addresses: ["127.0.0.1/32"]
      max_request_bytes: 64KiB
      max_task_bytes: 160KiB
      max_connections: 2
      routes:
        - name: api
          upstream: http://127.0.0.1:{up}/base
""".format(up=up, tls=tls, cred=cred, metrics=metrics, raw=raw)


# Helpers that run inside the sandbox (python3 from the image).
TASK_PRELUDE = r'''
import json, os, socket, ssl, sys, urllib.request, urllib.error
def fetch(url, data=None, method=None, headers=None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        r = urllib.request.urlopen(req, timeout=10)
        return r.status, r.read().decode(errors="replace"), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace"), dict(e.headers)
def connect(host_port):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (host_port.encode(), host_port.encode()))
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    while not head.startswith(b"HTTP/1.1 200"):   # a refusal: its one-line reason, to EOF
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    return s, head.decode(errors="replace")
'''


class Egress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-egress-")
        cls.cred = os.path.join(cls.tmp, "api.cred")
        with open(cls.cred, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(cls.cred, 0o600)
        cert, key = os.path.join(cls.tmp, "cert.pem"), os.path.join(cls.tmp, "key.pem")
        cls.have_tls = shutil.which("openssl") is not None and subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
             "-days", "1", "-keyout", key, "-out", cert], capture_output=True).returncode == 0
        cls.up = serve(QuietServer(("127.0.0.1", 0), Upstream))
        cls.tls = QuietServer(("127.0.0.1", 0), TlsUpstream)
        if cls.have_tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            cls.tls.socket = ctx.wrap_socket(cls.tls.socket, server_side=True)
        serve(cls.tls)
        cls.up_port = cls.up.server_address[1]
        cls.tls_port = cls.tls.server_address[1]
        cls.metrics_port = free_port()
        cls.raw = RawUpstream()
        cls.d = Daemon(pools=[pool_yaml("python", warm=2, max=8, output_cap=262144)],
                       config_extra=egress_config(cls.up_port, cls.tls_port, cls.cred,
                                                  cls.metrics_port, cls.raw.port))

    @classmethod
    def tearDownClass(cls):
        try:
            text = cls.d.logtext()
            cls.d.stop()
        finally:
            cls.up.shutdown()
            cls.tls.shutdown()
            cls.raw.close()
            shutil.rmtree(cls.tmp, ignore_errors=True)
        # The credential never reaches the log or the state dir (audit trail, tokens).
        assert SECRET_TOKEN not in text, "credential in the daemon log"
        for root, _, files in os.walk(cls.d.state):
            for name in files:
                with open(os.path.join(root, name), "rb") as f:
                    assert SECRET_TOKEN.encode() not in f.read(), "credential in " + name

    def setUp(self):
        Upstream.seen.clear()

    def token(self, *args):
        r = subprocess.run([SBX, "--admin-socket", self.d.admin, "token", "issue"] + list(args),
                           capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.decode().strip()

    def run_task(self, script, net=None, token=None, env=None, timeout=None):
        """Runs a Python script under a token granting `net`; returns (result, out, err)."""
        tok = token or (self.token("--net", net) if net else self.token())
        args = {"argv": ["python3", "-c", TASK_PRELUDE + script], "token": tok}
        if timeout:
            args["timeout"] = timeout
        if env:
            args["env"] = env
        out, err = [], []

        def on_notify(method, rest):
            if method in ("exec.stdout", "exec.stderr"):
                (out if method == "exec.stdout" else err).append(rest[0])

        with sbx_client.Client(self.d.sock) as c:
            res = c.wait(c.start("exec", args, on_notify), 60)
        return res, b"".join(out).decode(), b"".join(err).decode()

    def lines(self, out):
        return [json.loads(l) for l in out.splitlines() if l.strip()]

    # ---- routes and the credential ----

    def test_route_injects_credential_the_task_cannot_read(self):
        script = r'''
env = dict(os.environ)
print(json.dumps({"env": env, "cred_visible": os.path.exists(%r),
                  "environ1": open("/proc/self/environ", "rb").read().decode(errors="replace")}))
status, body, headers = fetch("http://api/v1/echo?q=1", headers={"Authorization": "mine"})
print(json.dumps({"status": status, "body": body, "headers": headers}))
status, body, headers = fetch("http://api/v1/chunked")
print(json.dumps({"status": status, "body": body, "headers": headers}))
''' % self.cred
        res, out, err = self.run_task(script, net="full")
        self.assertEqual(res["status"], "exited", (res, err))
        self.assertEqual(res["exit_code"], 0, err)
        info, echo, chunked = self.lines(out)
        # The task sees the proxy, not the credential or its file.
        self.assertEqual(info["env"]["HTTP_PROXY"], "http://127.0.0.1:3128")
        self.assertEqual(info["env"]["https_proxy"], "http://127.0.0.1:3128")
        self.assertFalse(info["cred_visible"])
        # The upstream saw the injected credential (not the task's own header), below the base.
        self.assertEqual(len(Upstream.seen), 2, Upstream.seen)
        first = Upstream.seen[0]
        self.assertEqual(first["path"], "/base/v1/echo?q=1")
        self.assertEqual(first["headers"]["Authorization"], SECRET)
        self.assertEqual(first["headers"]["Host"], "127.0.0.1:%d" % self.up_port)
        self.assertEqual(first["headers"]["Connection"], "close")
        self.assertEqual(Upstream.seen[1]["headers"]["Authorization"], SECRET)
        # Echoed back in a header, a body and a chunked body split mid-secret: scrubbed.
        self.assertEqual(echo["status"], 200)
        self.assertEqual(chunked["status"], 200)
        self.assertIn("*" * len(SECRET_TOKEN), echo["body"])
        self.assertIn("*" * len(SECRET_TOKEN), chunked["body"])
        self.assertEqual(json.loads(chunked["body"])["Authorization"], "*" * len(SECRET))
        for text in (out, err):
            self.assertNotIn(SECRET_TOKEN, text)
        self.assertEqual(res["egress"]["profile"], "full")
        self.assertEqual(res["egress"]["denials"], 0)
        self.assertFalse(res["egress"]["flagged"])
        self.assertGreater(res["egress"]["bytes"], 0)

    def test_disallowed_host_route_path_and_method_get_403(self):
        script = r'''
for url, method in (("http://other/v1/x", "GET"), ("http://api/v2/x", "GET"),
                    ("http://api/v1/x", "DELETE"), ("http://api:8080/v1/x", "GET"),
                    ("http://api/v1/../admin", "GET"), ("http://api/v1/%2e%2e/admin", "GET")):
    status, body, headers = fetch(url, method=method)
    print(json.dumps([url, method, status, body, headers.get("X-Sbx-Egress")]))
s, head = connect("example.com:443")
print(json.dumps(["connect", head]))
'''
        res, out, err = self.run_task(script, net="full")
        self.assertEqual(res["exit_code"], 0, err)
        rows = self.lines(out)
        for url, method, status, body, how in rows[:-1]:
            self.assertEqual(status, 403, (url, method, body))
            self.assertEqual(how, "denied")
            self.assertTrue(body.startswith("sbx egress: ") and body.count("\n") == 1, body)
        self.assertIn("no route for other:80", rows[0][3])
        self.assertIn("outside the route's prefix", rows[1][3])
        self.assertIn("method is not allowed", rows[2][3])
        self.assertTrue(rows[-1][1].startswith("HTTP/1.1 403"), rows[-1])
        self.assertIn("CONNECT to example.com:443 is not allowed", rows[-1][1])
        self.assertEqual(Upstream.seen, [])
        # Seven refusals: the task kept trying and is flagged in its result.
        self.assertEqual(res["egress"]["denials"], 7)
        self.assertTrue(res["egress"]["flagged"])

    def test_read_only_profile_refuses_post_and_connect(self):
        script = r'''
print(json.dumps(fetch("http://api/v1/ok")[:2]))
print(json.dumps(fetch("http://api/v1/ok", data=b"payload", method="POST")[:2]))
s, head = connect("localhost:443")
print(json.dumps(head))
'''
        res, out, err = self.run_task(script, net="ro")
        self.assertEqual(res["exit_code"], 0, err)
        get, post, conn = self.lines(out)
        self.assertEqual(get[0], 200)
        self.assertEqual(post[0], 403)
        self.assertIn("read-only", post[1])
        self.assertTrue(conn.startswith("HTTP/1.1 403"), conn)
        self.assertEqual([r["method"] for r in Upstream.seen], ["GET"])

    # ---- CONNECT ----

    def test_connect_relays_tls_with_matching_server_name(self):
        if not self.have_tls:
            self.skipTest("openssl cannot make a certificate here")
        script = r'''
ctx = ssl._create_unverified_context()
r = urllib.request.urlopen("https://localhost:%d/secure", context=ctx, timeout=10)
print(json.dumps([r.status, r.read().decode()]))
''' % self.tls_port
        res, out, err = self.run_task(script, net="full")
        self.assertEqual(res["exit_code"], 0, err)
        self.assertEqual(self.lines(out)[0], [200, "hello over tls /secure"])
        self.assertEqual(res["egress"]["denials"], 0)

    def test_connect_with_other_server_name_or_none_is_cut(self):
        script = r'''
ctx = ssl._create_unverified_context()
s, head = connect("localhost:%d")
try:
    ctx.wrap_socket(s, server_hostname="example.com")
    print(json.dumps([head, "handshake"]))
except (ssl.SSLError, OSError) as e:
    print(json.dumps([head, "cut " + type(e).__name__]))
s, head = connect("localhost:%d")
s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
try:
    rest = s.recv(100).decode()
except OSError as e:
    rest = ""
print(json.dumps([head, rest]))
''' % (self.tls_port, self.tls_port)
        res, out, err = self.run_task(script, net="full")
        self.assertEqual(res["exit_code"], 0, err)
        other, plain = self.lines(out)
        self.assertTrue(other[0].startswith("HTTP/1.1 200"), other)
        self.assertTrue(other[1].startswith("cut"), other)
        self.assertTrue(plain[0].startswith("HTTP/1.1 200"), plain)
        self.assertEqual(plain[1], "")
        self.assertEqual(res["egress"]["denials"], 2)
        log = self.d.logtext()
        self.assertIn("TLS server name 'example.com' does not match the CONNECT host 'localhost'",
                      log)
        self.assertIn("did not start with a TLS ClientHello", log)

    # ---- addresses ----

    def test_refused_addresses_without_allow_addresses(self):
        script = r'''
s, head = connect("localhost:%d")
print(json.dumps(head))
print(json.dumps(fetch("http://api/x")[:2]))
''' % self.tls_port
        res, out, err = self.run_task(script, net="noaddr")
        self.assertEqual(res["exit_code"], 0, err)
        conn, route = self.lines(out)
        # localhost resolves (by the proxy, from /etc/hosts) to loopback only: refused.
        self.assertTrue(conn.startswith("HTTP/1.1 403"), conn)
        self.assertIn("localhost resolves only to refused addresses (127.0.0.1 is loopback)", conn)
        self.assertEqual(route[0], 403)
        self.assertIn("127.0.0.1 is loopback", route[1])
        self.assertEqual(Upstream.seen, [])

    def test_direct_connections_fail_inside_the_sandbox(self):
        script = r'''
for port in (%d, %d):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3)
        print(json.dumps([port, "connected"]))
    except OSError as e:
        print(json.dumps([port, type(e).__name__]))
try:
    socket.getaddrinfo("example.com", 80)
    print(json.dumps(["dns", "resolved"]))
except OSError as e:
    print(json.dumps(["dns", type(e).__name__]))
''' % (self.up_port, self.tls_port)
        res, out, err = self.run_task(script, net="full")
        self.assertEqual(res["exit_code"], 0, err)
        rows = self.lines(out)
        self.assertEqual(rows[0], [self.up_port, "ConnectionRefusedError"])
        self.assertEqual(rows[1], [self.tls_port, "ConnectionRefusedError"])
        self.assertNotEqual(rows[2][1], "resolved")
        self.assertEqual(Upstream.seen, [])

    def test_no_profile_no_proxy(self):
        script = r'''
print(json.dumps(sorted(k for k in os.environ if "proxy" in k.lower())))
try:
    socket.create_connection(("127.0.0.1", 3128), timeout=3)
    print(json.dumps("connected"))
except OSError as e:
    print(json.dumps(type(e).__name__))
'''
        res, out, err = self.run_task(script)
        self.assertEqual(res["exit_code"], 0, err)
        self.assertEqual(self.lines(out), [[], "ConnectionRefusedError"])
        self.assertIsNone(res["egress"])

    # ---- limits ----

    def test_byte_limits_cut_off(self):
        script = r'''
try:
    r = urllib.request.urlopen("http://api/big", timeout=10)
    data = r.read()
    print(json.dumps(["big", len(data)]))
except Exception as e:
    print(json.dumps(["big", type(e).__name__]))
print(json.dumps(["post"] + list(fetch("http://api/echo", data=b"y" * 100000, method="POST")[:2])))
sizes = []
for i in range(4):
    status, body, _ = fetch("http://api/echo", data=b"z" * 40000, method="POST")
    sizes.append(status)
print(json.dumps(["task", sizes]))
'''
        res, out, err = self.run_task(script, net="small")
        self.assertEqual(res["exit_code"], 0, err)
        big, post, task = self.lines(out)
        # 200 KiB through a 64 KiB request limit: the response is cut short.
        self.assertEqual(big[0], "big")
        self.assertNotEqual(big[1], BIG)
        self.assertEqual(post[1], 403)
        self.assertIn("max_request_bytes", post[2])
        # 160 KiB for the task: the 64 KiB already spent plus two 40 KB posts, then 403.
        self.assertEqual(task[1][:2], [200, 200], task)
        self.assertIn(403, task[1][2:])
        self.assertLessEqual(res["egress"]["bytes"], 160 * 1024)
        self.assertGreaterEqual(res["egress"]["denials"], 3)

    def test_connection_limit(self):
        script = r'''
socks = []
for i in range(3):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    s.sendall(b"GET http://api/x HTTP/1.1\r\n")   # an unfinished head keeps it open
    socks.append(s)
third = b""
while True:   # the 403's head and body may arrive in separate reads: read to EOF
    chunk = socks[2].recv(4096)
    if not chunk:
        break
    third += chunk
print(json.dumps(third.decode()))
'''
        res, out, err = self.run_task(script, net="small")
        self.assertEqual(res["exit_code"], 0, err)
        third = self.lines(out)[0]
        self.assertTrue(third.startswith("HTTP/1.1 403"), third)
        self.assertIn("connection limit (2 open)", third)

    def test_malformed_and_ambiguous_requests_get_400(self):
        script = r'''
def raw(req):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    s.sendall(req)
    return s.recv(4096).decode(errors="replace").split("\r\n")[0]
print(json.dumps([
    raw(b"POST http://api/x HTTP/1.1\r\nHost: api\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    raw(b"GET http://api/x HTTP/1.1\r\nHost: api\r\nX-A: 1\r\n folded\r\n\r\n"),
    raw(b"GET http://api/x HTTP/1.1\nHost: api\n\n\r\n\r\n"),
    raw(b"GET http://user@api/x HTTP/1.1\r\n\r\n"),
    raw(b"GET /x HTTP/1.1\r\nHost: api\r\nHost: other\r\n\r\n"),
]))
'''
        res, out, err = self.run_task(script, net="full")
        self.assertEqual(res["exit_code"], 0, err)
        for line in self.lines(out)[0]:
            self.assertTrue(line.startswith("HTTP/1.1 400"), line)
        self.assertEqual(Upstream.seen, [])

    def test_chunked_body_cannot_smuggle_a_second_request(self):
        # A last chunk ended by a bare LF: an upstream as lenient as http_parser ends the body
        # there and reads the rest as a request of its own, past the route's method and path.
        # The proxy must not take it for a trailer and pass it on (it did, before 2026-11-30).
        script = r'''
def raw(req):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    s.sendall(req)
    try:
        return s.recv(4096).decode(errors="replace").split("\r\n")[0]
    except OSError as e:
        return "no answer: %s" % e
head = b"POST http://raw/v1/x HTTP/1.1\r\nHost: raw\r\nTransfer-Encoding: chunked\r\n\r\n"
print(json.dumps([
    raw(head + b"0\r\n\nDELETE /admin HTTP/1.1\r\nHost: raw\r\n\r\n"),
    raw(head + b"0\r\nDELETE /admin HTTP/1.1\r\nHost: raw\r\n\r\n"),
]))
'''
        res, out, err = self.run_task(script, net="full")
        self.assertEqual(res["exit_code"], 0, err)
        for line in self.lines(out)[0]:
            self.assertTrue(line.startswith("HTTP/1.1 400"), line)
        deadline = time.time() + 10
        while time.time() < deadline:
            with self.raw.lock:
                if len(self.raw.received) >= 2:
                    break
            time.sleep(0.05)
        with self.raw.lock:
            received = list(self.raw.received)
        self.assertEqual(len(received), 2, received)
        for data in received:
            self.assertTrue(data.startswith(b"POST /r/v1/x HTTP/1.1\r\n"), data)
            self.assertNotIn(b"DELETE", data)

    def test_task_end_closes_its_proxy_connections(self):
        script = r'''
print(json.dumps("asking"), flush=True)
fetch("http://api/v1/slow")
'''
        res, out, err = self.run_task(script, net="full", timeout=2)
        self.assertEqual(res["status"], "timeout", (res, err))
        # The upstream saw the proxy close its side when the task was killed, not at its own
        # 20 s deadline.
        deadline = time.time() + 15
        while not Upstream.seen and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(len(Upstream.seen), 1, Upstream.seen)
        self.assertTrue(Upstream.seen[0]["closed"], Upstream.seen)

    def test_garbage_from_many_connections_harms_nothing(self):
        script = r'''
import random
rnd = random.Random(7)
samples = [b"", b"\r\n\r\n", b"GET", b"CONNECT x\r\n\r\n", b"\x16\x03\x01\xff\xff",
           b"GET http://api/v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
           b"POST http://api/v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n",
           b"CONNECT localhost:%d HTTP/1.1\r\n\r\n\x16\x03\x01\x00\x05\x01\xff\xff\xff\x00"]
socks = []
for i in range(60):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    except OSError:
        continue
    data = rnd.choice(samples) if i %% 2 else bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 3000)))
    try:
        s.sendall(data)
        if i %% 3 == 0:
            s.close()
            continue
    except OSError:
        pass
    socks.append(s)
for s in socks:
    s.close()
import time
time.sleep(0.5)
print(json.dumps(fetch("http://api/v1/after")[:1]))
''' % self.tls_port
        res, out, err = self.run_task(script, net="full")
        self.assertEqual(res["exit_code"], 0, err)
        self.assertEqual(self.lines(out), [[200]])
        # Valid heads whose chunked bodies turn out malformed reach the upstream before the
        # body is cut; nothing else does.
        paths = [r["path"] for r in Upstream.seen]
        self.assertEqual(paths[-1], "/base/v1/after")
        self.assertEqual(set(paths[:-1]) - {"/base/v1/x"}, set())

    # ---- audit and metrics ----

    def test_denials_are_audited_and_counted(self):
        script = r'''
print(json.dumps(fetch("http://nowhere/")[:1]))
'''
        res, out, err = self.run_task(script, net="full")
        self.assertEqual(self.lines(out), [[403]])
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.d.state, "audit.db"), uri=True)
        try:
            rows = db.execute("SELECT fields FROM events WHERE type = 'proxy.denied' AND task = ?",
                              (res["task"],)).fetchall()
        finally:
            db.close()
        self.assertEqual(len(rows), 1, rows)
        ev = json.loads(rows[0][0])
        self.assertEqual(ev["profile"], "full")
        self.assertEqual(ev["destination"], "nowhere:80")
        self.assertIn("no route for nowhere:80", ev["reason"])
        # Counted when the connection is freed, a moment after the task's result.
        pattern = r'sbx_proxy_requests_total\{profile="full",outcome="denied"\} [1-9]'
        deadline = time.time() + 10
        while True:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port) as r:
                text = r.read().decode()
            if re.search(pattern, text) or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertRegex(text, pattern)


class CredentialFiles(unittest.TestCase):
    def check(self, mode):
        tmp = tempfile.mkdtemp(prefix="sbx-egress-cred-")
        try:
            cred = os.path.join(tmp, "c")
            with open(cred, "w") as f:
                f.write(SECRET + "\n")
            os.chmod(cred, mode)
            pools = os.path.join(tmp, "pools")
            os.mkdir(pools)
            with open(os.path.join(pools, "python.yaml"), "w") as f:
                f.write(pool_yaml("python"))
            cfg = os.path.join(tmp, "sbxd.yaml")
            with open(cfg, "w") as f:
                f.write("pools_dir: pools\ndefault_pool: python\nstate_dir: %s/state\n" % tmp +
                        egress_config(8080, 8443, cred, 9999))
            return subprocess.run([SBXD, "--config", cfg, "--check-config"], capture_output=True,
                                  timeout=30)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_private_credential_file_is_accepted(self):
        r = self.check(0o600)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_world_or_group_readable_credential_file_is_refused(self):
        for mode in (0o644, 0o640, 0o604):
            r = self.check(mode)
            self.assertEqual(r.returncode, 78, r)
            msg = r.stderr.decode()
            self.assertIn("readable by sbxd only (chmod 600)", msg)
            self.assertIn("egress profile 'full'", msg)
            self.assertNotIn(SECRET_TOKEN, msg)


if __name__ == "__main__":
    unittest.main()
