/* SPDX-License-Identifier: MIT */
#pragma once
/* Link seams for the unit tests of the core's state machines (test_pool.c, test_sandbox.c,
 * test_task.c): each fake_<module>.c is linked instead of daemon/<folder>/<module>.c and
 * records what it was asked in one call log, which a test compares with what the module's rules
 * say. The state a test sets or reads is declared here. Single-threaded: fakes run on the test's
 * thread (fake_workq.c runs its jobs there too). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/workq.h"
#include "sandbox/cgroup.h"
#include "sandbox/forkserver.h"
#include "sandbox/sandbox.h"
#include "token/token.h"

/* ---- fake_calls.c: the call log ---- */

/* Appends one entry ("; " between entries). */
void fake_call(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Every entry since the last reset, "" for none. */
const char *fake_calls(void);
void fake_calls_reset(void);
/* Asserts that the log is exactly fmt's text (cmocka), then resets it. */
void fake_expectf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Asserts that nothing was logged since the last reset. */
void fake_expect_none(void);
/* The process's open file descriptors (a test's teardown compares them with its start). */
int fake_count_fds(void);

/* ---- fake_sched.c (core/sched.c): the counters' writers are logged ---- */

struct sched {
    bool draining; /* what sched_draining says */
};

/* ---- fake_kit.c (sandbox/kit.c) ---- */

#define FAKE_KIT_SPARES 8
extern bool fake_kit_image_pending;                    /* what kit_image_pending says */
extern bool fake_kit_reserve;                          /* whether kit_reserve_spare says yes */
extern struct cgroup *fake_kit_spare[FAKE_KIT_SPARES]; /* kit_take_cgroup pops from the end */
extern size_t fake_kit_n_spare;

/* ---- fake_sandbox.c (sandbox/sandbox.c), for the pool: sandboxes the test moves through
 * their states in the order sandbox.c reports them ---- */

#define FAKE_SANDBOXES 64
/* Every sandbox sandbox_create made and fake_sandbox_gone has not freed, by creation. */
extern struct sandbox *fake_sandbox[FAKE_SANDBOXES];
extern size_t fake_n_sandbox; /* made in all, freed ones included */

/* Its creation finished: the owner's created op (ok true: init runs; false: failed). */
void fake_sandbox_created(struct sandbox *sb, bool ok);
/* init said READY: CREATING -> WARM, then ready. */
void fake_sandbox_ready(struct sandbox *sb);
/* Creation failed (e's message msg): failed. */
void fake_sandbox_failed(struct sandbox *sb, const char *msg);
/* A task was handed to it (sandbox_start_task): WARM -> BUSY. */
void fake_sandbox_start_task(struct sandbox *sb);
/* init was reaped and the sandbox freed: unwarm when WARM, -> DEAD, then freed (sb is
 * gone after). */
void fake_sandbox_gone(struct sandbox *sb);
/* Frees whatever sandboxes remain without telling their owner (a test's cleanup). */
void fake_sandbox_free_all(void);

/* ---- fake_cgroup.c (sandbox/cgroup.c) ---- */

extern int fake_cgroup_create_r;  /* cgroup_create fails with it when < 0 */
extern bool fake_cgroup_empty;    /* what cgroup_is_empty says */
extern int fake_cgroup_reset_r;   /* what cgroup_reset returns */
extern unsigned fake_cgroup_live; /* cgroup handles not freed */
struct cgroup_usage;
extern struct cgroup_usage fake_cgroup_usage; /* what cgroup_usage reads */
/* A handle as cgroup_create makes it (for a kit's spare). */
struct cgroup *fake_cgroup_new(const char *name);

/* ---- fake_image.c (sandbox/image.c) ---- */

extern int fake_image_root_r; /* image_sandbox_root fails with it when < 0 */

/* ---- fake_spawn.c (sandbox/spawn.c): a real child that waits to be killed ---- */

extern int fake_spawn_r;    /* spawn_sandbox fails with it when < 0 */
extern int fake_init_fd;    /* init's end of the last sandbox's control socket (a dup) */
extern pid_t fake_init_pid; /* the last child */
extern int fake_init_pidfd; /* its pidfd (a dup of the sandbox's) */
/* Forks a child in a session of its own, every fd >= 3 closed, that pauses until killed;
 * *ret its pid and pidfd; dups ctl_fd into fake_init_fd. Returns 0 or -errno. */
int fake_spawn_child(int ctl_fd, struct spawn_result *ret);
/* SIGKILLs the last child (as if init died by itself). */
void fake_init_kill(void);
/* Kills and reaps the last child if the sandbox did not, and closes the test's fds. */
void fake_init_cleanup(void);

/* ---- fake_forkserver.c (sandbox/forkserver.c) ---- */

struct forkserver {
    unsigned requests; /* taken by forkserver_spawn_async */
};
extern struct forkserver fake_forkserver;          /* a kit's, for the loop's path */
extern int fake_forkserver_async_r;                /* forkserver_spawn_async's return */
extern struct forkserver_req *fake_forkserver_req; /* the request it took, until answered */
/* Answers the request taken: r 0 forks a child as spawn_sandbox does; else fails with r. */
void fake_forkserver_answer(int r);

/* ---- fake_workq.c (lib/workq.c): jobs run when the test says ---- */

/* Runs every queued job, work then done, on the caller's thread, also jobs queued by done
 * callbacks meanwhile. Returns how many ran. */
int fake_workq_run(void);
size_t fake_workq_pending(void);
/* The oldest queued job, or NULL. */
struct workq_job *fake_workq_peek(void);

/* ---- test_task.c's fakes: what core/task.c calls, for core/task.c linked alone ---- */

struct pool_waiter;

/* fake_pool.c (core/pool.c): pool_submit answers fake_pool_submit_r; on 0 it hands the
 * waiter fake_pool_warm at once when set (not cold; from within the call, as the pool
 * does), else keeps it, marked cold (queued). */
extern int fake_pool_submit_r;
extern struct sandbox *fake_pool_warm;
extern struct pool_waiter *fake_pool_waiter; /* submitted and neither told nor cancelled */
/* The pool hands the kept waiter sb (its got op), or refuses it (refused). */
void fake_pool_got(struct sandbox *sb);
void fake_pool_refused(const char *code, const char *message);

/* fake_sandbox_task.c (sandbox/sandbox.c as its task sees it): sandbox_start_task keeps
 * the task's ops and dups of the three stdio fds it was handed (the child's ends); the test
 * plays the task through them and init through the event and died helpers. */
extern int fake_task_start_r;          /* sandbox_start_task fails with it when < 0 */
extern int fake_task_fd[3];            /* the child's stdin, stdout, stderr; -1: none */
extern int fake_usage_r;               /* what sandbox_usage returns */
extern struct cgroup_usage fake_usage; /* and what it reads when it returns 0 */
/* A BUSY-to-be sandbox named id, WARM (free with free()). */
struct sandbox *fake_task_sandbox(const char *id);
/* Writes s to the child's stdout (1) or stderr (2). */
void fake_task_write(int fd, const char *s);
/* Closes the child's ends (the task and init are gone: the pipes reach EOF). */
void fake_task_close_stdio(void);
/* init reports CTL_EXITED with wstatus, or CTL_EXEC_FAILED at stage with err and msg, to
 * the task still attached (none after sandbox_detach_task). */
void fake_task_exited(struct sandbox *sb, int wstatus);
void fake_task_exec_failed(struct sandbox *sb, uint32_t stage, int err, const char *msg);
/* init was reaped: the task is detached, then told died (as sandbox.c does). */
void fake_task_died(struct sandbox *sb);
/* init reports a kept task's exit (a session's command): sb is detached and HELD first, as
 * sandbox.c does it. */
void fake_task_kept_exited(struct sandbox *sb, int wstatus);

/* fake_task_audit.c (core/task_audit.c) and fake_audit.c (audit/audit.c): each event is
 * logged; task_audit_result returns tickets 1, 2, ... and audit_when_committed keeps its
 * callbacks until the test commits them (ticket 0 runs at once, as the real one does). */
extern uint64_t fake_audit_ticket; /* the last ticket task_audit_result returned */
/* Runs the oldest callback waiting, with committed. Returns false when none waits. */
bool fake_audit_commit(bool committed);
size_t fake_audit_waiting(void);
/* Forgets the callbacks waiting (a failed test's) and restarts the tickets at 1. */
void fake_audit_reset(void);

/* fake_token.c (token/token.c): token_attach keeps the link it linked. */
extern struct token *const fake_token;     /* a token to attach */
extern struct token_link *fake_token_link; /* attached and not yet detached */

/* fake_egress.c (egress/egress.c): sessions are logged; start fails with
 * fake_egress_start_r when < 0, and with a profile gives a session at port 3128. */
extern int fake_egress_start_r;
