/* SPDX-License-Identifier: MIT */
/* The walk of workspace_collect: a sandbox's /work searched for a collect's patterns, depth
 * first and iteratively, inside every bound (bytes, files, depth, entries, skip records),
 * each file opened beneath its directory and its type checked on the fd. It never follows a
 * symlink, never opens a FIFO, socket or device, and never blocks on what the task left. */
#include "sandbox/workspace_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/util.h"
#include "wire/wspath.h"

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

/* Counts one more entry read; false when that is one over max_entries (the walk stops). */
static bool count_entry(struct walk *w, const struct frame *f)
{
    if (w->entries >= w->lim.max_entries) {
        w->path[f->path_len] = '\0';
        add_skip(w, w->path, "too_many_entries");
        w->c.truncated = true;
        w->stop = true;
        return false;
    }
    w->entries++;
    return true;
}

static void frame_add(struct frame *f, size_t *cap, const char *name)
{
    if (f->n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        f->names = xrealloc(f->names, *cap * sizeof(*f->names));
    }
    f->names[f->n++] = xstrdup(name);
}

/* The most names the patterns may spell out for one directory before it is read instead. */
#define WALK_NAMES_MAX 64

/* When every pattern spells out the names it needs in the directory at f->fd (a literal
 * path, or the literal part of a pattern), looks only those up: a directory of a million
 * entries beside them costs nothing then. Returns false when the directory must be read. */
static bool read_names(struct walk *w, struct frame *f)
{
    struct wspath_name v[WALK_NAMES_MAX];
    size_t n = 0;
    size_t cap = 0;
    w->path[f->path_len] = '\0';
    for (size_t i = 0; i < w->n_pats; i++) {
        int r = wspath_dir_names(w->pats[i], w->path, v + n, WALK_NAMES_MAX - n);
        if (r < 0) {
            return false;
        }
        n += (size_t)r;
    }
    for (size_t i = 0; i < n; i++) {
        char name[WSPATH_COMPONENT_MAX + 1];
        bool again = false;
        for (size_t j = 0; j < i && !again; j++) {
            again = v[j].len == v[i].len && memcmp(v[j].p, v[i].p, v[i].len) == 0;
        }
        if (again || v[i].len > WSPATH_COMPONENT_MAX) {
            continue;
        }
        memcpy(name, v[i].p, v[i].len);
        name[v[i].len] = '\0';
        if (workspace_dot_name(name)) {
            continue;
        }
        if (!count_entry(w, f)) {
            break;
        }
        struct stat st;
        if (fstatat(f->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            frame_add(f, &cap, name);
        }
    }
    if (f->n > 1) {
        qsort(f->names, f->n, sizeof(*f->names), name_cmp);
    }
    return true;
}

/* Reads the directory at f->fd (path w->path, f->path_len bytes) into f->names: the entries
 * a pattern matches or could match under, each counted against max_entries. */
static void read_dir(struct walk *w, struct frame *f)
{
    size_t cap = 0;
    if (read_names(w, f)) {
        return;
    }
    scoped(workspace_closedirp) DIR *d = workspace_dir_open(f->fd);
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
        if (workspace_dot_name(de->d_name)) {
            continue;
        }
        if (!count_entry(w, f)) {
            break;
        }
        path_push(w, f->path_len, de->d_name);
        if (!any_match(w, w->path) && !any_under(w, w->path)) {
            continue;
        }
        frame_add(f, &cap, de->d_name);
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
    scoped_close int fd = workspace_open_beneath(dfd, name, O_RDONLY | O_NONBLOCK, 0);
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
    ssize_t got = cap ? workspace_read_at(fd, data, cap, 0) : 0;
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
        int fd = workspace_open_beneath(f->fd, name, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
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
    for (size_t i = 0; i < n; i++) {
        /* SECURITY: a pattern's literal names are looked up as they are: none may be "..". */
        if (!workspace_rel_ok(patterns[i])) {
            return err_setx(e, -EINVAL, "collect pattern '%s' is not in normal form", patterns[i]);
        }
    }
    int fd = workspace_open_beneath(root, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
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
