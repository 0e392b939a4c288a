#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds pool images from images/NAME/recipe.yaml with mmdebstrap, from the Debian mirror
# that apt on this machine already uses, into OUT/NAME/{root,manifest,recipe.sha256}.
# An image whose recipe (and this script) did not change, and whose tree still matches its
# manifest, is not rebuilt. See images/README.md and docs/IMAGES.md.
#
# Usage: images/build.sh [--out DIR] [--sbxd PATH] [--suite SUITE] [--force] [NAME...]
# Exit: 0 built or up to date; 1 a build failed; 64 usage; 75 images cannot be built on
# this machine (no mmdebstrap, not root, no Debian mirror reachable): the reason is printed.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
here="$top/images"
out=${SBX_IMAGES_DIR:-./var/images}
sbxd=${SBXD:-$top/build/sbxd}
suite=""
force=0
names=""

die() { echo "images: $*" >&2; exit 1; }
cannot() { echo "images: cannot build here: $*" >&2; exit 75; }

while [ $# -gt 0 ]; do
    case $1 in
    --out) out=$2; shift 2 ;;
    --sbxd) sbxd=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --force) force=1; shift ;;
    -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "images: unknown option $1" >&2; exit 64 ;;
    *) names="$names $1"; shift ;;
    esac
done
if [ -z "$names" ]; then
    for d in "$here"/*/recipe.yaml; do
        names="$names $(basename "$(dirname "$d")")"
    done
fi
for n in $names; do
    case $n in
    host|*[!a-z0-9_-]*|"") echo "images: bad image name '$n'" >&2; exit 64 ;;
    esac
    [ -f "$here/$n/recipe.yaml" ] || { echo "images: no recipe images/$n/recipe.yaml" >&2; exit 64; }
done

[ "$(id -u)" = 0 ] || cannot "mmdebstrap needs root here (it runs in root mode)"
command -v mmdebstrap >/dev/null 2>&1 || cannot "mmdebstrap is not installed (make image-deps)"
[ -x "$sbxd" ] || die "$sbxd is not executable (make builds it; --sbxd names another)"
if [ -z "$suite" ]; then
    suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$suite" ] || cannot "no VERSION_CODENAME in /etc/os-release: pass --suite"
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
# One build at a time per output directory.
exec 9>"$out/.lock"
flock 9

# ---- recipe: a strict YAML subset (top-level keys, lists of plain words, # comments) ----

# Prints "key word" lines for recipe file $1; unknown keys and odd lines are errors.
recipe_read() {
    awk -v file="$1" '
        function bad(msg) { printf "%s:%d: %s\n", file, NR, msg > "/dev/stderr"; err = 1; exit 1 }
        { sub(/[ \t]+#.*$/, ""); sub(/^#.*$/, "") }
        /^[ \t]*$/ { next }
        /^[a-z_]+:[ \t]*$/ {
            key = $0; sub(/:.*/, "", key)
            if (key != "packages" && key != "remove") bad("unknown key \"" key "\"")
            next
        }
        /^[ \t]+- [a-z0-9][a-z0-9+.-]*[ \t]*$/ {
            if (key == "") bad("list item outside a key")
            w = $0; sub(/^[ \t]+- /, "", w); sub(/[ \t]+$/, "", w)
            print key, w
            next
        }
        { bad("not a \"key:\" line or a \"  - package\" item") }
    ' "$1"
}

# ---- the mirror: apt's own sources for this suite, as one-line entries ----

host_sources() {
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v suite="$suite" '
            /^[ \t]*deb[ \t]/ {
                line = $0; sub(/^[ \t]*deb[ \t]+/, "", line); opts = ""
                if (line ~ /^\[/) { opts = line; sub(/\].*/, "]", opts); sub(/^[^]]*\][ \t]*/, "", line) }
                split(line, f, /[ \t]+/)
                if (f[2] == suite || index(f[2], suite "-") == 1 || index(f[2], suite "/") == 1)
                    print "deb " (opts == "" ? "" : opts " ") line
            }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v suite="$suite" '
            function flush(   i, j, nu, ns, u, s, o) {
                if (types ~ /(^|[ \t])deb([ \t]|$)/ && tolower(enabled) != "no" && uris != "") {
                    o = (signed ~ /^\//) ? "[signed-by=" signed "] " : ""
                    nu = split(uris, u, /[ \t]+/); ns = split(suites, s, /[ \t]+/)
                    for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
                        if (s[j] == suite || index(s[j], suite "-") == 1)
                            print "deb " o u[i] " " s[j] " " comps
                }
                types = uris = suites = comps = signed = enabled = ""; cur = ""
            }
            /^#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]/ { next }
            {
                k = $0; sub(/:.*/, "", k); v = $0; sub(/^[^:]*:[ \t]*/, "", v); sub(/[ \t]+$/, "", v)
                k = tolower(k)
                if (k == "types") types = v; else if (k == "uris") uris = v
                else if (k == "suites") suites = v; else if (k == "components") comps = v
                else if (k == "signed-by") signed = v; else if (k == "enabled") enabled = v
            }
            END { flush() }' "$f"
    done
}

sources="$out/.sources.list"
if [ -n "${SBX_IMAGE_MIRROR:-}" ]; then
    echo "deb $SBX_IMAGE_MIRROR $suite main" > "$sources"
else
    host_sources > "$sources"
fi
[ -s "$sources" ] || cannot "apt has no source for '$suite' in /etc/apt/sources.list(.d) (set SBX_IMAGE_MIRROR)"

# apt settings of this machine that mmdebstrap's private apt must share to reach the mirror.
aptopts=""
eval "$(apt-config shell HTTP_PROXY Acquire::http::Proxy HTTPS_PROXY Acquire::https::Proxy \
        VALID Acquire::Check-Valid-Until CHECK_DATE Acquire::Check-Date)"
[ -n "${HTTP_PROXY:-}" ] && aptopts="$aptopts Acquire::http::Proxy=\"$HTTP_PROXY\""
[ -n "${HTTPS_PROXY:-}" ] && aptopts="$aptopts Acquire::https::Proxy=\"$HTTPS_PROXY\""
[ "${VALID:-}" = false ] && aptopts="$aptopts Acquire::Check-Valid-Until=\"false\""
[ "${CHECK_DATE:-}" = false ] && aptopts="$aptopts Acquire::Check-Date=\"false\""

# ---- one image ----

# Everything that decides an image's content: when it changes, the image is rebuilt.
recipe_hash() {
    { cat "$here/common.yaml" "$here/$1/recipe.yaml" "$here/build.sh"; echo "suite $suite"; } |
        sha256sum | cut -d' ' -f1
}

# Removes a tree that must not contain mount points (mmdebstrap unmounts its own; should a
# mount be left, --one-file-system keeps rm from crossing into it).
remove_tree() {
    [ -e "$1" ] || return 0
    if awk -v p="$1/" '{ if (index($5 "/", p) == 1) found = 1 } END { exit !found }' /proc/self/mountinfo; then
        die "refusing to remove $1: something is mounted below it"
    fi
    rm -rf --one-file-system "$1"
}

# Deletes the files of installed package $2 from tree $1, then its directories that are
# left empty. Directories other packages use stay (rmdir fails on them).
remove_package() {
    list=""
    for l in "$1/var/lib/dpkg/info/$2.list" "$1/var/lib/dpkg/info/$2:"*.list; do
        [ -f "$l" ] && list=$l && break
    done
    [ -n "$list" ] || return 0
    while IFS= read -r p; do
        [ "$p" = "/." ] && continue
        # Directories stay, and so do links to them (bin -> usr/bin is listed as /bin).
        if [ ! -d "$1$p" ] && { [ -L "$1$p" ] || [ -e "$1$p" ]; }; then
            rm -f "$1$p"
        fi
    done < "$list"
    sort -r "$list" | while IFS= read -r p; do
        [ "$p" = "/." ] || { [ -d "$1$p" ] && [ ! -L "$1$p" ] && rmdir "$1$p" 2>/dev/null; } || true
    done
}

# The minimal /etc every image carries. sbxd-init generates passwd, group, hosts and
# nsswitch.conf for each sandbox (with the pool's uid); these copies keep the tree
# self-describing and usable by other runtimes.
write_etc() {
    etc="$1/etc"
    rm -f "$etc"/shadow* "$etc"/gshadow* "$etc"/passwd- "$etc"/group- "$etc"/subuid* \
        "$etc"/subgid* "$etc/resolv.conf" "$etc/hostname" "$etc/fstab" "$etc/mtab" \
        "$etc/motd" "$etc"/issue*
    rm -rf "$etc/apt" "$etc/dpkg" "$etc"/cron.* "$etc/logrotate.d" "$etc/default" \
        "$etc/profile.d" "$etc/skel" "$etc/update-motd.d"
    printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:10001:10001:sandbox:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' > "$etc/passwd"
    printf 'root:x:0:\nsandbox:x:10001:\nnogroup:x:65534:\n' > "$etc/group"
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$etc/hosts"
    printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\nprotocols: files\nservices: files\n' > "$etc/nsswitch.conf"
}

build_one() {
    name=$1
    dst="$out/$name"
    want=$(recipe_hash "$name")
    if [ $force = 0 ] && [ -f "$dst/recipe.sha256" ] && [ -f "$dst/manifest" ] &&
        [ "$(cat "$dst/recipe.sha256")" = "$want" ]; then
        tree=$(sed -n 's/^tree //p' "$dst/manifest")
        if [ "$("$sbxd" --image-hash "$dst/root" 2>/dev/null | sed -n 's/^tree //p')" = "$tree" ]; then
            report "$name" cached "$(sed -n 's/^build_seconds //p' "$dst/manifest")"
            return 0
        fi
        echo "images: $name: tree no longer matches its manifest, rebuilding" >&2
    fi

    tmp="$out/.build-$name"
    remove_tree "$tmp"
    mkdir -p "$tmp" "$out/.cache/archives"
    root="$tmp/root"
    pkgs=$( { recipe_read "$here/common.yaml"; recipe_read "$here/$name/recipe.yaml"; } |
        awk '$1 == "packages" && !seen[$2]++ { printf "%s%s", sep, $2; sep = "," }')
    removes=$( { recipe_read "$here/common.yaml"; recipe_read "$here/$name/recipe.yaml"; } |
        awk '$1 == "remove" { print $2 }' | sort -u)
    [ -n "$pkgs" ] || die "$name: the recipe lists no packages"

    set --
    for o in $aptopts; do set -- "$@" "--aptopt=$o"; done
    echo "images: building $name ($pkgs) from $(awk '{ sub(/\[[^]]*\] /, ""); print $2; exit }' "$sources")..." >&2
    start=$(date +%s.%N)
    if ! mmdebstrap --variant=custom --mode=root --format=directory \
        --include="$pkgs" \
        --dpkgopt='force-unsafe-io' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/lintian/*' \
        --setup-hook='for d in bin sbin lib lib64; do mkdir -p "$1/usr/$d" && ln -s "usr/$d" "$1/$d"; done' \
        --setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
        --setup-hook="sync-in $out/.cache/archives /var/cache/apt/archives" \
        --customize-hook="sync-out /var/cache/apt/archives $out/.cache/archives" \
        --skip=essential/unlink \
        "$@" "$suite" "$root" "$sources" > "$tmp/build.log" 2>&1; then
        cp "$tmp/build.log" "$out/$name.failed.log"
        tail -20 "$tmp/build.log" >&2
        echo "images: $name: the whole log is in $out/$name.failed.log" >&2
        if grep -q -E "Failed to fetch|Could not resolve|Temporary failure|Unable to connect|apt-get update.*failed|Release file.*not" "$tmp/build.log"; then
            remove_tree "$tmp"
            cannot "the Debian mirror in $sources is not reachable"
        fi
        remove_tree "$tmp"
        die "$name: mmdebstrap failed"
    fi

    # Package list, before the package manager and its database go.
    dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package} ${Version} ${Architecture}\n' |
        sort > "$tmp/packages.all"
    for p in $removes; do
        remove_package "$root" "$p"
    done
    printf '%s\n' "$removes" > "$tmp/removed"
    awk 'NR == FNR { gone[$1] = 1; next } !($1 in gone)' "$tmp/removed" "$tmp/packages.all" > "$tmp/packages"

    # No package manager, no caches, logs or device nodes (each sandbox has its own /dev).
    rm -rf "$root/var/lib/dpkg" "$root/var/lib/apt" "$root/var/cache" "$root/var/log" \
        "$root/usr/share/dpkg" "$root/usr/lib/dpkg" "$root/root"
    find "$root/dev" "$root/run" "$root/tmp" "$root/var/tmp" -mindepth 1 -delete 2>/dev/null || true
    mkdir -p "$root/var/cache" "$root/var/log" "$root/var/tmp" "$root/tmp" "$root/root" \
        "$root/proc" "$root/sys" "$root/dev" "$root/run"
    write_etc "$root"
    ldconfig -r "$root"

    # SECURITY: no setuid or setgid file, nothing writable but by root, everything root's.
    chown -hR 0:0 "$root"
    find "$root" ! -type l -perm /6000 -exec chmod ug-s {} +
    find "$root" ! -type l -perm /022 -exec chmod go-w {} +
    chmod 0755 "$root/tmp" "$root/var/tmp" "$root"
    left=$(find "$root" ! -type l \( -perm /6000 -o -perm /022 \) | head -5)
    [ -z "$left" ] || die "$name: still setuid/setgid or writable by others: $left"

    "$sbxd" --image-hash "$root" > "$tmp/hash" || die "$name: $sbxd --image-hash failed"
    end=$(date +%s.%N)
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    {
        echo "# sbx image manifest: docs/IMAGES.md. sbxd verifies 'tree' before using root/."
        echo "format 1"
        echo "name $name"
        echo "suite $suite"
        echo "recipe sha256:$want"
        echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "build_seconds $secs"
        cat "$tmp/hash"
        sed 's/^/package /' "$tmp/packages"
    } > "$tmp/manifest"
    echo "$want" > "$tmp/recipe.sha256"
    rm -f "$tmp/hash" "$tmp/packages" "$tmp/packages.all" "$tmp/removed"

    # Swap in the new image; the old one goes only after the new one is in place.
    remove_tree "$out/.old-$name"
    [ -e "$dst" ] && mv "$dst" "$out/.old-$name"
    mv "$tmp" "$dst"
    remove_tree "$out/.old-$name"
    rm -f "$out/$name.failed.log"
    report "$name" built "$secs"
}

summary=""
report() { # name how seconds
    m="$out/$1/manifest"
    bytes=$(sed -n 's/^bytes //p' "$m")
    files=$(sed -n 's/^files //p' "$m")
    npk=$(grep -c '^package ' "$m")
    line=$(printf '%-14s %-7s %8ss %8s MiB %7s files %4s packages' "$1" "$2" "${3:--}" \
        "$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')" "$files" "$npk")
    summary="$summary$line
"
    echo "images: $line"
}

for n in $names; do
    build_one "$n"
done
printf '\nimage          state    build time      size               contents\n%s' "$summary"
echo "images are in $out"
