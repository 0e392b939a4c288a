/* SPDX-License-Identifier: MIT */
#pragma once
/* Named event counters for sbx-load's report (outcomes by status, errors by kind). A fixed
 * table: names come from sbxd, so they are sanitized and bounded, and names beyond the
 * table's size are pooled under "other". No allocation. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define COUNTERS_MAX 32
#define COUNTERS_NAME 40 /* bytes of a name, NUL included; longer names are cut */

struct counter {
    char name[COUNTERS_NAME];
    uint64_t n;
};

struct counters {
    struct counter v[COUNTERS_MAX]; /* in order of first appearance */
    size_t n;
};

/* Adds one to the counter named prefix + name[0..len). Bytes of name outside
 * [A-Za-z0-9_.-] become '?' (prefix is trusted); an empty name counts as "empty". */
void counters_add(struct counters *c, const char *prefix, const char *name, size_t len);
/* Adds one to the counter named by a C string. */
void counters_add_cstr(struct counters *c, const char *name);
/* The counter's value, 0 when absent. */
uint64_t counters_get(const struct counters *c, const char *name);
/* Sum of all counters. */
uint64_t counters_total(const struct counters *c);
/* {"name": n, ...} */
void counters_print_json(const struct counters *c, FILE *f);
/* " name n name n\n", or " none\n" when empty. */
void counters_print_text(const struct counters *c, FILE *f);
