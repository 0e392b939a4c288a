/* SPDX-License-Identifier: MIT */
/* The token store's SQLite side: the schema of <state_dir>/tokens.db, loading at start-up,
 * and the few writes (insert at issue, revoke, uses and forgetting in the background). It
 * holds hashes and grants only: no token string ever reaches it. Each function uses the
 * connection it is given, from one thread at a time. */
#include "token/token_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/util.h"

/* How long a statement waits for the other connection's write lock. */
#define TOKEN_DB_BUSY_MS 5000

static int token_db_err(sqlite3 *db, int rc, const char *what, struct err *e)
{
    return err_setx(e, -EIO, "token database: %s: %s", what,
                    db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

static int token_db_exec(sqlite3 *db, const char *sql, struct err *e)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        int r = err_setx(e, -EIO, "token database: %s", msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return r;
    }
    return 0;
}

void token_db_close(sqlite3 **db)
{
    if (*db) {
        (void)sqlite3_close(*db);
        *db = NULL;
    }
}

static void token_stmt_finalize(sqlite3_stmt **st)
{
    if (*st) {
        (void)sqlite3_finalize(*st);
        *st = NULL;
    }
}

static const char token_schema[] =
    "CREATE TABLE IF NOT EXISTS tokens ("
    " id TEXT PRIMARY KEY,"
    " hash BLOB NOT NULL UNIQUE,"
    " created_ms INTEGER NOT NULL,"
    " expires_ms INTEGER NOT NULL,"
    " uses_max INTEGER NOT NULL,"
    " uses_left INTEGER NOT NULL,"
    " net TEXT,"
    " revoked_ms INTEGER);"
    "CREATE TABLE IF NOT EXISTS token_mounts ("
    " token_id TEXT NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,"
    " idx INTEGER NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL,"
    " PRIMARY KEY (token_id, idx));"
    "CREATE TABLE IF NOT EXISTS token_pools ("
    " token_id TEXT NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,"
    " pool TEXT NOT NULL, PRIMARY KEY (token_id, pool));";

/* Opens a connection with our settings: WAL, full sync (a revocation must survive a power
 * loss), foreign keys for the cascades. */
int token_db_connect(const char *path, bool create, sqlite3 **ret, struct err *e)
{
    sqlite3 *db = NULL;
    if (create) {
        /* SECURITY: created 0600 before SQLite sees it; its -wal and -shm files copy the
         * mode. Hashes only, but nobody else needs to read them. */
        int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            return err_set(e, -errno, "token database '%s'", path);
        }
        (void)fchmod(fd, 0600);
        (void)fd_close(fd);
    }
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        int r = token_db_err(db, rc, path, e);
        (void)sqlite3_close(db);
        return r;
    }
    (void)sqlite3_busy_timeout(db, TOKEN_DB_BUSY_MS);
    int r = token_db_exec(db,
                          "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                          " PRAGMA foreign_keys=ON;",
                          e);
    if (r == 0 && create) {
        r = token_db_exec(db, token_schema, e);
    }
    if (r < 0) {
        (void)sqlite3_close(db);
        return r;
    }
    *ret = db;
    return 0;
}

static char *token_col_str(sqlite3_stmt *st, int col)
{
    const unsigned char *v = sqlite3_column_text(st, col);
    return v ? xstrdup((const char *)v) : NULL;
}

/* Reads one token's mounts and pools. */
static int token_load_grants(sqlite3 *db, sqlite3_stmt *qm, sqlite3_stmt *qp, struct token *t,
                             struct err *e)
{
    int rc;
    (void)sqlite3_reset(qm);
    (void)sqlite3_bind_text(qm, 1, t->id, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(qm)) == SQLITE_ROW) {
        if (t->n_mounts >= TOKEN_MAX_MOUNTS) {
            return err_setx(e, -EIO, "token database: token %s has too many mounts", t->id);
        }
        t->mounts = xrealloc(t->mounts, (t->n_mounts + 1) * sizeof(*t->mounts));
        t->mounts[t->n_mounts].src = token_col_str(qm, 0);
        t->mounts[t->n_mounts].dst = token_col_str(qm, 1);
        t->n_mounts++;
        if (!t->mounts[t->n_mounts - 1].src || !t->mounts[t->n_mounts - 1].dst) {
            return err_setx(e, -EIO, "token database: token %s has a bad mount", t->id);
        }
    }
    if (rc != SQLITE_DONE) {
        return token_db_err(db, rc, "read mounts", e);
    }
    (void)sqlite3_reset(qp);
    (void)sqlite3_bind_text(qp, 1, t->id, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(qp)) == SQLITE_ROW) {
        char *p = token_col_str(qp, 0);
        if (!p || t->n_pools >= TOKEN_MAX_POOLS) {
            free(p);
            return err_setx(e, -EIO, "token database: token %s has bad pools", t->id);
        }
        t->pools = xrealloc(t->pools, (t->n_pools + 1) * sizeof(*t->pools));
        t->pools[t->n_pools++] = p;
    }
    if (rc != SQLITE_DONE) {
        return token_db_err(db, rc, "read pools", e);
    }
    return 0;
}

int token_db_load(sqlite3 *db, uint64_t now, token_db_add_cb add, void *arg, struct err *e)
{
    scoped(token_stmt_finalize) sqlite3_stmt *q = NULL;
    scoped(token_stmt_finalize) sqlite3_stmt *qm = NULL;
    scoped(token_stmt_finalize) sqlite3_stmt *qp = NULL;
    char sql[160];

    /* Forgotten first: the cascades take their mounts and pools. */
    (void)snprintf(sql, sizeof(sql), "DELETE FROM tokens WHERE expires_ms + %llu < %llu;",
                   (unsigned long long)TOKEN_KEEP_MS, (unsigned long long)now);
    int r = token_db_exec(db, sql, e);
    if (r < 0) {
        return r;
    }
    if (sqlite3_prepare_v2(db,
                           "SELECT id, hash, created_ms, expires_ms, uses_max, uses_left, net,"
                           " revoked_ms FROM tokens ORDER BY created_ms, id",
                           -1, &q, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "SELECT src, dst FROM token_mounts WHERE token_id = ?1"
                           " ORDER BY idx",
                           -1, &qm, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT pool FROM token_pools WHERE token_id = ?1 ORDER BY pool", -1,
                           &qp, NULL) != SQLITE_OK) {
        return token_db_err(db, 0, "prepare", e);
    }
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const unsigned char *id = sqlite3_column_text(q, 0);
        const void *hash = sqlite3_column_blob(q, 1);
        if (!id || strlen((const char *)id) != TOKEN_ID_LEN || !hash ||
            sqlite3_column_bytes(q, 1) != TOKEN_HASH_BYTES) {
            return err_setx(e, -EIO, "token database: malformed row");
        }
        struct token *t = xcalloc(1, sizeof(*t));
        memcpy(t->id, id, TOKEN_ID_LEN);
        memcpy(t->hash, hash, TOKEN_HASH_BYTES);
        t->created_ms = (uint64_t)sqlite3_column_int64(q, 2);
        t->expires_ms = (uint64_t)sqlite3_column_int64(q, 3);
        t->uses_max = (uint32_t)sqlite3_column_int64(q, 4);
        t->uses_left = (uint32_t)sqlite3_column_int64(q, 5);
        t->net = token_col_str(q, 6);
        t->revoked_ms = (uint64_t)sqlite3_column_int64(q, 7);
        t->revoke_saved = t->revoked_ms != 0;
        /* Nothing runs under it yet: an expiry already past needs no kill. */
        t->expiry_seen = now >= t->expires_ms;
        r = token_load_grants(db, qm, qp, t, e);
        if (r < 0) {
            token_free(t);
            return r;
        }
        r = add(arg, t, e); /* takes t */
        if (r != 0) {
            break;
        }
    }
    if (r < 0) {
        return r;
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        return token_db_err(db, rc, "read tokens", e);
    }
    return 0;
}

/* Inserts a token and its grants in one transaction. */
int token_db_insert(sqlite3 *db, const struct token *t, struct err *e)
{
    scoped(token_stmt_finalize) sqlite3_stmt *qt = NULL;
    scoped(token_stmt_finalize) sqlite3_stmt *qm = NULL;
    scoped(token_stmt_finalize) sqlite3_stmt *qp = NULL;
    int r = token_db_exec(db, "BEGIN IMMEDIATE;", e);
    if (r < 0) {
        return r;
    }
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO tokens (id, hash, created_ms, expires_ms, uses_max,"
                           " uses_left, net, revoked_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL)",
                           -1, &qt, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "INSERT INTO token_mounts (token_id, idx, src, dst)"
                           " VALUES (?1, ?2, ?3, ?4)",
                           -1, &qm, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO token_pools (token_id, pool) VALUES (?1, ?2)", -1, &qp,
                           NULL) != SQLITE_OK) {
        r = token_db_err(db, 0, "prepare insert", e);
        goto out;
    }
    (void)sqlite3_bind_text(qt, 1, t->id, -1, SQLITE_STATIC);
    (void)sqlite3_bind_blob(qt, 2, t->hash, TOKEN_HASH_BYTES, SQLITE_STATIC);
    (void)sqlite3_bind_int64(qt, 3, (sqlite3_int64)t->created_ms);
    (void)sqlite3_bind_int64(qt, 4, (sqlite3_int64)t->expires_ms);
    (void)sqlite3_bind_int64(qt, 5, t->uses_max);
    (void)sqlite3_bind_int64(qt, 6, t->uses_left);
    if (t->net) {
        (void)sqlite3_bind_text(qt, 7, t->net, -1, SQLITE_STATIC);
    } else {
        (void)sqlite3_bind_null(qt, 7);
    }
    if (sqlite3_step(qt) != SQLITE_DONE) {
        r = token_db_err(db, 0, "insert token", e);
        goto out;
    }
    for (size_t i = 0; i < t->n_mounts; i++) {
        (void)sqlite3_reset(qm);
        (void)sqlite3_bind_text(qm, 1, t->id, -1, SQLITE_STATIC);
        (void)sqlite3_bind_int64(qm, 2, (sqlite3_int64)i);
        (void)sqlite3_bind_text(qm, 3, t->mounts[i].src, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(qm, 4, t->mounts[i].dst, -1, SQLITE_STATIC);
        if (sqlite3_step(qm) != SQLITE_DONE) {
            r = token_db_err(db, 0, "insert mount", e);
            goto out;
        }
    }
    for (size_t i = 0; i < t->n_pools; i++) {
        (void)sqlite3_reset(qp);
        (void)sqlite3_bind_text(qp, 1, t->id, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(qp, 2, t->pools[i], -1, SQLITE_STATIC);
        if (sqlite3_step(qp) != SQLITE_DONE) {
            r = token_db_err(db, 0, "insert pool", e);
            goto out;
        }
    }
    r = token_db_exec(db, "COMMIT;", e);
out:
    if (r < 0) {
        (void)sqlite3_exec(db, "ROLLBACK;", NULL, NULL, NULL);
    }
    return r;
}

int token_db_revoke(sqlite3 *db, const struct token *t, struct err *e)
{
    scoped(token_stmt_finalize) sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db, "UPDATE tokens SET revoked_ms = ?2 WHERE id = ?1", -1, &q, NULL) !=
        SQLITE_OK) {
        return token_db_err(db, 0, "prepare revoke", e);
    }
    (void)sqlite3_bind_text(q, 1, t->id, -1, SQLITE_STATIC);
    (void)sqlite3_bind_int64(q, 2, (sqlite3_int64)t->revoked_ms);
    if (sqlite3_step(q) != SQLITE_DONE) {
        return token_db_err(db, 0, "revoke", e);
    }
    return 0;
}

/* Writes a batch of ops in one transaction (any thread, with its own connection). */
int token_db_apply(sqlite3 *db, const struct token_op *ops, size_t n, struct err *e)
{
    scoped(token_stmt_finalize) sqlite3_stmt *qu = NULL;
    scoped(token_stmt_finalize) sqlite3_stmt *qd = NULL;
    int r = token_db_exec(db, "BEGIN IMMEDIATE;", e);
    if (r < 0) {
        return r;
    }
    if (sqlite3_prepare_v2(db, "UPDATE tokens SET uses_left = ?2 WHERE id = ?1", -1, &qu, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(db, "DELETE FROM tokens WHERE id = ?1", -1, &qd, NULL) != SQLITE_OK) {
        r = token_db_err(db, 0, "prepare write-back", e);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *q = ops[i].del ? qd : qu;
        (void)sqlite3_reset(q);
        (void)sqlite3_bind_text(q, 1, ops[i].id, -1, SQLITE_STATIC);
        if (!ops[i].del) {
            (void)sqlite3_bind_int64(q, 2, ops[i].uses_left);
        }
        if (sqlite3_step(q) != SQLITE_DONE) {
            r = token_db_err(db, 0, "write-back", e);
            goto out;
        }
    }
    r = token_db_exec(db, "COMMIT;", e);
out:
    if (r < 0) {
        (void)sqlite3_exec(db, "ROLLBACK;", NULL, NULL, NULL);
    }
    return r;
}
