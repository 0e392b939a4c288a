/* SPDX-License-Identifier: MIT */
/* The cgroup interface, a sandbox's cgroup: the child dirs made below our subtree, their
 * limits, attach, usage, kill, reset and remove through the v1 or v2 backend, and the names
 * they may take. It only ever creates, changes or removes directories below our own subtree
 * <base>/<name>, and never moves a process it was not asked to attach. */
#include "sandbox/cgroup.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define LOG_MOD "cgroup"
#include "lib/alloc.h"
#include "sandbox/cgroup_impl.h"
#include "lib/util.h"

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
bool cgroup_name_valid(const char *name)
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
    if (!cgroup_name_valid(name)) {
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
        cgroup_file_cg_read_u64(cg, mem, v1 ? "memory.usage_in_bytes" : "memory.current", &left) ==
            0 &&
        left > CGROUP_REUSE_LEFTOVER_MAX &&
        cgroup_file_cg_read_key(cg, mem, "memory.stat", v1 ? "cache" : "file", &left) == 0 &&
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

int cgroup_open_existing(struct cgroup_root *root, const char *name, struct cgroup **ret)
{
    if (!cgroup_name_valid(name)) {
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
