/* SPDX-License-Identifier: MIT */
/* Unit tests of the audit trail (audit.c, audit_query.c, audit_prune.c, audit_limit.c):
 * events are committed in batches and waits end after the commit, strings are scrubbed,
 * the hash chain verifies and names the first altered, removed or inserted row, pruning
 * keeps it verifiable and takes refused requests' rows first, budgets summarize what they
 * hold back, open tasks are found, and stored JSON comes back as msgpack. Real SQLite files
 * in a temp dir. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <msgpack.h>
#include <sqlite3.h>

#include "lib/alloc.h"
#include "audit/audit.h"
#include "audit/audit_limit.h"
#include "audit/audit_query.h"
#include "lib/scrub.h"
#include "lib/util.h"

struct fx {
    char dir[64];
    char *path;
    uv_loop_t loop;
    struct scrub *scrub;
    struct audit *a;
};

static int setup(void **state)
{
    struct fx *f = xcalloc(1, sizeof(*f));
    str_copy(f->dir, "/tmp/sbx-test-audit-XXXXXX", sizeof(f->dir));
    assert_non_null(mkdtemp(f->dir));
    f->path = xasprintf("%s/%s", f->dir, AUDIT_DB_NAME);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->scrub = scrub_new();
    *state = f;
    return 0;
}

static void fx_close(struct fx *f)
{
    if (!f->a) {
        return;
    }
    audit_shutdown(f->a);
    (void)uv_run(&f->loop, UV_RUN_DEFAULT);
    f->a = audit_close(f->a);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    fx_close(f);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    scoped_free char *cmd = xasprintf("rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    f->scrub = scrub_free(f->scrub);
    free(f->path);
    free(f);
    return 0;
}

static void fx_open(struct fx *f, uint64_t max_rows)
{
    struct audit_options o = {.enabled = true, .max_rows = max_rows};
    struct err e = ERR_INIT;
    if (audit_open(&f->loop, f->path, &o, f->scrub, &f->a, &e) < 0) {
        fail_msg("audit_open: %s", err_msg(&e));
    }
    assert_int_equal(audit_start(f->a, &e), 0);
}

struct wait {
    int calls;
    bool committed;
};

static void on_commit(void *arg, bool committed)
{
    struct wait *w = arg;
    w->calls++;
    w->committed = committed;
}

/* Runs the loop until the wait ended. */
static void wait_for(struct fx *f, struct audit *a, uint64_t ticket)
{
    struct wait w = {0};
    audit_when_committed(a, ticket, on_commit, &w);
    for (int i = 0; i < 10000 && w.calls == 0; i++) {
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(w.calls, 1);
    assert_true(w.committed);
}

static uint64_t task_event(struct audit *a, const char *type, const char *task)
{
    struct audit_ev *ev = audit_begin(a, type, task);
    audit_id(ev, "sandbox", "sb1");
    audit_u64(ev, "n", 7);
    return audit_end(ev);
}

static sqlite3 *ro(struct fx *f)
{
    struct sqlite3 *db = NULL;
    struct err e = ERR_INIT;
    if (audit_query_ro_open(f->path, &db, &e) < 0) {
        fail_msg("audit_query_ro_open: %s", err_msg(&e));
    }
    return db;
}

static struct audit_verify_result verify(struct fx *f)
{
    struct audit_verify_result v;
    struct err e = ERR_INIT;
    sqlite3 *db = ro(f);
    if (audit_query_verify(db, &v, &e) < 0) {
        fail_msg("audit_query_verify: %s", err_msg(&e));
    }
    audit_query_ro_close(db);
    return v;
}

static void rw_exec(struct fx *f, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fail_msg("%s: %s", sql, msg);
    }
    sqlite3_close(db);
}

static int64_t count_rows(struct fx *f, const char *where)
{
    sqlite3 *db = ro(f);
    scoped_free char *sql = xasprintf("SELECT count(*) FROM events WHERE %s", where);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    audit_query_ro_close(db);
    return n;
}

/* ---- tests ---- */

static void audit_hash__covers_every_field(void **state)
{
    (void)state;
    unsigned char prev[AUDIT_HASH_BYTES] = {0}, a[AUDIT_HASH_BYTES], b[AUDIT_HASH_BYTES];
    audit_hash(prev, 1, 100, "t", "x", "{}", 2, a);
    audit_hash(prev, 1, 100, "t", "x", "{}", 2, b);
    assert_memory_equal(a, b, sizeof(a));
    audit_hash(prev, 2, 100, "t", "x", "{}", 2, b);
    assert_memory_not_equal(a, b, sizeof(a));
    audit_hash(prev, 1, 101, "t", "x", "{}", 2, b);
    assert_memory_not_equal(a, b, sizeof(a));
    audit_hash(prev, 1, 100, "u", "x", "{}", 2, b);
    assert_memory_not_equal(a, b, sizeof(a));
    audit_hash(prev, 1, 100, "t", NULL, "{}", 2, b);
    assert_memory_not_equal(a, b, sizeof(a));
    audit_hash(prev, 1, 100, "t", "", "{}", 2, b);
    assert_memory_not_equal(a, b, sizeof(a));
    audit_hash(prev, 1, 100, "t", "x", "{ }", 3, b);
    assert_memory_not_equal(a, b, sizeof(a));
    prev[31] = 1;
    audit_hash(prev, 1, 100, "t", "x", "{}", 2, b);
    assert_memory_not_equal(a, b, sizeof(a));
    char hex[AUDIT_HASH_HEX];
    audit_hash_hex(a, hex);
    assert_int_equal(strlen(hex), 64);
    assert_int_equal(audit_hash_parse(hex, 64, b), 0);
    assert_memory_equal(a, b, sizeof(a));
    assert_int_equal(audit_hash_parse(hex, 63, b), -EINVAL);
    hex[5] = 'g';
    assert_int_equal(audit_hash_parse(hex, 64, b), -EINVAL);
}

static void audit_end__commits_in_order_and_wakes_waiters(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    uint64_t last = 0;
    for (int i = 0; i < 500; i++) {
        char task[32];
        (void)snprintf(task, sizeof(task), "t%04d", i);
        uint64_t t = task_event(f->a, "task.request", task);
        assert_true(t > last);
        last = t;
    }
    wait_for(f, f->a, last);
    assert_true(audit_idle(f->a));
    struct audit_stats st;
    audit_get_stats(f->a, &st);
    assert_true(st.events == 500 && st.committed == 500);
    assert_true(st.batches >= 1 && st.batches <= 500);
    /* A ticket already committed ends its wait at once. */
    struct wait w = {0};
    audit_when_committed(f->a, 1, on_commit, &w);
    assert_int_equal(w.calls, 1);
    fx_close(f);
    assert_int_equal(count_rows(f, "1"), 500);
    assert_int_equal(count_rows(f, "seq = id"), 500);
    struct audit_verify_result v = verify(f);
    assert_true(v.ok);
    assert_int_equal(v.rows, 500);
    assert_int_equal(v.head_seq, 500);
    /* Reopened, the chain goes on from its head. */
    fx_open(f, 0);
    wait_for(f, f->a, task_event(f->a, "task.result", "t0000"));
    fx_close(f);
    v = verify(f);
    assert_true(v.ok);
    assert_int_equal(v.head_seq, 501);
}

/* Events nobody waits for are committed once due, by the loop's flush timer: the writer is
 * not woken for each first event, yet nothing waits forever. */
static void audit_end__unwaited_events_are_committed_when_due(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    (void)task_event(f->a, "task.request", "t1");
    (void)task_event(f->a, "task.started", "t1");
    struct audit_stats st = {0};
    for (int i = 0; i < 1000 && st.committed < 2; i++) {
        (void)uv_run(&f->loop, UV_RUN_ONCE);
        audit_get_stats(f->a, &st);
    }
    assert_int_equal(st.committed, 2);
    assert_int_equal(st.batches, 1);
    assert_int_equal(count_rows(f, "task = 't1'"), 2);
    fx_close(f);
}

/* Events written ahead (audit_write_ahead) go into the open transaction: the commit a later
 * wait asks for holds them and the events queued after, in one batch and one chain. */
static void audit_write_ahead__rows_join_the_commit_of_the_wait(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    (void)task_event(f->a, "task.request", "t1");
    (void)task_event(f->a, "task.started", "t1");
    audit_write_ahead(f->a);
    audit_write_ahead(f->a); /* nothing new queued: no second wake */
    (void)task_event(f->a, "task.finished", "t1");
    wait_for(f, f->a, task_event(f->a, "task.result", "t1"));
    struct audit_stats st = {0};
    audit_get_stats(f->a, &st);
    assert_int_equal(st.committed, 4);
    assert_int_equal(st.batches, 1);
    assert_int_equal(count_rows(f, "task = 't1'"), 4);
    /* The next task's events extend the same chain. */
    (void)task_event(f->a, "task.request", "t2");
    audit_write_ahead(f->a);
    wait_for(f, f->a, task_event(f->a, "task.result", "t2"));
    fx_close(f);
    struct audit_verify_result v = verify(f);
    assert_true(v.ok);
    assert_int_equal(v.rows, 6);
}

/* Written ahead and never waited for: committed when due, as any event. */
static void audit_write_ahead__unwaited_rows_are_committed_when_due(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    (void)task_event(f->a, "task.request", "t1");
    (void)task_event(f->a, "task.started", "t1");
    audit_write_ahead(f->a);
    struct audit_stats st = {0};
    for (int i = 0; i < 1000 && st.committed < 2; i++) {
        (void)uv_run(&f->loop, UV_RUN_ONCE);
        audit_get_stats(f->a, &st);
    }
    assert_int_equal(st.committed, 2);
    assert_int_equal(st.batches, 1);
    assert_int_equal(count_rows(f, "task = 't1'"), 2);
    fx_close(f);
}

static void audit_str__scrubs_values_not_ids(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    const char *jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlc2lnbmF0dXJl";
    struct audit_ev *ev = audit_begin(f->a, "task.request", "t1");
    audit_str(ev, "header", "Authorization: Bearer abcdef123456");
    audit_array_begin(ev, "argv");
    audit_array_str(ev, jwt, strlen(jwt));
    audit_array_str(ev, "ok\n\"quoted\"\x01\xff", 13);
    audit_array_end(ev);
    audit_id(ev, "sandbox", "abcdef0123456789abcdef0123456789");
    audit_str(ev, "none", NULL);
    audit_bool(ev, "yes", true);
    audit_i64(ev, "neg", -5);
    wait_for(f, f->a, audit_end(ev));
    fx_close(f);
    sqlite3 *db = ro(f);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT fields FROM events", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    const char *fields = (const char *)sqlite3_column_text(st, 0);
    assert_string_equal(fields,
                        "{\"header\":\"Authorization: Bearer [REDACTED]\",\"argv\":[\"[REDACTED]\","
                        "\"ok\\n\\\"quoted\\\"\\u0001\\ufffd\"],\"sandbox\":"
                        "\"abcdef0123456789abcdef0123456789\",\"none\":null,\"yes\":true,"
                        "\"neg\":-5}");
    sqlite3_finalize(st);
    audit_query_ro_close(db);
}

static void audit_str__cuts_long_values_and_events(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    size_t n = 3 * AUDIT_VALUE_MAX;
    scoped_free char *big = xmalloc(n + 1);
    memset(big, 'a', n);
    big[n] = '\0';
    struct audit_ev *ev = audit_begin(f->a, "x", NULL);
    for (int i = 0; i < 40; i++) {
        audit_str(ev, "v", big);
    }
    wait_for(f, f->a, audit_end(ev));
    fx_close(f);
    assert_int_equal(count_rows(f, "length(fields) < 100000 AND fields LIKE '%\"_truncated\":true}'"
                                   " AND json_valid(fields)"),
                     1);
    assert_int_equal(count_rows(f, "fields LIKE '%[...]%'"), 1);
}

static void audit_event__variadic_fields(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    wait_for(f, f->a,
             audit_event(f->a, "token.issue", NULL, "token_id", AUDIT_ID, "tok1", "note", AUDIT_STR,
                         "password=hunter2", "ttl", AUDIT_U64, (uint64_t)60, "delta", AUDIT_I64,
                         (int64_t)-1, "ok", AUDIT_BOOL, 1, NULL));
    fx_close(f);
    assert_int_equal(count_rows(f, "type = 'token.issue' AND task IS NULL AND fields = "
                                   "'{\"token_id\":\"tok1\",\"note\":\"password=[REDACTED]\","
                                   "\"ttl\":60,\"delta\":-1,\"ok\":true}'"),
                     1);
}

static void audit_query_verify__names_altered_removed_inserted(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    uint64_t t = 0;
    for (int i = 0; i < 20; i++) {
        t = task_event(f->a, "task.request", "t1");
    }
    wait_for(f, f->a, t);
    fx_close(f);
    assert_true(verify(f).ok);

    rw_exec(f, "UPDATE events SET fields = '{\"n\":8}' WHERE seq = 7");
    struct audit_verify_result v = verify(f);
    assert_false(v.ok);
    assert_string_equal(v.problem, "altered");
    assert_int_equal(v.bad_seq, 7);
    rw_exec(f, "UPDATE events SET fields = '{\"sandbox\":\"sb1\",\"n\":7}' WHERE seq = 7");
    assert_true(verify(f).ok);

    rw_exec(f, "CREATE TABLE saved AS SELECT * FROM events WHERE seq = 12;"
               "DELETE FROM events WHERE seq = 12");
    v = verify(f);
    assert_false(v.ok);
    assert_string_equal(v.problem, "removed");
    assert_int_equal(v.bad_seq, 12);
    rw_exec(f, "INSERT INTO events SELECT * FROM saved; DROP TABLE saved");
    assert_true(verify(f).ok);

    /* A copy of row 5, content changed, placed among the others. */
    rw_exec(f, "INSERT INTO events(seq, time, type, task, fields, prev, hash) SELECT seq, time, "
               "type, task, '{\"forged\":1}', prev, hash FROM events WHERE seq = 5");
    v = verify(f);
    assert_false(v.ok);
    assert_string_equal(v.problem, "inserted");
    assert_int_equal(v.bad_seq, 5);
    assert_int_equal(v.bad_id, 21);
    rw_exec(f, "DELETE FROM events WHERE id = 21");
    assert_true(verify(f).ok);

    /* Appended beyond the head sbxd recorded. */
    rw_exec(f, "INSERT INTO events(seq, time, type, task, fields, prev, hash) SELECT seq + 1, "
               "time, type, task, fields, hash, hash FROM events WHERE seq = 20");
    v = verify(f);
    assert_false(v.ok);
    assert_string_equal(v.problem, "inserted");
    assert_int_equal(v.bad_seq, 21);
    rw_exec(f, "DELETE FROM events WHERE seq = 21");

    /* The newest rows removed. */
    rw_exec(f, "DELETE FROM events WHERE seq >= 19");
    v = verify(f);
    assert_false(v.ok);
    assert_string_equal(v.problem, "removed");
    assert_int_equal(v.bad_seq, 19);
}

static void audit_prune__keeps_the_rest_verifiable(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    uint64_t t = 0;
    for (int i = 0; i < 2500; i++) {
        t = task_event(f->a, "task.request", "t1");
    }
    wait_for(f, f->a, t);
    fx_close(f);
    /* The writer prunes as soon as it starts. */
    fx_open(f, 1000);
    for (int i = 0; i < 200 && count_rows(f, "type = 'audit.pruned'") == 0; i++) {
        usleep(10000);
    }
    wait_for(f, f->a, task_event(f->a, "task.result", "t1"));
    fx_close(f);
    struct audit_verify_result v = verify(f);
    if (!v.ok) {
        fail_msg("verify after pruning: %s", v.message);
    }
    assert_true(v.start_seq > 1);
    assert_true(count_rows(f, "1") <= 1002);
    struct audit_stats st;
    (void)st;
    /* Removing the oldest kept rows and moving the anchor is still caught: the audit.pruned
     * event inside the chain says where the kept chain starts. */
    scoped_free char *sql =
        xasprintf("DELETE FROM events WHERE seq < %llu;"
                  "UPDATE meta SET value = (SELECT seq FROM events ORDER BY id LIMIT 1) "
                  "WHERE key = 'start_seq';"
                  "UPDATE meta SET value = (SELECT prev FROM events ORDER BY id LIMIT 1) "
                  "WHERE key = 'start_prev'",
                  (unsigned long long)v.start_seq + 10);
    rw_exec(f, sql);
    v = verify(f);
    assert_false(v.ok);
    assert_string_equal(v.problem, "removed");
}

static uint64_t chain(struct audit *a, const char *task, bool result)
{
    uint64_t t = task_event(a, "task.request", task);
    struct audit_ev *ev = audit_begin(a, "sandbox.assigned", task);
    audit_id(ev, "sandbox", "sbx-of-task");
    t = audit_end(ev);
    if (result) {
        ev = audit_begin(a, "task.result", task);
        audit_id(ev, "status", "exited");
        t = audit_end(ev);
    }
    return t;
}

struct open_seen {
    int n;
    char tasks[8][16];
    bool sandbox;
};

static void on_open(const struct audit_open_task *t, void *ud)
{
    struct open_seen *s = ud;
    if (s->n < 8) {
        str_copy(s->tasks[s->n], t->task, sizeof(s->tasks[0]));
    }
    s->n++;
    s->sandbox = t->sandbox && strcmp(t->sandbox, "sbx-of-task") == 0 && !t->destroyed;
}

static void audit_query_open_tasks__since_last_start(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    (void)chain(f->a, "old-open", false); /* before the last daemon.start: settled then */
    (void)audit_event(f->a, "daemon.start", NULL, NULL);
    (void)chain(f->a, "done", true);
    wait_for(f, f->a, chain(f->a, "open", false));
    fx_close(f);
    struct open_seen s = {0};
    struct err e = ERR_INIT;
    sqlite3 *db = ro(f);
    assert_int_equal(audit_query_open_tasks(db, on_open, &s, &e), 1);
    audit_query_ro_close(db);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.tasks[0], "open");
    assert_true(s.sandbox);
}

static void audit_query_pack__filters_and_newest_first(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    for (int i = 0; i < 5; i++) {
        char task[16];
        (void)snprintf(task, sizeof(task), "q%d", i);
        (void)chain(f->a, task, i != 2);
    }
    wait_for(f, f->a, audit_event(f->a, "daemon.stop", NULL, NULL));
    fx_close(f);
    sqlite3 *db = ro(f);
    struct err e = ERR_INIT;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    struct audit_query q = {.limit = 3};
    assert_int_equal(audit_query_pack(db, &q, &pk, &e), 0);
    struct audit_query q2 = {.status = "running", .limit = 10};
    assert_int_equal(audit_query_pack(db, &q2, &pk, &e), 0);
    struct audit_query q3 = {.task = "q4", .limit = 1};
    assert_int_equal(audit_query_pack(db, &q3, &pk, &e), 0);
    audit_query_ro_close(db);

    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    const msgpack_object *chains = &u.data.via.map.ptr[0].val;
    assert_int_equal(chains->via.array.size, 3);
    const msgpack_object *first = &chains->via.array.ptr[0].via.map.ptr[0].val;
    assert_int_equal(first->via.str.size, 2);
    assert_memory_equal(first->via.str.ptr, "q4", 2);
    assert_true(u.data.via.map.ptr[1].val.via.boolean); /* more */

    assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    chains = &u.data.via.map.ptr[0].val;
    assert_int_equal(chains->via.array.size, 1);
    first = &chains->via.array.ptr[0].via.map.ptr[0].val;
    assert_memory_equal(first->via.str.ptr, "q2", 2);

    assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    chains = &u.data.via.map.ptr[0].val;
    assert_int_equal(chains->via.array.size, 1);
    const msgpack_object *events = &chains->via.array.ptr[0].via.map.ptr[1].val;
    assert_int_equal(events->via.array.size, 3);
    /* fields came back as a map */
    const msgpack_object *fields = &events->via.array.ptr[1].via.map.ptr[4].val;
    assert_int_equal(fields->type, MSGPACK_OBJECT_MAP);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

static void audit_query_json_pack__parses_what_sbxd_writes(void **state)
{
    (void)state;
    const char *json = "{\"a\":[1,-2,3.5,true,false,null],\"s\":\"x\\\"\\n\\u00e9\\ud83d\\ude00\","
                       "\"o\":{},\"e\":[]}";
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    assert_int_equal(audit_query_json_pack(json, strlen(json), &pk), 0);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(u.data.type, MSGPACK_OBJECT_MAP);
    assert_int_equal(u.data.via.map.size, 4);
    const msgpack_object *a = &u.data.via.map.ptr[0].val;
    assert_int_equal(a->via.array.size, 6);
    assert_int_equal(a->via.array.ptr[1].via.i64, -2);
    const msgpack_object *s = &u.data.via.map.ptr[1].val;
    assert_int_equal(s->via.str.size, 2 + 1 + 2 + 4);
    assert_memory_equal(s->via.str.ptr, "x\"\n\xc3\xa9\xf0\x9f\x98\x80", 9);
    msgpack_unpacked_destroy(&u);
    const char *bad[] = {"{",           "{\"a\":}", "[1,]", "\"\\ud800\"",
                         "{\"a\":1} x", "tru",      "01x",  "\"a\x01\""};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        size_t before = sb.size;
        if (audit_query_json_pack(bad[i], strlen(bad[i]), &pk) != -EINVAL) {
            fail_msg("'%s' parsed", bad[i]);
        }
        assert_int_equal(sb.size, before);
    }
    /* Too deep */
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    assert_int_equal(audit_query_json_pack(deep, 200, &pk), -EINVAL);
    msgpack_sbuffer_destroy(&sb);
}

static void audit_open__disabled_writes_nothing(void **state)
{
    struct fx *f = *state;
    struct audit_options o = {.enabled = false};
    struct err e = ERR_INIT;
    assert_int_equal(audit_open(&f->loop, f->path, &o, NULL, &f->a, &e), 0);
    assert_int_equal(audit_start(f->a, &e), 0);
    assert_null(audit_begin(f->a, "x", NULL));
    assert_int_equal(audit_event(f->a, "x", NULL, "k", AUDIT_U64, (uint64_t)1, NULL), 0);
    struct wait w = {0};
    audit_when_committed(f->a, 0, on_commit, &w);
    assert_int_equal(w.calls, 1);
    assert_true(audit_idle(f->a));
    assert_false(audit_backlogged(f->a));
    fx_close(f);
    assert_int_equal(access(f->path, F_OK), -1);
}

static void audit_open__file_is_private(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    wait_for(f, f->a, task_event(f->a, "x", NULL));
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    scoped_free char *wal = xasprintf("%s-wal", f->path);
    assert_int_equal(stat(wal, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
}

/* A refused request's row (pruned first). */
static uint64_t refusal_event(struct audit *a, int i)
{
    struct audit_ev *ev = audit_begin(a, "rpc.refused", NULL);
    audit_mark_refusal(ev);
    audit_id(ev, "code", "unknown_pool");
    audit_u64(ev, "i", (uint64_t)i);
    return audit_end(ev);
}

static void audit_prune__refusals_first_with_recorded_gaps(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    /* Tasks' rows between runs of refusals: 40 tasks, 3000 refusals. */
    uint64_t t = 0;
    for (int i = 0; i < 40; i++) {
        char task[24];
        (void)snprintf(task, sizeof(task), "t%d", i);
        t = task_event(f->a, "task.request", task);
        for (int j = 0; j < 75; j++) {
            t = refusal_event(f->a, i * 75 + j);
        }
    }
    wait_for(f, f->a, t);
    fx_close(f);
    fx_open(f, 1000);
    for (int i = 0; i < 500 && count_rows(f, "1") > 1000; i++) {
        usleep(10000);
    }
    wait_for(f, f->a, task_event(f->a, "task.result", "t0"));
    fx_close(f);
    assert_true(count_rows(f, "1") <= 1000);
    /* Every task row stayed; only refusals went, recorded as gaps. */
    assert_int_equal(count_rows(f, "type = 'task.request'"), 40);
    assert_int_equal(count_rows(f, "type = 'audit.pruned' AND "
                                   "json_extract(fields, '$.reason') <> 'refusals'"),
                     0);
    assert_true(count_rows(f, "type = 'audit.pruned' AND "
                              "json_array_length(fields, '$.gaps') > 0") > 0);
    struct audit_verify_result v = verify(f);
    if (!v.ok) {
        fail_msg("verify after pruning refusals: %s", v.message);
    }
    /* A task's row removed next to a recorded gap: the gap no longer explains the jump. */
    rw_exec(f, "DELETE FROM events WHERE id = (SELECT min(id) FROM events WHERE "
               "type = 'task.request' AND task = 't5')");
    v = verify(f);
    assert_false(v.ok);
    assert_string_equal(v.problem, "removed");
}

static void fill_peer(void *arg, struct audit_ev *ev)
{
    audit_u64(ev, "peer_uid", *(uint32_t *)arg);
}

static void audit_limit__budget_then_one_summary(void **state)
{
    struct fx *f = *state;
    fx_open(f, 0);
    uint32_t uid = 1234;
    struct audit_limit *l =
        audit_limit_new(f->a, "rpc.refused.summary", NULL, "uid=1234", fill_peer, &uid);
    int recorded = 0;
    for (int i = 0; i < 1000; i++) {
        if (audit_limit_take(l, 3)) {
            recorded++;
        } else {
            audit_limit_count(l, i % 2 ? "unknown_pool" : "bad_request");
        }
    }
    assert_int_equal(recorded, 3);
    assert_int_equal(audit_limit_pending(l), 997);
    /* Nine more kinds than fit: the rest under "other". */
    for (int i = 0; i < 9; i++) {
        char kind[16];
        (void)snprintf(kind, sizeof(kind), "k%d", i);
        audit_limit_count(l, kind);
    }
    audit_limit_flush(l);
    assert_int_equal(audit_limit_pending(l), 0);
    audit_limit_flush(l); /* nothing counted: no second summary */
    l = audit_limit_free(l);
    wait_for(f, f->a, task_event(f->a, "task.result", "t1"));
    fx_close(f);
    assert_int_equal(count_rows(f, "type = 'rpc.refused.summary'"), 1);
    assert_int_equal(count_rows(f, "type = 'rpc.refused.summary' AND "
                                   "json_extract(fields, '$.count') = 1006 AND "
                                   "json_extract(fields, '$.peer_uid') = 1234 AND "
                                   "json_extract(fields, '$.by.unknown_pool') = 499 AND "
                                   "json_extract(fields, '$.by.bad_request') = 498 AND "
                                   "json_extract(fields, '$.by.k5') = 1 AND "
                                   "json_extract(fields, '$.other') IS NULL AND "
                                   "json_extract(fields, '$.by.other') = 3 AND "
                                   "json_extract(fields, '$.last_ns') >= "
                                   "json_extract(fields, '$.first_ns')"),
                     1);
    struct audit_verify_result v = verify(f);
    assert_true(v.ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(audit_hash__covers_every_field),
        cmocka_unit_test_setup_teardown(audit_end__commits_in_order_and_wakes_waiters, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(audit_end__unwaited_events_are_committed_when_due, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(audit_write_ahead__rows_join_the_commit_of_the_wait, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(audit_write_ahead__unwaited_rows_are_committed_when_due,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(audit_str__scrubs_values_not_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(audit_str__cuts_long_values_and_events, setup, teardown),
        cmocka_unit_test_setup_teardown(audit_event__variadic_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(audit_query_verify__names_altered_removed_inserted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(audit_prune__keeps_the_rest_verifiable, setup, teardown),
        cmocka_unit_test_setup_teardown(audit_prune__refusals_first_with_recorded_gaps, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(audit_limit__budget_then_one_summary, setup, teardown),
        cmocka_unit_test_setup_teardown(audit_query_open_tasks__since_last_start, setup, teardown),
        cmocka_unit_test_setup_teardown(audit_query_pack__filters_and_newest_first, setup,
                                        teardown),
        cmocka_unit_test(audit_query_json_pack__parses_what_sbxd_writes),
        cmocka_unit_test_setup_teardown(audit_open__disabled_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(audit_open__file_is_private, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
