/* SPDX-License-Identifier: MIT */
/* sbxd's life: start-up as a table of steps (main.c writes the table), the drain from the
 * first SIGTERM to exit code 0, and daemon_exit, the one way out of both; and the steps that
 * wire a subsystem's callbacks into the drain or the root. No exit() here: every failure
 * goes back to main through daemon_exit. */
#define LOG_MOD "main"
#include "daemon.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/rpc.h"
#include "api/server.h"
#include "audit/audit.h"
#include "config/config.h"
#include "core/pool.h"
#include "core/sched.h"
#include "core/session.h"
#include "egress/egress.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/scrub.h"
#include "lib/strv.h"
#include "lib/workq.h"
#include "metrics/metrics.h"
#include "reaper.h"
#include "sandbox/cgroup.h"
#include "sandbox/image.h"
#include "sandbox/netns.h"
#include "sandbox/seccomp.h"
#include "signals.h"
#include "token/token.h"

int daemon_start(struct daemon *d, const struct daemon_step *steps, size_t n)
{
    d->steps = steps;
    for (size_t i = 0; i < n; i++) {
        struct err e = ERR_INIT;
        d->steps_begun = i + 1; /* a failed start is stopped too */
        int r = steps[i].start(d, &e);
        if (r < 0) {
            fprintf(stderr, "sbxd: %s\n", err_msg(&e));
            return steps[i].exit_code;
        }
        if (r == DAEMON_STEP_EXIT) {
            return 0;
        }
    }
    return -1;
}

/* Undoes the begun steps in reverse, each once: at the drain's end (loop), or after a
 * failed start-up. */
static void daemon_stop(struct daemon *d)
{
    while (d->steps_begun > 0) {
        const struct daemon_step *s = &d->steps[--d->steps_begun];
        if (s->stop) {
            s->stop(d);
        }
    }
}

/* After the loop has ended: frees what start-up made, the audit trail closed last but for
 * metrics (closing writes what is still queued, daemon.stop included, and feeds the
 * metrics' hook). Every part may be missing or half made. */
static void free_daemon_parts(struct daemon *d)
{
    d->netns = netns_pool_free(d->netns);
    idslot_free(&d->ids);
    d->cg_root = cgroup_root_free(d->cg_root);
    free(d->pools);
    d->pools = NULL;
    d->images = image_list_free(d->images);
    d->sessions = session_table_free(d->sessions);
    d->tokens = token_store_free(d->tokens);
    d->egress = egress_free(d->egress);
    d->audit = audit_close(d->audit);
    d->metrics = metrics_free(d->metrics);
    d->rpc = rpc_free(d->rpc);
    d->reaper = reaper_free(d->reaper);
    d->scrub = scrub_free(d->scrub);
    free(d->init_path);
    d->init_path = NULL;
    seccomp_set_free(d->seccomp);
    d->seccomp = NULL;
    config_free((struct config *)d->cfg);
    d->cfg = NULL;
}

int daemon_exit(struct daemon *d, int code)
{
    daemon_stop(d); /* after the drain, nothing is left to stop */
    if (d->loop) {
        uv_run(d->loop, UV_RUN_DEFAULT); /* what the stops closed */
    }
    d->workq = workq_free(d->workq);
    /* The cgroup subtree and the audit trail close while a late signal is still caught
     * (signals_stop), then the signal handles go. */
    free_daemon_parts(d);
    if (d->loop) {
        d->signals = signals_close(d->signals);
        uv_run(d->loop, UV_RUN_DEFAULT);
        if (uv_loop_close(d->loop) < 0) {
            log_warn("msg=\"loop closed with handles still open\"");
        }
        d->loop = NULL;
    }
    return code;
}

/* Called when something the drain waits for has finished (a task, a sandbox, a client). */
static void daemon_drain_progress(struct daemon *d)
{
    if (!d->draining || d->drain_done) {
        return;
    }
    /* Tasks end when their audit chains are committed; other events must be too. */
    if (sched_drained(d->sched) && audit_idle(d->audit)) {
        d->drain_done = true;
        daemon_stop(d); /* the loop ends once what the steps opened is closed */
        log_info("msg=\"drained, every sandbox removed\"");
    }
}

static void drain_progress_cb(void *arg)
{
    daemon_drain_progress(arg);
}

static void drain_timeout(uv_timer_t *h)
{
    struct daemon *d = h->data;
    struct sched_stats st;
    sched_get_stats(d->sched, &st);
    log_warn("running=%u msg=\"drain grace over, killing the remaining tasks\"", st.running_tasks);
    d->killing = true;
    audit_give_up_if_failing(d->audit);
    if (d->rpc) {
        rpc_kill_tasks(d->rpc, KILL_SHUTDOWN);
    }
}

/* Begins the drain, or (second call, or grace over) kills the rest. */
static void daemon_shutdown(struct daemon *d)
{
    if (d->draining) {
        if (!d->killing) {
            uv_timer_stop(&d->drain_timer);
            drain_timeout(&d->drain_timer);
        }
        return;
    }
    d->draining = true;
    image_cancel_all(d->images);
    if (d->agents) {
        server_stop_listening(d->agents);
    }
    if (d->admin) {
        server_stop_listening(d->admin);
    }
    sched_drain(d->sched);
    if (d->sessions) {
        session_table_drain(d->sessions); /* idle ones end now, busy ones after their command */
    }
    uv_timer_start(&d->drain_timer, drain_timeout, d->cfg->drain_grace_ns / 1000000, 0);
    daemon_drain_progress(d);
}

int daemon_drain_timer_start(struct daemon *d, struct err *e)
{
    (void)e;
    uv_timer_init(d->loop, &d->drain_timer);
    d->drain_timer.data = d;
    return 0;
}

void daemon_drain_timer_stop(struct daemon *d)
{
    uv_timer_stop(&d->drain_timer);
    uv_close((uv_handle_t *)&d->drain_timer, NULL);
}

/* signals.c: SIGTERM or SIGINT. */
static void on_term(void *arg, int signum)
{
    struct daemon *d = arg;
    if (d->drain_done) {
        if (!d->late_signal_logged) { /* once: a flood of them would flood the log */
            d->late_signal_logged = true;
            log_info("signal=%d msg=\"drained already, exiting; ignored\"", signum);
        }
        return;
    }
    log_info("signal=%d msg=\"%s\"", signum,
             d->draining ? "second termination signal, killing every task" : "draining");
    daemon_shutdown(d);
}

int daemon_signals_start(struct daemon *d, struct err *e)
{
    (void)e;
    signals_start(d->loop, on_term, d, &d->signals);
    return 0;
}

/* The handlers no longer keep the loop alive; daemon_exit closes them last. */
void daemon_signals_stop(struct daemon *d)
{
    signals_stop(d->signals);
}

static void audit_idle_cb(void *arg)
{
    daemon_drain_progress(arg);
}

/* The audit trail: opened before the pools fill, so that tasks the previous sbxd left in
 * flight are marked abandoned before daemon.start (which marks where this run begins). */
int daemon_audit_start(struct daemon *d, struct err *e)
{
    const struct config *cfg = d->cfg;
    struct audit_options ao = {
        .enabled = cfg->audit_enabled,
        .max_age_ns = cfg->audit_max_age_ns,
        .max_rows = cfg->audit_max_rows,
        .max_bytes = cfg->audit_max_bytes,
        .fsync = cfg->audit_fsync,
        .budget_window_ns = cfg->audit_budget_window_ns,
        .summary_interval_ns = cfg->audit_summary_interval_ns,
    };
    scoped_free char *path = xasprintf("%s/%s", cfg->state_dir, AUDIT_DB_NAME);
    int r = audit_open(d->loop, path, &ao, d->scrub, &d->audit, e);
    if (r < 0) {
        return r;
    }
    if (!cfg->audit_enabled) {
        log_warn("msg=\"the audit trail is disabled (audit.enabled: false): nothing is "
                 "recorded; for benchmarks only\"");
    }
    struct err e2 = ERR_INIT;
    if (reaper_mark_abandoned(d, &e2) < 0) {
        log_error("msg=\"cannot look for abandoned tasks in the audit trail, going on\" "
                  "detail=\"%s\"",
                  err_msg(&e2));
    }
    char instance[16];
    (void)snprintf(instance, sizeof(instance), "%08x", d->instance);
    audit_event(d->audit, "daemon.start", NULL, "pid", AUDIT_I64, (int64_t)getpid(), "instance",
                AUDIT_ID, instance, "state_dir", AUDIT_STR, cfg->state_dir, "pools", AUDIT_U64,
                (uint64_t)cfg->n_pools, "reaped_cgroups", AUDIT_U64, reaper_startup_cgroups(d),
                "reaped_processes", AUDIT_U64, reaper_startup_processes(d), "abandoned_tasks",
                AUDIT_U64, reaper_abandoned_tasks(d), "abandoned_sessions", AUDIT_U64,
                reaper_abandoned_sessions(d), NULL);
    audit_set_idle_cb(d->audit, audit_idle_cb, d);
    return audit_start(d->audit, e);
}

/* Last of the audit trail's users to stop: what the others queue on their way out is still
 * written, by audit_close after the loop, and so is daemon.stop after a drain (a start-up
 * that failed has no run to end). */
void daemon_audit_stop(struct daemon *d)
{
    /* First, so that the summaries it writes of what was only counted come before
     * daemon.stop, the run's last event (events queued after it are still written). */
    audit_shutdown(d->audit);
    if (d->drain_done) {
        audit_event(d->audit, "daemon.stop", NULL, "pid", AUDIT_I64, (int64_t)getpid(), "reason",
                    AUDIT_ID, d->killing ? "drained, remaining tasks killed" : "drained", NULL);
    }
}

/* The reaper's live set, for sandbox/kit.h. */
static void reaper_track_cb(void *arg, const char *cg_name)
{
    reaper_track(arg, cg_name);
}

static void reaper_untrack_cb(void *arg, const char *cg_name)
{
    reaper_untrack(arg, cg_name);
}

/* The pools: a kit each (what their sandboxes are made of), under the scheduler. */
int daemon_pools_start(struct daemon *d, struct err *e)
{
    const struct config *cfg = d->cfg;
    d->senv = (struct sandbox_env){
        .loop = d->loop,
        .cfg = cfg,
        .cg_root = d->cg_root,
        .netns = d->netns,
        .ids = &d->ids,
        .workq = d->workq,
        .init_path = d->init_path,
        .instance = d->instance,
        .track = reaper_track_cb,
        .untrack = reaper_untrack_cb,
        .track_arg = d,
    };
    (void)sched_new(d->loop, cfg, &d->ids, drain_progress_cb, d, &d->sched);
    d->tenv = (struct task_env){
        .loop = d->loop,
        .cfg = cfg,
        .audit = d->audit,
        .sched = d->sched,
        .instance = d->instance,
        .workq = d->workq,
    };
    d->pools = xcalloc(cfg->n_pools, sizeof(*d->pools));
    for (size_t i = 0; i < cfg->n_pools; i++) {
        const struct sock_filter *insns = NULL;
        uint32_t n = 0;
        (void)seccomp_set_get(d->seccomp, cfg->pools[i].seccomp, &insns, &n);
        struct sandbox_kit *kit = NULL;
        int r = kit_new(&d->senv, &cfg->pools[i], insns, n, &kit, e);
        if (r < 0) {
            return r;
        }
        r = pool_new(d->sched, d->loop, kit, &d->pools[i], e);
        if (r < 0) {
            return r;
        }
        d->n_pools++;
        sched_set_pools(d->sched, d->pools, d->n_pools);
    }
    return 0;
}

/* The pools remove their spare cgroups; the scheduler's timer closes. */
void daemon_pools_stop(struct daemon *d)
{
    for (size_t i = 0; i < d->n_pools; i++) {
        pool_close(d->pools[i]);
    }
    sched_close(d->sched);
    d->sched = NULL;
}

/* image.c: a verification ended; its pools may create sandboxes now. */
static void images_ready(void *arg)
{
    struct daemon *d = arg;
    if (d->sched) { /* NULL once the drain is done or start-up gave up */
        sched_refill(d->sched);
    }
}

/* Pool images: built ones are verified in the background before their pools fill. */
int daemon_images_start(struct daemon *d, struct err *e)
{
    struct image_use *uses = xcalloc(d->n_pools ? d->n_pools : 1, sizeof(*uses));
    for (size_t i = 0; i < d->n_pools; i++) {
        uses[i].pool = pool_config(d->pools[i])->name;
        uses[i].image = pool_config(d->pools[i])->image;
    }
    int r = image_setup(d->loop, d->cfg, uses, d->n_pools, d->flags->require_images, images_ready,
                        d, &d->images, e);
    for (size_t i = 0; r == 0 && i < d->n_pools; i++) {
        d->pools[i]->kit->image = uses[i].img;
    }
    free(uses);
    return r;
}

/* Verifications still running give up (the drain's start did so already). */
void daemon_images_stop(struct daemon *d)
{
    image_cancel_all(d->images);
}

/* Writer thread: metrics.c's audit functions are safe from any thread. */
static void audit_batch_metrics(void *arg, double seconds, uint64_t queued)
{
    metrics_audit_batch(arg, seconds);
    metrics_audit_queue_depth(arg, queued);
}

/* Scrape time: the state metrics mirrors, read from the pools and the servers. */
static void metrics_collect(void *arg, struct metrics_values *v)
{
    struct daemon *d = arg;
    for (size_t i = 0; i < d->n_pools && i < v->n_pools; i++) {
        const struct pool_config *pc = pool_config(d->pools[i]);
        struct pool_stats ps;
        pool_get_stats(d->pools[i], &ps);
        v->pools[i] = (struct metrics_pool_values){
            .warm = ps.warm,
            .target = pc->warm,
            .creating = ps.creating,
            .running = ps.busy,
            .queued = ps.queued,
            .max = pc->max,
            .create_failures = ps.failed,
            .cold_starts = ps.cold_starts,
            .fork_server_up = ps.fork_server.pid > 0,
            .fork_server_spawned = ps.fork_server.spawned,
            .fork_server_failures = ps.fork_server.failures,
            .sessions_open = ps.sessions,
        };
    }
    v->rpc_connections = (d->agents ? server_connections(d->agents) : 0) +
                         (d->admin ? server_connections(d->admin) : 0);
}

static bool metrics_draining(void *arg)
{
    const struct daemon *d = arg;
    return d->draining;
}

/* sbxd's metrics: a series handle per pool, kept by the pool for its hooks, the
 * scrape-time source, and the audit writer's batches. */
int daemon_metrics_start(struct daemon *d, struct err *e)
{
    static const struct metrics_source source = {metrics_collect, metrics_draining};
    const struct config *cfg = d->cfg;
    scoped_free const char **pools = xcalloc(d->n_pools + 1, sizeof(*pools));
    for (size_t i = 0; i < d->n_pools; i++) {
        pools[i] = pool_config(d->pools[i])->name;
    }
    scoped_free const char **profiles = xcalloc(cfg->n_egress_profiles + 1, sizeof(*profiles));
    for (size_t i = 0; i < cfg->n_egress_profiles; i++) {
        profiles[i] = cfg->egress_profiles[i].name;
    }
    const struct metrics_names names = {pools, d->n_pools, profiles, cfg->n_egress_profiles};
    int r = metrics_new(&names, &d->metrics, e);
    if (r < 0) {
        return err_prefix(e, r, "metrics");
    }
    d->tenv.metrics = d->metrics; /* a queued task refused by its token is a denial */
    for (size_t i = 0; i < d->n_pools; i++) {
        d->pools[i]->metrics = metrics_pool(d->metrics, i);
    }
    metrics_set_source(d->metrics, &source, d);
    audit_set_batch_hook(d->audit, audit_batch_metrics, d->metrics);
    return 0;
}

/* token.c: a token reached its expiry (its tasks were told to die). */
static void token_expired(const char *id, size_t killed, void *arg)
{
    struct daemon *d = arg;
    (void)audit_event(d->audit, "token.expire", NULL, "token_id", AUDIT_ID, id, "killed", AUDIT_U64,
                      (uint64_t)killed, NULL);
}

/* token.c: a token expired or was revoked; l is a session's link or a task's. */
static void token_kill(struct token_link *l, enum token_state why, void *arg)
{
    struct daemon *d = arg;
    if (d->sessions && session_token_kill(d->sessions, l, why)) {
        return;
    }
    task_token_kill(l, why, arg);
}

/* Adds the real path of path (or of its directory, when dir_of) to v; a path that does not
 * exist is kept as written. */
static void forbid(struct strv *v, const char *path, bool dir_of)
{
    char real[PATH_MAX];
    scoped_free char *p = xstrdup(path);
    if (dir_of) {
        char *slash = strrchr(p, '/');
        if (slash == p) {
            slash[1] = '\0';
        } else if (slash) {
            *slash = '\0';
        } else {
            free(p);
            p = xstrdup(".");
        }
    }
    strv_push(v, realpath(p, real) ? real : p);
}

/* The configured mount roots as real directories, into roots. Returns 0 or -errno. */
static int tokens_mount_roots(const struct config *cfg, struct strv *roots, struct err *e)
{
    for (size_t i = 0; i < cfg->n_token_mount_roots; i++) {
        char real[PATH_MAX];
        struct stat st;
        if (!realpath(cfg->token_mount_roots[i], real) || stat(real, &st) < 0) {
            return err_set(e, -errno, "mount root '%s'", cfg->token_mount_roots[i]);
        }
        if (!S_ISDIR(st.st_mode)) {
            return err_setx(e, -ENOTDIR, "mount root '%s' is not a directory",
                            cfg->token_mount_roots[i]);
        }
        strv_push(roots, real);
    }
    return 0;
}

/* What no token may expose: the state dir, the sockets' directories, and every egress
 * credential file. */
static void tokens_forbidden(const struct config *cfg, struct strv *forbidden)
{
    forbid(forbidden, cfg->state_dir, false);
    forbid(forbidden, cfg->socket_path, true);
    forbid(forbidden, cfg->admin_socket_path, true);
    for (size_t i = 0; i < cfg->n_egress_profiles; i++) {
        const struct egress_profile_config *p = &cfg->egress_profiles[i];
        for (size_t j = 0; j < p->n_routes; j++) {
            if (p->routes[j].credential_file) {
                forbid(forbidden, p->routes[j].credential_file, false);
            }
        }
    }
}

/* Opens the token store under the configured policy. */
int daemon_tokens_start(struct daemon *d, struct err *e)
{
    const struct config *cfg = d->cfg;
    scoped_strv struct strv roots = STRV_INIT;
    scoped_strv struct strv forbidden = STRV_INIT;
    int r = tokens_mount_roots(cfg, &roots, e);
    if (r < 0) {
        return err_prefix(e, r, "tokens");
    }
    tokens_forbidden(cfg, &forbidden);
    scoped_free const char **profiles = xcalloc(cfg->n_egress_profiles + 1, sizeof(char *));
    for (size_t i = 0; i < cfg->n_egress_profiles; i++) {
        profiles[i] = cfg->egress_profiles[i].name;
    }
    struct token_policy pol = {
        .mount_roots = (const char *const *)roots.v,
        .n_mount_roots = roots.n,
        .forbidden = (const char *const *)forbidden.v,
        .n_forbidden = forbidden.n,
        .net_profiles = profiles,
        .n_net_profiles = cfg->n_egress_profiles,
        .max_ttl_ns = cfg->token_max_ttl_ns,
        .default_ttl_ns = cfg->token_default_ttl_ns,
        .max_tokens = cfg->token_max_tokens,
    };
    struct token_hooks hooks = {.kill = token_kill, .expired = token_expired, .arg = d};
    r = token_store_open(d->loop, cfg->state_dir, &pol, &hooks, d->scrub, &d->tokens, e);
    if (r < 0) {
        return err_prefix(e, r, "tokens");
    }
    log_info("tokens=%zu mount_roots=%zu msg=\"token store open\"", token_count(d->tokens),
             roots.n);
    return 0;
}

/* Token expiry keeps killing tasks during the drain; it stops with the last of them. */
void daemon_tokens_stop(struct daemon *d)
{
    token_store_shutdown(d->tokens);
}

/* The stats method's counters that belong to the root's parts (rpc.h). */
static void host_stats(void *arg, struct rpc_host_stats *ret)
{
    const struct daemon *d = arg;
    struct netns_stats ns = {0, 0, 0};
    if (d->netns) {
        netns_get_stats(d->netns, &ns);
    }
    *ret = (struct rpc_host_stats){
        .netns_recycling = d->netns != NULL,
        .netns_created = ns.created,
        .netns_reused = ns.reused,
        .netns_dropped = ns.dropped,
        .id_blocks_held = d->ids.used,
        .id_blocks_total = d->ids.slots,
    };
}

/* The request handler both sockets share, and the sockets. */
int daemon_servers_start(struct daemon *d, struct err *e)
{
    const struct config *cfg = d->cfg;
    const struct session_env senv = {
        .loop = d->loop,
        .cfg = cfg,
        .audit = d->audit,
        .sched = d->sched,
        .tokens = d->tokens,
    };
    session_table_new(&senv, &d->sessions);
    const struct rpc_env env = {
        .loop = d->loop,
        .cfg = cfg,
        .audit = d->audit,
        .tokens = d->tokens,
        .sched = d->sched,
        .tenv = &d->tenv,
        .metrics = d->metrics,
        .sessions = d->sessions,
        .workq = d->workq,
        .host_stats = host_stats,
        .host_stats_arg = d,
    };
    (void)rpc_new(&env, &d->rpc);
    struct config_socket_access sa;
    int r = config_socket_access(cfg, &sa, e);
    if (r < 0) {
        return r;
    }
    struct server_options o = {
        .kind = SERVER_AGENTS,
        .path = cfg->socket_path,
        .mode = sa.mode,
        .has_group = sa.has_group,
        .gid = sa.gid,
        .max_message_bytes = cfg->max_message_bytes,
        .max_connections = cfg->max_connections,
        .closed = drain_progress_cb,
        .closed_arg = d,
    };
    r = server_new(d->loop, &o, &rpc_server_handler, d->rpc, &d->agents, e);
    if (r < 0) {
        return r;
    }
    /* The admin socket is root's alone, whatever the agents' socket allows. */
    o.kind = SERVER_ADMIN;
    o.path = cfg->admin_socket_path;
    o.mode = 0600;
    o.has_group = false;
    return server_new(d->loop, &o, &rpc_server_handler, d->rpc, &d->admin, e);
}

/* Closes the listening sockets and every connection left. */
void daemon_servers_stop(struct daemon *d)
{
    if (d->agents) {
        server_close(d->agents);
        d->agents = NULL;
    }
    if (d->admin) {
        server_close(d->admin);
        d->admin = NULL;
    }
}
