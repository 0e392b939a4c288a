/* SPDX-License-Identifier: MIT */
/* A sandbox's /work written, read and listed by sbxd, as root, on worker threads, in a tree a
 * hostile task built: every path opened beneath the root with symlinks, magic links and
 * mounts refused, and every type checked before the open and again on the fd (the collect's
 * walk is workspace_collect.c). It never opens a FIFO, socket or device, never follows a
 * symlink, never blocks on what the task left, and never runs on the loop. */
#include "sandbox/workspace_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/sys.h"
#include "lib/util.h"
#include "wire/wspath.h"

#ifndef RESOLVE_NO_XDEV
#define RESOLVE_NO_XDEV 0x01 /* linux 5.6 */
#endif
#ifndef RESOLVE_NO_SYMLINKS
#define RESOLVE_NO_SYMLINKS 0x04 /* linux 5.6 */
#endif
#ifndef RESOLVE_BENEATH
#define RESOLVE_BENEATH 0x08 /* linux 5.6 */
#endif

/* SECURITY: every path below the root resolves inside it, through no symlink, magic link or
 * mount point; a ".." that would leave is -EXDEV. */
#define WS_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/* O_NOFOLLOW but for directories: with O_DIRECTORY the kernel answers a trailing symlink
 * with ENOTDIR, where RESOLVE_NO_SYMLINKS, which refuses it as well, says ELOOP. */
int workspace_open_beneath(int dfd, const char *path, int flags, mode_t mode)
{
    if (!(flags & O_DIRECTORY)) {
        flags |= O_NOFOLLOW;
    }
    return sys_openat2(dfd, path, (uint64_t)(flags | O_CLOEXEC | O_NOCTTY), mode, WS_RESOLVE);
}

/* The callers normalized rel; this keeps a caller's mistake from becoming a path that means
 * something else. */
bool workspace_rel_ok(const char *rel)
{
    size_t len = strnlen(rel, PATH_MAX);
    if (len == 0 || len >= PATH_MAX) {
        return false;
    }
    const char *c = rel;
    for (;;) {
        const char *slash = strchr(c, '/');
        size_t n = slash ? (size_t)(slash - c) : strlen(c);
        if (n == 0 || n > WSPATH_COMPONENT_MAX || (n == 1 && c[0] == '.') ||
            (n == 2 && c[0] == '.' && c[1] == '.')) {
            return false;
        }
        if (!slash) {
            return true;
        }
        c = slash + 1;
    }
}

/* The refusal of what is not a regular file, by its type. */
static int not_regular(mode_t m)
{
    if (S_ISDIR(m)) {
        return -EISDIR;
    }
    if (S_ISLNK(m)) {
        return -ELOOP;
    }
    return -ENXIO;
}

/* Opens rel's parent directory (the root itself for a single component) and points *base
 * at rel's last component. */
static int open_parent(int root, const char *rel, const char **base)
{
    const char *slash = strrchr(rel, '/');
    if (!slash) {
        *base = rel;
        return workspace_open_beneath(root, ".", O_RDONLY | O_DIRECTORY, 0);
    }
    char dir[PATH_MAX];
    size_t n = (size_t)(slash - rel);
    memcpy(dir, rel, n);
    dir[n] = '\0';
    *base = slash + 1;
    return workspace_open_beneath(root, dir, O_RDONLY | O_DIRECTORY, 0);
}

/* Opens the existing regular file rel with flags (O_RDONLY or O_WRONLY): its type is read
 * without following a symlink before the open, so a FIFO or device is never opened, and
 * again on the open fd, for what was swapped in between. */
static int open_regular(int root, const char *rel, int flags, int *ret_fd, struct stat *ret_st,
                        struct err *e)
{
    struct stat st;
    if (!workspace_rel_ok(rel)) {
        return err_setx(e, -EINVAL, "'%s': not a normalized workspace path", rel);
    }
    const char *base = NULL;
    scoped_close int dfd = open_parent(root, rel, &base);
    if (dfd < 0) {
        return err_set(e, dfd, "'%s': its directory", rel);
    }
    if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        return err_set(e, -errno, "'%s'", rel);
    }
    if (!S_ISREG(st.st_mode)) {
        return err_setx(e, not_regular(st.st_mode), "'%s': not a regular file", rel);
    }
    scoped_close int fd = workspace_open_beneath(dfd, base, flags | O_NONBLOCK, 0);
    if (fd < 0) {
        return err_set(e, fd, "'%s'", rel);
    }
    if (fstat(fd, &st) < 0) {
        return err_set(e, -errno, "'%s': fstat", rel);
    }
    if (!S_ISREG(st.st_mode)) {
        return err_setx(e, not_regular(st.st_mode), "'%s': not a regular file", rel);
    }
    *ret_st = st;
    *ret_fd = take_fd(&fd);
    return 0;
}

/* Makes (or enters) the directory name under dfd: a new one is owned by uid:gid, mode 0755
 * whatever the umask. Returns its fd or -errno. */
static int mkdir_one(int dfd, const char *name, uid_t uid, gid_t gid)
{
    bool made = mkdirat(dfd, name, 0755) == 0;
    if (!made && errno != EEXIST) {
        return -errno;
    }
    /* SECURITY: what is there (or was put there since) is entered only if it is a real
     * directory: a symlink is -ELOOP, anything else -ENOTDIR. */
    int fd = workspace_open_beneath(dfd, name, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0 || !made) {
        return fd;
    }
    if (fchown(fd, uid, gid) < 0 || fchmod(fd, 0755) < 0) {
        int r = -errno;
        fd_close(fd);
        return r;
    }
    return fd;
}

struct workspace_ids workspace_as_task(uid_t uid, gid_t gid)
{
    struct workspace_ids old = {.gid = (gid_t)setfsgid(gid)};
    old.uid = (uid_t)setfsuid(uid);
    return old;
}

void workspace_as_sbxd(struct workspace_ids saved)
{
    (void)setfsuid(saved.uid);
    (void)setfsgid(saved.gid);
}

int workspace_create(int root, const char *rel, uint32_t mode, uid_t uid, gid_t gid, int *ret_fd,
                     struct err *e)
{
    struct stat st;
    if (mode > 0777) {
        return err_setx(e, -EINVAL, "'%s': mode %o is more than permission bits", rel, mode);
    }
    if (!workspace_rel_ok(rel)) {
        return err_setx(e, -EINVAL, "'%s': not a normalized workspace path", rel);
    }
    scoped_close int dfd = workspace_open_beneath(root, ".", O_RDONLY | O_DIRECTORY, 0);
    if (dfd < 0) {
        return err_set(e, dfd, "the workspace's root");
    }
    char comp[WSPATH_COMPONENT_MAX + 1];
    const char *c = rel;
    for (const char *slash; (slash = strchr(c, '/')) != NULL; c = slash + 1) {
        size_t n = (size_t)(slash - c);
        memcpy(comp, c, n);
        comp[n] = '\0';
        int sub = mkdir_one(dfd, comp, uid, gid);
        if (sub < 0) {
            return err_set(e, sub, "'%s': directory '%.*s'", rel, (int)(slash - rel), rel);
        }
        fd_close(dfd);
        dfd = sub;
    }
    if (fstatat(dfd, c, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
        return err_setx(e, not_regular(st.st_mode), "'%s': exists and is not a regular file", rel);
    }
    /* O_NONBLOCK: a FIFO swapped in since the fstatat is ENXIO without a reader instead of a
     * wait for one; with one it is refused by the fstat below. */
    scoped_close int fd = workspace_open_beneath(dfd, c, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK,
                                                 (mode_t)(mode & 0700));
    if (fd < 0) {
        return err_set(e, fd, "'%s': create", rel);
    }
    if (fstat(fd, &st) < 0) {
        return err_set(e, -errno, "'%s': fstat", rel);
    }
    if (!S_ISREG(st.st_mode)) {
        return err_setx(e, not_regular(st.st_mode), "'%s': exists and is not a regular file", rel);
    }
    /* The owner first: a chown by root may clear mode bits, so the exact mode comes last. */
    if (fchown(fd, uid, gid) < 0) {
        return err_set(e, -errno, "'%s': fchown", rel);
    }
    if (fchmod(fd, (mode_t)mode) < 0) {
        return err_set(e, -errno, "'%s': fchmod", rel);
    }
    int r = fd_set_nonblock(fd, false);
    if (r < 0) {
        return err_set(e, r, "'%s': fcntl", rel);
    }
    *ret_fd = take_fd(&fd);
    return 0;
}

int workspace_open_at(int root, const char *rel, int *ret_fd, struct err *e)
{
    struct stat st;
    int fd = -1;
    int r = open_regular(root, rel, O_WRONLY, &fd, &st, e);
    if (r < 0) {
        return r;
    }
    r = fd_set_nonblock(fd, false);
    if (r < 0) {
        fd_close(fd);
        return err_set(e, r, "'%s': fcntl", rel);
    }
    *ret_fd = fd;
    return 0;
}

ssize_t workspace_read_at(int fd, char *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        if (off + got > (uint64_t)INT64_MAX) {
            break;
        }
        ssize_t n = RETRY_EINTR(pread(fd, buf + got, len - got, (off_t)(off + got)));
        if (n < 0) {
            return -errno;
        }
        if (n == 0) {
            break;
        }
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int workspace_read(int root, const char *rel, uint64_t off, size_t len, char *buf, size_t *got,
                   uint64_t *size, struct err *e)
{
    struct stat st;
    scoped_close int fd = -1;
    int r = open_regular(root, rel, O_RDONLY, &fd, &st, e);
    if (r < 0) {
        return r;
    }
    ssize_t n = 0;
    if (off < (uint64_t)st.st_size) {
        n = workspace_read_at(fd, buf, len, off);
        if (n < 0) {
            return err_set(e, (int)n, "'%s': read", rel);
        }
    }
    *got = (size_t)n;
    *size = (uint64_t)st.st_size;
    return 0;
}

const char *workspace_type_name(char type)
{
    switch (type) {
    case WORKSPACE_FILE:
        return "file";
    case WORKSPACE_DIR:
        return "dir";
    case WORKSPACE_SYMLINK:
        return "symlink";
    default:
        return "other";
    }
}

static char type_of(mode_t m)
{
    if (S_ISREG(m)) {
        return WORKSPACE_FILE;
    }
    if (S_ISDIR(m)) {
        return WORKSPACE_DIR;
    }
    if (S_ISLNK(m)) {
        return WORKSPACE_SYMLINK;
    }
    return WORKSPACE_OTHER;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct workspace_entry *)a)->name,
                  ((const struct workspace_entry *)b)->name);
}

void workspace_closedirp(DIR **d)
{
    if (*d) {
        closedir(*d);
    }
}

DIR *workspace_dir_open(int dfd)
{
    int copy = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    if (copy < 0) {
        return NULL;
    }
    DIR *d = fdopendir(copy);
    if (!d) {
        int r = errno;
        fd_close(copy);
        errno = r;
    }
    return d;
}

bool workspace_dot_name(const char *n)
{
    return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

int workspace_list(int root, const char *rel, size_t max, struct workspace_entry **ret, size_t *n,
                   bool *truncated, struct err *e)
{
    bool self = rel[0] == '\0' || strcmp(rel, ".") == 0;
    if (!self && !workspace_rel_ok(rel)) {
        return err_setx(e, -EINVAL, "'%s': not a normalized workspace path", rel);
    }
    /* O_DIRECTORY: anything but a directory is refused before it is opened. */
    scoped_close int dfd =
        workspace_open_beneath(root, self ? "." : rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
    if (dfd < 0) {
        return err_set(e, dfd, "'%s'", self ? "/work" : rel);
    }
    scoped(workspace_closedirp) DIR *d = workspace_dir_open(dfd);
    if (!d) {
        return err_set(e, -errno, "'%s': opendir", rel);
    }
    struct workspace_entry *v = NULL;
    size_t count = 0;
    size_t cap = 0;
    bool more = false;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno != 0) {
                int r = -errno;
                workspace_entries_free(v, count);
                return err_set(e, r, "'%s': readdir", rel);
            }
            break;
        }
        if (workspace_dot_name(de->d_name)) {
            continue;
        }
        if (count == max) {
            more = true;
            break;
        }
        struct stat st;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            continue; /* vanished since readdir */
        }
        if (count == cap) {
            cap = cap ? cap * 2 : 64;
            v = xrealloc(v, cap * sizeof(*v));
        }
        v[count++] = (struct workspace_entry){
            .name = xstrdup(de->d_name),
            .type = type_of(st.st_mode),
            .size = (uint64_t)st.st_size,
            .mode = (uint32_t)(st.st_mode & 07777),
        };
    }
    if (count > 1) {
        qsort(v, count, sizeof(*v), entry_cmp);
    }
    *ret = v;
    *n = count;
    *truncated = more;
    return 0;
}

void workspace_entries_free(struct workspace_entry *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].name);
    }
    free(v);
}
