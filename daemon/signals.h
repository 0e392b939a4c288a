/* SPDX-License-Identifier: MIT */
#pragma once
/* Signals of sbxd through uv_signal: SIGTERM/SIGINT drain (a second one kills the rest),
 * SIGHUP is logged and ignored (reload is not supported yet), SIGPIPE ignored. Loop thread. */
struct daemon;

/* Before the first thread is made: the signals stay blocked in every thread sbxd makes
 * until signals_start unblocks them in the loop thread alone. */
void signals_block(void);
void signals_start(struct daemon *d);
/* At the end of the drain: later signals are ignored, and the loop may end. */
void signals_stop(struct daemon *d);
/* Once everything else is closed, before uv_loop_close (a no-op unless started). */
void signals_close(struct daemon *d);
/* Implemented in main.c: begin the drain, or (second call, or grace over) kill the rest. */
void daemon_shutdown(struct daemon *d);
