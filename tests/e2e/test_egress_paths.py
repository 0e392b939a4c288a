# SPDX-License-Identifier: MIT
"""A route's path_prefix is a boundary for any common upstream (docs/EGRESS.md, "Paths"):
from inside a task under a network profile, every spelling of a dot segment, an encoded or
doubled separator, a NUL or a path parameter that an upstream could resolve outside the
prefix is refused by the real proxy with a 403 and its reason, and never reaches the real
upstream (python's http.server on 127.0.0.1, recording the request target it got); what is
allowed reaches it normalized, and every path it got stays under the prefix however Tomcat,
Jetty or Spring (path parameters stripped, then decoded, then dots resolved), a double
decoder or RFC 3986 would read it."""
import http.server
import json
import subprocess
import threading
import unittest
import urllib.parse

from harness import Daemon, pool_yaml, SBX
import sbx_client


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers 200 with the request target it got, exactly as it got it, and records it."""
    protocol_version = "HTTP/1.1"
    seen = []

    def _answer(self):
        Recorder.seen.append(self.path)
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, *args):
        pass


CONFIG = """egress:
  profiles:
    prom:
      allow_addresses: ["127.0.0.1/32"]
      routes:
        - name: prom
          methods: [GET]
          path_prefix: /prometheus/
          upstream: http://127.0.0.1:{up}
        - name: bare
          methods: [GET]
          path_prefix: /prometheus
          upstream: http://127.0.0.1:{up}
"""

# Spellings an upstream could resolve outside /prometheus/ (or into another segment): each
# is refused with 403 and never reaches it.
ESCAPES = [
    "/prometheus/..;/..;/admin",
    "/prometheus/..;/admin",
    "/prometheus/..;x=1/admin",
    "/prometheus/..;x=1;y=2/admin",
    "/prometheus/.;/admin",
    "/prometheus/.;x/admin",
    "/prometheus/../admin",
    "/prometheus/..",
    "/prometheus/./admin",
    "/prometheus/.",
    "/prometheus/%2e%2e/admin",
    "/prometheus/%2E%2E/admin",
    "/prometheus/.%2e/admin",
    "/prometheus/%2e./admin",
    "/prometheus/.%2E/admin",
    "/prometheus/%2e/admin",
    "/prometheus/%2e%2e;/admin",
    "/prometheus/.%2E;x=1/admin",
    "/prometheus/..%3b/admin",
    "/prometheus/..%3Bx=1/admin",
    "/prometheus/%252e%252e/admin",
    "/prometheus/%252E%252E/admin",
    "/prometheus/.%252e/admin",
    "/prometheus/%25%32%65%25%32%65/admin",
    "/prometheus/%2525%32%65/admin",
    "/prometheus/..%5c..%5cadmin",
    "/prometheus/..%5Cadmin",
    "/prometheus/..\\..\\admin",
    "/prometheus/a\\b",
    "/prometheus/..%2fadmin",
    "/prometheus/%2e%2e%2fadmin",
    "/prometheus/a%2F..%2F..%2Fadmin",
    "/prometheus/%252fadmin",
    "/prometheus/..%00/admin",
    "/prometheus/%00",
    "/prometheus/.%00./admin",
    "/prometheus/x;/../admin",
    "/prometheus/;/../admin",
    "/prometheus/;x=1/admin",
    "/prometheus/;/admin",
    "/prometheus/x;../admin",
    "/prometheus;x=1/../admin",
    "/prometheus/..%20/admin",
    "/prometheus/.../admin",
    "/prometheus//admin",
    "/prometheus/%c0%ae%c0%ae/admin",
    "/prometheus/%e0%80%ae%e0%80%ae/admin",
    "/prometheus/%ef%bc%8e%ef%bc%8e/admin",
    "/prometheus/..%ef%bc%8fadmin",
    "/prometheus/..%ef%bc%bcadmin",
    "/prometheus/%2e%2",
    "/prometheus/%u002e%u002e/admin",
]

# Outside the prefix by whole segments: refused as such.
OUTSIDE = [
    ("prom", "/prometheusX/api"),
    ("prom", "/prometheus"),
    ("prom", "/prometheus;x=1/api"),
    ("prom", "/Prometheus/api"),
    ("prom", "/admin"),
    ("bare", "/prometheusX"),
    ("bare", "/prometheus;jsessionid=1"),
]

# Allowed: (route, what the task asks, what the upstream must get).
ALLOWED = [
    ("prom", "/prometheus/api/v1/query", "/prometheus/api/v1/query"),
    ("prom", "/%70rometheus/api/v1/query", "/prometheus/api/v1/query"),
    ("prom", "/prometheus/%61%70%69/v1/%71uery", "/prometheus/api/v1/query"),
    ("prom", "/prometheus/a%2db%5F%7ec%2E1", "/prometheus/a-b_~c.1"),
    ("prom", "/prometheus/caf%c3%a9", "/prometheus/caf%C3%A9"),
    ("prom", "/prometheus/x%3bjsessionid=1", "/prometheus/x%3Bjsessionid=1"),
    ("prom", "/prometheus/x;v=1", "/prometheus/x;v=1"),
    ("prom", "/prometheus/100%25", "/prometheus/100%25"),
    ("prom", "/prometheus/a..b/..c/c../.x", "/prometheus/a..b/..c/c../.x"),
    ("prom", "/prometheus/api/", "/prometheus/api/"),
    ("prom", "/prometheus/q?x=..;/../%2e%2e", "/prometheus/q?x=..;/../%2e%2e"),
    ("bare", "/prometheus", "/prometheus"),
    ("bare", "/prometheus/x", "/prometheus/x"),
]

TASK = r'''
import json, socket, sys
def ask(host, path, method="GET"):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(("%s http://%s%s HTTP/1.1\r\nHost: %s\r\n\r\n" % (method, host, path, host))
              .encode("latin-1"))
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    hdrs = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
    return int(lines[0].split()[1]), hdrs.get("X-Sbx-Egress"), body.decode("latin-1")
for host, path, method in json.loads(sys.argv[1]):
    print(json.dumps([host, path, method] + list(ask(host, path, method))), flush=True)
'''


def strip_params(path):
    """Tomcat, Jetty and Spring: each segment's path parameters (from ';') go first."""
    return "/".join(seg.split(";", 1)[0] for seg in path.split("/"))


def remove_dots(path):
    """RFC 3986 5.2.4, as servers resolve '.' and '..' (and a backslash as a separator)."""
    out = []
    for seg in path.replace("\\", "/").split("/")[1:]:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    return "/" + "/".join(out)


def readings(target):
    """The paths common upstreams make of a request target they got."""
    path = target.split("?", 1)[0]
    once = urllib.parse.unquote(path)
    return {
        "rfc3986": remove_dots(path),
        "decode, then resolve": remove_dots(once),
        "tomcat/jetty/spring": remove_dots(urllib.parse.unquote(strip_params(path))),
        "decode, strip, resolve": remove_dots(strip_params(once)),
        "double decode": remove_dots(urllib.parse.unquote(once)),
        "double decode, strip": remove_dots(strip_params(urllib.parse.unquote(once))),
    }


def under(path, prefix):
    """Whether path lies under prefix by whole segments."""
    if prefix.endswith("/"):
        return path.startswith(prefix)
    return path == prefix or path.startswith(prefix + "/")


class EgressPaths(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.up = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        threading.Thread(target=cls.up.serve_forever, daemon=True).start()
        cls.d = Daemon(pools=[pool_yaml("python", warm=1, max=4)],
                       config_extra=CONFIG.format(up=cls.up.server_address[1]))

    @classmethod
    def tearDownClass(cls):
        try:
            cls.d.stop()
        finally:
            cls.up.shutdown()

    def setUp(self):
        Recorder.seen.clear()

    def ask(self, requests):
        """Sends each (host, path, method) from one task under the profile; returns the rows
        (host, path, method, status, X-Sbx-Egress, body) in order."""
        r = subprocess.run([SBX, "--admin-socket", self.d.admin, "token", "issue", "--net",
                            "prom"], capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        out, err = [], []

        def on_notify(method, rest):
            if method in ("exec.stdout", "exec.stderr"):
                (out if method == "exec.stdout" else err).append(rest[0])

        args = {"argv": ["python3", "-c", TASK, json.dumps(requests)],
                "token": r.stdout.decode().strip(), "timeout": 60}
        with sbx_client.Client(self.d.sock) as c:
            res = c.wait(c.start("exec", args, on_notify), 90)
        text = b"".join(err).decode(errors="replace")
        self.assertEqual((res["status"], res["exit_code"]), ("exited", 0), (res, text))
        rows = [json.loads(l) for l in b"".join(out).decode().splitlines() if l.strip()]
        self.assertEqual(len(rows), len(requests), text)
        return rows

    def test_dot_segments_in_every_spelling_are_refused(self):
        rows = self.ask([["prom", p, "GET"] for p in ESCAPES] + [["prom", "/..;/admin", "GET"]])
        for host, path, method, status, how, body in rows:
            with self.subTest(path=path):
                self.assertEqual(status, 403, (path, body))
                self.assertEqual(how, "denied", (path, body))
                self.assertTrue(body.startswith("sbx egress: GET prom:80: the path "), (path, body))
                self.assertNotIn("outside the route's prefix", body, path)
        self.assertEqual(Recorder.seen, [])

    def test_a_raw_nul_is_malformed(self):
        rows = self.ask([["prom", "/prometheus/..\0/admin", "GET"]])
        self.assertEqual(rows[0][3], 400, rows)
        self.assertEqual(Recorder.seen, [])

    def test_prefix_is_matched_by_whole_segments(self):
        rows = self.ask([[h, p, "GET"] for h, p in OUTSIDE] +
                        [["prom", "/prometheus/api", "POST"]])
        for host, path, method, status, how, body in rows[:-1]:
            with self.subTest(path=path):
                self.assertEqual(status, 403, (path, body))
                self.assertIn("the path is outside the route's prefix", body, path)
        self.assertEqual(rows[-1][3], 403)
        self.assertIn("the method is not allowed on the route", rows[-1][5])
        self.assertEqual(Recorder.seen, [])

    def test_allowed_paths_reach_the_upstream_normalized(self):
        rows = self.ask([[h, p, "GET"] for h, p, _ in ALLOWED])
        for (host, path, want), row in zip(ALLOWED, rows):
            with self.subTest(path=path):
                self.assertEqual(row[3], 200, row)
                self.assertEqual(json.loads(row[5])["path"], want, row)
        self.assertEqual(sorted(Recorder.seen), sorted(w for _, _, w in ALLOWED))
        prefixes = {"prom": "/prometheus/", "bare": "/prometheus"}
        for host, path, want in ALLOWED:
            for how, p in readings(want).items():
                with self.subTest(path=want, reading=how):
                    self.assertTrue(under(p, prefixes[host]), (want, how, p))


if __name__ == "__main__":
    unittest.main()
