/* SPDX-License-Identifier: MIT */
/* Bounded parsing of numbers, sizes, durations and long options. Nothing here allocates. */
#include "lib/parse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
