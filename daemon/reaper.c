/* SPDX-License-Identifier: MIT */
/* The reaper: the state dir's lock, start-up removal of what a previous sbxd left in our
 * cgroup subtree, abandoned tasks in the trail, and the periodic leak sweep. It kills only
 * processes listed in cgroups below our own subtree, through pidfds (cgroup_kill_all), and
 * never touches a cgroup outside it. */
#define LOG_MOD "reaper"
#include "reaper.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "lib/alloc.h"
#include "audit/audit.h"
#include "audit/audit_query.h"
#include "sandbox/cgroup.h"
#include "config/config.h"
#include "daemon.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "metrics/metrics.h"
#include "lib/util.h"

/* How long one cgroup may take to empty after SIGKILL before it is given up on. */
#define EMPTY_WAIT_MS 5000
#define KILL_EVERY_MS 100

struct live {
    struct live *next;
    char id[AUDIT_TASK_MAX];
};

struct sweep_item {
    char *name;
    bool existed; /* still there when the worker looked: a real leak */
    bool removed;
    int killed;
    struct err e;
};

struct reaper {
    struct daemon *d;
    int lock_fd;
    uv_timer_t timer;
    bool timer_on;
    uv_work_t list_w;
    uv_work_t remove_w;
    bool sweeping;
    struct strv listed;
    struct sweep_item *items;
    size_t n_items;
    int list_r;
    /* live sandboxes: chained hash set of ids */
    struct live **buckets;
    size_t n_buckets;
    size_t n_live;
    /* counters */
    uint64_t leaks;
    uint64_t start_cgroups;
    uint64_t start_procs;
    uint64_t abandoned;
    uint64_t abandoned_sessions;
    struct strv start_ids; /* sandboxes removed at start-up */
};

static void names_add_cb(const char *name, void *ud)
{
    strv_push(ud, name);
}

/* ---- the live-sandbox set ----------------------------------------------------------- */

static size_t id_bucket(const struct reaper *r, const char *id)
{
    uint32_t h = 2166136261u;
    for (const char *p = id; *p; p++) {
        h = (h ^ (unsigned char)*p) * 16777619u;
    }
    return h & (r->n_buckets - 1);
}

static bool live_has(const struct reaper *r, const char *id)
{
    for (struct live *x = r->buckets[id_bucket(r, id)]; x; x = x->next) {
        if (strcmp(x->id, id) == 0) {
            return true;
        }
    }
    return false;
}

static void live_grow(struct reaper *r)
{
    size_t old_n = r->n_buckets;
    struct live **old = r->buckets;
    r->n_buckets *= 2;
    r->buckets = xcalloc(r->n_buckets, sizeof(*r->buckets));
    for (size_t i = 0; i < old_n; i++) {
        struct live *x = old[i];
        while (x) {
            struct live *next = x->next;
            size_t b = id_bucket(r, x->id);
            x->next = r->buckets[b];
            r->buckets[b] = x;
            x = next;
        }
    }
    free(old);
}

void reaper_track(struct daemon *d, const char *sandbox_id)
{
    struct reaper *r = d->reaper;
    if (!r) {
        return;
    }
    if (r->n_live + 1 > r->n_buckets) {
        live_grow(r);
    }
    struct live *x = xcalloc(1, sizeof(*x));
    str_copy(x->id, sandbox_id, sizeof(x->id));
    size_t b = id_bucket(r, x->id);
    x->next = r->buckets[b];
    r->buckets[b] = x;
    r->n_live++;
}

void reaper_untrack(struct daemon *d, const char *sandbox_id)
{
    struct reaper *r = d->reaper;
    if (!r) {
        return;
    }
    for (struct live **pp = &r->buckets[id_bucket(r, sandbox_id)]; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->id, sandbox_id) == 0) {
            struct live *x = *pp;
            *pp = x->next;
            free(x);
            r->n_live--;
            return;
        }
    }
}

/* ---- removing one cgroup (blocking: start-up or a worker thread) --------------------- */

static void cgroup_freep(struct cgroup **cg)
{
    *cg = cgroup_free(*cg);
}

/* Kills what is in <subtree>/<name> and removes it. Returns 0, -ENOENT when it was not
 * there, or -errno (e says why). *ret_killed counts processes signalled. */
static int remove_one(struct cgroup_root *root, const char *name, int *ret_killed, struct err *e)
{
    scoped(cgroup_freep) struct cgroup *cg = NULL;
    *ret_killed = 0;
    int r = cgroup_open_existing(root, name, &cg);
    if (r < 0) {
        return r == -ENOENT ? r : err_set(e, r, "cgroup '%s'", name);
    }
    for (int ms = 0; ms < EMPTY_WAIT_MS; ms++) {
        if (cgroup_is_empty(cg)) {
            r = cgroup_remove(cg, e);
            if (r != -EBUSY) {
                return r;
            }
        } else if (ms % KILL_EVERY_MS == 0) {
            /* SECURITY: only pids listed in this cgroup's own cgroup.procs, by pidfd. */
            int k = cgroup_kill_all(cg);
            if (k > 0) {
                *ret_killed += k;
            }
        }
        usleep(1000);
    }
    return err_setx(e, -EBUSY, "cgroup '%s' still has processes after %d ms", name, EMPTY_WAIT_MS);
}

/* ---- start-up ------------------------------------------------------------------------ */

int reaper_lock(struct daemon *d, struct err *e)
{
    struct reaper *r = xcalloc(1, sizeof(*r));
    r->d = d;
    r->lock_fd = -1;
    r->n_buckets = 64;
    r->buckets = xcalloc(r->n_buckets, sizeof(*r->buckets));
    d->reaper = r;
    scoped_free char *path = xasprintf("%s/%s", d->cfg->state_dir, REAPER_LOCK_NAME);
    r->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (r->lock_fd < 0) {
        return err_set(e, -errno, "lock '%s'", path);
    }
    if (flock(r->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        int err = errno;
        if (err == EWOULDBLOCK) {
            return err_setx(e, -EBUSY, "state dir '%s' is in use by another sbxd (%s is locked)",
                            d->cfg->state_dir, path);
        }
        return err_set(e, -err, "lock '%s'", path);
    }
    return 0;
}

int reaper_startup(struct daemon *d, struct err *e)
{
    struct reaper *rp = d->reaper;
    scoped_strv struct strv found = STRV_INIT;
    int r = cgroup_root_list(d->cg_root, names_add_cb, &found);
    if (r < 0) {
        return err_set(e, r, "listing our cgroup subtree");
    }
    int failed = 0;
    for (size_t i = 0; i < found.n; i++) {
        struct err e2 = ERR_INIT;
        int killed = 0;
        r = remove_one(d->cg_root, found.v[i], &killed, &e2);
        rp->start_procs += (uint64_t)killed;
        if (r == 0 || r == -ENOENT) {
            rp->start_cgroups++;
            strv_push(&rp->start_ids, found.v[i]);
            log_debug("cgroup=%s killed=%d msg=\"removed what a previous sbxd left\"", found.v[i],
                      killed);
        } else {
            failed++;
            rp->leaks++;
            log_error("cgroup=%s msg=\"cannot remove what a previous sbxd left, leaking it\" "
                      "detail=\"%s\"",
                      found.v[i], err_msg(&e2));
        }
    }
    if (found.n > 0) {
        log_warn("cgroups=%llu processes=%llu failed=%d msg=\"a previous sbxd left sandboxes; "
                 "killed and removed them\"",
                 (unsigned long long)rp->start_cgroups, (unsigned long long)rp->start_procs,
                 failed);
    }
    return (int)rp->start_cgroups;
}

struct abandon_ctx {
    struct daemon *d;
    int n;
};

static void abandon_one(const struct audit_open_task *t, void *ud)
{
    struct abandon_ctx *c = ud;
    struct reaper *rp = c->d->reaper;
    struct audit *a = c->d->audit;
    if (t->sandbox && !t->destroyed) {
        struct audit_ev *ev = audit_begin(a, "sandbox.destroyed", t->task);
        audit_id(ev, "sandbox", t->sandbox);
        /* Cgroups are reused by later sandboxes of a pool: the one it ran in is recorded. */
        const char *cg = t->cgroup ? t->cgroup : t->sandbox;
        audit_id(ev, "how", strv_contains(&rp->start_ids, cg) ? "reaped" : "gone");
        audit_id(ev, "by", "reaper");
        audit_end(ev);
    }
    struct audit_ev *ev = audit_begin(a, "task.result", t->task);
    audit_id(ev, "status", "abandoned");
    audit_str(ev, "pool", t->pool);
    audit_id(ev, "error", "sbxd stopped before the task's result was recorded");
    audit_bool(ev, "delivered", false);
    audit_end(ev);
    c->n++;
}

/* A session the previous sbxd left open: its sandbox died with that sbxd (its init with its
 * control socket) and the start-up sweep removed its cgroup; its end is recorded. */
static void abandon_session(const struct audit_open_session *s, void *ud)
{
    struct abandon_ctx *c = ud;
    struct audit_ev *ev = audit_begin(c->d->audit, "session.close", s->session);
    audit_id(ev, "session", s->session);
    audit_id(ev, "reason", "abandoned");
    audit_str(ev, "pool", s->pool);
    audit_u64(ev, "commands", s->commands);
    audit_u64(ev, "lifetime_ms", s->lifetime_ms);
    audit_end(ev);
    c->n++;
}

int reaper_mark_abandoned(struct daemon *d, struct err *e)
{
    if (!audit_enabled(d->audit)) {
        return 0;
    }
    struct sqlite3 *db = NULL;
    int r = audit_query_ro_open(audit_path(d->audit), &db, e);
    if (r < 0) {
        return r;
    }
    struct abandon_ctx c = {d, 0};
    r = audit_query_open_tasks(db, abandon_one, &c, e);
    struct abandon_ctx sc = {d, 0};
    if (r >= 0) {
        r = audit_query_open_sessions(db, abandon_session, &sc, e);
    }
    audit_query_ro_close(db);
    if (r < 0) {
        return r;
    }
    d->reaper->abandoned = (uint64_t)c.n;
    d->reaper->abandoned_sessions = (uint64_t)sc.n;
    if (c.n > 0) {
        log_warn("tasks=%d msg=\"tasks in flight when the previous sbxd died are marked "
                 "abandoned in the audit trail\"",
                 c.n);
    }
    if (sc.n > 0) {
        log_warn("sessions=%d msg=\"sessions open when the previous sbxd died are marked "
                 "abandoned in the audit trail\"",
                 sc.n);
    }
    return c.n;
}

/* ---- the periodic sweep -------------------------------------------------------------- */

static void list_work(uv_work_t *w)
{
    struct reaper *r = container_of(w, struct reaper, list_w);
    r->list_r = cgroup_root_list(r->d->cg_root, names_add_cb, &r->listed);
}

static void remove_work(uv_work_t *w)
{
    struct reaper *r = container_of(w, struct reaper, remove_w);
    for (size_t i = 0; i < r->n_items; i++) {
        struct sweep_item *it = &r->items[i];
        int rr = remove_one(r->d->cg_root, it->name, &it->killed, &it->e);
        it->existed = rr != -ENOENT;
        it->removed = rr == 0;
    }
}

static void sweep_end(struct reaper *r)
{
    for (size_t i = 0; i < r->n_items; i++) {
        free(r->items[i].name);
    }
    free(r->items);
    r->items = NULL;
    r->n_items = 0;
    strv_free(&r->listed);
    r->sweeping = false;
}

static void remove_done(uv_work_t *w, int status)
{
    struct reaper *r = container_of(w, struct reaper, remove_w);
    (void)status;
    for (size_t i = 0; i < r->n_items; i++) {
        struct sweep_item *it = &r->items[i];
        if (!it->existed) {
            continue; /* its sandbox was freed after the listing: not a leak */
        }
        r->leaks++;
        metrics_sandbox_leaks(r->d->metrics, 1);
        log_error("cgroup=%s killed=%d removed=%s msg=\"leaked cgroup in our subtree: it "
                  "belongs to no live sandbox (a bug)%s\" detail=\"%s\"",
                  it->name, it->killed, it->removed ? "yes" : "no",
                  it->removed ? ", removed it" : ", retrying at the next sweep",
                  it->removed ? "" : err_msg(&it->e));
        audit_event(r->d->audit, "reaper.leak", NULL, "cgroup", AUDIT_ID, it->name,
                    "processes_killed", AUDIT_U64, (uint64_t)it->killed, "removed", AUDIT_BOOL,
                    (int)it->removed, NULL);
    }
    sweep_end(r);
}

static void list_done(uv_work_t *w, int status)
{
    struct reaper *r = container_of(w, struct reaper, list_w);
    if (status < 0 || r->list_r < 0 || r->d->draining) {
        if (r->list_r < 0) {
            log_warn_errno(r->list_r, "msg=\"cannot list our cgroup subtree, retrying later\"");
        }
        sweep_end(r);
        return;
    }
    /* Compared on the loop: the live set changes only here. A sandbox is registered before
     * its cgroup exists, so a listed cgroup that is not live either belongs to a sandbox
     * freed after the listing (the worker will find it gone) or is a leak. */
    r->items = xcalloc(r->listed.n ? r->listed.n : 1, sizeof(*r->items));
    for (size_t i = 0; i < r->listed.n; i++) {
        if (!live_has(r, r->listed.v[i])) {
            r->items[r->n_items++].name = xstrdup(r->listed.v[i]);
        }
    }
    if (r->n_items == 0 || uv_queue_work(r->d->loop, &r->remove_w, remove_work, remove_done) < 0) {
        sweep_end(r);
    }
}

static void sweep_cb(uv_timer_t *h)
{
    struct reaper *r = h->data;
    if (r->sweeping || r->d->draining) {
        return;
    }
    r->sweeping = true;
    r->list_r = 0;
    if (uv_queue_work(r->d->loop, &r->list_w, list_work, list_done) < 0) {
        r->sweeping = false;
    }
}

void reaper_start(struct daemon *d)
{
    struct reaper *r = d->reaper;
    uint64_t ms = REAPER_SWEEP_MS;
    const char *env = getenv("SBXD_REAPER_INTERVAL_MS");
    uint64_t v;
    if (env && parse_u64(env, &v) == 0 && v >= 10) {
        ms = v;
    }
    uv_timer_init(d->loop, &r->timer);
    r->timer.data = r;
    uv_timer_start(&r->timer, sweep_cb, ms, ms);
    r->timer_on = true;
}

void reaper_stop(struct daemon *d)
{
    struct reaper *r = d->reaper;
    if (r && r->timer_on) {
        uv_timer_stop(&r->timer);
        uv_close((uv_handle_t *)&r->timer, NULL);
        r->timer_on = false;
    }
}

struct reaper *reaper_free(struct reaper *r)
{
    if (!r) {
        return NULL;
    }
    for (size_t i = 0; i < r->n_buckets; i++) {
        struct live *x = r->buckets[i];
        while (x) {
            struct live *next = x->next;
            free(x);
            x = next;
        }
    }
    free(r->buckets);
    strv_free(&r->start_ids);
    strv_free(&r->listed);
    r->lock_fd = fd_close(r->lock_fd);
    free(r);
    return NULL;
}

uint64_t reaper_leaks_total(const struct daemon *d)
{
    return d->reaper ? d->reaper->leaks : 0;
}

uint64_t reaper_startup_cgroups(const struct daemon *d)
{
    return d->reaper ? d->reaper->start_cgroups : 0;
}

uint64_t reaper_startup_processes(const struct daemon *d)
{
    return d->reaper ? d->reaper->start_procs : 0;
}

uint64_t reaper_abandoned_tasks(const struct daemon *d)
{
    return d->reaper ? d->reaper->abandoned : 0;
}

uint64_t reaper_abandoned_sessions(const struct daemon *d)
{
    return d->reaper ? d->reaper->abandoned_sessions : 0;
}
