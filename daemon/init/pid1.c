/* SPDX-License-Identifier: MIT */
/* sbxd-init: static pid 1 of every sandbox. Builds the sandbox (cgroupns, mounts, hostname,
 * loopback) on CTL_SETUP and clones the task's process ahead, which sheds its privileges and
 * waits; on CTL_TASK hands it the one task, which it runs with no privileges left. Answers
 * and counts the task's seccomp denials (docs/SECCOMP.md, "Counting denials"), reaps every
 * process of the namespace and reports. It trusts nothing it reads from CTL_FD without
 * checking, and exits as soon as the control socket closes, or once it has reported how
 * its task ended (its exit then ends every process left in the namespace).
 *
 * This file is pid 1's part: setup, the loop, and init's side of the task; the task's own
 * process is task_child.c, a pool's fork server forkserver.c. */
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

/* The fds that may come with one packet: a task's stdio and its token mounts. */
#define INIT_FDS_MAX (3 + CTL_MOUNTS_MAX)
_Static_assert(INIT_FDS_MAX <= FD_SEND_MAX, "init_recv's fds fit fd_recv");
/* Notifications answered per poll round at most: a task that spams denied calls must not
 * keep init from its control socket and from reaping. */
#define INIT_NOTIF_BATCH 64

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64) /* linux 6.6 */
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

/* The control socket is our only link: if it fails, the sandbox ends with us. */
static void init_send(const struct init *in, struct ctl_event *ev)
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
    init_send(in, &ev);
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
/* init's side of the task: it hands the task to the task child, answers the task's seccomp
 * notifications, reaps the namespace and reports. */

static void init_read_reports(struct init *in);

static void init_start_task(struct init *in)
{
    struct err e = ERR_INIT;
    int fds[INIT_FDS_MAX];
    size_t got = 0;

    for (size_t i = 0; i < INIT_FDS_MAX; i++) {
        fds[i] = -1;
    }
    in->state = TASK_DONE; /* one task per sandbox, whatever happens below */
    ssize_t n = init_recv(in, in->ctl, fds, INIT_FDS_MAX, &got);
    if (n == 0) {
        _exit(0);
    }
    int r = n < 0 ? err_set(&e, (int)n, "receive task") : 0;
    if (r == 0) {
        r = pid1_parse_task(in->buf, (size_t)n, NULL, NULL, &e);
    }
    const struct ctl_task *t = (const struct ctl_task *)in->buf;
    if (r == 0 && got != 3 + (size_t)t->n_mounts) {
        r = err_setx(&e, -EPROTO, "task needs %u fds, got %zu", 3 + t->n_mounts, got);
    }
    uint32_t stage = CTL_STAGE_PROTOCOL;
    if (r == 0 && t->n_mounts > 0) {
        /* The token's mounts, before the task: it finds them in place. */
        stage = CTL_STAGE_TASK_MOUNT;
        r = mount_task_mounts(fds + 3, t->n_mounts, t->mount_dst, t->mount_files,
                              in->from_forkserver, &e);
    }
    /* The mounts are attached (or refused): init keeps no handle on them. */
    for (size_t i = 3; i < got; i++) {
        fds[i] = fd_close(fds[i]);
    }
    if (r == 0) {
        /* argv[0] is the first string: checked above, NUL-terminated. */
        (void)str_copy(in->argv0, in->buf + sizeof(*t), sizeof(in->argv0));
        (void)str_copy(in->cwd, t->cwd, sizeof(in->cwd));
        /* SECURITY: the only message the child ever receives from us: this checked task,
         * and the stdio it runs with. The mounts' fds stay behind (closed above). */
        struct iovec iov = {in->buf, (size_t)n};
        ssize_t sent = fd_sendmsg(in->report, &iov, 1, fds, 3, MSG_NOSIGNAL);
        if (sent != n) {
            stage = CTL_STAGE_FORK;
            r = err_set(&e, sent < 0 ? (int)sent : -EIO, "hand the task to its process");
        }
    }
    /* The task holds its stdio now: ours would keep sbxd's readers from seeing EOF. */
    for (int i = 0; i < 3; i++) {
        fds[i] = fd_close(fds[i]);
    }
    if (r < 0) {
        /* The child reads EOF instead of a task and leaves; we reap it as any orphan. */
        in->report = fd_close(in->report);
        pid1_send_failure(in, CTL_EXEC_FAILED, stage, r, err_msg(&e));
        return;
    }
    (void)fd_set_nonblock(in->report, true);
    in->state = TASK_RUNNING;
    if (in->filter_early) {
        /* The listener has been waiting since the child was cloned. */
        init_read_reports(in);
    }
    /* No report that the task started: sbxd counts it started once CTL_TASK is sent (it
     * had the task's pid with CTL_READY), and hears of it next from CTL_EXITED or
     * CTL_EXEC_FAILED. A message here would wake sbxd's loop beside the task's execve. */
}

static uint64_t init_tv_us(const struct timeval *tv)
{
    return (uint64_t)tv->tv_sec * 1000000u + (uint64_t)tv->tv_usec;
}

/* Reads everything the task child has sent so far: the listener, then at most one failure
 * record; closes the socket at EOF (the child exec'd or died). Never blocks. */
static void init_read_reports(struct init *in)
{
    while (in->report >= 0) {
        struct init_report rep;
        int fd = -1;
        ssize_t n = fd_recv_one(in->report, &rep, sizeof(rep), &fd, MSG_DONTWAIT);
        if (n == -EAGAIN) {
            return;
        }
        if (n <= 0) {
            in->report = fd_close(in->report);
            return;
        }
        if (n != (ssize_t)sizeof(rep)) {
            (void)fd_close(fd);
            continue;
        }
        if (rep.stage == CTL_STAGE_NONE) {
            if (fd >= 0 && in->listener < 0) {
                in->listener = take_fd(&fd);
                in->counting = true;
                /* Task and init take turns on one CPU instead of waking each other across
                 * CPUs: a denial costs several times less. Older kernels lack it: no matter. */
                (void)ioctl(in->listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
            }
            (void)fd_close(fd);
        } else {
            (void)fd_close(fd);
            if (!in->failed) {
                in->failed = true;
                in->failure = rep;
            }
        }
    }
}

/* Closes a failed listener: the kernel then fails whatever is still waiting, and every
 * later counted call, with ENOSYS, so the count is unknown. (One whose filter has no user
 * left stays open: init_serve_listener.) */
static void init_close_listener(struct init *in)
{
    in->listener = fd_close(in->listener);
    in->counting = false;
}

/* Answers the oldest pending notification, if there is one, with the errno the program
 * itself gives the call, and counts it. Returns 1 when one was taken (answered, or its
 * caller had died meanwhile), 0 when none was pending, -errno when the listener failed. */
static int init_answer_one(struct init *in)
{
    struct pollfd p = {in->listener, POLLIN, 0};
    int k = RETRY_EINTR(poll(&p, 1, 0));
    if (k < 0) {
        return -errno;
    }
    /* RECV blocks when nothing is pending: never call it without POLLIN. */
    if (k == 0 || !(p.revents & POLLIN)) {
        return 0;
    }
    for (;;) {
        /* The kernel refuses a buffer that is not all zeroes. */
        memset(in->notif, 0, in->notif_size);
        if (ioctl(in->listener, SECCOMP_IOCTL_NOTIF_RECV, in->notif) == 0) {
            break;
        }
        if (errno == ENOENT) {
            return 1; /* the caller died (or was interrupted) before we got to it */
        }
        if (errno != EINTR) {
            return -errno;
        }
    }
    memset(in->resp, 0, in->resp_size);
    in->resp->id = in->notif->id;
    in->resp->val = 0;
    in->resp->error = -bpf_notify_errno(in->filter, in->filter_len, &in->notif->data);
    in->resp->flags = 0;
    if (RETRY_EINTR(ioctl(in->listener, SECCOMP_IOCTL_NOTIF_SEND, in->resp)) < 0 &&
        errno != ENOENT) {
        return -errno;
    }
    /* ENOENT: the caller was killed or interrupted after making the call; it still did. */
    if (in->denials < CTL_DENIALS_UNKNOWN - 1) {
        in->denials++;
    }
    return 1;
}

/* Serves the listener for one poll round: at most INIT_NOTIF_BATCH answers. */
static void init_serve_listener(struct init *in, short revents)
{
    if (revents & POLLIN) {
        for (int i = 0; i < INIT_NOTIF_BATCH; i++) {
            int r = init_answer_one(in);
            if (r < 0) {
                init_close_listener(in);
                return;
            }
            if (r == 0) {
                break;
            }
        }
    }
    /* POLLERR, POLLNVAL: the listener failed, and the count is unknown. POLLHUP: no process
     * uses the filter any more, so nothing can be pending; the count is final. We keep the
     * listener open without polling it, to close it with our exit: its close drops the last
     * hold on the program, and the kernel queues the program's free (the unmapping of its JIT
     * image) to a worker of this CPU, which would otherwise run before our report reaches
     * sbxd (BENCHMARKS.md, session 17). */
    if (revents & (POLLERR | POLLNVAL)) {
        init_close_listener(in);
    } else if (revents & POLLHUP) {
        in->listener_hup = true;
    }
}

static void init_task_exited(struct init *in, int wstatus, const struct rusage *ru)
{
    /* The child is gone, so the socket holds its records and then EOF: no wait here. (A
     * listener still queued here was never needed: nothing could have been denied.) */
    init_read_reports(in);
    in->report = fd_close(in->report);
    in->state = TASK_DONE;
    if (in->failed) {
        const struct init_report rep = in->failure;
        char msg[128];
        if (rep.stage == CTL_STAGE_EXEC) {
            (void)snprintf(msg, sizeof(msg), "execve '%.64s': %s", in->argv0, err_name(rep.err));
        } else if (rep.stage == CTL_STAGE_CHDIR) {
            (void)snprintf(msg, sizeof(msg), "chdir '%.80s': %s", in->cwd, err_name(rep.err));
        } else {
            (void)snprintf(msg, sizeof(msg), "task setup stage %d: %s", rep.stage,
                           err_name(rep.err));
        }
        pid1_send_failure(in, CTL_EXEC_FAILED, (uint32_t)rep.stage, rep.err, msg);
    } else {
        struct ctl_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.type = CTL_EXITED;
        ev.pid = (uint32_t)in->task;
        ev.wstatus = wstatus;
        ev.utime_us = init_tv_us(&ru->ru_utime);
        ev.stime_us = init_tv_us(&ru->ru_stime);
        ev.maxrss_kb = (uint64_t)ru->ru_maxrss;
        ev.seccomp_denials = in->counting ? in->denials : CTL_DENIALS_UNKNOWN;
        init_send(in, &ev);
    }
    /* Our last report is sent: the sandbox ends now, as sbxd would end it on reading the
     * report. As pid 1 our exit kills whatever the task left running (the kernel empties
     * the namespace before our exit completes), and sbxd reads the report before it reaps
     * us (pid_cb). Exiting here spares a wake-up for sbxd's SIGKILL. */
    _exit(0);
}

/* As pid 1 we reap every process of the namespace, orphans included. */
static void init_reap(struct init *in)
{
    /* Raw calls: they end in EAGAIN and ECHILD, and libc's would write errno, whose page
     * (musl's TLS) the fork server's fork gave us shared: one copy-on-write fault per sandbox. */
    struct signalfd_siginfo si;
    while (sys_read(in->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
    }
    for (;;) {
        int st = 0;
        struct rusage ru;
        pid_t pid = sys_wait4(-1, &st, WNOHANG, &ru);
        if (pid <= 0) {
            return;
        }
        if (pid != in->task) {
            continue;
        }
        if (in->state == TASK_NONE) {
            /* The task child died before its task (never by itself): a task must not run
             * without the privileges shed, so this sandbox cannot serve one. */
            _exit(1);
        }
        if (in->state == TASK_RUNNING) {
            init_task_exited(in, st, &ru);
        }
    }
}

/* The control socket is readable: the task, before it starts; only EOF after. */
static void init_ctl_ready(struct init *in)
{
    if (in->state == TASK_NONE) {
        init_start_task(in);
        return;
    }
    /* Only EOF is expected after the task: anything else ends the sandbox. */
    char c;
    ssize_t n = RETRY_EINTR(recv(in->ctl, &c, 1, MSG_DONTWAIT));
    if (n < 0 && errno == EAGAIN) {
        return;
    }
    _exit(n == 0 ? 0 : 1);
}

static void init_loop(struct init *in)
{
    for (;;) {
        /* poll ignores negative fds: the report socket and listener come and go. Nothing is
         * read from the task child before it has its task. The report socket stays polled
         * to its EOF at the child's execve, though no record can follow a listener: our end
         * then closes at once, and the task finds no socket of ours in its network
         * namespace's /proc/net/unix (test_netns). Reading it only at the reap instead
         * saved a wake-up per task but no measurable time (BENCHMARKS.md, session 7). */
        struct pollfd pfd[4] = {{in->ctl, POLLIN, 0},
                                {in->sigfd, POLLIN, 0},
                                {in->state == TASK_RUNNING ? in->report : -1, POLLIN, 0},
                                {in->listener_hup ? -1 : in->listener, POLLIN, 0}};
        if (poll(pfd, 4, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            _exit(1);
        }
        /* Reports and denials before exits, so that an exit reports an up-to-date count. */
        if (pfd[2].revents) {
            init_read_reports(in);
        }
        if (pfd[3].revents && in->listener >= 0) {
            init_serve_listener(in, pfd[3].revents);
        }
        if (pfd[1].revents) {
            init_reap(in);
        }
        if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            init_ctl_ready(in);
        }
    }
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
    init_loop(in);
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
