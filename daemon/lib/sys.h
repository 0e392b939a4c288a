/* SPDX-License-Identifier: MIT */
#pragma once
/* Raw system calls that glibc 2.36 lacks or that must not touch errno, with the constants
 * they need. Every function returns >= 0 or -errno and leaves errno alone: a child cloned
 * with CLONE_VM shares the parent thread's TLS (and so its errno), so it may make syscalls
 * only through these. (Where there is no CLONE_VM trampoline, children are copies and these
 * wrappers fall back to libc's syscall(), whose errno is then private.) All CHILD-SAFE.
 * Needs linux >= 5.12 (mount_setattr); each constant below names the version it needs. */
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

struct msghdr;
struct rusage;
struct sock_filter;
struct seccomp_notif_sizes;
struct __user_cap_header_struct;
struct __user_cap_data_struct;

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000 /* linux 5.2 */
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000 /* linux 4.6 */
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL /* linux 5.7 */
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1 /* linux 5.2 */
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC 02000000 /* linux 5.2: O_CLOEXEC */
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004 /* linux 5.2 */
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000 /* linux 5.2 */
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001 /* linux 5.12 */
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef RESOLVE_NO_MAGICLINKS
#define RESOLVE_NO_MAGICLINKS 0x02 /* linux 5.6 */
#endif
#ifndef RESOLVE_IN_ROOT
#define RESOLVE_IN_ROOT 0x10 /* linux 5.6 */
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2) /* linux 5.11 */
#endif

/* struct clone_args of linux 5.7 (the version with `cgroup`). */
struct sys_clone_args {
    uint64_t flags;
    uint64_t pidfd; /* int * for CLONE_PIDFD */
    uint64_t child_tid;
    uint64_t parent_tid;
    uint64_t exit_signal;
    uint64_t stack; /* lowest address of the child's stack (CLONE_VM) */
    uint64_t stack_size;
    uint64_t tls;
    uint64_t set_tid;
    uint64_t set_tid_size;
    uint64_t cgroup; /* fd for CLONE_INTO_CGROUP */
};

/* Creates a process with clone3(args) that runs fn(arg) and exits with its return value;
 * returns the child's pid in the parent or -errno. With CLONE_VM the child runs on
 * args->stack, shares the caller's memory and TLS, and fn must be CHILD-SAFE: it may touch
 * only its stack and memory the caller keeps alive (and mapped) until the child has exec'd
 * or been reaped, and make syscalls only through this header. Where no CLONE_VM trampoline
 * exists for the architecture (anything but x86_64), CLONE_VM and the stack are dropped
 * and the child is a copy of the caller (fork semantics): slower, same behaviour. Without
 * CLONE_VM but with a stack, the child is a copy of the caller that runs fn on that stack
 * (memory it has, and writes to no other stack). */
pid_t sys_clone3_run(struct sys_clone_args *args, int (*fn)(void *), void *arg);
/* Whether sys_clone3_run honours CLONE_VM on this build. */
int sys_clone_vm_supported(void);
/* Runs fn(arg), which must not return, on stack (size bytes) instead of the caller's, whose
 * frames are never used again; on the caller's stack where the build has no CLONE_VM
 * trampoline (sys_clone_vm_supported() is 0 exactly then). */
__attribute__((noreturn)) void sys_run_on_stack(void *stack, size_t size, void (*fn)(void *),
                                                void *arg);

/* Writes len bytes of buf at offset 0 of fd from a short-lived helper sent into the pid
 * namespace of pidfd's process, for files whose effect is the writer's own pid namespace
 * (vm.memfd_noexec). The helper has pid tid there (clone3's set_tid; a namespace's next pid
 * follows it) and runs on stack (stack_size bytes): it shares our memory (CLONE_VM) while
 * the calling thread sleeps (CLONE_VFORK) with every signal blocked. The caller's children
 * only join that namespace, and the caller comes back to self_ns, its own pid namespace
 * (an open /proc/thread-self/ns/pid), or aborts: its later children must never start in
 * another's namespace. Returns 0, -EIO when the helper's write fell short or failed, or
 * -errno. */
int sys_pidns_write(int pidfd, int self_ns, pid_t tid, void *stack, size_t stack_size, int fd,
                    const void *buf, size_t len);
int sys_pidfd_open(pid_t pid, unsigned flags);
int sys_pidfd_send_signal(int pidfd, int sig);
/* kill(2). Returns 0 or -errno. */
int sys_kill(pid_t pid, int sig);
/* waitid(P_PIDFD, pidfd, info, options), retrying EINTR. Returns 0 or -errno. */
int sys_pidfd_wait(int pidfd, siginfo_t *info, int options);

/* wait4, retrying EINTR. Returns the pid, 0 (WNOHANG) or -errno. */
pid_t sys_wait4(pid_t pid, int *status, int options, struct rusage *ru);
ssize_t sys_read(int fd, void *buf, size_t len);
ssize_t sys_write(int fd, const void *buf, size_t len);
int sys_close(int fd);
int sys_dup3(int oldfd, int newfd, int flags);
int sys_fcntl(int fd, int cmd, long arg);
int sys_close_range(unsigned first, unsigned last, unsigned flags);
/* Sets sig's disposition to SIG_DFL. */
int sys_signal_default(int sig);
/* rt_sigprocmask with the kernel's sigset size. */
int sys_sigprocmask(int how, const sigset_t *set, sigset_t *old);
/* Credentials of the calling task only (glibc's versions signal every thread). */
int sys_setgroups_empty(void);
int sys_setresuid(uid_t r, uid_t e, uid_t s);
int sys_setresgid(gid_t r, gid_t e, gid_t s);
/* SECURITY: a user namespace is owned by the euid that creates it, and the kernel charges
 * the per-user limits of everything in it (inotify instances and watches, POSIX queue
 * bytes, pending signals) to that owner as well as inside. So that a sandbox spends its own
 * budget and never the host root's, a root task about to clone3 one becomes its owner
 * first: euid owner, fsuid kept 0 (file permission checks such as CLONE_INTO_CGROUP's stay
 * root's); the effective capabilities are gone meanwhile. Needs CAP_SETUID and ruid 0.
 * Returns 0, or -errno with nothing changed. */
struct sys_owner {
    int dumpable; /* PR_GET_DUMPABLE before: a change of euid resets it */
};
int sys_owner_begin(uid_t owner, struct sys_owner *saved);
/* Back to euid 0, and with it the effective capabilities (ruid 0 allows it without any) and
 * the dumpable flag. Returns 0 or -errno. */
int sys_owner_end(const struct sys_owner *saved);
/* prctl(2) of the calling task. */
int sys_prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5);
int sys_capget(struct __user_cap_header_struct *hdr, struct __user_cap_data_struct *data);
int sys_capset(struct __user_cap_header_struct *hdr, const struct __user_cap_data_struct *data);
/* sendmsg(2) and recvmsg(2), retrying EINTR. */
ssize_t sys_sendmsg(int sock, const struct msghdr *mh, int flags);
ssize_t sys_recvmsg(int sock, struct msghdr *mh, int flags);
int sys_setsid(void);
int sys_chdir(const char *path);
int sys_mkdirat(int dfd, const char *path, unsigned mode);
/* dup2 where the ABI has it (x86_64), else dup3 with no flags (oldfd != newfd). */
int sys_dup2(int oldfd, int newfd);
/* setrlimit(2) as libcs make it: prlimit64(0, resource, {cur, max}, NULL). */
int sys_setrlimit(int resource, uint64_t cur, uint64_t max);
/* Returns only on failure. */
int sys_execve(const char *path, char *const argv[], char *const envp[]);
/* exit_group(code): never returns. */
__attribute__((noreturn)) void sys_exit(int code);

int sys_pivot_root(const char *new_root, const char *put_old);
/* open_tree(2): with OPEN_TREE_CLONE an fd of a detached copy of the mount tree. */
int sys_open_tree(int dfd, const char *path, unsigned flags);
int sys_move_mount(int from_dfd, const char *from_path, int to_dfd, const char *to_path,
                   unsigned flags);
/* mount_setattr(2) setting attr_set and clearing attr_clr (MOUNT_ATTR_*). */
int sys_mount_setattr(int dfd, const char *path, unsigned flags, uint64_t attr_set,
                      uint64_t attr_clr);
/* openat2(2) with struct open_how {flags, mode, resolve}. */
int sys_openat2(int dfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve);

/* seccomp(SECCOMP_SET_MODE_FILTER, 0, {count, insns}); needs no_new_privs or CAP_SYS_ADMIN. */
int sys_seccomp_filter(const struct sock_filter *insns, unsigned short count);
/* seccomp(SECCOMP_SET_MODE_FILTER, flags, {count, insns}), flags SECCOMP_FILTER_FLAG_* of
 * <linux/seccomp.h>. With SECCOMP_FILTER_FLAG_NEW_LISTENER (linux 5.0) returns the new
 * listener fd (CLOEXEC), else 0; -EBUSY when an installed filter already has a listener,
 * -EINVAL when the kernel does not know a flag. */
int sys_seccomp_filter_flags(const struct sock_filter *insns, unsigned short count,
                             unsigned long flags);
/* seccomp(SECCOMP_GET_NOTIF_SIZES, 0, ret): the sizes the kernel reads and writes for
 * SECCOMP_IOCTL_NOTIF_RECV/SEND, which may exceed this build's structs. 0 or -errno. */
int sys_seccomp_notif_sizes(struct seccomp_notif_sizes *ret);
/* capset(2) with effective, permitted and inheritable all empty (both 32-bit words). */
int sys_capset_empty(void);
