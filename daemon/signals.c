/* SPDX-License-Identifier: MIT */
/* uv_signal handlers: SIGTERM and SIGINT start the drain (a second one kills what still
 * runs), SIGHUP is logged and ignored, SIGPIPE is ignored process-wide. */
#define LOG_MOD "signals"
#include "signals.h"

#include <signal.h>

#include "daemon.h"
#include "log.h"

static void on_term(uv_signal_t *h, int signum)
{
    struct daemon *d = h->data;
    log_info("signal=%d msg=\"%s\"", signum,
             d->draining ? "second termination signal, killing every task" : "draining");
    daemon_shutdown(d);
}

static void on_hup(uv_signal_t *h, int signum)
{
    (void)h;
    log_warn("signal=%d msg=\"configuration reload is not supported, ignoring\"", signum);
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
}

void signals_stop(struct daemon *d)
{
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    uv_close((uv_handle_t *)&d->sig_int, NULL);
    uv_close((uv_handle_t *)&d->sig_hup, NULL);
    /* libuv restored the default actions; the drain is done, so a late signal must not
     * turn the clean exit into a death by signal. */
    (void)signal(SIGTERM, SIG_IGN);
    (void)signal(SIGINT, SIG_IGN);
    (void)signal(SIGHUP, SIG_IGN);
}
