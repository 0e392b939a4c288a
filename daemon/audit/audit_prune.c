/* SPDX-License-Identifier: MIT */
/* Retention, on the writer thread: rows older than max_age go from the chain's start; over
 * max_rows or max_bytes, the rows of refused requests go first, wherever they are, and only
 * then the oldest rows. Every step is one transaction that records what it removed in an
 * audit.pruned event (a new chain start, and the gaps it left), so verify still passes and
 * a removal it did not record does not. It never touches loop state. */
#define LOG_MOD "audit"
#include "audit/audit_impl.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "lib/util.h"

/* Rows looked at per step for refused requests' rows, and gaps one audit.pruned event
 * records (each about 110 bytes of JSON). */
#define SCAN_MAX 100000
#define GAPS_MAX 400

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

int audit_prune_open(struct audit *a, struct err *e)
{
    int64_t n = one_i64(a->db, "SELECT count(*) FROM events", 0, -1);
    int64_t ps = one_i64(a->db, "PRAGMA page_size", 0, -1);
    if (n < 0 || ps <= 0) {
        return err_setx(e, -EIO, "audit: %s: cannot count rows: %s", a->path,
                        sqlite3_errmsg(a->db));
    }
    a->rows = (uint64_t)n;
    a->page_size = (uint64_t)ps;
    return 0;
}

/* The database's pages in use times its page size. */
static uint64_t db_bytes(struct audit *a)
{
    int64_t pages = one_i64(a->db, "PRAGMA page_count", 0, 0);
    int64_t free_pages = one_i64(a->db, "PRAGMA freelist_count", 0, 0);
    return pages > free_pages ? (uint64_t)(pages - free_pages) * a->page_size : 0;
}

bool audit_prune_over(struct audit *a)
{
    return (a->o.max_rows && a->rows > a->o.max_rows) ||
           (a->o.max_bytes && db_bytes(a) > a->o.max_bytes);
}

/* Rows that must go for max_rows and max_bytes: down to 80% of them, so that pruning runs
 * seldom and each step (each audit.pruned row) removes many rows. The bytes a row frees
 * are estimated from the average; the next step sees what really went. */
static uint64_t rows_needed(struct audit *a)
{
    uint64_t need = 0;
    if (a->o.max_rows && a->rows > a->o.max_rows) {
        need = a->rows - (a->o.max_rows - a->o.max_rows / 5);
    }
    uint64_t bytes = a->o.max_bytes ? db_bytes(a) : 0;
    if (a->o.max_bytes && bytes > a->o.max_bytes && a->rows > 0) {
        uint64_t target = a->o.max_bytes - a->o.max_bytes / 5;
        uint64_t per_row = bytes / a->rows ? bytes / a->rows : 1;
        uint64_t n = (bytes - target) / per_row + 1;
        need = n > need ? n : need;
    }
    return need;
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

/* A run of removed rows between kept ones: seqs from..to, ids from_id..to_id (no kept row
 * between them), and the hash of the last, which the next kept row links to. */
struct gap {
    uint64_t from, to;
    int64_t from_id, to_id;
    char hash[AUDIT_HASH_HEX];
};

/* What one step removes: a new start (rows before start_seq), gaps, and why. */
struct plan {
    const char *why;
    int64_t cut; /* ids below go (0: none) */
    struct gap gaps[GAPS_MAX];
    size_t n_gaps;
};

static int run_sql_ids(struct audit *a, const char *sql, int64_t x, int64_t y, int *ret_n,
                       struct err *e)
{
    sqlite3_stmt *st = NULL;
    int r = 0;
    if (sqlite3_prepare_v2(a->db, sql, -1, &st, NULL) != SQLITE_OK) {
        return err_setx(e, -EIO, "audit: prune: %s", sqlite3_errmsg(a->db));
    }
    (void)sqlite3_bind_int64(st, 1, x);
    if (sqlite3_bind_parameter_count(st) > 1) {
        (void)sqlite3_bind_int64(st, 2, y);
    }
    if (sqlite3_step(st) == SQLITE_DONE) {
        *ret_n += sqlite3_changes(a->db);
    } else {
        r = err_setx(e, -EIO, "audit: prune: %s", sqlite3_errmsg(a->db));
    }
    sqlite3_finalize(st);
    return r;
}

/* Plans the removal of up to n rows of refused requests, oldest first: a leading run (from
 * the chain's first row) moves the start, the others become gaps. Returns rows planned. */
static uint64_t plan_refusals(struct audit *a, int64_t min_id, int64_t max_id, uint64_t n,
                              struct plan *p)
{
    int64_t first =
        one_i64(a->db, "SELECT min(id) FROM events WHERE refusal = 1 AND id < ?1", max_id, 0);
    if (first <= 0) {
        return 0;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(a->db,
                           "SELECT id, seq, hash, refusal FROM events WHERE id >= ?1 AND id < ?2 "
                           "ORDER BY id LIMIT ?3",
                           -1, &st, NULL) != SQLITE_OK) {
        return 0;
    }
    (void)sqlite3_bind_int64(st, 1, first);
    (void)sqlite3_bind_int64(st, 2, max_id);
    (void)sqlite3_bind_int64(st, 3, SCAN_MAX);
    bool leading = first == min_id, open = false;
    struct gap g = {0};
    uint64_t planned = 0;
    while (planned < n && p->n_gaps < GAPS_MAX && sqlite3_step(st) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        bool refusal = sqlite3_column_int(st, 3) != 0;
        if (refusal) {
            const char *h = (const char *)sqlite3_column_text(st, 2);
            if (!open) {
                g.from = (uint64_t)sqlite3_column_int64(st, 1);
                g.from_id = id;
                open = true;
            }
            g.to = (uint64_t)sqlite3_column_int64(st, 1);
            g.to_id = id;
            str_copy(g.hash, h ? h : "", sizeof(g.hash));
            planned++;
            continue;
        }
        if (open && leading) {
            p->cut = g.to_id + 1;
        } else if (open) {
            p->gaps[p->n_gaps++] = g;
        }
        open = false;
        leading = false;
    }
    sqlite3_finalize(st);
    if (open && leading) {
        p->cut = g.to_id + 1;
    } else if (open && p->n_gaps < GAPS_MAX) {
        p->gaps[p->n_gaps++] = g;
    } else if (open) {
        planned -= (uint64_t)(g.to_id - g.from_id + 1); /* not recorded: stays */
    }
    p->why = "refusals";
    return planned;
}

/* The first kept row (the chain's new start) into start_seq and start_prev. */
static int first_kept(struct audit *a, uint64_t *start_seq, char start_prev[AUDIT_HASH_HEX],
                      struct err *e)
{
    sqlite3_stmt *st = NULL;
    int r = 0;
    if (sqlite3_prepare_v2(a->db, "SELECT seq, prev FROM events ORDER BY id LIMIT 1", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        *start_seq = (uint64_t)sqlite3_column_int64(st, 0);
        const char *p = (const char *)sqlite3_column_text(st, 1);
        str_copy(start_prev, p ? p : "", AUDIT_HASH_HEX);
    } else {
        r = err_setx(e, -EIO, "audit: prune: first kept row: %s", sqlite3_errmsg(a->db));
    }
    sqlite3_finalize(st);
    return r;
}

static int set_start(struct audit *a, uint64_t start_seq, const char *start_prev, struct err *e)
{
    sqlite3_stmt *st = NULL;
    char num[24];
    int r = 0;
    (void)snprintf(num, sizeof(num), "%llu", (unsigned long long)start_seq);
    if (sqlite3_prepare_v2(a->db,
                           "INSERT OR REPLACE INTO meta(key, value) VALUES"
                           "('start_seq', ?1), ('start_prev', ?2)",
                           -1, &st, NULL) != SQLITE_OK) {
        return err_setx(e, -EIO, "audit: prune: meta: %s", sqlite3_errmsg(a->db));
    }
    (void)sqlite3_bind_text(st, 1, num, -1, SQLITE_TRANSIENT);
    (void)sqlite3_bind_text(st, 2, start_prev, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) {
        r = err_setx(e, -EIO, "audit: prune: meta: %s", sqlite3_errmsg(a->db));
    }
    sqlite3_finalize(st);
    return r;
}

/* Carries out the plan in one transaction, with its audit.pruned event. Returns rows
 * deleted or -errno. */
static int prune_apply(struct audit *a, const struct plan *p, struct err *e)
{
    int r = audit_writer_begin(a, e);
    if (r < 0) {
        return r;
    }
    int deleted = 0;
    if (p->cut > 0) {
        r = run_sql_ids(a, "DELETE FROM events WHERE id < ?1", p->cut, 0, &deleted, e);
    }
    for (size_t i = 0; r == 0 && i < p->n_gaps; i++) {
        r = run_sql_ids(a, "DELETE FROM events WHERE id BETWEEN ?1 AND ?2", p->gaps[i].from_id,
                        p->gaps[i].to_id, &deleted, e);
    }
    uint64_t start_seq = 0;
    char start_prev[AUDIT_HASH_HEX] = "";
    if (r == 0) {
        r = first_kept(a, &start_seq, start_prev, e);
    }
    if (r == 0) {
        r = set_start(a, start_seq, start_prev, e);
    }
    uint64_t seq = a->head_seq, rows = a->rows;
    unsigned char hash[AUDIT_HASH_BYTES];
    memcpy(hash, a->head_hash, sizeof(hash));
    if (r == 0) {
        struct buf f = BUF_INIT;
        (void)buf_printf(&f,
                         "{\"rows\":%d,\"reason\":\"%s\",\"start_seq\":%llu,\"start_prev\":\"%s\"",
                         deleted, p->why, (unsigned long long)start_seq, start_prev);
        if (p->n_gaps) {
            (void)buf_puts(&f, ",\"gaps\":[");
            for (size_t i = 0; i < p->n_gaps; i++) {
                (void)buf_printf(&f, "%s[%llu,%llu,\"%s\"]", i ? "," : "",
                                 (unsigned long long)p->gaps[i].from,
                                 (unsigned long long)p->gaps[i].to, p->gaps[i].hash);
            }
            (void)buf_puts(&f, "]");
        }
        (void)buf_puts(&f, "}");
        a->rows -= (uint64_t)deleted < a->rows ? (uint64_t)deleted : a->rows;
        r = audit_writer_insert(a, &seq, hash, audit_realtime_ns(), "audit.pruned", NULL, f.p,
                                f.len, false, e);
        buf_free(&f);
    }
    r = audit_writer_finish(a, r, seq, hash, e);
    if (r < 0) {
        a->rows = rows;
        return r;
    }
    log_info("rows=%d gaps=%zu start_seq=%llu reason=%s msg=\"audit trail pruned\"", deleted,
             p->n_gaps, (unsigned long long)start_seq, p->why);
    /* Freed pages go back to the file system: the file shrinks at the next checkpoint,
     * which is asked for now. */
    if (a->o.max_bytes) {
        char *msg = NULL;
        (void)sqlite3_exec(a->db, "PRAGMA incremental_vacuum", NULL, NULL, &msg);
        sqlite3_free(msg);
        (void)sqlite3_wal_checkpoint_v2(a->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    }
    return deleted;
}

int audit_prune_step(struct audit *a, struct err *e)
{
    int64_t min_id = one_i64(a->db, "SELECT min(id) FROM events", 0, 0);
    int64_t max_id = one_i64(a->db, "SELECT max(id) FROM events", 0, 0);
    if (max_id <= 0) {
        return 0;
    }
    struct plan *p = xcalloc(1, sizeof(*p));
    int64_t cut = min_id;
    if (a->o.max_age_ns) {
        cut = first_id_since(a->db, min_id, max_id, audit_realtime_ns() - (int64_t)a->o.max_age_ns);
        p->why = "max_age";
    }
    uint64_t need = rows_needed(a);
    if (need > AUDIT_PRUNE_CHUNK) {
        need = AUDIT_PRUNE_CHUNK;
    }
    if (cut <= min_id && need > 0 && plan_refusals(a, min_id, max_id, need, p) == 0) {
        /* Task records alone are over the limits: the oldest go, younger than max_age. */
        cut = min_id + (int64_t)need;
        p->why = a->o.max_rows && a->rows > a->o.max_rows ? "max_rows" : "max_bytes";
        if (clock_now_ns() >= a->prune_warn_ns) {
            a->prune_warn_ns = clock_now_ns() + 60ULL * 1000000000ULL; /* once a minute */
            log_warn("rows=%llu msg=\"the audit trail is over its limits with no refused "
                     "requests left to prune: pruning its oldest records\" reason=%s",
                     (unsigned long long)a->rows, p->why);
        }
    }
    if (cut > min_id && p->cut == 0) {
        if (cut > min_id + AUDIT_PRUNE_CHUNK) {
            cut = min_id + AUDIT_PRUNE_CHUNK;
        }
        p->cut = cut > max_id ? max_id : cut; /* the newest row always stays */
    }
    int r = p->cut > min_id || p->n_gaps ? prune_apply(a, p, e) : 0;
    free(p);
    return r;
}
