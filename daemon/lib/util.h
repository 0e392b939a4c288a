/* SPDX-License-Identifier: MIT */
#pragma once
/* The macros every file uses: scoped cleanup, ownership hand-over, ARRAY_SIZE, container_of,
 * RETRY_EINTR. It includes the helpers that were util.c's (fd.h, file.h, parse.h, str.h,
 * clock.h), so that its includers see them as before. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/fd.h"
#include "lib/file.h"
#include "lib/parse.h"
#include "lib/str.h"

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

/* scoped_free's and scoped_close's cleanups; util_closep is CHILD-SAFE. */
void util_freep(void *p);
void util_closep(int *fd);
