/* SPDX-License-Identifier: MIT */
/* core/sched.c as the pool and its tasks see it: whether a drain began, and its counters'
 * writers and refill, logged (fakes.h). */
#include "core/sched.h"

#include "fakes.h"

bool sched_draining(const struct sched *s)
{
    return s->draining;
}

void sched_refill(struct sched *s)
{
    (void)s;
    fake_call("sched_refill");
}

void sched_sandbox_begun(struct sched *s)
{
    (void)s;
    fake_call("sched_sandbox_begun");
}

void sched_sandbox_created(struct sched *s)
{
    (void)s;
    fake_call("sched_sandbox_created");
}

void sched_sandbox_freed(struct sched *s)
{
    (void)s;
    fake_call("sched_sandbox_freed");
}

void sched_task_started(struct sched *s, uint64_t now_ns)
{
    (void)s;
    (void)now_ns;
    fake_call("sched_task_started");
}

void sched_task_ended(struct sched *s)
{
    (void)s;
    fake_call("sched_task_ended");
}
