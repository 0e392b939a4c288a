/* SPDX-License-Identifier: MIT */
#pragma once
/* Levelled one-line logfmt logging to stderr:
 *   level=warn mod=pool pool=python msg="refill failed, retrying" err=EAGAIN
 * Each .c file defines LOG_MOD before including this header. The formatted text is the
 * fields after mod=, written by the caller in logfmt (use log_quote for client strings).
 * Not CHILD-SAFE (stdio). The level is the only process-wide global besides the daemon. */
#include <stdarg.h>
#include <stddef.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern enum log_level log_max_level;

void log_write(enum log_level lvl, const char *mod, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Parses "error|warn|info|debug". Returns 0 or -EINVAL. */
int log_parse_level(const char *s, enum log_level *ret);
/* Quotes and escapes s for logfmt into buf (truncating long values with "..."); returns buf. */
const char *log_quote(const char *s, char *buf, size_t size);
/* A command-line tool's message for a person, not logfmt: "prog: text" and a newline on
 * stderr. For the client binaries (sbx, sbx-load). */
void log_prog_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_prog_verror(const char *prog, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#ifndef LOG_MOD
#define LOG_MOD "?"
#endif

#define log_at(lvl, r, ...)                                                                        \
    do {                                                                                           \
        if ((lvl) <= log_max_level) {                                                              \
            log_write((lvl), LOG_MOD, (r), __VA_ARGS__);                                           \
        }                                                                                          \
    } while (0)

#define log_error(...) log_at(LOG_ERROR, 0, __VA_ARGS__)
#define log_warn(...) log_at(LOG_WARN, 0, __VA_ARGS__)
#define log_info(...) log_at(LOG_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_at(LOG_DEBUG, 0, __VA_ARGS__)
/* The _errno variants append err=NAME and evaluate to r. */
#define log_error_errno(r, ...)                                                                    \
    ({                                                                                             \
        int _r = (r);                                                                              \
        log_at(LOG_ERROR, _r, __VA_ARGS__);                                                        \
        _r;                                                                                        \
    })
#define log_warn_errno(r, ...)                                                                     \
    ({                                                                                             \
        int _r = (r);                                                                              \
        log_at(LOG_WARN, _r, __VA_ARGS__);                                                         \
        _r;                                                                                        \
    })
#define log_info_errno(r, ...)                                                                     \
    ({                                                                                             \
        int _r = (r);                                                                              \
        log_at(LOG_INFO, _r, __VA_ARGS__);                                                         \
        _r;                                                                                        \
    })
#define log_debug_errno(r, ...)                                                                    \
    ({                                                                                             \
        int _r = (r);                                                                              \
        log_at(LOG_DEBUG, _r, __VA_ARGS__);                                                        \
        _r;                                                                                        \
    })
