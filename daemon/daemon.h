/* SPDX-License-Identifier: MIT */
#pragma once
/* struct daemon: the one owner of all of sbxd's state, reached through a handle's owner
 * (container_of) or a callback's arg; and its life (daemon.c): start-up as main.c's table of steps,
 * the drain, and the one way out of both. Loop thread only. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/task.h"
#include "lib/err.h"
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
struct session_table;
struct daemon;

/* The command line (main.c): what daemon.c's steps read of it. */
struct sbxd_flags {
    const char *config_path, *socket, *admin_socket, *state_dir, *metrics, *log_level;
    bool check_only, require_images;
    const char *image_hash, *export_seccomp;
    const char *mount_roots[64];
    size_t n_mount_roots; /* may exceed the array: the flags step refuses it */
};

/* A step's start returns it when sbxd has nothing more to do (--check-config): the steps
 * so far are undone and sbxd exits 0. */
#define DAEMON_STEP_EXIT 1

/* One step of start-up (main.c's table). start makes a part of d: 0, DAEMON_STEP_EXIT, or
 * -errno with e saying why (printed as "sbxd: <e>", then sbxd exits with exit_code). stop
 * (NULL: nothing to stop) undoes what keeps the loop alive or must end before it does:
 * run in reverse by the drain's end, or after a failed start-up, and then never again. A
 * step whose start failed is stopped too, so stop takes a half-done start. Memory is not
 * stop's: daemon_exit frees every part in one order of its own. */
struct daemon_step {
    const char *name; /* what the step makes, for the reader of the table */
    int (*start)(struct daemon *d, struct err *e);
    void (*stop)(struct daemon *d);
    int exit_code; /* when start fails (sysexits.h: 78 config, 73 can't create, ...) */
};

struct daemon {
    uv_loop_t *loop;
    const struct config *cfg;
    const struct sbxd_flags *flags; /* the command line (main.c), read by start-up only */
    const struct daemon_step *steps;
    size_t steps_begun; /* steps whose start was called: the ones daemon_stop undoes */
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
    struct audit *audit;            /* the audit trail (audit.c) */
    struct scrub *scrub;            /* secret scrubbing for the trail and the log (scrub.c) */
    struct token_store *tokens;     /* capability tokens (token.c) */
    struct session_table *sessions; /* open sessions (core/session.c) */
    struct egress *egress;          /* egress profiles and credentials (egress.c) */
    struct reaper *reaper;          /* leftovers and leaks (reaper.c) */
    struct metrics *metrics;        /* sbxd's series (metrics.c); NULL before start-up ends */
    struct http_server *http;       /* the metrics listener; NULL when disabled or closed */
    uint32_t instance;              /* random, prefixes sandbox and task ids */
    bool draining;                  /* SIGTERM received: no new tasks, no refills */
    bool killing;                   /* grace over or second SIGTERM: kill everything */
    bool drain_done;
    bool late_signal_logged; /* one after the drain was logged */
    uint64_t start_ns;
    uv_timer_t drain_timer;
};

/* Runs steps[0..n) in order on d (zeroed but for flags). Returns -1 when every step
 * started (run the loop, then daemon_exit), or the exit code to hand to daemon_exit: a
 * step's on failure (its message printed), 0 after DAEMON_STEP_EXIT. */
int daemon_start(struct daemon *d, const struct daemon_step *steps, size_t n);
/* The one way out, after the loop or a failed start-up: stops what is still started
 * (daemon_stop), lets the loop finish closing, frees every part and closes the loop.
 * Returns code. */
int daemon_exit(struct daemon *d, int code);

/* The steps daemon.c makes: the parts that call back into the drain or the root. Each
 * start returns 0 or -errno with e; a stop accepts a half-done start. */
int daemon_drain_timer_start(struct daemon *d, struct err *e);
void daemon_drain_timer_stop(struct daemon *d);
int daemon_audit_start(struct daemon *d, struct err *e);
void daemon_audit_stop(struct daemon *d);
int daemon_pools_start(struct daemon *d, struct err *e);
void daemon_pools_stop(struct daemon *d);
int daemon_images_start(struct daemon *d, struct err *e); /* reads flags: --require-images */
void daemon_images_stop(struct daemon *d);
int daemon_metrics_start(struct daemon *d, struct err *e);
int daemon_tokens_start(struct daemon *d, struct err *e);
void daemon_tokens_stop(struct daemon *d);
int daemon_servers_start(struct daemon *d, struct err *e);
void daemon_servers_stop(struct daemon *d);
int daemon_signals_start(struct daemon *d, struct err *e);
void daemon_signals_stop(struct daemon *d);
