/* SPDX-License-Identifier: MIT */
/* The refill scheduler across pools and the live counters: one sandbox creation per pool per
 * round under refill_parallelism, queued tasks first, warm targets after (with the top-up
 * delay). Each counter of struct sched_stats is written here only. */
#define LOG_MOD "sched"
#include "core/sched.h"

#include <string.h>

#include "config/config.h"
#include "core/pool.h"
#include "lib/alloc.h"
#include "lib/util.h"
#include "sandbox/idslot.h"

struct sched {
    const struct config *cfg;
    const struct idslots *ids;
    struct pool **pools;
    size_t n_pools;
    struct sched_stats st;
    bool draining;
    /* Topping pools up to their warm target waits while tasks keep starting
     * (sched_refill): the last start, and the timer that tops up once none has started
     * for topup_idle. */
    uint64_t last_task_start_ns;
    uv_timer_t topup_timer;
    sched_progress_cb progress;
    void *arg;
};

int sched_new(uv_loop_t *loop, const struct config *cfg, const struct idslots *ids,
              sched_progress_cb progress, void *arg, struct sched **ret)
{
    struct sched *s = xcalloc(1, sizeof(*s));
    s->cfg = cfg;
    s->ids = ids;
    s->progress = progress;
    s->arg = arg;
    uv_timer_init(loop, &s->topup_timer);
    s->topup_timer.data = s;
    *ret = s;
    return 0;
}

void sched_set_pools(struct sched *s, struct pool **pools, size_t n)
{
    s->pools = pools;
    s->n_pools = n;
}

static void sched_closed(uv_handle_t *h)
{
    free(h->data);
}

void sched_close(struct sched *s)
{
    if (!s) {
        return;
    }
    uv_timer_stop(&s->topup_timer);
    uv_close((uv_handle_t *)&s->topup_timer, sched_closed);
}

struct pool *sched_find_pool(const struct sched *s, const char *name)
{
    for (size_t i = 0; i < s->n_pools; i++) {
        if (strcmp(s->pools[i]->pc->name, name) == 0) {
            return s->pools[i];
        }
    }
    return NULL;
}

size_t sched_n_pools(const struct sched *s)
{
    return s->n_pools;
}

struct pool *sched_pool(const struct sched *s, size_t i)
{
    return s->pools[i];
}

static void topup_cb(uv_timer_t *h)
{
    sched_refill(h->data);
}

/* Whether p waits to be topped up to its warm target: no task waits for it, a task started
 * within topup_idle, and it has not fallen below half its target since it was last full
 * (from there it is refilled to the target in one go, without waiting). */
static bool topup_waits(const struct sched *s, struct pool *p, uint64_t now)
{
    uint32_t ready = p->n_state[SB_WARM] + p->n_state[SB_CREATING];
    if (ready >= p->pc->warm) {
        p->topping_up = false;
        return false;
    }
    if (ready < (p->pc->warm + 1) / 2) {
        p->topping_up = true;
    }
    return !p->topping_up && p->n_queued == 0 &&
           now < s->last_task_start_ns + s->cfg->topup_idle_ns;
}

void sched_refill(struct sched *s)
{
    if (s->draining) {
        return;
    }
    uint32_t limit = s->cfg->refill_parallelism;
    uint64_t now = clock_now_ns();
    bool waiting = false;
    /* Pools with waiting tasks first, then the warm targets, one sandbox per pool per
     * round so that no pool starves another. */
    for (int pass = 0; pass < 2 && s->st.creating < limit; pass++) {
        bool progress = true;
        while (progress && s->st.creating < limit) {
            progress = false;
            for (size_t i = 0; i < s->n_pools && s->st.creating < limit; i++) {
                struct pool *p = s->pools[i];
                if (pass == 0 && p->n_queued == 0) {
                    continue;
                }
                if (pass == 1 && topup_waits(s, p, now)) {
                    waiting = waiting || pool_wanted(p) > 0;
                    continue;
                }
                if (pool_wanted(p) > 0) {
                    if (s->cfg->userns && s->ids->used == s->ids->slots) {
                        /* Every block of host ids is held (dying sandboxes still hold
                         * theirs): a freed sandbox refills when one comes back. */
                        return;
                    }
                    pool_grow(p);
                    progress = true;
                }
            }
        }
    }
    if (waiting) {
        uint64_t at = s->last_task_start_ns + s->cfg->topup_idle_ns;
        uv_timer_start(&s->topup_timer, topup_cb, at > now ? (at - now + 999999) / 1000000 : 0, 0);
    }
}

void sched_drain(struct sched *s)
{
    s->draining = true;
    uv_timer_stop(&s->topup_timer);
    for (size_t i = 0; i < s->n_pools; i++) {
        pool_drain(s->pools[i]);
    }
}

bool sched_draining(const struct sched *s)
{
    return s->draining;
}

bool sched_drained(struct sched *s)
{
    if (s->st.running_tasks == 0) {
        /* Nothing left to wait for: warm sandboxes and late creations go too. */
        for (size_t i = 0; i < s->n_pools; i++) {
            pool_drain(s->pools[i]);
        }
    }
    return s->st.running_tasks == 0 && s->st.live_sandboxes == 0;
}

void sched_sandbox_begun(struct sched *s)
{
    s->st.creating++;
    s->st.live_sandboxes++;
}

void sched_sandbox_created(struct sched *s)
{
    s->st.creating--;
}

/* Tells the drain that something it waits for finished. */
static void sched_progress(struct sched *s)
{
    if (s->progress) {
        s->progress(s->arg);
    }
}

void sched_sandbox_freed(struct sched *s)
{
    s->st.live_sandboxes--;
    sched_refill(s);
    sched_progress(s);
}

void sched_task_started(struct sched *s, uint64_t now)
{
    s->st.running_tasks++;
    s->last_task_start_ns = now;
}

void sched_task_ended(struct sched *s)
{
    s->st.running_tasks--;
    sched_progress(s);
}

void sched_get_stats(const struct sched *s, struct sched_stats *ret)
{
    *ret = s->st;
}
