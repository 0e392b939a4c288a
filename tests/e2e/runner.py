# SPDX-License-Identifier: MIT
"""Runs one end-to-end test file with unittest and prints the E2E: summary line that
tests/run.sh counts. Usage: runner.py tests/e2e/test_x.py"""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "helpers"))


def main():
    path = sys.argv[1]
    name = os.path.splitext(os.path.basename(path))[0]
    suite = unittest.defaultTestLoader.loadTestsFromName(name)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    # A class skipped or failed in setUpClass is reported once, and not among testsRun:
    # only what ran comes off testsRun (else a skipped class counted as -1 passed).
    ran = lambda entries: sum(1 for test, _ in entries if isinstance(test, unittest.TestCase))
    passed = (result.testsRun - ran(result.failures) - ran(result.errors) -
              len(result.unexpectedSuccesses) - ran(result.skipped))
    print("E2E: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
