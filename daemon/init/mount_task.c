/* SPDX-License-Identifier: MIT */
/* A task's token mounts, per task (the hot path: no namespace, no new filesystem): each
 * detached read-only tree from sbxd moved onto its destination, the template's shared root
 * first rebased onto a root of the sandbox's own when a destination needs it. It must never
 * let a mount propagate back to the host. CHILD-SAFE: no heap, like all of sbxd-init. */
#include "init/mount.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/sys.h"
#include "init/mount_impl.h"
#include "lib/util.h"

/* The most entries a template's root has (usr, lib dirs, etc, tmp, proc, dev, run). */
#define MOUNT_REBASE_MAX 24

/* One entry of the root being replaced: a directory (fd: a detached recursive clone of
 * what is there, mounts on it included) or a link (its target). */
struct mount_rebase_entry {
    char name[64];
    int fd;
    char target[256];
};

static void mount_rebase_close(struct mount_rebase_entry *ents, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ents[i].fd = fd_close(ents[i].fd);
    }
}

/* A root of the sandbox's own in place of its fork server's template, which its user namespace
 * cannot make writable for a mount point: a tmpfs on /run holding recursive clones of every
 * entry of "/" (what is mounted there included: the task's /tmp, /proc, /dev/shm)
 * and copies of its links; then pivot_root. Every process of the namespace (the waiting task
 * child too) moves to the new root with us. Read-write: the caller makes it read-only. */
static int mount_rebase(struct err *e)
{
    struct mount_rebase_entry ents[MOUNT_REBASE_MAX];
    size_t n = 0;
    int r = 0;
    scoped_close int root = openat(AT_FDCWD, "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        return err_set(e, -errno, "open /");
    }
    scoped(mount_dir_close) struct mount_dir dir = {.fd = dup(root)};
    if (dir.fd < 0) {
        return err_set(e, -errno, "read /");
    }
    /* Everything is cloned before /run is covered (a clone of /run after would hold the
     * new root itself). */
    const struct mount_dirent64 *de;
    int rd = 0;
    while (r == 0 && (de = mount_dir_next(&dir, &rd))) {
        if (n == MOUNT_REBASE_MAX || strlen(de->name) >= sizeof(ents[n].name)) {
            r = err_setx(e, -E2BIG, "too many or too long entries in /");
            break;
        }
        struct mount_rebase_entry *en = &ents[n];
        (void)str_copy(en->name, de->name, sizeof(en->name));
        en->fd = -1;
        en->target[0] = '\0';
        if (de->type == DT_LNK) {
            ssize_t k = readlinkat(root, en->name, en->target, sizeof(en->target));
            if (k < 0 || (size_t)k >= sizeof(en->target)) {
                r = err_set(e, k < 0 ? -errno : -ENAMETOOLONG, "readlink /%s", en->name);
                break;
            }
            en->target[k] = '\0';
        } else if (de->type == DT_DIR) {
            en->fd = sys_open_tree(root, en->name,
                                   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                                       AT_SYMLINK_NOFOLLOW);
            if (en->fd < 0) {
                r = err_set(e, en->fd, "clone /%s", en->name);
                en->fd = -1;
                break;
            }
        } else {
            r = err_setx(e, -EINVAL, "/%s: not a directory or link", en->name);
            break;
        }
        n++;
    }
    if (r == 0 && rd < 0) {
        r = err_set(e, rd, "read /");
    }
    if (r == 0) {
        r = mount_tmpfs("/run", MS_NOSUID | MS_NODEV | MS_NOEXEC, "0755", 1024 * 1024, e);
    }
    for (size_t i = 0; i < n && r == 0; i++) {
        char dst[80];
        (void)snprintf(dst, sizeof(dst), "/run/%.63s", ents[i].name);
        if (ents[i].fd < 0) {
            if (symlink(ents[i].target, dst) < 0) {
                r = err_set(e, -errno, "symlink %s", dst);
            }
            continue;
        }
        if (mkdir(dst, 0755) < 0) {
            r = err_set(e, -errno, "mkdir %s", dst);
            break;
        }
        r = sys_move_mount(ents[i].fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
        if (r < 0) {
            r = err_set(e, r, "move_mount %s", dst);
        }
    }
    mount_rebase_close(ents, n);
    if (r == 0) {
        r = mount_pivot_to("/run", false, e);
    }
    return r;
}

/* COMPAT(glibc < 2.36): the new mount API's flags come with <linux/mount.h> only. */
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040 /* linux 5.2 */
#endif

/* Whether b is a or lies below it (both normalized absolute paths). */
static bool mount_path_within(const char *b, const char *a)
{
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

/* Opens (O_PATH) the mount point dst, creating its missing directories (0755, owned by the
 * namespace's root) and, for a file mount, the empty file. Components are opened one by
 * one with O_NOFOLLOW from "/", so no symlink is followed. Returns the fd or -errno. */
static int mount_point_open(const char *dst, bool file, struct err *e)
{
    char comp[CTL_PATH_MAX];
    scoped_close int dir = openat(AT_FDCWD, "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        return err_set(e, -errno, "open /");
    }
    for (const char *p = dst + 1;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        bool last = slash == NULL;
        memcpy(comp, p, n);
        comp[n] = '\0';
        int fd;
        if (last && file) {
            fd = openat(dir, comp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (fd >= 0 || errno == EEXIST) {
                (void)fd_close(fd);
                fd = openat(dir, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
            }
        } else {
            fd = openat(dir, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0 && errno == ENOENT) {
                if (mkdirat(dir, comp, 0755) < 0 && errno != EEXIST) {
                    return err_set(e, -errno, "mkdir for mount point %s", dst);
                }
                fd = openat(dir, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            }
        }
        if (fd < 0) {
            return err_set(e, -errno, "mount point %s", dst);
        }
        if (last) {
            return fd;
        }
        dir = fd_close(dir);
        dir = fd;
        p = slash + 1;
    }
}

/* Checks what sbxd sent before anything is changed: the paths, their overlap, and that
 * every tree is what it claims and is read-only, nosuid and nodev. */
static int mount_task_check(const int *fds, size_t n, const char (*dst)[CTL_PATH_MAX],
                            uint32_t files, struct err *e)
{
    for (size_t i = 0; i < n; i++) {
        const char *why = ctl_mount_dst_check(dst[i]);
        if (why) {
            return err_setx(e, -EINVAL, "mount destination %.64s: %s", dst[i], why);
        }
        for (size_t j = 0; j < i; j++) {
            if (mount_path_within(dst[i], dst[j]) || mount_path_within(dst[j], dst[i])) {
                return err_setx(e, -EINVAL, "mount destinations %.64s and %.64s overlap", dst[j],
                                dst[i]);
            }
        }
        struct stat st;
        struct statvfs sv;
        if (fstat(fds[i], &st) < 0 || fstatvfs(fds[i], &sv) < 0) {
            return err_set(e, -errno, "mount for %s", dst[i]);
        }
        bool file = (files >> i) & 1u;
        if (file ? !S_ISREG(st.st_mode) : !S_ISDIR(st.st_mode)) {
            return err_setx(e, -EINVAL, "mount for %.64s is not a %s", dst[i],
                            file ? "regular file" : "directory");
        }
        /* SECURITY: the task may only ever read through these mounts. */
        unsigned long need = ST_RDONLY | ST_NOSUID | ST_NODEV;
        if ((sv.f_flag & need) != need) {
            return err_setx(e, -EPERM, "mount for %.64s is not read-only, nosuid and nodev",
                            dst[i]);
        }
    }
    return 0;
}

int mount_task_mounts(const int *fds, size_t n, const char (*dst)[CTL_PATH_MAX], uint32_t files,
                      bool shared_root, struct err *e)
{
    if (n == 0) {
        return 0;
    }
    if (n > CTL_MOUNTS_MAX) {
        return err_setx(e, -EINVAL, "%zu mounts (at most %d)", n, CTL_MOUNTS_MAX);
    }
    int r = mount_task_check(fds, n, dst, files, e);
    if (r < 0) {
        return r;
    }
    /* Below /tmp (a writable tmpfs) the mount point can be made as is; anywhere else the
     * read-only root must be writable for a moment. Nothing but init runs here yet. */
    bool root_rw = false;
    for (size_t i = 0; i < n; i++) {
        root_rw = root_rw || !mount_path_within(dst[i], "/tmp");
    }
    if (root_rw && shared_root) {
        r = mount_rebase(e);
        if (r < 0) {
            return err_prefix(e, r, "a root of the sandbox's own");
        }
    } else if (root_rw) {
        r = sys_mount_setattr(AT_FDCWD, "/", 0, 0, MOUNT_ATTR_RDONLY);
        if (r < 0) {
            return err_set(e, r, "make / writable for mount points");
        }
    }
    for (size_t i = 0; i < n && r == 0; i++) {
        int pt = mount_point_open(dst[i], (files >> i) & 1u, e);
        if (pt < 0) {
            r = pt;
            break;
        }
        /* A detached tree from sbxd's namespace may be attached in ours: the kernel lets
         * move_mount take the root of an anonymous mount namespace into the caller's. */
        r = sys_move_mount(fds[i], "", pt, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
        (void)fd_close(pt);
        if (r < 0) {
            r = err_set(e, r, "move_mount onto %s", dst[i]);
        }
    }
    if (root_rw) {
        /* SECURITY: the task never sees a writable root. */
        int r2 = sys_mount_setattr(AT_FDCWD, "/", 0, MOUNT_ATTR_RDONLY, 0);
        if (r2 < 0) {
            return err_set(e, r2, "read-only root after mount points");
        }
    }
    return r;
}
