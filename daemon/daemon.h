/* SPDX-License-Identifier: MIT */
#pragma once
/* struct daemon: the one owner of all of sbxd's state, reached through loop->data or a
 * handle's owner. Loop thread only. */
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "sandbox/idslot.h"

struct config;
struct cgroup_root;
struct pool;
struct server;
struct seccomp_set;
struct netns_pool;
struct audit;
struct egress;
struct scrub;
struct token_store;
struct reaper;
struct metrics;
struct http_server;

struct daemon {
    uv_loop_t *loop;
    const struct config *cfg;
    struct cgroup_root *cg_root;
    struct seccomp_set *seccomp;
    struct netns_pool *netns; /* recycled network namespaces (NULL: one per sandbox) */
    struct idslots ids;       /* host id blocks, one per live sandbox (with userns) */
    struct workq *workq;      /* the threads that create and remove sandboxes */
    char *init_path;
    struct pool **pools;
    size_t n_pools;
    struct server *agents;
    struct server *admin;
    struct audit *audit;        /* the audit trail (audit.c) */
    struct scrub *scrub;        /* secret scrubbing for the trail and the log (scrub.c) */
    struct token_store *tokens; /* capability tokens (token.c) */
    struct egress *egress;      /* egress profiles and credentials (egress.c) */
    struct reaper *reaper;      /* leftovers and leaks (reaper.c) */
    struct metrics *metrics;    /* sbxd's series (metrics.c); NULL before start-up ends */
    struct http_server *http;   /* the metrics listener; NULL when disabled or closed */
    uint32_t instance;          /* random, prefixes sandbox and task ids */
    uint64_t next_sandbox;
    uint64_t next_task;
    uint32_t creating;       /* sandboxes being created, all pools (<= refill_parallelism) */
    uint32_t live_sandboxes; /* not yet freed, all pools */
    uint32_t running_tasks;
    bool draining; /* SIGTERM received: no new tasks, no refills */
    bool killing;  /* grace over or second SIGTERM: kill everything */
    bool drain_done;
    bool signals_started;         /* signals.c: handles to close */
    bool late_signal_logged;      /* signals.c: one after the drain was logged */
    uv_work_t signals_pool_probe; /* signals.c: starts libuv's pool with the mask */
    uint64_t start_ns;
    uv_signal_t sig_term;
    uv_signal_t sig_int;
    uv_signal_t sig_hup;
    uv_timer_t drain_timer;
    /* Topping pools up to their warm target waits while tasks keep starting (daemon_refill):
     * the last start (task_start sets it), and the timer that tops up once none has started
     * for topup_idle. */
    uint64_t last_task_start_ns;
    uv_timer_t topup_timer;
    int exit_code;
};

/* Finds a pool by name, or NULL. */
struct pool *daemon_find_pool(struct daemon *d, const char *name);
/* Starts as many sandbox creations as the global refill bound allows, pools with queued
 * tasks first, then pools below their warm target. A pool still at half its target or more
 * is topped up only once no task has started for the config's topup_idle (20 ms; 0: at
 * once): a sandbox made beside a running task slows it (at concurrency 1 here, p50 2.62
 * against 1.97 ms with no refill at all), so while tasks keep coming the pool is let down
 * to half and then refilled in one go, and under a trickle of tasks it is refilled between
 * them. */
void daemon_refill(struct daemon *d);
/* Called when something the drain waits for has finished (a task, a sandbox). */
void daemon_drain_progress(struct daemon *d);
