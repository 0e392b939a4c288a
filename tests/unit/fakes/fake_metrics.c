/* SPDX-License-Identifier: MIT */
/* metrics/metrics.c's hook of the pool, logged (fakes.h). */
#include "metrics/metrics.h"

#include "fakes.h"

void metrics_sandbox_ready(struct metrics_pool *ps, uint64_t created_ns, uint64_t ready_ns)
{
    fake_call("metrics_sandbox_ready %s", ps ? "series" : "none");
    (void)created_ns;
    (void)ready_ns;
}
