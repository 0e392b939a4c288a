/* SPDX-License-Identifier: MIT */
#pragma once
/* struct task_spec: one exec request, decoded once (api/exec_args.c) and what the task
 * runs from then on: its pool, argv and env, cwd, timeout, stdin, and the grants of its
 * capability token. The audit trail records it (core/task_audit.c), egress adds its proxy
 * variables (task_spec_env_set), and only sandbox/ packs it into init's CTL_TASK
 * (task_spec_pack). argv and env are one block of NUL-terminated strings, argv first, as
 * CTL_TASK carries them, so that packing copies nothing. Loop thread only. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"
#include "wire/ctl.h"

struct pool_config;

/* The largest block of argv and env strings: one CTL_TASK must carry it whole. */
#define TASK_SPEC_STRINGS_MAX CTL_TASK_DATA_MAX
/* Grants: at most this many mounts (one CTL_TASK's). */
#define TASK_SPEC_MOUNTS_MAX CTL_MOUNTS_MAX

/* One entry of exec's files (api/exec_args.c), written into /work before the command starts
 * (core/task_files.c). */
struct task_spec_file {
    char *path;    /* normalized, relative to /work (wspath_normalize) */
    char *data;    /* inline: the size bytes (NULL when size is 0); streamed: NULL */
    uint64_t size; /* its bytes */
    uint32_t mode; /* permission bits, 0..0777 */
    bool streamed; /* its bytes come in exec.file chunks */
};

struct task_spec {
    const struct pool_config
        *pool; /* the pool it runs in (the config's; never NULL once decoded) */
    /* argc then envc NUL-terminated strings ("NAME=value" for env), len bytes of a block of
     * cap; the first env_base env strings are sbxd's own (the base env), the request's follow.
     * strings is NULL until task_spec_begin. */
    char *strings;
    size_t len;
    size_t cap;
    size_t limit;   /* what task_spec_add_* may fill: the request's bound (max_argv_bytes) */
    size_t env_off; /* where env begins (the end of argv) */
    uint32_t argc;
    uint32_t envc;
    uint32_t env_base;
    char cwd[CTL_PATH_MAX];
    uint64_t timeout_ns; /* the deadline applied (the request's, or the pool's default) */
    bool stdin;          /* the client streams stdin (else the task reads EOF at once) */
    /* The sandbox outlives the task (a session's command): packed as CTL_TASK_KEEP. */
    bool keep;
    bool capture; /* output comes back in the result, not as exec.stdout/exec.stderr */
    /* What the request itself said, for the audit trail (the rest are defaults): */
    bool has_pool;    /* a pool name */
    bool has_env;     /* an env map, maybe empty */
    bool has_cwd;     /* a cwd */
    bool has_stdin;   /* a stdin boolean */
    double timeout_s; /* the timeout it asked for in seconds, 0: none */
    /* Grants of its capability token (api/exec_args.c; all NULL/0 without a token). Owned. */
    char *token_id;       /* the token's public id (never the token itself) */
    char *net_profile;    /* egress profile name, NULL: loopback only */
    uint32_t n_mounts;    /* detached read-only mount trees (open_tree), fd i at mount_dst[i] */
    uint32_t mount_files; /* bit i: mount i is a regular file (else a directory) */
    int mount_fds[TASK_SPEC_MOUNTS_MAX];
    char mount_dst[TASK_SPEC_MOUNTS_MAX][CTL_PATH_MAX];
    /* exec's files and collect (api/exec_args.c), for core/task_files.c: never sent to init
     * (sbxd writes and reads /work itself). Owned. */
    struct task_spec_file *files; /* n_files entries in request order, paths distinct */
    uint32_t n_files;
    uint64_t files_bytes;    /* every entry's size added up */
    uint64_t files_streamed; /* of which exec.file chunks bring (the streamed entries') */
    char **collect;          /* n_collect normalized patterns (wspath_pattern_normalize) */
    uint32_t n_collect;
    bool has_collect; /* the request had collect (maybe empty): its result has files */
};

/* A spec that owns nothing: what task_spec_clear leaves, safe to clear again. */
#define TASK_SPEC_INIT                                                                             \
    {                                                                                              \
        .strings = NULL                                                                            \
    }

/* Starts the strings: a block of limit bytes (<= TASK_SPEC_STRINGS_MAX), which the
 * request's argv and env fill. Resets argc, envc and env_base. */
void task_spec_begin(struct task_spec *s, size_t limit);
/* Appends one argument (len bytes, no NUL in them). All of argv comes before any env.
 * Returns 0, -EINVAL for a NUL byte, or -E2BIG past the limit (s unchanged on failure). */
int task_spec_add_arg(struct task_spec *s, const char *arg, size_t len);
/* Appends NAME=value (name without '=' or NUL, value without NUL: the caller checked),
 * counted in env_base when base is true (only before the request's own). Returns 0 or
 * -E2BIG past the limit (s unchanged). */
int task_spec_add_env(struct task_spec *s, const char *name, size_t name_len, const char *value,
                      size_t value_len, bool base);
/* Sets name=value in env, replacing every value it had (the request's own included): the
 * others keep their order and the new one goes last. sbxd's additions (egress's proxy
 * variables) may go past the request's limit up to TASK_SPEC_STRINGS_MAX, reallocating.
 * Returns 0 or -E2BIG (s unchanged; e says so). */
int task_spec_env_set(struct task_spec *s, const char *name, const char *value, struct err *e);
/* Removes every value of name from env (the others keep their order). */
void task_spec_env_unset(struct task_spec *s, const char *name);

/* Points the task's HTTP clients at its egress proxy on 127.0.0.1:port: the variables of
 * wire/egress_parse.h (egress_parse_proxy_var) set to it, replacing the request's own, after
 * every other env string. Returns 0 or -E2BIG (e says so; s may then have lost the old
 * values, and the task must not start). */
int task_spec_set_proxy(struct task_spec *s, uint16_t port, struct err *e);

/* Walks strings of the block: task_spec_argv and task_spec_request_env start one, each
 * task_spec_next gives the next string and its length, false at the end. */
struct task_spec_iter {
    const char *p;
    const char *end;
    uint32_t left;
};
void task_spec_argv(const struct task_spec *s, struct task_spec_iter *it);
/* The env strings the request gave (after the base env), "NAME=value". */
void task_spec_request_env(const struct task_spec *s, struct task_spec_iter *it);
bool task_spec_next(struct task_spec_iter *it, const char **ret, size_t *ret_len);

/* Fills init's CTL_TASK header for s with nofile (the pool's RLIMIT_NOFILE) and its flags
 * (CTL_TASK_KEEP for keep); s->strings
 * are the data that follow it, s->mount_fds the fds after stdio. Returns 0, -EINVAL (no
 * argv, too many mounts) or -E2BIG (strings over TASK_SPEC_STRINGS_MAX), with e. */
int task_spec_pack(const struct task_spec *s, uint32_t nofile, struct ctl_task *ret, struct err *e);

/* Frees the strings, closes the mount fds and frees the files: what init received (CTL_TASK
 * was sent or never will be) and what was written. The rest (pool, cwd, grants' names,
 * collect) stays for the result. */
void task_spec_drop_payload(struct task_spec *s);
/* Moves src's contents to dst (which owns nothing); src is left owning nothing. */
void task_spec_move(struct task_spec *dst, struct task_spec *src);
/* Frees everything s owns (s itself is its owner's: embedded or on the stack) and leaves it
 * owning nothing. Accepts NULL; for scoped(task_spec_clear). */
void task_spec_clear(struct task_spec *s);
/* Frees n file entries (their paths and data) and the array. Accepts NULL. */
void task_spec_files_free(struct task_spec_file *files, uint32_t n);
