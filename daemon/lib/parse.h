/* SPDX-License-Identifier: MIT */
#pragma once
/* Bounded parsing: whole strings or nothing, every overflow an error. */
#include <stdint.h>

/* Whole-string unsigned decimal. Returns 0 or -EINVAL / -ERANGE. */
int parse_u64(const char *s, uint64_t *ret);
/* Size with optional K, M, G suffix (binary, with optional "i" and "B": 64M, 64MiB).
 * Returns 0 or -EINVAL / -ERANGE. */
int parse_size(const char *s, uint64_t *ret);
/* Duration: plain seconds (may be fractional) or with ms, s, m, h suffix. */
int parse_duration_ns(const char *s, uint64_t *ret);

/* Matches argv[*i] against "--name VALUE" or "--name=VALUE". Returns 1 with *ret set and *i
 * on the last word used, 0 when it is another option, -EINVAL when VALUE is missing. */
int parse_long_opt(int argc, char **argv, int *i, const char *name, const char **ret);
