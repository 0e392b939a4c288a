/* SPDX-License-Identifier: MIT */
/* Tests of spawn.c, child.c, sbxd-init and mount.c together: each test spawns real sandboxes
 * (no cgroup) and runs build/probe in them through the control protocol. They need root,
 * build/sbxd-init and build/probe (SBX_INIT / SBX_PROBE override), and skip without them.
 * The probe runs from a throw-away image under /tmp: usr/bin/probe and bin -> usr/bin. The
 * kept sandboxes' tests (a session's: CTL_TASK_KEEP) run the host's tools, in sandboxes made
 * from scratch and by a fork server (forkserver.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wire/ctl.h"
#include "lib/err.h"
#include "sandbox/forkserver.h"
#include "sandbox/seccomp.h"
#include "sandbox/spawn.h"
#include "lib/sys.h"
#include "lib/util.h"

#define TASK_UID 10001
#define WAIT_MS 10000

struct fixture {
    const char *skip_reason; /* non-NULL: every test skips */
    char init_path[PATH_MAX];
    char image[PATH_MAX]; /* the probe image */
};

struct box {
    struct spawn_result res;
    int ctl;
    uint32_t task_pid;   /* CTL_READY's: the task child's, cloned at setup (or a kept
                            task's report's next_pid) */
    int work_fd;         /* CTL_READY's /work root */
    uint32_t task_flags; /* what box_send_task sends: CTL_TASK_KEEP for a kept sandbox */
};

struct run {
    uint32_t type; /* CTL_EXITED or CTL_EXEC_FAILED; 0 when nothing came */
    int32_t err;
    uint32_t stage;
    int wstatus;
    uint32_t pid;      /* the task's: CTL_READY's, which CTL_EXITED repeats */
    uint32_t denials;  /* CTL_EXITED's seccomp_denials */
    uint32_t next_pid; /* a kept task's next task child */
    char msg[128];
    char out[16384];
    size_t out_len;
};

static struct fixture fx;

/* ---- helpers ---- */

static int copy_file(const char *from, const char *to, mode_t mode)
{
    scoped_close int in = open(from, O_RDONLY | O_CLOEXEC);
    scoped_close int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    char buf[65536];
    ssize_t n;
    if (in < 0 || out < 0) {
        return -errno;
    }
    while ((n = read(in, buf, sizeof(buf))) > 0) {
        int r = fd_write_all(out, buf, (size_t)n);
        if (r < 0) {
            return r;
        }
    }
    return n < 0 ? -errno : 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int group_setup(void **state)
{
    (void)state;
    const char *init = getenv("SBX_INIT");
    const char *probe = getenv("SBX_PROBE");
    char probe_path[PATH_MAX];
    char path[PATH_MAX + 32];

    if (geteuid() != 0) {
        fx.skip_reason = "needs root";
        return 0;
    }
    if (!realpath(init ? init : "build/sbxd-init", fx.init_path)) {
        fx.skip_reason = "build/sbxd-init missing (or set SBX_INIT)";
        return 0;
    }
    if (!realpath(probe ? probe : "build/probe", probe_path)) {
        fx.skip_reason = "build/probe missing (or set SBX_PROBE)";
        return 0;
    }
    (void)str_copy(fx.image, "/tmp/sbx-test-spawn-XXXXXX", sizeof(fx.image));
    if (!mkdtemp(fx.image)) {
        return -1;
    }
    /* mkdtemp makes it 0700: the image must be traversable by the task's uid. */
    (void)chmod(fx.image, 0755);
    (void)snprintf(path, sizeof(path), "%s/usr", fx.image);
    (void)mkdir(path, 0755);
    (void)snprintf(path, sizeof(path), "%s/usr/bin", fx.image);
    (void)mkdir(path, 0755);
    (void)snprintf(path, sizeof(path), "%s/bin", fx.image);
    if (symlink("usr/bin", path) < 0) {
        return -1;
    }
    (void)snprintf(path, sizeof(path), "%s/usr/bin/probe", fx.image);
    return copy_file(probe_path, path, 0755) < 0 ? -1 : 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (fx.image[0]) {
        (void)nftw(fx.image, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    return 0;
}

static void need_prereqs(void)
{
    if (fx.skip_reason) {
        print_message("skipping: %s\n", fx.skip_reason);
        skip();
    }
}

static void setup_init(struct ctl_setup *s, const char *image)
{
    memset(s, 0, sizeof(*s));
    s->magic = CTL_MAGIC;
    s->type = CTL_SETUP;
    s->uid = TASK_UID;
    s->gid = TASK_UID;
    s->tmp_size = 16u << 20;
    s->work_size = 16u << 20;
    (void)str_copy(s->hostname, "sbx-test", sizeof(s->hostname));
    (void)str_copy(s->image_root, image, sizeof(s->image_root));
}

static int recv_event(int ctl, struct ctl_event *ev, int timeout_ms)
{
    struct pollfd p = {ctl, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) {
        return -ETIMEDOUT;
    }
    ssize_t n = recv(ctl, ev, sizeof(*ev), 0);
    if (n == 0) {
        return -EPIPE;
    }
    if (n != (ssize_t)sizeof(*ev) || ev->magic != CTL_MAGIC) {
        return n < 0 ? -errno : -EPROTO;
    }
    return 0;
}

/* Spawns a sandbox and sends `packet` (len bytes) as its setup. */
static void box_spawn(struct box *b, bool userns, const void *packet, size_t len)
{
    struct err e = ERR_INIT;
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    struct spawn_plan plan = {
        .init_path = fx.init_path,
        .userns = userns,
        .host_id_base = 100000,
        .id_count = 65536,
        .cg = NULL,
        .ctl_fd = sp[1],
    };
    int r = spawn_sandbox(&plan, &b->res, &e);
    (void)fd_close(sp[1]);
    if (r < 0) {
        print_message("spawn_sandbox: %s\n", err_msg(&e));
    }
    assert_int_equal(r, 0);
    assert_true(b->res.pid > 0);
    assert_true(b->res.pidfd >= 0);
    b->ctl = sp[0];
    b->work_fd = -1;
    b->task_flags = 0;
    assert_int_equal(send(b->ctl, packet, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* Expects CTL_READY, with its /work root: a tmpfs directory, mode 0755, owned by the task's
 * user (in the sandbox; host_uid outside). */
static void box_ready(struct box *b, uid_t host_uid)
{
    struct ctl_event ev;
    struct pollfd p = {b->ctl, POLLIN, 0};
    assert_int_equal(poll(&p, 1, WAIT_MS), 1);
    int fds[2] = {-1, -1};
    size_t got = 0;
    bool bad = false;
    assert_int_equal(fd_recv(b->ctl, &ev, sizeof(ev), fds, 2, &got, &bad, 0), sizeof(ev));
    assert_false(bad);
    assert_int_equal(ev.magic, CTL_MAGIC);
    if (ev.type != CTL_READY) {
        print_message("setup failed: stage %u %s: %s\n", ev.stage, err_name(ev.err), ev.msg);
    }
    assert_int_equal(ev.type, CTL_READY);
    /* The task child is cloned before READY, as pid 2 of the sandbox (init is 1). */
    assert_int_equal(ev.pid, 2);
    b->task_pid = ev.pid;
    b->task_flags = 0;
    assert_int_equal(got, 1); /* no egress proxy asked for */
    b->work_fd = fds[0];
    struct stat st;
    struct statfs sfs;
    assert_int_equal(fstat(b->work_fd, &st), 0);
    assert_int_equal(fstatfs(b->work_fd, &sfs), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0755);
    assert_int_equal(st.st_uid, host_uid);
    assert_int_equal(sfs.f_type, TMPFS_MAGIC);
    assert_int_equal(fcntl(b->work_fd, F_GETFD), FD_CLOEXEC);
}

/* Spawns a sandbox with the standard setup and expects CTL_READY. */
static void box_start(struct box *b, const char *image, bool userns)
{
    struct ctl_setup s;
    setup_init(&s, image);
    box_spawn(b, userns, &s, sizeof(s));
    box_ready(b, userns ? 100000 + TASK_UID : TASK_UID);
}

static void box_stop(struct box *b)
{
    siginfo_t info;
    assert_int_equal(sys_pidfd_send_signal(b->res.pidfd, SIGKILL), 0);
    memset(&info, 0, sizeof(info));
    assert_int_equal(sys_pidfd_wait(b->res.pidfd, &info, WEXITED), 0);
    assert_int_equal(info.si_pid, b->res.pid);
    b->res.pidfd = fd_close(b->res.pidfd);
    b->ctl = fd_close(b->ctl);
    b->work_fd = fd_close(b->work_fd);
}

/* Sends one packet with nfds fds attached. */
static int send_with_fds(int ctl, const void *buf, size_t len, const int *fds, size_t nfds)
{
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(4 * sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof(cm));
    struct iovec iov = {(void *)buf, len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        assert_true(nfds <= 4);
        msg.msg_control = cm.space;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    return sendmsg(ctl, &msg, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

/* Sends a CTL_TASK with stdin in_fd and stdout and stderr both out_fd. */
static int box_send_task(struct box *b, const char *const *argv, const char *const *env,
                         const char *cwd, int in_fd, int out_fd)
{
    static char buf[CTL_TASK_DATA_MAX];
    struct ctl_task *t = (struct ctl_task *)buf;
    memset(t, 0, sizeof(*t));
    t->magic = CTL_MAGIC;
    t->type = CTL_TASK;
    t->flags = b->task_flags;
    t->nofile = 64;
    (void)str_copy(t->cwd, cwd, sizeof(t->cwd));
    size_t off = sizeof(*t);
    for (int pass = 0; pass < 2; pass++) {
        const char *const *v = pass == 0 ? argv : env;
        for (; v && *v; v++) {
            size_t n = strlen(*v) + 1;
            assert_true(off + n <= sizeof(buf));
            memcpy(buf + off, *v, n);
            off += n;
            if (pass == 0) {
                t->argc++;
            } else {
                t->envc++;
            }
        }
    }
    t->data_len = (uint32_t)(off - sizeof(*t));
    int fds[3] = {in_fd, out_fd, out_fd};
    return send_with_fds(b->ctl, buf, off, fds, 3);
}

/* Runs one task and collects its combined output until its exit and EOF. */
static void box_run_full(struct box *b, const char *const *argv, const char *const *env,
                         const char *cwd, const char *input, struct run *ret)
{
    int in[2], out[2];
    memset(ret, 0, sizeof(*ret));
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    if (input) {
        assert_int_equal(fd_write_all(in[1], input, strlen(input)), 0);
    }
    in[1] = fd_close(in[1]);
    assert_int_equal(box_send_task(b, argv, env, cwd, in[0], out[1]), 0);
    in[0] = fd_close(in[0]);
    out[1] = fd_close(out[1]);

    struct pollfd p[2] = {{b->ctl, POLLIN, 0}, {out[0], POLLIN, 0}};
    uint64_t deadline = clock_now_ns() + (uint64_t)WAIT_MS * 1000000u;
    while ((ret->type == 0 || p[1].fd >= 0) && clock_now_ns() < deadline) {
        int n = poll(p, 2, ret->type ? 500 : 1000);
        if (n == 0 && ret->type) {
            break; /* exited; something else holds the pipe */
        }
        if (p[0].revents) {
            struct ctl_event ev;
            assert_int_equal(recv_event(b->ctl, &ev, 0), 0);
            {
                /* Nothing comes when the task starts: only its end. */
                assert_true(ev.type == CTL_EXITED || ev.type == CTL_EXEC_FAILED);
                ret->pid = b->task_pid;
                if (ev.type == CTL_EXITED) {
                    assert_int_equal(ev.pid, b->task_pid);
                }
                ret->type = ev.type;
                ret->err = ev.err;
                ret->stage = ev.stage;
                ret->wstatus = ev.wstatus;
                ret->denials = ev.seccomp_denials;
                ret->next_pid = ev.next_pid;
                (void)str_copy(ret->msg, ev.msg, sizeof(ret->msg));
                if (b->task_flags & CTL_TASK_KEEP) {
                    /* The next task's process, cloned once this one's were all gone. */
                    assert_int_not_equal(ev.next_pid, 0);
                    b->task_pid = ev.next_pid;
                } else {
                    assert_int_equal(ev.next_pid, 0);
                }
                p[0].fd = -1;
            }
        }
        if (p[1].revents) {
            ssize_t k = read(out[0], ret->out + ret->out_len, sizeof(ret->out) - 1 - ret->out_len);
            if (k <= 0) {
                p[1].fd = -1;
            } else {
                ret->out_len += (size_t)k;
            }
        }
    }
    ret->out[ret->out_len] = '\0';
    (void)fd_close(out[0]);
    assert_int_not_equal(ret->type, 0);
}

static void box_run(struct box *b, const char *const *argv, struct run *ret)
{
    static const char *const env[] = {"PATH=/usr/bin:/bin", NULL};
    box_run_full(b, argv, env, "/", NULL, ret);
}

/* Starts a sandbox on the probe image, runs `probe <args...>` and stops it. */
static void probe_once(bool userns, const char *const *args, struct run *ret)
{
    const char *argv[8] = {"probe"};
    for (int i = 0; args[i]; i++) {
        assert_true(i < 6);
        argv[i + 1] = args[i];
    }
    struct box b;
    box_start(&b, fx.image, userns);
    box_run(&b, argv, ret);
    box_stop(&b);
    if (ret->type != CTL_EXITED) {
        print_message("exec failed: stage %u %s\n", ret->stage, err_name(ret->err));
    }
    assert_int_equal(ret->type, CTL_EXITED);
}

static void assert_exit(const struct run *r, int code)
{
    if (!WIFEXITED(r->wstatus) || WEXITSTATUS(r->wstatus) != code) {
        print_message("status 0x%x, output: %s\n", r->wstatus, r->out);
    }
    assert_true(WIFEXITED(r->wstatus));
    assert_int_equal(WEXITSTATUS(r->wstatus), code);
}

/* Asserts that the words after the first ':' of line are exactly the set want[0..n). */
static void assert_word_set(char *line, const char *const *want, size_t n)
{
    char *colon = strchr(line, ':');
    size_t count = 0;
    assert_non_null(colon);
    for (char *tok = strtok(colon + 1, " \n"); tok; tok = strtok(NULL, " \n")) {
        bool known = false;
        for (size_t i = 0; i < n; i++) {
            known |= strcmp(tok, want[i]) == 0;
        }
        if (!known) {
            print_message("unexpected entry '%s'\n", tok);
        }
        assert_true(known);
        count++;
    }
    assert_int_equal(count, n);
}

/* ---- tests ---- */

static void spawn_sandbox__root_is_read_only(void **state)
{
    (void)state;
    static const char *const paths[] = {"/x", "/etc/x", "/usr/x", "/dev/x",
                                        "/proc/sys/kernel/hostname"};
    need_prereqs();
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        const char *args[] = {"write", paths[i], NULL};
        char want[96];
        struct run r;
        probe_once(true, args, &r);
        (void)snprintf(want, sizeof(want), "write %s: EROFS\n", paths[i]);
        assert_string_equal(r.out, want);
        assert_exit(&r, 1);
    }
}

static void spawn_sandbox__tmp_is_writable_and_noexec(void **state)
{
    (void)state;
    const char *args[] = {"write", "/tmp/x", NULL};
    struct run r;
    need_prereqs();
    probe_once(true, args, &r);
    assert_string_equal(r.out, "write /tmp/x: ok exec=EACCES\n");
    assert_exit(&r, 0);
}

static void check_no_privileges(bool userns)
{
    const char *args[] = {"ids", NULL};
    struct run r;
    probe_once(userns, args, &r);
    assert_string_equal(r.out, "uid=10001 gid=10001 euid=10001 groups=none "
                               "CapInh=0000000000000000 CapPrm=0000000000000000 "
                               "CapEff=0000000000000000 CapBnd=0000000000000000 "
                               "CapAmb=0000000000000000 NoNewPrivs=1 Seccomp=0\n");
    assert_exit(&r, 0);
}

static void spawn_sandbox__task_has_no_privileges(void **state)
{
    (void)state;
    need_prereqs();
    check_no_privileges(true);
}

static void spawn_sandbox__task_has_no_privileges_without_userns(void **state)
{
    (void)state;
    need_prereqs();
    check_no_privileges(false);
}

static void spawn_sandbox__hostname_is_set(void **state)
{
    (void)state;
    const char *args[] = {"hostname", NULL};
    struct run r;
    need_prereqs();
    probe_once(true, args, &r);
    assert_string_equal(r.out, "hostname: sbx-test\n");
}

static void spawn_sandbox__network_is_loopback_only(void **state)
{
    (void)state;
    const char *args[] = {"net", NULL};
    struct run r;
    need_prereqs();
    probe_once(true, args, &r);
    assert_string_equal(r.out, "net: lo_connect=ECONNREFUSED ext_connect=ENETUNREACH ifaces=lo\n");
    assert_exit(&r, 0);
}

static void spawn_sandbox__proc_shows_only_the_sandbox(void **state)
{
    (void)state;
    const char *args[] = {"ls", "/proc", NULL};
    struct run r;
    need_prereqs();
    probe_once(true, args, &r);
    assert_exit(&r, 0);
    /* Exactly two processes: init (1) and the task itself. */
    char task[16];
    (void)snprintf(task, sizeof(task), "%u", r.pid);
    int pids = 0, seen_init = 0, seen_task = 0;
    for (char *tok = strtok(r.out + strlen("ls /proc:"), " \n"); tok; tok = strtok(NULL, " \n")) {
        if (tok[0] >= '0' && tok[0] <= '9') {
            pids++;
            seen_init |= strcmp(tok, "1") == 0;
            seen_task |= strcmp(tok, task) == 0;
        }
    }
    assert_int_equal(pids, 2);
    assert_true(seen_init && seen_task);
}

static void spawn_sandbox__only_the_image_is_visible(void **state)
{
    (void)state;
    static const char *const want[] = {"bin", "dev", "etc", "proc", "tmp", "usr", "work"};
    const char *args[] = {"ls", "/", NULL};
    struct run r;
    need_prereqs();
    probe_once(true, args, &r);
    assert_exit(&r, 0);
    /* No /home, /root, /var, /run, /sys, nor anything else of the host. */
    assert_word_set(r.out, want, ARRAY_SIZE(want));

    const char *home[] = {"ls", "/home", NULL};
    probe_once(true, home, &r);
    assert_string_equal(r.out, "ls /home: ENOENT\n");
}

static void spawn_sandbox__etc_is_generated(void **state)
{
    (void)state;
    const char *args[] = {"ls", "/etc", NULL};
    struct run r;
    need_prereqs();
    probe_once(true, args, &r);
    /* The probe image has no ld.so.cache, alternatives or localtime: nothing is bound. */
    static const char *const want[] = {"passwd", "group", "hosts", "nsswitch.conf", "hostname"};
    assert_word_set(r.out, want, ARRAY_SIZE(want));
}

static void spawn_sandbox__task_gets_only_its_stdio(void **state)
{
    (void)state;
    /* 0-2, and 3 is the directory probe is listing: the control socket is not inherited. */
    static const char *const want[] = {"0", "1", "2", "3"};
    const char *args[] = {"ls", "/proc/self/fd", NULL};
    struct run r;
    need_prereqs();
    probe_once(true, args, &r);
    assert_word_set(r.out, want, ARRAY_SIZE(want));
}

static void spawn_sandbox__dev_shm_only_when_asked(void **state)
{
    (void)state;
    static const char *const argv[] = {"probe", "write", "/dev/shm/x", NULL};
    const char *args[] = {"ls", "/dev/shm", NULL};
    struct ctl_setup s;
    struct ctl_event ev;
    struct box b;
    struct run r;
    need_prereqs();
    probe_once(true, args, &r);
    assert_string_equal(r.out, "ls /dev/shm: ENOENT\n");

    setup_init(&s, fx.image);
    s.flags = CTL_SETUP_DEV_SHM;
    s.shm_size = 1 << 20;
    box_spawn(&b, true, &s, sizeof(s));
    assert_int_equal(recv_event(b.ctl, &ev, WAIT_MS), 0);
    assert_int_equal(ev.type, CTL_READY);
    b.task_pid = ev.pid;
    box_run(&b, argv, &r);
    box_stop(&b);
    assert_string_equal(r.out, "write /dev/shm/x: ok exec=EACCES\n");
}

static void spawn_sandbox__host_image_tools_work(void **state)
{
    (void)state;
    static const char *const argv[] = {"sh", "-c", "echo a b | awk '{print $2}'; id -un", NULL};
    struct box b;
    struct run r;
    need_prereqs();
    if (access("/bin/sh", X_OK) < 0 || access("/usr/bin/awk", X_OK) < 0) {
        print_message("skipping: host has no /bin/sh or awk\n");
        skip();
    }
    box_start(&b, "/", true);
    box_run(&b, argv, &r);
    box_stop(&b);
    /* awk goes through /etc/alternatives, and id reads the generated /etc/passwd. */
    assert_string_equal(r.out, "b\nsandbox\n");
    assert_exit(&r, 0);
}

static void spawn_sandbox__env_cwd_and_stdin_pass_through(void **state)
{
    (void)state;
    static const char *const env_argv[] = {"probe", "env", NULL};
    static const char *const env[] = {"A=1", "PATH=/bin", "EMPTY=", NULL};
    static const char *const cat_argv[] = {"/usr/bin/probe", "cat", NULL};
    struct box b;
    struct run r;
    need_prereqs();
    box_start(&b, fx.image, true);
    box_run_full(&b, env_argv, env, "/tmp", NULL, &r);
    box_stop(&b);
    assert_string_equal(r.out, "A=1\nPATH=/bin\nEMPTY=\n");
    assert_exit(&r, 0);

    box_start(&b, fx.image, true);
    box_run_full(&b, cat_argv, env, "/", "hello\nworld", &r);
    box_stop(&b);
    assert_string_equal(r.out, "hello\nworld");
    assert_exit(&r, 0);
}

static void spawn_sandbox__bad_image_root_fails_setup(void **state)
{
    (void)state;
    struct ctl_setup s;
    struct ctl_event ev;
    struct box b;
    need_prereqs();
    setup_init(&s, "/nonexistent/image");
    box_spawn(&b, true, &s, sizeof(s));
    assert_int_equal(recv_event(b.ctl, &ev, WAIT_MS), 0);
    assert_int_equal(ev.type, CTL_SETUP_FAILED);
    assert_int_equal(ev.stage, CTL_STAGE_MOUNT);
    assert_int_equal(ev.err, -ENOENT);
    assert_non_null(strstr(ev.msg, "/nonexistent/image"));
    box_stop(&b);
}

/* Spawns init with pkt as its CTL_SETUP, expects it refused as a protocol error; returns
 * the error it reported. */
static int setup_refused(const void *pkt, size_t len)
{
    struct ctl_event ev;
    struct box b;
    box_spawn(&b, true, pkt, len);
    assert_int_equal(recv_event(b.ctl, &ev, WAIT_MS), 0);
    assert_int_equal(ev.type, CTL_SETUP_FAILED);
    assert_int_equal(ev.stage, CTL_STAGE_PROTOCOL);
    box_stop(&b);
    return ev.err;
}

static void spawn_sandbox__bad_setup_is_refused(void **state)
{
    (void)state;
    struct ctl_setup s;
    need_prereqs();

    /* A short packet. */
    (void)setup_refused("garbage", 7);

    /* The task may never be root. */
    setup_init(&s, fx.image);
    s.uid = 0;
    assert_int_equal(setup_refused(&s, sizeof(s)), -EPERM);

    /* An unterminated hostname. */
    setup_init(&s, fx.image);
    memset(s.hostname, 'a', sizeof(s.hostname));
    (void)setup_refused(&s, sizeof(s));

    /* A seccomp count that does not match the packet. */
    setup_init(&s, fx.image);
    s.seccomp_insns = 3;
    (void)setup_refused(&s, sizeof(s));

    /* SECURITY: a tmpfs of size 0 has no limit: neither /tmp's nor /work's may be 0. */
    setup_init(&s, fx.image);
    s.tmp_size = 0;
    assert_int_equal(setup_refused(&s, sizeof(s)), -EINVAL);
    setup_init(&s, fx.image);
    s.work_size = 0;
    assert_int_equal(setup_refused(&s, sizeof(s)), -EINVAL);
}

static void spawn_sandbox__missing_command_fails_exec(void **state)
{
    (void)state;
    static const char *const argv[] = {"no-such-command", NULL};
    struct box b;
    struct run r;
    need_prereqs();
    box_start(&b, fx.image, true);
    box_run(&b, argv, &r);
    box_stop(&b);
    assert_int_equal(r.type, CTL_EXEC_FAILED);
    assert_int_equal(r.stage, CTL_STAGE_EXEC);
    assert_int_equal(r.err, -ENOENT);
}

static void spawn_sandbox__bad_cwd_fails_exec(void **state)
{
    (void)state;
    static const char *const argv[] = {"probe", "true", NULL};
    struct box b;
    struct run r;
    need_prereqs();
    box_start(&b, fx.image, true);
    box_run_full(&b, argv, NULL, "/nonexistent", NULL, &r);
    box_stop(&b);
    assert_int_equal(r.type, CTL_EXEC_FAILED);
    assert_int_equal(r.stage, CTL_STAGE_CHDIR);
    assert_int_equal(r.err, -ENOENT);
}

static void expect_task_refused(const void *packet, size_t len, size_t nfds)
{
    struct box b;
    struct ctl_event ev;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    int fds[3] = {null, null, null};
    assert_true(null >= 0);
    box_start(&b, fx.image, true);
    assert_int_equal(send_with_fds(b.ctl, packet, len, fds, nfds), 0);
    (void)fd_close(null);
    assert_int_equal(recv_event(b.ctl, &ev, WAIT_MS), 0);
    assert_int_equal(ev.type, CTL_EXEC_FAILED);
    assert_int_equal(ev.stage, CTL_STAGE_PROTOCOL);
    box_stop(&b);
}

static void spawn_sandbox__malformed_task_is_refused(void **state)
{
    (void)state;
    char buf[sizeof(struct ctl_task) + 8];
    struct ctl_task *t = (struct ctl_task *)buf;
    need_prereqs();
    memset(buf, 0, sizeof(buf));
    t->magic = CTL_MAGIC;
    t->type = CTL_TASK;
    t->argc = 1;
    t->nofile = 64;
    t->data_len = 8;
    (void)str_copy(t->cwd, "/", sizeof(t->cwd));
    memcpy(buf + sizeof(*t), "probe\0tr", 8); /* the second string is unterminated */
    t->envc = 1;
    expect_task_refused(buf, sizeof(buf), 3);
    /* Well-formed strings, but only two fds. */
    t->envc = 0;
    t->data_len = 6;
    expect_task_refused(buf, sizeof(*t) + 6, 2);
    /* data_len disagrees with the packet. */
    t->data_len = 7;
    expect_task_refused(buf, sizeof(*t) + 6, 3);
    /* More strings than bytes. */
    t->data_len = 6;
    t->argc = 7;
    expect_task_refused(buf, sizeof(*t) + 6, 3);
}

/* A program that allows everything but openat, which gets `deny` | EPERM; other arches are
 * killed. */
#define OPENAT_FILTER(deny)                                                                        \
    {                                                                                              \
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),                   \
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),                          \
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),                                   \
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),                 \
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 1),                                 \
            BPF_STMT(BPF_RET | BPF_K, (deny) | EPERM),                                             \
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                                          \
    }

/* Spawns a sandbox whose setup carries prog (n insns) and expects CTL_READY. */
static void box_start_filtered(struct box *b, const struct sock_filter *prog, size_t n)
{
    static char
        packet[sizeof(struct ctl_setup) + CTL_SECCOMP_MAX_INSNS * sizeof(struct sock_filter)];
    struct ctl_setup *s = (struct ctl_setup *)packet;
    struct ctl_event ev;
    assert_true(n <= CTL_SECCOMP_MAX_INSNS);
    setup_init(s, fx.image);
    s->seccomp_insns = (uint32_t)n;
    memcpy(packet + sizeof(*s), prog, n * sizeof(*prog));
    box_spawn(b, true, packet, sizeof(*s) + n * sizeof(*prog));
    assert_int_equal(recv_event(b->ctl, &ev, WAIT_MS), 0);
    assert_int_equal(ev.type, CTL_READY);
    b->task_pid = ev.pid;
}

static bool need_x86_64(void)
{
#if defined(__x86_64__)
    return true;
#else
    print_message("skipping: the filter is written for x86_64\n");
    skip();
    return false;
#endif
}

/* Runs `probe write /tmp/x` in a sandbox filtered by prog (n insns), which denies its openat:
 * the task must see EPERM and exit, and init report `denials`. */
static void run_write_denied(const struct sock_filter *prog, size_t n, uint32_t denials)
{
    static const char *const argv[] = {"probe", "write", "/tmp/x", NULL};
    struct box b;
    struct run r;
    box_start_filtered(&b, prog, n);
    box_run(&b, argv, &r);
    box_stop(&b);
    assert_string_equal(r.out, "write /tmp/x: EPERM\n");
    assert_int_equal(r.type, CTL_EXITED);
    assert_int_equal(r.denials, denials);
}

static void spawn_sandbox__seccomp_filter_is_applied(void **state)
{
    (void)state;
    struct sock_filter prog[] = OPENAT_FILTER(SECCOMP_RET_ERRNO);
    need_prereqs();
    if (!need_x86_64()) {
        return;
    }
    /* A plain program counts nothing. */
    run_write_denied(prog, ARRAY_SIZE(prog), CTL_DENIALS_UNKNOWN);
}

static void spawn_sandbox__no_filter_counts_nothing(void **state)
{
    (void)state;
    static const char *const args[] = {"true", NULL};
    struct run r;
    need_prereqs();
    probe_once(true, args, &r);
    assert_exit(&r, 0);
    assert_int_equal(r.denials, CTL_DENIALS_UNKNOWN);
}

/* USER_NOTIF | EPERM: init answers with EPERM (not the ENOSYS of an unanswered
 * notification) and counts the call. */
static void spawn_sandbox__counted_denials_get_their_errno(void **state)
{
    (void)state;
    struct sock_filter prog[] = OPENAT_FILTER(SECCOMP_RET_USER_NOTIF);
    static const char *const true_argv[] = {"probe", "true", NULL};
    struct box b;
    struct run r;
    need_prereqs();
    if (!need_x86_64()) {
        return;
    }
    run_write_denied(prog, ARRAY_SIZE(prog), 1);

    box_start_filtered(&b, prog, ARRAY_SIZE(prog));
    box_run(&b, true_argv, &r);
    box_stop(&b);
    assert_exit(&r, 0);
    assert_int_equal(r.denials, 0);
}

/* A counting program that also denies setsid, which the task child makes after its task
 * comes: it cannot go on early (bpf_early_ok), so the child installs it just before
 * execve and hands the listener over while the task runs. init must be reading the report
 * socket then, or the task's denied openat would wait for an answer forever. */
static void spawn_sandbox__late_listener_is_taken_while_the_task_runs(void **state)
{
    (void)state;
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setsid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    need_prereqs();
    if (!need_x86_64()) {
        return;
    }
    assert_false(bpf_early_ok(prog, ARRAY_SIZE(prog), 3));
    run_write_denied(prog, ARRAY_SIZE(prog), 1);
}

/* The listener record comes first, then the failure: the failure is what is reported. */
static void spawn_sandbox__counting_filter_reports_exec_failure(void **state)
{
    (void)state;
    struct sock_filter prog[] = OPENAT_FILTER(SECCOMP_RET_USER_NOTIF);
    static const char *const argv[] = {"no-such-command", NULL};
    struct box b;
    struct run r;
    need_prereqs();
    if (!need_x86_64()) {
        return;
    }
    box_start_filtered(&b, prog, ARRAY_SIZE(prog));
    box_run(&b, argv, &r);
    box_stop(&b);
    assert_int_equal(r.type, CTL_EXEC_FAILED);
    assert_int_equal(r.stage, CTL_STAGE_EXEC);
    assert_int_equal(r.err, -ENOENT);
}

struct outer_spawn {
    struct spawn_plan plan;
    struct spawn_result res;
    int listener; /* the outer filter's listener */
    int r;
};

/* Puts this thread (and so the sandbox it spawns) under an outer filter that has a
 * listener, as a container manager's would, then spawns. */
static void *outer_spawn_main(void *arg)
{
    struct outer_spawn *o = arg;
    struct err e = ERR_INIT;
    /* Notifies only for sysfs(2), which nothing here calls. */
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sysfs, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    o->listener =
        sys_seccomp_filter_flags(prog, ARRAY_SIZE(prog), SECCOMP_FILTER_FLAG_NEW_LISTENER);
    if (o->listener < 0) {
        o->r = o->listener;
        return NULL;
    }
    o->r = spawn_sandbox(&o->plan, &o->res, &e);
    return NULL;
}

/* Where the task cannot get a listener (EBUSY), the program runs in its plain form: the
 * same errno, nothing counted. */
static void spawn_sandbox__counting_falls_back_under_a_listener(void **state)
{
    (void)state;
    struct sock_filter prog[] = OPENAT_FILTER(SECCOMP_RET_USER_NOTIF);
    static const char *const argv[] = {"probe", "write", "/tmp/x", NULL};
    static char packet[sizeof(struct ctl_setup) + sizeof(prog)];
    struct ctl_setup *s = (struct ctl_setup *)packet;
    struct outer_spawn o;
    struct ctl_event ev;
    struct box b;
    struct run r;
    pthread_t th;
    int sp[2];
    need_prereqs();
    if (!need_x86_64()) {
        return;
    }
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    memset(&o, 0, sizeof(o));
    o.plan = (struct spawn_plan){.init_path = fx.init_path,
                                 .userns = true,
                                 .host_id_base = 100000,
                                 .id_count = 65536,
                                 .ctl_fd = sp[1]};
    assert_int_equal(pthread_create(&th, NULL, outer_spawn_main, &o), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    (void)fd_close(sp[1]);
    assert_int_equal(o.r, 0);
    b.res = o.res;
    b.ctl = sp[0];
    b.work_fd = -1;
    b.task_flags = 0;
    setup_init(s, fx.image);
    s->seccomp_insns = ARRAY_SIZE(prog);
    memcpy(packet + sizeof(*s), prog, sizeof(prog));
    assert_int_equal(send(b.ctl, packet, sizeof(packet), MSG_NOSIGNAL), (ssize_t)sizeof(packet));
    assert_int_equal(recv_event(b.ctl, &ev, WAIT_MS), 0);
    assert_int_equal(ev.type, CTL_READY);
    b.task_pid = ev.pid;
    box_run(&b, argv, &r);
    box_stop(&b);
    (void)fd_close(o.listener);
    assert_string_equal(r.out, "write /tmp/x: EPERM\n");
    assert_int_equal(r.type, CTL_EXITED);
    assert_int_equal(r.denials, CTL_DENIALS_UNKNOWN);
}

/* Waits for init to end by itself, reaps it and checks it exited with 0. */
static void box_exited_cleanly(struct box *b)
{
    struct pollfd p = {b->res.pidfd, POLLIN, 0};
    assert_int_equal(poll(&p, 1, WAIT_MS), 1);
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    assert_int_equal(sys_pidfd_wait(b->res.pidfd, &info, WEXITED), 0);
    assert_int_equal(info.si_code, CLD_EXITED);
    assert_int_equal(info.si_status, 0);
    b->res.pidfd = fd_close(b->res.pidfd);
}

static void spawn_sandbox__init_exits_when_ctl_closes(void **state)
{
    (void)state;
    struct box b;
    need_prereqs();
    box_start(&b, fx.image, true);
    b.ctl = fd_close(b.ctl);
    box_exited_cleanly(&b);
}

/* Counts live (non-zombie) processes whose pid namespace is `ns`. */
static int count_in_pidns(ino_t ns)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;
    assert_non_null(d);
    while ((de = readdir(d))) {
        char path[300];
        char text[512];
        struct stat st;
        if (de->d_name[0] < '0' || de->d_name[0] > '9') {
            continue;
        }
        (void)snprintf(path, sizeof(path), "/proc/%s/ns/pid", de->d_name);
        if (stat(path, &st) < 0 || st.st_ino != ns) {
            continue;
        }
        (void)snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
        ssize_t len = file_read_small(AT_FDCWD, path, text, sizeof(text));
        const char *state = len > 0 ? strrchr(text, ')') : NULL;
        if (state && state[1] == ' ' && state[2] != 'Z') {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* The task leaves a daemon behind and exits: init reports and exits, and as pid 1 its exit
 * takes the daemon down with it (the kernel empties the namespace before the exit ends),
 * with no kill from outside. */
static void spawn_sandbox__task_end_ends_daemonized_children(void **state)
{
    (void)state;
    static const char *const argv[] = {"probe", "daemonize", "30", NULL};
    struct box b;
    struct run r;
    struct stat st;
    char path[64];
    need_prereqs();
    box_start(&b, fx.image, true);
    (void)snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)b.res.pid);
    assert_int_equal(stat(path, &st), 0);
    box_run(&b, argv, &r);
    assert_exit(&r, 0);
    struct pollfd p = {b.res.pidfd, POLLIN, 0};
    assert_int_equal(poll(&p, 1, WAIT_MS), 1);
    /* Gone before init's exit completed: no live process of the namespace is left. */
    assert_int_equal(count_in_pidns(st.st_ino), 0);
    box_exited_cleanly(&b);
    b.ctl = fd_close(b.ctl);
}

/* ---- kept sandboxes (CTL_TASK_KEEP): a session's commands ---- */

/* Whether the host has what the kept sandboxes' tests run (they use the host image). */
static void need_host_tools(void)
{
    need_prereqs();
    if (access("/bin/sh", X_OK) < 0 || access("/usr/bin/setsid", X_OK) < 0 ||
        access("/usr/bin/sleep", X_OK) < 0) {
        print_message("skipping: host has no /bin/sh, setsid or sleep\n");
        skip();
    }
}

static void box_sh(struct box *b, const char *script, struct run *r)
{
    const char *const argv[] = {"sh", "-c", script, NULL};
    box_run(b, argv, r);
}

/* Asserts that the pids in `ls /proc`'s output are exactly 1 (init) and pid. */
static void assert_proc_pids(const char *out, uint32_t pid)
{
    char want[16];
    (void)snprintf(want, sizeof(want), "%u", pid);
    bool saw_init = false, saw_task = false;
    char buf[sizeof(((struct run *)0)->out)];
    (void)str_copy(buf, out, sizeof(buf));
    for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n")) {
        if (tok[0] < '0' || tok[0] > '9') {
            continue;
        }
        if (strcmp(tok, "1") == 0) {
            saw_init = true;
        } else if (strcmp(tok, want) == 0) {
            saw_task = true;
        } else {
            print_message("a process of an earlier task is left: pid %s\n", tok);
            fail();
        }
    }
    assert_true(saw_init);
    assert_true(saw_task);
}

/* A task that prints "up", then sleeps: CTL_KILL once "up" came ends it with SIGKILL. */
static void box_run_killed(struct box *b, struct run *ret)
{
    static const char *const argv[] = {"sh", "-c", "echo up; exec sleep 100", NULL};
    static const char *const env[] = {"PATH=/usr/bin:/bin", NULL};
    int in[2], out[2];
    memset(ret, 0, sizeof(*ret));
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    in[1] = fd_close(in[1]);
    assert_int_equal(box_send_task(b, argv, env, "/", in[0], out[1]), 0);
    in[0] = fd_close(in[0]);
    out[1] = fd_close(out[1]);
    struct pollfd p = {out[0], POLLIN, 0};
    assert_int_equal(poll(&p, 1, WAIT_MS), 1);
    char up[8];
    assert_int_equal(read(out[0], up, sizeof(up)), 3);
    const struct ctl_hdr kill = {.magic = CTL_MAGIC, .type = CTL_KILL};
    assert_int_equal(send(b->ctl, &kill, sizeof(kill), MSG_NOSIGNAL), (ssize_t)sizeof(kill));
    struct ctl_event ev;
    assert_int_equal(recv_event(b->ctl, &ev, WAIT_MS), 0);
    assert_int_equal(ev.type, CTL_EXITED);
    assert_int_equal(ev.pid, b->task_pid);
    ret->type = ev.type;
    ret->wstatus = ev.wstatus;
    ret->next_pid = ev.next_pid;
    assert_int_not_equal(ev.next_pid, 0);
    b->task_pid = ev.next_pid;
    /* Everything of the task is gone with the report: its pipe's last writer too. */
    assert_int_equal(read(out[0], up, sizeof(up)), 0);
    (void)fd_close(out[0]);
}

/* A session's life in b, a sandbox just READY: its tasks keep /work and /tmp, a daemon one
 * leaves (setsid and a double fork, SIGTERM ignored) is gone when the next starts, each
 * next task runs as the pid the last report named, an exec failure, a CTL_KILL and a
 * refused token mount each leave it usable, and a last task without CTL_TASK_KEEP ends it. */
static void keep_scenario(struct box *b)
{
    struct run r;
    /* sbxd's side of the workspace: a file written through READY's fd, as the task's user
     * (in a user namespace's tmpfs a file of an unmapped owner cannot be made: EOVERFLOW). */
    struct stat root;
    assert_int_equal(fstat(b->work_fd, &root), 0);
    (void)setfsgid(root.st_gid);
    (void)setfsuid(root.st_uid);
    int fd = openat(b->work_fd, "from-sbxd", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    (void)setfsuid(0);
    (void)setfsgid(0);
    assert_true(fd >= 0);
    assert_int_equal(fd_write_all(fd, "hello\n", 6), 0);
    fd = fd_close(fd);
    b->task_flags = CTL_TASK_KEEP;

    box_sh(b,
           "cat /work/from-sbxd; echo one > /work/w; echo two > /tmp/t; "
           "setsid -f sh -c 'trap \"\" TERM; sleep 2; echo late > /work/late' "
           "</dev/null >/dev/null 2>&1; echo started",
           &r);
    assert_exit(&r, 0);
    assert_string_equal(r.out, "hello\nstarted\n");
    uint32_t second = r.next_pid;
    assert_true(second > 2);

    /* Only init and the task itself: the daemon died before the report. */
    static const char *const ls_proc[] = {"ls", "/proc", NULL};
    box_run(b, ls_proc, &r);
    assert_exit(&r, 0);
    assert_int_equal(r.pid, second);
    assert_proc_pids(r.out, second);

    box_sh(b, "cat /work/w /tmp/t", &r);
    assert_exit(&r, 0);
    assert_string_equal(r.out, "one\ntwo\n");

    static const char *const missing[] = {"/nonexistent/cmd", NULL};
    box_run(b, missing, &r);
    assert_int_equal(r.type, CTL_EXEC_FAILED);
    assert_int_equal(r.stage, CTL_STAGE_EXEC);
    assert_int_equal(r.err, -ENOENT);

    box_run_killed(b, &r);
    assert_true(WIFSIGNALED(r.wstatus));
    assert_int_equal(WTERMSIG(r.wstatus), SIGKILL);

    /* A token mount is for a sandbox's first task only. */
    static char pkt[sizeof(struct ctl_task) + 16];
    struct ctl_task *t = (struct ctl_task *)pkt;
    memset(pkt, 0, sizeof(pkt));
    *t = (struct ctl_task){.magic = CTL_MAGIC,
                           .type = CTL_TASK,
                           .flags = CTL_TASK_KEEP,
                           .argc = 1,
                           .nofile = 64,
                           .data_len = 5,
                           .n_mounts = 1};
    (void)str_copy(t->cwd, "/", sizeof(t->cwd));
    (void)str_copy(t->mount_dst[0], "/data", sizeof(t->mount_dst[0]));
    memcpy(pkt + sizeof(*t), "true", 5);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    int fds[4] = {null, null, null, null};
    assert_int_equal(send_with_fds(b->ctl, pkt, sizeof(*t) + 5, fds, 4), 0);
    (void)fd_close(null);
    struct ctl_event ev;
    assert_int_equal(recv_event(b->ctl, &ev, WAIT_MS), 0);
    assert_int_equal(ev.type, CTL_EXEC_FAILED);
    assert_int_equal(ev.stage, CTL_STAGE_PROTOCOL);
    assert_non_null(strstr(ev.msg, "first task only"));
    assert_int_not_equal(ev.next_pid, 0);
    b->task_pid = ev.next_pid;

    /* The daemon never wrote: it was killed with the first task. */
    assert_int_equal(faccessat(b->work_fd, "late", F_OK, 0), -1);
    assert_int_equal(errno, ENOENT);

    /* The last task: init reports and exits, taking the sandbox with it. */
    b->task_flags = 0;
    box_sh(b, "cat /work/w; ls /work", &r);
    assert_exit(&r, 0);
    assert_string_equal(r.out, "one\nfrom-sbxd\nw\n");
    assert_int_equal(r.next_pid, 0);
    box_exited_cleanly(b);
    b->ctl = fd_close(b->ctl);
    b->work_fd = fd_close(b->work_fd);
}

static void spawn_sandbox__kept_sandbox_serves_a_session(void **state)
{
    (void)state;
    struct box b;
    need_host_tools();
    box_start(&b, "/", true);
    keep_scenario(&b);
}

static void spawn_sandbox__kept_sandbox_serves_a_session_without_userns(void **state)
{
    (void)state;
    struct box b;
    need_host_tools();
    box_start(&b, "/", false);
    keep_scenario(&b);
}

/* The same from a pool's fork server, whose sandboxes mount /work (and the rest of their
 * own) on its template. */
static void spawn_sandbox__kept_sandbox_from_a_fork_server(void **state)
{
    (void)state;
    need_host_tools();
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct forkserver *z = forkserver_new("keep", &loop);
    for (int round = 0; round < 2; round++) {
        struct box b;
        int sp[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
        struct spawn_plan plan = {
            .init_path = fx.init_path,
            .userns = true,
            .host_id_base = 100000,
            .id_count = 65536,
            .ctl_fd = sp[1],
            .netns_fd = -1,
        };
        struct ctl_setup s;
        setup_init(&s, "/");
        struct err e = ERR_INIT;
        int r = forkserver_spawn(z, &plan, &s, NULL, &b.res, &e);
        (void)fd_close(sp[1]);
        if (r < 0) {
            print_message("forkserver_spawn: %d %s\n", r, err_msg(&e));
        }
        assert_int_equal(r, 0);
        b.ctl = sp[0];
        assert_int_equal(send(b.ctl, &s, sizeof(s), MSG_NOSIGNAL), (ssize_t)sizeof(s));
        box_ready(&b, 100000 + TASK_UID);
        keep_scenario(&b);
    }
    struct forkserver_stats st;
    forkserver_get_stats(z, &st);
    assert_int_equal(st.spawned, 2);
    assert_int_equal(st.starts, 1);
    z = forkserver_free(z);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void spawn_sandbox__bad_plan_is_refused(void **state)
{
    (void)state;
    struct spawn_plan plan = {.init_path = "build/sbxd-init", .ctl_fd = 0};
    struct spawn_result res = {-7, -7};
    struct err e = ERR_INIT;
    assert_int_equal(spawn_sandbox(&plan, &res, &e), -EINVAL);
    plan.init_path = "/x";
    plan.ctl_fd = -1;
    assert_int_equal(spawn_sandbox(&plan, &res, &e), -EBADF);
    plan.ctl_fd = 0;
    plan.userns = true;
    plan.host_id_base = UINT32_MAX - 10;
    plan.id_count = 65536;
    assert_int_equal(spawn_sandbox(&plan, &res, &e), -EINVAL);
    assert_int_equal(res.pid, -7);
    assert_int_equal(res.pidfd, -7);
}

static void spawn_sandbox__missing_init_is_reported(void **state)
{
    (void)state;
    int sp[2];
    struct err e = ERR_INIT;
    struct spawn_result res = {-7, -7};
    need_prereqs();
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    struct spawn_plan plan = {
        .init_path = "/nonexistent/sbxd-init",
        .userns = true,
        .host_id_base = 100000,
        .id_count = 65536,
        .ctl_fd = sp[1],
    };
    assert_int_equal(spawn_sandbox(&plan, &res, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "execve"));
    assert_int_equal(res.pidfd, -7);
    /* The child was reaped: no child of ours is left. */
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    assert_int_equal(waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT), -1);
    assert_int_equal(errno, ECHILD);
    (void)fd_close(sp[0]);
    (void)fd_close(sp[1]);
}

static volatile sig_atomic_t usr1_count;

static void on_usr1(int sig)
{
    (void)sig;
    usr1_count++;
}

struct spawner {
    int ok;
    int rounds;
};

static void *spawner_main(void *arg)
{
    struct spawner *sp = arg;
    for (int i = 0; i < sp->rounds; i++) {
        struct ctl_setup s;
        struct ctl_event ev;
        struct err e = ERR_INIT;
        struct spawn_result res;
        int pair[2];
        void *churn = malloc(4096 + (size_t)i);
        setup_init(&s, fx.image);
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
            free(churn);
            continue;
        }
        struct spawn_plan plan = {.init_path = fx.init_path,
                                  .userns = true,
                                  .host_id_base = 100000,
                                  .id_count = 65536,
                                  .ctl_fd = pair[1]};
        int r = spawn_sandbox(&plan, &res, &e);
        (void)fd_close(pair[1]);
        if (r == 0) {
            if (send(pair[0], &s, sizeof(s), MSG_NOSIGNAL) == (ssize_t)sizeof(s) &&
                recv_event(pair[0], &ev, WAIT_MS) == 0 && ev.type == CTL_READY) {
                sp->ok++;
            }
            siginfo_t info;
            (void)sys_pidfd_send_signal(res.pidfd, SIGKILL);
            (void)sys_pidfd_wait(res.pidfd, &info, WEXITED);
            (void)fd_close(res.pidfd);
        }
        (void)fd_close(pair[0]);
        free(churn);
    }
    return NULL;
}

/* Spawns from several threads at once while signals with a handler hit the process and
 * another thread allocates: the CLONE_VM children must disturb none of it. */
static void spawn_sandbox__concurrent_spawns_in_threads(void **state)
{
    (void)state;
    struct spawner sp[3] = {{0, 15}, {0, 15}, {0, 15}};
    pthread_t th[3];
    struct sigaction sa, old;
    need_prereqs();
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    usr1_count = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, spawner_main, &sp[i]), 0);
    }
    for (int i = 0; i < 200; i++) {
        (void)kill(getpid(), SIGUSR1);
        void *p = malloc(1000 + (size_t)i * 64);
        memset(p, 1, 1000);
        free(p);
        usleep(500);
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
    }
    assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
    assert_true(usr1_count > 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sp[i].ok, sp[i].rounds);
    }
}

/* What an init sends is cleaned before sbxd uses it: an err outside the errno range becomes
 * -EPROTO, msg is NUL-terminated printable ASCII; err_name takes any int (INT_MIN negated
 * was undefined behaviour, found by test_fuzz's hostile init under UBSan). */
static void ctl_event_clean__untrusted_fields(void **state)
{
    (void)state;
    struct ctl_event ev;
    memset(&ev, 0xff, sizeof(ev));
    ev.err = INT_MIN;
    ctl_event_clean(&ev);
    assert_int_equal(ev.err, -EPROTO);
    assert_int_equal(ev.msg[sizeof(ev.msg) - 1], '\0');
    for (size_t i = 0; ev.msg[i]; i++) {
        assert_int_equal(ev.msg[i], '?');
    }
    ev.err = 5;
    ctl_event_clean(&ev);
    assert_int_equal(ev.err, -EPROTO);
    ev.err = -ENOSPC;
    (void)snprintf(ev.msg, sizeof(ev.msg), "mount /tmp: no\tspace \xc3\xa9");
    ctl_event_clean(&ev);
    assert_int_equal(ev.err, -ENOSPC);
    assert_string_equal(ev.msg, "mount /tmp: no?space ??");
    assert_string_equal(err_name(INT_MIN), "E?");
    assert_string_equal(err_name(INT_MAX), "E?");
    assert_string_equal(err_name(-ENOSPC), err_name(ENOSPC));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ctl_event_clean__untrusted_fields),
        cmocka_unit_test(spawn_sandbox__bad_plan_is_refused),
        cmocka_unit_test(spawn_sandbox__missing_init_is_reported),
        cmocka_unit_test(spawn_sandbox__root_is_read_only),
        cmocka_unit_test(spawn_sandbox__tmp_is_writable_and_noexec),
        cmocka_unit_test(spawn_sandbox__task_has_no_privileges),
        cmocka_unit_test(spawn_sandbox__task_has_no_privileges_without_userns),
        cmocka_unit_test(spawn_sandbox__hostname_is_set),
        cmocka_unit_test(spawn_sandbox__network_is_loopback_only),
        cmocka_unit_test(spawn_sandbox__proc_shows_only_the_sandbox),
        cmocka_unit_test(spawn_sandbox__only_the_image_is_visible),
        cmocka_unit_test(spawn_sandbox__etc_is_generated),
        cmocka_unit_test(spawn_sandbox__task_gets_only_its_stdio),
        cmocka_unit_test(spawn_sandbox__dev_shm_only_when_asked),
        cmocka_unit_test(spawn_sandbox__host_image_tools_work),
        cmocka_unit_test(spawn_sandbox__env_cwd_and_stdin_pass_through),
        cmocka_unit_test(spawn_sandbox__bad_image_root_fails_setup),
        cmocka_unit_test(spawn_sandbox__bad_setup_is_refused),
        cmocka_unit_test(spawn_sandbox__missing_command_fails_exec),
        cmocka_unit_test(spawn_sandbox__bad_cwd_fails_exec),
        cmocka_unit_test(spawn_sandbox__malformed_task_is_refused),
        cmocka_unit_test(spawn_sandbox__seccomp_filter_is_applied),
        cmocka_unit_test(spawn_sandbox__no_filter_counts_nothing),
        cmocka_unit_test(spawn_sandbox__counted_denials_get_their_errno),
        cmocka_unit_test(spawn_sandbox__late_listener_is_taken_while_the_task_runs),
        cmocka_unit_test(spawn_sandbox__counting_filter_reports_exec_failure),
        cmocka_unit_test(spawn_sandbox__counting_falls_back_under_a_listener),
        cmocka_unit_test(spawn_sandbox__init_exits_when_ctl_closes),
        cmocka_unit_test(spawn_sandbox__task_end_ends_daemonized_children),
        cmocka_unit_test(spawn_sandbox__kept_sandbox_serves_a_session),
        cmocka_unit_test(spawn_sandbox__kept_sandbox_serves_a_session_without_userns),
        cmocka_unit_test(spawn_sandbox__kept_sandbox_from_a_fork_server),
        cmocka_unit_test(spawn_sandbox__concurrent_spawns_in_threads),
    };
    return cmocka_run_group_tests_name("spawn", tests, group_setup, group_teardown);
}
