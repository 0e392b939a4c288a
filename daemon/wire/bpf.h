/* SPDX-License-Identifier: MIT */
#pragma once
/* Compiled seccomp programs as sbxd hands them to sbxd-init in CTL_SETUP (wire/ctl.h): classic
 * BPF over struct seccomp_data. These helpers read, evaluate and rewrite such a program; they
 * are CHILD-SAFE (no allocation, no I/O, no libseccomp), so sbxd-init uses them as they are,
 * and sbxd's compiler (sandbox/seccomp.h) uses the same ones. The interpreter trusts nothing in
 * the program: anything the kernel would refuse gives -EINVAL. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

/* Whether the program returns SECCOMP_RET_USER_NOTIF anywhere: the task must then install
 * it with SECCOMP_FILTER_FLAG_NEW_LISTENER and someone must answer on the listener, or the
 * counted denials fail with ENOSYS instead of their errno. */
static inline bool bpf_notifies(const struct sock_filter *insns, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (insns[i].code == (BPF_RET | BPF_K) &&
            (insns[i].k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_USER_NOTIF) {
            return true;
        }
    }
    return false;
}

/* Turns every USER_NOTIF | errno return into ERRNO | errno, in place: the program then
 * denies exactly as before without a supervisor (for when NEW_LISTENER fails with EBUSY
 * because an outer filter already has a listener). */
static inline void bpf_strip_notify(struct sock_filter *insns, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (insns[i].code == (BPF_RET | BPF_K) &&
            (insns[i].k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_USER_NOTIF) {
            insns[i].k = SECCOMP_RET_ERRNO | (insns[i].k & SECCOMP_RET_DATA);
        }
    }
}

/* Runs a classic BPF seccomp program over d as the kernel would and stores its return value
 * in *ret. Every instruction the kernel accepts in a seccomp filter is supported; anything
 * else, a load outside seccomp_data or a jump out of the program gives -EINVAL. */
static inline int bpf_eval(const struct sock_filter *insns, uint32_t n,
                           const struct seccomp_data *d, uint32_t *ret)
{
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};

    for (uint32_t pc = 0; pc < n; pc++) {
        const struct sock_filter *f = &insns[pc];
        uint32_t k = f->k, src = BPF_SRC(f->code) == BPF_X ? x : k, w;
        switch (BPF_CLASS(f->code)) {
        case BPF_LD:
        case BPF_LDX:
            if (f->code == (BPF_LD | BPF_W | BPF_ABS)) {
                if (k % 4 != 0 || k > sizeof(*d) - 4) {
                    return -EINVAL;
                }
                memcpy(&a, (const char *)d + k, 4);
                continue;
            }
            if (BPF_MODE(f->code) == BPF_LEN) {
                w = (uint32_t)sizeof(*d);
            } else if (BPF_MODE(f->code) == BPF_IMM) {
                w = k;
            } else if (BPF_MODE(f->code) == BPF_MEM && k < BPF_MEMWORDS) {
                w = mem[k];
            } else {
                return -EINVAL;
            }
            *(BPF_CLASS(f->code) == BPF_LD ? &a : &x) = w;
            continue;
        case BPF_ST:
        case BPF_STX:
            if (k >= BPF_MEMWORDS) {
                return -EINVAL;
            }
            mem[k] = BPF_CLASS(f->code) == BPF_ST ? a : x;
            continue;
        case BPF_ALU:
            switch (BPF_OP(f->code)) {
            case BPF_ADD:
                a += src;
                break;
            case BPF_SUB:
                a -= src;
                break;
            case BPF_MUL:
                a *= src;
                break;
            case BPF_OR:
                a |= src;
                break;
            case BPF_AND:
                a &= src;
                break;
            case BPF_XOR:
                a ^= src;
                break;
            case BPF_LSH:
                a = src < 32 ? a << src : 0;
                break;
            case BPF_RSH:
                a = src < 32 ? a >> src : 0;
                break;
            case BPF_NEG:
                a = -a;
                break;
            case BPF_DIV:
            case BPF_MOD:
                if (src == 0) {
                    *ret = 0; /* the kernel's filter returns 0 (kill) on division by zero */
                    return 0;
                }
                a = BPF_OP(f->code) == BPF_DIV ? a / src : a % src;
                break;
            default:
                return -EINVAL;
            }
            continue;
        case BPF_JMP:
            if (BPF_OP(f->code) == BPF_JA) {
                w = k;
            } else if (BPF_OP(f->code) == BPF_JEQ) {
                w = a == src ? f->jt : f->jf;
            } else if (BPF_OP(f->code) == BPF_JGT) {
                w = a > src ? f->jt : f->jf;
            } else if (BPF_OP(f->code) == BPF_JGE) {
                w = a >= src ? f->jt : f->jf;
            } else if (BPF_OP(f->code) == BPF_JSET) {
                w = (a & src) ? f->jt : f->jf;
            } else {
                return -EINVAL;
            }
            if (w >= n - pc - 1) {
                return -EINVAL;
            }
            pc += w;
            continue;
        case BPF_RET:
            if (BPF_RVAL(f->code) == BPF_K) {
                *ret = k;
            } else if (BPF_RVAL(f->code) == BPF_A) {
                *ret = a;
            } else {
                return -EINVAL;
            }
            return 0;
        case BPF_MISC:
            if (BPF_MISCOP(f->code) == BPF_TAX) {
                x = a;
            } else if (BPF_MISCOP(f->code) == BPF_TXA) {
                a = x;
            } else {
                return -EINVAL;
            }
            continue;
        default:
            return -EINVAL;
        }
    }
    return -EINVAL; /* fell off the end: the kernel's checker refuses such a program */
}

/* The errno to answer a USER_NOTIF notification with: the program's verdict for d, whose
 * low 16 bits carry the errno of the denial. EPERM when the verdict is not a counted denial
 * (which cannot happen for a program from this module, but fails safe). CHILD-SAFE. */
static inline int bpf_notify_errno(const struct sock_filter *insns, uint32_t n,
                                   const struct seccomp_data *d)
{
    uint32_t v = 0;
    if (bpf_eval(insns, n, d, &v) < 0 || (v & SECCOMP_RET_ACTION_FULL) != SECCOMP_RET_USER_NOTIF ||
        (v & SECCOMP_RET_DATA) == 0) {
        return EPERM;
    }
    return (int)(v & SECCOMP_RET_DATA);
}

/* The AUDIT_ARCH_* value of the native system call ABI, or 0 where this file does not know
 * it (bpf_allows then proves nothing). */
#if defined(__x86_64__) && !defined(__ILP32__)
#define SECCOMP_ARCH_SELF AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SECCOMP_ARCH_SELF AUDIT_ARCH_AARCH64
#else
#define SECCOMP_ARCH_SELF 0
#endif

/* One system call as a program will see it: number and arguments (pointers as 0: a filter
 * cannot read what they point to). */
struct seccomp_call {
    long nr;
    uint64_t args[6];
};

/* Whether the program lets every one of calls through as it is (ALLOW, or LOG, which allows
 * and logs), on the native ABI: no errno, no notification, no kill. CHILD-SAFE. */
static inline bool bpf_allows(const struct sock_filter *insns, uint32_t n,
                              const struct seccomp_call *calls, size_t ncalls)
{
    if (SECCOMP_ARCH_SELF == 0) {
        return false;
    }
    for (size_t i = 0; i < ncalls; i++) {
        struct seccomp_data d;
        uint32_t v = 0;
        memset(&d, 0, sizeof(d));
        d.nr = (int)calls[i].nr;
        d.arch = SECCOMP_ARCH_SELF;
        memcpy(d.args, calls[i].args, sizeof(d.args));
        if (bpf_eval(insns, n, &d, &v) < 0) {
            return false;
        }
        v &= SECCOMP_RET_ACTION_FULL;
        if (v != SECCOMP_RET_ALLOW && v != SECCOMP_RET_LOG) {
            return false;
        }
    }
    return true;
}

/* Whether sbxd-init's task child may install the program as soon as it is cloned, ahead of
 * its task, instead of just before execve: only if the program allows every call the child
 * makes after it, as musl makes them (init/task_child.c, init_task_child): the listener's
 * hand-over (sendmsg), receiving the task (recvmsg; close on a bad packet), setsid, lifting
 * fds above 2 (fcntl F_DUPFD_CLOEXEC, then F_SETFD), dup2 onto 0-2, chdir (and mkdirat of
 * a missing cwd under /work or /tmp), setrlimit
 * (prlimit64) of RLIMIT_NOFILE and RLIMIT_CORE, capset to nothing, execve, and on failure
 * write and _exit. A program that denies, counts or kills any of them is installed late, as
 * before: the child never meets its own filter. report is the child's socket to init.
 * CHILD-SAFE. */
static inline bool bpf_early_ok(const struct sock_filter *insns, uint32_t n, int report)
{
    const uint64_t r = (uint64_t)report;
    const struct seccomp_call calls[] = {
        {SYS_sendmsg, {r, 0, 0, 0, 0, 0}},
        {SYS_recvmsg, {r, 0, MSG_CMSG_CLOEXEC, 0, 0, 0}},
        {SYS_close, {3, 0, 0, 0, 0, 0}},
        {SYS_setsid, {0, 0, 0, 0, 0, 0}},
        {SYS_fcntl, {0, F_DUPFD_CLOEXEC, 3, 0, 0, 0}},
        {SYS_fcntl, {3, F_SETFD, FD_CLOEXEC, 0, 0, 0}},
#ifdef SYS_dup2
        {SYS_dup2, {3, 0, 0, 0, 0, 0}},
        {SYS_dup2, {4, 1, 0, 0, 0, 0}},
        {SYS_dup2, {5, 2, 0, 0, 0, 0}},
#else
        {SYS_dup3, {3, 0, 0, 0, 0, 0}},
        {SYS_dup3, {4, 1, 0, 0, 0, 0}},
        {SYS_dup3, {5, 2, 0, 0, 0, 0}},
#endif
        {SYS_chdir, {0, 0, 0, 0, 0, 0}},
        {SYS_mkdirat, {(uint64_t)(int64_t)AT_FDCWD, 0, 0755, 0, 0, 0}},
        {SYS_prlimit64, {0, RLIMIT_NOFILE, 0, 0, 0, 0}},
        {SYS_prlimit64, {0, RLIMIT_CORE, 0, 0, 0, 0}},
        {SYS_capset, {0, 0, 0, 0, 0, 0}},
        {SYS_execve, {0, 0, 0, 0, 0, 0}},
        {SYS_write, {r, 0, 8, 0, 0, 0}},
        {SYS_exit_group, {127, 0, 0, 0, 0, 0}},
    };
    return bpf_allows(insns, n, calls, sizeof(calls) / sizeof(calls[0]));
}
