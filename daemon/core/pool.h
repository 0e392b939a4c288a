/* SPDX-License-Identifier: MIT */
#pragma once
/* A pool: its warm set, the bounded queue of tasks waiting for a sandbox, refill bounded by
 * the pool's max and the daemon's refill parallelism, and its counters. Loop thread only. */
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "sandbox/cgroup.h"
#include "lib/err.h"
#include "sandbox/sandbox.h"

struct daemon;
struct image;
struct metrics_pool;
struct pool_config;
struct task;
struct sock_filter;

struct pool {
    struct daemon *d;
    const struct pool_config *pc;
    struct cgroup_limits limits;
    const struct sock_filter *bpf; /* seccomp program (owned by the daemon's set) or NULL */
    uint32_t bpf_n;
    struct sandbox *warm_head; /* FIFO of WARM sandboxes */
    struct sandbox *warm_tail;
    uint32_t n_state[SB_DEAD + 1]; /* sandboxes of this pool by state, until freed */
    struct task *q_head;           /* FIFO of tasks waiting for a sandbox */
    struct task *q_tail;
    uint32_t n_queued;
    bool topping_up;      /* fell below half its warm target: refilled to it without waiting */
    uint64_t created;     /* sandboxes that became WARM */
    uint64_t failed;      /* creations that failed */
    uint64_t tasks;       /* tasks started */
    uint64_t cold_starts; /* tasks that had to wait for a sandbox */
    uint32_t fail_streak; /* consecutive creation failures */
    uint64_t retry_at_ns; /* no creation before this (backoff) */
    uv_timer_t retry_timer;
    struct image *image; /* the pool's image (image.c; shared, owned by main) */
    bool image_wait;     /* its image is being verified: no sandbox until then */
    /* Emptied cgroups of this pool's dead sandboxes, reset for the next ones (sandbox.c);
     * at most pc->max, counting those being emptied (n_spare_pending). */
    struct cgroup **spare_cg;
    uint32_t n_spare;
    uint32_t n_spare_pending;
    /* The pool's fork server (forkserver.c), or NULL when sandboxes are made from scratch. */
    struct forkserver *forkserver;
    /* The pool's metrics series (main.c sets it after metrics_new), or NULL. */
    struct metrics_pool *metrics;
};

/* Creates the pool (no sandbox yet; daemon_refill starts them). Returns 0 or -errno. */
int pool_new(struct daemon *d, const struct pool_config *pc, struct pool **ret, struct err *e);
/* Closes the pool's handles and frees it once closed, removing its spare cgroups.
 * Sandboxes must all be gone. */
void pool_close(struct pool *p);
/* A spare cgroup for a new sandbox (the caller owns it), or NULL. */
struct cgroup *pool_take_cgroup(struct pool *p);
/* Whether one more emptied cgroup may be kept; if so, it counts as pending from now. */
bool pool_reserve_spare(struct pool *p);
/* Ends a reservation: cg (reset, owned by the pool from now; removed by pool_close) or
 * NULL when it was not kept. */
void pool_put_cgroup(struct pool *p, struct cgroup *cg);
/* Queues or starts a task. Returns 0, -EBUSY when the queue is full, -ESHUTDOWN when
 * draining. On success the pool owns the scheduling of t until task_start is called. */
int pool_submit(struct pool *p, struct task *t);
/* Removes a queued task (its client left). */
void pool_cancel(struct pool *p, struct task *t);
/* How many sandboxes the pool wants created now (0 when at target, max or in backoff). */
uint32_t pool_wanted(const struct pool *p);
/* Moves sb between state counters. */
void pool_sandbox_state(struct pool *p, struct sandbox *sb, enum sandbox_state to);
/* From sandbox.c: sb became WARM, creation failed, or sb left the warm set. */
void pool_sandbox_ready(struct pool *p, struct sandbox *sb);
void pool_sandbox_failed(struct pool *p, struct sandbox *sb, const struct err *e);
void pool_sandbox_unwarm(struct pool *p, struct sandbox *sb);
/* Drain: fails every queued task with -ESHUTDOWN and kills the warm set. */
void pool_drain(struct pool *p);
/* Sandboxes not yet freed. */
uint32_t pool_live(const struct pool *p);
