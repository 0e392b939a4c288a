/* SPDX-License-Identifier: MIT */
/* A pool's warm set, bounded queue and counters. Decides when sandboxes are created (the
 * daemon bounds how many at once across pools) and hands WARM sandboxes to tasks in FIFO
 * order. Never blocks: creation and removal are in sandbox.c, on worker threads. */
#define LOG_MOD "pool"
#include "core/pool.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "sandbox/cgroup.h"
#include "config/config.h"
#include "daemon.h"
#include "core/task.h"
#include "sandbox/image.h"
#include "lib/log.h"
#include "reaper.h"
#include "lib/list.h"
#include "lib/util.h"
#include "sandbox/forkserver.h"

#define BACKOFF_MIN_NS (50ULL * 1000 * 1000)
#define BACKOFF_MAX_NS (5ULL * 1000 * 1000 * 1000)

/* The disk a pool's sandboxes read their image from, for its io limits: a built image's
 * under images_dir (image.c) when it is there, else the host's /usr, which the host image
 * binds (and a built image that is missing falls back to). */
static int pool_io_disk(const struct daemon *d, const struct pool_config *pc, dev_t *ret,
                        struct err *e)
{
    scoped_free char *img = NULL;
    const char *path = "/usr";
    if (strcmp(pc->image, "host") != 0) {
        scoped_free char *dir = image_dir_of(d->cfg);
        img = xasprintf("%s/%s", dir, pc->image);
        if (access(img, F_OK) == 0) {
            path = img;
        }
    }
    int r = cgroup_block_disk(path, ret, e);
    return r < 0 ? err_prefix(e, r, "pool %s: io limits", pc->name) : 0;
}

int pool_new(struct daemon *d, const struct pool_config *pc, struct pool **ret, struct err *e)
{
    dev_t io_dev = 0;
    if (pool_config_limits_io(pc)) {
        int r = pool_io_disk(d, pc, &io_dev, e);
        if (r < 0) {
            return r;
        }
    }
    struct pool *p = xcalloc(1, sizeof(*p));
    p->d = d;
    p->pc = pc;
    p->limits.memory_bytes = pc->memory_bytes;
    p->limits.cpu = pc->cpu;
    p->limits.pids = pc->pids;
    p->limits.io_dev = io_dev;
    p->limits.io_read_bps = pc->io_read_bps;
    p->limits.io_read_iops = pc->io_read_iops;
    uv_timer_init(d->loop, &p->retry_timer);
    p->retry_timer.data = p;
    /* The fork server forks sandboxes into user namespaces: without them, none. */
    if (d->cfg->fork_server && d->cfg->userns) {
        p->forkserver = forkserver_new(pc->name, d->loop);
    }
    *ret = p;
    return 0;
}

static void pool_closed(uv_handle_t *h)
{
    free(h->data);
}

/* At shutdown, on the loop: the spares are empty, so this is one rmdir per hierarchy. */
static void free_spares(struct pool *p)
{
    for (uint32_t i = 0; i < p->n_spare; i++) {
        struct cgroup *cg = p->spare_cg[i];
        struct err e = ERR_INIT;
        if (cgroup_remove(cg, &e) < 0) {
            log_error("pool=%s cgroup=%s msg=\"spare cgroup not removed\" detail=\"%s\"",
                      p->pc->name, cgroup_name(cg), err_msg(&e));
        } else {
            reaper_untrack(p->d, cgroup_name(cg));
        }
        cgroup_free(cg);
    }
    p->n_spare = 0;
    free(p->spare_cg);
    p->spare_cg = NULL;
}

void pool_close(struct pool *p)
{
    free_spares(p);
    p->forkserver = forkserver_free(p->forkserver);
    uv_close((uv_handle_t *)&p->retry_timer, pool_closed);
}

struct cgroup *pool_take_cgroup(struct pool *p)
{
    return p->n_spare > 0 ? p->spare_cg[--p->n_spare] : NULL;
}

bool pool_reserve_spare(struct pool *p)
{
    if (p->d->draining || p->n_spare + p->n_spare_pending >= p->pc->max) {
        return false;
    }
    p->n_spare_pending++;
    return true;
}

void pool_put_cgroup(struct pool *p, struct cgroup *cg)
{
    p->n_spare_pending--;
    if (!cg) {
        return;
    }
    if (!p->spare_cg) {
        p->spare_cg = xcalloc(p->pc->max, sizeof(*p->spare_cg));
    }
    p->spare_cg[p->n_spare++] = cg;
}

uint32_t pool_live(const struct pool *p)
{
    uint32_t n = 0;
    for (int s = SB_CREATING; s <= SB_DEAD; s++) {
        n += p->n_state[s];
    }
    return n;
}

uint32_t pool_wanted(const struct pool *p)
{
    if (p->d->draining || p->image_wait || now_ns() < p->retry_at_ns) {
        return 0;
    }
    uint32_t ready = p->n_state[SB_WARM] + p->n_state[SB_CREATING];
    /* Each queued task needs a sandbox of its own, on top of the warm target. */
    uint32_t want = p->pc->warm + p->n_queued;
    /* Sandboxes that hold a place against max: all but the dying and dead. */
    uint32_t used = ready + p->n_state[SB_BUSY];
    if (ready >= want || used >= p->pc->max) {
        return 0;
    }
    uint32_t n = want - ready;
    uint32_t room = p->pc->max - used;
    return n < room ? n : room;
}

void pool_sandbox_state(struct pool *p, struct sandbox *sb, enum sandbox_state to)
{
    if (sb->state == to) {
        return;
    }
    p->n_state[sb->state]--;
    p->n_state[to]++;
}

static struct task *queue_pop(struct pool *p)
{
    struct task *t = p->q_head;
    if (t) {
        p->q_head = t->qnext;
        if (!p->q_head) {
            p->q_tail = NULL;
        }
        t->qnext = NULL;
        p->n_queued--;
    }
    return t;
}

static struct sandbox *warm_pop(struct pool *p)
{
    struct sandbox *sb = p->warm_head;
    if (sb) {
        p->warm_head = sb->next;
        if (!p->warm_head) {
            p->warm_tail = NULL;
        }
        sb->next = NULL;
    }
    return sb;
}

int pool_submit(struct pool *p, struct task *t)
{
    if (p->d->draining) {
        return -ESHUTDOWN;
    }
    if (!p->q_head) {
        struct sandbox *sb = warm_pop(p);
        if (sb) {
            p->tasks++;
            task_start(t, sb);
            daemon_refill(p->d);
            return 0;
        }
    }
    if (p->n_queued >= p->pc->queue) {
        return -EBUSY;
    }
    t->cold = true;
    SLIST_APPEND(p->q_head, p->q_tail, t, qnext);
    p->n_queued++;
    daemon_refill(p->d);
    return 0;
}

void pool_cancel(struct pool *p, struct task *t)
{
    struct task **pp = &p->q_head;
    struct task *prev = NULL;
    while (*pp && *pp != t) {
        prev = *pp;
        pp = &(*pp)->qnext;
    }
    if (!*pp) {
        return;
    }
    *pp = t->qnext;
    if (p->q_tail == t) {
        p->q_tail = prev;
    }
    t->qnext = NULL;
    p->n_queued--;
}

void pool_sandbox_ready(struct pool *p, struct sandbox *sb)
{
    p->created++;
    p->fail_streak = 0;
    struct task *t = queue_pop(p);
    if (t) {
        p->tasks++;
        p->cold_starts++;
        task_start(t, sb);
    } else {
        sb->next = NULL;
        if (p->warm_tail) {
            p->warm_tail->next = sb;
        } else {
            p->warm_head = sb;
        }
        p->warm_tail = sb;
    }
    daemon_refill(p->d);
}

static void retry_cb(uv_timer_t *h)
{
    struct pool *p = h->data;
    /* The timer runs on the loop's clock, cached when the failing iteration began, and can
     * fire before retry_at_ns (now_ns): pool_wanted would still say no and nothing would
     * wake the pool again, its queued tasks waiting for ever. Wait out the rest. */
    uint64_t now = now_ns();
    if (now < p->retry_at_ns) {
        uv_timer_start(&p->retry_timer, retry_cb, (p->retry_at_ns - now) / 1000000 + 1, 0);
        return;
    }
    daemon_refill(p->d);
}

void pool_sandbox_failed(struct pool *p, struct sandbox *sb, const struct err *e)
{
    p->failed++;
    p->fail_streak++;
    uint64_t backoff = BACKOFF_MIN_NS << (p->fail_streak < 7 ? p->fail_streak - 1 : 6);
    if (backoff > BACKOFF_MAX_NS) {
        backoff = BACKOFF_MAX_NS;
    }
    p->retry_at_ns = now_ns() + backoff;
    uv_timer_start(&p->retry_timer, retry_cb, backoff / 1000000 + 1, 0);
    log_error("pool=%s sb=%s streak=%u msg=\"sandbox creation failed, retrying in %llums\" "
              "detail=\"%s\"",
              p->pc->name, sb->id, p->fail_streak, (unsigned long long)(backoff / 1000000),
              err_msg(e));
    /* Tasks queued while nothing can be created would wait for ever: fail them when the
     * pool has nothing alive that could serve them. */
    if (p->fail_streak >= 3 && p->n_state[SB_WARM] == 0 && p->n_state[SB_BUSY] == 0) {
        struct task *t;
        while ((t = queue_pop(p))) {
            /* The cause (host paths, image state) stays in the log: agents get the pool. */
            char msg[128];
            (void)snprintf(msg, sizeof(msg),
                           "sandbox creation is failing in pool '%s'; the operator's log says why",
                           p->pc->name);
            task_fail(t, "internal", msg);
        }
    }
}

void pool_sandbox_unwarm(struct pool *p, struct sandbox *sb)
{
    struct sandbox **pp = &p->warm_head;
    struct sandbox *prev = NULL;
    while (*pp && *pp != sb) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp) {
        return;
    }
    *pp = sb->next;
    if (p->warm_tail == sb) {
        p->warm_tail = prev;
    }
    sb->next = NULL;
}

void pool_drain(struct pool *p)
{
    struct task *t;
    while ((t = queue_pop(p))) {
        task_fail(t, "shutting_down", "sbxd is shutting down");
    }
    struct sandbox *sb;
    while ((sb = p->warm_head)) {
        sandbox_kill(sb); /* unwarms it */
    }
}
