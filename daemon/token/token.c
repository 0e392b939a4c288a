/* SPDX-License-Identifier: MIT */
/* Capability tokens, the store: issue, verification from an in-memory table, the
 * write-back of uses on worker threads (SQLite itself is token_db.c), and expiry and
 * revocation that kill the tasks holding a token. Secrets are token_secret.c's, the mount
 * policy token_policy.c's, mount fds token_mount.c's. A token string is returned once, to
 * the admin who issued it: it is never stored, logged, or put in an error message. */
#define LOG_MOD "token"
#include "token/token.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "lib/alloc.h"
#include "wire/ctl.h"
#include "lib/log.h"
#include "lib/scrub.h"
#include "lib/strv.h"
#include "token/token_impl.h"
#include "lib/list.h"
#include "lib/util.h"

/* The timer re-reads the wall clock at least this often: the clock may be set. */
#define TOKEN_TIMER_MAX_MS (60ULL * 1000)

_Static_assert(TOKEN_MAX_MOUNTS == CTL_MOUNTS_MAX, "a token's mounts must fit one CTL_TASK");
_Static_assert(TOKEN_MAX_MOUNTS <= 32, "mount file bits are a uint32_t");

struct token_flush {
    uv_work_t work;
    struct token_store *s;
    struct token_op *ops;
    size_t n;
    int r;
    struct err e;
};

struct token_store {
    uv_loop_t *loop;
    uv_timer_t timer;
    bool timer_open;
    bool closing;
    char *db_path;
    sqlite3 *db;  /* loop thread: load, issue, revoke */
    sqlite3 *wdb; /* background writes: one job at a time, on a worker thread */
    struct token_hooks hooks;
    uint64_t (*now_ms)(void);
    /* The policy, copied. */
    struct token_policy pol;
    struct strv pol_strings; /* what pol points into, freed with the store */
    /* Tokens. */
    struct token **buckets;
    size_t n_buckets; /* a power of two */
    struct token *head;
    struct token *tail;
    size_t n_tokens;
    /* Background write-back. */
    struct token_op *ops;
    size_t n_ops;
    size_t cap_ops;
    struct token_flush *flushing;
};

static uint64_t token_realtime_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

const char *token_state_name(enum token_state st)
{
    switch (st) {
    case TOKEN_ACTIVE:
        return "active";
    case TOKEN_EXPIRED:
        return "expired";
    case TOKEN_REVOKED:
        return "revoked";
    case TOKEN_USED_UP:
        return "used_up";
    }
    return "?";
}

static enum token_state token_state_at(const struct token *t, uint64_t now)
{
    if (t->revoked_ms) {
        return TOKEN_REVOKED;
    }
    if (now >= t->expires_ms) {
        return TOKEN_EXPIRED;
    }
    if (t->uses_max > 0 && t->uses_left == 0) {
        return TOKEN_USED_UP;
    }
    return TOKEN_ACTIVE;
}

static size_t token_bucket(const struct token_store *s, const uint8_t hash[TOKEN_HASH_BYTES])
{
    uint64_t k;
    memcpy(&k, hash, sizeof(k)); /* the hash is uniform: any 8 bytes make a good key */
    return (size_t)(k & (s->n_buckets - 1));
}

static struct token *token_find_hash(const struct token_store *s,
                                     const uint8_t hash[TOKEN_HASH_BYTES])
{
    for (struct token *t = s->buckets[token_bucket(s, hash)]; t; t = t->hnext) {
        if (sodium_memcmp(t->hash, hash, TOKEN_HASH_BYTES) == 0) {
            return t;
        }
    }
    return NULL;
}

static struct token *token_find_id(const struct token_store *s, const char *id, size_t len)
{
    if (len != TOKEN_ID_LEN) {
        return NULL;
    }
    for (struct token *t = s->head; t; t = t->next) {
        if (memcmp(t->id, id, TOKEN_ID_LEN) == 0) {
            return t;
        }
    }
    return NULL;
}

void token_free(struct token *t)
{
    if (!t) {
        return;
    }
    for (size_t i = 0; i < t->n_mounts; i++) {
        free(t->mounts[i].src);
        free(t->mounts[i].dst);
    }
    free(t->mounts);
    for (size_t i = 0; i < t->n_pools; i++) {
        free(t->pools[i]);
    }
    free(t->pools);
    free(t->net);
    free(t);
}

static void token_insert(struct token_store *s, struct token *t)
{
    size_t b = token_bucket(s, t->hash);
    t->hnext = s->buckets[b];
    s->buckets[b] = t;
    DLIST_APPEND(s->head, s->tail, t);
    s->n_tokens++;
}

static void token_unlink(struct token_store *s, struct token *t)
{
    struct token **pp = &s->buckets[token_bucket(s, t->hash)];
    while (*pp && *pp != t) {
        pp = &(*pp)->hnext;
    }
    if (*pp) {
        *pp = t->hnext;
    }
    DLIST_UNLINK(s->head, s->tail, t);
    s->n_tokens--;
}

/* token_db_load's callback: one stored token into memory. */
static int token_load_one(void *arg, struct token *t, struct err *e)
{
    struct token_store *s = arg;
    if (s->n_tokens >= s->pol.max_tokens) {
        log_warn("max=%u msg=\"more tokens stored than tokens.max_tokens, ignoring the rest\"",
                 s->pol.max_tokens);
        token_free(t);
        return 1;
    }
    if (token_find_hash(s, t->hash)) {
        token_free(t);
        return err_setx(e, -EIO, "token database: duplicate hash");
    }
    token_insert(s, t);
    return 0;
}

/* ---- Background write-back ---- */

static void token_flush_kick(struct token_store *s);

/* Worker thread: touches only the flush job, s->wdb and the read-only s->db_path. */
static void token_flush_work(uv_work_t *w)
{
    struct token_flush *f = container_of(w, struct token_flush, work);
    struct token_store *s = f->s;
    f->r = 0;
    if (!s->wdb) {
        f->r = token_db_connect(s->db_path, false, &s->wdb, &f->e);
    }
    if (f->r == 0) {
        f->r = token_db_apply(s->wdb, f->ops, f->n, &f->e);
    }
}

static void token_ops_push(struct token_store *s, const struct token_op *op)
{
    /* A later write of the same token replaces an earlier one not yet started. */
    for (size_t i = 0; i < s->n_ops; i++) {
        if (memcmp(s->ops[i].id, op->id, TOKEN_ID_LEN) == 0 && !s->ops[i].del) {
            s->ops[i] = *op;
            return;
        }
    }
    if (s->n_ops == s->cap_ops) {
        s->cap_ops = s->cap_ops ? 2 * s->cap_ops : 16;
        s->ops = xrealloc(s->ops, s->cap_ops * sizeof(*s->ops));
    }
    s->ops[s->n_ops++] = *op;
}

static void token_flush_done(uv_work_t *w, int status)
{
    struct token_flush *f = container_of(w, struct token_flush, work);
    struct token_store *s = f->s;
    s->flushing = NULL;
    if (status < 0 || f->r < 0) {
        /* Put back before anything newer, which then wins. */
        log_warn("ops=%zu msg=\"cannot write token uses back, retrying\" detail=\"%s\"", f->n,
                 status < 0 ? "cancelled" : err_msg(&f->e));
        struct token_op *newer = s->ops;
        size_t n_newer = s->n_ops;
        s->ops = NULL;
        s->n_ops = s->cap_ops = 0;
        for (size_t i = 0; i < f->n; i++) {
            token_ops_push(s, &f->ops[i]);
        }
        for (size_t i = 0; i < n_newer; i++) {
            token_ops_push(s, &newer[i]);
        }
        free(newer);
    }
    bool ok = status == 0 && f->r == 0;
    free(f->ops);
    free(f);
    /* After a failure the ops wait for the next kick (a use, or the timer within a
     * minute): a broken database is not retried in a tight loop. */
    if (ok) {
        token_flush_kick(s);
    }
}

/* Starts a write-back of the pending ops unless one is running (it starts the next). */
static void token_flush_kick(struct token_store *s)
{
    if (s->flushing || s->n_ops == 0) {
        return;
    }
    struct token_flush *f = xcalloc(1, sizeof(*f));
    f->s = s;
    f->ops = s->ops;
    f->n = s->n_ops;
    f->e = (struct err)ERR_INIT;
    s->ops = NULL;
    s->n_ops = s->cap_ops = 0;
    if (uv_queue_work(s->loop, &f->work, token_flush_work, token_flush_done) < 0) {
        s->ops = f->ops;
        s->n_ops = s->cap_ops = f->n;
        free(f);
        return;
    }
    s->flushing = f;
}

/* ---- Expiry ---- */

static void token_schedule(struct token_store *s);

/* Tells every task of t to die. Returns how many were told. */
static size_t token_kill_links(struct token_store *s, struct token *t, enum token_state why)
{
    size_t n = 0;
    for (struct token_link *l = t->links, *next; l; l = next) {
        next = l->next;
        n++;
        s->hooks.kill(l, why, s->hooks.arg);
    }
    return n;
}

/* Forgets a token (memory now, database in the background). Never one with tasks. */
static void token_forget(struct token_store *s, struct token *t)
{
    struct token_op op = {.del = true};
    memcpy(op.id, t->id, sizeof(op.id));
    token_unlink(s, t);
    token_ops_push(s, &op);
    token_free(t);
}

static void token_timer_cb(uv_timer_t *h)
{
    struct token_store *s = container_of(h, struct token_store, timer);
    uint64_t now = s->now_ms();
    for (struct token *t = s->head, *next; t; t = next) {
        next = t->next;
        if (!t->expiry_seen && now >= t->expires_ms) {
            t->expiry_seen = true;
            size_t killed = t->revoked_ms ? 0 : token_kill_links(s, t, TOKEN_EXPIRED);
            log_info("token=%s killed=%zu msg=\"token expired\"", t->id, killed);
            if (s->hooks.expired) {
                s->hooks.expired(t->id, killed, s->hooks.arg);
            }
        }
        if (now >= t->expires_ms + TOKEN_KEEP_MS && !t->links) {
            log_debug("token=%s msg=\"forgetting ended token\"", t->id);
            token_forget(s, t);
        }
    }
    token_flush_kick(s);
    token_schedule(s);
}

/* Arms the timer for the next expiry or forgetting, whichever comes first. */
static void token_schedule(struct token_store *s)
{
    if (!s->timer_open || s->closing) {
        return;
    }
    uint64_t now = s->now_ms();
    uint64_t next = UINT64_MAX;
    for (const struct token *t = s->head; t; t = t->next) {
        uint64_t at = t->expiry_seen ? t->expires_ms + TOKEN_KEEP_MS : t->expires_ms;
        next = at < next ? at : next;
    }
    if (next == UINT64_MAX) {
        uv_timer_stop(&s->timer);
        return;
    }
    uint64_t delay = next > now ? next - now : 0;
    /* One more millisecond: the timer fires when the clock has passed the deadline. */
    delay = delay < TOKEN_TIMER_MAX_MS ? delay + 1 : TOKEN_TIMER_MAX_MS;
    uv_timer_start(&s->timer, token_timer_cb, delay, 0);
}

/* ---- The store ---- */

static char *token_pol_str(struct token_store *s, const char *v)
{
    strv_push(&s->pol_strings, v);
    return s->pol_strings.v[s->pol_strings.n - 1];
}

static const char *const *token_pol_strv(struct token_store *s, const char *const *v, size_t n)
{
    const char **out = xcalloc(n + 1, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        out[i] = token_pol_str(s, v[i]);
    }
    /* The array itself is kept with the strings, cast back when freed. */
    strv_push_owned(&s->pol_strings, (char *)out);
    return out;
}

void token_store_set_clock(struct token_store *s, uint64_t (*now_ms)(void))
{
    s->now_ms = now_ms ? now_ms : token_realtime_ms;
    token_schedule(s);
}

int token_store_open(uv_loop_t *loop, const char *state_dir, const struct token_policy *pol,
                     const struct token_hooks *hooks, struct scrub *scrub, struct token_store **ret,
                     struct err *e)
{
    if (sodium_init() < 0) {
        return err_setx(e, -EIO, "libsodium cannot be initialized");
    }
    if (!hooks->kill || pol->max_ttl_ns == 0 || pol->default_ttl_ns == 0 ||
        pol->default_ttl_ns > pol->max_ttl_ns || pol->max_tokens == 0) {
        return err_setx(e, -EINVAL, "token policy: bad ttl or max_tokens");
    }
    struct token_store *s = xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->hooks = *hooks;
    s->now_ms = pol->now_ms ? pol->now_ms : token_realtime_ms;
    s->pol = *pol;
    s->pol.mount_roots = token_pol_strv(s, pol->mount_roots, pol->n_mount_roots);
    s->pol.forbidden = token_pol_strv(s, pol->forbidden, pol->n_forbidden);
    s->pol.net_profiles = token_pol_strv(s, pol->net_profiles, pol->n_net_profiles);
    s->n_buckets = 16;
    while (s->n_buckets < pol->max_tokens && s->n_buckets < ((size_t)1 << 24)) {
        s->n_buckets *= 2;
    }
    s->buckets = xcalloc(s->n_buckets, sizeof(*s->buckets));
    s->db_path = xasprintf("%s/%s", state_dir, TOKEN_DB_NAME);
    int r = token_db_connect(s->db_path, true, &s->db, e);
    if (r == 0) {
        r = token_db_load(s->db, s->now_ms(), token_load_one, s, e);
    }
    if (r < 0) {
        token_store_free(s);
        return r;
    }
    /* SECURITY: the prefix, not each token: it also covers tokens issued before a restart
     * (whose strings sbxd never had), and the scrubber does not grow with every issue. */
    if (scrub) {
        (void)scrub_register_prefix(scrub, TOKEN_PREFIX);
    }
    uv_timer_init(loop, &s->timer);
    s->timer_open = true;
    token_schedule(s);
    *ret = s;
    return 0;
}

void token_store_shutdown(struct token_store *s)
{
    if (!s || s->closing) {
        return;
    }
    s->closing = true;
    if (s->timer_open) {
        uv_timer_stop(&s->timer);
        uv_close((uv_handle_t *)&s->timer, NULL);
    }
    token_flush_kick(s);
}

struct token_store *token_store_free(struct token_store *s)
{
    if (!s) {
        return NULL;
    }
    if (s->n_ops > 0) {
        struct err e = ERR_INIT;
        sqlite3 *db = s->wdb ? s->wdb : s->db;
        if (!db || token_db_apply(db, s->ops, s->n_ops, &e) < 0) {
            log_warn("ops=%zu msg=\"token uses not written back\" detail=\"%s\"", s->n_ops,
                     db ? err_msg(&e) : "no database");
        }
    }
    for (struct token *t = s->head, *next; t; t = next) {
        next = t->next;
        for (struct token_link *l = t->links; l; l = l->next) {
            l->tok = NULL;
        }
        token_free(t);
    }
    token_db_close(&s->wdb);
    token_db_close(&s->db);
    strv_free(&s->pol_strings);
    free(s->buckets);
    free(s->ops);
    free(s->db_path);
    free(s);
    return NULL;
}

/* Makes room for one more token: forgets ended tokens without tasks, the oldest first.
 * Returns 0 or -ENOSPC. */
static int token_make_room(struct token_store *s, uint64_t now)
{
    for (struct token *t = s->head, *next; t && s->n_tokens >= s->pol.max_tokens; t = next) {
        next = t->next;
        if (token_state_at(t, now) != TOKEN_ACTIVE && !t->links) {
            token_forget(s, t);
        }
    }
    return s->n_tokens < s->pol.max_tokens ? 0 : -ENOSPC;
}

/* Builds the token an issue asks for, the policy checked. */
static int token_build(const struct token_store *s, const struct token_request *rq, uint64_t now,
                       struct token **ret, struct err *e)
{
    const struct token_policy *pol = &s->pol;
    if (rq->n_mounts > TOKEN_MAX_MOUNTS) {
        return err_setx(e, -EINVAL, "at most %d mounts per token", TOKEN_MAX_MOUNTS);
    }
    if (rq->n_pools > TOKEN_MAX_POOLS) {
        return err_setx(e, -EINVAL, "at most %d pools per token", TOKEN_MAX_POOLS);
    }
    uint64_t ttl = rq->ttl_ns ? rq->ttl_ns : pol->default_ttl_ns;
    if (ttl > pol->max_ttl_ns) {
        return err_setx(e, -EACCES, "ttl %.3fs is above the maximum of %.0fs (tokens.max_ttl)",
                        (double)ttl / 1e9, (double)pol->max_ttl_ns / 1e9);
    }
    uint64_t ttl_ms = (ttl + 999999) / 1000000;
    const char *net = rq->net && strcmp(rq->net, "none") != 0 ? rq->net : NULL;
    if (net) {
        bool known = false;
        for (size_t i = 0; i < pol->n_net_profiles && !known; i++) {
            known = strcmp(pol->net_profiles[i], net) == 0;
        }
        if (!token_policy_name_ok(net) || !known) {
            return err_setx(e, -EINVAL, "unknown network profile '%.32s'", net);
        }
    }
    int r = token_policy_check_dsts(rq->mounts, rq->n_mounts, e);
    if (r < 0) {
        return r;
    }
    struct token *t = xcalloc(1, sizeof(*t));
    t->created_ms = now;
    t->expires_ms = now + ttl_ms;
    t->uses_max = rq->uses;
    t->uses_left = rq->uses;
    t->net = net ? xstrdup(net) : NULL;
    t->mounts = rq->n_mounts ? xcalloc(rq->n_mounts, sizeof(*t->mounts)) : NULL;
    for (size_t i = 0; i < rq->n_mounts; i++) {
        r = token_policy_check_src(pol, rq->mounts[i].src, &t->mounts[i].src, e);
        if (r < 0) {
            t->n_mounts = i + 1;
            token_free(t);
            return r;
        }
        t->mounts[i].dst = xstrdup(rq->mounts[i].dst);
    }
    t->n_mounts = rq->n_mounts;
    t->pools = rq->n_pools ? xcalloc(rq->n_pools, sizeof(*t->pools)) : NULL;
    for (size_t i = 0; i < rq->n_pools; i++) {
        bool dup = false;
        if (!token_policy_name_ok(rq->pools[i])) {
            token_free(t);
            return err_setx(e, -EINVAL, "bad pool name '%.32s'", rq->pools[i]);
        }
        for (size_t j = 0; j < t->n_pools && !dup; j++) {
            dup = strcmp(t->pools[j], rq->pools[i]) == 0;
        }
        if (!dup) {
            t->pools[t->n_pools++] = xstrdup(rq->pools[i]);
        }
    }
    uint8_t idb[TOKEN_ID_LEN / 2];
    randombytes_buf(idb, sizeof(idb));
    str_hex_encode(idb, sizeof(idb), t->id);
    *ret = t;
    return 0;
}

int token_issue(struct token_store *s, const struct token_request *rq,
                char ret_token[TOKEN_STR_LEN + 1], const struct token **ret, struct err *e)
{
    uint64_t now = s->now_ms();
    struct token *t = NULL;
    int r = token_build(s, rq, now, &t, e);
    if (r < 0) {
        return r;
    }
    if (token_make_room(s, now) < 0) {
        token_free(t);
        return err_setx(e, -ENOSPC, "too many tokens (tokens.max_tokens is %u)", s->pol.max_tokens);
    }
    char str[TOKEN_STR_LEN + 1];
    do {
        token_secret_mint(str, t->hash);
    } while (token_find_hash(s, t->hash)); /* 2^-256: never, but never is cheap to check */
    r = token_db_insert(s->db, t, e);
    if (r < 0) {
        sodium_memzero(str, sizeof(str));
        token_free(t);
        return r;
    }
    token_insert(s, t);
    memcpy(ret_token, str, sizeof(str));
    sodium_memzero(str, sizeof(str));
    token_flush_kick(s); /* room made above may have forgotten tokens */
    token_schedule(s);
    *ret = t;
    return 0;
}

int token_revoke(struct token_store *s, const char *token_or_id, size_t len,
                 const struct token **ret, size_t *ret_killed, struct err *e)
{
    struct token *t = NULL;
    uint8_t secret[TOKEN_SECRET_BYTES];
    if (token_secret_decode(token_or_id, len, secret) == 0) {
        uint8_t hash[TOKEN_HASH_BYTES];
        token_secret_hash(secret, hash);
        sodium_memzero(secret, sizeof(secret));
        t = token_find_hash(s, hash);
    } else {
        t = token_find_id(s, token_or_id, len);
    }
    if (!t) {
        return err_setx(e, -ENOENT, "no such token");
    }
    size_t killed = 0;
    if (!t->revoked_ms) {
        t->revoked_ms = s->now_ms();
        killed = token_kill_links(s, t, TOKEN_REVOKED);
        log_info("token=%s killed=%zu msg=\"token revoked\"", t->id, killed);
    }
    if (!t->revoke_saved) {
        int r = token_db_revoke(s->db, t, e);
        if (r < 0) {
            return err_prefix(e, r, "token %s is revoked until sbxd restarts", t->id);
        }
        t->revoke_saved = true;
    }
    *ret = t;
    *ret_killed = killed;
    return 0;
}

int token_authorize(const struct token_store *s, const char *token, size_t len, const char *pool,
                    const char **why, const struct token **ret, struct err *e)
{
    uint8_t secret[TOKEN_SECRET_BYTES];
    uint8_t hash[TOKEN_HASH_BYTES];
    if (token_secret_decode(token, len, secret) < 0) {
        *why = "token_malformed";
        return err_setx(e, -EACCES, "malformed token (expected %s followed by 43 characters)",
                        TOKEN_PREFIX);
    }
    token_secret_hash(secret, hash);
    sodium_memzero(secret, sizeof(secret));
    const struct token *t = token_find_hash(s, hash);
    if (!t) {
        *why = "token_unknown";
        return err_setx(e, -EACCES, "unknown token");
    }
    switch (token_state_at(t, s->now_ms())) {
    case TOKEN_REVOKED:
        *why = "token_revoked";
        return err_setx(e, -EACCES, "token %s was revoked", t->id);
    case TOKEN_EXPIRED:
        *why = "token_expired";
        return err_setx(e, -EACCES, "token %s has expired", t->id);
    case TOKEN_USED_UP:
        *why = "token_used_up";
        return err_setx(e, -EACCES, "token %s is used up (%u uses)", t->id, t->uses_max);
    case TOKEN_ACTIVE:
        break;
    }
    bool granted = t->n_pools == 0;
    for (size_t i = 0; i < t->n_pools && !granted; i++) {
        granted = strcmp(t->pools[i], pool) == 0;
    }
    if (!granted) {
        *why = "pool_not_allowed";
        return err_setx(e, -EACCES, "token %s does not grant pool '%.32s'", t->id, pool);
    }
    *ret = t;
    return 0;
}

void token_attach(struct token_store *s, const struct token *ct, struct token_link *l)
{
    struct token *t = (struct token *)ct;
    if (t->uses_max > 0 && t->uses_left > 0) {
        t->uses_left--;
        struct token_op op = {.del = false, .uses_left = t->uses_left};
        memcpy(op.id, t->id, sizeof(op.id));
        token_ops_push(s, &op);
        token_flush_kick(s);
    }
    l->tok = t;
    DLIST_PUSH(t->links, l);
    t->running++;
}

void token_detach(struct token_link *l)
{
    struct token *t = l->tok;
    if (!t) {
        return;
    }
    DLIST_REMOVE(t->links, l);
    t->running--;
    l->tok = NULL;
}

int token_open_mounts(const struct token_store *s, const struct token *t, int *fds,
                      uint32_t *ret_files, struct err *e)
{
    uint32_t files = 0;
    for (size_t i = 0; i < t->n_mounts; i++) {
        bool file = false;
        int r = token_mount_open(&s->pol, &t->mounts[i], &fds[i], &file, e);
        if (r < 0) {
            for (size_t j = 0; j < i; j++) {
                fds[j] = fd_close(fds[j]);
            }
            return r;
        }
        files |= file ? 1u << i : 0;
    }
    *ret_files = files;
    return (int)t->n_mounts;
}

void token_get_info(const struct token_store *s, const struct token *t, struct token_info *ret)
{
    *ret = (struct token_info){
        .id = t->id,
        .state = token_state_at(t, s->now_ms()),
        .created_ms = t->created_ms,
        .expires_ms = t->expires_ms,
        .revoked_ms = t->revoked_ms,
        .uses = t->uses_max,
        .uses_left = t->uses_left,
        .running = t->running,
        .net = t->net,
        .mounts = t->mounts,
        .n_mounts = t->n_mounts,
        .pools = t->pools,
        .n_pools = t->n_pools,
    };
}

const struct token *token_next(const struct token_store *s, const struct token *prev)
{
    return prev ? prev->next : s->head;
}

size_t token_count(const struct token_store *s)
{
    return s->n_tokens;
}
