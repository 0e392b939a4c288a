/* SPDX-License-Identifier: MIT */
#pragma once
/* A pool's fork server: an sbxd-init that built the pool's root once (its template) and
 * forks each new sandbox from it, so that a sandbox costs a fork and a few mounts instead
 * of an execve, a copy of the host's mount tree and a whole root (docs/ARCHITECTURE.md).
 * Used from worker threads; one lock per zygote serializes its requests. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctl.h"
#include "err.h"
#include "spawn.h"

struct zygote;
struct image;

struct zygote_stats {
    uint64_t starts;   /* zygotes started */
    uint64_t spawned;  /* sandboxes forked */
    uint64_t failures; /* start failures and zygotes lost */
    bool disabled;     /* given up after ZYGOTE_MAX_FAILURES in a row */
    pid_t pid;         /* the running zygote, or 0 */
};

/* The pool's zygote (not started yet). */
struct zygote *zygote_new(const char *pool_name);
/* Stops the zygote (its control socket closes; killed and reaped) and frees it. Loop
 * context, with no worker using it. Returns NULL. */
struct zygote *zygote_free(struct zygote *z);

/* Forks a sandbox from the zygote, starting the zygote first when none runs or its template
 * is not for this setup (the pool's image changed). setup is the pool's CTL_SETUP as for a
 * fresh sandbox (its hostname is ignored; image_root from image_sandbox_root), img the
 * pool's image, whose tree is cloned (image_sandbox_root) only to start a zygote;
 * plan says where the sandbox goes: its control socket, network namespace, cgroup and id
 * maps. On success the sandbox waits for CTL_SETUP on plan->ctl_fd's peer, placed (maps
 * written, attached to its cgroup) and ret holds its pid and pidfd. Returns 0; -EAGAIN
 * when the zygote is not available (could not start, died before the request, or gave
 * up): the caller makes the sandbox without it; -ECONNRESET (with e) when the zygote was
 * lost after it had the request: it may have forked a process that holds plan->ctl_fd, so
 * the caller must fail this creation rather than use that socket again; another -errno
 * with e when the fork itself failed. Worker thread only (blocks). */
int zygote_spawn(struct zygote *z, const struct spawn_plan *plan, const struct ctl_setup *setup,
                 const struct image *img, struct spawn_result *ret, struct err *e);

void zygote_get_stats(struct zygote *z, struct zygote_stats *ret);
