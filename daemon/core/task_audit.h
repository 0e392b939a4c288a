/* SPDX-License-Identifier: MIT */
#pragma once
/* The events of a task's chain, all sharing its task id:
 *   task.request -> policy.decision -> sandbox.assigned -> task.started -> task.finished
 *   -> sandbox.destroyed -> task.result
 * A denied request has task.request -> policy.decision (allowed false) -> task.result
 * (status "denied"); a task whose client left while it was queued ends with task.result
 * (status "cancelled"); one that a dead sbxd left in flight gets task.result (status
 * "abandoned") from the next sbxd's reaper. Loop thread only; each call is a no-op when
 * the audit is disabled. */
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct task_env;
struct task;
struct task_outcome;
struct task_spec;

/* Who sent a request, as the trail records it; api/ fills it from its connection. */
struct task_audit_peer {
    bool admin;       /* it came on the admin socket, else on the agents' */
    uint64_t conn_id; /* the connection's id */
    uint32_t uid;     /* the peer's credentials (SO_PEERCRED) */
    int32_t pid;
    uint32_t gid;
};

/* task.request from the decoded request: peer uid/pid, connection id, socket, token_id
 * (the token's public id, NULL without a token or before its grant; the token string itself
 * is never recorded), pool, argv (scrubbed; an argument after an option such as --token is
 * redacted whole), the names of the env the request gave (never values, nor the base env),
 * cwd, timeout and stdin when the request gave them, and its files' paths, modes and sizes
 * (never their data) and collect's patterns. */
void task_audit_request(struct task_env *tenv, const char *task_id,
                        const struct task_audit_peer *peer, const struct task_spec *spec);
/* The same for a command of a session (its task.request names the session). */
void task_audit_request_session(struct task_env *tenv, const char *task_id,
                                const struct task_audit_peer *peer, const struct task_spec *spec,
                                const char *session);
/* rpc.refused (no task id): bad input refused outside an exec, from peer: code, the
 * method when there was one (at most 64 bytes, scrubbed), reason. Marked as a refusal's
 * (audit_mark_refusal: pruned first). */
void task_audit_refused(struct task_env *tenv, const struct task_audit_peer *peer, const char *code,
                        const char *method, size_t method_len, const char *reason);
/* The chain of an exec refused before it became a task, every row marked as a refusal's
 * (pruned first): task.request from spec when the request decoded, else (spec NULL) from
 * its raw args: what it asked for, whatever its types; the pool as asked, else the
 * default; token_id null; a non-map is recorded as malformed. Then policy.decision
 * (allowed false, code, reason) and task.result (status "denied", code). */
void task_audit_refused_exec(struct task_env *tenv, const char *task_id,
                             const struct task_audit_peer *peer, const struct task_spec *spec,
                             const msgpack_object *args, const char *code, const char *reason);
/* policy.decision. code is NULL when allowed; reason may be (then "valid request"). */
void task_audit_decision(struct task_env *tenv, const char *task_id, bool allowed, const char *code,
                         const char *reason);
/* sandbox.assigned: the sandbox, warm (taken from the warm set) or cold (waited for one),
 * and the time spent queued. */
void task_audit_assigned(const struct task *t);
/* task.started: the init forked the task (pid inside the sandbox). */
void task_audit_started(const struct task *t, uint32_t pid);
/* task.finished: the outcome and usage. */
void task_audit_finished(const struct task *t, const struct task_outcome *o);
/* sandbox.destroyed: recorded once SIGKILL reached the sandbox's init (how "killed") or
 * the init was already reaped (how "exited"): nothing of the sandbox can run any more.
 * Its cgroup is removed asynchronously after; a cgroup that stays is a leak for the
 * reaper. */
void task_audit_destroyed(const struct task *t, bool already_reaped);
/* task.result: what the client was (or would have been) sent, with an outcome the files'
 * bytes in and out and the paths collected (never their data). o may be NULL (no outcome:
 * cancelled, failed before start); code and message may be NULL. Returns the ticket to
 * wait for before sending the result. */
uint64_t task_audit_result(const struct task *t, const char *status, const char *code,
                           const char *message, const struct task_outcome *o);
