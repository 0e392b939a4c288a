/* SPDX-License-Identifier: MIT */
/* The metrics registry and its exposition: name and label rules, label and HELP escaping,
 * value formatting, cumulative histogram buckets ending in +Inf with _sum and _count, the
 * series bound, atomic updates from threads, and sbxd's series and HTTP handler fed by a
 * fake source of values (two pools, one with a fork server, two connections). */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "metrics/metrics.h"

#include "lib/util.h"
#include "metrics/http.h"
#include "metrics/registry.h"

static char *render(struct metric_registry *r)
{
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(registry_render(r, &out, &len), 0);
    assert_non_null(out);
    assert_int_equal(strlen(out), len);
    return out;
}

/* Whether text has line as a whole line. */
static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p++) {
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0')) {
            return true;
        }
    }
    return false;
}

#define assert_line(text, line)                                                                    \
    do {                                                                                           \
        if (!has_line((text), (line))) {                                                           \
            fail_msg("missing line '%s' in:\n%s", (line), (text));                                 \
        }                                                                                          \
    } while (0)

static void registry_family_new__rejects_bad_definitions(void **state)
{
    (void)state;
    struct metric_registry *r = NULL;
    struct metric_family *f = NULL;
    struct err e = ERR_INIT;
    const char *pool[] = {"pool"};
    const char *bad_label[] = {"__reserved"};
    const char *le[] = {"le"};
    const char *twice[] = {"a", "a"};
    const char *dash[] = {"a-b"};
    const double buckets[] = {1, 2};
    const double unsorted[] = {2, 1};
    registry_new(&r);
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "1abc", "", NULL, 0, NULL, 0, &f, &e),
                     -EINVAL);
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "a-b", "", NULL, 0, NULL, 0, &f, &e),
                     -EINVAL);
    assert_int_equal(
        registry_family_new(r, METRIC_COUNTER, "x_count", "", NULL, 0, NULL, 0, &f, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "_total"));
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "x_total", "", NULL, 0, NULL, 0, &f, &e),
                     -EINVAL);
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "g", "", bad_label, 1, NULL, 0, &f, &e),
                     -EINVAL);
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "g", "", dash, 1, NULL, 0, &f, &e),
                     -EINVAL);
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "g", "", twice, 2, NULL, 0, &f, &e),
                     -EINVAL);
    assert_int_equal(
        registry_family_new(r, METRIC_HISTOGRAM, "h_seconds", "", le, 1, buckets, 2, &f, &e),
        -EINVAL);
    assert_int_equal(
        registry_family_new(r, METRIC_HISTOGRAM, "h_seconds", "", pool, 1, unsorted, 2, &f, &e),
        -EINVAL);
    assert_int_equal(
        registry_family_new(r, METRIC_HISTOGRAM, "h_seconds", "", pool, 1, NULL, 0, &f, &e),
        -EINVAL);
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "g", "", NULL, 0, buckets, 2, &f, &e),
                     -EINVAL);
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "ns:g", "", pool, 1, NULL, 0, &f, &e), 0);
    assert_int_equal(registry_family_new(r, METRIC_COUNTER, "ns:g", "", NULL, 0, NULL, 0, &f, &e),
                     -EINVAL);
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "ns:g", "", NULL, 0, NULL, 0, &f, &e),
                     -EEXIST);
    registry_free(r);
}

static void registry_render__help_type_and_unlabelled_zero(void **state)
{
    (void)state;
    struct metric_registry *r = NULL;
    struct metric_family *c = NULL, *g = NULL;
    registry_new(&r);
    assert_int_equal(registry_family_new(r, METRIC_COUNTER, "jobs_total", "Jobs done.", NULL, 0,
                                         NULL, 0, &c, NULL),
                     0);
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "depth", "Back\\slash\nand newline.",
                                         NULL, 0, NULL, 0, &g, NULL),
                     0);
    char *out = render(r);
    assert_string_equal(out, "# HELP jobs_total Jobs done.\n"
                             "# TYPE jobs_total counter\n"
                             "jobs_total 0\n"
                             "# HELP depth Back\\\\slash\\nand newline.\n"
                             "# TYPE depth gauge\n"
                             "depth 0\n");
    free(out);
    registry_inc(registry_series(c, NULL));
    registry_add(registry_series(c, NULL), 2.5);
    registry_add(registry_series(c, NULL), -10); /* counters never go down */
    registry_set(registry_series(g, NULL), -3);
    out = render(r);
    assert_line(out, "jobs_total 3.5");
    assert_line(out, "depth -3");
    free(out);
    registry_free(r);
}

static void registry_render__escapes_label_values(void **state)
{
    (void)state;
    struct metric_registry *r = NULL;
    struct metric_family *f = NULL;
    const char *labels[] = {"a", "b"};
    const char *values[] = {"quo\"te", "back\\slash\nline"};
    registry_new(&r);
    assert_int_equal(
        registry_family_new(r, METRIC_COUNTER, "esc_total", "", labels, 2, NULL, 0, &f, NULL), 0);
    registry_inc(registry_series(f, values));
    char *out = render(r);
    assert_line(out, "esc_total{a=\"quo\\\"te\",b=\"back\\\\slash\\nline\"} 1");
    free(out);
    registry_free(r);
}

static void registry_render__histogram_buckets_cumulative_with_inf(void **state)
{
    (void)state;
    struct metric_registry *r = NULL;
    struct metric_family *f = NULL;
    const char *labels[] = {"pool"};
    const char *values[] = {"python"};
    const double buckets[] = {0.1, 0.5, 1};
    registry_new(&r);
    assert_int_equal(registry_family_new(r, METRIC_HISTOGRAM, "lat_seconds", "Latency.", labels, 1,
                                         buckets, 3, &f, NULL),
                     0);
    struct metric_series *s = registry_series(f, values);
    registry_observe(s, 0.05);
    registry_observe(s, 0.1); /* upper bounds are inclusive */
    registry_observe(s, 0.75);
    registry_observe(s, 100);
    char *out = render(r);
    assert_string_equal(out, "# HELP lat_seconds Latency.\n"
                             "# TYPE lat_seconds histogram\n"
                             "lat_seconds_bucket{pool=\"python\",le=\"0.1\"} 2\n"
                             "lat_seconds_bucket{pool=\"python\",le=\"0.5\"} 2\n"
                             "lat_seconds_bucket{pool=\"python\",le=\"1\"} 3\n"
                             "lat_seconds_bucket{pool=\"python\",le=\"+Inf\"} 4\n"
                             "lat_seconds_sum{pool=\"python\"} 100.9\n"
                             "lat_seconds_count{pool=\"python\"} 4\n");
    free(out);
    assert_true(registry_value(s) == 4);
    registry_free(r);
}

static void registry_render__unlabelled_histogram_has_only_le(void **state)
{
    (void)state;
    struct metric_registry *r = NULL;
    struct metric_family *f = NULL;
    const double buckets[] = {0.001};
    registry_new(&r);
    assert_int_equal(
        registry_family_new(r, METRIC_HISTOGRAM, "b_seconds", "", NULL, 0, buckets, 1, &f, NULL),
        0);
    registry_observe(registry_series(f, NULL), 0.0001);
    char *out = render(r);
    assert_line(out, "b_seconds_bucket{le=\"0.001\"} 1");
    assert_line(out, "b_seconds_bucket{le=\"+Inf\"} 1");
    assert_line(out, "b_seconds_sum 0.0001");
    assert_line(out, "b_seconds_count 1");
    free(out);
    registry_free(r);
}

static void registry_render__values_are_prometheus_floats(void **state)
{
    (void)state;
    struct metric_registry *r = NULL;
    struct metric_family *f = NULL;
    const char *labels[] = {"v"};
    const char *names[] = {"tenth", "tiny", "big", "inf", "nan", "int"};
    const double vals[] = {0.1, 1e-05, 1e20, INFINITY, NAN, 123456789012};
    const char *want[] = {"0.1", "1e-05", "1e+20", "+Inf", "NaN", "123456789012"};
    registry_new(&r);
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "f", "", labels, 1, NULL, 0, &f, NULL),
                     0);
    for (size_t i = 0; i < 6; i++) {
        registry_set(registry_series(f, &names[i]), vals[i]);
    }
    char *out = render(r);
    for (size_t i = 0; i < 6; i++) {
        char line[64];
        snprintf(line, sizeof(line), "f{v=\"%s\"} %s", names[i], want[i]);
        assert_line(out, line);
    }
    free(out);
    registry_free(r);
}

static void registry_series__same_labels_same_series(void **state)
{
    (void)state;
    struct metric_registry *r = NULL;
    struct metric_family *f = NULL;
    const char *labels[] = {"pool", "status"};
    const char *a[] = {"python", "exited"};
    const char *a2[] = {"python", "exited"};
    const char *b[] = {"python", "timeout"};
    registry_new(&r);
    assert_int_equal(
        registry_family_new(r, METRIC_COUNTER, "t_total", "", labels, 2, NULL, 0, &f, NULL), 0);
    struct metric_series *s = registry_series(f, a);
    assert_ptr_equal(registry_series(f, a2), s);
    assert_ptr_not_equal(registry_series(f, b), s);
    registry_free(r);
}

static void registry_series__invalid_utf8_and_long_values_are_cleaned(void **state)
{
    (void)state;
    struct metric_registry *r = NULL;
    struct metric_family *f = NULL;
    const char *labels[] = {"v"};
    char longv[300];
    memset(longv, 'x', sizeof(longv) - 1);
    longv[sizeof(longv) - 1] = '\0';
    const char *bad[] = {"a\xff"
                         "b\xc3\xa9"};
    const char *lng[] = {longv};
    registry_new(&r);
    assert_int_equal(registry_family_new(r, METRIC_GAUGE, "u", "", labels, 1, NULL, 0, &f, NULL),
                     0);
    struct metric_series *s = registry_series(f, bad);
    assert_ptr_equal(registry_series(f, bad), s);
    registry_set(registry_series(f, lng), 1);
    char *out = render(r);
    assert_line(out, "u{v=\"a?b\xc3\xa9\"} 0");
    char want[METRICS_MAX_VALUE_LEN + 32];
    snprintf(want, sizeof(want), "u{v=\"%.*s\"} 1", METRICS_MAX_VALUE_LEN, longv);
    assert_line(out, want);
    free(out);
    registry_free(r);
}

static void registry_series__bounded_with_overflow_series(void **state)
{
    (void)state;
    struct metric_registry *r = NULL;
    struct metric_family *f = NULL;
    const char *labels[] = {"id"};
    registry_new(&r);
    assert_int_equal(
        registry_family_new(r, METRIC_COUNTER, "ids_total", "", labels, 1, NULL, 0, &f, NULL), 0);
    for (int i = 0; i < METRICS_MAX_SERIES + 10; i++) {
        char v[16];
        snprintf(v, sizeof(v), "%d", i);
        const char *vals[] = {v};
        registry_inc(registry_series(f, vals));
    }
    char *out = render(r);
    assert_line(out, "ids_total{id=\"0\"} 1");
    assert_line(out, "ids_total{id=\"255\"} 1");
    assert_null(strstr(out, "ids_total{id=\"256\"}"));
    assert_line(out, "ids_total{id=\"other\"} 10");
    free(out);
    registry_free(r);
}

struct observer {
    struct metric_series *hist;
    struct metric_series *counter;
};

static void *observe_many(void *arg)
{
    struct observer *o = arg;
    for (int i = 0; i < 100000; i++) {
        registry_observe(o->hist, 0.5);
        registry_inc(o->counter);
    }
    return NULL;
}

static void registry_observe__atomic_across_threads(void **state)
{
    (void)state;
    struct metric_registry *r = NULL;
    struct metric_family *h = NULL, *c = NULL;
    const double buckets[] = {1};
    registry_new(&r);
    assert_int_equal(
        registry_family_new(r, METRIC_HISTOGRAM, "x_seconds", "", NULL, 0, buckets, 1, &h, NULL),
        0);
    assert_int_equal(
        registry_family_new(r, METRIC_COUNTER, "x_total", "", NULL, 0, NULL, 0, &c, NULL), 0);
    struct observer o = {registry_series(h, NULL), registry_series(c, NULL)};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, observe_many, &o), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
    }
    assert_true(registry_value(o.hist) == 400000);
    assert_true(registry_value(o.counter) == 400000);
    char *out = render(r);
    assert_line(out, "x_seconds_sum 200000");
    assert_line(out, "x_seconds_bucket{le=\"+Inf\"} 400000");
    free(out);
    registry_free(r);
}

/* sbxd's series against a fake source: two pools, no loop. */
struct fake {
    struct metrics *m;
    bool draining;
};

/* What the composition root would read from the pools and servers: "python" with a fork
 * server, "heavy" without, and two connections. */
static void fake_collect(void *arg, struct metrics_values *v)
{
    (void)arg;
    assert_int_equal(v->n_pools, 2);
    v->pools[0] = (struct metrics_pool_values){.warm = 2,
                                               .target = 3,
                                               .running = 4,
                                               .queued = 5,
                                               .max = 9,
                                               .create_failures = 7,
                                               .cold_starts = 6,
                                               .fork_server_up = true,
                                               .fork_server_spawned = 40,
                                               .fork_server_failures = 1};
    v->pools[1] = (struct metrics_pool_values){.target = 1, .max = 2};
    v->rpc_connections = 2;
}

static bool fake_draining(void *arg)
{
    const struct fake *f = arg;
    return f->draining;
}

static int fake_setup(void **state)
{
    static const struct metrics_source source = {fake_collect, fake_draining};
    static const char *const pools[] = {"python", "heavy"};
    static const char *const profiles[] = {"pypi", "github"};
    static const struct metrics_names names = {pools, 2, profiles, 2};
    struct fake *f = calloc(1, sizeof(*f));
    assert_int_equal(metrics_new(&names, &f->m, NULL), 0);
    metrics_set_source(f->m, &source, f);
    *state = f;
    return 0;
}

static int fake_teardown(void **state)
{
    struct fake *f = *state;
    metrics_free(f->m);
    free(f);
    return 0;
}

static char *render_daemon(struct fake *f)
{
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(metrics_render_daemon(f->m, &out, &len), 0);
    return out;
}

static void metrics_new__every_pool_series_exists_at_zero(void **state)
{
    struct fake *f = *state;
    char *out = render_daemon(f);
    /* Every status a task can end with, every cause of an error, every reason of a denial
     * and every outcome of each configured egress profile: at 0 from the start. */
    const char *statuses[] = {"exited",        "signaled",      "timeout",   "output_limit", "oom",
                              "token_expired", "token_revoked", "cancelled", "error"};
    for (size_t i = 0; i < ARRAY_SIZE(statuses); i++) {
        char line[128];
        snprintf(line, sizeof(line), "sbx_tasks_total{pool=\"heavy\",status=\"%s\"} 0",
                 statuses[i]);
        assert_line(out, line);
    }
    const char *causes[] = {"exec", "cwd", "mounts", "setup", "no_sandbox", "shutdown"};
    for (size_t i = 0; i < ARRAY_SIZE(causes); i++) {
        char line[128];
        snprintf(line, sizeof(line), "sbx_task_errors_total{pool=\"python\",cause=\"%s\"} 0",
                 causes[i]);
        assert_line(out, line);
    }
    const char *reasons[] = {"token_required",   "token_malformed", "token_unknown",
                             "token_revoked",    "token_expired",   "token_used_up",
                             "pool_not_allowed", "grant_failed",    "issue_not_allowed"};
    for (size_t i = 0; i < ARRAY_SIZE(reasons); i++) {
        char line[128];
        snprintf(line, sizeof(line), "sbx_denied_total{reason=\"%s\"} 0", reasons[i]);
        assert_line(out, line);
    }
    const char *profiles[] = {"pypi", "github"};
    const char *outcomes[] = {"allowed", "denied", "limit", "error"};
    for (size_t i = 0; i < ARRAY_SIZE(profiles); i++) {
        for (size_t o = 0; o < ARRAY_SIZE(outcomes); o++) {
            char line[128];
            snprintf(line, sizeof(line),
                     "sbx_proxy_requests_total{profile=\"%s\",outcome=\"%s\"} 0", profiles[i],
                     outcomes[o]);
            assert_line(out, line);
        }
    }
    assert_line(out, "sbx_pool_warm{pool=\"python\"} 2");
    assert_line(out, "sbx_pool_target{pool=\"python\"} 3");
    assert_line(out, "sbx_pool_running{pool=\"python\"} 4");
    assert_line(out, "sbx_pool_queued{pool=\"python\"} 5");
    assert_line(out, "sbx_pool_max{pool=\"heavy\"} 2");
    assert_line(out, "sbx_sandbox_create_failures_total{pool=\"python\"} 7");
    assert_line(out, "sbx_sandbox_cold_starts_total{pool=\"python\"} 6");
    assert_line(out, "sbx_fork_server_up{pool=\"python\"} 1");
    assert_line(out, "sbx_fork_server_spawned_total{pool=\"python\"} 40");
    assert_line(out, "sbx_fork_server_failures_total{pool=\"python\"} 1");
    assert_line(out, "sbx_fork_server_up{pool=\"heavy\"} 0");
    assert_line(out, "sbx_fork_server_spawned_total{pool=\"heavy\"} 0");
    assert_line(out, "sbx_sandbox_leaks_total 0");
    assert_line(out, "sbx_rpc_connections 2");
    assert_line(out, "sbx_rpc_requests_total{method=\"unknown\"} 0");
    assert_line(out, "sbx_tokens_active 0");
    assert_line(out, "sbx_audit_queue_depth 0");
    assert_line(out, "sbx_build_info{version=\""
                     "0.1.0"
                     "\"} 1");
    assert_line(out, "# TYPE sbx_denied_total counter");
    assert_line(out, "# TYPE sbx_proxy_requests_total counter");
    assert_non_null(strstr(out, "\nprocess_resident_memory_bytes "));
    assert_non_null(strstr(out, "\nprocess_open_fds "));
    assert_non_null(strstr(out, "\nprocess_cpu_seconds_total "));
    free(out);
}

static void metrics_task_done__counts_status_duration_output(void **state)
{
    struct fake *f = *state;
    struct metrics_pool *heavy = metrics_pool(f->m, 1);
    struct metrics_task_result r = {.start_ns = 1002000000ULL,
                                    .exit_ns = 1302000000ULL,
                                    .stdout_bytes = 100,
                                    .stderr_bytes = 7,
                                    .denials_known = true,
                                    .seccomp_denials = 3};
    assert_null(metrics_pool(f->m, 2));
    metrics_task_start(heavy, 1000000000ULL, r.start_ns);
    metrics_task_done(heavy, "exited", &r);
    r.truncated = true;
    r.denials_known = false;
    r.seccomp_denials = 0xffffffffu;
    metrics_task_done(heavy, "output_limit", &r);
    /* Each status under its own label: none of these is an error of sbx. */
    r.truncated = false;
    metrics_task_done(heavy, "cancelled", &r);
    metrics_task_done(heavy, "token_expired", &r);
    metrics_task_done(heavy, "token_revoked", &r);
    /* An error, by cause; one that never had a sandbox (queued) has no duration. */
    r.error_cause = "exec";
    metrics_task_done(heavy, "error", &r);
    metrics_task_done(heavy, "error", &(struct metrics_task_result){.error_cause = "no_sandbox"});
    char *out = render_daemon(f);
    assert_line(out, "sbx_tasks_total{pool=\"heavy\",status=\"exited\"} 1");
    assert_line(out, "sbx_tasks_total{pool=\"heavy\",status=\"output_limit\"} 1");
    assert_line(out, "sbx_tasks_total{pool=\"heavy\",status=\"cancelled\"} 1");
    assert_line(out, "sbx_tasks_total{pool=\"heavy\",status=\"token_expired\"} 1");
    assert_line(out, "sbx_tasks_total{pool=\"heavy\",status=\"token_revoked\"} 1");
    assert_line(out, "sbx_tasks_total{pool=\"heavy\",status=\"error\"} 2");
    assert_line(out, "sbx_task_errors_total{pool=\"heavy\",cause=\"exec\"} 1");
    assert_line(out, "sbx_task_errors_total{pool=\"heavy\",cause=\"no_sandbox\"} 1");
    assert_line(out, "sbx_task_errors_total{pool=\"heavy\",cause=\"setup\"} 0");
    assert_line(out, "sbx_task_duration_seconds_bucket{pool=\"heavy\",le=\"0.25\"} 0");
    assert_line(out, "sbx_task_duration_seconds_bucket{pool=\"heavy\",le=\"0.5\"} 6");
    assert_line(out, "sbx_task_duration_seconds_count{pool=\"heavy\"} 6");
    assert_line(out, "sbx_task_queue_wait_seconds_bucket{pool=\"heavy\",le=\"0.001\"} 0");
    assert_line(out, "sbx_task_queue_wait_seconds_bucket{pool=\"heavy\",le=\"0.0025\"} 1");
    assert_line(out, "sbx_output_bytes_total{pool=\"heavy\",stream=\"stdout\"} 600");
    assert_line(out, "sbx_output_bytes_total{pool=\"heavy\",stream=\"stderr\"} 42");
    assert_line(out, "sbx_output_truncated_total{pool=\"heavy\"} 1");
    assert_line(out, "sbx_seccomp_denials_total{pool=\"heavy\"} 3");
    assert_line(out, "sbx_tasks_total{pool=\"python\",status=\"exited\"} 0");
    free(out);
}

static void metrics_rpc_request__unknown_methods_are_one_label(void **state)
{
    struct fake *f = *state;
    metrics_rpc_request(f->m, "exec");
    metrics_rpc_request(f->m, NULL);
    metrics_rpc_request(f->m, NULL);
    metrics_rpc_error(f->m, "busy");
    metrics_rpc_error(f->m, "new_kind");
    metrics_denied(f->m, "token_expired");
    metrics_proxy_request(f->m, "pypi", "denied");
    metrics_proxy_request(f->m, "pypi", "made-up outcome");
    metrics_tokens_active(f->m, 4);
    metrics_sandbox_leaks(f->m, 2);
    metrics_audit_batch(f->m, 0.003);
    metrics_audit_queue_depth(f->m, 12);
    char *out = render_daemon(f);
    assert_line(out, "sbx_rpc_requests_total{method=\"exec\"} 1");
    assert_line(out, "sbx_rpc_requests_total{method=\"unknown\"} 2");
    assert_line(out, "sbx_rpc_errors_total{kind=\"busy\"} 1");
    assert_line(out, "sbx_rpc_errors_total{kind=\"new_kind\"} 1");
    assert_line(out, "sbx_denied_total{reason=\"token_expired\"} 1");
    assert_line(out, "sbx_proxy_requests_total{profile=\"pypi\",outcome=\"denied\"} 1");
    assert_line(out, "sbx_proxy_requests_total{profile=\"pypi\",outcome=\"error\"} 1");
    assert_line(out, "sbx_tokens_active 4");
    assert_line(out, "sbx_sandbox_leaks_total 2");
    assert_line(out, "sbx_audit_batch_seconds_bucket{le=\"0.0025\"} 0");
    assert_line(out, "sbx_audit_batch_seconds_bucket{le=\"0.005\"} 1");
    assert_line(out, "sbx_audit_queue_depth 12");
    free(out);
}

static void metrics_http__routes_methods_and_health(void **state)
{
    struct fake *f = *state;
    struct http_response res;
    struct http_request get_metrics = {"GET", "/metrics", ""};
    memset(&res, 0, sizeof(res));
    metrics_http(f->m, &get_metrics, &res);
    assert_int_equal(res.status, 200);
    assert_string_equal(res.content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert_non_null(strstr(res.body, "# TYPE sbx_tasks_total counter\n"));
    free(res.body);

    struct http_request post = {"POST", "/metrics", ""};
    memset(&res, 0, sizeof(res));
    metrics_http(f->m, &post, &res);
    assert_int_equal(res.status, 405);
    assert_string_equal(res.allow, "GET, HEAD");
    free(res.body);

    struct http_request other = {"GET", "/", ""};
    memset(&res, 0, sizeof(res));
    metrics_http(f->m, &other, &res);
    assert_int_equal(res.status, 404);
    free(res.body);

    struct http_request health = {"HEAD", "/healthz", ""};
    memset(&res, 0, sizeof(res));
    metrics_http(f->m, &health, &res);
    assert_int_equal(res.status, 200);
    assert_string_equal(res.body, "ok\n");
    free(res.body);
    f->draining = true;
    memset(&res, 0, sizeof(res));
    metrics_http(f->m, &health, &res);
    assert_int_equal(res.status, 503);
    free(res.body);
    f->draining = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registry_family_new__rejects_bad_definitions),
        cmocka_unit_test(registry_render__help_type_and_unlabelled_zero),
        cmocka_unit_test(registry_render__escapes_label_values),
        cmocka_unit_test(registry_render__histogram_buckets_cumulative_with_inf),
        cmocka_unit_test(registry_render__unlabelled_histogram_has_only_le),
        cmocka_unit_test(registry_render__values_are_prometheus_floats),
        cmocka_unit_test(registry_series__same_labels_same_series),
        cmocka_unit_test(registry_series__invalid_utf8_and_long_values_are_cleaned),
        cmocka_unit_test(registry_series__bounded_with_overflow_series),
        cmocka_unit_test(registry_observe__atomic_across_threads),
        cmocka_unit_test_setup_teardown(metrics_new__every_pool_series_exists_at_zero, fake_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(metrics_task_done__counts_status_duration_output,
                                        fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(metrics_rpc_request__unknown_methods_are_one_label,
                                        fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(metrics_http__routes_methods_and_health, fake_setup,
                                        fake_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
