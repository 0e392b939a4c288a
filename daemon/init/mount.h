/* SPDX-License-Identifier: MIT */
#pragma once
/* The sandbox's filesystem, built by sbxd-init inside its new mount namespace (and user
 * namespace, as its root): a read-only tmpfs root holding read-only binds of the image,
 * a minimal /etc, /tmp, /proc and /dev, then pivot_root into it. Init only. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/ctl.h"
#include "lib/err.h"

enum mount_mode {
    /* The whole sandbox root, from the image, in the sandbox's own namespaces. */
    MOUNT_WHOLE,
    /* A pool's template (in its fork server, host root in a private mount namespace): the image's
     * parts, /etc and /dev as in MOUNT_WHOLE; /tmp an empty directory; /proc of a pid namespace
     * with no process left (the visible proc a user namespace needs to mount its own); no
     * /dev/shm tmpfs, only its mount point. Becomes the fork server's root. */
    MOUNT_TEMPLATE,
    /* A sandbox forked by the fork server (in its new user and mount namespaces, a copy of the
     * template): the template stays its root (read-only, locked by the kernel), and it
     * mounts its own /tmp, /proc and /dev/shm. Its names are the template's (the pool's
     * sandboxes share them). */
    MOUNT_FROM_TEMPLATE,
};

struct mount_config {
    enum mount_mode mode;
    const char *image_root; /* absolute; "/" is the host image */
    int image_fd;           /* >= 0: a detached mount tree of the image's root (not closed
                               here), attached instead of opening image_root, which then only
                               names it; a built image (not "/") also brings its own /etc */
    const char *hostname;   /* validated: [A-Za-z0-9.-], 1..63 chars */
    uint32_t uid;           /* the task's user and group (for /etc/passwd and group) */
    uint32_t gid;
    uint64_t tmp_size;  /* bytes for /tmp, > 0 */
    uint64_t work_size; /* bytes for /work, > 0 */
    uint64_t shm_size;  /* bytes for /dev/shm, > 0; 0 = no /dev/shm */
    /* Where the root directory of the /work tmpfs goes, opened right after its mount
     * (O_DIRECTORY, CLOEXEC; the caller's to close), or NULL; -1 for a template. */
    int *work_fd;
};

/* Builds the root filesystem and makes it the process's root (cwd "/"). Image paths
 * resolve inside image_root (symlinks cannot leave it); nothing of the host is visible
 * afterwards but the image's /usr, top-level lib and bin dirs, a few /etc files and six
 * device nodes. Returns 0 or -errno with e naming the path and step; on failure the
 * mount namespace is half-built and the caller must exit. */
int mount_setup(const struct mount_config *cfg, struct err *e);
/* Attaches a task's token mounts, after mount_setup and before the task is forked: fds[i]
 * (a detached, read-only, nosuid, nodev mount tree from sbxd; a regular file when bit i of
 * files is set, else a directory) is moved onto dst[i], whose missing directories (and,
 * for a file, the file) are created first. Each dst must pass ctl_mount_dst_check and no
 * dst may lie on or below another. The read-only root is writable only while the mount
 * points are made, and read-only again before this returns, whatever happened. The fds
 * stay open (the caller closes them). No namespace is created. shared_root: the root is a
 * fork server's template (MOUNT_FROM_TEMPLATE), which cannot be made writable; a mount point
 * outside /tmp then first gets the sandbox a root of its own (recursive clones of the
 * template's entries and of the sandbox's own mounts, then pivot_root). Returns 0 or -errno
 * with e naming the mount. */
int mount_task_mounts(const int *fds, size_t n, const char (*dst)[CTL_PATH_MAX], uint32_t files,
                      bool shared_root, struct err *e);
