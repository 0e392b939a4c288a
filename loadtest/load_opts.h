/* SPDX-License-Identifier: MIT */
#pragma once
/* sbx-load's command line: what to run, how hard, and how to report it. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/log.h"

#define LOAD_DEFAULT_SOCKET "./var/sbxd.sock"
#define LOAD_DEFAULT_CONCURRENCY 8
#define LOAD_PER_CONN_DEFAULT 64 /* in flight per connection when --connections is unset */
#define LOAD_OPTS_HELP (-1)

struct load_opts {
    const char *socket_path;
    uint32_t connections; /* >= 1 after parsing: one per LOAD_PER_CONN_DEFAULT in flight */
    uint32_t concurrency;
    uint64_t tasks;       /* 0: --duration decides */
    uint64_t duration_ns; /* 0: --tasks decides */
    double rate;          /* tasks per second; 0: closed loop */
    const char *pool;     /* NULL: the daemon's default */
    const char *scenario; /* --scenario FILE: tasks from it instead of argv/pool/stdin */
    double timeout_s;     /* 0: the pool's default */
    int64_t stdin_bytes;  /* -1: no stdin; else bytes streamed after exec.started, then EOF */
    uint64_t warmup;
    long pid; /* sbxd's pid for RSS and CPU, 0: none */
    bool json;
    /* --sessions: each of the concurrency slots runs its tasks in a session of its own,
     * opened before the run and closed after it. --session-open: each task is a
     * session.open (its latency is the open's) followed by its session.close. */
    bool sessions;
    bool session_open;
    char **argv; /* the command: points into main's argv or at a static default */
    size_t argc;
};

/* Parses argv into *o (strings point into argv). Returns 0 to run, LOAD_OPTS_HELP after
 * printing the help or the version to stdout, or EX_USAGE after printing why to stderr. */
int load_opts_parse(int argc, char **argv, struct load_opts *o);
/* Prints the usage text. */
void load_opts_usage(FILE *f);

/* Prints "sbx-load: <message>" and a newline on stderr. */
#define load_errorf(...) log_prog_error("sbx-load", __VA_ARGS__)
