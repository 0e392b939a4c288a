/* SPDX-License-Identifier: MIT */
#pragma once
/* The exec request's arguments decoded into a struct task_spec, and its capability token's
 * grants put into it. Loop thread only. */
#include <msgpack.h>

#include "lib/err.h"

struct pool;
struct rpc_env;
struct task_spec;
struct token;
struct token_store;

/* Checks the exec arguments a (types, sizes, names) and decodes them into spec (empty,
 * TASK_SPEC_INIT): the pool (the default unless named), argv, the base env (PATH, HOME,
 * LANG, TMPDIR unless the request sets them) and the request's env, cwd, timeout, stdin.
 * *ret_pool is the pool spec->pool is the config of. Returns 0, or -ENOENT (unknown pool),
 * -E2BIG (argv and env over max_argv_bytes) or -EINVAL with e holding the message for the
 * client; spec then holds what was decoded so far (task_spec_clear frees it). */
int exec_args_decode(const struct rpc_env *env, const msgpack_object *a, struct task_spec *spec,
                     struct pool **ret_pool, struct err *e);
/* Puts what tok grants into spec: its public id, network profile and mounts (detached,
 * read-only mount trees, which spec owns from now). Returns 0 or -errno with e (the id and
 * profile are set even then, so that the trail names the token). */
int exec_args_grant(struct task_spec *spec, struct token_store *tokens, const struct token *tok,
                    struct err *e);
