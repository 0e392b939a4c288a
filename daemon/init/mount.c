/* SPDX-License-Identifier: MIT */
/* The sandbox's root filesystem, built by sbxd-init in its private mount namespace: a tmpfs
 * assembled on the namespace's /tmp, read-only clones of the image, generated /etc, own
 * /proc and /dev, then pivot_root. It must never let a mount propagate back to the host
 * or expose anything of the host beyond the image and six device nodes. Files are opened
 * with openat: musl's open follows O_CLOEXEC with an fcntl(F_SETFD) for old kernels. */
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
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/sys.h"
#include "init/mount_impl.h"
#include "lib/util.h"

/* Where the new root is assembled. The host's /tmp is hidden only in this namespace, and
 * every image path is reached through an fd opened before, so an image under /tmp works. */
#define STAGE "/tmp"
/* Where a built image's tree is attached while its parts are cloned; removed before
 * pivot_root. */
#define IMAGE_STAGE STAGE "/.image"

#define ATTR_IMAGE (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
#define ATTR_PROC_RO (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)
#define ATTR_DEVNODE (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC)

static const char *const mount_lib_dirs[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};
static const char *const mount_etc_files[] = {CTL_HOST_ETC_FILES};
/* What init writes itself into every sandbox's /etc; a built image brings the rest. */
static const char *const mount_etc_generated[] = {"passwd", "group", "hosts", "nsswitch.conf",
                                                  "hostname"};
static const char *const mount_dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
/* Bound read-only over a sandbox's own /proc. Forked from a template, the sandbox has a user
 * namespace of its own, and only /proc/sys holds files its root (init) owns: the sysctls of
 * its ipc, pid and user namespaces. The others (the uts and network sysctls too) belong to
 * the host's root, whom the sandbox's namespace does not map, so no process in it may write
 * them, init included (tests/e2e/test_forkserver.py checks both). Such a sandbox binds only
 * the first MOUNT_PROC_RO_USERNS entries: each mount costs every sandbox its creation and
 * its teardown. */
static const char *const mount_proc_ro[] = {"sys", "sysrq-trigger", "irq", "bus"};
enum { MOUNT_PROC_RO_USERNS = 1 };

/* Sets attr on every mount of the detached tree and attaches it at dst. mount_setattr only
 * adds flags, so the flags the kernel locks on mounts inherited from a more privileged
 * namespace (nosuid, nodev, noexec, ro, atime) are kept. */
static int mount_attach_tree(int tree, const char *dst, uint64_t attr, struct err *e)
{
    int r = sys_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, attr, 0);
    if (r < 0) {
        return err_set(e, r, "mount_setattr %s", dst);
    }
    r = sys_move_mount(tree, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
    if (r < 0) {
        return err_set(e, r, "move_mount %s", dst);
    }
    return 0;
}

/* Clones the mount tree at src (any fd; "" path) and attaches it at dst with attr set on
 * every mount of the clone (mount_attach_tree): submounts of the source become read-only
 * too. */
static int mount_attach(int src, const char *dst, uint64_t attr, struct err *e)
{
    scoped_close int tree =
        sys_open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (tree < 0) {
        return err_set(e, tree, "open_tree for %s", dst);
    }
    return mount_attach_tree(tree, dst, attr, e);
}

/* Creates an empty regular file to bind a file onto. */
static int mount_make_file(const char *path, mode_t mode, struct err *e)
{
    int fd = openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        return err_set(e, -errno, "create %s", path);
    }
    (void)fd_close(fd);
    return 0;
}

static int mount_write_file(const char *path, const char *text, struct err *e)
{
    scoped_close int fd =
        openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        return err_set(e, -errno, "create %s", path);
    }
    int r = fd_write_all(fd, text, strlen(text));
    if (r < 0) {
        return err_set(e, r, "write %s", path);
    }
    return 0;
}

/* Makes dst the same symlink as name in dir (what names it in messages). */
static int mount_copy_link(int dir, const char *name, const char *what, const char *dst,
                           struct err *e)
{
    char target[4096];
    ssize_t n = readlinkat(dir, name, target, sizeof(target));
    if (n < 0 || (size_t)n >= sizeof(target)) {
        return err_set(e, n < 0 ? -errno : -ENAMETOOLONG, "readlink %s", what);
    }
    target[n] = '\0';
    if (symlink(target, dst) < 0) {
        return err_set(e, -errno, "symlink %s", dst);
    }
    return 0;
}

/* Makes dst (below STAGE) what src is: the same symlink, or a read-only clone of the
 * directory or regular file. src is an O_PATH|O_NOFOLLOW fd. Other types are refused. */
static int mount_replicate(int src, const char *what, const char *dst, struct err *e)
{
    struct stat st;
    if (fstat(src, &st) < 0) {
        return err_set(e, -errno, "stat %s", what);
    }
    if (S_ISLNK(st.st_mode)) {
        return mount_copy_link(src, "", what, dst, e);
    }
    if (S_ISDIR(st.st_mode)) {
        if (mkdir(dst, 0755) < 0) {
            return err_set(e, -errno, "mkdir %s", dst);
        }
    } else if (S_ISREG(st.st_mode)) {
        int r = mount_make_file(dst, 0644, e);
        if (r < 0) {
            return r;
        }
    } else {
        return err_setx(e, -EINVAL, "%s: not a directory, file or symlink", what);
    }
    return mount_attach(src, dst, ATTR_IMAGE, e);
}

void mount_dir_close(struct mount_dir *d)
{
    d->fd = fd_close(d->fd);
}

const struct mount_dirent64 *mount_dir_next(struct mount_dir *d, int *err)
{
    *err = 0;
    for (;;) {
        if (d->pos >= d->len) {
            long n = syscall(SYS_getdents64, d->fd, d->buf, sizeof(d->buf));
            if (n <= 0) {
                *err = n < 0 ? -errno : 0;
                return NULL;
            }
            d->pos = 0;
            d->len = (size_t)n;
        }
        const struct mount_dirent64 *de = (const void *)(d->buf + d->pos);
        d->pos += de->reclen;
        if (strcmp(de->name, ".") != 0 && strcmp(de->name, "..") != 0) {
            return de;
        }
    }
}

/* Bounds of what a template copies of /etc (mount_copy): depth of directories, and bytes. */
#define MOUNT_COPY_DEPTH 8
#define MOUNT_COPY_BYTES (32ULL * 1024 * 1024)

static int mount_copy_file(int parent, const char *name, const char *dst, mode_t mode,
                           uint64_t *budget, struct err *e)
{
    scoped_close int in = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (in < 0) {
        return err_set(e, -errno, "open %s", dst);
    }
    scoped_close int out =
        openat(AT_FDCWD, dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0755);
    if (out < 0) {
        return err_set(e, -errno, "create %s", dst);
    }
    char buf[16384];
    for (;;) {
        ssize_t n = RETRY_EINTR(read(in, buf, sizeof(buf)));
        if (n < 0) {
            return err_set(e, -errno, "read %s", dst);
        }
        if (n == 0) {
            return 0;
        }
        if ((uint64_t)n > *budget) {
            return err_setx(e, -EFBIG, "/etc is larger than %llu bytes",
                            (unsigned long long)MOUNT_COPY_BYTES);
        }
        *budget -= (uint64_t)n;
        int r = fd_write_all(out, buf, (size_t)n);
        if (r < 0) {
            return err_set(e, r, "write %s", dst);
        }
    }
}

/* Copies entry name of parent to dst: a link as a link, a regular file's bytes (mode without
 * setuid, setgid, sticky or others' write), a directory and what it holds. Anything else
 * is refused. A template's /etc is copied rather than bound: every mount of the template
 * is one more for each sandbox to copy and tear down. */
static int mount_copy(int parent, const char *name, const char *dst, int depth, uint64_t *budget,
                      struct err *e)
{
    struct stat st;
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        return err_set(e, -errno, "stat %s", dst);
    }
    if (S_ISLNK(st.st_mode)) {
        return mount_copy_link(parent, name, dst, dst, e);
    }
    if (S_ISREG(st.st_mode)) {
        return mount_copy_file(parent, name, dst, st.st_mode, budget, e);
    }
    if (!S_ISDIR(st.st_mode)) {
        return err_setx(e, -EINVAL, "%s: not a directory, file or symlink", dst);
    }
    if (depth >= MOUNT_COPY_DEPTH) {
        return err_setx(e, -ELOOP, "%s: directories nested too deep", dst);
    }
    if (mkdir(dst, st.st_mode & 0755) < 0) {
        return err_set(e, -errno, "mkdir %s", dst);
    }
    scoped(mount_dir_close) struct mount_dir dir = {
        .fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
    if (dir.fd < 0) {
        return err_set(e, -errno, "open %s", dst);
    }
    const struct mount_dirent64 *de;
    int r = 0;
    while ((de = mount_dir_next(&dir, &r))) {
        char sub[512];
        if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", dst, de->name) >= sizeof(sub)) {
            return err_setx(e, -ENAMETOOLONG, "%s/%.32s...: name too long", dst, de->name);
        }
        r = mount_copy(dir.fd, de->name, sub, depth + 1, budget, e);
        if (r < 0) {
            return r;
        }
    }
    return r < 0 ? err_set(e, r, "read %s", dst) : 0;
}

/* Imports image path rel (resolved inside the image: no symlink or ".." can leave it) at
 * STAGE/<dst>, as a read-only clone, or a copy when budget is not NULL (mount_copy). A
 * missing optional path is skipped. */
static int mount_import(int imgfd, const char *rel, const char *dst, bool required,
                        uint64_t *budget, struct err *e)
{
    char path[256];
    (void)snprintf(path, sizeof(path), STAGE "/%s", dst);
    if (budget) {
        /* The entry's directory, resolved inside the image; the entry itself is never
         * followed (mount_copy). */
        char dir[256];
        const char *slash = strrchr(rel, '/');
        size_t dlen = slash ? (size_t)(slash - rel) : 0;
        if (dlen >= sizeof(dir)) {
            return err_setx(e, -ENAMETOOLONG, "image %s", rel);
        }
        memcpy(dir, rel, dlen);
        (void)snprintf(dir + dlen, sizeof(dir) - dlen, "%s", dlen ? "" : ".");
        scoped_close int dfd = sys_openat2(imgfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                                           RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (dfd < 0) {
            return err_set(e, dfd, "image %s", dir);
        }
        const char *name = slash ? slash + 1 : rel;
        if (!required && faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
            return 0;
        }
        return mount_copy(dfd, name, path, 0, budget, e);
    }
    /* SECURITY: RESOLVE_IN_ROOT keeps an image's absolute symlinks inside the image. */
    scoped_close int fd = sys_openat2(imgfd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
                                      RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
    if (fd == -ENOENT && !required) {
        return 0;
    }
    if (fd < 0) {
        return err_set(e, fd, "image %s", rel);
    }
    return mount_replicate(fd, rel, path, e);
}

int mount_tmpfs(const char *path, unsigned long flags, const char *mode, uint64_t size,
                struct err *e)
{
    char opts[96];
    (void)snprintf(opts, sizeof(opts), "mode=%s,size=%llu", mode, (unsigned long long)size);
    if (mount("tmpfs", path, "tmpfs", flags, opts) < 0) {
        return err_set(e, -errno, "mount tmpfs on %s", path);
    }
    return 0;
}

/* A built image's own /etc (its loader cache, alternatives, CA certificates, the config of
 * its tools), each entry a read-only clone, but for the files init generates. The host's
 * /etc is never taken whole: it holds the host's secrets. */
static int mount_image_etc(int imgfd, uint64_t *budget, struct err *e)
{
    int fd = sys_openat2(imgfd, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0,
                         RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
    if (fd == -ENOENT) {
        return 0;
    }
    if (fd < 0) {
        return err_set(e, fd, "image etc");
    }
    scoped(mount_dir_close) struct mount_dir dir = {.fd = fd};
    const struct mount_dirent64 *de;
    int r = 0;
    while ((de = mount_dir_next(&dir, &r))) {
        char rel[128];
        bool skip = false;
        for (size_t i = 0; i < ARRAY_SIZE(mount_etc_generated) && !skip; i++) {
            skip = strcmp(de->name, mount_etc_generated[i]) == 0;
        }
        if (skip) {
            continue;
        }
        if ((size_t)snprintf(rel, sizeof(rel), "etc/%s", de->name) >= sizeof(rel)) {
            return err_setx(e, -ENAMETOOLONG, "image etc/%.32s...: name too long", de->name);
        }
        r = mount_import(imgfd, rel, rel, true, budget, e);
        if (r < 0) {
            return r;
        }
    }
    return r < 0 ? err_set(e, r, "read image etc") : 0;
}

/* /etc/hosts and /etc/hostname name the sandbox (its pool's sandboxes share the name, so
 * a template has them too), written in dir. */
static int mount_names_files(const struct mount_config *cfg, const char *dir, struct err *e)
{
    static const char *const names[] = {"hosts", "hostname"};
    char path[64];
    char buf[256];
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        (void)snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (i == 0) {
            (void)snprintf(buf, sizeof(buf),
                           "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                           "127.0.1.1\t%s\n",
                           cfg->hostname);
        } else {
            (void)snprintf(buf, sizeof(buf), "%s\n", cfg->hostname);
        }
        int r = mount_write_file(path, buf, e);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

static int mount_etc(int imgfd, const struct mount_config *cfg, struct err *e)
{
    char buf[1024];
    int r;

    if (mkdir(STAGE "/etc", 0755) < 0) {
        return err_set(e, -errno, "mkdir /etc");
    }
    (void)snprintf(buf, sizeof(buf),
                   "root:x:0:0:root:/tmp:/bin/sh\n"
                   "sandbox:x:%u:%u:sandbox:/tmp:/bin/sh\n"
                   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
                   cfg->uid, cfg->gid);
    r = mount_write_file(STAGE "/etc/passwd", buf, e);
    if (r < 0) {
        return r;
    }
    (void)snprintf(buf, sizeof(buf), "root:x:0:\nsandbox:x:%u:\nnogroup:x:65534:\n", cfg->gid);
    r = mount_write_file(STAGE "/etc/group", buf, e);
    if (r < 0) {
        return r;
    }
    r = mount_names_files(cfg, STAGE "/etc", e);
    if (r < 0) {
        return r;
    }
    /* An empty /run in a template: where mount_rebase builds a sandbox a root of its own. */
    if (cfg->mode == MOUNT_TEMPLATE && mkdir(STAGE "/run", 0755) < 0) {
        return err_set(e, -errno, "mkdir /run");
    }
    r = mount_write_file(STAGE "/etc/nsswitch.conf",
                         "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"
                         "networks: files\nprotocols: files\nservices: files\n",
                         e);
    if (r < 0) {
        return r;
    }
    /* A template copies (sbxd replaces its fork server when the host's copies change). */
    uint64_t budget = MOUNT_COPY_BYTES;
    uint64_t *copy = cfg->mode == MOUNT_TEMPLATE ? &budget : NULL;
    if (cfg->image_fd >= 0 || strcmp(cfg->image_root, "/") != 0) {
        return mount_image_etc(imgfd, copy, e);
    }
    /* The loader's cache and the alternatives links: without them many tools break. */
    for (size_t i = 0; i < ARRAY_SIZE(mount_etc_files); i++) {
        r = mount_import(imgfd, mount_etc_files[i], mount_etc_files[i], false, copy, e);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* Where the sandbox's own parts go: below STAGE while a root is assembled there, at "/"
 * itself when the root is the template's (MOUNT_FROM_TEMPLATE). */
static const char *mount_at(const struct mount_config *cfg)
{
    return cfg->mode == MOUNT_FROM_TEMPLATE ? "" : STAGE;
}

static int mount_dead_proc_child(void *arg)
{
    (void)arg;
    if (mount("proc", STAGE "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        return 1;
    }
    return 0;
}

/* A template's /proc: the proc of a pid namespace whose only process (a child of ours, in our
 * mount namespace) mounts it and exits, so it lists no process at all. A sandbox's user
 * namespace may mount its own proc only where a proc is fully visible already (the kernel's
 * mount_too_revealing); this one is, and shows nothing of the host's or the fork server's
 * processes, should it ever be uncovered. */
static int mount_dead_proc(struct err *e)
{
    struct sys_clone_args args;
    memset(&args, 0, sizeof(args));
    args.flags = CLONE_NEWPID;
    args.exit_signal = SIGCHLD;
    pid_t pid = sys_clone3_run(&args, mount_dead_proc_child, NULL);
    if (pid < 0) {
        return err_set(e, pid, "clone3 for the template's /proc");
    }
    int st = 0;
    if (RETRY_EINTR(waitpid(pid, &st, 0)) < 0) {
        return err_set(e, -errno, "wait for the template's /proc");
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        return err_setx(e, -EPERM, "mount the template's /proc failed (status 0x%x)", st);
    }
    return 0;
}

/* SECURITY: the sandbox's own boot id, a random (version 4) UUID bound read-only over
 * /proc/sys/kernel/random/boot_id, which would otherwise tell every task the host's boot
 * and which tasks share a host. The file is made in the sandbox's fresh /tmp (the one
 * tmpfs of its own it has at this point) and unlinked once bound: the mount keeps it, and
 * /tmp shows nothing. */
static int mount_boot_id(const struct mount_config *cfg, struct err *e)
{
    unsigned char u[16];
    if (getrandom(u, sizeof(u), 0) != (ssize_t)sizeof(u)) {
        return err_set(e, -errno, "getrandom for the boot id");
    }
    u[6] = (unsigned char)((u[6] & 0x0f) | 0x40);
    u[8] = (unsigned char)((u[8] & 0x3f) | 0x80);
    char text[40];
    size_t n = 0;
    for (size_t i = 0; i < sizeof(u); i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            text[n++] = '-';
        }
        text[n++] = "0123456789abcdef"[u[i] >> 4];
        text[n++] = "0123456789abcdef"[u[i] & 15];
    }
    text[n++] = '\n';
    char file[64], dst[80];
    (void)snprintf(file, sizeof(file), "%s/tmp/.boot_id", mount_at(cfg));
    (void)snprintf(dst, sizeof(dst), "%s/proc/sys/kernel/random/boot_id", mount_at(cfg));
    scoped_close int fd =
        openat(AT_FDCWD, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (fd < 0) {
        return err_set(e, -errno, "create the boot id");
    }
    int r = fd_write_all(fd, text, n);
    if (r < 0) {
        r = err_set(e, r, "write the boot id");
    } else {
        r = mount_attach(fd, dst, ATTR_PROC_RO, e);
    }
    if (unlink(file) < 0 && r == 0) {
        r = err_set(e, -errno, "unlink the boot id's file");
    }
    return r;
}

static int mount_proc(const struct mount_config *cfg, struct err *e)
{
    char path[64];
    if (cfg->mode != MOUNT_FROM_TEMPLATE && mkdir(STAGE "/proc", 0555) < 0) {
        return err_set(e, -errno, "mkdir /proc");
    }
    if (cfg->mode == MOUNT_TEMPLATE) {
        return mount_dead_proc(e);
    }
    /* A proc of our own pid namespace: only the sandbox's processes are visible. Over a
     * template's, the one that lists nothing. */
    (void)snprintf(path, sizeof(path), "%s/proc", mount_at(cfg));
    if (mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        return err_set(e, -errno, "mount proc");
    }
    /* SECURITY: kernel knobs stay read-only even for the namespace's root (init). */
    size_t n_ro =
        cfg->mode == MOUNT_FROM_TEMPLATE ? MOUNT_PROC_RO_USERNS : ARRAY_SIZE(mount_proc_ro);
    for (size_t i = 0; i < n_ro; i++) {
        (void)snprintf(path, sizeof(path), "%s/proc/%s", mount_at(cfg), mount_proc_ro[i]);
        scoped_close int tree =
            sys_open_tree(AT_FDCWD, path,
                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
        if (tree == -ENOENT) {
            continue;
        }
        if (tree < 0) {
            return err_set(e, tree, "open_tree for %s", path);
        }
        int r = mount_attach_tree(tree, path, ATTR_PROC_RO, e);
        if (r < 0) {
            return r;
        }
    }
    return mount_boot_id(cfg, e);
}

/* A writable tmpfs of the sandbox's own at rel (size bytes, mode 1777): its mount point made
 * (mode dir_mode in a template, 01777 else) unless a template has it already; a template
 * has only the mount point, each sandbox mounts its own. */
static int mount_own_tmpfs(const struct mount_config *cfg, const char *rel, mode_t dir_mode,
                           uint64_t size, struct err *e)
{
    char path[64];
    if (cfg->mode != MOUNT_FROM_TEMPLATE) {
        (void)snprintf(path, sizeof(path), STAGE "/%s", rel);
        if (mkdir(path, cfg->mode == MOUNT_TEMPLATE ? dir_mode : 01777) < 0) {
            return err_set(e, -errno, "mkdir /%s", rel);
        }
    }
    if (cfg->mode == MOUNT_TEMPLATE) {
        return 0;
    }
    (void)snprintf(path, sizeof(path), "%s/%s", mount_at(cfg), rel);
    return mount_tmpfs(path, MS_NOSUID | MS_NODEV | MS_NOEXEC, "1777", size, e);
}

static int mount_dev_shm(const struct mount_config *cfg, struct err *e)
{
    return mount_own_tmpfs(cfg, "dev/shm", 01777, cfg->shm_size, e);
}

static int mount_dev(const int *nodes, const struct mount_config *cfg, struct err *e)
{
    static const char *const links[][2] = {{"fd", "/proc/self/fd"},
                                           {"stdin", "/proc/self/fd/0"},
                                           {"stdout", "/proc/self/fd/1"},
                                           {"stderr", "/proc/self/fd/2"}};
    char path[64];
    int r;

    if (mkdir(STAGE "/dev", 0755) < 0) {
        return err_set(e, -errno, "mkdir /dev");
    }
    /* A template is made by the host's root, which may mknod: its /dev is a directory of
     * its root holding the six nodes themselves, six mounts fewer (seven with /dev's own)
     * for every sandbox to copy and tear down. The root has no nodev for them; it is
     * read-only, which its sandboxes' user namespaces cannot change (the kernel locks the
     * flag on mounts it copies into a less privileged namespace), so no other node can
     * appear on it, and everything a sandbox may write (/tmp, /dev/shm) is nodev.
     * Elsewhere /dev is a tmpfs of its own with nodev: only the bound host nodes below are
     * devices. */
    bool mknod_ok = cfg->mode == MOUNT_TEMPLATE;
    if (!mknod_ok) {
        r = mount_tmpfs(STAGE "/dev", MS_NOSUID | MS_NOEXEC | MS_NODEV, "0755", 64 * 1024, e);
        if (r < 0) {
            return r;
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(mount_dev_nodes); i++) {
        (void)snprintf(path, sizeof(path), STAGE "/dev/%s", mount_dev_nodes[i]);
        if (mknod_ok) {
            struct stat st;
            if (fstat(nodes[i], &st) < 0 || mknod(path, S_IFCHR | 0666, st.st_rdev) < 0) {
                return err_set(e, -errno, "mknod %s", path);
            }
            continue;
        }
        /* In a user namespace mknod is refused: bind the host's nodes onto empty files. */
        r = mount_make_file(path, 0666, e);
        if (r == 0) {
            r = mount_attach(nodes[i], path, ATTR_DEVNODE, e);
        }
        if (r < 0) {
            return r;
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
        (void)snprintf(path, sizeof(path), STAGE "/dev/%s", links[i][0]);
        if (symlink(links[i][1], path) < 0) {
            return err_set(e, -errno, "symlink %s", path);
        }
    }
    if (cfg->shm_size > 0) {
        r = mount_dev_shm(cfg, e);
        if (r < 0) {
            return r;
        }
    }
    if (mknod_ok) {
        return 0; /* read-only with the root */
    }
    /* Not recursive: /dev/shm stays writable. */
    r = sys_mount_setattr(AT_FDCWD, STAGE "/dev", 0, MOUNT_ATTR_RDONLY, 0);
    if (r < 0) {
        return err_set(e, r, "read-only /dev");
    }
    return 0;
}

/* Opens the host device nodes we bind, and checks they are character devices. */
static int mount_open_dev_nodes(int *nodes, struct err *e)
{
    for (size_t i = 0; i < ARRAY_SIZE(mount_dev_nodes); i++) {
        char path[32];
        struct stat st;
        (void)snprintf(path, sizeof(path), "/dev/%s", mount_dev_nodes[i]);
        nodes[i] = openat(AT_FDCWD, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (nodes[i] < 0) {
            return err_set(e, -errno, "open host %s", path);
        }
        if (fstat(nodes[i], &st) < 0) {
            return err_set(e, -errno, "stat host %s", path);
        }
        if (!S_ISCHR(st.st_mode)) {
            return err_setx(e, -EINVAL, "host %s is not a character device", path);
        }
    }
    return 0;
}

int mount_pivot_to(const char *dir, bool ro, struct err *e)
{
    if (chdir(dir) < 0) {
        return err_set(e, -errno, "chdir %s", dir);
    }
    /* The old root is stacked on "." and then detached: no path leads back to the host. */
    int r = sys_pivot_root(".", ".");
    if (r < 0) {
        return err_set(e, r, "pivot_root");
    }
    if (umount2(".", MNT_DETACH) < 0) {
        return err_set(e, -errno, "detach old root");
    }
    if (chdir("/") < 0) {
        return err_set(e, -errno, "chdir /");
    }
    r = ro ? sys_mount_setattr(AT_FDCWD, "/", 0, MOUNT_ATTR_RDONLY, 0) : 0;
    if (r < 0) {
        return err_set(e, r, "read-only root");
    }
    return 0;
}

static int mount_pivot(struct err *e)
{
    return mount_pivot_to(STAGE, true, e);
}

/* Attaches sbxd's detached tree of the image at IMAGE_STAGE, where clones of its parts can
 * be made (open_tree clones only mounts of our own namespace), and opens it as *ret. */
static int mount_attach_image(const struct mount_config *cfg, int *ret, struct err *e)
{
    if (mkdir(IMAGE_STAGE, 0700) < 0) {
        return err_set(e, -errno, "mkdir %s", IMAGE_STAGE);
    }
    int r = sys_move_mount(cfg->image_fd, "", AT_FDCWD, IMAGE_STAGE, MOVE_MOUNT_F_EMPTY_PATH);
    if (r < 0) {
        return err_set(e, r, "attach image '%s'", cfg->image_root);
    }
    *ret = openat(AT_FDCWD, IMAGE_STAGE, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*ret < 0) {
        return err_set(e, -errno, "open %s", IMAGE_STAGE);
    }
    return 0;
}

/* The task's /tmp; a template has only the directory. */
static int mount_scratch(const struct mount_config *cfg, struct err *e)
{
    return mount_own_tmpfs(cfg, "tmp", 0755, cfg->tmp_size, e);
}

/* The task's workspace /work (work_size bytes, mode 0755), owned by the task's user so
 * that it, and only it, writes there; noexec, nosuid and nodev like /tmp. A template has
 * only the directory. */
static int mount_workspace(const struct mount_config *cfg, struct err *e)
{
    char path[64];
    if (cfg->mode != MOUNT_FROM_TEMPLATE && mkdir(STAGE "/work", 0755) < 0) {
        return err_set(e, -errno, "mkdir /work");
    }
    if (cfg->mode == MOUNT_TEMPLATE) {
        return 0;
    }
    (void)snprintf(path, sizeof(path), "%s/work", mount_at(cfg));
    char opts[128];
    (void)snprintf(opts, sizeof(opts), "mode=0755,uid=%u,gid=%u,size=%llu", cfg->uid, cfg->gid,
                   (unsigned long long)cfg->work_size);
    if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0) {
        return err_set(e, -errno, "mount tmpfs on %s", path);
    }
    /* For sbxd, which writes and reads the task's files through it (CTL_READY): the
     * tmpfs's own root, whatever is mounted or pivoted later. */
    if (cfg->work_fd) {
        *cfg->work_fd = openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (*cfg->work_fd < 0) {
            return err_set(e, -errno, "open %s", path);
        }
    }
    return 0;
}

/* A sandbox forked from its fork server keeps the template as its root, which its user
 * namespace cannot change (the kernel locks read-only what a more privileged namespace
 * mounted), and mounts only its own parts: /tmp, /work, /proc, /dev/shm. A task's mount points
 * outside /tmp get a root of the sandbox's own first (mount_rebase). */
static int mount_from_template(const struct mount_config *cfg, struct err *e)
{
    int r = mount_scratch(cfg, e);
    if (r == 0) {
        r = mount_workspace(cfg, e);
    }
    if (r == 0) {
        r = mount_proc(cfg, e);
    }
    if (r == 0 && cfg->shm_size > 0) {
        r = mount_dev_shm(cfg, e);
    }
    if (r == 0 && chdir("/") < 0) {
        r = err_set(e, -errno, "chdir /");
    }
    return r;
}

static int mount_build(const struct mount_config *cfg, int *nodes, struct err *e)
{
    int r;

    /* Opened before anything is mounted over STAGE, which may contain the image. A built
     * image comes from sbxd as a detached tree instead, attached below. */
    scoped_close int imgfd = -1;
    if (cfg->image_fd < 0) {
        imgfd = openat(AT_FDCWD, cfg->image_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (imgfd < 0) {
            return err_set(e, -errno, "image root '%s'", cfg->image_root);
        }
    }
    /* SECURITY: without a user namespace our copies of the host's mounts are still in its
     * peer groups; nothing mounted below may propagate back. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        return err_set(e, -errno, "make / private");
    }
    r = mount_open_dev_nodes(nodes, e);
    if (r < 0) {
        return r;
    }
    /* A template's holds copies of /etc (MOUNT_COPY_BYTES at most). */
    uint64_t root_size = 1024 * 1024;
    if (cfg->mode == MOUNT_TEMPLATE) {
        root_size += MOUNT_COPY_BYTES;
    }
    /* A template's root has no nodev: its /dev is a directory of it (mount_dev). */
    unsigned long nodev = cfg->mode == MOUNT_TEMPLATE ? 0 : MS_NODEV;
    r = mount_tmpfs(STAGE, MS_NOSUID | nodev | MS_NOEXEC, "0755", root_size, e);
    if (r < 0) {
        return err_prefix(e, r, "new root");
    }
    if (cfg->image_fd >= 0) {
        r = mount_attach_image(cfg, &imgfd, e);
        if (r < 0) {
            return r;
        }
    }
    r = mount_import(imgfd, "usr", "usr", true, NULL, e);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < ARRAY_SIZE(mount_lib_dirs); i++) {
        r = mount_import(imgfd, mount_lib_dirs[i], mount_lib_dirs[i], false, NULL, e);
        if (r < 0) {
            return r;
        }
    }
    r = mount_etc(imgfd, cfg, e);
    if (r < 0) {
        return r;
    }
    if (cfg->image_fd >= 0) {
        /* Everything needed is cloned from it: the image's own tree goes again. */
        imgfd = fd_close(imgfd);
        if (umount2(IMAGE_STAGE, MNT_DETACH) < 0 || rmdir(IMAGE_STAGE) < 0) {
            return err_set(e, -errno, "detach the image from %s", IMAGE_STAGE);
        }
    }
    r = mount_scratch(cfg, e);
    if (r < 0) {
        return r;
    }
    r = mount_workspace(cfg, e);
    if (r < 0) {
        return r;
    }
    r = mount_proc(cfg, e);
    if (r < 0) {
        return r;
    }
    r = mount_dev(nodes, cfg, e);
    if (r < 0) {
        return r;
    }
    return mount_pivot(e);
}

int mount_setup(const struct mount_config *cfg, struct err *e)
{
    int nodes[ARRAY_SIZE(mount_dev_nodes)];
    for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
        nodes[i] = -1;
    }
    if (cfg->image_root[0] != '/' || cfg->tmp_size == 0 || cfg->work_size == 0) {
        return err_setx(e, -EINVAL, "bad mount config");
    }
    /* Modes below are exact, whatever umask sbxd passed down. */
    mode_t old = umask(0);
    int r =
        cfg->mode == MOUNT_FROM_TEMPLATE ? mount_from_template(cfg, e) : mount_build(cfg, nodes, e);
    (void)umask(old);
    for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
        nodes[i] = fd_close(nodes[i]);
    }
    return r;
}
