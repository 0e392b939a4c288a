#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks STYLE.md's naming rule: every non-static function defined under daemon/ starts
with its file's name (cgroup_kill() in cgroup.c), or with the name of a header of its folder
that declares it (config.h's config_* across config/*.c). main() and lib/alloc.c's x*
allocators, the names every C programmer knows, are the exceptions. Prints one line per
function out of place and exits 1; exits 0 when there are none.
Usage: prefix.py [TOP]   (TOP: the checkout, default the one this file is in)"""
import os
import re
import sys

# A definition as clang-format writes it: the name and its parameters on a line that starts
# at column 0, and the opening brace alone on the next line.
DEFINITION = re.compile(r"^(?!static\b)(?:[A-Za-z_][\w \t\*]*?[\s\*])?([a-z_]\w*)\s*\(([^;]*)$")
EXEMPT = {"main"}
ALLOC = re.compile(r"^x[a-z]+$")


def definitions(path):
    with open(path, errors="replace") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        # GNU attributes may open a definition: __attribute__((noreturn)) static void f(...).
        line = re.sub(r"^(__attribute__\(\(.*?\)\)\s*)+", "", line)
        if not line or line[0] in " \t#/*}_" or line.startswith("static"):
            continue
        m = DEFINITION.match(line)
        if not m:
            continue
        # The parameters may run over several lines; the brace follows the last of them.
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith((")", ";")):
            j += 1
        if j < len(lines) and lines[j].rstrip().endswith(";"):
            continue  # a prototype
        if j + 1 < len(lines) and lines[j + 1] == "{":
            yield i + 1, m.group(1)


def check(top):
    daemon = os.path.join(top, "daemon")
    errors = []
    for root, _, files in sorted(os.walk(daemon)):
        headers = {}
        for f in files:
            if f.endswith(".h") and not f.endswith("_impl.h"):
                with open(os.path.join(root, f), errors="replace") as h:
                    headers[f[:-2]] = h.read()
        for name in sorted(files):
            if not name.endswith(".c"):
                continue
            own = name[:-2]
            rel = os.path.relpath(os.path.join(root, name), daemon)
            for n, fn in definitions(os.path.join(root, name)):
                if fn in EXEMPT or (rel == "lib/alloc.c" and ALLOC.match(fn)):
                    continue
                if fn.startswith(own + "_") or fn == own:
                    continue
                if any(fn.startswith(h + "_") and re.search(r"\b%s\s*\(" % fn, text)
                       for h, text in headers.items()):
                    continue
                errors.append("daemon/%s:%d: %s() does not start with '%s_'" % (rel, n, fn, own))
    return errors


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    errors = check(top)
    for e in errors:
        print(e)
    if errors:
        print("prefix: %d function(s) not named for their file" % len(errors))
        sys.exit(1)
    print("prefix: every function is named for its file")


if __name__ == "__main__":
    main()
