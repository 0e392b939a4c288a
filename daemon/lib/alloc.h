/* SPDX-License-Identifier: MIT */
#pragma once
/* The xmalloc family: abort on OOM, so callers check client-controlled sizes against a
 * configured limit first. sbxd links jemalloc, which replaces malloc; alloc_stats reads it.
 * Not CHILD-SAFE. */
#include <stddef.h>
#include <stdint.h>

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Allocator statistics; fields are 0 when the allocator does not report them. */
struct alloc_stats {
    uint64_t allocated;
    uint64_t resident;
};
void alloc_get_stats(struct alloc_stats *ret);
