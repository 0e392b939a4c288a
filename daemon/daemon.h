/* SPDX-License-Identifier: MIT */
#pragma once
/* struct daemon: the one owner of all of sbxd's state, reached through loop->data or a
 * handle's owner. Loop thread only. */
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/task.h"
#include "sandbox/idslot.h"
#include "sandbox/kit.h"

struct config;
struct cgroup_root;
struct pool;
struct rpc;
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
struct image;
struct sched;
struct signals;

struct daemon {
    uv_loop_t *loop;
    const struct config *cfg;
    struct cgroup_root *cg_root;
    struct seccomp_set *seccomp;
    struct netns_pool *netns; /* recycled network namespaces (NULL: one per sandbox) */
    struct idslots ids;       /* host id blocks, one per live sandbox (with userns) */
    struct workq *workq;      /* the threads that create and remove sandboxes */
    char *init_path;
    struct pool **pools; /* made here; core/sched.c schedules them */
    size_t n_pools;
    struct sched *sched;     /* refills, the drain's counters (core/sched.c) */
    struct image *images;    /* the pools' images (image.c) */
    struct sandbox_env senv; /* what every sandbox is made with (sandbox/kit.h) */
    struct task_env tenv;    /* what every task needs (core/task.h) */
    struct signals *signals; /* signals.c */
    struct rpc *rpc;         /* both servers' handler (api/rpc.c) */
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
    bool draining;              /* SIGTERM received: no new tasks, no refills */
    bool killing;               /* grace over or second SIGTERM: kill everything */
    bool drain_done;
    bool late_signal_logged; /* one after the drain was logged */
    uint64_t start_ns;
    uv_timer_t drain_timer;
    int exit_code;
};
