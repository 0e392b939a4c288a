/* SPDX-License-Identifier: MIT */
#pragma once
/* The gaps retention left inside the kept chain (audit_prune.c removes refused requests'
 * rows wherever they are), as the audit.pruned events that made them record them:
 * "gaps": [[from_seq, to_seq, "hash of row to_seq"], ...]. verify accepts a jump in seq only
 * where recorded gaps cover it and one of them ends just before the next row with the hash
 * that row links to. Read side: any thread, on the caller's read-only connection. */
#include <stdbool.h>
#include <stdint.h>

#include "lib/err.h"

struct sqlite3;
struct audit_gaps;

/* Every gap recorded by an audit.pruned event that follows it (a record before its gap is
 * ignored), sorted. Inside the caller's read transaction. Returns 0 or -errno with e. */
int audit_gaps_load(struct sqlite3 *db, struct audit_gaps **ret, struct err *e);
struct audit_gaps *audit_gaps_free(struct audit_gaps *g);
/* True when recorded gaps cover seqs from..to and one of them ends at `to` with the hash
 * next_prev (the prev of the row after the gap, 64 hex digits). Calls must come with
 * growing `from` (verify's walk). */
bool audit_gaps_cover(struct audit_gaps *g, uint64_t from, uint64_t to, const char *next_prev,
                      size_t next_prev_len);
