/* SPDX-License-Identifier: MIT */
/* Sessions: the table of open sessions, each holding one sandbox of its pool for its owner
 * (peer uid and token id) until it ends; its one timer (TTL and idle timeout), its token link,
 * its command (one at a time), and its session.open / session.close events and metrics.
 * A session's end always kills its sandbox: it never goes back to a pool. Nothing here
 * reads a workspace (api/rpc_session.c does, on worker threads). */
#define LOG_MOD "session"
#include "core/session.h"

#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <time.h>

#include "audit/audit.h"
#include "config/config.h"
#include "core/pool.h"
#include "core/sched.h"
#include "core/task.h"
#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/list.h"
#include "lib/log.h"
#include "lib/str.h"
#include "lib/util.h"
#include "metrics/metrics.h"
#include "sandbox/sandbox.h"

enum session_state {
    SESSION_OPENING = 0, /* waiting in its pool's queue for a sandbox */
    SESSION_OPEN,        /* holds its sandbox */
    SESSION_ENDED,       /* its sandbox is killed; the timer's close frees it */
};

struct session {
    struct session_table *tab;
    struct pool *pool;
    char id[SESSION_ID_LEN + 1];
    char sb_id[24];
    char token_id[TOKEN_ID_LEN + 1]; /* "" without a token */
    uint32_t uid;
    int32_t pid;
    uint64_t conn_id;
    enum session_state state;
    enum session_end why;
    struct pool_waiter wait; /* its place in the pool's queue while opening */
    struct sandbox *sb;      /* its sandbox (held), once it has one, until it dies */
    bool sb_held;            /* sandbox_hold's died is still to come: not freed before */
    bool timer_open;         /* the timer is not closed yet: not freed before */
    bool announcing;         /* session.open is not committed yet: its opener not answered */
    struct token_link tlink; /* its token's list (tlink.tok NULL without) */
    const struct session_open_ops *open_ops;
    void *open_arg;
    struct task *cmd; /* the command running, or NULL */
    uv_timer_t timer; /* the next of its TTL and (while idle) its idle timeout */
    uint64_t created_ns;
    uint64_t created_ms; /* Unix ms */
    uint64_t ttl_ns;
    uint64_t idle_ns;
    uint64_t last_ns; /* the last thing done with it: idle counts from here */
    uint64_t commands;
    uint64_t files_in;  /* file bytes into its workspace: its own methods' and its commands' */
    uint64_t files_out; /* ... and out of it */
    uint64_t own_in;    /* of which its own (session.open, session.write): its metrics' */
    uint64_t own_out;
    struct session *prev; /* the table's list, in order of opening */
    struct session *next;
};

struct session_table {
    struct session_env env;
    struct session *head;
    struct session *tail;
    uint32_t n; /* sessions opening or open */
    bool draining;
};

static const char *const end_names[] = {"closed",        "ttl",      "idle", "token_expired",
                                        "token_revoked", "shutdown", "error"};

const char *session_end_name(enum session_end why)
{
    return (size_t)why < ARRAY_SIZE(end_names) ? end_names[why] : "error";
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void session_table_new(const struct session_env *env, struct session_table **ret)
{
    struct session_table *t = xcalloc(1, sizeof(*t));
    t->env = *env;
    *ret = t;
}

struct session_table *session_table_free(struct session_table *t)
{
    free(t);
    return NULL;
}

uint32_t session_table_count(const struct session_table *t)
{
    return t->n;
}

/* Freed once its timer is closed and its sandbox's died came (which may follow its end). */
static void session_maybe_free(struct session *s)
{
    if (s->state == SESSION_ENDED && !s->timer_open && !s->sb_held && !s->announcing) {
        free(s);
    }
}

static void timer_closed(uv_handle_t *h)
{
    struct session *s = h->data;
    s->timer_open = false;
    session_maybe_free(s);
}

/* What a running command ends with when its session ends this way (its result's status). */
static enum task_kill_reason kill_reason(enum session_end why)
{
    switch (why) {
    case SESSION_TTL:
        return KILL_TIMEOUT;
    case SESSION_TOKEN_EXPIRED:
        return KILL_TOKEN_EXPIRED;
    case SESSION_TOKEN_REVOKED:
        return KILL_TOKEN_REVOKED;
    case SESSION_SHUTDOWN:
        return KILL_SHUTDOWN;
    case SESSION_CLOSED:
    case SESSION_IDLE:
    case SESSION_ERROR:
        break;
    }
    return KILL_SESSION_CLOSED;
}

static uint64_t audit_session_close(struct session *s, uint64_t lifetime_ms)
{
    struct audit_ev *ev = audit_begin(s->tab->env.audit, "session.close", s->id);
    audit_id(ev, "session", s->id);
    audit_id(ev, "reason", session_end_name(s->why));
    audit_u64(ev, "commands", s->commands);
    audit_u64(ev, "lifetime_ms", lifetime_ms);
    audit_u64(ev, "files_in_bytes", s->files_in);
    audit_u64(ev, "files_out_bytes", s->files_out);
    return audit_end(ev);
}

/* Off the table, its token let go, its timer closing (which frees it). */
static void session_drop(struct session *s)
{
    struct session_table *t = s->tab;
    s->state = SESSION_ENDED;
    DLIST_UNLINK(t->head, t->tail, s);
    t->n--;
    pool_session_end(s->pool);
    token_detach(&s->tlink);
    uv_close((uv_handle_t *)&s->timer, timer_closed);
}

/* Ends s for why: its command killed and let go, its sandbox killed, its end recorded, and
 * then dropped. A session still waiting for its sandbox leaves the pool's queue and its
 * opener is refused. */
static uint64_t session_end(struct session *s, enum session_end why)
{
    if (s->state == SESSION_ENDED) {
        return 0;
    }
    s->why = why;
    if (s->state == SESSION_OPENING) {
        pool_cancel(s->pool, &s->wait);
        session_drop(s);
        bool token = why == SESSION_TOKEN_EXPIRED || why == SESSION_TOKEN_REVOKED;
        s->open_ops->failed(s->open_arg, token ? "denied" : "shutting_down",
                            token ? "the session's token ended before it had a sandbox"
                                  : "sbxd is shutting down");
        return 0;
    }
    if (s->cmd) {
        /* Its sandbox dies next: the command's result says why, as its own end would. */
        if (why != SESSION_ERROR) {
            task_kill(s->cmd, kill_reason(why));
        }
        task_detach_session(s->cmd);
        s->cmd = NULL;
    }
    if (s->sb) {
        sandbox_kill(s->sb); /* its died follows, which frees s */
        s->sb = NULL;
    }
    uint64_t lifetime_ns = clock_now_ns() - s->created_ns;
    uint64_t ticket = audit_session_close(s, lifetime_ns / 1000000);
    metrics_session_end(s->pool->metrics, session_end_name(why), (double)lifetime_ns / 1e9,
                        s->commands);
    /* Its commands' bytes were counted at each command's end. */
    metrics_files(s->pool->metrics, s->own_in, s->own_out);
    log_debug("session=%s pool=%s reason=%s commands=%llu", s->id, pool_config(s->pool)->name,
              session_end_name(why), (unsigned long long)s->commands);
    session_drop(s);
    return ticket;
}

static void timer_cb(uv_timer_t *h);

/* Arms the timer for the earlier of the TTL and, while no command runs, the idle timeout. */
static void arm_timer(struct session *s)
{
    uint64_t now = clock_now_ns();
    uint64_t deadline = s->created_ns + s->ttl_ns;
    if (!s->cmd && s->last_ns + s->idle_ns < deadline) {
        deadline = s->last_ns + s->idle_ns;
    }
    uint64_t ms = deadline > now ? (deadline - now + 999999) / 1000000 : 0;
    uv_timer_start(&s->timer, timer_cb, ms, 0);
}

static void timer_cb(uv_timer_t *h)
{
    struct session *s = h->data;
    uint64_t now = clock_now_ns();
    if (now >= s->created_ns + s->ttl_ns) {
        session_end(s, SESSION_TTL);
    } else if (!s->cmd && now >= s->last_ns + s->idle_ns) {
        session_end(s, SESSION_IDLE);
    } else {
        arm_timer(s); /* the loop's clock ran ahead of ours: wait out the rest */
    }
}

static uint64_t audit_session_open(struct session *s)
{
    struct audit_ev *ev = audit_begin(s->tab->env.audit, "session.open", s->id);
    audit_id(ev, "session", s->id);
    audit_id(ev, "pool", pool_config(s->pool)->name);
    audit_id(ev, "sandbox", s->sb_id);
    audit_id(ev, "token_id", s->token_id[0] ? s->token_id : NULL);
    audit_u64(ev, "peer_uid", s->uid);
    audit_i64(ev, "peer_pid", s->pid);
    audit_u64(ev, "conn", s->conn_id);
    audit_u64(ev, "ttl_ms", s->ttl_ns / 1000000);
    audit_u64(ev, "idle_ms", s->idle_ns / 1000000);
    return audit_end(ev);
}

/* session.open is in the trail (or cannot be written): only now may its opener learn the
 * id, so that no session a client used is missing from the trail after a crash (and the
 * reaper can record it abandoned). A session that ended meanwhile is refused. */
static void open_committed(void *arg, bool committed)
{
    struct session *s = arg;
    s->announcing = false;
    if (s->state == SESSION_OPEN && !committed) {
        session_end(s, SESSION_ERROR);
    }
    if (s->state != SESSION_OPEN) {
        bool token = s->why == SESSION_TOKEN_EXPIRED || s->why == SESSION_TOKEN_REVOKED;
        s->open_ops->failed(s->open_arg,
                            !committed                   ? "internal"
                            : token                      ? "denied"
                            : s->why == SESSION_SHUTDOWN ? "shutting_down"
                                                         : "internal",
                            !committed ? "the audit trail cannot be written: no session"
                                       : "the session ended before it was opened");
        session_maybe_free(s);
        return;
    }
    s->open_ops->opened(s->open_arg, s);
}

static void hold_died(void *arg, struct sandbox *sb)
{
    struct session *s = arg;
    (void)sb;
    s->sb_held = false;
    if (s->state == SESSION_OPEN) {
        s->sb = NULL;
        log_warn("session=%s sb=%s msg=\"the session's sandbox died, ending the session\"", s->id,
                 s->sb_id);
        session_end(s, SESSION_ERROR);
    }
    session_maybe_free(s);
}

static void waiter_got(struct pool_waiter *w, struct sandbox *sb)
{
    struct session *s = container_of(w, struct session, wait);
    struct err e = ERR_INIT;
    if (sandbox_hold(sb, hold_died, s, &e) < 0) {
        /* Not reached: a pool hands out WARM sandboxes only. */
        log_error("session=%s sb=%s msg=\"cannot hold the sandbox, destroying it\" detail=\"%s\"",
                  s->id, sb->id, err_msg(&e));
        sandbox_kill(sb);
        session_drop(s);
        s->open_ops->failed(s->open_arg, "internal", "the session's sandbox could not be held");
        return;
    }
    s->sb = sb;
    s->sb_held = true;
    str_copy(s->sb_id, sb->id, sizeof(s->sb_id));
    s->state = SESSION_OPEN;
    s->created_ns = s->last_ns = clock_now_ns();
    s->created_ms = wall_ms();
    uint64_t ticket = audit_session_open(s);
    arm_timer(s);
    s->announcing = true;
    audit_when_committed(s->tab->env.audit, ticket, open_committed, s);
}

static void waiter_refused(struct pool_waiter *w, const char *code, const char *message)
{
    struct session *s = container_of(w, struct session, wait);
    session_drop(s); /* off the queue already */
    s->open_ops->failed(s->open_arg, code, message);
}

static const struct pool_waiter_ops session_waiter_ops = {
    .got = waiter_got,
    .refused = waiter_refused,
};

static void make_id(char buf[SESSION_ID_LEN + 1])
{
    unsigned char raw[16];
    randombytes_buf(raw, sizeof(raw));
    buf[0] = 's';
    buf[1] = '-';
    str_hex_encode(raw, sizeof(raw), buf + 2);
}

int session_open(struct session_table *t, const struct session_open_req *rq,
                 const struct session_open_ops *ops, void *arg, struct err *e)
{
    const struct pool_config *pc = pool_config(rq->pool);
    if (sched_draining(t->env.sched)) {
        return err_setx(e, -ESHUTDOWN, "sbxd is shutting down");
    }
    if (t->n >= t->env.cfg->max_sessions) {
        return err_setx(e, -EUSERS, "too many open sessions (limits.max_sessions %u)",
                        t->env.cfg->max_sessions);
    }
    if (pool_sessions(rq->pool) >= pc->max_sessions) {
        return err_setx(e, -EDQUOT, "pool '%s' has its most open sessions (max_sessions %u)",
                        pc->name, pc->max_sessions);
    }
    if (pool_full(rq->pool)) {
        return err_setx(e, -EBUSY, "pool '%s' is full: %u tasks already waiting", pc->name,
                        pool_queued(rq->pool));
    }
    struct session *s = xcalloc(1, sizeof(*s));
    s->tab = t;
    s->pool = rq->pool;
    make_id(s->id);
    s->uid = rq->uid;
    s->pid = rq->pid;
    s->conn_id = rq->conn_id;
    s->ttl_ns = rq->ttl_ns;
    s->idle_ns = rq->idle_ns;
    s->wait.ops = &session_waiter_ops;
    s->open_ops = ops;
    s->open_arg = arg;
    uv_timer_init(t->env.loop, &s->timer);
    s->timer.data = s;
    s->timer_open = true;
    if (rq->tok) {
        struct token_info ti;
        token_get_info(t->env.tokens, rq->tok, &ti);
        str_copy(s->token_id, ti.id, sizeof(s->token_id));
    }
    DLIST_APPEND(t->head, t->tail, s);
    t->n++;
    pool_session_begin(s->pool);
    if (rq->tok) {
        token_attach(t->env.tokens, rq->tok, &s->tlink);
    }
    /* The pool's checks were made above; it refuses only while draining, checked too. */
    int r = pool_submit(s->pool, &s->wait);
    if (r < 0) {
        /* Not reached (the conditions were checked above), but never leave it listed. */
        session_drop(s);
        return err_setx(e, r, "pool '%s' cannot take a session now", pc->name);
    }
    return 0;
}

struct session *session_find(struct session_table *t, const char *id, size_t len)
{
    if (len != SESSION_ID_LEN) {
        return NULL;
    }
    for (struct session *s = t->head; s; s = s->next) {
        /* The id is a secret of its owner's: compared in constant time. */
        if (s->state == SESSION_OPEN && sodium_memcmp(s->id, id, SESSION_ID_LEN) == 0) {
            return s;
        }
    }
    return NULL;
}

int session_check_owner(const struct session *s, uint32_t uid, const char *token_id)
{
    if (s->uid != uid) {
        return -EACCES;
    }
    /* A request that names no token uses the session's own (its id is the secret). */
    if (token_id && strcmp(s->token_id, token_id) != 0) {
        return -EACCES;
    }
    return 0;
}

struct session *session_next_owned(struct session_table *t, struct session *prev, uint32_t uid,
                                   const char *token_id)
{
    for (struct session *s = prev ? prev->next : t->head; s; s = s->next) {
        if (s->state == SESSION_OPEN && session_check_owner(s, uid, token_id) == 0) {
            return s;
        }
    }
    return NULL;
}

void session_get_info(const struct session *s, struct session_info *ret)
{
    uint64_t now = clock_now_ns();
    *ret = (struct session_info){
        .id = s->id,
        .pool = pool_config(s->pool)->name,
        .sandbox = s->sb_id,
        .created_ms = s->created_ms,
        .expires_ms = s->created_ms + s->ttl_ns / 1000000,
        .ttl_ns = s->ttl_ns,
        .idle_ns = s->idle_ns,
        .commands = s->commands,
        .lifetime_ms = s->created_ns && now > s->created_ns ? (now - s->created_ns) / 1000000 : 0,
        .busy = s->cmd != NULL,
    };
}

struct pool *session_pool(const struct session *s)
{
    return s->pool;
}

const char *session_id(const struct session *s)
{
    return s->id;
}

const struct token *session_token(const struct session *s)
{
    return s->tlink.tok;
}

bool session_busy(const struct session *s)
{
    return s->cmd != NULL;
}

uint64_t session_commands(const struct session *s)
{
    return s->commands;
}

void session_touch(struct session *s)
{
    if (s->state == SESSION_OPEN) {
        s->last_ns = clock_now_ns();
        arm_timer(s);
    }
}

int session_work_fd(const struct session *s, uid_t *ret_uid, gid_t *ret_gid)
{
    if (s->state != SESSION_OPEN || !s->sb) {
        return -ENOENT;
    }
    int fd = sandbox_work_fd(s->sb);
    if (fd < 0) {
        return -ENOENT;
    }
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (dup < 0) {
        return -errno;
    }
    sandbox_task_host_ids(s->sb, ret_uid, ret_gid);
    return dup;
}

void session_add_files(struct session *s, uint64_t in, uint64_t out)
{
    s->files_in += in;
    s->files_out += out;
    s->own_in += in;
    s->own_out += out;
}

int session_exec(struct session *s, struct task *t)
{
    if (s->state != SESSION_OPEN || !s->sb) {
        return -ENOENT;
    }
    if (s->cmd) {
        return -EBUSY;
    }
    s->cmd = t;
    s->commands++;
    s->last_ns = clock_now_ns();
    arm_timer(s); /* no idle timeout while it runs */
    task_start_session(t, s->sb, s);
    return 0;
}

void session_command_done(struct session *s, struct task *t)
{
    if (s->cmd != t) {
        return;
    }
    s->cmd = NULL;
    s->last_ns = clock_now_ns();
    uint64_t in, out;
    task_get_files_bytes(t, &in, &out);
    s->files_in += in;
    s->files_out += out;
    if (s->state != SESSION_OPEN) {
        return;
    }
    if (!s->sb) {
        session_end(s, SESSION_ERROR);
    } else if (s->tab->draining) {
        session_end(s, SESSION_SHUTDOWN);
    } else {
        arm_timer(s);
    }
}

uint64_t session_close(struct session *s, struct session_info *ret)
{
    session_get_info(s, ret);
    return session_end(s, SESSION_CLOSED);
}

void session_table_drain(struct session_table *t)
{
    t->draining = true;
    struct session *s = t->head;
    while (s) {
        struct session *next = s->next;
        if (s->state == SESSION_OPEN && !s->cmd) {
            session_end(s, SESSION_SHUTDOWN);
        }
        s = next;
    }
}

bool session_token_kill(struct session_table *t, struct token_link *l, enum token_state why)
{
    for (struct session *s = t->head; s; s = s->next) {
        if (&s->tlink == l) {
            session_end(s, why == TOKEN_REVOKED ? SESSION_TOKEN_REVOKED : SESSION_TOKEN_EXPIRED);
            return true;
        }
    }
    return false;
}
