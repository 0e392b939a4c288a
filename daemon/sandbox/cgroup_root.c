/* SPDX-License-Identifier: MIT */
/* The cgroup interface, the root: discovers the hierarchies and our own cgroup from
 * /proc/self, picks the v1 or v2 backend, opens, locks, describes, lists and removes our
 * subtree <base>/<name>. It only ever creates, changes or removes directories below that
 * subtree. */
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
            if (!sys->v1[c].own && list_has(ctrls, cgroup_ctrl_name(c), ",")) {
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
            if (list_has(super, cgroup_ctrl_name(c), ",")) {
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

int cgroup_root_place_base(const struct cgroup_place *p, const char *parent, char **ret,
                           struct err *e)
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

int cgroup_root_hier_open(struct cgroup_hier *h, const char *base, const char *name, struct err *e)
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

bool cgroup_root_list_has(const char *list, const char *word)
{
    return list_has(list, word, " \n");
}

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
                    describe_append(buf, sizeof(buf), &off, "%s%s", sep, cgroup_ctrl_name(c));
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
        if (cgroup_root_place_base(&sys->v2, parent, &base, NULL) == 0) {
            scoped_close int dfd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (dfd >= 0 && file_read_small(dfd, "cgroup.controllers", list, sizeof(list)) >= 0 &&
                cgroup_root_list_has(list, "memory") && cgroup_root_list_has(list, "cpu") &&
                cgroup_root_list_has(list, "pids")) {
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
    if (!cgroup_name_valid(name)) {
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
            if (de->d_type != DT_DIR || !cgroup_name_valid(de->d_name)) {
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
