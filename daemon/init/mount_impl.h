/* SPDX-License-Identifier: MIT */
#pragma once
/* Inside init/'s mounts: what mount.c (the sandbox's root, the template) and mount_task.c
 * (a task's token mounts) share: a directory read without the heap, a tmpfs, and the pivot.
 * CHILD-SAFE, like all of sbxd-init. Nothing outside these two files includes this header. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

/* A directory read with getdents64 into the caller's buffer, not a DIR: opendir mallocs,
 * and the fork server and init allocate nothing, so that no heap joins their address space
 * ("Address space" in docs/ARCHITECTURE.md). */
struct mount_dir {
    int fd; /* owned */
    size_t pos, len;
    char buf[2048] __attribute__((aligned(8)));
};

struct mount_dirent64 {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* Closes d's fd (a scoped() cleanup). */
void mount_dir_close(struct mount_dir *d);
/* The next entry but "." and "..", or NULL at the end (*err 0) or on an error (*err
 * -errno). */
const struct mount_dirent64 *mount_dir_next(struct mount_dir *d, int *err);
/* Mounts a tmpfs of mode and size (bytes) on path. Returns 0 or -errno with e. */
int mount_tmpfs(const char *path, unsigned long flags, const char *mode, uint64_t size,
                struct err *e);
/* Makes dir the root (cwd "/"), read-only when ro. Returns 0 or -errno with e. */
int mount_pivot_to(const char *dir, bool ro, struct err *e);
