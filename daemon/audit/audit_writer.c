/* SPDX-License-Identifier: MIT */
/* The audit trail's writer thread: the SQLite database (WAL, schema, the recorded chain
 * start and head), one transaction per batch of queued events extending the hash chain,
 * retention pruning that records where the kept chain starts, and the wake-up (loopwake.h) of
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

#define AUDIT_SCHEMA_VERSION "1"
#define PRUNE_INTERVAL_NS (60ULL * 1000000000ULL)
#define PRUNE_CHUNK 20000
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
    " hash TEXT NOT NULL);"
    /* Few indexes, each touched in one place per commit: the commit cost is the pages
     * it dirties. Partial indexes serve the listing (requests by time) and the rare
     * marks (daemon.start, audit.pruned). */
    "CREATE INDEX IF NOT EXISTS events_task ON events(task, type);"
    "CREATE INDEX IF NOT EXISTS events_request ON events(time) WHERE type = 'task.request';"
    "CREATE INDEX IF NOT EXISTS events_start ON events(type) WHERE type = 'daemon.start';"
    "CREATE INDEX IF NOT EXISTS events_pruned ON events(type) WHERE type = 'audit.pruned';"
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
         "INSERT INTO events(seq, time, type, task, fields, prev, hash) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)"},
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
        r = db_exec(a->db, "BEGIN IMMEDIATE", e);
    }
    if (r == 0) {
        r = db_exec(a->db, schema_sql, e);
        if (r == 0) {
            r = db_exec(a->db, "COMMIT", e);
        } else {
            (void)db_exec(a->db, "ROLLBACK", NULL);
        }
    }
    if (r < 0) {
        return r;
    }
    r = read_head(a, e);
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

/* Inserts one chained row after (*seq, hash), advancing both. Inside a transaction. */
static int insert_row(struct audit *a, uint64_t *seq, unsigned char hash[AUDIT_HASH_BYTES],
                      int64_t time_ns, const char *type, const char *task, const char *fields,
                      size_t len, struct err *e)
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
    int r = step_done(a, st, e, "insert");
    if (r < 0) {
        return r;
    }
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

static int tx_begin(struct audit *a, struct err *e)
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

/* Ends a transaction of rows chained up to (seq, hash): when r is 0 the new head is
 * written and committed, and becomes ours; otherwise everything is rolled back. Returns 0
 * or -errno. */
static int tx_finish(struct audit *a, int r, uint64_t seq,
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

/* Writes the batch in one transaction; the chain head moves only when it commits. */
static int write_batch(struct audit *a, struct rec *batch, size_t *ret_n, struct err *e)
{
    uint64_t seq = a->head_seq;
    unsigned char hash[AUDIT_HASH_BYTES];
    memcpy(hash, a->head_hash, sizeof(hash));
    size_t n = 0;
    int r = tx_begin(a, e);
    for (struct rec *x = batch; r == 0 && x; x = x->next) {
        r = insert_row(a, &seq, hash, x->time_ns, x->type, x->has_task ? x->task : NULL, x->fields,
                       x->len, e);
        n++;
    }
    r = tx_finish(a, r, seq, hash, e);
    if (r < 0) {
        return r;
    }
    *ret_n = n;
    return 0;
}

static int64_t one_i64(sqlite3 *db, const char *sql, int64_t arg, int64_t dflt)
{
    sqlite3_stmt *st = NULL;
    int64_t v = dflt;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        return dflt;
    }
    (void)sqlite3_bind_int64(st, 1, arg);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return v;
}

/* The smallest id whose row is not older than cutoff_ns (rows are in time order). */
static int64_t first_id_since(sqlite3 *db, int64_t lo, int64_t hi, int64_t cutoff_ns)
{
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int64_t t = one_i64(db, "SELECT time FROM events WHERE id >= ?1 ORDER BY id LIMIT 1", mid,
                            INT64_MAX);
        if (t < cutoff_ns) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* One pruning step: deletes up to PRUNE_CHUNK of the oldest rows beyond the retention,
 * moves the recorded chain start to the first kept row, and appends an audit.pruned event
 * saying so, all in one transaction. Returns rows deleted (more may remain) or -errno. */
static int prune_step(struct audit *a, struct err *e)
{
    int64_t min_id = one_i64(a->db, "SELECT min(id) FROM events", 0, 0);
    int64_t max_id = one_i64(a->db, "SELECT max(id) FROM events", 0, 0);
    if (max_id <= 0) {
        return 0;
    }
    int64_t cut = min_id;
    const char *why = NULL;
    if (a->o.max_rows && (uint64_t)(max_id - min_id + 1) > a->o.max_rows) {
        cut = max_id - (int64_t)a->o.max_rows + 1;
        why = "max_rows";
    }
    if (a->o.max_age_ns) {
        int64_t c =
            first_id_since(a->db, min_id, max_id, audit_realtime_ns() - (int64_t)a->o.max_age_ns);
        if (c > cut) {
            cut = c;
            why = "max_age";
        }
    }
    if (cut > min_id + PRUNE_CHUNK) {
        cut = min_id + PRUNE_CHUNK;
    }
    if (cut > max_id) {
        cut = max_id; /* the newest row always stays */
    }
    if (cut <= min_id) {
        return 0;
    }
    int r = tx_begin(a, e);
    if (r < 0) {
        return r;
    }
    sqlite3_stmt *st = NULL;
    int deleted = 0;
    uint64_t start_seq = 0;
    char start_prev[AUDIT_HASH_HEX] = "";
    if (sqlite3_prepare_v2(a->db, "DELETE FROM events WHERE id < ?1", -1, &st, NULL) == SQLITE_OK) {
        (void)sqlite3_bind_int64(st, 1, cut);
        if (sqlite3_step(st) == SQLITE_DONE) {
            deleted = sqlite3_changes(a->db);
        } else {
            r = db_fail(a->db, e, "prune");
        }
    } else {
        r = db_fail(a->db, e, "prune");
    }
    sqlite3_finalize(st);
    st = NULL;
    if (r == 0 &&
        sqlite3_prepare_v2(a->db, "SELECT seq, prev FROM events ORDER BY id LIMIT 1", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        start_seq = (uint64_t)sqlite3_column_int64(st, 0);
        const char *p = (const char *)sqlite3_column_text(st, 1);
        str_copy(start_prev, p ? p : "", sizeof(start_prev));
    } else if (r == 0) {
        r = db_fail(a->db, e, "prune: first kept row");
    }
    sqlite3_finalize(st);
    st = NULL;
    if (r == 0) {
        char num[24];
        (void)snprintf(num, sizeof(num), "%llu", (unsigned long long)start_seq);
        if (sqlite3_prepare_v2(a->db,
                               "INSERT OR REPLACE INTO meta(key, value) VALUES"
                               "('start_seq', ?1), ('start_prev', ?2)",
                               -1, &st, NULL) == SQLITE_OK) {
            (void)sqlite3_bind_text(st, 1, num, -1, SQLITE_TRANSIENT);
            (void)sqlite3_bind_text(st, 2, start_prev, -1, SQLITE_TRANSIENT);
            if (sqlite3_step(st) != SQLITE_DONE) {
                r = db_fail(a->db, e, "prune: meta");
            }
        } else {
            r = db_fail(a->db, e, "prune: meta");
        }
        sqlite3_finalize(st);
    }
    uint64_t seq = a->head_seq;
    unsigned char hash[AUDIT_HASH_BYTES];
    memcpy(hash, a->head_hash, sizeof(hash));
    if (r == 0) {
        char fields[256];
        int n =
            snprintf(fields, sizeof(fields),
                     "{\"rows\":%d,\"reason\":\"%s\",\"start_seq\":%llu,\"start_prev\":\"%s\"}",
                     deleted, why ? why : "max_rows", (unsigned long long)start_seq, start_prev);
        r = insert_row(a, &seq, hash, audit_realtime_ns(), "audit.pruned", NULL, fields, (size_t)n,
                       e);
    }
    r = tx_finish(a, r, seq, hash, e);
    if (r < 0) {
        return r;
    }
    log_info("rows=%d start_seq=%llu reason=%s msg=\"audit trail pruned\"", deleted,
             (unsigned long long)start_seq, why ? why : "max_rows");
    return deleted;
}

static void maybe_prune(struct audit *a)
{
    if ((!a->o.max_rows && !a->o.max_age_ns) || clock_now_ns() < a->next_prune_ns) {
        return;
    }
    struct err e = ERR_INIT;
    int r = prune_step(a, &e);
    if (r < 0) {
        log_warn("msg=\"audit pruning failed, retrying in a minute\" detail=\"%s\"", err_msg(&e));
    } else {
        pthread_mutex_lock(&a->mu);
        a->st.pruned += (uint64_t)r;
        pthread_mutex_unlock(&a->mu);
    }
    /* A full chunk means more is due: go on after the next batch. */
    a->next_prune_ns = clock_now_ns() + (r == PRUNE_CHUNK ? 0 : PRUNE_INTERVAL_NS);
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
    struct rec *batch = NULL;
    uint64_t fail_since = 0;
    unsigned retry_ms = RETRY_MIN_MS;
    a->next_prune_ns = clock_now_ns();
    for (;;) {
        pthread_mutex_lock(&a->mu);
        bool take = false;
        bool prune_on = a->o.max_rows || a->o.max_age_ns;
        for (;;) {
            if (batch || a->stopping) {
                take = true;
                break;
            }
            uint64_t now = clock_now_ns(), wake = now + PRUNE_INTERVAL_NS;
            if (a->q_head) {
                /* Commit when someone waits for a queued event (a result), when the queue
                 * is large, or when its oldest event has waited AUDIT_FLUSH_NS: a burst
                 * of a task's events shares one transaction. */
                uint64_t due = a->q_head->queued_ns + AUDIT_FLUSH_NS;
                if (a->urgent >= a->q_head->ticket || a->q_events >= AUDIT_FLUSH_EVENTS ||
                    now >= due) {
                    take = true;
                    break;
                }
                wake = due;
            }
            if (prune_on && now >= a->next_prune_ns) {
                break;
            }
            if (prune_on && a->next_prune_ns < wake) {
                wake = a->next_prune_ns;
            }
            struct timespec ts;
            deadline_in(&ts, wake - now);
            (void)pthread_cond_timedwait(&a->cond, &a->mu, &ts);
        }
        /* Take everything queued: the next transaction covers it all. */
        if (take && a->q_head) {
            if (batch) {
                struct rec *t = batch;
                while (t->next) {
                    t = t->next;
                }
                t->next = a->q_head;
            } else {
                batch = a->q_head;
            }
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
        size_t n = 0;
        uint64_t t0 = clock_now_ns();
        int r = write_batch(a, batch, &n, &e);
        uint64_t t1 = clock_now_ns();
        size_t count;
        uint64_t last = last_ticket(batch, &count);
        if (r == 0) {
            if (fail_since) {
                log_info("msg=\"audit trail writable again\"");
            }
            fail_since = 0;
            retry_ms = RETRY_MIN_MS;
            pthread_mutex_lock(&a->mu);
            a->failing = false;
            a->st.committed += n;
            a->st.batches++;
            a->st.last_batch_ns = t1 - t0;
            if (last > a->resolved) {
                a->resolved = last;
            }
            void (*hook)(void *, double, uint64_t) = a->batch_hook;
            void *hook_arg = a->batch_hook_arg;
            uint64_t queued = a->q_events;
            pthread_mutex_unlock(&a->mu);
            wake_loop(a);
            if (hook) {
                hook(hook_arg, (double)(t1 - t0) / 1e9, queued);
            }
            audit_writer_free_recs(batch);
            batch = NULL;
            maybe_prune(a);
            continue;
        }
        /* The batch stays ours and is retried; the loop's waits go on. */
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
            batch = NULL;
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
