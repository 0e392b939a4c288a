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
#include "core/task_audit.h"

struct pool;
struct task_spec;
struct token;

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

/* ---- rpc.c's exec path, shared with api/rpc_session.c's commands ---- */

/* The connection as the audit trail names a request's sender. */
struct task_audit_peer rpc_audit_peer(const struct rpc_conn *rc);
/* Counts a protocol-level error by kind (malformed, too_large, limit, ...). */
void rpc_note_error(struct rpc *r, const char *kind);
/* Refuses an exec request that never became a task: its chain (request, denied decision,
 * result, marked as a refusal's) goes to the audit trail within the budgets, else it is
 * counted. The request is recorded from spec when it decoded, else (spec NULL) from its
 * raw args. Answers msgid with code and message. */
void rpc_deny_exec(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args,
                   const struct task_spec *spec, const char *code, const char *message);
/* The request's token (its "token" argument), verified for pool p: *ret NULL without one
 * (allowed unless tokens.required). Returns 0, -EINVAL (malformed argument) or -EACCES with
 * e and *why (sbx_denied_total's reason). */
int rpc_exec_authorize(const struct rpc_env *env, const msgpack_object *a, const struct pool *p,
                       const char **why, const struct token **ret, struct err *e);
/* Answers an exec that authorization refused (r: -EACCES denied, else bad_request). */
void rpc_exec_refuse(struct rpc_conn *rc, uint32_t msgid, const struct task_spec *spec, int r,
                     const char *why, const struct err *e);
/* A task's client over its connection (the arg of its sink is the struct rpc_conn). */
extern const struct task_sink_ops rpc_sink_ops;
/* The connection's task answering msgid, or NULL. */
struct task *rpc_find_task(struct rpc_conn *rc, uint32_t msgid);
