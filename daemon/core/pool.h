/* SPDX-License-Identifier: MIT */
#pragma once
/* A pool: its warm set, the bounded queue of tasks waiting for a sandbox, creation under the
 * scheduler's bound (sched.h) with backoff on failures, and its counters. Its sandboxes are
 * made from its kit (sandbox/kit.h). Loop thread only. */
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "lib/err.h"
#include "sandbox/forkserver.h"
#include "sandbox/kit.h"
#include "sandbox/sandbox.h"

struct metrics_pool;
struct pool_config;
struct sandbox_kit;
struct sched;
struct pool_waiter;

/* What a queued task is to its pool: embedded in the task (found with container_of), told
 * once, through ops, that it got a sandbox or that none will come. */
struct pool_waiter_ops {
    /* sb is WARM and the waiter's: it must hand sb its task (sandbox_start_task). */
    void (*got)(struct pool_waiter *w, struct sandbox *sb);
    /* No sandbox will come (code and message for the client): the waiter is off the queue. */
    void (*refused)(struct pool_waiter *w, const char *code, const char *message);
};

struct pool_waiter {
    const struct pool_waiter_ops *ops;
    bool cold; /* it waited in the queue (set by pool_submit) */
    struct pool_waiter *prev;
    struct pool_waiter *next;
};

struct pool {
    struct sched *sched;
    struct sandbox_kit *kit; /* owned */
    const struct pool_config *pc;
    /* FIFOs (lib/list.h, oldest at the head): WARM sandboxes, and the waiters. */
    struct sandbox *warm_head;
    struct sandbox *warm_tail;
    uint32_t n_state[SB_DEAD + 1]; /* sandboxes of this pool by state, until freed */
    struct pool_waiter *q_head;
    struct pool_waiter *q_tail;
    uint32_t n_queued;
    uint32_t n_sessions;  /* sessions open or opening (pool_session_begin) */
    bool topping_up;      /* fell below half its warm target: refilled to it without waiting */
    uint64_t created;     /* sandboxes that became WARM */
    uint64_t failed;      /* creations that failed */
    uint64_t tasks;       /* tasks started */
    uint64_t cold_starts; /* tasks that had to wait for a sandbox */
    uint32_t fail_streak; /* consecutive creation failures */
    uint64_t retry_at_ns; /* no creation before this (backoff) */
    uv_timer_t retry_timer;
    /* The pool's metrics series (the root sets it after metrics_new), or NULL. */
    struct metrics_pool *metrics;
};

/* Creates the pool over kit (which it owns from now on, also on failure); no sandbox yet:
 * sched_refill starts them. Returns 0 or -errno. */
int pool_new(struct sched *s, uv_loop_t *loop, struct sandbox_kit *kit, struct pool **ret,
             struct err *e);
/* Closes the pool's handles and frees it once closed, with its kit (which removes the
 * spare cgroups). Sandboxes must all be gone. */
void pool_close(struct pool *p);
/* Hands w a warm sandbox at once, or queues it. Returns 0, -EBUSY when the queue is full,
 * -ESHUTDOWN when draining. On success the pool owns the scheduling of w until w's got or
 * refused is called (never from within this call for refused). */
int pool_submit(struct pool *p, struct pool_waiter *w);
/* Removes a queued waiter (its client left, its token ended); no op is called. */
void pool_cancel(struct pool *p, struct pool_waiter *w);
/* A session of the pool begins (it counts against max_sessions from now), or ends. */
void pool_session_begin(struct pool *p);
void pool_session_end(struct pool *p);
/* Sessions open or opening, against the pool's max_sessions. */
uint32_t pool_sessions(const struct pool *p);

/* How many sandboxes the pool wants created now (0 when at target, max or in backoff). */
uint32_t pool_wanted(const struct pool *p);
/* Starts one sandbox creation (sched_refill decides when). */
void pool_grow(struct pool *p);
/* Drain: refuses every queued waiter with "shutting_down" and kills the warm set. */
void pool_drain(struct pool *p);
/* Sandboxes not yet freed. */
uint32_t pool_live(const struct pool *p);

/* What the pools method and the metrics' scrape read of a pool: a copy. */
struct pool_stats {
    uint32_t warm; /* sandboxes by state */
    uint32_t creating;
    uint32_t busy;     /* BUSY and HELD (a session's, between its commands) */
    uint32_t held;     /* sessions' sandboxes between commands (SB_HELD) */
    uint32_t sessions; /* sessions open or opening */
    uint32_t dying;    /* DYING and DEAD, until freed */
    uint32_t queued;
    uint64_t created;                    /* sandboxes that became WARM */
    uint64_t failed;                     /* creations that failed */
    uint64_t tasks;                      /* tasks started */
    uint64_t cold_starts;                /* tasks that had to wait for a sandbox */
    const char *image_state;             /* image_state_name of its image (static) */
    bool has_fork_server;                /* false: sandboxes are made from scratch */
    struct forkserver_stats fork_server; /* all 0 without one */
};
/* The pool's config (its name, targets and limits). */
const struct pool_config *pool_config(const struct pool *p);
/* Tasks waiting in its queue. */
uint32_t pool_queued(const struct pool *p);
/* Whether pool_submit would refuse a task now (-EBUSY): no warm sandbox for it and the
 * queue full. Lets a caller refuse before it creates and audits a task. */
bool pool_full(const struct pool *p);
void pool_get_stats(const struct pool *p, struct pool_stats *ret);
