/* SPDX-License-Identifier: MIT */
/* fd helpers: close, O_NONBLOCK, whole writes, and SCM_RIGHTS messages. Nothing here
 * allocates. */
#include "lib/fd.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/sys.h"
#include "lib/util.h"

int fd_close(int fd)
{
    if (fd >= 0) {
        (void)sys_close(fd);
    }
    return -1;
}

int fd_set_nonblock(int fd, bool on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) {
        return -errno;
    }
    int nfl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
    if (nfl != fl && fcntl(fd, F_SETFL, nfl) < 0) {
        return -errno;
    }
    return 0;
}

int fd_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = RETRY_EINTR(write(fd, p, len));
        if (n < 0) {
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int fd_write_str(int fd, const char *s)
{
    size_t len = strlen(s);
    ssize_t n = RETRY_EINTR(write(fd, s, len));
    if (n < 0) {
        return -errno;
    }
    return (size_t)n == len ? 0 : -EIO;
}

ssize_t fd_sendmsg(int sock, const struct iovec *iov, size_t iovlen, const int *fds, size_t nfds,
                   int flags)
{
    union {
        char buf[CMSG_SPACE(FD_SEND_MAX * sizeof(int))];
        struct cmsghdr align;
    } cm;
    if (nfds > FD_SEND_MAX) {
        return -EINVAL;
    }
    struct msghdr mh;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = (struct iovec *)iov;
    mh.msg_iovlen = iovlen;
    if (nfds > 0) {
        memset(&cm, 0, sizeof(cm));
        mh.msg_control = cm.buf;
        mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    return sys_sendmsg(sock, &mh, flags);
}

ssize_t fd_recv(int sock, void *buf, size_t len, int *fds, size_t nfds, size_t *got, bool *bad,
                int flags)
{
    union {
        char buf[CMSG_SPACE(FD_SEND_MAX * sizeof(int))];
        struct cmsghdr align;
    } cm;
    *got = 0;
    *bad = false;
    if (nfds > FD_SEND_MAX) {
        return -EINVAL;
    }
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr mh;
    memset(&mh, 0, sizeof(mh));
    memset(&cm, 0, sizeof(cm));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cm.buf;
    mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
    ssize_t n = sys_recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
    if (n < 0) {
        return n;
    }
    *bad = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            *bad = true;
            continue;
        }
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*got < nfds) {
                fds[(*got)++] = fd;
            } else {
                (void)fd_close(fd);
                *bad = true;
            }
        }
    }
    if (*bad) {
        for (size_t i = 0; i < *got; i++) {
            fds[i] = fd_close(fds[i]);
        }
        *got = 0;
    }
    return n;
}

ssize_t fd_recv_one(int sock, void *buf, size_t len, int *fd, int flags)
{
    size_t got = 0;
    bool bad = false;
    ssize_t n = fd_recv(sock, buf, len, fd, 1, &got, &bad, flags);
    if (got == 0) {
        *fd = -1;
    }
    return n;
}
