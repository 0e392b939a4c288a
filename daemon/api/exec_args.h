/* SPDX-License-Identifier: MIT */
#pragma once
/* The exec request's arguments decoded into a struct task_spec, and its capability token's
 * grants put into it. Loop thread only. */
#include <msgpack.h>

#include "lib/err.h"

struct pool;
struct pool_config;
struct rpc_env;
struct task_spec;
struct token;
struct token_store;

/* Checks the exec arguments a (types, sizes, names) and decodes them into spec (empty,
 * TASK_SPEC_INIT): the pool (the default unless named), argv, the base env (PATH, HOME,
 * LANG, TMPDIR unless the request sets them) and the request's env, cwd, timeout, stdin,
 * capture, files (exec_args_files) and collect (normalized patterns). *ret_pool is the
 * pool spec->pool is the config of. Returns 0, or -ENOENT (unknown pool), -E2BIG (argv and
 * env over max_argv_bytes; files over a pool limit, a path over files_path_max) or -EINVAL
 * with e holding the message for the client; spec then holds what was decoded so far
 * (task_spec_clear frees it). */
int exec_args_decode(const struct rpc_env *env, const msgpack_object *a, struct task_spec *spec,
                     struct pool **ret_pool, struct err *e);
/* Decodes a request's files (fo: its "files" value, NULL or nil for none) into spec for pool
 * pc: each entry's path normalized (wspath_normalize under pc's files_path_max), its inline
 * data copied, or (allow_streamed) its size to come in exec.file chunks; the count, the
 * total bytes and the paths checked (distinct, none the directory of another). Returns 0,
 * -E2BIG (a pool limit) or -EINVAL (shape, path) with e naming the entry and why; spec
 * then owns what was decoded so far. For exec and session.open (inline only). */
int exec_args_files(const struct pool_config *pc, const msgpack_object *fo, bool allow_streamed,
                    struct task_spec *spec, struct err *e);
/* Puts what tok grants into spec: its public id, network profile and mounts (detached,
 * read-only mount trees, which spec owns from now). Returns 0 or -errno with e (the id and
 * profile are set even then, so that the trail names the token). */
int exec_args_grant(struct task_spec *spec, struct token_store *tokens, const struct token *tok,
                    struct err *e);
/* The arguments of a command of a session in pool p (exec with "session"): as
 * exec_args_decode, but the pool is p (a "pool" argument must name it: else -EINVAL). */
int exec_args_decode_session(const struct rpc_env *env, const msgpack_object *a, struct pool *p,
                             struct task_spec *spec, struct err *e);
/* A session's token's grants for its next command: as exec_args_grant for the first
 * (first true), and only the id and network profile for the others, whose sandbox keeps
 * the mounts the first one attached. */
int exec_args_grant_session(struct task_spec *spec, struct token_store *tokens,
                            const struct token *tok, bool first, struct err *e);
