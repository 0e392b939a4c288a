/* SPDX-License-Identifier: MIT */
/* The gaps recorded by audit.pruned events, loaded for verify and checked against the jumps
 * in seq it meets. It trusts nothing in the file: malformed records are skipped (the jump
 * they would explain is then reported), and a record only counts for gaps before it. */
#include "audit/audit_gaps.h"

#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "audit/audit.h"
#include "lib/alloc.h"

struct gap {
    uint64_t from, to;
    char hash[AUDIT_HASH_HEX];
};

struct audit_gaps {
    struct gap *v;
    size_t n, cap;
    size_t i; /* gaps ending before the walk's position are behind it */
};

static int gap_cmp(const void *x, const void *y)
{
    const struct gap *a = x, *b = y;
    if (a->from != b->from) {
        return a->from < b->from ? -1 : 1;
    }
    return a->to < b->to ? -1 : (a->to > b->to);
}

int audit_gaps_load(struct sqlite3 *db, struct audit_gaps **ret, struct err *e)
{
    sqlite3_stmt *st = NULL;
    /* CASE: json_each fails on malformed JSON, which a tampered row may hold. */
    if (sqlite3_prepare_v2(db,
                           "SELECT e.seq, json_extract(g.value, '$[0]'), "
                           "json_extract(g.value, '$[1]'), json_extract(g.value, '$[2]') "
                           "FROM events e, json_each(CASE WHEN json_valid(e.fields) THEN "
                           "e.fields ELSE '{}' END, '$.gaps') g WHERE e.type = 'audit.pruned'",
                           -1, &st, NULL) != SQLITE_OK) {
        return err_setx(e, -EIO, "audit: verify: gaps: %s", sqlite3_errmsg(db));
    }
    struct audit_gaps *g = xcalloc(1, sizeof(*g));
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t at = sqlite3_column_int64(st, 0);
        int64_t from = sqlite3_column_int64(st, 1), to = sqlite3_column_int64(st, 2);
        const char *h = (const char *)sqlite3_column_text(st, 3);
        if (from <= 0 || to < from || to >= at || !h || strlen(h) != AUDIT_HASH_HEX - 1) {
            continue;
        }
        if (g->n == g->cap) {
            g->cap = g->cap ? 2 * g->cap : 64;
            g->v = xrealloc(g->v, g->cap * sizeof(*g->v));
        }
        struct gap *x = &g->v[g->n++];
        x->from = (uint64_t)from;
        x->to = (uint64_t)to;
        memcpy(x->hash, h, AUDIT_HASH_HEX);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        audit_gaps_free(g);
        return err_setx(e, -EIO, "audit: verify: gaps: %s", sqlite3_errmsg(db));
    }
    if (g->n) {
        qsort(g->v, g->n, sizeof(*g->v), gap_cmp);
    }
    *ret = g;
    return 0;
}

struct audit_gaps *audit_gaps_free(struct audit_gaps *g)
{
    if (g) {
        free(g->v);
        free(g);
    }
    return NULL;
}

bool audit_gaps_cover(struct audit_gaps *g, uint64_t from, uint64_t to, const char *next_prev,
                      size_t next_prev_len)
{
    if (!g) {
        return false;
    }
    while (g->i < g->n && g->v[g->i].to < from) {
        g->i++;
    }
    uint64_t cur = from;
    bool linked = false;
    /* Sorted by from: once a gap starts after cur, none later can fill the hole. */
    for (size_t j = g->i; j < g->n && g->v[j].from <= to; j++) {
        const struct gap *x = &g->v[j];
        if (x->from <= cur && x->to >= cur) {
            cur = x->to + 1;
        }
        if (x->to == to && next_prev && next_prev_len == AUDIT_HASH_HEX - 1 &&
            memcmp(x->hash, next_prev, next_prev_len) == 0) {
            linked = true;
        }
    }
    return cur > to && linked;
}
