/* SPDX-License-Identifier: MIT */
/* The exec request from msgpack into a struct task_spec, checked in full (types, sizes,
 * names) before anything else sees it, and the token's grants added to it. The only place
 * that reads an exec's arguments (but for the token string, which goes to token/ alone,
 * and the raw record of a request that never decoded). */
#include "api/exec_args.h"

#include <stdio.h>
#include <string.h>

#include "api/rpc.h"
#include "config/config.h"
#include "core/pool.h"
#include "core/sched.h"
#include "lib/alloc.h"
#include "lib/util.h"
#include "sandbox/task_spec.h"
#include "token/token.h"
#include "wire/proto.h"

#define EXEC_MAX_ENV 256

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

static const char *const exec_keys[] = {"argv",  "pool",  "timeout", "env",    "cwd",
                                        "stdin", "token", "capture", "session"};

/* argv, the base env, then the request's env, into spec's strings. */
static int decode_strings(const struct rpc_env *renv, const msgpack_object *a,
                          struct task_spec *spec, struct err *e)
{
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
    spec->has_env = env != NULL;
    size_t cap = renv->cfg->max_argv_bytes;
    task_spec_begin(spec, cap);
    /* An argument, like an env value, is bytes as on Linux (any but NUL), so str and bin
     * are both taken as they are: a client may hold argv that is not UTF-8. */
    for (uint32_t i = 0; i < av->via.array.size; i++) {
        const char *arg;
        uint32_t len;
        if (!proto_obj_bytes(&av->via.array.ptr[i], &arg, &len) || (i == 0 && len == 0)) {
            return err_setx(e, -EINVAL, "'argv' must be a non-empty array of strings");
        }
        int r = task_spec_add_arg(spec, arg, len);
        if (r == -EINVAL) {
            return err_setx(e, r, "argv[%u] contains a NUL byte", i);
        }
        if (r < 0) {
            return err_setx(e, -E2BIG, "argv and env exceed %zu bytes", cap);
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(base_env); i++) {
        if (env_overridden(env, base_env[i][0])) {
            continue;
        }
        if (task_spec_add_env(spec, base_env[i][0], strlen(base_env[i][0]), base_env[i][1],
                              strlen(base_env[i][1]), true) < 0) {
            return err_setx(e, -E2BIG, "argv and env exceed %zu bytes", cap);
        }
    }
    for (uint32_t i = 0; env && i < env->via.map.size; i++) {
        const msgpack_object *k = &env->via.map.ptr[i].key;
        const char *val;
        uint32_t val_len;
        if (k->type != MSGPACK_OBJECT_STR || !env_name_ok(k->via.str.ptr, k->via.str.size) ||
            !proto_obj_bytes(&env->via.map.ptr[i].val, &val, &val_len) ||
            memchr(val, '\0', val_len)) {
            return err_setx(e, -EINVAL,
                            "'env' entries must be NAME: value strings (no '=' in names, no NUL)");
        }
        if (task_spec_add_env(spec, k->via.str.ptr, k->via.str.size, val, val_len, false) < 0) {
            return err_setx(e, -E2BIG, "argv and env exceed %zu bytes", cap);
        }
    }
    return 0;
}

/* fixed: the session's pool (a pool the request names must be it), or NULL. */
static int decode(const struct rpc_env *renv, const msgpack_object *a, struct pool *fixed,
                  struct task_spec *spec, struct pool **ret_pool, struct err *e)
{
    char name[64];
    int kr = proto_keys_check(a, exec_keys, ARRAY_SIZE(exec_keys), name, sizeof(name));
    if (kr == -EINVAL) {
        return err_setx(e, -EINVAL, "exec takes a map of arguments");
    }
    if (kr < 0) {
        return err_setx(e, -EINVAL, "unknown exec argument '%s'", name);
    }
    /* pool */
    const char *pname = renv->cfg->default_pool;
    char pbuf[64];
    const msgpack_object *po = proto_map_get(a, "pool");
    if (po && po->type != MSGPACK_OBJECT_NIL) {
        if (proto_obj_cstr(po, pbuf, sizeof(pbuf)) < 0 || po->type != MSGPACK_OBJECT_STR) {
            return err_setx(e, -EINVAL, "'pool' must be a short string");
        }
        pname = pbuf;
    }
    struct pool *p = fixed ? fixed : sched_find_pool(renv->sched, pname);
    if (!p) {
        return err_setx(e, -ENOENT, "unknown pool '%.60s'", pname);
    }
    if (fixed && pname == pbuf && strcmp(pname, pool_config(fixed)->name) != 0) {
        return err_setx(e, -EINVAL, "'pool' must be the session's ('%s') or omitted",
                        pool_config(fixed)->name);
    }
    const struct pool_config *pc = pool_config(p);
    spec->pool = pc;
    spec->has_pool = pname == pbuf;
    /* timeout */
    spec->timeout_ns = pc->timeout_ns;
    const msgpack_object *to = proto_map_get(a, "timeout");
    if (to && to->type != MSGPACK_OBJECT_NIL) {
        double secs;
        int r = proto_get_f64(a, "timeout", &secs, e);
        if (r < 0) {
            return r;
        }
        if (!(secs > 0) || secs * 1e9 > (double)pc->max_timeout_ns) {
            return err_setx(e, -EINVAL, "'timeout' must be > 0 and <= %.3f seconds in pool '%s'",
                            (double)pc->max_timeout_ns / 1e9, pc->name);
        }
        spec->timeout_ns = (uint64_t)(secs * 1e9);
        spec->timeout_s = secs;
    }
    /* stdin */
    const msgpack_object *so = proto_map_get(a, "stdin");
    if (so && so->type != MSGPACK_OBJECT_NIL) {
        int r = proto_get_bool(a, "stdin", &spec->stdin, e);
        if (r < 0) {
            return r;
        }
        spec->has_stdin = true;
    }
    /* capture */
    const msgpack_object *cp = proto_map_get(a, "capture");
    if (cp && cp->type != MSGPACK_OBJECT_NIL) {
        int r = proto_get_bool(a, "capture", &spec->capture, e);
        if (r < 0) {
            return r;
        }
    }
    /* cwd */
    str_copy(spec->cwd, "/work", sizeof(spec->cwd));
    const msgpack_object *co = proto_map_get(a, "cwd");
    if (co && co->type != MSGPACK_OBJECT_NIL) {
        if (co->type != MSGPACK_OBJECT_STR ||
            proto_obj_cstr(co, spec->cwd, sizeof(spec->cwd)) < 0 || spec->cwd[0] != '/') {
            return err_setx(e, -EINVAL, "'cwd' must be an absolute path shorter than %d bytes",
                            CTL_PATH_MAX);
        }
        spec->has_cwd = true;
    }
    int r = decode_strings(renv, a, spec, e);
    if (r < 0) {
        return r;
    }
    *ret_pool = p;
    return 0;
}

int exec_args_decode(const struct rpc_env *renv, const msgpack_object *a, struct task_spec *spec,
                     struct pool **ret_pool, struct err *e)
{
    return decode(renv, a, NULL, spec, ret_pool, e);
}

int exec_args_decode_session(const struct rpc_env *renv, const msgpack_object *a, struct pool *p,
                             struct task_spec *spec, struct err *e)
{
    struct pool *got = NULL;
    return decode(renv, a, p, spec, &got, e);
}

/* mounts false: the id and network profile only (a session's later commands, whose
 * sandbox has the token's mounts since its first). */
static int grant(struct task_spec *spec, struct token_store *tokens, const struct token *tok,
                 bool mounts, struct err *e)
{
    struct token_info ti;
    int fds[TOKEN_MAX_MOUNTS];
    uint32_t files = 0;
    token_get_info(tokens, tok, &ti);
    spec->token_id = xstrdup(ti.id);
    spec->net_profile = ti.net ? xstrdup(ti.net) : NULL;
    if (ti.n_mounts == 0 || !mounts) {
        return 0;
    }
    int r = token_open_mounts(tokens, tok, fds, &files, e);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < ti.n_mounts; i++) {
        spec->mount_fds[i] = fds[i];
        str_copy(spec->mount_dst[i], ti.mounts[i].dst, sizeof(spec->mount_dst[i]));
    }
    spec->n_mounts = (uint32_t)ti.n_mounts;
    spec->mount_files = files;
    return 0;
}

int exec_args_grant(struct task_spec *spec, struct token_store *tokens, const struct token *tok,
                    struct err *e)
{
    return grant(spec, tokens, tok, true, e);
}

int exec_args_grant_session(struct task_spec *spec, struct token_store *tokens,
                            const struct token *tok, bool first, struct err *e)
{
    return grant(spec, tokens, tok, first, e);
}
