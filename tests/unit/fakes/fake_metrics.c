/* SPDX-License-Identifier: MIT */
/* metrics/metrics.c's hooks of the pool, of its tasks and of their denials, logged (fakes.h). */
#include "metrics/metrics.h"

#include "fakes.h"

void metrics_sandbox_ready(struct metrics_pool *ps, uint64_t created_ns, uint64_t ready_ns)
{
    fake_call("metrics_sandbox_ready %s", ps ? "series" : "none");
    (void)created_ns;
    (void)ready_ns;
}

void metrics_task_start(struct metrics_pool *ps, uint64_t request_ns, uint64_t start_ns)
{
    (void)ps;
    (void)request_ns;
    (void)start_ns;
    fake_call("metrics_task_start");
}

void metrics_task_running(struct metrics_pool *ps, uint64_t request_ns)
{
    (void)ps;
    (void)request_ns;
    fake_call("metrics_task_running");
}

void metrics_task_done(struct metrics_pool *ps, const char *status,
                       const struct metrics_task_result *r)
{
    (void)ps;
    fake_call("metrics_task_done %s%s%s out=%llu err=%llu truncated=%d", status,
              r->error_cause ? " " : "", r->error_cause ? r->error_cause : "",
              (unsigned long long)r->stdout_bytes, (unsigned long long)r->stderr_bytes,
              r->truncated);
}

void metrics_denied(struct metrics *m, const char *reason)
{
    (void)m;
    fake_call("metrics_denied %s", reason);
}
