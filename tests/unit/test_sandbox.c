/* SPDX-License-Identifier: MIT */
/* sandbox/sandbox.c alone: its cgroups, image, network namespaces, fork server, kit and
 * worker threads are fakes (fakes/), but its init is a real child (fake_spawn.c) whose
 * pidfd is polled, killed and reaped by the kernel, and its control socket is a real
 * SOCK_SEQPACKET pair on which the test plays init (wire/ctl.h). Its owner's and its task's
 * ops record what they are told, in order: a creation reports created, then READY makes it
 * WARM; a failed creation reports failed once; anything init says that is not the protocol
 * kills it and counts as a failed creation; a task gets its events, then died; sandbox_kill
 * is safe in every state and more than once; freed comes once, last. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "lib/alloc.h"
#include "lib/util.h"
#include "sandbox/idslot.h"
#include "sandbox/kit.h"
#include "sandbox/task_spec.h"
#include "sandbox/sandbox.h"

#include "fakes/fakes.h"

struct fixture {
    uv_loop_t loop;
    uv_timer_t guard; /* a hung test fails instead of waiting for ever */
    bool guard_fired;
    struct config cfg;
    struct pool_config pc;
    struct sandbox_env env;
    struct sandbox_kit kit;
    struct sandbox *sb; /* the sandbox the ops last named, until freed */
    char id[24];        /* the last name tracked */
    int n_failed;
    int n_freed;
    int n_died;
    bool kill_in_died; /* the task's died op kills the sandbox (as a task may) */
    int fds_before;    /* open fds once the loop was made */
};

/* ---- the owner's ops (core/pool.c's place) and the task's (core/task.c's) ---- */

static void op_state(void *arg, struct sandbox *sb, enum sandbox_state from, enum sandbox_state to)
{
    struct fixture *f = arg;
    f->sb = sb;
    fake_call("state %s->%s", sandbox_state_name(from), sandbox_state_name(to));
}

static void op_created(void *arg, struct sandbox *sb, bool ok)
{
    struct fixture *f = arg;
    f->sb = sb;
    fake_call("created ok=%d", ok);
}

static void op_ready(void *arg, struct sandbox *sb)
{
    struct fixture *f = arg;
    assert_ptr_equal(sb, f->sb);
    fake_call("ready");
}

static void op_failed(void *arg, struct sandbox *sb, const struct err *e)
{
    struct fixture *f = arg;
    f->sb = sb;
    f->n_failed++;
    fake_call("failed %s", err_msg(e));
}

static void op_unwarm(void *arg, struct sandbox *sb)
{
    struct fixture *f = arg;
    assert_ptr_equal(sb, f->sb);
    fake_call("unwarm");
}

static void op_freed(void *arg)
{
    struct fixture *f = arg;
    f->sb = NULL;
    f->n_freed++;
    fake_call("freed");
}

static const struct sandbox_ops owner_ops = {
    .state = op_state,
    .created = op_created,
    .ready = op_ready,
    .failed = op_failed,
    .unwarm = op_unwarm,
    .freed = op_freed,
};

static void task_event(void *arg, const struct ctl_event *ev)
{
    (void)arg;
    fake_call("event %s wstatus=%d", ev->type == CTL_EXITED ? "exited" : "exec_failed",
              ev->wstatus);
}

/* A session's hold (core/session.c's place). */
static void hold_died(void *arg, struct sandbox *sb)
{
    struct fixture *f = arg;
    assert_ptr_equal(sb, f->sb);
    assert_null(sb->task_ops); /* after its task's died */
    fake_call("held died");
}

static void task_died(void *arg)
{
    struct fixture *f = arg;
    f->n_died++;
    assert_null(f->sb->task_ops); /* detached first */
    fake_call("died");
    if (f->kill_in_died) {
        sandbox_kill(f->sb);
    }
}

static const struct sandbox_task_ops task_ops = {.event = task_event, .died = task_died};

static void env_track(void *arg, const char *cg_name)
{
    struct fixture *f = arg;
    str_copy(f->id, cg_name, sizeof(f->id));
    fake_call("track %s", cg_name);
}

static void env_untrack(void *arg, const char *cg_name)
{
    (void)arg;
    fake_call("untrack %s", cg_name);
}

/* ---- fixture ---- */

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->fds_before = fake_count_fds(); /* after libuv's own, made once per process */
    assert_int_equal(uv_timer_init(&f->loop, &f->guard), 0);
    f->guard.data = f;
    f->pc.name = "py_3"; /* its host name is "sbx-py-3" */
    f->pc.uid = 10001;
    f->pc.gid = 10002;
    f->pc.tmp_size = 64 << 20;
    f->pc.work_size = 32 << 20;
    f->pc.shm_size = 16 << 20;
    f->pc.nofile = 64;
    f->cfg.userns = false; /* no host id blocks */
    f->env = (struct sandbox_env){
        .loop = &f->loop,
        .cfg = &f->cfg,
        .init_path = "/nonexistent/sbxd-init",
        .instance = 0xabc,
        .track = env_track,
        .untrack = env_untrack,
        .track_arg = f,
    };
    f->kit.env = &f->env;
    f->kit.pc = &f->pc;
    fake_calls_reset();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    fake_init_cleanup();
    while (fake_kit_n_spare > 0) {
        (void)cgroup_free(fake_kit_spare[--fake_kit_n_spare]);
    }
    bool clean = f->sb == NULL && fake_workq_pending() == 0;
    if (clean) {
        /* Everything the sandboxes had is gone: handles, cgroup handles, fds. */
        uv_close((uv_handle_t *)&f->guard, NULL);
        assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
        assert_int_equal(fake_count_fds(), f->fds_before);
        assert_int_equal(uv_loop_close(&f->loop), 0);
        assert_int_equal(fake_cgroup_live, 0);
        free(f);
    } /* else a failed test: what it left is left (its handles may be on the loop) */
    fake_calls_reset();
    fake_cgroup_create_r = 0;
    fake_cgroup_reset_r = 0;
    fake_image_root_r = 0;
    fake_spawn_r = 0;
    fake_forkserver_async_r = 0;
    fake_kit_reserve = false;
    fake_cgroup_empty = true;
    memset(&fake_cgroup_usage, 0, sizeof(fake_cgroup_usage));
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

/* Runs the loop and the worker's jobs until the sandbox is freed. */
static void run_until_freed(struct fixture *f)
{
    int freed = f->n_freed;
    uv_timer_start(&f->guard, guard_cb, 10000, 0);
    while (f->n_freed == freed) {
        assert_false(f->guard_fired);
        if (fake_workq_pending() > 0) {
            (void)fake_workq_run();
        } else {
            (void)uv_run(&f->loop, UV_RUN_ONCE);
        }
    }
    uv_timer_stop(&f->guard);
    assert_int_equal(f->n_freed, freed + 1);
    assert_null(f->sb);
}

/* init's side: one packet, with up to max fds (closed unless kept). */
static ssize_t init_recv(void *buf, size_t len, int *fds, size_t max, size_t *nfds)
{
    char cbuf[CMSG_SPACE(sizeof(int) * 16)];
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
    ssize_t n = recvmsg(fake_init_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    *nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            int *in = (int *)CMSG_DATA(c);
            for (size_t i = 0; i < k; i++) {
                if (*nfds < max) {
                    fds[(*nfds)++] = in[i];
                } else {
                    (void)close(in[i]);
                }
            }
        }
    }
    assert_int_equal(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC), 0);
    return n;
}

static void init_send_fds(const void *buf, size_t len, const int *fds, size_t nfds)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    assert_int_equal(fd_sendmsg(fake_init_fd, &iov, 1, fds, nfds, MSG_NOSIGNAL), (ssize_t)len);
}

static void init_send(const void *buf, size_t len, int fd)
{
    init_send_fds(buf, len, &fd, fd >= 0 ? 1 : 0);
}

/* A tmpfs directory, as init's /work is: the host's /dev/shm. */
static int open_tmpfs_dir(void)
{
    int fd = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

/* An event; a READY comes with a tmpfs directory as init's /work. */
static void init_send_event(uint32_t type, int32_t wstatus)
{
    struct ctl_event ev = {.magic = CTL_MAGIC, .type = type, .wstatus = wstatus, .pid = 2};
    int fd = type == CTL_READY ? open_tmpfs_dir() : -1;
    init_send(&ev, sizeof(ev), fd);
    (void)fd_close(fd);
}

/* Reads the CTL_SETUP init gets and checks it is the pool's (no seccomp program). */
static void init_read_setup(struct fixture *f)
{
    char buf[sizeof(struct ctl_setup) + 64];
    int fds[1];
    size_t nfds;
    assert_int_equal(init_recv(buf, sizeof(buf), fds, 1, &nfds),
                     sizeof(struct ctl_setup) + f->kit.bpf_n * sizeof(struct sock_filter));
    assert_int_equal(nfds, 0); /* the host image: no root to attach */
    const struct ctl_setup *s = (const struct ctl_setup *)buf;
    assert_int_equal(s->magic, CTL_MAGIC);
    assert_int_equal(s->type, CTL_SETUP);
    assert_int_equal(s->uid, 10001);
    assert_int_equal(s->gid, 10002);
    assert_int_equal(s->flags, 0);
    assert_int_equal(s->seccomp_insns, f->kit.bpf_n);
    assert_int_equal(s->tmp_size, 64 << 20);
    assert_int_equal(s->work_size, 32 << 20);
    assert_int_equal(s->shm_size, 16 << 20);
    assert_string_equal(s->hostname, "sbx-py-3");
    assert_string_equal(s->image_root, "/");
    assert_int_equal(s->proxy_port, 0);
    if (f->kit.bpf_n > 0) {
        assert_memory_equal(buf + sizeof(*s), f->kit.bpf,
                            f->kit.bpf_n * sizeof(struct sock_filter));
    }
}

/* A sandbox made on the (fake) worker, its init waiting for CTL_SETUP's answer. */
static struct sandbox *made(struct fixture *f)
{
    sandbox_create(&f->kit, &owner_ops, f);
    assert_null(f->sb); /* never an op from within sandbox_create */
    assert_int_equal(fake_workq_run(), 1);
    struct sandbox *sb = f->sb;
    assert_non_null(sb);
    fake_expectf("track %s; workq_submit; cgroup_create %s; spawn_sandbox; created ok=1", f->id,
                 f->id);
    assert_int_equal(sb->state, SB_CREATING);
    assert_int_equal(sb->pid, fake_init_pid);
    assert_true(sb->pidfd >= 0);
    init_read_setup(f);
    return sb;
}

/* A sandbox made and READY. */
static struct sandbox *warm(struct fixture *f)
{
    struct sandbox *sb = made(f);
    init_send_event(CTL_READY, 0);
    run_until(f, "ready");
    fake_expectf("state creating->warm; ready");
    assert_int_equal(sb->state, SB_WARM);
    return sb;
}

/* A spec of f's pool: argv {"true"}, cwd /tmp. */
static void spec_true(struct fixture *f, struct task_spec *spec)
{
    spec->pool = &f->pc;
    task_spec_begin(spec, 64);
    assert_int_equal(task_spec_add_arg(spec, "true", 4), 0);
    str_copy(spec->cwd, "/tmp", sizeof(spec->cwd));
}

/* Hands sb a task ("true", stdio /dev/null; kept when keep); init receives it, packed with
 * the pool's nofile. */
static void start_task_keep(struct fixture *f, struct sandbox *sb, bool keep)
{
    struct ctl_task hdr = {.magic = CTL_MAGIC,
                           .type = CTL_TASK,
                           .flags = keep ? CTL_TASK_KEEP : 0,
                           .argc = 1,
                           .nofile = 64,
                           .data_len = 5};
    str_copy(hdr.cwd, "/tmp", sizeof(hdr.cwd));
    enum sandbox_state from = sb->state;
    scoped(task_spec_clear) struct task_spec spec = TASK_SPEC_INIT;
    spec_true(f, &spec);
    spec.keep = keep;
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
        assert_true(fds[i] >= 0);
    }
    struct err e = ERR_INIT;
    assert_int_equal(sandbox_start_task(sb, &spec, fds, &task_ops, f, &e), 0);
    for (int i = 0; i < 3; i++) {
        (void)close(fds[i]); /* the caller's to close */
    }
    fake_expectf("state %s->busy", sandbox_state_name(from));
    char buf[sizeof(hdr) + 64];
    int got[4];
    size_t ngot;
    assert_int_equal(init_recv(buf, sizeof(buf), got, 4, &ngot), sizeof(hdr) + 5);
    assert_int_equal(ngot, 3);
    for (size_t i = 0; i < ngot; i++) {
        (void)close(got[i]);
    }
    assert_memory_equal(buf, &hdr, sizeof(hdr));
    assert_memory_equal(buf + sizeof(hdr), "true", 5);
}

static void start_task(struct fixture *f, struct sandbox *sb)
{
    start_task_keep(f, sb, false);
}

/* ---- tests ---- */

static void sandbox_create__ready_makes_it_warm(void **state)
{
    struct fixture *f = *state;
    static const struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
        BPF_STMT(BPF_RET | BPF_K, 0x7fff0000u),
    };
    f->kit.bpf = prog;
    f->kit.bpf_n = 2;
    sandbox_create(&f->kit, &owner_ops, f);
    fake_expectf("track %s; workq_submit", f->id); /* no op yet: on a worker */
    assert_null(f->sb);
    assert_int_equal(fake_workq_run(), 1);
    struct sandbox *sb = f->sb;
    fake_expectf("cgroup_create %s; spawn_sandbox; created ok=1", f->id);
    assert_string_equal(sb->id, f->id);
    assert_int_equal(sb->state, SB_CREATING);
    /* The setup timer runs from here (the loop's clock has not moved yet). */
    assert_true(uv_is_active((uv_handle_t *)&sb->setup_timer));
    assert_int_equal(uv_timer_get_due_in(&sb->setup_timer), SANDBOX_SETUP_TIMEOUT_MS);
    init_read_setup(f); /* with the pool's seccomp program after it */
    /* Nothing from init yet: the loop's turn does not change it. */
    (void)uv_run(&f->loop, UV_RUN_NOWAIT);
    fake_expect_none();

    /* READY, with /work's root and the egress proxy's listener. */
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct ctl_event ev = {.magic = CTL_MAGIC, .type = CTL_READY, .pid = 2};
    int fds[2] = {open_tmpfs_dir(), sv[0]};
    init_send_fds(&ev, sizeof(ev), fds, 2);
    (void)close(fds[0]);
    (void)close(sv[0]);
    (void)close(sv[1]);
    run_until(f, "ready");
    fake_expectf("state creating->warm; ready");
    assert_int_equal(sb->state, SB_WARM);
    assert_int_equal(sb->task_pid, 2);
    assert_true(sb->proxy_fd >= 0);
    assert_true(sandbox_work_fd(sb) >= 0);
    assert_true(sb->ready_seen);
    assert_true(sb->ready_ns >= sb->created_ns);
    assert_false(uv_is_active((uv_handle_t *)&sb->setup_timer));
    /* A second READY changes nothing. */
    init_send_event(CTL_READY, 0);
    (void)uv_run(&f->loop, UV_RUN_NOWAIT);
    fake_expect_none();

    sandbox_kill(sb);
    fake_expectf("unwarm; state warm->dying");
    run_until_freed(f);
    fake_expectf("state dying->dead; workq_submit; cgroup_remove %s; untrack %s; freed", f->id,
                 f->id);
    assert_int_equal(f->n_failed, 0);
}

static void sandbox_create__failure_reports_failed_once_and_frees(void **state)
{
    struct fixture *f = *state;
    /* The image refused, before any cgroup: freed at once. */
    fake_image_root_r = -EACCES;
    sandbox_create(&f->kit, &owner_ops, f);
    assert_int_equal(fake_workq_run(), 1);
    fake_expectf("track %s; workq_submit; created ok=0; failed image 'fake' refused; "
                 "state creating->dead; untrack %s; freed",
                 f->id, f->id);
    assert_int_equal(f->n_failed, 1);
    assert_int_equal(f->n_freed, 1);
    fake_image_root_r = 0;

    /* The cgroup cannot be made. */
    fake_cgroup_create_r = -ENOSPC;
    sandbox_create(&f->kit, &owner_ops, f);
    assert_int_equal(fake_workq_run(), 1);
    fake_expectf("track %s; workq_submit; cgroup_create %s; created ok=0; "
                 "failed cgroup %s: fake failure; state creating->dead; untrack %s; freed",
                 f->id, f->id, f->id, f->id);
    fake_cgroup_create_r = 0;

    /* init cannot be spawned: its cgroup is removed on a worker. */
    fake_spawn_r = -ENOMEM;
    sandbox_create(&f->kit, &owner_ops, f);
    assert_int_equal(fake_workq_run(), 2);
    fake_expectf("track %s; workq_submit; cgroup_create %s; spawn_sandbox; created ok=0; "
                 "failed clone3: fake failure; state creating->dead; workq_submit; "
                 "cgroup_remove %s; untrack %s; freed",
                 f->id, f->id, f->id, f->id);
    assert_int_equal(f->n_failed, 3);
    assert_int_equal(f->n_freed, 3);
    assert_null(f->sb);
}

static void ctl_cb__garbage_from_init_is_a_failed_creation(void **state)
{
    struct fixture *f = *state;
    static const char *const cases[] = {"short", "magic", "type", "eof"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *c = cases[i];
        f->n_failed = 0;
        struct sandbox *sb = made(f);
        struct ctl_event ev = {.magic = CTL_MAGIC, .type = CTL_READY, .pid = 2};
        if (strcmp(c, "short") == 0) {
            init_send(&ev, 8, -1); /* a READY's first 8 bytes */
        } else if (strcmp(c, "magic") == 0) {
            ev.magic = CTL_MAGIC - 1; /* another layout's */
            init_send(&ev, sizeof(ev), -1);
        } else if (strcmp(c, "type") == 0) {
            ev.type = 99;
            init_send(&ev, sizeof(ev), -1);
        } else {
            fake_init_fd = fd_close(fake_init_fd); /* init's end closes */
        }
        run_until(f, "state");
        assert_int_equal(sb->state, SB_DYING);
        run_until_freed(f);
        fake_expectf("state creating->dying; failed sandbox init exited during setup; "
                     "state dying->dead; workq_submit; cgroup_remove %s; untrack %s; freed",
                     f->id, f->id);
        assert_int_equal(f->n_failed, 1);
        fake_init_cleanup();
    }
}

static void setup_timeout__silent_init_is_a_failed_creation(void **state)
{
    struct fixture *f = *state;
    struct sandbox *sb = made(f);
    /* Its own callback, rearmed to fire now rather than in SANDBOX_SETUP_TIMEOUT_MS. */
    assert_int_equal(uv_timer_get_due_in(&sb->setup_timer), SANDBOX_SETUP_TIMEOUT_MS);
    uv_timer_start(&sb->setup_timer, sb->setup_timer.timer_cb, 1, 0);
    run_until_freed(f);
    fake_expectf("failed sandbox init did not finish its setup within 10000 ms; "
                 "state creating->dying; state dying->dead; workq_submit; cgroup_remove %s; "
                 "untrack %s; freed",
                 f->id, f->id);
    assert_int_equal(f->n_failed, 1);
}

static void handle_event__setup_failed_reports_what_init_said(void **state)
{
    struct fixture *f = *state;
    (void)made(f);
    struct ctl_event ev = {
        .magic = CTL_MAGIC, .type = CTL_SETUP_FAILED, .err = -EPERM, .stage = CTL_STAGE_MOUNT};
    str_copy(ev.msg, "mount /usr\x01", sizeof(ev.msg)); /* cleaned: '?' */
    init_send(&ev, sizeof(ev), -1);
    run_until_freed(f);
    fake_expectf(
        "failed sandbox setup failed at stage 3: mount /usr?: EPERM; state creating->dying; "
        "state dying->dead; workq_submit; cgroup_remove %s; untrack %s; freed",
        f->id, f->id);
    assert_int_equal(f->n_failed, 1);
}

static void handle_event__ready_while_draining_kills_without_failure(void **state)
{
    struct fixture *f = *state;
    (void)made(f);
    f->kit.draining = true; /* kit_drain */
    init_send_event(CTL_READY, 0);
    run_until_freed(f);
    fake_expectf("state creating->dying; state dying->dead; workq_submit; cgroup_remove %s; "
                 "untrack %s; freed",
                 f->id, f->id);
    assert_int_equal(f->n_failed, 0);
}

static void sandbox_start_task__events_then_died(void **state)
{
    struct fixture *f = *state;
    struct sandbox *sb = warm(f);
    start_task(f, sb);
    assert_int_equal(sb->state, SB_BUSY);
    /* Not twice. */
    scoped(task_spec_clear) struct task_spec spec = TASK_SPEC_INIT;
    spec_true(f, &spec);
    int fds[3] = {0, 1, 2};
    struct err e = ERR_INIT;
    assert_int_equal(sandbox_start_task(sb, &spec, fds, &task_ops, f, &e), -EINVAL);
    char want[96];
    (void)snprintf(want, sizeof(want), "sandbox %s is busy, not warm", sb->id);
    assert_string_equal(err_msg(&e), want);
    fake_expect_none();

    init_send_event(CTL_EXITED, 256);
    run_until(f, "event");
    fake_expectf("event exited wstatus=256");
    assert_false(uv_is_active((uv_handle_t *)&sb->ctl_poll)); /* the last event */
    sandbox_kill(sb); /* as the task does once it has its answer */
    fake_expectf("state busy->dying");
    run_until_freed(f);
    fake_expectf("state dying->dead; died; workq_submit; cgroup_remove %s; untrack %s; freed",
                 f->id, f->id);
    assert_int_equal(f->n_died, 1);
    assert_int_equal(f->n_failed, 0);
}

static void sandbox_start_task__refuses_what_it_cannot_pack(void **state)
{
    struct fixture *f = *state;
    struct sandbox *sb = warm(f);
    int fds[3] = {0, 1, 2};
    struct err e = ERR_INIT;
    /* No argv, more mounts than CTL_TASK carries, a task of another pool. */
    scoped(task_spec_clear) struct task_spec spec = TASK_SPEC_INIT;
    spec.pool = &f->pc;
    assert_int_equal(sandbox_start_task(sb, &spec, fds, &task_ops, f, &e), -EINVAL);
    spec_true(f, &spec);
    spec.n_mounts = TASK_SPEC_MOUNTS_MAX + 1;
    assert_int_equal(sandbox_start_task(sb, &spec, fds, &task_ops, f, &e), -EINVAL);
    spec.n_mounts = 0;
    struct pool_config other = f->pc;
    spec.pool = &other;
    assert_int_equal(sandbox_start_task(sb, &spec, fds, &task_ops, f, &e), -EINVAL);
    assert_int_equal(sb->state, SB_WARM); /* still warm, nothing sent */
    fake_expect_none();
    sandbox_kill(sb);
    run_until_freed(f);
    assert_int_equal(f->n_died, 0);
}

static void pid_cb__reads_the_last_event_before_death(void **state)
{
    struct fixture *f = *state;
    struct sandbox *sb = warm(f);
    start_task(f, sb);
    /* init reports and exits before sbxd reads: the event still comes first. */
    init_send_event(CTL_EXITED, 0);
    fake_init_kill();
    run_until_freed(f);
    fake_expectf("event exited wstatus=0; state busy->dead; died; workq_submit; cgroup_remove %s; "
                 "untrack %s; freed",
                 f->id, f->id);
    assert_int_equal(f->n_died, 1);
}

static void pid_cb__init_dies_mid_task_reports_died(void **state)
{
    struct fixture *f = *state;
    struct sandbox *sb = warm(f);
    start_task(f, sb);
    fake_init_kill();
    run_until_freed(f);
    fake_expectf("state busy->dead; died; workq_submit; cgroup_remove %s; untrack %s; freed", f->id,
                 f->id);
    assert_int_equal(f->n_died, 1);
    assert_int_equal(f->n_failed, 0); /* it was made: not a failed creation */
}

static void pid_cb__warm_sandbox_that_dies_is_unwarmed(void **state)
{
    struct fixture *f = *state;
    (void)warm(f);
    fake_init_kill();
    run_until_freed(f);
    fake_expectf("unwarm; state warm->dead; workq_submit; cgroup_remove %s; untrack %s; freed",
                 f->id, f->id);
    assert_int_equal(f->n_failed, 0);
}

static void sandbox_kill__while_made_on_a_worker(void **state)
{
    struct fixture *f = *state;
    sandbox_create(&f->kit, &owner_ops, f);
    struct sandbox *sb = container_of(fake_workq_peek(), struct sandbox, job);
    sandbox_kill(sb); /* no init yet: create_done kills it */
    sandbox_kill(sb);
    assert_true(sb->kill_requested);
    fake_expectf("track %s; workq_submit", f->id);
    assert_int_equal(fake_workq_run(), 1);
    fake_expectf("cgroup_create %s; spawn_sandbox; state creating->dying; created ok=1", f->id);
    run_until_freed(f);
    /* Outside a drain a sandbox that never said READY is a failed creation, however it
     * died. */
    fake_expectf("failed sandbox init exited during setup; state dying->dead; workq_submit; "
                 "cgroup_remove %s; untrack %s; freed",
                 f->id, f->id);
    assert_int_equal(f->n_failed, 1);
}

static void sandbox_kill__in_each_state_once(void **state)
{
    struct fixture *f = *state;
    /* CREATING, init spawned. */
    struct sandbox *sb = made(f);
    sandbox_kill(sb);
    sandbox_kill(sb);
    fake_expectf("state creating->dying");
    run_until_freed(f);
    fake_expectf("failed sandbox init exited during setup; state dying->dead; workq_submit; "
                 "cgroup_remove %s; untrack %s; freed",
                 f->id, f->id);
    fake_init_cleanup();

    /* WARM: unwarmed once. */
    sb = warm(f);
    sandbox_kill(sb);
    sandbox_kill(sb);
    fake_expectf("unwarm; state warm->dying");
    run_until_freed(f);
    fake_calls_reset();
    fake_init_cleanup();

    /* BUSY, and again from its task's died op (DEAD, not yet freed), and once more
     * before the freeing worker's job runs. */
    sb = warm(f);
    start_task(f, sb);
    sandbox_kill(sb);
    sandbox_kill(sb);
    fake_expectf("state busy->dying");
    f->kill_in_died = true;
    run_until(f, "workq_submit");
    assert_int_equal(sb->state, SB_DEAD);
    sandbox_kill(sb);
    fake_expectf("state dying->dead; died; workq_submit");
    run_until_freed(f);
    fake_expectf("cgroup_remove %s; untrack %s; freed", f->id, f->id);
    assert_int_equal(f->n_freed, 3);
    assert_int_equal(f->n_died, 1);
    assert_int_equal(f->n_failed, 1);
}

static void sandbox_create__from_the_fork_server_with_a_spare_cgroup(void **state)
{
    struct fixture *f = *state;
    f->kit.forkserver = &fake_forkserver;
    struct cgroup *spare = fake_cgroup_new("spare1");
    fake_kit_spare[fake_kit_n_spare++] = spare;
    fake_kit_reserve = true;

    /* Asked on the loop: no worker, no tracking (the spare is tracked already). */
    sandbox_create(&f->kit, &owner_ops, f);
    fake_expectf("forkserver_spawn_async");
    assert_int_equal(fake_forkserver.requests, 1);
    assert_null(f->sb);
    fake_forkserver_answer(0);
    fake_expectf("created ok=1");
    struct sandbox *sb = f->sb;
    assert_string_equal(sb->cg_name, "spare1");
    init_read_setup(f);
    init_send_event(CTL_READY, 0);
    run_until(f, "ready");
    fake_expectf("state creating->warm; ready");
    /* Reset by the loop and kept for the next one: no worker's job either. */
    sandbox_kill(sb);
    run_until_freed(f);
    fake_expectf("unwarm; state warm->dying; state dying->dead; cgroup_reset spare1; "
                 "kit_put_cgroup kept; freed");
    assert_int_equal(fake_kit_n_spare, 1);
    assert_ptr_equal(fake_kit_spare[0], spare);
    assert_int_equal(f->kit.n_spare_pending, 0);
    fake_init_cleanup();

    /* The fork server is lost with the request: a failed creation; the spare stays. */
    sandbox_create(&f->kit, &owner_ops, f);
    fake_forkserver_answer(-ECONNRESET);
    fake_expectf("forkserver_spawn_async; created ok=0; failed the pool's fork server was lost; "
                 "state creating->dead; cgroup_reset spare1; kit_put_cgroup kept; freed");
    assert_int_equal(f->n_failed, 1);
    assert_int_equal(fake_kit_n_spare, 1);

    /* The kernel cannot reset it: removed on a worker, and no longer tracked. */
    fake_cgroup_reset_r = -EOPNOTSUPP;
    sandbox_create(&f->kit, &owner_ops, f);
    fake_forkserver_answer(-ECONNRESET);
    fake_expectf("forkserver_spawn_async; created ok=0; failed the pool's fork server was lost; "
                 "state creating->dead; cgroup_reset spare1; workq_submit");
    assert_int_equal(fake_workq_run(), 1);
    fake_expectf("cgroup_remove spare1; kit_put_cgroup none; untrack spare1; freed");
    assert_int_equal(fake_kit_n_spare, 0);
    assert_int_equal(f->kit.n_spare_pending, 0);

    /* No spare left: made on a worker, where the fork server is asked again. */
    sandbox_create(&f->kit, &owner_ops, f);
    assert_int_equal(fake_workq_run(), 1);
    fake_expectf("track %s; workq_submit; cgroup_create %s; forkserver_spawn; spawn_sandbox; "
                 "created ok=1",
                 f->id, f->id);
    sandbox_kill(f->sb);
    run_until_freed(f);
}

static void handle_event__ready_needs_a_tmpfs_work_dir(void **state)
{
    struct fixture *f = *state;
    static const char *const cases[] = {"none", "not tmpfs", "not a directory"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        f->n_failed = 0;
        struct sandbox *sb = made(f);
        struct ctl_event ev = {.magic = CTL_MAGIC, .type = CTL_READY, .pid = 2};
        int fd = -1;
        if (i == 1) {
            fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* the host's root */
        } else if (i == 2) {
            fd = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            int file = openat(fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600); /* on tmpfs */
            (void)close(fd);
            fd = file;
        }
        assert_true(i == 0 || fd >= 0);
        init_send(&ev, sizeof(ev), fd);
        (void)fd_close(fd);
        run_until(f, "failed");
        assert_int_equal(sb->state, SB_DYING);
        fake_expectf("failed %s; state creating->dying",
                     i == 0 ? "sandbox init sent no /work directory with READY"
                            : "sandbox init's /work is not a tmpfs directory");
        run_until_freed(f);
        assert_int_equal(f->n_failed, 1);
        fake_calls_reset();
        fake_init_cleanup();
    }
}

/* A session's sandbox: held, then kept tasks one at a time, each reported with the pid of
 * the next task's process and charged for itself; CTL_KILL ends a running one; a later
 * task cannot bring token mounts; the holder hears of the death. */
static void sandbox_start_task__kept_tasks_leave_it_held(void **state)
{
    struct fixture *f = *state;
    fake_cgroup_usage.cpu_ns = 100; /* read at READY: the setup's */
    struct sandbox *sb = warm(f);
    struct err e = ERR_INIT;
    assert_int_equal(sandbox_hold(sb, hold_died, f, &e), 0);
    fake_expectf("state warm->held");
    assert_int_equal(sandbox_hold(sb, hold_died, f, &e), -EINVAL); /* once */
    fake_expect_none();

    start_task_keep(f, sb, true);
    fake_cgroup_usage.cpu_ns = 500;
    struct ctl_event ev = {
        .magic = CTL_MAGIC, .type = CTL_EXITED, .wstatus = 0, .pid = 2, .next_pid = 7};
    init_send(&ev, sizeof(ev), -1);
    run_until(f, "event");
    /* Held before the task hears, and the task detached. */
    fake_expectf("state busy->held; event exited wstatus=0");
    assert_int_equal(sb->state, SB_HELD);
    assert_null(sb->task_ops);
    assert_int_equal(sb->task_pid, 7);
    assert_true(uv_is_active((uv_handle_t *)&sb->ctl_poll)); /* init goes on */
    struct cgroup_usage u;
    assert_int_equal(sandbox_usage(sb, &u), 0);
    assert_int_equal(u.cpu_ns, 400);
    sandbox_kill_task(sb); /* no task runs: nothing */
    fake_expect_none();

    /* Token mounts come with the first task only. */
    scoped(task_spec_clear) struct task_spec spec = TASK_SPEC_INIT;
    spec_true(f, &spec);
    spec.keep = true;
    spec.n_mounts = 1;
    spec.mount_fds[0] = -1;
    int fds[3] = {0, 1, 2};
    assert_int_equal(sandbox_start_task(sb, &spec, fds, &task_ops, f, &e), -EINVAL);
    char want[96];
    (void)snprintf(want, sizeof(want), "sandbox %s: token mounts come with its first task only",
                   sb->id);
    assert_string_equal(err_msg(&e), want);
    spec.n_mounts = 0;
    fake_expect_none();

    /* The second task is charged from its own start; CTL_KILL ends it. */
    start_task_keep(f, sb, true);
    fake_cgroup_usage.cpu_ns = 700;
    assert_int_equal(sandbox_usage(sb, &u), 0);
    assert_int_equal(u.cpu_ns, 200);
    sandbox_kill_task(sb);
    struct ctl_hdr kill;
    int got[1];
    size_t ngot;
    assert_int_equal(init_recv(&kill, sizeof(kill), got, 1, &ngot), sizeof(kill));
    assert_int_equal(ngot, 0);
    assert_int_equal(kill.magic, CTL_MAGIC);
    assert_int_equal(kill.type, CTL_KILL);
    assert_int_equal(sb->state, SB_BUSY); /* until init reports */
    ev.pid = 7;
    ev.wstatus = SIGKILL;
    ev.next_pid = 9;
    init_send(&ev, sizeof(ev), -1);
    run_until(f, "event");
    fake_expectf("state busy->held; event exited wstatus=9");
    assert_int_equal(sb->task_pid, 9);

    /* A task that is not kept: init exits after it, and the sandbox with it. */
    start_task_keep(f, sb, false);
    sandbox_kill_task(sb); /* not kept: the sandbox goes */
    fake_expectf("state busy->dying");
    run_until_freed(f);
    fake_expectf("state dying->dead; died; held died; workq_submit; cgroup_remove %s; "
                 "untrack %s; freed",
                 f->id, f->id);
}

/* A kept task's report without a next process: init exits, and the sandbox goes. */
static void handle_event__kept_task_without_next_process_ends_it(void **state)
{
    struct fixture *f = *state;
    struct sandbox *sb = warm(f);
    struct err e = ERR_INIT;
    assert_int_equal(sandbox_hold(sb, hold_died, f, &e), 0);
    fake_expectf("state warm->held");
    start_task_keep(f, sb, true);
    struct ctl_event ev = {.magic = CTL_MAGIC, .type = CTL_EXEC_FAILED, .err = -ENOENT};
    init_send(&ev, sizeof(ev), -1);
    run_until(f, "event");
    fake_expectf("state busy->dying; event exec_failed wstatus=0");
    assert_null(sb->task_ops);
    run_until_freed(f);
    fake_expectf("state dying->dead; held died; workq_submit; cgroup_remove %s; untrack %s; "
                 "freed",
                 f->id, f->id);
    assert_int_equal(f->n_died, 0); /* detached with its report */
}

static void sandbox_task_host_ids__the_task_users_ids_on_the_host(void **state)
{
    struct fixture *f = *state;
    uid_t uid;
    gid_t gid;
    /* Without user namespaces: the pool's ids themselves. */
    struct sandbox *sb = warm(f);
    sandbox_task_host_ids(sb, &uid, &gid);
    assert_int_equal(uid, 10001);
    assert_int_equal(gid, 10002);
    sandbox_kill(sb);
    run_until_freed(f);
    fake_calls_reset();
    fake_init_cleanup();

    /* With them: where the sandbox's block maps them (0 -> the block's first id). */
    struct idslots ids;
    idslot_init(&ids, 200000, 65536, 4);
    f->cfg.userns = true;
    f->cfg.userns_count = 65536;
    f->env.ids = &ids;
    sb = warm(f);
    assert_true(sb->has_ids);
    sandbox_task_host_ids(sb, &uid, &gid);
    assert_int_equal(uid, idslot_base(&ids, sb->ids) + 10001);
    assert_int_equal(gid, idslot_base(&ids, sb->ids) + 10002);
    assert_true(uid >= 200000 + 10001 && uid < 200000 + 4 * 65536);
    sandbox_kill(sb);
    run_until_freed(f);
    assert_int_equal(ids.used, 0);
    idslot_free(&ids);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(sandbox_create__ready_makes_it_warm),
        T(sandbox_create__failure_reports_failed_once_and_frees),
        T(ctl_cb__garbage_from_init_is_a_failed_creation),
        T(setup_timeout__silent_init_is_a_failed_creation),
        T(handle_event__setup_failed_reports_what_init_said),
        T(handle_event__ready_while_draining_kills_without_failure),
        T(sandbox_start_task__events_then_died),
        T(sandbox_start_task__refuses_what_it_cannot_pack),
        T(pid_cb__reads_the_last_event_before_death),
        T(pid_cb__init_dies_mid_task_reports_died),
        T(pid_cb__warm_sandbox_that_dies_is_unwarmed),
        T(sandbox_kill__while_made_on_a_worker),
        T(sandbox_kill__in_each_state_once),
        T(sandbox_create__from_the_fork_server_with_a_spare_cgroup),
        T(handle_event__ready_needs_a_tmpfs_work_dir),
        T(sandbox_start_task__kept_tasks_leave_it_held),
        T(handle_event__kept_task_without_next_process_ends_it),
        T(sandbox_task_host_ids__the_task_users_ids_on_the_host),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
