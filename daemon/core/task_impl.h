/* SPDX-License-Identifier: MIT */
#pragma once
/* struct task's body, for core/task.c and core/task_audit.c only; other folders use
 * core/task.h. Loop thread only. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/outcap.h"
#include "core/pool.h"
#include "core/task.h"
#include "egress/egress.h"
#include "lib/err.h"
#include "sandbox/cgroup.h"
#include "token/token.h"
#include "sandbox/task_spec.h"
#include "sandbox/workspace.h"
#include "wire/ctl.h"

struct sandbox;

/* A stream's output kept for the result (spec.capture): what passed the cap, no more. */
struct task_capture {
    char *data; /* NULL until the first byte */
    size_t len;
    size_t size;
};

struct task {
    struct task_env *env;
    struct task_sink sink; /* its client; sink.ops NULL once the client is let go */
    uint32_t msgid;
    struct pool *pool;
    struct sandbox *sb;
    char id[24];
    char sb_id[24]; /* the sandbox it ran in, kept for the result */
    enum task_state state;
    enum task_kill_reason kill;
    /* The request, with its token's grants: its strings and mount fds go once CTL_TASK is
     * sent (task_spec_drop_payload). */
    struct task_spec spec;
    struct egress_session *egress;    /* the proxy serving its net_profile while it runs */
    struct egress_stats egress_stats; /* what it did through the proxy, for its result */
    struct token_link tlink;          /* the token's task list (token.c); tlink.tok NULL without */
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
    struct task_capture out_cap; /* spec.capture: stdout for the result */
    struct task_capture err_cap; /* spec.capture: stderr for the result */
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
    int fail_errno;            /* CTL_EXEC_FAILED: -errno of the failure init reported */
    struct cgroup_usage usage; /* last snapshot of the sandbox's cgroup */
    bool have_usage;
    bool admitted;           /* policy.decision (allowed) is in the audit trail */
    bool counted;            /* sched_task_started was called (task_committed ends it) */
    struct pool_waiter wait; /* its place in the pool's queue */
    struct session *session; /* a session's command (spec.keep), until it is told the end */
    bool kept;               /* its sandbox went on after it (back to its session) */
    /* exec's files and collect (core/task_files.c) */
    struct task_stage *stage;         /* the files and their chunks; NULL without files */
    uint64_t files_received;          /* streamed bytes that arrived (exec.file) */
    uint64_t files_in_bytes;          /* file bytes written into /work */
    uint64_t files_out_bytes;         /* file bytes collected */
    bool files_failed;                /* they could not be written: status error, stage files */
    int collect_fd;                   /* a dup of the sandbox's work fd (collect), or -1 */
    bool collecting;                  /* the collect job runs */
    bool collected;                   /* it ran, or will not */
    bool collect_failed;              /* it could not read /work at all */
    struct workspace_collect collect; /* what it found, for the result */
};

/* Between core/task.c and core/task_files.c: */
/* Drops a reference (a libuv handle's, a job's); the last frees the task. */
void task_unref(struct task *t);
/* Every file is written: the command starts (CTL_TASK), and its deadline. */
void task_run(struct task *t);
/* The command will never run (its files failed or did not arrive, a chunk too many, the
 * sandbox could not be prepared): status error with e (error_stage files when files), its
 * sandbox killed, its result sent as any task's. QUEUED or STAGING tasks only. */
void task_abort(struct task *t, const struct err *e, bool files);
/* The task's output and collect may be done: the result goes once everything is. */
void task_maybe_finish(struct task *t);

/* What a finished task came to: computed once for its result and its audit events. */
struct task_outcome {
    /* exited, signaled, timeout, output_limit, oom, token_expired, token_revoked,
     * cancelled (its client left), error */
    const char *status;
    bool has_exit_code;
    int exit_code;
    bool has_signal;
    int signal;
    uint64_t wall_ms;
    uint64_t cpu_ms;
    uint64_t mem_peak_bytes;
    /* Status error or cancelled: why, in words (points into the task or is static), else
     * NULL. */
    const char *error;
    const char *error_cause; /* status error: metrics.h's cause, else NULL */
};
