/* SPDX-License-Identifier: MIT */
/* sbxd-init as a pool's fork server (docs/ARCHITECTURE.md): it builds the pool's template as
 * its own root, then forks one sandbox per CTL_SPAWN, each of which goes on as any sandbox's
 * init (pid1_sandbox, pid1.c). It runs as the host's root in namespaces of its own, with
 * CAP_SYS_ADMIN, CAP_SETUID and CAP_SYS_PTRACE only, and never runs anything of a task. */
#include "init/init_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/sys.h"
#include "lib/util.h"

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
    in->work_fd = -1;
    /* Our copy of the fork server's memory was made while it ran as the namespace's owner, which
     * set its dumpable flag to the host's suid_dumpable: init stays undumpable (main). */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* Our own group, as any init leads one (sbxd renices it as a whole); in the fork server's
     * session, which has no terminal: a new session would cost a scheduler autogroup too,
     * and the task gets one of its own (setsid) anyway. */
    (void)setpgid(0, 0);
    size_t got = 0;
    ssize_t n = pid1_recv_setup(in, &got);
    pid1_sandbox(in, n, got);
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

/* vm.memfd_noexec (linux >= 6.3) of each sandbox's pid namespace: opened for writing at start
 * (else -1: sbxd's profiles then refuse memfd_create, docs/SECCOMP.md), with our own pid
 * namespace to come back to, and the helper's stack (MADV_DONTFORK: no sandbox gets it). */
#define INIT_SEAL_PID 300 /* the helper's pid in the sandbox: its next stays 2, the task's */
#define INIT_SEAL_STACK (16 * 1024)
static char init_seal_stack_area[INIT_SEAL_STACK] __attribute__((aligned(4096)));
static int init_seal_fd = -1;
static int init_self_pid = -1;

/* SECURITY: sets vm.memfd_noexec=2 in the pid namespace of the sandbox just forked (pidfd),
 * before anything of it runs, so that no memfd of its tasks can be made executable: the
 * sysctl acts on the writer's own pid namespace and takes the host's root, as we are, so a
 * helper of ours sent there with setns writes it. Here and not in sbxd: it would cost sbxd's
 * loop a clone per sandbox. Returns 0 or -errno with e (the sandbox is then killed). */
static int init_forkserver_seal(int pidfd, struct err *e)
{
    if (init_seal_fd < 0) {
        return 0;
    }
    int r = sys_pidns_write(pidfd, init_self_pid, INIT_SEAL_PID, init_seal_stack_area,
                            sizeof(init_seal_stack_area), init_seal_fd, "2", 1);
    if (r == -EIO) {
        return err_setx(e, -EPERM, "set vm.memfd_noexec=2 in the sandbox's pid namespace");
    }
    if (r < 0) {
        return err_set(e, r, "run the memfd_noexec helper in the sandbox's pid namespace");
    }
    return 0;
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
     * (forkserver_loop). One byte over, so that a longer packet shows as one of the wrong
     * size. */
    union {
        struct ctl_spawn sp;
        char bytes[sizeof(struct ctl_spawn) + 1];
    } pkt;
    ssize_t n = pid1_recv_sized(pkt.bytes, sizeof(pkt.bytes), in->ctl, fds, MAX_FDS, &got);
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
    if (pid > 0 && (init_forkserver_attach(pid, fds + first_attach, sp->n_attach, &e) < 0 ||
                    init_forkserver_seal(pidfd, &e) < 0)) {
        /* The sandbox exists (sbxd's child): sbxd kills and reaps it through the pidfd. */
        ev.err = e.code < 0 ? e.code : -EIO;
        ev.stage = CTL_STAGE_CGROUP_ATTACH;
        (void)snprintf(ev.msg, sizeof(ev.msg), "%s", err_msg(&e));
    }
    for (size_t i = 0; i < got; i++) {
        fds[i] = fd_close(fds[i]);
    }
    if (pid < 0) {
        pid1_send_failure(in, CTL_SETUP_FAILED, CTL_STAGE_FORKSERVER, pid, err_msg(&e));
        return;
    }
    ev.type = CTL_SPAWNED;
    ev.pid = (uint32_t)pid;
    pid1_send_with_fd(in, &ev, pidfd);
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
__attribute__((noreturn)) static void forkserver_loop(void *arg)
{
    for (;;) {
        init_forkserver_serve(init_forkserver_in, (int)(intptr_t)arg);
    }
}

/* The fork server: builds the pool's template as its own root, reports READY, then forks a
 * sandbox per CTL_SPAWN. It runs as the host's root in mount and network namespaces of its
 * own, and never runs anything of a task. */
__attribute__((noreturn)) void forkserver_run(struct init *in, ssize_t n, size_t got)
{
    struct err e = ERR_INIT;
    int r = pid1_parse_setup(in, n, got, CTL_FORKSERVER, &e);
    /* Ours, to come back to after each fork (the template's /proc shows no process). */
    int self_net = -1;
    if (r == 0) {
        self_net = openat(AT_FDCWD, "/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self_net < 0) {
            r = err_set(&e, -errno, "open own network namespace");
        }
    }
    init_forkserver_in = in;
    /* Where it cannot be opened, sbxd cannot either (the same mounts: ours are a copy of its),
     * and its profiles refuse memfd_create; a sandbox's init checks one or the other holds
     * (pid1.c). */
    if (r == 0) {
        init_seal_fd = openat(AT_FDCWD, "/proc/sys/vm/memfd_noexec", O_WRONLY | O_CLOEXEC);
        init_self_pid = openat(AT_FDCWD, "/proc/thread-self/ns/pid", O_RDONLY | O_CLOEXEC);
        if (init_seal_fd >= 0 && init_self_pid < 0) {
            r = err_set(&e, -errno, "open own pid namespace");
        }
    }
    /* The mapping of the stack we run on, read while the host's /proc is still ours; not
     * found, the children keep it. Only a build with the trampoline leaves it. */
    uintptr_t stack_lo = 0, stack_hi = 0;
    char local = 0;
    if (r == 0 && sys_clone_vm_supported()) {
        (void)init_find_mapping((uintptr_t)&local, &stack_lo, &stack_hi);
    }
    if (r == 0) {
        r = pid1_mount(in, MOUNT_TEMPLATE, &e);
    }
    if (r == 0) {
        r = task_child_stack_guard();
        if (r < 0) {
            r = err_set(&e, r, "guard the task child's stack");
        }
    }
    if (r == 0) {
        r = task_child_guard_page(init_forkserver_stack_area, &init_forkserver_stack);
        if (r == 0 && sys_clone_vm_supported()) {
            r = task_child_guard_page(init_sandbox_stack_area, &init_sandbox_stack);
            ((volatile char *)
                 init_sandbox_stack_area)[sizeof(init_sandbox_stack_area) - INIT_SANDBOX_PAD] = 0;
        }
        if (r < 0) {
            r = err_set(&e, r, "guard the fork server's and the sandboxes' stacks");
        }
    }
    /* SECURITY: from here the fork server only joins network namespaces (CAP_SYS_ADMIN), takes
     * the euid of each sandbox's root for its clone3, so that the sandbox's user namespace
     * is that id's and not the host root's (CAP_SETUID; sys_owner_begin), forks into
     * new user namespaces (which needs no capability: each sandbox gets a full set in its
     * own namespace, and none in ours), and joins each new sandbox's pid namespace for its
     * vm.memfd_noexec (init_forkserver_seal: CAP_SYS_ADMIN, and CAP_SYS_PTRACE, since the
     * kernel checks a setns through a pidfd as a ptrace of the undumpable sandbox).
     * Everything else goes, and it never executes anything. */
    if (r == 0) {
        r = task_child_capset((1u << CAP_SYS_ADMIN) | (1u << CAP_SETUID) |
                              (init_seal_fd >= 0 ? 1u << CAP_SYS_PTRACE : 0));
        if (r == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
            r = -errno;
        }
        if (r < 0) {
            r = err_set(&e, r, "drop capabilities");
        }
    }
    if (r < 0) {
        pid1_send_failure(in, CTL_SETUP_FAILED, CTL_STAGE_FORKSERVER, r, err_msg(&e));
        _exit(1);
    }
    pid1_buf_release();
    pid1_ready(in, -1);
    /* No fork comes before the loop runs on its own stack: from here no child gets the
     * stack we started on nor the loop's, and each starts on its own (init_forkserver_fork).
     * A failure leaves a stack in every child, as before. */
    if (stack_hi > stack_lo) {
        (void)madvise((void *)stack_lo, stack_hi - stack_lo, MADV_DONTFORK);
        (void)madvise(init_forkserver_stack_area, sizeof(init_forkserver_stack_area),
                      MADV_DONTFORK);
    }
    (void)madvise(init_seal_stack_area, sizeof(init_seal_stack_area), MADV_DONTFORK);
    sys_run_on_stack(init_forkserver_stack, INIT_FORKSERVER_STACK, forkserver_loop,
                     (void *)(intptr_t)self_net);
}
