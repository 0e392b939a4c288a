/* SPDX-License-Identifier: MIT */
#pragma once
/* The scheduler across pools: which pool gets the next sandbox creation (bounded by the
 * config's refill_parallelism), the top-up timer, the drain's bookkeeping, and the daemon's
 * live counters (sandboxes being created, sandboxes not yet freed, tasks running), each
 * written here only. Loop thread only. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct config;
struct idslots;
struct pool;
struct sched;

/* Called when something the drain waits for has finished (a task, a sandbox, a client). */
typedef void (*sched_progress_cb)(void *arg);

struct sched_stats {
    uint32_t creating;       /* sandboxes being created, all pools (<= refill_parallelism) */
    uint32_t live_sandboxes; /* not yet freed, all pools */
    uint32_t running_tasks;  /* started and not yet answered */
};

/* Makes the scheduler; ids (NULL without userns) is read to hold refills while every block
 * of host ids is taken. Returns 0 or -errno. */
int sched_new(uv_loop_t *loop, const struct config *cfg, const struct idslots *ids,
              sched_progress_cb progress, void *arg, struct sched **ret);
/* The pools it schedules, borrowed (their array stays the caller's until sched_close). */
void sched_set_pools(struct sched *s, struct pool **pools, size_t n);
/* Closes its timer and frees it once closed. Accepts NULL. */
void sched_close(struct sched *s);

/* Finds a pool by name, or NULL. */
struct pool *sched_find_pool(const struct sched *s, const char *name);
/* The pools in config order: how many, and the i-th (i < sched_n_pools). */
size_t sched_n_pools(const struct sched *s);
struct pool *sched_pool(const struct sched *s, size_t i);
/* Starts as many sandbox creations as the global refill bound allows, pools with queued
 * tasks first, then pools below their warm target. A pool still at half its target or more
 * is topped up only once no task has started for the config's topup_idle (20 ms; 0: at
 * once): a sandbox made beside a running task slows it (BENCHMARKS.md, session 16), so
 * while tasks keep coming the pool is let down to half and then refilled in one go, and
 * under a trickle of tasks it is refilled between them. */
void sched_refill(struct sched *s);

/* The drain began: no more refills, queued tasks fail, warm sandboxes go. */
void sched_drain(struct sched *s);
bool sched_draining(const struct sched *s);
/* While draining: kills the warm sets once no task runs, and says whether every task and
 * sandbox is gone. */
bool sched_drained(struct sched *s);

/* The counters' writers, called from core only. */
void sched_sandbox_begun(struct sched *s);   /* a creation starts: creating, live + 1 */
void sched_sandbox_created(struct sched *s); /* it finished (either way): creating - 1 */
void sched_sandbox_freed(struct sched *s);   /* live - 1; refills and tells the drain */
void sched_task_started(struct sched *s, uint64_t now_ns); /* pushes the top-up back */
void sched_task_ended(struct sched *s);                    /* tells the drain */
void sched_get_stats(const struct sched *s, struct sched_stats *ret);
