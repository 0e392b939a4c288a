/* SPDX-License-Identifier: MIT */
/* sbxd's metrics: the families and series (made at start-up for every pool and known label
 * value) on registry.c, the hooks that update them, the scrape-time collect and the HTTP
 * handler. The hot path only updates numbers in place; it never looks up, allocates, formats
 * or does I/O. This file reads no struct of the daemon's: hooks take values, and the state
 * mirrored at scrape time comes from the source main.c sets. */
#define LOG_MOD "metrics"
#include "metrics/metrics.h"

#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/util.h"
#include "metrics/http.h"
#include "wire/version.h"

/* Every status a task can end with (docs/PROTOCOL.md, docs/AUDIT.md). Only "error" is
 * sbx's own failure, and only some of its causes are: the alerts read the causes. */
static const char *const task_statuses[] = {"exited",        "signaled",  "timeout",
                                            "output_limit",  "oom",       "token_expired",
                                            "token_revoked", "cancelled", "error"};
#define N_STATUSES ARRAY_SIZE(task_statuses)
#define STATUS_ERROR (N_STATUSES - 1)
/* Why a task ended in "error" (metrics.h, struct metrics_task_result). */
static const char *const error_causes[] = {"exec",  "cwd",        "files",   "mounts",
                                           "setup", "no_sandbox", "shutdown"};
#define N_CAUSES ARRAY_SIZE(error_causes)
/* Why a request was refused by policy (metrics.h, metrics_denied). */
static const char *const denial_reasons[] = {
    "token_required", "token_malformed",  "token_unknown", "token_revoked",    "token_expired",
    "token_used_up",  "pool_not_allowed", "grant_failed",  "issue_not_allowed"};
#define N_REASONS ARRAY_SIZE(denial_reasons)

/* Error kinds rpc.c and server.c report today; others are created on first sight. */
static const char *const rpc_error_kinds[] = {
    "malformed", "too_large", "limit", "busy", "bad_request", "unknown_pool", "unknown_method"};
/* Methods of the method tables today; methods added later are created on first sight. */
static const char *const rpc_methods[] = {"ping", "pools", "exec", "unknown"};
static const char *const proxy_outcomes[] = {"allowed", "denied", "limit", "error"};
/* Where audit events were only counted: refusals over a connection's or peer's budget,
 * proxy denials over a task's, refusals while the trail was behind. */
static const char *const suppressed_sources[] = {"rpc", "egress", "backlog"};
/* How a session ended (docs/PROTOCOL.md, "Sessions"; abandoned is only the trail's). */
static const char *const session_reasons[] = {"closed",        "ttl",      "idle", "token_expired",
                                              "token_revoked", "shutdown", "error"};
#define N_SESSION_REASONS ARRAY_SIZE(session_reasons)

/* Request to sandbox in hand, and request to task running: sub-millisecond when warm. */
static const double latency_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                         0.1,    0.25,  0.5,    1,     2.5,  5,     10};
/* Task run time: from a /bin/true to the longest timeouts. */
static const double duration_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                          2.5,   5,    10,    30,   60,  120,  300};
/* Sandbox creation: tens of milliseconds when healthy, seconds when the host is loaded. */
static const double create_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                        0.5,   1,    2.5,   5,    10,  30};
/* A session's life: an agent's quick look to the longest session_max_ttl. */
static const double session_buckets[] = {1, 10, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 86400};
/* Commands per session. */
static const double commands_buckets[] = {0, 1, 2, 5, 10, 25, 50, 100, 250, 1000};
static const double audit_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                       0.025,  0.05,    0.1,    0.25,  0.5,    1,     5};

struct metrics_pool {
    struct metric_series *tasks[N_STATUSES];
    struct metric_series *errors[N_CAUSES];
    struct metric_series *duration;
    struct metric_series *queue_wait;
    struct metric_series *start;
    struct metric_series *out_stdout;
    struct metric_series *out_stderr;
    struct metric_series *truncated;
    struct metric_series *denials;
    struct metric_series *warm;
    struct metric_series *target;
    struct metric_series *creating;
    struct metric_series *running;
    struct metric_series *queued;
    struct metric_series *max;
    struct metric_series *create_seconds;
    struct metric_series *create_failures;
    struct metric_series *cold_starts;
    struct metric_series *fs_up;
    struct metric_series *fs_spawned;
    struct metric_series *fs_failures;
    struct metric_series *files_in;
    struct metric_series *files_out;
    struct metric_series *sessions_open;
    struct metric_series *sessions[N_SESSION_REASONS];
    struct metric_series *session_lifetime;
    struct metric_series *session_commands;
};

struct metrics {
    struct metric_registry *reg;
    struct metrics_pool *pools;
    size_t n_pools;
    struct metrics_source src;
    void *src_arg;
    struct metrics_pool_values *values; /* n_pools entries, filled by src.collect */
    struct metric_family *f_rpc_requests;
    struct metric_family *f_rpc_errors;
    struct metric_series *denied[N_REASONS];
    struct metric_family *f_proxy;
    struct metric_family *f_audit_suppressed;
    struct metric_series *audit_suppressed[ARRAY_SIZE(suppressed_sources)];
    struct metric_series *rpc_connections;
    struct metric_series *tokens_active;
    struct metric_series *leaks;
    struct metric_series *audit_batch;
    struct metric_series *audit_queue;
    struct metric_series *p_rss;
    struct metric_series *p_vsize;
    struct metric_series *p_cpu;
    struct metric_series *p_fds;
    struct metric_series *p_max_fds;
    struct metric_series *p_start;
    double start_time;
};

/* One family definition of sbxd. */
struct family_def {
    struct metric_family **slot;
    enum metric_type type;
    const char *name;
    const char *help;
    const char *labels[2];
    size_t n_labels;
    const double *buckets;
    size_t n_buckets;
};

#define HIST(b) (b), ARRAY_SIZE(b)

/* Seconds since the epoch at which this process started: /proc/self/stat's start time (clock
 * ticks after boot) plus /proc/stat's btime; the current time when either is unreadable. */
static double process_start_time(void)
{
    char stat[1024];
    double now = (double)time(NULL);
    ssize_t n = file_read_small(AT_FDCWD, "/proc/self/stat", stat, sizeof(stat));
    const char *rp = n > 0 ? strrchr(stat, ')') : NULL;
    if (!rp) {
        return now;
    }
    /* After "pid (comm)": field 3 is the state; the start time is field 22. */
    unsigned long long ticks = 0;
    const char *p = rp + 1;
    for (int field = 3; field <= 22 && p; field++) {
        p = strchr(p, ' ');
        if (p) {
            p++;
            if (field == 22) {
                ticks = strtoull(p, NULL, 10);
            }
        }
    }
    FILE *f = fopen("/proc/stat", "re");
    if (!f || ticks == 0) {
        if (f) {
            fclose(f);
        }
        return now;
    }
    char line[256];
    unsigned long long btime = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "btime ", 6) == 0) {
            btime = strtoull(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (btime == 0 || hz <= 0) {
        return now;
    }
    return (double)btime + (double)ticks / (double)hz;
}

static void collect_process(struct metrics *m)
{
    char statm[128];
    long page = sysconf(_SC_PAGESIZE);
    if (file_read_small(AT_FDCWD, "/proc/self/statm", statm, sizeof(statm)) > 0) {
        unsigned long long size = 0, resident = 0;
        if (sscanf(statm, "%llu %llu", &size, &resident) == 2) {
            registry_set(m->p_vsize, (double)size * (double)page);
            registry_set(m->p_rss, (double)resident * (double)page);
        }
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
        registry_set(m->p_cpu, cpu);
    }
    DIR *dir = opendir("/proc/self/fd");
    if (dir) {
        uint64_t n = 0;
        struct dirent *de;
        while ((de = readdir(dir))) {
            if (de->d_name[0] != '.') {
                n++;
            }
        }
        closedir(dir);
        registry_set(m->p_fds, (double)(n > 0 ? n - 1 : 0)); /* not the directory's own fd */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        registry_set(m->p_max_fds, rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
    }
}

/* The families whose series metrics_new makes and keeps (the label-open ones are in struct
 * metrics). */
struct families {
    struct metric_family *tasks;
    struct metric_family *errors;
    struct metric_family *denied;
    struct metric_family *duration;
    struct metric_family *queue_wait;
    struct metric_family *start;
    struct metric_family *out;
    struct metric_family *trunc;
    struct metric_family *denials;
    struct metric_family *warm;
    struct metric_family *target;
    struct metric_family *creating;
    struct metric_family *running;
    struct metric_family *queued;
    struct metric_family *max;
    struct metric_family *create;
    struct metric_family *create_fail;
    struct metric_family *cold;
    struct metric_family *fs_up;
    struct metric_family *fs_spawned;
    struct metric_family *fs_failures;
    struct metric_family *files_in;
    struct metric_family *files_out;
    struct metric_family *sessions_open;
    struct metric_family *sessions;
    struct metric_family *session_lifetime;
    struct metric_family *session_commands;
    struct metric_family *leaks;
    struct metric_family *conns;
    struct metric_family *tokens;
    struct metric_family *audit_batch;
    struct metric_family *audit_queue;
    struct metric_family *rss;
    struct metric_family *vsize;
    struct metric_family *cpu;
    struct metric_family *fds;
    struct metric_family *max_fds;
    struct metric_family *start_time;
    struct metric_family *build;
};

static void collect(void *ud)
{
    struct metrics *m = ud;
    struct metrics_values v = {m->values, m->n_pools, 0};
    memset(m->values, 0, m->n_pools * sizeof(*m->values));
    if (m->src.collect) {
        m->src.collect(m->src_arg, &v);
    }
    for (size_t i = 0; i < m->n_pools; i++) {
        struct metrics_pool *ps = &m->pools[i];
        const struct metrics_pool_values *pv = &m->values[i];
        registry_set(ps->warm, pv->warm);
        registry_set(ps->target, pv->target);
        registry_set(ps->creating, pv->creating);
        registry_set(ps->running, pv->running);
        registry_set(ps->queued, pv->queued);
        registry_set(ps->max, pv->max);
        registry_set(ps->create_failures, (double)pv->create_failures);
        registry_set(ps->cold_starts, (double)pv->cold_starts);
        registry_set(ps->fs_up, pv->fork_server_up ? 1 : 0);
        registry_set(ps->fs_spawned, (double)pv->fork_server_spawned);
        registry_set(ps->fs_failures, (double)pv->fork_server_failures);
        registry_set(ps->sessions_open, pv->sessions_open);
    }
    registry_set(m->rpc_connections, v.rpc_connections);
    collect_process(m);
}

/* Registers every family of sbxd, in exposition order. */
static int families_new(struct metrics *m, struct families *f, struct err *e)
{
    /* clang-format off */
    /* One family per entry reads better than one field per line. */
    const struct family_def defs[] = {
        {&f->tasks, METRIC_COUNTER, "sbx_tasks_total", "Tasks finished, by pool and status.",
         {"pool", "status"}, 2, NULL, 0},
        {&f->errors, METRIC_COUNTER, "sbx_task_errors_total",
         "Tasks finished in status error, by pool and cause (exec, cwd, files: the request's; "
         "mounts, setup, no_sandbox: sbx's; shutdown: the drain's).", {"pool", "cause"}, 2,
         NULL, 0},
        {&f->duration, METRIC_HISTOGRAM, "sbx_task_duration_seconds",
         "Task run time, from the task being handed its sandbox to its exit or kill.",
         {"pool"}, 1, HIST(duration_buckets)},
        {&f->queue_wait, METRIC_HISTOGRAM, "sbx_task_queue_wait_seconds",
         "From the exec request to the task having a warm sandbox.", {"pool"}, 1,
         HIST(latency_buckets)},
        {&f->start, METRIC_HISTOGRAM, "sbx_task_start_seconds",
         "From the exec request to the sandbox's init reporting the task process forked.",
         {"pool"}, 1, HIST(latency_buckets)},
        {&f->out, METRIC_COUNTER, "sbx_output_bytes_total",
         "Task output bytes delivered to clients, by stream.", {"pool", "stream"}, 2, NULL, 0},
        {&f->trunc, METRIC_COUNTER, "sbx_output_truncated_total",
         "Tasks killed because their output reached the pool's cap.", {"pool"}, 1, NULL, 0},
        {&f->denials, METRIC_COUNTER, "sbx_seccomp_denials_total",
         "System calls denied by seccomp in finished tasks.", {"pool"}, 1, NULL, 0},
        {&f->warm, METRIC_GAUGE, "sbx_pool_warm", "Warm sandboxes ready for a task.", {"pool"},
         1, NULL, 0},
        {&f->target, METRIC_GAUGE, "sbx_pool_target", "Warm sandboxes the pool keeps ready.",
         {"pool"}, 1, NULL, 0},
        {&f->creating, METRIC_GAUGE, "sbx_pool_creating", "Sandboxes being created.",
         {"pool"}, 1, NULL, 0},
        {&f->running, METRIC_GAUGE, "sbx_pool_running", "Sandboxes running a task.", {"pool"},
         1, NULL, 0},
        {&f->queued, METRIC_GAUGE, "sbx_pool_queued", "Tasks waiting for a sandbox.", {"pool"},
         1, NULL, 0},
        {&f->max, METRIC_GAUGE, "sbx_pool_max", "Sandboxes the pool may have at once.",
         {"pool"}, 1, NULL, 0},
        {&f->create, METRIC_HISTOGRAM, "sbx_sandbox_create_seconds",
         "Sandbox creation, from its start to its init reporting ready.", {"pool"}, 1,
         HIST(create_buckets)},
        {&f->create_fail, METRIC_COUNTER, "sbx_sandbox_create_failures_total",
         "Sandbox creations that failed.", {"pool"}, 1, NULL, 0},
        {&f->cold, METRIC_COUNTER, "sbx_sandbox_cold_starts_total",
         "Tasks that had to wait for a sandbox to be created.", {"pool"}, 1, NULL, 0},
        {&f->fs_up, METRIC_GAUGE, "sbx_fork_server_up",
         "1 while the pool's fork server runs; 0 while none does (not started yet, lost, "
         "given up after failures, or fork_server: false).", {"pool"}, 1, NULL, 0},
        {&f->fs_spawned, METRIC_COUNTER, "sbx_fork_server_spawned_total",
         "Sandboxes forked by the pool's fork server.", {"pool"}, 1, NULL, 0},
        {&f->fs_failures, METRIC_COUNTER, "sbx_fork_server_failures_total",
         "Fork server starts that failed, and fork servers lost.", {"pool"}, 1, NULL, 0},
        {&f->files_in, METRIC_COUNTER, "sbx_files_in_bytes_total",
         "File bytes written into sandboxes' /work for clients (exec's files).", {"pool"}, 1,
         NULL, 0},
        {&f->files_out, METRIC_COUNTER, "sbx_files_out_bytes_total",
         "File bytes read from sandboxes' /work for clients (exec's collect).", {"pool"}, 1,
         NULL, 0},
        {&f->sessions_open, METRIC_GAUGE, "sbx_sessions_open",
         "Sessions open or waiting for their sandbox.", {"pool"}, 1, NULL, 0},
        {&f->sessions, METRIC_COUNTER, "sbx_sessions_total",
         "Sessions ended, by pool and reason.", {"pool", "reason"}, 2, NULL, 0},
        {&f->session_lifetime, METRIC_HISTOGRAM, "sbx_session_lifetime_seconds",
         "How long ended sessions were open.", {"pool"}, 1, HIST(session_buckets)},
        {&f->session_commands, METRIC_HISTOGRAM, "sbx_session_commands",
         "Commands run in each ended session.", {"pool"}, 1, HIST(commands_buckets)},
        {&f->leaks, METRIC_COUNTER, "sbx_sandbox_leaks_total",
         "Sandboxes or cgroups left behind that the reaper removed.", {NULL}, 0, NULL, 0},
        {&f->conns, METRIC_GAUGE, "sbx_rpc_connections",
         "Open connections on the agents' and admin sockets.", {NULL}, 0, NULL, 0},
        {&m->f_rpc_requests, METRIC_COUNTER, "sbx_rpc_requests_total",
         "RPC requests received, by method (unknown methods as \"unknown\").", {"method"}, 1,
         NULL, 0},
        {&m->f_rpc_errors, METRIC_COUNTER, "sbx_rpc_errors_total",
         "Protocol-level errors answered or counted, by kind.", {"kind"}, 1, NULL, 0},
        {&f->denied, METRIC_COUNTER, "sbx_denied_total",
         "Requests refused by policy (code denied), by reason.", {"reason"}, 1, NULL, 0},
        {&f->tokens, METRIC_GAUGE, "sbx_tokens_active", "Capability tokens currently valid.",
         {NULL}, 0, NULL, 0},
        {&m->f_proxy, METRIC_COUNTER, "sbx_proxy_requests_total",
         "Egress proxy requests, by profile and outcome.", {"profile", "outcome"}, 2, NULL, 0},
        {&f->audit_batch, METRIC_HISTOGRAM, "sbx_audit_batch_seconds",
         "Audit batch write time, from its first insert to its commit, waits excluded.",
         {NULL}, 0, HIST(audit_buckets)},
        {&f->audit_queue, METRIC_GAUGE, "sbx_audit_queue_depth",
         "Audit events waiting to be written.", {NULL}, 0, NULL, 0},
        {&m->f_audit_suppressed, METRIC_COUNTER, "sbx_audit_suppressed_total",
         "Refusals and denials counted in a summary rather than recorded one by one, by "
         "source (rpc, egress: over a budget; backlog: while the trail was behind).",
         {"source"}, 1, NULL, 0},
        {&f->rss, METRIC_GAUGE, "process_resident_memory_bytes", "Resident memory size in bytes.",
         {NULL}, 0, NULL, 0},
        {&f->vsize, METRIC_GAUGE, "process_virtual_memory_bytes",
         "Virtual memory size in bytes.", {NULL}, 0, NULL, 0},
        {&f->cpu, METRIC_COUNTER, "process_cpu_seconds_total",
         "Total user and system CPU time spent in seconds.", {NULL}, 0, NULL, 0},
        {&f->fds, METRIC_GAUGE, "process_open_fds", "Number of open file descriptors.", {NULL},
         0, NULL, 0},
        {&f->max_fds, METRIC_GAUGE, "process_max_fds",
         "Maximum number of open file descriptors.", {NULL}, 0, NULL, 0},
        {&f->start_time, METRIC_GAUGE, "process_start_time_seconds",
         "Start time of the process since unix epoch in seconds.", {NULL}, 0, NULL, 0},
        {&f->build, METRIC_GAUGE, "sbx_build_info", "sbxd's version; the value is always 1.",
         {"version"}, 1, NULL, 0},
    };
    /* clang-format on */
    for (size_t i = 0; i < ARRAY_SIZE(defs); i++) {
        const struct family_def *def = &defs[i];
        int r = registry_family_new(m->reg, def->type, def->name, def->help, def->labels,
                                    def->n_labels, def->buckets, def->n_buckets, def->slot, e);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* Every series of one pool, at zero. */
static void pool_series_new(struct metrics_pool *ps, const struct families *f, const char *name)
{
    const char *one[1] = {name};
    for (size_t s = 0; s < N_STATUSES; s++) {
        const char *v[2] = {name, task_statuses[s]};
        ps->tasks[s] = registry_series(f->tasks, v);
    }
    for (size_t c = 0; c < N_CAUSES; c++) {
        const char *v[2] = {name, error_causes[c]};
        ps->errors[c] = registry_series(f->errors, v);
    }
    ps->duration = registry_series(f->duration, one);
    ps->queue_wait = registry_series(f->queue_wait, one);
    ps->start = registry_series(f->start, one);
    const char *out[2] = {name, "stdout"}, *err[2] = {name, "stderr"};
    ps->out_stdout = registry_series(f->out, out);
    ps->out_stderr = registry_series(f->out, err);
    ps->truncated = registry_series(f->trunc, one);
    ps->denials = registry_series(f->denials, one);
    ps->warm = registry_series(f->warm, one);
    ps->target = registry_series(f->target, one);
    ps->creating = registry_series(f->creating, one);
    ps->running = registry_series(f->running, one);
    ps->queued = registry_series(f->queued, one);
    ps->max = registry_series(f->max, one);
    ps->create_seconds = registry_series(f->create, one);
    ps->create_failures = registry_series(f->create_fail, one);
    ps->cold_starts = registry_series(f->cold, one);
    ps->fs_up = registry_series(f->fs_up, one);
    ps->fs_spawned = registry_series(f->fs_spawned, one);
    ps->fs_failures = registry_series(f->fs_failures, one);
    ps->files_in = registry_series(f->files_in, one);
    ps->files_out = registry_series(f->files_out, one);
    ps->sessions_open = registry_series(f->sessions_open, one);
    for (size_t i = 0; i < N_SESSION_REASONS; i++) {
        const char *v[2] = {name, session_reasons[i]};
        ps->sessions[i] = registry_series(f->sessions, v);
    }
    ps->session_lifetime = registry_series(f->session_lifetime, one);
    ps->session_commands = registry_series(f->session_commands, one);
}

/* The series that are not per pool: known label values at zero, the unlabelled ones, and
 * the values that never change (build info, start time). */
static void global_series_new(struct metrics *m, const struct families *f,
                              const struct metrics_names *names)
{
    for (size_t i = 0; i < N_REASONS; i++) {
        m->denied[i] = registry_series(f->denied, &denial_reasons[i]);
    }
    for (size_t i = 0; i < names->n_profiles; i++) {
        for (size_t o = 0; o < ARRAY_SIZE(proxy_outcomes); o++) {
            const char *v[2] = {names->profiles[i], proxy_outcomes[o]};
            (void)registry_series(m->f_proxy, v);
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(rpc_methods); i++) {
        (void)registry_series(m->f_rpc_requests, &rpc_methods[i]);
    }
    for (size_t i = 0; i < ARRAY_SIZE(rpc_error_kinds); i++) {
        (void)registry_series(m->f_rpc_errors, &rpc_error_kinds[i]);
    }
    m->leaks = registry_series(f->leaks, NULL);
    m->rpc_connections = registry_series(f->conns, NULL);
    m->tokens_active = registry_series(f->tokens, NULL);
    m->audit_batch = registry_series(f->audit_batch, NULL);
    m->audit_queue = registry_series(f->audit_queue, NULL);
    for (size_t i = 0; i < ARRAY_SIZE(suppressed_sources); i++) {
        m->audit_suppressed[i] = registry_series(m->f_audit_suppressed, &suppressed_sources[i]);
    }
    m->p_rss = registry_series(f->rss, NULL);
    m->p_vsize = registry_series(f->vsize, NULL);
    m->p_cpu = registry_series(f->cpu, NULL);
    m->p_fds = registry_series(f->fds, NULL);
    m->p_max_fds = registry_series(f->max_fds, NULL);
    m->p_start = registry_series(f->start_time, NULL);
    const char *version[1] = {SBX_VERSION};
    registry_set(registry_series(f->build, version), 1);
    registry_set(m->p_start, process_start_time());
}

int metrics_new(const struct metrics_names *names, struct metrics **ret, struct err *e)
{
    size_t n_pools = names->n_pools;
    struct metrics *m = xcalloc(1, sizeof(*m));
    struct families f;
    memset(&f, 0, sizeof(f));
    registry_new(&m->reg);
    int r = families_new(m, &f, e);
    if (r < 0) {
        metrics_free(m);
        return r;
    }
    m->pools = xcalloc(n_pools ? n_pools : 1, sizeof(*m->pools));
    m->values = xcalloc(n_pools ? n_pools : 1, sizeof(*m->values));
    m->n_pools = n_pools;
    for (size_t i = 0; i < n_pools; i++) {
        pool_series_new(&m->pools[i], &f, names->pools[i]);
    }
    global_series_new(m, &f, names);
    registry_on_collect(m->reg, collect, m);
    *ret = m;
    return 0;
}

struct metrics *metrics_free(struct metrics *m)
{
    if (!m) {
        return NULL;
    }
    m->reg = registry_free(m->reg);
    free(m->pools);
    free(m->values);
    free(m);
    return NULL;
}

struct metrics_pool *metrics_pool(struct metrics *m, size_t i)
{
    return m && i < m->n_pools ? &m->pools[i] : NULL;
}

void metrics_set_source(struct metrics *m, const struct metrics_source *src, void *arg)
{
    m->src = *src;
    m->src_arg = arg;
}

int metrics_render_daemon(struct metrics *m, char **ret, size_t *ret_len)
{
    return registry_render(m->reg, ret, ret_len);
}

static void respond(struct http_response *res, int status, const char *body)
{
    res->status = status;
    res->body = xstrdup(body);
    res->body_len = strlen(res->body);
}

void metrics_http(void *ud, const struct http_request *req, struct http_response *res)
{
    struct metrics *m = ud;
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    bool is_metrics = strcmp(req->path, "/metrics") == 0;
    bool is_health = strcmp(req->path, "/healthz") == 0;
    if (!is_metrics && !is_health) {
        respond(res, 404, "not found\n");
        return;
    }
    if (!get) {
        res->allow = "GET, HEAD";
        respond(res, 405, "method not allowed\n");
        return;
    }
    if (is_health) {
        bool draining = m->src.draining && m->src.draining(m->src_arg);
        respond(res, draining ? 503 : 200, draining ? "draining\n" : "ok\n");
        return;
    }
    res->status = 200;
    res->content_type = "text/plain; version=0.0.4; charset=utf-8";
    (void)metrics_render_daemon(m, &res->body, &res->body_len);
}

/* ---- Hooks ------------------------------------------------------------------------------- */

static double seconds_between(uint64_t from_ns, uint64_t to_ns)
{
    return from_ns && to_ns > from_ns ? (double)(to_ns - from_ns) / 1e9 : 0.0;
}

void metrics_task_start(struct metrics_pool *ps, uint64_t request_ns, uint64_t start_ns)
{
    if (ps) {
        registry_observe(ps->queue_wait, seconds_between(request_ns, start_ns));
    }
}

void metrics_task_running(struct metrics_pool *ps, uint64_t request_ns)
{
    if (ps) {
        registry_observe(ps->start, seconds_between(request_ns, clock_now_ns()));
    }
}

void metrics_task_done(struct metrics_pool *ps, const char *status,
                       const struct metrics_task_result *r)
{
    if (!ps) {
        return;
    }
    size_t s = 0;
    while (s < N_STATUSES && strcmp(task_statuses[s], status) != 0) {
        s++;
    }
    /* The set is sbx's own, documented and bounded: a status outside it is a bug that
     * would otherwise be counted as something it is not. */
    assert(s < N_STATUSES);
    registry_inc(ps->tasks[s]);
    if (s == STATUS_ERROR) {
        size_t c = 0;
        while (c < N_CAUSES && (!r->error_cause || strcmp(error_causes[c], r->error_cause) != 0)) {
            c++;
        }
        assert(c < N_CAUSES);
        registry_inc(ps->errors[c]);
    }
    if (r->start_ns) {
        uint64_t end = r->exit_ns ? r->exit_ns : clock_now_ns();
        registry_observe(ps->duration, seconds_between(r->start_ns, end));
    }
    registry_add(ps->out_stdout, (double)r->stdout_bytes);
    registry_add(ps->out_stderr, (double)r->stderr_bytes);
    if (r->truncated) {
        registry_inc(ps->truncated);
    }
    if (r->denials_known) {
        registry_add(ps->denials, r->seccomp_denials);
    }
}

void metrics_files(struct metrics_pool *ps, uint64_t in_bytes, uint64_t out_bytes)
{
    if (ps) {
        registry_add(ps->files_in, (double)in_bytes);
        registry_add(ps->files_out, (double)out_bytes);
    }
}

void metrics_session_end(struct metrics_pool *ps, const char *reason, double lifetime_s,
                         uint64_t commands)
{
    if (!ps) {
        return;
    }
    size_t i = 0;
    while (i < N_SESSION_REASONS && strcmp(session_reasons[i], reason) != 0) {
        i++;
    }
    assert(i < N_SESSION_REASONS);
    registry_inc(ps->sessions[i]);
    registry_observe(ps->session_lifetime, lifetime_s);
    registry_observe(ps->session_commands, (double)commands);
}

void metrics_sandbox_ready(struct metrics_pool *ps, uint64_t created_ns, uint64_t ready_ns)
{
    if (ps) {
        registry_observe(ps->create_seconds, seconds_between(created_ns, ready_ns));
    }
}

void metrics_rpc_request(struct metrics *m, const char *method)
{
    if (m) {
        const char *v[1] = {method ? method : "unknown"};
        registry_inc(registry_series(m->f_rpc_requests, v));
    }
}

void metrics_rpc_error(struct metrics *m, const char *kind)
{
    if (m) {
        const char *v[1] = {kind};
        registry_inc(registry_series(m->f_rpc_errors, v));
    }
}

void metrics_denied(struct metrics *m, const char *reason)
{
    if (!m) {
        return;
    }
    size_t i = 0;
    while (i < N_REASONS && strcmp(denial_reasons[i], reason) != 0) {
        i++;
    }
    assert(i < N_REASONS); /* the reasons are sbx's own (metrics.h) */
    registry_inc(m->denied[i]);
}

void metrics_tokens_active(struct metrics *m, uint64_t n)
{
    if (m) {
        registry_set(m->tokens_active, (double)n);
    }
}

void metrics_proxy_request(struct metrics *m, const char *profile, const char *outcome)
{
    if (!m) {
        return;
    }
    const char *o = proxy_outcomes[ARRAY_SIZE(proxy_outcomes) - 1];
    for (size_t i = 0; i < ARRAY_SIZE(proxy_outcomes); i++) {
        if (strcmp(proxy_outcomes[i], outcome) == 0) {
            o = proxy_outcomes[i];
        }
    }
    const char *v[2] = {profile, o};
    registry_inc(registry_series(m->f_proxy, v));
}

void metrics_audit_suppressed(struct metrics *m, const char *source)
{
    if (!m) {
        return;
    }
    for (size_t i = 0; i < ARRAY_SIZE(suppressed_sources); i++) {
        if (strcmp(suppressed_sources[i], source) == 0) {
            registry_inc(m->audit_suppressed[i]);
            return;
        }
    }
}

void metrics_sandbox_leaks(struct metrics *m, uint64_t n)
{
    if (m) {
        registry_add(m->leaks, (double)n);
    }
}

void metrics_audit_batch(struct metrics *m, double seconds)
{
    if (m) {
        registry_observe(m->audit_batch, seconds);
    }
}

void metrics_audit_queue_depth(struct metrics *m, uint64_t n)
{
    if (m) {
        registry_set(m->audit_queue, (double)n);
    }
}
