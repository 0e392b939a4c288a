/* SPDX-License-Identifier: MIT */
/* The session methods (docs/PROTOCOL.md, "Sessions"): each request validated in full and
 * its session's owner checked on the loop, then the session opened, closed or given a
 * command (core/session.c), or its files moved by a job on sbxd's workers over a duplicate
 * of the workspace's root, answered if the connection is still open. Every refusal is
 * audited like other refused requests; a file's bytes never reach the log or the trail. */
#define LOG_MOD "rpc"
#include "api/rpc_session.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/exec_args.h"
#include "api/rpc_impl.h"
#include "api/server.h"
#include "audit/audit.h"
#include "config/config.h"
#include "core/pool.h"
#include "core/sched.h"
#include "core/session.h"
#include "core/task.h"
#include "core/task_audit.h"
#include "lib/alloc.h"
#include "lib/list.h"
#include "lib/log.h"
#include "lib/util.h"
#include "lib/workq.h"
#include "metrics/metrics.h"
#include "sandbox/task_spec.h"
#include "sandbox/workspace.h"
#include "token/token.h"
#include "wire/proto.h"
#include "wire/wspath.h"

#define READ_DEFAULT (1024 * 1024)
#define READ_MAX (4 * 1024 * 1024)
#define LIST_MAX 10000

/* Answers a refused session request: counted, audited within the budgets (rpc.refused),
 * and the error sent. */
static void refuse(struct rpc_conn *rc, uint32_t msgid, const char *method, const char *code,
                   const char *message)
{
    rpc_refused(rc, code, code, method, strlen(method), message);
    server_conn_send_error(rc->c, msgid, code, message);
}

/* The request's "token" (optional), verified for the session's pool: its id into id (""
 * when none was named). Returns 0, or -EACCES / -EINVAL with e (why: the denial's label). */
static int named_token(const struct rpc_env *env, const msgpack_object *args, const struct pool *p,
                       char id[TOKEN_ID_LEN + 1], const char **why, struct err *e)
{
    const struct token *tok = NULL;
    id[0] = '\0';
    const msgpack_object *to = proto_map_get(args, "token");
    if (!to || to->type == MSGPACK_OBJECT_NIL) {
        return 0;
    }
    if (to->type != MSGPACK_OBJECT_STR) {
        return err_setx(e, -EINVAL, "'token' must be a string");
    }
    /* SECURITY: the token string goes nowhere but token_authorize. */
    int r = token_authorize(env->tokens, to->via.str.ptr, to->via.str.size, pool_config(p)->name,
                            why, &tok, e);
    if (r < 0) {
        return r;
    }
    struct token_info ti;
    token_get_info(env->tokens, tok, &ti);
    str_copy(id, ti.id, TOKEN_ID_LEN + 1);
    return 0;
}

/* The session args name, owned by the caller. On failure the refusal is answered (code
 * bad_request, not_found or denied; *code says which) and NULL returned. */
static struct session *owned(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args,
                             const char *method, const char **ret_code, struct err *ret_e)
{
    const struct rpc_env *env = &rc->rpc->env;
    const msgpack_object *so = args ? proto_map_get(args, "session") : NULL;
    *ret_code = "bad_request";
    if (!so || so->type != MSGPACK_OBJECT_STR) {
        err_setx(ret_e, -EINVAL, "'session' must be a session id");
        return NULL;
    }
    struct session *s = session_find(env->sessions, so->via.str.ptr, so->via.str.size);
    if (!s) {
        *ret_code = "not_found";
        err_setx(ret_e, -ENOENT, "no such session (it ended, or never was)");
        return NULL;
    }
    char tid[TOKEN_ID_LEN + 1];
    const char *why = NULL;
    int r = named_token(env, args, session_pool(s), tid, &why, ret_e);
    if (r == -EACCES) {
        metrics_denied(env->metrics, why);
        *ret_code = "denied";
        return NULL;
    }
    if (r < 0) {
        return NULL;
    }
    /* SECURITY: another uid, or another token, never reaches the session. */
    if (session_check_owner(s, (uint32_t)server_conn_peer_uid(rc->c), tid[0] ? tid : NULL) < 0) {
        *ret_code = "denied";
        err_setx(ret_e, -EACCES, "the session belongs to another user or token");
        return NULL;
    }
    (void)msgid;
    (void)method;
    return s;
}

/* Checks args' keys; bad_request answered on failure. */
static bool keys_ok(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args,
                    const char *method, const char *const *keys, size_t n)
{
    char name[48];
    if (!args || args->type == MSGPACK_OBJECT_NIL) {
        return true;
    }
    int r = proto_keys_check(args, keys, n, name, sizeof(name));
    if (r == 0) {
        return true;
    }
    char msg[128];
    char q[64];
    if (r == -EINVAL) {
        (void)snprintf(msg, sizeof(msg), "%s takes a map of arguments", method);
    } else {
        (void)snprintf(msg, sizeof(msg), "unknown %s argument %s", method,
                       log_quote(name, q, sizeof(q)));
    }
    refuse(rc, msgid, method, "bad_request", msg);
    return false;
}

/* An optional number of seconds in (0, max_ns], into *ret_ns (left as is when absent). */
static int opt_secs(const msgpack_object *args, const char *key, uint64_t max_ns, uint64_t *ret_ns,
                    struct err *e)
{
    const msgpack_object *o = args ? proto_map_get(args, key) : NULL;
    if (!o || o->type == MSGPACK_OBJECT_NIL) {
        return 0;
    }
    double secs;
    int r = proto_get_f64(args, key, &secs, e);
    if (r < 0) {
        return r;
    }
    if (!(secs > 0) || secs * 1e9 > (double)max_ns) {
        return err_setx(e, -EINVAL, "'%s' must be > 0 and <= %.3f seconds", key,
                        (double)max_ns / 1e9);
    }
    *ret_ns = (uint64_t)(secs * 1e9);
    return 0;
}

/* ---- session.open ---- */

struct open_wait {
    struct rpc *rpc;
    uint64_t conn_id;
    uint32_t msgid;
    struct task_spec files; /* the request's files (files and n_files only) */
};

static void open_wait_free(struct open_wait *w)
{
    task_spec_clear(&w->files);
    free(w);
}

static void files_job_start(struct open_wait *w, struct session *s);

/* The session is open (and its files written): its opener gets it. */
static void open_answer(struct open_wait *w, struct session *s)
{
    struct rpc_conn *rc = rpc_find_conn(w->rpc, SERVER_AGENTS, w->conn_id);
    if (!rc) {
        /* Nobody will ever know its id: it ends now rather than at its idle timeout. */
        struct session_info gone;
        (void)session_close(s, &gone);
        open_wait_free(w);
        return;
    }
    struct session_info si;
    session_get_info(s, &si);
    msgpack_sbuffer sb;
    msgpack_packer pk;
    rpc_begin_ok(&sb, &pk, w->msgid);
    msgpack_pack_map(&pk, 6);
    proto_pack_kv_str(&pk, "session", si.id);
    proto_pack_kv_str(&pk, "pool", si.pool);
    proto_pack_kv_str(&pk, "sandbox", si.sandbox);
    proto_pack_kv_f64(&pk, "ttl", (double)si.ttl_ns / 1e9);
    proto_pack_kv_f64(&pk, "idle_timeout", (double)si.idle_ns / 1e9);
    proto_pack_kv_f64(&pk, "expires_at", (double)si.expires_ms / 1e3);
    rpc_finish(rc, &sb);
    open_wait_free(w);
}

static void open_done(void *arg, struct session *s)
{
    struct open_wait *w = arg;
    if (w->files.n_files > 0) {
        files_job_start(w, s);
        return;
    }
    open_answer(w, s);
}

static void open_failed(void *arg, const char *code, const char *message)
{
    struct open_wait *w = arg;
    struct rpc_conn *rc = rpc_find_conn(w->rpc, SERVER_AGENTS, w->conn_id);
    if (rc) {
        rpc_note_error(w->rpc, code);
        server_conn_send_error(rc->c, w->msgid, code, message);
    }
    open_wait_free(w);
}

static const struct session_open_ops open_ops = {
    .opened = open_done,
    .failed = open_failed,
};

void rpc_session_open(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    static const char *const keys[] = {"pool", "token", "ttl", "idle_timeout", "files"};
    static const char method[] = "session.open";
    const struct rpc_env *env = &rc->rpc->env;
    struct err e = ERR_INIT;
    if (!keys_ok(rc, msgid, args, method, keys, ARRAY_SIZE(keys))) {
        return;
    }
    if (sched_draining(env->sched)) {
        refuse(rc, msgid, method, "shutting_down", "sbxd is shutting down");
        return;
    }
    const char *pname = env->cfg->default_pool;
    char pbuf[64];
    const msgpack_object *po = args ? proto_map_get(args, "pool") : NULL;
    if (po && po->type != MSGPACK_OBJECT_NIL) {
        if (po->type != MSGPACK_OBJECT_STR || proto_obj_cstr(po, pbuf, sizeof(pbuf)) < 0) {
            refuse(rc, msgid, method, "bad_request", "'pool' must be a short string");
            return;
        }
        pname = pbuf;
    }
    struct pool *p = sched_find_pool(env->sched, pname);
    if (!p) {
        char msg[96];
        (void)snprintf(msg, sizeof(msg), "unknown pool '%.60s'", pname);
        refuse(rc, msgid, method, "unknown_pool", msg);
        return;
    }
    const struct pool_config *pc = pool_config(p);
    uint64_t ttl = pc->session_ttl_ns, idle = pc->session_idle_ns;
    int r = opt_secs(args, "ttl", pc->session_max_ttl_ns, &ttl, &e);
    if (r == 0) {
        r = opt_secs(args, "idle_timeout", ttl, &idle, &e);
    }
    if (r < 0) {
        refuse(rc, msgid, method, "bad_request", err_msg(&e));
        return;
    }
    if (idle > ttl) {
        idle = ttl;
    }
    const struct token *tok = NULL;
    const char *why = NULL;
    r = args ? rpc_exec_authorize(env, args, p, &why, &tok, &e) : 0;
    if (r == 0 && !args && env->cfg->token_required) {
        why = "token_required";
        r = err_setx(&e, -EACCES, "a capability token is required (tokens.required)");
    }
    if (r == -EACCES) {
        metrics_denied(env->metrics, why);
        refuse(rc, msgid, method, "denied", err_msg(&e));
        return;
    }
    if (r < 0) {
        refuse(rc, msgid, method, "bad_request", err_msg(&e));
        return;
    }
    const struct session_open_req rq = {
        .pool = p,
        .uid = (uint32_t)server_conn_peer_uid(rc->c),
        .pid = (int32_t)server_conn_peer_pid(rc->c),
        .conn_id = server_conn_id(rc->c),
        .tok = tok,
        .ttl_ns = ttl,
        .idle_ns = idle,
    };
    struct open_wait *w = xcalloc(1, sizeof(*w));
    *w = (struct open_wait){rc->rpc, server_conn_id(rc->c), msgid, TASK_SPEC_INIT};
    /* Inline files only: a session.open has no stream of exec.file chunks. */
    r = exec_args_files(pc, args ? proto_map_get(args, "files") : NULL, false, &w->files, &e);
    if (r < 0) {
        open_wait_free(w);
        refuse(rc, msgid, method, r == -E2BIG ? "too_large" : "bad_request", err_msg(&e));
        return;
    }
    r = session_open(env->sessions, &rq, &open_ops, w, &e);
    if (r < 0) {
        open_wait_free(w);
        const char *code = r == -EBUSY ? "busy" : r == -ESHUTDOWN ? "shutting_down" : "limit";
        refuse(rc, msgid, method, code, err_msg(&e));
    }
}

/* ---- session.close and session.list {} ---- */

/* A session.close answer waiting for its event's commit, as a task's result waits for its
 * chain's: a client that saw the close finds it in the trail. */
struct close_wait {
    struct rpc *rpc;
    uint64_t conn_id;
    uint32_t msgid;
    msgpack_sbuffer sb;
};

static void close_committed(void *arg, bool committed)
{
    struct close_wait *w = arg;
    struct rpc_conn *rc = rpc_find_conn(w->rpc, SERVER_AGENTS, w->conn_id);
    if (rc && committed) {
        server_conn_send(rc->c, &w->sb);
    } else if (rc) {
        server_conn_send_error(rc->c, w->msgid, "internal",
                               "the audit trail cannot be written: the session was closed, "
                               "its record is withheld");
    }
    msgpack_sbuffer_destroy(&w->sb);
    free(w);
}

void rpc_session_close(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    static const char *const keys[] = {"session", "token"};
    static const char method[] = "session.close";
    struct err e = ERR_INIT;
    const char *code;
    if (!keys_ok(rc, msgid, args, method, keys, ARRAY_SIZE(keys))) {
        return;
    }
    struct session *s = owned(rc, msgid, args, method, &code, &e);
    if (!s) {
        refuse(rc, msgid, method, code, err_msg(&e));
        return;
    }
    struct session_info si;
    char id[SESSION_ID_LEN + 1];
    str_copy(id, session_id(s), sizeof(id));
    uint64_t ticket = session_close(s, &si);
    struct close_wait *w = xcalloc(1, sizeof(*w));
    *w = (struct close_wait){.rpc = rc->rpc, .conn_id = server_conn_id(rc->c), .msgid = msgid};
    msgpack_packer pk;
    rpc_begin_ok(&w->sb, &pk, msgid);
    msgpack_pack_map(&pk, 4);
    proto_pack_kv_str(&pk, "session", id);
    proto_pack_kv_str(&pk, "reason", "closed");
    proto_pack_kv_u64(&pk, "commands", si.commands);
    proto_pack_kv_u64(&pk, "lifetime_ms", si.lifetime_ms);
    audit_when_committed(rc->rpc->env.audit, ticket, close_committed, w);
}

static void pack_session(msgpack_packer *pk, const struct session_info *si)
{
    msgpack_pack_map(pk, 8);
    proto_pack_kv_str(pk, "session", si->id);
    proto_pack_kv_str(pk, "pool", si->pool);
    proto_pack_kv_str(pk, "sandbox", si->sandbox);
    proto_pack_kv_f64(pk, "created_at", (double)si->created_ms / 1e3);
    proto_pack_kv_f64(pk, "expires_at", (double)si->expires_ms / 1e3);
    proto_pack_kv_f64(pk, "idle_timeout", (double)si->idle_ns / 1e9);
    proto_pack_kv_u64(pk, "commands", si->commands);
    proto_pack_kv_bool(pk, "busy", si->busy);
}

/* session.list {}: the caller's sessions (its uid's; those of the token when it names one). */
static void list_sessions(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    static const char method[] = "session.list";
    const struct rpc_env *env = &rc->rpc->env;
    struct err e = ERR_INIT;
    char tid[TOKEN_ID_LEN + 1] = "";
    const msgpack_object *to = args ? proto_map_get(args, "token") : NULL;
    if (to && to->type != MSGPACK_OBJECT_NIL) {
        /* Any pool the token grants will do: only its id is compared. */
        const char *why = NULL;
        const struct token *tok = NULL;
        int r = to->type == MSGPACK_OBJECT_STR ? -EACCES
                                               : err_setx(&e, -EINVAL, "'token' must be a string");
        for (size_t i = 0; r == -EACCES && i < sched_n_pools(env->sched); i++) {
            struct err pe = ERR_INIT;
            r = token_authorize(env->tokens, to->via.str.ptr, to->via.str.size,
                                pool_config(sched_pool(env->sched, i))->name, &why, &tok, &pe);
            if (i == 0 || r == 0) {
                e = pe;
            }
        }
        if (r < 0) {
            if (r == -EACCES) {
                metrics_denied(env->metrics, why);
            }
            refuse(rc, msgid, method, r == -EACCES ? "denied" : "bad_request", err_msg(&e));
            return;
        }
        struct token_info ti;
        token_get_info(env->tokens, tok, &ti);
        str_copy(tid, ti.id, sizeof(tid));
    }
    uint32_t uid = (uint32_t)server_conn_peer_uid(rc->c);
    const char *t = tid[0] ? tid : NULL;
    uint32_t n = 0;
    for (struct session *s = session_next_owned(env->sessions, NULL, uid, t); s;
         s = session_next_owned(env->sessions, s, uid, t)) {
        n++;
    }
    msgpack_sbuffer sb;
    msgpack_packer pk;
    rpc_begin_ok(&sb, &pk, msgid);
    msgpack_pack_map(&pk, 1);
    proto_pack_cstr(&pk, "sessions");
    msgpack_pack_array(&pk, n);
    for (struct session *s = session_next_owned(env->sessions, NULL, uid, t); s;
         s = session_next_owned(env->sessions, s, uid, t)) {
        struct session_info si;
        session_get_info(s, &si);
        pack_session(&pk, &si);
    }
    rpc_finish(rc, &sb);
}

/* ---- file jobs: session.write, session.read, session.list {session} ---- */

enum fjob_kind { FJOB_WRITE, FJOB_READ, FJOB_LIST, FJOB_FILES };

struct fjob {
    struct workq_job job;
    struct rpc *rpc;
    struct session_table *sessions;
    uint64_t conn_id;
    uint32_t msgid;
    enum fjob_kind kind;
    char session[SESSION_ID_LEN + 1];
    char rel[CONFIG_FILES_PATH_MAX + 1];
    int root; /* a duplicate of the workspace's root, owned */
    uid_t uid;
    gid_t gid;
    uint32_t mode;
    uint64_t offset;
    size_t len;
    char *data; /* write: the bytes to write; read: the buffer read into */
    size_t got;
    uint64_t size;
    struct workspace_entry *entries;
    size_t n_entries;
    bool truncated;
    struct open_wait *open; /* FJOB_FILES: the session.open its files are for */
    int r;
    struct err e;
};

static void fjob_free(struct fjob *j)
{
    j->root = fd_close(j->root);
    workspace_entries_free(j->entries, j->n_entries);
    free(j->data);
    if (j->open) {
        open_wait_free(j->open);
    }
    free(j);
}

/* Writes one file of a session.open whole (as the task's user: fjob_work). */
static int write_file(struct fjob *j, const struct task_spec_file *f)
{
    int fd = -1;
    int r = workspace_create(j->root, f->path, f->mode, j->uid, j->gid, &fd, &j->e);
    for (size_t done = 0; r == 0 && done < f->size;) {
        ssize_t n = RETRY_EINTR(write(fd, f->data + done, (size_t)f->size - done));
        if (n < 0) {
            r = err_set(&j->e, -errno, "'%s': write", f->path);
        } else {
            done += (size_t)n;
        }
    }
    fd = fd_close(fd);
    return r;
}

/* Worker thread: the write, read or listing, beneath the workspace's root. */
static void fjob_work(struct workq_job *w)
{
    struct fjob *j = container_of(w, struct fjob, job);
    struct workspace_ids ids;
    int fd = -1;
    switch (j->kind) {
    case FJOB_WRITE:
        ids = workspace_as_task(j->uid, j->gid);
        j->r = j->offset == 0
                   ? workspace_create(j->root, j->rel, j->mode, j->uid, j->gid, &fd, &j->e)
                   : workspace_open_at(j->root, j->rel, &fd, &j->e);
        workspace_as_sbxd(ids);
        if (j->r < 0) {
            break;
        }
        for (size_t done = 0; done < j->len;) {
            ssize_t n =
                RETRY_EINTR(pwrite(fd, j->data + done, j->len - done, (off_t)(j->offset + done)));
            if (n < 0) {
                j->r = err_set(&j->e, -errno, "write");
                break;
            }
            done += (size_t)n;
        }
        struct stat st;
        if (j->r == 0 && fstat(fd, &st) == 0) {
            j->size = (uint64_t)st.st_size;
        }
        fd = fd_close(fd);
        break;
    case FJOB_READ:
        j->r =
            workspace_read(j->root, j->rel, j->offset, j->len, j->data, &j->got, &j->size, &j->e);
        break;
    case FJOB_LIST:
        j->r = workspace_list(j->root, j->rel, LIST_MAX, &j->entries, &j->n_entries, &j->truncated,
                              &j->e);
        break;
    case FJOB_FILES:
        ids = workspace_as_task(j->uid, j->gid);
        for (uint32_t i = 0; j->r == 0 && i < j->open->files.n_files; i++) {
            j->r = write_file(j, &j->open->files.files[i]);
            j->len += j->r == 0 ? (size_t)j->open->files.files[i].size : 0;
        }
        workspace_as_sbxd(ids);
        break;
    }
}

/* The error code a failed file operation answers with. */
static const char *fjob_code(int r)
{
    switch (r) {
    case -ENOENT:
        return "not_found";
    case -ENOSPC:
    case -EFBIG:
    case -EDQUOT:
        return "too_large";
    case -EIO:
    case -ENOMEM:
        return "internal";
    default:
        return "bad_request";
    }
}

static void fjob_answer(struct rpc_conn *rc, struct fjob *j)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    rpc_begin_ok(&sb, &pk, j->msgid);
    switch (j->kind) {
    case FJOB_WRITE:
        msgpack_pack_map(&pk, 1);
        proto_pack_kv_u64(&pk, "size", j->size);
        break;
    case FJOB_READ:
        msgpack_pack_map(&pk, 3);
        proto_pack_cstr(&pk, "data");
        msgpack_pack_bin_with_body(&pk, j->data ? j->data : "", j->got);
        proto_pack_kv_u64(&pk, "size", j->size);
        proto_pack_kv_bool(&pk, "eof", j->offset + j->got >= j->size);
        break;
    case FJOB_FILES:
        break; /* open_answer's */
    case FJOB_LIST:
        msgpack_pack_map(&pk, 2);
        proto_pack_cstr(&pk, "entries");
        msgpack_pack_array(&pk, j->n_entries);
        for (size_t i = 0; i < j->n_entries; i++) {
            const struct workspace_entry *en = &j->entries[i];
            msgpack_pack_map(&pk, 4);
            proto_pack_kv_text(&pk, "name", en->name);
            proto_pack_kv_str(&pk, "type", workspace_type_name(en->type));
            proto_pack_kv_u64(&pk, "size", en->size);
            proto_pack_kv_u64(&pk, "mode", en->mode);
        }
        proto_pack_kv_bool(&pk, "truncated", j->truncated);
        break;
    }
    rpc_finish(rc, &sb);
}

/* Loop: the session counts the bytes and its idle timeout starts again; the client, if
 * still there, gets the answer. */
static void fjob_done(struct workq_job *w)
{
    struct fjob *j = container_of(w, struct fjob, job);
    struct session *s = session_find(j->sessions, j->session, strlen(j->session));
    if (s && (j->r == 0 || j->kind == FJOB_FILES)) {
        session_add_files(s, j->kind == FJOB_WRITE || j->kind == FJOB_FILES ? j->len : 0,
                          j->kind == FJOB_READ ? j->got : 0);
    }
    if (j->kind == FJOB_FILES) {
        struct open_wait *ow = take_ptr(&j->open);
        if (s && j->r == 0) {
            open_answer(ow, s);
        } else {
            /* The session was never the client's: it ends, and the open is refused. */
            struct session_info gone;
            if (s) {
                (void)session_close(s, &gone);
            }
            open_failed(ow, s ? fjob_code(j->r) : "internal",
                        s ? err_msg(&j->e) : "the session ended before its files were written");
        }
        fjob_free(j);
        return;
    }
    if (s) {
        session_touch(s);
    }
    struct rpc_conn *rc = rpc_find_conn(j->rpc, SERVER_AGENTS, j->conn_id);
    if (rc && j->r < 0) {
        rpc_note_error(j->rpc, fjob_code(j->r));
        server_conn_send_error(rc->c, j->msgid, fjob_code(j->r), err_msg(&j->e));
    } else if (rc) {
        fjob_answer(rc, j);
    }
    fjob_free(j);
}

/* The common part of the three: keys, the owned session, the normalized path (list: ""
 * for the root); then a job with the workspace's root, or the refusal answered. */
static struct fjob *fjob_begin(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args,
                               const char *method, const char *const *keys, size_t n_keys,
                               enum fjob_kind kind)
{
    const struct rpc_env *env = &rc->rpc->env;
    struct err e = ERR_INIT;
    const char *code;
    if (!keys_ok(rc, msgid, args, method, keys, n_keys)) {
        return NULL;
    }
    struct session *s = owned(rc, msgid, args, method, &code, &e);
    if (!s) {
        refuse(rc, msgid, method, code, err_msg(&e));
        return NULL;
    }
    scoped_free struct fjob *j = xcalloc(1, sizeof(*j));
    j->root = -1;
    const msgpack_object *po = proto_map_get(args, "path");
    const char *path = "/work";
    uint32_t plen = 5;
    if ((po && po->type != MSGPACK_OBJECT_NIL) || kind != FJOB_LIST) {
        if (!po || po->type != MSGPACK_OBJECT_STR) {
            refuse(rc, msgid, method, "bad_request", "'path' must be a string");
            return NULL;
        }
        path = po->via.str.ptr;
        plen = po->via.str.size;
    }
    bool root = kind == FJOB_LIST &&
                ((plen == 5 && memcmp(path, "/work", 5) == 0) ||
                 (plen == 6 && memcmp(path, "/work/", 6) == 0) || (plen == 1 && path[0] == '.'));
    const char *why = NULL;
    int r = root ? 0
                 : wspath_normalize(path, plen, pool_config(session_pool(s))->files_path_max,
                                    j->rel, sizeof(j->rel), &why);
    if (r < 0) {
        char msg[160];
        (void)snprintf(msg, sizeof(msg), "'path': %s", why ? why : "the path is refused");
        refuse(rc, msgid, method, r == -ENAMETOOLONG ? "too_large" : "bad_request", msg);
        return NULL;
    }
    if (kind == FJOB_LIST && session_busy(s)) {
        /* Listing while a command writes is allowed: the answer is a snapshot. */
    }
    r = session_work_fd(s, &j->uid, &j->gid);
    if (r < 0) {
        refuse(rc, msgid, method, "not_found", "the session's sandbox is gone");
        return NULL;
    }
    j->root = r;
    j->rpc = rc->rpc;
    j->sessions = env->sessions;
    j->conn_id = server_conn_id(rc->c);
    j->msgid = msgid;
    j->kind = kind;
    str_copy(j->session, session_id(s), sizeof(j->session));
    return take_ptr(&j);
}

static void fjob_submit(struct rpc_conn *rc, struct fjob *j)
{
    workq_submit(rc->rpc->env.workq, &j->job, fjob_work, fjob_done);
}

/* A session.open's files, written before it is answered. */
static void files_job_start(struct open_wait *w, struct session *s)
{
    struct fjob *j = xcalloc(1, sizeof(*j));
    j->kind = FJOB_FILES;
    j->rpc = w->rpc;
    j->sessions = w->rpc->env.sessions;
    j->conn_id = w->conn_id;
    j->msgid = w->msgid;
    j->open = w;
    str_copy(j->session, session_id(s), sizeof(j->session));
    int r = session_work_fd(s, &j->uid, &j->gid);
    if (r < 0) {
        j->open = NULL;
        j->root = -1;
        fjob_free(j);
        struct session_info gone;
        (void)session_close(s, &gone);
        open_failed(w, "internal", "the session's sandbox is gone");
        return;
    }
    j->root = r;
    workq_submit(w->rpc->env.workq, &j->job, fjob_work, fjob_done);
}

void rpc_session_write(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    static const char *const keys[] = {"session", "token", "path", "data", "offset", "mode"};
    static const char method[] = "session.write";
    struct err e = ERR_INIT;
    /* The arguments first: nothing is duplicated for a request that is refused. */
    const msgpack_object *d =
        args && args->type == MSGPACK_OBJECT_MAP ? proto_map_get(args, "data") : NULL;
    const char *data = NULL;
    uint32_t len = 0;
    if (args && args->type == MSGPACK_OBJECT_MAP && (!d || !proto_obj_bytes(d, &data, &len))) {
        refuse(rc, msgid, method, "bad_request", "'data' must be bytes");
        return;
    }
    uint64_t offset = 0, mode = 0644;
    int r = 0;
    const msgpack_object *o = args ? proto_map_get(args, "offset") : NULL;
    if (o && o->type != MSGPACK_OBJECT_NIL) {
        r = proto_get_u64(args, "offset", &offset, &e);
        if (r == 0 && offset > (1ULL << 62)) {
            r = err_setx(&e, -EINVAL, "'offset' is out of range");
        }
    }
    o = args ? proto_map_get(args, "mode") : NULL;
    if (r == 0 && o && o->type != MSGPACK_OBJECT_NIL) {
        r = proto_get_u64(args, "mode", &mode, &e);
        /* SECURITY: permission bits only: no setuid, setgid or sticky file from a client. */
        if (r == 0 && mode > 0777) {
            r = err_setx(&e, -EINVAL, "'mode' must be permission bits (0..0777)");
        }
    }
    if (r < 0) {
        refuse(rc, msgid, method, "bad_request", err_msg(&e));
        return;
    }
    struct fjob *j = fjob_begin(rc, msgid, args, method, keys, ARRAY_SIZE(keys), FJOB_WRITE);
    if (!j) {
        return;
    }
    j->offset = offset;
    j->mode = (uint32_t)mode;
    j->len = len;
    /* Bounded by the message size the server already enforced. */
    j->data = len ? xmalloc(len) : NULL;
    if (len) {
        memcpy(j->data, data, len);
    }
    fjob_submit(rc, j);
}

void rpc_session_read(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    static const char *const keys[] = {"session", "token", "path", "offset", "length"};
    static const char method[] = "session.read";
    struct err e = ERR_INIT;
    uint64_t offset = 0, length = READ_DEFAULT;
    int r = 0;
    const msgpack_object *o = args ? proto_map_get(args, "offset") : NULL;
    if (o && o->type != MSGPACK_OBJECT_NIL) {
        r = proto_get_u64(args, "offset", &offset, &e);
    }
    o = args ? proto_map_get(args, "length") : NULL;
    if (r == 0 && o && o->type != MSGPACK_OBJECT_NIL) {
        r = proto_get_u64(args, "length", &length, &e);
        if (r == 0 && length > READ_MAX) {
            r = err_setx(&e, -E2BIG, "'length' must be at most %d", READ_MAX);
        }
    }
    if (r < 0) {
        refuse(rc, msgid, method, r == -E2BIG ? "too_large" : "bad_request", err_msg(&e));
        return;
    }
    struct fjob *j = fjob_begin(rc, msgid, args, method, keys, ARRAY_SIZE(keys), FJOB_READ);
    if (!j) {
        return;
    }
    j->offset = offset;
    j->len = (size_t)length;
    j->data = length ? xmalloc((size_t)length) : NULL;
    fjob_submit(rc, j);
}

void rpc_session_list(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    static const char *const keys[] = {"session", "token", "path"};
    static const char method[] = "session.list";
    if (!args || args->type != MSGPACK_OBJECT_MAP || !proto_map_get(args, "session")) {
        static const char *const list_keys[] = {"token"};
        if (keys_ok(rc, msgid, args, method, list_keys, ARRAY_SIZE(list_keys))) {
            list_sessions(rc, msgid, args);
        }
        return;
    }
    struct fjob *j = fjob_begin(rc, msgid, args, method, keys, ARRAY_SIZE(keys), FJOB_LIST);
    if (j) {
        fjob_submit(rc, j);
    }
}

/* ---- exec {session} ---- */

void rpc_session_exec(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    struct rpc *rpc = rc->rpc;
    const struct rpc_env *env = &rpc->env;
    struct err e = ERR_INIT;
    const char *code;
    struct session *s = owned(rc, msgid, args, "exec", &code, &e);
    if (!s) {
        rpc_note_error(rpc, code);
        rpc_deny_exec(rc, msgid, args, NULL, code, err_msg(&e));
        return;
    }
    if (session_busy(s)) {
        rpc_note_error(rpc, "busy");
        rpc_deny_exec(rc, msgid, args, NULL, "busy",
                      "a command is already running in this session; one at a time");
        return;
    }
    struct pool *p = session_pool(s);
    scoped(task_spec_clear) struct task_spec spec = TASK_SPEC_INIT;
    int r = exec_args_decode_session(env, args, p, &spec, &e);
    if (r < 0) {
        code = r == -E2BIG ? "too_large" : "bad_request";
        rpc_note_error(rpc, code);
        rpc_deny_exec(rc, msgid, args, NULL, code, err_msg(&e));
        return;
    }
    const struct token *tok = session_token(s);
    struct err ge = ERR_INIT;
    int granted =
        tok ? exec_args_grant_session(&spec, env->tokens, tok, session_commands(s) == 0, &ge) : 0;
    struct task *t = NULL;
    const struct task_sink sink = {&rpc_sink_ops, rc, NULL, NULL};
    r = task_new(env->tenv, &sink, msgid, p, &spec, &t, &e);
    if (r < 0) {
        log_error_errno(r, "msg=\"cannot create task\" detail=\"%s\"", err_msg(&e));
        rpc_deny_exec(rc, msgid, args, NULL, "internal", err_msg(&e));
        return;
    }
    struct task_audit_peer peer = rpc_audit_peer(rc);
    task_audit_request_session(env->tenv, task_id(t), &peer, task_get_spec(t), session_id(s));
    rc->inflight++;
    struct task_sink *ts = task_sink(t);
    DLIST_PUSH(rc->tasks, ts);
    if (granted < 0) {
        rpc_note_error(rpc, "denied");
        metrics_denied(env->metrics, "grant_failed");
        task_fail(t, "denied", err_msg(&ge));
        return;
    }
    r = session_exec(s, t);
    if (r < 0) { /* checked above; never left without an answer */
        rpc_note_error(rpc, "busy");
        task_fail(t, "busy", "the session cannot run a command now");
    }
}
