/* SPDX-License-Identifier: MIT */
/* Method tables for the agents' and the admin socket. Every request is validated here in
 * full (types, sizes, names) before anything else sees it; nothing on the agents' socket
 * can reach an admin method. */
#define LOG_MOD "rpc"
#include "rpc.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "config.h"
#include "ctl.h"
#include "daemon.h"
#include "exec.h"
#include "log.h"
#include "pool.h"
#include "proto.h"
#include "server.h"
#include "util.h"

#define SBX_VERSION "0.1.0"
#define EXEC_MAX_ENV 256

typedef void (*method_cb)(struct conn *c, uint32_t msgid, const msgpack_object *args);

struct method {
    const char *name;
    method_cb fn;
};

void rpc_note_error(struct daemon *d, const char *kind)
{
    (void)d;
    (void)kind;
}

static void begin_ok(msgpack_sbuffer *sb, msgpack_packer *pk, uint32_t msgid)
{
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
    proto_pack_response_ok(pk, msgid);
}

static void finish(struct conn *c, msgpack_sbuffer *sb)
{
    conn_send(c, sb);
    msgpack_sbuffer_destroy(sb);
}

static void m_ping(struct conn *c, uint32_t msgid, const msgpack_object *args)
{
    (void)args;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    begin_ok(&sb, &pk, msgid);
    msgpack_pack_map(&pk, 2);
    proto_pack_kv_bool(&pk, "pong", true);
    proto_pack_kv_str(&pk, "version", SBX_VERSION);
    finish(c, &sb);
}

static void m_pools(struct conn *c, uint32_t msgid, const msgpack_object *args)
{
    (void)args;
    struct daemon *d = c->d;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    begin_ok(&sb, &pk, msgid);
    msgpack_pack_array(&pk, d->n_pools);
    for (size_t i = 0; i < d->n_pools; i++) {
        const struct pool *p = d->pools[i];
        msgpack_pack_map(&pk, 16);
        proto_pack_kv_str(&pk, "name", p->pc->name);
        proto_pack_kv_u64(&pk, "warm", p->n_state[SB_WARM]);
        proto_pack_kv_u64(&pk, "target", p->pc->warm);
        proto_pack_kv_u64(&pk, "creating", p->n_state[SB_CREATING]);
        proto_pack_kv_u64(&pk, "running", p->n_state[SB_BUSY]);
        proto_pack_kv_u64(&pk, "dying", p->n_state[SB_DYING] + p->n_state[SB_DEAD]);
        proto_pack_kv_u64(&pk, "max", p->pc->max);
        proto_pack_kv_u64(&pk, "queued", p->n_queued);
        proto_pack_kv_u64(&pk, "queue_max", p->pc->queue);
        proto_pack_kv_u64(&pk, "created", p->created);
        proto_pack_kv_u64(&pk, "failed", p->failed);
        proto_pack_kv_u64(&pk, "tasks", p->tasks);
        proto_pack_kv_u64(&pk, "cold_starts", p->cold_starts);
        proto_pack_kv_str(&pk, "image", p->pc->image);
        proto_pack_kv_str(&pk, "seccomp", p->pc->seccomp);
        proto_pack_kv_bool(&pk, "default", strcmp(p->pc->name, d->cfg->default_pool) == 0);
    }
    finish(c, &sb);
}

/* Appends a NUL-terminated string to the CTL_TASK data. */
static int data_add(char *buf, size_t cap, size_t *off, const char *s, size_t len)
{
    if (memchr(s, '\0', len)) {
        return -EINVAL;
    }
    if (*off + len + 1 > cap) {
        return -E2BIG;
    }
    memcpy(buf + *off, s, len);
    buf[*off + len] = '\0';
    *off += len + 1;
    return 0;
}

static bool env_name_ok(const char *s, uint32_t len)
{
    if (len == 0 || len > 255) {
        return false;
    }
    for (uint32_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == '=' || ch == '\0') {
            return false;
        }
    }
    return true;
}

/* The daemon's own environment for tasks; the request's env may override any of it. */
static const char *const base_env[][2] = {
    {"PATH", "/usr/local/bin:/usr/bin:/bin"},
    {"HOME", "/tmp"},
    {"LANG", "C.UTF-8"},
    {"TMPDIR", "/tmp"},
};

static bool env_overridden(const msgpack_object *env, const char *name)
{
    if (!env) {
        return false;
    }
    for (uint32_t i = 0; i < env->via.map.size; i++) {
        const msgpack_object *k = &env->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && proto_str_eq(k->via.str.ptr, k->via.str.size, name)) {
            return true;
        }
    }
    return false;
}

static const char *const exec_keys[] = {"argv", "pool", "timeout", "env", "cwd", "stdin"};

/* Validates exec arguments into a CTL_TASK header and its data. Returns 0 or -errno with
 * e holding the message for the client. */
static int parse_exec(struct daemon *d, const msgpack_object *a, struct pool **ret_pool,
                      struct ctl_task *hdr, char **ret_data, uint64_t *ret_timeout,
                      bool *ret_stdin, struct err *e)
{
    if (!a || a->type != MSGPACK_OBJECT_MAP) {
        return err_setx(e, -EINVAL, "exec takes a map of arguments");
    }
    for (uint32_t i = 0; i < a->via.map.size; i++) {
        const msgpack_object *k = &a->via.map.ptr[i].key;
        bool known = false;
        for (size_t j = 0; j < ARRAY_SIZE(exec_keys) && k->type == MSGPACK_OBJECT_STR; j++) {
            known = known || proto_str_eq(k->via.str.ptr, k->via.str.size, exec_keys[j]);
        }
        if (!known) {
            char name[64];
            if (proto_obj_cstr(k, name, sizeof(name)) < 0) {
                str_copy(name, "?", sizeof(name));
            }
            return err_setx(e, -EINVAL, "unknown exec argument '%s'", name);
        }
    }
    /* pool */
    const char *pname = d->cfg->default_pool;
    char pbuf[64];
    const msgpack_object *po = proto_map_get(a, "pool");
    if (po && po->type != MSGPACK_OBJECT_NIL) {
        if (proto_obj_cstr(po, pbuf, sizeof(pbuf)) < 0 || po->type != MSGPACK_OBJECT_STR) {
            return err_setx(e, -EINVAL, "'pool' must be a short string");
        }
        pname = pbuf;
    }
    struct pool *p = daemon_find_pool(d, pname);
    if (!p) {
        return err_setx(e, -ENOENT, "unknown pool '%.60s'", pname);
    }
    /* timeout */
    uint64_t timeout = p->pc->timeout_ns;
    const msgpack_object *to = proto_map_get(a, "timeout");
    if (to && to->type != MSGPACK_OBJECT_NIL) {
        double secs;
        int r = proto_get_f64(a, "timeout", &secs, e);
        if (r < 0) {
            return r;
        }
        if (!(secs > 0) || secs * 1e9 > (double)p->pc->max_timeout_ns) {
            return err_setx(e, -EINVAL, "'timeout' must be > 0 and <= %.3f seconds in pool '%s'",
                            (double)p->pc->max_timeout_ns / 1e9, p->pc->name);
        }
        timeout = (uint64_t)(secs * 1e9);
    }
    /* stdin */
    bool want_stdin = false;
    const msgpack_object *so = proto_map_get(a, "stdin");
    if (so && so->type != MSGPACK_OBJECT_NIL) {
        int r = proto_get_bool(a, "stdin", &want_stdin, e);
        if (r < 0) {
            return r;
        }
    }
    /* cwd */
    memset(hdr, 0, sizeof(*hdr));
    str_copy(hdr->cwd, "/tmp", sizeof(hdr->cwd));
    const msgpack_object *co = proto_map_get(a, "cwd");
    if (co && co->type != MSGPACK_OBJECT_NIL) {
        if (co->type != MSGPACK_OBJECT_STR || proto_obj_cstr(co, hdr->cwd, sizeof(hdr->cwd)) < 0 ||
            hdr->cwd[0] != '/') {
            return err_setx(e, -EINVAL, "'cwd' must be an absolute path shorter than %d bytes",
                            CTL_PATH_MAX);
        }
    }
    /* argv */
    const msgpack_object *av = proto_map_get(a, "argv");
    if (!av || av->type != MSGPACK_OBJECT_ARRAY || av->via.array.size == 0) {
        return err_setx(e, -EINVAL, "'argv' must be a non-empty array of strings");
    }
    const msgpack_object *env = proto_map_get(a, "env");
    if (env && env->type == MSGPACK_OBJECT_NIL) {
        env = NULL;
    }
    if (env && (env->type != MSGPACK_OBJECT_MAP || env->via.map.size > EXEC_MAX_ENV)) {
        return err_setx(e, -EINVAL, "'env' must be a map of at most %d strings", EXEC_MAX_ENV);
    }
    size_t cap = d->cfg->max_argv_bytes;
    scoped_free char *data = xmalloc(cap);
    size_t off = 0;
    for (uint32_t i = 0; i < av->via.array.size; i++) {
        const msgpack_object *s = &av->via.array.ptr[i];
        if (s->type != MSGPACK_OBJECT_STR || (i == 0 && s->via.str.size == 0)) {
            return err_setx(e, -EINVAL, "'argv' must be a non-empty array of strings");
        }
        int r = data_add(data, cap, &off, s->via.str.ptr, s->via.str.size);
        if (r == -EINVAL) {
            return err_setx(e, r, "argv[%u] contains a NUL byte", i);
        }
        if (r < 0) {
            return err_setx(e, -E2BIG, "argv and env exceed %zu bytes", cap);
        }
    }
    uint32_t envc = 0;
    char kv[512];
    for (size_t i = 0; i < ARRAY_SIZE(base_env); i++) {
        if (env_overridden(env, base_env[i][0])) {
            continue;
        }
        int n = snprintf(kv, sizeof(kv), "%s=%s", base_env[i][0], base_env[i][1]);
        if (data_add(data, cap, &off, kv, (size_t)n) < 0) {
            return err_setx(e, -E2BIG, "argv and env exceed %zu bytes", cap);
        }
        envc++;
    }
    for (uint32_t i = 0; env && i < env->via.map.size; i++) {
        const msgpack_object *k = &env->via.map.ptr[i].key;
        const msgpack_object *v = &env->via.map.ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR || v->type != MSGPACK_OBJECT_STR ||
            !env_name_ok(k->via.str.ptr, k->via.str.size) ||
            memchr(v->via.str.ptr, '\0', v->via.str.size)) {
            return err_setx(e, -EINVAL,
                            "'env' entries must be NAME: value strings (no '=' in names, no NUL)");
        }
        size_t need = k->via.str.size + 1 + v->via.str.size + 1;
        if (off + need > cap) {
            return err_setx(e, -E2BIG, "argv and env exceed %zu bytes", cap);
        }
        memcpy(data + off, k->via.str.ptr, k->via.str.size);
        off += k->via.str.size;
        data[off++] = '=';
        memcpy(data + off, v->via.str.ptr, v->via.str.size);
        off += v->via.str.size;
        data[off++] = '\0';
        envc++;
    }
    hdr->magic = CTL_MAGIC;
    hdr->type = CTL_TASK;
    hdr->argc = av->via.array.size;
    hdr->envc = envc;
    hdr->nofile = p->pc->nofile;
    hdr->data_len = (uint32_t)off;
    *ret_pool = p;
    *ret_data = take_ptr(&data);
    *ret_timeout = timeout;
    *ret_stdin = want_stdin;
    return 0;
}

static void m_exec(struct conn *c, uint32_t msgid, const msgpack_object *args)
{
    struct daemon *d = c->d;
    struct err e = ERR_INIT;
    if (d->draining) {
        conn_send_error(c, msgid, "shutting_down", "sbxd is shutting down");
        return;
    }
    if (c->inflight >= d->cfg->max_requests_per_conn) {
        char msg[96];
        (void)snprintf(msg, sizeof(msg), "too many requests in flight on this connection (limit %u)",
                       d->cfg->max_requests_per_conn);
        rpc_note_error(d, "limit");
        conn_send_error(c, msgid, "limit", msg);
        return;
    }
    struct pool *p = NULL;
    struct ctl_task hdr;
    char *data = NULL;
    uint64_t timeout = 0;
    bool want_stdin = false;
    int r = parse_exec(d, args, &p, &hdr, &data, &timeout, &want_stdin, &e);
    if (r < 0) {
        rpc_note_error(d, r == -ENOENT ? "unknown_pool" : "bad_request");
        conn_send_error(c, msgid, r == -ENOENT ? "unknown_pool" : (r == -E2BIG ? "too_large" : "bad_request"),
                        err_msg(&e));
        return;
    }
    struct task *t = NULL;
    r = exec_new(d, c, msgid, p, &hdr, data, timeout, want_stdin, &t, &e);
    if (r < 0) {
        free(data);
        log_error_errno(r, "msg=\"cannot create task\" detail=\"%s\"", err_msg(&e));
        conn_send_error(c, msgid, "internal", err_msg(&e));
        return;
    }
    c->inflight++;
    conn_add_task(c, t);
    r = pool_submit(p, t);
    if (r == -EBUSY) {
        char msg[128];
        (void)snprintf(msg, sizeof(msg), "pool '%s' is full: %u tasks already waiting",
                       p->pc->name, p->n_queued);
        rpc_note_error(d, "busy");
        exec_fail(t, "busy", msg);
    } else if (r < 0) {
        exec_fail(t, "shutting_down", "sbxd is shutting down");
    }
}

static const struct method agent_methods[] = {
    {"ping", m_ping},
    {"pools", m_pools},
    {"exec", m_exec},
};

static const struct method admin_methods[] = {
    {"ping", m_ping},
    {"pools", m_pools},
};

static struct task *find_task(struct conn *c, uint32_t msgid)
{
    for (struct task *t = c->tasks; t; t = t->cnext) {
        if (t->msgid == msgid) {
            return t;
        }
    }
    return NULL;
}

static void handle_notify(struct conn *c, const struct proto_msg *m)
{
    if (!proto_str_eq(m->method, m->method_len, "exec.stdin")) {
        log_debug("conn=%llu msg=\"ignoring unknown notification\"", (unsigned long long)c->id);
        return;
    }
    const msgpack_object *p = m->params;
    if (!p || p->type != MSGPACK_OBJECT_ARRAY || p->via.array.size != 2 ||
        p->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        (p->via.array.ptr[1].type != MSGPACK_OBJECT_BIN &&
         p->via.array.ptr[1].type != MSGPACK_OBJECT_STR)) {
        rpc_note_error(c->d, "bad_request");
        return;
    }
    uint64_t id = p->via.array.ptr[0].via.u64;
    struct task *t = id <= UINT32_MAX ? find_task(c, (uint32_t)id) : NULL;
    if (!t) {
        return; /* the task may have finished already: late stdin is dropped */
    }
    const msgpack_object *b = &p->via.array.ptr[1];
    exec_stdin(t, b->via.bin.ptr, b->via.bin.size);
}

void rpc_handle(struct conn *c, const struct proto_msg *m)
{
    if (m->type == PROTO_NOTIFY) {
        handle_notify(c, m);
        return;
    }
    if (m->type != PROTO_REQUEST) {
        return; /* clients have no business sending responses; ignored */
    }
    bool admin = server_kind(c->srv) == SERVER_ADMIN;
    const struct method *tab = admin ? admin_methods : agent_methods;
    size_t n = admin ? ARRAY_SIZE(admin_methods) : ARRAY_SIZE(agent_methods);
    for (size_t i = 0; i < n; i++) {
        if (proto_str_eq(m->method, m->method_len, tab[i].name)) {
            tab[i].fn(c, m->msgid, proto_params_arg0(m->params));
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
    rpc_note_error(c->d, "unknown_method");
    conn_send_error(c, m->msgid, "unknown_method", msg);
}
