/* SPDX-License-Identifier: MIT */
#pragma once
/* The reaper: what a dead or leaking sbxd left behind.
 *   - At start-up (before the loop and before any pool fills): takes an exclusive lock on
 *     <state_dir>/sbxd.lock, so two daemons never share a state dir and with it a cgroup
 *     subtree (its name hashes the state dir); then kills every process in every cgroup
 *     of our subtree (by pidfd, only pids read from those cgroup.procs files; v2 uses
 *     cgroup.kill) and removes the cgroups. Those are the sandboxes of the previous sbxd
 *     with this state dir; nothing else lives there. Sandboxes never mount anything in
 *     the host's mount namespace, and stale socket files are replaced by server_new, so
 *     cgroups and processes are all there is to reap.
 *   - reaper_mark_abandoned: every task the trail shows in flight when the previous sbxd
 *     died gets sandbox.destroyed (when it had a sandbox) and task.result "abandoned";
 *     every session it left open gets session.close (reason "abandoned").
 *   - Every REAPER_SWEEP_MS (SBXD_REAPER_INTERVAL_MS in the environment overrides it, for
 *     tests) a sweep lists our subtree on a worker thread and removes any cgroup that no
 *     live sandbox owns: a leak, logged at error, counted (reaper_leaks_total, for
 *     metrics as sbx_sandbox_leaks_total) and audited as reaper.leak.
 * Loop thread only, except the start-up functions (main, before the loop). */
#include <stdint.h>

#include "lib/err.h"

#define REAPER_SWEEP_MS 30000
#define REAPER_LOCK_NAME "sbxd.lock"

struct daemon;
struct reaper;

/* Creates d->reaper and takes the state dir's lock (held until exit; CLOEXEC).
 * Returns 0, -EBUSY when another sbxd holds it, or -errno. Start-up only. */
int reaper_lock(struct daemon *d, struct err *e);
/* Kills and removes what a previous sbxd left in our cgroup subtree (needs d->cg_root).
 * Blocks (at most a few seconds per stubborn cgroup). Returns the number of cgroups
 * removed or -errno; failures to remove one are logged and counted as leaks. */
int reaper_startup(struct daemon *d, struct err *e);
/* Writes the abandoned tasks' events (needs d->audit open). Returns how many tasks, or
 * -errno when the trail cannot be read (logged; start-up goes on). Start-up only. */
int reaper_mark_abandoned(struct daemon *d, struct err *e);
/* Starts / stops the periodic sweep (loop). reaper_stop closes its handle. */
void reaper_start(struct daemon *d);
void reaper_stop(struct daemon *d);
/* After the loop: releases the lock and frees. Accepts NULL; returns NULL. */
struct reaper *reaper_free(struct reaper *r);

/* The live-sandbox registry the sweep checks against: sandbox.c registers a sandbox when
 * it starts creating it and forgets it when it frees it (after its cgroup is removed). */
void reaper_track(struct daemon *d, const char *sandbox_id);
void reaper_untrack(struct daemon *d, const char *sandbox_id);

/* Counters for metrics. */
uint64_t reaper_leaks_total(const struct daemon *d);        /* sbx_sandbox_leaks_total */
uint64_t reaper_startup_cgroups(const struct daemon *d);    /* removed at start-up */
uint64_t reaper_startup_processes(const struct daemon *d);  /* killed at start-up */
uint64_t reaper_abandoned_tasks(const struct daemon *d);    /* marked at start-up */
uint64_t reaper_abandoned_sessions(const struct daemon *d); /* marked at start-up */
