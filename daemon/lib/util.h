/* SPDX-License-Identifier: MIT */
#pragma once
/* Scoped cleanup, ownership hand-over, fd helpers, time and bounded parsing.
 * Everything here is CHILD-SAFE except where a comment says otherwise. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#define RETRY_EINTR(expr)                                                                          \
    ({                                                                                             \
        typeof(expr) _r;                                                                           \
        do {                                                                                       \
            _r = (expr);                                                                           \
        } while (_r < 0 && errno == EINTR);                                                        \
        _r;                                                                                        \
    })

#define scoped(fn) __attribute__((cleanup(fn)))
#define scoped_free scoped(util_freep)
#define scoped_close scoped(util_closep)

/* Returns *p and resets it to NULL: the value changes owner. */
#define take_ptr(p)                                                                                \
    ({                                                                                             \
        typeof(*(p)) _v = *(p);                                                                    \
        *(p) = NULL;                                                                               \
        _v;                                                                                        \
    })
/* Returns *fd and resets it to -1. */
#define take_fd(fd)                                                                                \
    ({                                                                                             \
        int _fd = *(fd);                                                                           \
        *(fd) = -1;                                                                                \
        _fd;                                                                                       \
    })

void util_freep(void *p);
void util_closep(int *fd);

/* Closes fd if >= 0 (never retried) and returns -1. CHILD-SAFE. */
int fd_close(int fd);
/* Sets or clears O_NONBLOCK. Returns 0 or -errno. */
int fd_set_nonblock(int fd, bool on);
/* Writes all of buf to a blocking fd, retrying EINTR. Returns 0 or -errno. CHILD-SAFE. */
int fd_write_all(int fd, const void *buf, size_t len);
/* Reads a small file whole into buf (NUL-terminated). Returns length or -errno. */
ssize_t file_read_small(int dirfd, const char *path, char *buf, size_t size);
/* Writes a string in one write (a kernel file takes a value whole: a short write is -EIO).
 * Returns 0 or -errno. */
int fd_write_str(int fd, const char *s);
/* Writes a string to a file (O_WRONLY, no create), as fd_write_str. Returns 0 or -errno. */
int file_write_str(int dirfd, const char *path, const char *s);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);

/* Bounded parsing: whole-string unsigned decimal. Returns 0 or -EINVAL / -ERANGE. */
int parse_u64(const char *s, uint64_t *ret);
/* Size with optional K, M, G suffix (binary, with optional "i" and "B": 64M, 64MiB).
 * Returns 0 or -EINVAL / -ERANGE. */
int parse_size(const char *s, uint64_t *ret);
/* Duration: plain seconds (may be fractional) or with ms, s, m, h suffix. */
int parse_duration_ns(const char *s, uint64_t *ret);

/* Matches argv[*i] against "--name VALUE" or "--name=VALUE". Returns 1 with *ret set and *i
 * on the last word used, 0 when it is another option, -EINVAL when VALUE is missing. */
int parse_long_opt(int argc, char **argv, int *i, const char *name, const char **ret);
/* strlcpy semantics: always NUL-terminates, returns strlen(src). CHILD-SAFE. */
size_t str_copy(char *dst, const char *src, size_t size);
/* Lowercase hex of len bytes into out (2*len+1 bytes). */
void hex_encode(const void *buf, size_t len, char *out);
/* Length (1-4) of the valid UTF-8 sequence at s (n bytes available), or 0 when it is not
 * valid: truncated, overlong, a surrogate or past U+10FFFF. CHILD-SAFE. */
size_t utf8_valid_seq(const unsigned char *s, size_t n);

struct iovec;
/* The most fds fd_sendmsg attaches to one message. */
#define FD_SEND_MAX 16
/* sendmsg of iov with nfds (<= FD_SEND_MAX; 0 allowed) fds attached as SCM_RIGHTS, retrying
 * EINTR. Returns the bytes sent or -errno (-EINVAL for too many fds). CHILD-SAFE. */
ssize_t fd_sendmsg(int sock, const struct iovec *iov, size_t iovlen, const int *fds, size_t nfds,
                   int flags);
/* Receives one message of at most len bytes and up to nfds (<= FD_SEND_MAX) fds that may
 * come with it, CLOEXEC, into fds (*got of them), retrying EINTR. Anything off about the fds
 * (more than nfds, another kind of control message, a truncated message) sets *bad and
 * closes them all (*got 0). Returns the bytes received, 0 on EOF, or -errno. CHILD-SAFE. */
ssize_t fd_recv(int sock, void *buf, size_t len, int *fds, size_t nfds, size_t *got, bool *bad,
                int flags);
/* Receives one message of at most len bytes and the fd that may come with it (*fd, CLOEXEC;
 * -1 when none, or when anything about the fds was off: more than one, another kind of
 * control message, a truncated message; all are closed then), retrying EINTR. Returns the
 * bytes received, 0 on EOF, or -errno. */
ssize_t fd_recv_one(int sock, void *buf, size_t len, int *fd, int flags);
