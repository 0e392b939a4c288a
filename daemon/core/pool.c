/* SPDX-License-Identifier: MIT */
/* A pool's warm set, bounded queue and counters. Decides when its sandboxes are created
 * (the scheduler bounds how many at once across pools) and hands WARM sandboxes to waiters
 * in FIFO order. Never blocks: creation and removal are in sandbox.c, on worker threads. */
#define LOG_MOD "pool"
#include "core/pool.h"

#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "core/sched.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "metrics/metrics.h"
#include "lib/list.h"
#include "lib/util.h"
#include "sandbox/image.h"
#include "sandbox/kit.h"

#define BACKOFF_MIN_NS (50ULL * 1000 * 1000)
#define BACKOFF_MAX_NS (5ULL * 1000 * 1000 * 1000)

static void retry_cb(uv_timer_t *h);

int pool_new(struct sched *s, uv_loop_t *loop, struct sandbox_kit *kit, struct pool **ret,
             struct err *e)
{
    (void)e;
    struct pool *p = xcalloc(1, sizeof(*p));
    p->sched = s;
    p->kit = kit;
    p->pc = kit->pc;
    uv_timer_init(loop, &p->retry_timer);
    p->retry_timer.data = p;
    *ret = p;
    return 0;
}

static void pool_closed(uv_handle_t *h)
{
    free(h->data);
}

void pool_close(struct pool *p)
{
    p->kit = kit_free(p->kit);
    uv_close((uv_handle_t *)&p->retry_timer, pool_closed);
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
    if (sched_draining(p->sched) || kit_image_pending(p->kit) || clock_now_ns() < p->retry_at_ns) {
        return 0;
    }
    uint32_t ready = p->n_state[SB_WARM] + p->n_state[SB_CREATING];
    /* Each queued task needs a sandbox of its own, on top of the warm target. */
    uint32_t want = p->pc->warm + p->n_queued;
    /* Sandboxes that hold a place against max: all but the dying and dead. */
    uint32_t used = ready + p->n_state[SB_BUSY] + p->n_state[SB_HELD];
    if (ready >= want || used >= p->pc->max) {
        return 0;
    }
    uint32_t n = want - ready;
    uint32_t room = p->pc->max - used;
    return n < room ? n : room;
}

static struct pool_waiter *queue_pop(struct pool *p)
{
    struct pool_waiter *w = p->q_head;
    if (w) {
        DLIST_UNLINK(p->q_head, p->q_tail, w);
        p->n_queued--;
    }
    return w;
}

static struct sandbox *warm_pop(struct pool *p)
{
    struct sandbox *sb = p->warm_head;
    if (sb) {
        DLIST_UNLINK(p->warm_head, p->warm_tail, sb);
    }
    return sb;
}

bool pool_full(const struct pool *p)
{
    return (p->q_head || !p->warm_head) && p->n_queued >= p->pc->queue;
}

int pool_submit(struct pool *p, struct pool_waiter *w)
{
    if (sched_draining(p->sched)) {
        return -ESHUTDOWN;
    }
    w->cold = false;
    if (pool_full(p)) {
        return -EBUSY;
    }
    if (!p->q_head) {
        struct sandbox *sb = warm_pop(p);
        if (sb) {
            p->tasks++;
            w->ops->got(w, sb);
            sched_refill(p->sched);
            return 0;
        }
    }
    w->cold = true;
    DLIST_APPEND(p->q_head, p->q_tail, w);
    p->n_queued++;
    sched_refill(p->sched);
    return 0;
}

void pool_cancel(struct pool *p, struct pool_waiter *w)
{
    for (struct pool_waiter *x = p->q_head; x; x = x->next) {
        if (x == w) {
            DLIST_UNLINK(p->q_head, p->q_tail, w);
            p->n_queued--;
            return;
        }
    }
}

void pool_session_begin(struct pool *p)
{
    p->n_sessions++;
}

void pool_session_end(struct pool *p)
{
    if (p->n_sessions > 0) {
        p->n_sessions--;
    }
}

uint32_t pool_sessions(const struct pool *p)
{
    return p->n_sessions;
}

/* ---- struct sandbox_ops: what the pool's sandboxes tell it ---- */

static void sandbox_state_cb(void *arg, struct sandbox *sb, enum sandbox_state from,
                             enum sandbox_state to)
{
    struct pool *p = arg;
    (void)sb;
    p->n_state[from]--;
    p->n_state[to]++;
}

static void sandbox_created_cb(void *arg, struct sandbox *sb, bool ok)
{
    struct pool *p = arg;
    (void)sb;
    sched_sandbox_created(p->sched);
    if (ok) {
        sched_refill(p->sched);
    }
}

static void sandbox_ready_cb(void *arg, struct sandbox *sb)
{
    struct pool *p = arg;
    metrics_sandbox_ready(p->metrics, sb->created_ns, sb->ready_ns);
    p->created++;
    p->fail_streak = 0;
    struct pool_waiter *w = queue_pop(p);
    if (w) {
        p->tasks++;
        p->cold_starts++;
        w->ops->got(w, sb);
    } else {
        DLIST_APPEND(p->warm_head, p->warm_tail, sb);
    }
    sched_refill(p->sched);
}

static void retry_cb(uv_timer_t *h)
{
    struct pool *p = h->data;
    /* The timer runs on the loop's clock, cached when the failing iteration began, and can
     * fire before retry_at_ns (clock_now_ns): pool_wanted would still say no and nothing would
     * wake the pool again, its queued tasks waiting for ever. Wait out the rest. */
    uint64_t now = clock_now_ns();
    if (now < p->retry_at_ns) {
        uv_timer_start(&p->retry_timer, retry_cb, (p->retry_at_ns - now) / 1000000 + 1, 0);
        return;
    }
    sched_refill(p->sched);
}

static void sandbox_failed_cb(void *arg, struct sandbox *sb, const struct err *e)
{
    struct pool *p = arg;
    p->failed++;
    p->fail_streak++;
    /* The shift stops at 7 (6.4 s) so that the ceiling, not the shift, bounds the wait. */
    uint64_t backoff = BACKOFF_MIN_NS << (p->fail_streak < 8 ? p->fail_streak - 1 : 7);
    if (backoff > BACKOFF_MAX_NS) {
        backoff = BACKOFF_MAX_NS;
    }
    p->retry_at_ns = clock_now_ns() + backoff;
    uv_timer_start(&p->retry_timer, retry_cb, backoff / 1000000 + 1, 0);
    log_error("pool=%s sb=%s streak=%u msg=\"sandbox creation failed, retrying in %llums\" "
              "detail=\"%s\"",
              p->pc->name, sb->id, p->fail_streak, (unsigned long long)(backoff / 1000000),
              err_msg(e));
    /* Tasks queued while nothing can be created would wait for ever: fail them when the
     * pool has nothing alive that could serve them. */
    if (p->fail_streak >= 3 && p->n_state[SB_WARM] == 0 && p->n_state[SB_BUSY] == 0) {
        struct pool_waiter *w;
        while ((w = queue_pop(p))) {
            /* The cause (host paths, image state) stays in the log: agents get the pool. */
            char msg[128];
            (void)snprintf(msg, sizeof(msg),
                           "sandbox creation is failing in pool '%s'; the operator's log says why",
                           p->pc->name);
            w->ops->refused(w, "internal", msg);
        }
    }
}

static void sandbox_unwarm_cb(void *arg, struct sandbox *sb)
{
    struct pool *p = arg;
    for (struct sandbox *x = p->warm_head; x; x = x->next) {
        if (x == sb) {
            DLIST_UNLINK(p->warm_head, p->warm_tail, sb);
            return;
        }
    }
}

static void sandbox_freed_cb(void *arg)
{
    struct pool *p = arg;
    p->n_state[SB_DEAD]--; /* freed: it no longer counts at all */
    sched_sandbox_freed(p->sched);
}

static const struct sandbox_ops pool_sandbox_ops = {
    .state = sandbox_state_cb,
    .created = sandbox_created_cb,
    .ready = sandbox_ready_cb,
    .failed = sandbox_failed_cb,
    .unwarm = sandbox_unwarm_cb,
    .freed = sandbox_freed_cb,
};

void pool_grow(struct pool *p)
{
    p->n_state[SB_CREATING]++;
    sched_sandbox_begun(p->sched);
    sandbox_create(p->kit, &pool_sandbox_ops, p);
}

void pool_drain(struct pool *p)
{
    kit_drain(p->kit);
    struct pool_waiter *w;
    while ((w = queue_pop(p))) {
        w->ops->refused(w, "shutting_down", "sbxd is shutting down");
    }
    struct sandbox *sb;
    while ((sb = p->warm_head)) {
        sandbox_kill(sb); /* unwarms it */
    }
}

const struct pool_config *pool_config(const struct pool *p)
{
    return p->pc;
}

uint32_t pool_queued(const struct pool *p)
{
    return p->n_queued;
}

void pool_get_stats(const struct pool *p, struct pool_stats *ret)
{
    *ret = (struct pool_stats){
        .warm = p->n_state[SB_WARM],
        .creating = p->n_state[SB_CREATING],
        .busy = p->n_state[SB_BUSY] + p->n_state[SB_HELD], /* a session's, between commands */
        .held = p->n_state[SB_HELD],
        .sessions = p->n_sessions,
        .dying = p->n_state[SB_DYING] + p->n_state[SB_DEAD],
        .queued = p->n_queued,
        .created = p->created,
        .failed = p->failed,
        .tasks = p->tasks,
        .cold_starts = p->cold_starts,
        .image_state = image_state_name(p->kit->image),
        .has_fork_server = p->kit->forkserver != NULL,
    };
    if (p->kit->forkserver) {
        forkserver_get_stats(p->kit->forkserver, &ret->fork_server);
    }
}
