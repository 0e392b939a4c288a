/* SPDX-License-Identifier: MIT */
/* The string vector: geometric growth with room for the NULL terminator, copies or owned
 * strings, and the few operations its callers share. It knows nothing of sbx. */
#include "lib/strv.h"

#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"

#define STRV_MIN 8

void strv_push_owned(struct strv *sv, char *s)
{
    if (sv->n + 1 >= sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : STRV_MIN;
        sv->v = xrealloc(sv->v, cap * sizeof(*sv->v));
        sv->cap = cap;
    }
    sv->v[sv->n++] = s;
    sv->v[sv->n] = NULL;
}

void strv_push(struct strv *sv, const char *s)
{
    strv_push_owned(sv, xstrdup(s));
}

void strv_pushn(struct strv *sv, const char *s, size_t len)
{
    strv_push_owned(sv, xstrndup(s, len));
}

size_t strv_len(const struct strv *sv)
{
    return sv->n;
}

ssize_t strv_find(const struct strv *sv, const char *s)
{
    for (size_t i = 0; i < sv->n; i++) {
        if (strcmp(sv->v[i], s) == 0) {
            return (ssize_t)i;
        }
    }
    return -1;
}

bool strv_contains(const struct strv *sv, const char *s)
{
    return strv_find(sv, s) >= 0;
}

static int strv_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void strv_sort(struct strv *sv)
{
    if (sv->n > 1) {
        qsort(sv->v, sv->n, sizeof(*sv->v), strv_cmp);
    }
}

char **strv_steal(struct strv *sv, size_t *ret_n)
{
    char **v = sv->v;
    if (ret_n) {
        *ret_n = sv->n;
    }
    *sv = STRV_INIT;
    return v;
}

void strv_free(struct strv *sv)
{
    for (size_t i = 0; i < sv->n; i++) {
        free(sv->v[i]);
    }
    free(sv->v);
    *sv = STRV_INIT;
}
