/* SPDX-License-Identifier: MIT */
/* Metrics: the counter/gauge/histogram registry and its Prometheus text rendering, then
 * sbxd's series (made at start-up for every pool and known label value) and the hooks that
 * update them. The hot path only updates numbers in place; it never allocates, formats or
 * does I/O. Scrape-time work (collect, render) is in-memory plus a few small /proc reads. */
#define LOG_MOD "metrics"
#include "metrics/metrics.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "config/config.h"
#include "wire/ctl.h"
#include "daemon.h"
#include "core/task.h"
#include "metrics/http.h"
#include "lib/log.h"
#include "core/pool.h"
#include "sandbox/sandbox.h"
#include "api/server.h"
#include "lib/list.h"
#include "lib/util.h"
#include "sandbox/forkserver.h"
#include "wire/version.h"

/* ---- The registry ---------------------------------------------------------------------- */

struct metric_series {
    struct metric_series *next;
    struct metric_family *fam;
    char *values[METRICS_MAX_LABELS];
    /* Counter and gauge: the value, as a double's bits so that it can be updated with
     * integer atomics. Histogram: the sum. */
    uint64_t bits;
    /* Histogram: per-bucket (not cumulative) counts, n_buckets + 1 (the last is +Inf). */
    uint64_t *counts;
};

struct metric_family {
    struct metric_family *next;
    enum metric_type type;
    char *name;
    char *help;
    size_t n_labels;
    char *labels[METRICS_MAX_LABELS];
    size_t n_buckets;
    double buckets[METRICS_MAX_BUCKETS];
    struct metric_series *series;
    struct metric_series *tail;
    size_t n_series;
    struct metric_series *overflow;
};

struct metric_registry {
    struct metric_family *families;
    struct metric_family *tail;
    metrics_collect_cb collect;
    void *collect_ud;
};

static double bits_to_double(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof(d));
    return d;
}

static uint64_t double_to_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof(b));
    return b;
}

static void atomic_add_double(uint64_t *p, double v)
{
    uint64_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
    uint64_t want;
    do {
        want = double_to_bits(bits_to_double(old) + v);
    } while (!__atomic_compare_exchange_n(p, &old, want, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

int metrics_registry_new(struct metric_registry **ret)
{
    *ret = xcalloc(1, sizeof(**ret));
    return 0;
}

static void series_free(struct metric_series *s, size_t n_labels)
{
    for (size_t i = 0; i < n_labels; i++) {
        free(s->values[i]);
    }
    free(s->counts);
    free(s);
}

struct metric_registry *metrics_registry_free(struct metric_registry *r)
{
    if (!r) {
        return NULL;
    }
    struct metric_family *f = r->families;
    while (f) {
        struct metric_family *fnext = f->next;
        struct metric_series *s = f->series;
        while (s) {
            struct metric_series *snext = s->next;
            series_free(s, f->n_labels);
            s = snext;
        }
        if (f->overflow) {
            series_free(f->overflow, f->n_labels);
        }
        for (size_t i = 0; i < f->n_labels; i++) {
            free(f->labels[i]);
        }
        free(f->name);
        free(f->help);
        free(f);
        f = fnext;
    }
    free(r);
    return NULL;
}

void metrics_registry_on_collect(struct metric_registry *r, metrics_collect_cb fn, void *ud)
{
    r->collect = fn;
    r->collect_ud = ud;
}

static bool name_ok(const char *s, bool colon_ok)
{
    if (!s || !*s) {
        return false;
    }
    for (const char *p = s; *p; p++) {
        char ch = *p;
        bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
                     (colon_ok && ch == ':');
        bool digit = ch >= '0' && ch <= '9';
        if (!alpha && !(digit && p != s)) {
            return false;
        }
    }
    return true;
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int metrics_family_new(struct metric_registry *r, enum metric_type type, const char *name,
                       const char *help, const char *const *labels, size_t n_labels,
                       const double *buckets, size_t n_buckets, struct metric_family **ret,
                       struct err *e)
{
    if (!name_ok(name, true)) {
        return err_setx(e, -EINVAL, "metric name '%s' is not [a-zA-Z_:][a-zA-Z0-9_:]*",
                        name ? name : "");
    }
    if (type == METRIC_COUNTER && !has_suffix(name, "_total")) {
        return err_setx(e, -EINVAL, "counter '%s' must end in _total", name);
    }
    if (type != METRIC_COUNTER && has_suffix(name, "_total")) {
        return err_setx(e, -EINVAL, "'%s' ends in _total but is not a counter", name);
    }
    if (n_labels > METRICS_MAX_LABELS) {
        return err_setx(e, -EINVAL, "'%s': more than %d labels", name, METRICS_MAX_LABELS);
    }
    for (size_t i = 0; i < n_labels; i++) {
        const char *l = labels[i];
        if (!name_ok(l, false) || strncmp(l, "__", 2) == 0) {
            return err_setx(e, -EINVAL, "'%s': bad label name '%s'", name, l ? l : "");
        }
        if (type == METRIC_HISTOGRAM && strcmp(l, "le") == 0) {
            return err_setx(e, -EINVAL, "'%s': a histogram cannot have a label 'le'", name);
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(labels[j], l) == 0) {
                return err_setx(e, -EINVAL, "'%s': label '%s' twice", name, l);
            }
        }
    }
    if (type == METRIC_HISTOGRAM) {
        if (n_buckets < 1 || n_buckets > METRICS_MAX_BUCKETS) {
            return err_setx(e, -EINVAL, "'%s': a histogram needs 1 to %d buckets", name,
                            METRICS_MAX_BUCKETS);
        }
        for (size_t i = 0; i < n_buckets; i++) {
            if (!isfinite(buckets[i]) || (i > 0 && !(buckets[i] > buckets[i - 1]))) {
                return err_setx(e, -EINVAL, "'%s': buckets must be finite and strictly increasing",
                                name);
            }
        }
    } else if (n_buckets != 0) {
        return err_setx(e, -EINVAL, "'%s': only histograms have buckets", name);
    }
    for (struct metric_family *f = r->families; f; f = f->next) {
        if (strcmp(f->name, name) == 0) {
            return err_setx(e, -EEXIST, "metric '%s' is registered twice", name);
        }
    }
    struct metric_family *f = xcalloc(1, sizeof(*f));
    f->type = type;
    f->name = xstrdup(name);
    f->help = xstrdup(help ? help : "");
    f->n_labels = n_labels;
    for (size_t i = 0; i < n_labels; i++) {
        f->labels[i] = xstrdup(labels[i]);
    }
    f->n_buckets = n_buckets;
    if (n_buckets) {
        memcpy(f->buckets, buckets, n_buckets * sizeof(*buckets));
    }
    SLIST_APPEND(r->families, r->tail, f, next);
    if (n_labels == 0) {
        (void)metrics_series(f, NULL);
    }
    *ret = f;
    return 0;
}

/* Copies v into out (METRICS_MAX_VALUE_LEN + 1 bytes), cut at a character boundary, with
 * invalid UTF-8 replaced by '?'. NULL is "other". */
static void value_clean(const char *v, char *out)
{
    const unsigned char *s = (const unsigned char *)(v ? v : "other");
    size_t n = strlen((const char *)s);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_valid_seq(s + i, n - i);
        if (o + (len ? len : 1) > METRICS_MAX_VALUE_LEN) {
            break;
        }
        if (len == 0) {
            out[o++] = '?';
            i++;
            continue;
        }
        memcpy(out + o, s + i, len);
        o += len;
        i += len;
    }
    out[o] = '\0';
}

/* values: the family's n_labels cleaned values, or NULL for none. */
static struct metric_series *series_new(struct metric_family *f,
                                        char (*values)[METRICS_MAX_VALUE_LEN + 1])
{
    struct metric_series *s = xcalloc(1, sizeof(*s));
    s->fam = f;
    for (size_t i = 0; i < f->n_labels; i++) {
        s->values[i] = xstrdup(values[i]);
    }
    if (f->type == METRIC_HISTOGRAM) {
        s->counts = xcalloc(f->n_buckets + 1, sizeof(*s->counts));
    }
    return s;
}

static bool series_match(const struct metric_series *s, char (*values)[METRICS_MAX_VALUE_LEN + 1])
{
    for (size_t i = 0; i < s->fam->n_labels; i++) {
        if (strcmp(s->values[i], values[i]) != 0) {
            return false;
        }
    }
    return true;
}

static void series_append(struct metric_family *f, struct metric_series *s)
{
    SLIST_APPEND(f->series, f->tail, s, next);
    f->n_series++;
}

struct metric_series *metrics_series(struct metric_family *f, const char *const *values)
{
    char clean[METRICS_MAX_LABELS][METRICS_MAX_VALUE_LEN + 1];
    if (f->n_labels == 0) {
        if (!f->series) {
            series_append(f, series_new(f, clean));
        }
        return f->series;
    }
    for (size_t i = 0; i < f->n_labels; i++) {
        value_clean(values ? values[i] : NULL, clean[i]);
    }
    for (struct metric_series *s = f->series; s; s = s->next) {
        if (series_match(s, clean)) {
            return s;
        }
    }
    if (f->n_series >= METRICS_MAX_SERIES) {
        if (!f->overflow) {
            for (size_t i = 0; i < f->n_labels; i++) {
                value_clean(NULL, clean[i]);
            }
            f->overflow = series_new(f, clean);
            log_warn("metric=%s limit=%d msg=\"too many label values, counting the rest as "
                     "other\"",
                     f->name, METRICS_MAX_SERIES);
        }
        return f->overflow;
    }
    struct metric_series *s = series_new(f, clean);
    series_append(f, s);
    return s;
}

void metrics_inc(struct metric_series *s)
{
    metrics_add(s, 1.0);
}

void metrics_add(struct metric_series *s, double v)
{
    if (!s || s->fam->type == METRIC_HISTOGRAM) {
        return;
    }
    if (s->fam->type == METRIC_COUNTER && !(v >= 0)) {
        return;
    }
    atomic_add_double(&s->bits, v);
}

void metrics_set(struct metric_series *s, double v)
{
    if (!s || s->fam->type == METRIC_HISTOGRAM) {
        return;
    }
    __atomic_store_n(&s->bits, double_to_bits(v), __ATOMIC_RELAXED);
}

void metrics_observe(struct metric_series *s, double v)
{
    if (!s || s->fam->type != METRIC_HISTOGRAM || isnan(v)) {
        return;
    }
    const struct metric_family *f = s->fam;
    size_t i = 0;
    /* Few buckets: a linear scan is as fast as a binary search and simpler. */
    while (i < f->n_buckets && v > f->buckets[i]) {
        i++;
    }
    __atomic_fetch_add(&s->counts[i], 1, __ATOMIC_RELAXED);
    atomic_add_double(&s->bits, v);
}

double metrics_value(const struct metric_series *s)
{
    if (!s) {
        return 0;
    }
    if (s->fam->type != METRIC_HISTOGRAM) {
        return bits_to_double(__atomic_load_n(&s->bits, __ATOMIC_RELAXED));
    }
    uint64_t n = 0;
    for (size_t i = 0; i <= s->fam->n_buckets; i++) {
        n += __atomic_load_n(&s->counts[i], __ATOMIC_RELAXED);
    }
    return (double)n;
}

/* ---- Rendering -------------------------------------------------------------------------- */

struct buf {
    char *p;
    size_t len;
    size_t cap;
};

static void buf_reserve(struct buf *b, size_t more)
{
    if (b->len + more + 1 <= b->cap) {
        return;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more + 1) {
        cap *= 2;
    }
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

static void buf_put(struct buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(struct buf *b, const char *s)
{
    buf_put(b, s, strlen(s));
}

static void buf_char(struct buf *b, char c)
{
    buf_put(b, &c, 1);
}

/* A float as Prometheus parses it: integers without exponent, otherwise the shortest
 * representation that reads back to the same double, and +Inf, -Inf, NaN. */
static void fmt_double(char *out, size_t size, double v)
{
    if (isnan(v)) {
        str_copy(out, "NaN", size);
    } else if (isinf(v)) {
        str_copy(out, v > 0 ? "+Inf" : "-Inf", size);
    } else if (v == trunc(v) && fabs(v) < 1e15) {
        (void)snprintf(out, size, "%.0f", v == 0 ? 0.0 : v);
    } else {
        for (int prec = 6; prec <= 17; prec++) {
            (void)snprintf(out, size, "%.*g", prec, v);
            if (strtod(out, NULL) == v) {
                break;
            }
        }
    }
}

static void buf_double(struct buf *b, double v)
{
    char tmp[40];
    fmt_double(tmp, sizeof(tmp), v);
    buf_str(b, tmp);
}

static void buf_u64(struct buf *b, uint64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v);
    buf_put(b, tmp, (size_t)n);
}

/* HELP text escapes backslash and newline; label values also escape the double quote. */
static void buf_escaped(struct buf *b, const char *s, bool quote)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\\') {
            buf_str(b, "\\\\");
        } else if (*p == '\n') {
            buf_str(b, "\\n");
        } else if (quote && *p == '"') {
            buf_str(b, "\\\"");
        } else {
            buf_char(b, *p);
        }
    }
}

/* name{l1="v1",l2="v2"[,le="x"]} with the separating space. */
static void buf_sample_name(struct buf *b, const struct metric_family *f, const char *suffix,
                            const struct metric_series *s, const char *le)
{
    buf_str(b, f->name);
    buf_str(b, suffix);
    if (f->n_labels > 0 || le) {
        buf_char(b, '{');
        for (size_t i = 0; i < f->n_labels; i++) {
            if (i > 0) {
                buf_char(b, ',');
            }
            buf_str(b, f->labels[i]);
            buf_str(b, "=\"");
            buf_escaped(b, s->values[i], true);
            buf_char(b, '"');
        }
        if (le) {
            buf_str(b, f->n_labels ? ",le=\"" : "le=\"");
            buf_str(b, le);
            buf_char(b, '"');
        }
        buf_char(b, '}');
    }
    buf_char(b, ' ');
}

static void render_series(struct buf *b, const struct metric_family *f,
                          const struct metric_series *s)
{
    if (f->type != METRIC_HISTOGRAM) {
        buf_sample_name(b, f, "", s, NULL);
        buf_double(b, bits_to_double(__atomic_load_n(&s->bits, __ATOMIC_RELAXED)));
        buf_char(b, '\n');
        return;
    }
    /* Read each count once: cumulative buckets, +Inf and _count then agree even while
     * another thread observes. */
    uint64_t cum = 0;
    char le[40];
    for (size_t i = 0; i <= f->n_buckets; i++) {
        cum += __atomic_load_n(&s->counts[i], __ATOMIC_RELAXED);
        if (i < f->n_buckets) {
            fmt_double(le, sizeof(le), f->buckets[i]);
        } else {
            str_copy(le, "+Inf", sizeof(le));
        }
        buf_sample_name(b, f, "_bucket", s, le);
        buf_u64(b, cum);
        buf_char(b, '\n');
    }
    buf_sample_name(b, f, "_sum", s, NULL);
    buf_double(b, bits_to_double(__atomic_load_n(&s->bits, __ATOMIC_RELAXED)));
    buf_char(b, '\n');
    buf_sample_name(b, f, "_count", s, NULL);
    buf_u64(b, cum);
    buf_char(b, '\n');
}

static const char *type_name(enum metric_type t)
{
    switch (t) {
    case METRIC_COUNTER:
        return "counter";
    case METRIC_GAUGE:
        return "gauge";
    case METRIC_HISTOGRAM:
        return "histogram";
    }
    return "untyped";
}

int metrics_render(struct metric_registry *r, char **ret, size_t *ret_len)
{
    if (r->collect) {
        r->collect(r->collect_ud);
    }
    struct buf b = {NULL, 0, 0};
    buf_reserve(&b, 0);
    b.p[0] = '\0';
    for (const struct metric_family *f = r->families; f; f = f->next) {
        buf_str(&b, "# HELP ");
        buf_str(&b, f->name);
        buf_char(&b, ' ');
        buf_escaped(&b, f->help, false);
        buf_str(&b, "\n# TYPE ");
        buf_str(&b, f->name);
        buf_char(&b, ' ');
        buf_str(&b, type_name(f->type));
        buf_char(&b, '\n');
        for (const struct metric_series *s = f->series; s; s = s->next) {
            render_series(&b, f, s);
        }
        if (f->overflow) {
            render_series(&b, f, f->overflow);
        }
    }
    *ret_len = b.len;
    *ret = b.p;
    return 0;
}

/* ---- sbxd's series ---------------------------------------------------------------------- */

static const char *const task_statuses[] = {"exited",       "signaled", "timeout",
                                            "output_limit", "oom",      "error"};
#define N_STATUSES ARRAY_SIZE(task_statuses)

/* Error kinds rpc.c and server.c report today; others are created on first sight. */
static const char *const rpc_error_kinds[] = {
    "malformed", "too_large", "limit", "busy", "bad_request", "unknown_pool", "unknown_method"};
/* Methods of the method tables today; methods added later are created on first sight. */
static const char *const rpc_methods[] = {"ping", "pools", "exec", "unknown"};
static const char *const proxy_outcomes[] = {"allowed", "denied", "limit", "error"};

/* Request to sandbox in hand, and request to task running: sub-millisecond when warm. */
static const double latency_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                         0.1,    0.25,  0.5,    1,     2.5,  5,     10};
/* Task run time: from a /bin/true to the longest timeouts. */
static const double duration_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                          2.5,   5,    10,    30,   60,  120,  300};
/* Sandbox creation: tens of milliseconds when healthy, seconds when the host is loaded. */
static const double create_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                        0.5,   1,    2.5,   5,    10,  30};
static const double audit_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                       0.025,  0.05,    0.1,    0.25,  0.5,    1,     5};

struct pool_series {
    const struct pool *pool;
    struct metric_series *tasks[N_STATUSES];
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
};

struct metrics {
    struct daemon *d;
    struct metric_registry *reg;
    struct pool_series *pools;
    size_t n_pools;
    struct metric_family *f_rpc_requests;
    struct metric_family *f_rpc_errors;
    struct metric_family *f_denied;
    struct metric_family *f_proxy;
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
            metrics_set(m->p_vsize, (double)size * (double)page);
            metrics_set(m->p_rss, (double)resident * (double)page);
        }
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
        metrics_set(m->p_cpu, cpu);
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
        metrics_set(m->p_fds, (double)(n > 0 ? n - 1 : 0)); /* not the directory's own fd */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        metrics_set(m->p_max_fds, rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
    }
}

static void collect(void *ud)
{
    struct metrics *m = ud;
    struct daemon *d = m->d;
    for (size_t i = 0; i < m->n_pools; i++) {
        struct pool_series *ps = &m->pools[i];
        const struct pool *p = ps->pool;
        metrics_set(ps->warm, p->n_state[SB_WARM]);
        metrics_set(ps->target, p->pc->warm);
        metrics_set(ps->creating, p->n_state[SB_CREATING]);
        metrics_set(ps->running, p->n_state[SB_BUSY]);
        metrics_set(ps->queued, p->n_queued);
        metrics_set(ps->max, p->pc->max);
        metrics_set(ps->create_failures, (double)p->failed);
        metrics_set(ps->cold_starts, (double)p->cold_starts);
        struct forkserver_stats zs = {0, 0, 0, false, 0};
        if (p->forkserver) {
            forkserver_get_stats(p->forkserver, &zs);
        }
        metrics_set(ps->fs_up, zs.pid > 0 ? 1 : 0);
        metrics_set(ps->fs_spawned, (double)zs.spawned);
        metrics_set(ps->fs_failures, (double)zs.failures);
    }
    uint32_t conns = 0;
    if (d->agents) {
        conns += server_connections(d->agents);
    }
    if (d->admin) {
        conns += server_connections(d->admin);
    }
    metrics_set(m->rpc_connections, conns);
    collect_process(m);
}

int metrics_new(struct daemon *d, struct metrics **ret, struct err *e)
{
    struct metrics *m = xcalloc(1, sizeof(*m));
    struct metric_family *f_tasks = NULL, *f_duration = NULL, *f_queue_wait = NULL, *f_start = NULL,
                         *f_out = NULL, *f_trunc = NULL, *f_denials = NULL, *f_warm = NULL,
                         *f_target = NULL, *f_creating = NULL, *f_running = NULL, *f_queued = NULL,
                         *f_max = NULL, *f_create = NULL, *f_create_fail = NULL, *f_cold = NULL,
                         *f_leaks = NULL, *f_conns = NULL, *f_tokens = NULL, *f_audit_batch = NULL,
                         *f_audit_queue = NULL, *f_rss = NULL, *f_vsize = NULL, *f_cpu = NULL,
                         *f_fds = NULL, *f_max_fds = NULL, *f_start_time = NULL, *f_build = NULL,
                         *f_fs_up = NULL, *f_fs_spawned = NULL, *f_fs_failures = NULL;
    /* clang-format off */
    /* One family per entry reads better than one field per line. */
    const struct family_def defs[] = {
        {&f_tasks, METRIC_COUNTER, "sbx_tasks_total", "Tasks finished, by pool and status.",
         {"pool", "status"}, 2, NULL, 0},
        {&f_duration, METRIC_HISTOGRAM, "sbx_task_duration_seconds",
         "Task run time, from the task being handed its sandbox to its exit or kill.",
         {"pool"}, 1, HIST(duration_buckets)},
        {&f_queue_wait, METRIC_HISTOGRAM, "sbx_task_queue_wait_seconds",
         "From the exec request to the task having a warm sandbox.", {"pool"}, 1,
         HIST(latency_buckets)},
        {&f_start, METRIC_HISTOGRAM, "sbx_task_start_seconds",
         "From the exec request to the sandbox's init reporting the task process forked.",
         {"pool"}, 1, HIST(latency_buckets)},
        {&f_out, METRIC_COUNTER, "sbx_output_bytes_total",
         "Task output bytes delivered to clients, by stream.", {"pool", "stream"}, 2, NULL, 0},
        {&f_trunc, METRIC_COUNTER, "sbx_output_truncated_total",
         "Tasks killed because their output reached the pool's cap.", {"pool"}, 1, NULL, 0},
        {&f_denials, METRIC_COUNTER, "sbx_seccomp_denials_total",
         "System calls denied by seccomp in finished tasks.", {"pool"}, 1, NULL, 0},
        {&f_warm, METRIC_GAUGE, "sbx_pool_warm", "Warm sandboxes ready for a task.", {"pool"},
         1, NULL, 0},
        {&f_target, METRIC_GAUGE, "sbx_pool_target", "Warm sandboxes the pool keeps ready.",
         {"pool"}, 1, NULL, 0},
        {&f_creating, METRIC_GAUGE, "sbx_pool_creating", "Sandboxes being created.",
         {"pool"}, 1, NULL, 0},
        {&f_running, METRIC_GAUGE, "sbx_pool_running", "Sandboxes running a task.", {"pool"},
         1, NULL, 0},
        {&f_queued, METRIC_GAUGE, "sbx_pool_queued", "Tasks waiting for a sandbox.", {"pool"},
         1, NULL, 0},
        {&f_max, METRIC_GAUGE, "sbx_pool_max", "Sandboxes the pool may have at once.",
         {"pool"}, 1, NULL, 0},
        {&f_create, METRIC_HISTOGRAM, "sbx_sandbox_create_seconds",
         "Sandbox creation, from its start to its init reporting ready.", {"pool"}, 1,
         HIST(create_buckets)},
        {&f_create_fail, METRIC_COUNTER, "sbx_sandbox_create_failures_total",
         "Sandbox creations that failed.", {"pool"}, 1, NULL, 0},
        {&f_cold, METRIC_COUNTER, "sbx_sandbox_cold_starts_total",
         "Tasks that had to wait for a sandbox to be created.", {"pool"}, 1, NULL, 0},
        {&f_fs_up, METRIC_GAUGE, "sbx_fork_server_up",
         "1 while the pool's fork server runs; 0 while none does (not started yet, lost, "
         "given up after failures, or fork_server: false).", {"pool"}, 1, NULL, 0},
        {&f_fs_spawned, METRIC_COUNTER, "sbx_fork_server_spawned_total",
         "Sandboxes forked by the pool's fork server.", {"pool"}, 1, NULL, 0},
        {&f_fs_failures, METRIC_COUNTER, "sbx_fork_server_failures_total",
         "Fork server starts that failed, and fork servers lost.", {"pool"}, 1, NULL, 0},
        {&f_leaks, METRIC_COUNTER, "sbx_sandbox_leaks_total",
         "Sandboxes or cgroups left behind that the reaper removed.", {NULL}, 0, NULL, 0},
        {&f_conns, METRIC_GAUGE, "sbx_rpc_connections",
         "Open connections on the agents' and admin sockets.", {NULL}, 0, NULL, 0},
        {&m->f_rpc_requests, METRIC_COUNTER, "sbx_rpc_requests_total",
         "RPC requests received, by method (unknown methods as \"unknown\").", {"method"}, 1,
         NULL, 0},
        {&m->f_rpc_errors, METRIC_COUNTER, "sbx_rpc_errors_total",
         "Protocol-level errors answered or counted, by kind.", {"kind"}, 1, NULL, 0},
        {&m->f_denied, METRIC_COUNTER, "sbx_denied_total", "Requests refused by policy.",
         {"reason"}, 1, NULL, 0},
        {&f_tokens, METRIC_GAUGE, "sbx_tokens_active", "Capability tokens currently valid.",
         {NULL}, 0, NULL, 0},
        {&m->f_proxy, METRIC_COUNTER, "sbx_proxy_requests_total",
         "Egress proxy requests, by profile and outcome.", {"profile", "outcome"}, 2, NULL, 0},
        {&f_audit_batch, METRIC_HISTOGRAM, "sbx_audit_batch_seconds",
         "Audit batch write time, from begin to commit.", {NULL}, 0, HIST(audit_buckets)},
        {&f_audit_queue, METRIC_GAUGE, "sbx_audit_queue_depth",
         "Audit events waiting to be written.", {NULL}, 0, NULL, 0},
        {&f_rss, METRIC_GAUGE, "process_resident_memory_bytes", "Resident memory size in bytes.",
         {NULL}, 0, NULL, 0},
        {&f_vsize, METRIC_GAUGE, "process_virtual_memory_bytes",
         "Virtual memory size in bytes.", {NULL}, 0, NULL, 0},
        {&f_cpu, METRIC_COUNTER, "process_cpu_seconds_total",
         "Total user and system CPU time spent in seconds.", {NULL}, 0, NULL, 0},
        {&f_fds, METRIC_GAUGE, "process_open_fds", "Number of open file descriptors.", {NULL},
         0, NULL, 0},
        {&f_max_fds, METRIC_GAUGE, "process_max_fds",
         "Maximum number of open file descriptors.", {NULL}, 0, NULL, 0},
        {&f_start_time, METRIC_GAUGE, "process_start_time_seconds",
         "Start time of the process since unix epoch in seconds.", {NULL}, 0, NULL, 0},
        {&f_build, METRIC_GAUGE, "sbx_build_info", "sbxd's version; the value is always 1.",
         {"version"}, 1, NULL, 0},
    };
    /* clang-format on */
    metrics_registry_new(&m->reg);
    m->d = d;
    for (size_t i = 0; i < ARRAY_SIZE(defs); i++) {
        const struct family_def *def = &defs[i];
        int r = metrics_family_new(m->reg, def->type, def->name, def->help, def->labels,
                                   def->n_labels, def->buckets, def->n_buckets, def->slot, e);
        if (r < 0) {
            metrics_free(m);
            return r;
        }
    }
    m->pools = xcalloc(d->n_pools ? d->n_pools : 1, sizeof(*m->pools));
    m->n_pools = d->n_pools;
    for (size_t i = 0; i < d->n_pools; i++) {
        struct pool_series *ps = &m->pools[i];
        const char *name = d->pools[i]->pc->name;
        const char *one[1] = {name};
        ps->pool = d->pools[i];
        for (size_t s = 0; s < N_STATUSES; s++) {
            const char *v[2] = {name, task_statuses[s]};
            ps->tasks[s] = metrics_series(f_tasks, v);
        }
        ps->duration = metrics_series(f_duration, one);
        ps->queue_wait = metrics_series(f_queue_wait, one);
        ps->start = metrics_series(f_start, one);
        const char *out[2] = {name, "stdout"}, *err[2] = {name, "stderr"};
        ps->out_stdout = metrics_series(f_out, out);
        ps->out_stderr = metrics_series(f_out, err);
        ps->truncated = metrics_series(f_trunc, one);
        ps->denials = metrics_series(f_denials, one);
        ps->warm = metrics_series(f_warm, one);
        ps->target = metrics_series(f_target, one);
        ps->creating = metrics_series(f_creating, one);
        ps->running = metrics_series(f_running, one);
        ps->queued = metrics_series(f_queued, one);
        ps->max = metrics_series(f_max, one);
        ps->create_seconds = metrics_series(f_create, one);
        ps->create_failures = metrics_series(f_create_fail, one);
        ps->cold_starts = metrics_series(f_cold, one);
        ps->fs_up = metrics_series(f_fs_up, one);
        ps->fs_spawned = metrics_series(f_fs_spawned, one);
        ps->fs_failures = metrics_series(f_fs_failures, one);
    }
    for (size_t i = 0; i < ARRAY_SIZE(rpc_methods); i++) {
        (void)metrics_series(m->f_rpc_requests, &rpc_methods[i]);
    }
    for (size_t i = 0; i < ARRAY_SIZE(rpc_error_kinds); i++) {
        (void)metrics_series(m->f_rpc_errors, &rpc_error_kinds[i]);
    }
    m->leaks = metrics_series(f_leaks, NULL);
    m->rpc_connections = metrics_series(f_conns, NULL);
    m->tokens_active = metrics_series(f_tokens, NULL);
    m->audit_batch = metrics_series(f_audit_batch, NULL);
    m->audit_queue = metrics_series(f_audit_queue, NULL);
    m->p_rss = metrics_series(f_rss, NULL);
    m->p_vsize = metrics_series(f_vsize, NULL);
    m->p_cpu = metrics_series(f_cpu, NULL);
    m->p_fds = metrics_series(f_fds, NULL);
    m->p_max_fds = metrics_series(f_max_fds, NULL);
    m->p_start = metrics_series(f_start_time, NULL);
    const char *version[1] = {SBX_VERSION};
    metrics_set(metrics_series(f_build, version), 1);
    metrics_set(m->p_start, process_start_time());
    metrics_registry_on_collect(m->reg, collect, m);
    *ret = m;
    return 0;
}

struct metrics *metrics_free(struct metrics *m)
{
    if (!m) {
        return NULL;
    }
    m->reg = metrics_registry_free(m->reg);
    free(m->pools);
    free(m);
    return NULL;
}

int metrics_render_daemon(struct metrics *m, char **ret, size_t *ret_len)
{
    return metrics_render(m->reg, ret, ret_len);
}

void metrics_http(void *ud, const struct http_request *req, struct http_response *res)
{
    struct daemon *d = ud;
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    bool is_metrics = strcmp(req->path, "/metrics") == 0;
    bool is_health = strcmp(req->path, "/healthz") == 0;
    if (!is_metrics && !is_health) {
        res->status = 404;
        res->body = xstrdup("not found\n");
        res->body_len = strlen(res->body);
        return;
    }
    if (!get) {
        res->status = 405;
        res->allow = "GET, HEAD";
        res->body = xstrdup("method not allowed\n");
        res->body_len = strlen(res->body);
        return;
    }
    if (is_health) {
        res->status = d->draining ? 503 : 200;
        res->body = xstrdup(d->draining ? "draining\n" : "ok\n");
        res->body_len = strlen(res->body);
        return;
    }
    if (!d->metrics) {
        res->status = 503;
        res->body = xstrdup("metrics are not set up\n");
        res->body_len = strlen(res->body);
        return;
    }
    res->status = 200;
    res->content_type = "text/plain; version=0.0.4; charset=utf-8";
    (void)metrics_render_daemon(d->metrics, &res->body, &res->body_len);
}

/* ---- Hooks ------------------------------------------------------------------------------- */

/* The series of a pool, or NULL. A handful of pools: a scan of pointers. */
static struct pool_series *pool_series_of(struct metrics *m, const struct pool *p)
{
    if (!m) {
        return NULL;
    }
    for (size_t i = 0; i < m->n_pools; i++) {
        if (m->pools[i].pool == p) {
            return &m->pools[i];
        }
    }
    return NULL;
}

static double seconds_between(uint64_t from_ns, uint64_t to_ns)
{
    return from_ns && to_ns > from_ns ? (double)(to_ns - from_ns) / 1e9 : 0.0;
}

void metrics_task_start(const struct task *t)
{
    struct pool_series *ps = pool_series_of(t->d->metrics, t->pool);
    if (ps) {
        metrics_observe(ps->queue_wait, seconds_between(t->t_request_ns, t->t_start_ns));
    }
}

void metrics_task_running(const struct task *t)
{
    struct pool_series *ps = pool_series_of(t->d->metrics, t->pool);
    if (ps) {
        metrics_observe(ps->start, seconds_between(t->t_request_ns, now_ns()));
    }
}

void metrics_task_done(const struct task *t, const char *status)
{
    struct pool_series *ps = pool_series_of(t->d->metrics, t->pool);
    if (!ps) {
        return;
    }
    size_t s = 0;
    while (s < N_STATUSES && strcmp(task_statuses[s], status) != 0) {
        s++;
    }
    if (s == N_STATUSES) {
        s = N_STATUSES - 1; /* "error": the status set stays bounded */
    }
    metrics_inc(ps->tasks[s]);
    if (t->t_start_ns) {
        uint64_t end = t->t_exit_ns ? t->t_exit_ns : now_ns();
        metrics_observe(ps->duration, seconds_between(t->t_start_ns, end));
    }
    metrics_add(ps->out_stdout, (double)t->out_bytes);
    metrics_add(ps->out_stderr, (double)t->err_bytes);
    if (t->cap.tripped) {
        metrics_inc(ps->truncated);
    }
    if (t->seccomp_denials != CTL_DENIALS_UNKNOWN) {
        metrics_add(ps->denials, t->seccomp_denials);
    }
}

void metrics_sandbox_ready(const struct sandbox *sb)
{
    struct pool_series *ps = pool_series_of(sb->d->metrics, sb->pool);
    if (ps) {
        metrics_observe(ps->create_seconds, seconds_between(sb->created_ns, sb->ready_ns));
    }
}

void metrics_rpc_request(struct daemon *d, const char *method)
{
    if (d->metrics) {
        const char *v[1] = {method ? method : "unknown"};
        metrics_inc(metrics_series(d->metrics->f_rpc_requests, v));
    }
}

void metrics_rpc_error(struct daemon *d, const char *kind)
{
    if (d->metrics) {
        const char *v[1] = {kind};
        metrics_inc(metrics_series(d->metrics->f_rpc_errors, v));
    }
}

void metrics_denied(struct daemon *d, const char *reason)
{
    if (d->metrics) {
        const char *v[1] = {reason};
        metrics_inc(metrics_series(d->metrics->f_denied, v));
    }
}

void metrics_tokens_active(struct daemon *d, uint64_t n)
{
    if (d->metrics) {
        metrics_set(d->metrics->tokens_active, (double)n);
    }
}

void metrics_proxy_request(struct daemon *d, const char *profile, const char *outcome)
{
    if (!d->metrics) {
        return;
    }
    const char *o = proxy_outcomes[ARRAY_SIZE(proxy_outcomes) - 1];
    for (size_t i = 0; i < ARRAY_SIZE(proxy_outcomes); i++) {
        if (strcmp(proxy_outcomes[i], outcome) == 0) {
            o = proxy_outcomes[i];
        }
    }
    const char *v[2] = {profile, o};
    metrics_inc(metrics_series(d->metrics->f_proxy, v));
}

void metrics_sandbox_leaks(struct daemon *d, uint64_t n)
{
    if (d->metrics) {
        metrics_add(d->metrics->leaks, (double)n);
    }
}

void metrics_audit_batch(struct metrics *m, double seconds)
{
    if (m) {
        metrics_observe(m->audit_batch, seconds);
    }
}

void metrics_audit_queue_depth(struct metrics *m, uint64_t n)
{
    if (m) {
        metrics_set(m->audit_queue, (double)n);
    }
}
