/* SPDX-License-Identifier: MIT */
/* The fakes' call log (fakes.h). */
#include <stdarg.h>
#include <stdio.h>

#include "fakes.h"

static char log_buf[8192];
static size_t log_len;

void fake_call(const char *fmt, ...)
{
    if (log_len > 0 && log_len + 2 < sizeof(log_buf)) {
        log_buf[log_len++] = ';';
        log_buf[log_len++] = ' ';
        log_buf[log_len] = '\0';
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(log_buf + log_len, sizeof(log_buf) - log_len, fmt, ap);
    va_end(ap);
    if (n > 0) {
        log_len += (size_t)n;
        if (log_len >= sizeof(log_buf)) {
            log_len = sizeof(log_buf) - 1; /* truncated: a test's comparison fails */
        }
    }
}

const char *fake_calls(void)
{
    return log_buf;
}

void fake_calls_reset(void)
{
    log_len = 0;
    log_buf[0] = '\0';
}
