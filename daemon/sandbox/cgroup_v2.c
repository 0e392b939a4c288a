/* SPDX-License-Identifier: MIT */
/* cgroup v2 backend: one directory on the unified hierarchy, controllers delegated down to
 * our subtree through cgroup.subtree_control, limits through memory.max, memory.swap.max,
 * cpu.max and pids.max, emptiness from cgroup.events and cgroup.kill for killing. It never
 * moves a process: when delegation is impossible it says why and fails. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

#define LOG_MOD "cgroup"
#include "sandbox/cgroup_impl.h"
#include "lib/log.h"
#include "lib/util.h"

/* The controllers delegated to our subtree; io only with CGROUP_ROOT_IO (want_io). */
static const enum cgroup_ctrl v2_limit_ctrls[] = {
    CGROUP_CTRL_MEMORY,
    CGROUP_CTRL_CPU,
    CGROUP_CTRL_PIDS,
    CGROUP_CTRL_IO,
};

static bool v2_wanted(const struct cgroup_root *root, enum cgroup_ctrl c)
{
    return c != CGROUP_CTRL_IO || root->want_io;
}

/* "+memory +cpu" for the wanted controllers in avail (NULL: all) that are not in enabled. */
static void enable_string(const struct cgroup_root *root, const char *avail, const char *enabled,
                          char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ARRAY_SIZE(v2_limit_ctrls); i++) {
        if (!v2_wanted(root, v2_limit_ctrls[i])) {
            continue;
        }
        const char *name = cgroup_ctrl_v2_name(v2_limit_ctrls[i]);
        if ((avail && !cgroup_root_list_has(avail, name)) || cgroup_root_list_has(enabled, name)) {
            continue;
        }
        int n = snprintf(buf + off, size - off, "%s+%s", off ? " " : "", name);
        if (n > 0 && (size_t)n < size - off) {
            off += (size_t)n;
        }
    }
}

/* Makes memory, cpu and pids (those the host offers) available to the children of our
 * subtree root: enabled in <base>/cgroup.subtree_control so the root has them, then in the
 * root's own cgroup.subtree_control. */
static int v2_delegate(struct cgroup_root *root, const char *base, struct err *e)
{
    int dfd = root->hier[0].dfd;
    char have[512], base_avail[512], enabled[512], want[64];
    ssize_t n = file_read_small(dfd, "cgroup.controllers", have, sizeof(have));
    if (n < 0) {
        return err_set(e, (int)n, "read %s/cgroup.controllers", root->hier[0].path);
    }
    scoped_close int bfd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (bfd < 0) {
        return err_set(e, -errno, "open %s", base);
    }
    n = file_read_small(bfd, "cgroup.controllers", base_avail, sizeof(base_avail));
    if (n < 0) {
        return err_set(e, (int)n, "read %s/cgroup.controllers", base);
    }
    enable_string(root, base_avail, have, want, sizeof(want));
    if (want[0]) {
        int r = file_write_str(bfd, "cgroup.subtree_control", want);
        if (r == -EBUSY) {
            return err_setx(e, r,
                            "cgroup v2: writing '%s' to %s/cgroup.subtree_control: EBUSY: that "
                            "cgroup holds processes (sbxd runs there) and the no-internal-process "
                            "rule forbids delegating controllers from it; start sbxd in a leaf "
                            "cgroup or set the cgroup parent to an empty delegated cgroup (sbxd "
                            "never moves processes itself)",
                            want, base);
        }
        if (r < 0) {
            return err_set(e, r, "cgroup v2: %s/cgroup.subtree_control: write '%s'", base, want);
        }
        n = file_read_small(dfd, "cgroup.controllers", have, sizeof(have));
        if (n < 0) {
            return err_set(e, (int)n, "read %s/cgroup.controllers", root->hier[0].path);
        }
    }
    n = file_read_small(dfd, "cgroup.subtree_control", enabled, sizeof(enabled));
    if (n < 0) {
        return err_set(e, (int)n, "read %s/cgroup.subtree_control", root->hier[0].path);
    }
    enable_string(root, have, enabled, want, sizeof(want));
    if (want[0]) {
        int r = file_write_str(dfd, "cgroup.subtree_control", want);
        if (r == -EBUSY) {
            return err_setx(e, r,
                            "cgroup v2: writing '%s' to %s/cgroup.subtree_control: EBUSY: our "
                            "subtree root holds processes itself; it must only have child "
                            "cgroups",
                            want, root->hier[0].path);
        }
        if (r < 0) {
            return err_set(e, r, "cgroup v2: %s/cgroup.subtree_control: write '%s'",
                           root->hier[0].path, want);
        }
        n = file_read_small(dfd, "cgroup.subtree_control", enabled, sizeof(enabled));
        if (n < 0) {
            return err_set(e, (int)n, "read %s/cgroup.subtree_control", root->hier[0].path);
        }
    }
    root->has_limits = true;
    for (size_t i = 0; i < ARRAY_SIZE(v2_limit_ctrls); i++) {
        enum cgroup_ctrl c = v2_limit_ctrls[i];
        if (!v2_wanted(root, c)) {
            continue;
        }
        root->ctrl_ok[c] = cgroup_root_list_has(enabled, cgroup_ctrl_v2_name(c));
        if (c != CGROUP_CTRL_IO) {
            root->has_limits = root->has_limits && root->ctrl_ok[c];
        }
        if (root->ctrl_ok[c]) {
            root->hier[0].ctrls |= 1u << c;
        }
    }
    if (root->want_io && !root->ctrl_ok[CGROUP_CTRL_IO]) {
        return err_setx(e, -ENODEV,
                        "cgroup v2: the io controller is not available to %s (a pool sets io "
                        "limits): delegate it to the cgroup sbxd starts in",
                        root->hier[0].path);
    }
    return 0;
}

static int v2_root_open(struct cgroup_root *root, const struct cgroup_sys *sys, const char *parent,
                        struct err *e)
{
    const struct cgroup_place *p = &sys->v2;
    if (!p->mnt) {
        return err_setx(e, -ENODEV, "cgroup v2: no cgroup2 filesystem is mounted");
    }
    scoped_free char *base = NULL;
    int r = cgroup_root_place_base(p, parent, &base, e);
    if (r < 0) {
        return err_prefix(e, r, "cgroup v2");
    }
    r = cgroup_root_hier_open(&root->hier[0], base, root->name, e);
    if (r < 0) {
        return err_prefix(e, r, "cgroup v2");
    }
    root->nhier = 1;
    for (size_t c = 0; c < CGROUP_CTRL_COUNT; c++) {
        root->ctrl_hier[c] = 0;
    }
    /* cpu.stat (usage_usec) is core on v2: CPU usage needs no controller. */
    root->ctrl_ok[CGROUP_CTRL_CPUACCT] = true;
    r = v2_delegate(root, base, e);
    if (r < 0) {
        return r;
    }
    int dfd = root->hier[0].dfd;
    root->v2_kill = cgroup_file_exists(dfd, "cgroup.kill");
    root->v2_swap = cgroup_file_exists(dfd, "memory.swap.max");
    root->v2_peak = cgroup_file_exists(dfd, "memory.peak");
    if (!root->has_limits) {
        log_debug("msg=\"cgroup v2 without memory, cpu and pids: limits not enforced\"");
    }
    return 0;
}

static int v2_set_limits(struct cgroup *cg, const struct cgroup_limits *lim, struct err *e)
{
    const struct cgroup_root *root = cg->root;
    int dfd = cg->dfd[0];
    int r;
    if (lim->memory_bytes > 0 && root->ctrl_ok[CGROUP_CTRL_MEMORY]) {
        r = cgroup_file_write_u64(dfd, "memory.max", lim->memory_bytes, e);
        if (r < 0) {
            return r;
        }
        /* The limit is memory + swap, as on v1 with memsw: no swap at all. */
        if (root->v2_swap) {
            r = cgroup_file_write(dfd, "memory.swap.max", "0", e);
            if (r < 0) {
                return r;
            }
        }
    }
    if (lim->cpu > 0 && root->ctrl_ok[CGROUP_CTRL_CPU]) {
        char s[48];
        (void)snprintf(s, sizeof(s), "%llu %llu", (unsigned long long)cgroup_cpu_quota_us(lim->cpu),
                       (unsigned long long)CGROUP_CPU_PERIOD_US);
        r = cgroup_file_write(dfd, "cpu.max", s, e);
        if (r < 0) {
            return r;
        }
    }
    if (lim->pids > 0 && root->ctrl_ok[CGROUP_CTRL_PIDS]) {
        r = cgroup_file_write_u64(dfd, "pids.max", lim->pids, e);
        if (r < 0) {
            return r;
        }
    }
    if (lim->io_dev && !root->ctrl_ok[CGROUP_CTRL_IO]) {
        return err_setx(e, -ENODEV, "io limits without the io controller (CGROUP_ROOT_IO)");
    }
    if (lim->io_dev && (lim->io_read_bps > 0 || lim->io_read_iops > 0)) {
        char s[96], bps[24] = "max", iops[16] = "max";
        if (lim->io_read_bps > 0) {
            (void)snprintf(bps, sizeof(bps), "%llu", (unsigned long long)lim->io_read_bps);
        }
        if (lim->io_read_iops > 0) {
            (void)snprintf(iops, sizeof(iops), "%u", lim->io_read_iops);
        }
        (void)snprintf(s, sizeof(s), "%u:%u rbps=%s riops=%s", major(lim->io_dev),
                       minor(lim->io_dev), bps, iops);
        r = cgroup_file_write(dfd, "io.max", s, e);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* A counter file that is missing (controller absent, cgroup gone) reads as 0. */
static int tolerate(int r)
{
    return (r == -ENOENT || r == -ENODATA) ? 0 : r;
}

static int v2_usage(struct cgroup *cg, struct cgroup_usage *ret)
{
    struct cgroup_usage u = {0};
    int dfd = cg->dfd[0];
    uint64_t usec = 0;
    int r = tolerate(cgroup_file_cg_read_key(cg, dfd, "cpu.stat", "usage_usec", &usec));
    if (r < 0) {
        return r;
    }
    u.cpu_ns = usec * 1000;
    if (cg->peak_fd >= 0) {
        r = cgroup_file_pread_u64(cg->peak_fd, &u.mem_peak_bytes);
        if (r < 0) {
            return r;
        }
    } else if (cg->root->v2_peak) {
        r = tolerate(cgroup_file_read_u64(dfd, "memory.peak", &u.mem_peak_bytes));
        if (r < 0) {
            return r;
        }
    }
    if (cg->root->ctrl_ok[CGROUP_CTRL_MEMORY]) {
        static const char *const keys[] = {"oom", "oom_kill"};
        uint64_t vals[2] = {0, 0};
        r = cgroup_file_cg_read_keys(cg, dfd, "memory.events", keys, vals, ARRAY_SIZE(keys));
        if (tolerate(r) < 0) {
            return r;
        }
        u.oom_kills = vals[1];
        u.oom = vals[0] > 0 || vals[1] > 0;
    }
    if (cg->root->ctrl_ok[CGROUP_CTRL_PIDS]) {
        r = tolerate(cgroup_file_cg_read_key(cg, dfd, "pids.events", "max", &u.pids_max_hits));
        if (r < 0) {
            return r;
        }
    }
    *ret = u;
    return 0;
}

static bool v2_is_empty(struct cgroup *cg)
{
    uint64_t populated = 1;
    int r = cgroup_file_read_key(cg->dfd[0], "cgroup.events", "populated", &populated);
    if (r == -ENOENT) {
        return true; /* removed */
    }
    return r == 0 && populated == 0;
}

static int v2_kill_all(struct cgroup *cg)
{
    int dfd = cg->dfd[0];
    if (cg->root->v2_kill) {
        /* cgroup.kill reports nothing back: count what is listed first (best effort). */
        int n = cgroup_v1_procs_count(dfd);
        if (n == -ENOENT) {
            return 0;
        }
        if (n < 0) {
            return n;
        }
        int r = file_write_str(dfd, "cgroup.kill", "1");
        if (r == 0) {
            return n;
        }
        if (r != -ENOENT) {
            return r;
        }
    }
    /* COMPAT(linux < 5.14): no cgroup.kill. */
    return cgroup_v1_procs_kill(&dfd, 1);
}

/* memory.peak is reset per open file (linux >= 6.12): the peak is read from then on
 * through the file that reset it. Older kernels refuse the write. */
static int v2_reset(struct cgroup *cg, struct err *e)
{
    if (!cg->root->v2_peak) {
        return 0; /* no peak is reported at all */
    }
    if (cg->peak_fd < 0) {
        cg->peak_fd = openat(cg->dfd[0], "memory.peak", O_RDWR | O_CLOEXEC);
        if (cg->peak_fd < 0) {
            int r = -errno;
            if (r == -EACCES || r == -EPERM) {
                return err_setx(e, -EOPNOTSUPP, "memory.peak cannot be reset (linux < 6.12)");
            }
            return err_set(e, r, "open memory.peak");
        }
    }
    if (RETRY_EINTR(write(cg->peak_fd, "reset\n", 6)) < 0) {
        int r = -errno;
        cg->peak_fd = fd_close(cg->peak_fd);
        if (r == -EINVAL || r == -EACCES || r == -EPERM) {
            return err_setx(e, -EOPNOTSUPP, "memory.peak cannot be reset (linux < 6.12)");
        }
        return err_set(e, r, "reset memory.peak");
    }
    return 0;
}

const struct cgroup_ops cgroup_v2_ops = {
    .version = CGROUP_V2,
    .root_open = v2_root_open,
    .set_limits = v2_set_limits,
    .usage = v2_usage,
    .reset = v2_reset,
    .is_empty = v2_is_empty,
    .kill_all = v2_kill_all,
};
