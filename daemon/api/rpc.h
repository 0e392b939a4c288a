/* SPDX-License-Identifier: MIT */
#pragma once
/* Method tables of both sockets: validate, authorize, dispatch. The only place where
 * errors meet the wire. The servers' handler (rpc_server_handler), and the client of every
 * task (struct task_sink over its connection). Loop thread only. */
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "api/server.h"
#include "core/task.h"

struct audit;
struct config;
struct metrics;
struct rpc;
struct sched;
struct session_table;
struct token_store;
struct workq;

/* Daemon-wide counters of the stats method that no folder below keeps alone: the root
 * gathers them when asked. */
struct rpc_host_stats {
    bool netns_recycling; /* network namespaces are recycled (else the three are 0) */
    uint64_t netns_created;
    uint64_t netns_reused;
    uint64_t netns_dropped;
    uint64_t id_blocks_held; /* blocks of host ids (idslot.h): 0 of 0 without userns */
    uint64_t id_blocks_total;
};

/* The handles the methods use, borrowed (they outlive the rpc); filled by the root. */
struct rpc_env {
    uv_loop_t *loop;
    const struct config *cfg;
    struct audit *audit;
    struct token_store *tokens;
    struct sched *sched; /* the pools, their counters, and whether sbxd is draining */
    struct task_env *tenv;
    struct metrics *metrics;
    struct session_table *sessions; /* open sessions (core/session.h) */
    struct workq *workq;            /* sessions' file I/O runs on its workers */
    void (*host_stats)(void *arg, struct rpc_host_stats *ret);
    void *host_stats_arg;
};

/* Makes the handler state both servers share (env is copied). Returns 0. */
int rpc_new(const struct rpc_env *env, struct rpc **ret);
/* Frees it once every connection is gone (server_close). Accepts NULL; returns NULL. */
struct rpc *rpc_free(struct rpc *r);
/* The servers' handler; its arg is the struct rpc. */
extern const struct server_handler rpc_server_handler;
/* Kills every task of every connection (the drain's grace ran out: KILL_SHUTDOWN). */
void rpc_kill_tasks(struct rpc *r, enum task_kill_reason why);
