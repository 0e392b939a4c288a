/* SPDX-License-Identifier: MIT */
#pragma once
/* One task: its stdio pipes and streaming to its client, the combined output cap, the
 * deadline, and the result. The client is a struct task_sink (api/ implements it over its
 * connection); struct task's body is core's (core/task_impl.h). Loop thread only. */
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "lib/err.h"
#include "token/token.h"

struct audit;
struct config;
struct egress;
struct metrics;
struct pool;
struct sandbox;
struct sched;
struct session;
struct task;
struct task_sink;
struct task_spec;
struct workq;

/* What every task needs, one per daemon, filled by the root (daemon.c). */
struct task_env {
    uv_loop_t *loop;
    const struct config *cfg;
    struct audit *audit;
    struct sched *sched;
    uint32_t instance;       /* prefixes task ids */
    uint64_t next_task;      /* task_make_id's counter */
    struct egress *egress;   /* egress sessions for tasks with a network profile */
    struct metrics *metrics; /* denials of queued tasks by their token (NULL: not counted) */
    struct workq *workq;     /* worker threads for /work's files (core/task_files.c) */
};

enum task_state {
    TASK_QUEUED = 0, /* waiting for a sandbox */
    TASK_STAGING,    /* has its sandbox; its files are being written (task_files.c) */
    TASK_RUNNING,    /* handed to a sandbox */
    TASK_FINISHING,  /* exited or killed; draining output */
    TASK_DONE,       /* result sent (or client gone); handles closing */
};

enum task_kill_reason {
    KILL_NONE = 0,
    KILL_TIMEOUT,
    KILL_OUTPUT,
    KILL_CLIENT,         /* the client disconnected */
    KILL_SHUTDOWN,       /* the daemon's drain grace ran out */
    KILL_TOKEN_EXPIRED,  /* the capability token it ran under expired: status token_expired */
    KILL_TOKEN_REVOKED,  /* ... or was revoked: status token_revoked */
    KILL_SESSION_CLOSED, /* its session was closed: status cancelled */
    KILL_FILES,          /* exec.file bytes past the declared files: status error */
};

/* How a task talks to its client, which hands these at task_new. Every op gets the task's
 * own sink (s->arg is the client's). The task calls none once it has called done. */
struct task_sink_ops {
    /* Sends a packed message (a notification or the result), taking sbuf's data (sbuf is
     * left empty). */
    void (*send)(struct task_sink *s, msgpack_sbuffer *sbuf);
    /* Sends an error response for msgid. */
    void (*send_error)(struct task_sink *s, uint32_t msgid, const char *code, const char *message);
    /* Whether the client is behind on its writes: the task stops reading its output until
     * task_resume. */
    bool (*congested)(struct task_sink *s);
    /* Stdin bytes were queued to the task's pipe / written out of it (the client's
     * backpressure on its own reading). */
    void (*stdin_queued)(struct task_sink *s, size_t n);
    void (*stdin_written)(struct task_sink *s, size_t n);
    /* The task no longer answers to the client (its result or error was sent, or the client
     * is gone): the client drops it from its list and frees its request slot. Last op. */
    void (*done)(struct task_sink *s);
};

/* The task's client, embedded in the task (task_sink, task_of_sink). ops is NULL once done.
 * prev and next are the client's, for its list of its tasks; core never touches them. */
struct task_sink {
    const struct task_sink_ops *ops;
    void *arg;
    struct task_sink *prev;
    struct task_sink *next;
};

/* Writes a fresh task id (env->instance and a counter) into buf (>= 24 bytes): for
 * task_new, and for requests refused before they became a task (their audit chain). */
void task_make_id(struct task_env *env, char *buf, size_t size);
/* Records that the task was admitted (policy.decision, once): rpc.c calls it when the task
 * was queued, task_start when it got a sandbox at once. */
void task_admit(struct task *t);

/* Builds a task of pool p from a decoded request (api/exec_args.c), taking over spec's
 * contents on success (spec is left owning nothing; on failure it is untouched), that
 * answers to sink's client (ops and arg are copied). Creates its pipes. Returns 0 or
 * -errno. */
int task_new(struct task_env *env, const struct task_sink *sink, uint32_t msgid, struct pool *p,
             struct task_spec *spec, struct task **ret, struct err *e);
/* The task's embedded sink (for the client's list), and back. */
struct task_sink *task_sink(struct task *t);
struct task *task_of_sink(struct task_sink *s);
/* The task's id, the msgid of the request it answers, and its token's public id (NULL
 * without a token). */
const char *task_id(const struct task *t);
uint32_t task_msgid(const struct task *t);
const char *task_token_id(const struct task *t);
/* The request the task runs (its strings only until the task started). */
const struct task_spec *task_get_spec(const struct task *t);
/* Puts the task on tok's list (one use taken; expiry and revocation reach it from now). */
void task_attach_token(struct task *t, struct token_store *tokens, const struct token *tok);
/* Queues or starts the task in its pool (pool_submit): 0, -EBUSY or -ESHUTDOWN. */
int task_submit(struct task *t);
/* The task could not be scheduled (queue full, draining, the pool cannot make sandboxes):
 * answers the client with the error (when connected) and frees the task. Its trail ends in
 * status denied, or, once admitted, error (counted, cause shutdown or no_sandbox). */
void task_fail(struct task *t, const char *code, const char *message);
/* From rpc.c: an exec.file chunk, the next len bytes of the request's streamed files
 * (queued in memory, counted through the sink's stdin_queued, until a job writes them).
 * Returns 0 (also for a task that ended: late bytes are dropped), or -EPROTO when they go
 * past the declared total (or none was declared): the task then ends with status error,
 * and the caller answers with an error notification. */
int task_file_chunk(struct task *t, const char *data, size_t len);
/* From rpc.c: a stdin chunk; len 0 closes the task's stdin. */
void task_stdin(struct task *t, const char *data, size_t len);
/* The client disconnected: kill the sandbox, drop the result. The task ends in status
 * cancelled (trail and metrics), unless it had already exited or been killed for another
 * reason. */
void task_client_gone(struct task *t);
/* Kills a running task for the given reason. */
void task_kill(struct task *t, enum task_kill_reason why);
/* token.c's kill callback (token_kill_cb): the token of the task linked by l expired or was
 * revoked. A running task is killed (status token_expired / token_revoked); a queued one
 * is refused with error "denied" (a denial of that reason; status token_expired /
 * token_revoked in the trail and the metrics) and freed. */
void task_token_kill(struct token_link *l, enum token_state why, void *arg);
/* Starts t, made by task_new and never submitted, on its session's sandbox sb (WARM before
 * the session's first command, then SB_HELD) with spec.keep: the sandbox outlives it. On
 * timeout, output cap, cancel or a gone client only the command's processes are killed
 * (sandbox_kill_task); at its end it tells s (session_command_done) just before its result
 * is sent. core/session.c's session_exec only. */
void task_start_session(struct task *t, struct sandbox *sb, struct session *s);
/* The file bytes t wrote into /work (its files) and read back (its collect). */
void task_get_files_bytes(const struct task *t, uint64_t *ret_in, uint64_t *ret_out);
/* Its session ended first (and kills the sandbox): t tells it nothing more. */
void task_detach_session(struct task *t);
/* The client's write queue drained: resume reading output. */
void task_resume(struct task *t);
