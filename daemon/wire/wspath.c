/* SPDX-License-Identifier: MIT */
/* Client paths and collect patterns under a sandbox's /work: the one normal form sbxd opens
 * (relative to /work, no "." or ".." components, no empty ones) and the component-wise match
 * of a pattern. It reads only the bytes it is given; it never touches a file system, and it
 * is not what keeps sbxd inside /work (openat2's RESOLVE_BENEATH in sandbox/workspace.c is). */
#include "wire/wspath.h"

#include <errno.h>
#include <fnmatch.h>
#include <string.h>

#include "lib/util.h"

enum refusal {
    R_EMPTY,
    R_NUL,
    R_TOO_LONG,
    R_NO_ROOM,
    R_OUTSIDE,
    R_DOTDOT,
    R_COMPONENT,
    R_WORK,
    R_STARSTAR,
    R_COMPONENTS,
};

/* Each refusal's phrase, for a path and for a pattern. */
static const char *const refusal_why[][2] = {
    [R_EMPTY] = {"the path is empty", "the pattern is empty"},
    [R_NUL] = {"the path holds a NUL byte", "the pattern holds a NUL byte"},
    [R_TOO_LONG] = {"the path is longer than files_path_max",
                    "the pattern is longer than files_path_max"},
    [R_NO_ROOM] = {"the path does not fit its buffer", "the pattern does not fit its buffer"},
    [R_OUTSIDE] = {"the path is absolute but not under /work/",
                   "the pattern is absolute but not under /work/"},
    [R_DOTDOT] = {"the path has a '..' component", "the pattern has a '..' component"},
    [R_COMPONENT] = {"the path has a component over 255 bytes",
                     "the pattern has a component over 255 bytes"},
    [R_WORK] = {"the path names /work itself", "the pattern names /work itself"},
    [R_STARSTAR] = {"the path has '**' inside a component",
                    "the pattern has '**' inside a component (only a whole '**' component "
                    "matches directories)"},
    [R_COMPONENTS] = {"the path has too many components", "the pattern has too many components"},
};

static int refuse(enum refusal r, bool pattern, const char **why)
{
    if (why) {
        *why = refusal_why[r][pattern ? 1 : 0];
    }
    switch (r) {
    case R_TOO_LONG:
    case R_NO_ROOM:
    case R_COMPONENT:
        return -ENAMETOOLONG;
    default:
        return -EINVAL;
    }
}

static bool comp_is(const char *c, size_t n, const char *s)
{
    return n == strlen(s) && memcmp(c, s, n) == 0;
}

/* The next component of p[*i..len) (after any '/'), as *c and *n; false at the end. */
static bool next_component(const char *p, size_t len, size_t *i, const char **c, size_t *n)
{
    while (*i < len && p[*i] == '/') {
        (*i)++;
    }
    if (*i >= len) {
        return false;
    }
    size_t start = *i;
    while (*i < len && p[*i] != '/') {
        (*i)++;
    }
    *c = p + start;
    *n = *i - start;
    return true;
}

static int normalize(const char *p, size_t len, size_t max_len, char *out, size_t out_size,
                     bool pattern, bool root_ok, const char **why)
{
    if (len == 0) {
        return refuse(R_EMPTY, pattern, why);
    }
    if (memchr(p, '\0', len)) {
        return refuse(R_NUL, pattern, why);
    }
    if (len > max_len) {
        return refuse(R_TOO_LONG, pattern, why);
    }
    if (out_size < len + 1) {
        return refuse(R_NO_ROOM, pattern, why);
    }
    size_t i = 0;
    const char *c = NULL;
    size_t n = 0;
    if (p[0] == '/') {
        /* SECURITY: an absolute path is accepted only under /work/; "." components before
         * "work" change nothing, and ".." anywhere is refused below or here. */
        bool work = false;
        while (next_component(p, len, &i, &c, &n)) {
            if (comp_is(c, n, ".")) {
                continue;
            }
            work = comp_is(c, n, "work");
            break;
        }
        if (!work) {
            return refuse(R_OUTSIDE, pattern, why);
        }
    }
    size_t o = 0;
    size_t comps = 0;
    bool last_starstar = false;
    while (next_component(p, len, &i, &c, &n)) {
        if (comp_is(c, n, ".")) {
            continue;
        }
        if (comp_is(c, n, "..")) {
            return refuse(R_DOTDOT, pattern, why);
        }
        if (n > WSPATH_COMPONENT_MAX) {
            return refuse(R_COMPONENT, pattern, why);
        }
        bool starstar = comp_is(c, n, "**");
        if (pattern) {
            if (!starstar && memmem(c, n, "**", 2)) {
                return refuse(R_STARSTAR, pattern, why);
            }
            if (starstar && last_starstar) {
                continue;
            }
            if (++comps > WSPATH_PATTERN_COMPONENTS_MAX) {
                return refuse(R_COMPONENTS, pattern, why);
            }
        }
        last_starstar = starstar;
        if (o > 0) {
            out[o++] = '/';
        }
        memcpy(out + o, c, n);
        o += n;
    }
    if (o == 0 && !root_ok) {
        return refuse(R_WORK, pattern, why);
    }
    out[o] = '\0';
    if (why) {
        *why = NULL;
    }
    return 0;
}

int wspath_normalize(const char *path, size_t len, size_t max_len, char *out, size_t out_size,
                     const char **why)
{
    return normalize(path, len, max_len, out, out_size, false, false, why);
}

int wspath_normalize_dir(const char *path, size_t len, size_t max_len, char *out, size_t out_size,
                         const char **why)
{
    return normalize(path, len, max_len, out, out_size, false, true, why);
}

int wspath_pattern_normalize(const char *pat, size_t len, size_t max_len, char *out,
                             size_t out_size, const char **why)
{
    return normalize(pat, len, max_len, out, out_size, true, false, why);
}

struct comp {
    const char *p;
    size_t n;
};

/* Splits a normalized pattern into its components; -1 when it has too many. */
static int split(const char *pattern, struct comp *v)
{
    size_t len = strlen(pattern);
    size_t i = 0;
    int m = 0;
    const char *c = NULL;
    size_t n = 0;
    while (next_component(pattern, len, &i, &c, &n)) {
        if (m == WSPATH_PATTERN_COMPONENTS_MAX) {
            return -1;
        }
        v[m++] = (struct comp){c, n};
    }
    return m;
}

static bool comp_match(const struct comp *pc, const char *name)
{
    char pat[WSPATH_COMPONENT_MAX + 1];
    if (pc->n > WSPATH_COMPONENT_MAX) {
        return false;
    }
    memcpy(pat, pc->p, pc->n);
    pat[pc->n] = '\0';
    return fnmatch(pat, name, 0) == 0;
}

static bool is_starstar(const struct comp *pc)
{
    return comp_is(pc->p, pc->n, "**");
}

/* Adds to the set every state reachable through "**" components matching nothing. */
static void closure(const struct comp *v, int m, bool *set)
{
    for (int k = 0; k < m; k++) {
        if (set[k] && is_starstar(&v[k])) {
            set[k + 1] = true;
        }
    }
}

/* Runs the pattern's automaton over rel's components: states are positions in the pattern
 * (m is the end), "**" stays or moves on, any other component moves on when it matches one
 * path component. set ends as the states after the whole of rel; false when none is left. */
static bool run(const struct comp *v, int m, const char *rel, bool *set)
{
    bool next[WSPATH_PATTERN_COMPONENTS_MAX + 1];
    memset(set, 0, (size_t)(m + 1) * sizeof(*set));
    set[0] = true;
    closure(v, m, set);
    size_t len = strlen(rel);
    size_t i = 0;
    const char *c = NULL;
    size_t n = 0;
    while (next_component(rel, len, &i, &c, &n)) {
        char name[WSPATH_COMPONENT_MAX + 1];
        if (n > WSPATH_COMPONENT_MAX) {
            return false;
        }
        memcpy(name, c, n);
        name[n] = '\0';
        memset(next, 0, (size_t)(m + 1) * sizeof(*next));
        bool any = false;
        for (int k = 0; k < m; k++) {
            if (!set[k]) {
                continue;
            }
            if (is_starstar(&v[k])) {
                next[k] = any = true;
            } else if (comp_match(&v[k], name)) {
                next[k + 1] = any = true;
            }
        }
        if (!any) {
            return false;
        }
        memcpy(set, next, (size_t)(m + 1) * sizeof(*set));
        closure(v, m, set);
    }
    return true;
}

bool wspath_match(const char *pattern, const char *rel)
{
    struct comp v[WSPATH_PATTERN_COMPONENTS_MAX];
    bool set[WSPATH_PATTERN_COMPONENTS_MAX + 1];
    int m = split(pattern, v);
    if (m <= 0 || rel[0] == '\0') {
        return false;
    }
    return run(v, m, rel, set) && set[m];
}

bool wspath_match_dir(const char *pattern, const char *dir)
{
    struct comp v[WSPATH_PATTERN_COMPONENTS_MAX];
    bool set[WSPATH_PATTERN_COMPONENTS_MAX + 1];
    int m = split(pattern, v);
    if (m <= 0 || !run(v, m, dir, set)) {
        return false;
    }
    /* A state before the end consumes at least one more component: a path under dir. */
    for (int k = 0; k < m; k++) {
        if (set[k]) {
            return true;
        }
    }
    return false;
}
