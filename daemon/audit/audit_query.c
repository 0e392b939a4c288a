/* SPDX-License-Identifier: MIT */
/* Reads the audit trail on a read-only connection: verification of the hash chain,
 * the chains for `sbx audit` (stored JSON turned back into msgpack), and the tasks a dead
 * sbxd left open. Never writes, never touches loop state; it trusts nothing in the file
 * (a tampered row is reported, never crashes it). */
#define LOG_MOD "audit"
#include "audit/audit_query.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "audit/audit_gaps.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "wire/proto.h"
#include "lib/util.h"

#define QUERY_MAX_BYTES (8u << 20)
#define JSON_MAX_DEPTH 32

static int ro_fail(sqlite3 *db, struct err *e, const char *what)
{
    return err_setx(e, -EIO, "audit: %s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
}

int audit_query_ro_open(const char *path, struct sqlite3 **ret, struct err *e)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        int r = ro_fail(db, e, path);
        sqlite3_close(db);
        return r;
    }
    (void)sqlite3_busy_timeout(db, 5000);
    *ret = db;
    return 0;
}

struct sqlite3 *audit_query_ro_close(struct sqlite3 *db)
{
    if (db) {
        (void)sqlite3_close(db);
    }
    return NULL;
}

static int tx(sqlite3 *db, const char *sql, struct err *e)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        return ro_fail(db, e, sql);
    }
    return 0;
}

static void finalizep(sqlite3_stmt **st)
{
    if (*st) {
        sqlite3_finalize(*st);
    }
}

static void audit_gaps_freep(struct audit_gaps **g)
{
    *g = audit_gaps_free(*g);
}

/* ---- verification --------------------------------------------------------------------- */

static int meta_text(sqlite3 *db, const char *key, char *buf, size_t size)
{
    scoped(finalizep) sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?1", -1, &st, NULL) !=
        SQLITE_OK) {
        return -EIO;
    }
    (void)sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_ROW) {
        return -ENOENT;
    }
    const char *v = (const char *)sqlite3_column_text(st, 0);
    str_copy(buf, v ? v : "", size);
    return 0;
}

static void bad(struct audit_verify_result *v, const char *problem, uint64_t seq, int64_t id,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void bad(struct audit_verify_result *v, const char *problem, uint64_t seq, int64_t id,
                const char *fmt, ...)
{
    v->ok = false;
    v->bad_seq = seq;
    v->bad_id = id;
    str_copy(v->problem, problem, sizeof(v->problem));
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(v->message, sizeof(v->message), fmt, ap);
    va_end(ap);
}

static const char *col_text(sqlite3_stmt *st, int i, size_t *len)
{
    const char *s = (const char *)sqlite3_column_text(st, i);
    *len = s ? (size_t)sqlite3_column_bytes(st, i) : 0;
    return s;
}

/* The walk; false when it found a problem (v says which). */
static bool walk(sqlite3 *db, struct audit_verify_result *v, const unsigned char start_prev[],
                 const unsigned char head_hash[], struct err *e, int *ret_r)
{
    scoped(finalizep) sqlite3_stmt *st = NULL;
    scoped(audit_gaps_freep) struct audit_gaps *gaps = NULL;
    *ret_r = audit_gaps_load(db, &gaps, e);
    if (*ret_r < 0) {
        return false;
    }
    if (sqlite3_prepare_v2(db,
                           "SELECT id, seq, time, type, task, fields, prev, hash FROM events "
                           "ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK) {
        *ret_r = ro_fail(db, e, "verify");
        return false;
    }
    uint64_t n = v->start_seq;
    unsigned char p[AUDIT_HASH_BYTES];
    memcpy(p, start_prev, sizeof(p));
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        int64_t sseq = sqlite3_column_int64(st, 1);
        uint64_t seq = sseq < 0 ? 0 : (uint64_t)sseq;
        int64_t time_ns = sqlite3_column_int64(st, 2);
        size_t tl, kl, fl, pl, hl;
        const char *type = col_text(st, 3, &tl);
        const char *task = col_text(st, 4, &kl);
        const char *fields = col_text(st, 5, &fl);
        const char *prev_hex = col_text(st, 6, &pl);
        const char *hash_hex = col_text(st, 7, &hl);
        v->rows++;
        if (seq > v->head_seq) {
            bad(v, "inserted", seq, id,
                "row id %lld (seq %llu) is beyond the head sbxd recorded (seq %llu): it was "
                "inserted",
                (long long)id, (unsigned long long)seq, (unsigned long long)v->head_seq);
            return false;
        }
        if (seq < n) {
            bad(v, "inserted", seq, id,
                "row id %lld repeats or goes back to seq %llu after seq %llu: it was inserted",
                (long long)id, (unsigned long long)seq, (unsigned long long)(n - 1));
            return false;
        }
        /* Retention may remove refused requests' rows inside the chain; each such gap is
         * recorded by a later audit.pruned event with the hash the next row links to. */
        bool gap = seq > n && audit_gaps_cover(gaps, n, seq - 1, prev_hex, pl);
        if (seq > n && !gap) {
            bad(v, "removed", n, -1, "rows seq %llu..%llu are missing (removed)",
                (unsigned long long)n, (unsigned long long)(seq - 1));
            return false;
        }
        unsigned char prev[AUDIT_HASH_BYTES], hash[AUDIT_HASH_BYTES], want[AUDIT_HASH_BYTES];
        if (!type || !fields || audit_hash_parse(prev_hex, pl, prev) < 0 ||
            audit_hash_parse(hash_hex, hl, hash) < 0) {
            bad(v, "altered", seq, id, "row seq %llu (id %lld) is malformed: it was altered",
                (unsigned long long)seq, (long long)id);
            return false;
        }
        /* NUL bytes would make the text differ from what was hashed: hash what is there. */
        scoped_free char *type_z = xstrndup(type, tl);
        scoped_free char *task_z = task ? xstrndup(task, kl) : NULL;
        audit_hash(prev, seq, time_ns, type_z, task_z, fields, fl, want);
        if (memcmp(want, hash, sizeof(want)) != 0) {
            bad(v, "altered", seq, id,
                "row seq %llu (id %lld) does not match its hash: it was altered",
                (unsigned long long)seq, (long long)id);
            return false;
        }
        if (!gap && memcmp(prev, p, sizeof(p)) != 0) {
            if (seq == v->start_seq) {
                bad(v, "altered", seq, id,
                    "row seq %llu (id %lld) does not link to the recorded chain start: it or "
                    "the start was altered",
                    (unsigned long long)seq, (long long)id);
            } else {
                /* Its own hash matches, so the row before it changed (content and hash). */
                bad(v, "altered", seq - 1, -1,
                    "row seq %llu was altered: row seq %llu recorded a different hash for it",
                    (unsigned long long)(seq - 1), (unsigned long long)seq);
            }
            return false;
        }
        memcpy(p, hash, sizeof(p));
        n = seq + 1;
    }
    if (rc != SQLITE_DONE) {
        *ret_r = ro_fail(db, e, "verify");
        return false;
    }
    if (n - 1 < v->head_seq) {
        bad(v, "removed", n, -1, "rows seq %llu..%llu are missing (removed)", (unsigned long long)n,
            (unsigned long long)v->head_seq);
        return false;
    }
    if (v->head_seq >= v->start_seq && memcmp(p, head_hash, AUDIT_HASH_BYTES) != 0) {
        bad(v, "altered", v->head_seq, -1,
            "row seq %llu is not the head sbxd recorded: it was altered",
            (unsigned long long)v->head_seq);
        return false;
    }
    return true;
}

/* A pruned trail must start where the last audit.pruned event (inside the verified chain)
 * says it does: otherwise rows were removed from its start and the anchor moved. */
static int check_anchor(sqlite3 *db, struct audit_verify_result *v, const char *start_prev,
                        struct err *e)
{
    if (v->start_seq <= 1) {
        return 0;
    }
    scoped(finalizep) sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT CASE WHEN json_valid(fields) THEN "
                           "json_extract(fields, '$.start_seq') END, CASE WHEN "
                           "json_valid(fields) THEN json_extract(fields, '$.start_prev') END "
                           "FROM events WHERE type = 'audit.pruned' ORDER BY id DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK) {
        return ro_fail(db, e, "verify");
    }
    if (sqlite3_step(st) != SQLITE_ROW) {
        bad(v, "removed", 1, -1,
            "rows seq 1..%llu are missing and no audit.pruned event records their pruning",
            (unsigned long long)(v->start_seq - 1));
        return 0;
    }
    uint64_t rec = (uint64_t)sqlite3_column_int64(st, 0);
    const char *prev = (const char *)sqlite3_column_text(st, 1);
    if (rec != v->start_seq || !prev || strcmp(prev, start_prev) != 0) {
        uint64_t from = rec < v->start_seq ? rec : 1;
        bad(v, "removed", from, -1,
            "the trail starts at seq %llu but the last audit.pruned event kept seq %llu on: "
            "rows seq %llu..%llu were removed",
            (unsigned long long)v->start_seq, (unsigned long long)rec, (unsigned long long)from,
            (unsigned long long)(v->start_seq - 1));
    }
    return 0;
}

int audit_query_verify(struct sqlite3 *db, struct audit_verify_result *ret, struct err *e)
{
    struct audit_verify_result v;
    memset(&v, 0, sizeof(v));
    v.ok = true;
    v.bad_id = -1;
    int r = tx(db, "BEGIN", e);
    if (r < 0) {
        return r;
    }
    char start_prev[AUDIT_HASH_HEX + 8] = "", buf[AUDIT_HASH_HEX + 8] = "";
    unsigned char sp[AUDIT_HASH_BYTES], hh[AUDIT_HASH_BYTES];
    if (meta_text(db, "start_seq", buf, sizeof(buf)) < 0 || parse_u64(buf, &v.start_seq) < 0 ||
        meta_text(db, "start_prev", start_prev, sizeof(start_prev)) < 0 ||
        audit_hash_parse(start_prev, strlen(start_prev), sp) < 0 ||
        meta_text(db, "head_hash", v.head_hash, sizeof(v.head_hash)) < 0 ||
        audit_hash_parse(v.head_hash, strlen(v.head_hash), hh) < 0 ||
        meta_text(db, "head_seq", buf, sizeof(buf)) < 0 || parse_u64(buf, &v.head_seq) < 0 ||
        v.start_seq == 0) {
        bad(&v, "altered", 0, -1, "the trail's meta table is missing or malformed");
    } else if (walk(db, &v, sp, hh, e, &r)) {
        r = check_anchor(db, &v, start_prev, e);
    }
    (void)tx(db, "COMMIT", NULL);
    if (r < 0) {
        return r;
    }
    *ret = v;
    return 0;
}

void audit_query_verify_pack(const struct audit_verify_result *v, msgpack_packer *pk)
{
    msgpack_pack_map(pk, v->ok ? 5 : 9);
    proto_pack_kv_bool(pk, "ok", v->ok);
    proto_pack_kv_u64(pk, "rows", v->rows);
    proto_pack_kv_u64(pk, "start_seq", v->start_seq);
    proto_pack_kv_u64(pk, "head_seq", v->head_seq);
    proto_pack_kv_str(pk, "head_hash", v->head_hash);
    if (!v->ok) {
        proto_pack_kv_u64(pk, "bad_seq", v->bad_seq);
        if (v->bad_id >= 0) {
            proto_pack_kv_i64(pk, "bad_id", v->bad_id);
        } else {
            proto_pack_kv_nil(pk, "bad_id");
        }
        proto_pack_kv_text(pk, "problem", v->problem);
        proto_pack_kv_text(pk, "message", v->message);
    }
}

/* ---- JSON to msgpack ------------------------------------------------------------------ */

struct jp {
    const char *s;
    size_t n;
    size_t i;
};

static void jp_ws(struct jp *p)
{
    while (p->i < p->n &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\n' || p->s[p->i] == '\t' || p->s[p->i] == '\r')) {
        p->i++;
    }
}

static int hex4(const char *s, uint32_t *ret)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9') {
            v |= (uint32_t)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            v |= (uint32_t)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            v |= (uint32_t)(c - 'A' + 10);
        } else {
            return -EINVAL;
        }
    }
    *ret = v;
    return 0;
}

static void put_utf8(msgpack_sbuffer *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12);
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | cp >> 18);
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    (void)msgpack_sbuffer_write(b, u, n);
}

/* A string literal into b (decoded). */
static int jp_string(struct jp *p, msgpack_sbuffer *b)
{
    if (p->i >= p->n || p->s[p->i] != '"') {
        return -EINVAL;
    }
    p->i++;
    while (p->i < p->n) {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            p->i++;
            return 0;
        }
        if (c < 0x20) {
            return -EINVAL;
        }
        if (c != '\\') {
            size_t j = p->i;
            while (j < p->n && p->s[j] != '"' && p->s[j] != '\\' &&
                   (unsigned char)p->s[j] >= 0x20) {
                j++;
            }
            (void)msgpack_sbuffer_write(b, p->s + p->i, j - p->i);
            p->i = j;
            continue;
        }
        if (p->i + 1 >= p->n) {
            return -EINVAL;
        }
        char esc = p->s[p->i + 1];
        p->i += 2;
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *k = strchr(from, esc);
        if (esc && k) {
            (void)msgpack_sbuffer_write(b, &to[k - from], 1);
            continue;
        }
        if (esc != 'u' || p->i + 4 > p->n) {
            return -EINVAL;
        }
        uint32_t cp;
        if (hex4(p->s + p->i, &cp) < 0) {
            return -EINVAL;
        }
        p->i += 4;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t lo;
            if (p->i + 6 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' ||
                hex4(p->s + p->i + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff) {
                return -EINVAL;
            }
            p->i += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            return -EINVAL;
        }
        put_utf8(b, cp);
    }
    return -EINVAL;
}

static int jp_value(struct jp *p, msgpack_packer *pk, int depth);

static void pk_raw(msgpack_packer *pk, const msgpack_sbuffer *b)
{
    if (b->size > 0) {
        (void)pk->callback(pk->data, b->data, b->size);
    }
}

/* Object or array: members are packed into a scratch buffer first, for the count. */
static int jp_container(struct jp *p, msgpack_packer *pk, int depth, bool object)
{
    char close = object ? '}' : ']';
    msgpack_sbuffer tmp;
    msgpack_sbuffer_init(&tmp);
    msgpack_packer tp;
    msgpack_packer_init(&tp, &tmp, msgpack_sbuffer_write);
    uint32_t count = 0;
    int r = 0;
    p->i++;
    jp_ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        goto out;
    }
    for (;;) {
        jp_ws(p);
        if (object) {
            msgpack_sbuffer key;
            msgpack_sbuffer_init(&key);
            r = jp_string(p, &key);
            if (r == 0) {
                proto_pack_textn(&tp, key.data ? key.data : "", key.size);
            }
            msgpack_sbuffer_destroy(&key);
            jp_ws(p);
            if (r < 0 || p->i >= p->n || p->s[p->i] != ':') {
                r = -EINVAL;
                goto out;
            }
            p->i++;
        }
        r = jp_value(p, &tp, depth + 1);
        if (r < 0) {
            goto out;
        }
        count++;
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            break;
        }
        r = -EINVAL;
        goto out;
    }
out:
    if (r == 0) {
        if (object) {
            msgpack_pack_map(pk, count);
        } else {
            msgpack_pack_array(pk, count);
        }
        pk_raw(pk, &tmp);
    }
    msgpack_sbuffer_destroy(&tmp);
    return r;
}

static int jp_number(struct jp *p, msgpack_packer *pk)
{
    size_t j = p->i;
    bool frac = false;
    while (j < p->n && strchr("+-0123456789.eE", p->s[j])) {
        frac = frac || p->s[j] == '.' || p->s[j] == 'e' || p->s[j] == 'E';
        j++;
    }
    char num[64];
    if (j == p->i || j - p->i >= sizeof(num)) {
        return -EINVAL;
    }
    memcpy(num, p->s + p->i, j - p->i);
    num[j - p->i] = '\0';
    char *end = NULL;
    errno = 0;
    if (!frac && num[0] == '-') {
        long long v = strtoll(num, &end, 10);
        if (*end || errno) {
            return -EINVAL;
        }
        msgpack_pack_int64(pk, v);
    } else if (!frac) {
        unsigned long long v = strtoull(num, &end, 10);
        if (*end || errno) {
            return -EINVAL;
        }
        msgpack_pack_uint64(pk, v);
    } else {
        double v = strtod(num, &end);
        if (*end) {
            return -EINVAL;
        }
        msgpack_pack_double(pk, v);
    }
    p->i = j;
    return 0;
}

static int jp_value(struct jp *p, msgpack_packer *pk, int depth)
{
    if (depth > JSON_MAX_DEPTH) {
        return -EINVAL;
    }
    jp_ws(p);
    if (p->i >= p->n) {
        return -EINVAL;
    }
    char c = p->s[p->i];
    if (c == '{' || c == '[') {
        return jp_container(p, pk, depth, c == '{');
    }
    if (c == '"') {
        msgpack_sbuffer b;
        msgpack_sbuffer_init(&b);
        int r = jp_string(p, &b);
        if (r == 0) {
            proto_pack_textn(pk, b.data ? b.data : "", b.size);
        }
        msgpack_sbuffer_destroy(&b);
        return r;
    }
    static const struct {
        const char *word;
        int kind;
    } words[] = {{"true", 1}, {"false", 2}, {"null", 3}};
    for (size_t k = 0; k < ARRAY_SIZE(words); k++) {
        size_t l = strlen(words[k].word);
        if (p->n - p->i >= l && memcmp(p->s + p->i, words[k].word, l) == 0) {
            p->i += l;
            if (words[k].kind == 1) {
                msgpack_pack_true(pk);
            } else if (words[k].kind == 2) {
                msgpack_pack_false(pk);
            } else {
                msgpack_pack_nil(pk);
            }
            return 0;
        }
    }
    return jp_number(p, pk);
}

int audit_query_json_pack(const char *json, size_t len, msgpack_packer *pk)
{
    struct jp p = {json, len, 0};
    msgpack_sbuffer tmp;
    msgpack_sbuffer_init(&tmp);
    msgpack_packer tp;
    msgpack_packer_init(&tp, &tmp, msgpack_sbuffer_write);
    int r = jp_value(&p, &tp, 0);
    jp_ws(&p);
    if (r == 0 && p.i != p.n) {
        r = -EINVAL;
    }
    if (r == 0) {
        pk_raw(pk, &tmp);
    }
    msgpack_sbuffer_destroy(&tmp);
    return r;
}

/* ---- chains for sbx audit --------------------------------------------------------------- */

static int pack_chain(sqlite3 *db, sqlite3_stmt *ev, const char *task, msgpack_packer *pk,
                      struct err *e)
{
    /* Count first: msgpack needs the array length up front. */
    uint32_t count = 0;
    (void)sqlite3_bind_text(ev, 1, task, -1, SQLITE_TRANSIENT);
    int rc;
    while ((rc = sqlite3_step(ev)) == SQLITE_ROW) {
        count++;
    }
    sqlite3_reset(ev);
    if (rc != SQLITE_DONE) {
        return ro_fail(db, e, "query");
    }
    msgpack_pack_map(pk, 2);
    proto_pack_kv_str(pk, "task", task);
    proto_pack_cstr(pk, "events");
    msgpack_pack_array(pk, count);
    uint32_t done = 0;
    while (done < count && (rc = sqlite3_step(ev)) == SQLITE_ROW) {
        size_t tl, fl;
        const char *type = col_text(ev, 3, &tl);
        const char *fields = col_text(ev, 4, &fl);
        msgpack_pack_map(pk, 5);
        proto_pack_kv_i64(pk, "id", sqlite3_column_int64(ev, 0));
        proto_pack_kv_i64(pk, "seq", sqlite3_column_int64(ev, 1));
        proto_pack_kv_i64(pk, "time_ns", sqlite3_column_int64(ev, 2));
        proto_pack_cstr(pk, "type");
        proto_pack_textn(pk, type ? type : "", tl);
        proto_pack_cstr(pk, "fields");
        if (!fields || audit_query_json_pack(fields, fl, pk) < 0) {
            proto_pack_textn(pk, fields ? fields : "", fl);
        }
        done++;
    }
    /* A row that vanished between the two passes (impossible inside one read
     * transaction): keep the array length honest. */
    for (; done < count; done++) {
        msgpack_pack_nil(pk);
    }
    sqlite3_reset(ev);
    return 0;
}

static const char list_sql[] =
    "SELECT r.task FROM events r WHERE r.type = 'task.request' AND r.task IS NOT NULL"
    " AND r.time >= ?1"
    " AND (?2 IS NULL OR (CASE WHEN json_valid(r.fields) THEN json_extract(r.fields, '$.pool')"
    " END) = ?2)"
    " AND (?3 IS NULL OR (?3 = 'running' AND NOT EXISTS (SELECT 1 FROM events x"
    "  WHERE x.task = r.task AND x.type = 'task.result'))"
    "  OR (SELECT CASE WHEN json_valid(x.fields) THEN json_extract(x.fields, '$.status') END"
    "  FROM events x WHERE x.task = r.task AND x.type = 'task.result' ORDER BY x.id DESC"
    "  LIMIT 1) = ?3)"
    " ORDER BY r.time DESC, r.id DESC LIMIT ?4";

/* A session's own chain (its events carry its id as their task), then its commands' in the
 * order they were requested (bounded by limit + 1). */
static int session_tasks(sqlite3 *db, const struct audit_query *q, struct strv *tasks,
                         struct err *e)
{
    scoped(finalizep) sqlite3_stmt *open = NULL;
    scoped(finalizep) sqlite3_stmt *list = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT time FROM events WHERE task = ?1 AND type = 'session.open'"
                           " ORDER BY id LIMIT 1",
                           -1, &open, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "SELECT task FROM events WHERE type = 'task.request'"
                           " AND task IS NOT NULL AND time >= ?2 AND CASE WHEN json_valid(fields)"
                           " THEN json_extract(fields, '$.session') END = ?1 ORDER BY id LIMIT ?3",
                           -1, &list, NULL) != SQLITE_OK) {
        return ro_fail(db, e, "query");
    }
    (void)sqlite3_bind_text(open, 1, q->session, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(open) != SQLITE_ROW) {
        return 0; /* no such session in the trail: no chains */
    }
    strv_push(tasks, q->session);
    /* Its commands came after its opening: the request index's time bound, with slack for
     * a clock that stepped back. */
    (void)sqlite3_bind_text(list, 1, q->session, -1, SQLITE_TRANSIENT);
    (void)sqlite3_bind_int64(list, 2, sqlite3_column_int64(open, 0) - 3600LL * 1000000000LL);
    (void)sqlite3_bind_int64(list, 3, (sqlite3_int64)q->limit);
    int rc;
    while ((rc = sqlite3_step(list)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(list, 0);
        strv_push(tasks, t ? t : "");
    }
    return rc == SQLITE_DONE ? 0 : ro_fail(db, e, "query");
}

int audit_query_pack(struct sqlite3 *db, const struct audit_query *q, msgpack_packer *pk,
                     struct err *e)
{
    scoped(finalizep) sqlite3_stmt *list = NULL;
    scoped(finalizep) sqlite3_stmt *ev = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT id, seq, time, type, fields FROM events WHERE task = ?1 "
                           "ORDER BY id",
                           -1, &ev, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, list_sql, -1, &list, NULL) != SQLITE_OK) {
        return ro_fail(db, e, "query");
    }
    int r = tx(db, "BEGIN", e);
    if (r < 0) {
        return r;
    }
    /* Task ids first (bounded by limit + 1), then one chain each. */
    scoped_strv struct strv tasks = STRV_INIT;
    if (q->session) {
        r = session_tasks(db, q, &tasks, e);
    } else if (q->task) {
        (void)sqlite3_bind_text(ev, 1, q->task, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(ev) == SQLITE_ROW) {
            strv_push(&tasks, q->task);
        }
        sqlite3_reset(ev);
    } else {
        (void)sqlite3_bind_int64(list, 1, q->since_ns);
        if (q->pool) {
            (void)sqlite3_bind_text(list, 2, q->pool, -1, SQLITE_TRANSIENT);
        }
        if (q->status) {
            (void)sqlite3_bind_text(list, 3, q->status, -1, SQLITE_TRANSIENT);
        }
        (void)sqlite3_bind_int64(list, 4, (sqlite3_int64)q->limit + 1);
        int rc;
        while ((rc = sqlite3_step(list)) == SQLITE_ROW) {
            const char *t = (const char *)sqlite3_column_text(list, 0);
            strv_push(&tasks, t ? t : "");
        }
        if (rc != SQLITE_DONE) {
            r = ro_fail(db, e, "query");
        }
    }
    bool more = tasks.n > q->limit;
    size_t shown = more ? q->limit : tasks.n;
    msgpack_sbuffer chains;
    msgpack_sbuffer_init(&chains);
    msgpack_packer cp;
    msgpack_packer_init(&cp, &chains, msgpack_sbuffer_write);
    uint32_t packed = 0;
    for (size_t i = 0; r == 0 && i < shown; i++) {
        if (chains.size > QUERY_MAX_BYTES) {
            more = true;
            break;
        }
        r = pack_chain(db, ev, tasks.v[i], &cp, e);
        packed++;
    }
    (void)tx(db, "COMMIT", NULL);
    if (r == 0) {
        msgpack_pack_map(pk, 2);
        proto_pack_cstr(pk, "chains");
        msgpack_pack_array(pk, packed);
        pk_raw(pk, &chains);
        proto_pack_kv_bool(pk, "more", more);
    }
    msgpack_sbuffer_destroy(&chains);
    return r;
}

/* ---- tasks left open by a dead sbxd ----------------------------------------------------- */

int audit_query_open_tasks(struct sqlite3 *db,
                           void (*fn)(const struct audit_open_task *t, void *ud), void *ud,
                           struct err *e)
{
    scoped(finalizep) sqlite3_stmt *open = NULL;
    scoped(finalizep) sqlite3_stmt *sb = NULL;
    if (sqlite3_prepare_v2(
            db,
            "SELECT r.task, CASE WHEN json_valid(r.fields) THEN json_extract(r.fields, '$.pool')"
            " END FROM events r WHERE r.type = 'task.request' AND r.task IS NOT NULL"
            " AND r.id > ?1 AND r.time >= ?2 AND NOT EXISTS (SELECT 1 FROM events x"
            " WHERE x.task = r.task AND x.type = 'task.result') ORDER BY r.id",
            -1, &open, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(
            db,
            "SELECT (SELECT CASE WHEN json_valid(fields) THEN json_extract(fields, '$.sandbox')"
            " END FROM events WHERE task = ?1 AND type = 'sandbox.assigned' ORDER BY id LIMIT 1),"
            " EXISTS (SELECT 1 FROM events WHERE task = ?1 AND type = 'sandbox.destroyed'),"
            " (SELECT CASE WHEN json_valid(fields) THEN json_extract(fields, '$.cgroup')"
            " END FROM events WHERE task = ?1 AND type = 'sandbox.assigned' ORDER BY id LIMIT 1)",
            -1, &sb, NULL) != SQLITE_OK) {
        return ro_fail(db, e, "open tasks");
    }
    int r = tx(db, "BEGIN", e);
    if (r < 0) {
        return r;
    }
    /* Requests before the last daemon.start were settled by that start. */
    int64_t since_id = 0, since_time = 0;
    {
        scoped(finalizep) sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db,
                               "SELECT id, time FROM events WHERE type = 'daemon.start' "
                               "ORDER BY id DESC LIMIT 1",
                               -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW) {
            since_id = sqlite3_column_int64(st, 0);
            since_time = sqlite3_column_int64(st, 1);
        }
    }
    (void)sqlite3_bind_int64(open, 1, since_id);
    /* Clocks may step back: the time bound only narrows the index scan, with slack. */
    (void)sqlite3_bind_int64(open, 2, since_time - 3600LL * 1000000000LL);
    int count = 0, rc;
    while ((rc = sqlite3_step(open)) == SQLITE_ROW) {
        const char *task = (const char *)sqlite3_column_text(open, 0);
        const char *pool = (const char *)sqlite3_column_text(open, 1);
        struct audit_open_task t = {.task = task, .pool = pool};
        (void)sqlite3_bind_text(sb, 1, task, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(sb) == SQLITE_ROW) {
            t.sandbox = (const char *)sqlite3_column_text(sb, 0);
            t.destroyed = sqlite3_column_int(sb, 1) != 0;
            t.cgroup = (const char *)sqlite3_column_text(sb, 2);
        }
        fn(&t, ud);
        sqlite3_reset(sb);
        count++;
    }
    if (rc != SQLITE_DONE) {
        r = ro_fail(db, e, "open tasks");
    }
    (void)tx(db, "COMMIT", NULL);
    return r < 0 ? r : count;
}

/* ---- sessions left open by a dead sbxd -------------------------------------------------- */

int audit_query_open_sessions(struct sqlite3 *db,
                              void (*fn)(const struct audit_open_session *s, void *ud), void *ud,
                              struct err *e)
{
    scoped(finalizep) sqlite3_stmt *open = NULL;
    scoped(finalizep) sqlite3_stmt *cmds = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT o.task, o.time, CASE WHEN json_valid(o.fields) THEN"
                           " json_extract(o.fields, '$.pool') END FROM events o"
                           " WHERE o.type = 'session.open' AND o.task IS NOT NULL AND o.id > ?1"
                           " AND NOT EXISTS (SELECT 1 FROM events x WHERE x.task = o.task"
                           " AND x.type = 'session.close') ORDER BY o.id",
                           -1, &open, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "SELECT count(*), max(time) FROM events WHERE type = 'task.request'"
                           " AND refusal = 0 AND time >= ?2 AND CASE WHEN json_valid(fields) THEN"
                           " json_extract(fields, '$.session') END = ?1",
                           -1, &cmds, NULL) != SQLITE_OK) {
        return ro_fail(db, e, "open sessions");
    }
    int r = tx(db, "BEGIN", e);
    if (r < 0) {
        return r;
    }
    /* Sessions opened before the last daemon.start were settled by that start. */
    int64_t since_id = 0;
    {
        scoped(finalizep) sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db,
                               "SELECT id FROM events WHERE type = 'daemon.start' "
                               "ORDER BY id DESC LIMIT 1",
                               -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW) {
            since_id = sqlite3_column_int64(st, 0);
        }
    }
    (void)sqlite3_bind_int64(open, 1, since_id);
    int count = 0, rc;
    while ((rc = sqlite3_step(open)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(open, 0);
        int64_t opened = sqlite3_column_int64(open, 1);
        struct audit_open_session s = {
            .session = id,
            .pool = (const char *)sqlite3_column_text(open, 2),
        };
        (void)sqlite3_bind_text(cmds, 1, id, -1, SQLITE_TRANSIENT);
        (void)sqlite3_bind_int64(cmds, 2, opened);
        if (sqlite3_step(cmds) == SQLITE_ROW) {
            s.commands = (uint64_t)sqlite3_column_int64(cmds, 0);
            int64_t last = sqlite3_column_int64(cmds, 1);
            s.lifetime_ms = last > opened ? (uint64_t)(last - opened) / 1000000 : 0;
        }
        sqlite3_reset(cmds);
        fn(&s, ud);
        count++;
    }
    if (rc != SQLITE_DONE) {
        r = ro_fail(db, e, "open sessions");
    }
    (void)tx(db, "COMMIT", NULL);
    return r < 0 ? r : count;
}
