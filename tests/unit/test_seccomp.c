/* SPDX-License-Identifier: MIT */
/* Unit tests of seccomp.c: the shipped profiles load; every always-denied call is really
 * denied by the kernel in a forked child under each profile (plain, and counting through a
 * USER_NOTIF supervisor that works like sbxd-init's); other ABIs are killed; strict runs the
 * tools it was made for with no denial; each parser error class gives its exact
 * "file:line:col: message"; the CHILD-SAFE BPF helpers. Profiles come from $SBX_SECCOMP_DIR
 * or ./seccomp. The children run as whoever runs the test (root on the build machine), so
 * every denied call is made with arguments that would fail harmlessly without the filter. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/err.h"
#include "sandbox/seccomp.h"
#include "lib/util.h"

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif
#define AF_VSOCK_NR 40

/* ---- helpers ---- */

static const char *profile_dir(void)
{
    const char *d = getenv("SBX_SECCOMP_DIR");
    return d && *d ? d : "seccomp";
}

static struct seccomp_set *load_dir(void)
{
    struct seccomp_set *s = NULL;
    struct err e = ERR_INIT;
    if (seccomp_set_load(profile_dir(), &s, &e) < 0) {
        fail_msg("seccomp_set_load(%s): %s", profile_dir(), e.msg);
    }
    return s;
}

/* A profile's program, copied so that a test may strip it. */
struct prog {
    struct sock_filter *insns;
    uint32_t n;
};

static struct prog prog_of(const struct seccomp_set *s, const char *name)
{
    const struct sock_filter *insns = NULL;
    uint32_t n = 0;
    if (seccomp_set_get(s, name, &insns, &n) < 0) {
        fail_msg("no profile '%s' in %s", name, profile_dir());
    }
    struct prog p = {malloc(n * sizeof(*insns)), n};
    assert_non_null(p.insns);
    memcpy(p.insns, insns, n * sizeof(*insns));
    return p;
}

static struct prog compile_text(const char *text, unsigned flags)
{
    struct seccomp_set *s = NULL;
    struct err e = ERR_INIT;
    if (seccomp_compile_text("t.yaml", text, strlen(text), flags, &s, &e) < 0) {
        fail_msg("seccomp_compile_text: %s", e.msg);
    }
    struct prog p = prog_of(s, "t");
    seccomp_set_free(s);
    return p;
}

static void compile_fails(const char *text, int code, const char *msg)
{
    struct seccomp_set *s = NULL;
    struct err e = ERR_INIT;
    assert_int_equal(
        seccomp_compile_text("t.yaml", text, strlen(text), SECCOMP_COMPILE_PLAIN, &s, &e), code);
    assert_null(s);
    assert_string_equal(e.msg, msg);
}

static int send_fd(int sock, int fd)
{
    char byte = 'L';
    struct iovec iov = {&byte, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {0};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = u.buf;
    m.msg_controllen = sizeof(u.buf);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    return sendmsg(sock, &m, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

static int recv_fd(int sock)
{
    char byte = 0;
    struct iovec iov = {&byte, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {0};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = u.buf;
    m.msg_controllen = sizeof(u.buf);
    if (RETRY_EINTR(recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) != 1) {
        return -1;
    }
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_type != SCM_RIGHTS) {
        return -1;
    }
    int fd = -1;
    memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

typedef int (*body_fn)(void *arg);

struct run {
    int wstatus;
    unsigned denials; /* notifications answered */
};

/* Forks a child that installs p (with a listener when `listen`) after no_new_privs and runs
 * body, whose return value is its exit status; or execs argv when body is NULL. With a
 * listener the parent answers notifications as sbxd-init must: the errno from
 * bpf_notify_errno over the notification's data, one count per notification. */
static struct run run_filtered(const struct prog *p, bool listen, body_fn body, void *arg)
{
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        struct sock_fprog fp = {(unsigned short)p->n, p->insns};
        (void)close(sp[0]);
        (void)setsid(); /* no controlling terminal: vhangup would reach nothing */
        (void)setrlimit(RLIMIT_CORE, &no_core);
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no core file from SIGSYS kills */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
            _exit(120);
        }
        long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                          listen ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &fp);
        if (fd < 0) {
            _exit(121);
        }
        if (listen) {
            /* Under the filter already: sendmsg and close must be allowed (both are, in
             * every shipped profile). */
            if (send_fd(sp[1], (int)fd) < 0) {
                _exit(122);
            }
            (void)close((int)fd);
        }
        (void)close(sp[1]);
        /* exit_group itself: _exit under ASan would first run the leak checker, which needs
         * calls a narrow test profile does not allow. */
        syscall(SYS_exit_group, body(arg));
        _exit(127);
    }
    (void)close(sp[1]);
    int lfd = listen ? recv_fd(sp[0]) : -1;
    (void)close(sp[0]);
    if (listen && lfd < 0) {
        (void)kill(pid, SIGKILL);
    }
    struct run res = {0, 0};
    for (;;) {
        if (lfd >= 0) {
            struct pollfd pfd = {lfd, POLLIN, 0};
            int r = poll(&pfd, 1, 50);
            if (r > 0 && (pfd.revents & POLLIN)) {
                struct seccomp_notif req;
                struct seccomp_notif_resp resp;
                memset(&req, 0, sizeof(req));
                if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, &req) == 0) {
                    memset(&resp, 0, sizeof(resp));
                    resp.id = req.id;
                    resp.error = -bpf_notify_errno(p->insns, p->n, &req.data);
                    (void)ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
                    res.denials++;
                }
                continue;
            }
            if (r > 0 && (pfd.revents & (POLLHUP | POLLERR))) {
                lfd = fd_close(lfd); /* every process using the filter is gone */
            }
        }
        pid_t w = waitpid(pid, &res.wstatus, lfd >= 0 ? WNOHANG : 0);
        if (w == pid) {
            break;
        }
        assert_true(w == 0 || errno == EINTR);
    }
    (void)fd_close(lfd);
    return res;
}

static void assert_exit0(struct run r)
{
    if (!WIFEXITED(r.wstatus) || WEXITSTATUS(r.wstatus) != 0) {
        fail_msg("child: wstatus %#x (exit %d, signal %d)", r.wstatus,
                 WIFEXITED(r.wstatus) ? WEXITSTATUS(r.wstatus) : -1,
                 WIFSIGNALED(r.wstatus) ? WTERMSIG(r.wstatus) : 0);
    }
}

static void assert_sigsys(struct run r)
{
    if (!WIFSIGNALED(r.wstatus) || WTERMSIG(r.wstatus) != SIGSYS) {
        fail_msg("child not killed by SIGSYS: wstatus %#x", r.wstatus);
    }
}

/* ---- bodies, run in the filtered child: return 0 on success, else say why ---- */

static int child_fail(int line, const char *what, long r, int err)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "line %d: %s returned %ld errno %s\n", line, what, r,
                     strerrorname_np(err) ? strerrorname_np(err) : "0");
    (void)!write(2, buf, (size_t)n);
    return 1;
}

/* Expects -1 with errno want. A call that forked instead (the filter failed) ends the copy. */
#define EXPECT_ERR(want, call)                                                                     \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long _r = (long)(call);                                                                    \
        if (_r == 0 && getpid() != self) {                                                         \
            _exit(0);                                                                              \
        }                                                                                          \
        if (_r != -1 || errno != (want)) {                                                         \
            return child_fail(__LINE__, #call, _r, errno);                                         \
        }                                                                                          \
    } while (0)

#define EXPECT_OK(call)                                                                            \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long _r = (long)(call);                                                                    \
        if (_r < 0) {                                                                              \
            return child_fail(__LINE__, #call, _r, errno);                                         \
        }                                                                                          \
    } while (0)

/* clone3's struct clone_args up to exit_signal (CLONE_ARGS_SIZE_VER0 is 64 bytes). */
struct clone_args_v0 {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

/* The number of counted denials that always_denied_calls makes (all but clone3). */
#define ALWAYS_DENIED_COUNTED 62

/* Every entry of the always-denied list, each with arguments that fail harmlessly (EINVAL,
 * EBADF, ENOENT, EFAULT, a no-op) if the filter let it through. */
static int always_denied_calls(void *arg)
{
    (void)arg;
    pid_t self = getpid();
    char buf[16];
    struct iovec iov = {buf, sizeof(buf)};
    static const unsigned long ns_flags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
                                             CLONE_NEWIPC, CLONE_NEWUSER,   CLONE_NEWPID,
                                             CLONE_NEWNET};
    struct clone_args_v0 ca = {0, 0, 0, 0, SIGCHLD, 0, 0, 0};

    EXPECT_ERR(EPERM, syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0));
    EXPECT_ERR(EPERM, syscall(SYS_process_vm_readv, self, &iov, 1, &iov, 1, 0));
    EXPECT_ERR(EPERM, syscall(SYS_process_vm_writev, self, &iov, 1, &iov, 1, 0));
    EXPECT_ERR(EPERM, syscall(SYS_mount, NULL, "/nonexistent/sbx", NULL, 0, NULL));
    EXPECT_ERR(EPERM, syscall(SYS_umount2, "/nonexistent/sbx", 0));
    EXPECT_ERR(EPERM, syscall(SYS_pivot_root, "/nonexistent/a", "/nonexistent/b"));
    EXPECT_ERR(EPERM, syscall(SYS_chroot, "/nonexistent/sbx"));
    EXPECT_ERR(EPERM, syscall(SYS_unshare, CLONE_NEWUSER));
    EXPECT_ERR(EPERM, syscall(SYS_setns, -1, CLONE_NEWNET));
    EXPECT_ERR(EPERM, syscall(SYS_mount_setattr, -1, "", 0, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_fsopen, "nonexistent-sbx-fs", 0));
    EXPECT_ERR(EPERM, syscall(SYS_fsmount, -1, 0, 0));
    EXPECT_ERR(EPERM, syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_fspick, -1, "/nonexistent/sbx", 0));
    EXPECT_ERR(EPERM, syscall(SYS_open_tree, -1, "/nonexistent/sbx", 0));
    EXPECT_ERR(EPERM, syscall(SYS_move_mount, -1, "/nonexistent/a", -1, "/nonexistent/b", 0));
    for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
        EXPECT_ERR(EPERM, syscall(SYS_clone, ns_flags[i] | SIGCHLD, 0, 0, 0, 0));
    }
    /* The kernel ignores the upper half of clone's flags; so does the filter. */
    EXPECT_ERR(EPERM,
               syscall(SYS_clone, 0xffffffff00000000UL | CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
    EXPECT_ERR(ENOSYS, syscall(SYS_clone3, &ca, sizeof(ca)));
    EXPECT_ERR(EPERM, syscall(SYS_keyctl, 0x7fff, 0, 0, 0, 0));
    EXPECT_ERR(EPERM, syscall(SYS_add_key, NULL, NULL, NULL, 0, 0));
    EXPECT_ERR(EPERM, syscall(SYS_request_key, NULL, NULL, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_bpf, 0x7fff, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
    EXPECT_ERR(EPERM, syscall(SYS_userfaultfd, 0x7fffffff));
    EXPECT_ERR(EPERM, syscall(SYS_io_uring_setup, 0, NULL));
    EXPECT_ERR(EPERM, syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_io_uring_register, -1, 0, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_open_by_handle_at, -1, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_name_to_handle_at, -1, "", NULL, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_kexec_load, 0, 0, NULL, 0x7fff0000UL));
    EXPECT_ERR(EPERM, syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0x7fff0000UL));
    EXPECT_ERR(EPERM, syscall(SYS_init_module, NULL, 0, ""));
    EXPECT_ERR(EPERM, syscall(SYS_finit_module, -1, "", 0));
    EXPECT_ERR(EPERM, syscall(SYS_delete_module, "nonexistent_sbx", O_NONBLOCK));
    EXPECT_ERR(EPERM, syscall(SYS_iopl, 0));
    EXPECT_ERR(EPERM, syscall(SYS_ioperm, 0, 0, 0));
    EXPECT_ERR(EPERM, syscall(SYS_swapon, "/nonexistent/sbx", 0));
    EXPECT_ERR(EPERM, syscall(SYS_swapoff, "/nonexistent/sbx"));
    EXPECT_ERR(EPERM, syscall(SYS_reboot, 0, 0, 0, NULL)); /* bad magic: EINVAL unfiltered */
    EXPECT_ERR(EPERM, syscall(SYS_acct, "/nonexistent/sbx"));
    EXPECT_ERR(EPERM, syscall(SYS_quotactl, 0, NULL, 0, NULL));
    EXPECT_ERR(EPERM, syscall(SYS_syslog, 10 /* SIZE_BUFFER: a read */, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_settimeofday, NULL, NULL)); /* both NULL: a no-op */
    EXPECT_ERR(EPERM, syscall(SYS_clock_settime, CLOCK_MONOTONIC, NULL));
    EXPECT_ERR(EPERM, syscall(SYS_clock_adjtime, -1, NULL));
    EXPECT_ERR(EPERM, syscall(SYS_adjtimex, NULL));
    EXPECT_ERR(EPERM, syscall(SYS_fanotify_init, 0xffffffffU, 0));
    EXPECT_ERR(EPERM, syscall(SYS_lookup_dcookie, 0, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_vhangup)); /* setsid above: no terminal to hang up */
    EXPECT_ERR(EPERM, syscall(SYS_mbind, NULL, 0, 0, NULL, 0, 0));
    EXPECT_ERR(EPERM, syscall(SYS_set_mempolicy, 0x7fff, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_move_pages, 0, 0, NULL, NULL, NULL, 0));
    EXPECT_ERR(EPERM, syscall(SYS_personality, ADDR_NO_RANDOMIZE));
    EXPECT_ERR(EPERM, syscall(SYS_personality, READ_IMPLIES_EXEC));
    EXPECT_ERR(EPERM, syscall(SYS_personality, 0xfffffff7UL));
    /* The kernel sees the low 32 bits only: 0x1_0004_0000 would be ADDR_NO_RANDOMIZE. */
    EXPECT_ERR(EPERM, syscall(SYS_personality, 0x100000000UL | ADDR_NO_RANDOMIZE));
    /* Still alive and able to work. */
    EXPECT_OK(getpid());
    if (syscall(SYS_getpid) != self) {
        return child_fail(__LINE__, "getpid", syscall(SYS_getpid), errno);
    }
    EXPECT_OK(write(2, "", 0));
    return 0;
}

/* What `default` allows of the conditional entries. */
static int default_allowed_calls(void *arg)
{
    (void)arg;
    pid_t self = getpid();
    long cur = syscall(SYS_personality, 0xffffffffUL);
    if (cur < 0) {
        return child_fail(__LINE__, "personality(query)", cur, errno);
    }
    EXPECT_OK(syscall(SYS_personality, PER_LINUX32));
    EXPECT_OK(syscall(SYS_personality, PER_LINUX));
    EXPECT_OK(syscall(SYS_personality, 0xffffffffffffffffUL)); /* a sign-extended -1 */
    pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
        _exit(7);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 7) {
        return child_fail(__LINE__, "clone(SIGCHLD)", pid, errno);
    }
    /* Not on the list, but denied by default.yaml's own rules. */
    EXPECT_ERR(EAFNOSUPPORT, socket(AF_VSOCK_NR, SOCK_STREAM, 0));
    EXPECT_ERR(EAFNOSUPPORT, syscall(SYS_socket, 0x100000000UL | AF_VSOCK_NR, SOCK_STREAM, 0));
    EXPECT_ERR(EPERM, syscall(SYS_kcmp, self, self, 0, 0, 0));
    EXPECT_ERR(EPERM, syscall(SYS_pidfd_getfd, -1, 0, 0));
    EXPECT_ERR(EAFNOSUPPORT, socket(AF_NETLINK, SOCK_RAW, 0));
    EXPECT_ERR(EAFNOSUPPORT, syscall(SYS_socket, 0x100000000UL | AF_NETLINK, SOCK_RAW, 0));
    /* Families other than unix, inet and inet6. This child is root: without the rules
     * packet and xdp sockets would open. 3-9 through each masked_eq rule (the kernel
     * refuses most of them too, the counting run tells the filter's answer apart). */
    EXPECT_ERR(EAFNOSUPPORT, socket(AF_PACKET, SOCK_DGRAM, 0));
    EXPECT_ERR(EAFNOSUPPORT, socket(AF_XDP, SOCK_RAW, 0));
    EXPECT_ERR(EAFNOSUPPORT, socket(AF_AX25, SOCK_DGRAM, 0));      /* 3 */
    EXPECT_ERR(EAFNOSUPPORT, socket(AF_APPLETALK, SOCK_DGRAM, 0)); /* 5 */
    EXPECT_ERR(EAFNOSUPPORT, socket(AF_ATMPVC, SOCK_DGRAM, 0));    /* 8 */
    EXPECT_ERR(EAFNOSUPPORT, socket(AF_X25, SOCK_SEQPACKET, 0));   /* 9 */
    EXPECT_ERR(EAFNOSUPPORT, syscall(SYS_socket, 0x100000000UL | AF_X25, SOCK_SEQPACKET, 0));
    EXPECT_ERR(EAFNOSUPPORT, socket(AF_MAX, SOCK_DGRAM, 0));
    int sv[2];
    EXPECT_ERR(EAFNOSUPPORT, socketpair(AF_PACKET, SOCK_DGRAM, 0, sv));
    /* A known family with garbage above its 32 bits is refused too (no libc passes it). */
    EXPECT_ERR(EAFNOSUPPORT, syscall(SYS_socket, 0x100000000UL | AF_INET, SOCK_STREAM, 0));
    EXPECT_OK(close(socket(AF_UNIX, SOCK_STREAM, 0)));
    EXPECT_OK(close(socket(AF_INET, SOCK_STREAM, 0)));
    EXPECT_OK(close(socket(AF_INET6, SOCK_DGRAM, 0)));
    EXPECT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    EXPECT_OK(close(sv[0]));
    EXPECT_OK(close(sv[1]));
    /* Huge pages, which no memory cgroup counts. Without the rules memfd_create would give
     * an fd here, and this root child could shmget (with no pages reserved, mmap fails on
     * its own; the counting run tells the filter's answer apart). */
    EXPECT_ERR(ENOMEM, (long)syscall(SYS_mmap, 0, 2UL << 20, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0));
    EXPECT_ERR(EINVAL, syscall(SYS_memfd_create, "x", MFD_HUGETLB));
    EXPECT_ERR(EPERM, syscall(SYS_shmget, IPC_PRIVATE, 2UL << 20, IPC_CREAT | SHM_HUGETLB | 0600));
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        return child_fail(__LINE__, "mmap", -1, errno);
    }
    EXPECT_OK(munmap(m, 4096));
    int mfd = (int)syscall(SYS_memfd_create, "x", MFD_CLOEXEC);
    EXPECT_OK(mfd);
    EXPECT_OK(close(mfd));
    return 0;
}

/* 32-bit ABI: getpid is 20 there. Returns only if the kernel let it through. */
static int int80_getpid(void *arg)
{
    (void)arg;
    long r = 20;
    __asm__ volatile("int $0x80" : "+a"(r) : : "memory");
    return r == getpid() ? 0 : 2;
}

static int x32_getpid(void *arg)
{
    (void)arg;
    long r = syscall(__X32_SYSCALL_BIT | SYS_getpid);
    return r == getpid() ? 0 : 3;
}

static int exec_argv(void *arg)
{
    char *const *argv = arg;
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull >= 0) {
        (void)dup2(devnull, 1);
    }
    execv(argv[0], argv);
    return 127;
}

/* ---- loading ---- */

static void seccomp_set_load__dir_has_default_and_strict(void **state)
{
    (void)state;
    struct seccomp_set *s = load_dir();
    const struct sock_filter *insns = NULL;
    uint32_t n = 0;
    assert_string_equal(seccomp_set_name(s, 0), "default");
    assert_string_equal(seccomp_set_name(s, 1), "strict");
    for (size_t i = 0; seccomp_set_name(s, i); i++) {
        assert_int_equal(seccomp_set_get(s, seccomp_set_name(s, i), &insns, &n), 0);
        assert_true(n > 0 && n <= BPF_MAXINSNS);
    }
    assert_int_equal(seccomp_set_get(s, "nonexistent", &insns, &n), -ENOENT);
    seccomp_set_free(s);
}

static void seccomp_set_load__embedded_matches_dir(void **state)
{
    (void)state;
    if (getenv("SBX_SECCOMP_DIR")) {
        skip(); /* the embedded copies are of the tree's seccomp/, not of that directory */
    }
    struct seccomp_set *dir = load_dir(), *emb = NULL;
    struct err e = ERR_INIT;
    if (seccomp_set_load(NULL, &emb, &e) < 0) {
        fail_msg("embedded: %s", e.msg);
    }
    for (size_t i = 0; seccomp_set_name(dir, i); i++) {
        const char *name = seccomp_set_name(dir, i);
        const struct sock_filter *a = NULL, *b = NULL;
        uint32_t na = 0, nb = 0;
        assert_int_equal(seccomp_set_get(dir, name, &a, &na), 0);
        assert_int_equal(seccomp_set_get(emb, name, &b, &nb), 0);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na * sizeof(*a));
    }
    assert_null(seccomp_set_name(emb, 2));
    seccomp_set_free(emb);
    seccomp_set_free(dir);
}

static void seccomp_set_load__bad_dir_fails(void **state)
{
    (void)state;
    struct seccomp_set *s = NULL;
    struct err e = ERR_INIT;
    assert_int_equal(seccomp_set_load("/nonexistent/sbx", &s, &e), -ENOENT);
    assert_null(s);
    assert_string_equal(e.msg, "seccomp profiles '/nonexistent/sbx': cannot open: ENOENT");
}

static void seccomp_set_load__bad_profile_names_its_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-seccomp-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    (void)snprintf(path, sizeof(path), "%s/bad.yaml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("default_action: allow\nrules:\n  - names: [read]\n    action: allow\n"
          "  - names: [ptrace]\n    action: allow\n",
          f);
    fclose(f);
    struct seccomp_set *s = NULL;
    struct err e = ERR_INIT;
    assert_int_equal(seccomp_set_load(dir, &s, &e), -EINVAL);
    char want[128];
    (void)snprintf(want, sizeof(want), "%s/bad.yaml:5:13: 'ptrace' is on the always-denied list",
                   dir);
    assert_string_equal(e.msg, want);
    (void)unlink(path);
    (void)rmdir(dir);
}

/* ---- the kernel's verdicts ---- */

static void run_always_denied(const char *name, bool listen)
{
    struct seccomp_set *s = load_dir();
    struct prog p = prog_of(s, name);
    if (!listen) {
        bpf_strip_notify(p.insns, p.n);
        assert_false(bpf_notifies(p.insns, p.n));
    } else if (!bpf_notifies(p.insns, p.n)) {
        free(p.insns);
        seccomp_set_free(s);
        skip(); /* this kernel has no USER_NOTIF: the set holds plain programs */
    }
    struct run r = run_filtered(&p, listen, always_denied_calls, NULL);
    assert_exit0(r);
    if (listen) {
        assert_int_equal(r.denials, ALWAYS_DENIED_COUNTED);
    }
    free(p.insns);
    seccomp_set_free(s);
}

static void seccomp_default__denies_the_list(void **state)
{
    (void)state;
    run_always_denied("default", false);
}

static void seccomp_strict__denies_the_list(void **state)
{
    (void)state;
    run_always_denied("strict", false);
}

static void seccomp_default__counts_each_denial(void **state)
{
    (void)state;
    run_always_denied("default", true);
}

static void seccomp_strict__counts_each_denial(void **state)
{
    (void)state;
    run_always_denied("strict", true);
}

static void seccomp_default__allows_harmless_personality_and_clone(void **state)
{
    (void)state;
    struct seccomp_set *s = load_dir();
    struct prog p = prog_of(s, "default");
    if (bpf_notifies(p.insns, p.n)) {
        struct run r = run_filtered(&p, true, default_allowed_calls, NULL);
        assert_exit0(r);
        /* 2 vsock sockets, kcmp, pidfd_getfd, 2 netlink, 10 of other families and 3 huge
         * page calls: each answered by the filter, also where the kernel would refuse. */
        assert_int_equal(r.denials, 19);
    }
    bpf_strip_notify(p.insns, p.n);
    assert_exit0(run_filtered(&p, false, default_allowed_calls, NULL));
    free(p.insns);
    seccomp_set_free(s);
}

static void seccomp_compile_text__list_wins_over_default_enosys(void **state)
{
    (void)state;
    struct prog p = compile_text("default_action: errno\ndefault_errno: ENOSYS\nrules:\n"
                                 "  - names: [exit_group, sendmsg, close, write, getpid]\n"
                                 "    action: allow\n",
                                 SECCOMP_COMPILE_NOTIFY);
    struct run r = run_filtered(&p, true, always_denied_calls, NULL);
    assert_exit0(r); /* the list's EPERM wins over the default ENOSYS */
    assert_int_equal(r.denials, ALWAYS_DENIED_COUNTED);
    free(p.insns);
}

/* Calls strict does not list: the default ENOSYS, counted. */
static int strict_unlisted_calls(void *arg)
{
    (void)arg;
    pid_t self = getpid();
    EXPECT_ERR(ENOSYS, syscall(SYS_mknodat, -1, "", 0, 0));
    EXPECT_ERR(ENOSYS, syscall(SYS_sync));
    EXPECT_ERR(ENOSYS, socket(AF_NETLINK, SOCK_RAW, 0));
    EXPECT_ERR(ENOSYS, syscall(SYS_personality, 0xffffffffUL));
    EXPECT_OK(close(socket(AF_INET6, SOCK_DGRAM, 0)));
    return 0;
}

static void seccomp_strict__unlisted_calls_get_enosys_and_count(void **state)
{
    (void)state;
    struct seccomp_set *s = load_dir();
    struct prog p = prog_of(s, "strict");
    if (bpf_notifies(p.insns, p.n)) {
        struct run r = run_filtered(&p, true, strict_unlisted_calls, NULL);
        assert_exit0(r);
        assert_int_equal(r.denials, 4);
    }
    bpf_strip_notify(p.insns, p.n);
    assert_exit0(run_filtered(&p, false, strict_unlisted_calls, NULL));
    free(p.insns);
    seccomp_set_free(s);
}

/* The page cache hints that evict and probe what the host and every sandbox share
 * (default.yaml): fadvise(POSIX_FADV_DONTNEED) and preadv2(RWF_NOWAIT) fail, with errno
 * *arg (ENOSYS for strict; 0: EPERM and EOPNOTSUPP, as default gives them), the upper half
 * of the int arguments' registers ignored, as the kernel does; other advice and flags work. */
static int page_cache_hints(void *arg)
{
    int enosys = *(const int *)arg;
    pid_t self = getpid();
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return child_fail(__LINE__, "open", fd, errno);
    }
    char buf[64];
    struct iovec iov = {buf, sizeof(buf)};
    EXPECT_ERR(enosys ? ENOSYS : EPERM, syscall(SYS_fadvise64, fd, 0, 0, POSIX_FADV_DONTNEED));
    EXPECT_ERR(enosys ? ENOSYS : EPERM,
               syscall(SYS_fadvise64, fd, 0, 0, 0x100000000UL | POSIX_FADV_DONTNEED));
    EXPECT_ERR(enosys ? ENOSYS : EOPNOTSUPP, syscall(SYS_preadv2, fd, &iov, 1, 0, 0, RWF_NOWAIT));
    EXPECT_ERR(enosys ? ENOSYS : EOPNOTSUPP,
               syscall(SYS_preadv2, fd, &iov, 1, 0, 0, RWF_NOWAIT | RWF_DSYNC));
    for (long advice = POSIX_FADV_NORMAL; advice <= POSIX_FADV_NOREUSE; advice++) {
        if (advice != POSIX_FADV_DONTNEED) {
            EXPECT_OK(syscall(SYS_fadvise64, fd, 0, 0, advice));
        }
    }
    EXPECT_OK(syscall(SYS_fadvise64, fd, 0, 0, 0x100000000UL | POSIX_FADV_SEQUENTIAL));
    EXPECT_OK(syscall(SYS_preadv2, fd, &iov, 1, 0, 0, 0));
    EXPECT_OK(syscall(SYS_preadv2, fd, &iov, 1, -1, -1, 0)); /* the file position */
    (void)close(fd);
    return 0;
}

static void run_page_cache_hints(const char *profile, int enosys)
{
    struct seccomp_set *s = load_dir();
    struct prog p = prog_of(s, profile);
    if (bpf_notifies(p.insns, p.n)) {
        struct run r = run_filtered(&p, true, page_cache_hints, &enosys);
        assert_exit0(r);
        assert_int_equal(r.denials, 4);
    }
    bpf_strip_notify(p.insns, p.n);
    assert_exit0(run_filtered(&p, false, page_cache_hints, &enosys));
    free(p.insns);
    seccomp_set_free(s);
}

static void seccomp_default__page_cache_hints_that_evict_or_probe_fail(void **state)
{
    (void)state;
    run_page_cache_hints("default", 0);
}

static void seccomp_strict__page_cache_hints_that_evict_or_probe_fail(void **state)
{
    (void)state;
    run_page_cache_hints("strict", 1);
}

static bool int80_works(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        (void)setrlimit(RLIMIT_CORE, &no_core);
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        /* cmocka's handlers would catch the fault and run the rest of the suite in here. */
        (void)signal(SIGSEGV, SIG_DFL);
        (void)signal(SIGILL, SIG_DFL);
        (void)signal(SIGBUS, SIG_DFL);
        _exit(int80_getpid(NULL));
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void seccomp_profiles__kill_int80_and_x32(void **state)
{
    (void)state;
    /* Without IA-32 emulation (this VM's kernel since session 14) int 0x80 faults before
     * seccomp sees it: only the x32 half runs then (test_seccomp.py checks the fault). */
    bool int80 = int80_works();
    struct seccomp_set *s = load_dir();
    for (size_t i = 0; seccomp_set_name(s, i); i++) {
        struct prog p = prog_of(s, seccomp_set_name(s, i));
        bpf_strip_notify(p.insns, p.n);
        if (int80) {
            assert_sigsys(run_filtered(&p, false, int80_getpid, NULL));
        }
        assert_sigsys(run_filtered(&p, false, x32_getpid, NULL));
        free(p.insns);
    }
    seccomp_set_free(s);
}

/* What the BPF does with other ABIs, read through the evaluator: libseccomp's x86_64 filter
 * checks the architecture first, then sends numbers with __X32_SYSCALL_BIT (other than -1)
 * to the bad-architecture action. PFC does not show the x32 check; the BPF has it. */
static void bpf_eval__other_abis_hit_kill_process(void **state)
{
    (void)state;
    struct seccomp_set *s = load_dir();
    for (size_t i = 0; seccomp_set_name(s, i); i++) {
        struct prog p = prog_of(s, seccomp_set_name(s, i));
        struct seccomp_data d;
        uint32_t v = 0;
        memset(&d, 0, sizeof(d));
        d.arch = AUDIT_ARCH_X86_64;
        d.nr = SYS_getpid;
        assert_int_equal(bpf_eval(p.insns, p.n, &d, &v), 0);
        assert_int_equal(v, SECCOMP_RET_ALLOW);
        d.nr = __X32_SYSCALL_BIT | SYS_getpid;
        assert_int_equal(bpf_eval(p.insns, p.n, &d, &v), 0);
        assert_int_equal(v, SECCOMP_RET_KILL_PROCESS);
        d.arch = AUDIT_ARCH_I386;
        d.nr = 20;
        assert_int_equal(bpf_eval(p.insns, p.n, &d, &v), 0);
        assert_int_equal(v, SECCOMP_RET_KILL_PROCESS);
        free(p.insns);
    }
    seccomp_set_free(s);
}

/* The action on the line after "if ($syscall == nr)" in a PFC listing. */
static void assert_pfc_action(const char *pfc, int nr, const char *action)
{
    char want[48];
    (void)snprintf(want, sizeof(want), "if ($syscall == %d)\n", nr);
    const char *at = strstr(pfc, want);
    if (!at) {
        fail_msg("no rule for syscall %d in the PFC listing", nr);
    }
    at += strlen(want);
    const char *eol = strchr(at, '\n');
    assert_non_null(eol);
    while (*at == ' ') {
        at++;
    }
    assert_true((size_t)(eol - at) == strlen(action) && memcmp(at, action, strlen(action)) == 0);
}

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* The conditional entries against their definition, over edge cases and random values:
 * personality is denied unless its low 32 bits are 0, 8 or 0xffffffff; clone is denied when
 * the low 32 bits hold a CLONE_NEW* flag. Calls not denied get the profile's own verdict. */
static void bpf_eval__personality_and_clone_match_their_rules(void **state)
{
    (void)state;
    const uint64_t ns = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |
                        CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
    struct seccomp_set *s = load_dir();
    for (size_t i = 0; seccomp_set_name(s, i); i++) {
        bool strict = strcmp(seccomp_set_name(s, i), "strict") == 0;
        struct prog p = prog_of(s, seccomp_set_name(s, i));
        bpf_strip_notify(p.insns, p.n);
        uint64_t x = 0x9e3779b97f4a7c15ULL;
        for (unsigned k = 0; k < 20000; k++) {
            uint64_t a;
            if (k < 64) {
                a = 1ULL << k;
            } else if (k < 128) {
                a = ~(1ULL << (k - 64));
            } else if (k < 140) {
                static const uint64_t edges[] = {
                    0,           8,           0xffffffff,  0xfffffff7,
                    0x100000000, 0x100000008, 0x1ffffffff, 0xffffffff00000000ULL,
                    ~0ULL,       9,           7,           0x40000};
                a = edges[k - 128];
            } else {
                a = xorshift(&x);
                if (k % 3 == 0) {
                    a &= 0xffffffff0000000fULL | (k % 2 ? 0 : 0xff00);
                }
            }
            struct seccomp_data d;
            uint32_t v = 0;
            memset(&d, 0, sizeof(d));
            d.arch = AUDIT_ARCH_X86_64;
            d.args[0] = a;
            uint32_t lo = (uint32_t)a;
            d.nr = SYS_personality;
            assert_int_equal(bpf_eval(p.insns, p.n, &d, &v), 0);
            bool allowed = lo == 0 || lo == 8 || lo == 0xffffffff;
            uint32_t want = !allowed ? SECCOMP_RET_ERRNO | EPERM
                            : strict ? SECCOMP_RET_ERRNO | ENOSYS
                                     : SECCOMP_RET_ALLOW;
            if (v != want) {
                fail_msg("%s: personality(%#llx) gave %#x, not %#x", seccomp_set_name(s, i),
                         (unsigned long long)a, v, want);
            }
            d.nr = SYS_clone;
            assert_int_equal(bpf_eval(p.insns, p.n, &d, &v), 0);
            want = (lo & ns) ? SECCOMP_RET_ERRNO | EPERM : SECCOMP_RET_ALLOW;
            if (v != want) {
                fail_msg("%s: clone(%#llx) gave %#x, not %#x", seccomp_set_name(s, i),
                         (unsigned long long)a, v, want);
            }
        }
        free(p.insns);
    }
    seccomp_set_free(s);
}

static void seccomp_compile_pfc__native_arch_only(void **state)
{
    (void)state;
    char path[] = "/tmp/sbx-pfc-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    (void)unlink(path);
    struct err e = ERR_INIT;
    const char *text = "default_action: allow\n";
    assert_int_equal(
        seccomp_compile_pfc("t.yaml", text, strlen(text), SECCOMP_COMPILE_PLAIN, fd, &e), 0);
    char buf[16384];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    assert_true(n > 0);
    buf[n] = '\0';
    (void)close(fd);
    assert_non_null(strstr(buf, "# filter for arch x86_64 (3221225534)\n"));
    assert_null(strstr(buf, "# filter for arch x86 "));
    assert_null(strstr(buf, "# filter for arch x32 "));
    assert_non_null(strstr(buf, "# invalid architecture action\naction KILL_PROCESS;\n"));
    assert_pfc_action(buf, SYS_ptrace, "action ERRNO(1);");
    assert_pfc_action(buf, SYS_clone3, "action ERRNO(38);");
}

static void seccomp_strict__runs_its_tools_without_denials(void **state)
{
    (void)state;
    static const char *const needs[] = {"/usr/bin/python3", "/bin/bash", "/usr/bin/jq",
                                        "/usr/bin/awk",     "/bin/sed",  "/bin/grep"};
    for (size_t i = 0; i < ARRAY_SIZE(needs); i++) {
        if (access(needs[i], X_OK) != 0) {
            skip(); /* a tool strict was made for is missing here */
        }
    }
    static char *const argv[] = {
        "/bin/sh", "-c",
        "set -e; d=$(mktemp -d); cd \"$d\";"
        "/usr/bin/python3 -c 'import json, hashlib, subprocess, threading;"
        "assert json.loads(json.dumps({\"a\": [1]})) == {\"a\": [1]};"
        "hashlib.sha256(b\"x\").hexdigest();"
        "assert subprocess.run([\"echo\", \"x\"], capture_output=True).stdout == b\"x\\n\";"
        "t = threading.Thread(target=print); t.start(); t.join()';"
        "bash -c 'a=(1 2); echo ${#a[@]} $(( 6 * 7 ))';"
        "seq 1 50 > n; sort -rn n | head -1; wc -l < n; cut -c1 n | uniq | tr 1 x | tail -1;"
        "cp n m; mv m o; ls -la; stat o; rm o; mkdir -p x/y; rmdir x/y x; date; id; env;"
        "awk '{s += $1} END {print s}' n; sed -n 's/^4/four/p' n; grep -c 1 n;"
        "echo '{\"a\": [1, 2]}' | jq '.a | add'; find . -type f; tar cf t.tar n; tar tf t.tar;"
        "gzip -k n; zcat n.gz | wc -l; cd /; rm -rf \"$d\"",
        NULL};
    struct seccomp_set *s = load_dir();
    struct prog p = prog_of(s, "strict");
    bool listen = bpf_notifies(p.insns, p.n);
    if (!listen) {
        bpf_strip_notify(p.insns, p.n);
    }
    struct run r = run_filtered(&p, listen, exec_argv, (void *)argv);
    assert_exit0(r);
    assert_int_equal(r.denials, 0);
    free(p.insns);
    seccomp_set_free(s);
}

/* ---- what the compiler accepts and refuses ---- */

static void seccomp_compile_text__profile_may_tighten_the_list(void **state)
{
    (void)state;
    /* kill for ptrace (tighter than EPERM) and allow for clone (its harmless calls). */
    struct prog p = compile_text("default_action: allow\nrules:\n"
                                 "  - names: [ptrace]\n    action: kill\n"
                                 "  - names: [mount]\n    action: errno\n    errno: EACCES\n",
                                 SECCOMP_COMPILE_PLAIN);
    struct seccomp_data d;
    uint32_t v = 0;
    memset(&d, 0, sizeof(d));
    d.arch = AUDIT_ARCH_X86_64;
    d.nr = SYS_ptrace;
    assert_int_equal(bpf_eval(p.insns, p.n, &d, &v), 0);
    assert_int_equal(v, SECCOMP_RET_KILL_PROCESS);
    d.nr = SYS_mount;
    assert_int_equal(bpf_eval(p.insns, p.n, &d, &v), 0);
    assert_int_equal(v, SECCOMP_RET_ERRNO | EACCES);
    d.nr = SYS_unshare;
    assert_int_equal(bpf_eval(p.insns, p.n, &d, &v), 0);
    assert_int_equal(v, SECCOMP_RET_ERRNO | EPERM);
    free(p.insns);
}

/* Where sbxd cannot set vm.memfd_noexec, memfd_create is refused whatever its flags, in
 * place of the profile's own rules for it (strict's, which split on MFD_HUGETLB), and the
 * refusal is counted; without SECCOMP_COMPILE_DENY_MEMFD the profile's rules stand. */
static void seccomp_compile_text__deny_memfd_replaces_the_profiles_rules(void **state)
{
    (void)state;
    const char *text = "default_action: errno\ndefault_errno: ENOSYS\nrules:\n"
                       "  - names: [memfd_create]\n    action: allow\n    args:\n"
                       "      - {index: 1, op: masked_eq, value: 0, mask: 4}\n"
                       "  - names: [memfd_create]\n    action: errno\n    errno: EINVAL\n"
                       "    args:\n      - {index: 1, op: masked_eq, value: 4, mask: 4}\n"
                       "  - names: [sendmsg]\n    action: allow\n";
    static const uint64_t flags[] = {
        0, MFD_CLOEXEC, MFD_HUGETLB, 0x8 /* MFD_NOEXEC_SEAL */, 0x10 /* MFD_EXEC */, 0xffffffff};
    struct seccomp_data d;
    uint32_t v = 0;
    memset(&d, 0, sizeof(d));
    d.arch = AUDIT_ARCH_X86_64;
    d.nr = SYS_memfd_create;
    struct prog plain = compile_text(text, SECCOMP_COMPILE_PLAIN | SECCOMP_COMPILE_DENY_MEMFD);
    struct prog notify = compile_text(text, SECCOMP_COMPILE_NOTIFY | SECCOMP_COMPILE_DENY_MEMFD);
    struct prog as_is = compile_text(text, SECCOMP_COMPILE_PLAIN);
    for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
        d.args[1] = flags[i];
        assert_int_equal(bpf_eval(plain.insns, plain.n, &d, &v), 0);
        assert_int_equal(v, SECCOMP_RET_ERRNO | ENOSYS);
        assert_int_equal(bpf_eval(notify.insns, notify.n, &d, &v), 0);
        assert_int_equal(v, SECCOMP_RET_USER_NOTIF | ENOSYS);
        assert_int_equal(bpf_eval(as_is.insns, as_is.n, &d, &v), 0);
        assert_int_equal(v,
                         (flags[i] & MFD_HUGETLB) ? SECCOMP_RET_ERRNO | EINVAL : SECCOMP_RET_ALLOW);
    }
    /* Nothing else changes: the profile's other rules and its default. */
    d.nr = SYS_sendmsg;
    assert_int_equal(bpf_eval(plain.insns, plain.n, &d, &v), 0);
    assert_int_equal(v, SECCOMP_RET_ALLOW);
    d.nr = SYS_getpid;
    assert_int_equal(bpf_eval(plain.insns, plain.n, &d, &v), 0);
    assert_int_equal(v, SECCOMP_RET_ERRNO | ENOSYS);
    free(plain.insns);
    free(notify.insns);
    free(as_is.insns);
}

static void seccomp_compile_text__count_denials_false_stays_plain(void **state)
{
    (void)state;
    struct prog p =
        compile_text("default_action: allow\ncount_denials: false\n", SECCOMP_COMPILE_NOTIFY);
    assert_false(bpf_notifies(p.insns, p.n));
    free(p.insns);
    p = compile_text("default_action: allow\n", SECCOMP_COMPILE_NOTIFY);
    assert_true(bpf_notifies(p.insns, p.n));
    free(p.insns);
}

static void seccomp_compile_text__counting_needs_sendmsg(void **state)
{
    (void)state;
    const char *text = "default_action: errno\nrules:\n  - names: [read]\n    action: allow\n";
    struct seccomp_set *s = NULL;
    struct err e = ERR_INIT;
    assert_int_equal(
        seccomp_compile_text("t.yaml", text, strlen(text), SECCOMP_COMPILE_NOTIFY, &s, &e),
        -EINVAL);
    assert_null(s);
    assert_string_equal(e.msg, "t.yaml: with count_denials, 'sendmsg' must be allowed: the task "
                               "hands its seccomp listener to sbxd-init with it after the filter "
                               "is on");
    /* Without counting nothing is handed over. */
    struct prog p = compile_text(text, SECCOMP_COMPILE_PLAIN);
    free(p.insns);
}

/* The shipped profiles allow everything sbxd-init's task child does after its filter, in
 * both forms: their filter goes on ahead of the task. */
static void bpf_early_ok__shipped_profiles(void **state)
{
    (void)state;
    struct seccomp_set *s = load_dir();
    static const char *const names[] = {"default", "strict"};
    for (size_t i = 0; i < 2; i++) {
        struct prog p = prog_of(s, names[i]);
        assert_true(bpf_early_ok(p.insns, p.n, 7));
        bpf_strip_notify(p.insns, p.n);
        assert_true(bpf_early_ok(p.insns, p.n, 7));
        free(p.insns);
    }
    seccomp_set_free(s);
}

/* A program that denies, counts or kills any call of the child's path after the filter,
 * even for one argument value, keeps the filter on the path just before execve. */
static void bpf_early_ok__any_refusal_keeps_it_late(void **state)
{
    (void)state;
    static const char *const texts[] = {
        /* errno, counted or not */
        "default_action: allow\nrules:\n  - names: [chdir]\n    action: errno\n",
        "default_action: allow\ncount_denials: false\nrules:\n  - names: [setsid]\n"
        "    action: errno\n",
        /* kill, log is fine (below) */
        "default_action: allow\nrules:\n  - names: [capset]\n    action: kill\n",
        /* one argument: RLIMIT_CORE (4) only */
        "default_action: allow\nrules:\n  - names: [prlimit64]\n    action: errno\n"
        "    args:\n      - {index: 1, op: eq, value: 4}\n",
        /* an allowlist without dup2 */
        "default_action: errno\nrules:\n  - names: [sendmsg, recvmsg, close, setsid, fcntl, "
        "chdir, mkdirat, prlimit64, capset, execve, write, exit_group]\n    action: allow\n",
        /* one without mkdirat (a missing cwd below /work or /tmp is made) */
        "default_action: errno\nrules:\n  - names: [sendmsg, recvmsg, close, setsid, fcntl, "
        "dup2, chdir, prlimit64, capset, execve, write, exit_group]\n    action: allow\n",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        struct prog p = compile_text(texts[i], SECCOMP_COMPILE_NOTIFY);
        assert_false(bpf_early_ok(p.insns, p.n, 7));
        free(p.insns);
    }
    /* The allowlist with dup2 and mkdirat is enough; so is logging a call. */
    struct prog p = compile_text(
        "default_action: errno\nrules:\n  - names: [sendmsg, recvmsg, close, setsid, fcntl, "
        "dup2, chdir, mkdirat, prlimit64, capset, execve, write, exit_group]\n"
        "    action: allow\n",
        SECCOMP_COMPILE_NOTIFY);
    assert_true(bpf_early_ok(p.insns, p.n, 7));
    free(p.insns);
    p = compile_text("default_action: allow\nrules:\n  - names: [chdir]\n    action: log\n",
                     SECCOMP_COMPILE_NOTIFY);
    assert_true(bpf_early_ok(p.insns, p.n, 7));
    free(p.insns);
}

static void seccomp_compile_text__args_and_other_arch_names(void **state)
{
    (void)state;
    /* umount exists on other architectures only: skipped, not an error. */
    struct prog p = compile_text("default_action: allow\nrules:\n"
                                 "  - names: [umount, write]\n    action: errno\n"
                                 "    errno: EBADF\n    args:\n"
                                 "      - {index: 0, op: ge, value: 0x100}\n"
                                 "      - {index: 2, op: masked_eq, value: 0, mask: 0xffffffff}\n",
                                 SECCOMP_COMPILE_PLAIN);
    struct seccomp_data d;
    uint32_t v = 0;
    memset(&d, 0, sizeof(d));
    d.arch = AUDIT_ARCH_X86_64;
    d.nr = SYS_write;
    d.args[0] = 0x100;
    d.args[2] = 0x500000000ULL;
    assert_int_equal(bpf_eval(p.insns, p.n, &d, &v), 0);
    assert_int_equal(v, SECCOMP_RET_ERRNO | EBADF);
    d.args[2] = 1;
    assert_int_equal(bpf_eval(p.insns, p.n, &d, &v), 0);
    assert_int_equal(v, SECCOMP_RET_ALLOW);
    d.args[0] = 0xff;
    d.args[2] = 0;
    assert_int_equal(bpf_eval(p.insns, p.n, &d, &v), 0);
    assert_int_equal(v, SECCOMP_RET_ALLOW);
    free(p.insns);
}

static void seccomp_compile_text__errors(void **state)
{
    (void)state;
    /* Bad YAML. */
    compile_fails("default_action: [allow\n", -EINVAL,
                  "t.yaml:2:1: did not find expected ',' or ']' (while parsing a flow sequence "
                  "at 1:17)");
    compile_fails("default_action: allow\n\trules: 1\n", -EINVAL,
                  "t.yaml:2:1: found a tab character that violates indentation (while scanning "
                  "a plain scalar at 1:17)");
    compile_fails("---\ndefault_action: allow\n---\ndefault_action: kill\n", -EINVAL,
                  "t.yaml:4:1: only one YAML document is allowed");
    /* Unknown, repeated and missing keys. */
    compile_fails("default_action: allow\nfoo: 1\n", -EINVAL, "t.yaml:2:1: unknown key 'foo'");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: errno\n"
                  "    foo: 1\n",
                  -EINVAL, "t.yaml:5:5: unknown key 'foo' in a rule (names, action, errno, args)");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: errno\n"
                  "    args: [{index: 0, op: eq, value: 1, masks: 2}]\n",
                  -EINVAL,
                  "t.yaml:5:41: unknown key 'masks' in an argument comparison (index, op, "
                  "value, mask)");
    compile_fails("default_action: allow\ndefault_action: kill\n", -EINVAL,
                  "t.yaml:2:1: duplicate key 'default_action' (first at 1:1)");
    compile_fails("rules: []\n", -EINVAL, "t.yaml:1:1: missing key 'default_action'");
    compile_fails("", -EINVAL, "t.yaml:1:1: missing key 'default_action'");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n", -EINVAL,
                  "t.yaml:3:5: missing key 'action' in a rule");
    /* Unknown syscall, action, errno. */
    compile_fails("default_action: allow\nrules:\n  - names: [read, ptrac]\n    action: errno\n",
                  -EINVAL, "t.yaml:3:19: unknown syscall 'ptrac'");
    compile_fails("default_action: deny\n", -EINVAL,
                  "t.yaml:1:17: unknown action 'deny' (allow, errno, kill or log)");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: trace\n", -EINVAL,
                  "t.yaml:4:13: unknown action 'trace' (allow, errno, kill or log)");
    compile_fails("default_action: errno\ndefault_errno: EFOO\n", -EINVAL,
                  "t.yaml:2:16: unknown errno 'EFOO'");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: errno\n"
                  "    errno: 1\n",
                  -EINVAL, "t.yaml:5:12: unknown errno '1'");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: allow\n"
                  "    errno: EPERM\n",
                  -EINVAL, "t.yaml:5:12: 'errno' needs action errno");
    compile_fails("default_action: kill\ndefault_errno: EPERM\n", -EINVAL,
                  "t.yaml:2:16: 'default_errno' needs action errno");
    /* Wrong shapes and values. */
    compile_fails("default_action: allow\nrules:\n  - names: read\n    action: errno\n", -EINVAL,
                  "t.yaml:3:12: 'names' must be a sequence, not a scalar");
    compile_fails("default_action: allow\nrules:\n  - names: []\n    action: errno\n", -EINVAL,
                  "t.yaml:3:12: 'names' must list at least one syscall");
    compile_fails("default_action: allow\ncount_denials: maybe\n", -EINVAL,
                  "t.yaml:2:16: 'count_denials' must be true or false");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: errno\n"
                  "    args:\n      - {index: 6, op: eq, value: 1}\n",
                  -EINVAL, "t.yaml:6:17: 'index' must be 0 to 5");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: errno\n"
                  "    args: [{index: 0, op: in, value: 1}]\n",
                  -EINVAL, "t.yaml:5:27: unknown op 'in' (eq, ne, lt, le, gt, ge or masked_eq)");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: errno\n"
                  "    args: [{index: 0, op: eq, value: 0x1g}]\n",
                  -EINVAL, "t.yaml:5:38: 'value' must be a 64-bit number (decimal or 0x hex)");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: errno\n"
                  "    args: [{index: 0, op: eq, value: 0x10000000000000000}]\n",
                  -EINVAL, "t.yaml:5:38: 'value' must be a 64-bit number (decimal or 0x hex)");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: errno\n"
                  "    args: [{index: 0, op: masked_eq, value: 1}]\n",
                  -EINVAL, "t.yaml:5:12: op masked_eq needs a 'mask'");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: errno\n"
                  "    args: [{index: 0, op: eq, value: 1, mask: 1}]\n",
                  -EINVAL, "t.yaml:5:41: 'mask' needs op masked_eq");
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: errno\n"
                  "    args: [{index: 0, op: eq, value: 1}, {index: 0, op: eq, value: 2}]\n",
                  -EINVAL, "t.yaml:5:42: argument 0 is compared twice");
    /* Rules that libseccomp would silently merge. */
    compile_fails("default_action: allow\nrules:\n  - names: [read]\n    action: errno\n"
                  "  - names: [write, read]\n    action: kill\n",
                  -EINVAL,
                  "t.yaml:5:20: 'read' already has a rule at 3:13; a rule without args must "
                  "be its only rule");
    compile_fails("default_action: allow\nrules:\n"
                  "  - names: [read]\n    action: errno\n    args: [{index: 0, op: eq, value: 3}]\n"
                  "  - names: [read]\n    action: kill\n    args: [{index: 0, op: eq, value: 3}]\n",
                  -EINVAL, "t.yaml:6:13: 'read' already has a rule with the same args at 3:13");
    /* The always-denied list. */
    compile_fails("default_action: errno\nrules:\n  - names: [read]\n    action: allow\n"
                  "  - names: [write, ptrace]\n    action: allow\n",
                  -EINVAL, "t.yaml:5:20: 'ptrace' is on the always-denied list");
    compile_fails("default_action: errno\nrules:\n  - names: [io_uring_setup]\n    action: log\n",
                  -EINVAL, "t.yaml:3:13: 'io_uring_setup' is on the always-denied list");
    compile_fails("default_action: allow\nrules:\n  - names: [clone]\n    action: errno\n"
                  "    args: [{index: 0, op: eq, value: 1}]\n",
                  -EINVAL,
                  "t.yaml:3:13: 'clone' is on the always-denied list: a rule for it takes no "
                  "args");
}

/* ---- the CHILD-SAFE helpers ---- */

static void bpf_eval__alu_jumps_and_bounds(void **state)
{
    (void)state;
    struct seccomp_data d;
    uint32_t v = 0;
    memset(&d, 0, sizeof(d));
    d.nr = 6;
    d.args[1] = 0x1234567800000009ULL;
    /* ((nr * 3 + 2) << 1 ^ 1) = 41; store, reload through X; compare with 41. */
    struct sock_filter alu[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, 3),
        BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 2),
        BPF_STMT(BPF_ALU | BPF_LSH | BPF_K, 1),
        BPF_STMT(BPF_ALU | BPF_XOR | BPF_K, 1),
        BPF_STMT(BPF_ST, 3),
        BPF_STMT(BPF_LDX | BPF_MEM, 3),
        BPF_STMT(BPF_LD | BPF_IMM, 41),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_X, 0, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    assert_int_equal(bpf_eval(alu, ARRAY_SIZE(alu), &d, &v), 0);
    assert_int_equal(v, SECCOMP_RET_ALLOW);
    /* The high word of args[1] (little endian) and JSET / JGT / RET A. */
    struct sock_filter args[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1]) + 4),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x10000000, 0, 2),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 0x12345677, 0, 1),
        BPF_STMT(BPF_RET | BPF_A, 0),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    assert_int_equal(bpf_eval(args, ARRAY_SIZE(args), &d, &v), 0);
    assert_int_equal(v, 0x12345678);
    /* Division by zero returns 0, as the kernel's filter does. */
    struct sock_filter div0[] = {
        BPF_STMT(BPF_LD | BPF_IMM, 7),
        BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    assert_int_equal(bpf_eval(div0, ARRAY_SIZE(div0), &d, &v), 0);
    assert_int_equal(v, 0);
    /* Loads outside seccomp_data, jumps past the end, falling off the end. */
    struct sock_filter bad_load[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, sizeof(struct seccomp_data)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    assert_int_equal(bpf_eval(bad_load, ARRAY_SIZE(bad_load), &d, &v), -EINVAL);
    struct sock_filter bad_jump[] = {
        BPF_JUMP(BPF_JMP | BPF_JA, 1, 0, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    assert_int_equal(bpf_eval(bad_jump, ARRAY_SIZE(bad_jump), &d, &v), -EINVAL);
    struct sock_filter no_ret[] = {BPF_STMT(BPF_LD | BPF_IMM, 1)};
    assert_int_equal(bpf_eval(no_ret, ARRAY_SIZE(no_ret), &d, &v), -EINVAL);
}

static void bpf_strip_notify__keeps_the_errno(void **state)
{
    (void)state;
    struct sock_filter f[] = {
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct seccomp_data d;
    memset(&d, 0, sizeof(d));
    assert_true(bpf_notifies(f, ARRAY_SIZE(f)));
    assert_int_equal(bpf_notify_errno(f, ARRAY_SIZE(f), &d), ENOSYS);
    assert_int_equal(bpf_notify_errno(f + 1, 2, &d), EPERM); /* not a notify: fail safe */
    bpf_strip_notify(f, ARRAY_SIZE(f));
    assert_false(bpf_notifies(f, ARRAY_SIZE(f)));
    assert_int_equal(f[0].k, SECCOMP_RET_ERRNO | ENOSYS);
    assert_int_equal(f[1].k, SECCOMP_RET_ERRNO | EPERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seccomp_set_load__dir_has_default_and_strict),
        cmocka_unit_test(seccomp_set_load__embedded_matches_dir),
        cmocka_unit_test(seccomp_set_load__bad_dir_fails),
        cmocka_unit_test(seccomp_set_load__bad_profile_names_its_file),
        cmocka_unit_test(seccomp_default__denies_the_list),
        cmocka_unit_test(seccomp_strict__denies_the_list),
        cmocka_unit_test(seccomp_default__counts_each_denial),
        cmocka_unit_test(seccomp_strict__counts_each_denial),
        cmocka_unit_test(seccomp_default__page_cache_hints_that_evict_or_probe_fail),
        cmocka_unit_test(seccomp_strict__page_cache_hints_that_evict_or_probe_fail),
        cmocka_unit_test(seccomp_default__allows_harmless_personality_and_clone),
        cmocka_unit_test(seccomp_compile_text__list_wins_over_default_enosys),
        cmocka_unit_test(seccomp_strict__unlisted_calls_get_enosys_and_count),
        cmocka_unit_test(seccomp_profiles__kill_int80_and_x32),
        cmocka_unit_test(bpf_eval__other_abis_hit_kill_process),
        cmocka_unit_test(bpf_eval__personality_and_clone_match_their_rules),
        cmocka_unit_test(seccomp_compile_pfc__native_arch_only),
        cmocka_unit_test(seccomp_strict__runs_its_tools_without_denials),
        cmocka_unit_test(seccomp_compile_text__profile_may_tighten_the_list),
        cmocka_unit_test(seccomp_compile_text__count_denials_false_stays_plain),
        cmocka_unit_test(seccomp_compile_text__deny_memfd_replaces_the_profiles_rules),
        cmocka_unit_test(seccomp_compile_text__counting_needs_sendmsg),
        cmocka_unit_test(seccomp_compile_text__args_and_other_arch_names),
        cmocka_unit_test(bpf_early_ok__shipped_profiles),
        cmocka_unit_test(bpf_early_ok__any_refusal_keeps_it_late),
        cmocka_unit_test(seccomp_compile_text__errors),
        cmocka_unit_test(bpf_eval__alu_jumps_and_bounds),
        cmocka_unit_test(bpf_strip_notify__keeps_the_errno),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
