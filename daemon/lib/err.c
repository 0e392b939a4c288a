/* SPDX-License-Identifier: MIT */
/* struct err helpers and the errno name table. No allocation, no logging. */
#include "lib/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const struct {
    int code;
    const char *name;
} names[] = {
    {EPERM, "EPERM"},
    {ENOENT, "ENOENT"},
    {ESRCH, "ESRCH"},
    {EINTR, "EINTR"},
    {EIO, "EIO"},
    {E2BIG, "E2BIG"},
    {ENOEXEC, "ENOEXEC"},
    {EBADF, "EBADF"},
    {ECHILD, "ECHILD"},
    {EAGAIN, "EAGAIN"},
    {ENOMEM, "ENOMEM"},
    {EACCES, "EACCES"},
    {EFAULT, "EFAULT"},
    {EBUSY, "EBUSY"},
    {EEXIST, "EEXIST"},
    {ENODEV, "ENODEV"},
    {ENOTDIR, "ENOTDIR"},
    {EISDIR, "EISDIR"},
    {EINVAL, "EINVAL"},
    {ENFILE, "ENFILE"},
    {EMFILE, "EMFILE"},
    {EFBIG, "EFBIG"},
    {ENOSPC, "ENOSPC"},
    {EROFS, "EROFS"},
    {EPIPE, "EPIPE"},
    {ERANGE, "ERANGE"},
    {ENAMETOOLONG, "ENAMETOOLONG"},
    {ENOSYS, "ENOSYS"},
    {ENOTEMPTY, "ENOTEMPTY"},
    {ELOOP, "ELOOP"},
    {ENODATA, "ENODATA"},
    {ETIME, "ETIME"},
    {EPROTO, "EPROTO"},
    {EBADMSG, "EBADMSG"},
    {EOVERFLOW, "EOVERFLOW"},
    {EMSGSIZE, "EMSGSIZE"},
    {ENOTSOCK, "ENOTSOCK"},
    {EADDRINUSE, "EADDRINUSE"},
    {ECONNRESET, "ECONNRESET"},
    {ENOBUFS, "ENOBUFS"},
    {ETIMEDOUT, "ETIMEDOUT"},
    {ECONNREFUSED, "ECONNREFUSED"},
    {ECANCELED, "ECANCELED"},
    {EOPNOTSUPP, "EOPNOTSUPP"},
    {ENOTCONN, "ENOTCONN"},
    {ESHUTDOWN, "ESHUTDOWN"},
    {EDQUOT, "EDQUOT"},
    {ENOTSUP, "ENOTSUP"},
};

const char *err_name(int r)
{
    /* Any int: INT_MIN (from a peer sbxd does not trust) has no positive counterpart. */
    long v = r < 0 ? -(long)r : (long)r;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (names[i].code == v) {
            return names[i].name;
        }
    }
    return "E?";
}

int err_set(struct err *e, int r, const char *fmt, ...)
{
    if (!e) {
        return r;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    if (r != 0 && n >= 0 && (size_t)n < sizeof(e->msg)) {
        (void)snprintf(e->msg + n, sizeof(e->msg) - (size_t)n, ": %s", err_name(r));
    }
    e->code = r;
    return r;
}

int err_setx(struct err *e, int r, const char *fmt, ...)
{
    if (!e) {
        return r;
    }
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    e->code = r;
    return r;
}

/* Appends src to dst (of size ERR_MSG_MAX) at offset o, truncating; returns the new offset. */
static size_t append(char *dst, size_t o, const char *src)
{
    while (*src && o + 1 < ERR_MSG_MAX) {
        dst[o++] = *src++;
    }
    dst[o] = '\0';
    return o;
}

int err_prefix(struct err *e, int r, const char *fmt, ...)
{
    if (!e) {
        return r;
    }
    char head[ERR_MSG_MAX];
    char old[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(head, sizeof(head), fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof(old));
    size_t o = append(e->msg, 0, head);
    if (old[0] != '\0') {
        o = append(e->msg, o, ": ");
        (void)append(e->msg, o, old);
    } else if (r != 0) {
        o = append(e->msg, o, ": ");
        (void)append(e->msg, o, err_name(r));
    }
    e->code = r;
    return r;
}

int err_set_reported(struct err *e, int r, const char *what, const char *msg)
{
    if (!e) {
        return r;
    }
    const char *name = err_name(r);
    size_t ml = strlen(msg), nl = strlen(name);
    bool named = ml >= nl && strcmp(msg + ml - nl, name) == 0;
    size_t o = append(e->msg, 0, what);
    if (ml > 0) {
        o = append(e->msg, o, ": ");
        o = append(e->msg, o, msg);
    }
    if (!named) {
        o = append(e->msg, o, ": ");
        (void)append(e->msg, o, name);
    }
    e->code = r;
    return r;
}

const char *err_msg(const struct err *e)
{
    if (!e || e->msg[0] == '\0') {
        return "unknown error";
    }
    return e->msg;
}
