/* SPDX-License-Identifier: MIT */
/* uv_signal handlers: SIGTERM and SIGINT start the drain (a second one kills what still
 * runs), SIGHUP is logged and ignored, SIGPIPE is ignored process-wide. */
#define LOG_MOD "signals"
#include "signals.h"

#include <pthread.h>
#include <signal.h>

#include "daemon.h"
#include "lib/log.h"

static void on_term(uv_signal_t *h, int signum)
{
    struct daemon *d = h->data;
    if (d->drain_done) {
        if (!d->late_signal_logged) { /* once: a flood of them would flood the log */
            d->late_signal_logged = true;
            log_info("signal=%d msg=\"drained already, exiting; ignored\"", signum);
        }
        return;
    }
    log_info("signal=%d msg=\"%s\"", signum,
             d->draining ? "second termination signal, killing every task" : "draining");
    daemon_shutdown(d);
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

void signals_start(struct daemon *d)
{
    (void)signal(SIGPIPE, SIG_IGN);
    uv_signal_init(d->loop, &d->sig_term);
    uv_signal_init(d->loop, &d->sig_int);
    uv_signal_init(d->loop, &d->sig_hup);
    d->sig_term.data = d->sig_int.data = d->sig_hup.data = d;
    uv_signal_start(&d->sig_term, on_term, SIGTERM);
    uv_signal_start(&d->sig_int, on_term, SIGINT);
    uv_signal_start(&d->sig_hup, on_hup, SIGHUP);
    d->signals_started = true;
    /* libuv's pool threads start with the first job and inherit the mask of the thread
     * that queues it: one job now, while ours still blocks the signals (signals_block),
     * then only the loop thread takes them. Any signal that came during the start-up is
     * handled now. */
    (void)uv_queue_work(d->loop, &d->signals_pool_probe, pool_probe_work, pool_probe_done);
    sigset_t set;
    signals_set(&set);
    (void)pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

void signals_stop(struct daemon *d)
{
    /* The drain is done. The handlers stay installed, now without keeping the loop alive,
     * until signals_close: a late signal must not turn the clean exit into a death by
     * signal while the sandboxes' cgroups and the audit trail are still being closed. */
    uv_unref((uv_handle_t *)&d->sig_term);
    uv_unref((uv_handle_t *)&d->sig_int);
    uv_unref((uv_handle_t *)&d->sig_hup);
}

void signals_close(struct daemon *d)
{
    if (!d->signals_started) {
        return;
    }
    d->signals_started = false;
    signals_block(); /* pending ones go with SIG_IGN below */
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    uv_close((uv_handle_t *)&d->sig_int, NULL);
    uv_close((uv_handle_t *)&d->sig_hup, NULL);
    /* libuv restored the default actions, which no thread can take now. */
    (void)signal(SIGTERM, SIG_IGN);
    (void)signal(SIGINT, SIG_IGN);
    (void)signal(SIGHUP, SIG_IGN);
}
