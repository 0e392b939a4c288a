/* SPDX-License-Identifier: MIT */
/* Worker threads with an eventfd for completion (workq.h). */
#define LOG_MOD "workq"
#include "workq.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "util.h"

struct workq {
    uv_loop_t *loop;
    int efd;
    uv_poll_t poll;
    bool poll_open;
    int nice;
    char name[16];
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
        /* One write per batch the loop has not taken yet; written after the unlock, so that
         * a loop woken at once finds the lock free. */
        if (was_empty) {
            uint64_t one = 1;
            (void)RETRY_EINTR(write(q->efd, &one, sizeof(one)));
        }
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    struct workq *q = h->data;
    uint64_t n;
    (void)RETRY_EINTR(read(q->efd, &n, sizeof(n)));
    pthread_mutex_lock(&q->mu);
    struct workq_job *j = q->done_head;
    q->done_head = q->done_tail = NULL;
    pthread_mutex_unlock(&q->mu);
    while (j) {
        struct workq_job *next = j->next;
        if (--q->in_flight == 0) {
            uv_unref((uv_handle_t *)&q->poll);
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
    (void)str_copy(q->name, name, sizeof(q->name));
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cond, NULL);
    q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (q->efd < 0) {
        int r = err_set(e, -errno, "workq: eventfd");
        (void)workq_free(q);
        return r;
    }
    int r = uv_poll_init(loop, &q->poll, q->efd);
    if (r < 0) {
        r = err_setx(e, r, "workq: poll an eventfd: %s", uv_strerror(r));
        (void)workq_free(q);
        return r;
    }
    q->poll_open = true;
    q->poll.data = q;
    /* Fails only for an unknown event bit. Unreferenced while no job is pending: an idle
     * queue does not keep the loop alive. */
    (void)uv_poll_start(&q->poll, UV_READABLE, poll_cb);
    uv_unref((uv_handle_t *)&q->poll);
    q->threads = xcalloc(threads, sizeof(*q->threads));
    for (unsigned i = 0; i < threads; i++) {
        r = pthread_create(&q->threads[i], NULL, worker_main, q);
        if (r != 0) {
            r = err_set(e, -r, "workq: cannot start worker thread %u", i);
            (void)workq_free(q);
            return r;
        }
        q->n_threads++;
        (void)pthread_setname_np(q->threads[i], q->name);
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
        uv_ref((uv_handle_t *)&q->poll);
    }
    pthread_mutex_lock(&q->mu);
    append(&q->todo_head, &q->todo_tail, j);
    pthread_mutex_unlock(&q->mu);
    pthread_cond_signal(&q->cond);
}

static void poll_closed(uv_handle_t *h)
{
    (void)h;
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
    if (q->poll_open) {
        uv_close((uv_handle_t *)&q->poll, poll_closed);
        (void)uv_run(q->loop, UV_RUN_NOWAIT);
    }
    q->efd = fd_close(q->efd);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->mu);
    free(q->threads);
    free(q);
    return NULL;
}
