/* SPDX-License-Identifier: MIT */
#pragma once
/* sbx-load scenarios: a YAML file of weighted task kinds (pool, argv, stdin, timeout) and
 * the result each must get. sbx-load picks a kind per task by weight and counts every
 * result that differs from its expectation as an error "mismatch". */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

#define SCENARIO_MAX_ENTRIES 64
#define SCENARIO_MAX_ARGV 64
#define SCENARIO_MAX_STDIN (64u << 20) /* stdin_bytes and inline stdin, each */
#define SCENARIO_STATUS_MAX 24

struct scenario_entry {
    char *name;    /* "name:", else "entry<N>" */
    double weight; /* > 0 */
    char *pool;    /* NULL: the daemon's default */
    char **argv;   /* NULL-terminated */
    size_t argc;
    double timeout_s; /* 0: the pool's default */
    char *stdin_data; /* inline text or the generated document; NULL: no stdin */
    size_t stdin_len;
    char expect_status[SCENARIO_STATUS_MAX]; /* "" when not checked */
    bool expect_has_code;
    int64_t expect_code;
};

struct scenario {
    struct scenario_entry *v;
    size_t n;
    double total_weight;
};

/* Reads and checks the scenario at path. Format:
 *   tasks:
 *     - name: trivial            (optional)
 *       weight: 10               (> 0, default 1)
 *       pool: python             (optional)
 *       argv: [python3, -c, pass]
 *       timeout: 0.5             (seconds or 500ms; optional)
 *       stdin: "text"            (optional inline stdin) or
 *       stdin_bytes: 1MiB        (generated; stdin_format: json (a valid JSON array) or
 *                                 bytes (default))
 *       expect: {status: exited, exit_code: 0}
 * Returns 0, or -EINVAL/-ENOENT/... with e naming the file, line and field. */
int scenario_load(const char *path, struct scenario *ret, struct err *e);
/* Picks an entry index by weight from *rng (xorshift state, nonzero; advanced). */
size_t scenario_pick(const struct scenario *s, uint64_t *rng);
/* True when a result (status, and exit_code when has_code) meets the entry's expectation. */
bool scenario_matches(const struct scenario_entry *x, const char *status, size_t status_len,
                      bool has_code, int64_t code);
/* Frees everything scenario_load allocated; s is left empty. */
void scenario_free(struct scenario *s);
