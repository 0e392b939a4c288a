/* SPDX-License-Identifier: MIT */
/* main of sbxd: flags over the config, start-up checks (exit() is allowed only here, before
 * the loop), the wiring of the subsystems' callbacks, the loop, and the drain to exit
 * code 0. */
#define LOG_MOD "main"
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "lib/alloc.h"
#include "audit/audit.h"
#include "sandbox/cgroup.h"
#include "config/config.h"
#include "daemon.h"
#include "egress/egress.h"
#include "core/sched.h"
#include "core/task.h"
#include "metrics/http.h"
#include "sandbox/forkserver.h"
#include "sandbox/image.h"
#include "lib/log.h"
#include "sandbox/netns.h"
#include "metrics/metrics.h"
#include "core/pool.h"
#include "reaper.h"
#include "lib/scrub.h"
#include "sandbox/seccomp.h"
#include "api/rpc.h"
#include "api/server.h"
#include "signals.h"
#include "token/token.h"
#include "lib/util.h"
#include "lib/workq.h"

/* Closes the listening servers and the pools (which remove their spare cgroups). */
static void close_servers_and_pools(struct daemon *d)
{
    if (d->agents) {
        server_close(d->agents);
        d->agents = NULL;
    }
    if (d->admin) {
        server_close(d->admin);
        d->admin = NULL;
    }
    if (d->http) {
        http_server_close(d->http);
        d->http = NULL;
    }
    for (size_t i = 0; i < d->n_pools; i++) {
        pool_close(d->pools[i]);
    }
}

static void finish_shutdown(struct daemon *d)
{
    uv_timer_stop(&d->drain_timer);
    uv_close((uv_handle_t *)&d->drain_timer, NULL);
    sched_close(d->sched);
    d->sched = NULL;
    signals_stop(d->signals);
    close_servers_and_pools(d);
    reaper_stop(d);
    /* Token expiry keeps killing tasks during the drain; it stops with the last of them. */
    token_store_shutdown(d->tokens);
    /* Written by audit_close, after the loop, with whatever else is still queued. */
    audit_event(d->audit, "daemon.stop", NULL, "pid", AUDIT_I64, (int64_t)getpid(), "reason",
                AUDIT_ID, d->killing ? "drained, remaining tasks killed" : "drained", NULL);
    audit_shutdown(d->audit);
    log_info("msg=\"drained, every sandbox removed\"");
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
        finish_shutdown(d);
    }
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
    uv_timer_start(&d->drain_timer, drain_timeout, d->cfg->drain_grace_ns / 1000000, 0);
    daemon_drain_progress(d);
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

/* sbxd's metrics: a series handle per pool, kept by the pool for its hooks, and the
 * scrape-time source. */
static int daemon_metrics_new(struct daemon *d, struct err *e)
{
    static const struct metrics_source source = {metrics_collect, metrics_draining};
    scoped_free const char **names = xcalloc(d->n_pools + 1, sizeof(*names));
    for (size_t i = 0; i < d->n_pools; i++) {
        names[i] = pool_config(d->pools[i])->name;
    }
    int r = metrics_new(names, d->n_pools, &d->metrics, e);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < d->n_pools; i++) {
        d->pools[i]->metrics = metrics_pool(d->metrics, i);
    }
    metrics_set_source(d->metrics, &source, d);
    return 0;
}

static void audit_idle_cb(void *arg)
{
    daemon_drain_progress(arg);
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

static void drain_progress_cb(void *arg)
{
    daemon_drain_progress(arg);
}

/* image.c: a verification ended; its pools may create sandboxes now. */
static void images_ready(void *arg)
{
    struct daemon *d = arg;
    if (d->sched) { /* NULL once the drain is done or start-up gave up */
        sched_refill(d->sched);
    }
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

/* The request handler both sockets share, and the sockets. Returns 0 or -errno with e. */
static int servers_setup(struct daemon *d, struct err *e)
{
    const struct config *cfg = d->cfg;
    const struct rpc_env env = {
        .loop = d->loop,
        .cfg = cfg,
        .audit = d->audit,
        .tokens = d->tokens,
        .sched = d->sched,
        .tenv = &d->tenv,
        .metrics = d->metrics,
        .host_stats = host_stats,
        .host_stats_arg = d,
    };
    (void)rpc_new(&env, &d->rpc);
    struct server_options o = {
        .kind = SERVER_AGENTS,
        .path = cfg->socket_path,
        .mode = 0660,
        .max_message_bytes = cfg->max_message_bytes,
        .max_connections = cfg->max_connections,
        .closed = drain_progress_cb,
        .closed_arg = d,
    };
    int r = server_new(d->loop, &o, &rpc_server_handler, d->rpc, &d->agents, e);
    if (r < 0) {
        return r;
    }
    o.kind = SERVER_ADMIN;
    o.path = cfg->admin_socket_path;
    o.mode = 0600;
    return server_new(d->loop, &o, &rpc_server_handler, d->rpc, &d->admin, e);
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

/* The pools: a kit each (what their sandboxes are made of), under the scheduler. Returns 0
 * or -errno with e. */
static int pools_setup(struct daemon *d, struct err *e)
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

/* Pool images: built ones are verified in the background before their pools fill. */
static int images_setup(struct daemon *d, bool require, struct err *e)
{
    struct image_use *uses = xcalloc(d->n_pools ? d->n_pools : 1, sizeof(*uses));
    for (size_t i = 0; i < d->n_pools; i++) {
        uses[i].pool = pool_config(d->pools[i])->name;
        uses[i].image = pool_config(d->pools[i])->image;
    }
    int r = image_setup(d->loop, d->cfg, uses, d->n_pools, require, images_ready, d, &d->images, e);
    for (size_t i = 0; r == 0 && i < d->n_pools; i++) {
        d->pools[i]->kit->image = uses[i].img;
    }
    free(uses);
    return r;
}

/* The audit trail: opened before the pools fill, so that tasks the previous sbxd left in
 * flight are marked abandoned before daemon.start (which marks where this run begins).
 * Start-up only. Returns 0 or -errno. */
static int audit_setup(struct daemon *d, struct err *e)
{
    const struct config *cfg = d->cfg;
    struct audit_options ao = {
        .enabled = cfg->audit_enabled,
        .max_age_ns = cfg->audit_max_age_ns,
        .max_rows = cfg->audit_max_rows,
        .fsync = cfg->audit_fsync,
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
                AUDIT_U64, reaper_abandoned_tasks(d), NULL);
    audit_set_idle_cb(d->audit, audit_idle_cb, d);
    return audit_start(d->audit, e);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sbxd [--config FILE] [--socket PATH] [--admin-socket PATH]\n"
               "            [--state-dir DIR] [--metrics ADDR:PORT] [--log-level LEVEL]\n"
               "            [--check-config] [--require-images] [--image-hash DIR]\n"
               "            [--mount-root DIR]... [--export-seccomp PROFILE]\n"
               "Runs tasks in fresh sandboxes from warm pools. With no --config, the embedded\n"
               "default (deploy/sbxd.yaml and pools/*.yaml) is used. --require-images makes a\n"
               "pool image that was never built an error; --image-hash prints the manifest\n"
               "lines of an image tree (docs/IMAGES.md); --export-seccomp writes a built-in\n"
               "seccomp profile's program to stdout as raw BPF, denials as plain errno, for\n"
               "bwrap --seccomp FD and other runtimes (docs/SECCOMP.md).\n");
}

/* --export-seccomp: the plain form (no USER_NOTIF, which needs sbxd-init as supervisor).
 * Refuses a terminal, which binary would only garble. */
static int export_seccomp_main(const char *name)
{
    if (isatty(STDOUT_FILENO)) {
        fprintf(stderr, "sbxd: --export-seccomp writes binary BPF: redirect stdout to a file\n");
        return 64;
    }
    struct err e = ERR_INIT;
    if (seccomp_export_embedded(name, SECCOMP_COMPILE_PLAIN, STDOUT_FILENO, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        return e.code == -ENOENT ? 64 : 70;
    }
    return 0;
}

static void replace(char **field, const char *value)
{
    free(*field);
    *field = xstrdup(value);
}

static char *sibling_path(const char *name)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        return NULL;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) {
        return NULL;
    }
    *slash = '\0';
    return xasprintf("%s/%s", exe, name);
}

static int make_dir(const char *path, mode_t mode)
{
    if (mkdir(path, mode) < 0 && errno != EEXIST) {
        return -errno;
    }
    struct stat st;
    if (stat(path, &st) < 0) {
        return -errno;
    }
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int make_parent_dir(const char *path)
{
    scoped_free char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) {
        return 0;
    }
    *slash = '\0';
    return make_dir(dir, 0755);
}

/* Adds the real path of path (or of its directory, when dir_of) to v; a path that does not
 * exist is kept as written. */
static void forbid(char ***v, size_t *n, const char *path, bool dir_of)
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
    *v = xrealloc(*v, (*n + 1) * sizeof(char *));
    (*v)[(*n)++] = xstrdup(realpath(p, real) ? real : p);
}

static void strv_freep(char ***v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((*v)[i]);
    }
    free(*v);
    *v = NULL;
}

/* token.c: a token reached its expiry (its tasks were told to die). */
static void token_expired(const char *id, size_t killed, void *arg)
{
    struct daemon *d = arg;
    (void)audit_event(d->audit, "token.expire", NULL, "token_id", AUDIT_ID, id, "killed", AUDIT_U64,
                      (uint64_t)killed, NULL);
}

/* Opens the token store under the configured policy: mount roots as real directories, and
 * never the state dir, the sockets' directories or an egress credential file. */
static int tokens_open(struct daemon *d, struct err *e)
{
    const struct config *cfg = d->cfg;
    char **roots = NULL, **forbidden = NULL;
    const char **profiles = xcalloc(cfg->n_egress_profiles + 1, sizeof(char *));
    size_t n_roots = 0, n_forbidden = 0;
    int r = 0;
    for (size_t i = 0; i < cfg->n_token_mount_roots && r == 0; i++) {
        char real[PATH_MAX];
        struct stat st;
        if (!realpath(cfg->token_mount_roots[i], real) || stat(real, &st) < 0) {
            r = err_set(e, -errno, "mount root '%s'", cfg->token_mount_roots[i]);
        } else if (!S_ISDIR(st.st_mode)) {
            r = err_setx(e, -ENOTDIR, "mount root '%s' is not a directory",
                         cfg->token_mount_roots[i]);
        } else {
            roots = xrealloc(roots, (n_roots + 1) * sizeof(char *));
            roots[n_roots++] = xstrdup(real);
        }
    }
    forbid(&forbidden, &n_forbidden, cfg->state_dir, false);
    forbid(&forbidden, &n_forbidden, cfg->socket_path, true);
    forbid(&forbidden, &n_forbidden, cfg->admin_socket_path, true);
    for (size_t i = 0; i < cfg->n_egress_profiles; i++) {
        const struct egress_profile_config *p = &cfg->egress_profiles[i];
        profiles[i] = p->name;
        for (size_t j = 0; j < p->n_routes; j++) {
            if (p->routes[j].credential_file) {
                forbid(&forbidden, &n_forbidden, p->routes[j].credential_file, false);
            }
        }
    }
    if (r == 0) {
        struct token_policy pol = {
            .mount_roots = (const char *const *)roots,
            .n_mount_roots = n_roots,
            .forbidden = (const char *const *)forbidden,
            .n_forbidden = n_forbidden,
            .net_profiles = profiles,
            .n_net_profiles = cfg->n_egress_profiles,
            .max_ttl_ns = cfg->token_max_ttl_ns,
            .default_ttl_ns = cfg->token_default_ttl_ns,
            .max_tokens = cfg->token_max_tokens,
        };
        struct token_hooks hooks = {.kill = task_token_kill, .expired = token_expired, .arg = d};
        r = token_store_open(d->loop, cfg->state_dir, &pol, &hooks, d->scrub, &d->tokens, e);
    }
    if (r == 0) {
        log_info("tokens=%zu mount_roots=%zu msg=\"token store open\"", token_count(d->tokens),
                 n_roots);
    }
    strv_freep(&roots, n_roots);
    strv_freep(&forbidden, n_forbidden);
    free(profiles);
    return r;
}

/* Our threads, the fork servers and the sandboxes inherit the policy (threads, clone, exec).
 * SCHED_BATCH keeps SCHED_OTHER's weights and nice values and takes away only wake-up
 * preemption: the loop wakes several times per task, and under load each wake-up cut the
 * running sandbox's slice short (a context switch each way, dear where page tables are
 * shadowed): 1.03x tasks/s at c=8 in session 16, 1.07x in session 17, c=1 unchanged
 * (docs/BENCHMARKS.md). A policy an operator chose (idle, real-time) stays. */
static void sched_batch(void)
{
    int policy = sched_getscheduler(0);
    if (policy != SCHED_OTHER) {
        log_info("msg=\"scheduling policy kept\" policy=%d", policy);
        return;
    }
    struct sched_param sp = {.sched_priority = 0};
    if (sched_setscheduler(0, SCHED_BATCH, &sp) < 0) {
        log_warn_errno(-errno, "msg=\"cannot switch to SCHED_BATCH, going on\"");
    }
}

/* The cgroup subtree name: the configured name plus a hash of the state dir, so daemons
 * with different state dirs never share a subtree, and a restarted one finds its own. */
static char *subtree_name(const struct config *c)
{
    char real[PATH_MAX];
    const char *s = realpath(c->state_dir, real) ? real : c->state_dir;
    uint32_t h = 2166136261u;
    for (const char *p = s; *p; p++) {
        h = (h ^ (unsigned char)*p) * 16777619u;
    }
    return xasprintf("%s-%08x", c->cgroup_name, h);
}

/* After the loop has ended: frees what main made, the audit trail closed last but for
 * metrics (closing writes what is still queued, daemon.stop included, and feeds the
 * metrics' hook). */
static void free_daemon_parts(struct daemon *d)
{
    d->netns = netns_pool_free(d->netns);
    idslots_free(&d->ids);
    d->cg_root = cgroup_root_free(d->cg_root);
    free(d->pools);
    d->pools = NULL;
    d->images = image_list_free(d->images);
    d->tokens = token_store_free(d->tokens);
    d->egress = egress_free(d->egress);
    d->audit = audit_close(d->audit);
    d->metrics = metrics_free(d->metrics);
    d->rpc = rpc_free(d->rpc);
    d->reaper = reaper_free(d->reaper);
    d->scrub = scrub_free(d->scrub);
    free(d->init_path);
    seccomp_set_free(d->seccomp);
    config_free((struct config *)d->cfg);
}

/* A start-up failure once the loop exists: close what was opened, in the order of the
 * normal exit, so that nothing is left (sockets, cgroup subtree, lock) and nothing leaks.
 * Returns code. */
static int startup_abort(struct daemon *d, int code)
{
    close_servers_and_pools(d);
    uv_close((uv_handle_t *)&d->drain_timer, NULL);
    sched_close(d->sched);
    d->sched = NULL;
    image_cancel_all(d->images);
    audit_shutdown(d->audit);
    if (d->tokens) {
        token_store_shutdown(d->tokens);
    }
    uv_run(d->loop, UV_RUN_DEFAULT);
    d->workq = workq_free(d->workq);
    (void)uv_loop_close(d->loop);
    free_daemon_parts(d);
    return code;
}

/* A refusal to start before the loop exists: frees what start-up made so far, as the normal
 * exit does, so that LeakSanitizer finds nothing on these paths either. A cgroup root that
 * must not be removed (another sbxd's) is the caller's to close first. Returns code. */
static int startup_exit(struct daemon *d, int code)
{
    free_daemon_parts(d);
    return code;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"socket", required_argument, NULL, 's'},
        {"admin-socket", required_argument, NULL, 'a'},
        {"state-dir", required_argument, NULL, 'd'},
        {"metrics", required_argument, NULL, 'm'},
        {"log-level", required_argument, NULL, 'l'},
        {"check-config", no_argument, NULL, 'C'},
        {"require-images", no_argument, NULL, 'R'},
        {"mount-root", required_argument, NULL, 'M'},
        {"image-hash", required_argument, NULL, 'H'},
        {"export-seccomp", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL, *sock = NULL, *admin = NULL, *state = NULL, *metrics = NULL,
               *level = NULL;
    bool check_only = false, require_images = false;
    const char *image_hash = NULL, *export_seccomp = NULL;
    const char *mount_roots[64];
    size_t n_mount_roots = 0;
    int o;
    while ((o = getopt_long(argc, argv, "c:s:a:d:m:l:Ch", opts, NULL)) != -1) {
        switch (o) {
        case 'c':
            config_path = optarg;
            break;
        case 's':
            sock = optarg;
            break;
        case 'a':
            admin = optarg;
            break;
        case 'd':
            state = optarg;
            break;
        case 'm':
            metrics = optarg;
            break;
        case 'l':
            level = optarg;
            break;
        case 'C':
            check_only = true;
            break;
        case 'R':
            require_images = true;
            break;
        case 'M':
            if (n_mount_roots < ARRAY_SIZE(mount_roots)) {
                mount_roots[n_mount_roots] = optarg;
            }
            n_mount_roots++;
            break;
        case 'H':
            image_hash = optarg;
            break;
        case 'S':
            export_seccomp = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 64;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 64;
    }
    if (image_hash) {
        return image_hash_main(image_hash);
    }
    if (export_seccomp) {
        return export_seccomp_main(export_seccomp);
    }

    struct err e = ERR_INIT;
    struct config *cfg = NULL;
    if (config_load(config_path, &cfg, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        return 78;
    }
    if (sock) {
        replace(&cfg->socket_path, sock);
    }
    if (admin) {
        replace(&cfg->admin_socket_path, admin);
    }
    if (state) {
        replace(&cfg->state_dir, state);
    }
    if (metrics) {
        replace(&cfg->metrics_addr, metrics);
    }
    if (n_mount_roots > ARRAY_SIZE(mount_roots)) {
        fprintf(stderr, "sbxd: at most %zu --mount-root\n", ARRAY_SIZE(mount_roots));
        return 64;
    }
    for (size_t i = 0; i < n_mount_roots; i++) {
        if (mount_roots[i][0] != '/') {
            fprintf(stderr, "sbxd: --mount-root '%s' must be an absolute path\n", mount_roots[i]);
            return 64;
        }
        cfg->token_mount_roots =
            xrealloc(cfg->token_mount_roots, (cfg->n_token_mount_roots + 1) * sizeof(char *));
        cfg->token_mount_roots[cfg->n_token_mount_roots++] = xstrdup(mount_roots[i]);
    }
    if (level && log_parse_level(level, &cfg->log_level) < 0) {
        fprintf(stderr, "sbxd: --log-level must be error, warn, info or debug\n");
        return 64;
    }
    if (config_validate(cfg, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        config_free(cfg);
        return 78;
    }
    struct seccomp_set *sc = NULL;
    if (seccomp_set_load(NULL, &sc, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        config_free(cfg);
        return 78;
    }
    for (size_t i = 0; i < cfg->n_pools; i++) {
        const struct sock_filter *insns;
        uint32_t n;
        if (seccomp_set_get(sc, cfg->pools[i].seccomp, &insns, &n) < 0) {
            fprintf(stderr, "sbxd: %s: unknown seccomp profile '%s'\n", cfg->pools[i].file,
                    cfg->pools[i].seccomp);
            seccomp_set_free(sc);
            config_free(cfg);
            return 78;
        }
    }
    if (check_only) {
        struct egress *g = NULL; /* credential files are checked too */
        int gr = egress_new(cfg, NULL, &g, &e);
        g = egress_free(g);
        if (gr < 0) {
            fprintf(stderr, "sbxd: %s\n", err_msg(&e));
            seccomp_set_free(sc);
            config_free(cfg);
            return 78;
        }
        printf("%s: ok (%zu pools)\n", cfg->source, cfg->n_pools);
        seccomp_set_free(sc);
        config_free(cfg);
        return 0;
    }
    log_max_level = cfg->log_level;

    struct daemon dd;
    struct daemon *d = &dd;
    memset(d, 0, sizeof(*d));
    d->cfg = cfg;
    d->seccomp = sc;
    d->start_ns = now_ns();
    if (getrandom(&d->instance, sizeof(d->instance), 0) != sizeof(d->instance)) {
        d->instance = (uint32_t)getpid() ^ (uint32_t)d->start_ns;
    }
    int r = make_dir(cfg->state_dir, 0700);
    if (r < 0) {
        fprintf(stderr, "sbxd: state dir '%s': %s\n", cfg->state_dir, strerror(-r));
        return startup_exit(d, 73);
    }
    /* Before anything else touches the state dir or our cgroup subtree. */
    if (reaper_lock(d, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        return startup_exit(d, 73);
    }
    (void)make_parent_dir(cfg->socket_path);
    (void)make_parent_dir(cfg->admin_socket_path);
    d->init_path = cfg->init_path ? xstrdup(cfg->init_path) : sibling_path("sbxd-init");
    if (!d->init_path || access(d->init_path, X_OK) < 0) {
        fprintf(stderr, "sbxd: sandbox init '%s' is not executable\n",
                d->init_path ? d->init_path : "sbxd-init");
        return startup_exit(d, 72);
    }
    scoped_free char *cgname = subtree_name(cfg);
    unsigned cg_flags = 0;
    for (size_t i = 0; i < cfg->n_pools; i++) {
        if (pool_config_limits_io(&cfg->pools[i])) {
            cg_flags |= CGROUP_ROOT_IO; /* else no io cgroups at all, and no attach to them */
        }
    }
    r = cgroup_root_open_flags((enum cgroup_version)cfg->cgroup_version, cfg->cgroup_parent, cgname,
                               cg_flags, &d->cg_root, &e);
    if (r < 0) {
        fprintf(stderr, "sbxd: cgroups: %s\n", err_msg(&e));
        return startup_exit(d, 71);
    }
    if (cgroup_root_lock(d->cg_root, &e) < 0) {
        fprintf(stderr, "sbxd: cgroups: %s\n", err_msg(&e));
        /* Closed, not freed: freeing removes the subtree's directories, the other's. */
        d->cg_root = cgroup_root_close(d->cg_root);
        return startup_exit(d, 73);
    }
    if (!cgroup_root_has_limits(d->cg_root)) {
        if (cfg->cgroup_require_limits) {
            fprintf(stderr,
                    "sbxd: cgroups: %s cannot enforce memory, cpu and pids limits"
                    " (cgroup.require_limits: false runs without them)\n",
                    cgroup_root_describe(d->cg_root));
            return startup_exit(d, 71); /* the subtree is ours and empty: removed */
        }
        log_warn("msg=\"cgroup limits NOT enforced: sandboxes run without memory, cpu or pids"
                 " limits (cgroup.require_limits: false)\" cgroups=\"%s\"",
                 cgroup_root_describe(d->cg_root));
    }
    if (cfg->sched_batch) {
        sched_batch(); /* before any thread or child */
    }
    /* Network namespaces are recycled (netns.c): enough to cover every pool at its max. */
    uint32_t netns_keep = cfg->refill_parallelism;
    for (size_t i = 0; i < cfg->n_pools; i++) {
        netns_keep += cfg->pools[i].max;
    }
    if (cfg->netns_recycle) {
        (void)netns_pool_new(netns_keep, &d->netns, &e);
    }
    /* What a previous sbxd with this state dir left, before any pool fills. */
    if (reaper_startup(d, &e) < 0) {
        log_error("msg=\"cannot reap our cgroup subtree, going on\" detail=\"%s\"", err_msg(&e));
    }
    signals_block(); /* before the first thread */
    d->loop = uv_default_loop();
    d->loop->data = d;
    /* Worker threads create and remove sandboxes; a few more than the refill bound keep
     * removals from waiting behind creations. They run at SANDBOX_BACKGROUND_NICE, below
     * the loop and the audit writer. (So do the inits they start, until READY; but each
     * sandbox is a cpu cgroup of its own, which competes at its group's weight whatever its
     * threads' nice values: docs/ARCHITECTURE.md.) The rarer blocking jobs (audit queries,
     * image checks, the reaper, token flushes) use libuv's pool. */
    if (workq_new(d->loop, cfg->refill_parallelism + 2, SANDBOX_BACKGROUND_NICE, "sbxd-worker",
                  &d->workq, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        d->cg_root = cgroup_root_free(d->cg_root);
        return 71;
    }
    uv_timer_init(d->loop, &d->drain_timer);
    d->drain_timer.data = d;
    d->scrub = scrub_new();
    if (audit_setup(d, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        d->workq = workq_free(d->workq);
        d->cg_root = cgroup_root_free(d->cg_root);
        return 73;
    }
    /* From here every refusal to start goes through startup_abort, which frees it. */
    if (cfg->userns) {
        idslots_init(&d->ids, cfg->userns_base, cfg->userns_count, cfg->userns_slots);
    }
    if (pools_setup(d, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        return startup_abort(d, 78);
    }
    if (images_setup(d, require_images, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        return startup_abort(d, 78);
    }
    if (daemon_metrics_new(d, &e) < 0) {
        fprintf(stderr, "sbxd: metrics: %s\n", err_msg(&e));
        return startup_abort(d, 70);
    }
    audit_set_batch_hook(d->audit, audit_batch_metrics, d->metrics);
    const struct egress_handles egress_h = {d->loop, d->audit, d->metrics, d->scrub};
    if (egress_new(cfg, &egress_h, &d->egress, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        return startup_abort(d, 78);
    }
    d->tenv.egress = d->egress; /* made after the pools, before any task */
    if (tokens_open(d, &e) < 0) {
        fprintf(stderr, "sbxd: tokens: %s\n", err_msg(&e));
        return startup_abort(d, 78);
    }
    r = servers_setup(d, &e);
    if (r < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        return startup_abort(d, 73);
    }
    if (*cfg->metrics_addr) {
        r = http_server_new(d->loop, cfg->metrics_addr, metrics_http, d->metrics, &d->http, &e);
        if (r < 0) {
            fprintf(stderr, "sbxd: metrics: %s\n", err_msg(&e));
            return startup_abort(d, 73);
        }
        log_info("metrics=%s msg=\"serving /metrics and /healthz\"", cfg->metrics_addr);
    }
    signals_start(d->loop, on_term, d, &d->signals);
    log_info("pid=%d socket=%s admin_socket=%s state_dir=%s pools=%zu cgroup=\"%s\" msg=\"ready\"",
             (int)getpid(), cfg->socket_path, cfg->admin_socket_path, cfg->state_dir, cfg->n_pools,
             cgroup_root_describe(d->cg_root));
    reaper_start(d);
    sched_refill(d->sched);

    uv_run(d->loop, UV_RUN_DEFAULT);
    d->workq = workq_free(d->workq);
    /* The cgroup subtree and the audit trail close while a late signal is still caught
     * (signals_stop), then the signal handles go. */
    free_daemon_parts(d);
    d->signals = signals_close(d->signals);
    uv_run(d->loop, UV_RUN_DEFAULT);

    r = uv_loop_close(d->loop);
    if (r < 0) {
        log_warn("msg=\"loop closed with handles still open\"");
    }
    return d->exit_code;
}
