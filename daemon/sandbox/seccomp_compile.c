/* SPDX-License-Identifier: MIT */
/* seccomp profiles, rules to BPF: a parsed profile checked for rules libseccomp would drop,
 * merged with the always-denied list (seccomp_denied.c), then libseccomp to classic BPF for
 * the native architecture, read back through a memfd (and libseccomp's PFC listing).
 * Start-up or reload only. Never installs a filter, forks, or logs above debug. */
#define LOG_MOD "seccomp"
#include "sandbox/seccomp_impl.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/util.h"
#include "sandbox/seccomp.h"
#include "wire/ctl.h"

static bool cmps_equal(const struct rule *a, const struct rule *b)
{
    if (a->n_cmps != b->n_cmps) {
        return false;
    }
    for (unsigned i = 0; i < a->n_cmps; i++) {
        bool found = false;
        for (unsigned j = 0; j < b->n_cmps && !found; j++) {
            found = a->cmps[i].index == b->cmps[j].index && a->cmps[i].op == b->cmps[j].op &&
                    a->cmps[i].value == b->cmps[j].value && a->cmps[i].mask == b->cmps[j].mask;
        }
        if (!found) {
            return false;
        }
    }
    return true;
}

/* libseccomp keeps the first of two rules for a syscall when one has no comparisons or both
 * have the same, whatever their actions, and says nothing: such profiles are refused here so
 * that what a file says is what the filter does. */
static int check_conflicts(const char *file, const struct profile *p, struct err *e)
{
    for (size_t i = 1; i < p->n; i++) {
        const struct rule *b = &p->rules[i];
        for (size_t j = 0; j < i; j++) {
            const struct rule *a = &p->rules[j];
            if (a->nr != b->nr) {
                continue;
            }
            if (a->n_cmps == 0 || b->n_cmps == 0) {
                return fail(e, file, b->m,
                            "'%s' already has a rule at %zu:%zu; a rule without args must be "
                            "its only rule",
                            b->name, a->m.line, a->m.col);
            }
            if (cmps_equal(a, b)) {
                return fail(e, file, b->m, "'%s' already has a rule with the same args at %zu:%zu",
                            b->name, a->m.line, a->m.col);
            }
        }
    }
    return 0;
}

/* Counted errno denials of a counting program go through libseccomp as SCMP_ACT_TRACE with
 * the errno as data (libseccomp takes no data with SCMP_ACT_NOTIFY), and are rewritten to
 * SECCOMP_RET_USER_NOTIF | errno in the exported BPF. No profile can ask for TRACE. */
static uint32_t scmp_action(struct verdict v, bool notify)
{
    switch (v.act) {
    case ACT_ALLOW:
        return SCMP_ACT_ALLOW;
    case ACT_LOG:
        return SCMP_ACT_LOG;
    case ACT_KILL:
        return SCMP_ACT_KILL_PROCESS;
    case ACT_ERRNO:
        break;
    }
    return notify && v.counted ? SCMP_ACT_TRACE((uint32_t)v.err) : SCMP_ACT_ERRNO((uint32_t)v.err);
}

static void ctx_releasep(scmp_filter_ctx *ctx)
{
    if (*ctx) {
        seccomp_release(*ctx);
    }
}

/* Builds the libseccomp filter of a merged profile. Only the native architecture: calls
 * from any other ABI (int 0x80's x86, or x32 numbers with __X32_SYSCALL_BIT, which
 * libseccomp checks for on x86_64) kill the process. */
static int build_ctx(const char *file, const struct profile *p, bool notify, scmp_filter_ctx *ret,
                     struct err *e)
{
    uint32_t def = scmp_action(p->def, notify);
    scoped(ctx_releasep) scmp_filter_ctx ctx = seccomp_init(def);
    int r;

    if (!ctx) {
        return err_setx(e, -EINVAL, "%s: libseccomp refused the default action", file);
    }
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r == 0) {
        /* init sets no_new_privs itself; the filter is only exported here. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    }
    if (r == 0) {
        /* A binary search over syscall numbers instead of a linear list. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    }
    if (r < 0) {
        return err_set(e, r, "%s: libseccomp attributes", file);
    }
    for (size_t i = 0; i < p->n; i++) {
        const struct rule *rule = &p->rules[i];
        uint32_t act = scmp_action(rule->v, notify);
        struct scmp_arg_cmp cmps[ARGS_MAX];
        if (act == def) {
            continue; /* the default does it; libseccomp refuses such rules */
        }
        for (unsigned j = 0; j < rule->n_cmps; j++) {
            const struct cmp *c = &rule->cmps[j];
            cmps[j] = (struct scmp_arg_cmp){c->index, c->op,
                                            c->op == SCMP_CMP_MASKED_EQ ? c->mask : c->value,
                                            c->op == SCMP_CMP_MASKED_EQ ? c->value : 0};
        }
        r = seccomp_rule_add_exact_array(ctx, act, rule->nr, rule->n_cmps, cmps);
        if (r < 0) {
            return seccomp_profile_failr(e, r, file, rule->m,
                                         "libseccomp refused the rule for '%s': %s", rule->name,
                                         err_name(r));
        }
    }
    *ret = take_ptr(&ctx);
    return 0;
}

/* Exports ctx's BPF through a memfd (libseccomp 2.5 has no in-memory export). */
static int export_bpf(const char *file, scmp_filter_ctx ctx, bool notify, struct sock_filter **ret,
                      uint32_t *ret_n, struct err *e)
{
    scoped_close int fd = memfd_create("sbxd-seccomp", MFD_CLOEXEC);
    struct stat st;

    if (fd < 0) {
        return err_set(e, -errno, "%s: memfd_create", file);
    }
    int r = seccomp_export_bpf(ctx, fd);
    if (r < 0) {
        return err_set(e, r, "%s: libseccomp export", file);
    }
    if (fstat(fd, &st) < 0) {
        return err_set(e, -errno, "%s: fstat of the exported program", file);
    }
    size_t size = (size_t)st.st_size;
    if (size == 0 || size % sizeof(struct sock_filter) != 0) {
        return err_setx(e, -EIO, "%s: libseccomp exported %zu bytes", file, size);
    }
    if (size / sizeof(struct sock_filter) > CTL_SECCOMP_MAX_INSNS) {
        return err_setx(e, -EFBIG, "%s: the program has %zu instructions, more than %d", file,
                        size / sizeof(struct sock_filter), CTL_SECCOMP_MAX_INSNS);
    }
    scoped_free struct sock_filter *insns = xmalloc(size);
    size_t off = 0;
    while (off < size) {
        ssize_t n = RETRY_EINTR(pread(fd, (char *)insns + off, size - off, (off_t)off));
        if (n < 0) {
            return err_set(e, -errno, "%s: reading the exported program", file);
        }
        if (n == 0) {
            return err_setx(e, -EIO, "%s: the exported program is short", file);
        }
        off += (size_t)n;
    }
    uint32_t count = (uint32_t)(size / sizeof(struct sock_filter));
    for (uint32_t i = 0; i < count; i++) {
        struct sock_filter *f = &insns[i];
        if (f->code == (BPF_RET | BPF_K) && (f->k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_TRACE) {
            assert(notify); /* only counting programs have placeholders */
            f->k = SECCOMP_RET_USER_NOTIF | (f->k & SECCOMP_RET_DATA);
        }
    }
    *ret = take_ptr(&insns);
    *ret_n = count;
    return 0;
}

static bool profile_counts(const struct profile *p, unsigned form)
{
    if (!p->count || form == SECCOMP_COMPILE_PLAIN) {
        return false;
    }
    /* API level 5: the kernel has SECCOMP_RET_USER_NOTIF and FILTER_FLAG_NEW_LISTENER. */
    return form == SECCOMP_COMPILE_NOTIFY || seccomp_api_get() >= 5;
}

/* Parses and merges a profile, then builds its libseccomp filter. */
static int profile_ctx(const char *file, const char *text, size_t len, unsigned flags,
                       scmp_filter_ctx *ret, bool *ret_notify, struct err *e)
{
    scoped(seccomp_profile_done) struct profile parsed = {{ACT_ALLOW, 0, true}, true, NULL, 0, 0};
    scoped(seccomp_profile_done) struct profile merged = {{ACT_ALLOW, 0, true}, true, NULL, 0, 0};

    unsigned form = flags & ~(unsigned)SECCOMP_COMPILE_DENY_MEMFD;
    if (form > SECCOMP_COMPILE_NOTIFY) {
        return err_setx(e, -EINVAL, "%s: bad compile flags %u", file, flags);
    }
    bool deny_memfd = (flags & SECCOMP_COMPILE_DENY_MEMFD) ||
                      (form == SECCOMP_COMPILE_AUTO && seccomp_memfd_noexec_fd() < 0);
    int r = seccomp_profile_parse(file, text, len, &parsed, e);
    if (r == 0) {
        r = check_conflicts(file, &parsed, e);
    }
    if (r == 0) {
        r = seccomp_denied_merge(file, &parsed, deny_memfd, &merged, e);
    }
    if (r < 0) {
        return r;
    }
    bool notify = profile_counts(&merged, form);
    r = build_ctx(file, &merged, notify, ret, e);
    if (r == 0) {
        *ret_notify = notify;
    }
    return r;
}

static void *mfree(void *p)
{
    free(p);
    return NULL;
}

/* Between installing a counting filter and handing the listener over, the task makes one
 * call: sendmsg on its socket to init (flags 0). Were that call a notification, nobody could
 * answer it yet and the task would hang, so it must be allowed. */
static bool handover_allowed(const struct sock_filter *insns, uint32_t n)
{
    struct seccomp_data d;
    uint32_t v = 0;
    memset(&d, 0, sizeof(d));
    d.arch = seccomp_arch_native();
    d.nr = seccomp_syscall_resolve_name("sendmsg");
    if (bpf_eval(insns, n, &d, &v) < 0) {
        return false;
    }
    v &= SECCOMP_RET_ACTION_FULL;
    return v == SECCOMP_RET_ALLOW || v == SECCOMP_RET_LOG;
}

int seccomp_compile_prog(const char *file, const char *text, size_t len, unsigned flags,
                         struct prog *ret, struct err *e)
{
    scoped(ctx_releasep) scmp_filter_ctx ctx = NULL;
    bool notify = false;

    int r = profile_ctx(file, text, len, flags, &ctx, &notify, e);
    if (r < 0) {
        return r;
    }
    r = export_bpf(file, ctx, notify, &ret->insns, &ret->n, e);
    if (r < 0) {
        return r;
    }
    if (notify && !handover_allowed(ret->insns, ret->n)) {
        ret->insns = mfree(ret->insns);
        return err_setx(e, -EINVAL,
                        "%s: with count_denials, 'sendmsg' must be allowed: the task hands its "
                        "seccomp listener to sbxd-init with it after the filter is on",
                        file);
    }
    ret->name = seccomp_profile_name(file);
    log_debug("file=%s profile=%s insns=%u count_denials=%s", file, ret->name, ret->n,
              notify ? "true" : "false");
    return 0;
}

int seccomp_compile_pfc(const char *file, const char *text, size_t len, unsigned flags, int fd,
                        struct err *e)
{
    scoped(ctx_releasep) scmp_filter_ctx ctx = NULL;
    bool notify = false;

    int r = profile_ctx(file, text, len, flags, &ctx, &notify, e);
    if (r < 0) {
        return r;
    }
    r = seccomp_export_pfc(ctx, fd);
    if (r < 0) {
        return err_set(e, r, "%s: libseccomp PFC export", file);
    }
    return 0;
}
