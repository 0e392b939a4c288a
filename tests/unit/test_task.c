/* SPDX-License-Identifier: MIT */
/* core/task.c alone (with outcap.c, sandbox/task_spec.c, wire/ and lib/): its pool, sandbox,
 * audit, scheduler, metrics, egress and token store are fakes (fakes/) that log what they
 * are asked, and its client is the test's sink, which logs what it is sent, decoded; the
 * loop and the stdio pipes are real, and the fake sandbox holds the child's ends, through
 * which the test plays the task. The rules: the client hears nothing until the task has its
 * sandbox, then exec.started, its output as exec.stdout and exec.stderr under the combined
 * cap (the task is killed at the cap: output_limit), reading paused while the client is
 * congested until task_resume; the result is sent only once the audit trail committed the
 * task's chain (else an "internal" error), then done, once, last; a task that cannot be
 * scheduled is answered with the error once and freed; a client gone while queued cancels
 * the waiter, while running kills the sandbox, and nothing is sent to it after; a kill
 * (timeout, drain, token) or the sandbox's death gives the status task_status says. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "core/pool.h"
#include "core/task.h"
#include "lib/alloc.h"
#include "lib/util.h"
#include "sandbox/task_spec.h"
#include "wire/proto.h"

#include "fakes/fakes.h"

#define MSGID 7
/* Loop passes after which something that must not happen has not (each is a poll with no
 * wait: bytes already in a pipe are readable at once). */
#define QUIET_PASSES 20

struct fixture {
    uv_loop_t loop;
    uv_timer_t guard; /* a hung test fails instead of waiting for ever */
    bool guard_fired;
    int fds_before; /* open fds before the loop was made */
    struct sched sched;
    struct pool_config pc;
    struct pool pool;
    struct task_env env;
    uint64_t timeout_ns; /* the next task's */
    bool with_stdin;     /* the next task's client streams stdin */
    bool with_capture;   /* the next task's output goes into its result */
    char work[64];       /* a directory standing for the sandbox's /work ("" until made) */
    struct task *t;
    struct sandbox *sb; /* what the pool handed the task (freed at teardown) */
    /* the sink's side */
    bool congested;
    int n_done;
    size_t stdin_queued;
    size_t stdin_written;
    char *res_data; /* the last result, and its decoding (which points into it) */
    msgpack_unpacked res;
};

/* ---- the client: a sink that logs, decoded ---- */

static bool obj_is_str(const msgpack_object *o, const char *s)
{
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
           memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

static const msgpack_object *map_get(const msgpack_object *m, const char *key)
{
    assert_int_equal(m->type, MSGPACK_OBJECT_MAP);
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        if (obj_is_str(&m->via.map.ptr[i].key, key)) {
            return &m->via.map.ptr[i].val;
        }
    }
    return NULL;
}

static void sink_send(struct task_sink *s, msgpack_sbuffer *sbuf)
{
    struct fixture *f = s->arg;
    assert_int_equal(f->n_done, 0); /* nothing after done */
    size_t len = sbuf->size;
    char *data = msgpack_sbuffer_release(sbuf);
    assert_int_equal(sbuf->size, 0); /* taken */
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&u, data, len, &off), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, len);
    const msgpack_object *a = &u.data;
    assert_int_equal(a->type, MSGPACK_OBJECT_ARRAY);
    assert_true(a->via.array.size >= 3);
    const msgpack_object *o = a->via.array.ptr;
    if (o[0].via.u64 == PROTO_NOTIFY) {
        /* [2, method, [msgid, value]] */
        assert_int_equal(a->via.array.size, 3);
        assert_int_equal(o[1].type, MSGPACK_OBJECT_STR);
        assert_int_equal(o[2].type, MSGPACK_OBJECT_ARRAY);
        assert_int_equal(o[2].via.array.size, 2);
        const msgpack_object *p = o[2].via.array.ptr;
        assert_int_equal(p[0].via.u64, MSGID);
        if (obj_is_str(&o[1], "exec.started")) {
            const msgpack_object *sb = map_get(&p[1], "sandbox");
            assert_non_null(sb);
            assert_true(obj_is_str(map_get(&p[1], "pool"), "p1"));
            fake_call("sink started %.*s", (int)sb->via.str.size, sb->via.str.ptr);
        } else {
            assert_int_equal(p[1].type, MSGPACK_OBJECT_BIN);
            bool out = obj_is_str(&o[1], "exec.stdout");
            assert_true(out || obj_is_str(&o[1], "exec.stderr"));
            fake_call("sink %s %.*s", out ? "stdout" : "stderr", (int)p[1].via.bin.size,
                      p[1].via.bin.ptr);
        }
        msgpack_unpacked_destroy(&u);
        free(data);
        return;
    }
    /* [1, msgid, nil, result] */
    assert_int_equal(o[0].via.u64, PROTO_RESPONSE);
    assert_int_equal(a->via.array.size, 4);
    assert_int_equal(o[1].via.u64, MSGID);
    assert_int_equal(o[2].type, MSGPACK_OBJECT_NIL);
    const msgpack_object *st = map_get(&o[3], "status");
    assert_non_null(st);
    fake_call("sink result %.*s", (int)st->via.str.size, st->via.str.ptr);
    assert_null(f->res_data); /* one result */
    f->res_data = data;
    f->res = u;
}

static void sink_send_error(struct task_sink *s, uint32_t msgid, const char *code,
                            const char *message)
{
    struct fixture *f = s->arg;
    assert_int_equal(f->n_done, 0);
    assert_int_equal(msgid, MSGID);
    fake_call("sink error %s: %s", code, message);
}

static bool sink_congested(struct task_sink *s)
{
    struct fixture *f = s->arg;
    assert_int_equal(f->n_done, 0);
    return f->congested;
}

static void sink_stdin_queued(struct task_sink *s, size_t n)
{
    struct fixture *f = s->arg;
    assert_int_equal(f->n_done, 0);
    f->stdin_queued += n;
    fake_call("sink stdin_queued %zu", n);
}

static void sink_stdin_written(struct task_sink *s, size_t n)
{
    struct fixture *f = s->arg;
    assert_int_equal(f->n_done, 0);
    f->stdin_written += n;
    fake_call("sink stdin_written %zu", n);
}

static void sink_done(struct task_sink *s)
{
    struct fixture *f = s->arg;
    assert_ptr_equal(s, task_sink(f->t));
    assert_ptr_equal(task_of_sink(s), f->t);
    f->n_done++;
    fake_call("sink done");
}

static const struct task_sink_ops sink_ops = {
    .send = sink_send,
    .send_error = sink_send_error,
    .congested = sink_congested,
    .stdin_queued = sink_stdin_queued,
    .stdin_written = sink_stdin_written,
    .done = sink_done,
};

/* The result's value at key, which it must have. */
static const msgpack_object *res_get(struct fixture *f, const char *key)
{
    assert_non_null(f->res_data);
    const msgpack_object *v = map_get(&f->res.data.via.array.ptr[3], key);
    if (!v) {
        fail_msg("the result has no \"%s\"", key);
    }
    return v;
}

static void assert_res_str(struct fixture *f, const char *key, const char *want)
{
    const msgpack_object *v = res_get(f, key);
    assert_int_equal(v->type, MSGPACK_OBJECT_STR);
    char got[512];
    (void)snprintf(got, sizeof(got), "%.*s", (int)v->via.str.size, v->via.str.ptr);
    assert_string_equal(got, want);
}

static void assert_res_u64(struct fixture *f, const char *key, uint64_t want)
{
    const msgpack_object *v = res_get(f, key);
    assert_int_equal(v->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    assert_int_equal(v->via.u64, want);
}

static void assert_res_bool(struct fixture *f, const char *key, bool want)
{
    const msgpack_object *v = res_get(f, key);
    assert_int_equal(v->type, MSGPACK_OBJECT_BOOLEAN);
    assert_int_equal(v->via.boolean, want);
}

static void assert_res_bin(struct fixture *f, const char *key, const char *want)
{
    const msgpack_object *v = res_get(f, key);
    assert_int_equal(v->type, MSGPACK_OBJECT_BIN);
    assert_int_equal(v->via.bin.size, strlen(want));
    assert_memory_equal(v->via.bin.ptr, want, strlen(want));
}

static void assert_res_nil(struct fixture *f, const char *key)
{
    assert_int_equal(res_get(f, key)->type, MSGPACK_OBJECT_NIL);
}

static void assert_res_lacks(struct fixture *f, const char *key)
{
    assert_non_null(f->res_data);
    assert_null(map_get(&f->res.data.via.array.ptr[3], key));
}

/* ---- fixture ---- */

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof(*f));
    f->fds_before = fake_count_fds();
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(uv_timer_init(&f->loop, &f->guard), 0);
    f->guard.data = f;
    f->pc.name = "p1";
    f->pc.output_cap = 32768;
    f->pool.pc = &f->pc;
    f->env = (struct task_env){.loop = &f->loop, .sched = &f->sched, .instance = 0xabc};
    f->timeout_ns = 60ULL * 1000 * 1000 * 1000;
    msgpack_unpacked_init(&f->res);
    fake_calls_reset();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    fake_task_close_stdio();
    /* What the checks below read, and the fakes reset first: a failed test leaves its task
     * (and what it holds) behind, not its fakes' state to the next test. */
    size_t waiting = fake_audit_waiting();
    bool linked = fake_token_link != NULL;
    fake_audit_reset();
    fake_calls_reset();
    fake_pool_submit_r = 0;
    fake_pool_waiter = NULL;
    fake_pool_warm = NULL;
    fake_task_start_r = 0;
    fake_usage_r = 0;
    memset(&fake_usage, 0, sizeof(fake_usage));
    fake_egress_start_r = 0;
    fake_token_link = NULL;
    msgpack_unpacked_destroy(&f->res);
    free(f->res_data);
    /* Every chain committed, every stdin byte the client was told of given back. */
    assert_int_equal(waiting, 0);
    assert_int_equal(f->stdin_queued, f->stdin_written);
    assert_false(linked); /* the token detached */
    /* The task's handles are closed (it is freed once they are: ASan's leak check), and
     * every pipe with them. */
    uv_close((uv_handle_t *)&f->guard, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    assert_int_equal(fake_count_fds(), f->fds_before);
    if (f->work[0]) {
        char cmd[96];
        (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->work);
        assert_int_equal(system(cmd), 0);
    }
    free(f->sb);
    free(f);
    return 0;
}

/* ---- helpers ---- */

static void guard_cb(uv_timer_t *h)
{
    struct fixture *f = h->data;
    f->guard_fired = true;
}

/* Runs the loop until needle is in the call log. */
static void run_until(struct fixture *f, const char *needle)
{
    uv_timer_start(&f->guard, guard_cb, 10000, 0);
    while (strstr(fake_calls(), needle) == NULL) {
        assert_false(f->guard_fired);
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    }
    uv_timer_stop(&f->guard);
}

/* Loop passes that poll without waiting: what is ready now is handled. */
static void run_quiet(struct fixture *f)
{
    for (int i = 0; i < QUIET_PASSES; i++) {
        (void)uv_run(&f->loop, UV_RUN_NOWAIT);
    }
}

/* A task of pool p1 running "true" in /tmp, as api/exec_args.c decodes it, for the sink;
 * profile: its token's egress profile, or NULL. */
static void new_task(struct fixture *f, const char *profile)
{
    struct task_spec spec = TASK_SPEC_INIT;
    spec.pool = &f->pc;
    task_spec_begin(&spec, 64);
    assert_int_equal(task_spec_add_arg(&spec, "true", 4), 0);
    str_copy(spec.cwd, "/tmp", sizeof(spec.cwd));
    spec.timeout_ns = f->timeout_ns;
    spec.stdin = f->with_stdin;
    spec.capture = f->with_capture;
    spec.net_profile = profile ? xstrdup(profile) : NULL;
    struct task_sink sink = {.ops = &sink_ops, .arg = f};
    struct err e = ERR_INIT;
    assert_int_equal(task_new(&f->env, &sink, MSGID, &f->pool, &spec, &f->t, &e), 0);
    assert_null(spec.strings); /* the task's now */
    assert_null(spec.net_profile);
    assert_int_equal(task_msgid(f->t), MSGID);
    assert_string_equal(task_id(f->t), "00000abc00000001");
    assert_ptr_equal(task_sink(f->t)->arg, f);
    fake_expect_none(); /* making a task asks no one anything */
}

/* Queued (the pool has no warm sandbox) and admitted, as rpc.c does it. */
static void queue_task(struct fixture *f)
{
    assert_int_equal(task_submit(f->t), 0);
    task_admit(f->t);
    fake_expectf("pool_submit p1; audit decision allowed=1");
    assert_non_null(fake_pool_waiter);
}

/* What task_start does once the pool hands a queued task sandbox sb1 (not admitted again),
 * up to exec.started. */
#define STARTED_CALLS                                                                              \
    "metrics_task_start; sched_task_started; audit assigned sb1 cold=1; "                          \
    "egress_session_start - sb1; sandbox_start_task sb1 argv0=true cwd=/tmp; "                     \
    "audit started pid=2; metrics_task_running; sink started sb1"

/* The pool hands the queued task sandbox sb1. */
static void start_task(struct fixture *f)
{
    f->sb = fake_task_sandbox("sb1");
    fake_pool_got(f->sb);
    fake_expectf(STARTED_CALLS);
    assert_ptr_equal(f->sb->task, f->t);
}

/* A task queued, then started in sb1. */
static void running_task(struct fixture *f)
{
    new_task(f, NULL);
    queue_task(f);
    start_task(f);
}

/* init was reaped (the sandbox was killed or died) and the task's pipes reached EOF: the
 * task's end, up to its wait for the audit commit. */
static void sandbox_gone(struct fixture *f)
{
    fake_task_died(f->sb);
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
}

/* The trail commits the task's chain: its result, then done. */
static void commit_result(struct fixture *f, const char *status)
{
    fake_expect_none();
    assert_null(f->res_data); /* nothing before the commit */
    assert_true(fake_audit_commit(true));
    fake_expectf("sink result %s; sink stdin_written 0; sink done; sched_task_ended", status);
    assert_int_equal(f->n_done, 1);
}

/* ---- tests ---- */

static void task_submit__queued_then_got_sandbox_starts(void **state)
{
    struct fixture *f = *state;
    new_task(f, NULL);
    queue_task(f);
    run_quiet(f);
    fake_expect_none(); /* the client hears nothing while the task waits */
    start_task(f);
    /* The sandbox got the child's ends: stdin (the client streams none) reads EOF, stdout
     * and stderr reach the client. The task's copies are closed: EOF once ours are. */
    char c;
    assert_int_equal(read(fake_task_fd[0], &c, 1), 0);
    fake_task_write(1, "task output");
    run_until(f, "sink stdout");
    fake_expectf("sink stdout task output");
    fake_task_write(2, "oops");
    run_until(f, "sink stderr");
    fake_expectf("sink stderr oops");
    /* init reports the exit; whatever the task left running dies with its sandbox. */
    fake_task_exited(f->sb, W_EXITCODE(3, 0));
    fake_expectf("sandbox_kill sb1");
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
    fake_expectf("sandbox_usage sb1; sandbox_kill sb1; sandbox_detach_task sb1; "
                 "metrics_task_done exited out=11 err=4 truncated=0; audit finished exited; "
                 "audit destroyed sb1 reaped=0; audit result exited (outcome); "
                 "audit_when_committed 1");
    commit_result(f, "exited");
    assert_res_u64(f, "exit_code", 3);
    assert_res_nil(f, "signal");
    assert_res_u64(f, "stdout_bytes", 11);
    assert_res_u64(f, "stderr_bytes", 4);
    assert_res_bool(f, "truncated", false);
    assert_res_str(f, "sandbox", "sb1");
    assert_res_str(f, "task", "00000abc00000001");
    assert_res_str(f, "pool", "p1");
    assert_res_bool(f, "cold", true);
    assert_res_u64(f, "seccomp_denials", 0);
    assert_res_u64(f, "cpu_ms", 4); /* init's rusage: no cgroup usage was read */
    assert_res_nil(f, "egress");
    assert_res_lacks(f, "error");
    /* Reaped after: the task was detached, nothing more reaches it. */
    fake_task_died(f->sb);
    run_quiet(f);
    fake_expect_none();
}

static void task_submit__warm_sandbox_starts_at_once_and_admits(void **state)
{
    struct fixture *f = *state;
    new_task(f, NULL);
    f->sb = fake_task_sandbox("sb1");
    fake_pool_warm = f->sb;
    assert_int_equal(task_submit(f->t), 0);
    fake_expectf(
        "pool_submit p1; metrics_task_start; sched_task_started; audit decision allowed=1; "
        "audit assigned sb1 cold=0; egress_session_start - sb1; "
        "sandbox_start_task sb1 argv0=true cwd=/tmp; audit started pid=2; "
        "metrics_task_running; sink started sb1");
    task_admit(f->t); /* once only */
    fake_expect_none();
    fake_task_exited(f->sb, W_EXITCODE(0, 0));
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
    fake_calls_reset();
    commit_result(f, "exited");
    assert_res_bool(f, "cold", false);
    assert_res_u64(f, "exit_code", 0);
}

static void task_committed__unwritable_trail_withholds_the_result(void **state)
{
    struct fixture *f = *state;
    running_task(f);
    fake_task_exited(f->sb, W_EXITCODE(0, 0));
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
    fake_calls_reset();
    task_kill(f->t, KILL_SHUTDOWN); /* done, waiting for the trail: nothing to kill */
    task_stdin(f->t, "x", 1);       /* nor to write to */
    fake_expect_none();
    assert_true(fake_audit_commit(false));
    fake_expectf("sink error internal: the audit trail cannot be written: the result is withheld; "
                 "sink stdin_written 0; sink done; sched_task_ended");
    assert_null(f->res_data);
}

static void task_fail__full_queue_answers_busy_and_frees(void **state)
{
    struct fixture *f = *state;
    new_task(f, NULL);
    fake_pool_submit_r = -EBUSY;
    assert_int_equal(task_submit(f->t), -EBUSY);
    fake_expectf("pool_submit p1");
    /* What rpc.c does on -EBUSY: the task was never admitted. */
    task_fail(f->t, "busy", "pool 'p1' is full: 0 tasks already waiting");
    fake_expectf("audit decision allowed=0 busy; audit result denied busy; "
                 "sink error busy: pool 'p1' is full: 0 tasks already waiting; "
                 "sink stdin_written 0; sink done");
    assert_int_equal(f->n_done, 1);
    assert_null(fake_pool_waiter);
    run_quiet(f);
    fake_expect_none(); /* freed once its handles closed (teardown: the loop is empty) */
}

static void task_fail__draining_answers_shutting_down(void **state)
{
    struct fixture *f = *state;
    new_task(f, NULL);
    fake_pool_submit_r = -ESHUTDOWN;
    assert_int_equal(task_submit(f->t), -ESHUTDOWN);
    task_fail(f->t, "shutting_down", "sbxd is shutting down");
    fake_expectf(
        "pool_submit p1; audit decision allowed=0 shutting_down; "
        "audit result denied shutting_down; sink error shutting_down: sbxd is shutting down; "
        "sink stdin_written 0; sink done");
}

static void waiter_refused__sandbox_failing_while_the_task_waits(void **state)
{
    struct fixture *f = *state;
    new_task(f, NULL);
    queue_task(f);
    /* The pool gave up on its creations (three failures, nothing alive): the queued task
     * was admitted, so its result is an error, not a denial. */
    fake_pool_refused("internal", "pool 'p1' cannot create sandboxes: spawn failed");
    fake_expectf("audit result error internal; "
                 "metrics_task_done error no_sandbox out=0 err=0 truncated=0; "
                 "sink error internal: pool 'p1' cannot create sandboxes: spawn failed; "
                 "sink stdin_written 0; sink done");
    assert_null(fake_pool_waiter);
    run_quiet(f);
    fake_expect_none();
}

static void task_client_gone__while_queued_cancels_the_waiter(void **state)
{
    struct fixture *f = *state;
    new_task(f, NULL);
    queue_task(f);
    task_client_gone(f->t);
    fake_expectf("sink stdin_written 0; sink done; pool_cancel p1; audit result cancelled; "
                 "metrics_task_done cancelled out=0 err=0 truncated=0");
    assert_null(fake_pool_waiter);
    run_quiet(f);
    fake_expect_none(); /* nothing sent after done (the sink asserts it) */
}

static void task_client_gone__while_running_kills_sends_nothing_and_is_cancelled(void **state)
{
    struct fixture *f = *state;
    running_task(f);
    task_client_gone(f->t);
    fake_expectf("sink stdin_written 0; sink done; sandbox_kill sb1");
    /* What the task still writes is read (and counted), not sent. */
    fake_task_write(1, "late");
    sandbox_gone(f);
    /* Cancelled, not an error of sbx: in the metrics and in the trail, with a true reason. */
    fake_expectf("sandbox_usage sb1; metrics_task_done cancelled out=4 err=0 truncated=0; "
                 "audit finished cancelled; audit destroyed sb1 reaped=1; "
                 "audit result cancelled (outcome): the client left before the task finished; "
                 "audit_when_committed 1");
    assert_true(fake_audit_commit(true));
    fake_expectf("sched_task_ended");
    assert_null(f->res_data);
    assert_int_equal(f->n_done, 1);
}

static void task_sandbox_died__before_the_task_finished_is_signaled(void **state)
{
    struct fixture *f = *state;
    running_task(f);
    fake_usage.cpu_ns = 7 * 1000 * 1000;
    fake_usage.mem_peak_bytes = 1 << 20;
    sandbox_gone(f);
    /* Its usage was read as it was reaped (the sandbox is gone by the finish). */
    fake_expectf("sandbox_usage sb1; metrics_task_done signaled out=0 err=0 truncated=0; "
                 "audit finished signaled; audit destroyed sb1 reaped=1; "
                 "audit result signaled (outcome); audit_when_committed 1");
    commit_result(f, "signaled");
    assert_res_nil(f, "exit_code");
    assert_res_u64(f, "signal", SIGKILL); /* as waitpid reports a SIGKILL death */
    assert_res_u64(f, "cpu_ms", 7);
    assert_res_u64(f, "mem_peak_bytes", 1 << 20);
    assert_res_lacks(f, "error");
}

static void task_sandbox_died__oom_killed_is_oom(void **state)
{
    struct fixture *f = *state;
    running_task(f);
    fake_usage.oom = true;
    fake_usage.oom_kills = 1;
    sandbox_gone(f);
    fake_calls_reset();
    commit_result(f, "oom");
    assert_res_u64(f, "signal", SIGKILL);
    assert_res_nil(f, "exit_code");
}

static void task_sandbox_event__exec_failed_is_an_error_with_its_stage(void **state)
{
    struct fixture *f = *state;
    running_task(f);
    fake_task_exec_failed(f->sb, CTL_STAGE_EXEC, -ENOENT, "true");
    fake_expectf("sandbox_kill sb1");
    fake_task_exited(f->sb, W_EXITCODE(0, 0)); /* a second report changes nothing */
    fake_expect_none();
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
    fake_expectf("sandbox_usage sb1; sandbox_kill sb1; sandbox_detach_task sb1; "
                 "metrics_task_done error exec out=0 err=0 truncated=0; audit finished error; "
                 "audit destroyed sb1 reaped=0; "
                 "audit result error (outcome): cannot execute the command: true: ENOENT; "
                 "audit_when_committed 1");
    commit_result(f, "error");
    assert_res_str(f, "error_stage", "exec");
    assert_res_str(f, "error", "cannot execute the command: true: ENOENT");
    assert_res_nil(f, "exit_code");
    assert_res_nil(f, "signal");
}

static void task_start__sandbox_refusing_the_task_is_an_error(void **state)
{
    struct fixture *f = *state;
    new_task(f, NULL);
    queue_task(f);
    fake_task_start_r = -E2BIG;
    f->sb = fake_task_sandbox("sb1");
    fake_pool_got(f->sb);
    /* The sandbox is destroyed; the child's ends are closed, so the pipes reach EOF. */
    fake_expectf("metrics_task_start; sched_task_started; audit assigned sb1 cold=1; "
                 "egress_session_start - sb1; sandbox_start_task sb1 argv0=true cwd=/tmp; "
                 "sandbox_kill sb1");
    run_until(f, "audit_when_committed");
    fake_expectf("metrics_task_done error setup out=0 err=0 truncated=0; audit finished error; "
                 "audit destroyed sb1 reaped=1; "
                 "audit result error (outcome): the fake sandbox refused the task; "
                 "audit_when_committed 1");
    commit_result(f, "error");
    assert_res_str(f, "error", "the fake sandbox refused the task");
    assert_res_str(f, "error_stage", "setup");
    assert_res_str(f, "sandbox", "sb1");
}

static void task_start__egress_session_serves_the_profile_until_the_exit(void **state)
{
    struct fixture *f = *state;
    new_task(f, "web");
    queue_task(f);
    f->sb = fake_task_sandbox("sb1");
    fake_pool_got(f->sb);
    fake_expectf("metrics_task_start; sched_task_started; audit assigned sb1 cold=1; "
                 "egress_session_start web sb1; "
                 "sandbox_start_task sb1 argv0=true cwd=/tmp HTTP_PROXY=http://127.0.0.1:3128; "
                 "audit started pid=2; metrics_task_running; sink started sb1");
    /* The proxy stops with the task, not with its output. */
    fake_task_exited(f->sb, W_EXITCODE(0, 0));
    fake_expectf("sandbox_kill sb1; egress_session_end");
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
    fake_calls_reset();
    commit_result(f, "exited");
    const msgpack_object *g = res_get(f, "egress");
    assert_true(obj_is_str(map_get(g, "profile"), "web"));
    assert_int_equal(map_get(g, "requests")->via.u64, 1); /* the session's counts */
}

static void task_start__egress_refusing_the_session_is_an_error(void **state)
{
    struct fixture *f = *state;
    new_task(f, "web");
    queue_task(f);
    fake_egress_start_r = -ENOENT;
    f->sb = fake_task_sandbox("sb1");
    fake_pool_got(f->sb);
    /* The task is never handed to the sandbox. */
    fake_expectf("metrics_task_start; sched_task_started; audit assigned sb1 cold=1; "
                 "egress_session_start web sb1; sandbox_kill sb1");
    run_until(f, "audit_when_committed");
    fake_calls_reset();
    commit_result(f, "error");
    assert_res_str(f, "error", "the fake egress refused the session");
    assert_res_nil(f, "egress");
}

static void read_cb__output_cap_kills_the_task_at_the_cap(void **state)
{
    struct fixture *f = *state;
    f->pc.output_cap = 16; /* stdout and stderr together */
    running_task(f);
    fake_task_write(1, "0123456789");
    run_until(f, "sink stdout");
    fake_expectf("sink stdout 0123456789");
    /* The client gets exactly the cap: 6 of these 10 bytes, and the sandbox dies. */
    fake_task_write(2, "abcdefghij");
    run_until(f, "sandbox_kill");
    fake_expectf("sink stderr abcdef; sandbox_kill sb1");
    fake_task_write(1, "more");
    run_quiet(f);
    fake_expect_none(); /* nothing more is read */
    task_resume(f->t);
    run_quiet(f);
    fake_expect_none(); /* nor after a resume */
    sandbox_gone(f);
    fake_expectf("sandbox_usage sb1; metrics_task_done output_limit out=10 err=6 truncated=1; "
                 "audit finished output_limit; audit destroyed sb1 reaped=1; "
                 "audit result output_limit (outcome); audit_when_committed 1");
    commit_result(f, "output_limit");
    assert_res_bool(f, "truncated", true);
    assert_res_u64(f, "stdout_bytes", 10);
    assert_res_u64(f, "stderr_bytes", 6);
    assert_res_nil(f, "exit_code");
    assert_res_u64(f, "signal", SIGKILL);
}

static void read_cb__capture_keeps_the_output_for_the_result(void **state)
{
    struct fixture *f = *state;
    f->with_capture = true;
    running_task(f);
    /* No notification, and no backpressure: what is kept is bounded by the cap, not by
     * the connection. */
    f->congested = true;
    fake_task_write(1, "task ");
    run_quiet(f);
    fake_task_write(2, "oops");
    run_quiet(f);
    fake_task_write(1, "output\n");
    run_quiet(f);
    fake_expect_none();
    int n = -1;
    assert_int_equal(ioctl(fake_task_fd[1], FIONREAD, &n), 0);
    assert_int_equal(n, 0); /* all read */
    fake_task_exited(f->sb, W_EXITCODE(0, 0));
    fake_expectf("sandbox_kill sb1");
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
    fake_expectf("sandbox_usage sb1; sandbox_kill sb1; sandbox_detach_task sb1; "
                 "metrics_task_done exited out=12 err=4 truncated=0; audit finished exited; "
                 "audit destroyed sb1 reaped=0; audit result exited (outcome); "
                 "audit_when_committed 1");
    commit_result(f, "exited");
    assert_res_bin(f, "stdout", "task output\n");
    assert_res_bin(f, "stderr", "oops");
    assert_res_u64(f, "stdout_bytes", 12);
    assert_res_u64(f, "stderr_bytes", 4);
    assert_res_bool(f, "truncated", false);
    assert_res_u64(f, "exit_code", 0);
}

static void read_cb__capture_keeps_exactly_the_cap(void **state)
{
    struct fixture *f = *state;
    f->pc.output_cap = 16; /* stdout and stderr together */
    f->with_capture = true;
    running_task(f);
    fake_task_write(1, "0123456789");
    run_quiet(f);
    fake_expect_none();
    /* 6 of these 10 bytes are kept, and the sandbox dies. */
    fake_task_write(2, "abcdefghij");
    run_until(f, "sandbox_kill");
    fake_expectf("sandbox_kill sb1");
    fake_task_write(1, "more");
    run_quiet(f);
    fake_expect_none(); /* nothing more is read */
    sandbox_gone(f);
    fake_expectf("sandbox_usage sb1; metrics_task_done output_limit out=10 err=6 truncated=1; "
                 "audit finished output_limit; audit destroyed sb1 reaped=1; "
                 "audit result output_limit (outcome); audit_when_committed 1");
    commit_result(f, "output_limit");
    assert_res_bool(f, "truncated", true);
    assert_res_bin(f, "stdout", "0123456789");
    assert_res_bin(f, "stderr", "abcdef");
    assert_res_u64(f, "stdout_bytes", 10);
    assert_res_u64(f, "stderr_bytes", 6);
}

static void read_cb__without_capture_the_result_has_no_output(void **state)
{
    struct fixture *f = *state;
    running_task(f);
    fake_task_write(1, "x");
    run_until(f, "sink stdout");
    fake_expectf("sink stdout x");
    fake_task_exited(f->sb, W_EXITCODE(0, 0));
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
    fake_calls_reset();
    commit_result(f, "exited");
    assert_res_lacks(f, "stdout");
    assert_res_lacks(f, "stderr");
}

static void read_cb__congested_client_stops_reading_until_task_resume(void **state)
{
    struct fixture *f = *state;
    running_task(f);
    f->congested = true;
    fake_task_write(1, "a");
    run_until(f, "sink stdout");
    fake_expectf("sink stdout a");
    /* Reading stopped: the next bytes stay in the pipe. */
    fake_task_write(1, "b");
    fake_task_write(2, "c");
    run_quiet(f);
    fake_expect_none();
    int n = -1;
    assert_int_equal(ioctl(fake_task_fd[1], FIONREAD, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ioctl(fake_task_fd[2], FIONREAD, &n), 0);
    assert_int_equal(n, 1);
    f->congested = false;
    task_resume(f->t);
    run_until(f, "sink stdout b");
    run_until(f, "sink stderr c");
    fake_calls_reset();
    fake_task_exited(f->sb, W_EXITCODE(0, 0));
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
    fake_calls_reset();
    commit_result(f, "exited");
    assert_res_u64(f, "stdout_bytes", 2);
    assert_res_u64(f, "stderr_bytes", 1);
}

static void timeout_cb__the_deadline_kills_with_status_timeout(void **state)
{
    struct fixture *f = *state;
    f->timeout_ns = 20ULL * 1000 * 1000;
    running_task(f);
    run_until(f, "sandbox_kill sb1"); /* the timer */
    fake_expectf("sandbox_kill sb1");
    sandbox_gone(f);
    fake_calls_reset();
    commit_result(f, "timeout");
    assert_res_nil(f, "exit_code");
    assert_res_u64(f, "signal", SIGKILL);
    assert_res_lacks(f, "error");
}

static void task_kill__shutdown_with_the_task_running(void **state)
{
    struct fixture *f = *state;
    running_task(f);
    task_kill(f->t, KILL_SHUTDOWN); /* the drain's grace ran out */
    fake_expectf("sandbox_kill sb1");
    task_kill(f->t, KILL_TIMEOUT); /* the first reason stays */
    fake_expectf("sandbox_kill sb1");
    sandbox_gone(f);
    fake_expectf("sandbox_usage sb1; metrics_task_done error shutdown out=0 err=0 truncated=0; "
                 "audit finished error; audit destroyed sb1 reaped=1; "
                 "audit result error (outcome): sbxd shut down before the task finished; "
                 "audit_when_committed 1");
    commit_result(f, "error");
    assert_res_str(f, "error", "sbxd shut down before the task finished");
    assert_res_lacks(f, "error_stage");
    assert_res_nil(f, "exit_code");
}

static void task_token_kill__queued_task_is_refused_denied_as_token_expired(void **state)
{
    struct fixture *f = *state;
    new_task(f, NULL);
    /* rpc.c's order: submit, attach the token, admit. */
    assert_int_equal(task_submit(f->t), 0);
    task_attach_token(f->t, NULL, fake_token);
    task_admit(f->t);
    fake_expectf("pool_submit p1; token_attach; audit decision allowed=1");
    task_token_kill(fake_token_link, TOKEN_EXPIRED, NULL);
    /* A denial (its client hears "denied") and a task that ended for its token, not an
     * error of sbx. */
    fake_expectf("pool_cancel p1; metrics_denied token_expired; "
                 "audit result token_expired denied; "
                 "metrics_task_done token_expired out=0 err=0 truncated=0; "
                 "sink error denied: the token expired before the task started; "
                 "sink stdin_written 0; sink done; token_detach");
    assert_null(fake_pool_waiter);
}

static void task_token_kill__running_task_is_token_expired(void **state)
{
    struct fixture *f = *state;
    new_task(f, NULL);
    assert_int_equal(task_submit(f->t), 0);
    task_attach_token(f->t, NULL, fake_token);
    task_admit(f->t);
    fake_calls_reset();
    start_task(f);
    task_token_kill(fake_token_link, TOKEN_EXPIRED, NULL);
    fake_expectf("sandbox_kill sb1");
    sandbox_gone(f);
    fake_expectf("sandbox_usage sb1; metrics_task_done token_expired out=0 err=0 truncated=0; "
                 "audit finished token_expired; audit destroyed sb1 reaped=1; "
                 "audit result token_expired (outcome); token_detach; audit_when_committed 1");
    commit_result(f, "token_expired");
    assert_res_nil(f, "exit_code");
    assert_res_lacks(f, "error");
}

static void task_token_kill__running_task_revoked_is_token_revoked(void **state)
{
    struct fixture *f = *state;
    new_task(f, NULL);
    assert_int_equal(task_submit(f->t), 0);
    task_attach_token(f->t, NULL, fake_token);
    task_admit(f->t);
    fake_calls_reset();
    start_task(f);
    task_token_kill(fake_token_link, TOKEN_REVOKED, NULL);
    fake_expectf("sandbox_kill sb1");
    sandbox_gone(f);
    fake_calls_reset();
    commit_result(f, "token_revoked");
}

/* A session's command in sandbox sb1 (HELD, as its session has it between commands). */
static void session_task(struct fixture *f)
{
    new_task(f, NULL);
    f->sb = fake_task_sandbox("sb1");
    f->sb->state = SB_HELD;
    task_start_session(f->t, f->sb, (struct session *)f); /* any session: the fake logs */
    fake_expectf("metrics_task_start; sched_task_started; audit decision allowed=1; "
                 "audit assigned sb1 cold=0; egress_session_start - sb1; "
                 "sandbox_start_task sb1 argv0=true cwd=/tmp; audit started pid=2; "
                 "metrics_task_running; sink started sb1");
}

static void task_start_session__exit_keeps_the_sandbox_and_tells_the_session(void **state)
{
    struct fixture *f = *state;
    session_task(f);
    fake_task_kept_exited(f->sb, W_EXITCODE(0, 0));
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
    /* Neither killed nor destroyed: the sandbox is the session's again. */
    fake_expectf("sandbox_usage sb1; metrics_task_done exited out=0 err=0 truncated=0; "
                 "audit finished exited; audit result exited (outcome); "
                 "audit_when_committed 1");
    assert_true(fake_audit_commit(true));
    /* The session hears of the end before the client has the result. */
    fake_expectf("session_command_done; sink result exited; sink stdin_written 0; sink done; "
                 "sched_task_ended");
    assert_int_equal(f->sb->state, SB_HELD);
}

static void task_start_session__timeout_kills_the_command_not_the_sandbox(void **state)
{
    struct fixture *f = *state;
    f->timeout_ns = 20ULL * 1000 * 1000;
    session_task(f);
    run_until(f, "sandbox_kill_task sb1"); /* the timer */
    fake_expectf("sandbox_kill_task sb1");
    fake_task_kept_exited(f->sb, SIGKILL); /* init killed the command's processes */
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
    fake_calls_reset();
    assert_true(fake_audit_commit(true));
    fake_expectf("session_command_done; sink result timeout; sink stdin_written 0; sink done; "
                 "sched_task_ended");
    assert_res_u64(f, "signal", SIGKILL);
}

static void task_detach_session__its_session_ended_first_kills_the_sandbox(void **state)
{
    struct fixture *f = *state;
    session_task(f);
    task_kill(f->t, KILL_SESSION_CLOSED); /* session.close: the command first */
    fake_expectf("sandbox_kill_task sb1");
    task_detach_session(f->t);
    task_kill(f->t, KILL_TIMEOUT); /* without its session it goes with the sandbox */
    fake_expectf("sandbox_kill sb1");
    sandbox_gone(f);
    fake_calls_reset();
    assert_true(fake_audit_commit(true));
    /* Not told: the session is gone. */
    fake_expectf("sink result cancelled; sink stdin_written 0; sink done; sched_task_ended");
    assert_res_lacks(f, "error"); /* cancelled: the trail has why */
}

static void task_stdin__streams_to_the_child_then_closes(void **state)
{
    struct fixture *f = *state;
    f->with_stdin = true;
    running_task(f);
    assert_int_equal(fcntl(fake_task_fd[0], F_SETFL, O_NONBLOCK), 0);
    task_stdin(f->t, "hello", 5);
    fake_expectf("sink stdin_queued 5");
    run_until(f, "sink stdin_written 5");
    fake_expectf("sink stdin_written 5");
    char buf[16];
    assert_int_equal(read(fake_task_fd[0], buf, sizeof(buf)), 5);
    assert_memory_equal(buf, "hello", 5);
    assert_int_equal(read(fake_task_fd[0], buf, sizeof(buf)), -1); /* open, empty */
    assert_int_equal(errno, EAGAIN);
    task_stdin(f->t, "", 0); /* the client's end of stdin */
    run_quiet(f);
    assert_int_equal(read(fake_task_fd[0], buf, sizeof(buf)), 0);
    task_stdin(f->t, "late", 4); /* dropped */
    fake_expect_none();
    fake_task_exited(f->sb, W_EXITCODE(0, 0));
    fake_task_close_stdio();
    run_until(f, "audit_when_committed");
    fake_calls_reset();
    commit_result(f, "exited");
}

/* ---- files (core/task_files.c): STAGING and COLLECTING over a directory of the test's ---- */

/* Adds an entry of exec's files to spec: inline data, or (data NULL) size streamed bytes. */
static void spec_file(struct task_spec *spec, const char *path, const char *data, uint64_t size,
                      uint32_t mode)
{
    spec->files = xrealloc(spec->files, (spec->n_files + 1) * sizeof(*spec->files));
    struct task_spec_file *fl = &spec->files[spec->n_files++];
    *fl = (struct task_spec_file){.path = xstrdup(path), .mode = mode};
    if (data) {
        fl->size = strlen(data);
        fl->data = fl->size ? xstrdup(data) : NULL;
    } else {
        fl->size = size;
        fl->streamed = true;
        spec->files_streamed += size;
    }
    spec->files_bytes += fl->size;
}

/* A task like new_task's with files: "a/in" inline ("hello"), then "b" (5 bytes) and "c/d"
 * (3 bytes) streamed; with collect, the patterns "**". Queued. */
static void new_files_task(struct fixture *f, bool collect)
{
    struct task_spec spec = TASK_SPEC_INIT;
    spec.pool = &f->pc;
    task_spec_begin(&spec, 64);
    assert_int_equal(task_spec_add_arg(&spec, "true", 4), 0);
    str_copy(spec.cwd, "/tmp", sizeof(spec.cwd));
    spec.timeout_ns = f->timeout_ns;
    spec.capture = true;
    spec_file(&spec, "a/in", "hello", 0, 0640);
    spec_file(&spec, "b", NULL, 5, 0600);
    spec_file(&spec, "c/d", NULL, 3, 0644);
    if (collect) {
        spec.has_collect = true;
        spec.collect = xcalloc(1, sizeof(*spec.collect));
        spec.collect[0] = xstrdup("**");
        spec.n_collect = 1;
    }
    struct task_sink sink = {.ops = &sink_ops, .arg = f};
    struct err e = ERR_INIT;
    assert_int_equal(task_new(&f->env, &sink, MSGID, &f->pool, &spec, &f->t, &e), 0);
    task_spec_clear(&spec);
    queue_task(f);
}

/* The pool hands the task sandbox sb1, whose /work is a fresh directory of the test's. */
static void got_work_sandbox(struct fixture *f)
{
    str_copy(f->work, "/tmp/test_task.XXXXXX", sizeof(f->work));
    assert_non_null(mkdtemp(f->work));
    f->sb = fake_task_sandbox("sb1");
    f->sb->work_fd = open(f->work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->sb->work_fd >= 0);
    fake_pool_got(f->sb);
}

/* The sandbox's work fd is its own: closed when the sandbox would be freed. */
static void free_work_fd(struct fixture *f)
{
    f->sb->work_fd = fd_close(f->sb->work_fd);
}

static void assert_file(struct fixture *f, const char *rel, const char *want, mode_t mode)
{
    char path[256];
    (void)snprintf(path, sizeof(path), "%s/%s", f->work, rel);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, mode);
    char buf[64] = "";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    fd_close(fd);
    assert_true(n >= 0);
    buf[n] = '\0';
    assert_string_equal(buf, want);
}

static void
task_file_chunk__early_chunks_wait_then_every_file_is_written_before_the_start(void **state)
{
    struct fixture *f = *state;
    new_files_task(f, false);
    /* Queued: the chunk waits in memory, counted as stdin is. */
    assert_int_equal(task_file_chunk(f->t, "wor", 3), 0);
    fake_expectf("sink stdin_queued 3");
    got_work_sandbox(f);
    /* One job: the inline file and what came so far; nothing is sent to init yet. */
    fake_expectf("metrics_task_start; sched_task_started; audit assigned sb1 cold=1; "
                 "workq_submit");
    assert_int_equal(f->sb->state, SB_HELD); /* claimed */
    assert_int_equal(fake_workq_run(), 1);
    fake_expectf("sink stdin_written 3");
    assert_file(f, "a/in", "hello", 0640);
    /* The rest spans the two streamed entries. */
    assert_int_equal(task_file_chunk(f->t, "ldxyz", 5), 0);
    fake_expectf("sink stdin_queued 5; workq_submit");
    assert_int_equal(fake_workq_run(), 1);
    fake_expectf("sink stdin_written 5; egress_session_start - sb1; "
                 "sandbox_start_task sb1 argv0=true cwd=/tmp; audit started pid=2; "
                 "metrics_task_running; sink started sb1");
    assert_file(f, "b", "world", 0600);
    assert_file(f, "c/d", "xyz", 0644);
    fake_task_exited(f->sb, W_EXITCODE(0, 0));
    fake_task_close_stdio();
    free_work_fd(f);
    run_until(f, "audit_when_committed");
    fake_calls_reset();
    commit_result(f, "exited");
    assert_res_u64(f, "files_in_bytes", 13);
    assert_res_u64(f, "files_out_bytes", 0);
    assert_res_lacks(f, "files");
}

static void task_file_chunk__past_the_declared_total_ends_the_task_unrun(void **state)
{
    struct fixture *f = *state;
    new_files_task(f, false);
    got_work_sandbox(f);
    assert_int_equal(fake_workq_run(), 1);
    fake_calls_reset();
    assert_int_equal(task_file_chunk(f->t, "123456789", 9), -EPROTO);
    fake_expectf("sandbox_kill sb1");
    /* Later bytes of the ended task are dropped without a word. */
    assert_int_equal(task_file_chunk(f->t, "x", 1), 0);
    free_work_fd(f);
    sandbox_gone(f);
    fake_calls_reset();
    commit_result(f, "error");
    assert_res_str(f, "error_stage", "files");
    assert_res_str(f, "error",
                   "exec.file: more bytes than the request's files declared (8); "
                   "the task is not run");
    assert_res_nil(f, "exit_code");
}

static void task_sandbox_died__while_staging_ends_the_task_unrun(void **state)
{
    struct fixture *f = *state;
    new_files_task(f, false);
    got_work_sandbox(f);
    assert_int_equal(fake_workq_run(), 1);
    fake_calls_reset();
    /* It waits for the streamed bytes when its sandbox dies: the claim brings the news. */
    free_work_fd(f);
    sandbox_gone(f);
    assert_null(strstr(fake_calls(), "sandbox_start_task"));
    fake_calls_reset();
    commit_result(f, "error");
    assert_res_str(f, "error", "the sandbox died before the command started");
}

static void task_client_gone__while_a_files_job_runs_frees_the_task_after_the_job(void **state)
{
    struct fixture *f = *state;
    new_files_task(f, false);
    got_work_sandbox(f);
    assert_int_equal(fake_workq_pending(), 1);
    fake_calls_reset();
    /* The client leaves while the job is queued: the sandbox dies, the task ends. */
    task_client_gone(f->t);
    fake_expectf("sink stdin_written 0; sink done; sandbox_kill sb1");
    free_work_fd(f);
    fake_task_died(f->sb);
    run_until(f, "audit_when_committed");
    assert_true(fake_audit_commit(true));
    fake_calls_reset();
    /* The job still runs on its own fd and buffers, then lets go of the task (freed in
     * teardown's loop run once its handles close). */
    assert_int_equal(fake_workq_run(), 1);
    fake_expect_none();
    assert_file(f, "a/in", "hello", 0640);
}

static void files_timeout_cb__bytes_missing_at_files_timeout_end_the_queued_task(void **state)
{
    struct fixture *f = *state;
    f->pc.files_timeout_ns = 1000000; /* 1 ms */
    new_files_task(f, false);
    assert_int_equal(task_file_chunk(f->t, "wo", 2), 0);
    run_until(f, "audit_when_committed");
    fake_expectf("sink stdin_queued 2; pool_cancel p1; "
                 "metrics_task_done error files out=0 err=0 truncated=0; audit finished error; "
                 "audit result error (outcome): the files did not arrive within files_timeout "
                 "(0.001 s); audit_when_committed 1");
    assert_true(fake_audit_commit(true));
    fake_expectf("sink result error; sink stdin_written 2; sink done");
    assert_res_str(f, "error_stage", "files");
}

static void task_files_collect__reads_work_after_the_exit_into_the_result(void **state)
{
    struct fixture *f = *state;
    f->pc.collect_max_bytes = 1 << 20;
    f->pc.collect_max_files = 100;
    new_files_task(f, true);
    got_work_sandbox(f);
    assert_int_equal(fake_workq_run(), 1);
    assert_int_equal(task_file_chunk(f->t, "worldxyz", 8), 0);
    assert_int_equal(fake_workq_run(), 1);
    assert_non_null(strstr(fake_calls(), "sandbox_start_task"));
    /* The task writes a file of its own, and exits; the sandbox goes (its fd with it), the
     * task's dup stays for the collect. */
    char path[128];
    (void)snprintf(path, sizeof(path), "%s/out", f->work);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0 && write(fd, "result", 6) == 6);
    fd_close(fd);
    fake_task_exited(f->sb, W_EXITCODE(0, 0));
    fake_task_close_stdio();
    free_work_fd(f);
    fake_task_died(f->sb);
    fake_calls_reset();
    run_until(f, "workq_submit");
    fake_expectf("workq_submit"); /* no result before the collect */
    assert_int_equal(fake_workq_run(), 1);
    run_until(f, "audit_when_committed");
    fake_calls_reset();
    commit_result(f, "exited");
    assert_res_u64(f, "files_out_bytes", 19);
    assert_res_bool(f, "collect_truncated", false);
    const msgpack_object *files = res_get(f, "files");
    assert_int_equal(files->type, MSGPACK_OBJECT_ARRAY);
    const char *want[][2] = {{"a/in", "hello"}, {"b", "world"}, {"c/d", "xyz"}, {"out", "result"}};
    assert_int_equal(files->via.array.size, 4);
    for (uint32_t i = 0; i < 4; i++) {
        const msgpack_object *fl = &files->via.array.ptr[i];
        assert_true(obj_is_str(map_get(fl, "path"), want[i][0]));
        const msgpack_object *d = map_get(fl, "data");
        assert_int_equal(d->via.bin.size, strlen(want[i][1]));
        assert_memory_equal(d->via.bin.ptr, want[i][1], strlen(want[i][1]));
    }
}

int main(void)
{
    /* A write to a pipe whose reader is gone is EPIPE, as in sbxd. */
    (void)signal(SIGPIPE, SIG_IGN);
    /* libuv's fds made once per process (its signal pipe), before the tests count theirs. */
    uv_loop_t once;
    if (uv_loop_init(&once) != 0 || uv_loop_close(&once) != 0) {
        return 1;
    }
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(task_submit__queued_then_got_sandbox_starts),
        T(task_submit__warm_sandbox_starts_at_once_and_admits),
        T(task_committed__unwritable_trail_withholds_the_result),
        T(task_fail__full_queue_answers_busy_and_frees),
        T(task_fail__draining_answers_shutting_down),
        T(waiter_refused__sandbox_failing_while_the_task_waits),
        T(task_client_gone__while_queued_cancels_the_waiter),
        T(task_client_gone__while_running_kills_sends_nothing_and_is_cancelled),
        T(task_sandbox_died__before_the_task_finished_is_signaled),
        T(task_sandbox_died__oom_killed_is_oom),
        T(task_sandbox_event__exec_failed_is_an_error_with_its_stage),
        T(task_start__sandbox_refusing_the_task_is_an_error),
        T(task_start__egress_session_serves_the_profile_until_the_exit),
        T(task_start__egress_refusing_the_session_is_an_error),
        T(read_cb__output_cap_kills_the_task_at_the_cap),
        T(read_cb__capture_keeps_the_output_for_the_result),
        T(read_cb__capture_keeps_exactly_the_cap),
        T(read_cb__without_capture_the_result_has_no_output),
        T(read_cb__congested_client_stops_reading_until_task_resume),
        T(timeout_cb__the_deadline_kills_with_status_timeout),
        T(task_kill__shutdown_with_the_task_running),
        T(task_token_kill__queued_task_is_refused_denied_as_token_expired),
        T(task_token_kill__running_task_is_token_expired),
        T(task_token_kill__running_task_revoked_is_token_revoked),
        T(task_stdin__streams_to_the_child_then_closes),
        T(task_file_chunk__early_chunks_wait_then_every_file_is_written_before_the_start),
        T(task_file_chunk__past_the_declared_total_ends_the_task_unrun),
        T(task_sandbox_died__while_staging_ends_the_task_unrun),
        T(task_client_gone__while_a_files_job_runs_frees_the_task_after_the_job),
        T(files_timeout_cb__bytes_missing_at_files_timeout_end_the_queued_task),
        T(task_files_collect__reads_work_after_the_exit_into_the_result),
        T(task_start_session__exit_keeps_the_sandbox_and_tells_the_session),
        T(task_start_session__timeout_kills_the_command_not_the_sandbox),
        T(task_detach_session__its_session_ended_first_kills_the_sandbox),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
