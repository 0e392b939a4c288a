/* SPDX-License-Identifier: MIT */
/* The capability token methods of the admin socket (docs/TOKENS.md): token.issue,
 * token.revoke, token.list. Arguments are validated here in full; the token string itself
 * leaves sbxd only in token.issue's answer and is never logged or recorded. */
#define LOG_MOD "rpc"
#include "api/rpc_admin.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "api/rpc_impl.h"
#include "api/server.h"
#include "audit/audit.h"
#include "core/sched.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/util.h"
#include "metrics/metrics.h"
#include "token/token.h"
#include "wire/ctl.h"
#include "wire/proto.h"

static const char *const token_issue_keys[] = {"mounts", "net", "pools", "ttl", "uses"};

/* Whether every key of map a is one of keys; else e names the first stranger. */
static int keys_check(const msgpack_object *a, const char *const *keys, size_t n,
                      const char *method, struct err *e)
{
    char name[64];
    int r = proto_keys_check(a, keys, n, name, sizeof(name));
    if (r == -EINVAL) {
        return err_setx(e, -EINVAL, "%s takes a map of arguments", method);
    }
    if (r < 0) {
        return err_setx(e, -EINVAL, "unknown %s argument '%s'", method, name);
    }
    return 0;
}

/* token.issue's arguments as C strings, owned here. */
struct issue_args {
    struct token_mount mounts[TOKEN_MAX_MOUNTS];
    char *pools[TOKEN_MAX_POOLS];
    char net[TOKEN_NAME_MAX + 1];
    struct token_request rq;
};

static void issue_args_done(struct issue_args *ia)
{
    for (size_t i = 0; i < TOKEN_MAX_MOUNTS; i++) {
        free(ia->mounts[i].src);
        free(ia->mounts[i].dst);
    }
    for (size_t i = 0; i < TOKEN_MAX_POOLS; i++) {
        free(ia->pools[i]);
    }
}

/* A msgpack str as a malloc'ed C string of at most max bytes, or NULL. */
static char *obj_strdup(const msgpack_object *o, size_t max)
{
    if (!o || o->type != MSGPACK_OBJECT_STR || o->via.str.size > max ||
        memchr(o->via.str.ptr, '\0', o->via.str.size)) {
        return NULL;
    }
    return xstrndup(o->via.str.ptr, o->via.str.size);
}

/* Parses token.issue. -EINVAL bad_request, -ENOENT unknown_pool; e says why. */
static int parse_issue(const struct rpc_env *env, const msgpack_object *a, struct issue_args *ia,
                       struct err *e)
{
    int r = keys_check(a, token_issue_keys, ARRAY_SIZE(token_issue_keys), "token.issue", e);
    if (r < 0) {
        return r;
    }
    const msgpack_object *mo = proto_map_get(a, "mounts");
    if (mo && mo->type != MSGPACK_OBJECT_NIL) {
        if (mo->type != MSGPACK_OBJECT_ARRAY || mo->via.array.size > TOKEN_MAX_MOUNTS) {
            return err_setx(e, -EINVAL, "'mounts' must be an array of at most %d {src, dst} maps",
                            TOKEN_MAX_MOUNTS);
        }
        for (uint32_t i = 0; i < mo->via.array.size; i++) {
            const msgpack_object *m = &mo->via.array.ptr[i];
            static const char *const mkeys[] = {"src", "dst"};
            if (keys_check(m, mkeys, ARRAY_SIZE(mkeys), "mount", e) < 0) {
                return -EINVAL;
            }
            ia->mounts[i].src = obj_strdup(proto_map_get(m, "src"), PATH_MAX - 1);
            ia->mounts[i].dst = obj_strdup(proto_map_get(m, "dst"), CTL_PATH_MAX - 1);
            if (!ia->mounts[i].src || !ia->mounts[i].dst) {
                return err_setx(e, -EINVAL, "mounts[%u] needs 'src' and 'dst' path strings", i);
            }
        }
        ia->rq.mounts = ia->mounts;
        ia->rq.n_mounts = mo->via.array.size;
    }
    const msgpack_object *po = proto_map_get(a, "pools");
    if (po && po->type != MSGPACK_OBJECT_NIL) {
        if (po->type != MSGPACK_OBJECT_ARRAY || po->via.array.size > TOKEN_MAX_POOLS) {
            return err_setx(e, -EINVAL, "'pools' must be an array of at most %d pool names",
                            TOKEN_MAX_POOLS);
        }
        for (uint32_t i = 0; i < po->via.array.size; i++) {
            ia->pools[i] = obj_strdup(&po->via.array.ptr[i], 64);
            if (!ia->pools[i]) {
                return err_setx(e, -EINVAL, "'pools' must be an array of pool names");
            }
            if (!sched_find_pool(env->sched, ia->pools[i])) {
                return err_setx(e, -ENOENT, "unknown pool '%.64s'", ia->pools[i]);
            }
        }
        ia->rq.pools = (const char *const *)ia->pools;
        ia->rq.n_pools = po->via.array.size;
    }
    const msgpack_object *no = proto_map_get(a, "net");
    if (no && no->type != MSGPACK_OBJECT_NIL) {
        if (no->type != MSGPACK_OBJECT_STR || proto_obj_cstr(no, ia->net, sizeof(ia->net)) < 0) {
            return err_setx(e, -EINVAL, "'net' must be \"none\" or a network profile name");
        }
        ia->rq.net = ia->net;
    }
    const msgpack_object *to = proto_map_get(a, "ttl");
    if (to && to->type != MSGPACK_OBJECT_NIL) {
        double secs;
        r = proto_get_f64(a, "ttl", &secs, e);
        if (r < 0) {
            return -EINVAL;
        }
        if (!(secs > 0) || secs > 1e9) {
            return err_setx(e, -EINVAL, "'ttl' must be a positive number of seconds");
        }
        ia->rq.ttl_ns = (uint64_t)(secs * 1e9);
    }
    const msgpack_object *uo = proto_map_get(a, "uses");
    if (uo && uo->type != MSGPACK_OBJECT_NIL) {
        uint64_t uses;
        if (proto_get_u64(a, "uses", &uses, e) < 0 || uses > UINT32_MAX) {
            return err_setx(e, -EINVAL, "'uses' must be a whole number (0: unlimited)");
        }
        ia->rq.uses = (uint32_t)uses;
    }
    return 0;
}

/* Packs what a token grants and where it stands. */
static void pack_token(msgpack_packer *pk, const struct token_info *ti)
{
    msgpack_pack_map(pk, 11);
    proto_pack_kv_str(pk, "id", ti->id);
    proto_pack_kv_str(pk, "state", token_state_name(ti->state));
    proto_pack_kv_u64(pk, "created_at_ms", ti->created_ms);
    proto_pack_kv_u64(pk, "expires_at_ms", ti->expires_ms);
    if (ti->revoked_ms) {
        proto_pack_kv_u64(pk, "revoked_at_ms", ti->revoked_ms);
    } else {
        proto_pack_kv_nil(pk, "revoked_at_ms");
    }
    if (ti->uses) {
        proto_pack_kv_u64(pk, "uses", ti->uses);
        proto_pack_kv_u64(pk, "uses_left", ti->uses_left);
    } else {
        proto_pack_kv_nil(pk, "uses");
        proto_pack_kv_nil(pk, "uses_left");
    }
    proto_pack_kv_u64(pk, "running", ti->running);
    proto_pack_kv_str(pk, "net", ti->net ? ti->net : "none");
    proto_pack_cstr(pk, "pools");
    msgpack_pack_array(pk, (uint32_t)ti->n_pools);
    for (size_t i = 0; i < ti->n_pools; i++) {
        proto_pack_cstr(pk, ti->pools[i]);
    }
    proto_pack_cstr(pk, "mounts");
    msgpack_pack_array(pk, (uint32_t)ti->n_mounts);
    for (size_t i = 0; i < ti->n_mounts; i++) {
        msgpack_pack_map(pk, 2);
        proto_pack_kv_text(pk, "src", ti->mounts[i].src);
        proto_pack_kv_text(pk, "dst", ti->mounts[i].dst);
    }
}

/* token.issue in the audit trail: what was granted, by whom; never the token. */
static void audit_token_issue(struct rpc_conn *rc, const struct token_info *ti)
{
    struct audit_ev *ev = audit_begin(rc->rpc->env.audit, "token.issue", NULL);
    audit_id(ev, "token_id", ti->id);
    audit_u64(ev, "expires_at_ms", ti->expires_ms);
    audit_u64(ev, "uses", ti->uses);
    audit_id(ev, "net", ti->net ? ti->net : "none");
    audit_array_begin(ev, "pools");
    for (size_t i = 0; i < ti->n_pools; i++) {
        audit_array_id(ev, ti->pools[i]);
    }
    audit_array_end(ev);
    audit_array_begin(ev, "mounts");
    for (size_t i = 0; i < ti->n_mounts; i++) {
        scoped_free char *m = xasprintf("%s:%s", ti->mounts[i].src, ti->mounts[i].dst);
        audit_array_str(ev, m, strlen(m));
    }
    audit_array_end(ev);
    audit_u64(ev, "peer_uid", server_conn_peer_uid(rc->c));
    (void)audit_end(ev);
}

void rpc_admin_token_issue(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    const struct rpc_env *env = &rc->rpc->env;
    struct err e = ERR_INIT;
    scoped(issue_args_done) struct issue_args ia;
    memset(&ia, 0, sizeof(ia));
    int r = parse_issue(env, args, &ia, &e);
    if (r < 0) {
        const char *code = r == -ENOENT ? "unknown_pool" : "bad_request";
        rpc_refused(rc, code, code, RPC_METHOD("token.issue"), err_msg(&e));
        server_conn_send_error(rc->c, msgid, code, err_msg(&e));
        return;
    }
    char token[TOKEN_STR_LEN + 1];
    const struct token *tok = NULL;
    r = token_issue(env->tokens, &ia.rq, token, &tok, &e);
    if (r < 0) {
        const char *code = r == -EACCES   ? "denied"
                           : r == -EINVAL ? "bad_request"
                           : r == -ENOSPC ? "limit"
                                          : "internal";
        char q[192];
        if (r == -EACCES) {
            metrics_denied(env->metrics, "issue_not_allowed");
        }
        rpc_refused(rc, code, code, RPC_METHOD("token.issue"), err_msg(&e));
        log_info("conn=%llu msg=\"token not issued\" code=%s detail=%s",
                 (unsigned long long)server_conn_id(rc->c), code,
                 log_quote(err_msg(&e), q, sizeof(q)));
        server_conn_send_error(rc->c, msgid, code, err_msg(&e));
        return;
    }
    struct token_info ti;
    token_get_info(env->tokens, tok, &ti);
    audit_token_issue(rc, &ti);
    log_info("token=%s mounts=%zu pools=%zu net=%s uses=%u ttl_s=%llu msg=\"token issued\"", ti.id,
             ti.n_mounts, ti.n_pools, ti.net ? ti.net : "none", ti.uses,
             (unsigned long long)((ti.expires_ms - ti.created_ms) / 1000));
    msgpack_sbuffer sb;
    msgpack_packer pk;
    rpc_begin_ok(&sb, &pk, msgid);
    msgpack_pack_map(&pk, 2);
    /* The one place the token string ever leaves sbxd. */
    proto_pack_kv_str(&pk, "token", token);
    proto_pack_cstr(&pk, "info");
    pack_token(&pk, &ti);
    sodium_memzero(token, sizeof(token));
    rpc_finish(rc, &sb);
}

void rpc_admin_token_revoke(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    static const char *const keys[] = {"token", "id"};
    const struct rpc_env *env = &rc->rpc->env;
    struct err e = ERR_INIT;
    int r = keys_check(args, keys, ARRAY_SIZE(keys), "token.revoke", &e);
    const msgpack_object *to = r == 0 ? proto_map_get(args, "token") : NULL;
    const msgpack_object *io = r == 0 ? proto_map_get(args, "id") : NULL;
    to = to && to->type != MSGPACK_OBJECT_NIL ? to : NULL;
    io = io && io->type != MSGPACK_OBJECT_NIL ? io : NULL;
    const msgpack_object *which = to ? to : io;
    if (r == 0 && ((to && io) || !which || which->type != MSGPACK_OBJECT_STR)) {
        r = err_setx(&e, -EINVAL, "token.revoke takes either 'token' or 'id' (a string)");
    }
    const struct token *tok = NULL;
    size_t killed = 0;
    if (r == 0) {
        r = token_revoke(env->tokens, which->via.str.ptr, which->via.str.size, &tok, &killed, &e);
    }
    if (r < 0) {
        const char *code = r == -EIO ? "internal" : "bad_request";
        rpc_refused(rc, code, code, RPC_METHOD("token.revoke"), err_msg(&e));
        server_conn_send_error(rc->c, msgid, code, err_msg(&e));
        return;
    }
    struct token_info ti;
    token_get_info(env->tokens, tok, &ti);
    (void)audit_event(env->audit, "token.revoke", NULL, "token_id", AUDIT_ID, ti.id, "killed",
                      AUDIT_U64, (uint64_t)killed, "peer_uid", AUDIT_U64,
                      (uint64_t)server_conn_peer_uid(rc->c), NULL);
    msgpack_sbuffer sb;
    msgpack_packer pk;
    rpc_begin_ok(&sb, &pk, msgid);
    msgpack_pack_map(&pk, 3);
    proto_pack_kv_str(&pk, "id", ti.id);
    proto_pack_kv_bool(&pk, "revoked", true);
    proto_pack_kv_u64(&pk, "killed", killed);
    rpc_finish(rc, &sb);
}

void rpc_admin_token_list(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args)
{
    const struct rpc_env *env = &rc->rpc->env;
    struct err e = ERR_INIT;
    if (args && !(args->type == MSGPACK_OBJECT_ARRAY && args->via.array.size == 0) &&
        keys_check(args, NULL, 0, "token.list", &e) < 0) {
        rpc_refused(rc, "bad_request", "bad_request", RPC_METHOD("token.list"), err_msg(&e));
        server_conn_send_error(rc->c, msgid, "bad_request", err_msg(&e));
        return;
    }
    msgpack_sbuffer sb;
    msgpack_packer pk;
    rpc_begin_ok(&sb, &pk, msgid);
    msgpack_pack_array(&pk, (uint32_t)token_count(env->tokens));
    for (const struct token *t = token_next(env->tokens, NULL); t; t = token_next(env->tokens, t)) {
        struct token_info ti;
        token_get_info(env->tokens, t, &ti);
        pack_token(&pk, &ti);
    }
    rpc_finish(rc, &sb);
}
