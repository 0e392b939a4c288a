/* SPDX-License-Identifier: MIT */
/* The audit trail's writer thread: the SQLite database (WAL, schema, the recorded chain
 * start and head), one transaction per batch of queued events extending the hash chain,
 * retention (audit_prune.c) after commits and every minute, and the wake-up (loopwake.h) of
 * the loop after each commit. It never touches loop state; the loop never touches SQLite
 * after start-up. */
#define LOG_MOD "audit"
#include "audit/audit_impl.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "lib/log.h"
#include "lib/util.h"

#define AUDIT_SCHEMA_VERSION "2"
#define PRUNE_INTERVAL_NS (60ULL * 1000000000ULL)
/* The write-ahead log is cut back to this size after each checkpoint. */
#define WAL_SIZE_LIMIT (8LL << 20)
#define RETRY_MIN_MS 50
#define RETRY_MAX_MS 2000
#define GIVE_UP_AFTER_NS (10ULL * 1000000000ULL)

/* ---- SQLite (opening thread, then the writer) --------------------------------------- */

static int db_fail(sqlite3 *db, struct err *e, const char *what)
{
    return err_setx(e, -EIO, "audit: %s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
}

static int db_exec(sqlite3 *db, const char *sql, struct err *e)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        int r = err_setx(e, -EIO, "audit: %s", msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return r;
    }
    return 0;
}

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS events("
    " id INTEGER PRIMARY KEY,"
    " seq INTEGER NOT NULL,"
    " time INTEGER NOT NULL,"
    " type TEXT NOT NULL,"
    " task TEXT,"
    " fields TEXT NOT NULL,"
    " prev TEXT NOT NULL,"
    " hash TEXT NOT NULL,"
    /* 1: a row of a request refused before it became a task (pruned first). Not part of
     * the hash: it only orders pruning, and every pruned row is recorded either way. */
    " refusal INTEGER NOT NULL DEFAULT 0);"
    /* Few indexes, each touched in one place per commit: the commit cost is the pages
     * it dirties. Partial indexes serve the listing (requests by time) and the rare
     * marks (daemon.start, audit.pruned). */
    "CREATE INDEX IF NOT EXISTS events_task ON events(task, type);"
    "CREATE INDEX IF NOT EXISTS events_request ON events(time) WHERE type = 'task.request';"
    "CREATE INDEX IF NOT EXISTS events_start ON events(type) WHERE type = 'daemon.start';"
    "CREATE INDEX IF NOT EXISTS events_pruned ON events(type) WHERE type = 'audit.pruned';"
    "CREATE INDEX IF NOT EXISTS events_refusal ON events(id) WHERE refusal = 1;"
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "INSERT OR IGNORE INTO meta(key, value) VALUES"
    " ('schema', '" AUDIT_SCHEMA_VERSION "'),"
    " ('start_seq', '1'),"
    " ('start_prev', '0000000000000000000000000000000000000000000000000000000000000000'),"
    " ('head_seq', '0'),"
    " ('head_hash', '0000000000000000000000000000000000000000000000000000000000000000');";

/* Reads a meta value into buf. Returns 0, -ENOENT or -EIO. */
static int meta_get(sqlite3 *db, const char *key, char *buf, size_t size)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?1", -1, &st, NULL) !=
        SQLITE_OK) {
        return -EIO;
    }
    (void)sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int r = -ENOENT;
    if (sqlite3_step(st) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        str_copy(buf, v ? v : "", size);
        r = 0;
    }
    sqlite3_finalize(st);
    return r;
}

static int read_head(struct audit *a, struct err *e)
{
    char v[AUDIT_HASH_HEX + 8];
    if (meta_get(a->db, "schema", v, sizeof(v)) < 0 || strcmp(v, AUDIT_SCHEMA_VERSION) != 0) {
        return err_setx(e, -EPROTO, "audit: %s has an unknown schema version", a->path);
    }
    if (meta_get(a->db, "head_seq", v, sizeof(v)) < 0 || parse_u64(v, &a->head_seq) < 0) {
        return err_setx(e, -EPROTO, "audit: %s: bad head_seq in meta", a->path);
    }
    if (meta_get(a->db, "head_hash", v, sizeof(v)) < 0 ||
        audit_hash_parse(v, strlen(v), a->head_hash) < 0) {
        return err_setx(e, -EPROTO, "audit: %s: bad head_hash in meta", a->path);
    }
    /* Rows after the recorded head were not written by sbxd: say so (verify names them)
     * and keep extending the chain from the recorded head. */
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(a->db, "SELECT seq, hash FROM events ORDER BY id DESC LIMIT 1", -1, &st,
                           NULL) != SQLITE_OK) {
        return db_fail(a->db, e, "reading the last row");
    }
    if (sqlite3_step(st) == SQLITE_ROW) {
        uint64_t seq = (uint64_t)sqlite3_column_int64(st, 0);
        const char *h = (const char *)sqlite3_column_text(st, 1);
        char want[AUDIT_HASH_HEX];
        audit_hash_hex(a->head_hash, want);
        if (seq != a->head_seq || !h || strcmp(h, want) != 0) {
            log_error("path=%s last_seq=%llu head_seq=%llu msg=\"the last row of the audit "
                      "trail is not the head sbxd recorded; run 'sbx audit verify'\"",
                      a->path, (unsigned long long)seq, (unsigned long long)a->head_seq);
        }
    }
    sqlite3_finalize(st);
    return 0;
}

static int prepare(struct audit *a, struct err *e)
{
    static const struct {
        size_t off;
        const char *sql;
    } stmts[] = {
        {offsetof(struct audit, st_begin), "BEGIN IMMEDIATE"},
        {offsetof(struct audit, st_commit), "COMMIT"},
        {offsetof(struct audit, st_rollback), "ROLLBACK"},
        {offsetof(struct audit, st_insert),
         "INSERT INTO events(seq, time, type, task, fields, prev, hash, refusal) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
        {offsetof(struct audit, st_head),
         "INSERT OR REPLACE INTO meta(key, value) VALUES('head_seq', ?1), ('head_hash', ?2)"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(stmts); i++) {
        sqlite3_stmt **st = (sqlite3_stmt **)((char *)a + stmts[i].off);
        if (sqlite3_prepare_v3(a->db, stmts[i].sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) !=
            SQLITE_OK) {
            return db_fail(a->db, e, "prepare");
        }
    }
    return 0;
}

/* Schema 1 (before refused requests' rows were marked) gains the refusal column; its rows
 * count as records. Inside the opening transaction. */
static int migrate(struct audit *a, struct err *e)
{
    char v[16];
    if (meta_get(a->db, "schema", v, sizeof(v)) < 0 || strcmp(v, "1") != 0) {
        return 0;
    }
    log_info("path=%s msg=\"upgrading the audit trail's schema from 1 to 2\"", a->path);
    return db_exec(a->db,
                   "ALTER TABLE events ADD COLUMN refusal INTEGER NOT NULL DEFAULT 0;"
                   "UPDATE meta SET value = '" AUDIT_SCHEMA_VERSION "' WHERE key = 'schema';",
                   e);
}

/* A file made before auto_vacuum was set keeps its pages when rows go: with max_bytes it is
 * rewritten once (VACUUM, at start-up) so that pruning can shrink it. */
static int convert_vacuum(struct audit *a, struct err *e)
{
    sqlite3_stmt *st = NULL;
    int mode = 2;
    if (sqlite3_prepare_v2(a->db, "PRAGMA auto_vacuum", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        mode = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    if (mode == 2 || !a->o.max_bytes) {
        return 0;
    }
    log_info("path=%s msg=\"rewriting the audit trail once so that max_bytes can shrink it "
             "(VACUUM)\"",
             a->path);
    return db_exec(a->db, "PRAGMA auto_vacuum=INCREMENTAL; VACUUM", e);
}

int audit_writer_db_open(struct audit *a, struct err *e)
{
    /* SECURITY: the trail holds who ran what; only sbxd's user may read it. SQLite gives
     * the -wal and -shm files the database file's mode. */
    int fd = open(a->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return err_set(e, -errno, "audit: open '%s'", a->path);
    }
    (void)fchmod(fd, 0600);
    fd_close(fd);
    if (sqlite3_open_v2(a->path, &a->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        return db_fail(a->db, e, a->path);
    }
    (void)sqlite3_busy_timeout(a->db, 5000);
    /* Pruned pages go back to the file system (audit_prune.c), so that max_bytes bounds the
     * file and not only what is in it. Takes effect only before the first table exists;
     * older files are converted below. */
    (void)db_exec(a->db, "PRAGMA auto_vacuum=INCREMENTAL", NULL);
    sqlite3_stmt *st = NULL;
    bool wal = false;
    if (sqlite3_prepare_v2(a->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        const char *m = (const char *)sqlite3_column_text(st, 0);
        wal = m && strcmp(m, "wal") == 0;
    }
    sqlite3_finalize(st);
    if (!wal) {
        return err_setx(e, -EIO, "audit: %s: cannot switch to WAL mode: %s", a->path,
                        sqlite3_errmsg(a->db));
    }
    /* NORMAL (WAL): a commit is in the WAL file before the result it guards is sent, so
     * sbxd's death (kill -9) loses no result a client saw; the machine's may lose the last
     * commits. FULL (audit.fsync): on disk too, one fsync per batch (docs/AUDIT.md). */
    int r = db_exec(a->db, a->o.fsync ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", e);
    if (r == 0) {
        char sql[64];
        (void)snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit=%lld", WAL_SIZE_LIMIT);
        r = db_exec(a->db, sql, e);
    }
    if (r == 0) {
        r = db_exec(a->db, "BEGIN IMMEDIATE", e);
    }
    if (r == 0) {
        r = migrate(a, e);
    }
    if (r == 0) {
        r = db_exec(a->db, schema_sql, e);
        if (r == 0) {
            r = db_exec(a->db, "COMMIT", e);
        } else {
            (void)db_exec(a->db, "ROLLBACK", NULL);
        }
    }
    if (r == 0) {
        r = convert_vacuum(a, e);
    }
    if (r == 0) {
        r = read_head(a, e);
    }
    if (r == 0) {
        r = audit_prune_open(a, e);
    }
    if (r < 0) {
        return r;
    }
    return prepare(a, e);
}

void audit_writer_db_close(struct audit *a)
{
    sqlite3_stmt *sts[] = {a->st_begin, a->st_commit, a->st_rollback, a->st_insert, a->st_head};
    for (size_t i = 0; i < ARRAY_SIZE(sts); i++) {
        sqlite3_finalize(sts[i]);
    }
    if (a->db) {
        (void)sqlite3_close(a->db);
        a->db = NULL;
    }
}

/* ---- the writer thread -------------------------------------------------------------- */

static void stmt_done(sqlite3_stmt *st)
{
    (void)sqlite3_reset(st);
    (void)sqlite3_clear_bindings(st);
}

static int step_done(struct audit *a, sqlite3_stmt *st, struct err *e, const char *what)
{
    int rc = sqlite3_step(st);
    stmt_done(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        return db_fail(a->db, e, what);
    }
    return 0;
}

int audit_writer_insert(struct audit *a, uint64_t *seq, unsigned char hash[AUDIT_HASH_BYTES],
                        int64_t time_ns, const char *type, const char *task, const char *fields,
                        size_t len, bool refusal, struct err *e)
{
    unsigned char next[AUDIT_HASH_BYTES];
    char prev_hex[AUDIT_HASH_HEX], hex[AUDIT_HASH_HEX];
    uint64_t s = *seq + 1;
    audit_hash(hash, s, time_ns, type, task, fields, len, next);
    audit_hash_hex(hash, prev_hex);
    audit_hash_hex(next, hex);
    sqlite3_stmt *st = a->st_insert;
    (void)sqlite3_bind_int64(st, 1, (sqlite3_int64)s);
    (void)sqlite3_bind_int64(st, 2, time_ns);
    (void)sqlite3_bind_text(st, 3, type, -1, SQLITE_STATIC);
    if (task) {
        (void)sqlite3_bind_text(st, 4, task, -1, SQLITE_STATIC);
    } else {
        (void)sqlite3_bind_null(st, 4);
    }
    (void)sqlite3_bind_text(st, 5, fields, (int)len, SQLITE_STATIC);
    (void)sqlite3_bind_text(st, 6, prev_hex, -1, SQLITE_STATIC);
    (void)sqlite3_bind_text(st, 7, hex, -1, SQLITE_STATIC);
    (void)sqlite3_bind_int(st, 8, refusal ? 1 : 0);
    int r = step_done(a, st, e, "insert");
    if (r < 0) {
        return r;
    }
    a->rows++;
    *seq = s;
    memcpy(hash, next, AUDIT_HASH_BYTES);
    return 0;
}

static int write_head(struct audit *a, uint64_t seq, const unsigned char hash[AUDIT_HASH_BYTES],
                      struct err *e)
{
    char hex[AUDIT_HASH_HEX], num[24];
    audit_hash_hex(hash, hex);
    (void)snprintf(num, sizeof(num), "%llu", (unsigned long long)seq);
    (void)sqlite3_bind_text(a->st_head, 1, num, -1, SQLITE_TRANSIENT);
    (void)sqlite3_bind_text(a->st_head, 2, hex, -1, SQLITE_TRANSIENT);
    return step_done(a, a->st_head, e, "update head");
}

int audit_writer_begin(struct audit *a, struct err *e)
{
    return step_done(a, a->st_begin, e, "begin");
}

static int tx_commit(struct audit *a, struct err *e)
{
    int r = step_done(a, a->st_commit, e, "commit");
    if (r < 0 && !sqlite3_get_autocommit(a->db)) {
        (void)step_done(a, a->st_rollback, NULL, "rollback");
    }
    return r;
}

static void tx_rollback(struct audit *a)
{
    if (!sqlite3_get_autocommit(a->db)) {
        (void)step_done(a, a->st_rollback, NULL, "rollback");
    }
}

int audit_writer_finish(struct audit *a, int r, uint64_t seq,
                        const unsigned char hash[AUDIT_HASH_BYTES], struct err *e)
{
    if (r == 0) {
        r = write_head(a, seq, hash, e);
    }
    if (r == 0) {
        r = tx_commit(a, e);
    } else {
        tx_rollback(a);
    }
    if (r < 0) {
        return r;
    }
    a->head_seq = seq;
    memcpy(a->head_hash, hash, AUDIT_HASH_BYTES);
    return 0;
}

/* Inserts the rows from *from on into the open transaction (begun here when none is),
 * extending its chain; *from moves past each row inserted. */
static int write_rows(struct audit *a, struct rec **from, struct err *e)
{
    if (!*from) {
        return 0;
    }
    if (!a->in_tx) {
        int r = audit_writer_begin(a, e);
        if (r < 0) {
            return r;
        }
        a->in_tx = true;
        a->tx_rows = a->rows;
        a->tx_seq = a->head_seq;
        memcpy(a->tx_hash, a->head_hash, sizeof(a->tx_hash));
    }
    for (struct rec *x = *from; x; x = x->next) {
        int r = audit_writer_insert(a, &a->tx_seq, a->tx_hash, x->time_ns, x->type,
                                    x->has_task ? x->task : NULL, x->fields, x->len, x->refusal, e);
        if (r < 0) {
            return r;
        }
        *from = x->next;
    }
    return 0;
}

/* Ends the open transaction: commits it when r is 0, else rolls it back (the rows it held
 * are to be written again, from the batch's start). */
static int end_tx(struct audit *a, int r, struct err *e)
{
    if (a->in_tx || r < 0) {
        r = audit_writer_finish(a, r, a->tx_seq, a->tx_hash, e);
    }
    if (r < 0 && a->in_tx) {
        a->rows = a->tx_rows;
    }
    a->in_tx = false;
    return r;
}

/* Writes the rest of the batch and commits it, in the transaction that holds the rows
 * written ahead; the chain head moves only when it commits. */
static int write_batch(struct audit *a, struct rec *batch, struct rec **unwritten, struct err *e)
{
    int r = end_tx(a, write_rows(a, unwritten, e), e);
    if (r < 0) {
        *unwritten = batch;
    }
    return r;
}

/* Retention: every minute (max_age), and at once while the trail is over max_rows or
 * max_bytes, one step (AUDIT_PRUNE_CHUNK rows at most) after each batch, so that writing goes
 * on while a large excess is pruned. */
static void maybe_prune(struct audit *a)
{
    uint64_t now = clock_now_ns();
    if (!a->o.max_rows && !a->o.max_age_ns && !a->o.max_bytes) {
        return;
    }
    if (now < a->next_prune_ns && !audit_prune_over(a)) {
        return;
    }
    struct err e = ERR_INIT;
    int r = audit_prune_step(a, &e);
    if (r < 0) {
        log_warn("msg=\"audit pruning failed, retrying in a minute\" detail=\"%s\"", err_msg(&e));
    }
    if (r > 0) {
        pthread_mutex_lock(&a->mu);
        a->st.pruned += (uint64_t)r;
        pthread_mutex_unlock(&a->mu);
    }
    /* A full step means more is due: go on after the next batch (or at once when idle). */
    bool more = r >= AUDIT_PRUNE_CHUNK || (r > 0 && audit_prune_over(a));
    a->next_prune_ns = clock_now_ns() + (more ? 0 : PRUNE_INTERVAL_NS);
}

void audit_writer_free_recs(struct rec *r)
{
    while (r) {
        struct rec *next = r->next;
        free(r);
        r = next;
    }
}

static uint64_t last_ticket(const struct rec *r, size_t *n)
{
    uint64_t t = 0;
    *n = 0;
    for (; r; r = r->next) {
        t = r->ticket > t ? r->ticket : t;
        (*n)++;
    }
    return t;
}

/* Wakes the loop to run its waiters, after mu is released (the loop takes mu at once). The
 * fd stays open until audit_close, after the writer is joined. */
static void wake_loop(struct audit *a)
{
    loopwake_signal(&a->wake);
}

static void deadline_in(struct timespec *ts, uint64_t ns)
{
    (void)clock_gettime(CLOCK_MONOTONIC, ts);
    uint64_t t = (uint64_t)ts->tv_sec * 1000000000ULL + (uint64_t)ts->tv_nsec + ns;
    ts->tv_sec = (time_t)(t / 1000000000ULL);
    ts->tv_nsec = (long)(t % 1000000000ULL);
}

void *audit_writer_main(void *arg)
{
    struct audit *a = arg;
    /* Taken from the queue, in ticket order; from unwritten on, not yet in the open
     * transaction. */
    struct rec *batch = NULL, *unwritten = NULL;
    uint64_t batch_n = 0;
    uint64_t write_ns = 0; /* spent writing the batch, waits excluded */
    bool retry = false;    /* the last commit failed: again, after the backoff */
    bool ahead_ok = true;  /* writing ahead failed: wait for the commit */
    uint64_t fail_since = 0;
    unsigned retry_ms = RETRY_MIN_MS;
    a->next_prune_ns = clock_now_ns();
    for (;;) {
        pthread_mutex_lock(&a->mu);
        bool commit = false, ahead = false;
        bool prune_on = a->o.max_rows || a->o.max_age_ns || a->o.max_bytes;
        for (;;) {
            if (retry || a->stopping) {
                commit = true;
                break;
            }
            uint64_t now = clock_now_ns(), wake = now + PRUNE_INTERVAL_NS;
            const struct rec *first = batch ? batch : a->q_head;
            if (first) {
                /* Commit when someone waits for a taken or queued event (a result), when
                 * there are many, or when the oldest has waited AUDIT_FLUSH_NS: a burst of
                 * a task's events shares one transaction. Events a wait will soon come for
                 * (audit_write_ahead) are inserted before, in the same transaction. */
                uint64_t due = first->queued_ns + AUDIT_FLUSH_NS;
                if (a->urgent >= first->ticket || batch_n + a->q_events >= AUDIT_FLUSH_EVENTS ||
                    now >= due) {
                    commit = true;
                    break;
                }
                if (ahead_ok && a->q_head && a->ahead >= a->q_head->ticket) {
                    ahead = true;
                    break;
                }
                wake = due;
            }
            /* No retention step while a transaction is open. */
            if (!batch && prune_on && now >= a->next_prune_ns) {
                break;
            }
            if (!batch && prune_on && a->next_prune_ns < wake) {
                wake = a->next_prune_ns;
            }
            struct timespec ts;
            deadline_in(&ts, wake - now);
            (void)pthread_cond_timedwait(&a->cond, &a->mu, &ts);
        }
        /* Take everything queued: the transaction covers it all. */
        if ((commit || ahead) && a->q_head) {
            if (batch) {
                struct rec *t = batch;
                while (t->next) {
                    t = t->next;
                }
                t->next = a->q_head;
            } else {
                batch = a->q_head;
            }
            if (!unwritten) {
                unwritten = a->q_head;
            }
            batch_n += a->q_events;
            a->q_head = a->q_tail = NULL;
            a->q_events = a->q_bytes = 0;
            a->st.queued = 0;
        }
        bool stopping = a->stopping, give_up = a->give_up;
        pthread_mutex_unlock(&a->mu);

        if (!batch) {
            if (stopping) {
                break;
            }
            maybe_prune(a);
            continue;
        }
        struct err e = ERR_INIT;
        uint64_t t0 = clock_now_ns();
        if (!commit) {
            int r = write_rows(a, &unwritten, &e);
            write_ns += clock_now_ns() - t0;
            if (r < 0) {
                /* The commit writes them again, and reports a failure that lasts. */
                (void)end_tx(a, r, NULL);
                unwritten = batch;
                ahead_ok = false;
                write_ns = 0;
            }
            continue;
        }
        int r = write_batch(a, batch, &unwritten, &e);
        uint64_t t1 = clock_now_ns();
        write_ns += t1 - t0;
        size_t count;
        uint64_t last = last_ticket(batch, &count);
        ahead_ok = true;
        if (r == 0) {
            if (fail_since) {
                log_info("msg=\"audit trail writable again\"");
            }
            fail_since = 0;
            retry = false;
            retry_ms = RETRY_MIN_MS;
            pthread_mutex_lock(&a->mu);
            a->failing = false;
            a->st.committed += count;
            a->st.batches++;
            a->st.last_batch_ns = write_ns;
            if (last > a->resolved) {
                a->resolved = last;
            }
            void (*hook)(void *, double, uint64_t) = a->batch_hook;
            void *hook_arg = a->batch_hook_arg;
            uint64_t queued = a->q_events;
            pthread_mutex_unlock(&a->mu);
            wake_loop(a);
            if (hook) {
                hook(hook_arg, (double)write_ns / 1e9, queued);
            }
            audit_writer_free_recs(batch);
            batch = unwritten = NULL;
            batch_n = 0;
            write_ns = 0;
            maybe_prune(a);
            continue;
        }
        /* The batch stays ours and is retried (timed anew); the loop's waits go on. */
        retry = true;
        write_ns = 0;
        if (!fail_since) {
            fail_since = t1;
            log_error("events=%zu msg=\"cannot write the audit trail, retrying; results "
                      "wait\" detail=\"%s\"",
                      count, err_msg(&e));
        }
        pthread_mutex_lock(&a->mu);
        a->failing = true;
        a->st.commit_errors++;
        give_up = a->give_up || (a->stopping && t1 - fail_since > GIVE_UP_AFTER_NS);
        if (give_up) {
            uint64_t first = batch->ticket;
            a->dead = true;
            if (!a->lost_from || first < a->lost_from) {
                a->lost_from = first ? first : last;
            }
            a->st.lost += count;
            if (last > a->resolved) {
                a->resolved = last;
            }
            pthread_mutex_unlock(&a->mu);
            wake_loop(a);
            log_error("events=%zu msg=\"giving up on the audit trail: these events are lost, "
                      "new tasks are refused\" detail=\"%s\"",
                      count, err_msg(&e));
            audit_writer_free_recs(batch);
            batch = unwritten = NULL;
            batch_n = 0;
            write_ns = 0;
            retry = false;
            continue;
        }
        struct timespec ts;
        deadline_in(&ts, (uint64_t)retry_ms * 1000000ULL);
        (void)pthread_cond_timedwait(&a->cond, &a->mu, &ts);
        pthread_mutex_unlock(&a->mu);
        retry_ms = retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : retry_ms * 2;
    }
    return NULL;
}
