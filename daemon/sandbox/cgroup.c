/* SPDX-License-Identifier: MIT */
/* The cgroup interface: discovers the hierarchies and our own cgroup from /proc/self, picks
 * the v1 or v2 backend, and does what both share (child dirs, attach, remove, listing, file
 * helpers). It only ever creates, changes or removes directories below our own subtree
 * <base>/<name>, and never moves a process it was not asked to attach. */
#include "sandbox/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define LOG_MOD "cgroup"
#include "lib/alloc.h"
#include "lib/buf.h"
#include "sandbox/cgroup_impl.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "lib/util.h"

/* /proc/self/mountinfo can be long in containers; anything past this is not believable. */
#define CGROUP_PROCFILE_MAX (4u << 20)
/* Bound on names we create or open: sandbox ids and the subtree name. */
#define CGROUP_NAME_MAX 128

/* clang-format off */
static const char *const ctrl_names[CGROUP_CTRL_COUNT] = {
    [CGROUP_CTRL_MEMORY] = "memory",
    [CGROUP_CTRL_CPU] = "cpu",
    [CGROUP_CTRL_CPUACCT] = "cpuacct",
    [CGROUP_CTRL_PIDS] = "pids",
    [CGROUP_CTRL_IO] = "blkio", /* v1's name; v2's is "io" (cgroup_ctrl_v2_name) */
};
/* clang-format on */

const char *cgroup_ctrl_name(enum cgroup_ctrl c)
{
    return (unsigned)c < CGROUP_CTRL_COUNT ? ctrl_names[c] : "?";
}

const char *cgroup_ctrl_v2_name(enum cgroup_ctrl c)
{
    return c == CGROUP_CTRL_IO ? "io" : cgroup_ctrl_name(c);
}

int cgroup_ctrl_dfd(const struct cgroup *cg, enum cgroup_ctrl c)
{
    int h = cg->root->ctrl_hier[c];
    return h >= 0 ? cg->dfd[h] : -1;
}

uint64_t cgroup_cpu_quota_us(double cpu)
{
    double q = cpu * (double)CGROUP_CPU_PERIOD_US + 0.5;
    uint64_t quota = (uint64_t)q;
    return quota < CGROUP_CPU_QUOTA_MIN_US ? CGROUP_CPU_QUOTA_MIN_US : quota;
}

/* SECURITY: names become directory names below our subtree, so they are one path component
 * of a conservative alphabet and never "." or "..". */
static bool name_valid(const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > CGROUP_NAME_MAX || name[0] == '.') {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.';
        if (!ok) {
            return false;
        }
    }
    return true;
}

/* ---- Discovery ---------------------------------------------------------------------- */

static ssize_t read_whole(const char *path, char **ret)
{
    scoped_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    scoped(buf_free) struct buf b = BUF_INIT_MAX(CGROUP_PROCFILE_MAX - 1);
    (void)buf_reserve(&b, 16383);
    for (;;) {
        if (buf_room(&b) == 0 && buf_reserve(&b, 1) < 0) {
            return -EFBIG;
        }
        ssize_t n = RETRY_EINTR(read(fd, buf_tail(&b), buf_room(&b)));
        if (n < 0) {
            return -errno;
        }
        if (n == 0) {
            break;
        }
        buf_commit(&b, (size_t)n);
    }
    size_t len = 0;
    *ret = buf_steal(&b, &len);
    return (ssize_t)len;
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape_octal(char *s)
{
    char *w = s;
    for (const char *r = s; *r;) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)(((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
            r += 4;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

/* Whether list, split at any of seps, holds word exactly ("cpu" is not in "cpuset"). */
static bool list_has(const char *list, const char *word, const char *seps)
{
    size_t wl = strlen(word);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, seps);
        if (len == wl && memcmp(p, word, wl) == 0) {
            return true;
        }
        p += len + (p[len] != '\0');
    }
    return false;
}

/* Whether path equals dir or lies below it. */
static bool path_under(const char *path, const char *dir)
{
    size_t dl = strlen(dir);
    if (strcmp(dir, "/") == 0) {
        return path[0] == '/';
    }
    return strncmp(path, dir, dl) == 0 && (path[dl] == '\0' || path[dl] == '/');
}

static void place_fini(struct cgroup_place *p)
{
    free(p->mnt);
    free(p->mnt_root);
    free(p->own);
    *p = (struct cgroup_place){0};
}

static void sys_fini(struct cgroup_sys *sys)
{
    for (size_t c = 0; c < CGROUP_CTRL_COUNT; c++) {
        place_fini(&sys->v1[c]);
    }
    place_fini(&sys->v2);
}

/* /proc/self/cgroup: "<id>:<controllers>:<path>"; id 0 with no controllers is cgroup2. */
static int parse_self_cgroup(struct cgroup_sys *sys, struct err *e)
{
    scoped_free char *buf = NULL;
    ssize_t n = read_whole("/proc/self/cgroup", &buf);
    if (n < 0) {
        return err_set(e, (int)n, "read /proc/self/cgroup");
    }
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) {
            continue;
        }
        *c1 = '\0';
        *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        if (strcmp(line, "0") == 0 && *ctrls == '\0') {
            free(sys->v2.own);
            sys->v2.own = xstrdup(path);
            continue;
        }
        for (size_t c = 0; c < CGROUP_CTRL_COUNT; c++) {
            if (!sys->v1[c].own && list_has(ctrls, ctrl_names[c], ",")) {
                sys->v1[c].own = xstrdup(path);
            }
        }
    }
    return 0;
}

static void place_take_mount(struct cgroup_place *p, const char *mnt, const char *root, dev_t dev)
{
    /* Several mounts of one hierarchy (bind mounts in containers): keep the first whose
     * root contains our own cgroup, else the first seen. */
    bool fits = path_under(p->own ? p->own : "/", root);
    if (p->mnt && (!fits || path_under(p->own ? p->own : "/", p->mnt_root))) {
        return;
    }
    free(p->mnt);
    free(p->mnt_root);
    p->mnt = xstrdup(mnt);
    p->mnt_root = xstrdup(root);
    p->dev = dev;
}

/* /proc/self/mountinfo: "id parent maj:min root mountpoint opts [optional...] - fstype
 * source superopts". cgroup v1 superopts name the controllers (rw,cpu,cpuacct). */
static int parse_mountinfo(struct cgroup_sys *sys, struct err *e)
{
    scoped_free char *buf = NULL;
    ssize_t n = read_whole("/proc/self/mountinfo", &buf);
    if (n < 0) {
        return err_set(e, (int)n, "read /proc/self/mountinfo");
    }
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[64];
        size_t nf = 0;
        char *fsave = NULL;
        for (char *t = strtok_r(line, " ", &fsave); t && nf < ARRAY_SIZE(f);
             t = strtok_r(NULL, " ", &fsave)) {
            f[nf++] = t;
        }
        size_t sep = 6;
        while (sep < nf && strcmp(f[sep], "-") != 0) {
            sep++;
        }
        if (sep + 1 >= nf) {
            continue;
        }
        const char *fstype = f[sep + 1];
        const char *super = sep + 3 < nf ? f[sep + 3] : "";
        bool v1 = strcmp(fstype, "cgroup") == 0, v2 = strcmp(fstype, "cgroup2") == 0;
        if (!v1 && !v2) {
            continue;
        }
        char *colon = NULL;
        unsigned long maj = strtoul(f[2], &colon, 10), min = 0;
        if (*colon != ':') {
            continue;
        }
        min = strtoul(colon + 1, NULL, 10);
        unescape_octal(f[3]);
        unescape_octal(f[4]);
        dev_t dev = makedev(maj, min);
        if (v2) {
            place_take_mount(&sys->v2, f[4], f[3], dev);
            continue;
        }
        for (size_t c = 0; c < CGROUP_CTRL_COUNT; c++) {
            if (list_has(super, ctrl_names[c], ",")) {
                place_take_mount(&sys->v1[c], f[4], f[3], dev);
            }
        }
    }
    return 0;
}

static int sys_discover(struct cgroup_sys *sys, struct err *e)
{
    int r = parse_self_cgroup(sys, e);
    if (r < 0) {
        return r;
    }
    return parse_mountinfo(sys, e);
}

/* Appends the components of rel to *path, rejecting "." and ".." (SECURITY: the subtree
 * must stay below the mount point). Empty components are skipped. */
static int path_append_clean(char **path, const char *rel)
{
    const char *p = rel;
    while (*p) {
        while (*p == '/') {
            p++;
        }
        const char *end = strchrnul(p, '/');
        size_t len = (size_t)(end - p);
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) {
            return -EINVAL;
        }
        if (len > 0) {
            char *joined = xasprintf("%s/%.*s", *path, (int)len, p);
            free(*path);
            *path = joined;
        }
        p = end;
    }
    return 0;
}

int cgroup_place_base(const struct cgroup_place *p, const char *parent, char **ret, struct err *e)
{
    const char *rel;
    if (parent) {
        rel = parent;
    } else {
        const char *own = p->own ? p->own : "/";
        if (!path_under(own, p->mnt_root)) {
            return err_setx(e, -ENOENT, "own cgroup %s is outside the mount %s (root %s)", own,
                            p->mnt, p->mnt_root);
        }
        rel = strcmp(p->mnt_root, "/") == 0 ? own : own + strlen(p->mnt_root);
    }
    char *path = xstrdup(p->mnt);
    /* A trailing "/" on the mount point ("/") would double up; strip it. */
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') {
        path[--len] = '\0';
    }
    if (strcmp(path, "/") == 0) {
        path[0] = '\0';
    }
    int r = path_append_clean(&path, rel);
    if (r < 0) {
        free(path);
        return err_setx(e, r, "cgroup path '%s' has '.' or '..' components", rel);
    }
    *ret = path;
    return 0;
}

int cgroup_hier_open(struct cgroup_hier *h, const char *base, const char *name, struct err *e)
{
    scoped_close int bfd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (bfd < 0) {
        return err_set(e, -errno, "open %s", base);
    }
    if (mkdirat(bfd, name, 0755) < 0 && errno != EEXIST) {
        return err_set(e, -errno, "mkdir %s/%s", base, name);
    }
    int fd = openat(bfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return err_set(e, -errno, "open %s/%s", base, name);
    }
    h->dfd = fd;
    h->path = xasprintf("%s/%s", base, name);
    return 0;
}

/* ---- Files -------------------------------------------------------------------------- */

bool cgroup_file_exists(int dfd, const char *file)
{
    return faccessat(dfd, file, F_OK, 0) == 0;
}

int cgroup_write(int dfd, const char *file, const char *s, struct err *e)
{
    int r = file_write_str(dfd, file, s);
    if (r < 0) {
        return err_set(e, r, "%s: write '%s'", file, s);
    }
    return 0;
}

int cgroup_write_u64(int dfd, const char *file, uint64_t v, struct err *e)
{
    char s[24];
    (void)snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
    return cgroup_write(dfd, file, s, e);
}

/* Parses a counter file's text (n bytes in buf, NUL-terminated): a number or "max". */
static int parse_counter(char *buf, ssize_t n, uint64_t *ret)
{
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) {
        buf[--n] = '\0';
    }
    if (strcmp(buf, "max") == 0) {
        *ret = UINT64_MAX;
        return 0;
    }
    return parse_u64(buf, ret);
}

/* Reads an open cgroup file whole with one pread from offset 0 (the kernel generates the
 * text anew for each read from the start); NUL-terminated. Returns the length or -errno. */
static ssize_t pread_text(int fd, char *buf, size_t size)
{
    ssize_t n = RETRY_EINTR(pread(fd, buf, size - 1, 0));
    if (n < 0) {
        return -errno;
    }
    buf[n] = '\0';
    return n;
}

int cgroup_pread_u64(int fd, uint64_t *ret)
{
    char buf[64];
    ssize_t n = pread_text(fd, buf, sizeof(buf));
    if (n < 0) {
        return (int)n;
    }
    return parse_counter(buf, n, ret);
}

/* cg's held-open copy of file (opened on first use), or -ENOSPC when cg holds all it may
 * (the caller opens the file itself then), or -errno. */
static int cached_fd(struct cgroup *cg, int dfd, const char *file, bool wr)
{
    for (size_t i = 0; i < cg->n_cached; i++) {
        const struct cgroup_cached_file *c = &cg->cached[i];
        if (c->dfd == dfd && c->wr == wr && strcmp(c->file, file) == 0) {
            return c->fd;
        }
    }
    if (cg->n_cached == CGROUP_CACHED_MAX) {
        return -ENOSPC;
    }
    int fd = openat(dfd, file, (wr ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    cg->cached[cg->n_cached++] = (struct cgroup_cached_file){dfd, file, wr, fd};
    return fd;
}

/* Reads a small file whole: through cg's held-open copy when cg is not NULL. */
static ssize_t read_small(struct cgroup *cg, int dfd, const char *file, char *buf, size_t size)
{
    int fd = cg ? cached_fd(cg, dfd, file, false) : -ENOSPC;
    if (fd == -ENOSPC) {
        return file_read_small(dfd, file, buf, size);
    }
    return fd < 0 ? fd : pread_text(fd, buf, size);
}

int cgroup_cg_write(struct cgroup *cg, int dfd, const char *file, const char *s, struct err *e)
{
    int fd = cached_fd(cg, dfd, file, true);
    if (fd == -ENOSPC) {
        return cgroup_write(dfd, file, s, e);
    }
    int r = fd < 0 ? fd : fd_write_str(fd, s);
    return r < 0 ? err_set(e, r, "%s: write '%s'", file, s) : 0;
}

int cgroup_cg_read_u64(struct cgroup *cg, int dfd, const char *file, uint64_t *ret)
{
    char buf[64];
    ssize_t n = read_small(cg, dfd, file, buf, sizeof(buf));
    if (n < 0) {
        return (int)n;
    }
    return parse_counter(buf, n, ret);
}

int cgroup_read_u64(int dfd, const char *file, uint64_t *ret)
{
    return cgroup_cg_read_u64(NULL, dfd, file, ret);
}

int cgroup_read_keys(int dfd, const char *file, const char *const *keys, uint64_t *vals, size_t n)
{
    return cgroup_cg_read_keys(NULL, dfd, file, keys, vals, n);
}

int cgroup_cg_read_keys(struct cgroup *cg, int dfd, const char *file, const char *const *keys,
                        uint64_t *vals, size_t n)
{
    char buf[4096];
    ssize_t len = read_small(cg, dfd, file, buf, sizeof(buf));
    if (len < 0) {
        return (int)len;
    }
    int found = 0;
    for (char *line = buf; *line;) {
        char *end = strchrnul(line, '\n');
        bool last = *end == '\0';
        *end = '\0';
        char *sp = strchr(line, ' ');
        if (sp) {
            *sp = '\0';
            for (size_t i = 0; i < n; i++) {
                uint64_t v;
                if (strcmp(line, keys[i]) == 0 && parse_u64(sp + 1, &v) == 0) {
                    vals[i] = v;
                    found++;
                    break;
                }
            }
        }
        line = last ? end : end + 1;
    }
    return found;
}

int cgroup_read_key(int dfd, const char *file, const char *key, uint64_t *ret)
{
    return cgroup_cg_read_key(NULL, dfd, file, key, ret);
}

int cgroup_cg_read_key(struct cgroup *cg, int dfd, const char *file, const char *key, uint64_t *ret)
{
    uint64_t v = 0;
    int r = cgroup_cg_read_keys(cg, dfd, file, &key, &v, 1);
    if (r <= 0) {
        return r < 0 ? r : -ENODATA;
    }
    *ret = v;
    return 0;
}

bool cgroup_list_has(const char *list, const char *word)
{
    return list_has(list, word, " \n");
}

/* ---- The interface ------------------------------------------------------------------ */

static void describe_append(char *buf, size_t size, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void describe_append(char *buf, size_t size, size_t *off, const char *fmt, ...)
{
    if (*off >= size - 1) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *off, size - *off, fmt, ap);
    va_end(ap);
    if (n > 0) {
        *off += (size_t)n < size - *off ? (size_t)n : size - 1 - *off;
    }
}

static char *root_describe(const struct cgroup_root *root)
{
    char buf[4096];
    size_t off = 0;
    buf[0] = '\0';
    describe_append(buf, sizeof(buf), &off, "v%d", (int)root->ops->version);
    if (root->ops->version == CGROUP_V1) {
        for (size_t h = 0; h < root->nhier; h++) {
            const char *sep = " ";
            for (size_t c = 0; c < CGROUP_CTRL_COUNT; c++) {
                if (root->hier[h].ctrls & (1u << c)) {
                    describe_append(buf, sizeof(buf), &off, "%s%s", sep, ctrl_names[c]);
                    sep = ",";
                }
            }
            describe_append(buf, sizeof(buf), &off, "=%s", root->hier[h].path);
        }
        describe_append(buf, sizeof(buf), &off, " memsw=%s", root->v1_memsw ? "yes" : "no");
    } else {
        describe_append(buf, sizeof(buf), &off,
                        " %s controllers=", root->nhier > 0 ? root->hier[0].path : "?");
        const char *sep = "";
        for (size_t c = 0; c < CGROUP_CTRL_COUNT; c++) {
            if (c != CGROUP_CTRL_CPUACCT && root->ctrl_ok[c]) {
                describe_append(buf, sizeof(buf), &off, "%s%s", sep,
                                cgroup_ctrl_v2_name((enum cgroup_ctrl)c));
                sep = ",";
            }
        }
        describe_append(buf, sizeof(buf), &off, "%s kill=%s", *sep ? "" : "none",
                        root->v2_kill ? "yes" : "no");
    }
    describe_append(buf, sizeof(buf), &off, " limits=%s", root->has_limits ? "yes" : "no");
    return xstrdup(buf);
}

/* CGROUP_AUTO: v2 when our v2 cgroup offers memory, cpu and pids; else v1 when those three
 * are mounted; else a controller-less v2. */
static const struct cgroup_ops *pick_backend(const struct cgroup_sys *sys, const char *parent)
{
    if (sys->v2.mnt) {
        scoped_free char *base = NULL;
        char list[512];
        if (cgroup_place_base(&sys->v2, parent, &base, NULL) == 0) {
            scoped_close int dfd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (dfd >= 0 && file_read_small(dfd, "cgroup.controllers", list, sizeof(list)) >= 0 &&
                cgroup_list_has(list, "memory") && cgroup_list_has(list, "cpu") &&
                cgroup_list_has(list, "pids")) {
                return &cgroup_v2_ops;
            }
        }
    }
    if (sys->v1[CGROUP_CTRL_MEMORY].mnt && sys->v1[CGROUP_CTRL_CPU].mnt &&
        sys->v1[CGROUP_CTRL_PIDS].mnt) {
        return &cgroup_v1_ops;
    }
    return sys->v2.mnt ? &cgroup_v2_ops : NULL;
}

int cgroup_root_open(enum cgroup_version version, const char *parent, const char *name,
                     struct cgroup_root **ret, struct err *e)
{
    return cgroup_root_open_flags(version, parent, name, 0, ret, e);
}

int cgroup_root_open_flags(enum cgroup_version version, const char *parent, const char *name,
                           unsigned flags, struct cgroup_root **ret, struct err *e)
{
    if (!name_valid(name)) {
        return err_setx(e, -EINVAL, "cgroup name '%s': want 1-%d of [A-Za-z0-9._-]",
                        name ? name : "", CGROUP_NAME_MAX);
    }
    scoped(sys_fini) struct cgroup_sys sys = {0};
    int r = sys_discover(&sys, e);
    if (r < 0) {
        return r;
    }
    const struct cgroup_ops *ops = NULL;
    switch (version) {
    case CGROUP_AUTO:
        ops = pick_backend(&sys, parent);
        if (!ops) {
            return err_setx(e, -ENODEV,
                            "no usable cgroup hierarchy: neither cgroup2 nor v1 memory, cpu and "
                            "pids are mounted");
        }
        break;
    case CGROUP_V1:
        ops = &cgroup_v1_ops;
        break;
    case CGROUP_V2:
        ops = &cgroup_v2_ops;
        break;
    default:
        return err_setx(e, -EINVAL, "cgroup version %d: want 0 (auto), 1 or 2", (int)version);
    }
    struct cgroup_root *root = xcalloc(1, sizeof(*root));
    root->ops = ops;
    root->name = xstrdup(name);
    root->want_io = (flags & CGROUP_ROOT_IO) != 0;
    for (size_t h = 0; h < CGROUP_HIER_MAX; h++) {
        root->hier[h].dfd = -1;
    }
    for (size_t c = 0; c < CGROUP_CTRL_COUNT; c++) {
        root->ctrl_hier[c] = -1;
    }
    r = ops->root_open(root, &sys, parent, e);
    if (r < 0) {
        root = cgroup_root_free(root);
        return r;
    }
    root->desc = root_describe(root);
    log_debug("msg=\"cgroup subtree open\" desc=\"%s\"", root->desc);
    *ret = root;
    return 0;
}

int cgroup_block_disk(const char *path, dev_t *ret, struct err *e)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        return err_set(e, -errno, "stat %s", path);
    }
    unsigned maj = major(st.st_dev), min = minor(st.st_dev);
    char sys[64];
    (void)snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", maj, min);
    scoped_close int dfd = open(sys, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        return err_setx(e, -ENODEV, "%s is on no block device (its filesystem is %u:%u)", path, maj,
                        min);
    }
    if (faccessat(dfd, "partition", F_OK, 0) < 0) {
        *ret = st.st_dev; /* a whole disk (or a device-mapper or md device) */
        return 0;
    }
    /* A partition's directory sits in its disk's: the disk's number is in ../dev. */
    char buf[32];
    ssize_t n = file_read_small(dfd, "../dev", buf, sizeof(buf));
    unsigned dmaj, dmin;
    if (n < 0 || sscanf(buf, "%u:%u", &dmaj, &dmin) != 2) {
        return err_setx(e, -ENODEV, "%s: cannot find the disk of partition %u:%u", path, maj, min);
    }
    *ret = makedev(dmaj, dmin);
    return 0;
}

int cgroup_root_lock(struct cgroup_root *root, struct err *e)
{
    if (root->nhier == 0) {
        return err_setx(e, -ENOENT, "no cgroup hierarchy to lock");
    }
    if (flock(root->hier[0].dfd, LOCK_EX | LOCK_NB) < 0) {
        int err = errno;
        if (err == EWOULDBLOCK) {
            return err_setx(e, -EBUSY, "cgroup subtree '%s' is in use by another sbxd",
                            root->hier[0].path);
        }
        return err_set(e, -err, "lock cgroup subtree '%s'", root->hier[0].path);
    }
    return 0;
}

static struct cgroup_root *root_release(struct cgroup_root *root, bool remove)
{
    if (!root) {
        return NULL;
    }
    for (size_t h = 0; h < root->nhier; h++) {
        root->hier[h].dfd = fd_close(root->hier[h].dfd);
        /* EBUSY: children or processes remain (a leak the reaper handles next start). */
        if (remove && root->hier[h].path && rmdir(root->hier[h].path) < 0 && errno != EBUSY &&
            errno != ENOENT) {
            log_debug_errno(-errno, "msg=\"cannot remove subtree, ignoring\" path=\"%s\"",
                            root->hier[h].path);
        }
        free(root->hier[h].path);
    }
    free(root->name);
    free(root->desc);
    free(root);
    return NULL;
}

struct cgroup_root *cgroup_root_free(struct cgroup_root *root)
{
    return root_release(root, true);
}

struct cgroup_root *cgroup_root_close(struct cgroup_root *root)
{
    return root_release(root, false);
}

enum cgroup_version cgroup_root_version(const struct cgroup_root *root)
{
    return root->ops->version;
}

bool cgroup_root_has_limits(const struct cgroup_root *root)
{
    return root->has_limits;
}

const char *cgroup_root_describe(const struct cgroup_root *root)
{
    return root->desc ? root->desc : "";
}

static struct cgroup *cgroup_alloc(struct cgroup_root *root, const char *name)
{
    struct cgroup *cg = xcalloc(1, sizeof(*cg));
    cg->root = root;
    cg->name = xstrdup(name);
    cg->peak_fd = -1;
    for (size_t h = 0; h < CGROUP_HIER_MAX; h++) {
        cg->dfd[h] = -1;
        cg->procs_fd[h] = -1;
    }
    return cg;
}

/* Removes the cgroup's dir in the first n hierarchies; returns the first error. */
static int rmdir_n(struct cgroup *cg, size_t n, struct err *e)
{
    int ret = 0;
    for (size_t h = 0; h < n; h++) {
        const struct cgroup_hier *hier = &cg->root->hier[h];
        if (unlinkat(hier->dfd, cg->name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
            continue;
        }
        int r = -errno;
        if (ret == 0) {
            ret = r;
            if (r == -EBUSY) {
                (void)err_setx(e, r, "rmdir %s/%s: still has processes or children: EBUSY",
                               hier->path, cg->name);
            } else {
                (void)err_set(e, r, "rmdir %s/%s", hier->path, cg->name);
            }
        }
    }
    return ret;
}

static void cgroup_freep(struct cgroup **cg)
{
    *cg = cgroup_free(*cg);
}

int cgroup_create(struct cgroup_root *root, const char *name, const struct cgroup_limits *lim,
                  struct cgroup **ret, struct err *e)
{
    if (!name_valid(name)) {
        return err_setx(e, -EINVAL, "cgroup name '%s': want 1-%d of [A-Za-z0-9._-]", name,
                        CGROUP_NAME_MAX);
    }
    if (lim && !(lim->cpu >= 0 && lim->cpu <= 1e6)) {
        return err_setx(e, -EINVAL, "cgroup %s: cpu limit %g out of range", name, lim->cpu);
    }
    scoped(cgroup_freep) struct cgroup *cg = cgroup_alloc(root, name);
    for (size_t h = 0; h < root->nhier; h++) {
        const struct cgroup_hier *hier = &root->hier[h];
        if (mkdirat(hier->dfd, name, 0755) < 0) {
            int r = err_set(e, -errno, "mkdir %s/%s", hier->path, name);
            (void)rmdir_n(cg, h, NULL);
            return r;
        }
        cg->dfd[h] = openat(hier->dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cg->dfd[h] < 0) {
            int r = err_set(e, -errno, "open %s/%s", hier->path, name);
            (void)rmdir_n(cg, h + 1, NULL);
            return r;
        }
    }
    if (lim) {
        int r = root->ops->set_limits(cg, lim, e);
        if (r < 0) {
            (void)rmdir_n(cg, root->nhier, NULL);
            return err_prefix(e, r, "cgroup %s: limits", name);
        }
    }
    *ret = take_ptr(&cg);
    return 0;
}

int cgroup_fd(const struct cgroup *cg)
{
    return cg->root->ops->version == CGROUP_V2 ? cg->dfd[0] : -1;
}

/* The held-open cgroup.procs of hierarchy h, opened at its first use. Returns it or -errno
 * with e. */
static int procs_fd(struct cgroup *cg, size_t h, struct err *e)
{
    const char *path = cg->root->hier[h].path;
    if (cg->dfd[h] < 0) {
        return err_setx(e, -ENOENT, "%s/%s is missing", path, cg->name);
    }
    if (cg->procs_fd[h] < 0) {
        cg->procs_fd[h] = openat(cg->dfd[h], "cgroup.procs", O_WRONLY | O_CLOEXEC);
        if (cg->procs_fd[h] < 0) {
            return err_set(e, -errno, "%s/%s/cgroup.procs", path, cg->name);
        }
    }
    return cg->procs_fd[h];
}

int cgroup_procs_fds(struct cgroup *cg, int *fds, size_t max, struct err *e)
{
    if (cg->root->ops->version == CGROUP_V2) {
        return 0;
    }
    if (cg->root->nhier > max) {
        return err_setx(e, -E2BIG, "%zu cgroup hierarchies, at most %zu", cg->root->nhier, max);
    }
    for (size_t h = 0; h < cg->root->nhier; h++) {
        int fd = procs_fd(cg, h, e);
        if (fd < 0) {
            return fd;
        }
        fds[h] = fd;
    }
    cg->attached_all = true;
    return (int)cg->root->nhier;
}

int cgroup_attach(struct cgroup *cg, pid_t pid, struct err *e)
{
    char s[24];
    (void)snprintf(s, sizeof(s), "%d", (int)pid);
    cg->attached_all = false;
    for (size_t h = 0; h < cg->root->nhier; h++) {
        const char *path = cg->root->hier[h].path;
        int fd = procs_fd(cg, h, e);
        if (fd < 0) {
            return err_prefix(e, fd, "attach pid %d", (int)pid);
        }
        /* Each write is one move: the held-open file serves every sandbox of the cgroup. */
        if (RETRY_EINTR(write(fd, s, strlen(s))) < 0) {
            return err_set(e, -errno, "attach pid %d: %s/%s: cgroup.procs: write '%s'", (int)pid,
                           path, cg->name, s);
        }
    }
    cg->attached_all = true;
    return 0;
}

int cgroup_usage(struct cgroup *cg, struct cgroup_usage *ret)
{
    return cg->root->ops->usage(cg, ret);
}

bool cgroup_is_empty(struct cgroup *cg)
{
    return cg->root->ops->is_empty(cg);
}

int cgroup_kill_all(struct cgroup *cg)
{
    return cg->root->ops->kill_all(cg);
}

int cgroup_reset(struct cgroup *cg, struct err *e)
{
    int mem = cg->root->ctrl_ok[CGROUP_CTRL_MEMORY] ? cgroup_ctrl_dfd(cg, CGROUP_CTRL_MEMORY) : -1;
    bool v1 = cg->root->ops->version == CGROUP_V1;
    uint64_t left = 0;
    /* The page cache only: the kernel memory of the processes that just died is still
     * being freed (RCU) and would make the count depend on timing. The whole usage, a
     * counter the kernel keeps, is read first: memory.stat is formatted (and the kernel's
     * statistics flushed) only when the usage is over the bound, which it rarely is. */
    if (mem >= 0 &&
        cgroup_cg_read_u64(cg, mem, v1 ? "memory.usage_in_bytes" : "memory.current", &left) == 0 &&
        left > CGROUP_REUSE_LEFTOVER_MAX &&
        cgroup_cg_read_key(cg, mem, "memory.stat", v1 ? "cache" : "file", &left) == 0 &&
        left > CGROUP_REUSE_LEFTOVER_MAX) {
        return err_setx(e, -ENOTEMPTY, "%llu bytes of its sandboxes' page cache stay charged to it",
                        (unsigned long long)left);
    }
    return cg->root->ops->reset(cg, e);
}

int cgroup_remove(struct cgroup *cg, struct err *e)
{
    return rmdir_n(cg, cg->root->nhier, e);
}

struct cgroup *cgroup_free(struct cgroup *cg)
{
    if (!cg) {
        return NULL;
    }
    for (size_t h = 0; h < CGROUP_HIER_MAX; h++) {
        cg->dfd[h] = fd_close(cg->dfd[h]);
        cg->procs_fd[h] = fd_close(cg->procs_fd[h]);
    }
    for (size_t i = 0; i < cg->n_cached; i++) {
        (void)fd_close(cg->cached[i].fd);
    }
    cg->peak_fd = fd_close(cg->peak_fd);
    free(cg->name);
    free(cg);
    return NULL;
}

const char *cgroup_name(const struct cgroup *cg)
{
    return cg->name;
}

static void closedirp(DIR **d)
{
    if (*d) {
        (void)closedir(*d);
    }
}

int cgroup_root_list(struct cgroup_root *root, void (*fn)(const char *name, void *ud), void *ud)
{
    scoped_strv struct strv names = STRV_INIT;
    /* A child may exist in some hierarchies only (an interrupted remove): list the union. */
    for (size_t h = 0; h < root->nhier; h++) {
        int fd = openat(root->hier[h].dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            return -errno;
        }
        scoped(closedirp) DIR *d = fdopendir(fd);
        if (!d) {
            int r = -errno;
            (void)fd_close(fd);
            return r;
        }
        struct dirent *de;
        while ((errno = 0, de = readdir(d)) != NULL) {
            if (de->d_type != DT_DIR || !name_valid(de->d_name)) {
                continue;
            }
            if (!strv_contains(&names, de->d_name)) {
                strv_push(&names, de->d_name);
            }
        }
        if (errno != 0) {
            return -errno;
        }
    }
    for (size_t i = 0; i < names.n; i++) {
        fn(names.v[i], ud);
    }
    return (int)names.n;
}

int cgroup_open_existing(struct cgroup_root *root, const char *name, struct cgroup **ret)
{
    if (!name_valid(name)) {
        return -EINVAL;
    }
    scoped(cgroup_freep) struct cgroup *cg = cgroup_alloc(root, name);
    size_t found = 0;
    for (size_t h = 0; h < root->nhier; h++) {
        cg->dfd[h] =
            openat(root->hier[h].dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cg->dfd[h] >= 0) {
            found++;
        } else if (errno != ENOENT) {
            return -errno;
        }
    }
    if (found == 0) {
        return -ENOENT;
    }
    *ret = take_ptr(&cg);
    return 0;
}
