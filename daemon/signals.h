/* SPDX-License-Identifier: MIT */
#pragma once
/* Signals of sbxd through uv_signal: SIGTERM/SIGINT call the owner's on_term (which drains,
 * and on a second one kills the rest), SIGHUP is logged and ignored (reload is not
 * supported yet), SIGPIPE ignored. Loop thread. */
#include <uv.h>

struct signals;

/* A termination signal (SIGTERM or SIGINT) arrived. */
typedef void (*signals_term_cb)(void *arg, int signum);

/* Before the first thread is made: the signals stay blocked in every thread sbxd makes
 * until signals_start unblocks them in the loop thread alone. */
void signals_block(void);
/* Installs the handlers and unblocks the signals in the loop thread. */
void signals_start(uv_loop_t *loop, signals_term_cb on_term, void *arg, struct signals **ret);
/* At the end of the drain: the handlers no longer keep the loop alive. Accepts NULL. */
void signals_stop(struct signals *s);
/* Once everything else is closed, before uv_loop_close: closes the handles; the memory goes
 * with the last close callback. Accepts NULL; returns NULL. */
struct signals *signals_close(struct signals *s);
