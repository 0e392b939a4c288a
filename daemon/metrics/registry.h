/* SPDX-License-Identifier: MIT */
#pragma once
/* A counter/gauge/histogram registry with labels, rendered in the Prometheus text exposition
 * format (version 0.0.4). It knows nothing of sbxd (metrics.c builds sbxd's series on it) and
 * is unit-tested alone.
 *
 * Threads: family and series creation and rendering run on the loop thread; value updates
 * are relaxed atomics, so they may run on any thread. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

enum metric_type {
    METRIC_COUNTER = 0,
    METRIC_GAUGE,
    METRIC_HISTOGRAM,
};

#define METRICS_MAX_LABELS 4
#define METRICS_MAX_BUCKETS 24
/* Series of one family at most. A new label combination beyond it is counted in one
 * overflow series whose every label value is "other", so a bug that feeds unbounded values
 * costs one series, not memory without end. */
#define METRICS_MAX_SERIES 256
/* Longest label value kept; longer ones are cut (at a UTF-8 boundary). */
#define METRICS_MAX_VALUE_LEN 128

struct metric_registry;
struct metric_family;
struct metric_series;

/* Called by registry_render before anything is written, to refresh gauges that mirror state
 * read at scrape time. Loop thread. */
typedef void (*registry_collect_cb)(void *ud);

/* An empty registry. Returns 0 (xmalloc aborts on OOM). */
int registry_new(struct metric_registry **ret);
/* Frees the registry, its families and series. Accepts NULL; returns NULL. */
struct metric_registry *registry_free(struct metric_registry *r);
/* Sets the one collect callback (NULL clears it). */
void registry_on_collect(struct metric_registry *r, registry_collect_cb fn, void *ud);

/* Registers a family. name follows Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*) and a counter's
 * name ends in "_total"; labels (n_labels <= METRICS_MAX_LABELS) are [a-zA-Z_][a-zA-Z0-9_]*,
 * not "__"-prefixed, distinct, and never "le" on a histogram. buckets (histograms only,
 * 1..METRICS_MAX_BUCKETS finite upper bounds, strictly increasing; +Inf is implicit) are
 * copied. A family without labels gets its one series at once, so it renders as 0.
 * Returns 0, -EINVAL (e says what is wrong) or -EEXIST (the name is taken). *ret is owned by
 * the registry. */
int registry_family_new(struct metric_registry *r, enum metric_type type, const char *name,
                        const char *help, const char *const *labels, size_t n_labels,
                        const double *buckets, size_t n_buckets, struct metric_family **ret,
                        struct err *e);
/* The series of f for the given label values (n_labels strings, in the family's label order;
 * NULL for a family without labels). Creates it on first sight (one allocation), so callers
 * on a hot path look series up once and keep the pointer. Bytes that are not valid UTF-8 are
 * replaced by '?'. Never NULL; owned by the registry. Loop thread. */
struct metric_series *registry_series(struct metric_family *f, const char *const *values);

/* Value updates; s may be NULL (no-op), so hooks work when metrics are off. Any thread.
 * Counters ignore negative and NaN increments. */
void registry_inc(struct metric_series *s);
void registry_add(struct metric_series *s, double v);
/* Sets a gauge, or a counter that mirrors a monotonic count kept elsewhere. */
void registry_set(struct metric_series *s, double v);
/* Observes one value into a histogram. */
void registry_observe(struct metric_series *s, double v);
/* The current value of a counter or gauge, or the count of a histogram. For tests. */
double registry_value(const struct metric_series *s);

/* Runs the collect callback, then renders every family in registration order (HELP, TYPE,
 * then each series in creation order; histograms as cumulative _bucket{le} lines ending with
 * le="+Inf", then _sum and _count) into a new NUL-terminated buffer. The caller frees
 * *ret. Returns 0. Loop thread. */
int registry_render(struct metric_registry *r, char **ret, size_t *ret_len);
