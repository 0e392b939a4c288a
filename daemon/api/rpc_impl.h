/* SPDX-License-Identifier: MIT */
#pragma once
/* What api/rpc.c shares with api/rpc_audit.c and api/rpc_admin.c: the handler's state, a connection
 * as rpc sees it, and the refusal helpers. Loop thread only. */
#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "api/rpc.h"
#include "api/rpc_refusals.h"
#include "api/server.h"
#include "core/task.h"

struct rpc {
    struct rpc_env env;
    struct rpc_conn *conns;        /* every open connection of both servers */
    struct rpc_refusals *refusals; /* what refusals are recorded one by one */
};

/* One connection's state (server_handler.open to .gone). */
struct rpc_conn {
    struct rpc *rpc;
    struct conn *c;
    struct task_sink *tasks;           /* its tasks, queued or running (lib/list.h) */
    uint32_t inflight;                 /* exec requests not yet answered */
    struct rpc_refusal_conn *refusals; /* its budget of refusals recorded one by one */
    struct rpc_conn *prev;
    struct rpc_conn *next;
};

typedef void (*rpc_method_cb)(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);

/* Bad input refused outside an exec (whose refusals have a chain of their own): counted by
 * kind, and recorded in the trail as rpc.refused (socket, conn, peer, code, the method when
 * there was one, reason) within the connection's and its peer's budgets (rpc_refusals.h),
 * else counted in rpc.refused.summary, or only counted in audit.suppressed while the trail
 * is behind.
 * method may be NULL; method_len bytes of it are recorded. */
void rpc_refused(struct rpc_conn *rc, const char *kind, const char *code, const char *method,
                 size_t method_len, const char *reason);
/* A method name literal as rpc_refused's method and method_len. */
#define RPC_METHOD(lit) (lit), sizeof(lit) - 1
/* Starts an ok response for msgid in sb; rpc_finish sends it to rc and frees sb. */
void rpc_begin_ok(msgpack_sbuffer *sb, msgpack_packer *pk, uint32_t msgid);
void rpc_finish(struct rpc_conn *rc, msgpack_sbuffer *sb);
/* The open connection of that kind with that id, or NULL: for answers computed off the
 * loop, whose connection may have closed meanwhile. */
struct rpc_conn *rpc_find_conn(struct rpc *r, enum server_kind kind, uint64_t id);
