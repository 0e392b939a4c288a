# SPDX-License-Identifier: MIT
"""The accounting operators read, against a live sbxd scraped by a real Prometheus server that
loads deploy/prometheus/alerts.yml and evaluates the dashboard's queries (issue 29):

- forty tasks cancelled by their clients (a client closing its connection, `sbx exec` ended by
  SIGINT, SIGTERM and SIGKILL) among forty ordinary ones (zero and non-zero exits, a signal, a
  timeout, a command that does not exist) are `cancelled` in the metrics and the trail, with a
  true message; the dashboard's error ratio is 0 and SbxTaskErrors does not fire;
- every kind of policy denial (forged, malformed, expired, revoked, used-up tokens, a pool the
  token does not name, a mount that cannot be granted any more, a token.issue beyond the
  policy, a queued task whose token is revoked, an exec without a token under tokens.required)
  counts in sbx_denied_total by its reason, and the dashboard's "Policy denials" panel has
  data for each;
- every status, error cause, denial reason and egress profile x outcome is exposed at 0 from
  the start."""
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

from harness import Daemon, pool_yaml, SBX, TOP
import sbx_client

PROM_DIR = os.path.join(TOP, "deploy", "prometheus")
STATUSES = ["exited", "signaled", "timeout", "output_limit", "oom", "token_expired",
            "token_revoked", "cancelled", "error"]
CAUSES = ["exec", "cwd", "files", "mounts", "setup", "no_sandbox", "shutdown"]
REASONS = ["token_required", "token_malformed", "token_unknown", "token_revoked",
           "token_expired", "token_used_up", "pool_not_allowed", "grant_failed",
           "issue_not_allowed"]
OUTCOMES = ["allowed", "denied", "limit", "error"]
PROFILES = ["pypi", "github"]
N_CANCELLED = 40


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def need(tool):
    path = shutil.which(tool)
    if not path:
        raise unittest.SkipTest("%s is not installed (apt package prometheus; `make deps` "
                                "installs it)" % tool)
    return path


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, val = line.rpartition(" ")
            samples[key] = float(val)
    return samples


def dashboard_expr(title):
    with open(os.path.join(PROM_DIR, "grafana-dashboard.json")) as f:
        dash = json.load(f)
    panel = [p for p in dash["panels"] if p.get("title") == title][0]
    expr = panel["targets"][0]["expr"]
    expr = expr.replace("$__rate_interval", "5m").replace("$__range", "5m")
    for var in ("$instance", "$pool", "$job"):
        expr = expr.replace(var, ".*")
    return expr


def alert_expr(name):
    """The expression of an alert in alerts.yml (a block scalar under `expr: |`)."""
    with open(os.path.join(PROM_DIR, "alerts.yml")) as f:
        lines = f.read().splitlines()
    i = lines.index("      - alert: %s" % name)
    while not lines[i].strip().startswith("expr:"):
        i += 1
    assert lines[i].strip() == "expr: |", lines[i]
    body = []
    for line in lines[i + 1:]:
        if not line.startswith("          "):
            break
        body.append(line.strip())
    return " ".join(body)


class Accounting(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        prometheus = need("prometheus")
        cls.root = tempfile.mkdtemp(prefix="sbx-acct-root-")
        os.chmod(cls.root, 0o755)
        cls.port = free_port()
        profiles = "".join('    %s:\n      allow: ["%s.example:443"]\n' % (p, p)
                           for p in PROFILES)
        cls.d = Daemon(pools=[pool_yaml("python", warm=4, max=8),
                              pool_yaml("other", warm=0, max=1),
                              pool_yaml("single", warm=1, max=1)],
                       config_extra="metrics: 127.0.0.1:%d\ntokens:\n  mount_roots: [%s]\n"
                                    "  max_ttl: 1h\negress:\n  profiles:\n%s"
                                    % (cls.port, cls.root, profiles))
        cls.tmp = tempfile.mkdtemp(prefix="sbx-acct-prom-")
        cls.pport = free_port()
        cfg = os.path.join(cls.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n  - %s\n"
                    "scrape_configs:\n  - job_name: sbxd\n    scrape_interval: 1s\n"
                    "    scrape_timeout: 1s\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n"
                    % (os.path.join(PROM_DIR, "alerts.yml"), cls.port))
        cls.prom_log = open(os.path.join(cls.tmp, "prometheus.log"), "w+")
        cls.prom = subprocess.Popen([prometheus, "--config.file=" + cfg,
                                     "--storage.tsdb.path=" + os.path.join(cls.tmp, "data"),
                                     "--web.listen-address=127.0.0.1:%d" % cls.pport],
                                    stdout=cls.prom_log, stderr=subprocess.STDOUT)
        # The first scrape, before anything happened: every series at 0 (rate() needs it).
        cls.first = scrape(cls.port)
        cls.wait_prom('up{job="sbxd"}', lambda v: v == [1])

    @classmethod
    def tearDownClass(cls):
        cls.prom.send_signal(signal.SIGTERM)
        try:
            cls.prom.wait(timeout=20)
        except subprocess.TimeoutExpired:
            cls.prom.kill()
            cls.prom.wait()
        cls.prom_log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        cls.d.stop()
        shutil.rmtree(cls.root, ignore_errors=True)

    # ---- helpers ----

    @classmethod
    def query(cls, expr):
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (
            cls.pport, urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=10) as r:
            ans = json.loads(r.read())
        assert ans.get("status") == "success", (expr, ans)
        return ans["data"]["result"]

    @classmethod
    def wait_prom(cls, expr, pred, timeout=60):
        """Polls Prometheus until pred(sorted values of expr) holds; returns the result."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if cls.prom.poll() is not None:
                cls.prom_log.seek(0)
                raise AssertionError("prometheus exited %d: %s"
                                     % (cls.prom.returncode, cls.prom_log.read()[-2000:]))
            try:
                last = cls.query(expr)
                if pred(sorted(float(r["value"][1]) for r in last)):
                    return last
            except OSError:
                pass
            time.sleep(0.25)
        raise AssertionError("prometheus: %s never as expected (last answer %s)" % (expr, last))

    def audit(self, sql, args=()):
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.d.state, "audit.db"),
                             uri=True, timeout=10)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()

    def wait_audit(self, sql, want, timeout=30):
        deadline = time.time() + timeout
        got = None
        while time.time() < deadline:
            got = self.audit(sql)[0][0]
            if got >= want:
                return got
            time.sleep(0.05)
        raise AssertionError("%s: %s, want %s" % (sql, got, want))

    def admin(self):
        return sbx_client.Client(self.d.admin)

    def issue(self, **args):
        with self.admin() as c:
            res = c.call("token.issue", args)
        return res["token"], res["info"]["id"]

    def denied(self, token, pool=None):
        args = {"argv": ["true"], "token": token}
        if pool:
            args["pool"] = pool
        with self.d.client() as c:
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.call("exec", args)
        self.assertEqual(cm.exception.code, "denied", cm.exception)
        return str(cm.exception)

    # ---- tests ----

    def test_every_series_starts_at_zero(self):
        s = self.first
        for pool in ("python", "other", "single"):
            for st in STATUSES:
                self.assertEqual(s['sbx_tasks_total{pool="%s",status="%s"}' % (pool, st)], 0)
            for cause in CAUSES:
                self.assertEqual(s['sbx_task_errors_total{pool="%s",cause="%s"}' % (pool, cause)],
                                 0)
        for reason in REASONS:
            self.assertEqual(s['sbx_denied_total{reason="%s"}' % reason], 0)
        for profile in PROFILES:
            for outcome in OUTCOMES:
                self.assertEqual(s['sbx_proxy_requests_total{profile="%s",outcome="%s"}'
                                   % (profile, outcome)], 0)
        # Prometheus sees each profile's outcomes before any egress request was made.
        res = self.wait_prom('count by (profile) (sbx_proxy_requests_total)',
                             lambda v: v == [4.0] * len(PROFILES))
        self.assertEqual(sorted(r["metric"]["profile"] for r in res), sorted(PROFILES))

    def test_cancelled_tasks_are_not_errors(self):
        self.d.wait_warm("python")
        normal = 0
        with self.d.client() as c:
            for i in range(34):
                res, _, _ = c.exec(["sh", "-c", "exit %d" % (i % 3)])
                self.assertEqual(res["status"], "exited", res)
                normal += 1
            for _ in range(2):
                res, _, _ = c.exec(["sh", "-c", "kill -KILL $$"])
                self.assertEqual(res["status"], "signaled", res)
                res, _, _ = c.exec(["sleep", "30"], timeout=0.2)
                self.assertEqual(res["status"], "timeout", res)
                # The request's own mistake: an error, but not sbx's.
                res, _, _ = c.exec(["/no/such/command"])
                self.assertEqual((res["status"], res.get("error_stage")), ("error", "exec"), res)
                normal += 3
        self.assertEqual(normal, 40)
        started = "SELECT count(*) FROM events WHERE type = 'task.started'"
        n_started = self.audit(started)[0][0]
        # Agents that cancel by closing their connection once their tasks run, four at once.
        cancelled = 0
        while cancelled < N_CANCELLED - 8:
            clients = []
            for _ in range(4):
                c = self.d.client()
                box = {}
                msgid, _, _ = c.exec_start(["sleep", "60"], timeout=90,
                                           on_started=lambda info, box=box: box.update(info))
                clients.append((c, msgid, box))
            for c, msgid, box in clients:
                while not box:
                    try:
                        c.wait(msgid, timeout=0.1)
                        self.fail("the task ended before it was cancelled")
                    except TimeoutError:
                        pass
            for c, _, _ in clients:
                c.close()
            cancelled += len(clients)
            n_started += len(clients)
        # People ending `sbx exec` with Ctrl-C, kill and kill -9 while its task runs.
        for sig in (signal.SIGINT,) * 3 + (signal.SIGTERM,) * 3 + (signal.SIGKILL,) * 2:
            p = subprocess.Popen([SBX, "--socket", self.d.sock, "exec", "--", "sleep", "60"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                n_started = self.wait_audit(started, n_started + 1)
            finally:
                p.send_signal(sig)
                p.wait(timeout=30)
            cancelled += 1
        self.assertEqual(cancelled, N_CANCELLED)

        # The metrics: cancelled, not error; the only errors are the missing commands.
        self.wait_prom('sum(sbx_tasks_total{job="sbxd",status="cancelled"})',
                       lambda v: v == [N_CANCELLED])
        s = scrape(self.port)
        py = 'pool="python"'
        self.assertEqual(s['sbx_tasks_total{%s,status="cancelled"}' % py], N_CANCELLED)
        self.assertEqual(s['sbx_tasks_total{%s,status="error"}' % py], 2)
        self.assertEqual(s['sbx_task_errors_total{%s,cause="exec"}' % py], 2)
        for cause in CAUSES:
            if cause != "exec":
                self.assertEqual(s['sbx_task_errors_total{%s,cause="%s"}' % (py, cause)], 0)
        self.assertEqual(sum(s['sbx_tasks_total{%s,status="%s"}' % (py, st)]
                             for st in STATUSES), 80)
        self.wait_prom('sum(sbx_tasks_total{job="sbxd"})', lambda v: v == [80])
        # The dashboard's error ratio is 0 (forty cancellations made it 0.46 before), and
        # the alert's expression has nothing to fire on.
        ratio = self.query(dashboard_expr("Error ratio"))
        self.assertEqual([float(r["value"][1]) for r in ratio], [0.0], ratio)
        self.assertEqual(self.query(alert_expr("SbxTaskErrors")), [])
        with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/rules?type=alert" % self.pport,
                                    timeout=10) as r:
            rules = json.loads(r.read())["data"]["groups"][0]["rules"]
        rule = [x for x in rules if x["name"] == "SbxTaskErrors"][0]
        self.assertEqual((rule["health"], rule["state"]), ("ok", "inactive"), rule)
        # The dashboard's status panels show the cancellations under their own name.
        by_status = self.query(dashboard_expr("Tasks by status"))
        self.assertIn("cancelled", [r["metric"]["status"] for r in by_status])

        # The trail: each cancelled task's result says so, truly.
        rows = self.audit("SELECT fields FROM events WHERE type = 'task.result'")
        results = [json.loads(f) for (f,) in rows]
        cancel = [r for r in results if r["status"] == "cancelled"]
        self.assertEqual(len(cancel), N_CANCELLED, results[-5:])
        for r in cancel:
            self.assertEqual(r["error"], "the client left before the task finished", r)
            self.assertFalse(r["delivered"], r)
        self.assertEqual(len([r for r in results if r["status"] == "error"]), 2)
        fins = [json.loads(f) for (f,) in self.audit(
            "SELECT fields FROM events WHERE type = 'task.finished'")]
        gone = [f for f in fins if f["status"] == "cancelled"]
        self.assertEqual(len(gone), N_CANCELLED)
        self.assertTrue(all(f["killed_for"] == "client_gone" for f in gone), gone[:3])
        self.assertFalse([f for f in fins if "sandbox died" in f.get("error", "")])

    def test_denials_are_counted_by_reason(self):
        want = {}

        def expect(reason, n=1):
            want[reason] = want.get(reason, 0) + n

        # Forged and malformed.
        self.assertIn("unknown token", self.denied("sbx_" + "A" * 43))
        expect("token_unknown")
        self.assertIn("malformed token", self.denied("not-a-token"))
        expect("token_malformed")
        # Revoked.
        token, tid = self.issue(ttl=600)
        with self.admin() as c:
            c.call("token.revoke", {"id": tid})
        self.assertIn("was revoked", self.denied(token))
        expect("token_revoked")
        # Used up.
        token, _ = self.issue(ttl=600, uses=1)
        with self.d.client() as c:
            r = c.call("exec", {"argv": ["true"], "token": token})
            self.assertEqual(r["status"], "exited", r)
        self.assertIn("used up", self.denied(token))
        expect("token_used_up")
        # A pool the token does not name.
        token, _ = self.issue(ttl=600, pools=["other"])
        self.assertIn("does not grant pool 'python'", self.denied(token))
        expect("pool_not_allowed")
        # A granted mount that cannot be applied any more.
        src = os.path.join(self.root, "gone")
        os.mkdir(src)
        os.chmod(src, 0o755)
        token, _ = self.issue(ttl=600, mounts=[{"src": src, "dst": "/data"}])
        os.rmdir(src)
        self.assertIn("mount source", self.denied(token))
        expect("grant_failed")
        # token.issue beyond the policy (max_ttl 1h).
        with self.admin() as c:
            with self.assertRaises(sbx_client.RpcError) as cm:
                c.call("token.issue", {"ttl": 7200})
        self.assertEqual(cm.exception.code, "denied")
        expect("issue_not_allowed")
        # A task queued behind a busy sandbox whose token is revoked before it starts.
        self.d.wait_warm("single")
        token, tid = self.issue(ttl=600, pools=["single"])
        busy = self.d.client()
        queued = self.d.client()
        try:
            started = {}
            bid, _, _ = busy.exec_start(["sleep", "60"], pool="single", timeout=90,
                                        on_started=started.update)
            while not started:
                try:
                    busy.wait(bid, timeout=0.1)
                except TimeoutError:
                    pass
            qid = queued.start("exec", {"argv": ["true"], "pool": "single", "token": token})
            deadline = time.time() + 30
            while time.time() < deadline:
                with self.d.client() as c:
                    single = [p for p in c.call("pools") if p["name"] == "single"][0]
                if single["queued"] == 1:
                    break
                time.sleep(0.05)
            self.assertEqual(single["queued"], 1, single)
            with self.admin() as c:
                c.call("token.revoke", {"id": tid})
            with self.assertRaises(sbx_client.RpcError) as cm:
                queued.wait(qid, timeout=30)
            self.assertEqual(cm.exception.code, "denied")
            self.assertIn("revoked before the task started", str(cm.exception))
            expect("token_revoked")
        finally:
            queued.close()
            busy.close()
        # Expired (ttl 1 s): asked until the deadline has passed.
        token, _ = self.issue(ttl=1)
        with self.d.client() as c:
            while True:
                try:
                    c.call("exec", {"argv": ["true"], "token": token})
                except sbx_client.RpcError as e:
                    self.assertEqual(e.code, "denied")
                    # At authorization, or while the exec waited for a sandbox (a loaded
                    # machine): the same denial, token_expired, either way.
                    self.assertRegex(str(e), "has expired|expired before the task started")
                    break
        expect("token_expired")

        # The exposition: each reason counted once per denial, nothing else.
        self.wait_prom('sum(sbx_denied_total{job="sbxd"})', lambda v: v == [sum(want.values())])
        s = scrape(self.port)
        for reason in REASONS:
            self.assertEqual(s['sbx_denied_total{reason="%s"}' % reason], want.get(reason, 0),
                             reason)
        # The queued task's end is its token's, in the trail and the metrics.
        results = [json.loads(f) for (f,) in self.audit(
            "SELECT fields FROM events WHERE type = 'task.result'")]
        revoked = [r for r in results if r["status"] == "token_revoked"]
        self.assertEqual(len(revoked), 1, results[-5:])
        self.assertEqual(revoked[0]["code"], "denied")
        self.assertEqual(s['sbx_tasks_total{pool="single",status="token_revoked"}'], 1)
        # The dashboard's "Policy denials" panel has data for every reason that happened.
        expr = dashboard_expr("Policy denials")
        res = self.wait_prom(expr, lambda v: len([x for x in v if x > 0]) == len(want))
        seen = {r["metric"]["reason"] for r in res if float(r["value"][1]) > 0}
        self.assertEqual(seen, set(want))


if __name__ == "__main__":
    unittest.main()


class TokenRequired(unittest.TestCase):
    """tokens.required: an exec without a token is a denial, reason token_required."""

    def test_missing_token_is_counted(self):
        port = free_port()
        d = Daemon(pools=[pool_yaml("python", warm=1, max=2)],
                   config_extra="metrics: 127.0.0.1:%d\ntokens:\n  required: true\n" % port)
        try:
            for _ in range(2):
                with d.client() as c:
                    with self.assertRaises(sbx_client.RpcError) as cm:
                        c.call("exec", {"argv": ["true"]})
                self.assertEqual(cm.exception.code, "denied")
                self.assertIn("tokens.required", str(cm.exception))
            s = scrape(port)
            self.assertEqual(s['sbx_denied_total{reason="token_required"}'], 2)
            self.assertEqual(s['sbx_rpc_errors_total{kind="denied"}'], 2)
            self.assertEqual(sum(v for k, v in s.items() if k.startswith("sbx_denied_total{")), 2)
        finally:
            d.stop()
