/* SPDX-License-Identifier: MIT */
/* core/task_audit.c: each event of a task's chain logged with what decides it (fakes.h). */
#include "core/task_audit.h"

#include "core/task_impl.h"

#include "fakes.h"

uint64_t fake_audit_ticket;

void task_audit_decision(struct task_env *tenv, const char *task_id, bool allowed, const char *code,
                         const char *reason)
{
    (void)tenv;
    (void)task_id;
    (void)reason;
    fake_call("audit decision allowed=%d%s%s", allowed, code ? " " : "", code ? code : "");
}

void task_audit_assigned(const struct task *t)
{
    fake_call("audit assigned %s cold=%d", t->sb_id, t->wait.cold);
}

void task_audit_started(const struct task *t, uint32_t pid)
{
    (void)t;
    fake_call("audit started pid=%u", pid);
}

void task_audit_finished(const struct task *t, const struct task_outcome *o)
{
    (void)t;
    fake_call("audit finished %s", o->status);
}

void task_audit_destroyed(const struct task *t, bool already_reaped)
{
    fake_call("audit destroyed %s reaped=%d", t->sb_id, already_reaped);
}

uint64_t task_audit_result(const struct task *t, const char *status, const char *code,
                           const char *message, const struct task_outcome *o)
{
    (void)t;
    /* A finished task's message (status error or cancelled) is logged; an unstarted one's
     * is what its client was sent. */
    fake_call("audit result %s%s%s%s%s%s", status, code ? " " : "", code ? code : "",
              o ? " (outcome)" : "", o && message ? ": " : "", o && message ? message : "");
    return ++fake_audit_ticket;
}
