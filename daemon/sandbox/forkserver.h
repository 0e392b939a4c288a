/* SPDX-License-Identifier: MIT */
#pragma once
/* A pool's fork server: an sbxd-init that built the pool's root once (its template) and
 * forks each new sandbox from it, so that a sandbox costs a fork and a few mounts instead
 * of an execve, a copy of the host's mount tree and a whole root (docs/ARCHITECTURE.md).
 * Used from the loop (forkserver_spawn_async) and from worker threads (forkserver_spawn, which also
 * starts it); one lock per fork server serializes them: a worker holds it for a request, the loop
 * from its first request in flight until the last reply. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "wire/ctl.h"
#include "lib/err.h"
#include "sandbox/spawn.h"

struct forkserver;
struct image;

struct forkserver_stats {
    uint64_t starts;   /* fork servers started */
    uint64_t spawned;  /* sandboxes forked */
    uint64_t failures; /* start failures and fork servers lost */
    bool disabled;     /* given up after FORKSERVER_MAX_FAILURES in a row */
    pid_t pid;         /* the running fork server, or 0 */
};

/* A request of the loop's (forkserver_spawn_async). */
struct forkserver_req {
    struct forkserver_req *next;
    struct spawn_plan plan; /* a copy: its fds went with the request (the caller may close
                               them); its ids and cgroup place the sandbox */
    /* On the loop: r is 0 and res the placed sandbox (as from forkserver_spawn), or r is -errno
     * with e: -ECONNRESET when the fork server was lost (the request's control socket must not
     * serve another sandbox), else the fork or the placement failed. */
    void (*done)(struct forkserver_req *req, int r, const struct spawn_result *res,
                 const struct err *e);
};

/* The pool's fork server (not started yet); its handles are on loop. */
struct forkserver *forkserver_new(const char *pool_name, uv_loop_t *loop);
/* Stops the fork server (its control socket closes; killed and reaped) and frees it (its handles
 * close with the loop's next run). Loop context, with no worker using it and no request of
 * the loop's in flight. Returns NULL. */
struct forkserver *forkserver_free(struct forkserver *z);

/* Forks a sandbox from the fork server, starting the fork server first when none runs or its
 * template is not for this setup (the pool's image changed). setup is the pool's CTL_SETUP as for a
 * fresh sandbox (its hostname is ignored; image_root from image_sandbox_root), img the
 * pool's image, whose tree is cloned (image_sandbox_root) only to start a fork server;
 * plan says where the sandbox goes: its control socket, network namespace, cgroup and id
 * maps. On success the sandbox waits for CTL_SETUP on plan->ctl_fd's peer, placed (maps
 * written, attached to its cgroup) and ret holds its pid and pidfd. Returns 0; -EAGAIN
 * when the fork server is not available (could not start, died before the request, or gave
 * up): the caller makes the sandbox without it; -ECONNRESET (with e) when the fork server was
 * lost after it had the request: it may have forked a process that holds plan->ctl_fd, so
 * the caller must fail this creation rather than use that socket again; another -errno
 * with e when the fork itself failed. Worker thread only (blocks). */
int forkserver_spawn(struct forkserver *z, const struct spawn_plan *plan,
                     const struct ctl_setup *setup, const struct image *img,
                     struct spawn_result *ret, struct err *e);

/* Loop: asks a running fork server whose template is for setup (as for forkserver_spawn) for a
 * sandbox, without waiting: req->done runs on the loop with the sandbox placed. The loop
 * writes the id maps and attaches the cgroup then (a few small writes); only what blocks
 * longer (starting or restarting the fork server, waiting for a worker's request, the periodic
 * look at the host's /etc files) is a worker's (forkserver_spawn). Returns 0 when sent, or
 * -EAGAIN: the fork server is not running, is being used by a worker, gave up, needs a new
 * template or that look: call forkserver_spawn on a worker. */
int forkserver_spawn_async(struct forkserver *z, const struct spawn_plan *plan,
                           const struct ctl_setup *setup, struct forkserver_req *req);

void forkserver_get_stats(struct forkserver *z, struct forkserver_stats *ret);
