/* SPDX-License-Identifier: MIT */
#pragma once
/* One sandbox: its state machine (CREATING, WARM, BUSY, HELD, DYING, DEAD) and every fd it
 * owns (pidfd of its init, control socket, cgroup, its /work's root). A sandbox serves one
 * task and is destroyed, or, held by a session, a task at a time until it is killed.
 * What blocks runs on sbxd's worker threads (workq.h): a creation that starts a fork server,
 * makes a cgroup or a network namespace, or builds a sandbox from scratch, and the emptying
 * of a cgroup still busy when its sandbox is reaped; everything else on the loop. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "sandbox/cgroup.h"
#include "wire/ctl.h"
#include "lib/err.h"
#include "sandbox/netns.h"
#include "lib/workq.h"
#include "sandbox/forkserver.h"

struct cgroup;
struct cgroup_usage;
struct sandbox_kit;
struct sandbox;
struct task_spec;

/* How long an init may take from spawn to READY before it counts as a failed creation. */
#define SANDBOX_SETUP_TIMEOUT_MS 10000
/* The nice value of sbxd's worker threads, and of each init until READY and once killed
 * (which orders them within their sandbox's cpu cgroup only: docs/ARCHITECTURE.md). */
#define SANDBOX_BACKGROUND_NICE 10

enum sandbox_state {
    SB_CREATING = 0, /* worker creating it, or init setting up */
    SB_WARM,         /* ready, in its pool's warm set */
    SB_BUSY,         /* running its task */
    SB_HELD,         /* its holder's (a session's) between tasks: neither warm nor busy */
    SB_DYING,        /* killed, waiting for init to be reaped */
    SB_DEAD,         /* reaped; cgroup being removed, then freed */
};

/* How a sandbox tells its owner (core/pool.c) what became of it. Each gets the arg given to
 * sandbox_create. */
struct sandbox_ops {
    /* sb moves from one state to another (counted by state; SB_DEAD until freed). */
    void (*state)(void *arg, struct sandbox *sb, enum sandbox_state from, enum sandbox_state to);
    /* sb's creation finished, with ok false when it failed (failed was called before): one
     * creation fewer in flight. On success the owner may start the next ones. */
    void (*created)(void *arg, struct sandbox *sb, bool ok);
    /* sb is WARM: the owner may hand it a task (sandbox_start_task), now or later. */
    void (*ready)(void *arg, struct sandbox *sb);
    /* sb's creation failed (e says why), once per sandbox; it is killed or freed after. */
    void (*failed)(void *arg, struct sandbox *sb, const struct err *e);
    /* sb, WARM, leaves the warm state (killed, or died): it may no longer be handed out. */
    void (*unwarm)(void *arg, struct sandbox *sb);
    /* A sandbox of the owner was freed (its cgroup removed or kept as a spare). */
    void (*freed)(void *arg);
};

/* How a BUSY sandbox tells its task (core/task.c) what its init reports. */
struct sandbox_task_ops {
    /* CTL_EXITED or CTL_EXEC_FAILED from init. After a kept task's (task_spec.keep), the
     * sandbox is SB_HELD (or, when init could not go on, dying) and the task is detached
     * before this call: it hears nothing more of the sandbox. */
    void (*event)(void *arg, const struct ctl_event *ev);
    /* The sandbox was reaped: no more events. The task is detached from it first. */
    void (*died)(void *arg);
};

/* A held sandbox tells its holder (core/session.c) that it was reaped, whatever it was doing
 * (after its task's died, when one ran). */
typedef void (*sandbox_died_cb)(void *arg, struct sandbox *sb);

struct sandbox {
    struct sandbox_kit *kit;
    const struct sandbox_ops *ops;
    void *owner; /* the ops' arg: its pool */
    char id[24];
    enum sandbox_state state;
    struct cgroup *cg;
    char cg_name[24];     /* the cgroup's name: this sandbox's id, or a spare's (kit.h) */
    bool cg_reserved;     /* kit_reserve_spare said yes: the cgroup is reset, not removed */
    bool cg_reset_ok;     /* it was reset (by the loop, or on a worker when it was busy) */
    bool cg_reset_failed; /* the reset refused it (cgroup_reset): it is removed */
    bool cg_kept;         /* it went back to the pool: still tracked by the reaper */
    bool has_ids;         /* it holds a block of host ids (idslot.h; with userns) */
    uint32_t ids;         /* which one, when has_ids */
    pid_t pid;
    int pidfd;
    uint32_t task_pid; /* the task's pid in the sandbox, from CTL_READY */
    int ctl_fd;
    struct netns_ref netns; /* its network namespace (netns.c), recycled when it is freed */
    int proxy_fd;           /* egress proxy listener from init's READY, or -1 (egress.c) */
    int work_fd;            /* the /work tmpfs's root directory, from init's READY, or -1 */
    uv_poll_t ctl_poll;
    uv_poll_t pid_poll;
    uv_timer_t setup_timer; /* SANDBOX_SETUP_TIMEOUT_MS from spawn to READY */
    int open_handles;       /* embedded handles not yet closed */
    struct workq_job job;
    struct forkserver_req zreq; /* its request to the fork server, made by the loop */
    char *setup_msg;            /* CTL_SETUP, sent once the fork server's sandbox is placed */
    size_t setup_len;
    int work_r;
    struct err work_err;
    bool kill_requested; /* kill as soon as creation finishes */
    bool reaped;
    bool ready_seen;
    bool failure_reported;                   /* ops->failed already counted this sandbox */
    const struct sandbox_task_ops *task_ops; /* the task it serves (BUSY), or NULL */
    void *task;                              /* their arg, not owned */
    bool task_keep;                          /* that task is CTL_TASK_KEEP */
    uint32_t tasks;                          /* tasks handed to init */
    sandbox_died_cb hold_died;               /* its holder's (sandbox_hold), or NULL */
    void *holder;                            /* their arg, not owned */
    struct sandbox *prev;                    /* the owner's warm list (DLIST) */
    struct sandbox *next;
    uint64_t created_ns; /* creation started */
    uint64_t ready_ns;   /* init reported READY */
    /* The cgroup's counters at READY (or at a held sandbox's task's start): what the
     * sandbox used before, which sandbox_usage takes off so that a task is charged only
     * for itself. */
    struct cgroup_usage usage_base;
    bool have_usage_base;
};

/* Starts creating a sandbox from kit: on the loop when the kit's fork server runs and a
 * spare cgroup (and a kept network namespace, when they are recycled) is at hand, else on a
 * worker thread. The owner hears of it through ops (with arg), from a later callback on:
 * never from within this call. The caller makes sure a block of host ids is free (with
 * userns). Loop context. */
void sandbox_create(struct sandbox_kit *kit, const struct sandbox_ops *ops, void *arg);
/* Hands a task to a WARM or HELD sandbox of spec's pool: packs spec into CTL_TASK (with the
 * pool's nofile) and sends it with the three stdio fds and spec's mount fds (all stay owned
 * by the caller; close them after). From then on the sandbox reports to ops with arg, until
 * sandbox_detach_task or ops->died. With spec->keep the sandbox goes on after the task:
 * SB_HELD once its report came (struct sandbox_task_ops). Token mounts are refused on any
 * task but a sandbox's first. On a HELD sandbox the usage base is read again, so that
 * sandbox_usage charges the task only for itself. Returns 0 or -errno (e says why);
 * nothing is sent on a refusal. */
int sandbox_start_task(struct sandbox *sb, const struct task_spec *spec, int fds[3],
                       const struct sandbox_task_ops *ops, void *arg, struct err *e);
/* Takes a WARM sandbox (its pool handed it over) for a task that is not sent yet (its files
 * are being written first, core/task_files.c): SB_HELD (busy for its pool, never handed
 * back), and its death reaches ops->died with arg; sandbox_start_task sends the task later
 * (with the same ops and arg), or sandbox_detach_task and sandbox_kill end it. */
void sandbox_claim(struct sandbox *sb, const struct sandbox_task_ops *ops, void *arg);
/* The task no longer wants sb's reports. */
void sandbox_detach_task(struct sandbox *sb);
/* A session takes sb, WARM and handed out by its pool (so in no warm set), for its own:
 * SB_HELD from now on, never handed back to a pool, and died (with arg) runs once when it
 * is reaped. It ends with sandbox_kill. Returns 0, or -EINVAL (e says why) when sb is not
 * WARM. */
int sandbox_hold(struct sandbox *sb, sandbox_died_cb died, void *arg, struct err *e);
/* Ends the running task of a BUSY sandbox: CTL_KILL to init when the task is kept (init
 * kills every process of the sandbox but itself and reports CTL_EXITED, the sandbox goes
 * on), else, or when the packet cannot be sent, sandbox_kill. Nothing in other states. */
void sandbox_kill_task(struct sandbox *sb);
/* Kills the sandbox (SIGKILL to its init through the pidfd, which ends its pid namespace).
 * Safe to call in any state and more than once. */
void sandbox_kill(struct sandbox *sb);
/* Checks the /work root init's READY brought (sb->work_fd), for sandbox.c: 0, or -EPROTO
 * (-errno) with e when it is not a tmpfs directory of the task's user, mode 0755. */
int sandbox_work_check(const struct sandbox *sb, struct err *e);
/* The root directory of sb's /work tmpfs (owned by sb: dup it to keep it), or -1 before
 * READY and once sb is reaped. Files sbxd writes there belong to sandbox_task_host_ids. */
int sandbox_work_fd(const struct sandbox *sb);
/* The host uid and gid that sb's task user (its pool's uid and gid) maps to: in sb's block
 * of host ids with user namespaces, else the ids themselves. */
void sandbox_task_host_ids(const struct sandbox *sb, uid_t *ret_uid, gid_t *ret_gid);
/* Reads the cgroup's usage counters, less what they were when the sandbox became warm
 * (cpu, OOM kills and pids.max hits: the task's own; the memory peak is the sandbox's).
 * Returns 0 or -errno. */
int sandbox_usage(struct sandbox *sb, struct cgroup_usage *ret);
const char *sandbox_state_name(enum sandbox_state s);
