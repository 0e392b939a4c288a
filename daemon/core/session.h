/* SPDX-License-Identifier: MIT */
#pragma once
/* Sessions (docs/PROTOCOL.md, "Sessions"): a sandbox held for one owner (peer uid and token
 * id) across commands, until it is closed, its TTL or idle timeout passes, its token ends,
 * sbxd drains or the sandbox dies; then the sandbox is killed and never returns to a pool.
 * A command is a struct task started on the session's sandbox (task_start_session). The
 * table, the ownership check, the timers, the token link, the audit events and metrics of a
 * session are here; the requests are api/rpc_session.c's. Loop thread only. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "lib/err.h"
#include "token/token.h"

struct audit;
struct config;
struct metrics;
struct pool;
struct sched;
struct session;
struct session_table;
struct task;

/* "s-" and 32 lowercase hex digits (128 bits from randombytes_buf). */
#define SESSION_ID_LEN 34

/* How a session ended (session_end_name gives the wire and trail name). */
enum session_end {
    SESSION_CLOSED = 0,
    SESSION_TTL,
    SESSION_IDLE,
    SESSION_TOKEN_EXPIRED,
    SESSION_TOKEN_REVOKED,
    SESSION_SHUTDOWN,
    SESSION_ERROR,
};

/* What the table needs, from the root. */
struct session_env {
    uv_loop_t *loop;
    const struct config *cfg;
    struct audit *audit;
    struct sched *sched;
    struct token_store *tokens;
};

/* What session.open asks for, checked by its caller but for the limits. */
struct session_open_req {
    struct pool *pool;
    uint32_t uid;            /* the opener's peer uid */
    int32_t pid;             /* its peer pid, for the trail */
    uint64_t conn_id;        /* its connection, for the trail */
    const struct token *tok; /* NULL: none (authorized for pool by the caller) */
    uint64_t ttl_ns;         /* > 0, <= the pool's session_max_ttl */
    uint64_t idle_ns;        /* > 0, <= ttl_ns */
};

/* How session_open answers its caller, once. */
struct session_open_ops {
    /* The session holds its sandbox and is open (session.open is in the trail). */
    void (*opened)(void *arg, struct session *s);
    /* No sandbox will come (code and message for the client): the session is gone. */
    void (*failed)(void *arg, const char *code, const char *message);
};

/* What session.list and session.close report of a session (strings are the session's). */
struct session_info {
    const char *id;
    const char *pool;
    const char *sandbox; /* "" while it waits for its sandbox */
    uint64_t created_ms; /* Unix ms */
    uint64_t expires_ms; /* Unix ms */
    uint64_t ttl_ns;
    uint64_t idle_ns;
    uint64_t commands; /* commands started */
    uint64_t lifetime_ms;
    bool busy; /* a command runs */
};

/* Makes the (empty) table. */
void session_table_new(const struct session_env *env, struct session_table **ret);
/* After the loop (every session ended by the drain). Accepts NULL; returns NULL. */
struct session_table *session_table_free(struct session_table *t);
/* Opens a session in rq->pool for its opener: takes a warm sandbox or waits in the pool's
 * queue like an exec. Returns 0 (ops are called later, or from within this call), -EUSERS
 * (limits.max_sessions), -EDQUOT (the pool's max_sessions), -EBUSY (the pool's queue is
 * full) or -ESHUTDOWN, with e saying so; then no op is called. rq->tok is linked (one use
 * taken): its expiry or revocation ends the session. */
int session_open(struct session_table *t, const struct session_open_req *rq,
                 const struct session_open_ops *ops, void *arg, struct err *e);
/* The open session with that id, or NULL (unknown, ended, or still opening). */
struct session *session_find(struct session_table *t, const char *id, size_t len);
/* Whether uid and token_id own s: 0 or -EACCES. token_id NULL: the request named no token
 * (the uid decides); a named token must be the session's own. */
int session_check_owner(const struct session *s, uint32_t uid, const char *token_id);
/* The caller's sessions in order of opening: pass NULL for the first; those of other owners
 * are skipped. */
struct session *session_next_owned(struct session_table *t, struct session *prev, uint32_t uid,
                                   const char *token_id);
void session_get_info(const struct session *s, struct session_info *ret);
struct pool *session_pool(const struct session *s);
const char *session_id(const struct session *s);
/* Its token (NULL: none), for each command's grants. */
const struct token *session_token(const struct session *s);
/* Whether a command runs now. */
bool session_busy(const struct session *s);
/* Commands started so far (the first one carries the token's mounts). */
uint64_t session_commands(const struct session *s);
/* Something was done with s (a file moved): its idle timeout starts again. */
void session_touch(struct session *s);
/* The session's workspace root for a worker's job: a CLOEXEC duplicate of its sandbox's
 * work fd (the caller closes it), and the host ids files are written as. Returns the fd or
 * -errno (-ENOENT: the sandbox is gone). */
int session_work_fd(const struct session *s, uid_t *ret_uid, gid_t *ret_gid);
/* Bytes moved into / out of s's workspace (session.close's and the metrics' totals). */
void session_add_files(struct session *s, uint64_t in, uint64_t out);

/* Runs t (made for s's pool by task_new, not submitted to any pool) as s's next command.
 * Returns 0 (t runs, or has failed and answered its client), -EBUSY (a command runs) or
 * -ENOENT (the session is ending): then t is untouched. */
int session_exec(struct session *s, struct task *t);
/* From core/task.c: s's command t is over (its result is about to be sent). */
void session_command_done(struct session *s, struct task *t);

/* Ends s for the client (session.close): a running command is cancelled. Fills ret with
 * what it was, just before it ended. Returns the ticket of its session.close event
 * (audit_when_committed), 0 when the trail takes none. */
uint64_t session_close(struct session *s, struct session_info *ret);
/* The drain began: idle sessions end now (reason shutdown), busy ones when their command
 * ends; waiting ones are refused by their pool's drain. */
void session_table_drain(struct session_table *t);
/* token.c's kill callback, for a link that may be a session's: true when l was one (the
 * session ends with reason token_expired / token_revoked), false when it is a task's. */
bool session_token_kill(struct session_table *t, struct token_link *l, enum token_state why);
/* Open sessions, all pools. */
uint32_t session_table_count(const struct session_table *t);
const char *session_end_name(enum session_end why);
