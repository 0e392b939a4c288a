/* SPDX-License-Identifier: MIT */
/* sbx-load: drives sbxd's exec over msgpack-rpc from one libuv loop, closed loop (a fixed
 * number of tasks in flight) or open loop (tasks on a fixed schedule, latency measured from
 * the intended send time so a slow daemon cannot hide its queueing), and reports
 * throughput, latency percentiles, outcomes and errors. A task is never retried: each one
 * ends as exactly one result or one error. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <sysexits.h>
#include <unistd.h>

#include <msgpack.h>
#include <uv.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "counters.h"
#include "lib/err.h"
#include "hist.h"
#include "load_opts.h"
#include "procstat.h"
#include "wire/proto.h"
#include "scenario.h"
#include "lib/util.h"

#define LOAD_DAEMON_PER_CONN_LIMIT 64 /* sbxd's default max_requests_per_connection */
#define LOAD_MAX_SLOTS 65535u         /* per connection: the slot index is msgid's low 16 bits */
#define LOAD_MAX_MSG (16u << 20)      /* largest message accepted from sbxd */
#define LOAD_READ_CHUNK (64u << 10)
#define LOAD_STDIN_CHUNK (64u << 10) /* largest exec.stdin payload */
#define LOAD_RECONNECT_MS 100
/* A session's open or close for --sessions: msgid's top bit set, the slot index below. */
#define LOAD_SESSION_MSGID 0x80000000u
#define LOAD_SESSION_ID_MAX 64

/* What one task runs. Produced by load_next_task, the single place where tasks are chosen,
 * so that scenarios can later mix commands, pools and inputs. Pointers stay valid for the
 * whole run. */
struct load_task_spec {
    char *const *argv;
    size_t argc;
    const char *pool;
    double timeout_s;
    int64_t stdin_bytes;
    const char *stdin_data; /* NULL: stdin_bytes of filler */
    int32_t entry;          /* scenario entry, -1 without a scenario */
};

/* ---- run state ------------------------------------------------------------------------- */

enum load_phase {
    PHASE_CONNECTING,
    PHASE_WARMUP,
    PHASE_RUN,
    PHASE_DRAIN,   /* no new tasks; waiting for those in flight */
    PHASE_CLOSING, /* --sessions: reported; closing the sessions */
    PHASE_DONE,
};

enum conn_state {
    CONN_IDLE, /* no pipe handle (before the first connect, between reconnects) */
    CONN_CONNECTING,
    CONN_UP,
    CONN_DOWN, /* pipe closing */
};

struct load;
struct conn;

struct slot {
    uint32_t msgid; /* 0: free */
    bool warmup;
    bool started;
    uint64_t t0_ns;      /* latency origin: send time, or the intended time in open loop */
    int64_t stdin_bytes; /* from the task's spec */
    const char *stdin_data;
    int32_t entry;
    bool closing; /* --session-open: opened, its close sent */
};

struct conn {
    struct load *l;
    uint32_t index;
    enum conn_state state;
    uv_pipe_t pipe;
    uv_connect_t connect_req;
    uv_timer_t retry;
    struct proto_reader *reader;
    struct slot *slots;
    uint32_t *free_slots; /* stack of free slot indexes */
    uint32_t n_free;
    uint32_t n_slots;
    uint16_t gen; /* msgid high bits, so a stale msgid never matches a reused slot */
    /* --sessions: slot i's tasks run in sessions[i] (one task per slot at a time). */
    char (*sessions)[LOAD_SESSION_ID_MAX];
};

struct load {
    uv_loop_t *loop;
    const struct load_opts *o;
    enum load_phase phase;
    struct conn *conns;
    uint32_t n_conns;
    uint32_t n_up;
    uint32_t rr; /* next connection to try */
    uint32_t inflight;

    uint64_t warm_issued, warm_done, warm_failed;
    uint64_t target; /* measured tasks to issue; UINT64_MAX: until the deadline */
    uint64_t issued, done;
    uint64_t t0_ns, t_end_ns;
    uint64_t interval_ns; /* open loop: schedule period, 0 in closed loop */

    struct hist hist;
    struct counters outcomes;
    struct counters errors;
    uint64_t stdout_bytes, stderr_bytes;
    bool saw_error_note;

    uv_timer_t deadline;
    uv_timer_t schedule;
    uv_timer_t progress;
    uv_signal_t sigint, sigterm;
    bool progress_on;
    uint64_t prog_last_done, prog_last_ns;
    int signals;

    struct scenario sc;
    bool have_sc;
    uint64_t rng;
    bool told_mismatch;

    struct procstat before, after;
    bool have_before, have_after;
    int exit_status;

    /* --sessions: opens or closes not yet answered; whether all of them were opened. */
    uint32_t sess_pending;
    bool sess_asked;
    bool sess_ready;
};

static char load_stdin_block[LOAD_STDIN_CHUNK]; /* the bytes every stdin chunk carries */

static void load_fill(struct load *l);
static void load_finish(struct load *l);
static void load_close_all(struct load *l);
static void conn_start(struct conn *c);

/* The next task to run. The only place that decides what a task is. */
static void load_next_task(struct load *l, struct load_task_spec *ret)
{
    const struct load_opts *o = l->o;
    if (l->have_sc) {
        size_t i = scenario_pick(&l->sc, &l->rng);
        const struct scenario_entry *x = &l->sc.v[i];
        *ret = (struct load_task_spec){
            .argv = x->argv,
            .argc = x->argc,
            .pool = x->pool,
            .timeout_s = x->timeout_s,
            .stdin_bytes = x->stdin_data ? (int64_t)x->stdin_len : -1,
            .stdin_data = x->stdin_data,
            .entry = (int32_t)i,
        };
        return;
    }
    *ret = (struct load_task_spec){
        .argv = o->argv,
        .argc = o->argc,
        .pool = o->pool,
        .timeout_s = o->timeout_s,
        .stdin_bytes = o->stdin_bytes,
        .entry = -1,
    };
}

/* ---- writing --------------------------------------------------------------------------- */

struct wreq {
    uv_write_t req;
    struct buf b; /* the packed bytes; uncapped: sbx-load packs only what it composes */
};

static struct wreq *wreq_new(void)
{
    struct wreq *w = xcalloc(1, sizeof(*w));
    /* One allocation holds a request. */
    (void)buf_reserve(&w->b, 255);
    return w;
}

static int wreq_pack_cb(void *data, const char *p, size_t n)
{
    struct wreq *w = data;
    (void)buf_append(&w->b, p, n);
    return 0;
}

static void wreq_done_cb(uv_write_t *req, int status)
{
    struct wreq *w = container_of(req, struct wreq, req);
    (void)status; /* a failed write shows up as a read error or EOF, handled there */
    buf_free(&w->b);
    free(w);
}

static void conn_fail(struct conn *c, const char *why, int r);

/* Writes bufs (which must stay valid until the write completes: w's data or static). */
static void conn_write(struct conn *c, struct wreq *w, uv_buf_t *bufs, unsigned n)
{
    int r = uv_write(&w->req, (uv_stream_t *)&c->pipe, bufs, n, wreq_done_cb);
    if (r < 0) {
        buf_free(&w->b);
        free(w);
        conn_fail(c, "write", r);
    }
}

/* ---- tasks ----------------------------------------------------------------------------- */

static struct slot *conn_slot_by_msgid(struct conn *c, uint64_t msgid)
{
    uint32_t idx = (uint32_t)(msgid & 0xffffu);
    if (msgid == 0 || msgid > UINT32_MAX || idx >= c->n_slots || c->slots[idx].msgid != msgid) {
        return NULL;
    }
    return &c->slots[idx];
}

/* One task of this run ended (result, error response or lost connection). */
static void load_task_end(struct load *l, struct conn *c, struct slot *s)
{
    uint32_t idx = (uint32_t)(s - c->slots);
    bool warmup = s->warmup;

    s->msgid = 0;
    c->free_slots[c->n_free++] = idx;
    l->inflight--;
    if (warmup) {
        l->warm_done++;
    } else {
        l->done++;
        l->t_end_ns = uv_hrtime();
    }
    if (l->phase == PHASE_WARMUP && l->warm_done == l->o->warmup && l->inflight == 0) {
        if (l->warm_failed > 0) {
            load_errorf("%" PRIu64 " of %" PRIu64 " warmup tasks failed", l->warm_failed,
                        l->o->warmup);
        }
        l->phase = PHASE_CONNECTING; /* load_fill starts the measured run */
    }
    if ((l->phase == PHASE_RUN && l->target != UINT64_MAX && l->done >= l->target) ||
        (l->phase == PHASE_DRAIN && l->inflight == 0)) {
        load_finish(l);
        return;
    }
    load_fill(l);
}

/* A task failed without a result: counted under errors (or as a failed warmup task). */
static void load_task_error(struct load *l, struct conn *c, struct slot *s, const char *prefix,
                            const char *name, size_t len)
{
    if (s->warmup) {
        l->warm_failed++;
    } else {
        counters_add(&l->errors, prefix, name, len);
    }
    load_task_end(l, c, s);
}

static void conn_send_session_op(struct conn *c, uint32_t msgid, const char *method,
                                 const char *session, size_t len);

/* --session-open: the open's answer is the measured part; the close then ends the task. */
static void load_session_open_result(struct load *l, struct conn *c, struct slot *s,
                                     const msgpack_object *result)
{
    const char *id = NULL;
    uint32_t id_len = 0;

    if (s->closing) {
        load_task_end(l, c, s);
        return;
    }
    if (proto_get_str(result, "session", &id, &id_len, NULL) < 0 || id_len == 0 ||
        id_len >= LOAD_SESSION_ID_MAX) {
        load_task_error(l, c, s, "protocol", "", 0);
        return;
    }
    if (!s->warmup) {
        uint64_t now = uv_hrtime();
        counters_add_cstr(&l->outcomes, "opened");
        hist_record(&l->hist, now > s->t0_ns ? (now - s->t0_ns + 500) / 1000 : 0);
    }
    s->closing = true;
    conn_send_session_op(c, s->msgid, "session.close", id, id_len);
}

static void load_task_result(struct load *l, struct conn *c, struct slot *s,
                             const msgpack_object *result)
{
    const char *status = NULL;
    uint32_t status_len = 0;
    uint64_t code = 0;
    uint64_t now = uv_hrtime();

    if (proto_get_str(result, "status", &status, &status_len, NULL) < 0) {
        load_task_error(l, c, s, "protocol", "", 0);
        return;
    }
    if (s->warmup) {
        if (!proto_str_eq(status, status_len, "exited")) {
            l->warm_failed++;
        }
        load_task_end(l, c, s);
        return;
    }
    counters_add(&l->outcomes, "", status, status_len);
    bool has_code = false;
    if (proto_str_eq(status, status_len, "exited")) {
        const msgpack_object *ec = proto_map_get(result, "exit_code");
        if (ec && ec->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
            code = 1;
            has_code = true;
        } else if (ec && ec->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            code = ec->via.u64;
            has_code = true;
        }
        if (code != 0 && s->entry < 0) {
            counters_add_cstr(&l->errors, "nonzero_exit");
        }
    }
    if (s->entry >= 0) {
        const struct scenario_entry *x = &l->sc.v[s->entry];
        int64_t got = code > 255 ? 255 : (int64_t)code;
        if (!scenario_matches(x, status, status_len, has_code, got)) {
            counters_add_cstr(&l->errors, "mismatch");
            if (!l->told_mismatch) {
                l->told_mismatch = true;
                load_errorf("first mismatch: task '%s' expected %s%s, got %.*s (exit code %" PRId64
                            "); further mismatches are counted, not shown",
                            x->name, x->expect_status[0] ? x->expect_status : "any status",
                            x->expect_has_code ? " with its exit code" : "", (int)status_len,
                            status, has_code ? got : (int64_t)-1);
            }
        }
    }
    hist_record(&l->hist, now > s->t0_ns ? (now - s->t0_ns + 500) / 1000 : 0);
    load_task_end(l, c, s);
}

/* Streams the task's stdin: its bytes in chunks of at most 64 KiB, then an empty chunk
 * (EOF), all in one write. Sent after exec.started, which every sbxd accepts. */
static void conn_send_stdin(struct conn *c, const struct slot *s)
{
    uint64_t total = (uint64_t)s->stdin_bytes;
    size_t n_chunks = (size_t)((total + LOAD_STDIN_CHUNK - 1) / LOAD_STDIN_CHUNK) + 1;
    struct wreq *w = wreq_new();
    scoped_free size_t *ends = xcalloc(n_chunks, sizeof(*ends));
    scoped_free uv_buf_t *bufs = xcalloc(2 * n_chunks, sizeof(*bufs));
    msgpack_packer pk;
    uint64_t left = total;
    unsigned nb = 0;

    msgpack_packer_init(&pk, w, wreq_pack_cb);
    /* Headers first (the buffer may move while it grows), then the iovec. */
    for (size_t i = 0; i < n_chunks; i++) {
        size_t k = left > LOAD_STDIN_CHUNK ? LOAD_STDIN_CHUNK : (size_t)left;
        proto_pack_notify(&pk, "exec.stdin");
        msgpack_pack_array(&pk, 2);
        msgpack_pack_uint32(&pk, s->msgid);
        msgpack_pack_bin(&pk, k);
        ends[i] = w->b.len;
        left -= k;
    }
    left = total;
    size_t off = 0;
    for (size_t i = 0; i < n_chunks; i++) {
        size_t k = left > LOAD_STDIN_CHUNK ? LOAD_STDIN_CHUNK : (size_t)left;
        bufs[nb++] = uv_buf_init(w->b.p + off, (unsigned)(ends[i] - off));
        if (k > 0) {
            char *src = s->stdin_data ? (char *)s->stdin_data + (total - left) : load_stdin_block;
            bufs[nb++] = uv_buf_init(src, (unsigned)k);
        }
        off = ends[i];
        left -= k;
    }
    /* libuv copies the iovec array, so bufs may go away after the call. */
    conn_write(c, w, bufs, nb);
}

static void load_issue(struct load *l, struct conn *c, uint64_t t0_ns, bool warmup)
{
    struct load_task_spec spec;
    struct wreq *w = NULL;
    msgpack_packer pk;
    uint32_t idx = c->free_slots[--c->n_free];
    struct slot *s = &c->slots[idx];

    load_next_task(l, &spec);
    /* 15 bits: msgids with the top bit set are LOAD_SESSION_MSGID's. */
    c->gen = (uint16_t)(c->gen == 0x7fff ? 1 : c->gen + 1);
    *s = (struct slot){
        .msgid = ((uint32_t)c->gen << 16) | idx,
        .warmup = warmup,
        .t0_ns = t0_ns,
        .stdin_bytes = spec.stdin_bytes,
        .stdin_data = spec.stdin_data,
        .entry = spec.entry,
    };
    l->inflight++;
    if (warmup) {
        l->warm_issued++;
    } else {
        l->issued++;
    }

    if (l->o->session_open) {
        conn_send_session_op(c, s->msgid, "session.open", NULL, 0);
        return;
    }
    w = wreq_new();
    bool in_session = l->o->sessions;
    if (in_session) {
        spec.pool = NULL; /* the session's */
    }
    msgpack_packer_init(&pk, w, wreq_pack_cb);
    proto_pack_request(&pk, s->msgid, "exec");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_map(&pk, 1 + (spec.pool != NULL) + (spec.timeout_s > 0) + (spec.stdin_bytes >= 0) +
                              in_session);
    if (in_session) {
        proto_pack_kv_str(&pk, "session", c->sessions[idx]);
    }
    proto_pack_cstr(&pk, "argv");
    msgpack_pack_array(&pk, spec.argc);
    for (size_t i = 0; i < spec.argc; i++) {
        proto_pack_cstr(&pk, spec.argv[i]);
    }
    if (spec.pool) {
        proto_pack_kv_str(&pk, "pool", spec.pool);
    }
    if (spec.timeout_s > 0) {
        proto_pack_kv_f64(&pk, "timeout", spec.timeout_s);
    }
    if (spec.stdin_bytes >= 0) {
        proto_pack_kv_bool(&pk, "stdin", true);
    }
    uv_buf_t b = uv_buf_init(w->b.p, (unsigned)w->b.len);
    conn_write(c, w, &b, 1);
}

/* session.open {pool} (session NULL) or session.close {session} under msgid. */
static void conn_send_session_op(struct conn *c, uint32_t msgid, const char *method,
                                 const char *session, size_t len)
{
    const struct load_opts *o = c->l->o;
    struct wreq *w = wreq_new();
    msgpack_packer pk;

    msgpack_packer_init(&pk, w, wreq_pack_cb);
    proto_pack_request(&pk, msgid, method);
    msgpack_pack_array(&pk, 1);
    if (session) {
        msgpack_pack_map(&pk, 1);
        proto_pack_cstr(&pk, "session");
        msgpack_pack_str(&pk, len);
        msgpack_pack_str_body(&pk, session, len);
    } else {
        msgpack_pack_map(&pk, o->pool != NULL);
        if (o->pool) {
            proto_pack_kv_str(&pk, "pool", o->pool);
        }
    }
    uv_buf_t b = uv_buf_init(w->b.p, (unsigned)w->b.len);
    conn_write(c, w, &b, 1);
}

/* --sessions: opens one session per slot of every connection (once, before the run) or
 * closes them all (after it). */
static void load_sessions_all(struct load *l, bool open)
{
    for (uint32_t i = 0; i < l->n_conns; i++) {
        struct conn *c = &l->conns[i];
        if (c->state != CONN_UP) {
            continue;
        }
        for (uint32_t k = 0; k < c->n_slots; k++) {
            if (!open && c->sessions[k][0] == '\0') {
                continue;
            }
            l->sess_pending++;
            conn_send_session_op(c, LOAD_SESSION_MSGID | k, open ? "session.open" : "session.close",
                                 open ? NULL : c->sessions[k], strlen(c->sessions[k]));
        }
    }
}

/* The answer to one of load_sessions_all's requests. */
static void load_session_answer(struct load *l, struct conn *c, const struct proto_msg *m)
{
    uint32_t k = (uint32_t)(m->msgid & 0xffffu);
    bool failed = m->error && m->error->type != MSGPACK_OBJECT_NIL;

    if (l->sess_pending == 0 || k >= c->n_slots) {
        counters_add_cstr(&l->errors, "protocol");
        return;
    }
    l->sess_pending--;
    if (l->phase == PHASE_CLOSING) {
        if (failed) {
            counters_add_cstr(&l->errors, "session_close");
        }
        c->sessions[k][0] = '\0';
        if (l->sess_pending == 0) {
            load_close_all(l);
        }
        return;
    }
    const char *id = NULL;
    uint32_t id_len = 0;
    if (failed || proto_get_str(m->result, "session", &id, &id_len, NULL) < 0 || id_len == 0 ||
        id_len >= LOAD_SESSION_ID_MAX) {
        char msg[256] = "no session id in the answer";
        if (failed) {
            (void)proto_obj_cstr(proto_map_get(m->error, "message"), msg, sizeof(msg));
        }
        load_errorf("session.open failed: %s", msg);
        /* The sessions opened so far end at their idle timeout: closing them here would
         * mix their closes' answers with the opens' still to come. */
        l->sess_asked = false;
        l->exit_status = EX_UNAVAILABLE;
        load_finish(l);
        return;
    }
    memcpy(c->sessions[k], id, id_len);
    c->sessions[k][id_len] = '\0';
    if (l->sess_pending == 0) {
        l->sess_ready = true;
        load_fill(l);
    }
}

/* ---- connections ----------------------------------------------------------------------- */

static void conn_retry_cb(uv_timer_t *t)
{
    struct conn *c = container_of(t, struct conn, retry);
    if (c->l->phase != PHASE_DONE && c->state == CONN_IDLE) {
        conn_start(c);
    }
}

static void conn_closed_cb(uv_handle_t *h)
{
    struct conn *c = container_of((uv_pipe_t *)h, struct conn, pipe);
    struct load *l = c->l;

    c->state = CONN_IDLE;
    c->reader = proto_reader_free(c->reader);
    if (l->phase == PHASE_CONNECTING || l->phase == PHASE_WARMUP || l->phase == PHASE_RUN) {
        (void)uv_timer_start(&c->retry, conn_retry_cb, LOAD_RECONNECT_MS, 0);
    }
}

/* The connection broke: every task in flight on it fails with a connection error, and the
 * connection is re-established after a short pause while the run goes on. */
static void conn_fail(struct conn *c, const char *why, int r)
{
    struct load *l = c->l;

    if (c->state != CONN_UP && c->state != CONN_CONNECTING) {
        return;
    }
    if (l->phase == PHASE_CLOSING) {
        /* sbxd closes what a lost connection's sessions still hold at their idle timeout. */
        counters_add_cstr(&l->errors, "session_close");
        load_close_all(l);
        return;
    }
    if (c->state == CONN_UP) {
        l->n_up--;
    }
    if (!l->saw_error_note && l->phase != PHASE_DONE) {
        /* libuv's errors are negative errnos on Linux; UV_EOF arrives here as 0. */
        load_errorf("connection %u: %s: %s; reconnecting (further failures are counted, "
                    "not shown)",
                    c->index, why, r < 0 ? strerror(-r) : "closed by sbxd");
        l->saw_error_note = true;
    }
    c->state = CONN_DOWN;
    if (!uv_is_closing((uv_handle_t *)&c->pipe)) {
        uv_close((uv_handle_t *)&c->pipe, conn_closed_cb);
    }
    for (uint32_t i = 0; i < c->n_slots && l->phase != PHASE_DONE; i++) {
        if (c->slots[i].msgid != 0) {
            load_task_error(l, c, &c->slots[i], "connection", "", 0);
        }
    }
    if (l->phase != PHASE_DONE) {
        load_fill(l);
    }
}

static void conn_on_notify(struct conn *c, const struct proto_msg *m)
{
    struct load *l = c->l;
    const msgpack_object *p = m->params;

    if (proto_str_eq(m->method, m->method_len, "error")) {
        char msg[256];
        const msgpack_object *a = proto_params_arg0(p);
        if (proto_obj_cstr(proto_map_get(a, "message"), msg, sizeof(msg)) < 0) {
            (void)str_copy(msg, "(no message)", sizeof(msg));
        }
        load_errorf("connection %u: sbxd says: %s", c->index, msg);
        return;
    }
    if (!p || p->type != MSGPACK_OBJECT_ARRAY || p->via.array.size < 2 ||
        p->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        return;
    }
    struct slot *s = conn_slot_by_msgid(c, p->via.array.ptr[0].via.u64);
    const msgpack_object *arg = &p->via.array.ptr[1];
    if (!s) {
        return;
    }
    if (proto_str_eq(m->method, m->method_len, "exec.started")) {
        if (!s->started && s->stdin_bytes >= 0) {
            conn_send_stdin(c, s);
        }
        s->started = true;
    } else if (proto_str_eq(m->method, m->method_len, "exec.stdout")) {
        l->stdout_bytes += arg->type == MSGPACK_OBJECT_BIN ? arg->via.bin.size : 0;
    } else if (proto_str_eq(m->method, m->method_len, "exec.stderr")) {
        l->stderr_bytes += arg->type == MSGPACK_OBJECT_BIN ? arg->via.bin.size : 0;
    }
}

static void conn_on_response(struct conn *c, const struct proto_msg *m)
{
    struct load *l = c->l;
    if (l->o->sessions && (m->msgid & LOAD_SESSION_MSGID)) {
        load_session_answer(l, c, m);
        return;
    }
    struct slot *s = conn_slot_by_msgid(c, m->msgid);

    if (!s) {
        counters_add_cstr(&l->errors, "protocol");
        return;
    }
    if (m->error && m->error->type != MSGPACK_OBJECT_NIL) {
        const char *code = NULL;
        uint32_t len = 0;
        if (proto_get_str(m->error, "code", &code, &len, NULL) < 0) {
            code = "unknown";
            len = (uint32_t)strlen(code);
        }
        load_task_error(l, c, s, "rpc_", code, len);
        return;
    }
    if (l->o->session_open) {
        load_session_open_result(l, c, s, m->result);
        return;
    }
    load_task_result(l, c, s, m->result);
}

static void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = container_of((uv_pipe_t *)h, struct conn, pipe);
    char *p = NULL;
    size_t len = 0;

    (void)suggested;
    if (!c->reader || proto_reader_buffer(c->reader, LOAD_READ_CHUNK, &p, &len) < 0) {
        *buf = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS */
        return;
    }
    *buf = uv_buf_init(p, (unsigned)(len > UINT32_MAX ? UINT32_MAX : len));
}

static void conn_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = container_of((uv_pipe_t *)stream, struct conn, pipe);
    struct load *l = c->l;

    (void)buf;
    if (nread < 0) {
        conn_fail(c, "read", nread == UV_EOF ? 0 : (int)nread);
        return;
    }
    if (nread == 0) {
        return;
    }
    proto_reader_consumed(c->reader, (size_t)nread);
    while (c->state == CONN_UP && l->phase != PHASE_DONE) {
        struct proto_msg m = {0};
        struct err e = ERR_INIT;
        int r = proto_reader_next(c->reader, &m, &e);
        if (r == 0) {
            break;
        }
        if (r == -EPROTO) {
            counters_add_cstr(&l->errors, "protocol");
            proto_msg_done(&m);
            continue;
        }
        if (r < 0) {
            conn_fail(c, err_msg(&e), r);
            return;
        }
        if (m.type == PROTO_RESPONSE) {
            conn_on_response(c, &m);
        } else if (m.type == PROTO_NOTIFY) {
            conn_on_notify(c, &m);
        }
        proto_msg_done(&m);
    }
}

/* No new tasks from now on; the run ends when those in flight are done. */
static void load_stop(struct load *l)
{
    if (l->phase == PHASE_RUN) {
        l->phase = PHASE_DRAIN;
        if (l->inflight == 0) {
            load_finish(l);
        }
    } else if (l->phase != PHASE_DRAIN && l->phase != PHASE_DONE) {
        /* Nothing measured yet (connecting or warming up): nothing to report. */
        if (l->exit_status == 0) {
            l->exit_status = EX_UNAVAILABLE;
        }
        load_finish(l);
    }
}

static void conn_connect_cb(uv_connect_t *req, int status)
{
    struct conn *c = container_of(req, struct conn, connect_req);
    struct load *l = c->l;

    if (c->state != CONN_CONNECTING) {
        return;
    }
    if (status < 0) {
        if (l->phase == PHASE_CONNECTING && l->n_up == 0 && l->issued == 0 && l->warm_issued == 0) {
            load_errorf("cannot connect to sbxd at '%s': %s", l->o->socket_path,
                        uv_strerror(status));
            l->exit_status = EX_UNAVAILABLE;
            load_finish(l);
            return;
        }
        /* sbxd is gone: a run that goes on would only count failures. Stop starting tasks;
         * what the other connections still have in flight finishes. */
        load_errorf("cannot reconnect to sbxd at '%s': %s; stopping", l->o->socket_path,
                    uv_strerror(status));
        c->state = CONN_DOWN;
        uv_close((uv_handle_t *)&c->pipe, conn_closed_cb);
        counters_add_cstr(&l->errors, "connection");
        load_stop(l);
        return;
    }
    int r = uv_read_start((uv_stream_t *)&c->pipe, conn_alloc_cb, conn_read_cb);
    if (r < 0) {
        conn_fail(c, "read start", r);
        return;
    }
    c->state = CONN_UP;
    l->n_up++;
    load_fill(l);
}

static void conn_start(struct conn *c)
{
    struct load *l = c->l;
    int r = proto_reader_new(LOAD_MAX_MSG, &c->reader);
    if (r < 0) {
        load_errorf("out of memory");
        abort();
    }
    r = uv_pipe_init(l->loop, &c->pipe, 0);
    if (r < 0) {
        load_errorf("uv_pipe_init: %s", uv_strerror(r));
        abort();
    }
    c->state = CONN_CONNECTING;
    uv_pipe_connect(&c->connect_req, &c->pipe, l->o->socket_path, conn_connect_cb);
}

/* ---- scheduling ------------------------------------------------------------------------ */

static uint64_t load_intended_ns(const struct load *l, uint64_t k)
{
    return l->t0_ns + k * l->interval_ns;
}

static struct conn *load_pick_conn(struct load *l)
{
    for (uint32_t i = 0; i < l->n_conns; i++) {
        struct conn *c = &l->conns[(l->rr + i) % l->n_conns];
        if (c->state == CONN_UP && c->n_free > 0) {
            l->rr = (l->rr + i + 1) % l->n_conns;
            return c;
        }
    }
    return NULL;
}

static void load_deadline_cb(uv_timer_t *t)
{
    load_stop(container_of(t, struct load, deadline));
}

static void load_schedule_cb(uv_timer_t *t)
{
    load_fill(container_of(t, struct load, schedule));
}

static void load_start_run(struct load *l)
{
    const struct load_opts *o = l->o;

    if (o->pid > 0) {
        int r = procstat_read(o->pid, &l->before);
        l->have_before = r == 0;
        if (r < 0) {
            load_errorf("--pid %ld: cannot read /proc/%ld: %s; not reporting sbxd's usage", o->pid,
                        o->pid, strerror(-r));
        }
    }
    l->phase = PHASE_RUN;
    l->t0_ns = uv_hrtime();
    l->t_end_ns = l->t0_ns;
    l->prog_last_ns = l->t0_ns;
    if (o->rate > 0) {
        l->interval_ns = (uint64_t)(1e9 / o->rate);
        if (l->interval_ns == 0) {
            l->interval_ns = 1;
        }
    }
    if (o->tasks > 0) {
        l->target = o->tasks;
    } else if (o->rate > 0) {
        /* Open loop for a duration is a fixed schedule of rate * duration tasks: when sbxd
         * falls behind, the run takes longer rather than dropping the backlog. */
        l->target = (uint64_t)ceil(o->rate * (double)o->duration_ns / 1e9);
        if (l->target == 0) {
            l->target = 1;
        }
    } else {
        l->target = UINT64_MAX;
        (void)uv_timer_start(&l->deadline, load_deadline_cb, (o->duration_ns + 999999) / 1000000,
                             0);
    }
}

/* Issues every task that may go now, then arms the schedule timer for the next one. */
static void load_fill(struct load *l)
{
    const struct load_opts *o = l->o;

    if (l->phase == PHASE_CONNECTING && l->n_up == l->n_conns && o->sessions && !l->sess_ready) {
        if (!l->sess_asked) {
            l->sess_asked = true;
            load_sessions_all(l, true);
        }
        return;
    }
    if (l->phase == PHASE_CONNECTING && l->n_up == l->n_conns) {
        if (l->warm_issued < o->warmup) {
            l->phase = PHASE_WARMUP;
        } else {
            load_start_run(l);
        }
    }
    if (l->phase == PHASE_WARMUP) {
        while (l->warm_issued < o->warmup && l->inflight < o->concurrency) {
            struct conn *c = load_pick_conn(l);
            if (!c) {
                return;
            }
            load_issue(l, c, uv_hrtime(), true);
        }
        return;
    }
    if (l->phase != PHASE_RUN) {
        return;
    }
    uint64_t now = uv_hrtime();
    uint64_t due = l->target;
    if (l->interval_ns > 0) {
        /* Tasks 0..due-1 are due at now: task k at t0 + k * interval. */
        due = (now - l->t0_ns) / l->interval_ns + 1;
        if (due > l->target) {
            due = l->target;
        }
    }
    while (l->phase == PHASE_RUN && l->issued < due && l->inflight < o->concurrency) {
        struct conn *c = load_pick_conn(l);
        if (!c) {
            break;
        }
        uint64_t t0 = l->interval_ns > 0 ? load_intended_ns(l, l->issued) : uv_hrtime();
        load_issue(l, c, t0, false);
    }
    if (l->phase == PHASE_RUN && l->interval_ns > 0 && l->issued < l->target && l->issued >= due) {
        /* Only the schedule holds the next task back: wake up when it is due. */
        uint64_t next = load_intended_ns(l, l->issued);
        now = uv_hrtime();
        uint64_t ms = next > now ? (next - now + 999999) / 1000000 : 0;
        (void)uv_timer_start(&l->schedule, load_schedule_cb, ms, 0);
    }
}

/* ---- progress, signals, report --------------------------------------------------------- */

static void load_progress_cb(uv_timer_t *t)
{
    struct load *l = container_of(t, struct load, progress);
    uint64_t now = uv_hrtime();

    if (l->phase != PHASE_RUN && l->phase != PHASE_DRAIN) {
        if (l->phase == PHASE_WARMUP) {
            (void)fprintf(stderr, "\r\033[Kwarmup %" PRIu64 "/%" PRIu64, l->warm_done,
                          l->o->warmup);
        }
        return;
    }
    double dt = (double)(now - l->prog_last_ns) / 1e9;
    double rate = dt > 0 ? (double)(l->done - l->prog_last_done) / dt : 0;
    l->prog_last_done = l->done;
    l->prog_last_ns = now;
    (void)fprintf(stderr,
                  "\r\033[K%6.1fs  done %" PRIu64 "  in flight %u  %.1f tasks/s  p50 %.2f ms  "
                  "p99 %.2f ms  errors %" PRIu64,
                  (double)(now - l->t0_ns) / 1e9, l->done, l->inflight, rate,
                  (double)hist_percentile(&l->hist, 50) / 1000.0,
                  (double)hist_percentile(&l->hist, 99) / 1000.0, counters_total(&l->errors));
}

static void load_signal_cb(uv_signal_t *h, int signum)
{
    struct load *l = h->data;

    l->signals++;
    if (l->signals > 1) {
        (void)signal(signum, SIG_DFL);
        (void)raise(signum);
        return;
    }
    if (l->phase != PHASE_RUN) {
        l->exit_status = 128 + signum;
    } else {
        load_errorf("stopping: waiting for %u tasks in flight (again to quit now)", l->inflight);
    }
    load_stop(l);
}

static void load_close_cb(uv_handle_t *h)
{
    (void)h;
}

static void load_close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h)) {
        uv_close(h, load_close_cb);
    }
}

static double us_to_ms(uint64_t us)
{
    return (double)us / 1000.0;
}

static void load_report(const struct load *l)
{
    const struct load_opts *o = l->o;
    double secs = (double)(l->t_end_ns - l->t0_ns) / 1e9;
    double rate = secs > 0 ? (double)l->done / secs : 0;
    const struct hist *h = &l->hist;
    bool proc = l->have_before && l->have_after;

    if (o->json) {
        (void)printf("{\"tasks\": %" PRIu64 ", \"seconds\": %.3f, \"rate\": %.1f, "
                     "\"p50_ms\": %.3f, \"p90_ms\": %.3f, \"p99_ms\": %.3f, "
                     "\"p999_ms\": %.3f, \"max_ms\": %.3f, \"min_ms\": %.3f, "
                     "\"mean_ms\": %.3f, \"measured\": %" PRIu64 ", ",
                     l->done, secs, rate, us_to_ms(hist_percentile(h, 50)),
                     us_to_ms(hist_percentile(h, 90)), us_to_ms(hist_percentile(h, 99)),
                     us_to_ms(hist_percentile(h, 99.9)), us_to_ms(h->max_us),
                     us_to_ms(h->count ? h->min_us : 0), hist_mean(h) / 1000.0, h->count);
        (void)printf("\"mode\": \"%s\", \"concurrency\": %u, \"connections\": %u, ",
                     o->rate > 0 ? "open" : "closed", o->concurrency, l->n_conns);
        if (o->rate > 0) {
            (void)printf("\"target_rate\": %.3f, ", o->rate);
        }
        (void)printf("\"warmup\": %" PRIu64 ", \"stdout_bytes\": %" PRIu64
                     ", \"stderr_bytes\": %" PRIu64 ", \"outcomes\": ",
                     o->warmup, l->stdout_bytes, l->stderr_bytes);
        counters_print_json(&l->outcomes, stdout);
        (void)fputs(", \"errors\": ", stdout);
        counters_print_json(&l->errors, stdout);
        if (proc) {
            (void)printf(", \"rss_bytes\": {\"before\": %" PRIu64 ", \"after\": %" PRIu64 "}"
                         ", \"cpu_seconds\": {\"before\": %.2f, \"after\": %.2f}"
                         ", \"children_cpu_seconds\": {\"before\": %.2f, \"after\": %.2f}",
                         l->before.rss_bytes, l->after.rss_bytes, l->before.cpu_s, l->after.cpu_s,
                         l->before.children_cpu_s, l->after.children_cpu_s);
        }
        (void)fputs("}\n", stdout);
        return;
    }
    (void)printf("sbx-load: %s loop, concurrency %u over %u connection%s",
                 o->rate > 0 ? "open" : "closed", o->concurrency, l->n_conns,
                 l->n_conns == 1 ? "" : "s");
    if (o->rate > 0) {
        (void)printf(", %.1f tasks/s scheduled", o->rate);
    }
    if (l->have_sc) {
        (void)printf(", scenario %s (%zu kinds of task)", o->scenario, l->sc.n);
    } else {
        (void)printf(", command:");
        for (size_t i = 0; i < o->argc; i++) {
            (void)printf(" %s", o->argv[i]);
        }
    }
    (void)printf("\n");
    (void)printf("tasks       %" PRIu64 " in %.2f s: %.1f tasks/s", l->done, secs, rate);
    if (o->warmup > 0) {
        (void)printf(" (after %" PRIu64 " warmup)", o->warmup);
    }
    (void)printf("\n");
    (void)printf("latency ms  p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f  "
                 "(mean %.2f, %" PRIu64 " tasks with a result)\n",
                 us_to_ms(hist_percentile(h, 50)), us_to_ms(hist_percentile(h, 90)),
                 us_to_ms(hist_percentile(h, 99)), us_to_ms(hist_percentile(h, 99.9)),
                 us_to_ms(h->max_us), hist_mean(h) / 1000.0, h->count);
    (void)printf("outcomes   ");
    counters_print_text(&l->outcomes, stdout);
    (void)printf("errors     ");
    counters_print_text(&l->errors, stdout);
    if (proc) {
        double cpu = l->after.cpu_s - l->before.cpu_s;
        double ccpu = l->after.children_cpu_s - l->before.children_cpu_s;
        (void)printf("sbxd        rss %.1f MiB -> %.1f MiB; cpu %.2f s (%.3f ms/task), "
                     "reaped children %.2f s\n",
                     (double)l->before.rss_bytes / 1048576.0,
                     (double)l->after.rss_bytes / 1048576.0, cpu,
                     l->done ? cpu * 1000.0 / (double)l->done : 0.0, ccpu);
    }
}

/* Ends the run: stops every timer and connection; uv_run returns once they are closed. */
static void load_finish(struct load *l)
{
    enum load_phase was = l->phase;

    if (was == PHASE_DONE || was == PHASE_CLOSING) {
        return;
    }
    l->phase = PHASE_DONE;
    if (l->progress_on) {
        (void)fputs("\r\033[K", stderr);
    }
    if (was == PHASE_RUN || was == PHASE_DRAIN) {
        l->have_after = l->o->pid > 0 && procstat_read(l->o->pid, &l->after) == 0;
        load_report(l);
        bool all_ok = counters_total(&l->errors) == 0;
        const char *ok = l->o->session_open ? "opened" : "exited";
        for (size_t i = 0; i < l->outcomes.n && !l->have_sc; i++) {
            all_ok = all_ok && strcmp(l->outcomes.v[i].name, ok) == 0;
        }
        if (l->exit_status == 0 && !all_ok) {
            l->exit_status = 1;
        }
    }
    if (l->o->sessions && l->sess_asked && l->n_up == l->n_conns) {
        /* Reported: the sessions are closed before the connections (load_session_answer). */
        l->phase = PHASE_CLOSING;
        l->sess_pending = 0;
        load_sessions_all(l, false);
        if (l->sess_pending > 0) {
            return;
        }
    }
    load_close_all(l);
}

/* Stops every timer and connection; uv_run returns once they are closed. */
static void load_close_all(struct load *l)
{
    l->phase = PHASE_DONE;
    load_close_handle((uv_handle_t *)&l->deadline);
    load_close_handle((uv_handle_t *)&l->schedule);
    load_close_handle((uv_handle_t *)&l->progress);
    load_close_handle((uv_handle_t *)&l->sigint);
    load_close_handle((uv_handle_t *)&l->sigterm);
    for (uint32_t i = 0; i < l->n_conns; i++) {
        struct conn *c = &l->conns[i];
        load_close_handle((uv_handle_t *)&c->retry);
        if (c->state != CONN_IDLE) {
            if (c->state == CONN_UP) {
                l->n_up--;
            }
            c->state = CONN_DOWN;
            load_close_handle((uv_handle_t *)&c->pipe);
            /* conn_closed_cb was set by conn_fail when already closing; else no callback
             * is needed, and the reader is freed with the connection. */
        }
    }
}

int main(int argc, char **argv)
{
    struct load_opts o;
    int status = load_opts_parse(argc, argv, &o);
    if (status != 0) {
        return status < 0 ? 0 : status;
    }

    (void)signal(SIGPIPE, SIG_IGN);
    struct load *l = xcalloc(1, sizeof(*l));
    l->loop = uv_default_loop();
    l->o = &o;
    l->phase = PHASE_CONNECTING;
    l->n_conns = o.connections;
    hist_init(&l->hist);
    l->rng = (uv_hrtime() ^ (uint64_t)getpid() << 32) | 1;
    if (o.scenario) {
        struct err e = ERR_INIT;
        if (scenario_load(o.scenario, &l->sc, &e) < 0) {
            load_errorf("%s", err_msg(&e));
            free(l);
            return EX_USAGE;
        }
        l->have_sc = true;
    }

    uint32_t per_conn = (o.concurrency + o.connections - 1) / o.connections;
    if (per_conn > LOAD_MAX_SLOTS) {
        load_errorf("%u tasks per connection is too many; add --connections", per_conn);
        scenario_free(&l->sc);
        free(l);
        return EX_USAGE;
    }
    if (per_conn > LOAD_DAEMON_PER_CONN_LIMIT) {
        load_errorf("note: %u tasks in flight per connection is above sbxd's default limit "
                    "of %d",
                    per_conn, LOAD_DAEMON_PER_CONN_LIMIT);
    }
    l->conns = xcalloc(l->n_conns, sizeof(*l->conns));
    for (uint32_t i = 0; i < l->n_conns; i++) {
        struct conn *c = &l->conns[i];
        c->l = l;
        c->index = i;
        c->n_slots = per_conn;
        c->slots = xcalloc(per_conn, sizeof(*c->slots));
        c->free_slots = xcalloc(per_conn, sizeof(*c->free_slots));
        c->sessions = xcalloc(per_conn, sizeof(*c->sessions));
        for (uint32_t k = 0; k < per_conn; k++) {
            c->free_slots[k] = per_conn - 1 - k;
        }
        c->n_free = per_conn;
        (void)uv_timer_init(l->loop, &c->retry);
    }
    (void)uv_timer_init(l->loop, &l->deadline);
    (void)uv_timer_init(l->loop, &l->schedule);
    (void)uv_timer_init(l->loop, &l->progress);
    (void)uv_signal_init(l->loop, &l->sigint);
    (void)uv_signal_init(l->loop, &l->sigterm);
    l->sigint.data = l;
    l->sigterm.data = l;
    (void)uv_signal_start(&l->sigint, load_signal_cb, SIGINT);
    (void)uv_signal_start(&l->sigterm, load_signal_cb, SIGTERM);
    if (isatty(STDERR_FILENO)) {
        l->progress_on = true;
        (void)uv_timer_start(&l->progress, load_progress_cb, 1000, 1000);
    }
    for (uint32_t i = 0; i < l->n_conns; i++) {
        conn_start(&l->conns[i]);
    }

    (void)uv_run(l->loop, UV_RUN_DEFAULT);
    status = l->exit_status;
    for (uint32_t i = 0; i < l->n_conns; i++) {
        struct conn *c = &l->conns[i];
        c->reader = proto_reader_free(c->reader);
        free(c->slots);
        free(c->free_slots);
        free(c->sessions);
    }
    free(l->conns);
    scenario_free(&l->sc);
    (void)uv_loop_close(l->loop);
    free(l);
    (void)fflush(stdout);
    return status;
}
