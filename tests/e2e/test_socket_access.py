# SPDX-License-Identifier: MIT
"""Access without root: the agents' socket with `socket_group` and `socket_mode`, in a
runtime directory of its own that sbxd makes (0750, the group's), while the state dir stays
0700 and the admin socket 0600, root's alone. The real build/sbx runs as two unprivileged
uids (setuid/setgid in the child: no system users or groups are made, nothing is left): one
in the socket's group gets its command run, with its uid, gid and pid in task.request; one
outside it is refused, and so is the admin socket to both."""
import json
import os
import shutil
import sqlite3
import stat
import subprocess

from harness import SBX, Daemon, DaemonTest, pool_yaml
from test_cli import wait_for

SBX_FAIL = 125
# Ids no account on this machine uses (checked in setUpClass).
GROUP, MEMBER, OUTSIDER = 47311, 47312, 47313
RUN_DIR = "/tmp/sbx-socket-access-%d" % os.getpid()


class SocketAccess(DaemonTest):
    pools = [pool_yaml("python", warm=1, max=4)]

    @classmethod
    def setUpClass(cls):
        import grp
        import pwd
        for i in (GROUP, MEMBER, OUTSIDER):
            for db in (pwd.getpwuid, grp.getgrgid):
                try:
                    db(i)
                    raise AssertionError("id %d is in use on this machine" % i)
                except KeyError:
                    pass
        shutil.rmtree(RUN_DIR, ignore_errors=True)
        cls.d = Daemon(pools=cls.pools,
                       config_extra="socket_group: %d\nsocket_mode: 0660\n" % GROUP,
                       sock=os.path.join(RUN_DIR, "sbxd.sock"),
                       admin=os.path.join(RUN_DIR, "sbxd-admin.sock"))

    @classmethod
    def tearDownClass(cls):
        try:
            cls.d.stop()
        finally:
            shutil.rmtree(RUN_DIR, ignore_errors=True)

    def as_user(self, uid, groups, *args):
        """build/sbx run as uid (its own gid uid) with these supplementary groups."""
        p = subprocess.Popen([SBX] + list(args), user=uid, group=uid, extra_groups=groups,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        out, err = p.communicate(timeout=60)
        return p.pid, p.returncode, out, err

    def request_of(self, pid):
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.d.state, "audit.db"),
                             uri=True, timeout=10)
        try:
            for (fields,) in db.execute("SELECT fields FROM events WHERE type = 'task.request'"):
                f = json.loads(fields)
                if f.get("peer_pid") == pid:
                    return f
        finally:
            db.close()
        return None

    def test_modes_and_owners(self):
        st = os.stat(RUN_DIR)
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid), (0o750, 0, GROUP))
        st = os.stat(self.d.sock)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid), (0o660, 0, GROUP))
        st = os.stat(self.d.admin)
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid), (0o600, 0, 0))
        self.assertEqual(stat.S_IMODE(os.stat(self.d.state).st_mode), 0o700)

    def test_member_runs_and_is_recorded(self):
        pid, code, out, err = self.as_user(MEMBER, [GROUP], "--socket", self.d.sock, "exec",
                                           "--", "echo", "hello from a member")
        self.assertEqual((code, out, err), (0, b"hello from a member\n", b""))
        req = wait_for(lambda: self.request_of(pid))
        self.assertIsNotNone(req, "no task.request with peer_pid %d" % pid)
        self.assertEqual((req["socket"], req["peer_uid"], req["peer_gid"], req["peer_pid"]),
                         ("agents", MEMBER, MEMBER, pid))

    def test_outsider_refused(self):
        pid, code, out, err = self.as_user(OUTSIDER, [], "--socket", self.d.sock, "exec",
                                           "--", "echo", "no")
        self.assertEqual((code, out), (SBX_FAIL, b""))
        self.assertEqual(err.decode(),
                         "sbx: cannot connect to sbxd at '%s': Permission denied (run as "
                         "root, or as a member of sbxd's socket_group for the agents' socket)\n"
                         % self.d.sock)
        self.assertIsNone(self.request_of(pid))

    def test_admin_socket_refused_to_both(self):
        for uid, groups in ((MEMBER, [GROUP]), (OUTSIDER, [])):
            _, code, out, err = self.as_user(uid, groups, "--admin-socket", self.d.admin,
                                             "audit", "--limit", "1")
            self.assertEqual((code, out), (SBX_FAIL, b""), uid)
            self.assertIn(b"cannot connect to sbxd at '%s': Permission denied"
                          % self.d.admin.encode(), err)
        # Root still reaches it.
        r = subprocess.run([SBX, "--admin-socket", self.d.admin, "audit", "--limit", "1"],
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
