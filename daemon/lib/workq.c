/* SPDX-License-Identifier: MIT */
/* Worker threads with an eventfd for completion (workq.h). */
#define LOG_MOD "workq"
#include "lib/workq.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/loopwake.h"
#include "lib/util.h"

struct workq {
    uv_loop_t *loop;
    struct loop_wake wake; /* workers -> loop: some job is done */
    int nice;
    pthread_t *threads;
    unsigned n_threads;
    /* loop only */
    uint64_t in_flight;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    /* under mu */
    struct workq_job *todo_head, *todo_tail;
    struct workq_job *done_head, *done_tail;
    bool stopping;
};

static void append(struct workq_job **head, struct workq_job **tail, struct workq_job *j)
{
    j->next = NULL;
    if (*tail) {
        (*tail)->next = j;
    } else {
        *head = j;
    }
    *tail = j;
}

static void *worker_main(void *arg)
{
    struct workq *q = arg;
    sigset_t all;
    sigfillset(&all);
    (void)pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the loop's */
    (void)setpriority(PRIO_PROCESS, 0, q->nice);  /* per thread on Linux */
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->todo_head && !q->stopping) {
            pthread_cond_wait(&q->cond, &q->mu);
        }
        struct workq_job *j = q->todo_head;
        if (!j) {
            break; /* stopping, and nothing is left to do */
        }
        q->todo_head = j->next;
        if (!q->todo_head) {
            q->todo_tail = NULL;
        }
        pthread_mutex_unlock(&q->mu);
        j->work(j);
        pthread_mutex_lock(&q->mu);
        bool was_empty = q->done_head == NULL;
        append(&q->done_head, &q->done_tail, j);
        pthread_mutex_unlock(&q->mu);
        /* One signal per batch the loop has not taken yet, after the unlock. */
        if (was_empty) {
            loopwake_signal(&q->wake);
        }
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static void jobs_done(struct loop_wake *w)
{
    struct workq *q = container_of(w, struct workq, wake);
    pthread_mutex_lock(&q->mu);
    struct workq_job *j = q->done_head;
    q->done_head = q->done_tail = NULL;
    pthread_mutex_unlock(&q->mu);
    while (j) {
        struct workq_job *next = j->next;
        if (--q->in_flight == 0) {
            uv_unref((uv_handle_t *)&q->wake.poll);
        }
        j->done(j); /* may free j, and submit more */
        j = next;
    }
}

int workq_new(uv_loop_t *loop, unsigned threads, int nice, const char *name, struct workq **ret,
              struct err *e)
{
    struct workq *q = xcalloc(1, sizeof(*q));
    q->loop = loop;
    q->nice = nice;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cond, NULL);
    int r = loopwake_init(loop, &q->wake, jobs_done, e);
    if (r < 0) {
        (void)workq_free(q);
        return err_prefix(e, r, "workq");
    }
    /* Unreferenced while no job is pending: an idle queue does not keep the loop alive. */
    uv_unref((uv_handle_t *)&q->wake.poll);
    q->threads = xcalloc(threads, sizeof(*q->threads));
    for (unsigned i = 0; i < threads; i++) {
        r = pthread_create(&q->threads[i], NULL, worker_main, q);
        if (r != 0) {
            r = err_set(e, -r, "workq: cannot start worker thread %u", i);
            (void)workq_free(q);
            return r;
        }
        q->n_threads++;
        (void)pthread_setname_np(q->threads[i], name);
    }
    *ret = q;
    return 0;
}

void workq_submit(struct workq *q, struct workq_job *j, void (*work)(struct workq_job *),
                  void (*done)(struct workq_job *))
{
    j->work = work;
    j->done = done;
    if (q->in_flight++ == 0) {
        uv_ref((uv_handle_t *)&q->wake.poll);
    }
    pthread_mutex_lock(&q->mu);
    append(&q->todo_head, &q->todo_tail, j);
    pthread_mutex_unlock(&q->mu);
    pthread_cond_signal(&q->cond);
}

struct workq *workq_free(struct workq *q)
{
    if (!q) {
        return NULL;
    }
    pthread_mutex_lock(&q->mu);
    q->stopping = true;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->mu);
    for (unsigned i = 0; i < q->n_threads; i++) {
        (void)pthread_join(q->threads[i], NULL);
    }
    if (q->in_flight) {
        log_error("jobs=%llu msg=\"worker jobs still pending at exit\"",
                  (unsigned long long)q->in_flight);
    }
    if (q->wake.polling) {
        loopwake_stop(&q->wake, NULL);
        (void)uv_run(q->loop, UV_RUN_NOWAIT); /* the handle's close */
    }
    loopwake_free(&q->wake);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->mu);
    free(q->threads);
    free(q);
    return NULL;
}
