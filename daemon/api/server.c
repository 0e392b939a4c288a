/* SPDX-License-Identifier: MIT */
/* The agents' and admin sockets: accepting under a connection bound, reading into each
 * connection's proto reader, writing with a bounded queue, and backpressure both ways.
 * Protocol decisions belong to rpc.c; this file only moves bytes and enforces bounds. */
#define LOG_MOD "server"
#include "api/server.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/list.h"
#include "lib/log.h"
#include "lib/util.h"
#include "wire/proto.h"

struct server {
    uv_pipe_t listener;
    uv_loop_t *loop;
    struct server_options o; /* o.path is path */
    char *path;
    const struct server_handler *h;
    void *h_arg;
    struct conn *conns;
    uint32_t n_conns;
    uint64_t next_id;
    bool listening;
    bool stopped; /* server_stop_listening: a connection still accepted is refused */
    bool closing;
    bool freed_listener;
};

struct conn {
    uv_pipe_t pipe;
    struct server *srv;
    struct proto_reader *rd;
    uint64_t id;
    uid_t peer_uid;
    gid_t peer_gid;
    pid_t peer_pid;
    void *data;           /* the handler's (server_handler.open) */
    size_t stdin_pending; /* stdin bytes queued to its tasks */
    bool closing;
    bool reading;
    bool close_after_flush; /* a fatal protocol error was answered */
    struct conn *prev;
    struct conn *next;
};

struct wreq {
    uv_write_t req;
    size_t len;
    char *data;
};

static void conn_process(struct conn *c);
static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

/* Input the server refuses itself, told to the handler (which counts and records it). */
static void refused(struct conn *c, const char *kind, const char *code, const char *reason)
{
    c->srv->h->refused(c->srv->h_arg, c, kind, code, reason);
}

uint32_t server_connections(const struct server *s)
{
    return s->n_conns;
}

enum server_kind server_kind(const struct server *s)
{
    return s->o.kind;
}

uint64_t server_conn_id(const struct conn *c)
{
    return c->id;
}

enum server_kind server_conn_kind(const struct conn *c)
{
    return c->srv->o.kind;
}

uid_t server_conn_peer_uid(const struct conn *c)
{
    return c->peer_uid;
}

gid_t server_conn_peer_gid(const struct conn *c)
{
    return c->peer_gid;
}

pid_t server_conn_peer_pid(const struct conn *c)
{
    return c->peer_pid;
}

void *server_conn_data(const struct conn *c)
{
    return c->data;
}

size_t server_conn_write_queue(const struct conn *c)
{
    return uv_stream_get_write_queue_size((const uv_stream_t *)&c->pipe);
}

static void maybe_free_server(struct server *s)
{
    if (s->closing && s->freed_listener && s->n_conns == 0) {
        free(s->path);
        free(s);
    }
}

static void conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    struct server *s = c->srv;
    void (*closed)(void *) = s->o.closed;
    void *closed_arg = s->o.closed_arg;
    DLIST_REMOVE(s->conns, c);
    s->n_conns--;
    c->rd = proto_reader_free(c->rd);
    free(c);
    maybe_free_server(s); /* may free s */
    if (closed) {
        closed(closed_arg);
    }
}

void server_conn_close(struct conn *c)
{
    if (c->closing) {
        return;
    }
    c->closing = true;
    /* The client is gone: the handler lets go of what it did for it (its tasks die). */
    c->srv->h->gone(c->srv->h_arg, c);
    c->data = NULL;
    uv_close((uv_handle_t *)&c->pipe, conn_closed);
}

static void update_reading(struct conn *c)
{
    if (c->closing) {
        return;
    }
    bool want = !c->close_after_flush && c->stdin_pending < CONN_STDIN_HIGH &&
                server_conn_write_queue(c) < CONN_WQ_HIGH;
    if (want && !c->reading) {
        c->reading = true;
        conn_process(c); /* messages already buffered first */
    } else if (!want && c->reading) {
        c->reading = false;
        uv_read_stop((uv_stream_t *)&c->pipe);
    }
}

static void write_cb(uv_write_t *req, int status)
{
    struct wreq *w = container_of(req, struct wreq, req);
    struct conn *c = req->handle->data;
    free(w->data);
    free(w);
    if (c->closing) {
        return;
    }
    if (status < 0) {
        server_conn_close(c);
        return;
    }
    size_t q = server_conn_write_queue(c);
    if (c->close_after_flush && q == 0) {
        server_conn_close(c);
        return;
    }
    if (q < CONN_WQ_LOW) {
        c->srv->h->drained(c->srv->h_arg, c);
        update_reading(c);
    }
}

void server_conn_send(struct conn *c, msgpack_sbuffer *sbuf)
{
    if (c->closing || sbuf->size == 0) {
        return;
    }
    struct wreq *w = xmalloc(sizeof(*w));
    w->len = sbuf->size;
    w->data = msgpack_sbuffer_release(sbuf);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
    int r = uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, write_cb);
    if (r < 0) {
        free(w->data);
        free(w);
        server_conn_close(c);
        return;
    }
    if (c->reading && server_conn_write_queue(c) >= CONN_WQ_HIGH) {
        update_reading(c);
    }
}

void server_conn_send_error(struct conn *c, uint32_t msgid, const char *code, const char *message)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_response_err(&pk, msgid, code, message);
    server_conn_send(c, &sb);
    msgpack_sbuffer_destroy(&sb);
}

void server_conn_send_error_notify(struct conn *c, const char *code, const char *message,
                                   const char *method, size_t method_len,
                                   const msgpack_object *msgid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_error_notify(&pk, code, message, method, method_len, msgid);
    server_conn_send(c, &sb);
    msgpack_sbuffer_destroy(&sb);
}

/* A protocol error after which the stream cannot be trusted: say why in an `error`
 * notification (there is no msgid to answer), then close once it is written. */
static void conn_fatal(struct conn *c, const char *code, const char *message)
{
    if (c->closing || c->close_after_flush) {
        return;
    }
    server_conn_send_error_notify(c, code, message, NULL, 0, NULL);
    c->close_after_flush = true;
    update_reading(c);
    if (!c->closing && server_conn_write_queue(c) == 0) {
        server_conn_close(c);
    }
}

void server_conn_stdin_queued(struct conn *c, size_t n)
{
    c->stdin_pending += n;
    if (c->stdin_pending >= CONN_STDIN_HIGH) {
        update_reading(c);
    }
}

void server_conn_stdin_written(struct conn *c, size_t n)
{
    c->stdin_pending = n > c->stdin_pending ? 0 : c->stdin_pending - n;
    if (!c->reading && c->stdin_pending < CONN_STDIN_HIGH) {
        update_reading(c);
    }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = h->data;
    char *p = NULL;
    size_t len = 0;
    (void)suggested;
    if (proto_reader_buffer(c->rd, 64 * 1024, &p, &len) < 0) {
        p = NULL;
        len = 0;
    }
    buf->base = p;
    buf->len = len;
}

/* Handles every complete message buffered, as long as the connection keeps reading. */
static void conn_process(struct conn *c)
{
    struct err e = ERR_INIT;
    while (c->reading && !c->closing && !c->close_after_flush) {
        struct proto_msg m;
        memset(&m, 0, sizeof(m));
        e.msg[0] = '\0';
        int r = proto_reader_next(c->rd, &m, &e);
        if (r == 0) {
            break;
        }
        if (r == -EPROTO) {
            if (m.type == PROTO_REQUEST && !m.no_msgid) {
                server_conn_send_error(c, m.msgid, "bad_request", err_msg(&e));
            } else if (m.type == PROTO_REQUEST) {
                server_conn_send_error_notify(c, "bad_request", err_msg(&e), m.method, m.method_len,
                                              m.raw_msgid);
            } else {
                log_debug("conn=%llu msg=\"ignoring malformed message\" detail=\"%s\"",
                          (unsigned long long)c->id, err_msg(&e));
            }
            refused(c, "malformed", "bad_request", err_msg(&e));
            proto_msg_done(&m);
            continue;
        }
        if (r < 0) {
            const char *code = r == -EMSGSIZE ? "too_large" : "bad_request";
            refused(c, r == -EMSGSIZE ? "too_large" : "malformed", code, err_msg(&e));
            conn_fatal(c, code, err_msg(&e));
            break;
        }
        c->srv->h->message(c->srv->h_arg, c, &m);
        proto_msg_done(&m);
    }
    if (c->reading && !c->closing) {
        (void)uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, read_cb);
    }
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = st->data;
    (void)buf;
    if (nread == UV_ENOBUFS) {
        refused(c, "too_large", "too_large", "message exceeds the size limit");
        conn_fatal(c, "too_large", "message exceeds the size limit");
        return;
    }
    if (nread < 0) {
        server_conn_close(c);
        return;
    }
    if (nread == 0) {
        return;
    }
    proto_reader_consumed(c->rd, (size_t)nread);
    conn_process(c);
}

/* A connection whose accept failed: nothing but its handle was made. */
static void accept_failed_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_connection(uv_stream_t *ls, int status)
{
    struct server *s = ls->data;
    if (status < 0) {
        log_warn_errno(status, "kind=%d msg=\"accept failed\"", s->o.kind);
        return;
    }
    struct conn *c = xcalloc(1, sizeof(*c));
    c->srv = s;
    c->id = ++s->next_id;
    uv_pipe_init(s->loop, &c->pipe, 0);
    c->pipe.data = c;
    if (uv_accept(ls, (uv_stream_t *)&c->pipe) < 0) {
        /* The pipe is in the loop's handle list since uv_pipe_init: freed once it is closed. */
        uv_close((uv_handle_t *)&c->pipe, accept_failed_closed);
        return;
    }
    DLIST_PUSH(s->conns, c);
    s->n_conns++;
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0) {
        struct ucred cr;
        socklen_t len = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0) {
            c->peer_uid = cr.uid;
            c->peer_gid = cr.gid;
            c->peer_pid = cr.pid;
        }
    }
    c->data = s->h->open(s->h_arg, c);
    if (proto_reader_new(s->o.max_message_bytes, &c->rd) < 0) {
        log_error("msg=\"no memory for a connection, closing it\"");
        server_conn_close(c);
        return;
    }
    if (s->n_conns > s->o.max_connections) {
        char msg[96];
        (void)snprintf(msg, sizeof(msg), "too many connections (limit %u)", s->o.max_connections);
        refused(c, "limit", "limit", msg);
        conn_fatal(c, "limit", msg);
        return;
    }
    if (s->stopped) {
        conn_fatal(c, "shutting_down", "sbxd is shutting down");
        return;
    }
    c->reading = true;
    uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, read_cb);
}

static void listener_closed(uv_handle_t *h)
{
    struct server *s = h->data;
    s->freed_listener = true;
    maybe_free_server(s);
}

int server_new(uv_loop_t *loop, const struct server_options *o,
               const struct server_handler *handler, void *handler_arg, struct server **ret,
               struct err *e)
{
    const char *path = o->path;
    struct sockaddr_un sun;
    if (strlen(path) >= sizeof(sun.sun_path)) {
        /* libuv 1.44 has no uv_pipe_bind2 and would truncate silently. */
        return err_setx(e, -ENAMETOOLONG, "socket path '%s' is longer than %zu bytes", path,
                        sizeof(sun.sun_path) - 1);
    }
    /* A socket file left by a dead sbxd is replaced; a live one is not stolen. */
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            return err_setx(e, -EEXIST, "'%s' exists and is not a socket", path);
        }
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        memset(&sun, 0, sizeof(sun));
        sun.sun_family = AF_UNIX;
        str_copy(sun.sun_path, path, sizeof(sun.sun_path));
        int live = fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
        fd_close(fd);
        if (live) {
            return err_setx(e, -EADDRINUSE, "socket '%s' is in use by a running sbxd", path);
        }
        (void)unlink(path);
    }
    struct server *s = xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->o = *o;
    s->path = xstrdup(path);
    s->o.path = s->path;
    s->h = handler;
    s->h_arg = handler_arg;
    uv_pipe_init(loop, &s->listener, 0);
    s->listener.data = s;
    /* Bind under a restrictive umask so there is no window with a wider mode. */
    mode_t old = umask(0177);
    int r = uv_pipe_bind(&s->listener, path);
    umask(old);
    if (r == 0 && o->has_group && chown(path, (uid_t)-1, o->gid) < 0) {
        r = -errno;
    }
    if (r == 0 && chmod(path, o->mode) < 0) {
        r = -errno;
    }
    if (r == 0) {
        r = uv_listen((uv_stream_t *)&s->listener, 256, on_connection);
    }
    if (r < 0) {
        err_set(e, r, "listen on '%s'", path);
        s->closing = true;
        uv_close((uv_handle_t *)&s->listener, listener_closed);
        return r;
    }
    s->listening = true;
    *ret = s;
    return 0;
}

void server_stop_listening(struct server *s)
{
    s->stopped = true;
    if (!s->listening) {
        return;
    }
    s->listening = false;
    (void)unlink(s->path);
    uv_close((uv_handle_t *)&s->listener, listener_closed);
}

void server_close(struct server *s)
{
    server_stop_listening(s);
    s->closing = true;
    struct conn *c = s->conns;
    while (c) {
        struct conn *next = c->next;
        server_conn_close(c);
        c = next;
    }
    maybe_free_server(s);
}
