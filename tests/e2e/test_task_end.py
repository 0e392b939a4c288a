# SPDX-License-Identifier: MIT
"""The end of a task: when its main process exits, sandbox init kills and reaps every other
process of the sandbox before it reports, so that nothing of the task runs once sbxd has the
result. A fork bomb left behind, still forking at the pool's pids limit, must not keep init
from reporting: the task is reported exited (not timed out), and none of the bomb's
processes is left."""
import unittest

from harness import DaemonTest, pool_yaml, sandbox_processes


def bomb_processes(subtree):
    """The sandboxes' live processes that run BOMB (not the pool's warm inits)."""
    found = []
    for pid in sandbox_processes(subtree):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if b"left a bomb" in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found

PY = "python3"

# The main process starts a bomb in a session of its own and exits at once; each of the
# bomb's processes forks for ever, retrying when pids.max refuses it.
BOMB = ("import os, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    while True:\n"
        "        try:\n"
        "            os.fork()\n"
        "        except OSError:\n"
        "            pass\n"
        "print('left a bomb')\n")


class TaskEnd(DaemonTest):
    pools = [pool_yaml("python", warm=1, max=2, pids=64, timeout="20s")]

    def test_a_fork_bomb_left_behind_is_killed_before_the_report(self):
        with self.d.client() as c:
            res, out, err = c.exec([PY, "-c", BOMB], timeout=20)
        self.assertEqual(res["status"], "exited", (res, err))
        self.assertEqual(res["exit_code"], 0, res)
        self.assertEqual(out, b"left a bomb\n")
        # Every process of the sandbox died with the task: none of the bomb runs on.
        self.assertEqual(bomb_processes(self.d.subtree), [])


if __name__ == "__main__":
    unittest.main()
