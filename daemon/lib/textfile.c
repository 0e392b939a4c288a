/* SPDX-License-Identifier: MIT */
/* Whole-file reads of bounded text files for the parsers of config.c and seccomp.c. */
#include "lib/textfile.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/util.h"

int textfile_read(int dirfd, const char *path, const char *label, size_t max, char **ret,
                  size_t *ret_len, struct err *e)
{
    scoped_close int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;

    if (fd < 0) {
        return err_set(e, -errno, "%s: cannot open", label);
    }
    if (fstat(fd, &st) < 0) {
        return err_set(e, -errno, "%s: cannot stat", label);
    }
    if (!S_ISREG(st.st_mode)) {
        return err_setx(e, -EINVAL, "%s: not a regular file", label);
    }
    if ((uint64_t)st.st_size > max) {
        return err_setx(e, -EFBIG, "%s: larger than %zu bytes", label, max);
    }
    size_t cap = (size_t)st.st_size + 1;
    scoped_free char *buf = xmalloc(cap);
    size_t off = 0;
    for (;;) {
        ssize_t n = RETRY_EINTR(read(fd, buf + off, cap - off));
        if (n < 0) {
            return err_set(e, -errno, "%s: cannot read", label);
        }
        if (n == 0) {
            break;
        }
        off += (size_t)n;
        if (off == cap) {
            return err_setx(e, -EAGAIN, "%s: changed while being read", label);
        }
    }
    buf[off] = '\0';
    *ret_len = off;
    *ret = take_ptr(&buf);
    return 0;
}
