/* SPDX-License-Identifier: MIT */
/* A server's lifetime on the loop: the listening handle's close and the connection count,
 * and the one place that decides when the server may be freed. It never frees anything
 * but through the owner's callback, and knows nothing of what the server serves. */
#include "lib/listener.h"

#include <assert.h>

#include "lib/util.h"

static void listener_maybe_free(struct listener *l)
{
    if (l->closing && l->handle_closed && l->n_conns == 0) {
        l->free_cb(l);
    }
}

static void listener_handle_closed(uv_handle_t *h)
{
    struct listener *l = container_of(h, struct listener, handle);
    l->handle_closed = true;
    listener_maybe_free(l);
}

void listener_init(struct listener *l, listener_free_cb free_cb)
{
    l->free_cb = free_cb;
}

void listener_stop(struct listener *l)
{
    if (l->stopped) {
        return;
    }
    l->stopped = true;
    uv_close(&l->handle, listener_handle_closed);
}

void listener_conn_opened(struct listener *l)
{
    l->n_conns++;
}

void listener_conn_closed(struct listener *l)
{
    assert(l->n_conns > 0);
    l->n_conns--;
    listener_maybe_free(l);
}

void listener_close(struct listener *l)
{
    l->closing = true;
    listener_stop(l);
    listener_maybe_free(l);
}
