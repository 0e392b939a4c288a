/* SPDX-License-Identifier: MIT */
#pragma once
/* sbxd's metrics: its series on the registry of registry.h, served by http.c on
 * `GET /metrics` and `GET /healthz`.
 *
 * The series are created at start-up for every pool and every known label value, so that the
 * hot path only updates a pre-made series: no lookup, allocation, formatting or I/O. Each
 * pool's series are one struct metrics_pool handle that its owner keeps. Gauges that mirror
 * state (pool sizes, connections, fork servers) are not hooked: at scrape time metrics asks
 * its source (set by the composition root) to fill a struct metrics_values.
 *
 * Observers take values: every hook takes numbers, strings and the structs of this header,
 * never a task, sandbox, pool or connection, so metrics/ includes nothing above it.
 *
 * Threads: creation, rendering and the hooks run on the loop thread, except those documented
 * as "any thread" (the audit writer's); value updates are relaxed atomics. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"
#include "metrics/registry.h"

struct http_request;
struct http_response;
struct metrics;
/* One pool's series, made by metrics_new; owned by struct metrics. */
struct metrics_pool;

/* What one pool looks like at scrape time. */
struct metrics_pool_values {
    uint32_t warm;            /* warm sandboxes ready for a task */
    uint32_t target;          /* warm sandboxes the pool keeps ready */
    uint32_t creating;        /* sandboxes being created */
    uint32_t running;         /* sandboxes running a task */
    uint32_t queued;          /* tasks waiting for a sandbox */
    uint32_t max;             /* sandboxes the pool may have at once */
    uint64_t create_failures; /* creations that failed, ever */
    uint64_t cold_starts;     /* tasks that waited for a creation, ever */
    bool fork_server_up;      /* its fork server runs */
    uint64_t fork_server_spawned;
    uint64_t fork_server_failures;
    uint32_t sessions_open; /* sessions open or waiting for their sandbox */
};

/* What the source fills at scrape time. pools has n_pools entries in metrics_new's order,
 * zeroed before each call. */
struct metrics_values {
    struct metrics_pool_values *pools;
    size_t n_pools;
    uint32_t rpc_connections; /* open connections on the agents' and admin sockets */
};

/* Where the state mirrored at scrape time comes from. Loop thread. */
struct metrics_source {
    /* Fills v (metrics_render_daemon, before rendering). */
    void (*collect)(void *arg, struct metrics_values *v);
    /* Whether sbxd is draining (SIGTERM arrived): /healthz answers 503 "draining". */
    bool (*draining)(void *arg);
};

/* A finished task, as metrics_task_done counts it. */
struct metrics_task_result {
    /* With status "error", why (sbx_task_errors_total's cause): "exec" (the command could
     * not be executed), "cwd" (its working directory), "files" (its files could not be
     * written, or did not arrive in time), "mounts" (its token's mounts), "setup"
     * (the sandbox could not set the task up), "no_sandbox" (queued, the pool could not
     * make one), "shutdown" (sbxd's drain). NULL with any other status. */
    const char *error_cause;
    uint64_t start_ns;        /* the task had its sandbox; 0 if it never did */
    uint64_t exit_ns;         /* its exit or kill; 0: not known (now is used) */
    uint64_t stdout_bytes;    /* delivered to the client */
    uint64_t stderr_bytes;    /* delivered to the client */
    bool truncated;           /* killed at the pool's output cap */
    bool denials_known;       /* the kernel could count seccomp denials */
    uint32_t seccomp_denials; /* when denials_known */
};

/* The names metrics_new makes series for (copied: they need not outlive the call). */
struct metrics_names {
    const char *const *pools; /* n_pools, in the order of metrics_pool */
    size_t n_pools;
    const char *const *profiles; /* the configured egress profiles */
    size_t n_profiles;
};

/* Creates sbxd's registry with every family and, for each pool and each egress profile of
 * names, every series of a known label value (task statuses and error causes, streams,
 * proxy outcomes), and the daemon-wide ones (RPC methods and error kinds, denial reasons),
 * all at 0. Returns 0 or -EINVAL (a programming error in a family definition; e says
 * which). */
int metrics_new(const struct metrics_names *names, struct metrics **ret, struct err *e);
/* Frees everything. Accepts NULL; returns NULL. */
struct metrics *metrics_free(struct metrics *m);
/* The series of pool i (as passed to metrics_new), for its owner to keep and hand to the
 * hooks; NULL when m is NULL or i is out of range (the hooks then do nothing). */
struct metrics_pool *metrics_pool(struct metrics *m, size_t i);
/* Sets the source of scrape-time state; src (copied) and arg must outlive m. Without one,
 * those gauges render as 0 and /healthz never says "draining". */
void metrics_set_source(struct metrics *m, const struct metrics_source *src, void *arg);
/* Renders sbxd's exposition (after the source's collect and a few /proc/self reads). The
 * caller frees *ret. Returns 0. Loop thread. */
int metrics_render_daemon(struct metrics *m, char **ret, size_t *ret_len);
/* http.c's handler for sbxd (ud is the struct metrics): GET|HEAD /metrics is the exposition,
 * GET|HEAD /healthz is "ok" (503 "draining" once the source says so), another method on those
 * paths is 405, anything else 404. Loop thread. */
void metrics_http(void *ud, const struct http_request *req, struct http_response *res);

/* Hooks (each one line at its call site; all no-ops when the handle is NULL). Loop thread
 * unless said otherwise. */

/* The task has its sandbox: observes sbx_task_queue_wait_seconds (request_ns, the request's
 * arrival, to start_ns). */
void metrics_task_start(struct metrics_pool *ps, uint64_t request_ns, uint64_t start_ns);
/* The task was handed to its sandbox's init (CTL_TASK sent; the task's process exists,
 * cloned at setup): observes sbx_task_start_seconds (request_ns to now). */
void metrics_task_running(struct metrics_pool *ps, uint64_t request_ns);
/* The task's outcome is final, whether it ran or ended while queued (status as in the
 * trail's task.result: exited, signaled, timeout, output_limit, oom, token_expired,
 * token_revoked, cancelled, error; another is a programming error and asserts): counts
 * sbx_tasks_total and, for error, sbx_task_errors_total by r->error_cause; observes
 * sbx_task_duration_seconds (start to exit) when it ran; adds sbx_output_bytes_total per
 * stream, sbx_output_truncated_total and sbx_seccomp_denials_total. */
void metrics_task_done(struct metrics_pool *ps, const char *status,
                       const struct metrics_task_result *r);
/* File bytes written into a sandbox's /work for a client (exec's files) and read from it
 * (exec's collect): sbx_files_in_bytes_total and sbx_files_out_bytes_total. */
void metrics_files(struct metrics_pool *ps, uint64_t in_bytes, uint64_t out_bytes);
/* A session ended (reason: closed, ttl, idle, token_expired, token_revoked, shutdown or
 * error; another asserts): counts sbx_sessions_total, observes
 * sbx_session_lifetime_seconds and sbx_session_commands. */
void metrics_session_end(struct metrics_pool *ps, const char *reason, double lifetime_s,
                         uint64_t commands);
/* A sandbox's init reported READY: observes sbx_sandbox_create_seconds (created_ns, its
 * creation start, to ready_ns). */
void metrics_sandbox_ready(struct metrics_pool *ps, uint64_t created_ns, uint64_t ready_ns);
/* A request for method arrived (method: the static name from a method table, or NULL for a
 * method that does not exist, counted as method="unknown"). Names outside the tables must
 * never be passed: the label set stays bounded. */
void metrics_rpc_request(struct metrics *m, const char *method);
/* A protocol-level error by kind (malformed, too_large, limit, busy, bad_request,
 * unknown_pool, unknown_method, ...): sbx_rpc_errors_total{kind}. kind is a string literal. */
void metrics_rpc_error(struct metrics *m, const char *kind);
/* A request was refused by policy (answered with code "denied"): sbx_denied_total{reason}.
 * reason is one of token_required (tokens.required and none sent), token_malformed,
 * token_unknown (forged), token_revoked, token_expired, token_used_up, pool_not_allowed
 * (the token does not name the pool), grant_failed (a granted mount cannot be applied),
 * issue_not_allowed (token.issue beyond the token policy); another is a programming
 * error and asserts. A queued task whose token expires or is revoked counts here too. */
void metrics_denied(struct metrics *m, const char *reason);
/* Tokens currently valid: sbx_tokens_active. */
void metrics_tokens_active(struct metrics *m, uint64_t n);
/* One egress proxy request of a sandbox under profile (a configured profile name, whose
 * series metrics_new made at 0) with outcome "allowed", "denied", "limit" (a byte limit cut it) or
 * "error": sbx_proxy_requests_total{profile,outcome}. */
void metrics_proxy_request(struct metrics *m, const char *profile, const char *outcome);
/* Sandboxes or cgroups left by a dead or leaking sbxd that the reaper removed:
 * sbx_sandbox_leaks_total += n. */
void metrics_sandbox_leaks(struct metrics *m, uint64_t n);
/* One audit batch committed in `seconds` (begin to commit): sbx_audit_batch_seconds.
 * Any thread (the audit writer); m never changes after start-up. */
void metrics_audit_batch(struct metrics *m, double seconds);
/* One refusal or denial counted in a summary instead of recorded one by one:
 * sbx_audit_suppressed_total{source}, source "rpc", "egress" or "backlog" (others are
 * ignored). */
void metrics_audit_suppressed(struct metrics *m, const char *source);
/* Audit events waiting to be written: sbx_audit_queue_depth. Any thread. */
void metrics_audit_queue_depth(struct metrics *m, uint64_t n);
