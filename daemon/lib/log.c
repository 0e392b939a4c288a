/* SPDX-License-Identifier: MIT */
/* logfmt lines on stderr, one write(2) per line so concurrent writers never interleave.
 * Task output never comes here; client strings are quoted through log_quote. */
#include "lib/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/err.h"

enum log_level log_max_level = LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_write(enum log_level lvl, const char *mod, int r, const char *fmt, ...)
{
    char line[2048];
    int saved = errno;
    int n = snprintf(line, sizeof(line), "level=%s mod=%s ", level_names[lvl], mod);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(line)) {
        int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        n = m < 0 ? n : n + m;
    }
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(line) - 32) {
        n = (int)sizeof(line) - 32;
    }
    if (r != 0) {
        n += snprintf(line + n, sizeof(line) - (size_t)n, " err=%s", err_name(r));
    }
    line[n++] = '\n';
    (void)!write(STDERR_FILENO, line, (size_t)n);
    errno = saved;
}

int log_parse_level(const char *s, enum log_level *ret)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *ret = (enum log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *log_quote(const char *s, char *buf, size_t size)
{
    size_t o = 0;
    if (size < 8) {
        if (size > 0) {
            buf[0] = '\0';
        }
        return buf;
    }
    buf[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (o + 8 >= size) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (*p == '"' || *p == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)*p;
        } else if (*p < 0x20 || *p == 0x7f) {
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", *p);
        } else {
            buf[o++] = (char)*p;
        }
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

void log_prog_verror(const char *prog, const char *fmt, va_list ap)
{
    (void)fprintf(stderr, "%s: ", prog);
    (void)vfprintf(stderr, fmt, ap);
    (void)fputc('\n', stderr);
}

void log_prog_error(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_prog_verror(prog, fmt, ap);
    va_end(ap);
}
