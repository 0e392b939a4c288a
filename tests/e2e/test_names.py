# SPDX-License-Identifier: MIT
"""The naming check (tests/lint/prefix.py, run by make lint and here): every non-static
function under daemon/ starts with its file's name or with a header of its folder; one
planted out of place in a copy of the tree makes it fail, naming the file and the line."""
import os
import shutil
import subprocess
import tempfile
import unittest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINT = os.path.join(TOP, "tests", "lint", "prefix.py")


def run(top):
    p = subprocess.run(["/usr/bin/python3", LINT, top], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class Names(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sbx-names.")
        shutil.copytree(os.path.join(TOP, "daemon"), os.path.join(self.tmp, "daemon"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def plant(self, rel, text):
        path = os.path.join(self.tmp, "daemon", rel)
        with open(path) as f:
            n = sum(1 for _ in f) + 1
        with open(path, "a") as f:
            f.write(text)
        return "daemon/%s:%d" % (rel, n)

    def test_the_tree_names_every_function_for_its_file(self):
        rc, out = run(TOP)
        self.assertEqual(rc, 0, out)
        self.assertIn("every function is named for its file", out)

    def test_a_function_named_for_another_file_fails(self):
        where = self.plant("core/pool.c", "int task_thing(int x)\n{\n    return x;\n}\n")
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("%s: task_thing() does not start with 'pool_'" % where, out)
        self.assertIn("prefix: 1 function(s) not named for their file", out)

    def test_parameters_over_several_lines_are_one_definition(self):
        where = self.plant("lib/buf.c", "void strv_other(int a,\n                int b)\n{\n}\n")
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("%s: strv_other()" % where, out)

    def test_an_attribute_before_the_definition_is_seen_through(self):
        where = self.plant("init/pid1.c",
                           "__attribute__((noreturn)) void init_thing(void)\n{\n    for (;;) {\n    }\n}\n")
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("%s: init_thing()" % where, out)

    def test_static_functions_and_prototypes_are_free(self):
        self.plant("core/pool.c", "static int any_name(int x)\n{\n    return x;\n}\n"
                   "int other_name(int x);\n")
        self.assertEqual(run(self.tmp)[0], 0)

    def test_a_header_of_the_folder_names_a_family(self):
        # A config_* function config.h declares may be defined in config_pool.c; one it does
        # not declare may not, and core/sched.h's sched_* never in config/.
        self.plant("config/config_pool.c", "int config_thing(void)\n{\n    return 0;\n}\n")
        self.assertEqual(run(self.tmp)[0], 1)
        self.plant("config/config.h", "int config_thing(void);\n")
        self.assertEqual(run(self.tmp)[0], 0)
        self.plant("config/config_pool.c", "int sched_thing(void)\n{\n    return 0;\n}\n")
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("sched_thing()", out)

    def test_only_alloc_c_may_name_x_allocators(self):
        self.plant("lib/alloc.c", "void *xthing(void)\n{\n    return 0;\n}\n")
        self.assertEqual(run(self.tmp)[0], 0)
        self.plant("lib/buf.c", "void *xother(void)\n{\n    return 0;\n}\n")
        self.assertEqual(run(self.tmp)[0], 1)


if __name__ == "__main__":
    unittest.main()
