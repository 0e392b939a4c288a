/* SPDX-License-Identifier: MIT */
/* Raw system calls: clone3 with a CLONE_VM trampoline, pidfds, the new mount API, openat2,
 * seccomp and capset. Nothing here allocates, logs or (on x86_64) writes errno, so every
 * function is CHILD-SAFE even in a CLONE_VM child that shares its parent's TLS. */
#include "lib/sys.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

#ifndef __NR_pidfd_send_signal
#define __NR_pidfd_send_signal 424 /* linux 5.1 */
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428 /* linux 5.2 */
#endif
#ifndef __NR_move_mount
#define __NR_move_mount 429 /* linux 5.2 */
#endif
#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434 /* linux 5.3 */
#endif
#ifndef __NR_clone3
#define __NR_clone3 435 /* linux 5.3 */
#endif
#ifndef __NR_close_range
#define __NR_close_range 436 /* linux 5.9 */
#endif
#ifndef __NR_openat2
#define __NR_openat2 437 /* linux 5.6 */
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442 /* linux 5.12 */
#endif
#ifndef P_PIDFD_VALUE
#define P_PIDFD_VALUE 3 /* linux 5.4: waitid's P_PIDFD */
#endif

#if defined(__x86_64__) && !defined(SYS_NO_VM_TRAMPOLINE)
#define SYS_VM_TRAMPOLINE 1

/* The syscall instruction without errno: the kernel's -errno comes back as is. */
static inline long raw6(long n, long a1, long a2, long a3, long a4, long a5, long a6)
{
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

/* long sys_clone3_tramp(args, size, fn, arg): rdi, rsi, rdx, rcx. The child starts with
 * rsp = stack + stack_size and the parent's other registers; r8 and r9 survive `syscall`
 * (rcx and r11 do not), so fn and arg travel there. The child clears rbp to end the frame
 * chain, calls fn(arg) on its own stack and exit_group()s with the result. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl sys_clone3_tramp\n"
        ".hidden sys_clone3_tramp\n"
        ".type sys_clone3_tramp,@function\n"
        "sys_clone3_tramp:\n"
        "    mov %rcx, %r8\n"
        "    mov %rdx, %r9\n"
        "    mov $435, %eax\n"
        "    syscall\n"
        "    test %rax, %rax\n"
        "    jz 1f\n"
        "    ret\n"
        "1:  xor %ebp, %ebp\n"
        "    mov %r8, %rdi\n"
        "    call *%r9\n"
        "    mov %eax, %edi\n"
        "    mov $231, %eax\n"
        "    syscall\n"
        "    hlt\n"
        ".size sys_clone3_tramp, .-sys_clone3_tramp\n");

long sys_clone3_tramp(struct sys_clone_args *args, size_t size, int (*fn)(void *), void *arg);

/* void sys_stack_switch(top, fn, arg): rdi, rsi, rdx. Moves rsp to top (16-aligned, as at a
 * call) and calls fn(arg), which never returns; no frame of the old stack is used again. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl sys_stack_switch\n"
        ".hidden sys_stack_switch\n"
        ".type sys_stack_switch,@function\n"
        "sys_stack_switch:\n"
        "    mov %rdi, %rsp\n"
        "    xor %ebp, %ebp\n"
        "    mov %rdx, %rdi\n"
        "    call *%rsi\n"
        "    hlt\n"
        ".size sys_stack_switch, .-sys_stack_switch\n");

__attribute__((noreturn)) void sys_stack_switch(void *top, void (*fn)(void *), void *arg);

#else

/* Without the trampoline no child ever shares our memory, so errno is private and the
 * libc syscall() is safe to use. */
static long raw6(long n, long a1, long a2, long a3, long a4, long a5, long a6)
{
    long r = syscall(n, a1, a2, a3, a4, a5, a6);
    return r < 0 ? -errno : r;
}

#endif

#define raw1(n, a) raw6((n), (long)(a), 0, 0, 0, 0, 0)
#define raw2(n, a, b) raw6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define raw3(n, a, b, c) raw6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define raw4(n, a, b, c, d) raw6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define raw5(n, a, b, c, d, e) raw6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

pid_t sys_clone3_run(struct sys_clone_args *args, int (*fn)(void *), void *arg)
{
#ifdef SYS_VM_TRAMPOLINE
    /* SECURITY: a CLONE_VM child on the parent's stack would corrupt it. A copy of our
     * memory given a stack runs on that one: no frame of ours is used. */
    if ((args->flags & CLONE_VM) || args->stack != 0) {
        if (args->stack == 0 || args->stack_size < 4096) {
            return -EINVAL;
        }
        return (pid_t)sys_clone3_tramp(args, sizeof(*args), fn, arg);
    }
#else
    args->flags &= ~(uint64_t)CLONE_VM;
    args->stack = 0;
    args->stack_size = 0;
#endif
    long r = raw2(__NR_clone3, args, sizeof(*args));
    if (r == 0) {
        sys_exit(fn(arg));
    }
    return (pid_t)r;
}

void sys_run_on_stack(void *stack, size_t size, void (*fn)(void *), void *arg)
{
#ifdef SYS_VM_TRAMPOLINE
    if (stack && size >= 4096) {
        uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
        sys_stack_switch((void *)top, fn, arg);
    }
#else
    (void)stack;
    (void)size;
#endif
    fn(arg);
    sys_exit(127);
}

int sys_clone_vm_supported(void)
{
#ifdef SYS_VM_TRAMPOLINE
    return 1;
#else
    return 0;
#endif
}

int sys_pidfd_open(pid_t pid, unsigned flags)
{
    return (int)raw2(__NR_pidfd_open, pid, flags);
}

int sys_pidfd_send_signal(int pidfd, int sig)
{
    return (int)raw4(__NR_pidfd_send_signal, pidfd, sig, NULL, 0);
}

int sys_kill(pid_t pid, int sig)
{
    return (int)raw2(__NR_kill, pid, sig);
}

int sys_pidfd_wait(int pidfd, siginfo_t *info, int options)
{
    long r;
    do {
        r = raw5(__NR_waitid, P_PIDFD_VALUE, pidfd, info, options, NULL);
    } while (r == -EINTR);
    return (int)r;
}

pid_t sys_wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
    long r;
    do {
        r = raw4(__NR_wait4, pid, status, options, ru);
    } while (r == -EINTR);
    return (pid_t)r;
}

ssize_t sys_read(int fd, void *buf, size_t len)
{
    return raw3(__NR_read, fd, buf, len);
}

struct pidns_write {
    int fd;
    const void *buf;
    size_t len;
};

/* The helper of sys_pidns_write (CLONE_VM: raw calls only). */
static int pidns_write_child(void *arg)
{
    const struct pidns_write *w = arg;
    return raw4(__NR_pwrite64, w->fd, w->buf, w->len, 0) == (long)w->len ? 0 : 1;
}

int sys_pidns_write(int pidfd, int self_ns, pid_t tid, void *stack, size_t stack_size, int fd,
                    const void *buf, size_t len)
{
    struct pidns_write w = {fd, buf, len};
    int helper = -1;
    struct sys_clone_args args;
    memset(&args, 0, sizeof(args));
    /* exit_signal 0: no SIGCHLD to the caller (reaped with __WALL). */
    args.flags = CLONE_VM | CLONE_VFORK | CLONE_FILES | CLONE_PIDFD;
    args.pidfd = (uint64_t)(uintptr_t)&helper;
    args.set_tid = (uint64_t)(uintptr_t)&tid;
    args.set_tid_size = 1;
    args.stack = (uint64_t)(uintptr_t)stack;
    args.stack_size = stack_size;
    /* No handler of the caller's may run in the helper. */
    sigset_t all, old;
    sigfillset(&all);
    int r = sys_sigprocmask(SIG_SETMASK, &all, &old);
    if (r == 0) {
        r = (int)raw2(__NR_setns, pidfd, CLONE_NEWPID);
    }
    pid_t pid = r < 0 ? r : sys_clone3_run(&args, pidns_write_child, &w);
    if (r == 0 && raw2(__NR_setns, self_ns, CLONE_NEWPID) < 0) {
        abort();
    }
    (void)sys_sigprocmask(SIG_SETMASK, &old, NULL);
#ifdef __SANITIZE_ADDRESS__
    /* The helper's frames died poisoned (it never returned from them). */
    ASAN_UNPOISON_MEMORY_REGION(stack, stack_size);
#endif
    if (r < 0 || pid < 0) {
        return r < 0 ? r : pid;
    }
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    r = sys_pidfd_wait(helper, &info, WEXITED | __WALL);
    (void)sys_close(helper);
    if (r < 0) {
        return r;
    }
    return info.si_code == CLD_EXITED && info.si_status == 0 ? 0 : -EIO;
}

ssize_t sys_write(int fd, const void *buf, size_t len)
{
    return raw3(__NR_write, fd, buf, len);
}

int sys_close(int fd)
{
    return (int)raw1(__NR_close, fd);
}

int sys_dup3(int oldfd, int newfd, int flags)
{
    return (int)raw3(__NR_dup3, oldfd, newfd, flags);
}

int sys_fcntl(int fd, int cmd, long arg)
{
    return (int)raw3(__NR_fcntl, fd, cmd, arg);
}

int sys_close_range(unsigned first, unsigned last, unsigned flags)
{
    return (int)raw3(__NR_close_range, first, last, flags);
}

int sys_signal_default(int sig)
{
    /* The kernel's struct sigaction with every field zero is SIG_DFL, no flags, empty mask
     * on every layout. */
    unsigned long act[4] = {0, 0, 0, 0};
    return (int)raw4(__NR_rt_sigaction, sig, act, NULL, _NSIG / 8);
}

int sys_sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    return (int)raw4(__NR_rt_sigprocmask, how, set, old, _NSIG / 8);
}

int sys_setgroups_empty(void)
{
    return (int)raw2(__NR_setgroups, 0, NULL);
}

int sys_setresuid(uid_t r, uid_t e, uid_t s)
{
    return (int)raw3(__NR_setresuid, r, e, s);
}

int sys_owner_begin(uid_t owner, struct sys_owner *saved)
{
    saved->dumpable = (int)raw2(__NR_prctl, PR_GET_DUMPABLE, 0);
    int r = sys_setresuid((uid_t)-1, owner, (uid_t)-1);
    if (r < 0) {
        return r;
    }
    /* setfsuid reports no error: the kernel answers a refused change with the old value,
     * so the new one is read back (-1 changes nothing). */
    (void)raw1(__NR_setfsuid, 0);
    if ((uid_t)raw1(__NR_setfsuid, (uid_t)-1) != 0) {
        (void)sys_owner_end(saved);
        return -EPERM;
    }
    return 0;
}

int sys_owner_end(const struct sys_owner *saved)
{
    int r = sys_setresuid((uid_t)-1, 0, (uid_t)-1);
    if (r == 0 && (saved->dumpable == 0 || saved->dumpable == 1)) {
        r = (int)raw2(__NR_prctl, PR_SET_DUMPABLE, saved->dumpable);
    }
    return r;
}

int sys_setresgid(gid_t r, gid_t e, gid_t s)
{
    return (int)raw3(__NR_setresgid, r, e, s);
}

int sys_prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5)
{
    return (int)raw5(__NR_prctl, option, a2, a3, a4, a5);
}

int sys_capget(struct __user_cap_header_struct *hdr, struct __user_cap_data_struct *data)
{
    return (int)raw2(__NR_capget, hdr, data);
}

int sys_capset(struct __user_cap_header_struct *hdr, const struct __user_cap_data_struct *data)
{
    return (int)raw2(__NR_capset, hdr, data);
}

ssize_t sys_sendmsg(int sock, const struct msghdr *mh, int flags)
{
    long r;
    do {
        r = raw3(__NR_sendmsg, sock, mh, flags);
    } while (r == -EINTR);
    return r;
}

ssize_t sys_recvmsg(int sock, struct msghdr *mh, int flags)
{
    long r;
    do {
        r = raw3(__NR_recvmsg, sock, mh, flags);
    } while (r == -EINTR);
    return r;
}

int sys_setsid(void)
{
    return (int)raw1(__NR_setsid, 0);
}

int sys_chdir(const char *path)
{
    return (int)raw1(__NR_chdir, path);
}

int sys_mkdirat(int dfd, const char *path, unsigned mode)
{
    return (int)raw3(__NR_mkdirat, dfd, path, mode);
}

int sys_dup2(int oldfd, int newfd)
{
#ifdef __NR_dup2
    return (int)raw2(__NR_dup2, oldfd, newfd);
#else
    return (int)raw3(__NR_dup3, oldfd, newfd, 0);
#endif
}

int sys_setrlimit(int resource, uint64_t cur, uint64_t max)
{
    const uint64_t lim[2] = {cur, max};
    return (int)raw4(__NR_prlimit64, 0, resource, lim, NULL);
}

int sys_execve(const char *path, char *const argv[], char *const envp[])
{
    return (int)raw3(__NR_execve, path, argv, envp);
}

void sys_exit(int code)
{
    for (;;) {
        (void)raw1(__NR_exit_group, code);
    }
}

int sys_pivot_root(const char *new_root, const char *put_old)
{
    return (int)raw2(__NR_pivot_root, new_root, put_old);
}

int sys_open_tree(int dfd, const char *path, unsigned flags)
{
    return (int)raw3(__NR_open_tree, dfd, path, flags);
}

int sys_move_mount(int from_dfd, const char *from_path, int to_dfd, const char *to_path,
                   unsigned flags)
{
    return (int)raw5(__NR_move_mount, from_dfd, from_path, to_dfd, to_path, flags);
}

int sys_mount_setattr(int dfd, const char *path, unsigned flags, uint64_t attr_set,
                      uint64_t attr_clr)
{
    struct {
        uint64_t attr_set;
        uint64_t attr_clr;
        uint64_t propagation;
        uint64_t userns_fd;
    } attr = {attr_set, attr_clr, 0, 0};
    return (int)raw5(__NR_mount_setattr, dfd, path, flags, &attr, sizeof(attr));
}

int sys_openat2(int dfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
    struct {
        uint64_t flags;
        uint64_t mode;
        uint64_t resolve;
    } how = {flags, mode, resolve};
    return (int)raw4(__NR_openat2, dfd, path, &how, sizeof(how));
}

int sys_seccomp_filter(const struct sock_filter *insns, unsigned short count)
{
    return sys_seccomp_filter_flags(insns, count, 0);
}

int sys_seccomp_filter_flags(const struct sock_filter *insns, unsigned short count,
                             unsigned long flags)
{
    struct sock_fprog prog = {.len = count, .filter = (struct sock_filter *)insns};
    return (int)raw3(__NR_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
}

int sys_seccomp_notif_sizes(struct seccomp_notif_sizes *ret)
{
    return (int)raw3(__NR_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, ret);
}

int sys_capset_empty(void)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0, 0, 0}};
    return (int)raw2(__NR_capset, &hdr, data);
}
