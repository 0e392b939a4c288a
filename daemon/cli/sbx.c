/* SPDX-License-Identifier: MIT */
/* sbx, the command-line client of sbxd: flags, one msgpack-rpc connection driven by a
 * blocking poll(2) loop, stdio streaming for exec and the mapping of results to exit
 * statuses. It trusts nothing it reads from sbxd: every buffer it keeps is bounded, and
 * daemon text is sanitized before it reaches a terminal. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sysexits.h>
#include <time.h>

#include <msgpack.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/err.h"
#include "lib/log.h"
#include "wire/proto.h"
#include "cli/sbx_json.h"
#include "lib/util.h"

#define SBX_DEFAULT_SOCKET "./var/sbxd.sock"
#define SBX_DEFAULT_ADMIN_SOCKET "./var/sbxd-admin.sock"

#define SBX_MAX_MSG (16u << 20)     /* largest message accepted from sbxd */
#define SBX_READ_CHUNK (64u << 10)  /* socket read size */
#define SBX_STDIN_CHUNK (64u << 10) /* largest exec.stdin payload */
#define SBX_SEND_HIGH (256u << 10)  /* unsent bytes above which stdin is not read */
#define SBX_OUT_HIGH (1u << 20)     /* unwritten output above which the socket is not read */
#define SBX_JSON_CAP (64u << 20)    /* --json: stdout + stderr bytes kept */
#define SBX_TEXT_MAX 512            /* daemon text shown in one message or table cell */
#define SBX_QUEUE_MIN 4096          /* first allocation of a byte queue */

#define SBX_EXIT_TIMEOUT 124
#define SBX_EXIT_NOEXEC 127
#define SBX_EXIT_SIGNAL 128
#define SBX_EXIT_KILLED 137

/* A byte queue: appended at the end, consumed from the front (off); the consumed bytes are
 * moved out only when an append needs their room, so a slow reader costs no copies. */
struct byteq {
    struct buf b;
    size_t off; /* first unconsumed byte */
};

static size_t byteq_pending(const struct byteq *q)
{
    return q->b.len - q->off;
}

/* The unconsumed bytes ("" when there are none). */
static const char *byteq_data(const struct byteq *q)
{
    return q->b.p ? q->b.p + q->off : "";
}

static void byteq_append(struct byteq *q, const void *p, size_t n)
{
    if (n == 0) {
        return;
    }
    if (q->off > 0 && buf_room(&q->b) < n) {
        buf_consume(&q->b, q->off);
        q->off = 0;
    }
    if (q->b.cap == 0) {
        (void)buf_reserve(&q->b, SBX_QUEUE_MIN - 1);
    }
    /* Uncapped: what feeds a queue stops while it is above SBX_SEND_HIGH or SBX_OUT_HIGH,
     * and --json output is bounded by SBX_JSON_CAP. */
    (void)buf_append(&q->b, p, n);
}

static void byteq_consume(struct byteq *q, size_t n)
{
    q->off += n;
    if (q->off == q->b.len) {
        q->off = 0;
        buf_reset(&q->b);
    }
}

static void byteq_release(struct byteq *q)
{
    buf_free(&q->b);
    q->off = 0;
}

/* msgpack_packer_write callback: packs straight into a struct byteq. */
static int byteq_pack_cb(void *data, const char *p, size_t n)
{
    byteq_append(data, p, n);
    return 0;
}

#define sbx_errorf(...) log_prog_error("sbx", __VA_ARGS__)

/* Daemon text (str or bin) sanitized into buf; "" for other types. */
static const char *sbx_text(const msgpack_object *o, char *buf, size_t size)
{
    buf[0] = '\0';
    if (o && o->type == MSGPACK_OBJECT_STR) {
        (void)sbx_json_sanitize(o->via.str.ptr, o->via.str.size, buf, size);
    } else if (o && o->type == MSGPACK_OBJECT_BIN) {
        (void)sbx_json_sanitize(o->via.bin.ptr, o->via.bin.size, buf, size);
    }
    return buf;
}

/* The connection to sbxd: a non-blocking socket, a bounded reader and a send queue. */

struct sbx_conn {
    int fd;
    struct proto_reader *reader;
    struct byteq out;  /* packed, not yet sent */
    msgpack_packer pk; /* packs into out */
    uint32_t next_msgid;
    bool eof;          /* sbxd closed its side (or reset the connection) */
    bool write_closed; /* sends fail: unsent data was dropped */
};

/* Idempotent; usable as a cleanup attribute once c->fd is -1 or open. */
static void sbx_conn_close(struct sbx_conn *c)
{
    c->fd = fd_close(c->fd);
    c->reader = proto_reader_free(c->reader);
    byteq_release(&c->out);
}

/* Connects to the Unix socket at path; the socket is non-blocking afterwards. */
static int sbx_conn_open(struct sbx_conn *c, const char *path, struct err *e)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    scoped_close int fd = -1;
    int r;

    *c = (struct sbx_conn){.fd = -1, .next_msgid = 1};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return err_setx(e, -ENAMETOOLONG, "socket path too long (%zu bytes, at most %zu): '%s'",
                        strlen(path), sizeof(sa.sun_path) - 1, path);
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return err_setx(e, -errno, "socket: %s", strerror(errno));
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        return err_setx(e, -errno, "cannot connect to sbxd at '%s': %s", path, strerror(errno));
    }
    r = fd_set_nonblock(fd, true);
    if (r < 0) {
        return err_setx(e, r, "socket: %s", strerror(-r));
    }
    r = proto_reader_new(SBX_MAX_MSG, &c->reader);
    if (r < 0) {
        return err_setx(e, r, "out of memory");
    }
    msgpack_packer_init(&c->pk, &c->out, byteq_pack_cb);
    c->fd = take_fd(&fd);
    return 0;
}

/* Sends what the socket takes now. Returns 0 or -errno with e set. */
static int sbx_conn_send(struct sbx_conn *c, struct err *e)
{
    while (byteq_pending(&c->out) > 0 && !c->write_closed) {
        ssize_t n = send(c->fd, byteq_data(&c->out), byteq_pending(&c->out), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return 0;
        }
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
            /* sbxd went away: what it said before is still readable. */
            c->write_closed = true;
            byteq_release(&c->out);
            return 0;
        }
        if (n < 0) {
            return err_setx(e, -errno, "sending to sbxd: %s", strerror(errno));
        }
        byteq_consume(&c->out, (size_t)n);
    }
    return 0;
}

/* Reads what the socket has now into the reader. Returns 0 or -errno with e set. */
static int sbx_conn_recv(struct sbx_conn *c, struct err *e)
{
    char *p;
    size_t len;
    int r = proto_reader_buffer(c->reader, SBX_READ_CHUNK, &p, &len);
    if (r < 0) {
        return err_setx(e, r, "message from sbxd above the %u byte limit", SBX_MAX_MSG);
    }
    ssize_t n = RETRY_EINTR(read(c->fd, p, len));
    if (n < 0 && errno == EAGAIN) {
        return 0;
    }
    if (n < 0 && errno == ECONNRESET) {
        c->eof = true;
        return 0;
    }
    if (n < 0) {
        return err_setx(e, -errno, "reading from sbxd: %s", strerror(errno));
    }
    if (n == 0) {
        c->eof = true;
        return 0;
    }
    proto_reader_consumed(c->reader, (size_t)n);
    return 0;
}

/* The next complete message: 1 with *ret filled, 0 when more bytes are needed, -errno
 * when the stream is broken. Values that are not msgpack-rpc messages are skipped. */
static int sbx_conn_next(struct sbx_conn *c, struct proto_msg *ret, struct err *e)
{
    for (;;) {
        struct err pe = ERR_INIT;
        int r = proto_reader_next(c->reader, ret, &pe);
        if (r == -EPROTO) {
            proto_msg_done(ret);
            continue;
        }
        if (r < 0) {
            return err_setx(e, r, "bad message from sbxd: %s", err_msg(&pe));
        }
        return r;
    }
}

/* Prints a response's error and returns the matching exit status. */
static int sbx_rpc_error(const msgpack_object *error)
{
    char code[64], msg[SBX_TEXT_MAX];
    const msgpack_object *m =
        error->type == MSGPACK_OBJECT_MAP ? proto_map_get(error, "message") : error;

    (void)sbx_text(proto_map_get(error, "code"), code, sizeof(code));
    (void)sbx_text(m, msg, sizeof(msg));
    if (msg[0] == '\0') {
        (void)snprintf(msg, sizeof(msg), "request failed");
    }
    if (code[0] == '\0') {
        sbx_errorf("%s", msg);
        return EX_SOFTWARE;
    }
    sbx_errorf("%s (%s)", msg, code);
    if (strcmp(code, "denied") == 0) {
        return EX_NOPERM;
    }
    if (strcmp(code, "busy") == 0 || strcmp(code, "limit") == 0 ||
        strcmp(code, "shutting_down") == 0) {
        return EX_UNAVAILABLE;
    }
    /* The request was built from the caller's arguments alone, so a request the daemon
     * refuses as wrong (a pool it lacks, a timeout above the pool's maximum, too many
     * bytes of argv) is the caller's usage error. */
    if (strcmp(code, "bad_request") == 0 || strcmp(code, "unknown_pool") == 0 ||
        strcmp(code, "too_large") == 0) {
        return EX_USAGE;
    }
    return EX_SOFTWARE;
}

/* Packs the map of named arguments of a request. */
typedef void (*sbx_pack_args_cb)(msgpack_packer *pk, const void *arg);

/* Sends [0, msgid, method, [args]] (args packed by pack_args, or {} when it is NULL) and
 * waits for the response, skipping notifications. Returns 0 with *ret holding a successful
 * response (proto_msg_done it), or prints the failure and returns the exit status. */
static int sbx_call(struct sbx_conn *c, const char *method, sbx_pack_args_cb pack_args,
                    const void *arg, struct proto_msg *ret)
{
    struct err e = ERR_INIT;
    uint32_t msgid = c->next_msgid++;

    proto_pack_request(&c->pk, msgid, method);
    (void)msgpack_pack_array(&c->pk, 1);
    if (pack_args) {
        pack_args(&c->pk, arg);
    } else {
        (void)msgpack_pack_map(&c->pk, 0);
    }
    for (;;) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        struct proto_msg m;
        int r;

        if (byteq_pending(&c->out) > 0 && !c->write_closed) {
            p.events |= POLLOUT;
        }
        if (RETRY_EINTR(poll(&p, 1, -1)) < 0) {
            sbx_errorf("poll: %s", strerror(errno));
            return EX_OSERR;
        }
        r = sbx_conn_send(c, &e);
        if (r >= 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
            r = sbx_conn_recv(c, &e);
        }
        while (r >= 0 && (r = sbx_conn_next(c, &m, &e)) == 1) {
            if (m.type == PROTO_RESPONSE && m.msgid == msgid) {
                if (m.error->type != MSGPACK_OBJECT_NIL) {
                    int status = sbx_rpc_error(m.error);
                    proto_msg_done(&m);
                    return status;
                }
                *ret = m;
                return 0;
            }
            proto_msg_done(&m);
        }
        if (r < 0) {
            sbx_errorf("%s", err_msg(&e));
            return EX_SOFTWARE;
        }
        if (c->eof) {
            sbx_errorf("sbxd closed the connection before answering '%s'", method);
            return EX_UNAVAILABLE;
        }
    }
}

/* Commands: adding one is an entry in sbx_cmds and its run function. */

enum sbx_socket { SBX_SOCKET_AGENT, SBX_SOCKET_ADMIN };

struct sbx_ctx {
    const char *socket_path;
    const char *admin_socket_path;
    const char *path; /* the socket the running command talks to */
};

struct sbx_cmd {
    const char *name;
    enum sbx_socket socket;
    const char *synopsis; /* arguments after the command name */
    const char *summary;
    const char *options; /* option help lines, or NULL */
    /* argv[0] is the command name. Returns the process exit status. */
    int (*run)(const struct sbx_ctx *ctx, int argc, char **argv);
};

static int sbx_cmd_ping(const struct sbx_ctx *ctx, int argc, char **argv);
static int sbx_cmd_pools(const struct sbx_ctx *ctx, int argc, char **argv);
static int sbx_cmd_exec(const struct sbx_ctx *ctx, int argc, char **argv);
static int sbx_cmd_token(const struct sbx_ctx *ctx, int argc, char **argv);
static int sbx_cmd_audit(const struct sbx_ctx *ctx, int argc, char **argv);

static const struct sbx_cmd sbx_cmds[] = {
    {"ping", SBX_SOCKET_AGENT, "", "check that sbxd answers", NULL, sbx_cmd_ping},
    {"pools", SBX_SOCKET_AGENT, "", "show every pool and its counters", NULL, sbx_cmd_pools},
    {"exec", SBX_SOCKET_AGENT, "[OPTIONS] [--] COMMAND [ARG...]",
     "run COMMAND in a fresh sandbox, streaming its stdin, stdout and stderr",
     "  --pool NAME        the pool to take the sandbox from (default: the daemon's)\n"
     "  --timeout SECONDS  wall-clock limit (also 500ms, 2m, 1h)\n"
     "  --env K=V          set an environment variable (repeatable)\n"
     "  --cwd DIR          working directory inside the sandbox\n"
     "  --token TOKEN      capability token whose grants the task gets (env SBX_TOKEN,\n"
     "                     which keeps it out of the process list)\n"
     "  --json             print one JSON object with the result and output at the end\n"
     "exit status: the command's; 128+N if killed by signal N; 124 on timeout; 137 when\n"
     "killed for output or memory; 127 if it could not be executed; 64 usage (also a\n"
     "request sbxd refuses: an unknown pool, a timeout above its maximum); 69 sbxd\n"
     "unreachable or busy; 70 other errors; 77 denied, or killed because its token\n"
     "expired or was revoked\n",
     sbx_cmd_exec},
    {"token", SBX_SOCKET_ADMIN, "issue [OPTIONS] | revoke TOKEN_OR_ID | list",
     "mint a capability token (printed once), revoke one, or list them (admin socket)",
     "  issue options:\n"
     "  --mount SRC:DST    expose host path SRC read-only at DST in the sandbox (repeatable,\n"
     "                     at most 8; SRC must be under one of sbxd's mount roots)\n"
     "  --net none|PROFILE network profile (default none: loopback only)\n"
     "  --pool NAME        a pool the token may run in (repeatable; default: every pool)\n"
     "  --ttl SECONDS      lifetime (also 30s, 10m, 1h; default and maximum: sbxd's policy)\n"
     "  --uses N           number of tasks it may start (default 0: unlimited)\n"
     "issue prints the token on stdout and its id and expiry on stderr; list shows ids,\n"
     "grants, expiry and uses, never a token\n",
     sbx_cmd_token},
    {"audit", SBX_SOCKET_ADMIN, "[OPTIONS] | verify [--json]",
     "show the audit trail's task chains, newest first; 'verify' checks its hash chain",
     "  --task ID          one task's chain, event by event\n"
     "  --since DURATION   tasks requested in the last DURATION (30s, 15m, 2h, 7d)\n"
     "  --pool NAME        tasks of that pool\n"
     "  --status S         tasks whose result was S (exited, timeout, denied, abandoned, ...;\n"
     "                     'running' for tasks with no result yet)\n"
     "  --limit N          at most N chains (1..1000, default 50)\n"
     "  --json             one JSON object per chain, one per line\n"
     "exit status: 0; 1 when verify finds a bad row or --task finds nothing; 64 usage;\n"
     "69 sbxd unreachable; 70 other errors\n",
     sbx_cmd_audit},
};

static void sbx_usage(FILE *f, const struct sbx_cmd *only)
{
    (void)fputs("usage: sbx [--socket PATH] [--admin-socket PATH] COMMAND [ARGS]\n", f);
    for (size_t i = 0; i < ARRAY_SIZE(sbx_cmds); i++) {
        const struct sbx_cmd *c = &sbx_cmds[i];
        if (only && only != c) {
            continue;
        }
        (void)fprintf(f, "  sbx %s%s%s\n      %s\n", c->name, c->synopsis[0] ? " " : "",
                      c->synopsis, c->summary);
        if (only && c->options) {
            (void)fputs(c->options, f);
        }
    }
    if (!only) {
        (void)fputs("global options:\n"
                    "  --socket PATH        agents' socket (env SBX_SOCKET, "
                    "default " SBX_DEFAULT_SOCKET ")\n"
                    "  --admin-socket PATH  admin socket (env SBX_ADMIN_SOCKET, "
                    "default " SBX_DEFAULT_ADMIN_SOCKET ")\n",
                    f);
    }
}

static int sbx_usage_error(const struct sbx_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int sbx_usage_error(const struct sbx_cmd *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_prog_verror("sbx", fmt, ap);
    va_end(ap);
    sbx_usage(stderr, cmd);
    return EX_USAGE;
}

static const struct sbx_cmd *sbx_cmd_find(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(sbx_cmds); i++) {
        if (strcmp(sbx_cmds[i].name, name) == 0) {
            return &sbx_cmds[i];
        }
    }
    return NULL;
}

/* For commands without arguments: a usage error status, or 0. */
static int sbx_no_args(int argc, char **argv)
{
    const struct sbx_cmd *cmd = sbx_cmd_find(argv[0]);
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        sbx_usage(stdout, cmd);
        return -1;
    }
    if (argc > 1) {
        return sbx_usage_error(cmd, "%s: unexpected argument '%s'", argv[0], argv[1]);
    }
    return 0;
}

static int sbx_connect(const struct sbx_ctx *ctx, struct sbx_conn *c)
{
    struct err e = ERR_INIT;
    if (sbx_conn_open(c, ctx->path, &e) < 0) {
        sbx_errorf("%s", err_msg(&e));
        return EX_UNAVAILABLE;
    }
    return 0;
}

/* Connects and makes one call (sbx_call). Returns 0 with *ret, or the exit status. */
static int sbx_request(const struct sbx_ctx *ctx, struct sbx_conn *c, const char *method,
                       sbx_pack_args_cb pack_args, const void *arg, struct proto_msg *ret)
{
    int status = sbx_connect(ctx, c);
    return status != 0 ? status : sbx_call(c, method, pack_args, arg, ret);
}

static int sbx_cmd_ping(const struct sbx_ctx *ctx, int argc, char **argv)
{
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    char version[128];
    bool pong = false;
    int status = sbx_no_args(argc, argv);

    if (status != 0) {
        return status < 0 ? 0 : status;
    }
    status = sbx_request(ctx, &c, "ping", NULL, NULL, &m);
    if (status != 0) {
        return status;
    }
    if (proto_get_bool(m.result, "pong", &pong, NULL) < 0 || !pong) {
        sbx_errorf("unexpected answer to ping");
        return EX_SOFTWARE;
    }
    if (sbx_text(proto_map_get(m.result, "version"), version, sizeof(version))[0]) {
        (void)printf("pong (version %s)\n", version);
    } else {
        (void)printf("pong\n");
    }
    return 0;
}

/* pools: one aligned table row per pool. */

static const struct {
    const char *key;
    const char *title;
    bool number;
} sbx_pool_cols[] = {
    {"name", "NAME", false},          {"warm", "WARM", true},        {"target", "TARGET", true},
    {"running", "RUNNING", true},     {"max", "MAX", true},          {"queued", "QUEUED", true},
    {"queue_max", "QUEUE_MAX", true}, {"created", "CREATED", true},  {"failed", "FAILED", true},
    {"image", "IMAGE", false},        {"seccomp", "SECCOMP", false},
};

/* Formats one table cell into buf; returns its width in characters. */
static size_t sbx_cell(const msgpack_object *o, char *buf, size_t size)
{
    if (!o || o->type == MSGPACK_OBJECT_NIL) {
        return (size_t)snprintf(buf, size, "-");
    }
    switch (o->type) {
    case MSGPACK_OBJECT_STR:
        return sbx_json_sanitize(o->via.str.ptr, o->via.str.size, buf, size);
    case MSGPACK_OBJECT_BIN:
        return sbx_json_sanitize(o->via.bin.ptr, o->via.bin.size, buf, size);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return (size_t)snprintf(buf, size, "%" PRIu64, o->via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return (size_t)snprintf(buf, size, "%" PRId64, o->via.i64);
    case MSGPACK_OBJECT_BOOLEAN:
        return (size_t)snprintf(buf, size, "%s", o->via.boolean ? "yes" : "no");
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        return (size_t)snprintf(buf, size, "%g", o->via.f64);
    default:
        return (size_t)snprintf(buf, size, "?");
    }
}

/* The IMAGE cell says which root the pool really uses: "parsing", "parsing (verifying)",
 * "parsing (refused)", or "host (parsing not built)" when the host image stands in. */
static size_t sbx_image_cell(const msgpack_object *row, char *buf, size_t size)
{
    const msgpack_object *img = proto_map_get(row, "image");
    const msgpack_object *st = proto_map_get(row, "image_state");
    size_t w = sbx_cell(img, buf, size);
    if (!st || st->type != MSGPACK_OBJECT_STR || w + 1 >= size) {
        return w;
    }
    static const struct {
        const char *state;
        const char *before;
        const char *after;
    } forms[] = {
        {"not_built", "host (", " not built)"},
        {"verifying", "", " (verifying)"},
        {"refused", "", " (refused)"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(forms); i++) {
        if (proto_str_eq(st->via.str.ptr, st->via.str.size, forms[i].state)) {
            char name[64];
            (void)str_copy(name, buf, sizeof(name));
            int n = snprintf(buf, size, "%s%s%s", forms[i].before, name, forms[i].after);
            return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
        }
    }
    return w;
}

/* One cell of the pools table. */
static size_t sbx_pool_cell(const msgpack_object *row, const char *key, char *buf, size_t size)
{
    if (strcmp(key, "image") == 0) {
        return sbx_image_cell(row, buf, size);
    }
    return sbx_cell(proto_map_get(row, key), buf, size);
}

static void sbx_print_cell(const char *text, size_t width, size_t col_width, bool right, bool last)
{
    size_t pad = col_width > width ? col_width - width : 0;
    if (right) {
        (void)printf("%*s%s", (int)pad, "", text);
    } else {
        (void)fputs(text, stdout);
        if (!last) {
            (void)printf("%*s", (int)pad, "");
        }
    }
    (void)fputs(last ? "\n" : "  ", stdout);
}

static int sbx_cmd_pools(const struct sbx_ctx *ctx, int argc, char **argv)
{
    enum { NCOLS = ARRAY_SIZE(sbx_pool_cols) };
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    size_t widths[NCOLS];
    char cell[SBX_TEXT_MAX / 4];
    int status = sbx_no_args(argc, argv);

    if (status != 0) {
        return status < 0 ? 0 : status;
    }
    status = sbx_request(ctx, &c, "pools", NULL, NULL, &m);
    sbx_conn_close(&c);
    if (status != 0) {
        return status;
    }
    if (m.result->type != MSGPACK_OBJECT_ARRAY) {
        sbx_errorf("unexpected answer to pools: not an array");
        return EX_SOFTWARE;
    }
    const msgpack_object_array *rows = &m.result->via.array;
    /* Two passes: widths first, then the table, so nothing is kept per cell. */
    for (size_t j = 0; j < NCOLS; j++) {
        widths[j] = strlen(sbx_pool_cols[j].title);
        for (uint32_t i = 0; i < rows->size; i++) {
            size_t w = sbx_pool_cell(&rows->ptr[i], sbx_pool_cols[j].key, cell, sizeof(cell));
            widths[j] = w > widths[j] ? w : widths[j];
        }
    }
    for (size_t j = 0; j < NCOLS; j++) {
        sbx_print_cell(sbx_pool_cols[j].title, strlen(sbx_pool_cols[j].title), widths[j],
                       sbx_pool_cols[j].number, j + 1 == NCOLS);
    }
    for (uint32_t i = 0; i < rows->size; i++) {
        for (size_t j = 0; j < NCOLS; j++) {
            size_t w = sbx_pool_cell(&rows->ptr[i], sbx_pool_cols[j].key, cell, sizeof(cell));
            sbx_print_cell(cell, w, widths[j], sbx_pool_cols[j].number, j + 1 == NCOLS);
        }
    }
    return 0;
}

/* exec: one task, its stdio streamed through a poll loop, its result mapped to a status. */

struct sbx_env {
    const char *kv; /* "K=V" from argv */
    size_t key_len;
    size_t index; /* position on the command line: the last one of a key wins */
};

struct sbx_exec_opts {
    const char *pool;
    const char *cwd;
    const char *token;   /* never printed */
    uint64_t timeout_ns; /* 0: the daemon's default */
    struct sbx_env *env;
    size_t n_env;
    bool json;
    char **argv;
    int argc;
};

/* One of our output streams: where a task stream goes, queued until it is writable. */
struct sbx_out {
    int fd;
    struct byteq q;
    size_t chunk; /* largest write that cannot block for long once poll says POLLOUT */
    bool closed;  /* a write failed (EPIPE...): further output is dropped */
};

struct sbx_exec {
    struct sbx_exec_opts opts;
    struct sbx_conn c;
    uint32_t msgid;
    int sigfd;
    bool started;    /* exec.started seen: stdin may flow */
    bool stdin_open; /* still forwarding our stdin */
    struct sbx_out out[2];
    size_t kept;           /* --json: output bytes kept */
    bool dropped;          /* --json: output above SBX_JSON_CAP was dropped */
    struct proto_msg resp; /* our response, once done */
    bool done;
    char *stdin_buf;
};

/* Releases everything x owns; idempotent, so usable as a cleanup attribute. */
static void sbx_exec_release(struct sbx_exec *x)
{
    sbx_conn_close(&x->c);
    proto_msg_done(&x->resp);
    x->sigfd = fd_close(x->sigfd);
    byteq_release(&x->out[0].q);
    byteq_release(&x->out[1].q);
    free(take_ptr(&x->stdin_buf));
    free(take_ptr(&x->opts.env));
}

static int sbx_env_cmp(const void *a, const void *b)
{
    const struct sbx_env *x = a, *y = b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int r = memcmp(x->kv, y->kv, n);

    if (r != 0) {
        return r;
    }
    if (x->key_len != y->key_len) {
        return x->key_len < y->key_len ? -1 : 1;
    }
    return x->index < y->index ? -1 : (x->index > y->index ? 1 : 0);
}

/* Parses exec's flags into o (pointing into argv). Returns 0 or an exit status. */
static int sbx_exec_parse(int argc, char **argv, struct sbx_exec_opts *o)
{
    const struct sbx_cmd *cmd = sbx_cmd_find("exec");
    int i = 1;

    o->env = xcalloc((size_t)argc, sizeof(*o->env));
    for (; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r;

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0') {
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            sbx_usage(stdout, cmd);
            return -1;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        if ((r = parse_long_opt(argc, argv, &i, "--pool", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(cmd, "exec: --pool needs a pool name");
            }
            o->pool = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--token", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(cmd, "exec: --token needs a token");
            }
            o->token = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--cwd", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(cmd, "exec: --cwd needs a directory");
            }
            o->cwd = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--timeout", &v)) != 0) {
            if (r < 0 || parse_duration_ns(v, &o->timeout_ns) < 0 || o->timeout_ns == 0) {
                return sbx_usage_error(cmd, "exec: --timeout needs a positive number of seconds");
            }
        } else if ((r = parse_long_opt(argc, argv, &i, "--env", &v)) != 0) {
            const char *eq = r > 0 ? strchr(v, '=') : NULL;
            if (!eq || eq == v) {
                return sbx_usage_error(cmd, "exec: --env needs K=V with a non-empty K, not '%s'",
                                       r > 0 ? v : "");
            }
            o->env[o->n_env] = (struct sbx_env){v, (size_t)(eq - v), o->n_env};
            o->n_env++;
        } else {
            return sbx_usage_error(cmd, "exec: unknown option '%s'", a);
        }
    }
    if (i >= argc) {
        return sbx_usage_error(cmd, "exec: missing the command to run");
    }
    o->argv = argv + i;
    o->argc = argc - i;
    /* Sort by key, then by position: the last entry of each run of equal keys wins. */
    qsort(o->env, o->n_env, sizeof(*o->env), sbx_env_cmp);
    size_t n = 0;
    for (size_t j = 0; j < o->n_env; j++) {
        if (j + 1 < o->n_env && o->env[j + 1].key_len == o->env[j].key_len &&
            memcmp(o->env[j + 1].kv, o->env[j].kv, o->env[j].key_len) == 0) {
            continue;
        }
        o->env[n++] = o->env[j];
    }
    o->n_env = n;
    return 0;
}

static void sbx_exec_pack_request(struct sbx_exec *x)
{
    const struct sbx_exec_opts *o = &x->opts;
    msgpack_packer *pk = &x->c.pk;
    uint32_t n = 2 + (o->pool != NULL) + (o->cwd != NULL) + (o->timeout_ns > 0) + (o->n_env > 0) +
                 (o->token != NULL);

    proto_pack_request(pk, x->msgid, "exec");
    (void)msgpack_pack_array(pk, 1);
    (void)msgpack_pack_map(pk, n);
    proto_pack_cstr(pk, "argv");
    (void)msgpack_pack_array(pk, (uint32_t)o->argc);
    for (int i = 0; i < o->argc; i++) {
        proto_pack_cstr(pk, o->argv[i]);
    }
    if (o->pool) {
        proto_pack_kv_str(pk, "pool", o->pool);
    }
    if (o->token) {
        proto_pack_kv_str(pk, "token", o->token);
    }
    if (o->cwd) {
        proto_pack_kv_str(pk, "cwd", o->cwd);
    }
    if (o->timeout_ns > 0 && o->timeout_ns % 1000000000u == 0) {
        proto_pack_kv_u64(pk, "timeout", o->timeout_ns / 1000000000u);
    } else if (o->timeout_ns > 0) {
        proto_pack_kv_f64(pk, "timeout", (double)o->timeout_ns / 1e9);
    }
    if (o->n_env > 0) {
        proto_pack_cstr(pk, "env");
        (void)msgpack_pack_map(pk, (uint32_t)o->n_env);
        for (size_t i = 0; i < o->n_env; i++) {
            const struct sbx_env *v = &o->env[i];
            (void)msgpack_pack_str_with_body(pk, v->kv, v->key_len);
            proto_pack_cstr(pk, v->kv + v->key_len + 1);
        }
    }
    proto_pack_kv_bool(pk, "stdin", true);
}

/* Queues [2, "exec.stdin", [msgid, bin]]; an empty bin is the EOF. */
static void sbx_exec_pack_stdin(struct sbx_exec *x, const char *p, size_t n)
{
    proto_pack_notify(&x->c.pk, "exec.stdin");
    (void)msgpack_pack_array(&x->c.pk, 2);
    (void)msgpack_pack_uint32(&x->c.pk, x->msgid);
    (void)msgpack_pack_bin_with_body(&x->c.pk, p, n);
}

/* Task output for stream 0 (stdout) or 1 (stderr). */
static void sbx_exec_output(struct sbx_exec *x, int which, const char *p, size_t n)
{
    struct sbx_out *out = &x->out[which];

    if (x->opts.json) {
        size_t room = SBX_JSON_CAP - x->kept;
        if (n > room) {
            x->dropped = true;
            n = room;
        }
        x->kept += n;
        byteq_append(&out->q, p, n);
    } else if (!out->closed) {
        byteq_append(&out->q, p, n);
    }
}

/* Handles one message from sbxd; takes ownership of m. */
static void sbx_exec_message(struct sbx_exec *x, struct proto_msg *m)
{
    const msgpack_object *p = m->params;

    if (m->type == PROTO_RESPONSE && m->msgid == x->msgid) {
        x->resp = *m;
        x->done = true;
        return;
    }
    /* Notifications about our task: [msgid, payload]. Anything else is not for us. */
    if (m->type == PROTO_NOTIFY && p && p->type == MSGPACK_OBJECT_ARRAY && p->via.array.size >= 2 &&
        p->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
        p->via.array.ptr[0].via.u64 == x->msgid) {
        const msgpack_object *v = &p->via.array.ptr[1];
        bool raw = v->type == MSGPACK_OBJECT_BIN || v->type == MSGPACK_OBJECT_STR;
        const char *data = v->type == MSGPACK_OBJECT_BIN ? v->via.bin.ptr : v->via.str.ptr;
        size_t len = v->type == MSGPACK_OBJECT_BIN ? v->via.bin.size : v->via.str.size;

        if (proto_str_eq(m->method, m->method_len, "exec.started")) {
            x->started = true;
        } else if (raw && proto_str_eq(m->method, m->method_len, "exec.stdout")) {
            sbx_exec_output(x, 0, data, len);
        } else if (raw && proto_str_eq(m->method, m->method_len, "exec.stderr")) {
            sbx_exec_output(x, 1, data, len);
        }
    }
    proto_msg_done(m);
}

static void sbx_exec_read_stdin(struct sbx_exec *x)
{
    ssize_t n = read(STDIN_FILENO, x->stdin_buf, SBX_STDIN_CHUNK);

    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
        return;
    }
    if (n <= 0) {
        /* EOF, or an error (EIO from a lost terminal...): either way the task's stdin ends. */
        x->stdin_open = false;
        n = 0;
    }
    sbx_exec_pack_stdin(x, x->stdin_buf, (size_t)n);
}

static void sbx_exec_write_out(struct sbx_out *out)
{
    size_t n = byteq_pending(&out->q);
    ssize_t w = write(out->fd, byteq_data(&out->q), n < out->chunk ? n : out->chunk);

    if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
        return;
    }
    if (w <= 0) {
        /* EPIPE and friends: nobody reads this stream any more; keep the task running. */
        out->closed = true;
        byteq_release(&out->q);
        return;
    }
    byteq_consume(&out->q, (size_t)w);
}

static size_t sbx_exec_unwritten(const struct sbx_exec *x)
{
    return x->opts.json ? 0 : byteq_pending(&x->out[0].q) + byteq_pending(&x->out[1].q);
}

enum { PFD_SOCK, PFD_SIG, PFD_STDIN, PFD_OUT, PFD_ERR, PFD_N };

/* Runs the poll loop until the response arrived and its output is written, a signal
 * came, or the connection failed. Returns 0, or an exit status after printing why. */
static int sbx_exec_loop(struct sbx_exec *x)
{
    struct err e = ERR_INIT;

    for (;;) {
        struct pollfd p[PFD_N];
        size_t unwritten = sbx_exec_unwritten(x);
        int r = 0;

        if ((x->done || x->c.eof) && unwritten == 0) {
            break;
        }
        for (int i = 0; i < PFD_N; i++) {
            p[i] = (struct pollfd){.fd = -1};
        }
        if (!x->done) {
            p[PFD_SOCK].fd = x->c.fd;
            p[PFD_SOCK].events =
                (short)((!x->c.eof && unwritten < SBX_OUT_HIGH ? POLLIN : 0) |
                        (byteq_pending(&x->c.out) > 0 && !x->c.write_closed ? POLLOUT : 0));
            if (p[PFD_SOCK].events == 0) {
                p[PFD_SOCK].fd = -1;
            }
        }
        p[PFD_SIG] = (struct pollfd){.fd = x->sigfd, .events = POLLIN};
        if (x->started && x->stdin_open && !x->done && !x->c.write_closed &&
            byteq_pending(&x->c.out) < SBX_SEND_HIGH) {
            p[PFD_STDIN] = (struct pollfd){.fd = STDIN_FILENO, .events = POLLIN};
        }
        for (int i = 0; i < 2; i++) {
            if (!x->opts.json && byteq_pending(&x->out[i].q) > 0) {
                p[PFD_OUT + i] = (struct pollfd){.fd = x->out[i].fd, .events = POLLOUT};
            }
        }
        if (RETRY_EINTR(poll(p, PFD_N, -1)) < 0) {
            sbx_errorf("poll: %s", strerror(errno));
            return EX_OSERR;
        }
        if (p[PFD_SIG].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(x->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                return SBX_EXIT_SIGNAL + (int)si.ssi_signo;
            }
        }
        for (int i = 0; i < 2; i++) {
            if (p[PFD_OUT + i].revents) {
                sbx_exec_write_out(&x->out[i]);
            }
        }
        if (p[PFD_STDIN].revents) {
            sbx_exec_read_stdin(x);
        }
        if (p[PFD_SOCK].revents & (POLLIN | POLLHUP | POLLERR)) {
            r = sbx_conn_recv(&x->c, &e);
        }
        struct proto_msg m;
        while (r >= 0 && !x->done && (r = sbx_conn_next(&x->c, &m, &e)) == 1) {
            sbx_exec_message(x, &m);
        }
        if (r >= 0 && !x->done) {
            r = sbx_conn_send(&x->c, &e);
        }
        if (r < 0) {
            sbx_errorf("%s", err_msg(&e));
            return EX_SOFTWARE;
        }
    }
    if (!x->done) {
        sbx_errorf("sbxd closed the connection before the task finished");
        return EX_UNAVAILABLE;
    }
    return 0;
}

/* Whether a status "error" message says the command itself could not be executed. */
static bool sbx_is_exec_failure(const char *msg)
{
    static const char *const needles[] = {
        "execve",
        "exec format",
        "not found",
        "no such file",
        "permission denied",
        "cannot execute",
        "could not execute",
        "not executable",
        "ENOENT",
        "EACCES",
        "ENOEXEC",
        "ENOTDIR",
        "ELOOP",
    };
    for (size_t i = 0; i < ARRAY_SIZE(needles); i++) {
        if (strcasestr(msg, needles[i])) {
            return true;
        }
    }
    return false;
}

static uint64_t sbx_u64(const msgpack_object *res, const char *key)
{
    uint64_t v = 0;
    (void)proto_get_u64(res, key, &v, NULL);
    return v;
}

/* Maps the result to the exit status, printing what the user needs to know. */
static int sbx_exec_result(struct sbx_exec *x, const msgpack_object *res)
{
    char status[32], msg[SBX_TEXT_MAX];
    bool json = x->opts.json;
    uint64_t v;
    int code;

    if (res->type != MSGPACK_OBJECT_MAP ||
        !sbx_text(proto_map_get(res, "status"), status, sizeof(status))[0]) {
        sbx_errorf("malformed exec result from sbxd: no status");
        return EX_SOFTWARE;
    }
    if (json) {
        const struct byteq *o = &x->out[0].q, *e = &x->out[1].q;
        sbx_json_write_result(stdout, res, byteq_data(o), byteq_pending(o), byteq_data(e),
                              byteq_pending(e), x->dropped);
        if (fflush(stdout) != 0 && errno != EPIPE) {
            sbx_errorf("writing the result: %s", strerror(errno));
        }
    }
    if (strcmp(status, "exited") == 0) {
        if (proto_get_u64(res, "exit_code", &v, NULL) < 0 || v > 255) {
            sbx_errorf("malformed exec result from sbxd: bad exit_code");
            return EX_SOFTWARE;
        }
        code = (int)v;
    } else if (strcmp(status, "signaled") == 0) {
        if (proto_get_u64(res, "signal", &v, NULL) < 0 || v == 0 || v > 127) {
            sbx_errorf("malformed exec result from sbxd: bad signal");
            return EX_SOFTWARE;
        }
        code = SBX_EXIT_SIGNAL + (int)v;
    } else if (strcmp(status, "timeout") == 0) {
        if (!json) {
            sbx_errorf("timed out after %" PRIu64 " ms, sandbox killed", sbx_u64(res, "wall_ms"));
        }
        code = SBX_EXIT_TIMEOUT;
    } else if (strcmp(status, "output_limit") == 0) {
        if (!json) {
            sbx_errorf("output limit reached (%" PRIu64 " bytes), sandbox killed",
                       sbx_u64(res, "stdout_bytes") + sbx_u64(res, "stderr_bytes"));
        }
        code = SBX_EXIT_KILLED;
    } else if (strcmp(status, "token_expired") == 0 || strcmp(status, "token_revoked") == 0) {
        if (!json) {
            sbx_errorf("the task's token %s, sandbox killed",
                       status[6] == 'e' ? "expired" : "was revoked");
        }
        code = EX_NOPERM;
    } else if (strcmp(status, "oom") == 0) {
        if (!json) {
            sbx_errorf("out of memory, sandbox killed");
        }
        code = SBX_EXIT_KILLED;
    } else if (strcmp(status, "error") == 0) {
        if (!sbx_text(proto_map_get(res, "error"), msg, sizeof(msg))[0]) {
            (void)snprintf(msg, sizeof(msg), "the task failed");
        }
        if (!json) {
            sbx_errorf("error: %s", msg);
        }
        /* sbxd says where the task failed; older daemons only say it in words. */
        char stage[16];
        if (sbx_text(proto_map_get(res, "error_stage"), stage, sizeof(stage))[0]) {
            code = strcmp(stage, "exec") == 0 ? SBX_EXIT_NOEXEC : EX_SOFTWARE;
        } else {
            code = sbx_is_exec_failure(msg) ? SBX_EXIT_NOEXEC : EX_SOFTWARE;
        }
    } else {
        sbx_errorf("unknown task status '%s' from sbxd", status);
        code = EX_SOFTWARE;
    }
    return code;
}

/* Blocks SIGINT and SIGTERM and returns a signalfd for them, or -errno. */
static int sbx_signalfd(void)
{
    sigset_t set;
    (void)sigemptyset(&set);
    (void)sigaddset(&set, SIGINT);
    (void)sigaddset(&set, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) {
        return -errno;
    }
    int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    return fd < 0 ? -errno : fd;
}

/* Largest write to fd that should not block for long after POLLOUT: PIPE_BUF fits in a
 * pipe with one free slot; regular files never wait on a reader. */
static size_t sbx_write_chunk(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (1u << 20) : PIPE_BUF;
}

static int sbx_cmd_exec(const struct sbx_ctx *ctx, int argc, char **argv)
{
    scoped(sbx_exec_release) struct sbx_exec x = {.c = {.fd = -1}, .sigfd = -1};
    int status;

    x.stdin_open = true;
    status = sbx_exec_parse(argc, argv, &x.opts);
    if (status == 0 && !x.opts.token) {
        const char *env = getenv("SBX_TOKEN");
        x.opts.token = env && env[0] ? env : NULL;
    }
    if (status != 0) {
        return status < 0 ? 0 : status;
    }
    status = sbx_connect(ctx, &x.c);
    if (status != 0) {
        return status;
    }
    x.sigfd = sbx_signalfd();
    if (x.sigfd < 0) {
        sbx_errorf("signalfd: %s", strerror(-x.sigfd));
        return EX_OSERR;
    }
    for (int i = 0; i < 2; i++) {
        x.out[i].fd = i == 0 ? STDOUT_FILENO : STDERR_FILENO;
        x.out[i].chunk = sbx_write_chunk(x.out[i].fd);
    }
    x.stdin_buf = xmalloc(SBX_STDIN_CHUNK);
    x.msgid = x.c.next_msgid++;
    sbx_exec_pack_request(&x);
    status = sbx_exec_loop(&x);
    /* Closing the connection is what makes sbxd kill the task on a signal; after a result,
     * it frees the daemon's side before a possibly long write of the JSON. */
    sbx_conn_close(&x.c);
    if (status != 0) {
        return status;
    }
    if (x.resp.error->type != MSGPACK_OBJECT_NIL) {
        return sbx_rpc_error(x.resp.error);
    }
    return sbx_exec_result(&x, x.resp.result);
}

/* sbx audit: the chains of the audit trail, newest first (admin socket). */

struct sbx_audit_opts {
    const char *task;
    const char *pool;
    const char *status;
    uint64_t since_ns; /* 0: any */
    uint64_t limit;    /* 0: the daemon's default */
    bool json;
};

static void sbx_audit_pack_args(msgpack_packer *pk, const void *arg)
{
    const struct sbx_audit_opts *o = arg;
    uint32_t n = (o->task != NULL) + (o->pool != NULL) + (o->status != NULL) + (o->since_ns != 0) +
                 (o->limit != 0);
    (void)msgpack_pack_map(pk, n);
    if (o->task) {
        proto_pack_kv_str(pk, "task", o->task);
    }
    if (o->pool) {
        proto_pack_kv_str(pk, "pool", o->pool);
    }
    if (o->status) {
        proto_pack_kv_str(pk, "status", o->status);
    }
    if (o->since_ns) {
        proto_pack_kv_f64(pk, "since", (double)o->since_ns / 1e9);
    }
    if (o->limit) {
        proto_pack_kv_u64(pk, "limit", o->limit);
    }
}

/* DURATION for --since: what parse_duration_ns takes, and also days ("7d"). */
static int sbx_audit_duration(const char *s, uint64_t *ret)
{
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == 'd') {
        char buf[32];
        uint64_t days;
        if (n >= sizeof(buf)) {
            return -EINVAL;
        }
        memcpy(buf, s, n - 1);
        buf[n - 1] = '\0';
        if (parse_u64(buf, &days) < 0 || days == 0 || days > 36500) {
            return -EINVAL;
        }
        *ret = days * 86400ULL * 1000000000ULL;
        return 0;
    }
    int r = parse_duration_ns(s, ret);
    return r < 0 || *ret == 0 ? -EINVAL : 0;
}

/* ISO 8601 UTC time with milliseconds. */
static const char *sbx_audit_time(int64_t ns, char *buf, size_t size)
{
    time_t secs = (time_t)(ns / 1000000000LL);
    struct tm tm;
    if (ns < 0 || !gmtime_r(&secs, &tm)) {
        (void)snprintf(buf, size, "?");
        return buf;
    }
    size_t w = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    (void)snprintf(buf + w, size - w, ".%03dZ", (int)((ns / 1000000) % 1000));
    return buf;
}

static int64_t sbx_obj_i64(const msgpack_object *o)
{
    if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        return o->via.u64 > INT64_MAX ? INT64_MAX : (int64_t)o->via.u64;
    }
    if (o && o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        return o->via.i64;
    }
    return 0;
}

/* The fields map of the chain's first event of that type, or NULL. */
static const msgpack_object *sbx_audit_fields(const msgpack_object *events, const char *type)
{
    for (uint32_t i = 0; events && i < events->via.array.size; i++) {
        const msgpack_object *ev = &events->via.array.ptr[i];
        const msgpack_object *t = proto_map_get(ev, "type");
        if (t && t->type == MSGPACK_OBJECT_STR &&
            proto_str_eq(t->via.str.ptr, t->via.str.size, type)) {
            return proto_map_get(ev, "fields");
        }
    }
    return NULL;
}

/* One JSON line per chain: task, pool, status and its events. */
static void sbx_audit_json(const msgpack_object *task, const msgpack_object *events)
{
    const msgpack_object *req = sbx_audit_fields(events, "task.request");
    const msgpack_object *res = sbx_audit_fields(events, "task.result");
    char tbuf[48];
    (void)fputs("{\"task\":", stdout);
    sbx_json_write_obj(stdout, task);
    (void)fputs(",\"pool\":", stdout);
    sbx_json_write_obj(stdout, req ? proto_map_get(req, "pool") : NULL);
    (void)fputs(",\"status\":", stdout);
    sbx_json_write_obj(stdout, res ? proto_map_get(res, "status") : NULL);
    (void)fputs(",\"events\":[", stdout);
    for (uint32_t i = 0; events && i < events->via.array.size; i++) {
        const msgpack_object *ev = &events->via.array.ptr[i];
        (void)fputs(i ? ",{\"seq\":" : "{\"seq\":", stdout);
        sbx_json_write_obj(stdout, proto_map_get(ev, "seq"));
        (void)fputs(",\"time\":", stdout);
        const char *when =
            sbx_audit_time(sbx_obj_i64(proto_map_get(ev, "time_ns")), tbuf, sizeof(tbuf));
        sbx_json_write_str(stdout, when, strlen(when));
        (void)fputs(",\"time_ns\":", stdout);
        sbx_json_write_obj(stdout, proto_map_get(ev, "time_ns"));
        (void)fputs(",\"type\":", stdout);
        sbx_json_write_obj(stdout, proto_map_get(ev, "type"));
        (void)fputs(",\"fields\":", stdout);
        sbx_json_write_obj(stdout, proto_map_get(ev, "fields"));
        (void)fputc('}', stdout);
    }
    (void)fputs("]}\n", stdout);
}

/* argv joined by spaces, sanitized and cut to fit buf. */
static const char *sbx_audit_argv(const msgpack_object *req, char *buf, size_t size)
{
    const msgpack_object *av = req ? proto_map_get(req, "argv") : NULL;
    size_t off = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; av && av->type == MSGPACK_OBJECT_ARRAY && i < av->via.array.size; i++) {
        char one[SBX_TEXT_MAX];
        sbx_text(&av->via.array.ptr[i], one, sizeof(one));
        int n = snprintf(buf + off, size - off, "%s%s", i ? " " : "", one);
        if (n < 0 || (size_t)n >= size - off) {
            break;
        }
        off += (size_t)n;
    }
    return buf;
}

static void sbx_audit_row(const msgpack_object *task, const msgpack_object *events, bool detail)
{
    const msgpack_object *req = sbx_audit_fields(events, "task.request");
    const msgpack_object *res = sbx_audit_fields(events, "task.result");
    const msgpack_object *fin = sbx_audit_fields(events, "task.finished");
    const msgpack_object *first =
        events && events->via.array.size ? &events->via.array.ptr[0] : NULL;
    char tbuf[48], id[64], pool[64], status[64], code[32], argv[160];
    const msgpack_object *ec = res ? proto_map_get(res, "exit_code") : NULL;
    if (ec && (ec->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
               ec->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)) {
        (void)snprintf(code, sizeof(code), "%" PRId64, sbx_obj_i64(ec));
    } else {
        (void)snprintf(code, sizeof(code), "-");
    }
    sbx_text(res ? proto_map_get(res, "status") : NULL, status, sizeof(status));
    sbx_text(req ? proto_map_get(req, "pool") : NULL, pool, sizeof(pool));
    (void)printf("%-24s %-16s %-12s %-13s %5s %8" PRId64 " %2u  %s\n",
                 sbx_audit_time(sbx_obj_i64(first ? proto_map_get(first, "time_ns") : NULL), tbuf,
                                sizeof(tbuf)),
                 sbx_text(task, id, sizeof(id)), pool[0] ? pool : "-",
                 status[0] ? status : "(open)", code,
                 sbx_obj_i64(fin ? proto_map_get(fin, "wall_ms") : NULL),
                 events ? events->via.array.size : 0, sbx_audit_argv(req, argv, sizeof(argv)));
    for (uint32_t i = 0; detail && events && i < events->via.array.size; i++) {
        const msgpack_object *ev = &events->via.array.ptr[i];
        char type[40];
        (void)printf("    %8" PRId64 "  %s  %-18s ", sbx_obj_i64(proto_map_get(ev, "seq")),
                     sbx_audit_time(sbx_obj_i64(proto_map_get(ev, "time_ns")), tbuf, sizeof(tbuf)),
                     sbx_text(proto_map_get(ev, "type"), type, sizeof(type)));
        sbx_json_write_obj(stdout, proto_map_get(ev, "fields"));
        (void)fputc('\n', stdout);
    }
}

static int sbx_audit_verify(const struct sbx_ctx *ctx, int argc, char **argv)
{
    const struct sbx_cmd *cmd = sbx_cmd_find("audit");
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else {
            return sbx_usage_error(cmd, "audit verify: unexpected argument '%s'", argv[i]);
        }
    }
    int status = sbx_request(ctx, &c, "audit.verify", NULL, NULL, &m);
    if (status != 0) {
        return status;
    }
    bool ok = false;
    char msg[SBX_TEXT_MAX], hash[80];
    uint64_t rows = 0, head = 0;
    (void)proto_get_bool(m.result, "ok", &ok, NULL);
    (void)proto_get_u64(m.result, "rows", &rows, NULL);
    (void)proto_get_u64(m.result, "head_seq", &head, NULL);
    if (json) {
        sbx_json_write_obj(stdout, m.result);
        (void)fputc('\n', stdout);
    } else if (ok) {
        (void)printf("ok: %" PRIu64 " rows verified, chain head seq %" PRIu64 " hash %s\n", rows,
                     head, sbx_text(proto_map_get(m.result, "head_hash"), hash, sizeof(hash)));
    } else {
        uint64_t bad = 0;
        char problem[32];
        (void)proto_get_u64(m.result, "bad_seq", &bad, NULL);
        (void)printf("FAILED: row seq %" PRIu64 " %s: %s\n", bad,
                     sbx_text(proto_map_get(m.result, "problem"), problem, sizeof(problem)),
                     sbx_text(proto_map_get(m.result, "message"), msg, sizeof(msg)));
    }
    return ok ? 0 : 1;
}

static int sbx_cmd_audit(const struct sbx_ctx *ctx, int argc, char **argv)
{
    const struct sbx_cmd *cmd = sbx_cmd_find(argv[0]);
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    struct sbx_audit_opts o = {0};
    if (argc > 1 && strcmp(argv[1], "verify") == 0) {
        return sbx_audit_verify(ctx, argc - 1, argv + 1);
    }
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            sbx_usage(stdout, cmd);
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0) {
            o.json = true;
        } else if ((r = parse_long_opt(argc, argv, &i, "--task", &v)) != 0) {
            if (r < 0 || !v[0]) {
                return sbx_usage_error(cmd, "audit: --task needs a task id");
            }
            o.task = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--pool", &v)) != 0) {
            if (r < 0 || !v[0]) {
                return sbx_usage_error(cmd, "audit: --pool needs a pool name");
            }
            o.pool = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--status", &v)) != 0) {
            if (r < 0 || !v[0]) {
                return sbx_usage_error(cmd, "audit: --status needs a status");
            }
            o.status = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--since", &v)) != 0) {
            if (r < 0 || sbx_audit_duration(v, &o.since_ns) < 0) {
                return sbx_usage_error(cmd, "audit: --since needs a duration (30s, 15m, 2h, 7d)");
            }
        } else if ((r = parse_long_opt(argc, argv, &i, "--limit", &v)) != 0) {
            if (r < 0 || parse_u64(v, &o.limit) < 0 || o.limit == 0 || o.limit > 1000) {
                return sbx_usage_error(cmd, "audit: --limit needs a number from 1 to 1000");
            }
        } else {
            return sbx_usage_error(cmd, "audit: unknown argument '%s'", argv[i]);
        }
    }
    int status = sbx_request(ctx, &c, "audit.query", sbx_audit_pack_args, &o, &m);
    if (status != 0) {
        return status;
    }
    const msgpack_object *chains = proto_map_get(m.result, "chains");
    bool more = false;
    (void)proto_get_bool(m.result, "more", &more, NULL);
    if (!chains || chains->type != MSGPACK_OBJECT_ARRAY) {
        sbx_errorf("malformed audit.query result from sbxd");
        return EX_SOFTWARE;
    }
    if (!o.json) {
        (void)printf("%-24s %-16s %-12s %-13s %5s %8s %2s  %s\n", "TIME", "TASK", "POOL", "STATUS",
                     "EXIT", "WALL_MS", "EV", "ARGV");
    }
    for (uint32_t i = 0; i < chains->via.array.size; i++) {
        const msgpack_object *ch = &chains->via.array.ptr[i];
        const msgpack_object *events = proto_map_get(ch, "events");
        if (events && events->type != MSGPACK_OBJECT_ARRAY) {
            events = NULL;
        }
        if (o.json) {
            sbx_audit_json(proto_map_get(ch, "task"), events);
        } else {
            sbx_audit_row(proto_map_get(ch, "task"), events, o.task != NULL);
        }
    }
    if (more) {
        sbx_errorf("more chains match: narrow with --since, --pool, --status or raise --limit");
    }
    if (fflush(stdout) != 0 && errno != EPIPE) {
        sbx_errorf("writing: %s", strerror(errno));
        return EX_IOERR;
    }
    if (o.task && chains->via.array.size == 0) {
        sbx_errorf("no audit events for task '%s'", o.task);
        return 1;
    }
    return 0;
}

/* token: capability tokens on the admin socket. The token string is printed once, by
 * issue; nothing else here ever shows one. */

#define SBX_TOKEN_MOUNTS_MAX 8
#define SBX_TOKEN_POOLS_MAX 16

struct sbx_token_issue {
    char *src[SBX_TOKEN_MOUNTS_MAX]; /* absolute */
    const char *dst[SBX_TOKEN_MOUNTS_MAX];
    size_t n_mounts;
    const char *pools[SBX_TOKEN_POOLS_MAX];
    size_t n_pools;
    const char *net;
    uint64_t ttl_ns; /* 0: the daemon's default */
    bool has_uses;
    uint64_t uses;
};

static void sbx_token_issue_release(struct sbx_token_issue *ti)
{
    for (size_t i = 0; i < ti->n_mounts; i++) {
        free(take_ptr(&ti->src[i]));
    }
}

static void sbx_token_issue_pack(msgpack_packer *pk, const void *arg)
{
    const struct sbx_token_issue *ti = arg;
    uint32_t n = (ti->n_mounts > 0) + (ti->n_pools > 0) + (ti->net != NULL) + (ti->ttl_ns > 0) +
                 ti->has_uses;
    (void)msgpack_pack_map(pk, n);
    if (ti->n_mounts > 0) {
        proto_pack_cstr(pk, "mounts");
        (void)msgpack_pack_array(pk, (uint32_t)ti->n_mounts);
        for (size_t i = 0; i < ti->n_mounts; i++) {
            (void)msgpack_pack_map(pk, 2);
            proto_pack_kv_str(pk, "src", ti->src[i]);
            proto_pack_kv_str(pk, "dst", ti->dst[i]);
        }
    }
    if (ti->n_pools > 0) {
        proto_pack_cstr(pk, "pools");
        (void)msgpack_pack_array(pk, (uint32_t)ti->n_pools);
        for (size_t i = 0; i < ti->n_pools; i++) {
            proto_pack_cstr(pk, ti->pools[i]);
        }
    }
    if (ti->net) {
        proto_pack_kv_str(pk, "net", ti->net);
    }
    if (ti->ttl_ns > 0 && ti->ttl_ns % 1000000000u == 0) {
        proto_pack_kv_u64(pk, "ttl", ti->ttl_ns / 1000000000u);
    } else if (ti->ttl_ns > 0) {
        proto_pack_kv_f64(pk, "ttl", (double)ti->ttl_ns / 1e9);
    }
    if (ti->has_uses) {
        proto_pack_kv_u64(pk, "uses", ti->uses);
    }
}

/* Splits "SRC:DST" at the last ':' followed by '/', making SRC absolute. */
static int sbx_token_mount(const char *spec, char **ret_src, const char **ret_dst)
{
    const char *sep = NULL;
    for (const char *p = strchr(spec, ':'); p; p = strchr(p + 1, ':')) {
        if (p[1] == '/') {
            sep = p;
        }
    }
    if (!sep || sep == spec) {
        return -EINVAL;
    }
    if (spec[0] == '/') {
        *ret_src = xstrndup(spec, (size_t)(sep - spec));
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd))) {
            return -errno;
        }
        *ret_src = xasprintf("%s/%.*s", cwd, (int)(sep - spec), spec);
    }
    *ret_dst = sep + 1;
    return 0;
}

static int sbx_token_issue_parse(int argc, char **argv, struct sbx_token_issue *ti)
{
    const struct sbx_cmd *cmd = sbx_cmd_find("token");
    for (int i = 2; i < argc; i++) {
        const char *v = NULL;
        int r;
        if ((r = parse_long_opt(argc, argv, &i, "--mount", &v)) != 0) {
            if (r < 0 || ti->n_mounts >= SBX_TOKEN_MOUNTS_MAX ||
                sbx_token_mount(v, &ti->src[ti->n_mounts], &ti->dst[ti->n_mounts]) < 0) {
                return sbx_usage_error(cmd,
                                       "token issue: --mount needs SRC:DST with an absolute "
                                       "DST (at most %d)",
                                       SBX_TOKEN_MOUNTS_MAX);
            }
            ti->n_mounts++;
        } else if ((r = parse_long_opt(argc, argv, &i, "--pool", &v)) != 0) {
            if (r < 0 || v[0] == '\0' || ti->n_pools >= SBX_TOKEN_POOLS_MAX) {
                return sbx_usage_error(cmd, "token issue: --pool needs a pool name (at most %d)",
                                       SBX_TOKEN_POOLS_MAX);
            }
            ti->pools[ti->n_pools++] = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--net", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(cmd, "token issue: --net needs none or a profile name");
            }
            ti->net = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--ttl", &v)) != 0) {
            if (r < 0 || parse_duration_ns(v, &ti->ttl_ns) < 0 || ti->ttl_ns == 0) {
                return sbx_usage_error(cmd,
                                       "token issue: --ttl needs a positive number of seconds");
            }
        } else if ((r = parse_long_opt(argc, argv, &i, "--uses", &v)) != 0) {
            if (r < 0 || parse_u64(v, &ti->uses) < 0 || ti->uses > UINT32_MAX) {
                return sbx_usage_error(cmd, "token issue: --uses needs a whole number");
            }
            ti->has_uses = true;
        } else {
            return sbx_usage_error(cmd, "token issue: unknown option '%s'", argv[i]);
        }
    }
    return 0;
}

/* "2025-01-31T12:00:00Z" from Unix milliseconds. */
static const char *sbx_utc(uint64_t ms, char *buf, size_t size)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        (void)snprintf(buf, size, "?");
    }
    return buf;
}

static int sbx_token_issue(const struct sbx_ctx *ctx, int argc, char **argv)
{
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(sbx_token_issue_release) struct sbx_token_issue ti;
    scoped(proto_msg_done) struct proto_msg m = {0};
    char id[64], when[32];
    uint64_t expires = 0;

    memset(&ti, 0, sizeof(ti));
    int status = sbx_token_issue_parse(argc, argv, &ti);
    if (status != 0) {
        return status;
    }
    status = sbx_request(ctx, &c, "token.issue", sbx_token_issue_pack, &ti, &m);
    if (status != 0) {
        return status;
    }
    const msgpack_object *tok = proto_map_get(m.result, "token");
    const msgpack_object *info = proto_map_get(m.result, "info");
    /* Printed as is only when it looks like a token: no terminal control can pass. */
    bool ok = tok && tok->type == MSGPACK_OBJECT_STR && tok->via.str.size > 4 &&
              tok->via.str.size < 128 && memcmp(tok->via.str.ptr, "sbx_", 4) == 0;
    for (uint32_t i = 0; ok && i < tok->via.str.size; i++) {
        char ch = tok->via.str.ptr[i];
        ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
             ch == '_' || ch == '-';
    }
    if (!ok) {
        sbx_errorf("malformed answer to token.issue");
        return EX_SOFTWARE;
    }
    (void)fwrite(tok->via.str.ptr, 1, tok->via.str.size, stdout);
    (void)fputc('\n', stdout);
    (void)proto_get_u64(info, "expires_at_ms", &expires, NULL);
    sbx_errorf("token %s expires %s", sbx_text(proto_map_get(info, "id"), id, sizeof(id)),
               sbx_utc(expires, when, sizeof(when)));
    return fflush(stdout) == 0 ? 0 : EX_IOERR;
}

static void sbx_token_revoke_pack(msgpack_packer *pk, const void *arg)
{
    const char *which = arg;
    (void)msgpack_pack_map(pk, 1);
    /* A token string is sent as such (sbxd hashes it); anything else is an id. */
    proto_pack_kv_str(pk, strncmp(which, "sbx_", 4) == 0 ? "token" : "id", which);
}

static int sbx_token_revoke(const struct sbx_ctx *ctx, int argc, char **argv)
{
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    char id[64];
    uint64_t killed = 0;
    if (argc != 3 || argv[2][0] == '\0') {
        return sbx_usage_error(sbx_cmd_find("token"), "token revoke: needs one TOKEN or ID");
    }
    int status = sbx_request(ctx, &c, "token.revoke", sbx_token_revoke_pack, argv[2], &m);
    if (status != 0) {
        return status;
    }
    (void)proto_get_u64(m.result, "killed", &killed, NULL);
    (void)printf("revoked %s (%" PRIu64 " running task%s killed)\n",
                 sbx_text(proto_map_get(m.result, "id"), id, sizeof(id)), killed,
                 killed == 1 ? "" : "s");
    return 0;
}

enum {
    SBX_TOK_ID,
    SBX_TOK_STATE,
    SBX_TOK_EXPIRES,
    SBX_TOK_USES,
    SBX_TOK_RUNNING,
    SBX_TOK_NET,
    SBX_TOK_POOLS,
    SBX_TOK_MOUNTS,
    SBX_TOK_NCOLS
};

static const char *const sbx_token_titles[SBX_TOK_NCOLS] = {
    "ID", "STATE", "EXPIRES", "USES", "RUNNING", "NET", "POOLS", "MOUNTS"};

/* Appends sanitized daemon text to buf at *off (cut to fit). */
static void sbx_append(char *buf, size_t size, size_t *off, const msgpack_object *o)
{
    if (*off + 1 < size) {
        (void)sbx_text(o, buf + *off, size - *off);
        *off += strlen(buf + *off);
    }
}

static void sbx_append_str(char *buf, size_t size, size_t *off, const char *s)
{
    int n = snprintf(buf + *off, size - *off, "%s", s);
    *off = n < 0 ? *off : (*off + (size_t)n < size ? *off + (size_t)n : size - 1);
}

/* One cell of the token table into buf; returns its width. */
static size_t sbx_token_cell(const msgpack_object *row, int col, char *buf, size_t size)
{
    uint64_t v = 0, left = 0;
    size_t off = 0;
    buf[0] = '\0';
    switch (col) {
    case SBX_TOK_ID:
        return sbx_cell(proto_map_get(row, "id"), buf, size);
    case SBX_TOK_STATE:
        return sbx_cell(proto_map_get(row, "state"), buf, size);
    case SBX_TOK_EXPIRES:
        (void)proto_get_u64(row, "expires_at_ms", &v, NULL);
        return strlen(sbx_utc(v, buf, size));
    case SBX_TOK_USES:
        if (proto_get_u64(row, "uses", &v, NULL) < 0) {
            return (size_t)snprintf(buf, size, "unlimited");
        }
        (void)proto_get_u64(row, "uses_left", &left, NULL);
        return (size_t)snprintf(buf, size, "%" PRIu64 "/%" PRIu64 " left", left, v);
    case SBX_TOK_RUNNING:
        return sbx_cell(proto_map_get(row, "running"), buf, size);
    case SBX_TOK_NET:
        return sbx_cell(proto_map_get(row, "net"), buf, size);
    case SBX_TOK_POOLS:
    case SBX_TOK_MOUNTS: {
        const msgpack_object *a = proto_map_get(row, col == SBX_TOK_POOLS ? "pools" : "mounts");
        if (!a || a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size == 0) {
            return (size_t)snprintf(buf, size, col == SBX_TOK_POOLS ? "any" : "-");
        }
        for (uint32_t i = 0; i < a->via.array.size; i++) {
            const msgpack_object *x = &a->via.array.ptr[i];
            sbx_append_str(buf, size, &off, i ? "," : "");
            if (col == SBX_TOK_POOLS) {
                sbx_append(buf, size, &off, x);
            } else {
                sbx_append(buf, size, &off, proto_map_get(x, "src"));
                sbx_append_str(buf, size, &off, ":");
                sbx_append(buf, size, &off, proto_map_get(x, "dst"));
            }
        }
        return strlen(buf);
    }
    default:
        return 0;
    }
}

static int sbx_token_list(const struct sbx_ctx *ctx, int argc, char **argv)
{
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    size_t widths[SBX_TOK_NCOLS];
    char cell[SBX_TEXT_MAX];
    if (argc != 2) {
        return sbx_usage_error(sbx_cmd_find("token"), "token list: unexpected argument '%s'",
                               argv[2]);
    }
    int status = sbx_request(ctx, &c, "token.list", NULL, NULL, &m);
    if (status != 0) {
        return status;
    }
    if (m.result->type != MSGPACK_OBJECT_ARRAY) {
        sbx_errorf("unexpected answer to token.list: not an array");
        return EX_SOFTWARE;
    }
    const msgpack_object_array *rows = &m.result->via.array;
    for (int j = 0; j < SBX_TOK_NCOLS; j++) {
        widths[j] = strlen(sbx_token_titles[j]);
        for (uint32_t i = 0; i < rows->size; i++) {
            size_t w = sbx_token_cell(&rows->ptr[i], j, cell, sizeof(cell));
            widths[j] = w > widths[j] ? w : widths[j];
        }
    }
    for (int j = 0; j < SBX_TOK_NCOLS; j++) {
        sbx_print_cell(sbx_token_titles[j], strlen(sbx_token_titles[j]), widths[j],
                       j == SBX_TOK_RUNNING, j + 1 == SBX_TOK_NCOLS);
    }
    for (uint32_t i = 0; i < rows->size; i++) {
        for (int j = 0; j < SBX_TOK_NCOLS; j++) {
            size_t w = sbx_token_cell(&rows->ptr[i], j, cell, sizeof(cell));
            sbx_print_cell(cell, w, widths[j], j == SBX_TOK_RUNNING, j + 1 == SBX_TOK_NCOLS);
        }
    }
    return 0;
}

static int sbx_cmd_token(const struct sbx_ctx *ctx, int argc, char **argv)
{
    const struct sbx_cmd *cmd = sbx_cmd_find("token");
    if (argc < 2) {
        return sbx_usage_error(cmd, "token: issue, revoke or list?");
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        sbx_usage(stdout, cmd);
        return 0;
    }
    int (*run)(const struct sbx_ctx *, int, char **) = NULL;
    if (strcmp(argv[1], "issue") == 0) {
        run = sbx_token_issue;
    } else if (strcmp(argv[1], "revoke") == 0) {
        run = sbx_token_revoke;
    } else if (strcmp(argv[1], "list") == 0) {
        run = sbx_token_list;
    } else {
        return sbx_usage_error(cmd, "token: unknown subcommand '%s'", argv[1]);
    }
    return run(ctx, argc, argv);
}

/* Makes sure fds 0-2 are open, so the socket can never become "stdout". */
static void sbx_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int n = open("/dev/null", O_RDWR | O_CLOEXEC);
            if (n < 0) {
                _exit(EX_OSERR);
            }
            if (n != fd) {
                /* Lower fds were open, so open() returned a higher one: impossible. */
                (void)close(n);
            }
        }
    }
}

int main(int argc, char **argv)
{
    struct sbx_ctx ctx = {
        .socket_path = getenv("SBX_SOCKET"),
        .admin_socket_path = getenv("SBX_ADMIN_SOCKET"),
    };
    const struct sbx_cmd *cmd;
    int i = 1;

    sbx_std_fds();
    (void)signal(SIGPIPE, SIG_IGN);
    if (!ctx.socket_path || !ctx.socket_path[0]) {
        ctx.socket_path = SBX_DEFAULT_SOCKET;
    }
    if (!ctx.admin_socket_path || !ctx.admin_socket_path[0]) {
        ctx.admin_socket_path = SBX_DEFAULT_ADMIN_SOCKET;
    }
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *v = NULL;
        int r;

        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            sbx_usage(stdout, NULL);
            return 0;
        }
        if ((r = parse_long_opt(argc, argv, &i, "--socket", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(NULL, "--socket needs a path");
            }
            ctx.socket_path = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--admin-socket", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(NULL, "--admin-socket needs a path");
            }
            ctx.admin_socket_path = v;
        } else {
            return sbx_usage_error(NULL, "unknown option '%s'", argv[i]);
        }
    }
    if (i >= argc) {
        return sbx_usage_error(NULL, "missing command");
    }
    if (strcmp(argv[i], "help") == 0) {
        sbx_usage(stdout, i + 1 < argc ? sbx_cmd_find(argv[i + 1]) : NULL);
        return 0;
    }
    cmd = sbx_cmd_find(argv[i]);
    if (!cmd) {
        return sbx_usage_error(NULL, "unknown command '%s'", argv[i]);
    }
    ctx.path = cmd->socket == SBX_SOCKET_ADMIN ? ctx.admin_socket_path : ctx.socket_path;
    return cmd->run(&ctx, argc - i, argv + i);
}
