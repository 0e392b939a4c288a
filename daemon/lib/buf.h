/* SPDX-License-Identifier: MIT */
#pragma once
/* One growable byte buffer: append bytes, formatted text or room to read into; reset,
 * steal, free. Memory comes from the xmalloc family, so running out aborts; a buffer that
 * holds client-controlled bytes is given a cap (max), and an append that would take it past
 * the cap fails with -ENOBUFS and leaves it as it was.
 *
 * Once anything was appended, p[len] is a NUL (not counted in len), so a text buffer is a
 * C string and binary data may contain NULs. The allocation counts that NUL: capacities are
 * powers of two from BUF_MIN, so a caller that knows its usual size reserves 2^k - 1 bytes
 * first and gets one allocation of 2^k. Not thread-safe; not CHILD-SAFE. */
#include <stdarg.h>
#include <stddef.h>

#define BUF_MIN 64

struct buf {
    char *p;    /* NULL until the first append or reserve */
    size_t len; /* bytes held, not counting the NUL */
    size_t cap; /* bytes allocated */
    size_t max; /* 0: no cap; else len never exceeds it */
};

/* An empty buffer with no cap, or with one. */
#define BUF_INIT ((struct buf){0})
#define BUF_INIT_MAX(m) ((struct buf){.max = (m)})

/* Makes room for n more bytes (and the NUL). Returns 0, or -ENOBUFS when len + n would pass
 * the cap (nothing changes then). */
int buf_reserve(struct buf *b, size_t n);
/* Appends n bytes of p (p may be NULL when n is 0). Returns 0 or -ENOBUFS as buf_reserve. */
int buf_append(struct buf *b, const void *p, size_t n);
/* Appends a C string without its NUL. Returns 0 or -ENOBUFS. */
int buf_puts(struct buf *b, const char *s);
/* Appends printf-formatted text. Returns 0, -ENOBUFS (nothing appended) or -EINVAL (a bad
 * format). */
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Appends n uninitialised bytes and returns where they start (valid until the next change of
 * b), or NULL when the cap refuses them: for fixed-size records. */
void *buf_push(struct buf *b, size_t n);

/* Free bytes after the data, not counting the NUL's: where a read may write, at buf_tail.
 * 0 before the first reserve. */
size_t buf_room(const struct buf *b);
/* The first free byte. */
char *buf_tail(const struct buf *b);
/* Counts n bytes written at buf_tail (n <= buf_room) as data and terminates them. */
void buf_commit(struct buf *b, size_t n);
/* Drops the first n bytes (n <= len), moving the rest to the front. */
void buf_consume(struct buf *b, size_t n);

/* Empties b but keeps its memory and its cap. */
void buf_reset(struct buf *b);
/* Hands the data over: a malloc'ed NUL-terminated string ("" for an empty buffer) the caller
 * frees, its length in *ret_len (may be NULL). b is empty afterwards (its cap kept). */
char *buf_steal(struct buf *b, size_t *ret_len);
/* Frees the memory; b is empty afterwards (its cap kept). Usable as scoped(buf_free). */
void buf_free(struct buf *b);
