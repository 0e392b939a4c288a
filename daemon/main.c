/* SPDX-License-Identifier: MIT */
/* main of sbxd: flags over the config, start-up checks (exit() is allowed only here, before
 * the loop), the loop, the refill scheduler across pools, and the drain to exit code 0. */
#define LOG_MOD "main"
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "alloc.h"
#include "cgroup.h"
#include "config.h"
#include "daemon.h"
#include "exec.h"
#include "log.h"
#include "pool.h"
#include "seccomp.h"
#include "server.h"
#include "signals.h"
#include "util.h"

struct pool *daemon_find_pool(struct daemon *d, const char *name)
{
    for (size_t i = 0; i < d->n_pools; i++) {
        if (strcmp(d->pools[i]->pc->name, name) == 0) {
            return d->pools[i];
        }
    }
    return NULL;
}

void daemon_refill(struct daemon *d)
{
    if (d->draining) {
        return;
    }
    uint32_t limit = d->cfg->refill_parallelism;
    /* Pools with waiting tasks first, then the warm targets, one sandbox per pool per
     * round so that no pool starves another. */
    for (int pass = 0; pass < 2 && d->creating < limit; pass++) {
        bool progress = true;
        while (progress && d->creating < limit) {
            progress = false;
            for (size_t i = 0; i < d->n_pools && d->creating < limit; i++) {
                struct pool *p = d->pools[i];
                if (pass == 0 && p->n_queued == 0) {
                    continue;
                }
                if (pool_wanted(p) > 0) {
                    sandbox_create(d, p);
                    progress = true;
                }
            }
        }
    }
}

static void finish_shutdown(struct daemon *d)
{
    uv_timer_stop(&d->drain_timer);
    uv_close((uv_handle_t *)&d->drain_timer, NULL);
    signals_stop(d);
    if (d->agents) {
        server_close(d->agents);
        d->agents = NULL;
    }
    if (d->admin) {
        server_close(d->admin);
        d->admin = NULL;
    }
    for (size_t i = 0; i < d->n_pools; i++) {
        pool_close(d->pools[i]);
    }
    log_info("msg=\"drained, every sandbox removed\"");
}

void daemon_drain_progress(struct daemon *d)
{
    if (!d->draining || d->drain_done) {
        return;
    }
    if (d->running_tasks == 0) {
        /* Nothing left to wait for: warm sandboxes and late creations go too. */
        for (size_t i = 0; i < d->n_pools; i++) {
            pool_drain(d->pools[i]);
        }
    }
    if (d->running_tasks == 0 && d->live_sandboxes == 0) {
        d->drain_done = true;
        finish_shutdown(d);
    }
}

static void drain_timeout(uv_timer_t *h)
{
    struct daemon *d = h->data;
    log_warn("running=%u msg=\"drain grace over, killing the remaining tasks\"",
             d->running_tasks);
    d->killing = true;
    if (d->agents) {
        server_kill_tasks(d->agents, KILL_SHUTDOWN);
    }
    if (d->admin) {
        server_kill_tasks(d->admin, KILL_SHUTDOWN);
    }
}

void daemon_shutdown(struct daemon *d)
{
    if (d->draining) {
        if (!d->killing) {
            uv_timer_stop(&d->drain_timer);
            drain_timeout(&d->drain_timer);
        }
        return;
    }
    d->draining = true;
    if (d->agents) {
        server_stop_listening(d->agents);
    }
    if (d->admin) {
        server_stop_listening(d->admin);
    }
    for (size_t i = 0; i < d->n_pools; i++) {
        pool_drain(d->pools[i]);
    }
    uv_timer_start(&d->drain_timer, drain_timeout, d->cfg->drain_grace_ns / 1000000, 0);
    daemon_drain_progress(d);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sbxd [--config FILE] [--socket PATH] [--admin-socket PATH]\n"
            "            [--state-dir DIR] [--metrics ADDR:PORT] [--log-level LEVEL]\n"
            "            [--check-config]\n"
            "Runs tasks in fresh sandboxes from warm pools. With no --config, the embedded\n"
            "default (deploy/sbxd.yaml and pools/*.yaml) is used.\n");
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
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL, *sock = NULL, *admin = NULL, *state = NULL, *metrics = NULL,
               *level = NULL;
    bool check_only = false;
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
    if (level && log_parse_level(level, &cfg->log_level) < 0) {
        fprintf(stderr, "sbxd: --log-level must be error, warn, info or debug\n");
        return 64;
    }
    if (config_validate(cfg, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        return 78;
    }
    struct seccomp_set *sc = NULL;
    if (seccomp_set_load(NULL, &sc, &e) < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        return 78;
    }
    for (size_t i = 0; i < cfg->n_pools; i++) {
        const struct sock_filter *insns;
        uint32_t n;
        if (seccomp_set_get(sc, cfg->pools[i].seccomp, &insns, &n) < 0) {
            fprintf(stderr, "sbxd: %s: unknown seccomp profile '%s'\n", cfg->pools[i].file,
                    cfg->pools[i].seccomp);
            return 78;
        }
    }
    if (check_only) {
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
        return 73;
    }
    (void)make_parent_dir(cfg->socket_path);
    (void)make_parent_dir(cfg->admin_socket_path);
    d->init_path = cfg->init_path ? xstrdup(cfg->init_path) : sibling_path("sbxd-init");
    if (!d->init_path || access(d->init_path, X_OK) < 0) {
        fprintf(stderr, "sbxd: sandbox init '%s' is not executable\n",
                d->init_path ? d->init_path : "sbxd-init");
        return 72;
    }
    scoped_free char *cgname = subtree_name(cfg);
    r = cgroup_root_open((enum cgroup_version)cfg->cgroup_version, cfg->cgroup_parent, cgname,
                         &d->cg_root, &e);
    if (r < 0) {
        fprintf(stderr, "sbxd: cgroups: %s\n", err_msg(&e));
        return 71;
    }
    if (!cgroup_root_has_limits(d->cg_root)) {
        fprintf(stderr, "sbxd: cgroups: %s cannot enforce memory, cpu and pids limits\n",
                cgroup_root_describe(d->cg_root));
        cgroup_root_free(d->cg_root);
        return 71;
    }
    /* Worker threads create and remove sandboxes; a few more than the refill bound keep
     * removals from waiting behind creations. */
    char nthreads[16];
    (void)snprintf(nthreads, sizeof(nthreads), "%u", cfg->refill_parallelism + 2);
    setenv("UV_THREADPOOL_SIZE", nthreads, 1);

    d->loop = uv_default_loop();
    d->loop->data = d;
    uv_timer_init(d->loop, &d->drain_timer);
    d->drain_timer.data = d;
    d->pools = xcalloc(cfg->n_pools, sizeof(*d->pools));
    for (size_t i = 0; i < cfg->n_pools; i++) {
        (void)pool_new(d, &cfg->pools[i], &d->pools[i], &e);
        (void)seccomp_set_get(sc, cfg->pools[i].seccomp, &d->pools[i]->bpf, &d->pools[i]->bpf_n);
        d->n_pools++;
    }
    r = server_new(d, SERVER_AGENTS, cfg->socket_path, 0660, &d->agents, &e);
    if (r == 0) {
        r = server_new(d, SERVER_ADMIN, cfg->admin_socket_path, 0600, &d->admin, &e);
    }
    if (r < 0) {
        fprintf(stderr, "sbxd: %s\n", err_msg(&e));
        return 73;
    }
    signals_start(d);
    log_info("pid=%d socket=%s admin_socket=%s state_dir=%s pools=%zu cgroup=\"%s\" msg=\"ready\"",
             (int)getpid(), cfg->socket_path, cfg->admin_socket_path, cfg->state_dir,
             cfg->n_pools, cgroup_root_describe(d->cg_root));
    daemon_refill(d);

    uv_run(d->loop, UV_RUN_DEFAULT);

    r = uv_loop_close(d->loop);
    if (r < 0) {
        log_warn("msg=\"loop closed with handles still open\"");
    }
    d->cg_root = cgroup_root_free(d->cg_root);
    for (size_t i = 0; i < d->n_pools; i++) {
        d->pools[i] = NULL;
    }
    free(d->pools);
    free(d->init_path);
    seccomp_set_free(sc);
    config_free(cfg);
    return d->exit_code;
}
