/* SPDX-License-Identifier: MIT */
/* sbxd-init: static pid 1 of every sandbox. Builds the sandbox (cgroupns, mounts, hostname,
 * loopback) on CTL_SETUP and clones the task's process ahead, which sheds its privileges and
 * waits; on CTL_TASK hands it the task, which it runs with no privileges left. Answers
 * and counts the task's seccomp denials (docs/SECCOMP.md, "Counting denials"), kills and
 * reaps every process of the namespace when the task ends, and reports. It trusts nothing it
 * reads from CTL_FD without checking, and exits as soon as the control socket closes, or once
 * it has reported how its last task ended (a CTL_TASK_KEEP task is not the last).
 *
 * This file is pid 1's setup and the checks of what sbxd sends; pid 1's side of the tasks
 * (the loop) is task_run.c, the task's own process task_child.c, a pool's fork server
 * forkserver.c. */
#include "init/init_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wire/bpf.h"
#include "lib/file.h"
#include "lib/sys.h"
#include "lib/util.h"

/* The control socket is our only link: if it fails, the sandbox ends with us. */
void pid1_send(const struct init *in, struct ctl_event *ev)
{
    ev->magic = CTL_MAGIC;
    ssize_t n = RETRY_EINTR(send(in->ctl, ev, sizeof(*ev), MSG_NOSIGNAL));
    if (n != (ssize_t)sizeof(*ev)) {
        _exit(1);
    }
}

void pid1_send_failure(const struct init *in, uint32_t type, uint32_t stage, int err,
                       const char *msg)
{
    struct ctl_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = type;
    ev.stage = stage;
    ev.err = err < 0 ? err : -EIO;
    (void)str_copy(ev.msg, msg, sizeof(ev.msg));
    pid1_send(in, &ev);
}

/* Receives one packet from sock into buf (size bytes), with up to nfds fds (CLOEXEC) into
 * fds (*got of them). Returns the length, 0 on EOF, or -errno (-EMSGSIZE when truncated or
 * when the fds were off: fd_recv closed them). CHILD-SAFE. */
ssize_t pid1_recv_sized(char *buf, size_t size, int sock, int *fds, size_t nfds, size_t *got)
{
    bool bad = false;
    ssize_t n = fd_recv(sock, buf, size, fds, nfds, got, &bad, 0);
    return n >= 0 && bad ? -EMSGSIZE : n;
}

/* pid1_recv_sized into an INIT_BUF_SIZE buffer. */
ssize_t pid1_recv_into(char *buf, int sock, int *fds, size_t nfds, size_t *got)
{
    return pid1_recv_sized(buf, INIT_BUF_SIZE, sock, fds, nfds, got);
}

/* pid1_recv_into init's own buffer. */
static ssize_t init_recv(struct init *in, int sock, int *fds, size_t nfds, size_t *got)
{
    return pid1_recv_into(in->buf, sock, fds, nfds, got);
}

/* Returns the index just past the NUL of the string at data[off] within len, or 0. */
static size_t init_str_end(const char *data, size_t off, size_t len)
{
    const char *nul = memchr(data + off, '\0', len - off);
    return nul ? (size_t)(nul - data) + 1 : 0;
}

static bool init_hostname_ok(const char *h)
{
    size_t n = strnlen(h, CTL_HOSTNAME_MAX);
    if (n == 0 || n >= CTL_HOSTNAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.')) {
            return false;
        }
    }
    return true;
}

/* Receives one setup packet (with at most the image's fd) into in->buf. Exits on EOF. */
ssize_t pid1_recv_setup(struct init *in, size_t *got)
{
    ssize_t n = init_recv(in, in->ctl, &in->image_fd, 1, got);
    if (n == 0) {
        _exit(0);
    }
    return n;
}

/* Checks the CTL_SETUP (or, for a fork server, CTL_FORKSERVER) of n bytes in in->buf that came with
 * got fds. Returns 0 or -errno with e. */
int pid1_parse_setup(struct init *in, ssize_t n, size_t got, uint32_t type, struct err *e)
{
    if (n < 0) {
        return err_set(e, (int)n, "receive setup");
    }
    if ((size_t)n < sizeof(struct ctl_setup)) {
        return err_setx(e, -EPROTO, "short setup packet (%zd bytes)", n);
    }
    struct ctl_setup *s = &in->setup;
    memcpy(s, in->buf, sizeof(*s));
    if (s->magic != CTL_MAGIC || s->type != type) {
        return err_setx(e, -EPROTO, "bad setup magic or type");
    }
    if (s->seccomp_insns > CTL_SECCOMP_MAX_INSNS ||
        (size_t)n != sizeof(*s) + s->seccomp_insns * sizeof(struct sock_filter)) {
        return err_setx(e, -EPROTO, "bad setup length for %u seccomp insns", s->seccomp_insns);
    }
    if (s->flags & ~(CTL_SETUP_DEV_SHM | CTL_SETUP_IMAGE_FD | CTL_SETUP_LO_UP)) {
        return err_setx(e, -EPROTO, "unknown setup flags 0x%x", s->flags);
    }
    if (((s->flags & CTL_SETUP_IMAGE_FD) != 0) != (got == 1)) {
        return err_setx(e, -EPROTO, "image fd and CTL_SETUP_IMAGE_FD disagree");
    }
    /* SECURITY: the task never runs as the namespace's root. */
    if (s->uid == 0 || s->gid == 0 || s->uid == (uint32_t)-1 || s->gid == (uint32_t)-1) {
        return err_setx(e, -EPERM, "task uid/gid %u/%u refused", s->uid, s->gid);
    }
    /* SECURITY: tmpfs size=0 means unlimited. */
    if (s->tmp_size == 0 || s->work_size == 0 ||
        ((s->flags & CTL_SETUP_DEV_SHM) && s->shm_size == 0)) {
        return err_setx(e, -EINVAL, "tmpfs sizes must be > 0");
    }
    if (!init_hostname_ok(s->hostname)) {
        return err_setx(e, -EINVAL, "bad hostname");
    }
    if (s->proxy_port > 65535) {
        return err_setx(e, -EINVAL, "bad proxy port %u", s->proxy_port);
    }
    if (!memchr(s->image_root, '\0', sizeof(s->image_root)) || s->image_root[0] != '/') {
        return err_setx(e, -EINVAL, "image root must be an absolute path");
    }
    memcpy(in->filter, in->buf + sizeof(*s), s->seccomp_insns * sizeof(struct sock_filter));
    in->filter_len = (unsigned short)s->seccomp_insns;
    return 0;
}

static int init_lo_up(struct err *e)
{
    scoped_close int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return err_set(e, -errno, "socket");
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    (void)str_copy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name));
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
        return err_set(e, -errno, "get lo flags");
    }
    if (ifr.ifr_flags & IFF_UP) {
        /* A recycled namespace (netns.c): sbxd brought lo up and owns the namespace, so
         * this init has no CAP_NET_ADMIN over it, and needs none. */
        return 0;
    }
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) {
        return err_set(e, -errno, "bring lo up");
    }
    return 0;
}

/* The egress proxy's listening socket on 127.0.0.1:port of this network namespace, for
 * sbxd to serve (docs/EGRESS.md). Returns the fd or -errno. */
static int init_proxy_listen(uint16_t port, struct err *e)
{
    scoped_close int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return err_set(e, -errno, "proxy socket");
    }
    /* A recycled namespace may hold the port's TIME_WAIT entries of an earlier proxy. */
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        return err_set(e, -errno, "bind proxy 127.0.0.1:%u", port);
    }
    if (listen(fd, 64) < 0) {
        return err_set(e, -errno, "listen proxy");
    }
    return take_fd(&fd);
}

/* Sends an event with one fd attached (SCM_RIGHTS). */
void pid1_send_with_fd(const struct init *in, struct ctl_event *ev, int fd)
{
    struct iovec iov = {ev, sizeof(*ev)};
    ev->magic = CTL_MAGIC;
    if (fd_sendmsg(in->ctl, &iov, 1, &fd, 1, MSG_NOSIGNAL) != (ssize_t)sizeof(*ev)) {
        _exit(1);
    }
}

/* Points fds 0-2 at the sandbox's /dev/null: the old ones are on the host's /dev, and
 * every fd must stop referring to the detached host tree. */
static int init_reopen_null(struct err *e)
{
    scoped_close int fd = openat(AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return err_set(e, -errno, "open /dev/null");
    }
    for (int i = 0; i < 3; i++) {
        if (dup3(fd, i, O_CLOEXEC) < 0) {
            return err_set(e, -errno, "dup3 /dev/null");
        }
    }
    return 0;
}

/* The filesystem of in->setup (mount.c), in mode; the image's fd goes, and fds 0-2 point
 * at the new /dev/null. */
int pid1_mount(struct init *in, enum mount_mode mode, struct err *e)
{
    const struct ctl_setup *s = &in->setup;
    struct mount_config mc = {
        .mode = mode,
        .image_root = s->image_root,
        .image_fd = in->image_fd,
        .hostname = s->hostname,
        .uid = s->uid,
        .gid = s->gid,
        .tmp_size = s->tmp_size,
        .work_size = s->work_size,
        .shm_size = (s->flags & CTL_SETUP_DEV_SHM) ? s->shm_size : 0,
        .work_fd = mode == MOUNT_TEMPLATE ? NULL : &in->work_fd,
    };
    int r = mount_setup(&mc, e);
    in->image_fd = fd_close(in->image_fd);
    return r == 0 ? init_reopen_null(e) : r;
}

/* A sandbox forked by the fork server still holds the fork server's ids, the host's root, which its
 * user namespace does not map; sbxd wrote the maps before CTL_SETUP. SECURITY: the host's
 * supplementary groups go too. */
static int init_become_root(struct err *e)
{
    /* The raw calls: musl's would first signal every thread (there is none), at the price
     * of three sigprocmask calls each. */
    int r = sys_setgroups_empty();
    if (r == 0) {
        r = sys_setresgid(0, 0, 0);
    }
    if (r == 0) {
        r = sys_setresuid(0, 0, 0);
    }
    if (r < 0) {
        return err_set(e, r, "take the namespace's root ids");
    }
    /* The change of ids made us undumpable with the host as owner of /proc/self; the
     * namespace's root owns it again, and nothing may ptrace or peek into init. */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    return 0;
}

/* A time namespace for the task's processes, whose boot and monotonic clocks start near 0
 * now: /proc/uptime, CLOCK_BOOTTIME and CLOCK_MONOTONIC then say nothing of the host's
 * (/proc/stat's btime and a process's start time follow). unshare moves only our children
 * there, and the task child (CLONE_VM) at its execve; init keeps the host's clocks, and
 * no clock of the task's reaches sbxd (it times tasks itself). The offsets can be set only
 * before the first process enters, so here, before the task child is cloned. Needs the
 * sandbox's own /proc. Returns 0 or -errno with e. */
static int init_time_ns(const struct init *in, struct err *e)
{
    if (unshare(CLONE_NEWTIME) < 0) {
        /* COMPAT(linux < 5.6): no time namespaces; the task sees the host's clocks. */
        return errno == EINVAL ? 0 : err_set(e, -errno, "unshare time namespace");
    }
    /* A forked sandbox's memory is the fork server's, made in the host's user namespace:
     * while init is undumpable, its /proc/self is then the host root's, not ours. Dumpable
     * only for the open, while init is the sandbox's only process. */
    if (in->from_forkserver) {
        (void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    }
    scoped_close int fd = openat(AT_FDCWD, "/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
    int r = fd < 0 ? -errno : 0;
    if (in->from_forkserver) {
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    if (r < 0) {
        return err_set(e, r, "open /proc/self/timens_offsets");
    }
    /* The system call, not musl's clock_gettime: that looks for the vDSO in the auxiliary
     * vector, on the stack that a sandbox forked by the fork server does not have. */
    struct timespec mono, boot;
    if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &mono) < 0 ||
        syscall(SYS_clock_gettime, CLOCK_BOOTTIME, &boot) < 0) {
        return err_set(e, -errno, "clock_gettime");
    }
    /* Whole seconds: the namespace's clocks start between 0 and 1 s, never below 0 (the
     * kernel refuses offsets that would make them negative). */
    char buf[96];
    int n = snprintf(buf, sizeof(buf), "monotonic %lld 0\nboottime %lld 0\n",
                     -(long long)mono.tv_sec, -(long long)boot.tv_sec);
    ssize_t w = RETRY_EINTR(write(fd, buf, (size_t)n));
    if (w != n) {
        return err_set(e, w < 0 ? -errno : -EIO, "write the time namespace's offsets");
    }
    return 0;
}

/* SECURITY: a task must not be able to run a memfd it wrote (docs/SECCOMP.md, "Exec from
 * writable memory"): either our pid namespace has vm.memfd_noexec=2 (set by sbxd or the
 * fork server before CTL_SETUP) or the filter refuses memfd_create. Checked here whoever set
 * what, so that a disagreement fails the sandbox instead of opening the hole. Needs the
 * sandbox's own /proc. Returns 0 or -errno with e. */
static int init_check_memfds(const struct init *in, struct err *e)
{
    char v[16];
    ssize_t n = file_read_small(AT_FDCWD, "/proc/sys/vm/memfd_noexec", v, sizeof(v));
    if (n > 0 && v[0] == '2') {
        return 0;
    }
    const struct seccomp_call call = {SYS_memfd_create, {0, 0, 0, 0, 0, 0}};
    if (!bpf_allows(in->filter, in->filter_len, &call, 1)) {
        return 0;
    }
    return err_setx(e, -EPERM,
                    "memfds stay executable: vm.memfd_noexec is %s and the seccomp "
                    "profile allows memfd_create",
                    n > 0 ? "below 2" : "unknown");
}

/* Runs the setup steps on the CTL_SETUP in in->buf (n bytes, got fds); on failure sends
 * CTL_SETUP_FAILED and exits. Returns the egress proxy's listener for pid1_ready, or -1
 * when there is none. */
static int init_setup(struct init *in, ssize_t n, size_t got)
{
    struct err e = ERR_INIT;
    uint32_t stage = CTL_STAGE_PROTOCOL;
    int r = pid1_parse_setup(in, n, got, CTL_SETUP, &e);
    if (r == 0 && in->from_forkserver) {
        stage = CTL_STAGE_IDS;
        r = in->image_fd >= 0 ? err_setx(&e, -EPROTO, "an image fd for a fork server's sandbox")
                              : init_become_root(&e);
    }
    if (r == 0) {
        stage = CTL_STAGE_CGROUPNS;
        /* After sbxd placed us: the namespace's root is the sandbox's own cgroup. */
        if (unshare(CLONE_NEWCGROUP) < 0) {
            r = err_set(&e, -errno, "unshare cgroup namespace");
        }
    }
    if (r == 0) {
        stage = CTL_STAGE_MOUNT;
        r = pid1_mount(in, in->from_forkserver ? MOUNT_FROM_TEMPLATE : MOUNT_WHOLE, &e);
        if (r == 0) {
            r = init_check_memfds(in, &e);
        }
        if (r == 0) {
            r = init_time_ns(in, &e);
        }
    }
    if (r == 0) {
        stage = CTL_STAGE_HOSTNAME;
        if (sethostname(in->setup.hostname, strlen(in->setup.hostname)) < 0) {
            r = err_set(&e, -errno, "sethostname");
        }
    }
    if (r == 0 && !(in->setup.flags & CTL_SETUP_LO_UP)) {
        stage = CTL_STAGE_NETWORK;
        r = init_lo_up(&e);
    }
    int proxy = -1;
    if (r == 0 && in->setup.proxy_port != 0) {
        proxy = init_proxy_listen((uint16_t)in->setup.proxy_port, &e);
        r = proxy < 0 ? proxy : 0;
    }
    if (r < 0) {
        pid1_send_failure(in, CTL_SETUP_FAILED, stage, r, err_msg(&e));
        _exit(1);
    }
    return proxy;
}

/* Reports CTL_READY, with the task child's pid (in our namespace: the task's own pid), the
 * /work tmpfs's root and the egress proxy's listener when there is one (both closed here:
 * sbxd holds the only copies from then on; init never accepts on the listener). A fork
 * server has neither. */
void pid1_ready(struct init *in, int proxy)
{
    struct ctl_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CTL_READY;
    ev.magic = CTL_MAGIC;
    ev.pid = in->task > 0 ? (uint32_t)in->task : 0;
    int fds[2];
    size_t n = 0;
    if (in->work_fd >= 0) {
        fds[n++] = in->work_fd;
    }
    if (proxy >= 0) {
        fds[n++] = proxy;
    }
    struct iovec iov = {&ev, sizeof(ev)};
    if (fd_sendmsg(in->ctl, &iov, 1, fds, n, MSG_NOSIGNAL) != (ssize_t)sizeof(ev)) {
        _exit(1);
    }
    in->work_fd = fd_close(in->work_fd);
    (void)fd_close(proxy);
}

/* Checks the CTL_TASK in buf (n bytes). The task child (CHILD-SAFE, e NULL) also points
 * argv/envp into it, in pointers after the packet; init only checks it (ret_argv NULL),
 * allocating nothing: a first malloc in a forked init costs page faults in musl's heap and
 * its metadata ("Address space" in docs/ARCHITECTURE.md). */
int pid1_parse_task(char *buf, size_t n, char ***ret_argv, char ***ret_envp, struct err *e)
{
    const struct ctl_task *t = (const struct ctl_task *)buf;
    if (n < sizeof(*t)) {
        return err_setx(e, -EPROTO, "short task packet");
    }
    if (t->magic != CTL_MAGIC || t->type != CTL_TASK) {
        return err_setx(e, -EPROTO, "bad task magic or type");
    }
    size_t len = n - sizeof(*t);
    /* Every string holds at least its NUL, so the counts are bounded by len. */
    if (t->data_len != len || t->argc == 0 || t->argc > len || t->envc > len - t->argc) {
        return err_setx(e, -EPROTO, "bad task counts");
    }
    if (!memchr(t->cwd, '\0', sizeof(t->cwd)) || t->cwd[0] != '/') {
        return err_setx(e, -EPROTO, "bad task cwd");
    }
    if (t->nofile == 0) {
        return err_setx(e, -EPROTO, "bad task nofile");
    }
    if (t->flags & ~CTL_TASK_KEEP) {
        return err_setx(e, -EPROTO, "unknown task flags 0x%x", t->flags);
    }
    if (t->n_mounts > CTL_MOUNTS_MAX ||
        (t->n_mounts < 32 && (t->mount_files >> t->n_mounts) != 0)) {
        return err_setx(e, -EPROTO, "bad task mounts");
    }
    for (uint32_t i = 0; i < t->n_mounts; i++) {
        if (!memchr(t->mount_dst[i], '\0', sizeof(t->mount_dst[i]))) {
            return err_setx(e, -EPROTO, "mount destination %u not terminated", i);
        }
    }
    char *data = buf + sizeof(*t);
    size_t nptrs = (size_t)t->argc + t->envc + 2;
    /* The task child's pointers follow its packet, 8-aligned (init_child_buf has room). */
    char **ptrs = ret_argv ? (char **)(void *)(buf + ((n + 7) & ~(size_t)7)) : NULL;
    size_t off = 0;
    for (size_t i = 0; i < (size_t)t->argc + t->envc; i++) {
        size_t end = off < len ? init_str_end(data, off, len) : 0;
        if (end == 0) {
            return err_setx(e, -EPROTO, "task string %zu not terminated", i);
        }
        /* argv then NULL, then envp then NULL. */
        if (ptrs) {
            ptrs[i < t->argc ? i : i + 1] = data + off;
        }
        off = end;
    }
    if (off != len) {
        return err_setx(e, -EPROTO, "trailing bytes after task strings");
    }
    if (ptrs) {
        ptrs[t->argc] = NULL;
        ptrs[nptrs - 1] = NULL;
        *ret_argv = ptrs;
        *ret_envp = ptrs + t->argc + 1;
    }
    return 0;
}
/* Buffers for the listener, as large as the kernel reads and writes: static (no heap in a
 * forked init) unless a future kernel's structures outgrow them. */
#define INIT_NOTIF_STATIC 512
static union {
    struct seccomp_notif notif;
    char bytes[INIT_NOTIF_STATIC];
} init_notif_store;
static union {
    struct seccomp_notif_resp resp;
    char bytes[INIT_NOTIF_STATIC];
} init_resp_store;

static int init_notif_buffers(struct init *in)
{
    struct seccomp_notif_sizes sz = {0, 0, 0};
    /* Without the call (an old kernel, or an outer filter), our own sizes are the kernel's. */
    (void)sys_seccomp_notif_sizes(&sz);
    in->notif_size = sz.seccomp_notif > sizeof(*in->notif) ? sz.seccomp_notif : sizeof(*in->notif);
    in->resp_size =
        sz.seccomp_notif_resp > sizeof(*in->resp) ? sz.seccomp_notif_resp : sizeof(*in->resp);
    in->notif =
        in->notif_size <= INIT_NOTIF_STATIC ? &init_notif_store.notif : calloc(1, in->notif_size);
    in->resp =
        in->resp_size <= INIT_NOTIF_STATIC ? &init_resp_store.resp : calloc(1, in->resp_size);
    return in->notif && in->resp ? 0 : -ENOMEM;
}

/* fds 0-2 are closed when we start; anything we open must not land there. */
static void init_fill_std_fds(void)
{
    for (;;) {
        int fd = openat(AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            _exit(2);
        }
        if (fd > 2) {
            (void)fd_close(fd);
            return;
        }
    }
}

/* A sandbox's init from its setup on: never returns. */
__attribute__((noreturn)) void pid1_sandbox(struct init *in, ssize_t n, size_t got)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0) {
        _exit(2);
    }
    in->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (in->sigfd < 0) {
        _exit(2);
    }
    int proxy = init_setup(in, n, got);
    /* Ahead of READY, so that the clone and the shedding of privileges are off a task's
     * path: a warm sandbox has its task child waiting. */
    task_child_clone(in, proxy);
    pid1_ready(in, proxy);
    task_run_loop(in);
    _exit(1);
}

/* The packet being received (struct init's buf). Page-aligned: the fork server gives its pages
 * back once its own setup is read (pid1_buf_release). */
static char init_buf[INIT_BUF_SIZE] __attribute__((aligned(4096)));

/* The fork server's setup packet is read: from here the fork server receives on its stack, so it
 * drops init_buf's pages, and a sandbox's first packet lands on a zero page of its own
 * rather than on a copy of the fork server's (the copy costs a page fault that also copies). */
void pid1_buf_release(void)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) {
        return;
    }
    uintptr_t lo = ((uintptr_t)init_buf + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t hi = ((uintptr_t)init_buf + sizeof(init_buf)) & ~((uintptr_t)page - 1);
    if (hi > lo) {
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
    }
}

int main(void)
{
    static struct init in __attribute__((aligned(4096)));
    int type = 0;
    socklen_t tlen = sizeof(type);

    /* SECURITY: the task must never inherit the control socket. */
    if (fcntl(CTL_FD, F_SETFD, FD_CLOEXEC) < 0 ||
        getsockopt(CTL_FD, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 || type != SOCK_SEQPACKET) {
        return 2;
    }
    init_fill_std_fds();
    (void)umask(022);
    /* Neither the task nor anything else in the sandbox may ptrace or peek into init. */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* Our own session and process group (not sbxd's): the task child waits in it, so that
     * sbxd can set the nice value of both with one setpriority(PRIO_PGRP, init's pid). Fails
     * only when we lead a group already, which is as good. */
    (void)setsid();
    in.ctl = CTL_FD;
    in.image_fd = -1;
    in.work_fd = -1;
    in.report = -1;
    in.listener = -1;
    if (init_notif_buffers(&in) < 0) {
        return 2;
    }
    in.buf = init_buf;
    size_t got = 0;
    ssize_t n = pid1_recv_setup(&in, &got);
    if (n >= (ssize_t)sizeof(struct ctl_setup) &&
        ((const struct ctl_setup *)in.buf)->type == CTL_FORKSERVER) {
        forkserver_run(&in, n, got);
    }
    pid1_sandbox(&in, n, got);
}
