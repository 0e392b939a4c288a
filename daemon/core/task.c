/* SPDX-License-Identifier: MIT */
/* One task from request to result: stdio pipes streamed to the client as notifications
 * (or, with capture, kept for the result) under the combined output cap, stdin streamed
 * in, the deadline, and the result map. Its files (STAGING before the command, COLLECTING
 * after it) are core/task_files.c's.
 * Task output is never logged; only byte counts leave this file. */
#define LOG_MOD "exec"
#include "core/task.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "audit/audit.h"
#include "core/task_audit.h"
#include "core/task_files.h"
#include "core/task_impl.h"
#include "sandbox/cgroup.h"
#include "config/config.h"
#include "core/sched.h"
#include "egress/egress.h"
#include "lib/log.h"
#include "metrics/metrics.h"
#include "core/pool.h"
#include "core/session.h"
#include "wire/proto.h"
#include "sandbox/sandbox.h"
#include "sandbox/task_spec.h"
#include "lib/util.h"

/* One read buffer for every pipe: the loop is single-threaded and each chunk is packed
 * into a message before the next read. */
static char read_buf[64 * 1024];

struct stdin_req {
    uv_write_t req;
    struct task *t;
    size_t len;
    char data[];
};

static void maybe_finish(struct task *t);

void task_unref(struct task *t)
{
    if (--t->open_handles > 0) {
        return;
    }
    task_files_free(t);
    task_spec_clear(&t->spec);
    free(t->out_cap.data);
    free(t->err_cap.data);
    free(t);
}

static void handle_closed(uv_handle_t *h)
{
    task_unref(h->data);
}

static void close_handle(struct task *t, uv_handle_t *h)
{
    (void)t;
    if (!uv_is_closing(h)) {
        uv_close(h, handle_closed);
    }
}

static void task_release(struct task *t)
{
    token_detach(&t->tlink); /* done: neither expiry nor revocation concerns it any more */
    for (int i = 0; i < 3; i++) {
        t->child_fds[i] = fd_close(t->child_fds[i]);
    }
    uv_timer_stop(&t->timer);
    close_handle(t, (uv_handle_t *)&t->in);
    close_handle(t, (uv_handle_t *)&t->out);
    close_handle(t, (uv_handle_t *)&t->err);
    close_handle(t, (uv_handle_t *)&t->timer);
}

void task_make_id(struct task_env *env, char *buf, size_t size)
{
    (void)snprintf(buf, size, "%08x%08llx", env->instance,
                   (unsigned long long)(++env->next_task & 0xffffffff));
}

void task_admit(struct task *t)
{
    if (!t->admitted) {
        t->admitted = true;
        task_audit_decision(t->env, t->id, true, NULL, NULL);
    }
}

static const struct pool_waiter_ops task_waiter_ops;

int task_new(struct task_env *env, const struct task_sink *sink, uint32_t msgid, struct pool *p,
             struct task_spec *spec, struct task **ret, struct err *e)
{
    int pin[2], pout[2], perr[2];
    if (pipe2(pin, O_CLOEXEC) < 0) {
        return err_set(e, -errno, "pipe");
    }
    if (pipe2(pout, O_CLOEXEC) < 0) {
        int r = -errno;
        fd_close(pin[0]);
        fd_close(pin[1]);
        return err_set(e, r, "pipe");
    }
    if (pipe2(perr, O_CLOEXEC) < 0) {
        int r = -errno;
        fd_close(pin[0]);
        fd_close(pin[1]);
        fd_close(pout[0]);
        fd_close(pout[1]);
        return err_set(e, r, "pipe");
    }
    struct task *t = xcalloc(1, sizeof(*t));
    t->env = env;
    t->wait.ops = &task_waiter_ops;
    t->sink = (struct task_sink){sink->ops, sink->arg, NULL, NULL};
    t->msgid = msgid;
    t->pool = p;
    task_spec_move(&t->spec, spec);
    t->t_request_ns = clock_now_ns();
    t->child_fds[0] = pin[0];
    t->child_fds[1] = pout[1];
    t->child_fds[2] = perr[1];
    task_make_id(env, t->id, sizeof(t->id));
    outcap_init(&t->cap, p->pc->output_cap);
    uv_pipe_init(env->loop, &t->in, 0);
    uv_pipe_init(env->loop, &t->out, 0);
    uv_pipe_init(env->loop, &t->err, 0);
    uv_timer_init(env->loop, &t->timer);
    t->in.data = t->out.data = t->err.data = t->timer.data = t;
    t->open_handles = 4;
    task_files_init(t);
    task_files_arm_timeout(t);
    uv_pipe_open(&t->out, pout[0]);
    uv_pipe_open(&t->err, perr[0]);
    if (t->spec.stdin) {
        uv_pipe_open(&t->in, pin[1]);
        t->in_open = true;
    } else {
        /* The task reads EOF at once; the handle never held the fd. */
        fd_close(pin[1]);
        close_handle(t, (uv_handle_t *)&t->in);
    }
    *ret = t;
    return 0;
}

struct task_sink *task_sink(struct task *t)
{
    return &t->sink;
}

struct task *task_of_sink(struct task_sink *s)
{
    return container_of(s, struct task, sink);
}

const char *task_id(const struct task *t)
{
    return t->id;
}

uint32_t task_msgid(const struct task *t)
{
    return t->msgid;
}

const char *task_token_id(const struct task *t)
{
    return t->spec.token_id;
}

const struct task_spec *task_get_spec(const struct task *t)
{
    return &t->spec;
}

void task_attach_token(struct task *t, struct token_store *tokens, const struct token *tok)
{
    token_attach(tokens, tok, &t->tlink);
}

/* Starts the task's notification `method` in sb: [2, method, [msgid, <the caller's>]]. */
static void notify_begin(const struct task *t, const char *method, msgpack_sbuffer *sb,
                         msgpack_packer *pk)
{
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
    proto_pack_notify(pk, method);
    msgpack_pack_array(pk, 2);
    msgpack_pack_uint32(pk, t->msgid);
}

static void send_output(struct task *t, const char *method, const char *buf, size_t len)
{
    if (!t->sink.ops) {
        return;
    }
    msgpack_sbuffer sb;
    msgpack_packer pk;
    notify_begin(t, method, &sb, &pk);
    msgpack_pack_bin_with_body(&pk, buf, len);
    t->sink.ops->send(&t->sink, &sb);
    msgpack_sbuffer_destroy(&sb);
}

/* Appends len bytes that passed the cap; room is what the cap still allows after them,
 * so the buffer never grows past what the stream could still be given. */
static void capture_add(struct task_capture *c, const char *buf, size_t len, uint64_t room)
{
    if (c->len + len > c->size) {
        size_t want = c->size ? c->size * 2 : 4096;
        size_t most = c->len + len + (size_t)room;
        if (want > most) {
            want = most;
        }
        if (want < c->len + len) {
            want = c->len + len;
        }
        c->data = xrealloc(c->data, want);
        c->size = want;
    }
    memcpy(c->data + c->len, buf, len);
    c->len += len;
}

static void stop_reading(struct task *t)
{
    if (!t->out_eof) {
        uv_read_stop((uv_stream_t *)&t->out);
    }
    if (!t->err_eof) {
        uv_read_stop((uv_stream_t *)&t->err);
    }
    t->reading = false;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    buf->base = read_buf;
    buf->len = sizeof(read_buf);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct task *t = s->data;
    bool is_out = s == (uv_stream_t *)&t->out;
    if (nread == 0) {
        return;
    }
    if (nread < 0) {
        /* Closed at once, not only stopped: libuv would take the pipe out of epoll when it
         * next reported the hang-up (a wake-up and a system call), and again at the close. */
        close_handle(t, (uv_handle_t *)s);
        if (is_out) {
            t->out_eof = true;
        } else {
            t->err_eof = true;
        }
        if (t->out_eof && t->err_eof && !t->exited) {
            /* Most often the command's exit, whose report init sends once it has killed
             * and reaped what is left: meanwhile its chain so far goes into the trail's
             * open transaction, so that the commit the result waits for holds only the
             * events of its end. */
            audit_write_ahead(t->env->audit);
        }
        maybe_finish(t);
        return;
    }
    size_t pass = outcap_take(&t->cap, (size_t)nread);
    if (pass > 0) {
        if (is_out) {
            t->out_bytes += pass;
        } else {
            t->err_bytes += pass;
        }
        if (t->spec.capture) {
            capture_add(is_out ? &t->out_cap : &t->err_cap, buf->base, pass,
                        t->cap.cap - t->cap.passed);
        } else {
            send_output(t, is_out ? "exec.stdout" : "exec.stderr", buf->base, pass);
        }
    }
    if (t->cap.tripped) {
        /* The client has exactly `cap` bytes; nothing more is read, and the sandbox dies. */
        stop_reading(t);
        t->out_eof = t->err_eof = true;
        task_kill(t, KILL_OUTPUT);
        maybe_finish(t);
        return;
    }
    /* Captured output waits in memory the cap bounds, not in the connection's queue. */
    if (!t->spec.capture && t->sink.ops && t->sink.ops->congested(&t->sink)) {
        stop_reading(t); /* backpressure: resumed by task_resume */
    }
}

static void start_reading(struct task *t)
{
    if (t->state != TASK_RUNNING && t->state != TASK_FINISHING) {
        return;
    }
    if (!t->out_eof) {
        uv_read_start((uv_stream_t *)&t->out, alloc_cb, read_cb);
    }
    if (!t->err_eof) {
        uv_read_start((uv_stream_t *)&t->err, alloc_cb, read_cb);
    }
    t->reading = true;
}

void task_resume(struct task *t)
{
    if (!t->reading && !t->cap.tripped) {
        start_reading(t);
    }
}

static void timeout_cb(uv_timer_t *h)
{
    struct task *t = h->data;
    task_kill(t, KILL_TIMEOUT);
}

static void send_started(struct task *t)
{
    if (!t->sink.ops) {
        return;
    }
    msgpack_sbuffer sb;
    msgpack_packer pk;
    notify_begin(t, "exec.started", &sb, &pk);
    msgpack_pack_map(&pk, 3);
    proto_pack_kv_str(&pk, "task", t->id);
    proto_pack_kv_str(&pk, "sandbox", t->sb ? t->sb->id : "");
    proto_pack_kv_str(&pk, "pool", t->pool->pc->name);
    t->sink.ops->send(&t->sink, &sb);
    msgpack_sbuffer_destroy(&sb);
}

static void task_sandbox_event(void *arg, const struct ctl_event *ev);
static void task_sandbox_died(void *arg);

static const struct sandbox_task_ops task_sandbox_ops = {
    .event = task_sandbox_event,
    .died = task_sandbox_died,
};

/* The task's egress session, and the proxy variables in its env; or, without a network
 * profile, no session and the sandbox's listener closed. */
static int start_egress(struct task *t, struct sandbox *sb, struct err *e)
{
    memset(&t->egress_stats, 0, sizeof(t->egress_stats));
    int r = egress_session_start(t->env->egress, t->spec.net_profile, take_fd(&sb->proxy_fd), t->id,
                                 sb->id, &t->egress, e);
    if (r < 0 || !t->egress) {
        return r;
    }
    r = task_spec_set_proxy(&t->spec, egress_session_env(t->egress), e);
    if (r < 0) {
        t->egress = egress_session_end(t->egress, NULL);
        return r;
    }
    t->egress_stats.active = true;
    return 0;
}

/* The pool hands the task a WARM sandbox: the task claims it (so that its death reaches
 * the task), writes its files first when it has some (STAGING, task_files.c), then runs. */
static void task_start(struct task *t, struct sandbox *sb)
{
    struct err e = ERR_INIT;
    t->sb = sb;
    str_copy(t->sb_id, sb->id, sizeof(t->sb_id));
    t->state = TASK_RUNNING;
    t->t_start_ns = clock_now_ns();
    metrics_task_start(t->pool->metrics, t->t_request_ns, t->t_start_ns);
    sched_task_started(t->env->sched, t->t_start_ns); /* pushes the pools' top-up back */
    t->counted = true;
    task_admit(t);
    task_audit_assigned(t);
    if (t->stage) {
        /* Its files take a while to write: the sandbox's death must reach the task. */
        sandbox_claim(sb, &task_sandbox_ops, t);
    }
    int r = task_files_begin(t, sb, &e);
    if (r < 0) {
        log_error("task=%s sb=%s msg=\"cannot prepare the task's files, destroying sandbox\" "
                  "detail=\"%s\"",
                  t->id, sb->id, err_msg(&e));
        task_abort(t, &e, false);
        return;
    }
    if (r == 0) {
        task_run(t);
    }
}

void task_run(struct task *t)
{
    struct err e = ERR_INIT;
    struct sandbox *sb = t->sb;
    if (t->state == TASK_STAGING) {
        /* The command's time starts now: writing its files was not its run. */
        t->t_start_ns = clock_now_ns();
    }
    t->state = TASK_RUNNING;
    /* The proxy serves the task's network profile, or its listener closes (egress.c). */
    int r = start_egress(t, sb, &e);
    if (r == 0) {
        r = sandbox_start_task(sb, &t->spec, t->child_fds, &task_sandbox_ops, t, &e);
    }
    /* Our copies of the child's ends must go, or EOF never comes. */
    for (int i = 0; i < 3; i++) {
        t->child_fds[i] = fd_close(t->child_fds[i]);
    }
    /* The token's mounts are the sandbox's now (or never will be), and init has the
     * strings. */
    task_spec_drop_payload(&t->spec);
    if (r < 0) {
        log_error("task=%s sb=%s msg=\"cannot start task, destroying sandbox\" detail=\"%s\"",
                  t->id, sb->id, err_msg(&e));
        t->exec_failed = true;
        t->error = e;
        t->exited = true;
        t->sb = NULL;
        if (t->stage) {
            sandbox_detach_task(sb); /* claimed: its death must not reach the task */
        }
        if (!t->spec.keep) {
            sandbox_kill(sb); /* a session's sandbox is its session's to end */
        }
        start_reading(t); /* the child's ends are closed: both pipes reach EOF at once */
        maybe_finish(t);
        return;
    }
    /* Started: the task is init's, in the child cloned at setup (its pid came with READY).
     * init sends nothing more until it exits. */
    task_audit_started(t, sb->task_pid);
    metrics_task_running(t->pool->metrics, t->t_request_ns);
    send_started(t);
    start_reading(t);
    uv_timer_start(&t->timer, timeout_cb, (t->spec.timeout_ns + 999999) / 1000000, 0);
}

/* Reads the sandbox's cgroup counters while the sandbox still exists. */
static void snapshot_usage(struct task *t)
{
    struct cgroup_usage u;
    if (t->sb && sandbox_usage(t->sb, &u) == 0) {
        t->usage = u;
        t->have_usage = true;
    }
}

/* The task's command is over: its sandbox dies, unless a session keeps it (whose init
 * killed and reaped everything of the command before it reported, and sandbox.c detached
 * the task before this report: the sandbox is its session's again). */
static void end_sandbox(struct task *t)
{
    if (!t->sb) {
        return;
    }
    if (t->spec.keep) {
        snapshot_usage(t); /* before the next command resets the usage base */
        t->sb = NULL;
        t->kept = true;
        return;
    }
    sandbox_kill(t->sb);
}

static void task_sandbox_event(void *arg, const struct ctl_event *ev)
{
    struct task *t = arg;
    switch (ev->type) {
    case CTL_EXITED:
        if (t->exited) {
            break;
        }
        t->exited = true;
        t->wstatus = ev->wstatus;
        t->rusage_cpu_us = ev->utime_us + ev->stime_us;
        t->seccomp_denials = ev->seccomp_denials;
        t->t_exit_ns = clock_now_ns();
        uv_timer_stop(&t->timer);
        /* Whatever the task left running dies with its sandbox (a kept one's init killed
         * it all before reporting). Usage is read once, when the task finishes (or when the
         * sandbox is reaped first): the counters keep their peak and totals after the kill. */
        end_sandbox(t);
        maybe_finish(t);
        break;
    case CTL_EXEC_FAILED:
        if (t->exited) {
            break;
        }
        t->exited = true;
        t->exec_failed = true;
        t->fail_stage = ev->stage;
        t->fail_errno = ev->err;
        t->t_exit_ns = clock_now_ns();
        err_set_reported(&t->error, ev->err,
                         ev->stage == CTL_STAGE_EXEC ? "cannot execute the command"
                                                     : "the task could not start",
                         ev->msg);
        uv_timer_stop(&t->timer);
        end_sandbox(t);
        maybe_finish(t);
        break;
    default:
        break;
    }
}

static void task_sandbox_died(void *arg)
{
    struct task *t = arg;
    snapshot_usage(t);
    t->sb = NULL;
    if (t->state == TASK_STAGING) {
        /* Killed (or dead of itself) before its command was sent: nothing ran. */
        t->state = TASK_RUNNING;
        if (t->kill == KILL_NONE) {
            t->exec_failed = true;
            err_setx(&t->error, -EIO, "the sandbox died before the command started");
        }
        for (int i = 0; i < 3; i++) {
            t->child_fds[i] = fd_close(t->child_fds[i]);
        }
        start_reading(t); /* the child's ends are closed: both pipes reach EOF at once */
    }
    if (!t->exited) {
        t->exited = true;
        t->t_exit_ns = clock_now_ns();
        t->wstatus = SIGKILL; /* as waitpid reports a SIGKILL death */
        uv_timer_stop(&t->timer);
    }
    maybe_finish(t);
}

static const char *task_status(const struct task *t)
{
    switch (t->kill) {
    case KILL_TIMEOUT:
        return "timeout";
    case KILL_OUTPUT:
        return "output_limit";
    case KILL_SHUTDOWN:
        return "error";
    case KILL_CLIENT:
    case KILL_SESSION_CLOSED:
        return "cancelled";
    case KILL_TOKEN_EXPIRED:
        return "token_expired";
    case KILL_TOKEN_REVOKED:
        return "token_revoked";
    case KILL_FILES:
        return "error";
    case KILL_NONE:
        break;
    }
    if (t->exec_failed) {
        return "error";
    }
    if (WIFEXITED(t->wstatus)) {
        return "exited";
    }
    if (t->have_usage && t->usage.oom && WIFSIGNALED(t->wstatus) &&
        WTERMSIG(t->wstatus) == SIGKILL) {
        return "oom";
    }
    return "signaled";
}

/* Where a task that never ran its command failed, for clients to tell "the command could
 * not be executed" (exit 126 or 127 in sbx) from a sandbox-side failure. NULL when not
 * known. */
static const char *fail_stage_name(const struct task *t)
{
    if (t->files_failed || t->kill == KILL_FILES) {
        return "files";
    }
    if (!t->exec_failed) {
        return NULL;
    }
    switch (t->fail_stage) {
    case CTL_STAGE_EXEC:
        return "exec";
    case CTL_STAGE_CHDIR:
        return "cwd";
    case CTL_STAGE_TASK_MOUNT:
        return "mounts";
    default:
        return "setup";
    }
}

/* Why a task in status error failed (sbx_task_errors_total's cause, metrics.h): the drain,
 * else where its command failed to start (status error has one or the other). */
static const char *error_cause(const struct task *t)
{
    if (t->kill == KILL_SHUTDOWN) {
        return "shutdown";
    }
    const char *stage = fail_stage_name(t);
    return stage ? stage : "setup";
}

static void outcome_of(struct task *t, struct task_outcome *o)
{
    memset(o, 0, sizeof(*o));
    o->status = task_status(t);
    bool is_error = strcmp(o->status, "error") == 0;
    if (is_error && t->error.msg[0] == '\0') {
        if (t->kill == KILL_SHUTDOWN) {
            err_setx(&t->error, -ESHUTDOWN, "sbxd shut down before the task finished");
        } else {
            err_setx(&t->error, -EIO, "the task could not be started");
        }
    }
    uint64_t end = t->t_exit_ns ? t->t_exit_ns : clock_now_ns();
    o->wall_ms = t->t_start_ns && end > t->t_start_ns ? (end - t->t_start_ns) / 1000000 : 0;
    o->cpu_ms =
        t->have_usage && t->usage.cpu_ns ? t->usage.cpu_ns / 1000000 : t->rusage_cpu_us / 1000;
    o->mem_peak_bytes = t->have_usage ? t->usage.mem_peak_bytes : 0;
    o->has_exit_code = !t->exec_failed && t->kill == KILL_NONE && WIFEXITED(t->wstatus);
    o->exit_code = o->has_exit_code ? WEXITSTATUS(t->wstatus) : 0;
    o->has_signal = !t->exec_failed && t->exited && WIFSIGNALED(t->wstatus);
    o->signal = o->has_signal ? WTERMSIG(t->wstatus) : 0;
    if (is_error) {
        o->error = err_msg(&t->error);
        o->error_cause = error_cause(t);
    } else if (t->kill == KILL_CLIENT) { /* status cancelled */
        o->error = "the client left before the task finished";
    } else if (t->kill == KILL_SESSION_CLOSED) {
        o->error = "the session was closed before the command finished";
    }
}

static void pack_capture(msgpack_packer *pk, const char *key, const struct task_capture *c)
{
    proto_pack_cstr(pk, key);
    msgpack_pack_bin_with_body(pk, c->data ? c->data : "", c->len);
}

static void send_result(struct task *t, const struct task_outcome *o)
{
    bool is_error = strcmp(o->status, "error") == 0;
    const char *stage = is_error ? fail_stage_name(t) : NULL;
    bool has_errno = stage && t->fail_errno != 0;

    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_response_ok(&pk, t->msgid);
    msgpack_pack_map(&pk, 15 + (is_error ? 1 : 0) + (stage ? 1 : 0) + (has_errno ? 1 : 0) +
                              (t->spec.capture ? 2 : 0) + task_files_result_keys(t));
    proto_pack_kv_str(&pk, "status", o->status);
    if (o->has_exit_code) {
        proto_pack_kv_i64(&pk, "exit_code", o->exit_code);
    } else {
        proto_pack_kv_nil(&pk, "exit_code");
    }
    if (o->has_signal) {
        proto_pack_kv_i64(&pk, "signal", o->signal);
    } else {
        proto_pack_kv_nil(&pk, "signal");
    }
    proto_pack_kv_u64(&pk, "wall_ms", o->wall_ms);
    proto_pack_kv_u64(&pk, "cpu_ms", o->cpu_ms);
    proto_pack_kv_u64(&pk, "mem_peak_bytes", o->mem_peak_bytes);
    proto_pack_kv_u64(&pk, "stdout_bytes", t->out_bytes);
    proto_pack_kv_u64(&pk, "stderr_bytes", t->err_bytes);
    proto_pack_kv_bool(&pk, "truncated", t->cap.tripped);
    if (t->spec.capture) {
        pack_capture(&pk, "stdout", &t->out_cap);
        pack_capture(&pk, "stderr", &t->err_cap);
    }
    proto_pack_kv_str(&pk, "sandbox", t->sb_id);
    proto_pack_kv_str(&pk, "task", t->id);
    proto_pack_kv_str(&pk, "pool", t->pool->pc->name);
    proto_pack_kv_bool(&pk, "cold", t->wait.cold);
    if (t->seccomp_denials == CTL_DENIALS_UNKNOWN) {
        proto_pack_kv_nil(&pk, "seccomp_denials");
    } else {
        proto_pack_kv_u64(&pk, "seccomp_denials", t->seccomp_denials);
    }
    egress_pack_result(&pk, t->spec.net_profile, &t->egress_stats);
    task_files_pack_result(t, &pk);
    if (is_error) {
        proto_pack_kv_text(&pk, "error", o->error);
    }
    if (stage) {
        proto_pack_kv_str(&pk, "error_stage", stage);
        /* So that a client tells "not found" from "found but not executable" (ENOENT from
         * EACCES, ENOEXEC, ...) without reading the text. */
        if (has_errno) {
            proto_pack_kv_str(&pk, "error_errno", err_name(t->fail_errno));
        }
    }
    t->sink.ops->send(&t->sink, &sb);
    msgpack_sbuffer_destroy(&sb);
}

/* The task no longer answers to its client: give back the stdin bytes it still had queued
 * and its request slot, so the client's accounting stays exact. */
static void detach_client(struct task *t)
{
    const struct task_sink_ops *ops = t->sink.ops;
    if (!ops) {
        return;
    }
    ops->stdin_written(&t->sink, t->in_pending + task_files_pending(t));
    t->sink.ops = NULL;
    ops->done(&t->sink);
}

/* The task's chain is committed (or the trail cannot be written): answer, then let go. */
/* A session's command is over: the session may run the next one (before the client has
 * this one's result, so that it can send the next at once). */
static void session_done(struct task *t)
{
    struct session *s = t->session;
    if (s) {
        t->session = NULL;
        session_command_done(s, t);
    }
}

void task_get_files_bytes(const struct task *t, uint64_t *ret_in, uint64_t *ret_out)
{
    *ret_in = t->files_in_bytes;
    *ret_out = t->files_out_bytes;
}

void task_detach_session(struct task *t)
{
    t->session = NULL;
}

static void task_committed(void *arg, bool committed)
{
    struct task *t = arg;
    struct sched *s = t->env->sched;
    session_done(t);
    if (t->sink.ops) {
        if (committed) {
            struct task_outcome o;
            outcome_of(t, &o);
            send_result(t, &o);
            task_files_drop_result(t);
        } else {
            t->sink.ops->send_error(&t->sink, t->msgid, "internal",
                                    "the audit trail cannot be written: the result is withheld");
        }
        detach_client(t);
    }
    bool counted = t->counted;
    task_unref(t);
    if (counted) {
        sched_task_ended(s);
    }
}

static void maybe_finish(struct task *t)
{
    if (t->exited) {
        /* The proxy stops with the task, not with its output. */
        t->egress = egress_session_end(t->egress, &t->egress_stats);
    }
    if (t->state == TASK_DONE || !t->exited || !t->out_eof || !t->err_eof) {
        if (t->exited && t->state == TASK_RUNNING) {
            t->state = TASK_FINISHING;
        }
        return;
    }
    /* Every process of the sandbox is dead (init killed the rest before it reported, or
     * the pid namespace went with init): /work can be read back now. */
    if (task_files_collect(t)) {
        t->state = TASK_FINISHING;
        return;
    }
    bool reaped = t->sb == NULL;
    if (t->sb) {
        snapshot_usage(t);
        sandbox_kill(t->sb);
        sandbox_detach_task(t->sb);
        t->sb = NULL;
    }
    t->state = TASK_DONE;
    uv_timer_stop(&t->timer);
    if (!t->t_exit_ns) {
        t->t_exit_ns = clock_now_ns();
    }
    struct task_outcome o;
    outcome_of(t, &o);
    metrics_task_done(t->pool->metrics, o.status,
                      &(struct metrics_task_result){
                          .error_cause = o.error_cause,
                          .start_ns = t->t_start_ns,
                          .exit_ns = t->t_exit_ns,
                          .stdout_bytes = t->out_bytes,
                          .stderr_bytes = t->err_bytes,
                          .truncated = t->cap.tripped,
                          .denials_known = t->seccomp_denials != CTL_DENIALS_UNKNOWN,
                          .seccomp_denials = t->seccomp_denials,
                      });
    metrics_files(t->pool->metrics, t->files_in_bytes, t->files_out_bytes);
    log_debug("task=%s pool=%s status=%s out=%llu err=%llu", t->id, t->pool->pc->name, o.status,
              (unsigned long long)t->out_bytes, (unsigned long long)t->err_bytes);
    /* The result is sent only once its chain is committed (task_committed), so a result a
     * client saw is in the trail even if sbxd is killed right after. The sandbox is dead
     * already (SIGKILL reached its init): that is recorded before the result. */
    task_audit_finished(t, &o);
    if (t->sb_id[0] && !t->kept) {
        task_audit_destroyed(t, reaped); /* a kept one's end is its session's close */
    }
    uint64_t ticket = task_audit_result(t, o.status, NULL, o.error, &o);
    t->open_handles++; /* the wait holds the task */
    task_release(t);
    audit_when_committed(t->env->audit, ticket, task_committed, t);
}

void task_maybe_finish(struct task *t)
{
    maybe_finish(t);
}

void task_abort(struct task *t, const struct err *e, bool files)
{
    if (t->exited || (t->state != TASK_QUEUED && t->state != TASK_STAGING)) {
        return;
    }
    if (t->state == TASK_QUEUED) {
        pool_cancel(t->pool, &t->wait);
    }
    t->files_failed = files;
    t->exec_failed = true;
    t->error = *e;
    t->exited = true;
    t->t_exit_ns = clock_now_ns();
    uv_timer_stop(&t->timer);
    for (int i = 0; i < 3; i++) {
        t->child_fds[i] = fd_close(t->child_fds[i]);
    }
    if (t->sb && t->spec.keep) {
        /* Nothing of the command ran: the session's sandbox is its own again. */
        sandbox_detach_task(t->sb);
        t->sb = NULL;
        t->kept = true;
    } else if (t->sb) {
        sandbox_kill(t->sb); /* claimed: its death reaches the task (maybe_finish) */
    }
    t->state = TASK_RUNNING;
    start_reading(t); /* the child's ends are closed: both pipes reach EOF at once */
    maybe_finish(t);
}

/* A task that never had a sandbox ends with status (denied when it was never admitted):
 * its result in the trail, its client answered with code and message when still there,
 * and, once admitted, its end counted as any task's (cause: with status error). */
static void end_unstarted(struct task *t, const char *status, const char *cause, const char *code,
                          const char *message)
{
    if (!t->admitted) {
        task_audit_decision(t->env, t->id, false, code, message);
    }
    (void)task_audit_result(t, status, code, message, NULL);
    if (t->admitted) {
        metrics_task_done(t->pool->metrics, status,
                          &(struct metrics_task_result){
                              .error_cause = cause,
                          });
    }
    session_done(t);
    if (t->sink.ops) {
        t->sink.ops->send_error(&t->sink, t->msgid, code, message);
        detach_client(t);
    }
    t->state = TASK_DONE;
    task_release(t);
}

void task_fail(struct task *t, const char *code, const char *message)
{
    /* Admitted, the pool failed it while it waited: draining, or no sandbox to be had. */
    const char *cause = strcmp(code, "shutting_down") == 0 ? "shutdown" : "no_sandbox";
    end_unstarted(t, t->admitted ? "error" : "denied", t->admitted ? cause : NULL, code, message);
}

static void waiter_got(struct pool_waiter *w, struct sandbox *sb)
{
    task_start(container_of(w, struct task, wait), sb);
}

static void waiter_refused(struct pool_waiter *w, const char *code, const char *message)
{
    struct task *t = container_of(w, struct task, wait);
    task_fail(t, code, message);
}

static const struct pool_waiter_ops task_waiter_ops = {
    .got = waiter_got,
    .refused = waiter_refused,
};

int task_submit(struct task *t)
{
    return pool_submit(t->pool, &t->wait);
}

void task_kill(struct task *t, enum task_kill_reason why)
{
    if (t->state == TASK_DONE) {
        return;
    }
    if (t->kill == KILL_NONE && !t->exited) {
        t->kill = why;
    }
    uv_timer_stop(&t->timer);
    if (t->sb && t->spec.keep && t->session && t->state == TASK_STAGING) {
        /* Its files are still being written: the command never starts. */
        struct err e = ERR_INIT;
        err_setx(&e, -ECANCELED, "the command was stopped before it started");
        task_abort(t, &e, false);
    } else if (t->sb && t->spec.keep && t->session) {
        sandbox_kill_task(t->sb); /* the command's processes only: the session goes on */
    } else if (t->sb) {
        sandbox_kill(t->sb);
    }
}

void task_start_session(struct task *t, struct sandbox *sb, struct session *s)
{
    t->session = s;
    t->spec.keep = true;
    task_start(t, sb);
}

void task_token_kill(struct token_link *l, enum token_state why, void *arg)
{
    struct task *t = container_of(l, struct task, tlink);
    bool revoked = why == TOKEN_REVOKED;
    (void)arg;
    if (t->state == TASK_QUEUED) {
        /* Refused by policy after all: a denial, and a task that ended for its token. */
        const char *status = revoked ? "token_revoked" : "token_expired";
        pool_cancel(t->pool, &t->wait);
        metrics_denied(t->env->metrics, status);
        end_unstarted(t, status, NULL, "denied",
                      revoked ? "the token was revoked before the task started"
                              : "the token expired before the task started");
        return;
    }
    task_kill(t, revoked ? KILL_TOKEN_REVOKED : KILL_TOKEN_EXPIRED);
}

void task_client_gone(struct task *t)
{
    detach_client(t);
    if (t->state == TASK_QUEUED) {
        pool_cancel(t->pool, &t->wait);
        end_unstarted(t, "cancelled", NULL, NULL, "the client left before a sandbox was free");
        return;
    }
    task_kill(t, KILL_CLIENT);
}

static void stdin_close(struct task *t)
{
    if (t->in_open) {
        t->in_open = false;
        close_handle(t, (uv_handle_t *)&t->in);
    }
}

static void stdin_written(uv_write_t *req, int status)
{
    struct stdin_req *sr = container_of(req, struct stdin_req, req);
    struct task *t = sr->t;
    t->in_pending -= sr->len;
    if (t->sink.ops) {
        t->sink.ops->stdin_written(&t->sink, sr->len);
    }
    if (status < 0) {
        /* EPIPE: the task closed its stdin; later chunks are dropped. */
        t->in_eof_requested = true;
    }
    if (t->in_eof_requested && t->in_pending == 0) {
        stdin_close(t);
    }
    free(sr);
}

void task_stdin(struct task *t, const char *data, size_t len)
{
    /* A finished task waiting for its audit commit is still the client's: drop. */
    if (!t->in_open || t->in_eof_requested || t->state == TASK_DONE) {
        return;
    }
    if (len == 0) {
        t->in_eof_requested = true;
        if (t->in_pending == 0) {
            stdin_close(t);
        }
        return;
    }
    struct stdin_req *sr = xmalloc(sizeof(*sr) + len);
    sr->t = t;
    sr->len = len;
    memcpy(sr->data, data, len);
    uv_buf_t b = uv_buf_init(sr->data, (unsigned)len);
    int r = uv_write(&sr->req, (uv_stream_t *)&t->in, &b, 1, stdin_written);
    if (r < 0) {
        free(sr);
        t->in_eof_requested = true;
        if (t->in_pending == 0) {
            stdin_close(t);
        }
        return;
    }
    t->in_pending += len;
    if (t->sink.ops) {
        t->sink.ops->stdin_queued(&t->sink, len);
    }
}
