# SPDX-License-Identifier: MIT
"""The layer check (tests/lint/layers.py, run by make lint and here): the tree has no upward
include, and each kind of upward include planted in a copy of the tree makes it fail, naming
the file, the line and the header."""
import os
import shutil
import subprocess
import tempfile
import unittest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINT = os.path.join(TOP, "tests", "lint", "layers.py")


def run(top):
    p = subprocess.run(["/usr/bin/python3", LINT, top], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class Layers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sbx-layers.")
        shutil.copytree(os.path.join(TOP, "daemon"), os.path.join(self.tmp, "daemon"))
        os.mkdir(os.path.join(self.tmp, "docs"))
        shutil.copy(os.path.join(TOP, "docs", "ARCHITECTURE.md"), os.path.join(self.tmp, "docs"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def plant(self, rel, line):
        path = os.path.join(self.tmp, "daemon", rel)
        with open(path) as f:
            n = sum(1 for _ in f) + 1
        with open(path, "a") as f:
            f.write(line + "\n")
        return "daemon/%s:%d" % (rel, n)

    def assert_refused(self, where, header):
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn(where, out)
        self.assertIn('"%s"' % header, out)
        self.assertIn("layers: 1 upward include(s)", out)

    def test_the_tree_has_no_upward_include(self):
        rc, out = run(TOP)
        self.assertEqual(rc, 0, out)
        self.assertIn("every include points down", out)

    def test_the_copy_passes_before_anything_is_planted(self):
        self.assertEqual(run(self.tmp)[0], 0)

    def test_lib_including_core_fails(self):
        self.assert_refused(self.plant("lib/util.c", '#include "core/task.h"'), "core/task.h")

    def test_a_lower_layer_including_the_composition_root_fails(self):
        self.assert_refused(self.plant("core/pool.c", '#include "daemon.h"'), "daemon.h")

    def test_peers_do_not_include_each_other(self):
        self.assert_refused(self.plant("egress/egress.c", '#include "sandbox/sandbox.h"'),
                            "sandbox/sandbox.h")

    def test_sbxd_init_uses_only_wire_and_lib(self):
        self.assert_refused(self.plant("init/mount.c", '#include "sandbox/seccomp.h"'),
                            "sandbox/seccomp.h")

    def test_nothing_includes_a_binary_folder(self):
        self.assert_refused(self.plant("lib/util.c", '#include "cli/sbx_json.h"'), "cli/sbx_json.h")

    def test_a_header_counts_as_its_folder(self):
        self.assert_refused(self.plant("wire/proto.h", '#include "config/config.h"'),
                            "config/config.h")

    def test_a_folder_in_no_layer_fails(self):
        os.mkdir(os.path.join(self.tmp, "daemon", "extra"))
        with open(os.path.join(self.tmp, "daemon", "extra", "x.c"), "w") as f:
            f.write('#include "lib/util.h"\n')
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("daemon/extra/x.c: folder 'extra' is in no layer", out)

    def test_the_order_is_read_from_architecture_md(self):
        # Swap wire and lib in the document: wire's includes of lib now point up.
        doc = os.path.join(self.tmp, "docs", "ARCHITECTURE.md")
        with open(doc) as f:
            text = f.read()
        self.assertIn("> wire > lib", text)
        with open(doc, "w") as f:
            f.write(text.replace("> wire > lib", "> lib > wire"))
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn('daemon/wire/proto.c', out)
        self.assertIn('wire includes "lib/', out)


if __name__ == "__main__":
    unittest.main()
