#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks that every #include "..." under daemon/ points to its own folder or to a folder
below it, in the order docs/ARCHITECTURE.md writes down (its lines starting "layers:" and
"binary:"). Prints one line per upward include and exits 1; exits 0 when there are none.
Usage: layers.py [TOP]   (TOP: the checkout, default the one this file is in)"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_order(doc):
    """Returns {folder: rank} for the layers and {binary folder: set of folders it may use}.
    "main" is the composition root, daemon/ itself."""
    rank, binaries = {}, {}
    with open(doc) as f:
        for n, line in enumerate(f, 1):
            line = line.strip().strip("`")
            if line.startswith("layers:"):
                for i, level in enumerate(line[len("layers:"):].split(">")):
                    for folder in level.split():
                        rank[folder] = i
            elif line.startswith("binary:"):
                name, _, uses = line[len("binary:"):].partition(">")
                binaries[name.strip()] = set(uses.split())
    if not rank:
        sys.exit("%s: no 'layers:' line" % doc)
    return rank, binaries


def folder_of(rel):
    """The layer a path under daemon/ is in: its first folder, or "main" at the top."""
    return rel.split("/")[0] if "/" in rel else "main"


def check(top):
    daemon = os.path.join(top, "daemon")
    rank, binaries = read_order(os.path.join(top, "docs", "ARCHITECTURE.md"))
    errors = []
    for root, _, files in sorted(os.walk(daemon)):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, daemon)
            me = folder_of(rel)
            if me not in rank and me not in binaries:
                errors.append("daemon/%s: folder '%s' is in no layer of ARCHITECTURE.md" % (rel, me))
                continue
            with open(path, errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    target = os.path.normpath(inc)
                    if not os.path.exists(os.path.join(daemon, target)):
                        # Generated or local to the build (none in daemon/ today): not a layer.
                        errors.append("daemon/%s:%d: \"%s\" is not a path under daemon/" % (rel, n, inc))
                        continue
                    them = folder_of(target)
                    if them == me:
                        continue
                    if me in binaries:
                        ok = them in binaries[me]
                    elif them in binaries:
                        ok = False  # nothing links a binary's own folder but that binary
                    else:
                        ok = them in rank and rank[them] > rank[me]
                    if not ok:
                        errors.append("daemon/%s:%d: %s includes \"%s\" (%s): not below it" %
                                      (rel, n, me, inc, them))
    return errors


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    errors = check(top)
    for e in errors:
        print(e)
    if errors:
        print("layers: %d upward include(s)" % len(errors))
        sys.exit(1)
    print("layers: every include points down")


if __name__ == "__main__":
    main()
