/* SPDX-License-Identifier: MIT */
/* Another thread wakes the loop through an eventfd (loopwake.h). */
#include "lib/loopwake.h"

#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/util.h"

static void poll_cb(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    struct loop_wake *w = h->data;
    uint64_t n;
    (void)RETRY_EINTR(read(w->fd, &n, sizeof(n))); /* reset: one callback for many signals */
    w->cb(w);
}

int loopwake_init(uv_loop_t *loop, struct loop_wake *w, void (*cb)(struct loop_wake *w),
                  struct err *e)
{
    w->cb = cb;
    w->polling = false;
    w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->fd < 0) {
        return err_set(e, -errno, "eventfd");
    }
    int r = uv_poll_init(loop, &w->poll, w->fd);
    if (r < 0) {
        w->fd = fd_close(w->fd);
        return err_setx(e, r, "poll an eventfd: %s", uv_strerror(r));
    }
    w->poll.data = w;
    w->polling = true;
    /* Fails only for an unknown event bit. */
    (void)uv_poll_start(&w->poll, UV_READABLE, poll_cb);
    return 0;
}

void loopwake_signal(struct loop_wake *w)
{
    uint64_t one = 1;
    (void)RETRY_EINTR(write(w->fd, &one, sizeof(one)));
}

void loopwake_stop(struct loop_wake *w, uv_close_cb close_cb)
{
    if (w->polling) {
        w->polling = false;
        uv_close((uv_handle_t *)&w->poll, close_cb);
    }
}

void loopwake_free(struct loop_wake *w)
{
    w->fd = fd_close(w->fd);
}
