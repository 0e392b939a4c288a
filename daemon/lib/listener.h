/* SPDX-License-Identifier: MIT */
#pragma once
/* The lifetime of a server on the loop: its listening handle (TCP or a Unix socket) and the
 * count of connections it accepted. Such a server is freed in the last close callback of
 * its handles (STYLE 5), but they close at different times: the listener at shutdown (or
 * earlier, when it stops listening), each connection when it ends. The flags and the count
 * that decide which callback is the last live here once, for every server. Loop thread. */
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

struct listener;

/* Frees the server that embeds l (found with container_of). */
typedef void (*listener_free_cb)(struct listener *l);

struct listener {
    union { /* initialized by the owner: uv_tcp_init or uv_pipe_init */
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    };
    listener_free_cb free_cb;
    uint32_t n_conns;   /* opened and not yet closed */
    bool stopped;       /* the handle was handed to uv_close */
    bool handle_closed; /* and its close callback ran */
    bool closing;       /* listener_close was called: free once nothing is open */
};

/* Sets up l, which is zeroed (an xcalloc'ed server), before its handle is initialized. */
void listener_init(struct listener *l, listener_free_cb free_cb);
/* Closes the listening handle (new connections are refused); a second call does nothing.
 * The handle's data is the owner's. */
void listener_stop(struct listener *l);
/* Counts a connection in; the server is not freed while it is open. */
void listener_conn_opened(struct listener *l);
/* Counts one out, from the connection's last close callback: may free the server. */
void listener_conn_closed(struct listener *l);
/* Stops listening and frees the server now, or once its handle and its connections are
 * closed. The owner starts closing its connections first: l may be gone on return. */
void listener_close(struct listener *l);
