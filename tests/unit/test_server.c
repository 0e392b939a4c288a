/* SPDX-License-Identifier: MIT */
/* api/server.c alone (with lib/ and wire/proto.c): its handler is the test's, which records
 * every call in the fakes' call log, over a real loop and a real Unix socket in a mkdtemp
 * directory; the clients are plain sockets the test drives, packing with proto.c. The rules:
 * the socket is bound with the mode given and a path that does not fit is refused; a
 * message reaches the handler whole however it was written; bytes that cannot be framed
 * are refused and answered with an `error` notification, then the connection closes, while
 * a well-formed value that is no rpc message is refused (and answered when it has a msgid)
 * and reading goes on; one connection over the bound is opened, refused "limit" and closed;
 * a write queue at CONN_WQ_HIGH, or stdin queued at CONN_STDIN_HIGH, stops reading, which
 * resumes once a write completes below CONN_WQ_LOW (drained, after every such write) or the
 * stdin is written out; gone comes once, last, and the closed callback once the connection
 * is freed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/server.h"
#include "lib/alloc.h"
#include "lib/util.h"
#include "wire/proto.h"

#include "fakes/fakes.h"

/* Loop passes a condition may take before the test fails (a pass takes microseconds: a
 * Unix socket's bytes are readable at the peer once write returns). */
#define RUN_MAX 20000
/* Loop passes after which something that must not happen has not. */
#define QUIET_PASSES 20
#define MAX_CONNS 16
#define MAX_CLIENTS 8
#define BLOB (64 * 1024)

struct client {
    int fd;
    struct proto_reader *rd;
};

struct fixture {
    uv_loop_t loop;
    char dir[64];
    char path[160];
    struct server_options o;
    struct server *s;             /* NULL once the test closed it */
    struct conn *conn[MAX_CONNS]; /* by id, from open until gone */
    struct client cl[MAX_CLIENTS];
    size_t n_cl;
    int n_closed;
    /* drained: how often, and the largest write queue it was called with */
    int n_drained;
    size_t drained_max_q;
    bool log_drained;
    int drained_at_message; /* n_drained when the last message came */
    bool stop_in_open;      /* open stops listening (as a drain that starts then would) */
    bool param_ok;          /* the last request's string argument held the pattern */
};

/* The handler's state of one connection (server_conn_data). */
struct hconn {
    struct fixture *f;
    struct conn *c;
    uint64_t id;
};

static char pattern(size_t i)
{
    return (char)('a' + i % 26);
}

/* ---- the handler (api/rpc.c's place) ---- */

static void *h_open(void *arg, struct conn *c)
{
    struct fixture *f = arg;
    uint64_t id = server_conn_id(c);
    assert_in_range(id, 1, MAX_CONNS - 1);
    assert_null(f->conn[id]);
    assert_null(server_conn_data(c)); /* open comes first */
    f->conn[id] = c;
    struct hconn *h = xcalloc(1, sizeof(*h));
    h->f = f;
    h->c = c;
    h->id = id;
    fake_call("open %llu", (unsigned long long)id);
    if (f->stop_in_open) {
        server_stop_listening(f->s);
    }
    return h;
}

static bool arg_is_pattern(const msgpack_object *params, size_t *len)
{
    const msgpack_object *a = proto_params_arg0(params);
    *len = 0;
    if (!a || a->type != MSGPACK_OBJECT_STR) {
        return false;
    }
    *len = a->via.str.size;
    for (size_t i = 0; i < *len; i++) {
        if (a->via.str.ptr[i] != pattern(i)) {
            return false;
        }
    }
    return true;
}

static void h_message(void *arg, struct conn *c, const struct proto_msg *m)
{
    struct fixture *f = arg;
    struct hconn *h = server_conn_data(c);
    assert_non_null(h);
    assert_ptr_equal(h->c, c);
    f->drained_at_message = f->n_drained;
    char method[64] = "";
    if (m->method) {
        assert_in_range(m->method_len, 0, sizeof(method) - 1);
        memcpy(method, m->method, m->method_len);
        method[m->method_len] = '\0';
    }
    size_t len = 0;
    switch (m->type) {
    case PROTO_REQUEST:
        f->param_ok = arg_is_pattern(m->params, &len);
        fake_call("message %llu request %u %s len=%zu", (unsigned long long)h->id, m->msgid, method,
                  len);
        break;
    case PROTO_NOTIFY:
        fake_call("message %llu notify %s", (unsigned long long)h->id, method);
        break;
    case PROTO_RESPONSE:
        fake_call("message %llu response %u", (unsigned long long)h->id, m->msgid);
        break;
    }
    /* What a request may make the handler do while the server is in its read loop. */
    if (strcmp(method, "stdin") == 0) {
        server_conn_stdin_queued(c, CONN_STDIN_HIGH); /* a task's stdin is full */
    } else if (strcmp(method, "close") == 0) {
        server_conn_close(c);
    } else if (strcmp(method, "echo") == 0) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        proto_pack_response_ok(&pk, m->msgid);
        proto_pack_cstr(&pk, method);
        server_conn_send(c, &sb);
        assert_int_equal(sb.size, 0); /* taken */
        msgpack_sbuffer_destroy(&sb);
    }
}

static void h_refused(void *arg, struct conn *c, const char *kind, const char *code,
                      const char *reason)
{
    (void)arg;
    struct hconn *h = server_conn_data(c);
    assert_non_null(h);
    fake_call("refused %llu %s %s %s", (unsigned long long)h->id, kind, code, reason);
}

static void h_drained(void *arg, struct conn *c)
{
    struct fixture *f = arg;
    size_t q = server_conn_write_queue(c);
    f->n_drained++;
    if (q > f->drained_max_q) {
        f->drained_max_q = q;
    }
    if (f->log_drained) {
        fake_call("drained %llu", (unsigned long long)server_conn_id(c));
    }
}

static void h_gone(void *arg, struct conn *c)
{
    struct fixture *f = arg;
    struct hconn *h = server_conn_data(c);
    assert_non_null(h);
    assert_ptr_equal(h->c, c);
    assert_ptr_equal(f->conn[h->id], c);
    f->conn[h->id] = NULL;
    fake_call("gone %llu", (unsigned long long)h->id);
    /* From here on nothing is written: a send is dropped (the buffer is not even taken),
     * and closing again is no second gone. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_notify(&pk, "late");
    msgpack_pack_nil(&pk);
    size_t n = sb.size;
    server_conn_send(c, &sb);
    assert_int_equal(sb.size, n);
    msgpack_sbuffer_destroy(&sb);
    server_conn_close(c);
    free(h);
}

static const struct server_handler handler = {
    .open = h_open,
    .message = h_message,
    .refused = h_refused,
    .drained = h_drained,
    .gone = h_gone,
};

static void on_closed(void *arg)
{
    struct fixture *f = arg;
    f->n_closed++;
    fake_call("closed");
}

/* ---- fixture ---- */

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    str_copy(f->dir, "/tmp/sbx-test-server.XXXXXX", sizeof(f->dir));
    assert_non_null(mkdtemp(f->dir));
    (void)snprintf(f->path, sizeof(f->path), "%s/agents.sock", f->dir);
    f->o.kind = SERVER_AGENTS;
    f->o.path = f->path;
    f->o.mode = 0660;
    f->o.max_message_bytes = 1024 * 1024;
    f->o.max_connections = 8;
    f->o.closed = on_closed;
    f->o.closed_arg = f;
    fake_calls_reset();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (size_t i = 0; i < f->n_cl; i++) {
        (void)fd_close(f->cl[i].fd);
        f->cl[i].rd = proto_reader_free(f->cl[i].rd);
    }
    if (f->s) {
        server_close(f->s);
    }
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&f->loop), 0); /* no handle left behind */
    for (size_t i = 0; i < MAX_CONNS; i++) {
        assert_null(f->conn[i]); /* every connection was told gone */
    }
    DIR *d = opendir(f->dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] != '.') {
            char p[512];
            (void)snprintf(p, sizeof(p), "%s/%s", f->dir, de->d_name);
            (void)unlink(p);
        }
    }
    closedir(d);
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
    fake_calls_reset();
    return 0;
}

static void start(struct fixture *f)
{
    struct err e = ERR_INIT;
    assert_int_equal(server_new(&f->loop, &f->o, &handler, f, &f->s, &e), 0);
}

/* ---- helpers ---- */

#define RUN_UNTIL(f, cond)                                                                         \
    do {                                                                                           \
        int run_i_ = 0;                                                                            \
        while (!(cond)) {                                                                          \
            assert_true(++run_i_ < RUN_MAX);                                                       \
            (void)uv_run(&(f)->loop, UV_RUN_NOWAIT);                                               \
        }                                                                                          \
    } while (0)

static void run_until(struct fixture *f, const char *needle)
{
    RUN_UNTIL(f, strstr(fake_calls(), needle) != NULL);
}

static void run_quiet(struct fixture *f)
{
    for (int i = 0; i < QUIET_PASSES; i++) {
        (void)uv_run(&f->loop, UV_RUN_NOWAIT);
    }
}

/* Bytes the client wrote that its peer has not read yet. */
static int client_unread(const struct client *cl)
{
    int n = -1;
    assert_int_equal(ioctl(cl->fd, SIOCOUTQ, &n), 0);
    return n;
}

static int sock_connect(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    str_copy(sun.sun_path, path, sizeof(sun.sun_path));
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        int r = -errno;
        (void)close(fd);
        return r;
    }
    return fd;
}

/* A client connected (it sits in the listener's backlog until the loop runs). */
static struct client *client_new(struct fixture *f)
{
    assert_true(f->n_cl < MAX_CLIENTS);
    struct client *cl = &f->cl[f->n_cl++];
    cl->fd = sock_connect(f->path);
    assert_true(cl->fd >= 0);
    assert_int_equal(proto_reader_new(4 * 1024 * 1024, &cl->rd), 0);
    return cl;
}

/* A client the server accepted: open was called (and logged) for it. */
static struct client *client_open(struct fixture *f, uint64_t id)
{
    struct client *cl = client_new(f);
    char want[32];
    (void)snprintf(want, sizeof(want), "open %llu", (unsigned long long)id);
    run_until(f, want);
    fake_expectf("%s", want);
    assert_non_null(f->conn[id]);
    return cl;
}

static void client_write(struct fixture *f, struct client *cl, const void *p, size_t len)
{
    const char *b = p;
    int i = 0;
    while (len > 0) {
        ssize_t n = send(cl->fd, b, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            assert_int_equal(errno, EAGAIN);
            assert_true(++i < RUN_MAX);
            (void)uv_run(&f->loop, UV_RUN_NOWAIT);
            continue;
        }
        b += n;
        len -= (size_t)n;
    }
}

static void client_write_sb(struct fixture *f, struct client *cl, msgpack_sbuffer *sb)
{
    client_write(f, cl, sb->data, sb->size);
    msgpack_sbuffer_clear(sb);
}

/* The client's next message (1), its EOF (0) or -errno, with the loop run meanwhile. */
static int client_next(struct fixture *f, struct client *cl, struct proto_msg *m)
{
    for (int i = 0; i < RUN_MAX; i++) {
        memset(m, 0, sizeof(*m));
        int r = proto_reader_next(cl->rd, m, NULL);
        if (r != 0) {
            assert_int_equal(r, 1);
            return 1;
        }
        char *p;
        size_t len;
        assert_int_equal(proto_reader_buffer(cl->rd, 64 * 1024, &p, &len), 0);
        ssize_t n = recv(cl->fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            proto_reader_consumed(cl->rd, (size_t)n);
        } else if (n == 0) {
            return 0;
        } else if (errno == EAGAIN) {
            (void)uv_run(&f->loop, UV_RUN_NOWAIT);
        } else {
            return -errno;
        }
    }
    fail_msg("no message and no EOF after %d loop passes", RUN_MAX);
    return -ETIMEDOUT;
}

static void assert_str(const msgpack_object *o, const char *want)
{
    assert_non_null(o);
    assert_int_equal(o->type, MSGPACK_OBJECT_STR);
    assert_true(proto_str_eq(o->via.str.ptr, o->via.str.size, want));
}

/* The client's next message is the `error` notification the server closes with. */
static void client_expect_fatal(struct fixture *f, struct client *cl, const char *code,
                                const char *message)
{
    struct proto_msg m;
    assert_int_equal(client_next(f, cl, &m), 1);
    assert_int_equal(m.type, PROTO_NOTIFY);
    assert_true(proto_str_eq(m.method, m.method_len, "error"));
    assert_int_equal(m.params->type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(m.params->via.array.size, 1);
    const msgpack_object *arg = proto_params_arg0(m.params);
    assert_int_equal(arg->via.map.size, 2);
    assert_str(proto_map_get(arg, "code"), code);
    assert_str(proto_map_get(arg, "message"), message);
    proto_msg_done(&m);
}

static void client_expect_eof(struct fixture *f, struct client *cl)
{
    struct proto_msg m;
    assert_int_equal(client_next(f, cl, &m), 0);
}

/* Appends [0, msgid, method, ["abc..." of len bytes]] to sb. */
static void pack_request(msgpack_sbuffer *sb, uint32_t msgid, const char *method, size_t len)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    proto_pack_request(&pk, msgid, method);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_str(&pk, len);
    char *s = xmalloc(len + 1);
    for (size_t i = 0; i < len; i++) {
        s[i] = pattern(i);
    }
    msgpack_pack_str_body(&pk, s, len);
    free(s);
}

static void send_request(struct fixture *f, struct client *cl, uint32_t msgid, const char *method)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pack_request(&sb, msgid, method, 0);
    client_write_sb(f, cl, &sb);
    msgpack_sbuffer_destroy(&sb);
}

/* The server sends a notification of about BLOB bytes; returns its size. */
static size_t send_blob(struct conn *c)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_notify(&pk, "blob");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_bin(&pk, BLOB);
    char *b = xcalloc(1, BLOB);
    msgpack_pack_bin_body(&pk, b, BLOB);
    free(b);
    size_t n = sb.size;
    server_conn_send(c, &sb);
    assert_int_equal(sb.size, 0);
    msgpack_sbuffer_destroy(&sb);
    return n;
}

/* Bytes the client can read now, read and dropped; *eof set at the end of the stream. */
static size_t client_drop(struct client *cl, bool *eof)
{
    static char buf[64 * 1024];
    size_t total = 0;
    ssize_t n;
    while ((n = recv(cl->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        total += (size_t)n;
    }
    *eof = n == 0;
    assert_true(n == 0 || errno == EAGAIN);
    return total;
}

/* The server sends blobs to c until its write queue is at the high mark (the client does
 * not read). Returns the bytes sent. */
static size_t fill_write_queue(struct conn *c)
{
    size_t sent = 0;
    for (int i = 0; server_conn_write_queue(c) < CONN_WQ_HIGH; i++) {
        assert_true(i < 256); /* the kernel's socket buffer is far smaller */
        sent += send_blob(c);
    }
    return sent;
}

/* ---- server_new ---- */

static void server_new__listens_with_the_mode_given(void **state)
{
    struct fixture *f = *state;
    mode_t old = umask(022);
    start(f);
    assert_int_equal(umask(old), 022); /* bound under 0177, then put back */
    struct stat st;
    assert_int_equal(lstat(f->path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0660);
    assert_int_equal(server_kind(f->s), SERVER_AGENTS);
    assert_int_equal(server_connections(f->s), 0);
    fake_expect_none();

    /* The admin socket beside it, 0600, at a path of exactly sizeof(sun_path) - 1 bytes. */
    struct sockaddr_un sun;
    char path[sizeof(sun.sun_path) + 8];
    size_t n = (size_t)snprintf(path, sizeof(path), "%s/", f->dir);
    while (n < sizeof(sun.sun_path) - 1) {
        path[n++] = 'a';
    }
    path[n] = '\0';
    struct server_options o = f->o;
    o.kind = SERVER_ADMIN;
    o.path = path;
    o.mode = 0600;
    struct server *admin = NULL;
    struct err e = ERR_INIT;
    assert_int_equal(server_new(&f->loop, &o, &handler, f, &admin, &e), 0);
    assert_int_equal(lstat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(server_kind(admin), SERVER_ADMIN);
    server_close(admin);
    assert_int_equal(lstat(path, &st), -1); /* unlinked */
    assert_int_equal(errno, ENOENT);

    /* One byte more would be truncated by the bind: refused, and nothing made. */
    path[n++] = 'b';
    path[n] = '\0';
    o.path = path;
    admin = NULL;
    assert_int_equal(server_new(&f->loop, &o, &handler, f, &admin, &e), -ENAMETOOLONG);
    assert_null(admin);
    assert_int_equal(e.code, -ENAMETOOLONG);
    char want[256];
    (void)snprintf(want, sizeof(want), "socket path '%s' is longer than 107 bytes", path);
    assert_string_equal(err_msg(&e), want);
    assert_int_equal(lstat(path, &st), -1);
    assert_int_equal(errno, ENOENT);
}

static void server_new__replaces_a_dead_socket_not_a_live_one_nor_a_file(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char want[256];

    /* A socket someone listens on is not stolen. */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    str_copy(sun.sun_path, f->path, sizeof(sun.sun_path));
    assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(server_new(&f->loop, &f->o, &handler, f, &f->s, &e), -EADDRINUSE);
    assert_null(f->s);
    (void)snprintf(want, sizeof(want), "socket '%s' is in use by a running sbxd", f->path);
    assert_string_equal(err_msg(&e), want);

    /* Its owner died (the file stays): replaced. */
    assert_int_equal(close(fd), 0);
    struct stat st;
    assert_int_equal(lstat(f->path, &st), 0);
    start(f);
    client_open(f, 1);
    server_close(f->s);
    f->s = NULL;
    run_until(f, "closed");
    fake_expectf("gone 1; closed");

    /* Not a socket: left alone. */
    fd = open(f->path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(close(fd), 0);
    assert_int_equal(server_new(&f->loop, &f->o, &handler, f, &f->s, &e), -EEXIST);
    assert_null(f->s);
    (void)snprintf(want, sizeof(want), "'%s' exists and is not a socket", f->path);
    assert_string_equal(err_msg(&e), want);
    assert_int_equal(lstat(f->path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
}

static void server_new__bind_failure_names_the_path(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    (void)snprintf(f->path, sizeof(f->path), "%s/missing/agents.sock", f->dir);
    /* libuv's bind turns ENOENT into EACCES (as Windows says it). */
    assert_int_equal(server_new(&f->loop, &f->o, &handler, f, &f->s, &e), -EACCES);
    assert_null(f->s);
    char want[256];
    (void)snprintf(want, sizeof(want), "listen on '%s': EACCES", f->path);
    assert_string_equal(err_msg(&e), want);
    /* Its handle closes on the loop and the server is freed then (teardown's uv_run, ASan). */
}

/* ---- accepting ---- */

static void on_connection__knows_the_peer_and_numbers_connections(void **state)
{
    struct fixture *f = *state;
    f->o.kind = SERVER_ADMIN;
    start(f);
    client_open(f, 1);
    client_open(f, 2);
    assert_int_equal(server_connections(f->s), 2);
    for (uint64_t id = 1; id <= 2; id++) {
        struct conn *c = f->conn[id];
        assert_int_equal(server_conn_id(c), id);
        assert_int_equal(server_conn_kind(c), SERVER_ADMIN);
        assert_int_equal(server_conn_peer_uid(c), getuid()); /* SO_PEERCRED: this process */
        assert_int_equal(server_conn_peer_pid(c), getpid());
        struct hconn *h = server_conn_data(c);
        assert_non_null(h);
        assert_int_equal(h->id, id);
        assert_int_equal(server_conn_write_queue(c), 0);
    }
}

/* ---- reading ---- */

static void read_cb__message_reaches_the_handler_whole(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *cl = client_open(f, 1);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pack_request(&sb, 7, "run", 3000);
    client_write_sb(f, cl, &sb);
    run_until(f, "message");
    fake_expectf("message 1 request 7 run len=3000");
    assert_true(f->param_ok);

    /* The other two kinds, and the handler's answer reaches the client. */
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_notify(&pk, "cancel");
    msgpack_pack_array(&pk, 0);
    client_write_sb(f, cl, &sb);
    run_until(f, "message");
    fake_expectf("message 1 notify cancel");
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint32(&pk, 1);
    msgpack_pack_uint32(&pk, 12);
    msgpack_pack_nil(&pk);
    msgpack_pack_true(&pk);
    client_write_sb(f, cl, &sb);
    run_until(f, "message");
    fake_expectf("message 1 response 12");
    msgpack_sbuffer_destroy(&sb);

    send_request(f, cl, 8, "echo");
    struct proto_msg m;
    assert_int_equal(client_next(f, cl, &m), 1);
    assert_int_equal(m.type, PROTO_RESPONSE);
    assert_int_equal(m.msgid, 8);
    assert_int_equal(m.error->type, MSGPACK_OBJECT_NIL);
    assert_str(m.result, "echo");
    proto_msg_done(&m);
    fake_expectf("message 1 request 8 echo len=0");
}

static void read_cb__message_split_across_many_writes(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *cl = client_open(f, 1);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pack_request(&sb, 9, "run", 5000);
    /* A byte at a time through the heads, then in 97-byte pieces; each piece read by the
     * server (nothing left unread on the socket) before the next is written. */
    size_t off = 0;
    while (off < sb.size) {
        size_t n = off < 32 ? 1 : 97;
        if (n > sb.size - off) {
            n = sb.size - off;
        }
        assert_string_equal(fake_calls(), ""); /* nothing before the last byte */
        client_write(f, cl, sb.data + off, n);
        off += n;
        RUN_UNTIL(f, client_unread(cl) == 0);
    }
    run_until(f, "message");
    fake_expectf("message 1 request 9 run len=5000");
    assert_true(f->param_ok);
    msgpack_sbuffer_destroy(&sb);
}

static void read_cb__several_messages_per_write(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *cl = client_open(f, 1);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pack_request(&sb, 1, "one", 10);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_notify(&pk, "two");
    msgpack_pack_array(&pk, 0);
    pack_request(&sb, 3, "three", 2000);
    pack_request(&sb, 4, "four", 0);
    /* and the head of a fifth, whose rest comes later */
    size_t whole = sb.size;
    pack_request(&sb, 5, "five", 100);
    client_write(f, cl, sb.data, whole + 10);
    run_until(f, "four");
    RUN_UNTIL(f, client_unread(cl) == 0);
    fake_expectf("message 1 request 1 one len=10; message 1 notify two; "
                 "message 1 request 3 three len=2000; message 1 request 4 four len=0");
    client_write(f, cl, sb.data + whole + 10, sb.size - whole - 10);
    run_until(f, "five");
    fake_expectf("message 1 request 5 five len=100");
    assert_true(f->param_ok);
    msgpack_sbuffer_destroy(&sb);
}

static void conn_process__oversized_message_is_refused_and_closed(void **state)
{
    struct fixture *f = *state;
    f->o.max_message_bytes = 1024;
    start(f);
    struct client *cl = client_open(f, 1);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pack_request(&sb, 1, "fits", 1000); /* 1000 + its heads: within 1024 */
    pack_request(&sb, 2, "big", 1100);
    pack_request(&sb, 3, "after", 0);
    client_write_sb(f, cl, &sb);
    msgpack_sbuffer_destroy(&sb);
    /* Refused as soon as the string's head says it cannot fit: the stream is lost. */
    run_until(f, "closed");
    fake_expectf("message 1 request 1 fits len=1000; "
                 "refused 1 too_large too_large message larger than 1024 bytes; gone 1; closed");
    assert_int_equal(server_connections(f->s), 0);
    client_expect_fatal(f, cl, "too_large", "message larger than 1024 bytes");
    client_expect_eof(f, cl);
    run_quiet(f);
    fake_expect_none(); /* nothing after gone */
}

static void conn_process__undecodable_bytes_are_refused_and_closed(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *cl = client_open(f, 1);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pack_request(&sb, 1, "one", 0);
    static const char bad[] = {(char)0x93, 0x00, (char)0xc1}; /* 0xc1: never msgpack */
    msgpack_sbuffer_write(&sb, bad, sizeof(bad));
    pack_request(&sb, 2, "lost", 0);
    client_write_sb(f, cl, &sb);
    msgpack_sbuffer_destroy(&sb);
    run_until(f, "closed");
    fake_expectf(
        "message 1 request 1 one len=0; "
        "refused 1 malformed bad_request reserved type byte 0xc1 at offset 2; gone 1; closed");
    client_expect_fatal(f, cl, "bad_request", "reserved type byte 0xc1 at offset 2");
    client_expect_eof(f, cl);
    run_quiet(f);
    fake_expect_none();
}

static void conn_process__malformed_request_is_answered_and_reading_goes_on(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *cl = client_open(f, 1);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    /* A request whose method is no string: its msgid is known, so it is answered. */
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint32(&pk, 0);
    msgpack_pack_uint32(&pk, 5);
    msgpack_pack_int(&pk, 42);
    msgpack_pack_array(&pk, 0);
    /* A value that is no message at all: refused, nobody to answer. */
    msgpack_pack_int(&pk, 7);
    pack_request(&sb, 6, "next", 0);
    client_write_sb(f, cl, &sb);
    msgpack_sbuffer_destroy(&sb);
    run_until(f, "next");
    fake_expectf("refused 1 malformed bad_request request method must be a string; "
                 "refused 1 malformed bad_request message must be a non-empty array; "
                 "message 1 request 6 next len=0");
    struct proto_msg m;
    assert_int_equal(client_next(f, cl, &m), 1);
    assert_int_equal(m.type, PROTO_RESPONSE);
    assert_int_equal(m.msgid, 5);
    assert_str(proto_map_get(m.error, "code"), "bad_request");
    assert_str(proto_map_get(m.error, "message"), "request method must be a string");
    assert_int_equal(m.result->type, MSGPACK_OBJECT_NIL);
    proto_msg_done(&m);
    assert_int_equal(server_connections(f->s), 1);
    assert_non_null(f->conn[1]);
}

/* ---- the connection bound ---- */

static void on_connection__one_over_max_connections_is_refused(void **state)
{
    struct fixture *f = *state;
    f->o.max_connections = 2;
    start(f);
    struct client *a = client_open(f, 1);
    struct client *b = client_open(f, 2);
    /* The third is accepted, opened, refused and closed: the handler sees it all. */
    struct client *c = client_new(f);
    run_until(f, "closed");
    fake_expectf("open 3; refused 3 limit limit too many connections (limit 2); gone 3; closed");
    client_expect_fatal(f, c, "limit", "too many connections (limit 2)");
    client_expect_eof(f, c);
    assert_int_equal(server_connections(f->s), 2);

    /* The two go on. */
    send_request(f, a, 1, "a");
    send_request(f, b, 1, "b");
    run_until(f, "request 1 b");
    fake_expectf("message 1 request 1 a len=0; message 2 request 1 b len=0");

    /* One leaves: once it is freed there is room for one more, and only one. */
    (void)close(a->fd);
    a->fd = -1;
    run_until(f, "closed");
    fake_expectf("gone 1; closed");
    assert_int_equal(server_connections(f->s), 1);
    struct client *d = client_open(f, 4);
    send_request(f, d, 2, "d");
    run_until(f, "message");
    fake_expectf("message 4 request 2 d len=0");
    client_new(f);
    run_until(f, "closed");
    fake_expectf("open 5; refused 5 limit limit too many connections (limit 2); gone 5; closed");
    assert_int_equal(server_connections(f->s), 2);
}

/* ---- backpressure ---- */

static void server_conn_send__queue_over_high_mark_stops_reading_until_drained(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *cl = client_open(f, 1);
    struct conn *c = f->conn[1];
    size_t sent = fill_write_queue(c);
    assert_true(server_conn_write_queue(c) >= CONN_WQ_HIGH);

    /* Congested: the client's request stays on the socket, and nothing is drained. */
    send_request(f, cl, 1, "ping");
    run_quiet(f);
    fake_expect_none();
    assert_true(client_unread(cl) > 0);
    assert_int_equal(f->n_drained, 0);
    assert_true(server_conn_write_queue(c) >= CONN_WQ_HIGH);

    /* The client reads: drained only below the low mark, and the request is read after. */
    size_t got = 0;
    bool eof = false;
    RUN_UNTIL(f, (got += client_drop(cl, &eof), f->n_drained > 0));
    assert_true(f->drained_max_q < CONN_WQ_LOW);
    run_until(f, "ping");
    fake_expectf("message 1 request 1 ping len=0");
    assert_true(f->drained_at_message > 0);
    RUN_UNTIL(f, (got += client_drop(cl, &eof), got == sent));
    assert_false(eof);
    assert_int_equal(server_conn_write_queue(c), 0);
    assert_true(f->drained_max_q < CONN_WQ_LOW);
}

static void write_cb__drained_after_each_write_below_the_low_mark(void **state)
{
    struct fixture *f = *state;
    f->log_drained = true;
    start(f);
    struct client *cl = client_open(f, 1);
    /* Not only when the queue crosses the mark: every write that completes below it. */
    for (uint32_t i = 1; i <= 3; i++) {
        send_request(f, cl, i, "echo");
        struct proto_msg m;
        assert_int_equal(client_next(f, cl, &m), 1);
        assert_int_equal(m.msgid, i);
        proto_msg_done(&m);
        run_until(f, "drained");
        fake_expectf("message 1 request %u echo len=0; drained 1", i);
    }
    assert_int_equal(f->n_drained, 3);
    assert_int_equal(f->drained_max_q, 0);
}

static void server_conn_stdin_queued__stops_reading_until_written(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *cl = client_open(f, 1);
    struct conn *c = f->conn[1];

    /* A request fills a task's stdin: the messages after it in the same read wait. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pack_request(&sb, 1, "one", 0);
    pack_request(&sb, 2, "stdin", 0);
    pack_request(&sb, 3, "three", 0);
    client_write_sb(f, cl, &sb);
    run_until(f, "stdin");
    run_quiet(f);
    fake_expectf("message 1 request 1 one len=0; message 1 request 2 stdin len=0");
    /* Written out: what was buffered is handled at once, before the loop runs again. */
    server_conn_stdin_written(c, CONN_STDIN_HIGH);
    fake_expectf("message 1 request 3 three len=0");

    /* Below the mark it reads; at the mark it leaves the bytes on the socket. */
    server_conn_stdin_queued(c, CONN_STDIN_HIGH - 1);
    send_request(f, cl, 4, "four");
    run_until(f, "four");
    fake_expectf("message 1 request 4 four len=0");
    server_conn_stdin_queued(c, 1);
    send_request(f, cl, 5, "five");
    run_quiet(f);
    fake_expect_none();
    assert_true(client_unread(cl) > 0);
    /* More written than queued counts as none pending (no wrap). */
    server_conn_stdin_written(c, SIZE_MAX);
    run_until(f, "five");
    fake_expectf("message 1 request 5 five len=0");
    server_conn_stdin_queued(c, CONN_STDIN_HIGH - 1);
    send_request(f, cl, 6, "six");
    run_until(f, "six");
    fake_expectf("message 1 request 6 six len=0");
    msgpack_sbuffer_destroy(&sb);
}

/* ---- closing ---- */

static void read_cb__client_gone_calls_gone_once_then_closed(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *cl = client_open(f, 1);
    client_open(f, 2);
    /* Its last request, then it leaves: the request is still handled, then gone. */
    send_request(f, cl, 1, "last");
    (void)close(cl->fd);
    cl->fd = -1;
    run_until(f, "closed");
    fake_expectf("message 1 request 1 last len=0; gone 1; closed");
    assert_int_equal(f->n_closed, 1);
    assert_int_equal(server_connections(f->s), 1);
    run_quiet(f);
    fake_expect_none();
}

static void server_conn_close__by_the_handler_calls_gone_once(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *cl = client_open(f, 1);
    /* The handler closes it from its message callback: what followed is never handled. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pack_request(&sb, 1, "close", 0);
    pack_request(&sb, 2, "after", 0);
    client_write_sb(f, cl, &sb);
    msgpack_sbuffer_destroy(&sb);
    run_until(f, "closed");
    fake_expectf("message 1 request 1 close len=0; gone 1; closed");
    client_expect_eof(f, cl);
    run_quiet(f);
    fake_expect_none();
    assert_int_equal(server_connections(f->s), 0);
}

static void write_cb__failed_write_closes_the_connection(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *cl = client_open(f, 1);
    /* The client reads no more (it did not close: the server sees no EOF), so the next
     * write fails with EPIPE. */
    assert_int_equal(shutdown(cl->fd, SHUT_RD), 0);
    run_quiet(f);
    fake_expect_none();
    (void)send_blob(f->conn[1]);
    run_until(f, "closed");
    fake_expectf("gone 1; closed");
    assert_int_equal(server_connections(f->s), 0);
}

static void server_stop_listening__new_connects_refused_existing_go_on(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *a = client_open(f, 1);
    struct client *b = client_new(f); /* in the backlog, never accepted */
    server_stop_listening(f->s);
    server_stop_listening(f->s); /* twice is once */
    struct stat st;
    assert_int_equal(lstat(f->path, &st), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(sock_connect(f->path), -ENOENT);
    struct proto_msg m;
    assert_int_equal(client_next(f, b, &m), -ECONNRESET);
    fake_expect_none(); /* the handler never heard of it */

    send_request(f, a, 3, "echo");
    assert_int_equal(client_next(f, a, &m), 1);
    assert_int_equal(m.msgid, 3);
    proto_msg_done(&m);
    fake_expectf("message 1 request 3 echo len=0");
    assert_int_equal(server_connections(f->s), 1);
}

static void server_stop_listening__a_connection_accepted_then_is_shutting_down(void **state)
{
    struct fixture *f = *state;
    start(f);
    client_open(f, 1);
    /* The listener stops while the server accepts this one (the handler's open stops it). */
    f->stop_in_open = true;
    struct client *b = client_new(f);
    run_until(f, "closed");
    /* Not refused: no bad input, so nothing for the handler to count. */
    fake_expectf("open 2; gone 2; closed");
    client_expect_fatal(f, b, "shutting_down", "sbxd is shutting down");
    client_expect_eof(f, b);
    assert_int_equal(sock_connect(f->path), -ENOENT);
    assert_int_equal(server_connections(f->s), 1);
}

static void server_close__frees_every_connection_and_tells_the_handler(void **state)
{
    struct fixture *f = *state;
    start(f);
    struct client *a = client_open(f, 1);
    struct client *b = client_open(f, 2);
    struct client *c = client_open(f, 3);
    /* a: writes queued that its client does not read; b: half a message buffered. */
    size_t sent = fill_write_queue(f->conn[1]);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pack_request(&sb, 1, "half", 100);
    client_write(f, b, sb.data, 20);
    msgpack_sbuffer_destroy(&sb);
    RUN_UNTIL(f, client_unread(b) == 0);
    fake_expect_none();

    server_close(f->s);
    f->s = NULL;
    /* Every connection told at once, newest first; freed as their handles close. */
    fake_expectf("gone 3; gone 2; gone 1");
    struct stat st;
    assert_int_equal(lstat(f->path, &st), -1);
    RUN_UNTIL(f, f->n_closed == 3);
    fake_expectf("closed; closed; closed");
    client_expect_eof(f, c);
    client_expect_eof(f, b);
    size_t got = 0;
    bool eof = false;
    RUN_UNTIL(f, (got += client_drop(a, &eof), eof));
    assert_true(got < sent); /* the queued writes were dropped */
    /* teardown: the loop has no handle left and ASan finds nothing unfreed */
}

int main(void)
{
    /* As sbxd (signals.c): a write to a client gone is EPIPE, not a signal. */
    (void)signal(SIGPIPE, SIG_IGN);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(server_new__listens_with_the_mode_given),
        T(server_new__replaces_a_dead_socket_not_a_live_one_nor_a_file),
        T(server_new__bind_failure_names_the_path),
        T(on_connection__knows_the_peer_and_numbers_connections),
        T(read_cb__message_reaches_the_handler_whole),
        T(read_cb__message_split_across_many_writes),
        T(read_cb__several_messages_per_write),
        T(conn_process__oversized_message_is_refused_and_closed),
        T(conn_process__undecodable_bytes_are_refused_and_closed),
        T(conn_process__malformed_request_is_answered_and_reading_goes_on),
        T(on_connection__one_over_max_connections_is_refused),
        T(server_conn_send__queue_over_high_mark_stops_reading_until_drained),
        T(write_cb__drained_after_each_write_below_the_low_mark),
        T(server_conn_stdin_queued__stops_reading_until_written),
        T(read_cb__client_gone_calls_gone_once_then_closed),
        T(server_conn_close__by_the_handler_calls_gone_once),
        T(write_cb__failed_write_closes_the_connection),
        T(server_stop_listening__new_connects_refused_existing_go_on),
        T(server_stop_listening__a_connection_accepted_then_is_shutting_down),
        T(server_close__frees_every_connection_and_tells_the_handler),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
