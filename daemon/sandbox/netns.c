/* SPDX-License-Identifier: MIT */
/* A free list of clean network namespaces, created from a worker thread with
 * unshare(CLONE_NEWNET) and recycled after checking their sockstat files (opened inside
 * each at creation) for sockets. It never leaves the calling thread in another namespace:
 * a failed switch back aborts. */
#define LOG_MOD "netns"
#include "sandbox/netns.h"

#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/util.h"

struct netns_pool {
    pthread_mutex_t lock;
    struct netns_ref *free;
    uint32_t n_free;
    uint32_t max_free;
    struct netns_stats stats;
};

int netns_pool_new(uint32_t max_free, struct netns_pool **ret, struct err *e)
{
    (void)e;
    struct netns_pool *p = xcalloc(1, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    p->max_free = max_free;
    p->free = xcalloc(max_free ? max_free : 1, sizeof(*p->free));
    *ret = p;
    return 0;
}

struct netns_pool *netns_pool_free(struct netns_pool *p)
{
    if (!p) {
        return NULL;
    }
    for (uint32_t i = 0; i < p->n_free; i++) {
        netns_ref_close(&p->free[i]);
    }
    pthread_mutex_destroy(&p->lock);
    free(p->free);
    free(p);
    return NULL;
}

/* Runs in the target namespace between enter() and leave(). */
static int enter(int target, int *ret_self)
{
    int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0) {
        return -errno;
    }
    if (target >= 0 && setns(target, CLONE_NEWNET) < 0) {
        int r = -errno;
        fd_close(self);
        return r;
    }
    *ret_self = self;
    return 0;
}

static void leave(int self)
{
    /* SECURITY: a worker thread left inside a sandbox's namespace would resolve names and
     * dial for the egress proxy from there. This cannot fail for a namespace we held open;
     * if it does, stopping is the only safe answer. */
    if (setns(self, CLONE_NEWNET) < 0) {
        log_error_errno(-errno, "msg=\"cannot return to the host network namespace, aborting\"");
        abort();
    }
    fd_close(self);
}

static int lo_up(void)
{
    scoped_close int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    str_copy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name));
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
        return -errno;
    }
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) {
        return -errno;
    }
    return 0;
}

void netns_ref_close(struct netns_ref *ref)
{
    fd_close(ref->fd);
    fd_close(ref->sockstat);
    fd_close(ref->sockstat6);
    *ref = NETNS_REF_NONE;
}

static int create(struct netns_ref *ret, struct err *e)
{
    int self = -1;
    int r = enter(-1, &self);
    if (r < 0) {
        return err_set(e, r, "open own network namespace");
    }
    if (unshare(CLONE_NEWNET) < 0) {
        r = -errno;
        fd_close(self);
        return err_set(e, r, "unshare(CLONE_NEWNET)");
    }
    struct netns_ref ref = NETNS_REF_NONE;
    ref.fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    r = ref.fd < 0 ? -errno : lo_up();
    if (r == 0) {
        ref.sockstat = open("/proc/thread-self/net/sockstat", O_RDONLY | O_CLOEXEC);
        r = ref.sockstat < 0 ? -errno : 0;
    }
    if (r == 0) {
        ref.sockstat6 = open("/proc/thread-self/net/sockstat6", O_RDONLY | O_CLOEXEC);
        r = ref.sockstat6 < 0 && errno != ENOENT ? -errno : 0; /* ENOENT: no IPv6 */
    }
    leave(self);
    if (r < 0) {
        netns_ref_close(&ref);
        return err_set(e, r, "set up a new network namespace (lo up, sockstat files)");
    }
    *ret = ref;
    return 0;
}

int netns_try_acquire(struct netns_pool *p, struct netns_ref *ret)
{
    int r = -EAGAIN;
    pthread_mutex_lock(&p->lock);
    if (p->n_free > 0) {
        *ret = p->free[--p->n_free];
        p->stats.reused++;
        r = 0;
    }
    pthread_mutex_unlock(&p->lock);
    return r;
}

int netns_acquire(struct netns_pool *p, struct netns_ref *ret, struct err *e)
{
    if (netns_try_acquire(p, ret) == 0) {
        return 0;
    }
    int r = create(ret, e);
    if (r == 0) {
        pthread_mutex_lock(&p->lock);
        p->stats.created++;
        pthread_mutex_unlock(&p->lock);
    }
    return r;
}

/* The sockstat counters kept per network namespace; "alloc", "orphan" and "mem" are global
 * to the host and say nothing about this namespace. */
static bool per_netns(const char *key)
{
    return strcmp(key, "used") == 0 || strcmp(key, "inuse") == 0 || strcmp(key, "tw") == 0 ||
           strcmp(key, "memory") == 0;
}

/* True when every per-namespace counter of a sockstat file (fd, -1 for none) is 0.
 * Reading them costs nothing, unlike /proc/net/tcp, which walks the host's whole
 * connection table. */
static bool sockstat_zero(int fd)
{
    if (fd < 0) {
        return true;
    }
    char buf[1024];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0 || (size_t)n == sizeof(buf) - 1) {
        return false;
    }
    buf[n] = '\0';
    char *save = NULL;
    bool after_name = false;
    const char *key = NULL;
    for (char *tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        size_t len = strlen(tok);
        if (tok[len - 1] == ':') {
            after_name = true; /* "TCP:" starts a line: key/value pairs follow */
            key = NULL;
            continue;
        }
        if (!after_name) {
            return false;
        }
        if (!key) {
            key = tok;
            continue;
        }
        if (per_netns(key) && strcmp(tok, "0") != 0) {
            return false;
        }
        key = NULL;
    }
    return true;
}

void netns_release(struct netns_pool *p, struct netns_ref *ref)
{
    struct netns_ref r = *ref;
    *ref = NETNS_REF_NONE;
    if (r.fd < 0) {
        netns_ref_close(&r);
        return;
    }
    pthread_mutex_lock(&p->lock);
    bool room = p->n_free < p->max_free;
    pthread_mutex_unlock(&p->lock);
    /* Everything a task could leave in a namespace it has no capability over is a socket: a
     * listener, a lingering TCP connection (TIME_WAIT, orphans), a socket still being torn
     * down. "sockets: used" counts every socket of the namespace, unix ones included. */
    bool keep = room && r.sockstat >= 0 && sockstat_zero(r.sockstat) && sockstat_zero(r.sockstat6);
    pthread_mutex_lock(&p->lock);
    if (keep && p->n_free < p->max_free) {
        p->free[p->n_free++] = r;
        r = NETNS_REF_NONE;
    } else {
        p->stats.dropped++;
    }
    pthread_mutex_unlock(&p->lock);
    netns_ref_close(&r);
}

void netns_get_stats(struct netns_pool *p, struct netns_stats *ret)
{
    pthread_mutex_lock(&p->lock);
    *ret = p->stats;
    pthread_mutex_unlock(&p->lock);
}
