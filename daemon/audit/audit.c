/* SPDX-License-Identifier: MIT */
/* The audit trail's loop side: events built with scrubbed JSON fields, the hash function,
 * the lock-protected queue to the writer thread (audit_writer.c), and the waits that the
 * writer's wake-up of the loop (loopwake.h) ends after each commit. Nothing here touches
 * SQLite except through audit_writer_db_open / audit_writer_db_close at start-up and exit. */
#define LOG_MOD "audit"
#include "audit/audit.h"

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "lib/alloc.h"
#include "audit/audit_impl.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "lib/scrub.h"
#include "lib/list.h"
#include "lib/util.h"

#define TRUNC_MARK "[...]"

struct audit_ev {
    struct audit *a;
    char type[AUDIT_TYPE_MAX];
    char task[AUDIT_TASK_MAX];
    bool has_task;
    int64_t time_ns;
    struct buf j;
    bool need_comma;
    bool in_array;
    bool array_comma;
    bool in_object;
    bool truncated;
    bool refusal;
};

/* ---- hashing ---------------------------------------------------------------------- */

/* libsodium must be initialised once per process before the first hash, from whichever
 * thread hashes first (the writer, a verify worker, a test): a once-flag, not state. */
static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;

static void sodium_start(void)
{
    if (sodium_init() < 0) {
        log_error("msg=\"libsodium failed to initialise\"");
        abort();
    }
}

static void put_le(crypto_generichash_state *s, uint64_t v, size_t n)
{
    unsigned char b[8];
    for (size_t i = 0; i < n; i++) {
        b[i] = (unsigned char)(v >> (8 * i));
    }
    crypto_generichash_update(s, b, n);
}

void audit_hash(const unsigned char prev[AUDIT_HASH_BYTES], uint64_t seq, int64_t time_ns,
                const char *type, const char *task, const char *fields, size_t fields_len,
                unsigned char out[AUDIT_HASH_BYTES])
{
    (void)pthread_once(&sodium_once, sodium_start);
    crypto_generichash_state s;
    crypto_generichash_init(&s, NULL, 0, AUDIT_HASH_BYTES);
    crypto_generichash_update(&s, prev, AUDIT_HASH_BYTES);
    put_le(&s, seq, 8);
    put_le(&s, (uint64_t)time_ns, 8);
    size_t tl = strlen(type);
    put_le(&s, tl, 4);
    crypto_generichash_update(&s, (const unsigned char *)type, tl);
    if (task) {
        size_t kl = strlen(task);
        put_le(&s, kl, 4);
        crypto_generichash_update(&s, (const unsigned char *)task, kl);
    } else {
        put_le(&s, 0xffffffffu, 4);
    }
    put_le(&s, fields_len, 4);
    crypto_generichash_update(&s, (const unsigned char *)fields, fields_len);
    crypto_generichash_final(&s, out, AUDIT_HASH_BYTES);
}

void audit_hash_hex(const unsigned char h[AUDIT_HASH_BYTES], char out[AUDIT_HASH_HEX])
{
    str_hex_encode(h, AUDIT_HASH_BYTES, out);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

int audit_hash_parse(const char *hex, size_t len, unsigned char out[AUDIT_HASH_BYTES])
{
    if (!hex || len != 2 * AUDIT_HASH_BYTES) {
        return -EINVAL;
    }
    for (size_t i = 0; i < AUDIT_HASH_BYTES; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return -EINVAL;
        }
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

/* ---- JSON fields -------------------------------------------------------------------- */

/* The fields are bounded by AUDIT_FIELDS_MAX before each is started, not by a cap. */
static void jb_put(struct buf *b, const char *s, size_t n)
{
    (void)buf_append(b, s, n);
}

static void jb_puts(struct buf *b, const char *s)
{
    (void)buf_puts(b, s);
}

/* A JSON string literal: valid UTF-8 passes, ill-formed bytes become U+FFFD. */
static void jb_str(struct buf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    jb_put(b, "\"", 1);
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            jb_put(b, esc, 2);
            i++;
        } else if (c == '\n') {
            jb_put(b, "\\n", 2);
            i++;
        } else if (c == '\t') {
            jb_put(b, "\\t", 2);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            (void)snprintf(esc, sizeof(esc), "\\u%04x", c);
            jb_put(b, esc, 6);
            i++;
        } else {
            size_t l = str_utf8_valid_seq(p + i, n - i);
            if (l == 0) {
                jb_put(b, "\\ufffd", 6);
                i++;
            } else {
                jb_put(b, s + i, l);
                i += l;
            }
        }
    }
    jb_put(b, "\"", 1);
}

/* Cuts a scrubbed value to AUDIT_VALUE_MAX at a character boundary. */
static size_t cut_len(const char *s, size_t n, bool *cut)
{
    *cut = n > AUDIT_VALUE_MAX;
    if (!*cut) {
        return n;
    }
    size_t m = AUDIT_VALUE_MAX - (sizeof(TRUNC_MARK) - 1);
    while (m > 0 && ((unsigned char)s[m] & 0xc0) == 0x80) {
        m--;
    }
    return m;
}

static void jb_value_str(struct audit_ev *ev, const char *val, size_t len, bool scrub_it)
{
    if (!val) {
        jb_puts(&ev->j, "null");
        return;
    }
    scoped_free char *clean = NULL;
    size_t n = len;
    const char *s = val;
    if (scrub_it) {
        clean = scrub_dup(ev->a->scrub, val, len, &n, NULL);
        s = clean;
    }
    bool cut;
    size_t m = cut_len(s, n, &cut);
    if (!cut) {
        jb_str(&ev->j, s, m);
        return;
    }
    scoped_free char *tmp = xmalloc(m + sizeof(TRUNC_MARK));
    memcpy(tmp, s, m);
    memcpy(tmp + m, TRUNC_MARK, sizeof(TRUNC_MARK));
    jb_str(&ev->j, tmp, m + sizeof(TRUNC_MARK) - 1);
}

int64_t audit_realtime_ns(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct audit_ev *audit_begin(struct audit *a, const char *type, const char *task_id)
{
    if (!a || !a->o.enabled) {
        return NULL;
    }
    struct audit_ev *ev = xcalloc(1, sizeof(*ev));
    ev->a = a;
    str_copy(ev->type, type, sizeof(ev->type));
    if (task_id) {
        str_copy(ev->task, task_id, sizeof(ev->task));
        ev->has_task = true;
    }
    ev->time_ns = audit_realtime_ns();
    /* One allocation holds most events. */
    (void)buf_reserve(&ev->j, 255);
    jb_put(&ev->j, "{", 1);
    return ev;
}

/* Starts a field: false when the event is full (the field is dropped). */
static bool field_start(struct audit_ev *ev, const char *key)
{
    if (!ev || ev->in_array) {
        return false;
    }
    if (ev->j.len >= AUDIT_FIELDS_MAX) {
        ev->truncated = true;
        return false;
    }
    if (ev->need_comma) {
        jb_put(&ev->j, ",", 1);
    }
    ev->need_comma = true;
    jb_str(&ev->j, key, strlen(key));
    jb_put(&ev->j, ":", 1);
    return true;
}

void audit_strn(struct audit_ev *ev, const char *key, const char *val, size_t len)
{
    if (field_start(ev, key)) {
        jb_value_str(ev, val, len, true);
    }
}

void audit_str(struct audit_ev *ev, const char *key, const char *val)
{
    audit_strn(ev, key, val, val ? strlen(val) : 0);
}

void audit_id(struct audit_ev *ev, const char *key, const char *val)
{
    if (field_start(ev, key)) {
        jb_value_str(ev, val, val ? strlen(val) : 0, false);
    }
}

void audit_u64(struct audit_ev *ev, const char *key, uint64_t v)
{
    if (field_start(ev, key)) {
        char n[24];
        (void)snprintf(n, sizeof(n), "%llu", (unsigned long long)v);
        jb_puts(&ev->j, n);
    }
}

void audit_i64(struct audit_ev *ev, const char *key, int64_t v)
{
    if (field_start(ev, key)) {
        char n[24];
        (void)snprintf(n, sizeof(n), "%lld", (long long)v);
        jb_puts(&ev->j, n);
    }
}

void audit_bool(struct audit_ev *ev, const char *key, bool v)
{
    if (field_start(ev, key)) {
        jb_puts(&ev->j, v ? "true" : "false");
    }
}

void audit_null(struct audit_ev *ev, const char *key)
{
    if (field_start(ev, key)) {
        jb_puts(&ev->j, "null");
    }
}

void audit_array_begin(struct audit_ev *ev, const char *key)
{
    if (field_start(ev, key)) {
        jb_put(&ev->j, "[", 1);
        ev->in_array = true;
        ev->array_comma = false;
    }
}

static bool item_start(struct audit_ev *ev)
{
    if (!ev || !ev->in_array) {
        return false;
    }
    if (ev->j.len >= AUDIT_FIELDS_MAX) {
        ev->truncated = true;
        return false;
    }
    if (ev->array_comma) {
        jb_put(&ev->j, ",", 1);
    }
    ev->array_comma = true;
    return true;
}

void audit_array_str(struct audit_ev *ev, const char *val, size_t len)
{
    if (item_start(ev)) {
        jb_value_str(ev, val, len, true);
    }
}

void audit_array_id(struct audit_ev *ev, const char *val)
{
    if (item_start(ev)) {
        jb_value_str(ev, val, val ? strlen(val) : 0, false);
    }
}

void audit_array_end(struct audit_ev *ev)
{
    if (ev && ev->in_array) {
        jb_put(&ev->j, "]", 1);
        ev->in_array = false;
    }
}

void audit_object_begin(struct audit_ev *ev, const char *key)
{
    if (ev && !ev->in_object && field_start(ev, key)) {
        jb_put(&ev->j, "{", 1);
        ev->in_object = true;
        ev->need_comma = false;
    }
}

void audit_object_end(struct audit_ev *ev)
{
    if (ev && ev->in_object) {
        audit_array_end(ev);
        jb_put(&ev->j, "}", 1);
        ev->in_object = false;
        ev->need_comma = true;
    }
}

void audit_mark_refusal(struct audit_ev *ev)
{
    if (ev) {
        ev->refusal = true;
    }
}

/* ---- queue and waits (loop side) ---------------------------------------------------- */

static void run_waiters(struct audit *a);

static void flush_cb(uv_timer_t *h)
{
    struct audit *a = container_of(h, struct audit, flush_timer);
    pthread_mutex_lock(&a->mu);
    if (a->q_head) {
        pthread_cond_signal(&a->cond);
    }
    pthread_mutex_unlock(&a->mu);
}

uint64_t audit_end(struct audit_ev *ev)
{
    if (!ev) {
        return 0;
    }
    struct audit *a = ev->a;
    audit_array_end(ev);
    audit_object_end(ev);
    if (ev->truncated) {
        jb_puts(&ev->j, ev->need_comma ? ",\"_truncated\":true" : "\"_truncated\":true");
    }
    jb_put(&ev->j, "}", 1);
    struct rec *r = xmalloc(sizeof(*r) + ev->j.len + 1);
    memset(r, 0, sizeof(*r));
    r->time_ns = ev->time_ns;
    memcpy(r->type, ev->type, sizeof(r->type));
    memcpy(r->task, ev->task, sizeof(r->task));
    r->has_task = ev->has_task;
    r->refusal = ev->refusal;
    r->len = ev->j.len;
    memcpy(r->fields, ev->j.p, ev->j.len + 1);
    buf_free(&ev->j);
    free(ev);

    uint64_t ticket = ++a->next_ticket;
    r->ticket = ticket;
    r->queued_ns = clock_now_ns();
    pthread_mutex_lock(&a->mu);
    a->st.events++;
    if (a->dead) {
        /* The writer gave up: the event is lost, and so is any wait for it. */
        a->st.lost++;
        a->resolved = ticket;
        pthread_mutex_unlock(&a->mu);
        free(r);
        return ticket;
    }
    bool was_empty = a->q_head == NULL;
    SLIST_APPEND(a->q_head, a->q_tail, r, next);
    a->q_events++;
    a->q_bytes += sizeof(*r) + r->len;
    a->st.queued = a->q_events;
    /* The writer needs waking only when the oldest event is due (flush_timer) or for a full
     * batch: a wake-up per event would cost a context switch each, several per task, and
     * one per first event would still cost one per task at concurrency 1. Waiting for a
     * commit wakes it at once (audit_when_committed). Without the timer (after
     * audit_shutdown) the writer learns of a first event at once and sleeps until it is
     * due. */
    bool timer = a->loop_handles_open;
    if ((was_empty && !timer) || a->q_events == AUDIT_FLUSH_EVENTS) {
        pthread_cond_signal(&a->cond);
    }
    pthread_mutex_unlock(&a->mu);
    if (was_empty && timer) {
        uv_timer_start(&a->flush_timer, flush_cb, AUDIT_FLUSH_NS / 1000000, 0);
    }
    return ticket;
}

uint64_t audit_event(struct audit *a, const char *type, const char *task_id, ...)
{
    struct audit_ev *ev = audit_begin(a, type, task_id);
    if (!ev) {
        return 0;
    }
    va_list ap;
    va_start(ap, task_id);
    const char *key;
    while ((key = va_arg(ap, const char *)) != NULL) {
        enum audit_kind kind = (enum audit_kind)va_arg(ap, int);
        switch (kind) {
        case AUDIT_STR:
            audit_str(ev, key, va_arg(ap, const char *));
            break;
        case AUDIT_ID:
            audit_id(ev, key, va_arg(ap, const char *));
            break;
        case AUDIT_U64:
            audit_u64(ev, key, va_arg(ap, uint64_t));
            break;
        case AUDIT_I64:
            audit_i64(ev, key, va_arg(ap, int64_t));
            break;
        case AUDIT_BOOL:
            audit_bool(ev, key, va_arg(ap, int) != 0);
            break;
        default:
            /* A programmer error: the rest of the list cannot be read safely. */
            assert(!"audit_event: unknown field kind");
            ev->truncated = true;
            va_end(ap);
            return audit_end(ev);
        }
    }
    va_end(ap);
    return audit_end(ev);
}

void audit_write_ahead(struct audit *a)
{
    if (!a || !a->o.enabled) {
        return;
    }
    pthread_mutex_lock(&a->mu);
    bool wake = a->q_head && a->next_ticket > a->ahead && a->next_ticket > a->urgent;
    if (wake) {
        a->ahead = a->next_ticket;
    }
    pthread_mutex_unlock(&a->mu);
    if (wake) {
        pthread_cond_signal(&a->cond);
    }
}

void audit_when_committed(struct audit *a, uint64_t ticket, audit_commit_cb cb, void *arg)
{
    if (!a || !a->o.enabled || ticket == 0) {
        cb(arg, true);
        return;
    }
    pthread_mutex_lock(&a->mu);
    bool done = ticket <= a->resolved;
    bool ok = a->lost_from == 0 || ticket < a->lost_from;
    bool wake = !done && ticket > a->urgent;
    if (wake) {
        a->urgent = ticket; /* the writer commits it now rather than after AUDIT_FLUSH_NS */
    }
    pthread_mutex_unlock(&a->mu);
    /* After the unlock: a writer woken under mu would only block on it at once, and need
     * waking a second time. */
    if (wake) {
        pthread_cond_signal(&a->cond);
    }
    if (done && !a->w_head) {
        cb(arg, ok);
        return;
    }
    struct waiter *w = xcalloc(1, sizeof(*w));
    w->ticket = ticket;
    w->cb = cb;
    w->arg = arg;
    /* Tickets are issued in order, so this is almost always an append. */
    if (!a->w_tail || a->w_tail->ticket <= ticket) {
        if (a->w_tail) {
            a->w_tail->next = w;
        } else {
            a->w_head = w;
        }
        a->w_tail = w;
    } else {
        struct waiter **pp = &a->w_head;
        while (*pp && (*pp)->ticket <= ticket) {
            pp = &(*pp)->next;
        }
        w->next = *pp;
        *pp = w;
    }
    if (done) {
        run_waiters(a);
    }
}

bool audit_idle(const struct audit *a)
{
    if (!a || !a->o.enabled) {
        return true;
    }
    struct audit *m = (struct audit *)a;
    pthread_mutex_lock(&m->mu);
    bool idle = m->resolved >= m->next_ticket;
    pthread_mutex_unlock(&m->mu);
    return idle && !a->w_head;
}

void audit_set_idle_cb(struct audit *a, void (*cb)(void *arg), void *arg)
{
    if (a) {
        a->idle_cb = cb;
        a->idle_arg = arg;
    }
}

bool audit_backlogged(const struct audit *a)
{
    if (!a || !a->o.enabled) {
        return false;
    }
    struct audit *m = (struct audit *)a;
    pthread_mutex_lock(&m->mu);
    bool b = m->dead || m->failing || m->q_events > AUDIT_BACKLOG_EVENTS ||
             m->q_bytes > AUDIT_BACKLOG_BYTES;
    pthread_mutex_unlock(&m->mu);
    return b;
}

bool audit_suppress(struct audit *a)
{
    if (!audit_backlogged(a)) {
        return false;
    }
    a->suppressed_pending++;
    pthread_mutex_lock(&a->mu);
    a->st.suppressed++;
    pthread_mutex_unlock(&a->mu);
    return true;
}

void audit_give_up_if_failing(struct audit *a)
{
    if (!a || !a->o.enabled) {
        return;
    }
    pthread_mutex_lock(&a->mu);
    if (a->failing) {
        a->give_up = true;
        pthread_cond_signal(&a->cond);
    }
    pthread_mutex_unlock(&a->mu);
}

static void run_waiters(struct audit *a)
{
    pthread_mutex_lock(&a->mu);
    uint64_t resolved = a->resolved, lost_from = a->lost_from;
    pthread_mutex_unlock(&a->mu);
    while (a->w_head && a->w_head->ticket <= resolved) {
        struct waiter *w = a->w_head;
        a->w_head = w->next;
        if (!a->w_head) {
            a->w_tail = NULL;
        }
        bool ok = lost_from == 0 || w->ticket < lost_from;
        audit_commit_cb cb = w->cb;
        void *arg = w->arg;
        free(w);
        cb(arg, ok);
    }
}

static void committed_cb(struct loop_wake *w)
{
    struct audit *a = container_of(w, struct audit, wake);
    run_waiters(a);
    if (a->suppressed_pending > 0 && !audit_backlogged(a)) {
        uint64_t n = a->suppressed_pending;
        a->suppressed_pending = 0;
        log_warn("refused=%llu msg=\"tasks were refused while the audit trail was behind\"",
                 (unsigned long long)n);
        audit_event(a, "audit.suppressed", NULL, "refused", AUDIT_U64, n, NULL);
    }
    if (a->idle_cb && audit_idle(a)) {
        a->idle_cb(a->idle_arg);
    }
}

int audit_open(uv_loop_t *loop, const char *path, const struct audit_options *o,
               struct scrub *scrub, struct audit **ret, struct err *e)
{
    struct audit *a = xcalloc(1, sizeof(*a));
    a->loop = loop;
    a->o = *o;
    a->scrub = scrub;
    a->path = xstrdup(o->enabled ? path : "");
    pthread_mutex_init(&a->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cond, &ca);
    pthread_condattr_destroy(&ca);
    a->wake.fd = -1;
    if (o->enabled) {
        int r = audit_writer_db_open(a, e);
        if (r < 0) {
            audit_close(a);
            return r;
        }
        r = loopwake_init(loop, &a->wake, committed_cb, e);
        if (r < 0) {
            audit_close(a);
            return err_prefix(e, r, "audit");
        }
        uv_timer_init(loop, &a->flush_timer);
        uv_timer_init(loop, &a->limit_timer);
        a->loop_handles_open = true;
    }
    *ret = a;
    return 0;
}

bool audit_reader_acquire(struct audit *a)
{
    if (!a || a->reader_busy) {
        return false;
    }
    a->reader_busy = true;
    return true;
}

void audit_reader_release(struct audit *a)
{
    if (a) {
        a->reader_busy = false;
    }
}

bool audit_enabled(const struct audit *a)
{
    return a && a->o.enabled;
}

const char *audit_path(const struct audit *a)
{
    return a ? a->path : "";
}

struct scrub *audit_scrubber(const struct audit *a)
{
    return a ? a->scrub : NULL;
}

void audit_set_batch_hook(struct audit *a, void (*fn)(void *arg, double seconds, uint64_t queued),
                          void *arg)
{
    if (!a) {
        return;
    }
    pthread_mutex_lock(&a->mu);
    a->batch_hook = fn;
    a->batch_hook_arg = arg;
    pthread_mutex_unlock(&a->mu);
}

void audit_get_stats(struct audit *a, struct audit_stats *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (!a) {
        return;
    }
    pthread_mutex_lock(&a->mu);
    *ret = a->st;
    pthread_mutex_unlock(&a->mu);
}

int audit_start(struct audit *a, struct err *e)
{
    if (!a->o.enabled || a->thread_started) {
        return 0;
    }
    int r = pthread_create(&a->thread, NULL, audit_writer_main, a);
    if (r != 0) {
        return err_set(e, -r, "audit: cannot start the writer thread");
    }
    a->thread_started = true;
    (void)pthread_setname_np(a->thread, "sbxd-audit"); /* for top -H and per-thread CPU */
    return 0;
}

void audit_shutdown(struct audit *a)
{
    if (!a || !a->o.enabled) {
        return;
    }
    /* What sources counted so far is written now; later counts when each source ends. */
    audit_limit_flush_all(a);
    pthread_mutex_lock(&a->mu);
    bool was_open = a->loop_handles_open;
    a->loop_handles_open = false;
    pthread_mutex_unlock(&a->mu);
    if (was_open) {
        loopwake_stop(&a->wake, NULL);
        uv_close((uv_handle_t *)&a->flush_timer, NULL);
        uv_close((uv_handle_t *)&a->limit_timer, NULL);
        a->limit_timer_on = false;
    }
}

struct audit *audit_close(struct audit *a)
{
    if (!a) {
        return NULL;
    }
    if (a->thread_started) {
        pthread_mutex_lock(&a->mu);
        a->stopping = true;
        pthread_cond_signal(&a->cond);
        pthread_mutex_unlock(&a->mu);
        (void)pthread_join(a->thread, NULL);
        a->thread_started = false;
    }
    if (a->q_head) {
        log_error("events=%llu msg=\"audit events never written\"",
                  (unsigned long long)a->q_events);
    }
    if (a->o.enabled) {
        char head[AUDIT_HASH_HEX];
        audit_hash_hex(a->head_hash, head);
        log_info("events=%llu batches=%llu head_seq=%llu head_hash=%s msg=\"audit trail "
                 "closed\"",
                 (unsigned long long)a->st.committed, (unsigned long long)a->st.batches,
                 (unsigned long long)a->head_seq, head);
    }
    audit_writer_free_recs(a->q_head);
    audit_limit_detach_all(a);
    while (a->w_head) {
        struct waiter *w = a->w_head;
        a->w_head = w->next;
        free(w);
    }
    audit_writer_db_close(a);
    loopwake_free(&a->wake);
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->mu);
    free(a->path);
    free(a);
    return NULL;
}
