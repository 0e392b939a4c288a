/* SPDX-License-Identifier: MIT */
/* Named counters for sbx-load: a bounded table keyed by sanitized names, so that whatever
 * status or error code sbxd sends, the table neither grows nor lets bytes that need
 * escaping reach the JSON report. */
#include "counters.h"

#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "lib/util.h"

void counters_add(struct counters *c, const char *prefix, const char *name, size_t len)
{
    char key[COUNTERS_NAME];
    size_t k = str_copy(key, prefix, sizeof(key));

    if (k >= sizeof(key)) {
        k = sizeof(key) - 1;
    }
    for (size_t i = 0; i < len && k + 1 < sizeof(key); i++) {
        char ch = name[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
        key[k++] = ok ? ch : '?';
    }
    key[k] = '\0';
    if (k == 0) {
        (void)str_copy(key, "empty", sizeof(key));
    }
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->v[i].name, key) == 0) {
            c->v[i].n++;
            return;
        }
    }
    if (c->n + 1 < COUNTERS_MAX) {
        (void)str_copy(c->v[c->n].name, key, sizeof(c->v[c->n].name));
        c->v[c->n].n = 1;
        c->n++;
        return;
    }
    /* The last entry is reserved for everything else. */
    struct counter *other = &c->v[COUNTERS_MAX - 1];
    if (c->n < COUNTERS_MAX) {
        (void)str_copy(other->name, "other", sizeof(other->name));
        other->n = 0;
        c->n = COUNTERS_MAX;
    }
    other->n++;
}

void counters_add_cstr(struct counters *c, const char *name)
{
    counters_add(c, "", name, strlen(name));
}

uint64_t counters_get(const struct counters *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->v[i].name, name) == 0) {
            return c->v[i].n;
        }
    }
    return 0;
}

uint64_t counters_total(const struct counters *c)
{
    uint64_t t = 0;
    for (size_t i = 0; i < c->n; i++) {
        t += c->v[i].n;
    }
    return t;
}

void counters_print_json(const struct counters *c, FILE *f)
{
    (void)fputc('{', f);
    for (size_t i = 0; i < c->n; i++) {
        (void)fprintf(f, "%s\"%s\": %" PRIu64, i ? ", " : "", c->v[i].name, c->v[i].n);
    }
    (void)fputc('}', f);
}

void counters_print_text(const struct counters *c, FILE *f)
{
    if (c->n == 0) {
        (void)fputs(" none", f);
    }
    for (size_t i = 0; i < c->n; i++) {
        (void)fprintf(f, " %s %" PRIu64, c->v[i].name, c->v[i].n);
    }
    (void)fputc('\n', f);
}
