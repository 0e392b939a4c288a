/* SPDX-License-Identifier: MIT */
#pragma once
/* The audit trail's read side, on its own read-only SQLite connection (WAL readers never
 * block the writer): chain verification, the chains `sbx audit` shows, and the tasks a
 * dead sbxd left open. Each function runs in one read transaction, so it sees one
 * consistent snapshot. Blocking: call from a worker thread, or at start-up. Any thread,
 * one connection per thread. */
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "audit/audit.h"
#include "lib/err.h"

struct sqlite3;

/* Opens the database read-only. Returns 0 or -errno with e set. */
int audit_query_ro_open(const char *path, struct sqlite3 **ret, struct err *e);
/* Closes; accepts NULL; returns NULL. */
struct sqlite3 *audit_query_ro_close(struct sqlite3 *db);

struct audit_verify_result {
    bool ok;
    uint64_t rows;      /* rows walked */
    uint64_t start_seq; /* where the kept chain starts (after pruning) */
    uint64_t head_seq;  /* the head sbxd recorded */
    char head_hash[AUDIT_HASH_HEX];
    /* When !ok: the first bad row (seq, and id when it exists, else -1) and what is wrong:
     * "altered", "removed" or "inserted". */
    uint64_t bad_seq;
    int64_t bad_id;
    char problem[16];
    char message[256];
};

/* Walks the chain from the recorded start to the recorded head: each row's hash must
 * match its content and its prev the row before; seqs must follow each other; the start
 * must be the one the last audit.pruned event recorded. Stops at the first problem.
 * Returns 0 (ret filled, ok or not) or -errno when the database cannot be read. */
int audit_query_verify(struct sqlite3 *db, struct audit_verify_result *ret, struct err *e);

struct audit_query {
    const char *task; /* only this task; NULL: any */
    /* only this session: its own events' chain first, then its commands' (task, pool,
     * status and since are then ignored); NULL: none */
    const char *session;
    const char *pool;   /* NULL: any */
    const char *status; /* task.result status, or "running" (no result yet); NULL: any */
    int64_t since_ns;   /* requests at or after this wall-clock time; 0: any */
    uint32_t limit;     /* chains at most (>= 1) */
};

/* Packs {"chains": [{"task": str, "events": [{"id", "seq", "time_ns", "type",
 * "fields"}]}], "more": bool}, newest request first; fields is the stored JSON as a map
 * (a string when it does not parse). The packed size stays near 8 MiB at most ("more" is
 * then true). Returns 0 or -errno. */
int audit_query_pack(struct sqlite3 *db, const struct audit_query *q, msgpack_packer *pk,
                     struct err *e);

/* Packs a verify result as a map. */
void audit_query_verify_pack(const struct audit_verify_result *v, msgpack_packer *pk);

/* A task that has a task.request after the last daemon.start and no task.result: the
 * previous sbxd died while it was in flight. Strings are valid during the callback only. */
struct audit_open_task {
    const char *task;
    const char *pool;    /* NULL when unknown */
    const char *sandbox; /* from sandbox.assigned, NULL when none */
    const char *cgroup;  /* the sandbox's cgroup (sandbox.assigned), NULL when not recorded */
    bool destroyed;      /* a sandbox.destroyed was recorded */
};
/* Calls fn for each open task. Returns how many or -errno. */
int audit_query_open_tasks(struct sqlite3 *db,
                           void (*fn)(const struct audit_open_task *t, void *ud), void *ud,
                           struct err *e);

/* A session with a session.open after the last daemon.start and no session.close: the
 * previous sbxd died while it was open. commands: its commands' task.requests; lifetime_ms:
 * from its opening to the last of them (0 without any). Strings are valid during the
 * callback only. */
struct audit_open_session {
    const char *session;
    const char *pool; /* NULL when unknown */
    uint64_t commands;
    uint64_t lifetime_ms;
};
/* Calls fn for each open session. Returns how many or -errno. */
int audit_query_open_sessions(struct sqlite3 *db,
                              void (*fn)(const struct audit_open_session *s, void *ud), void *ud,
                              struct err *e);

/* Packs JSON text (the subset sbxd writes, any nesting up to 32 levels) as msgpack.
 * Returns 0, or -EINVAL when it does not parse (nothing packed). Exposed for tests. */
int audit_query_json_pack(const char *json, size_t len, msgpack_packer *pk);
