/* SPDX-License-Identifier: MIT */
#pragma once
/* Budgets for events a client or a task can cause at any rate (refused requests, proxy
 * denials): a source records its first `budget` events of each budget window one by one
 * (audit_limit_take true), and only counts the rest (audit_limit_count), by kind. What it
 * counted is written as one summary event (the source's own type, e.g.
 * "rpc.refused.summary") every summary interval while counts accrue, when the audit trail
 * shuts down, and when the source is freed. A summary's fields: the source's own (its fill
 * callback), then "count", "by" ({kind: n}, at most AUDIT_LIMIT_KINDS kinds, the rest under
 * "other"), "first_ns" and "last_ns" (realtime of the first and last counted event) and
 * "span_ms". Each summary is also logged, at warn level, as one line.
 *
 * So a source's rows per budget window are at most its budget's events plus one summary
 * per interval, whatever its rate. Loop thread only. */
#include <stdbool.h>
#include <stdint.h>

struct audit;
struct audit_ev;
struct audit_limit;

#define AUDIT_LIMIT_KINDS 8
#define AUDIT_LIMIT_KIND_MAX 24

/* Adds the source's identifying fields to its summary (and nothing else). */
typedef void (*audit_limit_fill_cb)(void *arg, struct audit_ev *ev);

/* A source of summary events of `type` (for task_id, NULL for none). label (copied, at most
 * 95 bytes kept) names the source in the summary's log line, e.g. "socket=agents uid=1000".
 * fill and arg must stay valid until audit_limit_free. a may be NULL or disabled: the
 * budget still counts, and summaries are only logged. Never fails. */
struct audit_limit *audit_limit_new(struct audit *a, const char *type, const char *task_id,
                                    const char *label, audit_limit_fill_cb fill, void *arg);
/* Writes what is counted (a summary), then frees. Accepts NULL; returns NULL. Safe after
 * audit_close (then the summary is only logged). */
struct audit_limit *audit_limit_free(struct audit_limit *l);
/* True when the source may record one more event one by one in the current budget window
 * (at most `budget` per window; 0: none), and takes it. */
bool audit_limit_take(struct audit_limit *l, uint32_t budget);
/* Counts one event that was not recorded, of kind (a code or an outcome, NULL: "other"). */
void audit_limit_count(struct audit_limit *l, const char *kind);
/* Events counted and not yet summarized. */
uint64_t audit_limit_pending(const struct audit_limit *l);
/* Writes the summary of what is counted now, if anything. */
void audit_limit_flush(struct audit_limit *l);
