/* SPDX-License-Identifier: MIT */
/* The growable byte buffer: geometric growth, a NUL after the data, an optional cap checked
 * before any growth. It never does I/O and knows nothing of sbx. */
#include "lib/buf.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"

int buf_reserve(struct buf *b, size_t n)
{
    /* SECURITY: the cap is checked before the size is computed or anything grows, so a
     * client-controlled n cannot make us allocate past it (or overflow). */
    if (b->max && (n > b->max || b->len > b->max - n)) {
        return -ENOBUFS;
    }
    if (n >= SIZE_MAX - b->len) {
        abort(); /* No buffer can be that large: the same policy as xmalloc. */
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap) {
        return 0;
    }
    size_t cap = b->cap ? b->cap : BUF_MIN;
    while (cap < need) {
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    }
    /* Doubling past the cap would only hold bytes the cap refuses. */
    if (b->max && b->max < SIZE_MAX && cap > b->max + 1) {
        cap = b->max + 1;
    }
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
    return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
    int r = buf_reserve(b, n);
    if (r < 0) {
        return r;
    }
    if (n > 0) {
        memcpy(b->p + b->len, p, n);
    }
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int buf_puts(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    /* Most texts fit what is free already: format once, and twice only to grow. */
    size_t room = b->cap ? b->cap - b->len : 0;
    int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, aq);
    va_end(aq);
    if (n < 0) {
        if (b->p) {
            b->p[b->len] = '\0';
        }
        return -EINVAL;
    }
    if ((size_t)n >= room) {
        int r = buf_reserve(b, (size_t)n);
        if (r < 0) {
            if (b->p) {
                b->p[b->len] = '\0';
            }
            return r;
        }
        (void)vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    } else if (b->max && b->len + (size_t)n > b->max) {
        b->p[b->len] = '\0';
        return -ENOBUFS;
    }
    b->len += (size_t)n;
    return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

void *buf_push(struct buf *b, size_t n)
{
    if (buf_reserve(b, n) < 0) {
        return NULL;
    }
    void *at = b->p + b->len;
    b->len += n;
    b->p[b->len] = '\0';
    return at;
}

size_t buf_room(const struct buf *b)
{
    return b->cap ? b->cap - b->len - 1 : 0;
}

char *buf_tail(const struct buf *b)
{
    return b->p ? b->p + b->len : NULL;
}

void buf_commit(struct buf *b, size_t n)
{
    assert(n <= buf_room(b));
    b->len += n;
    b->p[b->len] = '\0';
}

void buf_consume(struct buf *b, size_t n)
{
    assert(n <= b->len);
    if (n == 0) {
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = '\0';
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    if (b->p) {
        b->p[0] = '\0';
    }
}

char *buf_steal(struct buf *b, size_t *ret_len)
{
    if (!b->p) {
        b->p = xmalloc(1);
        b->p[0] = '\0';
    }
    char *p = b->p;
    if (ret_len) {
        *ret_len = b->len;
    }
    *b = BUF_INIT_MAX(b->max);
    return p;
}

void buf_free(struct buf *b)
{
    free(b->p);
    *b = BUF_INIT_MAX(b->max);
}
