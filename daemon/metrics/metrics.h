/* SPDX-License-Identifier: MIT */
#pragma once
/* Metrics: a counter/gauge/histogram registry with labels, rendered in the Prometheus text
 * exposition format (version 0.0.4), and sbxd's own series on top of it, served by http.c on
 * `GET /metrics` and `GET /healthz`.
 *
 * Two layers:
 *  - The registry (metrics_registry_*, metrics_family_new, metrics_series, metrics_inc/add/
 *    set/observe, metrics_render) knows nothing of sbxd and is unit-tested alone.
 *  - sbxd's series (metrics_new and the hooks below) are created at start-up for every pool
 *    and every known label value, so that the hot path only finds a pre-made series and
 *    updates it: no allocation, no formatting, no I/O. Gauges that mirror state (pool sizes,
 *    connections, process figures) are read at scrape time instead of being hooked.
 *
 * Threads: series creation, rendering and every hook that takes a struct daemon or a task
 * run on the loop thread. Value updates themselves are relaxed atomics, so the functions
 * documented as "any thread" (the audit writer's) may run elsewhere. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

struct daemon;
struct task;
struct sandbox;
struct http_request;
struct http_response;

/* ---- The registry ---------------------------------------------------------------------- */

enum metric_type {
    METRIC_COUNTER = 0,
    METRIC_GAUGE,
    METRIC_HISTOGRAM,
};

#define METRICS_MAX_LABELS 4
#define METRICS_MAX_BUCKETS 24
/* Series of one family at most. A new label combination beyond it is counted in one
 * overflow series whose every label value is "other", so a bug that feeds unbounded values
 * costs one series, not memory without end. */
#define METRICS_MAX_SERIES 256
/* Longest label value kept; longer ones are cut (at a UTF-8 boundary). */
#define METRICS_MAX_VALUE_LEN 128

struct metric_registry;
struct metric_family;
struct metric_series;

/* Called by metrics_render before anything is written, to refresh gauges that mirror state
 * read at scrape time. Loop thread. */
typedef void (*metrics_collect_cb)(void *ud);

/* An empty registry. Returns 0 (xmalloc aborts on OOM). */
int metrics_registry_new(struct metric_registry **ret);
/* Frees the registry, its families and series. Accepts NULL; returns NULL. */
struct metric_registry *metrics_registry_free(struct metric_registry *r);
/* Sets the one collect callback (NULL clears it). */
void metrics_registry_on_collect(struct metric_registry *r, metrics_collect_cb fn, void *ud);

/* Registers a family. name follows Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*) and a counter's
 * name ends in "_total"; labels (n_labels <= METRICS_MAX_LABELS) are [a-zA-Z_][a-zA-Z0-9_]*,
 * not "__"-prefixed, distinct, and never "le" on a histogram. buckets (histograms only,
 * 1..METRICS_MAX_BUCKETS finite upper bounds, strictly increasing; +Inf is implicit) are
 * copied. A family without labels gets its one series at once, so it renders as 0.
 * Returns 0, -EINVAL (e says what is wrong) or -EEXIST (the name is taken). *ret is owned by
 * the registry. */
int metrics_family_new(struct metric_registry *r, enum metric_type type, const char *name,
                       const char *help, const char *const *labels, size_t n_labels,
                       const double *buckets, size_t n_buckets, struct metric_family **ret,
                       struct err *e);
/* The series of f for the given label values (n_labels strings, in the family's label order;
 * NULL for a family without labels). Creates it on first sight (one allocation), so callers
 * on a hot path look series up once and keep the pointer. Bytes that are not valid UTF-8 are
 * replaced by '?'. Never NULL; owned by the registry. Loop thread. */
struct metric_series *metrics_series(struct metric_family *f, const char *const *values);

/* Value updates; s may be NULL (no-op), so hooks work when metrics are off. Any thread.
 * Counters ignore negative and NaN increments. */
void metrics_inc(struct metric_series *s);
void metrics_add(struct metric_series *s, double v);
/* Sets a gauge, or a counter that mirrors a monotonic count kept elsewhere. */
void metrics_set(struct metric_series *s, double v);
/* Observes one value into a histogram. */
void metrics_observe(struct metric_series *s, double v);
/* The current value of a counter or gauge, or the count of a histogram. For tests. */
double metrics_value(const struct metric_series *s);

/* Runs the collect callback, then renders every family in registration order (HELP, TYPE,
 * then each series in creation order; histograms as cumulative _bucket{le} lines ending with
 * le="+Inf", then _sum and _count) into a new NUL-terminated buffer. The caller frees
 * *ret. Returns 0. Loop thread. */
int metrics_render(struct metric_registry *r, char **ret, size_t *ret_len);

/* ---- sbxd's series ---------------------------------------------------------------------- */

struct metrics;

/* Creates sbxd's registry with every family and, for each of d's pools, every series of a
 * known label value (task statuses, streams, RPC methods and error kinds). Call after the
 * pools exist; d->metrics is not set by this function. Returns 0 or -EINVAL (a programming
 * error in a family definition; e says which). */
int metrics_new(struct daemon *d, struct metrics **ret, struct err *e);
/* Frees everything. Accepts NULL; returns NULL. */
struct metrics *metrics_free(struct metrics *m);
/* Renders sbxd's exposition (the collect step reads the pools, the servers and /proc/self).
 * The caller frees *ret. Returns 0. Loop thread. */
int metrics_render_daemon(struct metrics *m, char **ret, size_t *ret_len);
/* http.c's handler for sbxd (ud is the struct daemon): GET|HEAD /metrics is the exposition,
 * GET|HEAD /healthz is "ok" (503 "draining" once SIGTERM arrived), another method on those
 * paths is 405, anything else 404. Loop thread. */
void metrics_http(void *ud, const struct http_request *req, struct http_response *res);

/* Hooks of the core (each one line at its call site; all no-ops when d->metrics is NULL).
 * Loop thread. */

/* task_start: the task has its sandbox: observes sbx_task_queue_wait_seconds (request to
 * sandbox in hand). */
void metrics_task_start(const struct task *t);
/* The task was handed to its sandbox's init (CTL_TASK sent; the task's process exists,
 * cloned at setup): observes sbx_task_start_seconds (request to that moment). */
void metrics_task_running(const struct task *t);
/* The task's outcome is final (status as in the result: exited, signaled, timeout,
 * output_limit, oom, error): counts sbx_tasks_total, observes sbx_task_duration_seconds
 * (start to exit), adds sbx_output_bytes_total per stream, sbx_output_truncated_total and
 * sbx_seccomp_denials_total. */
void metrics_task_done(const struct task *t, const char *status);
/* The sandbox's init reported READY: observes sbx_sandbox_create_seconds (creation start to
 * READY). */
void metrics_sandbox_ready(const struct sandbox *sb);
/* A request for method arrived (method: the static name from a method table, or NULL for a
 * method that does not exist, counted as method="unknown"). Names outside the tables must
 * never be passed: the label set stays bounded. */
void metrics_rpc_request(struct daemon *d, const char *method);
/* A protocol-level error by kind (malformed, too_large, limit, busy, bad_request,
 * unknown_pool, unknown_method, ...): sbx_rpc_errors_total{kind}. kind is a string literal. */
void metrics_rpc_error(struct daemon *d, const char *kind);

/* API for the features being built next to this one. */

/* A request was refused by policy (reason: a literal such as "token_expired",
 * "token_unknown", "pool_not_allowed", "mount_not_allowed", "profile_not_allowed"):
 * sbx_denied_total{reason}. Loop thread. */
void metrics_denied(struct daemon *d, const char *reason);
/* Tokens currently valid: sbx_tokens_active. Loop thread. */
void metrics_tokens_active(struct daemon *d, uint64_t n);
/* One egress proxy request of a sandbox under profile (a configured profile name) with
 * outcome "allowed", "denied", "limit" (a byte limit cut it) or "error":
 * sbx_proxy_requests_total{profile,outcome}. Loop thread. */
void metrics_proxy_request(struct daemon *d, const char *profile, const char *outcome);
/* Sandboxes or cgroups left by a dead or leaking sbxd that the reaper removed:
 * sbx_sandbox_leaks_total += n. Loop thread. */
void metrics_sandbox_leaks(struct daemon *d, uint64_t n);
/* One audit batch committed in `seconds` (begin to commit): sbx_audit_batch_seconds.
 * Any thread (the audit writer); m is d->metrics, which never changes after start-up. */
void metrics_audit_batch(struct metrics *m, double seconds);
/* Audit events waiting to be written: sbx_audit_queue_depth. Any thread. */
void metrics_audit_queue_depth(struct metrics *m, uint64_t n);
