/* SPDX-License-Identifier: MIT */
/* sbx exec: one task, its files and stdio streamed through a poll loop, its result mapped to
 * a status and its collected files written out. Our stdin and the streamed --file bytes flow
 * only while the send queue is below SBX_SEND_HIGH, the socket is read only while our
 * unwritten output is below SBX_OUT_HIGH, and --json keeps at most SBX_JSON_CAP.
 * Output that cannot be written cancels the task: its reader is gone (then sbx ends by
 * SIGPIPE, as any writer in a pipeline) or its file failed (then sbx fails, 125). */
#include "cli/cli_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>

#include "lib/alloc.h"
#include "cli/sbx_json.h"
#include "lib/util.h"

#define SBX_STDIN_CHUNK (64u << 10) /* largest exec.stdin payload */
#define SBX_SEND_HIGH (256u << 10)  /* unsent bytes above which stdin is not read */
#define SBX_OUT_HIGH (1u << 20)     /* unwritten output above which the socket is not read */
#define SBX_JSON_CAP (64u << 20)    /* --json: stdout + stderr bytes kept */

/* sbx_exec_loop's answer when an output's reader went away: end by SIGPIPE. */
#define SBX_EXEC_SIGPIPE (-EPIPE)

struct sbx_env {
    const char *kv; /* "K=V" from argv */
    size_t key_len;
    size_t index; /* position on the command line: the last one of a key wins */
};

struct sbx_exec_opts {
    const char *pool;
    const char *cwd;
    const char *token;   /* never printed */
    const char *session; /* run in this open session */
    uint64_t timeout_ns; /* 0: the daemon's default */
    struct sbx_env *env;
    size_t n_env;
    struct sbx_files files;
    const char **collect; /* patterns, from argv */
    size_t n_collect;
    const char *out_dir; /* where collected files go (NULL: the current directory) */
    bool capture;
    bool json;
    char **argv;
    int argc;
};

/* One of our output streams: where a task stream goes, queued until it is writable. */
struct sbx_out {
    int fd;
    struct byteq q;
    size_t chunk; /* largest write that cannot block for long once poll says POLLOUT */
    int err;      /* errno of the write that failed (EPIPE: the reader is gone), or 0 */
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
    int out_dirfd; /* --out's directory, with --collect */
    struct sbx_collect collected;
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
    free(take_ptr(&x->opts.collect));
    sbx_files_release(&x->opts.files);
    sbx_collect_release(&x->collected);
    x->out_dirfd = fd_close(x->out_dirfd);
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
    o->collect = xcalloc((size_t)argc, sizeof(*o->collect));
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
        if (strcmp(a, "--capture") == 0) {
            o->capture = true;
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
        } else if ((r = parse_long_opt(argc, argv, &i, "--session", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(cmd, "exec: --session needs a session id");
            }
            o->session = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--file", &v)) != 0) {
            struct err e = ERR_INIT;
            if (r < 0) {
                return sbx_usage_error(cmd, "exec: --file needs LOCAL[:PATH]");
            }
            if (sbx_files_add(&o->files, v, &e) < 0) {
                return sbx_usage_error(cmd, "exec: %s", err_msg(&e));
            }
        } else if ((r = parse_long_opt(argc, argv, &i, "--collect", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(cmd, "exec: --collect needs a path or pattern");
            }
            o->collect[o->n_collect++] = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--out", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(cmd, "exec: --out needs a directory");
            }
            o->out_dir = v;
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
    if (o->out_dir && o->n_collect == 0) {
        return sbx_usage_error(cmd, "exec: --out is where --collect writes: give --collect");
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
                 (o->token != NULL) + (o->session != NULL) + (o->files.n > 0) + (o->n_collect > 0) +
                 o->capture;

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
    if (o->session) {
        proto_pack_kv_str(pk, "session", o->session);
    }
    if (o->n_collect > 0) {
        proto_pack_cstr(pk, "collect");
        (void)msgpack_pack_array(pk, (uint32_t)o->n_collect);
        for (size_t i = 0; i < o->n_collect; i++) {
            proto_pack_cstr(pk, o->collect[i]);
        }
    }
    if (o->capture) {
        proto_pack_kv_bool(pk, "capture", true);
    }
    proto_pack_kv_bool(pk, "stdin", true);
    if (o->files.n > 0) {
        sbx_files_pack(pk, &o->files);
    }
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
    } else if (out->err == 0) {
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
        if (x->opts.capture && m->error->type == MSGPACK_OBJECT_NIL) {
            /* The output came in the result: it goes where notifications' output goes. */
            const char *data;
            uint32_t len;
            for (int i = 0; i < 2; i++) {
                if (proto_obj_bytes(proto_map_get(m->result, i == 0 ? "stdout" : "stderr"), &data,
                                    &len)) {
                    sbx_exec_output(x, i, data, len);
                }
            }
        }
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
        /* The output is lost from here on: sbx_exec_loop stops the task. */
        out->err = w < 0 ? errno : EIO;
        byteq_release(&out->q);
        return;
    }
    byteq_consume(&out->q, (size_t)w);
}

/* After a failed write of out (stream 0 or 1): SBX_EXEC_SIGPIPE for a reader that went
 * away, else the failure reported. */
static int sbx_exec_write_failed(const struct sbx_out *out, int which)
{
    if (out->err == EPIPE) {
        return SBX_EXEC_SIGPIPE;
    }
    return sbx_fail(false, SBX_ERR_SYSTEM, "writing the task's %s: %s; the task is cancelled",
                    which == 0 ? "stdout" : "stderr", strerror(out->err));
}

static size_t sbx_exec_unwritten(const struct sbx_exec *x)
{
    return x->opts.json ? 0 : byteq_pending(&x->out[0].q) + byteq_pending(&x->out[1].q);
}

enum { PFD_SOCK, PFD_SIG, PFD_STDIN, PFD_OUT, PFD_ERR, PFD_N };

/* Runs the poll loop until the response arrived and its output is written, a signal
 * came, an output failed or the connection failed. Returns 0, SBX_EXEC_SIGPIPE, or an exit
 * status after printing why. */
static int sbx_exec_loop(struct sbx_exec *x)
{
    struct err e = ERR_INIT;
    bool json = x->opts.json;

    for (;;) {
        struct pollfd p[PFD_N];
        size_t unwritten;
        int r = 0;

        /* Streamed files go first and need no exec.started: sbxd holds the command until
         * their last byte has come. */
        while (!x->done && !x->c.write_closed && sbx_files_pending(&x->opts.files) &&
               byteq_pending(&x->c.out) < SBX_SEND_HIGH) {
            if (sbx_files_pack_chunk(&x->opts.files, &x->c.pk, x->msgid, &e) < 0) {
                return sbx_fail(json, SBX_ERR_SYSTEM, "%s; the task is cancelled", err_msg(&e));
            }
        }
        unwritten = sbx_exec_unwritten(x);
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
            return sbx_fail(json, SBX_ERR_SYSTEM, "poll: %s", strerror(errno));
        }
        if (p[PFD_SIG].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(x->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (json) {
                    sbx_report(json, SBX_ERR_INTERRUPTED, "%s: the task is cancelled",
                               strsignal((int)si.ssi_signo));
                }
                return SBX_EXIT_SIGNAL + (int)si.ssi_signo;
            }
        }
        for (int i = 0; i < 2; i++) {
            if (p[PFD_OUT + i].revents) {
                sbx_exec_write_out(&x->out[i]);
            }
            if (x->out[i].err != 0) {
                return sbx_exec_write_failed(&x->out[i], i);
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
            return sbx_fail(json, SBX_ERR_PROTOCOL, "%s", err_msg(&e));
        }
    }
    if (!x->done) {
        return sbx_fail(json, SBX_ERR_DISCONNECTED,
                        "sbxd closed the connection before the task finished");
    }
    return 0;
}

/* The status of a task whose command never ran (status "error"). With error_stage
 * "exec", error_errno names execve's failure (docs/PROTOCOL.md): ENOENT is a command not
 * found (127); anything else (EACCES, ENOEXEC, ...) a command found that could not be
 * executed (126), as env(1) and the shells tell them apart. A failure at any other stage is
 * sbx's (125). */
static int sbx_exec_error_status(const msgpack_object *res)
{
    char stage[16], name[32];
    if (strcmp(sbx_text(proto_map_get(res, "error_stage"), stage, sizeof(stage)), "exec") != 0) {
        return SBX_EXIT_FAIL;
    }
    return strcmp(sbx_text(proto_map_get(res, "error_errno"), name, sizeof(name)), "ENOENT") == 0
               ? SBX_EXIT_NOT_FOUND
               : SBX_EXIT_CANNOT_RUN;
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
        return sbx_fail(json, SBX_ERR_PROTOCOL, "malformed exec result from sbxd: no status");
    }
    if (strcmp(status, "exited") == 0 &&
        (proto_get_u64(res, "exit_code", &v, NULL) < 0 || v > 255)) {
        return sbx_fail(json, SBX_ERR_PROTOCOL, "malformed exec result from sbxd: bad exit_code");
    }
    if (strcmp(status, "signaled") == 0 &&
        (proto_get_u64(res, "signal", &v, NULL) < 0 || v == 0 || v > 127)) {
        return sbx_fail(json, SBX_ERR_PROTOCOL, "malformed exec result from sbxd: bad signal");
    }
    bool unwritten =
        x->opts.n_collect > 0 && sbx_collect_write(res, x->out_dirfd, json, &x->collected) < 0;
    if (json) {
        /* Write errors show at the close of stdout (sbx.c). */
        const struct byteq *o = &x->out[0].q, *e = &x->out[1].q;
        struct sbx_json_output jo = {
            .out = byteq_data(o),
            .out_len = byteq_pending(o),
            .err = byteq_data(e),
            .err_len = byteq_pending(e),
            .dropped = x->dropped,
            .file_errors = x->collected.errors,
            .n_file_errors = x->collected.n_errors,
        };
        sbx_json_print(stdout, sbx_json_result(res, &jo));
    }
    if (strcmp(status, "exited") == 0) {
        code = (int)v;
    } else if (strcmp(status, "signaled") == 0) {
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
        code = SBX_EXIT_KILLED;
    } else if (strcmp(status, "oom") == 0) {
        if (!json) {
            sbx_errorf("out of memory, sandbox killed");
        }
        code = SBX_EXIT_KILLED;
    } else if (strcmp(status, "error") == 0) {
        if (!sbx_text(proto_map_get(res, "error"), msg, sizeof(msg))[0]) {
            (void)snprintf(msg, sizeof(msg), "the task failed");
        }
        /* On stderr with --json too: the JSON has it as "error". */
        sbx_errorf("error: %s", msg);
        code = sbx_exec_error_status(res);
    } else if (strcmp(status, "cancelled") == 0) {
        sbx_errorf("the task was cancelled");
        code = SBX_EXIT_FAIL;
    } else {
        sbx_errorf("unknown task status '%s' from sbxd", status);
        code = SBX_EXIT_FAIL;
    }
    if (unwritten) {
        sbx_errorf("%zu collected file%s could not be written", x->collected.n_errors,
                   x->collected.n_errors == 1 ? "" : "s");
        code = SBX_EXIT_FAIL;
    }
    return code;
}

/* Opens --out's directory (the current one by default), creating it and its parents when
 * missing: before anything runs, so that a directory sbx cannot write to fails the command,
 * not its result. */
static int sbx_exec_open_out(struct sbx_exec *x)
{
    const char *dir = x->opts.out_dir ? x->opts.out_dir : ".";
    char path[PATH_MAX];
    size_t n = strlen(dir);
    if (n >= sizeof(path)) {
        return sbx_fail(x->opts.json, SBX_ERR_SYSTEM, "--out: path too long");
    }
    memcpy(path, dir, n + 1);
    /* mkdir -p: each parent, then the directory itself. */
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0') {
            continue;
        }
        char c = path[i];
        path[i] = '\0';
        if (mkdir(path, 0777) < 0 && errno != EEXIST) {
            return sbx_fail(x->opts.json, SBX_ERR_SYSTEM, "--out: cannot create '%s': %s", path,
                            strerror(errno));
        }
        path[i] = c;
    }
    x->out_dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (x->out_dirfd < 0) {
        return sbx_fail(x->opts.json, SBX_ERR_SYSTEM, "--out: cannot open '%s': %s", dir,
                        strerror(errno));
    }
    return 0;
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

int sbx_exec_run(const struct sbx_ctx *ctx, int argc, char **argv)
{
    scoped(sbx_exec_release) struct sbx_exec x = {.c = {.fd = -1}, .sigfd = -1, .out_dirfd = -1};
    struct err e = ERR_INIT;
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
    if (x.opts.n_collect > 0 && (status = sbx_exec_open_out(&x)) != 0) {
        return status;
    }
    sbx_files_plan(&x.opts.files);
    if (sbx_files_load(&x.opts.files, &e) < 0) {
        return sbx_fail(x.opts.json, SBX_ERR_SYSTEM, "%s", err_msg(&e));
    }
    status = sbx_rpc_connect(ctx, x.opts.json, &x.c);
    if (status != 0) {
        return status;
    }
    x.sigfd = sbx_signalfd();
    if (x.sigfd < 0) {
        return sbx_fail(x.opts.json, SBX_ERR_SYSTEM, "signalfd: %s", strerror(-x.sigfd));
    }
    /* Our writes of the task's output see EPIPE, so that the task is cancelled (the
     * connection closed) before sbx ends by SIGPIPE. */
    (void)signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < 2; i++) {
        x.out[i].fd = i == 0 ? STDOUT_FILENO : STDERR_FILENO;
        x.out[i].chunk = sbx_write_chunk(x.out[i].fd);
    }
    x.stdin_buf = xmalloc(SBX_STDIN_CHUNK);
    x.msgid = x.c.next_msgid++;
    sbx_exec_pack_request(&x);
    status = sbx_exec_loop(&x);
    /* Closing the connection is what makes sbxd cancel the task on a signal or a failed
     * output; after a result, it frees the daemon's side before a possibly long write of
     * the JSON. */
    sbx_conn_close(&x.c);
    if (status == SBX_EXEC_SIGPIPE) {
        sbx_sigpipe_exit();
    }
    (void)signal(SIGPIPE, SIG_DFL);
    if (status != 0) {
        return status;
    }
    if (x.resp.error->type != MSGPACK_OBJECT_NIL) {
        return sbx_rpc_error(x.resp.error, x.opts.json);
    }
    return sbx_exec_result(&x, x.resp.result);
}
