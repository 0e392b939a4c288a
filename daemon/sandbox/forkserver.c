/* SPDX-License-Identifier: MIT */
/* sbxd's side of a pool's fork server: sbxd-init started in mount and network namespaces of
 * its own, as the host's root, where it builds the pool's root filesystem once and then forks
 * sandboxes on request (init/forkserver.c is the other side). Each sandbox is sbxd's child
 * (CLONE_PARENT), so reaping and pidfds work as for any sandbox. A fork server that cannot
 * start, or dies, costs nothing but speed: the caller then makes the sandbox from scratch. */
#define LOG_MOD "forkserver"
#include "sandbox/forkserver.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "sandbox/cgroup.h"
#include "sandbox/image.h"
#include "lib/log.h"
#include "lib/sys.h"
#include "lib/list.h"
#include "lib/util.h"

/* Starts that fail, or fork servers lost, in a row before the pool stops trying. */
#define FORKSERVER_MAX_FAILURES 3
/* How long a reply may take: building a template (a READY) or forking (a SPAWNED).
 * SBXD_ZYGOTE_REPLY_TIMEOUT_MS in the environment overrides it, for tests. */
#define FORKSERVER_REPLY_TIMEOUT_MS 10000
/* How often the host's /etc files in a host image's template are checked for changes. */
#define FORKSERVER_ETC_CHECK_NS (1000ULL * 1000 * 1000)

static const char *const forkserver_etc_files[] = {CTL_HOST_ETC_FILES};
#define FORKSERVER_N_ETC (sizeof(forkserver_etc_files) / sizeof(forkserver_etc_files[0]))

/* What identifies a version of a file: a change of content by rename (ldconfig) or in
 * place, or of a directory's entries, changes one of these. */
struct forkserver_file_id {
    bool exists;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    struct timespec ctime;
};

struct forkserver {
    pthread_mutex_t lock; /* held by a worker for a whole request (which may take seconds) */
    /* Guards stats alone, so that the loop reading them never waits for a request. */
    pthread_mutex_t stats_lock;
    char pool[64];
    pid_t pid; /* 0: none running */
    int pidfd;
    int ctl;
    /* What the running fork server's template was built from: a different setup (the pool's
     * image became ready, say) needs a new forkserver. */
    struct ctl_setup setup;
    /* A host image's template holds copies of the host's /etc files: their versions when
     * it was built, checked at most every FORKSERVER_ETC_CHECK_NS. */
    bool host_image;
    struct forkserver_file_id etc[FORKSERVER_N_ETC];
    uint64_t etc_checked_ns;
    unsigned fail_streak;
    struct forkserver_stats stats;
    unsigned generation; /* fork servers started: tells a new control socket from an old one */
    /* Requests from the loop (forkserver_spawn_async), answered in order. The loop holds lock
     * from its first request until the last reply of a batch; only then does it poll ctl,
     * so it never takes a worker's reply. */
    uv_loop_t *loop;
    struct forkserver_req *head, *tail;
    unsigned inflight;
    struct forkserver_poll *poll; /* polls ctl of one generation; remade for the next */
    uv_timer_t reply_timer;       /* reply_ms for the oldest request in flight */
    uint64_t reply_ms;            /* FORKSERVER_REPLY_TIMEOUT_MS, or the environment's */
};

/* The loop's poll of a fork server's control socket, through a descriptor of its own (a dup):
 * libuv must see a polled fd closed only after the handle (uv_close forgets the fd's number
 * in epoll, which would be another file's once the number is reused), and a worker closes
 * the fork server's ctl when it stops or replaces the forkserver. The handle lives until its close
 * callback, which may come after the fork server is gone. */
struct forkserver_poll {
    uv_poll_t h;
    int fd;
    unsigned generation;
};

struct forkserver *forkserver_new(const char *pool_name, uv_loop_t *loop)
{
    struct forkserver *z = xcalloc(1, sizeof(*z));
    pthread_mutex_init(&z->lock, NULL);
    pthread_mutex_init(&z->stats_lock, NULL);
    (void)str_copy(z->pool, pool_name, sizeof(z->pool));
    z->pidfd = -1;
    z->ctl = -1;
    z->loop = loop;
    z->reply_ms = FORKSERVER_REPLY_TIMEOUT_MS;
    const char *env = getenv("SBXD_ZYGOTE_REPLY_TIMEOUT_MS");
    uint64_t v;
    if (env && parse_u64(env, &v) == 0 && v >= 100 && v <= FORKSERVER_REPLY_TIMEOUT_MS) {
        z->reply_ms = v;
    }
    uv_timer_init(loop, &z->reply_timer);
    z->reply_timer.data = z;
    return z;
}

/* Ends the running fork server: its control socket closes (it exits on EOF) and SIGKILL makes
 * sure; then it is reaped. Sandboxes it forked live on: they are sbxd's children. */
static void forkserver_stop(struct forkserver *z)
{
    if (z->pid <= 0) {
        return;
    }
    z->ctl = fd_close(z->ctl);
    (void)sys_pidfd_send_signal(z->pidfd, SIGKILL);
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    (void)sys_pidfd_wait(z->pidfd, &info, WEXITED);
    z->pidfd = fd_close(z->pidfd);
    z->pid = 0;
    pthread_mutex_lock(&z->stats_lock);
    z->stats.pid = 0;
    pthread_mutex_unlock(&z->stats_lock);
}

/* A start failed or a fork server was lost: after FORKSERVER_MAX_FAILURES in a row, no more. */
static void forkserver_note_failure(struct forkserver *z)
{
    z->fail_streak++;
    pthread_mutex_lock(&z->stats_lock);
    z->stats.failures++;
    z->stats.disabled = z->fail_streak >= FORKSERVER_MAX_FAILURES;
    pthread_mutex_unlock(&z->stats_lock);
}

static void poll_closed(uv_handle_t *h)
{
    struct forkserver_poll *zp = container_of((uv_poll_t *)h, struct forkserver_poll, h);
    (void)fd_close(zp->fd);
    free(zp);
}

static void close_poll(struct forkserver *z)
{
    if (z->poll) {
        uv_close((uv_handle_t *)&z->poll->h, poll_closed);
        z->poll = NULL;
    }
}

static void timer_closed(uv_handle_t *h)
{
    struct forkserver *z = h->data;
    pthread_mutex_destroy(&z->lock);
    pthread_mutex_destroy(&z->stats_lock);
    free(z);
}

struct forkserver *forkserver_free(struct forkserver *z)
{
    if (!z) {
        return NULL;
    }
    if (z->inflight > 0) {
        /* Never: sbxd drains every sandbox being created before it closes its pools. */
        log_error("pool=%s requests=%u msg=\"fork server freed with requests in flight\"", z->pool,
                  z->inflight);
    }
    close_poll(z);
    forkserver_stop(z);
    uv_close((uv_handle_t *)&z->reply_timer, timer_closed); /* frees z */
    return NULL;
}

static void forkserver_etc_ids(struct forkserver_file_id *ids)
{
    for (size_t i = 0; i < FORKSERVER_N_ETC; i++) {
        char path[64];
        struct stat st;
        (void)snprintf(path, sizeof(path), "/%s", forkserver_etc_files[i]);
        memset(&ids[i], 0, sizeof(ids[i]));
        if (lstat(path, &st) == 0) {
            ids[i] = (struct forkserver_file_id){true,       st.st_dev,  st.st_ino,
                                                 st.st_size, st.st_mtim, st.st_ctim};
        }
    }
}

/* Whether the host's /etc files are due to be checked (forkserver_etc_changed). */
static bool forkserver_etc_check_due(const struct forkserver *z, uint64_t now)
{
    return z->host_image && now - z->etc_checked_ns >= FORKSERVER_ETC_CHECK_NS;
}

static bool forkserver_etc_changed(struct forkserver *z)
{
    uint64_t now = clock_now_ns();
    if (!forkserver_etc_check_due(z, now)) {
        return false;
    }
    z->etc_checked_ns = now;
    struct forkserver_file_id ids[FORKSERVER_N_ETC];
    forkserver_etc_ids(ids);
    for (size_t i = 0; i < FORKSERVER_N_ETC; i++) {
        const struct forkserver_file_id *a = &ids[i], *b = &z->etc[i];
        if (a->exists != b->exists || a->dev != b->dev || a->ino != b->ino || a->size != b->size ||
            a->mtime.tv_sec != b->mtime.tv_sec || a->mtime.tv_nsec != b->mtime.tv_nsec ||
            a->ctime.tv_sec != b->ctime.tv_sec || a->ctime.tv_nsec != b->ctime.tv_nsec) {
            return true;
        }
    }
    return false;
}

/* What fd_recv_one returned (n) for one of the fork server's replies into ev: 0 for a reply. */
static int forkserver_check_reply(ssize_t n, struct ctl_event *ev, struct err *e)
{
    if (n < 0) {
        return err_set(e, (int)n, "receive reply");
    }
    if (n == 0) {
        return err_setx(e, -EPIPE, "it exited");
    }
    if ((size_t)n != sizeof(*ev) || ev->magic != CTL_MAGIC) {
        return err_setx(e, -EPROTO, "malformed reply");
    }
    ctl_event_clean(ev);
    return 0;
}

/* Waits for the fork server's one reply; fd gets the pidfd that comes with CTL_SPAWNED. */
static int forkserver_reply(struct forkserver *z, struct ctl_event *ev, int *fd, struct err *e)
{
    /* Polled, not a blocking receive: the socket is O_NONBLOCK once the loop polled it. */
    struct pollfd pfd = {.fd = z->ctl, .events = POLLIN};
    int r = RETRY_EINTR(poll(&pfd, 1, (int)z->reply_ms));
    if (r < 0) {
        return err_set(e, -errno, "poll");
    }
    if (r == 0) {
        return err_setx(e, -ETIMEDOUT, "no reply within %llu ms", (unsigned long long)z->reply_ms);
    }
    return forkserver_check_reply(fd_recv_one(z->ctl, ev, sizeof(*ev), fd, MSG_DONTWAIT), ev, e);
}

static int forkserver_start(struct forkserver *z, const struct spawn_plan *sandbox_plan,
                            const struct ctl_setup *setup, const struct image *img, struct err *e)
{
    /* A built image's tree, for the template (the fork server keeps what it needs of it). */
    scoped_close int image_fd = -1;
    const char *image_root = "/";
    int r = image_sandbox_root(img, &image_fd, &image_root, e);
    if (r < 0) {
        return r;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        return err_set(e, -errno, "socketpair");
    }
    scoped_close int child_end = sv[1];
    z->ctl = sv[0];
    struct spawn_plan plan = {
        .init_path = sandbox_plan->init_path,
        .ctl_fd = child_end,
        .netns_fd = -1,
        .forkserver = true,
    };
    /* Before the template is built: a change while it is would be seen at the next check. */
    z->host_image = image_fd < 0 && strcmp(setup->image_root, "/") == 0;
    if (z->host_image) {
        forkserver_etc_ids(z->etc);
        z->etc_checked_ns = clock_now_ns();
    }
    struct spawn_result res;
    r = spawn_sandbox(&plan, &res, e);
    if (r < 0) {
        z->ctl = fd_close(z->ctl);
        return r;
    }
    z->pid = res.pid;
    z->pidfd = res.pidfd;
    z->generation++;
    pthread_mutex_lock(&z->stats_lock);
    z->stats.starts++;
    pthread_mutex_unlock(&z->stats_lock);
    struct ctl_setup zs = *setup;
    zs.type = CTL_FORKSERVER;
    zs.seccomp_insns = 0; /* a sandbox's filter comes with its own CTL_SETUP */
    zs.flags &= ~CTL_SETUP_IMAGE_FD;
    if (image_fd >= 0) {
        zs.flags |= CTL_SETUP_IMAGE_FD;
    }
    struct iovec iov = {.iov_base = &zs, .iov_len = sizeof(zs)};
    ssize_t n = fd_sendmsg(z->ctl, &iov, 1, &image_fd, image_fd >= 0 ? 1 : 0, MSG_NOSIGNAL);
    if (n != (ssize_t)sizeof(zs)) {
        r = err_set(e, n < 0 ? (int)n : -EIO, "send CTL_FORKSERVER");
    }
    struct ctl_event ev;
    int fd = -1;
    if (r == 0) {
        r = forkserver_reply(z, &ev, &fd, e);
        fd = fd_close(fd);
    }
    if (r == 0 && ev.type != CTL_READY) {
        r = err_setx(e, ev.err < 0 ? ev.err : -EIO, "template: %s", ev.msg);
    }
    if (r < 0) {
        forkserver_stop(z);
        return r;
    }
    z->setup = zs;
    pthread_mutex_lock(&z->stats_lock);
    z->stats.pid = z->pid;
    pthread_mutex_unlock(&z->stats_lock);
    log_info("pool=%s pid=%d msg=\"fork server ready\"", z->pool, (int)z->pid);
    return 0;
}

/* Whether the running fork server's template was built from what setup asks for (the image by
 * its root: "/" for the host's, else a verified image's path; the names in its /etc). */
static bool forkserver_matches(const struct forkserver *z, const struct ctl_setup *setup)
{
    const struct ctl_setup *a = &z->setup;
    uint32_t mask = ~CTL_SETUP_IMAGE_FD;
    return a->uid == setup->uid && a->gid == setup->gid &&
           (a->flags & mask) == (setup->flags & mask) && a->shm_size == setup->shm_size &&
           strcmp(a->image_root, setup->image_root) == 0 &&
           strcmp(a->hostname, setup->hostname) == 0;
}

#define FORKSERVER_REQUEST_FDS (3 + CTL_SPAWN_ATTACH_MAX)

/* The CTL_SPAWN for plan into sp, and the fds that go with it (FORKSERVER_REQUEST_FDS at most):
 * on v1 the cgroup's cgroup.procs files, through which the fork server attaches the sandbox.
 * Returns how many, or -errno with e. */
static int forkserver_request(const struct spawn_plan *plan, struct ctl_spawn *sp, int *fds,
                              struct err *e)
{
    *sp = (struct ctl_spawn){.magic = CTL_MAGIC, .type = CTL_SPAWN, .owner = plan->host_id_base};
    int nfds = 0;
    fds[nfds++] = plan->ctl_fd;
    if (plan->join_netns) {
        sp->flags |= CTL_SPAWN_NETNS;
        fds[nfds++] = plan->netns_fd;
    }
    int cgfd = plan->cg ? cgroup_fd(plan->cg) : -1;
    if (cgfd >= 0) {
        sp->flags |= CTL_SPAWN_CGROUP;
        fds[nfds++] = cgfd;
    } else if (plan->cg) {
        int n = cgroup_procs_fds(plan->cg, fds + nfds, CTL_SPAWN_ATTACH_MAX, e);
        if (n < 0) {
            return n;
        }
        sp->n_attach = (uint32_t)n;
        nfds += n;
    }
    return nfds;
}

static void forkserver_note_spawned(struct forkserver *z)
{
    z->fail_streak = 0;
    pthread_mutex_lock(&z->stats_lock);
    z->stats.spawned++;
    pthread_mutex_unlock(&z->stats_lock);
}

/* A sandbox the fork server forked (its CTL_SPAWNED: pid, pidfd) goes where plan says: the id
 * maps (the fork server attached it to its v1 cgroup, or said why it could not). On failure it is
 * killed and reaped. Returns 0 (ret filled) or -errno. */
static int forkserver_place(const struct spawn_plan *plan, const struct ctl_event *ev, int pidfd,
                            struct spawn_result *ret, struct err *e)
{
    pid_t pid = (pid_t)ev->pid;
    struct spawn_plan placed = *plan;
    placed.cg_attached = true;
    placed.sealed = true;
    int r = ev->err < 0 ? err_setx(e, ev->err, "fork server: %s", ev->msg)
                        : spawn_place(&placed, pid, pidfd, e);
    if (r < 0) {
        (void)sys_pidfd_send_signal(pidfd, SIGKILL);
        siginfo_t info;
        memset(&info, 0, sizeof(info));
        (void)sys_pidfd_wait(pidfd, &info, WEXITED);
        (void)fd_close(pidfd);
        return err_prefix(e, r, "place the forked sandbox");
    }
    ret->pid = pid;
    ret->pidfd = pidfd;
    return 0;
}

/* Asks the running fork server for a sandbox. Returns the pid (its CTL_SPAWNED in *spawned, the
 * pidfd in *pidfd); -EAGAIN when
 * the fork server was lost before it had the request; -ECONNRESET when it was lost after (it
 * may have forked a sandbox that holds plan->ctl_fd: that socket must not serve another);
 * the fork server is stopped in both cases. Another -errno when the fork failed. */
static pid_t forkserver_fork(struct forkserver *z, const struct spawn_plan *plan,
                             struct ctl_event *spawned, int *pidfd, struct err *e)
{
    struct ctl_spawn sp;
    int fds[FORKSERVER_REQUEST_FDS];
    int nfds = forkserver_request(plan, &sp, fds, e);
    if (nfds < 0) {
        return nfds;
    }
    struct iovec iov = {.iov_base = &sp, .iov_len = sizeof(sp)};
    ssize_t n = fd_sendmsg(z->ctl, &iov, 1, fds, (size_t)nfds, MSG_NOSIGNAL);
    struct ctl_event ev;
    int fd = -1;
    bool sent = n == (ssize_t)sizeof(sp);
    int r = sent ? forkserver_reply(z, &ev, &fd, e)
                 : err_set(e, n < 0 ? (int)n : -EIO, "send CTL_SPAWN");
    if (r < 0) {
        fd = fd_close(fd);
        log_warn("pool=%s pid=%d msg=\"fork server lost, restarting it later\" detail=\"%s\"",
                 z->pool, (int)z->pid, err_msg(e));
        forkserver_stop(z);
        if (sent) {
            /* e's own message follows (err_prefix copies it first: no overlap). */
            return err_prefix(e, -ECONNRESET, "the fork server was lost during the request");
        }
        return -EAGAIN;
    }
    if (ev.type == CTL_SPAWNED && fd >= 0 && ev.pid > 0) {
        *spawned = ev;
        *pidfd = fd;
        return (pid_t)ev.pid;
    }
    fd = fd_close(fd);
    if (ev.type == CTL_SETUP_FAILED) {
        return err_setx(e, ev.err < 0 ? ev.err : -EIO, "fork server: %s", ev.msg);
    }
    log_warn("pool=%s msg=\"fork server sent an unexpected reply, restarting it later\"", z->pool);
    forkserver_stop(z);
    return -EAGAIN;
}

int forkserver_spawn(struct forkserver *z, const struct spawn_plan *plan,
                     const struct ctl_setup *setup, const struct image *img,
                     struct spawn_result *ret, struct err *e)
{
    pthread_mutex_lock(&z->lock);
    if (z->fail_streak >= FORKSERVER_MAX_FAILURES) {
        pthread_mutex_unlock(&z->lock);
        return -EAGAIN;
    }
    if (z->pid > 0 && !forkserver_matches(z, setup)) {
        log_info("pool=%s msg=\"pool setup changed, new fork server\"", z->pool);
        forkserver_stop(z);
    } else if (z->pid > 0 && forkserver_etc_changed(z)) {
        log_info("pool=%s msg=\"the host's loader files changed, new fork server\"", z->pool);
        forkserver_stop(z);
    }
    int r = 0;
    if (z->pid <= 0) {
        struct err ze = ERR_INIT;
        r = forkserver_start(z, plan, setup, img, &ze);
        if (r < 0) {
            forkserver_note_failure(z);
            log_warn("pool=%s msg=\"cannot start the fork server%s\" detail=\"%s\"", z->pool,
                     z->fail_streak >= FORKSERVER_MAX_FAILURES
                         ? ", making sandboxes without it from now"
                         : "",
                     err_msg(&ze));
            pthread_mutex_unlock(&z->lock);
            return -EAGAIN;
        }
    }
    int pidfd = -1;
    struct ctl_event spawned;
    pid_t pid = forkserver_fork(z, plan, &spawned, &pidfd, e);
    if (pid == -EAGAIN || pid == -ECONNRESET) {
        forkserver_note_failure(z);
    } else if (pid > 0) {
        forkserver_note_spawned(z);
    }
    pthread_mutex_unlock(&z->lock);
    if (pid < 0) {
        return pid;
    }
    return forkserver_place(plan, &spawned, pidfd, ret, e);
}

/* The loop's requests. */

/* The batch is over: the loop lets go of the fork server (a worker may take it now). */
static void async_idle(struct forkserver *z)
{
    if (z->poll) {
        uv_poll_stop(&z->poll->h);
    }
    uv_timer_stop(&z->reply_timer);
    pthread_mutex_unlock(&z->lock);
}

static struct forkserver_req *async_pop(struct forkserver *z)
{
    struct forkserver_req *req = SLIST_POP(z->head, z->tail, next);
    if (--z->inflight == 0) {
        async_idle(z);
    } else {
        uv_timer_again(&z->reply_timer);
    }
    return req;
}

/* The fork server is gone, or speaks garbage, or is silent: every request in flight fails, as
 * after the request on a worker (it may have forked a process that holds the request's
 * control socket). */
static void async_lost(struct forkserver *z, const struct err *why)
{
    log_warn("pool=%s pid=%d requests=%u msg=\"fork server lost, restarting it later\" "
             "detail=\"%s\"",
             z->pool, (int)z->pid, z->inflight, err_msg(why));
    if (z->poll) {
        uv_poll_stop(&z->poll->h);
    }
    close_poll(z); /* its fd is closed next */
    forkserver_stop(z);
    forkserver_note_failure(z);
    while (z->head) {
        struct forkserver_req *req = async_pop(z);
        struct err e = ERR_INIT;
        err_setx(&e, -ECONNRESET, "the fork server was lost during the request: %s", err_msg(why));
        req->done(req, -ECONNRESET, NULL, &e);
    }
}

/* A reply to the oldest request: a CTL_SPAWNED with its pid and pidfd (fd), or a
 * CTL_SETUP_FAILED. */
static void async_reply(struct forkserver *z, const struct ctl_event *ev, int fd)
{
    struct forkserver_req *req = async_pop(z);
    struct err e = ERR_INIT;
    struct spawn_result res = {-1, -1};
    int r;
    if (ev->type == CTL_SPAWNED) {
        forkserver_note_spawned(z);
        r = forkserver_place(&req->plan, ev, fd, &res, &e);
    } else { /* CTL_SETUP_FAILED: the fork failed */
        (void)fd_close(fd);
        r = err_setx(&e, ev->err < 0 ? ev->err : -EIO, "fork server: %s", ev->msg);
    }
    req->done(req, r, r == 0 ? &res : NULL, &e);
}

static void async_poll_cb(uv_poll_t *h, int status, int events)
{
    struct forkserver_poll *zp = container_of(h, struct forkserver_poll, h);
    struct forkserver *z = h->data;
    (void)events;
    /* A reply may finish the batch (the lock let go) and its callback start the next. */
    while (z->inflight > 0 && z->poll == zp) {
        struct ctl_event ev;
        int fd = -1;
        struct err e = ERR_INIT;
        /* A hung-up socket reads as EOF (libuv reports its POLLERR as a status of EBADF). */
        ssize_t n = fd_recv_one(z->ctl, &ev, sizeof(ev), &fd, MSG_DONTWAIT);
        if (n == -EAGAIN && status >= 0) {
            return;
        }
        n = n == -EAGAIN ? status : n;
        int r = forkserver_check_reply(n, &ev, &e);
        /* A SPAWNED without its pid or pidfd is garbage too, as on a worker (forkserver_fork). */
        bool spawned = ev.type == CTL_SPAWNED && fd >= 0 && ev.pid > 0;
        if (r == 0 && !spawned && ev.type != CTL_SETUP_FAILED) {
            r = err_setx(&e, -EPROTO, "unexpected reply %u", ev.type);
        }
        if (r < 0) {
            (void)fd_close(fd);
            async_lost(z, &e);
            return;
        }
        async_reply(z, &ev, fd);
    }
}

static void async_timeout(uv_timer_t *t)
{
    struct forkserver *z = t->data;
    struct err e = ERR_INIT;
    err_setx(&e, -ETIMEDOUT, "no reply within %llu ms", (unsigned long long)z->reply_ms);
    async_lost(z, &e);
}

int forkserver_spawn_async(struct forkserver *z, const struct spawn_plan *plan,
                           const struct ctl_setup *setup, struct forkserver_req *req)
{
    if (z->inflight == 0 && pthread_mutex_trylock(&z->lock) != 0) {
        return -EAGAIN; /* a worker starts it, or makes a sandbox with it */
    }
    /* A setup that changed needs a new fork server, and the host's /etc files, once a second, a
     * look (lstat) that may end in one: a worker does both (forkserver_spawn), once this batch
     * is over, so that the loop neither looks nor stops a fork server for them. */
    bool usable = z->pid > 0 && z->fail_streak < FORKSERVER_MAX_FAILURES &&
                  forkserver_matches(z, setup) && !forkserver_etc_check_due(z, clock_now_ns());
    if (usable && (!z->poll || z->poll->generation != z->generation)) {
        close_poll(z);
        struct forkserver_poll *zp = xcalloc(1, sizeof(*zp));
        zp->fd = fcntl(z->ctl, F_DUPFD_CLOEXEC, 0);
        if (zp->fd < 0 || uv_poll_init(z->loop, &zp->h, zp->fd) < 0) {
            (void)fd_close(zp->fd); /* uv_poll_init fails before the handle is the loop's */
            free(zp);
            usable = false;
        } else {
            zp->generation = z->generation;
            zp->h.data = z;
            z->poll = zp;
        }
    }
    ssize_t n = -EAGAIN;
    if (usable) {
        struct ctl_spawn sp;
        int fds[FORKSERVER_REQUEST_FDS];
        int nfds = forkserver_request(plan, &sp, fds, NULL);
        struct iovec iov = {.iov_base = &sp, .iov_len = sizeof(sp)};
        n = nfds < 0 ? nfds
                     : fd_sendmsg(z->ctl, &iov, 1, fds, (size_t)nfds, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (n != (ssize_t)sizeof(struct ctl_spawn)) {
        /* Not sent: nothing of it reached the forkserver. A fork server that is gone is seen by the
         * worker this creation goes to, or by the poll when requests are in flight. */
        if (z->inflight == 0) {
            pthread_mutex_unlock(&z->lock);
        }
        return -EAGAIN;
    }
    req->plan = *plan;
    SLIST_APPEND(z->head, z->tail, req, next);
    if (z->inflight++ == 0) {
        uv_poll_start(&z->poll->h, UV_READABLE, async_poll_cb);
        uv_timer_start(&z->reply_timer, async_timeout, z->reply_ms, z->reply_ms);
    }
    return 0;
}

void forkserver_get_stats(struct forkserver *z, struct forkserver_stats *ret)
{
    pthread_mutex_lock(&z->stats_lock);
    *ret = z->stats;
    pthread_mutex_unlock(&z->stats_lock);
}
