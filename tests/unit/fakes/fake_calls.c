/* SPDX-License-Identifier: MIT */
/* The fakes' call log (fakes.h), and what the tests compare with it. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

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

void fake_expectf(const char *fmt, ...)
{
    char want[sizeof(log_buf)];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(want, sizeof(want), fmt, ap);
    va_end(ap);
    assert_string_equal(fake_calls(), want);
    fake_calls_reset();
}

void fake_expect_none(void)
{
    assert_string_equal(fake_calls(), "");
}

int fake_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        n += de->d_name[0] != '.';
    }
    closedir(d);
    return n - 1; /* the DIR's own */
}
