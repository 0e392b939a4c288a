# SPDX-License-Identifier: MIT
"""Prometheus metrics against a live sbxd: the exposition's values after known tasks,
`promtool check metrics`, a real Prometheus server scraping sbxd and answering queries, the
alert rules and scrape config under promtool, the dashboard's queries, and the HTTP
listener's bounds (400, 404, 405, 414, 431, slow clients dropped, a connection flood that
does not stall tasks). Start-up fails clearly when the metrics address is taken or bad."""
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

from harness import Daemon, DaemonTest, pool_yaml, SBXD, TOP
import sbx_client

PROM_DIR = os.path.join(TOP, "deploy", "prometheus")
# http.h: HTTP_REQUEST_TIMEOUT_MS and HTTP_MAX_CONNECTIONS.
HTTP_REQUEST_TIMEOUT = 5.0
HTTP_MAX_CONNECTIONS = 64


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_get(port, path, method="GET", timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def raw_request(port, data, timeout=10):
    """Sends data on a fresh connection and returns everything the server sent."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    finally:
        s.close()


def parse_exposition(text):
    """{(name, frozenset(labels.items())): value} from the text format."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        assert m, "bad sample line %r" % line
        labels = {}
        if m.group(3):
            for lm in re.finditer(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3)):
                labels[lm.group(1)] = lm.group(2)
        samples[(m.group(1), frozenset(labels.items()))] = float(m.group(4))
    return samples


def value(samples, name, **labels):
    key = (name, frozenset(labels.items()))
    if key not in samples:
        raise AssertionError("no sample %s%s" % (name, labels))
    return samples[key]


def need(tool):
    path = shutil.which(tool)
    if not path:
        raise unittest.SkipTest("%s is not installed (apt package prometheus; `make deps` "
                                "installs it)" % tool)
    return path


class Values(DaemonTest):
    """Known tasks, then the exposition, promtool and a real Prometheus."""
    port = free_port()
    config_extra = "metrics: 127.0.0.1:%d\n" % port
    pools = [pool_yaml("python", warm=2, max=4, output_cap=1024),
             pool_yaml("small", warm=0, max=1)]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.d.wait_warm("python")
        cls.cold = 0  # python tasks that found no warm sandbox (refills race the next task)
        with cls.d.client() as c:
            def run(argv, status, timeout=None):
                res, out, _ = c.exec(argv, timeout=timeout)
                assert res["status"] == status, res
                cls.cold += 1 if res["cold"] else 0
                return out
            for argv in (["/bin/true"], ["echo", "hello"], ["sh", "-c", "exit 3"]):
                run(argv, "exited")
            run(["sh", "-c", "kill -KILL $$"], "signaled")
            run(["sleep", "30"], "timeout", timeout=0.5)
            assert len(run(["yes"], "output_limit")) == 1024
            res, _, _ = c.exec(["echo", "cold"], pool="small")
            assert res["status"] == "exited" and res["cold"], res
            for method, params, code in (("no.such.method", {}, "unknown_method"),
                                         ("exec", {"argv": ["x"], "pool": "nope"},
                                          "unknown_pool")):
                try:
                    c.call(method, params)
                    raise AssertionError("%s did not fail" % method)
                except sbx_client.RpcError as e:
                    assert e.code == code, e
        cls.d.wait_warm("python")

    def scrape(self):
        status, headers, body = http_get(self.port, "/metrics")
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8")
        return body.decode()

    def test_exposition_values(self):
        s = parse_exposition(self.scrape())
        py = {"pool": "python"}
        for status, n in (("exited", 3), ("signaled", 1), ("timeout", 1), ("output_limit", 1),
                          ("oom", 0), ("error", 0)):
            self.assertEqual(value(s, "sbx_tasks_total", status=status, **py), n, status)
        self.assertEqual(value(s, "sbx_tasks_total", pool="small", status="exited"), 1)
        self.assertEqual(value(s, "sbx_pool_target", **py), 2)
        self.assertEqual(value(s, "sbx_pool_max", **py), 4)
        self.assertEqual(value(s, "sbx_pool_warm", **py), 2)
        self.assertEqual(value(s, "sbx_pool_running", **py), 0)
        self.assertEqual(value(s, "sbx_pool_queued", **py), 0)
        self.assertEqual(value(s, "sbx_pool_target", pool="small"), 0)
        self.assertEqual(value(s, "sbx_sandbox_cold_starts_total", pool="small"), 1)
        self.assertEqual(value(s, "sbx_sandbox_cold_starts_total", **py), self.cold)
        self.assertEqual(value(s, "sbx_sandbox_create_failures_total", **py), 0)
        # The fork server forked every sandbox made so far, and runs.
        with self.d.client() as c:
            fs = {p["name"]: p["fork_server"] for p in c.call("pools")}
        self.assertEqual(value(s, "sbx_fork_server_up", **py), 1)
        self.assertGreaterEqual(value(s, "sbx_fork_server_spawned_total", **py), 6)
        self.assertLessEqual(value(s, "sbx_fork_server_spawned_total", **py),
                             fs["python"]["spawned"])
        self.assertEqual(value(s, "sbx_fork_server_failures_total", **py), 0)
        # Histograms: one observation per task, cumulative buckets ending in +Inf = _count.
        for name, n in (("sbx_task_duration_seconds", 6), ("sbx_task_queue_wait_seconds", 6),
                        ("sbx_task_start_seconds", 6)):
            self.assertEqual(value(s, name + "_count", **py), n, name)
            self.assertEqual(value(s, name + "_bucket", le="+Inf", **py), n, name)
            buckets = sorted((float(dict(k[1])["le"]), v) for k, v in s.items()
                             if k[0] == name + "_bucket" and dict(k[1]).get("pool") == "python")
            counts = [v for _, v in buckets]
            self.assertEqual(counts, sorted(counts), name)
        # The timeout task ran 0.5 s; the others are far below.
        self.assertEqual(value(s, "sbx_task_duration_seconds_bucket", le="0.25", **py), 5)
        self.assertGreaterEqual(value(s, "sbx_task_duration_seconds_sum", **py), 0.5)
        # Every sandbox that served a task or is warm became ready once.
        self.assertGreaterEqual(value(s, "sbx_sandbox_create_seconds_count", **py), 6 + 2)
        self.assertEqual(value(s, "sbx_output_truncated_total", **py), 1)
        self.assertEqual(value(s, "sbx_output_bytes_total", stream="stdout", **py), 1024 + 6)
        self.assertEqual(value(s, "sbx_output_bytes_total", stream="stderr", **py), 0)
        self.assertEqual(value(s, "sbx_rpc_requests_total", method="exec"), 8)
        self.assertEqual(value(s, "sbx_rpc_requests_total", method="unknown"), 1)
        self.assertEqual(value(s, "sbx_rpc_errors_total", kind="unknown_method"), 1)
        self.assertEqual(value(s, "sbx_rpc_errors_total", kind="unknown_pool"), 1)
        self.assertNotIn("no.such.method", str(s))
        self.assertEqual(value(s, "sbx_sandbox_leaks_total"), 0)
        self.assertEqual(value(s, "sbx_tokens_active"), 0)
        # The audit trail reports its own series (its batches depend on its timing).
        self.assertGreaterEqual(value(s, "sbx_audit_queue_depth"), 0)
        self.assertEqual(value(s, "sbx_audit_batch_seconds_count"),
                         value(s, "sbx_audit_batch_seconds_bucket", le="+Inf"))
        self.assertEqual(value(s, "sbx_build_info", version="0.1.0"), 1)
        rss = value(s, "process_resident_memory_bytes")
        self.assertGreater(rss, 1 << 20)
        self.assertLess(rss, 1 << 30)
        self.assertGreater(value(s, "process_open_fds"), 5)
        self.assertGreater(value(s, "process_cpu_seconds_total"), 0)
        self.assertAlmostEqual(value(s, "process_start_time_seconds"), time.time(), delta=600)
        self.assertLessEqual(value(s, "process_start_time_seconds"), time.time())

    def test_promtool_check_metrics(self):
        promtool = need("promtool")
        r = subprocess.run([promtool, "check", "metrics"], input=self.scrape().encode(),
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout + r.stderr, b"")

    def test_head_and_healthz(self):
        status, headers, body = http_get(self.port, "/metrics", method="HEAD")
        self.assertEqual(status, 200)
        self.assertEqual(body, b"")
        self.assertGreater(int(headers["Content-Length"]), 1000)
        status, _, body = http_get(self.port, "/healthz")
        self.assertEqual((status, body), (200, b"ok\n"))
        status, _, _ = http_get(self.port, "/metrics?name[]=x")
        self.assertEqual(status, 200)

    def test_real_prometheus_scrapes_sbxd(self):
        prometheus = need("prometheus")
        tmp = tempfile.mkdtemp(prefix="sbx-prom-")
        pport = free_port()
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n  - %s\n"
                    "scrape_configs:\n  - job_name: sbxd\n    scrape_interval: 1s\n"
                    "    scrape_timeout: 1s\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n"
                    % (os.path.join(PROM_DIR, "alerts.yml"), self.port))
        log = open(os.path.join(tmp, "prometheus.log"), "w+")
        p = subprocess.Popen([prometheus, "--config.file=" + cfg,
                              "--storage.tsdb.path=" + os.path.join(tmp, "data"),
                              "--web.listen-address=127.0.0.1:%d" % pport],
                             stdout=log, stderr=subprocess.STDOUT)

        def query(expr):
            url = "http://127.0.0.1:%d/api/v1/query?%s" % (
                pport, urllib.parse.urlencode({"query": expr}))
            with urllib.request.urlopen(url, timeout=5) as r:
                return json.loads(r.read())

        def wait_value(expr, want, timeout=30):
            deadline = time.time() + timeout
            last = None
            while time.time() < deadline:
                if p.poll() is not None:
                    log.seek(0)
                    self.fail("prometheus exited %d: %s" % (p.returncode, log.read()[-2000:]))
                try:
                    last = query(expr)
                    res = last["data"]["result"]
                    if len(res) == 1 and float(res[0]["value"][1]) == want:
                        return
                except (OSError, ValueError, KeyError):
                    pass
                time.sleep(0.25)
            log.seek(0)
            self.fail("prometheus never saw %s == %s (last answer %s)\n%s"
                      % (expr, want, last, log.read()[-2000:]))

        try:
            wait_value('up{job="sbxd"}', 1)
            wait_value('sbx_tasks_total{job="sbxd",pool="python",status="exited"}', 3)
            wait_value('sbx_tasks_total{job="sbxd",pool="python",status="timeout"}', 1)
            wait_value('sbx_pool_target{job="sbxd",pool="python"}', 2)
            wait_value('sbx_pool_max{job="sbxd",pool="python"}', 4)
            wait_value('sum(sbx_task_duration_seconds_count{job="sbxd"})', 7)
            # Every query of the dashboard is valid PromQL on the real series.
            with open(os.path.join(PROM_DIR, "grafana-dashboard.json")) as f:
                dash = json.load(f)
            exprs = [t["expr"] for panel in dash["panels"] for t in panel.get("targets", [])]
            self.assertGreater(len(exprs), 20)
            for expr in exprs:
                e = expr.replace("$__rate_interval", "1m").replace("$__range", "5m")
                for var in ("$instance", "$pool", "$job"):
                    e = e.replace(var, ".*")
                r = query(e)
                self.assertEqual(r.get("status"), "success", (expr, r))
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            log.close()
            shutil.rmtree(tmp, ignore_errors=True)


class Deploy(unittest.TestCase):
    """deploy/prometheus: the scrape config, the alert rules and their unit tests."""

    def promtool(self, *args):
        r = subprocess.run([need("promtool")] + list(args), capture_output=True, timeout=120,
                           cwd=PROM_DIR)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout.decode()

    def test_check_config(self):
        out = self.promtool("check", "config", "prometheus.yml")
        self.assertIn("SUCCESS", out)

    def test_check_rules(self):
        out = self.promtool("check", "rules", "alerts.yml")
        self.assertIn("SUCCESS", out)
        with open(os.path.join(PROM_DIR, "alerts.yml")) as f:
            text = f.read()
        for alert in ("SbxPoolExhausted", "SbxSandboxCreationFailing", "SbxEgressDenialsSpiking",
                      "SbxSandboxLeaks", "SbxAuditQueueBackingUp"):
            self.assertIn("alert: %s\n" % alert, text)

    def test_alert_rules_fire_on_synthetic_series(self):
        out = self.promtool("test", "rules", "alerts_test.yml")
        self.assertIn("SUCCESS", out)


class HttpBounds(DaemonTest):
    """The listener's answers to bad clients, and its bounds."""
    port = free_port()
    config_extra = "metrics: 127.0.0.1:%d\n" % port
    pools = [pool_yaml("python", warm=1, max=2)]

    def test_malformed_request_gets_400(self):
        for data in (b"GARBAGE\r\n\r\n",
                     b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
                     b"GET /metrics HTTP/9\x00\r\n\r\n"):
            out = raw_request(self.port, data)
            self.assertTrue(out.startswith(b"HTTP/1.1 400 "), (data, out))
            self.assertIn(b"\r\nConnection: close\r\n", out)

    def test_unknown_path_404_and_wrong_method_405(self):
        status, _, _ = http_get(self.port, "/nope")
        self.assertEqual(status, 404)
        status, _, _ = http_get(self.port, "/")
        self.assertEqual(status, 404)
        status, headers, _ = http_get(self.port, "/metrics", method="POST")
        self.assertEqual(status, 405)
        self.assertEqual(headers.get("Allow"), "GET, HEAD")
        status, _, _ = http_get(self.port, "/healthz", method="DELETE")
        self.assertEqual(status, 405)

    def test_oversized_requests(self):
        out = raw_request(self.port, b"GET /" + b"a" * 2000 + b" HTTP/1.1\r\n\r\n")
        self.assertTrue(out.startswith(b"HTTP/1.1 414 "), out[:100])
        big = b"GET /metrics HTTP/1.1\r\n" + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"p" * 100)
                                                    for i in range(100)) + b"\r\n"
        out = raw_request(self.port, big)
        self.assertTrue(out.startswith(b"HTTP/1.1 431 "), out[:100])

    def test_request_and_eof_in_one_go_is_answered(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            out += chunk
        s.close()
        self.assertTrue(out.startswith(b"HTTP/1.1 200 OK\r\n"), out)
        self.assertTrue(out.endswith(b"\r\n\r\nok\n"), out)

    def test_silent_and_slow_clients_are_dropped(self):
        silent = socket.create_connection(("127.0.0.1", self.port))
        slow = socket.create_connection(("127.0.0.1", self.port))
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")
        start = time.time()
        closed = {}
        socks = {silent: "silent", slow: "slow"}
        while len(closed) < 2 and time.time() - start < HTTP_REQUEST_TIMEOUT + 5:
            ready, _, _ = select.select([s for s in socks if socks[s] not in closed], [], [], 0.5)
            for s in ready:
                try:
                    data = s.recv(4096)
                except ConnectionResetError:
                    data = b""
                self.assertEqual(data, b"", "%s got an answer: %r" % (socks[s], data))
                closed[socks[s]] = time.time() - start
            if socks[slow] not in closed:
                try:
                    slow.sendall(b"X")  # a byte now and then does not extend the deadline
                except OSError:
                    pass
        silent.close()
        slow.close()
        self.assertEqual(sorted(closed), ["silent", "slow"], closed)
        for name, t in closed.items():
            self.assertGreater(t, HTTP_REQUEST_TIMEOUT - 0.5, name)
            self.assertLess(t, HTTP_REQUEST_TIMEOUT + 3, name)

    def test_connection_flood_does_not_stall_tasks(self):
        flood = []
        try:
            for _ in range(200):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", self.port))
                flood.append(s)
            # A task completes while every connection is open.
            with self.d.client() as c:
                res, out, _ = c.exec(["echo", "through the flood"], wait_timeout=30)
            self.assertEqual((res["status"], out), ("exited", b"through the flood\n"))
            # Beyond the bound, connections were accepted and closed at once.
            # The listen backlog (128) is smaller than the flood, so the kernel
            # drops some SYNs and the client retries them after 1 s, 3 s, ...:
            # wait for the closes rather than sleeping a fixed time.
            closed = set()

            def note_closed():
                for i, s in enumerate(flood):
                    if i in closed:
                        continue
                    try:
                        if s.recv(1) == b"":
                            closed.add(i)
                    except BlockingIOError:
                        pass
                    except OSError:
                        closed.add(i)

            deadline = time.time() + 20
            while len(closed) < 200 - HTTP_MAX_CONNECTIONS and time.time() < deadline:
                note_closed()
                time.sleep(0.1)
            self.assertGreaterEqual(len(closed), 200 - HTTP_MAX_CONNECTIONS)
            # The connections within the bound are held open, not answered.
            time.sleep(0.5)
            note_closed()
            self.assertLess(len(closed), 200)
        finally:
            for s in flood:
                s.close()
        # The held slots are freed when the clients close: scraping works again.
        deadline = time.time() + 5
        while True:
            try:
                status, _, _ = http_get(self.port, "/healthz", timeout=2)
                if status == 200:
                    break
            except (OSError, http.client.HTTPException):
                pass
            self.assertLess(time.time(), deadline, "the listener did not recover")
            time.sleep(0.1)


class Drain(unittest.TestCase):
    def test_healthz_says_draining_and_the_port_is_released(self):
        port = free_port()
        d = Daemon(pools=[pool_yaml("python", warm=1, max=2)],
                   config_extra="metrics: 127.0.0.1:%d\n" % port)
        try:
            d.wait_warm()
            self.assertEqual(http_get(port, "/healthz")[0], 200)
            c = d.client()
            msgid, _, _ = c.exec_start(["sleep", "1.5"])
            time.sleep(0.3)
            d.proc.send_signal(signal.SIGTERM)
            deadline = time.time() + 5
            while True:
                status, _, body = http_get(port, "/healthz")
                if status == 503:
                    break
                self.assertLess(time.time(), deadline, "healthz never said draining")
                time.sleep(0.05)
            self.assertEqual(body, b"draining\n")
            status, _, body = http_get(port, "/metrics")
            self.assertEqual(status, 200)
            self.assertIn(b'sbx_pool_running{pool="python"} 1', body)
            self.assertEqual(c.wait(msgid, timeout=10)["status"], "exited")
            c.close()
            d.proc.wait(timeout=20)
        finally:
            d.stop()
        # Released: nothing listens there any more.
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()


class StartupErrors(unittest.TestCase):
    def run_sbxd(self, metrics):
        """Runs sbxd with this metrics address; returns (exit code, output, dir)."""
        d = tempfile.mkdtemp(prefix="sbx-metrics-")
        os.mkdir(os.path.join(d, "pools"))
        with open(os.path.join(d, "pools", "python.yaml"), "w") as f:
            f.write(pool_yaml("python", warm=0, max=1))
        with open(os.path.join(d, "sbxd.yaml"), "w") as f:
            f.write("socket: %s/a.sock\nadmin_socket: %s/b.sock\nstate_dir: %s/state\n"
                    "pools_dir: pools\nmetrics: %s\n" % (d, d, d, metrics))
        # A start-up error returns from main without freeing what it had built: under
        # SAN=1 LeakSanitizer would turn the exit code into 1.
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
        r = subprocess.run([SBXD, "--config", os.path.join(d, "sbxd.yaml")],
                           capture_output=True, timeout=30, env=env)
        return r.returncode, (r.stdout + r.stderr).decode(), d

    def test_taken_port_is_a_startup_error_naming_the_address(self):
        holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        try:
            code, out, d = self.run_sbxd("127.0.0.1:%d" % port)
        finally:
            holder.close()
        self.assertEqual(code, 73, out)
        self.assertIn("sbxd: metrics: listen on 127.0.0.1:%d: EADDRINUSE" % port, out)
        self.assertNotIn('msg="ready"', out)
        # The sockets it had bound are gone again.
        self.assertFalse(os.path.exists(os.path.join(d, "a.sock")))
        self.assertFalse(os.path.exists(os.path.join(d, "b.sock")))
        shutil.rmtree(d, ignore_errors=True)

    def test_non_numeric_address_is_refused(self):
        code, out, d = self.run_sbxd("localhost:%d" % free_port())
        self.assertNotEqual(code, 0, out)
        self.assertIn("'localhost:", out)
        self.assertIn("numeric", out)
        self.assertFalse(os.path.exists(os.path.join(d, "a.sock")))
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
