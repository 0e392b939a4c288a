/* SPDX-License-Identifier: MIT */
#pragma once
/* Private to audit.c (the loop side: events, queue, waits), audit_limit.c (budgets and
 * summaries, on the loop) and audit_writer.c and audit_prune.c (the writer thread: SQLite,
 * the hash chain, retention). Nothing else includes this. */
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
/* Rows one retention step removes at most. */
#define AUDIT_PRUNE_CHUNK 20000

/* One queued event. */
struct rec {
    struct rec *next;
    uint64_t ticket;
    uint64_t queued_ns; /* monotonic */
    int64_t time_ns;
    char type[AUDIT_TYPE_MAX];
    char task[AUDIT_TASK_MAX];
    bool has_task;
    bool refusal; /* audit_mark_refusal: pruned first */
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
    /* writer-only chain state: the committed head, and where the open transaction (rows
     * inserted ahead, not committed) has taken the chain */
    uint64_t head_seq;
    unsigned char head_hash[AUDIT_HASH_BYTES];
    bool in_tx;
    uint64_t tx_rows; /* rows before it began */
    uint64_t tx_seq;
    unsigned char tx_hash[AUDIT_HASH_BYTES];
    uint64_t next_prune_ns;
    uint64_t rows;          /* rows in the table (counted at open, then kept) */
    uint64_t page_size;     /* of the database */
    uint64_t prune_warn_ns; /* when pruning records (not refusals) may be logged again */

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
    uint64_t ahead;         /* the highest ticket to insert ahead (audit_write_ahead) */
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
    /* audit_limit.c: every live source (limits_all), and a timer that writes the summaries
     * of those that counted something (open while loop_handles_open) */
    struct audit_limit *limits_all;
    uv_timer_t limit_timer;
    bool limit_timer_on;
};

/* audit_writer.c: opens the database (WAL, schema, the chain's head, statements) on the
 * opening thread. Returns 0 or -errno. */
int audit_writer_db_open(struct audit *a, struct err *e);
/* audit_writer.c: finalizes the statements and closes the database. */
void audit_writer_db_close(struct audit *a);
/* audit_writer.c: the writer thread's body (pthread_create argument: a). */
void *audit_writer_main(void *arg);
/* audit_writer.c: inserts one chained row after (*seq, hash), advancing both, inside a
 * transaction. Writer thread. Returns 0 or -errno. */
int audit_writer_insert(struct audit *a, uint64_t *seq, unsigned char hash[AUDIT_HASH_BYTES],
                        int64_t time_ns, const char *type, const char *task, const char *fields,
                        size_t len, bool refusal, struct err *e);
/* audit_writer.c: BEGIN IMMEDIATE; and the end of a transaction chained up to (seq, hash):
 * when r is 0 the head moves there and it commits, else it rolls back. Writer thread. */
int audit_writer_begin(struct audit *a, struct err *e);
int audit_writer_finish(struct audit *a, int r, uint64_t seq,
                        const unsigned char hash[AUDIT_HASH_BYTES], struct err *e);
/* audit_prune.c: counts the rows and reads the page size (at open). Returns 0 or -errno. */
int audit_prune_open(struct audit *a, struct err *e);
/* audit_prune.c: true when the trail is over max_rows or max_bytes (prune now). */
bool audit_prune_over(struct audit *a);
/* audit_prune.c: one retention step (rows beyond max_age, then refused requests' rows,
 * then the oldest, as the limits need), recorded by an audit.pruned event in the same
 * transaction. Returns rows deleted (more may be due) or -errno. Writer thread. */
int audit_prune_step(struct audit *a, struct err *e);
/* audit.c: a summary source's timer; audit_limit.c: writes the summary of every source
 * that counted something (the timer fired, or the audit shuts down). Loop. */
void audit_limit_flush_all(struct audit *a);
/* audit_limit.c: the audit closes; sources that outlive it only log. Loop. */
void audit_limit_detach_all(struct audit *a);
/* audit_limit.c: a source counted its first event since its last summary: arms the timer. */
void audit_limit_arm(struct audit *a);
/* Frees a list of queued events. Any thread. */
void audit_writer_free_recs(struct rec *r);
/* CLOCK_REALTIME in nanoseconds. Any thread. */
int64_t audit_realtime_ns(void);
