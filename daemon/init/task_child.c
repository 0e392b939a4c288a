/* SPDX-License-Identifier: MIT */
/* sbxd-init's task child: the task's process from its clone at setup to its execve. It sheds
 * its privileges, waits for its one task, and runs it; it reports failures to init on its
 * socket and never writes anywhere else.
 *
 * Cloned with CLONE_VM (task_child_clone): it shares init's memory and TLS, errno
 * included, until its execve, while init goes on. So everything here is CHILD-SAFE
 * (sys.h): system calls only through sys.h, nothing allocated, no errno, no stdio; it
 * writes only its stack, init_child_buf and init_child_filter, and reads of `in` only what
 * init set before the clone and never changes after (setup, filter, filter_len,
 * filter_early, child_arg). No copy of init's address space is made or torn down per
 * sandbox: that was a tenth of init's CPU time. The child also calls pid1_recv_into and
 * pid1_parse_task (pid1.c), CHILD-SAFE both. Only task_child_clone and the stack guards
 * (task_child_guard_page, task_child_stack_guard) run in init or the fork server, never here. */
#include "init/init_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

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
#define INIT_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

/* The task child's own memory, which init never touches: its task packet, then (8-aligned)
 * the argv and envp pointers, which it must not malloc (it shares our memory, see
 * task_child_clone, and its filter may be on by then: bpf_early_ok proves
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

/* Its stack, with a guard page below it, in the bss like every buffer of init's: a mapping
 * of its own would land in the mmap area, far from the program, and cost every sandbox a
 * set of page tables to copy and free ("Address space" in docs/ARCHITECTURE.md). The guard
 * is made PROT_NONE once, by the fork server before its first fork or by a from-scratch init;
 * 64 KiB alignment leaves room for any page size up to that. */
#define INIT_CHILD_STACK (64 * 1024)
/* Defined ahead of its area: gcc lays out a file's statics in reverse, so the area comes first
 * in this file's 64 KiB-aligned bss and no padding precedes it. */
static char *init_child_stack;
static char init_child_stack_area[INIT_GUARD_ROOM + INIT_CHILD_STACK]
    __attribute__((aligned(INIT_GUARD_ROOM)));

/* Makes the page below stack's area (area + INIT_GUARD_ROOM) PROT_NONE, once. */
int task_child_guard_page(char *area, char **stack)
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

int task_child_stack_guard(void)
{
    return task_child_guard_page(init_child_stack_area, &init_child_stack);
}

/* write(), not send(): after the filter is on, write is the call every profile allows. The
 * report is what sbxd reads ({stage, err} becomes the result's error_stage and the errno
 * name that ends its error text, which is how sbx tells 126 from 127); the exit status says
 * the same to whoever sees only it, as the shells and env(1) say it: 127 for a command not
 * found, 126 for one found that could not be executed. */
__attribute__((noreturn)) static void init_child_fail(int report, int stage, int err)
{
    struct init_report rep = {stage, err};
    (void)sys_write(report, &rep, sizeof(rep));
    sys_exit(stage == CTL_STAGE_EXEC && err != -ENOENT ? 126 : 127);
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
    if (!bpf_notifies(in->filter, in->filter_len)) {
        return sys_seccomp_filter(in->filter, in->filter_len);
    }
    int fd = sys_seccomp_filter_flags(in->filter, in->filter_len, SECCOMP_FILTER_FLAG_NEW_LISTENER);
    if (fd == -EBUSY || fd == -EINVAL) {
        memcpy(init_child_filter, in->filter, in->filter_len * sizeof(in->filter[0]));
        bpf_strip_notify(init_child_filter, in->filter_len);
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
int task_child_capset(uint32_t caps)
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
    /* Keep the permitted set across the change of uid, for task_child_capset to narrow it;
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
    r = task_child_capset(INIT_CHILD_KEEP_CAPS);
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

/* Whether cwd is a directory below /work or /tmp (not either itself) with no "." or ".."
 * component: one the task child may create. CHILD-SAFE. */
static bool init_child_cwd_creatable(const char *cwd)
{
    size_t skip;
    if (strncmp(cwd, "/work/", 6) == 0) {
        skip = 6;
    } else if (strncmp(cwd, "/tmp/", 5) == 0) {
        skip = 5;
    } else {
        return false;
    }
    for (const char *c = cwd + skip; *c != '\0';) {
        size_t n = 0;
        while (c[n] != '\0' && c[n] != '/') {
            n++;
        }
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) {
            return false;
        }
        c += n;
        while (*c == '/') {
            c++;
        }
    }
    return true;
}

/* chdir to the task's cwd; one below /work or /tmp that does not exist is made first, as
 * mkdir -p makes it (as the task's user, mode 0755 less its umask). Anywhere else a missing
 * cwd fails as it is. Returns 0 or -errno (of the first mkdir that failed, else chdir's).
 * CHILD-SAFE. */
static int init_child_chdir(const char *cwd)
{
    char path[CTL_PATH_MAX];
    int r = sys_chdir(cwd);
    if (r != -ENOENT || !init_child_cwd_creatable(cwd)) {
        return r;
    }
    size_t len = 0;
    while (len < sizeof(path) - 1 && cwd[len] != '\0') {
        path[len] = cwd[len];
        len++;
    }
    path[len] = '\0';
    /* Each prefix ending before a '/' (past the top directory), then the whole path. */
    for (size_t i = 1; i <= len; i++) {
        if (i < len && (path[i] != '/' || path[i - 1] == '/')) {
            continue;
        }
        char saved = path[i];
        path[i] = '\0';
        r = sys_mkdirat(AT_FDCWD, path, 0755);
        path[i] = saved;
        if (r < 0 && r != -EEXIST) {
            return r;
        }
    }
    return sys_chdir(cwd);
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
    ssize_t n = pid1_recv_into(init_child_buf, sock, fds, 3, &got);
    if (n == 0) {
        sys_exit(0);
    }
    if (stage != CTL_STAGE_NONE) {
        init_child_fail(sock, stage, err);
    }
    char **argv = NULL;
    char **envp = NULL;
    int r = n < 0 ? (int)n : pid1_parse_task(init_child_buf, (size_t)n, &argv, &envp, NULL);
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
    r = init_child_chdir(t->cwd);
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
 * what sbxd sends init, nor the signalfd or the proxy's listener, nor the last task's
 * seccomp listener (a kept sandbox's next child is cloned before init closes it; its last
 * close would also put the filter's free, a kernel worker's JIT unmapping, beside this
 * task's execve). Its fd table is its own (no CLONE_FILES), so the closes change nothing
 * in init. */
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

/* Clones a task child with a socket to it; proxy (or -1) is closed in the child. Returns 0
 * or -errno with e. */
static int init_task_child_spawn(struct init *in, int proxy, struct err *e)
{
    int sp[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        return err_set(e, -errno, "task socket");
    }
    int r = task_child_stack_guard();
    if (r < 0) {
        (void)fd_close(sp[0]);
        (void)fd_close(sp[1]);
        return err_set(e, r, "guard the task's stack");
    }
    in->filter_early = in->filter_len > 0 && bpf_early_ok(in->filter, in->filter_len, sp[1]);
    /* In struct init, whose page this sandbox writes anyway: the child may read it after
     * we return. */
    in->child_arg = (struct init_child_arg){
        .in = in,
        .sock = sp[1],
        .drop = {sp[0], in->ctl, in->sigfd, proxy, in->work_fd, in->listener}};
    struct sys_clone_args args;
    memset(&args, 0, sizeof(args));
    args.flags = CLONE_VM;
    args.exit_signal = SIGCHLD;
    args.stack = (uint64_t)(uintptr_t)init_child_stack;
    args.stack_size = INIT_CHILD_STACK;
    pid_t pid = sys_clone3_run(&args, init_task_child_main, &in->child_arg);
    (void)fd_close(sp[1]);
    if (pid < 0) {
        (void)fd_close(sp[0]);
        return err_set(e, pid, "clone the task's process");
    }
    in->task = pid;
    in->report = sp[0];
    return 0;
}

/* Clones the task child ahead of its task. On failure sends CTL_SETUP_FAILED and exits. */
void task_child_clone(struct init *in, int proxy)
{
    struct err e = ERR_INIT;
    int r = init_task_child_spawn(in, proxy, &e);
    if (r < 0) {
        pid1_send_failure(in, CTL_SETUP_FAILED, CTL_STAGE_FORK, r, err_msg(&e));
        _exit(1);
    }
}

/* The last task child is reaped (it exec'd and its whole namespace was killed, or it
 * died): its stack and buffers are free for the next, which starts from the same
 * privileges the first had, init's. */
int task_child_respawn(struct init *in, struct err *e)
{
    return init_task_child_spawn(in, -1, e);
}
