/* SPDX-License-Identifier: MIT */
/* core/pool.c alone: its sandboxes, scheduler, kit and metrics are fakes (fakes/), its
 * waiters record what they were told, and its retry timer runs on a real loop. The rules:
 * a warm sandbox goes at once to a task when none waits, else tasks queue in FIFO order up
 * to the pool's queue; a failed creation backs the pool off (50 ms, doubling) and, after
 * three in a row with nothing alive, fails the queued tasks; a drain refuses the queued
 * and kills the warm, leaving running tasks to their own end; the state op keeps the
 * counters by state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/config.h"
#include "core/pool.h"
#include "core/sched.h"
#include "lib/alloc.h"
#include "lib/util.h"
#include "sandbox/kit.h"

#include "fakes/fakes.h"

#define MS (1000ULL * 1000)

struct fixture {
    uv_loop_t loop;
    struct sched sched;
    struct pool_config pc;
    struct pool *p;
};

struct waiter {
    struct pool_waiter w;
    const char *name;
    struct sandbox *sb; /* what got gave it */
    int got;
    int refused;
    char code[32];
    char msg[160];
};

static void waiter_got(struct pool_waiter *pw, struct sandbox *sb)
{
    struct waiter *w = container_of(pw, struct waiter, w);
    w->got++;
    w->sb = sb;
    fake_call("got %s %s", w->name, sb->id);
}

static void waiter_refused(struct pool_waiter *pw, const char *code, const char *message)
{
    struct waiter *w = container_of(pw, struct waiter, w);
    w->refused++;
    str_copy(w->code, code, sizeof(w->code));
    str_copy(w->msg, message, sizeof(w->msg));
    fake_call("refused %s %s", w->name, code);
}

static const struct pool_waiter_ops waiter_ops = {.got = waiter_got, .refused = waiter_refused};

#define WAITER(n)                                                                                  \
    {                                                                                              \
        .w = {.ops = &waiter_ops}, .name = (n)                                                     \
    }

/* A pool "p1" of warm, max and queue; no sandbox yet. */
static struct fixture *fixture_new(uint32_t warm, uint32_t max, uint32_t queue)
{
    struct fixture *f = xcalloc(1, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->pc.name = "p1";
    f->pc.warm = warm;
    f->pc.max = max;
    f->pc.queue = queue;
    struct sandbox_kit *kit = xcalloc(1, sizeof(*kit));
    kit->pc = &f->pc;
    struct err e = ERR_INIT;
    assert_int_equal(pool_new(&f->sched, &f->loop, kit, &f->p, &e), 0);
    assert_ptr_equal(f->p->pc, &f->pc);
    fake_calls_reset();
    return f;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    if (!f) {
        return 0;
    }
    fake_sandbox_free_all();
    pool_close(f->p); /* frees the kit (fake) and, once its timer is closed, the pool */
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&f->loop), 0); /* no handle left behind */
    free(f);
    fake_calls_reset();
    fake_kit_image_pending = false;
    *state = NULL;
    return 0;
}

/* The pool's next sandbox, made: pool_grow. */
static struct sandbox *grow(struct pool *p)
{
    size_t n = fake_n_sandbox;
    pool_grow(p);
    assert_int_equal(fake_n_sandbox, n + 1);
    return fake_sandbox[n];
}

/* A sandbox made and READY, as sandbox.c reports it: created (ok), then WARM and ready. */
static struct sandbox *warm_one(struct pool *p)
{
    struct sandbox *sb = grow(p);
    fake_sandbox_created(sb, true);
    fake_sandbox_ready(sb);
    return sb;
}

/* A creation that failed on its worker, as sandbox.c's create_done reports it: created
 * (not ok), failed, then DEAD and freed. */
static void fail_one(struct pool *p)
{
    struct sandbox *sb = grow(p);
    fake_sandbox_created(sb, false);
    fake_sandbox_failed(sb, "cgroup: no space left");
    fake_sandbox_gone(sb);
}

/* The backoff the last failure set: retry_at_ns within [before, after] + ms, and the
 * retry timer armed for ms + 1 (the loop's clock has not moved since: no uv_run). */
static void assert_backoff(struct pool *p, uint64_t before, uint64_t after, uint64_t ms)
{
    assert_in_range(p->retry_at_ns, before + ms * MS, after + ms * MS);
    assert_true(uv_is_active((uv_handle_t *)&p->retry_timer));
    assert_int_equal(uv_timer_get_due_in(&p->retry_timer), ms + 1);
    assert_int_equal(pool_wanted(p), 0);
}

static void pool_submit__full_queue_returns_ebusy(void **state)
{
    struct fixture *f = *state = fixture_new(0, 1, 1);
    struct waiter w1 = WAITER("w1"), w2 = WAITER("w2");
    assert_false(pool_full(f->p));
    assert_int_equal(pool_submit(f->p, &w1.w), 0);
    fake_expectf("sched_refill");
    assert_true(pool_full(f->p)); /* what pool_submit is about to say */
    assert_int_equal(pool_submit(f->p, &w2.w), -EBUSY);
    fake_expect_none(); /* no op, no refill */
    assert_false(w2.w.cold);
    assert_int_equal(f->p->n_queued, 1);
    assert_ptr_equal(f->p->q_head, &w1.w);
    assert_ptr_equal(f->p->q_tail, &w1.w);
    assert_int_equal(f->p->cold_starts, 0);
    assert_int_equal(f->p->tasks, 0);

    /* A queue of 0: no task ever waits. */
    f->pc.queue = 0;
    pool_cancel(f->p, &w1.w);
    assert_true(pool_full(f->p));
    assert_int_equal(pool_submit(f->p, &w1.w), -EBUSY);
    fake_expect_none();
    assert_null(f->p->q_head);
}

static void pool_submit__warm_sandbox_is_handed_at_once(void **state)
{
    struct fixture *f = *state = fixture_new(1, 2, 4);
    struct sandbox *sb = warm_one(f->p);
    assert_ptr_equal(f->p->warm_head, sb);
    fake_calls_reset();
    f->pc.queue = 0;
    assert_false(pool_full(f->p)); /* a full queue does not matter with a warm sandbox */
    f->pc.queue = 4;

    struct waiter w = WAITER("w1");
    assert_int_equal(pool_submit(f->p, &w.w), 0);
    fake_expectf("got w1 sb0; sched_refill");
    assert_int_equal(w.got, 1);
    assert_ptr_equal(w.sb, sb);
    assert_false(w.w.cold);
    assert_null(f->p->warm_head);
    assert_null(f->p->warm_tail);
    assert_int_equal(f->p->n_queued, 0);
    assert_int_equal(f->p->tasks, 1);
    assert_int_equal(f->p->cold_starts, 0);
    /* Still counted WARM until its task starts it (the state op). */
    assert_int_equal(f->p->n_state[SB_WARM], 1);
    fake_sandbox_start_task(sb);
    assert_int_equal(f->p->n_state[SB_WARM], 0);
    assert_int_equal(f->p->n_state[SB_BUSY], 1);
    /* Below its warm target again: one more wanted. */
    assert_int_equal(pool_wanted(f->p), 1);
}

static void pool_submit__queues_fifo_and_hands_in_order(void **state)
{
    struct fixture *f = *state = fixture_new(0, 3, 3);
    struct waiter w[3] = {WAITER("w1"), WAITER("w2"), WAITER("w3")};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pool_submit(f->p, &w[i].w), 0);
        assert_true(w[i].w.cold);
    }
    fake_expectf("sched_refill; sched_refill; sched_refill");
    assert_int_equal(f->p->n_queued, 3);
    /* Each queued task needs its own sandbox (warm target 0). */
    assert_int_equal(pool_wanted(f->p), 3);
    struct sandbox *sb0 = grow(f->p), *sb1 = grow(f->p), *sb2 = grow(f->p);
    fake_expectf("sched_sandbox_begun; sandbox_create sb0; sched_sandbox_begun; "
                 "sandbox_create sb1; sched_sandbox_begun; sandbox_create sb2");
    assert_int_equal(pool_wanted(f->p), 0); /* three creating for three queued */
    for (int i = 0; i < 3; i++) {
        fake_sandbox_created(fake_sandbox[i], true);
    }
    fake_expectf("sched_sandbox_created; sched_refill; sched_sandbox_created; sched_refill; "
                 "sched_sandbox_created; sched_refill");

    /* Whichever sandbox is ready first goes to the oldest waiter. */
    fake_sandbox_ready(sb1);
    fake_expectf("metrics_sandbox_ready none; got w1 sb1; sched_refill");
    fake_sandbox_ready(sb2);
    fake_expectf("metrics_sandbox_ready none; got w2 sb2; sched_refill");
    assert_int_equal(f->p->n_queued, 1);
    assert_ptr_equal(f->p->q_head, &w[2].w);
    fake_sandbox_ready(sb0);
    fake_expectf("metrics_sandbox_ready none; got w3 sb0; sched_refill");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(w[i].got, 1);
        assert_int_equal(w[i].refused, 0);
    }
    assert_int_equal(f->p->n_queued, 0);
    assert_null(f->p->q_head);
    assert_null(f->p->q_tail);
    assert_null(f->p->warm_head); /* none of them went to the warm set */
    assert_int_equal(f->p->tasks, 3);
    assert_int_equal(f->p->cold_starts, 3);
    assert_int_equal(f->p->created, 3);
}

static void pool_submit__draining_returns_eshutdown(void **state)
{
    struct fixture *f = *state = fixture_new(1, 2, 4);
    (void)warm_one(f->p);
    fake_calls_reset();
    f->sched.draining = true;
    struct waiter w = WAITER("w1");
    assert_int_equal(pool_submit(f->p, &w.w), -ESHUTDOWN);
    fake_expect_none(); /* not even the warm sandbox is handed out */
    assert_int_equal(w.got, 0);
    assert_int_equal(f->p->n_queued, 0);
    assert_int_equal(f->p->tasks, 0);
    assert_int_equal(pool_wanted(f->p), 0);
}

static void pool_cancel__client_gone_while_queued(void **state)
{
    struct fixture *f = *state = fixture_new(0, 3, 3);
    struct waiter w[3] = {WAITER("w1"), WAITER("w2"), WAITER("w3")};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pool_submit(f->p, &w[i].w), 0);
    }
    fake_calls_reset();
    pool_cancel(f->p, &w[1].w);
    fake_expect_none(); /* no op called */
    assert_int_equal(f->p->n_queued, 2);
    assert_int_equal(pool_wanted(f->p), 2);
    /* Again, and a waiter never queued: nothing. */
    pool_cancel(f->p, &w[1].w);
    struct waiter stranger = WAITER("w4");
    pool_cancel(f->p, &stranger.w);
    assert_int_equal(f->p->n_queued, 2);
    fake_expect_none();

    /* The queue goes on without it: w1, then w3. */
    (void)warm_one(f->p);
    (void)warm_one(f->p);
    fake_expectf("sched_sandbox_begun; sandbox_create sb0; sched_sandbox_created; sched_refill; "
                 "metrics_sandbox_ready none; got w1 sb0; sched_refill; "
                 "sched_sandbox_begun; sandbox_create sb1; sched_sandbox_created; sched_refill; "
                 "metrics_sandbox_ready none; got w3 sb1; sched_refill");
    assert_int_equal(w[1].got + w[1].refused, 0);
    assert_int_equal(f->p->n_queued, 0);
    assert_int_equal(f->p->tasks, 2);
    assert_int_equal(f->p->cold_starts, 2);
    /* The last one out leaves the queue empty and usable. */
    assert_null(f->p->q_head);
    assert_null(f->p->q_tail);
    assert_int_equal(pool_submit(f->p, &w[1].w), 0);
    assert_ptr_equal(f->p->q_head, &w[1].w);
    pool_cancel(f->p, &w[1].w);
    assert_null(f->p->q_head);
    assert_null(f->p->q_tail);
    assert_int_equal(f->p->n_queued, 0);
}

static void sandbox_failed__waiter_stays_queued_and_pool_backs_off(void **state)
{
    struct fixture *f = *state = fixture_new(0, 2, 2);
    struct waiter w = WAITER("w1");
    assert_int_equal(pool_submit(f->p, &w.w), 0);
    fake_calls_reset();

    uint64_t before = clock_now_ns();
    fail_one(f->p);
    uint64_t after = clock_now_ns();
    /* No refill after a failure: the retry timer does it. */
    fake_expectf("sched_sandbox_begun; sandbox_create sb0; sched_sandbox_created; "
                 "sched_sandbox_freed");
    assert_backoff(f->p, before, after, 50);
    assert_int_equal(f->p->failed, 1);
    assert_int_equal(f->p->fail_streak, 1);
    assert_int_equal(w.got + w.refused, 0);
    assert_int_equal(f->p->n_queued, 1);
    assert_int_equal(pool_live(f->p), 0);

    /* The timer fires (at its real 50 ms; early ones wait out the rest) and refills; the
     * pool wants a sandbox for the waiter again. */
    while (strstr(fake_calls(), "sched_refill") == NULL) {
        assert_int_equal(uv_run(&f->loop, UV_RUN_ONCE), 0);
    }
    fake_expectf("sched_refill");
    assert_true(clock_now_ns() >= f->p->retry_at_ns);
    assert_int_equal(pool_wanted(f->p), 1);

    /* A second failure: still waiting. */
    before = clock_now_ns();
    fail_one(f->p);
    after = clock_now_ns();
    assert_backoff(f->p, before, after, 100);
    assert_int_equal(w.got + w.refused, 0);
    assert_int_equal(f->p->n_queued, 1);
    fake_calls_reset();

    /* The third with nothing alive: the waiter is refused, with the pool's name only. */
    fail_one(f->p);
    fake_expectf("sched_sandbox_begun; sandbox_create sb2; sched_sandbox_created; "
                 "refused w1 internal; sched_sandbox_freed");
    assert_int_equal(w.refused, 1);
    assert_int_equal(w.got, 0);
    assert_string_equal(w.code, "internal");
    assert_string_equal(w.msg,
                        "sandbox creation is failing in pool 'p1'; the operator's log says why");
    assert_int_equal(f->p->n_queued, 0);
    assert_null(f->p->q_head);
    assert_null(f->p->q_tail);
    assert_int_equal(f->p->failed, 3);
    assert_int_equal(f->p->fail_streak, 3);
}

static void sandbox_failed__streak_with_a_task_running_keeps_the_queue(void **state)
{
    struct fixture *f = *state = fixture_new(1, 3, 2);
    struct sandbox *sb = warm_one(f->p);
    struct waiter running = WAITER("w0"), w1 = WAITER("w1"), w2 = WAITER("w2");
    assert_int_equal(pool_submit(f->p, &running.w), 0);
    fake_sandbox_start_task(sb);
    assert_int_equal(pool_submit(f->p, &w1.w), 0);
    assert_int_equal(pool_submit(f->p, &w2.w), 0);
    for (int i = 0; i < 5; i++) {
        fail_one(f->p);
    }
    /* A BUSY sandbox may serve them once it is replaced: they stay. */
    assert_int_equal(f->p->fail_streak, 5);
    assert_int_equal(w1.got + w1.refused + w2.got + w2.refused, 0);
    assert_int_equal(f->p->n_queued, 2);
    assert_null(strstr(fake_calls(), "refused"));
    fake_calls_reset();

    /* Once it is gone, the next failure refuses both, oldest first. */
    sandbox_kill(sb);
    fake_sandbox_gone(sb);
    fail_one(f->p);
    fake_expectf("sandbox_kill sb0; sched_sandbox_freed; sched_sandbox_begun; sandbox_create sb6; "
                 "sched_sandbox_created; refused w1 internal; refused w2 internal; "
                 "sched_sandbox_freed");
    assert_int_equal(f->p->n_queued, 0);
}

static void sandbox_failed__backoff_doubles_to_its_ceiling(void **state)
{
    struct fixture *f = *state = fixture_new(1, 2, 2);
    /* 50 ms doubling per failure in a row, up to 5 s (docs/ARCHITECTURE.md). */
    static const uint64_t want_ms[] = {50, 100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000};
    for (size_t i = 0; i < sizeof(want_ms) / sizeof(want_ms[0]); i++) {
        uint64_t before = clock_now_ns();
        fail_one(f->p);
        uint64_t after = clock_now_ns();
        assert_int_equal(f->p->fail_streak, i + 1);
        assert_backoff(f->p, before, after, want_ms[i]);
    }
    assert_int_equal(f->p->failed, 10);
    assert_int_equal(f->p->created, 0);
}

static void sandbox_ready__success_resets_the_backoff(void **state)
{
    struct fixture *f = *state = fixture_new(2, 4, 2);
    fail_one(f->p);
    fail_one(f->p);
    assert_int_equal(f->p->fail_streak, 2);
    assert_int_equal(pool_wanted(f->p), 0);
    /* A creation begun before the backoff ends well (sandbox.c's next one, say). */
    (void)warm_one(f->p);
    assert_int_equal(f->p->fail_streak, 0);
    assert_int_equal(f->p->created, 1);
    assert_int_equal(f->p->failed, 2);
    /* The next failure starts over at 50 ms. */
    uint64_t before = clock_now_ns();
    fail_one(f->p);
    uint64_t after = clock_now_ns();
    assert_int_equal(f->p->fail_streak, 1);
    assert_backoff(f->p, before, after, 50);
}

static void pool_drain__refuses_queued_with_tasks_running(void **state)
{
    struct fixture *f = *state = fixture_new(0, 3, 4);
    struct waiter w0 = WAITER("w0"), w1 = WAITER("w1"), w2 = WAITER("w2");
    assert_int_equal(pool_submit(f->p, &w0.w), 0);
    struct sandbox *busy = warm_one(f->p); /* goes to w0 */
    fake_sandbox_start_task(busy);
    assert_int_equal(pool_submit(f->p, &w1.w), 0);
    assert_int_equal(pool_submit(f->p, &w2.w), 0);
    struct sandbox *creating = grow(f->p);
    fake_calls_reset();

    f->sched.draining = true; /* sched_drain sets it, then drains each pool */
    pool_drain(f->p);
    fake_expectf("kit_drain; refused w1 shutting_down; refused w2 shutting_down");
    assert_string_equal(w1.msg, "sbxd is shutting down");
    assert_string_equal(w2.msg, "sbxd is shutting down");
    assert_true(f->p->kit->draining);
    assert_int_equal(f->p->n_queued, 0);
    assert_null(f->p->q_head);
    assert_null(f->p->q_tail);
    /* The running task and the sandbox being made are not the pool's to end. */
    assert_int_equal(w0.got, 1);
    assert_int_equal(w0.refused, 0);
    assert_int_equal(busy->state, SB_BUSY);
    assert_int_equal(creating->state, SB_CREATING);
    assert_int_equal(f->p->n_state[SB_BUSY], 1);
    assert_int_equal(f->p->n_state[SB_CREATING], 1);
    assert_int_equal(pool_wanted(f->p), 0);
}

static void pool_drain__kills_warm_with_tasks_running(void **state)
{
    struct fixture *f = *state = fixture_new(3, 4, 4);
    struct sandbox *sb0 = warm_one(f->p), *sb1 = warm_one(f->p), *sb2 = warm_one(f->p);
    struct waiter w0 = WAITER("w0");
    assert_int_equal(pool_submit(f->p, &w0.w), 0);
    assert_ptr_equal(w0.sb, sb0);
    fake_sandbox_start_task(sb0);
    fake_calls_reset();

    f->sched.draining = true;
    pool_drain(f->p);
    /* Oldest first; each kill unwarms it (sandbox.c's rule), which ends the loop. */
    fake_expectf("kit_drain; sandbox_kill sb1; sandbox_kill sb2");
    assert_null(f->p->warm_head);
    assert_null(f->p->warm_tail);
    assert_int_equal(sb0->state, SB_BUSY);
    assert_int_equal(sb1->state, SB_DYING);
    assert_int_equal(sb2->state, SB_DYING);
    assert_int_equal(f->p->n_state[SB_WARM], 0);
    assert_int_equal(f->p->n_state[SB_BUSY], 1);
    assert_int_equal(f->p->n_state[SB_DYING], 2);
    assert_int_equal(pool_live(f->p), 3);

    /* They are freed as they are reaped; the task's sandbox last. */
    fake_sandbox_gone(sb1);
    fake_sandbox_gone(sb2);
    assert_int_equal(pool_live(f->p), 1);
    sandbox_kill(sb0);
    fake_sandbox_gone(sb0);
    fake_expectf("sched_sandbox_freed; sched_sandbox_freed; sandbox_kill sb0; "
                 "sched_sandbox_freed");
    assert_int_equal(pool_live(f->p), 0);
}

static void sandbox_state__counts_by_state_until_freed(void **state)
{
    struct fixture *f = *state = fixture_new(1, 2, 2);
    const uint32_t *n = f->p->n_state;
    struct sandbox *sb = grow(f->p);
    fake_expectf("sched_sandbox_begun; sandbox_create sb0");
    assert_int_equal(n[SB_CREATING], 1); /* counted by pool_grow, before any op */
    assert_int_equal(pool_live(f->p), 1);
    fake_sandbox_created(sb, true);
    fake_sandbox_ready(sb);
    assert_int_equal(n[SB_CREATING], 0);
    assert_int_equal(n[SB_WARM], 1);
    assert_int_equal(f->p->created, 1);
    struct waiter w = WAITER("w1");
    assert_int_equal(pool_submit(f->p, &w.w), 0);
    fake_sandbox_start_task(sb);
    assert_int_equal(n[SB_WARM], 0);
    assert_int_equal(n[SB_BUSY], 1);
    sandbox_kill(sb);
    assert_int_equal(n[SB_BUSY], 0);
    assert_int_equal(n[SB_DYING], 1);
    assert_int_equal(pool_live(f->p), 1);
    fake_calls_reset();
    fake_sandbox_gone(sb); /* DEAD, counted until the freed op */
    fake_expectf("sched_sandbox_freed");
    for (int s = SB_CREATING; s <= SB_DEAD; s++) {
        assert_int_equal(n[s], 0);
    }
    assert_int_equal(pool_live(f->p), 0);
    assert_int_equal(f->p->tasks, 1);
}

static void sandbox_unwarm__a_dead_warm_sandbox_is_not_handed_out(void **state)
{
    struct fixture *f = *state = fixture_new(2, 3, 2);
    struct sandbox *sb0 = warm_one(f->p), *sb1 = warm_one(f->p);
    fake_sandbox_gone(sb0); /* died while warm: unwarmed, then freed */
    assert_ptr_equal(f->p->warm_head, sb1);
    assert_ptr_equal(f->p->warm_tail, sb1);
    fake_sandbox_gone(sb1);
    assert_null(f->p->warm_head);
    assert_null(f->p->warm_tail);
    assert_int_equal(f->p->n_state[SB_WARM], 0);
    fake_calls_reset();
    struct waiter w = WAITER("w1");
    assert_int_equal(pool_submit(f->p, &w.w), 0);
    fake_expectf("sched_refill"); /* queued */
    assert_true(w.w.cold);
    assert_int_equal(w.got, 0);
    assert_int_equal(pool_wanted(f->p), 3); /* warm 2 + 1 queued, within max 3 */
}

static void pool_wanted__warm_target_queue_max_and_image(void **state)
{
    struct fixture *f = *state = fixture_new(2, 3, 8);
    assert_int_equal(pool_wanted(f->p), 2); /* the warm target */
    fake_kit_image_pending = true;
    assert_int_equal(pool_wanted(f->p), 0); /* no sandbox before the image is verified */
    fake_kit_image_pending = false;
    struct sandbox *sb = grow(f->p);
    assert_int_equal(pool_wanted(f->p), 1); /* creating counts as ready */
    struct waiter w[3] = {WAITER("w1"), WAITER("w2"), WAITER("w3")};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pool_submit(f->p, &w[i].w), 0);
    }
    /* 2 + 3 wanted, 1 creating: 4 more, but max 3 leaves room for 2. */
    assert_int_equal(pool_wanted(f->p), 2);
    fake_sandbox_created(sb, true);
    fake_sandbox_ready(sb); /* goes to w1 */
    fake_sandbox_start_task(sb);
    /* BUSY holds a place against max; 2 + 2 queued wanted. */
    assert_int_equal(pool_wanted(f->p), 2);
    (void)grow(f->p);
    (void)grow(f->p);
    assert_int_equal(pool_wanted(f->p), 0); /* at max */
    sandbox_kill(sb);
    /* DYING holds no place: room for one more. */
    assert_int_equal(pool_wanted(f->p), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(pool_submit__full_queue_returns_ebusy, teardown),
        cmocka_unit_test_teardown(pool_submit__warm_sandbox_is_handed_at_once, teardown),
        cmocka_unit_test_teardown(pool_submit__queues_fifo_and_hands_in_order, teardown),
        cmocka_unit_test_teardown(pool_submit__draining_returns_eshutdown, teardown),
        cmocka_unit_test_teardown(pool_cancel__client_gone_while_queued, teardown),
        cmocka_unit_test_teardown(sandbox_failed__waiter_stays_queued_and_pool_backs_off, teardown),
        cmocka_unit_test_teardown(sandbox_failed__streak_with_a_task_running_keeps_the_queue,
                                  teardown),
        cmocka_unit_test_teardown(sandbox_failed__backoff_doubles_to_its_ceiling, teardown),
        cmocka_unit_test_teardown(sandbox_ready__success_resets_the_backoff, teardown),
        cmocka_unit_test_teardown(pool_drain__refuses_queued_with_tasks_running, teardown),
        cmocka_unit_test_teardown(pool_drain__kills_warm_with_tasks_running, teardown),
        cmocka_unit_test_teardown(sandbox_state__counts_by_state_until_freed, teardown),
        cmocka_unit_test_teardown(sandbox_unwarm__a_dead_warm_sandbox_is_not_handed_out, teardown),
        cmocka_unit_test_teardown(pool_wanted__warm_target_queue_max_and_image, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
