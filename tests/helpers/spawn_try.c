/* SPDX-License-Identifier: MIT */
/* spawn_try: creates one sandbox without the daemon (cgroup, spawn_sandbox, CTL_SETUP), runs
 * argv in it with its output relayed, prints the result and tears everything down; with -b N
 * it measures N sandboxes instead. A developer tool: it exits on the first failure.
 *
 * Build (from the repository root):
 *   gcc -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Idaemon tests/helpers/spawn_try.c \
 *       daemon/spawn.c daemon/sys.c daemon/child.c daemon/cgroup.c daemon/cgroup_v1.c \
 *       daemon/cgroup_v2.c daemon/util.c daemon/err.c daemon/log.c daemon/alloc.c \
 *       -o build/spawn_try -lpthread
 * Usage: build/spawn_try [-C|-1|-2] [-U] [-i IMAGE_ROOT] [-b N] [--] ARGV...
 *   -C no cgroup, -1/-2 force cgroup v1/v2 (default: auto), -U no user namespace,
 *   -b N: N sandboxes, report median timings.
 *   SBX_INIT overrides build/sbxd-init. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "wire/ctl.h"
#include "sandbox/spawn.h"
#include "lib/sys.h"
#include "lib/util.h"

struct try_opts {
    bool cgroup;
    enum cgroup_version version;
    bool userns;
    const char *image;
    int bench;
    char init_path[PATH_MAX];
    char **argv;
    int argc;
};

static void die(const char *what, int r, const struct err *e)
{
    fprintf(stderr, "spawn_try: %s: %s (%s)\n", what, e ? err_msg(e) : "", err_name(r));
    exit(1);
}

static int send_setup(int ctl, const struct try_opts *o)
{
    struct ctl_setup s;
    memset(&s, 0, sizeof(s));
    s.magic = CTL_MAGIC;
    s.type = CTL_SETUP;
    s.uid = 10001;
    s.gid = 10001;
    s.tmp_size = 64u << 20;
    s.work_size = 64u << 20;
    (void)str_copy(s.hostname, "spawntry", sizeof(s.hostname));
    (void)str_copy(s.image_root, o->image, sizeof(s.image_root));
    return send(ctl, &s, sizeof(s), MSG_NOSIGNAL) == (ssize_t)sizeof(s) ? 0 : -errno;
}

static int recv_event(int ctl, struct ctl_event *ev)
{
    ssize_t n = RETRY_EINTR(recv(ctl, ev, sizeof(*ev), 0));
    if (n < 0) {
        return -errno;
    }
    if (n != (ssize_t)sizeof(*ev) || ev->magic != CTL_MAGIC) {
        return -EPROTO;
    }
    return 0;
}

static int send_task(int ctl, char **argv, int argc, const int fds[3])
{
    static const char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"};
    static char buf[CTL_TASK_DATA_MAX];
    struct ctl_task *t = (struct ctl_task *)buf;
    memset(t, 0, sizeof(*t));
    t->magic = CTL_MAGIC;
    t->type = CTL_TASK;
    t->argc = (uint32_t)argc;
    t->envc = ARRAY_SIZE(env);
    t->nofile = 256;
    (void)str_copy(t->cwd, "/tmp", sizeof(t->cwd));
    size_t off = sizeof(*t);
    for (int i = 0; i < argc + (int)ARRAY_SIZE(env); i++) {
        const char *s = i < argc ? argv[i] : env[i - argc];
        size_t n = strlen(s) + 1;
        if (off + n > sizeof(buf)) {
            return -E2BIG;
        }
        memcpy(buf + off, s, n);
        off += n;
    }
    t->data_len = (uint32_t)(off - sizeof(*t));
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(3 * sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof(cm));
    struct iovec iov = {buf, off};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = cm.space,
                         .msg_controllen = sizeof(cm.space)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(3 * sizeof(int));
    memcpy(CMSG_DATA(c), fds, 3 * sizeof(int));
    return sendmsg(ctl, &msg, MSG_NOSIGNAL) == (ssize_t)off ? 0 : -errno;
}

/* The time spawn_sandbox itself took in the last start(). */
static uint64_t spawn_only_ns;

/* Spawns and sets up one sandbox: 0 with the time to READY in *ret_ns, or -1 after printing
 * why (the sandbox is then already gone). */
static int start(const struct try_opts *o, struct cgroup *cg, int *ret_ctl,
                 struct spawn_result *res, uint64_t *ret_ns)
{
    struct err e = ERR_INIT;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        die("socketpair", -errno, NULL);
    }
    struct spawn_plan plan = {
        .init_path = o->init_path,
        .userns = o->userns,
        .host_id_base = 100000,
        .id_count = 65536,
        .cg = cg,
        .ctl_fd = sp[1],
    };
    uint64_t t0 = clock_now_ns();
    int r = spawn_sandbox(&plan, res, &e);
    spawn_only_ns = clock_now_ns() - t0;
    (void)fd_close(sp[1]);
    if (r < 0) {
        fprintf(stderr, "spawn_try: spawn_sandbox: %s\n", err_msg(&e));
        (void)fd_close(sp[0]);
        return -1;
    }
    struct ctl_event ev;
    r = send_setup(sp[0], o);
    if (r == 0) {
        r = recv_event(sp[0], &ev);
    }
    *ret_ctl = sp[0];
    if (r < 0) {
        fprintf(stderr, "spawn_try: setup exchange: %s\n", err_name(r));
        return -1;
    }
    *ret_ns = clock_now_ns() - t0;
    if (ev.type != CTL_READY) {
        fprintf(stderr, "spawn_try: setup failed: stage %u err %s: %s\n", ev.stage,
                err_name(ev.err), ev.msg);
        return -1;
    }
    return 0;
}

static void stop(struct spawn_result *res, int ctl)
{
    siginfo_t info;
    (void)sys_pidfd_send_signal(res->pidfd, SIGKILL);
    memset(&info, 0, sizeof(info));
    (void)sys_pidfd_wait(res->pidfd, &info, WEXITED);
    res->pidfd = fd_close(res->pidfd);
    (void)fd_close(ctl);
}

/* Relays the task's stdout and stderr until CTL_EXITED (or EXEC_FAILED) and both EOFs;
 * after the exit, output still held open by daemonized children is not waited for. */
static int run_task(int ctl, const struct try_opts *o, bool relay, struct ctl_event *ret)
{
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
        die("pipe2", -errno, NULL);
    }
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int fds[3] = {relay ? 0 : null, out[1], err[1]};
    int r = send_task(ctl, o->argv, o->argc, fds);
    (void)fd_close(null);
    (void)fd_close(out[1]);
    (void)fd_close(err[1]);
    if (r < 0) {
        die("send task", r, NULL);
    }
    struct pollfd p[3] = {{ctl, POLLIN, 0}, {out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    bool exited = false;
    int open_pipes = 2;
    while (!exited || open_pipes > 0) {
        int n = poll(p, 3, exited ? 200 : -1);
        if (n == 0) {
            break;
        }
        if (p[0].revents) {
            struct ctl_event ev;
            r = recv_event(ctl, &ev);
            if (r < 0) {
                die("receive event", r, NULL);
            }
            if (ev.type == CTL_EXITED || ev.type == CTL_EXEC_FAILED) {
                *ret = ev;
                exited = true;
                p[0].fd = -1;
            }
        }
        for (int i = 1; i < 3; i++) {
            if (p[i].revents) {
                char buf[65536];
                ssize_t k = read(p[i].fd, buf, sizeof(buf));
                if (k <= 0) {
                    p[i].fd = fd_close(p[i].fd);
                    open_pipes--;
                } else if (relay) {
                    (void)fd_write_all(i, buf, (size_t)k);
                }
            }
        }
    }
    for (int i = 1; i < 3; i++) {
        p[i].fd = fd_close(p[i].fd);
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_u64);
    printf("%-22s median %7.3f ms  p90 %7.3f ms  min %7.3f ms  max %7.3f ms\n", what,
           (double)v[n / 2] / 1e6, (double)v[n * 9 / 10] / 1e6, (double)v[0] / 1e6,
           (double)v[n - 1] / 1e6);
}

static void parse(int argc, char **argv, struct try_opts *o)
{
    int c;
    o->cgroup = true;
    o->userns = true;
    o->image = "/";
    while ((c = getopt(argc, argv, "+CU12i:b:")) != -1) {
        if (c == '1' || c == '2') {
            o->version = c == '1' ? CGROUP_V1 : CGROUP_V2;
        } else if (c == 'C') {
            o->cgroup = false;
        } else if (c == 'U') {
            o->userns = false;
        } else if (c == 'i') {
            o->image = optarg;
        } else if (c == 'b') {
            o->bench = atoi(optarg);
        } else {
            exit(2);
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "usage: spawn_try [-C|-1|-2] [-U] [-i IMAGE] [-b N] [--] ARGV...\n");
        exit(2);
    }
    o->argv = argv + optind;
    o->argc = argc - optind;
    const char *init = getenv("SBX_INIT");
    if (!realpath(init ? init : "build/sbxd-init", o->init_path)) {
        die("realpath of sbxd-init", -errno, NULL);
    }
}

int main(int argc, char **argv)
{
    struct try_opts o;
    struct err e = ERR_INIT;
    struct cgroup_root *root = NULL;
    struct cgroup *cg = NULL;
    memset(&o, 0, sizeof(o));
    parse(argc, argv, &o);
    signal(SIGPIPE, SIG_IGN);

    if (o.cgroup) {
        char name[64];
        (void)snprintf(name, sizeof(name), "sbx-spawntry-%d", (int)getpid());
        struct cgroup_limits lim = {.memory_bytes = 256u << 20, .cpu = 1.0, .pids = 64};
        int r = cgroup_root_open(o.version, NULL, name, &root, &e);
        if (r < 0) {
            die("cgroup_root_open", r, &e);
        }
        r = cgroup_create(root, "sb0", &lim, &cg, &e);
        if (r < 0) {
            die("cgroup_create", r, &e);
        }
        fprintf(stderr, "spawn_try: %s\n", cgroup_root_describe(root));
    }
    int n = o.bench > 0 ? o.bench : 1;
    uint64_t *ready = calloc((size_t)n, sizeof(uint64_t));
    uint64_t *task = calloc((size_t)n, sizeof(uint64_t));
    uint64_t *stopt = calloc((size_t)n, sizeof(uint64_t));
    uint64_t *spawnt = calloc((size_t)n, sizeof(uint64_t));
    struct ctl_event ev;
    memset(&ev, 0, sizeof(ev));
    for (int i = 0; i < n; i++) {
        struct spawn_result res = {-1, -1};
        int ctl = -1;
        if (start(&o, cg, &ctl, &res, &ready[i]) < 0) {
            if (res.pidfd >= 0) {
                stop(&res, ctl);
            }
            o.bench = 0;
            break;
        }
        spawnt[i] = spawn_only_ns;
        uint64_t t0 = clock_now_ns();
        (void)run_task(ctl, &o, o.bench == 0, &ev);
        task[i] = clock_now_ns() - t0;
        t0 = clock_now_ns();
        stop(&res, ctl);
        stopt[i] = clock_now_ns() - t0;
        if (o.bench == 0 || ev.type != CTL_EXITED) {
            if (ev.type == CTL_EXITED) {
                fprintf(stderr,
                        "spawn_try: exited %s %d, utime %llu us, stime %llu us, "
                        "maxrss %llu KiB; ready in %.3f ms, task %.3f ms\n",
                        WIFEXITED(ev.wstatus) ? "status" : "signal",
                        WIFEXITED(ev.wstatus) ? WEXITSTATUS(ev.wstatus) : WTERMSIG(ev.wstatus),
                        (unsigned long long)ev.utime_us, (unsigned long long)ev.stime_us,
                        (unsigned long long)ev.maxrss_kb, (double)ready[i] / 1e6,
                        (double)task[i] / 1e6);
            } else {
                fprintf(stderr, "spawn_try: exec failed: stage %u %s: %s\n", ev.stage,
                        err_name(ev.err), ev.msg);
                if (o.bench) {
                    o.bench = 0;
                    break;
                }
            }
        }
    }
    if (o.bench > 0) {
        report("spawn_sandbox", spawnt, n);
        report("spawn+setup->READY", ready, n);
        report("task TASK->EXITED", task, n);
        report("kill+reap", stopt, n);
    }
    if (cg) {
        /* The pid namespace dies with init, but its members exit asynchronously. */
        for (int i = 0; i < 100 && !cgroup_is_empty(cg); i++) {
            usleep(10000);
        }
        if (!cgroup_is_empty(cg)) {
            fprintf(stderr, "spawn_try: cgroup not empty after kill\n");
        }
        int r = cgroup_remove(cg, &e);
        if (r < 0) {
            fprintf(stderr, "spawn_try: cgroup_remove: %s\n", err_msg(&e));
        }
        cg = cgroup_free(cg);
        root = cgroup_root_free(root);
    }
    free(ready);
    free(task);
    free(stopt);
    free(spawnt);
    return ev.type == CTL_EXITED && WIFEXITED(ev.wstatus) ? WEXITSTATUS(ev.wstatus) : 1;
}
