/* SPDX-License-Identifier: MIT */
/* Allocation that aborts on OOM, and allocator statistics from jemalloc when linked.
 * jemalloc's mallctl is looked up weakly so the client binaries can use libc malloc. */
#include "lib/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
    __attribute__((weak));

static void oom(size_t n)
{
    char msg[96];
    int len =
        snprintf(msg, sizeof(msg), "level=error mod=alloc msg=\"out of memory\" size=%zu\n", n);
    (void)!write(2, msg, (size_t)len);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        oom(n);
    }
    return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (!p) {
        oom(nmemb * size);
    }
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        oom(n);
    }
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = NULL;
    int r = vasprintf(&p, fmt, ap);
    va_end(ap);
    if (r < 0) {
        oom(0);
    }
    return p;
}

void alloc_get_stats(struct alloc_stats *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (!mallctl) {
        return;
    }
    uint64_t epoch = 1;
    size_t sz = sizeof(epoch);
    (void)mallctl("epoch", &epoch, &sz, &epoch, sz);
    size_t v = 0;
    sz = sizeof(v);
    if (mallctl("stats.allocated", &v, &sz, NULL, 0) == 0) {
        ret->allocated = v;
    }
    sz = sizeof(v);
    if (mallctl("stats.resident", &v, &sz, NULL, 0) == 0) {
        ret->resident = v;
    }
}
