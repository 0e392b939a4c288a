/* SPDX-License-Identifier: MIT */
#pragma once
/* Worker threads for the sandboxes' blocking work (creation, removal): libuv's thread pool
 * with another completion signal. A worker that finishes a job queues it and wakes the
 * loop through a loop_wake (loopwake.h: an eventfd, not libuv's uv_async_send, which its
 * pool uses), after releasing its lock; the loop runs the job's done callback then. */
#include <uv.h>

#include "lib/err.h"

struct workq;

struct workq_job {
    struct workq_job *next;
    void (*work)(struct workq_job *j); /* on a worker thread */
    void (*done)(struct workq_job *j); /* on the loop, after work */
};

/* Starts threads workers at nice value nice, named name (at most 15 bytes), that run jobs
 * in the order they were submitted. Returns 0 or -errno. */
int workq_new(uv_loop_t *loop, unsigned threads, int nice, const char *name, struct workq **ret,
              struct err *e);
/* Queues j: work runs on a worker, then done on the loop. A job keeps the loop alive until
 * its done callback has run. Loop thread. */
void workq_submit(struct workq *q, struct workq_job *j, void (*work)(struct workq_job *),
                  void (*done)(struct workq_job *));
/* After the loop has ended (so no job is pending): stops and joins the workers and closes
 * the eventfd's handle (running the loop until it is closed). Accepts NULL; returns NULL. */
struct workq *workq_free(struct workq *q);
