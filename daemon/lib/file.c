/* SPDX-License-Identifier: MIT */
/* Small files read and written whole, by path under a directory fd. Nothing here allocates. */
#include "lib/file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "lib/fd.h"
#include "lib/util.h"

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

int file_write_str(int dirfd, const char *path, const char *s)
{
    scoped_close int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd_write_str(fd, s);
}
