/* SPDX-License-Identifier: MIT */
/* sbxd-init's side of a sandbox's tasks, as pid 1: hands each task to the task child,
 * answers the task's seccomp notifications, reaps the namespace, and when the task's main
 * process ends kills and reaps every other process before it reports. After a
 * CTL_TASK_KEEP task it clones the next task child and serves the next CTL_TASK; after any
 * other it exits. It never lets a process of one task outlive that task's report. */
#include "init/init_impl.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wire/bpf.h"
#include "lib/sys.h"
#include "lib/util.h"

/* The fds that may come with one packet: a task's stdio and its token mounts. */
#define INIT_FDS_MAX (3 + CTL_MOUNTS_MAX)
_Static_assert(INIT_FDS_MAX <= FD_SEND_MAX, "a task's fds fit fd_recv");
/* Notifications answered per poll round at most: a task that spams denied calls must not
 * keep init from its control socket and from reaping. */
#define INIT_NOTIF_BATCH 64

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64) /* linux 6.6 */
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

static void init_read_reports(struct init *in);

/* Kills every process of the namespace but us (kill(-1) from pid 1) and reaps them all,
 * until none is left: the task's, daemonized ones and a fork bomb's included (the pids
 * limit bounds how many there can be; a fork racing one kill is caught by the next). When
 * nothing else runs this is two system calls. Raw calls, as in init_reap. */
static void init_kill_all(void)
{
    for (;;) {
        (void)sys_kill(-1, SIGKILL);
        int st = 0;
        pid_t pid = sys_wait4(-1, &st, 0, NULL);
        if (pid < 0) {
            return; /* ECHILD: none left */
        }
        while (sys_wait4(-1, &st, WNOHANG, NULL) > 0) {
        }
    }
}

/* The task's report went out: the task child is gone and so is everything of the task.
 * Without CTL_TASK_KEEP (or with no next child) the sandbox ends now, as sbxd would end it
 * on reading the report; exiting here spares a wake-up for sbxd's SIGKILL. Else the next
 * task may come: what counted this one's denials goes, after the report (closing the
 * listener frees its program, work the kernel queues on this CPU). */
static void init_task_reported(struct init *in, bool next)
{
    if (!next) {
        _exit(0);
    }
    in->listener = fd_close(in->listener);
    in->listener_hup = false;
    in->counting = false;
    in->denials = 0;
    in->failed = false;
    memset(&in->failure, 0, sizeof(in->failure));
    in->keep = false;
    in->state = TASK_NONE;
}

/* The last task is done and its namespace empty: the task child for the next one, when the
 * task was kept. Returns its pid for the report, or 0 (no next task: init exits after the
 * report). */
static uint32_t init_next_child(struct init *in)
{
    if (!in->keep) {
        return 0;
    }
    struct err e = ERR_INIT;
    return task_child_respawn(in, &e) == 0 ? (uint32_t)in->task : 0;
}

/* Reports a task that never started (stage, err, msg) after emptying the namespace of the
 * task child, which leaves on reading EOF instead of a task. */
static void init_task_refused(struct init *in, uint32_t stage, int err, const char *msg)
{
    in->report = fd_close(in->report);
    init_kill_all();
    struct ctl_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CTL_EXEC_FAILED;
    ev.stage = stage;
    ev.err = err < 0 ? err : -EIO;
    (void)str_copy(ev.msg, msg, sizeof(ev.msg));
    ev.next_pid = init_next_child(in);
    pid1_send(in, &ev);
    init_task_reported(in, ev.next_pid != 0);
}

/* Whether the packet of n bytes in buf (with got fds) is a CTL_KILL. */
static bool init_is_kill(const char *buf, ssize_t n, size_t got)
{
    const struct ctl_hdr *h = (const struct ctl_hdr *)(const void *)buf;
    return n == (ssize_t)sizeof(*h) && got == 0 && h->magic == CTL_MAGIC && h->type == CTL_KILL;
}

static void init_start_task(struct init *in)
{
    struct err e = ERR_INIT;
    int fds[INIT_FDS_MAX];
    size_t got = 0;

    for (size_t i = 0; i < INIT_FDS_MAX; i++) {
        fds[i] = -1;
    }
    ssize_t n = pid1_recv_into(in->buf, in->ctl, fds, INIT_FDS_MAX, &got);
    if (n == 0) {
        _exit(0);
    }
    if (init_is_kill(in->buf, n, got)) {
        return; /* no task runs: it came after the task it was for had ended */
    }
    /* A task came: whatever happens below, this child serves no other. */
    in->state = TASK_DONE;
    in->tasks++;
    int r = n < 0 ? err_set(&e, (int)n, "receive task") : 0;
    if (r == 0) {
        r = pid1_parse_task(in->buf, (size_t)n, NULL, NULL, &e);
    }
    const struct ctl_task *t = (const struct ctl_task *)in->buf;
    in->keep = r == 0 && (t->flags & CTL_TASK_KEEP);
    if (r == 0 && got != 3 + (size_t)t->n_mounts) {
        r = err_setx(&e, -EPROTO, "task needs %u fds, got %zu", 3 + t->n_mounts, got);
    }
    /* SECURITY: mounts stay for the sandbox's life; a later task's would stack on them. */
    if (r == 0 && t->n_mounts > 0 && in->tasks > 1) {
        r = err_setx(&e, -EPROTO, "token mounts come with a sandbox's first task only");
    }
    uint32_t stage = CTL_STAGE_PROTOCOL;
    if (r == 0 && t->n_mounts > 0) {
        /* The token's mounts, before the task: it finds them in place. */
        stage = CTL_STAGE_TASK_MOUNT;
        r = mount_task_mounts(fds + 3, t->n_mounts, t->mount_dst, t->mount_files,
                              in->from_forkserver, &e);
    }
    /* The mounts are attached (or refused): init keeps no handle on them. */
    for (size_t i = 3; i < got; i++) {
        fds[i] = fd_close(fds[i]);
    }
    if (r == 0) {
        /* argv[0] is the first string: checked above, NUL-terminated. */
        (void)str_copy(in->argv0, in->buf + sizeof(*t), sizeof(in->argv0));
        (void)str_copy(in->cwd, t->cwd, sizeof(in->cwd));
        /* SECURITY: the only message the child ever receives from us: this checked task,
         * and the stdio it runs with. The mounts' fds stay behind (closed above). */
        struct iovec iov = {in->buf, (size_t)n};
        ssize_t sent = fd_sendmsg(in->report, &iov, 1, fds, 3, MSG_NOSIGNAL);
        if (sent != n) {
            stage = CTL_STAGE_FORK;
            r = err_set(&e, sent < 0 ? (int)sent : -EIO, "hand the task to its process");
        }
    }
    /* The task holds its stdio now: ours would keep sbxd's readers from seeing EOF. */
    for (int i = 0; i < 3; i++) {
        fds[i] = fd_close(fds[i]);
    }
    if (r < 0) {
        init_task_refused(in, stage, r, err_msg(&e));
        return;
    }
    (void)fd_set_nonblock(in->report, true);
    in->state = TASK_RUNNING;
    if (in->filter_early) {
        /* The listener has been waiting since the child was cloned. */
        init_read_reports(in);
    }
    /* No report that the task started: sbxd counts it started once CTL_TASK is sent (it
     * had the task's pid with CTL_READY or the last report), and hears of it next from
     * CTL_EXITED or CTL_EXEC_FAILED. A message here would wake sbxd's loop beside the
     * task's execve. */
}

static uint64_t init_tv_us(const struct timeval *tv)
{
    return (uint64_t)tv->tv_sec * 1000000u + (uint64_t)tv->tv_usec;
}

/* Reads everything the task child has sent so far: the listener, then at most one failure
 * record; closes the socket at EOF (the child exec'd or died). Never blocks. */
static void init_read_reports(struct init *in)
{
    while (in->report >= 0) {
        struct init_report rep;
        int fd = -1;
        ssize_t n = fd_recv_one(in->report, &rep, sizeof(rep), &fd, MSG_DONTWAIT);
        if (n == -EAGAIN) {
            return;
        }
        if (n <= 0) {
            in->report = fd_close(in->report);
            return;
        }
        if (n != (ssize_t)sizeof(rep)) {
            (void)fd_close(fd);
            continue;
        }
        if (rep.stage == CTL_STAGE_NONE) {
            if (fd >= 0 && in->listener < 0) {
                in->listener = take_fd(&fd);
                in->counting = true;
                /* Task and init take turns on one CPU instead of waking each other across
                 * CPUs: a denial costs several times less. Older kernels lack it: no matter. */
                (void)ioctl(in->listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
            }
            (void)fd_close(fd);
        } else {
            (void)fd_close(fd);
            if (!in->failed) {
                in->failed = true;
                in->failure = rep;
            }
        }
    }
}

/* Closes a failed listener: the kernel then fails whatever is still waiting, and every
 * later counted call, with ENOSYS, so the count is unknown. (One whose filter has no user
 * left stays open: init_serve_listener.) */
static void init_close_listener(struct init *in)
{
    in->listener = fd_close(in->listener);
    in->counting = false;
}

/* Answers the oldest pending notification, if there is one, with the errno the program
 * itself gives the call, and counts it. Returns 1 when one was taken (answered, or its
 * caller had died meanwhile), 0 when none was pending, -errno when the listener failed. */
static int init_answer_one(struct init *in)
{
    struct pollfd p = {in->listener, POLLIN, 0};
    int k = RETRY_EINTR(poll(&p, 1, 0));
    if (k < 0) {
        return -errno;
    }
    /* RECV blocks when nothing is pending: never call it without POLLIN. */
    if (k == 0 || !(p.revents & POLLIN)) {
        return 0;
    }
    for (;;) {
        /* The kernel refuses a buffer that is not all zeroes. */
        memset(in->notif, 0, in->notif_size);
        if (ioctl(in->listener, SECCOMP_IOCTL_NOTIF_RECV, in->notif) == 0) {
            break;
        }
        if (errno == ENOENT) {
            return 1; /* the caller died (or was interrupted) before we got to it */
        }
        if (errno != EINTR) {
            return -errno;
        }
    }
    memset(in->resp, 0, in->resp_size);
    in->resp->id = in->notif->id;
    in->resp->val = 0;
    in->resp->error = -bpf_notify_errno(in->filter, in->filter_len, &in->notif->data);
    in->resp->flags = 0;
    if (RETRY_EINTR(ioctl(in->listener, SECCOMP_IOCTL_NOTIF_SEND, in->resp)) < 0 &&
        errno != ENOENT) {
        return -errno;
    }
    /* ENOENT: the caller was killed or interrupted after making the call; it still did. */
    if (in->denials < CTL_DENIALS_UNKNOWN - 1) {
        in->denials++;
    }
    return 1;
}

/* Serves the listener for one poll round: at most INIT_NOTIF_BATCH answers. */
static void init_serve_listener(struct init *in, short revents)
{
    if (revents & POLLIN) {
        for (int i = 0; i < INIT_NOTIF_BATCH; i++) {
            int r = init_answer_one(in);
            if (r < 0) {
                init_close_listener(in);
                return;
            }
            if (r == 0) {
                break;
            }
        }
    }
    /* POLLERR, POLLNVAL: the listener failed, and the count is unknown. POLLHUP: no process
     * uses the filter any more, so nothing can be pending; the count is final. We keep the
     * listener open without polling it, to close it with our exit: its close drops the last
     * hold on the program, and the kernel queues the program's free (the unmapping of its JIT
     * image) to a worker of this CPU, which would otherwise run before our report reaches
     * sbxd (BENCHMARKS.md, session 17). */
    if (revents & (POLLERR | POLLNVAL)) {
        init_close_listener(in);
    } else if (revents & POLLHUP) {
        in->listener_hup = true;
    }
}

static void init_task_exited(struct init *in, int wstatus, const struct rusage *ru)
{
    /* The child is gone, so the socket holds its records and then EOF: no wait here. (A
     * listener still queued here was never needed: nothing could have been denied.) */
    init_read_reports(in);
    in->report = fd_close(in->report);
    in->state = TASK_DONE;
    /* Nothing of the task may run once sbxd hears that it ended: sbxd then reads the
     * workspace, or hands the sandbox its next task. */
    init_kill_all();
    struct ctl_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.pid = (uint32_t)in->task;
    if (in->failed) {
        const struct init_report rep = in->failure;
        ev.type = CTL_EXEC_FAILED;
        ev.stage = (uint32_t)rep.stage;
        ev.err = rep.err < 0 ? rep.err : -EIO;
        if (rep.stage == CTL_STAGE_EXEC) {
            (void)snprintf(ev.msg, sizeof(ev.msg), "execve '%.64s': %s", in->argv0,
                           err_name(rep.err));
        } else if (rep.stage == CTL_STAGE_CHDIR) {
            (void)snprintf(ev.msg, sizeof(ev.msg), "chdir '%.80s': %s", in->cwd, err_name(rep.err));
        } else {
            (void)snprintf(ev.msg, sizeof(ev.msg), "task setup stage %d: %s", rep.stage,
                           err_name(rep.err));
        }
    } else {
        ev.type = CTL_EXITED;
        ev.wstatus = wstatus;
        ev.utime_us = init_tv_us(&ru->ru_utime);
        ev.stime_us = init_tv_us(&ru->ru_stime);
        ev.maxrss_kb = (uint64_t)ru->ru_maxrss;
        ev.seccomp_denials = in->counting ? in->denials : CTL_DENIALS_UNKNOWN;
    }
    ev.next_pid = init_next_child(in);
    pid1_send(in, &ev);
    init_task_reported(in, ev.next_pid != 0);
}

/* As pid 1 we reap every process of the namespace, orphans included. */
static void init_reap(struct init *in)
{
    /* Raw calls: they end in EAGAIN and ECHILD, and libc's would write errno, whose page
     * (musl's TLS) the fork server's fork gave us shared: one copy-on-write fault per sandbox. */
    struct signalfd_siginfo si;
    while (sys_read(in->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
    }
    for (;;) {
        int st = 0;
        struct rusage ru;
        pid_t pid = sys_wait4(-1, &st, WNOHANG, &ru);
        if (pid <= 0) {
            return;
        }
        if (pid != in->task) {
            continue;
        }
        if (in->state == TASK_NONE) {
            /* The task child died before its task (never by itself): a task must not run
             * without the privileges shed, so this sandbox cannot serve one. */
            _exit(1);
        }
        if (in->state == TASK_RUNNING) {
            init_task_exited(in, st, &ru);
        }
    }
}

/* The control socket is readable: a task when none runs; while one runs, CTL_KILL or EOF. */
static void init_ctl_ready(struct init *in)
{
    if (in->state == TASK_NONE) {
        init_start_task(in);
        return;
    }
    /* Anything else than CTL_KILL or EOF ends the sandbox. One byte over, so that a longer
     * packet shows as one of the wrong size. */
    char buf[sizeof(struct ctl_hdr) + 1];
    size_t got = 0;
    bool bad = false;
    ssize_t n = fd_recv(in->ctl, buf, sizeof(buf), NULL, 0, &got, &bad, MSG_DONTWAIT);
    if (n == -EAGAIN) {
        return;
    }
    if (n > 0 && !bad && init_is_kill(buf, n, got)) {
        if (in->state == TASK_RUNNING) {
            /* Everything but us: the task's main process among them, whose reaping
             * reports it (init_reap). */
            (void)sys_kill(-1, SIGKILL);
        }
        return;
    }
    _exit(n == 0 ? 0 : 1);
}

void task_run_loop(struct init *in)
{
    for (;;) {
        /* poll ignores negative fds: the report socket and listener come and go. Nothing is
         * read from the task child before it has its task. The report socket stays polled
         * to its EOF at the child's execve, though no record can follow a listener: our end
         * then closes at once, and the task finds no socket of ours in its network
         * namespace's /proc/net/unix (test_netns). Reading it only at the reap instead
         * saved a wake-up per task but no measurable time (BENCHMARKS.md, session 7). */
        struct pollfd pfd[4] = {{in->ctl, POLLIN, 0},
                                {in->sigfd, POLLIN, 0},
                                {in->state == TASK_RUNNING ? in->report : -1, POLLIN, 0},
                                {in->listener_hup ? -1 : in->listener, POLLIN, 0}};
        if (poll(pfd, 4, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            _exit(1);
        }
        /* Reports and denials before exits, so that an exit reports an up-to-date count. */
        if (pfd[2].revents) {
            init_read_reports(in);
        }
        if (pfd[3].revents && in->listener >= 0) {
            init_serve_listener(in, pfd[3].revents);
        }
        if (pfd[1].revents) {
            init_reap(in);
        }
        if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            init_ctl_ready(in);
        }
    }
}
