/* SPDX-License-Identifier: MIT */
#pragma once
/* The agents' and admin sockets: accept, per-connection read buffers, write queue and
 * backpressure, and every bound (connections, in-flight requests, message size).
 * Loop thread only. */
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "lib/err.h"

struct daemon;
struct task;
struct proto_reader;

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

struct server;

struct conn {
    uv_pipe_t pipe;
    struct server *srv;
    struct daemon *d;
    struct proto_reader *rd;
    uint64_t id;
    uid_t peer_uid;
    pid_t peer_pid;
    struct task *tasks;   /* tasks of this connection (queued or running) */
    uint32_t inflight;    /* requests not yet answered */
    size_t stdin_pending; /* stdin bytes queued to its tasks */
    bool closing;
    bool reading;
    bool close_after_flush; /* a fatal protocol error was answered */
    struct conn *prev;
    struct conn *next;
};

/* Binds path (mode `mode`), listens, and serves connections of the given kind.
 * Returns 0 or -errno with e naming the path. */
int server_new(struct daemon *d, enum server_kind kind, const char *path, unsigned mode,
               struct server **ret, struct err *e);
/* Stops listening and unlinks the socket; existing connections stay. */
void server_stop_listening(struct server *s);
/* Closes every connection (their tasks are told) and frees the server when all closed. */
void server_close(struct server *s);
uint32_t server_connections(const struct server *s);
enum server_kind server_kind(const struct server *s);
/* The open connection with this id (ids are unique per server), or NULL: for answers
 * computed off the loop, whose connection may have closed meanwhile. */
struct conn *server_find_conn(struct server *s, uint64_t id);

/* Sends a packed message, taking ownership of sbuf's data (sbuf is left empty). Dropped
 * silently when the connection is closing. */
void conn_send(struct conn *c, msgpack_sbuffer *sbuf);
/* Bytes queued for writing to the client. */
size_t conn_write_queue(const struct conn *c);
/* Sends an error response for msgid. */
void conn_send_error(struct conn *c, uint32_t msgid, const char *code, const char *message);
/* A request finished (its response was sent): frees an in-flight slot. */
void conn_request_done(struct conn *c);
/* Adds / removes a task to the connection's list. */
void conn_add_task(struct conn *c, struct task *t);
void conn_remove_task(struct conn *c, struct task *t);
/* Stdin accounting for backpressure (rpc/exec). */
void conn_stdin_queued(struct conn *c, size_t n);
void conn_stdin_written(struct conn *c, size_t n);
/* Closes the connection (tasks of it are killed). */
void conn_close(struct conn *c);
/* Kills every running task of the server's connections (enum task_kill_reason why). */
void server_kill_tasks(struct server *s, int why);
