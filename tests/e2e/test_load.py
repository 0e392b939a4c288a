# SPDX-License-Identifier: MIT
"""sbx-load --scenario against a live sbxd: the shipped mixed scenario gets every result it
expects, a deliberately wrong expectation is counted as a mismatch, and a broken scenario
file is a usage error."""
import json
import os
import subprocess
import tempfile

from harness import BUILD, TOP, DaemonTest, pool_yaml

SBX_LOAD = os.path.join(BUILD, "sbx-load")
MIXED = os.path.join(TOP, "loadtest", "scenarios", "mixed.yaml")


class LoadScenarioTest(DaemonTest):
    # The shipped pools' limits (pools/python.yaml, pools/parsing.yaml) on the host image.
    pools = [pool_yaml(name="python", warm=4, max=16, memory="512MiB", pids=128,
                       output_cap=32768),
             pool_yaml(name="parsing", warm=2, max=16, memory="256MiB", pids=64,
                       output_cap=32768)]

    def load(self, *args, timeout=60):
        r = subprocess.run([SBX_LOAD, "--socket", self.d.sock, "--json"] + list(args),
                           capture_output=True, timeout=timeout)
        return r

    def scenario_file(self, text):
        fd, path = tempfile.mkstemp(suffix=".yaml", dir=self.d.dir)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return path

    def test_mixed_scenario_meets_every_expectation(self):
        self.d.wait_warm("python")
        r = self.load("--scenario", MIXED, "--tasks", "80", "--concurrency", "8")
        self.assertTrue(r.stdout, r.stderr)
        rep = json.loads(r.stdout)
        self.assertEqual(rep["errors"], {}, (rep, r.stderr))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(rep["tasks"], 80)
        # Each kind has weight >= 10 of 100: in 80 tasks every outcome shows up (a miss
        # has probability below 0.1% per kind).
        for status in ("exited", "output_limit", "timeout", "oom"):
            self.assertGreater(rep["outcomes"].get(status, 0), 0, rep)

    def test_wrong_expectation_is_a_mismatch(self):
        path = self.scenario_file(
            "tasks:\n"
            "  - name: wrong_code\n"
            "    pool: python\n"
            "    argv: [python3, -c, pass]\n"
            "    expect: {status: exited, exit_code: 1}\n"
            "  - name: wrong_status\n"
            "    pool: parsing\n"
            "    argv: [/bin/true]\n"
            "    expect: {status: timeout}\n")
        r = self.load("--scenario", path, "--tasks", "12", "--concurrency", "4")
        rep = json.loads(r.stdout)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(rep["errors"], {"mismatch": 12}, rep)
        self.assertEqual(rep["outcomes"], {"exited": 12}, rep)
        self.assertIn(b"first mismatch", r.stderr)

    def test_bad_scenario_is_a_usage_error(self):
        path = self.scenario_file("tasks:\n  - weight: 1\n    expect: {status: nope}\n")
        r = self.load("--scenario", path, "--tasks", "1")
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn(b"expect.status", r.stderr)
        r = self.load("--scenario", MIXED, "--tasks", "1", "--", "/bin/true")
        self.assertEqual(r.returncode, 64, r.stderr)
