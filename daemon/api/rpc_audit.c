/* SPDX-License-Identifier: MIT */
/* audit.query and audit.verify on the admin socket: validate on the loop, read on a worker
 * thread (never on the loop), answer on the loop if the connection is still there. At most
 * one such job runs, so the worker threads stay free for sandboxes. */
#define LOG_MOD "audit"
#include "api/rpc_audit.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/rpc_impl.h"
#include "api/server.h"
#include "audit/audit.h"
#include "audit/audit_query.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/util.h"
#include "wire/proto.h"

#define QUERY_LIMIT_DEFAULT 50
#define QUERY_LIMIT_MAX 1000
#define NAME_MAX_LEN 64

struct job {
    uv_work_t work;
    struct rpc *rpc;
    uint64_t conn_id;
    uint32_t msgid;
    bool verify;
    char *path;
    char task[AUDIT_TASK_MAX];
    char session[AUDIT_TASK_MAX];
    char pool[NAME_MAX_LEN];
    char status[NAME_MAX_LEN];
    struct audit_query q;
    msgpack_sbuffer out;
    int r;
    struct err e;
};

static void job_work(uv_work_t *w)
{
    struct job *j = container_of(w, struct job, work);
    struct sqlite3 *db = NULL;
    j->r = audit_query_ro_open(j->path, &db, &j->e);
    if (j->r < 0) {
        return;
    }
    msgpack_packer pk;
    msgpack_packer_init(&pk, &j->out, msgpack_sbuffer_write);
    msgpack_sbuffer body;
    msgpack_sbuffer_init(&body);
    msgpack_packer bp;
    msgpack_packer_init(&bp, &body, msgpack_sbuffer_write);
    if (j->verify) {
        struct audit_verify_result v;
        j->r = audit_query_verify(db, &v, &j->e);
        if (j->r == 0) {
            audit_query_verify_pack(&v, &bp);
        }
    } else {
        j->r = audit_query_pack(db, &j->q, &bp, &j->e);
    }
    if (j->r == 0) {
        proto_pack_response_ok(&pk, j->msgid);
        (void)msgpack_sbuffer_write(&j->out, body.data, body.size);
    }
    msgpack_sbuffer_destroy(&body);
    audit_query_ro_close(db);
}

static void job_done(uv_work_t *w, int status)
{
    struct job *j = container_of(w, struct job, work);
    audit_reader_release(j->rpc->env.audit);
    struct rpc_conn *rc = rpc_find_conn(j->rpc, SERVER_ADMIN, j->conn_id);
    struct conn *c = rc ? rc->c : NULL;
    if (c) {
        if (status < 0) {
            server_conn_send_error(c, j->msgid, "internal", "the audit request was cancelled");
        } else if (j->r < 0) {
            log_error("msg=\"audit request failed\" detail=\"%s\"", err_msg(&j->e));
            server_conn_send_error(c, j->msgid, "internal", err_msg(&j->e));
        } else {
            server_conn_send(c, &j->out);
        }
    }
    msgpack_sbuffer_destroy(&j->out);
    free(j->path);
    free(j);
}

/* Checks every key of args against the allowed ones. */
static int check_keys(const msgpack_object *args, const char *const *keys, size_t n, struct err *e)
{
    if (!args || args->type == MSGPACK_OBJECT_NIL) {
        return 0;
    }
    char name[48];
    int r = proto_keys_check(args, keys, n, name, sizeof(name));
    if (r == -EINVAL) {
        return err_setx(e, -EINVAL, "arguments must be a map");
    }
    if (r < 0) {
        char q[64];
        return err_setx(e, -EINVAL, "unknown argument %s", log_quote(name, q, sizeof(q)));
    }
    return 0;
}

/* An optional short string argument into buf ("" when absent). */
static int opt_str(const msgpack_object *args, const char *key, char *buf, size_t size,
                   struct err *e)
{
    buf[0] = '\0';
    const msgpack_object *o = args ? proto_map_get(args, key) : NULL;
    if (!o || o->type == MSGPACK_OBJECT_NIL) {
        return 0;
    }
    if (o->type != MSGPACK_OBJECT_STR || proto_obj_cstr(o, buf, size) < 0 || buf[0] == '\0') {
        return err_setx(e, -EINVAL, "'%s' must be a non-empty string shorter than %zu bytes", key,
                        size);
    }
    return 0;
}

static bool start_job(struct rpc_conn *rc, uint32_t msgid, struct job *j)
{
    const struct rpc_env *env = &rc->rpc->env;
    struct conn *c = rc->c;
    if (!audit_enabled(env->audit)) {
        server_conn_send_error(rc->c, msgid, "internal",
                               "the audit trail is disabled in this sbxd");
        return false;
    }
    if (!audit_reader_acquire(env->audit)) {
        server_conn_send_error(rc->c, msgid, "busy", "another audit request is running; retry");
        return false;
    }
    j->rpc = rc->rpc;
    j->conn_id = server_conn_id(c);
    j->msgid = msgid;
    j->path = xstrdup(audit_path(env->audit));
    msgpack_sbuffer_init(&j->out);
    if (uv_queue_work(env->loop, &j->work, job_work, job_done) < 0) {
        server_conn_send_error(rc->c, msgid, "internal", "cannot queue the audit request");
        free(j->path);
        audit_reader_release(env->audit);
        return false;
    }
    return true;
}

void rpc_audit_query(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    static const char *const keys[] = {"task", "pool", "status", "since", "limit", "session"};
    struct err e = ERR_INIT;
    scoped_free struct job *j = xcalloc(1, sizeof(*j));
    int r = check_keys(args, keys, ARRAY_SIZE(keys), &e);
    if (r == 0) {
        r = opt_str(args, "task", j->task, sizeof(j->task), &e);
    }
    if (r == 0) {
        r = opt_str(args, "session", j->session, sizeof(j->session), &e);
    }
    if (r == 0) {
        r = opt_str(args, "pool", j->pool, sizeof(j->pool), &e);
    }
    if (r == 0) {
        r = opt_str(args, "status", j->status, sizeof(j->status), &e);
    }
    uint64_t limit = QUERY_LIMIT_DEFAULT;
    const msgpack_object *lo = args ? proto_map_get(args, "limit") : NULL;
    if (r == 0 && lo && lo->type != MSGPACK_OBJECT_NIL) {
        r = proto_get_u64(args, "limit", &limit, &e);
        if (r == 0 && (limit < 1 || limit > QUERY_LIMIT_MAX)) {
            r = err_setx(&e, -EINVAL, "'limit' must be 1..%d", QUERY_LIMIT_MAX);
        }
    }
    int64_t since_ns = 0;
    const msgpack_object *so = args ? proto_map_get(args, "since") : NULL;
    if (r == 0 && so && so->type != MSGPACK_OBJECT_NIL) {
        double secs;
        r = proto_get_f64(args, "since", &secs, &e);
        if (r == 0 && !(secs > 0 && secs < 1e10)) {
            r = err_setx(&e, -EINVAL, "'since' must be a positive number of seconds");
        }
        if (r == 0) {
            struct timespec ts;
            (void)clock_gettime(CLOCK_REALTIME, &ts);
            since_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec - (int64_t)(secs * 1e9);
        }
    }
    if (r < 0) {
        rpc_refused(rc, "bad_request", "bad_request", RPC_METHOD("audit.query"), err_msg(&e));
        server_conn_send_error(rc->c, msgid, "bad_request", err_msg(&e));
        return;
    }
    j->q.task = j->task[0] ? j->task : NULL;
    j->q.session = j->session[0] ? j->session : NULL;
    j->q.pool = j->pool[0] ? j->pool : NULL;
    j->q.status = j->status[0] ? j->status : NULL;
    j->q.since_ns = since_ns;
    j->q.limit = (uint32_t)limit;
    if (start_job(rc, msgid, j)) {
        (void)take_ptr(&j); /* the worker owns it now */
    }
}

void rpc_audit_verify(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    struct err e = ERR_INIT;
    if (check_keys(args, NULL, 0, &e) < 0) {
        rpc_refused(rc, "bad_request", "bad_request", RPC_METHOD("audit.verify"), err_msg(&e));
        server_conn_send_error(rc->c, msgid, "bad_request", err_msg(&e));
        return;
    }
    scoped_free struct job *j = xcalloc(1, sizeof(*j));
    j->verify = true;
    if (start_job(rc, msgid, j)) {
        (void)take_ptr(&j);
    }
}
