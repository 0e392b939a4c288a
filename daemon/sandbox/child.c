/* SPDX-License-Identifier: MIT */
/* The child side of sandbox creation: wait for the parent, arrange fds and signals, exec
 * sbxd-init. CHILD-SAFE only: it shares the parent's memory and TLS (CLONE_VM), so it
 * never allocates, logs, touches errno or writes anything but its own stack. */
#include "sandbox/child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>

#include "wire/ctl.h"
#include "lib/sys.h"

static int child_fail(const struct child_plan *p, int stage, int err)
{
    struct child_report rep = {stage, err};
    ssize_t n;
    do {
        n = sys_write(p->report_wfd, &rep, sizeof(rep));
    } while (n == -EINTR);
    return 127;
}

/* Leaves exactly CTL_FD (the control socket, inherited by init) and the report pipe
 * (CLOEXEC, closed by a successful exec). Returns 0 or -errno. */
static int child_arrange_fds(struct child_plan *p)
{
    int rfd = p->report_wfd;
    int r;

    /* The report fd must survive the close_range below, so it must sit above CTL_FD. */
    if (rfd <= CTL_FD) {
        rfd = sys_fcntl(rfd, F_DUPFD_CLOEXEC, CTL_FD + 1);
        if (rfd < 0) {
            return rfd;
        }
        p->report_wfd = rfd;
    }
    if (p->ctl_fd == CTL_FD) {
        r = sys_fcntl(CTL_FD, F_SETFD, 0);
    } else {
        r = sys_dup3(p->ctl_fd, CTL_FD, 0);
    }
    if (r < 0) {
        return r;
    }
    r = sys_close_range(0, CTL_FD - 1, 0);
    if (r == 0 && rfd > CTL_FD + 1) {
        r = sys_close_range(CTL_FD + 1, (unsigned)rfd - 1, 0);
    }
    if (r == 0) {
        r = sys_close_range((unsigned)rfd + 1, ~0U, 0);
    }
    return r;
}

/* All zero: the empty signal set. Read-only, so sharing it with the parent is harmless. */
static const sigset_t child_empty_set;

int child_run(void *arg)
{
    /* A copy on our own stack: the plan itself belongs to the parent and stays unchanged. */
    struct child_plan plan = *(const struct child_plan *)arg;
    struct child_plan *p = &plan;
    char go = 0;
    ssize_t n;

    /* Our copy of the parent's end would hide the EOF that says the parent gave up. */
    (void)sys_close(p->sync_wfd);
    do {
        n = sys_read(p->sync_rfd, &go, 1);
    } while (n == -EINTR);
    if (n != 1 || go != CHILD_GO) {
        return child_fail(p, CHILD_STAGE_SYNC, n < 0 ? (int)n : -EPIPE);
    }
    int r = 0;
    if (p->become_root) {
        /* We still hold the host's ids, which the new namespace does not map: exec would
         * find an unmapped, capability-less user. SECURITY: the host groups (root's) go
         * too, or init would keep group access to the host's root-group files. */
        r = sys_setgroups_empty();
        if (r == 0) {
            r = sys_setresgid(0, 0, 0);
        }
        if (r == 0) {
            r = sys_setresuid(0, 0, 0);
        }
        if (r < 0) {
            return child_fail(p, CHILD_STAGE_IDS, r);
        }
    }
    r = child_arrange_fds(p);
    if (r < 0) {
        return child_fail(p, CHILD_STAGE_FDS, r);
    }
    /* Handlers first, mask second: the parent blocked every signal around clone, and a
     * handler of the daemon must never run here. Ignored signals are reset too, so init
     * does not inherit the daemon's SIG_IGN for SIGPIPE. */
    for (int sig = 1; sig < _NSIG; sig++) {
        if (sig != SIGKILL && sig != SIGSTOP) {
            (void)sys_signal_default(sig);
        }
    }
    r = sys_sigprocmask(SIG_SETMASK, &child_empty_set, NULL);
    if (r < 0) {
        return child_fail(p, CHILD_STAGE_SIGNALS, r);
    }
    r = sys_execve(p->path, p->argv, p->envp);
    return child_fail(p, CHILD_STAGE_EXEC, r);
}

const char *child_stage_name(int stage)
{
    switch (stage) {
    case CHILD_STAGE_SYNC:
        return "sync";
    case CHILD_STAGE_IDS:
        return "ids";
    case CHILD_STAGE_FDS:
        return "fds";
    case CHILD_STAGE_SIGNALS:
        return "signals";
    case CHILD_STAGE_EXEC:
        return "execve";
    default:
        return "unknown stage";
    }
}
