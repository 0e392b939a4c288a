/* SPDX-License-Identifier: MIT */
#pragma once
/* The agents' and admin sockets: accept, per-connection read buffers, write queue and
 * backpressure, and every bound (connections, message size). What a message means is the
 * handler's (api/rpc.c), given at server_new; this file knows no task. Loop thread only. */
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "lib/err.h"

struct conn;
struct proto_msg;
struct server;

/* Write-queue watermarks of a connection: above HIGH the tasks of the connection stop
 * reading their output (and the connection stops reading requests); below LOW they resume. */
#define CONN_WQ_HIGH (256 * 1024)
#define CONN_WQ_LOW (64 * 1024)
/* Stdin bytes queued to tasks of one connection above which it stops reading. */
#define CONN_STDIN_HIGH (1024 * 1024)

enum server_kind {
    SERVER_AGENTS = 0,
    SERVER_ADMIN = 1,
};

/* What the server tells whoever serves its connections (arg: server_new's handler_arg). */
struct server_handler {
    /* A connection was accepted (peer credentials known, nothing read yet): returns the
     * handler's state for it (server_conn_data), or NULL. Called once, before anything else. */
    void *(*open)(void *arg, struct conn *c);
    /* One decoded message (the server frees it after). */
    void (*message)(void *arg, struct conn *c, const struct proto_msg *m);
    /* Bad input refused by the server itself (kind: malformed, too_large, limit), before or
     * instead of a message: for counting and the trail. The server answers the client. */
    void (*refused)(void *arg, struct conn *c, const char *kind, const char *code,
                    const char *reason);
    /* The connection's write queue fell below CONN_WQ_LOW. */
    void (*drained)(void *arg, struct conn *c);
    /* The connection is closing (the client left, a write failed, or server_close): the
     * last call for c; nothing sent to it after is written. The handler frees its state. */
    void (*gone)(void *arg, struct conn *c);
};

struct server_options {
    enum server_kind kind;
    const char *path; /* the socket, bound with mode */
    unsigned mode;
    bool has_group; /* chown the socket to gid (else it keeps sbxd's group) */
    gid_t gid;
    size_t max_message_bytes; /* a bigger message closes the connection (too_large) */
    uint32_t max_connections; /* one more is answered "limit" and closed */
    /* Called once a connection is freed (the drain waits for clients), or NULL. */
    void (*closed)(void *arg);
    void *closed_arg;
};

/* Binds o->path (mode o->mode), listens, and serves connections through handler (which,
 * like o, must outlive the server). Returns 0 or -errno with e naming the path. */
int server_new(uv_loop_t *loop, const struct server_options *o,
               const struct server_handler *handler, void *handler_arg, struct server **ret,
               struct err *e);
/* Stops listening and unlinks the socket; existing connections stay, and a connection
 * still accepted is answered "shutting_down" and closed. */
void server_stop_listening(struct server *s);
/* Closes every connection (their handler is told) and frees the server when all closed. */
void server_close(struct server *s);
uint32_t server_connections(const struct server *s);
enum server_kind server_kind(const struct server *s);

/* A connection's id (unique per server), socket kind, peer credentials (SO_PEERCRED; 0
 * when not known) and the handler's state (from open). */
uint64_t server_conn_id(const struct conn *c);
enum server_kind server_conn_kind(const struct conn *c);
uid_t server_conn_peer_uid(const struct conn *c);
gid_t server_conn_peer_gid(const struct conn *c);
pid_t server_conn_peer_pid(const struct conn *c);
void *server_conn_data(const struct conn *c);

/* Sends a packed message, taking ownership of sbuf's data (sbuf is left empty). Dropped
 * silently when the connection is closing. */
void server_conn_send(struct conn *c, msgpack_sbuffer *sbuf);
/* Bytes queued for writing to the client. */
size_t server_conn_write_queue(const struct conn *c);
/* Sends an error response for msgid. */
void server_conn_send_error(struct conn *c, uint32_t msgid, const char *code, const char *message);
/* Sends an `error` notification (proto_pack_error_notify): a refusal no response can
 * carry, naming the refused message by method and msgid where they are not NULL. */
void server_conn_send_error_notify(struct conn *c, const char *code, const char *message,
                                   const char *method, size_t method_len,
                                   const msgpack_object *msgid);
/* Stdin accounting for backpressure: bytes queued to the connection's tasks, and written
 * out of their pipes. */
void server_conn_stdin_queued(struct conn *c, size_t n);
void server_conn_stdin_written(struct conn *c, size_t n);
/* Closes the connection (the handler's gone is called first). */
void server_conn_close(struct conn *c);
