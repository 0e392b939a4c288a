/* SPDX-License-Identifier: MIT */
/* seccomp profiles, the always-denied list (docs/SECCOMP.md explains each entry) and its
 * merging into a parsed profile: the calls no profile may allow, denied on top of the
 * profile's own rules, with the harmless subset of the conditional entries (clone,
 * personality) left to the profile. Pure over struct profile; never logs. */
#define LOG_MOD "seccomp"
#include "sandbox/seccomp_impl.h"

#include <sched.h>

#include "lib/util.h"

/* Namespace flags of clone(2)'s first argument. CLONE_NEWTIME (0x80) is not among them: in
 * clone(2) that bit belongs to the exit signal, and only clone3 and unshare take it. */
#define CLONE_NS_FLAGS                                                                             \
    (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |  \
     CLONE_NEWNET)

/* personality(2) takes an unsigned int, so the kernel sees only the low 32 bits of the
 * register and every comparison below masks them. Allowed: PER_LINUX (0), PER_LINUX32 (8,
 * what `linux32`/`setarch i686` set: uname says i686, nothing else changes on x86_64) and
 * 0xffffffff (query, changes nothing). Everything else, ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC
 * and MMAP_PAGE_ZERO among it, is denied. */
#define PERSONA_LO32 0xffffffffULL
static const uint32_t persona_allowed[] = {0x0, 0x8, 0xffffffff};

enum deny_kind {
    DENY_WHOLE,       /* every call */
    DENY_CLONE,       /* calls with a CLONE_NEW* flag in arg0 */
    DENY_PERSONALITY, /* calls whose arg0 is not in persona_allowed */
};

static const struct denied {
    const char *name;
    int err;
    enum deny_kind kind;
} always_denied[] = {
    /* Other processes' memory and execution. */
    {"ptrace", EPERM, DENY_WHOLE},
    {"process_vm_readv", EPERM, DENY_WHOLE},
    {"process_vm_writev", EPERM, DENY_WHOLE},
    /* Mounts, roots and namespaces: the sandbox's shape is fixed before the task runs. */
    {"mount", EPERM, DENY_WHOLE},
    {"umount2", EPERM, DENY_WHOLE},
    {"pivot_root", EPERM, DENY_WHOLE},
    {"chroot", EPERM, DENY_WHOLE},
    {"unshare", EPERM, DENY_WHOLE},
    {"setns", EPERM, DENY_WHOLE},
    {"mount_setattr", EPERM, DENY_WHOLE},
    {"fsopen", EPERM, DENY_WHOLE},
    {"fsmount", EPERM, DENY_WHOLE},
    {"fsconfig", EPERM, DENY_WHOLE},
    {"fspick", EPERM, DENY_WHOLE},
    {"open_tree", EPERM, DENY_WHOLE},
    {"move_mount", EPERM, DENY_WHOLE},
    {"clone", EPERM, DENY_CLONE},
    /* clone3 passes its flags in memory that a filter cannot read: ENOSYS makes glibc fall
     * back to clone, whose flags it can. Not counted: glibc tries it on every thread and
     * every posix_spawn, so it is no sign of a misbehaving task. */
    {"clone3", ENOSYS, DENY_WHOLE},
    /* Kernel keyrings are not namespaced. */
    {"keyctl", EPERM, DENY_WHOLE},
    {"add_key", EPERM, DENY_WHOLE},
    {"request_key", EPERM, DENY_WHOLE},
    /* Large kernel attack surface, rarely needed by a task. */
    {"bpf", EPERM, DENY_WHOLE},
    {"perf_event_open", EPERM, DENY_WHOLE},
    {"userfaultfd", EPERM, DENY_WHOLE},
    {"io_uring_setup", EPERM, DENY_WHOLE},
    {"io_uring_enter", EPERM, DENY_WHOLE},
    {"io_uring_register", EPERM, DENY_WHOLE},
    /* File handles bypass the mount tree (the "shocker" escape). */
    {"open_by_handle_at", EPERM, DENY_WHOLE},
    {"name_to_handle_at", EPERM, DENY_WHOLE},
    /* The machine itself: kernels, modules, I/O ports, swap, power, accounting, quotas,
     * the kernel log, the clock, and the terminal. */
    {"kexec_load", EPERM, DENY_WHOLE},
    {"kexec_file_load", EPERM, DENY_WHOLE},
    {"init_module", EPERM, DENY_WHOLE},
    {"finit_module", EPERM, DENY_WHOLE},
    {"delete_module", EPERM, DENY_WHOLE},
    {"iopl", EPERM, DENY_WHOLE},
    {"ioperm", EPERM, DENY_WHOLE},
    {"swapon", EPERM, DENY_WHOLE},
    {"swapoff", EPERM, DENY_WHOLE},
    {"reboot", EPERM, DENY_WHOLE},
    {"acct", EPERM, DENY_WHOLE},
    {"quotactl", EPERM, DENY_WHOLE},
    {"syslog", EPERM, DENY_WHOLE},
    {"settimeofday", EPERM, DENY_WHOLE},
    {"clock_settime", EPERM, DENY_WHOLE},
    {"clock_adjtime", EPERM, DENY_WHOLE},
    {"adjtimex", EPERM, DENY_WHOLE},
    {"fanotify_init", EPERM, DENY_WHOLE},
    {"lookup_dcookie", EPERM, DENY_WHOLE},
    {"vhangup", EPERM, DENY_WHOLE},
    /* NUMA placement: other tenants' memory locality. */
    {"mbind", EPERM, DENY_WHOLE},
    {"set_mempolicy", EPERM, DENY_WHOLE},
    {"move_pages", EPERM, DENY_WHOLE},
    /* Execution domains: ASLR and exec permissions are not the task's to change. */
    {"personality", EPERM, DENY_PERSONALITY},
};

/* The entry for syscall nr, given the list's numbers on this architecture (-1: absent). */
static const struct denied *denied_find(const int *nrs, int nr)
{
    for (size_t i = 0; i < ARRAY_SIZE(always_denied); i++) {
        if (nrs[i] == nr) {
            return &always_denied[i];
        }
    }
    return NULL;
}

static void rule_add_cmp(struct profile *out, int nr, const char *name, struct verdict v,
                         uint64_t mask, uint64_t value)
{
    struct rule *r = seccomp_profile_push(out);
    r->nr = nr;
    (void)str_copy(r->name, name, sizeof(r->name));
    r->v = v;
    r->n_cmps = 1;
    r->cmps[0] = (struct cmp){0, SCMP_CMP_MASKED_EQ, value, mask};
}

/* The calls of a conditional entry that stay possible, with the profile's verdict. */
static void add_safe_subset(struct profile *out, const struct rule *pr, const struct denied *d)
{
    if (d->kind == DENY_CLONE) {
        rule_add_cmp(out, pr->nr, pr->name, pr->v, CLONE_NS_FLAGS, 0);
        return;
    }
    for (size_t i = 0; i < ARRAY_SIZE(persona_allowed); i++) {
        rule_add_cmp(out, pr->nr, pr->name, pr->v, PERSONA_LO32, persona_allowed[i]);
    }
}

/* The denial rules of an always-denied entry. Their conditions cover exactly the calls that
 * add_safe_subset leaves out, since libseccomp rules can only be or-ed. */
static void add_denial(struct profile *out, int nr, const struct denied *d)
{
    struct verdict v = {ACT_ERRNO, d->err, d->kind != DENY_WHOLE || d->err != ENOSYS};
    if (d->kind == DENY_WHOLE) {
        struct rule *r = seccomp_profile_push(out);
        r->nr = nr;
        (void)str_copy(r->name, d->name, sizeof(r->name));
        r->v = v;
        return;
    }
    if (d->kind == DENY_CLONE) {
        for (unsigned bit = 0; bit < 32; bit++) {
            uint64_t f = 1ULL << bit;
            if (f & CLONE_NS_FLAGS) {
                rule_add_cmp(out, nr, d->name, v, f, f);
            }
        }
        return;
    }
    /* arg0's low 32 bits outside {0, 8, 0xffffffff}. Let y be those bits without bit 3
     * (31 bits). If y has both ones and zeroes, then going round its bits cyclically some
     * one is followed by a zero: one rule per cyclically adjacent pair (bit i set, next
     * clear) catches all those. Otherwise y is all zeroes (0 or 8: allowed) or all ones
     * (0xffffffff: allowed, or 0xfffffff7: the last rule). */
    unsigned bits[31], nb = 0;
    for (unsigned b = 0; b < 32; b++) {
        if (b != 3) {
            bits[nb++] = b;
        }
    }
    for (unsigned i = 0; i < nb; i++) {
        uint64_t one = 1ULL << bits[i], zero = 1ULL << bits[(i + 1) % nb];
        rule_add_cmp(out, nr, d->name, v, one | zero, one);
    }
    rule_add_cmp(out, nr, d->name, v, PERSONA_LO32, 0xfffffff7);
}

/* The profile's rules with the always-denied list applied. A profile may deny a listed
 * syscall itself (a rule without args, action errno or kill), which replaces the built-in
 * denial; allowing or logging one is refused, except for the conditional entries (clone,
 * personality), where it allows or logs the harmless calls only. */
int seccomp_denied_merge(const char *file, const struct profile *in, bool deny_memfd,
                         struct profile *out, struct err *e)
{
    bool replaced[ARRAY_SIZE(always_denied)] = {false};
    int nrs[ARRAY_SIZE(always_denied)];
    int memfd_nr = deny_memfd ? seccomp_syscall_resolve_name("memfd_create") : -1;

    for (size_t i = 0; i < ARRAY_SIZE(always_denied); i++) {
        nrs[i] = seccomp_syscall_resolve_name(always_denied[i].name);
        nrs[i] = nrs[i] < 0 ? -1 : nrs[i];
    }
    out->def = in->def;
    out->count = in->count;
    for (size_t i = 0; i < in->n; i++) {
        const struct rule *pr = &in->rules[i];
        if (memfd_nr >= 0 && pr->nr == memfd_nr) {
            continue; /* one rule for every call below: no overlap for libseccomp to drop */
        }
        const struct denied *d = denied_find(nrs, pr->nr);
        if (!d) {
            *seccomp_profile_push(out) = *pr;
            continue;
        }
        bool permits = pr->v.act == ACT_ALLOW || pr->v.act == ACT_LOG;
        if (permits && d->kind == DENY_WHOLE) {
            return fail(e, file, pr->m, "'%s' is on the always-denied list", pr->name);
        }
        if (pr->n_cmps > 0) {
            return fail(e, file, pr->m,
                        "'%s' is on the always-denied list: a rule for it takes no args", pr->name);
        }
        if (permits) {
            add_safe_subset(out, pr, d);
            continue;
        }
        *seccomp_profile_push(out) = *pr;
        replaced[d - always_denied] = true;
    }
    for (size_t i = 0; i < ARRAY_SIZE(always_denied); i++) {
        if (!replaced[i] && nrs[i] >= 0) {
            add_denial(out, nrs[i], &always_denied[i]);
        }
    }
    if (memfd_nr >= 0) {
        /* SECURITY: no vm.memfd_noexec for the sandbox (seccomp_memfd_noexec_fd), so a memfd
         * could be written and then run (fexecve, execveat, /proc/self/fd/N), the one file a
         * task can write that is on no noexec mount. ENOSYS is what a kernel without memfds
         * answers: programs that use them fall back to files, which are on noexec mounts. */
        struct rule *r = seccomp_profile_push(out);
        r->nr = memfd_nr;
        (void)str_copy(r->name, "memfd_create", sizeof(r->name));
        r->v = (struct verdict){ACT_ERRNO, ENOSYS, true};
    }
    return 0;
}
