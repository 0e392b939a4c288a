/* SPDX-License-Identifier: MIT */
/* A pool's fork server (zygote): sbxd-init started in mount and network namespaces of its
 * own, as the host's root, where it builds the pool's root filesystem once and then forks
 * sandboxes on request (init.c, "the fork server"). Each sandbox is sbxd's child
 * (CLONE_PARENT), so reaping and pidfds work as for any sandbox. A zygote that cannot start,
 * or dies, costs nothing but speed: the caller then makes the sandbox from scratch. */
#define LOG_MOD "zygote"
#include "zygote.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "cgroup.h"
#include "image.h"
#include "log.h"
#include "sys.h"
#include "util.h"

/* Starts that fail, or zygotes lost, in a row before the pool stops trying. */
#define ZYGOTE_MAX_FAILURES 3
/* How long a reply may take: building a template (a READY) or forking (a SPAWNED). */
#define ZYGOTE_REPLY_TIMEOUT_S 10
/* How often the host's /etc files in a host image's template are checked for changes. */
#define ZYGOTE_ETC_CHECK_NS (1000ULL * 1000 * 1000)

static const char *const zygote_etc_files[] = {CTL_HOST_ETC_FILES};
#define ZYGOTE_N_ETC (sizeof(zygote_etc_files) / sizeof(zygote_etc_files[0]))

/* What identifies a version of a file: a change of content by rename (ldconfig) or in
 * place, or of a directory's entries, changes one of these. */
struct zygote_file_id {
    bool exists;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    struct timespec ctime;
};

struct zygote {
    pthread_mutex_t lock; /* held by a worker for a whole request (which may take seconds) */
    /* Guards stats alone, so that the loop reading them never waits for a request. */
    pthread_mutex_t stats_lock;
    char pool[64];
    pid_t pid; /* 0: none running */
    int pidfd;
    int ctl;
    /* What the running zygote's template was built from: a different setup (the pool's
     * image became ready, say) needs a new zygote. */
    struct ctl_setup setup;
    /* A host image's template holds copies of the host's /etc files: their versions when
     * it was built, checked at most every ZYGOTE_ETC_CHECK_NS. */
    bool host_image;
    struct zygote_file_id etc[ZYGOTE_N_ETC];
    uint64_t etc_checked_ns;
    unsigned fail_streak;
    struct zygote_stats stats;
};

struct zygote *zygote_new(const char *pool_name)
{
    struct zygote *z = xcalloc(1, sizeof(*z));
    pthread_mutex_init(&z->lock, NULL);
    pthread_mutex_init(&z->stats_lock, NULL);
    (void)str_copy(z->pool, pool_name, sizeof(z->pool));
    z->pidfd = -1;
    z->ctl = -1;
    return z;
}

/* Ends the running zygote: its control socket closes (it exits on EOF) and SIGKILL makes
 * sure; then it is reaped. Sandboxes it forked live on: they are sbxd's children. */
static void zygote_stop(struct zygote *z)
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

/* A start failed or a zygote was lost: after ZYGOTE_MAX_FAILURES in a row, no more. */
static void zygote_note_failure(struct zygote *z)
{
    z->fail_streak++;
    pthread_mutex_lock(&z->stats_lock);
    z->stats.failures++;
    z->stats.disabled = z->fail_streak >= ZYGOTE_MAX_FAILURES;
    pthread_mutex_unlock(&z->stats_lock);
}

struct zygote *zygote_free(struct zygote *z)
{
    if (!z) {
        return NULL;
    }
    zygote_stop(z);
    pthread_mutex_destroy(&z->lock);
    pthread_mutex_destroy(&z->stats_lock);
    free(z);
    return NULL;
}

static void zygote_etc_ids(struct zygote_file_id *ids)
{
    for (size_t i = 0; i < ZYGOTE_N_ETC; i++) {
        char path[64];
        struct stat st;
        (void)snprintf(path, sizeof(path), "/%s", zygote_etc_files[i]);
        memset(&ids[i], 0, sizeof(ids[i]));
        if (lstat(path, &st) == 0) {
            ids[i] = (struct zygote_file_id){true,       st.st_dev,  st.st_ino,
                                             st.st_size, st.st_mtim, st.st_ctim};
        }
    }
}

static bool zygote_etc_changed(struct zygote *z)
{
    uint64_t now = now_ns();
    if (!z->host_image || now - z->etc_checked_ns < ZYGOTE_ETC_CHECK_NS) {
        return false;
    }
    z->etc_checked_ns = now;
    struct zygote_file_id ids[ZYGOTE_N_ETC];
    zygote_etc_ids(ids);
    for (size_t i = 0; i < ZYGOTE_N_ETC; i++) {
        const struct zygote_file_id *a = &ids[i], *b = &z->etc[i];
        if (a->exists != b->exists || a->dev != b->dev || a->ino != b->ino || a->size != b->size ||
            a->mtime.tv_sec != b->mtime.tv_sec || a->mtime.tv_nsec != b->mtime.tv_nsec ||
            a->ctime.tv_sec != b->ctime.tv_sec || a->ctime.tv_nsec != b->ctime.tv_nsec) {
            return true;
        }
    }
    return false;
}

/* Waits for the zygote's one reply; fd gets the pidfd that comes with CTL_SPAWNED. */
static int zygote_reply(struct zygote *z, struct ctl_event *ev, int *fd, struct err *e)
{
    ssize_t n = fd_recv_one(z->ctl, ev, sizeof(*ev), fd, 0);
    if (n == -EAGAIN) {
        return err_setx(e, -ETIMEDOUT, "no reply within %d s", ZYGOTE_REPLY_TIMEOUT_S);
    }
    if (n < 0) {
        return err_set(e, (int)n, "receive reply");
    }
    if (n == 0) {
        return err_setx(e, -EPIPE, "it exited");
    }
    if ((size_t)n != sizeof(*ev) || ev->magic != CTL_MAGIC) {
        return err_setx(e, -EPROTO, "malformed reply");
    }
    ev->msg[sizeof(ev->msg) - 1] = '\0';
    return 0;
}

static int zygote_start(struct zygote *z, const struct spawn_plan *sandbox_plan,
                        const struct ctl_setup *setup, const struct image *img, struct err *e)
{
    /* A built image's tree, for the template (the zygote keeps what it needs of it). */
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
    struct timeval tv = {ZYGOTE_REPLY_TIMEOUT_S, 0};
    if (setsockopt(z->ctl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
        r = err_set(e, -errno, "SO_RCVTIMEO");
        z->ctl = fd_close(z->ctl);
        return r;
    }
    struct spawn_plan plan = {
        .init_path = sandbox_plan->init_path,
        .ctl_fd = child_end,
        .netns_fd = -1,
        .zygote = true,
    };
    /* Before the template is built: a change while it is would be seen at the next check. */
    z->host_image = image_fd < 0 && strcmp(setup->image_root, "/") == 0;
    if (z->host_image) {
        zygote_etc_ids(z->etc);
        z->etc_checked_ns = now_ns();
    }
    struct spawn_result res;
    r = spawn_sandbox(&plan, &res, e);
    if (r < 0) {
        z->ctl = fd_close(z->ctl);
        return r;
    }
    z->pid = res.pid;
    z->pidfd = res.pidfd;
    pthread_mutex_lock(&z->stats_lock);
    z->stats.starts++;
    pthread_mutex_unlock(&z->stats_lock);
    struct ctl_setup zs = *setup;
    zs.type = CTL_ZYGOTE;
    zs.seccomp_insns = 0; /* a sandbox's filter comes with its own CTL_SETUP */
    zs.flags &= ~CTL_SETUP_IMAGE_FD;
    if (image_fd >= 0) {
        zs.flags |= CTL_SETUP_IMAGE_FD;
    }
    struct iovec iov = {.iov_base = &zs, .iov_len = sizeof(zs)};
    ssize_t n = fd_sendmsg(z->ctl, &iov, 1, &image_fd, image_fd >= 0 ? 1 : 0, MSG_NOSIGNAL);
    if (n != (ssize_t)sizeof(zs)) {
        r = err_set(e, n < 0 ? (int)n : -EIO, "send CTL_ZYGOTE");
    }
    struct ctl_event ev;
    int fd = -1;
    if (r == 0) {
        r = zygote_reply(z, &ev, &fd, e);
        fd = fd_close(fd);
    }
    if (r == 0 && ev.type != CTL_READY) {
        r = err_setx(e, ev.err < 0 ? ev.err : -EIO, "template: %s", ev.msg);
    }
    if (r < 0) {
        zygote_stop(z);
        return r;
    }
    z->setup = zs;
    pthread_mutex_lock(&z->stats_lock);
    z->stats.pid = z->pid;
    pthread_mutex_unlock(&z->stats_lock);
    log_info("pool=%s pid=%d msg=\"fork server ready\"", z->pool, (int)z->pid);
    return 0;
}

/* Whether the running zygote's template was built from what setup asks for (the image by
 * its root: "/" for the host's, else a verified image's path; the names in its /etc). */
static bool zygote_matches(const struct zygote *z, const struct ctl_setup *setup)
{
    const struct ctl_setup *a = &z->setup;
    uint32_t mask = ~CTL_SETUP_IMAGE_FD;
    return a->uid == setup->uid && a->gid == setup->gid &&
           (a->flags & mask) == (setup->flags & mask) && a->shm_size == setup->shm_size &&
           strcmp(a->image_root, setup->image_root) == 0 &&
           strcmp(a->hostname, setup->hostname) == 0;
}

/* Asks the running zygote for a sandbox. Returns the pid (pidfd in *pidfd); -EAGAIN when
 * the zygote was lost before it had the request; -ECONNRESET when it was lost after (it
 * may have forked a sandbox that holds plan->ctl_fd: that socket must not serve another);
 * the zygote is stopped in both cases. Another -errno when the fork failed. */
static pid_t zygote_fork(struct zygote *z, const struct spawn_plan *plan, int *pidfd, struct err *e)
{
    struct ctl_spawn sp = {.magic = CTL_MAGIC, .type = CTL_SPAWN};
    int fds[3];
    size_t nfds = 0;
    fds[nfds++] = plan->ctl_fd;
    if (plan->join_netns) {
        sp.flags |= CTL_SPAWN_NETNS;
        fds[nfds++] = plan->netns_fd;
    }
    int cgfd = plan->cg ? cgroup_fd(plan->cg) : -1;
    if (cgfd >= 0) {
        sp.flags |= CTL_SPAWN_CGROUP;
        fds[nfds++] = cgfd;
    }
    struct iovec iov = {.iov_base = &sp, .iov_len = sizeof(sp)};
    ssize_t n = fd_sendmsg(z->ctl, &iov, 1, fds, nfds, MSG_NOSIGNAL);
    struct ctl_event ev;
    int fd = -1;
    bool sent = n == (ssize_t)sizeof(sp);
    int r =
        sent ? zygote_reply(z, &ev, &fd, e) : err_set(e, n < 0 ? (int)n : -EIO, "send CTL_SPAWN");
    if (r < 0) {
        fd = fd_close(fd);
        log_warn("pool=%s pid=%d msg=\"fork server lost, restarting it later\" detail=\"%s\"",
                 z->pool, (int)z->pid, err_msg(e));
        zygote_stop(z);
        if (sent) {
            return err_setx(e, -ECONNRESET, "the fork server was lost during the request (%s)",
                            err_msg(e));
        }
        return -EAGAIN;
    }
    if (ev.type == CTL_SPAWNED && fd >= 0 && ev.pid > 0) {
        *pidfd = fd;
        return (pid_t)ev.pid;
    }
    fd = fd_close(fd);
    if (ev.type == CTL_SETUP_FAILED) {
        return err_setx(e, ev.err < 0 ? ev.err : -EIO, "fork server: %s", ev.msg);
    }
    log_warn("pool=%s msg=\"fork server sent an unexpected reply, restarting it later\"", z->pool);
    zygote_stop(z);
    return -EAGAIN;
}

int zygote_spawn(struct zygote *z, const struct spawn_plan *plan, const struct ctl_setup *setup,
                 const struct image *img, struct spawn_result *ret, struct err *e)
{
    pthread_mutex_lock(&z->lock);
    if (z->fail_streak >= ZYGOTE_MAX_FAILURES) {
        pthread_mutex_unlock(&z->lock);
        return -EAGAIN;
    }
    if (z->pid > 0 && !zygote_matches(z, setup)) {
        log_info("pool=%s msg=\"pool setup changed, new fork server\"", z->pool);
        zygote_stop(z);
    } else if (z->pid > 0 && zygote_etc_changed(z)) {
        log_info("pool=%s msg=\"the host's loader files changed, new fork server\"", z->pool);
        zygote_stop(z);
    }
    int r = 0;
    if (z->pid <= 0) {
        struct err ze = ERR_INIT;
        r = zygote_start(z, plan, setup, img, &ze);
        if (r < 0) {
            zygote_note_failure(z);
            log_warn("pool=%s msg=\"cannot start the fork server%s\" detail=\"%s\"", z->pool,
                     z->fail_streak >= ZYGOTE_MAX_FAILURES
                         ? ", making sandboxes without it from now"
                         : "",
                     err_msg(&ze));
            pthread_mutex_unlock(&z->lock);
            return -EAGAIN;
        }
    }
    int pidfd = -1;
    pid_t pid = zygote_fork(z, plan, &pidfd, e);
    if (pid == -EAGAIN || pid == -ECONNRESET) {
        zygote_note_failure(z);
    } else if (pid > 0) {
        z->fail_streak = 0;
        pthread_mutex_lock(&z->stats_lock);
        z->stats.spawned++;
        pthread_mutex_unlock(&z->stats_lock);
    }
    pthread_mutex_unlock(&z->lock);
    if (pid < 0) {
        return pid;
    }
    r = spawn_place(plan, pid, e);
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

void zygote_get_stats(struct zygote *z, struct zygote_stats *ret)
{
    pthread_mutex_lock(&z->stats_lock);
    *ret = z->stats;
    pthread_mutex_unlock(&z->stats_lock);
}
