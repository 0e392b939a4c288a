/* SPDX-License-Identifier: MIT */
#pragma once
/* One task: its stdio pipes and streaming to the client, the combined output cap, the
 * deadline, and the result. Loop thread only. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "sandbox/cgroup.h"
#include "wire/ctl.h"
#include "egress/egress.h"
#include "lib/err.h"
#include "core/outcap.h"
#include "core/pool.h"
#include "token/token.h"

struct audit;
struct config;
struct egress;
struct pool;
struct sandbox;
struct sched;
struct conn;

/* What every task needs, one per daemon, filled by main. */
struct task_env {
    uv_loop_t *loop;
    const struct config *cfg;
    struct audit *audit;
    struct sched *sched;
    uint32_t instance;     /* prefixes task ids */
    uint64_t next_task;    /* task_make_id's counter */
    struct egress *egress; /* egress sessions for tasks with a network profile */
};

enum task_state {
    TASK_QUEUED = 0, /* waiting for a sandbox */
    TASK_RUNNING,    /* handed to a sandbox */
    TASK_FINISHING,  /* exited or killed; draining output */
    TASK_DONE,       /* result sent (or client gone); handles closing */
};

enum task_kill_reason {
    KILL_NONE = 0,
    KILL_TIMEOUT,
    KILL_OUTPUT,
    KILL_CLIENT,        /* the client disconnected */
    KILL_SHUTDOWN,      /* the daemon's drain grace ran out */
    KILL_TOKEN_EXPIRED, /* the capability token it ran under expired: status token_expired */
    KILL_TOKEN_REVOKED, /* ... or was revoked: status token_revoked */
};

struct task {
    struct task_env *env;
    struct conn *conn; /* NULL once the client is gone */
    uint32_t msgid;
    struct pool *pool;
    struct sandbox *sb;
    char id[24];
    char sb_id[24]; /* the sandbox it ran in, kept for the result */
    enum task_state state;
    enum task_kill_reason kill;
    struct ctl_task hdr;
    char *data; /* argv and env strings for CTL_TASK */
    uint64_t timeout_ns;
    bool cold; /* waited in the queue */
    /* Grants from the capability token (token.c fills them before pool_submit; all NULL/0
     * without a token). The task owns these strings and fds. */
    char *token_id;                   /* the token's public id (never the token itself) */
    char *net_profile;                /* egress profile name, NULL = loopback only */
    struct egress_session *egress;    /* the proxy serving net_profile while it runs (egress.c) */
    struct egress_stats egress_stats; /* what it did through the proxy, for its result */
    int *mount_fds;                   /* detached read-only mounts (open_tree), one per mount_dst */
    char **mount_dst;
    size_t n_mounts;
    struct token_link tlink; /* the token's task list (token.c); tlink.tok NULL without */
    /* stdio: child ends are sent to the sandbox, ours are libuv pipes */
    int child_fds[3];
    uv_pipe_t in;
    uv_pipe_t out;
    uv_pipe_t err;
    uv_timer_t timer;
    int open_handles;
    bool in_open;
    bool in_eof_requested; /* client sent the empty stdin chunk */
    size_t in_pending;     /* stdin bytes queued to the pipe */
    bool out_eof;
    bool err_eof;
    bool reading; /* output reads active (false: backpressure) */
    struct outcap cap;
    uint64_t out_bytes;
    uint64_t err_bytes;
    /* outcome */
    bool exited; /* CTL_EXITED or CTL_EXEC_FAILED seen, or sandbox died */
    bool exec_failed;
    int wstatus;
    struct err error; /* status "error": why */
    uint64_t t_request_ns;
    uint64_t t_start_ns;
    uint64_t t_exit_ns;
    uint64_t rusage_cpu_us;
    uint32_t seccomp_denials;  /* CTL_DENIALS_UNKNOWN when not counted */
    uint32_t fail_stage;       /* CTL_EXEC_FAILED: enum ctl_stage where the task failed */
    struct cgroup_usage usage; /* last snapshot of the sandbox's cgroup */
    bool have_usage;
    bool admitted;           /* policy.decision (allowed) is in the audit trail */
    struct pool_waiter wait; /* its place in the pool's queue */
    struct task *cprev;      /* connection's task list */
    struct task *cnext;
};

/* What a finished task came to: computed once for its result and its audit events. */
struct task_outcome {
    const char *status; /* exited, signaled, timeout, output_limit, oom, error */
    bool has_exit_code;
    int exit_code;
    bool has_signal;
    int signal;
    uint64_t wall_ms;
    uint64_t cpu_ms;
    uint64_t mem_peak_bytes;
    const char *error; /* status "error": why (points into the task), else NULL */
};

/* Writes a fresh task id (env->instance and a counter) into buf (>= 24 bytes): for
 * task_new, and for requests refused before they became a task (their audit chain). */
void task_make_id(struct task_env *env, char *buf, size_t size);
/* Records that the task was admitted (policy.decision, once): rpc.c calls it when the task
 * was queued, task_start when it got a sandbox at once. */
void task_admit(struct task *t);

/* Builds a task from a validated request (argv/env already packed into hdr and data, which
 * the task takes over). Creates its pipes. Returns 0 or -errno. */
int task_new(struct task_env *env, struct conn *c, uint32_t msgid, struct pool *p,
             const struct ctl_task *hdr, char *data, uint64_t timeout_ns, bool want_stdin,
             struct task **ret, struct err *e);
/* Queues or starts the task in its pool (pool_submit): 0, -EBUSY or -ESHUTDOWN. */
int task_submit(struct task *t);
/* The task could not be scheduled (queue full, draining, client left while queued):
 * answers the client with the error (when connected) and frees the task. */
void task_fail(struct task *t, const char *code, const char *message);
/* From rpc.c: a stdin chunk; len 0 closes the task's stdin. */
void task_stdin(struct task *t, const char *data, size_t len);
/* The client disconnected: kill the sandbox, drop the result. */
void task_client_gone(struct task *t);
/* Kills a running task for the given reason. */
void task_kill(struct task *t, enum task_kill_reason why);
/* token.c's kill callback (token_kill_cb): the token of the task linked by l expired or was
 * revoked. A running task is killed (status token_expired / token_revoked); a queued one
 * is refused with error "denied" and freed. */
void task_token_kill(struct token_link *l, enum token_state why, void *arg);
/* The connection's write queue drained: resume reading output. */
void task_resume(struct task *t);
