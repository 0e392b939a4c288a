/* SPDX-License-Identifier: MIT */
/* Budgets of events recorded one by one per source (a connection's peer, a task's proxy),
 * and the counted summaries of the rest, written per interval from one loop timer, at the
 * audit's shutdown and when a source ends. It only builds events (audit.c queues them);
 * it never decides what a source is, nor refuses anything. */
#define LOG_MOD "audit"
#include "audit/audit_limit.h"

#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "audit/audit_impl.h"
#include "lib/alloc.h"
#include "lib/list.h"
#include "lib/log.h"
#include "lib/util.h"

#define DEFAULT_WINDOW_NS (3600ULL * 1000000000ULL)
#define DEFAULT_INTERVAL_NS (60ULL * 1000000000ULL)
#define LABEL_MAX 96

struct limit_kind {
    char name[AUDIT_LIMIT_KIND_MAX];
    uint64_t n;
};

struct audit_limit {
    struct audit *a; /* NULL once the audit closed */
    struct audit_limit *prev;
    struct audit_limit *next;
    char type[AUDIT_TYPE_MAX];
    char task[AUDIT_TASK_MAX];
    bool has_task;
    char label[LABEL_MAX];
    audit_limit_fill_cb fill;
    void *arg;
    uint64_t window; /* the budget window `used` counts in */
    uint32_t used;
    /* counted since the last summary */
    uint64_t count;
    int64_t first_ns;
    int64_t last_ns;
    struct limit_kind kinds[AUDIT_LIMIT_KINDS];
    uint64_t other;
};

static uint64_t window_ns(const struct audit *a)
{
    return a && a->o.budget_window_ns ? a->o.budget_window_ns : DEFAULT_WINDOW_NS;
}

static uint64_t interval_ns(const struct audit *a)
{
    return a && a->o.summary_interval_ns ? a->o.summary_interval_ns : DEFAULT_INTERVAL_NS;
}

struct audit_limit *audit_limit_new(struct audit *a, const char *type, const char *task_id,
                                    const char *label, audit_limit_fill_cb fill, void *arg)
{
    struct audit_limit *l = xcalloc(1, sizeof(*l));
    str_copy(l->type, type, sizeof(l->type));
    if (task_id) {
        str_copy(l->task, task_id, sizeof(l->task));
        l->has_task = true;
    }
    str_copy(l->label, label ? label : "", sizeof(l->label));
    l->fill = fill;
    l->arg = arg;
    l->window = UINT64_MAX;
    if (a) {
        l->a = a;
        DLIST_PUSH(a->limits_all, l);
    }
    return l;
}

bool audit_limit_take(struct audit_limit *l, uint32_t budget)
{
    if (!l) {
        return true;
    }
    uint64_t w = clock_now_ns() / window_ns(l->a);
    if (w != l->window) {
        l->window = w;
        l->used = 0;
    }
    if (l->used >= budget) {
        return false;
    }
    l->used++;
    return true;
}

void audit_limit_count(struct audit_limit *l, const char *kind)
{
    if (!l) {
        return;
    }
    int64_t now = audit_realtime_ns();
    if (l->count++ == 0) {
        l->first_ns = now;
        if (l->a) {
            audit_limit_arm(l->a);
        }
    }
    l->last_ns = now;
    if (!kind) {
        l->other++;
        return;
    }
    for (size_t i = 0; i < AUDIT_LIMIT_KINDS; i++) {
        struct limit_kind *k = &l->kinds[i];
        if (k->n == 0) {
            str_copy(k->name, kind, sizeof(k->name));
            k->n = 1;
            return;
        }
        if (strncmp(k->name, kind, sizeof(k->name) - 1) == 0) {
            k->n++;
            return;
        }
    }
    l->other++;
}

uint64_t audit_limit_pending(const struct audit_limit *l)
{
    return l ? l->count : 0;
}

void audit_limit_flush(struct audit_limit *l)
{
    if (!l || l->count == 0) {
        return;
    }
    int64_t span = l->last_ns > l->first_ns ? l->last_ns - l->first_ns : 0;
    log_warn("type=%s%s%s %s suppressed=%llu span_ms=%lld msg=\"events over their budget were "
             "only counted\"",
             l->type, l->has_task ? " task=" : "", l->has_task ? l->task : "", l->label,
             (unsigned long long)l->count, (long long)(span / 1000000));
    struct audit_ev *ev = audit_begin(l->a, l->type, l->has_task ? l->task : NULL);
    if (ev) {
        if (l->fill) {
            l->fill(l->arg, ev);
        }
        audit_u64(ev, "count", l->count);
        audit_object_begin(ev, "by");
        for (size_t i = 0; i < AUDIT_LIMIT_KINDS && l->kinds[i].n; i++) {
            audit_u64(ev, l->kinds[i].name, l->kinds[i].n);
        }
        if (l->other) {
            audit_u64(ev, "other", l->other);
        }
        audit_object_end(ev);
        audit_i64(ev, "first_ns", l->first_ns);
        audit_i64(ev, "last_ns", l->last_ns);
        audit_u64(ev, "span_ms", (uint64_t)(span / 1000000));
        audit_end(ev);
    }
    l->count = 0;
    l->other = 0;
    memset(l->kinds, 0, sizeof(l->kinds));
}

struct audit_limit *audit_limit_free(struct audit_limit *l)
{
    if (!l) {
        return NULL;
    }
    audit_limit_flush(l);
    if (l->a) {
        DLIST_REMOVE(l->a->limits_all, l);
    }
    free(l);
    return NULL;
}

void audit_limit_flush_all(struct audit *a)
{
    for (struct audit_limit *l = a->limits_all; l; l = l->next) {
        audit_limit_flush(l);
    }
}

void audit_limit_detach_all(struct audit *a)
{
    while (a->limits_all) {
        struct audit_limit *l = a->limits_all;
        DLIST_REMOVE(a->limits_all, l);
        l->a = NULL;
    }
}

static void limit_timer_cb(uv_timer_t *h)
{
    struct audit *a = container_of(h, struct audit, limit_timer);
    a->limit_timer_on = false;
    audit_limit_flush_all(a);
}

void audit_limit_arm(struct audit *a)
{
    /* loop_handles_open is written only by the loop (audit_shutdown): no lock to read it. */
    if (a->limit_timer_on || !a->loop_handles_open) {
        return;
    }
    a->limit_timer_on = true;
    uv_timer_start(&a->limit_timer, limit_timer_cb, interval_ns(a) / 1000000, 0);
}
