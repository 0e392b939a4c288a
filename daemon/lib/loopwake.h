/* SPDX-License-Identifier: MIT */
#pragma once
/* Another thread wakes the loop: an eventfd the thread writes and the loop polls. Used by
 * the audit writer and sbxd's worker threads instead of uv_async_send, whose handshake in
 * libuv 1.44 makes a loop woken before the sender has finished spin and call sched_yield
 * until it has; on a machine of two CPUs the woken loop often preempts the sender right
 * there. A sender calls loopwake_signal after releasing any lock the loop's callback
 * takes, so that the woken loop finds it free. */
#include <stdbool.h>

#include <uv.h>

#include "lib/err.h"

struct loop_wake {
    int fd;         /* the eventfd: open from loopwake_init to loopwake_free */
    uv_poll_t poll; /* loop only */
    bool polling;   /* poll is initialized and not closed */
    void (*cb)(struct loop_wake *w);
};

/* Opens the eventfd and polls it on loop: cb runs on the loop after one or more signals.
 * Returns 0 or -errno; on failure w needs no loopwake_free (fd is -1). */
int loopwake_init(uv_loop_t *loop, struct loop_wake *w, void (*cb)(struct loop_wake *w),
                  struct err *e);
/* Any thread: wakes the loop. Harmless once the loop has stopped polling. */
void loopwake_signal(struct loop_wake *w);
/* Loop: stops polling (the handle is closed; close_cb as for uv_close, may be NULL). The
 * fd stays open for senders still running. */
void loopwake_stop(struct loop_wake *w, uv_close_cb close_cb);
/* After every sender has stopped (threads joined): closes the fd. Accepts an unopened w
 * (fd -1). */
void loopwake_free(struct loop_wake *w);
