/* SPDX-License-Identifier: MIT */
#pragma once
/* fd helpers: close, O_NONBLOCK, whole writes, and fds passed as SCM_RIGHTS. Everything here
 * is CHILD-SAFE except where a comment says otherwise. */
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Closes fd if >= 0 (never retried) and returns -1. CHILD-SAFE. */
int fd_close(int fd);
/* Sets or clears O_NONBLOCK. Returns 0 or -errno. */
int fd_set_nonblock(int fd, bool on);
/* Writes all of buf to a blocking fd, retrying EINTR. Returns 0 or -errno. CHILD-SAFE. */
int fd_write_all(int fd, const void *buf, size_t len);
/* Writes a string in one write (a kernel file takes a value whole: a short write is -EIO).
 * Returns 0 or -errno. */
int fd_write_str(int fd, const char *s);

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
