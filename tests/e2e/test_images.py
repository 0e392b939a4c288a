# SPDX-License-Identifier: MIT
"""Pool images (docs/IMAGES.md). The `parsing` image is built with mmdebstrap (once; later
runs find it up to date in var/images, the default images dir) and a pool runs from it: its
recipe's tools are there, the host's others are not. No built image has a setuid or setgid
file. An altered copy is refused; an image never built falls back to the host image, said
once in the log and shown by `sbx pools`; --require-images makes that a start-up error.
Where images cannot be built here (no mmdebstrap, no mirror), the tests that need one skip
with the reason."""
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
import unittest

from harness import Daemon, pool_yaml, SBXD, TOP
import sbx_client

IMAGES_DIR = os.environ.get("SBX_IMAGES_DIR", os.path.join(TOP, "var", "images"))
BUILD_SH = os.path.join(TOP, "images", "build.sh")
_built = {}


def build_image(name):
    """Builds image `name` into IMAGES_DIR, or finds it up to date. Returns the build's
    report; raises SkipTest when images cannot be built on this machine."""
    if name in _built:
        if isinstance(_built[name], unittest.SkipTest):
            raise _built[name]
        return _built[name]
    if shutil.which("mmdebstrap") is None:
        # Only the image tests need it: `make image-deps` installs it from Debian's archive.
        r = subprocess.run(["make", "-s", "-C", TOP, "image-deps"], capture_output=True,
                           timeout=600)
        if shutil.which("mmdebstrap") is None:
            _built[name] = unittest.SkipTest("mmdebstrap is not installed and `make image-deps` "
                                             "failed: %s" % r.stdout.decode()[-300:])
            raise _built[name]
    start = time.time()
    r = subprocess.run(["sh", BUILD_SH, "--out", IMAGES_DIR, "--sbxd", SBXD, name],
                       capture_output=True, timeout=900)
    out = (r.stdout + r.stderr).decode(errors="replace")
    if r.returncode == 75:
        _built[name] = unittest.SkipTest("images cannot be built here: " + out.strip()[-300:])
        raise _built[name]
    if r.returncode != 0:
        raise AssertionError("images/build.sh %s failed (%d):\n%s" % (name, r.returncode, out))
    _built[name] = out
    print("\n    [%s image: %.1fs] %s" % (name, time.time() - start,
                                         " ".join(re.findall(r"^%s .*$" % name, out, re.M)[-1:])))
    return out


def tree_hash(root):
    """The tree hash of docs/IMAGES.md, written independently of daemon/image.c."""
    h = hashlib.sha256()
    files = 0

    def entry(rel, path):
        nonlocal files
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            kind, payload = "d", b""
        elif stat.S_ISLNK(st.st_mode):
            kind, payload = "l", os.fsencode(os.readlink(path))
        else:
            kind, payload = "f", None
        size = st.st_size if payload is None else len(payload)
        h.update(os.fsencode(rel) + b"\0")
        h.update(("%s %04o %d %d %d" % (kind, st.st_mode & 0o7777, st.st_uid, st.st_gid,
                                        size)).encode() + b"\0")
        files += 1
        if payload is None:
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        else:
            h.update(payload)
        if kind == "d":
            for name in sorted(os.listdir(os.fsencode(path))):
                sub = os.fsdecode(name)
                entry(sub if rel == "." else rel + "/" + sub, os.path.join(path, sub))

    entry(".", root)
    return h.hexdigest(), files


def manifest(name, images_dir=IMAGES_DIR):
    with open(os.path.join(images_dir, name, "manifest")) as f:
        return f.read()


def image_pool(name="parsing", image="parsing", warm=1):
    return pool_yaml(name=name, warm=warm, max=4, seccomp="default").replace(
        "image: host", "image: " + image)


def pools_row(d, name):
    with d.client() as c:
        for p in c.call("pools"):
            if p["name"] == name:
                return p
    raise AssertionError("no pool " + name)


class ParsingImage(unittest.TestCase):
    """A pool running from the built parsing image."""

    @classmethod
    def setUpClass(cls):
        cls.report = build_image("parsing")
        cls.d = Daemon(pools=[image_pool()], config_extra="images_dir: %s\n" % IMAGES_DIR)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def run_sh(self, script):
        res, _ = self.d.exec_json("sh", "-c", script, pool="parsing", timeout=20)
        return res

    def test_recipe_tools_work_host_tools_absent(self):
        self.d.wait_warm("parsing", timeout=60)
        script = r"""
            echo '{"a": [1, 2, 3]}' | jq -c '.a | map(. * 2)'
            printf 'x 1\ny 2\n' | gawk '{ s += $2 } END { print "sum", s }'
            awk --version | head -1
            echo '<r><i n="7"/></r>' | xmlstarlet sel -t -v '/r/i/@n' -n
            echo abc | sed s/b/B/ | grep -c aBc
            python3 -c 'import json, sys; print("py", sys.version_info[0], json.dumps([1]))'
            for t in gcc cc make perl apt apt-get dpkg dpkg-query bash curl git su sudo mount; do
                if command -v "$t" >/dev/null; then echo "HOST TOOL $t"; fi
            done
            ls /usr/bin/python3* >/dev/null && echo done
        """
        res = self.run_sh(script)
        out = res.get("stdout", "")
        self.assertEqual(res.get("exit_code"), 0, res)
        self.assertIn("[2,4,6]", out)
        self.assertIn("sum 3", out)
        self.assertIn("GNU Awk", out)  # awk -> gawk through the image's own alternatives
        self.assertIn("\n7\n", out)
        self.assertIn("py 3 [1]", out)
        self.assertNotIn("HOST TOOL", out)
        self.assertTrue(out.endswith("done\n"), out)

    def test_pools_show_the_verified_image(self):
        self.d.wait_warm("parsing", timeout=60)
        self.assertEqual(pools_row(self.d, "parsing")["image_state"], "verified")
        r = self.d.sbx("pools")
        self.assertEqual(r.returncode, 0, r.stderr)
        row = [l for l in r.stdout.decode().splitlines() if l.startswith("parsing ")]
        self.assertEqual(len(row), 1, r.stdout)
        self.assertRegex(row[0], r"\sparsing\s+default$")
        self.assertRegex(self.d.logtext(), r'image=parsing .*msg="image verified"')

    def test_manifest_lists_packages_and_the_tree_hash(self):
        m = manifest("parsing")
        pkgs = dict(re.findall(r"^package (\S+) (\S+) \S+$", m, re.M))
        for p in ("jq", "gawk", "xmlstarlet", "python3", "sed", "grep", "dash"):
            self.assertIn(p, pkgs)
        for p in ("dpkg", "apt", "perl", "gcc", "bash"):
            self.assertNotIn(p, pkgs)
        tree = re.search(r"^tree sha256:([0-9a-f]{64})$", m, re.M).group(1)
        files = int(re.search(r"^files (\d+)$", m, re.M).group(1))
        self.assertEqual(tree_hash(os.path.join(IMAGES_DIR, "parsing", "root")), (tree, files))
        self.assertRegex(m, r"(?m)^build_seconds [0-9.]+$")
        # Up to date: a second build is not a rebuild.
        r = subprocess.run(["sh", BUILD_SH, "--out", IMAGES_DIR, "--sbxd", SBXD, "parsing"],
                           capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout.decode(), r"(?m)^parsing\s+cached\s")
        self.assertEqual(manifest("parsing"), m)


class NoSetuid(unittest.TestCase):
    def test_no_built_image_has_setuid_setgid_or_writable_files(self):
        build_image("parsing")
        checked = 0
        for name in sorted(os.listdir(IMAGES_DIR)):
            root = os.path.join(IMAGES_DIR, name, "root")
            if name.startswith(".") or not os.path.isdir(root):
                continue
            for dirpath, dirnames, filenames in os.walk(root):
                for n in dirnames + filenames:
                    p = os.path.join(dirpath, n)
                    st = os.lstat(p)
                    checked += 1
                    if stat.S_ISLNK(st.st_mode):
                        continue
                    self.assertFalse(st.st_mode & (stat.S_ISUID | stat.S_ISGID),
                                     "%s is setuid/setgid (%o)" % (p, st.st_mode))
                    self.assertFalse(st.st_mode & 0o022, "%s is writable by others" % p)
                    self.assertEqual((st.st_uid, st.st_gid), (0, 0), p)
                    self.assertTrue(stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode), p)
        self.assertGreater(checked, 1000)


class AlteredImage(unittest.TestCase):
    """A copy of the parsing image with one binary changed after it was built."""

    def test_altered_image_is_refused(self):
        build_image("parsing")
        tmp = tempfile.mkdtemp(prefix="sbx-images-")
        try:
            images = os.path.join(tmp, "images")
            os.mkdir(images)
            subprocess.run(["cp", "-a", os.path.join(IMAGES_DIR, "parsing"), images], check=True)
            with open(os.path.join(images, "parsing", "root", "usr", "bin", "jq"), "ab") as f:
                f.write(b"\0trojan")
            d = Daemon(pools=[image_pool(), pool_yaml(name="python", warm=1)],
                       config_extra="images_dir: %s\n" % images)
            try:
                deadline = time.time() + 30
                while "refusing altered image" not in d.logtext() and time.time() < deadline:
                    time.sleep(0.05)
                log = d.logtext()
                self.assertRegex(log, r'level=error mod=image image=parsing .*found=sha256:[0-9a-f]{64} '
                                      r'expected=sha256:[0-9a-f]{64} msg="refusing altered image')
                with d.client() as c:
                    with self.assertRaises(sbx_client.RpcError) as cm:
                        c.exec(["jq", "--version"], pool="parsing", wait_timeout=30)
                    self.assertEqual(cm.exception.code, "internal")
                    # Another pool is unaffected.
                    res, out, _ = c.exec(["echo", "fine"], pool="python", wait_timeout=30)
                    self.assertEqual(out, b"fine\n")
                self.assertEqual(pools_row(d, "parsing")["image_state"], "refused")
                self.assertEqual(pools_row(d, "parsing")["created"], 0)
                self.assertRegex(d.logtext(), r"image 'parsing' refused: altered")
                r = d.sbx("pools")
                self.assertIn(b"parsing (refused)", r.stdout)
            finally:
                d.stop()
        finally:
            shutil.rmtree(tmp)


class NeverBuilt(unittest.TestCase):
    """No mmdebstrap needed: an image that was never built."""

    def test_falls_back_to_host_said_once(self):
        tmp = tempfile.mkdtemp(prefix="sbx-images-")
        try:
            d = Daemon(pools=[image_pool(name="python", image="nosuch", warm=2)],
                       config_extra="images_dir: %s\n" % tmp)
            try:
                d.wait_warm("python")
                for _ in range(3):
                    res, _ = d.exec_json("sh", "-c", "test -x /usr/bin/gcc && echo host")
                    self.assertEqual((res.get("exit_code"), res.get("stdout")), (0, "host\n"))
                lines = [l for l in d.logtext().splitlines() if "image=nosuch" in l]
                self.assertEqual(len(lines), 1, lines)
                self.assertIn('msg="image not built: using the host image instead', lines[0])
                self.assertIn("level=warn", lines[0])
                self.assertEqual(pools_row(d, "python")["image_state"], "not_built")
                r = d.sbx("pools")
                self.assertIn(b"host (nosuch not built)", r.stdout)
            finally:
                d.stop()
        finally:
            shutil.rmtree(tmp)

    def test_require_images_makes_it_a_startup_error(self):
        tmp = tempfile.mkdtemp(prefix="sbx-images-")
        try:
            os.mkdir(os.path.join(tmp, "pools"))
            with open(os.path.join(tmp, "pools", "python.yaml"), "w") as f:
                f.write(image_pool(name="python", image="nosuch"))
            cfg = os.path.join(tmp, "sbxd.yaml")
            with open(cfg, "w") as f:
                f.write("socket: %s/a.sock\nadmin_socket: %s/b.sock\nstate_dir: %s/state\n"
                        "images_dir: %s/images\npools_dir: pools\nmetrics: ''\n"
                        % (tmp, tmp, tmp, tmp))
            r = subprocess.run([SBXD, "--config", cfg, "--require-images"], capture_output=True,
                               timeout=30)
            self.assertEqual(r.returncode, 78, r.stderr)
            self.assertIn(b"pool 'python': image 'nosuch' was never built (--require-images)",
                          r.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "a.sock")))
        finally:
            shutil.rmtree(tmp)
