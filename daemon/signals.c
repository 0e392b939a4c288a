/* SPDX-License-Identifier: MIT */
/* uv_signal handlers: SIGTERM and SIGINT go to the owner's callback (the drain; a second one
 * kills what still runs), SIGHUP is logged and ignored, SIGPIPE is ignored process-wide. */
#define LOG_MOD "signals"
#include "signals.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "lib/alloc.h"
#include "lib/log.h"

struct signals {
    signals_term_cb on_term;
    void *arg;
    uv_work_t pool_probe; /* starts libuv's pool with the mask */
    uv_signal_t sig_term;
    uv_signal_t sig_int;
    uv_signal_t sig_hup;
    int open_handles;
};

static void on_term(uv_signal_t *h, int signum)
{
    struct signals *s = h->data;
    s->on_term(s->arg, signum);
}

static void on_hup(uv_signal_t *h, int signum)
{
    (void)h;
    log_warn("signal=%d msg=\"configuration reload is not supported, ignoring\"", signum);
}

/* The signals sbxd handles: each thread but the loop's keeps them blocked, so that the
 * moment libuv restores a default action (signals_close) no thread can take one. */
static void signals_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
}

void signals_block(void)
{
    sigset_t set;
    signals_set(&set);
    (void)pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void pool_probe_work(uv_work_t *w)
{
    (void)w;
}

static void pool_probe_done(uv_work_t *w, int status)
{
    (void)w;
    (void)status;
}

void signals_start(uv_loop_t *loop, signals_term_cb on_term_cb, void *arg, struct signals **ret)
{
    struct signals *s = xcalloc(1, sizeof(*s));
    s->on_term = on_term_cb;
    s->arg = arg;
    (void)signal(SIGPIPE, SIG_IGN);
    uv_signal_init(loop, &s->sig_term);
    uv_signal_init(loop, &s->sig_int);
    uv_signal_init(loop, &s->sig_hup);
    s->sig_term.data = s->sig_int.data = s->sig_hup.data = s;
    uv_signal_start(&s->sig_term, on_term, SIGTERM);
    uv_signal_start(&s->sig_int, on_term, SIGINT);
    uv_signal_start(&s->sig_hup, on_hup, SIGHUP);
    s->open_handles = 3;
    *ret = s;
    /* libuv's pool threads start with the first job and inherit the mask of the thread
     * that queues it: one job now, while ours still blocks the signals (signals_block),
     * then only the loop thread takes them. Any signal that came during the start-up is
     * handled now. */
    (void)uv_queue_work(loop, &s->pool_probe, pool_probe_work, pool_probe_done);
    sigset_t set;
    signals_set(&set);
    (void)pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

void signals_stop(struct signals *s)
{
    if (!s) {
        return;
    }
    /* The drain is done. The handlers stay installed, now without keeping the loop alive,
     * until signals_close: a late signal must not turn the clean exit into a death by
     * signal while the sandboxes' cgroups and the audit trail are still being closed. */
    uv_unref((uv_handle_t *)&s->sig_term);
    uv_unref((uv_handle_t *)&s->sig_int);
    uv_unref((uv_handle_t *)&s->sig_hup);
}

static void signal_closed(uv_handle_t *h)
{
    struct signals *s = h->data;
    if (--s->open_handles == 0) {
        free(s);
    }
}

struct signals *signals_close(struct signals *s)
{
    if (!s) {
        return NULL;
    }
    signals_block(); /* pending ones go with SIG_IGN below */
    uv_close((uv_handle_t *)&s->sig_term, signal_closed);
    uv_close((uv_handle_t *)&s->sig_int, signal_closed);
    uv_close((uv_handle_t *)&s->sig_hup, signal_closed);
    /* libuv restored the default actions, which no thread can take now. */
    (void)signal(SIGTERM, SIG_IGN);
    (void)signal(SIGINT, SIG_IGN);
    (void)signal(SIGHUP, SIG_IGN);
    return NULL;
}
