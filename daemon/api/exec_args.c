/* SPDX-License-Identifier: MIT */
/* The exec request from msgpack into a struct task_spec, checked in full (types, sizes,
 * names) before anything else sees it, and the token's grants added to it. The only place
 * that reads an exec's arguments (but for the token string, which goes to token/ alone,
 * and the raw record of a request that never decoded). */
#include "api/exec_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/rpc.h"
#include "config/config.h"
#include "core/pool.h"
#include "core/sched.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/util.h"
#include "sandbox/task_spec.h"
#include "token/token.h"
#include "wire/proto.h"
#include "wire/wspath.h"

#define EXEC_MAX_ENV 256
/* Patterns of one collect (docs/PROTOCOL.md). */
#define EXEC_MAX_COLLECT 64

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

static const char *const exec_keys[] = {"argv",  "pool",    "timeout", "env",     "cwd",    "stdin",
                                        "token", "capture", "files",   "collect", "session"};
static const char *const file_keys[] = {"path", "data", "size", "mode"};

/* A client path for a message: quoted, escaped, cut. */
static const char *path_quote(const char *s, uint32_t len, char *buf, size_t size)
{
    char tmp[72];
    size_t n = len < sizeof(tmp) - 1 ? len : sizeof(tmp) - 1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    return log_quote(tmp, buf, size);
}

/* One entry of files (index i) into f: its path normalized, its data copied (the message
 * is freed once the request is handled) or its size to stream. */
static int decode_file(const struct pool_config *pc, const msgpack_object *o, uint32_t i,
                       bool allow_streamed, struct task_spec_file *f, struct err *e)
{
    char name[32];
    char q[96];
    int kr = o->type == MSGPACK_OBJECT_MAP
                 ? proto_keys_check(o, file_keys, ARRAY_SIZE(file_keys), name, sizeof(name))
                 : -EINVAL;
    if (kr == -EINVAL) {
        return err_setx(e, -EINVAL, "files[%u] must be a map {path, data | size, mode}", i);
    }
    if (kr < 0) {
        return err_setx(e, -EINVAL, "files[%u]: unknown key %s", i,
                        path_quote(name, (uint32_t)strlen(name), q, sizeof(q)));
    }
    const msgpack_object *po = proto_map_get(o, "path");
    if (!po || po->type != MSGPACK_OBJECT_STR) {
        return err_setx(e, -EINVAL, "files[%u]: 'path' must be a string", i);
    }
    char rel[CONFIG_FILES_PATH_MAX + 1];
    const char *why = "invalid";
    int r = wspath_normalize(po->via.str.ptr, po->via.str.size, pc->files_path_max, rel,
                             sizeof(rel), &why);
    if (r < 0) {
        return err_setx(e, r == -ENAMETOOLONG ? -E2BIG : -EINVAL, "files[%u]: path %s: %s", i,
                        path_quote(po->via.str.ptr, po->via.str.size, q, sizeof(q)), why);
    }
    const msgpack_object *dobj = proto_map_get(o, "data");
    const msgpack_object *sobj = proto_map_get(o, "size");
    if (dobj && dobj->type == MSGPACK_OBJECT_NIL) {
        dobj = NULL;
    }
    if (sobj && sobj->type == MSGPACK_OBJECT_NIL) {
        sobj = NULL;
    }
    if (!dobj == !sobj) {
        return err_setx(e, -EINVAL, "files[%u] (%s): exactly one of 'data' and 'size'", i,
                        path_quote(rel, (uint32_t)strlen(rel), q, sizeof(q)));
    }
    const char *data = NULL;
    uint32_t data_len = 0;
    if (dobj && !proto_obj_bytes(dobj, &data, &data_len)) {
        return err_setx(e, -EINVAL, "files[%u]: 'data' must be bin or str", i);
    }
    if (sobj && !allow_streamed) {
        return err_setx(e, -EINVAL,
                        "files[%u]: 'size' (streamed files) is exec's only; give 'data'", i);
    }
    if (sobj && sobj->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        return err_setx(e, -EINVAL, "files[%u]: 'size' must be a non-negative integer", i);
    }
    uint32_t mode = 0644;
    const msgpack_object *mo = proto_map_get(o, "mode");
    if (mo && mo->type != MSGPACK_OBJECT_NIL) {
        /* SECURITY: permission bits only; setuid, setgid and sticky are refused, not
         * masked, so that a client learns its file would not be what it asked for. */
        if (mo->type != MSGPACK_OBJECT_POSITIVE_INTEGER || mo->via.u64 > 0777) {
            return err_setx(e, -EINVAL,
                            "files[%u]: 'mode' must be permission bits 0..0777 (no setuid, "
                            "setgid or sticky bit)",
                            i);
        }
        mode = (uint32_t)mo->via.u64;
    }
    f->path = xstrdup(rel);
    f->mode = mode;
    if (sobj) {
        f->size = sobj->via.u64;
        f->streamed = true;
    } else {
        f->size = data_len;
        if (data_len > 0) {
            f->data = xmalloc(data_len);
            memcpy(f->data, data, data_len);
        }
    }
    return 0;
}

static int path_cmp(const void *a, const void *b)
{
    const struct task_spec_file *x = *(struct task_spec_file *const *)a;
    const struct task_spec_file *y = *(struct task_spec_file *const *)b;
    return strcmp(x->path, y->path);
}

static int path_key_cmp(const void *key, const void *b)
{
    const struct task_spec_file *y = *(struct task_spec_file *const *)b;
    return strcmp(key, y->path);
}

/* Two entries of one path, or one whose path is a directory of another's, could not both
 * be written: refused before anything runs rather than failed half-way. */
static int check_distinct(struct task_spec_file *files, uint32_t n, struct err *e)
{
    if (n < 2) {
        return 0;
    }
    scoped_free struct task_spec_file **v = xcalloc(n, sizeof(*v));
    for (uint32_t i = 0; i < n; i++) {
        v[i] = &files[i];
    }
    qsort(v, n, sizeof(*v), path_cmp);
    char q[96], q2[96];
    for (uint32_t i = 0; i + 1 < n; i++) {
        if (strcmp(v[i]->path, v[i + 1]->path) == 0) {
            return err_setx(e, -EINVAL, "files: path %s is given twice",
                            path_quote(v[i]->path, (uint32_t)strlen(v[i]->path), q, sizeof(q)));
        }
    }
    char buf[CONFIG_FILES_PATH_MAX + 1];
    for (uint32_t i = 0; i < n; i++) {
        const char *p = files[i].path;
        for (const char *sl = strchr(p, '/'); sl; sl = strchr(sl + 1, '/')) {
            size_t len = (size_t)(sl - p);
            memcpy(buf, p, len);
            buf[len] = '\0';
            if (bsearch(buf, v, n, sizeof(*v), path_key_cmp)) {
                return err_setx(e, -EINVAL, "files: %s is a file and the directory of %s",
                                path_quote(buf, (uint32_t)len, q, sizeof(q)),
                                path_quote(p, (uint32_t)strlen(p), q2, sizeof(q2)));
            }
        }
    }
    return 0;
}

int exec_args_files(const struct pool_config *pc, const msgpack_object *fo, bool allow_streamed,
                    struct task_spec *spec, struct err *e)
{
    if (!fo || fo->type == MSGPACK_OBJECT_NIL) {
        return 0;
    }
    if (fo->type != MSGPACK_OBJECT_ARRAY) {
        return err_setx(e, -EINVAL, "'files' must be an array of maps");
    }
    uint32_t n = fo->via.array.size;
    if (n > pc->files_max_count) {
        return err_setx(e, -E2BIG, "files: %u entries exceed pool '%s''s files_max_count (%u)", n,
                        pc->name, pc->files_max_count);
    }
    if (n == 0) {
        return 0;
    }
    /* Owned by spec from the start, so that a refusal half-way frees what was decoded. */
    spec->files = xcalloc(n, sizeof(*spec->files));
    uint64_t total = 0, streamed = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct task_spec_file *f = &spec->files[i];
        int r = decode_file(pc, &fo->via.array.ptr[i], i, allow_streamed, f, e);
        if (r < 0) {
            return r;
        }
        spec->n_files = i + 1;
        if (f->size > pc->files_max_bytes - total) {
            return err_setx(e, -E2BIG,
                            "files: more than pool '%s''s files_max_bytes (%llu bytes) at "
                            "files[%u]",
                            pc->name, (unsigned long long)pc->files_max_bytes, i);
        }
        total += f->size;
        streamed += f->streamed ? f->size : 0;
    }
    spec->files_bytes = total;
    spec->files_streamed = streamed;
    return check_distinct(spec->files, n, e);
}

static int decode_collect(const struct pool_config *pc, const msgpack_object *co,
                          struct task_spec *spec, struct err *e)
{
    if (!co || co->type == MSGPACK_OBJECT_NIL) {
        return 0;
    }
    if (co->type != MSGPACK_OBJECT_ARRAY || co->via.array.size > EXEC_MAX_COLLECT) {
        return err_setx(e, -EINVAL, "'collect' must be an array of at most %d patterns",
                        EXEC_MAX_COLLECT);
    }
    spec->has_collect = true;
    uint32_t n = co->via.array.size;
    if (n == 0) {
        return 0;
    }
    spec->collect = xcalloc(n, sizeof(*spec->collect));
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *o = &co->via.array.ptr[i];
        if (o->type != MSGPACK_OBJECT_STR) {
            return err_setx(e, -EINVAL, "collect[%u] must be a string", i);
        }
        char pat[CONFIG_FILES_PATH_MAX + 1];
        char q[96];
        const char *why = "invalid";
        int r = wspath_pattern_normalize(o->via.str.ptr, o->via.str.size, pc->files_path_max, pat,
                                         sizeof(pat), &why);
        if (r < 0) {
            return err_setx(e, r == -ENAMETOOLONG ? -E2BIG : -EINVAL, "collect[%u]: %s: %s", i,
                            path_quote(o->via.str.ptr, o->via.str.size, q, sizeof(q)), why);
        }
        spec->collect[i] = xstrdup(pat);
        spec->n_collect = i + 1;
    }
    return 0;
}

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
    r = exec_args_files(pc, proto_map_get(a, "files"), true, spec, e);
    if (r < 0) {
        return r;
    }
    r = decode_collect(pc, proto_map_get(a, "collect"), spec, e);
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
