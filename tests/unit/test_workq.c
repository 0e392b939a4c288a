/* SPDX-License-Identifier: MIT */
/* sbxd's worker threads: every job's work runs off the loop and its done callback on it,
 * once each; pending jobs keep the loop alive and an idle queue does not; a done callback
 * may submit more; the workers run at the nice value asked for. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/util.h"
#include "lib/workq.h"

#define JOBS 200

struct job {
    struct workq_job j;
    int id;
    int worked;         /* by the worker */
    int done;           /* by the loop */
    pthread_t work_thr; /* the thread that ran work */
    int nice;           /* the worker's nice value while it ran work */
};

static pthread_t loop_thread;
static struct workq *q;
static int done_total;
static int resubmitted;
static struct job extra;

static void work(struct workq_job *w)
{
    struct job *jb = container_of(w, struct job, j);
    jb->worked++;
    jb->work_thr = pthread_self();
    jb->nice = getpriority(PRIO_PROCESS, 0);
    if (jb->id % 7 == 0) {
        usleep(1000); /* some jobs block, as cgroup removal does */
    }
}

static void extra_done(struct workq_job *w)
{
    struct job *jb = container_of(w, struct job, j);
    assert_true(pthread_equal(pthread_self(), loop_thread));
    jb->done++;
    done_total++;
}

static void done(struct workq_job *w)
{
    struct job *jb = container_of(w, struct job, j);
    assert_true(pthread_equal(pthread_self(), loop_thread));
    assert_int_equal(jb->worked, 1); /* work ran, and before done */
    jb->done++;
    done_total++;
    if (jb->id == JOBS - 1 && !resubmitted) {
        resubmitted = 1; /* from a done callback, as create_done does */
        extra.id = -1;
        workq_submit(q, &extra.j, work, extra_done);
    }
}

static void workq__every_job_runs_once_off_the_loop_then_done_on_it(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    loop_thread = pthread_self();
    struct err e = ERR_INIT;
    assert_int_equal(workq_new(&loop, 3, 7, "test-worker", &q, &e), 0);
    /* Idle: the queue keeps nothing alive, so the loop returns at once. */
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);

    struct job *jobs = calloc(JOBS, sizeof(*jobs));
    assert_non_null(jobs);
    for (int i = 0; i < JOBS; i++) {
        jobs[i].id = i;
        workq_submit(q, &jobs[i].j, work, done);
    }
    /* Returns only when every done callback, the resubmitted one's included, has run. */
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(done_total, JOBS + 1);
    for (int i = 0; i < JOBS; i++) {
        assert_int_equal(jobs[i].worked, 1);
        assert_int_equal(jobs[i].done, 1);
        assert_false(pthread_equal(jobs[i].work_thr, loop_thread));
        assert_int_equal(jobs[i].nice, 7);
    }
    assert_int_equal(extra.worked, 1);
    assert_int_equal(extra.done, 1);

    q = workq_free(q);
    assert_null(q);
    assert_int_equal(uv_loop_close(&loop), 0); /* the eventfd's handle is closed */
    free(jobs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(workq__every_job_runs_once_off_the_loop_then_done_on_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
