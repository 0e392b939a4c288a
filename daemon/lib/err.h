/* SPDX-License-Identifier: MIT */
#pragma once
/* struct err: a fixed buffer for a human-readable failure. Never allocates, so it is
 * CHILD-SAFE and usable under OOM. Every function accepts e == NULL. */
#include <stddef.h>

#define ERR_MSG_MAX 512

struct err {
    int code; /* negative errno, 0 when unset */
    char msg[ERR_MSG_MAX];
};

#define ERR_INIT                                                                                   \
    {                                                                                              \
        0,                                                                                         \
        {                                                                                          \
            0                                                                                      \
        }                                                                                          \
    }

/* Sets e to "<fmt>: <ERRNAME>" (the errno name only when r is a known errno) and returns r. */
int err_set(struct err *e, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Sets e to exactly the formatted message, without an errno name, and returns r. */
int err_setx(struct err *e, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prepends "<fmt>: " to e's message (or sets it when empty) and returns r. */
int err_prefix(struct err *e, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Sets e to "<what>: <msg>: <ERRNAME>" for a failure another process reported as a message
 * with its code r beside it, and returns r. The name is left out when msg ends with it
 * already (err_set's messages do), so that it appears once; an empty msg is left out. */
int err_set_reported(struct err *e, int r, const char *what, const char *msg);
/* The symbolic name of a negative or positive errno ("EINVAL"), or "E?" for unknown. */
const char *err_name(int r);
/* e's message, or a generic one when e is NULL or empty. */
const char *err_msg(const struct err *e);
