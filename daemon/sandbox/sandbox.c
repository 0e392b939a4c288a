/* SPDX-License-Identifier: MIT */
/* A sandbox's life: created on a worker thread (cgroup, clone3, CTL_SETUP), WARM when its
 * init reports READY, BUSY with one task, then killed through its pidfd, reaped through
 * the pidfd, and its cgroup emptied on a worker thread: reset for the pool's next sandbox
 * (kit.h: spare cgroups) or removed. A session's sandbox (HELD) serves its tasks one at a
 * time, each CTL_TASK_KEEP, until it is killed; it never goes back to a pool. */
#define LOG_MOD "sandbox"
#include "sandbox/sandbox.h"

#include <assert.h>
#include <linux/filter.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "sandbox/cgroup.h"
#include "config/config.h"
#include "sandbox/idslot.h"
#include "sandbox/image.h"
#include "sandbox/kit.h"
#include "lib/log.h"
#include "sandbox/netns.h"
#include "sandbox/spawn.h"
#include "sandbox/task_spec.h"
#include "lib/sys.h"
#include "lib/util.h"
#include "lib/workq.h"
#include "sandbox/forkserver.h"

const char *sandbox_state_name(enum sandbox_state s)
{
    static const char *const names[] = {"creating", "warm", "busy", "held", "dying", "dead"};
    return s <= SB_DEAD ? names[s] : "?";
}

static void set_state(struct sandbox *sb, enum sandbox_state to)
{
    if (sb->state == to) {
        return;
    }
    enum sandbox_state from = sb->state;
    sb->state = to;
    sb->ops->state(sb->owner, sb, from, to);
}

/* Sends CTL_SETUP, with the image's root attached (SCM_RIGHTS) when image_fd >= 0. */
static ssize_t send_setup(int fd, const void *buf, size_t len, int image_fd)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    return fd_sendmsg(fd, &iov, 1, &image_fd, image_fd >= 0 ? 1 : 0, MSG_NOSIGNAL);
}

/* init leads its own process group (setsid, or setpgid when the fork server made it), which
 * its task child, cloned ahead, stays in until its task arrives: PRIO_PGRP reaches both. */
static void set_nice(struct sandbox *sb, int nice)
{
    if (sb->pid > 0 && setpriority(PRIO_PGRP, (id_t)sb->pid, nice) < 0 && errno != ESRCH) {
        log_warn_errno(-errno, "sb=%s msg=\"cannot set init's nice value to %d\"", sb->id, nice);
    }
}

/* A pool's sandboxes share their host name: "sbx-" and the pool's name. Each has a uts
 * namespace of its own, and the name is in the fork server's template (/etc/hosts and
 * /etc/hostname), so no sandbox needs a mount for them; nor does the name tell a task
 * anything about other sandboxes (an id would count the daemon's sandboxes). */
static void sandbox_hostname(const char *pool, char *buf, size_t size)
{
    (void)snprintf(buf, size, "sbx-%s", pool);
    for (char *c = buf; *c; c++) {
        if (*c == '_') {
            *c = '-'; /* pool names may have one, host names may not */
        }
    }
}

/* Where sb's init goes: its cgroup, network namespace and id maps; ctl_fd its end of the
 * control socket. */
static void sandbox_plan(const struct sandbox *sb, int ctl_fd, struct spawn_plan *plan)
{
    const struct sandbox_env *env = sb->kit->env;
    *plan = (struct spawn_plan){
        .init_path = env->init_path,
        .userns = env->cfg->userns,
        .host_id_base = sb->has_ids ? idslot_base(env->ids, sb->ids) : 0,
        .id_count = env->cfg->userns_count,
        .cg = sb->cg,
        .ctl_fd = ctl_fd,
        .join_netns = sb->netns.fd >= 0,
        .netns_fd = sb->netns.fd,
    };
}

/* sb's CTL_SETUP, the pool's seccomp program after it: *len bytes, the caller's to free. */
static char *setup_message(const struct sandbox *sb, const char *image_root, size_t *len)
{
    const struct config *cfg = sb->kit->env->cfg;
    const struct pool_config *pc = sb->kit->pc;
    size_t insns = sb->kit->bpf ? sb->kit->bpf_n : 0;
    *len = sizeof(struct ctl_setup) + insns * sizeof(struct sock_filter);
    char *buf = xcalloc(1, *len);
    struct ctl_setup *s = (struct ctl_setup *)buf;
    s->magic = CTL_MAGIC;
    s->type = CTL_SETUP;
    s->uid = pc->uid;
    s->gid = pc->gid;
    s->flags = (pc->dev_shm ? CTL_SETUP_DEV_SHM : 0) | (sb->netns.fd >= 0 ? CTL_SETUP_LO_UP : 0);
    s->seccomp_insns = (uint32_t)insns;
    s->tmp_size = pc->tmp_size;
    s->work_size = pc->work_size;
    s->shm_size = pc->shm_size;
    s->proxy_port = cfg->n_egress_profiles > 0 ? cfg->egress_port : 0;
    sandbox_hostname(pc->name, s->hostname, sizeof(s->hostname));
    str_copy(s->image_root, image_root, sizeof(s->image_root));
    if (insns > 0) {
        memcpy(buf + sizeof(*s), sb->kit->bpf, insns * sizeof(struct sock_filter));
    }
    return buf;
}

/* Worker thread: everything that blocks. Touches only sb's own fields and read-only
 * daemon state (config, cgroup root fds, init path, seccomp program). */
static void create_work(struct workq_job *w)
{
    struct sandbox *sb = container_of(w, struct sandbox, job);
    const struct sandbox_env *env = sb->kit->env;
    struct err *e = &sb->work_err;
    int r;

    /* The pool's verified image goes to init as an fd: init runs as an unmapped host id and
     * could not reach it by path below the daemon's private state dir. A refused image
     * fails the creation here, with its reason. A fork server holds it already: a copy
     * of its tree is made only for a sandbox made from scratch (below). */
    scoped_close int image_fd = -1;
    const char *image_root = "/";
    struct forkserver *forkserver = sb->kit->forkserver;
    r = image_sandbox_root(sb->kit->image, forkserver ? NULL : &image_fd, &image_root, e);
    if (r < 0) {
        sb->work_r = r;
        return;
    }
    if (!sb->cg) {
        r = cgroup_create(env->cg_root, sb->id, &sb->kit->limits, &sb->cg, e);
        if (r < 0) {
            sb->work_r = r;
            return;
        }
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        sb->work_r = err_set(e, -errno, "socketpair");
        return;
    }
    scoped_close int child_end = sv[1];
    sb->ctl_fd = sv[0];

    if (env->netns && sb->netns.fd < 0) { /* the loop may have taken one already */
        r = netns_acquire(env->netns, &sb->netns, e);
        if (r < 0) {
            sb->work_r = r;
            return;
        }
    }
    struct spawn_plan plan;
    sandbox_plan(sb, child_end, &plan);
    size_t len;
    scoped_free char *buf = setup_message(sb, image_root, &len);
    struct ctl_setup *s = (struct ctl_setup *)buf;
    /* From the pool's fork server when it runs (or can be started); the image is in its
     * template then. Else from scratch, the image's tree going to this init. */
    struct spawn_result res;
    r = forkserver ? forkserver_spawn(forkserver, &plan, s, sb->kit->image, &res, e) : -EAGAIN;
    if (r == -EAGAIN) {
        /* From scratch: this init gets the image's tree. */
        r = forkserver ? image_sandbox_root(sb->kit->image, &image_fd, &image_root, e) : 0;
        if (r == 0) {
            r = spawn_sandbox(&plan, &res, e);
        }
    }
    if (r < 0) {
        sb->work_r = r;
        return;
    }
    sb->pid = res.pid;
    sb->pidfd = res.pidfd;
    if (image_fd >= 0) {
        s->flags |= CTL_SETUP_IMAGE_FD;
    }
    ssize_t n = send_setup(sb->ctl_fd, buf, len, image_fd);
    if (n < 0) {
        sb->work_r = err_set(e, (int)n, "send CTL_SETUP");
        return;
    }
    sb->work_r = 0;
}

static void sandbox_remove_cgroup(struct sandbox *sb);

static void handle_closed(uv_handle_t *h)
{
    struct sandbox *sb = h->data;
    if (--sb->open_handles > 0) {
        return;
    }
    /* Every handle is closed: the cgroup goes on a worker thread. */
    sandbox_remove_cgroup(sb);
}

static void sandbox_free(struct sandbox *sb)
{
    struct sandbox_env *env = sb->kit->env;
    const struct sandbox_ops *ops = sb->ops;
    void *owner = sb->owner;
    sb->cg = cgroup_free(sb->cg);
    sb->ctl_fd = fd_close(sb->ctl_fd);
    sb->proxy_fd = fd_close(sb->proxy_fd);
    sb->work_fd = fd_close(sb->work_fd);
    sb->pidfd = fd_close(sb->pidfd);
    netns_ref_close(&sb->netns); /* remove_work gives it back; else unused */
    if (sb->has_ids) {
        /* Every process that ran with them is gone: init is reaped, its cgroup empty. */
        idslot_put(env->ids, sb->ids);
    }
    set_state(sb, SB_DEAD);
    if (!sb->cg_kept) {
        env->untrack(env->track_arg, sb->cg_name);
    }
    free(sb);
    ops->freed(owner); /* it no longer counts at all; may start the next ones */
}

/* One pass over the dead sandbox's cgroup: reset for the pool's next sandbox when a spare
 * is reserved (and the kernel can), else removed when remove is true. Returns 0, -EBUSY
 * while processes remain in it (v1 may take a moment to drop the dead tasks), -EAGAIN when
 * it is to be removed and remove is false, or another -errno (with work_err). */
static int empty_cgroup_once(struct sandbox *sb, bool remove)
{
    if (!cgroup_is_empty(sb->cg)) {
        return -EBUSY;
    }
    if (sb->cg_reserved && !sb->cg_reset_failed) {
        if (cgroup_reset(sb->cg, &sb->work_err) == 0) {
            sb->cg_reset_ok = true;
            return 0;
        }
        log_debug("sb=%s msg=\"cgroup not reused\" detail=\"%s\"", sb->id, err_msg(&sb->work_err));
        sb->cg_reset_failed = true; /* the worker that removes it tries no more */
    }
    /* Not reusable (the kernel cannot reset its peak, or an earlier sandbox's page cache
     * stays charged to it): removed as usual. */
    sb->work_err.msg[0] = '\0';
    return remove ? cgroup_remove(sb->cg, &sb->work_err) : -EAGAIN;
}

/* Worker, when the loop's one try found the cgroup busy: waits for it to empty (and then
 * kills whatever remains: it can only be ours, being below our own subtree). */
static void empty_cgroup(struct sandbox *sb)
{
    int r = -EBUSY;
    for (int i = 0; i < 2000 && r == -EBUSY; i++) {
        if (i == 50 && !cgroup_is_empty(sb->cg)) {
            (void)cgroup_kill_all(sb->cg);
        }
        r = empty_cgroup_once(sb, true);
        if (r == -EBUSY) {
            usleep(1000);
        }
    }
    sb->work_r = r;
}

/* The network namespace goes back to the pool (after its sockstat check), after every fd of
 * the sandbox is closed so that nothing of ours counts as left in it. */
static void release_netns(struct sandbox *sb)
{
    if (sb->netns.fd >= 0) {
        netns_release(sb->kit->env->netns, &sb->netns);
    }
}

static void remove_work(struct workq_job *w)
{
    struct sandbox *sb = container_of(w, struct sandbox, job);
    empty_cgroup(sb);
    release_netns(sb);
}

static void remove_done(struct workq_job *w)
{
    struct sandbox *sb = container_of(w, struct sandbox, job);
    if (sb->cg && sb->work_r < 0) {
        log_error("sb=%s msg=\"cgroup not removed, leaking it\" detail=\"%s\"", sb->id,
                  err_msg(&sb->work_err));
        if (sb->work_r == -EBUSY && sb->has_ids) {
            /* Something of it still runs with its host ids: no other sandbox gets them. */
            log_error("sb=%s msg=\"its block of host ids stays held\"", sb->id);
            sb->has_ids = false;
        }
    }
    if (sb->cg_reserved) {
        /* Kept even when a drain began since: kit_free removes the spares. */
        sb->cg_kept = sb->cg_reset_ok;
        kit_put_cgroup(sb->kit, sb->cg_kept ? take_ptr(&sb->cg) : NULL);
    }
    sandbox_free(sb);
}

static void sandbox_remove_cgroup(struct sandbox *sb)
{
    /* Every handle is closed: nothing polls these any more, and the namespace check in
     * remove_work must not count them. The workspace goes too: its tmpfs's pages are
     * charged to the cgroup, which could not be reset while they stay. */
    sb->ctl_fd = fd_close(sb->ctl_fd);
    sb->proxy_fd = fd_close(sb->proxy_fd);
    sb->work_fd = fd_close(sb->work_fd);
    sb->work_err.msg[0] = '\0';
    sb->cg_reserved = sb->cg && kit_reserve_spare(sb->kit);
    /* Once init is reaped its pid namespace is empty, so the cgroup nearly always is too:
     * the loop resets it for the pool's next sandbox at once (a read and two writes of open
     * files), which spares the two wake-ups of a worker's job. A cgroup still busy, or one
     * to remove (the pool keeps its max of spares, or the kernel cannot reset it), goes to
     * a worker: an rmdir takes the kernel's cgroup mutex, which a v1 attach elsewhere may
     * hold for an RCU grace period. */
    sb->work_r = sb->cg ? empty_cgroup_once(sb, false) : 0;
    if (sb->work_r == -EBUSY || sb->work_r == -EAGAIN) {
        if (sb->work_r == -EBUSY) {
            log_debug("sb=%s msg=\"cgroup still busy, emptied on a worker\"", sb->id);
        }
        workq_submit(sb->kit->env->workq, &sb->job, remove_work, remove_done);
        return;
    }
    release_netns(sb);
    remove_done(&sb->job);
}

/* init is gone (reaped): close handles; the task learns it. */
static void sandbox_reaped(struct sandbox *sb)
{
    if (sb->state == SB_WARM) {
        sb->ops->unwarm(sb->owner, sb);
        log_warn("pool=%s sb=%s msg=\"warm sandbox died, replacing it\"", sb->kit->pc->name,
                 sb->id);
    }
    /* A sandbox that died before READY for any reason of its own (init crashed, spoke a
     * protocol we do not understand, ...) is a failed creation: it must feed the pool's
     * backoff, or a broken init would be respawned as fast as the CPU allows. */
    if (!sb->ready_seen && !sb->failure_reported && !sb->kit->draining) {
        struct err e = ERR_INIT;
        err_setx(&e, -EIO, "sandbox init exited during setup");
        sb->ops->failed(sb->owner, sb, &e);
    }
    set_state(sb, SB_DEAD);
    const struct sandbox_task_ops *tops = sb->task_ops;
    sb->task_ops = NULL;
    if (tops) {
        tops->died(sb->task);
    }
    sandbox_died_cb hold_died = sb->hold_died;
    sb->hold_died = NULL;
    if (hold_died) {
        hold_died(sb->holder, sb);
    }
    uv_close((uv_handle_t *)&sb->ctl_poll, handle_closed);
    uv_close((uv_handle_t *)&sb->pid_poll, handle_closed);
    uv_close((uv_handle_t *)&sb->setup_timer, handle_closed);
}

static void ctl_cb(uv_poll_t *h, int status, int events);

static void pid_cb(uv_poll_t *h, int status, int events)
{
    struct sandbox *sb = h->data;
    (void)events;
    if (sb->reaped) {
        return;
    }
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    int r = RETRY_EINTR(waitid(P_PIDFD, (id_t)sb->pidfd, &si, WEXITED | WNOHANG));
    if (r < 0 && errno != ECHILD) {
        log_warn_errno(-errno, "sb=%s msg=\"waitid on pidfd failed\"", sb->id);
        return;
    }
    if (r == 0 && si.si_pid == 0 && status >= 0) {
        return; /* spurious: not exited yet */
    }
    /* init exits by itself after its task's last report (CTL_EXITED, CTL_EXEC_FAILED): read
     * what it sent before its death, which this callback may see first. (Any other death is
     * reported as before: a warm sandbox's, say, is logged by sandbox_reaped.) */
    if (sb->task_ops && uv_is_active((uv_handle_t *)&sb->ctl_poll)) {
        ctl_cb(&sb->ctl_poll, 0, UV_READABLE);
        if (sb->reaped) {
            return;
        }
    }
    sb->reaped = true;
    sandbox_reaped(sb); /* closes both polls (a stop first would cost an epoll_ctl each) */
}

/* An init that never answers its setup would hold a place in its pool for ever: it counts
 * as a failed creation (with the pool's backoff) and is killed. */
static void setup_timeout(uv_timer_t *h)
{
    struct sandbox *sb = h->data;
    if (sb->ready_seen || sb->reaped || sb->state != SB_CREATING) {
        return;
    }
    struct err e = ERR_INIT;
    err_setx(&e, -ETIMEDOUT, "sandbox init did not finish its setup within %d ms",
             SANDBOX_SETUP_TIMEOUT_MS);
    sb->ops->failed(sb->owner, sb, &e);
    sb->failure_reported = true;
    sandbox_kill(sb);
}

/* A kept task's report: the task hears it detached, and the sandbox waits for its holder's
 * next task (HELD) in the task child init cloned for it, or ends when init could not. */
static void kept_task_ended(struct sandbox *sb, const struct ctl_event *ev)
{
    const struct sandbox_task_ops *tops = sb->task_ops;
    void *task = sb->task;
    sandbox_detach_task(sb);
    sb->task_keep = false;
    if (ev->next_pid != 0) {
        sb->task_pid = ev->next_pid;
        set_state(sb, SB_HELD);
    } else {
        log_warn("sb=%s msg=\"init has no process for a next task, destroying sandbox\"", sb->id);
        sandbox_kill(sb);
    }
    if (tops) {
        tops->event(task, ev);
    }
}

static void handle_event(struct sandbox *sb, const struct ctl_event *ev)
{
    switch (ev->type) {
    case CTL_READY: {
        if (sb->state != SB_CREATING || sb->ready_seen) {
            break;
        }
        sb->ready_seen = true;
        sb->ready_ns = clock_now_ns();
        sb->task_pid = ev->pid;
        uv_timer_stop(&sb->setup_timer);
        struct err e = ERR_INIT;
        if (sandbox_work_check(sb, &e) < 0) {
            sb->ops->failed(sb->owner, sb, &e);
            sb->failure_reported = true;
            sandbox_kill(sb);
            break;
        }
        sb->have_usage_base = sb->cg && cgroup_usage(sb->cg, &sb->usage_base) == 0;
        if (sb->kill_requested || sb->kit->draining) {
            sandbox_kill(sb);
            break;
        }
        set_nice(sb, 0);
        set_state(sb, SB_WARM);
        sb->ops->ready(sb->owner, sb);
        break;
    }
    case CTL_SETUP_FAILED: {
        struct err e = ERR_INIT;
        char what[48];
        (void)snprintf(what, sizeof(what), "sandbox setup failed at stage %u", ev->stage);
        err_set_reported(&e, ev->err < 0 ? ev->err : -EIO, what, ev->msg);
        sb->ops->failed(sb->owner, sb, &e);
        sb->failure_reported = true;
        sandbox_kill(sb);
        break;
    }
    case CTL_EXITED:
    case CTL_EXEC_FAILED:
        if (sb->state == SB_BUSY && sb->task_keep) {
            kept_task_ended(sb, ev);
        } else if (sb->task_ops) {
            sb->task_ops->event(sb->task, ev);
        }
        break;
    default:
        log_warn("sb=%s type=%u msg=\"unknown control event, killing sandbox\"", sb->id, ev->type);
        sandbox_kill(sb);
        break;
    }
}

static void ctl_cb(uv_poll_t *h, int status, int events)
{
    struct sandbox *sb = h->data;
    (void)events;
    if (status < 0) {
        uv_poll_stop(h);
        sandbox_kill(sb);
        return;
    }
    for (;;) {
        struct ctl_event ev;
        int fds[2] = {-1, -1};
        size_t got = 0;
        bool bad = false;
        ssize_t n = fd_recv(sb->ctl_fd, &ev, sizeof(ev), fds, 2, &got, &bad, MSG_DONTWAIT);
        if (got > 0 && n == (ssize_t)sizeof(ev) && ev.magic == CTL_MAGIC && ev.type == CTL_READY &&
            sb->work_fd < 0 && !sb->ready_seen) {
            /* The workspace's root (checked with the event), then the egress proxy's
             * listener (egress.c). */
            sb->work_fd = take_fd(&fds[0]);
            sb->proxy_fd = take_fd(&fds[1]);
        }
        fds[0] = fd_close(fds[0]);
        fds[1] = fd_close(fds[1]);
        if (n < 0) {
            if (n == -EAGAIN || n == -EINTR) {
                return;
            }
            n = 0;
        }
        if (n == 0) {
            /* init closed its end: it is dying. The pidfd tells when it is gone. */
            uv_poll_stop(h);
            sandbox_kill(sb);
            return;
        }
        if ((size_t)n != sizeof(ev) || ev.magic != CTL_MAGIC) {
            log_warn("sb=%s msg=\"malformed control event, killing sandbox\"", sb->id);
            uv_poll_stop(h);
            sandbox_kill(sb);
            return;
        }
        ctl_event_clean(&ev);
        bool kept = sb->state == SB_BUSY && sb->task_keep;
        handle_event(sb, &ev);
        if (sb->reaped) {
            return;
        }
        if ((ev.type == CTL_EXITED || ev.type == CTL_EXEC_FAILED) && !kept) {
            /* The last event: init is exiting or being killed, and only its EOF could
             * follow, which pid_cb's reaping makes moot. Not polling for it saves a callback
             * (a recvmsg and an epoll_ctl) per task. A kept sandbox's init goes on. */
            uv_poll_stop(h);
            return;
        }
    }
}

static void create_done(struct workq_job *w)
{
    struct sandbox *sb = container_of(w, struct sandbox, job);
    const struct sandbox_env *env = sb->kit->env;
    if (sb->work_r < 0) {
        sb->ops->created(sb->owner, sb, false);
        sb->ops->failed(sb->owner, sb, &sb->work_err);
        set_state(sb, SB_DEAD);
        if (sb->pidfd >= 0) {
            (void)sys_pidfd_send_signal(sb->pidfd, SIGKILL);
            siginfo_t si;
            (void)RETRY_EINTR(waitid(P_PIDFD, (id_t)sb->pidfd, &si, WEXITED));
        }
        sandbox_remove_cgroup(sb);
        return;
    }
    (void)fd_set_nonblock(sb->ctl_fd, true);
    uv_poll_init(env->loop, &sb->ctl_poll, sb->ctl_fd);
    uv_poll_init(env->loop, &sb->pid_poll, sb->pidfd);
    uv_timer_init(env->loop, &sb->setup_timer);
    sb->ctl_poll.data = sb;
    sb->pid_poll.data = sb;
    sb->setup_timer.data = sb;
    sb->open_handles = 3;
    uv_poll_start(&sb->ctl_poll, UV_READABLE, ctl_cb);
    uv_poll_start(&sb->pid_poll, UV_READABLE, pid_cb);
    uv_timer_start(&sb->setup_timer, setup_timeout, SANDBOX_SETUP_TIMEOUT_MS, 0);
    if (sb->kill_requested || sb->kit->draining) {
        sandbox_kill(sb);
    }
    sb->ops->created(sb->owner, sb, true);
}

/* The fork server's sandbox is placed (or the request failed): CTL_SETUP goes to it, and
 * the creation ends as a worker's would. */
static void spawned(struct forkserver_req *req, int r, const struct spawn_result *res,
                    const struct err *e)
{
    struct sandbox *sb = container_of(req, struct sandbox, zreq);
    if (r == 0) {
        sb->pid = res->pid;
        sb->pidfd = res->pidfd;
        ssize_t n = send_setup(sb->ctl_fd, sb->setup_msg, sb->setup_len, -1);
        r = n < 0 ? err_set(&sb->work_err, (int)n, "send CTL_SETUP") : 0;
    } else {
        sb->work_err = *e;
    }
    sb->work_r = r;
    free(sb->setup_msg);
    sb->setup_msg = NULL;
    create_done(&sb->job);
}

/* Loop: asks the pool's running fork server for the sandbox, when everything else it needs
 * is at hand (a spare cgroup, a kept network namespace): no worker's job, and its two
 * wake-ups, per sandbox. Returns 0 when asked (spawned finishes), else -EAGAIN: a worker
 * makes it (a network namespace taken here stays the sandbox's). */
static int create_async(struct sandbox *sb)
{
    struct sandbox_env *env = sb->kit->env;
    struct forkserver *z = sb->kit->forkserver;
    const char *image_root = "/";
    if (!z || !sb->cg || image_sandbox_root(sb->kit->image, NULL, &image_root, NULL) < 0) {
        return -EAGAIN; /* a refused image: the worker's creation says why */
    }
    if (env->netns && netns_try_acquire(env->netns, &sb->netns) < 0) {
        return -EAGAIN;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        return -EAGAIN;
    }
    struct spawn_plan plan;
    sandbox_plan(sb, sv[1], &plan);
    size_t len;
    char *buf = setup_message(sb, image_root, &len);
    sb->zreq.done = spawned;
    int r = forkserver_spawn_async(z, &plan, (const struct ctl_setup *)buf, &sb->zreq);
    (void)fd_close(sv[1]); /* sent with the request, or not needed */
    if (r < 0) {
        free(buf);
        (void)fd_close(sv[0]);
        return r;
    }
    sb->ctl_fd = sv[0];
    sb->setup_msg = buf;
    sb->setup_len = len;
    return 0;
}

void sandbox_create(struct sandbox_kit *kit, const struct sandbox_ops *ops, void *arg)
{
    struct sandbox_env *env = kit->env;
    struct sandbox *sb = xcalloc(1, sizeof(*sb));
    sb->kit = kit;
    sb->ops = ops;
    sb->owner = arg;
    sb->pid = -1;
    sb->pidfd = -1;
    sb->ctl_fd = -1;
    sb->netns = NETNS_REF_NONE;
    sb->proxy_fd = -1;
    sb->work_fd = -1;
    sb->state = SB_CREATING;
    sb->created_ns = clock_now_ns();
    (void)snprintf(sb->id, sizeof(sb->id), "%08x%06llx", env->instance,
                   (unsigned long long)(++env->next_sandbox & 0xffffff));
    /* The caller (core/sched.c's refill) makes sure there is a block. */
    sb->has_ids = env->cfg->userns && idslot_take(env->ids, &sb->ids);
    /* A dead sandbox's emptied cgroup when there is one (the reaper tracks it already),
     * else a new one named after this sandbox, tracked before it exists: the leak sweep
     * relies on it. */
    sb->cg = kit_take_cgroup(kit);
    if (sb->cg) {
        str_copy(sb->cg_name, cgroup_name(sb->cg), sizeof(sb->cg_name));
    } else {
        str_copy(sb->cg_name, sb->id, sizeof(sb->cg_name));
        env->track(env->track_arg, sb->id);
    }
    if (create_async(sb) == 0) {
        return;
    }
    workq_submit(env->workq, &sb->job, create_work, create_done);
}

int sandbox_start_task(struct sandbox *sb, const struct task_spec *spec, int fds[3],
                       const struct sandbox_task_ops *ops, void *arg, struct err *e)
{
    if (sb->state != SB_WARM && sb->state != SB_HELD) {
        return err_setx(e, -EINVAL, "sandbox %s is %s, not warm", sb->id,
                        sandbox_state_name(sb->state));
    }
    const struct pool_config *pc = sb->kit->pc;
    if (spec->pool != pc) {
        return err_setx(e, -EINVAL, "sandbox %s: a task of another pool", sb->id);
    }
    /* init attaches a token's mounts for good: a later task would stack its own there. */
    if (sb->tasks > 0 && spec->n_mounts > 0) {
        return err_setx(e, -EINVAL, "sandbox %s: token mounts come with its first task only",
                        sb->id);
    }
    struct ctl_task hdr;
    int r = task_spec_pack(spec, pc->nofile, &hdr, e);
    if (r < 0) {
        return err_prefix(e, r, "sandbox %s", sb->id);
    }
    /* The token's mounts (detached mount fds) follow stdio; the task keeps owning them. */
    size_t nfds = 3 + (size_t)hdr.n_mounts;
    struct iovec iov[2] = {
        {.iov_base = &hdr, .iov_len = sizeof(hdr)},
        {.iov_base = spec->strings, .iov_len = hdr.data_len},
    };
    int all[3 + CTL_MOUNTS_MAX];
    memcpy(all, fds, 3 * sizeof(int));
    if (hdr.n_mounts > 0) {
        memcpy(all + 3, spec->mount_fds, hdr.n_mounts * sizeof(int));
    }
    ssize_t n = fd_sendmsg(sb->ctl_fd, iov, hdr.data_len > 0 ? 2 : 1, all, nfds,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
        return err_set(e, (int)n, "sandbox %s: send CTL_TASK", sb->id);
    }
    if ((size_t)n != sizeof(hdr) + hdr.data_len) {
        return err_setx(e, -EMSGSIZE, "sandbox %s: CTL_TASK truncated", sb->id);
    }
    if (sb->state == SB_HELD) {
        /* What the earlier tasks used is theirs. */
        sb->have_usage_base = sb->cg && cgroup_usage(sb->cg, &sb->usage_base) == 0;
    }
    sb->tasks++;
    sb->task_ops = ops;
    sb->task = arg;
    sb->task_keep = spec->keep;
    set_state(sb, SB_BUSY);
    return 0;
}

void sandbox_claim(struct sandbox *sb, const struct sandbox_task_ops *ops, void *arg)
{
    /* A session's command claims its session's held sandbox. */
    assert(sb->state == SB_WARM || sb->state == SB_HELD);
    sb->task_ops = ops;
    sb->task = arg;
    set_state(sb, SB_HELD);
}

int sandbox_hold(struct sandbox *sb, sandbox_died_cb died, void *arg, struct err *e)
{
    if (sb->state != SB_WARM) {
        return err_setx(e, -EINVAL, "sandbox %s is %s, not warm", sb->id,
                        sandbox_state_name(sb->state));
    }
    sb->hold_died = died;
    sb->holder = arg;
    set_state(sb, SB_HELD);
    return 0;
}

void sandbox_kill_task(struct sandbox *sb)
{
    if (sb->state != SB_BUSY || sb->reaped) {
        return;
    }
    if (sb->task_keep) {
        const struct ctl_hdr kill = {.magic = CTL_MAGIC, .type = CTL_KILL};
        struct iovec iov = {.iov_base = (void *)&kill, .iov_len = sizeof(kill)};
        ssize_t n = fd_sendmsg(sb->ctl_fd, &iov, 1, NULL, 0, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == (ssize_t)sizeof(kill)) {
            return;
        }
        log_warn_errno(n < 0 ? (int)n : -EIO,
                       "sb=%s msg=\"cannot send CTL_KILL, destroying sandbox\"", sb->id);
    }
    sandbox_kill(sb);
}

void sandbox_detach_task(struct sandbox *sb)
{
    sb->task_ops = NULL;
    sb->task = NULL;
}

void sandbox_kill(struct sandbox *sb)
{
    if (sb->state == SB_DEAD || sb->reaped) {
        return;
    }
    if (sb->pidfd < 0) {
        /* Still being created on a worker: create_done kills it. */
        sb->kill_requested = true;
        return;
    }
    if (sb->state == SB_WARM) {
        sb->ops->unwarm(sb->owner, sb);
    }
    if (sb->state != SB_DYING) {
        set_nice(sb, SANDBOX_BACKGROUND_NICE);
        int r = sys_pidfd_send_signal(sb->pidfd, SIGKILL);
        if (r < 0 && r != -ESRCH) {
            log_error_errno(r, "sb=%s msg=\"cannot kill sandbox init\"", sb->id);
        }
        set_state(sb, SB_DYING);
    }
}

int sandbox_usage(struct sandbox *sb, struct cgroup_usage *ret)
{
    if (!sb->cg) {
        return -ENOENT;
    }
    int r = cgroup_usage(sb->cg, ret);
    if (r < 0 || !sb->have_usage_base) {
        return r;
    }
    /* The peak cannot be split: it stays the sandbox's (init's share is small). */
    const struct cgroup_usage *b = &sb->usage_base;
    ret->cpu_ns = ret->cpu_ns > b->cpu_ns ? ret->cpu_ns - b->cpu_ns : 0;
    ret->oom_kills = ret->oom_kills > b->oom_kills ? ret->oom_kills - b->oom_kills : 0;
    if (b->oom_kills > 0 || b->oom) {
        ret->oom = ret->oom_kills > 0; /* a reused cgroup: an earlier sandbox's OOM */
    }
    ret->pids_max_hits =
        ret->pids_max_hits > b->pids_max_hits ? ret->pids_max_hits - b->pids_max_hits : 0;
    return 0;
}
