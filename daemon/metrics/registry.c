/* SPDX-License-Identifier: MIT */
/* The metrics registry: families, labelled series, atomic value updates and the Prometheus
 * text rendering. It knows nothing of sbxd; it never does I/O, and after a series exists its
 * updates never allocate. */
#define LOG_MOD "metrics"
#include "metrics/registry.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/list.h"
#include "lib/log.h"
#include "lib/util.h"

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
    registry_collect_cb collect;
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

int registry_new(struct metric_registry **ret)
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

struct metric_registry *registry_free(struct metric_registry *r)
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

void registry_on_collect(struct metric_registry *r, registry_collect_cb fn, void *ud)
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

int registry_family_new(struct metric_registry *r, enum metric_type type, const char *name,
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
        (void)registry_series(f, NULL);
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
        size_t len = str_utf8_valid_seq(s + i, n - i);
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

struct metric_series *registry_series(struct metric_family *f, const char *const *values)
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

void registry_inc(struct metric_series *s)
{
    registry_add(s, 1.0);
}

void registry_add(struct metric_series *s, double v)
{
    if (!s || s->fam->type == METRIC_HISTOGRAM) {
        return;
    }
    if (s->fam->type == METRIC_COUNTER && !(v >= 0)) {
        return;
    }
    atomic_add_double(&s->bits, v);
}

void registry_set(struct metric_series *s, double v)
{
    if (!s || s->fam->type == METRIC_HISTOGRAM) {
        return;
    }
    __atomic_store_n(&s->bits, double_to_bits(v), __ATOMIC_RELAXED);
}

void registry_observe(struct metric_series *s, double v)
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

double registry_value(const struct metric_series *s)
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

/* The text goes into an uncapped lib/buf, whose appends cannot fail then. */
static void render_str(struct buf *b, const char *s)
{
    (void)buf_puts(b, s);
}

static void render_char(struct buf *b, char c)
{
    (void)buf_append(b, &c, 1);
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

static void render_double(struct buf *b, double v)
{
    char tmp[40];
    fmt_double(tmp, sizeof(tmp), v);
    render_str(b, tmp);
}

static void render_u64(struct buf *b, uint64_t v)
{
    (void)buf_printf(b, "%llu", (unsigned long long)v);
}

/* HELP text escapes backslash and newline; label values also escape the double quote. */
static void render_escaped(struct buf *b, const char *s, bool quote)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\\') {
            render_str(b, "\\\\");
        } else if (*p == '\n') {
            render_str(b, "\\n");
        } else if (quote && *p == '"') {
            render_str(b, "\\\"");
        } else {
            render_char(b, *p);
        }
    }
}

/* name{l1="v1",l2="v2"[,le="x"]} with the separating space. */
static void render_sample_name(struct buf *b, const struct metric_family *f, const char *suffix,
                               const struct metric_series *s, const char *le)
{
    render_str(b, f->name);
    render_str(b, suffix);
    if (f->n_labels > 0 || le) {
        render_char(b, '{');
        for (size_t i = 0; i < f->n_labels; i++) {
            if (i > 0) {
                render_char(b, ',');
            }
            render_str(b, f->labels[i]);
            render_str(b, "=\"");
            render_escaped(b, s->values[i], true);
            render_char(b, '"');
        }
        if (le) {
            render_str(b, f->n_labels ? ",le=\"" : "le=\"");
            render_str(b, le);
            render_char(b, '"');
        }
        render_char(b, '}');
    }
    render_char(b, ' ');
}

static void render_series(struct buf *b, const struct metric_family *f,
                          const struct metric_series *s)
{
    if (f->type != METRIC_HISTOGRAM) {
        render_sample_name(b, f, "", s, NULL);
        render_double(b, bits_to_double(__atomic_load_n(&s->bits, __ATOMIC_RELAXED)));
        render_char(b, '\n');
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
        render_sample_name(b, f, "_bucket", s, le);
        render_u64(b, cum);
        render_char(b, '\n');
    }
    render_sample_name(b, f, "_sum", s, NULL);
    render_double(b, bits_to_double(__atomic_load_n(&s->bits, __ATOMIC_RELAXED)));
    render_char(b, '\n');
    render_sample_name(b, f, "_count", s, NULL);
    render_u64(b, cum);
    render_char(b, '\n');
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

int registry_render(struct metric_registry *r, char **ret, size_t *ret_len)
{
    if (r->collect) {
        r->collect(r->collect_ud);
    }
    /* One allocation of 4 KiB holds a small registry's text; growth doubles it. */
    struct buf b = BUF_INIT;
    (void)buf_reserve(&b, 4095);
    for (const struct metric_family *f = r->families; f; f = f->next) {
        render_str(&b, "# HELP ");
        render_str(&b, f->name);
        render_char(&b, ' ');
        render_escaped(&b, f->help, false);
        render_str(&b, "\n# TYPE ");
        render_str(&b, f->name);
        render_char(&b, ' ');
        render_str(&b, type_name(f->type));
        render_char(&b, '\n');
        for (const struct metric_series *s = f->series; s; s = s->next) {
            render_series(&b, f, s);
        }
        if (f->overflow) {
            render_series(&b, f, f->overflow);
        }
    }
    *ret = buf_steal(&b, ret_len);
    return 0;
}
