/* SPDX-License-Identifier: MIT */
#pragma once
/* The sandbox's filesystem, built by sbxd-init inside its new mount namespace (and user
 * namespace, as its root): a read-only tmpfs root holding read-only binds of the image,
 * a minimal /etc, /tmp, /proc and /dev, then pivot_root into it. Init only. */
#include <stdint.h>

#include "err.h"

struct mount_config {
    const char *image_root; /* absolute; "/" is the host image */
    const char *hostname;   /* validated: [A-Za-z0-9.-], 1..63 chars */
    uint32_t uid;           /* the task's user and group (for /etc/passwd and group) */
    uint32_t gid;
    uint64_t tmp_size; /* bytes for /tmp, > 0 */
    uint64_t shm_size; /* bytes for /dev/shm, > 0; 0 = no /dev/shm */
};

/* Builds the root filesystem and makes it the process's root (cwd "/"). Image paths
 * resolve inside image_root (symlinks cannot leave it); nothing of the host is visible
 * afterwards but the image's /usr, top-level lib and bin dirs, a few /etc files and six
 * device nodes. Returns 0 or -errno with e naming the path and step; on failure the
 * mount namespace is half-built and the caller must exit. */
int mount_setup(const struct mount_config *cfg, struct err *e);
