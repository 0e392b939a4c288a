/* SPDX-License-Identifier: MIT */
/* Parent side of sandbox creation: clone3 into fresh namespaces on a small private stack,
 * id maps, cgroup placement, the go signal, and the verdict of the child's execve. Runs in
 * a worker thread; it must never block, signal or reap anything but its own child. */
#include "sandbox/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

#include "sandbox/cgroup.h"
#include "sandbox/child.h"
#include "sandbox/seccomp.h"
#include "lib/sys.h"
#include "lib/util.h"

/* The child runs only child_run and the sys.c wrappers: a few hundred bytes of frames. */
#define SPAWN_STACK_SIZE (64 * 1024)
#define SPAWN_GUARD_SIZE 4096

struct spawn_stack {
    void *base;
    size_t len;
};

static int spawn_stack_new(struct spawn_stack *s)
{
    s->len = SPAWN_STACK_SIZE + SPAWN_GUARD_SIZE;
    s->base = mmap(NULL, s->len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
    if (s->base == MAP_FAILED) {
        s->base = NULL;
        return -errno;
    }
    /* The stack grows down: a guard page at the bottom turns an overflow into a fault. */
    if (mprotect(s->base, SPAWN_GUARD_SIZE, PROT_NONE) < 0) {
        int r = -errno;
        (void)munmap(s->base, s->len);
        s->base = NULL;
        return r;
    }
    return 0;
}

static void spawn_stack_free(struct spawn_stack *s)
{
    if (s->base) {
#ifdef __SANITIZE_ADDRESS__
        /* The child's frames died poisoned (it never returned from them): a later mapping
         * at this address must not inherit their redzones. */
        ASAN_UNPOISON_MEMORY_REGION(s->base, s->len);
#endif
        (void)munmap(s->base, s->len);
        s->base = NULL;
    }
}

/* Kills and reaps the child. The stack may be unmapped only after this (or after exec). */
static void spawn_kill(int pidfd)
{
    siginfo_t info;
    (void)sys_pidfd_send_signal(pidfd, SIGKILL);
    memset(&info, 0, sizeof(info));
    (void)sys_pidfd_wait(pidfd, &info, WEXITED);
}

static int spawn_write_map(pid_t pid, const char *file, uint32_t base, uint32_t count,
                           struct err *e)
{
    char path[64];
    char map[64];
    (void)snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    (void)snprintf(map, sizeof(map), "0 %u %u\n", base, count);
    int r = file_write_str(AT_FDCWD, path, map);
    if (r < 0) {
        return err_set(e, r, "write %s", path);
    }
    return 0;
}

static int spawn_check_plan(const struct spawn_plan *plan, struct err *e)
{
    if (!plan->init_path || plan->init_path[0] != '/') {
        return err_setx(e, -EINVAL, "init path must be absolute");
    }
    if (plan->ctl_fd < 0 || fcntl(plan->ctl_fd, F_GETFD) < 0) {
        return err_setx(e, -EBADF, "bad control fd %d", plan->ctl_fd);
    }
    if (plan->forkserver && (plan->userns || plan->cg || plan->join_netns)) {
        return err_setx(e, -EINVAL, "a fork server has no user namespace, cgroup or joined netns");
    }
    if (plan->userns) {
        /* The kernel refuses maps that reach (uid_t)-1; catch it with a clear message. */
        if (plan->id_count == 0 || plan->host_id_base > UINT32_MAX - plan->id_count) {
            return err_setx(e, -EINVAL, "bad id map: base %u count %u", plan->host_id_base,
                            plan->id_count);
        }
    }
    return 0;
}

/* The helper's pid in the sandbox's namespace, chosen (clone3's set_tid) so that the
 * namespace's next pid stays 2, the task's. Below PID_MAX_MIN (301), so always valid. */
#define SPAWN_SEAL_PID 300

/* The helper's stack: one per worker thread, reused (CLONE_VFORK: one helper at a time per
 * thread), so that no mapping is made and unmapped per sandbox (an munmap flushes the TLB
 * of every CPU that runs one of sbxd's threads). */
#define SPAWN_SEAL_STACK (16 * 1024)
static __thread char spawn_seal_stack[SPAWN_SEAL_STACK] __attribute__((aligned(64)));

/* sbxd's pid namespace, for a worker to come back to after sending a helper out: the same
 * for every thread, opened once. */
static pthread_once_t spawn_self_pidns_once = PTHREAD_ONCE_INIT;
static int spawn_self_pidns = -EBADF;

static void spawn_self_pidns_open(void)
{
    int fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    spawn_self_pidns = fd < 0 ? -errno : fd;
}

/* SECURITY: vm.memfd_noexec=2 in the sandbox's pid namespace (linux >= 6.3), before anything
 * of it runs: no memfd of its tasks can be made executable (MFD_EXEC is refused, a memfd
 * made without flags is sealed against exec), so fexecve, execveat and /proc/self/fd/N
 * cannot run a binary a task wrote, as the noexec mounts keep it from running one from a
 * file. The sysctl acts on the writer's own pid namespace and takes the host's root (its
 * file is the host root's, and the sandbox's root is not): a short-lived child of this
 * thread, sent into that namespace with setns, writes it. Nested namespaces inherit it, and
 * none may lower it. Where sbxd cannot write it the seccomp profiles refuse memfd_create
 * instead (seccomp_memfd_noexec_fd). Returns 0 or -errno with e. */
static int spawn_seal_memfds(int pidfd, struct err *e)
{
    if (seccomp_memfd_noexec_fd() < 0) {
        return 0;
    }
    (void)pthread_once(&spawn_self_pidns_once, spawn_self_pidns_open);
    if (spawn_self_pidns < 0) {
        return err_set(e, spawn_self_pidns, "open sbxd's own pid namespace");
    }
    /* One file for every worker: the helper writes at offset 0 (pwrite), so no worker
     * moves another's offset, and a sysctl ignores writes past its start. */
    int r = sys_pidns_write(pidfd, spawn_self_pidns, SPAWN_SEAL_PID, spawn_seal_stack,
                            sizeof(spawn_seal_stack), seccomp_memfd_noexec_fd(), "2", 1);
    if (r == -EIO) {
        return err_setx(e, -EPERM, "set vm.memfd_noexec=2 in the sandbox's pid namespace");
    }
    if (r < 0) {
        return err_set(e, r, "run the memfd_noexec helper in the sandbox's pid namespace");
    }
    return 0;
}

int spawn_place(const struct spawn_plan *plan, pid_t pid, int pidfd, struct err *e)
{
    int r;

    if (plan->userns) {
        /* SECURITY: never a map of the host's root, for sandboxes from scratch and from a
         * fork server alike: host id 0 would be the sandbox's root and own its namespace. */
        if (plan->host_id_base == 0) {
            return err_setx(e, -EINVAL, "no block of host ids for the user namespace");
        }
        /* setgroups stays "allow": the host root may write a multi-id map without denying
         * it, and init needs setgroups() to clear the task's supplementary groups. */
        r = spawn_write_map(pid, "uid_map", plan->host_id_base, plan->id_count, e);
        if (r < 0) {
            return r;
        }
        r = spawn_write_map(pid, "gid_map", plan->host_id_base, plan->id_count, e);
        if (r < 0) {
            return r;
        }
    }
    /* SECURITY: on v1 the child is attached before it may exec, so init and everything
     * it forks is accounted and limited from its first instruction. */
    if (plan->cg && cgroup_fd(plan->cg) < 0 && !plan->cg_attached) {
        r = cgroup_attach(plan->cg, pid, e);
        if (r < 0) {
            return err_prefix(e, r, "cgroup");
        }
    }
    /* A fork server has no pid namespace of its own: each of its sandboxes has one, which
     * the fork server seals itself, sparing the loop (forkserver_spawn_async) a clone. */
    return plan->forkserver || plan->sealed ? 0 : spawn_seal_memfds(pidfd, e);
}

/* After clone: maps, cgroup, go, and the child's verdict. On failure the caller kills. */
static int spawn_release(const struct spawn_plan *plan, pid_t pid, int pidfd, int *sync_wfd,
                         int report_rfd, struct err *e)
{
    int r = spawn_place(plan, pid, pidfd, e);
    if (r < 0) {
        return r;
    }
    /* A socket, not a pipe: MSG_NOSIGNAL, so a child that died early costs no SIGPIPE. */
    char go = CHILD_GO;
    ssize_t w = RETRY_EINTR(send(*sync_wfd, &go, 1, MSG_NOSIGNAL));
    r = w == 1 ? 0 : -errno;
    *sync_wfd = fd_close(*sync_wfd);
    if (r < 0) {
        return err_set(e, r, "write sync socket");
    }

    struct child_report rep;
    ssize_t n = RETRY_EINTR(read(report_rfd, &rep, sizeof(rep)));
    if (n < 0) {
        return err_set(e, -errno, "read report pipe");
    }
    if (n == (ssize_t)sizeof(rep)) {
        r = rep.err < 0 ? rep.err : -EIO;
        if (rep.stage == CHILD_STAGE_EXEC) {
            return err_set(e, r, "child: execve '%s'", plan->init_path);
        }
        return err_set(e, r, "child: %s", child_stage_name(rep.stage));
    }
    if (n != 0) {
        return err_setx(e, -EIO, "short report from child (%zd bytes)", n);
    }
    /* EOF: the write end closed at exec, or because the child died. Tell them apart where
     * we can; a child dying this very moment may still look alive, and the caller then
     * sees its control socket close. */
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    r = sys_pidfd_wait(pidfd, &info, WEXITED | WNOHANG | WNOWAIT);
    if (r < 0) {
        return err_set(e, r, "waitid");
    }
    if (info.si_pid != 0) {
        return err_setx(e, -ECHILD, "sbxd-init died during start-up (%s %d)",
                        info.si_code == CLD_EXITED ? "exit" : "signal", info.si_status);
    }
    return 0;
}

int spawn_sandbox(const struct spawn_plan *plan, struct spawn_result *ret, struct err *e)
{
    scoped_close int sync_rfd = -1;
    scoped_close int sync_wfd = -1;
    scoped_close int report_rfd = -1;
    scoped_close int report_wfd = -1;
    scoped_close int pidfd = -1;
    struct spawn_stack stack = {NULL, 0};
    int fds[2];
    int r;

    r = spawn_check_plan(plan, e);
    if (r < 0) {
        return r;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0) {
        return err_set(e, -errno, "socketpair");
    }
    sync_rfd = fds[0];
    sync_wfd = fds[1];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        return err_set(e, -errno, "pipe2");
    }
    report_rfd = fds[0];
    report_wfd = fds[1];
    r = spawn_stack_new(&stack);
    if (r < 0) {
        return err_set(e, r, "mmap child stack");
    }

    /* Everything the child reads lives in this frame, which outlives the child's use of
     * it: we return only after its exec (EOF on the report pipe) or its death. */
    static char *const init_argv[] = {"sbxd-init", NULL};
    static char *const init_envp[] = {NULL};
    struct child_plan cp = {
        .path = plan->init_path,
        .argv = init_argv,
        .envp = init_envp,
        .ctl_fd = plan->ctl_fd,
        .become_root = plan->userns,
        .sync_rfd = sync_rfd,
        .sync_wfd = sync_wfd,
        .report_wfd = report_wfd,
    };
    /* No CLONE_NEWCGROUP: init unshares it after it is in its cgroup, so the namespace's
     * root is the sandbox's own cgroup. No CLONE_FS/FILES/SIGHAND: private copies. */
    struct sys_clone_args args;
    memset(&args, 0, sizeof(args));
    args.flags = CLONE_VM | CLONE_PIDFD | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;
    if (plan->forkserver) {
        /* Not a pid namespace of its own: it forks with CLONE_PARENT, which pid 1 may not. */
        args.flags = CLONE_VM | CLONE_PIDFD | CLONE_NEWNS;
    }
    if (!plan->join_netns) {
        args.flags |= CLONE_NEWNET;
    }
    if (plan->userns) {
        args.flags |= CLONE_NEWUSER;
    }
    if (plan->cg) {
        int cgfd = cgroup_fd(plan->cg);
        if (cgfd >= 0) {
            args.flags |= CLONE_INTO_CGROUP;
            args.cgroup = (uint64_t)cgfd;
        }
    }
    args.pidfd = (uint64_t)(uintptr_t)&pidfd;
    args.exit_signal = SIGCHLD;
    args.stack = (uint64_t)(uintptr_t)stack.base;
    args.stack_size = stack.len;

    /* The child starts with this thread's mask: all blocked, so no daemon handler can run
     * in it before it resets the dispositions. Only this thread's mask changes. */
    sigset_t all, old;
    sigfillset(&all);
    r = pthread_sigmask(SIG_SETMASK, &all, &old);
    if (r != 0) {
        spawn_stack_free(&stack);
        return err_set(e, -r, "pthread_sigmask");
    }
    /* A recycled network namespace is joined by this thread just around clone3, so that
     * the child starts in it; the thread is back in its own before anything else runs. */
    scoped_close int self_net = -1;
    if (plan->join_netns) {
        self_net = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self_net < 0 || setns(plan->netns_fd, CLONE_NEWNET) < 0) {
            r = -errno;
            (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
            spawn_stack_free(&stack);
            return err_set(e, r, "join network namespace");
        }
    }
    /* The sandbox's own root (its block's first host id) owns its user namespace, not the
     * host's root (sys.h): only this thread's credentials change, around clone3. */
    struct sys_owner owner;
    if (plan->userns) {
        r = sys_owner_begin(plan->host_id_base, &owner);
        if (r < 0) {
            if (self_net >= 0 && setns(self_net, CLONE_NEWNET) < 0) {
                abort();
            }
            (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
            spawn_stack_free(&stack);
            return err_set(e, r, "become the owner of the user namespace");
        }
    }
    pid_t pid = sys_clone3_run(&args, child_run, &cp);
    if (plan->userns && sys_owner_end(&owner) < 0) {
        /* SECURITY: this worker must never go on with another euid than sbxd's. */
        abort();
    }
    if (self_net >= 0 && setns(self_net, CLONE_NEWNET) < 0) {
        /* SECURITY: this worker must never go on inside a sandbox's network namespace. */
        abort();
    }
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    sync_rfd = fd_close(sync_rfd);
    report_wfd = fd_close(report_wfd);
    if (pid < 0) {
        spawn_stack_free(&stack);
        return err_set(e, pid, "clone3");
    }

    r = spawn_release(plan, pid, pidfd, &sync_wfd, report_rfd, e);
    if (r < 0) {
        sync_wfd = fd_close(sync_wfd);
        spawn_kill(pidfd);
        spawn_stack_free(&stack);
        return err_prefix(e, r, "spawn");
    }
    spawn_stack_free(&stack);
    ret->pid = pid;
    ret->pidfd = take_fd(&pidfd);
    return 0;
}
