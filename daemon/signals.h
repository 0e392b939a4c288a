/* SPDX-License-Identifier: MIT */
#pragma once
/* Signals of sbxd through uv_signal: SIGTERM/SIGINT drain (a second one kills the rest),
 * SIGHUP is logged and ignored (reload is not supported yet), SIGPIPE ignored. Loop thread. */
struct daemon;

void signals_start(struct daemon *d);
void signals_stop(struct daemon *d);
/* Implemented in main.c: begin the drain, or (second call, or grace over) kill the rest. */
void daemon_shutdown(struct daemon *d);
