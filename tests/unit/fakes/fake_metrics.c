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

/* Logged only when files moved, so that the tests of tasks without any keep their logs. */
void metrics_files(struct metrics_pool *ps, uint64_t in_bytes, uint64_t out_bytes)
{
    (void)ps;
    if (in_bytes || out_bytes) {
        fake_call("metrics_files in=%llu out=%llu", (unsigned long long)in_bytes,
                  (unsigned long long)out_bytes);
    }
}
