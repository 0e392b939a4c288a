/* SPDX-License-Identifier: MIT */
#pragma once
/* Private to audit.c (the loop side: events, queue, waits) and audit_writer.c (the writer
 * thread: SQLite, the hash chain, pruning). Nothing else includes this. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "audit/audit.h"
#include "lib/loopwake.h"

/* Events nobody waits for are committed at most this late, or when this many queued. */
#define AUDIT_FLUSH_NS (10ULL * 1000000ULL)
#define AUDIT_FLUSH_EVENTS 512

/* One queued event. */
struct rec {
    struct rec *next;
    uint64_t ticket;
    uint64_t queued_ns; /* monotonic */
    int64_t time_ns;
    char type[AUDIT_TYPE_MAX];
    char task[AUDIT_TASK_MAX];
    bool has_task;
    size_t len;
    char fields[];
};

/* A callback waiting for a ticket to be committed (loop only). */
struct waiter {
    struct waiter *next;
    uint64_t ticket;
    audit_commit_cb cb;
    void *arg;
};

/* Loop-side fields are touched by the loop only; "under mu" ones by both threads. */
struct audit {
    uv_loop_t *loop;
    struct audit_options o;
    struct scrub *scrub;
    char *path;
    /* writer's connection: used by the opening thread, then only by the writer */
    sqlite3 *db;
    sqlite3_stmt *st_begin, *st_commit, *st_rollback, *st_insert, *st_head;
    pthread_t thread;
    bool thread_started;
    /* writer-only chain state */
    uint64_t head_seq;
    unsigned char head_hash[AUDIT_HASH_BYTES];
    uint64_t next_prune_ns;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    /* under mu */
    struct rec *q_head;
    struct rec *q_tail;
    uint64_t q_events;
    uint64_t q_bytes;
    bool stopping;
    bool give_up;
    bool failing;
    bool dead;
    uint64_t resolved;      /* every ticket <= resolved is committed or lost */
    uint64_t lost_from;     /* tickets >= lost_from are lost (0: none) */
    uint64_t urgent;        /* the highest ticket a waiter waits for */
    bool loop_handles_open; /* wake.poll and flush_timer: from audit_open to audit_shutdown */
    struct audit_stats st;
    void (*batch_hook)(void *arg, double seconds, uint64_t queued);
    void *batch_hook_arg;

    /* The writer wakes the loop after each commit (its fd open from audit_open to
     * audit_close); the loop polls it while loop_handles_open. */
    struct loop_wake wake;
    /* loop only */
    /* Wakes the writer when the oldest queued event is due (AUDIT_FLUSH_NS), so that a
     * first event costs no wake-up of its own; open while loop_handles_open. */
    uv_timer_t flush_timer;
    uint64_t next_ticket;
    struct waiter *w_head;
    struct waiter *w_tail;
    void (*idle_cb)(void *arg);
    void *idle_arg;
    uint64_t suppressed_pending;
    bool reader_busy;
};

/* audit_writer.c: opens the database (WAL, schema, the chain's head, statements) on the
 * opening thread. Returns 0 or -errno. */
int audit_writer_db_open(struct audit *a, struct err *e);
/* audit_writer.c: finalizes the statements and closes the database. */
void audit_writer_db_close(struct audit *a);
/* audit_writer.c: the writer thread's body (pthread_create argument: a). */
void *audit_writer_main(void *arg);
/* Frees a list of queued events. Any thread. */
void audit_writer_free_recs(struct rec *r);
/* CLOCK_REALTIME in nanoseconds. Any thread. */
int64_t audit_realtime_ns(void);
