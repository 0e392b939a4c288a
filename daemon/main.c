/* SPDX-License-Identifier: MIT */
/* main of sbxd: the command line, and sbxd's start-up as a table of steps (daemon.c runs it
 * and owns the drain and the way out). The steps here are the ones that wire no callback:
 * the config, the state dir and its lock, the cgroup subtree, the loop and its threads.
 * Nothing calls exit(): every failure unwinds through daemon_exit. */
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

#include "config/config.h"
#include "core/sched.h"
#include "daemon.h"
#include "egress/egress.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/scrub.h"
#include "lib/strv.h"
#include "lib/util.h"
#include "lib/workq.h"
#include "metrics/http.h"
#include "metrics/metrics.h"
#include "reaper.h"
#include "sandbox/cgroup.h"
#include "sandbox/image.h"
#include "sandbox/netns.h"
#include "sandbox/sandbox.h"
#include "sandbox/seccomp.h"
#include "signals.h"
#include "wire/version.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: sbxd [--config FILE] [--socket PATH] [--admin-socket PATH]\n"
               "            [--state-dir DIR] [--metrics ADDR:PORT] [--log-level LEVEL]\n"
               "            [--check-config] [--require-images] [--image-hash DIR]\n"
               "            [--mount-root DIR]... [--export-seccomp PROFILE] [--version]\n"
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

/* Where the option o's argument goes, for the options that take a string; else NULL. */
static const char **flag_value(struct sbxd_flags *f, int o)
{
    switch (o) {
    case 'c':
        return &f->config_path;
    case 's':
        return &f->socket;
    case 'a':
        return &f->admin_socket;
    case 'd':
        return &f->state_dir;
    case 'm':
        return &f->metrics;
    case 'l':
        return &f->log_level;
    case 'H':
        return &f->image_hash;
    case 'S':
        return &f->export_seccomp;
    default:
        return NULL;
    }
}

/* Reads the command line into f. Returns -1 to start the daemon, or the exit code of what
 * was done instead: --help, --version, a usage error (64), --image-hash, --export-seccomp. */
static int flags_parse(int argc, char **argv, struct sbxd_flags *f)
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
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "c:s:a:d:m:l:Ch", opts, NULL)) != -1) {
        const char **value = flag_value(f, o);
        if (value) {
            *value = optarg;
        } else if (o == 'C') {
            f->check_only = true;
        } else if (o == 'R') {
            f->require_images = true;
        } else if (o == 'M') {
            if (f->n_mount_roots < ARRAY_SIZE(f->mount_roots)) {
                f->mount_roots[f->n_mount_roots] = optarg;
            }
            f->n_mount_roots++;
        } else if (o == 'h') {
            usage(stdout);
            return 0;
        } else if (o == 'V') {
            printf("sbxd %s\n", SBX_VERSION);
            return 0;
        } else {
            usage(stderr);
            return 64;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 64;
    }
    if (f->image_hash) {
        return image_hash_main(f->image_hash);
    }
    if (f->export_seccomp) {
        return export_seccomp_main(f->export_seccomp);
    }
    return -1;
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

/* Makes path's directory when missing: mode 0755, or 0750 and group gid when has_group
 * (the agents' runtime dir, e.g. /run/sbx). A directory that exists is left as it is. */
static int make_parent_dir(const char *path, bool has_group, gid_t gid)
{
    scoped_free char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) {
        return 0;
    }
    *slash = '\0';
    if (!has_group) {
        return make_dir(dir, 0755);
    }
    if (mkdir(dir, 0700) < 0) {
        return errno == EEXIST ? make_dir(dir, 0755) : -errno;
    }
    /* Made 0700 and opened up once its group is set: never wider for a moment. */
    if (chown(dir, (uid_t)-1, gid) < 0 || chmod(dir, 0750) < 0) {
        return -errno;
    }
    return 0;
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

static int load_config(struct daemon *d, struct err *e)
{
    struct config *cfg = NULL;
    int r = config_load(d->flags->config_path, &cfg, e);
    d->cfg = cfg;
    return r;
}

static void replace(char **field, const char *value)
{
    if (value) {
        free(*field);
        *field = xstrdup(value);
    }
}

/* --mount-root DIR...: absolute paths, after the file's own roots. */
static int add_mount_roots(struct config *cfg, const struct sbxd_flags *f, struct err *e)
{
    if (f->n_mount_roots > ARRAY_SIZE(f->mount_roots)) {
        return err_setx(e, -E2BIG, "at most %zu --mount-root", ARRAY_SIZE(f->mount_roots));
    }
    for (size_t i = 0; i < f->n_mount_roots; i++) {
        if (f->mount_roots[i][0] != '/') {
            return err_setx(e, -EINVAL, "--mount-root '%s' must be an absolute path",
                            f->mount_roots[i]);
        }
    }
    if (f->n_mount_roots == 0) {
        return 0;
    }
    scoped_strv struct strv roots = STRV_INIT; /* takes the file's strings */
    for (size_t i = 0; i < cfg->n_token_mount_roots; i++) {
        strv_push_owned(&roots, cfg->token_mount_roots[i]);
    }
    free(cfg->token_mount_roots);
    for (size_t i = 0; i < f->n_mount_roots; i++) {
        strv_push(&roots, f->mount_roots[i]);
    }
    cfg->token_mount_roots = strv_steal(&roots, &cfg->n_token_mount_roots);
    return 0;
}

/* The command line over the file: start-up alone writes the config, and only here, before
 * it is validated. */
static int apply_flags(struct daemon *d, struct err *e)
{
    const struct sbxd_flags *f = d->flags;
    struct config *cfg = (struct config *)d->cfg;
    replace(&cfg->socket_path, f->socket);
    replace(&cfg->admin_socket_path, f->admin_socket);
    replace(&cfg->state_dir, f->state_dir);
    replace(&cfg->metrics_addr, f->metrics);
    int r = add_mount_roots(cfg, f, e);
    if (r < 0) {
        return r;
    }
    if (f->log_level && log_parse_level(f->log_level, &cfg->log_level) < 0) {
        return err_setx(e, -EINVAL, "--log-level must be error, warn, info or debug");
    }
    return 0;
}

static int validate_config(struct daemon *d, struct err *e)
{
    return config_validate(d->cfg, e);
}

/* The seccomp profiles, and every pool's among them. */
static int load_seccomp(struct daemon *d, struct err *e)
{
    const struct config *cfg = d->cfg;
    int r = seccomp_set_load(NULL, &d->seccomp, e);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < cfg->n_pools; i++) {
        const struct sock_filter *insns;
        uint32_t n;
        if (seccomp_set_get(d->seccomp, cfg->pools[i].seccomp, &insns, &n) < 0) {
            return err_setx(e, -ENOENT, "%s: unknown seccomp profile '%s'", cfg->pools[i].file,
                            cfg->pools[i].seccomp);
        }
    }
    return 0;
}

/* --check-config ends here, once the egress credential files are read too. */
static int check_config(struct daemon *d, struct err *e)
{
    if (!d->flags->check_only) {
        return 0;
    }
    struct egress *g = NULL;
    int r = egress_new(d->cfg, NULL, &g, e);
    g = egress_free(g);
    if (r < 0) {
        return r;
    }
    printf("%s: ok (%zu pools)\n", d->cfg->source, d->cfg->n_pools);
    return DAEMON_STEP_EXIT;
}

/* The log level, and the id that prefixes this run's sandboxes and tasks. */
static int set_instance(struct daemon *d, struct err *e)
{
    (void)e;
    log_max_level = d->cfg->log_level;
    d->start_ns = clock_now_ns();
    if (getrandom(&d->instance, sizeof(d->instance), 0) != sizeof(d->instance)) {
        d->instance = (uint32_t)getpid() ^ (uint32_t)d->start_ns;
    }
    return 0;
}

static int make_state_dir(struct daemon *d, struct err *e)
{
    int r = make_dir(d->cfg->state_dir, 0700);
    if (r < 0) {
        return err_setx(e, r, "state dir '%s': %s", d->cfg->state_dir, strerror(-r));
    }
    return 0;
}

/* Before anything else touches the state dir or our cgroup subtree. */
static int lock_state_dir(struct daemon *d, struct err *e)
{
    return reaper_lock(d, e);
}

static int find_init(struct daemon *d, struct err *e)
{
    const struct config *cfg = d->cfg;
    struct config_socket_access sa;
    int r = config_socket_access(cfg, &sa, e);
    if (r < 0) {
        return r;
    }
    (void)make_parent_dir(cfg->socket_path, sa.has_group, sa.gid);
    (void)make_parent_dir(cfg->admin_socket_path, false, 0);
    d->init_path = cfg->init_path ? xstrdup(cfg->init_path) : sibling_path("sbxd-init");
    if (!d->init_path || access(d->init_path, X_OK) < 0) {
        return err_setx(e, -ENOENT, "sandbox init '%s' is not executable",
                        d->init_path ? d->init_path : "sbxd-init");
    }
    return 0;
}

static int open_cgroups(struct daemon *d, struct err *e)
{
    const struct config *cfg = d->cfg;
    scoped_free char *cgname = subtree_name(cfg);
    unsigned flags = 0;
    for (size_t i = 0; i < cfg->n_pools; i++) {
        if (pool_config_limits_io(&cfg->pools[i])) {
            flags |= CGROUP_ROOT_IO; /* else no io cgroups at all, and no attach to them */
        }
    }
    int r = cgroup_root_open_flags((enum cgroup_version)cfg->cgroup_version, cfg->cgroup_parent,
                                   cgname, flags, &d->cg_root, e);
    return r < 0 ? err_prefix(e, r, "cgroups") : 0;
}

static int lock_cgroups(struct daemon *d, struct err *e)
{
    int r = cgroup_root_lock(d->cg_root, e);
    if (r < 0) {
        /* Closed, not freed: freeing removes the subtree's directories, the other's. */
        d->cg_root = cgroup_root_close(d->cg_root);
        return err_prefix(e, r, "cgroups");
    }
    return 0;
}

/* A refusal leaves the subtree to daemon_exit: it is ours and empty, and removed. */
static int check_cgroup_limits(struct daemon *d, struct err *e)
{
    if (cgroup_root_has_limits(d->cg_root)) {
        return 0;
    }
    if (d->cfg->cgroup_require_limits) {
        return err_setx(e, -EOPNOTSUPP,
                        "cgroups: %s cannot enforce memory, cpu and pids limits"
                        " (cgroup.require_limits: false runs without them)",
                        cgroup_root_describe(d->cg_root));
    }
    log_warn("msg=\"cgroup limits NOT enforced: sandboxes run without memory, cpu or pids"
             " limits (cgroup.require_limits: false)\" cgroups=\"%s\"",
             cgroup_root_describe(d->cg_root));
    return 0;
}

/* Before any thread or child: ours, the fork servers and the sandboxes inherit the policy
 * (threads, clone, exec). SCHED_BATCH keeps SCHED_OTHER's weights and nice values and takes
 * away only wake-up preemption: the loop wakes several times per task, and under load each
 * wake-up cut the running sandbox's slice short (a context switch each way, dear where page
 * tables are shadowed). What that is worth: docs/BENCHMARKS.md, "SCHED_BATCH". A policy an
 * operator chose (idle, real-time) stays. */
static int sched_batch(struct daemon *d, struct err *e)
{
    (void)e;
    if (!d->cfg->sched_batch) {
        return 0;
    }
    int policy = sched_getscheduler(0);
    if (policy != SCHED_OTHER) {
        log_info("msg=\"scheduling policy kept\" policy=%d", policy);
        return 0;
    }
    struct sched_param sp = {.sched_priority = 0};
    if (sched_setscheduler(0, SCHED_BATCH, &sp) < 0) {
        log_warn_errno(-errno, "msg=\"cannot switch to SCHED_BATCH, going on\"");
    }
    return 0;
}

/* Network namespaces are recycled (netns.c): enough to cover every pool at its max. Without
 * the pool, each sandbox makes its own. */
static int recycle_netns(struct daemon *d, struct err *e)
{
    const struct config *cfg = d->cfg;
    uint32_t keep = cfg->refill_parallelism;
    for (size_t i = 0; i < cfg->n_pools; i++) {
        keep += cfg->pools[i].max;
    }
    if (cfg->netns_recycle) {
        (void)netns_pool_new(keep, &d->netns, e);
    }
    return 0;
}

/* What a previous sbxd with this state dir left, before any pool fills. */
static int reap_leftovers(struct daemon *d, struct err *e)
{
    if (reaper_startup(d, e) < 0) {
        log_error("msg=\"cannot reap our cgroup subtree, going on\" detail=\"%s\"", err_msg(e));
    }
    return 0;
}

static int open_loop(struct daemon *d, struct err *e)
{
    (void)e;
    signals_block(); /* before the first thread */
    d->loop = uv_default_loop();
    return 0;
}

/* Worker threads create and remove sandboxes; a few more than the refill bound keep
 * removals from waiting behind creations. They run at SANDBOX_BACKGROUND_NICE, below the
 * loop and the audit writer. (So do the inits they start, until READY; but each sandbox is
 * a cpu cgroup of its own, which competes at its group's weight whatever its threads' nice
 * values: docs/ARCHITECTURE.md.) The rarer blocking jobs (audit queries, image checks, the
 * reaper, token flushes) use libuv's pool. */
static int start_workers(struct daemon *d, struct err *e)
{
    return workq_new(d->loop, d->cfg->refill_parallelism + 2, SANDBOX_BACKGROUND_NICE,
                     "sbxd-worker", &d->workq, e);
}

static int make_scrub(struct daemon *d, struct err *e)
{
    (void)e;
    d->scrub = scrub_new();
    return 0;
}

static int make_id_blocks(struct daemon *d, struct err *e)
{
    (void)e;
    const struct config *cfg = d->cfg;
    if (cfg->userns) {
        idslot_init(&d->ids, cfg->userns_base, cfg->userns_count, cfg->userns_slots);
    }
    return 0;
}

/* Egress profiles and credentials: made after the pools, before any task. */
static int open_egress(struct daemon *d, struct err *e)
{
    const struct egress_handles h = {d->loop, d->audit, d->metrics, d->scrub};
    int r = egress_new(d->cfg, &h, &d->egress, e);
    d->tenv.egress = d->egress;
    return r;
}

static int serve_metrics(struct daemon *d, struct err *e)
{
    const char *addr = d->cfg->metrics_addr;
    if (!*addr) {
        return 0;
    }
    int r = http_server_new(d->loop, addr, metrics_http, d->metrics, &d->http, e);
    if (r < 0) {
        return err_prefix(e, r, "metrics");
    }
    log_info("metrics=%s msg=\"serving /metrics and /healthz\"", addr);
    return 0;
}

static void stop_serving_metrics(struct daemon *d)
{
    if (d->http) {
        http_server_close(d->http);
        d->http = NULL;
    }
}

static int log_ready(struct daemon *d, struct err *e)
{
    (void)e;
    const struct config *cfg = d->cfg;
    log_info("pid=%d socket=%s admin_socket=%s state_dir=%s pools=%zu cgroup=\"%s\" msg=\"ready\"",
             (int)getpid(), cfg->socket_path, cfg->admin_socket_path, cfg->state_dir, cfg->n_pools,
             cgroup_root_describe(d->cg_root));
    return 0;
}

static int start_sweeps(struct daemon *d, struct err *e)
{
    (void)e;
    reaper_start(d);
    return 0;
}

static void stop_sweeps(struct daemon *d)
{
    reaper_stop(d);
}

static int first_refill(struct daemon *d, struct err *e)
{
    (void)e;
    sched_refill(d->sched);
    return 0;
}

/* sbxd's start-up, in order. The way out (daemon_exit) is the same from any step: the
 * begun steps' stops in reverse (at the drain's end, or at once after a failure), the loop
 * until what they closed is closed, the workers joined, every part freed (audit trail last
 * but for metrics, the cgroup subtree removed while a late signal is still caught), then
 * the signal handles and the loop. */
static const struct daemon_step steps[] = {
    /* The config: nothing is touched before it is whole and valid. */
    {"config", load_config, NULL, 78},
    {"flags over the config", apply_flags, NULL, 64},
    {"valid config", validate_config, NULL, 78},
    {"seccomp profiles", load_seccomp, NULL, 78},
    {"--check-config", check_config, NULL, 78},
    /* The state dir and the cgroup subtree: ours alone, then cleared of a previous run. */
    {"instance", set_instance, NULL, 0},
    {"state dir", make_state_dir, NULL, 73},
    {"state dir lock", lock_state_dir, NULL, 73},
    {"sbxd-init", find_init, NULL, 72},
    {"cgroup subtree", open_cgroups, NULL, 71},
    {"cgroup subtree lock", lock_cgroups, NULL, 73},
    {"cgroup limits", check_cgroup_limits, NULL, 71},
    {"SCHED_BATCH", sched_batch, NULL, 0},
    {"netns pool", recycle_netns, NULL, 0},
    {"leftovers reaped", reap_leftovers, NULL, 0},
    /* The loop and the parts of the daemon. */
    {"loop", open_loop, NULL, 0},
    {"worker threads", start_workers, NULL, 71},
    {"drain timer", daemon_drain_timer_start, daemon_drain_timer_stop, 0},
    {"scrub", make_scrub, NULL, 0},
    {"audit trail", daemon_audit_start, daemon_audit_stop, 73},
    {"host id blocks", make_id_blocks, NULL, 0},
    {"pools", daemon_pools_start, daemon_pools_stop, 78},
    {"images", daemon_images_start, daemon_images_stop, 78},
    {"metrics", daemon_metrics_start, NULL, 70},
    {"egress", open_egress, NULL, 78},
    {"tokens", daemon_tokens_start, daemon_tokens_stop, 78},
    {"sockets", daemon_servers_start, daemon_servers_stop, 73},
    {"metrics http", serve_metrics, stop_serving_metrics, 73},
    /* Open for business. */
    {"signals", daemon_signals_start, daemon_signals_stop, 0},
    {"ready", log_ready, NULL, 0},
    {"reaper sweeps", start_sweeps, stop_sweeps, 0},
    {"first refill", first_refill, NULL, 0},
};

int main(int argc, char **argv)
{
    struct sbxd_flags flags = {0};
    int code = flags_parse(argc, argv, &flags);
    if (code >= 0) {
        return code;
    }
    struct daemon d = {.flags = &flags};
    code = daemon_start(&d, steps, ARRAY_SIZE(steps));
    if (code < 0) {
        uv_run(d.loop, UV_RUN_DEFAULT); /* until the drain is done */
        code = 0;
    }
    return daemon_exit(&d, code);
}
