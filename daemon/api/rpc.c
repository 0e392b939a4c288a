/* SPDX-License-Identifier: MIT */
/* Method tables for the agents' and the admin socket. Every request is validated here in
 * full (types, sizes, names; an exec's arguments by exec_args.c) before anything else sees
 * it; nothing on the agents' socket can reach an admin method. */
#define LOG_MOD "rpc"
#include "api/rpc.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "api/exec_args.h"
#include "api/rpc_admin.h"
#include "api/rpc_audit.h"
#include "api/rpc_impl.h"
#include "api/rpc_session.h"
#include "api/server.h"
#include "audit/audit.h"
#include "config/config.h"
#include "core/pool.h"
#include "core/sched.h"
#include "core/task.h"
#include "core/task_audit.h"
#include "lib/alloc.h"
#include "lib/list.h"
#include "lib/log.h"
#include "lib/util.h"
#include "metrics/metrics.h"
#include "sandbox/task_spec.h"
#include "token/token.h"
#include "wire/proto.h"
#include "wire/version.h"

struct method {
    const char *name;
    rpc_method_cb fn;
};

/* The connection as the audit trail names a request's sender. */
struct task_audit_peer rpc_audit_peer(const struct rpc_conn *rc)
{
    const struct conn *c = rc->c;
    return (struct task_audit_peer){server_conn_kind(c) == SERVER_ADMIN, server_conn_id(c),
                                    server_conn_peer_uid(c), server_conn_peer_pid(c),
                                    server_conn_peer_gid(c)};
}

/* Counts a protocol-level error by kind (malformed, too_large, limit, ...). */
void rpc_note_error(struct rpc *r, const char *kind)
{
    metrics_rpc_error(r->env.metrics, kind);
}

/* Whether a refusal with code is recorded one by one: not while the trail is behind
 * (counted in audit.suppressed), nor beyond the connection's or its peer's budget (counted
 * in the peer's rpc.refused.summary). Either way sbx_audit_suppressed_total counts it. */
static bool refusal_recorded(struct rpc_conn *rc, const char *code)
{
    const struct rpc_env *env = &rc->rpc->env;
    if (audit_suppress(env->audit)) {
        metrics_audit_suppressed(env->metrics, "backlog");
        return false;
    }
    if (!rpc_refusals_take(rc->refusals, server_conn_peer_pid(rc->c), server_conn_id(rc->c),
                           code)) {
        metrics_audit_suppressed(env->metrics, "rpc");
        return false;
    }
    return true;
}

void rpc_refused(struct rpc_conn *rc, const char *kind, const char *code, const char *method,
                 size_t method_len, const char *reason)
{
    const struct rpc_env *env = &rc->rpc->env;
    rpc_note_error(rc->rpc, kind);
    if (refusal_recorded(rc, code)) {
        struct task_audit_peer peer = rpc_audit_peer(rc);
        task_audit_refused(env->tenv, &peer, code, method, method_len, reason);
    }
}

void rpc_begin_ok(msgpack_sbuffer *sb, msgpack_packer *pk, uint32_t msgid)
{
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
    proto_pack_response_ok(pk, msgid);
}

void rpc_finish(struct rpc_conn *rc, msgpack_sbuffer *sb)
{
    server_conn_send(rc->c, sb);
    msgpack_sbuffer_destroy(sb);
}

static void m_ping(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    (void)args;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    rpc_begin_ok(&sb, &pk, msgid);
    msgpack_pack_map(&pk, 2);
    proto_pack_kv_bool(&pk, "pong", true);
    proto_pack_kv_str(&pk, "version", SBX_VERSION);
    rpc_finish(rc, &sb);
}

/* "fork_server": nil when the pool makes its sandboxes from scratch (fork_server: false,
 * or no user namespaces), else the fork server's counters. */
static void pack_fork_server(msgpack_packer *pk, const struct pool_stats *ps)
{
    proto_pack_cstr(pk, "fork_server");
    if (!ps->has_fork_server) {
        msgpack_pack_nil(pk);
        return;
    }
    const struct forkserver_stats *st = &ps->fork_server;
    msgpack_pack_map(pk, 5);
    proto_pack_kv_u64(pk, "pid", (uint64_t)st->pid);
    proto_pack_kv_u64(pk, "starts", st->starts);
    proto_pack_kv_u64(pk, "spawned", st->spawned);
    proto_pack_kv_u64(pk, "failures", st->failures);
    proto_pack_kv_bool(pk, "disabled", st->disabled);
}

static void m_pools(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    (void)args;
    const struct rpc_env *env = &rc->rpc->env;
    size_t n = sched_n_pools(env->sched);
    msgpack_sbuffer sb;
    msgpack_packer pk;
    rpc_begin_ok(&sb, &pk, msgid);
    msgpack_pack_array(&pk, n);
    for (size_t i = 0; i < n; i++) {
        const struct pool *p = sched_pool(env->sched, i);
        const struct pool_config *pc = pool_config(p);
        struct pool_stats ps;
        pool_get_stats(p, &ps);
        msgpack_pack_map(&pk, 18);
        proto_pack_kv_str(&pk, "name", pc->name);
        proto_pack_kv_u64(&pk, "warm", ps.warm);
        proto_pack_kv_u64(&pk, "target", pc->warm);
        proto_pack_kv_u64(&pk, "creating", ps.creating);
        proto_pack_kv_u64(&pk, "running", ps.busy);
        proto_pack_kv_u64(&pk, "dying", ps.dying);
        proto_pack_kv_u64(&pk, "max", pc->max);
        proto_pack_kv_u64(&pk, "queued", ps.queued);
        proto_pack_kv_u64(&pk, "queue_max", pc->queue);
        proto_pack_kv_u64(&pk, "created", ps.created);
        proto_pack_kv_u64(&pk, "failed", ps.failed);
        proto_pack_kv_u64(&pk, "tasks", ps.tasks);
        proto_pack_kv_u64(&pk, "cold_starts", ps.cold_starts);
        proto_pack_kv_str(&pk, "image", pc->image);
        proto_pack_kv_str(&pk, "image_state", ps.image_state);
        proto_pack_kv_str(&pk, "seccomp", pc->seccomp);
        proto_pack_kv_bool(&pk, "default", strcmp(pc->name, env->cfg->default_pool) == 0);
        pack_fork_server(&pk, &ps);
    }
    rpc_finish(rc, &sb);
}

/* Refuses an exec request that never became a task: its chain (request, denied decision,
 * result, marked as a refusal's) goes to the audit trail within the budgets, else it is
 * counted (refusal_recorded). The request is recorded from spec when it decoded, else
 * (spec NULL) from its raw args. */
void rpc_deny_exec(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args,
                   const struct task_spec *spec, const char *code, const char *message)
{
    const struct rpc_env *env = &rc->rpc->env;
    if (refusal_recorded(rc, code)) {
        char id[24];
        task_make_id(env->tenv, id, sizeof(id));
        struct task_audit_peer peer = rpc_audit_peer(rc);
        task_audit_refused_exec(env->tenv, id, &peer, spec, args, code, message);
    }
    server_conn_send_error(rc->c, msgid, code, message);
}

/* The exec's token, verified for pool p: *ret NULL without one (allowed unless
 * tokens.required). Returns 0, -EINVAL (malformed argument) or -EACCES with e and *why
 * (sbx_denied_total's reason). */
int rpc_exec_authorize(const struct rpc_env *env, const msgpack_object *a, const struct pool *p,
                       const char **why, const struct token **ret, struct err *e)
{
    const msgpack_object *to = proto_map_get(a, "token");
    *ret = NULL;
    if (!to || to->type == MSGPACK_OBJECT_NIL) {
        if (env->cfg->token_required) {
            *why = "token_required";
            return err_setx(e, -EACCES, "a capability token is required (tokens.required)");
        }
        return 0;
    }
    if (to->type != MSGPACK_OBJECT_STR) {
        return err_setx(e, -EINVAL, "'token' must be a string");
    }
    /* SECURITY: the token string goes nowhere but token_authorize. */
    return token_authorize(env->tokens, to->via.str.ptr, to->via.str.size, pool_config(p)->name,
                           why, ret, e);
}

/* Answers an exec that authorization refused (the reason never holds the token; why is
 * the denial's label when r is -EACCES). */
void rpc_exec_refuse(struct rpc_conn *rc, uint32_t msgid, const struct task_spec *spec, int r,
                     const char *why, const struct err *e)
{
    const char *code = r == -EACCES ? "denied" : "bad_request";
    char q[192];
    rpc_note_error(rc->rpc, code);
    if (r == -EACCES) {
        metrics_denied(rc->rpc->env.metrics, why);
    }
    /* Debug only: an agent may knock at exec rate; the audit trail records refusals within
     * their budgets and counts the rest (rpc_refusals.h). */
    log_debug("conn=%llu msg=\"exec %s\" detail=%s", (unsigned long long)server_conn_id(rc->c),
              r == -EACCES ? "denied" : "refused", log_quote(err_msg(e), q, sizeof(q)));
    rpc_deny_exec(rc, msgid, NULL, spec, code, err_msg(e));
}

/* ---- The task's client: struct task_sink over the connection ---- */

static struct rpc_conn *sink_conn(const struct task_sink *s)
{
    return s->arg;
}

static void sink_send(struct task_sink *s, msgpack_sbuffer *sbuf)
{
    server_conn_send(sink_conn(s)->c, sbuf);
}

static void sink_send_error(struct task_sink *s, uint32_t msgid, const char *code,
                            const char *message)
{
    server_conn_send_error(sink_conn(s)->c, msgid, code, message);
}

static bool sink_congested(struct task_sink *s)
{
    return server_conn_write_queue(sink_conn(s)->c) > CONN_WQ_HIGH;
}

static void sink_stdin_queued(struct task_sink *s, size_t n)
{
    server_conn_stdin_queued(sink_conn(s)->c, n);
}

static void sink_stdin_written(struct task_sink *s, size_t n)
{
    server_conn_stdin_written(sink_conn(s)->c, n);
}

/* The task let go of its connection: off its list, and its request slot is free. */
static void sink_done(struct task_sink *s)
{
    struct rpc_conn *rc = sink_conn(s);
    DLIST_REMOVE(rc->tasks, s);
    if (rc->inflight > 0) {
        rc->inflight--;
    }
}

const struct task_sink_ops rpc_sink_ops = {
    .send = sink_send,
    .send_error = sink_send_error,
    .congested = sink_congested,
    .stdin_queued = sink_stdin_queued,
    .stdin_written = sink_stdin_written,
    .done = sink_done,
};

struct task *rpc_find_task(struct rpc_conn *rc, uint32_t msgid)
{
    for (struct task_sink *s = rc->tasks; s; s = s->next) {
        struct task *t = task_of_sink(s);
        if (task_msgid(t) == msgid) {
            return t;
        }
    }
    return NULL;
}

static void m_exec(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    struct rpc *rpc = rc->rpc;
    const struct rpc_env *env = &rpc->env;
    struct err e = ERR_INIT;
    /* A task's notifications and its stdin are keyed by msgid alone: a second task under
     * the same msgid would mix with the first. The first keeps running, untouched. */
    if (rpc_find_task(rc, msgid)) {
        char msg[128];
        (void)snprintf(msg, sizeof(msg),
                       "msgid %u is already in flight on this connection; ids must be unique "
                       "among a connection's requests in flight",
                       msgid);
        rpc_note_error(rpc, "bad_request");
        rpc_deny_exec(rc, msgid, args, NULL, "bad_request", msg);
        return;
    }
    if (sched_draining(env->sched)) {
        rpc_deny_exec(rc, msgid, args, NULL, "shutting_down", "sbxd is shutting down");
        return;
    }
    if (audit_backlogged(env->audit)) {
        rpc_note_error(rpc, "busy");
        rpc_deny_exec(rc, msgid, args, NULL, "busy", "the audit trail is behind; retry later");
        return;
    }
    if (rc->inflight >= env->cfg->max_requests_per_conn) {
        char msg[96];
        (void)snprintf(msg, sizeof(msg),
                       "too many requests in flight on this connection (limit %u)",
                       env->cfg->max_requests_per_conn);
        rpc_note_error(rpc, "limit");
        rpc_deny_exec(rc, msgid, args, NULL, "limit", msg);
        return;
    }
    /* A command of a session: its own checks, its sandbox, no pool queue. */
    if (args && args->type == MSGPACK_OBJECT_MAP && proto_map_get(args, "session")) {
        rpc_session_exec(rc, msgid, args);
        return;
    }
    struct pool *p = NULL;
    scoped(task_spec_clear) struct task_spec spec = TASK_SPEC_INIT;
    int r = exec_args_decode(env, args, &spec, &p, &e);
    if (r < 0) {
        rpc_note_error(rpc, r == -ENOENT ? "unknown_pool" : "bad_request");
        const char *code =
            r == -ENOENT ? "unknown_pool" : (r == -E2BIG ? "too_large" : "bad_request");
        rpc_deny_exec(rc, msgid, args, NULL, code, err_msg(&e));
        return;
    }
    /* Authorization, from memory only, before anything is created. */
    const struct token *tok = NULL;
    const char *why = NULL;
    r = rpc_exec_authorize(env, args, p, &why, &tok, &e);
    if (r < 0) {
        rpc_exec_refuse(rc, msgid, &spec, r, why, &e);
        return;
    }
    /* A full pool is refused before the task exists, through the budgeted refusal path:
     * a client that fills a pool with its own tasks must not be able to write an unbudgeted
     * three-row chain per further request. */
    if (pool_full(p)) {
        char msg[128];
        (void)snprintf(msg, sizeof(msg), "pool '%s' is full: %u tasks already waiting",
                       pool_config(p)->name, pool_queued(p));
        rpc_note_error(rpc, "busy");
        rpc_deny_exec(rc, msgid, args, &spec, "busy", msg);
        return;
    }
    /* Before the request is audited, so that it names its token; a grant that fails is
     * refused once the task exists, as any later refusal. */
    struct err ge = ERR_INIT;
    int granted = tok ? exec_args_grant(&spec, env->tokens, tok, &ge) : 0;
    struct task *t = NULL;
    const struct task_sink sink = {&rpc_sink_ops, rc, NULL, NULL};
    r = task_new(env->tenv, &sink, msgid, p, &spec, &t, &e);
    if (r < 0) {
        log_error_errno(r, "msg=\"cannot create task\" detail=\"%s\"", err_msg(&e));
        /* From the raw args: no task ever ran under the token, so the trail names none. */
        rpc_deny_exec(rc, msgid, args, NULL, "internal", err_msg(&e));
        return;
    }
    const char *token_id = task_token_id(t);
    struct task_audit_peer peer = rpc_audit_peer(rc);
    task_audit_request(env->tenv, task_id(t), &peer, task_get_spec(t));
    rc->inflight++;
    struct task_sink *ts = task_sink(t);
    DLIST_PUSH(rc->tasks, ts);
    if (granted < 0) {
        rpc_note_error(rpc, "denied");
        metrics_denied(env->metrics, "grant_failed");
        log_info("task=%s token=%s msg=\"token grant cannot be applied, denied\" detail=\"%s\"",
                 task_id(t), token_id ? token_id : "-", err_msg(&ge));
        task_fail(t, "denied", err_msg(&ge));
        return;
    }
    r = task_submit(t);
    if (r == 0 && tok) {
        task_attach_token(t, env->tokens, tok); /* one use taken; expiry now reaches it */
    }
    if (r == 0) {
        task_admit(t); /* queued: started ones were admitted by task_start */
    } else if (r == -EBUSY) {
        char msg[128];
        (void)snprintf(msg, sizeof(msg), "pool '%s' is full: %u tasks already waiting",
                       pool_config(p)->name, pool_queued(p));
        rpc_note_error(rpc, "busy");
        task_fail(t, "busy", msg);
    } else if (r < 0) {
        task_fail(t, "shutting_down", "sbxd is shutting down");
    }
}

/* Daemon-wide counters that belong to no pool. */
static void m_stats(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    (void)args;
    const struct rpc_env *env = &rc->rpc->env;
    struct rpc_host_stats hs;
    memset(&hs, 0, sizeof(hs));
    env->host_stats(env->host_stats_arg, &hs);
    msgpack_sbuffer sb;
    msgpack_packer pk;
    rpc_begin_ok(&sb, &pk, msgid);
    msgpack_pack_map(&pk, 5);
    struct sched_stats st;
    sched_get_stats(env->sched, &st);
    proto_pack_kv_u64(&pk, "sandboxes_live", st.live_sandboxes);
    proto_pack_kv_u64(&pk, "tasks_running", st.running_tasks);
    proto_pack_kv_bool(&pk, "netns_recycling", hs.netns_recycling);
    proto_pack_cstr(&pk, "netns");
    msgpack_pack_map(&pk, 3);
    proto_pack_kv_u64(&pk, "created", hs.netns_created);
    proto_pack_kv_u64(&pk, "reused", hs.netns_reused);
    proto_pack_kv_u64(&pk, "dropped", hs.netns_dropped);
    /* Blocks of host ids (idslot.h): 0 of 0 without user namespaces. */
    proto_pack_cstr(&pk, "host_id_blocks");
    msgpack_pack_map(&pk, 2);
    proto_pack_kv_u64(&pk, "held", hs.id_blocks_held);
    proto_pack_kv_u64(&pk, "total", hs.id_blocks_total);
    rpc_finish(rc, &sb);
}

static const struct method agent_methods[] = {
    {"ping", m_ping},
    {"pools", m_pools},
    {"stats", m_stats},
    {"exec", m_exec},
    {"session.open", rpc_session_open},
    {"session.close", rpc_session_close},
    {"session.write", rpc_session_write},
    {"session.read", rpc_session_read},
    {"session.list", rpc_session_list},
};

static const struct method admin_methods[] = {
    {"ping", m_ping},
    {"pools", m_pools},
    {"stats", m_stats},
    {"audit.query", rpc_audit_query},
    {"token.issue", rpc_admin_token_issue},
    {"token.revoke", rpc_admin_token_revoke},
    {"token.list", rpc_admin_token_list},
    {"audit.verify", rpc_audit_verify},
};

/* exec.file [msgid, bin]: the next bytes of that exec's streamed files. */
static void file_chunk(struct rpc_conn *rc, const struct proto_msg *m, struct task *t,
                       const msgpack_object *id, const msgpack_object *b)
{
    if (task_file_chunk(t, b->via.bin.ptr, b->via.bin.size) == 0) {
        return;
    }
    char msg[160];
    (void)snprintf(msg, sizeof(msg),
                   "exec.file for request %llu: more bytes than its files declared (%llu); the "
                   "task ends with status error",
                   (unsigned long long)id->via.u64,
                   (unsigned long long)task_get_spec(t)->files_streamed);
    rpc_refused(rc, "bad_request", "bad_request", m->method, m->method_len, msg);
    server_conn_send_error_notify(rc->c, "bad_request", msg, m->method, m->method_len, id);
}

static void handle_notify(struct rpc_conn *rc, const struct proto_msg *m)
{
    bool is_file = proto_str_eq(m->method, m->method_len, "exec.file");
    if (!is_file && !proto_str_eq(m->method, m->method_len, "exec.stdin")) {
        log_debug("conn=%llu msg=\"ignoring unknown notification\"",
                  (unsigned long long)server_conn_id(rc->c));
        return;
    }
    const msgpack_object *p = m->params;
    if (!p || p->type != MSGPACK_OBJECT_ARRAY || p->via.array.size != 2 ||
        p->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        (p->via.array.ptr[1].type != MSGPACK_OBJECT_BIN &&
         p->via.array.ptr[1].type != MSGPACK_OBJECT_STR)) {
        const char *msg =
            is_file ? "exec.file takes [msgid, bin]" : "exec.stdin takes [msgid, bin]";
        bool has_id = p && p->type == MSGPACK_OBJECT_ARRAY && p->via.array.size > 0;
        rpc_refused(rc, "bad_request", "bad_request", m->method, m->method_len, msg);
        server_conn_send_error_notify(rc->c, "bad_request", msg, m->method, m->method_len,
                                      has_id ? &p->via.array.ptr[0] : NULL);
        return;
    }
    uint64_t id = p->via.array.ptr[0].via.u64;
    struct task *t = id <= UINT32_MAX ? rpc_find_task(rc, (uint32_t)id) : NULL;
    if (!t) {
        return; /* the task may have finished already: late stdin is dropped */
    }
    if (is_file) {
        file_chunk(rc, m, t, &p->via.array.ptr[0], &p->via.array.ptr[1]);
        return;
    }
    if (!task_get_spec(t)->stdin) {
        /* The task's stdin is empty; the client is told that these bytes went nowhere,
         * once for each notification (the connection's backpressure paces the answers). */
        char msg[128];
        (void)snprintf(msg, sizeof(msg),
                       "exec.stdin for request %u, which did not ask for stdin (\"stdin\": "
                       "true): dropped",
                       (unsigned)id);
        rpc_refused(rc, "bad_request", "bad_request", m->method, m->method_len, msg);
        server_conn_send_error_notify(rc->c, "bad_request", msg, m->method, m->method_len,
                                      &p->via.array.ptr[0]);
        return;
    }
    const msgpack_object *b = &p->via.array.ptr[1];
    task_stdin(t, b->via.bin.ptr, b->via.bin.size);
}

/* server_handler.message: one decoded message of a connection. */
static void h_message(void *arg, struct conn *c, const struct proto_msg *m)
{
    struct rpc *rpc = arg;
    struct rpc_conn *rc = server_conn_data(c);
    if (m->type == PROTO_NOTIFY) {
        handle_notify(rc, m);
        return;
    }
    if (m->type != PROTO_REQUEST) {
        return; /* clients have no business sending responses; ignored */
    }
    bool admin = server_conn_kind(c) == SERVER_ADMIN;
    const struct method *tab = admin ? admin_methods : agent_methods;
    size_t n = admin ? ARRAY_SIZE(admin_methods) : ARRAY_SIZE(agent_methods);
    for (size_t i = 0; i < n; i++) {
        if (proto_str_eq(m->method, m->method_len, tab[i].name)) {
            metrics_rpc_request(rpc->env.metrics, tab[i].name);
            tab[i].fn(rc, m->msgid, proto_params_arg0(m->params));
            return;
        }
    }
    char name[64];
    size_t len = m->method_len < 48 ? m->method_len : 48;
    memcpy(name, m->method, len);
    name[len] = '\0';
    char msg[128];
    char q[64];
    (void)snprintf(msg, sizeof(msg), "unknown method %s", log_quote(name, q, sizeof(q)));
    metrics_rpc_request(rpc->env.metrics, NULL);
    rpc_refused(rc, "unknown_method", "unknown_method", m->method, m->method_len, msg);
    server_conn_send_error(c, m->msgid, "unknown_method", msg);
}

/* ---- The servers' handler: a connection's life ---- */

static void *h_open(void *arg, struct conn *c)
{
    struct rpc *rpc = arg;
    struct rpc_conn *rc = xcalloc(1, sizeof(*rc));
    rc->rpc = rpc;
    rc->c = c;
    rc->refusals = rpc_refusals_conn_new(rpc->refusals, server_conn_kind(c) == SERVER_ADMIN,
                                         (uint32_t)server_conn_peer_uid(c));
    DLIST_PUSH(rpc->conns, rc);
    return rc;
}

static void h_refused(void *arg, struct conn *c, const char *kind, const char *code,
                      const char *reason)
{
    (void)arg;
    rpc_refused(server_conn_data(c), kind, code, NULL, 0, reason);
}

/* The connection's write queue drained: its tasks read their output again. */
static void h_drained(void *arg, struct conn *c)
{
    struct rpc_conn *rc = server_conn_data(c);
    (void)arg;
    for (struct task_sink *s = rc->tasks; s; s = s->next) {
        task_resume(task_of_sink(s));
    }
}

/* The client is gone: its tasks die with their sandboxes, queued ones are dropped (each
 * lets go of rc through sink_done). */
static void h_gone(void *arg, struct conn *c)
{
    struct rpc *rpc = arg;
    struct rpc_conn *rc = server_conn_data(c);
    struct task_sink *s = rc->tasks;
    while (s) {
        struct task_sink *next = s->next;
        task_client_gone(task_of_sink(s));
        s = next;
    }
    DLIST_REMOVE(rpc->conns, rc);
    rpc_refusals_conn_free(rc->refusals);
    free(rc);
}

const struct server_handler rpc_server_handler = {
    .open = h_open,
    .message = h_message,
    .refused = h_refused,
    .drained = h_drained,
    .gone = h_gone,
};

int rpc_new(const struct rpc_env *env, struct rpc **ret)
{
    struct rpc *r = xcalloc(1, sizeof(*r));
    r->env = *env;
    r->refusals = rpc_refusals_new(env->audit, env->cfg);
    *ret = r;
    return 0;
}

struct rpc *rpc_free(struct rpc *r)
{
    if (r) {
        assert(!r->conns);
        rpc_refusals_free(r->refusals);
        free(r);
    }
    return NULL;
}

void rpc_kill_tasks(struct rpc *r, enum task_kill_reason why)
{
    for (struct rpc_conn *rc = r->conns; rc; rc = rc->next) {
        struct task_sink *s = rc->tasks;
        while (s) {
            struct task_sink *next = s->next;
            task_kill(task_of_sink(s), why);
            s = next;
        }
    }
}

struct rpc_conn *rpc_find_conn(struct rpc *r, enum server_kind kind, uint64_t id)
{
    for (struct rpc_conn *rc = r->conns; rc; rc = rc->next) {
        if (server_conn_id(rc->c) == id && server_conn_kind(rc->c) == kind) {
            return rc;
        }
    }
    return NULL;
}
