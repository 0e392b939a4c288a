# SPDX-License-Identifier: MIT
"""Recycled network namespaces (daemon/netns.c): sandboxes reuse namespaces, and nothing a
task leaves behind (listeners, bound UDP sockets, abstract unix sockets, lingering TCP
connections) is visible to a later task."""
import unittest

from harness import DaemonTest, pool_yaml

LEAVE = r"""
import os, socket, time
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", 5555)); t.listen()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 5556))
x = socket.socket(socket.AF_UNIX); x.bind("\0sbx-left-behind"); x.listen()
# A connection closed by the client first leaves TIME_WAIT behind in the namespace.
c = socket.create_connection(("127.0.0.1", 5555)); s, _ = t.accept(); c.close(); s.close()
if os.fork() == 0:
    os.setsid(); time.sleep(60)
print("LEFT")
"""

CHECK = r"""
import socket
def entries(name):
    with open("/proc/net/" + name) as f:
        return len(f.read().strip().split("\n")) - 1
print({n: entries(n) for n in ("tcp", "tcp6", "udp", "udp6", "unix", "raw")})
t = socket.socket(); t.bind(("127.0.0.1", 5555)); print("BIND_OK")
x = socket.socket(socket.AF_UNIX)
try:
    x.connect("\0sbx-left-behind"); print("UNIX_REACHED")
except OSError:
    print("UNIX_GONE")
"""


class NetnsRecycling(DaemonTest):
    pools = [pool_yaml("python", warm=1, max=2)]

    def stats(self, c):
        return c.call("stats")["netns"]

    def test_namespaces_are_reused(self):
        self.d.wait_warm("python")
        with self.d.client() as c:
            before = self.stats(c)
            for _ in range(12):
                res, out, _ = c.exec(["true"])
                self.assertEqual(res["status"], "exited")
            self.d.wait_warm("python")
            after = self.stats(c)
        # 12 sandboxes were made; most of them joined a namespace that an earlier one used
        # (a few are new: a namespace returns to the pool only after its sandbox is gone).
        made = (after["reused"] - before["reused"]) + (after["created"] - before["created"])
        self.assertGreaterEqual(made, 12, (before, after))
        self.assertGreaterEqual(after["reused"] - before["reused"], 6, (before, after))

    def test_nothing_of_a_task_survives_in_a_recycled_namespace(self):
        with self.d.client() as c:
            res, out, err = c.exec(["python3", "-c", LEAVE])
            self.assertEqual(out, b"LEFT\n", err)
            for _ in range(8):
                res, out, err = c.exec(["python3", "-c", CHECK])
                text = out.decode()
                self.assertIn("{'tcp': 0, 'tcp6': 0, 'udp': 0, 'udp6': 0, 'unix': 0, 'raw': 0}",
                              text, err)
                self.assertIn("BIND_OK", text)
                self.assertIn("UNIX_GONE", text)
            st = self.stats(c)
        # The namespace with the lingering TCP connection was destroyed, not reused.
        self.assertGreaterEqual(st["dropped"], 1, st)


if __name__ == "__main__":
    unittest.main()
