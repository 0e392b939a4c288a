/* SPDX-License-Identifier: MIT */
/* Small helpers shared by every binary: scoped cleanup, fds, time, bounded parsing.
 * Nothing here allocates except util_freep's free(). */
#include "lib/util.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "lib/sys.h"

void util_freep(void *p)
{
    free(*(void **)p);
}

void util_closep(int *fd)
{
    *fd = fd_close(*fd);
}

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

ssize_t file_read_small(int dirfd, const char *path, char *buf, size_t size)
{
    scoped_close int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    size_t off = 0;
    while (off + 1 < size) {
        ssize_t n = RETRY_EINTR(read(fd, buf + off, size - 1 - off));
        if (n < 0) {
            return -errno;
        }
        if (n == 0) {
            break;
        }
        off += (size_t)n;
    }
    buf[off] = '\0';
    return (ssize_t)off;
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

int file_write_str(int dirfd, const char *path, const char *s)
{
    scoped_close int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd_write_str(fd, s);
}

uint64_t now_ns(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int parse_u64(const char *s, uint64_t *ret)
{
    uint64_t v = 0;
    if (!s || !*s) {
        return -EINVAL;
    }
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') {
            return -EINVAL;
        }
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return -ERANGE;
        }
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

int parse_size(const char *s, uint64_t *ret)
{
    char num[32];
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9') {
        n++;
    }
    if (n == 0 || n >= sizeof(num)) {
        return -EINVAL;
    }
    memcpy(num, s, n);
    num[n] = '\0';
    uint64_t v, mult = 1;
    int r = parse_u64(num, &v);
    if (r < 0) {
        return r;
    }
    const char *suf = s + n;
    if (*suf == 'K' || *suf == 'k') {
        mult = 1ULL << 10;
    } else if (*suf == 'M' || *suf == 'm') {
        mult = 1ULL << 20;
    } else if (*suf == 'G' || *suf == 'g') {
        mult = 1ULL << 30;
    } else if (*suf == 'B' && suf[1] == '\0') {
        suf++;
    } else if (*suf != '\0') {
        return -EINVAL;
    }
    if (mult > 1) {
        suf++;
        if (*suf == 'i') {
            suf++;
        }
        if (*suf == 'B') {
            suf++;
        }
    }
    if (*suf != '\0') {
        return -EINVAL;
    }
    if (v > UINT64_MAX / mult) {
        return -ERANGE;
    }
    *ret = v * mult;
    return 0;
}

int parse_duration_ns(const char *s, uint64_t *ret)
{
    char *end = NULL;
    if (!s || !*s || *s == '-' || *s == '+') {
        return -EINVAL;
    }
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || !isfinite(v) || v < 0) {
        return -EINVAL;
    }
    double mult = 1e9;
    if (strcmp(end, "ms") == 0) {
        mult = 1e6;
    } else if (strcmp(end, "s") == 0 || *end == '\0') {
        mult = 1e9;
    } else if (strcmp(end, "m") == 0) {
        mult = 60e9;
    } else if (strcmp(end, "h") == 0) {
        mult = 3600e9;
    } else {
        return -EINVAL;
    }
    double ns = v * mult;
    if (ns > 1e18) {
        return -ERANGE;
    }
    *ret = (uint64_t)ns;
    return 0;
}

int parse_long_opt(int argc, char **argv, int *i, const char *name, const char **ret)
{
    const char *a = argv[*i];
    size_t n = strlen(name);

    if (strncmp(a, name, n) != 0) {
        return 0;
    }
    if (a[n] == '=') {
        *ret = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') {
        return 0;
    }
    if (*i + 1 >= argc) {
        return -EINVAL;
    }
    *i += 1;
    *ret = argv[*i];
    return 1;
}

size_t str_copy(char *dst, const char *src, size_t size)
{
    size_t len = strlen(src);
    if (size > 0) {
        size_t n = len < size - 1 ? len : size - 1;
        memcpy(dst, src, n);
        dst[n] = '\0';
    }
    return len;
}

void hex_encode(const void *buf, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * len] = '\0';
}

size_t utf8_valid_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (len > n) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    /* Overlong forms, surrogates and code points past U+10FFFF. */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return len;
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
