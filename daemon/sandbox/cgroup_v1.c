/* SPDX-License-Identifier: MIT */
/* cgroup v1 backend: one directory per hierarchy (memory, cpu, cpuacct, pids; controllers
 * mounted together such as cpu,cpuacct share one), limits through memory.limit_in_bytes,
 * memory.memsw.limit_in_bytes, the CFS quota and pids.max, usage from the same controllers,
 * and the cgroup.procs kill loop (v2's fallback too). It works only below our subtree, and
 * signals only pids read from our own cgroup.procs files. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/pidfd.h>
#include <time.h>
#include <unistd.h>

#define LOG_MOD "cgroup"
#include "lib/alloc.h"
#include "lib/buf.h"
#include "sandbox/cgroup_impl.h"
#include "lib/log.h"
#include "lib/util.h"

/* The failcnt fallback counts the limit as hit when the peak came within 1/16 of it. */
#define V1_NEAR_LIMIT_SHIFT 4
/* Rounds of the cgroup.procs kill loop; with the back-off below about one second. */
#define V1_KILL_ROUNDS 64
#define V1_KILL_SLEEP_MAX_NS 16000000L

/* An array of pids kept in a buf (uncapped: the kernel bounds what cgroup.procs lists). */
struct pidvec {
    struct buf b;
};

static pid_t *pidvec_v(const struct pidvec *p)
{
    return (pid_t *)(void *)p->b.p;
}

static size_t pidvec_n(const struct pidvec *p)
{
    return p->b.len / sizeof(pid_t);
}

static void pidvec_freep(struct pidvec *p)
{
    buf_free(&p->b);
}

static int pidvec_add_cb(pid_t pid, void *ud)
{
    struct pidvec *p = ud;
    memcpy(buf_push(&p->b, sizeof(pid)), &pid, sizeof(pid));
    return 0;
}

static int pid_cmp(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

static void pidvec_sort_unique(struct pidvec *p)
{
    pid_t *v = pidvec_v(p);
    size_t n = pidvec_n(p);
    if (n < 2) {
        return;
    }
    qsort(v, n, sizeof(*v), pid_cmp);
    size_t w = 1;
    for (size_t i = 1; i < n; i++) {
        if (v[i] != v[w - 1]) {
            v[w++] = v[i];
        }
    }
    p->b.len = w * sizeof(*v);
}

/* Whether the first n (sorted) entries hold pid. */
static bool pidvec_has(const struct pidvec *p, size_t n, pid_t pid)
{
    return n > 0 && bsearch(&pid, pidvec_v(p), n, sizeof(pid), pid_cmp) != NULL;
}

/* Streams cgroup.procs of dfd (it can be longer than any fixed buffer) and calls cb for
 * each pid. */
static int procs_for_each(int dfd, int (*cb)(pid_t pid, void *ud), void *ud)
{
    scoped_close int fd = openat(dfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    char buf[4096];
    uint64_t cur = 0;
    bool in_num = false;
    for (;;) {
        ssize_t n = RETRY_EINTR(read(fd, buf, sizeof(buf)));
        if (n < 0) {
            return -errno;
        }
        if (n == 0) {
            return in_num ? cb((pid_t)cur, ud) : 0;
        }
        for (ssize_t i = 0; i < n; i++) {
            char c = buf[i];
            if (c >= '0' && c <= '9') {
                cur = cur * 10 + (uint64_t)(c - '0');
                if (cur > INT_MAX) {
                    return -EPROTO;
                }
                in_num = true;
            } else if (in_num) {
                int r = cb((pid_t)cur, ud);
                if (r < 0) {
                    return r;
                }
                cur = 0;
                in_num = false;
            }
        }
    }
}

static int count_cb(pid_t pid, void *ud)
{
    (void)pid;
    (*(int *)ud)++;
    return 0;
}

int cgroup_v1_procs_count(int dfd)
{
    int count = 0;
    int r = procs_for_each(dfd, count_cb, &count);
    return r < 0 ? r : count;
}

int cgroup_v1_procs_empty(int dfd)
{
    scoped_close int fd = openat(dfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    char buf[32];
    ssize_t n = RETRY_EINTR(read(fd, buf, sizeof(buf)));
    if (n < 0) {
        return -errno;
    }
    return n == 0 ? 1 : 0;
}

static int procs_collect(const int *dfds, size_t n, struct pidvec *ret)
{
    for (size_t i = 0; i < n; i++) {
        if (dfds[i] < 0) {
            continue;
        }
        int r = procs_for_each(dfds[i], pidvec_add_cb, ret);
        if (r < 0 && r != -ENOENT) {
            return r;
        }
    }
    pidvec_sort_unique(ret);
    return 0;
}

static void close_all(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fds[i] = fd_close(fds[i]);
    }
}

/* One round: pidfds for every listed pid, then the list again, then signals to those still
 * listed. A pid that left and was recycled between the reads is not in the second list, and
 * a process that died after its pidfd was opened cannot be confused with a newcomer. */
static int kill_round(const int *dfds, size_t n, struct pidvec *done, size_t *listed_n)
{
    scoped(pidvec_freep) struct pidvec listed = {0};
    scoped(pidvec_freep) struct pidvec still = {0};
    int r = procs_collect(dfds, n, &listed);
    size_t n_listed = pidvec_n(&listed);
    const pid_t *lv = pidvec_v(&listed);
    *listed_n = n_listed;
    if (r < 0 || n_listed == 0) {
        return r;
    }
    scoped_free int *fds = xmalloc(n_listed * sizeof(*fds));
    bool nosys = false;
    for (size_t i = 0; i < n_listed; i++) {
        fds[i] = pidfd_open(lv[i], 0);
        if (fds[i] < 0 && errno == ENOSYS) {
            nosys = true;
        } else if (fds[i] < 0 && errno != ESRCH) {
            r = -errno;
            close_all(fds, i);
            return r;
        }
    }
    r = procs_collect(dfds, n, &still);
    int signalled = 0;
    size_t done_sorted = pidvec_n(done); /* earlier rounds; this round's pids are distinct */
    for (size_t i = 0; r == 0 && i < n_listed; i++) {
        pid_t pid = lv[i];
        if (!pidvec_has(&still, pidvec_n(&still), pid)) {
            continue;
        }
        int k = -1;
        if (fds[i] >= 0) {
            k = pidfd_send_signal(fds[i], SIGKILL, NULL, 0);
        } else if (nosys) {
            /* COMPAT(linux < 5.3): no pidfds; the pid was listed in our cgroup a moment ago,
             * which is the best check left. */
            k = kill(pid, SIGKILL);
        }
        if (k == 0 && !pidvec_has(done, done_sorted, pid)) {
            (void)pidvec_add_cb(pid, done);
            signalled++;
        }
    }
    close_all(fds, n_listed);
    pidvec_sort_unique(done);
    return r < 0 ? r : signalled;
}

int cgroup_v1_procs_kill(const int *dfds, size_t n)
{
    scoped(pidvec_freep) struct pidvec done = {0};
    int total = 0;
    long sleep_ns = 1000000L;
    for (unsigned round = 0; round < V1_KILL_ROUNDS; round++) {
        size_t listed = 0;
        int r = kill_round(dfds, n, &done, &listed);
        if (r < 0) {
            return r;
        }
        if (listed == 0) {
            return total;
        }
        total += r;
        /* SIGKILLed processes take a moment to leave (freeing a large address space); wait
         * a little, then look again for them and for anything forked meanwhile. */
        struct timespec ts = {0, sleep_ns};
        (void)nanosleep(&ts, NULL);
        if (sleep_ns < V1_KILL_SLEEP_MAX_NS) {
            sleep_ns *= 2;
        }
    }
    /* Still populated: the caller's cgroup_is_empty decides what happens next. */
    return total;
}

/* Whether an earlier sbxd with io limits left our subtree in the blkio hierarchy (killed,
 * say): then this one uses blkio too, without limits, so that the reaper empties and
 * removes what is there and the subtree goes at exit; the next start has none. */
static bool v1_io_left_behind(const struct cgroup_place *p, const char *parent, const char *name)
{
    scoped_free char *base = NULL;
    if (!p->mnt || cgroup_root_place_base(p, parent, &base, NULL) < 0) {
        return false;
    }
    scoped_free char *path = xasprintf("%s/%s", base, name);
    if (access(path, F_OK) < 0) {
        return false;
    }
    log_info("path=%s msg=\"blkio subtree of an earlier sbxd with io limits: used for this run, "
             "to remove what it left\"",
             path);
    return true;
}

static int v1_root_open(struct cgroup_root *root, const struct cgroup_sys *sys, const char *parent,
                        struct err *e)
{
    dev_t devs[CGROUP_HIER_MAX] = {0};
    for (size_t c = 0; c < CGROUP_CTRL_COUNT; c++) {
        const struct cgroup_place *p = &sys->v1[c];
        const char *cname = cgroup_ctrl_name((enum cgroup_ctrl)c);
        if (c == CGROUP_CTRL_IO && !root->want_io && !v1_io_left_behind(p, parent, root->name)) {
            continue; /* no pool limits io: no blkio cgroups, no attach to them */
        }
        if (!p->mnt) {
            if (c == CGROUP_CTRL_CPUACCT) {
                /* Only reports usage: without it cpu_ns reads 0. */
                log_debug("msg=\"cpuacct not mounted, cpu usage reads 0\"");
                continue;
            }
            return err_setx(e, -ENODEV, "cgroup v1: the %s controller is not mounted%s", cname,
                            c == CGROUP_CTRL_IO ? " (a pool sets io limits)" : "");
        }
        int found = -1;
        for (size_t h = 0; h < root->nhier; h++) {
            if (devs[h] == p->dev) {
                found = (int)h;
            }
        }
        if (found < 0) {
            scoped_free char *base = NULL;
            int r = cgroup_root_place_base(p, parent, &base, e);
            if (r < 0) {
                return err_prefix(e, r, "cgroup v1 %s", cname);
            }
            r = cgroup_root_hier_open(&root->hier[root->nhier], base, root->name, e);
            if (r < 0) {
                return err_prefix(e, r, "cgroup v1 %s", cname);
            }
            devs[root->nhier] = p->dev;
            found = (int)root->nhier++;
        }
        root->hier[found].ctrls |= 1u << c;
        root->ctrl_hier[c] = found;
        root->ctrl_ok[c] = true;
    }
    int mem = root->hier[root->ctrl_hier[CGROUP_CTRL_MEMORY]].dfd;
    root->v1_memsw = cgroup_file_exists(mem, "memory.memsw.limit_in_bytes");
    if (!root->v1_memsw) {
        log_debug("msg=\"no memory.memsw (swap accounting off): the memory limit does not "
                  "cover swap\"");
    }
    root->v1_tcp = cgroup_file_exists(mem, "memory.kmem.tcp.limit_in_bytes");
    if (!root->v1_tcp) {
        log_warn("msg=\"no memory.kmem.tcp: socket buffers are not limited by the sandboxes' "
                 "memory limits\"");
    }
    root->has_limits = true;
    return 0;
}

uint64_t cgroup_v1_socket_limit(uint64_t memory_bytes)
{
    uint64_t q = memory_bytes / 4;
    return q > CGROUP_V1_SOCKET_MIN ? q : CGROUP_V1_SOCKET_MIN;
}

/* One blkio throttle rule, "MAJ:MIN value", for dev; a value of 0 sets none. */
static int v1_io_rule(int dfd, const char *file, dev_t dev, uint64_t v, struct err *e)
{
    if (v == 0) {
        return 0;
    }
    char s[64];
    (void)snprintf(s, sizeof(s), "%u:%u %llu", major(dev), minor(dev), (unsigned long long)v);
    return cgroup_file_write(dfd, file, s, e);
}

static int v1_set_limits(struct cgroup *cg, const struct cgroup_limits *lim, struct err *e)
{
    int r;
    int mem = cgroup_ctrl_dfd(cg, CGROUP_CTRL_MEMORY);
    int cpu = cgroup_ctrl_dfd(cg, CGROUP_CTRL_CPU);
    int pids = cgroup_ctrl_dfd(cg, CGROUP_CTRL_PIDS);
    if (lim->memory_bytes > 0 && mem >= 0) {
        r = cgroup_file_write_u64(mem, "memory.limit_in_bytes", lim->memory_bytes, e);
        if (r < 0) {
            return r;
        }
        /* memsw may never be below limit_in_bytes, so it comes second; equal to it means
         * the sandbox gets no swap. */
        if (cg->root->v1_memsw) {
            r = cgroup_file_write_u64(mem, "memory.memsw.limit_in_bytes", lim->memory_bytes, e);
            if (r < 0) {
                return r;
            }
        }
        /* SECURITY: v1 charges socket buffers (TCP, UDP) to a cgroup only once it has a
         * limit of their own, and then to that limit, not limit_in_bytes. Without one a
         * task held 448 MiB of TCP buffers on loopback while its cgroup counted 6 MiB, and
         * enough of them exhaust the host's tcp_mem: every TCP socket of the host then
         * stalls. (v2 charges them to memory.max.) */
        if (cg->root->v1_tcp) {
            r = cgroup_file_write_u64(mem, "memory.kmem.tcp.limit_in_bytes",
                                      cgroup_v1_socket_limit(lim->memory_bytes), e);
            if (r < 0) {
                return r;
            }
        }
    }
    if (lim->cpu > 0 && cpu >= 0) {
        r = cgroup_file_write_u64(cpu, "cpu.cfs_period_us", CGROUP_CPU_PERIOD_US, e);
        if (r < 0) {
            return r;
        }
        r = cgroup_file_write_u64(cpu, "cpu.cfs_quota_us", cgroup_cpu_quota_us(lim->cpu), e);
        if (r < 0) {
            return r;
        }
    }
    if (lim->pids > 0 && pids >= 0) {
        r = cgroup_file_write_u64(pids, "pids.max", lim->pids, e);
        if (r < 0) {
            return r;
        }
    }
    if (lim->io_dev) {
        int io = cgroup_ctrl_dfd(cg, CGROUP_CTRL_IO);
        if (io < 0) {
            return err_setx(e, -ENODEV, "io limits without the blkio controller (CGROUP_ROOT_IO)");
        }
        r = v1_io_rule(io, "blkio.throttle.read_bps_device", lim->io_dev, lim->io_read_bps, e);
        if (r == 0) {
            r = v1_io_rule(io, "blkio.throttle.read_iops_device", lim->io_dev, lim->io_read_iops,
                           e);
        }
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

static int v1_memory_usage(struct cgroup *cg, int mem, struct cgroup_usage *u)
{
    int r =
        tolerate(cgroup_file_cg_read_u64(cg, mem, "memory.max_usage_in_bytes", &u->mem_peak_bytes));
    if (r < 0) {
        return r;
    }
    r = cgroup_file_cg_read_key(cg, mem, "memory.oom_control", "oom_kill", &u->oom_kills);
    if (r == 0) {
        u->oom = u->oom_kills > 0;
        return 0;
    }
    if (r != -ENODATA) {
        return tolerate(r);
    }
    /* COMPAT(linux < 4.13): no oom_kill counter. A failed charge with the peak at the limit
     * is the best sign left that the limit was hit. */
    uint64_t failcnt = 0, limit = 0;
    r = tolerate(cgroup_file_read_u64(mem, "memory.failcnt", &failcnt));
    if (r == 0) {
        r = tolerate(cgroup_file_read_u64(mem, "memory.limit_in_bytes", &limit));
    }
    if (r < 0) {
        return r;
    }
    u->oom =
        failcnt > 0 && limit > 0 && u->mem_peak_bytes >= limit - (limit >> V1_NEAR_LIMIT_SHIFT);
    return 0;
}

static int v1_usage(struct cgroup *cg, struct cgroup_usage *ret)
{
    struct cgroup_usage u = {0};
    int r;
    int acct = cgroup_ctrl_dfd(cg, CGROUP_CTRL_CPUACCT);
    if (acct >= 0) {
        r = tolerate(cgroup_file_cg_read_u64(cg, acct, "cpuacct.usage", &u.cpu_ns));
        if (r < 0) {
            return r;
        }
    }
    int mem = cgroup_ctrl_dfd(cg, CGROUP_CTRL_MEMORY);
    if (mem >= 0) {
        r = v1_memory_usage(cg, mem, &u);
        if (r < 0) {
            return r;
        }
    }
    int pids = cgroup_ctrl_dfd(cg, CGROUP_CTRL_PIDS);
    if (pids >= 0) {
        r = tolerate(cgroup_file_cg_read_key(cg, pids, "pids.events", "max", &u.pids_max_hits));
        if (r < 0) {
            return r;
        }
    }
    *ret = u;
    return 0;
}

static bool v1_is_empty(struct cgroup *cg)
{
    /* Every process of the last sandbox is in every hierarchy: the pids controller's count,
     * which drops only when a process is reaped (after it left cgroup.procs), tells for all,
     * in one pread instead of an open, read and close of each cgroup.procs. */
    int pids = cgroup_ctrl_dfd(cg, CGROUP_CTRL_PIDS);
    uint64_t n = 0;
    if (cg->attached_all && pids >= 0 &&
        cgroup_file_cg_read_u64(cg, pids, "pids.current", &n) == 0) {
        return n == 0;
    }
    for (size_t h = 0; h < cg->root->nhier; h++) {
        if (cg->dfd[h] < 0) {
            continue;
        }
        int r = cgroup_v1_procs_empty(cg->dfd[h]);
        /* Unreadable other than gone: say busy, so nobody removes a cgroup still in use. */
        if (r == 0 || (r < 0 && r != -ENOENT)) {
            return false;
        }
    }
    return true;
}

static int v1_kill_all(struct cgroup *cg)
{
    /* A process may be in some hierarchies only (attach interrupted): read every one. */
    return cgroup_v1_procs_kill(cg->dfd, cg->root->nhier);
}

/* The peak and failcnt start again from the current usage; the leftover page cache a
 * previous sandbox faulted in stays charged here, reclaimable under the limit. */
static int v1_reset(struct cgroup *cg, struct err *e)
{
    int mem = cgroup_ctrl_dfd(cg, CGROUP_CTRL_MEMORY);
    if (mem < 0) {
        return 0;
    }
    int r = cgroup_file_cg_write(cg, mem, "memory.max_usage_in_bytes", "0", e);
    if (r == 0) {
        r = cgroup_file_cg_write(cg, mem, "memory.failcnt", "0", e);
    }
    return r;
}

const struct cgroup_ops cgroup_v1_ops = {
    .version = CGROUP_V1,
    .root_open = v1_root_open,
    .set_limits = v1_set_limits,
    .usage = v1_usage,
    .reset = v1_reset,
    .is_empty = v1_is_empty,
    .kill_all = v1_kill_all,
};
