/* SPDX-License-Identifier: MIT */
/* sbxd-init: static pid 1 of every sandbox. Builds the sandbox (cgroupns, mounts, hostname,
 * loopback) on CTL_SETUP and clones the task's process ahead, which sheds its privileges and
 * waits; on CTL_TASK hands it the one task, which it runs with no privileges left. Answers
 * and counts the task's seccomp denials (docs/SECCOMP.md, "Counting denials"), reaps every
 * process of the namespace and reports. It trusts nothing it reads from CTL_FD without
 * checking, and exits as soon as the control socket closes, or once it has reported how
 * its task ended (its exit then ends every process left in the namespace). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
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
#include <unistd.h>

#include "wire/ctl.h"
#include "lib/err.h"
#include "init/mount.h"
#include "wire/bpf.h"
#include "lib/sys.h"
#include "lib/util.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47 /* linux 4.3 */
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* What the waiting task child keeps effective (of what init has) until the task's chdir and
 * setrlimit are done, so that both succeed and fail exactly as for a child of init's full
 * privileges: path search overrides for chdir, and raising RLIMIT_NOFILE where init could. */
#define INIT_CHILD_KEEP_CAPS ((1u << CAP_DAC_READ_SEARCH) | (1u << CAP_SYS_RESOURCE))

/* The largest packet we accept: a CTL_TASK (its header and up to CTL_TASK_DATA_MAX bytes of
 * strings), or a CTL_SETUP with the largest filter. */
#define INIT_SETUP_MAX                                                                             \
    (sizeof(struct ctl_setup) + CTL_SECCOMP_MAX_INSNS * sizeof(struct sock_filter))
#define INIT_TASK_MAX (sizeof(struct ctl_task) + CTL_TASK_DATA_MAX)
#define INIT_BUF_SIZE ((INIT_TASK_MAX > INIT_SETUP_MAX ? INIT_TASK_MAX : INIT_SETUP_MAX) + 1)
/* The fds that may come with one packet: a task's stdio and its token mounts. */
#define INIT_FDS_MAX (3 + CTL_MOUNTS_MAX)
_Static_assert(INIT_FDS_MAX <= FD_SEND_MAX, "init_recv's fds fit fd_recv");
#define INIT_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
/* Notifications answered per poll round at most: a task that spams denied calls must not
 * keep init from its control socket and from reaping. */
#define INIT_NOTIF_BATCH 64

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64) /* linux 6.6 */
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

/* TASK_NONE: the task child waits for its task; TASK_RUNNING: it has it; TASK_DONE: the
 * task ended, or will never start. */
enum init_task_state { TASK_NONE, TASK_RUNNING, TASK_DONE };

struct init;

/* The argument of the task child's clone. */
struct init_child_arg {
    const struct init *in;
    int sock;    /* its end of the socket to init */
    int drop[4]; /* init's fds it must not hold, -1 for none */
};

/* One per process, page-aligned: main's, and in a sandbox forked by the fork server a fresh one
 * (init_forkserver_child) that starts as a copy of the fork server's up to the filter, and writes
 * all of it but the end of the filter. The filter comes last, so that with a filter of up
 * to about 400 instructions (`default` has about 260) a sandbox writes one page of it
 * ("Address space" in docs/ARCHITECTURE.md). */
struct init {
    int ctl;
    /* Forked by the pool's fork server (init_forkserver): the root comes from its template, and our
     * ids are still the host's until CTL_SETUP (sbxd has written the maps by then). */
    bool from_forkserver;
    int image_fd; /* CTL_SETUP_IMAGE_FD: the image's root until the mounts are built, else -1 */
    int sigfd;
    struct ctl_setup setup;
    unsigned short filter_len;
    /* The task child installs the filter as soon as it is cloned (seccomp_prog_early_ok),
     * not when its task comes: the task then starts that much sooner. */
    bool filter_early;
    char *buf; /* INIT_BUF_SIZE bytes, 8-aligned: the packet being received */
    enum init_task_state state;
    pid_t task; /* the task child, cloned at setup */
    /* Our end of the task child's socket (SOCK_SEQPACKET, CLOEXEC) until EOF: the child's end
     * closes on execve. We send the task on it, once (TASK_NONE), then only read the child's
     * reports (non-blocking). */
    int report;
    bool failed; /* the child sent a failure record: `failure` */
    struct init_report {
        int32_t stage; /* enum ctl_stage; CTL_STAGE_NONE with the listener attached */
        int32_t err;   /* -errno */
    } failure;
    int listener;                /* the task's seccomp listener, or -1 */
    bool listener_hup;           /* no process uses the filter: kept, no longer polled */
    bool counting;               /* a listener came, and answering never failed */
    uint32_t denials;            /* notifications answered */
    struct seccomp_notif *notif; /* notif_size bytes (the kernel's size, maybe > ours) */
    struct seccomp_notif_resp *resp;
    size_t notif_size;
    size_t resp_size;
    char argv0[64]; /* for messages */
    char cwd[CTL_PATH_MAX];
    struct init_child_arg child_arg;
    struct sock_filter filter[CTL_SECCOMP_MAX_INSNS];
};

/* The control socket is our only link: if it fails, the sandbox ends with us. */
static void init_send(const struct init *in, struct ctl_event *ev)
{
    ev->magic = CTL_MAGIC;
    ssize_t n = RETRY_EINTR(send(in->ctl, ev, sizeof(*ev), MSG_NOSIGNAL));
    if (n != (ssize_t)sizeof(*ev)) {
        _exit(1);
    }
}

static void init_send_failure(const struct init *in, uint32_t type, uint32_t stage, int err,
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
static ssize_t init_recv_sized(char *buf, size_t size, int sock, int *fds, size_t nfds, size_t *got)
{
    bool bad = false;
    ssize_t n = fd_recv(sock, buf, size, fds, nfds, got, &bad, 0);
    return n >= 0 && bad ? -EMSGSIZE : n;
}

/* init_recv_sized into an INIT_BUF_SIZE buffer. */
static ssize_t init_recv_into(char *buf, int sock, int *fds, size_t nfds, size_t *got)
{
    return init_recv_sized(buf, INIT_BUF_SIZE, sock, fds, nfds, got);
}

/* init_recv_into init's own buffer. */
static ssize_t init_recv(struct init *in, int sock, int *fds, size_t nfds, size_t *got)
{
    return init_recv_into(in->buf, sock, fds, nfds, got);
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
static ssize_t init_recv_setup(struct init *in, size_t *got)
{
    ssize_t n = init_recv(in, in->ctl, &in->image_fd, 1, got);
    if (n == 0) {
        _exit(0);
    }
    return n;
}

/* Checks the CTL_SETUP (or, for a fork server, CTL_FORKSERVER) of n bytes in in->buf that came with
 * got fds. Returns 0 or -errno with e. */
static int init_parse_setup(struct init *in, ssize_t n, size_t got, uint32_t type, struct err *e)
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
    if (s->tmp_size == 0 || ((s->flags & CTL_SETUP_DEV_SHM) && s->shm_size == 0)) {
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
static void init_send_with_fd(const struct init *in, struct ctl_event *ev, int fd)
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
static int init_mount(struct init *in, enum mount_mode mode, struct err *e)
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
        .shm_size = (s->flags & CTL_SETUP_DEV_SHM) ? s->shm_size : 0,
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

/* Runs the setup steps on the CTL_SETUP in in->buf (n bytes, got fds); on failure sends
 * CTL_SETUP_FAILED and exits. Returns the egress proxy's listener for init_ready, or -1
 * when there is none. */
static int init_setup(struct init *in, ssize_t n, size_t got)
{
    struct err e = ERR_INIT;
    uint32_t stage = CTL_STAGE_PROTOCOL;
    int r = init_parse_setup(in, n, got, CTL_SETUP, &e);
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
        r = init_mount(in, in->from_forkserver ? MOUNT_FROM_TEMPLATE : MOUNT_WHOLE, &e);
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
        init_send_failure(in, CTL_SETUP_FAILED, stage, r, err_msg(&e));
        _exit(1);
    }
    return proxy;
}

/* Reports CTL_READY, with the task child's pid (in our namespace: the task's own pid) and
 * the egress proxy's listener when there is one (closed here). */
static void init_ready(const struct init *in, int proxy)
{
    struct ctl_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CTL_READY;
    ev.pid = in->task > 0 ? (uint32_t)in->task : 0;
    if (proxy >= 0) {
        /* sbxd holds the only copy from here: init never accepts on it. */
        init_send_with_fd(in, &ev, proxy);
        (void)fd_close(proxy);
        return;
    }
    init_send(in, &ev);
}

/* The task child's own memory, which init never touches: its task packet, then (8-aligned)
 * the argv and envp pointers, which it must not malloc (it shares our memory, see
 * init_clone_task_child, and its filter may be on by then: seccomp_prog_early_ok proves
 * nothing about malloc's calls), then the path of the PATH search. Every string of a task
 * holds at least its NUL, hence the bound on the pointers. One buffer, so that a small task
 * touches one page of it: untouched pages cost nothing. */
#define INIT_CHILD_PTRS_MAX (INIT_BUF_SIZE + 2)
#define INIT_CHILD_PATH_MAX 4096
static char init_child_buf[INIT_BUF_SIZE + 8 + INIT_CHILD_PTRS_MAX * sizeof(char *) +
                           INIT_CHILD_PATH_MAX] __attribute__((aligned(8)));

/* The task child's copy of the filter when it must strip the notifications (init's copy
 * answers them). */
static struct sock_filter init_child_filter[CTL_SECCOMP_MAX_INSNS];

/* Checks the CTL_TASK in buf (n bytes). The task child (CHILD-SAFE, e NULL) also points
 * argv/envp into it, in pointers after the packet; init only checks it (ret_argv NULL),
 * allocating nothing: a first malloc in a forked init costs page faults in musl's heap and
 * its metadata ("Address space" in docs/ARCHITECTURE.md). */
static int init_parse_task(char *buf, size_t n, char ***ret_argv, char ***ret_envp, struct err *e)
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

/* ---- the task child ----
 *
 * Cloned with CLONE_VM (init_clone_task_child): it shares init's memory and TLS, errno
 * included, until its execve, while init goes on. So everything below is CHILD-SAFE
 * (sys.h): system calls only through sys.h, nothing allocated, no errno, no stdio; it
 * writes only its stack, init_child_buf and init_child_filter, and reads of `in` only what
 * init set before the clone and never changes after (setup, filter, filter_len,
 * filter_early, child_arg). No copy of init's address space is made or torn down per
 * sandbox: that was a tenth of init's CPU time. */

/* Its stack, with a guard page below it, in the bss like every buffer of init's: a mapping
 * of its own would land in the mmap area, far from the program, and cost every sandbox a
 * set of page tables to copy and free ("Address space" in docs/ARCHITECTURE.md). The guard
 * is made PROT_NONE once, by the fork server before its first fork or by a from-scratch init;
 * 64 KiB alignment leaves room for any page size up to that. */
#define INIT_CHILD_STACK (64 * 1024)
#define INIT_GUARD_ROOM (64 * 1024)
static char init_child_stack_area[INIT_GUARD_ROOM + INIT_CHILD_STACK]
    __attribute__((aligned(INIT_GUARD_ROOM)));
static char *init_child_stack;

/* Makes the page below stack's area (area + INIT_GUARD_ROOM) PROT_NONE, once. */
static int init_stack_guard(char *area, char **stack)
{
    if (*stack) {
        return 0;
    }
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || page > INIT_GUARD_ROOM) {
        return -EINVAL;
    }
    if (mprotect(area + INIT_GUARD_ROOM - page, (size_t)page, PROT_NONE) < 0) {
        return -errno;
    }
    *stack = area + INIT_GUARD_ROOM;
    return 0;
}

static int init_child_stack_guard(void)
{
    return init_stack_guard(init_child_stack_area, &init_child_stack);
}

/* write(), not send(): after the filter is on, write is the call every profile allows. */
__attribute__((noreturn)) static void init_child_fail(int report, int stage, int err)
{
    struct init_report rep = {stage, err};
    (void)sys_write(report, &rep, sizeof(rep));
    sys_exit(127);
}

/* Sends {CTL_STAGE_NONE, 0} with fd attached. sendmsg with flags 0 is the one call a counting
 * program must allow (seccomp.c checks it at load). Returns 0 or -errno. */
static int init_child_send_fd(int report, int fd)
{
    struct init_report rep = {CTL_STAGE_NONE, 0};
    struct iovec iov = {&rep, sizeof(rep)};
    ssize_t n = fd_sendmsg(report, &iov, 1, &fd, 1, 0);
    if (n < 0) {
        return (int)n;
    }
    return n == (ssize_t)sizeof(rep) ? 0 : -EIO;
}

/* Installs the pool's program. A counting program (one with USER_NOTIF returns) gets a
 * listener, handed to init over the report socket before execve; the listener is CLOEXEC,
 * so the task never holds it. Where the kernel gives none (EBUSY: an outer filter already
 * has a listener; EINVAL: no NEW_LISTENER), the program is turned into its plain form (in
 * init_child_filter: init's copy stays as it is) and installed without one: the same
 * denials, not counted (init sees no listener). Returns 0 or -errno. */
static int init_child_seccomp(const struct init *in, int report)
{
    if (!seccomp_prog_notifies(in->filter, in->filter_len)) {
        return sys_seccomp_filter(in->filter, in->filter_len);
    }
    int fd = sys_seccomp_filter_flags(in->filter, in->filter_len, SECCOMP_FILTER_FLAG_NEW_LISTENER);
    if (fd == -EBUSY || fd == -EINVAL) {
        memcpy(init_child_filter, in->filter, in->filter_len * sizeof(in->filter[0]));
        seccomp_prog_strip_notify(init_child_filter, in->filter_len);
        return sys_seccomp_filter(init_child_filter, in->filter_len);
    }
    if (fd < 0) {
        return fd;
    }
    /* SECURITY: without init holding the listener, counted denials would fail with ENOSYS
     * instead of their errno once exec closes ours: the task must not run. */
    return init_child_send_fd(report, fd);
}

static const char *init_env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; *envp; envp++) {
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=') {
            return *envp + n + 1;
        }
    }
    return NULL;
}

/* execvpe along the task's own PATH (never ours), with buf (size bytes) for the paths it
 * tries. Returns -errno. */
static int init_exec(char *const *argv, char *const *envp, char *buf, size_t size)
{
    const char *file = argv[0];
    if (file[0] == '\0') {
        return -ENOENT;
    }
    if (strchr(file, '/')) {
        return sys_execve(file, argv, envp);
    }
    const char *path = init_env_get(envp, "PATH");
    if (!path) {
        path = INIT_DEFAULT_PATH;
    }
    size_t flen = strlen(file);
    bool eacces = false;
    int last = -ENOENT;
    for (const char *p = path;;) {
        const char *end = strchrnul(p, ':');
        size_t dlen = (size_t)(end - p);
        if (dlen + flen + 2 <= size) {
            /* An empty element is the current directory, as in execvp. */
            size_t o = 0;
            if (dlen > 0) {
                memcpy(buf, p, dlen);
                buf[dlen] = '/';
                o = dlen + 1;
            }
            memcpy(buf + o, file, flen + 1);
            int r = sys_execve(buf, argv, envp);
            if (r == -EACCES) {
                eacces = true;
            } else if (r != -ENOENT && r != -ENOTDIR && r != -ESTALE && r != -ENODEV &&
                       r != -ETIMEDOUT) {
                return r;
            }
            last = r;
        } else {
            last = -ENAMETOOLONG;
        }
        if (*end == '\0') {
            break;
        }
        p = end + 1;
    }
    return eacces ? -EACCES : last;
}

/* Drops every capability from the bounding set, up to the kernel's last one: dropping one
 * past it fails with EINVAL (one call per capability, not a read and a drop). */
static int init_drop_bounding(void)
{
    for (int cap = 0; cap < 64; cap++) {
        int r = sys_prctl(PR_CAPBSET_DROP, (unsigned long)cap, 0, 0, 0);
        if (r < 0) {
            return r == -EINVAL && cap > 0 ? 0 : r;
        }
    }
    return 0;
}

/* Narrows effective and permitted to those of caps (capabilities 0-31) that are permitted
 * now, inheritable to none. Returns 0 or -errno. */
static int init_child_capset(uint32_t caps)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof(data));
    int r = sys_capget(&hdr, data);
    if (r < 0) {
        return r;
    }
    caps &= data[0].permitted;
    memset(data, 0, sizeof(data));
    data[0].effective = caps;
    data[0].permitted = caps;
    return sys_capset(&hdr, data);
}

/* The part of starting a task that needs no task, done by the task child as soon as it is
 * cloned, in the order init used to do it after the fork: signals, and every privilege but
 * INIT_CHILD_KEEP_CAPS (effective and permitted only: never inheritable nor ambient, and
 * cleared before the task's program runs). The child stays in init's process group until
 * its task comes, so that sbxd's renice of the group when init is READY reaches it (the
 * child was cloned at init's background nice value). Stops at the first failure. Returns
 * CTL_STAGE_NONE, or the stage that failed with *err. */
static int init_child_prepare(const struct init *in, int *err)
{
    sigset_t none;
    sigemptyset(&none);
    int r = sys_sigprocmask(SIG_SETMASK, &none, NULL);
    if (r < 0) {
        *err = r;
        return CTL_STAGE_FORK;
    }
    /* SECURITY: no capability can come back, through exec of a file or otherwise. */
    r = init_drop_bounding();
    if (r < 0) {
        *err = r;
        return CTL_STAGE_CAPS;
    }
    /* Keep the permitted set across the change of uid, for init_child_capset to narrow it;
     * execve resets the flag. */
    r = sys_prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0);
    if (r < 0) {
        *err = r;
        return CTL_STAGE_CAPS;
    }
    r = sys_setgroups_empty();
    if (r == 0) {
        r = sys_setresgid(in->setup.gid, in->setup.gid, in->setup.gid);
    }
    if (r == 0) {
        r = sys_setresuid(in->setup.uid, in->setup.uid, in->setup.uid);
    }
    if (r < 0) {
        *err = r;
        return CTL_STAGE_SETUID;
    }
    r = init_child_capset(INIT_CHILD_KEEP_CAPS);
    if (r == 0) {
        r = sys_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    }
    if (r < 0) {
        *err = r;
        return CTL_STAGE_CAPS;
    }
    r = sys_prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (r < 0) {
        *err = r;
        return CTL_STAGE_NNP;
    }
    return CTL_STAGE_NONE;
}

/* The task child: cloned at setup, it sheds what it can (init_child_prepare) and blocks on
 * sock for the one message init ever sends there: a checked CTL_TASK with its stdin,
 * stdout and stderr. A failure of the preparation is reported only then, as if it had
 * happened after the task came; EOF (no task will come) ends the child quietly. Then it
 * runs the task: session, stdio, cwd, rlimits, no capabilities, seccomp (unless the filter
 * went on at the start, in->filter_early), execve. Every record for init goes back on
 * sock. */
__attribute__((noreturn)) static void init_task_child(const struct init *in, int sock)
{
    int err = 0;
    int stage = init_child_prepare(in, &err);
    /* The filter now, when it allows everything we do below: off the task's path. */
    bool filtered = false;
    if (stage == CTL_STAGE_NONE && in->filter_early) {
        filtered = true;
        int r = init_child_seccomp(in, sock);
        if (r < 0) {
            stage = CTL_STAGE_SECCOMP;
            err = r;
        }
    }

    int fds[3] = {-1, -1, -1};
    size_t got = 0;
    ssize_t n = init_recv_into(init_child_buf, sock, fds, 3, &got);
    if (n == 0) {
        sys_exit(0);
    }
    if (stage != CTL_STAGE_NONE) {
        init_child_fail(sock, stage, err);
    }
    char **argv = NULL;
    char **envp = NULL;
    int r = n < 0 ? (int)n : init_parse_task(init_child_buf, (size_t)n, &argv, &envp, NULL);
    if (r == 0 && got != 3) {
        r = -EPROTO;
    }
    if (r < 0) {
        init_child_fail(sock, CTL_STAGE_FORK, r);
    }
    const struct ctl_task *t = (const struct ctl_task *)init_child_buf;
    r = sys_setsid();
    if (r < 0) {
        init_child_fail(sock, CTL_STAGE_SETSID, r);
    }
    /* Lift the fds above 2 first so that no dup2 below clobbers another one. */
    for (int i = 0; i < 3; i++) {
        if (fds[i] < 3) {
            fds[i] = sys_fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
            if (fds[i] < 0) {
                init_child_fail(sock, CTL_STAGE_FDS, fds[i]);
            }
        }
    }
    for (int i = 0; i < 3; i++) {
        r = sys_dup2(fds[i], i);
        if (r < 0) {
            init_child_fail(sock, CTL_STAGE_FDS, r);
        }
    }
    r = sys_chdir(t->cwd);
    if (r < 0) {
        init_child_fail(sock, CTL_STAGE_CHDIR, r);
    }
    r = sys_setrlimit(RLIMIT_NOFILE, t->nofile, t->nofile);
    if (r == 0) {
        r = sys_setrlimit(RLIMIT_CORE, 0, 0);
    }
    if (r < 0) {
        init_child_fail(sock, CTL_STAGE_RLIMIT, r);
    }
    r = sys_capset_empty();
    if (r < 0) {
        init_child_fail(sock, CTL_STAGE_CAPS, r);
    }
    if (!filtered && in->filter_len > 0) {
        r = init_child_seccomp(in, sock);
        if (r < 0) {
            init_child_fail(sock, CTL_STAGE_SECCOMP, r);
        }
    }
    /* The path buffer after envp's NULL: on the page the pointers are on, for a small task. */
    char *path = (char *)(envp + t->envc + 1);
    r = init_exec(argv, envp, path, (size_t)(init_child_buf + sizeof(init_child_buf) - path));
    init_child_fail(sock, CTL_STAGE_EXEC, r);
}

/* The clone's entry point. SECURITY: the child holds only fds 0-2 (the sandbox's /dev/null,
 * CLOEXEC) and its end of the socket: never the control socket, which would let it read
 * what sbxd sends init, nor the signalfd or the proxy's listener. Its fd table is its own
 * (no CLONE_FILES), so the closes change nothing in init. */
static int init_task_child_main(void *arg)
{
    const struct init_child_arg *a = arg;
    for (size_t i = 0; i < sizeof(a->drop) / sizeof(a->drop[0]); i++) {
        if (a->drop[i] >= 0) {
            (void)sys_close(a->drop[i]);
        }
    }
    init_task_child(a->in, a->sock);
}

/* Clones the task child ahead of its task, with a socket to it. On failure sends
 * CTL_SETUP_FAILED and exits. */
static void init_clone_task_child(struct init *in, int proxy)
{
    int sp[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        init_send_failure(in, CTL_SETUP_FAILED, CTL_STAGE_FORK, -errno, "task socket");
        _exit(1);
    }
    int r = init_child_stack_guard();
    if (r < 0) {
        init_send_failure(in, CTL_SETUP_FAILED, CTL_STAGE_FORK, r, "guard the task's stack");
        _exit(1);
    }
    in->filter_early =
        in->filter_len > 0 && seccomp_prog_early_ok(in->filter, in->filter_len, sp[1]);
    /* In struct init, whose page this sandbox writes anyway: the child may read it after
     * we return. */
    in->child_arg = (struct init_child_arg){
        .in = in, .sock = sp[1], .drop = {sp[0], in->ctl, in->sigfd, proxy}};
    struct sys_clone_args args;
    memset(&args, 0, sizeof(args));
    args.flags = CLONE_VM;
    args.exit_signal = SIGCHLD;
    args.stack = (uint64_t)(uintptr_t)init_child_stack;
    args.stack_size = INIT_CHILD_STACK;
    pid_t pid = sys_clone3_run(&args, init_task_child_main, &in->child_arg);
    (void)fd_close(sp[1]);
    if (pid < 0) {
        init_send_failure(in, CTL_SETUP_FAILED, CTL_STAGE_FORK, pid, "clone the task's process");
        _exit(1);
    }
    in->task = pid;
    in->report = sp[0];
}

/* ---- init's side of the task ---- */

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
        r = init_parse_task(in->buf, (size_t)n, NULL, NULL, &e);
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
        init_send_failure(in, CTL_EXEC_FAILED, stage, r, err_msg(&e));
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
    in->resp->error = -seccomp_prog_notify_errno(in->filter, in->filter_len, &in->notif->data);
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
        init_send_failure(in, CTL_EXEC_FAILED, (uint32_t)rep.stage, rep.err, msg);
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
__attribute__((noreturn)) static void init_sandbox(struct init *in, ssize_t n, size_t got)
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
    init_clone_task_child(in, proxy);
    init_ready(in, proxy);
    init_loop(in);
    _exit(1);
}

/* The packet being received (struct init's buf). Page-aligned: the fork server gives its pages
 * back once its own setup is read (init_buf_release). */
static char init_buf[INIT_BUF_SIZE] __attribute__((aligned(4096)));

/* The fork server's setup packet is read: from here the fork server receives on its stack, so it
 * drops init_buf's pages, and a sandbox's first packet lands on a zero page of its own
 * rather than on a copy of the fork server's (the copy costs a page fault that also copies). */
static void init_buf_release(void)
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

/* ---- the fork server (a pool's fork server, docs/ARCHITECTURE.md) ---- */

/* Stacks in the bss, for the fork server's loop and for each sandbox's init, and neither is the
 * stack the fork server was started on: that mapping sits at the top of the address space, far
 * from the program, and in a copy it would cost every sandbox a set of page tables (an
 * entry at each level) to make at the fork and free at the exit, updates that trap to the
 * hypervisor on a VM that shadows page tables ("Address space" in docs/ARCHITECTURE.md).
 * The fork server's children get neither that stack nor the loop's (MADV_DONTFORK): a sandbox
 * starts on a stack of its own that the fork server never touched, so no page of a stack is
 * shared, and neither side copies one or flushes a TLB for it when it writes. init's memory
 * is then the program and its bss, under one page of page-table entries; what stays on the
 * old stack (argv, environ, the auxiliary vector) is nothing init reads. Both stacks and
 * the rest of the bss end below the program's first 2 MiB (one page-table page). */
#define INIT_FORKSERVER_STACK (64 * 1024)
#define INIT_SANDBOX_STACK (256 * 1024)
/* Above a sandbox's stack, the last page of its area, present (the fork server wrote it once)
 * and never written again: mount(2) copies a page from its options, which init keeps on
 * its stack, and past the top of the stack that copy would fault twice per mount. */
#define INIT_SANDBOX_PAD 4096
static char init_forkserver_stack_area[INIT_GUARD_ROOM + INIT_FORKSERVER_STACK]
    __attribute__((aligned(INIT_GUARD_ROOM)));
static char init_sandbox_stack_area[INIT_GUARD_ROOM + INIT_SANDBOX_STACK]
    __attribute__((aligned(INIT_GUARD_ROOM)));
static char *init_forkserver_stack, *init_sandbox_stack;

/* The fork server's struct init, set once before the first fork: a child reads it from there,
 * and the fork server writes no memory a child shares (a write would copy the page). */
static struct init *init_forkserver_in;

/* The new sandbox, a copy of the fork server in its new namespaces: its control socket becomes
 * CTL_FD and every other fd of the fork server goes (the fork server's own control socket, the
 * namespace and cgroup fds). Then it is any sandbox's init, from CTL_SETUP on. A raw clone3
 * leaves musl's cached thread id the fork server's: init must not use what reads it (raise,
 * abort, stdio's locks, fork), and neither does its task child. */
static int init_forkserver_child(void *arg)
{
    int ctl = (int)(intptr_t)arg; /* the new sandbox's control socket */
    /* Ours, in pages the fork server never touched: a write to its struct would copy the page
     * and flush the TLB, a first write here only fills a fresh page. Everything before the
     * filter is the fork server's state that we keep (buffers, fds); the rest comes with
     * CTL_SETUP. */
    static struct init own __attribute__((aligned(4096)));
    struct init *in = &own;
    memcpy(in, init_forkserver_in, offsetof(struct init, filter));
    if (dup3(ctl, CTL_FD, O_CLOEXEC) < 0 || sys_close_range(CTL_FD + 1, ~0U, 0) < 0) {
        _exit(2);
    }
    in->ctl = CTL_FD;
    in->from_forkserver = true;
    in->image_fd = -1;
    /* Our copy of the fork server's memory was made while it ran as the namespace's owner, which
     * set its dumpable flag to the host's suid_dumpable: init stays undumpable (main). */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* Our own group, as any init leads one (sbxd renices it as a whole); in the fork server's
     * session, which has no terminal: a new session would cost a scheduler autogroup too,
     * and the task gets one of its own (setsid) anyway. */
    (void)setpgid(0, 0);
    size_t got = 0;
    ssize_t n = init_recv_setup(in, &got);
    init_sandbox(in, n, got);
}

/* Forks one sandbox: joins its network namespace for the clone (and returns to its own),
 * and the child is sbxd's (CLONE_PARENT), placed in its cgroup by the kernel when the
 * cgroup's fd came (v2). Returns the pid, with its pidfd in *pidfd, or -errno with e. */
static pid_t init_forkserver_fork(int self_net, const int *fds, uint32_t flags, uid_t owner,
                                  int *pidfd, struct err *e)
{
    int netns = (flags & CTL_SPAWN_NETNS) ? fds[1] : -1;
    int cgroup = (flags & CTL_SPAWN_CGROUP) ? fds[netns >= 0 ? 2 : 1] : -1;
    struct sys_clone_args args;
    memset(&args, 0, sizeof(args));
    /* exit_signal stays 0: with CLONE_PARENT the child's is ours, SIGCHLD to sbxd. */
    args.flags = CLONE_PARENT | CLONE_PIDFD | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS |
                 CLONE_NEWIPC | CLONE_NEWUTS;
    args.pidfd = (uint64_t)(uintptr_t)pidfd;
    if (init_sandbox_stack) {
        args.stack = (uint64_t)(uintptr_t)init_sandbox_stack;
        args.stack_size = INIT_SANDBOX_STACK - INIT_SANDBOX_PAD;
    }
    if (cgroup >= 0) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = (uint64_t)cgroup;
    }
    if (netns < 0) {
        args.flags |= CLONE_NEWNET;
    } else if (setns(netns, CLONE_NEWNET) < 0) {
        return err_set(e, -errno, "join the sandbox's network namespace");
    }
    /* The sandbox's own root owns its user namespace, not the host's (sys.h). */
    struct sys_owner saved;
    int r = sys_owner_begin(owner, &saved);
    pid_t pid = r < 0 ? r : sys_clone3_run(&args, init_forkserver_child, (void *)(intptr_t)fds[0]);
    /* SECURITY: the fork server never goes on as another euid, nor in a sandbox's network
     * namespace (setns needs the capabilities that euid 0 brings back). */
    if ((r == 0 && sys_owner_end(&saved) < 0) ||
        (netns >= 0 && setns(self_net, CLONE_NEWNET) < 0)) {
        _exit(1);
    }
    if (r < 0) {
        return err_set(e, r, "become the owner of the user namespace");
    }
    if (pid < 0) {
        return err_set(e, pid, "clone3");
    }
    return pid;
}

/* v1: the forked sandbox goes into its cgroup, one hierarchy per cgroup.procs file (sbxd's,
 * opened by sbxd: the kernel checks the opener's credentials), before anyone is told of it.
 * Returns 0 or -errno with e. */
static int init_forkserver_attach(pid_t pid, const int *procs, uint32_t n, struct err *e)
{
    char s[16];
    int len = snprintf(s, sizeof(s), "%d", (int)pid);
    for (uint32_t i = 0; i < n; i++) {
        ssize_t w = RETRY_EINTR(write(procs[i], s, (size_t)len));
        if (w != len) {
            return err_set(e, w < 0 ? -errno : -EIO,
                           "attach pid %d to its cgroup (hierarchy %u of %u)", (int)pid, i + 1, n);
        }
    }
    return 0;
}

/* Serves one CTL_SPAWN; exits when sbxd's end closes. */
static void init_forkserver_serve(struct init *in, int self_net)
{
    enum { MAX_FDS = 3 + CTL_SPAWN_ATTACH_MAX };
    int fds[MAX_FDS];
    for (size_t i = 0; i < MAX_FDS; i++) {
        fds[i] = -1;
    }
    size_t got = 0;
    struct err e = ERR_INIT;
    int r = 0;
    /* On our stack, not in in->buf: every fork leaves in->buf's pages shared with the new
     * sandbox, and a write to them would copy one; no sandbox gets our stack
     * (init_forkserver_loop). One byte over, so that a longer packet shows as one of the wrong
     * size. */
    union {
        struct ctl_spawn sp;
        char bytes[sizeof(struct ctl_spawn) + 1];
    } pkt;
    ssize_t n = init_recv_sized(pkt.bytes, sizeof(pkt.bytes), in->ctl, fds, MAX_FDS, &got);
    if (n == 0) {
        _exit(0);
    }
    const struct ctl_spawn *sp = &pkt.sp;
    size_t first_attach = 0;
    if (n < 0) {
        r = err_set(&e, (int)n, "receive spawn");
    } else if ((size_t)n != sizeof(*sp) || sp->magic != CTL_MAGIC || sp->type != CTL_SPAWN ||
               (sp->flags & ~(CTL_SPAWN_CGROUP | CTL_SPAWN_NETNS)) != 0 ||
               sp->n_attach > CTL_SPAWN_ATTACH_MAX || sp->owner == 0) {
        r = err_setx(&e, -EPROTO, "bad spawn packet");
    } else {
        first_attach = 1u + !!(sp->flags & CTL_SPAWN_CGROUP) + !!(sp->flags & CTL_SPAWN_NETNS);
        if (got != first_attach + sp->n_attach) {
            r = err_setx(&e, -EPROTO, "spawn came with %zu fds", got);
        }
    }
    int pidfd = -1;
    pid_t pid = r < 0 ? r : init_forkserver_fork(self_net, fds, sp->flags, sp->owner, &pidfd, &e);
    struct ctl_event ev;
    memset(&ev, 0, sizeof(ev));
    if (pid > 0 && init_forkserver_attach(pid, fds + first_attach, sp->n_attach, &e) < 0) {
        /* The sandbox exists (sbxd's child): sbxd kills and reaps it through the pidfd. */
        ev.err = e.code < 0 ? e.code : -EIO;
        ev.stage = CTL_STAGE_CGROUP_ATTACH;
        (void)snprintf(ev.msg, sizeof(ev.msg), "%s", err_msg(&e));
    }
    for (size_t i = 0; i < got; i++) {
        fds[i] = fd_close(fds[i]);
    }
    if (pid < 0) {
        init_send_failure(in, CTL_SETUP_FAILED, CTL_STAGE_FORKSERVER, pid, err_msg(&e));
        return;
    }
    ev.type = CTL_SPAWNED;
    ev.pid = (uint32_t)pid;
    init_send_with_fd(in, &ev, pidfd);
    (void)fd_close(pidfd);
}

/* Finds the mapping that holds addr in /proc/self/maps (read before the fork server leaves the
 * host's /proc; a static program's maps fit the buffer, and a mapping past it is not
 * found). Returns 0 with [*lo, *hi), or -errno. */
static int init_find_mapping(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
    char buf[4096];
    ssize_t n = file_read_small(AT_FDCWD, "/proc/self/maps", buf, sizeof(buf));
    if (n < 0) {
        return (int)n;
    }
    for (char *line = buf; *line;) {
        char *end;
        unsigned long a = strtoul(line, &end, 16), b = 0;
        if (*end == '-') {
            b = strtoul(end + 1, NULL, 16);
        }
        if (a <= addr && addr < b) {
            *lo = a;
            *hi = b;
            return 0;
        }
        char *nl = strchr(line, '\n');
        if (!nl) {
            break;
        }
        line = nl + 1;
    }
    return -ENOENT;
}

/* The loop, on its own stack (arg: our network namespace's fd). */
__attribute__((noreturn)) static void init_forkserver_loop(void *arg)
{
    for (;;) {
        init_forkserver_serve(init_forkserver_in, (int)(intptr_t)arg);
    }
}

/* The fork server: builds the pool's template as its own root, reports READY, then forks a
 * sandbox per CTL_SPAWN. It runs as the host's root in mount and network namespaces of its
 * own, and never runs anything of a task. */
__attribute__((noreturn)) static void init_forkserver(struct init *in, ssize_t n, size_t got)
{
    struct err e = ERR_INIT;
    int r = init_parse_setup(in, n, got, CTL_FORKSERVER, &e);
    /* Ours, to come back to after each fork (the template's /proc shows no process). */
    int self_net = -1;
    if (r == 0) {
        self_net = openat(AT_FDCWD, "/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self_net < 0) {
            r = err_set(&e, -errno, "open own network namespace");
        }
    }
    init_forkserver_in = in;
    /* The mapping of the stack we run on, read while the host's /proc is still ours; not
     * found, the children keep it. Only a build with the trampoline leaves it. */
    uintptr_t stack_lo = 0, stack_hi = 0;
    char local = 0;
    if (r == 0 && sys_clone_vm_supported()) {
        (void)init_find_mapping((uintptr_t)&local, &stack_lo, &stack_hi);
    }
    if (r == 0) {
        r = init_mount(in, MOUNT_TEMPLATE, &e);
    }
    if (r == 0) {
        r = init_child_stack_guard();
        if (r < 0) {
            r = err_set(&e, r, "guard the task child's stack");
        }
    }
    if (r == 0) {
        r = init_stack_guard(init_forkserver_stack_area, &init_forkserver_stack);
        if (r == 0 && sys_clone_vm_supported()) {
            r = init_stack_guard(init_sandbox_stack_area, &init_sandbox_stack);
            ((volatile char *)
                 init_sandbox_stack_area)[sizeof(init_sandbox_stack_area) - INIT_SANDBOX_PAD] = 0;
        }
        if (r < 0) {
            r = err_set(&e, r, "guard the fork server's and the sandboxes' stacks");
        }
    }
    /* SECURITY: from here the fork server only joins network namespaces (CAP_SYS_ADMIN), takes
     * the euid of each sandbox's root for its clone3, so that the sandbox's user namespace
     * is that id's and not the host root's (CAP_SETUID; sys_owner_begin), and forks into
     * new user namespaces (which needs no capability: each sandbox gets a full set in its
     * own namespace, and none in ours). Everything else goes, and it never executes
     * anything. */
    if (r == 0) {
        r = init_child_capset((1u << CAP_SYS_ADMIN) | (1u << CAP_SETUID));
        if (r == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
            r = -errno;
        }
        if (r < 0) {
            r = err_set(&e, r, "drop capabilities");
        }
    }
    if (r < 0) {
        init_send_failure(in, CTL_SETUP_FAILED, CTL_STAGE_FORKSERVER, r, err_msg(&e));
        _exit(1);
    }
    init_buf_release();
    init_ready(in, -1);
    /* No fork comes before the loop runs on its own stack: from here no child gets the
     * stack we started on nor the loop's, and each starts on its own (init_forkserver_fork).
     * A failure leaves a stack in every child, as before. */
    if (stack_hi > stack_lo) {
        (void)madvise((void *)stack_lo, stack_hi - stack_lo, MADV_DONTFORK);
        (void)madvise(init_forkserver_stack_area, sizeof(init_forkserver_stack_area),
                      MADV_DONTFORK);
    }
    sys_run_on_stack(init_forkserver_stack, INIT_FORKSERVER_STACK, init_forkserver_loop,
                     (void *)(intptr_t)self_net);
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
    in.report = -1;
    in.listener = -1;
    if (init_notif_buffers(&in) < 0) {
        return 2;
    }
    in.buf = init_buf;
    size_t got = 0;
    ssize_t n = init_recv_setup(&in, &got);
    if (n >= (ssize_t)sizeof(struct ctl_setup) &&
        ((const struct ctl_setup *)in.buf)->type == CTL_FORKSERVER) {
        init_forkserver(&in, n, got);
    }
    init_sandbox(&in, n, got);
}
