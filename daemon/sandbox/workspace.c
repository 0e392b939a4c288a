/* SPDX-License-Identifier: MIT */
/* A sandbox's /work read and written by sbxd, as root, on worker threads, over a tree a
 * hostile task built: every path opened beneath the root with symlinks, magic links and
 * mounts refused, every type checked on the open fd, and every walk bounded in bytes, files,
 * depth, entries and skip records. It never opens a FIFO, socket or device, never follows a
 * symlink, never blocks on what the task left, and never runs on the loop. */
#include "sandbox/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
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

/* O_NOFOLLOW too, but for directories: with O_DIRECTORY the kernel answers a trailing
 * symlink with ENOTDIR, where RESOLVE_NO_SYMLINKS, which refuses it as well, says ELOOP. */
static int ws_open(int dfd, const char *path, int flags, mode_t mode)
{
    if (!(flags & O_DIRECTORY)) {
        flags |= O_NOFOLLOW;
    }
    return sys_openat2(dfd, path, (uint64_t)(flags | O_CLOEXEC | O_NOCTTY), mode, WS_RESOLVE);
}

/* Whether rel is in wspath_normalize's form: non-empty components of at most NAME_MAX bytes,
 * none "." or "..", separated by single '/'. The callers normalized it; this keeps a caller's
 * mistake from becoming a path that means something else. */
static bool rel_ok(const char *rel)
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
        return ws_open(root, ".", O_RDONLY | O_DIRECTORY, 0);
    }
    char dir[PATH_MAX];
    size_t n = (size_t)(slash - rel);
    memcpy(dir, rel, n);
    dir[n] = '\0';
    *base = slash + 1;
    return ws_open(root, dir, O_RDONLY | O_DIRECTORY, 0);
}

/* Opens the existing regular file rel with flags (O_RDONLY or O_WRONLY): its type is read
 * without following a symlink before the open, so a FIFO or device is never opened, and
 * again on the open fd, for what was swapped in between. */
static int open_regular(int root, const char *rel, int flags, int *ret_fd, struct stat *ret_st,
                        struct err *e)
{
    struct stat st;
    if (!rel_ok(rel)) {
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
    scoped_close int fd = ws_open(dfd, base, flags | O_NONBLOCK, 0);
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
    int fd = ws_open(dfd, name, O_RDONLY | O_DIRECTORY, 0);
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

int workspace_create(int root, const char *rel, uint32_t mode, uid_t uid, gid_t gid, int *ret_fd,
                     struct err *e)
{
    struct stat st;
    if (mode > 0777) {
        return err_setx(e, -EINVAL, "'%s': mode %o is more than permission bits", rel, mode);
    }
    if (!rel_ok(rel)) {
        return err_setx(e, -EINVAL, "'%s': not a normalized workspace path", rel);
    }
    scoped_close int dfd = ws_open(root, ".", O_RDONLY | O_DIRECTORY, 0);
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
    scoped_close int fd =
        ws_open(dfd, c, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK, (mode_t)(mode & 0700));
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

/* Reads up to len bytes at off; fewer only at the end of the file. */
static ssize_t read_at(int fd, char *buf, size_t len, uint64_t off)
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
        n = read_at(fd, buf, len, off);
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

static void closedirp(DIR **d)
{
    if (*d) {
        closedir(*d);
    }
}

/* A DIR over its own copy of dfd (dfd stays the caller's, for the *at calls). */
static DIR *dir_open(int dfd)
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

static bool dot_or_dotdot(const char *n)
{
    return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

int workspace_list(int root, const char *rel, size_t max, struct workspace_entry **ret, size_t *n,
                   bool *truncated, struct err *e)
{
    bool self = rel[0] == '\0' || strcmp(rel, ".") == 0;
    if (!self && !rel_ok(rel)) {
        return err_setx(e, -EINVAL, "'%s': not a normalized workspace path", rel);
    }
    /* O_DIRECTORY: anything but a directory is refused before it is opened. */
    scoped_close int dfd = ws_open(root, self ? "." : rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
    if (dfd < 0) {
        return err_set(e, dfd, "'%s'", self ? "/work" : rel);
    }
    scoped(closedirp) DIR *d = dir_open(dfd);
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
        if (dot_or_dotdot(de->d_name)) {
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

/* One directory of the walk: its fd, the length of its path in walk.path, and the names of
 * its entries that a pattern could concern, sorted, with the next one to look at. */
struct frame {
    int fd;
    size_t path_len;
    char **names;
    size_t n;
    size_t next;
};

struct walk {
    const char *const *pats;
    size_t n_pats;
    struct workspace_limits lim;
    struct workspace_collect c;
    size_t files_cap;
    size_t skipped_cap;
    uint64_t entries;
    bool stop; /* a bound was met: no directory is read any more */
    /* The path of what is looked at, relative to the root; room for WORKSPACE_DEPTH_LIMIT + 1
     * components of WSPATH_COMPONENT_MAX bytes. */
    char *path;
};

#define WALK_PATH_SIZE ((size_t)(WORKSPACE_DEPTH_LIMIT + 2) * (WSPATH_COMPONENT_MAX + 1))

static void add_skip(struct walk *w, const char *path, const char *reason)
{
    if (w->c.n_skipped >= w->lim.max_skipped) {
        return;
    }
    if (w->c.n_skipped == w->skipped_cap) {
        w->skipped_cap = w->skipped_cap ? w->skipped_cap * 2 : 8;
        w->c.skipped = xrealloc(w->c.skipped, w->skipped_cap * sizeof(*w->c.skipped));
    }
    w->c.skipped[w->c.n_skipped++] =
        (struct workspace_skip){.path = xstrdup(path[0] ? path : "."), .reason = reason};
}

static bool any_match(const struct walk *w, const char *rel)
{
    for (size_t i = 0; i < w->n_pats; i++) {
        if (wspath_match(w->pats[i], rel)) {
            return true;
        }
    }
    return false;
}

static bool any_under(const struct walk *w, const char *dir)
{
    for (size_t i = 0; i < w->n_pats; i++) {
        if (wspath_match_dir(w->pats[i], dir)) {
            return true;
        }
    }
    return false;
}

/* Sets w->path to the directory's path (len bytes) + "/" + name; returns the new length. */
static size_t path_push(struct walk *w, size_t len, const char *name)
{
    size_t n = strlen(name);
    size_t o = len;
    if (o > 0) {
        w->path[o++] = '/';
    }
    memcpy(w->path + o, name, n);
    o += n;
    w->path[o] = '\0';
    return o;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads the directory at f->fd (path w->path, f->path_len bytes) into f->names: the entries
 * a pattern matches or could match under, each counted against max_entries. */
static void read_dir(struct walk *w, struct frame *f)
{
    size_t cap = 0;
    scoped(closedirp) DIR *d = dir_open(f->fd);
    w->path[f->path_len] = '\0';
    if (!d) {
        add_skip(w, w->path, "unreadable");
        return;
    }
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno != 0) {
                w->path[f->path_len] = '\0';
                add_skip(w, w->path, "unreadable");
            }
            break;
        }
        if (dot_or_dotdot(de->d_name)) {
            continue;
        }
        if (w->entries >= w->lim.max_entries) {
            w->path[f->path_len] = '\0';
            add_skip(w, w->path, "too_many_entries");
            w->c.truncated = true;
            w->stop = true;
            break;
        }
        w->entries++;
        path_push(w, f->path_len, de->d_name);
        if (!any_match(w, w->path) && !any_under(w, w->path)) {
            continue;
        }
        if (f->n == cap) {
            cap = cap ? cap * 2 : 16;
            f->names = xrealloc(f->names, cap * sizeof(*f->names));
        }
        f->names[f->n++] = xstrdup(de->d_name);
    }
    if (f->n > 1) {
        qsort(f->names, f->n, sizeof(*f->names), name_cmp);
    }
}

static const char *skip_reason(mode_t m)
{
    if (S_ISLNK(m)) {
        return "symlink";
    }
    if (S_ISFIFO(m)) {
        return "fifo";
    }
    if (S_ISSOCK(m)) {
        return "socket";
    }
    if (S_ISCHR(m) || S_ISBLK(m)) {
        return "device";
    }
    return "unreadable";
}

static const char *open_failure(int r)
{
    switch (r) {
    case -ENOENT:
    case -ENOTDIR:
        return "vanished";
    case -ELOOP:
        return "symlink";
    default:
        return "unreadable";
    }
}

static void add_file(struct walk *w, struct workspace_file file)
{
    if (w->c.n_files == w->files_cap) {
        w->files_cap = w->files_cap ? w->files_cap * 2 : 16;
        w->c.files = xrealloc(w->c.files, w->files_cap * sizeof(*w->c.files));
    }
    w->c.files[w->c.n_files++] = file;
    w->c.bytes += file.len;
    if (file.truncated) {
        w->c.truncated = true;
    }
}

/* Reads the regular file name of directory dfd (path w->path) within what is left of the
 * bounds. */
static void collect_file(struct walk *w, int dfd, const char *name)
{
    struct stat st;
    if (w->c.n_files >= w->lim.max_files) {
        add_skip(w, w->path, "file_limit");
        w->c.truncated = true;
        w->stop = true;
        return;
    }
    /* SECURITY: O_NONBLOCK and the type on the fd: what was swapped in since the fstatat is
     * refused (a symlink by the open itself) before a byte is read. */
    scoped_close int fd = ws_open(dfd, name, O_RDONLY | O_NONBLOCK, 0);
    if (fd < 0) {
        add_skip(w, w->path, open_failure(fd));
        return;
    }
    if (fstat(fd, &st) < 0) {
        add_skip(w, w->path, "unreadable");
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        add_skip(w, w->path, skip_reason(st.st_mode));
        return;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint64_t left = w->lim.max_bytes - w->c.bytes;
    if (size > 0 && left == 0) {
        add_skip(w, w->path, "collect_limit");
        w->c.truncated = true;
        return;
    }
    /* A file that grows while read is read to the size it had at open; the cap bounds the
     * buffer whatever the size says (a sparse file's holes read as zeros). */
    size_t cap = (size_t)(size < left ? size : left);
    scoped_free char *data = cap ? xmalloc(cap) : NULL;
    ssize_t got = cap ? read_at(fd, data, cap, 0) : 0;
    if (got < 0) {
        add_skip(w, w->path, "unreadable");
        return;
    }
    bool truncated = false;
    if ((size_t)got < cap) {
        /* It shrank: what is there is all of it. */
        size = (uint64_t)got;
        if (got == 0) {
            free(take_ptr(&data));
        } else {
            data = xrealloc(data, (size_t)got);
        }
    } else {
        truncated = cap < size;
    }
    add_file(w, (struct workspace_file){
                    .path = xstrdup(w->path),
                    .mode = (uint32_t)(st.st_mode & 07777),
                    .size = size,
                    .data = take_ptr(&data),
                    .len = (size_t)got,
                    .truncated = truncated,
                });
}

static int file_cmp(const void *a, const void *b)
{
    return strcmp(((const struct workspace_file *)a)->path,
                  ((const struct workspace_file *)b)->path);
}

static int skip_cmp(const void *a, const void *b)
{
    return strcmp(((const struct workspace_skip *)a)->path,
                  ((const struct workspace_skip *)b)->path);
}

static void frame_clear(struct frame *f)
{
    f->fd = fd_close(f->fd);
    for (size_t i = 0; i < f->n; i++) {
        free(f->names[i]);
    }
    free(f->names);
    *f = (struct frame){.fd = -1};
}

/* Looks at the next entry of the top frame; may push a frame for a directory to enter. */
static void walk_entry(struct walk *w, struct frame *stack, size_t *depth)
{
    struct frame *f = &stack[*depth];
    struct stat st;
    const char *name = f->names[f->next++];
    path_push(w, f->path_len, name);
    if (fstatat(f->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        add_skip(w, w->path, errno == ENOENT ? "vanished" : "unreadable");
        return;
    }
    bool match = any_match(w, w->path);
    if (S_ISREG(st.st_mode)) {
        if (match) {
            collect_file(w, f->fd, name);
        }
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        if (w->stop || !any_under(w, w->path)) {
            return;
        }
        if (*depth + 1 > w->lim.max_depth) {
            add_skip(w, w->path, "directory_too_deep");
            w->c.truncated = true;
            return;
        }
        int fd = ws_open(f->fd, name, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
        if (fd < 0) {
            add_skip(w, w->path, open_failure(fd));
            return;
        }
        struct frame *sub = &stack[++*depth];
        *sub = (struct frame){.fd = fd, .path_len = strlen(w->path)};
        read_dir(w, sub);
        return;
    }
    /* A symlink is reported where a pattern matches it or could match under it; the other
     * types where one matches them. */
    if (match || (S_ISLNK(st.st_mode) && any_under(w, w->path))) {
        add_skip(w, w->path, skip_reason(st.st_mode));
    }
}

int workspace_collect(int root, const char *const *patterns, size_t n,
                      const struct workspace_limits *lim, struct workspace_collect *ret,
                      struct err *e)
{
    struct walk w = {.pats = patterns, .n_pats = n, .lim = *lim};
    if (w.lim.max_depth == 0) {
        w.lim.max_depth = WORKSPACE_MAX_DEPTH;
    }
    if (w.lim.max_depth > WORKSPACE_DEPTH_LIMIT) {
        w.lim.max_depth = WORKSPACE_DEPTH_LIMIT;
    }
    if (w.lim.max_entries == 0) {
        w.lim.max_entries = WORKSPACE_MAX_ENTRIES;
    }
    if (w.lim.max_skipped == 0) {
        w.lim.max_skipped = WORKSPACE_MAX_SKIPPED;
    }
    int fd = ws_open(root, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
    if (fd < 0) {
        return err_set(e, fd, "the workspace's root");
    }
    scoped_free struct frame *stack = xcalloc(w.lim.max_depth + 1, sizeof(*stack));
    scoped_free char *path = xmalloc(WALK_PATH_SIZE);
    w.path = path;
    w.path[0] = '\0';
    size_t depth = 0;
    stack[0] = (struct frame){.fd = fd, .path_len = 0};
    if (n > 0) {
        read_dir(&w, &stack[0]);
    }
    /* Depth first and iterative: at most max_depth + 1 directories are open at once. */
    for (;;) {
        struct frame *f = &stack[depth];
        if (f->next < f->n) {
            walk_entry(&w, stack, &depth);
            continue;
        }
        frame_clear(f);
        if (depth == 0) {
            break;
        }
        depth--;
    }
    if (w.c.n_files > 1) {
        qsort(w.c.files, w.c.n_files, sizeof(*w.c.files), file_cmp);
    }
    if (w.c.n_skipped > 1) {
        qsort(w.c.skipped, w.c.n_skipped, sizeof(*w.c.skipped), skip_cmp);
    }
    *ret = w.c;
    return 0;
}

void workspace_collect_free(struct workspace_collect *c)
{
    if (!c) {
        return;
    }
    for (size_t i = 0; i < c->n_files; i++) {
        free(c->files[i].path);
        free(c->files[i].data);
    }
    free(c->files);
    for (size_t i = 0; i < c->n_skipped; i++) {
        free(c->skipped[i].path);
    }
    free(c->skipped);
    *c = (struct workspace_collect){0};
}
