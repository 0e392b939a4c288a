/* SPDX-License-Identifier: MIT */
#pragma once
/* The audit trail: events in SQLite (WAL) in <state_dir>/audit.db, each row hash-chained
 * to the one before it (BLAKE2b-256 over the previous hash and the row's content).
 *
 * The loop builds an event (audit_begin .. audit_end: typed fields, strings scrubbed) and
 * hands it to the writer thread through a lock-protected queue; the writer inserts what
 * has queued in one transaction per batch, then wakes the loop (an eventfd), which runs the
 * callbacks waiting for those events (audit_when_committed): a task's result is sent only
 * from such a callback, so every result a client received is in the trail.
 *
 * Bounds: events of admitted tasks are always queued; when more than AUDIT_BACKLOG_EVENTS
 * events or AUDIT_BACKLOG_BYTES bytes wait, audit_backlogged() is true and new tasks are
 * refused, and the refusals are counted (audit_suppress) rather than written one by one; an
 * "audit.suppressed" event records their number once the backlog clears. Refusals and
 * denials, which a client or a task can cause at any rate, are recorded one by one only
 * within a budget per source (audit_limit.h), then as counted summaries. Retention prunes
 * the rows of refused requests (audit_mark_refusal) before any other row younger than
 * max_age, and holds the file under max_bytes as well as max_rows.
 *
 * Other modules record their own events with audit_event(), e.g. the token module:
 *     audit_event(d->audit, "token.issue", NULL, "token_id", AUDIT_ID, id,
 *                 "pools", AUDIT_STR, pools, "expires_ns", AUDIT_U64, (uint64_t)exp, NULL);
 * Event types in use: daemon.start, daemon.stop, task.request, policy.decision,
 * sandbox.assigned, task.started, task.finished, sandbox.destroyed, task.result,
 * reaper.startup, reaper.leak, audit.pruned, audit.suppressed, rpc.refused,
 * rpc.refused.summary; token.issue, token.revoke, token.expire, proxy.denied and
 * proxy.denied.summary are reserved for the token and egress modules.
 *
 * Thread: everything here is loop-thread only unless a comment says otherwise; the writer
 * thread is private to audit.c. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "lib/err.h"

#define AUDIT_HASH_BYTES 32
#define AUDIT_HASH_HEX (2 * AUDIT_HASH_BYTES + 1)
#define AUDIT_DB_NAME "audit.db"
/* Longest event type name, and longest task id (both NUL included). */
#define AUDIT_TYPE_MAX 32
#define AUDIT_TASK_MAX 40
/* A string value is cut to this many bytes after scrubbing; an event's fields to
 * AUDIT_FIELDS_MAX (later fields are dropped and "_truncated": true is added). */
#define AUDIT_VALUE_MAX 4096
#define AUDIT_FIELDS_MAX (64 * 1024)
/* Backlog above which new tasks are refused. */
#define AUDIT_BACKLOG_EVENTS 50000
#define AUDIT_BACKLOG_BYTES (32u << 20)

struct scrub;
struct audit;
struct audit_ev;

struct audit_options {
    bool enabled;        /* false: nothing is written, waits end at once (benchmarks only) */
    uint64_t max_age_ns; /* rows older than this are pruned; 0: no age limit */
    uint64_t max_rows;   /* rows above this are pruned, refused requests' first; 0: no limit */
    uint64_t max_bytes;  /* the database file is held under this many bytes; 0: no limit */
    bool fsync;          /* synchronous=FULL (power-loss safe) rather than NORMAL */
    /* audit_limit.h: a source's budget of events recorded one by one renews every
     * budget_window_ns (0: 1 h); what it only counted is written as a summary every
     * summary_interval_ns (0: 1 min) and when the source ends. */
    uint64_t budget_window_ns;
    uint64_t summary_interval_ns;
};

/* Field kinds for audit_event's variadic list. */
enum audit_kind {
    AUDIT_STR = 1, /* const char * (NULL: null), scrubbed */
    AUDIT_ID,      /* const char * (NULL: null), an identifier of ours: not scrubbed */
    AUDIT_U64,     /* uint64_t (cast!) */
    AUDIT_I64,     /* int64_t (cast!) */
    AUDIT_BOOL,    /* int */
};

/* Opens (creating) the database at path: WAL mode, schema, the chain's head. With
 * o->enabled false nothing is opened. The writer thread starts with audit_start; events
 * made before wait in the queue. Start-up only (blocks). scrub is borrowed (may be NULL).
 * Returns 0 or -errno with e saying why. */
int audit_open(uv_loop_t *loop, const char *path, const struct audit_options *o,
               struct scrub *scrub, struct audit **ret, struct err *e);
/* Starts the writer thread. Returns 0 or -errno. */
int audit_start(struct audit *a, struct err *e);
/* The loop is ending: closes the wakeup handle (later commits wake nobody). Events may
 * still be added; audit_close writes them. */
void audit_shutdown(struct audit *a);
/* After the loop: lets the writer write every queued event (it gives up after 10 s of
 * failures, logging what was lost), joins it and frees. Accepts NULL; returns NULL. */
struct audit *audit_close(struct audit *a);

bool audit_enabled(const struct audit *a);
/* The database path ("" when disabled). */
const char *audit_path(const struct audit *a);
/* The scrubber the audit uses for strings (may be NULL). */
struct scrub *audit_scrubber(const struct audit *a);

/* ---- building events (loop) ---- */

/* Starts an event of `type` for task_id (NULL for daemon events). Returns NULL when the
 * audit is disabled (or a is NULL); every function below accepts a NULL ev and does
 * nothing. Fields are written in call order. */
struct audit_ev *audit_begin(struct audit *a, const char *type, const char *task_id);
/* A string field, scrubbed, cut to AUDIT_VALUE_MAX. val NULL writes null. */
void audit_str(struct audit_ev *ev, const char *key, const char *val);
void audit_strn(struct audit_ev *ev, const char *key, const char *val, size_t len);
/* An identifier of ours (task, sandbox, token id): escaped, not scrubbed. */
void audit_id(struct audit_ev *ev, const char *key, const char *val);
void audit_u64(struct audit_ev *ev, const char *key, uint64_t v);
void audit_i64(struct audit_ev *ev, const char *key, int64_t v);
void audit_bool(struct audit_ev *ev, const char *key, bool v);
void audit_null(struct audit_ev *ev, const char *key);
/* An array of strings: begin, any number of items (scrubbed, or ids unscrubbed), end.
 * A NULL item writes null. */
void audit_array_begin(struct audit_ev *ev, const char *key);
void audit_array_str(struct audit_ev *ev, const char *val, size_t len);
void audit_array_id(struct audit_ev *ev, const char *val);
void audit_array_end(struct audit_ev *ev);
/* An object of fields: begin, any field calls above (no nested object or array), end. */
void audit_object_begin(struct audit_ev *ev, const char *key);
void audit_object_end(struct audit_ev *ev);
/* The event belongs to a request that was refused before it became a task (rpc.refused,
 * its summaries, a refused exec's chain): retention prunes such rows before any other
 * younger than max_age, so that refusals can never push a task's chain out. */
void audit_mark_refusal(struct audit_ev *ev);
/* Queues the event and frees ev. Returns its ticket (> 0) for audit_when_committed, or 0
 * when ev is NULL. */
uint64_t audit_end(struct audit_ev *ev);
/* One-call form: fields as (const char *key, enum audit_kind, value) triples, ended by
 * NULL. Returns the ticket, or 0 when disabled. */
uint64_t audit_event(struct audit *a, const char *type, const char *task_id, ...);

/* ---- waiting for commits (loop) ---- */

/* cb(arg, committed) runs on the loop once the event with this ticket (and every one
 * before it) is committed; committed is false only when the writer gave up (the database
 * cannot be written). Runs before returning when the audit is disabled, the ticket is 0
 * or already committed. */
typedef void (*audit_commit_cb)(void *arg, bool committed);
void audit_when_committed(struct audit *a, uint64_t ticket, audit_commit_cb cb, void *arg);
/* A wait for the events queued so far will come soon (a task started, and its result waits
 * for its chain): the writer inserts them now, into a transaction it commits only when that
 * wait comes or they are due, so that the commit a result waits for holds only the events
 * queued after this call. Nothing is committed earlier than without it. */
void audit_write_ahead(struct audit *a);
/* True when every event queued so far is committed (or the audit is disabled). */
bool audit_idle(const struct audit *a);
/* Called on the loop after a commit leaves the audit idle (the drain waits for it). */
void audit_set_idle_cb(struct audit *a, void (*cb)(void *arg), void *arg);
/* True when new tasks must be refused: the backlog is above its bound, or the writer's
 * last commit failed (it retries), or it gave up. */
bool audit_backlogged(const struct audit *a);
/* When backlogged: counts one suppressed refusal and returns true (the caller writes no
 * event for it). Otherwise returns false. */
bool audit_suppress(struct audit *a);
/* The drain's grace is over: when the writer is failing (its last commit failed), it stops
 * retrying, and every waiter runs with committed = false. Otherwise nothing. */
void audit_give_up_if_failing(struct audit *a);

/* One reader job (audit.query, audit.verify) at a time, so that worker threads stay free
 * for sandboxes: acquire returns false when one runs. */
bool audit_reader_acquire(struct audit *a);
void audit_reader_release(struct audit *a);

/* ---- for metrics and tests ---- */

/* fn(arg, seconds, queued) runs on the writer thread after each committed batch: how long
 * the transaction took and how many events wait. Set it from any thread (NULL: none). */
void audit_set_batch_hook(struct audit *a, void (*fn)(void *arg, double seconds, uint64_t queued),
                          void *arg);

struct audit_stats {
    uint64_t events;        /* queued since start */
    uint64_t committed;     /* written */
    uint64_t batches;       /* transactions committed */
    uint64_t commit_errors; /* failed transactions (each retried) */
    uint64_t suppressed;    /* refusals counted, not written */
    uint64_t lost;          /* events dropped when the writer gave up */
    uint64_t pruned;        /* rows removed by retention */
    uint64_t queued;        /* waiting for the writer now */
    uint64_t last_batch_ns; /* duration of the last transaction */
};
/* Counters (any thread). */
void audit_get_stats(struct audit *a, struct audit_stats *ret);

/* The chain hash: BLAKE2b-256 of prev || le64(seq) || le64(time_ns) || le32(len) type ||
 * (le32(0xffffffff) when task is NULL, else le32(len) task) || le32(len) fields.
 * Pure; any thread. */
void audit_hash(const unsigned char prev[AUDIT_HASH_BYTES], uint64_t seq, int64_t time_ns,
                const char *type, const char *task, const char *fields, size_t fields_len,
                unsigned char out[AUDIT_HASH_BYTES]);
/* Lowercase hex of a hash into out (AUDIT_HASH_HEX bytes); and back (-EINVAL when not
 * 64 hex digits). */
void audit_hash_hex(const unsigned char h[AUDIT_HASH_BYTES], char out[AUDIT_HASH_HEX]);
int audit_hash_parse(const char *hex, size_t len, unsigned char out[AUDIT_HASH_BYTES]);
